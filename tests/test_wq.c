/* The parted checkpoint layouts (kernels/wq.h): every layout the table has,
 * on synthetic parts, against
 *   - the float-dot order (kernels/fdot.h) over the table's own decoded row
 *     (bit for bit: the float-activation product of the dequantized row),
 *   - the exact integer sums of wq_int.c recomputed here from the codes
 *     (bit for bit),
 *   - every SIMD level (memcmp), whatever the tile shape.
 * The encoders' rules (vLLM's and compressed-tensors') are checked on the
 * values where the rules bite: the row maximum, ties, clamping. */
#include <math.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/elements.h"
#include "kernels/fdot.h"
#include "kernels/fp4.h"
#include "kernels/half.h"
#include "kernels/types.h"
#include "kernels/wq.h"
#include "tests/testutil.h"

#define NR 19   /* rows: not a multiple of 4 or 8 */
#define NT 5    /* tokens */

typedef struct view {
    qk_wq w;
    void *mem[8];
    int nmem;
    const char *label;
} view;

static void *own(view *v, size_t n)
{
    void *p = calloc(1, n ? n : 1);
    cr_assert(p);
    v->mem[v->nmem++] = p;
    return p;
}

static void view_free(view *v)
{
    for (int i = 0; i < v->nmem; i++)
        free(v->mem[i]);
}

static uint8_t *rbytes(view *v, size_t n, uint64_t *rng, unsigned mask, bool no_fp8_nan)
{
    uint8_t *p = own(v, n + 64);
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)(tu_rand(rng) >> 24) & (uint8_t)mask;
        if (no_fp8_nan && (b & 0x7F) == 0x7F)
            b ^= 1;
        p[i] = b;
    }
    return p;
}

static uint8_t *rscales(view *v, size_t n, int type, uint64_t *rng)
{
    const size_t es = type == QK_F32 ? 4 : type == QK_F16 || type == QK_BF16 ? 2 : 1;
    uint8_t *p = own(v, n * es + 64);
    for (size_t i = 0; i < n; i++) {
        const float s = (float)(0.002 + 0.02 * tu_uniform(rng));
        if (type == QK_F32)
            memcpy(p + 4 * i, &s, 4);
        else if (type == QK_F16) {
            const uint16_t h = qk_f32_to_f16(s);
            memcpy(p + 2 * i, &h, 2);
        } else if (type == QK_BF16) {
            const uint16_t h = qk_f32_to_bf16(s);
            memcpy(p + 2 * i, &h, 2);
        } else if (type == QK_E8M0)
            p[i] = (uint8_t)(120 + tu_rand(rng) % 6);
        else /* E4M3 block scales: positive, normal */
            p[i] = (uint8_t)(0x20 + tu_rand(rng) % 0x50);
    }
    return p;
}

static qk_wq_grid grid(const uint8_t *p, int type, int64_t rdiv, int64_t cdiv, int64_t rs, int64_t cs)
{
    return (qk_wq_grid){.p = p, .type = type, .rdiv = rdiv, .cdiv = cdiv, .rs = rs, .cs = cs};
}

/* The layouts, n columns each (a multiple of 128 plus a tail where the layout allows). */
enum { V_FP8_CH, V_FP8_TENSOR_BF16, V_FP8_BLOCK, V_MXFP8, V_INT8_CH, V_INT8_ZERO, V_PACK4_G32, V_PACK4_ASYM,
       V_PACK8_CH, V_PACK3_STREAM, V_PACK4_GIDX, V_NVFP4_CT, V_NVFP4_MO, V_NVFP4_TINY, V_MXFP4, V_GPTQ4, V_GPTQ4_GIDX, V_AWQ4,
       V_MLX4, V_MLX3, V_BNB4, V_BNB4_NESTED, V_BNB8, V_COUNT };

