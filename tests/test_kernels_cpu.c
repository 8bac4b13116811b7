/* test_kernels_cpu.c: the CPU elementwise and LayerNorm kernels against
 * double-precision references, and the parts of the ops.h contract they own.
 *
 * GELU: the normal CDF of cpu_math.h against libm's erfc in double, and the
 * float GELU and GELU' kernels against x Phi(x) and Phi(x) + x phi(x) from
 * libm, over a dense sweep of [-10, 10] (every 128th float by bit pattern,
 * so every binade down to 1e-38 is covered, plus a uniform grid), the tails
 * to 16.5 and the extremes: a result must be the double reference correctly
 * rounded up to a 4e-9 relative slop (the approximation error), i.e. within
 * 0.5 ulp + 4e-9 relative. The largest errors seen are reported. NaN in
 * gives NaN out, the infinities give the limits.
 *
 * Fusions: bias_gelu_inplace gives bitwise what a bias add then
 * gelu_forward give; residual_layernorm_forward gives bitwise what add then
 * layernorm_forward give (both compute the row sums in the same fixed order,
 * see layernorm.c), res aliasing a included.
 *
 * Contract: gelu_backward overwrites dinp (filled with NaN first),
 * layernorm_backward adds into dinp_acc and into dweight/dbias and skips NULL
 * outputs; at 1 and 2 OpenMP threads every kernel here gives the same bits
 * (sum_squares, whose double partial sums are added per thread, within 1e-12).
 * Comparisons are written !(err <= tol), so NaN fails them.
 */
#include "tests/test_util.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "kernels/ops.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_math.h"

static vb_ctx cpu_ctx = {.act = VB_DTYPE_F32};
#define CTX (&cpu_ctx)

// ---------------------------------------------------------------------------
// helpers

static uint64_t rng_next(uint64_t *s) {
    // splitmix64
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float rng_uniform(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(rng_next(s) >> 11) * 0x1p-53);
}

static float *falloc(size_t n) {
    float *p = aligned_alloc(64, ((n ? n : 1) * sizeof(float) + 63) & ~(size_t)63);
    assert_non_null(p);
    return p;
}

static float *frand(size_t n, float lo, float hi, uint64_t seed) {
    float *x = falloc(n);
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) x[i] = rng_uniform(&s, lo, hi);
    return x;
}

static void fill(float *x, size_t n, float v) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

static void expect_same_bits(const char *what, const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            print_error("%s[%zu]: %.9g, want bitwise %.9g\n", what, i, got[i], want[i]);
            fail();
        }
    }
}

// |got - want| <= atol + rtol |want|
static void expect_close(const char *what, const float *got, const double *want, size_t n,
                         double rtol, double atol) {
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= atol + rtol * fabs(want[i]))) {
            print_error("%s[%zu]: got %.9g, want %.9g (|diff| %.3g)\n", what, i, got[i], want[i], d);
            fail();
        }
    }
}

// the spacing of floats at |y| (denormal spacing below FLT_MIN)
static double float_ulp(double y) {
    y = fabs(y);
    if (y < FLT_MIN) return 0x1p-149;
    int e;
    frexp(y, &e); // y = f 2^e, f in [0.5, 1)
    return ldexp(1.0, e - 24);
}

// ---------------------------------------------------------------------------
// references in double (libm)

static double phi_ref(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double xpdf_ref(double x) { return x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI); }

// The sweep: every 128th float of [0, 10] by bit pattern (about 8.5M points,
// both signs), every 16th of (10, 16.5] (the far tails, where the negative
// side's results are float denormals and the positive side's x or 1), then a
// uniform grid of [-10, 10].
#define SWEEP_STRIDE 128u
#define SWEEP_GRID 2000001u
static size_t sweep_points(float **out) {
    const uint32_t top = vb_f32_bits(10.0f), far = vb_f32_bits(16.5f);
    size_t nbits = top / SWEEP_STRIDE + 1, nfar = (far - top) / 16, n = 2 * (nbits + nfar) + SWEEP_GRID;
    float *x = falloc(n);
    size_t k = 0;
    for (size_t j = 0; j < nbits; j++) {
        float v = vb_bits_f32((uint32_t)(j * SWEEP_STRIDE));
        x[k++] = v;
        x[k++] = -v;
    }
    for (size_t j = 1; j <= nfar; j++) {
        float v = vb_bits_f32(top + (uint32_t)(j * 16));
        x[k++] = v;
        x[k++] = -v;
    }
    for (size_t j = 0; j < SWEEP_GRID; j++) x[k++] = -10.0f + 20.0f * (float)((double)j / (SWEEP_GRID - 1));
    *out = x;
    return n;
}

