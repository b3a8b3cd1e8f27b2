/* avx2_legacy.c - AVX2 kernels of the 32-element block formats against Q8_0
 * activations (Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4, NVFP4) or Q8_1 (Q4_1, Q5_1), of
 * IQ4_XS (IQ4_NL's sub-blocks against Q8_K) and the Q8_0 activation encoder.
 *
 * Bitwise equal to the scalar reference (legacy.c, iq4.c): each block's
 * integer dot is exact in any order (Q4_0's is taken on the unsigned
 * nibbles and corrected, see q4_0_unpack), and each output then runs the
 * reference's float expression block by block, in block order, without FMA:
 *   Q8_0    sumf += (float)sumi * (dx * dy)
 *   Q4_0    sumf += ((float)sumi * dx) * dy
 *   Q5_0    sumf += (dx * dy) * (float)sumi
 *   IQ4_NL, MXFP4  sumf += (dx * dy) * (float)sumi
 *   NVFP4   per 16-element sub-block  sumf += (dy * d) * (float)sumi
 *   Q4_1, Q5_1 (against Q8_1)  sumf += (dx * dy) * (float)sumi + mx * sy
 * The serial float sum is why eight outputs (eight weight rows against one
 * activation row) share one vector: lane k is output k's own running sum. */
#include "kernels/x86/simd_common.h"

#include "kernels/fp4.h"

#ifdef QK_X86
#include <float.h>
#include <math.h>

#define QK 32

enum { Q8_0_SIZE = 34, Q4_0_SIZE = 18, Q5_0_SIZE = 22, IQ4_NL_SIZE = 18, Q4_1_SIZE = 20, Q5_1_SIZE = 24,
       MXFP4_SIZE = 17, NVFP4_SIZE = 36 };

/* ---- per-block integer dots (8 int32 partials) ------------------------------ */

QK_TARGET_AVX2 static inline __m256i nibbles(const uint8_t *qs)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* Each format's 32 signed levels of the block at xb (unpack), and their
 * exact int32 dot with the activation quants y (int). */
QK_TARGET_AVX2 static inline __m256i q8_0_unpack(const uint8_t *xb)
{
    return _mm256_loadu_si256((const __m256i *)(xb + 2));
}

QK_TARGET_AVX2 static inline __m256i q8_0_int(const uint8_t *xb, __m256i y)
{
    return qk_dot_i8(q8_0_unpack(xb), y);
}

/* Q4_0 works with the unsigned nibbles u = level + 8: sum(level * y) =
 * sum(u * y) - 8 sum(y), both exact; maddubs takes u as it is, and the
 * correction 8 sum(y) depends on the activation block alone, so a group
 * of rows pays it once (CORR_Q4_0). */
QK_TARGET_AVX2 static inline __m256i q4_0_unpack(const uint8_t *xb) { return nibbles(xb + 2); }

QK_TARGET_AVX2 static inline __m256i dot_u8(__m256i u, __m256i y)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1));
}

QK_TARGET_AVX2 static inline __m256i q4_0_int(const uint8_t *xb, __m256i y)
{
    return dot_u8(q4_0_unpack(xb), y);
}

/* What each format's block sums must lose: 8 sum(y) for Q4_0, else 0. */
#define CORR_NONE(y) _mm256_setzero_si256()
#define CORR_Q4_0(y) _mm256_set1_epi32(8 * qk_hsum_epi32(dot_u8(_mm256_set1_epi8(1), y)))

/* Q5_0/Q5_1 levels 0..31: bit j of qh (little-endian u32 at qh) is bit 4 of
 * element j, its low four bits the nibbles at qs. */
QK_TARGET_AVX2 static inline __m256i q5_levels(const uint8_t *qh, const uint8_t *qs)
{
    const __m256i bits = _mm256_set1_epi32((int)qk_ld_u32(qh));
    /* byte j takes byte j/8 of qh, then tests bit j%8 */
    const __m256i spread = _mm256_shuffle_epi8(
        bits, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                               3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i mask = _mm256_set1_epi64x(0x8040201008040201ll);
    const __m256i hb = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask),
                                        _mm256_set1_epi8(0x10));
    return _mm256_or_si256(nibbles(qs), hb);
}

QK_TARGET_AVX2 static inline __m256i q5_0_unpack(const uint8_t *xb)
{
    return _mm256_sub_epi8(q5_levels(xb + 2, xb + 6), _mm256_set1_epi8(16));
}

