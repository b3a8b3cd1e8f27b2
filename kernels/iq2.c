/* iq2.c - IQ2_XXS, IQ2_XS and IQ2_S: decode, encode and dot product against
 * Q8_K, bit-exact with ggml at llama.cpp d32676d (dequantize_row_iq2_*,
 * quantize_iq2_* in ggml-quants.c, ggml_vec_dot_iq2_*_q8_K_generic in
 * ggml-cpu/quants.c).
 *
 * Block layouts (256 weights, little-endian; d is an fp16 super-scale):
 *   IQ2_XXS (66 B): d, then 8 x {4 grid bytes, u32: 4 x 7 sign bits, 4-bit scale << 28}
 *   IQ2_XS  (74 B): d, 32 x u16 (9-bit grid index | 7 sign bits << 9), 8 scale bytes (2 nibbles)
 *   IQ2_S   (82 B): d, 32 grid low bytes, 32 sign bytes, 8 qh bytes (4 x 2 high index
 *                   bits), 8 scale bytes
 * A group of 8 weights is grid[index][j] * sign_j * db with db = d * (0.5 + s) / 4
 * (s the 4-bit scale of its 32 (XXS) or 16 (XS, S) weights).
 *
 * The encoders keep every float operation of ggml in the same order and
 * precision (float, no double), since the chosen grid points depend on it. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/iq2_grids.h"
#include "kernels/quant_common.h"
#include "kernels/types.h"

#define XXS_BYTES 66
#define XS_BYTES 74
#define S_BYTES 82

#define GROUP_MAX_EPS_IQ2_S 1e-8f /* ggml's; the others use QK_GROUP_MAX_EPS */
#define KMAXQ 3 /* levels 0..KMAXQ-1 on the grid; coordinates 2l+1 */

/* --- little helpers ------------------------------------------------------ */

static inline uint8_t grid_byte(uint64_t g, int j) { return (uint8_t)(g >> 8 * j); }
static inline float maxf(float a, float b) { return a > b ? a : b; } /* ggml's MAX, NaN included */
static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* --- decode ---------------------------------------------------------------- */

/* y[0..7] = db * grid magnitudes with signs (bit j of signs: negative). */
static void put_group(float *y, float db, uint64_t g, uint8_t signs)
{
    for (int j = 0; j < 8; j++)
        y[j] = db * (float)grid_byte(g, j) * (signs & qk_kmask_iq2xs[j] ? -1.f : 1.f);
}

static void to_float_iq2_xxs(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += XXS_BYTES) {
        const float d = qk_ld_f16(b);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t *q = b + 2 + 8 * ib;
            uint32_t aux = qk_ld_u32(q + 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8)
                put_group(y, db, qk_iq2xxs_grid[q[l]], qk_ksigns_iq2xs[(aux >> 7 * l) & 127]);
        }
    }
}

static void to_float_iq2_xs(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += XS_BYTES) {
        const float d = qk_ld_f16(b);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t sc = b[66 + ib];
            const float db[2] = {d * (0.5f + (float)(sc & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(sc >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                uint16_t q = qk_ld_u16(b + 2 + 2 * (4 * ib + l));
                put_group(y, db[l / 2], qk_iq2xs_grid[q & 511], qk_ksigns_iq2xs[q >> 9]);
            }
        }
    }
}

/* Grid index of group l (0..3) of 32-weight block ib of an IQ2_S block. */
static inline int iq2s_index(const uint8_t *b, int ib, int l)
{
    return b[2 + 4 * ib + l] | ((b[66 + ib] << (8 - 2 * l)) & 0x300);
}

static void to_float_iq2_s(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += S_BYTES) {
        const float d = qk_ld_f16(b);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t sc = b[74 + ib];
            const float db[2] = {d * (0.5f + (float)(sc & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(sc >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8)
                put_group(y, db[l / 2], qk_iq2s_grid[iq2s_index(b, ib, l)], b[34 + 4 * ib + l]);
        }
    }
}

/* --- dot product against Q8_K ------------------------------------------------ */

/* sum_j grid_j * q8_j * sign_j over one group of 8. */
static int dot_group(uint64_t g, uint8_t signs, const int8_t *q8)
{
    int s = 0;
    for (int j = 0; j < 8; j++)
        s += grid_byte(g, j) * q8[j] * (signs & qk_kmask_iq2xs[j] ? -1 : 1);
    return s;
}

static float vec_dot_iq2_xxs(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_K *y = vy;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / QK_K; i++, x += XXS_BYTES, y++) {
        const float d = qk_ld_f16(x) * qk_ld_f32(y->d);
        const int8_t *q8 = y->qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t *q = x + 2 + 8 * ib;
            uint32_t aux = qk_ld_u32(q + 4);
            int32_t sumi = 0;
            for (int l = 0; l < 4; l++, q8 += 8)
                sumi += dot_group(qk_iq2xxs_grid[q[l]], qk_ksigns_iq2xs[(aux >> 7 * l) & 127], q8);
            bsum += sumi * (int32_t)(2 * (aux >> 28) + 1);
        }
        sumf += d * (float)bsum;
    }
    return 0.125f * sumf;
}

