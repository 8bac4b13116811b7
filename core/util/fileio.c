/* fileio.c: crash-safe file writes and CSV quoting (fileio.h). */
#include "core/util/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util/common.h"

/* Removes the temporary and returns -1 with errno = err (unlinkat may clobber it). */
static int atomic_fail(int dirfd, const char *tmp, int err) {
    if (tmp) unlinkat(dirfd, tmp, 0);
    errno = err ? err : EIO;
    return -1;
}

/* A fresh temporary beside `name` in dirfd, created exclusively and never
 * through a link: its name into tmp (n bytes). The file gets 0666 less the
 * umask, as any other file the process creates. */
static int open_temporary(int dirfd, const char *name, char *tmp, size_t n) {
    static unsigned long counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned long salt = (unsigned long)getpid() * 2654435761ul ^ (unsigned long)(vb_now() * 1e9) ^ ++counter;
        /* the name is cut so the temporary's stays within NAME_MAX */
        int k = snprintf(tmp, n, ".%.200s.tmp.%06lx", name, salt & 0xfffffful);
        if (k < 0 || (size_t)k >= n) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

int vb_atomic_write_at_mode(int dirfd, const char *name, unsigned mode, void (*write_fn)(FILE *f, void *ctx),
                            void *ctx) {
    /* The temporary file lives in the same directory so renameat() is atomic
     * (same filesystem): readers see the old file or the new one, never half;
     * a link at `name` (symbolic or hard) is replaced by the rename, never
     * followed or written through. */
    if (!name[0] || strchr(name, '/')) return atomic_fail(dirfd, NULL, EINVAL);
    char tmp[300];
    int fd = open_temporary(dirfd, name, tmp, sizeof tmp);
    if (fd < 0) return atomic_fail(dirfd, NULL, errno);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int err = errno;
        close(fd);
        return atomic_fail(dirfd, tmp, err);
    }
    /* the first error wins: later calls fail as a consequence of it */
    errno = 0;
    write_fn(f, ctx);
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fflush(f) != 0 && !err) err = errno;
    if (mode && fchmod(fd, (mode_t)mode) != 0 && !err) err = errno;
    if (fsync(fd) != 0 && !err) err = errno;
    if (fclose(f) != 0 && !err) err = errno;
    if (err) return atomic_fail(dirfd, tmp, err);
    if (renameat(dirfd, tmp, dirfd, name) != 0) return atomic_fail(dirfd, tmp, errno);
    (void)fsync(dirfd); /* make the rename itself durable */
    return 0;
}

int vb_atomic_write_at(int dirfd, const char *name, void (*write_fn)(FILE *f, void *ctx), void *ctx) {
    return vb_atomic_write_at_mode(dirfd, name, 0, write_fn, ctx);
}

