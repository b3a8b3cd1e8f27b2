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
 * legacy values / ncall.  The stored numbers are kept beside them (the sums
 * and counts llama-imatrix's --in-file combines).  Entries are kept sorted
 * by name.  The parser works on a buffer (qk_imatrix_parse), so it can be
 * fuzzed without files.
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
    /* As stored (common_imatrix_load's entry): GGUF in_sum2 and its counts
     * rounded to integers; legacy the n stored values and {ncall}. */
    float *sums;
    int64_t *counts;
    uint64_t n_counts;
} qk_imatrix_entry;

typedef struct qk_imatrix {
    qk_imatrix_entry *e; /* sorted by name (byte order) */
    size_t n;
    char **datasets;     /* imatrix.datasets, or the legacy trailer's name */
    size_t n_datasets;
    int32_t chunk_count; /* 0 when unknown */
    int32_t chunk_size;
    bool legacy;
    bool has_metadata;   /* GGUF: imatrix.datasets, .chunk_count and .chunk_size all present */
} qk_imatrix;

/* Parse an importance matrix held in memory (buf need not outlive *out);
 * name is the file name in messages.  GGUF files without the imatrix.*
 * keys are accepted (has_metadata false), as llama-imatrix's --in-file
 * does.  Bad data: code 2 naming the field and offset. */
int qk_imatrix_parse(qk_imatrix **out, const void *buf, size_t size, const char *name, qk_err *err);
/* qk_imatrix_parse of a file (code 3 when it cannot be opened or read). */
int qk_imatrix_read(qk_imatrix **out, const char *path, qk_err *err);
/* For quantization (llama-quantize's load_imatrix): qk_imatrix_read, and a
 * GGUF file must have the imatrix metadata. */
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
