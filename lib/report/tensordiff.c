#include "lib/report/tensordiff.h"

#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "formats/hfnames.h"
#include "lib/core/json.h"
#include "lib/core/progress.h"
#include "formats/tensorset.h"
#include "lib/core/threads.h"
#include "kernels/types.h"

typedef struct pair {
    const char *label;     /* A's name, or a note for a tied output pair */
    const qk_tensor *a, *b;
    int perm;              /* QK_PERM_* applied to the GGUF side */
    bool a_is_gguf;
    bool shape_ok, decodable;
    double max_abs, rmse, snr, cosine;
    bool identical;
} pair;

typedef struct ctx {
    pair *p;
    int64_t n_head, n_head_kv;
} ctx;

static bool same_shape(const qk_tensor *a, const qk_tensor *b)
{
    for (int d = 0; d < QK_MAX_DIMS; d++)
        if (a->ne[d] != b->ne[d])
            return false;
    return true;
}

static void compare(pair *p, int64_t n_head)
{
    const qk_type_traits *ta = qk_type_get(p->a->type), *tb = qk_type_get(p->b->type);
    p->decodable = ta && tb && ta->to_float && tb->to_float;
    if (!p->shape_ok || !p->decodable)
        return;
    int64_t cols = p->a->ne[0];
    uint64_t rows = qk_tensor_rows(p->a);
    size_t rsa = qk_row_size(ta->id, cols), rsb = qk_row_size(tb->id, cols);
    float *ra = malloc((size_t)cols * sizeof *ra), *rb = malloc((size_t)cols * sizeof *rb);
    if (!ra || !rb) {
        free(ra), free(rb);
        p->decodable = false;
        return;
    }
    double ssd = 0, ssa = 0, ssb = 0, dot = 0, maxd = 0;
    for (uint64_t r = 0; r < rows; r++) {
        /* row r of the GGUF side holds row `src` of the HF side */
        uint64_t ra_row = r, rb_row = r;
        if (p->perm) {
            uint64_t src = (uint64_t)qk_unpermute_row((int64_t)r, (int64_t)rows, n_head);
            if (p->a_is_gguf)
                rb_row = src;
            else
                ra_row = src;
        }
        ta->to_float(p->a->data + ra_row * rsa, ra, cols);
        tb->to_float(p->b->data + rb_row * rsb, rb, cols);
        for (int64_t i = 0; i < cols; i++) {
            double x = ra[i], y = rb[i];
            if (isnan(x) || isnan(y)) { /* NaN matches only NaN */
                if (!(isnan(x) && isnan(y)))
                    maxd = INFINITY;
                continue;
            }
            double d = x == y ? 0 : x - y; /* equal infinities differ by 0 */
            if (fabs(d) > maxd)
                maxd = fabs(d);
            ssd += d * d, ssa += x * x, ssb += y * y, dot += x * y;
        }
    }
    free(ra), free(rb);
    double n = (double)p->a->nelem;
    p->max_abs = maxd;
    p->rmse = n > 0 ? sqrt(ssd / n) : 0;
    p->snr = ssd == 0 ? INFINITY : 10 * log10(ssa / ssd);
    p->cosine = ssa > 0 && ssb > 0 ? dot / sqrt(ssa * ssb) : (ssa == ssb ? 1 : 0);
    p->identical = ssd == 0 && maxd == 0;
}

static void run_range(void *v, size_t b, size_t e)
{
    ctx *c = v;
    for (size_t i = b; i < e; i++) {
        pair *p = &c->p[i];
        if (p->b)
            compare(p, p->perm == QK_PERM_K ? c->n_head_kv : c->n_head);
    }
}

/* A GGUF's output.weight, when the HF side ties lm_head to the embeddings
 * (no lm_head.weight): llama.cpp's converter writes the embeddings there. */
static const qk_tensor *tied_output(const qk_tensorset *hf, const char *gguf_name)
{
    if (strcmp(gguf_name, "output.weight") != 0 || qk_tensorset_find(hf, "lm_head.weight"))
        return NULL;
    return qk_tensorset_find(hf, "model.embed_tokens.weight");
}

/* Counterpart in B of A's tensor `name`. */
static const qk_tensor *counterpart(const qk_tensorset *A, const qk_tensorset *B, const char *name,
                                    int *perm)
{
    *perm = QK_PERM_NONE;
    if (A->kind == B->kind)
        return qk_tensorset_find(B, name);
    char mapped[512];
    if (A->kind == QK_SET_SAFETENSORS) {
        if (qk_hf_to_gguf_name(name, mapped, sizeof mapped, perm))
            return NULL;
        return qk_tensorset_find(B, mapped);
    }
    for (uint64_t i = 0; i < B->n; i++) /* A is GGUF: find the HF name mapping to it */
        if (!qk_hf_to_gguf_name(B->t[i].name, mapped, sizeof mapped, perm) && !strcmp(mapped, name))
            return &B->t[i];
    *perm = QK_PERM_NONE;
    return tied_output(B, name);
}

