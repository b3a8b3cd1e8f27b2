/* grid.c - value grids and level layouts of the legacy types, the K-quants
 * and IQ4_NL/IQ4_XS (see grid.h).  The byte layouts are ggml's
 * (ggml-common.h block_*), the arithmetic that of the decoders in
 * legacy.c, kquants.c and iq4.c. */
#include "kernels/grid.h"

#include <math.h>
#include <string.h>

#include "kernels/quant_common.h"
#include "kernels/types.h"

/* ---- level tables ----------------------------------------------------------------- */

static const int8_t codebook[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

/* ---- shared layouts --------------------------------------------------------------------- */

/* 32 elements as nibbles: qs[j] = L[j] | L[j + 16] << 4 (Q4_0, Q4_1, IQ4_NL, IQ4_XS sub-blocks). */
static void get_nib32(const uint8_t *qs, uint8_t *lv)
{
    for (int j = 0; j < 16; j++) {
        lv[j] = qs[j] & 15;
        lv[j + 16] = qs[j] >> 4;
    }
}

static void set_nib32(uint8_t *qs, const uint8_t *lv)
{
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)((lv[j] & 15) | (lv[j + 16] & 15) << 4);
}

/* Q5_0 / Q5_1: nibbles plus the fifth bits of all 32 in a u32. */
static void get_q5(const uint8_t *qh, const uint8_t *qs, uint8_t *lv)
{
    const uint32_t h = qk_ld_u32(qh);
    get_nib32(qs, lv);
    for (int j = 0; j < 32; j++)
        lv[j] |= (uint8_t)(((h >> j) & 1) << 4);
}

static void set_q5(uint8_t *qh, uint8_t *qs, const uint8_t *lv)
{
    uint32_t h = 0;
    set_nib32(qs, lv);
    for (int j = 0; j < 32; j++)
        h |= (uint32_t)((lv[j] >> 4) & 1) << j;
    qk_st_u32(qh, h);
}

/* 256 two-bit fields: qs[j/4 + l] holds elements j+l, j+l+32, j+l+64, j+l+96 (j = 0, 128). */
static void get_2bit(const uint8_t *qs, uint8_t *lv)
{
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; l++)
            for (int s = 0; s < 4; s++)
                lv[j + l + 32 * s] = (qs[j / 4 + l] >> (2 * s)) & 3;
}

static void set_2bit(uint8_t *qs, const uint8_t *lv)
{
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)((lv[j + l] & 3) | (lv[j + l + 32] & 3) << 2 |
                                      (lv[j + l + 64] & 3) << 4 | (lv[j + l + 96] & 3) << 6);
}

/* 256 nibbles of Q4_K / Q5_K: qs[32 m + l] = L[64 m + l] | L[64 m + l + 32] << 4. */
static void get_nib256(const uint8_t *qs, uint8_t *lv)
{
    for (int m = 0; m < 4; m++)
        for (int l = 0; l < 32; l++) {
            lv[64 * m + l] = qs[32 * m + l] & 15;
            lv[64 * m + l + 32] = qs[32 * m + l] >> 4;
        }
}

static void set_nib256(uint8_t *qs, const uint8_t *lv)
{
    for (int m = 0; m < 4; m++)
        for (int l = 0; l < 32; l++)
            qs[32 * m + l] = (uint8_t)((lv[64 * m + l] & 15) | (lv[64 * m + l + 32] & 15) << 4);
}

/* One bit per element of 256: element 32 k + l is bit k of bits[l]. */
static void get_bits256(const uint8_t *bits, uint8_t *lv, int shift)
{
    for (int k = 0; k < 8; k++)
        for (int l = 0; l < 32; l++)
            lv[32 * k + l] |= (uint8_t)(((bits[l] >> k) & 1) << shift);
}

static void set_bits256(uint8_t *bits, const uint8_t *lv, int shift)
{
    memset(bits, 0, 32);
    for (int k = 0; k < 8; k++)
        for (int l = 0; l < 32; l++)
            bits[l] |= (uint8_t)(((lv[32 * k + l] >> shift) & 1) << k);
}

/* ---- legacy ------------------------------------------------------------------------------ */

static void const_ab(float *a, float *b, int n, float av, float bv)
{
    for (int i = 0; i < n; i++)
        a[i] = av, b[i] = bv;
}

static void q4_0_affine(const uint8_t *k, float *a, float *b) { const_ab(a, b, 32, qk_ld_f16(k), 0.0f); }
static void q4_0_get(const uint8_t *k, uint8_t *lv) { get_nib32(k + 2, lv); }
static void q4_0_set(uint8_t *k, const uint8_t *lv) { set_nib32(k + 2, lv); }

