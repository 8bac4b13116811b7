/* cpu_math.h: branch-free float exp and normal CDF that GCC vectorises.
 *
 * Why not expf/erff: inside `omp simd` loops glibc's scalar functions are
 * called one lane at a time, and libmvec's vector versions are only announced
 * under -ffast-math, exist only on glibc >= 2.35 and take a slow path for
 * underflowing lanes (common in softmax rows). These inline versions are plain
 * arithmetic plus selects, so every lane runs the same instructions.
 *
 * Coefficients are our own minimax fits (Lawson's iteratively reweighted least
 * squares against mpmath, rounded to float); the errors quoted are of the
 * polynomials in exact arithmetic. With float evaluation both functions stay
 * within ~1-2 ulp (tests/test_ops.c checks GELU and softmax against double).
 */
#ifndef VB_CPU_MATH_H
#define VB_CPU_MATH_H

#include <math.h>
#include <stdint.h>

/* exp(x) for x <= 0. Results below 2^-126 (x < -87) are flushed to 0, which
 * is what softmax and the Gaussian in GELU need; NaN gives NaN, -inf 0. x = n ln2 + r, |r| <= ln2/2,
 * exp(r) by a degree-6 minimax polynomial (rel. error 1.9e-9). */
static inline float vb_exp_nonpos(float x) {
    const float log2e = 1.44269504088896341f;
    // ln2 split so that n * ln2_hi is exact for |n| <= 127
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    float xc = x < -87.0f ? -87.0f : x;
    float n = rintf(xc * log2e);
    // n goes to int below, and converting NaN or inf to int is undefined:
    // NaN (the selects send it to -126) still reaches the result through r,
    // and +inf or large x (outside the contract) stop at 2^127 instead of
    // overflowing the exponent shift
    n = n >= -126.0f ? n : -126.0f;
    n = n <= 127.0f ? n : 127.0f;
    float r = xc - n * ln2_hi;
    r = r - n * ln2_lo;
    float p = 1.383684576e-03f;
    p = p * r + 8.374815807e-03f;
    p = p * r + 4.166822508e-02f;
    p = p * r + 1.666641980e-01f;
    p = p * r + 4.999999106e-01f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    // 2^n from the exponent bits; n is in [-126, 0] for x in [-87, 0]
    union { int32_t i; float f; } two_n;
    two_n.i = ((int32_t)n + 127) << 23;
    float y = p * two_n.f;
    return x < -87.0f ? 0.0f : y; // also maps -inf to 0
}

/* Standard normal CDF Phi(x) = 0.5 (1 + erf(x/sqrt2)); *gauss receives
 * exp(-x^2/2), which the GELU backward needs and this computes anyway.
 * With z = x/sqrt2, a = |z|:
 *   a < 1:  erf(z) = z P(z^2)                   (rel. error 1.2e-9)
 *   a >= 1: erfc(a) = exp(-a^2) Q(a - 1)        (abs. error 2.4e-9)
 *           and 0 from a = 4 on, where erf(z) rounds to +-1 in float.
 * For x < 0 this yields 1 + erf(z) = erfc(a) directly, without the
 * cancellation of 1 + erff(z), so it is at least as accurate as PyTorch's. */
static inline float vb_normal_cdf(float x, float *gauss) {
    const float inv_sqrt2 = 0.70710678118654752f;
    float z = x * inv_sqrt2;
    float a = fabsf(z);
    float s = a * a;
    float e = vb_exp_nonpos(-s);
    float p = 7.853884017e-05f;
    p = p * s - 8.010201273e-04f;
    p = p * s + 5.188328680e-03f;
    p = p * s - 2.685381286e-02f;
    p = p * s + 1.128358543e-01f;
    p = p * s - 3.761262596e-01f;
    p = p * s + 1.128379107e+00f;
    float erf_small = z * p;
    float t = a - 1.0f;
    float q = 1.068436322e-04f;
    q = q * t - 1.057058573e-03f;
    q = q * t + 4.911290016e-03f;
    q = q * t - 1.511015836e-02f;
    q = q * t + 3.687498346e-02f;
    q = q * t - 7.905334234e-02f;
    q = q * t + 1.543505490e-01f;
    q = q * t - 2.732110620e-01f;
    q = q * t + 4.275835752e-01f;
    float erfc_big = a < 4.0f ? e * q : 0.0f; // selects, so a = inf gives 0, not 0*inf
    float cdf_big = z < 0.0f ? 0.5f * erfc_big : 1.0f - 0.5f * erfc_big;
    *gauss = e;
    return a < 1.0f ? 0.5f + 0.5f * erf_small : cdf_big;
}

#endif
