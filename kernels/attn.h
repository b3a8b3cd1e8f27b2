/* attn.h - the inner loops of attention: query-key scores, a weighted
 * value accumulation, scaling, and F16 cache rows to float.
 *
 * One order, the same bits at every CPU level (issue #10):
 * - score(q, k, n): eight float lanes, lane l takes the elements i = l mod 8
 *   of the first n - n%8 in increasing i, each step a fused multiply-add
 *   (fmaf); the lanes are summed as ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7));
 *   the last n%8 products follow one at a time, fused, in index order.
 * - axpy(acc, w, v, n): acc[i] = fmaf(w, v[i], acc[i]).
 * - scale(acc, s, n): acc[i] *= s.
 * - f16_row(h, f, n): f[i] = h[i] as float (exact).
 * (lib/forward.c converts F16 cache rows with f16_row first.)  kernels/x86/
 * avx2_attn.c does the same arithmetic in vectors; tests/test_simd.c
 * compares them with memcmp. */
#ifndef QK_ATTN_H
#define QK_ATTN_H

#include <stdint.h>

typedef struct qk_attn_kernels {
    float (*score_f32)(const float *q, const float *k, int n);
    void (*axpy_f32)(float *acc, float w, const float *v, int n);
    void (*scale)(float *acc, float s, int n);
    void (*f16_row)(const uint16_t *h, float *f, int n); /* exact conversion */
    /* out[j] = score_f32(q[j], k, n) for j < nq (several independent chains) */
    void (*score_f32_n)(const float *const *q, int nq, const float *k, int n, float *out);
} qk_attn_kernels;

/* The kernels of the active CPU level (cpu.h), or of `level` (NULL when
 * the CPU lacks it). */
const qk_attn_kernels *qk_attn_kernels_active(void);
const qk_attn_kernels *qk_attn_kernels_at(int level);

#endif
