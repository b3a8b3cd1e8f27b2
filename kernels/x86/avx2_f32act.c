/* avx2_f32act.c - AVX2 float-activation products (cpu.h's qk_fdot_tile_fn)
 * for every type with a decoder, and the F32 x F32 tile, both in the
 * float-dot order of kernels/fdot.h, bitwise equal to the scalar reference
 * (kernels/f32act.c; tests/test_simd.c checks it with memcmp).
 *
 * A group of weight rows is decoded QK_FDOT_CHUNK elements at a time by the
 * type's to_float at this level into a small buffer on the stack (F32 rows
 * are read in place), and every activation row of the tile is multiplied
 * against that piece while it is in L1:
 * - prompt batches: 4 rows x 3 activation rows of 8-lane accumulators
 *   (one per pair, as the order has it) in registers over the piece, kept
 *   between pieces in a buffer for up to 64 activation rows, so the decode
 *   is paid once per 64 tokens (a row of one piece, every F32 row, needs no
 *   buffer: each group of activation rows is summed from zero to the end in
 *   registers); at the AVX-512 level (qk_x86_avx512_fdot_tile and
 *   qk_x86_avx512_f32act's F32 tile) 8 rows x 6 activation rows, two to a
 *   512-bit register (mk8w), their sums reduced 16 at a time (store_pairs);
 * - one token: 8 rows x 1, accumulators in registers over the whole row.
 * Each pair has its own accumulator and sees its elements in increasing
 * order, so tile shapes never change a value.  Rows with n % 8 != 0 (float
 * types only) take the scalar reference. */
#include "kernels/x86/simd_common.h"

#include "kernels/f32act.h"
#include "kernels/types.h"

#ifdef QK_X86

#define CH QK_FDOT_CHUNK
#define TOKENS 64 /* activation rows whose accumulators are kept between pieces */

/* A weight type as the kernel decodes it: F32 rows are read in place. */
typedef struct {
    qk_to_float_fn to_float; /* NULL: F32 */
    int blck;
    size_t type_size;
    int64_t chunk;
    bool w512; /* prompt batches through mk8w (the AVX-512 level) */
} wtype;

/* Elements c0 .. c0+m-1 of row as floats (in buf unless F32). */
QK_TARGET_AVX2 static inline const float *piece(const wtype *w, const uint8_t *row, int64_t c0,
                                                int64_t m, float *buf)
{
    if (!w->to_float)
        return (const float *)(const void *)row + c0;
    w->to_float(row + (size_t)(c0 / w->blck) * w->type_size, buf, m);
    return buf;
}

/* p[k] = the piece c0 .. c0+m-1 of row xr[k] for the mr real rows (decoded
 * into buf[k]), the first one's for the nk - mr padding rows. */
QK_TARGET_AVX2 static inline void pieces(const wtype *w, const uint8_t *const *xr, int nk, int mr,
                                         int64_t c0, int64_t m, float (*buf)[CH], const float **p)
{
    for (int k = 0; k < nk; k++)
        p[k] = k < mr ? piece(w, xr[k], c0, m, buf[k]) : p[0];
}

/* G activation rows (G = 1..3) x 4 weight rows over m elements of a piece:
 * acc[g][k] += p[k] * y[g], lane by lane, 8 elements at a time. */
QK_TARGET_AVX2 static inline __attribute__((always_inline)) void
mk4(int G, const float *const p[4], const float *const yr[3], int64_t m, __m256 acc[][4])
{
    __m256 c[3][4];
    _Pragma("GCC unroll 3") for (int g = 0; g < G; g++)
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) c[g][k] = acc[g][k];
    for (int64_t i = 0; i < m; i += 8) {
        __m256 b[3];
        _Pragma("GCC unroll 3") for (int g = 0; g < G; g++) b[g] = _mm256_loadu_ps(yr[g] + i);
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m256 a = _mm256_loadu_ps(p[k] + i);
            _Pragma("GCC unroll 3") for (int g = 0; g < G; g++) c[g][k] = _mm256_fmadd_ps(a, b[g], c[g][k]);
        }
    }
    _Pragma("GCC unroll 3") for (int g = 0; g < G; g++)
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) acc[g][k] = c[g][k];
}

