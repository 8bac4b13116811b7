/* fp8.c: amp_mode fp8 emulated on the CPU: a linear layer's GEMMs read
 * operands that went through the recipe's quantise-dequantise (kernels/fp8.h,
 * so every backend rounds the same way), and delayed scaling's scale update.
 * The CPU's activations are float32, so the GEMMs run in float32 on values
 * that are exactly FP8 ones divided by the tensor's scale.
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_fp8_quantize(vb_ctx *ctx, float *out, const float *inp, size_t n, vb_fp8_format fmt, const float *scale,
                      float *amax) {
    (void)ctx;
    /* the amax of the input before out (which may alias it) is written */
    if (amax) *amax = vb_fp8_amax_merge(*amax, vb_fp8_amax(inp, n));
    const float s = *scale;
    #pragma omp parallel for if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = vb_fp8_qdq(inp[i], s, fmt);
}

const char *cpu_fp8_unsupported(vb_ctx *ctx) {
    return ctx->act == VB_DTYPE_F32 ? NULL : "the CPU emulates FP8 GEMMs with float32 activations only";
}

/* the quantised copies of the input, the weight and the output gradient */
size_t cpu_fp8_scratch_bytes(vb_ctx *ctx, int N, int C, int OC) {
    (void)ctx;
    return sizeof(float) * ((size_t)N * C + (size_t)OC * C + (size_t)N * OC);
}

static void scratch_split(const vb_fp8_gemm *g, int N, int C, int OC, float **xq, float **wq, float **gq) {
    *xq = g->scratch;
    *wq = *xq + (size_t)N * C;
    *gq = *wq + (size_t)OC * C;
}

void cpu_fp8_matmul_forward(vb_ctx *ctx, vb_act *out, const vb_act *inp, const vb_act *weight, const vb_act *bias,
                            int N, int C, int OC, const vb_fp8_gemm *g) {
    float *xq, *wq, *gq;
    scratch_split(g, N, C, OC, &xq, &wq, &gq);
    cpu_fp8_quantize(ctx, xq, inp, (size_t)N * C, VB_FP8_E4M3, g->scale_x, g->amax_x);
    cpu_fp8_quantize(ctx, wq, weight, (size_t)OC * C, VB_FP8_E4M3, g->scale_w, g->amax_w);
    cpu_matmul_forward(ctx, out, xq, wq, bias, N, C, OC);
}

void cpu_fp8_matmul_backward(vb_ctx *ctx, vb_act *dinp, float *dweight, float *dbias, const vb_act *dout,
                             const vb_act *inp, const vb_act *weight, int N, int C, int OC, int accumulate_dinp,
                             const vb_fp8_gemm *g) {
    float *xq, *wq, *gq;
    scratch_split(g, N, C, OC, &xq, &wq, &gq);
    if (dbias) cpu_matmul_backward(ctx, NULL, NULL, dbias, dout, inp, weight, N, C, OC, 0);
    if (!dinp && !dweight) return;
    cpu_fp8_quantize(ctx, gq, dout, (size_t)N * OC, VB_FP8_E5M2, g->scale_g, g->amax_g);
    /* the forward's operands again: same scales until the step ends */
    if (dweight) cpu_fp8_quantize(ctx, xq, inp, (size_t)N * C, VB_FP8_E4M3, g->scale_x, NULL);
    if (dinp) cpu_fp8_quantize(ctx, wq, weight, (size_t)OC * C, VB_FP8_E4M3, g->scale_w, NULL);
    cpu_matmul_backward(ctx, dinp, dweight, NULL, gq, xq, wq, N, C, OC, accumulate_dinp);
}

void cpu_fp8_scale_update(vb_ctx *ctx, float *scale, float *history, int n, int stride, int len, vb_fp8_format fmt,
                          vb_fp8_amax_algo algo, int margin) {
    (void)ctx;
    for (int i = 0; i < n; i++) {
        float *h = history + i;
        const float amax = vb_fp8_history_amax(h, len, stride, algo);
        scale[i] = vb_fp8_scale_from_amax(amax, scale[i], fmt, margin);
        for (int k = len - 1; k > 0; k--) h[(size_t)k * stride] = h[(size_t)(k - 1) * stride];
        h[0] = 0.0f;
    }
}
