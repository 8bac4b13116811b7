/* sweep_tree.c: the sweep directory as the sweep writes it: opened once,
 * held open, every write below it through the descriptors.
 *
 * Contract (core/util/outdir.h's rule, for the sweep's own tree): the sweep
 * directory is the tree's root (the user's choice, reached through links
 * or not); runs/, logs/, jobs/ and status/ below it are opened once,
 * component by component without following a link, and kept open for the
 * process's life, so that a directory swapped for a link after the start is
 * never written through by its name. Every file is written as a temporary
 * in its directory renamed over its name (a symbolic or hard link there is
 * replaced, never written through); a log appended to while a run goes on is
 * opened through the same descriptors and refused when it is a link of
 * either kind. sweep_tree_check, before every launch, says when one of the
 * held directories no longer is what its name leads to (exit 2): the runs a
 * sweep starts write below runs/ by its path.
 */
#include "bench/sweep/sweep_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const k_sub_names[SWEEP_NSUB] = {
    [SWEEP_ROOT] = "", [SWEEP_RUNS] = "runs", [SWEEP_LOGS] = "logs", [SWEEP_JOBS] = "jobs", [SWEEP_STATUS] = "status"};

static __attribute__((noreturn)) void die_rc(int rc, const char *why) {
    if (rc == VB_OUTDIR_NOT_A_DIR) vb_die_input("sweep: %s", why);
    vb_die_env("sweep: %s", why);
}

static void open_root(sweep_tree *t, const char *dir) {
    memset(t, 0, sizeof *t);
    for (int s = 0; s < SWEEP_NSUB; s++) t->sub[s].fd = -1;
    vb_snprintf(t->dir, sizeof t->dir, "%s", dir);
    char why[3 * VB_PATH_MAX];
    int rc = vb_outdir_open(&t->sub[SWEEP_ROOT], dir, NULL, why, sizeof why);
    if (rc != 0) die_rc(rc, why);
    char abs[PATH_MAX];
    if (!realpath(dir, abs)) vb_die_input("sweep: cannot resolve %s (%s)", dir, strerror(errno));
    vb_snprintf(t->abs, sizeof t->abs, "%s", abs);
    t->base = t->dir;
}

void sweep_tree_open(sweep_tree *t, const char *dir, bool batch) {
    open_root(t, dir);
    char why[3 * VB_PATH_MAX];
    for (int s = SWEEP_RUNS; s < SWEEP_NSUB; s++) {
        if (!batch && (s == SWEEP_JOBS || s == SWEEP_STATUS)) continue;
        int rc = vb_outdir_sub(&t->sub[s], &t->sub[SWEEP_ROOT], k_sub_names[s], why, sizeof why);
        if (rc != 0) die_rc(rc, why);
    }
}

void sweep_tree_open_existing(sweep_tree *t, const char *dir) {
    open_root(t, dir);
    char why[3 * VB_PATH_MAX];
    for (int s = SWEEP_RUNS; s < SWEEP_NSUB; s++) {
        int rc = vb_outdir_sub_existing(&t->sub[s], &t->sub[SWEEP_ROOT], k_sub_names[s], why, sizeof why);
        if (rc == VB_OUTDIR_OS_ERROR && errno == ENOENT) continue; /* a local sweep has no status/ */
        if (rc != 0) die_rc(rc, why);
    }
}

void sweep_tree_close(sweep_tree *t) {
    for (int s = 0; s < SWEEP_NSUB; s++) vb_outdir_close(&t->sub[s]);
}

bool sweep_tree_has(const sweep_tree *t, sweep_sub s) { return t->sub[s].fd >= 0; }

void sweep_tree_check(const sweep_tree *t) {
    char why[3 * VB_PATH_MAX];
    for (int s = SWEEP_RUNS; s < SWEEP_NSUB; s++) {
        if (t->sub[s].fd < 0) continue;
        int rc = vb_outdir_still(&t->sub[SWEEP_ROOT], k_sub_names[s], &t->sub[s], why, sizeof why);
        if (rc != 0) die_rc(rc, why);
    }
}

