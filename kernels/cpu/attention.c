/* attention.c: softmax(q k^T / sqrt(HD)) v per (batch, head).
 *
 * Heads are column slices of q/k/v [B,T,D] (head h = columns h*HD..), so each
 * per-head GEMM reads its operands in place with leading dimension D: no
 * permute copies. The (b, h) pairs are spread over OpenMP threads; inside a
 * parallel region the OpenMP build of OpenBLAS runs each sgemm on the calling
 * thread, which is what we want for these small GEMMs.
 */
#include <math.h>
#include <float.h>
#include <cblas.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_math.h"

// Largest element of row[0..n) (NaNs are skipped, as in `x > m ? x : m`).
// Eight running maxima instead of `omp simd reduction(max)`: clang recognises
// a select-based max reduction only under -ffinite-math-only and would leave
// the pragma unhonoured, while the element-wise lane update is no reduction
// and both GCC and clang vectorise it (maxps per 8 floats).
static float row_max(const float *row, int n) {
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

// In-place row softmax of s[rows, cols].
static void softmax_rows(float *s, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float *row = s + (size_t)r * cols;
        float mx = row_max(row, cols);
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

void cpu_attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int B, int Tq, int Tk, int NH, int HD) {
    if (B <= 0 || Tq <= 0 || NH <= 0 || HD <= 0) return;
    const int D = NH * HD;
    const float scale = 1.0f / sqrtf((float)HD);
    const size_t work = (size_t)B * NH * Tq * Tk * HD;
    #pragma omp parallel for if (work >= VB_CPU_PAR_MIN) schedule(dynamic, 1)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const float *q_bh = q + (size_t)b * Tq * D + (size_t)h * HD; // [Tq,HD], ld D
        const float *k_bh = k + (size_t)b * Tk * D + (size_t)h * HD; // [Tk,HD], ld D
        const float *v_bh = v + (size_t)b * Tk * D + (size_t)h * HD; // [Tk,HD], ld D
        float *out_bh = out + (size_t)b * Tq * D + (size_t)h * HD;   // [Tq,HD], ld D
        float *att_bh = att + (size_t)bh * Tq * Tk;                  // [Tq,Tk]
        if (Tk <= 0) {
            // softmax over nothing: define the output as zero rather than NaN
            for (int t = 0; t < Tq; t++)
                for (int d = 0; d < HD; d++) out_bh[(size_t)t * D + d] = 0.0f;
            continue;
        }
        // att = scale * q k^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, HD, scale, q_bh, D, k_bh, D,
                    0.0f, att_bh, Tk);
        softmax_rows(att_bh, Tq, Tk);
        // out = att v
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, HD, Tk, 1.0f, att_bh, Tk,
                    v_bh, D, 0.0f, out_bh, D);
    }
}

void cpu_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                            const float *att, const float *q, const float *k, const float *v,
                            int B, int Tq, int Tk, int NH, int HD) {
    if (B <= 0 || Tq <= 0 || Tk <= 0 || NH <= 0 || HD <= 0) return;
    const int D = NH * HD;
    const float scale = 1.0f / sqrtf((float)HD);
    const int need_scores = dq != NULL || dk != NULL;
    const size_t work = (size_t)B * NH * Tq * Tk * HD;
    #pragma omp parallel for if (work >= VB_CPU_PAR_MIN) schedule(dynamic, 1)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const size_t q_off = (size_t)b * Tq * D + (size_t)h * HD;
        const size_t k_off = (size_t)b * Tk * D + (size_t)h * HD;
        const float *att_bh = att + (size_t)bh * Tq * Tk; // [Tq,Tk]
        const float *dout_bh = dout + q_off;              // [Tq,HD], ld D
        // dv[Tk,HD] += att^T dout
        if (dv)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, HD, Tq, 1.0f, att_bh, Tk,
                        dout_bh, D, 1.0f, dv + k_off, D);
        if (!need_scores) continue;
        // datt[Tq,Tk] = dout v^T, then in place the softmax backward and the
        // 1/sqrt(HD) of the scores: dS = scale * att * (datt - sum_j datt*att)
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
        // dq[Tq,HD] += dS k
        if (dq)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, HD, Tk, 1.0f, ds, Tk,
                        k + k_off, D, 1.0f, dq + q_off, D);
        // dk[Tk,HD] += dS^T q
        if (dk)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, HD, Tq, 1.0f, ds, Tk,
                        q + q_off, D, 1.0f, dk + k_off, D);
    }
}
