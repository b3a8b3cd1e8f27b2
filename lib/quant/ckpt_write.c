/* ckpt_write.c - qk-quant --to SCHEME SRC OUT_DIR: write a quantized (or
 * dequantized) Hugging Face directory the way the producing tool does.
 *
 *   scheme          tool and preset                         tensors per quantized module
 *   ct-fp8          compressed-tensors FP8_DYNAMIC           weight F8_E4M3, weight_scale [N,1]
 *   ct-fp8-static   compressed-tensors FP8 (static; --calib) weight F8_E4M3, weight_scale [1], input_scale [1]
 *   ct-fp8-block    compressed-tensors FP8_BLOCK (128x128)   weight F8_E4M3, weight_scale [N/128,K/128]
 *   ct-w8a8         compressed-tensors INT8_W8A8             weight I8, weight_scale [N,1]
 *   ct-w8a8-static  INT8 W8A8, static per-tensor activations weight I8, weight_scale [N,1], input_scale [1]
 *                   (config_groups; --calib)
 *   ct-w4a16        compressed-tensors W4A16 (W4A16_ASYM)    weight_packed I32, weight_scale [N,K/G],
 *                                                            (weight_zero_point I32), weight_shape I64
 *   ct-w4a8         compressed-tensors W4A8 (int-quantized;     weight I8 (int4 values), weight_scale [N,K/G]
 *                   dynamic per-token int8 activations)
 *   ct-nvfp4        compressed-tensors NVFP4A16              weight_packed U8, weight_scale F8_E4M3,
 *                                                            weight_global_scale F32 [1]
 *   ct-nvfp4a4      compressed-tensors NVFP4 (W4A4; --calib)  those of ct-nvfp4, input_global_scale F32 [1]
 *   ct-mxfp4        compressed-tensors mxfp4-pack-quantized  weight_packed U8, weight_scale U8 (E8M0)
 *   modelopt-nvfp4  ModelOpt NVFP4 (weights; with --calib    weight U8, weight_scale F8_E4M3, weight_scale_2
 *                   also input_scale: W4A4)                  (input_scale F32 [])
 *   mlx-qB          mlx_lm convert -q (affine, B bits)       weight U32, scales, biases
 *   bf16 f16 f32    every tensor dequantized to that dtype
 *
 * Numbers: the scalings are kernels/scaled.h's (compressed-tensors'
 * calculate_qparams for fp8/int, the OCP MX rule for mxfp4, ModelOpt's or
 * compressed-tensors' NVFP4 convention) and ckpt_mlx.c's MLX affine rule;
 * scales are stored in the model's dtype (F32/F16/BF16) as llm-compressor
 * does, FP8/E8M0 where the format says so.  NVFP4's global scale is one
 * per fusion group (q/k/v_proj, gate/up_proj), as llm-compressor's fused
 * weight observers and ModelOpt's export write it (ckpt_static.c).
 *
 * Which modules: 2-D "*.weight" tensors of linear layers, except the
 * default ignore list (lm_head, embeddings, norms, MoE routers mlp.gate /
 * router) and modules matching --ignore (POSIX ERE, searched in the module
 * name).  compressed-tensors requires group and block sizes to divide the
 * weight (forward.py raises otherwise): such a module is an error naming
 * it; MLX leaves it unquantized (mlx.nn.quantize's predicate).
 *
 * Files: config.json as the tool writes it (compressed-tensors and
 * transformers: json.dump(indent=2, sort_keys=True); ModelOpt: indent 4,
 * quantization_config appended, plus hf_quant_config.json; mlx_lm: indent 4,
 * top-level keys sorted, "quantization" and "quantization_config"), weights
 * in model.safetensors or, past the shard size, model-0000i-of-0000n.safetensors
 * plus model.safetensors.index.json (transformers' layout; a module's
 * tensors stay in one shard), generation_config.json and tokenizer files
 * copied.
 *
 * --rotate hadamard: SpinQuant's rotations on the float weights before they
 * are encoded, two tensors added and transform_config (lib/quant/rotate.h). */
#include "lib/quant/ckpt_write.h"

#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ckpt.h"
#include "formats/safetensors.h"
#include "kernels/half.h"
#include "kernels/scaled.h"
#include "kernels/types.h"
#include "lib/core/ckd.h"
#include "lib/core/ere.h"
#include "lib/core/files.h"
#include "lib/core/jsonp.h"
#include "lib/core/outfile.h"
#include "lib/core/progress.h"
#include "lib/core/pyjson.h"
#include "lib/core/strbuf.h"
#include "lib/quant/ckpt_pack.h"
#include "lib/quant/ckpt_static.h"
#include "lib/quant/ckpt_wctx.h"
#include "lib/quant/rotate.h"

