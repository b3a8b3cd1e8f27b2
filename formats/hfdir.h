/* hfdir.h - a Hugging Face model directory as one tensor list.
 *
 * Accepts a directory holding model.safetensors, or (when that is absent)
 * model.safetensors.index.json with the shards its weight_map names; a path
 * to a single .safetensors file; or a path to a *.safetensors.index.json.
 * config.json, generation_config.json and hf_quant_config.json beside the
 * weights are parsed when present and kept as DOMs.
 *
 * Index rules: weight_map is an object of tensor name -> shard file name
 * (relative to the directory, no absolute paths or ".." components); every
 * shard named must exist and parse; every tensor listed must be in the shard
 * named for it; a tensor name may not appear in two shards.  Tensors a shard
 * holds but weight_map does not list are kept (transformers loads whole
 * shards).  The unified list is shard by shard, shards in sorted file-name
 * order, tensors in header order within a shard.
 */
#ifndef QK_HFDIR_H
#define QK_HFDIR_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/core/jsonp.h"
#include "formats/safetensors.h"

typedef struct qk_hf_tensor {
    const char *name;
    int type;                      /* kernels/types.h id, -1 if none (see safetensors.h) */
    const char *dtype;             /* safetensors spelling */
    int n_dims;
    int64_t shape[QK_ST_MAX_DIMS]; /* outermost first */
    int64_t ne[QK_ST_MAX_DIMS];    /* ggml order; unused = 1 */
    uint64_t nelem, nbytes;
    const uint8_t *data;
    uint64_t file_offset;          /* of the data in its file */
    int file;                      /* index into files[] */
    const qk_st_tensor *st;
} qk_hf_tensor;

typedef struct qk_hfdir {
    char *dir;                /* directory of the weights */
    char *index_path;         /* NULL without an index */
    int n_files;
    char **file_paths;
    qk_st **files;
    size_t n_tensors;
    qk_hf_tensor *tensors;
    size_t *by_name;          /* indices sorted by name */
    qk_jsonv *index;          /* model.safetensors.index.json, or NULL */
    qk_jsonv *config;         /* config.json, or NULL */
    qk_jsonv *generation_config;
    qk_jsonv *hf_quant_config;
} qk_hfdir;

int qk_hf_open(qk_hfdir **out, const char *path, qk_err *err);
/* A directory DIR held in memory (the fuzz harnesses): model.safetensors is
 * st[0..st_n), config.json and hf_quant_config.json the given texts (NULL:
 * absent); messages name DIR/... as if the files were there.  The buffers
 * must outlive the handle. */
int qk_hf_open_mem(qk_hfdir **out, const char *dir, const void *st, size_t st_n, const char *config,
                   size_t config_n, const char *hqc, size_t hqc_n, qk_err *err);
void qk_hf_close(qk_hfdir *hf);
const qk_hf_tensor *qk_hf_find(const qk_hfdir *hf, const char *name);
/* Read and parse a JSON file (any keys; duplicates allowed, last wins).
 * A missing file is *out = NULL and QK_OK when optional is set. */
int qk_hf_json_load(qk_jsonv **out, const char *path, int optional, qk_err *err);

#endif
