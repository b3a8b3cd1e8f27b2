/* iq1_iq3.c - IQ3_XXS, IQ3_S, IQ1_S and IQ1_M: decode, encode and the dot
 * product against Q8_K, bit-exact with ggml at llama.cpp d32676d
 * (ggml-quants.c: dequantize_row_*, quantize_iq3_xxs, quantize_iq3_s,
 * quantize_iq1_s, quantize_iq1_m; ggml-cpu/quants.c:
 * ggml_vec_dot_*_q8_K_generic).
 *
 * Block layouts (all 256 elements, little-endian):
 *   IQ3_XXS  98 B: f16 d | 64 B codebook indices (4 elements each) |
 *                  8 x u32: four 7-bit sign groups, then a 4-bit scale
 *   IQ3_S   110 B: f16 d | 64 B index low bits | 8 B index bit 8 |
 *                  32 B signs (1 bit an element) | 4 B two 4-bit scales each
 *   IQ1_S    50 B: f16 d | 32 B index low bits | 8 x u16: 3 x 3 index high
 *                  bits, 3-bit scale at 12, delta sign at 15
 *   IQ1_M    56 B: 32 B index low bits | 16 B: per 8 elements 3 index high
 *                  bits + delta sign | 8 B: 16 3-bit scales, with the f16
 *                  super-block scale spread over the top nibbles of 4 u16
 * The float arithmetic below follows ggml's expressions term for term (same
 * types, same order): that is what makes the results bit-exact.
 *
 * Where ggml aborts (IQ1_S without an importance matrix; no neighbour
 * better than FLT_MAX, which only non-finite input causes) these kernels
 * carry on instead: IQ1_S then uses unit importance, the search keeps the
 * first neighbour.  qk_quantize_rows refuses IQ1_S without an imatrix. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/iq1_grids.h"
#include "kernels/iq3_grids.h"
#include "kernels/quant_common.h"
#include "kernels/types.h"

#define IQ3XXS_SIZE 98
#define IQ3S_SIZE 110
#define IQ1S_SIZE 50
#define IQ1M_SIZE 56

/* ---- small helpers ------------------------------------------------------ */

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
static inline float maxf(float a, float b) { return a > b ? a : b; } /* ggml MAX */

/* Byte j of a codebook entry (the entries are little-endian byte vectors). */
static inline uint8_t gbyte(uint64_t entry, int j) { return (uint8_t)(entry >> 8 * j); }

/* ---- IQ3_XXS ------------------------------------------------------------ */

static void iq3_xxs_to_float(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += IQ3XXS_SIZE) {
        const float d = qk_ld_f16(b);
        const uint8_t *qs = b + 2, *sas = b + 2 + QK_K / 4;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 8) {
            uint32_t aux = qk_ld_u32(sas + 4 * ib);
            const float db = d * (0.5f + (aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                uint8_t signs = qk_iq3_ksigns[(aux >> 7 * l) & 127];
                uint32_t g1 = qk_iq3xxs_grid[qs[2 * l]], g2 = qk_iq3xxs_grid[qs[2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * gbyte(g1, j) * (signs & (1u << j) ? -1.f : 1.f);
                    y[j + 4] = db * gbyte(g2, j) * (signs & (1u << (j + 4)) ? -1.f : 1.f);
                }
            }
        }
    }
}

static float iq3_xxs_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_K *y = vy;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / QK_K; i++, x += IQ3XXS_SIZE, y++) {
        const float d = qk_ld_f16(x) * qk_ld_f32(y->d);
        const uint8_t *q3 = x + 2, *sas = x + 2 + QK_K / 4;
        const int8_t *q8 = y->qs;
        int32_t bs = 0;
        for (int ib = 0; ib < QK_K / 32; ib++, q3 += 8) {
            uint32_t aux = qk_ld_u32(sas + 4 * ib);
            const int32_t ls = (int32_t)(2 * (aux >> 28) + 1);
            int32_t sumi = 0;
            for (int l = 0; l < 4; l++, q8 += 8) {
                uint8_t signs = qk_iq3_ksigns[(aux >> 7 * l) & 127];
                uint32_t g1 = qk_iq3xxs_grid[q3[2 * l]], g2 = qk_iq3xxs_grid[q3[2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    sumi += gbyte(g1, j) * q8[j] * (signs & (1u << j) ? -1 : 1);
                    sumi += gbyte(g2, j) * q8[j + 4] * (signs & (1u << (j + 4)) ? -1 : 1);
                }
            }
            bs += sumi * ls;
        }
        sumf += d * bs;
    }
    return 0.25f * sumf;
}

/* ---- IQ3_S -------------------------------------------------------------- */

/* Codebook index of group k (0..7) of the 32-element block whose index
 * bytes start at qs and whose ninth index bits are in qh. */
static inline unsigned iq3s_index(const uint8_t *qs, uint8_t qh, int k)
{
    return qs[k] | ((unsigned)(qh >> k & 1) << 8);
}