const char *const qk_ckpt_schemes[] = {"ct-fp8", "ct-fp8-static", "ct-fp8-block", "ct-w8a8", "ct-w8a8-static",
                                       "ct-w4a16", "ct-w4a8", "ct-nvfp4", "ct-nvfp4a4", "ct-mxfp4",
                                       "modelopt-nvfp4", "mlx-q2", "mlx-q3", "mlx-q4", "mlx-q5", "mlx-q6",
                                       "mlx-q8", "bf16", "f16", "f32", NULL};

#define DEFAULT_SHARD (5ull * 1000 * 1000 * 1000)

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "out of memory"); }

/* ---- targets ----------------------------------------------------------------- */

static bool needs_calib(const char *scheme)
{
    return !strcmp(scheme, "ct-fp8-static") || !strcmp(scheme, "ct-w8a8-static") || !strcmp(scheme, "ct-nvfp4a4");
}

bool qk_ckpt_scheme_static(const char *scheme) { return needs_calib(scheme) || !strcmp(scheme, "modelopt-nvfp4"); }

static int parse_target(const char *s, const qk_ckpt_opts *o, target *t, qk_err *err)
{
    static const struct { const char *n; kind k; int bits, group; } tab[] = {
        {"ct-fp8", K_CT_FP8, 8, 0},       {"ct-fp8-block", K_CT_FP8_BLOCK, 8, 128},
        {"ct-w8a8", K_CT_W8A8, 8, 0},     {"ct-w4a16", K_CT_W4A16, 4, 128}, {"ct-w4a8", K_CT_W4A16, 4, 128},
        {"ct-nvfp4", K_CT_NVFP4, 4, 16},  {"ct-mxfp4", K_CT_MXFP4, 4, 32},
        {"modelopt-nvfp4", K_MO_NVFP4, 4, 16}, {"ct-fp8-static", K_CT_FP8, 8, 0}, {"ct-nvfp4a4", K_CT_NVFP4, 4, 16},
        {"ct-w8a8-static", K_CT_W8A8, 8, 0},
    };
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(s, tab[i].n) == 0) {
            t->k = tab[i].k;
            t->bits = tab[i].bits;
            t->group = tab[i].group;
            t->a8 = !strcmp(s, "ct-w4a8");
            /* modelopt-nvfp4 gains its input_scale with --calib */
            t->astatic = needs_calib(s) || (t->k == K_MO_NVFP4 && o->calib && o->calib->text);
        }
    if (strncmp(s, "mlx-q", 5) == 0 && s[5] >= '2' && s[5] <= '8' && s[5] != '7' && !s[6]) {
        t->k = K_MLX;
        t->bits = s[5] - '0';
        t->group = 64; /* mlx_lm's default q_group_size */
    } else if (!strcmp(s, "bf16") || !strcmp(s, "f16") || !strcmp(s, "f32")) {
        t->k = K_DENSE;
        t->dtype = s[1] == 'f' ? QK_BF16 : s[1] == '1' ? QK_F16 : QK_F32;
    } else if (!t->bits)
        return qk_errf(err, QK_EINPUT, "unknown --to scheme '%s' (ct-fp8, ct-fp8-static, ct-fp8-block, ct-w8a8, "
                       "ct-w8a8-static, ct-w4a16, ct-w4a8, ct-nvfp4, ct-nvfp4a4, ct-mxfp4, modelopt-nvfp4, "
                       "mlx-q2..mlx-q8, bf16, f16, f32)", s);
    if (o->asym && (t->k != K_CT_W4A16 || t->a8))
        return qk_errf(err, QK_EINPUT, "--asym applies to ct-w4a16 only");
    t->asym = o->asym;
    if (o->group) {
        bool ok = t->k == K_CT_W4A16 ? o->group > 0 && o->group % 8 == 0
                  : t->k == K_MLX ? o->group == 32 || o->group == 64 || o->group == 128
                  : t->k == K_CT_FP8_BLOCK ? o->group > 0
                  : false;
        if (!ok)
            return qk_errf(err, QK_EINPUT, "--group %d does not apply to %s%s", o->group, s,
                           t->k == K_MLX ? " (MLX groups: 32, 64, 128)" : t->k == K_CT_W4A16 ? " (a multiple of 8)" : "");
        t->group = o->group;
    }
    return QK_OK;
}

/* ---- which modules ------------------------------------------------------------ */

static const char *last_comp(const char *module)
{
    const char *l = strrchr(module, '.');
    return l ? l + 1 : module;
}

static bool is_embedding(const char *module)
{
    const char *l = last_comp(module);
    return strncmp(l, "embed", 5) == 0 || strstr(l, "_embed") || !strcmp(l, "wte") || !strcmp(l, "wpe") ||
           !strcmp(l, "tok_embeddings");
}

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

/* The module of a 2-D linear weight "MODULE.weight" (into buf), or NULL. */
const char *qk_ckw_linear_module(const qk_ck_tensor *t, char *buf, size_t cap)
{
    size_t n = strlen(t->name);
    if (t->n_dims != 2 || n <= 7 || strcmp(t->name + n - 7, ".weight") || n - 7 >= cap)
        return NULL;
    memcpy(buf, t->name, n - 7);
    buf[n - 7] = 0;
    return is_embedding(buf) ? NULL : buf;
}

