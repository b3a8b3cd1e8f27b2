/* avx2_float.c - AVX2 kernels of the float element types: F16 and BF16 dot
 * products, F16 encode/decode.  F32 x F32 is in avx2_f32act.c (the same
 * order, read in place).
 *
 * The float dots implement the float-dot order defined in kernels/float.c
 * (llama.cpp's own AVX2 order) and so return the scalar reference's bits
 * (issue #10; test_simd.c checks it with memcmp):
 * - n % 8 == 0: one 8-lane register per (row, activation) pair, one fused
 *   multiply-add per 8 elements in increasing order, then qk_hsum8_ps; a tile keeps
 *   4 rows x 3 activations of such accumulators in registers over the whole
 *   row (decode: 8 rows x 1), converting F16/BF16 to float as it loads;
 * - otherwise: four 8-lane registers over 32-element steps, ggml's reduce,
 *   the tail in double (dot32), one pair at a time.
 * Each pair has its own accumulators, so tile shapes never change a value.
 *
 * Matrices with n % 8 == 0 and whole groups of 8 rows are repacked at load
 * (cpu.h's pack): element chunk j of the 8 rows side by side, 128 bytes, so
 * the same tile kernels read one stream instead of 8 rows (bench250m F16
 * tg32 about 1.2x, five interleaved runs; pp256 unchanged).  Prompt
 * batches take their activation rows as floats made once per product
 * (pack_act, packed_tile_act): three conversions fewer per 12 FMAs
 * (bench250m pp256 at QK_CPU=avx2: F16 1.12x, BF16 1.06x).
 *
 * The F16 encoder (vcvtps2ph, round to nearest even) and decoder are bitwise
 * equal to half.h, subnormals, infinities and NaNs included (the decoder
 * leaves groups with a signalling NaN to half.h, which does not quiet it). */
#include "kernels/x86/simd_common.h"

#include <string.h>

#ifdef QK_X86

