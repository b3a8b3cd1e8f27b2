/* gptq_ops.h - the double and float loops of GPTQ (lib/quant/gptq.c), one
 * table per CPU level.
 *
 * Every kernel computes each output element by the scalar reference's
 * operations in the reference's order (kernels/gptq_ops.c; the build has
 * -ffp-contract=off, and the SIMD kernels multiply and add separately), so
 * every level returns the same bits: the vector kernels only work on several
 * independent elements at once (tests/test_gptq.c checks it with memcmp).
 *
 * dot4(a, b, n) is the reference's dot product: four partial sums, sum k
 * taking a[m] * b[m] for m = k, k + 4, ... in order while m + 4 <= n rounds
 * the count down to a multiple of 4, the last n % 4 products added to sum 0,
 * then (s0 + s1) + (s2 + s3).  An AVX2 register of four doubles holds the
 * four sums exactly. */
#ifndef QK_GPTQ_OPS_H
#define QK_GPTQ_OPS_H

#include <stdint.h>

typedef struct qk_gptq_ops {
    /* The reversed Cholesky factor V (H = V V^T, V upper, a row-major n x n):
     * for every row r in [r0, r1) and, per row, every column j from jhi - 1
     * down to jlo (r1 <= jlo, or one row r0 = r1 - 1 with jlo > r0):
     *     a[r][j] = (a[r][j] - dot4(a[r] + j + 1, a[j] + j + 1, n - j - 1)) / a[j][j]
     * Rows j >= jlo and row r's columns >= jhi must be final. */
    void (*chol_rows)(double *a, int64_t n, int64_t r0, int64_t r1, int64_t jlo, int64_t jhi);
    /* U = V^-1 (upper), columns [j0, j0 + w) into p (n x w, row-major,
     * p[i * w + j - j0] = U[i][j], 0 below the diagonal), by back substitution:
     *     U[j][j] = 1 / v[j][j];  U[i][j] = -dot4(v[i] + i + 1, U[i + 1 ..][j], j - i) / v[i][i], i < j */
    void (*inv_cols)(const double *v, int64_t n, double *p, int64_t j0, int64_t w);
    /* GPTQ's error feedback on a tile of 16 rows (w and e hold 16 floats per
     * column, one per row): for p < np, then k < nk in order,
     *     w[p * 16 + r] -= u[k * ldu + p] * e[k * 16 + r]      (float, r < 16) */
    void (*sub16)(float *w, const float *u, int64_t ldu, const float *e, int64_t nk, int64_t np);
} qk_gptq_ops;

/* The reference's dot product (above). */
double qk_gptq_dot4(const double *a, const double *b, int64_t n);

/* The kernels of the active CPU level. */
const qk_gptq_ops *qk_gptq_ops_active(void);
/* Those of a level (the scalar reference for QK_CPU_SCALAR), NULL when unsupported. */
const qk_gptq_ops *qk_gptq_ops_at(int level);

#endif
