/* ckpt.c - group the stored tensors of a quantized Hugging Face directory
 * into logical weights (see ckpt.h) and dispatch their dequantization to the
 * layout readers in ckpt_*.c. */
#include "formats/ckpt_impl.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels/wq.h"

const char *qk_ck_layout_name(qk_ck_layout l)
{
    static const char *const n[] = {"dense", "fp8", "int8", "pack", "nvfp4-ct", "mxfp4-ct", "nvfp4-mo",
                                    "awq", "gptq", "mlx", "bnb4", "bnb8"};
    return (unsigned)l < QK_CK_LAYOUT_COUNT ? n[l] : "?";
}

/* Leaves, a longer one before any leaf it ends with. */
static const struct { const char *s; int id; } leaves[] = {
    {"weight.quant_state.bitsandbytes__nf4", CK_QSTATE_NF4},
    {"weight.quant_state.bitsandbytes__fp4", CK_QSTATE_FP4},
    {"weight.nested_quant_map", CK_NESTED_QUANT_MAP},
    {"weight.nested_absmax", CK_NESTED_ABSMAX},
    {"weight.quant_map", CK_QUANT_MAP},
    {"weight.absmax", CK_ABSMAX},
    {"weight_global_scale", CK_WEIGHT_GLOBAL_SCALE},
    {"input_global_scale", CK_INPUT_GLOBAL_SCALE},
    {"weight_zero_point", CK_WEIGHT_ZERO_POINT},
    {"input_zero_point", CK_INPUT_ZERO_POINT},
    {"weight_scale_inv", CK_WEIGHT_SCALE_INV},
    {"weight_packed", CK_WEIGHT_PACKED},
    {"weight_scale_2", CK_WEIGHT_SCALE_2},
    {"weight_scale", CK_WEIGHT_SCALE},
    {"weight_format", CK_WEIGHT_FORMAT},
    {"weight_g_idx", CK_WEIGHT_G_IDX},
    {"weight_shape", CK_WEIGHT_SHAPE},
    {"output_scale", CK_OUTPUT_SCALE},
    {"input_scale", CK_INPUT_SCALE},
    {"qweight", CK_QWEIGHT},
    {"qzeros", CK_QZEROS},
    {"scales", CK_SCALES},
    {"biases", CK_BIASES},
    {"g_idx", CK_G_IDX},
    {"weight", CK_WEIGHT},
    {"SCB", CK_SCB},
};

/* Leaf id of name and the length of its module prefix, or -1. */
static int leaf_of(const char *name, size_t *mlen)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof leaves / sizeof leaves[0]; i++) {
        size_t l = strlen(leaves[i].s);
        if (n > l && name[n - l - 1] == '.' && strcmp(name + n - l, leaves[i].s) == 0) {
            *mlen = n - l - 1;
            return leaves[i].id;
        }
    }
    return -1;
}

typedef struct entry {
    const char *name;
    size_t mlen;
    int leaf;
    size_t idx;
} entry;

