/* ckpt_config.c - the config files of qk-quant --to (ckpt_write.c): the
 * source's config.json with quantization_config as the producing tool
 * writes it (compressed-tensors' QuantizationConfig, ModelOpt's, mlx_lm's),
 * transform_config for --rotate, and ModelOpt's hf_quant_config.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/types.h"
#include "lib/core/files.h"
#include "lib/core/jsonp.h"
#include "lib/core/pyjson.h"
#include "lib/core/strbuf.h"
#include "lib/quant/ckpt_wctx.h"

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "out of memory"); }

static bool tied_without_lm_head(const wctx *w)
{
    bool tied = false;
    qk_jsonv_bool(qk_jsonv_get(w->hf->config, "tie_word_embeddings"), &tied);
    return tied && !qk_ckpt_find(w->ck, "lm_head.weight");
}

/* The linear modules left unquantized, in model order, as a JSON array. */
static void ignore_list(const wctx *w, qk_sbuf *b, const char *sep)
{
    char module[1024];
    int k = 0;
    qk_sb_printf(b, "[");
    for (size_t i = 0; i < w->nm; i++) {
        const char *mod = w->m[i].quant || w->m[i].synth ? NULL : qk_ckw_linear_module(w->m[i].src, module, sizeof module);
        if (mod) {
            qk_sb_printf(b, "%s", k++ ? sep : "");
            qk_sb_jstr(b, mod);
        }
    }
    if (tied_without_lm_head(w) && !(w->rot && qk_rot_unties(w->rot)))
        qk_sb_printf(b, "%s\"lm_head\"", k ? sep : "");
    qk_sb_printf(b, "]");
}

/* compressed-tensors QuantizationArgs.model_dump() (quant_args.py fields). */
static void ct_args_ord(qk_sbuf *b, const char *actorder, int bits, const char *type, bool sym, int group,
                        const char *strategy, int block, const char *dynamic, const char *observer)
{
    if (actorder)
        qk_sb_printf(b, "{\"actorder\": \"%s\", \"block_structure\": ", actorder);
    else
        qk_sb_printf(b, "{\"actorder\": null, \"block_structure\": ");
    if (block)
        qk_sb_printf(b, "[%d, %d]", block, block);
    else
        qk_sb_printf(b, "null");
    qk_sb_printf(b, ", \"dynamic\": %s, \"group_size\": ", dynamic);
    if (group)
        qk_sb_printf(b, "%d", group);
    else
        qk_sb_printf(b, "null");
    qk_sb_printf(b, ", \"num_bits\": %d, \"observer\": %s%s%s, \"observer_kwargs\": {}, \"strategy\": \"%s\", "
                 "\"symmetric\": %s, \"type\": \"%s\"}",
              bits, observer ? "\"" : "", observer ? observer : "null", observer ? "\"" : "", strategy,
              sym ? "true" : "false", type);
}

static void transform_config(const wctx *w, qk_sbuf *b)
{
    if (w->rot)
        qk_rot_config(w->rot, b);
    else
        qk_sb_printf(b, "{}");
}

static void ct_args(qk_sbuf *b, int bits, const char *type, bool sym, int group, const char *strategy, int block,
                    const char *dynamic, const char *observer)
{
    ct_args_ord(b, NULL, bits, type, sym, group, strategy, block, dynamic, observer);
}

