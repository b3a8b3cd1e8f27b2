/* avx512_wq_f8.c - FP8 W8A8 (W_FP8 E4M3 weights x QK_A_F8B activations, and
 * FP8_BLOCK's x QK_A_F8G) with
 * AVX512-BF16's vdpbf16ps on rows repacked at load, bitwise equal to the
 * scalar reference qk_wq_tile_f8b (kernels/wq_f8.c, THE FP8 ORDER).
 *
 * Every E4M3 value is a BF16 exactly, and the product of two has at most 8
 * significant bits, so vdpbf16ps's products are exact; each of its two sums
 * a lane is rounded to nearest even, the odd element's first.  That is what
 * this CPU's instruction is measured to do (tests/test_wq_f8.c), and a level
 * uses it only when a probe at load agrees (f8_probe: a case where the odd
 * element first, the even first and one rounding give three answers, and
 * random E4M3 pairs against the fused multiply-adds of the reference).
 *
 * THE PACKING: the header (64 bytes), then per group of 8 rows their 8
 * float scales (as the reference reads them; FP8_BLOCK: 8 for each 128
 * columns), one flag byte a 64 columns
 * (padded to 32 bytes), and per 64 columns each row's 64 codes as stored
 * (zeros past the row's end).  A flag is set when one of the chunk's codes
 * has exponent field 0 (zero or subnormal: about 1 code in 7,000 of a
 * per-channel FP8 matrix).
 *
 * THE DECODING: vpmovsxbw widens 32 codes to words; shifted left by 4 and
 * masked (sign to bit 15, exponent and mantissa to bits 10..4) with
 * exponent 112 ORed in, a normal code is the BF16 of its value times 2^-8
 * (one vpternlogd).  In a flagged chunk the codes of exponent field 0 take
 * their BF16 (value times 2^-8, normal in BF16: the instruction flushes
 * denormal inputs) from an 8-entry table (vpermw) and their sign.  Each
 * product is then exactly the reference's times 2^-8, so is each sum (no sum
 * gets near the float's least normal, 2^-26 being the least product), and the
 * lane sums times 256 are the reference's bits.  Three instructions a 32
 * weights, shared by every token of the tile, then one vdpbf16ps a 32 weights
 * and token.  (A NaN E4M3 code, 0x7F/0xFF, decodes to a finite value here and
 * to NaN in the reference; no producer writes one into a weight.) */
#include "kernels/x86/packed512.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kernels/elements.h"
#include "kernels/half.h"
#include "kernels/wq_impl.h"

#ifdef QK_X86

#define F8_MAGIC 0x38465751u /* "QWF8" */
#define F8_HEAD 64
#define F8_NT 8

static bool f8_takes(const qk_wq *w)
{
    return ((w->act == QK_A_F8B && qk_wq_f8b_takes(w)) || (w->act == QK_A_F8G && qk_wq_f8g_takes(w))) &&
           w->rows > 0 && w->rows % 8 == 0;
}

/* The scale groups of a row: one, or FP8_BLOCK's one a 128 columns. */
static inline int64_t sgroups(const qk_wq *w) { return w->act == QK_A_F8G ? w->cols / QK_A_F8G_GROUP : 1; }
static inline int64_t chunks(int64_t n) { return (n + 63) / 64; }
static inline size_t flag_bytes(int64_t n) { return ((size_t)chunks(n) + 31) / 32 * 32; }
static inline size_t scale_bytes(int64_t nsg) { return 32 * (size_t)nsg; }
static inline size_t group_bytes(int64_t n, int64_t nsg)
{
    return scale_bytes(nsg) + flag_bytes(n) + (size_t)chunks(n) * 512;
}

/* ---- the probe ----------------------------------------------------------------- */

/* BF16 bits of a float with at most 8 significant bits (exact). */
static uint16_t bf16_of(float v) { return (uint16_t)(qk_f32_bits(v) >> 16); }
static uint16_t e4m3_bf16(uint8_t c) { return bf16_of(qk_elem_decode(QK_ELEM_FP8_E4M3, c)); }

