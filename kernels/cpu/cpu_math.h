/* cpu_math.h: branch-free exp and normal CDF for the CPU kernels' `omp simd` loops.
 *
 * Why not expf/erff/erfc: inside `omp simd` loops glibc's scalar functions are
 * called one lane at a time, and libmvec's vector versions are only announced
 * under -ffast-math, exist only on glibc >= 2.35 and take a slow path for
 * underflowing lanes (common in softmax rows). These inline versions are plain
 * arithmetic, integer bit operations and bitwise selects, so every lane runs
 * the same instructions and both GCC and clang vectorise them on SSE, AVX2 and
 * AVX-512.
 *
 * Selects are bitwise (vb_select_f32/f64), not `c ? a : b`: GCC sinks the
 * computation of a ternary's arms into branches, and with the default
 * -ftrapping-math it then refuses to if-convert a branch holding a float
 * operation unless the target has masked vector instructions (AVX-512 does,
 * AVX2 does not), so on AVX2 a ternary can leave the whole loop scalar.
 *
 * Coefficients are our own minimax fits (Lawson's iteratively reweighted
 * least squares against mpmath); the errors quoted are of the approximations
 * in exact arithmetic.
 */
#ifndef VB_CPU_MATH_H
#define VB_CPU_MATH_H

#include <math.h>
#include <stdint.h>

/* ---- bit casts and branch-free selects ---- */

static inline uint32_t vb_f32_bits(float f) {
    union { float f; uint32_t u; } c = {.f = f};
    return c.u;
}
static inline float vb_bits_f32(uint32_t u) {
    union { uint32_t u; float f; } c = {.u = u};
    return c.f;
}
static inline uint64_t vb_f64_bits(double d) {
    union { double d; uint64_t u; } c = {.d = d};
    return c.u;
}
static inline double vb_bits_f64(uint64_t u) {
    union { uint64_t u; double d; } c = {.u = u};
    return c.d;
}
/* cond ? a : b, both already computed; NaN in the chosen operand stays NaN */
static inline float vb_select_f32(int cond, float a, float b) {
    uint32_t m = (uint32_t)0 - (uint32_t)(cond != 0);
    return vb_bits_f32((vb_f32_bits(a) & m) | (vb_f32_bits(b) & ~m));
}
static inline double vb_select_f64(int cond, double a, double b) {
    uint64_t m = (uint64_t)0 - (uint64_t)(cond != 0);
    return vb_bits_f64((vb_f64_bits(a) & m) | (vb_f64_bits(b) & ~m));
}

/* ---- exp(x) for x <= 0, float (softmax) ----
 * Results below 2^-126 (x < -87) are flushed to 0, which is what softmax
 * needs; NaN gives NaN, -inf 0. x = n ln2 + r, |r| <= ln2/2, exp(r) by a
 * degree-6 minimax polynomial (rel. error 1.9e-9), within ~1-2 ulp in float. */
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

/* ---- standard normal CDF and density, for the exact (erf) GELU ----
 *
 * Phi(x) = erfc(-x/sqrt2)/2 and phi(x) = exp(-x^2/2)/sqrt(2 pi), computed in
 * double from a float input so that the float results the GELU kernels round
 * to are correctly rounded except within ~4e-9 relative of a rounding
 * boundary: GELU's products and sums (x * Phi, Phi + x phi) lose nothing
 * before the one final rounding, where a float pipeline rounds five or six
 * times (the same method in float measured 5.8 ulp; this one 0.51). Double
 * lanes are half as many, which costs about 1.6x the float version's time.
 * With v = |x|:
 *   phi(v)  = exp(-v^2/2 - ln sqrt(2 pi)): v^2 of a float is exact in double;
 *             exp by k = round(arg / ln2), 2^k from the exponent bits (a
 *             1.5 * 2^52 shifter, integer adds and shifts only: no float to
 *             integer conversion, so NaN and inf lanes are well defined) and a
 *             degree-7 polynomial on |r| <= ln2/2 (rel. error 5.2e-11).
 *   Phi(-v) = phi(v) m(v), m the Mills ratio, as m = P(v) / (v P(v) + Q(v)),
 *             P degree 5, Q degree 4 (rel. error 6.3e-10 on [0, 13.5], 3.2e-9
 *             on [13.5, 16], where GELU's results are float denormals).
 *             The form has m's 1/v tail built in, all coefficients positive
 *             (no cancellation in Horner), and one division.
 *   Phi(x)  = Phi(-v) for x < 0, else 1 - Phi(-v): the negative tail keeps
 *             its relative accuracy (no 1 + erf cancellation).
 * *xpdf receives x phi(x) (GELU's backward needs it). Valid for |x| <= 16;
 * callers select the limits beyond (vb_gelu). NaN gives NaN. */
