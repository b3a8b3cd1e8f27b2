/* sampling.h - choosing the next token from logits.
 *
 * temp <= 0: greedy (the first index of the largest logit, like llama.cpp's
 * greedy sampler).  Otherwise, in llama.cpp's default chain order: keep the
 * top_k largest logits (top_k <= 0: all), keep the smallest prefix of those,
 * sorted by probability, whose probability reaches top_p (top_p >= 1: all;
 * probabilities from the untempered logits), divide the kept logits by temp
 * and draw from their softmax with a seeded xorshift64* generator.  The same
 * seed and logits always give the same tokens. */
#ifndef QK_SAMPLING_H
#define QK_SAMPLING_H

#include <stdint.h>

#include "lib/core/err.h"

typedef struct qk_sampler_params {
    float temp;
    int top_k;
    float top_p;
    uint64_t seed;
} qk_sampler_params;

typedef struct qk_cand {
    int32_t id;
    float logit;
    double p;
} qk_cand;

typedef struct qk_sampler {
    qk_sampler_params p;
    uint64_t rng;
    int n_vocab;
    qk_cand *cand; /* n_vocab scratch */
} qk_sampler;

/* Errors: n_vocab < 1, a negative or non-finite temp or top_p outside
 * (0, 1] (code 2); out of memory (code 3). */
int qk_sampler_init(qk_sampler *s, int n_vocab, const qk_sampler_params *p, qk_err *err);
void qk_sampler_free(qk_sampler *s);
/* The next token for logits[n_vocab]. */
int32_t qk_sample(qk_sampler *s, const float *logits);
/* First index of the largest value of v[0..n) (n >= 1). */
int32_t qk_argmax(const float *v, int n);

#endif