// ---------------------------------------------------------------------------
// the normal CDF and density (the erfc behind GELU), in double

static void test_normal_cdf_accuracy(void **state) {
    (void)state;
    float *x;
    size_t n = sweep_points(&x);
    double worst_cdf = 0, worst_cdf_x = 0, worst_pdf = 0, worst_pdf_x = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabsf(x[i]) > 16.0f) continue; // outside its range: vb_gelu selects the limits
        double xd = x[i], xpdf;
        double cdf = vb_normal_cdf(xd, &xpdf);
        double rc = fabs(cdf - phi_ref(xd)) / phi_ref(xd);
        double rp = xd == 0.0 ? fabs(xpdf) : fabs(xpdf - xpdf_ref(xd)) / fabs(xpdf_ref(xd));
        if (!(rc <= 4e-9) || !(rp <= 1e-9)) {
            print_error("Phi(%.9g) = %.17g (rel. error %.3g), x phi(x) = %.17g (rel. error %.3g)\n", x[i],
                        cdf, rc, xpdf, rp);
            fail();
        }
        if (rc > worst_cdf) worst_cdf = rc, worst_cdf_x = xd;
        if (rp > worst_pdf) worst_pdf = rp, worst_pdf_x = xd;
    }
    // erf itself, from the same function: erf(z) = 2 Phi(z sqrt2) - 1, whose
    // absolute error is twice Phi's (the relative one grows near z = 0)
    for (double z = -6.0; z <= 6.0; z += 1e-4) {
        double xpdf, e = 2.0 * vb_normal_cdf(z * sqrt(2.0), &xpdf) - 1.0;
        if (!(fabs(e - erf(z)) <= 2e-9)) {
            print_error("erf(%.9g) = %.17g, libm %.17g\n", z, e, erf(z));
            fail();
        }
    }
    print_message("normal CDF over %zu points: max rel. error %.3g (x = %.7g); x phi(x) %.3g (x = %.7g)\n",
                  n, worst_cdf, worst_cdf_x, worst_pdf, worst_pdf_x);
    free(x);
}

// ---------------------------------------------------------------------------
// GELU and GELU' kernels: correctly rounded up to 4e-9 relative

static void test_gelu_accuracy(void **state) {
    (void)state;
    float *x;
    size_t n = sweep_points(&x);
    float *y = falloc(n), *g = falloc(n), *ones = falloc(n);
    fill(ones, n, 1.0f);
    cpu_gelu_forward(CTX, y, x, n);
    cpu_gelu_backward(CTX, g, x, ones, n);
    double worst_y = 0, worst_y_x = 0, worst_g = 0, worst_g_x = 0, worst_abs_g = 0;
    size_t not_nearest_y = 0, not_nearest_g = 0;
    for (size_t i = 0; i < n; i++) {
        double xd = x[i], ph = phi_ref(xd), xp = xpdf_ref(xd);
        double want_y = xd * ph, want_g = ph + xp;
        double ey = fabs(y[i] - want_y), eg = fabs(g[i] - want_g);
        // GELU' has a zero at x = -0.75179: its error is measured against the
        // size of its terms there (the derivative cannot be relatively
        // accurate at its root in any precision short of the inputs' own)
        double tol_y = 0.5 * float_ulp(want_y) + 4e-9 * fabs(want_y);
        double tol_g = 0.5 * float_ulp(want_g) + 4e-9 * (fabs(ph) + fabs(xp));
        if (!(ey <= tol_y) || !(eg <= tol_g)) {
            print_error("x = %.9g: gelu %.9g (want %.17g, %.3g ulp), gelu' %.9g (want %.17g, %.3g ulp)\n",
                        x[i], y[i], want_y, ey / float_ulp(want_y), g[i], want_g, eg / float_ulp(want_g));
            fail();
        }
        double uy = ey / float_ulp(want_y), ug = eg / float_ulp(want_g);
        if (uy > worst_y) worst_y = uy, worst_y_x = xd;
        if (fabs(want_g) >= 0x1p-10 && ug > worst_g) worst_g = ug, worst_g_x = xd;
        if (eg > worst_abs_g) worst_abs_g = eg;
        if ((double)y[i] != (double)(float)want_y) not_nearest_y++;
        if ((double)g[i] != (double)(float)want_g) not_nearest_g++;
    }
    print_message("gelu over %zu points: max %.3f ulp (x = %.7g), %zu not the nearest float; "
                  "gelu' max %.3f ulp where |gelu'| >= 2^-10 (x = %.7g), max abs. error %.3g, %zu not "
                  "the nearest float\n",
                  n, worst_y, worst_y_x, not_nearest_y, worst_g, worst_g_x, worst_abs_g, not_nearest_g);
    free(x), free(y), free(g), free(ones);
}

