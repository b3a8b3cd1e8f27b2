/* kquants.c - the K-quant super-block formats Q2_K Q3_K Q4_K Q5_K Q6_K and
 * the activation format Q8_K (256 elements per block).
 *
 * Encoders equal ggml_quantize_chunk (llama.cpp d32676d, ggml-quants.c):
 * without an importance matrix quantize_row_*_ref, with one
 * quantize_row_*_impl.  Both find per-sub-block scales (and mins), quantize
 * those to 4, 6 or 8 bits under an fp16 super-block scale, then requantize
 * every element against the stored (rounded) scales.  Dot products against
 * Q8_K are ggml-cpu/quants.c's ggml_vec_dot_*_q8_K_generic, including their
 * eight float accumulation lanes (see lanes_dot).
 *
 *   Q2_K  scales[16] qs[64] d dmin     x = d*(sc&15)*q - dmin*(sc>>4), q 0..3
 *   Q3_K  hmask[32] qs[64] scales[12] d  x = d*(sc-32)*(q-4), q 0..7, sc 6-bit
 *   Q4_K  d dmin scales[12] qs[128]    x = d*sc*q - dmin*m, q 0..15, sc,m 6-bit
 *   Q5_K  d dmin scales[12] qh[32] qs[128]   as Q4_K with q 0..31
 *   Q6_K  ql[128] qh[64] scales[16]:i8 d     x = d*sc*(q-32), q 0..63
 *   Q8_K  d:f32 qs[256]:i8 bsums[16]:i16     x = d*q
 * Q2_K/Q3_K/Q6_K have 16 sub-blocks of 16, Q4_K/Q5_K 8 of 32.
 */
#include <math.h>

#include "kernels/quant_common.h"
#include "kernels/types.h"

#define QK_K_BLOCK 256

typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint8_t d[2]; uint8_t dmin[2]; } blk_q2_K;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint8_t d[2]; } blk_q3_K;
typedef struct { uint8_t d[2]; uint8_t dmin[2]; uint8_t scales[12]; uint8_t qs[128]; } blk_q4_K;
typedef struct { uint8_t d[2]; uint8_t dmin[2]; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } blk_q5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint8_t d[2]; } blk_q6_K;
_Static_assert(sizeof(blk_q2_K) == 84, "q2_K");
_Static_assert(sizeof(blk_q3_K) == 110, "q3_K");
_Static_assert(sizeof(blk_q4_K) == 144, "q4_K");
_Static_assert(sizeof(blk_q5_K) == 176, "q5_K");
_Static_assert(sizeof(blk_q6_K) == 210, "q6_K");

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- shared pieces ------------------------------------------------------ */

/* Sum of x^2 over a super-block. */
static float sum_sq(const float *x)
{
    float s = 0;
    for (int j = 0; j < QK_K_BLOCK; j++)
        s += x[j] * x[j];
    return s;
}

/* Importance-weighted element weights qw[l] * sqrt(sigma2 + x[l]^2). */
static void imatrix_weights(float *w, int n, const float *qw, const float *x, float sigma2)
{
    for (int l = 0; l < n; l++)
        w[l] = qw[l] * sqrtf(sigma2 + x[l] * x[l]);
}

static float sum_of(const float *w, int n)
{
    float s = 0;
    for (int l = 0; l < n; l++)
        s += w[l];
    return s;
}

/* 2-bit levels L[256] into qs[64]: byte 32*k + l holds elements
 * 128*k + l + 32*s at bits 2*s (Q2_K and the low bits of Q3_K). */
