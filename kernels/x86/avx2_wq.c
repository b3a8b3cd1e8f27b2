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
 * qk_hsum8_ps then sums the lanes in the reference's tree and the last
 * n % 8 elements are added one by one with the reference decoder.  A tile
 * keeps 4 rows x 2 tokens (decode: 8 rows x 1) of accumulators in registers
 * over the whole row.  Codes are turned into floats exactly: E4M3 through
 * its bits as an F16 (vcvtph2ps) times 2^8, E2M1 through a table of its 8
 * magnitudes and the sign bit, integers through vcvtdq2ps.  (A NaN E4M3 code,
 * 0x7F/0xFF, decodes to a finite value here and to NaN in the reference; no
 * producer writes one into a weight.)
 *
 * Integer products: the exact int32 sums of wq_int.c (vpmaddubsw on the
 * weight's magnitude and the activation's sign-adjusted codes, vpmaddwd),
 * then the reference's float steps on the same integers.
 *
 * Layouts or shapes without a kernel here (act-order g_idx, AWQ, bitsandbytes,
 * bit streams of 3/5/6/7 bits, groups that are not multiples of 8) run the
 * reference. */
#include "kernels/x86/simd_common.h"

#include <string.h>

#include "kernels/elements.h"
#include "kernels/fp4.h"
#include "kernels/wq_impl.h"

#ifdef QK_X86

enum { K_FP8, K_I8, K_P4, K_P8, K_FP4, K_MLX4, K_GPTQ4, K_BNB8, K_NONE };

/* Which decoder serves w, or K_NONE. */
static int kind_of(const qk_wq *w)
{
    const int64_t cd = w->s.cdiv;
    const bool grp8 = cd % 8 == 0 || cd >= w->cols;
    if (w->gidx || !grp8)
        return K_NONE;
    const bool zf = !w->z.p || w->z.bits == 0 || (w->z.bits == w->bits && !w->z.stream);
    switch (w->type) {
    case QK_W_FP8: return w->elem == QK_ELEM_FP8_E4M3 ? K_FP8 : K_NONE;
    case QK_W_INT8: return K_I8;
    case QK_W_PACK:
        if (w->order != QK_WQ_WORDS || !zf)
            return K_NONE;
        return w->bits == 4 ? K_P4 : w->bits == 8 ? K_P8 : K_NONE;
    case QK_W_NVFP4:
    case QK_W_MXFP4: return K_FP4;
    case QK_W_MLX: return w->bits == 4 && w->order == QK_WQ_STREAM ? K_MLX4 : K_NONE;
    case QK_W_GPTQ: return w->bits == 4 && zf ? K_GPTQ4 : K_NONE;
    case QK_W_BNB8: return K_BNB8;
    default: return K_NONE;
    }
}

/* One row's decoding state. */
typedef struct {
    const uint8_t *q;      /* the row's codes (GPTQ: word column r) */
    int64_t r;
    int64_t next;          /* first element of the next scale group */
    float s, z;            /* the current group's scale and zero point (MLX: bias) */
} rowst;

static const float e2m1_mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

QK_TARGET_AVX2 static inline void row_init(const qk_wq *w, int kind, int64_t r, rowst *st)
{
    st->r = r;
    st->next = 0;
    st->s = st->z = 0.0f;
    st->q = kind == K_GPTQ4 ? w->q + 4 * r : w->q + r * w->q_rs;
}

/* The group's parameters when k starts one (k a multiple of 8). */
QK_TARGET_AVX2 static inline void row_group(const qk_wq *w, int kind, rowst *st, int64_t k)
{
    if (k < st->next)
        return;
    const int64_t cd = w->s.cdiv < w->cols ? w->s.cdiv : w->cols;
    st->next = k + cd;
    if (kind == K_FP4) {
        st->s = qk_wq_fp4_mult(w, w->s.p[st->r / w->s.rdiv * w->s.rs + k / w->s.cdiv * w->s.cs]);
        return;
    }
    if (kind == K_BNB8) {
        st->s = qk_wq_val(w->s.p, w->s.type, st->r);
        return;
    }
    st->s = qk_wq_scale(w, st->r, k);
    st->z = qk_wq_zero(w, st->r, k);
}

/* E4M3 bytes -> floats, exactly: the 7 value bits placed as an F16's
 * exponent and mantissa, the sign moved, times 2^8. */
QK_TARGET_AVX2 static inline __m256 e4m3x8(__m128i b8)
{
    const __m128i h = _mm_cvtepu8_epi16(b8);
    const __m128i f16 = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(h, _mm_set1_epi16(0x80)), 8),
                                     _mm_slli_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7F)), 7));
    return _mm256_mul_ps(_mm256_cvtph_ps(f16), _mm256_set1_ps(256.0f));
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
    uint32_t u;
    memcpy(&u, p, 4);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)u), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                            _mm256_set1_epi32(15));
}

