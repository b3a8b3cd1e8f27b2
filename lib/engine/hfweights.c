/* hfweights.c - a quantized checkpoint's logical weight as the engine
 * computes it (see hfweights.h): the kernels' view of the stored parts
 * (qk_ckpt_wq) plus the activation side of its scheme, as the serving
 * engines read it:
 *
 *   compressed-tensors input_activations (vLLM compressed_tensors.py
 *   _get_scheme_from_parts): float 8 bits, token + dynamic -> FP8 per token;
 *   tensor + static -> FP8 with the module's input_scale; group + dynamic ->
 *   FP8 per token group (FP8_BLOCK), or MXFP8 when the weights carry E8M0
 *   scales; float 4 bits tensor_group 16 -> NVFP4 with the module's
 *   input_global_scale; float 4 bits group 32 -> MXFP4; int 8 bits token +
 *   dynamic -> INT8 per token (symmetric or not), tensor + static -> INT8
 *   with input_scale.  No input_activations: float activations (W*A16).
 *   ModelOpt (vLLM modelopt.py): FP8 -> static FP8 with input_scale; NVFP4
 *   -> NVFP4 with global scale 1 / input_scale (ModelOptNvFp4LinearMethod
 *   passes input_scale_inv to scaled_fp4_quant).
 * vLLM fuses q/k/v (and gate/up) into one layer and takes the largest of
 * their static input scales; transformers, the reference, keeps each
 * module's own, and so does qk (each product encodes its input with its own
 * scale; qk_wq_act_same shares an encoding only when they are equal). */
#include "lib/engine/hfweights.h"

#include <stdio.h>
#include <string.h>

#include "formats/hfdir.h"
#include "kernels/types.h"

/* The config key of the scheme's part `what` ("input_activations.strategy"). */
static void key_of(const qk_ckpt *ck, const qk_qscheme *sc, const char *what, char *buf, size_t n)
{
    if (sc->method == QK_QM_COMPRESSED_TENSORS)
        snprintf(buf, n, "quantization_config.config_groups.%s.%s", sc->group, what);
    else if (sc->method == QK_QM_MODELOPT)
        snprintf(buf, n, "%s.quant_algo %s (%s)",
                 strcmp(ck->cfg->source, "hf_quant_config.json") == 0 ? "quantization" : "quantization_config",
                 sc->format, what);
    else
        snprintf(buf, n, "quantization_config (%s)", what);
}

static int cannot(const qk_ckpt *ck, const qk_ck_tensor *t, const qk_qscheme *sc, const char *cfg_path,
                  const char *what, const char *why, qk_err *err)
{
    char key[256], path[4096];
    key_of(ck, sc, what, key, sizeof key);
    if (strcmp(ck->cfg->source, "hf_quant_config.json") == 0)
        snprintf(path, sizeof path, "%s/hf_quant_config.json", ck->hf->dir);
    else
        snprintf(path, sizeof path, "%s", cfg_path);
    return qk_err_at(err, path, key, 0, "%s (%s): %s", why, t->name, sc->desc);
}

/* The scalar companion MODULE.leaf of t, or NULL. */
static const qk_hf_tensor *companion(const qk_ckpt *ck, const qk_ck_tensor *t, const char *leaf)
{
    char name[512];
    size_t n = strlen(t->name);
    if (n < 7 || strcmp(t->name + n - 7, ".weight") != 0)
        return NULL;
    snprintf(name, sizeof name, "%.*s.%s", (int)(n - 7), t->name, leaf);
    return qk_hf_find(ck->hf, name);
}

