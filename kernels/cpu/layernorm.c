/* layernorm.c: nn.LayerNorm over the last dimension (biased variance), alone
 * or with the residual add that precedes it fused in.
 *
 * Row statistics are sums in a fixed order: LN_LANES partial sums that the
 * vectoriser maps onto its registers, combined pairwise at the end. The order
 * therefore depends neither on how a compiler vectorises or peels the loop
 * nor on whether the add is fused, so residual_layernorm_forward gives
 * bitwise the same res, out, mean and rstd as add followed by
 * layernorm_forward. Each row belongs to one thread, so no result depends on
 * the thread count.
 */
#include <omp.h>
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

enum { LN_LANES = 16 };

// clang fully unrolls the 16-lane loops before its loop vectoriser runs and
// its SLP pass then builds 2-wide adds from the pieces; kept as a loop it
// becomes 256/512-bit adds. GCC vectorises the loops as they are.
#ifdef __clang__
#define LN_KEEP_LOOP _Pragma("nounroll")
#else
#define LN_KEEP_LOOP
#endif

static inline float ln_combine(float acc[LN_LANES], float tail) {
    for (int w = LN_LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0] + tail;
}

static inline float ln_sum(const float *x, int C) {
    float acc[LN_LANES] = {0}, tail = 0.0f;
    int i = 0;
    for (; i + LN_LANES <= C; i += LN_LANES) {
        #pragma omp simd
        LN_KEEP_LOOP
        for (int j = 0; j < LN_LANES; j++) acc[j] += x[i + j];
    }
    for (; i < C; i++) tail += x[i];
    return ln_combine(acc, tail);
}

// res = a + b, returning the sum of res; same order as ln_sum(res). res may
// alias a or b (each element is read before it is written).
static inline float ln_add_sum(float *res, const float *a, const float *b, int C) {
    float acc[LN_LANES] = {0}, tail = 0.0f;
    int i = 0;
    for (; i + LN_LANES <= C; i += LN_LANES) {
        #pragma omp simd
        LN_KEEP_LOOP
        for (int j = 0; j < LN_LANES; j++) {
            float v = a[i + j] + b[i + j];
            res[i + j] = v;
            acc[j] += v;
        }
    }
    for (; i < C; i++) {
        float v = a[i] + b[i];
        res[i] = v;
        tail += v;
    }
    return ln_combine(acc, tail);
}

// sum (x - m)^2: the two-pass variance, no cancellation when |mean| >> std
static inline float ln_sum_sq_dev(const float *x, float m, int C) {
    float acc[LN_LANES] = {0}, tail = 0.0f;
    int i = 0;
    for (; i + LN_LANES <= C; i += LN_LANES) {
        #pragma omp simd
        LN_KEEP_LOOP
        for (int j = 0; j < LN_LANES; j++) {
            float d = x[i + j] - m;
            acc[j] += d * d;
        }
    }
    for (; i < C; i++) {
        float d = x[i] - m;
        tail += d * d;
    }
    return ln_combine(acc, tail);
}

// y = (x - mean) * rstd * weight + bias for one row whose sum is known
static inline void ln_normalize_row(float *y, float *mean, float *rstd, const float *x, float sum,
                                    const float *weight, const float *bias, int C, float eps) {
    float m = sum / (float)C;
    float s = 1.0f / sqrtf(ln_sum_sq_dev(x, m, C) / (float)C + eps);
    #pragma omp simd
    for (int i = 0; i < C; i++) y[i] = (x[i] - m) * s * weight[i] + bias[i];
    if (mean) *mean = m;
    if (rstd) *rstd = s;
}

// out[N,C] = (inp - mean) * rstd * weight + bias, rstd = 1/sqrt(var + eps)
void cpu_layernorm_forward(vb_ctx *ctx, vb_act *out_, float *mean, float *rstd, const vb_act *inp_,
                           const vb_act *weight_, const vb_act *bias_, int N, int C, float eps) {
    (void)ctx;
    float *out = out_;
    const float *inp = inp_, *weight = weight_, *bias = bias_;
    if (N <= 0 || C <= 0) return;
    #pragma omp parallel for if ((size_t)N * C >= VB_CPU_PAR_MIN) schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        ln_normalize_row(out + (size_t)n * C, mean ? mean + n : NULL, rstd ? rstd + n : NULL, x,
                         ln_sum(x, C), weight, bias, C, eps);
    }
}