static void pack_2bit(uint8_t *qs, const uint8_t *L)
{
    for (int j = 0; j < QK_K_BLOCK; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
}

/* The 2-bit fields of qs[64] in element order (inverse of pack_2bit). */
static void unpack_2bit(const uint8_t *qs, int8_t *a)
{
    for (int h = 0; h < 2; h++, qs += 32)
        for (int s = 0; s < 4; s++, a += 32)
            for (int l = 0; l < 32; l++)
                a[l] = (int8_t)((qs[l] >> (2 * s)) & 3);
}

/* Dot kernels of ggml (q3_K..q6_K generic) sum integer products in eight
 * int32 lanes, element e into lane e % 8, then per block
 * sums[l] += d * lane[l] in float, and add the eight sums at the end.  This
 * accumulates one block's lanes into sums[]. */
static void lanes_accumulate(float sums[8], float d, const int32_t lane[8])
{
    for (int l = 0; l < 8; l++)
        sums[l] += d * lane[l];
}

/* The integer lanes of one block: lane[l] = sum over groups g of 8 elements
 * of scale[g / gpb] * q8[8g + l] * a[8g + l], gpb = groups per scale. */
static void lanes_block(int32_t lane[8], const int8_t *q8, const int8_t *a, const int *scale, int gpb)
{
    for (int l = 0; l < 8; l++)
        lane[l] = 0;
    for (int g = 0; g < QK_K_BLOCK / 8; g++) {
        const int sc = scale[g / gpb];
        for (int l = 0; l < 8; l++)
            lane[l] += sc * (q8[8 * g + l] * a[8 * g + l]);
    }
}

/* ---- Q8_K (activations) ------------------------------------------------- */

/* quantize_row_q8_K_ref (kernels/actvar.c, unperturbed). */
static void q8_K_from_float(const float *x, void *dst, int64_t n) { qk_q8_K_act_row(x, dst, n, 0, false); }

static void q8_K_to_float(const void *src, float *dst, int64_t n)
{
    const qk_block_q8_K *b = src;
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++) {
        const float d = qk_ld_f32(b[i].d);
        for (int j = 0; j < QK_K_BLOCK; j++)
            *dst++ = d * b[i].qs[j];
    }
}

/* ---- Q2_K --------------------------------------------------------------- */

/* Requantize against the stored scales (sc & 15 under d, sc >> 4 under
 * dmin); sub-blocks whose scale is zero keep their search levels. */
static void q2_K_requantize(const float *x, const blk_q2_K *y, uint8_t *L, float dm, float mm)
{
    for (int j = 0; j < 16; j++) {
        const float d = dm * (y->scales[j] & 0xF);
        if (!d)
            continue;
        const float m = mm * (y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ii++)
            L[16 * j + ii] = (uint8_t)clampi(qk_nearest_int((x[16 * j + ii] + m) / d), 0, 3);
    }
}

static void q2_K_block_ref(const float *x, blk_q2_K *y)
{
    uint8_t L[QK_K_BLOCK];
    float weights[QK_K_BLOCK], mins[16], scales[16];
    const float q4scale = 15.f;
    float max_scale = 0, max_min = 0;
    for (int l = 0; l < QK_K_BLOCK; l++)
        weights[l] = fabsf(x[l]);
    for (int j = 0; j < 16; j += 8)
        qk_make_qkx_quants_x8(16, 3, x + 16 * j, weights + 16 * j, L + 16 * j, scales + j, mins + j,
                              -0.5f, 0.1f, 15, true);
    for (int j = 0; j < 16; j++) {
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    if (max_scale > 0) {
        const float iscale = q4scale / max_scale;
        for (int j = 0; j < 16; j++)
            y->scales[j] = (uint8_t)qk_nearest_int(iscale * scales[j]);
        qk_st_f16(y->d, max_scale / q4scale);
    } else {
        memset(y->scales, 0, 16);
        qk_st_f16(y->d, 0.f);
    }
    if (max_min > 0) {
        const float iscale = q4scale / max_min;
        for (int j = 0; j < 16; j++)
            y->scales[j] = (uint8_t)(y->scales[j] | ((unsigned)qk_nearest_int(iscale * mins[j]) << 4));
        qk_st_f16(y->dmin, max_min / q4scale);
    } else {
        qk_st_f16(y->dmin, 0.f);
    }
    q2_K_requantize(x, y, L, qk_ld_f16(y->d), qk_ld_f16(y->dmin));
    pack_2bit(y->qs, L);
}

static void q2_K_block_imatrix(const float *x, blk_q2_K *y, const float *qw)
{
    uint8_t L[QK_K_BLOCK], Ls[16], Lm[16];
    float weight[QK_K_BLOCK], mins[16], scales[16], sw[16];
    const float sigma2 = sum_sq(x) / QK_K_BLOCK;
    for (int j = 0; j < 16; j++) {
        imatrix_weights(weight + 16 * j, 16, qw + 16 * j, x + 16 * j, sigma2);
        sw[j] = sum_of(weight + 16 * j, 16);
    }
    for (int j = 0; j < 16; j += 8)
        qk_make_qkx_quants_x8(16, 3, x + 16 * j, weight + 16 * j, L + 16 * j, scales + j, mins + j,
                              -0.9f, 0.05f, 36, false);
    qk_st_f16(y->d, qk_make_qp_quants(16, 15, scales, Ls, sw));
    qk_st_f16(y->dmin, qk_make_qp_quants(16, 15, mins, Lm, sw));
    for (int j = 0; j < 16; j++)
        y->scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
    q2_K_requantize(x, y, L, qk_ld_f16(y->d), qk_ld_f16(y->dmin));
    pack_2bit(y->qs, L);
}

static void q2_K_to_float(const void *src, float *dst, int64_t n)
{
    const blk_q2_K *b = src;
    int8_t a[QK_K_BLOCK];
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++) {
        const float d = qk_ld_f16(b[i].d), min = qk_ld_f16(b[i].dmin);
        unpack_2bit(b[i].qs, a);
        for (int j = 0; j < 16; j++, dst += 16) {
            const uint8_t sc = b[i].scales[j];
            const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
            for (int l = 0; l < 16; l++)
                dst[l] = dl * a[16 * j + l] - ml;
        }
    }
}