/* Default ignore list: lm_head, norms, MoE routers. */
static bool default_ignored(const char *module)
{
    const char *l = last_comp(module);
    return !strcmp(l, "lm_head") || strstr(l, "norm") || ends_with(module, "mlp.gate") ||
           ends_with(module, "moe.gate") || !strcmp(l, "router");
}

static const char *ct_reason(const wctx *w, int64_t n, int64_t k, char *why, size_t cap)
{
    const target *t = &w->tg;
    int g = t->k == K_CT_W4A16 || t->k == K_CT_NVFP4 || t->k == K_CT_MXFP4 || t->k == K_MO_NVFP4 ? t->group : 0;
    if (g && k % g) {
        snprintf(why, cap, "%lld input features are not a multiple of the group size %d", (long long)k, g);
        return why;
    }
    if (t->k == K_CT_FP8_BLOCK && (n % t->group || k % t->group)) {
        snprintf(why, cap, "shape [%lld, %lld] is not a multiple of the %dx%d block", (long long)n, (long long)k,
                 t->group, t->group);
        return why;
    }
    return NULL;
}

/* ---- output plan ---------------------------------------------------------------- */

static int add_part(omod *m, const char *module, const char *leaf, const char *dtype, int nd, int64_t a, int64_t b)
{
    opart *p = &m->p[m->np++];
    size_t n = strlen(module) + strlen(leaf) + 2;
    if (!(p->name = malloc(n)))
        return -1;
    snprintf(p->name, n, "%s.%s", module, leaf);
    p->dtype = dtype;
    p->nd = nd;
    p->shape[0] = a;
    p->shape[1] = b;
    const qk_st_dtype *d = qk_st_dtype_by_name(dtype);
    uint64_t ne = nd == 0 ? 1 : nd == 1 ? (uint64_t)a : (uint64_t)a * (uint64_t)b;
    p->nbytes = ne * (uint64_t)d->bits / 8;
    m->bytes += p->nbytes;
    return 0;
}

static const char *dtype_name(int type) { return qk_st_dtype_by_type(type)->name; }

static bool ck_float_type(int type)
{
    return type == QK_F32 || type == QK_F16 || type == QK_BF16 || type == QK_F64 || type == QK_F8_E4M3 ||
           type == QK_F8_E5M2;
}

