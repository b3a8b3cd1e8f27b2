/* matmul.c - y = W x through the format table (see matmul.h).
 *
 * The kernels come from kernels/cpu.h: the fastest level this CPU has (or
 * QK_CPU's).  Every output element is computed by the level's dot_tile,
 * which returns vec_dot's bits for that element whatever the tile shape, so
 * the result does not depend on the thread count, on how many tokens are in
 * the batch, or on whether a token is decoded alone or in a prompt batch.
 * Work is split across threads only along weight rows, in fixed ranges.
 * With ws->act == QK_ACT_F32 the activations stay float and each tile goes
 * through the weight type's float-activation product (cpu.h fdot_tile),
 * which has the same property; with ws->act_variant the activation encoders
 * are kernels/actvar.h's variants (qk-kld --noise-floor). */
#include "lib/engine/matmul.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"
#include "kernels/actvar.h"
#include "kernels/cpu.h"
#include "lib/core/threads.h"
#include "kernels/types.h"

#define ROW_TILE 16                /* weight rows kept hot while the tokens stream past */
_Static_assert(ROW_TILE % QK_PACK_ROWS == 0 && QK_PACK_DECODE_TILE % QK_PACK_ROWS == 0,
               "a row tile is whole packed groups");
#define TOK_TILE 64                /* activation rows per pass over a row tile */
#define NV4_TOK_TILE 256           /* NVFP4 W4A4 on packed rows: the AVX-512 tile decodes its rows once a call */
#define RANGE_WORK (1u << 18)      /* about this many multiply-adds per thread range */
#define TOK_GRAIN 8                /* activation rows per thread range of the encoders */

/* One weight of a call: its kernels, encoded activations and output. */
typedef struct {
    const qk_weight *w;
    const qk_kernels *k;           /* weight type's dot kernels */
    const uint8_t *act;            /* activation rows in the vec_dot_type */
    size_t act_row;                /* bytes per activation row */
    float *y;
    bool packed;                   /* products read w->packed (k->packed_tile) */
    bool prep;                     /* ... against activation rows made by k->pack_act (k->packed_tile_act) */
    bool fdot;                     /* float activations: k->fdot_tile (QK_ACT_F32) */
    const qk_wq *wq;               /* a parted weight: its view, or wqf under QK_ACT_F32 */
    qk_wq wqf;                     /* the view with float activations (the W*A16 products) */
    size_t rt;                     /* rows per tile: ROW_TILE, or the packed kernel's own */
    int64_t tt;                    /* activation rows per tile: TOK_TILE, or NV4_TOK_TILE */
    size_t nrange;                 /* thread ranges its rows are cut into (range_count) */
} part;

/* A range of rows of one part: the unit a thread takes. */
typedef struct {
    int p;
    size_t r0, r1;
} range;

typedef struct {
    const part *parts;
    const range *ranges;
    int64_t n_tok;
} job;

typedef struct {
    const float *x;
    uint8_t *xq;
    size_t xq_row;
    int64_t cols;
    qk_from_float_fn from_float;
    const qk_wq *wq;          /* a parted weight's encoding: wq_act with its parameters */
    qk_wq_act_fn wq_act;
} enc_job;

static void encode_range(void *ctx, size_t begin, size_t end)
{
    const enc_job *j = ctx;
    for (size_t t = begin; t < end; t++) {
        if (j->wq_act)
            j->wq_act(j->wq, j->x + t * (size_t)j->cols, j->xq + t * j->xq_row, j->cols);
        else
            j->from_float(j->x + t * (size_t)j->cols, j->xq + t * j->xq_row, j->cols);
    }
}

typedef struct {
    const uint8_t *xq;
    size_t xq_row;
    uint8_t *dst;
    size_t dst_row;
    int64_t cols;
    qk_pack_act_fn pack_act;
} prep_job;

static void prep_range(void *ctx, size_t begin, size_t end)
{
    const prep_job *j = ctx;
    for (size_t t = begin; t < end; t++)
        j->pack_act(j->cols, j->xq + t * j->xq_row, j->dst + t * j->dst_row);
}

