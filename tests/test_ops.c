/* test_ops.c: the CPU op table against independent references.
 *
 * Forward ops are checked against naive double-precision loops. Every op with
 * a backward is checked against central finite differences of the scalar
 * objective L = sum(out * R) for a fixed random R (so dL/dout = R), and for
 * the gradient contract of kernels/ops.h: parameter gradients accumulate,
 * input gradients overwrite (garbage in the output must not matter) unless
 * named *_acc or accumulate_dinp is set, NULL outputs are skipped. Larger
 * shapes (above the OpenMP threshold) are checked against naive double
 * backward formulas so the threaded paths are exercised too. The flash
 * attention has its own suite (test_attention.c).
 *
 * Every op runs on a context, on backend memory; the test never reads
 * backend memory on the host: each buffer has a host mirror, filled by
 * copying in (up) and read by copying out after a synchronize (down).
 *
 * Tolerances. float32 has a unit roundoff u = 2^-24 ~ 6e-8. A dot product
 * of K terms computed in float is within ~K u sum|terms| of the exact value
 * (a BLAS usually does far better); comparisons against double references
 * use rtol/atol of 1e-5 for K up to a few hundred, which is that bound with
 * the terms O(1). Comparisons of two float computations of the same value
 * in different orders (a fused op against its unfused pair) use the same
 * kind of bound with the envelope sum|terms| computed explicitly.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/blas.h"

#include "tests/test_util.h"
#include "core/util/common.h"
#include "kernels/ops.h"
#include "kernels/cpu/cpu_math.h"

static const vb_ops *ops;
static vb_ctx *ctx;

// ---------------------------------------------------------------------------
// buffers: a host mirror and its backend copy

typedef struct {
    float *h; /* host */
    float *d; /* backend */
    size_t n;
} buf;

static buf bnew(size_t n) {
    buf b = {calloc(n ? n : 1, sizeof(float)), ops->alloc(ctx, n * sizeof(float)), n};
    assert_non_null(b.h);
    return b;
}

static void up(buf *b) {
    ops->memcpy_h2d(ctx, b->d, b->h, b->n * sizeof(float));
    ops->synchronize(ctx);
}

static void down(buf *b) {
    ops->memcpy_d2h(ctx, b->h, b->d, b->n * sizeof(float));
    ops->synchronize(ctx);
}

/* one element of the mirror to the backend (finite differences) */
static void up_at(buf *b, size_t i) {
    ops->memcpy_h2d(ctx, b->d + i, b->h + i, sizeof(float));
    ops->synchronize(ctx);
}

static buf brand(size_t n, float lo, float hi, uint64_t seed) {
    buf b = bnew(n);
    tu_fill_uniform(b.h, n, lo, hi, seed);
    up(&b);
    return b;
}

/* a new buffer holding b's host values (b must be down to date) */
static buf bdup(const buf *b) {
    buf c = bnew(b->n);
    memcpy(c.h, b->h, b->n * sizeof(float));
    up(&c);
    return c;
}

/* x[i] = v for every i, on both sides */
static void bset(buf *b, float v) {
    for (size_t i = 0; i < b->n; i++) b->h[i] = v;
    up(b);
}

static void bfree(buf *b) {
    free(b->h);
    ops->free(ctx, b->d);
    b->h = b->d = NULL;
}

#define BFREE(...)                                                                  \
    do {                                                                            \
        buf *bs_[] = {__VA_ARGS__};                                                 \
        for (size_t i_ = 0; i_ < sizeof bs_ / sizeof *bs_; i_++) bfree(bs_[i_]);     \
    } while (0)

/* a backend scalar, read back */
static float read_f32(const float *dev) {
    float v;
    ops->memcpy_d2h(ctx, &v, dev, sizeof v);
    ops->synchronize(ctx);
    return v;
}

static double *dalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static double dot_r(const float *out, const float *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * (double)r[i];
    return s;
}

// |got - want| <= atol + rtol |want| elementwise
static void check_close(const char *what, const float *got, const double *want, size_t n,
                        double rtol, double atol) {
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= atol + rtol * fabs(want[i]))) {
            print_error("%s[%zu]: got %.9g, want %.9g (|diff| %.3g)\n", what, i, got[i], want[i], d);
            fail();
        }
    }
}

static void check_close_f(const char *what, const float *got, const float *want, size_t n,
                          double rtol, double atol) {
    double *w = dalloc(n);
    for (size_t i = 0; i < n; i++) w[i] = want[i];
    check_close(what, got, w, n, rtol, atol);
    free(w);
}

// analytic gradient vs finite differences: error relative to max(|fd_i|,
// 0.05 max|fd|) because the FD error is absolute and uniform over entries
static void check_grad(const char *what, const float *analytic, const double *fd, size_t n,
                       double rtol) {
    double scale = 0.0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(fd[i]));
    if (!(scale > 1e-6)) {
        print_error("%s: finite-difference gradient is ~0 (max %.3g): test is vacuous\n", what, scale);
        fail();
    }
    for (size_t i = 0; i < n; i++) {
        double denom = fmax(fabs(fd[i]), 0.05 * scale);
        double err = fabs((double)analytic[i] - fd[i]) / denom;
        if (!(err <= rtol)) {
            print_error("%s[%zu]: analytic %.7g, finite difference %.7g (rel err %.3g)\n", what, i,
                        analytic[i], fd[i], err);
            fail();
        }
    }
}

typedef double (*objective_fn)(void *c);

// central differences of f with respect to x[0..n); x is restored afterwards.
// The step actually taken in float is used as the denominator.
static void fd_grad(double *g, buf *x, size_t n, objective_fn f, void *c, float eps) {
    for (size_t i = 0; i < n; i++) {
        float x0 = x->h[i];
        float xp = x0 + eps, xm = x0 - eps;
        x->h[i] = xp;
        up_at(x, i);
        double lp = f(c);
        x->h[i] = xm;
        up_at(x, i);
        double lm = f(c);
        x->h[i] = x0;
        up_at(x, i);
        g[i] = (lp - lm) / ((double)xp - (double)xm);
    }
}

// an accumulating output after a second identical call: twice the first.
// Adding a value to itself is exact in float (barring overflow), so the only
// difference allowed is the one ulp of the sum when the second call's value
// is itself rounded differently, which a deterministic op does not do.
static void check_doubled(const char *what, const float *twice, const float *once, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double want = 2.0 * once[i];
        if (!(fabs(twice[i] - want) <= 1e-5 * fabs(want) + 1e-7)) {
            print_error("%s[%zu]: second backward gave %.9g, want 2 x %.9g (accumulate)\n", what, i,
                        twice[i], once[i]);
            fail();
        }
    }
}

// an overwritten output after a second identical call: the first's values
static void check_same(const char *what, const float *again, const float *once, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!(fabs(again[i] - once[i]) <= 1e-6 * fabs(once[i]) + 1e-7)) {
            print_error("%s[%zu]: second call gave %.9g, first %.9g (must overwrite)\n", what, i, again[i],
                        once[i]);
            fail();
        }
    }
}

static void check_zero(const char *what, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (x[i] != 0.0f) {
            print_error("%s[%zu] = %.9g, want untouched 0\n", what, i, x[i]);
            fail();
        }
    }
}

// ---------------------------------------------------------------------------
// context, table, memory, events

static void test_context(void **state) {
    (void)state;
    assert_ptr_equal(ctx->ops, ops);
    assert_int_equal(ctx->act, VB_DTYPE_F32);
    // the CPU computes in float32 only: another dtype is refused with a reason
    const vb_dtype others[2] = {VB_DTYPE_BF16, VB_DTYPE_F16};
    for (int i = 0; i < 2; i++) {
        char err[256] = "";
        vb_ctx_opts o = {.act = others[i]};
        assert_null(ops->ctx_create(&o, err, sizeof err));
        if (!strstr(err, "float32") || !strstr(err, vb_dtype_name(others[i])) || strchr(err, '\n')) {
            print_error("refusal reason: '%s'\n", err);
            fail();
        }
        // a short buffer still gets a terminated (truncated) line
        char tiny[8] = "xxxxxxx";
        assert_null(ops->ctx_create(&o, tiny, sizeof tiny));
        assert_true(strlen(tiny) < sizeof tiny);
    }
    // a second float32 context is a second queue of the same backend
    vb_ctx_opts o = {.act = VB_DTYPE_F32};
    char err[64] = "";
    vb_ctx *c2 = ops->ctx_create(&o, err, sizeof err);
    assert_non_null(c2);
    assert_ptr_not_equal(c2, ctx);
    ops->synchronize(c2);
    ops->ctx_destroy(c2);
    assert_int_equal(vb_dtype_size(VB_DTYPE_F32), 4);
    assert_int_equal(vb_dtype_size(VB_DTYPE_BF16), 2);
    assert_string_equal(vb_dtype_name(VB_DTYPE_F16), "float16");
}

