/* quant_common.h - helpers shared by the quantization kernel families
 * (private to kernels/).
 *
 * Everything here reproduces a helper of ggml-quants.c (llama.cpp d32676d)
 * bit for bit: same float (never double) intermediates, same order of
 * operations, same tie-breaking.  Keep it that way: an encoder built on these
 * must equal ggml_quantize_chunk() byte for byte, and any "harmless" algebraic
 * rewrite (a*b*c vs a*(b*c), hoisting a division, fusing into fmaf) changes
 * the rounding and so the bytes.
 *
 * Block fields are handled as little-endian bytes (the blocks of a GGUF row
 * are packed with no alignment), through the qk_ld_* / qk_st_* accessors.
 */
#ifndef QK_QUANT_COMMON_H
#define QK_QUANT_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/half.h"

/* ggml's guard below which a group's max |x| counts as zero (GROUP_MAX_EPS). */
#define QK_GROUP_MAX_EPS 1e-15f

/* ---- little-endian field access -------------------------------------- */

static inline uint16_t qk_ld_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void qk_st_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline uint32_t qk_ld_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void qk_st_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline float qk_ld_f32(const uint8_t *p) { return qk_bits_f32(qk_ld_u32(p)); }
static inline void qk_st_f32(uint8_t *p, float v) { qk_st_u32(p, qk_f32_bits(v)); }
/* An fp16 field as float (GGML_FP16_TO_FP32) / stored from float (GGML_FP32_TO_FP16). */
static inline float qk_ld_f16(const uint8_t *p) { return qk_f16_to_f32(qk_ld_u16(p)); }
static inline void qk_st_f16(uint8_t *p, float v) { qk_st_u16(p, qk_f32_to_f16(v)); }

/* ---- activation blocks (the vec_dot_type side, read by every family) -- */

/* Q8_0: 32 int8 quants with an fp16 scale d (block_q8_0). */
typedef struct {
    uint8_t d[2];
    int8_t qs[32];
} qk_block_q8_0;
/* Q8_1: as Q8_0 plus s = fp16(d * sum(qs)) (block_q8_1). */
typedef struct {
    uint8_t d[2];
    uint8_t s[2];
    int8_t qs[32];
} qk_block_q8_1;
/* Q8_K: 256 int8 quants, an f32 scale d and the int16 sums of each group of
 * 16 quants, bsums (block_q8_K). */
typedef struct {
    uint8_t d[4];
    int8_t qs[256];
    uint8_t bsums[32];
} qk_block_q8_K;
_Static_assert(sizeof(qk_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(qk_block_q8_1) == 36, "q8_1 block");
_Static_assert(sizeof(qk_block_q8_K) == 292, "q8_K block");

static inline int qk_q8K_bsum(const qk_block_q8_K *b, int j) { return (int16_t)qk_ld_u16(b->bsums + 2 * j); }

/* The activation encoders of rows of n floats (kernels/actvar.c): Q8_0 and
 * Q8_1 as llama.cpp's x86 quantize_row_q8_0/_1, Q8_K as
 * quantize_row_q8_K_ref, each block's inverse scale moved `ulp` (-1, 0, +1)
 * ulps in magnitude and ties broken the other way when `flip` (the noise
 * floor's variants, kernels/actvar.h); ulp 0 and !flip: the encoders. */
void qk_q8_0_act_row(const float *src, void *dst, int64_t n, int ulp, bool flip);
void qk_q8_1_act_row(const float *src, void *dst, int64_t n, int ulp, bool flip);
void qk_q8_K_act_row(const float *src, void *dst, int64_t n, int ulp, bool flip);

/* ---- rounding ---------------------------------------------------------- */

/* ggml's nearest_int: round to nearest, ties to even, by adding 1.5*2^23 and
 * reading the low mantissa bits.  Exact for |x| <= 4194303; beyond that (or
 * for NaN) it returns the same garbage ggml does, without undefined behaviour. */
static inline int qk_nearest_int(float x)
{
    float v = x + 12582912.f;
    return (int)(qk_f32_bits(v) & 0x007fffff) - 0x00400000;
}

/* A C float -> integer conversion as x86-64 performs it (cvttss2si):
 * truncation toward zero, and INT32_MIN for NaN or out-of-range values.
 * ggml's reference encoders convert with plain casts such as
 * (int8_t)(x + 8.5f); this gives the same result without the undefined
 * behaviour such a cast has on out-of-range input. */
static inline int32_t qk_trunc_i32(float x)
{
    if (!(x >= -2147483648.0f && x < 2147483648.0f))
        return INT32_MIN;
    return (int32_t)x;
}

/* ---- scale searches (static helpers of ggml-quants.c) ----------------- */

/* make_qx_quants with rmse_type 1: symmetric quantization of x[n] to
 * L[i] = l + nmax, l in [-nmax, nmax-1], minimising sum w*(x - s*l)^2 with
 * w = qw[i] (or x[i]^2 when qw is NULL), trying 19 candidate scales.
 * Returns the scale s (0 for a group with max |x| < QK_GROUP_MAX_EPS). */
float qk_make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw);

/* The longest group the eight-group searches take. */
#define QK_SEARCH_MAX_N 32

/* qk_make_qx_quants on 8 groups of n <= QK_SEARCH_MAX_N values at once:
 * group g is x + g*n (weights qw + g*n, or NULL), its levels go to L + g*n
 * and its scale to scales[g].  The same bits as eight calls at every CPU
 * level (kernels/x86/avx2_search.c runs the groups in SIMD lanes). */
void qk_make_qx_quants_x8(int n, int nmax, const float *x, int8_t *L, const float *qw,
                          float *scales);

/* make_q3_quants with do_rmse: as above with w = x^2 plus up to 5 rounds of
 * coordinate descent on the levels.  Returns the scale; L[i] in [0, 2*nmax). */
float qk_make_q3_quants(int n, int nmax, const float *x, int8_t *L);

/* make_qkx2_quants / make_qkx3_quants (identical for non-NULL weights):
 * asymmetric quantization x ~ s*L - m, L in [0, nmax], searching nstep+1
 * scales around nmax/(max-min) (rmin + rdelta*is + nmax) with a weighted
 * least-squares fit of (s, m) for each; the error is weighted |diff| when
 * use_mad, else weighted diff^2.  Stores m (>= 0) in *the_min, returns s.
 * Laux[n] is scratch. */
float qk_make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                         float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                         bool use_mad);

/* qk_make_qkx_quants on 8 groups of n <= QK_SEARCH_MAX_N values at once:
 * group g is x + g*n with weights + g*n; its levels go to L + g*n, its
 * scale to scales[g] and its min to the_mins[g].  Same bits as eight calls
 * at every CPU level. */
void qk_make_qkx_quants_x8(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                           float *scales, float *the_mins, float rmin, float rdelta, int nstep,
                           bool use_mad);

/* make_qp_quants: quantize the non-negative x[n] (scales or mins of
 * sub-blocks) to L in [0, nmax] with weights qw, returning the scale. */
float qk_make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *qw);

/* ---- K-quant 6-bit scale packing (Q4_K, Q5_K) ------------------------- */

/* get_scale_min_k4: scale and min of sub-block j (0..7) from the 12 bytes q. */
static inline void qk_get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif
