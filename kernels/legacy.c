/* legacy.c - the 32-element block formats Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1.
 *
 * Encoders equal ggml_quantize_chunk (llama.cpp d32676d, ggml-quants.c):
 * without an importance matrix the quantize_row_*_ref rounding encoders,
 * with one the weighted searches quantize_row_*_impl (Q8_0 ignores it).
 * Dot products are ggml-cpu/quants.c's ggml_vec_dot_*_generic, with the same
 * float expression order per block.
 *
 *   Q4_0  d:f16 qs[16]             x = d * (q - 8),        q in 0..15
 *   Q4_1  d:f16 m:f16 qs[16]       x = d * q + m,          q in 0..15
 *   Q5_0  d:f16 qh:u32 qs[16]      x = d * (q - 16),       q in 0..31
 *   Q5_1  d:f16 m:f16 qh:u32 qs[16] x = d * q + m,         q in 0..31
 *   Q8_0  d:f16 qs[32]:i8          x = d * q
 *   Q8_1  d:f16 s:f16 qs[32]:i8    x = d * q, s = d * sum(q)
 * Byte j of qs holds element j (low nibble) and element j+16 (high nibble);
 * bit j of qh is bit 4 of element j.
 */
#include <float.h>
#include <math.h>

#include "kernels/quant_common.h"
#include "kernels/types.h"

#define QK 32

typedef struct { uint8_t d[2]; uint8_t qs[QK / 2]; } blk_q4_0;
typedef struct { uint8_t d[2]; uint8_t m[2]; uint8_t qs[QK / 2]; } blk_q4_1;
typedef struct { uint8_t d[2]; uint8_t qh[4]; uint8_t qs[QK / 2]; } blk_q5_0;
typedef struct { uint8_t d[2]; uint8_t m[2]; uint8_t qh[4]; uint8_t qs[QK / 2]; } blk_q5_1;
_Static_assert(sizeof(blk_q4_0) == 18, "q4_0");
_Static_assert(sizeof(blk_q4_1) == 20, "q4_1");
_Static_assert(sizeof(blk_q5_0) == 22, "q5_0");
_Static_assert(sizeof(blk_q5_1) == 24, "q5_1");

/* ---- shared pieces ----------------------------------------------------- */

/* The value with the largest |v| of a block (first on ties; 0 for none). */
static float signed_absmax(const float *x)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void block_min_max(const float *x, float *min, float *max)
{
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < QK; j++) {
        if (x[j] < *min)
            *min = x[j];
        if (x[j] > *max)
            *max = x[j];
    }
}

/* (int8_t)(v) as ggml's reference encoders write it, then MIN(hi, .). */
static inline uint8_t trunc_i8_min(float v, int hi)
{
    int q = (int8_t)qk_trunc_i32(v);
    return (uint8_t)(hi < q ? hi : q);
}

static void pack_nibbles(uint8_t *qs, const uint8_t *q)
{
    for (int j = 0; j < QK / 2; j++)
        qs[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + QK / 2] & 0x0F) << 4));
}

/* Bit 4 of each of the 32 levels, element j at bit j. */
static void pack_high_bits(uint8_t *qh, const uint8_t *q)
{
    uint32_t h = 0;
    for (int j = 0; j < QK; j++)
        h |= (uint32_t)((q[j] & 0x10u) >> 4) << j;
    qk_st_u32(qh, h);
}

/* The levels (0..31) of a 5-bit block, in element order. */
static void q5_levels(const uint8_t *qs, const uint8_t *qh_bytes, int8_t *q)
{
    const uint32_t qh = qk_ld_u32(qh_bytes);
    for (int j = 0; j < QK / 2; j++) {
        q[j] = (int8_t)((qs[j] & 0x0F) | (((qh >> j) & 1) << 4));
        q[j + QK / 2] = (int8_t)((qs[j] >> 4) | (((qh >> (j + QK / 2)) & 1) << 4));
    }
}

/* sigma2 = mean of x^2 over the whole row, as the weighted encoders use it. */
static float row_sigma2(const float *x, int64_t n)
{
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; j++)
        sum_x2 += x[j] * x[j];
    return sum_x2 / n;
}

/* Importance-weighted block weights: qw[j] * sqrt(sigma2 + x[j]^2). */
static void block_weights(float *w, const float *qw, const float *x, float sigma2)
{
    for (int j = 0; j < QK; j++)
        w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* Levels of make_qx_quants (int8, 0..2*nmax-1) or make_qkx_quants (uint8)
 * as uint8_t. */
static void levels_u8(uint8_t *q, const int8_t *L)
{
    for (int j = 0; j < QK; j++)
        q[j] = (uint8_t)L[j];
}

/* ---- Q4_0 -------------------------------------------------------------- */

static void q4_0_block_ref(const float *x, blk_q4_0 *y)
{
    const float d = signed_absmax(x) / -8;
    const float id = d ? 1.0f / d : 0.0f;
    qk_st_f16(y->d, d);
    uint8_t q[QK];
    for (int j = 0; j < QK; j++)
        q[j] = trunc_i8_min(x[j] * id + 8.5f, 15);
    pack_nibbles(y->qs, q);
}

static void q4_0_row_imatrix(const float *x, blk_q4_0 *y, int64_t n, const float *imatrix)
{
    const float sigma2 = row_sigma2(x, n);
    float w[QK];
    int8_t L[QK];
    uint8_t q[QK];
    for (int64_t ib = 0; ib < n / QK; ib++) {
        block_weights(w, imatrix + ib * QK, x + ib * QK, sigma2);
        qk_st_f16(y[ib].d, qk_make_qx_quants(QK, 8, x + ib * QK, L, w));
        levels_u8(q, L);
        pack_nibbles(y[ib].qs, q);
    }
}

static void q4_0_to_float(const void *src, float *dst, int64_t n)
{
    const blk_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = qk_ld_f16(b[i].d);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = ((b[i].qs[j] & 0x0F) - 8) * d;
            dst[j + QK / 2] = ((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* ggml_vec_dot_q4_0_q8_0_generic */
static float q4_0_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const blk_q4_0 *x = vx;
    const qk_block_q8_0 *y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi0 += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
            sumi1 += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + QK / 2];
        }
        sumf += (sumi0 + sumi1) * qk_ld_f16(x[i].d) * qk_ld_f16(y[i].d);
    }
    return sumf;
}

/* ---- Q4_1 -------------------------------------------------------------- */

static void q4_1_block_ref(const float *x, blk_q4_1 *y)
{
    float min, max;
    block_min_max(x, &min, &max);
    const float d = (max - min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    qk_st_f16(y->d, d);
    qk_st_f16(y->m, min);
    uint8_t q[QK];
    for (int j = 0; j < QK; j++)
        q[j] = trunc_i8_min((x[j] - min) * id + 0.5f, 15);
    pack_nibbles(y->qs, q);
}

static void q4_1_row_imatrix(const float *x, blk_q4_1 *y, int64_t n, const float *imatrix)
{
    const float sigma2 = row_sigma2(x, n);
    float w[QK], min;
    uint8_t L[QK], Laux[QK];
    for (int64_t ib = 0; ib < n / QK; ib++) {
        block_weights(w, imatrix + ib * QK, x + ib * QK, sigma2);
        float d = qk_make_qkx_quants(QK, 15, x + ib * QK, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
        qk_st_f16(y[ib].d, d);
        qk_st_f16(y[ib].m, -min);
        pack_nibbles(y[ib].qs, L);
    }
}

static void q4_1_to_float(const void *src, float *dst, int64_t n)
{
    const blk_q4_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = qk_ld_f16(b[i].d), m = qk_ld_f16(b[i].m);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = (b[i].qs[j] & 0x0F) * d + m;
            dst[j + QK / 2] = (b[i].qs[j] >> 4) * d + m;
        }
    }
}

/* ggml_vec_dot_q4_1_q8_1_generic */
static float q4_1_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const blk_q4_1 *x = vx;
    const qk_block_q8_1 *y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi0 += (x[i].qs[j] & 0x0F) * y[i].qs[j];
            sumi1 += (x[i].qs[j] >> 4) * y[i].qs[j + QK / 2];
        }
        sumf += (qk_ld_f16(x[i].d) * qk_ld_f16(y[i].d)) * (sumi0 + sumi1) +
                qk_ld_f16(x[i].m) * qk_ld_f16(y[i].s);
    }
    return sumf;
}

/* ---- Q5_0 -------------------------------------------------------------- */

static void q5_pack(uint8_t *qs, uint8_t *qh, const uint8_t *q)
{
    pack_nibbles(qs, q);
    pack_high_bits(qh, q);
}

static void q5_0_block_ref(const float *x, blk_q5_0 *y)
{
    const float d = signed_absmax(x) / -16;
    const float id = d ? 1.0f / d : 0.0f;
    qk_st_f16(y->d, d);
    uint8_t q[QK];
    for (int j = 0; j < QK; j++)
        q[j] = trunc_i8_min(x[j] * id + 16.5f, 31);
    q5_pack(y->qs, y->qh, q);
}