static void iq3_s_to_float(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += IQ3S_SIZE) {
        const float d = qk_ld_f16(b);
        const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 8, signs += 4) {
            int ls = ib % 2 ? scales[ib / 2] >> 4 : scales[ib / 2] & 0xf;
            const float db = d * (1 + 2 * ls);
            for (int l = 0; l < 4; l++, y += 8) {
                uint32_t g1 = qk_iq3s_grid[iq3s_index(qs, qh[ib], 2 * l)];
                uint32_t g2 = qk_iq3s_grid[iq3s_index(qs, qh[ib], 2 * l + 1)];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * gbyte(g1, j) * (signs[l] & (1u << j) ? -1.f : 1.f);
                    y[j + 4] = db * gbyte(g2, j) * (signs[l] & (1u << (j + 4)) ? -1.f : 1.f);
                }
            }
        }
    }
}

static float iq3_s_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_K *y = vy;
    float sumf = 0.f;
    for (int64_t i = 0; i < n / QK_K; i++, x += IQ3S_SIZE, y++) {
        const float d = qk_ld_f16(x) * qk_ld_f32(y->d);
        const uint8_t *qs = x + 2, *qh = x + 66, *signs = x + 74, *scales = x + 106;
        const int8_t *q8 = y->qs;
        int32_t bs = 0;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 8, signs += 4) {
            const int32_t ls = 2 * (ib % 2 ? scales[ib / 2] >> 4 : scales[ib / 2] & 0xf) + 1;
            int32_t sumi = 0;
            for (int l = 0; l < 4; l++, q8 += 8) {
                uint32_t g1 = qk_iq3s_grid[iq3s_index(qs, qh[ib], 2 * l)];
                uint32_t g2 = qk_iq3s_grid[iq3s_index(qs, qh[ib], 2 * l + 1)];
                for (int j = 0; j < 4; j++) {
                    sumi += gbyte(g1, j) * q8[j] * (signs[l] & (1u << j) ? -1 : 1);
                    sumi += gbyte(g2, j) * q8[j + 4] * (signs[l] & (1u << (j + 4)) ? -1 : 1);
                }
            }
            bs += sumi * ls;
        }
        sumf += d * bs;
    }
    return sumf;
}

/* ---- IQ1_S -------------------------------------------------------------- */

static void iq1_s_to_float(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += IQ1S_SIZE) {
        const float d = qk_ld_f16(b);
        const uint8_t *qs = b + 2;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 4) {
            uint16_t qh = qk_ld_u16(b + 34 + 2 * ib);
            const float dl = d * (2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -QK_IQ1S_DELTA : QK_IQ1S_DELTA;
            for (int l = 0; l < 4; l++, y += 8) {
                uint64_t g = qk_iq1s_grid[qs[l] | ((qh >> 3 * l) & 7) << 8];
                for (int j = 0; j < 8; j++)
                    y[j] = dl * ((int8_t)gbyte(g, j) + delta);
            }
        }
    }
}

static float iq1_s_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_K *y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; i++, x += IQ1S_SIZE, y++) {
        const int8_t *q8 = y->qs;
        const uint8_t *qs = x + 2;
        int sumi = 0, sumi1 = 0;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 4) {
            uint16_t qh = qk_ld_u16(x + 34 + 2 * ib);
            const int ls = 2 * ((qh >> 12) & 7) + 1;
            const int delta = qh & 0x8000 ? -1 : 1;
            int lsum = 0;
            for (int l = 0; l < 4; l++, q8 += 8) {
                uint64_t g = qk_iq1s_grid[qs[l] | ((qh >> 3 * l) & 7) << 8];
                for (int j = 0; j < 8; j++)
                    lsum += q8[j] * (int8_t)gbyte(g, j);
            }
            sumi += ls * lsum;
            sumi1 += ls * delta * (qk_q8K_bsum(y, 2 * ib) + qk_q8K_bsum(y, 2 * ib + 1));
        }
        sumf += qk_ld_f16(x) * qk_ld_f32(y->d) * (sumi + QK_IQ1S_DELTA * sumi1);
    }
    return sumf;
}

/* ---- IQ1_M -------------------------------------------------------------- */

/* The four u16 scale words of an IQ1_M block. */
static void iq1m_scales(const uint8_t *b, uint16_t sc[4])
{
    for (int i = 0; i < 4; i++)
        sc[i] = qk_ld_u16(b + 48 + 2 * i);
}

/* The f16 super-block scale, spread over the top nibbles of sc[0..3]. */
static float iq1m_d(const uint16_t sc[4])
{
    uint16_t h = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                            (sc[3] & 0xf000));
    return qk_f16_to_f32(h);
}

/* 3-bit scale of 16-element block j (0..15), as 2s+1. */
static inline int iq1m_ls(const uint16_t sc[4], int j) { return 2 * ((sc[j / 4] >> 3 * (j % 4)) & 7) + 1; }

