/* bench_kernels.c: the CPU elementwise/LayerNorm kernels against what they
 * replace, at the `small` config's shapes (B = 8 samples of T = 288 tokens,
 * D = 192, MLP width 4D = 768; scenarios/vit.yaml).
 *
 * Pairs (A = before, B = now), each timed as A B A B ... on the same buffers
 * so that a noisy or throttling machine drifts both alike; per pair the
 * median of each side and the ratio of the medians (A/B > 1: B faster), and
 * the median of the per-round ratios:
 *   gelu fwd+bwd      the float CDF the kernels used before (kept here as the
 *                     baseline: GCC leaves its loops scalar on AVX2) vs
 *                     cpu_gelu_forward + cpu_gelu_backward, over B*T*4D
 *                     N(0,1) pre-activations
 *   bias+gelu         a bias pass then gelu_forward vs cpu_bias_gelu_inplace
 *                     (the fused fc1 epilogue)
 *   residual+LN       cpu_add then cpu_layernorm_forward vs
 *                     cpu_residual_layernorm_forward over B*T rows of D
 * and alone, for scale: GELU's memory traffic with no arithmetic (the floor
 * for fwd+bwd) and cpu_layernorm_backward.
 *
 * Usage: bench_kernels [--rounds N (21)] [--batch B (8)] [--tokens T (288)] [--dim D (192)]
 * (core/cli; --help lists them; each an integer in [1, 100000])
 * OMP_NUM_THREADS sets the threads, as for the kernels in a training step.
 */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config/cli.h"
#include "core/util/common.h"
#include "core/util/stats.h"
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/cpu_kernels.h"

static vb_ctx ctx = {.act = VB_DTYPE_F32};

// ---------------------------------------------------------------------------
// the baseline: the float normal CDF and GELU loops the kernels had before,
// unchanged (ternary selects and a 1 + erf split at |z| = 1)


static inline float old_normal_cdf(float x, float *gauss) {
    const float inv_sqrt2 = 0.70710678118654752f;
    float z = x * inv_sqrt2;
    float a = fabsf(z);
    float s = a * a;
    float e = vb_exp_nonpos(-s); /* the exp the baseline used, unchanged in cpu_math.h */
    float p = 7.853884017e-05f;
    p = p * s - 8.010201273e-04f;
    p = p * s + 5.188328680e-03f;
    p = p * s - 2.685381286e-02f;
    p = p * s + 1.128358543e-01f;
    p = p * s - 3.761262596e-01f;
    p = p * s + 1.128379107e+00f;
    float erf_small = z * p;
    float t = a - 1.0f;
    float q = 1.068436322e-04f;
    q = q * t - 1.057058573e-03f;
    q = q * t + 4.911290016e-03f;
    q = q * t - 1.511015836e-02f;
    q = q * t + 3.687498346e-02f;
    q = q * t - 7.905334234e-02f;
    q = q * t + 1.543505490e-01f;
    q = q * t - 2.732110620e-01f;
    q = q * t + 4.275835752e-01f;
    float erfc_big = a < 4.0f ? e * q : 0.0f;
    float cdf_big = z < 0.0f ? 0.5f * erfc_big : 1.0f - 0.5f * erfc_big;
    *gauss = e;
    return a < 1.0f ? 0.5f + 0.5f * erf_small : cdf_big;
}

static void old_gelu_forward(float *out, const float *inp, size_t n) {
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], gauss;
        out[i] = x * old_normal_cdf(x, &gauss);
    }
}

// (it accumulated into dinp then; the work is the same)
static void old_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    const float inv_sqrt_2pi = 0.39894228040143268f;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], gauss;
        float cdf = old_normal_cdf(x, &gauss);
        dinp[i] = dout[i] * (cdf + x * inv_sqrt_2pi * gauss);
    }
}

// ---------------------------------------------------------------------------
// timing

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// np.median: the middle value, or the mean of the two middle ones
static double median(const double *v, int n) { return vb_stats_summarize(v, n, 0).median; }

typedef struct {
    float *x, *dout, *y, *dx, *pre, *out, *bias;  // MLP-width buffers and the bias
    float *a, *b, *res, *ln, *mean, *rstd, *w, *lb, *dres, *dw, *db; // D-width buffers
    size_t n, nd;
    int rows, D, OC;
} bufs;

typedef void (*bench_fn)(bufs *);

