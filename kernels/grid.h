/* grid.h - the value grid of an encoded block, for quantizers that choose
 * each element's level themselves once the block's scales are fixed
 * (GPTQ's error feedback, lib/quant/gptq.h).
 *
 * For the legacy types, the K-quants and IQ4_NL/IQ4_XS, element i of an
 * encoded block can take the values a[i] * g[l] + b[i] for the type's
 * levels l = 0 .. n_levels-1 (g ascending), where a and b come from the
 * block's scales (and mins).  affine() reads a and b with the decoder's own
 * float operations, so a[i] * g[l] + b[i] is the decoder's value for level l
 * (a zero may differ in sign); get() and set() read and write the level
 * indices in the block's bit layout, leaving its scales as they are.
 *
 *   Q4_0 g = l-8   Q4_1 g = l      Q5_0 g = l-16   Q5_1 g = l   Q8_0 g = l-127 (-127..127)
 *   Q2_K g = l     Q3_K g = l-4    Q4_K, Q5_K g = l            Q6_K g = l-32
 *   IQ4_NL, IQ4_XS g = the non-linear codebook (kvalues_iq4nl)
 */
#ifndef QK_GRID_H
#define QK_GRID_H

#include <stdbool.h>
#include <stdint.h>

#define QK_GRID_MAX_BLOCK 256

typedef struct qk_grid_ops {
    int type;
    int block;            /* elements per block */
    int n_levels;
    int off;              /* g[l] = l - off ... */
    const int8_t *table;  /* ... or table[l] (ascending) when not NULL */
    /* The type's importance-weighted encoder weighs a block's elements by
     * statistics of the whole row (legacy Q4_0 .. Q5_1: sigma2 over the row),
     * so a block's scales depend on the row around it. */
    bool row_context;
    void (*affine)(const uint8_t *blk, float *a, float *b);
    void (*get)(const uint8_t *blk, uint8_t *lv);
    void (*set)(uint8_t *blk, const uint8_t *lv);
} qk_grid_ops;

/* The grid of a type, or NULL when it has none here. */
const qk_grid_ops *qk_grid_for(int type);

static inline float qk_grid_level(const qk_grid_ops *o, int l)
{
    return (float)(o->table ? o->table[l] : l - o->off);
}

/* The level whose value a * g[l] + b is nearest to w (ties: the lower
 * level); *v gets that value. */
int qk_grid_nearest(const qk_grid_ops *o, float a, float b, float w, float *v);

#endif
