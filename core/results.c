/* results.c: the run directory and crash-safe file writes (results.h). */
#include "core/results.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"

void vb_run_dir_create(const vb_config *c, char *dir, size_t n, char *run_id, size_t idn) {
    const char *out = c->output_dir[0] ? c->output_dir : "results";
    if (vb_mkdir_p(out) != 0)
        vb_die_input("output_dir %s: cannot create directory (%s)", out, strerror(errno));

    char base[256];
    if (c->run_name[0]) {
        if (strchr(c->run_name, '/'))
            vb_die_input("run_name '%s': must not contain '/'", c->run_name);
        vb_snprintf(base, sizeof base, "%s", c->run_name);
    } else {
        char stamp[32];
        time_t t = time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        vb_snprintf(base, sizeof base, "%s_%s", c->config[0] ? c->config : "run", stamp);
    }

    /* mkdir is the atomic test-and-create: if another run (or rank of another
     * job) got there first we get EEXIST and move on to the next suffix, so
     * an existing run's files are never touched. */
    for (int suffix = 0; suffix < 100000; suffix++) {
        char id[300];
        if (suffix == 0)
            vb_snprintf(id, sizeof id, "%s", base);
        else
            vb_snprintf(id, sizeof id, "%s-%d", base, suffix);
        char path[VB_PATH_MAX];
        int k = snprintf(path, sizeof path, "%s/%s", out, id);
        if (k < 0 || (size_t)k >= sizeof path) vb_die_input("output_dir %s: path too long", out);
        if (mkdir(path, 0775) == 0) {
            vb_snprintf(dir, n, "%s", path);
            vb_snprintf(run_id, idn, "%s", id);
            return;
        }
        if (errno != EEXIST)
            vb_die_input("output_dir %s: cannot create run directory %s (%s)", out, path, strerror(errno));
    }
    vb_die_input("output_dir %s: too many runs named %s", out, base);
}

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

static void write_json_text(FILE *f, void *ctx) {
    fputs((const char *)ctx, f);
    fputc('\n', f);
}

int vb_run_json_mark_failed(const char *path, const char *why) {
    char *text = vb_read_file(path, NULL);
    if (!text) return -1;
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *st = j ? cJSON_GetObjectItemCaseSensitive(j, "status") : NULL;
    if (!cJSON_IsString(st)) {
        cJSON_Delete(j);
        return -1;
    }
    if (strcmp(st->valuestring, "running") != 0) {
        cJSON_Delete(j);
        return 0;
    }
    char now[32];
    vb_iso_time(now, sizeof now);
    cJSON_ReplaceItemInObjectCaseSensitive(j, "status", cJSON_CreateString("failed"));
    cJSON_DeleteItemFromObjectCaseSensitive(j, "end_time");
    cJSON_AddStringToObject(j, "end_time", now);
    cJSON_DeleteItemFromObjectCaseSensitive(j, "failure");
    cJSON_AddStringToObject(j, "failure", why);
    char *out = cJSON_Print(j);
    cJSON_Delete(j);
    if (!out) return -1;
    int rc = vb_atomic_write(path, write_json_text, out);
    cJSON_free(out);
    return rc == 0 ? 1 : -1;
}
