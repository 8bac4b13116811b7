/* bench_attention.c: the CPU attention kernels, flash-style against the
 * previous implementation that materialised the probabilities (OpenBLAS
 * sgemm per (batch, head) on whole [Tq, Tk] matrices; kept here only as the
 * baseline, the library no longer has it).
 *
 * Usage: bench_attention [--reps N] [--new_only] [SHAPE ...]  (core/cli; --help)
 *   SHAPE: small (the `small` config: B=8, T=288, NH=6, HD=32), base (the
 *   tutorial's `base` at one sample: B=1, T=4050, NH=8, HD=48), or
 *   B,Tq,Tk,NH,HD (positive integers), at most 16 of them. Default: small base.
 *   --reps (default 5) timed runs per implementation after one untimed
 *   warm-up of each.
 *
 * Each rep runs both implementations' forward then backward, the order of the
 * two implementations alternating from rep to rep; the table shows medians
 * and the old/new time ratio (> 1: the new one is faster). GFLOP/s counts the
 * GEMM work of the algorithm as stated, 2 per multiply-add: forward
 * 4*B*NH*Tq*Tk*HD, backward 8*B*NH*Tq*Tk*HD, for both (the flash backward
 * recomputes the scores, a fifth GEMM that is not counted). The old one needs
 * 2*B*NH*Tq*Tk floats of probabilities and scratch (1 GiB at base shapes); its
 * dq, dk, dv accumulate, so they are zeroed before each rep, outside the
 * timing.
 * Threads: OMP_NUM_THREADS.
 *
 * Wall time is what a step sees; on a shared machine it also counts the time
 * other processes held the cores, so the process CPU time (all threads,
 * divided by the thread count) is reported beside it: the two agree on an idle
 * machine, and the CPU-time ratio is the one to trust when they differ.
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>

#include "core/config/cli.h"
#include "core/util/common.h"
#include "core/util/stats.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_math.h"

// ---------------------------------------------------------------------------
// the previous implementation: att[B,NH,Tq,Tk] stored by forward; backward
// accumulates (+=) into dq, dk, dv

static float old_row_max(const float *row, int n) {
    enum { LANES = 8 };
    float lane[LANES];
    for (int l = 0; l < LANES; l++) lane[l] = -FLT_MAX;
    int j = 0;
    for (; j + LANES <= n; j += LANES) {
        #pragma omp simd
        for (int l = 0; l < LANES; l++) lane[l] = row[j + l] > lane[l] ? row[j + l] : lane[l];
    }
    float mx = -FLT_MAX;
    for (int l = 0; l < LANES; l++) mx = lane[l] > mx ? lane[l] : mx;
    for (; j < n; j++) mx = row[j] > mx ? row[j] : mx;
    return mx;
}

static void old_softmax_rows(float *s, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float *row = s + (size_t)r * cols;
        float mx = old_row_max(row, cols);
        float sum = 0.0f;
        #pragma omp simd reduction(+ : sum)
        for (int j = 0; j < cols; j++) {
            float e = vb_exp_nonpos(row[j] - mx);
            row[j] = e;
            sum += e;
        }
        float inv = 1.0f / sum;
        #pragma omp simd
        for (int j = 0; j < cols; j++) row[j] *= inv;
    }
}

static void old_forward(float *out, float *att, const float *q, const float *k, const float *v,
                        int B, int Tq, int Tk, int NH, int HD) {
    const int D = NH * HD;
    const float scale = 1.0f / sqrtf((float)HD);
    #pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const float *q_bh = q + (size_t)b * Tq * D + (size_t)h * HD;
        const float *k_bh = k + (size_t)b * Tk * D + (size_t)h * HD;
        const float *v_bh = v + (size_t)b * Tk * D + (size_t)h * HD;
        float *out_bh = out + (size_t)b * Tq * D + (size_t)h * HD;
        float *att_bh = att + (size_t)bh * Tq * Tk;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, HD, scale, q_bh, D, k_bh, D,
                    0.0f, att_bh, Tk);
        old_softmax_rows(att_bh, Tq, Tk);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, HD, Tk, 1.0f, att_bh, Tk,
                    v_bh, D, 0.0f, out_bh, D);
    }
}

static void old_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                         const float *att, const float *q, const float *k, const float *v, int B,
                         int Tq, int Tk, int NH, int HD) {
    const int D = NH * HD;
    const float scale = 1.0f / sqrtf((float)HD);
    #pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const size_t q_off = (size_t)b * Tq * D + (size_t)h * HD;
        const size_t k_off = (size_t)b * Tk * D + (size_t)h * HD;
        const float *att_bh = att + (size_t)bh * Tq * Tk;
        const float *dout_bh = dout + q_off;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, HD, Tq, 1.0f, att_bh, Tk,
                    dout_bh, D, 1.0f, dv + k_off, D);
        float *ds = scratch + (size_t)bh * Tq * Tk;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, HD, 1.0f, dout_bh, D,
                    v + k_off, D, 0.0f, ds, Tk);
        for (int t = 0; t < Tq; t++) {
            float *ds_row = ds + (size_t)t * Tk;
            const float *a_row = att_bh + (size_t)t * Tk;
            float dot = 0.0f;
            #pragma omp simd reduction(+ : dot)
            for (int j = 0; j < Tk; j++) dot += ds_row[j] * a_row[j];
            #pragma omp simd
            for (int j = 0; j < Tk; j++) ds_row[j] = scale * a_row[j] * (ds_row[j] - dot);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, HD, Tk, 1.0f, ds, Tk,
                    k + k_off, D, 1.0f, dq + q_off, D);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, HD, Tq, 1.0f, ds, Tk,
                    q + q_off, D, 1.0f, dk + k_off, D);
    }
}

// ---------------------------------------------------------------------------

typedef struct {
    const char *name;
    int B, Tq, Tk, NH, HD;
} shape;

/* 64-byte aligned, zero-filled */
static float *falloc(size_t n) { return vb_malloc(n * sizeof(float)); }