static float vec_dot_iq2_xs(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_K *y = vy;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / QK_K; i++, x += XS_BYTES, y++) {
        const float d = qk_ld_f16(x) * qk_ld_f32(y->d);
        const int8_t *q8 = y->qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t sc = x[66 + ib];
            for (int h = 0; h < 2; h++) {
                int32_t sumi = 0;
                for (int l = 2 * h; l < 2 * h + 2; l++, q8 += 8) {
                    uint16_t q = qk_ld_u16(x + 2 + 2 * (4 * ib + l));
                    sumi += dot_group(qk_iq2xs_grid[q & 511], qk_ksigns_iq2xs[q >> 9], q8);
                }
                bsum += sumi * (2 * ((sc >> 4 * h) & 0xf) + 1);
            }
        }
        sumf += d * (float)bsum;
    }
    return 0.125f * sumf;
}

static float vec_dot_iq2_s(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_K *y = vy;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / QK_K; i++, x += S_BYTES, y++) {
        const float d = qk_ld_f16(x) * qk_ld_f32(y->d);
        const int8_t *q8 = y->qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t sc = x[74 + ib];
            int32_t sumi[2] = {0, 0};
            for (int l = 0; l < 4; l++, q8 += 8)
                sumi[l / 2] += dot_group(qk_iq2s_grid[iq2s_index(x, ib, l)], x[34 + 4 * ib + l], q8);
            bsum += (1 + 2 * (sc & 0xf)) * sumi[0] + (1 + 2 * (sc >> 4)) * sumi[1];
        }
        sumf += d * (float)bsum;
    }
    return 0.125f * sumf;
}

/* --- encode: shared steps -------------------------------------------------- */

/* ggml's iq2_find_best_neighbour: among the listed neighbours of an off-grid
 * group, the point minimising sum w_i (scale*q_i - x_i)^2 (first wins ties);
 * writes its levels to L. */
static void best_neighbour(const qk_iq2_search *s, const uint16_t *nb, const float *xval,
                          const float *w, float scale, int8_t *L)
{
    float best_d2 = FLT_MAX;
    int best = nb[1]; /* ggml asserts some point wins; only NaN input gets none */
    for (int j = 1; j <= nb[0]; j++) {
        const int8_t *pg = s->pos[nb[j]];
        float d2 = 0;
        for (int i = 0; i < 8; i++) {
            float diff = scale * (float)pg[i] - xval[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2)
            best_d2 = d2, best = nb[j];
    }
    for (int i = 0; i < 8; i++)
        L[i] = (int8_t)((s->pos[best][i] - 1) / 2);
}

static inline unsigned pack_levels(const int8_t *L)
{
    unsigned u = 0;
    for (int i = 0; i < 8; i++)
        u |= (unsigned)(L[i] & 3) << 2 * i;
    return u;
}

/* Levels of the 8-value groups k of xval with bit k set in `groups`, at
 * inverse scale id: qk_nearest_int(0.5*(id*x - 1)) clamped to 0..KMAXQ-1, and
 * when that is off the grid, the best neighbour at `scale`.  Returns the
 * groups that were off the grid. */
static unsigned snap_groups(const qk_iq2_search *s, unsigned groups, const float *xval,
                            const float *waux, float id, float scale, int8_t *L)
{
    unsigned off = 0;
    for (int k = 0; groups >> k; k++) {
        if (!(groups >> k & 1))
            continue;
        for (int i = 0; i < 8; i++)
            L[8 * k + i] = (int8_t)clampi(qk_nearest_int(0.5f * (id * xval[8 * k + i] - 1)), 0, KMAXQ - 1);
        int32_t m = s->map[pack_levels(L + 8 * k)];
        if (m < 0) {
            off |= 1u << k;
            best_neighbour(s, s->neighbours - m - 1, xval + 8 * k, waux + 8 * k, scale, L + 8 * k);
        }
    }
    return off;
}

/* Weighted fit of xval by the grid coordinates 2L+1. */
static void fit(int n, const float *w, const float *xval, const int8_t *L, float *sumqx, float *sumq2)
{
    float sx = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        float q = (float)(2 * L[i] + 1);
        sx += w[i] * xval[i] * q;
        s2 += w[i] * q * q;
    }
    *sumqx = sx, *sumq2 = s2;
}