/* Weights [k, k + 8) of a row, as the reference decodes them. */
QK_TARGET_AVX2 static inline __m256 dec8(const qk_wq *w, int kind, rowst *st, int64_t k)
{
    row_group(w, kind, st, k);
    const __m256 s = _mm256_set1_ps(st->s);
    switch (kind) {
    case K_FP8:
        return _mm256_mul_ps(e4m3x8(_mm_loadl_epi64((const __m128i *)(st->q + k))), s);
    case K_I8: {
        const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(st->q + k))));
        return w->z.p ? _mm256_mul_ps(_mm256_sub_ps(q, _mm256_set1_ps(st->z)), s) : _mm256_mul_ps(q, s);
    }
    case K_BNB8: {
        const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(st->q + k))));
        return _mm256_mul_ps(_mm256_mul_ps(q, s), _mm256_set1_ps(7.874015718698502e-3f));
    }
    case K_P4:
    case K_GPTQ4: {
        const uint8_t *p = kind == K_P4 ? st->q + k / 2 : st->q + (size_t)(k / 8) * (size_t)w->rows * 4;
        const __m256 q = _mm256_cvtepi32_ps(_mm256_sub_epi32(fields8(p), _mm256_set1_epi32(w->code_offset)));
        return _mm256_mul_ps(_mm256_sub_ps(q, _mm256_set1_ps(st->z)), s);
    }
    case K_P8: {
        const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(st->q + k)));
        const __m256 q = _mm256_cvtepi32_ps(_mm256_sub_epi32(c, _mm256_set1_epi32(w->code_offset)));
        return _mm256_mul_ps(_mm256_sub_ps(q, _mm256_set1_ps(st->z)), s);
    }
    case K_MLX4: {
        const __m256 q = _mm256_cvtepi32_ps(nib8(st->q + k / 2));
        return _mm256_add_ps(_mm256_mul_ps(s, q), _mm256_set1_ps(st->z));
    }
    default: { /* K_FP4 */
        const __m256i c = nib8(st->q + k / 2);
        const __m256 mag = _mm256_permutevar8x32_ps(_mm256_loadu_ps(e2m1_mag), c);
        const __m256 v = _mm256_or_ps(mag, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(c, 3), 31)));
        return _mm256_mul_ps(v, s);
    }
    }
}

/* NR rows x NT tokens, each output THE WQ FLOAT ORDER. */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
ftile(const qk_wq *w, int kind, int64_t r0, int NR, const uint8_t *y, size_t ys, int NT, float *out, size_t ldo)
{
    const int64_t n = w->cols, n8 = n - n % 8;
    rowst st[8];
    __m256 acc[8][2];
    const float *x[2];
    for (int t = 0; t < NT; t++)
        x[t] = (const float *)(y + (size_t)t * ys);
    for (int r = 0; r < NR; r++) {
        row_init(w, kind, r0 + r, &st[r]);
        for (int t = 0; t < NT; t++)
            acc[r][t] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < n8; k += 8) {
        __m256 xv[2];
        for (int t = 0; t < NT; t++)
            xv[t] = _mm256_loadu_ps(x[t] + k);
        for (int r = 0; r < NR; r++) {
            const __m256 wv = dec8(w, kind, &st[r], k);
            for (int t = 0; t < NT; t++)
                acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
        }
    }
    float tail[8];
    const qk_wq_dec_fn dec = qk_wq_decoder(w->type);
    for (int r = 0; r < NR; r++) {
        if (n8 < n)
            dec(w, r0 + r, n8, n - n8, tail);
        for (int t = 0; t < NT; t++) {
            float s = qk_hsum8_ps(acc[r][t]);
            for (int64_t i = n8; i < n; i++)
                s = s + tail[i - n8] * x[t][i];
            out[(size_t)t * ldo + (size_t)r] = s;
        }
    }
}

#define FTILE(K, R, T) ftile(w, K, r0 + r, R, y + (size_t)t * ys, ys, T, out + (size_t)t * ldo + (size_t)r, ldo)

/* One kind over the whole tile: rows in fours (one token: eights), tokens in twos. */
#define FTILE_ALL(K)                                                             \
    do {                                                                         \
        if (nt == 1) {                                                           \
            const int t = 0;                                                     \
            int r = 0;                                                           \
            for (; r + 8 <= nr; r += 8)                                          \
                FTILE(K, 8, 1);                                                  \
            for (; r < nr; r++)                                                  \
                FTILE(K, 1, 1);                                                  \
            break;                                                               \
        }                                                                        \
        for (int r = 0; r < nr; r += 4) {                                        \
            const int rr = nr - r < 4 ? nr - r : 4;                              \
            for (int t = 0; t < nt; t += 2) {                                    \
                if (nt - t >= 2 && rr == 4)                                      \
                    FTILE(K, 4, 2);                                              \
                else                                                             \
                    for (int tt = t; tt < t + 2 && tt < nt; tt++)                \
                        for (int q = 0; q < rr; q++)                             \
                            ftile(w, K, r0 + r + q, 1, y + (size_t)tt * ys, ys, 1, \
                                  out + (size_t)tt * ldo + (size_t)(r + q), ldo); \
            }                                                                    \
        }                                                                        \
    } while (0)