int vb_open_append_at(int dirfd, const char *name) {
    if (!name[0] || strchr(name, '/')) {
        errno = EINVAL;
        return -1;
    }
    /* O_NONBLOCK: a FIFO planted at name must not block the open */
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0) return errno == ENXIO ? (errno = EINVAL, -1) : -1; /* ENXIO: a FIFO without a reader */
    struct stat st;
    int err = 0;
    if (fstat(fd, &st) != 0)
        err = errno;
    else if (!S_ISREG(st.st_mode))
        err = EINVAL;
    else if (st.st_nlink > 1)
        err = EMLINK;
    if (!err && fcntl(fd, F_SETFL, O_APPEND) != 0) err = errno;
    if (err) {
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

const char *vb_append_refusal(int err) {
    switch (err) {
    case ELOOP: return "a symbolic link, not written through";
    case EMLINK: return "a file with more than one link (a hard link), not written through";
    case EINVAL: return "not a regular file";
    default: return NULL;
    }
}

int vb_atomic_write(const char *path, void (*write_fn)(FILE *f, void *ctx), void *ctx) {
    char dircopy[VB_PATH_MAX], basecopy[VB_PATH_MAX];
    if (strlen(path) >= sizeof dircopy) return atomic_fail(-1, NULL, ENAMETOOLONG);
    strcpy(dircopy, path);
    strcpy(basecopy, path);
    const char *dir = dirname(dircopy);
    const char *name = basename(basecopy);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return atomic_fail(-1, NULL, errno);
    int rc = vb_atomic_write_at(dfd, name, write_fn, ctx);
    int err = errno;
    close(dfd);
    errno = err;
    return rc;
}

typedef struct {
    const char *text;
    size_t len, size;
} padded_text;

static void write_padded(FILE *f, void *ctx) {
    const padded_text *p = ctx;
    fwrite(p->text, 1, p->len, f);
    for (size_t i = p->len; i < p->size; i++) fputc(i + 1 == p->size ? '\n' : ' ', f);
}

/* The file's current length is what it holds allocated: `text` goes over it
 * from offset 0 and spaces over the rest, so no write lands past the end
 * and none needs a new block. */
static int rewrite_in_place(const char *path, const char *text, size_t len) {
    /* never through a link: a symbolic one is not opened, a hard one (the
     * same blocks under another name elsewhere) not written */
    int fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1 || (size_t)st.st_size < len) {
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return -1;
    }
    memcpy(buf, text, len);
    memset(buf + len, ' ', size - len);
    if (size > len) buf[size - 1] = '\n';
    int rc = 0;
    for (size_t off = 0; off < size && rc == 0;) {
        ssize_t k = pwrite(fd, buf + off, size - off, (off_t)off);
        if (k > 0)
            off += (size_t)k;
        else if (k < 0 && errno == EINTR)
            continue;
        else
            rc = -1;
    }
    free(buf);
    if (rc == 0 && fsync(fd) != 0) rc = -1;
    if (close(fd) != 0) rc = -1;
    return rc;
}

int vb_write_reserved(const char *path, const char *text, size_t reserve) {
    size_t len = strlen(text);
    padded_text p = {text, len, reserve > len ? reserve : len};
    if (vb_atomic_write(path, write_padded, &p) == 0) return 0;
    int err = errno;
    /* any other failure (read-only disk, no permission) would stop the
     * in-place write too, and it must not half-overwrite a good file */
    if (err != ENOSPC && err != EDQUOT && err != EFBIG) {
        errno = err;
        return -1;
    }
    if (rewrite_in_place(path, text, len) == 0) return 0;
    errno = err; /* the cause is still the full disk, not the fallback's step */
    return -1;
}

void vb_die_env(const char *fmt, ...) {
    fflush(stdout);
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *c = msg; *c; c++) /* one line, whatever a path holds */
        if (*c == '\n') *c = ' ';
    if (vb_log_rank() > 0)
        fprintf(stderr, "vitbench: [rank %d] error: %s\n", vb_log_rank(), msg);
    else
        fprintf(stderr, "vitbench: error: %s\n", msg);
    fflush(stderr);
    exit(VB_EXIT_INTERNAL);
}

void vb_atomic_write_or_die(const char *path, void (*write_fn)(FILE *f, void *ctx), void *ctx) {
    if (vb_atomic_write(path, write_fn, ctx) != 0) vb_die_env("cannot write %s: %s", path, strerror(errno));
}

bool vb_csv_formula_lead(char c) { return c != '\0' && strchr("=+-@\t\r", c) != NULL; }

/* a finite number as a whole (strtod): what a spreadsheet reads as one */
static bool plain_number(const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    return end != s && *end == '\0' && errno == 0 && v == v && v - v == 0;
}

void vb_csv_field(FILE *f, const char *s) {
    if (!s) s = "";
    /* text a spreadsheet would run as a formula gets a leading apostrophe;
     * one that starts with an apostrophe already gets another, so that
     * vb_csv_parse gives back exactly what was written */
    const bool guard = (vb_csv_formula_lead(s[0]) && !plain_number(s)) ||
                       (s[0] == '\'' && (vb_csv_formula_lead(s[1]) || s[1] == '\''));
    const bool quote = strpbrk(s, ",\"\r\n") != NULL;
    if (quote) fputc('"', f);
    if (guard) fputc('\'', f);
    for (const char *c = s; *c; c++) {
        if (quote && *c == '"') fputc('"', f);
        fputc(*c, f);
    }
    if (quote) fputc('"', f);
}