// the extremes, the infinities and NaN
static void test_gelu_nonfinite(void **state) {
    (void)state;
    const float xs[] = {0.0f,     -0.0f,     FLT_MIN,    -FLT_MIN,  0x1p-148f, -0x1p-148f, 1e-20f,
                        -1e-20f,  15.99f,    -15.99f,    16.0f,     -16.0f,    16.0001f,  -16.0001f,
                        40.0f,    -40.0f,    1e30f,      -1e30f,    FLT_MAX,   -FLT_MAX,  INFINITY,
                        -INFINITY, NAN,      -NAN};
    const size_t n = sizeof xs / sizeof *xs;
    float y[sizeof xs / sizeof *xs], g[sizeof xs / sizeof *xs], ones[sizeof xs / sizeof *xs];
    fill(ones, n, 1.0f);
    cpu_gelu_forward(CTX, y, xs, n);
    cpu_gelu_backward(CTX, g, xs, ones, n);
    for (size_t i = 0; i < n; i++) {
        float x = xs[i];
        if (isnan(x)) {
            assert_true(isnan(y[i]) && isnan(g[i]));
            continue;
        }
        double want_y, want_g;
        if (fabsf(x) > 16.0f) { // the limits
            want_y = x > 0 ? x : 0.0, want_g = x > 0 ? 1.0 : 0.0;
        } else {
            want_y = (double)x * phi_ref(x), want_g = phi_ref(x) + xpdf_ref(x);
        }
        double tol_y = 0.5 * float_ulp(want_y) + 4e-9 * fabs(want_y);
        double tol_g = 0.5 * float_ulp(want_g) + 4e-9 * fabs(want_g);
        double ey = y[i] == want_y ? 0.0 : fabs(y[i] - want_y); // inf == inf
        if (!(ey <= tol_y) || !(fabs(g[i] - want_g) <= tol_g)) {
            print_error("x = %.9g: gelu %.9g want %.9g, gelu' %.9g want %.9g\n", x, y[i], want_y, g[i],
                        want_g);
            fail();
        }
    }
    // exact values that the model's padding and masking rely on
    assert_true(y[0] == 0.0f && y[1] == 0.0f && y[6] == 5e-21f && g[0] == 0.5f && g[1] == 0.5f);
    assert_true(y[2] == 0.5f * FLT_MIN && y[3] == -0.5f * FLT_MIN && y[4] == 0x1p-149f);
    assert_true(y[20] == INFINITY && g[20] == 1.0f); // GELU(inf) = inf * 1, as PyTorch
    assert_true(y[21] == 0.0f && g[21] == 0.0f);     // the limit (PyTorch gives -inf * 0 = NaN)
    // NaN in dout reaches dinp, also where GELU' is 0 or 1
    float xd[3] = {-40.0f, 0.5f, 40.0f}, dn[3] = {NAN, NAN, NAN}, gd[3];
    cpu_gelu_backward(CTX, gd, xd, dn, 3);
    assert_true(isnan(gd[0]) && isnan(gd[1]) && isnan(gd[2]));
    // the softmax exp: NaN in, NaN out; -inf gives 0; +inf (outside its
    // contract) gives inf; none reaches a float-to-int conversion (UBSan
    // builds check that)
    assert_true(isnan(vb_exp_nonpos(NAN)));
    assert_true(vb_exp_nonpos(-INFINITY) == 0.0f && vb_exp_nonpos(0.0f) == 1.0f);
    assert_true(vb_exp_nonpos(INFINITY) == INFINITY);
    assert_true(fabsf(vb_exp_nonpos(-1.0f) - expf(-1.0f)) <= 2.0f * FLT_EPSILON * expf(-1.0f));
}

// gelu_backward overwrites dinp: a NaN left in it must not survive
static void test_gelu_backward_overwrites(void **state) {
    (void)state;
    const size_t n = 100003; // threaded, with a remainder
    float *x = frand(n, -6, 6, 11), *dout = frand(n, -2, 2, 12), *dinp = falloc(n), *out = falloc(n);
    fill(dinp, n, NAN);
    cpu_gelu_backward(CTX, dinp, x, dout, n);
    for (size_t i = 0; i < n; i++) {
        double want = (double)dout[i] * (phi_ref(x[i]) + xpdf_ref(x[i]));
        if (!(fabs(dinp[i] - want) <= 0.5 * float_ulp(want) + 4e-9 * fabs(dout[i]) * (1.0 + fabs(x[i])))) {
            print_error("dinp[%zu] = %.9g, want %.9g\n", i, dinp[i], want);
            fail();
        }
    }
    // forward overwrites too
    fill(out, n, NAN);
    cpu_gelu_forward(CTX, out, x, n);
    for (size_t i = 0; i < n; i++) assert_false(isnan(out[i]));
    free(x), free(dout), free(dinp), free(out);
}

