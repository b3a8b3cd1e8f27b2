/* logits_file.h - the --logits-out file of qk-run, read back by qk-kld.
 *
 * Layout (little-endian):
 *   offset  size
 *        0     8  magic "QKLOGITS"
 *        8     4  u32 version, 1
 *       12     4  u32 dtype of the rows: ggml type id, 0 = F32, 1 = F16
 *       16     4  u32 n_vocab (values per row), >= 1
 *       20     4  u32 n_tokens (rows)
 *       24     8  u64 data_size: bytes of the zstd frame that follows
 *       32     data_size  one zstd frame (content size and checksum set)
 *                 holding n_tokens rows of n_vocab values of dtype
 *   32+data_size  n_tokens x i32: the token evaluated at each row, so row i
 *                 is the distribution of the token after tokens[0..i]
 * Nothing follows the token ids.  Rows are written in order through one
 * single-threaded compression stream, so the bytes depend only on the
 * values.  The writer goes through lib/core/outfile.h: the file appears complete
 * or not at all.
 */
#ifndef QK_LOGITS_FILE_H
#define QK_LOGITS_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"

#define QK_LOGITS_MAGIC "QKLOGITS"
#define QK_LOGITS_VERSION 1u
#define QK_LOGITS_HEADER 32u

typedef struct qk_logits_writer qk_logits_writer;

/* dtype: QK_F32 or QK_F16 (kernels/types.h).  Errors: code 2 for bad
 * parameters, 3 for I/O. */
int qk_logits_create(qk_logits_writer **out, const char *path, uint32_t n_vocab, int dtype,
                     qk_err *err);
/* Append the row of logits computed after evaluating `token`. */
int qk_logits_append(qk_logits_writer *w, int32_t token, const float *row, qk_err *err);
/* Finish the frame, write the token ids, fix the header, rename into place;
 * w is freed either way. */
int qk_logits_finish(qk_logits_writer *w, qk_err *err);
/* Drop an unfinished file (nothing is left at the path); NULL is fine. */
void qk_logits_discard(qk_logits_writer *w);

typedef struct qk_logits_reader {
    uint32_t version, n_vocab, n_tokens;
    int dtype;
    uint64_t data_size;
    int32_t *tokens;        /* n_tokens */
    uint32_t next;          /* rows read so far */
    struct qk_logits_rd *rd; /* stream state */
} qk_logits_reader;

/* Validate the header, sizes and token table. Errors name the field (code 2)
 * or the system error (code 3). */
int qk_logits_open(qk_logits_reader **out, const char *path, qk_err *err);
/* The next row decoded to floats (row[n_vocab]).  After the last row the
 * frame must end exactly (a corrupt or truncated frame is code 2). */
int qk_logits_next(qk_logits_reader *r, float *row, qk_err *err);
void qk_logits_close(qk_logits_reader *r);

#endif
