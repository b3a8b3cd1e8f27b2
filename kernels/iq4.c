/* iq4.c - IQ4_NL and IQ4_XS: 4-bit indices into a fixed non-linear codebook
 * of 16 int8 values, bit-exact with ggml at llama.cpp d32676d (ggml-quants.c
 * quantize_row_iq4_nl_impl, quantize_iq4_{nl,xs}, dequantize_row_iq4_{nl,xs};
 * ggml-cpu/quants.c ggml_vec_dot_iq4_nl_q8_0_generic, _iq4_xs_q8_K_generic).
 *
 *   IQ4_NL  32 elements, 18 bytes: d (f16), qs[16] (element j in the low
 *           nibble of qs[j], element j+16 in the high nibble).  Value
 *           d * codebook[index].  Pairs with Q8_0.
 *   IQ4_XS  256 elements, 136 bytes: d (f16), scales_h (u16), scales_l[4],
 *           qs[128].  Eight 32-element sub-blocks, each packed like an IQ4_NL
 *           block; sub-block b has the 6-bit scale ls = low nibble
 *           (b even) / high nibble (b odd) of scales_l[b/2], plus bits
 *           2b..2b+1 of scales_h as bits 4..5; value d * (ls-32) * codebook[index].
 *           Pairs with Q8_K.
 *
 * The encoder weights each element by x^2, or with an importance matrix by
 * imatrix * sqrt(sigma2 + x^2) (sigma2 = 2 * mean square of the super-block),
 * and tries 16 candidate scales per 32-element sub-block (ntry = 7).
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/quant_common.h"
#include "kernels/types.h"
#include "kernels/x86/x86.h"

#define IQ4_NL_SIZE 18
#define IQ4_XS_SIZE 136
#define SUB 32          /* sub-block: elements sharing one scale */
#define NTRY 7          /* ggml's quantize_iq4_* pass ntry = 7 */

/* ggml-common.h kvalues_iq4nl. */
static const int8_t codebook[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

/* Index of the codebook entry nearest to x (ties to the upper entry), by
 * bisection as ggml's best_index_int8. */
static int nearest_index(float x)
{
    if (x <= codebook[0])
        return 0;
    if (x >= codebook[15])
        return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (x < codebook[mid])
            hi = mid;
        else
            lo = mid;
    }
    return x - codebook[hi - 1] < codebook[hi] - x ? hi - 1 : hi;
}

/* sigma2 of ggml: twice the mean square of the n elements. */
static float sigma2_of(const float *x, int n)
{
    float s = 0;
    for (int j = 0; j < n; j++)
        s += x[j] * x[j];
    return s * (2.f / (float)n);
}

/* Weighted least-squares fit sum w (x - d q)^2 accumulators for inverse
 * scale id: *sumqx = sum w q x, *sumq2 = sum w q^2, q = codebook value. */
static void fit(const float *x, const float *w, float id, float *sumqx, float *sumq2)
{
    float sqx = 0, sq2 = 0;
    for (int j = 0; j < SUB; j++) {
        float q = codebook[nearest_index(id * x[j])];
        sqx += w[j] * q * x[j];
        sq2 += w[j] * q * q;
    }
    *sumqx = sqx, *sumq2 = sq2;
}

/* Best scale of one 32-element sub-block (0 when it is all below 1e-15):
 * start from the scale mapping the signed max onto -codebook[0], then try
 * the inverse scales (codebook[0] + t) / max, t = -7..7, keeping the one
 * with the largest sumqx^2 / sumq2. */