static int plan_module(wctx *w, omod *m, const qk_ck_tensor *t)
{
    char module[1024], why[160];
    const target *tg = &w->tg;
    const char *sd = dtype_name(w->model_dtype);
    m->src = t;
    if (t == &w->r4_t) {
        m->synth = true;
        snprintf(module, sizeof module, "%.*s", (int)(strlen(t->name) - 7), t->name);
        return add_part(m, module, "weight", "F64", 2, t->rows, t->cols) ? oom(w->err) : QK_OK;
    }
    const char *mod = tg->k == K_DENSE ? NULL : qk_ckw_linear_module(t, module, sizeof module);
    if (mod && (default_ignored(mod) || (w->has_ignore && regexec(&w->ignore_re, mod, 0, NULL, 0) == 0)))
        mod = NULL;
    if (mod && tg->k == K_MLX && t->cols % tg->group)
        mod = NULL; /* mlx.nn.quantize skips it */
    if (mod && tg->k != K_MLX && ct_reason(w, t->rows, t->cols, why, sizeof why))
        return qk_errf(w->err, QK_EINPUT,
                       "%s: %s (%s requires it); leave the module out with --ignore '%s' or choose another --group",
                       t->name, why, tg->k == K_MO_NVFP4 ? "ModelOpt" : "compressed-tensors", mod);
    int64_t n = t->rows, k = t->cols, g = tg->group;
    int rc = 0;
    if (!mod) {
        /* not quantized: dense, in its own dtype when stored dense, else the model's */
        m->raw = !(w->rot && qk_rot_changes(w->rot, t->name)) && t->layout == QK_CK_DENSE &&
                 (tg->k != K_DENSE || t->w->type < 0 || !ck_float_type(t->w->type) || t->w->type == tg->dtype);
        const char *dt = m->raw ? t->w->dtype : dtype_name(tg->k == K_DENSE ? tg->dtype : w->model_dtype);
        opart *p = &m->p[m->np++];
        if (!(p->name = strdup(t->name)))
            return oom(w->err);
        p->dtype = dt;
        p->nd = -1; /* shape from the source */
        p->nbytes = m->raw ? t->w->nbytes : t->nelem * (uint64_t)qk_st_dtype_by_name(dt)->bits / 8;
        m->bytes = p->nbytes;
        return QK_OK;
    }
    m->quant = true;
    switch (tg->k) {
    case K_CT_FP8:
    case K_CT_W8A8:
        rc = add_part(m, mod, "weight", tg->k == K_CT_FP8 ? "F8_E4M3" : "I8", 2, n, k);
        if (tg->astatic && tg->k == K_CT_FP8) /* preset FP8: one weight scale */
            rc |= add_part(m, mod, "weight_scale", sd, 1, 1, 0);
        else
            rc |= add_part(m, mod, "weight_scale", sd, 2, n, 1);
        if (tg->astatic)
            rc |= add_part(m, mod, "input_scale", sd, 1, 1, 0);
        break;
    case K_CT_FP8_BLOCK:
        rc = add_part(m, mod, "weight", "F8_E4M3", 2, n, k);
        rc |= add_part(m, mod, "weight_scale", sd, 2, n / g, k / g);
        break;
    case K_CT_W4A16:
        if (tg->a8) { /* llm-compressor saves W4A8 int-quantized: one code a byte */
            rc = add_part(m, mod, "weight", "I8", 2, n, k);
            rc |= add_part(m, mod, "weight_scale", sd, 2, n, k / g);
            break;
        }
        rc = add_part(m, mod, "weight_packed", "I32", 2, n, (k + 7) / 8);
        rc |= add_part(m, mod, "weight_scale", sd, 2, n, k / g);
        if (tg->asym)
            rc |= add_part(m, mod, "weight_zero_point", "I32", 2, (n + 7) / 8, k / g);
        rc |= add_part(m, mod, "weight_shape", "I64", 1, 2, 0);
        break;
    case K_CT_NVFP4:
        rc = add_part(m, mod, "weight_packed", "U8", 2, n, k / 2);
        rc |= add_part(m, mod, "weight_scale", "F8_E4M3", 2, n, k / 16);
        rc |= add_part(m, mod, "weight_global_scale", "F32", 1, 1, 0);
        if (tg->astatic)
            rc |= add_part(m, mod, "input_global_scale", "F32", 1, 1, 0);
        break;
    case K_CT_MXFP4:
        rc = add_part(m, mod, "weight_packed", "U8", 2, n, k / 2);
        rc |= add_part(m, mod, "weight_scale", "U8", 2, n, k / 32);
        break;
    case K_MO_NVFP4:
        rc = add_part(m, mod, "weight", "U8", 2, n, k / 2);
        rc |= add_part(m, mod, "weight_scale", "F8_E4M3", 2, n, k / 16);
        rc |= add_part(m, mod, "weight_scale_2", "F32", 0, 0, 0);
        if (tg->astatic)
            rc |= add_part(m, mod, "input_scale", "F32", 0, 0, 0);
        break;
    case K_MLX:
        rc = add_part(m, mod, "weight", "U32", 2, n, k * tg->bits / 32);
        rc |= add_part(m, mod, "scales", sd, 2, n, k / g);
        rc |= add_part(m, mod, "biases", sd, 2, n, k / g);
        break;
    case K_DENSE: break;
    }
    return rc ? oom(w->err) : QK_OK;
}

/* ---- module data ---------------------------------------------------------------- */

static void scheme_of(const wctx *w, const qk_scheme **s, qk_scheme_opts *so)
{
    const target *t = &w->tg;
    memset(so, 0, sizeof *so);
    so->scale_type = w->model_dtype;
    switch (t->k) {
    case K_CT_FP8: *s = qk_scheme_by_name("fp8_e4m3"), so->gran = t->astatic ? QK_GRAN_TENSOR : QK_GRAN_ROW; break;
    case K_CT_FP8_BLOCK:
        *s = qk_scheme_by_name("fp8_e4m3"), so->gran = QK_GRAN_BLOCK;
        so->block_rows = so->block_cols = t->group;
        break;
    case K_CT_W8A8: *s = qk_scheme_by_name("int8"), so->gran = QK_GRAN_ROW; break;
    case K_CT_W4A16:
        *s = qk_scheme_by_name(t->asym ? "uint4" : "int4"), so->gran = QK_GRAN_GROUP, so->group = t->group;
        break;
    case K_CT_NVFP4: *s = qk_scheme_by_name("nvfp4"), so->nvfp4_ct = true; break;
    case K_MO_NVFP4: *s = qk_scheme_by_name("nvfp4"); break;
    case K_CT_MXFP4: *s = qk_scheme_by_name("mxfp4"); break;
    default: *s = NULL;
    }
    if (t->k == K_CT_NVFP4 || t->k == K_MO_NVFP4 || t->k == K_CT_MXFP4)
        so->scale_type = QK_F32; /* their scales are bytes (E4M3, E8M0) whatever the model's dtype */
}

/* The bytes of every part of m into bufs[] (owned; raw parts point into the
 * source mapping and leave bufs[i] NULL). */