QK_TARGET_AVX512BF16 static void dp16(const float acc[16], const uint16_t a[32], const uint16_t b[32], float o[16])
{
    __m512bh x, y;
    memcpy(&x, a, 64);
    memcpy(&y, b, 64);
    _mm512_storeu_ps(o, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), x, y));
}

static int probe_ok;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static void f8_probe(void)
{
    if (!qk_cpu_has_bf16_vbmi())
        return;
    float acc[16] = {0}, o[16];
    uint16_t a[32] = {0}, b[32] = {0};
    /* 2^24 + 1 (odd first: rounds to 2^24) - 1 = 2^24 - 1; even first or one rounding: 2^24 */
    acc[0] = 16777216.0f;
    a[1] = e4m3_bf16(0x38), b[1] = e4m3_bf16(0x38); /* 1 x 1 */
    a[0] = e4m3_bf16(0xB8), b[0] = e4m3_bf16(0x38); /* -1 x 1 */
    dp16(acc, a, b, o);
    if (o[0] != 16777215.0f)
        return;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int it = 0; it < 256; it++) {
        for (int i = 0; i < 32; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint8_t ca = (uint8_t)(s >> 33), cb = (uint8_t)(s >> 45);
            ca = (ca & 0x7F) == 0x7F ? 0 : ca, cb = (cb & 0x7F) == 0x7F ? 0 : cb;
            a[i] = bf16_of(ldexpf(qk_elem_decode(QK_ELEM_FP8_E4M3, ca), -8)); /* the kernel's weight: value * 2^-8 */
            b[i] = e4m3_bf16(cb);
        }
        for (int j = 0; j < 16; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            acc[j] = (float)(int32_t)(s >> 40) * 0x1p-18f * (float)(1 << (s >> 60));
        }
        dp16(acc, a, b, o);
        for (int j = 0; j < 16; j++) {
            const float want = fmaf(qk_bf16_to_f32(a[2 * j]), qk_bf16_to_f32(b[2 * j]),
                                    fmaf(qk_bf16_to_f32(a[2 * j + 1]), qk_bf16_to_f32(b[2 * j + 1]), acc[j]));
            if (memcmp(&want, &o[j], 4) != 0)
                return;
        }
    }
    probe_ok = 1;
}

static bool f8_ready(void)
{
    pthread_once(&probe_once, f8_probe);
    return probe_ok;
}

/* ---- packing -------------------------------------------------------------------- */

size_t qk_x86_avx512_f8_pack(const qk_wq *w, uint8_t *dst, int64_t g0, int64_t g1)
{
    if (!f8_takes(w) || !f8_ready())
        return 0;
    const int64_t n = w->cols, nsg = sgroups(w);
    const size_t gb = group_bytes(n, nsg), bytes = F8_HEAD + gb * (size_t)(w->rows / 8);
    if (!dst)
        return bytes;
    if (g0 == 0) {
        qk_wq_pack_head_put(dst, F8_HEAD, F8_MAGIC, 0, w);
    }
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *gp = dst + F8_HEAD + gb * (size_t)g, *flags = gp + scale_bytes(nsg), *codes = flags + flag_bytes(n);
        for (int64_t j = 0; j < nsg; j++) /* the 8 rows' scales of each scale group */
            for (int i = 0; i < 8; i++) {
                const float s = qk_wq_scale(w, g * 8 + i, j * QK_A_F8G_GROUP);
                memcpy(gp + 32 * j + 4 * (size_t)i, &s, 4);
            }
        memset(flags, 0, gb - scale_bytes(nsg));
        for (int i = 0; i < 8; i++) {
            const uint8_t *q = w->q + (g * 8 + i) * w->q_rs;
            for (int64_t k = 0; k < n; k++) {
                codes[(size_t)(k / 64) * 512 + 64 * (size_t)i + (size_t)(k % 64)] = q[k];
                flags[k / 64] |= (q[k] & 0x78) == 0;
            }
        }
    }
    return bytes;
}

/* ---- the products ---------------------------------------------------------------- */

/* 32 codes at p as BF16 of value * 2^-8: the normal codes' (sign, exponent
 * and mantissa in place, exponent + 112); with SUB, the codes of exponent
 * field 0 from the table sub (zero and the seven subnormals) with their sign. */