static void make(view *v, int kind, int64_t n, uint64_t seed)
{
    memset(v, 0, sizeof *v);
    uint64_t rng = seed;
    qk_wq *w = &v->w;
    w->act = QK_F32;
    w->rows = NR;
    w->cols = n;
    w->g = 1.0f;
    const int64_t r = NR;
    switch (kind) {
    case V_FP8_CH:
    case V_FP8_TENSOR_BF16:
    case V_FP8_BLOCK:
    case V_MXFP8: {
        v->label = kind == V_FP8_CH ? "fp8 channel" : kind == V_FP8_BLOCK ? "fp8 block" : kind == V_MXFP8 ? "mxfp8" : "fp8 tensor bf16";
        w->type = QK_W_FP8;
        w->elem = QK_ELEM_FP8_E4M3;
        w->q = rbytes(v, (size_t)(r * n), &rng, 0xFF, true);
        w->q_rs = n;
        if (kind == V_FP8_CH)
            w->s = grid(rscales(v, (size_t)r, QK_F32, &rng), QK_F32, 1, n, 1, 1);
        else if (kind == V_FP8_TENSOR_BF16)
            w->s = grid(rscales(v, 1, QK_BF16, &rng), QK_BF16, r, n, 1, 1);
        else if (kind == V_FP8_BLOCK) /* 8 x 64 blocks, partial at the edges */
            w->s = grid(rscales(v, (size_t)((r + 7) / 8 * ((n + 63) / 64)), QK_F32, &rng), QK_F32, 8, 64, (n + 63) / 64, 1);
        else
            w->s = grid(rscales(v, (size_t)(r * n / 32), QK_E8M0, &rng), QK_E8M0, 1, 32, n / 32, 1);
        break;
    }
    case V_INT8_CH:
    case V_INT8_ZERO:
        v->label = kind == V_INT8_CH ? "int8 channel" : "int8 asym g64";
        w->type = QK_W_INT8;
        w->q = rbytes(v, (size_t)(r * n), &rng, 0xFF, false);
        w->q_rs = n;
        if (kind == V_INT8_CH) {
            w->s = grid(rscales(v, (size_t)r, QK_F32, &rng), QK_F32, 1, n, 1, 1);
        } else {
            w->s = grid(rscales(v, (size_t)(r * n / 64), QK_BF16, &rng), QK_BF16, 1, 64, n / 64, 1);
            w->z = grid(rbytes(v, (size_t)(r * n / 64), &rng, 0x1F, false), QK_I8, 1, 64, n / 64, 1);
        }
        break;
    case V_PACK4_G32:
    case V_PACK4_ASYM:
    case V_PACK8_CH:
    case V_PACK3_STREAM:
    case V_PACK4_GIDX: {
        const int b = kind == V_PACK8_CH ? 8 : kind == V_PACK3_STREAM ? 3 : 4;
        v->label = kind == V_PACK4_G32 ? "pack4 g32" : kind == V_PACK4_ASYM ? "pack4 asym g128" : kind == V_PACK8_CH ? "pack8 channel"
                   : kind == V_PACK3_STREAM ? "pack3 stream g32" : "pack4 g_idx";
        w->type = QK_W_PACK;
        w->bits = b;
        w->order = kind == V_PACK3_STREAM ? QK_WQ_STREAM : QK_WQ_WORDS;
        w->code_offset = 1 << (b - 1);
        const int64_t words = kind == V_PACK3_STREAM ? (n * b + 31) / 32 : (n + 32 / b - 1) / (32 / b);
        w->q = rbytes(v, (size_t)(r * words * 4), &rng, 0xFF, false);
        w->q_rs = words * 4;
        const int64_t g = kind == V_PACK8_CH ? n : kind == V_PACK4_ASYM ? 128 : 32, ng = (n + g - 1) / g;
        w->s = grid(rscales(v, (size_t)(r * ng), QK_BF16, &rng), QK_BF16, 1, g, ng, 1);
        if (kind == V_PACK4_ASYM) { /* I32 [ceil(N/8), ng] */
            w->z = grid(rbytes(v, (size_t)((r + 7) / 8 * ng * 4), &rng, 0xFF, false), QK_I32, 1, g, ng, 1);
            w->z.bits = 4;
            w->z.offset = -8;
        }
        if (kind == V_PACK4_GIDX) {
            int32_t *gi = own(v, (size_t)n * 4);
            for (int64_t k = 0; k < n; k++)
                gi[k] = (int32_t)(tu_rand(&rng) % (uint64_t)ng);
            w->gidx = (const uint8_t *)gi;
        }
        break;
    }
    case V_NVFP4_CT:
    case V_NVFP4_MO:
    case V_NVFP4_TINY:
    case V_MXFP4: {
        v->label = kind == V_NVFP4_CT     ? "nvfp4 ct"
                   : kind == V_NVFP4_MO   ? "nvfp4 modelopt"
                   : kind == V_NVFP4_TINY ? "nvfp4 subnormal multipliers"
                                          : "mxfp4";
        w->type = kind == V_MXFP4 ? QK_W_MXFP4 : QK_W_NVFP4;
        w->elem = QK_ELEM_FP4_E2M1;
        w->q = rbytes(v, (size_t)(r * n / 2), &rng, 0xFF, false);
        w->q_rs = n / 2;
        const int64_t g = kind == V_MXFP4 ? 32 : 16;
        const int st = kind == V_MXFP4 ? QK_E8M0 : QK_F8_E4M3;
        w->s = grid(rscales(v, (size_t)(r * n / g), st, &rng), st, 1, g, n / g, 1);
        if (kind == V_NVFP4_CT) {
            w->g = 2688.0f / 3.7f;
            w->g_div = true;
        } else if (kind == V_NVFP4_MO) {
            w->g = 3.7f / 2688.0f;
        } else if (kind == V_NVFP4_TINY) {
            /* the smallest scale (0.125, byte 0x20) gives a subnormal multiplier,
             * its half inexact (avx2_wq.c's fp4_halves falls back) */
            w->g = 1.106e37f;
            w->g_div = true;
        }
        break;
    }
    case V_GPTQ4:
    case V_GPTQ4_GIDX:
    case V_AWQ4: {
        v->label = kind == V_GPTQ4 ? "gptq4 g64" : kind == V_AWQ4 ? "awq4 g64" : "gptq4 g_idx";
        const bool awq = kind == V_AWQ4;
        w->type = awq ? QK_W_AWQ : QK_W_GPTQ;
        w->order = awq ? QK_WQ_AWQ : QK_WQ_GPTQ;
        w->bits = 4;
        w->rows = 24; /* AWQ packs 8 outputs a word */
        const int64_t rr = w->rows, g = 64, ng = n / g;
        w->q = rbytes(v, (size_t)(rr * n / 2), &rng, 0xFF, false);
        w->s = grid(rscales(v, (size_t)(ng * rr), QK_F16, &rng), QK_F16, 1, g, 1, rr);
        w->z = grid(rbytes(v, (size_t)(ng * rr / 2), &rng, 0xFF, false), QK_I32, 1, g, 1, rr / 8);
        w->z.bits = 4;
        w->z.offset = awq ? 0 : 1;
        w->z.awq_order = awq;
        if (kind == V_GPTQ4_GIDX) {
            int32_t *gi = own(v, (size_t)n * 4);
            for (int64_t k = 0; k < n; k++)
                gi[k] = (int32_t)(tu_rand(&rng) % (uint64_t)ng);
            w->gidx = (const uint8_t *)gi;
        }
        break;
    }
    case V_MLX4:
    case V_MLX3: {
        const int b = kind == V_MLX4 ? 4 : 3;
        v->label = kind == V_MLX4 ? "mlx q4 g64" : "mlx q3 g32";
        w->type = QK_W_MLX;
        w->order = QK_WQ_STREAM;
        w->bits = b;
        w->bias = true;
        const int64_t g = b == 4 ? 64 : 32, ng = n / g;
        w->q_rs = n * b / 32 * 4;
        w->q = rbytes(v, (size_t)(r * w->q_rs), &rng, 0xFF, false);
        w->s = grid(rscales(v, (size_t)(r * ng), QK_F16, &rng), QK_F16, 1, g, ng, 1);
        w->z = grid(rscales(v, (size_t)(r * ng), QK_F16, &rng), QK_F16, 1, g, ng, 1);
        break;
    }
    case V_BNB4:
    case V_BNB4_NESTED: {
        v->label = kind == V_BNB4 ? "bnb nf4" : "bnb nf4 nested";
        w->type = QK_W_BNB4;
        w->elem = QK_ELEM_NF4;
        w->block = 64;
        w->q = rbytes(v, (size_t)(r * n / 2), &rng, 0xFF, false);
        w->qmap = (const uint8_t *)qk_nf4_values;
        const int64_t nb = r * n / 64;
        if (kind == V_BNB4) {
            w->s = grid(rscales(v, (size_t)nb, QK_F32, &rng), QK_F32, 1, 64, 0, 0);
        } else {
            float *nm = own(v, 256 * 4), *na = own(v, (size_t)(nb / 256 + 1) * 4);
            for (int i = 0; i < 256; i++)
                nm[i] = (float)(i - 128) / 128.0f;
            for (int64_t i = 0; i <= nb / 256; i++)
                na[i] = 0.01f + 0.001f * (float)i;
            w->s = grid(rbytes(v, (size_t)nb, &rng, 0xFF, false), QK_U8, 1, 64, 0, 0);
            w->nested_map = (const uint8_t *)nm;
            w->nested_absmax = (const uint8_t *)na;
            w->nested_block = 256;
            w->nested_offset = 0.02f;
        }
        break;
    }
    default: /* V_BNB8 */
        v->label = "bnb llm.int8";
        w->type = QK_W_BNB8;
        w->q = rbytes(v, (size_t)(r * n), &rng, 0xFF, false);
        w->q_rs = n;
        w->s = grid(rscales(v, (size_t)r, QK_F32, &rng), QK_F32, 1, n, 1, 1);
        break;
    }
}

