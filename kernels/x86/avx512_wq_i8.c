/* avx512_wq_i8.c - AVX-512 VNNI integer products of compressed-tensors INT8
 * W8A8 (kernels/wq.h: W_INT8 weights with one scale a row or a tensor,
 * QK_A_I8 activations) on rows repacked at load, bitwise equal to the
 * scalar reference qk_wq_tile_i8 (kernels/wq_int.c); and the activation
 * encoders of the 8-bit A8 schemes, QK_A_I8 and QK_A_FP8 (at the end).
 *
 * THE PACKING: blocks of 16 rows; per 4 columns one 64-byte vector whose
 * bytes 4l .. 4l+3 are row l's four codes XOR 0x80 (the code + 128, an
 * unsigned byte, as the packed Q8_0 kernels store theirs), then after the
 * blocks each row's exact sum of its codes (int32; the asymmetric
 * activations' zero-point term).  The codes keep their byte a weight.
 *
 * THE PRODUCT: one vpdpbusd per 4 columns and token adds the 16 rows' four
 * products (code + 128) * a into their int32 lanes; starting each lane at
 * -128 * sum(a) makes it the exact sum of code * a (|sum| <= n * 128 * 128,
 * and with the zero-point term below 2^31: n < 2^15, checked at packing).  Then the reference's float steps, lane by
 * lane: sum = 0 + (float)(dot - zero * wsum) * ws;  out = as * sum. */
#include "kernels/x86/packed512.h"

#include <math.h>
#include <string.h>

#include "kernels/wq_impl.h"

#ifdef QK_X86

#define I8_MAGIC 0x38495751u /* "QWI8" */
#define I8_HEAD 64
#define I8_NT 8

static bool i8_takes(const qk_wq *w)
{
    return w->type == QK_W_INT8 && w->act == QK_A_I8 && !w->z.p && !w->gidx && w->s.p && w->s.cdiv >= w->cols &&
           w->rows > 0 && w->rows % 16 == 0 && w->cols > 0 && w->cols % 4 == 0 && w->cols < (1 << 15);
}

size_t qk_x86_avx512_i8_pack(const qk_wq *w, uint8_t *dst, int64_t g0, int64_t g1)
{
    if (!qk_cpu_has_vnni() || !i8_takes(w))
        return 0;
    const size_t blk = (size_t)w->cols * 16, sums = (size_t)w->rows * 4;
    const size_t bytes = I8_HEAD + blk * (size_t)(w->rows / 16) + sums;
    if (!dst)
        return bytes;
    if (g0 == 0) {
        qk_wq_pack_head_put(dst, I8_HEAD, I8_MAGIC, 0, w);
    }
    for (int64_t g = g0; g < g1; g++) /* 8-row groups: half a block */
        for (int64_t r = g * 8; r < g * 8 + 8; r++) {
            const int8_t *q = (const int8_t *)(w->q + r * w->q_rs);
            uint8_t *o = dst + I8_HEAD + (size_t)(r / 16) * blk + 4 * (size_t)(r % 16);
            int32_t s = 0;
            for (int64_t k = 0; k < w->cols; k++) {
                o[(size_t)(k / 4) * 64 + (size_t)(k % 4)] = (uint8_t)q[k] ^ 0x80;
                s += q[k];
            }
            memcpy(dst + I8_HEAD + blk * (size_t)(w->rows / 16) + 4 * (size_t)r, &s, 4);
        }
    return bytes;
}

/* NT tokens against NB (1 or 2) consecutive 16-row blocks: the exact dot
 * products of each row and token, lane l row l (each broadcast of the
 * activations serves both blocks). */
QK_TARGET_AVX512VNNI __attribute__((always_inline)) static inline void
i8_block(const uint8_t *bp, size_t blk, int64_t n, const int8_t *const a[I8_NT], const int32_t corr[I8_NT],
         const int NB, const int NT, __m512i dot[2][I8_NT])
{
    __m512i acc[2][I8_NT];
    _Pragma("GCC unroll 2") for (int j = 0; j < NB; j++)
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
            acc[j][t] = _mm512_set1_epi32(corr[t]);
    for (int64_t k = 0; k < n; k += 4, bp += 64) {
        const __m512i w0 = _mm512_loadu_si512((const void *)bp);
        const __m512i w1 = NB > 1 ? _mm512_loadu_si512((const void *)(bp + blk)) : w0;
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {
            const __m512i av = _mm512_set1_epi32((int)qk_ld_u32((const uint8_t *)a[t] + k));
            acc[0][t] = _mm512_dpbusd_epi32(acc[0][t], w0, av);
            if (NB > 1)
                acc[1][t] = _mm512_dpbusd_epi32(acc[1][t], w1, av);
        }
    }
    _Pragma("GCC unroll 2") for (int j = 0; j < NB; j++)
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
            dot[j][t] = acc[j][t];
}