static int scalar(const qk_ckpt *ck, const qk_ck_tensor *t, const qk_qscheme *sc, const char *cfg_path,
                  const char *leaf, float *out, qk_err *err)
{
    const qk_hf_tensor *s = companion(ck, t, leaf);
    if (!s) {
        char why[160];
        snprintf(why, sizeof why, "the activations it declares need the module's %s, which is missing", leaf);
        return cannot(ck, t, sc, cfg_path, "input_activations", why, err);
    }
    if (s->nelem != 1 || (s->type != QK_F32 && s->type != QK_F16 && s->type != QK_BF16))
        return qk_err_at(err, ck->hf->file_paths[s->file], s->name, s->st ? s->st->info_offset : 0,
                         "expected one float value (%llu values of %s)", (unsigned long long)s->nelem, s->dtype);
    *out = qk_wq_val(s->data, s->type, 0);
    if (!(*out > 0.0f) || *out > 3.0e38f)
        return qk_err_at(err, ck->hf->file_paths[s->file], s->name, s->st ? s->st->info_offset : 0,
                         "%g is not a positive finite scale", (double)*out);
    return QK_OK;
}

int qk_hf_weight_view(const qk_ckpt *ck, const qk_ck_tensor *t, const char *config_path, qk_wq *w, qk_err *err)
{
    int rc = qk_ckpt_wq(t, w, err);
    if (rc)
        return rc;
    qk_qscheme sc;
    qk_quantcfg_scheme_for(ck->cfg, t->w->name, t->w->n_dims, &sc);
    if (w->type == QK_W_BNB8) { /* LLM.int8: int8 activations with float outliers (kernels/wq_act.c) */
        const qk_jsonv *qc = qk_jsonv_get(ck->hf->config, "quantization_config");
        double thr = 6.0; /* transformers' BitsAndBytesConfig default */
        const qk_jsonv *tv = qk_jsonv_get(qc, "llm_int8_threshold");
        if (tv && !qk_jsonv_f64(tv, &thr))
            return qk_err_at(err, config_path, "quantization_config.llm_int8_threshold", tv->off, "not a number");
        w->act = QK_A_I8O;
        w->a_threshold = (float)thr;
        return QK_OK;
    }
    const qk_qargs *a = &sc.a;
    if (!sc.quantized || !a->present || a->num_bits >= 16)
        return QK_OK; /* float activations */
    const bool mo = sc.method == QK_QM_MODELOPT;
    const char *st = a->strategy;
    if (strcmp(a->type, "float") == 0 && a->num_bits == 8) {
        if (w->type != QK_W_FP8 && w->type != QK_W_PACK && w->type != QK_W_INT8)
            return cannot(ck, t, &sc, config_path, "input_activations", "FP8 activations with these weights are not computed", err);
        w->act = QK_A_FP8;
        if (strcmp(st, "token") == 0 && a->dynamic) {
            if (qk_wq_f8b_takes(w)) /* FP8 x FP8 codes, then the scales (kernels/wq_f8.c) */
                w->act = QK_A_F8B;
            return QK_OK;
        }
        if (strcmp(st, "tensor") == 0 && !a->dynamic) {
            w->a_static = true;
            if (qk_wq_f8b_takes(w))
                w->act = QK_A_F8B;
            return scalar(ck, t, &sc, config_path, "input_scale", &w->a_scale, err);
        }
        if (strcmp(st, "group") == 0 && a->dynamic && a->group_size > 0) {
            w->a_group = a->group_size;
            if (qk_wq_f8g_takes(w)) /* FP8_BLOCK: codes x codes a group, then the block scales */
                w->act = QK_A_F8G;
            if (w->type == QK_W_FP8 && w->s.type == QK_E8M0 && a->group_size == 32)
                w->act = QK_A_MX8;
            return QK_OK;
        }
        return cannot(ck, t, &sc, config_path, "input_activations.strategy",
                      a->dynamic ? "dynamic FP8 activations of this strategy are not computed (a tensor-wide "
                                   "dynamic scale would depend on the batch)"
                                 : "static FP8 activations of this strategy are not computed",
                      err);
    }
    if (strcmp(a->type, "float") == 0 && a->num_bits == 4) {
        if ((strcmp(st, "tensor_group") == 0 || mo) && a->group_size == 16 && w->type == QK_W_NVFP4 &&
            w->cols % 16 == 0) {
            w->act = QK_A_NV4;
            w->a_group = 16;
            if (mo) {
                if ((rc = scalar(ck, t, &sc, config_path, "input_scale", &w->a_global, err)))
                    return rc;
                w->a_global = 1.0f / w->a_global;
                return QK_OK;
            }
            return scalar(ck, t, &sc, config_path, "input_global_scale", &w->a_global, err);
        }
        if (strcmp(st, "group") == 0 && a->group_size == 32 && w->type == QK_W_MXFP4) {
            w->act = QK_A_MX4;
            w->a_group = 32;
            return QK_OK;
        }
        return cannot(ck, t, &sc, config_path, "input_activations", "FP4 activations of this kind are not computed", err);
    }
    if (strcmp(a->type, "int") == 0 && a->num_bits == 8) {
        if (w->type != QK_W_INT8 && w->type != QK_W_PACK)
            return cannot(ck, t, &sc, config_path, "input_activations", "INT8 activations with these weights are not computed", err);
        if (w->gidx)
            return cannot(ck, t, &sc, config_path, "weights.actorder",
                          "INT8 activations with act-order (weight_g_idx) weights are not computed", err);
        if (w->type == QK_W_INT8 && w->s.rdiv != 1 && w->s.rdiv != w->rows)
            return cannot(ck, t, &sc, config_path, "weights.strategy", "INT8 block-scaled weights with INT8 activations are not computed", err);
        if (w->cols > 65536)
            return cannot(ck, t, &sc, config_path, "input_activations",
                          "INT8 products over more than 65536 inputs could overflow int32", err);
        w->act = QK_A_I8;
        w->a_asym = !a->symmetric;
        if (strcmp(st, "token") == 0 && a->dynamic)
            return QK_OK;
        if (strcmp(st, "tensor") == 0 && !a->dynamic && a->symmetric) {
            w->a_static = true;
            return scalar(ck, t, &sc, config_path, "input_scale", &w->a_scale, err);
        }
        return cannot(ck, t, &sc, config_path, "input_activations.strategy",
                      "INT8 activations of this strategy are not computed", err);
    }
    return cannot(ck, t, &sc, config_path, "input_activations", "activations of this type are not computed", err);
}