/* Columns that each layout takes: a multiple of its unit, with a tail past the last 8 where it can. */
static int64_t cols_of(int kind)
{
    switch (kind) {
    case V_FP8_CH: case V_FP8_TENSOR_BF16: case V_FP8_BLOCK: case V_INT8_CH: case V_BNB8: return 332; /* 41 x 8 + 4 */
    case V_PACK8_CH: return 260;
    default: return 256;
    }
}

static float *rand_x(int64_t n, int nt, uint64_t *rng)
{
    float *x = malloc((size_t)(n * nt) * sizeof *x);
    cr_assert(x);
    for (int64_t i = 0; i < n * nt; i++)
        x[i] = tu_gauss(rng) * (i % 37 == 0 ? 8.0f : 1.0f);
    return x;
}

/* The activation rows of x for w (nt rows), encoded by the table's scalar encoder. */
static uint8_t *encode(const qk_wq *w, const float *x, int nt, size_t *ys)
{
    const int64_t n = w->cols;
    *ys = w->act == QK_F32 ? (size_t)n * 4 : qk_row_size(w->act, n);
    uint8_t *y = calloc((size_t)nt, *ys + 64);
    cr_assert(y);
    for (int t = 0; t < nt; t++) {
        if (w->act == QK_F32)
            memcpy(y + (size_t)t * *ys, x + t * n, (size_t)n * 4);
        else
            qk_kernels_at(w->act, QK_CPU_SCALAR)->wq_act(w, x + t * n, y + (size_t)t * *ys, n);
    }
    return y;
}

/* The float-dot order (kernels/fdot.h) over row and x. */
static float wq_order(const float *row, const float *x, int64_t n)
{
    qk_fdot_acc a;
    qk_fdot_begin(&a, n);
    qk_fdot_feed(&a, 0, row, x, n);
    return qk_fdot_end(&a);
}

/* k's wq_tile of wp over its first R rows and T tokens in tiles of rt rows
 * x tt tokens, into got (token t at t * ldo; zeros first). */
static void tiled(const qk_kernels *k, const qk_wq *wp, const uint8_t *y, size_t ys, int R, int T, int rt, int tt,
                  float *got, size_t ldo)
{
    memset(got, 0, sizeof *got * ldo * (size_t)T);
    for (int r0 = 0; r0 < R; r0 += rt)
        for (int t0 = 0; t0 < T; t0 += tt) {
            const int mr = R - r0 < rt ? R - r0 : rt, mt = T - t0 < tt ? T - t0 : tt;
            k->wq_tile(wp, r0, mr, y + (size_t)t0 * ys, ys, mt, got + (size_t)t0 * ldo + r0, ldo);
        }
}

/* A level that repacks the rows at load (cpu.h wq_pack): the first rows of
 * the view (whole groups of 8; every group when the pack is built whole or
 * in pieces) packed, then its products over several tile shapes (tiles that
 * start or end inside a group too) give want's bits. */
static void check_packed(const view *v, const qk_kernels *kl, const float *want, const uint8_t *y, size_t ys)
{
    if (!kl->wq_pack)
        return;
    qk_wq w = v->w;
    const int nr = (int)v->w.rows;
    w.rows = w.type == QK_W_AWQ ? w.rows : w.rows / 8 * 8; /* AWQ's words span the rows: keep them all */
    const size_t bytes = w.rows % 8 ? 0 : kl->wq_pack(&w, NULL, 0, 0);
    if (!bytes)
        return;
    uint8_t *pk = malloc(bytes);
    cr_assert(pk);
    kl->wq_pack(&w, pk, 0, 1);
    kl->wq_pack(&w, pk, 1, w.rows / 8);
    w.packed = pk;
    static const int shapes[][2] = {{16, NT}, {8, 1}, {16, 1}, {5, 2}, {3, 1}, {12, 4}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int tr = shapes[s][0], tt = shapes[s][1];
        float o[NT * 32];
        tiled(kl, &w, y, ys, (int)w.rows, NT, tr, tt, o, (size_t)nr);
        for (int t = 0; t < NT; t++)
            cr_assert(memcmp(o + t * nr, want + t * nr, sizeof(float) * (size_t)w.rows) == 0,
                      "%s act %s: packed tiles %dx%d differ (token %d)", v->label, qk_type_get(w.act)->name, tr, tt, t);
    }
    free(pk);
}

/* The scalar tile, the reference arithmetic recomputed here, and every SIMD
 * level over several tile shapes: all the same bits. */