/* Codebook index of group g (0..3) of a 32-element block. */
static inline unsigned iq1m_index(const uint8_t *qs, const uint8_t *qh, int g)
{
    return qs[g] | ((unsigned)(qh[g / 2] >> 4 * (g % 2)) & 7) << 8;
}

static void iq1_m_to_float(const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += IQ1M_SIZE) {
        uint16_t sc[4];
        iq1m_scales(b, sc);
        const float d = iq1m_d(sc);
        const uint8_t *qs = b, *qh = b + 32;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 4, qh += 2) {
            const float dl[2] = {d * iq1m_ls(sc, 2 * ib), d * iq1m_ls(sc, 2 * ib + 1)};
            for (int g = 0; g < 4; g++, y += 8) {
                const float delta = qh[g / 2] & (0x08 << 4 * (g % 2)) ? -QK_IQ1S_DELTA : QK_IQ1S_DELTA;
                uint64_t e = qk_iq1s_grid[iq1m_index(qs, qh, g)];
                for (int j = 0; j < 8; j++)
                    y[j] = dl[g / 2] * ((int8_t)gbyte(e, j) + delta);
            }
        }
    }
}

static float iq1_m_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_K *y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; i++, x += IQ1M_SIZE, y++) {
        const int8_t *q8 = y->qs;
        uint16_t sc[4];
        iq1m_scales(x, sc);
        const uint8_t *qs = x, *qh = x + 32;
        int sumi1 = 0, sumi2 = 0;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 4, qh += 2) {
            int sum1[2] = {0, 0}, sum2[2] = {0, 0};
            for (int g = 0; g < 4; g++, q8 += 8) {
                const int delta = qh[g / 2] & (0x08 << 4 * (g % 2)) ? -1 : 1;
                uint64_t e = qk_iq1s_grid[iq1m_index(qs, qh, g)];
                int lsum1 = 0, lsum2 = 0;
                for (int j = 0; j < 8; j++) {
                    lsum1 += q8[j] * (int8_t)gbyte(e, j);
                    lsum2 += q8[j];
                }
                sum1[g / 2] += lsum1;
                sum2[g / 2] += lsum2 * delta;
            }
            const int ls1 = iq1m_ls(sc, 2 * ib), ls2 = iq1m_ls(sc, 2 * ib + 1);
            sumi1 += sum1[0] * ls1 + sum1[1] * ls2;
            sumi2 += sum2[0] * ls1 + sum2[1] * ls2;
        }
        sumf += iq1m_d(sc) * qk_ld_f32(y->d) * (sumi1 + QK_IQ1M_DELTA * sumi2);
    }
    return sumf;
}

/* ---- encoders: shared pieces -------------------------------------------- */

/* ggml's sigma2 of a super-block: twice the mean square. */
static float superblock_sigma2(const float *xbl)
{
    float sumx2 = 0;
    for (int i = 0; i < QK_K; i++)
        sumx2 += xbl[i] * xbl[i];
    return 2 * sumx2 / QK_K;
}

/* Element weights of a block: qw * sqrt(sigma2 + x^2) with an importance
 * vector, x^2 without. */
static void block_weights(const float *xb, const float *qw, float sigma2, int n, float *weight)
{
    for (int i = 0; i < n; i++)
        weight[i] = qw ? qw[i] * sqrtf(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
}

/* Encodes one super-block of 256 floats xbl (importance qwbl, or NULL)
 * into out, with the type's codebook tables. */
typedef void (*block_encoder)(const void *tables, const float *xbl, const float *qwbl,
                              uint8_t *out);

/* ggml's quantize_TYPE: rows of independent super-blocks; the importance
 * vector is per column, so each super-block uses its slice of it. */
static size_t encode_rows(const float *src, void *dst, int64_t nrows, int64_t ncols,
                          const float *imatrix, size_t block_bytes,
                          block_encoder block, const void *tables)
{
    uint8_t *out = dst;
    int64_t nb = ncols / QK_K;
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < nb; i++, out += block_bytes)
            block(tables, src + r * ncols + i * QK_K, imatrix ? imatrix + i * QK_K : NULL, out);
    return (size_t)(nrows * nb) * block_bytes;
}

/* ---- IQ3 encoders (ggml quantize_row_iq3_xxs_impl / _iq3_s_impl) -------- */

/* Weighted fit state of one 32-element block: magnitudes, weights, levels. */
typedef struct {
    float xval[32];   /* |x| (IQ3_XXS: one element may be negated for sign parity) */
    float weight[32];
    float waux[32];   /* sqrt(weight): the neighbour search's weights */
    int8_t L[32];     /* level codes 0..7 of the chosen codebook points */
    bool on_grid[8];  /* group k's rounding landed on the codebook */
} iq3_fit;

