/* fp8.h: the numerics of FP8 training with Transformer Engine's delayed
 * scaling (DelayedScaling, Format.HYBRID), once for every backend: rounding
 * to E4M3 / E5M2 with a per-tensor scale, a tensor's amax, and the scale
 * update from an amax history. Pure functions of their arguments, so the CPU
 * calls them on the host and the CUDA kernels on the device.
 *
 * Formats (OCP FP8; torch.float8_e4m3fn and torch.float8_e5m2):
 *   E4M3: 3 mantissa bits, exponent bias 7, largest finite 448, smallest
 *         normal 2^-6, smallest subnormal 2^-9 (no infinities).
 *   E5M2: 2 mantissa bits, exponent bias 15, largest finite 57344, smallest
 *         normal 2^-14, smallest subnormal 2^-16.
 * Rounding is to nearest, ties to even, on the grid of the value's binade
 * (the subnormal grid below the smallest normal); magnitudes at or beyond the
 * largest finite value saturate to it, as TE's casts do, instead of becoming
 * NaN (E4M3) or infinity (E5M2). NaN stays NaN; the sign of zero is kept.
 */
#ifndef VB_FP8_H
#define VB_FP8_H

#include <stddef.h>

#include <math.h>

#ifdef __CUDACC__
#define VB_FP8_HD __host__ __device__
#else
#define VB_FP8_HD
#endif

/* HYBRID: E4M3 for the forward GEMMs' operands (more precision), E5M2 for
 * the gradients of their outputs (more range). */
typedef enum vb_fp8_format { VB_FP8_E4M3 = 0, VB_FP8_E5M2 = 1 } vb_fp8_format;

/* TE's amax_compute_algo: the history's maximum, or its newest entry */
typedef enum vb_fp8_amax_algo { VB_FP8_AMAX_MAX = 0, VB_FP8_AMAX_MOST_RECENT = 1 } vb_fp8_amax_algo;

static inline VB_FP8_HD float vb_fp8_max(vb_fp8_format f) { return f == VB_FP8_E4M3 ? 448.0f : 57344.0f; }

/* x rounded to the format's nearest value (ties to even), saturated to
 * +-vb_fp8_max; the result is a float32 holding an exact FP8 value. */
static inline VB_FP8_HD float vb_fp8_round(float x, vb_fp8_format f) {
    const int mbits = f == VB_FP8_E4M3 ? 3 : 2;
    const int emin = f == VB_FP8_E4M3 ? -6 : -14; /* exponent of the smallest normal */
    const float maxv = vb_fp8_max(f);
    if (isnan(x)) return x;
    const float a = fabsf(x);
    if (a >= maxv) return copysignf(maxv, x); /* infinities too */
    if (a == 0.0f) return x;                  /* keeps -0 */
    int e;
    (void)frexpf(a, &e); /* a = m 2^e, m in [0.5, 1): a's binade is 2^(e-1) */
    int E = e - 1;
    if (E < emin) E = emin; /* below the normals: the subnormal grid, spacing 2^(emin - mbits) */
    /* a / ulp and back are exact (scaling by a power of two within float32's
     * range), so rintf's round-half-even in the default rounding mode is the
     * only rounding; a value just under the largest finite one cannot round
     * above it, since the grid's next point would be >= maxv + ulp */
    const float ulp = ldexpf(1.0f, E - mbits);
    return copysignf(rintf(a / ulp) * ulp, x);
}

/* What a GEMM of the recipe reads for x: x * scale rounded to FP8, dequantised
 * by dividing by the scale (the float32 value of the FP8 operand). */
static inline VB_FP8_HD float vb_fp8_qdq(float x, float scale, vb_fp8_format f) {
    return vb_fp8_round(x * scale, f) / scale;
}

/* max |x[i]| of the unscaled tensor; NaN when any x[i] is NaN (so the update
 * below keeps the old scale, as TE's does for a non-finite amax) */
static inline VB_FP8_HD float vb_fp8_amax(const float *x, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        if (a > m || isnan(a)) m = a;
        if (isnan(m)) break;
    }
    return m;
}

/* The scale delayed scaling uses next, from the amax TE derives from the
 * history: sf = (fp8_max / amax) / 2^margin, computed in float32 as TE's
 * _default_sf_compute does; the old scale is kept when amax is 0 (nothing
 * seen yet) or not finite. */
/* The largest margin: with it a tensor whose amax is as large as FP8 holds
 * unscaled (448, E4M3) still gets a scale of at least 2^-126, the smallest
 * normal float; from 128 on 2^margin is infinite and every scale 0. */
#define VB_FP8_MAX_MARGIN 126

static inline VB_FP8_HD float vb_fp8_scale_from_amax(float amax, float old_scale, vb_fp8_format f, int margin) {
    if (!(amax > 0.0f) || !isfinite(amax)) return old_scale;
    const float sf = (vb_fp8_max(f) / amax) / ldexpf(1.0f, margin);
    /* a subnormal amax overflows the quotient: the largest float instead,
     * as TE's update kernel does, so x * scale stays finite for x != 0 */
    return isinf(sf) ? 3.40282347e38f : sf;
}

/* One tensor's amax from its history of len entries, row 0 the current
 * step's: the maximum over all of them, or the newest alone. Unfilled
 * entries hold 0. */
static inline VB_FP8_HD float vb_fp8_history_amax(const float *hist, int len, int stride, vb_fp8_amax_algo algo) {
    if (algo == VB_FP8_AMAX_MOST_RECENT) return hist[0];
    float m = 0.0f;
    for (int i = 0; i < len; i++) {
        const float a = hist[(size_t)i * stride];
        if (a > m || isnan(a)) m = a;
        if (isnan(m)) break;
    }
    return m;
}

/* An amax slot after taking tensor amax b: the max, with a NaN recorded as
 * +inf. A scale keeps its value for either (vb_fp8_scale_from_amax), and an
 * infinity, unlike a NaN, survives a max reduction over ranks in any order
 * on every MPI and NCCL, so all ranks keep the same scales. */
static inline VB_FP8_HD float vb_fp8_amax_merge(float a, float b) {
    if (isnan(b)) b = INFINITY;
    return b > a ? b : a;
}

/* One FP8 GEMM's state as the ops see it (backend memory; a host struct
 * passed by pointer, read when the op is called). Each scale multiplies its
 * tensor before the cast; each amax slot, where not NULL, takes the
 * unscaled tensor's max |x| (vb_fp8_amax_merge), so it must be zeroed before
 * the step: the history's row 0. */
typedef struct vb_fp8_gemm {
    const float *scale_x, *scale_w, *scale_g; /* input, weight (E4M3); output gradient (E5M2) */
    float *amax_x, *amax_w, *amax_g;
    void *scratch;                            /* ops->fp8_scratch_bytes(ctx, N, C, OC) bytes */
} vb_fp8_gemm;

#endif
