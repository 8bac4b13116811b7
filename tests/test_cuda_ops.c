/* test_cuda_ops.c: the CUDA op table against the CPU op table.
 *
 * Skips (exit 77, with the reason on stdout) when the CUDA backend is not
 * compiled in (configure with -DVB_CUDA=ON) or no GPU is visible.
 *
 * Every op runs on both backends with the same inputs: fresh random values
 * (never zeros) uploaded to each, outputs filled with NaN beforehand, results
 * copied back after a synchronize. The CPU backend's numerics are the
 * reference. One line per case names the op, the dtype, the shape, the worst
 * error and its tolerance, so one run on a GPU shows the state of every op:
 *   ok   matmul_forward   float32  N=576 C=192 OC=768 bias   err 1.2e-07 (tol 1e-05)
 * A CUDA failure exits 1 with a line naming the case being run.
 *
 * Errors. "elem": max |g - r| / max(|r|, floor) over elements; "norm":
 * max |g - r| / max |r| (for sums with cancellation: attention, LayerNorm
 * gradients); "scaled": max |g - r| / s with s the same GEMM on |inputs|,
 * i.e. sum |a||b| per element (the bound a float GEMM is held to);
 * accumulated outputs are measured against max |r - preset| (the increment).
 * float32 with TF32 off must agree to ~1e-5; TF32, bfloat16 and float16
 * contexts run the same inputs (rounded to the dtype on both sides) with
 * tolerances of the dtype's precision. A NaN anywhere fails.
 *
 * `test_cuda_ops --only PATTERN` runs the test functions whose names match
 * PATTERN (cmocka's filter: * and ? wildcards), e.g. `--only test_attention`
 * under compute-sanitizer, whose checkers make a full run too slow
 * (`--only test_attention_tc_small`: the tensor-core kernels at small shapes).
 *
 * `test_cuda_ops --bench [B]` instead times the GEMMs, attention and LayerNorm
 * at the base config's shapes with B samples (CUDA events) for float32, TF32
 * and bfloat16, and attention through cuDNN beside ours when built with it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/test_util.h"
#include "core/util/common.h"
#include "kernels/fp8.h"
#include "kernels/half.h"
#include "kernels/ops.h"

static const vb_ops *G; // cuda
static const vb_ops *H; // cpu (reference)
static vb_ctx *hctx;
static vb_ctx *gctx[3]; // indexed by vb_dtype
static vb_ctx *gtf32;   // float32 with TF32 GEMMs and attention
static vb_ctx *gcudnn[3]; // bf16 / f16 with attention through cuDNN (NULL without cuDNN)

// ---------------------------------------------------------------------------
// x rounded to dtype t (what a buffer of that dtype holds)
static float round_to(vb_dtype t, float x) {
    return t == VB_DTYPE_BF16  ? vb_bf16_to_f32(vb_f32_to_bf16(x))
           : t == VB_DTYPE_F16 ? vb_f16_to_f32(vb_f32_to_f16(x))
                               : x;
}

// ---------------------------------------------------------------------------
// buffers: host values, a CPU backend copy (float32) and a CUDA copy (in the
// context's activation dtype when act is set, else float32), both `off`
// elements into their allocation (to exercise unaligned views)

typedef struct {
    size_t n, off;
    vb_ctx *g;
    int act;
    float *h;
    char *c, *d;
} tb;

static size_t gelem(const tb *b) { return b->act ? vb_dtype_size(b->g->act) : 4; }
static void *CP(const tb *b) { return b->c + b->off * 4; }
static void *DP(const tb *b) { return b->d + b->off * gelem(b); }

static tb tb_new_off(vb_ctx *g, size_t n, int act, size_t off) {
    tb b = {n, off, g, act, calloc(n ? n : 1, sizeof(float)), NULL, NULL};
    assert_non_null(b.h);
    b.c = H->alloc(hctx, (n + off) * 4);
    b.d = G->alloc(g, (n + off) * gelem(&b));
    return b;
}
static tb tb_new(vb_ctx *g, size_t n, int act) { return tb_new_off(g, n, act, 0); }

// h -> both backends (rounded to the CUDA side's dtype first, on both sides)
static void tb_up(tb *b) {
    const vb_dtype t = b->act ? b->g->act : VB_DTYPE_F32;
    for (size_t i = 0; i < b->n; i++) b->h[i] = round_to(t, b->h[i]);
    H->memcpy_h2d(hctx, CP(b), b->h, b->n * 4);
    void *tmp = malloc(b->n * gelem(b) + 1);
    assert_non_null(tmp);
    if (t == VB_DTYPE_F32) memcpy(tmp, b->h, b->n * 4);
    else
        for (size_t i = 0; i < b->n; i++)
            ((uint16_t *)tmp)[i] = t == VB_DTYPE_BF16 ? vb_f32_to_bf16(b->h[i]) : vb_f32_to_f16(b->h[i]);
    G->memcpy_h2d(b->g, DP(b), tmp, b->n * gelem(b));
    G->synchronize(b->g);
    H->synchronize(hctx);
    free(tmp);
}

static tb tb_rand(vb_ctx *g, size_t n, int act, float lo, float hi, uint64_t seed) {
    tb b = tb_new(g, n, act);
    tu_fill_uniform(b.h, n, lo, hi, seed);
    tb_up(&b);
    return b;
}

static void tb_fill(tb *b, float v) {
    for (size_t i = 0; i < b->n; i++) b->h[i] = v;
    tb_up(b);
}

// outputs start as NaN on both sides: whatever an op does not write stays NaN
static void tb_poison(tb *b) { tb_fill(b, NAN); }

// CUDA copy -> out (decoded to float)
static void tb_gpu(const tb *b, float *out) {
    const vb_dtype t = b->act ? b->g->act : VB_DTYPE_F32;
    void *tmp = malloc(b->n * gelem(b) + 1);
    assert_non_null(tmp);
    G->memcpy_d2h(b->g, tmp, DP(b), b->n * gelem(b));
    G->synchronize(b->g);
    for (size_t i = 0; i < b->n; i++)
        out[i] = t == VB_DTYPE_F32   ? ((float *)tmp)[i]
                 : t == VB_DTYPE_BF16 ? vb_bf16_to_f32(((uint16_t *)tmp)[i])
                                      : vb_f16_to_f32(((uint16_t *)tmp)[i]);
    free(tmp);
}

static void tb_cpu(const tb *b, float *out) {
    H->memcpy_d2h(hctx, out, CP(b), b->n * 4);
    H->synchronize(hctx);
}

static void tb_free(tb *b) {
    free(b->h);
    H->free(hctx, b->c);
    G->free(b->g, b->d);
    memset(b, 0, sizeof *b);
}

#define TB_FREE(...)                                                              \
    do {                                                                          \
        tb *bs_[] = {__VA_ARGS__};                                                \
        for (size_t i_ = 0; i_ < sizeof bs_ / sizeof *bs_; i_++) tb_free(bs_[i_]); \
    } while (0)

static float *fmalloc(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

// both sides of b, downloaded
typedef struct {
    float *g, *r;
    size_t n;
} pair;

static pair fetch(const tb *b) {
    pair p = {fmalloc(b->n), fmalloc(b->n), b->n};
    tb_gpu(b, p.g);
    tb_cpu(b, p.r);
    return p;
}

static void pair_free(pair *p) {
    free(p->g);
    free(p->r);
}

// ---------------------------------------------------------------------------
// errors and the report

static int nan_mismatch(double g, double r) { return isnan(g) || isnan(r) || isinf(g) != isinf(r); }

static double err_elem(const float *g, const float *r, size_t n, double floor) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (nan_mismatch(g[i], r[i])) return INFINITY;
        if (isinf(r[i])) {
            if (g[i] != r[i]) return INFINITY;
            continue;
        }
        double s = fabs((double)r[i]);
        double e = fabs((double)g[i] - (double)r[i]) / (s > floor ? s : floor);
        if (e > worst) worst = e;
    }
    return worst;
}

static double err_norm(const float *g, const float *r, size_t n) {
    double diff = 0.0, mag = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (nan_mismatch(g[i], r[i])) return INFINITY;
        diff = fmax(diff, fabs((double)g[i] - (double)r[i]));
        mag = fmax(mag, fabs((double)r[i]));
    }
    return diff / (mag > 0 ? mag : 1e-30);
}

// accumulated output: the error relative to the largest increment r - preset
static double err_acc(const float *g, const float *r, const float *preset, size_t n) {
    double diff = 0.0, mag = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (nan_mismatch(g[i], r[i])) return INFINITY;
        diff = fmax(diff, fabs((double)g[i] - (double)r[i]));
        mag = fmax(mag, fabs((double)r[i] - (double)preset[i]));
    }
    return diff / (mag > 0 ? mag : 1e-30);
}

static double err_scaled(const float *g, const float *r, const float *s, size_t n) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (nan_mismatch(g[i], r[i])) return INFINITY;
        double e = fabs((double)g[i] - (double)r[i]) / (s[i] > 1e-30f ? (double)s[i] : 1e-30);
        if (e > worst) worst = e;
    }
    return worst;
}

static double maxabs(const float *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

// the smallest magnitude an element is measured relative to: float16 results
// below its normal range (6.1e-5) are subnormal, with absolute spacing 6e-8
static double act_floor(vb_ctx *g, double floor) {
    return g->act == VB_DTYPE_F16 && floor < 6.1e-5 ? 6.1e-5 : floor;
}

static int g_failures;

static const char *label(vb_ctx *g) {
    if (g == gtf32) return "tf32";
    if (g && (g == gcudnn[VB_DTYPE_BF16] || g == gcudnn[VB_DTYPE_F16]))
        return g->act == VB_DTYPE_BF16 ? "bf16+cuDNN" : "f16+cuDNN";
    return vb_dtype_name(g->act);
}

// one line per case; returns 1 on failure
static int report(const char *op, vb_ctx *g, const char *shape, const char *what, double err,
                  double tol) {
    const int ok = err <= tol; // NaN and inf fail
    printf("%-4s %-27s %-8s %-44s %-10s err %.2e (tol %.0e)\n", ok ? "ok" : "FAIL", op, label(g),
           shape, what, err, tol);
    fflush(stdout);
    if (!ok) g_failures++;
    return !ok;
}

// the case being run, named in a CUDA failure's line
static void begin_case(const char *op, vb_ctx *g, const char *shape) {
    char c[256];
    snprintf(c, sizeof c, "test_cuda_ops %s %s %s", op, label(g), shape);
    vb_set_error_context(c);
}

// a float32 copy of |x| on the CPU backend (for GEMM error scales)
static void *cpu_abs(const tb *b) {
    float *a = fmalloc(b->n);
    for (size_t i = 0; i < b->n; i++) a[i] = fabsf(b->h[i]);
    void *c = H->alloc(hctx, b->n * 4 + 4);
    H->memcpy_h2d(hctx, c, a, b->n * 4);
    H->synchronize(hctx);
    free(a);
    return c;
}

static float *cpu_read(const void *c, size_t n) {
    float *x = fmalloc(n);
    H->memcpy_d2h(hctx, x, c, n * 4);
    H->synchronize(hctx);
    return x;
}

// per-dtype tolerances: float32 ~1e-5; TF32 and half types their roundoff
static double tol_gemm(vb_ctx *g) {
    return g == gtf32 ? 4e-3 : g->act == VB_DTYPE_F32 ? 1e-5 : g->act == VB_DTYPE_BF16 ? 1.6e-2 : 4e-3;
}
static double tol_norm(vb_ctx *g) {
    return g == gtf32 ? 1e-5 : g->act == VB_DTYPE_F32 ? 1e-5 : g->act == VB_DTYPE_BF16 ? 3e-2 : 5e-3;
}
// attention: TF32 rounds q, k, v, dO and P to 11 significant bits, as f16
// does (the f16 cases' inputs are exact in f16, TF32's are not: its lse
// carries the scores' input rounding, hence 2e-3 there)
static double tol_attention(vb_ctx *g) { return g == gtf32 ? 5e-3 : tol_norm(g); }
// one rounding of the result to the dtype
static double tol_round(vb_ctx *g) {
    return g->act == VB_DTYPE_F32 ? 1e-6 : g->act == VB_DTYPE_BF16 ? 8e-3 : 1e-3;
}

// ---------------------------------------------------------------------------
// amp_mode fp8: CUDA's FP8 GEMMs (casts to FP8 bytes, cuBLASLt) against the
// CPU's emulation of the same recipe on the same bf16 values. A cast is the
// same float32 product rounded by the same function on both sides, so the
// amaxes agree exactly and every product of quantised operands is the same;
// what differs is the sum's order and the rounding of the result: the
// forward and dinp (bf16 results) are held to tol_round over sum |a||b|, as
// a bf16 GEMM is; dweight (float32, no fast accumulation, as TE's gradient
// GEMMs) to FP8_ACC_TOL = 2^-11 over sum |a||b|: Hopper's FP8 tensor cores
// keep about 14 bits of a partial sum between cuBLASLt's promotions to
// float32 (an H100 gave 1.7e-4 of the largest increment where float32
// accumulation would give 1e-7), so a few units of that rounding, far below
// the order-1 error of a wrong scale, operand or transposition. N = 200 is not a
// multiple of 16: the weight gradient reads zero-padded rows. The weight's
// scale saturates |w| > 0.25 to 448, as an overflowing tensor does until
// its scale adapts; a NaN in the input records an infinite amax.

#define FP8_ACC_TOL 4.8828125e-4 /* 2^-11 */

