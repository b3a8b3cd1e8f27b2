/* wq_int.c - the integer products of the parted layouts (wq.h): weights
 * whose codes are integers against integer activation codes, the sums
 * exact, then the scales, as the engines' scaled GEMMs apply them.
 *
 * INT8 activations (QK_A_I8) with W_INT8 (compressed-tensors int-quantized
 * W8A8) or W_PACK (pack-quantized W4A8 and friends): per scale group g of
 * the weight row (the whole row for per-channel or per-tensor scales)
 *     acc_g = sum_{k in g} wv_k * a_k - za * sum_{k in g} wv_k   (int64, exact)
 * where wv_k is the weight's integer value (int8 code; pack code - 2^(b-1) -
 * zero point) and za the token's zero point (0 when symmetric); then
 *     sum = 0;  sum = sum + (float)acc_g * ws_g  for g in order;
 *     out = as * sum.
 * With one group that is out = as * (ws * float(acc)): vLLM's cutlass
 * epilogues (csrc/quantization/cutlass_w8a8/Epilogues.md, ScaledEpilogue
 * D = a_scale * (b_scale * accum); the azp variants subtract azp * the
 * weight column sums from the int32 accumulator first).
 *
 * NVFP4 activations (QK_A_NV4) with W_NVFP4 (W4A4): per block b of 16 the
 * exact integer isum_b = sum of the doubled E2M1 values of weight and
 * activation codes (|isum| <= 16 * 144), then
 *     lane[b % 8] = fmaf((float)isum_b, dw_b * da_b, lane[b % 8])
 * (dw_b the weight block's multiplier as qk_wq_fp4_mult gives it, da_b the
 * activation's float(sf) / g), s = hsum8(lane), plus the blocks past the
 * last multiple of 8 as s = s + (float)isum_b * (dw_b * da_b) in order, and
 * out = s * 0.25 (the doubling of both codes; exact).  This is vLLM's NVFP4
 * GEMM (cutlass_scaled_fp4_mm: block products scaled by both block scales,
 * alpha = 1 / (global_w * global_a) applied at the end), with the global
 * scales folded into the block multipliers as compressed-tensors
 * dequantizes. */
#include <math.h>
#include <string.h>

#include "kernels/fdot.h"
#include "kernels/fp4.h"
#include "kernels/wq_impl.h"

/* Integer value of weight element (r, k) for the int8 products. */
static inline int32_t wv_of(const qk_wq *w, int64_t r, int64_t k)
{
    if (w->type == QK_W_INT8)
        return (int8_t)w->q[r * w->q_rs + k] - (w->z.p ? (int32_t)qk_wq_zero(w, r, k) : 0);
    return (int32_t)qk_wq_code(w, r, k) - w->code_offset - (int32_t)qk_wq_zero(w, r, k);
}

void qk_wq_tile_i8(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                   size_t ldo)
{
    const int64_t n = w->cols, g = w->s.cdiv < n ? w->s.cdiv : n;
    for (int t = 0; t < nt; t++) {
        const uint8_t *row = (const uint8_t *)y + (size_t)t * ys;
        qk_a_i8_head h;
        memcpy(&h, row, sizeof h);
        const int8_t *a = (const int8_t *)(row + QK_A_I8_HEAD);
        for (int r = 0; r < nr; r++) {
            float sum = 0.0f;
            for (int64_t k0 = 0; k0 < n; k0 += g) {
                int64_t dot = 0, ws = 0;
                for (int64_t k = k0; k < k0 + g && k < n; k++) {
                    const int32_t v = wv_of(w, r0 + r, k);
                    dot += (int64_t)v * a[k];
                    ws += v;
                }
                sum = sum + (float)(dot - (int64_t)h.zero * ws) * qk_wq_scale(w, r0 + r, k0);
            }
            out[(size_t)t * ldo + (size_t)r] = h.scale * sum;
        }
    }
}

int32_t qk_wq_nv4_isum(const uint8_t *q, const int8_t *a, int64_t b)
{
    int32_t isum = 0;
    for (int i = 0; i < QK_A_NV4_BLOCK; i++) {
        const int64_t k = b * QK_A_NV4_BLOCK + i;
        isum += qk_e2m1_x2[q[k / 2] >> (k % 2 * 4) & 15] * a[k];
    }
    return isum;
}

float qk_wq_nv4_mult(const qk_wq *w, const uint8_t *srow, const uint8_t *arow, int64_t b)
{
    float da;
    memcpy(&da, arow + b * (int64_t)sizeof(float), 4);
    return qk_wq_fp4_mult(w, srow[b * QK_A_NV4_BLOCK / w->s.cdiv * w->s.cs]) * da;
}

void qk_wq_tile_nv4(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                    size_t ldo)
{
    const int64_t nb = w->cols / QK_A_NV4_BLOCK, nb8 = nb - nb % 8;
    for (int t = 0; t < nt; t++) {
        const uint8_t *row = (const uint8_t *)y + (size_t)t * ys;
        const int8_t *a = (const int8_t *)(row + nb * 8);
        for (int r = 0; r < nr; r++) {
            const uint8_t *q = w->q + (r0 + r) * w->q_rs;
            const uint8_t *srow = w->s.p + (r0 + r) / w->s.rdiv * w->s.rs;
            float lane[8] = {0}, s = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const int32_t isum = qk_wq_nv4_isum(q, a, b);
                const float m = qk_wq_nv4_mult(w, srow, row, b);
                if (b < nb8) {
                    lane[b % 8] = fmaf((float)isum, m, lane[b % 8]);
                } else {
                    if (b == nb8)
                        s = qk_fdot_hsum8(lane);
                    s = s + (float)isum * m;
                }
            }
            if (nb8 == nb)
                s = qk_fdot_hsum8(lane);
            out[(size_t)t * ldo + (size_t)r] = s * 0.25f;
        }
    }
}

/* LLM.int8 (QK_A_I8O) with W_BNB8, the default backend's int8_mixed_scaled_mm:
 * out = (float)acc * (absmax * SCB) * 6.200124e-05 (int8_mm_dequant, acc the
 * exact int32 sum of the codes' products), then + x_k * w_k over the token's
 * outliers in order, w_k = (float)CB_k * SCB * 7.874015718698502e-3
 * (int8_vectorwise_dequant, the columns' float part: addmm). */
void qk_wq_tile_i8o(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out, size_t ldo)
{
    const int64_t n = w->cols;
    for (int t = 0; t < nt; t++) {
        const uint8_t *row = (const uint8_t *)y + (size_t)t * ys;
        qk_a_i8_head h;
        memcpy(&h, row, sizeof h);
        const int8_t *a = (const int8_t *)(row + QK_A_I8_HEAD);
        const uint8_t *xo = (const uint8_t *)(a + n);
        for (int r = 0; r < nr; r++) {
            const int8_t *cb = (const int8_t *)(w->q + (r0 + r) * w->q_rs);
            const float scb = qk_wq_val(w->s.p, w->s.type, r0 + r);
            int64_t acc = 0;
            for (int64_t k = 0; k < n; k++)
                acc += (int64_t)cb[k] * a[k];
            float s = (float)acc * (h.scale * scb) * 6.200124e-05f;
            for (int64_t k = 0; h.zero && k < n; k++) {
                float v;
                memcpy(&v, xo + 4 * k, 4);
                if (v != 0.0f)
                    s = s + v * ((float)cb[k] * scb * 7.874015718698502e-3f);
            }
            out[(size_t)t * ldo + (size_t)r] = s;
        }
    }
}