/* 12-bit code of a group's four levels (3 bits each). */
static inline unsigned iq3_code(const int8_t *L)
{
    return (unsigned)L[0] | (unsigned)L[1] << 3 | (unsigned)L[2] << 6 | (unsigned)L[3] << 9;
}

/* Levels of a group of four magnitudes xv at inverse scale id (ggml:
 * nearest_int(0.5*(id*x - 1)), clamped to 0..7); returns their code. */
static unsigned iq3_round_group(const float *xv, float id, int8_t *L)
{
    for (int i = 0; i < 4; i++)
        L[i] = (int8_t)clampi(qk_nearest_int(0.5f * (id * xv[i] - 1)), 0, 7);
    return iq3_code(L);
}

/* sum w x q and sum w q^2 for q = 2L+1. */
static void iq3_sums(const iq3_fit *f, const int8_t *L, float *sumqx, float *sumq2)
{
    float sx = 0, s2 = 0;
    for (int i = 0; i < 32; i++) {
        float w = f->weight[i];
        float q = 2 * L[i] + 1;
        sx += w * f->xval[i] * q;
        s2 += w * q * q;
    }
    *sumqx = sx, *sumq2 = s2;
}

/* Try the scales max/(15 + 0.2 is) for |is| <= nsteps, snapping every group
 * to the codebook (or its best neighbour); keep the best weighted fit in
 * f->L / f->on_grid.  on_grid starts as `on_grid_init`.  Returns the scale. */
static float iq3_scan_scales(const qk_iq3_search *s, iq3_fit *f, float max, int nsteps,
                             bool on_grid_init)
{
    int8_t Laux[32];
    bool on_aux[8];
    float best = 0, scale = max / 15;
    for (int k = 0; k < 8; k++)
        f->on_grid[k] = on_grid_init;
    for (int is = -nsteps; is <= nsteps; is++) {
        float id = (15 + is * 0.2f) / max;
        float this_scale = 1 / id;
        for (int k = 0; k < 8; k++) {
            unsigned u = iq3_round_group(f->xval + 4 * k, id, Laux + 4 * k);
            on_aux[k] = s->map[u] >= 0;
            if (!on_aux[k])
                qk_iq3_best_neighbour(s, u, f->xval + 4 * k, f->waux + 4 * k, this_scale,
                                      Laux + 4 * k);
        }
        float sumqx, sumq2;
        iq3_sums(f, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(f->L, Laux, sizeof Laux);
            memcpy(f->on_grid, on_aux, sizeof on_aux);
        }
    }
    return scale;
}

/* When some group missed the codebook: re-round at the found scale, snap to
 * the codebook, refit the scale.  IQ3_XXS keeps the groups that were on the
 * codebook (skip_on_grid); IQ3_S redoes all of them. */
static float iq3_refine(const qk_iq3_search *s, iq3_fit *f, float scale, bool skip_on_grid)
{
    int n_off = 0;
    for (int k = 0; k < 8; k++)
        n_off += !f->on_grid[k];
    if (n_off == 0 || !(scale > 0))
        return scale;
    float id = 1 / scale;
    for (int k = 0; k < 8; k++) {
        if (skip_on_grid && f->on_grid[k])
            continue;
        int8_t Lr[4];
        unsigned u = iq3_round_group(f->xval + 4 * k, id, Lr);
        int g = s->map[u];
        if (g < 0)
            g = qk_iq3_best_neighbour(s, u, f->xval + 4 * k, f->waux + 4 * k, scale, f->L + 4 * k);
        for (int i = 0; i < 4; i++)
            f->L[4 * k + i] = (int8_t)((s->q[g][i] - 1) / 2);
    }
    float sumqx, sumq2;
    iq3_sums(f, f->L, &sumqx, &sumq2);
    if (sumq2 > 0)
        scale = sumqx / sumq2;
    return scale;
}

/* Codebook entry of a group's levels (always a codebook point: they come
 * from the codebook, or are all zero, which is entry 0). */
static int iq3_entry(const qk_iq3_search *s, const int8_t *L)
{
    int g = s->map[iq3_code(L)];
    return g >= 0 ? g : 0;
}