static int cmp_module(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int cmp_entry(const void *x, const void *y)
{
    const entry *a = x, *b = y;
    int c = cmp_module(a->name, a->mlen, b->name, b->mlen);
    return c ? c : (a->leaf > b->leaf) - (a->leaf < b->leaf);
}

/* ---- shared checks ----------------------------------------------------------- */

int ck_bad(ck_ctx *c, const qk_hf_tensor *t, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return qk_err_at(c->err, c->hf->file_paths[t->file], t->name, t->st ? t->st->info_offset : 0, "%s", msg);
}

bool ck_is2(const qk_hf_tensor *t, int64_t r, int64_t c, bool allow_1d)
{
    if (t->n_dims == 2)
        return t->shape[0] == r && t->shape[1] == c;
    return allow_1d && c == 1 && t->n_dims == 1 && t->shape[0] == r;
}

int ck_need_float(ck_ctx *c, const qk_hf_tensor *t)
{
    return ck_is_float(t) ? QK_OK : ck_bad(c, t, "dtype %s, expected a float type", t->dtype);
}

int ck_need_int(ck_ctx *c, const qk_hf_tensor *t)
{
    return ck_is_int(t) ? QK_OK : ck_bad(c, t, "dtype %s, expected an integer type", t->dtype);
}

int ck_need_type(ck_ctx *c, const qk_hf_tensor *t, int type)
{
    const qk_st_dtype *d = qk_st_dtype_by_type(type);
    return t->type == type ? QK_OK : ck_bad(c, t, "dtype %s, expected %s", t->dtype, d ? d->name : "?");
}

int ck_need(ck_ctx *c, const qk_hf_tensor *main, const qk_hf_tensor *t, const char *leaf)
{
    return t ? QK_OK : ck_bad(c, main, "companion tensor '%s' is missing", leaf);
}

void ck_set_shape2(qk_ck_tensor *t, int64_t n, int64_t k)
{
    t->n_dims = 2;
    t->shape[0] = n;
    t->shape[1] = k;
    t->rows = n;
    t->cols = k;
    t->nelem = (uint64_t)n * (uint64_t)k;
}

/* ---- grouping -------------------------------------------------------------------- */

static void set_dense(qk_ck_tensor *t, const qk_hf_tensor *w)
{
    t->layout = QK_CK_DENSE;
    t->w = w;
    t->n_dims = w->n_dims;
    memcpy(t->shape, w->shape, sizeof t->shape);
    t->cols = w->n_dims ? w->shape[w->n_dims - 1] : 1;
    t->rows = 1;
    for (int d = 0; d + 1 < w->n_dims; d++)
        t->rows *= w->shape[d];
    t->nelem = w->nelem;
    t->stored_bytes = w->nbytes;
    snprintf(t->scheme, sizeof t->scheme, "%s", w->dtype);
}

/* Decide the layout of a module from its main tensor and parts. */
static int classify(ck_ctx *c, qk_ck_tensor *t, int leaf, const ck_parts *p)
{
    const qk_hf_tensor *w = p->p[leaf];
    if (leaf == CK_WEIGHT_PACKED) {
        if (w->type == QK_I32 || w->type == QK_U32)
            return ck_setup_pack(c, t, p);
        if (w->type == QK_U8)
            return ck_setup_fp4_ct(c, t, p, p->p[CK_WEIGHT_GLOBAL_SCALE] != NULL);
        return ck_bad(c, w, "dtype %s, expected I32 or U8", w->dtype);
    }
    if (leaf == CK_QWEIGHT) {
        bool gptq = c->cfg->method == QK_QM_GPTQ ||
                    (c->cfg->method != QK_QM_AWQ && p->p[CK_G_IDX] != NULL);
        return gptq ? ck_setup_gptq(c, t, p) : ck_setup_awq(c, t, p);
    }
    /* leaf "weight" */
    if (p->p[CK_ABSMAX] && (p->p[CK_QSTATE_NF4] || p->p[CK_QSTATE_FP4]))
        return ck_setup_bnb4(c, t, p);
    if (p->p[CK_SCB] && w->type == QK_I8)
        return ck_setup_bnb8(c, t, p);
    if (p->p[CK_SCALES] && (w->type == QK_U32 || w->type == QK_I32))
        return ck_setup_mlx(c, t, p);
    if (p->p[CK_WEIGHT_SCALE] && p->p[CK_WEIGHT_SCALE_2] && w->type == QK_U8)
        return ck_setup_nvfp4_mo(c, t, p);
    if ((p->p[CK_WEIGHT_SCALE] || p->p[CK_WEIGHT_SCALE_INV]) && (w->type == QK_F8_E4M3 || w->type == QK_F8_E5M2))
        return ck_setup_fp8(c, t, p);
    if (p->p[CK_WEIGHT_SCALE] && w->type == QK_I8)
        return ck_setup_int8(c, t, p);
    set_dense(t, w);
    return QK_OK;
}

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "out of memory"); }

