/* ckpt_awq.c - AWQ for Hugging Face checkpoints, as llm-compressor's
 * AWQModifier (llm-compressor 0.14, modifiers/transform/awq) runs it before
 * the W4A16 quantization (see ckpt_calib.h).
 *
 * Per decoder layer, on the model's own (float) activations, for each of
 * its default Llama mappings in order (smooth -> balance; the loss is the
 * output of the balance layers' lowest common ancestor):
 *   input_layernorm -> q/k/v            loss on self_attn's output (o_proj's)
 *   v_proj -> o_proj                    loss on o_proj's output; skipped when
 *                                       v_proj's rows are not o_proj's columns (GQA)
 *   post_attention_layernorm -> gate/up loss on the mlp's output (down_proj's)
 *   up_proj -> down_proj                loss on down_proj's output
 * A mapping whose balance layers have an online input transform (a rotated
 * model's R4 before down_proj, --rotate) is skipped: the smooth layer's
 * scale would land on the other side of the transform.
 * x = mean |input| per channel of the balance layers (from the calibration
 * pass), w = mean over the balance layers' rows of |W| / (group amax + 1e-6)
 * per column; for the grid (0, plain) and ratio r = i / 18, i = 0..18
 * (duo scaling): s = max(x^r / (w^(1-r) + 1e-4), 1e-4) (plain: x^0), divided
 * by sqrt(max s * min s); each balance weight becomes Q(W s) / s (the
 * scheme's round to nearest), the ancestor runs again on the same inputs,
 * and the mean squared difference from its float output is the loss.  The
 * best s multiplies the balance layers' columns and divides the smooth
 * layer (the norm's weight, or the rows of v_proj / up_proj).  The next
 * layer calibrates on the smoothed float layer's output (llm-compressor
 * quantizes only after calibration); the writer then rounds the smoothed
 * weights to nearest. */
#include "lib/quant/ckpt_awq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/types.h"
#include "lib/engine/matmul.h"

#define NW 7
#define N_GRID 20
enum { W_Q, W_K, W_V, W_O, W_GATE, W_UP, W_DOWN };
enum { PH_COLLECT, PH_O, PH_D, PH_NONE };

static qk_weight *lw(qk_layer *L, int i)
{
    qk_weight *ws[NW] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return ws[i];
}

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "AWQ: out of memory"); }

void qk_awq_free(qk_awq *a)
{
    for (int i = 0; i < NW; i++)
        free(a->cur[i]);
    free(a->norm[0]), free(a->norm[1]);
    for (int k = 0; k < QK_GS_N; k++)
        free(a->xs[k]);
    free(a->o_in), free(a->d_in), free(a->cap);
    qk_matmul_ws_free(&a->ws);
    memset(a, 0, sizeof *a);
}

int qk_awq_on_input(qk_awq *a, int slot, const float *x, int n, int64_t cols, qk_err *err)
{
    if (a->phase == PH_COLLECT) {
        if (!a->xs[slot] && !(a->xs[slot] = calloc((size_t)cols, sizeof(double))))
            return oom(err);
        for (int t = 0; t < n; t++)
            for (int64_t c = 0; c < cols; c++)
                a->xs[slot][c] += fabsf(x[(size_t)t * (size_t)cols + (size_t)c]);
        a->nx[slot] += n;
    }
    float *dst = a->phase == PH_COLLECT ? (slot == QK_GS_O ? a->o_in : slot == QK_GS_DOWN ? a->d_in : NULL)
                 : (a->phase == PH_O && slot == QK_GS_O) || (a->phase == PH_D && slot == QK_GS_DOWN) ? a->cap
                 : NULL;
    int64_t *at = a->phase == PH_COLLECT ? (slot == QK_GS_O ? &a->n_o : &a->n_d) : &a->n_cap;
    if (dst) {
        if (*at + n > a->n_tok)
            return qk_errf(err, QK_EINPUT, "AWQ: more calibration rows than tokens");
        memcpy(dst + (size_t)*at * (size_t)cols, x, (size_t)n * (size_t)cols * sizeof *x);
        *at += n;
    }
    return 0;
}