/* The members to add to config.json (an object, as text). */
static void gen_config(const wctx *w, qk_sbuf *b)
{
    const target *t = &w->tg;
    static const char *const fmt[] = {"float-quantized", "float-quantized", "int-quantized", "pack-quantized",
                                      "nvfp4-pack-quantized", "mxfp4-pack-quantized"};
    qk_sb_printf(b, "{");
    if (t->k <= K_CT_MXFP4) {
        qk_sb_printf(b, "\"quantization_config\": {\"config_groups\": {\"group_0\": {\"format\": \"%s\", "
                     "\"input_activations\": ", t->a8 ? "int-quantized" : fmt[t->k]);
        switch (t->k) {
        case K_CT_FP8: /* static: the preset FP8's observer (ckpt_static.h) */
            if (t->astatic)
                ct_args(b, 8, "float", true, 0, "tensor", 0, "false", "static_minmax");
            else
                ct_args(b, 8, "float", true, 0, "token", 0, "true", NULL);
            break;
        case K_CT_FP8_BLOCK: ct_args(b, 8, "float", true, t->group, "group", 0, "true", NULL); break;
        case K_CT_NVFP4: /* W4A4: block scales at run time, the global one calibrated */
            if (t->astatic)
                ct_args(b, 4, "float", true, 16, "tensor_group", 0, "\"local\"", "static_minmax");
            else
                qk_sb_printf(b, "null");
            break;
        case K_CT_W8A8:
            if (t->astatic)
                ct_args(b, 8, "int", true, 0, "tensor", 0, "false", "static_minmax");
            else
                ct_args(b, 8, "int", true, 0, "token", 0, "true", NULL);
            break;
        case K_CT_W4A16:
            if (t->a8) {
                ct_args(b, 8, "int", true, 0, "token", 0, "true", NULL);
                break;
            }
            /* fall through */
        default: qk_sb_printf(b, "null");
        }
        qk_sb_printf(b, ", \"output_activations\": null, \"targets\": [\"Linear\"], \"weights\": ");
        switch (t->k) {
        case K_CT_FP8: ct_args(b, 8, "float", true, 0, t->astatic ? "tensor" : "channel", 0, "false", "minmax"); break;
        case K_CT_FP8_BLOCK: ct_args(b, 8, "float", true, 0, "block", t->group, "false", "minmax"); break;
        case K_CT_W8A8: /* GPTQModifier sets its actorder on channel weights too */
            ct_args_ord(b, w->o->calib && (w->o->calib->method == QK_CALIB_GPTQ ||
                        w->o->calib->method == QK_CALIB_SQ_GPTQ) && w->o->calib->o.act_order ? "static" : NULL,
                        8, "int", true, 0, "channel", 0, "false", "minmax");
            break;
        case K_CT_W4A16: /* GPTQModifier records its column order: "static" (its default) or none */
            ct_args_ord(b, w->o->calib && w->o->calib->method == QK_CALIB_GPTQ && w->o->calib->o.act_order ?
                        "static" : NULL, 4, "int", !t->asym, t->group, "group", 0, "false", "minmax");
            break;
        case K_CT_NVFP4: ct_args(b, 4, "float", true, 16, "tensor_group", 0, "false", "minmax"); break;
        default: ct_args(b, 4, "float", true, 32, "group", 0, "false", "minmax"); break;
        }
        qk_sb_printf(b, "}}, \"format\": \"%s\", \"global_compression_ratio\": null, \"ignore\": ",
                     t->a8 ? "int-quantized" : fmt[t->k]);
        ignore_list(w, b, ", ");
        qk_sb_printf(b, ", \"kv_cache_scheme\": null, \"quant_method\": \"compressed-tensors\", "
                     "\"quantization_status\": \"compressed\", \"sparsity_config\": {}, \"transform_config\": ");
        transform_config(w, b);
        qk_sb_printf(b, ", \"version\": \"" CT_VERSION "\"}");
    } else if (t->k == K_MO_NVFP4) {
        /* modelopt/torch/export/convert_hf_config.py convert_hf_quant_config_format */
        qk_sb_printf(b, "\"quantization_config\": {\"config_groups\": {\"group_0\": {\"input_activations\": "
                     "{\"dynamic\": false, \"num_bits\": 4, \"type\": \"float\", \"group_size\": 16}, "
                     "\"weights\": {\"dynamic\": false, \"num_bits\": 4, \"type\": \"float\", \"group_size\": 16}, "
                     "\"targets\": [\"Linear\"]}}, \"ignore\": ");
        ignore_list(w, b, ", ");
        qk_sb_printf(b, ", \"quant_algo\": \"NVFP4\", \"producer\": {\"name\": \"modelopt\", \"version\": \""
                     MODELOPT_VERSION "\"}, \"quant_method\": \"modelopt\"}");
    } else if (t->k == K_MLX) {
        for (int i = 0; i < 2; i++)
            qk_sb_printf(b, "%s\"%s\": {\"group_size\": %d, \"bits\": %d, \"mode\": \"affine\"}", i ? ", " : "",
                      i ? "quantization_config" : "quantization", t->group, t->bits);
    } else {
        qk_sb_printf(b, "\"torch_dtype\": \"%s\"",
                  t->dtype == QK_BF16 ? "bfloat16" : t->dtype == QK_F16 ? "float16" : "float32");
        if (w->rot) { /* llm-compressor's rotation alone: a quantization_config holding the transforms */
            qk_sb_printf(b, ", \"quantization_config\": {\"quant_method\": \"compressed-tensors\", "
                         "\"sparsity_config\": {}, \"transform_config\": ");
            transform_config(w, b);
            qk_sb_printf(b, ", \"version\": \"" CT_VERSION "\"}");
        }
    }
    if (w->rot && qk_rot_unties(w->rot))
        qk_sb_printf(b, ", \"tie_word_embeddings\": false");
    qk_sb_printf(b, "}");
}

int qk_ckw_parse_text(const char *buf, size_t n, const char *what, qk_jsonv **out, qk_err *err)
{
    qk_jsonp_err je;
    if (qk_jsonp_parse(buf, n, 0, out, &je))
        return qk_err_at(err, what, "json", je.off, "%s", je.msg);
    return QK_OK;
}