/* One IQ3_XXS super-block. */
static void iq3_xxs_block(const void *tables, const float *xbl, const float *qwbl, uint8_t *out)
{
    const qk_iq3_search *s = tables;
    uint8_t *q3 = out + 2;             /* 64 index bytes, then 8 x u32 */
    uint32_t sas[8] = {0};
    float scales[8], max_scale = 0;
    iq3_fit f;
    memset(out, 0, IQ3XXS_SIZE);
    const float sigma2 = superblock_sigma2(xbl);
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = xbl + 32 * ib;
        block_weights(xb, qwbl ? qwbl + 32 * ib : NULL, sigma2, 32, f.weight);
        for (int i = 0; i < 32; i++)
            f.waux[i] = sqrtf(f.weight[i]);
        uint8_t signs[4];
        for (int k = 0; k < 4; k++) {
            /* signs of 8 elements; an odd count is made even by flipping the
             * element that costs least (weight * x^2) */
            int nflip = 0;
            uint8_t sg = 0;
            for (int i = 0; i < 8; i++) {
                float x = xb[8 * k + i];
                f.xval[8 * k + i] = x >= 0 ? x : -x;
                if (!(x >= 0))
                    nflip++, sg |= (uint8_t)(1u << i);
            }
            if (nflip % 2) {
                int imin = 0;
                float min = f.weight[8 * k] * xb[8 * k] * xb[8 * k];
                for (int i = 1; i < 8; i++) {
                    float ax = f.weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                    if (ax < min)
                        min = ax, imin = i;
                }
                f.xval[8 * k + imin] = -f.xval[8 * k + imin];
                sg ^= (uint8_t)(1u << imin);
            }
            signs[k] = sg & 127;
        }
        float max = f.xval[0];
        for (int i = 1; i < 32; i++)
            max = maxf(max, f.xval[i]);
        memset(f.L, 0, sizeof f.L);
        if (max < 1e-8f) { /* GROUP_MAX_EPS_IQ3_XXS */
            scales[ib] = 0;
            continue;
        }
        float scale = iq3_scan_scales(s, &f, max, 15, true);
        scale = iq3_refine(s, &f, scale, true);
        if (scale < 0) { /* "should never happen": flip scale and signs */
            scale = -scale;
            for (int k = 0; k < 4; k++)
                signs[k] = (uint8_t)~signs[k] & 127;
        }
        for (int k = 0; k < 8; k++)
            q3[8 * ib + k] = (uint8_t)iq3_entry(s, f.L + 4 * k);
        sas[ib] = signs[0] | (uint32_t)signs[1] << 7 | (uint32_t)signs[2] << 14 |
                  (uint32_t)signs[3] << 21;
        scales[ib] = scale;
        max_scale = maxf(max_scale, scale);
    }
    if (!max_scale) {
        memset(out, 0, IQ3XXS_SIZE);
        return;
    }
    float d = max_scale / 31;
    qk_st_u16(out, qk_f32_to_f16(d * 1.0125f));
    float id = 1 / d;
    for (int ib = 0; ib < 8; ib++) {
        int l = clampi(qk_nearest_int(0.5f * (id * scales[ib] - 1)), 0, 15);
        qk_st_u32(q3 + QK_K / 4 + 4 * ib, sas[ib] | (uint32_t)l << 28);
    }
}

/* One IQ3_S super-block.  Quirk kept from ggml: a 32-element block that is
 * all zeros writes no index or sign bytes and does not advance past them,
 * so the following blocks' bytes land one block earlier. */
static void iq3_s_block(const void *tables, const float *xbl, const float *qwbl, uint8_t *out)
{
    const qk_iq3_search *s = tables;
    uint8_t *qs = out + 2, *qh = out + 66, *signs = out + 74, *sc = out + 106;
    float scales[8], max_scale = 0;
    iq3_fit f;
    memset(out, 0, IQ3S_SIZE);
    const float sigma2 = superblock_sigma2(xbl);
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = xbl + 32 * ib;
        block_weights(xb, qwbl ? qwbl + 32 * ib : NULL, sigma2, 32, f.weight);
        for (int i = 0; i < 32; i++)
            f.waux[i] = sqrtf(f.weight[i]);
        uint8_t bsigns[4];
        for (int k = 0; k < 4; k++) {
            uint8_t sg = 0;
            for (int i = 0; i < 8; i++) {
                float x = xb[8 * k + i];
                f.xval[8 * k + i] = x >= 0 ? x : -x;
                if (!(x >= 0))
                    sg |= (uint8_t)(1u << i);
            }
            bsigns[k] = sg;
        }
        float max = f.xval[0];
        for (int i = 1; i < 32; i++)
            max = maxf(max, f.xval[i]);
        memset(f.L, 0, sizeof f.L);
        if (!max) {
            scales[ib] = 0;
            continue;
        }
        float scale = iq3_scan_scales(s, &f, max, 9, false);
        scale = iq3_refine(s, &f, scale, false);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; k++)
                bsigns[k] = (uint8_t)~bsigns[k];
        }
        for (int k = 0; k < 8; k++) {
            int g = iq3_entry(s, f.L + 4 * k);
            qs[k] = (uint8_t)(g & 255);
            qh[ib] |= (uint8_t)((g >> 8) << k);
        }
        qs += 8;
        memcpy(signs, bsigns, 4);
        signs += 4;
        scales[ib] = scale;
        max_scale = maxf(max_scale, scale);
    }
    if (!max_scale)
        return;
    float d = max_scale / 31;
    qk_st_u16(out, qk_f32_to_f16(d * 1.033f));
    float id = 1 / d;
    for (int ib = 0; ib < 8; ib += 2) {
        int l1 = clampi(qk_nearest_int(0.5f * (id * scales[ib] - 1)), 0, 15);
        int l2 = clampi(qk_nearest_int(0.5f * (id * scales[ib + 1] - 1)), 0, 15);
        sc[ib / 2] = (uint8_t)(l1 | l2 << 4);
    }
}

