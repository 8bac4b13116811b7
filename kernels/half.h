/* half.h: bfloat16 and float16 <-> float32 on the host, as the GPU converts:
 * widening is exact; narrowing rounds to nearest, ties to even, keeps NaN a
 * (quiet) NaN and sends float16 overflow to infinity. Plain C, also included
 * by C++ (the CUDA kernels' CPU emulator).
 */
#ifndef VB_HALF_H
#define VB_HALF_H

#include <stdint.h>
#include <string.h>

static inline float vb_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t vb_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN stays a (quiet) NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                              /* to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

static inline float vb_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13); /* inf, NaN */
    } else if (exp != 0) {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal: normalise the significand */
        uint32_t e = 113;
        while (!(man & 0x400u)) {
            man <<= 1;
            e--;
        }
        u = sign | (e << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t vb_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* 65520 and up round to inf */
    if (a >= 0x38800000u) {                                  /* a normal half: rebias the exponent, round 13 bits away */
        uint32_t r = a - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (uint16_t)(r >> 13));
    }
    /* a subnormal half (units of 2^-24) or zero */
    const uint32_t e = a >> 23;
    if (e < 102) return sign; /* below 2^-25: rounds to zero */
    const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | (uint16_t)q);
}

#endif
