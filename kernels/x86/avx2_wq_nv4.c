/* avx2_wq_nv4.c - AVX2 integer products of NVFP4 W4A4 (kernels/wq.h
 * W_NVFP4 weights with one E4M3 scale per 16 columns x QK_A_NV4
 * activations), bitwise equal to the scalar reference qk_wq_tile_nv4
 * (kernels/wq_int.c); and the QK_A_NV4 activation encoder, bitwise equal
 * to qk_wq_act_nv4 (kernels/wq_act.c).  The rows stay as stored: a tile
 * decodes each piece of its rows once for its tokens. */
#include "kernels/x86/avx2_wq.h"

#include <string.h>

#ifdef QK_X86

/* W_NVFP4 x QK_A_NV4 (wq_int.c): 8 blocks of 16 at a time, lane b = block b.
 * Two hadds leave a step's 8 block sums in the lanes [b0 b2 b4 b6 | b1 b3 b5
 * b7]; the lanes are kept in that order (the multipliers of the weights and
 * of the tokens permuted to it once) and put back in block order once a
 * row and token, instead of a lane permutation a step (4 cycles on Zen 1). */
QK_TARGET_AVX2 static inline __m256i nv4_hadd_order(void) { return _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7); }

/* A piece of NVFP4 W4A4 weight row, decoded once for all the tokens: the
 * doubled E2M1 values (signed bytes) and their magnitudes, and the blocks'
 * multipliers (in nv4_hadd_order each 8). */
#define NV4_PIECE 1024 /* elements (64 blocks) */
typedef struct {
    int8_t wv[NV4_PIECE], mag[NV4_PIECE];
    float dw[NV4_PIECE / QK_A_NV4_BLOCK];
} nv4_piece;

QK_TARGET_AVX2 static void nv4_decode(const qk_wq *w, const uint8_t *q, const uint8_t *srow, int64_t b0, int nbp,
                                      nv4_piece *p)
{
    const __m128i lut = e2m1x2_lut();
    for (int j = 0; j < nbp; j += 2) { /* two blocks: 16 bytes of codes */
        __m128i c[2];
        nib32(q + (b0 + j) * 8, c);
        const __m256i wv = _mm256_set_m128i(_mm_shuffle_epi8(lut, c[1]), _mm_shuffle_epi8(lut, c[0]));
        _mm256_storeu_si256((__m256i *)(p->wv + j * 16), wv);
        _mm256_storeu_si256((__m256i *)(p->mag + j * 16), _mm256_sign_epi8(wv, wv));
    }
    for (int j = 0; j < nbp; j += 8) { /* nbp: a multiple of 8 */
        fp4_mults(w, srow + b0 + j, 8, p->dw + j);
        _mm256_storeu_ps(p->dw + j, _mm256_permutevar8x32_ps(_mm256_loadu_ps(p->dw + j), nv4_hadd_order()));
    }
}

/* NT (1 or 2) tokens' lanes (nv4_hadd_order) over a decoded piece's nbp
 * blocks; a[t] the tokens' codes of the piece, da[t] their block
 * multipliers in nv4_hadd_order. */
QK_TARGET_AVX2 __attribute__((always_inline)) static inline void
nv4_span(const nv4_piece *p, int nbp, const int8_t *const a[2], const float *const da[2], const int NT, __m256 *lane)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 l[2];
    _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++)
        l[t] = lane[t];
    for (int j = 0; j < nbp; j += 8) {
        __m256i c[2][4];
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
            const int o = (j + 2 * i) * 16;
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(p->wv + o));
            const __m256i mag = _mm256_loadu_si256((const __m256i *)(p->mag + o));
            _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++)
                c[t][i] = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(mag, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a[t] + o)), wv)), ones);
        }
        const __m256 dw = _mm256_loadu_ps(p->dw + j);
        _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) {
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(c[t][0], c[t][1]), _mm256_hadd_epi32(c[t][2], c[t][3]));
            l[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), _mm256_mul_ps(dw, _mm256_loadu_ps(da[t] + j)), l[t]);
        }
    }
    _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++)
        lane[t] = l[t];
}

