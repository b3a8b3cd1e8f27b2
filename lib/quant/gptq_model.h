/* gptq_model.h - qk-quant --method gptq: GPTQ for the weights of a whole
 * model, layer by layer, as llm-compressor's sequential pipeline runs it.
 *
 * The calibration text is tokenized as llama-imatrix does (BOS first, one
 * trailing newline dropped) and cut into chunks of n_ctx tokens; every
 * chunk starts from an empty cache with BOS.  The residual stream of all
 * chunks is kept between layers.  For each layer: the layer runs on it with
 * its own weights while the product hook (lib/engine/forward.h) sums the
 * Hessians of its four inputs (q/k/v, attn_output, gate/up, down); its
 * weights are GPTQ-encoded (lib/quant/gptq.h) into the types the plan
 * chose; then the layer runs again with the encoded weights, and that is
 * the next layer's input, so each layer is calibrated on the activations of
 * the quantized layers before it.  output.weight (when the model has its
 * own) is last, on the final norm of that stream.  The token embeddings are
 * encoded as the writer will encode them (round to nearest) before the
 * first layer, so the stream starts from them.
 *
 * Tensors whose planned type has no grid (kernels/grid.h), and those that
 * are not products of the blocks or the output head, are left to the plan's
 * round-to-nearest encoding. */
#ifndef QK_GPTQ_MODEL_H
#define QK_GPTQ_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/quant/gptq.h"
#include "lib/quant/quant_model.h"

typedef struct qk_gptq_calib {
    const char *text;      /* calibration text file */
    const char *model;     /* the model's file, for messages */
    int n_ctx;             /* tokens per chunk */
    int n_chunks;          /* 0: every whole chunk of the text */
    qk_gptq_opts o;
    /* out */
    int chunks_used;
    int n_gptq;            /* tensors GPTQ encoded */
    double loss;           /* sum of GPTQ's proxy losses */
} qk_gptq_calib;

/* Whether GPTQ can encode `type` (it has a grid). */
bool qk_gptq_supports(int type);

/* Calibrate on c->text and GPTQ-encode the planned tensors: each such item
 * gets its bytes in ->data (owned by the plan).  Errors: a text shorter
 * than the chunks asked for, a model the engine cannot run or without a
 * tokenizer (code 2), out of memory (3).  A progress bar per layer on a
 * TTY unless quiet. */
int qk_gptq_plan_run(qk_quant_plan *p, qk_gptq_calib *c, bool quiet, qk_err *err);

#endif