static inline double vb_normal_cdf(double x, double *xpdf) {
    const double ln_sqrt_2pi = 0.91893853320467274178;
    const double log2e = 1.4426950408889634074, ln2 = 0.69314718055994530942;
    const double shifter = 6755399441055744.0; // 1.5 * 2^52: x + shifter rounds x to an integer
    double v = fabs(x);
    double arg = -0.5 * v * v - ln_sqrt_2pi;
    double kd = arg * log2e + shifter;
    double k = kd - shifter;
    double r = arg - k * ln2;
    double e = 1.9790341979682483e-04;
    e = e * r + 1.3944659684726546e-03;
    e = e * r + 8.3334970743306510e-03;
    e = e * r + 4.1666294946324400e-02;
    e = e * r + 1.6666665868935454e-01;
    e = e * r + 5.0000000676824500e-01;
    e = e * r + 1.0;
    e = e * r + 1.0;
    // the low bits of kd hold k; shifted up they are the exponent of 2^k
    // (k in [-187, -1] for v <= 16, so k + 1023 fits the 11-bit field)
    double two_k = vb_bits_f64((vb_f64_bits(kd) + 1023u) << 52);
    double pdf = e * two_k;
    double p = 3.0657805652632431e-03;
    p = p * v + 3.6896935924630225e-02;
    p = p * v + 2.1200913023043472e-01;
    p = p * v + 7.0480740050681490e-01;
    p = p * v + 1.3559807826700934e+00;
    p = p * v + 1.2533141373155003e+00; // sqrt(pi/2) = m(0): Phi(0) = 1/2
    double q = 3.0661269500914246e-03;
    q = q * v + 3.6880036466904464e-02;
    q = q * v + 2.0623866272886104e-01;
    q = q * v + 6.2648651988756487e-01;
    q = q * v + 1.0;
    double tail = pdf * (p / (v * p + q)); // Phi(-v)
    *xpdf = x * pdf;
    return vb_select_f64(x < 0.0, tail, 1.0 - tail);
}

/* exact GELU x Phi(x), as torch.nn.GELU() (approximate="none"); the limits
 * beyond |x| > 16: x for x > 0 (inf stays inf), -0 for x < 0 (-inf gives -0,
 * the limit, where x * Phi(x) would be -inf * 0). NaN gives NaN. */
static inline float vb_gelu(float x) {
    double xpdf;
    double cdf = vb_normal_cdf((double)x, &xpdf);
    float y = (float)((double)x * cdf);
    float limit = vb_select_f32(x > 0.0f, x, -0.0f);
    return vb_select_f32(fabsf(x) > 16.0f, limit, y);
}

/* dout * GELU'(x) = dout (Phi(x) + x phi(x)), one rounding; GELU' is 1 beyond
 * x > 16 and 0 below -16. NaN in x or dout gives NaN. */
static inline float vb_gelu_backward(float x, float dout) {
    double xpdf;
    double cdf = vb_normal_cdf((double)x, &xpdf);
    float y = (float)((double)dout * (cdf + xpdf));
    float limit = vb_select_f32(x > 0.0f, dout, 0.0f * dout);
    return vb_select_f32(fabsf(x) > 16.0f, limit, y);
}

#endif
