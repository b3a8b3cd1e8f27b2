/* safetensors.h - .safetensors reader and writer.
 *
 * Format (https://github.com/huggingface/safetensors, README "Format"):
 *   u64 little-endian N, then N bytes of UTF-8 JSON beginning with '{'
 *   (optionally padded with spaces), then the byte buffer.  The JSON maps
 *   tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
 *   (offsets relative to the byte buffer) plus an optional "__metadata__"
 *   string -> string map.
 *
 * Reader: the file is mmapped and the header validated up front the way the
 * reference library does (safetensors/src/tensor.rs, Metadata::validate):
 * N <= 100,000,000 and within the file, no duplicate keys, known dtypes,
 * shape entries non-negative integers, end - begin == product(shape) *
 * bits(dtype) / 8 (overflow-checked, whole bytes), and the tensors, taken in
 * data_offsets order, cover the byte buffer exactly: no holes, no overlaps,
 * nothing after the last tensor.  Errors: "FILE: FIELD at offset N: what",
 * code 2, where N is the file offset of the offending JSON value (the
 * header starts at offset 8); code 3 for I/O.
 *
 * Writer: tensors in the order given, or (QK_ST_W_SORT) in the order of the
 * reference library's serialize(), which safetensors.torch.save_file uses:
 * by descending dtype (its Dtype enum order) then by name.  The header is
 * compact JSON as serde_json writes it ("__metadata__" first, then tensors
 * in data order), padded with spaces to a multiple of 8 bytes.
 */
#ifndef QK_SAFETENSORS_H
#define QK_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/core/jsonp.h"
#include "lib/core/mapfile.h"

#define QK_ST_MAX_DIMS 8
#define QK_ST_MAX_HEADER 100000000ull

/* One safetensors dtype. */
typedef struct qk_st_dtype {
    const char *name; /* spelling in the file: "F32", "BF16", "F8_E4M3", ... */
    int type;         /* kernels/types.h id, or -1 when qk has no element type
                         for it (F4, F6_E2M3, F6_E3M2, F8_E4M3FNUZ,
                         F8_E5M2FNUZ, C64) */
    int bits;         /* bits per element */
    int rank;         /* position in the reference library's Dtype enum */
} qk_st_dtype;

/* By file spelling (case-sensitive, as the reference is), or NULL. */
const qk_st_dtype *qk_st_dtype_by_name(const char *name);
/* The dtype holding qk type id `type`, or NULL. */
const qk_st_dtype *qk_st_dtype_by_type(int type);

typedef struct qk_st_tensor {
    const char *name;      /* NUL-terminated (points into the parsed header) */
    size_t name_len;
    const qk_st_dtype *dtype;
    int type;              /* dtype->type */
    int n_dims;            /* 0 (scalar) .. QK_ST_MAX_DIMS */
    int64_t shape[QK_ST_MAX_DIMS]; /* outermost first, as in the file */
    int64_t ne[QK_ST_MAX_DIMS];    /* ggml order (reversed); unused = 1 */
    uint64_t nelem;
    uint64_t nbytes;
    uint64_t begin, end;   /* data_offsets (relative to the byte buffer) */
    uint64_t file_offset;  /* absolute offset of the data in the file */
    const uint8_t *data;   /* in the mapping */
    uint64_t info_offset;  /* file offset of the tensor's key in the header */
    uint64_t offsets_at;   /* file offset of its data_offsets value */
} qk_st_tensor;

typedef struct qk_st_meta {
    const char *key, *value;
} qk_st_meta;

typedef struct qk_st {
    char *path;
    qk_map map;            /* unused (fd -1) for qk_st_open_mem */
    const uint8_t *buf;
    uint64_t size;         /* file size */
    uint64_t header_len;   /* N */
    uint64_t data_start;   /* 8 + N */
    uint64_t data_size;    /* size - 8 - N */
    qk_jsonv *header;
    bool has_metadata;     /* "__metadata__" present (possibly empty) */
    size_t n_meta;
    qk_st_meta *meta;      /* in file order */
    size_t n_tensors;
    qk_st_tensor *tensors; /* in header order */
    size_t *by_name;       /* indices sorted by name, for look-ups */
} qk_st;

int qk_st_open(qk_st **out, const char *path, qk_err *err);
/* Parse an in-memory file image; buf must outlive the handle.  `name` is
 * used in error messages. */
int qk_st_open_mem(qk_st **out, const void *buf, size_t n, const char *name, qk_err *err);
void qk_st_close(qk_st *st);
const qk_st_tensor *qk_st_find(const qk_st *st, const char *name);
/* __metadata__ value for key, or NULL. */
const char *qk_st_meta_get(const qk_st *st, const char *key);

/* ---- writer -------------------------------------------------------------- */
typedef struct qk_st_writer qk_st_writer;

enum { QK_ST_W_SORT = 1 };

qk_st_writer *qk_st_writer_new(unsigned flags);
/* Removes the temporary output if not finished. */
void qk_st_writer_free(qk_st_writer *w);
/* Add (or replace) an __metadata__ entry. */
int qk_st_w_meta(qk_st_writer *w, const char *key, const char *value, qk_err *err);
/* Declare a tensor; shape outermost first.  data (nbytes long) must stay
 * valid until qk_st_writer_finish; NULL means the bytes will be streamed
 * with qk_st_w_data. */
int qk_st_w_tensor(qk_st_writer *w, const char *name, const char *dtype, int n_dims,
                   const int64_t *shape, const void *data, qk_err *err);
/* Lay out the file, open the output (temp + rename) and write the header. */
int qk_st_w_begin(qk_st_writer *w, const char *path, qk_err *err);
/* After begin: the tensors in output order. */
size_t qk_st_w_count(const qk_st_writer *w);
const char *qk_st_w_name(const qk_st_writer *w, size_t i);
/* Bytes of the next streamed tensor (in output order); a call may not span
 * two tensors.  Tensors declared with data are written as they come up. */
int qk_st_w_data(qk_st_writer *w, const void *buf, size_t n, qk_err *err);
/* Write the remaining tensors, check every byte arrived, rename into place. */
int qk_st_writer_finish(qk_st_writer *w, qk_err *err);

#endif