static size_t iq3_xxs_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                               const float *imatrix)
{
    return encode_rows(src, dst, nrows, ncols, imatrix, IQ3XXS_SIZE, iq3_xxs_block,
                       qk_iq3_search_get(QK_IQ3XXS_NGRID));
}

static size_t iq3_s_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                             const float *imatrix)
{
    return encode_rows(src, dst, nrows, ncols, imatrix, IQ3S_SIZE, iq3_s_block,
                       qk_iq3_search_get(QK_IQ3S_NGRID));
}

/* ---- IQ1 encoders (ggml quantize_row_iq1_s_impl / _iq1_m_impl) ---------- */

/* An element of a block sorted by value. */
typedef struct {
    float x;
    int i;
} pair;

/* Sort by value, equal values keeping their order (as ggml's qsort, glibc's
 * merge sort, does for these small arrays). */
static void sort_pairs(pair *p, int n)
{
    for (int a = 1; a < n; a++) {
        pair v = p[a];
        int b = a;
        for (; b > 0 && p[b - 1].x > v.x; b--)
            p[b] = p[b - 1];
        p[b] = v;
    }
}

/* The three values of an IQ1 element for a + or - shift. */
static const float iq1_xp[3] = {-1 + QK_IQ1S_DELTA, QK_IQ1S_DELTA, 1 + QK_IQ1S_DELTA};
static const float iq1_xm[3] = {-1 - QK_IQ1S_DELTA, -QK_IQ1S_DELTA, 1 - QK_IQ1S_DELTA};

/* Codebook entry for the 8 levels L of a group; off the codebook, the best
 * neighbour for the values xg at the given scale.  *on_grid is cleared then. */
static int iq1_entry(const qk_iq1_search *s, const int8_t *L, const float *xb, const float *w,
                     float scale, const float *xg, bool *on_grid)
{
    unsigned code = qk_iq1_code(L);
    int g = s->map[code];
    if (g >= 0)
        return g;
    *on_grid = false;
    return qk_iq1_best_neighbour(s, code, xb, w, scale, xg);
}

/* Levels 0/1/2 of the elements split at sorted positions i1 <= i2. */
static void iq1_split_levels(const pair *p, int n, int i1, int i2, int8_t *L)
{
    for (int j = 0; j < n; j++)
        L[p[j].i] = (int8_t)(j < i1 ? 0 : j < i2 ? 1 : 2);
}

