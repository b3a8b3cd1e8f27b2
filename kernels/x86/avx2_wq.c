/* avx2_wq.c - AVX2 products of the parted checkpoint layouts (kernels/wq.h),
 * bitwise equal to the scalar reference (kernels/wq.c, wq_int.c) for every
 * element whatever the tile (tests/test_wq.c compares them with memcmp).
 *
 * Float products (activations F32, QK_A_FP8, QK_A_MX8, QK_A_MX4): THE WQ
 * FLOAT ORDER of wq.h.  Eight weights of a row are decoded in registers the
 * way the reference decoder computes each of them (the same operations:
 * code to float exactly, then (q - zero) * scale, scale * q + bias, value
 * times block multiplier), and one fused multiply-add per 8 elements adds
 * them into that (row, token)'s 8-lane accumulator, in increasing order;
 * qk_hsum8_ps then sums the lanes in the reference's tree (kernels/fdot.h's
 * order for rows of a multiple of 8; other rows run the reference).  A tile
 * keeps 4 rows x 2 tokens (decode: 8 rows x 1) of accumulators in registers
 * over the whole row.  Codes are turned into floats exactly: E4M3 through
 * its bits as an F16 (vcvtph2ps) times 2^8, E2M1 through a table of its 8
 * magnitudes and the sign bit (or, 32 columns a step, its doubled value as
 * a byte times half the multiplier), integers through vcvtdq2ps.  (A NaN E4M3 code,
 * 0x7F/0xFF, decodes to a finite value here and to NaN in the reference; no
 * producer writes one into a weight.)
 *
 * Integer products: INT8 W8A8 in avx2_wq_i8.c, NVFP4 W4A4 in avx2_wq_nv4.c.
 *
 * Layouts or shapes without a kernel here (act-order g_idx, AWQ, bitsandbytes,
 * bit streams of 3/5/6/7 bits, groups that are not multiples of 8) run the
 * reference. */
#include "kernels/x86/simd_common.h"

#include <string.h>

#include "kernels/elements.h"
#include "kernels/fp4.h"
#include "kernels/wq_impl.h"
#include "kernels/x86/avx2_wq.h"

#ifdef QK_X86

enum { K_FP8, K_FP8X, K_I8, K_I8Z, K_P4, K_P8, K_FP4, K_MLX4, K_GPTQ4, K_BNB8, K_NONE };

/* Which decoder serves w, or K_NONE. */
static int kind_of(const qk_wq *w)
{
    const int64_t cd = w->s.cdiv;
    const bool grp8 = cd % 8 == 0 || cd >= w->cols;
    if (w->gidx || !grp8 || w->cols % 8)
        return K_NONE; /* rows that are no multiple of 8 take fdot.h's 32-lane order: the reference */
    const bool zf = !w->z.p || w->z.bits == 0 || (w->z.bits == w->bits && !w->z.stream);
    switch (w->type) {
    case QK_W_FP8: return w->elem != QK_ELEM_FP8_E4M3 ? K_NONE : w->s.type == QK_E8M0 ? K_FP8X : K_FP8;
    case QK_W_INT8: return w->z.p ? K_I8Z : K_I8;
    case QK_W_PACK:
        if (w->order != QK_WQ_WORDS || !zf)
            return K_NONE;
        return w->bits == 4 ? K_P4 : w->bits == 8 ? K_P8 : K_NONE;
    case QK_W_NVFP4:
    case QK_W_MXFP4: return w->s.cs == 1 ? K_FP4 : K_NONE;
    case QK_W_MLX: return w->bits == 4 && w->order == QK_WQ_STREAM ? K_MLX4 : K_NONE;
    case QK_W_GPTQ: return w->bits == 4 && zf ? K_GPTQ4 : K_NONE;
    case QK_W_BNB8: return K_BNB8;
    default: return K_NONE;
    }
}

