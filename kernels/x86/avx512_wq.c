/* avx512_wq.c - AVX-512 float products of the parted checkpoint layouts
 * (kernels/wq.h) on rows repacked at load, bitwise equal to the scalar
 * reference (kernels/wq.c): every output is THE WQ FLOAT ORDER of wq.h, one
 * 8-lane fused multiply-add chain per (row, token) over the row's weights
 * decoded exactly as the reference decoder computes them, then qk_hsum8_ps.
 *
 * THE PACKING (wq_pack, at load; lib/engine/matmul.c qk_weight_pack).  Each
 * group of 8 rows becomes one stream, scale group after scale group (g
 * columns each): the 8 rows' scales as stored (1, 2 or 4 bytes each), their
 * zero points or MLX biases as floats (qk_wq_zero's values) when the layout
 * has them, then the codes:
 *   4-bit codes (pack-quantized, GPTQ, AWQ, MLX q4, NVFP4, MXFP4): per 16
 *     columns k .. k+15 each row's 8 bytes, two
 *     codes a byte, column k + 2i in the low nibble of byte i (compressed-
 *     tensors' words and NVFP4's bytes as stored), so a broadcast of 4 bytes
 *     and one variable shift put the codes of 8 columns in the low bits of 8
 *     lanes (no shuffle but the table's);
 *   8-bit codes (FP8 E4M3, INT8, pack-quantized 8-bit): per 8 columns each
 *     row's 8 code bytes (the pack-quantized ones XOR 0x80: the signed code
 *     minus 128).
 * The codes keep their bits per weight; the scales their bytes (a product
 * reads what the checkpoint stores, a 64-byte header more per matrix; FP4's
 * header holds 16 KB more: for each of the 256 scale bytes its 16 decoded
 * weights, the E2M1 values times qk_wq_fp4_mult's own multiplier, so no
 * product divides or looks a multiplier up).
 *
 * THE DECODING, exactly the reference's operations:
 *   4-bit: per row and scale group a table of the 16 code values, computed
 *     as the reference computes each weight ((q - zero) * scale, scale * q +
 *     bias, E2M1 value * block multiplier; FP4's read from the header by
 *     scale byte), looked up in registers by vpermt2ps (a code is its own
 *     index): the table entry IS the decoded weight;
 *   FP8: the E4M3 bits placed as an F16's (sign-extended byte << 7, bit 14
 *     cleared: exponent and mantissa fields aligned, subnormals too) and
 *     widened by vcvtph2ps: the value / 2^8 exactly, times the scale * 2^8
 *     (exact: the packing refuses scales whose * 2^8 overflows; the product
 *     is the reference's real product, rounded once).  Not the bits as a
 *     float's (value / 2^120): E4M3's subnormal codes would be float
 *     denormals there, and each multiply by one takes a microcode assist
 *     (4 in 10,000 codes of a per-channel FP8 matrix: a quarter of the
 *     decode time).  With E8M0 scales the F16 value times 2^8, then the
 *     scale, as avx2_wq.c;
 *   INT8 / 8-bit: the integer code to float, (q - zero) * scale.
 * One token takes the rows of a group together (the x chunk loaded once for
 * 8 rows); a few tokens take one row at a time, each decoded chunk shared
 * by up to 8 tokens; more than 12 decode a row group's span once for all
 * of them (prompt batches, below).  (A NaN E4M3 code decodes to a finite value here and to
 * NaN in the reference, as at the AVX2 level; no producer writes one.)
 *
 * INT8 W8A8 packs and multiplies with VNNI in avx512_wq_i8.c, NVFP4 W4A4 in
 * avx512_wq_nv4.c.  Weights that are not packed (act order, other layouts,
 * shapes the packing does not take) and the other integer products go to
 * the AVX2 level's kernels. */
#include "kernels/x86/simd_common.h"

#include <math.h>
#include <string.h>

#include "kernels/elements.h"
#include "kernels/fp4.h"
#include "kernels/wq_impl.h"

#ifdef QK_X86

enum { PK_NONE, PK_T4, PK_FP4, PK_FP8, PK_FP8X, PK_I8, PK_P8 };

#define PK_MAGIC 0x35575751u /* "QWW5" */
#define PK_T4_BYTES (256 * 16 * 4) /* FP4: a table of 16 floats for each scale byte */

/* The packing's header: 64 bytes, then FP4's tables. */
static size_t head_bytes(int kind) { return 64 + (kind == PK_FP4 ? PK_T4_BYTES : 0); }

/* E2M1 code i's value (exact; -0 for code 8, as qk_elem_decode). */
static float e2m1_value(int i)
{
    return (i & 8 ? -0.5f : 0.5f) * (float)(qk_e2m1_x2[i] < 0 ? -qk_e2m1_x2[i] : qk_e2m1_x2[i]);
}