/* A row's output for the token row at arow from the sum s of its first
 * multiple of 8 blocks: the reference's tail blocks added in order, times
 * 0.25 (qk_wq_tile_nv4). */
static inline float nv4_out(const qk_wq *w, int64_t row, const uint8_t *arow, float s)
{
    const int64_t nb = w->cols / QK_A_NV4_BLOCK;
    const uint8_t *q = w->q + row * w->q_rs, *srow = w->s.p + row / w->s.rdiv * w->s.rs;
    const int8_t *a = (const int8_t *)(arow + nb * 8);
    for (int64_t b = nb - nb % 8; b < nb; b++)
        s = s + (float)qk_wq_nv4_isum(q, a, b) * qk_wq_nv4_mult(w, srow, arow, b);
    return s * 0.25f;
}

enum { NV4_ROWS = 16, NV4_PB = NV4_PIECE / QK_A_NV4_BLOCK }; /* rows a tile (matmul.c's ROW_TILE); blocks a piece */

/* W_NVFP4 x QK_A_NV4 (wq_int.c): piece by piece, the tokens' block
 * multipliers of the piece permuted once for all the rows; each row's piece
 * decoded once for the tokens; every (row, token)'s lanes kept between the
 * pieces. */
QK_TARGET_AVX2 static void nv4_tile(const qk_wq *w, int64_t r0, int nr, const uint8_t *y, size_t ys, int nt,
                                    float *out, size_t ldo)
{
    const int64_t nb = w->cols / QK_A_NV4_BLOCK, nb8 = nb - nb % 8;
    nv4_piece p;
    float dah[QK_WQ_MAX_NT][NV4_PB];
    __m256 lanes[NV4_ROWS][QK_WQ_MAX_NT];
    for (int rr = 0; rr < nr; rr += NV4_ROWS) {
        const int mr = nr - rr < NV4_ROWS ? nr - rr : NV4_ROWS;
        for (int t0 = 0; t0 < nt; t0 += QK_WQ_MAX_NT) {
            const int mt = nt - t0 < QK_WQ_MAX_NT ? nt - t0 : QK_WQ_MAX_NT;
            for (int r = 0; r < mr; r++)
                for (int t = 0; t < mt; t++)
                    lanes[r][t] = _mm256_setzero_ps();
            for (int64_t b0 = 0; b0 < nb8; b0 += NV4_PB) {
                const int nbp = (int)(nb8 - b0 < NV4_PB ? nb8 - b0 : NV4_PB);
                for (int t = 0; t < mt; t++)
                    for (int j = 0; j < nbp; j += 8)
                        _mm256_storeu_ps(dah[t] + j,
                                         _mm256_permutevar8x32_ps(_mm256_loadu_ps((const float *)(y + (size_t)(t0 + t) * ys) + b0 + j),
                                                                  nv4_hadd_order()));
                for (int r = 0; r < mr; r++) {
                    const int64_t row = r0 + rr + r;
                    nv4_decode(w, w->q + row * w->q_rs, w->s.p + row / w->s.rdiv * w->s.rs, b0, nbp, &p);
                    for (int t = 0; t < mt; t += 2) { /* two tokens: two independent chains */
                        const int k = mt - t < 2 ? 1 : 2;
                        const int8_t *a[2];
                        const float *da[2];
                        for (int i = 0; i < k; i++) {
                            a[i] = (const int8_t *)(y + (size_t)(t0 + t + i) * ys + nb * 8) + b0 * QK_A_NV4_BLOCK;
                            da[i] = dah[t + i];
                        }
                        if (k == 2)
                            nv4_span(&p, nbp, a, da, 2, &lanes[r][t]);
                        else
                            nv4_span(&p, nbp, a, da, 1, &lanes[r][t]);
                    }
                }
            }
            for (int r = 0; r < mr; r++)
                for (int t = 0; t < mt; t++) {
                    /* the lanes back in block order: lane i holds block nv4_hadd_order[i] */
                    const float s =
                        qk_hsum8_ps(_mm256_permutevar8x32_ps(lanes[r][t], _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
                    out[(size_t)(t0 + t) * ldo + (size_t)(rr + r)] = nv4_out(w, r0 + rr + r, y + (size_t)(t0 + t) * ys, s);
                }
        }
    }
}

/* ---- NVFP4 W4A4 with the rows in the lanes --------------------------------
 * Eight rows at a time, as avx2_packed.c's Q4_0: a piece of the rows'
 * codes is decoded once for the tile's tokens into bytes 2w + 12 (0..24,
 * unsigned) laid out per block as four vectors whose bytes 4r .. 4r+3 are
 * row r's columns 4k .. 4k+3, beside the eight rows' block multipliers.
 * Per token and block, four vpmaddubsw against the activation's matching
 * four codes (broadcast, signed 2a) add (2w + 12) * 2a into 16-bit pair
 * sums (at most 4 * 2 * 24 * 12 = 2304), one vpmaddwd gives each row's
 * block sum in its own lane, and less 12 * the block's code sum (the
 * activation row carries it) that is the reference's exact isum: no
 * horizontal step.  The float steps are the reference's lane by lane:
 * A[b % 8] = fma((float)isum, dw * da, A[b % 8]) for the first multiple
 * of 8 blocks, the eight accumulators summed in qk_fdot_hsum8's tree, the
 * tail blocks added in order, times 0.25. */
enum { NV8_PB = 64 }; /* blocks a piece */
typedef struct {
    uint8_t v[NV8_PB][4][32];
    float dw[NV8_PB][8];
} nv8_piece;

/* Rows r0 .. r0+7, blocks [b0, b0 + nbp) into p. */
QK_TARGET_AVX2 static void nv8_decode(const qk_wq *w, int64_t r0, int64_t b0, int nbp, nv8_piece *p)
{
    _Alignas(32) uint8_t u[8][NV8_PB * QK_A_NV4_BLOCK]; /* each row's 2w + 12 in column order */
    float m[8][NV8_PB];
    const __m128i lut = _mm_add_epi8(_mm_loadu_si128((const __m128i *)qk_e2m1_x2), _mm_set1_epi8(12));
    for (int r = 0; r < 8; r++) {
        const uint8_t *q = w->q + (r0 + r) * w->q_rs + b0 * 8, *sb = w->s.p + (r0 + r) / w->s.rdiv * w->s.rs + b0;
        for (int j = 0; j < nbp; j += 2) { /* two blocks: 16 bytes of codes */
            __m128i c[2];
            nib32(q + 8 * j, c);
            _mm_storeu_si128((__m128i *)(u[r] + 16 * j), _mm_shuffle_epi8(lut, c[0]));
            _mm_storeu_si128((__m128i *)(u[r] + 16 * j + 16), _mm_shuffle_epi8(lut, c[1]));
        }
        for (int j = 0; j < nbp; j += 8)
            fp4_mults(w, sb + j, nbp - j < 8 ? nbp - j : 8, m[r] + j);
    }
    for (int b = 0; b < nbp; b++) {
        __m128i h[2][4]; /* rows 4i .. 4i+3: dword k of each row, transposed */
        for (int i = 0; i < 2; i++) {
            const __m128i x0 = _mm_loadu_si128((const __m128i *)(u[4 * i] + 16 * b));
            const __m128i x1 = _mm_loadu_si128((const __m128i *)(u[4 * i + 1] + 16 * b));
            const __m128i x2 = _mm_loadu_si128((const __m128i *)(u[4 * i + 2] + 16 * b));
            const __m128i x3 = _mm_loadu_si128((const __m128i *)(u[4 * i + 3] + 16 * b));
            const __m128i t0 = _mm_unpacklo_epi32(x0, x1), t1 = _mm_unpackhi_epi32(x0, x1);
            const __m128i t2 = _mm_unpacklo_epi32(x2, x3), t3 = _mm_unpackhi_epi32(x2, x3);
            h[i][0] = _mm_unpacklo_epi64(t0, t2), h[i][1] = _mm_unpackhi_epi64(t0, t2);
            h[i][2] = _mm_unpacklo_epi64(t1, t3), h[i][3] = _mm_unpackhi_epi64(t1, t3);
        }
        for (int k = 0; k < 4; k++)
            _mm256_storeu_si256((__m256i *)p->v[b][k], _mm256_set_m128i(h[1][k], h[0][k]));
        for (int r = 0; r < 8; r++)
            p->dw[b][r] = m[r][b];
    }
}

/* One block of one token into A: the rows' exact isums, then the float step. */
#define NV8_BLOCK(j, A)                                                                                          \
    do {                                                                                                       \
        const int bb = jb + (j);                                                                               \
        const int8_t *ab = a + 16 * (b0 + bb);                                                                 \
        __m256i s16 = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)p->v[bb][0]), _mm256_set1_epi32((int)qk_ld_u32((const uint8_t *)ab))); \
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)p->v[bb][1]), _mm256_set1_epi32((int)qk_ld_u32((const uint8_t *)ab + 4)))); \
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)p->v[bb][2]), _mm256_set1_epi32((int)qk_ld_u32((const uint8_t *)ab + 8)))); \
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)p->v[bb][3]), _mm256_set1_epi32((int)qk_ld_u32((const uint8_t *)ab + 12)))); \
        const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(s16, ones), _mm256_set1_epi32(12 * asum[b0 + bb]));  \
        A = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(_mm256_loadu_ps(p->dw[bb]), _mm256_set1_ps(da[b0 + bb])), A); \
    } while (0)

