/* avx512_wq_nv4.c - AVX-512 VNNI integer products of NVFP4 W4A4
 * (compressed-tensors nvfp4-pack-quantized with input_activations, ModelOpt
 * NVFP4: kernels/wq.h W_NVFP4 weights with one E4M3 scale per 16 columns,
 * QK_A_NV4 activations) on rows repacked at load, bitwise equal to the
 * scalar reference qk_wq_tile_nv4 (kernels/wq_int.c); and the QK_A_NV4
 * activation encoder, bitwise equal to qk_wq_act_nv4 (kernels/wq_act.c).
 *
 * THE PACKING: blocks of 16 rows; per 16 columns (one NVFP4 block) 144
 * bytes: the 16 rows' scale bytes, then two 64-byte vectors V0, V1 whose
 * byte 4l + i holds row l's codes of columns 8h + i (low nibble) and 8h + 4
 * + i (high nibble) for V_h.  The codes keep their 4 bits, the scales their
 * byte (the packed matrix is the stored one, reordered).
 *
 * THE PRODUCT: a 16-row block's codes are decoded a piece (NV4_PIECE
 * blocks; a row of at most that many and its tail once a call) at a time into bytes, twice the E2M1 value + 12 (0..24, unsigned:
 * vpshufb on the nibbles), four vectors a block (lane l: row l's four codes
 * of columns 4k .. 4k+3), and its multipliers dw into floats as
 * qk_wq_fp4_mult computes them (E4M3 / g or * g); the piece is then shared
 * by every token.  Per token and block four vpdpbusd against the
 * activation's codes (4 bytes broadcast, signed) add (2w + 12) * 2a over the
 * 16 columns into lanes started at -12 * the block's code sum (the row
 * carries it), which leaves the exact isum of the reference (|isum| <= 16 *
 * 144).  Then the reference's float steps, lane by lane: lane[b % 8] =
 * fma((float)isum, dw * da, lane[b % 8]) over the first multiple of 8
 * blocks, the eight lanes summed as qk_fdot_hsum8, the rest added in order
 * as s + (float)isum * (dw * da), out = s * 0.25. */
#include "kernels/x86/packed512.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/fp4.h"
#include "kernels/wq_impl.h"

#ifdef QK_X86

#define NV4_MAGIC 0x3456514Eu /* "NQV4" */
#define NV4_HEAD (64 + 256 * 4) /* the header, then the multiplier of each scale byte */
#define NV4_BLK 144   /* bytes per 16 rows x 16 columns */
#define NV4_PIECE 64  /* blocks decoded at a time (a multiple of 8) */
#define NV4_OFFSET 12 /* added to the doubled weight values: unsigned bytes */

static bool nv4_takes(const qk_wq *w)
{
    return w->type == QK_W_NVFP4 && w->act == QK_A_NV4 && !w->gidx && w->s.p && w->s.type == QK_F8_E4M3 &&
           w->s.cdiv == QK_A_NV4_BLOCK && w->s.rdiv > 0 && w->rows > 0 && w->rows % 16 == 0 && w->cols > 0 &&
           w->cols % QK_A_NV4_BLOCK == 0;
}

static inline uint8_t code_at(const uint8_t *q, int64_t k) { return q[k / 2] >> (k % 2 * 4) & 15; }

size_t qk_x86_avx512_nv4_pack(const qk_wq *w, uint8_t *dst, int64_t g0, int64_t g1)
{
    if (!qk_cpu_has_vnni() || !nv4_takes(w))
        return 0;
    const int64_t nb = w->cols / QK_A_NV4_BLOCK;
    const size_t bytes = NV4_HEAD + (size_t)(w->rows / 16) * (size_t)nb * NV4_BLK;
    if (!dst)
        return bytes;
    if (g0 == 0) {
        qk_wq_pack_head_put(dst, 64, NV4_MAGIC, 0, w);
        for (int b = 0; b < 256; b++) { /* the reference's own multipliers (E4M3 / g or * g, NaN for 0x7F / 0xFF) */
            const float m = qk_wq_fp4_mult(w, (uint8_t)b);
            memcpy(dst + 64 + 4 * b, &m, 4);
        }
    }
    for (int64_t r = g0 * 8; r < g1 * 8; r++) { /* 8-row groups: each row fills its own lane */
        const uint8_t *q = w->q + r * w->q_rs, *srow = w->s.p + r / w->s.rdiv * w->s.rs;
        const int l = (int)(r % 16);
        uint8_t *o = dst + NV4_HEAD + (size_t)(r / 16) * (size_t)nb * NV4_BLK;
        for (int64_t b = 0; b < nb; b++, o += NV4_BLK) {
            o[l] = srow[b * w->s.cs];
            for (int h = 0; h < 2; h++)
                for (int i = 0; i < 4; i++) {
                    const int64_t k = b * QK_A_NV4_BLOCK + 8 * h + i;
                    o[16 + 64 * h + 4 * l + i] = (uint8_t)(code_at(q, k) | code_at(q, k + 4) << 4);
                }
        }
    }
    return bytes;
}