/* -128 * the sum of the n codes at a (n a multiple of 4; exact). */
QK_TARGET_AVX512VNNI static int32_t i8_corr(const int8_t *a, int64_t n)
{
    __m512i s = _mm512_setzero_si512();
    int64_t k = 0;
    for (; k + 64 <= n; k += 64) /* (a + 128) summed per 8 bytes */
        s = _mm512_add_epi64(s, _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512((const void *)(a + k)),
                                                                 _mm512_set1_epi8(-128)),
                                                _mm512_setzero_si512()));
    int64_t t = _mm512_reduce_add_epi64(s) - 128 * k;
    for (; k < n; k++)
        t += a[k];
    return (int32_t)(-128 * t);
}

/* ---- AMX-INT8 (where qk_cpu_has_amx): the same exact dots ------------------
 * One tdpbssd adds 64 columns of 16 tokens x 16 rows into an int32 tile: B
 * is 16 of the packing's 64-byte vectors made signed again (XOR 0x80, into
 * a 1 KB buffer), A 64 bytes of each of 16 tokens' codes in place.  Up to
 * four 16-token tiles share each B tile; the columns past the last multiple
 * of 64 go through vpdpbusd, started at -128 times their activations' sum.
 * The sums are the exact dots, as the VNNI path's (no correction to add). */
/* tmm0..3 the dots of four token tiles, tmm4 the weights, tmm5..6 tokens */
static const _Alignas(64) qk_amx_cfg i8_cfg = {
    .palette = 1, .colsb = {64, 64, 64, 64, 64, 64, 64}, .rows = {16, 16, 16, 16, 16, 16, 16}};

#define I8_TDP(c, at)                                          \
    do {                                                       \
        _tile_loadd(at, a0 + (c) * 16 * ys + k, (long)ys);     \
        _tile_dpbssd(c, at, 4);                                \
    } while (0)

/* The exact dots of block bp (16 rows) and 16 * ntile tokens from y (rows ys
 * apart), n columns, into d[16 ntile][16]. */
QK_TARGET_AMX static void i8_amx(const uint8_t *bp, int64_t n, const uint8_t *y, size_t ys, int ntile,
                               int32_t (*d)[16])
{
    const int64_t n64 = n / 64 * 64;
    const uint8_t *a0 = y + QK_A_I8_HEAD;
    _Alignas(64) uint8_t bs[1024];
    _tile_loadconfig(&i8_cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t k = 0; k < n64; k += 64) {
        for (int i = 0; i < 16; i++)
            _mm512_store_si512((void *)(bs + 64 * i), _mm512_xor_si512(_mm512_loadu_si512((const void *)(bp + 16 * k + 64 * i)),
                                                                       _mm512_set1_epi8(-128)));
        _tile_loadd(4, bs, 64);
        I8_TDP(0, 5);
        if (ntile > 1)
            I8_TDP(1, 6);
        if (ntile > 2)
            I8_TDP(2, 5);
        if (ntile > 3)
            I8_TDP(3, 6);
    }
    _tile_stored(0, d[0], 64);
    if (ntile > 1)
        _tile_stored(1, d[16], 64);
    if (ntile > 2)
        _tile_stored(2, d[32], 64);
    if (ntile > 3)
        _tile_stored(3, d[48], 64);
    _tile_release();
    for (int t = 0; t < 16 * ntile && n64 < n; t++) {
        const int8_t *a = (const int8_t *)(a0 + (size_t)t * ys);
        int32_t tail = 0;
        for (int64_t k = n64; k < n; k++)
            tail += a[k];
        __m512i acc = _mm512_add_epi32(_mm512_loadu_si512((const void *)d[t]), _mm512_set1_epi32(-128 * tail));
        for (int64_t k = n64; k < n; k += 4)
            acc = _mm512_dpbusd_epi32(acc, _mm512_loadu_si512((const void *)(bp + 16 * k)),
                                      _mm512_set1_epi32((int)qk_ld_u32((const uint8_t *)(a + k))));
        _mm512_storeu_si512((void *)d[t], acc);
    }
}
#undef I8_TDP