static void test_table(void **state) {
    (void)state;
    assert_non_null(ops);
    assert_string_equal(ops->name, "cpu");
    assert_true(ops->host_memory); // the CPU's backend memory is the host's
    assert_ptr_equal(vb_ops_by_name("cpu"), ops);
    assert_null(vb_ops_by_name("nope"));
    assert_null(vb_ops_by_name(NULL));
    // attention relies on the OpenMP build of OpenBLAS running single-threaded
    // inside our parallel regions; the pthread build (Debian's default
    // libopenblas.so.0 alternative) would oversubscribe the cores instead
    assert_int_equal(vb_blas_parallel(), OPENBLAS_OPENMP);
    // every entry is filled in, except graphs and the workspace generation
    // they check: the CPU has none (NULL is how a backend says so, and
    // cuda_graphs is refused on it)
    const void *const *slot = (const void *const *)&ops->ctx_create;
    const void *const *end = (const void *const *)(&ops->fp8_scale_update + 1);
    const void *const *graphs = (const void *const *)&ops->graph_capture_begin;
    const void *const *graphs_end = (const void *const *)(&ops->workspace_generation + 1);
    for (; slot < end; slot++) {
        if (slot >= graphs && slot < graphs_end)
            assert_null(*slot);
        else
            assert_non_null(*slot);
    }
}

static void test_memory(void **state) {
    (void)state;
    float *a = ops->alloc(ctx, 1000 * sizeof(float));
    assert_int_equal((uintptr_t)a % 64, 0);
    float back[1000], src[1000];
    ops->memcpy_d2h(ctx, back, a, sizeof back);
    ops->synchronize(ctx);
    for (int i = 0; i < 1000; i++) assert_true(back[i] == 0.0f); // zero-filled
    for (int i = 0; i < 1000; i++) src[i] = (float)i;
    ops->memcpy_h2d(ctx, a, src, sizeof src);
    float *b = ops->alloc(ctx, sizeof src);
    ops->memcpy_d2d(ctx, b, a, sizeof src);
    ops->zero(ctx, b, 10 * sizeof(float));
    ops->memcpy_d2h(ctx, back, b, sizeof src);
    ops->synchronize(ctx);
    assert_true(back[9] == 0.0f && back[10] == 10.0f && back[999] == 999.0f);
    // page-locked host memory: host-addressable, aligned, a copy source and target
    float *h = ops->alloc_host(ctx, 64 * sizeof(float));
    assert_int_equal((uintptr_t)h % 64, 0);
    for (int i = 0; i < 64; i++) h[i] = -(float)i;
    ops->memcpy_h2d(ctx, b, h, 64 * sizeof(float));
    ops->memcpy_d2h(ctx, back, b, 64 * sizeof(float));
    ops->synchronize(ctx);
    assert_true(back[5] == -5.0f);
    ops->free_host(ctx, h);
    ops->free(ctx, a);
    ops->free(ctx, b);
}

static void test_events(void **state) {
    (void)state;
    vb_event *e0 = ops->event_create(ctx), *e1 = ops->event_create(ctx);
    ops->event_record(ctx, e0);
    buf x = brand(100000, -1, 1, 1);
    ops->scale(ctx, x.d, 2.0f, x.n);
    ops->event_record(ctx, e1);
    ops->event_wait(ctx, e1);
    ops->event_synchronize(ctx, e1);
    double ms = ops->event_elapsed_ms(ctx, e0, e1);
    assert_true(ms >= 0.0 && ms < 60e3);
    assert_true(ops->event_elapsed_ms(ctx, e0, e0) == 0.0);
    // a later record moves the event: the span grows
    ops->event_record(ctx, e1);
    assert_true(ops->event_elapsed_ms(ctx, e0, e1) >= ms);
    ops->event_destroy(ctx, e0);
    ops->event_destroy(ctx, e1);
    bfree(&x);
}

// ---------------------------------------------------------------------------
// matmul

typedef struct {
    buf out, inp, w, b, r;
    int N, C, OC;
} matmul_ctx;

static double matmul_objective(void *p) {
    matmul_ctx *c = p;
    ops->matmul_forward(ctx, c->out.d, c->inp.d, c->w.d, c->b.d, c->N, c->C, c->OC);
    down(&c->out);
    return dot_r(c->out.h, c->r.h, (size_t)c->N * c->OC);
}

static void matmul_reference(double *out, const float *inp, const float *w, const float *b, int N,
                             int C, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < C; i++) s += (double)inp[(size_t)n * C + i] * w[(size_t)o * C + i];
            out[(size_t)n * OC + o] = s;
        }
}

static void matmul_forward_case(int N, int C, int OC, int with_bias, uint64_t seed) {
    buf inp = brand((size_t)N * C, -1, 1, seed), w = brand((size_t)OC * C, -1, 1, seed + 1);
    buf b = brand(OC, -1, 1, seed + 2);
    buf out = brand((size_t)N * OC, 5, 6, seed + 3); // garbage must be overwritten
    double *want = dalloc((size_t)N * OC);
    matmul_reference(want, inp.h, w.h, with_bias ? b.h : NULL, N, C, OC);
    ops->matmul_forward(ctx, out.d, inp.d, w.d, with_bias ? b.d : NULL, N, C, OC);
    down(&out);
    check_close("matmul out", out.h, want, (size_t)N * OC, 1e-5, 1e-5);
    free(want);
    BFREE(&inp, &w, &b, &out);
}

static void test_matmul_forward(void **state) {
    (void)state;
    matmul_forward_case(7, 5, 6, 1, 10);
    matmul_forward_case(7, 5, 6, 0, 20);
    matmul_forward_case(300, 130, 70, 1, 30); // threaded bias fill
}

