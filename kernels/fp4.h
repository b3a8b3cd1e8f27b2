/* fp4.h - FP4 (E2M1) elements and their block scales: the E8M0 power-of-two
 * scale of the OCP Microscaling formats (MXFP4) and the UE4M3 scale of NVFP4.
 * Bit-exact with ggml at llama.cpp d32676d (ggml-common.h kvalues_fp4,
 * ggml-impl.h ggml_e8m0_to_fp32*, ggml_ue4m3_to_fp32, ggml_fp32_to_ue4m3).
 *
 * E2M1 codes (OCP MX v1.0, sec. 5.3.3): bit 3 sign, bits 2..1 exponent (bias
 * 1), bit 0 mantissa; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.  ggml keeps them
 * DOUBLED as small integers (qk_e2m1_x2) so dot products stay in integers,
 * and halves the block scale instead (qk_e8m0_to_f32_half, qk_ue4m3_to_f32_half).
 * Value of code c in a block with scale byte s: qk_e2m1_x2[c] * half_scale(s).
 */
#ifndef QK_FP4_H
#define QK_FP4_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Twice the E2M1 value of each 4-bit code: 0 1 2 3 4 6 8 12, then negatives. */
extern const int8_t qk_e2m1_x2[16];

/* The E2M1 value of a 4-bit code (only the low 4 bits are used). */
static inline float qk_e2m1_to_f32(uint8_t code) { return 0.5f * (float)qk_e2m1_x2[code & 15]; }

/* E8M0 scale byte -> 2^(e-127) (OCP MX v1.0 sec. 5.4.1).  e = 0 gives the
 * subnormal 2^-127, as ggml does.  e = 0xFF is NaN in OCP MX; ggml's
 * ggml_e8m0_to_fp32 leaves it unhandled (it yields +inf), we return NaN. */
static inline float qk_e8m0_to_f32(uint8_t e)
{
    uint32_t bits = e == 0 ? 0x00400000u : e == 0xFF ? 0x7fc00000u : (uint32_t)e << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Half the E8M0 scale, 2^(e-128): ggml_e8m0_to_fp32_half, bit for bit for all
 * 256 bytes (e = 0, 1 subnormal; e = 0xFF gives 2^127, no NaN).  This is the
 * scale that multiplies the doubled codes of qk_e2m1_x2. */
static inline float qk_e8m0_to_f32_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* NVFP4 sub-block scale byte (UE4M3: unsigned, 4 exponent bits with bias 7,
 * 3 mantissa bits) -> HALF its value, as ggml_ue4m3_to_fp32 returns it.
 * Bit 7 is ignored except that 0x00 and 0x7F both decode to 0 (ggml's rule). */
static inline float qk_ue4m3_to_f32_half(uint8_t x)
{
    if (x == 0 || x == 0x7F)
        return 0.0f;
    const uint32_t exp = (x >> 3) & 0xF, man = x & 7;
    if (exp == 0)
        return (float)man * 0x1p-10f; /* man * 2^-9, halved: exact */
    /* (1 + man/8) * 2^(exp-7), halved: a normal float built from its fields */
    const uint32_t bits = (exp - 7 + 127 - 1) << 23 | man << 20;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* float -> UE4M3 byte, ggml_fp32_to_ue4m3: non-positive (and NaN) -> 0,
 * clamp to 448, mantissa rounded half-up on the first dropped bit (not to
 * even), overflow to 0x7E (448), subnormals rounded as (int)(x*512 + 0.5). */
static inline uint8_t qk_f32_to_ue4m3(float x)
{
    if (!(x > 0.0f))
        return 0;
    if (x > 448.0f)
        x = 448.0f;
    uint32_t bits;
    memcpy(&bits, &x, 4);
    int exp = (int)((bits >> 23) & 0xFF) - 127 + 7;
    int man = (int)((bits >> 20) & 7);
    if (exp <= 0) {
        int sub = (int)(x * 512.0f + 0.5f); /* x < 2^-6 here: no overflow */
        if (sub > 7)
            sub = 7;
        return sub < 1 ? 0 : (uint8_t)sub;
    }
    if (exp >= 15)
        return 0x7E;
    man += (int)((bits >> 19) & 1);
    if (man > 7) {
        man = 0;
        if (++exp >= 15)
            return 0x7E;
    }
    return (uint8_t)((exp << 3) | man);
}

/* Index of the code whose doubled value times half_scale is nearest to x
 * (ggml's best_index_mxfp4: first of equals wins, scanning codes 0..15, so
 * +0 beats -0 and ties between magnitudes go to the smaller code). */
int qk_e2m1_nearest(float x, float half_scale);

#endif
