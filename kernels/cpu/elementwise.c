/* elementwise.c: GELU, vector arithmetic and the patch/pos-embed data movement.
 *
 * The CPU keeps activations in float32 (its context refuses another dtype),
 * so every vb_act pointer here is a float pointer. Every loop is elementwise
 * or owns disjoint outputs per thread, so results do not depend on the thread
 * count (sum_squares aside: its double partial sums are added per thread).
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_math.h"

// ---------------------------------------------------------------------------
// exact GELU, as torch.nn.GELU() (approximate="none"): GELU(x) = x Phi(x),
// with the branch-free normal CDF of cpu_math.h: within 0.51 ulp of the exact
// value (about 6 in 10^4 results are the other neighbour of a near-tie)

void cpu_gelu_forward(vb_ctx *ctx, vb_act *out_, const vb_act *inp_, size_t n) {
    (void)ctx;
    float *out = out_;
    const float *inp = inp_;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = vb_gelu(inp[i]);
}

// dinp = dout * (Phi(x) + x phi(x)), overwriting dinp
void cpu_gelu_backward(vb_ctx *ctx, vb_act *dinp_, const vb_act *inp_, const vb_act *dout_, size_t n) {
    (void)ctx;
    float *dinp = dinp_;
    const float *inp = inp_, *dout = dout_;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) dinp[i] = vb_gelu_backward(inp[i], dout[i]);
}

// pre[r, :] += bias; out[r, :] = gelu(pre[r, :]): one pass over the GEMM's
// output while each row is in cache (bias may be NULL: GELU only)
void cpu_bias_gelu_inplace(float *pre, float *out, const float *bias, int N, int OC) {
    if (N <= 0 || OC <= 0) return;
    #pragma omp parallel for if ((size_t)N * OC >= VB_CPU_PAR_MIN) schedule(static)
    for (int r = 0; r < N; r++) {
        float *p = pre + (size_t)r * OC, *o = out + (size_t)r * OC;
        if (bias) {
            #pragma omp simd
            for (int c = 0; c < OC; c++) {
                float x = p[c] + bias[c];
                p[c] = x;
                o[c] = vb_gelu(x);
            }
        } else {
            #pragma omp simd
            for (int c = 0; c < OC; c++) o[c] = vb_gelu(p[c]);
        }
    }
}

// ---------------------------------------------------------------------------
// vector arithmetic

void cpu_add(vb_ctx *ctx, vb_act *out_, const vb_act *a_, const vb_act *b_, size_t n) {
    (void)ctx;
    // out may alias a or b, so no restrict here
    float *out = out_;
    const float *a = a_, *b = b_;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void cpu_accumulate(vb_ctx *ctx, float *y, const float *x, size_t n) {
    (void)ctx;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void cpu_scale(vb_ctx *ctx, float *x, float s, size_t n) {
    (void)ctx;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

// sum x^2 in double: used for gradient norms, where float would lose digits
void cpu_sum_squares(vb_ctx *ctx, double *out, const float *x, size_t n) {
    (void)ctx;
    double sum = 0.0;
    #pragma omp parallel for simd if (n >= VB_CPU_PAR_MIN) schedule(static) reduction(+ : sum)
    for (size_t i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    *out = sum;
}

// the CPU's activation dtype is float32: a copy (nothing when dst is src)
void cpu_cast_to_act(vb_ctx *ctx, vb_act *dst, const float *src, size_t n) {
    (void)ctx;
    if (n && dst != (const void *)src) memcpy(dst, src, n * sizeof(float));
}

// the loader's (x - mean) / std per channel, in place; one division a value
// as the loader computes it (a reciprocal multiply would differ in the last bit)
void cpu_normalize_channels(vb_ctx *ctx, float *x, const float *mean, const float *std, int B, int C, size_t hw) {
    (void)ctx;
    const long planes = (long)B * C;
    #pragma omp parallel for schedule(static) if (planes * (long)hw >= VB_CPU_PAR_MIN)
    for (long bc = 0; bc < planes; bc++) {
        float *p = x + (size_t)bc * hw;
        const float m = mean[bc % C], s = std[bc % C];
        for (size_t i = 0; i < hw; i++) p[i] = (p[i] - m) / s;
    }
}

// ---------------------------------------------------------------------------
// patch embedding data movement. With Hp = H/p, Wp = W/p, T = Hp*Wp:
//   patchify:   patches[b, ph*Wp + pw, (c*p + i)*p + j] = img[b, c, ph*p + i, pw*p + j]
//   unpatchify: img[b, c, ph*p + i, pw*p + j] = tokens[b, ph*Wp + pw, (i*p + j)*C + c]

void cpu_patchify(vb_ctx *ctx, vb_act *patches_, const float *img, int B, int C, int H, int W, int p) {
    (void)ctx;
    float *patches = patches_;
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
void cpu_unpatchify(vb_ctx *ctx, vb_act *img_, const vb_act *tokens_, int B, int C, int H, int W, int p) {
    (void)ctx;
    float *img = img_;
    const float *tokens = tokens_;
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
void cpu_unpatchify_backward(vb_ctx *ctx, vb_act *dtokens_, const vb_act *dimg_, int B, int C, int H,
                             int W, int p) {
    (void)ctx;
    float *dtokens = dtokens_;
    const float *dimg = dimg_;
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

// out[b,t,:] = inp[b,t,:] + pos[t,:] (out may alias inp)
void cpu_add_pos_embed(vb_ctx *ctx, vb_act *out_, const vb_act *inp_, const vb_act *pos_, int B, int T,
                       int D) {
    (void)ctx;
    float *out = out_;
    const float *inp = inp_, *pos = pos_;
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
void cpu_add_pos_embed_backward(vb_ctx *ctx, float *dpos, const vb_act *dout_, int B, int T, int D) {
    (void)ctx;
    const float *dout = dout_;
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