QK_TARGET_AVX512BF16 static inline __m512bh dec32(const uint8_t *p, const bool SUB, __m512i sub)
{
    const __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
    const __m512i t = _mm512_ternarylogic_epi32(_mm512_slli_epi16(w, 4), _mm512_set1_epi16((short)0x87F0),
                                                _mm512_set1_epi16(0x3800), 0xEA); /* (a & b) | c */
    if (!SUB)
        return (__m512bh)t;
    const __mmask32 z = _mm512_testn_epi16_mask(w, _mm512_set1_epi16(0x78));
    const __m512i sv = _mm512_ternarylogic_epi32(_mm512_permutexvar_epi16(w, sub), w, _mm512_set1_epi16((short)0x8000),
                                                 0xF8); /* a | (b & c) */
    return (__m512bh)_mm512_mask_blend_epi16(z, t, sv);
}

/* The table of dec32: BF16 of m * 2^-17 (m = 0..7: E4M3's zero and
 * subnormals m * 2^-9, times 2^-8), the rest 0; a constant, not rebuilt at
 * each tile (test_wq_f8's subnormal codes check every entry). */
QK_TARGET_AVX512BF16 static inline __m512i sub_table(void)
{
    return _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3860, 0x3840,
                            0x3820, 0x3800, 0x37C0, 0x3780, 0x3700, 0);
}

/* The reference's lane sums: t[l] = lane[l] + lane[l + 8], then hsum8. */
QK_TARGET_AVX512BF16 static inline float lanes_sum(__m512 a)
{
    return qk_hsum8_ps(_mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)));
}

static inline const uint8_t *act_words(const void *y, size_t ys, int t)
{
    return (const uint8_t *)y + (size_t)t * ys + QK_A_I8_HEAD;
}

static inline float act_scale(const void *y, size_t ys, int t)
{
    qk_a_i8_head h;
    memcpy(&h, (const uint8_t *)y + (size_t)t * ys, sizeof h);
    return h.scale;
}

/* The 8 rows of a chunk at cp against one token's 64 words at a (32 when !B),
 * into acc[0..8). */
#define ROWS8_CHUNK(cp, acc, SUB, B)                                                                           \
    _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) {                                                   \
        qk_prefetch_span(cp + 64 * r + QK_PREFETCH_AHEAD, 64);                                              \
        acc[r] = _mm512_dpbf16_ps(acc[r], dec32(cp + 64 * r, SUB, sub), xa);                                \
        if (B)                                                                                              \
            acc[r] = _mm512_dpbf16_ps(acc[r], dec32(cp + 64 * r + 32, SUB, sub), xb);                       \
    }

/* Chunk c of NG groups (codes at c0 and c1, flags f0 and f1) into acc[0 .. 8 * NG). */
#define ROWS_CHUNK(c, B)                                                                                       \
    do {                                                                                                       \
        if (f0[c])                                                                                             \
            ROWS8_CHUNK(c0, acc, true, B)                                                                      \
        else                                                                                                   \
            ROWS8_CHUNK(c0, acc, false, B)                                                                     \
        if (NG > 1) {                                                                                          \
            if (f1[c])                                                                                         \
                ROWS8_CHUNK(c1, (acc + 8), true, B)                                                            \
            else                                                                                               \
                ROWS8_CHUNK(c1, (acc + 8), false, B)                                                           \
        }                                                                                                      \
    } while (0)

/* One token against the rows of NG (1 or 2) consecutive groups at gp (gb
 * bytes apart): their sums times 2^-8, o[0 .. 8 * NG).  Two groups are two
 * streams through memory, read faster than one (wq_f8.c). */
QK_TARGET_AVX512BF16 __attribute__((always_inline)) static inline void
rows(const uint8_t *gp, size_t gb, int64_t n, const uint8_t *a, __m512i sub, const int NG, float o[16])
{
    __m512 acc[16];
    _Pragma("GCC unroll 16") for (int r = 0; r < 8 * NG; r++)
        acc[r] = _mm512_setzero_ps();
    const uint8_t *f0 = gp + scale_bytes(1), *f1 = gp + gb + scale_bytes(1);
    const uint8_t *c0 = f0 + flag_bytes(n), *c1 = f1 + flag_bytes(n);
    for (int64_t c = 0, k = 0; k < n; c++, k += 64, c0 += 512, c1 += 512) {
        const __m512bh xa = (__m512bh)_mm512_loadu_si512((const void *)(a + 2 * k));
        if (k + 64 <= n) {
            const __m512bh xb = (__m512bh)_mm512_loadu_si512((const void *)(a + 2 * k + 64));
            ROWS_CHUNK(c, true);
        } else { /* the last 32 columns */
            const __m512bh xb = xa;
            ROWS_CHUNK(c, false);
        }
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < 8 * NG; r++)
        o[r] = lanes_sum(acc[r]);
}

