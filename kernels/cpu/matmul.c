/* matmul.c: nn.Linear forward/backward on OpenBLAS.
 *
 * Called outside an OpenMP region, the OpenMP build of OpenBLAS spreads each
 * sgemm over all threads, so these functions call it directly and only the
 * bias loops carry their own OpenMP pragmas. The CPU's activations are
 * float32 (its context refuses another dtype), so vb_act is float here.
 */
#include <omp.h>
#include <string.h>
#include "kernels/cpu/blas.h"

#include "kernels/cpu/cpu_kernels.h"

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]
void cpu_matmul_forward(vb_ctx *ctx, vb_act *out_, const vb_act *inp_, const vb_act *weight_,
                        const vb_act *bias_, int N, int C, int OC) {
    (void)ctx;
    float *out = out_;
    const float *inp = inp_, *weight = weight_, *bias = bias_;
    if (N <= 0 || OC <= 0) return;
    size_t nout = (size_t)N * OC;
    // Seeding the rows with the bias and letting sgemm add onto them (beta = 1)
    // touches out once instead of a GEMM pass plus a separate bias pass.
    if (bias) {
        #pragma omp parallel for if (nout >= VB_CPU_PAR_MIN) schedule(static)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
    } else if (C <= 0) {
        memset(out, 0, nout * sizeof(float));
    }
    if (C <= 0) return; // empty reduction: out is the bias (BLAS rejects lda = 0)
    vb_blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C,
                bias ? 1.0f : 0.0f, out, OC);
}

// pre = inp @ weight^T, then one pass adds the bias and applies GELU while
// the row is in cache (instead of a bias pass plus a separate GELU pass)
void cpu_matmul_bias_gelu_forward(vb_ctx *ctx, vb_act *pre_, vb_act *out_, const vb_act *inp_,
                                  const vb_act *weight_, const vb_act *bias_, int N, int C, int OC) {
    (void)ctx;
    float *pre = pre_, *out = out_;
    const float *inp = inp_, *weight = weight_, *bias = bias_;
    if (N <= 0 || OC <= 0) return;
    if (C <= 0)
        memset(pre, 0, (size_t)N * OC * sizeof(float)); // empty reduction (BLAS rejects lda = 0)
    else
        vb_blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 0.0f,
                    pre, OC);
    cpu_bias_gelu_inplace(pre, out, bias, N, OC);
}

// dbias[OC] += column sums of dout[N,OC]. Each thread owns a contiguous range of
// columns and walks every row, so there are no shared partial sums to merge
// and the result does not depend on the thread count's interleaving.
static void bias_backward(float *dbias, const float *dout, int N, int OC) {
    enum { CHUNK = 64 };
    #pragma omp parallel if ((size_t)N * OC >= VB_CPU_PAR_MIN)
    {
        int nthreads = omp_get_num_threads(), tid = omp_get_thread_num();
        int per = (OC + nthreads - 1) / nthreads;
        per = (per + 15) & ~15; // whole 64-byte lines per thread
        int c_begin = tid * per, c_end = c_begin + per < OC ? c_begin + per : OC;
        for (int c0 = c_begin; c0 < c_end; c0 += CHUNK) {
            int width = c_end - c0 < CHUNK ? c_end - c0 : CHUNK;
            float acc[CHUNK] = {0};
            for (int n = 0; n < N; n++) {
                const float *row = dout + (size_t)n * OC + c0;
                #pragma omp simd
                for (int j = 0; j < width; j++) acc[j] += row[j];
            }
            for (int j = 0; j < width; j++) dbias[c0 + j] += acc[j];
        }
    }
}

void cpu_matmul_backward(vb_ctx *ctx, vb_act *dinp_, float *dweight, float *dbias, const vb_act *dout_,
                         const vb_act *inp_, const vb_act *weight_, int N, int C, int OC,
                         int accumulate_dinp) {
    (void)ctx;
    float *dinp = dinp_;
    const float *dout = dout_, *inp = inp_, *weight = weight_;
    if (N <= 0) return;
    if (OC <= 0) {
        // an empty sum: dinp is zero (it is overwritten unless accumulating)
        if (dinp && !accumulate_dinp && C > 0) memset(dinp, 0, (size_t)N * C * sizeof(float));
        return;
    }
    if (C > 0) {
        // dinp[N,C] = (or +=) dout[N,OC] @ weight[OC,C]: beta 0 overwrites, so
        // a first (or only) writer needs no zeroing pass before it
        if (dinp)
            vb_blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                        accumulate_dinp ? 1.0f : 0.0f, dinp, C);
        // dweight[OC,C] += dout^T @ inp[N,C]
        if (dweight)
            vb_blas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
                        dweight, C);
    }
    if (dbias) bias_backward(dbias, dout, N, OC);
}
