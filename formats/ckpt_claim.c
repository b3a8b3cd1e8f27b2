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

#include <stdio.h>
#include <strings.h>

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