static float sub_scale(const float *x, const float *qw, float sigma2)
{
    float w[SUB];
    for (int j = 0; j < SUB; j++)
        w[j] = qw ? qw[j] * sqrtf(sigma2 + x[j] * x[j]) : x[j] * x[j];
    float amax = 0, max = 0;
    for (int j = 0; j < SUB; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]), max = x[j];
    if (amax < QK_GROUP_MAX_EPS)
        return 0;
    float sumqx, sumq2;
    fit(x, w, 1 / (-max / codebook[0]), &sumqx, &sumq2);
    float d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int t = -NTRY; t <= NTRY; t++) {
        fit(x, w, (float)(t + codebook[0]) / max, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* sub_scale of 8 consecutive sub-blocks (x + SUB*g, qw + SUB*g) with
 * sigma2[g]: in SIMD lanes where the CPU has AVX2, with the same bits. */
static void sub_scales_x8(const float *x, const float *qw, const float *sigma2, float *d)
{
#ifdef QK_X86
    if (qk_cpu_level_active() >= QK_CPU_AVX2) {
        qk_x86_avx2_iq4_scales_x8(x, qw, sigma2, codebook, NTRY, d);
        return;
    }
#endif
    for (int g = 0; g < 8; g++)
        d[g] = sub_scale(x + g * SUB, qw ? qw + g * SUB : NULL, sigma2[g]);
}

/* Pack 32 elements at inverse scale id into 16 bytes of nibbles. */
static void pack_sub(const float *x, float id, uint8_t *qs)
{
#ifdef QK_X86
    if (qk_cpu_level_active() >= QK_CPU_AVX2) {
        qk_x86_avx2_iq4_pack(x, id, codebook, qs);
        return;
    }
#endif
    for (int j = 0; j < SUB / 2; j++)
        qs[j] = (uint8_t)(nearest_index(id * x[j]) | nearest_index(id * x[j + SUB / 2]) << 4);
}

/* ---- IQ4_NL --------------------------------------------------------------- */

static void iq4_nl_encode_block(const float *x, const float *qw, uint8_t *b)
{
    float d = sub_scale(x, qw, sigma2_of(x, SUB));
    qk_st_f16(b, d);
    pack_sub(x, d != 0.0f ? 1 / d : 0, b + 2);
}

static size_t iq4_nl_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                              const float *imatrix)
{
    uint8_t *b = dst;
    const int64_t nb = ncols / SUB;
    for (int64_t r = 0; r < nrows; r++) {
        int64_t i = 0;
        /* eight blocks at a time through the SIMD scale search */
        for (; i + 8 <= nb; i += 8, b += 8 * IQ4_NL_SIZE, src += 8 * SUB) {
            float s2[8], d[8];
            for (int g = 0; g < 8; g++)
                s2[g] = sigma2_of(src + g * SUB, SUB);
            sub_scales_x8(src, imatrix ? imatrix + i * SUB : NULL, s2, d);
            for (int g = 0; g < 8; g++) {
                uint8_t *bg = b + g * IQ4_NL_SIZE;
                qk_st_f16(bg, d[g]);
                pack_sub(src + g * SUB, d[g] != 0.0f ? 1 / d[g] : 0, bg + 2);
            }
        }
        for (; i < nb; i++, b += IQ4_NL_SIZE, src += SUB)
            iq4_nl_encode_block(src, imatrix ? imatrix + i * SUB : NULL, b);
    }
    return (size_t)nrows * (size_t)(ncols / SUB) * IQ4_NL_SIZE;
}

/* 32 values of one nibble-packed sub-block at scale d. */
static void unpack_sub(const uint8_t *qs, float d, float *y)
{
    for (int j = 0; j < SUB / 2; j++) {
        y[j] = d * codebook[qs[j] & 15];
        y[j + SUB / 2] = d * codebook[qs[j] >> 4];
    }
}

static void iq4_nl_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / SUB; i++, b += IQ4_NL_SIZE, dst += SUB)
        unpack_sub(b + 2, qk_ld_f16(b), dst);
}

/* Integer dot product of one packed sub-block with 32 int8 activations. */
static int dot_sub(const uint8_t *qs, const int8_t *q8)
{
    int lo = 0, hi = 0;
    for (int j = 0; j < SUB / 2; j++) {
        lo += q8[j] * codebook[qs[j] & 15];
        hi += q8[j + SUB / 2] * codebook[qs[j] >> 4];
    }
    return lo + hi;
}

