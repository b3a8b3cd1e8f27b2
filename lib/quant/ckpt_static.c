/* ckpt_static.c - static activation scales from calibration (see
 * ckpt_static.h). */
#include "lib/quant/ckpt_static.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/scaled.h"
#include "lib/engine/hfmodel.h"
#include "lib/engine/modelfile.h"
#include "lib/engine/tokenizer.h"
#include "lib/quant/ckpt_pack.h"
#include "lib/quant/ckpt_wctx.h"
#include "lib/quant/gptq_model.h"
#include "lib/quant/imatrix_run.h"

float qk_ct_gparam(float amax)
{
    /* max_val_pos clamped to float32's tiny; 448 * 6 / t is t.reciprocal() * 2688 in torch */
    const float a = amax > FLT_MIN ? amax : FLT_MIN;
    volatile float r = 1.0f / a; /* two float32 roundings, as torch's */
    const float g = r * 2688.0f;
    return isfinite(g) ? g : 1.0f;
}

float qk_ct_fp8_scale(float amax)
{
    const float s = amax / 448.0f;
    return s == 0.0f ? FLT_EPSILON : s;
}

float qk_mo_nvfp4_input_scale(float amax)
{
    /* export_amax clamps amax to float32's tiny; amax.float() / (6.0 * 448.0) */
    return (amax > FLT_MIN ? amax : FLT_MIN) / 2688.0f;
}

float qk_ct_int8_scale(float amax)
{
    const float s = amax / 127.5f; /* bit_range 255 / 2 */
    return s == 0.0f ? FLT_EPSILON : s;
}

/* A layer's seven products and the pipeline slot of their input. */
#define NW 7
static const int slot_of[NW] = {QK_GS_QKV, QK_GS_QKV, QK_GS_QKV, QK_GS_O, QK_GS_GU, QK_GS_GU, QK_GS_DOWN};

static const qk_weight *layer_weight(const qk_layer *L, int i)
{
    const qk_weight *ws[NW] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return ws[i];
}

typedef struct {
    int *mod_of;            /* per layer x NW: the index of the module, or -1 */
    float slot[QK_GS_N];    /* the layer's input amax per slot, while it runs */
    float *amax;
} st;

static int on_input(void *user, qk_gptq_seq *s, int slot, const float *x, int n, int64_t cols, qk_err *err)
{
    (void)s, (void)err;
    st *k = user;
    float m = k->slot[slot];
    for (size_t i = 0; i < (size_t)n * (size_t)cols; i++) {
        const float a = fabsf(x[i]);
        m = a > m || isnan(a) ? a : m; /* torch.amax propagates NaN */
    }
    k->slot[slot] = isnan(k->slot[slot]) ? k->slot[slot] : m;
    return 0;
}

/* After layer l's calibration pass: its modules' amax; the weights stay float. */
static int on_layer(void *user, qk_gptq_seq *s, int l, qk_err *err)
{
    (void)s, (void)err;
    st *k = user;
    for (int i = 0; i < NW; i++)
        if (k->mod_of[l * NW + i] >= 0)
            k->amax[k->mod_of[l * NW + i]] = k->slot[slot_of[i]];
    for (int i = 0; i < QK_GS_N; i++)
        k->slot[i] = 0.0f;
    return 0;
}

static int map_modules(st *k, const qk_model *m, const char *const *modules, size_t n, qk_err *err)
{
    const int nl = m->hp.n_layer;
    if (!(k->mod_of = malloc((size_t)(nl ? nl : 1) * NW * sizeof *k->mod_of)))
        return qk_errf(err, QK_EIO, "out of memory");
    for (int i = 0; i < nl * NW; i++)
        k->mod_of[i] = -1;
    for (size_t mi = 0; mi < n; mi++) {
        char hf[1100];
        snprintf(hf, sizeof hf, "%s.weight", modules[mi]);
        const size_t len = strlen(hf);
        bool found = false;
        for (int l = 0; l < nl && !found; l++)
            for (int i = 0; i < NW && !found; i++) {
                const qk_weight *w = layer_weight(&m->layers[l], i);
                if (w->name && (size_t)w->name_len == len && !memcmp(w->name, hf, len)) {
                    k->mod_of[l * NW + i] = (int)mi;
                    found = true;
                }
            }
        if (!found)
            return qk_errf(err, QK_EINPUT, "%s: not a product of a decoder layer, whose input the calibration "
                           "sees (leave it out with --ignore)", modules[mi]);
    }
    return 0;
}

