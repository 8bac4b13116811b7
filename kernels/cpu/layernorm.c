/* layernorm.c: nn.LayerNorm over the last dimension (biased variance). */
#include <omp.h>
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

// out[N,C] = (inp - mean) * rstd * weight + bias, rstd = 1/sqrt(var + eps)
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C, float eps) {
    if (N <= 0 || C <= 0) return;
    #pragma omp parallel for if ((size_t)N * C >= VB_CPU_PAR_MIN) schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float sum = 0.0f;
        #pragma omp simd reduction(+ : sum)
        for (int i = 0; i < C; i++) sum += x[i];
        float m = sum / C;
        // two-pass variance: no cancellation when |mean| >> std
        float sq = 0.0f;
        #pragma omp simd reduction(+ : sq)
        for (int i = 0; i < C; i++) {
            float d = x[i] - m;
            sq += d * d;
        }
        float s = 1.0f / sqrtf(sq / C + eps);
        #pragma omp simd
        for (int i = 0; i < C; i++) y[i] = (x[i] - m) * s * weight[i] + bias[i];
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = s;
    }
}

// dweight[C] += sum_n dout * xhat, dbias[C] += sum_n dout. Threads own disjoint
// column ranges (and walk all rows), so the reduction needs no partial buffers.
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
                    acc_w[j] += dy[j] * (x[j] - m) * s;
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

// dinp += rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), dnorm = weight * dout
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C) {
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
                dnorm_xhat_sum += dnorm * (x[i] - m) * s;
            }
            float dnorm_mean = dnorm_sum / C, dnorm_xhat_mean = dnorm_xhat_sum / C;
            #pragma omp simd
            for (int i = 0; i < C; i++) {
                float xhat = (x[i] - m) * s;
                dx[i] += (weight[i] * dy[i] - dnorm_mean - xhat * dnorm_xhat_mean) * s;
            }
        }
    }
    if (dweight || dbias) layernorm_param_grads(dweight, dbias, dout, inp, mean, rstd, N, C);
}