/* NT tokens against row i of a group (gp): their sums times 2^-8. */
QK_TARGET_AVX512BF16 __attribute__((always_inline)) static inline void
toks(const uint8_t *gp, int i, int64_t n, const uint8_t *const a[F8_NT], __m512i sub, const int NT, float o[F8_NT])
{
    __m512 acc[F8_NT];
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
        acc[t] = _mm512_setzero_ps();
    const uint8_t *flags = gp + scale_bytes(1), *cp = flags + flag_bytes(n) + 64 * (size_t)i;
    for (int64_t c = 0, k = 0; k < n; c++, k += 64, cp += 512) {
        const __m512bh A = dec32(cp, flags[c], sub);
        if (k + 64 <= n) {
            const __m512bh B = dec32(cp + 32, flags[c], sub);
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {
                acc[t] = _mm512_dpbf16_ps(acc[t], A, (__m512bh)_mm512_loadu_si512((const void *)(a[t] + 2 * k)));
                acc[t] = _mm512_dpbf16_ps(acc[t], B, (__m512bh)_mm512_loadu_si512((const void *)(a[t] + 2 * k + 64)));
            }
        } else {
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
                acc[t] = _mm512_dpbf16_ps(acc[t], A, (__m512bh)_mm512_loadu_si512((const void *)(a[t] + 2 * k)));
        }
    }
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
        o[t] = lanes_sum(acc[t]);
}

/* FP8_BLOCK, one token against the rows of NG (1 or 2) consecutive groups
 * at gp (gb bytes apart; two streams, as rows): per 128 columns the lanes
 * from zero, then into the running lanes (in memory: 16 rows' lanes and
 * running lanes would take every register) with the group's scales (as_g *
 * ws_g * 256: the lanes hold the sums times 2^-8); the running lanes' sums,
 * o[0 .. 8 * NG). */
QK_TARGET_AVX512BF16 __attribute__((always_inline)) static inline void
rows_g(const uint8_t *gp, size_t gb, int64_t n, const uint8_t *a, __m512i sub, const int NG, float o[16])
{
    const int64_t nsg = n / QK_A_F8G_GROUP;
    const float *as = (const float *)(const void *)(a + 2 * n);
    __m512 acc[16];
    float run[16][16] = {{0}};
    const uint8_t *f0 = gp + scale_bytes(nsg), *f1 = gp + gb + scale_bytes(nsg);
    const uint8_t *c0 = f0 + flag_bytes(n), *c1 = f1 + flag_bytes(n);
    for (int64_t j = 0; j < nsg; j++) {
        _Pragma("GCC unroll 16") for (int r = 0; r < 8 * NG; r++)
            acc[r] = _mm512_setzero_ps();
        for (int64_t c = 2 * j; c < 2 * j + 2; c++, c0 += 512, c1 += 512) {
            const __m512bh xa = (__m512bh)_mm512_loadu_si512((const void *)(a + 128 * c));
            const __m512bh xb = (__m512bh)_mm512_loadu_si512((const void *)(a + 128 * c + 64));
            ROWS_CHUNK(c, true);
        }
        float f[16]; /* as_g * ws_g * 256 of each row, as the reference rounds them */
        _Pragma("GCC unroll 2") for (int i = 0; i < NG; i++) {
            const float *ws = (const float *)(const void *)(gp + (size_t)i * gb) + 8 * j;
            _mm256_storeu_ps(f + 8 * i, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(as[j]), _mm256_loadu_ps(ws)),
                                                      _mm256_set1_ps(256.0f)));
        }
        _Pragma("GCC unroll 16") for (int r = 0; r < 8 * NG; r++)
            _mm512_storeu_ps(run[r], _mm512_fmadd_ps(acc[r], _mm512_set1_ps(f[r]), _mm512_loadu_ps(run[r])));
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < 8 * NG; r++)
        o[r] = lanes_sum(_mm512_loadu_ps(run[r]));
}

