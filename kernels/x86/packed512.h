/* packed512.h - what the AVX-512 kernels of repacked weights share
 * (avx512_packed.c: Q4_0, Q8_0; avx512_packed_k.c: Q4_K, Q5_K, Q6_K,
 * IQ4_XS): the packed groups of eight rows are the AVX2 level's
 * (avx2_packed.c, packed_k.h) or their byte-offset variants, and one 512-bit
 * vector holds two groups side by side: int32 or float lane r (r < 8) is
 * row r of group g, lane 8 + r row r of group g + 1.  Each lane runs its
 * row's reference steps, so the results are the scalar reference's bits
 * (test_matmul runs every level the CPU has).
 *
 * The tile driver (packed512_tile) takes the groups two at a time (an odd
 * last group pairs with itself, its upper lanes dropped), tokens up to
 * PT8 at a time, blocks in spans whose activation side is prepared once
 * for every pair of the tile.  Where the type has an AMX kind and the CPU
 * AMX, the first nt - nt % 16 tokens go through amx_packed.c instead. */
#ifndef QK_X86_PACKED512_H
#define QK_X86_PACKED512_H

#include "kernels/x86/simd_common.h"

#ifdef QK_X86
#include <string.h>

#define QK_TARGET_V512 QK_TARGET_AVX512VNNI

enum { PT8 = 8, PAIRS = 8 };

/* The 32 bytes at a and b (a group's vector and the next group's) as one
 * vector: a in the low half. */
QK_TARGET_V512 static inline __m512i ld2(const uint8_t *a, const uint8_t *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

/* The 16 bytes at a and b as one 256-bit vector, a in the low half. */
QK_TARGET_V512 static inline __m256i ld2h(const uint8_t *a, const uint8_t *b)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                   _mm_loadu_si128((const __m128i *)b), 1);
}

/* Eight f16 at a and eight at b (two groups' row scales) as 16 floats. */
QK_TARGET_V512 static inline __m512 ld2_f16(const uint8_t *a, const uint8_t *b)
{
    return _mm512_cvtph_ps(ld2h(a, b));
}

/* Q5_0's packing (avx512_packed.c): the fifth-bit masks of chunk j of the
 * pair ga, gb (hi 0: low nibbles, 1: high), a's in the low 32 bits. */
QK_TARGET_V512 static inline __mmask64 q5_mask(const uint8_t *ga, const uint8_t *gb, int j, int hi)
{
    const size_t at = 16 + 4 * 32 + 8 * (size_t)j + 4 * (size_t)hi;
    return _cvtu64_mask64((uint64_t)qk_ld_u32(ga + at) | (uint64_t)qk_ld_u32(gb + at) << 32);
}

/* The 4 bytes at p in every int32 lane. */
QK_TARGET_V512 static inline __m512i bc4(const uint8_t *p) { return _mm512_set1_epi32((int)qk_ld_u32(p)); }

/* QK_BY_NT8(nt, call), QK_BY_NT6: `call` with the constant N = nt (1..8,
 * 1..6). */
#define QK_NT_CASES5(call)                   \
    case 1: { enum { N = 1 }; call; } break; \
    case 2: { enum { N = 2 }; call; } break; \
    case 3: { enum { N = 3 }; call; } break; \
    case 4: { enum { N = 4 }; call; } break; \
    case 5: { enum { N = 5 }; call; } break;
#define QK_BY_NT6(nt, call)                   \
    switch (nt) {                             \
    QK_NT_CASES5(call)                        \
    default: { enum { N = 6 }; call; } break; \
    }
#define QK_BY_NT8(nt, call)                   \
    switch (nt) {                             \
    QK_NT_CASES5(call)                        \
    case 6: { enum { N = 6 }; call; } break;  \
    case 7: { enum { N = 7 }; call; } break;  \
    default: { enum { N = 8 }; call; } break; \
    }

/* The running sums of one pair of groups and up to PT8 tokens: f, and for
 * the K-quants whose reference keeps eight lane sums, s[0..7]. */
typedef struct {
    __m512 f[PT8], s[PT8][8];
} pair_state;

/* prep: the activation side of blocks [b0, b0 + nb) of the nt rows y into
 * act; span: blocks [0, nb) of the pair ga, gb (each at its span's first
 * block) against act, into st. */