static void test_matmul_backward(void **state) {
    (void)state;
    const int N = 7, C = 5, OC = 6;
    matmul_ctx c = {.N = N, .C = C, .OC = OC};
    c.inp = brand(N * C, -1, 1, 1);
    c.w = brand(OC * C, -1, 1, 2);
    c.b = brand(OC, -1, 1, 3);
    c.r = brand(N * OC, -1, 1, 4);
    c.out = bnew(N * OC);
    // dinp starts as garbage: it is overwritten; dweight, dbias start at 0 and accumulate
    buf dinp = brand(N * C, 5, 6, 5), dw = bnew(OC * C), db = bnew(OC);
    ops->matmul_backward(ctx, dinp.d, dw.d, db.d, c.r.d, c.inp.d, c.w.d, N, C, OC, 0);
    down(&dinp), down(&dw), down(&db);

    double *fd = dalloc(N * C > OC * C ? N * C : OC * C);
    fd_grad(fd, &c.inp, N * C, matmul_objective, &c, 1e-2f);
    check_grad("matmul dinp", dinp.h, fd, N * C, 1e-3);
    fd_grad(fd, &c.w, OC * C, matmul_objective, &c, 1e-2f);
    check_grad("matmul dweight", dw.h, fd, OC * C, 1e-3);
    fd_grad(fd, &c.b, OC, matmul_objective, &c, 1e-2f);
    check_grad("matmul dbias", db.h, fd, OC, 1e-3);

    // a second call: dinp is overwritten (the same values), the parameter
    // gradients accumulate (twice the values)
    buf dinp1 = bdup(&dinp), dw1 = bdup(&dw), db1 = bdup(&db);
    ops->matmul_backward(ctx, dinp.d, dw.d, db.d, c.r.d, c.inp.d, c.w.d, N, C, OC, 0);
    down(&dinp), down(&dw), down(&db);
    check_same("matmul dinp (overwrite)", dinp.h, dinp1.h, N * C);
    check_doubled("matmul dweight", dw.h, dw1.h, OC * C);
    check_doubled("matmul dbias", db.h, db1.h, OC);
    // accumulate_dinp: dinp += dout @ weight
    ops->matmul_backward(ctx, dinp.d, NULL, NULL, c.r.d, c.inp.d, c.w.d, N, C, OC, 1);
    down(&dinp);
    check_doubled("matmul dinp (accumulate_dinp)", dinp.h, dinp1.h, N * C);

    // NULL outputs are skipped; the others are still computed
    buf g_inp = brand(N * C, 5, 6, 6), g_w = bnew(OC * C), g_b = bnew(OC);
    ops->matmul_backward(ctx, NULL, g_w.d, NULL, c.r.d, c.inp.d, c.w.d, N, C, OC, 0);
    down(&g_w), down(&g_b);
    check_close_f("matmul dweight only", g_w.h, dw1.h, OC * C, 1e-6, 1e-7);
    check_zero("matmul dbias (skipped)", g_b.h, OC);
    ops->matmul_backward(ctx, g_inp.d, NULL, g_b.d, c.r.d, c.inp.d, c.w.d, N, C, OC, 0);
    down(&g_inp), down(&g_b);
    check_close_f("matmul dinp only", g_inp.h, dinp1.h, N * C, 1e-6, 1e-7);
    check_close_f("matmul dbias only", g_b.h, db1.h, OC, 1e-6, 1e-7);
    ops->matmul_backward(ctx, NULL, NULL, NULL, c.r.d, c.inp.d, c.w.d, N, C, OC, 0); // must not crash
    // the first writer of an accumulated dinp needs no zeroing: NaN in an
    // overwritten dinp must not leak into it
    bset(&g_inp, NAN);
    ops->matmul_backward(ctx, g_inp.d, NULL, NULL, c.r.d, c.inp.d, c.w.d, N, C, OC, 0);
    down(&g_inp);
    check_close_f("matmul dinp over NaN", g_inp.h, dinp1.h, N * C, 1e-6, 1e-7);

    free(fd);
    BFREE(&c.inp, &c.w, &c.b, &c.r, &c.out, &dinp, &dw, &db, &dinp1, &dw1, &db1, &g_inp, &g_w, &g_b);
}

// Above the threading threshold, with OC not a multiple of the column blocks.
static void test_matmul_backward_large(void **state) {
    (void)state;
    const int N = 300, C = 130, OC = 70;
    buf inp = brand((size_t)N * C, -1, 1, 5), w = brand((size_t)OC * C, -1, 1, 6);
    buf dout = brand((size_t)N * OC, -1, 1, 7);
    buf dinp = brand((size_t)N * C, -1, 1, 8), dw = brand((size_t)OC * C, -1, 1, 9);
    buf db = brand(OC, -1, 1, 10);
    double *want_inp = dalloc((size_t)N * C), *want_w = dalloc((size_t)OC * C), *want_b = dalloc(OC);
    // accumulate_dinp set: every output adds to what it held
    for (int n = 0; n < N; n++)
        for (int i = 0; i < C; i++) {
            double s = dinp.h[(size_t)n * C + i];
            for (int o = 0; o < OC; o++) s += (double)dout.h[(size_t)n * OC + o] * w.h[(size_t)o * C + i];
            want_inp[(size_t)n * C + i] = s;
        }
    for (int o = 0; o < OC; o++) {
        for (int i = 0; i < C; i++) {
            double s = dw.h[(size_t)o * C + i];
            for (int n = 0; n < N; n++) s += (double)dout.h[(size_t)n * OC + o] * inp.h[(size_t)n * C + i];
            want_w[(size_t)o * C + i] = s;
        }
        double s = db.h[o];
        for (int n = 0; n < N; n++) s += dout.h[(size_t)n * OC + o];
        want_b[o] = s;
    }
    ops->matmul_backward(ctx, dinp.d, dw.d, db.d, dout.d, inp.d, w.d, N, C, OC, 1);
    down(&dinp), down(&dw), down(&db);
    check_close("matmul dinp (large)", dinp.h, want_inp, (size_t)N * C, 1e-4, 1e-4);
    check_close("matmul dweight (large)", dw.h, want_w, (size_t)OC * C, 1e-4, 1e-4);
    check_close("matmul dbias (large)", db.h, want_b, OC, 1e-4, 1e-4);
    free(want_inp), free(want_w), free(want_b);
    BFREE(&inp, &w, &dout, &dinp, &dw, &db);
}

// The fused fc1: pre equals matmul_forward with the bias, out equals
// gelu_forward(pre). The two compute the bias add in a different order
// (seeded into the GEMM, or added after it), so they agree to a few roundings
// of the envelope env = |bias| + sum_i |inp_i w_i|; GELU's slope is at most
// 1.13, and its own evaluation adds a few ulp of the result.
static void bias_gelu_case(int N, int C, int OC, uint64_t seed) {
    buf inp = brand((size_t)N * C, -2, 2, seed), w = brand((size_t)OC * C, -1, 1, seed + 1);
    buf b = brand(OC, -1, 1, seed + 2);
    buf pre = brand((size_t)N * OC, 5, 6, seed + 3), out = brand((size_t)N * OC, 5, 6, seed + 4);
    buf pre_ref = bnew((size_t)N * OC), out_ref = bnew((size_t)N * OC);
    ops->matmul_bias_gelu_forward(ctx, pre.d, out.d, inp.d, w.d, b.d, N, C, OC);
    ops->matmul_forward(ctx, pre_ref.d, inp.d, w.d, b.d, N, C, OC);
    ops->gelu_forward(ctx, out_ref.d, pre_ref.d, (size_t)N * OC);
    down(&pre), down(&out), down(&pre_ref), down(&out_ref);
    const double u = FLT_EPSILON / 2;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double env = fabs(b.h[o]);
            for (int i = 0; i < C; i++) env += fabs((double)inp.h[(size_t)n * C + i] * w.h[(size_t)o * C + i]);
            const size_t k = (size_t)n * OC + o;
            double tol_pre = 2.0 * (C + 2) * u * env;
            double tol_out = 1.13 * tol_pre + 8.0 * u * fabs(out_ref.h[k]) + 1e-30;
            if (!(fabs(pre.h[k] - pre_ref.h[k]) <= tol_pre) || !(fabs(out.h[k] - out_ref.h[k]) <= tol_out)) {
                print_error("bias_gelu [%d,%d]: pre %.9g vs %.9g, out %.9g vs %.9g\n", n, o, pre.h[k], pre_ref.h[k],
                            out.h[k], out_ref.h[k]);
                fail();
            }
        }
    BFREE(&inp, &w, &b, &pre, &out, &pre_ref, &out_ref);
}

static void test_matmul_bias_gelu_forward(void **state) {
    (void)state;
    bias_gelu_case(7, 5, 6, 120);
    bias_gelu_case(300, 130, 70, 130); // threaded epilogue
    bias_gelu_case(64, 384, 1536, 140); // the tutorial's fc1 width
}

// ---------------------------------------------------------------------------
// layernorm

typedef struct {
    buf out, mean, rstd, inp, w, b, r;
    int N, C;
    float eps;
} ln_ctx;

static double ln_objective(void *p) {
    ln_ctx *c = p;
    ops->layernorm_forward(ctx, c->out.d, c->mean.d, c->rstd.d, c->inp.d, c->w.d, c->b.d, c->N, c->C, c->eps);
    down(&c->out);
    return dot_r(c->out.h, c->r.h, (size_t)c->N * c->C);
}

static void ln_reference(double *out, double *mean, double *rstd, const float *inp, const float *w,
                         const float *b, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += x[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
        v /= C; // biased, as nn.LayerNorm
        double s = 1.0 / sqrt(v + eps);
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = s;
        for (int i = 0; i < C; i++) out[(size_t)n * C + i] = (x[i] - m) * s * w[i] + b[i];
    }
}