// sum_k |qdq(a[i,k])| |qdq(b[j,k])| (+ |bias[j]|) over row-major a [n,K], b [m,K]
static float *fp8_scale_of(const float *a, float sa, vb_fp8_format fa, const float *b, float sb, vb_fp8_format fb,
                           const float *bias, int n, int m, int K) {
    float *s = fmalloc((size_t)n * m);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double t = bias ? fabs((double)bias[j]) : 0.0;
            for (int k = 0; k < K; k++)
                t += fabs((double)vb_fp8_qdq(a[(size_t)i * K + k], sa, fa)) *
                     fabs((double)vb_fp8_qdq(b[(size_t)j * K + k], sb, fb));
            s[(size_t)i * m + j] = (float)t;
        }
    return s;
}

static void transpose(float *dst, const float *src, int R, int Cc) {
    for (int r = 0; r < R; r++)
        for (int c = 0; c < Cc; c++) dst[(size_t)c * R + r] = src[(size_t)r * Cc + c];
}

static void test_fp8(void **state) {
    (void)state;
    vb_ctx *g = gctx[VB_DTYPE_BF16];
    const char *why = g ? G->fp8_unsupported(g) : "no bfloat16 context";
    if (why) {
        printf("skip fp8_matmul: %s\n", why);
        return;
    }
    enum { N = 200, C = 64, OC = 48 };
    char shape[96];
    snprintf(shape, sizeof shape, "N=%d C=%d OC=%d", N, C, OC);
    begin_case("fp8_matmul", g, shape);
    tb x = tb_rand(g, (size_t)N * C, 1, -3.0f, 3.0f, 801), w = tb_rand(g, (size_t)OC * C, 1, -0.5f, 0.5f, 802);
    tb bias = tb_rand(g, OC, 1, -1.0f, 1.0f, 803), dout = tb_rand(g, (size_t)N * OC, 1, -1e-3f, 1e-3f, 804);
    const float sc[3] = {448.0f / 4.0f, 448.0f / 0.25f, 57344.0f / 1e-3f};
    tb scale = tb_new(g, 3, 0), amax = tb_new(g, 3, 0);
    memcpy(scale.h, sc, sizeof sc);
    tb_up(&scale);
    tb_fill(&amax, 0.0f);
    tb out = tb_new(g, (size_t)N * OC, 1), dinp = tb_new(g, (size_t)N * C, 1);
    tb dw = tb_new(g, (size_t)OC * C, 0), db = tb_new(g, OC, 0);
    tb_poison(&out);
    tb_fill(&dinp, 1.0f); // accumulated onto
    tb_fill(&dw, 0.5f);
    tb_fill(&db, 0.25f);
    const size_t gbytes = G->fp8_scratch_bytes(g, N, C, OC), hbytes = H->fp8_scratch_bytes(hctx, N, C, OC);
    assert_true(gbytes > 0 && hbytes > 0);
    void *gs = G->alloc(g, gbytes), *hs = H->alloc(hctx, hbytes);
    float *gsc = (float *)DP(&scale), *hsc = (float *)CP(&scale), *gam = (float *)DP(&amax), *ham = (float *)CP(&amax);
    const vb_fp8_gemm gq = {gsc, gsc + 1, gsc + 2, gam, gam + 1, gam + 2, gs};
    const vb_fp8_gemm hq = {hsc, hsc + 1, hsc + 2, ham, ham + 1, ham + 2, hs};

    G->fp8_matmul_forward(g, DP(&out), DP(&x), DP(&w), DP(&bias), N, C, OC, &gq);
    H->fp8_matmul_forward(hctx, CP(&out), CP(&x), CP(&w), CP(&bias), N, C, OC, &hq);
    G->fp8_matmul_backward(g, DP(&dinp), (float *)DP(&dw), (float *)DP(&db), DP(&dout), DP(&x), DP(&w), N, C, OC, 1,
                           &gq);
    H->fp8_matmul_backward(hctx, CP(&dinp), (float *)CP(&dw), (float *)CP(&db), CP(&dout), CP(&x), CP(&w), N, C,
                           OC, 1, &hq);
    pair po = fetch(&out), pi = fetch(&dinp), pw = fetch(&dw), pb = fetch(&db), pa = fetch(&amax);
    // every amax bit for bit, and they are the tensors' own
    double ea = 0.0;
    for (int t = 0; t < 3; t++) ea = fmax(ea, fabs((double)pa.g[t] - pa.r[t]));
    if (pa.r[0] != vb_fp8_amax(x.h, x.n) || pa.r[2] != vb_fp8_amax(dout.h, dout.n)) ea = INFINITY;
    report("fp8 amax x, w, dout", g, shape, "exact", ea, 0.0);
    float *s_out = fp8_scale_of(x.h, sc[0], VB_FP8_E4M3, w.h, sc[1], VB_FP8_E4M3, bias.h, N, OC, C);
    report("fp8_matmul_forward", g, shape, "scaled", err_scaled(po.g, po.r, s_out, po.n), tol_round(g));
    // dinp [N,C] = dout [N,OC] W [OC,C]: the scale of row i, column k over W^T
    float *wt = fmalloc(w.n);
    transpose(wt, w.h, OC, C);
    float *s_dinp = fp8_scale_of(dout.h, sc[2], VB_FP8_E5M2, wt, sc[1], VB_FP8_E4M3, NULL, N, C, OC);
    for (size_t i = 0; i < pi.n; i++) s_dinp[i] += 1.0f; // the preset it adds to
    report("fp8_matmul_backward dinp", g, shape, "scaled", err_scaled(pi.g, pi.r, s_dinp, pi.n), tol_round(g));
    // dW [OC,C] = dout^T [OC,N] x [N,C]: the scale of (o, c) over N
    float *gt = fmalloc(dout.n), *xt = fmalloc(x.n);
    transpose(gt, dout.h, N, OC);
    transpose(xt, x.h, N, C);
    float *s_dw = fp8_scale_of(gt, sc[2], VB_FP8_E5M2, xt, sc[0], VB_FP8_E4M3, NULL, OC, C, N);
    report("fp8_matmul_backward dweight", g, shape, "scaled", err_scaled(pw.g, pw.r, s_dw, pw.n), FP8_ACC_TOL);
    float *preset = fmalloc(pb.n);
    for (size_t i = 0; i < pb.n; i++) preset[i] = 0.25f;
    report("fp8_matmul_backward dbias", g, shape, "acc", err_acc(pb.g, pb.r, preset, pb.n), 1e-5);
    free(s_out), free(s_dinp), free(s_dw), free(preset), free(wt), free(gt), free(xt);
    pair_free(&po), pair_free(&pi), pair_free(&pw), pair_free(&pb), pair_free(&pa);

    // the casts' general kernel (an input 2 bytes off 16-byte alignment)
    // writes the bytes the vector kernels wrote: the forward's output, the
    // weight gradient's increment and the input's amax, bit for bit
    {
        tb xo = tb_new_off(g, x.n, 1, 1), out2 = tb_new(g, out.n, 1), dw2 = tb_new(g, dw.n, 0);
        memcpy(xo.h, x.h, x.n * sizeof(float));
        tb_up(&xo);
        tb_fill(&dw2, 0.5f);
        tb_fill(&amax, 0.0f);
        G->fp8_matmul_forward(g, DP(&out2), DP(&xo), DP(&w), DP(&bias), N, C, OC, &gq);
        G->fp8_matmul_backward(g, NULL, (float *)DP(&dw2), NULL, DP(&dout), DP(&xo), DP(&w), N, C, OC, 0, &gq);
        float *o1 = fmalloc(out.n), *o2 = fmalloc(out.n), *w1 = fmalloc(dw.n), *w2 = fmalloc(dw.n), am[3];
        tb_gpu(&out, o1), tb_gpu(&out2, o2), tb_gpu(&dw, w1), tb_gpu(&dw2, w2), tb_gpu(&amax, am);
        double differ = memcmp(o1, o2, out.n * sizeof(float)) != 0 || memcmp(w1, w2, dw.n * sizeof(float)) != 0 ||
                        am[0] != vb_fp8_amax(x.h, x.n);
        report("fp8 cast, unaligned input", g, shape, "bits", differ ? INFINITY : 0.0, 0.0);
        free(o1), free(o2), free(w1), free(w2);
        TB_FREE(&xo, &out2, &dw2);
    }

    // a NaN in the input: +inf recorded, and the forward's output NaN where it reads it
    x.h[5] = NAN;
    tb_up(&x);
    tb_fill(&amax, 0.0f);
    G->fp8_matmul_forward(g, DP(&out), DP(&x), DP(&w), DP(&bias), N, C, OC, &gq);
    pa = fetch(&amax);
    report("fp8 amax of a NaN tensor", g, shape, "+inf", isinf(pa.g[0]) && pa.g[0] > 0 ? 0.0 : INFINITY, 0.0);
    pair_free(&pa);
    G->free(g, gs);
    H->free(hctx, hs);
    TB_FREE(&x, &w, &bias, &dout, &scale, &amax, &out, &dinp, &dw, &db);

    // the scale update and the history's roll, bit for bit: 7 tensors, 5
    // steps of history (zeros, an infinite amax, tiny and huge ones)
    enum { NT = 7, LEN = 5 };
    tb hist = tb_new(g, NT * LEN, 0), sca = tb_new(g, NT, 0);
    tu_fill_uniform(hist.h, hist.n, 0.0f, 8.0f, 805);
    hist.h[0] = 0.0f, hist.h[NT] = 0.0f, hist.h[2 * NT] = 0.0f, hist.h[3 * NT] = 0.0f, hist.h[4 * NT] = 0.0f;
    hist.h[1] = INFINITY, hist.h[2] = 1e-39f, hist.h[3 + NT] = 3e38f;
    tb_up(&hist);
    tu_fill_uniform(sca.h, sca.n, 0.5f, 2.0f, 806);
    tb_up(&sca);
    for (int algo = 0; algo < 2; algo++) {
        G->fp8_scale_update(g, (float *)DP(&sca), (float *)DP(&hist), NT, NT, LEN, VB_FP8_E5M2,
                            (vb_fp8_amax_algo)algo, 1);
        H->fp8_scale_update(hctx, (float *)CP(&sca), (float *)CP(&hist), NT, NT, LEN, VB_FP8_E5M2,
                            (vb_fp8_amax_algo)algo, 1);
    }
    pair ps = fetch(&sca), ph = fetch(&hist);
    double es = 0.0;
    for (size_t i = 0; i < ps.n; i++) es += memcmp(&ps.g[i], &ps.r[i], sizeof(float)) != 0;
    for (size_t i = 0; i < ph.n; i++) es += memcmp(&ph.g[i], &ph.r[i], sizeof(float)) != 0;
    report("fp8_scale_update", g, "n=7 len=5", "bits", es, 0.0);
    pair_free(&ps), pair_free(&ph);
    TB_FREE(&hist, &sca);
}

// ---------------------------------------------------------------------------
// memory and events