/* A piece of a 16-row block, decoded: per block the four code vectors and
 * the 16 rows' multipliers. */
typedef struct {
    __m512i wv[NV4_PIECE + 8][4]; /* room for a row's tail after a whole piece */
    __m512 dw[NV4_PIECE + 8];
} nv4_piece;

/* Blocks [0, np) of the packed 16-row block stream at bp into p (tab: the
 * multiplier of each scale byte). */
QK_TARGET_AVX512VNNI static void nv4_decode(const uint8_t *bp, int np, const float *tab, nv4_piece *p)
{
    int8_t t[16];
    for (int i = 0; i < 16; i++)
        t[i] = (int8_t)(qk_e2m1_x2[i] + NV4_OFFSET);
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t)), m4 = _mm512_set1_epi8(15);
    for (int j = 0; j < np; j++, bp += NV4_BLK) {
        _mm_prefetch((const char *)(bp + 8 * NV4_BLK), _MM_HINT_T0);
        _mm_prefetch((const char *)(bp + 8 * NV4_BLK + 64), _MM_HINT_T0);
        _mm_prefetch((const char *)(bp + 8 * NV4_BLK + 128), _MM_HINT_T0);
        const __m512i v0 = _mm512_loadu_si512((const void *)(bp + 16)), v1 = _mm512_loadu_si512((const void *)(bp + 80));
        p->wv[j][0] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v0, m4));
        p->wv[j][1] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4));
        p->wv[j][2] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v1, m4));
        p->wv[j][3] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4));
        p->dw[j] = _mm512_i32gather_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)bp)), tab, 4);
    }
}

/* The exact sums of block j of p against the 16 codes at a, the lanes
 * started at cs (-12 * the codes' sum). */
QK_TARGET_AVX512VNNI __attribute__((always_inline)) static inline __m512i nv4_isum(const nv4_piece *p, int j,
                                                                                 const int8_t *a, int32_t cs)
{
    __m512i i = _mm512_set1_epi32(cs);
    i = _mm512_dpbusd_epi32(i, p->wv[j][0], _mm512_set1_epi32((int)qk_ld_u32((const uint8_t *)a)));
    i = _mm512_dpbusd_epi32(i, p->wv[j][1], _mm512_set1_epi32((int)qk_ld_u32((const uint8_t *)a + 4)));
    i = _mm512_dpbusd_epi32(i, p->wv[j][2], _mm512_set1_epi32((int)qk_ld_u32((const uint8_t *)a + 8)));
    return _mm512_dpbusd_epi32(i, p->wv[j][3], _mm512_set1_epi32((int)qk_ld_u32((const uint8_t *)a + 12)));
}

/* -12 times the code sums of blocks [b0, b0 + np) of the row (np a multiple of 8). */
QK_TARGET_AVX512VNNI static inline void nv4_corr(const uint8_t *row, int64_t nb, int64_t b0, int np, int32_t *cs)
{
    const int32_t *s = (const int32_t *)(const void *)(row + nb * 4) + b0;
    for (int j = 0; j < np; j += 16) {
        const __mmask16 m = np - j >= 16 ? 0xFFFF : 0xFF;
        _mm512_mask_storeu_epi32(cs + j, m, _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(m, s + j), _mm512_set1_epi32(-NV4_OFFSET)));
    }
}

