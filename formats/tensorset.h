/* tensorset.h - one view of the tensors of any checkpoint qk reads: a GGUF
 * file (split sets included), a .safetensors file, or a Hugging Face
 * directory.  Commands that only need names, types, shapes and data (inspect,
 * diff, stats) use this instead of the format readers directly.
 *
 * A Hugging Face directory whose tensors a quantization tool wrote
 * (formats/ckpt.h recognises the layout) is listed by logical weight: one
 * tensor MODULE.weight per quantized module, type F32 with its dequantized
 * values materialised at open (type_name: the layout, "fp8", "pack",
 * "nvfp4-ct", ...; nbytes: the bytes of every stored part; file and offset:
 * those of the stored weight), the scales and other parts not listed; the
 * remaining tensors as stored.  When the layout is not recognised the
 * stored tensors are listed as they are. */
#ifndef QK_TENSORSET_H
#define QK_TENSORSET_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"

#define QK_MAX_DIMS 8

enum { QK_SET_GGUF = 1, QK_SET_SAFETENSORS = 2 };

typedef struct qk_tensor {
    char *name;             /* owned, NUL-terminated */
    int type;               /* kernels/types.h id; -1: a safetensors dtype qk cannot decode */
    const char *type_name;  /* the table's name, or the safetensors dtype spelling */
    int n_dims;
    int64_t ne[QK_MAX_DIMS];/* ggml order: ne[0] innermost (row length) */
    uint64_t nelem;
    uint64_t nbytes;
    const uint8_t *data;
    uint64_t offset;        /* byte offset of the data in its file */
    const char *file;       /* path of the file holding the data */
} qk_tensor;

typedef struct qk_tensorset {
    int kind;
    char *path;
    void *gguf;             /* qk_gguf * when kind == QK_SET_GGUF */
    void *st;               /* format-specific handle when kind == QK_SET_SAFETENSORS */
    void *deq;              /* a quantized HF directory's dequantized view (formats/ckpt.h), or NULL */
    uint64_t n;
    qk_tensor *t;
    uint64_t file_bytes;    /* sum of the file sizes */
} qk_tensorset;

int qk_tensorset_open(qk_tensorset **out, const char *path, qk_err *err);
void qk_tensorset_close(qk_tensorset *s);
const qk_tensor *qk_tensorset_find(const qk_tensorset *s, const char *name);
/* "4096x11008": the dims in ggml order (innermost first), into buf[n]. */
void qk_tensor_shape_str(const qk_tensor *t, char *buf, size_t n);
/* Number of rows (product of ne[1..]). */
uint64_t qk_tensor_rows(const qk_tensor *t);

#endif
