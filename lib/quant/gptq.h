/* gptq.h - GPTQ (Frantar, Ashkboos, Hoefler, Alistarh 2022: "GPTQ: accurate
 * post-training quantization for generative pre-trained transformers";
 * AutoGPTQ's gptq.py, llm-compressor's gptq_quantize.py) into GGUF block
 * types.
 *
 * For a weight W (rows x cols) whose products see inputs x, the Hessian of
 * the layer's squared output error is H = 2/n sum x x^T.  Columns are
 * quantized one at a time; the error of column j, divided by the diagonal
 * of the upper Cholesky factor U of H^-1, is fed back into the columns not
 * yet quantized through row j of U, so they compensate for it.  Here:
 *  - dampening: damp * mean(diag H) is added to the diagonal (0.01); a
 *    column whose input is always zero gets H_jj = 1 and weight 0;
 *  - act-order: columns are taken by decreasing H_jj when act_order is set;
 *  - lazy batches of 128 columns: the feedback inside a batch is applied at
 *    once, to the later columns at the end of the batch;
 *  - the GGUF block scales: when a column of a block (32 or 256 columns of
 *    one row) comes up first, the type's own encoder (the table's quantize,
 *    with the importance diag(H)/2 = mean x^2, as an imatrix) runs on the
 *    block's current, error-updated weights - every pending feedback of the
 *    batch applied first - and fixes the block's scales; then each column is
 *    rounded to the nearest value of its block's grid (kernels/grid.h).
 *    The legacy types' encoders weigh a block by sigma2, the mean square of
 *    the row they are given: they get the block and a pad block that makes
 *    that the whole current row's mean square.
 * Rows are independent given U: they are split across threads in fixed
 * tiles, so the bytes do not depend on the thread count.  H and its
 * factorization are in double, the weight updates in float. */
#ifndef QK_GPTQ_H
#define QK_GPTQ_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/core/err.h"

#define QK_GPTQ_BATCH 128 /* columns per lazy batch */

/* The sum S = sum x x^T of one input's rows (upper triangle, double) and
 * their count.  Rows are added in order, each element of S summing its
 * products one row after another, so S does not depend on how the rows
 * were batched or on the thread count. */
typedef struct qk_hess {
    int64_t dim, n;
    double *s; /* dim x dim, row-major; s[i][j] for j >= i */
} qk_hess;

int qk_hess_init(qk_hess *h, int64_t dim, qk_err *err);
void qk_hess_free(qk_hess *h);
void qk_hess_add(qk_hess *h, const float *x, int64_t n_rows, int nthreads);

typedef struct qk_gptq_opts {
    double damp;       /* fraction of the mean diagonal (0.01) */
    bool act_order;
    int nthreads;
} qk_gptq_opts;

/* What GPTQ needs of a Hessian, made once for every weight on that input:
 * the column order, U (the upper Cholesky factor of the dampened H^-1, in
 * that order, float), the columns whose input is always zero and the
 * importance diag(H)/2 per column. */
typedef struct qk_gptq_factor {
    int64_t cols;
    int *perm, *pos;   /* perm[k]: column at position k; pos: its inverse */
    float *u;          /* cols x cols, row-major, upper triangle */
    float *imp;        /* mean x^2 per column (an imatrix's values) */
    uint8_t *dead;
    double damp;       /* the dampening used (raised when H needed it) */
} qk_gptq_factor;

/* Errors: no rows in h, out of memory, H not positive definite even after
 * raising the dampening 1000-fold (code 2). */
int qk_gptq_factor_make(qk_gptq_factor *f, const qk_hess *h, const qk_gptq_opts *o, qk_err *err);
void qk_gptq_factor_free(qk_gptq_factor *f);

/* Quantize W (rows x cols floats, row-major) into `type` (one with a
 * kernels/grid.h grid; cols a multiple of its block and f's) given the
 * factor of its input's Hessian; out receives rows x qk_row_size(type,
 * cols) bytes.  *loss (may be NULL) gets GPTQ's proxy loss sum
 * (w - q)^2 / U_jj^2 / 2.  Errors: no grid for the type, a shape that does
 * not fit (code 2), out of memory (3). */
int qk_gptq_quantize(const float *w, int64_t rows, int64_t cols, int type, const qk_gptq_factor *f,
                     int nthreads, uint8_t *out, double *loss, qk_err *err);

/* A static integer grid (compressed-tensors' integer quantization, its
 * parameters fixed before GPTQ runs, as llm-compressor's GPTQModifier takes
 * them from the weight observer): element (r, c) becomes the level
 * q = round_half_even(clamp(w / s + z, lo, hi)), the value (q - z) * s, with
 * s and z those of row r's group c / group (compressed-tensors'
 * fake_quantize).  The columns are taken in f's order, the scales staying
 * with their original columns (llm-compressor's actorder "weight", alias
 * "static"). */
typedef struct qk_gptq_igrid {
    int group;
    float lo, hi;                 /* level range: -8, 7 for int4 */
    const float *scale, *zero;    /* rows x (cols / group); zero NULL: symmetric */
} qk_gptq_igrid;

/* GPTQ of W onto such a grid: q gets rows x cols levels, deq (may be NULL)
 * their values.  Errors as qk_gptq_quantize's. */
int qk_gptq_quantize_int(const float *w, int64_t rows, int64_t cols, const qk_gptq_igrid *g,
                         const qk_gptq_factor *f, int nthreads, int8_t *q, float *deq, double *loss, qk_err *err);

#endif
