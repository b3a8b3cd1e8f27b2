/* half.h - IEEE binary16 and bfloat16 conversions, bit-exact with ggml
 * (round to nearest, ties to even; subnormals kept; NaN stays NaN, quiet). */
#ifndef QK_HALF_H
#define QK_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t qk_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float qk_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float qk_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) /* inf / nan */
        return qk_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) { /* zero / subnormal: man * 2^-24, exact in f32 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return qk_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t qk_f32_to_f16(float f)
{
    uint32_t u = qk_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* nan: keep top payload bits, force quiet */
        return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff);
    if (a >= 0x477ff000u) /* rounds to >= 65520: inf */
        return sign | 0x7c00;
    if (a < 0x38800000u) { /* below 2^-14: subnormal half (or zero) */
        /* value = a_f * 2^24 half-ulps; round to nearest even integer */
        uint32_t exp = a >> 23;
        if (exp < 102) /* < 2^-25: rounds to zero */
            return sign;
        uint32_t man = (a & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - exp; /* 14..24 */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        return sign | (uint16_t)q;
    }
    /* normal: rebias exponent, round 23 -> 10 mantissa bits (carry may bump exponent) */
    uint32_t r = a + 0xfffu + ((a >> 13) & 1);
    return sign | (uint16_t)((r - (112u << 23)) >> 13);
}

static inline float qk_bf16_to_f32(uint16_t h) { return qk_bits_f32((uint32_t)h << 16); }

static inline uint16_t qk_f32_to_bf16(float f)
{
    uint32_t u = qk_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

#endif