/* The AVX-512 level's prompt kernel: 8 weight rows x P pairs of activation
 * rows (P = 1..3), a pair to a 512-bit register (row 2g in the low 8 lanes,
 * 2g+1 in the high), each 8 elements of a piece broadcast to both halves:
 * lane for lane mk4's fused multiply-adds, so its bits, with 24 of them for
 * every 3 registers of activations built.  acc[g][k]: pair g, weight row k
 * (the odd row of a last pair may be a copy: the caller drops those sums). */
QK_TARGET_AVX512 static inline __attribute__((always_inline)) void
mk8w_p(const int P, const float *const p[8], const float *const yr[6], int64_t m, __m512 acc[][8])
{
    __m512 c[3][8];
    _Pragma("GCC unroll 3") for (int g = 0; g < P; g++)
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) c[g][k] = acc[g][k];
    for (int64_t i = 0; i < m; i += 8) {
        __m512 b[3];
        _Pragma("GCC unroll 3") for (int g = 0; g < P; g++)
            b[g] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(yr[2 * g] + i)),
                                      _mm256_loadu_ps(yr[2 * g + 1] + i), 1);
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
            const __m512 a = _mm512_broadcast_f32x8(_mm256_loadu_ps(p[k] + i));
            _Pragma("GCC unroll 3") for (int g = 0; g < P; g++) c[g][k] = _mm512_fmadd_ps(a, b[g], c[g][k]);
        }
    }
    _Pragma("GCC unroll 3") for (int g = 0; g < P; g++)
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) acc[g][k] = c[g][k];
}

QK_TARGET_AVX512 static void mk8w(int P, const float *const p[8], const float *const yr[6], int64_t m,
                                  __m512 acc[][8])
{
    switch (P) {
    case 1: mk8w_p(1, p, yr, m, acc); break;
    case 2: mk8w_p(2, p, yr, m, acc); break;
    default: mk8w_p(3, p, yr, m, acc); break;
    }
}

/* acc[t][0..3] (t < q) summed lane by lane (qk_hsum8x8_ps: sums of a0 a2 a4
 * a6 a1 a3 a5 a7) into out[t * ldo + 0..mr). */