/* Eight rows from r0 (tile rows out + ...) against nt tokens. */
QK_TARGET_AVX2 static void nv8_rows(const qk_wq *w, int64_t r0, const uint8_t *y, size_t ys, int nt, float *out,
                                    size_t ldo)
{
    const int64_t nb = w->cols / QK_A_NV4_BLOCK, nb8 = nb - nb % 8;
    const __m256i ones = _mm256_set1_epi16(1);
    nv8_piece pc, *p = &pc;
    __m256 acc[QK_WQ_MAX_NT][8];
    for (int t0 = 0; t0 < nt; t0 += QK_WQ_MAX_NT) {
        const int mt = nt - t0 < QK_WQ_MAX_NT ? nt - t0 : QK_WQ_MAX_NT;
        for (int t = 0; t < mt; t++)
            for (int i = 0; i < 8; i++)
                acc[t][i] = _mm256_setzero_ps();
        for (int64_t b0 = 0; b0 < nb8; b0 += NV8_PB) {
            const int nbp = (int)(nb8 - b0 < NV8_PB ? nb8 - b0 : NV8_PB);
            nv8_decode(w, r0, b0, nbp, p);
            for (int t = 0; t < mt; t++) {
                const uint8_t *row = y + (size_t)(t0 + t) * ys;
                const float *da = (const float *)(const void *)row;
                const int32_t *asum = (const int32_t *)(const void *)(row + nb * 4);
                const int8_t *a = (const int8_t *)(row + nb * 8);
                __m256 A0 = acc[t][0], A1 = acc[t][1], A2 = acc[t][2], A3 = acc[t][3];
                __m256 A4 = acc[t][4], A5 = acc[t][5], A6 = acc[t][6], A7 = acc[t][7];
                for (int jb = 0; jb < nbp; jb += 8) {
                    NV8_BLOCK(0, A0);
                    NV8_BLOCK(1, A1);
                    NV8_BLOCK(2, A2);
                    NV8_BLOCK(3, A3);
                    NV8_BLOCK(4, A4);
                    NV8_BLOCK(5, A5);
                    NV8_BLOCK(6, A6);
                    NV8_BLOCK(7, A7);
                }
                acc[t][0] = A0, acc[t][1] = A1, acc[t][2] = A2, acc[t][3] = A3;
                acc[t][4] = A4, acc[t][5] = A5, acc[t][6] = A6, acc[t][7] = A7;
            }
        }
        for (int t = 0; t < mt; t++) {
            const __m256 *A = acc[t]; /* qk_fdot_hsum8's tree, lane by lane */
            const __m256 sv = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(A[0], A[4]), _mm256_add_ps(A[2], A[6])),
                                            _mm256_add_ps(_mm256_add_ps(A[1], A[5]), _mm256_add_ps(A[3], A[7])));
            float s[8];
            _mm256_storeu_ps(s, sv);
            for (int r = 0; r < 8; r++)
                out[(size_t)(t0 + t) * ldo + (size_t)r] = nv4_out(w, r0 + r, y + (size_t)(t0 + t) * ys, s[r]);
        }
    }
}
#undef NV8_BLOCK