static int make_module(wctx *w, const omod *m, uint8_t **bufs, const uint8_t **data)
{
    const qk_ck_tensor *t = m->src;
    int rc = QK_OK;
    float *x = NULL;
    uint8_t *enc = NULL;
    const float *cf = qk_calib_floats(&w->cres, t->name); /* --method awq: smoothed */
    if (m->raw && !cf) {
        data[0] = t->w->data;
        return QK_OK;
    }
    if (m->synth) {
        if (!(bufs[0] = malloc((size_t)m->p[0].nbytes)))
            return oom(w->err);
        qk_rot_r4_matrix(w->rot, (double *)(void *)bufs[0]);
        data[0] = bufs[0];
        return QK_OK;
    }
    if (t->nelem > SIZE_MAX / sizeof(float) || !(x = malloc(t->nelem ? t->nelem * sizeof *x : 1)))
        return oom(w->err);
    if (cf)
        memcpy(x, cf, t->nelem * sizeof *x);
    else if ((rc = qk_ckpt_read(w->ck, t, x, w->err)) ||
             (w->rot && (rc = qk_rot_tensor(w->rot, t->name, x, t->n_dims == 1 ? 1 : t->rows,
                                            t->n_dims == 1 ? (int64_t)t->nelem : t->cols, w->err))))
        goto done;
    for (int i = 0; i < m->np; i++)
        if (!(bufs[i] = calloc(1, m->p[i].nbytes ? m->p[i].nbytes : 1))) {
            rc = oom(w->err);
            goto done;
        }
    int64_t n = t->rows, k = t->cols;
    if (!m->quant) {
        qk_ckw_convert_floats(x, t->nelem, qk_st_dtype_by_name(m->p[0].dtype)->type, bufs[0]);
    } else if (w->tg.k == K_MLX) {
        int g = w->tg.group, bits = w->tg.bits;
        uint8_t *codes = malloc((size_t)k);
        float *sc = malloc((size_t)(k / g) * 2 * sizeof *sc);
        if (!codes || !sc) {
            free(codes), free(sc);
            rc = oom(w->err);
            goto done;
        }
        uint64_t rb = (uint64_t)k * (uint64_t)bits / 8, ng = (uint64_t)(k / g);
        int st = w->model_dtype, sb = st == QK_F32 ? 4 : 2;
        for (int64_t r = 0; r < n; r++) {
            qk_mlx_affine_quantize_row(x + r * k, k, g, bits, codes, sc, sc + ng);
            qk_ckw_pack_bits(codes, k, bits, bufs[0] + (uint64_t)r * rb);
            qk_ckw_convert_floats(sc, ng, st, bufs[1] + (uint64_t)r * ng * (uint64_t)sb);
            qk_ckw_convert_floats(sc + ng, ng, st, bufs[2] + (uint64_t)r * ng * (uint64_t)sb);
        }
        free(codes), free(sc);
    } else {
        const qk_scheme *s;
        qk_scheme_opts so;
        qk_scheme_layout l;
        scheme_of(w, &s, &so);
        if (w->wglob) /* NVFP4: its fusion group's global scale (ckpt_static.c) */
            so.has_global_scale = true, so.global_scale = w->wglob[m - w->m];
        if ((rc = qk_scheme_layout_of(s, n, k, &so, &l, w->err)))
            goto done;
        if (!(enc = malloc((size_t)l.total))) {
            rc = oom(w->err);
            goto done;
        }
        if ((rc = qk_scheme_encode(s, x, n, k, &so, enc, w->err)))
            goto done;
        char module[1024];
        const qk_calib_mod *cm = qk_calib_find(&w->cres, qk_ckw_linear_module(t, module, sizeof module));
        if (cm)
            qk_calib_put_codes(cm, s, &l, enc);
        if (w->tg.k == K_CT_W4A16 && w->tg.a8) {
            for (int64_t r = 0; r < n; r++) /* two's-complement nibbles to int8 */
                for (int64_t j = 0; j < k; j++) {
                    const uint8_t b = enc[l.codes_off + (uint64_t)r * l.row_bytes + (uint64_t)j / 2];
                    const int v = (j % 2 ? b >> 4 : b & 15) ^ 8;
                    bufs[0][r * k + j] = (uint8_t)(int8_t)(v - 8);
                }
            memcpy(bufs[1], enc + l.scales_off, (size_t)l.scales_size);
        } else if (w->tg.k == K_CT_W4A16) {
            qk_ckw_ct_pack_rows(enc + l.codes_off, n, k, l.row_bytes, !w->tg.asym, bufs[0]);
            memcpy(bufs[1], enc + l.scales_off, (size_t)l.scales_size);
            int pi = 2;
            if (w->tg.asym) { /* zero points: packed along the output dimension */
                uint64_t ng = l.grid_cols;
                for (uint64_t r = 0; r < (uint64_t)n; r++)
                    for (uint64_t gi = 0; gi < ng; gi++) {
                        uint64_t wi = (r / 8) * ng + gi;
                        uint32_t v;
                        memcpy(&v, bufs[2] + wi * 4, 4);
                        qk_ckw_put_u32(bufs[2], wi, v | (uint32_t)enc[l.zeros_off + r * ng + gi] << (4 * (r % 8)));
                    }
                pi = 3;
            }
            int64_t shp[2] = {n, k};
            memcpy(bufs[pi], shp, 16);
        } else {
            memcpy(bufs[0], enc + l.codes_off, (size_t)l.codes_size);
            memcpy(bufs[1], enc + l.scales_off, (size_t)l.scales_size);
            if (w->tg.k == K_CT_NVFP4 || w->tg.k == K_MO_NVFP4)
                memcpy(bufs[2], enc + l.global_off, 4);
            if (w->tg.astatic)
                qk_ckw_static_part(w, m, bufs[m->np - 1]);
        }
    }
    for (int i = 0; i < m->np; i++)
        data[i] = bufs[i];
done:
    free(x);
    free(enc);
    return rc;
}