static void fill(float *x, size_t n, float lo, float hi, unsigned seed) {
    unsigned s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = lo + (hi - lo) * (float)(s >> 8) * (1.0f / 16777216.0f);
    }
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; // NaN sticks
    }
    return m;
}

static void bench_shape(const shape *s, int reps, bool new_only) {
    const int B = s->B, Tq = s->Tq, Tk = s->Tk, NH = s->NH, HD = s->HD, D = NH * HD;
    const size_t nq = (size_t)B * Tq * D, nk = (size_t)B * Tk * D;
    const size_t natt = new_only ? 0 : (size_t)B * NH * Tq * Tk;
    vb_ctx ctx = {.act = VB_DTYPE_F32};
    float *q = falloc(nq), *k = falloc(nk), *v = falloc(nk), *dout = falloc(nq);
    fill(q, nq, -1, 1, 1), fill(k, nk, -1, 1, 2), fill(v, nk, -1, 1, 3), fill(dout, nq, -1, 1, 4);
    float *out = falloc(nq), *lse = falloc((size_t)B * NH * Tq);
    float *dq = falloc(nq), *dk = falloc(nk), *dv = falloc(nk);
    size_t wbytes = cpu_attention_workspace_bytes(&ctx, B, Tq, Tk, NH, HD);
    float *ws = falloc(wbytes / sizeof(float) + 1);
    float *o_out = NULL, *o_att = NULL, *o_scr = NULL, *o_dq = NULL, *o_dk = NULL, *o_dv = NULL;
    if (!new_only) {
        o_out = falloc(nq), o_att = falloc(natt), o_scr = falloc(natt);
        o_dq = falloc(nq), o_dk = falloc(nk), o_dv = falloc(nk);
        memset(o_att, 0, natt * sizeof(float)), memset(o_scr, 0, natt * sizeof(float));
    }
    // t[clock][impl*2 + phase][rep]: clock 0 wall, 1 CPU per thread
    const int nt = omp_get_max_threads();
    double *t = vb_calloc_check((size_t)8 * reps, sizeof(double));
    for (int r = -1; r < reps; r++) { // r = -1: warm-up
        for (int turn = 0; turn < 2; turn++) {
            int impl = ((r & 1) ? 1 - turn : turn); // 0 new, 1 old; order alternates
            if (impl == 1 && new_only) continue;
            if (impl == 1) {
                memset(o_dq, 0, nq * sizeof(float));
                memset(o_dk, 0, nk * sizeof(float)), memset(o_dv, 0, nk * sizeof(float));
            }
            double w0 = omp_get_wtime(), c0 = cpu_seconds();
            if (impl == 0) cpu_attention_forward(&ctx, out, lse, ws, q, k, v, B, Tq, Tk, NH, HD);
            else old_forward(o_out, o_att, q, k, v, B, Tq, Tk, NH, HD);
            double w1 = omp_get_wtime(), c1 = cpu_seconds();
            if (impl == 0)
                cpu_attention_backward(&ctx, dq, dk, dv, ws, dout, out, lse, q, k, v, B, Tq, Tk,
                                       NH, HD);
            else old_backward(o_dq, o_dk, o_dv, o_scr, dout, o_att, q, k, v, B, Tq, Tk, NH, HD);
            double w2 = omp_get_wtime(), c2 = cpu_seconds();
            if (r < 0) continue;
            double *tw = t + (size_t)(impl * 2) * reps + r, *tc = tw + (size_t)4 * reps;
            tw[0] = w1 - w0, tw[reps] = w2 - w1;
            tc[0] = (c1 - c0) / nt, tc[reps] = (c2 - c1) / nt;
        }
    }
    const double f = (double)B * NH * Tq * Tk * HD;
    double med[2][4];
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 4; i++)
            med[c][i] = (i >= 2 && new_only) ? NAN
                                             : vb_stats_summarize(t + (size_t)(c * 4 + i) * reps, reps, 0).median;
    printf("%-6s B=%d Tq=%d Tk=%d NH=%d HD=%d  threads %d  %d reps  workspace %.2f MiB",
           s->name, B, Tq, Tk, NH, HD, nt, reps, wbytes / 1048576.0);
    if (!new_only) printf("  old att+scratch %.2f MiB", 2.0 * natt * sizeof(float) / 1048576.0);
    printf("\n  %-16s %12s %9s %12s %9s %12s\n", "", "forward ms", "GFLOP/s", "backward ms",
           "GFLOP/s", "total ms");
    const char *names[2] = {"flash", "old"}, *clocks[2] = {"wall", "cpu/thread"};
    for (int c = 0; c < 2; c++)
        for (int impl = 0; impl < (new_only ? 1 : 2); impl++) {
            double fw = med[c][impl * 2], bw = med[c][impl * 2 + 1];
            char label[32];
            snprintf(label, sizeof label, "%s %s", names[impl], clocks[c]);
            printf("  %-16s %12.3f %9.1f %12.3f %9.1f %12.3f\n", label, fw * 1e3,
                   4 * f / fw / 1e9, bw * 1e3, 8 * f / bw / 1e9, (fw + bw) * 1e3);
        }
    if (!new_only) {
        for (int c = 0; c < 2; c++)
            printf("  old/flash (%s)  forward %.2fx  backward %.2fx  total %.2fx\n", clocks[c],
                   med[c][2] / med[c][0], med[c][3] / med[c][1],
                   (med[c][2] + med[c][3]) / (med[c][0] + med[c][1]));
        printf("  max |flash - old|: out %.2g  dq %.2g  dk %.2g  dv %.2g\n",
               max_abs_diff(out, o_out, nq), max_abs_diff(dq, o_dq, nq), max_abs_diff(dk, o_dk, nk),
               max_abs_diff(dv, o_dv, nk));
    }
    printf("bench_attention shape=%s B=%d Tq=%d Tk=%d NH=%d HD=%d threads=%d reps=%d "
           "flash_fwd_ms=%.3f flash_bwd_ms=%.3f old_fwd_ms=%.3f old_bwd_ms=%.3f "
           "flash_fwd_cpu_ms=%.3f flash_bwd_cpu_ms=%.3f old_fwd_cpu_ms=%.3f old_bwd_cpu_ms=%.3f\n",
           s->name, B, Tq, Tk, NH, HD, nt, reps, med[0][0] * 1e3, med[0][1] * 1e3, med[0][2] * 1e3,
           med[0][3] * 1e3, med[1][0] * 1e3, med[1][1] * 1e3, med[1][2] * 1e3, med[1][3] * 1e3);
    fflush(stdout);
    free(t), free(q), free(k), free(v), free(dout), free(out), free(lse);
    free(dq), free(dk), free(dv);
    free(ws), free(o_out), free(o_att), free(o_scr), free(o_dq), free(o_dk), free(o_dv);
}