// ---------------------------------------------------------------------------
// the fused fc1 epilogue

static void test_bias_gelu_inplace(void **state) {
    (void)state;
    const int shapes[][2] = {{577, 768}, {5, 13}, {1, 1}, {300, 130}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int N = shapes[s][0], OC = shapes[s][1];
        const size_t n = (size_t)N * OC;
        float *pre = frand(n, -5, 5, 21 + s), *bias = frand((size_t)OC, -1, 1, 31 + s);
        float *pre2 = falloc(n), *out = falloc(n), *want = falloc(n);
        memcpy(pre2, pre, n * sizeof(float));
        // the unfused reference: bias add, then gelu_forward
        for (int r = 0; r < N; r++)
            for (int c = 0; c < OC; c++) pre2[(size_t)r * OC + c] += bias[c];
        cpu_gelu_forward(CTX, want, pre2, n);
        fill(out, n, NAN);
        cpu_bias_gelu_inplace(pre, out, bias, N, OC);
        expect_same_bits("bias_gelu pre", pre, pre2, n);
        expect_same_bits("bias_gelu out", out, want, n);
        // NULL bias: GELU only, pre untouched
        fill(out, n, NAN);
        cpu_bias_gelu_inplace(pre2, out, NULL, N, OC);
        expect_same_bits("bias_gelu(NULL) pre", pre2, pre, n);
        expect_same_bits("bias_gelu(NULL) out", out, want, n);
        free(pre), free(bias), free(pre2), free(out), free(want);
    }
}

// ---------------------------------------------------------------------------
// LayerNorm

// out, mean, rstd in double
static void layernorm_ref(double *out, double *mean, double *rstd, const float *x, const float *w,
                          const float *b, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *r = x + (size_t)n * C;
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += r[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (r[i] - m) * (r[i] - m);
        double s = 1.0 / sqrt(v / C + eps);
        for (int i = 0; i < C; i++) out[(size_t)n * C + i] = (r[i] - m) * s * w[i] + b[i];
        mean[n] = m, rstd[n] = s;
    }
}

static void test_layernorm_forward(void **state) {
    (void)state;
    const int shapes[][2] = {{2304, 192}, {7, 37}, {3, 8}, {1, 1}, {5, 300}};
    const float eps = 1e-5f;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int N = shapes[s][0], C = shapes[s][1];
        const size_t n = (size_t)N * C;
        // an offset mean: the two-pass variance must not cancel
        float *x = frand(n, 2.0f, 4.0f, 41 + s), *w = frand((size_t)C, 0.5f, 1.5f, 42 + s);
        float *b = frand((size_t)C, -0.5f, 0.5f, 43 + s);
        float *out = falloc(n), *mean = falloc((size_t)N), *rstd = falloc((size_t)N);
        double *ro = malloc(n * sizeof(double)), *rm = malloc((size_t)N * sizeof(double));
        double *rr = malloc((size_t)N * sizeof(double));
        fill(out, n, NAN);
        cpu_layernorm_forward(CTX, out, mean, rstd, x, w, b, N, C, eps);
        layernorm_ref(ro, rm, rr, x, w, b, N, C, eps);
        // float sums of C terms: C eps relative in the mean, the centred
        // values and the variance (scaled by rstd * the offset, ~1/0.58 * 3)
        double tol = 10.0 * FLT_EPSILON * (C + 4);
        expect_close("layernorm out", out, ro, n, tol, tol);
        expect_close("layernorm mean", mean, rm, (size_t)N, tol, 0);
        expect_close("layernorm rstd", rstd, rr, (size_t)N, tol, 0);
        // NULL mean/rstd: out unchanged
        float *out2 = falloc(n);
        cpu_layernorm_forward(CTX, out2, NULL, NULL, x, w, b, N, C, eps);
        expect_same_bits("layernorm out (NULL stats)", out2, out, n);
        free(x), free(w), free(b), free(out), free(out2), free(mean), free(rstd), free(ro), free(rm), free(rr);
    }
}