/* ---- the activation encoder ------------------------------------------------- */

/* E4M3 quantize-dequantize of v >= 0 (no NaN), saturated, as
 * avx512_wq_nv4.c's nv4_e4m3_qdq at 8 lanes: min(v, 448) rounded to 3
 * mantissa bits, ties to even (add half an ulp less one plus the kept lsb,
 * then clear), below 2^-6 to a multiple of 2^-9 (rint(v * 512) / 512). */
QK_TARGET_AVX2 static inline __m256 e4m3_qdq8(__m256 v)
{
    const __m256 c = _mm256_min_ps(v, _mm256_set1_ps(448.0f));
    const __m256i b = _mm256_castps_si256(c);
    const __m256i rb = _mm256_add_epi32(
        b, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF), _mm256_and_si256(_mm256_srli_epi32(b, 20), _mm256_set1_epi32(1))));
    const __m256 nrm = _mm256_castsi256_ps(_mm256_and_si256(rb, _mm256_set1_epi32((int)0xFFF00000u)));
    const __m256 sub = _mm256_mul_ps(_mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(512.0f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                     _mm256_set1_ps(1.0f / 512.0f));
    return _mm256_blendv_ps(nrm, sub, _mm256_cmp_ps(c, _mm256_set1_ps(0x1p-6f), _CMP_LT_OQ));
}