/* Q4_1 and Q5_1 (d, m, [qh], qs against Q8_1): unsigned levels. */
QK_TARGET_AVX2 static inline __m256i q4_1_unpack(const uint8_t *xb) { return nibbles(xb + 4); }
QK_TARGET_AVX2 static inline __m256i q5_1_unpack(const uint8_t *xb) { return q5_levels(xb + 4, xb + 8); }

QK_TARGET_AVX2 static inline __m256i q5_0_int(const uint8_t *xb, __m256i y)
{
    return qk_dot_i8(q5_0_unpack(xb), y);
}

QK_TARGET_AVX2 static inline __m256i q4_1_int(const uint8_t *xb, __m256i y) { return dot_u8(q4_1_unpack(xb), y); }
QK_TARGET_AVX2 static inline __m256i q5_1_int(const uint8_t *xb, __m256i y) { return dot_u8(q5_1_unpack(xb), y); }

/* kvalues_iq4nl of ggml (iq4.c holds the same table); x86.h. */
const int8_t qk_x86_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

QK_TARGET_AVX2 static inline __m256i iq4_nl_unpack(const uint8_t *xb)
{
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qk_x86_iq4nl_values));
    return _mm256_shuffle_epi8(lut, nibbles(xb + 2));
}

QK_TARGET_AVX2 static inline __m256i iq4_nl_int(const uint8_t *xb, __m256i y)
{
    return qk_dot_i8(iq4_nl_unpack(xb), y);
}

/* MXFP4 (E8M0 scale byte, 16 bytes of E2M1 codes laid out as IQ4_NL's): the
 * doubled code values of fp4.h, signed. */
QK_TARGET_AVX2 static inline __m256i mxfp4_unpack(const uint8_t *xb)
{
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qk_e2m1_x2));
    return _mm256_shuffle_epi8(lut, nibbles(xb + 1));
}

QK_TARGET_AVX2 static inline __m256i mxfp4_int(const uint8_t *xb, __m256i y)
{
    return qk_dot_i8(mxfp4_unpack(xb), y);
}

/* ---- eight rows x one activation row ---------------------------------------- */

/* The eight rows' block scales: F16 at the block's start, or (MXFP4) an
 * E8M0 byte as half its value (fp4.h). */
#define DX_F16(xr, o) qk_ld8_f16(xr, o)
#define DX_E8M0(xr, o)                                                                           \
    _mm256_setr_ps(qk_e8m0_to_f32_half((xr)[0][o]), qk_e8m0_to_f32_half((xr)[1][o]),             \
                   qk_e8m0_to_f32_half((xr)[2][o]), qk_e8m0_to_f32_half((xr)[3][o]),             \
                   qk_e8m0_to_f32_half((xr)[4][o]), qk_e8m0_to_f32_half((xr)[5][o]),             \
                   qk_e8m0_to_f32_half((xr)[6][o]), qk_e8m0_to_f32_half((xr)[7][o]))

/* GROUP(name, size, intfn, term, corr, A, dxl): out[k] = dot of row xr[k] with
 * y over nb blocks, while the 8 rows' bytes that follow the group in memory
 * (next: the caller's next group, most likely) are prefetched in step (weight blocks of `size` bytes; activation blocks of
 * format A: Q8_0, 34 bytes, quants at 2, or Q8_1, 36 bytes, quants at 4);
 * term(s, dx, dy, xr, o, yb) is the per-block float term of the reference,
 * corr(yq) what the block's integer sum must lose, dxl the scales' loader. */