static void dot_ranges(void *ctx, size_t begin, size_t end)
{
    const job *j = ctx;
    for (size_t i = begin; i < end; i++) {
        const range *rg = &j->ranges[i];
        const part *pt = &j->parts[rg->p];
        const qk_weight *w = pt->w;
        for (size_t r0 = rg->r0; r0 < rg->r1; r0 += pt->rt) {
            const int nr = (int)(rg->r1 - r0 < pt->rt ? rg->r1 - r0 : pt->rt);
            for (int64_t t0 = 0; t0 < j->n_tok; t0 += pt->tt) {
                const int nt = (int)(j->n_tok - t0 < pt->tt ? j->n_tok - t0 : pt->tt);
                const uint8_t *act = pt->act + (size_t)t0 * pt->act_row;
                float *out = pt->y + (size_t)t0 * (size_t)w->rows + r0;
                /* packed rows come in whole groups: ranges start at
                 * multiples of RANGE_UNIT and tiles rt (a multiple of 8)
                 * rows after them, and rows is a multiple of the group */
                if (pt->wq)
                    pt->k->wq_tile(pt->wq, (int64_t)r0, nr, act, pt->act_row, nt, out, (size_t)w->rows);
                else if (pt->fdot)
                    qk_fdot_tile(pt->k, w->cols, w->data + r0 * w->row_size, w->row_size, nr,
                                 (const float *)(const void *)act, (size_t)w->cols, nt, out, (size_t)w->rows);
                else if (pt->packed)
                    (pt->prep ? pt->k->packed_tile_act : pt->k->packed_tile)(
                        w->cols, w->packed + r0 / QK_PACK_ROWS * pt->k->pack_size(w->cols), nr / QK_PACK_ROWS, act,
                        pt->act_row, nt, out, (size_t)w->rows);
                else
                    qk_dot_tile(pt->k, w->cols, w->data + r0 * w->row_size, w->row_size, nr, act,
                                pt->act_row, nt, out, (size_t)w->rows);
            }
        }
    }
}

#define MAX_PARTS 8

/* Ranges are made of whole blocks of RANGE_UNIT rows: two packed groups
 * (QK_PACK_ROWS), and the 16-row blocks of the INT8 W8A8 and NVFP4 W4A4
 * kernels (avx512_wq_i8.c, avx512_wq_nv4.c), which a range starting inside
 * one would compute twice. */
#define RANGE_UNIT 16
_Static_assert(RANGE_UNIT % QK_PACK_ROWS == 0, "a range unit is whole packed groups");

/* How many ranges a weight of `rows` rows of `cols` columns is cut into
 * against n_tok activation rows: one per grain of about RANGE_WORK
 * multiply-adds and at least a row tile (rt rows), rounded up to a multiple
 * of the threads so that none waits on the last range (range_at cuts them
 * to even sizes; 576 rows in ranges of 64 were 5 ranges for one thread and
 * 4 for the other, and one-token ranges of 512 and 64 rows), but no more
 * than its units.  The count only affects speed: every element is one
 * product whatever its range. */
static size_t range_count(size_t rows, int64_t cols, int64_t n_tok, size_t rt, int nthreads)
{
    const uint64_t per_row = (uint64_t)cols * (uint64_t)n_tok;
    const uint64_t g = per_row >= RANGE_WORK ? 1 : RANGE_WORK / per_row;
    const size_t grain = (size_t)((g + rt - 1) / rt * rt);
    const size_t units = (rows + RANGE_UNIT - 1) / RANGE_UNIT, nt = nthreads > 1 ? (size_t)nthreads : 1;
    const size_t n = (rows + grain - 1) / grain, up = (n + nt - 1) / nt * nt;
    return up <= units ? up : n < units ? n : units;
}