static const float e2m1_mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* Where row r's codes start (GPTQ: its column of words). */
static inline const uint8_t *row_codes(const qk_wq *w, int kind, int64_t r)
{
    return kind == K_GPTQ4 ? w->q + 4 * r : w->q + r * w->q_rs;
}

/* The scale (and zero point or bias) of row r's group at element k, as the
 * reference takes them (qk_wq_scale's value: no g_idx here, kind_of), srow
 * the row's first scale in the grid (r / rdiv * rs, found once a row); FP8
 * folds in the 2^8 of its F16 decoding (exact).  K_FP4 takes its
 * multipliers 8 groups at a time (fp4_mults) instead. */
static inline void group_params(const qk_wq *w, int kind, int64_t r, int64_t k, int64_t srow, float *s, float *z)
{
    const int64_t si = srow + k / w->s.cdiv * w->s.cs;
    *z = 0.0f;
    switch (kind) {
    case K_BNB8: *s = qk_wq_val_inline(w->s.p, w->s.type, r); return;
    case K_FP8: /* float scales: fold the 2^8 in (exact); E8M0 ones could overflow: dec8 multiplies */
        *s = qk_wq_val_inline(w->s.p, w->s.type, si) * 256.0f;
        return;
    default:
        *s = qk_wq_val_inline(w->s.p, w->s.type, si);
        *z = w->z.p ? qk_wq_zero(w, r, k) : 0.0f; /* a call clobbers every ymm register */
        return;
    }
}

/* Eight 4-bit codes of four bytes, the low nibble first. */
QK_TARGET_AVX2 static inline __m256i nib8(const uint8_t *p)
{
    uint32_t u;
    memcpy(&u, p, 4);
    const __m256i v = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(_mm_cvtsi32_si128((int)u),
                                                            _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0)));
    return _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4)), _mm256_set1_epi32(15));
}

/* Eight 4-bit fields of a word, field 0 first. */
QK_TARGET_AVX2 static inline __m256i fields8(const uint8_t *p)
{
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)qk_ld_u32(p)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                            _mm256_set1_epi32(15));
}

/* What dec8 reads of the weight, as values (no reload through w). */
typedef struct {
    int64_t gptq_stride; /* bytes between GPTQ word rows */
    int code_offset;
} decp;

/* Weights [k, k + 8) of the row whose codes start at q, with its group's
 * s and z (broadcast), as the reference decodes them. */
QK_TARGET_AVX2 static inline __m256 dec8(const decp d, const int kind, const uint8_t *q, int64_t k, __m256 s, __m256 z)
{
    switch (kind) {
    case K_FP8:
        return _mm256_mul_ps(e4m3x8_div256(_mm_loadl_epi64((const __m128i *)(q + k))), s);
    case K_FP8X:
        return _mm256_mul_ps(e4m3x8(_mm_loadl_epi64((const __m128i *)(q + k))), s);
    case K_I8:
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + k)))), s);
    case K_I8Z: {
        const __m256 c = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + k))));
        return _mm256_mul_ps(_mm256_sub_ps(c, z), s);
    }
    case K_BNB8: {
        const __m256 c = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + k))));
        return _mm256_mul_ps(_mm256_mul_ps(c, s), _mm256_set1_ps(7.874015718698502e-3f));
    }
    case K_P4:
    case K_GPTQ4: {
        const uint8_t *p = kind == K_P4 ? q + k / 2 : q + (size_t)(k / 8) * (size_t)d.gptq_stride;
        const __m256 c = _mm256_cvtepi32_ps(_mm256_sub_epi32(fields8(p), _mm256_set1_epi32(d.code_offset)));
        return _mm256_mul_ps(_mm256_sub_ps(c, z), s);
    }
    case K_P8: {
        const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + k)));
        const __m256 c = _mm256_cvtepi32_ps(_mm256_sub_epi32(b, _mm256_set1_epi32(d.code_offset)));
        return _mm256_mul_ps(_mm256_sub_ps(c, z), s);
    }
    case K_MLX4:
        return _mm256_add_ps(_mm256_mul_ps(s, _mm256_cvtepi32_ps(nib8(q + k / 2))), z);
    default: { /* K_FP4 */
        const __m256i c = nib8(q + k / 2);
        const __m256 mag = _mm256_permutevar8x32_ps(_mm256_loadu_ps(e2m1_mag), c);
        const __m256 v = _mm256_or_ps(mag, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(c, 3), 31)));
        return _mm256_mul_ps(v, s);
    }
    }
}