static void ln_forward_case(int N, int C, float eps, uint64_t seed) {
    buf inp = brand((size_t)N * C, -2, 3, seed), w = brand(C, 0.5f, 1.5f, seed + 1);
    buf b = brand(C, -1, 1, seed + 2);
    buf out = brand((size_t)N * C, 5, 6, seed + 3), mean = bnew(N), rstd = bnew(N);
    ops->layernorm_forward(ctx, out.d, mean.d, rstd.d, inp.d, w.d, b.d, N, C, eps);
    down(&out), down(&mean), down(&rstd);
    double *want = dalloc((size_t)N * C), *want_mean = dalloc(N), *want_rstd = dalloc(N);
    ln_reference(want, want_mean, want_rstd, inp.h, w.h, b.h, N, C, eps);
    check_close("layernorm out", out.h, want, (size_t)N * C, 1e-5, 1e-5);
    check_close("layernorm mean", mean.h, want_mean, N, 1e-5, 1e-6);
    check_close("layernorm rstd", rstd.h, want_rstd, N, 1e-5, 1e-6);
    free(want), free(want_mean), free(want_rstd);
    BFREE(&inp, &w, &b, &out, &mean, &rstd);
}

static void test_layernorm_forward(void **state) {
    (void)state;
    ln_forward_case(7, 5, 1e-6f, 40);
    ln_forward_case(300, 150, 1e-5f, 50); // threaded
    // a constant row: variance 0, so out = bias exactly (eps keeps rstd finite)
    buf inp = bnew(8), w = brand(8, 0.5f, 1.5f, 1), b = brand(8, -1, 1, 2);
    buf out = bnew(8), mean = bnew(1), rstd = bnew(1);
    bset(&inp, 3.0f);
    ops->layernorm_forward(ctx, out.d, mean.d, rstd.d, inp.d, w.d, b.d, 1, 8, 1e-6f);
    down(&out), down(&rstd);
    check_close_f("layernorm constant row", out.h, b.h, 8, 0, 0);
    assert_true(fabsf(rstd.h[0] - 1000.0f) < 0.1f);
    BFREE(&inp, &w, &b, &out, &mean, &rstd);
}

// res = a + b is one float addition either way (the same bits); the
// LayerNorm of it may sum in another order, so out agrees with
// layernorm_forward(add(a, b)) to a few roundings per term of the row's sums:
// |out| <= |w| |xhat| + |b| with |xhat| <= sqrt(C), and the mean and variance
// of C terms carry ~C u relative error.
static void residual_ln_case(int N, int C, int alias, uint64_t seed) {
    buf a = brand((size_t)N * C, -2, 3, seed), x = brand((size_t)N * C, -1, 1, seed + 1);
    buf w = brand(C, 0.5f, 1.5f, seed + 2), b = brand(C, -1, 1, seed + 3);
    buf res = brand((size_t)N * C, 5, 6, seed + 4), out = brand((size_t)N * C, 5, 6, seed + 5);
    buf mean = bnew(N), rstd = bnew(N);
    buf res_ref = bnew((size_t)N * C), out_ref = bnew((size_t)N * C), mean_ref = bnew(N), rstd_ref = bnew(N);
    ops->add(ctx, res_ref.d, a.d, x.d, res_ref.n);
    ops->layernorm_forward(ctx, out_ref.d, mean_ref.d, rstd_ref.d, res_ref.d, w.d, b.d, N, C, 1e-6f);
    // alias: res is a (the model's in-place residual stream)
    buf *resb = alias ? &a : &res;
    ops->residual_layernorm_forward(ctx, resb->d, out.d, mean.d, rstd.d, a.d, x.d, w.d, b.d, N, C, 1e-6f);
    down(resb), down(&out), down(&mean), down(&rstd);
    down(&res_ref), down(&out_ref), down(&mean_ref), down(&rstd_ref);
    assert_memory_equal(resb->h, res_ref.h, res_ref.n * sizeof(float));
    const double u = FLT_EPSILON / 2;
    for (int n = 0; n < N; n++) {
        check_close_f("residual layernorm mean", &mean.h[n], &mean_ref.h[n], 1, 4.0 * C * u, 4.0 * C * u);
        check_close_f("residual layernorm rstd", &rstd.h[n], &rstd_ref.h[n], 1, 4.0 * C * u, 0);
        for (int i = 0; i < C; i++) {
            const size_t k = (size_t)n * C + i;
            double env = fabs(w.h[i]) * sqrt((double)C) + fabs(b.h[i]);
            check_close_f("residual layernorm out", &out.h[k], &out_ref.h[k], 1, 0, 4.0 * C * u * env);
        }
    }
    BFREE(&a, &x, &w, &b, &res, &out, &mean, &rstd, &res_ref, &out_ref, &mean_ref, &rstd_ref);
}

static void test_residual_layernorm_forward(void **state) {
    (void)state;
    residual_ln_case(7, 5, 0, 150);
    residual_ln_case(7, 5, 1, 160);
    residual_ln_case(300, 150, 0, 170); // threaded
    residual_ln_case(40, 384, 1, 180);  // the tutorial's width, in place
}

static void test_layernorm_backward(void **state) {
    (void)state;
    const int N = 7, C = 5;
    ln_ctx c = {.N = N, .C = C, .eps = 1e-6f};
    c.inp = brand(N * C, -1, 2, 11);
    c.w = brand(C, 0.5f, 1.5f, 12); // non-trivial weight and bias
    c.b = brand(C, -1, 1, 13);
    c.r = brand(N * C, -1, 1, 14);
    c.out = bnew(N * C), c.mean = bnew(N), c.rstd = bnew(N);
    ln_objective(&c); // saves mean/rstd of the unperturbed input
    down(&c.mean), down(&c.rstd);
    buf mean = bdup(&c.mean), rstd = bdup(&c.rstd);
    // dinp_acc is the residual stream's gradient: it accumulates, like dweight and dbias
    buf dinp = bnew(N * C), dw = bnew(C), db = bnew(C);
    ops->layernorm_backward(ctx, dinp.d, dw.d, db.d, c.r.d, c.inp.d, c.w.d, mean.d, rstd.d, N, C);
    down(&dinp), down(&dw), down(&db);

    double *fd = dalloc(N * C);
    fd_grad(fd, &c.inp, N * C, ln_objective, &c, 3e-3f);
    check_grad("layernorm dinp", dinp.h, fd, N * C, 1e-2);
    fd_grad(fd, &c.w, C, ln_objective, &c, 1e-2f);
    check_grad("layernorm dweight", dw.h, fd, C, 1e-3);
    fd_grad(fd, &c.b, C, ln_objective, &c, 1e-2f);
    check_grad("layernorm dbias", db.h, fd, C, 1e-3);

    buf dinp1 = bdup(&dinp), dw1 = bdup(&dw), db1 = bdup(&db);
    ops->layernorm_backward(ctx, dinp.d, dw.d, db.d, c.r.d, c.inp.d, c.w.d, mean.d, rstd.d, N, C);
    down(&dinp), down(&dw), down(&db);
    check_doubled("layernorm dinp_acc", dinp.h, dinp1.h, N * C);
    check_doubled("layernorm dweight", dw.h, dw1.h, C);
    check_doubled("layernorm dbias", db.h, db1.h, C);

    buf g_inp = bnew(N * C), g_w = bnew(C), g_b = bnew(C);
    ops->layernorm_backward(ctx, NULL, g_w.d, NULL, c.r.d, c.inp.d, c.w.d, mean.d, rstd.d, N, C);
    down(&g_w), down(&g_b);
    check_close_f("layernorm dweight only", g_w.h, dw1.h, C, 1e-6, 1e-7);
    check_zero("layernorm dbias (skipped)", g_b.h, C);
    ops->layernorm_backward(ctx, g_inp.d, NULL, g_b.d, c.r.d, c.inp.d, c.w.d, mean.d, rstd.d, N, C);
    down(&g_inp), down(&g_b);
    check_close_f("layernorm dinp only", g_inp.h, dinp1.h, N * C, 1e-6, 1e-7);
    check_close_f("layernorm dbias only", g_b.h, db1.h, C, 1e-6, 1e-7);

    free(fd);
    BFREE(&c.inp, &c.w, &c.b, &c.r, &c.out, &c.mean, &c.rstd, &mean, &rstd, &dinp, &dw, &db, &dinp1, &dw1, &db1,
          &g_inp, &g_w, &g_b);
}

