/* test_f32act.c - float activations and the activation-encoder variants
 * (issue #24).
 * - The float-activation product (cpu.h fdot_tile) of every type with an
 *   encoder, at every SIMD level this CPU has: each output has the bits of
 *   the F32 x F32 product (the scalar table's vec_dot) of the row decoded by
 *   the scalar to_float and the float activation row, for rows of 1, 3 and 9
 *   blocks (the float types also 33, 172 and 520 elements: no multiple of
 *   8 or 32, and longer than a decoded piece), in tiles of 1 .. 16 rows by
 *   1 .. 65 activation rows; for F32 weights the format table's F32 x F32
 *   tile (dot_tile) as well.
 * - qk_matmul with QK_ACT_F32, packed weights included, 1 and 2 threads, 1
 *   and 37 tokens: the bytes of qk_matmul on the same weights decoded to F32.
 * - kernels/actvar.h: QK_ACTV_SAME gives each activation encoder's bytes
 *   (the table's scalar ones) on the golden rows and on blocks
 *   of zeros, ties, tiny and huge values; QK_ACTV_UP and _DOWN keep every
 *   stored scale, move quants by at most one step, and do move some. */
#include <math.h>
#include <string.h>

#include "kernels/actvar.h"
#include "kernels/cpu.h"
#include "kernels/half.h"
#include "lib/engine/matmul.h"
#include "tests/testutil.h" /* criterion.h first */
#include "kernels/types.h"
#include <criterion/parameterized.h>

#define NR 16
#define NT 65

/* Gaussian values (every 37th scaled by 40, an outlier) into x[n]. */
static void fill(float *x, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tu_gauss(s) * (i % 37 == 5 ? 40.0f : 1.0f);
}

static bool same_bits(float a, float b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, 4); }

/* One type and row length: the reference, then every level and tile shape. */
static int check_type(const qk_type_traits *t, int64_t n, uint64_t *s)
{
    const size_t rs = qk_row_size(t->id, n);
    float *w = malloc(sizeof(float) * NR * (size_t)n), *y = malloc(sizeof(float) * NT * (size_t)n);
    float *im = malloc(sizeof(float) * (size_t)n), *deq = malloc(sizeof(float) * NR * (size_t)n);
    float *ref = malloc(sizeof(float) * NR * NT), *got = malloc(sizeof(float) * NR * NT);
    uint8_t *wq = malloc(rs * NR);
    cr_assert(w && y && im && deq && ref && got && wq);
    fill(w, NR * (size_t)n, s);
    fill(y, NT * (size_t)n, s);
    for (int64_t i = 0; i < n; i++)
        im[i] = 0.1f + (float)tu_uniform(s);
    t->quantize(w, wq, NR, n, im);
    t->to_float(wq, deq, NR * n);
    const qk_kernels *f32 = qk_kernels_at(QK_F32, QK_CPU_SCALAR);
    for (int tk = 0; tk < NT; tk++)
        for (int r = 0; r < NR; r++)
            ref[tk * NR + r] = f32->vec_dot(n, deq + (size_t)r * n, y + (size_t)tk * n);
    static const int shapes[][2] = {{1, 1},  {8, 1},  {13, 1}, {16, 1}, {4, 3},  {5, 2},
                                    {16, 7}, {9, 13}, {3, 64}, {2, 65}, {16, 65}};
    int levels = 0;
    for (int l = 0; l <= (int)qk_cpu_supported(); l++) {
        const qk_kernels *k = qk_kernels_at(t->id, l);
        cr_assert(k && k->fdot_tile, "%s: no float-activation product at %s", t->name, qk_cpu_level_name(l));
        /* F32 weights: the F32 x F32 tile of the format table (dot_tile) too */
        for (int dot = 0; dot <= (t->id == QK_F32); dot++)
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
                const int tr = shapes[sh][0], tt = shapes[sh][1];
                memset(got, 0xff, sizeof(float) * NR * NT);
                for (int r0 = 0; r0 < NR; r0 += tr)
                    for (int t0 = 0; t0 < NT; t0 += tt) {
                        const int mr = NR - r0 < tr ? NR - r0 : tr, mt = NT - t0 < tt ? NT - t0 : tt;
                        float *o = got + (size_t)t0 * NR + r0;
                        if (dot)
                            qk_dot_tile(k, n, wq + (size_t)r0 * rs, rs, mr, y + (size_t)t0 * n,
                                        (size_t)n * sizeof(float), mt, o, NR);
                        else
                            qk_fdot_tile(k, n, wq + (size_t)r0 * rs, rs, mr, y + (size_t)t0 * n, (size_t)n, mt,
                                         o, NR);
                    }
                for (int i = 0; i < NR * NT; i++)
                    cr_assert(same_bits(got[i], ref[i]), "%s %s %s, %lld cols, tile %dx%d, out %d: %a, F32 product %a",
                              t->name, dot ? "dot_tile" : "fdot_tile", qk_cpu_level_name(l), (long long)n, tr, tt,
                              i, got[i], ref[i]);
            }
        levels++;
    }
    free(w), free(y), free(im), free(deq), free(ref), free(got), free(wq);
    return levels;
}