/* ggml_vec_dot_q2_K_q8_K_generic */
static float q2_K_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const blk_q2_K *x = vx;
    const qk_block_q8_K *y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++) {
        int summs = 0;
        for (int j = 0; j < 16; j++)
            summs += qk_q8K_bsum(&y[i], j) * (x[i].scales[j] >> 4);
        const float yd = qk_ld_f32(y[i].d);
        const float dall = yd * qk_ld_f16(x[i].d);
        const float dmin = yd * qk_ld_f16(x[i].dmin);
        int8_t a[QK_K_BLOCK];
        unpack_2bit(x[i].qs, a);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int isuml = 0;
            for (int l = 0; l < 16; l++)
                isuml += y[i].qs[16 * j + l] * a[16 * j + l];
            isum += (x[i].scales[j] & 0xF) * isuml;
        }
        sumf += dall * isum - dmin * summs;
    }
    return sumf;
}

/* ---- Q3_K --------------------------------------------------------------- */

/* 6-bit scale j (0..63, stored with +32 bias): low 4 bits in scales[0..7]
 * (nibble j/8), high 2 bits in scales[8 + j%4] at bit 2*(j/4). */
static inline int q3_scale(const uint8_t *scales, int j)
{
    int lo = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
    return lo | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

static void q3_pack_scales(uint8_t *scales, const int *l6)
{
    memset(scales, 0, 12);
    for (int j = 0; j < 16; j++) {
        int l = l6[j];
        if (j < 8)
            scales[j] = (uint8_t)(l & 0xF);
        else
            scales[j - 8] = (uint8_t)(scales[j - 8] | ((l & 0xF) << 4));
        l >>= 4;
        scales[j % 4 + 8] = (uint8_t)(scales[j % 4 + 8] | (l << (2 * (j / 4))));
    }
}

/* Requantize against the stored scales, then split levels 0..7 into the
 * high-bit mask (element e: hmask[e % 32] bit e / 32) and 2-bit qs. */
static void q3_K_finish(const float *x, blk_q3_K *y, int8_t *L)
{
    const float d_all = qk_ld_f16(y->d);
    for (int j = 0; j < 16; j++) {
        const float d = d_all * (int8_t)(q3_scale(y->scales, j) - 32);
        if (!d)
            continue;
        for (int ii = 0; ii < 16; ii++)
            L[16 * j + ii] = (int8_t)(clampi(qk_nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
    }
    memset(y->hmask, 0, 32);
    uint8_t low[QK_K_BLOCK];
    for (int e = 0; e < QK_K_BLOCK; e++) {
        int l = L[e];
        if (l > 3) {
            y->hmask[e % 32] = (uint8_t)(y->hmask[e % 32] | (1 << (e / 32)));
            l -= 4;
        }
        low[e] = (uint8_t)l;
    }
    pack_2bit(y->qs, low);
}

static void q3_K_block_ref(const float *x, blk_q3_K *y)
{
    int8_t L[QK_K_BLOCK];
    float scales[16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
        scales[j] = qk_make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
        float scale = fabsf(scales[j]);
        if (scale > amax) {
            amax = scale;
            max_scale = scales[j];
        }
    }
    if (max_scale) {
        const float iscale = -32.f / max_scale;
        int l6[16];
        for (int j = 0; j < 16; j++) /* ggml stores nearest_int in an int8_t first */
            l6[j] = clampi((int8_t)qk_nearest_int(iscale * scales[j]), -32, 31) + 32;
        q3_pack_scales(y->scales, l6);
        qk_st_f16(y->d, 1 / iscale);
    } else {
        memset(y->scales, 0, 12);
        qk_st_f16(y->d, 0.f);
    }
    q3_K_finish(x, y, L);
}

static void q3_K_block_imatrix(const float *x, blk_q3_K *y, const float *qw)
{
    int8_t L[QK_K_BLOCK], Ls[16];
    float scales[16], weight[QK_K_BLOCK], sw[16];
    const float sigma2 = 2 * sum_sq(x) / QK_K_BLOCK;
    for (int j = 0; j < 16; j++) {
        imatrix_weights(weight + 16 * j, 16, qw + 16 * j, x + 16 * j, sigma2);
        sw[j] = sum_of(weight + 16 * j, 16);
    }
    for (int j = 0; j < 16; j += 8)
        qk_make_qx_quants_x8(16, 4, x + 16 * j, L + 16 * j, weight + 16 * j, scales + j);
    const float d_block = qk_make_qx_quants(16, 32, scales, Ls, sw);
    int l6[16];
    for (int j = 0; j < 16; j++)
        l6[j] = Ls[j];
    q3_pack_scales(y->scales, l6);
    qk_st_f16(y->d, d_block);
    q3_K_finish(x, y, L);
}

/* Signed levels q - 4 (-4..3) of a Q3_K block, in element order. */
static void q3_K_levels(const blk_q3_K *b, int8_t *a)
{
    unpack_2bit(b->qs, a);
    for (int k = 0; k < 8; k++, a += 32)
        for (int l = 0; l < 32; l++)
            a[l] = (int8_t)(a[l] - ((b->hmask[l] >> k) & 1 ? 0 : 4));
}

/* The 16 scales of a Q3_K block, bias removed (-32..31). */
static void q3_K_scales(const blk_q3_K *b, int *sc)
{
    for (int j = 0; j < 16; j++)
        sc[j] = q3_scale(b->scales, j) - 32;
}

static void q3_K_to_float(const void *src, float *dst, int64_t n)
{
    const blk_q3_K *b = src;
    int8_t a[QK_K_BLOCK];
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++, dst += QK_K_BLOCK) {
        const float d_all = qk_ld_f16(b[i].d);
        int sc[16];
        q3_K_levels(&b[i], a);
        q3_K_scales(&b[i], sc);
        for (int e = 0; e < QK_K_BLOCK; e++)
            dst[e] = d_all * sc[e / 16] * a[e];
    }
}

/* ggml_vec_dot_q3_K_q8_K_generic */
static float q3_K_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const blk_q3_K *x = vx;
    const qk_block_q8_K *y = vy;
    float sums[8] = {0};
    int8_t a[QK_K_BLOCK];
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++) {
        int sc[16];
        int32_t lane[8];
        q3_K_levels(&x[i], a);
        q3_K_scales(&x[i], sc);
        lanes_block(lane, y[i].qs, a, sc, 2);
        lanes_accumulate(sums, qk_ld_f16(x[i].d) * qk_ld_f32(y[i].d), lane);
    }
    float sumf = 0;
    for (int l = 0; l < 8; l++)
        sumf += sums[l];
    return sumf;
}

