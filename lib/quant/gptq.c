/* gptq.c - GPTQ into GGUF block types (see gptq.h). */
#include "lib/quant/gptq.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gptq_ops.h"
#include "kernels/gram.h"
#include "kernels/grid.h"
#include "kernels/types.h"
#include "lib/core/threads.h"

/* ---- the Hessian sums --------------------------------------------------------------- */

int qk_hess_init(qk_hess *h, int64_t dim, qk_err *err)
{
    h->dim = dim;
    h->n = 0;
    h->s = calloc((size_t)dim * (size_t)dim, sizeof *h->s);
    return h->s ? 0 : qk_errf(err, QK_EIO, "out of memory (a %lld x %lld Hessian)", (long long)dim, (long long)dim);
}

void qk_hess_free(qk_hess *h)
{
    free(h->s);
    h->s = NULL;
}

#define HESS_TILE 8   /* rows of S per call of the kernel */
#define HESS_ITEM 4   /* tiles per work item */
#define HESS_CHUNK 64 /* activation rows per pass over the item's tiles (they stay in cache) */

typedef struct {
    qk_hess *h;
    const float *x;
    int64_t n;
    qk_gram_fn gram;
} hess_job;

/* Each element adds the rows in order whatever the chunks (kernels/gram.h), so the bits do not
 * depend on HESS_CHUNK or the items. */
static void hess_rows(void *ctx, size_t b, size_t e)
{
    const hess_job *j = ctx;
    const int64_t d = j->h->dim;
    for (int64_t t0 = 0; t0 < j->n; t0 += HESS_CHUNK) {
        const int64_t nt = j->n - t0 < HESS_CHUNK ? j->n - t0 : HESS_CHUNK;
        for (size_t tile = b; tile < e; tile++) {
            const int64_t i0 = (int64_t)tile * HESS_TILE, i1 = i0 + HESS_TILE < d ? i0 + HESS_TILE : d;
            j->gram(j->h->s, d, j->x + t0 * d, nt, i0, i1);
        }
    }
}

void qk_hess_add(qk_hess *h, const float *x, int64_t n_rows, int nthreads)
{
    hess_job j = {h, x, n_rows, qk_gram_kernel()};
    qk_parallel_for(nthreads, (size_t)((h->dim + HESS_TILE - 1) / HESS_TILE), HESS_ITEM, hess_rows, &j);
    h->n += n_rows;
}

/* ---- U: the upper Cholesky factor of H^-1 ---------------------------------------------- */

/* With H = V V^T for an upper triangular V (the Cholesky factorization of H
 * with its index order reversed), H^-1 = V^-T V^-1, so U = V^-1 is the
 * upper triangular factor with H^-1 = U^T U that GPTQ needs.  Each element of
 * V and U is one formula of kernels/gptq_ops.h (a dot product in a fixed
 * order), so the blocking below and the threads change no bit: V is made by
 * blocks of rows from the bottom up (the block's columns right of it, 8 rows
 * per work item sharing the reads of each row below, then its own triangle),
 * U by panels of columns, each on its own. */
#define CHOL_BLOCK 64 /* rows of V per block (fewer waits for the slowest thread) */
#define CHOL_ITEM 8   /* of them per work item */
#define INV_PANEL 32  /* columns of U per work item */

typedef struct {
    const qk_gptq_ops *ops;
    double *a;  /* n x n: H in, V out (upper triangle) */
    float *u;   /* n x n: U (upper triangle) */
    int64_t n, r0, r1, panels;
    atomic_int oom;
} chol_job;

static void v_rows(void *ctx, size_t b, size_t e)
{
    const chol_job *c = ctx;
    for (size_t it = b; it < e; it++) {
        const int64_t r = c->r0 + (int64_t)it * CHOL_ITEM, re = r + CHOL_ITEM < c->r1 ? r + CHOL_ITEM : c->r1;
        c->ops->chol_rows(c->a, c->n, r, re, c->r1, c->n);
    }
}

static void u_panels(void *ctx, size_t b, size_t e)
{
    chol_job *c = ctx;
    const int64_t n = c->n;
    double *p = malloc((size_t)n * INV_PANEL * sizeof *p);
    if (!p) {
        atomic_store(&c->oom, 1);
        return;
    }
    for (size_t it = b; it < e; it++) { /* the widest panels first */
        const int64_t j0 = (c->panels - 1 - (int64_t)it) * INV_PANEL, w = n - j0 < INV_PANEL ? n - j0 : INV_PANEL;
        c->ops->inv_cols(c->a, n, p, j0, w);
        for (int64_t i = 0; i < j0 + w; i++)
            for (int64_t k = i > j0 ? i - j0 : 0; k < w; k++)
                c->u[i * n + j0 + k] = (float)p[i * w + k];
    }
    free(p);
}