/* The geometry of a packed weight. */
typedef struct {
    int kind;
    int64_t g, ng;       /* columns per scale group, groups per row */
    int ssz;             /* bytes per stored scale */
    bool has_z;
    size_t sbytes, zbytes, cbytes, gblk; /* per group of 8 rows: scales, zeros, codes, all */
    size_t rgblk;        /* bytes per 8-row group */
} pk_geo;

static int scale_size(int type)
{
    switch (type) {
    case QK_F32: return 4;
    case QK_F16:
    case QK_BF16: return 2;
    case QK_F8_E4M3:
    case QK_E8M0: return 1;
    default: return 0;
    }
}

static bool float_scale(int type) { return type == QK_F32 || type == QK_F16 || type == QK_BF16; }

/* Which packing serves w, or PK_NONE. */
static int pk_kind(const qk_wq *w)
{
    if (w->gidx || w->rows <= 0 || w->rows % 8 || w->cols <= 0 || !w->s.p || w->s.rdiv <= 0 || w->s.cdiv <= 0)
        return PK_NONE;
    const int64_t g = w->s.cdiv < w->cols ? w->s.cdiv : w->cols;
    if (w->cols % g)
        return PK_NONE;
    const bool g16 = g % 16 == 0, g8 = g % 8 == 0;
    switch (w->type) {
    case QK_W_PACK:
        if (w->bits == 8 && w->order == QK_WQ_WORDS && w->code_offset == 128 && g8 && float_scale(w->s.type))
            return PK_P8;
        /* fall through */
    case QK_W_GPTQ:
    case QK_W_AWQ:
    case QK_W_MLX:
        return w->bits == 4 && g16 && float_scale(w->s.type) ? PK_T4 : PK_NONE;
    case QK_W_NVFP4:
    case QK_W_MXFP4:
        return g16 && (w->s.type == QK_F8_E4M3 || w->s.type == QK_E8M0) ? PK_FP4 : PK_NONE;
    case QK_W_FP8:
        if (w->elem != QK_ELEM_FP8_E4M3 || !g8)
            return PK_NONE;
        return w->s.type == QK_E8M0 ? PK_FP8X : float_scale(w->s.type) ? PK_FP8 : PK_NONE;
    case QK_W_INT8: return g8 && float_scale(w->s.type) ? PK_I8 : PK_NONE;
    default: return PK_NONE;
    }
}

static bool pk_geo_of(const qk_wq *w, int kind, pk_geo *p)
{
    if (kind == PK_NONE)
        return false;
    p->kind = kind;
    p->g = w->s.cdiv < w->cols ? w->s.cdiv : w->cols;
    p->ng = w->cols / p->g;
    p->ssz = scale_size(w->s.type);
    p->has_z = w->z.p != NULL && kind != PK_FP4 && kind != PK_FP8 && kind != PK_FP8X;
    p->sbytes = (size_t)(8 * p->ssz);
    p->zbytes = p->has_z ? 32 : 0;
    const bool four = kind == PK_T4 || kind == PK_FP4;
    p->cbytes = (size_t)p->g * (four ? 4 : 8);
    p->gblk = p->sbytes + p->zbytes + p->cbytes;
    p->rgblk = p->gblk * (size_t)p->ng;
    return p->ssz > 0;
}

/* Raw bytes of row r's scale of group j. */
static const uint8_t *scale_at(const qk_wq *w, int ssz, int64_t r, int64_t j)
{
    return w->s.p + (size_t)((r / w->s.rdiv) * w->s.rs + j * w->s.cs) * (size_t)ssz;
}

/* ---- packing ----------------------------------------------------------------- */

