/* outdir.c: writing into a results tree without following links below its
 * root (outdir.h). */
#include "core/util/outdir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util/fileio.h"

/* one line "path: what (the OS's reason)", errno kept */
static int os_error(char *why, size_t n, const char *path, const char *what, int err) {
    vb_errf(why, n, "%s: %s%s%s", path, what, what[0] ? " " : "", strerror(err));
    errno = err;
    return VB_OUTDIR_OS_ERROR;
}

/* Why `name` in dirfd could not be opened as a real directory: what it is
 * (a link, with its target), or the OS's reason. */
static int refuse(int dirfd, const char *name, const char *shown, const char *root, int err, char *why, size_t n) {
    struct stat st;
    if ((err == ELOOP || err == ENOTDIR || err == EMLINK) && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISDIR(st.st_mode)) {
        if (S_ISLNK(st.st_mode)) {
            char target[VB_PATH_MAX];
            ssize_t k = readlinkat(dirfd, name, target, sizeof target - 1);
            target[k > 0 ? k : 0] = '\0';
            vb_errf(why, n,
                    "%s is a symbolic link (to %s), not a directory: vitbench writes only into real directories "
                    "below %s; remove the link (or give another output directory)",
                    shown, target[0] ? target : "?", root);
        } else {
            vb_errf(why, n, "%s is %s, not a directory: vitbench writes only into real directories below %s", shown,
                    vb_file_type_name(st.st_mode), root);
        }
        return VB_OUTDIR_NOT_A_DIR;
    }
    return os_error(why, n, shown, "", err);
}

/* Walks rel below the open directory fd (consumed: closed or returned),
 * opening each component without following links and creating the missing
 * ones. shown holds the path so far and is extended as the walk goes. */
static int walk(int fd, const char *rel, char *shown, size_t shown_n, const char *root, char *why, size_t n) {
    char comp[VB_PATH_MAX];
    const char *p = rel ? rel : "";
    while (*p) {
        while (*p == '/') p++;
        size_t len = strcspn(p, "/");
        if (len == 0) break;
        if (len >= sizeof comp) {
            close(fd);
            vb_errf(why, n, "%s/%.*s...: name too long", shown, 40, p);
            errno = ENAMETOOLONG;
            return VB_OUTDIR_OS_ERROR;
        }
        memcpy(comp, p, len);
        comp[len] = '\0';
        p += len;
        if (strcmp(comp, ".") == 0) continue;
        size_t sl = strlen(shown);
        snprintf(shown + sl, shown_n - sl, "%s%s", sl && shown[sl - 1] != '/' ? "/" : "", comp);
        if (strcmp(comp, "..") == 0) {
            close(fd);
            vb_errf(why, n, "%s: '..' leaves the results tree %s", shown, root);
            return VB_OUTDIR_NOT_A_DIR;
        }
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT) {
            if (mkdirat(fd, comp, 0775) != 0 && errno != EEXIST) {
                int err = errno;
                close(fd);
                return os_error(why, n, shown, "cannot create directory:", err);
            }
            next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0) {
            int rc = refuse(fd, comp, shown, root, errno, why, n);
            int err = errno;
            close(fd);
            errno = err;
            return rc;
        }
        close(fd);
        fd = next;
    }
    return fd;
}

/* d holds the tree's root and the path so far; fd (consumed) is the
 * directory at that path: rel is walked below it */
static int open_below(vb_outdir *d, int fd, const char *rel, char *why, size_t n) {
    if (fd < 0) return os_error(why, n, d->path, "", errno);
    fd = walk(fd, rel, d->path, sizeof d->path, d->root, why, n);
    if (fd < 0) return fd;
    d->fd = fd;
    return 0;
}

