/* ppl.h - perplexity and KL-divergence runs as llama-perplexity makes them
 * (tools/perplexity/perplexity.cpp at d32676d: perplexity() and
 * kl_divergence()).
 *
 * The text is tokenized once with BOS (a trailing newline dropped, as
 * llama's -f does) and cut into n_chunk = n_tokens / n_ctx windows of n_ctx
 * tokens; each window is evaluated from an empty cache with its first token
 * replaced by BOS, and only its second half is scored: the logits at
 * positions n_ctx/2 .. n_ctx-2 predict tokens n_ctx/2+1 .. n_ctx-1
 * (n_ctx - 1 - n_ctx/2 rows per chunk).
 *
 * Streaming: a window's first half is evaluated without logits, the second
 * half n_batch tokens at a time; each batch's rows are scored, written to a
 * base file and dropped, so memory holds n_batch rows of logits, never a
 * chunk's or the run's. */
#ifndef QK_PPL_H
#define QK_PPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/eval/kldbase.h"
#include "lib/eval/kldstats.h"
#include "lib/engine/kvquant.h"
#include "lib/engine/model.h"
#include "lib/core/progress.h"
#include "lib/engine/tokenizer.h"

/* llama-perplexity's tokenization of an -f text: one trailing '\n' removed,
 * BOS added as the vocabulary says, control tokens not parsed. */
int qk_ppl_tokenize(const qk_tokenizer *t, const char *text, size_t n, int32_t **ids,
                    size_t *n_ids, qk_err *err);

/* -log p(tok) from logits[0..n_vocab): with file_formula the float steps of
 * llama's base-file writer (max + log-sum-exp - logit), else the double ones
 * of its plain perplexity path. */
double qk_ppl_nll(const float *logits, int n_vocab, int tok, bool file_formula);
/* rec[r].nll = qk_ppl_nll(logits + r * n_vocab, n_vocab, target[r], false),
 * the rest of rec[r] zero, for r < n, the rows spread over nthreads. */
void qk_ppl_nll_rows(const float *logits, int n_vocab, const int32_t *target, int n, qk_kld_tok *rec,
                     int nthreads);
/* Exact log-probabilities in float: logit - max - (float)log(sum exp). */
void qk_ppl_logprobs(const float *logits, int n_vocab, float *lp);
/* One token of a KL-divergence run against base log-probs base_lp (llama's
 * log_softmax(..., kl_divergence_result &), the model's log-probs computed
 * as qk_ppl_logprobs computes the base's: identical logits score exactly 0). */
void qk_kld_score(const float *logits, const float *base_lp, int n_vocab, int tok,
                  qk_kld_tok *out);

/* A further run of the model under test in the same pass (qk-kld
 * --split-error, --noise-floor; lib/eval/kldsplit.h): the same weights under
 * other arithmetic, with its own cache, scored token by token into the
 * accumulators that are set (each in KLD mode):
 *   vs_base   the variant against the base (needs one: base_model or base_in);
 *   vs_model  the variant against the model under test as the base;
 *   model_vs  the model under test against the variant as the base. */
typedef struct qk_ppl_variant {
    int act_type, act_variant;   /* forward.h qk_ctx_params */
    qk_kld_acc *vs_base, *vs_model, *model_vs;
} qk_ppl_variant;

#define QK_PPL_MAX_VARIANTS 4

typedef struct qk_ppl_job {
    const qk_model *model;       /* the model under test (Q) */
    const qk_model *base_model;  /* optional: the base, evaluated in the same pass */
    qk_kldb_reader *base_in;     /* optional: base log-probs from a file */
    qk_kldb_writer *base_out;    /* optional: write the model's rows as a base file */
    const int32_t *tokens;       /* at least n_chunk * n_ctx */
    int n_ctx;
    int chunk_a, chunk_b;        /* chunks [a, b) */
    int32_t bos;
    bool add_bos;
    int n_batch;                 /* tokens per forward call (0: 512, at most n_ctx); their
                                  * logits are made and scored in steps of as many rows as
                                  * fit QK_PPL_LOGITS_BUDGET (32 .. n_batch) */
    int nthreads;
    int kv_type;                 /* QK_F16 (llama.cpp's cache) or QK_F32 */
    int act_type;                /* the model under test's products: QK_ACT_DEFAULT or QK_ACT_F32
                                  * (lib/engine/matmul.h); the base model's are always default */
    const qk_ppl_variant *variants; /* n_variants <= QK_PPL_MAX_VARIANTS (no studies with them) */
    int n_variants;
    /* numerics studies (docs/studies.md), applied to the model under test
     * only (not to base_model): lib/study/wire.h's hook and a KV codec */
    int (*layer_hook)(void *user, int layer, float *x, int n_tok, int n_embd, qk_err *err);
    void *hook_user;
    const qk_kvq *kvq;           /* needs kv_type QK_F32 */
    qk_kld_acc *acc;             /* records are added here in token order */
    void (*on_chunk)(void *ud, int chunk_no, const qk_kld_acc *a);
    void *ud;
    qk_progress *progress;       /* optional: advanced per chunk */
    uint64_t tokens_evaluated;   /* out: tokens through each model's forward pass */
} qk_ppl_job;

/* Run the chunks.  KLD mode when base_model or base_in is given (acc must
 * be in that mode).  Errors: a forward-pass or base-file error. */
int qk_ppl_run(qk_ppl_job *j, qk_err *err);

/* Bytes of logits one scoring step may hold (per model; the base's
 * log-probs as many again).  16 MiB: 85 rows of a 49,152-token vocabulary;
 * smol135m F16 qk-kld peak RSS 391 -> 326 MB, wall time +1-3 %. */
#define QK_PPL_LOGITS_BUDGET (16u << 20)

#endif
