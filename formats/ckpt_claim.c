/* ckpt_claim.c - a quantization config checked against the tensors it
 * describes.  The layout of a module is read from its parts (ckpt.c); the
 * config claims a scheme for it (quantcfg.c).  They must agree: a module
 * claimed quantized whose tensors are plain floats, a module stored in
 * another scheme's layout, one the config leaves unquantized that holds
 * quantized parts, or a quantized module that also keeps a float weight, is
 * a lying checkpoint (code 2, naming the layer, the claimed scheme and the
 * tensor missing or extra).  Schemes whose stored layout qk does not know
 * (compressed-tensors' sparse and marlin formats, ModelOpt's AWQ and
 * SmoothQuant algorithms, "dense") claim nothing about the layout; nor do
 * MLX's defaults (mlx_lm quantizes what has scales), only its per-module
 * entries. */
#include "formats/ckpt_impl.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "lib/core/ere.h"

#define L(x) (1u << (x))

/* The layouts a scheme's weights are stored in; 0 when the scheme does not say. */
static unsigned expected(const qk_qscheme *s)
{
    const char *f = s->format;
    switch (s->method) {
    case QK_QM_COMPRESSED_TENSORS:
        if (!strcmp(f, "pack-quantized"))
            return L(QK_CK_PACK);
        if (!strcmp(f, "nvfp4-pack-quantized"))
            return L(QK_CK_NVFP4_CT);
        if (!strcmp(f, "mxfp4-pack-quantized"))
            return L(QK_CK_MXFP4_CT);
        if (!strcmp(f, "float-quantized"))
            return L(QK_CK_FP8);
        if (!strcmp(f, "int-quantized"))
            return L(QK_CK_INT8);
        if (!strcmp(f, "naive-quantized"))
            return L(QK_CK_INT8) | L(QK_CK_FP8);
        return 0;
    case QK_QM_FP8: return L(QK_CK_FP8);
    case QK_QM_AWQ: return L(QK_CK_AWQ);
    case QK_QM_GPTQ: return L(QK_CK_GPTQ);
    case QK_QM_BNB: return s->w.num_bits == 8 ? L(QK_CK_BNB8) : L(QK_CK_BNB4);
    case QK_QM_MLX: return L(QK_CK_MLX);
    case QK_QM_MODELOPT: {
        /* the algorithm: the config's, or for MIXED_PRECISION the layer's group */
        const char *algo = strcasecmp(f, "MIXED_PRECISION") ? f : s->group;
        if (!strncasecmp(algo, "FP8", 3))
            return L(QK_CK_FP8);
        if (!strncasecmp(algo, "NVFP4", 5))
            return L(QK_CK_NVFP4_MO);
        return 0;
    }
    default: return 0;
    }
}

/* The part that makes a layout (what a plain float module lacks). */
static const char *key_part(qk_ck_layout l, qk_qmethod m)
{
    switch (l) {
    case QK_CK_PACK: case QK_CK_NVFP4_CT: case QK_CK_MXFP4_CT: return "weight_packed";
    case QK_CK_FP8: return m == QK_QM_FP8 ? "weight_scale_inv" : "weight_scale";
    case QK_CK_INT8: return "weight_scale";
    case QK_CK_NVFP4_MO: return "weight_scale_2";
    case QK_CK_AWQ: case QK_CK_GPTQ: return "qweight";
    case QK_CK_MLX: return "scales";
    case QK_CK_BNB4: return "weight.absmax";
    case QK_CK_BNB8: return "SCB";
    default: return "?";
    }
}

/* Where the claim was made, for the message. */
static void claim_site(const ck_ctx *c, char *path, size_t cap, const char **field, uint64_t *off)
{
    const bool hqc = !strcmp(c->cfg->source, "hf_quant_config.json");
    snprintf(path, cap, "%s/%s", c->hf->dir, hqc ? "hf_quant_config.json" : "config.json");
    const qk_jsonv *doc = hqc ? c->hf->hf_quant_config : c->hf->config, *v = NULL;
    static const char *const keys[] = {"quantization_config", "quantization"};
    for (int i = 0; i < 2 && !v; i++)
        if ((v = qk_jsonv_get(doc, keys[i])))
            *field = keys[i];
    if (!v)
        *field = hqc ? "quantization" : "quantization_config";
    *off = v ? v->off : 0;
}

