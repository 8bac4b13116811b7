/* elementwise.c: GELU, vector arithmetic and the patch/pos-embed data movement. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_math.h"

// ---------------------------------------------------------------------------
// exact GELU, as torch.nn.GELU() (approximate="none"), via the vectorisable
// normal CDF of cpu_math.h (GELU(x) = x Phi(x) = 0.5 x (1 + erf(x/sqrt2)))

void cpu_gelu_forward(float *out, const float *inp, size_t n) {
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], gauss;
        out[i] = x * vb_normal_cdf(x, &gauss);
    }
}

// dinp += dout * (Phi(x) + x phi(x)), phi(x) = exp(-x^2/2) / sqrt(2 pi)
void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    const float inv_sqrt_2pi = 0.39894228040143268f;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], gauss;
        float cdf = vb_normal_cdf(x, &gauss);
        dinp[i] += dout[i] * (cdf + x * inv_sqrt_2pi * gauss);
    }
}

// ---------------------------------------------------------------------------
// vector arithmetic

void cpu_add(float *out, const float *a, const float *b, size_t n) {
    // out may alias a, so no restrict here
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void cpu_accumulate(float *y, const float *x, size_t n) {
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void cpu_scale(float *x, float s, size_t n) {
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

// sum x^2 in double: used for gradient norms, where float would lose digits
double cpu_sum_squares(const float *x, size_t n) {
    double sum = 0.0;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static) reduction(+ : sum)
    for (size_t i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    return sum;
}

// ---------------------------------------------------------------------------
// patch embedding data movement. With Hp = H/p, Wp = W/p, T = Hp*Wp:
//   patchify:   patches[b, ph*Wp + pw, (c*p + i)*p + j] = img[b, c, ph*p + i, pw*p + j]
//   unpatchify: img[b, c, ph*p + i, pw*p + j] = tokens[b, ph*Wp + pw, (i*p + j)*C + c]

void cpu_patchify(float *patches, const float *img, int B, int C, int H, int W, int p) {
    if (B <= 0 || C <= 0 || p <= 0) return;
    const int Hp = H / p, Wp = W / p, K = C * p * p;
    const size_t total = (size_t)B * C * H * W;
    #pragma omp parallel for collapse(2) if (total >= VB_CPU_PAR_MIN) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int ph = 0; ph < Hp; ph++) {
            for (int c = 0; c < C; c++) {
                for (int i = 0; i < p; i++) {
                    // one image row segment feeds Wp patches, p floats each
                    const float *src = img + (((size_t)b * C + c) * H + (size_t)ph * p + i) * W;
                    float *dst = patches + ((size_t)b * Hp * Wp + (size_t)ph * Wp) * K +
                                 ((size_t)c * p + i) * p;
                    for (int pw = 0; pw < Wp; pw++)
                        memcpy(dst + (size_t)pw * K, src + (size_t)pw * p, (size_t)p * sizeof(float));
                }
            }
        }
    }
}

// unpatchify walks the image row by row (b, c, y), so image rows are written
// contiguously while a token row segment (i fixed: p*C floats) is read at
// stride C. The backward is the same permutation reversed and overwrites
// dtokens. (Loop orders chosen by measurement on the small config.)
void cpu_unpatchify(float *img, const float *tokens, int B, int C, int H, int W, int p) {
    if (B <= 0 || C <= 0 || p <= 0) return;
    const int Hp = H / p, Wp = W / p, K = C * p * p;
    const int rows = Hp * p; // == H whenever p divides H, as the model requires
    #pragma omp parallel for collapse(3) if ((size_t)B * C * H * W >= VB_CPU_PAR_MIN) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int c = 0; c < C; c++) {
            for (int y = 0; y < rows; y++) {
                const int ph = y / p, i = y % p;
                float *row = img + (((size_t)b * C + c) * H + y) * W;
                const float *tok = tokens + ((size_t)b * Hp + ph) * Wp * K + (size_t)i * p * C + c;
                for (int pw = 0; pw < Wp; pw++)
                    for (int j = 0; j < p; j++) row[pw * p + j] = tok[(size_t)pw * K + (size_t)j * C];
            }
        }
    }
}

// Here the token side is the contiguous one: walk each token in its own
// (i, j, c) order and gather the C channel planes of each pixel.
void cpu_unpatchify_backward(float *dtokens, const float *dimg, int B, int C, int H, int W, int p) {
    if (B <= 0 || C <= 0 || p <= 0) return;
    const int Hp = H / p, Wp = W / p, K = C * p * p;
    const size_t plane = (size_t)H * W;
    #pragma omp parallel for collapse(2) if ((size_t)B * C * plane >= VB_CPU_PAR_MIN) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int ph = 0; ph < Hp; ph++) {
            for (int pw = 0; pw < Wp; pw++) {
                float *dtok = dtokens + (((size_t)b * Hp + ph) * Wp + pw) * K;
                const float *corner = dimg + (size_t)b * C * plane + (size_t)ph * p * W + (size_t)pw * p;
                for (int i = 0; i < p; i++)
                    for (int j = 0; j < p; j++)
                        for (int c = 0; c < C; c++)
                            dtok[((size_t)i * p + j) * C + c] = corner[c * plane + (size_t)i * W + j];
            }
        }
    }
}

// out[b,t,:] = inp[b,t,:] + pos[t,:]
void cpu_add_pos_embed(float *out, const float *inp, const float *pos, int B, int T, int D) {
    if (B <= 0 || T <= 0 || D <= 0) return;
    const size_t total = (size_t)B * T * D;
    #pragma omp parallel for collapse(2) if (total >= VB_CPU_PAR_MIN) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const size_t row = ((size_t)b * T + t) * D;
            const float *pos_t = pos + (size_t)t * D;
            #pragma omp simd
            for (int d = 0; d < D; d++) out[row + d] = inp[row + d] + pos_t[d];
        }
    }
}

// dpos[t,:] += sum_b dout[b,t,:]; threads own disjoint tokens
void cpu_add_pos_embed_backward(float *dpos, const float *dout, int B, int T, int D) {
    if (B <= 0 || T <= 0 || D <= 0) return;
    const size_t total = (size_t)B * T * D;
    #pragma omp parallel for if (total >= VB_CPU_PAR_MIN) schedule(static)
    for (int t = 0; t < T; t++) {
        float *dpos_t = dpos + (size_t)t * D;
        for (int b = 0; b < B; b++) {
            const float *g = dout + ((size_t)b * T + t) * D;
            #pragma omp simd
            for (int d = 0; d < D; d++) dpos_t[d] += g[d];
        }
    }
}