QK_TARGET_AVX2 static void float_tile(const qk_wq *w, int kind, int64_t r0, int nr, const uint8_t *y, size_t ys,
                                      int nt, float *out, size_t ldo)
{
    switch (kind) {
    case K_FP8: FTILE_ALL(K_FP8); break;
    case K_I8: FTILE_ALL(K_I8); break;
    case K_P4: FTILE_ALL(K_P4); break;
    case K_P8: FTILE_ALL(K_P8); break;
    case K_FP4: FTILE_ALL(K_FP4); break;
    case K_MLX4: FTILE_ALL(K_MLX4); break;
    case K_GPTQ4: FTILE_ALL(K_GPTQ4); break;
    case K_BNB8: FTILE_ALL(K_BNB8); break;
    default: break;
    }
}

/* ---- integer products ------------------------------------------------------ */

/* Exact sums over [k0, k0 + m) (m a multiple of 32) of one int8 weight row
 * against one token's int8 codes: dot and, when wsum, the weights' sum. */
QK_TARGET_AVX2 static inline void i8_sums(const int8_t *wr, const int8_t *a, int64_t k0, int64_t m, bool wide,
                                          int64_t *dot, int64_t *wsum)
{
    __m256i acc = _mm256_setzero_si256(), ws = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t k = k0; k < k0 + m; k += 32) {
        const __m256i wv = _mm256_loadu_si256((const __m256i *)(wr + k));
        const __m256i av = _mm256_loadu_si256((const __m256i *)(a + k));
        if (!wide) { /* |a| <= 127: |w| (up to 128, unsigned) times a with w's sign */
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv),
                                                                                 _mm256_sign_epi8(av, wv)), ones));
            continue;
        }
        /* codes that reach -128 on both sides: 16-bit products */
        const __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(wv));
        const __m256i w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(wv, 1));
        const __m256i a0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(av));
        const __m256i a1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(av, 1));
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(w0, a0), _mm256_madd_epi16(w1, a1)));
        ws = _mm256_add_epi32(ws, _mm256_add_epi32(_mm256_madd_epi16(w0, ones), _mm256_madd_epi16(w1, ones)));
    }
    *dot = qk_hsum_epi32(acc);
    *wsum = wide ? qk_hsum_epi32(ws) : 0;
}

/* W_INT8 (symmetric) x QK_A_I8, the reference's steps (wq_int.c). */
QK_TARGET_AVX2 static void i8_tile(const qk_wq *w, int64_t r0, int nr, const uint8_t *y, size_t ys, int nt,
                                   float *out, size_t ldo)
{
    const int64_t n = w->cols, g = w->s.cdiv < n ? w->s.cdiv : n;
    for (int t = 0; t < nt; t++) {
        const uint8_t *row = y + (size_t)t * ys;
        qk_a_i8_head h;
        memcpy(&h, row, sizeof h);
        const int8_t *a = (const int8_t *)(row + QK_A_I8_HEAD);
        /* only the dynamic symmetric codes stay within [-127, 127] */
        const bool wide = w->a_asym || w->a_static;
        for (int r = 0; r < nr; r++) {
            const int8_t *wr = (const int8_t *)(w->q + (r0 + r) * w->q_rs);
            float sum = 0.0f;
            for (int64_t k0 = 0; k0 < n; k0 += g) {
                int64_t dot, ws;
                i8_sums(wr, a, k0, g, wide, &dot, &ws);
                sum = sum + (float)(dot - (int64_t)h.zero * ws) * qk_wq_scale(w, r0 + r, k0);
            }
            out[(size_t)t * ldo + (size_t)r] = h.scale * sum;
        }
    }
}

/* Doubled E2M1 values of the 16 codes (fp4.h's qk_e2m1_x2). */
QK_TARGET_AVX2 static inline __m128i e2m1x2_lut(void) { return _mm_loadu_si128((const __m128i *)qk_e2m1_x2); }