/* Head counts and whether the GGUF's converter permuted q/k (llama, mistral). */
static bool gguf_heads(const qk_tensorset *s, int64_t *nh, int64_t *nkv)
{
    const qk_gguf *g = s->gguf;
    qk_str arch;
    if (!g || !qk_gguf_get_str(g, "general.architecture", &arch))
        return false;
    if (!qk_str_eq(arch, "llama") && !qk_str_eq(arch, "mistral"))
        return false;
    char key[160];
    uint64_t v;
    snprintf(key, sizeof key, "%.*s.attention.head_count", (int)arch.len, arch.ptr);
    if (!qk_gguf_get_uint(g, key, &v) || v == 0)
        return false;
    *nh = (int64_t)v;
    snprintf(key, sizeof key, "%.*s.attention.head_count_kv", (int)arch.len, arch.ptr);
    *nkv = qk_gguf_get_uint(g, key, &v) && v > 0 ? (int64_t)v : *nh;
    return true;
}

static void print_text(FILE *out, const pair *p, uint64_t n)
{
    fprintf(out, "%-40s %-14s %-8s %-8s %12s %12s %9s %10s  %s\n", "tensor", "shape", "type_a",
            "type_b", "max_abs", "rmse", "snr_db", "cosine", "result");
    for (uint64_t i = 0; i < n; i++) {
        char sh[64];
        qk_tensor_shape_str(p[i].a, sh, sizeof sh);
        if (!p[i].b) {
            fprintf(out, "%-40s %-14s %-8s %-8s %12s %12s %9s %10s  only in A\n", p[i].label, sh,
                    p[i].a->type_name, "-", "-", "-", "-", "-");
            continue;
        }
        if (!p[i].shape_ok || !p[i].decodable) {
            fprintf(out, "%-40s %-14s %-8s %-8s %12s %12s %9s %10s  %s\n", p[i].label, sh,
                    p[i].a->type_name, p[i].b->type_name, "-", "-", "-", "-",
                    !p[i].shape_ok ? "shape differs" : "cannot decode");
            continue;
        }
        fprintf(out, "%-40s %-14s %-8s %-8s %12.6g %12.6g %9.2f %10.7f  %s\n", p[i].label, sh,
                p[i].a->type_name, p[i].b->type_name, p[i].max_abs, p[i].rmse, p[i].snr, p[i].cosine,
                p[i].identical ? "identical" : "differs");
    }
}

static void print_json(FILE *out, const pair *p, uint64_t n, const char *a, const char *b,
                       uint64_t only_b, uint64_t n_ident, uint64_t n_diff)
{
    qk_json j;
    qk_json_init(&j, out, true);
    qk_json_obj(&j);
    qk_json_key(&j, "a"), qk_json_str(&j, a);
    qk_json_key(&j, "b"), qk_json_str(&j, b);
    qk_json_key(&j, "tensors");
    qk_json_arr(&j);
    for (uint64_t i = 0; i < n; i++) {
        qk_json_obj(&j);
        qk_json_key(&j, "name"), qk_json_str(&j, p[i].label);
        qk_json_key(&j, "name_b"), qk_json_str(&j, p[i].b ? p[i].b->name : NULL);
        qk_json_key(&j, "shape");
        qk_json_arr(&j);
        for (int d = 0; d < p[i].a->n_dims; d++)
            qk_json_int(&j, p[i].a->ne[d]);
        qk_json_end_arr(&j);
        qk_json_key(&j, "type_a"), qk_json_str(&j, p[i].a->type_name);
        qk_json_key(&j, "type_b"), qk_json_str(&j, p[i].b ? p[i].b->type_name : NULL);
        const char *res = !p[i].b ? "only_in_a" : !p[i].shape_ok ? "shape_differs"
                        : !p[i].decodable ? "cannot_decode" : p[i].identical ? "identical" : "differs";
        qk_json_key(&j, "result"), qk_json_str(&j, res);
        if (p[i].b && p[i].shape_ok && p[i].decodable) {
            qk_json_key(&j, "max_abs"), qk_json_f64(&j, p[i].max_abs);
            qk_json_key(&j, "rmse"), qk_json_f64(&j, p[i].rmse);
            qk_json_key(&j, "snr_db");
            if (isinf(p[i].snr))
                qk_json_str(&j, "inf");
            else
                qk_json_f64(&j, p[i].snr);
            qk_json_key(&j, "cosine"), qk_json_f64(&j, p[i].cosine);
            qk_json_key(&j, "row_permutation"), qk_json_bool(&j, p[i].perm != QK_PERM_NONE);
        }
        qk_json_end_obj(&j);
    }
    qk_json_end_arr(&j);
    qk_json_key(&j, "identical"), qk_json_uint(&j, n_ident);
    qk_json_key(&j, "differ"), qk_json_uint(&j, n_diff);
    qk_json_key(&j, "only_in_b"), qk_json_uint(&j, only_b);
    qk_json_end_obj(&j);
    qk_json_done(&j);
}