/* Grid index of a group's levels (final packing).  ggml aborts if a level
 * set is off the grid, which finite input never reaches; NaN input can, and
 * then gets point 0. */
static int grid_index(const qk_iq2_search *s, const int8_t *L)
{
    unsigned u = pack_levels(L);
    int32_t m = u < QK_IQ2_MAP_SIZE ? s->map[u] : -1;
    return m >= 0 ? m : 0;
}

/* Magnitudes and signs of one 8-value group.  With `even` (IQ2_XXS, IQ2_XS
 * store 7 sign bits, the 8th is their parity): an odd count of negatives
 * keeps the least important value (smallest w*x*x, first on ties) with its
 * wrong sign, i.e. negative in xval.  Returns the sign byte. */
static uint8_t group_signs(const float *xb, const float *w, float *xval, bool even)
{
    int nflip = 0;
    uint8_t s = 0;
    for (int i = 0; i < 8; i++) {
        if (xb[i] >= 0) {
            xval[i] = xb[i];
        } else {
            xval[i] = -xb[i], nflip++, s |= (uint8_t)(1 << i);
        }
    }
    if (even && nflip % 2) {
        int imin = 0;
        float min = w[0] * xb[0] * xb[0];
        for (int i = 1; i < 8; i++) {
            float ax = w[i] * xb[i] * xb[i];
            if (ax < min)
                min = ax, imin = i;
        }
        xval[imin] = -xval[imin];
        s ^= (uint8_t)(1 << imin);
    }
    return even ? s & 127 : s;
}

static float sum_squares(const float *x, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    return s;
}

/* 4-bit sub-block scale of `scale` under super-scale inverse id. */
static inline int scale_nibble(float id, float scale)
{
    return clampi(qk_nearest_int(0.5f * (id * scale - 1)), 0, 15);
}

/* --- encode: IQ2_XXS (quantize_row_iq2_xxs_impl) --------------------------- */

/* One 32-weight sub-block: levels L, sign bytes and scale.  Returns false
 * when ggml skips the sub-block (all ~zero): nothing of it is packed. */
static bool xxs_sub_block(const qk_iq2_search *s, const float *xb, const float *qw, float sigma2,
                          int8_t *L, uint8_t *signs, float *out_scale)
{
    float weight[32], waux[32], xval[32];
    int8_t Laux[32];
    uint8_t Lqp[32];
    *out_scale = 0;
    for (int i = 0; i < 32; i++)
        weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    for (int i = 0; i < 32; i++)
        waux[i] = sqrtf(weight[i]);
    for (int k = 0; k < 4; k++)
        signs[k] = group_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, true);
    float max = xval[0];
    for (int i = 1; i < 32; i++)
        max = maxf(max, xval[i]);
    if (max < QK_GROUP_MAX_EPS)
        return false;
    float scale = qk_make_qp_quants(32, KMAXQ + 1, xval, Lqp, weight);
    float eff_max = scale * KMAXQ;
    if (eff_max <= 0)
        return false;
    /* try 13 inverse scales around (2*KMAXQ-1)/eff_max, keep the best fit */
    float best = 0;
    memset(L, 0, 32); /* ggml keeps make_qp_quants' levels here; none reach the output */
    for (int is = -6; is <= 6; is++) {
        float id = (2 * KMAXQ - 1 + is * 0.1f) / eff_max;
        snap_groups(s, 0xf, xval, waux, id, 1 / id, Laux);
        float sumqx, sumq2;
        fit(32, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2, best = scale * sumqx;
            memcpy(L, Laux, 32);
        }
    }
    /* re-snap every group at the fitted scale and refit */
    if (scale > 0) {
        snap_groups(s, 0xf, xval, waux, 1 / scale, scale, L);
        float sumqx, sumq2;
        fit(32, weight, xval, L, &sumqx, &sumq2);
        if (sumq2 > 0)
            scale = sumqx / sumq2;
    }
    if (scale < 0) { /* never in practice; ggml flips the scale and the signs */
        scale = -scale;
        for (int k = 0; k < 4; k++)
            signs[k] = (uint8_t)~signs[k] & 127;
    }
    *out_scale = scale;
    return true;
}