static float iq4_nl_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_0 *y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / SUB; i++, x += IQ4_NL_SIZE) {
        float d = qk_ld_f16(y[i].d) * qk_ld_f16(x);
        sumf += d * (float)dot_sub(x + 2, y[i].qs);
    }
    return sumf;
}

/* ---- IQ4_XS --------------------------------------------------------------- */

static void iq4_xs_encode_block(const float *x, const float *qw, uint8_t *b)
{
    float sigma2 = sigma2_of(x, QK_K);
    float scales[QK_K / SUB];
    float max_scale = 0, amax_scale = 0;
    const float s2[8] = {sigma2, sigma2, sigma2, sigma2, sigma2, sigma2, sigma2, sigma2};
    sub_scales_x8(x, qw, s2, scales);
    for (int s = 0; s < QK_K / SUB; s++) {
        if (fabsf(scales[s]) > amax_scale)
            amax_scale = fabsf(scales[s]), max_scale = scales[s];
    }
    /* super-block scale: the largest sub-block scale maps to -32 */
    float d = -max_scale / 32;
    float id = d != 0.0f ? 1 / d : 0.f;
    uint16_t scales_h = 0;
    uint8_t *scales_l = b + 4;
    memset(scales_l, 0, QK_K / 64);
    for (int s = 0; s < QK_K / SUB; s++) {
        int l = qk_nearest_int(id * scales[s]);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        float dl = d * (float)l;
        pack_sub(x + s * SUB, dl != 0.0f ? 1 / dl : 0.f, b + 8 + s * (SUB / 2));
        l += 32;
        scales_l[s / 2] |= (uint8_t)((l & 15) << 4 * (s % 2));
        scales_h |= (uint16_t)((l >> 4) << 2 * s);
    }
    qk_st_f16(b, d);
    qk_st_u16(b + 2, scales_h);
}

static size_t iq4_xs_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                              const float *imatrix)
{
    uint8_t *b = dst;
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < ncols / QK_K; i++, b += IQ4_XS_SIZE, src += QK_K)
            iq4_xs_encode_block(src, imatrix ? imatrix + i * QK_K : NULL, b);
    return (size_t)nrows * (size_t)(ncols / QK_K) * IQ4_XS_SIZE;
}

/* The 6-bit scale of sub-block s, minus 32. */
static int iq4_xs_scale(const uint8_t *b, int s)
{
    int lo = (b[4 + s / 2] >> 4 * (s % 2)) & 15;
    int hi = (qk_ld_u16(b + 2) >> 2 * s) & 3;
    return (lo | hi << 4) - 32;
}

static void iq4_xs_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += IQ4_XS_SIZE) {
        float d = qk_ld_f16(b);
        for (int s = 0; s < QK_K / SUB; s++, dst += SUB)
            unpack_sub(b + 8 + s * (SUB / 2), d * (float)iq4_xs_scale(b, s), dst);
    }
}

static float iq4_xs_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_K *y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; i++, x += IQ4_XS_SIZE) {
        float d4d8 = qk_ld_f16(x) * qk_ld_f32(y[i].d);
        const int8_t *q8 = y[i].qs;
        for (int s = 0; s < QK_K / SUB; s++) {
            float dl = d4d8 * (float)iq4_xs_scale(x, s);
            sumf += dl * (float)dot_sub(x + 8 + s * (SUB / 2), q8 + s * SUB);
        }
    }
    return sumf;
}

const qk_kernel_ops qk_ops_iq4[] = {
    {.id = QK_IQ4_NL, .to_float = iq4_nl_to_float, .quantize = iq4_nl_quantize, .vec_dot = iq4_nl_vec_dot},
    {.id = QK_IQ4_XS, .to_float = iq4_xs_to_float, .quantize = iq4_xs_quantize, .vec_dot = iq4_xs_vec_dot},
    {.id = -1},
};