/* ---- Q4_K and Q5_K: shared scale handling --------------------------------- */

/* Pack eight 6-bit scales and mins into 12 bytes (read by qk_get_scale_min_k4). */
static void k4_pack_scales(uint8_t *s, const uint8_t *ls, const uint8_t *lm)
{
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            s[j - 4] = (uint8_t)(s[j - 4] | ((ls[j] >> 4) << 6));
            s[j] = (uint8_t)(s[j] | ((lm[j] >> 4) << 6));
        }
    }
}

/* The _ref scale search of Q4_K (nmax 15) and Q5_K (nmax 31): per 32-element
 * sub-block a make_qkx2_quants fit weighted by rms + |x|, then scales and
 * mins quantized to 6 bits under d = max/63, dmin = max_min/63. */
static void k4_scales_ref(const float *x, uint8_t *L, int nmax, float rmin, int nstep,
                          uint8_t *packed, uint8_t *d, uint8_t *dmin)
{
    uint8_t ls[8], lm[8];
    float weights[QK_K_BLOCK], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            weights[32 * j + l] = av_x + fabsf(x[32 * j + l]);
    }
    qk_make_qkx_quants_x8(32, nmax, x, weights, L, scales, mins, rmin, 0.1f, nstep, false);
    for (int j = 0; j < 8; j++) {
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        uint8_t s = (uint8_t)qk_nearest_int(inv_scale * scales[j]);
        uint8_t m = (uint8_t)qk_nearest_int(inv_min * mins[j]);
        ls[j] = s < 63 ? s : 63;
        lm[j] = m < 63 ? m : 63;
    }
    k4_pack_scales(packed, ls, lm);
    qk_st_f16(d, max_scale / 63.f);
    qk_st_f16(dmin, max_min / 63.f);
}