#define A_SIZE_Q8_0 34
#define A_QS_Q8_0 2
#define A_SIZE_Q8_1 36
#define A_QS_Q8_1 4
#define GROUP(name, size, intfn, term, corr, A, dxl)                                             \
    QK_TARGET_AVX2 static void name(int64_t nb, const uint8_t *const xr[8], const uint8_t *y,   \
                                    float out[8], const uint8_t *next)                           \
    {                                                                                            \
        __m256 acc = _mm256_setzero_ps();                                                        \
        for (int64_t i = 0; i < nb; i++) {                                                       \
            const size_t o = (size_t)i * size;                                                   \
            qk_prefetch_span(next + 8 * o, 8 * size);                                            \
            const uint8_t *yb = y + (size_t)i * A_SIZE_##A;                                      \
            const __m256i yq = _mm256_loadu_si256((const __m256i *)(yb + A_QS_##A));             \
            __m256i s = qk_hsum8_epi32(intfn(xr[0] + o, yq), intfn(xr[1] + o, yq),               \
                                       intfn(xr[2] + o, yq), intfn(xr[3] + o, yq),               \
                                       intfn(xr[4] + o, yq), intfn(xr[5] + o, yq),               \
                                       intfn(xr[6] + o, yq), intfn(xr[7] + o, yq));              \
            s = _mm256_sub_epi32(s, corr(yq));                                                   \
            const __m256 dx = dxl(xr, o);                                                        \
            const __m256 dy = _mm256_set1_ps(qk_ldh(yb));                                        \
            acc = _mm256_add_ps(acc, term(_mm256_cvtepi32_ps(s), dx, dy, xr, o, yb));            \
        }                                                                                        \
        _mm256_storeu_ps(out, acc);                                                              \
    }

#define TERM_Q8_0(s, dx, dy, xr, o, yb) _mm256_mul_ps(s, _mm256_mul_ps(dx, dy))
#define TERM_Q4_0(s, dx, dy, xr, o, yb) _mm256_mul_ps(_mm256_mul_ps(s, dx), dy)
#define TERM_DXDY_S(s, dx, dy, xr, o, yb) _mm256_mul_ps(_mm256_mul_ps(dx, dy), s)
/* Q4_1/Q5_1: (dx * dy) * sumi + m * s, the activation block's s at 2 */
#define TERM_MIN(s, dx, dy, xr, o, yb)                                                           \
    _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(dx, dy), s),                                      \
                  _mm256_mul_ps(qk_ld8_f16(xr, (o) + 2), _mm256_set1_ps(qk_ldh((yb) + 2))))

GROUP(q8_0_group, Q8_0_SIZE, q8_0_int, TERM_Q8_0, CORR_NONE, Q8_0, DX_F16)
GROUP(q4_0_group, Q4_0_SIZE, q4_0_int, TERM_Q4_0, CORR_Q4_0, Q8_0, DX_F16)
GROUP(q5_0_group, Q5_0_SIZE, q5_0_int, TERM_DXDY_S, CORR_NONE, Q8_0, DX_F16)
GROUP(iq4_nl_group, IQ4_NL_SIZE, iq4_nl_int, TERM_DXDY_S, CORR_NONE, Q8_0, DX_F16)
GROUP(q4_1_group, Q4_1_SIZE, q4_1_int, TERM_MIN, CORR_NONE, Q8_1, DX_F16)
GROUP(q5_1_group, Q5_1_SIZE, q5_1_int, TERM_MIN, CORR_NONE, Q8_1, DX_F16)
GROUP(mxfp4_group, MXFP4_SIZE, mxfp4_int, TERM_DXDY_S, CORR_NONE, Q8_0, DX_E8M0)

typedef void (*group_fn)(int64_t nb, const uint8_t *const xr[8], const uint8_t *y, float out[8],
                         const uint8_t *next);

/* ---- eight rows x up to GT activation rows (prompt batches) --------------------
 * The same per-pair steps as GROUP; each weight block is unpacked (and its
 * eight scales loaded) once for all the activation rows.  GROUP stays for
 * decode: this kernel with one activation row is about 15 % slower there. */
#define GT 4