/* ---- weights --------------------------------------------------------------------------- */

static void shard_name(const wctx *w, int s, char *buf, size_t cap)
{
    if (w->nshards == 1)
        snprintf(buf, cap, "model.safetensors");
    else
        snprintf(buf, cap, "model-%05d-of-%05d.safetensors", s + 1, w->nshards);
}

static int write_shard(wctx *w, int s, qk_progress *pr)
{
    char name[64];
    shard_name(w, s, name, sizeof name);
    char *path = qk_outdir_path(&w->out, name);
    qk_st_writer *sw = qk_st_writer_new(0);
    int rc = path && sw ? QK_OK : oom(w->err);
    if (!rc)
        rc = qk_st_w_meta(sw, "format", w->tg.k == K_MLX ? "mlx" : "pt", w->err);
    for (size_t i = 0; !rc && i < w->nm; i++) {
        const omod *m = &w->m[i];
        if (m->shard != s)
            continue;
        for (int j = 0; !rc && j < m->np; j++) {
            const opart *p = &m->p[j];
            if (p->nd < 0)
                rc = qk_st_w_tensor(sw, p->name, p->dtype, m->src->n_dims, m->src->shape, NULL, w->err);
            else
                rc = qk_st_w_tensor(sw, p->name, p->dtype, p->nd, p->shape, NULL, w->err);
        }
    }
    if (!rc)
        rc = qk_st_w_begin(sw, path, w->err);
    for (size_t i = 0; !rc && i < w->nm; i++) {
        const omod *m = &w->m[i];
        if (m->shard != s)
            continue;
        uint8_t *bufs[5] = {0};
        const uint8_t *data[5] = {0};
        rc = make_module(w, m, bufs, data);
        for (int j = 0; !rc && j < m->np; j++)
            if (m->p[j].nbytes)
                rc = qk_st_w_data(sw, data[j], (size_t)m->p[j].nbytes, w->err);
        for (int j = 0; j < 5; j++)
            free(bufs[j]);
        qk_progress_add(pr, 1);
    }
    if (!rc)
        rc = qk_st_writer_finish(sw, w->err);
    qk_st_writer_free(sw);
    free(path);
    return rc;
}

static int write_index(wctx *w)
{
    qk_sbuf b = {0};
    qk_jsonv *v = NULL;
    uint64_t total = 0;
    for (size_t i = 0; i < w->nm; i++)
        total += w->m[i].bytes;
    qk_sb_printf(&b, "{\"metadata\": {\"total_size\": %llu}, \"weight_map\": {", (unsigned long long)total);
    int k = 0;
    for (size_t i = 0; i < w->nm; i++)
        for (int j = 0; j < w->m[i].np; j++) {
            char name[64];
            shard_name(w, w->m[i].shard, name, sizeof name);
            qk_sb_printf(&b, "%s", k++ ? ", " : "");
            qk_sb_jstr(&b, w->m[i].p[j].name);
            qk_sb_printf(&b, ": \"%s\"", name);
        }
    qk_sb_printf(&b, "}}");
    int rc = b.bad ? oom(w->err) : qk_ckw_parse_text(b.s, b.n, "(index)", &v, w->err);
    if (!rc) {
        qk_pyj_member m[2];
        for (int i = 0; i < 2; i++)
            m[i] = (qk_pyj_member){v->obj.m[i].key, v->obj.m[i].key_len, {v->obj.m[i].val, b.s}};
        rc = qk_ckw_write_json(w, "model.safetensors.index.json", m, 2, 2, 2, true);
    }
    qk_jsonv_free(v);
    free(b.s);
    return rc;
}

/* ---- other files, the directory ---------------------------------------------------------- */

static int model_dtype(const wctx *w)
{
    const char *td = qk_jsonv_get_str(w->hf->config, "torch_dtype", qk_jsonv_get_str(w->hf->config, "dtype", NULL));
    if (td)
        return !strcmp(td, "bfloat16") ? QK_BF16 : !strcmp(td, "float16") ? QK_F16 : QK_F32;
    for (size_t i = 0; i < w->ck->n; i++) {
        const qk_ck_tensor *t = &w->ck->t[i];
        if (t->layout == QK_CK_DENSE && (t->w->type == QK_BF16 || t->w->type == QK_F16 || t->w->type == QK_F32))
            return t->w->type;
    }
    return QK_F32;
}

