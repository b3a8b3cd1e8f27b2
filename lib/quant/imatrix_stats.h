/* imatrix_stats.h - the statistics llama-imatrix collects, combines and
 * saves (llama.cpp d32676d, tools/imatrix/imatrix.cpp: IMatrixCollector's
 * collect_imatrix, load_imatrix, save_imatrix and save_imatrix_legacy).
 *
 * Per weight W (by name): for every input row x of a product W x, the
 * squares x[j]^2 added to values[j] in float, rows in order, and the row
 * count added to counts[] (one count per matrix: dense weights have one).
 * The order of the float additions is the order of the rows, whatever the
 * batches and threads were, so the saved bytes depend on the rows alone.
 * Expert tensors keep a block of sums and a count per expert (in_sum2
 * [ne0, n_expert], counts [1, n_expert]); each block sums its expert's
 * rows in token order.  (llama-imatrix sums an expert's rows of one
 * micro-batch slot by slot, then token by token: the same squares, added
 * in another order where an expert is some tokens' first choice and other
 * tokens' second.)
 *
 * Saved as llama-imatrix's GGUF (general.type "imatrix", imatrix.datasets,
 * imatrix.chunk_count, imatrix.chunk_size; per weight F32 tensors
 * "W.in_sum2" [ne0, n_mat] and "W.counts" [1, n_mat], sorted by name) or
 * as the legacy .dat (see lib/quant/imatrix.h for both layouts).
 */
#ifndef QK_IMATRIX_STATS_H
#define QK_IMATRIX_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/quant/imatrix.h"

typedef struct qk_imx_entry {
    char *name;
    float *values;       /* n_values sums of squares: n_counts blocks of n_values / n_counts */
    int64_t *counts;     /* rows added, per matrix */
    int64_t n_values, n_counts;
} qk_imx_entry;

typedef struct qk_imx {
    qk_imx_entry *e;     /* in creation order (saved sorted by name) */
    size_t n, cap;
    char **datasets;     /* the datasets of the --in-file files, in order */
    size_t n_datasets;
    int32_t chunk_size;  /* n_ctx / n_parallel: counts per chunk */
    int32_t last_chunk;  /* the chunk count saved: the largest count / chunk_size */
} qk_imx;

void qk_imx_init(qk_imx *s, int32_t chunk_size);
void qk_imx_free(qk_imx *s);

/* Index of the entry named name[0..len), created empty when absent
 * (-1 with err set when out of memory). */
long qk_imx_entry_index(qk_imx *s, const char *name, size_t len, qk_err *err);

/* collect_imatrix for a dense product: n_rows rows of ne0 floats in x.
 * Threads split the columns, each column sums its rows in order.  A sum
 * that is no longer finite is code 2 naming the weight. */
int qk_imx_add(qk_imx *s, long idx, const float *x, int64_t n_rows, int64_t ne0, int nthreads,
               qk_err *err);

/* collect_imatrix for an expert product (llama.cpp's MUL_MAT_ID): the
 * n_rows rows of ne0 floats routed to expert `expert` of n_expert, added
 * to that expert's block of sums in row order and to its count.  An entry
 * with one count (from a file) has it broadcast to every expert first.
 * Sizes that disagree with the entry's, or a sum no longer finite, are
 * code 2 naming the weight. */
int qk_imx_add_expert(qk_imx *s, long idx, int expert, int n_expert, const float *x, int64_t n_rows,
                      int64_t ne0, int nthreads, qk_err *err);

/* --in-file: add an importance matrix read by qk_imatrix_read (its stored
 * sums and counts; legacy values times chunk_size), its datasets appended.
 * Mismatched sizes are code 2 naming file and weight. */
int qk_imx_combine(qk_imx *s, const qk_imatrix *m, const char *path, qk_err *err);

/* The chunk count after the rows added so far: largest count / chunk_size. */
int32_t qk_imx_chunks(const qk_imx *s);

/* Write the statistics to path atomically: GGUF (legacy false) or .dat.
 * prompt_file: the -f text as given (NULL or "": none), recorded as the
 * last dataset.  Uses s->last_chunk as the chunk count. */
int qk_imx_save(const qk_imx *s, const char *path, bool legacy, const char *prompt_file, qk_err *err);

#endif
