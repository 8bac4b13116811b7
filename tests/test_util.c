#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/wait.h>

#include "core/common.h"

const char *tu_source_dir(void) {
    const char *s = getenv("VB_SOURCE_DIR");
    return s ? s : VB_SOURCE_DIR;
}

const char *tu_binary_dir(void) {
    const char *s = getenv("VB_BINARY_DIR");
    return s ? s : ".";
}

const char *tu_vitbench(void) {
    static char path[VB_PATH_MAX];
    vb_snprintf(path, sizeof path, "%s/vitbench", tu_binary_dir());
    return path;
}

void tu_tmpdir(char *out, size_t n, const char *tag) {
    vb_snprintf(out, n, "/tmp/vbtest_%s_XXXXXX", tag);
    if (!mkdtemp(out)) {
        perror("mkdtemp");
        abort();
    }
}

void tu_rm_rf(const char *path) {
    if (!path || strncmp(path, "/tmp/vbtest_", 12) != 0) return; /* only ever our own */
    char cmd[VB_PATH_MAX + 16];
    vb_snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
}

int tu_run(char *out, size_t n, const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[8300];
    vb_snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t used = 0;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, p)) > 0) {
        if (out && used + 1 < n) {
            size_t c = k < n - 1 - used ? k : n - 1 - used;
            memcpy(out + used, buf, c);
            used += c;
        }
    }
    if (out && n) out[used] = '\0';
    int st = pclose(p);
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return -1;
}

char *tu_read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)len + 1);
    size_t got = fread(s, 1, (size_t)len, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

int tu_count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, c, last = '\n';
    while ((c = fgetc(f)) != EOF) {
        if (c == '\n') n++;
        last = c;
    }
    if (last != '\n') n++;
    fclose(f);
    return n;
}

void tu_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed) {
    vb_rng r;
    vb_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)vb_rng_uniform(&r);
}

double tu_max_rel_err(const float *a, const float *b, size_t n, double floor) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double s = fabs((double)b[i]);
        double e = d / (s > floor ? s : floor);
        if (e > worst) worst = e;
    }
    return worst;
}
