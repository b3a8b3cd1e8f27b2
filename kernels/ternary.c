/* ternary.c - TQ1_0 and TQ2_0, ternary {-1, 0, +1} * d formats for BitNet
 * b1.58 and TriLM models, bit-exact with ggml at llama.cpp d32676d
 * (ggml-quants.c quantize_row_tq{1,2}_0_ref, dequantize_row_tq{1,2}_0;
 * ggml-cpu/quants.c ggml_vec_dot_tq{1,2}_0_q8_K_generic).
 *
 * Both use 256-element blocks with d = the absolute max (f16, LAST in the
 * block) and trit t = round(x/d) + 1 in 0..2.  Neither encoder uses the
 * importance matrix (ggml's do not).  Both pair with Q8_K activations (292
 * bytes: f32 d, 256 int8, 16 int16 sums).
 *
 *   TQ2_0  66 bytes: qs[64], d.  Element 128c + 32n + m is bits 2n..2n+1 of
 *          qs[32c + m].
 *   TQ1_0  54 bytes: qs[48], qh[4], d.  Five trits per byte, base 3 with
 *          the first trit most significant, stored as the fixed-point
 *          fraction ceil(v * 256 / 243) so that a trit is read back as the
 *          top bits of (byte * 3^n) * 3 / 256.  Groups: qs[0..31] hold
 *          elements m + 32n (n = 0..4), qs[32..47] elements 160 + m + 16n,
 *          qh[0..3] four trits each, elements 240 + j + 4n (n = 0..3), with a
 *          fifth zero trit appended as the least significant.
 */
#include <math.h>

#include "kernels/quant_common.h"
#include "kernels/types.h"

#define TQ_BLCK 256
#define TQ1_0_SIZE 54
#define TQ2_0_SIZE 66

/* Absolute max of a block, folded like ggml's MAX(amax, |x|) (so NaNs behave
 * the same way too). */
static float block_amax(const float *x)
{
    float amax = 0.0f;
    for (int j = 0; j < TQ_BLCK; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    return amax;
}

/* Trit of x at inverse scale id: lround(x*id) + 1, 0..2 for finite input
 * (returned modulo 256 like ggml's uint8_t arithmetic for anything else). */
static unsigned trit(float x, float id) { return (unsigned)(lroundf(x * id) + 1); }

/* ---- TQ1_0 ---------------------------------------------------------------- */

/* Pack the base-3 number of the trits x[0], x[stride], ... (count of them,
 * first most significant) as the byte ceil(v * 256 / 243). */
static uint8_t pack_trits(const float *x, int stride, int count, float id)
{
    uint8_t q = 0;
    for (int n = 0; n < count; n++)
        q = (uint8_t)(q * 3 + trit(x[n * stride], id));
    if (count == 4)
        q = (uint8_t)(q * 3); /* the qh bytes: a zero fifth trit */
    return (uint8_t)(((uint16_t)q * 256 + 242) / 243);
}

static void tq1_0_encode_block(const float *x, uint8_t *b)
{
    float d = block_amax(x);
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int m = 0; m < 32; m++)
        b[m] = pack_trits(x + m, 32, 5, id);
    for (int m = 0; m < 16; m++)
        b[32 + m] = pack_trits(x + 160 + m, 16, 5, id);
    for (int j = 0; j < 4; j++)
        b[48 + j] = pack_trits(x + 240 + j, 4, 4, id);
    qk_st_f16(b + 52, d);
}

static size_t tq1_0_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                             const float *imatrix)
{
    (void)imatrix; /* ggml's quantize_tq1_0 ignores it */
    size_t nb = (size_t)nrows * (size_t)(ncols / TQ_BLCK);
    uint8_t *out = dst;
    for (size_t i = 0; i < nb; i++)
        tq1_0_encode_block(src + i * TQ_BLCK, out + i * TQ1_0_SIZE);
    return nb * TQ1_0_SIZE;
}

/* Trit n (0 = most significant) of a packed byte, minus 1: -1, 0 or +1. */
static int unpack_trit(uint8_t byte, int n)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t q = (uint8_t)(byte * pow3[n]);
    return (((uint16_t)q * 3) >> 8) - 1;
}