/* a (n x n, symmetric, full) -> U row-major in float (upper triangle).
 * Returns 0, 1 when a is not positive definite, -1 out of memory. */
static int factor(double *a, float *u, int64_t n, int nthreads)
{
    chol_job c = {.ops = qk_gptq_ops_active(), .a = a, .u = u, .n = n};
    for (int64_t r1 = n; r1 > 0; r1 -= CHOL_BLOCK) {
        c.r1 = r1;
        c.r0 = r1 > CHOL_BLOCK ? r1 - CHOL_BLOCK : 0;
        if (r1 < n)
            qk_parallel_for(nthreads, (size_t)((r1 - c.r0 + CHOL_ITEM - 1) / CHOL_ITEM), 1, v_rows, &c);
        for (int64_t r = r1 - 1; r >= c.r0; r--) {
            c.ops->chol_rows(a, n, r, r + 1, r + 1, r1);
            double *vr = a + r * n;
            const double d = vr[r] - qk_gptq_dot4(vr + r + 1, vr + r + 1, n - r - 1);
            if (!(d > 0) || !isfinite(d))
                return 1;
            vr[r] = sqrt(d);
        }
    }
    c.panels = (n + INV_PANEL - 1) / INV_PANEL;
    atomic_init(&c.oom, 0);
    qk_parallel_for(nthreads, (size_t)c.panels, 1, u_panels, &c);
    return atomic_load(&c.oom) ? -1 : 0;
}

/* ---- the column loop ---------------------------------------------------------------------- */

#define ROW_TILE 16 /* rows per work item: the 16 lanes of gptq_ops.h's sub16 */

typedef struct {
    const float *w;
    int64_t rows, cols;
    const qk_type_traits *tt;
    const qk_grid_ops *g;
    const float *u;     /* cols x cols, permuted, upper */
    const float *imp;   /* importance per (original) column */
    const int *perm, *pos, *maxpos; /* perm[k]: column at position k; pos: its inverse; maxpos: per block */
    const uint8_t *dead;
    uint8_t *out;
    size_t rs;
    double *loss;       /* per tile */
    atomic_int oom;
    const qk_gptq_ops *ops;
    const qk_gptq_igrid *ig; /* a static integer grid instead of the type's blocks (g, tt unused) */
    int8_t *q;          /* ig: the levels, rows x cols */
    float *deq;         /* ig: their values, rows x cols (may be NULL) */
} gq_job;

/* per-tile scratch */
typedef struct {
    float *wt, *a, *b, *e, *x; /* wt, a, b: cols x ROW_TILE (wt by position, a/b by column); e: BATCH x ROW_TILE;
                                * x: one block */
    uint8_t *lv, *enc;         /* lv: ROW_TILE x cols; enc: per block */
} gq_tile;

/* Pending feedback of batch positions [k1, k) onto positions [from, cols)
 * (every lane of the tile: those past its rows hold zeros). */
static void feedback(const gq_job *j, gq_tile *t, int64_t k1, int64_t k, int64_t from)
{
    j->ops->sub16(t->wt + from * ROW_TILE, j->u + k1 * j->cols + from, j->cols, t->e, k - k1, j->cols - from);
}