/* The reference's float steps of one token's exact dots d of block bj
 * (lane l row 16 bj + l), rows [r0, r0 + nr) of the call stored. */
QK_TARGET_AVX512VNNI static inline void i8_out(__m512i d, const qk_a_i8_head *ah, const float *sv,
                                               const int32_t *zs, int64_t bj, int64_t r0, int nr, float *o)
{
    const int64_t ra = bj * 16 > r0 ? bj * 16 : r0, rb = bj * 16 + 16 < r0 + nr ? bj * 16 + 16 : r0 + nr;
    d = _mm512_sub_epi32(d, _mm512_mullo_epi32(_mm512_set1_epi32(ah->zero), _mm512_loadu_si512((const void *)zs)));
    const __m512 sum = _mm512_add_ps(_mm512_setzero_ps(), _mm512_mul_ps(_mm512_cvtepi32_ps(d), _mm512_loadu_ps(sv)));
    /* lanes [ra, rb) compressed down and stored masked (a copy loop is a memcpy call) */
    const __mmask16 in = (__mmask16)(((1u << (rb - ra)) - 1) << (ra - bj * 16));
    _mm512_mask_storeu_ps(o + (size_t)(ra - r0), (__mmask16)((1u << (rb - ra)) - 1),
                          _mm512_maskz_compress_ps(in, _mm512_mul_ps(_mm512_set1_ps(ah->scale), sum)));
}

QK_TARGET_AVX512VNNI bool qk_x86_avx512_i8_tile(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt,
                                                float *out, size_t ldo)
{
    qk_wq_pack_head h;
    if (!i8_takes(w) || !qk_wq_packed_as(w, I8_MAGIC, &h))
        return false;
    const int64_t n = w->cols;
    const size_t blk = (size_t)n * 16;
    const uint8_t *base = w->packed + I8_HEAD, *wsum = base + blk * (size_t)(w->rows / 16);
    for (int u0 = 0; u0 < nt; u0 += QK_WQ_MAX_NT) { /* each token's correction once */
    const int nu = nt - u0 < QK_WQ_MAX_NT ? nt - u0 : QK_WQ_MAX_NT;
    /* the first nu - nu % 16 tokens through AMX where there is AMX */
    const int na = qk_cpu_has_amx() ? nu / 16 * 16 : 0;
    int32_t cor[QK_WQ_MAX_NT];
    qk_a_i8_head ahs[QK_WQ_MAX_NT];
    for (int t = 0; t < nu; t++) {
        const uint8_t *row = (const uint8_t *)y + (size_t)(u0 + t) * ys;
        memcpy(&ahs[t], row, sizeof ahs[t]);
        cor[t] = t < na ? 0 : i8_corr((const int8_t *)(row + QK_A_I8_HEAD), n); /* the VNNI path's start */
    }
    for (int64_t b = r0 / 16; b * 16 < r0 + nr;) {
        const int nb = (b + 1) * 16 < r0 + nr ? 2 : 1; /* blocks b .. b + nb - 1 */
        float sv[32];
        int32_t zs[32];
        for (int l = 0; l < 16 * nb; l++)
            sv[l] = qk_wq_scale(w, b * 16 + l, 0);
        memcpy(zs, wsum + 4 * (size_t)(b * 16), 4 * 16 * (size_t)nb);
        for (int j = 0; j < nb && na; j++) {
            _Alignas(64) int32_t d[QK_WQ_MAX_NT][16];
            i8_amx(base + (size_t)(b + j) * blk, n, (const uint8_t *)y + (size_t)u0 * ys, ys, na / 16, d);
            for (int t = 0; t < na; t++)
                i8_out(_mm512_load_si512((const void *)d[t]), &ahs[t], sv + 16 * j, zs + 16 * j, b + j, r0, nr,
                       out + (size_t)(u0 + t) * ldo);
        }
        for (int t0 = u0 + na; t0 < u0 + nu; t0 += I8_NT) {
            const int mt = u0 + nu - t0 < I8_NT ? u0 + nu - t0 : I8_NT;
            const int8_t *a[I8_NT];
            int32_t corr[I8_NT];
            for (int t = 0; t < mt; t++) {
                a[t] = (const int8_t *)((const uint8_t *)y + (size_t)(t0 + t) * ys + QK_A_I8_HEAD);
                corr[t] = cor[t0 - u0 + t];
            }
            __m512i dot[2][I8_NT];
            const uint8_t *bp = base + (size_t)b * blk;
            if (nb == 2)
                QK_BY_NT8(mt, i8_block(bp, blk, n, a, corr, 2, N, dot))
            else
                QK_BY_NT8(mt, i8_block(bp, blk, n, a, corr, 1, N, dot))
            for (int j = 0; j < nb; j++)
                for (int t = 0; t < mt; t++)
                    i8_out(dot[j][t], &ahs[t0 - u0 + t], sv + 16 * j, zs + 16 * j, b + j, r0, nr,
                           out + (size_t)(t0 + t) * ldo);
        }
        b += nb;
    }
    }
    return true;
}