// Threaded path vs the backward formula evaluated in double.
static void test_layernorm_backward_large(void **state) {
    (void)state;
    const int N = 300, C = 150;
    buf inp = brand((size_t)N * C, -1, 2, 21), w = brand(C, 0.5f, 1.5f, 22);
    buf b = brand(C, -1, 1, 23), dout = brand((size_t)N * C, -1, 1, 24);
    buf out = bnew((size_t)N * C), mean = bnew(N), rstd = bnew(N);
    ops->layernorm_forward(ctx, out.d, mean.d, rstd.d, inp.d, w.d, b.d, N, C, 1e-6f);
    buf dinp = bnew((size_t)N * C), dw = bnew(C), db = bnew(C);
    ops->layernorm_backward(ctx, dinp.d, dw.d, db.d, dout.d, inp.d, w.d, mean.d, rstd.d, N, C);
    down(&dinp), down(&dw), down(&db);
    double *want_inp = dalloc((size_t)N * C), *want_w = dalloc(C), *want_b = dalloc(C);
    for (int n = 0; n < N; n++) {
        const float *x = inp.h + (size_t)n * C, *dy = dout.h + (size_t)n * C;
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += x[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
        double s = 1.0 / sqrt(v / C + 1e-6);
        double g_sum = 0, gx_sum = 0;
        for (int i = 0; i < C; i++) {
            double xhat = (x[i] - m) * s;
            g_sum += w.h[i] * dy[i];
            gx_sum += w.h[i] * dy[i] * xhat;
            want_w[i] += dy[i] * xhat;
            want_b[i] += dy[i];
        }
        for (int i = 0; i < C; i++) {
            double xhat = (x[i] - m) * s;
            want_inp[(size_t)n * C + i] = s * (w.h[i] * dy[i] - g_sum / C - xhat * gx_sum / C);
        }
    }
    check_close("layernorm dinp (large)", dinp.h, want_inp, (size_t)N * C, 1e-4, 1e-4);
    check_close("layernorm dweight (large)", dw.h, want_w, C, 1e-4, 1e-4);
    check_close("layernorm dbias (large)", db.h, want_b, C, 1e-4, 1e-4);
    free(want_inp), free(want_w), free(want_b);
    BFREE(&inp, &w, &b, &dout, &out, &mean, &rstd, &dinp, &dw, &db);
}

// ---------------------------------------------------------------------------
// GELU

static double gelu_ref(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double gelu_grad_ref(double x) {
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

static void test_gelu_forward(void **state) {
    (void)state;
    // a grid over [-10, 10] plus the edges; n is above the threading threshold
    const size_t n = 80001;
    buf x = bnew(n), out = brand(n, 5, 6, 1);
    for (size_t i = 0; i < n; i++) x.h[i] = -10.0f + 20.0f * (float)i / (float)(n - 1);
    x.h[0] = 0.0f, x.h[1] = -0.0f, x.h[2] = 1e-20f, x.h[3] = -40.0f, x.h[4] = 40.0f, x.h[5] = INFINITY;
    up(&x);
    ops->gelu_forward(ctx, out.d, x.d, n);
    down(&out);
    assert_true(out.h[5] == INFINITY); // GELU(inf) = inf * 1, as PyTorch
    for (size_t i = 6; i < n; i++) {
        double want = gelu_ref(x.h[i]);
        // float GELU via erff is accurate to a few ulp of |x|/2 (the size of
        // 0.5x and of the 1+erf cancellation for x < 0)
        double tol = 4e-7 * 0.5 * fabs(x.h[i]) + 1e-30;
        double err = fabs(out.h[i] - want);
        if (!(err <= tol)) {
            print_error("gelu(%.9g) = %.9g, want %.9g\n", x.h[i], out.h[i], want);
            fail();
        }
    }
    assert_true(out.h[0] == 0.0f && out.h[1] == 0.0f && out.h[2] == 5e-21f);
    assert_true(out.h[3] == 0.0f && out.h[4] == 40.0f);
    BFREE(&x, &out);
}

// NaN and inf inputs (a diverged step) must come out as NaN / the limit, and
// without undefined behaviour: the float-to-int conversion in vb_exp_nonpos
// once saw NaN, which UBSan reports (scripts/sanitize.sh).
static void test_nonfinite_inputs(void **state) {
    (void)state;
    assert_true(isnan(vb_exp_nonpos(NAN)));
    assert_true(vb_exp_nonpos(-INFINITY) == 0.0f && vb_exp_nonpos(0.0f) == 1.0f);
    assert_true(vb_exp_nonpos(-1.0f) == expf(-1.0f) || fabsf(vb_exp_nonpos(-1.0f) - expf(-1.0f)) < 1e-7f);
    const size_t n = 4;
    buf x = bnew(n), out = bnew(n), dx = bnew(n), dout = bnew(n);
    x.h[0] = NAN, x.h[1] = -INFINITY, x.h[2] = 1.0f, x.h[3] = -NAN;
    up(&x);
    bset(&dout, 1.0f);
    ops->gelu_forward(ctx, out.d, x.d, n);
    down(&out);
    assert_true(isnan(out.h[0]) && isnan(out.h[3]) && fabsf(out.h[2] - 0.841344746f) < 1e-6f);
    ops->gelu_backward(ctx, dx.d, x.d, dout.d, n);
    down(&dx);
    assert_true(isnan(dx.h[0]) && isnan(dx.h[3]));
    // a softmax row holding NaN: NaN out, no trap
    buf q = bnew(8), k = bnew(8), v = bnew(8), lse = bnew(2), o = bnew(8);
    bset(&q, 1.0f), bset(&v, 1.0f);
    for (int i = 0; i < 8; i++) k.h[i] = i == 0 ? NAN : 1.0f;
    up(&k);
    const size_t ws_bytes = ops->attention_workspace_bytes(ctx, 1, 2, 2, 1, 4);
    void *ws = ops->alloc(ctx, ws_bytes ? ws_bytes : 1);
    ops->attention_forward(ctx, o.d, lse.d, ws, q.d, k.d, v.d, 1, 2, 2, 1, 4);
    down(&o);
    assert_true(isnan(o.h[0]));
    ops->free(ctx, ws);
    BFREE(&x, &out, &dx, &dout, &q, &k, &v, &lse, &o);
}

typedef struct {
    buf out, inp, r;
    size_t n;
} gelu_ctx;

static double gelu_objective(void *p) {
    gelu_ctx *c = p;
    ops->gelu_forward(ctx, c->out.d, c->inp.d, c->n);
    down(&c->out);
    return dot_r(c->out.h, c->r.h, c->n);
}

static void test_gelu_backward(void **state) {
    (void)state;
    gelu_ctx c = {.n = 40};
    c.inp = brand(c.n, -4, 4, 31), c.r = brand(c.n, -1, 1, 32), c.out = bnew(c.n);
    buf dinp = brand(c.n, 5, 6, 34); // overwritten, not accumulated
    ops->gelu_backward(ctx, dinp.d, c.inp.d, c.r.d, c.n);
    down(&dinp);
    double *fd = dalloc(c.n);
    fd_grad(fd, &c.inp, c.n, gelu_objective, &c, 1e-2f);
    check_grad("gelu dinp", dinp.h, fd, c.n, 1e-3);
    buf dinp1 = bdup(&dinp);
    ops->gelu_backward(ctx, dinp.d, c.inp.d, c.r.d, c.n);
    down(&dinp);
    check_same("gelu dinp", dinp.h, dinp1.h, c.n);
    free(fd);

    // the exact derivative, pointwise and threaded, over NaN-filled garbage
    const size_t n = 80001;
    buf x = bnew(n), ones = bnew(n), g = bnew(n);
    for (size_t i = 0; i < n; i++) x.h[i] = -10.0f + 20.0f * (float)i / (float)(n - 1);
    up(&x);
    bset(&ones, 1.0f);
    bset(&g, NAN);
    ops->gelu_backward(ctx, g.d, x.d, ones.d, n);
    down(&g);
    double *want = dalloc(n);
    for (size_t i = 0; i < n; i++) want[i] = gelu_grad_ref(x.h[i]);
    check_close("gelu derivative", g.h, want, n, 1e-6, 1e-6);
    free(want);
    BFREE(&c.inp, &c.r, &c.out, &dinp, &dinp1, &x, &ones, &g);
}

// ---------------------------------------------------------------------------
// vector arithmetic

static double read_f64(const double *dev) {
    double v;
    ops->memcpy_d2h(ctx, &v, dev, sizeof v);
    ops->synchronize(ctx);
    return v;
}

static void test_vector_ops(void **state) {
    (void)state;
    double *ss_dev = ops->alloc(ctx, sizeof(double));
    const size_t sizes[] = {13, 100003}; // serial and threaded paths
    for (int s = 0; s < 2; s++) {
        size_t n = sizes[s];
        buf a = brand(n, -1, 1, 41), b = brand(n, -1, 1, 42), out = bnew(n);
        double *want = dalloc(n);
        ops->add(ctx, out.d, a.d, b.d, n);
        down(&out);
        for (size_t i = 0; i < n; i++) want[i] = (double)a.h[i] + b.h[i];
        check_close("add", out.h, want, n, 1e-7, 0);
        ops->add(ctx, a.d, a.d, b.d, n); // out aliasing a
        down(&a);
        check_close("add in place", a.h, want, n, 1e-7, 0);
        ops->add(ctx, out.d, b.d, out.d, n); // out aliasing b
        down(&out);
        for (size_t i = 0; i < n; i++) want[i] += b.h[i];
        check_close("add aliasing b", out.h, want, n, 1e-6, 1e-7);
        ops->accumulate(ctx, a.d, b.d, n);
        down(&a);
        check_close("accumulate", a.h, want, n, 1e-6, 1e-7);
        ops->scale(ctx, a.d, -2.5f, n);
        down(&a);
        for (size_t i = 0; i < n; i++) want[i] *= -2.5;
        check_close("scale", a.h, want, n, 1e-6, 1e-7);
        double ss = 0;
        for (size_t i = 0; i < n; i++) ss += (double)b.h[i] * b.h[i];
        ops->sum_squares(ctx, ss_dev, b.d, n);
        assert_true(fabs(read_f64(ss_dev) - ss) <= 1e-12 * ss);
        // cast_to_act: float32 activations are a copy
        ops->cast_to_act(ctx, out.d, b.d, n);
        down(&out);
        assert_memory_equal(out.h, b.h, n * sizeof(float));
        free(want);
        BFREE(&a, &b, &out);
    }
    // sum_squares accumulates in double: a float running sum of 1e6 values
    // of 0.01 would be off by far more than 1e-10 relative
    const size_t n = 1000000;
    buf x = bnew(n);
    bset(&x, 0.1f);
    const double want_ss = (double)n * (double)0.1f * (double)0.1f;
    ops->sum_squares(ctx, ss_dev, x.d, n);
    assert_true(fabs(read_f64(ss_dev) - want_ss) <= 1e-10 * want_ss);
    BFREE(&x);
    ops->free(ctx, ss_dev);
}

// ---------------------------------------------------------------------------
// patchify / unpatchify / positional embedding

static void patch_mapping_case(int B, int C, int H, int W, int p) {
    const int Hp = H / p, Wp = W / p, T = Hp * Wp, K = C * p * p;
    const size_t n = (size_t)B * C * H * W;
    buf img = bnew(n), patches = brand(n, 5, 6, 1);
    for (size_t i = 0; i < n; i++) img.h[i] = (float)i; // every value unique
    up(&img);
    ops->patchify(ctx, patches.d, img.d, B, C, H, W, p);
    down(&patches);
    // Conv2d weight order [D, C, p, p]: patch (ph, pw), inner (c, i, j)
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    int t = (y / p) * Wp + x / p, inner = (c * p + y % p) * p + x % p;
                    float want = img.h[(((size_t)b * C + c) * H + y) * W + x];
                    float got = patches.h[((size_t)b * T + t) * K + inner];
                    if (got != want) {
                        print_error("patchify b%d c%d y%d x%d: got %g want %g\n", b, c, y, x, got, want);
                        fail();
                    }
                }

    // unpatchify: tokens viewed as [B, Hp, Wp, p(i), p(j), C], einsum
    // "nhwpqc->nchpwq": img[n, c, h*p + i, w*p + j] = tokens[n, h, w, i, j, c]
    buf tokens = bnew(n), out = brand(n, 5, 6, 2);
    for (size_t i = 0; i < n; i++) tokens.h[i] = (float)i + 0.5f;
    up(&tokens);
    ops->unpatchify(ctx, out.d, tokens.d, B, C, H, W, p);
    down(&out);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hp; h++)
            for (int w = 0; w < Wp; w++)
                for (int i = 0; i < p; i++)
                    for (int j = 0; j < p; j++)
                        for (int c = 0; c < C; c++) {
                            float want = tokens.h[((((size_t)b * Hp + h) * Wp + w) * p + i) * p * C +
                                                  (size_t)j * C + c];
                            float got = out.h[(((size_t)b * C + c) * H + h * p + i) * W + w * p + j];
                            if (got != want) {
                                print_error("unpatchify b%d h%d w%d i%d j%d c%d: got %g want %g\n",
                                            b, h, w, i, j, c, got, want);
                                fail();
                            }
                        }
    // round trip: the backward is the inverse permutation and overwrites
    buf back = brand(n, 5, 6, 3);
    ops->unpatchify_backward(ctx, back.d, out.d, B, C, H, W, p);
    down(&back);
    assert_memory_equal(back.h, tokens.h, n * sizeof(float));
    BFREE(&img, &patches, &tokens, &out, &back);
}

static void test_patchify_unpatchify(void **state) {
    (void)state;
    patch_mapping_case(2, 3, 4, 6, 2);    // non-square, C > 1
    patch_mapping_case(2, 4, 64, 128, 8); // threaded
    patch_mapping_case(1, 2, 3, 3, 3);    // a single patch
}

typedef struct {
    buf out, inp, pos, r;
    int B, T, D;
} pos_ctx;

static double pos_objective(void *p) {
    pos_ctx *c = p;
    ops->add_pos_embed(ctx, c->out.d, c->inp.d, c->pos.d, c->B, c->T, c->D);
    down(&c->out);
    return dot_r(c->out.h, c->r.h, (size_t)c->B * c->T * c->D);
}

static void test_pos_embed(void **state) {
    (void)state;
    const int B = 3, T = 4, D = 5;
    pos_ctx c = {.B = B, .T = T, .D = D};
    c.inp = brand(B * T * D, -1, 1, 51), c.pos = brand(T * D, -1, 1, 52), c.r = brand(B * T * D, -1, 1, 53);
    c.out = bnew(B * T * D);
    pos_objective(&c);
    double want[3 * 4 * 5];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++)
                want[(b * T + t) * D + d] = (double)c.inp.h[(b * T + t) * D + d] + c.pos.h[t * D + d];
    check_close("pos embed out", c.out.h, want, B * T * D, 1e-7, 0);
    ops->add_pos_embed(ctx, c.inp.d, c.inp.d, c.pos.d, B, T, D); // in place
    down(&c.inp);
    check_close("pos embed in place", c.inp.h, want, B * T * D, 1e-7, 0);

    buf dpos = bnew(T * D);
    ops->add_pos_embed_backward(ctx, dpos.d, c.r.d, B, T, D);
    down(&dpos);
    double fd[4 * 5];
    fd_grad(fd, &c.pos, T * D, pos_objective, &c, 1e-2f);
    check_grad("pos embed dpos", dpos.h, fd, T * D, 1e-3);
    buf dpos1 = bdup(&dpos);
    ops->add_pos_embed_backward(ctx, dpos.d, c.r.d, B, T, D);
    down(&dpos);
    check_doubled("pos embed dpos", dpos.h, dpos1.h, T * D);

    // threaded sizes vs the plain sum over the batch
    const int B2 = 4, T2 = 300, D2 = 64;
    buf g = brand((size_t)B2 * T2 * D2, -1, 1, 54), dp = brand((size_t)T2 * D2, -1, 1, 55);
    double *wdp = dalloc((size_t)T2 * D2);
    for (int t = 0; t < T2 * D2; t++) {
        wdp[t] = dp.h[t];
        for (int b = 0; b < B2; b++) wdp[t] += g.h[(size_t)b * T2 * D2 + t];
    }
    ops->add_pos_embed_backward(ctx, dp.d, g.d, B2, T2, D2);
    down(&dp);
    check_close("pos embed dpos (large)", dp.h, wdp, (size_t)T2 * D2, 1e-5, 1e-6);
    free(wdp);
    BFREE(&c.inp, &c.pos, &c.r, &c.out, &dpos, &dpos1, &g, &dp);
}