static void q5_0_row_imatrix(const float *x, blk_q5_0 *y, int64_t n, const float *imatrix)
{
    const float sigma2 = row_sigma2(x, n);
    float w[QK];
    int8_t L[QK];
    uint8_t q[QK];
    for (int64_t ib = 0; ib < n / QK; ib++) {
        block_weights(w, imatrix + ib * QK, x + ib * QK, sigma2);
        qk_st_f16(y[ib].d, qk_make_qx_quants(QK, 16, x + ib * QK, L, w));
        levels_u8(q, L);
        q5_pack(y[ib].qs, y[ib].qh, q);
    }
}

static void q5_0_to_float(const void *src, float *dst, int64_t n)
{
    const blk_q5_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = qk_ld_f16(b[i].d);
        int8_t q[QK];
        q5_levels(b[i].qs, b[i].qh, q);
        for (int j = 0; j < QK; j++)
            dst[j] = (q[j] - 16) * d;
    }
}

/* ggml_vec_dot_q5_0_q8_0_generic */
static float q5_0_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const blk_q5_0 *x = vx;
    const qk_block_q8_0 *y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        int8_t q[QK];
        q5_levels(x[i].qs, x[i].qh, q);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi0 += (q[j] - 16) * y[i].qs[j];
            sumi1 += (q[j + QK / 2] - 16) * y[i].qs[j + QK / 2];
        }
        sumf += (qk_ld_f16(x[i].d) * qk_ld_f16(y[i].d)) * (sumi0 + sumi1);
    }
    return sumf;
}

/* ---- Q5_1 -------------------------------------------------------------- */

static void q5_1_block_ref(const float *x, blk_q5_1 *y)
{
    float min, max;
    block_min_max(x, &min, &max);
    const float d = (max - min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    qk_st_f16(y->d, d);
    qk_st_f16(y->m, min);
    uint8_t q[QK];
    for (int j = 0; j < QK; j++) /* (uint8_t)(x0 + 0.5f): no clamp in ggml */
        q[j] = (uint8_t)qk_trunc_i32((x[j] - min) * id + 0.5f);
    q5_pack(y->qs, y->qh, q);
}

static void q5_1_row_imatrix(const float *x, blk_q5_1 *y, int64_t n, const float *imatrix)
{
    const float sigma2 = row_sigma2(x, n);
    float w[QK], min;
    uint8_t L[QK], Laux[QK];
    for (int64_t ib = 0; ib < n / QK; ib++) {
        block_weights(w, imatrix + ib * QK, x + ib * QK, sigma2);
        float d = qk_make_qkx_quants(QK, 31, x + ib * QK, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
        qk_st_f16(y[ib].d, d);
        qk_st_f16(y[ib].m, -min);
        q5_pack(y[ib].qs, y[ib].qh, L);
    }
}

static void q5_1_to_float(const void *src, float *dst, int64_t n)
{
    const blk_q5_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = qk_ld_f16(b[i].d), m = qk_ld_f16(b[i].m);
        int8_t q[QK];
        q5_levels(b[i].qs, b[i].qh, q);
        for (int j = 0; j < QK; j++)
            dst[j] = q[j] * d + m;
    }
}

/* ggml_vec_dot_q5_1_q8_1_generic */
static float q5_1_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const blk_q5_1 *x = vx;
    const qk_block_q8_1 *y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        int8_t q[QK];
        q5_levels(x[i].qs, x[i].qh, q);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi0 += q[j] * y[i].qs[j];
            sumi1 += q[j + QK / 2] * y[i].qs[j + QK / 2];
        }
        sumf += (qk_ld_f16(x[i].d) * qk_ld_f16(y[i].d)) * (sumi0 + sumi1) +
                qk_ld_f16(x[i].m) * qk_ld_f16(y[i].s);
    }
    return sumf;
}

/* ---- Q8_0 and Q8_1 ------------------------------------------------------ */

/* amax / 127 and the quants roundf(x / d) of quantize_row_q8_0_ref (the
 * Q8_0 weight encoder); returns d. */
static float q8_block(const float *x, int8_t *qs)
{
    float amax = 0.0f;
    for (int j = 0; j < QK; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK; j++)
        qs[j] = (int8_t)qk_trunc_i32(roundf(x[j] * id));
    return d;
}