/* The _impl (importance) scale search of Q4_K and Q5_K: make_qkx3_quants per
 * sub-block, then make_qp_quants for the 6-bit scales and mins.  ggml clamps
 * the 6-bit values to 63 for Q5_K only (clamp63). */
static void k4_scales_imatrix(const float *x, const float *qw, uint8_t *L, int nmax, bool clamp63,
                              uint8_t *packed, uint8_t *d, uint8_t *dmin)
{
    uint8_t Ls[8], Lm[8];
    float weights[QK_K_BLOCK], sw[8], mins[8], scales[8];
    const float sigma2 = 2 * sum_sq(x) / QK_K_BLOCK;
    for (int j = 0; j < 8; j++) {
        imatrix_weights(weights + 32 * j, 32, qw + 32 * j, x + 32 * j, sigma2);
        sw[j] = sum_of(weights + 32 * j, 32);
    }
    qk_make_qkx_quants_x8(32, nmax, x, weights, L, scales, mins, -0.9f, 0.05f, 36, false);
    const float d_block = qk_make_qp_quants(8, 63, scales, Ls, sw);
    const float m_block = qk_make_qp_quants(8, 63, mins, Lm, sw);
    if (clamp63) {
        for (int j = 0; j < 8; j++) {
            Ls[j] = Ls[j] < 63 ? Ls[j] : 63;
            Lm[j] = Lm[j] < 63 ? Lm[j] : 63;
        }
    }
    k4_pack_scales(packed, Ls, Lm);
    qk_st_f16(d, d_block);
    qk_st_f16(dmin, m_block);
}

/* Requantize each element against the stored 6-bit scale and min. */
static void k4_requantize(const float *x, const uint8_t *packed, float d_all, float dmin_all,
                          int nmax, uint8_t *L)
{
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        qk_get_scale_min_k4(j, packed, &sc, &m);
        const float d = d_all * sc;
        if (!d)
            continue;
        const float dm = dmin_all * m;
        for (int ii = 0; ii < 32; ii++)
            L[32 * j + ii] = (uint8_t)clampi(qk_nearest_int((x[32 * j + ii] + dm) / d), 0, nmax);
    }
}

/* Scales and mins of the eight sub-blocks as ggml's dot kernels unpack them. */
static void k4_unpack(const uint8_t *packed, uint8_t sc[8], uint8_t mn[8])
{
    for (int j = 0; j < 8; j++)
        qk_get_scale_min_k4(j, packed, &sc[j], &mn[j]);
}

/* Shared tail of ggml_vec_dot_q{4,5}_K_q8_K_generic for one block: levels
 * a[256] (0..nmax) against y; updates sums[] and sumf. */