// ---------------------------------------------------------------------------
// loss and metric

static void test_rel_l2_loss_value(void **state) {
    (void)state;
    // sample 0: diff (3, 4) -> 5, ||tar|| = ||(1, 0)|| = 1 -> 5
    // sample 1: pred == tar -> 0;  loss = (5 + 0) / 2
    buf pred = bnew(4), tar = bnew(4), per = brand(2, 5, 6, 2), dpred = brand(4, 5, 6, 1);
    buf loss = brand(1, 5, 6, 3); // backend memory, overwritten
    const float p_host[4] = {4, 4, 1, 2}, t_host[4] = {1, 0, 1, 2};
    memcpy(pred.h, p_host, sizeof p_host);
    memcpy(tar.h, t_host, sizeof t_host);
    up(&pred), up(&tar);
    ops->rel_l2_loss_forward(ctx, loss.d, per.d, pred.d, tar.d, 2, 2);
    down(&loss), down(&per);
    assert_true(fabsf(loss.h[0] - 2.5f) < 1e-6f);
    assert_true(fabsf(per.h[0] - 5.0f) < 1e-6f && per.h[1] == 0.0f);
    bset(&loss, 0.0f);
    ops->rel_l2_loss_forward(ctx, loss.d, NULL, pred.d, tar.d, 2, 2); // no per-sample terms
    assert_true(fabsf(read_f32(loss.d) - 2.5f) < 1e-6f);
    // dpred = dloss/B * (p - t) / (||p - t|| ||t||): sample 0 -> 0.5 * (3, 4) / 5,
    // sample 1 has a zero difference and gets a zero (not NaN) gradient;
    // dloss NULL means 1
    ops->rel_l2_loss_backward(ctx, dpred.d, pred.d, tar.d, 2, 2, NULL);
    down(&dpred);
    const double want[4] = {0.3, 0.4, 0, 0};
    check_close("rel l2 dpred (hand)", dpred.h, want, 4, 1e-6, 1e-7);
    BFREE(&pred, &tar, &per, &dpred, &loss);
}

