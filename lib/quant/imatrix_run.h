/* imatrix_run.h - llama-imatrix's run (tools/imatrix/imatrix.cpp,
 * compute_imatrix at llama.cpp d32676d) on qk's engine.
 *
 * The tokens are cut into n_chunk chunks of n_ctx; each is evaluated from an
 * empty cache with its first token replaced by BOS (when the vocabulary adds
 * one).  The engine's product hook (lib/engine/forward.h, mm_hook) hands
 * every input row of the blk.* weights (and of output.weight with
 * process_output) to the statistics (lib/quant/imatrix_stats.h).
 *
 * Which products count is llama-imatrix's rule: a product of fewer than 16
 * rows is ignored, where the rows are those of llama's micro-batch: -b
 * tokens per batch (n_seq = max(1, b / n_ctx) chunks side by side when b
 * exceeds n_ctx), each batch split into micro-batches of min(512, b).  qk
 * evaluates the same micro-batches (or parts of them), so the tokens counted
 * are llama's; the sums add the rows in token order, so the statistics do
 * not depend on the thread count or on how the chunk is split for the
 * engine.
 *
 * After each chunk the statistics are saved every out_freq chunks (and as
 * OUT.at_N every save_freq chunks), as llama-imatrix's --output-frequency
 * and --save-frequency do.
 *
 * Mixture-of-experts layers: the router (ffn_gate_inp) and the shared
 * expert (qwen2moe's ffn_{gate,up,down}_shexp and ffn_gate_inp_shexp) are
 * dense products under the rule above; the expert tensors
 * (ffn_{gate,up,down}_exps, llama.cpp's MUL_MAT_ID) are collected from
 * every micro-batch, however small, as llama-imatrix collects every
 * indirect product: per expert, the rows routed to it (gate and up: the
 * token's input; down: that expert's activation) into its own block of sums
 * and its own count (lib/engine/forward.h exp_hook). */
#ifndef QK_IMATRIX_RUN_H
#define QK_IMATRIX_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/core/progress.h"
#include "lib/engine/model.h"
#include "lib/quant/imatrix_stats.h"

typedef struct qk_imatrix_job {
    const qk_model *model;
    const int32_t *tokens;     /* at least n_chunk * n_ctx */
    int n_ctx, n_chunk;
    int n_batch;               /* llama-imatrix's -b (2048 there) */
    int32_t bos;
    bool add_bos;
    bool process_output;       /* also collect output.weight (when the model has its own) */
    bool want_logits;          /* call on_logits with the second half of each chunk (PPL) */
    int nthreads;
    qk_imx *stats;
    /* The logits of positions pos0 .. pos0+n-1 of chunk `chunk` (0-based), all
     * within n_ctx/2 .. n_ctx-2, in position order; then on_chunk after the
     * chunk.  Either may be NULL; a non-zero return stops the run. */
    int (*on_logits)(void *ud, int chunk, int pos0, int n, const float *logits, qk_err *err);
    int (*on_chunk)(void *ud, int chunk, qk_err *err);
    void *ud;
    /* periodic saves (out_path NULL: none) */
    const char *out_path;
    bool legacy;
    const char *prompt_file;
    int out_freq, save_freq;   /* out_freq >= 1; save_freq 0: none */
    qk_progress *progress;     /* optional: advanced per chunk */
    uint64_t tokens_evaluated; /* out */
} qk_imatrix_job;

/* Run the chunks.  Errors: the forward pass's, a statistic that is no
 * longer finite (code 2), a failed save (code 3). */
int qk_imatrix_run(qk_imatrix_job *j, qk_err *err);

/* Refuse (code 2, naming the file `path`, the first expert tensor and
 * `method`, e.g. "--method gptq") a model with mixture-of-experts layers:
 * the Hessian methods (GPTQ, AWQ) see only dense products.  qk_imatrix_run
 * collects experts and needs no check. */
int qk_calib_dense_check(const qk_model *m, const char *path, const char *method, qk_err *err);

#endif