static void k4_block_dot(const int8_t *a, const uint8_t *packed, float xd, float xdmin,
                         const qk_block_q8_K *y, float sums[8], float *sumf)
{
    uint8_t sc[8], mn[8];
    k4_unpack(packed, sc, mn);
    int sumi = 0;
    for (int j = 0; j < 16; j++)
        sumi += qk_q8K_bsum(y, j) * mn[j / 2];
    int scale[8];
    for (int j = 0; j < 8; j++)
        scale[j] = sc[j];
    int32_t lane[8];
    lanes_block(lane, y->qs, a, scale, 4);
    const float yd = qk_ld_f32(y->d);
    lanes_accumulate(sums, xd * yd, lane);
    *sumf -= xdmin * yd * sumi;
}

static float lanes_total(float sumf, const float sums[8])
{
    for (int l = 0; l < 8; l++)
        sumf += sums[l];
    return sumf;
}

/* ---- Q4_K ----------------------------------------------------------------- */

/* Element e of a 64-element chunk c: low nibble of qs[32c + e%32] for the
 * first 32, high nibble for the next 32. */
static void q4_K_pack(uint8_t *qs, const uint8_t *L)
{
    for (int j = 0; j < QK_K_BLOCK; j += 64, qs += 32)
        for (int l = 0; l < 32; l++)
            qs[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

/* The nibbles of qs[128] in element order (inverse of q4_K_pack). */
static void unpack_nibbles(const uint8_t *qs, int8_t *a)
{
    for (int c = 0; c < 4; c++, qs += 32, a += 64)
        for (int l = 0; l < 32; l++) {
            a[l] = (int8_t)(qs[l] & 0xF);
            a[l + 32] = (int8_t)(qs[l] >> 4);
        }
}

static void q4_K_block(const float *x, blk_q4_K *y, const float *qw)
{
    uint8_t L[QK_K_BLOCK];
    if (qw)
        k4_scales_imatrix(x, qw, L, 15, false, y->scales, y->d, y->dmin);
    else
        k4_scales_ref(x, L, 15, -1.f, 20, y->scales, y->d, y->dmin);
    k4_requantize(x, y->scales, qk_ld_f16(y->d), qk_ld_f16(y->dmin), 15, L);
    q4_K_pack(y->qs, L);
}

static void q4_K_levels(const blk_q4_K *b, int8_t *a) { unpack_nibbles(b->qs, a); }

static void q4_K_to_float(const void *src, float *dst, int64_t n)
{
    const blk_q4_K *b = src;
    int8_t a[QK_K_BLOCK];
    uint8_t sc[8], mn[8];
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++, dst += QK_K_BLOCK) {
        const float d = qk_ld_f16(b[i].d), min = qk_ld_f16(b[i].dmin);
        q4_K_levels(&b[i], a);
        k4_unpack(b[i].scales, sc, mn);
        for (int j = 0; j < 8; j++) {
            const float d1 = d * sc[j], m1 = min * mn[j];
            for (int l = 0; l < 32; l++)
                dst[32 * j + l] = d1 * a[32 * j + l] - m1;
        }
    }
}

/* ggml_vec_dot_q4_K_q8_K_generic */
static float q4_K_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const blk_q4_K *x = vx;
    const qk_block_q8_K *y = vy;
    float sums[8] = {0}, sumf = 0;
    int8_t a[QK_K_BLOCK];
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++) {
        q4_K_levels(&x[i], a);
        k4_block_dot(a, x[i].scales, qk_ld_f16(x[i].d), qk_ld_f16(x[i].dmin), &y[i], sums, &sumf);
    }
    return lanes_total(sumf, sums);
}

/* ---- Q5_K ----------------------------------------------------------------- */

/* Low nibbles as Q4_K; bit 4 of element e in qh[e % 32] at bit e / 32. */
static void q5_K_pack(uint8_t *qs, uint8_t *qh, const uint8_t *L)
{
    uint8_t low[QK_K_BLOCK];
    memset(qh, 0, 32);
    for (int e = 0; e < QK_K_BLOCK; e++) {
        low[e] = L[e] & 0xF;
        if (L[e] > 15)
            qh[e % 32] = (uint8_t)(qh[e % 32] | (1 << (e / 32)));
    }
    q4_K_pack(qs, low);
}

