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
#include "lib/engine/forward.h"
#include "lib/engine/model.h"
#include "lib/engine/tokenizer.h"
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

/* The sequential pipeline on its own, for any encoder of the layers' weights
 * (qk-quant --method gptq into GGUF types, lib/quant/ckpt_calib.c for
 * Hugging Face schemes).  The caller fills the inputs; qk_gptq_seq_run
 * embeds every chunk, then per layer sums the Hessians of its four inputs
 * (h[QK_GS_QKV] ... h[QK_GS_DOWN]) while the layer runs, calls layer(), which
 * points the layer's weights (in s->layers[l], the copy the passes run) at
 * their encoded bytes, and runs the layer again on them for the next one;
 * with head set, the output head's input (h[QK_GS_OUT]) last, l = n_layer. */
enum { QK_GS_QKV, QK_GS_O, QK_GS_GU, QK_GS_DOWN, QK_GS_OUT, QK_GS_N };

typedef struct qk_gptq_seq qk_gptq_seq;
struct qk_gptq_seq {
    /* in */
    const qk_model *m;         /* the model as loaded */
    int32_t *ids;              /* tokenized text; each chunk's first token is replaced by bos while embedded */
    int32_t bos;
    bool add_bos;
    int n_ctx, chunks;         /* chunks x n_ctx tokens of ids */
    qk_gptq_opts o;
    bool head;
    bool kv_f32;               /* an F32 KV cache (default F16, as llama-imatrix's) */
    bool quiet;
    /* called before the stream starts (may be NULL): e.g. encode the embeddings in s->mq */
    int (*embed)(void *user, qk_gptq_seq *s, qk_err *err);
    int (*layer)(void *user, qk_gptq_seq *s, int l, qk_err *err);
    /* optional: instead of the Hessians, each slot's input rows as they come (chunk after chunk,
     * in token order), during the calibration pass and qk_gptq_seq_pass */
    int (*on_input)(void *user, qk_gptq_seq *s, int slot, const float *x, int n_tok, int64_t cols, qk_err *err);
    void *user;
    /* for the callbacks */
    qk_model mq;               /* the model the passes run */
    qk_layer *layers;          /* mq's layers */
    qk_hess h[QK_GS_N];
    void *packed[8];           /* repacked copies of the layer's weights (qk_weight_pack's mem), freed after it runs */
    /* private */
    qk_gptq_factor f_[QK_GS_N];
    const qk_weight *slot_w_[QK_GS_N];
    bool collecting_;
    float *x_, *scratch_;
    qk_ctx *ctx_;
};

int qk_gptq_seq_run(qk_gptq_seq *s, qk_err *err);
/* Point weight w at f32 rows f (w->rows x w->cols, the caller's memory):
 * how a layer() callback makes the next pass run on quantized or smoothed
 * weights. */
static inline void qk_gptq_point_f32(qk_weight *w, const float *f)
{
    w->type = QK_F32;
    w->row_size = (size_t)w->cols * sizeof(float);
    w->data = (const uint8_t *)f;
    w->packed = NULL;
    w->mapped = 0;
    w->wq = NULL;
}
/* Inside layer(): run layer l again on (a copy of) every chunk's input,
 * on_input seeing its products' inputs. */
int qk_gptq_seq_pass(qk_gptq_seq *s, int l, qk_err *err);
/* The factor of slot's Hessian, made on first use (GPTQ's errors). */
int qk_gptq_seq_factor(qk_gptq_seq *s, int slot, const qk_gptq_factor **f, qk_err *err);

/* The calibration tokens: llama-imatrix's tokenization of the file text
 * (BOS first, one trailing newline dropped), and how many chunks of n_ctx
 * to use (n_chunks, 0: every whole one).  Errors: a text shorter than the
 * chunks asked for (code 2), the file's. */
int qk_calib_tokenize(const qk_tokenizer *tok, const char *text, int n_ctx, int n_chunks, int32_t **ids,
                      int *chunks, qk_err *err);

/* s's tokens (ids, chunks, bos, add_bos; n_ctx set) from the text, as qk_calib_tokenize. */
int qk_gptq_seq_tokens(qk_gptq_seq *s, const qk_tokenizer *tok, const char *text, int n_chunks, qk_err *err);

/* Whether GPTQ can encode `type` (it has a grid). */
bool qk_gptq_supports(int type);

/* Calibrate on c->text and GPTQ-encode the planned tensors: each such item
 * gets its bytes in ->data (owned by the plan).  Errors: a text shorter
 * than the chunks asked for, a model the engine cannot run or without a
 * tokenizer (code 2), out of memory (3).  A progress bar per layer on a
 * TTY unless quiet. */
int qk_gptq_plan_run(qk_quant_plan *p, qk_gptq_calib *c, bool quiet, qk_err *err);

#endif