/* FP8_BLOCK, NT tokens against row i of a group (gp): the running lanes' sums. */
QK_TARGET_AVX512BF16 __attribute__((always_inline)) static inline void
toks_g(const uint8_t *gp, int i, int64_t n, const uint8_t *const a[F8_NT], __m512i sub, const int NT, float o[F8_NT])
{
    const int64_t nsg = n / QK_A_F8G_GROUP;
    const float *ws = (const float *)(const void *)gp;
    __m512 acc[F8_NT], run[F8_NT];
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
        run[t] = _mm512_setzero_ps();
    const uint8_t *flags = gp + scale_bytes(nsg), *cp = flags + flag_bytes(n) + 64 * (size_t)i;
    for (int64_t j = 0; j < nsg; j++) {
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
            acc[t] = _mm512_setzero_ps();
        for (int64_t c = 2 * j; c < 2 * j + 2; c++, cp += 512) {
            const __m512bh A = dec32(cp, flags[c], sub), B = dec32(cp + 32, flags[c], sub);
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {
                acc[t] = _mm512_dpbf16_ps(acc[t], A, (__m512bh)_mm512_loadu_si512((const void *)(a[t] + 128 * c)));
                acc[t] = _mm512_dpbf16_ps(acc[t], B, (__m512bh)_mm512_loadu_si512((const void *)(a[t] + 128 * c + 64)));
            }
        }
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {
            float ag;
            memcpy(&ag, a[t] + 2 * n + 4 * j, 4);
            run[t] = _mm512_fmadd_ps(acc[t], _mm512_set1_ps(ag * ws[8 * j + i] * 256.0f), run[t]);
        }
    }
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
        o[t] = lanes_sum(run[t]);
}

/* One token against rows [ra, rb) of the NG groups at gp (their first row
 * g8): out[r - r0] as the reference finishes it. */
QK_TARGET_AVX512BF16 static void one_token(const qk_wq *w, const uint8_t *gp, size_t gb, int NG, int64_t g8, int64_t ra,
                                           int64_t rb, int64_t r0, const void *y, size_t ys, __m512i sub, float *out)
{
    const int64_t n = w->cols;
    float o[16];
    if (w->act == QK_A_F8G) {
        if (NG == 2)
            rows_g(gp, gb, n, act_words(y, ys, 0), sub, 2, o);
        else
            rows_g(gp, gb, n, act_words(y, ys, 0), sub, 1, o);
        for (int64_t r = ra; r < rb; r++)
            out[r - r0] = o[r - g8];
        return;
    }
    if (NG == 2)
        rows(gp, gb, n, act_words(y, ys, 0), sub, 2, o);
    else
        rows(gp, gb, n, act_words(y, ys, 0), sub, 1, o);
    const float as = act_scale(y, ys, 0);
    for (int64_t r = ra; r < rb; r++) {
        float ws; /* row r's scale: group (r - g8) / 8 of the NG, lane (r - g8) % 8 */
        memcpy(&ws, gp + (size_t)((r - g8) / 8) * gb + 4 * (size_t)((r - g8) % 8), 4);
        out[r - r0] = as * (ws * (256.0f * o[r - g8]));
    }
}

/* ---- prompt batches (QK_A_F8B, QK_A_F8G): a row group's span decoded once --------
 * Batches of more than 12 tokens decode each 8-row group's span of columns
 * once into floats, then run passes of up to 3 tokens over it: 8 rows x 3
 * tokens of 16-lane accumulators, each the FP8 ORDER's lanes of its (row,
 * token), by fused multiply-adds instead of vdpbf16ps: lane l of a 32
 * columns' step takes the odd element of its pair, then the even one, as
 * the instruction does, each product exact (two E4M3 values) and each sum
 * rounded once; no operand or sum is a denormal (wq_f8.c), so the
 * instruction's flushing never applies: the same bits.  On this CPU (SPR
 * class) vdpbf16ps issues one every two cycles, 16 products a cycle, and
 * the fused multiply-adds 32; toks, a vdpbf16ps a 32 columns and token,
 * also decoded every chunk again for each 8 tokens.  The lanes carry
 * between spans; then each token's eight rows are reduced at once (lane +
 * lane + 8, then qk_hsum8x8_ps: lanes_sum's additions).  FP8_BLOCK's lanes
 * start from zero each 128 columns and go into running lanes with the
 * group's factor, as rows_g and toks_g do (f8_pass). */