/* y (n_tok x w rows) = W x, W a rows x cols float matrix */
static int mm(qk_awq *a, const float *w, int64_t rows, int64_t cols, const float *x, float *y, qk_err *err)
{
    const qk_weight q = {.type = QK_F32, .rows = rows, .cols = cols, .row_size = (size_t)cols * sizeof(float),
                         .data = (const uint8_t *)w};
    return qk_matmul(&q, x, a->n_tok, y, &a->ws, a->nthreads, err);
}

/* out = Q(w * s) / s, Q the scheme's round to nearest */
static int fake_q(qk_awq *a, const float *w, int64_t rows, int64_t cols, const float *s, float *out, qk_err *err)
{
    const size_t n = (size_t)rows * (size_t)cols;
    size_t bytes = qk_scheme_encoded_size(a->t->s, rows, cols, &a->t->so);
    uint8_t *enc = malloc(bytes ? bytes : 1);
    if (!enc)
        return oom(err);
    for (size_t i = 0; i < n; i++)
        out[i] = w[i] * s[i % (size_t)cols];
    int rc = qk_scheme_encode(a->t->s, out, rows, cols, &a->t->so, enc, err);
    if (!rc)
        rc = qk_scheme_decode(a->t->s, enc, rows, cols, &a->t->so, out, err);
    for (size_t i = 0; !rc && i < n; i++)
        out[i] /= s[i % (size_t)cols];
    free(enc);
    return rc;
}

/* mean over the balance layers' rows of |W| normalized by its group's amax, per column */
static void w_mean(qk_awq *a, const int *bal, int nb, int64_t cols, double *wm)
{
    const int64_t g = a->t->so.group ? a->t->so.group : 128;
    int64_t rows_total = 0;
    memset(wm, 0, (size_t)cols * sizeof *wm);
    for (int b = 0; b < nb; b++) {
        const float *w = a->cur[bal[b]];
        const int64_t rows = a->rows[bal[b]];
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c0 = 0; c0 < cols; c0 += g) {
                float amax = 0;
                for (int64_t c = c0; c < c0 + g && c < cols; c++)
                    amax = fmaxf(amax, fabsf(w[r * cols + c]));
                for (int64_t c = c0; c < c0 + g && c < cols; c++)
                    wm[c] += fabsf(w[r * cols + c]) / (amax + 1e-6f);
            }
        rows_total += rows;
    }
    for (int64_t c = 0; c < cols; c++)
        wm[c] /= (double)rows_total;
}

static void grid_scales(const double *xm, const double *wm, int64_t cols, int gi, float *s)
{
    const bool duo = gi > 0;
    const double r = duo ? (double)(gi - 1) / (N_GRID - 2) : 0.0;
    double mx = -INFINITY, mn = INFINITY;
    for (int64_t c = 0; c < cols; c++) {
        double v = duo ? pow(xm[c], r) / (pow(wm[c], 1 - r) + 1e-4) : pow(xm[c], 0.0);
        v = (float)(v < 1e-4 ? 1e-4 : v);
        s[c] = (float)v;
        mx = fmax(mx, v), mn = fmin(mn, v);
    }
    const float d = (float)sqrt(mx * mn);
    for (int64_t c = 0; c < cols; c++) {
        s[c] /= d;
        if (!isfinite(s[c]))
            s[c] = 1;
    }
}

static double mse(const float *a, const float *b, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)b[i];
        e += d * d;
    }
    return e / (double)n;
}

/* Point the engine's weight i at floats (rows x cols, F32). */
static void point(qk_layer *L, int i, const float *f) { qk_gptq_point_f32(lw(L, i), f); }

typedef struct {
    const int *bal;
    int nb;
    int smooth;      /* -1: the norm in `norm`, else a weight whose rows are divided */
    float *norm;
    int parent;      /* W_O or W_DOWN: the layer whose output is the loss */
    int rerun;       /* PH_O / PH_D: the balance layers' ancestor needs the layer run again */
    int slot;        /* the balance layers' input */
} mapping;

