/* gguf.h - GGUF v2/v3 reader and streaming writer.
 *
 * Reader: the file (and, for split models, every shard) is mmapped; the
 * header is parsed and validated up front (every size overflow-checked,
 * every offset bounds-checked); tensor data is never touched unless the
 * caller reads it through t->data.  Memory is O(header).
 *
 * Errors: one message "FILE: FIELD at offset N: what is wrong", code 2 for
 * bad input, 3 for I/O.
 */
#ifndef QK_GGUF_H
#define QK_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/core/mapfile.h"

/* GGUF metadata value types (on-disk ids). */
typedef enum qk_gguf_vtype {
    QK_GGUF_U8 = 0, QK_GGUF_I8 = 1, QK_GGUF_U16 = 2, QK_GGUF_I16 = 3,
    QK_GGUF_U32 = 4, QK_GGUF_I32 = 5, QK_GGUF_F32 = 6, QK_GGUF_BOOL = 7,
    QK_GGUF_STRING = 8, QK_GGUF_ARRAY = 9, QK_GGUF_U64 = 10, QK_GGUF_I64 = 11,
    QK_GGUF_F64 = 12, QK_GGUF_VTYPE_COUNT = 13
} qk_gguf_vtype;

const char *qk_gguf_vtype_name(int vtype); /* "u32", "string", "array", ... */

/* A string inside the mapping (not NUL-terminated). */
typedef struct qk_str {
    const char *ptr;
    uint64_t len;
} qk_str;

typedef struct qk_gguf_value qk_gguf_value;
struct qk_gguf_value {
    int type;              /* qk_gguf_vtype */
    uint64_t offset;       /* file offset of the value's bytes */
    union {
        uint64_t u;        /* U8..U64, BOOL */
        int64_t i;         /* I8..I64 */
        double f;          /* F32, F64 */
        qk_str s;          /* STRING */
        struct {
            int elem;      /* element vtype */
            uint64_t n;    /* element count */
            const uint8_t *raw; /* first element's bytes in the mapping */
            /* For STRING and ARRAY elements: parsed element list (n entries),
             * NULL for fixed-size element types (read them from raw). */
            qk_gguf_value *items;
        } arr;
    };
};

typedef struct qk_gguf_kv {
    qk_str key;
    uint64_t offset;       /* file offset where this key/value pair starts */
    qk_gguf_value v;
} qk_gguf_kv;

typedef struct qk_gguf_tensor {
    qk_str name;
    uint32_t n_dims;       /* 1..4 */
    int64_t ne[4];         /* ne[0] = innermost (row length); unused dims = 1 */
    int type;              /* ggml type id (kernels/types.h) */
    uint64_t offset;       /* relative to its shard's data section */
    uint64_t nbytes;       /* from the type table: rows * row size */
    const uint8_t *data;   /* in the mapping of its shard */
    int shard;             /* 0 for single-file models */
    uint64_t info_offset;  /* file offset of the tensor info record */
} qk_gguf_tensor;

typedef struct qk_gguf {
    char *path;            /* first (or only) file */
    uint32_t version;      /* 2 or 3 */
    uint64_t n_kv;
    qk_gguf_kv *kv;        /* of the first shard */
    uint64_t n_tensors;    /* over all shards */
    qk_gguf_tensor *tensors;
    uint32_t alignment;    /* general.alignment or 32 */
    uint64_t data_offset;  /* start of the data section of the first shard */
    uint64_t file_size;    /* first shard; total_size: all shards */
    uint64_t total_size;
    int n_shards;
    qk_map *maps;          /* n_shards mappings */
    char **shard_paths;
    bool borrowed;         /* qk_gguf_open_mem: maps[0] is the caller's buffer */
} qk_gguf;

enum {
    QK_GGUF_NO_SPLIT = 1,  /* open only the named file even if it is a shard */
};

int qk_gguf_open(qk_gguf **out, const char *path, unsigned flags, qk_err *err);
/* Parse a GGUF held in memory (one file, no split handling).  The buffer is
 * not copied and must outlive *out; name is the file name in messages. */
int qk_gguf_open_mem(qk_gguf **out, const void *buf, size_t size, const char *name,
                     qk_err *err);
void qk_gguf_close(qk_gguf *g);