enum { F8_SPAN = 512, F8_PT = 3, F8_PASSES = 22 }; /* columns a span; tokens a pass; passes (66 tokens) a block */

/* 32 BF16 words (a dword's low word the even element) as the odd
 * elements' floats and the even ones'. */
QK_TARGET_AVX512BF16 static inline void f8_split(__m512i v, __m512 *odd, __m512 *even)
{
    *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u)));
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

/* Row group gp's columns [k0, k0 + nc) (k0 a multiple of 64; nc of 32) as
 * floats (the values times 2^-8, dec32's) into wf: 32 columns a piece of
 * 256 floats, row r's odd elements at 32 r, its even ones at 32 r + 16
 * (nsg: the row's scale groups, 1 or FP8_BLOCK's one a 128 columns). */
QK_TARGET_AVX512BF16 static void f8_span(const uint8_t *gp, int64_t n, int64_t nsg, int64_t k0, int nc, __m512i sub,
                                         float *wf)
{
    const uint8_t *flags = gp + scale_bytes(nsg), *cp = flags + flag_bytes(n) + (size_t)(k0 / 64) * 512;
    for (int h = 0; h < nc / 32; h++) {
        const int64_t k = k0 + 32 * h;
        const uint8_t *p = cp + (size_t)(h / 2) * 512 + 32 * (size_t)(h % 2);
        const bool sb = flags[k / 64] != 0;
        _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) {
            __m512 o, e;
            f8_split((__m512i)(sb ? dec32(p + 64 * r, true, sub) : dec32(p + 64 * r, false, sub)), &o, &e);
            _mm512_storeu_ps(wf + 256 * (size_t)h + 32 * r, o);
            _mm512_storeu_ps(wf + 256 * (size_t)h + 32 * r + 16, e);
        }
    }
}

/* Pieces [h0, h1) of the span's 8 decoded rows against NT tokens (their
 * words at a[t], from the span's first column): c[r][t] continued. */
QK_TARGET_AVX512BF16 __attribute__((always_inline)) static inline void
f8_pieces(const float *wf, int h0, int h1, const uint8_t *const a[F8_PT], const int NT, __m512 c[8][F8_PT])
{
    for (int h = h0; h < h1; h++) {
        const float *w = wf + 256 * (size_t)h;
        __m512 xo[F8_PT], xe[F8_PT];
        _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++)
            f8_split(_mm512_loadu_si512((const void *)(a[t] + 64 * (size_t)h)), &xo[t], &xe[t]);
        _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) {
            _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++) c[r][t] = _mm512_fmadd_ps(_mm512_loadu_ps(w + 32 * r), xo[t], c[r][t]);
            _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++)
                c[r][t] = _mm512_fmadd_ps(_mm512_loadu_ps(w + 32 * r + 16), xe[t], c[r][t]);
        }
    }
}

/* NT tokens against the span's nh pieces: acc[r][t] continued.  FP8_BLOCK
 * (GRP): per 128 columns (4 pieces) the lanes from zero, then into the
 * running lanes acc with the group's factor (as_t * ws_r) * 256, as rows_g:
 * ws8, the span's first group's 8 row scales (8 floats a group); as[t],
 * token t's scale of that group (one float a group). */
