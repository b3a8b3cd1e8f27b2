/* elements.h - element codecs of the datacenter quantization formats: one
 * code (at most 8 bits, held in the low bits of a byte) <-> one float.
 *
 * Minifloats (sign, exponent field E with bias b, mantissa field M of m bits;
 * E = 0 is subnormal: (-1)^s * 2^(1-b) * M/2^m, else (-1)^s * 2^(E-b) * (1 + M/2^m)):
 *
 *   name       bits  e m  bias  max     min normal  min subnormal  Inf        NaN
 *   fp8_e4m3    8    4 3   7    448     2^-6        2^-9           none       S.1111.111 (0x7F, 0xFF)
 *   fp8_e5m2    8    5 2  15    57344   2^-14       2^-16          S.11111.00 S.11111.{01,10,11}
 *   fp6_e2m3    6    2 3   1    7.5     1           0.125          none       none
 *   fp6_e3m2    6    3 2   3    28      0.25        0.0625         none       none
 *   fp4_e2m1    4    2 1   1    6       1           0.5            none       none
 *   e8m0        8    8 0 127    2^127   2^-127 (code 0)            none       0xFF (no sign, no zero)
 *
 * fp8_e4m3 is the OCP "fn" variant: OCP 8-bit Floating Point Specification
 * (OFP8) rev 1.0, sec. 5.1 "OFP8 Binary Interchange Formats" (the table of
 * the two encodings: the E4M3 exponent 1111 is finite except mantissa 111 =
 * NaN; E5M2 follows IEEE 754 conventions).  fp6_* and fp4_e2m1 are the MX element
 * types of OCP Microscaling Formats (MX) v1.0, sec. 5.3.2 (FP6) and 5.3.3
 * (FP4; the E2M1 values come from fp4.h, shared with the GGUF MXFP4/NVFP4
 * kernels); MX sec. 5.3.1 takes FP8 from OFP8; e8m0 is the MX scale type,
 * sec. 5.4.1: value 2^(code-127), 0xFF NaN.
 *
 * Integers and code books:
 *   int8   two's complement byte, -128..127;   uint8  0..255
 *   int4   4-bit two's complement, -8..7;        uint4  0..15 (used with a zero point)
 *   nf4    bitsandbytes NormalFloat4: 16 quantiles of N(0,1) scaled to [-1, 1]
 *          (csrc/kernels.cu nf4 table / dDequantizeNF4); code 7 is 0.
 *   bnb_fp4 bitsandbytes FP4 (dDequantizeFP4Tree): bit 3 sign, magnitudes
 *          {0, 0.0625, 8, 12, 4, 6, 2, 3} / 12 for codes 0..7.
 *
 * Encoding (float -> code) rounds to nearest, ties to even (OFP8 sec. 5.2.1
 * "Conversion Arithmetic" and MX sec. 6.3 both name roundTiesToEven): of the
 * two nearest representable values the one with the even code wins.  E8M0
 * has no mantissa bit: a value midway between 2^k and 2^(k+1) rounds up (IEEE 754 ties-to-even applied to
 * the 1-bit significand, as ml_dtypes' float8_e8m0fnu does).  The sign is
 * kept when rounding to zero (-tiny -> -0).  Overflow and specials:
 *
 *                 QK_ENC_SAT (default)              QK_ENC_NONSAT (ml_dtypes / torch casts)
 *   fp8_e4m3      |x| > 448 and +-Inf -> +-448       rounds past 448 (|x| > 464) and +-Inf -> NaN
 *   fp8_e5m2      |x| > 57344 and +-Inf -> +-57344   rounds past max (|x| >= 61440) and +-Inf -> +-Inf
 *   fp6/fp4       clamp to +-max (no Inf/NaN codes: both modes saturate)
 *   e8m0          x >= 1.5*2^127 and +Inf -> 0xFE (2^127)   -> 0xFF (NaN)
 *                 both modes: x <= 0 and NaN -> 0xFF (NaN); 0 < x < 2^-127 -> 0x00
 *   integers      RNE then clamp to the range (both modes); NaN -> 0
 *   nf4, bnb_fp4  bitsandbytes' decision trees (dQuantizeNF4, dQuantizeFP4),
 *                 input expected in [-1, 1]: the bucket is the number of
 *                 thresholds t with x > t (nf4) or |x| > t (bnb_fp4, sign bit
 *                 from x < 0), t being float midpoints of neighbouring values
 *                 as bitsandbytes spells them, so ties go to the smaller one.
 *
 * NaN input: fp8_e4m3 -> 0x7F|sign, fp8_e5m2 -> 0x7E|sign, e8m0 -> 0xFF, the
 * formats without NaN -> +-0 (the sign of the NaN).  Saturating mode is the saturation
 * mode of OFP8 sec. 5.2 "Conversion Behavior", and what the MX conversion
 * (MX sec. 6.3, "clamping normal numbers") and the checkpoint tools (clamp
 * to +-max before the cast) use.
 */
