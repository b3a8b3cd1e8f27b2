/* gguf_parse.h - what the GGUF reader's two halves share (formats/ only):
 * gguf_read.c parses and validates one file, gguf_open.c opens a file or a
 * split set, joins the shards and answers look-ups. */
#ifndef QK_GGUF_PARSE_H
#define QK_GGUF_PARSE_H

#include <string.h>

#include "formats/gguf.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader loads little-endian fields with memcpy: little-endian hosts only"
#endif

/* ---- little-endian loads --------------------------------------------- */

static inline uint16_t ld16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t ld64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* f32 -> f64 keeping a NaN's payload bit for bit (a cast may quiet it), so
 * that writing a value back reproduces the file's bytes. */
static inline double f32_to_f64(uint32_t b)
{
    if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu)) {
        uint64_t d = ((uint64_t)(b >> 31) << 63) | (0x7ffull << 52) | ((uint64_t)(b & 0x007fffffu) << 29);
        double f;
        memcpy(&f, &d, 8);
        return f;
    }
    float f;
    memcpy(&f, &b, 4);
    return (double)f;
}

#define GGUF_MAX_SHARDS 99999 /* the %05d of the shard file names */

/* One parsed file: what qk_gguf takes over from the first shard. */
typedef struct qk_gguf_parsed {
    uint32_t version;
    uint64_t n_kv;
    qk_gguf_kv *kv;
    uint64_t n_tensors;
    qk_gguf_tensor *tensors;
    uint32_t alignment;
    uint64_t data_offset;
} qk_gguf_parsed;

/* Parse and validate one whole GGUF file held at p[0..size); shard is its
 * index in a split set (0 otherwise). */
int qk_gguf_parse_file(const uint8_t *p, uint64_t size, const char *path, int shard, qk_gguf_parsed *ps,
                       qk_err *err);
void qk_gguf_parsed_free(qk_gguf_parsed *ps);
void qk_gguf_free_kvs(qk_gguf_kv *kv, uint64_t n);
const qk_gguf_kv *qk_gguf_find_kv(const qk_gguf_kv *kv, uint64_t n, const char *key, uint64_t *idx);
/* Bytes of one element of a fixed-size value type; 0 for STRING, ARRAY, invalid. */
size_t qk_gguf_vtype_size(int vtype);
/* Code 2 naming the second of two tensors with one name; paths[t->shard]
 * names each tensor's file (NULL: all in file). */
int qk_gguf_check_duplicate_tensors(const char *file, const qk_gguf_tensor *t, uint64_t n, char *const *paths,
                                    qk_err *err);

#endif
