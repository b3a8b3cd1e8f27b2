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
 * in the value step; tests/test_attn.c compares them with memcmp. */
#ifndef QK_ATTN_H
#define QK_ATTN_H

#include <stdint.h>

#define QK_ATT_TILE 64

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
} qk_attn_kernels;

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