static void run_old_gelu(bufs *u) {
    old_gelu_forward(u->y, u->x, u->n);
    old_gelu_backward(u->dx, u->x, u->dout, u->n);
}
static void run_new_gelu(bufs *u) {
    cpu_gelu_forward(&ctx, u->y, u->x, u->n);
    cpu_gelu_backward(&ctx, u->dx, u->x, u->dout, u->n);
}
// pre (the GEMM's output) += bias per row, then GELU; both sides add the
// (tiny) bias in place once per call, so pre drifts alike and negligibly
static void run_bias_then_gelu(bufs *u) {
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < u->rows; r++) {
        float *p = u->pre + (size_t)r * u->OC;
        #pragma omp simd
        for (int c = 0; c < u->OC; c++) p[c] += u->bias[c];
    }
    cpu_gelu_forward(&ctx, u->out, u->pre, u->n);
}
static void run_bias_gelu_fused(bufs *u) { cpu_bias_gelu_inplace(u->pre, u->out, u->bias, u->rows, u->OC); }
// the memory traffic of GELU forward + backward with no arithmetic to speak of
static void run_gelu_traffic(bufs *u) {
    float *y = u->y, *dx = u->dx;
    const float *x = u->x, *dout = u->dout;
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < u->n; i++) y[i] = 0.5f * x[i];
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < u->n; i++) dx[i] = dout[i] * x[i];
}
static void run_add_then_ln(bufs *u) {
    cpu_add(&ctx, u->res, u->a, u->b, u->nd);
    cpu_layernorm_forward(&ctx, u->ln, u->mean, u->rstd, u->res, u->w, u->lb, u->rows, u->D, 1e-5f);
}
static void run_residual_ln(bufs *u) {
    cpu_residual_layernorm_forward(&ctx, u->res, u->ln, u->mean, u->rstd, u->a, u->b, u->w, u->lb,
                                   u->rows, u->D, 1e-5f);
}
static void run_ln_backward(bufs *u) {
    cpu_layernorm_backward(&ctx, u->dres, u->dw, u->db, u->ln, u->res, u->w, u->mean, u->rstd, u->rows,
                           u->D);
}

// A B A B ... for `rounds` rounds after one untimed call of each; the first
// of the pair alternates too (A B, B A, ...) so neither always runs second
static void pair(const char *name, bench_fn fa, const char *la, bench_fn fb, const char *lb, bufs *u,
                 int rounds) {
    double *ta = vb_malloc_check((size_t)rounds * sizeof *ta), *tb = vb_malloc_check((size_t)rounds * sizeof *tb);
    double *ratio = vb_malloc_check((size_t)rounds * sizeof *ratio);
    fa(u), fb(u);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int do_a = (k == 0) == (r % 2 == 0);
            double t0 = now_s();
            (do_a ? fa : fb)(u);
            double dt = now_s() - t0;
            if (do_a) ta[r] = dt;
            else tb[r] = dt;
        }
        ratio[r] = ta[r] / tb[r];
    }
    double ma = median(ta, rounds), mb = median(tb, rounds);
    printf("%-14s A %-22s %9.3f ms   B %-26s %9.3f ms   A/B %6.2f (median of round ratios %6.2f, %d rounds)\n",
           name, la, 1e3 * ma, lb, 1e3 * mb, ma / mb, median(ratio, rounds), rounds);
    printf("bench_kernels pair=%s a_ms=%.4f b_ms=%.4f ratio=%.3f round_ratio=%.3f rounds=%d threads=%d\n",
           name, 1e3 * ma, 1e3 * mb, ma / mb, median(ratio, rounds), rounds, omp_get_max_threads());
    free(ta), free(tb), free(ratio);
}

// one function alone: its median over `rounds` calls after one untimed call
static void single(const char *name, bench_fn f, const char *label, bufs *u, int rounds) {
    double *t = vb_malloc_check((size_t)rounds * sizeof *t);
    f(u);
    for (int r = 0; r < rounds; r++) {
        double t0 = now_s();
        f(u);
        t[r] = now_s() - t0;
    }
    printf("%-14s   %-22s %9.3f ms\n", name, label, 1e3 * median(t, rounds));
    printf("bench_kernels single=%s ms=%.4f rounds=%d threads=%d\n", name, 1e3 * median(t, rounds), rounds,
           omp_get_max_threads());
    free(t);
}

/* 64-byte aligned, zero-filled */
static float *buf(size_t n) { return vb_malloc(n * sizeof(float)); }