/* Every type with an encoder and a decoder (one test each, so the runner spreads them over its jobs). */
static bool f32act_type(const qk_type_traits *t) { return t->quantize && t->to_float && t->blck <= 256; }

ParameterizedTestParameters(f32act, every_type_is_the_f32_product_of_its_decoded_rows)
{
    static int ids[QK_TYPE_MAX];
    size_t n = 0;
    for (int id = qk_type_next(-1); id >= 0; id = qk_type_next(id))
        if (f32act_type(qk_type_get(id)))
            ids[n++] = id;
    return cr_make_param_array(int, ids, n);
}

ParameterizedTest(int *id, f32act, every_type_is_the_f32_product_of_its_decoded_rows)
{
    uint64_t s = 24 + (uint64_t)*id;
    const qk_type_traits *t = qk_type_get(*id);
    const int64_t lens[6] = {t->blck, 3 * t->blck, 9 * t->blck, 33, 172, 520};
    for (int i = 0; i < (t->blck == 1 ? 6 : 3); i++)
        check_type(t, lens[i] < 8 ? 8 * lens[i] : lens[i], &s);
}

Test(f32act, at_least_30_types)
{
    int types = 0;
    for (int id = qk_type_next(-1); id >= 0; id = qk_type_next(id))
        types += f32act_type(qk_type_get(id));
    cr_assert_geq(types, 30, "float-activation products checked for %d types", types);
    cr_log_info("%d types, levels scalar .. %s", types, qk_cpu_level_name(qk_cpu_supported()));
}

/* ---- the engine ----------------------------------------------------------------- */

Test(f32act, matmul_equals_the_weights_dequantized_to_f32)
{
    static const int types[] = {QK_Q4_0, QK_Q8_0, QK_Q4_K, QK_Q6_K, QK_IQ4_XS, QK_TQ2_0, QK_F16, QK_BF16};
    enum { ROWS = 40, COLS = 512 };
    uint64_t s = 5;
    float *w = malloc(sizeof(float) * ROWS * COLS), *x = malloc(sizeof(float) * 37 * COLS);
    float *a = malloc(sizeof(float) * ROWS * 37), *b = malloc(sizeof(float) * ROWS * 37);
    float *deq = malloc(sizeof(float) * ROWS * COLS);
    cr_assert(w && x && a && b && deq);
    fill(x, 37 * COLS, &s);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const qk_type_traits *t = qk_type_get(types[i]);
        fill(w, ROWS * COLS, &s);
        const size_t rs = qk_row_size(t->id, COLS);
        uint8_t *q = malloc(rs * ROWS);
        cr_assert(q);
        t->quantize(w, q, ROWS, COLS, NULL);
        t->to_float(q, deq, ROWS * COLS);
        qk_weight wq = {.type = t->id, .rows = ROWS, .cols = COLS, .row_size = rs, .data = q};
        qk_weight wf = {.type = QK_F32, .rows = ROWS, .cols = COLS, .row_size = 4 * COLS,
                        .data = (const uint8_t *)deq};
        void *mem;
        qk_err err = {0};
        cr_assert_eq(qk_weight_pack(&wq, &mem, &err), 0, "%s", err.msg);
        for (int nt = 1; nt <= 37; nt += 36)
            for (int th = 1; th <= 2; th++) {
                qk_matmul_ws wsq = {.act = QK_ACT_F32}, wsf = {0};
                cr_assert_eq(qk_matmul(&wq, x, nt, a, &wsq, th, &err), 0, "%s", err.msg);
                cr_assert_eq(qk_matmul(&wf, x, nt, b, &wsf, th, &err), 0, "%s", err.msg);
                cr_assert(!memcmp(a, b, sizeof(float) * ROWS * (size_t)nt),
                          "%s%s, %d tokens, %d threads: not the F32 product of the decoded weights", t->name,
                          mem ? " (packed)" : "", nt, th);
                /* and not the default arithmetic (its activations are rounded) */
                qk_matmul_ws wsd = {0};
                cr_assert_eq(qk_matmul(&wq, x, nt, b, &wsd, th, &err), 0, "%s", err.msg);
                cr_assert(memcmp(a, b, sizeof(float) * ROWS * (size_t)nt), "%s: f32 = default", t->name);
                qk_matmul_ws_free(&wsq), qk_matmul_ws_free(&wsf), qk_matmul_ws_free(&wsd);
            }
        free(mem);
        free(q);
    }
    qk_err err = {0};
    int act;
    cr_assert_eq(qk_act_type_parse("f32", &act, &err), 0);
    cr_assert_eq(act, QK_ACT_F32);
    cr_assert_eq(qk_act_type_parse("q8_0", &act, &err), QK_EINPUT);
    free(w), free(x), free(a), free(b), free(deq);
}