/* Range k of n over rows: even shares of whole units. */
static range range_at(int p, size_t rows, size_t k, size_t n)
{
    const size_t units = (rows + RANGE_UNIT - 1) / RANGE_UNIT;
    const size_t r0 = units * k / n * RANGE_UNIT, r1 = units * (k + 1) / n * RANGE_UNIT;
    return (range){p, r0, r1 < rows ? r1 : rows};
}

int qk_matmul_n(const qk_weight *const *w, float *const *y, int nw, const float *x, int64_t n_tok,
                qk_matmul_ws *ws, int nthreads, qk_err *err)
{
    if (n_tok <= 0 || nw <= 0)
        return 0;
    if (nw > MAX_PARTS)
        return qk_errf(err, QK_EIO, "matmul: %d weights in one call (at most %d)", nw, MAX_PARTS);
    const int64_t cols = w[0]->cols;
    part parts[MAX_PARTS];
    /* the activation encodings the call needs, each made once */
    int vt[MAX_PARTS], nvt = 0, enc[MAX_PARTS]; /* enc[i]: weight i's encoding in vt */
    const qk_wq *vwq[MAX_PARTS];                  /* the parted weight whose parameters it takes */
    size_t off[MAX_PARTS], rowb[MAX_PARTS], need = 0, nranges = 0;
    size_t prep_off[MAX_PARTS];
    int prep_of[MAX_PARTS]; /* the part whose activation rows part i reads (its own: i), -1: none */
    for (int i = 0; i < nw; i++) {
        if (w[i]->cols != cols)
            return qk_errf(err, QK_EIO, "matmul: weights of one call differ in columns");
        const qk_wq *wq = w[i]->wq;
        const qk_kernels *k = qk_kernels_for(w[i]->type);
        const bool fdot = ws->act == QK_ACT_F32 && w[i]->type != QK_F32;
        if (fdot && !wq && !k->fdot_tile)
            return qk_errf(err, QK_EINPUT, "%.*s: type %s has no float-activation product",
                           w[i]->name_len, w[i]->name, qk_type_get(w[i]->type)->name);
        parts[i] = (part){.w = w[i], .k = k, .y = y[i], .fdot = fdot, .wq = wq};
        if (wq && (fdot || ws->act_variant || w[i]->packed)) {
            /* the view with float activations, a variant encoder or the rows repacked at load */
            parts[i].wqf = *wq;
            parts[i].wqf.packed = w[i]->packed;
            if (fdot)
                parts[i].wqf.act = QK_F32;
            parts[i].wqf.a_variant = ws->act_variant == QK_ACTV_SAME ? 0 : ws->act_variant;
            parts[i].wq = &parts[i].wqf;
        }
        const qk_wq *pw = parts[i].wq;
        /* a parted weight's activations are its scheme's, or floats under QK_ACT_F32 (its W*A16 product) */
        const int t = fdot ? QK_F32 : wq ? wq->act : qk_type_get(w[i]->type)->vec_dot_type;
        int e = 0;
        while (e < nvt && !(vt[e] == t && (t == QK_F32 || !pw || !vwq[e] || qk_wq_act_same(pw, vwq[e]))))
            e++;
        enc[i] = e;
        if (e == nvt) {
            vt[nvt] = t;
            vwq[nvt] = t == QK_F32 ? NULL : pw;
            rowb[nvt] = t == QK_F32 ? 0 : qk_row_size(t, cols);
            uint64_t n;
            if (qk_ckd_mul(&n, rowb[nvt], (uint64_t)n_tok) || qk_ckd_add(&n, n, need) || n > SIZE_MAX)
                return qk_errf(err, QK_EIO, "matmul: activation buffer size overflows");
            off[nvt] = need;
            need = (size_t)n;
            nvt++;
        }
        parts[i].packed = !fdot && !wq && w[i]->packed && (n_tok > 1 || k->pack_decode);
        /* prompt batches of a kernel that takes its activation rows made once a product */
        parts[i].prep = parts[i].packed && n_tok > 1 && k->pack_act_size && k->pack_act && k->packed_tile_act;
        prep_of[i] = -1;
        if (parts[i].prep) {
            for (int j = 0; j < i && prep_of[i] < 0; j++)
                if (parts[j].prep && enc[j] == e && parts[j].k->pack_act == k->pack_act)
                    prep_of[i] = prep_of[j];
            if (prep_of[i] < 0) {
                uint64_t n;
                prep_of[i] = i;
                prep_off[i] = (need + 63) / 64 * 64;
                if (qk_ckd_mul(&n, (uint64_t)k->pack_act_size(cols), (uint64_t)n_tok) ||
                    qk_ckd_add(&n, n, prep_off[i]) || n > SIZE_MAX)
                    return qk_errf(err, QK_EIO, "matmul: activation buffer size overflows");
                need = (size_t)n;
            }
        }
        parts[i].tt = pw && pw->act == QK_A_NV4 && pw->packed    ? NV4_TOK_TILE
                      : parts[i].prep && k->pack_act_tokens > 0 ? k->pack_act_tokens
                                                                 : TOK_TILE;
        if (!parts[i].packed)
            parts[i].rt = ROW_TILE;
        else
            parts[i].rt = qk_pack_tile_rows(parts[i].k, n_tok);
        parts[i].act_row = parts[i].prep     ? k->pack_act_size(cols)
                           : t == QK_F32 ? (size_t)cols * sizeof(float)
                                         : rowb[e];
        parts[i].nrange = range_count((size_t)(w[i]->rows > 0 ? w[i]->rows : 0), cols, n_tok, parts[i].rt, nthreads);
        nranges += parts[i].nrange;
    }
    if (need > ws->cap) {
        void *p = realloc(ws->buf, need);
        if (!p)
            return qk_errf(err, QK_EIO, "matmul: out of memory (%llu bytes)", (unsigned long long)need);
        ws->buf = p;
        ws->cap = need;
    }
    uint8_t *buf = ws->buf;
    for (int e = 0; e < nvt; e++)
        if (vt[e] != QK_F32) {
            const qk_from_float_fn var = ws->act_variant ? qk_actvar_from_float(vt[e], ws->act_variant) : NULL;
            enc_job ej = {.x = x, .xq = buf + off[e], .xq_row = rowb[e], .cols = cols,
                          .from_float = var ? var : qk_kernels_for(vt[e])->from_float, .wq = vwq[e],
                          .wq_act = vwq[e] ? qk_kernels_for(vt[e])->wq_act : NULL};
            qk_parallel_for(nthreads, (size_t)n_tok, TOK_GRAIN, encode_range, &ej);
        }
    for (int i = 0; i < nw; i++)
        if (prep_of[i] == i) {
            prep_job pj = {.xq = buf + off[enc[i]], .xq_row = rowb[enc[i]], .dst = buf + prep_off[i],
                           .dst_row = parts[i].act_row, .cols = cols, .pack_act = parts[i].k->pack_act};
            qk_parallel_for(nthreads, (size_t)n_tok, TOK_GRAIN, prep_range, &pj);
        }
    range *ranges = malloc((nranges ? nranges : 1) * sizeof *ranges);
    if (!ranges)
        return qk_errf(err, QK_EIO, "matmul: out of memory (%zu row ranges)", nranges);
    size_t nr = 0;
    for (int i = 0; i < nw; i++) {
        parts[i].act = parts[i].prep         ? buf + prep_off[prep_of[i]]
                       : vt[enc[i]] == QK_F32 ? (const uint8_t *)x
                                              : buf + off[enc[i]];
        for (size_t k = 0; k < parts[i].nrange; k++)
            ranges[nr++] = range_at(i, (size_t)w[i]->rows, k, parts[i].nrange);
    }
    job j = {.parts = parts, .ranges = ranges, .n_tok = n_tok};
    qk_parallel_for(nthreads, nr, 1, dot_ranges, &j);
    free(ranges);
    return 0;
}