static void test_memory_events(void **state) {
    (void)state;
    vb_ctx *g = gctx[VB_DTYPE_F32];
    begin_case("memory", g, "");
    const size_t n = 1 << 20;
    float *dev = G->alloc(g, n * 4);
    float *host = G->alloc_host(g, n * 4);
    G->memcpy_d2h(g, host, dev, n * 4);
    G->synchronize(g);
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += host[i] != 0.0f;
    int bad = report("alloc (zero-filled)", g, "1M floats", "nonzero", (double)nonzero, 0);

    for (size_t i = 0; i < n; i++) host[i] = (float)i + 0.5f;
    float *dev2 = G->alloc(g, n * 4);
    G->memcpy_h2d(g, dev, host, n * 4);
    G->memcpy_d2d(g, dev2, dev, n * 4);
    G->zero(g, dev2 + 10, 5 * 4);
    float *back = G->alloc_host(g, n * 4);
    G->memcpy_d2h(g, back, dev2, n * 4);
    G->synchronize(g);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += back[i] != ((i >= 10 && i < 15) ? 0.0f : host[i]);
    bad += report("memcpy h2d/d2d/d2h, zero", g, "1M floats", "wrong", (double)wrong, 0);

    // events: elapsed time of queued work; a second context ordered after the
    // first by event_wait sees the first one's writes
    vb_ctx *g2 = G->ctx_create(&(vb_ctx_opts){.act = VB_DTYPE_F32, .device = 0}, NULL, 0);
    assert_non_null(g2);
    vb_event *e0 = G->event_create(g), *e1 = G->event_create(g);
    G->event_record(g, e0);
    for (int rep = 0; rep < 50; rep++) G->scale(g, dev, 1.0f, n); // queued work on g
    G->add(g, dev2, dev, dev, n);                                 // dev2 = 2 * host
    G->event_record(g, e1);
    G->event_wait(g2, e1);
    G->memcpy_d2d(g2, dev, dev2, n * 4);                          // dev = 2 * host, after e1
    G->memcpy_d2h(g2, back, dev, n * 4);
    G->synchronize(g2);
    G->event_synchronize(g, e1);
    double ms = G->event_elapsed_ms(g, e0, e1);
    wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += back[i] != 2.0f * host[i];
    bad += report("event_wait across contexts", g, "1M floats", "wrong", (double)wrong, 0);
    printf("     event_elapsed_ms: %.3f ms for 50 scale + 1 add over 1M floats\n", ms);
    bad += report("event_elapsed_ms", g, "", "negative", ms >= 0.0 && ms < 1e4 ? 0.0 : 1.0, 0);
    G->event_destroy(g, e0);
    G->event_destroy(g, e1);
    G->ctx_destroy(g2);
    G->free_host(g, host);
    G->free_host(g, back);
    G->free(g, dev);
    G->free(g, dev2);
    vb_set_error_context("");
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------------------
// matmul

static int matmul_forward_case(vb_ctx *g, int N, int C, int OC, int with_bias, size_t off,
                               uint64_t seed) {
    char shape[128];
    snprintf(shape, sizeof shape, "N=%d C=%d OC=%d%s%s", N, C, OC, with_bias ? " bias" : "",
             off ? " unaligned" : "");
    begin_case("matmul_forward", g, shape);
    tb inp = tb_new_off(g, (size_t)N * C, 1, off), w = tb_new_off(g, (size_t)OC * C, 1, off);
    tb bias = tb_new_off(g, (size_t)OC, 1, off), out = tb_new_off(g, (size_t)N * OC, 1, off);
    tu_fill_uniform(inp.h, inp.n, -1, 1, seed);
    tu_fill_uniform(w.h, w.n, -1, 1, seed + 1);
    tu_fill_uniform(bias.h, bias.n, -1, 1, seed + 2);
    tb_up(&inp), tb_up(&w), tb_up(&bias);
    tb_poison(&out);
    G->matmul_forward(g, DP(&out), DP(&inp), DP(&w), with_bias ? DP(&bias) : NULL, N, C, OC);
    H->matmul_forward(hctx, CP(&out), CP(&inp), CP(&w), with_bias ? CP(&bias) : NULL, N, C, OC);
    // scale: the same product over |inputs|
    void *ai = cpu_abs(&inp), *aw = cpu_abs(&w), *ab = cpu_abs(&bias);
    void *as = H->alloc(hctx, out.n * 4);
    H->matmul_forward(hctx, as, ai, aw, with_bias ? ab : NULL, N, C, OC);
    float *s = cpu_read(as, out.n);
    pair p = fetch(&out);
    int bad = report("matmul_forward", g, shape, "scaled", err_scaled(p.g, p.r, s, p.n), tol_gemm(g));
    pair_free(&p);
    free(s);
    H->free(hctx, ai), H->free(hctx, aw), H->free(hctx, ab), H->free(hctx, as);
    TB_FREE(&inp, &w, &bias, &out);
    return bad;
}

static int matmul_bias_gelu_case(vb_ctx *g, int N, int C, int OC, uint64_t seed) {
    char shape[128];
    snprintf(shape, sizeof shape, "N=%d C=%d OC=%d", N, C, OC);
    begin_case("matmul_bias_gelu_forward", g, shape);
    tb inp = tb_rand(g, (size_t)N * C, 1, -1, 1, seed), w = tb_rand(g, (size_t)OC * C, 1, -1, 1, seed + 1);
    tb bias = tb_rand(g, OC, 1, -1, 1, seed + 2);
    tb pre = tb_new(g, (size_t)N * OC, 1), out = tb_new(g, (size_t)N * OC, 1);
    tb_poison(&pre), tb_poison(&out);
    G->matmul_bias_gelu_forward(g, DP(&pre), DP(&out), DP(&inp), DP(&w), DP(&bias), N, C, OC);
    H->matmul_bias_gelu_forward(hctx, CP(&pre), CP(&out), CP(&inp), CP(&w), CP(&bias), N, C, OC);
    void *ai = cpu_abs(&inp), *aw = cpu_abs(&w), *ab = cpu_abs(&bias);
    void *as = H->alloc(hctx, pre.n * 4);
    H->matmul_forward(hctx, as, ai, aw, ab, N, C, OC);
    float *s = cpu_read(as, pre.n);
    pair pp = fetch(&pre), po = fetch(&out);
    // gelu' is within [-0.13, 1.13]: the output's error is bounded by the same scale
    int bad = report("matmul_bias_gelu_forward", g, shape, "pre scaled", err_scaled(pp.g, pp.r, s, pp.n),
                     tol_gemm(g));
    bad += report("matmul_bias_gelu_forward", g, shape, "out scaled", err_scaled(po.g, po.r, s, po.n),
                  1.2 * tol_gemm(g) + tol_round(g));
    pair_free(&pp), pair_free(&po);
    free(s);
    H->free(hctx, ai), H->free(hctx, aw), H->free(hctx, ab), H->free(hctx, as);
    TB_FREE(&inp, &w, &bias, &pre, &out);
    return bad;
}

// want: 1 dinp, 2 dweight, 4 dbias
static int matmul_backward_case(vb_ctx *g, int N, int C, int OC, int accumulate, int want,
                                uint64_t seed) {
    char shape[128];
    snprintf(shape, sizeof shape, "N=%d C=%d OC=%d%s%s%s%s", N, C, OC, accumulate ? " acc" : "",
             want & 1 ? "" : " dinp=NULL", want & 2 ? "" : " dW=NULL", want & 4 ? "" : " db=NULL");
    begin_case("matmul_backward", g, shape);
    tb dout = tb_rand(g, (size_t)N * OC, 1, -1, 1, seed), inp = tb_rand(g, (size_t)N * C, 1, -1, 1, seed + 1);
    tb w = tb_rand(g, (size_t)OC * C, 1, -1, 1, seed + 2);
    tb dinp = tb_new(g, (size_t)N * C, 1);
    tb dw = tb_rand(g, (size_t)OC * C, 0, -1, 1, seed + 3), db = tb_rand(g, OC, 0, -1, 1, seed + 4);
    if (accumulate) {
        tu_fill_uniform(dinp.h, dinp.n, -1, 1, seed + 5);
        tb_up(&dinp);
    } else {
        tb_poison(&dinp);
    }
    float *dinp0 = fmalloc(dinp.n), *dw0 = fmalloc(dw.n), *db0 = fmalloc(db.n);
    memcpy(dinp0, dinp.h, dinp.n * 4), memcpy(dw0, dw.h, dw.n * 4), memcpy(db0, db.h, db.n * 4);
    G->matmul_backward(g, want & 1 ? DP(&dinp) : NULL, want & 2 ? DP(&dw) : NULL,
                       want & 4 ? DP(&db) : NULL, DP(&dout), DP(&inp), DP(&w), N, C, OC, accumulate);
    H->matmul_backward(hctx, want & 1 ? CP(&dinp) : NULL, want & 2 ? CP(&dw) : NULL,
                       want & 4 ? CP(&db) : NULL, CP(&dout), CP(&inp), CP(&w), N, C, OC, accumulate);
    // scales: the same backward over |inputs| and |presets|
    void *ado = cpu_abs(&dout), *ai = cpu_abs(&inp), *aw = cpu_abs(&w);
    void *adi = cpu_abs(&dinp), *adw = cpu_abs(&dw), *adb = cpu_abs(&db);
    H->matmul_backward(hctx, accumulate ? adi : NULL, adw, adb, ado, ai, aw, N, C, OC, 1);
    if (!accumulate) H->matmul_backward(hctx, adi, NULL, NULL, ado, ai, aw, N, C, OC, 0);
    int bad = 0;
    if (want & 1) {
        float *s = cpu_read(adi, dinp.n);
        pair p = fetch(&dinp);
        bad += report("matmul_backward", g, shape, "dinp", err_scaled(p.g, p.r, s, p.n), tol_gemm(g));
        pair_free(&p), free(s);
    } else {
        float *x = fmalloc(dinp.n);
        tb_gpu(&dinp, x);
        bad += report("matmul_backward", g, shape, "dinp kept",
                      accumulate ? err_elem(x, dinp0, dinp.n, 1e-30) : (isnan(x[0]) ? 0.0 : 1.0), 0);
        free(x);
    }
    struct { tb *b; void *s; const float *pre; const char *name; } outs[2] = {
        {&dw, adw, dw0, want & 2 ? "dweight" : "dW kept"}, {&db, adb, db0, want & 4 ? "dbias" : "db kept"}};
    for (int k = 0; k < 2; k++) {
        float *s = cpu_read(outs[k].s, outs[k].b->n);
        pair p = fetch(outs[k].b);
        const int used = want & (2 << k);
        double e = used ? err_scaled(p.g, p.r, s, p.n) : err_elem(p.g, outs[k].pre, p.n, 1e-30);
        // dbias is a plain column sum: float32 rounding only, whatever the dtype
        double tol = !used ? 0 : k == 1 ? 1e-5 : g->act == VB_DTYPE_F32 && g != gtf32 ? 1e-5 : tol_gemm(g);
        bad += report("matmul_backward", g, shape, outs[k].name, e, tol);
        pair_free(&p), free(s);
    }
    free(dinp0), free(dw0), free(db0);
    H->free(hctx, ado), H->free(hctx, ai), H->free(hctx, aw);
    H->free(hctx, adi), H->free(hctx, adw), H->free(hctx, adb);
    TB_FREE(&dout, &inp, &w, &dinp, &dw, &db);
    return bad;
}

// small config: B=2 x 288 tokens, D=192, MLP 768, patch vector 20*8*8 = 1280
/* graphs: work recorded once replays as often as launched, on the inputs'
 * current contents at each launch (what cuda_graphs relies on: new batches in
 * the same buffers, Adam's arguments copied in before each replay). A pinned
 * host copy recorded in the graph reads the host buffer at each replay. */
static void test_graphs(void **state) {
    (void)state;
    vb_ctx *g = gctx[VB_DTYPE_F32];
    begin_case("graphs", g, "");
    const size_t n = 1 << 16;
    float *x = G->alloc(g, n * 4), *y = G->alloc(g, n * 4), *s = G->alloc(g, 4);
    float *host = G->alloc_host(g, n * 4), *hs = G->alloc_host(g, 4), *back = G->alloc_host(g, n * 4);
    // record: s <- *hs (pinned), y = x + x, y *= 1 (a second kernel after the first)
    G->graph_capture_begin(g);
    G->memcpy_h2d(g, s, hs, 4);
    G->add(g, y, x, x, n);
    G->scale(g, y, 1.0f, n);
    void *graph = G->graph_capture_end(g);
    int bad = 0;
    for (int rep = 0; rep < 3; rep++) {
        for (size_t i = 0; i < n; i++) host[i] = (float)(rep * 1000 + (int)(i % 997)) - 0.25f;
        *hs = 10.0f + (float)rep;
        G->memcpy_h2d(g, x, host, n * 4);
        G->graph_launch(g, graph);
        G->memcpy_d2h(g, back, y, n * 4);
        G->synchronize(g);
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++) wrong += back[i] != 2.0f * host[i];
        G->memcpy_d2h(g, back, s, 4);
        G->synchronize(g);
        wrong += back[0] != 10.0f + (float)rep;
        char what[48];
        snprintf(what, sizeof what, "replay %d", rep + 1);
        bad += report("graph_launch on new inputs", g, what, "wrong", (double)wrong, 0);
    }
    G->graph_destroy(g, graph);
    G->free(g, x), G->free(g, y), G->free(g, s);
    G->free_host(g, host), G->free_host(g, hs), G->free_host(g, back);
    vb_set_error_context("");
    assert_int_equal(bad, 0);
}