/* Fix block b's scales for the tile's rows: the encoder on its current weights. */
static void encode_block(const gq_job *j, gq_tile *t, int64_t blk, int64_t r0, int nr)
{
    const int B = j->g->block;
    const size_t ts = j->tt->type_size;
    float a[QK_GRID_MAX_BLOCK], b[QK_GRID_MAX_BLOCK];
    for (int r = 0; r < nr; r++) {
        uint8_t *dst = j->out + (size_t)(r0 + r) * j->rs + (size_t)blk * ts;
        if (j->g->row_context && j->cols > B) {
            /* The encoder weighs the block by sigma2, the mean square of the row it
             * is given: give it the block and a pad block that brings that mean to
             * the whole current row's (the row itself would cost cols/B encodes of
             * the row per row). */
            float s = 0, sb = 0, x2[2 * QK_GRID_MAX_BLOCK], imp2[2 * QK_GRID_MAX_BLOCK];
            uint8_t two[2 * 64];
            for (int64_t c = 0; c < j->cols; c++) {
                const float v = t->wt[j->pos[c] * ROW_TILE + r];
                s += v * v;
            }
            for (int i = 0; i < B; i++) {
                x2[i] = t->wt[j->pos[blk * B + i] * ROW_TILE + r];
                sb += x2[i] * x2[i];
                imp2[i] = imp2[B + i] = j->imp[blk * B + i];
            }
            const float want = 2.0f * (float)B * (s / (float)j->cols) - sb;
            const float pad = want > 0 ? sqrtf(want / (float)B) : 0.0f;
            for (int i = 0; i < B; i++)
                x2[B + i] = pad;
            j->tt->quantize(x2, two, 1, 2 * B, imp2);
            memcpy(dst, two, ts);
        } else {
            for (int i = 0; i < B; i++)
                t->x[i] = t->wt[j->pos[blk * B + i] * ROW_TILE + r];
            j->tt->quantize(t->x, dst, 1, B, j->imp + blk * B);
        }
        j->g->affine(dst, a, b);
        for (int i = 0; i < B; i++) {
            t->a[(blk * B + i) * ROW_TILE + r] = a[i];
            t->b[(blk * B + i) * ROW_TILE + r] = b[i];
        }
    }
}

/* compressed-tensors' fake_quantize with fixed parameters: clamp(round(w / s + z)), (q - z) * s */
static int8_t ig_nearest(const qk_gptq_igrid *g, int64_t row, int64_t c, int64_t cols, float w, float *v)
{
    const size_t k = (size_t)row * (size_t)(cols / g->group) + (size_t)(c / g->group);
    const float s = g->scale[k], z = g->zero ? g->zero[k] : 0.0f;
    float x = w / s + z;
    x = x < g->lo ? g->lo : x > g->hi ? g->hi : x;
    const int8_t q = (int8_t)rintf(x);
    *v = ((float)q - z) * s; /* from the level, as the checkpoint decodes it (no -0) */
    return q;
}

static void run_tile(const gq_job *j, gq_tile *t, int64_t r0, int nr, double *loss)
{
    const int64_t C = j->cols;
    const int B = j->ig ? j->ig->group : j->g->block;
    memset(t->enc, j->ig ? 1 : 0, (size_t)(C / B));
    for (int64_t k = 0; k < C; k++)
        for (int r = 0; r < ROW_TILE; r++)
            t->wt[k * ROW_TILE + r] = r < nr && !j->dead[j->perm[k]] ? j->w[(r0 + r) * C + j->perm[k]] : 0.0f;
    int64_t k1 = 0, k2 = QK_GPTQ_BATCH < C ? QK_GPTQ_BATCH : C;
    for (int64_t k = 0; k < C; k++) {
        const int64_t c = j->perm[k], blk = c / B;
        if (!t->enc[blk]) {
            /* every pending feedback in first when the block reaches past the batch */
            if (k > k1 && (j->g->row_context || j->maxpos[blk] >= k2)) {
                feedback(j, t, k1, k, k2);
                k1 = k;
                k2 = k1 + QK_GPTQ_BATCH < C ? k1 + QK_GPTQ_BATCH : C;
            }
            encode_block(j, t, blk, r0, nr);
            t->enc[blk] = 1;
        }
        const float d = j->u[k * C + k];
        float *wk = t->wt + k * ROW_TILE, *ek = t->e + (k - k1) * ROW_TILE;
        for (int r = 0; r < nr; r++) {
            float q;
            if (j->ig) {
                const int8_t l = ig_nearest(j->ig, r0 + r, c, C, wk[r], &q);
                j->q[(size_t)(r0 + r) * (size_t)C + (size_t)c] = l;
                if (j->deq)
                    j->deq[(size_t)(r0 + r) * (size_t)C + (size_t)c] = q;
            } else {
                const int l = qk_grid_nearest(j->g, t->a[c * ROW_TILE + r], t->b[c * ROW_TILE + r], wk[r], &q);
                t->lv[(size_t)r * C + c] = (uint8_t)l;
            }
            const float err = (wk[r] - q) / d;
            ek[r] = err;
            *loss += (double)err * err / 2;
        }
        for (int r = nr; r < ROW_TILE; r++)
            ek[r] = 0;
        j->ops->sub16(wk + ROW_TILE, j->u + k * C + k + 1, C, ek, 1, k2 - k - 1);
        if (k + 1 == k2) { /* the batch is done: its feedback onto the rest */
            feedback(j, t, k1, k2, k2);
            k1 = k2;
            k2 = k1 + QK_GPTQ_BATCH < C ? k1 + QK_GPTQ_BATCH : C;
        }
    }
    for (int r = 0; r < nr && !j->ig; r++)
        for (int64_t blk = 0; blk < C / B; blk++)
            j->g->set(j->out + (size_t)(r0 + r) * j->rs + (size_t)blk * j->tt->type_size,
                      t->lv + (size_t)r * C + blk * B);
}

