#include "tests/test_util.h"

#include <hdf5.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util/common.h"
#include "core/model/vit.h"

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

vb_ctx *tu_ctx(void) {
    static vb_ctx *ctx = NULL;
    if (!ctx) {
        char err[256] = "";
        vb_ctx_opts o = {.act = VB_DTYPE_F32};
        ctx = vb_ops_cpu()->ctx_create(&o, err, sizeof err);
        if (!ctx) {
            fprintf(stderr, "test: cpu ctx_create: %s\n", err);
            abort();
        }
    }
    return ctx;
}

void tu_h2d(vb_ctx *ctx, void *dev, const void *host, size_t bytes) {
    ctx->ops->memcpy_h2d(ctx, dev, host, bytes);
    ctx->ops->synchronize(ctx);
}

void tu_d2h(vb_ctx *ctx, void *host, const void *dev, size_t bytes) {
    ctx->ops->memcpy_d2h(ctx, host, dev, bytes);
    ctx->ops->synchronize(ctx);
}

float *tu_upload(vb_ctx *ctx, const float *host, size_t n) {
    float *d = ctx->ops->alloc(ctx, n * sizeof(float));
    tu_h2d(ctx, d, host, n * sizeof(float));
    return d;
}

float *tu_download(vb_ctx *ctx, const float *dev, size_t n) {
    float *h = vb_malloc(n * sizeof(float));
    tu_d2h(ctx, h, dev, n * sizeof(float));
    return h;
}

int tu_dev_cmp(vb_ctx *ctx, const void *a, const void *b, size_t bytes) {
    char *ha = vb_malloc(bytes), *hb = vb_malloc(bytes);
    tu_d2h(ctx, ha, a, bytes);
    tu_d2h(ctx, hb, b, bytes);
    int c = memcmp(ha, hb, bytes);
    vb_free(ha), vb_free(hb);
    return c;
}

void tu_get_params(const vit_model *m, float *host) { tu_d2h(m->ctx, host, m->params, m->nparams * sizeof(float)); }

void tu_set_params(vit_model *m, const float *host) {
    tu_h2d(m->ctx, m->params, host, m->nparams * sizeof(float));
    vit_params_changed(m);
    m->ops->synchronize(m->ctx);
}

void tu_get_grads(const vit_model *m, float *host) { tu_d2h(m->ctx, host, m->grads, m->nparams * sizeof(float)); }

size_t tu_pred_numel(const vit_model *m, int B) {
    return (size_t)B * (size_t)m->d.cout * (size_t)m->d.img_h * (size_t)m->d.img_w;
}

void tu_get_pred(const vit_model *m, float *host, int B) {
    tu_d2h(m->ctx, host, m->pred, tu_pred_numel(m, B) * sizeof(float));
}

float tu_get_loss(const vit_model *m) {
    float l;
    tu_d2h(m->ctx, &l, m->loss_dev, sizeof l);
    return l;
}

void tu_randomize_params(vit_model *m, uint64_t seed) {
    vb_rng r;
    vb_rng_seed(&r, seed);
    float *host = vb_malloc(m->nparams * sizeof(float));
    for (int i = 0; i < m->ntensors; i++) {
        const vit_tensor *t = &m->tensors[i];
        float *w = host + t->offset;
        for (size_t j = 0; j < t->numel; j++) {
            double u = 2.0 * vb_rng_uniform(&r) - 1.0;
            if (t->init == VIT_INIT_ONE) w[j] = (float)(1.0 + 0.2 * u);
            else if (t->init == VIT_INIT_ZERO) w[j] = (float)(0.2 * u);
            else w[j] = (float)(0.35 * u);
        }
    }
    tu_set_params(m, host);
    vb_free(host);
}

void tu_expected_shard(const vit_tensor *t, const float *full, float *out) {
    for (size_t j = 0; j < t->numel; j++) {
        size_t rest = j, fidx = 0, stride = 1;
        int coord[VIT_MAX_NDIM];
        for (int k = t->ndim - 1; k >= 0; k--) {
            coord[k] = (int)(rest % (size_t)t->shape[k]);
            rest /= (size_t)t->shape[k];
        }
        for (int k = t->ndim - 1; k >= 0; k--) {
            int c = coord[k] + (k == t->shard_dim ? t->shard_offset : 0);
            fidx += (size_t)c * stride;
            stride *= (size_t)t->full_shape[k];
        }
        out[j] = full[fidx];
    }
}

