/* micro.c - FP4 micro-scaled block formats, bit-exact with ggml at
 * llama.cpp d32676d (ggml-quants.c quantize_row_{mxfp4,nvfp4}_ref and
 * dequantize_row_*, ggml-cpu/quants.c ggml_vec_dot_{mxfp4,nvfp4}_q8_0_generic).
 *
 *   MXFP4  32 elements, 17 bytes: e (E8M0 scale), qs[16] (element j in the
 *          low nibble of qs[j], element j+16 in the high nibble).
 *   NVFP4  64 elements, 36 bytes: d[4] (UE4M3 scale of each 16-element
 *          sub-block), qs[32] (sub-block s in qs[8s..8s+7]: element j low
 *          nibble, element j+8 high nibble).
 *
 * Both encoders ignore the importance matrix (ggml's quantize_mxfp4 and
 * quantize_nvfp4 do).  Both pair with Q8_0 activations (34-byte blocks: f16
 * scale, 32 int8). */
#include <math.h>

#include "kernels/fp4.h"
#include "kernels/quant_common.h"
#include "kernels/types.h"

#define MXFP4_BLCK 32
#define MXFP4_SIZE 17
#define NVFP4_BLCK 64
#define NVFP4_SUB 16
#define NVFP4_SIZE 36

const int8_t qk_e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

int qk_e2m1_nearest(float x, float half_scale)
{
    int best = 0;
    float best_err = fabsf((float)qk_e2m1_x2[0] * half_scale - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf((float)qk_e2m1_x2[i] * half_scale - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* ---- MXFP4 ---------------------------------------------------------------- */

/* E8M0 exponent: floor(log2(amax)) - 2 + 127, so that amax / 2^(e-127) < 8,
 * just above 6, the largest E2M1 magnitude (ggml's choice; no clamping). */
static uint8_t mxfp4_exponent(float amax)
{
    if (!(amax > 0.0f))
        return 0;
    return (uint8_t)(unsigned)qk_trunc_i32(floorf(log2f(amax)) - 2 + 127);
}

static void mxfp4_encode_block(const float *x, uint8_t *b)
{
    float amax = 0.0f;
    for (int j = 0; j < MXFP4_BLCK; j++)
        if (amax < fabsf(x[j]))
            amax = fabsf(x[j]);
    uint8_t e = mxfp4_exponent(amax);
    float d = qk_e8m0_to_f32_half(e);
    b[0] = e;
    for (int j = 0; j < MXFP4_BLCK / 2; j++) {
        int lo = qk_e2m1_nearest(x[j], d), hi = qk_e2m1_nearest(x[j + MXFP4_BLCK / 2], d);
        b[1 + j] = (uint8_t)(lo | hi << 4);
    }
}

static size_t mxfp4_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                             const float *imatrix)
{
    (void)imatrix; /* ggml's quantize_mxfp4 ignores it */
    size_t nb = (size_t)nrows * (size_t)(ncols / MXFP4_BLCK);
    uint8_t *out = dst;
    for (size_t i = 0; i < nb; i++)
        mxfp4_encode_block(src + i * MXFP4_BLCK, out + i * MXFP4_SIZE);
    return nb * MXFP4_SIZE;
}

static void mxfp4_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / MXFP4_BLCK; i++, b += MXFP4_SIZE, dst += MXFP4_BLCK) {
        float d = qk_e8m0_to_f32_half(b[0]);
        for (int j = 0; j < MXFP4_BLCK / 2; j++) {
            dst[j] = (float)qk_e2m1_x2[b[1 + j] & 15] * d;
            dst[j + MXFP4_BLCK / 2] = (float)qk_e2m1_x2[b[1 + j] >> 4] * d;
        }
    }
}

static float mxfp4_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / MXFP4_BLCK; i++, x += MXFP4_SIZE) {
        float d = qk_ld_f16(y[i].d) * qk_e8m0_to_f32_half(x[0]);
        const int8_t *q8 = y[i].qs;
        int sum1 = 0, sum2 = 0;
        for (int j = 0; j < MXFP4_BLCK / 2; j++) {
            sum1 += q8[j] * qk_e2m1_x2[x[1 + j] & 15];
            sum2 += q8[j + MXFP4_BLCK / 2] * qk_e2m1_x2[x[1 + j] >> 4];
        }
        sumf += d * (float)(sum1 + sum2);
    }
    return sumf;
}