static size_t avx512_wq_pack(const qk_wq *w, uint8_t *dst, int64_t g0, int64_t g1)
{
    if (w->act == QK_A_I8)
        return qk_x86_avx512_i8_pack(w, dst, g0, g1);
    if (w->act == QK_A_NV4)
        return qk_x86_avx512_nv4_pack(w, dst, g0, g1);
    if (w->act == QK_A_F8B || w->act == QK_A_F8G)
        return qk_x86_avx512_f8_pack(w, dst, g0, g1);
    pk_geo p;
    if (!qk_wq_act_float(w->act) || !pk_geo_of(w, pk_kind(w), &p)) /* the other integer products read the codes as stored */
        return 0;
    if (!dst) {
        /* FP8 folds 2^8 into the float scales: refuse a scale that would overflow */
        for (int64_t r = 0; p.kind == PK_FP8 && r < w->rows; r++)
            for (int64_t j = 0; j < p.ng; j++)
                if (!isfinite(qk_wq_scale(w, r, j * p.g) * 0x1p8f))
                    return 0;
        return head_bytes(p.kind) + p.rgblk * (size_t)(w->rows / 8);
    }
    if (g0 == 0) {
        qk_wq_pack_head_put(dst, head_bytes(p.kind), PK_MAGIC, p.kind, w);
        /* FP4: each scale byte's 16 weights, the E2M1 values times the
         * reference's own block multiplier, rounded once as the reference
         * rounds each weight: a 16-column group's table is two loads, not a
         * multiplier to find and two multiplies (bench250m NVFP4A16 tg32: 105 -> 139 t/s) */
        for (int b = 0; p.kind == PK_FP4 && b < 256; b++) {
            const float m = qk_wq_fp4_mult(w, (uint8_t)b);
            for (int i = 0; i < 16; i++) {
                const float v = e2m1_value(i) * m;
                memcpy(dst + 64 + 4 * (16 * (size_t)b + (size_t)i), &v, 4);
            }
        }
    }
    const bool four = p.kind == PK_T4 || p.kind == PK_FP4;
    for (int64_t rg = g0; rg < g1; rg++) {
        uint8_t *o = dst + head_bytes(p.kind) + (size_t)rg * p.rgblk;
        const int64_t r0 = rg * 8;
        for (int64_t j = 0; j < p.ng; j++, o += p.gblk) {
            const int64_t k0 = j * p.g;
            for (int r = 0; r < 8; r++)
                memcpy(o + (size_t)(r * p.ssz), scale_at(w, p.ssz, r0 + r, j), (size_t)p.ssz);
            if (p.has_z)
                for (int r = 0; r < 8; r++) {
                    const float z = qk_wq_zero(w, r0 + r, k0);
                    memcpy(o + p.sbytes + 4 * (size_t)r, &z, 4);
                }
            uint8_t *c = o + p.sbytes + p.zbytes;
            if (four) {
                for (int64_t k = k0; k < k0 + p.g; k += 16)
                    for (int r = 0; r < 8; r++, c += 8) {
                        if (p.kind == PK_FP4 || w->order == QK_WQ_WORDS) { /* already so: two codes a byte, LSB first */
                            memcpy(c, w->q + (r0 + r) * w->q_rs + k / 2, 8);
                            continue;
                        }
                        for (int i = 0; i < 8; i++)
                            c[i] = (uint8_t)(qk_wq_code(w, r0 + r, k + 2 * i) | qk_wq_code(w, r0 + r, k + 2 * i + 1) << 4);
                    }
            } else {
                const uint8_t flip = p.kind == PK_P8 ? 0x80 : 0;
                for (int64_t k = k0; k < k0 + p.g; k += 8)
                    for (int r = 0; r < 8; r++, c += 8)
                        for (int i = 0; i < 8; i++)
                            c[i] = w->q[(r0 + r) * w->q_rs + k + i] ^ flip;
            }
        }
    }
    return head_bytes(p.kind) + p.rgblk * (size_t)(w->rows / 8);
}

/* ---- the products -------------------------------------------------------------- */

#define QK_TARGET_W512 QK_TARGET_AVX512

/* What a tile needs of the weight, as values. */
typedef struct {
    pk_geo p;
    int stype;
    int code_offset;
    bool bias;
    float qlut[16];      /* T4: (float)(c - code_offset) */
    const float *t4;     /* FP4: the 16 weights of each scale byte (the pack's header) */
    const uint8_t *base; /* the packed stream's first row group */
} pk_ctx;

/* The table of an FP4 row's group of scale byte b (lo: codes 0-7, hi: 8-15). */
QK_TARGET_W512 static inline void fp4_table(const pk_ctx *c, uint8_t b, __m256 *lo, __m256 *hi)
{
    *lo = _mm256_loadu_ps(c->t4 + 16 * (size_t)b);
    *hi = _mm256_loadu_ps(c->t4 + 16 * (size_t)b + 8);
}

/* The 8 rows' scales of a group (as the reference reads them: exact
 * conversions), FP8's times 2^8 (FP4 reads its tables instead). */
QK_TARGET_W512 static inline __m256 scales8(const pk_ctx *c, const uint8_t *sp)
{
    __m256 v;
    switch (c->stype) {
    case QK_F32: v = _mm256_loadu_ps((const float *)(const void *)sp); break;
    case QK_F16: v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sp)); break;
    case QK_BF16:
        v = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)sp)), 16));
        break;
    default: { /* E8M0 (FP8 with MX scales; FP4 reads its table instead) */
        const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sp));
        __m256i bits = _mm256_slli_epi32(e, 23);
        bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
        bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7fc00000), _mm256_cmpeq_epi32(e, _mm256_set1_epi32(255)));
        v = _mm256_castsi256_ps(bits);
        break;
    }
    }
    if (c->p.kind == PK_FP8)
        v = _mm256_mul_ps(v, _mm256_set1_ps(256.0f));
    return v;
}

/* The eight 4-bit codes of the word at p in the low bits of 8 lanes (the
 * bits above are ignored by vpermt2ps): a broadcast load and a shift. */
QK_TARGET_W512 static inline __m256i nib8(const uint8_t *p, __m256i sh)
{
    return _mm256_srlv_epi32(_mm256_set1_epi32((int)qk_ld_u32(p)), sh);
}