static void encode_iq2_xxs(const qk_iq2_search *s, const float *x, const float *qw, uint8_t *y)
{
    uint32_t q2[2 * (QK_K / 32)] = {0};
    float scales[QK_K / 32], max_scale = 0;
    const float sigma2 = sum_squares(x, QK_K) / QK_K;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        int8_t L[32];
        uint8_t signs[4];
        if (!xxs_sub_block(s, x + 32 * ib, qw + 32 * ib, sigma2, L, signs, &scales[ib]))
            continue;
        for (int k = 0; k < 4; k++) {
            q2[2 * ib] |= (uint32_t)grid_index(s, L + 8 * k) << 8 * k;
            q2[2 * ib + 1] |= (uint32_t)signs[k] << 7 * k;
        }
        max_scale = maxf(max_scale, scales[ib]);
    }
    memset(y, 0, XXS_BYTES);
    qk_st_u16(y, qk_f32_to_f16(0.f));
    if (!max_scale)
        return;
    float d = max_scale / 31;
    qk_st_u16(y, qk_f32_to_f16(d));
    float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        q2[2 * ib + 1] |= (uint32_t)scale_nibble(id, scales[ib]) << 28;
        qk_st_u32(y + 2 + 8 * ib, q2[2 * ib]);
        qk_st_u32(y + 6 + 8 * ib, q2[2 * ib + 1]);
    }
}

/* --- encode: IQ2_XS and IQ2_S (quantize_row_iq2_xs_impl, _iq2_s_impl) ------ */

/* One 16-weight sub-block (two groups of 8).  IQ2_XS keeps 7 sign bits per
 * group (even-parity trick), IQ2_S all 8; IQ2_S also works without an
 * importance matrix (qw NULL) and skips below a larger epsilon.  Returns
 * false when ggml skips the sub-block. */
static bool xs_sub_block(const qk_iq2_search *s, bool is_s, const float *xb, const float *qw,
                         float sigma2, int8_t *L, uint8_t *signs, float *out_scale)
{
    float weight[16], waux[16], xval[16];
    int8_t Laux[16];
    *out_scale = 0;
    if (qw) {
        for (int i = 0; i < 16; i++)
            weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    } else {
        for (int i = 0; i < 16; i++)
            weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
    }
    for (int i = 0; i < 16; i++)
        waux[i] = sqrtf(weight[i]);
    for (int k = 0; k < 2; k++)
        signs[k] = group_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, !is_s);
    float max = xval[0];
    for (int i = 1; i < 16; i++)
        max = maxf(max, xval[i]);
    memset(L, 0, 16);
    if (max < (is_s ? GROUP_MAX_EPS_IQ2_S : QK_GROUP_MAX_EPS))
        return false;
    /* try 19 inverse scales around (2*KMAXQ-1)/max, keep the best fit */
    float best = 0, scale = max / (2 * KMAXQ - 1);
    unsigned off = 0; /* groups of L that were off the grid */
    for (int is = -9; is <= 9; is++) {
        float id = (2 * KMAXQ - 1 + is * 0.1f) / max;
        unsigned off_aux = snap_groups(s, 0x3, xval, waux, id, 1 / id, Laux);
        float sumqx, sumq2;
        fit(16, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2, best = scale * sumqx;
            memcpy(L, Laux, 16);
            off = off_aux;
        }
    }
    /* re-snap the groups that were off the grid at the fitted scale, refit */
    if (off && scale > 0) {
        snap_groups(s, off, xval, waux, 1 / scale, scale, L);
        float sumqx, sumq2;
        fit(16, weight, xval, L, &sumqx, &sumq2);
        if (sumq2 > 0)
            scale = sumqx / sumq2;
    }
    if (scale < 0) { /* never in practice; ggml flips the scale and the signs */
        scale = -scale;
        for (int k = 0; k < 2; k++)
            signs[k] = is_s ? (uint8_t)~signs[k] : (uint8_t)~signs[k] & 127;
    }
    *out_scale = scale;
    return true;
}

static void encode_iq2_xs(const qk_iq2_search *s, const float *x, const float *qw, uint8_t *y)
{
    uint16_t q2[2 * (QK_K / 16)] = {0};
    float scales[QK_K / 16], max_scale = 0;
    const float sigma2 = sum_squares(x, QK_K) / QK_K;
    for (int ib = 0; ib < QK_K / 16; ib++) {
        int8_t L[16];
        uint8_t signs[2];
        if (!xs_sub_block(s, false, x + 16 * ib, qw + 16 * ib, sigma2, L, signs, &scales[ib]))
            continue;
        for (int k = 0; k < 2; k++)
            q2[2 * ib + k] = (uint16_t)(grid_index(s, L + 8 * k) | signs[k] << 9);
        max_scale = maxf(max_scale, scales[ib]);
    }
    memset(y, 0, XS_BYTES);
    qk_st_u16(y, qk_f32_to_f16(0.f));
    if (!max_scale)
        return;
    float d = max_scale / 31;
    qk_st_u16(y, qk_f32_to_f16(d));
    float id = 1 / d;
    for (int ib = 0; ib < QK_K / 16; ib++)
        y[66 + ib / 2] |= (uint8_t)(scale_nibble(id, scales[ib]) << 4 * (ib % 2));
    for (int i = 0; i < QK_K / 8; i++)
        qk_st_u16(y + 2 + 2 * i, q2[i]);
}