/* One IQ1_S super-block (32-element blocks, one shift each). */
static void iq1_s_block(const void *tables, const float *xbl, const float *qwbl, uint8_t *out)
{
    const qk_iq1_search *s = tables;
    enum { BS = 32 };
    float scales[8], max_scale = 0, weight[BS], sumx[BS + 1], sumw[BS + 1];
    int shifts[8];
    uint16_t qh[8] = {0};
    memset(out, 0, IQ1S_SIZE);
    const float sigma2 = superblock_sigma2(xbl);
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = xbl + BS * ib;
        /* ggml requires the importance matrix; without one, unit importance */
        for (int i = 0; i < BS; i++)
            weight[i] = (qwbl ? qwbl[BS * ib + i] : 1.0f) * sqrtf(sigma2 + xb[i] * xb[i]);
        float max = fabsf(xb[0]);
        for (int i = 1; i < BS; i++)
            max = maxf(max, fabsf(xb[i]));
        scales[ib] = 0, shifts[ib] = 1;
        if (max < 1e-12f) /* GROUP_MAX_EPS_IQ1_S */
            continue;
        /* exhaustive search for the two split points of the sorted values
         * into levels -1 / 0 / +1, for either shift (prefix sums) */
        pair p[BS];
        for (int j = 0; j < BS; j++)
            p[j] = (pair){xb[j], j};
        sort_pairs(p, BS);
        sumx[0] = sumw[0] = 0;
        for (int j = 0; j < BS; j++) {
            int i = p[j].i;
            sumx[j + 1] = sumx[j] + weight[i] * xb[i];
            sumw[j + 1] = sumw[j] + weight[i];
        }
        float best_score = -FLT_MAX, scale = max;
        int besti1 = -1, besti2 = -1, best_shift = 0;
        for (int i1 = 0; i1 <= BS; i1++) {
            for (int i2 = i1; i2 <= BS; i2++) {
                for (int sh = 1; sh >= -1; sh -= 2) {
                    const float *xs = sh == 1 ? iq1_xp : iq1_xm;
                    float sumqx = (sumx[i1] - sumx[0]) * xs[0] + (sumx[i2] - sumx[i1]) * xs[1] +
                                  (sumx[BS] - sumx[i2]) * xs[2];
                    float sumq2 = (sumw[i1] - sumw[0]) * xs[0] * xs[0] +
                                  (sumw[i2] - sumw[i1]) * xs[1] * xs[1] +
                                  (sumw[BS] - sumw[i2]) * xs[2] * xs[2];
                    if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                        scale = sumqx / sumq2;
                        best_score = scale * sumqx;
                        besti1 = i1, besti2 = i2, best_shift = sh;
                    }
                }
            }
        }
        if (besti1 < 0 || besti2 < 0 || best_shift == 0)
            continue;
        int8_t L[BS];
        iq1_split_levels(p, BS, besti1, besti2, L);
        if (scale < 0) {
            for (int j = 0; j < BS; j++)
                L[j] = (int8_t)(2 - L[j]);
            scale = -scale, best_shift = -best_shift;
        }
        const float *xx = best_shift == 1 ? iq1_xp : iq1_xm;
        bool all_on_grid = true;
        int index[4];
        for (int k = 0; k < 4; k++)
            index[k] = iq1_entry(s, L + 8 * k, xb + 8 * k, weight + 8 * k, scale, xx, &all_on_grid);
        if (!all_on_grid) {
            float sumqx = 0, sumq2 = 0;
            for (int k = 0; k < 4; k++)
                for (int j = 0; j < 8; j++) {
                    float w = weight[8 * k + j];
                    float q = xx[(s->q[index[k]][j] - 1) / 2];
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            if (sumqx > 0 && sumq2 > 0)
                scale = sumqx / sumq2;
        }
        for (int k = 0; k < 4; k++) {
            out[2 + 4 * ib + k] = (uint8_t)(index[k] & 255);
            qh[ib] |= (uint16_t)((index[k] >> 8) << 3 * k);
        }
        scales[ib] = scale, shifts[ib] = best_shift;
        max_scale = maxf(max_scale, scale);
    }
    if (max_scale) {
        float d = max_scale / 15;
        qk_st_u16(out, qk_f32_to_f16(d * 1.125f));
        float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) {
            int l = clampi(qk_nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
            if (shifts[ib] == -1)
                l |= 8;
            qh[ib] |= (uint16_t)(l << 12);
        }
    }
    for (int ib = 0; ib < 8; ib++)
        qk_st_u16(out + 34 + 2 * ib, qh[ib]);
}

/* IQ1_M shift patterns of a 16-element block: k = 0 (+,+), 1 (+,-), 2 (-,+),
 * 3 (-,-) for its two groups of 8; the values of group g (0, 1) under k. */
static inline const float *iq1m_values(int k, int g)
{
    return (g == 0 ? k < 2 : k % 2 == 0) ? iq1_xp : iq1_xm;
}

/* For a split of the sorted block at i1 <= i2, the weighted sums of the four
 * shift patterns, accumulated element by element in sorted order (ggml). */
static void iq1m_split_sums(const pair *p, const float *xb, const float *weight, int i1, int i2,
                            float sumqx[4], float sumq2[4])
{
    for (int k = 0; k < 4; k++)
        sumqx[k] = sumq2[k] = 0;
    for (int j = 0; j < 16; j++) {
        int i = p[j].i, lvl = j < i1 ? 0 : j < i2 ? 1 : 2;
        for (int k = 0; k < 4; k++) {
            float v = iq1m_values(k, i >= 8)[lvl];
            sumqx[k] += weight[i] * v * xb[i];
            sumq2[k] += weight[i] * v * v;
        }
    }
}