/* Row r's table of the 16 code values in (lo: codes 0-7, hi: 8-15). */
QK_TARGET_W512 static inline void table16(const pk_ctx *c, float s, float z, __m256 *lo, __m256 *hi)
{
    const __m256 q0 = _mm256_loadu_ps(c->qlut), q1 = _mm256_loadu_ps(c->qlut + 8), sv = _mm256_set1_ps(s);
    if (c->bias) { /* MLX: scale * q + bias */
        const __m256 zv = _mm256_set1_ps(z);
        *lo = _mm256_add_ps(_mm256_mul_ps(sv, q0), zv);
        *hi = _mm256_add_ps(_mm256_mul_ps(sv, q1), zv);
    } else { /* (q - zero) * scale */
        const __m256 zv = _mm256_set1_ps(z);
        *lo = _mm256_mul_ps(_mm256_sub_ps(q0, zv), sv);
        *hi = _mm256_mul_ps(_mm256_sub_ps(q1, zv), sv);
    }
}

/* E4M3 codes (8 bytes of b; 16 of b16) as F16 bits: sign-extended byte << 7, bit 14 cleared (the
 * exponent and mantissa fields aligned, subnormals too), the value / 2^8 once widened by vcvtph2ps. */
QK_TARGET_W512 static inline __m128i e4m3_f16x8(__m128i b)
{
    return _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(b), 7), _mm_set1_epi16((short)0xBFFF));
}
QK_TARGET_W512 static inline __m256i e4m3_f16x16(__m128i b16)
{
    return _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b16), 7), _mm256_set1_epi16((short)0xBFFF));
}

/* Eight 8-bit weights at p decoded with their row's scale s (and zero z). */
QK_TARGET_W512 static inline __m256 dec8(const int kind, const bool has_z, const uint8_t *p, __m256 s, __m256 z)
{
    const __m128i b = _mm_loadl_epi64((const __m128i *)p);
    if (kind == PK_FP8) /* the value / 2^8, times the scale * 2^8 */
        return _mm256_mul_ps(_mm256_cvtph_ps(e4m3_f16x8(b)), s);
    if (kind == PK_FP8X) {
        const __m256 v = _mm256_cvtph_ps(e4m3_f16x8(b)); /* the value / 2^8 */
        return _mm256_mul_ps(_mm256_mul_ps(v, _mm256_set1_ps(256.0f)), s);
    }
    const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)); /* INT8, or the pack code - 128 */
    return has_z ? _mm256_mul_ps(_mm256_sub_ps(q, z), s) : _mm256_mul_ps(q, s);
}

/* The zero points of a group (zeros when absent). */
QK_TARGET_W512 static inline __m256 zeros8(const pk_ctx *c, const uint8_t *gp)
{
    return c->p.has_z ? _mm256_loadu_ps((const float *)(const void *)(gp + c->p.sbytes)) : _mm256_setzero_ps();
}

/* Group j's (at gp) scales and zero points into sv, zv; *snext (its
 * scales, computed a group ahead) becomes group j + 1's. */
QK_TARGET_W512 static inline void group_params(const pk_ctx *c, const uint8_t *gp, int64_t j, __m256 *snext, float sv[8],
                                               float zv[8])
{
    _mm256_storeu_ps(sv, *snext);
    if (j + 1 < c->p.ng)
        *snext = scales8(c, gp + c->p.gblk);
    _mm256_storeu_ps(zv, zeros8(c, gp));
}

/* One token against the 8 rows of row group rg, the 4-bit kinds (the 8-bit
 * ones: rows8w): out[0..8).
 * PREFETCH IN STEP (here and in rows8w): each 64 bytes of codes read brings
 * the line QK_PREFETCH_AHEAD bytes on, one prefetch a line interleaved with
 * the loads: a burst over a whole scale group (a per-channel FP8 or INT8
 * row group is 8 x cols bytes, 128 lines and more) stalls on the fill
 * buffers; measured at 40 % of a FP8 decode.  A cursor (pf) walks the
 * stream a line a step, and tops up at the end of each scale group, so
 * the scale bytes between the groups' codes are fetched too: a prefetch a
 * 64 code bytes alone left one line in nine of an NVFP4 stream (72 bytes a
 * 16-column group) to a demand miss. */
#define PF_STEP(pf) (qk_prefetch_span(pf, 64), (pf) += 64)
#define PF_TOPUP(pf, end)                          \
    do {                                           \
        for (; (pf) < (end); (pf) += 64)           \
            qk_prefetch_span(pf, 64);              \
    } while (0)