/* T (1 or 2) tokens' lanes st over the piece's np blocks (b0 the piece's
 * first; the lanes start at zero when it is block 0). */
QK_TARGET_AVX512VNNI __attribute__((always_inline)) static inline void
nv4_span(const nv4_piece *p, int np, const uint8_t *const row[2], int64_t nb, int64_t b0, const int T, __m512 (*st)[8])
{
    __m512 acc[2][8];
    const int8_t *a[2];
    const float *da[2];
    int32_t cs[2][NV4_PIECE];
    _Pragma("GCC unroll 2") for (int t = 0; t < T; t++) {
        a[t] = (const int8_t *)(row[t] + nb * 8) + b0 * QK_A_NV4_BLOCK;
        da[t] = (const float *)(const void *)row[t] + b0;
        nv4_corr(row[t], nb, b0, np, cs[t]);
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++)
            acc[t][l] = b0 ? st[t][l] : _mm512_setzero_ps();
    }
    for (int j = 0; j < np; j += 8)
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) {
            const __m512 dw = p->dw[j + l];
            _Pragma("GCC unroll 2") for (int t = 0; t < T; t++) {
                const __m512i i = nv4_isum(p, j + l, a[t] + (j + l) * QK_A_NV4_BLOCK, cs[t][j + l]);
                const __m512 m = _mm512_mul_ps(dw, _mm512_set1_ps(da[t][j + l]));
                acc[t][l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), m, acc[t][l]);
            }
        }
    _Pragma("GCC unroll 2") for (int t = 0; t < T; t++)
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++)
            st[t][l] = acc[t][l];
}

QK_TARGET_AVX512VNNI bool qk_x86_avx512_nv4_tile(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt,
                                                 float *out, size_t ldo)
{
    qk_wq_pack_head h;
    if (!nv4_takes(w) || !qk_wq_packed_as(w, NV4_MAGIC, &h))
        return false;
    const int64_t nb = w->cols / QK_A_NV4_BLOCK, nb8 = nb - nb % 8;
    const float *tab = (const float *)(const void *)(w->packed + 64);
    nv4_piece p;
    __m512 st[QK_WQ_MAX_NT][8];
    for (int64_t rb = r0 / 16; rb * 16 < r0 + nr; rb++) {
        const uint8_t *bp = w->packed + NV4_HEAD + (size_t)rb * (size_t)nb * NV4_BLK;
        const int64_t ra = rb * 16 > r0 ? rb * 16 : r0, re = rb * 16 + 16 < r0 + nr ? rb * 16 + 16 : r0 + nr;
        const bool once = nb8 <= NV4_PIECE; /* every block in one piece: decoded once for all the tokens */
        const int nt8 = (int)(nb - nb8), tail = once ? (int)nb8 : 0; /* the tail blocks' first slot */
        if (once)
            nv4_decode(bp, (int)nb, tab, &p);
        for (int u0 = 0; u0 < nt; u0 += QK_WQ_MAX_NT) {
            const int nu = nt - u0 < QK_WQ_MAX_NT ? nt - u0 : QK_WQ_MAX_NT;
            const uint8_t *yu = (const uint8_t *)y + (size_t)u0 * ys;
            if (nb8 == 0) /* no span runs: the lanes' sum is +0 */
                for (int t = 0; t < nu; t++)
                    for (int l = 0; l < 8; l++)
                        st[t][l] = _mm512_setzero_ps();
            for (int64_t b0 = 0; b0 < nb8; b0 += NV4_PIECE) {
                const int np = (int)(nb8 - b0 < NV4_PIECE ? nb8 - b0 : NV4_PIECE);
                if (!once)
                    nv4_decode(bp + (size_t)b0 * NV4_BLK, np, tab, &p);
                int t = 0;
                for (; t + 2 <= nu; t += 2) { /* two tokens: each decoded block serves both */
                    const uint8_t *row[2] = {yu + (size_t)t * ys, yu + (size_t)(t + 1) * ys};
                    nv4_span(&p, np, row, nb, b0, 2, &st[t]);
                }
                if (t < nu) {
                    const uint8_t *row[2] = {yu + (size_t)t * ys, NULL};
                    nv4_span(&p, np, row, nb, b0, 1, &st[t]);
                }
            }
            if (nt8 && !once) /* the tail: after the eight lanes' sum, in order */
                nv4_decode(bp + (size_t)nb8 * NV4_BLK, nt8, tab, &p);
            for (int t = 0; t < nu; t++) {
                const uint8_t *row = yu + (size_t)t * ys;
                const __m512 *l = st[t];
                __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l[0], l[4]), _mm512_add_ps(l[2], l[6])),
                                         _mm512_add_ps(_mm512_add_ps(l[1], l[5]), _mm512_add_ps(l[3], l[7])));
                for (int j = 0; j < nt8; j++) {
                    const int64_t b = nb8 + j;
                    int32_t sum;
                    float da;
                    memcpy(&sum, row + nb * 4 + b * 4, 4);
                    memcpy(&da, row + b * 4, 4);
                    const __m512i i = nv4_isum(&p, tail + j, (const int8_t *)(row + nb * 8) + b * QK_A_NV4_BLOCK, -NV4_OFFSET * sum);
                    s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(p.dw[tail + j], _mm512_set1_ps(da))));
                }
                /* lanes [ra, re) of the block to rows ra - r0 ..: compressed down, a masked store (no
                 * copy loop, which GCC makes a memcpy call per token) */
                const __mmask16 in = (__mmask16)(((1u << (re - ra)) - 1) << (ra - rb * 16));
                _mm512_mask_storeu_ps(out + (size_t)(u0 + t) * ldo + (size_t)(ra - r0), (__mmask16)((1u << (re - ra)) - 1),
                                      _mm512_maskz_compress_ps(in, _mm512_mul_ps(s, _mm512_set1_ps(0.25f))));
            }
        }
    }
    return true;
}