static void test_residual_layernorm(void **state) {
    (void)state;
    const int shapes[][2] = {{2304, 192}, {7, 37}, {3, 8}, {1, 1}, {5, 300}};
    const float eps = 1e-5f;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int N = shapes[s][0], C = shapes[s][1];
        const size_t n = (size_t)N * C;
        float *a = frand(n, -3, 3, 51 + s), *b = frand(n, -1, 2, 52 + s);
        float *w = frand((size_t)C, 0.5f, 1.5f, 53 + s), *bias = frand((size_t)C, -0.5f, 0.5f, 54 + s);
        float *res = falloc(n), *out = falloc(n), *mean = falloc((size_t)N), *rstd = falloc((size_t)N);
        float *res2 = falloc(n), *out2 = falloc(n), *mean2 = falloc((size_t)N), *rstd2 = falloc((size_t)N);
        // unfused: add, then layernorm_forward
        cpu_add(CTX, res2, a, b, n);
        cpu_layernorm_forward(CTX, out2, mean2, rstd2, res2, w, bias, N, C, eps);
        fill(res, n, NAN), fill(out, n, NAN), fill(mean, (size_t)N, NAN), fill(rstd, (size_t)N, NAN);
        cpu_residual_layernorm_forward(CTX, res, out, mean, rstd, a, b, w, bias, N, C, eps);
        expect_same_bits("residual_layernorm res", res, res2, n);
        expect_same_bits("residual_layernorm out", out, out2, n);
        expect_same_bits("residual_layernorm mean", mean, mean2, (size_t)N);
        expect_same_bits("residual_layernorm rstd", rstd, rstd2, (size_t)N);
        // res aliasing a (the residual stream updated in place), stats NULL
        cpu_residual_layernorm_forward(CTX, a, out, NULL, NULL, a, b, w, bias, N, C, eps);
        expect_same_bits("residual_layernorm res (aliasing a)", a, res2, n);
        expect_same_bits("residual_layernorm out (aliasing a)", out, out2, n);
        free(a), free(b), free(w), free(bias), free(res), free(out), free(mean), free(rstd);
        free(res2), free(out2), free(mean2), free(rstd2);
    }
}