QK_TARGET_AVX512BF16 __attribute__((always_inline)) static inline void
f8_pass(const float *wf, int nh, const uint8_t *const a[F8_PT], const int NT, __m512 acc[8][F8_PT], const bool GRP,
        const float *ws8, const float *const as[F8_PT])
{
    __m512 c[8][F8_PT];
    if (!GRP) {
        _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++)
            _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++) c[r][t] = acc[r][t];
        f8_pieces(wf, 0, nh, a, NT, c);
        _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++)
            _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++) acc[r][t] = c[r][t];
        return;
    }
    for (int j = 0; j < nh / 4; j++) {
        _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++)
            _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++) c[r][t] = _mm512_setzero_ps();
        f8_pieces(wf, 4 * j, 4 * j + 4, a, NT, c);
        float f[F8_PT][8];
        _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++)
            _mm256_storeu_ps(f[t], _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(as[t][j]), _mm256_loadu_ps(ws8 + 8 * j)),
                                                 _mm256_set1_ps(256.0f)));
        _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++)
            _Pragma("GCC unroll 3") for (int t = 0; t < NT; t++)
                acc[r][t] = _mm512_fmadd_ps(c[r][t], _mm512_set1_ps(f[t][r]), acc[r][t]);
    }
}

QK_TARGET_AVX512BF16 static void f8_pass_n(const float *wf, int nh, const uint8_t *const a[F8_PT], int nt,
                                           __m512 acc[8][F8_PT], bool grp, const float *ws8,
                                           const float *const as[F8_PT])
{
#define F8_PASS(N)                                     do {                                                   if (grp)                                               f8_pass(wf, nh, a, N, acc, true, ws8, as);         else                                                   f8_pass(wf, nh, a, N, acc, false, ws8, as);     } while (0)
    if (nt == 1)
        F8_PASS(1);
    else if (nt == 2)
        F8_PASS(2);
    else
        F8_PASS(3);
#undef F8_PASS
}

/* Token t's eight rows (acc[r][t]) finished as the reference does: the
 * lanes' sums (lane + lane + 8, then qk_hsum8x8_ps: lanes_sum's additions),
 * then out[r] = as * (ws[r] * (256 * sum_r)); FP8_BLOCK (ws NULL): the sums
 * of the running lanes. */
QK_TARGET_AVX512BF16 static inline void f8_store(__m512 acc[8][F8_PT], int t, const float *ws, float as, float *out)
{
    __m256 h[8];
    for (int r = 0; r < 8; r++)
        h[r] = _mm256_add_ps(_mm512_castps512_ps256(acc[r][t]), _mm512_extractf32x8_ps(acc[r][t], 1));
    /* lane k of qk_hsum8x8_ps is its input {0, 2, 4, 6, 1, 3, 5, 7}[k]: rows 0..7 in order */
    const __m256 sum = qk_hsum8x8_ps(h[0], h[4], h[1], h[5], h[2], h[6], h[3], h[7]);
    if (!ws) {
        _mm256_storeu_ps(out, sum);
        return;
    }
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(ws), _mm256_mul_ps(_mm256_set1_ps(256.0f), sum));
    _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_set1_ps(as), v));
}

/* Row groups [ga, gb) against nt tokens: out[t * ldo + 8 (g - ga) + r]. */
QK_TARGET_AVX512BF16 static void f8_prompt(const qk_wq *w, int64_t ga, int64_t gb, const void *y, size_t ys, int nt,
                                           float *out, size_t ldo)
{
    const int64_t n = w->cols, nsg = sgroups(w);
    const bool grp = w->act == QK_A_F8G;
    const size_t gb_bytes = group_bytes(n, nsg);
    const __m512i sub = sub_table();
    _Alignas(64) float wf[F8_SPAN / 32 * 256];
    __m512 st[F8_PASSES][8][F8_PT];
    for (int64_t g = ga; g < gb; g++) {
        const uint8_t *gp = w->packed + F8_HEAD + gb_bytes * (size_t)g;
        const float *ws = (const float *)(const void *)gp;
        for (int T0 = 0; T0 < nt; T0 += F8_PASSES * F8_PT) {
            const int np = (nt - T0 + F8_PT - 1) / F8_PT < F8_PASSES ? (nt - T0 + F8_PT - 1) / F8_PT : F8_PASSES;
            for (int64_t k0 = 0; k0 < n; k0 += F8_SPAN) {
                const int nc = (int)(n - k0 < F8_SPAN ? n - k0 : F8_SPAN);
                f8_span(gp, n, nsg, k0, nc, sub, wf);
                for (int p = 0; p < np; p++) {
                    const int t0 = T0 + p * F8_PT, q = nt - t0 < F8_PT ? nt - t0 : F8_PT;
                    const uint8_t *a[F8_PT];
                    const float *as[F8_PT]; /* FP8_BLOCK: the tokens' scales from the span's first group */
                    for (int t = 0; t < F8_PT; t++) {
                        const uint8_t *at = act_words(y, ys, t0 + (t < q ? t : 0));
                        a[t] = at + 2 * k0;
                        as[t] = (const float *)(const void *)(at + 2 * n) + k0 / QK_A_F8G_GROUP;
                    }
                    if (k0 == 0)
                        for (int r = 0; r < 8; r++)
                            for (int t = 0; t < F8_PT; t++)
                                st[p][r][t] = _mm512_setzero_ps();
                    f8_pass_n(wf, nc / 32, a, q, st[p], grp, ws + 8 * (k0 / QK_A_F8G_GROUP), as);
                }
            }
            for (int p = 0; p < np; p++) {
                const int t0 = T0 + p * F8_PT, q = nt - t0 < F8_PT ? nt - t0 : F8_PT;
                for (int t = 0; t < q; t++)
                    f8_store(st[p], t, grp ? NULL : ws, grp ? 0.0f : act_scale(y, ys, t0 + t),
                             out + (size_t)(t0 + t) * ldo + 8 * (size_t)(g - ga));
            }
        }
    }
}