/* fmaxf(from, |x[0]|, .., |x[n-1]|): a NaN is skipped as fmaxf skips it (max_ps
 * returns its second operand when one is NaN); max is exact in any order. */
QK_TARGET_AVX512 static inline float amax_abs(const float *x, int64_t n, float from)
{
    __m512 m = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), m);
    float amax = fmaxf(_mm512_reduce_max_ps(m), from);
    for (; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    return amax;
}

/* QK_A_I8, dynamic and symmetric (the W8A8 activations), as qk_wq_act_i8
 * computes them: amax of |x| (max is exact in any order; a NaN is skipped
 * as fmaxf skips it), scale amax / 127, codes nearbyint(clamp(x * (127 /
 * amax), -128, 127)), 0 for a NaN product; every other encoding (static,
 * asymmetric, the noise floor's variants) is the reference's. */
QK_TARGET_AVX512 void qk_x86_avx512_act_i8(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    if (w->a_static || w->a_asym || w->a_variant) {
        qk_wq_act_i8(w, x, dst, n);
        return;
    }
    const float amax = amax_abs(x, n, 0.0f);
    qk_a_i8_head h = {.scale = amax / 127.0f};
    int8_t *q = (int8_t *)dst + QK_A_I8_HEAD;
    if (!(amax > 0.0f)) {
        memset(q, 0, (size_t)n);
    } else {
        const float inv = 127.0f / amax;
        const __m512 iv = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), iv);
            const __mmask16 ok = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
            const __m512 c = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
            const __m512 r = _mm512_maskz_roundscale_ps(ok, c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(r)));
        }
        for (; i < n; i++) {
            const float v = x[i] * inv;
            q[i] = v == v ? (int8_t)nearbyintf(fminf(fmaxf(v, -128.0f), 127.0f)) : 0;
        }
    }
    memcpy(dst, &h, sizeof h);
}

/* QK_A_FP8 as qk_wq_act_fp8 computes it (kernels/wq_act.c, vLLM's
 * dynamic per-token and static per-tensor FP8), the noise floor's variants
 * left to the reference: amax as above, x / scale (x * (1 / input_scale)
 * when static) clamped to +-448 as fminf(fmaxf(v, -448), 448) does (a NaN
 * becomes -448: max_ps returns its second operand), then E4M3 rounding to
 * nearest even, exactly: for |v| >= 2^-6 the float's bits rounded to 3
 * mantissa bits (a carry moves the exponent on; 448 is the clamp, so no
 * code passes it), below it the subnormal grid, round(v * 2^9) / 2^9 (both
 * scalings exact); times the scale. */
QK_TARGET_AVX512 static inline __m512 e4m3_qdq16(__m512 v)
{
    const __m512i b = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 20), _mm512_set1_epi32(1));
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7FFFF), odd)),
                                       _mm512_set1_epi32((int)0xFFF00000u));
    const __m512 sub = _mm512_mul_ps(_mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(512.0f)),
                                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                     _mm512_set1_ps(0x1p-9f));
    const __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(0x1p-6f), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(tiny, _mm512_castsi512_ps(r), sub);
}