// dinp_acc += the input gradient; dweight, dbias +=; NULL outputs skipped
static void test_layernorm_backward(void **state) {
    (void)state;
    const int shapes[][2] = {{2304, 192}, {7, 37}, {5, 300}, {1, 1}};
    const float eps = 1e-5f;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int N = shapes[s][0], C = shapes[s][1];
        const size_t n = (size_t)N * C;
        float *x = frand(n, -2, 3, 61 + s), *dout = frand(n, -1, 1, 62 + s);
        float *w = frand((size_t)C, 0.5f, 1.5f, 63 + s), *b = frand((size_t)C, -0.5f, 0.5f, 64 + s);
        float *out = falloc(n), *mean = falloc((size_t)N), *rstd = falloc((size_t)N);
        cpu_layernorm_forward(CTX, out, mean, rstd, x, w, b, N, C, eps);
        float *dinp0 = frand(n, -1, 1, 65 + s), *dinp = falloc(n);
        float *dw0 = frand((size_t)C, -1, 1, 66 + s), *db0 = frand((size_t)C, -1, 1, 67 + s);
        float *dw = falloc((size_t)C), *db = falloc((size_t)C);
        memcpy(dinp, dinp0, n * sizeof(float));
        memcpy(dw, dw0, (size_t)C * sizeof(float));
        memcpy(db, db0, (size_t)C * sizeof(float));
        cpu_layernorm_backward(CTX, dinp, dw, db, dout, x, w, mean, rstd, N, C);
        // the reference from the kernel's own mean/rstd, in double
        // Tolerances: float rounding of each term plus that of the float
        // sums, sqrt(terms) eps of the sum of absolute values (a random walk
        // of roundings; the kernels' sums are partial sums of that length or
        // shorter), with margin.
        double *wd = malloc(n * sizeof(double)), *tol = malloc(n * sizeof(double));
        double *wdw = calloc((size_t)C, sizeof(double)), *wdb = calloc((size_t)C, sizeof(double));
        double *absw = calloc((size_t)C, sizeof(double)), *absb = calloc((size_t)C, sizeof(double));
        for (int r = 0; r < N; r++) {
            const float *xr = x + (size_t)r * C, *dy = dout + (size_t)r * C;
            double m = mean[r], st = rstd[r], sd = 0, sdx = 0, sabs = 0;
            for (int i = 0; i < C; i++) {
                double xh = (xr[i] - m) * st, dn = (double)w[i] * dy[i];
                sd += dn, sdx += dn * xh, sabs += fabs(dn) * (1 + fabs(xh));
                wdw[i] += dy[i] * xh, wdb[i] += dy[i];
                absw[i] += fabs(dy[i] * xh), absb[i] += fabs(dy[i]);
            }
            for (int i = 0; i < C; i++) {
                size_t k = (size_t)r * C + i;
                double xh = (xr[i] - m) * st, dn = (double)w[i] * dy[i];
                wd[k] = dinp0[k] + (dn - sd / C - xh * sdx / C) * st;
                tol[k] = 8 * FLT_EPSILON *
                         (fabs(dinp0[k]) + st * (fabs(dn) + (1 + fabs(xh)) * (sqrt(C) + 2) * sabs / C));
            }
        }
        for (size_t i = 0; i < n; i++) {
            if (!(fabs(dinp[i] - wd[i]) <= tol[i])) {
                print_error("layernorm dinp_acc[%zu] = %.9g, want %.9g\n", i, dinp[i], wd[i]);
                fail();
            }
        }
        for (int i = 0; i < C; i++) {
            double want_w = dw0[i] + wdw[i], want_b = db0[i] + wdb[i];
            double tw = 8 * FLT_EPSILON * ((sqrt(N) + 2) * absw[i] + fabs(dw0[i]));
            double tb = 8 * FLT_EPSILON * ((sqrt(N) + 2) * absb[i] + fabs(db0[i]));
            if (!(fabs(dw[i] - want_w) <= tw) || !(fabs(db[i] - want_b) <= tb)) {
                print_error("layernorm dweight[%d] = %.9g want %.9g, dbias = %.9g want %.9g\n", i, dw[i], want_w,
                            db[i], want_b);
                fail();
            }
        }
        // NULL outputs are skipped: each alone gives the same bits as all together
        float *dinp_only = falloc(n), *dw_only = falloc((size_t)C), *db_only = falloc((size_t)C);
        memcpy(dinp_only, dinp0, n * sizeof(float));
        memcpy(dw_only, dw0, (size_t)C * sizeof(float));
        memcpy(db_only, db0, (size_t)C * sizeof(float));
        cpu_layernorm_backward(CTX, dinp_only, NULL, NULL, dout, x, w, mean, rstd, N, C);
        cpu_layernorm_backward(CTX, NULL, dw_only, NULL, dout, x, w, mean, rstd, N, C);
        cpu_layernorm_backward(CTX, NULL, NULL, db_only, dout, x, w, mean, rstd, N, C);
        expect_same_bits("layernorm dinp_acc alone", dinp_only, dinp, n);
        expect_same_bits("layernorm dweight alone", dw_only, dw, (size_t)C);
        expect_same_bits("layernorm dbias alone", db_only, db, (size_t)C);
        cpu_layernorm_backward(CTX, NULL, NULL, NULL, dout, x, w, mean, rstd, N, C); // nothing to do
        free(x), free(dout), free(w), free(b), free(out), free(mean), free(rstd), free(dinp0), free(dinp);
        free(dw0), free(db0), free(dw), free(db), free(wd), free(tol), free(wdw), free(wdb), free(absw), free(absb);
        free(dinp_only), free(dw_only), free(db_only);
    }
}

// ---------------------------------------------------------------------------
// the small ops

static void test_vector_ops(void **state) {
    (void)state;
    const size_t n = 70001;
    float *a = frand(n, -2, 2, 71), *b = frand(n, -2, 2, 72), *out = falloc(n), *a2 = falloc(n);
    cpu_add(CTX, out, a, b, n);
    for (size_t i = 0; i < n; i++) assert_true(out[i] == a[i] + b[i]);
    memcpy(a2, a, n * sizeof(float));
    cpu_add(CTX, a2, a2, b, n); // out aliasing a
    expect_same_bits("add (aliasing)", a2, out, n);
    memcpy(a2, a, n * sizeof(float));
    cpu_accumulate(CTX, a2, b, n);
    expect_same_bits("accumulate", a2, out, n);
    cpu_scale(CTX, a2, 0.5f, n);
    for (size_t i = 0; i < n; i++) assert_true(a2[i] == out[i] * 0.5f);
    double ss = -1, want = 0;
    for (size_t i = 0; i < n; i++) want += (double)a[i] * a[i];
    cpu_sum_squares(CTX, &ss, a, n);
    assert_true(fabs(ss - want) <= 1e-12 * want);
    cpu_sum_squares(CTX, &ss, a, 0);
    assert_true(ss == 0.0);
    fill(a2, n, NAN);
    cpu_cast_to_act(CTX, a2, a, n);
    expect_same_bits("cast_to_act", a2, a, n);
    cpu_cast_to_act(CTX, a2, a2, n); // in place: nothing to do
    expect_same_bits("cast_to_act (in place)", a2, a, n);
    free(a), free(b), free(out), free(a2);
}