// N(mu, sigma) by Box-Muller from splitmix64
static void fill_normal(float *x, size_t n, float mu, float sigma, uint64_t seed) {
    uint64_t s = seed;
    for (size_t i = 0; i < n; i += 2) {
        double u[2];
        for (int k = 0; k < 2; k++) {
            uint64_t z = (s += 0x9E3779B97F4A7C15ull);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            u[k] = ((double)(z >> 11) + 0.5) * 0x1p-53;
        }
        double rad = sqrt(-2.0 * log(u[0])), th = 2.0 * M_PI * u[1];
        x[i] = mu + sigma * (float)(rad * cos(th));
        if (i + 1 < n) x[i + 1] = mu + sigma * (float)(rad * sin(th));
    }
}

int main(int argc, char **argv) {
    int rounds = 21, B = 8, T = 288, D = 192;
    const vb_cli_opt opts[] = {
        {.name = "rounds", .kind = VB_CLI_INT, .ptr = &rounds, .ilo = 1, .ihi = 100000, .arg = "N",
         .help = "timed rounds per pair and per single, after one untimed call of each (default 21)"},
        {.name = "batch", .kind = VB_CLI_INT, .ptr = &B, .ilo = 1, .ihi = 100000, .arg = "B",
         .help = "samples (default 8)"},
        {.name = "tokens", .kind = VB_CLI_INT, .ptr = &T, .ilo = 1, .ihi = 100000, .arg = "T",
         .help = "tokens per sample (default 288)"},
        {.name = "dim", .kind = VB_CLI_INT, .ptr = &D, .ilo = 1, .ihi = 100000, .arg = "D",
         .help = "embedding width; the MLP width is 4D (default 192)"},
    };
    const vb_cli cli = {
        .cmd = "bench_kernels",
        .usage = "bench_kernels [--rounds N] [--batch B] [--tokens T] [--dim D]",
        .about = "CPU GELU fwd+bwd, bias+GELU and residual+LayerNorm kernels against what they replace,\n"
                 "alternated A B / B A per round; medians and A/B ratios (default: the `small` config's\n"
                 "shapes). Threads: OMP_NUM_THREADS.",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
    };
    vb_cli_parse(&cli, argc, argv);
    // the kernels take rows (B*T) and widths as int; keep the MLP buffers' B*T*4D within int as well
    if ((long long)B * T > INT_MAX / (4LL * D))
        vb_die_input("bench_kernels: --batch %d --tokens %d --dim %d give %lld MLP elements (B*T*4D), above %d", B,
                     T, D, (long long)B * T * 4 * D, INT_MAX);
    bufs u = {.rows = B * T, .D = D, .OC = 4 * D};
    u.n = (size_t)u.rows * u.OC, u.nd = (size_t)u.rows * D;
    u.x = buf(u.n), u.dout = buf(u.n), u.y = buf(u.n), u.dx = buf(u.n), u.pre = buf(u.n), u.out = buf(u.n);
    u.bias = buf((size_t)u.OC);
    u.a = buf(u.nd), u.b = buf(u.nd), u.res = buf(u.nd), u.ln = buf(u.nd), u.dres = buf(u.nd);
    u.mean = buf((size_t)u.rows), u.rstd = buf((size_t)u.rows), u.w = buf((size_t)D), u.lb = buf((size_t)D);
    u.dw = buf((size_t)D), u.db = buf((size_t)D);
    fill_normal(u.x, u.n, 0.0f, 1.0f, 1);
    fill_normal(u.dout, u.n, 0.0f, 1e-3f, 2);
    fill_normal(u.bias, (size_t)u.OC, 0.0f, 1e-5f, 3);
    memcpy(u.pre, u.x, u.n * sizeof(float));
    fill_normal(u.a, u.nd, 0.0f, 1.0f, 4);
    fill_normal(u.b, u.nd, 0.0f, 0.5f, 5);
    fill_normal(u.w, (size_t)D, 1.0f, 0.1f, 6);
    fill_normal(u.lb, (size_t)D, 0.0f, 0.1f, 7);

    printf("bench_kernels: %d rows (B %d x T %d), D %d, MLP width %d: %zu GELU elements; %d threads\n",
           u.rows, B, T, D, u.OC, u.n, omp_get_max_threads());
    pair("gelu fwd+bwd", run_old_gelu, "old float CDF", run_new_gelu, "cpu_gelu_fwd+bwd", &u, rounds);
    single("gelu traffic", run_gelu_traffic, "fwd+bwd loads/stores", &u, rounds);
    pair("bias+gelu", run_bias_then_gelu, "bias pass + gelu_fwd", run_bias_gelu_fused, "bias_gelu_inplace", &u,
         rounds);
    pair("residual+LN", run_add_then_ln, "add + layernorm_fwd", run_residual_ln, "residual_layernorm_fwd", &u,
         rounds);
    single("LN backward", run_ln_backward, "layernorm_backward", &u, rounds);
    return 0;
}