static void check(const view *v, const float *want, const uint8_t *y, size_t ys)
{
    const qk_wq *w = &v->w;
    const int nr = (int)w->rows;
    float got[NT * 32];
    const qk_kernels *ks = qk_kernels_at(w->type, QK_CPU_SCALAR);
    ks->wq_tile(w, 0, nr, y, ys, NT, got, (size_t)nr);
    for (int i = 0; i < nr * NT; i++)
        cr_assert(memcmp(&got[i], &want[i], 4) == 0, "%s act %s: scalar (%d, %d) = %a, the rule gives %a", v->label,
                  qk_type_get(w->act)->name, i / nr, i % nr, (double)got[i], (double)want[i]);
    for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
        const qk_kernels *kl = qk_kernels_at(w->type, level);
        static const int shapes[][2] = {{32, NT}, {8, 1}, {4, 2}, {1, 1}, {3, 3}, {12, 4}};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int tr = shapes[s][0], tt = shapes[s][1];
            float o[NT * 32];
            for (int r0 = 0; r0 < nr; r0 += tr)
                for (int t0 = 0; t0 < NT; t0 += tt) {
                    const int mr = nr - r0 < tr ? nr - r0 : tr, mt = NT - t0 < tt ? NT - t0 : tt;
                    kl->wq_tile(w, r0, mr, y + (size_t)t0 * ys, ys, mt, o + (size_t)t0 * nr + r0, (size_t)nr);
                }
            cr_assert(memcmp(o, want, sizeof(float) * (size_t)(nr * NT)) == 0, "%s act %s: %s tiles %dx%d differ",
                      v->label, qk_type_get(w->act)->name, qk_cpu_level_name(level), tr, tt);
        }
        check_packed(v, kl, want, y, ys);
    }
}

/* Float activations (F32, or a float encoding): the decoded row in the float order. */
static void float_case(view *v, int act, int64_t agroup, bool astatic)
{
    qk_wq *w = &v->w;
    w->act = act;
    w->a_group = agroup;
    w->a_static = astatic;
    w->a_scale = 0.03f;
    const int64_t n = w->cols;
    uint64_t rng = 0xF1047ull + (uint64_t)act;
    float *x = rand_x(n, NT, &rng);
    size_t ys;
    uint8_t *y = encode(w, x, NT, &ys);
    float *row = malloc((size_t)n * sizeof *row), want[NT * 32];
    cr_assert(row);
    for (int r = 0; r < w->rows; r++) {
        qk_type_get(w->type)->wq_rows(w, r, 1, row);
        for (int t = 0; t < NT; t++)
            want[t * w->rows + r] = wq_order(row, (const float *)(y + (size_t)t * ys), n);
    }
    check(v, want, y, ys);
    free(row), free(x), free(y);
}

Test(wq, float_products_every_layout)
{
    for (int kind = 0; kind < V_COUNT; kind++) {
        view v;
        make(&v, kind, cols_of(kind), 0x1234567ull * (uint64_t)(kind + 1));
        float_case(&v, QK_F32, 0, false);
        float_case(&v, QK_A_FP8, 0, false);
        float_case(&v, QK_A_FP8, 0, true);
        if (v.w.cols % 128 == 0)
            float_case(&v, QK_A_FP8, 128, false);
        if (v.w.cols % 32 == 0) {
            float_case(&v, QK_A_MX8, 32, false);
            float_case(&v, QK_A_MX4, 32, false);
        }
        view_free(&v);
        if (cols_of(kind) % 16) { /* the same layout on whole 16-column chunks (the packed kernels' shapes) */
            make(&v, kind, 256, 0x7654321ull * (uint64_t)(kind + 1));
            float_case(&v, QK_F32, 0, false);
            float_case(&v, QK_A_FP8, 0, false);
            view_free(&v);
        }
    }
}

/* Prompt batches (more than 12 tokens) on the packed rows: the levels that
 * decode a row group's span once for many tokens (avx512_wq.c through
 * avx512_float.c's tile) give the scalar tile's bits, for rows of one span
 * (256 columns) and of three (1536), float and FP8 activations, tiles of
 * whole row groups and tiles that start or end inside one. */
Test(wq, packed_prompt_batches)
{
    enum { T = 40 };
    static const int shapes[][2] = {{16, T}, {16, 13}, {8, 17}, {5, T}, {12, 20}};
    for (int kind = 0; kind < V_COUNT; kind++)
        for (int ni = 0; ni < 2; ni++)
            for (int ai = 0; ai < 2; ai++) {
                const int64_t n = ni ? 1536 : 256;
                view v;
                make(&v, kind, n, 0x51A7ull * (uint64_t)(kind + 1) + (uint64_t)ni);
                qk_wq w = v.w;
                w.act = ai ? QK_A_FP8 : QK_F32;
                w.a_scale = 0.03f;
                uint64_t rng = 0xB47Cull + (uint64_t)kind;
                float *x = rand_x(n, T, &rng);
                size_t ys;
                uint8_t *y = encode(&w, x, T, &ys);
                const int nr = (int)w.rows; /* NR, or 24 where a word packs 8 rows */
                float want[T * 32], o[T * 32];
                qk_kernels_at(w.type, QK_CPU_SCALAR)->wq_tile(&w, 0, nr, y, ys, T, want, (size_t)nr);
                for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
                    const qk_kernels *kl = qk_kernels_at(w.type, level);
                    qk_wq p = w;
                    p.rows = w.type == QK_W_AWQ ? w.rows : w.rows / 8 * 8;
                    const size_t bytes = !kl->wq_pack || p.rows % 8 ? 0 : kl->wq_pack(&p, NULL, 0, 0);
                    if (!bytes)
                        continue;
                    uint8_t *pk = malloc(bytes);
                    cr_assert(pk);
                    kl->wq_pack(&p, pk, 0, p.rows / 8);
                    p.packed = pk;
                    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
                        const int tr = shapes[sh][0], tt = shapes[sh][1];
                        tiled(kl, &p, y, ys, (int)p.rows, T, tr, tt, o, (size_t)nr);
                        for (int t = 0; t < T; t++)
                            cr_assert(memcmp(o + t * nr, want + t * nr, sizeof(float) * (size_t)p.rows) == 0,
                                      "%s, %lld columns, act %s, %s: packed tiles %dx%d differ (token %d)", v.label,
                                      (long long)n, qk_type_get(w.act)->name, qk_cpu_level_name(level), tr, tt, t);
                    }
                    free(pk);
                }
                free(x), free(y);
                view_free(&v);
            }
}

/* Integer value of weight (r, k) for the int8 products (wq_int.c's rule). */
static int32_t wv(const qk_wq *w, int64_t r, int64_t k)
{
    if (w->type == QK_W_INT8)
        return (int8_t)w->q[r * w->q_rs + k] - (int32_t)qk_wq_zero(w, r, k);
    return (int32_t)qk_wq_code(w, r, k) - w->code_offset - (int32_t)qk_wq_zero(w, r, k);
}