/* The activation encoders are llama.cpp's x86 ones (quantize_row_q8_0 and
 * quantize_row_q8_1 in ggml-cpu/arch/x86/quants.c, and the 4-row
 * ggml_quantize_mat_q8_0_4x8 of its repacked Q4_0/IQ4_NL path), not the
 * _ref weight encoder above: id = 127 / amax instead of 1 / (amax / 127),
 * and rounding half to even (_mm256_round_ps) instead of roundf.  Those are
 * the activations llama.cpp's matrix products see on the CPUs it is
 * compared against here, so logits agree more closely (issue #5).  A
 * non-finite product becomes -128 as cvtps + saturating packs make it.
 * They are written once, in kernels/actvar.c, with the noise floor's
 * perturbations as parameters (here none). */
static void q8_0_from_float(const float *src, void *dst, int64_t n) { qk_q8_0_act_row(src, dst, n, 0, false); }

static void q8_1_from_float(const float *src, void *dst, int64_t n) { qk_q8_1_act_row(src, dst, n, 0, false); }

static void q8_0_to_float(const void *src, float *dst, int64_t n)
{
    const qk_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = qk_ld_f16(b[i].d);
        for (int j = 0; j < QK; j++)
            dst[j] = b[i].qs[j] * d;
    }
}

/* Q8_1 has no decoder in ggml's table; this is the layout's meaning, d * q. */
static void q8_1_to_float(const void *src, float *dst, int64_t n)
{
    const qk_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = qk_ld_f16(b[i].d);
        for (int j = 0; j < QK; j++)
            dst[j] = b[i].qs[j] * d;
    }
}

/* ggml_vec_dot_q8_0_q8_0_generic */
static float q8_0_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const qk_block_q8_0 *x = vx, *y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK; j++)
            sumi += x[i].qs[j] * y[i].qs[j];
        sumf += sumi * (qk_ld_f16(x[i].d) * qk_ld_f16(y[i].d));
    }
    return sumf;
}

/* ---- row encoders (qk_quantize_fn) -------------------------------------- */

/* One row at a time; the reference path encodes block by block, so the
 * result is the same as ggml encoding all rows as one stream. */
#define ROW_ENCODER(name, blk, block_ref, row_imatrix)                                         \
    static size_t name(const float *src, void *dst, int64_t nrows, int64_t ncols,              \
                       const float *imatrix)                                                   \
    {                                                                                          \
        blk *y = dst;                                                                          \
        for (int64_t r = 0; r < nrows; r++, src += ncols, y += ncols / QK) {                   \
            if (imatrix)                                                                       \
                row_imatrix(src, y, ncols, imatrix);                                           \
            else                                                                               \
                for (int64_t i = 0; i < ncols / QK; i++)                                       \
                    block_ref(src + i * QK, &y[i]);                                            \
        }                                                                                      \
        return (size_t)nrows * (size_t)(ncols / QK) * sizeof(blk);                             \
    }

ROW_ENCODER(q4_0_quantize, blk_q4_0, q4_0_block_ref, q4_0_row_imatrix)
ROW_ENCODER(q4_1_quantize, blk_q4_1, q4_1_block_ref, q4_1_row_imatrix)
ROW_ENCODER(q5_0_quantize, blk_q5_0, q5_0_block_ref, q5_0_row_imatrix)
ROW_ENCODER(q5_1_quantize, blk_q5_1, q5_1_block_ref, q5_1_row_imatrix)

/* quantize_q8_0 ignores the importance matrix. */
static size_t q8_0_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                            const float *imatrix)
{
    (void)imatrix; /* quantize_q8_0 ignores it */
    qk_block_q8_0 *y = dst;
    for (int64_t i = 0; i < nrows * ncols / QK; i++)
        qk_st_f16(y[i].d, q8_block(src + i * QK, y[i].qs));
    return (size_t)nrows * (size_t)(ncols / QK) * sizeof(qk_block_q8_0);
}

const qk_kernel_ops qk_ops_legacy[] = {
    {QK_Q4_0, q4_0_to_float, q4_0_quantize, NULL, q4_0_vec_dot},
    {QK_Q4_1, q4_1_to_float, q4_1_quantize, NULL, q4_1_vec_dot},
    {QK_Q5_0, q5_0_to_float, q5_0_quantize, NULL, q5_0_vec_dot},
    {QK_Q5_1, q5_1_to_float, q5_1_quantize, NULL, q5_1_vec_dot},
    {QK_Q8_0, q8_0_to_float, q8_0_quantize, q8_0_from_float, q8_0_vec_dot},
    {QK_Q8_1, q8_1_to_float, NULL, q8_1_from_float, NULL},
    {.id = -1},
};