QK_TARGET_W512 __attribute__((always_inline)) static inline void
rows8(const pk_ctx *c, const int kind, int64_t rg, const float *x, float *out)
{
    const uint8_t *gp = c->base + (size_t)rg * c->p.rgblk;
    const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    __m256 acc[8];
    _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++)
        acc[r] = _mm256_setzero_ps();
    /* a group ahead: the next group's bytes are on their way (FP4: none, its tables are looked up) */
    __m256 snext = kind == PK_FP4 ? _mm256_setzero_ps() : scales8(c, gp);
    const uint8_t *pf = gp + QK_PREFETCH_AHEAD;
    for (int64_t j = 0; j < c->p.ng; j++, gp += c->p.gblk) {
        const int64_t k0 = j * c->p.g;
        const uint8_t *cp = gp + c->p.sbytes + c->p.zbytes;
        PF_TOPUP(pf, gp + QK_PREFETCH_AHEAD);
        __m256 tl[8], th[8];
        if (kind == PK_FP4) {
            _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++)
                fp4_table(c, gp[r], &tl[r], &th[r]);
        } else {
            float sv[8], zv[8];
            group_params(c, gp, j, &snext, sv, zv);
            _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++)
                table16(c, sv[r], zv[r], &tl[r], &th[r]);
        }
        for (int64_t k = k0; k < k0 + c->p.g; k += 16, cp += 64) {
            PF_STEP(pf); /* PREFETCH IN STEP, above */
            const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
            _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) {
                const __m256 lo = _mm256_permutex2var_ps(tl[r], nib8(cp + 8 * r, sh), th[r]);
                const __m256 hi = _mm256_permutex2var_ps(tl[r], nib8(cp + 8 * r + 4, sh), th[r]);
                acc[r] = _mm256_fmadd_ps(hi, x1, _mm256_fmadd_ps(lo, x0, acc[r]));
            }
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++)
        out[r] = qk_hsum8_ps(acc[r]);
}

/* dec8 for two rows at once: the 16 code bytes at p (row 2i's 8, then row
 * 2i+1's, as the stream holds them) decoded in the low and high 8 lanes
 * with each half's scale (and zero) in s (z): lane for lane dec8's
 * operations, so each half is dec8 of its row. */
QK_TARGET_W512 static inline __m512 dec16(const int kind, const bool has_z, const uint8_t *p, __m512 s, __m512 z)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)p);
    if (kind == PK_FP8)
        return _mm512_mul_ps(_mm512_cvtph_ps(e4m3_f16x16(b)), s);
    if (kind == PK_FP8X)
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtph_ps(e4m3_f16x16(b)), _mm512_set1_ps(256.0f)), s);
    const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
    return has_z ? _mm512_mul_ps(_mm512_sub_ps(q, z), s) : _mm512_mul_ps(q, s);
}

/* Two floats as the low and high 8 lanes. */
QK_TARGET_W512 static inline __m512 halves(float lo, float hi)
{
    return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

/* rows8 for the 8-bit kinds: rows 2i and 2i+1 share a 512-bit register,
 * row 2i in the low 8 lanes and 2i+1 in the high, the 8 columns of x
 * broadcast to both halves.  Each half is rows8's 8-lane chain of its row,
 * the same fused multiply-adds in the same order, then qk_hsum8_ps of the
 * half: the same bits in half the instructions (the 256-bit form of rows8
 * was compute-bound at one thread on per-channel FP8 decode, 41 t/s). */
QK_TARGET_W512 __attribute__((always_inline)) static inline void
rows8w(const pk_ctx *c, const int kind, const bool has_z, int64_t rg, const float *x, float *out)
{
    const uint8_t *gp = c->base + (size_t)rg * c->p.rgblk;
    __m512 acc[4];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
        acc[i] = _mm512_setzero_ps();
    __m256 snext = scales8(c, gp);
    const uint8_t *pf = gp + QK_PREFETCH_AHEAD;
    for (int64_t j = 0; j < c->p.ng; j++, gp += c->p.gblk) {
        const int64_t k0 = j * c->p.g;
        float sv[8], zv[8];
        group_params(c, gp, j, &snext, sv, zv);
        PF_TOPUP(pf, gp + QK_PREFETCH_AHEAD);
        __m512 s[4], z[4];
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
            s[i] = halves(sv[2 * i], sv[2 * i + 1]);
            z[i] = halves(zv[2 * i], zv[2 * i + 1]);
        }
        const uint8_t *cp = gp + c->p.sbytes + c->p.zbytes;
        for (int64_t k = k0; k < k0 + c->p.g; k += 8, cp += 64) {
            PF_STEP(pf); /* PREFETCH IN STEP (rows8) */
            const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + k));
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
                acc[i] = _mm512_fmadd_ps(dec16(kind, has_z, cp + 16 * i, s[i], z[i]), xv, acc[i]);
        }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        out[2 * i] = qk_hsum8_ps(_mm512_castps512_ps256(acc[i]));
        out[2 * i + 1] = qk_hsum8_ps(_mm512_extractf32x8_ps(acc[i], 1));
    }
}