/* ---- NVFP4 ---------------------------------------------------------------- */

/* One 16-element sub-block: UE4M3 scale amax/6 (6 = largest E2M1 value), then
 * each element to the nearest code at the DECODED scale.  Writes 8 bytes. */
static uint8_t nvfp4_encode_sub(const float *x, uint8_t *qs)
{
    float amax = 0.0f;
    for (int j = 0; j < NVFP4_SUB; j++)
        if (amax < fabsf(x[j]))
            amax = fabsf(x[j]);
    uint8_t ue = qk_f32_to_ue4m3(amax / 6.0f);
    float d = qk_ue4m3_to_f32_half(ue);
    for (int j = 0; j < NVFP4_SUB / 2; j++) {
        int lo = qk_e2m1_nearest(x[j], d), hi = qk_e2m1_nearest(x[j + NVFP4_SUB / 2], d);
        qs[j] = (uint8_t)(lo | hi << 4);
    }
    return ue;
}

static size_t nvfp4_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                             const float *imatrix)
{
    (void)imatrix; /* ggml's quantize_nvfp4 ignores it */
    size_t nb = (size_t)nrows * (size_t)(ncols / NVFP4_BLCK);
    uint8_t *b = dst;
    for (size_t i = 0; i < nb; i++, b += NVFP4_SIZE, src += NVFP4_BLCK)
        for (int s = 0; s < NVFP4_BLCK / NVFP4_SUB; s++)
            b[s] = nvfp4_encode_sub(src + s * NVFP4_SUB, b + 4 + s * (NVFP4_SUB / 2));
    return nb * NVFP4_SIZE;
}

static void nvfp4_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / NVFP4_BLCK; i++, b += NVFP4_SIZE) {
        for (int s = 0; s < NVFP4_BLCK / NVFP4_SUB; s++, dst += NVFP4_SUB) {
            float d = qk_ue4m3_to_f32_half(b[s]);
            const uint8_t *qs = b + 4 + s * (NVFP4_SUB / 2);
            for (int j = 0; j < NVFP4_SUB / 2; j++) {
                dst[j] = (float)qk_e2m1_x2[qs[j] & 15] * d;
                dst[j + NVFP4_SUB / 2] = (float)qk_e2m1_x2[qs[j] >> 4] * d;
            }
        }
    }
}

/* One NVFP4 block spans two Q8_0 blocks; sub-blocks 0,1 use the first. */
static float nvfp4_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const qk_block_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / NVFP4_BLCK; i++, x += NVFP4_SIZE) {
        for (int s = 0; s < NVFP4_BLCK / NVFP4_SUB; s++) {
            float d = qk_ue4m3_to_f32_half(x[s]);
            const qk_block_q8_0 *yb = &y[2 * i + s / 2];
            float dy = qk_ld_f16(yb->d);
            const int8_t *q8 = yb->qs + (s % 2) * NVFP4_SUB;
            const uint8_t *qs = x + 4 + s * (NVFP4_SUB / 2);
            int lo = 0, hi = 0;
            for (int j = 0; j < NVFP4_SUB / 2; j++) {
                lo += q8[j] * qk_e2m1_x2[qs[j] & 15];
                hi += q8[j + NVFP4_SUB / 2] * qk_e2m1_x2[qs[j] >> 4];
            }
            sumf += dy * d * (float)(lo + hi);
        }
    }
    return sumf;
}

const qk_kernel_ops qk_ops_micro[] = {
    {.id = QK_MXFP4, .to_float = mxfp4_to_float, .quantize = mxfp4_quantize, .vec_dot = mxfp4_vec_dot},
    {.id = QK_NVFP4, .to_float = nvfp4_to_float, .quantize = nvfp4_quantize, .vec_dot = nvfp4_vec_dot},
    {.id = -1},
};
