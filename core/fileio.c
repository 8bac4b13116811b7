/* fileio.c: crash-safe file writes and CSV quoting (fileio.h). */
#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"

/* Removes the temporary and returns -1 with errno = err (unlink may clobber it). */
static int atomic_fail(const char *tmp, int err) {
    if (tmp) unlink(tmp);
    errno = err ? err : EIO;
    return -1;
}

int vb_atomic_write(const char *path, void (*write_fn)(FILE *f, void *ctx), void *ctx) {
    /* The temporary file lives in the same directory so rename() is atomic
     * (same filesystem): readers see the old file or the new one, never half. */
    char dircopy[VB_PATH_MAX], basecopy[VB_PATH_MAX];
    if (strlen(path) >= sizeof dircopy) return atomic_fail(NULL, ENAMETOOLONG);
    strcpy(dircopy, path);
    strcpy(basecopy, path);
    const char *dir = dirname(dircopy);
    const char *name = basename(basecopy);
    char tmp[VB_PATH_MAX];
    int k = snprintf(tmp, sizeof tmp, "%s/.%s.tmp.XXXXXX", dir, name);
    if (k < 0 || (size_t)k >= sizeof tmp) return atomic_fail(NULL, ENAMETOOLONG);

    int fd = mkstemp(tmp);
    if (fd < 0) return atomic_fail(NULL, errno);
    /* mkstemp makes 0600; results are meant to be shared like any other file */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int err = errno;
        close(fd);
        return atomic_fail(tmp, err);
    }
    /* the first error wins: later calls fail as a consequence of it */
    errno = 0;
    write_fn(f, ctx);
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fflush(f) != 0 && !err) err = errno;
    if (fsync(fd) != 0 && !err) err = errno;
    if (fclose(f) != 0 && !err) err = errno;
    if (err) return atomic_fail(tmp, err);
    if (rename(tmp, path) != 0) return atomic_fail(tmp, errno);
    /* make the rename itself durable */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
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

void vb_csv_field(FILE *f, const char *s) {
    if (!s) s = "";
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const char *c = s; *c; c++) {
        if (*c == '"') fputc('"', f);
        fputc(*c, f);
    }
    fputc('"', f);
}