/* ---- the activation encoder ------------------------------------------------- */

/* E4M3 quantize-dequantize of v >= 0 (no NaN), saturated: min(v, 448)
 * rounded to 3 mantissa bits, ties to even (the float's bits: add half an
 * ulp less one, plus the kept lsb, then clear; a carry moves to the next
 * binade), below 2^-6 to a multiple of 2^-9 (rint(v * 512) / 512, exact);
 * mf_encode and mf_decode's values for every such input. */
QK_TARGET_AVX512VNNI static inline __m512 nv4_e4m3_qdq(__m512 v)
{
    const __m512 c = _mm512_min_ps(v, _mm512_set1_ps(448.0f));
    const __m512i b = _mm512_castps_si512(c);
    const __m512i rb = _mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7FFFF), _mm512_and_si512(_mm512_srli_epi32(b, 20), _mm512_set1_epi32(1))));
    const __m512 nrm = _mm512_castsi512_ps(_mm512_and_si512(rb, _mm512_set1_epi32((int)0xFFF00000u)));
    const __m512 sub = _mm512_mul_ps(_mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(512.0f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                     _mm512_set1_ps(1.0f / 512.0f));
    return _mm512_mask_mov_ps(nrm, _mm512_cmp_ps_mask(c, _mm512_set1_ps(0x1p-6f), _CMP_LT_OQ), sub);
}

/* Twice the E2M1 value nearest y (ties to even, saturated to +-6; 0 for a
 * NaN), as qk_e2m1_x2[mf_encode(y)]: with a = |y|, rint(2a) below 2,
 * 2 rint(a) below 4, else min(4 rint(a / 2), 12) (the scalings exact). */
QK_TARGET_AVX512VNNI static inline __m128i nv4_e2m1x2(__m512 y)
{
    const __m512 sign = _mm512_set1_ps(-0.0f), a = _mm512_andnot_ps(sign, y);
    const __mmask16 lt2 = _mm512_cmp_ps_mask(a, _mm512_set1_ps(2.0f), _CMP_LT_OQ);
    const __mmask16 lt4 = _mm512_cmp_ps_mask(a, _mm512_set1_ps(4.0f), _CMP_LT_OQ);
    __m512 s = _mm512_mask_mov_ps(_mm512_set1_ps(0.5f), lt4, _mm512_set1_ps(1.0f));
    __m512 u = _mm512_mask_mov_ps(_mm512_set1_ps(4.0f), lt4, _mm512_set1_ps(2.0f));
    s = _mm512_mask_mov_ps(s, lt2, _mm512_set1_ps(2.0f));
    u = _mm512_mask_mov_ps(u, lt2, _mm512_set1_ps(1.0f));
    const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(a, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 d = _mm512_min_ps(_mm512_mul_ps(r, u), _mm512_set1_ps(12.0f)); /* NaN -> 12 here, masked below */
    const __mmask16 ok = _mm512_cmp_ps_mask(y, y, _CMP_ORD_Q);
    const __m512 sd = _mm512_maskz_mov_ps(ok, _mm512_or_ps(d, _mm512_and_ps(y, sign)));
    return _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(sd));
}

