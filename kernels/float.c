/* float.c - plain element types: F32 F16 BF16 F64, the signed integers
 * I8..I64 and the checkpoint-only U8..U64 and BOOL.
 *
 * All are little-endian elements, read with memcpy (rows need not be
 * aligned).  F32, F16 and BF16 encode (ggml_quantize_chunk's
 * ggml_fp32_to_fp16_row / ggml_fp32_to_bf16_row_ref, plain copy for F32),
 * serve as their own activation type (from_float) and have dot products;
 * the others only decode.
 *
 * Dot products follow ggml-cpu vec.cpp's scalar paths (no GGML_SIMD): the
 * sum is kept in double (ggml_float) and each term is the float product
 * converted to double, rounded to float once at the end:
 *   F32:  sum += (double)(x[i] * y[i])      (the float product is rounded)
 *   F16:  sum += (double)(f32(x[i]) * f32(y[i]))
 *   BF16: sum += (double)(f32(x[i]) * f32(y[i]))
 * For F16 and BF16 the float product is exact (11- and 8-bit significands),
 * so these two are the correctly rounded dot except for the double sum.
 * The SIMD paths of ggml accumulate in float lanes and differ in the last
 * bits; the scalar path is the deterministic reference.
 */
#include <string.h>

#include "half.h"
#include "types.h"

/* ---- F32 --------------------------------------------------------------- */

static void f32_to_float(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void f32_from_float(const float *src, void *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static size_t f32_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                           const float *imatrix)
{
    (void)imatrix;
    f32_from_float(src, dst, nrows * ncols);
    return (size_t)nrows * (size_t)ncols * sizeof(float);
}

static float f32_vec_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float a, b;
        memcpy(&a, x + 4 * i, 4);
        memcpy(&b, y + 4 * i, 4);
        sum += (double)(a * b);
    }
    return (float)sum;
}

/* ---- F16 and BF16 ------------------------------------------------------ */

static inline uint16_t ld16(const uint8_t *p, int64_t i)
{
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return h;
}
static inline void st16(uint8_t *p, int64_t i, uint16_t h) { memcpy(p + 2 * i, &h, 2); }

static void f16_to_float(const void *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = qk_f16_to_f32(ld16(src, i));
}

static void f16_from_float(const float *src, void *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        st16(dst, i, qk_f32_to_f16(src[i]));
}

static size_t f16_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                           const float *imatrix)
{
    (void)imatrix;
    f16_from_float(src, dst, nrows * ncols);
    return (size_t)nrows * (size_t)ncols * 2;
}

static float f16_vec_dot(int64_t n, const void *x, const void *y)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(qk_f16_to_f32(ld16(x, i)) * qk_f16_to_f32(ld16(y, i)));
    return (float)sum;
}

static void bf16_to_float(const void *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = qk_bf16_to_f32(ld16(src, i));
}

static void bf16_from_float(const float *src, void *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        st16(dst, i, qk_f32_to_bf16(src[i]));
}

static size_t bf16_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols,
                            const float *imatrix)
{
    (void)imatrix;
    bf16_from_float(src, dst, nrows * ncols);
    return (size_t)nrows * (size_t)ncols * 2;
}

static float bf16_vec_dot(int64_t n, const void *x, const void *y)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(qk_bf16_to_f32(ld16(x, i)) * qk_bf16_to_f32(ld16(y, i)));
    return (float)sum;
}

/* ---- decode-only element types ---------------------------------------- */

/* dst[i] = (float)element i, for each fixed-width element type. */
#define ELEMENT_DECODER(name, ctype)                               \
    static void name(const void *src, float *dst, int64_t n)       \
    {                                                              \
        const uint8_t *p = src;                                    \
        for (int64_t i = 0; i < n; i++) {                          \
            ctype v;                                               \
            memcpy(&v, p + (size_t)i * sizeof v, sizeof v);        \
            dst[i] = (float)v;                                     \
        }                                                          \
    }

ELEMENT_DECODER(f64_to_float, double)
ELEMENT_DECODER(i8_to_float, int8_t)
ELEMENT_DECODER(i16_to_float, int16_t)
ELEMENT_DECODER(i32_to_float, int32_t)
ELEMENT_DECODER(i64_to_float, int64_t)
ELEMENT_DECODER(u8_to_float, uint8_t)
ELEMENT_DECODER(u16_to_float, uint16_t)
ELEMENT_DECODER(u32_to_float, uint32_t)
ELEMENT_DECODER(u64_to_float, uint64_t)

/* One byte per element; any non-zero byte is true (1.0f). */
static void bool_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = p[i] ? 1.0f : 0.0f;
}

const qk_kernel_ops qk_ops_float[] = {
    {QK_F32, f32_to_float, f32_quantize, f32_from_float, f32_vec_dot},
    {QK_F16, f16_to_float, f16_quantize, f16_from_float, f16_vec_dot},
    {QK_BF16, bf16_to_float, bf16_quantize, bf16_from_float, bf16_vec_dot},
    {QK_F64, f64_to_float, NULL, NULL, NULL},
    {QK_I8, i8_to_float, NULL, NULL, NULL},
    {QK_I16, i16_to_float, NULL, NULL, NULL},
    {QK_I32, i32_to_float, NULL, NULL, NULL},
    {QK_I64, i64_to_float, NULL, NULL, NULL},
    {QK_U8, u8_to_float, NULL, NULL, NULL},
    {QK_U16, u16_to_float, NULL, NULL, NULL},
    {QK_U32, u32_to_float, NULL, NULL, NULL},
    {QK_U64, u64_to_float, NULL, NULL, NULL},
    {QK_BOOL, bool_to_float, NULL, NULL, NULL},
    {.id = -1},
};