static bool is_float_type(const qk_hf_tensor *t)
{
    return t->type == QK_F32 || t->type == QK_F16 || t->type == QK_BF16 || t->type == QK_F64;
}

int ck_check_claim(ck_ctx *c, const qk_ck_tensor *t, int main_leaf, const ck_parts *p, const char *module,
                   int mlen)
{
    const qk_qscheme *s = &c->sc;
    if (t->layout != QK_CK_DENSE && main_leaf != CK_WEIGHT && p->p[CK_WEIGHT])
        return ck_bad(c, p->p[CK_WEIGHT], "extra tensor: %.*s is stored as %s (%s), and also has a %s weight",
                      mlen, module, qk_ck_layout_name(t->layout),
                      main_leaf == CK_QWEIGHT ? "qweight" : "weight_packed", p->p[CK_WEIGHT]->dtype);
    if (c->cfg->method == QK_QM_NONE || c->cfg->method == QK_QM_OTHER)
        return QK_OK; /* no claim (quantized tensors without a config are read by their parts) */
    char path[4200], what[600];
    const char *field = "";
    uint64_t off = 0;
    char desc[96]; /* the claimed scheme: "pack-quantized" (compressed-tensors), "fp8 e4m3", "mlx affine" */
    if (s->method == QK_QM_COMPRESSED_TENSORS && s->format[0])
        snprintf(desc, sizeof desc, "%s", s->format);
    else
        snprintf(desc, sizeof desc, "%s%s%s", s->method_name, s->format[0] ? " " : "", s->format);
    /* mlx_lm quantizes a module when the config names it or its scales are
     * stored (load's class_predicate): only a per-module entry is a claim */
    const bool mlx_default = s->method == QK_QM_MLX && (s->quantized ? !strcmp(s->group, "default")
                                                                      : strcmp(s->reason, "ignored") != 0);
    if (mlx_default)
        return QK_OK;
    if (!s->quantized) {
        if (t->layout == QK_CK_DENSE)
            return QK_OK;
        snprintf(what, sizeof what, "%.*s has %s (stored as %s)", mlen, module,
                 key_part(t->layout, c->cfg->method), qk_ck_layout_name(t->layout));
        claim_site(c, path, sizeof path, &field, &off);
        return qk_err_at(c->err, path, field, off, "leaves %.*s unquantized (%s), but %s", mlen, module,
                         s->reason, what);
    }
    const unsigned want = expected(s);
    if (!want || (want & L(t->layout)))
        return QK_OK;
    qk_ck_layout first = 0;
    while (!(want & L(first)))
        first++;
    const qk_hf_tensor *w = p->p[main_leaf];
    if (t->layout == QK_CK_DENSE)
        snprintf(what, sizeof what, "%.*s has %s%s%s and no %s", mlen, module,
                 is_float_type(w) ? "a float weight (" : "weight dtype ", w->dtype, is_float_type(w) ? ")" : "",
                 key_part(first, s->method));
    else
        snprintf(what, sizeof what, "%.*s is stored as %s", mlen, module, qk_ck_layout_name(t->layout));
    claim_site(c, path, sizeof path, &field, &off);
    return qk_err_at(c->err, path, field, off, "claims %s for %.*s (%s), but %s", desc, mlen, module,
                     s->desc, what);
}

/* ---- gpt-oss's quantization_config {"quant_method": "mxfp4"} --------------
 * transformers' Mxfp4HfQuantizer stores the experts of every layer as
 * PROJ_blocks (U8 [E, rows, groups, 16]) and PROJ_scales (E8M0), PROJ =
 * gate_up_proj and down_proj, unless modules_to_not_convert names the
 * experts module (should_convert_module: a pattern matching the start of
 * the name as a regular expression, or its end).  Checked here: a module
 * claimed MXFP4 with a float PROJ and no PROJ_blocks, blocks without
 * scales, blocks in a module the config leaves alone, and blocks beside a
 * float PROJ (any config). */

/* The modules_to_not_convert pattern that excludes module, NULL when none;
 * code 2 in *rc for a pattern that is not a string or not a valid regex. */