/* 32 weights from their small integer values v as signed bytes (columns
 * 0..15 in c[0], 16..31 in c[1]): each 8 widened and turned into floats
 * exactly, less the zero point z when ZP, times s01 (columns 0..15) or s23
 * (16..31). */
QK_TARGET_AVX2 static inline void dec32(const __m128i c[2], __m256 s01, __m256 s23, __m256 z, const bool zp, __m256 w[4])
{
    const __m128i b[4] = {c[0], _mm_srli_si128(c[0], 8), c[1], _mm_srli_si128(c[1], 8)};
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b[i]));
        w[i] = _mm256_mul_ps(zp ? _mm256_sub_ps(v, z) : v, i < 2 ? s01 : s23);
    }
}

/* Weights [k, k + 32) of a K_P4 row (codes at q), dec8's values four at a
 * time: the codes as bytes (nib32), the code offset taken off as bytes
 * (exact: codes 0..15 minus an offset in 0..128 fit an int8), then dec32;
 * without zero points the subtraction of a zero is left out (c - 0 is c).
 * Fewer operations a weight than fields8's variable shifts, which held a
 * Zen 1 core to about one weight a cycle. */
QK_TARGET_AVX2 static inline void p4_dec32(const uint8_t *q, int64_t k, __m128i off, __m256 s, __m256 z, const bool zp,
                                            __m256 w[4])
{
    __m128i c[2];
    nib32(q + k / 2, c);
    c[0] = _mm_sub_epi8(c[0], off);
    c[1] = _mm_sub_epi8(c[1], off);
    dec32(c, s, s, z, zp, w);
}

/* Weights [k, k + 32) of a K_FP4 row (codes at q): each code's doubled
 * E2M1 value (qk_e2m1_x2, a byte table) times HALF its group's multiplier,
 * h01 for columns 0..15 and h23 for 16..31.  x2 * (m / 2) is the exact
 * product e2m1 * m of the reference, rounded once, whenever m / 2 is exact
 * (fp4_halves checks it).  The table's code 8 is +0 where the reference's
 * E2M1 is -0: a zero weight's sign cannot reach a sum, since an
 * accumulator that starts at +0 never becomes -0 (x + y is -0 only when
 * both are). */
QK_TARGET_AVX2 static inline void fp4_dec32(const uint8_t *q, int64_t k, __m256 h01, __m256 h23, __m256 w[4])
{
    const __m128i lut = e2m1x2_lut();
    __m128i c[2];
    nib32(q + k / 2, c);
    c[0] = _mm_shuffle_epi8(lut, c[0]);
    c[1] = _mm_shuffle_epi8(lut, c[1]);
    dec32(c, h01, h23, h01, false, w);
}

/* Halves of m[0..n) in h; false when one of them is inexact (a half below
 * the least normal float of a multiplier whose last bit is set; a NaN's
 * half is itself, so a NaN passes). */