int qk_ckpt_open(qk_ckpt **out, const qk_hfdir *hf, qk_err *err)
{
    *out = NULL;
    qk_ckpt *c = calloc(1, sizeof *c);
    size_t n = hf->n_tensors;
    entry *e = calloc(n ? n : 1, sizeof *e);
    int *leaf = calloc(n ? n : 1, sizeof *leaf);
    bool *used = calloc(n ? n : 1, sizeof *used);
    qk_ck_tensor *main_t = calloc(n ? n : 1, sizeof *main_t); /* per stored index */
    bool *is_main = calloc(n ? n : 1, sizeof *is_main);
    int rc = QK_OK;
    if (!c || !e || !leaf || !used || !main_t || !is_main) {
        rc = oom(err);
        goto done;
    }
    c->hf = hf;
    if ((rc = qk_quantcfg_open_hf(&c->cfg, hf, err)) || (rc = ck_check_mxfp4(hf, err)))
        goto done;
    if (hf->config) {
        char *cpath = malloc(strlen(hf->dir) + sizeof "/config.json");
        if (!cpath) {
            rc = oom(err);
            goto done;
        }
        sprintf(cpath, "%s/config.json", hf->dir);
        rc = qk_tcfg_parse(hf->config, cpath, &c->tcfg, err);
        free(cpath);
        if (rc)
            goto done;
    }
    size_t ne = 0;
    for (size_t i = 0; i < n; i++) {
        size_t ml = 0;
        /* an online transform's matrix (MODULE.R4_input.weight) stays a plain tensor */
        leaf[i] = qk_tcfg_is_param(c->tcfg, hf->tensors[i].name) ? -1 : leaf_of(hf->tensors[i].name, &ml);
        if (leaf[i] >= 0)
            e[ne++] = (entry){hf->tensors[i].name, ml, leaf[i], i};
    }
    qsort(e, ne, sizeof *e, cmp_entry);
    ck_ctx cx = {.hf = hf, .cfg = c->cfg, .err = err};
    for (size_t k = 0; k < ne;) {
        size_t j = k;
        while (j < ne && cmp_module(e[j].name, e[j].mlen, e[k].name, e[k].mlen) == 0)
            j++;
        ck_parts p = {{0}};
        for (size_t q = k; q < j; q++) {
            if (p.p[e[q].leaf]) {
                rc = qk_err_at(err, hf->file_paths[hf->tensors[e[q].idx].file], e[q].name, 0,
                               "two tensors for one part of module '%.*s'", (int)e[q].mlen, e[q].name);
                goto done;
            }
            p.p[e[q].leaf] = &hf->tensors[e[q].idx];
        }
        int ml = p.p[CK_WEIGHT_PACKED] ? CK_WEIGHT_PACKED : p.p[CK_QWEIGHT] ? CK_QWEIGHT
                 : p.p[CK_WEIGHT] ? CK_WEIGHT : -1;
        if (ml >= 0) {
            size_t wi = (size_t)(p.p[ml] - hf->tensors);
            qk_ck_tensor *t = &main_t[wi];
            qk_quantcfg_scheme_for(c->cfg, p.p[ml]->name, p.p[ml]->n_dims, &cx.sc);
            t->scale_elem = -1;
            if ((rc = classify(&cx, t, ml, &p)) || (rc = ck_check_claim(&cx, t, ml, &p, e[k].name, (int)e[k].mlen)))
                goto done;
            is_main[wi] = true;
            if (t->layout != QK_CK_DENSE) {
                c->quantized = true;
                t->stored_bytes = 0;
                for (size_t q = k; q < j; q++) {
                    used[e[q].idx] = true;
                    t->stored_bytes += hf->tensors[e[q].idx].nbytes;
                }
                char *nm = malloc(e[k].mlen + 8);
                if (!nm) {
                    rc = oom(err);
                    goto done;
                }
                snprintf(nm, e[k].mlen + 8, "%.*s.weight", (int)e[k].mlen, e[k].name);
                t->name = nm;
            }
        }
        k = j;
    }
    c->t = calloc(n ? n : 1, sizeof *c->t);
    if (!c->t) {
        rc = oom(err);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        qk_ck_tensor *t = &c->t[c->n];
        if (is_main[i] && main_t[i].layout != QK_CK_DENSE) {
            *t = main_t[i];
            main_t[i].name = NULL;
        } else if (!used[i]) {
            memset(t, 0, sizeof *t);
            t->scale_elem = -1;
            set_dense(t, &hf->tensors[i]);
            if (!(t->name = strdup(hf->tensors[i].name))) {
                rc = oom(err);
                goto done;
            }
        } else
            continue;
        c->n++;
    }
done:
    for (size_t i = 0; main_t && i < n; i++)
        free(main_t[i].name);
    free(main_t);
    free(is_main);
    free(e);
    free(leaf);
    free(used);
    if (rc) {
        qk_ckpt_close(c);
        return rc;
    }
    *out = c;
    return QK_OK;
}