static void i8_case(view *v, bool asym, bool stat)
{
    qk_wq *w = &v->w;
    w->act = QK_A_I8;
    w->a_asym = asym;
    w->a_static = stat;
    w->a_scale = 0.02f;
    const int64_t n = w->cols, g = w->s.cdiv < n ? w->s.cdiv : n;
    uint64_t rng = 0x18ull + asym + 2 * stat;
    float *x = rand_x(n, NT, &rng);
    size_t ys;
    uint8_t *y = encode(w, x, NT, &ys);
    float want[NT * 32];
    for (int t = 0; t < NT; t++) {
        qk_a_i8_head h;
        memcpy(&h, y + (size_t)t * ys, sizeof h);
        const int8_t *a = (const int8_t *)(y + (size_t)t * ys + QK_A_I8_HEAD);
        for (int r = 0; r < w->rows; r++) {
            float sum = 0.0f;
            for (int64_t k0 = 0; k0 < n; k0 += g) {
                int64_t acc = 0;
                for (int64_t k = k0; k < k0 + g; k++)
                    acc += (int64_t)wv(w, r, k) * (a[k] - h.zero);
                sum = sum + (float)acc * qk_wq_scale(w, r, k0);
            }
            want[t * w->rows + r] = h.scale * sum;
        }
    }
    check(v, want, y, ys);
    free(x), free(y);
}

Test(wq, int8_products)
{
    static const int kinds[] = {V_INT8_CH, V_PACK4_G32, V_PACK4_ASYM, V_PACK8_CH};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        view v;
        make(&v, kinds[i], kinds[i] == V_INT8_CH ? 256 : cols_of(kinds[i]), 0xABCull + i);
        i8_case(&v, false, false);
        i8_case(&v, true, false);
        i8_case(&v, false, true);
        view_free(&v);
    }
}

Test(wq, nvfp4_w4a4_products)
{
    static const int kinds[] = {V_NVFP4_CT, V_NVFP4_MO};
    for (size_t i = 0; i < 2; i++) {
        view v;
        make(&v, kinds[i], 16 * 21, 0x4A4ull + i); /* 21 blocks: 2 groups of 8 and a tail of 5 */
        qk_wq *w = &v.w;
        w->act = QK_A_NV4;
        w->a_group = 16;
        w->a_global = 2688.0f / 5.1f;
        const int64_t n = w->cols, nb = n / 16, nb8 = nb - nb % 8;
        uint64_t rng = 0x77ull;
        float *x = rand_x(n, NT, &rng);
        size_t ys;
        uint8_t *y = encode(w, x, NT, &ys);
        float want[NT * 32];
        for (int t = 0; t < NT; t++) {
            const uint8_t *row = y + (size_t)t * ys;
            const int8_t *a = (const int8_t *)(row + nb * 8);
            for (int r = 0; r < w->rows; r++) {
                float l[8] = {0}, s = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    int32_t is = 0;
                    for (int j = 0; j < 16; j++) {
                        const int64_t k = b * 16 + j;
                        is += qk_e2m1_x2[w->q[r * w->q_rs + k / 2] >> (k % 2 * 4) & 15] * a[k];
                    }
                    float da;
                    memcpy(&da, row + 4 * b, 4);
                    const float sc = qk_elem_decode(QK_ELEM_FP8_E4M3, w->s.p[r * w->s.rs + b]);
                    const float m = (w->g_div ? sc / w->g : sc * w->g) * da;
                    if (b < nb8)
                        l[b % 8] = fmaf((float)is, m, l[b % 8]);
                    else {
                        if (b == nb8)
                            s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
                        s = s + (float)is * m;
                    }
                }
                want[t * w->rows + r] = s * 0.25f;
            }
        }
        check(&v, want, y, ys);
        free(x), free(y);
        view_free(&v);
    }
}

/* LLM.int8: int8 codes of the float16-rounded non-outliers against CB, the
 * outliers in float (wq_int.c's rule, recomputed here from its parts). */
Test(wq, llm_int8_products)
{
    view v;
    make(&v, V_BNB8, 256, 0xB8ull);
    qk_wq *w = &v.w;
    w->act = QK_A_I8O;
    w->a_threshold = 2.5f;
    const int64_t n = w->cols;
    uint64_t rng = 0x18Bull;
    float *x = rand_x(n, NT, &rng); /* a few of them past 2.5: outliers */
    size_t ys;
    uint8_t *y = encode(w, x, NT, &ys);
    float want[NT * 32];
    int outliers = 0;
    for (int t = 0; t < NT; t++) {
        const float *xt = x + t * n;
        float amax = 0.0f;
        for (int64_t k = 0; k < n; k++) {
            const float h = qk_f16_to_f32(qk_f32_to_f16(xt[k]));
            if (fabsf(h) < 2.5f)
                amax = fmaxf(amax, fabsf(h));
        }
        for (int r = 0; r < w->rows; r++) {
            const int8_t *cb = (const int8_t *)(w->q + r * w->q_rs);
            const float scb = qk_wq_val(w->s.p, w->s.type, r);
            int64_t acc = 0;
            for (int64_t k = 0; k < n; k++) {
                const float h = qk_f16_to_f32(qk_f32_to_f16(xt[k]));
                if (fabsf(h) < 2.5f)
                    acc += (int64_t)cb[k] * (int64_t)nearbyintf(h * (127.0f / amax));
            }
            float s = (float)acc * (amax * scb) * 6.200124e-05f;
            for (int64_t k = 0; k < n; k++)
                if (fabsf(qk_f16_to_f32(qk_f32_to_f16(xt[k]))) >= 2.5f) {
                    s = s + xt[k] * ((float)cb[k] * scb * 7.874015718698502e-3f);
                    outliers += r == 0;
                }
            want[t * w->rows + r] = s;
        }
    }
    cr_assert_gt(outliers, 0, "the input has outliers");
    check(&v, want, y, ys);
    free(x), free(y);
    view_free(&v);
}

/* ---- the encoders' rules ------------------------------------------------------- */

static void enc(int act, const qk_wq *p, const float *x, void *dst, int64_t n)
{
    qk_wq w = *p;
    w.act = act;
    qk_kernels_at(act, QK_CPU_SCALAR)->wq_act(&w, x, dst, n);
}