static const char *mx_excluded(const qk_jsonv *pats, const char *path, const char *module, int *rc, qk_err *err)
{
    for (size_t i = 0; i < qk_jsonv_len(pats); i++) {
        const qk_jsonv *v = qk_jsonv_at(pats, i);
        const char *k = qk_jsonv_str(v);
        if (!k) {
            *rc = qk_err_at(err, path, "modules_to_not_convert", v->off, "item %zu is not a string", i);
            return NULL;
        }
        const size_t nk = strlen(k), nm = strlen(module);
        if (nk <= nm && !strcmp(module + nm - nk, k))
            return k;
        char *re_s = malloc(nk + 4), msg[160];
        if (!re_s) {
            *rc = qk_errf(err, QK_EIO, "out of memory");
            return NULL;
        }
        snprintf(re_s, nk + 4, "^(%s)", k);
        regex_t re;
        int e = qk_ere_compile(&re, re_s, REG_EXTENDED | REG_NOSUB, msg, sizeof msg);
        free(re_s);
        if (e) {
            *rc = qk_err_at(err, path, "modules_to_not_convert", v->off, "'%s': %s", k, msg);
            return NULL;
        }
        const bool hit = regexec(&re, module, 0, NULL, 0) == 0;
        regfree(&re);
        if (hit)
            return k;
    }
    return NULL;
}

int ck_check_mxfp4(const qk_hfdir *hf, qk_err *err)
{
    const qk_jsonv *qc = qk_jsonv_get(hf->config, "quantization_config");
    const char *qm = qk_jsonv_get_str(qc, "quant_method", NULL);
    const bool claim = qm && !strcmp(qm, "mxfp4");
    const qk_jsonv *pats = claim ? qk_jsonv_get(qc, "modules_to_not_convert") : NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", hf->dir);
    if (pats && pats->type != QK_JARR && pats->type != QK_JNULL)
        return qk_err_at(err, path, "modules_to_not_convert", pats->off, "not an array");
    static const char *const projs[] = {"gate_up_proj", "down_proj"};
    for (size_t i = 0; i < hf->n_tensors; i++) {
        const qk_hf_tensor *t = &hf->tensors[i];
        int layer = -1, end = 0;
        if (sscanf(t->name, "model.layers.%d.mlp.experts.%n", &layer, &end) != 1 || end == 0)
            continue;
        const char *leaf = t->name + end;
        for (int pj = 0; pj < 2; pj++) {
            const size_t np = strlen(projs[pj]);
            if (strncmp(leaf, projs[pj], np) != 0)
                continue;
            const char *suffix = leaf + np;
            const bool is_float = !*suffix, is_blocks = !strcmp(suffix, "_blocks");
            if (!is_float && !is_blocks)
                continue;
            char module[64], other[300];
            snprintf(module, sizeof module, "model.layers.%d.mlp.experts", layer);
            snprintf(other, sizeof other, "%s.%s%s", module, projs[pj], is_float ? "_blocks" : "");
            const qk_hf_tensor *blocks = is_blocks ? t : qk_hf_find(hf, other);
            const qk_hf_tensor *flt = is_float ? t : qk_hf_find(hf, other);
            if (is_blocks && flt)
                continue; /* reported at the float tensor */
            if (flt && blocks)
                return qk_err_at(err, hf->file_paths[flt->file], flt->name, flt->st ? flt->st->info_offset : 0,
                                 "extra tensor: %s is stored as MXFP4 (%s_blocks), and also has a float %s (%s)",
                                 module, projs[pj], projs[pj], flt->dtype);
            int rc = 0;
            const char *ex = claim ? mx_excluded(pats, path, module, &rc, err) : NULL;
            if (rc)
                return rc;
            if (claim && !ex && flt)
                return qk_err_at(err, path, "quantization_config", qc->off,
                                 "claims mxfp4 for %s (gpt-oss experts), but %s has a float %s (%s) and no %s_blocks",
                                 module, module, projs[pj], flt->dtype, projs[pj]);
            if (claim && ex && blocks)
                return qk_err_at(err, path, "quantization_config", qc->off,
                                 "leaves %s unquantized (modules_to_not_convert '%s'), but %s has %s_blocks",
                                 module, ex, module, projs[pj]);
            if (blocks) {
                snprintf(other, sizeof other, "%s.%s_scales", module, projs[pj]);
                if (!qk_hf_find(hf, other))
                    return qk_err_at(err, hf->file_paths[blocks->file], blocks->name, blocks->st ? blocks->st->info_offset : 0,
                                     "MXFP4 blocks without their scales: no %s", other);
            }
        }
    }
    return QK_OK;
}