void qk_ckpt_close(qk_ckpt *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->t && i < c->n; i++)
        free(c->t[i].name);
    free(c->t);
    qk_quantcfg_free(c->cfg);
    qk_tcfg_free(c->tcfg);
    free(c);
}

const qk_ck_tensor *qk_ckpt_find(const qk_ckpt *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0)
            return &c->t[i];
    return NULL;
}

/* ---- dequantization ------------------------------------------------------------- */

static int rows_dense(const qk_ckpt *c, const qk_ck_tensor *t, int64_t r0, int64_t nr, float *out, qk_err *err)
{
    const qk_type_traits *tt = t->w->type >= 0 ? qk_type_get(t->w->type) : NULL;
    if (!tt || !tt->to_float)
        return qk_err_at(err, c->hf->file_paths[t->w->file], t->name, t->w->file_offset,
                         "dtype %s cannot be converted to float", t->w->dtype);
    if (ck_is_int(t->w) || t->w->type == QK_F64) { /* elementwise (no row decoder needed) */
        for (int64_t i = 0; i < nr * t->cols; i++)
            out[i] = t->w->type == QK_F64 ? ck_f(t->w, (uint64_t)(r0 * t->cols + i))
                                          : (float)ck_i(t->w, (uint64_t)(r0 * t->cols + i));
        return QK_OK;
    }
    size_t rs = qk_row_size(t->w->type, t->cols);
    for (int64_t r = 0; r < nr; r++)
        tt->to_float(t->w->data + (uint64_t)(r0 + r) * rs, out + r * t->cols, t->cols);
    return QK_OK;
}

int qk_ckpt_read_rows(const qk_ckpt *c, const qk_ck_tensor *t, int64_t r0, int64_t nr, float *out, qk_err *err)
{
    if (r0 < 0 || nr < 0 || r0 > t->rows || nr > t->rows - r0)
        return qk_errf(err, QK_EINPUT, "%s: rows %lld..%lld out of range (%lld rows)", t->name, (long long)r0,
                       (long long)(r0 + nr), (long long)t->rows);
    if (t->layout == QK_CK_DENSE)
        return rows_dense(c, t, r0, nr, out, err);
    /* the format table's decoder of the layout (kernels/wq.c), on a view of the parts */
    qk_wq w;
    int rc = qk_ckpt_wq(t, &w, err);
    if (rc)
        return rc;
    qk_type_get(w.type)->wq_rows(&w, r0, nr, out);
    return QK_OK;
}

int qk_ckpt_read(const qk_ckpt *c, const qk_ck_tensor *t, float *out, qk_err *err)
{
    return qk_ckpt_read_rows(c, t, 0, t->rows, out, err);
}