static const char *const copied[] = {"generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                     "tokenizer.model", "special_tokens_map.json", "added_tokens.json",
                                     "vocab.json", "merges.txt", "chat_template.jinja", "chat_template.json",
                                     "preprocessor_config.json", NULL};

/* --rotate: the rotations and the two tensors they add; without it, a source
 * that is itself rotated is refused (its online transforms would be lost). */
static int rotation(wctx *w)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", w->hf->dir);
    if (w->ck->tcfg)
        return qk_err_at(w->err, path, "transform_config", 0,
                         "the source is rotated (SpinQuant/QuaRot transforms): qk-quant --to does not rewrite it");
    if (!w->o->rotate)
        return QK_OK;
    if (w->tg.k == K_MO_NVFP4 || w->tg.k == K_MLX)
        return qk_errf(w->err, QK_EINPUT, "--rotate writes compressed-tensors' transform_config: a ct-* scheme, "
                       "or f32/f16/bf16");
    if (!w->r4) /* R4's block: the scheme's group where it is MX/NVFP4 (else qk_rot_open's default) */
        w->r4 = w->tg.k == K_CT_NVFP4 ? 16 : w->tg.k == K_CT_MXFP4 ? 32 : 0;
    int rc = qk_rot_open(&w->rot, w->hf, w->ck, w->r4, w->err);
    if (!rc)
        qk_rot_added(w->rot, w->ck, &w->lm_t, &w->r4_t);
    return rc;
}

/* --method gptq|awq|smoothquant|smoothquant+gptq: the levels or smoothed floats of the modules (ckpt_calib.c). */
static int calibrate(wctx *w, const char *src_dir)
{
    qk_ckpt_calib *c = w->o->calib;
    if (!c || c->method == QK_CALIB_RTN)
        return QK_OK;
    const char *scheme = w->tg.k == K_CT_W4A16 ? "ct-w4a16" : w->tg.k == K_CT_W8A8 ? "ct-w8a8"
                         : w->tg.k == K_DENSE ? "dense" : "";
    if (!qk_calib_supports(c->method, scheme))
        return qk_errf(w->err, QK_EINPUT, "--method %s applies to --to %s", qk_calib_method_name(c->method),
                       qk_calib_method_schemes(c->method));
    if (w->tg.astatic) /* llm-compressor observes the static scales on the layers GPTQ has already quantized */
        return qk_errf(w->err, QK_EINPUT, "--method %s with a scheme of static input scales (ct-fp8-static, "
                       "ct-w8a8-static, ct-nvfp4a4): not supported yet", qk_calib_method_name(c->method));
    const char **mods = calloc(w->nm ? w->nm : 1, sizeof *mods);
    char (*names)[1024] = malloc((w->nm ? w->nm : 1) * sizeof *names);
    qk_calib_target t = {.scheme = scheme, .modules = mods};
    int rc = mods && names ? QK_OK : oom(w->err);
    for (size_t i = 0; !rc && i < w->nm; i++)
        if (w->m[i].quant)
            mods[t.n_modules++] = qk_ckw_linear_module(w->m[i].src, names[i], sizeof names[i]);
    if (!rc) {
        scheme_of(w, &t.s, &t.so); /* dense: none (SmoothQuant alone) */
        rc = qk_ckpt_calibrate(src_dir, &t, c, &w->cres, w->err);
    }
    free(mods);
    free(names);
    return rc;
}

static void wctx_free(wctx *w)
{
    qk_outdir_abort(&w->out);
    for (size_t i = 0; w->m && i < w->nm; i++)
        for (int j = 0; j < w->m[i].np; j++)
            free(w->m[i].p[j].name);
    qk_rot_free(w->rot);
    free(w->m);
    qk_calib_res_free(&w->cres);
    free(w->act);
    free(w->wglob);
    if (w->has_ignore)
        regfree(&w->ignore_re);
    qk_ckpt_close(w->ck);
    qk_hf_close(w->hf);
}

/* Parse scheme and the options into w, and open its output directory (built
 * beside out_dir). */
static int wctx_open(wctx *w, const char *out_dir, const char *scheme, qk_err *err)
{
    int rc = parse_target(scheme, w->o, &w->tg, err);
    if (rc)
        return rc;
    if (w->o->ignore) {
        char msg[128];
        if (qk_ere_compile(&w->ignore_re, w->o->ignore, REG_EXTENDED | REG_NOSUB, msg, sizeof msg))
            return qk_errf(err, QK_EINPUT, "--ignore: bad regular expression '%s': %s", w->o->ignore, msg);
        w->has_ignore = true;
    }
    /* the output: must not exist, or be an empty directory; built beside it */
    return qk_outdir_open(&w->out, out_dir, err);
}

static int build(wctx *w, const char *src_dir);