enum { MAX_SHAPES = 16 };

typedef struct shape_list {
    shape v[MAX_SHAPES];
    int n;
} shape_list;

/* One of B,Tq,Tk,NH,HD: a decimal integer in [1, 1 << 20] ending at ',' or
 * at the end of the text; returns where the next field starts, NULL if bad. */
static const char *shape_field(const char *p, int *out, bool last) {
    if (*p < '0' || *p > '9') return NULL;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || v < 1 || v > (1L << 20) || *end != (last ? '\0' : ',')) return NULL;
    *out = (int)v;
    return last ? end : end + 1;
}

/* Positional arguments: small, base or B,Tq,Tk,NH,HD. Any other --flag also
 * arrives here (it is not in the table) and is refused. */
static void add_shape(void *ctx, const char *arg, const char *next) {
    (void)next;
    shape_list *l = ctx;
    if (!strncmp(arg, "--", 2)) {
        const char *eq = strchr(arg, '=');
        int n = eq ? (int)(eq - arg) : (int)strlen(arg);
        vb_die_input("bench_attention: unknown flag %.*s%s", n < 100 ? n : 100, arg,
                     *vb_cli_hint(arg) ? vb_cli_hint(arg) : " (see --help)");
    }
    if (l->n == MAX_SHAPES)
        vb_die_input("bench_attention: at most %d shapes, got another: '%.200s'", MAX_SHAPES, arg);
    shape c = {"custom", 0, 0, 0, 0, 0};
    if (!strcmp(arg, "small")) {
        c = (shape){"small", 8, 288, 288, 6, 32};
    } else if (!strcmp(arg, "base")) {
        c = (shape){"base", 1, 4050, 4050, 8, 48};
    } else {
        int *f[5] = {&c.B, &c.Tq, &c.Tk, &c.NH, &c.HD};
        const char *p = arg;
        for (int i = 0; i < 5 && p; i++) p = shape_field(p, f[i], i == 4);
        if (!p)
            vb_die_input("bench_attention: shape expects small, base or B,Tq,Tk,NH,HD with integers in "
                         "[1, %ld], got '%.200s'",
                         1L << 20, arg);
        /* the kernels index q, k, v and the per-(batch, head) loops with int */
        long long D = (long long)c.NH * c.HD, T = c.Tq > c.Tk ? c.Tq : c.Tk;
        if (D > INT_MAX || (long long)c.B * T > INT_MAX / D || (long long)c.B * c.NH > INT_MAX / c.Tq)
            vb_die_input("bench_attention: shape '%.200s' is too large (B*T*NH*HD above %d elements)", arg,
                         INT_MAX);
    }
    l->v[l->n++] = c;
}