/* NT tokens (rows ys bytes apart) against row r (0..7) of row group rg. */
QK_TARGET_W512 __attribute__((always_inline)) static inline void
toks(const pk_ctx *c, const int kind, const bool has_z, int64_t rg, int r, const uint8_t *y, size_t ys, const int NT,
     float *out, size_t ldo)
{
    const uint8_t *gp = c->base + (size_t)rg * c->p.rgblk;
    const bool four = kind == PK_T4 || kind == PK_FP4;
    const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    __m256 acc[8];
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
        acc[t] = _mm256_setzero_ps();
    __m256 snext = kind == PK_FP4 ? _mm256_setzero_ps() : scales8(c, gp); /* a group ahead */
    for (int64_t j = 0; j < c->p.ng; j++, gp += c->p.gblk) {
        const int64_t k0 = j * c->p.g;
        float sv[8], zv[8];
        if (kind != PK_FP4)
            group_params(c, gp, j, &snext, sv, zv);
        if (four) {
            __m256 tl, th;
            if (kind == PK_FP4) /* one row: its table looked up */
                fp4_table(c, gp[r], &tl, &th);
            else
                table16(c, sv[r], zv[r], &tl, &th);
            const uint8_t *cp = gp + c->p.sbytes + c->p.zbytes + 8 * (size_t)r;
            for (int64_t k = k0; k < k0 + c->p.g; k += 16, cp += 64) {
                const __m256 lo = _mm256_permutex2var_ps(tl, nib8(cp, sh), th);
                const __m256 hi = _mm256_permutex2var_ps(tl, nib8(cp + 4, sh), th);
                _Pragma("GCC unroll 8") for (int i = 0; i < NT; i++) {
                    const float *xi = (const float *)(const void *)(y + (size_t)i * ys) + k;
                    acc[i] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(xi + 8), _mm256_fmadd_ps(lo, _mm256_loadu_ps(xi), acc[i]));
                }
            }
        } else {
            const __m256 s = _mm256_set1_ps(sv[r]), z = _mm256_set1_ps(zv[r]);
            const uint8_t *cp = gp + c->p.sbytes + c->p.zbytes + 8 * (size_t)r;
            for (int64_t k = k0; k < k0 + c->p.g; k += 8, cp += 64) {
                const __m256 wv = dec8(kind, has_z, cp, s, z);
                _Pragma("GCC unroll 8") for (int i = 0; i < NT; i++)
                    acc[i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps((const float *)(const void *)(y + (size_t)i * ys) + k), acc[i]);
            }
        }
    }
    for (int i = 0; i < NT; i++)
        out[(size_t)i * ldo] = qk_hsum8_ps(acc[i]);
}

#define TOKS_NT(K, Z)                                                                                          \
    switch (mt) {                                                                                              \
    case 1: toks(c, K, Z, rg, r, yt, ys, 1, o, ldo); break;                                                    \
    case 2: toks(c, K, Z, rg, r, yt, ys, 2, o, ldo); break;                                                    \
    case 3: toks(c, K, Z, rg, r, yt, ys, 3, o, ldo); break;                                                    \
    case 4: toks(c, K, Z, rg, r, yt, ys, 4, o, ldo); break;                                                    \
    case 5: toks(c, K, Z, rg, r, yt, ys, 5, o, ldo); break;                                                    \
    case 6: toks(c, K, Z, rg, r, yt, ys, 6, o, ldo); break;                                                    \
    case 7: toks(c, K, Z, rg, r, yt, ys, 7, o, ldo); break;                                                    \
    default: toks(c, K, Z, rg, r, yt, ys, 8, o, ldo); break;                                                   \
    }

/* CALL(K, Z) with the packing's kind as a constant K and, for the 8-bit
 * integer kinds, whether it has zero points as a constant Z. */
#define PK_BY_KIND(c, CALL)                                                                                    \
    switch ((c)->p.kind) {                                                                                     \
    case PK_T4: CALL(PK_T4, false); break;                                                                     \
    case PK_FP4: CALL(PK_FP4, false); break;                                                                   \
    case PK_FP8: CALL(PK_FP8, false); break;                                                                   \
    case PK_FP8X: CALL(PK_FP8X, false); break;                                                                 \
    case PK_I8:                                                                                                \
        if ((c)->p.has_z)                                                                                      \
            CALL(PK_I8, true);                                                                                 \
        else                                                                                                   \
            CALL(PK_I8, false);                                                                                \
        break;                                                                                                 \
    default:                                                                                                   \
        if ((c)->p.has_z)                                                                                      \
            CALL(PK_P8, true);                                                                                 \
        else                                                                                                   \
            CALL(PK_P8, false);                                                                                \
        break;                                                                                                 \
    }

/* ---- prompt batches: a span of a row group decoded once --------------------------
 * Batches of more than 12 tokens decode each row group's span of columns
 * to floats once (the same operations as rows8 / rows8w / toks: the
 * reference's weights) and hand them to avx512_float.c's tile, whose every
 * output is THE FLOAT-DOT ORDER over the row's weights and the token's
 * floats: the same bits as toks, which decodes each chunk again for every
 * 8 tokens. */