QK_TARGET_AVX2 static inline bool fp4_halves(const float *m, int n, float *h)
{
    if (n == 8) {
        const __m256 v = _mm256_loadu_ps(m), hv = _mm256_mul_ps(v, _mm256_set1_ps(0.5f));
        _mm256_storeu_ps(h, hv);
        const __m256 ok = _mm256_or_ps(_mm256_cmp_ps(_mm256_mul_ps(hv, _mm256_set1_ps(2.0f)), v, _CMP_EQ_OQ),
                                       _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        return _mm256_movemask_ps(ok) == 0xFF;
    }
    bool exact = true;
    for (int i = 0; i < n; i++) {
        h[i] = m[i] * 0.5f;
        exact &= h[i] * 2.0f == m[i] || m[i] != m[i];
    }
    return exact;
}

/* One token against NR (1, 4 or 8) rows, each output THE WQ FLOAT ORDER:
 * the rows' groups in lockstep (a group is the same columns in every row),
 * each group's scale and zero fetched once, the token's chunk loaded once
 * for the rows, one fused multiply-add per 8 weights.  The accumulators are
 * named variables: an array of them ends up stored back every step. */
#define ROW_STEP(i, A)                                                                                   \
    if (i < NR)                                                                                          \
        A = _mm256_fmadd_ps(dec8(d, kind, q0 + (i) * rstep, k, _mm256_broadcast_ss(&sv[i]), _mm256_broadcast_ss(&zv[i])), \
                            xv, A)
/* Columns [K0, K1) 8 a step, the rows' scales sv and zeros zv */
#define ROW_STEPS8(K0, K1)                                  \
    for (int64_t k = (K0); k < (K1); k += 8) {              \
        PF_NEXT(k);                                         \
        const __m256 xv = _mm256_loadu_ps(x + k);           \
        ROW_STEP(0, a0);                                    \
        ROW_STEP(1, a1);                                    \
        ROW_STEP(2, a2);                                    \
        ROW_STEP(3, a3);                                    \
        ROW_STEP(4, a4);                                    \
        ROW_STEP(5, a5);                                    \
        ROW_STEP(6, a6);                                    \
        ROW_STEP(7, a7);                                    \
    }
#define ROW_STEP32(i, A, zp)                                                                                  \
    if (i < NR) {                                                                                         \
        __m256 wv[4];                                                                                     \
        p4_dec32(q0 + (i) * rstep, k, off8, _mm256_broadcast_ss(&sv[i]), _mm256_broadcast_ss(&zv[i]), zp, wv); \
        A = _mm256_fmadd_ps(wv[3], x3, _mm256_fmadd_ps(wv[2], x2, _mm256_fmadd_ps(wv[1], x1, _mm256_fmadd_ps(wv[0], x0, A)))); \
    }
/* The next pass's codes at column k (k >> pfs bytes into a row: pfs 0 for
 * 8-bit codes, 1 for 4-bit ones, -1 for GPTQ's columns of words: none), a
 * line a step over 64 bytes */
#define PF_NEXT(k)                                                               \
    if (pfs >= 0 && (k) % (64 << pfs) == 0)                                      \
        qk_wq_prefetch_next_rows(q0, rstep, NR, (k) >> pfs)
/* K_P4's 32 columns a step over a group; ZP: the rows have zero points
 * (without them the subtraction of a zero is left out: c - 0 is c) */
#define P4_STEPS(ZP)                                                                      \
    do {                                                                                  \
    for (int64_t k = g0; k < g1; k += 32) {                                               \
        PF_NEXT(k);                                                                       \
        const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);        \
        const __m256 x2 = _mm256_loadu_ps(x + k + 16), x3 = _mm256_loadu_ps(x + k + 24);  \
        ROW_STEP32(0, a0, ZP);                                                            \
        ROW_STEP32(1, a1, ZP);                                                            \
        ROW_STEP32(2, a2, ZP);                                                            \
        ROW_STEP32(3, a3, ZP);                                                            \
        ROW_STEP32(4, a4, ZP);                                                            \
        ROW_STEP32(5, a5, ZP);                                                            \
        ROW_STEP32(6, a6, ZP);                                                            \
        ROW_STEP32(7, a7, ZP);                                                            \
    }                                                                                     \
    } while (0)

/* K_FP4's 32 columns a step: h the rows' halved multipliers of the current
 * 8 groups, i01 and i23 the groups of the step's two halves. */