/* Write members m[0..n) as a JSON object to dir/name. */
int qk_ckw_write_json(const wctx *w, const char *name, qk_pyj_member *m, size_t n, int indent, int sort, bool newline)
{
    char *path = qk_outdir_path(&w->out, name);
    if (!path)
        return oom(w->err);
    qk_out o;
    int rc = qk_out_open(&o, path, w->err);
    free(path);
    if (rc)
        return rc;
    qk_pyjson_object(o.f, m, n, indent, sort);
    if (newline)
        fputc('\n', o.f);
    if ((rc = qk_out_commit(&o, w->err)))
        qk_out_abort(&o);
    return rc;
}

int qk_ckw_write_config(wctx *w)
{
    char *src_txt = NULL, *path = qk_path_join(w->hf->dir, "config.json");
    size_t src_n = 0;
    qk_sbuf g = {0};
    qk_jsonv *src = NULL, *gen = NULL;
    qk_pyj_member *m = NULL;
    int rc = path ? qk_read_file(path, true, &src_txt, &src_n, w->err) : oom(w->err);
    if (rc)
        goto done;
    if (!src_txt) {
        if (!(src_txt = strdup("{}")))
            goto nomem;
        src_n = 2;
    }
    gen_config(w, &g);
    if (g.bad)
        goto nomem;
    if ((rc = qk_ckw_parse_text(src_txt, src_n, path, &src, w->err)) || (rc = qk_ckw_parse_text(g.s, g.n, "(generated)", &gen, w->err)))
        goto done;
    if (src->type != QK_JOBJ) {
        rc = qk_err_at(w->err, path, "config", 0, "is not a JSON object");
        goto done;
    }
    size_t n = 0;
    if (!(m = malloc((src->obj.n + gen->obj.n + 1) * sizeof *m)))
        goto nomem;
    static const char *const drop[] = {"quantization_config", "quantization", "compression_config"};
    for (size_t i = 0; i < src->obj.n; i++) {
        const qk_jsonm *s = &src->obj.m[i];
        bool skip = false;
        for (size_t d = 0; d < 3; d++)
            skip |= strcmp(s->key, drop[d]) == 0;
        if (skip)
            continue;
        m[n++] = (qk_pyj_member){s->key, s->key_len, {s->val, src_txt}};
        for (size_t j = 0; j < gen->obj.n; j++) /* replaced in place, as dict assignment does */
            if (strcmp(gen->obj.m[j].key, s->key) == 0)
                m[n - 1].v = (qk_pyj_src){gen->obj.m[j].val, g.s};
    }
    for (size_t j = 0; j < gen->obj.n; j++) {
        bool have = false;
        for (size_t i = 0; i < n; i++)
            have |= strcmp(m[i].key, gen->obj.m[j].key) == 0;
        if (!have)
            m[n++] = (qk_pyj_member){gen->obj.m[j].key, gen->obj.m[j].key_len, {gen->obj.m[j].val, g.s}};
    }
    kind k = w->tg.k;
    rc = qk_ckw_write_json(w, "config.json", m, n, k == K_MO_NVFP4 || k == K_MLX ? 4 : 2,
                    k == K_MO_NVFP4 ? 0 : k == K_MLX ? 1 : 2, k == K_DENSE);
    if (!rc && k == K_MO_NVFP4) { /* hf_quant_config.json, json.dump(indent=4) */
        qk_sbuf h = {0};
        qk_jsonv *hv = NULL;
        qk_sb_printf(&h, "{\"producer\": {\"name\": \"modelopt\", \"version\": \"" MODELOPT_VERSION "\"}, "
                      "\"quantization\": {\"quant_algo\": \"NVFP4\", \"kv_cache_quant_algo\": null, "
                      "\"group_size\": 16, \"exclude_modules\": ");
        ignore_list(w, &h, ", ");
        qk_sb_printf(&h, "}}");
        if (h.bad)
            rc = oom(w->err);
        else if (!(rc = qk_ckw_parse_text(h.s, h.n, "(generated)", &hv, w->err))) {
            qk_pyj_member hm[2];
            for (int i = 0; i < 2; i++)
                hm[i] = (qk_pyj_member){hv->obj.m[i].key, hv->obj.m[i].key_len, {hv->obj.m[i].val, h.s}};
            rc = qk_ckw_write_json(w, "hf_quant_config.json", hm, 2, 4, 0, false);
        }
        qk_jsonv_free(hv);
        free(h.s);
    }
    goto done;
nomem:
    rc = oom(w->err);
done:
    free(m);
    qk_jsonv_free(src);
    qk_jsonv_free(gen);
    free(g.s);
    free(src_txt);
    free(path);
    return rc;
}