/* Eight elements at p as floats. */
QK_TARGET_AVX2 static inline __m256 ld8_f16(const uint8_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

QK_TARGET_AVX2 static inline __m256 ld8_bf16(const uint8_t *p)
{
    const __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
}

/* ggml's GGML_F32x8_REDUCE of four registers. */
QK_TARGET_AVX2 static inline float reduce32(__m256 s0, __m256 s1, __m256 s2, __m256 s3)
{
    s0 = _mm256_add_ps(s0, s2);
    s1 = _mm256_add_ps(s1, s3);
    s0 = _mm256_add_ps(s0, s1);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

/* The 4 x 3 sums of a tile's accumulators c[3 * row + token] (each
 * qk_hsum8_ps's tree), two qk_hsum8x8_ps at once. */
QK_TARGET_AVX2 static inline void sums4x3(const __m256 c[12], float out[4][3])
{
    /* lanes: c00 c20 c01 c21 | c10 c30 c11 c31, then c02 c22 . . | c12 c32 . . */
    float h[16];
    _mm256_storeu_ps(h, qk_hsum8x8_ps(c[0], c[3], c[6], c[9], c[1], c[4], c[7], c[10]));
    _mm256_storeu_ps(h + 8, qk_hsum8x8_ps(c[2], c[5], c[8], c[11], c[2], c[5], c[8], c[11]));
    out[0][0] = h[0], out[2][0] = h[1], out[0][1] = h[2], out[2][1] = h[3];
    out[1][0] = h[4], out[3][0] = h[5], out[1][1] = h[6], out[3][1] = h[7];
    out[0][2] = h[8], out[2][2] = h[9], out[1][2] = h[12], out[3][2] = h[13];
}

/* ---- prompt batches on pack_act's floats: the weights converted once a span ----
 * vcvtph2ps in the 4 x 3 tile's loop held it to 22 GFLOP/s a core on Zen 1
 * (float weights: 38, the FMA ceiling 40).  Per group of 8 rows, half (4
 * rows) and span of columns, the weights are converted into wf once, and
 * every pass of 3 tokens runs its 12 chains over wf, the sums waiting in c
 * between spans: the same fused multiply-adds in the same order on the same
 * values (vcvtph2ps either way), so the same bits.  The spans split a row
 * evenly, at most W4SPAN columns, so that wf and a pass's three activation
 * rows stay in a 32 KB L1 together. */
enum { W4SPAN = 768, W4TOK = 66 }; /* most columns of a span; tokens a round (22 passes) */

/* Rows 4h .. 4h + 3 of packed group G, columns [k0, k0 + nc), as floats in
 * wf: the four rows' 8 elements of each chunk side by side. */
QK_TARGET_AVX2 static inline void w32_half(const uint8_t *G, int h, int64_t k0, int nc, float *wf, const int bf)
{
    const uint8_t *c = G + 16 * (size_t)k0 + 64 * (size_t)h;
    for (int j = 0; j < nc / 8; j++, c += 128, wf += 32)
        for (int k = 0; k < 4; k++)
            _mm256_storeu_ps(wf + 8 * k, bf ? ld8_bf16(c + 16 * k) : ld8_f16(c + 16 * k));
}

/* The 4 x 3 tile over nc converted columns (wf) and the tokens' floats at
 * yr, continuing the chains c[3 * row + token], or starting them at zero
 * (fresh: the first span; zeroing c in memory first compiled to a rep stos
 * that took 10 % of smol135m's qk-imatrix samples on Zen 1). */
QK_TARGET_AVX2 static inline __attribute__((always_inline)) void w32_m4x3(int nc, const float *wf,
                                                                          const float *const yr[3], __m256 c[12],
                                                                          const int fresh)
{
    const __m256 z = _mm256_setzero_ps();
    __m256 c00 = fresh ? z : c[0], c01 = fresh ? z : c[1], c02 = fresh ? z : c[2];
    __m256 c10 = fresh ? z : c[3], c11 = fresh ? z : c[4], c12 = fresh ? z : c[5];
    __m256 c20 = fresh ? z : c[6], c21 = fresh ? z : c[7], c22 = fresh ? z : c[8];
    __m256 c30 = fresh ? z : c[9], c31 = fresh ? z : c[10], c32 = fresh ? z : c[11];
    const float *y0 = yr[0], *y1 = yr[1], *y2 = yr[2];
    for (int o = 0; o < nc; o += 8, wf += 32) {
        const __m256 b0 = _mm256_loadu_ps(y0 + o), b1 = _mm256_loadu_ps(y1 + o), b2 = _mm256_loadu_ps(y2 + o);
        __m256 a = _mm256_loadu_ps(wf);
        c00 = _mm256_fmadd_ps(a, b0, c00), c01 = _mm256_fmadd_ps(a, b1, c01), c02 = _mm256_fmadd_ps(a, b2, c02);
        a = _mm256_loadu_ps(wf + 8);
        c10 = _mm256_fmadd_ps(a, b0, c10), c11 = _mm256_fmadd_ps(a, b1, c11), c12 = _mm256_fmadd_ps(a, b2, c12);
        a = _mm256_loadu_ps(wf + 16);
        c20 = _mm256_fmadd_ps(a, b0, c20), c21 = _mm256_fmadd_ps(a, b1, c21), c22 = _mm256_fmadd_ps(a, b2, c22);
        a = _mm256_loadu_ps(wf + 24);
        c30 = _mm256_fmadd_ps(a, b0, c30), c31 = _mm256_fmadd_ps(a, b1, c31), c32 = _mm256_fmadd_ps(a, b2, c32);
    }
    c[0] = c00, c[1] = c01, c[2] = c02, c[3] = c10, c[4] = c11, c[5] = c12;
    c[6] = c20, c[7] = c21, c[8] = c22, c[9] = c30, c[10] = c31, c[11] = c32;
}

/* The packed F16 (bf: BF16) groups against nt tokens' floats (ys bytes
 * apart), W4TOK tokens a round: out[t * ldo + r]. */
QK_TARGET_AVX2 static void w32_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt, float *out,
                                    size_t ldo, const int bf)
{
    float wf[4 * W4SPAN];
    __m256 c[W4TOK / 3][12];
    const int64_t nspan = (n + W4SPAN - 1) / W4SPAN, sw = ((n + nspan - 1) / nspan + 7) / 8 * 8;
    for (int r0 = 0; r0 < nt; r0 += W4TOK) {
        const int nr = nt - r0 < W4TOK ? nt - r0 : W4TOK;
        for (int g = 0; g < ng; g++)
            for (int h = 0; h < 2; h++)
                for (int64_t k0 = 0; k0 < n; k0 += sw) {
                    const int nc = (int)(n - k0 < sw ? n - k0 : sw);
                    w32_half((const uint8_t *)xp + (size_t)g * (size_t)n * 16, h, k0, nc, wf, bf);
                    for (int t0 = 0, p = 0; t0 < nr; t0 += 3, p++) {
                        const int q = nr - t0 < 3 ? nr - t0 : 3;
                        const float *yr[3];
                        for (int k = 0; k < 3; k++)
                            yr[k] = (const float *)(const void *)((const uint8_t *)y + (size_t)(r0 + t0 + (k < q ? k : 0)) * ys) + k0;
                        if (k0 == 0)
                            w32_m4x3(nc, wf, yr, c[p], 1);
                        else
                            w32_m4x3(nc, wf, yr, c[p], 0);
                        if (k0 + nc < n)
                            continue;
                        float o[4][3];
                        sums4x3(c[p], o);
                        for (int t = 0; t < q; t++)
                            for (int k = 0; k < 4; k++)
                                out[(size_t)(r0 + t0 + t) * ldo + 8 * (size_t)g + 4 * (size_t)h + (size_t)k] = o[k][t];
                    }
                }
    }
}

/* FLOAT_TILE(name, load, dec, bf): the tile kernel of a float element type with
 * 2-byte elements loaded 8 at a time by load, one at a time by dec. */
#define FLOAT_TILE(name, load, dec, bf)                                                            \
    /* n % 8 != 0: ggml_vec_dot_f16's order */                                                    \
    QK_TARGET_AVX2 static float name##_dot32(int64_t n, const uint8_t *x, const uint8_t *y)       \
    {                                                                                              \
        __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),             \
                       _mm256_setzero_ps()};                                                       \
        const int64_t np = n - n % 32;                                                             \
        for (int64_t i = 0; i < np; i += 32)                                                       \
            for (int j = 0; j < 4; j++)                                                            \
                s[j] = _mm256_fmadd_ps(load(x + 2 * (i + 8 * j)), load(y + 2 * (i + 8 * j)), s[j]); \
        double sum = reduce32(s[0], s[1], s[2], s[3]);                                             \
        for (int64_t i = np; i < n; i++)                                                           \
            sum += (double)(dec(qk_ld_u16(x + 2 * i)) * dec(qk_ld_u16(y + 2 * i)));                \
        return (float)sum;                                                                         \
    }                                                                                              \
    /* 4 rows x 3 activations over the whole row (n % 8 == 0); row k's elements                  \
     * 8j .. 8j + 7 at xr[k] + j * xstep (16: rows as stored, 128: packed); the activation       \
     * rows are the type's, or floats (yf: pack_act's rows) */                                   \
    QK_TARGET_AVX2 static inline __attribute__((always_inline)) void name##_m4x3_at(              \
        int64_t n, const uint8_t *const xr[4], size_t xstep, const uint8_t *const yr[3], float out[4][3], const int yf) \
    {                                                                                              \
        __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;  \
        __m256 c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;                  \
        const uint8_t *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];                         \
        const uint8_t *y0 = yr[0], *y1 = yr[1], *y2 = yr[2];                                      \
        for (int64_t o = 0, xo = 0; o < 2 * n; o += 16, xo += (int64_t)xstep) {                   \
            const __m256 b0 = yf ? _mm256_loadu_ps((const float *)(const void *)y0 + o / 2) : load(y0 + o); \
            const __m256 b1 = yf ? _mm256_loadu_ps((const float *)(const void *)y1 + o / 2) : load(y1 + o); \
            const __m256 b2 = yf ? _mm256_loadu_ps((const float *)(const void *)y2 + o / 2) : load(y2 + o); \
            __m256 a = load(x0 + xo);                                                              \
            c00 = _mm256_fmadd_ps(a, b0, c00), c01 = _mm256_fmadd_ps(a, b1, c01);                 \
            c02 = _mm256_fmadd_ps(a, b2, c02);                                                     \
            a = load(x1 + xo);                                                                     \
            c10 = _mm256_fmadd_ps(a, b0, c10), c11 = _mm256_fmadd_ps(a, b1, c11);                 \
            c12 = _mm256_fmadd_ps(a, b2, c12);                                                     \
            a = load(x2 + xo);                                                                     \
            c20 = _mm256_fmadd_ps(a, b0, c20), c21 = _mm256_fmadd_ps(a, b1, c21);                 \
            c22 = _mm256_fmadd_ps(a, b2, c22);                                                     \
            a = load(x3 + xo);                                                                     \
            c30 = _mm256_fmadd_ps(a, b0, c30), c31 = _mm256_fmadd_ps(a, b1, c31);                 \
            c32 = _mm256_fmadd_ps(a, b2, c32);                                                     \
        }                                                                                          \
        const __m256 c[12] = {c00, c01, c02, c10, c11, c12, c20, c21, c22, c30, c31, c32};       \
        sums4x3(c, out);                                                                           \
    }                                                                                              \
    QK_TARGET_AVX2 static void name##_m4x3(int64_t n, const uint8_t *const xr[4], size_t xstep,   \
                                           const uint8_t *const yr[3], float out[4][3])            \
    {                                                                                              \
        name##_m4x3_at(n, xr, xstep, yr, out, 0);                                                  \
    }                                                                                              \
    QK_TARGET_AVX2 static void name##_m4x3f(int64_t n, const uint8_t *const xr[4], size_t xstep,  \
                                            const uint8_t *const yr[3], float out[4][3])           \
    {                                                                                              \
        name##_m4x3_at(n, xr, xstep, yr, out, 1);                                                  \
    }                                                                                              \
    /* 8 rows x 1 activation (decode; n % 8 == 0; xstep as for m4x3), the next 8 rows           \
     * (16 n bytes from next, rows as stored or a packed group) prefetched in step */             \
    QK_TARGET_AVX2 static void name##_m8x1(int64_t n, const uint8_t *const xr[8], size_t xstep,   \
                                           const uint8_t *y, float out[8], const uint8_t *next)    \
    {                                                                                              \
        __m256 c[8];                                                                               \
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) c[k] = _mm256_setzero_ps();            \
        for (int64_t o = 0, xo = 0; o < 2 * n; o += 16, xo += (int64_t)xstep) {                   \
            qk_prefetch_span(next + 8 * o, 128);                                                   \
            const __m256 b = load(y + o);                                                          \
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)                                    \
                c[k] = _mm256_fmadd_ps(load(xr[k] + xo), b, c[k]);                                 \
        }                                                                                          \
        float h[8];                                                                                \
        _mm256_storeu_ps(h, qk_hsum8x8_ps(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]));       \
        out[0] = h[0], out[2] = h[1], out[4] = h[2], out[6] = h[3];                                \
        out[1] = h[4], out[3] = h[5], out[5] = h[6], out[7] = h[7];                                \
    }                                                                                              \
    /* rows xr (the first m of them real) against all nt activation rows of Y, three at a time:   \
     * out[t * ldo + k] for k < m */                                                               \
    static void name##_rows4(int64_t n, const uint8_t *const xr[4], size_t xstep, const uint8_t *Y, \
                             size_t ys, int nt, float *out, size_t ldo, int m, bool yf)            \
    {                                                                                              \
        for (int t0 = 0; t0 < nt; t0 += 3) {                                                       \
            const int q = nt - t0 < 3 ? nt - t0 : 3;                                               \
            const uint8_t *yr[3];                                                                  \
            float o[4][3];                                                                         \
            for (int k = 0; k < 3; k++)                                                            \
                yr[k] = Y + (size_t)(t0 + (k < q ? k : 0)) * ys;                                   \
            (yf ? name##_m4x3f : name##_m4x3)(n, xr, xstep, yr, o);                                \
            for (int t = 0; t < q; t++)                                                            \
                for (int k = 0; k < m; k++)                                                        \
                    out[(size_t)(t0 + t) * ldo + (size_t)k] = o[k][t];                             \
        }                                                                                          \
    }                                                                                              \
    static void name##_tile(int64_t n, const void *x, size_t xs, int nr, const void *y, size_t ys, \
                            int nt, float *out, size_t ldo)                                        \
    {                                                                                              \
        const uint8_t *X = x, *Y = y;                                                              \
        if (n % 8) {                                                                               \
            for (int t = 0; t < nt; t++)                                                           \
                for (int r = 0; r < nr; r++)                                                       \
                    out[(size_t)t * ldo + (size_t)r] = name##_dot32(n, X + (size_t)r * xs,         \
                                                                    Y + (size_t)t * ys);           \
            return;                                                                                \
        }                                                                                          \
        if (nt == 1) {                                                                             \
            for (int r0 = 0; r0 < nr; r0 += 8) {                                                   \
                const int m = nr - r0 < 8 ? nr - r0 : 8;                                           \
                const uint8_t *xr[8];                                                              \
                float o[8];                                                                        \
                for (int k = 0; k < 8; k++)                                                        \
                    xr[k] = X + (size_t)(r0 + (k < m ? k : 0)) * xs;                               \
                name##_m8x1(n, xr, 16, Y, o, X + (size_t)(r0 + 8) * xs);                           \
                for (int k = 0; k < m; k++)                                                        \
                    out[r0 + k] = o[k];                                                            \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int r0 = 0; r0 < nr; r0 += 4) {                                                       \
            const int m = nr - r0 < 4 ? nr - r0 : 4;                                               \
            const uint8_t *xr[4];                                                                  \
            for (int k = 0; k < 4; k++)                                                            \
                xr[k] = X + (size_t)(r0 + (k < m ? k : 0)) * xs;                                   \
            name##_rows4(n, xr, 16, Y, ys, nt, out + r0, ldo, m, false);                           \
        }                                                                                          \
    }                                                                                              \
    QK_VEC_DOT_OF_TILE(name##_dot, name##_tile)                                                    \
    /* Packed groups (n % 8 == 0): 8 rows' elements 8j .. 8j + 7 side by side, 128 bytes per j,   \
     * so the tile kernels read one stream (xstep 128) and decode prefetches it linearly. */      \
    static size_t name##_pack_size(int64_t n) { return n % 8 ? 0 : (size_t)n * 16; }              \
    static void name##_pack(int64_t n, const void *x, size_t xs, void *dst)                       \
    {                                                                                              \
        for (int64_t j = 0; j < n / 8; j++)                                                        \
            for (int r = 0; r < 8; r++)                                                            \
                memcpy((uint8_t *)dst + 128 * j + 16 * r, (const uint8_t *)x + (size_t)r * xs + 16 * j, 16); \
    }                                                                                              \
    static void name##_packed_at(int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt, \
                                 float *out, size_t ldo, bool yf)                                  \
    {                                                                                              \
        const size_t gsize = (size_t)n * 16;                                                       \
        const uint8_t *Y = y;                                                                      \
        for (int g = 0; g < ng; g++) {                                                             \
            const uint8_t *G = (const uint8_t *)xp + (size_t)g * gsize;                            \
            float *og = out + 8 * (size_t)g;                                                       \
            if (nt == 1 && !yf) {                                                                  \
                const uint8_t *xr[8];                                                              \
                float o[8];                                                                        \
                for (int k = 0; k < 8; k++)                                                        \
                    xr[k] = G + 16 * k;                                                            \
                name##_m8x1(n, xr, 128, Y, o, G + gsize);                                          \
                memcpy(og, o, sizeof o);                                                           \
                continue;                                                                          \
            }                                                                                      \
            for (int h = 0; h < 2; h++) {                                                          \
                const uint8_t *xr[4] = {G + 64 * h, G + 64 * h + 16, G + 64 * h + 32, G + 64 * h + 48}; \
                name##_rows4(n, xr, 128, Y, ys, nt, og + 4 * h, ldo, 4, yf);                       \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void name##_packed_tile(int64_t n, const void *xp, int ng, const void *y, size_t ys,   \
                                   int nt, float *out, size_t ldo)                                 \
    {                                                                                              \
        name##_packed_at(n, xp, ng, y, ys, nt, out, ldo, false);                                   \
    }                                                                                              \
    /* against pack_act's rows: the activations as floats (one conversion a product) */           \
    static void name##_packed_tile_act(int64_t n, const void *xp, int ng, const void *y, size_t ys, \
                                       int nt, float *out, size_t ldo)                             \
    {                                                                                              \
        if (nt > 3) /* more than one pass: the weights converted once (w32_tile) */               \
            w32_tile(n, xp, ng, y, ys, nt, out, ldo, bf);                                          \
        else                                                                                       \
            name##_packed_at(n, xp, ng, y, ys, nt, out, ldo, true);                                \
    }                                                                                              \
    QK_TARGET_AVX2 static void name##_pack_act(int64_t n, const void *y, void *dst)               \
    {                                                                                              \
        for (int64_t i = 0; i < n; i += 8)                                                         \
            _mm256_storeu_ps((float *)dst + i, load((const uint8_t *)y + 2 * i));                  \
    }

FLOAT_TILE(f16, ld8_f16, qk_f16_to_f32, 0)
FLOAT_TILE(bf16, ld8_bf16, qk_bf16_to_f32, 1)

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

/* Tiles of 16 rows for prompt batches, as the row kernels' (lib/engine/matmul.c's ROW_TILE). */
const qk_pack_ops qk_x86_avx2_packed_f[] = {
    {.id = QK_F16, .pack_size = f16_pack_size, .pack = f16_pack, .packed_tile = f16_packed_tile, .tile_rows = 16,
     .decode = 1, .pack_act_size = qk_x86_float_act_size, .pack_act = f16_pack_act, .packed_tile_act = f16_packed_tile_act},
    {.id = QK_BF16, .pack_size = bf16_pack_size, .pack = bf16_pack, .packed_tile = bf16_packed_tile, .tile_rows = 16,
     .decode = 1, .pack_act_size = qk_x86_float_act_size, .pack_act = bf16_pack_act,
     .packed_tile_act = bf16_packed_tile_act},
    {.id = -1},
};

const qk_simd_ops qk_x86_avx2_float[] = {
    {QK_F16, f16_tile, f16_dot, f16_from_float, f16_to_float, NULL},
    {QK_BF16, bf16_tile, bf16_dot, NULL, NULL, NULL},
    {.id = -1},
};

#endif