static void q5_K_block(const float *x, blk_q5_K *y, const float *qw)
{
    uint8_t L[QK_K_BLOCK];
    if (qw)
        k4_scales_imatrix(x, qw, L, 31, true, y->scales, y->d, y->dmin);
    else
        k4_scales_ref(x, L, 31, -0.5f, 15, y->scales, y->d, y->dmin);
    k4_requantize(x, y->scales, qk_ld_f16(y->d), qk_ld_f16(y->dmin), 31, L);
    q5_K_pack(y->qs, y->qh, L);
}

static void q5_K_levels(const blk_q5_K *b, int8_t *a)
{
    unpack_nibbles(b->qs, a);
    for (int k = 0; k < 8; k++, a += 32)
        for (int l = 0; l < 32; l++)
            a[l] = (int8_t)(a[l] + ((b->qh[l] >> k) & 1 ? 16 : 0));
}

static void q5_K_to_float(const void *src, float *dst, int64_t n)
{
    const blk_q5_K *b = src;
    int8_t a[QK_K_BLOCK];
    uint8_t sc[8], mn[8];
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++, dst += QK_K_BLOCK) {
        const float d = qk_ld_f16(b[i].d), min = qk_ld_f16(b[i].dmin);
        q5_K_levels(&b[i], a);
        k4_unpack(b[i].scales, sc, mn);
        for (int j = 0; j < 8; j++) {
            const float d1 = d * sc[j], m1 = min * mn[j];
            for (int l = 0; l < 32; l++)
                dst[32 * j + l] = d1 * a[32 * j + l] - m1;
        }
    }
}

/* ggml_vec_dot_q5_K_q8_K_generic */
static float q5_K_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const blk_q5_K *x = vx;
    const qk_block_q8_K *y = vy;
    float sums[8] = {0}, sumf = 0;
    int8_t a[QK_K_BLOCK];
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++) {
        q5_K_levels(&x[i], a);
        k4_block_dot(a, x[i].scales, qk_ld_f16(x[i].d), qk_ld_f16(x[i].dmin), &y[i], sums, &sumf);
    }
    return lanes_total(sumf, sums);
}

/* ---- Q6_K ----------------------------------------------------------------- */

/* Element e = 128*h + 32*s + l (s 0..3, l 0..31): low nibble in
 * ql[64h + l + 32*(s&1)] (high half of the byte for s >= 2), top two bits in
 * qh[32h + l] at bit 2*s. */
static void q6_K_pack(uint8_t *ql, uint8_t *qh, const int8_t *L)
{
    for (int j = 0; j < QK_K_BLOCK; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
            ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
            ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
            qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
    }
}

