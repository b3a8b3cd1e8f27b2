/* gptq.c - GPTQ into GGUF block types (see gptq.h). */
#include "lib/quant/gptq.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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

#define HESS_TILE 8 /* rows of S per work item */

typedef struct {
    qk_hess *h;
    const float *x;
    int64_t n;
    qk_gram_fn gram;
} hess_job;

static void hess_rows(void *ctx, size_t b, size_t e)
{
    const hess_job *j = ctx;
    const int64_t d = j->h->dim;
    for (size_t tile = b; tile < e; tile++) {
        const int64_t i0 = (int64_t)tile * HESS_TILE, i1 = i0 + HESS_TILE < d ? i0 + HESS_TILE : d;
        j->gram(j->h->s, d, j->x, j->n, i0, i1);
    }
}

void qk_hess_add(qk_hess *h, const float *x, int64_t n_rows, int nthreads)
{
    hess_job j = {h, x, n_rows, qk_gram_kernel()};
    qk_parallel_for(nthreads, (size_t)((h->dim + HESS_TILE - 1) / HESS_TILE), 1, hess_rows, &j);
    h->n += n_rows;
}

/* ---- U: the upper Cholesky factor of H^-1 ---------------------------------------------- */

/* With H = V V^T for an upper triangular V (the Cholesky factorization of H
 * with its index order reversed), H^-1 = V^-T V^-1, so U = V^-1 is the
 * upper triangular factor with H^-1 = U^T U that GPTQ needs. */
typedef struct {
    double *a;   /* n x n: H in, V out (upper triangle) */
    double *uc;  /* n x n: U by columns, uc[j * n + i] = U[i][j] */
    int64_t n, j;
    atomic_int bad;
} chol_job;

/* sum a[m] * b[m] over m in [0, n), in four fixed interleaved partial sums */
static double dot4(const double *a, const double *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t m = 0;
    for (; m + 4 <= n; m += 4) {
        s0 += a[m] * b[m];
        s1 += a[m + 1] * b[m + 1];
        s2 += a[m + 2] * b[m + 2];
        s3 += a[m + 3] * b[m + 3];
    }
    for (; m < n; m++)
        s0 += a[m] * b[m];
    return (s0 + s1) + (s2 + s3);
}

static void v_column(void *ctx, size_t b, size_t e)
{
    chol_job *c = ctx;
    const int64_t n = c->n, j = c->j;
    const double *vj = c->a + j * n, djj = vj[j];
    for (size_t ii = b; ii < e; ii++) {
        const int64_t i = (int64_t)ii;
        double *vi = c->a + i * n;
        vi[j] = (vi[j] - dot4(vi + j + 1, vj + j + 1, n - j - 1)) / djj;
    }
}

static void u_columns(void *ctx, size_t b, size_t e)
{
    chol_job *c = ctx;
    const int64_t n = c->n;
    for (size_t jj = b; jj < e; jj++) {
        const int64_t j = (int64_t)jj;
        double *u = c->uc + j * n;
        u[j] = 1.0 / c->a[j * n + j];
        for (int64_t i = j - 1; i >= 0; i--) {
            const double *vi = c->a + i * n;
            u[i] = -dot4(vi + i + 1, u + i + 1, j - i) / vi[i];
        }
    }
}

/* a (n x n, symmetric, full) -> U row-major in float (upper triangle).
 * Returns false when a is not positive definite. */
static bool factor(double *a, double *uc, float *u, int64_t n, int nthreads)
{
    chol_job c = {.a = a, .uc = uc, .n = n};
    for (int64_t j = n - 1; j >= 0; j--) {
        double *vj = a + j * n;
        const double d = vj[j] - dot4(vj + j + 1, vj + j + 1, n - j - 1);
        if (!(d > 0) || !isfinite(d))
            return false;
        vj[j] = sqrt(d);
        c.j = j;
        qk_parallel_for(nthreads, (size_t)j, 64, v_column, &c);
    }
    qk_parallel_for(nthreads, (size_t)n, 8, u_columns, &c);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i; j < n; j++)
            u[i * n + j] = (float)uc[j * n + i];
    return true;
}

/* ---- the column loop ---------------------------------------------------------------------- */

#define ROW_TILE 16 /* rows per work item */

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

/* Pending feedback of batch positions [k1, k) onto positions [from, cols). */
static void feedback(const gq_job *j, gq_tile *t, int64_t k1, int64_t k, int64_t from, int nr)
{
    for (int64_t kp = from; kp < j->cols; kp++) {
        float *wk = t->wt + kp * ROW_TILE;
        for (int64_t kk = k1; kk < k; kk++) {
            const float uu = j->u[kk * j->cols + kp];
            const float *ek = t->e + (kk - k1) * ROW_TILE;
            for (int r = 0; r < nr; r++)
                wk[r] -= uu * ek[r];
        }
    }
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
                feedback(j, t, k1, k, k2, nr);
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
        for (int64_t kp = k + 1; kp < k2; kp++) {
            const float uu = j->u[k * C + kp];
            float *wp = t->wt + kp * ROW_TILE;
            for (int r = 0; r < nr; r++)
                wp[r] -= uu * ek[r];
        }
        if (k + 1 == k2) { /* the batch is done: its feedback onto the rest */
            feedback(j, t, k1, k2, k2, nr);
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
    double *diag = malloc(C * sizeof *diag), *a = malloc(C * C * sizeof *a), *uc = malloc(C * C * sizeof *uc);
    f->u = malloc(C * C * sizeof *f->u), f->imp = malloc(C * sizeof *f->imp);
    f->perm = malloc(C * sizeof *f->perm), f->pos = malloc(C * sizeof *f->pos), f->dead = malloc(C);
    int rc = 0;
    if (!diag || !a || !uc || !f->u || !f->imp || !f->perm || !f->pos || !f->dead) {
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
    bool ok = false;
    for (int attempt = 0; attempt < 4 && !ok; attempt++) {
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
        ok = factor(a, uc, f->u, f->cols, o->nthreads);
    }
    f->damp = damp;
    if (!ok)
        rc = qk_errf(err, QK_EINPUT, "GPTQ: the Hessian is not positive definite even with dampening %g", damp);
done:
    free(diag), free(a), free(uc);
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
                .pos = f->pos, .maxpos = maxpos, .dead = f->dead, .out = out, .rs = qk_row_size(type, cols)};
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
                .dead = f->dead, .ig = g, .q = q, .deq = deq};
    return run_job(&j, nthreads, loss, err);
}