int main(int argc, char **argv) {
    int reps = 5;
    bool new_only = false;
    shape_list shapes = {.n = 0};
    const vb_cli_opt opts[] = {
        {.name = "reps", .kind = VB_CLI_INT, .ptr = &reps, .ilo = 1, .ihi = 1000000, .arg = "N",
         .help = "timed runs per implementation after one untimed warm-up of each (default 5)"},
        {.name = "new_only", .kind = VB_CLI_BOOL, .ptr = &new_only,
         .help = "time the flash-style kernels alone (no baseline, no 2*B*NH*Tq*Tk buffers)"},
    };
    const vb_cli cli = {
        .cmd = "bench_attention",
        .usage = "bench_attention [--reps N] [--new_only] [small|base|B,Tq,Tk,NH,HD ...]",
        .about = "CPU attention forward + backward: the flash-style kernels against the baseline that\n"
                 "materialises the probabilities, alternated per rep; medians and old/flash ratios.\n"
                 "Threads: OMP_NUM_THREADS.",
        .opts = opts,
        .nopts = (int)(sizeof opts / sizeof opts[0]),
        .other = add_shape,
        .ctx = &shapes,
        .other_help = "Shapes (default: small base), at most 16:\n"
                      "  small           the `small` config: B=8, T=288, NH=6, HD=32\n"
                      "  base            the tutorial's `base` at one sample: B=1, T=4050, NH=8, HD=48\n"
                      "  B,Tq,Tk,NH,HD   batch, query and key tokens, heads, head dim (integers >= 1)",
    };
    vb_cli_parse(&cli, argc, argv);
    if (shapes.n == 0) {
        add_shape(&shapes, "small", NULL);
        add_shape(&shapes, "base", NULL);
    }
    for (int i = 0; i < shapes.n; i++) bench_shape(&shapes.v[i], reps, new_only);
    return 0;
}