#define FP4_STEP(i, A)                                                                                    \
    if (i < NR) {                                                                                         \
        __m256 wv[4];                                                                                     \
        fp4_dec32(q0 + (i) * rstep, k, _mm256_broadcast_ss(&h[i][i01]), _mm256_broadcast_ss(&h[i][i23]), wv); \
        A = _mm256_fmadd_ps(wv[3], x3, _mm256_fmadd_ps(wv[2], x2, _mm256_fmadd_ps(wv[1], x1, _mm256_fmadd_ps(wv[0], x0, A)))); \
    }
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
ftile_rows(const qk_wq *w, const int kind, int64_t r0, const int NR, const float *x, float *out)
{
    const int64_t n8 = w->cols, g = w->s.cdiv < n8 ? w->s.cdiv : n8; /* a multiple of 8 (kind_of) */
    const bool p4_32 = kind == K_P4 && g % 32 == 0 && w->code_offset >= 0 && w->code_offset <= 128;
    const __m128i off8 = _mm_set1_epi8((char)w->code_offset);
    int64_t srow[8]; /* each row's first scale in the grid */
    for (int r = 0; r < NR; r++)
        srow[r] = (r0 + r) / w->s.rdiv * w->s.rs;
    const uint8_t *q0 = row_codes(w, kind, r0);
    const int64_t rstep = NR > 1 ? row_codes(w, kind, r0 + 1) - q0 : 0;
    const decp d = {w->rows * 4, w->code_offset};
    const int pfs = kind == K_GPTQ4 ? -1 : kind == K_P4 || kind == K_FP4 || kind == K_MLX4 ? 1 : 0;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    float mc[8][8]; /* K_FP4: the rows' multipliers of 8 groups at a time */
    const bool fp4_32 = kind == K_FP4 && g % 16 == 0 && n8 % 32 == 0;
    if (fp4_32) { /* 8 groups at a time, 32 columns a step */
        const int64_t ng = (n8 + g - 1) / g;
        for (int64_t j0 = 0; j0 < ng; j0 += 8) {
            const int m = ng - j0 < 8 ? (int)(ng - j0) : 8;
            float h[8][8];
            bool exact = true;
            _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
                fp4_mults(w, w->s.p + srow[r] + j0, m, mc[r]);
                exact &= fp4_halves(mc[r], m, h[r]);
            }
            const int64_t k0 = j0 * g, k1 = (j0 + m) * g < n8 ? (j0 + m) * g : n8; /* k1 - k0: a multiple of 32 */
            if (!exact) { /* a multiplier whose half is inexact: 8 columns a step, dec8 */
                for (int i = 0; i < m; i++) {
                    float sv[8], zv[8] = {0};
                    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
                        sv[r] = mc[r][i];
                    ROW_STEPS8(k0 + i * g, k0 + (i + 1) * g < k1 ? k0 + (i + 1) * g : k1);
                }
                continue;
            }
            for (int64_t k = k0; k < k1; k += 32) { /* a group's 16-column halves never straddle two */
                const int i01 = (int)((k - k0) / g), i23 = (int)((k + 16 - k0) / g);
                PF_NEXT(k);
                const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
                const __m256 x2 = _mm256_loadu_ps(x + k + 16), x3 = _mm256_loadu_ps(x + k + 24);
                FP4_STEP(0, a0);
                FP4_STEP(1, a1);
                FP4_STEP(2, a2);
                FP4_STEP(3, a3);
                FP4_STEP(4, a4);
                FP4_STEP(5, a5);
                FP4_STEP(6, a6);
                FP4_STEP(7, a7);
            }
        }
    }
    for (int64_t g0 = 0; !fp4_32 && g0 < n8; g0 += g) {
        float sv[8], zv[8];
        if (kind == K_FP4) {
            const int64_t j = g0 / g, ng = (n8 + g - 1) / g;
            if (j % 8 == 0)
                _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
                    fp4_mults(w, w->s.p + srow[r] + j, ng - j < 8 ? (int)(ng - j) : 8, mc[r]);
            _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
                sv[r] = mc[r][j % 8], zv[r] = 0.0f;
        } else {
            _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
                group_params(w, kind, r0 + r, g0, srow[r], &sv[r], &zv[r]);
        }
        const int64_t g1 = g0 + g < n8 ? g0 + g : n8;
        if (p4_32) { /* 32 columns a step (g % 32 == 0): the same fused multiply-adds in the same order */
            if (w->z.p)
                P4_STEPS(true);
            else
                P4_STEPS(false);
            continue;
        }
        ROW_STEPS8(g0, g1);
    }
    const __m256 acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    for (int r = 0; r < NR; r++)
        out[r] = qk_hsum8_ps(acc[r]);
}
#undef ROW_STEP
#undef ROW_STEP32
#undef ROW_STEPS8
#undef FP4_STEP
#undef P4_STEPS
#undef PF_NEXT