// res = a + b, out = layernorm(res). The add and the mean's sum share the one
// pass that reads a and b from memory; the variance and the normalisation
// then read the row back from L1, where an add kernel followed by
// layernorm_forward would read res back from memory.
void cpu_residual_layernorm_forward(vb_ctx *ctx, vb_act *res_, vb_act *out_, float *mean, float *rstd,
                                    const vb_act *a_, const vb_act *b_, const vb_act *weight_,
                                    const vb_act *bias_, int N, int C, float eps) {
    (void)ctx;
    float *res = res_, *out = out_;
    const float *a = a_, *b = b_, *weight = weight_, *bias = bias_;
    if (N <= 0 || C <= 0) return;
    #pragma omp parallel for if ((size_t)N * C >= VB_CPU_PAR_MIN) schedule(static)
    for (int n = 0; n < N; n++) {
        size_t off = (size_t)n * C;
        float sum = ln_add_sum(res + off, a + off, b + off, C);
        ln_normalize_row(out + off, mean ? mean + n : NULL, rstd ? rstd + n : NULL, res + off, sum,
                         weight, bias, C, eps);
    }
}

// dweight[C] += sum_n dout * xhat, dbias[C] += sum_n dout. Threads own disjoint
// column ranges (and walk all rows in order), so the reduction needs no
// partial buffers and its result does not depend on the thread count.
static void layernorm_param_grads(float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *mean, const float *rstd,
                                  int N, int C) {
    enum { CHUNK = 64 };
    #pragma omp parallel if ((size_t)N * C >= VB_CPU_PAR_MIN)
    {
        int nthreads = omp_get_num_threads(), tid = omp_get_thread_num();
        int per = (C + nthreads - 1) / nthreads;
        per = (per + 15) & ~15;
        int c_begin = tid * per, c_end = c_begin + per < C ? c_begin + per : C;
        for (int c0 = c_begin; c0 < c_end; c0 += CHUNK) {
            int width = c_end - c0 < CHUNK ? c_end - c0 : CHUNK;
            float acc_w[CHUNK] = {0}, acc_b[CHUNK] = {0};
            for (int n = 0; n < N; n++) {
                const float *x = inp + (size_t)n * C + c0;
                const float *dy = dout + (size_t)n * C + c0;
                float m = mean[n], s = rstd[n];
                #pragma omp simd
                for (int j = 0; j < width; j++) {
                    acc_w[j] += dy[j] * ((x[j] - m) * s);
                    acc_b[j] += dy[j];
                }
            }
            for (int j = 0; j < width; j++) {
                if (dweight) dweight[c0 + j] += acc_w[j];
                if (dbias) dbias[c0 + j] += acc_b[j];
            }
        }
    }
}

// dinp_acc += rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), dnorm = weight * dout
void cpu_layernorm_backward(vb_ctx *ctx, vb_act *dinp_acc_, float *dweight, float *dbias,
                            const vb_act *dout_, const vb_act *inp_, const vb_act *weight_,
                            const float *mean, const float *rstd, int N, int C) {
    (void)ctx;
    float *dinp = dinp_acc_;
    const float *dout = dout_, *inp = inp_, *weight = weight_;
    if (N <= 0 || C <= 0) return;
    if (dinp) {
        #pragma omp parallel for if ((size_t)N * C >= VB_CPU_PAR_MIN) schedule(static)
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C;
            const float *dy = dout + (size_t)n * C;
            float *dx = dinp + (size_t)n * C;
            float m = mean[n], s = rstd[n];
            float dnorm_sum = 0.0f, dnorm_xhat_sum = 0.0f;
            #pragma omp simd reduction(+ : dnorm_sum, dnorm_xhat_sum)
            for (int i = 0; i < C; i++) {
                float dnorm = weight[i] * dy[i];
                dnorm_sum += dnorm;
                dnorm_xhat_sum += dnorm * ((x[i] - m) * s);
            }
            float dnorm_mean = dnorm_sum / (float)C, dnorm_xhat_mean = dnorm_xhat_sum / (float)C;
            #pragma omp simd
            for (int i = 0; i < C; i++) {
                float xhat = (x[i] - m) * s;
                dx[i] += (weight[i] * dy[i] - dnorm_mean - xhat * dnorm_xhat_mean) * s;
            }
        }
    }
    if (dweight || dbias) layernorm_param_grads(dweight, dbias, dout, inp, mean, rstd, N, C);
}
