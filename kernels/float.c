/* float.c - plain element types: F32 F16 BF16 F64, the signed integers
 * I8..I64 and the checkpoint-only U8..U64 and BOOL.
 *
 * All are little-endian elements, read with memcpy (rows need not be
 * aligned).  F32, F16 and BF16 encode (ggml_quantize_chunk's
 * ggml_fp32_to_fp16_row / ggml_fp32_to_bf16_row_ref, plain copy for F32),
 * serve as their own activation type (from_float) and have dot products;
 * the others only decode.
 *
 * Dot products.  F32, F16 and BF16 follow THE FLOAT-DOT ORDER of
 * kernels/fdot.h, which the SIMD kernels (kernels/x86/avx2_float.c,
 * avx2_f32act.c, and any AVX-512 one) implement too, so that every level
 * returns the same bits (issue #10).  It is the order llama.cpp's CPU backend
 * uses on AVX2 machines for prompt batches (8 float lanes with FMA and a
 * fixed tree; ggml_vec_dot_f16's 32 lanes for rows that are no multiple of
 * 8), so F16 and BF16 products agree with llama.cpp's bit for bit there.
 * (llama.cpp's one-token decode takes ggml_vec_dot_f16 for every n; qk keeps
 * one order for prompt and decode, so its decode logits do not depend on
 * the batch.)  F32 x F32 is the same order on the floats themselves, and so
 * is every float-activation product (kernels/f32act.c): a quantized row
 * against float activations gives the bits of the F32 product on the row's
 * decoded values, so `--act-type f32` on a quantized model equals the model
 * dequantized to F32 (issue #24).  The product of two F16 values is exact
 * in float (22-bit significand, magnitude within [2^-48, 2^32]), so x * y +
 * lane rounds once, as fmaf does; F32 and BF16 products can round or leave
 * the float range, so the order is defined with fmaf (glibc's is correctly
 * rounded, like the FMA instruction).
 */
#include <math.h>
#include <string.h>

#include "kernels/fdot.h"
#include "kernels/half.h"
#include "kernels/types.h"

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
    float a[64], b[64];
    qk_fdot_acc acc;
    qk_fdot_begin(&acc, n);
    for (int64_t i = 0; i < n; i += 64) {
        const int64_t m = n - i < 64 ? n - i : 64;
        memcpy(a, x + 4 * i, (size_t)m * 4);
        memcpy(b, y + 4 * i, (size_t)m * 4);
        qk_fdot_feed(&acc, i, a, b, m);
    }
    return qk_fdot_end(&acc);
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

/* The float-dot order (kernels/fdot.h) over 2-byte elements decoded by dec. */
#define FLOAT_DOT(name, dec)                                       \
    static float name(int64_t n, const void *x, const void *y)     \
    {                                                              \
        float a[64], b[64];                                        \
        qk_fdot_acc acc;                                           \
        qk_fdot_begin(&acc, n);                                    \
        for (int64_t i = 0; i < n; i += 64) {                      \
            const int64_t m = n - i < 64 ? n - i : 64;             \
            for (int64_t k = 0; k < m; k++) {                      \
                a[k] = dec(ld16(x, i + k));                        \
                b[k] = dec(ld16(y, i + k));                        \
            }                                                      \
            qk_fdot_feed(&acc, i, a, b, m);                        \
        }                                                          \
        return qk_fdot_end(&acc);                                  \
    }

FLOAT_DOT(f16_vec_dot, qk_f16_to_f32)
FLOAT_DOT(bf16_vec_dot, qk_bf16_to_f32)

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