typedef struct {
    qk_x86_wf_src s;
    const pk_ctx *c;
    int64_t rg0; /* the tile's first row group */
} wq_src;

/* Row group g's columns [k0, k0 + nc) as floats into wf (x86.h's layout),
 * kind K (has zeros Z). */
QK_TARGET_W512 __attribute__((always_inline)) static inline void wq_decode_k(const pk_ctx *c, const int K, const bool Z,
                                                                             int64_t rg, int64_t k0, int nc, float *wf)
{
    const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const int64_t G = c->p.g;
    const uint8_t *base = c->base + (size_t)rg * c->p.rgblk;
    for (int64_t j = k0 / G; j * G < k0 + nc; j++) {
        const uint8_t *gp = base + (size_t)j * c->p.gblk, *cp = gp + c->p.sbytes + c->p.zbytes;
        const int64_t a = j * G > k0 ? j * G : k0, b = (j + 1) * G < k0 + nc ? (j + 1) * G : k0 + nc;
        if (K == PK_T4 || K == PK_FP4) {
            __m256 tl[8], th[8];
            float sv[8], zv[8];
            if (K == PK_T4) {
                _mm256_storeu_ps(sv, scales8(c, gp));
                _mm256_storeu_ps(zv, zeros8(c, gp));
            }
            _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) {
                if (K == PK_FP4)
                    fp4_table(c, gp[r], &tl[r], &th[r]);
                else
                    table16(c, sv[r], zv[r], &tl[r], &th[r]);
            }
            for (int64_t k = a; k < b; k += 16) {
                const uint8_t *kp = cp + (size_t)((k - j * G) / 16) * 64;
                float *w = wf + 8 * (size_t)(k - k0);
                _Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) {
                    _mm256_storeu_ps(w + 16 * (r / 2) + 8 * (r % 2), _mm256_permutex2var_ps(tl[r], nib8(kp + 8 * r, sh), th[r]));
                    _mm256_storeu_ps(w + 64 + 16 * (r / 2) + 8 * (r % 2),
                                     _mm256_permutex2var_ps(tl[r], nib8(kp + 8 * r + 4, sh), th[r]));
                }
            }
        } else {
            float sv[8], zv[8];
            _mm256_storeu_ps(sv, scales8(c, gp));
            _mm256_storeu_ps(zv, zeros8(c, gp));
            __m512 sp[4], zp[4];
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
                sp[i] = halves(sv[2 * i], sv[2 * i + 1]);
                zp[i] = halves(zv[2 * i], zv[2 * i + 1]);
            }
            for (int64_t k = a; k < b; k += 8) {
                const uint8_t *kp = cp + (size_t)((k - j * G) / 8) * 64;
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
                    _mm512_storeu_ps(wf + 8 * (size_t)(k - k0) + 16 * i, dec16(K, Z, kp + 16 * i, sp[i], zp[i]));
            }
        }
    }
}

QK_TARGET_W512 static void wq_src_decode(const qk_x86_wf_src *s, int g, int64_t k0, int nc, float *wf)
{
    const wq_src *w = (const wq_src *)(const void *)s;
    const pk_ctx *c = w->c;
    const int64_t rg = w->rg0 + g;
#define DECODE(K, Z) wq_decode_k(c, K, Z, rg, k0, nc, wf)
    PK_BY_KIND(c, DECODE)
#undef DECODE
}

/* The stream of row group g's scale groups that span [k0, k0 + nc). */
static const uint8_t *wq_src_bytes(const qk_x86_wf_src *s, int g, int64_t k0, int nc, size_t *len)
{
    const wq_src *w = (const wq_src *)(const void *)s;
    const pk_ctx *c = w->c;
    const int64_t j0 = k0 / c->p.g, j1 = (k0 + nc - 1) / c->p.g;
    *len = (size_t)(j1 - j0 + 1) * c->p.gblk;
    return c->base + (size_t)(w->rg0 + g) * c->p.rgblk + (size_t)j0 * c->p.gblk;
}

/* Rows [r0, r0 + nr) against nt tokens, kind K (has zeros Z). */
#define PK_TILE(K, Z)                                                                                          \
    do {                                                                                                       \
        for (int64_t rg = r0 / 8; rg * 8 < r0 + nr; rg++) {                                                    \
            const int64_t a = rg * 8 > r0 ? rg * 8 : r0, b = rg * 8 + 8 < r0 + nr ? rg * 8 + 8 : r0 + nr;       \
            if (nt == 1) {                                                                                     \
                float o8[8];                                                                                   \
                if (K == PK_T4 || K == PK_FP4)                                                                 \
                    rows8(c, K, rg, (const float *)y, o8);                                                     \
                else                                                                                           \
                    rows8w(c, K, Z, rg, (const float *)y, o8);                                                 \
                for (int64_t r = a; r < b; r++)                                                                \
                    out[r - r0] = o8[r - rg * 8];                                                              \
                continue;                                                                                      \
            }                                                                                                  \
            for (int64_t rr = a; rr < b; rr++)                                                                 \
                for (int t0 = 0; t0 < nt; t0 += 8) {                                                           \
                    const int mt = nt - t0 < 8 ? nt - t0 : 8, r = (int)(rr - rg * 8);                          \
                    const uint8_t *yt = (const uint8_t *)y + (size_t)t0 * ys;                                  \
                    float *o = out + (size_t)t0 * ldo + (size_t)(rr - r0);                                     \
                    TOKS_NT(K, Z)                                                                              \
                }                                                                                              \
        }                                                                                                      \
    } while (0)

