/* avx2_float.c - AVX2 kernels of the float element types: F16 and BF16 dot
 * products, F16 encode/decode.  F32 x F32 stays on the scalar reference
 * (double sum): F32 weights only occur in tiny models, whose tests compare
 * printouts with llama.cpp to the last digit.
 *
 * The float dots implement the float-dot order defined in kernels/float.c
 * and so return the scalar reference's bits (issue #10; test_simd.c checks
 * it with memcmp):
 *   16 lanes; element i goes to lane i % 16, lane = fma(x[i], y[i], lane)
 *   in increasing i (register a holds lanes 0..7, b lanes 8..15); the
 *   n % 16 tail is one more step with zero-padded x and y; then
 *   lane[l] += lane[l + 8] (l < 8), lane[l] += lane[l + 4] (l < 4),
 *   lane[l] += lane[l + 2] (l < 2), result = lane[0] + lane[1] (reduce16).
 * A tile computes each (row, activation) pair with its own accumulators, so
 * tile shapes never change a value.  An AVX-512 kernel must keep this order
 * (e.g. one 16-lane register per row), not 32 lanes.
 *
 * The F16 encoder (vcvtps2ph, round to nearest even) and decoder are bitwise
 * equal to half.h, subnormals, infinities and NaNs included (the decoder
 * leaves groups with a signalling NaN to half.h, which does not quiet it). */
#include "simd_common.h"

#ifdef QK_X86

/* Lanes 0..7 and 8..15 of one step, from element pointers. */
typedef struct { __m256 a, b; } v16;

QK_TARGET_AVX2 static inline v16 ld_f16(const uint8_t *p)
{
    v16 v = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)),
             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)))};
    return v;
}

QK_TARGET_AVX2 static inline v16 ld_bf16(const uint8_t *p)
{
    const __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    const __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 16)));
    v16 v = {_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(b, 16))};
    return v;
}