// the loader's normalisation on the backend: (x - mean[c]) / std[c] per
// plane, bit for bit what the loader computes (one division a value), at 1
// and 2 threads, over planes large enough to be split between threads
static void test_normalize_channels(void **state) {
    (void)state;
    const int B = 3, C = 5;
    const size_t hw = 20011, n = (size_t)B * C * hw;
    float *x = frand(n, -400, 900, 81), *want = falloc(n), *got = falloc(n);
    const float mean[5] = {273.5f, -1.25f, 0.0f, 101325.0f, 3.0e-3f};
    const float std[5] = {21.75f, 0.33f, 1.0f, 1400.5f, 7.0e-4f};
    for (size_t i = 0; i < n; i++) {
        const int c = (int)((i / hw) % C);
        want[i] = (x[i] - mean[c]) / std[c];
    }
    const int threads = omp_get_max_threads();
    for (int t = 1; t <= 2; t++) {
        omp_set_num_threads(t);
        memcpy(got, x, n * sizeof(float));
        cpu_normalize_channels(CTX, got, mean, std, B, C, hw);
        expect_same_bits("normalize_channels", got, want, n);
    }
    omp_set_num_threads(threads);
    free(x), free(want), free(got);
}

// patchify, unpatchify and its backward against naive index maps; the
// position embedding add and its (accumulating) backward
static void test_patch_ops(void **state) {
    (void)state;
    const int B = 2, C = 3, H = 12, W = 20, p = 4, Hp = H / p, Wp = W / p, T = Hp * Wp, K = C * p * p;
    const size_t n = (size_t)B * C * H * W;
    float *img = frand(n, -1, 1, 81), *patches = falloc(n), *tokens = frand(n, -1, 1, 82);
    float *img2 = falloc(n), *dtok = falloc(n);
    fill(patches, n, NAN);
    cpu_patchify(CTX, patches, img, B, C, H, W, p);
    fill(img2, n, NAN);
    cpu_unpatchify(CTX, img2, tokens, B, C, H, W, p);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    int ph = y / p, i = y % p, pw = x / p, j = x % p;
                    size_t pix = (((size_t)b * C + c) * H + y) * W + x;
                    size_t tok = ((size_t)b * T + (size_t)ph * Wp + pw) * K;
                    assert_true(patches[tok + ((size_t)c * p + i) * p + j] == img[pix]);
                    assert_true(img2[pix] == tokens[tok + ((size_t)i * p + j) * C + c]);
                }
    // the backward of a permutation is its inverse: unpatchify then its
    // backward gives the tokens back
    fill(dtok, n, NAN);
    cpu_unpatchify_backward(CTX, dtok, img2, B, C, H, W, p);
    expect_same_bits("unpatchify_backward", dtok, tokens, n);

    const int D = 24;
    const size_t m = (size_t)B * T * D;
    float *x = frand(m, -1, 1, 83), *pos = frand((size_t)T * D, -1, 1, 84), *y = falloc(m);
    cpu_add_pos_embed(CTX, y, x, pos, B, T, D);
    for (size_t i = 0; i < m; i++) assert_true(y[i] == x[i] + pos[i % ((size_t)T * D)]);
    cpu_add_pos_embed(CTX, x, x, pos, B, T, D); // in place
    expect_same_bits("add_pos_embed (in place)", x, y, m);
    float *dpos = frand((size_t)T * D, -1, 1, 85), *dpos0 = falloc((size_t)T * D);
    memcpy(dpos0, dpos, (size_t)T * D * sizeof(float));
    cpu_add_pos_embed_backward(CTX, dpos, y, B, T, D);
    for (size_t k = 0; k < (size_t)T * D; k++) {
        float want = dpos0[k];
        for (int b = 0; b < B; b++) want += y[(size_t)b * T * D + k];
        assert_true(dpos[k] == want);
    }
    free(img), free(patches), free(tokens), free(img2), free(dtok), free(x), free(pos), free(y);
    free(dpos), free(dpos0);
}

// ---------------------------------------------------------------------------
// 1 and 2 threads: the same bits (sum_squares within rounding)

typedef struct {
    float *gelu, *dgelu, *pre, *bg, *ln, *mean, *rstd, *res, *rln, *dinp, *dw, *db, *add;
    double ss;
} run_out;

enum { TN = 1152, TC = 192, TOC = 768 }; // a small-config batch's worth of rows