static void q4_1_affine(const uint8_t *k, float *a, float *b) { const_ab(a, b, 32, qk_ld_f16(k), qk_ld_f16(k + 2)); }
static void q4_1_get(const uint8_t *k, uint8_t *lv) { get_nib32(k + 4, lv); }
static void q4_1_set(uint8_t *k, const uint8_t *lv) { set_nib32(k + 4, lv); }

static void q5_0_get(const uint8_t *k, uint8_t *lv) { get_q5(k + 2, k + 6, lv); }
static void q5_0_set(uint8_t *k, const uint8_t *lv) { set_q5(k + 2, k + 6, lv); }
static void q5_1_get(const uint8_t *k, uint8_t *lv) { get_q5(k + 4, k + 8, lv); }
static void q5_1_set(uint8_t *k, const uint8_t *lv) { set_q5(k + 4, k + 8, lv); }

static void q8_0_get(const uint8_t *k, uint8_t *lv)
{
    for (int j = 0; j < 32; j++)
        lv[j] = (uint8_t)((int8_t)k[2 + j] + 127);
}

static void q8_0_set(uint8_t *k, const uint8_t *lv)
{
    for (int j = 0; j < 32; j++)
        k[2 + j] = (uint8_t)(int8_t)(lv[j] - 127);
}

/* ---- K-quants ---------------------------------------------------------------------------- */

/* Q2_K: scales[16] qs[64] d dmin; x = d*(sc&15)*q - dmin*(sc>>4) per 16. */
static void q2_K_affine(const uint8_t *k, float *a, float *b)
{
    const float d = qk_ld_f16(k + 80), min = qk_ld_f16(k + 82);
    for (int j = 0; j < 16; j++) {
        const float dl = d * (k[j] & 0xF), ml = min * (k[j] >> 4);
        const_ab(a + 16 * j, b + 16 * j, 16, dl, -ml);
    }
}
static void q2_K_get(const uint8_t *k, uint8_t *lv) { get_2bit(k + 16, lv); }
static void q2_K_set(uint8_t *k, const uint8_t *lv) { set_2bit(k + 16, lv); }

/* Q3_K: hmask[32] qs[64] scales[12] d; x = d*(sc-32)*(q-4) per 16; level = q2 | hbit << 2. */
static int q3_scale(const uint8_t *scales, int j)
{
    int lo = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
    return lo | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

static void q3_K_affine(const uint8_t *k, float *a, float *b)
{
    const float d = qk_ld_f16(k + 108);
    for (int j = 0; j < 16; j++)
        const_ab(a + 16 * j, b + 16 * j, 16, d * (float)(q3_scale(k + 96, j) - 32), 0.0f);
}

static void q3_K_get(const uint8_t *k, uint8_t *lv)
{
    get_2bit(k + 32, lv);
    get_bits256(k, lv, 2);
}

static void q3_K_set(uint8_t *k, const uint8_t *lv)
{
    set_2bit(k + 32, lv);
    set_bits256(k, lv, 2);
}

/* Q4_K / Q5_K: d dmin scales[12] ...; x = d*sc*q - dmin*m per 32. */
static void k4_affine(const uint8_t *k, float *a, float *b)
{
    const float d = qk_ld_f16(k), min = qk_ld_f16(k + 2);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        qk_get_scale_min_k4(j, k + 4, &sc, &m);
        const float d1 = d * sc, m1 = min * m;
        const_ab(a + 32 * j, b + 32 * j, 32, d1, -m1);
    }
}
static void q4_K_get(const uint8_t *k, uint8_t *lv) { get_nib256(k + 16, lv); }
static void q4_K_set(uint8_t *k, const uint8_t *lv) { set_nib256(k + 16, lv); }

static void q5_K_get(const uint8_t *k, uint8_t *lv)
{
    get_nib256(k + 48, lv);
    get_bits256(k + 16, lv, 4);
}

static void q5_K_set(uint8_t *k, const uint8_t *lv)
{
    set_nib256(k + 48, lv);
    set_bits256(k + 16, lv, 4);
}

/* Q6_K: ql[128] qh[64] scales[16]:i8 d; x = d*sc*(q-32) per 16. */
static void q6_K_affine(const uint8_t *k, float *a, float *b)
{
    const float d = qk_ld_f16(k + 208);
    for (int j = 0; j < 16; j++)
        const_ab(a + 16 * j, b + 16 * j, 16, d * (int8_t)k[192 + j], 0.0f);
}

static void q6_K_get(const uint8_t *k, uint8_t *lv)
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = k + 64 * h, *qh = k + 128 + 32 * h;
        uint8_t *L = lv + 128 * h;
        for (int l = 0; l < 32; l++) {
            L[l] = (uint8_t)((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4);
            L[l + 32] = (uint8_t)((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4);
            L[l + 64] = (uint8_t)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
            L[l + 96] = (uint8_t)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
        }
    }
}