const char *sweep_tree_path(const sweep_tree *t, sweep_sub s, const char *name, char *buf, size_t n) {
    if (s == SWEEP_ROOT)
        vb_snprintf(buf, n, "%s/%s", t->dir, name);
    else
        vb_snprintf(buf, n, "%s/%s/%s", t->dir, k_sub_names[s], name);
    return buf;
}

static const vb_outdir *sub_or_die(const sweep_tree *t, sweep_sub s) {
    if (t->sub[s].fd < 0) vb_die_internal("sweep: %s/%s is not open", t->dir, k_sub_names[s]);
    return &t->sub[s];
}

int sweep_tree_write(const sweep_tree *t, sweep_sub s, const char *name, unsigned mode,
                     void (*write_fn)(FILE *f, void *ctx), void *ctx, char *why, size_t n) {
    return vb_outdir_write_mode(sub_or_die(t, s), name, mode, write_fn, ctx, why, n);
}

void sweep_tree_write_or_die(const sweep_tree *t, sweep_sub s, const char *name, unsigned mode,
                             void (*write_fn)(FILE *f, void *ctx), void *ctx) {
    char why[3 * VB_PATH_MAX];
    int rc = sweep_tree_write(t, s, name, mode, write_fn, ctx, why, sizeof why);
    if (rc != 0) die_rc(rc, why);
}

static void write_text(FILE *f, void *ctx) { fputs(ctx, f); }

int sweep_tree_write_text(const sweep_tree *t, sweep_sub s, const char *name, const char *text) {
    char why[3 * VB_PATH_MAX];
    int rc = sweep_tree_write(t, s, name, 0, write_text, (void *)text, why, sizeof why);
    if (rc != 0) vb_warn("%s", why);
    return rc;
}

int sweep_tree_append_fd(const sweep_tree *t, sweep_sub s, const char *name, char *why, size_t n) {
    return vb_outdir_append_fd(sub_or_die(t, s), name, why, n);
}

int sweep_tree_open_log(const sweep_tree *t, sweep_sub s, const char *name) {
    char why[3 * VB_PATH_MAX];
    int fd = sweep_tree_append_fd(t, s, name, why, sizeof why);
    if (fd >= 0) return fd;
    die_rc(fd, why);
}

void sweep_tree_appendf(const sweep_tree *t, sweep_sub s, const char *name, const char *fmt, ...) {
    char why[3 * VB_PATH_MAX];
    int fd = sweep_tree_append_fd(t, s, name, why, sizeof why);
    if (fd < 0) {
        vb_warn("%s", why);
        return;
    }
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (k < 0) k = 0;
    if ((size_t)k > sizeof line - 2) k = (int)sizeof line - 2;
    line[k++] = '\n';
    if (write(fd, line, (size_t)k) != k) vb_warn("cannot append to %s/%s", t->dir, name);
    close(fd);
}

bool sweep_tree_exists(const sweep_tree *t, sweep_sub s, const char *name) {
    struct stat st;
    return t->sub[s].fd >= 0 && fstatat(t->sub[s].fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int sweep_tree_unlink(const sweep_tree *t, sweep_sub s, const char *name) {
    if (t->sub[s].fd < 0) return 0;
    return vb_outdir_unlink(&t->sub[s], name);
}

int sweep_tree_rename(const sweep_tree *t, sweep_sub s, const char *from, const char *to) {
    const int fd = sub_or_die(t, s)->fd;
    /* the new name must be free: renameat would replace a file there */
    struct stat st;
    if (fstatat(fd, to, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        errno = EEXIST;
        return -1;
    }
    return renameat(fd, from, fd, to);
}

int sweep_tree_run_dir(const sweep_tree *t, const char *name, vb_outdir *out, char *why, size_t n) {
    return vb_outdir_sub_existing(out, sub_or_die(t, SWEEP_RUNS), name, why, n);
}

void sweep_tree_fd_path(const sweep_tree *t, sweep_sub s, const char *name, char *buf, size_t n) {
    vb_outdir_fd_path(sub_or_die(t, s), name, buf, n);
}