typedef struct {
    const qk_weight *w;
    uint8_t *dst;
    const qk_kernels *pk;
} pack_job;

static void pack_groups(void *ctx, size_t begin, size_t end)
{
    const pack_job *j = ctx;
    const size_t src = QK_PACK_ROWS * j->w->row_size, dst = j->pk->pack_size(j->w->cols);
    for (size_t g = begin; g < end; g++)
        j->pk->pack(j->w->cols, j->w->data + g * src, j->w->row_size, j->dst + g * dst);
}

typedef struct {
    const qk_wq *wq;
    uint8_t *dst;
    qk_wq_pack_fn pack;
} wq_pack_job;

static void wq_pack_rest(void *ctx, size_t begin, size_t end)
{
    const wq_pack_job *j = ctx;
    j->pack(j->wq, j->dst, (int64_t)begin + 1, (int64_t)end + 1);
}

/* A parted weight: its layout's packing at the active level, if any. */
static int wq_weight_pack(qk_weight *w, void **mem, qk_err *err)
{
    const qk_kernels *k = qk_kernels_for(w->wq->type);
    const size_t bytes = k && k->wq_pack ? k->wq_pack(w->wq, NULL, 0, 0) : 0;
    if (!bytes || bytes > SIZE_MAX - 64)
        return 0;
    uint8_t *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p)
        return qk_errf(err, QK_EIO, "out of memory repacking %.*s (%zu bytes)", w->name_len, w->name, bytes);
    /* the header with the first group, then the rest in parallel */
    k->wq_pack(w->wq, p, 0, 1);
    wq_pack_job j = {.wq = w->wq, .dst = p, .pack = k->wq_pack};
    const size_t groups = (size_t)(w->wq->rows / QK_PACK_ROWS);
    if (groups > 1)
        qk_parallel_for(qk_cpu_count(), groups - 1, 16, wq_pack_rest, &j);
    w->packed = p;
    *mem = p;
    return 0;
}