/* One row against NT tokens (rows ys bytes apart): each decoded chunk shared by the tokens. */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
ftile_toks(const qk_wq *w, const int kind, int64_t r, const uint8_t *y, size_t ys, const int NT, float *out, size_t ldo)
{
    const int64_t n8 = w->cols, g = w->s.cdiv < n8 ? w->s.cdiv : n8; /* a multiple of 8 (kind_of) */
    const uint8_t *q = row_codes(w, kind, r);
    const int64_t srow = r / w->s.rdiv * w->s.rs; /* the row's first scale in the grid */
    const decp d = {w->rows * 4, w->code_offset};
    const bool p4_32 = kind == K_P4 && g % 32 == 0 && w->code_offset >= 0 && w->code_offset <= 128;
    const __m128i off8 = _mm_set1_epi8((char)w->code_offset);
    __m256 acc[8];
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
        acc[t] = _mm256_setzero_ps();
    float mc[8];
    for (int64_t g0 = 0; g0 < n8; g0 += g) {
        float sv, zv = 0.0f;
        if (kind == K_FP4) {
            const int64_t j = g0 / g, ng = (n8 + g - 1) / g;
            if (j % 8 == 0)
                fp4_mults(w, w->s.p + srow + j, ng - j < 8 ? (int)(ng - j) : 8, mc);
            sv = mc[j % 8];
        } else {
            group_params(w, kind, r, g0, srow, &sv, &zv);
        }
        const __m256 s = _mm256_set1_ps(sv), z = _mm256_set1_ps(zv);
        const int64_t g1 = g0 + g < n8 ? g0 + g : n8;
        if (p4_32) { /* 32 columns a step, each 8 into every token's chain in turn: the same order */
            for (int64_t k = g0; k < g1; k += 32) {
                __m256 wv[4];
                p4_dec32(q, k, off8, s, z, true, wv);
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
                    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
                        acc[t] = _mm256_fmadd_ps(wv[i], _mm256_loadu_ps((const float *)(y + (size_t)t * ys) + k + 8 * i), acc[t]);
            }
            continue;
        }
        for (int64_t k = g0; k < g1; k += 8) {
            const __m256 wv = dec8(d, kind, q, k, s, z);
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
                acc[t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps((const float *)(y + (size_t)t * ys) + k), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++)
        out[(size_t)t * ldo] = qk_hsum8_ps(acc[t]);
}

/* One kind over the whole tile: one token in eights of rows (K_P4's 32
 * columns a step in fours: eight rows' accumulators, activations and
 * scales spilled, 4 % slower on Zen 1); more tokens one row at a time in
 * eights, fours, twos and ones of tokens. */
#define FROWS(K, R) ftile_rows(w, K, r0 + r, R, (const float *)y, out + r)
#define FTOKS(K, T) ftile_toks(w, K, r0 + r, y + (size_t)t * ys, ys, T, out + (size_t)t * ldo + (size_t)r, ldo)
#define FTILE_ALL(K)                          \
    do {                                      \
        if (nt == 1) {                        \
            int r = 0;                        \
            for (; K != K_P4 && r + 8 <= nr; r += 8) \
                FROWS(K, 8);                  \
            for (; r + 4 <= nr; r += 4)       \
                FROWS(K, 4);                  \
            for (; r < nr; r++)               \
                FROWS(K, 1);                  \
            break;                            \
        }                                     \
        for (int r = 0; r < nr; r++) {        \
            int t = 0;                        \
            for (; t + 8 <= nt; t += 8)       \
                FTOKS(K, 8);                  \
            for (; t + 4 <= nt; t += 4)       \
                FTOKS(K, 4);                  \
            for (; t + 2 <= nt; t += 2)       \
                FTOKS(K, 2);                  \
            for (; t < nt; t++)               \
                FTOKS(K, 1);                  \
        }                                     \
    } while (0)

QK_TARGET_AVX2 static void float_tile(const qk_wq *w, int kind, int64_t r0, int nr, const uint8_t *y, size_t ys,
                                      int nt, float *out, size_t ldo)
{
    switch (kind) {
    case K_FP8: FTILE_ALL(K_FP8); break;
    case K_FP8X: FTILE_ALL(K_FP8X); break;
    case K_I8: FTILE_ALL(K_I8); break;
    case K_I8Z: FTILE_ALL(K_I8Z); break;
    case K_P4: FTILE_ALL(K_P4); break;
    case K_P8: FTILE_ALL(K_P8); break;
    case K_FP4: FTILE_ALL(K_FP4); break;
    case K_MLX4: FTILE_ALL(K_MLX4); break;
    case K_GPTQ4: FTILE_ALL(K_GPTQ4); break;
    case K_BNB8: FTILE_ALL(K_BNB8); break;
    default: break;
    }
}

QK_TARGET_AVX2 void qk_x86_avx2_wq_tile(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt,
                                        float *out, size_t ldo)
{
    if (qk_wq_act_float(w->act)) {
        const int kind = kind_of(w);
        if (kind != K_NONE) {
            float_tile(w, kind, r0, nr, y, ys, nt, out, ldo);
            return;
        }
    } else if (w->act == QK_A_I8 && qk_x86_avx2_i8_tile(w, r0, nr, y, ys, nt, out, ldo)) {
        return;
    } else if ((w->act == QK_A_F8B || w->act == QK_A_F8G) && qk_x86_avx2_f8_tile(w, r0, nr, y, ys, nt, out, ldo)) {
        return;
    } else if (w->act == QK_A_NV4 && w->type == QK_W_NVFP4 && w->s.cdiv == 16 && w->s.cs == 1) {
        qk_x86_avx2_nv4_tile(w, r0, nr, y, ys, nt, out, ldo);
        return;
    }
    qk_type_get(w->type)->wq_tile(w, r0, nr, y, ys, nt, out, ldo);
}

const qk_wq_ops qk_x86_avx2_wq[] = {
    {.id = QK_W_FP8, .wq_tile = qk_x86_avx2_wq_tile},   {.id = QK_W_INT8, .wq_tile = qk_x86_avx2_wq_tile, .wq_pack = qk_x86_avx2_i8_pack},
    {.id = QK_W_PACK, .wq_tile = qk_x86_avx2_wq_tile},  {.id = QK_W_NVFP4, .wq_tile = qk_x86_avx2_wq_tile},
    {.id = QK_W_MXFP4, .wq_tile = qk_x86_avx2_wq_tile}, {.id = QK_W_MLX, .wq_tile = qk_x86_avx2_wq_tile},
    {.id = QK_W_GPTQ, .wq_tile = qk_x86_avx2_wq_tile},  {.id = QK_W_BNB8, .wq_tile = qk_x86_avx2_wq_tile},
    {.id = QK_A_NV4, .wq_act = qk_x86_avx2_act_nv4},    {.id = -1},
};
#endif