static void tiles(void *ctx, size_t b, size_t e)
{
    gq_job *j = ctx;
    const size_t C = (size_t)j->cols, T = ROW_TILE;
    gq_tile t = {.wt = malloc(C * T * sizeof(float)), .a = malloc(C * T * sizeof(float)),
                 .b = malloc(C * T * sizeof(float)), .e = malloc(QK_GPTQ_BATCH * T * sizeof(float)),
                 .x = malloc(QK_GRID_MAX_BLOCK * sizeof(float)), .lv = malloc(C * T), .enc = malloc(C)};
    if (!t.wt || !t.a || !t.b || !t.e || !t.x || !t.lv || !t.enc) {
        atomic_store(&j->oom, 1);
    } else {
        for (size_t tile = b; tile < e; tile++) {
            const int64_t r0 = (int64_t)(tile * T);
            const int nr = (int)(j->rows - r0 < (int64_t)T ? j->rows - r0 : (int64_t)T);
            j->loss[tile] = 0;
            run_tile(j, &t, r0, nr, &j->loss[tile]);
        }
    }
    free(t.wt), free(t.a), free(t.b), free(t.e), free(t.x), free(t.lv), free(t.enc);
}

/* ---- one matrix --------------------------------------------------------------------------- */

/* act-order: by decreasing diagonal, ties by column (a total order, so any sort gives it) */
static int by_diag(const void *x, const void *y, void *ctx)
{
    const double *d = ctx;
    const int a = *(const int *)x, b = *(const int *)y;
    if (d[a] != d[b])
        return d[a] > d[b] ? -1 : 1;
    return (a > b) - (a < b);
}

void qk_gptq_factor_free(qk_gptq_factor *f)
{
    free(f->perm), free(f->pos), free(f->u), free(f->imp), free(f->dead);
    memset(f, 0, sizeof *f);
}

int qk_gptq_factor_make(qk_gptq_factor *f, const qk_hess *h, const qk_gptq_opts *o, qk_err *err)
{
    memset(f, 0, sizeof *f);
    if (h->n <= 0)
        return qk_errf(err, QK_EINPUT, "GPTQ: no calibration rows reached this input");
    const size_t C = (size_t)h->dim;
    f->cols = h->dim;
    double *diag = malloc(C * sizeof *diag), *a = malloc(C * C * sizeof *a);
    f->u = malloc(C * C * sizeof *f->u), f->imp = malloc(C * sizeof *f->imp);
    f->perm = malloc(C * sizeof *f->perm), f->pos = malloc(C * sizeof *f->pos), f->dead = malloc(C);
    int rc = 0;
    if (!diag || !a || !f->u || !f->imp || !f->perm || !f->pos || !f->dead) {
        rc = qk_errf(err, QK_EIO, "GPTQ: out of memory (%zu columns)", C);
        goto done;
    }
    const double inv_n = 1.0 / (double)h->n;
    double mean = 0;
    for (size_t i = 0; i < C; i++) {
        diag[i] = h->s[i * C + i] * inv_n;
        f->imp[i] = (float)diag[i];
        f->dead[i] = diag[i] == 0;
        if (f->dead[i])
            diag[i] = 1;
        mean += diag[i];
        f->perm[i] = (int)i;
    }
    mean /= (double)C;
    if (o->act_order)
        qsort_r(f->perm, C, sizeof *f->perm, by_diag, diag);
    for (size_t k = 0; k < C; k++)
        f->pos[f->perm[k]] = (int)k;
    double damp = o->damp;
    int bad = 1;
    for (int attempt = 0; attempt < 4 && bad > 0; attempt++) {
        if (attempt)
            damp *= 10;
        for (size_t k = 0; k < C; k++)
            for (size_t kp = 0; kp < C; kp++) {
                size_t i = (size_t)f->perm[k], jj = (size_t)f->perm[kp];
                if (i > jj) {
                    size_t t = i;
                    i = jj, jj = t;
                }
                a[k * C + kp] = i == jj ? diag[i] + damp * mean
                                : f->dead[i] || f->dead[jj] ? 0 : h->s[i * C + jj] * inv_n;
            }
        bad = factor(a, f->u, f->cols, o->nthreads);
    }
    f->damp = damp;
    if (bad < 0)
        rc = qk_errf(err, QK_EIO, "GPTQ: out of memory (%zu columns)", C);
    else if (bad)
        rc = qk_errf(err, QK_EINPUT, "GPTQ: the Hessian is not positive definite even with dampening %g", damp);
done:
    free(diag), free(a);
    if (rc)
        qk_gptq_factor_free(f);
    return rc;
}