QK_TARGET_W512 static void pk_tile_toks(const pk_ctx *c, int64_t r0, int nr, const void *y, size_t ys, int nt,
                                        float *out, size_t ldo)
{
    PK_BY_KIND(c, PK_TILE)
}

/* Rows [r0, r0 + nr) against nt tokens: batches of more than 12 tokens
 * take their whole row groups through the decoded-span tile (the same
 * bits), the rows of a group cut by the tile's ends through toks. */
QK_TARGET_W512 static void pk_tile(const pk_ctx *c, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                                   size_t ldo)
{
    const int64_t ga = (r0 + 7) / 8, gb = (r0 + nr) / 8;
    if (nt <= 12 || gb <= ga) {
        pk_tile_toks(c, r0, nr, y, ys, nt, out, ldo);
        return;
    }
    const bool four = c->p.kind == PK_T4 || c->p.kind == PK_FP4;
    const wq_src src = {{wq_src_decode, wq_src_bytes, four ? 16 : 8}, c, ga};
    qk_x86_avx512_wf_tile(c->p.g * c->p.ng, (int)(gb - ga), &src.s, y, ys, nt, out + (ga * 8 - r0), ldo);
    if (ga * 8 > r0)
        pk_tile_toks(c, r0, (int)(ga * 8 - r0), y, ys, nt, out, ldo);
    if (r0 + nr > gb * 8)
        pk_tile_toks(c, gb * 8, (int)(r0 + nr - gb * 8), y, ys, nt, out + (gb * 8 - r0), ldo);
}

/* w->packed is this level's packing of w. */
static bool pk_ready(const qk_wq *w, pk_ctx *c)
{
    qk_wq_pack_head h;
    if (!qk_wq_act_float(w->act) || !qk_wq_packed_as(w, PK_MAGIC, &h) || h.kind != pk_kind(w) ||
        !pk_geo_of(w, h.kind, &c->p))
        return false;
    c->stype = w->s.type;
    c->code_offset = w->code_offset;
    c->bias = w->bias;
    for (int i = 0; i < 16; i++)
        c->qlut[i] = (float)(i - w->code_offset);
    c->base = w->packed + head_bytes(h.kind);
    c->t4 = (const float *)(const void *)(w->packed + 64);
    return true;
}

static void avx512_wq_tile(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                           size_t ldo)
{
    pk_ctx c;
    if (w->act == QK_A_I8 && qk_x86_avx512_i8_tile(w, r0, nr, y, ys, nt, out, ldo))
        return;
    if (w->act == QK_A_NV4 && qk_x86_avx512_nv4_tile(w, r0, nr, y, ys, nt, out, ldo))
        return;
    if ((w->act == QK_A_F8B || w->act == QK_A_F8G) && qk_x86_avx512_f8_tile(w, r0, nr, y, ys, nt, out, ldo))
        return;
    if (pk_ready(w, &c)) {
        pk_tile(&c, r0, nr, y, ys, nt, out, ldo);
        return;
    }
    qk_x86_avx2_wq_tile(w, r0, nr, y, ys, nt, out, ldo);
}

#define PK_ROW(t) {.id = t, .wq_tile = avx512_wq_tile, .wq_pack = avx512_wq_pack}

const qk_wq_ops qk_x86_avx512_wq[] = {
    PK_ROW(QK_W_FP8),  PK_ROW(QK_W_INT8), PK_ROW(QK_W_PACK), PK_ROW(QK_W_NVFP4), PK_ROW(QK_W_MXFP4),
    PK_ROW(QK_W_AWQ),  PK_ROW(QK_W_GPTQ), PK_ROW(QK_W_MLX),  {.id = QK_A_I8, .wq_act = qk_x86_avx512_act_i8},
    {.id = QK_A_FP8, .wq_act = qk_x86_avx512_act_fp8},
    {.id = QK_A_NV4, .wq_act = qk_x86_avx512_act_nv4},
    {.id = QK_A_F8B, .wq_act = qk_x86_avx512_act_f8b}, {.id = QK_A_F8G, .wq_act = qk_x86_avx512_act_f8g},
    {.id = -1},
};
#endif