/* W_NVFP4 x QK_A_NV4 (wq_int.c): 8 blocks of 16 at a time, lane b = block b. */
QK_TARGET_AVX2 static void nv4_tile(const qk_wq *w, int64_t r0, int nr, const uint8_t *y, size_t ys, int nt,
                                    float *out, size_t ldo)
{
    const int64_t nb = w->cols / QK_A_NV4_BLOCK, nb8 = nb - nb % 8;
    const __m256i lut = _mm256_broadcastsi128_si256(e2m1x2_lut()), m4 = _mm256_set1_epi8(15);
    const __m256i ones = _mm256_set1_epi16(1), perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256 gv = _mm256_set1_ps(w->g);
    for (int r = 0; r < nr; r++) {
        const uint8_t *q = w->q + (r0 + r) * w->q_rs;
        const uint8_t *srow = w->s.p + (r0 + r) / w->s.rdiv * w->s.rs;
        for (int t = 0; t < nt; t++) {
            const uint8_t *row = y + (size_t)t * ys;
            const int8_t *a = (const int8_t *)(row + nb * (int64_t)sizeof(float));
            __m256 lane = _mm256_setzero_ps();
            for (int64_t b = 0; b < nb8; b += 8) {
                __m256i c[4];
                for (int j = 0; j < 4; j++) { /* blocks b + 2j, b + 2j + 1: 16 bytes of codes */
                    const __m128i by = _mm_loadu_si128((const __m128i *)(q + (b + 2 * j) * 8));
                    /* element 2i in the low nibble of byte i: interleave low and high nibbles */
                    const __m128i lo = _mm_and_si128(by, _mm_set1_epi8(15));
                    const __m128i hi = _mm_and_si128(_mm_srli_epi16(by, 4), _mm_set1_epi8(15));
                    const __m256i codes = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
                    const __m256i wv = _mm256_shuffle_epi8(lut, _mm256_and_si256(codes, m4));
                    const __m256i av = _mm256_loadu_si256((const __m256i *)(a + (b + 2 * j) * 16));
                    c[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(av, wv)),
                                             ones);
                }
                /* lanes [b0 b2 b4 b6 | b1 b3 b5 b7] after two hadds, then in block order */
                const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(c[0], c[1]), _mm256_hadd_epi32(c[2], c[3]));
                const __m256 isum = _mm256_cvtepi32_ps(_mm256_permutevar8x32_epi32(h, perm));
                __m256 dw = e4m3x8(_mm_loadl_epi64((const __m128i *)(srow + b)));
                dw = w->g_div ? _mm256_div_ps(dw, gv) : _mm256_mul_ps(dw, gv);
                const __m256 m = _mm256_mul_ps(dw, _mm256_loadu_ps((const float *)row + b));
                lane = _mm256_fmadd_ps(isum, m, lane);
            }
            float s = qk_hsum8_ps(lane);
            for (int64_t b = nb8; b < nb; b++) {
                int32_t isum = 0;
                for (int i = 0; i < QK_A_NV4_BLOCK; i++) {
                    const int64_t k = b * QK_A_NV4_BLOCK + i;
                    isum += qk_e2m1_x2[q[k / 2] >> (k % 2 * 4) & 15] * a[k];
                }
                float da;
                memcpy(&da, row + b * (int64_t)sizeof(float), 4);
                s = s + (float)isum * (qk_wq_fp4_mult(w, srow[b]) * da);
            }
            out[(size_t)t * ldo + (size_t)r] = s * 0.25f;
        }
    }
}

QK_TARGET_AVX2 static void avx2_wq_tile(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt,
                                        float *out, size_t ldo)
{
    if (qk_wq_act_float(w->act)) {
        const int kind = kind_of(w);
        if (kind != K_NONE) {
            float_tile(w, kind, r0, nr, y, ys, nt, out, ldo);
            return;
        }
    } else if (w->act == QK_A_I8 && w->type == QK_W_INT8 && !w->z.p && w->s.cdiv % 32 == 0 && w->cols % 32 == 0 &&
               !w->gidx) {
        i8_tile(w, r0, nr, y, ys, nt, out, ldo);
        return;
    } else if (w->act == QK_A_NV4 && w->type == QK_W_NVFP4 && w->s.cdiv == 16 && w->s.cs == 1) {
        nv4_tile(w, r0, nr, y, ys, nt, out, ldo);
        return;
    }
    qk_type_get(w->type)->wq_tile(w, r0, nr, y, ys, nt, out, ldo);
}

const qk_wq_ops qk_x86_avx2_wq[] = {
    {.id = QK_W_FP8, .wq_tile = avx2_wq_tile},   {.id = QK_W_INT8, .wq_tile = avx2_wq_tile},
    {.id = QK_W_PACK, .wq_tile = avx2_wq_tile},  {.id = QK_W_NVFP4, .wq_tile = avx2_wq_tile},
    {.id = QK_W_MXFP4, .wq_tile = avx2_wq_tile}, {.id = QK_W_MLX, .wq_tile = avx2_wq_tile},
    {.id = QK_W_GPTQ, .wq_tile = avx2_wq_tile},  {.id = QK_W_BNB8, .wq_tile = avx2_wq_tile},
    {.id = -1},
};
#endif