/* QK_A_NV4 as qk_wq_act_nv4 computes it, 16 blocks at a time: each block's
 * amax (max of |x|, a NaN skipped as fmaxf skips it), then for the 16
 * blocks at once SF = g * (amax * (1/6)), sf = E4M3(SF), out_scale = 1 /
 * (sf * (1/g)) (0 where sf is 0), the multiplier sf / g; the codes of
 * x * out_scale and their sums (vpsadbw on the codes + 128).  A global
 * scale that is not positive and finite, or a noise-floor variant, takes
 * the reference. */
QK_TARGET_AVX512VNNI void qk_x86_avx512_act_nv4(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    if (!qk_a_nv4_simd_takes(w)) {
        qk_wq_act_nv4(w, x, dst, n);
        return;
    }
    const qk_a_nv4_parts d = qk_a_nv4_parts_of(dst, n);
    const int64_t nb = d.nb;
    uint8_t *mult = d.mult, *sums = d.sums;
    int8_t *q = d.q;
    const float g = w->a_global, rg = 1.0f / g;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t b0 = 0; b0 < nb; b0 += 16) {
        const int m = nb - b0 < 16 ? (int)(nb - b0) : 16;
        const __mmask16 mm = (__mmask16)((1u << m) - 1);
        float amax[16] = {0}, os[16];
        for (int j = 0; j < m; j++) /* max_ps returns its second operand where the first is NaN */
            amax[j] = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + (b0 + j) * 16)), _mm512_setzero_ps()));
        const __m512 am = _mm512_loadu_ps(amax);
        const __m512 sf = nv4_e4m3_qdq(_mm512_mul_ps(_mm512_set1_ps(g), _mm512_mul_ps(am, _mm512_set1_ps(1.0f / 6.0f))));
        const __mmask16 nz = _mm512_cmp_ps_mask(sf, _mm512_setzero_ps(), _CMP_NEQ_OQ);
        _mm512_storeu_ps(os, _mm512_maskz_div_ps(nz, _mm512_set1_ps(1.0f), _mm512_mul_ps(sf, _mm512_set1_ps(rg))));
        _mm512_mask_storeu_ps(mult + b0 * 4, mm, _mm512_div_ps(sf, _mm512_set1_ps(g)));
        for (int j0 = 0; j0 < m; j0 += 4) {
            const int mj = m - j0 < 4 ? m - j0 : 4;
            __m512i c4 = _mm512_setzero_si512();
            for (int j = j0; j < j0 + mj; j++) {
                const __m128i c = nv4_e2m1x2(_mm512_mul_ps(_mm512_loadu_ps(x + (b0 + j) * 16), _mm512_set1_ps(os[j])));
                _mm_storeu_si128((__m128i *)(q + (b0 + j) * 16), c);
                c4 = _mm512_mask_broadcast_i32x4(c4, (__mmask16)(0xF << 4 * (j - j0)), c);
            }
            /* the 16 codes + 128 of block j summed by 8s in qwords 2j, 2j+1 */
            const __m512i s8 = _mm512_sad_epu8(_mm512_xor_si512(c4, _mm512_set1_epi8(-128)), _mm512_setzero_si512());
            const __m512i s16 = _mm512_add_epi64(s8, _mm512_shuffle_epi32(s8, _MM_PERM_BADC));
            const __m256i s32 = _mm512_cvtepi64_epi32(_mm512_sub_epi64(s16, _mm512_set1_epi64(16 * 128)));
            const __m128i s4 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(s32, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
            _mm_mask_storeu_epi32(sums + (b0 + j0) * 4, (__mmask8)((1u << mj) - 1), s4);
        }
    }
}

#endif