int tu_run_child(tu_child_fn fn, void *ctx, unsigned timeout_s, char **err) {
    char path[] = "/tmp/vbtest_child_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(NULL); /* nothing buffered gets written twice */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (timeout_s) alarm(timeout_s); /* a hang fails instead of blocking the suite */
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 1) < 0 || dup2(fd, 2) < 0) _exit(99);
        close(null);
        close(fd);
        fn(ctx);
        fflush(NULL);
        _exit(0); /* returned: no error detected */
    }
    close(fd);
    int st = 0;
    pid_t got = waitpid(pid, &st, 0);
    *err = tu_read_file(path);
    unlink(path);
    assert_int_equal(got, pid);
    assert_non_null(*err);
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

void tu_expect_exit_all(int want_status, const char *const *needles, tu_child_fn fn, void *ctx) {
    char *err = NULL;
    int status = tu_run_child(fn, ctx, 30, &err);
    if (status != want_status) fail_msg("child exited %d, want %d; stderr: <<%s>>", status, want_status, err);
    if (want_status != 0) {
        size_t len = strlen(err);
        int lines = 0;
        for (size_t i = 0; i < len; i++) lines += err[i] == '\n';
        if (lines != 1 || err[len - 1] != '\n') fail_msg("want exactly one stderr line, got: <<%s>>", err);
        const char *prefix = want_status == VB_EXIT_INPUT      ? "vitbench: error: "
                             : want_status == VB_EXIT_INTERNAL ? "vitbench: internal error: "
                                                               : NULL;
        if (prefix && strncmp(err, prefix, strlen(prefix)) != 0) fail_msg("no '%s' prefix: <<%s>>", prefix, err);
    }
    for (; needles && *needles; needles++)
        if (!strstr(err, *needles)) fail_msg("stderr does not mention '%s': <<%s>>", *needles, err);
    free(err);
}

void tu_expect_exit(int want_status, const char *needle, tu_child_fn fn, void *ctx) {
    const char *const needles[] = {needle, NULL};
    tu_expect_exit_all(want_status, needles, fn, ctx);
}

/* element `coord` of dataset `name` = v; coord NULL: the element at flat
 * (row-major) index `at` */
static void h5_poke(const char *path, const char *name, const hsize_t *coord, hsize_t at, float v) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t fs = H5Dget_space(d);
    hsize_t flat[8];
    if (!coord) {
        const int nd = H5Sget_simple_extent_ndims(fs);
        assert_true(nd >= 1 && nd <= 8);
        hsize_t dims[8];
        H5Sget_simple_extent_dims(fs, dims, NULL);
        for (int k = nd - 1; k >= 0; k--) {
            flat[k] = at % dims[k];
            at /= dims[k];
        }
        coord = flat;
    }
    assert_true(H5Sselect_elements(fs, H5S_SELECT_SET, 1, coord) >= 0);
    hsize_t one = 1;
    hid_t ms = H5Screate_simple(1, &one, NULL);
    assert_true(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &v) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(f);
}

void tu_h5_poke_field(const char *file, int t, int c, int y, int x, float v) {
    const hsize_t coord[4] = {(hsize_t)t, (hsize_t)c, (hsize_t)y, (hsize_t)x};
    h5_poke(file, "fields", coord, 0, v);
}

void tu_h5_poke_at(const char *file, const char *dataset, size_t at, float v) {
    h5_poke(file, dataset, NULL, (hsize_t)at, v);
}

void tu_assert_rel(double got, double want, double tol) {
    if (!(fabs(got - want) <= tol * fabs(want) + 1e-300)) fail_msg("got %.17g, want %.17g (rel tol %g)", got, want, tol);
}

const char *tu_write_tmp(const char *dir, const char *name, const char *text) {
    static char path[VB_PATH_MAX];
    vb_snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) fail_msg("cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return path;
}
