/* imatrix.h - importance matrices as llama-imatrix writes them.
 *
 * Two on-disk formats (llama.cpp d32676d, common/imatrix-loader.cpp):
 *  - GGUF (current): per weight W the tensors "W.in_sum2" (F32, ne0 x n_expert
 *    sums of squared activations) and "W.counts" (F32, one count per expert),
 *    with metadata imatrix.datasets (string array), imatrix.chunk_count and
 *    imatrix.chunk_size (u32);
 *  - legacy .dat: i32 n_entries, then per entry i32 name length, name,
 *    i32 ncall, i32 nval, nval f32 (already averaged, times ncall); then
 *    optionally i32 chunk count, i32 length and the dataset name.
 *
 * Loading normalizes the values the way tools/quantize/quantize.cpp's
 * load_imatrix() does: GGUF sums / count per expert (1 where the count is 0),
 * legacy values / ncall.  Entries are kept sorted by name.
 */
#ifndef QK_IMATRIX_H
#define QK_IMATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"

typedef struct qk_imatrix_entry {
    char *name;     /* the weight's name, e.g. "blk.0.attn_q.weight" */
    float *values;  /* n normalized importances (ne0 per expert, experts back to back) */
    uint64_t n;
} qk_imatrix_entry;

typedef struct qk_imatrix {
    qk_imatrix_entry *e; /* sorted by name (byte order) */
    size_t n;
    char **datasets;     /* imatrix.datasets, or the legacy trailer's name */
    size_t n_datasets;
    int32_t chunk_count; /* 0 when unknown */
    int32_t chunk_size;
    bool legacy;
} qk_imatrix;

/* Load and normalize.  Bad or unreadable files: code 2 (3 when the file
 * cannot be opened or read). */
int qk_imatrix_load(qk_imatrix **out, const char *path, qk_err *err);
void qk_imatrix_free(qk_imatrix *m);
/* Entry by exact name, or NULL. */
const qk_imatrix_entry *qk_imatrix_find(const qk_imatrix *m, const char *name);
/* llama-quantize's --exclude-weights / --include-weights: drop every entry
 * whose name contains one of exclude[]; then, when n_include > 0, keep only
 * entries whose name contains one of include[]. */
void qk_imatrix_filter(qk_imatrix *m, const char *const *include, size_t n_include,
                       const char *const *exclude, size_t n_exclude);

#endif