#define GROUPT(name, size, unpack, dot, term, corr, A, dxl)                                      \
    QK_TARGET_AVX2 __attribute__((always_inline)) static inline void name##_nt(                  \
        int64_t nb, const uint8_t *const xr[8], const uint8_t *const y[GT], const int nt,        \
        float out[GT][8])                                                                        \
    {                                                                                            \
        __m256 acc[GT];                                                                          \
        _Pragma("GCC unroll 4") for (int t = 0; t < GT; t++)                                     \
            acc[t] = _mm256_setzero_ps();                                                        \
        for (int64_t i = 0; i < nb; i++) {                                                       \
            const size_t o = (size_t)i * size;                                                   \
            __m256i w[8];                                                                        \
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)                                  \
                w[k] = unpack(xr[k] + o);                                                        \
            const __m256 dx = dxl(xr, o);                                                        \
            _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++) {                               \
                const uint8_t *yb = y[t] + (size_t)i * A_SIZE_##A;                               \
                const __m256i yq = _mm256_loadu_si256((const __m256i *)(yb + A_QS_##A));         \
                const __m256i s = _mm256_sub_epi32(                                              \
                    qk_hsum8_epi32(dot(w[0], yq), dot(w[1], yq), dot(w[2], yq), dot(w[3], yq),   \
                                   dot(w[4], yq), dot(w[5], yq), dot(w[6], yq), dot(w[7], yq)),  \
                    corr(yq));                                                                   \
                const __m256 dy = _mm256_set1_ps(qk_ldh(yb));                                    \
                acc[t] = _mm256_add_ps(acc[t], term(_mm256_cvtepi32_ps(s), dx, dy, xr, o, yb));  \
            }                                                                                    \
        }                                                                                        \
        _Pragma("GCC unroll 4") for (int t = 0; t < nt; t++)                                     \
            _mm256_storeu_ps(out[t], acc[t]);                                                    \
    }                                                                                            \
    /* one instance per token count: the token loop unrolls, the sums stay in registers */     \
    QK_TARGET_AVX2 static void name(int64_t nb, const uint8_t *const xr[8],                      \
                                    const uint8_t *const y[GT], int nt, float out[GT][8])        \
    {                                                                                            \
        _Static_assert(GT == 4, "one instance per token count");                                \
        QK_BY_NT4(nt, name##_nt(nb, xr, y, N, out))                                              \
    }

GROUPT(q8_0_groupT, Q8_0_SIZE, q8_0_unpack, qk_dot_i8, TERM_Q8_0, CORR_NONE, Q8_0, DX_F16)
GROUPT(q4_0_groupT, Q4_0_SIZE, q4_0_unpack, dot_u8, TERM_Q4_0, CORR_Q4_0, Q8_0, DX_F16)
GROUPT(q5_0_groupT, Q5_0_SIZE, q5_0_unpack, qk_dot_i8, TERM_DXDY_S, CORR_NONE, Q8_0, DX_F16)
GROUPT(iq4_nl_groupT, IQ4_NL_SIZE, iq4_nl_unpack, qk_dot_i8, TERM_DXDY_S, CORR_NONE, Q8_0, DX_F16)
GROUPT(q4_1_groupT, Q4_1_SIZE, q4_1_unpack, dot_u8, TERM_MIN, CORR_NONE, Q8_1, DX_F16)
GROUPT(q5_1_groupT, Q5_1_SIZE, q5_1_unpack, dot_u8, TERM_MIN, CORR_NONE, Q8_1, DX_F16)
GROUPT(mxfp4_groupT, MXFP4_SIZE, mxfp4_unpack, qk_dot_i8, TERM_DXDY_S, CORR_NONE, Q8_0, DX_E8M0)

typedef void (*groupT_fn)(int64_t nb, const uint8_t *const xr[8], const uint8_t *const y[GT], int nt,
                          float out[GT][8]);

/* The tile in groups of eight rows (a short group repeats row 0 in its
 * unused lanes; lanes never interact).  Each group's rows stay in cache
 * while the activation rows stream past. */
static void tile(group_fn g, groupT_fn gt, int64_t n, const void *x, size_t xs, int nr,
                 const void *y, size_t ys, int nt, float *out, size_t ldo)
{
    const uint8_t *xb = x, *yb = y;
    for (int r0 = 0; r0 < nr; r0 += 8) {
        const int m = nr - r0 < 8 ? nr - r0 : 8;
        const uint8_t *xr[8];
        for (int k = 0; k < 8; k++)
            xr[k] = xb + (size_t)(r0 + (k < m ? k : 0)) * xs;
        if (nt == 1) {
            float o[8];
            g(n / QK, xr, yb, o, xb + (size_t)(r0 + 8) * xs);
            for (int k = 0; k < m; k++)
                out[r0 + k] = o[k];
            continue;
        }
        for (int t0 = 0; t0 < nt; t0 += GT) {
            const int q = nt - t0 < GT ? nt - t0 : GT;
            const uint8_t *yr[GT];
            float o[GT][8];
            for (int t = 0; t < q; t++)
                yr[t] = yb + (size_t)(t0 + t) * ys;
            gt(n / QK, xr, yr, q, o);
            for (int t = 0; t < q; t++)
                for (int k = 0; k < m; k++)
                    out[(size_t)(t0 + t) * ldo + (size_t)(r0 + k)] = o[t][k];
        }
    }
}

#define TILE(name, group)                                                                      \
    static void name(int64_t n, const void *x, size_t xs, int nr, const void *y, size_t ys,    \
                     int nt, float *out, size_t ldo)                                           \
    {                                                                                          \
        tile(group, group##T, n, x, xs, nr, y, ys, nt, out, ldo);                                  \
    }

TILE(q8_0_tile, q8_0_group)
TILE(q4_0_tile, q4_0_group)
TILE(q5_0_tile, q5_0_group)
TILE(iq4_nl_tile, iq4_nl_group)
TILE(q4_1_tile, q4_1_group)
TILE(q5_1_tile, q5_1_group)
TILE(mxfp4_tile, mxfp4_group)
/* ONE(name, ...): vec_dot, one row against one activation row, GROUP's
 * steps for a single lane (a tile of one row would fill all eight lanes
 * with it). */
#define DX1_F16(x, o) qk_ldh((x) + (o))
#define DX1_E8M0(x, o) qk_e8m0_to_f32_half((x)[o])
#define ONE(name, size, intfn, term, corr, A, dx1)                                               \
    QK_TARGET_AVX2 static float name(int64_t n, const void *vx, const void *vy)                  \
    {                                                                                            \
        const uint8_t *x = vx, *y = vy;                                                          \
        const uint8_t *const xr[8] = {x, x, x, x, x, x, x, x}; /* for TERM_MIN */            \
        (void)xr;                                                                                \
        float acc = 0.0f;                                                                        \
        for (int64_t i = 0; i < n / QK; i++) {                                                   \
            const size_t o = (size_t)i * size;                                                   \
            const uint8_t *yb = y + (size_t)i * A_SIZE_##A;                                      \
            const __m256i yq = _mm256_loadu_si256((const __m256i *)(yb + A_QS_##A));             \
            const int s = qk_hsum_epi32(intfn(x + o, yq)) - _mm256_cvtsi256_si32(corr(yq));      \
            const __m256 t = term(_mm256_set1_ps((float)s), _mm256_set1_ps(dx1(x, o)),           \
                                  _mm256_set1_ps(qk_ldh(yb)), xr, o, yb);                        \
            acc += _mm256_cvtss_f32(t);                                                          \
        }                                                                                        \
        return acc;                                                                              \
    }

ONE(q8_0_dot, Q8_0_SIZE, q8_0_int, TERM_Q8_0, CORR_NONE, Q8_0, DX1_F16)
ONE(q4_0_dot, Q4_0_SIZE, q4_0_int, TERM_Q4_0, CORR_Q4_0, Q8_0, DX1_F16)
ONE(q5_0_dot, Q5_0_SIZE, q5_0_int, TERM_DXDY_S, CORR_NONE, Q8_0, DX1_F16)
ONE(iq4_nl_dot, IQ4_NL_SIZE, iq4_nl_int, TERM_DXDY_S, CORR_NONE, Q8_0, DX1_F16)
ONE(q4_1_dot, Q4_1_SIZE, q4_1_int, TERM_MIN, CORR_NONE, Q8_1, DX1_F16)
ONE(q5_1_dot, Q5_1_SIZE, q5_1_int, TERM_MIN, CORR_NONE, Q8_1, DX1_F16)
ONE(mxfp4_dot, MXFP4_SIZE, mxfp4_int, TERM_DXDY_S, CORR_NONE, Q8_0, DX1_E8M0)

/* ---- IQ4_XS against Q8_K ------------------------------------------------------------
 * d (f16), scales_h (u16), scales_l[4], qs[128]: eight 32-element sub-blocks
 * laid out as IQ4_NL's.  The reference (iq4.c) adds, sub-block by
 * sub-block, dl * (float)isum with dl = (d * yd) * (float)scale; here the
 * eight exact isums come out of one qk_hsum8_epi32 (lane s = sub-block s),
 * the products lane by lane, and the sum in order. */
enum { IQ4_XS_SIZE = 136, Q8_K_SIZE = 292, QKK = 256, XT = 4 };

QK_TARGET_AVX2 static void iq4_xs_dotT(int64_t n, const uint8_t *x, const uint8_t *const y[XT], int nt,
                                       float out[XT])
{
    float sumf[XT] = {0};
    for (int64_t i = 0; i < n / QKK; i++, x += IQ4_XS_SIZE) {
        qk_prefetch_span(x + QK_PREFETCH_AHEAD, IQ4_XS_SIZE);
        __m256i w[8];
        int32_t sc[8];
        const unsigned sh = qk_ld_u16(x + 2);
        for (int k = 0; k < 8; k++) {
            w[k] = iq4_nl_unpack(x + 6 + 16 * k); /* reads the qs at x + 8 + 16k */
            sc[k] = (int32_t)(((x[4 + k / 2] >> 4 * (k % 2)) & 15) | ((sh >> 2 * k) & 3) << 4) - 32;
        }
        const __m256 scf = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)sc));
        const float xd = qk_ldh(x);
        for (int t = 0; t < nt; t++) {
            const uint8_t *yb = y[t] + (size_t)i * Q8_K_SIZE, *q8 = yb + 4;
            __m256i v[8];
            for (int k = 0; k < 8; k++)
                v[k] = qk_dot_i8(w[k], _mm256_loadu_si256((const __m256i *)(q8 + 32 * k)));
            const __m256i isum = qk_hsum8_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
            const __m256 dl = _mm256_mul_ps(_mm256_set1_ps(xd * qk_ld_f32(yb)), scf);
            float p[8];
            _mm256_storeu_ps(p, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(isum)));
            for (int k = 0; k < 8; k++)
                sumf[t] += p[k];
        }
    }
    for (int t = 0; t < nt; t++)
        out[t] = sumf[t];
}