int qk_weight_pack(qk_weight *w, void **mem, qk_err *err)
{
    *mem = NULL;
    if (w->wq)
        return wq_weight_pack(w, mem, err);
    const qk_kernels *k = qk_kernels_for(w->type);
    if (!k || !k->pack || w->rows <= 0 || w->rows % QK_PACK_ROWS || k->pack_size(w->cols) == 0)
        return 0;
    uint64_t bytes;
    if (qk_ckd_mul(&bytes, (uint64_t)(w->rows / QK_PACK_ROWS), k->pack_size(w->cols)) ||
        bytes > SIZE_MAX - 64)
        return qk_errf(err, QK_EIO, "repacking %.*s: size overflows", w->name_len, w->name);
    uint8_t *p = aligned_alloc(64, ((size_t)bytes + 63) / 64 * 64);
    if (!p)
        return qk_errf(err, QK_EIO, "out of memory repacking %.*s (%llu bytes)", w->name_len, w->name,
                       (unsigned long long)bytes);
    pack_job j = {.w = w, .dst = p, .pk = k};
    qk_parallel_for(qk_cpu_count(), (size_t)(w->rows / QK_PACK_ROWS), 64, pack_groups, &j);
    w->packed = p;
    *mem = p;
    return 0;
}

int qk_matmul(const qk_weight *w, const float *x, int64_t n_tok, float *y, qk_matmul_ws *ws,
              int nthreads, qk_err *err)
{
    if (w->rows <= 0)
        return 0;
    return qk_matmul_n(&w, &y, 1, x, n_tok, ws, nthreads, err);
}

void qk_matmul_ws_free(qk_matmul_ws *ws)
{
    free(ws->buf);
    ws->buf = NULL;
    ws->cap = 0;
}

int qk_act_type_parse(const char *s, int *act, qk_err *err)
{
    if (!strcmp(s, "default"))
        *act = QK_ACT_DEFAULT;
    else if (!strcmp(s, "f32"))
        *act = QK_ACT_F32;
    else
        return qk_errf(err, QK_EINPUT, "--act-type '%s': expected default or f32", s);
    return 0;
}

const char *qk_act_type_name(int act) { return act == QK_ACT_F32 ? "f32" : "default"; }