static int do_mapping(qk_awq *a, qk_gptq_seq *s, int l, const mapping *mp, qk_err *err)
{
    qk_layer *L = &s->layers[l];
    const int64_t cols = a->cols[mp->bal[0]], pr = a->rows[mp->parent], pc = a->cols[mp->parent];
    const float *pin = mp->parent == W_O ? a->o_in : a->d_in;
    const size_t n_out = (size_t)a->n_tok * (size_t)pr;
    double *xm = malloc((size_t)cols * sizeof *xm), *wm = malloc((size_t)cols * sizeof *wm);
    float *sc = malloc((size_t)cols * sizeof *sc), *best = malloc((size_t)cols * sizeof *best);
    float *fp = malloc(n_out * sizeof *fp), *y = malloc(n_out * sizeof *y);
    float *tmp[3] = {0};
    int rc = xm && wm && sc && best && fp && y ? 0 : oom(err);
    for (int b = 0; !rc && b < mp->nb; b++)
        if (!(tmp[b] = malloc((size_t)a->rows[mp->bal[b]] * (size_t)cols * sizeof(float))))
            rc = oom(err);
    if (rc)
        goto done;
    for (int64_t c = 0; c < cols; c++)
        xm[c] = (float)(a->xs[mp->slot][c] / (double)a->nx[mp->slot]);
    w_mean(a, mp->bal, mp->nb, cols, wm);
    if ((rc = mm(a, a->cur[mp->parent], pr, pc, pin, fp, err)))
        goto done;
    double best_e = INFINITY;
    for (int gi = 0; gi < N_GRID && !rc; gi++) {
        grid_scales(xm, wm, cols, gi, sc);
        for (int b = 0; b < mp->nb && !rc; b++)
            rc = fake_q(a, a->cur[mp->bal[b]], a->rows[mp->bal[b]], cols, sc, tmp[b], err);
        if (rc)
            break;
        const float *wp = mp->bal[0] == mp->parent ? tmp[0] : a->cur[mp->parent];
        const float *x = pin;
        if (mp->rerun != PH_NONE) {
            for (int b = 0; b < mp->nb; b++)
                point(L, mp->bal[b], tmp[b]);
            a->phase = mp->rerun, a->n_cap = 0;
            rc = qk_gptq_seq_pass(s, l, err);
            a->phase = PH_NONE;
            for (int b = 0; b < mp->nb; b++)
                point(L, mp->bal[b], a->cur[mp->bal[b]]);
            if (!rc && a->n_cap != a->n_tok)
                rc = qk_errf(err, QK_EINPUT, "AWQ: layer %d: %lld rows reached the loss, not %lld", l,
                             (long long)a->n_cap, (long long)a->n_tok);
            x = a->cap;
        }
        if (!rc)
            rc = mm(a, wp, pr, pc, x, y, err);
        const double e = rc ? INFINITY : mse(fp, y, n_out);
        if (e < best_e) {
            best_e = e;
            memcpy(best, sc, (size_t)cols * sizeof *best);
        }
    }
    if (!rc && !isfinite(best_e))
        rc = qk_errf(err, QK_EINPUT, "AWQ: layer %d: no finite loss in the grid search", l);
    if (rc)
        goto done;
    for (int b = 0; b < mp->nb; b++) {
        float *w = a->cur[mp->bal[b]];
        for (int64_t r = 0; r < a->rows[mp->bal[b]]; r++)
            for (int64_t c = 0; c < cols; c++)
                w[r * cols + c] *= best[c];
    }
    if (mp->smooth < 0) {
        for (int64_t c = 0; c < cols; c++)
            mp->norm[c] /= best[c];
    } else { /* the smooth layer's last `cols` rows (v_proj, up_proj: all of them) */
        float *w = a->cur[mp->smooth];
        const int64_t r0 = a->rows[mp->smooth] - cols, sk = a->cols[mp->smooth];
        for (int64_t r = 0; r < cols; r++)
            for (int64_t c = 0; c < sk; c++)
                w[(r0 + r) * sk + c] /= best[r];
    }
done:
    free(xm), free(wm), free(sc), free(best), free(fp), free(y);
    for (int b = 0; b < 3; b++)
        free(tmp[b]);
    return rc;
}