static void test_matmul(void **state) {
    (void)state;
    int bad = 0;
    vb_ctx *f = gctx[VB_DTYPE_F32];
    bad += matmul_forward_case(f, 576, 192, 576, 1, 0, 100);  // qkv
    bad += matmul_forward_case(f, 576, 192, 768, 1, 0, 110);  // fc1
    bad += matmul_forward_case(f, 576, 768, 192, 1, 0, 120);  // fc2
    bad += matmul_forward_case(f, 576, 1280, 192, 1, 0, 130); // patch embedding
    bad += matmul_forward_case(f, 576, 192, 1280, 0, 0, 140); // head
    bad += matmul_forward_case(f, 37, 29, 51, 1, 0, 150);
    bad += matmul_forward_case(f, 37, 29, 51, 1, 1, 155);     // 4-byte aligned views
    bad += matmul_forward_case(f, 1, 7, 1, 1, 0, 160);
    bad += matmul_forward_case(f, 5, 1, 3, 0, 0, 170);
    bad += matmul_bias_gelu_case(f, 576, 192, 768, 180);
    bad += matmul_bias_gelu_case(f, 33, 17, 45, 190);
    bad += matmul_backward_case(f, 576, 192, 768, 0, 7, 200);
    bad += matmul_backward_case(f, 576, 768, 192, 1, 7, 210);
    bad += matmul_backward_case(f, 576, 1280, 192, 0, 6, 220); // patch embedding: no dinp
    bad += matmul_backward_case(f, 37, 29, 51, 0, 7, 230);
    bad += matmul_backward_case(f, 37, 29, 51, 1, 1, 240);
    bad += matmul_backward_case(f, 37, 29, 51, 0, 2, 250);
    bad += matmul_backward_case(f, 3, 1, 2, 0, 7, 260);
    // TF32 and the half types
    vb_ctx *others[3] = {gtf32, gctx[VB_DTYPE_BF16], gctx[VB_DTYPE_F16]};
    for (int i = 0; i < 3; i++) {
        vb_ctx *g = others[i];
        if (!g) continue;
        bad += matmul_forward_case(g, 576, 192, 768, 1, 0, 300 + i);
        bad += matmul_forward_case(g, 37, 29, 51, 1, 1, 310 + i);
        bad += matmul_bias_gelu_case(g, 576, 192, 768, 320 + i);
        bad += matmul_backward_case(g, 576, 768, 192, 1, 7, 330 + i);
        bad += matmul_backward_case(g, 37, 29, 51, 0, 7, 340 + i);
    }
    vb_set_error_context("");
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------------------
// layernorm

static int layernorm_forward_case(vb_ctx *g, int N, int C, int resid, int alias, uint64_t seed) {
    char shape[128];
    snprintf(shape, sizeof shape, "N=%d C=%d%s", N, C, alias ? " res=a" : "");
    const char *op = resid ? "residual_layernorm_forward" : "layernorm_forward";
    begin_case(op, g, shape);
    const size_t n = (size_t)N * C;
    // inputs with |mean| > std: the two-pass variance matters
    tb a = tb_rand(g, n, 1, 1.5f, 3.5f, seed), b = tb_rand(g, n, 1, -0.5f, 0.5f, seed + 1);
    tb w = tb_rand(g, C, 1, 0.5f, 1.5f, seed + 2), bias = tb_rand(g, C, 1, -1, 1, seed + 3);
    tb res = tb_new(g, n, 1), out = tb_new(g, n, 1), mean = tb_new(g, N, 0), rstd = tb_new(g, N, 0);
    tb_poison(&res), tb_poison(&out), tb_poison(&mean), tb_poison(&rstd);
    const float eps = 1e-5f;
    if (resid) {
        tb *r = alias ? &a : &res;
        G->residual_layernorm_forward(g, DP(r), DP(&out), DP(&mean), DP(&rstd), DP(&a), DP(&b), DP(&w),
                                      DP(&bias), N, C, eps);
        H->residual_layernorm_forward(hctx, CP(r), CP(&out), CP(&mean), CP(&rstd), CP(&a), CP(&b),
                                      CP(&w), CP(&bias), N, C, eps);
    } else {
        G->layernorm_forward(g, DP(&out), DP(&mean), DP(&rstd), DP(&a), DP(&w), DP(&bias), N, C, eps);
        H->layernorm_forward(hctx, CP(&out), CP(&mean), CP(&rstd), CP(&a), CP(&w), CP(&bias), N, C, eps);
    }
    int bad = 0;
    pair po = fetch(&out), pm = fetch(&mean), ps = fetch(&rstd);
    bad += report(op, g, shape, "out norm", err_norm(po.g, po.r, po.n), tol_norm(g));
    // a half type's residual sum is rounded before its statistics: the CPU's is not
    const int f32 = g->act == VB_DTYPE_F32;
    bad += report(op, g, shape, "mean", err_elem(pm.g, pm.r, pm.n, 1e-6), f32 ? 1e-5 : 2e-3);
    bad += report(op, g, shape, "rstd", err_elem(ps.g, ps.r, ps.n, 1e-6), f32 ? 1e-5 : 1e-2);
    if (resid) {
        pair pr = fetch(alias ? &a : &res);
        bad += report(op, g, shape, "res", err_elem(pr.g, pr.r, pr.n, 1e-3), tol_round(g));
        pair_free(&pr);
    }
    pair_free(&po), pair_free(&pm), pair_free(&ps);
    TB_FREE(&a, &b, &w, &bias, &res, &out, &mean, &rstd);
    return bad;
}

static int layernorm_backward_case(vb_ctx *g, int N, int C, int want, uint64_t seed) {
    char shape[128];
    snprintf(shape, sizeof shape, "N=%d C=%d%s%s", N, C, want & 1 ? "" : " dinp=NULL",
             want & 6 ? "" : " dW,db=NULL");
    begin_case("layernorm_backward", g, shape);
    const size_t n = (size_t)N * C;
    tb inp = tb_rand(g, n, 1, 1.5f, 3.5f, seed), w = tb_rand(g, C, 1, 0.5f, 1.5f, seed + 1);
    tb bias = tb_rand(g, C, 1, -1, 1, seed + 2), dout = tb_rand(g, n, 1, -1, 1, seed + 3);
    tb mean = tb_new(g, N, 0), rstd = tb_new(g, N, 0), tmp = tb_new(g, n, 1);
    // the statistics both sides use: the CPU forward's
    H->layernorm_forward(hctx, CP(&tmp), CP(&mean), CP(&rstd), CP(&inp), CP(&w), CP(&bias), N, C, 1e-5f);
    tb_cpu(&mean, mean.h), tb_cpu(&rstd, rstd.h);
    tb_up(&mean), tb_up(&rstd);
    tb dinp = tb_rand(g, n, 1, -1, 1, seed + 4); // *_acc: added onto
    tb dw = tb_rand(g, C, 0, -1, 1, seed + 5), db = tb_rand(g, C, 0, -1, 1, seed + 6);
    float *dinp0 = fmalloc(n), *dw0 = fmalloc(C), *db0 = fmalloc(C);
    memcpy(dinp0, dinp.h, n * 4), memcpy(dw0, dw.h, C * 4), memcpy(db0, db.h, C * 4);
    G->layernorm_backward(g, want & 1 ? DP(&dinp) : NULL, want & 2 ? DP(&dw) : NULL,
                          want & 4 ? DP(&db) : NULL, DP(&dout), DP(&inp), DP(&w), DP(&mean),
                          DP(&rstd), N, C);
    H->layernorm_backward(hctx, want & 1 ? CP(&dinp) : NULL, want & 2 ? CP(&dw) : NULL,
                          want & 4 ? CP(&db) : NULL, CP(&dout), CP(&inp), CP(&w), CP(&mean),
                          CP(&rstd), N, C);
    int bad = 0;
    pair pi = fetch(&dinp), pw = fetch(&dw), pb = fetch(&db);
    const double tn = g->act == VB_DTYPE_F32 ? 1e-5 : tol_norm(g);
    if (want & 1) bad += report("layernorm_backward", g, shape, "dinp_acc", err_acc(pi.g, pi.r, dinp0, n), tn);
    else bad += report("layernorm_backward", g, shape, "dinp kept", err_elem(pi.g, dinp0, n, 1e-30), 0);
    if (want & 2) bad += report("layernorm_backward", g, shape, "dweight", err_acc(pw.g, pw.r, dw0, C), 1e-5);
    else bad += report("layernorm_backward", g, shape, "dW kept", err_elem(pw.g, dw0, C, 1e-30), 0);
    if (want & 4) bad += report("layernorm_backward", g, shape, "dbias", err_acc(pb.g, pb.r, db0, C), 1e-5);
    else bad += report("layernorm_backward", g, shape, "db kept", err_elem(pb.g, db0, C, 1e-30), 0);
    pair_free(&pi), pair_free(&pw), pair_free(&pb);
    free(dinp0), free(dw0), free(db0);
    TB_FREE(&inp, &w, &bias, &dout, &mean, &rstd, &tmp, &dinp, &dw, &db);
    return bad;
}

static void test_layernorm(void **state) {
    (void)state;
    int bad = 0;
    for (int d = 0; d < 3; d++) {
        vb_ctx *g = gctx[d];
        if (!g) continue;
        bad += layernorm_forward_case(g, 576, 192, 0, 0, 400 + d);
        bad += layernorm_forward_case(g, 37, 29, 0, 0, 410 + d);
        bad += layernorm_forward_case(g, 576, 192, 1, 0, 420 + d);
        bad += layernorm_forward_case(g, 37, 29, 1, 1, 430 + d);
        bad += layernorm_backward_case(g, 576, 192, 7, 440 + d);
        bad += layernorm_backward_case(g, 2000, 384, 7, 445 + d); // many row ranges per column
        bad += layernorm_backward_case(g, 37, 29, 7, 450 + d);
        if (d == 0) {
            bad += layernorm_backward_case(g, 37, 29, 1, 460);
            bad += layernorm_backward_case(g, 37, 29, 6, 470);
        }
    }
    vb_set_error_context("");
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------------------
// attention

static int attention_case(vb_ctx *g, int B, int Tq, int Tk, int NH, int HD, uint64_t seed) {
    char shape[128];
    snprintf(shape, sizeof shape, "B=%d Tq=%d Tk=%d NH=%d HD=%d", B, Tq, Tk, NH, HD);
    begin_case("attention_forward", g, shape);
    const int D = NH * HD;
    const size_t nq = (size_t)B * Tq * D, nk = (size_t)B * Tk * D;
    tb q = tb_rand(g, nq, 1, -2, 2, seed), k = tb_rand(g, nk, 1, -2, 2, seed + 1);
    tb v = tb_rand(g, nk, 1, -1, 1, seed + 2), dout = tb_rand(g, nq, 1, -1, 1, seed + 3);
    tb out = tb_new(g, nq, 1), lse = tb_new(g, (size_t)B * NH * Tq, 0);
    tb dq = tb_new(g, nq, 1), dk = tb_new(g, nk, 1), dv = tb_new(g, nk, 1);
    tb_poison(&out), tb_poison(&lse), tb_poison(&dq), tb_poison(&dk), tb_poison(&dv);
    void *gws = G->alloc(g, G->attention_workspace_bytes(g, B, Tq, Tk, NH, HD));
    void *hws = H->alloc(hctx, H->attention_workspace_bytes(hctx, B, Tq, Tk, NH, HD));
    G->attention_forward(g, DP(&out), DP(&lse), gws, DP(&q), DP(&k), DP(&v), B, Tq, Tk, NH, HD);
    H->attention_forward(hctx, CP(&out), CP(&lse), hws, CP(&q), CP(&k), CP(&v), B, Tq, Tk, NH, HD);
    int bad = 0;
    pair po = fetch(&out), pl = fetch(&lse);
    bad += report("attention_forward", g, shape, "out norm", err_norm(po.g, po.r, po.n), tol_attention(g));
    bad += report("attention_forward", g, shape, "lse", err_elem(pl.g, pl.r, pl.n, 1.0),
                  g == gtf32 ? 2e-3 : g->act == VB_DTYPE_F32 ? 1e-5 : 1e-4);
    pair_free(&po), pair_free(&pl);

    begin_case("attention_backward", g, shape);
    G->attention_backward(g, DP(&dq), DP(&dk), DP(&dv), gws, DP(&dout), DP(&out), DP(&lse), DP(&q),
                          DP(&k), DP(&v), B, Tq, Tk, NH, HD);
    H->attention_backward(hctx, CP(&dq), CP(&dk), CP(&dv), hws, CP(&dout), CP(&out), CP(&lse), CP(&q),
                          CP(&k), CP(&v), B, Tq, Tk, NH, HD);
    tb *gr[3] = {&dq, &dk, &dv};
    const char *names[3] = {"dq norm", "dk norm", "dv norm"};
    // With one key, softmax has no gradient: P = 1, dS = P (dP - Dd) = 0 and dq
    // = dk = 0 exactly, so "norm" (relative to max |dq|) has nothing to divide
    // by. What a backend leaves there is dP - Dd rounded (TF32 rounds dP's
    // operands; Dd is a float32 sum), so dq and dk are measured against the
    // size of those terms: scale |dP| |k| and scale sum_i |dP_i| |q_i|, |dP|
    // doubled for the two terms.
    double term[2] = {0.0, 0.0};
    if (Tk == 1) {
        const double scale = 1.0 / sqrt((double)HD);
        double kmax = 0.0;
        for (size_t i = 0; i < nk; i++) kmax = fmax(kmax, fabs((double)k.h[i]));
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                const float *vr = v.h + (size_t)b * D + (size_t)h * HD;
                for (int c = 0; c < HD; c++) {
                    double dk_terms = 0.0;
                    for (int i = 0; i < Tq; i++) {
                        const size_t row = ((size_t)b * Tq + i) * D + (size_t)h * HD;
                        double dp = 0.0;
                        for (int e = 0; e < HD; e++) dp += (double)vr[e] * dout.h[row + e];
                        term[0] = fmax(term[0], 2.0 * scale * fabs(dp) * kmax);
                        dk_terms += 2.0 * scale * fabs(dp) * fabs((double)q.h[row + c]);
                    }
                    term[1] = fmax(term[1], dk_terms);
                }
            }
        names[0] = "dq vs terms", names[1] = "dk vs terms";
    }
    for (int i = 0; i < 3; i++) {
        pair p = fetch(gr[i]);
        double err = err_norm(p.g, p.r, p.n);
        if (i < 2 && Tk == 1) {
            double diff = 0.0, mag = term[i];
            for (size_t e = 0; e < p.n; e++) {
                if (nan_mismatch(p.g[e], p.r[e])) diff = INFINITY;
                diff = fmax(diff, fabs((double)p.g[e] - (double)p.r[e]));
                mag = fmax(mag, fabs((double)p.r[e]));
            }
            err = diff / (mag > 0 ? mag : 1e-30);
        }
        bad += report("attention_backward", g, shape, names[i], err,
                      g->act == VB_DTYPE_F32 && g != gtf32 ? 2e-5 : 2 * tol_attention(g));
        pair_free(&p);
    }
    G->free(g, gws);
    H->free(hctx, hws);
    TB_FREE(&q, &k, &v, &dout, &out, &lse, &dq, &dk, &dv);
    return bad;
}

static void test_attention(void **state) {
    (void)state;
    int bad = 0;
    vb_ctx *f = gctx[VB_DTYPE_F32];
    bad += attention_case(f, 2, 288, 288, 6, 32, 500);  // small config
    bad += attention_case(f, 2, 128, 128, 4, 16, 510);  // tiny config
    bad += attention_case(f, 1, 1000, 1000, 8, 48, 520); // base-like head dim, long sequence
    bad += attention_case(f, 1, 250, 1000, 8, 48, 530);  // context parallel: Tq != Tk
    bad += attention_case(f, 2, 37, 71, 3, 20, 540);     // odd everything
    bad += attention_case(f, 1, 65, 63, 2, 64, 550);
    bad += attention_case(f, 1, 1, 1, 1, 1, 560);
    bad += attention_case(f, 1, 70, 3, 2, 40, 570);
    // float32 with TF32 on: the tensor-core kernels with m16n8k8 tf32 products
    if (gtf32) {
        bad += attention_case(gtf32, 2, 288, 288, 6, 32, 571);
        bad += attention_case(gtf32, 1, 700, 4050, 2, 48, 572); // base T, Tq != Tk
        bad += attention_case(gtf32, 2, 37, 71, 3, 20, 573);
        bad += attention_case(gtf32, 1, 33, 40, 1, 18, 574);    // no 16-byte loads
        bad += attention_case(gtf32, 1, 65, 63, 2, 64, 575);
        bad += attention_case(gtf32, 1, 1, 1, 1, 1, 576);
    }
    for (int d = 1; d < 3; d++) {
        if (!gctx[d]) continue;
        bad += attention_case(gctx[d], 2, 288, 288, 6, 32, 580 + d);
        bad += attention_case(gctx[d], 1, 100, 300, 8, 48, 590 + d);
        bad += attention_case(gctx[d], 1, 700, 4050, 2, 48, 600 + d); // base T, Tq != Tk
        bad += attention_case(gctx[d], 2, 128, 128, 4, 16, 610 + d);  // tiny head dim
        bad += attention_case(gctx[d], 2, 37, 71, 3, 20, 620 + d);    // unaligned head dim
        bad += attention_case(gctx[d], 1, 65, 63, 2, 64, 630 + d);
        bad += attention_case(gctx[d], 1, 1, 1, 1, 1, 640 + d);
        bad += attention_case(gctx[d], 1, 70, 3, 2, 40, 650 + d);
        if (gcudnn[d]) { // cuDNN's fused attention: head dims a multiple of 8
            bad += attention_case(gcudnn[d], 2, 288, 288, 6, 32, 660 + d);
            bad += attention_case(gcudnn[d], 1, 100, 300, 8, 48, 670 + d);
            bad += attention_case(gcudnn[d], 1, 700, 4050, 2, 48, 680 + d); // base T, Tq != Tk
            bad += attention_case(gcudnn[d], 2, 128, 128, 4, 16, 690 + d);
            bad += attention_case(gcudnn[d], 1, 65, 63, 2, 64, 700 + d);
        }
    }
    vb_set_error_context("");
    assert_int_equal(bad, 0);
}

// The tensor-core attention kernels (TF32, bfloat16, float16) at shapes small
// enough for compute-sanitizer's racecheck to finish in seconds, yet with a
// full 128-row forward block, several K/V tiles in the double-buffered loop,
// partial tiles and Tq != Tk: `--only test_attention_tc_small` under the
// sanitizer, the hardware check of the cp.async / barrier discipline.
static void test_attention_tc_small(void **state) {
    (void)state;
    int bad = 0;
    if (gtf32) {
        bad += attention_case(gtf32, 1, 130, 200, 2, 48, 710); // two forward blocks, 4 K/V tiles
        bad += attention_case(gtf32, 1, 33, 40, 1, 18, 711);   // no 16-byte loads
    }
    for (int d = 1; d < 3; d++) {
        if (!gctx[d]) continue;
        bad += attention_case(gctx[d], 1, 130, 200, 2, 48, 720 + d);
        bad += attention_case(gctx[d], 1, 37, 71, 3, 20, 730 + d); // unaligned head dim
        bad += attention_case(gctx[d], 1, 65, 63, 1, 64, 740 + d);
    }
    vb_set_error_context("");
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------------------
// elementwise

static int gelu_case(vb_ctx *g, size_t n, uint64_t seed) {
    char shape[64];
    snprintf(shape, sizeof shape, "n=%zu", n);
    begin_case("gelu", g, shape);
    tb x = tb_rand(g, n, 1, -6, 6, seed), dout = tb_rand(g, n, 1, -1, 1, seed + 1);
    tb out = tb_new(g, n, 1), dinp = tb_new(g, n, 1);
    tb_poison(&out), tb_poison(&dinp);
    G->gelu_forward(g, DP(&out), DP(&x), n);
    H->gelu_forward(hctx, CP(&out), CP(&x), n);
    G->gelu_backward(g, DP(&dinp), DP(&x), DP(&dout), n);
    H->gelu_backward(hctx, CP(&dinp), CP(&x), CP(&dout), n);
    pair po = fetch(&out), pd = fetch(&dinp);
    const double tol = g->act == VB_DTYPE_F32 ? 1e-5 : tol_round(g);
    int bad = report("gelu_forward", g, shape, "elem", err_elem(po.g, po.r, n, act_floor(g, 1e-6)), tol);
    // gelu'(x) = Phi(x) + x phi(x) cancels near x = -0.75: the error is measured
    // against |dout| (Phi(x) + |x| phi(x)), the size of the terms
    float *s = fmalloc(n);
    for (size_t i = 0; i < n; i++) {
        const double xv = x.h[i], phi = exp(-0.5 * xv * xv) / sqrt(2.0 * M_PI);
        s[i] = (float)(fabs((double)dout.h[i]) * (0.5 * erfc(-xv / sqrt(2.0)) + fabs(xv) * phi));
        if (s[i] < act_floor(g, 1e-30)) s[i] = (float)act_floor(g, 1e-30);
    }
    bad += report("gelu_backward", g, shape, "scaled", err_scaled(pd.g, pd.r, s, n), tol);
    free(s);
    pair_free(&po), pair_free(&pd);
    TB_FREE(&x, &dout, &out, &dinp);
    return bad;
}

static int vector_case(vb_ctx *g, size_t n, uint64_t seed) {
    char shape[64];
    snprintf(shape, sizeof shape, "n=%zu", n);
    begin_case("vector ops", g, shape);
    int bad = 0;
    tb a = tb_rand(g, n, 1, -1, 1, seed), b = tb_rand(g, n, 1, -1, 1, seed + 1), out = tb_new(g, n, 1);
    tb_poison(&out);
    G->add(g, DP(&out), DP(&a), DP(&b), n);
    H->add(hctx, CP(&out), CP(&a), CP(&b), n);
    G->add(g, DP(&a), DP(&a), DP(&b), n); // out aliasing a
    H->add(hctx, CP(&a), CP(&a), CP(&b), n);
    pair p = fetch(&out), pa = fetch(&a);
    const double tr = g->act == VB_DTYPE_F32 ? 0 : tol_round(g);
    bad += report("add", g, shape, "elem", err_elem(p.g, p.r, n, 1e-3), tr);
    bad += report("add", g, shape, "out=a elem", err_elem(pa.g, pa.r, n, 1e-3), tr);
    pair_free(&p), pair_free(&pa);

    tb y = tb_rand(g, n, 0, -1, 1, seed + 2), x = tb_rand(g, n, 0, -1, 1, seed + 3);
    G->accumulate(g, DP(&y), DP(&x), n);
    H->accumulate(hctx, CP(&y), CP(&x), n);
    G->scale(g, DP(&x), 0.37f, n);
    H->scale(hctx, CP(&x), 0.37f, n);
    pair py = fetch(&y), px = fetch(&x);
    bad += report("accumulate", g, shape, "elem", err_elem(py.g, py.r, n, 1e-30), 0);
    bad += report("scale", g, shape, "elem", err_elem(px.g, px.r, n, 1e-30), 0);
    pair_free(&py), pair_free(&px);

    // sum of squares, float64 in backend memory
    double *gs = G->alloc(g, sizeof(double)), *hs = H->alloc(hctx, sizeof(double));
    double nan = NAN, gv = 0, hv = 0;
    G->memcpy_h2d(g, gs, &nan, sizeof nan);
    G->sum_squares(g, gs, DP(&y), n);
    H->sum_squares(hctx, hs, CP(&y), n);
    G->memcpy_d2h(g, &gv, gs, sizeof gv);
    G->synchronize(g);
    H->memcpy_d2h(hctx, &hv, hs, sizeof hv);
    H->synchronize(hctx);
    bad += report("sum_squares", g, shape, "rel", isnan(gv) ? INFINITY : fabs(gv - hv) / fabs(hv), 1e-12);
    G->free(g, gs);
    H->free(hctx, hs);

    // cast_to_act: bit-exact round to nearest even (checked against the host's rounding)
    tb src = tb_rand(g, n, 0, -70000.0f, 70000.0f, seed + 4), dst = tb_new(g, n, 1);
    for (size_t i = 0; i < 64 && i < n; i++) src.h[i] = ldexpf(src.h[i], -30); // tiny values (subnormal in fp16)
    tb_up(&src);
    tb_poison(&dst);
    G->cast_to_act(g, DP(&dst), DP(&src), n);
    float *got = fmalloc(n);
    tb_gpu(&dst, got);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        float want = round_to(g->act, src.h[i]);
        wrong += !(got[i] == want || (isinf(got[i]) && isinf(want) && got[i] == want));
    }
    bad += report("cast_to_act", g, shape, "mismatch", (double)wrong, 0);
    free(got);
    TB_FREE(&a, &b, &out, &y, &x, &src, &dst);
    return bad;
}

static int patch_case(vb_ctx *g, int B, int C, int Hh, int W, int p, uint64_t seed) {
    char shape[96];
    snprintf(shape, sizeof shape, "B=%d C=%d H=%d W=%d p=%d", B, C, Hh, W, p);
    begin_case("patchify", g, shape);
    const int T = (Hh / p) * (W / p), K = C * p * p;
    const size_t ni = (size_t)B * C * Hh * W, nt = (size_t)B * T * K;
    tb img = tb_rand(g, ni, 0, -3, 3, seed), patches = tb_new(g, nt, 1);
    tb tokens = tb_rand(g, nt, 1, -3, 3, seed + 1), outimg = tb_new(g, ni, 1);
    tb dimg = tb_rand(g, ni, 1, -3, 3, seed + 2), dtok = tb_new(g, nt, 1);
    tb_poison(&patches), tb_poison(&outimg), tb_poison(&dtok);
    G->patchify(g, DP(&patches), DP(&img), B, C, Hh, W, p);
    H->patchify(hctx, CP(&patches), CP(&img), B, C, Hh, W, p);
    G->unpatchify(g, DP(&outimg), DP(&tokens), B, C, Hh, W, p);
    H->unpatchify(hctx, CP(&outimg), CP(&tokens), B, C, Hh, W, p);
    G->unpatchify_backward(g, DP(&dtok), DP(&dimg), B, C, Hh, W, p);
    H->unpatchify_backward(hctx, CP(&dtok), CP(&dimg), B, C, Hh, W, p);
    pair pp = fetch(&patches), pu = fetch(&outimg), pd = fetch(&dtok);
    // data movement: exact (patchify rounds the float32 image once to the dtype)
    int bad = report("patchify", g, shape, "elem", err_elem(pp.g, pp.r, nt, 1e-30),
                     g->act == VB_DTYPE_F32 ? 0 : tol_round(g));
    bad += report("unpatchify", g, shape, "elem", err_elem(pu.g, pu.r, ni, 1e-30), 0);
    bad += report("unpatchify_backward", g, shape, "elem", err_elem(pd.g, pd.r, nt, 1e-30), 0);
    pair_free(&pp), pair_free(&pu), pair_free(&pd);

    begin_case("add_pos_embed", g, shape);
    const int D = 192;
    const size_t n = (size_t)B * T * D;
    tb inp = tb_rand(g, n, 1, -1, 1, seed + 3), pos = tb_rand(g, (size_t)T * D, 1, -1, 1, seed + 4);
    tb out = tb_new(g, n, 1), dpos = tb_rand(g, (size_t)T * D, 0, -1, 1, seed + 5);
    tb_poison(&out);
    float *dpos0 = fmalloc(dpos.n);
    memcpy(dpos0, dpos.h, dpos.n * 4);
    G->add_pos_embed(g, DP(&out), DP(&inp), DP(&pos), B, T, D);
    H->add_pos_embed(hctx, CP(&out), CP(&inp), CP(&pos), B, T, D);
    G->add_pos_embed(g, DP(&inp), DP(&inp), DP(&pos), B, T, D); // out aliasing inp
    H->add_pos_embed(hctx, CP(&inp), CP(&inp), CP(&pos), B, T, D);
    G->add_pos_embed_backward(g, DP(&dpos), DP(&out), B, T, D);
    H->add_pos_embed_backward(hctx, CP(&dpos), CP(&out), B, T, D);
    pair po = fetch(&out), pi = fetch(&inp), pg = fetch(&dpos);
    const double tr = g->act == VB_DTYPE_F32 ? 0 : tol_round(g);
    bad += report("add_pos_embed", g, shape, "elem", err_elem(po.g, po.r, n, 1e-3), tr);
    bad += report("add_pos_embed", g, shape, "out=inp elem", err_elem(pi.g, pi.r, n, 1e-3), tr);
    // the backward reads each side's own forward output: a half type's
    // rounding differences enter here
    bad += report("add_pos_embed_backward", g, shape, "dpos acc", err_acc(pg.g, pg.r, dpos0, dpos.n),
                  g->act == VB_DTYPE_F32 ? 1e-6 : 2 * tol_round(g));
    pair_free(&po), pair_free(&pi), pair_free(&pg);
    free(dpos0);
    TB_FREE(&img, &patches, &tokens, &outimg, &dimg, &dtok, &inp, &pos, &out, &dpos);
    return bad;
}

// the loader's normalisation on the device (normalize_on_device): float32 in
// place, the same bits as the CPU's (IEEE subtraction and division); an
// element the kernel skips keeps its raw value and fails
static int normalize_case(vb_ctx *g, int B, int C, size_t hw, uint64_t seed) {
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d C=%d hw=%zu", B, C, hw);
    begin_case("normalize_channels", g, shape);
    const size_t n = (size_t)B * C * hw;
    tb x = tb_rand(g, n, 0, -300, 900, seed), mean = tb_rand(g, (size_t)C, 0, -5, 300, seed + 1),
       std = tb_rand(g, (size_t)C, 0, 0.01f, 50, seed + 2);
    G->normalize_channels(g, DP(&x), DP(&mean), DP(&std), B, C, hw);
    H->normalize_channels(hctx, CP(&x), CP(&mean), CP(&std), B, C, hw);
    pair p = fetch(&x);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += memcmp(&p.g[i], &p.r[i], sizeof(float)) != 0;
    int bad = report("normalize_channels", g, shape, "mismatch", (double)wrong, 0);
    pair_free(&p);
    TB_FREE(&x, &mean, &std);
    return bad;
}

static void test_elementwise(void **state) {
    (void)state;
    int bad = 0;
    bad += normalize_case(gctx[VB_DTYPE_F32], 2, 20, 360 * 720, 590); // base's batch planes
    bad += normalize_case(gctx[VB_DTYPE_F32], 3, 5, 77, 595);
    for (int d = 0; d < 3; d++) {
        vb_ctx *g = gctx[d];
        if (!g) continue;
        bad += gelu_case(g, 100003, 600 + d); // the scalar kernels (n not a multiple of 8)
        bad += gelu_case(g, 131072, 605 + d); // the 16-byte kernels
        bad += vector_case(g, 100003, 610 + d);
        bad += vector_case(g, 7, 620 + d);
        bad += patch_case(g, 2, 20, 96, 192, 8, 630 + d); // small config
        bad += patch_case(g, 1, 3, 12, 20, 4, 640 + d);
    }
    vb_set_error_context("");
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------------------
// loss and metric

static int loss_case(vb_ctx *g, int B, size_t n, uint64_t seed) {
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d n=%zu", B, n);
    begin_case("rel_l2_loss", g, shape);
    const size_t total = (size_t)B * n;
    tb pred = tb_rand(g, total, 1, -2, 2, seed), tar = tb_rand(g, total, 0, -2, 2, seed + 1);
    tb loss = tb_new(g, 1, 0), per = tb_new(g, B, 0), dpred = tb_new(g, total, 1);
    tb dloss = tb_new(g, 1, 0);
    tb_poison(&loss), tb_poison(&per), tb_poison(&dpred);
    tb_fill(&dloss, 3.5f);
    G->rel_l2_loss_forward(g, DP(&loss), DP(&per), DP(&pred), DP(&tar), B, n);
    H->rel_l2_loss_forward(hctx, CP(&loss), CP(&per), CP(&pred), CP(&tar), B, n);
    pair pl = fetch(&loss), pp = fetch(&per);
    int bad = report("rel_l2_loss_forward", g, shape, "loss", err_elem(pl.g, pl.r, 1, 1e-30), 1e-6);
    bad += report("rel_l2_loss_forward", g, shape, "per_sample", err_elem(pp.g, pp.r, B, 1e-30), 1e-6);
    pair_free(&pl), pair_free(&pp);
    const double tol = g->act == VB_DTYPE_F32 ? 1e-5 : tol_round(g);
    for (int with = 0; with < 2; with++) {
        begin_case("rel_l2_loss_backward", g, shape);
        tb_poison(&dpred);
        G->rel_l2_loss_backward(g, DP(&dpred), DP(&pred), DP(&tar), B, n, with ? DP(&dloss) : NULL);
        H->rel_l2_loss_backward(hctx, CP(&dpred), CP(&pred), CP(&tar), B, n, with ? CP(&dloss) : NULL);
        pair pd = fetch(&dpred);
        bad += report("rel_l2_loss_backward", g, shape, with ? "dloss=3.5" : "dloss=NULL",
                      err_elem(pd.g, pd.r, total, act_floor(g, 1e-6 * maxabs(pd.r, total) + 1e-30)), tol);
        pair_free(&pd);
    }
    TB_FREE(&pred, &tar, &loss, &per, &dpred, &dloss);
    return bad;
}

static int rmse_case(vb_ctx *g, int B, int C, int Hh, int W, uint64_t seed) {
    char shape[96];
    snprintf(shape, sizeof shape, "B=%d C=%d H=%d W=%d", B, C, Hh, W);
    begin_case("weighted_rmse_accumulate", g, shape);
    const size_t n = (size_t)B * C * Hh * W;
    tb pred = tb_rand(g, n, 1, -2, 2, seed), tar = tb_rand(g, n, 0, -2, 2, seed + 1);
    double *pre = calloc(C, sizeof(double)), *gv = calloc(C, sizeof(double)), *hv = calloc(C, sizeof(double));
    assert_true(pre && gv && hv);
    for (int c = 0; c < C; c++) pre[c] = 0.25 + c;
    double *gs = G->alloc(g, C * sizeof(double)), *hs = H->alloc(hctx, C * sizeof(double));
    G->memcpy_h2d(g, gs, pre, C * sizeof(double));
    H->memcpy_h2d(hctx, hs, pre, C * sizeof(double));
    G->weighted_rmse_accumulate(g, gs, DP(&pred), DP(&tar), B, C, Hh, W);
    H->weighted_rmse_accumulate(hctx, hs, CP(&pred), CP(&tar), B, C, Hh, W);
    G->memcpy_d2h(g, gv, gs, C * sizeof(double));
    G->synchronize(g);
    H->memcpy_d2h(hctx, hv, hs, C * sizeof(double));
    H->synchronize(hctx);
    double worst = 0;
    for (int c = 0; c < C; c++) {
        double e = fabs(gv[c] - hv[c]) / fabs(hv[c] - pre[c]);
        worst = isnan(e) ? INFINITY : fmax(worst, e);
    }
    int bad = report("weighted_rmse_accumulate", g, shape, "acc rel", worst, 1e-10);
    G->free(g, gs);
    H->free(hctx, hs);
    free(pre), free(gv), free(hv);
    TB_FREE(&pred, &tar);
    return bad;
}

static void test_loss(void **state) {
    (void)state;
    int bad = 0;
    for (int d = 0; d < 3; d++) {
        vb_ctx *g = gctx[d];
        if (!g) continue;
        bad += loss_case(g, 2, (size_t)20 * 96 * 192, 700 + d); // small config
        bad += loss_case(g, 3, 37, 710 + d);
        bad += rmse_case(g, 2, 20, 96, 192, 720 + d);
        bad += rmse_case(g, 3, 2, 7, 5, 730 + d);
        bad += rmse_case(g, 1, 2, 1, 9, 740 + d); // H = 1: weight 1
    }
    vb_set_error_context("");
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------------------
// Adam

// A loss-scale state on both backends (device memory on the GPU side).
typedef struct {
    vb_loss_scale_state *g, *h;
} ls_pair;

static ls_pair ls_new(vb_ctx *g, const vb_loss_scale_state *init) {
    ls_pair l = {G->alloc(g, sizeof *init), H->alloc(hctx, sizeof *init)};
    G->memcpy_h2d(g, l.g, init, sizeof *init);
    H->memcpy_h2d(hctx, l.h, init, sizeof *init);
    G->synchronize(g);
    return l;
}

static void ls_read(vb_ctx *g, const ls_pair *l, vb_loss_scale_state *gs, vb_loss_scale_state *hs) {
    G->memcpy_d2h(g, gs, l->g, sizeof *gs);
    G->synchronize(g);
    H->memcpy_d2h(hctx, hs, l->h, sizeof *hs);
}

static void ls_free(vb_ctx *g, ls_pair *l) {
    G->free(g, l->g);
    H->free(hctx, l->h);
}

// 0 when every field of the two states is the same bits
static int ls_differ(const vb_loss_scale_state *a, const vb_loss_scale_state *b) {
    return memcmp(a, b, sizeof *a) != 0;
}

static int adam_case_ls(vb_ctx *g, size_t n, int step, float grad_scale, int with_act, uint64_t seed,
                        const vb_loss_scale_state *ls);

static int adam_case(vb_ctx *g, size_t n, int step, float grad_scale, int with_act, uint64_t seed) {
    return adam_case_ls(g, n, step, grad_scale, with_act, seed, NULL);
}

// ls non-NULL: the update runs with that loss-scale state (its skipped count
// shifts the bias corrections; found_inf set: nothing may change, bit for bit)
static int adam_case_ls(vb_ctx *g, size_t n, int step, float grad_scale, int with_act, uint64_t seed,
                        const vb_loss_scale_state *ls) {
    char shape[128];
    snprintf(shape, sizeof shape, "n=%zu step=%d scale=%g%s%s", n, step, grad_scale, with_act ? " +param_act" : "",
             !ls ? "" : ls->found_inf != 0.0f ? " found_inf" : " ls skipped=2");
    begin_case("adam_update", g, shape);
    tb p = tb_rand(g, n, 0, -1, 1, seed), grad = tb_rand(g, n, 0, -1, 1, seed + 1);
    tb m = tb_rand(g, n, 0, -0.1f, 0.1f, seed + 2), v = tb_rand(g, n, 0, 1e-4f, 1e-2f, seed + 3);
    tb pact = tb_new(g, n, 1);
    tb_poison(&pact);
    const vb_adam_args args = {.lr = 5e-4f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                               .grad_scale = grad_scale, .step = step};
    vb_adam_args *ga = G->alloc(g, sizeof args), *ha = H->alloc(hctx, sizeof args);
    G->memcpy_h2d(g, ga, &args, sizeof args);
    H->memcpy_h2d(hctx, ha, &args, sizeof args);
    G->synchronize(g);
    ls_pair lp = {NULL, NULL};
    if (ls) lp = ls_new(g, ls);
    pair p0 = fetch(&p), m0 = fetch(&m), v0 = fetch(&v);
    G->adam_update(g, DP(&p), with_act ? DP(&pact) : NULL, DP(&grad), DP(&m), DP(&v), n, ga, lp.g);
    H->adam_update(hctx, CP(&p), with_act ? CP(&pact) : NULL, CP(&grad), CP(&m), CP(&v), n, ha, lp.h);
    pair pp = fetch(&p), pm = fetch(&m), pv = fetch(&v);
    if (ls && ls->found_inf != 0.0f) {
        // a skipped step: params, moments and the activation view untouched on both sides
        int bad = 0;
        bad += report("adam_update", g, shape, "param kept", memcmp(pp.g, p0.g, n * 4) || memcmp(pp.r, p0.r, n * 4), 0);
        bad += report("adam_update", g, shape, "m kept", memcmp(pm.g, m0.g, n * 4) || memcmp(pm.r, m0.r, n * 4), 0);
        bad += report("adam_update", g, shape, "v kept", memcmp(pv.g, v0.g, n * 4) || memcmp(pv.r, v0.r, n * 4), 0);
        float *got = fmalloc(n);
        tb_gpu(&pact, got);
        int kept = 1;
        for (size_t i = 0; i < n; i++) kept &= isnan(got[i]);
        bad += report("adam_update", g, shape, "param_act kept", !kept, 0);
        free(got);
        pair_free(&p0), pair_free(&m0), pair_free(&v0);
        pair_free(&pp), pair_free(&pm), pair_free(&pv);
        ls_free(g, &lp);
        G->free(g, ga);
        H->free(hctx, ha);
        TB_FREE(&p, &grad, &m, &v, &pact);
        return bad;
    }
    pair_free(&p0), pair_free(&m0), pair_free(&v0);
    if (ls) ls_free(g, &lp);
    int bad = report("adam_update", g, shape, "param", err_elem(pp.g, pp.r, n, 1e-3), 1e-6);
    // m and v can cancel to ~0 in an element: measured against their largest value
    bad += report("adam_update", g, shape, "m norm", err_norm(pm.g, pm.r, n), 1e-6);
    bad += report("adam_update", g, shape, "v norm", err_norm(pv.g, pv.r, n), 1e-6);
    if (with_act) {
        float *got = fmalloc(n);
        tb_gpu(&pact, got);
        // the activation-dtype view of the GPU's own updated params
        for (size_t i = 0; i < n; i++) pp.r[i] = round_to(g->act, pp.g[i]);
        bad += report("adam_update", g, shape, "param_act", err_elem(got, pp.r, n, 1e-30), 0);
        free(got);
    } else {
        float *got = fmalloc(n);
        tb_gpu(&pact, got);
        bad += report("adam_update", g, shape, "param_act kept", isnan(got[0]) && isnan(got[n - 1]) ? 0 : 1, 0);
        free(got);
    }
    pair_free(&pp), pair_free(&pm), pair_free(&pv);
    G->free(g, ga);
    H->free(hctx, ha);
    TB_FREE(&p, &grad, &m, &v, &pact);
    return bad;
}

static void test_adam(void **state) {
    (void)state;
    int bad = 0;
    bad += adam_case(gctx[VB_DTYPE_F32], 100003, 1, 1.0f, 1, 800);
    bad += adam_case(gctx[VB_DTYPE_F32], 100003, 7, 0.5f, 0, 810);
    bad += adam_case(gctx[VB_DTYPE_F32], 5, 30000, 1.0f, 1, 820);
    for (int d = 1; d < 3; d++)
        if (gctx[d]) bad += adam_case(gctx[d], 100003, 3, 1.0f, 1, 830 + d);
    // with a loss scaler: the bias corrections count only the steps taken
    // (step 9 with 2 skipped is step 7), and a flagged step writes nothing
    const vb_loss_scale_state ok = {.scale = 1024.0f, .skipped = 2, .growth_interval = 2000, .growth_factor = 2.0f,
                                    .backoff_factor = 0.5f};
    vb_loss_scale_state inf = ok;
    inf.found_inf = 1.0f;
    bad += adam_case_ls(gctx[VB_DTYPE_F32], 100003, 9, 1.0f, 1, 840, &ok);
    bad += adam_case_ls(gctx[VB_DTYPE_F32], 100003, 9, 1.0f, 1, 841, &inf);
    bad += adam_case_ls(gctx[VB_DTYPE_F32], 4097, 9, 1.0f, 0, 842, &inf);
    if (gctx[VB_DTYPE_F16]) {
        bad += adam_case_ls(gctx[VB_DTYPE_F16], 100003, 9, 1.0f, 1, 843, &ok);
        bad += adam_case_ls(gctx[VB_DTYPE_F16], 100003, 9, 1.0f, 1, 844, &inf);
    }
    vb_set_error_context("");
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------------------
// loss scaling: grad_unscale_check and loss_scale_update

// grads (scaled by `scale`, optionally with a poisoned element) unscaled on
// both backends: the values must be the same bits (a multiply by a power of
// two), and found_inf raised exactly when an element was not finite
static int unscale_case(vb_ctx *g, size_t n, float scale, float poison, size_t at, float found_before,
                        uint64_t seed) {
    char shape[128];
    snprintf(shape, sizeof shape, "n=%zu scale=%g poison=%g@%zu found_inf=%g", n, scale, poison, at,
             found_before);
    begin_case("grad_unscale_check", g, shape);
    tb grad = tb_new_off(g, n, 0, 3); // an unaligned view, like a tensor inside the flat buffer
    tu_fill_uniform(grad.h, n, -scale, scale, seed);
    if (poison != 0.0f) grad.h[at] = poison;
    tb_up(&grad);
    vb_loss_scale_state st = {.scale = scale, .found_inf = found_before, .growth_interval = 2000,
                              .growth_factor = 2.0f, .backoff_factor = 0.5f};
    ls_pair lp = ls_new(g, &st);
    G->grad_unscale_check(g, DP(&grad), n, lp.g);
    H->grad_unscale_check(hctx, CP(&grad), n, lp.h);
    pair pg = fetch(&grad);
    int same = 1;
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &pg.g[i], 4), memcpy(&b, &pg.r[i], 4);
        // NaN payloads may differ between the backends; everything else is exact
        same &= a == b || (isnan(pg.g[i]) && isnan(pg.r[i]));
    }
    int bad = report("grad_unscale_check", g, shape, "grads bitwise", !same, 0);
    vb_loss_scale_state gs, hs;
    ls_read(g, &lp, &gs, &hs);
    const float want = (poison != 0.0f && !isfinite(poison)) || found_before != 0.0f ? 1.0f : 0.0f;
    bad += report("grad_unscale_check", g, shape, "found_inf", gs.found_inf != want || hs.found_inf != want, 0);
    bad += report("grad_unscale_check", g, shape, "state", ls_differ(&gs, &hs), 0);
    pair_free(&pg);
    ls_free(g, &lp);
    TB_FREE(&grad);
    return bad;
}

// a run of updates with found_inf set at some steps: both backends' states
// bit for bit after each one (backoff, skipped count, growth after the interval)
static int scale_update_case(vb_ctx *g, int growth_interval, const char *pattern) {
    char shape[128];
    snprintf(shape, sizeof shape, "interval=%d steps=%s", growth_interval, pattern);
    begin_case("loss_scale_update", g, shape);
    vb_loss_scale_state st = {.scale = 65536.0f, .growth_interval = growth_interval, .growth_factor = 2.0f,
                              .backoff_factor = 0.5f, .last_scale = 65536.0f};
    ls_pair lp = ls_new(g, &st);
    int bad = 0, skipped = 0;
    float want = 65536.0f;
    int tracker = 0;
    for (const char *c = pattern; *c; c++) {
        const float one = 1.0f;
        if (*c == 'x') {
            G->memcpy_h2d(g, &lp.g->found_inf, &one, sizeof one);
            H->memcpy_h2d(hctx, &lp.h->found_inf, &one, sizeof one);
        }
        G->loss_scale_update(g, lp.g);
        H->loss_scale_update(hctx, lp.h);
        if (*c == 'x') {
            want *= 0.5f, tracker = 0, skipped++;
        } else if (++tracker == growth_interval) {
            want *= 2.0f, tracker = 0;
        }
        vb_loss_scale_state gs, hs;
        ls_read(g, &lp, &gs, &hs);
        bad += ls_differ(&gs, &hs);
        bad += gs.scale != want || gs.skipped != skipped || gs.growth_tracker != tracker || gs.found_inf != 0.0f;
        bad += gs.last_skipped != (*c == 'x');
    }
    bad = report("loss_scale_update", g, shape, "state", bad, 0);
    ls_free(g, &lp);
    return bad;
}

static void test_loss_scaling(void **state) {
    (void)state;
    vb_ctx *g = gctx[VB_DTYPE_F32];
    int bad = 0;
    bad += unscale_case(g, 100003, 65536.0f, 0.0f, 0, 0.0f, 850);
    bad += unscale_case(g, 100003, 65536.0f, INFINITY, 77777, 0.0f, 851);
    bad += unscale_case(g, 100003, 65536.0f, -INFINITY, 100002, 0.0f, 852);
    bad += unscale_case(g, 100003, 65536.0f, NAN, 0, 0.0f, 853);
    bad += unscale_case(g, 5, 0.5f, 0.0f, 0, 0.0f, 854);      // a scale below 1 multiplies up
    bad += unscale_case(g, 4099, 1024.0f, 0.0f, 0, 1.0f, 855); // an earlier range's flag is kept
    bad += unscale_case(g, 4099, 3.0f, 0.0f, 0, 0.0f, 856);    // not a power of two: one rounding, same on both
    bad += scale_update_case(g, 3, "...x....x.......");
    bad += scale_update_case(g, 1, "..xx..");
    bad += scale_update_case(g, 2000, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); // overflow after overflow: halving each time
    vb_set_error_context("");
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------------------
// the half-type contexts exist (ctx_create accepts them)

static void test_contexts(void **state) {
    (void)state;
    int bad = 0;
    for (int d = 0; d < 3; d++) {
        if (gctx[d]) continue;
        printf("FAIL ctx_create %s: refused\n", vb_dtype_name((vb_dtype)d));
        bad++;
    }
    if (!gtf32) {
        printf("FAIL ctx_create float32 with tf32: refused\n");
        bad++;
    }
    char err[256] = "";
    vb_ctx *none = G->ctx_create(&(vb_ctx_opts){.act = VB_DTYPE_F32, .device = 1 << 20}, err, sizeof err);
    printf("     ctx_create(device 1048576) -> %s: %s\n", none ? "a context" : "NULL", err);
    bad += none != NULL || err[0] == '\0';
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------------------
// --bench [B]: base config shapes (B samples, default 2: 8100 tokens, D=384, 8 heads of 48)

static void bench_one(vb_ctx *g, const char *what, double flops, double bytes, int reps,
                      void (*fn)(vb_ctx *, void *), void *arg) {
    vb_event *e0 = G->event_create(g), *e1 = G->event_create(g);
    fn(g, arg); // warm-up (and cuBLASLt's algorithm choice)
    G->event_record(g, e0);
    for (int i = 0; i < reps; i++) fn(g, arg);
    G->event_record(g, e1);
    G->event_synchronize(g, e1);
    double ms = G->event_elapsed_ms(g, e0, e1) / reps;
    printf("bench %-8s %-44s %9.3f ms", label(g), what, ms);
    if (flops > 0) printf("  %7.1f TFLOP/s", flops / ms * 1e-9);
    if (bytes > 0) printf("  %7.1f GB/s", bytes / ms * 1e-6);
    printf("\n");
    fflush(stdout);
    G->event_destroy(g, e0);
    G->event_destroy(g, e1);
}

typedef struct {
    void *a, *b, *c, *d, *e, *f, *g2, *h, *i;
    int N, C, OC, B, T, NH, HD;
} bench_args;

static void run_mm_fwd(vb_ctx *g, void *p) {
    bench_args *a = p;
    G->matmul_forward(g, a->c, a->a, a->b, a->d, a->N, a->C, a->OC);
}
static void run_mm_bwd(vb_ctx *g, void *p) {
    bench_args *a = p;
    G->matmul_backward(g, a->e, a->f, a->g2, a->c, a->a, a->b, a->N, a->C, a->OC, 0);
}
static void run_att_fwd(vb_ctx *g, void *p) {
    bench_args *a = p;
    G->attention_forward(g, a->d, a->e, a->i, a->a, a->b, a->c, a->B, a->T, a->T, a->NH, a->HD);
}
static void run_att_bwd(vb_ctx *g, void *p) {
    bench_args *a = p;
    G->attention_backward(g, a->f, a->g2, a->h, a->i, a->d, a->d, a->e, a->a, a->b, a->c, a->B, a->T,
                          a->T, a->NH, a->HD);
}
static void run_ln_fwd(vb_ctx *g, void *p) {
    bench_args *a = p;
    G->layernorm_forward(g, a->b, a->e, a->f, a->a, a->c, a->d, a->N, a->C, 1e-5f);
}
static void run_ln_bwd(vb_ctx *g, void *p) {
    bench_args *a = p;
    G->layernorm_backward(g, a->g2, a->h, a->i, a->b, a->a, a->c, a->e, a->f, a->N, a->C);
}

// a device buffer of n activations (or floats) filled with values in [-1, 1)
static void *bench_buf(vb_ctx *g, size_t n, int act) {
    float *h = fmalloc(n), *f = G->alloc(g, n * 4);
    tu_fill_uniform(h, n, -1, 1, n);
    G->memcpy_h2d(g, f, h, n * 4);
    void *d = f;
    if (act && g->act != VB_DTYPE_F32) {
        d = G->alloc(g, n * vb_dtype_size(g->act));
        G->cast_to_act(g, d, f, n);
    }
    G->synchronize(g);
    if (d != f) G->free(g, f);
    free(h);
    return d;
}

static int run_bench(int B) {
    vb_ctx *list[4] = {gctx[VB_DTYPE_F32], gtf32, gctx[VB_DTYPE_BF16], gcudnn[VB_DTYPE_BF16]};
    const int T = 4050, D = 384, NH = 8, HD = 48, N = B * T;
    const int shapes[5][2] = {{D, 3 * D}, {D, D}, {D, 4 * D}, {4 * D, D}, {1280, D}};
    const char *names[5] = {"qkv", "proj", "fc1", "fc2", "patch embed"};
    for (int l = 0; l < 4; l++) {
        vb_ctx *g = list[l];
        if (!g) continue;
        const size_t es = vb_dtype_size(g->act);
        for (int s = 0; s < 5 && l != 3; s++) { // the cuDNN context differs in attention only
            const int C = shapes[s][0], OC = shapes[s][1];
            bench_args a = {.N = N, .C = C, .OC = OC};
            a.a = bench_buf(g, (size_t)N * C, 1), a.b = bench_buf(g, (size_t)OC * C, 1);
            a.c = bench_buf(g, (size_t)N * OC, 1), a.d = bench_buf(g, OC, 1);
            a.e = bench_buf(g, (size_t)N * C, 1), a.f = bench_buf(g, (size_t)OC * C, 0);
            a.g2 = bench_buf(g, OC, 0);
            char what[96];
            const double fl = 2.0 * N * C * OC;
            snprintf(what, sizeof what, "matmul_forward %s N=%d C=%d OC=%d", names[s], N, C, OC);
            bench_one(g, what, fl, 0, 20, run_mm_fwd, &a);
            snprintf(what, sizeof what, "matmul_backward %s", names[s]);
            bench_one(g, what, 2 * fl, 0, 20, run_mm_bwd, &a);
            G->free(g, a.a), G->free(g, a.b), G->free(g, a.c), G->free(g, a.d);
            G->free(g, a.e), G->free(g, a.f), G->free(g, a.g2);
        }
        bench_args a = {.B = B, .T = T, .NH = NH, .HD = HD};
        const size_t n = (size_t)B * T * D;
        a.a = bench_buf(g, n, 1), a.b = bench_buf(g, n, 1), a.c = bench_buf(g, n, 1);
        a.d = bench_buf(g, n, 1), a.e = bench_buf(g, (size_t)B * NH * T, 0);
        a.f = bench_buf(g, n, 1), a.g2 = bench_buf(g, n, 1), a.h = bench_buf(g, n, 1);
        a.i = G->alloc(g, G->attention_workspace_bytes(g, B, T, T, NH, HD));
        run_att_fwd(g, &a); // lse of these inputs, for the backward
        const double fl = 4.0 * B * NH * (double)T * T * HD;
        char what[96];
        snprintf(what, sizeof what, "attention_forward B=%d T=%d NH=%d HD=%d", B, T, NH, HD);
        bench_one(g, what, fl, 0, 3, run_att_fwd, &a);
        // backward: 5 products per tile pair (dQ recomputes 2 of them: 7 done)
        bench_one(g, "attention_backward (flops: 5 products)", 2.5 * fl, 0, 2, run_att_bwd, &a);
        G->free(g, a.i);
        G->free(g, a.e), G->free(g, a.f);
        if (l == 3 || g == gtf32) { // LayerNorm: no TF32, and one float32 row is enough
            G->free(g, a.a), G->free(g, a.b), G->free(g, a.c), G->free(g, a.d);
            G->free(g, a.g2), G->free(g, a.h);
            continue;
        }
        bench_args l2 = {.N = N, .C = D};
        l2.a = a.a, l2.b = a.b, l2.c = bench_buf(g, D, 1), l2.d = bench_buf(g, D, 1);
        l2.e = bench_buf(g, N, 0), l2.f = bench_buf(g, N, 0);
        l2.g2 = a.c, l2.h = bench_buf(g, D, 0), l2.i = bench_buf(g, D, 0);
        G->synchronize(g);
        run_ln_fwd(g, &l2); // mean/rstd for the backward
        snprintf(what, sizeof what, "layernorm_forward N=%d C=%d", N, D);
        bench_one(g, what, 0, 2.0 * N * D * es, 20, run_ln_fwd, &l2);
        bench_one(g, "layernorm_backward (dinp, dW, db)", 0, 4.0 * N * D * es, 20, run_ln_bwd, &l2);
        G->free(g, l2.c), G->free(g, l2.d), G->free(g, l2.e), G->free(g, l2.f);
        G->free(g, l2.h), G->free(g, l2.i);
        G->free(g, a.a), G->free(g, a.b), G->free(g, a.c), G->free(g, a.d);
        G->free(g, a.g2), G->free(g, a.h);
    }
    return 0;
}

// ---------------------------------------------------------------------------

int main(int argc, char **argv) {
    G = vb_ops_cuda();
    if (!G) {
        printf("test_cuda_ops: SKIP: the CUDA backend is not compiled in (configure with -DVB_CUDA=ON "
               "on a machine with the CUDA toolkit)\n");
        return 77;
    }
    H = vb_ops_cpu();
    char err[512] = "";
    gctx[VB_DTYPE_F32] = G->ctx_create(&(vb_ctx_opts){.act = VB_DTYPE_F32, .device = 0}, err, sizeof err);
    if (!gctx[VB_DTYPE_F32]) {
        printf("test_cuda_ops: SKIP: no usable GPU: %s\n", err);
        return 77;
    }
    hctx = H->ctx_create(&(vb_ctx_opts){.act = VB_DTYPE_F32}, err, sizeof err);
    if (!hctx) {
        printf("test_cuda_ops: the CPU backend refused a float32 context: %s\n", err);
        return 1;
    }
    for (int d = 1; d < 3; d++) {
        gctx[d] = G->ctx_create(&(vb_ctx_opts){.act = (vb_dtype)d, .device = 0}, err, sizeof err);
        if (!gctx[d]) printf("test_cuda_ops: %s context refused: %s\n", vb_dtype_name((vb_dtype)d), err);
    }
    gtf32 = G->ctx_create(&(vb_ctx_opts){.act = VB_DTYPE_F32, .device = 0, .tf32 = 1}, err, sizeof err);
    for (int d = 1; d < 3; d++) {
        gcudnn[d] = G->ctx_create(
            &(vb_ctx_opts){.act = (vb_dtype)d, .device = 0, .attention = VB_ATTENTION_CUDNN}, err, sizeof err);
        if (!gcudnn[d]) printf("test_cuda_ops: no cuDNN attention cases: %s\n", err);
    }
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
        const int B = argc > 2 ? atoi(argv[2]) : 2;
        if (B < 1 || B > 64) {
            printf("test_cuda_ops: --bench B: B = '%s' must be 1..64\n", argv[2]);
            return 2;
        }
        return run_bench(B);
    }

    if (argc > 1 && strcmp(argv[1], "--only") == 0) {
        if (argc < 3 || !argv[2][0]) {
            printf("test_cuda_ops: --only needs a test name pattern (e.g. test_attention)\n");
            return 2;
        }
        cmocka_set_test_filter(argv[2]);
    } else if (argc > 1) {
        printf("test_cuda_ops: unknown argument '%s' (--only PATTERN, --bench [B])\n", argv[1]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contexts),
        cmocka_unit_test(test_memory_events),
        cmocka_unit_test(test_graphs),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_tc_small),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_loss),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_loss_scaling),
        cmocka_unit_test(test_fp8),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    printf("test_cuda_ops: %d failing case%s\n", g_failures, g_failures == 1 ? "" : "s");
    return rc;
}
