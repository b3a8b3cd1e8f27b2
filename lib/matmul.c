/* matmul.c - y = W x through the format table (see matmul.h).
 *
 * The kernels come from kernels/cpu.h: the fastest level this CPU has (or
 * QK_CPU's).  Every output element is computed by the level's dot_tile,
 * which returns vec_dot's bits for that element whatever the tile shape, so
 * the result does not depend on the thread count, on how many tokens are in
 * the batch, or on whether a token is decoded alone or in a prompt batch.
 * Work is split across threads only along weight rows, in fixed ranges. */
#include "matmul.h"

#include <stdlib.h>

#include "ckd.h"
#include "cpu.h"
#include "threads.h"
#include "types.h"

#define ROW_TILE 16                /* weight rows kept hot while the tokens stream past */
#define TOK_TILE 64                /* activation rows per pass over a row tile */
#define RANGE_WORK (1u << 18)      /* about this many multiply-adds per thread range */

typedef struct {
    const qk_weight *w;
    const qk_type_traits *vt;      /* activation (vec_dot_type) traits */
    const float *x;
    uint8_t *xq;                   /* encoded activations, or NULL for F32 */
    size_t xq_row;                 /* bytes per encoded row */
    int64_t n_tok;
    float *y;
    const qk_kernels *k;           /* weight type's dot kernels */
    qk_from_float_fn from_float;   /* activation encoder */
} job;

static void encode_range(void *ctx, size_t begin, size_t end)
{
    const job *j = ctx;
    for (size_t t = begin; t < end; t++)
        j->from_float(j->x + t * (size_t)j->w->cols, j->xq + t * j->xq_row, j->w->cols);
}

static void dot_range(void *ctx, size_t begin, size_t end)
{
    const job *j = ctx;
    const qk_weight *w = j->w;
    const uint8_t *act = j->xq ? j->xq : (const uint8_t *)j->x;
    const size_t act_row = j->xq ? j->xq_row : (size_t)w->cols * sizeof(float);
    for (size_t r0 = begin; r0 < end; r0 += ROW_TILE) {
        const int nr = (int)(end - r0 < ROW_TILE ? end - r0 : ROW_TILE);
        for (int64_t t0 = 0; t0 < j->n_tok; t0 += TOK_TILE) {
            const int nt = (int)(j->n_tok - t0 < TOK_TILE ? j->n_tok - t0 : TOK_TILE);
            qk_dot_tile(j->k, w->cols, w->data + r0 * w->row_size, w->row_size, nr,
                        act + (size_t)t0 * act_row, act_row, nt,
                        j->y + (size_t)t0 * (size_t)w->rows + r0, (size_t)w->rows);
        }
    }
}

int qk_matmul(const qk_weight *w, const float *x, int64_t n_tok, float *y, qk_matmul_ws *ws,
              int nthreads, qk_err *err)
{
    if (n_tok <= 0 || w->rows <= 0)
        return 0;
    const qk_type_traits *wt = qk_type_get(w->type);
    job j = {.w = w, .vt = qk_type_get(wt->vec_dot_type), .x = x, .n_tok = n_tok, .y = y,
             .k = qk_kernels_for(w->type)};
    if (wt->vec_dot_type != QK_F32)
        j.from_float = qk_kernels_for(wt->vec_dot_type)->from_float;
    if (wt->vec_dot_type != QK_F32) {
        uint64_t need;
        j.xq_row = qk_row_size(wt->vec_dot_type, w->cols);
        if (qk_ckd_mul(&need, j.xq_row, (uint64_t)n_tok) || need > SIZE_MAX)
            return qk_errf(err, QK_EIO, "matmul: activation buffer size overflows");
        if (need > ws->cap) {
            void *p = realloc(ws->buf, need);
            if (!p)
                return qk_errf(err, QK_EIO, "matmul: out of memory (%llu bytes)",
                               (unsigned long long)need);
            ws->buf = p;
            ws->cap = need;
        }
        j.xq = ws->buf;
        qk_parallel_for(nthreads, (size_t)n_tok, 1, encode_range, &j);
    }
    /* The range size only affects speed: every element is one vec_dot. */
    uint64_t per_row = (uint64_t)w->cols * (uint64_t)n_tok;
    uint64_t grain = per_row >= RANGE_WORK ? 1 : RANGE_WORK / per_row;
    grain = (grain + ROW_TILE - 1) / ROW_TILE * ROW_TILE;
    qk_parallel_for(nthreads, (size_t)w->rows, (size_t)grain, dot_range, &j);
    return 0;
}

void qk_matmul_ws_free(qk_matmul_ws *ws)
{
    free(ws->buf);
    ws->buf = NULL;
    ws->cap = 0;
}