static void q6_K_set(uint8_t *k, const uint8_t *lv)
{
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = k + 64 * h, *qh = k + 128 + 32 * h;
        const uint8_t *L = lv + 128 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((L[l] & 15) | (L[l + 64] & 15) << 4);
            ql[l + 32] = (uint8_t)((L[l + 32] & 15) | (L[l + 96] & 15) << 4);
            qh[l] = (uint8_t)((L[l] >> 4 & 3) | (L[l + 32] >> 4 & 3) << 2 | (L[l + 64] >> 4 & 3) << 4 |
                              (L[l + 96] >> 4 & 3) << 6);
        }
    }
}

/* ---- IQ4 --------------------------------------------------------------------------------- */

static void iq4_nl_affine(const uint8_t *k, float *a, float *b) { const_ab(a, b, 32, qk_ld_f16(k), 0.0f); }
static void iq4_nl_get(const uint8_t *k, uint8_t *lv) { get_nib32(k + 2, lv); }
static void iq4_nl_set(uint8_t *k, const uint8_t *lv) { set_nib32(k + 2, lv); }

/* IQ4_XS: d scales_h:u16 scales_l[4] qs[128]; x = d*(ls-32)*codebook[q] per 32. */
static void iq4_xs_affine(const uint8_t *k, float *a, float *b)
{
    const float d = qk_ld_f16(k);
    for (int s = 0; s < 8; s++) {
        const int lo = (k[4 + s / 2] >> 4 * (s % 2)) & 15, hi = (qk_ld_u16(k + 2) >> 2 * s) & 3;
        const_ab(a + 32 * s, b + 32 * s, 32, d * (float)((lo | hi << 4) - 32), 0.0f);
    }
}

static void iq4_xs_get(const uint8_t *k, uint8_t *lv)
{
    for (int s = 0; s < 8; s++)
        get_nib32(k + 8 + 16 * s, lv + 32 * s);
}

static void iq4_xs_set(uint8_t *k, const uint8_t *lv)
{
    for (int s = 0; s < 8; s++)
        set_nib32(k + 8 + 16 * s, lv + 32 * s);
}

/* ---- the table ------------------------------------------------------------------------------ */

static const qk_grid_ops table[] = {
    {QK_Q4_0, 32, 16, 8, NULL, true, q4_0_affine, q4_0_get, q4_0_set},
    {QK_Q4_1, 32, 16, 0, NULL, true, q4_1_affine, q4_1_get, q4_1_set},
    {QK_Q5_0, 32, 32, 16, NULL, true, q4_0_affine, q5_0_get, q5_0_set},
    {QK_Q5_1, 32, 32, 0, NULL, true, q4_1_affine, q5_1_get, q5_1_set},
    {QK_Q8_0, 32, 255, 127, NULL, false, q4_0_affine, q8_0_get, q8_0_set},
    {QK_Q2_K, 256, 4, 0, NULL, false, q2_K_affine, q2_K_get, q2_K_set},
    {QK_Q3_K, 256, 8, 4, NULL, false, q3_K_affine, q3_K_get, q3_K_set},
    {QK_Q4_K, 256, 16, 0, NULL, false, k4_affine, q4_K_get, q4_K_set},
    {QK_Q5_K, 256, 32, 0, NULL, false, k4_affine, q5_K_get, q5_K_set},
    {QK_Q6_K, 256, 64, 32, NULL, false, q6_K_affine, q6_K_get, q6_K_set},
    {QK_IQ4_NL, 32, 16, 0, codebook, false, iq4_nl_affine, iq4_nl_get, iq4_nl_set},
    {QK_IQ4_XS, 256, 16, 0, codebook, false, iq4_xs_affine, iq4_xs_get, iq4_xs_set},
};

const qk_grid_ops *qk_grid_for(int type)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].type == type)
            return &table[i];
    return NULL;
}

int qk_grid_nearest(const qk_grid_ops *o, float a, float b, float w, float *v)
{
    int lo = 0, hi = o->n_levels - 1;
    if (a == 0.0f) {
        *v = b;
        return 0;
    }
    /* the values a*g[l] + b run up (a > 0) or down (a < 0) with l: bisect on the side of w */
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        const float vm = a * qk_grid_level(o, mid) + b;
        if ((a > 0.0f) == (vm <= w))
            lo = mid;
        else
            hi = mid;
    }
    const float vl = a * qk_grid_level(o, lo) + b, vh = a * qk_grid_level(o, hi) + b;
    if (fabsf(vh - w) < fabsf(vl - w)) {
        *v = vh;
        return hi;
    }
    *v = vl;
    return lo;
}