Test(wq, fp8_encoder_rules)
{
    float x[32], y[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i - 13) * 0.37f;
    const qk_wq tok = {0};
    enc(QK_A_FP8, &tok, x, y, 32);
    const float amax = 18 * 0.37f, s = amax / 448.0f;
    cr_assert_eq(y[31], 448.0f * s, "the token maximum maps to 448 * scale");
    cr_assert_eq(y[13], 0.0f);
    /* a zero row: scale max(0, 1/(448*512)) keeps it zero */
    float z[8] = {0}, zo[8];
    enc(QK_A_FP8, &tok, z, zo, 8);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(zo[i], 0.0f);
    /* static: x * (1/scale) clamped to +-448 */
    const qk_wq st = {.a_static = true, .a_scale = 0.01f};
    float big[2] = {100.0f, -100.0f}, bo[2];
    enc(QK_A_FP8, &st, big, bo, 2);
    cr_assert_eq(bo[0], 448.0f * 0.01f);
    cr_assert_eq(bo[1], -448.0f * 0.01f);
}


/* INT8 W8A8 over several 16-row blocks (the packed VNNI tiles take two
 * at a time): every level's packed products against the scalar tile; where
 * the CPU has AMX, the AVX-512 tiles with it (16-token tiles, up to four,
 * 64 columns a step and a 20-column tail) and without. */
Test(wq, int8_packed_blocks)
{
    enum { R = 48, C = 340, T = 70 };
    uint64_t rng = 0x8B10Cull;
    int8_t *q = malloc(R * C);
    float sc[R], *x = malloc(sizeof(float) * C * T);
    cr_assert(q && x);
    for (int i = 0; i < R * C; i++)
        q[i] = (int8_t)(tu_rand(&rng) >> 56);
    for (int r = 0; r < R; r++)
        sc[r] = 0.001f * (float)(1 + r % 5);
    for (int i = 0; i < C * T; i++)
        x[i] = tu_gauss(&rng);
    for (int mode = 0; mode < 2; mode++) {
        qk_wq w = {.type = QK_W_INT8, .act = QK_A_I8, .rows = R, .cols = C, .q = (const uint8_t *)q, .q_rs = C,
                   .g = 1.0f, .a_asym = mode == 1,
                   .s = {.p = (const uint8_t *)sc, .type = QK_F32, .rdiv = 1, .cdiv = C, .rs = 1, .cs = 1}};
        size_t ys;
        uint8_t *y = encode(&w, x, T, &ys);
        float want[R * T], got[R * T];
        qk_kernels_at(QK_W_INT8, QK_CPU_SCALAR)->wq_tile(&w, 0, R, y, ys, T, want, R);
        for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
            const qk_kernels *k = qk_kernels_at(QK_W_INT8, level);
            const size_t bytes = k->wq_pack ? k->wq_pack(&w, NULL, 0, 0) : 0;
            if (!bytes)
                continue;
            uint8_t *pk = malloc(bytes);
            cr_assert(pk);
            k->wq_pack(&w, pk, 0, R / 8);
            qk_wq wp = w;
            wp.packed = pk;
            static const int shapes[][2] = {{48, T}, {32, 37}, {16, 1}, {20, 3}, {16, 16}};
            const int amx = qk_cpu_has_amx();
            for (int ai = level == QK_CPU_AVX512 ? amx : 0; ai >= 0; ai--) {
                qk_cpu_set_amx(ai);
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                    tiled(k, &wp, y, ys, R, T, shapes[s][0], shapes[s][1], got, (size_t)R);
                    cr_assert(memcmp(got, want, sizeof want) == 0, "mode %d %s%s: packed tiles %dx%d differ", mode,
                              qk_cpu_level_name(level), ai ? " with AMX" : "", shapes[s][0], shapes[s][1]);
                }
            }
            qk_cpu_set_amx(amx);
            free(pk);
        }
        free(y);
    }
    free(q), free(x);
}

/* NVFP4 W4A4 over several 16-row blocks and pieces (avx512_wq_nv4.c decodes
 * 64 blocks at a time and takes tokens two at a time): every level's packed
 * products against the scalar tile, with a tail of 5 blocks, a row of zero
 * codes, rows with NaN scales (0x7F; 0xFF: -NaN), zero scales, and
 * activation rows of zeros, infinities and NaNs. */
