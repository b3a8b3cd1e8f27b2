/* attn.h - the inner loops of attention, for a block of queries that share
 * one KV head, one tile of QK_ATT_TILE keys at a time.
 *
 * The arithmetic is that of llama.cpp's tiled CPU flash-attention kernel as
 * built for AVX2 (ggml_compute_forward_flash_attn_ext_tiled, its simd_gemm
 * and ggml_vec_soft_max_f32), so that prompt batches score as llama.cpp's:
 * - score(q, k) = scale * s, s a fused chain over d = 0..hd-1 in order
 *   starting from 0: s = fmaf(q[d], k[d], s);
 * - per query and tile, over the keys it may see (position <= its own):
 *   tile max m (x > m ? x : m from -inf); if m is -inf the tile is skipped;
 *   M' = fmaxf(M, m), and when M' > M the accumulator and S are scaled by
 *   expf(M - M') (the C library's expf);
 *   w = qk_attn_expf(s - M') for those keys, 0 for the others;
 *   S = (float)((double)S + sum), sum the double sum over groups of 8 keys
 *   (k = 8g..8g+7) of each group's float tree ((w0+w4)+(w2+w6))+((w1+w5)+(w3+w7));
 * - acc[d] = fmaf(w, v[d], acc[d]) for the keys of the tile in order;
 * - at the end out = acc * (S == 0 ? 0 : 1/S).
 * qk_attn_expf is ggml_v_expf's AVX2 approximation of expf (after ARM's
 * optimized-routines: a degree-5 polynomial on a reduced argument, 1.5 ulp),
 * written out operation by operation so every CPU level gives its bits.
 *
 * Layout (lib/engine/forward.c fills the buffers): nqp = queries rounded up to a
 * multiple of 8; qt[d*nqp + i] the queries transposed; kf[k*hd + d] and
 * vf[k*hdv + d] the tile's keys and values as float rows; st[k*nqp + i] the
 * scores and then the weights.  The SIMD levels (kernels/x86/avx2_attn.c)
 * work across queries in the score and softmax steps and across dimensions
 * in the value step; tests/test_attn.c compares them with memcmp.
 *
 * A block of few queries (a decode step: one token, a KV group's heads)
 * leaves most lanes of a queries-in-lanes vector empty and its few chains
 * wait on the FMA latency.  scores4 computes the same scores, each the same
 * chain over d, with lanes (query, key) for four queries and four keys: its
 * keys come from k4_rows, which writes a tile's keys in groups of four,
 * interleaved by dimension:
 *   k4[((k/4)*hd + qk_attn_k4_pos(d, hd))*4 + k%4] = key k, dimension d,
 * zero for the keys nk .. nk rounded up to 4.  Within each full block of
 * sixteen dimensions the positions are those of a 4x4 transpose (what
 * transposing four rows inside 128-bit lanes leaves); the dimensions past
 * the last full block keep their place.  A level without them (NULL) uses
 * scores on float rows; the bits are the same either way. */
#ifndef QK_ATTN_H
#define QK_ATTN_H

#include <stddef.h>
#include <stdint.h>

#define QK_ATT_TILE 64
#define QK_ATT_K4_MAXD 256 /* scores4's largest head size */

typedef struct qk_attn_kernels {
    /* st[k*nqp + i] = scale * score(qt[.. i], kf[k]) for k < nk, i < nqp */
    void (*scores)(const float *qt, int nqp, const float *kf, int nk, int hd, float scale,
                   float *st);
    /* One tile's softmax step for nqp queries (pos[i] < 0: a padding query);
     * keys p0 .. p0+nk-1.  st becomes the weights (rows nk..QK_ATT_TILE-1
     * untouched and unused); M, S updated; ms[i] the factor the query's
     * accumulator must be scaled by (1 when it did not move). */
    void (*softmax)(float *st, int nqp, int nk, int p0, const int *pos, float *M, float *S,
                    float *ms);
    /* acc[i*hdv + d] += weights of keys k < nk times vf[k*hdv + d], fused, k
     * in order, for queries i < nq */
    void (*pv)(float *acc, int nq, int hdv, const float *st, int nqp, const float *vf, int nk);
    void (*scale)(float *acc, float s, int n);
    void (*f16_row)(const uint16_t *h, float *f, int n); /* exact conversion */
    /* keys nk (<= QK_ATT_TILE) rows of hd elements, `stride` elements apart,
     * F16 (f16 != 0) or float, into k4 (see above) */
    void (*k4_rows)(const void *rows, int f16, size_t stride, int nk, int hd, float *k4);
    /* scores(qt, nqp, ...) with the keys in k4's layout (hd <= QK_ATT_K4_MAXD)
     * for the queries i < nq; the rows nk .. nk rounded up to 4 and the
     * queries nq rounded up to 4 .. nqp - 1 may be written too (unused) */
    void (*scores4)(const float *qt, int nqp, int nq, const float *k4, int nk, int hd, float scale, float *st);
} qk_attn_kernels;