typedef struct {
    buf pred, tar, loss;
    int B;
    size_t n;
} loss_ctx;

static double loss_objective(void *p) {
    loss_ctx *c = p;
    ops->rel_l2_loss_forward(ctx, c->loss.d, NULL, c->pred.d, c->tar.d, c->B, c->n);
    return read_f32(c->loss.d);
}

static void test_rel_l2_loss_backward(void **state) {
    (void)state;
    loss_ctx c = {.B = 3, .n = 6};
    const size_t total = (size_t)c.B * c.n;
    c.pred = brand(total, -1, 1, 61), c.tar = brand(total, 0.5f, 2.0f, 62), c.loss = bnew(1);
    buf dpred = brand(total, 5, 6, 63); // overwritten, not accumulated
    buf dloss = bnew(1);                // the loss scale, read from backend memory
    bset(&dloss, 1.7f);
    ops->rel_l2_loss_backward(ctx, dpred.d, c.pred.d, c.tar.d, c.B, c.n, dloss.d);
    down(&dpred);
    double fd[18];
    fd_grad(fd, &c.pred, total, loss_objective, &c, 1e-2f);
    for (size_t i = 0; i < total; i++) fd[i] *= 1.7f;
    check_grad("rel l2 dpred", dpred.h, fd, total, 1e-2);

    // threaded per-sample sums vs double loops
    const int B = 2;
    const size_t n = 100000;
    buf p = brand(B * n, -1, 1, 64), t = brand(B * n, -1, 1, 65), per = bnew(B);
    double want_loss = 0;
    for (int b = 0; b < B; b++) {
        double dd = 0, tt = 0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)p.h[b * n + i] - t.h[b * n + i];
            dd += d * d;
            tt += (double)t.h[b * n + i] * t.h[b * n + i];
        }
        want_loss += sqrt(dd) / sqrt(tt) / B;
    }
    ops->rel_l2_loss_forward(ctx, c.loss.d, per.d, p.d, t.d, B, n);
    down(&per);
    const float loss = read_f32(c.loss.d);
    assert_true(fabs(loss - want_loss) <= 1e-6 * want_loss);
    assert_true(fabs(0.5 * (per.h[0] + per.h[1]) - want_loss) <= 1e-6 * want_loss);
    BFREE(&c.pred, &c.tar, &c.loss, &dpred, &dloss, &p, &t, &per);
}

static void rmse_accumulate(double *host, const buf *pred, const buf *tar, int B, int C, int H, int W) {
    double *dev = ops->alloc(ctx, (size_t)C * sizeof(double));
    ops->memcpy_h2d(ctx, dev, host, (size_t)C * sizeof(double));
    ops->weighted_rmse_accumulate(ctx, dev, pred->d, tar->d, B, C, H, W);
    ops->memcpy_d2h(ctx, host, dev, (size_t)C * sizeof(double));
    ops->synchronize(ctx);
    ops->free(ctx, dev);
}

static void test_weighted_rmse(void **state) {
    (void)state;
    // B=2, C=2, H=3, W=2. lat = 90, 0, -90; with the tutorial's 3.1416 the pole
    // cosine is c90 = cos(1.5708) = -3.67320510e-6 (not 0): s = 1 + 2 c90,
    // w = (3 c90, 3, 3 c90) / s.
    const int B = 2, C = 2, H = 3, W = 2;
    const double c90 = cos(1.5708), s = 1.0 + 2.0 * c90;
    assert_true(fabs(c90 + 3.6732051e-6) < 1e-12); // the hand value
    buf tar = brand(B * C * H * W, -1, 1, 71), pred = bdup(&tar);
    // errors (pred - tar) at [b][c][h][w]
    // b0 c0: 1 at (1,0) and (1,1)          -> mean = 2*w1/6        = 1/s
    // b0 c1: 2 at (1,0), 1 at (1,1)        -> mean = 5*w1/6        = 2.5/s
    // b1 c0: 1 at (0,0), 3 at (1,1)        -> mean = (w0 + 9 w1)/6 = (3 c90 + 27)/(6 s)
    // b1 c1: none                          -> 0
#define AT(b, c, h, w) ((((b) * C + (c)) * H + (h)) * W + (w))
    pred.h[AT(0, 0, 1, 0)] += 1, pred.h[AT(0, 0, 1, 1)] += 1;
    pred.h[AT(0, 1, 1, 0)] += 2, pred.h[AT(0, 1, 1, 1)] += 1;
    pred.h[AT(1, 0, 0, 0)] += 1, pred.h[AT(1, 0, 1, 1)] += 3;
#undef AT
    up(&pred);
    // recompute the errors actually stored in float (pred = tar + e rounds)
    double e[2 * 2 * 3 * 2];
    for (int i = 0; i < B * C * H * W; i++) e[i] = (double)pred.h[i] - tar.h[i];
    const double w0 = 3 * c90 / s, w1 = 3 / s;
    double want[2];
    want[0] = 7.0 + sqrt((w1 * e[2] * e[2] + w1 * e[3] * e[3]) / 6) +
              sqrt((w0 * e[12] * e[12] + w1 * e[15] * e[15]) / 6);
    want[1] = 7.0 + sqrt((w1 * e[8] * e[8] + w1 * e[9] * e[9]) / 6);
    // and the same with the exact errors, to pin the hand arithmetic
    assert_true(fabs(want[0] - (7.0 + sqrt(1 / s) + sqrt((3 * c90 + 27) / (6 * s)))) < 1e-5);
    assert_true(fabs(want[1] - (7.0 + sqrt(2.5 / s))) < 1e-5);
    double rmse[2] = {7.0, 7.0}; // accumulates into backend float64 memory
    rmse_accumulate(rmse, &pred, &tar, B, C, H, W);
    for (int c = 0; c < C; c++) {
        if (!(fabs(rmse[c] - want[c]) < 1e-9)) {
            print_error("weighted rmse[%d] = %.12g, want %.12g\n", c, rmse[c], want[c]);
            fail();
        }
    }
    // pi instead of 3.1416 would give sqrt(1/1) exactly for b0 c0: make sure
    // the test can tell (the difference is ~3.7e-6)
    assert_true(fabs(sqrt(1 / s) - 1.0) > 3e-6);
    BFREE(&pred, &tar);

    // threaded sizes vs a direct double evaluation of the formula
    const int B2 = 2, C2 = 3, H2 = 91, W2 = 400;
    const size_t n2 = (size_t)B2 * C2 * H2 * W2;
    buf p2 = brand(n2, -1, 1, 72), t2 = brand(n2, -1, 1, 73);
    double sum_cos = 0;
    for (int j = 0; j < H2; j++) sum_cos += cos(3.1416 / 180 * (90.0 - j * 180.0 / (H2 - 1)));
    double want2[3] = {0, 0, 0}, got2[3] = {0, 0, 0};
    for (int b = 0; b < B2; b++)
        for (int c = 0; c < C2; c++) {
            double acc = 0;
            for (int j = 0; j < H2; j++) {
                double wj = H2 * cos(3.1416 / 180 * (90.0 - j * 180.0 / (H2 - 1))) / sum_cos;
                for (int x = 0; x < W2; x++) {
                    size_t i = (((size_t)b * C2 + c) * H2 + j) * W2 + x;
                    double d = (double)p2.h[i] - t2.h[i];
                    acc += wj * d * d;
                }
            }
            want2[c] += sqrt(acc / (H2 * W2));
        }
    rmse_accumulate(got2, &p2, &t2, B2, C2, H2, W2);
    for (int c = 0; c < C2; c++) assert_true(fabs(got2[c] - want2[c]) < 1e-9 * want2[c]);
    BFREE(&p2, &t2);
}