QK_TARGET_AVX2 static void store_sums(__m256 acc[][4], int q, int mr, float *out, size_t ldo)
{
    for (int t = 0; t < q; t += 2) {
        const int u = t + 1 < q ? t + 1 : t;
        /* row t's four sums, then row u's */
        const __m256 h = _mm256_permutevar8x32_ps(qk_hsum8x8_ps(acc[t][0], acc[t][1], acc[t][2], acc[t][3],
                                                                acc[u][0], acc[u][1], acc[u][2], acc[u][3]),
                                                  _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        if (mr == 4) {
            _mm_storeu_ps(out + (size_t)t * ldo, _mm256_castps256_ps128(h));
            if (u != t)
                _mm_storeu_ps(out + (size_t)u * ldo, _mm256_extractf128_ps(h, 1));
            continue;
        }
        float hv[8];
        _mm256_storeu_ps(hv, h);
        for (int k = 0; k < mr; k++) {
            out[(size_t)t * ldo + (size_t)k] = hv[k];
            if (u != t)
                out[(size_t)u * ldo + (size_t)k] = hv[4 + k];
        }
    }
}

/* One call of mk4: `left` activation rows (1..3) from yr against the piece p. */
QK_TARGET_AVX2 static inline void step_rows(const float *const p[4], const float *const yr[3], int left, int64_t m,
                                            __m256 acc[][4])
{
    if (left == 1)
        mk4(1, p, yr, m, acc);
    else if (left == 2)
        mk4(2, p, yr, m, acc);
    else
        mk4(3, p, yr, m, acc);
}

/* Rows xr[0..3] (the first mr real) against activation rows Y[0..q).  A
 * row that is one piece (every F32 row: its piece is the row in place) has
 * each group of activation rows summed from zero to the end in registers;
 * longer rows keep the sums in acc between pieces, so a piece is decoded
 * once for the q rows. */
QK_TARGET_AVX2 static void rows4(const wtype *w, int64_t n, const uint8_t *const xr[4], int mr,
                                 const float *Y, size_t ys, int q, float *out, size_t ldo)
{
    _Alignas(32) float buf[4][CH];
    if (n <= w->chunk) {
        const float *p[4];
        pieces(w, xr, 4, mr, 0, n, buf, p);
        for (int t = 0; t < q; t += 3) {
            const int left = q - t < 3 ? q - t : 3;
            const float *yr[3];
            __m256 acc[3][4];
            for (int g = 0; g < 3; g++) {
                yr[g] = Y + (size_t)(t + (g < left ? g : 0)) * ys;
                for (int k = 0; k < 4; k++)
                    acc[g][k] = _mm256_setzero_ps();
            }
            step_rows(p, yr, left, n, acc);
            store_sums(acc, left, mr, out + (size_t)t * ldo, ldo);
        }
        return;
    }
    __m256 acc[TOKENS][4];
    for (int t = 0; t < q; t++)
        for (int k = 0; k < 4; k++)
            acc[t][k] = _mm256_setzero_ps();
    for (int64_t c0 = 0; c0 < n; c0 += w->chunk) {
        const int64_t m = n - c0 < w->chunk ? n - c0 : w->chunk;
        const float *p[4];
        pieces(w, xr, 4, mr, c0, m, buf, p);
        for (int t = 0; t < q; t += 3) {
            const int left = q - t < 3 ? q - t : 3;
            const float *yr[3];
            for (int g = 0; g < 3; g++)
                yr[g] = Y + (size_t)(t + (g < left ? g : 0)) * ys + (size_t)c0;
            step_rows(p, yr, left, m, acc + t);
        }
    }
    store_sums(acc, q, mr, out, ldo);
}

/* The pairs acc[0 .. (q+1)/2) of mk8w (rows 0..mr-1) into out[t * ldo + k]
 * for the q activation rows: each pair's eight registers summed lane by
 * lane in qk_hsum8x8_ps's order (halves, then elements 0+2 and 1+3, then
 * those two), sixteen sums at once. */
QK_TARGET_AVX512 static void store_pairs(__m512 acc[][8], int q, int mr, float *out, size_t ldo)
{
    /* 128-bit lane j of s[i] after the halves: row 2i + j/2, activation row j % 2 */
    const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    const __mmask8 keep = (__mmask8)((1u << mr) - 1);
    for (int t = 0; t < q; t += 2) {
        const __m512 *a = acc[t / 2];
        __m512 s[4];
        for (int i = 0; i < 4; i++)
            s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                                 _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
        const __m512 t0 = _mm512_add_ps(_mm512_shuffle_ps(s[0], s[1], 0x44), _mm512_shuffle_ps(s[0], s[1], 0xEE));
        const __m512 t1 = _mm512_add_ps(_mm512_shuffle_ps(s[2], s[3], 0x44), _mm512_shuffle_ps(s[2], s[3], 0xEE));
        /* lane j: rows 0, 2, 4, 6 (j < 2) or 1, 3, 5, 7, activation row j % 2 */
        const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(t0, t1, 0x88), _mm512_shuffle_ps(t0, t1, 0xDD));
        const __m512 o = _mm512_permutexvar_ps(order, r); /* row t's eight sums, then row t+1's */
        _mm256_mask_storeu_ps(out + (size_t)t * ldo, keep, _mm512_castps512_ps256(o));
        if (t + 1 < q)
            _mm256_mask_storeu_ps(out + (size_t)(t + 1) * ldo, keep, _mm512_extractf32x8_ps(o, 1));
    }
}

