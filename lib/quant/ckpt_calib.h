/* ckpt_calib.h - calibrated Hugging Face checkpoints: qk-quant --to
 * ct-w4a16 --method gptq --calib TEXT SRC OUT_DIR, GPTQ as llm-compressor's
 * GPTQModifier runs it (llm-compressor 0.14, compressed-tensors 0.19).
 *
 * The model (a float HF directory) runs on qk's engine through the
 * sequential pipeline of lib/quant/gptq_model.h: per decoder layer the
 * Hessians of its four inputs are summed over every calibration chunk, the
 * layer's linear modules are GPTQ-quantized (lib/quant/gptq.h,
 * qk_gptq_quantize_int) and the layer runs again on the quantized weights
 * for the next one, as llm-compressor's sequential pipeline propagates the
 * quantized layers' outputs.  Per module, as GPTQModifier does it:
 *  - the scales (and zero points) are the weight observer's, fixed before
 *    GPTQ: compressed-tensors' min-max rule on the original weights (the
 *    same numbers qk-quant --to writes without calibration);
 *  - dampening 0.01 of the mean Hessian diagonal, lazy batches of 128
 *    columns, columns by decreasing Hessian diagonal (actorder "static", an
 *    alias of "weight" since compressed-tensors 0.19: the scales stay with
 *    their own columns, so the checkpoint has no g_idx; "group" was removed
 *    from compressed-tensors and is not offered);
 *  - each column's levels are compressed-tensors' fake_quantize of the
 *    error-updated weights.
 * Only the codes differ from round to nearest: the writer (ckpt_write.c)
 * encodes every module as usual and takes the codes from here.
 *
 * --method awq: AWQ's scales as llm-compressor's AWQModifier computes them
 * (ckpt_awq.c: grid 20, duo scaling, its default Llama mappings), folded
 * into the preceding norm or linear module; the writer rounds the smoothed
 * weights to nearest, as QuantizationModifier does after AWQModifier.
 *
 * --method smoothquant (--to ct-w8a8): SmoothQuantModifier's per-channel
 * scales (ckpt_sq.c: its default Llama mappings input_layernorm -> q/k/v
 * and post_attention_layernorm -> gate/up), folded into the norms and the
 * balance layers' columns, then round to nearest by the writer;
 * smoothquant+gptq: the recipe [SmoothQuantModifier, GPTQModifier]: GPTQ
 * (8-bit channel levels) on the smoothed model.  Each module gets both its
 * smoothed floats (the writer's scales: the observer's on them) and its
 * levels. */
#ifndef QK_CKPT_CALIB_H
#define QK_CKPT_CALIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/scaled.h"
#include "lib/core/err.h"
#include "lib/quant/gptq.h"

enum { QK_CALIB_RTN = 0, QK_CALIB_GPTQ = 1, QK_CALIB_AWQ = 2, QK_CALIB_SQ = 3, QK_CALIB_SQ_GPTQ = 4 };

typedef struct qk_ckpt_calib {
    int method;            /* QK_CALIB_* */
    const char *text;      /* calibration text file */
    const char *tokenizer; /* tokenizer file (GGUF, tokenizer.json, HF directory); NULL: SRC's tokenizer.json */
    int n_ctx;             /* tokens per chunk */
    int n_chunks;          /* 0: every whole chunk of the text */
    qk_gptq_opts o;        /* damp, act_order, nthreads */
    double alpha;          /* SmoothQuant's smoothing strength, in [0, 1] (0.5) */
    bool quiet;
    /* out */
    int chunks_used;
    int n_gptq;            /* modules GPTQ quantized */
    double loss;           /* the sum of their GPTQ losses */
} qk_ckpt_calib;

/* One module's levels (GPTQ) or new float weights (AWQ: smoothed linear
 * modules and norms), rows x cols in the checkpoint's row order. */
typedef struct qk_calib_mod {
    char *name;            /* the HF module (model.layers.0.self_attn.q_proj) */
    int64_t rows, cols;
    int8_t *q;
    float *x;
} qk_calib_mod;

typedef struct qk_calib_res {
    qk_calib_mod *m;
    size_t n;
} qk_calib_res;

/* What the writer quantizes: the scheme and its options, and the modules. */
typedef struct qk_calib_target {
    const char *scheme;             /* the --to name, for messages */
    const qk_scheme *s;
    qk_scheme_opts so;
    const char *const *modules;
    size_t n_modules;
} qk_calib_target;

/* Whether method applies to the --to scheme (GPTQ: ct-w4a16, ct-w8a8; AWQ:
 * ct-w4a16; SmoothQuant: ct-w8a8 and "dense" (f32, f16, bf16: the smoothed
 * float model); SmoothQuant + GPTQ: ct-w8a8). */
bool qk_calib_supports(int method, const char *scheme);
/* The --method name of a QK_CALIB_* ("smoothquant+gptq"), the schemes it
 * applies to (for messages), and the method of a name (-1: none). */
const char *qk_calib_method_name(int method);
const char *qk_calib_method_schemes(int method);
int qk_calib_method_by_name(const char *name);

/* Calibrate src_dir's model and quantize t's modules.  Errors (code 2): a
 * quantized or mixture-of-experts source, a module the pipeline does not
 * see (not a product of a decoder layer), a text shorter than the chunks
 * asked for, no tokenizer; out of memory (3). */
int qk_ckpt_calibrate(const char *src_dir, const qk_calib_target *t, qk_ckpt_calib *c, qk_calib_res *res,
                      qk_err *err);
const qk_calib_mod *qk_calib_find(const qk_calib_res *r, const char *module);
/* The new float values of tensor `name` (MODULE.weight), or NULL. */
const float *qk_calib_floats(const qk_calib_res *r, const char *name);
/* Replace the codes of an encoded module (qk_scheme_encode's bytes, layout
 * l) by m's levels. */
void qk_calib_put_codes(const qk_calib_mod *m, const qk_scheme *s, const qk_scheme_layout *l, uint8_t *enc);
void qk_calib_res_free(qk_calib_res *r);

#endif