// ---------------------------------------------------------------------------
// Adam: its arguments come from backend memory

static void adam_case(size_t n, const float *lrs, int steps, float b1, float b2, float eps, float glo,
                      float ghi, float grad_scale, uint64_t seed) {
    buf p = brand(n, -1, 1, seed), m = bnew(n), v = bnew(n), g = bnew(n);
    vb_adam_args *args_dev = ops->alloc(ctx, sizeof(vb_adam_args));
    double *pd = dalloc(n), *md = dalloc(n), *vd = dalloc(n);
    for (size_t i = 0; i < n; i++) pd[i] = p.h[i];
    for (int step = 1; step <= steps; step++) {
        const float lr = lrs[step - 1];
        tu_fill_uniform(g.h, n, glo, ghi, seed + 10 * step);
        up(&g);
        const vb_adam_args a = {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .grad_scale = grad_scale,
                                .step = step};
        ops->memcpy_h2d(ctx, args_dev, &a, sizeof a);
        ops->adam_update(ctx, p.d, NULL, g.d, m.d, v.d, n, args_dev, NULL);
        const double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
        for (size_t i = 0; i < n; i++) {
            const double gi = (double)g.h[i] * grad_scale;
            md[i] = (double)b1 * md[i] + (1 - (double)b1) * gi;
            vd[i] = (double)b2 * vd[i] + (1 - (double)b2) * gi * gi;
            pd[i] -= lr / bc1 * md[i] / (sqrt(vd[i]) / sqrt(bc2) + eps);
        }
    }
    down(&p), down(&m), down(&v);
    check_close("adam m", m.h, md, n, 1e-5, 1e-9);
    check_close("adam v", v.h, vd, n, 1e-5, 1e-12);
    // each update is ~lr; param is compared to ~1e-3 of the largest one
    float lr_max = 0;
    for (int i = 0; i < steps; i++) lr_max = fmaxf(lr_max, lrs[i]);
    check_close("adam param", p.h, pd, n, 0, 3e-3 * lr_max + 2e-7);
    free(pd), free(md), free(vd);
    ops->free(ctx, args_dev);
    BFREE(&p, &m, &v, &g);
}

static void test_adam(void **state) {
    (void)state;
    const float lr3[3] = {1e-3f, 1e-3f, 1e-3f};
    adam_case(37, lr3, 3, 0.9f, 0.999f, 1e-8f, -1, 1, 1.0f, 81);
    // eps comparable to sqrt(v): a misplaced eps or bias correction shows
    const float lr3b[3] = {1e-2f, 1e-2f, 1e-2f};
    adam_case(100000, lr3b, 3, 0.8f, 0.95f, 1e-2f, -0.02f, 0.02f, 1.0f, 82);
    // the lr of each step is the one in backend memory at that step
    const float lr2[2] = {1e-3f, 5e-2f};
    adam_case(41, lr2, 2, 0.9f, 0.95f, 1e-8f, -1, 1, 1.0f, 83);
    // grad_scale multiplies every gradient first (the fp16 unscale)
    adam_case(41, lr2, 2, 0.9f, 0.95f, 1e-3f, -64, 64, 1.0f / 64.0f, 84);
}

// Two steps with different lr, each read from backend memory: the second
// update is the first's with lr2 / lr1 of its size (same gradient, so with
// bias correction the step is lr * sign-ish term, and only lr differs).
static void test_adam_args_from_backend(void **state) {
    (void)state;
    const size_t n = 5;
    buf p = bnew(n), m = bnew(n), v = bnew(n), g = bnew(n);
    bset(&g, 0.5f);
    vb_adam_args *args_dev = ops->alloc(ctx, sizeof(vb_adam_args));
    vb_adam_args *args_host = ops->alloc_host(ctx, sizeof(vb_adam_args));
    *args_host = (vb_adam_args){.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 0.0f, .grad_scale = 1.0f, .step = 1};
    ops->memcpy_h2d(ctx, args_dev, args_host, sizeof *args_host);
    ops->adam_update(ctx, p.d, NULL, g.d, m.d, v.d, n, args_dev, NULL);
    down(&p);
    // a constant gradient with eps 0: m_hat / sqrt(v_hat) = 1, the step is exactly lr
    for (size_t i = 0; i < n; i++) assert_true(fabsf(p.h[i] + 0.1f) < 1e-6f);
    ops->synchronize(ctx); /* the copy has read args_host: it may change */
    args_host->lr = 0.02f;
    args_host->step = 2;
    ops->memcpy_h2d(ctx, args_dev, args_host, sizeof *args_host);
    ops->adam_update(ctx, p.d, NULL, g.d, m.d, v.d, n, args_dev, NULL);
    down(&p);
    for (size_t i = 0; i < n; i++) assert_true(fabsf(p.h[i] + 0.12f) < 1e-6f);
    ops->free_host(ctx, args_host);
    ops->free(ctx, args_dev);
    BFREE(&p, &m, &v, &g);
}

static int setup(void **state) {
    (void)state;
    ops = vb_ops_cpu();
    char err[256] = "";
    vb_ctx_opts o = {.act = VB_DTYPE_F32};
    ctx = ops->ctx_create(&o, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "cpu ctx_create: %s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    ops->ctx_destroy(ctx);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_matmul_forward),
        cmocka_unit_test(test_matmul_backward),
        cmocka_unit_test(test_matmul_backward_large),
        cmocka_unit_test(test_matmul_bias_gelu_forward),
        cmocka_unit_test(test_layernorm_forward),
        cmocka_unit_test(test_residual_layernorm_forward),
        cmocka_unit_test(test_layernorm_backward),
        cmocka_unit_test(test_layernorm_backward_large),
        cmocka_unit_test(test_gelu_forward),
        cmocka_unit_test(test_gelu_backward),
        cmocka_unit_test(test_nonfinite_inputs),
        cmocka_unit_test(test_vector_ops),
        cmocka_unit_test(test_patchify_unpatchify),
        cmocka_unit_test(test_pos_embed),
        cmocka_unit_test(test_rel_l2_loss_value),
        cmocka_unit_test(test_rel_l2_loss_backward),
        cmocka_unit_test(test_weighted_rmse),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_adam_args_from_backend),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
