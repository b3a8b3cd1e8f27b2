/* study_run.h - KL divergence of modified forward passes (pipeline-wire
 * codecs, KV-cache codecs) against the unmodified one, over a token stream
 * cut into windows as llama-perplexity cuts it (tools/perplexity/
 * perplexity.cpp at d32676d, kl_divergence()): n_chunk = n_tokens / n_ctx
 * windows of n_ctx tokens, each from an empty cache with its first token
 * replaced by BOS, the logits at positions n_ctx/2 .. n_ctx-2 scored against
 * tokens n_ctx/2+1 .. n_ctx-1.
 *
 * Per scored token: KLD(base || run) = sum_i p_base(i) (log p_base(i) -
 * log p_run(i)), the run's nll -log p_run(token), the base's nll, and
 * whether the two argmaxes agree ("same top p"), as llama-perplexity's KLD
 * block reports them; log-softmax and sums in double, in vocabulary and
 * token order.  The base is the engine with the F32 cache and nothing else.
 * Each window's first half goes through as one batch without logits, its
 * second half as one batch with logits, so a wire message is n_ctx/2
 * tokens.  Results are independent of the thread count. */
#ifndef QK_STUDY_RUN_H
#define QK_STUDY_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/engine/kvquant.h"
#include "lib/engine/model.h"
#include "lib/study/wire.h"

typedef struct qk_study_cfg {
    const qk_wire_spec *wire; /* NULL: no wire */
    const qk_kvq *kvq;        /* NULL: the F32 cache as it is */
} qk_study_cfg;

typedef struct qk_study_res {
    uint64_t n;               /* scored tokens */
    double kld_mean, kld_se;  /* mean KLD and its standard error */
    double kld_p99, kld_max;
    double ppl, ppl_base;     /* exp(mean nll) of the run and of the base */
    double same_top;          /* fraction of tokens whose argmax is the base's */
    int n_boundaries;         /* wire: boundaries in effect (0: none) */
    qk_wire_stats wire;       /* wire: bytes sent, lossless sizes */
    double kv_bytes_token;    /* bytes per cached token, all layers */
} qk_study_res;

/* Run every configuration over chunks [0, n_tokens / n_ctx) of tokens.
 * n_ctx: an even window of at least 4.  res: n_cfg results.  Errors: bad
 * configurations for the model (code 2), too few tokens (code 2), memory. */
int qk_study_run(const qk_model *m, const int32_t *tokens, size_t n_tokens, int n_ctx,
                 int32_t bos, int nthreads, const qk_study_cfg *cfgs, int n_cfg,
                 qk_study_res *res, qk_err *err);

#endif