/* rows4 at the AVX-512 level: rows xr[0..7] (the first mr real) through mk8w. */
QK_TARGET_AVX512 static void rows8w(const wtype *w, int64_t n, const uint8_t *const xr[8], int mr,
                                    const float *Y, size_t ys, int q, float *out, size_t ldo)
{
    _Alignas(64) float buf[8][CH];
    const float *yr[6];
    if (n <= w->chunk) {
        const float *p[8];
        pieces(w, xr, 8, mr, 0, n, buf, p);
        for (int t = 0; t < q; t += 6) {
            const int left = q - t < 6 ? q - t : 6;
            __m512 acc[3][8];
            for (int g = 0; g < 6; g++)
                yr[g] = Y + (size_t)(t + (g < left ? g : 0)) * ys;
            for (int g = 0; g < 3; g++)
                for (int k = 0; k < 8; k++)
                    acc[g][k] = _mm512_setzero_ps();
            mk8w((left + 1) / 2, p, yr, n, acc);
            store_pairs(acc, left, mr, out + (size_t)t * ldo, ldo);
        }
        return;
    }
    __m512 acc[TOKENS / 2][8];
    for (int g = 0; g < (q + 1) / 2; g++)
        for (int k = 0; k < 8; k++)
            acc[g][k] = _mm512_setzero_ps();
    for (int64_t c0 = 0; c0 < n; c0 += w->chunk) {
        const int64_t m = n - c0 < w->chunk ? n - c0 : w->chunk;
        const float *p[8];
        pieces(w, xr, 8, mr, c0, m, buf, p);
        for (int t = 0; t < q; t += 6) {
            const int left = q - t < 6 ? q - t : 6;
            for (int g = 0; g < 6; g++)
                yr[g] = Y + (size_t)(t + (g < left ? g : 0)) * ys + (size_t)c0;
            mk8w((left + 1) / 2, p, yr, m, acc + t / 2);
        }
    }
    store_pairs(acc, q, mr, out, ldo);
}

/* Rows xr[0..7] (the first mr real) against one activation row y. */
QK_TARGET_AVX2 static void rows8(const wtype *w, int64_t n, const uint8_t *const xr[8], int mr,
                                 const float *y, float *out)
{
    _Alignas(32) float buf[8][CH];
    __m256 c[8];
    for (int k = 0; k < 8; k++)
        c[k] = _mm256_setzero_ps();
    for (int64_t c0 = 0; c0 < n; c0 += w->chunk) {
        const int64_t m = n - c0 < w->chunk ? n - c0 : w->chunk;
        const float *p[8];
        pieces(w, xr, 8, mr, c0, m, buf, p);
        for (int64_t i = 0; i < m; i += 8) {
            const __m256 b = _mm256_loadu_ps(y + c0 + i);
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
                c[k] = _mm256_fmadd_ps(_mm256_loadu_ps(p[k] + i), b, c[k]);
        }
    }
    float h[8];
    _mm256_storeu_ps(h, qk_hsum8x8_ps(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]));
    const float o[8] = {h[0], h[4], h[1], h[5], h[2], h[6], h[3], h[7]};
    for (int k = 0; k < mr; k++)
        out[k] = o[k];
}

static void tile(const wtype *w, int64_t n, const void *x, size_t xs, int nr, const float *y,
                 size_t ys, int nt, float *out, size_t ldo)
{
    const uint8_t *X = x;
    if (nt == 1) {
        for (int r0 = 0; r0 < nr; r0 += 8) {
            const int mr = nr - r0 < 8 ? nr - r0 : 8;
            const uint8_t *xr[8];
            for (int k = 0; k < 8; k++)
                xr[k] = X + (size_t)(r0 + (k < mr ? k : 0)) * xs;
            rows8(w, n, xr, mr, y, out + r0);
        }
        return;
    }
    const int R = w->w512 ? 8 : 4; /* weight rows a call */
    for (int r0 = 0; r0 < nr; r0 += R) {
        const int mr = nr - r0 < R ? nr - r0 : R;
        const uint8_t *xr[8];
        for (int k = 0; k < R; k++)
            xr[k] = X + (size_t)(r0 + (k < mr ? k : 0)) * xs;
        for (int t0 = 0; t0 < nt; t0 += TOKENS) {
            const int q = nt - t0 < TOKENS ? nt - t0 : TOKENS;
            float *o = out + (size_t)t0 * ldo + (size_t)r0;
            if (w->w512)
                rows8w(w, n, xr, mr, y + (size_t)t0 * ys, ys, q, o, ldo);
            else
                rows4(w, n, xr, mr, y + (size_t)t0 * ys, ys, q, o, ldo);
        }
    }
}

/* Weight type id of n columns as the kernel reads it: F32 rows in place,
 * one piece; the others decoded by to_float a piece at a time. */