typedef void (*prep512_fn)(const uint8_t *const y[PT8], int nt, int64_t b0, int nb, void *act);
typedef void (*span512_fn)(const uint8_t *ga, const uint8_t *gb, int nt, int nb, const void *act,
                           pair_state *st);

typedef struct {
    int64_t cols;   /* columns */
    int blk;        /* columns per block (32, or 256 for the super-blocks) */
    size_t bsize;   /* bytes of one packed block of a group */
    int kc;         /* blocks per span */
    int pt;         /* tokens per span call (<= PT8) */
    int lanes;      /* the state's eight lane sums are used */
    int amx;        /* amx_packed.c's kind for the first nt - nt % 16 tokens, or QK_AMX_NONE */
    prep512_fn prep;
    span512_fn span;
    void *act;
} packed512;

/* The packed_tile of type id in a lower level's table (NULL: none). */
static inline qk_packed_tile_fn packed_tile_in(const qk_pack_ops *t, int id)
{
    for (; t->id >= 0; t++)
        if (t->id == id)
            return t->packed_tile;
    return NULL;
}

/* ng packed groups at xp against nt activation rows (rows of ys bytes):
 * out[t * ldo + 8g + r].  Tokens k->pt at a time, PAIRS pairs of groups
 * sharing each span's activation side; each pair's state zeroed before its
 * first span and summed, f (+ s[0] + ... + s[7]), right after its last. */
QK_TARGET_V512 static inline void packed512_tile(const packed512 *k, const void *xp, int ng, const void *y,
                                                 size_t ys, int nt, float *out, size_t ldo)
{
    const int done = qk_x86_amx_tile32(k->amx, k->cols, xp, ng, y, ys, nt, out, ldo);
    y = (const uint8_t *)y + (size_t)done * ys, nt -= done, out += (size_t)done * ldo;
    const int64_t nb = k->cols / k->blk;
    const size_t gsize = (size_t)nb * k->bsize;
    pair_state st[PAIRS];
    const int npairs = (ng + 1) / 2;
    for (int p0 = 0; p0 < npairs; p0 += PAIRS) {
        const int pn = npairs - p0 < PAIRS ? npairs - p0 : PAIRS;
        for (int t0 = 0; t0 < nt; t0 += k->pt) {
            const int q = nt - t0 < k->pt ? nt - t0 : k->pt;
            const uint8_t *yr[PT8];
            for (int t = 0; t < PT8; t++)
                yr[t] = (const uint8_t *)y + (size_t)(t0 + (t < q ? t : 0)) * ys;
            for (int64_t b0 = 0; b0 < nb; b0 += k->kc) {
                const int kb = (int)(nb - b0 < k->kc ? nb - b0 : k->kc);
                k->prep(yr, q, b0, kb, k->act);
                for (int pi = 0; pi < pn; pi++) {
                    const int g = 2 * (p0 + pi);
                    const uint8_t *ga = (const uint8_t *)xp + (size_t)g * gsize + (size_t)b0 * k->bsize;
                    const uint8_t *gb = g + 1 < ng ? ga + gsize : ga;
                    if (b0 == 0) /* the pair's sums start here, while its state is in L1 */
                        for (int t = 0; t < q; t++) {
                            st[pi].f[t] = _mm512_setzero_ps();
                            for (int l = 0; k->lanes && l < 8; l++)
                                st[pi].s[t][l] = _mm512_setzero_ps();
                        }
                    k->span(ga, gb, q, kb, k->act, &st[pi]);
                    if (b0 + kb < nb)
                        continue;
                    /* the last span: the pair's results at once, its state still in L1 */
                    for (int t = 0; t < q; t++) {
                        __m512 sum = st[pi].f[t];
                        for (int l = 0; k->lanes && l < 8; l++)
                            sum = _mm512_add_ps(sum, st[pi].s[t][l]);
                        /* (a masked store is several times slower here) */
                        float *o = out + (size_t)(t0 + t) * ldo + (size_t)(8 * g);
                        if (g + 1 < ng)
                            _mm512_storeu_ps(o, sum);
                        else
                            _mm256_storeu_ps(o, _mm512_castps512_ps256(sum));
                    }
                }
            }
        }
    }
}

#endif
#endif
