/* kldsplit.h - qk-kld's error split and noise floor (issue #24).
 *
 * Both are more runs of the model under test in the pass over the text
 * (lib/eval/ppl.h qk_ppl_variant: same weights, own cache):
 *
 * --split-error  one run with float activations (QK_ACT_F32: the weights
 *   dequantized to F32, bit for bit), giving three figures:
 *     total        the model under test (default arithmetic, activations
 *                  encoded as llama.cpp does) against the base;
 *     weights      the f32-activation run against the base: the error of
 *                  the weights' quantization alone;
 *     activations  the default run against the f32-activation run as the
 *                  base: what the activation encoding adds, same weights.
 * --noise-floor  two runs whose activation encoders are numerically
 *   equivalent variants of the default ones (kernels/actvar.h: every
 *   block's inverse scale one ulp up, resp. down, ties rounded the other
 *   way), each scored against the model under test as the base; their
 *   records pooled are the floor: how far two correct implementations of the
 *   same arithmetic drift apart on this model and text.  A run with float
 *   activations rounds no activation, so its floor is zero (no passes).
 *
 * Each figure: Mean KLD, 99.0 % KLD and Same top p, each with its error
 * (the mean's and same top's as llama-perplexity computes them; the
 * percentile's from the order statistics: half the distance between the
 * percentiles at p -+ sqrt(p (1 - p) / n)). */
#ifndef QK_KLDSPLIT_H
#define QK_KLDSPLIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/core/json.h"
#include "lib/eval/kldstats.h"
#include "lib/eval/ppl.h"

typedef struct qk_kld_figure {
    qk_kld_ve mean, p99, same_top; /* Mean KLD, 99.0% KLD, Same top p (percent) */
    uint64_t count;                /* tokens scored */
} qk_kld_figure;

typedef struct qk_kld_extra {
    bool split, floor;
    int floor_passes;              /* variant runs behind the floor (0: f32 activations) */
    qk_ppl_variant v[3];
    int n_variants;
    qk_kld_acc weights, share, noise;
    /* after qk_kld_extra_finish */
    qk_kld_figure total, wts, act, flr;
} qk_kld_extra;

/* The variant runs for --split-error and/or --noise-floor of a run whose
 * model under test has act_type (QK_ACT_*; the split needs QK_ACT_DEFAULT). */
void qk_kld_extra_init(qk_kld_extra *x, bool split, bool floor, int act_type);
void qk_kld_extra_free(qk_kld_extra *x);
/* The figures, once the run is over; total: the run's own accumulator
 * (KLD mode, at least one token). */
void qk_kld_extra_finish(qk_kld_extra *x, qk_kld_acc *total);

/* The figure of one accumulator (KLD mode; sorts its values). */
qk_kld_figure qk_kld_figure_of(qk_kld_acc *a);
/* Whether f's Mean KLD lies beyond the floor's by more than twice their
 * combined error. */
bool qk_kld_above_floor(const qk_kld_figure *f, const qk_kld_figure *floor);

/* The text block after llama-perplexity's statistics. */
void qk_kld_extra_print(FILE *f, const qk_kld_extra *x);
/* key: {"value": v.v, "error": v.e} */
void qk_kld_json_ve(qk_json *j, const char *key, qk_kld_ve v);
/* "split" and/or "noise_floor" keys of the --json report (schema in qk-kld(1)). */
void qk_kld_extra_json(qk_json *j, const qk_kld_extra *x);

#endif
