/* fp8.c: amp_mode fp8 emulated on the CPU: the quantise-dequantise pass a
 * GEMM operand goes through and delayed scaling's scale update, both from
 * kernels/fp8.h so another backend rounds the same way. The CPU's
 * activations are float32, so the GEMMs then run in float32 on values that
 * are exactly FP8 ones divided by the tensor's scale.
 */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_fp8_quantize(vb_ctx *ctx, float *out, const float *inp, size_t n, vb_fp8_format fmt, const float *scale,
                      float *amax) {
    (void)ctx;
    /* the amax of the input before out (which may alias it) is written */
    if (amax) *amax = vb_fp8_amax(inp, n);
    const float s = *scale;
    #pragma omp parallel for if (n >= VB_CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = vb_fp8_qdq(inp[i], s, fmt);
}

void cpu_fp8_scale_update(vb_ctx *ctx, float *scale, const float *history, int n, int stride, int len, int newest,
                          vb_fp8_format fmt, vb_fp8_amax_algo algo, int margin) {
    (void)ctx;
    for (int i = 0; i < n; i++) {
        const float amax = vb_fp8_history_amax(history + i, len, stride, newest, algo);
        scale[i] = vb_fp8_scale_from_amax(amax, scale[i], fmt, margin);
    }
}
