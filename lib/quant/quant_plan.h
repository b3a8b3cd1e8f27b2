/* quant_plan.h - what the planner (quant_model.c) and the writer
 * (quant_write.c) of qk-quant's GGUF path share; lib/quant/ only. */
#ifndef QK_QUANT_PLAN_H
#define QK_QUANT_PLAN_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/quant/quant_model.h"
#include "kernels/types.h"

#define QNT_VERSION 2        /* GGML_QNT_VERSION, general.quantization_version */

/* The plan's private part, allocated right after the public qk_quant_plan. */
typedef struct plan_priv {
    regex_t *re;
    int *tt_type;
    size_t n_re;
    uint64_t n_layer_out;   /* block_count written after --prune-layers */
    bool pruned;
    char arch[64];
} plan_priv;

static inline plan_priv *priv_of(const qk_quant_plan *p) { return (plan_priv *)(p + 1); }

static inline uint64_t nrows_of(const qk_gguf_tensor *t)
{
    return (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
}

static inline bool is_float_type(int t) { return t == QK_F32 || t == QK_F16 || t == QK_BF16; }

#endif