static void nv4_blocks(const int NB)
{
    enum { R = 48, T = 37 };
    const int C = 16 * NB;
    const bool full = NB > 75; /* room for the special rows */
    uint64_t rng = 0x4B4Aull + (uint64_t)NB;
    uint8_t *q = malloc(R * C / 2), *sc = malloc(R * NB);
    float *x = malloc(sizeof(float) * C * T);
    cr_assert(q && sc && x);
    for (int i = 0; i < R * C / 2; i++)
        q[i] = (uint8_t)(tu_rand(&rng) >> 56);
    for (int i = 0; i < R * NB; i++) /* E4M3 scales 2^-6 .. 2^3 or so, positive */
        sc[i] = (uint8_t)(0x18 + (tu_rand(&rng) >> 59));
    memset(q + 7 * C / 2, 0, C / 2);
    /* one NaN sign a row: with both, the result's sign would follow the
     * operand order the compiler picks for the reference's adds (x86 returns
     * the first NaN operand), not the rule */
    if (full)
        sc[20 * NB + 3] = 0x7F, sc[20 * NB + 70] = 0x7F, sc[21 * NB + 75] = 0xFF, sc[33 * NB + 75] = 0x00, sc[34 * NB] = 0x01;
    for (int i = 0; i < C * T; i++)
        x[i] = tu_gauss(&rng) * (i % 29 == 0 ? 30.0f : 1.0f);
    for (int i = 0; i < C; i++)
        x[2 * C + i] = 0.0f;
    x[4 * C + 17] = INFINITY, x[4 * C + C / 2] = -INFINITY, x[5 * C + 40] = NAN, x[6 * C + C - 1] = NAN;
    for (int mode = 0; mode < 2; mode++) {
        qk_wq w = {.type = QK_W_NVFP4, .act = QK_A_NV4, .rows = R, .cols = C, .q = q, .q_rs = C / 2,
                   .g = mode ? 3.7f / 2688.0f : 2688.0f / 3.7f, .g_div = mode == 0, .a_group = 16,
                   .a_global = 2688.0f / 5.1f,
                   .s = {.p = sc, .type = QK_F8_E4M3, .rdiv = 1, .cdiv = 16, .rs = NB, .cs = 1}};
        size_t ys;
        uint8_t *y = encode(&w, x, T, &ys);
        float want[R * T], got[R * T];
        qk_kernels_at(QK_W_NVFP4, QK_CPU_SCALAR)->wq_tile(&w, 0, R, y, ys, T, want, R);
        cr_assert(!full || (isnan(want[20]) && isnan(want[21]) && !isnan(want[19]) && want[7] == 0.0f),
                  "the NaN and zero rows are there");
        int packed = 0;
        for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
            const qk_kernels *k = qk_kernels_at(QK_W_NVFP4, level);
            const size_t bytes = k->wq_pack ? k->wq_pack(&w, NULL, 0, 0) : 0;
            if (!bytes)
                continue;
            packed++;
            uint8_t *pk = malloc(bytes);
            cr_assert(pk);
            k->wq_pack(&w, pk, 0, 1);
            k->wq_pack(&w, pk, 1, R / 8);
            qk_wq wp = w;
            wp.packed = pk;
            static const int shapes[][2] = {{48, T}, {16, 2}, {16, 1}, {20, 3}, {5, 7}, {3, 1}, {16, 16}, {32, 20}};
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                tiled(k, &wp, y, ys, R, T, shapes[s][0], shapes[s][1], got, (size_t)R);
                for (int i = 0; i < R * T; i++)
                    cr_assert(memcmp(&got[i], &want[i], 4) == 0, "mode %d %s: packed tiles %dx%d differ at (%d, %d): %a, want %a",
                              mode, qk_cpu_level_name(level), shapes[s][0], shapes[s][1], i / R, i % R,
                              (double)got[i], (double)want[i]);
            }
            free(pk);
        }
        cr_assert(packed > 0 || qk_cpu_supported() < QK_CPU_AVX512 || !qk_cpu_has_vnni(), "the VNNI level packs NVFP4 W4A4");
        free(y);
    }
    free(q), free(sc), free(x);
}

Test(wq, nvfp4_packed_blocks)
{
    nv4_blocks(64 + 8 + 5); /* a whole piece, a group of 8 and a tail of 5 */
    nv4_blocks(40);         /* one piece, decoded once for every token */
    nv4_blocks(5);          /* the tail alone: no lane sums */
}

/* Every level's INT8 activation encoder gives the reference's bytes: rows
 * with ties, zeros, an all-zero row, infinities and NaNs, lengths with tails. */
Test(wq, int8_encoder_levels)
{
    uint64_t rng = 0x1E8ull;
    for (int c = 0; c < 6; c++) {
        const int64_t n = c % 2 ? 83 : 256;
        float x[256];
        for (int64_t i = 0; i < n; i++)
            x[i] = c == 2 ? 0.0f : tu_gauss(&rng) * (i % 7 == 0 ? 20.0f : 1.0f);
        if (c == 3)
            x[5] = NAN, x[40] = -INFINITY;
        if (c == 4)
            x[3] = NAN;
        if (c == 5)
            for (int64_t i = 0; i < n; i++) /* half-integer products: amax 127 */
                x[i] = i == 0 ? 127.0f : (float)(i % 9) - 4.5f;
        for (int mode = 0; mode < 3; mode++) {
            const qk_wq w = {.a_asym = mode == 1, .a_static = mode == 2, .a_scale = 0.05f};
            uint8_t want[QK_A_I8_HEAD + 256], got[QK_A_I8_HEAD + 256];
            qk_kernels_at(QK_A_I8, QK_CPU_SCALAR)->wq_act(&w, x, want, n);
            for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
                memset(got, 0x5A, sizeof got);
                qk_kernels_at(QK_A_I8, level)->wq_act(&w, x, got, n);
                cr_assert(memcmp(got, want, QK_A_I8_HEAD + (size_t)n) == 0, "case %d mode %d: %s differs", c, mode,
                          qk_cpu_level_name(level));
            }
        }
    }
}

/* Every level's FP8 activation encoder gives the reference's floats bit for
 * bit: dynamic per token, per group of 16 and static per tensor; gaussian
 * rows, E4M3 midpoints of the normal and the subnormal grid (ties to even),
 * the 2^-6 boundary, values on the saturation edge, zeros, tiny rows (the
 * minimum scale), infinities and NaNs, lengths with tails. */
Test(wq, fp8_encoder_levels)
{
    uint64_t rng = 0xF8E4ull;
    enum { N = 16 * 23 };
    float x[N], want[N], got[N];
    for (int c = 0; c < 7; c++) {
        const int64_t n = c % 2 ? N - 5 : N;
        for (int64_t i = 0; i < n; i++) {
            float v = tu_gauss(&rng) * (i % 7 == 0 ? 20.0f : 1.0f);
            if (c == 2) /* amax 448 (scale 1): midpoints 1.0625 .. of the normal grid, then of the subnormal one */
                v = i % 16 == 0 ? 448.0f
                    : i % 3 ? (float)ldexp(1.0 + (double)(i % 8) / 8.0 + 1.0 / 16.0, (int)(i % 15) - 6)
                            : (float)ldexp((double)(i % 8) + 0.5, -9) * (i % 2 ? -1.0f : 1.0f);
            if (c == 3)
                v *= 1e-30f;
            if (c == 4 && i % 11 == 5)
                v = i % 3 ? NAN : (i % 2 ? INFINITY : -INFINITY);
            if (c == 5)
                v = i % 4 ? 0.0f : (i % 8 ? 0x1p-6f : 440.0f) * (i % 3 ? 1.0f : -1.0f);
            if (c == 6) /* just below the 2^-6 boundary and the saturation edge */
                v = i % 16 == 0 ? 448.0f : i % 2 ? nextafterf(0x1p-6f, 0.0f) : nextafterf(432.0f, 448.0f);
            x[i] = v;
        }
        for (int mode = 0; mode < 3; mode++) {
            const qk_wq w = {.a_static = mode == 2, .a_scale = 0.05f, .a_group = mode == 1 ? 16 : 0};
            qk_kernels_at(QK_A_FP8, QK_CPU_SCALAR)->wq_act(&w, x, want, n);
            for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
                memset(got, 0x5A, sizeof got);
                qk_kernels_at(QK_A_FP8, level)->wq_act(&w, x, got, n);
                for (int64_t i = 0; i < n; i++)
                    cr_assert(memcmp(&got[i], &want[i], 4) == 0, "case %d mode %d: %s element %lld: %a, want %a", c, mode,
                              qk_cpu_level_name(level), (long long)i, (double)got[i], (double)want[i]);
            }
        }
    }
}