/* Run the row tiles of j; *loss (may be NULL) gets the sum of their losses. */
static int run_job(gq_job *j, int nthreads, double *loss, qk_err *err)
{
    const size_t nt = ((size_t)j->rows + ROW_TILE - 1) / ROW_TILE;
    double *tl = calloc(nt ? nt : 1, sizeof *tl);
    if (!tl)
        return qk_errf(err, QK_EIO, "GPTQ: out of memory (%lld rows)", (long long)j->rows);
    j->loss = tl;
    atomic_init(&j->oom, 0);
    qk_parallel_for(nthreads, nt, 1, tiles, j);
    int rc = 0;
    if (atomic_load(&j->oom))
        rc = qk_errf(err, QK_EIO, "GPTQ: out of memory (row tiles)");
    if (!rc && loss) {
        *loss = 0;
        for (size_t i = 0; i < nt; i++)
            *loss += tl[i];
    }
    free(tl);
    return rc;
}

int qk_gptq_quantize(const float *w, int64_t rows, int64_t cols, int type, const qk_gptq_factor *f,
                     int nthreads, uint8_t *out, double *loss, qk_err *err)
{
    const qk_grid_ops *g = qk_grid_for(type);
    const qk_type_traits *tt = qk_type_get(type);
    if (!g || !tt)
        return qk_errf(err, QK_EINPUT, "GPTQ: no grid for type %s", tt ? tt->name : "?");
    if (cols != f->cols || cols % g->block || (g->row_context && tt->type_size > 64))
        return qk_errf(err, QK_EINPUT, "GPTQ: %lld columns, a Hessian of %lld, blocks of %d", (long long)cols,
                       (long long)f->cols, g->block);
    const size_t C = (size_t)cols, nb = C / (size_t)g->block;
    int *maxpos = malloc(nb * sizeof *maxpos);
    if (!maxpos)
        return qk_errf(err, QK_EIO, "GPTQ: out of memory (%lld columns)", (long long)cols);
    for (size_t b = 0; b < nb; b++) {
        maxpos[b] = 0;
        for (int i = 0; i < g->block; i++)
            if (f->pos[b * (size_t)g->block + (size_t)i] > maxpos[b])
                maxpos[b] = f->pos[b * (size_t)g->block + (size_t)i];
    }
    gq_job j = {.w = w, .rows = rows, .cols = cols, .tt = tt, .g = g, .u = f->u, .imp = f->imp, .perm = f->perm,
                .pos = f->pos, .maxpos = maxpos, .dead = f->dead, .ops = qk_gptq_ops_active(), .out = out, .rs = qk_row_size(type, cols)};
    int rc = run_job(&j, nthreads, loss, err);
    free(maxpos);
    return rc;
}

int qk_gptq_quantize_int(const float *w, int64_t rows, int64_t cols, const qk_gptq_igrid *g,
                         const qk_gptq_factor *f, int nthreads, int8_t *q, float *deq, double *loss, qk_err *err)
{
    if (cols != f->cols || g->group <= 0 || cols % g->group)
        return qk_errf(err, QK_EINPUT, "GPTQ: %lld columns, a Hessian of %lld, groups of %d", (long long)cols,
                       (long long)f->cols, g->group);
    gq_job j = {.w = w, .rows = rows, .cols = cols, .u = f->u, .imp = f->imp, .perm = f->perm, .pos = f->pos,
                .dead = f->dead, .ops = qk_gptq_ops_active(), .ig = g, .q = q, .deq = deq};
    return run_job(&j, nthreads, loss, err);
}