const qk_gguf_kv *qk_gguf_find(const qk_gguf *g, const char *key);
const qk_gguf_tensor *qk_gguf_find_tensor(const qk_gguf *g, const char *name);
/* Typed look-ups: return true and set *out when key exists with a
 * compatible type (any integer type for get_int/get_uint within range,
 * F32/F64 for get_f64, STRING for get_str). */
bool qk_gguf_get_uint(const qk_gguf *g, const char *key, uint64_t *out);
bool qk_gguf_get_int(const qk_gguf *g, const char *key, int64_t *out);
bool qk_gguf_get_f64(const qk_gguf *g, const char *key, double *out);
bool qk_gguf_get_str(const qk_gguf *g, const char *key, qk_str *out);
bool qk_gguf_get_bool(const qk_gguf *g, const char *key, bool *out);
/* Element i of a fixed-size numeric array value, converted (0 when v is not
 * such an array or i is out of range). */
double qk_gguf_arr_f64(const qk_gguf_value *v, uint64_t i);
int64_t qk_gguf_arr_i64(const qk_gguf_value *v, uint64_t i);
/* qk_str equality with a C string. */
bool qk_str_eq(qk_str s, const char *c);

/* ---- writer --------------------------------------------------------------
 * Build the header (key/values in order, tensor infos in order), then
 * stream each tensor's data in the same order; the writer pads between
 * tensors to the alignment.  The output goes to a temp file renamed into
 * place by qk_gguf_writer_finish(); qk_gguf_writer_free() without finish
 * removes it.  Writing back every kv and tensor of a file produced by
 * llama.cpp gives the identical bytes. */
typedef struct qk_gguf_writer qk_gguf_writer;

/* version 2 or 3; NULL for any other version or when out of memory. */
qk_gguf_writer *qk_gguf_writer_new(uint32_t version);
void qk_gguf_writer_free(qk_gguf_writer *w);
/* A file without tensors ends right after its key/values (gguf-py's
 * writer), instead of padding the header to the alignment (ggml's). */
void qk_gguf_writer_no_pad_empty(qk_gguf_writer *w);
/* Copy a key/value (any type, nested arrays included) from a reader. */
int qk_gguf_w_kv_copy(qk_gguf_writer *w, const qk_gguf_kv *kv, qk_err *err);
int qk_gguf_w_kv_u32(qk_gguf_writer *w, const char *key, uint32_t v, qk_err *err);
int qk_gguf_w_kv_u16(qk_gguf_writer *w, const char *key, uint16_t v, qk_err *err);
int qk_gguf_w_kv_i32(qk_gguf_writer *w, const char *key, int32_t v, qk_err *err);
int qk_gguf_w_kv_u64(qk_gguf_writer *w, const char *key, uint64_t v, qk_err *err);
int qk_gguf_w_kv_f32(qk_gguf_writer *w, const char *key, float v, qk_err *err);
int qk_gguf_w_kv_bool(qk_gguf_writer *w, const char *key, bool v, qk_err *err);
int qk_gguf_w_kv_str(qk_gguf_writer *w, const char *key, const char *v, qk_err *err);
/* Array of strings / of fixed-size elements (raw little-endian bytes). */
int qk_gguf_w_kv_arr_str(qk_gguf_writer *w, const char *key, const char *const *v, uint64_t n, qk_err *err);
int qk_gguf_w_kv_arr(qk_gguf_writer *w, const char *key, int elem_vtype, const void *raw, uint64_t n, qk_err *err);
/* Replace or add: a later kv with an existing key replaces its value in place. */
/* Tensor info; dims in ggml order (ne[0] innermost). */
int qk_gguf_w_tensor(qk_gguf_writer *w, const char *name, int type, uint32_t n_dims,
                     const int64_t *ne, qk_err *err);
/* Tensor info copied from a reader's tensor (name, type, n_dims, ne). */
int qk_gguf_w_tensor_copy(qk_gguf_writer *w, const qk_gguf_tensor *t, qk_err *err);
/* Open the output and write the header (after all kvs and tensor infos). */
int qk_gguf_w_begin(qk_gguf_writer *w, const char *path, qk_err *err);
/* Append data of the next tensor (may be called several times per tensor);
 * qk_gguf_w_end_tensor pads to alignment and checks the byte count. */
int qk_gguf_w_data(qk_gguf_writer *w, const void *buf, size_t n, qk_err *err);
int qk_gguf_w_end_tensor(qk_gguf_writer *w, qk_err *err);
int qk_gguf_writer_finish(qk_gguf_writer *w, qk_err *err);

#endif