/* One IQ1_M super-block (16-element blocks, one shift per group of 8). */
static void iq1_m_block(const void *tables, const float *xbl, const float *qwbl, uint8_t *out)
{
    const qk_iq1_search *s = tables;
    enum { BS = 16 };
    static const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
    float scales[16], max_scale = 0, weight[BS];
    int shifts[16];
    uint8_t *qs = out, *qh = out + 32;
    memset(out, 0, IQ1M_SIZE);
    const float sigma2 = superblock_sigma2(xbl);
    for (int ib = 0; ib < 16; ib++) {
        const float *xb = xbl + BS * ib;
        block_weights(xb, qwbl ? qwbl + BS * ib : NULL, sigma2, BS, weight);
        float max = fabsf(xb[0]);
        for (int i = 1; i < BS; i++)
            max = maxf(max, fabsf(xb[i]));
        scales[ib] = 0, shifts[ib] = 0;
        if (max < 1e-7f) /* GROUP_MAX_EPS_IQ1_M */
            continue;
        pair p[BS];
        for (int j = 0; j < BS; j++)
            p[j] = (pair){xb[j], j};
        sort_pairs(p, BS);
        float best_score = -FLT_MAX, scale = max;
        int besti1 = -1, besti2 = -1, best_k = -1;
        for (int i1 = 0; i1 <= BS; i1++) {
            for (int i2 = i1; i2 <= BS; i2++) {
                float sumqx[4], sumq2[4];
                iq1m_split_sums(p, xb, weight, i1, i2, sumqx, sumq2);
                for (int k = 0; k < 4; k++) {
                    if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
                        scale = sumqx[k] / sumq2[k];
                        best_score = scale * sumqx[k];
                        besti1 = i1, besti2 = i2, best_k = k;
                    }
                }
            }
        }
        if (besti1 < 0 || besti2 < 0 || best_k < 0)
            continue;
        int8_t L[BS];
        iq1_split_levels(p, BS, besti1, besti2, L);
        if (scale < 0) {
            for (int j = 0; j < BS; j++)
                L[j] = (int8_t)(2 - L[j]);
            scale = -scale;
            best_k = 3 - best_k; /* both shifts flip: 0<->3, 1<->2 */
        }
        bool all_on_grid = true;
        int index[2];
        for (int k = 0; k < 2; k++)
            index[k] = iq1_entry(s, L + 8 * k, xb + 8 * k, weight + 8 * k, scale,
                                 iq1m_values(best_k, k), &all_on_grid);
        if (!all_on_grid) {
            float sumqx = 0, sumq2 = 0;
            for (int k = 0; k < 2; k++) {
                const float *xx = iq1m_values(best_k, k);
                for (int j = 0; j < 8; j++) {
                    float w = weight[8 * k + j];
                    float q = xx[(s->q[index[k]][j] - 1) / 2];
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            }
            if (sumqx > 0 && sumq2 > 0)
                scale = sumqx / sumq2;
        }
        qs[2 * ib] = (uint8_t)(index[0] & 255);
        qs[2 * ib + 1] = (uint8_t)(index[1] & 255);
        qh[ib] = (uint8_t)((index[0] >> 8) | ((index[1] >> 8) << 4));
        scales[ib] = scale, shifts[ib] = best_k;
        max_scale = maxf(max_scale, scale);
    }
    if (!max_scale)
        return;
    /* block scales against max/15, then the super-block scale refitted by
     * weighted least squares over the whole super-block */
    uint16_t sc[4] = {0};
    float d = max_scale / 15;
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < 16; ib++) {
        int l = clampi(qk_nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
        sc[ib / 4] |= (uint16_t)(l << 3 * (ib % 4));
        qh[ib] |= masks[shifts[ib]];
        const float *xb = xbl + BS * ib;
        block_weights(xb, qwbl ? qwbl + BS * ib : NULL, sigma2, BS, weight);
        for (int k = 0; k < 2; k++) {
            const float *xx = iq1m_values(shifts[ib], k);
            const int8_t *pg = s->q[qs[2 * ib + k] + ((qh[ib] << (8 - 4 * k)) & 0x700)];
            for (int j = 0; j < 8; j++) {
                float w = weight[8 * k + j];
                float q = xx[(pg[j] - 1) / 2] * (2 * l + 1);
                sumqx += w * q * xb[8 * k + j];
                sumq2 += w * q * q;
            }
        }
    }
    if (sumq2 > 0)
        d = sumqx / sumq2;
    uint16_t h = qk_f32_to_f16(d * 1.1125f);
    sc[0] |= (uint16_t)((h & 0x000f) << 12);
    sc[1] |= (uint16_t)((h & 0x00f0) << 8);
    sc[2] |= (uint16_t)((h & 0x0f00) << 4);
    sc[3] |= (uint16_t)(h & 0xf000);
    for (int i = 0; i < 4; i++)
        qk_st_u16(out + 48 + 2 * i, sc[i]);
}

static size_t iq1_s_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                             const float *imatrix)
{
    return encode_rows(src, dst, nrows, ncols, imatrix, IQ1S_SIZE, iq1_s_block,
                       qk_iq1_search_get());
}

static size_t iq1_m_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                             const float *imatrix)
{
    return encode_rows(src, dst, nrows, ncols, imatrix, IQ1M_SIZE, iq1_m_block,
                       qk_iq1_search_get());
}

const qk_kernel_ops qk_ops_iq1_iq3[] = {
    {.id = QK_IQ3_XXS, .to_float = iq3_xxs_to_float, .quantize = iq3_xxs_quantize,
     .vec_dot = iq3_xxs_vec_dot},
    {.id = QK_IQ3_S, .to_float = iq3_s_to_float, .quantize = iq3_s_quantize,
     .vec_dot = iq3_s_vec_dot},
    {.id = QK_IQ1_S, .to_float = iq1_s_to_float, .quantize = iq1_s_quantize,
     .vec_dot = iq1_s_vec_dot},
    {.id = QK_IQ1_M, .to_float = iq1_m_to_float, .quantize = iq1_m_quantize,
     .vec_dot = iq1_m_vec_dot},
    {.id = -1},
};