QK_TILE_OF_DOTT(iq4_xs_tile, iq4_xs_dotT, XT)
QK_VEC_DOT_OF_TILE(iq4_xs_dot, iq4_xs_tile)

/* ---- NVFP4 against Q8_0 ------------------------------------------------------------
 * Four UE4M3 scale bytes, then 32 bytes of E2M1 codes: sub-block s (16
 * elements) is the low nibbles of bytes 4 + 8s .. +7, then their high
 * nibbles; two sub-blocks per Q8_0 activation block.  The reference adds
 * dy * d_s * (float)isum_s sub-block by sub-block, one float chain per
 * output; as in GROUP, eight rows share a vector (lane k = row k) so the
 * chains run side by side.  Each 32-element half (two sub-blocks) of a row
 * is one vector of levels whose 16-byte halves are the two sub-blocks, so
 * a sub-block's exact sum is the sum of its half's int32 lanes. */
QK_TARGET_AVX2 static inline __m256i nvfp4_half(const uint8_t *xb, int h, __m256i lut)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)(xb + 4 + 16 * h));
    const __m128i lo = _mm_and_si128(q, _mm_set1_epi8(0x0F));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0x0F));
    const __m256i codes = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi64(lo, hi)),
                                                  _mm_unpackhi_epi64(lo, hi), 1);
    return _mm256_shuffle_epi8(lut, codes);
}

