/* gram.h - sums of outer products of activation rows, for the Hessians of
 * calibration (lib/quant/gptq.h): for rows x[t] (n rows of d floats, in
 * order) and the rows i0 <= i < i1 of a d x d double matrix s,
 *     s[i][j] += (double)x[t][i] * (double)x[t][j]   for every j >= i,
 * each element adding its rows one after another.  A product of two floats
 * is exact in double, so a fused multiply-add rounds as the separate
 * multiply and add do: every level returns the same bits (the AVX2 kernel,
 * kernels/x86/avx2_gram.c, keeps four rows of s in registers, the AVX-512
 * one, avx512_gram.c, eight rows of 16 columns). */
#ifndef QK_GRAM_H
#define QK_GRAM_H

#include <stddef.h>
#include <stdint.h>

typedef void (*qk_gram_fn)(double *s, int64_t d, const float *x, int64_t n, int64_t i0, int64_t i1);

/* The kernel of the active CPU level. */
qk_gram_fn qk_gram_kernel(void);
/* The kernel of a level (the scalar reference for QK_CPU_SCALAR), NULL when unsupported. */
qk_gram_fn qk_gram_kernel_at(int level);

#endif