int qk_ckpt_act_amax(const char *src_dir, const char *const *modules, size_t n, const qk_ckpt_calib *c,
                     float *amax, qk_err *err)
{
    st k = {.amax = amax};
    qk_hfmodel *h = NULL;
    qk_tokenizer *tok = NULL;
    /* float attention, as transformers computes it for llm-compressor */
    qk_gptq_seq s = {.n_ctx = c->n_ctx, .o = c->o, .kv_f32 = true, .quiet = c->quiet, .layer = on_layer,
                     .on_input = on_input, .user = &k};
    for (size_t i = 0; i < n; i++)
        amax[i] = 0.0f;
    int rc = qk_hfmodel_open(&h, src_dir, err);
    if (rc)
        return rc;
    s.m = &h->m;
    if (h->ck) {
        rc = qk_errf(err, QK_EINPUT, "%s: a quantized checkpoint; static activation scales are calibrated on a "
                     "float one", src_dir);
        goto done;
    }
    if ((rc = qk_calib_dense_check(s.m, src_dir, "--calib (static input scales)", err)) || (rc = map_modules(&k, s.m, modules, n, err)))
        goto done;
    if ((rc = c->tokenizer ? qk_tokenizer_from(c->tokenizer, &tok, err) : qk_hf_tokenizer(src_dir, &tok, err)))
        goto done;
    if ((rc = qk_gptq_seq_tokens(&s, tok, c->text, c->n_chunks, err)))
        goto done;
    rc = qk_gptq_seq_run(&s, err);
done:
    free(k.mod_of);
    free(s.ids);
    qk_tok_free(tok);
    qk_hfmodel_close(h);
    return rc;
}

/* ---- the writer's side (ckpt_write.c) ---------------------------------------------------- */

static const char *scheme_name(const wctx *w)
{
    return w->tg.k == K_CT_FP8 ? "ct-fp8-static" : w->tg.k == K_CT_W8A8 ? "ct-w8a8-static"
         : w->tg.k == K_MO_NVFP4 ? "modelopt-nvfp4" : "ct-nvfp4a4";
}

/* llmcompressor/observers/helpers.py FUSED_LAYER_NAMES */
static const char *const fused[][4] = {{"gate_proj", "up_proj", NULL}, {"q_proj", "k_proj", "v_proj", NULL},
                                       {"q_a_proj", "kv_a_proj_with_mqa", NULL}, {"w1", "w3", NULL}};

typedef struct {
    const char *name;
    size_t i;
} named;

static int cmp_named(const void *a, const void *b) { return strcmp(((const named *)a)->name, ((const named *)b)->name); }

/* The quantized module parent.leaf (by its weight's name in the sorted index), or -1. */
static long find_quant(const named *ix, size_t n, const char *parent, size_t plen, const char *leaf)
{
    char name[1200];
    snprintf(name, sizeof name, "%.*s.%s.weight", (int)plen, parent, leaf);
    const named key = {name, 0}, *hit = bsearch(&key, ix, n, sizeof *ix, cmp_named);
    return hit ? (long)hit->i : -1;
}

/* Each quantized module's weight amax (of the floats it is encoded from), then the global scale of its
 * fusion group. */