/* out[t][k] for rows xr[k] (8) and up to GT activation rows y[t]. */
QK_TARGET_AVX2 static void nvfp4_group8T(int64_t n, const uint8_t *const xr[8], const uint8_t *const y[GT],
                                         int nt, float out[GT][8])
{
    __m256 acc[GT];
    for (int t = 0; t < GT; t++)
        acc[t] = _mm256_setzero_ps();
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qk_e2m1_x2));
    for (int64_t i = 0; i < n / 64; i++) {
        const size_t o = (size_t)i * NVFP4_SIZE;
        __m256i w[2][8];
        float d[4][8];
        for (int k = 0; k < 8; k++) {
            w[0][k] = nvfp4_half(xr[k] + o, 0, lut);
            w[1][k] = nvfp4_half(xr[k] + o, 1, lut);
            for (int s = 0; s < 4; s++)
                d[s][k] = qk_ue4m3_to_f32_half(xr[k][o + (size_t)s]);
        }
        for (int t = 0; t < nt; t++)
            for (int h = 0; h < 2; h++) {
                const uint8_t *yb = y[t] + (size_t)(2 * i + h) * Q8_0_SIZE;
                const __m256i yq = _mm256_loadu_si256((const __m256i *)(yb + 2));
                __m256i p[8];
                for (int k = 0; k < 8; k++)
                    p[k] = qk_dot_i8(w[h][k], yq);
                /* [A0..A3 | B0..B3] and [A4..A7 | B4..B7]: A, B the two sub-blocks */
                const __m256i y0 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
                const __m256i y1 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
                const __m256 sa = _mm256_cvtepi32_ps(_mm256_permute2x128_si256(y0, y1, 0x20));
                const __m256 sb = _mm256_cvtepi32_ps(_mm256_permute2x128_si256(y0, y1, 0x31));
                const __m256 dy = _mm256_set1_ps(qk_ldh(yb));
                acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_mul_ps(dy, _mm256_loadu_ps(d[2 * h])), sa));
                acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_mul_ps(dy, _mm256_loadu_ps(d[2 * h + 1])), sb));
            }
    }
    for (int t = 0; t < nt; t++)
        _mm256_storeu_ps(out[t], acc[t]);
}