/* --rotate with calibration (--method, or a scheme of static input scales):
 * llm-compressor's SpinQuantModifier runs before GPTQModifier, AWQModifier
 * and the activation observers, so they see the rotated model.  That model,
 * in F32 with the same R4 block (its online R4 applied by the engine from its
 * transform_config), is written to a temporary directory beside the output
 * (removed by the caller, or at exit and on SIGINT/SIGTERM/SIGHUP), and the
 * calibration runs on it.  Its weights are the floats w's writer rotates
 * itself, bit for bit (qk_rot_tensor rounds to F32 after each step). */
static int rotated_source(const wctx *w, const char *src_dir, wctx *r)
{
    static const qk_ckpt_opts ro = {.rotate = true, .quiet = true};
    *r = (wctx){.o = &ro, .err = w->err, .r4 = w->r4};
    size_t l = strlen(w->out.tmp);
    char *dst = malloc(l + 16);
    if (!dst)
        return oom(w->err);
    snprintf(dst, l + 16, "%s.rotated", w->out.tmp);
    int rc = wctx_open(r, dst, "f32", w->err);
    free(dst);
    if (!rc)
        rc = build(r, src_dir);
    return rc;
}

/* Everything between opening w's output directory and committing it. */
static int build(wctx *w, const char *src_dir)
{
    qk_err *err = w->err;
    int rc;
    if ((rc = qk_hf_open(&w->hf, src_dir, err)) || (rc = qk_ckpt_open(&w->ck, w->hf, err)))
        return rc;
    w->model_dtype = model_dtype(w);
    if ((rc = rotation(w)))
        return rc;
    if (!(w->m = calloc(w->ck->n + 2, sizeof *w->m)))
        return oom(err);
    for (size_t i = 0; i < w->ck->n && !rc; i++, w->nm++)
        rc = plan_module(w, &w->m[i], &w->ck->t[i]);
    if (!rc && w->rot && qk_rot_unties(w->rot))
        rc = plan_module(w, &w->m[w->nm++], &w->lm_t);
    if (!rc && w->rot)
        rc = plan_module(w, &w->m[w->nm++], &w->r4_t);
    if (rc)
        return rc;
    const qk_ckpt_calib *c = w->o->calib;
    if (w->rot && (w->tg.astatic || (c && c->method != QK_CALIB_RTN))) {
        wctx r;
        if ((rc = rotated_source(w, src_dir, &r))) { /* writing it: named OUT_DIR.rotated */
            qk_outdir_name_err(&r.out, err);
            qk_outdir_name_err(&w->out, err);
        } else if ((rc = calibrate(w, r.out.tmp)) || (rc = qk_ckw_static_prepare(w, r.out.tmp))) {
            const qk_outdir as_src = {.tmp = r.out.tmp, .dst = (char *)src_dir}; /* reading it: named SRC */
            qk_outdir_name_err(&as_src, err);
        }
        wctx_free(&r);
    } else if (!(rc = calibrate(w, src_dir))) {
        rc = qk_ckw_static_prepare(w, src_dir);
    }
    if (rc)
        return rc;
    if ((w->tg.k == K_CT_NVFP4 || w->tg.k == K_MO_NVFP4) && (rc = qk_ckw_nvfp4_globals(w)))
        return rc;
    uint64_t max = w->o->shard_size ? w->o->shard_size : DEFAULT_SHARD, cur = 0;
    w->nshards = 1;
    for (size_t i = 0; i < w->nm; i++) {
        if (cur && cur + w->m[i].bytes > max) {
            w->nshards++;
            cur = 0;
        }
        w->m[i].shard = w->nshards - 1;
        cur += w->m[i].bytes;
    }
    qk_progress pr;
    qk_progress_init(&pr, "quantize", w->nm, w->o->quiet);
    for (int s = 0; s < w->nshards && !rc; s++)
        rc = write_shard(w, s, &pr);
    qk_progress_end(&pr);
    if (!rc && w->nshards > 1)
        rc = write_index(w);
    if (!rc)
        rc = qk_ckw_write_config(w);
    for (int i = 0; !rc && copied[i]; i++) {
        char *src = qk_path_join(w->hf->dir, copied[i]), *dst = qk_outdir_path(&w->out, copied[i]);
        rc = src && dst ? qk_copy_file_if_exists(src, dst, err) : oom(err);
        free(src);
        free(dst);
    }
    return rc;
}

int qk_ckpt_quantize(const char *src_dir, const char *out_dir, const char *scheme, const qk_ckpt_opts *o,
                     qk_err *err)
{
    static const qk_ckpt_opts dflt;
    wctx w = {.o = o ? o : &dflt, .err = err};
    int rc = wctx_open(&w, out_dir, scheme, err);
    if (!rc)
        rc = build(&w, src_dir);
    if (!rc)
        rc = qk_outdir_commit(&w.out, err);
    if (rc)
        qk_outdir_name_err(&w.out, err);
    wctx_free(&w);
    return rc;
}