/* The fixed 16 -> 1 reduction of the header comment. */
QK_TARGET_AVX2 static inline float reduce16(__m256 a, __m256 b)
{
    const __m256 s8 = _mm256_add_ps(a, b);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

/* Prompt tiles (nt >= 2) first convert blocks of the rows to float (exact
 * for F16 and BF16, with the same instructions as the streaming kernel),
 * then run the same fma sequence from the float buffers, so each weight and
 * activation element is converted once per tile instead of once per pair.
 * The 8-lane halves of a step are independent accumulators, so a
 * micro-kernel handles one half of 4 rows x up to 3 activations (12
 * accumulators in registers) and the sums live in acc[] between K blocks.
 * Per (row, activation) pair and lane, the fma operands and their order are
 * those of the streaming kernel; only the loop nest around them differs. */
#define FT_ROWS 16                 /* weight rows per block (a multiple of 4) */
#define FT_TOKS 32                 /* activation rows per block */
#define FT_STEPS 16                /* 16-element steps per K block */
#define FT_LEN (FT_STEPS * 16)     /* floats per row of a converted block */

/* acc[(r * FT_TOKS + t) * 16 + lane] += over steps of half h (lanes 8h..8h+7)
 * x[r][16 s + 8 h + j] * y[t][16 s + 8 h + j], for r < 4, t < T, s < steps. */
#define FT_MICRO(T)                                                                               \
    QK_TARGET_AVX2 static void ft_micro4x##T(int steps, const float *x, const float *y, float *acc) \
    {                                                                                              \
        __m256 c[4][T];                                                                            \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                                             \
            _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                                                            \
                c[r][t] = _mm256_loadu_ps(acc + (r * FT_TOKS + t) * 16);                          \
        for (int s = 0; s < steps; s++) {                                                          \
            __m256 vy[T];                                                                          \
            _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                                                            \
                vy[t] = _mm256_loadu_ps(y + t * FT_LEN + s * 16);                                  \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                                          \
                const __m256 vx = _mm256_loadu_ps(x + r * FT_LEN + s * 16);                        \
                _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                                                        \
                    c[r][t] = _mm256_fmadd_ps(vx, vy[t], c[r][t]);                                 \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                                             \
            _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                                                            \
                _mm256_storeu_ps(acc + (r * FT_TOKS + t) * 16, c[r][t]);                          \
    }
FT_MICRO(1)
FT_MICRO(2)
FT_MICRO(3)

/* One K block of a (4 * nq rows) x nt block: both halves of every step. */
QK_TARGET_AVX2 static void ft_block(int steps, const float *xb, int nq, const float *yb, int nt,
                                    float *acc)
{
    for (int q = 0; q < nq; q++)
        for (int t = 0; t < nt; t += 3) {
            const float *x = xb + (size_t)q * 4 * FT_LEN;
            const float *y = yb + (size_t)t * FT_LEN;
            float *a = acc + ((size_t)q * 4 * FT_TOKS + (size_t)t) * 16;
            for (int h = 0; h < 16; h += 8) {
                if (nt - t >= 3)
                    ft_micro4x3(steps, x + h, y + h, a + h);
                else if (nt - t == 2)
                    ft_micro4x2(steps, x + h, y + h, a + h);
                else
                    ft_micro4x1(steps, x + h, y + h, a + h);
            }
        }
}

/* FLOAT_TILE(name, esize, load): the tile kernel of a float element type. */
#define FLOAT_TILE(name, esize, load)                                                             \
    /* decode (nt == 1): four rows share each activation step */                                  \
    QK_TARGET_AVX2 static void name##_rows(int64_t n, const uint8_t *const xr[4], const uint8_t *y, \
                                            float out[4])                                          \
    {                                                                                              \
        __m256 a[4], b[4];                                                                         \
        for (int k = 0; k < 4; k++)                                                                \
            a[k] = b[k] = _mm256_setzero_ps();                                                     \
        const int64_t n16 = n / 16 * 16;                                                           \
        for (int64_t i = 0; i < n16; i += 16) {                                                    \
            const v16 vy = load(y + i * esize);                                                    \
            for (int k = 0; k < 4; k++) {                                                          \
                const v16 vx = load(xr[k] + i * esize);                                            \
                a[k] = _mm256_fmadd_ps(vx.a, vy.a, a[k]);                                          \
                b[k] = _mm256_fmadd_ps(vx.b, vy.b, b[k]);                                          \
            }                                                                                      \
        }                                                                                          \
        if (n16 < n) {                                                                             \
            uint8_t ty[16 * esize] = {0}, tx[16 * esize] = {0};                                    \
            memcpy(ty, y + n16 * esize, (size_t)(n - n16) * esize);                                \
            const v16 vy = load(ty);                                                               \
            for (int k = 0; k < 4; k++) {                                                          \
                memcpy(tx, xr[k] + n16 * esize, (size_t)(n - n16) * esize);                        \
                const v16 vx = load(tx);                                                           \
                a[k] = _mm256_fmadd_ps(vx.a, vy.a, a[k]);                                          \
                b[k] = _mm256_fmadd_ps(vx.b, vy.b, b[k]);                                          \
            }                                                                                      \
        }                                                                                          \
        for (int k = 0; k < 4; k++)                                                                \
            out[k] = reduce16(a[k], b[k]);                                                         \
    }                                                                                              \
    /* steps s0 .. s0 + ns - 1 of row p as floats; the partial last step of                       \
     * the row is zero padded, as in name##_rows */                                               \
    QK_TARGET_AVX2 static void name##_cvt(int64_t n, const uint8_t *p, int64_t s0, int ns, float *dst) \
    {                                                                                              \
        for (int s = 0; s < ns; s++) {                                                             \
            const int64_t e = (s0 + s) * 16;                                                       \
            v16 v;                                                                                 \
            if (e + 16 <= n) {                                                                     \
                v = load(p + e * esize);                                                           \
            } else {                                                                               \
                uint8_t tp[16 * esize] = {0};                                                      \
                memcpy(tp, p + e * esize, (size_t)(n - e) * esize);                                \
                v = load(tp);                                                                      \
            }                                                                                      \
            _mm256_storeu_ps(dst + s * 16, v.a);                                                   \
            _mm256_storeu_ps(dst + s * 16 + 8, v.b);                                               \
        }                                                                                          \
    }                                                                                              \
    /* a block of at most FT_ROWS x FT_TOKS pairs through float buffers */                        \
    QK_TARGET_AVX2 static void name##_block(int64_t n, const uint8_t *x, size_t xs, int nr,        \
                                            const uint8_t *y, size_t ys, int nt, float *out,      \
                                            size_t ldo)                                            \
    {                                                                                              \
        float xb[FT_ROWS * FT_LEN], yb[FT_TOKS * FT_LEN], acc[FT_ROWS * FT_TOKS * 16];             \
        const int nq = (nr + 3) / 4;                                                               \
        /* padding rows stay zero; their sums are never read */                                   \
        memset(xb + (size_t)nr * FT_LEN, 0, sizeof(float) * (size_t)(4 * nq - nr) * FT_LEN);      \
        for (int r = 0; r < 4 * nq; r++)                                                           \
            memset(acc + (size_t)r * FT_TOKS * 16, 0, sizeof(float) * 16 * (size_t)nt);            \
        const int64_t steps = (n + 15) / 16;                                                       \
        for (int64_t s0 = 0; s0 < steps; s0 += FT_STEPS) {                                         \
            const int ns = (int)(steps - s0 < FT_STEPS ? steps - s0 : FT_STEPS);                   \
            for (int r = 0; r < nr; r++)                                                           \
                name##_cvt(n, x + (size_t)r * xs, s0, ns, xb + (size_t)r * FT_LEN);              \
            for (int t = 0; t < nt; t++)                                                           \
                name##_cvt(n, y + (size_t)t * ys, s0, ns, yb + (size_t)t * FT_LEN);              \
            ft_block(ns, xb, nq, yb, nt, acc);                                                     \
        }                                                                                          \
        for (int t = 0; t < nt; t++)                                                               \
            for (int r = 0; r < nr; r++) {                                                         \
                const float *a = acc + ((size_t)r * FT_TOKS + (size_t)t) * 16;                     \
                out[(size_t)t * ldo + (size_t)r] = reduce16(_mm256_loadu_ps(a), _mm256_loadu_ps(a + 8)); \
            }                                                                                      \
    }                                                                                              \
    static void name##_tile(int64_t n, const void *x, size_t xs, int nr, const void *y, size_t ys, \
                            int nt, float *out, size_t ldo)                                        \
    {                                                                                              \
        if (nt >= 2) {                                                                             \
            for (int r0 = 0; r0 < nr; r0 += FT_ROWS)                                               \
                for (int t0 = 0; t0 < nt; t0 += FT_TOKS)                                           \
                    name##_block(n, (const uint8_t *)x + (size_t)r0 * xs, xs,                      \
                                 nr - r0 < FT_ROWS ? nr - r0 : FT_ROWS,                            \
                                 (const uint8_t *)y + (size_t)t0 * ys, ys,                         \
                                 nt - t0 < FT_TOKS ? nt - t0 : FT_TOKS,                            \
                                 out + (size_t)t0 * ldo + (size_t)r0, ldo);                        \
            return;                                                                                \
        }                                                                                          \
        for (int r0 = 0; r0 < nr; r0 += 4) {                                                       \
            const int m = nr - r0 < 4 ? nr - r0 : 4;                                               \
            const uint8_t *xr[4];                                                                  \
            for (int k = 0; k < 4; k++)                                                            \
                xr[k] = (const uint8_t *)x + (size_t)(r0 + (k < m ? k : 0)) * xs;                  \
            for (int t = 0; t < nt; t++) {                                                         \
                float o[4];                                                                        \
                name##_rows(n, xr, (const uint8_t *)y + (size_t)t * ys, o);                        \
                for (int k = 0; k < m; k++)                                                        \
                    out[(size_t)t * ldo + (size_t)(r0 + k)] = o[k];                                \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    QK_VEC_DOT_OF_TILE(name##_dot, name##_tile)

FLOAT_TILE(f16, 2, ld_f16)
FLOAT_TILE(bf16, 2, ld_bf16)

QK_TARGET_AVX2 static void f16_from_float(const float *src, void *dst, int64_t n)
{
    uint8_t *d = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + 2 * i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        qk_st_u16(d + 2 * i, qk_f32_to_f16(src[i]));
}

QK_TARGET_AVX2 static void f16_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        /* vcvtph2ps quiets signalling NaNs; half.h keeps them: those go scalar */
        const __m128i h = _mm_loadu_si128((const __m128i *)(s + 2 * i));
        const __m128i a = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
        const __m128i snan = _mm_and_si128(_mm_cmpgt_epi16(a, _mm_set1_epi16(0x7c00)),
                                           _mm_cmplt_epi16(a, _mm_set1_epi16(0x7e00)));
        if (_mm_movemask_epi8(snan))
            for (int k = 0; k < 8; k++)
                dst[i + k] = qk_f16_to_f32(qk_ld_u16(s + 2 * (i + k)));
        else
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++)
        dst[i] = qk_f16_to_f32(qk_ld_u16(s + 2 * i));
}

const qk_simd_ops qk_x86_avx2_float[] = {
    {QK_F16, f16_tile, f16_dot, f16_from_float, f16_to_float, NULL},
    {QK_BF16, bf16_tile, bf16_dot, NULL, NULL, NULL},
    {.id = -1},
};

#endif