int qk_hf_kv_scales(const qk_ckpt *ck, const char *config_path, qk_model *m, qk_err *err)
{
    const qk_jsonv *qc = qk_jsonv_get(ck->hf->config, "quantization_config");
    const qk_jsonv *kv = qk_jsonv_get(qc, "kv_cache_scheme");
    if (!kv || kv->type == QK_JNULL)
        return QK_OK;
    const char *key = "quantization_config.kv_cache_scheme";
    if (!qk_jsonv_is(kv, QK_JOBJ))
        return qk_err_at(err, config_path, key, kv->off, "not an object");
    const char *type = qk_jsonv_get_str(kv, "type", ""), *st = qk_jsonv_get_str(kv, "strategy", "");
    const int64_t bits = qk_jsonv_get_i64(kv, "num_bits", 0);
    if (strcmp(type, "float") != 0 || bits != 8 || strcmp(st, "tensor") != 0 || qk_jsonv_get_bool(kv, "dynamic", false))
        return qk_err_at(err, config_path, key, kv->off,
                         "a %s %lld-bit %s%s KV cache is not computed (FP8 per tensor with static k_scale / v_scale is)",
                         type, (long long)bits, st, qk_jsonv_get_bool(kv, "dynamic", false) ? " dynamic" : "");
    for (int il = 0; il < m->hp.n_layer; il++)
        for (int i = 0; i < 2; i++) {
            char name[96];
            snprintf(name, sizeof name, "model.layers.%d.self_attn.%s", il, i ? "v_scale" : "k_scale");
            const qk_hf_tensor *s = qk_hf_find(ck->hf, name);
            float v = 0;
            if (!s || s->nelem != 1 || (s->type != QK_F32 && s->type != QK_F16 && s->type != QK_BF16) ||
                !((v = qk_wq_val(s->data, s->type, 0)) > 0.0f) || v > 3.0e38f)
                return qk_err_at(err, config_path, key, kv->off, "%s: %s", name,
                                 s ? "not one positive float scale" : "the scale it needs is missing");
            m->layers[il].kv_scale[i] = v;
        }
    return QK_OK;
}
