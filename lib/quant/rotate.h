/* rotate.h - qk-quant --to SCHEME --rotate hadamard: SpinQuant's rotations
 * with Hadamard matrices (llm-compressor's SpinQuantModifier, rotations R1,
 * R2 and R4, transform_type "hadamard"), applied to the float weights before
 * they are quantized, and the transform_config that says so
 * (lib/quant/rotate.c). */
#ifndef QK_ROTATE_H
#define QK_ROTATE_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/ckpt.h"
#include "lib/core/err.h"
#include "lib/core/strbuf.h"

typedef struct qk_rot qk_rot;

/* The rotations of the Llama-layout model in ck (hf's config.json): R1 of
 * hidden_size (a power of two), R2 of head_dim, R4 of r4_block on
 * down_proj's input (0: intermediate_size when a power of two, else the
 * largest power of two dividing it).  Reads the norms to fold.  Code 2 for a
 * model it does not apply to, naming the file and the field or tensor. */
int qk_rot_open(qk_rot **out, const qk_hfdir *hf, const qk_ckpt *ck, int r4_block, qk_err *err);
void qk_rot_free(qk_rot *r);

/* Whether the writer must add lm_head.weight (a tied model is untied: the
 * lm head then differs from the embeddings). */
bool qk_rot_unties(const qk_rot *r);
/* The two tensors the writer adds: lm_head.weight of a tied model (the
 * embeddings' source tensor under that name; lm unchanged otherwise) and
 * R4's matrix, model.layers.0.mlp.down_proj.R4_input.weight [r4, r4] (no
 * source: its values are qk_rot_r4_matrix's). */
void qk_rot_added(const qk_rot *r, const qk_ckpt *ck, qk_ck_tensor *lm, qk_ck_tensor *r4);
/* Whether tensor name's values change (norm weights become ones). */
bool qk_rot_changes(const qk_rot *r, const char *name);

/* Rotate the float values x of tensor name ([rows, cols]; a 1-D tensor has
 * rows 1) in place; "lm_head.weight" of a tied model is given the
 * embeddings.  0, or code 3 when out of memory. */
int qk_rot_tensor(const qk_rot *r, const char *name, float *x, int64_t rows, int64_t cols, qk_err *err);

/* R4's matrix as save_pretrained stores it: Sylvester's +-1, float64 n x n. */
void qk_rot_r4_matrix(const qk_rot *r, double *out);

/* transform_config as llm-compressor writes it (TransformConfig.model_dump). */
void qk_rot_config(const qk_rot *r, qk_sbuf *b);

#endif