QK_TARGET_AVX2 static void nvfp4_tile(int64_t n, const void *x, size_t xs, int nr, const void *y,
                                      size_t ys, int nt, float *out, size_t ldo)
{
    const uint8_t *xb = x, *yb = y;
    for (int r0 = 0; r0 < nr; r0 += 8) {
        const int m = nr - r0 < 8 ? nr - r0 : 8;
        const uint8_t *xr[8];
        for (int k = 0; k < 8; k++)
            xr[k] = xb + (size_t)(r0 + (k < m ? k : 0)) * xs;
        for (int t0 = 0; t0 < nt; t0 += GT) {
            const int q = nt - t0 < GT ? nt - t0 : GT;
            const uint8_t *yr[GT];
            float o[GT][8];
            for (int t = 0; t < q; t++)
                yr[t] = yb + (size_t)(t0 + t) * ys;
            nvfp4_group8T(n, xr, yr, q, o);
            for (int t = 0; t < q; t++)
                for (int k = 0; k < m; k++)
                    out[(size_t)(t0 + t) * ldo + (size_t)(r0 + k)] = o[t][k];
        }
    }
}

QK_TARGET_AVX2 static inline int hsum4(__m128i v)
{
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(v, _mm_shuffle_epi32(v, 0xb1)));
}

/* vec_dot: one row, its one float chain (a tile of one row would fill all
 * eight lanes with it). */
QK_TARGET_AVX2 static float nvfp4_dot(int64_t n, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qk_e2m1_x2));
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / 64; i++, x += NVFP4_SIZE)
        for (int h = 0; h < 2; h++) {
            const uint8_t *yb = y + (size_t)(2 * i + h) * Q8_0_SIZE;
            const __m256i p = qk_dot_i8(nvfp4_half(x, h, lut), _mm256_loadu_si256((const __m256i *)(yb + 2)));
            const float dy = qk_ldh(yb);
            sumf += dy * qk_ue4m3_to_f32_half(x[2 * h]) * (float)hsum4(_mm256_castsi256_si128(p));
            sumf += dy * qk_ue4m3_to_f32_half(x[2 * h + 1]) * (float)hsum4(_mm256_extracti128_si256(p, 1));
        }
    return sumf;
}

/* ---- Q8_0 activation encoder ---------------------------------------------------- */

/* roundf (half away from zero) of finite v: trunc(v), plus sign(v) when the
 * dropped fraction (exact) is at least one half. */
QK_TARGET_AVX2 static inline __m256i round_away(__m256 v)
{
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 frac = _mm256_and_ps(_mm256_sub_ps(v, t), absmask);
    const __m256 bump = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                      _mm256_or_ps(_mm256_set1_ps(1.0f), sign));
    return _mm256_cvttps_epi32(_mm256_add_ps(t, bump));
}

/* The weight encoder quantize_q8_0 (_ref: roundf(x / d)). */
QK_TARGET_AVX2 static size_t q8_0_quantize(const float *src, void *dst, int64_t nrows,
                                           int64_t ncols, const float *imatrix)
{
    (void)imatrix; /* quantize_q8_0 ignores it */
    uint8_t *b = dst;
    /* blocks with an infinity or NaN, whose sequential max the vector max
     * does not reproduce, and blocks of subnormals, whose 1 / d overflows
     * (the reference's out-of-range conversions keep the low byte, the
     * packs saturate), go through the table's encoder (legacy.c) */
    const qk_quantize_fn scalar = qk_type_get(QK_Q8_0)->quantize;
    for (int64_t i = 0; i < nrows * ncols / QK; i++, src += QK, b += Q8_0_SIZE) {
        const float d = qk_all_finite(src, QK) ? qk_absmax(src, QK) / 127 : NAN;
        const float id = d ? 1.0f / d : 0.0f;
        if (!(id <= FLT_MAX)) {
            scalar(src, b, 1, QK, NULL);
            continue;
        }
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = round_away(_mm256_mul_ps(_mm256_loadu_ps(src + 8 * k), vid));
        qk_store_i8x32((int8_t *)(b + 2), q[0], q[1], q[2], q[3]);
        qk_st_f16(b, d);
    }
    return (size_t)nrows * (size_t)(ncols / QK) * Q8_0_SIZE;
}