QK_TARGET_AVX512 void qk_x86_avx512_act_fp8(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    if (w->a_variant) {
        qk_wq_act_fp8(w, x, dst, n);
        return;
    }
    float *y = dst;
    const __m512 lo = _mm512_set1_ps(-448.0f), hi = _mm512_set1_ps(448.0f);
    const int64_t g = w->a_group > 0 ? w->a_group : n;
    for (int64_t i0 = 0; i0 < n; i0 += g) {
        const int64_t m = n - i0 < g ? n - i0 : g;
        float s, op; /* the scale, and the operand x is multiplied by (static) or divided by */
        if (w->a_static) {
            s = w->a_scale, op = 1.0f / s;
        } else {
            const float amax = amax_abs(x + i0, m, w->a_group > 0 ? 1e-10f : 0.0f);
            s = w->a_group > 0 ? amax / 448.0f : fmaxf(amax / 448.0f, 1.0f / (448.0f * 512.0f));
            op = s;
        }
        const __m512 ov = _mm512_set1_ps(op), sv = _mm512_set1_ps(s);
        int64_t i = i0;
        for (; i < i0 + m; i += 16) {
            const __mmask16 k = i + 16 <= i0 + m ? (__mmask16)0xFFFF : (__mmask16)((1u << (i0 + m - i)) - 1);
            const __m512 xv = _mm512_maskz_loadu_ps(k, x + i);
            const __m512 v = w->a_static ? _mm512_mul_ps(xv, ov) : _mm512_div_ps(xv, ov);
            _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(e4m3_qdq16(_mm512_min_ps(_mm512_max_ps(v, lo), hi)), sv));
        }
    }
}

/* Codes of x[0..n) divided by s (or times it: mul) as E4M3 values' BF16 bits at q. */
QK_TARGET_AVX512 static inline void f8_words(const float *x, int64_t n, float s, bool mul, uint8_t *q)
{
    const __m512 ov = _mm512_set1_ps(s), lo = _mm512_set1_ps(-448.0f), hi = _mm512_set1_ps(448.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = i + 16 <= n ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 xv = _mm512_maskz_loadu_ps(k, x + i);
        const __m512 v = mul ? _mm512_mul_ps(xv, ov) : _mm512_div_ps(xv, ov);
        const __m512i b = _mm512_srli_epi32(_mm512_castps_si512(e4m3_qdq16(_mm512_min_ps(_mm512_max_ps(v, lo), hi))), 16);
        _mm256_mask_storeu_epi16(q + 2 * i, k, _mm512_cvtepi32_epi16(b));
    }
}

/* QK_A_F8G as qk_wq_act_f8g computes it: per group of 128 the amax from
 * 1e-10, scale amax / 448, the codes as above. */
QK_TARGET_AVX512 void qk_x86_avx512_act_f8g(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    if (w->a_variant) {
        qk_wq_act_f8g(w, x, dst, n);
        return;
    }
    const qk_a_i8_head h = {0};
    uint8_t *q = (uint8_t *)dst + QK_A_I8_HEAD, *sc = q + 2 * n;
    for (int64_t i0 = 0; i0 < n; i0 += QK_A_F8G_GROUP) {
        const int64_t m = n - i0 < QK_A_F8G_GROUP ? n - i0 : QK_A_F8G_GROUP;
        const float s = amax_abs(x + i0, m, 1e-10f) / 448.0f;
        f8_words(x + i0, m, s, false, q + 2 * i0);
        memcpy(sc + 4 * (i0 / QK_A_F8G_GROUP), &s, 4);
    }
    memcpy(dst, &h, sizeof h);
}

/* QK_A_F8B as qk_wq_act_f8b computes it: qk_x86_avx512_act_fp8's codes
 * (token-wide scale), each kept as its E4M3 value's BF16 bits (the float's
 * top half), the scale in the header. */
QK_TARGET_AVX512 void qk_x86_avx512_act_f8b(const qk_wq *w, const float *x, void *dst, int64_t n)
{
    if (w->a_variant) {
        qk_wq_act_f8b(w, x, dst, n);
        return;
    }
    qk_a_i8_head h = {0};
    float op;
    if (w->a_static) {
        h.scale = w->a_scale, op = 1.0f / w->a_scale;
    } else {
        h.scale = fmaxf(amax_abs(x, n, 0.0f) / 448.0f, 1.0f / (448.0f * 512.0f));
        op = h.scale;
    }
    f8_words(x, n, op, w->a_static, (uint8_t *)dst + QK_A_I8_HEAD);
    memcpy(dst, &h, sizeof h);
}

#endif