static wtype wtype_of(int id, qk_to_float_fn to_float, int64_t n, bool w512)
{
    if (id == QK_F32)
        return (wtype){NULL, 1, 4, n, w512};
    const qk_type_traits *t = qk_type_get(id);
    return (wtype){to_float, t->blck, t->type_size, qk_fdot_chunk(t->blck), w512};
}

static void fdot_tile(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr, const float *y, size_t ys,
                      int nt, float *out, size_t ldo, bool w512)
{
    if (n % 8) {
        qk_fdot_tile_ref(k, n, x, xs, nr, y, ys, nt, out, ldo);
        return;
    }
    const wtype w = wtype_of(k->id, k->to_float, n, w512);
    tile(&w, n, x, xs, nr, y, ys, nt, out, ldo);
}

void qk_x86_avx2_fdot_tile(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr,
                           const float *y, size_t ys, int nt, float *out, size_t ldo)
{
    fdot_tile(k, n, x, xs, nr, y, ys, nt, out, ldo, false);
}

void qk_x86_avx512_fdot_tile(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr,
                             const float *y, size_t ys, int nt, float *out, size_t ldo)
{
    fdot_tile(k, n, x, xs, nr, y, ys, nt, out, ldo, true);
}

/* F32 x F32 (activation stride in bytes, as every dot tile); prompt
 * batches through mk4 (AVX2) or mk8w (AVX-512), the same bits. */
static void f32_tile_at(int64_t n, const void *x, size_t xs, int nr, const void *y, size_t ys, int nt,
                        float *out, size_t ldo, bool w512)
{
    if (n % 8) {
        const qk_kernels *ks = qk_kernels_at(QK_F32, QK_CPU_SCALAR);
        for (int t = 0; t < nt; t++)
            for (int r = 0; r < nr; r++)
                out[(size_t)t * ldo + (size_t)r] =
                    ks->vec_dot(n, (const uint8_t *)x + (size_t)r * xs, (const uint8_t *)y + (size_t)t * ys);
        return;
    }
    const wtype w = wtype_of(QK_F32, NULL, n, w512);
    tile(&w, n, x, xs, nr, y, ys / sizeof(float), nt, out, ldo);
}

static void f32_tile(int64_t n, const void *x, size_t xs, int nr, const void *y, size_t ys, int nt,
                     float *out, size_t ldo)
{
    f32_tile_at(n, x, xs, nr, y, ys, nt, out, ldo, false);
}

static void f32_tile512(int64_t n, const void *x, size_t xs, int nr, const void *y, size_t ys, int nt,
                        float *out, size_t ldo)
{
    f32_tile_at(n, x, xs, nr, y, ys, nt, out, ldo, true);
}

QK_VEC_DOT_OF_TILE(f32_dot, f32_tile)

/* Q4_0's decoder (kernels/legacy.c q4_0_to_float: ((q & 15) - 8) * d, one
 * exact int-to-float conversion and one product per element), eight
 * elements at a time: the float-activation products of Q4_0 spend most of
 * their time decoding. */
QK_TARGET_AVX2 static void q4_0_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *b = src;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i eight = _mm256_set1_epi32(8);
    for (int64_t i = 0; i < n / 32; i++, b += 18, dst += 32) {
        const __m256 d = _mm256_set1_ps(qk_ld_f16(b));
        const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + 2));
        const __m128i h[2] = {_mm_and_si128(q, m4), _mm_and_si128(_mm_srli_epi16(q, 4), m4)};
        for (int k = 0; k < 4; k++) {
            const __m128i bytes = k & 1 ? _mm_srli_si128(h[k / 2], 8) : h[k / 2];
            const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), eight);
            _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
        }
    }
}

const qk_simd_ops qk_x86_avx2_f32act[] = {
    {QK_F32, f32_tile, f32_dot, NULL, NULL, NULL},
    {QK_Q4_0, NULL, NULL, NULL, q4_0_to_float, NULL},
    {.id = -1},
};

/* The AVX-512 level's F32 x F32 tile (one token: rows8, as at AVX2). */
const qk_simd_ops qk_x86_avx512_f32act[] = {
    {QK_F32, f32_tile512, f32_dot, NULL, NULL, NULL},
    {.id = -1},
};

#endif