/* One finite block of 32 activations as llama.cpp's x86 quantize_row_q8_0
 * makes it (legacy.c q8_act_block): id = 127 / amax, round half to even;
 * the quants into qs, their int32 values into q, the scale returned. */
QK_TARGET_AVX2 static inline float q8_act_block_avx2(const float *src, int8_t *qs, __m256i q[4])
{
    const float amax = qk_absmax(src, QK);
    const __m256 vid = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
    for (int k = 0; k < 4; k++)
        q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(src + 8 * k), vid),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    qk_store_i8x32(qs, q[0], q[1], q[2], q[3]);
    return amax / 127.f;
}

/* The Q8_0 and Q8_1 activation encoders (q8_1: also s = (float)sum(q) * d,
 * both as F16, legacy.c q8_1_from_float).  Blocks with an infinity or NaN
 * go through the scalar encoder. */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void q8_act_from_float(const float *src, uint8_t *b,
                                                                                   int64_t n, const int q8_1)
{
    const qk_from_float_fn scalar = qk_type_get(q8_1 ? QK_Q8_1 : QK_Q8_0)->from_float;
    const size_t size = q8_1 ? A_SIZE_Q8_1 : A_SIZE_Q8_0, qs = q8_1 ? A_QS_Q8_1 : A_QS_Q8_0;
    for (int64_t i = 0; i < n / QK; i++, src += QK, b += size) {
        if (!qk_all_finite(src, QK)) {
            scalar(src, b, QK);
            continue;
        }
        __m256i q[4];
        const float d = q8_act_block_avx2(src, (int8_t *)(b + qs), q);
        qk_st_f16(b, d);
        if (q8_1) {
            const int sum = qk_hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
            qk_st_f16(b + 2, (float)sum * d);
        }
    }
}

QK_TARGET_AVX2 static void q8_0_from_float(const float *src, void *dst, int64_t n) { q8_act_from_float(src, dst, n, 0); }
QK_TARGET_AVX2 static void q8_1_from_float(const float *src, void *dst, int64_t n) { q8_act_from_float(src, dst, n, 1); }

QK_TARGET_AVX2 static void q8_0_to_float(const void *src, float *dst, int64_t n)
{
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK; i++, b += Q8_0_SIZE, dst += QK) {
        const __m256 d = _mm256_set1_ps(qk_ldh(b));
        for (int k = 0; k < 4; k++) {
            const __m128i q = _mm_loadl_epi64((const __m128i *)(b + 2 + 8 * k));
            _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
    }
}

const qk_simd_ops qk_x86_avx2_legacy[] = {
    {QK_Q8_0, q8_0_tile, q8_0_dot, q8_0_from_float, q8_0_to_float, q8_0_quantize},
    {QK_Q4_0, q4_0_tile, q4_0_dot, NULL, NULL, NULL},
    {QK_Q5_0, q5_0_tile, q5_0_dot, NULL, NULL, NULL},
    {QK_IQ4_NL, iq4_nl_tile, iq4_nl_dot, NULL, NULL, NULL},
    {QK_IQ4_XS, iq4_xs_tile, iq4_xs_dot, NULL, NULL, NULL},
    {QK_Q4_1, q4_1_tile, q4_1_dot, NULL, NULL, NULL},
    {QK_Q5_1, q5_1_tile, q5_1_dot, NULL, NULL, NULL},
    {QK_Q8_1, NULL, NULL, q8_1_from_float, NULL, NULL},
    {QK_MXFP4, mxfp4_tile, mxfp4_dot, NULL, NULL, NULL},
    {QK_NVFP4, nvfp4_tile, nvfp4_dot, NULL, NULL, NULL},
    {.id = -1},
};

#endif