int vb_outdir_open(vb_outdir *d, const char *root, const char *rel, char *why, size_t n) {
    d->fd = -1;
    vb_snprintf(d->root, sizeof d->root, "%s", root && root[0] ? root : ".");
    vb_snprintf(d->path, sizeof d->path, "%s", d->root);
    /* the root is the user's: created as named, links followed */
    if (vb_mkdir_p(d->root) != 0) {
        int err = errno;
        char what[VB_PATH_MAX + 64];
        if (vb_dir_problem(d->root, what, sizeof what)) {
            vb_errf(why, n, "%s: %s", d->root, what);
            return VB_OUTDIR_NOT_A_DIR;
        }
        return os_error(why, n, d->root, "cannot create directory:", err);
    }
    return open_below(d, open(d->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rel, why, n);
}

int vb_outdir_sub(vb_outdir *child, const vb_outdir *parent, const char *rel, char *why, size_t n) {
    child->fd = -1;
    vb_snprintf(child->root, sizeof child->root, "%s", parent->root);
    vb_snprintf(child->path, sizeof child->path, "%s", parent->path);
    return open_below(child, fcntl(parent->fd, F_DUPFD_CLOEXEC, 0), rel, why, n);
}

int vb_outdir_write(const vb_outdir *d, const char *name, void (*write_fn)(FILE *f, void *ctx), void *ctx,
                    char *why, size_t n) {
    const char *slash = strrchr(name, '/');
    if (!slash) {
        if (vb_atomic_write_at(d->fd, name, write_fn, ctx) == 0) return 0;
        char file[2 * VB_PATH_MAX + 2];
        snprintf(file, sizeof file, "%s/%s", d->path, name);
        return os_error(why, n, file, "cannot write:", errno);
    }
    char dir[VB_PATH_MAX];
    vb_snprintf(dir, sizeof dir, "%.*s", (int)(slash - name), name);
    vb_outdir sub;
    int rc = vb_outdir_sub(&sub, d, dir, why, n);
    if (rc != 0) return rc;
    rc = vb_outdir_write(&sub, slash + 1, write_fn, ctx, why, n);
    int err = errno;
    vb_outdir_close(&sub);
    errno = err;
    return rc;
}

int vb_outdir_write_mode(const vb_outdir *d, const char *name, unsigned mode, void (*write_fn)(FILE *f, void *ctx),
                         void *ctx, char *why, size_t n) {
    if (strchr(name, '/')) {
        errno = EINVAL;
        return os_error(why, n, name, "cannot write:", EINVAL);
    }
    if (vb_atomic_write_at_mode(d->fd, name, mode, write_fn, ctx) == 0) return 0;
    char file[2 * VB_PATH_MAX + 2];
    snprintf(file, sizeof file, "%s/%s", d->path, name);
    return os_error(why, n, file, "cannot write:", errno);
}

int vb_outdir_append_fd(const vb_outdir *d, const char *name, char *why, size_t n) {
    int fd = vb_open_append_at(d->fd, name);
    if (fd >= 0) return fd;
    int err = errno;
    char file[2 * VB_PATH_MAX + 2];
    snprintf(file, sizeof file, "%s/%s", d->path, name);
    const char *what = vb_append_refusal(err);
    if (what) {
        vb_errf(why, n, "%s is %s: vitbench writes only its own files below %s; remove it", file, what, d->root);
        errno = err;
        return VB_OUTDIR_NOT_A_DIR;
    }
    return os_error(why, n, file, "cannot open to append:", err);
}

int vb_outdir_sub_existing(vb_outdir *child, const vb_outdir *parent, const char *name, char *why, size_t n) {
    child->fd = -1;
    vb_snprintf(child->root, sizeof child->root, "%s", parent->root);
    vb_snprintf(child->path, sizeof child->path, "%s/%s", parent->path, name);
    if (!name[0] || strchr(name, '/') || strcmp(name, "..") == 0) {
        vb_errf(why, n, "%s: not one directory below %s", child->path, parent->path);
        return VB_OUTDIR_NOT_A_DIR;
    }
    int fd = openat(parent->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return refuse(parent->fd, name, child->path, parent->root, errno, why, n);
    child->fd = fd;
    return 0;
}

int vb_outdir_still(const vb_outdir *parent, const char *name, const vb_outdir *child, char *why, size_t n) {
    struct stat now, held;
    char shown[2 * VB_PATH_MAX + 2];
    snprintf(shown, sizeof shown, "%s/%s", parent->path, name);
    if (fstat(child->fd, &held) != 0) return os_error(why, n, shown, "", errno);
    if (fstatat(parent->fd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == held.st_dev &&
        now.st_ino == held.st_ino)
        return 0;
    if (fstatat(parent->fd, name, &now, AT_SYMLINK_NOFOLLOW) != 0) {
        vb_errf(why, n, "%s was removed or moved away while vitbench wrote below it: nothing more is written there",
                shown);
    } else if (S_ISLNK(now.st_mode)) {
        char target[VB_PATH_MAX];
        ssize_t k = readlinkat(parent->fd, name, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        vb_errf(why, n,
                "%s was replaced by a symbolic link (to %s) while vitbench wrote below it: nothing is written through "
                "it; put the directory back",
                shown, target[0] ? target : "?");
    } else {
        vb_errf(why, n, "%s was replaced (now %s) while vitbench wrote below it: nothing more is written there", shown,
                vb_file_type_name(now.st_mode));
    }
    return VB_OUTDIR_NOT_A_DIR;
}

void vb_outdir_fd_path(const vb_outdir *d, const char *name, char *buf, size_t n) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", d->fd);
    struct stat a, b;
    if (d->fd >= 0 && stat(self, &a) == 0 && fstat(d->fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        vb_snprintf(buf, n, "%s/%s", self, name);
    else
        vb_snprintf(buf, n, "%s/%s", d->path, name);
}

static void die(int rc, const char *cmd, const char *why) {
    if (rc == VB_OUTDIR_NOT_A_DIR) vb_die_input("%s: %s", cmd, why);
    vb_die_env("%s: %s", cmd, why);
}

void vb_outdir_open_or_die(vb_outdir *d, const char *root, const char *rel, const char *cmd) {
    char why[3 * VB_PATH_MAX];
    int rc = vb_outdir_open(d, root, rel, why, sizeof why);
    if (rc != 0) die(rc, cmd, why);
}

void vb_outdir_write_or_die(const vb_outdir *d, const char *name, void (*write_fn)(FILE *f, void *ctx), void *ctx,
                            const char *cmd) {
    char why[3 * VB_PATH_MAX];
    int rc = vb_outdir_write(d, name, write_fn, ctx, why, sizeof why);
    if (rc != 0) die(rc, cmd, why);
}

int vb_outdir_unlink(const vb_outdir *d, const char *name) {
    if (unlinkat(d->fd, name, 0) == 0 || errno == ENOENT) return 0;
    return -1;
}

void vb_outdir_close(vb_outdir *d) {
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
}
