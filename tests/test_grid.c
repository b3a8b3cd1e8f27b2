/* test_grid.c - kernels/grid.h against the format table: for every type
 * with a grid, blocks made by the type's own encoder (with and without an
 * importance vector) read back as levels and affine scales give the
 * decoder's values exactly, writing the levels back gives the same bytes,
 * and any other levels written give what the decoder then reads. */
#include <math.h>
#include <string.h>

#include "kernels/grid.h"
#include "kernels/types.h"
#include "tests/testutil.h"

#define ROWS 4
#define COLS 512

static const int grid_types[] = {QK_Q4_0, QK_Q4_1, QK_Q5_0, QK_Q5_1, QK_Q8_0, QK_Q2_K, QK_Q3_K,
                                 QK_Q4_K, QK_Q5_K, QK_Q6_K, QK_IQ4_NL, QK_IQ4_XS};

/* Every block of buf (n_blocks of type t): levels + affine == decoder. */
static void check_blocks(const qk_type_traits *tt, const qk_grid_ops *o, uint8_t *buf, size_t n_blocks,
                         const char *what)
{
    float a[QK_GRID_MAX_BLOCK], b[QK_GRID_MAX_BLOCK], ref[QK_GRID_MAX_BLOCK];
    uint8_t lv[QK_GRID_MAX_BLOCK], copy[512];
    for (size_t k = 0; k < n_blocks; k++) {
        uint8_t *blk = buf + k * tt->type_size;
        tt->to_float(blk, ref, o->block);
        o->get(blk, lv);
        o->affine(blk, a, b);
        for (int i = 0; i < o->block; i++) {
            cr_assert_lt(lv[i], o->n_levels, "%s %s: level out of range", tt->name, what);
            const float v = a[i] * qk_grid_level(o, lv[i]) + b[i];
            cr_assert(v == ref[i] && (v != v) == (ref[i] != ref[i]), "%s %s block %zu elt %d: %g vs decoder %g",
                      tt->name, what, k, i, (double)v, (double)ref[i]);
        }
        memcpy(copy, blk, tt->type_size);
        o->set(copy, lv);
        cr_assert(!memcmp(copy, blk, tt->type_size), "%s %s block %zu: set(get) changed bytes", tt->name, what, k);
    }
}

Test(grid, levels_and_scales_match_the_decoder)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    static float x[ROWS * COLS], imp[COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        x[i] = tu_gauss(&seed) * (i % 97 == 0 ? 8.0f : 1.0f);
    for (int j = 0; j < COLS; j++)
        imp[j] = 0.1f + (float)tu_uniform(&seed);
    for (size_t t = 0; t < sizeof grid_types / sizeof grid_types[0]; t++) {
        const qk_type_traits *tt = qk_type_get(grid_types[t]);
        const qk_grid_ops *o = qk_grid_for(tt->id);
        cr_assert(o && o->block == tt->blck, "%s: grid", tt->name);
        const size_t rs = qk_row_size(tt->id, COLS), nb = ROWS * (COLS / (size_t)tt->blck);
        uint8_t *buf = malloc(ROWS * rs);
        for (int w = 0; w < 2; w++) {
            tt->quantize(x, buf, ROWS, COLS, w ? imp : NULL);
            check_blocks(tt, o, buf, nb, w ? "imatrix" : "plain");
        }
        /* other levels: the decoder reads what set() wrote */
        uint8_t lv[QK_GRID_MAX_BLOCK];
        for (size_t k = 0; k < nb; k++) {
            for (int i = 0; i < o->block; i++)
                lv[i] = (uint8_t)(tu_rand(&seed) % (uint64_t)o->n_levels);
            o->set(buf + k * tt->type_size, lv);
        }
        check_blocks(tt, o, buf, nb, "random levels");
        free(buf);
    }
    cr_assert_null(qk_grid_for(QK_IQ2_XXS));
    cr_assert_null(qk_grid_for(QK_F16));
}

Test(grid, nearest_level)
{
    const qk_grid_ops *o = qk_grid_for(QK_Q4_0);
    float v;
    /* d = -0.5 (Q4_0's scales are often negative): values 4 .. -3.5 */
    cr_assert_eq(qk_grid_nearest(o, -0.5f, 0.0f, 1.2f, &v), 6);
    cr_assert_float_eq(v, 1.0f, 0);
    cr_assert_eq(qk_grid_nearest(o, -0.5f, 0.0f, 100.0f, &v), 0);
    cr_assert_eq(qk_grid_nearest(o, 0.5f, 0.0f, 100.0f, &v), 15);
    cr_assert_eq(qk_grid_nearest(o, 0.5f, 0.0f, -100.0f, &v), 0);
    /* non-linear codebook */
    const qk_grid_ops *n = qk_grid_for(QK_IQ4_NL);
    cr_assert_eq(qk_grid_nearest(n, 1.0f, 0.0f, 30.0f, &v), 10); /* 25 beats 38 */
    cr_assert_float_eq(v, 25.0f, 0);
    /* every w: no level is nearer than the one chosen */
    uint64_t seed = 7;
    for (int t = 0; t < 2000; t++) {
        const qk_grid_ops *g = qk_grid_for(grid_types[t % 12]);
        const float a = (float)(tu_uniform(&seed) - 0.5), b = (float)(tu_uniform(&seed) - 0.5);
        const float w = 40.0f * (float)(tu_uniform(&seed) - 0.5);
        const int l = qk_grid_nearest(g, a, b, w, &v);
        for (int k = 0; k < g->n_levels; k++)
            cr_assert_leq(fabsf(v - w), fabsf(a * qk_grid_level(g, k) + b - w), "type %d", g->type);
        cr_assert_eq(v, a * qk_grid_level(g, l) + b);
    }
}