int qk_diff_run(const char *a, const char *b, const qk_diff_opts *o, FILE *out, qk_err *err)
{
    qk_tensorset *A = NULL, *B = NULL;
    int rc = qk_tensorset_open(&A, a, err);
    if (rc || (rc = qk_tensorset_open(&B, b, err))) {
        qk_tensorset_close(A);
        return rc;
    }
    pair *p = calloc(A->n + 1, sizeof *p); /* +1: a tied output pair */
    bool *used = calloc(B->n ? B->n : 1, sizeof *used);
    if (!p || !used) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto done;
    }
    ctx c = {.p = p, .n_head = 1, .n_head_kv = 1};
    bool can_perm = A->kind != B->kind &&
                    gguf_heads(A->kind == QK_SET_GGUF ? A : B, &c.n_head, &c.n_head_kv);
    uint64_t n = 0;
    for (uint64_t i = 0; i < A->n; i++) {
        if (o->tensor_glob && fnmatch(o->tensor_glob, A->t[i].name, 0) != 0)
            continue;
        pair *q = &p[n++];
        q->a = &A->t[i];
        q->label = q->a->name;
        q->a_is_gguf = A->kind == QK_SET_GGUF;
        q->b = counterpart(A, B, q->a->name, &q->perm);
        if (!can_perm)
            q->perm = QK_PERM_NONE;
        if (q->b) {
            used[q->b - B->t] = true;
            q->shape_ok = same_shape(q->a, q->b);
        }
    }
    const qk_tensor *gout = A->kind == QK_SET_SAFETENSORS ? qk_tensorset_find(B, "output.weight") : NULL;
    const qk_tensor *tied = gout && !used[gout - B->t] ? tied_output(A, "output.weight") : NULL;
    if (tied && (!o->tensor_glob || fnmatch(o->tensor_glob, "lm_head.weight", 0) == 0)) {
        pair *q = &p[n++];
        *q = (pair){.label = "lm_head.weight (tied: embed_tokens)", .a = tied, .b = gout,
                    .shape_ok = same_shape(tied, gout)};
        used[gout - B->t] = true;
    }
    qk_progress pr;
    qk_progress_init(&pr, "diff", n, o->quiet);
    qk_parallel_for(o->threads, n, 1, run_range, &c);
    qk_progress_add(&pr, n);
    qk_progress_end(&pr);

    uint64_t only_b = 0, n_ident = 0, n_diff = 0;
    for (uint64_t i = 0; i < B->n; i++)
        only_b += !used[i] && (!o->tensor_glob || A->kind != B->kind);
    for (uint64_t i = 0; i < n; i++)
        p[i].identical ? n_ident++ : n_diff++;
    if (o->json) {
        print_json(out, p, n, a, b, only_b, n_ident, n_diff);
    } else {
        print_text(out, p, n);
        for (uint64_t i = 0; i < B->n; i++)
            if (!used[i] && !o->tensor_glob)
                fprintf(out, "%-40s only in B\n", B->t[i].name);
        fprintf(out, "\n%llu tensors compared: %llu identical, %llu differ, %llu only in B\n",
                (unsigned long long)n, (unsigned long long)n_ident, (unsigned long long)n_diff,
                (unsigned long long)only_b);
    }
    /* thresholds */
    for (uint64_t i = 0; i < n; i++) {
        const pair *q = &p[i];
        bool bounded = o->max_rmse >= 0 || o->min_snr > -INFINITY;
        if (!bounded)
            break;
        if (!q->b || !q->shape_ok || !q->decodable) {
            fprintf(stderr, "qk-inspect: tensor '%s': %s\n", q->label,
                    !q->b ? "missing in B" : !q->shape_ok ? "shape differs" : "cannot decode");
            rc = QK_EFAIL;
            continue;
        }
        if (o->max_rmse >= 0 && q->rmse > o->max_rmse) {
            fprintf(stderr, "qk-inspect: tensor '%s': RMSE %.6g exceeds --max-rmse %g\n",
                    q->label, q->rmse, o->max_rmse);
            rc = QK_EFAIL;
        }
        if (q->snr < o->min_snr) {
            fprintf(stderr, "qk-inspect: tensor '%s': SNR %.2f dB below --min-snr %g\n",
                    q->label, q->snr, o->min_snr);
            rc = QK_EFAIL;
        }
    }
done:
    free(p);
    free(used);
    qk_tensorset_close(A);
    qk_tensorset_close(B);
    return rc;
}