QK_TARGET_AVX512BF16 bool qk_x86_avx512_f8_tile(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt,
                                                float *out, size_t ldo)
{
    qk_wq_pack_head h;
    if (!f8_takes(w) || !qk_wq_packed_as(w, F8_MAGIC, &h))
        return false;
    const bool grp = w->act == QK_A_F8G;
    const int64_t n = w->cols;
    const size_t gb = group_bytes(n, sgroups(w));
    const __m512i sub = sub_table();
    const int64_t ga = (r0 + 7) / 8, gz = (r0 + nr) / 8;
    if (nt > 12 && gz > ga) { /* whole row groups decoded once a span, the cut ones below */
        f8_prompt(w, ga, gz, y, ys, nt, out + (ga * 8 - r0), ldo);
        if (ga * 8 > r0)
            qk_x86_avx512_f8_tile(w, r0, (int)(ga * 8 - r0), y, ys, nt, out, ldo);
        if (r0 + nr > gz * 8)
            qk_x86_avx512_f8_tile(w, gz * 8, (int)(r0 + nr - gz * 8), y, ys, nt, out + (gz * 8 - r0), ldo);
        return true;
    }
    for (int64_t g = r0 / 8; g * 8 < r0 + nr;) {
        const uint8_t *gp = w->packed + F8_HEAD + gb * (size_t)g;
        const int ng = nt == 1 && (g + 1) * 8 < r0 + nr ? 2 : 1; /* one token: two groups where the tile has them */
        const int64_t ra = g * 8 > r0 ? g * 8 : r0, rb = (g + ng) * 8 < r0 + nr ? (g + ng) * 8 : r0 + nr;
        if (nt == 1) {
            one_token(w, gp, gb, ng, g * 8, ra, rb, r0, y, ys, sub, out);
            g += ng;
            continue;
        }
        for (int64_t r = ra; r < rb; r++) {
            const int i = (int)(r - g * 8);
            float ws;
            memcpy(&ws, gp + 4 * (size_t)i, 4);
            for (int t0 = 0; t0 < nt; t0 += F8_NT) {
                const int mt = nt - t0 < F8_NT ? nt - t0 : F8_NT;
                const uint8_t *a[F8_NT];
                float o[F8_NT];
                for (int t = 0; t < mt; t++)
                    a[t] = act_words(y, ys, t0 + t);
                if (grp)
                    QK_BY_NT8(mt, toks_g(gp, i, n, a, sub, N, o))
                else
                    QK_BY_NT8(mt, toks(gp, i, n, a, sub, N, o))
                for (int t = 0; t < mt; t++)
                    out[(size_t)(t0 + t) * ldo + (size_t)(r - r0)] =
                        grp ? o[t] : act_scale(y, ys, t0 + t) * (ws * (256.0f * o[t]));
            }
        }
        g++;
    }
    return true;
}

#endif