/* Every level's NVFP4 activation encoder gives the reference's bytes (the
 * multipliers, sums and codes): gaussian rows, E2M1 and E4M3 ties (values on
 * the midpoints of both grids), zero blocks, infinities and NaNs, tiny
 * blocks (subnormal E4M3 scales), a block count not a multiple of 16, and
 * global scales from the producers' range. */
Test(wq, nvfp4_encoder_levels)
{
    uint64_t rng = 0xE2A1ull;
    enum { N = 16 * 37 };
    static const float gs[] = {2688.0f / 5.1f, 1.0f, 448.0f * 6.0f / 1e-3f, 3.0f};
    float *x = malloc(sizeof(float) * N);
    cr_assert(x);
    for (int c = 0; c < 7; c++)
        for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++) {
            const int64_t n = c % 2 ? 16 * 21 : N;
            for (int64_t i = 0; i < n; i++) {
                float v = tu_gauss(&rng) * (i % 7 == 0 ? 20.0f : 1.0f);
                if (c == 2) /* the E2M1 midpoints of a block whose amax is 6 (SF = g): ties */
                    v = i % 16 == 0 ? 6.0f : 0.25f * (float)(i % 29) - 3.5f;
                if (c == 3)
                    v *= 1e-7f;
                if (c == 4 && (i % 16 == 5 || i % 32 == 28)) /* in either half of a block */
                    v = i % 3 ? NAN : (i % 2 ? INFINITY : -INFINITY);
                if (c == 5 && i / 16 % 3 == 0)
                    v = 0.0f;
                if (c == 6) /* block amax on E4M3 midpoints: SF ties when g = 1 or 3 */
                    v = i % 16 == 3 ? (float)(6.0 * (1.0 + (double)(i / 16 % 8) / 8.0 + 1.0 / 16.0) * ldexp(1.0, (int)(i / 16 % 13) - 9)) : 0.5f;
                x[i] = v;
            }
            const qk_wq w = {.a_global = gs[gi]};
            const size_t bytes = qk_row_size(QK_A_NV4, n);
            uint8_t want[24 * N / 16], got[24 * N / 16];
            memset(want, 0xA5, sizeof want);
            qk_kernels_at(QK_A_NV4, QK_CPU_SCALAR)->wq_act(&w, x, want, n);
            for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
                memset(got, 0x5A, sizeof got);
                qk_kernels_at(QK_A_NV4, level)->wq_act(&w, x, got, n);
                for (size_t i = 0; i < bytes; i++)
                    cr_assert_eq(got[i], want[i], "case %d g %g: %s differs at byte %zu of %zu", c, (double)gs[gi],
                                 qk_cpu_level_name(level), i, bytes);
            }
        }
    free(x);
}

Test(wq, int8_encoder_rules)
{
    uint8_t buf[QK_A_I8_HEAD + 8];
    qk_a_i8_head h;
    const int8_t *q = (const int8_t *)(buf + QK_A_I8_HEAD);
    /* amax 127: scale 1, x * (127 / amax) rounded half to even */
    float x[8] = {127.0f, -127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 3.49f};
    const qk_wq sym = {0};
    enc(QK_A_I8, &sym, x, buf, 8);
    memcpy(&h, buf, sizeof h);
    cr_assert_eq(h.scale, 1.0f);
    cr_assert_eq(h.zero, 0);
    const int8_t want[8] = {127, -127, 0, 2, 2, 0, -2, 3};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(q[i], want[i], "code %d: %d, want %d (vLLM dynamic_scaled_int8_quant, round half even)", i, q[i],
                     want[i]);
    /* asymmetric: scale (max - min) / 255, zero nearbyint(-128 - min / scale) */
    float xa[4] = {0.0f, 1.0f, 2.0f, 2.55f};
    const qk_wq asym = {.a_asym = true};
    enc(QK_A_I8, &asym, xa, buf, 4);
    memcpy(&h, buf, sizeof h);
    cr_assert_float_eq(h.scale, 0.01f, 1e-9f);
    cr_assert_eq(h.zero, -128);
    cr_assert_eq(q[0], -128);
    cr_assert_eq(q[3], 127);
}

Test(wq, nvfp4_encoder_rules)
{
    /* global 1, block amax 6: SF = 1 (exact in E4M3), codes e2m1(x) */
    float x[16] = {6.0f, -6.0f, 0.25f, 0.75f, 1.25f, 2.5f, 5.0f, 0.1f, 3.0f, 0, 0, 0, 0, 0, 0, 0};
    uint8_t buf[24];
    const qk_wq w = {.a_global = 1.0f};
    enc(QK_A_NV4, &w, x, buf, 16);
    float m;
    memcpy(&m, buf, 4);
    cr_assert_eq(m, 1.0f);
    int32_t sum;
    memcpy(&sum, buf + 4, 4);
    cr_assert_eq(sum, 12 - 12 + 0 + 2 + 2 + 4 + 8 + 0 + 6, "the block's code sum follows its multiplier");
    const int8_t *q = (const int8_t *)(buf + 8);
    /* doubled E2M1: ties to even (0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 2.5 -> 2, 5 -> 4) */
    const int8_t want[9] = {12, -12, 0, 2, 2, 4, 8, 0, 6};
    for (int i = 0; i < 9; i++)
        cr_assert_eq(q[i], want[i], "code %d: %d, want %d", i, q[i], want[i]);
}

Test(wq, act_same)
{
    qk_wq a = {.act = QK_A_FP8}, b = a;
    cr_assert(qk_wq_act_same(&a, &b));
    b.a_static = true;
    b.a_scale = 0.5f;
    cr_assert(!qk_wq_act_same(&a, &b));
    a = b;
    cr_assert(qk_wq_act_same(&a, &b));
    a.a_scale = 0.25f;
    cr_assert(!qk_wq_act_same(&a, &b), "static inputs with their own scales are encoded apart");
}