/* Twice the E2M1 value nearest each y (ties to even, saturated to +-6; 0
 * for a NaN) as int32 lanes, as qk_e2m1_x2[mf_encode(y)]: with a = |y|,
 * rint(2a) below 2, 2 rint(a) below 4, else min(4 rint(a / 2), 12). */
QK_TARGET_AVX2 static inline __m256i e2m1x2_8(__m256 y)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), a = _mm256_andnot_ps(sign, y);
    const __m256 lt2 = _mm256_cmp_ps(a, _mm256_set1_ps(2.0f), _CMP_LT_OQ);
    const __m256 lt4 = _mm256_cmp_ps(a, _mm256_set1_ps(4.0f), _CMP_LT_OQ);
    __m256 s = _mm256_blendv_ps(_mm256_set1_ps(0.5f), _mm256_set1_ps(1.0f), lt4);
    __m256 u = _mm256_blendv_ps(_mm256_set1_ps(4.0f), _mm256_set1_ps(2.0f), lt4);
    s = _mm256_blendv_ps(s, _mm256_set1_ps(2.0f), lt2);
    u = _mm256_blendv_ps(u, _mm256_set1_ps(1.0f), lt2);
    const __m256 r = _mm256_round_ps(_mm256_mul_ps(a, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 d = _mm256_min_ps(_mm256_mul_ps(r, u), _mm256_set1_ps(12.0f)); /* NaN -> 12 here, masked below */
    const __m256 sd = _mm256_and_ps(_mm256_cmp_ps(y, y, _CMP_ORD_Q), _mm256_or_ps(d, _mm256_and_ps(y, sign)));
    return _mm256_cvtps_epi32(sd);
}

/* QK_A_NV4 as qk_wq_act_nv4 computes it, 8 blocks at a time: each block's
 * amax (max of |x|, a NaN skipped as fmaxf skips it: max_ps returns its
 * second operand where the first is NaN), then for the 8 blocks at once
 * SF = g * (amax * (1/6)), sf = E4M3(SF), out_scale = 1 / (sf * (1/g)) (0
 * where sf is 0), the multiplier sf / g; the codes of x * out_scale and
 * their sums (vpsadbw on the codes + 128).  A global scale that is not
 * positive and finite, or a noise-floor variant, takes the reference. */
QK_TARGET_AVX2 void qk_x86_avx2_act_nv4(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    if (!qk_a_nv4_simd_takes(w)) {
        qk_wq_act_nv4(w, x, dst, n);
        return;
    }
    const qk_a_nv4_parts d = qk_a_nv4_parts_of(dst, n);
    const float g = w->a_global, rg = 1.0f / g;
    const __m256 sign = _mm256_set1_ps(-0.0f), zero = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < d.nb; b0 += 8) {
        const int m = d.nb - b0 < 8 ? (int)(d.nb - b0) : 8;
        float amax[8] = {0}, os[8], mv[8];
        for (int j = 0; j < m; j++) {
            const float *xb = x + (b0 + j) * QK_A_NV4_BLOCK;
            const __m256 v = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb)), zero),
                                           _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8)), zero));
            const __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
            const __m128 h2 = _mm_max_ps(h, _mm_movehl_ps(h, h));
            amax[j] = _mm_cvtss_f32(_mm_max_ss(h2, _mm_movehdup_ps(h2)));
        }
        const __m256 am = _mm256_loadu_ps(amax);
        const __m256 sf = e4m3_qdq8(_mm256_mul_ps(_mm256_set1_ps(g), _mm256_mul_ps(am, _mm256_set1_ps(1.0f / 6.0f))));
        const __m256 nz = _mm256_cmp_ps(sf, zero, _CMP_NEQ_OQ);
        _mm256_storeu_ps(os, _mm256_and_ps(nz, _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(sf, _mm256_set1_ps(rg)))));
        _mm256_storeu_ps(mv, _mm256_div_ps(sf, _mm256_set1_ps(g)));
        memcpy(d.mult + b0 * 4, mv, (size_t)m * 4);
        for (int j = 0; j < m; j++) {
            const float *xb = x + (b0 + j) * QK_A_NV4_BLOCK;
            const __m256 o = _mm256_set1_ps(os[j]);
            const __m256i c16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(e2m1x2_8(_mm256_mul_ps(_mm256_loadu_ps(xb), o)),
                                                                            e2m1x2_8(_mm256_mul_ps(_mm256_loadu_ps(xb + 8), o))),
                                                         0xD8);
            const __m128i c = _mm_packs_epi16(_mm256_castsi256_si128(c16), _mm256_extracti128_si256(c16, 1));
            _mm_storeu_si128((__m128i *)(d.q + (b0 + j) * QK_A_NV4_BLOCK), c);
            const __m128i s8 = _mm_sad_epu8(_mm_xor_si128(c, _mm_set1_epi8(-128)), _mm_setzero_si128());
            const int32_t sum = (int32_t)(_mm_cvtsi128_si64(s8) + _mm_extract_epi64(s8, 1)) - 16 * 128;
            memcpy(d.sums + 4 * (b0 + j), &sum, 4);
        }
    }
}

/* W_NVFP4 x QK_A_NV4 over a tile: prompts eight rows in the lanes
 * (nv8_rows), one token and the rows left over row by row (nv4_tile). */
QK_TARGET_AVX2 void qk_x86_avx2_nv4_tile(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt,
                                         float *out, size_t ldo)
{
    const int n8 = nt > 1 ? nr - nr % 8 : 0;
    for (int r = 0; r < n8; r += 8)
        nv8_rows(w, r0 + r, y, ys, nt, out + r, ldo);
    if (n8 < nr)
        nv4_tile(w, r0 + n8, nr - n8, y, ys, nt, out + n8, ldo);
}
#endif
