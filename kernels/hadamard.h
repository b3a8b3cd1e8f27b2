/* hadamard.h - the Walsh-Hadamard transform of compressed-tensors'
 * "hadamard" transforms (transform/factory/hadamard.py): Sylvester's
 * matrix H of order n (a power of two, deterministic_hadamard_matrix:
 * H_2n = [[H, H], [H, -H]], entries +-1, symmetric), applied as
 * (x @ H) / sqrt(n) on each block of n consecutive elements (a block-
 * diagonal matrix when the row is longer than n: _multihead_matmul).
 *
 * Precision: compressed-tensors computes in the scheme's precision (the
 * weight and value cast to it, the product divided by sqrt(n) there, the
 * result cast back to the value's dtype).  qk_hadamard_rows_f64 is the
 * float64 rule (SpinQuant's default and every fused weight): the butterflies
 * in double, which sums n floats exactly unless their exponents span more
 * than 53 - 24 - log2(n) bits, then / sqrt(n) and one rounding to float, so
 * it equals torch's float64 matmul bit for bit except in that corner.
 * qk_hadamard_rows_f32 is the float32 rule: butterflies and division in
 * float (torch's sgemm sums in another order: within a few ulp). */
#ifndef QK_HADAMARD_H
#define QK_HADAMARD_H

#include <stdbool.h>
#include <stdint.h>

/* n is a power of two >= 1. */
static inline bool qk_is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

/* In place on n_rows rows of `cols` floats (stride `stride`), each block of
 * n elements (n divides cols; n a power of two). */
/* 0, or -1 when out of memory (the f64 rules' scratch above 1024). */
int qk_hadamard_rows_f64(float *x, int64_t n_rows, int64_t cols, int64_t stride, int n);
void qk_hadamard_rows_f32(float *x, int64_t n_rows, int64_t cols, int64_t stride, int n);

/* The same transform applied down the columns: every column of a
 * [rows, cols] row-major matrix, in blocks of n rows (W <- H W / sqrt(n),
 * a weight's output side), float64 rule. */
int qk_hadamard_cols_f64(float *x, int64_t rows, int64_t cols, int n);

/* Sylvester's matrix of order n, unnormalized (+-1), row-major n x n. */
void qk_hadamard_matrix(double *h, int n);

/* Whether h (n x n, row-major) is Sylvester's matrix of order n. */
bool qk_hadamard_is_sylvester(const double *h, int n);

#endif