#ifndef QK_ELEMENTS_H
#define QK_ELEMENTS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum qk_elem {
    QK_ELEM_FP8_E4M3,
    QK_ELEM_FP8_E5M2,
    QK_ELEM_E8M0,
    QK_ELEM_FP6_E2M3,
    QK_ELEM_FP6_E3M2,
    QK_ELEM_FP4_E2M1,
    QK_ELEM_INT8,
    QK_ELEM_UINT8,
    QK_ELEM_INT4,
    QK_ELEM_UINT4,
    QK_ELEM_NF4,
    QK_ELEM_BNB_FP4,
    QK_ELEM_COUNT
} qk_elem;

enum { QK_ENC_SAT = 0, QK_ENC_NONSAT = 1 };

typedef struct qk_elem_info {
    const char *name;  /* "fp8_e4m3", "int4", "nf4", ... */
    int bits;          /* code width: 8, 6 or 4 */
    int ebits, mbits;  /* minifloats (0, 0 for integers and code books) */
    int bias;          /* exponent bias (minifloats) */
    bool is_float;     /* a minifloat (incl. e8m0) */
    bool is_signed;    /* has negative values */
    bool has_inf, has_nan;
    int emax;          /* exponent of the largest normal (MX emax_elem; 0 for ints) */
    float max;         /* largest finite value */
    float min;         /* most negative finite value (0 for unsigned, 2^-127 for e8m0) */
} qk_elem_info;

/* Facts of e, or NULL when e is out of range. */
const qk_elem_info *qk_elem_get(qk_elem e);
/* By name (case-insensitive), or NULL. */
const qk_elem_info *qk_elem_by_name(const char *name);

/* The value of a code (bits above the format's width are ignored). */
float qk_elem_decode(qk_elem e, uint8_t code);
/* The code of x, rounded and saturated as described above (mode QK_ENC_SAT
 * or QK_ENC_NONSAT). */
uint8_t qk_elem_encode(qk_elem e, float x, int mode);

/* Bulk forms: n codes, one per byte. */
void qk_elem_decode_n(qk_elem e, const uint8_t *codes, float *dst, int64_t n);
void qk_elem_encode_n(qk_elem e, const float *src, uint8_t *codes, int64_t n, int mode);

/* The two code books (bitsandbytes csrc/kernels.cu), data. */
extern const float qk_nf4_values[16];
extern const float qk_bnb_fp4_values[16];

/* FP8 shorthands (the most used codecs; saturating encode). */
static inline float qk_fp8_e4m3_to_f32(uint8_t c) { return qk_elem_decode(QK_ELEM_FP8_E4M3, c); }
static inline uint8_t qk_f32_to_fp8_e4m3(float x) { return qk_elem_encode(QK_ELEM_FP8_E4M3, x, QK_ENC_SAT); }
static inline float qk_fp8_e5m2_to_f32(uint8_t c) { return qk_elem_decode(QK_ELEM_FP8_E5M2, c); }
static inline uint8_t qk_f32_to_fp8_e5m2(float x) { return qk_elem_encode(QK_ELEM_FP8_E5M2, x, QK_ENC_SAT); }

#endif