int qk_ckw_nvfp4_globals(wctx *w)
{
    float *amax = calloc(w->nm ? w->nm : 1, sizeof *amax);
    named *ix = malloc((w->nm ? w->nm : 1) * sizeof *ix);
    size_t nix = 0;
    if (!(w->wglob = calloc(w->nm ? w->nm : 1, sizeof *w->wglob)) || !amax || !ix) {
        free(amax), free(ix);
        return qk_errf(w->err, QK_EIO, "out of memory");
    }
    for (size_t i = 0; i < w->nm; i++)
        if (w->m[i].quant)
            ix[nix++] = (named){w->m[i].src->name, i};
    qsort(ix, nix, sizeof *ix, cmp_named);
    int rc = 0;
    for (size_t i = 0; i < w->nm && !rc; i++) {
        const qk_ck_tensor *t = w->m[i].src;
        if (!w->m[i].quant)
            continue;
        float *x = malloc(t->nelem ? t->nelem * sizeof *x : 1);
        const float *cf = qk_calib_floats(&w->cres, t->name); /* as make_module: AWQ's, or rotated */
        if (!x) {
            rc = qk_errf(w->err, QK_EIO, "out of memory (%s)", t->name);
            break;
        }
        if (cf)
            memcpy(x, cf, t->nelem * sizeof *x);
        else if (!(rc = qk_ckpt_read(w->ck, t, x, w->err)) && w->rot)
            rc = qk_rot_tensor(w->rot, t->name, x, t->rows, t->cols, w->err);
        if (!rc)
            for (uint64_t j = 0; j < t->nelem; j++)
                amax[i] = fabsf(x[j]) > amax[i] ? fabsf(x[j]) : amax[i];
        free(x);
    }
    for (size_t i = 0; i < w->nm && !rc; i++) {
        if (!w->m[i].quant)
            continue;
        const char *name = w->m[i].src->name, *dot = NULL;
        for (const char *p = name; (p = strchr(p, '.')) && strcmp(p, ".weight"); p++)
            dot = p;
        float a = amax[i];
        const size_t plen = dot ? (size_t)(dot - name) : 0, llen = dot ? strlen(dot + 1) - 7 : 0;
        for (size_t g = 0; dot && g < sizeof fused / sizeof fused[0]; g++) {
            bool mine = false, all = true;
            for (int j = 0; fused[g][j]; j++) {
                mine |= strlen(fused[g][j]) == llen && !strncmp(dot + 1, fused[g][j], llen);
                all &= find_quant(ix, nix, name, plen, fused[g][j]) >= 0;
            }
            for (int j = 0; mine && all && fused[g][j]; j++) {
                const float b = amax[find_quant(ix, nix, name, plen, fused[g][j])];
                a = b > a ? b : a;
            }
        }
        w->wglob[i] = w->tg.k == K_MO_NVFP4 ? qk_nvfp4_global_scale(a, false) : qk_ct_gparam(a);
    }
    free(amax), free(ix);
    return rc;
}

int qk_ckw_static_prepare(wctx *w, const char *src_dir)
{
    const qk_ckpt_calib *c = w->o->calib;
    if (!w->tg.astatic)
        return QK_OK;
    if (!c || !c->text)
        return qk_errf(w->err, QK_EINPUT, "--to %s: its static %s comes from calibration activations: --calib TEXT "
                       "is missing", scheme_name(w), w->tg.k == K_CT_NVFP4 ? "input_global_scale" : "input_scale");
    const char **mods = calloc(w->nm ? w->nm : 1, sizeof *mods);
    char (*names)[1024] = malloc((w->nm ? w->nm : 1) * sizeof *names);
    size_t *at = malloc((w->nm ? w->nm : 1) * sizeof *at), n = 0;
    float *amax = malloc((w->nm ? w->nm : 1) * sizeof *amax);
    w->act = calloc(w->nm ? w->nm : 1, sizeof *w->act);
    int rc = mods && names && at && amax && w->act ? QK_OK : qk_errf(w->err, QK_EIO, "out of memory");
    for (size_t i = 0; !rc && i < w->nm; i++)
        if (w->m[i].quant) {
            at[n] = i;
            mods[n++] = qk_ckw_linear_module(w->m[i].src, names[i], sizeof names[i]);
        }
    if (!rc)
        rc = qk_ckpt_act_amax(src_dir, mods, n, c, amax, w->err);
    for (size_t j = 0; !rc && j < n; j++)
        w->act[at[j]] = amax[j];
    free(mods), free(names), free(at), free(amax);
    return rc;
}

void qk_ckw_static_part(const wctx *w, const omod *m, uint8_t *buf)
{
    const float a = w->act[m - w->m];
    if (w->tg.k == K_CT_FP8 || w->tg.k == K_CT_W8A8) {
        const float s = w->tg.k == K_CT_FP8 ? qk_ct_fp8_scale(a) : qk_ct_int8_scale(a);
        qk_ckw_convert_floats(&s, 1, w->model_dtype, buf);
    } else {
        const float g = w->tg.k == K_MO_NVFP4 ? qk_mo_nvfp4_input_scale(a) : qk_ct_gparam(a);
        memcpy(buf, &g, 4);
    }
}