/* The SIMD levels' k4_rows for the dimensions d0 .. hd-1 past the last full
 * block of sixteen (their place kept) of one group of four keys, nr of them
 * real, at rows (stride elements apart) into the group's k4 at dst. */
void qk_attn_k4_cols(const void *rows, int f16, size_t stride, int nr, int d0, int hd, float *dst);

/* A SIMD level's scores4 over ng groups of four keys: TILE(g, G) for G
 * groups from group g, G = 8, then 4, 2, 1 for the rest. */
#define QK_ATT_K4_GROUPS(ng, TILE)                                                                          \
    do {                                                                                                    \
        int g_ = 0;                                                                                         \
        for (; g_ + 8 <= (ng); g_ += 8)                                                                     \
            TILE(g_, 8);                                                                                    \
        if (g_ + 4 <= (ng))                                                                                 \
            TILE(g_, 4), g_ += 4;                                                                           \
        if (g_ + 2 <= (ng))                                                                                 \
            TILE(g_, 2), g_ += 2;                                                                           \
        if (g_ < (ng))                                                                                      \
            TILE(g_, 1);                                                                                    \
    } while (0)

/* A SIMD level's k4_rows: BLOCK(g, nr, d0, dst) converts the block of
 * sixteen dimensions from d0 of the nr (<= 4) rows at g into the group's
 * k4 block at dst; the dimensions past the last block go through
 * qk_attn_k4_cols. */
#define QK_ATT_K4_ROWS(rows, f16, stride, nk, hd, k4, BLOCK)                                                \
    do {                                                                                                    \
        const int df_ = (hd) / 16 * 16;                                                                     \
        for (int k0_ = 0; k0_ < (nk); k0_ += 4) {                                                           \
            const int nr_ = (nk) - k0_ < 4 ? (nk) - k0_ : 4;                                                \
            const char *g_ = (const char *)(rows) + (size_t)k0_ * (stride) * ((f16) ? 2 : 4);              \
            float *dst_ = (k4) + (size_t)k0_ * (hd);                                                        \
            for (int d0_ = 0; d0_ < df_; d0_ += 16)                                                         \
                BLOCK(g_, nr_, d0_, dst_ + (size_t)d0_ * 4);                                                \
            qk_attn_k4_cols(g_, f16, stride, nr_, df_, hd, dst_);                                           \
        }                                                                                                   \
    } while (0)

/* A SIMD level's scores4 chain: STEP(d, p) for d = 0 .. hd-1 in order, p
 * dimension d's k4 position (constant in the unrolled block of sixteen). */
#define QK_ATT_K4_DIMS(hd, STEP)                                                                            \
    do {                                                                                                    \
        const int df_ = (hd) / 16 * 16;                                                                     \
        for (int d0_ = 0; d0_ < df_; d0_ += 16)                                                             \
            _Pragma("GCC unroll 16") for (int m_ = 0; m_ < 16; m_++)                                        \
                STEP(d0_ + m_, d0_ + 4 * (m_ & 3) + (m_ >> 2));                                             \
        for (int d_ = df_; d_ < (hd); d_++)                                                                 \
            STEP(d_, d_);                                                                                   \
    } while (0)

/* Where dimension d of a key sits in its group of four (see above). */
static inline int qk_attn_k4_pos(int d, int hd)
{
    return d < hd / 16 * 16 ? (d & ~15) + 4 * (d & 3) + ((d & 15) >> 2) : d;
}

/* The scalar form of the vector exp (see above). */
float qk_attn_expf(float x);

/* The scalar value step (pv) for the columns d0 .. hdv-1 only: the SIMD
 * levels' tail of columns that fill no vector. */
void qk_attn_pv_cols(float *acc, int nq, int hdv, int d0, const float *st, int nqp, const float *vf, int nk);

/* The kernels of the active CPU level (cpu.h), or of `level` (NULL when
 * the CPU lacks it). */
const qk_attn_kernels *qk_attn_kernels_active(void);
const qk_attn_kernels *qk_attn_kernels_at(int level);

#endif
