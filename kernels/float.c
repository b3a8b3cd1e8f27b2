/* float.c - plain element types: F32 F16 BF16 F64, the signed integers
 * I8..I64 and the checkpoint-only U8..U64 and BOOL.
 *
 * All are little-endian elements, read with memcpy (rows need not be
 * aligned).  F32, F16 and BF16 encode (ggml_quantize_chunk's
 * ggml_fp32_to_fp16_row / ggml_fp32_to_bf16_row_ref, plain copy for F32),
 * serve as their own activation type (from_float) and have dot products;
 * the others only decode.
 *
 * Dot products.  F32 follows ggml-cpu vec.cpp's scalar path (no GGML_SIMD):
 * the sum is kept in double (ggml_float), each term the float product
 * converted to double, rounded to float once at the end:
 *   F32:  sum += (double)(x[i] * y[i])      (the float product is rounded)
 * F32 x F32 has no SIMD kernel, so this is its result at every CPU level.
 *
 * F16 and BF16 follow THE FLOAT-DOT ORDER, which the SIMD kernels
 * (kernels/x86/avx2_float.c, and any AVX-512 one) implement too, so that
 * every level returns the same bits (issue #10).  It is the order llama.cpp's
 * CPU backend uses on AVX2 machines for prompt batches, so F16 and BF16
 * products agree with llama.cpp's bit for bit there:
 * - n a multiple of 8 (llamafile_sgemm's tinyBLAS<8, __m256>):
 *     8 float lanes, all +0;  lane[i % 8] = fmaf(x[i], y[i], lane[i % 8])
 *     for i = 0 .. n-1;  result = ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
 * - otherwise (ggml_vec_dot_f16, GGML_F16_STEP 32 / EPR 8):
 *     np = n - n % 32;  32 lanes, lane[i % 32] = fmaf(x[i], y[i], lane[i % 32])
 *     for i < np;  lane[l] += lane[l + 16] (l < 16);  lane[l] += lane[l + 8]
 *     (l < 8);  t[l] = lane[l] + lane[l + 4] (l < 4);  s = (double)((t0+t1)
 *     + (t2+t3));  s += (double)(x[i] * y[i]) for i = np .. n-1 in order;
 *     result (float)s.
 * (llama.cpp's one-token decode takes ggml_vec_dot_f16 for every n; qk keeps
 * one order for prompt and decode, so its decode logits do not depend on
 * the batch.)  The product of two F16 values is exact in float (22-bit
 * significand, magnitude within [2^-48, 2^32]), so x * y + lane rounds
 * once, as fmaf does; BF16 products can leave the float range, so BF16
 * calls fmaf (glibc's is correctly rounded, like the FMA instruction).
 */
#include <math.h>
#include <string.h>

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

/* ---- the float-dot order (see the header comment) ---------------------- */

/* ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)): tinyBLAS's hsum(__m256). */
static float fdot_hsum8(const float *l)
{
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* ggml_vec_dot_f16's GGML_F16_VEC_REDUCE of 32 lanes (clobbers lane). */
static float fdot_reduce32(float *lane)
{
    for (int l = 0; l < 16; l++)
        lane[l] = lane[l] + lane[l + 16];
    for (int l = 0; l < 8; l++)
        lane[l] = lane[l] + lane[l + 8];
    const float t0 = lane[0] + lane[4], t1 = lane[1] + lane[5], t2 = lane[2] + lane[6],
                t3 = lane[3] + lane[7];
    return (t0 + t1) + (t2 + t3);
}

/* The float-dot order over elements decoded by dec (see the header). */
#define FLOAT_DOT(name, dec)                                                      \
    static float name(int64_t n, const void *x, const void *y)                    \
    {                                                                             \
        if (n % 8 == 0) {                                                         \
            float lane[8] = {0};                                                  \
            for (int64_t i = 0; i < n; i++)                                       \
                lane[i % 8] = fmaf(dec(ld16(x, i)), dec(ld16(y, i)), lane[i % 8]); \
            return fdot_hsum8(lane);                                              \
        }                                                                         \
        float lane[32] = {0};                                                     \
        const int64_t np = n - n % 32;                                            \
        for (int64_t i = 0; i < np; i++)                                          \
            lane[i % 32] = fmaf(dec(ld16(x, i)), dec(ld16(y, i)), lane[i % 32]);  \
        double s = fdot_reduce32(lane);                                           \
        for (int64_t i = np; i < n; i++)                                          \
            s += (double)(dec(ld16(x, i)) * dec(ld16(y, i)));                     \
        return (float)s;                                                          \
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
