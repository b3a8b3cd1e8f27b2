/* lowbit.c - Q1_0 and Q2_0, bit-exact with ggml at llama.cpp d32676d
 * (ggml-quants.c quantize_row_q{1,2}_0_ref, quantize_q{1,2}_0,
 * dequantize_row_q{1,2}_0; ggml-cpu/quants.c ggml_vec_dot_q{1,2}_0_q8_0_generic).
 *
 *   Q1_0  128 elements, 18 bytes: d (f16), qs[16]: bit j%8 of qs[j/8] is the
 *         sign of element j (1: +d, 0: -d); d is the mean absolute value.
 *   Q2_0   64 elements, 18 bytes: d (f16), qs[16]: bits 2(j%4)..+1 of qs[j/4]
 *         hold q in 0..3 for element j, value (q-1)*d; d is the absolute max.
 *
 * ggml's quantize_q{1,2}_0 accept an importance matrix but do not use it (the
 * imatrix path only walks the rows one by one), so neither do we.  Both pair
 * with Q8_0 activations (34-byte blocks): Q1_0 spans four, Q2_0 two. */
#include <math.h>

#include "kernels/quant_common.h"
#include "kernels/types.h"

#define Q1_0_BLCK 128
#define Q2_0_BLCK 64
#define LOWBIT_SIZE 18 /* both types */
#define Q8_0_BLCK 32

/* ---- Q1_0 ----------------------------------------------------------------- */

static void q1_0_encode_block(const float *x, uint8_t *b)
{
    float sum_abs = 0.0f;
    for (int j = 0; j < Q1_0_BLCK; j++)
        sum_abs += fabsf(x[j]);
    qk_st_f16(b, sum_abs / Q1_0_BLCK);
    uint8_t *qs = b + 2;
    for (int j = 0; j < Q1_0_BLCK / 8; j++)
        qs[j] = 0;
    for (int j = 0; j < Q1_0_BLCK; j++)
        if (x[j] >= 0.0f) /* -0 counts as non-negative, NaN as negative */
            qs[j / 8] |= (uint8_t)(1u << (j % 8));
}

static size_t q1_0_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                            const float *imatrix)
{
    (void)imatrix; /* unused by ggml too */
    size_t nb = (size_t)nrows * (size_t)(ncols / Q1_0_BLCK);
    uint8_t *out = dst;
    for (size_t i = 0; i < nb; i++)
        q1_0_encode_block(src + i * Q1_0_BLCK, out + i * LOWBIT_SIZE);
    return nb * LOWBIT_SIZE;
}

static void q1_0_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / Q1_0_BLCK; i++, b += LOWBIT_SIZE, dst += Q1_0_BLCK) {
        float d = qk_ld_f16(b);
        for (int j = 0; j < Q1_0_BLCK; j++)
            dst[j] = (b[2 + j / 8] >> (j % 8)) & 1 ? d : -d;
    }
}

static float q1_0_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / Q1_0_BLCK; i++, x += LOWBIT_SIZE) {
        float d0 = qk_ld_f16(x);
        float sumi = 0.0f;
        for (int k = 0; k < Q1_0_BLCK / Q8_0_BLCK; k++, y++) {
            float d1 = qk_ld_f16(y->d);
            const int8_t *q8 = y->qs;
            const uint8_t *bits = x + 2 + k * 4;
            int s = 0;
            for (int j = 0; j < Q8_0_BLCK; j++)
                s += (bits[j / 8] >> (j % 8)) & 1 ? q8[j] : -q8[j];
            sumi += d1 * (float)s;
        }
        sumf += d0 * sumi;
    }
    return sumf;
}

/* ---- Q2_0 ----------------------------------------------------------------- */

static void q2_0_encode_block(const float *x, uint8_t *b)
{
    float amax = 0.0f;
    for (int j = 0; j < Q2_0_BLCK; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    float id = amax > 0.0f ? 1.0f / amax : 0.0f;
    qk_st_f16(b, amax);
    uint8_t *qs = b + 2;
    for (int j = 0; j < Q2_0_BLCK / 4; j++)
        qs[j] = 0;
    for (int j = 0; j < Q2_0_BLCK; j++) {
        int q = qk_trunc_i32(roundf(x[j] * id));
        q = q < -1 ? 0 : q > 2 ? 3 : q + 1; /* round(x/d) + 1, clamped to 0..3 */
        qs[j / 4] |= (uint8_t)(q << (j % 4) * 2);
    }
}

static size_t q2_0_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                            const float *imatrix)
{
    (void)imatrix; /* unused by ggml too */
    size_t nb = (size_t)nrows * (size_t)(ncols / Q2_0_BLCK);
    uint8_t *out = dst;
    for (size_t i = 0; i < nb; i++)
        q2_0_encode_block(src + i * Q2_0_BLCK, out + i * LOWBIT_SIZE);
    return nb * LOWBIT_SIZE;
}

static int q2_0_code(const uint8_t *qs, int j) { return (qs[j / 4] >> (j % 4) * 2) & 3; }

static void q2_0_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / Q2_0_BLCK; i++, b += LOWBIT_SIZE, dst += Q2_0_BLCK) {
        float d = qk_ld_f16(b);
        for (int j = 0; j < Q2_0_BLCK; j++)
            dst[j] = (float)(q2_0_code(b + 2, j) - 1) * d;
    }
}

static float q2_0_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / Q2_0_BLCK; i++, x += LOWBIT_SIZE) {
        float d0 = qk_ld_f16(x);
        float sumi = 0.0f;
        for (int k = 0; k < Q2_0_BLCK / Q8_0_BLCK; k++, y++) {
            float d1 = qk_ld_f16(y->d);
            const int8_t *q8 = y->qs;
            int s = 0;
            for (int j = 0; j < Q8_0_BLCK; j++)
                s += (q2_0_code(x + 2, k * Q8_0_BLCK + j) - 1) * q8[j];
            sumi += d1 * (float)s;
        }
        sumf += d0 * sumi;
    }
    return sumf;
}

const qk_kernel_ops qk_ops_lowbit[] = {
    {.id = QK_Q1_0, .to_float = q1_0_to_float, .quantize = q1_0_quantize, .vec_dot = q1_0_vec_dot},
    {.id = QK_Q2_0, .to_float = q2_0_to_float, .quantize = q2_0_quantize, .vec_dot = q2_0_vec_dot},
    {.id = -1},
};