static void run_all(run_out *o, int threads, const float *x, const float *dout, const float *bias,
                    const float *w, const float *b, const float *r2) {
    const size_t n = (size_t)TN * TOC, nc = (size_t)TN * TC;
    omp_set_num_threads(threads);
    o->gelu = falloc(n), o->dgelu = falloc(n), o->pre = falloc(n), o->bg = falloc(n);
    o->ln = falloc(nc), o->mean = falloc(TN), o->rstd = falloc(TN), o->res = falloc(nc), o->rln = falloc(nc);
    o->dinp = falloc(nc), o->dw = falloc(TC), o->db = falloc(TC), o->add = falloc(n);
    cpu_gelu_forward(CTX, o->gelu, x, n);
    cpu_gelu_backward(CTX, o->dgelu, x, dout, n);
    memcpy(o->pre, x, n * sizeof(float));
    cpu_bias_gelu_inplace(o->pre, o->bg, bias, TN, TOC);
    cpu_add(CTX, o->add, x, dout, n);
    cpu_sum_squares(CTX, &o->ss, x, n);
    cpu_layernorm_forward(CTX, o->ln, o->mean, o->rstd, x, w, b, TN, TC, 1e-5f);
    cpu_residual_layernorm_forward(CTX, o->res, o->rln, NULL, NULL, x, r2, w, b, TN, TC, 1e-5f);
    memcpy(o->dinp, r2, nc * sizeof(float));
    fill(o->dw, TC, 0.25f), fill(o->db, TC, -0.25f);
    cpu_layernorm_backward(CTX, o->dinp, o->dw, o->db, dout, x, w, o->mean, o->rstd, TN, TC);
}

static void free_run(run_out *o) {
    float *p[] = {o->gelu, o->dgelu, o->pre, o->bg, o->ln, o->mean, o->rstd, o->res, o->rln, o->dinp, o->dw, o->db, o->add};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) free(p[i]);
}

static void test_thread_counts(void **state) {
    (void)state;
    const size_t n = (size_t)TN * TOC, nc = (size_t)TN * TC;
    float *x = frand(n, -4, 4, 91), *dout = frand(n, -1, 1, 92), *bias = frand(TOC, -1, 1, 93);
    float *w = frand(TC, 0.5f, 1.5f, 94), *b = frand(TC, -0.5f, 0.5f, 95), *r2 = frand(nc, -1, 1, 96);
    int saved = omp_get_max_threads();
    run_out one, two;
    run_all(&one, 1, x, dout, bias, w, b, r2);
    run_all(&two, 2, x, dout, bias, w, b, r2);
    omp_set_num_threads(saved);
    expect_same_bits("gelu_forward 1 vs 2 threads", two.gelu, one.gelu, n);
    expect_same_bits("gelu_backward 1 vs 2 threads", two.dgelu, one.dgelu, n);
    expect_same_bits("bias_gelu pre 1 vs 2 threads", two.pre, one.pre, n);
    expect_same_bits("bias_gelu out 1 vs 2 threads", two.bg, one.bg, n);
    expect_same_bits("add 1 vs 2 threads", two.add, one.add, n);
    expect_same_bits("layernorm out 1 vs 2 threads", two.ln, one.ln, nc);
    expect_same_bits("layernorm mean 1 vs 2 threads", two.mean, one.mean, TN);
    expect_same_bits("layernorm rstd 1 vs 2 threads", two.rstd, one.rstd, TN);
    expect_same_bits("residual_layernorm res 1 vs 2 threads", two.res, one.res, nc);
    expect_same_bits("residual_layernorm out 1 vs 2 threads", two.rln, one.rln, nc);
    expect_same_bits("layernorm dinp_acc 1 vs 2 threads", two.dinp, one.dinp, nc);
    expect_same_bits("layernorm dweight 1 vs 2 threads", two.dw, one.dw, TC);
    expect_same_bits("layernorm dbias 1 vs 2 threads", two.db, one.db, TC);
    assert_true(fabs(two.ss - one.ss) <= 1e-12 * one.ss);
    free_run(&one), free_run(&two);
    free(x), free(dout), free(bias), free(w), free(b), free(r2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normal_cdf_accuracy),
        cmocka_unit_test(test_gelu_accuracy),
        cmocka_unit_test(test_gelu_nonfinite),
        cmocka_unit_test(test_gelu_backward_overwrites),
        cmocka_unit_test(test_bias_gelu_inplace),
        cmocka_unit_test(test_layernorm_forward),
        cmocka_unit_test(test_residual_layernorm),
        cmocka_unit_test(test_layernorm_backward),
        cmocka_unit_test(test_vector_ops),
        cmocka_unit_test(test_normalize_channels),
        cmocka_unit_test(test_patch_ops),
        cmocka_unit_test(test_thread_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