static void encode_iq2_s(const qk_iq2_search *s, const float *x, const float *qw, uint8_t *y)
{
    float scales[QK_K / 16], max_scale = 0;
    const float sigma2 = 2 * sum_squares(x, QK_K) / QK_K;
    memset(y, 0, S_BYTES);
    qk_st_u16(y, qk_f32_to_f16(0.f));
    for (int ib = 0; ib < QK_K / 16; ib++) {
        int8_t L[16];
        uint8_t signs[2];
        if (!xs_sub_block(s, true, x + 16 * ib, qw ? qw + 16 * ib : NULL, sigma2, L, signs,
                          &scales[ib]))
            continue;
        for (int k = 0; k < 2; k++) {
            const int i8 = 2 * ib + k, g = grid_index(s, L + 8 * k);
            y[2 + i8] = (uint8_t)(g & 255);
            y[66 + i8 / 4] |= (uint8_t)((g >> 8) << 2 * (i8 % 4));
            y[34 + i8] = signs[k];
        }
        max_scale = maxf(max_scale, scales[ib]);
    }
    if (!max_scale)
        return;
    float d = max_scale / 31;
    qk_st_u16(y, qk_f32_to_f16(d * 0.9875f));
    float id = 1 / d;
    for (int ib = 0; ib < QK_K / 16; ib++)
        y[74 + ib / 2] |= (uint8_t)(scale_nibble(id, scales[ib]) << 4 * (ib % 2));
}

/* --- rows ------------------------------------------------------------------ */

typedef void (*block_encoder)(const qk_iq2_search *, const float *, const float *, uint8_t *);

/* Encode nrows rows of ncols (a multiple of QK_K) as `type`; the importance
 * weights qw (one per column, NULL: none) repeat for every row.  Returns the
 * bytes written, 0 when the type needs qw and it is NULL or when the search
 * tables could not be built (out of memory). */
static size_t encode_rows(int type, block_encoder enc, size_t bytes, bool need_qw, const float *src,
                          void *dst, int64_t nrows, int64_t ncols, const float *qw)
{
    const qk_iq2_search *s = qk_iq2_search_get(type);
    if (!s || (need_qw && !qw) || nrows < 0 || ncols < 0 || ncols % QK_K)
        return 0;
    const int64_t nb = ncols / QK_K;
    uint8_t *y = dst;
    for (int64_t r = 0; r < nrows; r++, src += ncols)
        for (int64_t i = 0; i < nb; i++, y += bytes)
            enc(s, src + QK_K * i, qw ? qw + QK_K * i : NULL, y);
    return (size_t)nrows * (size_t)nb * bytes;
}

static size_t quantize_iq2_xxs(const float *src, void *dst, int64_t nrows, int64_t ncols,
                               const float *imatrix)
{
    return encode_rows(QK_IQ2_XXS, encode_iq2_xxs, XXS_BYTES, true, src, dst, nrows, ncols, imatrix);
}

static size_t quantize_iq2_xs(const float *src, void *dst, int64_t nrows, int64_t ncols,
                              const float *imatrix)
{
    return encode_rows(QK_IQ2_XS, encode_iq2_xs, XS_BYTES, true, src, dst, nrows, ncols, imatrix);
}

static size_t quantize_iq2_s(const float *src, void *dst, int64_t nrows, int64_t ncols,
                             const float *imatrix)
{
    return encode_rows(QK_IQ2_S, encode_iq2_s, S_BYTES, false, src, dst, nrows, ncols, imatrix);
}

const qk_kernel_ops qk_ops_iq2[] = {
    {.id = QK_IQ2_XXS, .to_float = to_float_iq2_xxs, .quantize = quantize_iq2_xxs,
     .vec_dot = vec_dot_iq2_xxs},
    {.id = QK_IQ2_XS, .to_float = to_float_iq2_xs, .quantize = quantize_iq2_xs,
     .vec_dot = vec_dot_iq2_xs},
    {.id = QK_IQ2_S, .to_float = to_float_iq2_s, .quantize = quantize_iq2_s,
     .vec_dot = vec_dot_iq2_s},
    {.id = -1},
};