int qk_awq_layer(qk_awq *a, qk_gptq_seq *s, int l, qk_err *err)
{
    qk_layer *L = &s->layers[l];
    const int64_t e = s->m->hp.n_embd;
    if (a->n_o != a->n_tok || a->n_d != a->n_tok)
        return qk_errf(err, QK_EINPUT, "AWQ: layer %d: the calibration pass gave %lld / %lld rows, not %lld", l,
                       (long long)a->n_o, (long long)a->n_d, (long long)a->n_tok);
    for (int i = 0; i < NW; i++) {
        qk_weight *w = lw(L, i);
        free(a->cur[i]);
        a->rows[i] = w->rows, a->cols[i] = w->cols;
        if (!(a->cur[i] = malloc((size_t)w->rows * (size_t)w->cols * sizeof(float))))
            return oom(err);
        for (int64_t r = 0; r < w->rows; r++)
            qk_type_get(w->type)->to_float(w->data + (size_t)r * w->row_size, a->cur[i] + r * w->cols, w->cols);
    }
    for (int i = 0; i < 2; i++) {
        free(a->norm[i]);
        if (!(a->norm[i] = malloc((size_t)e * sizeof(float))))
            return oom(err);
        memcpy(a->norm[i], i ? L->ffn_norm : L->attn_norm, (size_t)e * sizeof(float));
    }
    /* the passes run the copies, smoothed in place as the mappings go */
    for (int i = 0; i < NW; i++)
        point(L, i, a->cur[i]);
    L->attn_norm = a->norm[0], L->ffn_norm = a->norm[1];
    static const int qkv[3] = {W_Q, W_K, W_V}, o[1] = {W_O}, gu[2] = {W_GATE, W_UP}, dn[1] = {W_DOWN};
    const mapping maps[4] = {
        {qkv, 3, -1, a->norm[0], W_O, PH_O, QK_GS_QKV},
        {o, 1, W_V, NULL, W_O, PH_NONE, QK_GS_O},
        {gu, 2, -1, a->norm[1], W_DOWN, PH_D, QK_GS_GU},
        {dn, 1, W_UP, NULL, W_DOWN, PH_NONE, QK_GS_DOWN},
    };
    int rc = 0;
    for (int k = 0; k < 4 && !rc; k++) {
        if (k == 1 && a->rows[W_V] != a->cols[W_O])
            continue; /* llm-compressor skips v_proj -> o_proj when the shapes differ */
        bool online = false; /* a rotated model's online transform (R4 before down_proj) between the smooth
                              * layer and a balance layer: a per-channel scale cannot move across it */
        for (int b = 0; b < maps[k].nb; b++)
            online |= lw(L, maps[k].bal[b])->in_had != 0;
        if (!online)
            rc = do_mapping(a, s, l, &maps[k], err);
    }
    /* the next pass runs the smoothed float layer */
    for (int k = 0; k < QK_GS_N; k++) {
        free(a->xs[k]);
        a->xs[k] = NULL, a->nx[k] = 0;
    }
    a->n_o = a->n_d = 0;
    a->phase = PH_COLLECT;
    return rc;
}

int qk_awq_init(qk_awq *a, const qk_calib_target *t, const qk_model *m, int64_t n_tok, int nthreads, qk_err *err)
{
    memset(a, 0, sizeof *a);
    a->t = t, a->n_tok = n_tok, a->nthreads = nthreads;
    int64_t oc = 0, dc = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        oc = m->layers[l].wo.cols > oc ? m->layers[l].wo.cols : oc;
        dc = m->layers[l].w_down.cols > dc ? m->layers[l].w_down.cols : dc;
    }
    const int64_t mc = oc > dc ? oc : dc;
    a->o_in = malloc((size_t)n_tok * (size_t)oc * sizeof(float));
    a->d_in = malloc((size_t)n_tok * (size_t)dc * sizeof(float));
    a->cap = malloc((size_t)n_tok * (size_t)mc * sizeof(float));
    a->phase = PH_COLLECT;
    return a->o_in && a->d_in && a->cap ? 0 : oom(err);
}