static void q6_K_block(const float *x, blk_q6_K *y, const float *qw)
{
    int8_t L[QK_K_BLOCK];
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    /* ggml's _impl passes the importance weights directly; _ref uses x^2 */
    for (int ib = 0; ib < 16; ib += 8)
        qk_make_qx_quants_x8(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + 16 * ib : NULL, scales + ib);
    for (int ib = 0; ib < 16; ib++) {
        const float abs_scale = fabsf(scales[ib]);
        if (abs_scale > max_abs_scale) {
            max_abs_scale = abs_scale;
            max_scale = scales[ib];
        }
    }
    if (max_abs_scale < QK_GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -128.f / max_scale;
    qk_st_f16(y->d, 1 / iscale);
    for (int ib = 0; ib < 16; ib++) {
        int s = qk_nearest_int(iscale * scales[ib]);
        y->scales[ib] = (int8_t)(s < 127 ? s : 127);
    }
    const float d_all = qk_ld_f16(y->d);
    for (int j = 0; j < 16; j++) {
        const float d = d_all * y->scales[j];
        if (!d)
            continue;
        for (int ii = 0; ii < 16; ii++)
            L[16 * j + ii] = (int8_t)(clampi(qk_nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
    }
    q6_K_pack(y->ql, y->qh, L);
}

/* Signed levels q - 32 (-32..31) of a Q6_K block, in element order. */
static void q6_K_levels(const blk_q6_K *b, int8_t *a)
{
    const uint8_t *ql = b->ql, *qh = b->qh;
    for (int h = 0; h < 2; h++, ql += 64, qh += 32, a += 128)
        for (int l = 0; l < 32; l++) {
            a[l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            a[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            a[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            a[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
}

static void q6_K_to_float(const void *src, float *dst, int64_t n)
{
    const blk_q6_K *b = src;
    int8_t a[QK_K_BLOCK];
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++, dst += QK_K_BLOCK) {
        const float d = qk_ld_f16(b[i].d);
        q6_K_levels(&b[i], a);
        for (int e = 0; e < QK_K_BLOCK; e++)
            dst[e] = d * b[i].scales[e / 16] * a[e];
    }
}

/* ggml_vec_dot_q6_K_q8_K_generic */
static float q6_K_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const blk_q6_K *x = vx;
    const qk_block_q8_K *y = vy;
    float sums[8] = {0};
    int8_t a[QK_K_BLOCK];
    for (int64_t i = 0; i < n / QK_K_BLOCK; i++) {
        int sc[16];
        int32_t lane[8];
        for (int j = 0; j < 16; j++)
            sc[j] = x[i].scales[j];
        q6_K_levels(&x[i], a);
        lanes_block(lane, y[i].qs, a, sc, 2);
        lanes_accumulate(sums, qk_ld_f16(x[i].d) * qk_ld_f32(y[i].d), lane);
    }
    return lanes_total(0, sums);
}

/* ---- row encoders (qk_quantize_fn) ------------------------------------------ */

/* Rows of whole super-blocks; with an importance matrix, block i of a row
 * uses imatrix[256*i ...]. */
#define ROW_ENCODER(name, blk, block_ref, block_imatrix)                                        \
    static size_t name(const float *src, void *dst, int64_t nrows, int64_t ncols,               \
                       const float *imatrix)                                                    \
    {                                                                                           \
        const int64_t nb = ncols / QK_K_BLOCK;                                                  \
        blk *y = dst;                                                                           \
        for (int64_t r = 0; r < nrows; r++)                                                     \
            for (int64_t i = 0; i < nb; i++, y++) {                                             \
                const float *x = src + r * ncols + i * QK_K_BLOCK;                              \
                if (imatrix)                                                                    \
                    block_imatrix(x, y, imatrix + i * QK_K_BLOCK);                              \
                else                                                                            \
                    block_ref(x, y);                                                            \
            }                                                                                   \
        return (size_t)nrows * (size_t)nb * sizeof(blk);                                        \
    }

static void q4_K_block_ref(const float *x, blk_q4_K *y) { q4_K_block(x, y, NULL); }
static void q5_K_block_ref(const float *x, blk_q5_K *y) { q5_K_block(x, y, NULL); }
static void q6_K_block_ref(const float *x, blk_q6_K *y) { q6_K_block(x, y, NULL); }

ROW_ENCODER(q2_K_quantize, blk_q2_K, q2_K_block_ref, q2_K_block_imatrix)
ROW_ENCODER(q3_K_quantize, blk_q3_K, q3_K_block_ref, q3_K_block_imatrix)
ROW_ENCODER(q4_K_quantize, blk_q4_K, q4_K_block_ref, q4_K_block)
ROW_ENCODER(q5_K_quantize, blk_q5_K, q5_K_block_ref, q5_K_block)
ROW_ENCODER(q6_K_quantize, blk_q6_K, q6_K_block_ref, q6_K_block)

const qk_kernel_ops qk_ops_kquants[] = {
    {QK_Q2_K, q2_K_to_float, q2_K_quantize, NULL, q2_K_vec_dot},
    {QK_Q3_K, q3_K_to_float, q3_K_quantize, NULL, q3_K_vec_dot},
    {QK_Q4_K, q4_K_to_float, q4_K_quantize, NULL, q4_K_vec_dot},
    {QK_Q5_K, q5_K_to_float, q5_K_quantize, NULL, q5_K_vec_dot},
    {QK_Q6_K, q6_K_to_float, q6_K_quantize, NULL, q6_K_vec_dot},
    {QK_Q8_K, q8_K_to_float, NULL, q8_K_from_float, NULL},
    {.id = -1},
};