/* The 256 trits of a TQ1_0 block, in element order, as -1, 0, +1. */
static void tq1_0_unpack(const uint8_t *b, int8_t *t)
{
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++)
            t[32 * n + m] = (int8_t)unpack_trit(b[m], n);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++)
            t[160 + 16 * n + m] = (int8_t)unpack_trit(b[32 + m], n);
    for (int n = 0; n < 4; n++)
        for (int j = 0; j < 4; j++)
            t[240 + 4 * n + j] = (int8_t)unpack_trit(b[48 + j], n);
}

static void tq1_0_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *b = src;
    int8_t t[TQ_BLCK];
    for (int64_t i = 0; i < n / TQ_BLCK; i++, b += TQ1_0_SIZE, dst += TQ_BLCK) {
        float d = qk_ld_f16(b + 52);
        tq1_0_unpack(b, t);
        for (int j = 0; j < TQ_BLCK; j++)
            dst[j] = (float)t[j] * d;
    }
}

static float tq1_0_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_K *y = vy;
    int8_t t[TQ_BLCK];
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / TQ_BLCK; i++, x += TQ1_0_SIZE) {
        const int8_t *q8 = y[i].qs;
        tq1_0_unpack(x, t);
        int sum = 0;
        for (int j = 0; j < TQ_BLCK; j++)
            sum += t[j] * q8[j];
        sumf += (float)sum * (qk_ld_f16(x + 52) * qk_ld_f32(y[i].d));
    }
    return sumf;
}

/* ---- TQ2_0 ---------------------------------------------------------------- */

static void tq2_0_encode_block(const float *x, uint8_t *b)
{
    float d = block_amax(x);
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int c = 0; c < 2; c++, x += 128)
        for (int m = 0; m < 32; m++) {
            unsigned q = 0;
            for (int k = 0; k < 4; k++)
                q += (trit(x[m + 32 * k], id) & 3) << (2 * k);
            b[32 * c + m] = (uint8_t)q;
        }
    qk_st_f16(b + 64, d);
}

static size_t tq2_0_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                             const float *imatrix)
{
    (void)imatrix; /* ggml's quantize_tq2_0 ignores it */
    size_t nb = (size_t)nrows * (size_t)(ncols / TQ_BLCK);
    uint8_t *out = dst;
    for (size_t i = 0; i < nb; i++)
        tq2_0_encode_block(src + i * TQ_BLCK, out + i * TQ2_0_SIZE);
    return nb * TQ2_0_SIZE;
}

/* Element j of a TQ2_0 block as -1, 0, +1 (or 2 for the unused code 3). */
static int tq2_0_trit(const uint8_t *qs, int j)
{
    return ((qs[32 * (j / 128) + j % 32] >> (2 * (j % 128 / 32))) & 3) - 1;
}

static void tq2_0_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / TQ_BLCK; i++, b += TQ2_0_SIZE, dst += TQ_BLCK) {
        float d = qk_ld_f16(b + 64);
        for (int j = 0; j < TQ_BLCK; j++)
            dst[j] = (float)tq2_0_trit(b, j) * d;
    }
}

static float tq2_0_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_K *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / TQ_BLCK; i++, x += TQ2_0_SIZE) {
        const int8_t *q8 = y[i].qs;
        int sum = 0;
        for (int j = 0; j < TQ_BLCK; j++)
            sum += q8[j] * tq2_0_trit(x, j);
        float d = qk_ld_f32(y[i].d) * qk_ld_f16(x + 64);
        sumf += (float)sum * d;
    }
    return sumf;
}

const qk_kernel_ops qk_ops_ternary[] = {
    {.id = QK_TQ1_0, .to_float = tq1_0_to_float, .quantize = tq1_0_quantize, .vec_dot = tq1_0_vec_dot},
    {.id = QK_TQ2_0, .to_float = tq2_0_to_float, .quantize = tq2_0_quantize, .vec_dot = tq2_0_vec_dot},
    {.id = -1},
};