/* ---- activation-encoder variants ------------------------------------------------- */

/* Rows of 4096: the golden input rows (scales 1e-4 .. 1e3), then blocks of
 * zeros, of exact ties after scaling (k + 0.5 times amax / 127), of tiny
 * (subnormal) and of huge values. */
static float *variant_rows(int *nrows)
{
    size_t n;
    float *g = tu_read("goldens/ggml/input.f32", &n);
    cr_assert_eq(n, sizeof(float) * 8 * 4096);
    float *x = realloc(g, sizeof(float) * 9 * 4096);
    cr_assert(x);
    float *e = x + 8 * 4096;
    uint64_t s = 9;
    for (int i = 0; i < 4096; i++) {
        const int blk = i / 256;
        e[i] = blk == 0   ? 0.0f
               : blk == 1 ? (float)((i % 64) - 32) + 0.5f
               : blk == 2 ? tu_gauss(&s) * 1e-40f
               : blk == 3 ? tu_gauss(&s) * 1e30f
                          : tu_gauss(&s);
    }
    for (int i = 256; i < 512; i += 32)
        e[i] = 127.0f; /* amax 127: scale 1, the others exact ties */
    *nrows = 9;
    return x;
}

Test(f32act, activation_variants)
{
    static const int types[] = {QK_Q8_0, QK_Q8_1, QK_Q8_K, QK_F16, QK_BF16};
    int nrows;
    float *x = variant_rows(&nrows);
    const int64_t n = 4096;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const qk_type_traits *t = qk_type_get(types[i]);
        const size_t rs = qk_row_size(t->id, n);
        uint8_t *def = malloc(rs), *var = malloc(rs);
        cr_assert(def && var);
        cr_assert_null(qk_actvar_from_float(t->id, QK_ACTV_NONE));
        long moved = 0;
        for (int r = 0; r < nrows; r++) {
            const float *row = x + (size_t)r * n;
            t->from_float(row, def, n);
            qk_actvar_from_float(t->id, QK_ACTV_SAME)(row, var, n);
            cr_assert(!memcmp(def, var, rs), "%s row %d: the unperturbed variant is not the encoder", t->name, r);
            for (int v = QK_ACTV_UP; v <= QK_ACTV_DOWN; v++) {
                qk_actvar_from_float(t->id, v)(row, var, n);
                if (t->id == QK_F16 || t->id == QK_BF16) {
                    for (int64_t j = 0; j < n; j++) {
                        uint16_t a, b;
                        memcpy(&a, def + 2 * j, 2), memcpy(&b, var + 2 * j, 2);
                        cr_assert((a ^ b) < 0x8000 && abs((int)a - (int)b) <= 1,
                                  "%s row %d elt %lld: %04x -> %04x", t->name, r, (long long)j, a, b);
                        moved += a != b;
                    }
                    continue;
                }
                /* the stored scale (and Q8_1's s only through the quants) unchanged,
                 * each quant moved by at most one */
                const size_t bs = t->type_size, qoff = t->id == QK_Q8_0 ? 2 : 4, nq = (size_t)t->blck;
                for (size_t b = 0; b < rs / bs; b++) {
                    const uint8_t *p = def + b * bs, *q = var + b * bs;
                    cr_assert(!memcmp(p, q, t->id == QK_Q8_1 ? 2 : qoff), "%s row %d block %zu: scale moved",
                              t->name, r, b);
                    for (size_t j = 0; j < nq; j++) {
                        const int d = (int8_t)p[qoff + j] - (int8_t)q[qoff + j];
                        cr_assert(d >= -1 && d <= 1, "%s row %d block %zu: quant %zu moved by %d", t->name, r,
                                  b, j, d);
                        moved += d != 0;
                    }
                }
            }
        }
        cr_assert_gt(moved, 0, "%s: the variants move no quant", t->name);
        cr_log_info("%s: %ld values moved by the variants", t->name, moved);
        free(def), free(var);
    }
    cr_assert_null(qk_actvar_from_float(QK_F32, QK_ACTV_UP));
    cr_assert_null(qk_actvar_from_float(QK_Q4_0, QK_ACTV_UP));
    free(x);
}
