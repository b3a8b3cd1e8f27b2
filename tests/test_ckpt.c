/* Quantized checkpoint layouts (formats/ckpt.h) and qk_ckpt_quantize.
 *
 * Round trips: every --to scheme is written from stories260K / stories4M,
 * read back, and each logical weight's dequantization must equal the direct
 * quantize-dequantize of the source (qk_scheme_qdq, or the MLX affine rule)
 * bit for bit; unquantized tensors must come back unchanged.  Layouts qk does
 * not write (AWQ, GPTQ, bitsandbytes, MLX fp modes, DeepSeek block FP8,
 * ModelOpt FP8, compressed-tensors act-order) are built here from known
 * integers following each format's documented packing, and must decode to
 * (q - zero) * scale computed from those integers. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/ckpt.h"
#include "lib/quant/ckpt_write.h"
#include "kernels/half.h"
#include "formats/safetensors.h"
#include "kernels/scaled.h"
#include "lib/report/tensordiff.h"
#include "formats/tensorset.h"
#include "tests/testutil.h"
#include "kernels/types.h"

#define S260 "goldens/models/stories260K/hf-f32"
#define S4M "goldens/models/stories4M/hf-f32"

static char tmproot[64];

static void setup(void)
{
    snprintf(tmproot, sizeof tmproot, "/tmp/qk-ckpt-XXXXXX");
    cr_assert_not_null(mkdtemp(tmproot));
}


static void teardown(void) { tu_rm_rf(tmproot); }

TestSuite(ckpt, .init = setup, .fini = teardown);

typedef struct opened {
    qk_hfdir *hf;
    qk_ckpt *ck;
} opened;

static opened open_dir(const char *dir)
{
    opened o = {0};
    qk_err err = {0};
    cr_assert_eq(qk_hf_open(&o.hf, dir, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_ckpt_open(&o.ck, o.hf, &err), 0, "%s", err.msg);
    return o;
}

static void close_dir(opened *o)
{
    qk_ckpt_close(o->ck);
    qk_hf_close(o->hf);
}

static float *read_all(const opened *o, const qk_ck_tensor *t)
{
    qk_err err = {0};
    float *x = malloc(t->nelem * sizeof *x + 1);
    cr_assert_eq(qk_ckpt_read(o->ck, t, x, &err), 0, "%s", err.msg);
    return x;
}

/* MLX affine quantize-dequantize of a row-major [n, k] matrix (F32 scales). */
static void mlx_qdq(const float *x, int64_t n, int64_t k, int g, int bits, float *y)
{
    uint8_t *c = malloc((size_t)k);
    float *s = malloc((size_t)(k / g) * 2 * sizeof *s);
    for (int64_t r = 0; r < n; r++) {
        qk_mlx_affine_quantize_row(x + r * k, k, g, bits, c, s, s + k / g);
        for (int64_t j = 0; j < k; j++)
            y[r * k + j] = s[j / g] * (float)c[j] + s[k / g + j / g];
    }
    free(c);
    free(s);
}

typedef struct rt {
    const char *src, *scheme;
    qk_ckpt_opts o;
    const char *qdq;       /* qk scheme of the direct quantize-dequantize, or "mlx" */
    qk_scheme_opts so;
    qk_ck_layout layout;
    int n_quant;           /* expected quantized tensors */
    const char *format;    /* expected quantcfg format */
} rt;

/* Write, read back, compare; returns the output directory (static). */
static const char *roundtrip(const rt *c)
{
    static char out[128];
    snprintf(out, sizeof out, "%s/%s-%s", tmproot, c->scheme, c->o.asym ? "asym" : "x");
    qk_err err = {0};
    cr_assert_eq(qk_ckpt_quantize(c->src, out, c->scheme, &c->o, &err), 0, "%s: %s", c->scheme, err.msg);
    opened s = open_dir(c->src), q = open_dir(out);
    const qk_scheme *sc = strcmp(c->qdq, "mlx") ? qk_scheme_by_name(c->qdq) : NULL;
    int nq = 0;
    cr_assert_eq(q.ck->n, s.ck->n);
    for (size_t i = 0; i < q.ck->n; i++) {
        const qk_ck_tensor *t = &q.ck->t[i], *st = qk_ckpt_find(s.ck, t->name);
        cr_assert_not_null(st, "%s", t->name);
        cr_assert_eq(t->nelem, st->nelem);
        float *x = read_all(&s, st), *y = read_all(&q, t), *e = malloc(t->nelem * sizeof *e + 1);
        if (t->layout == QK_CK_DENSE) {
            memcpy(e, x, t->nelem * sizeof *e);
        } else {
            cr_assert_eq(t->layout, c->layout, "%s: layout %s", t->name, qk_ck_layout_name(t->layout));
            nq++;
            qk_scheme_opts so = c->so;
            if (t->layout == QK_CK_NVFP4_CT || t->layout == QK_CK_NVFP4_MO) {
                /* the global scale is its fusion group's (q/k/v, gate/up: nvfp4_fused below) */
                char gn[512];
                snprintf(gn, sizeof gn, "%.*s.%s", (int)(strlen(t->name) - 7), t->name,
                         t->layout == QK_CK_NVFP4_CT ? "weight_global_scale" : "weight_scale_2");
                const qk_hf_tensor *g = qk_hf_find(q.hf, gn);
                cr_assert_not_null(g, "%s", gn);
                so.has_global_scale = true;
                memcpy(&so.global_scale, g->data, 4);
            }
            if (sc)
                cr_assert_eq(qk_scheme_qdq(sc, x, t->rows, t->cols, &so, e, &err), 0, "%s", err.msg);
            else
                mlx_qdq(x, t->rows, t->cols, c->o.group ? c->o.group : 64, c->so.group, e);
        }
        for (uint64_t k = 0; k < t->nelem; k++)
            cr_assert(memcmp(&e[k], &y[k], 4) == 0, "%s %s[%llu]: read %.9g, direct qdq %.9g", c->scheme, t->name,
                      (unsigned long long)k, y[k], e[k]);
        free(x), free(y), free(e);
    }
    cr_assert_eq(nq, c->n_quant, "%s: %d quantized tensors", c->scheme, nq);
    /* the config names the scheme, and every quantized module matches it */
    qk_quantcfg *cfg;
    cr_assert_eq(qk_quantcfg_open_hf(&cfg, q.hf, &err), 0, "%s", err.msg);
    cr_assert_str_eq(cfg->format, c->format);
    for (size_t i = 0; i < q.ck->n; i++) {
        const qk_ck_tensor *t = &q.ck->t[i];
        qk_qscheme qs;
        qk_quantcfg_scheme_for(cfg, t->name, t->n_dims, &qs);
        /* MLX loaders go by the presence of scales, not the config */
        if (t->layout != QK_CK_DENSE || (t->n_dims == 2 && !strstr(t->name, "embed") && strcmp(c->format, "affine")))
            cr_assert_eq(qs.quantized, t->layout != QK_CK_DENSE, "%s: config says %s", t->name, qs.desc);
    }
    qk_quantcfg_free(cfg);
    close_dir(&s);
    close_dir(&q);
    return out;
}

#define IGN_DOWN .ignore = "down_proj"

Test(ckpt, ct_fp8) { roundtrip(&(rt){S260, "ct-fp8", {0}, "fp8_e4m3", {.gran = QK_GRAN_ROW}, QK_CK_FP8, 35, "float-quantized"}); }
Test(ckpt, ct_fp8_block) { roundtrip(&(rt){S4M, "ct-fp8-block", {0}, "fp8_e4m3", {.gran = QK_GRAN_BLOCK, .block_rows = 128, .block_cols = 128}, QK_CK_FP8, 28, "float-quantized"}); }
Test(ckpt, ct_fp8_block_32) { roundtrip(&(rt){S260, "ct-fp8-block", {.group = 32, .ignore = "mlp"}, "fp8_e4m3", {.gran = QK_GRAN_BLOCK, .block_rows = 32, .block_cols = 32}, QK_CK_FP8, 20, "float-quantized"}); }
Test(ckpt, ct_w8a8) { roundtrip(&(rt){S260, "ct-w8a8", {0}, "int8", {.gran = QK_GRAN_ROW}, QK_CK_INT8, 35, "int-quantized"}); }
Test(ckpt, ct_w4a16) { roundtrip(&(rt){S4M, "ct-w4a16", {0}, "int4", {.gran = QK_GRAN_GROUP, .group = 128}, QK_CK_PACK, 28, "pack-quantized"}); }
Test(ckpt, ct_w4a16_asym_g32) { roundtrip(&(rt){S260, "ct-w4a16", {.asym = true, .group = 32, IGN_DOWN}, "uint4", {.gran = QK_GRAN_GROUP, .group = 32}, QK_CK_PACK, 30, "pack-quantized"}); }
Test(ckpt, ct_w4a16_asym_4m) { roundtrip(&(rt){S4M, "ct-w4a16", {.asym = true}, "uint4", {.gran = QK_GRAN_GROUP, .group = 128}, QK_CK_PACK, 28, "pack-quantized"}); }
Test(ckpt, ct_nvfp4) { roundtrip(&(rt){S4M, "ct-nvfp4", {0}, "nvfp4", {.nvfp4_ct = true}, QK_CK_NVFP4_CT, 28, "nvfp4-pack-quantized"}); }
Test(ckpt, ct_mxfp4) { roundtrip(&(rt){S260, "ct-mxfp4", {IGN_DOWN}, "mxfp4", {0}, QK_CK_MXFP4_CT, 30, "mxfp4-pack-quantized"}); }
Test(ckpt, modelopt_nvfp4) { roundtrip(&(rt){S4M, "modelopt-nvfp4", {0}, "nvfp4", {0}, QK_CK_NVFP4_MO, 28, "NVFP4"}); }
/* NVFP4: q/k/v_proj and gate/up_proj share one global scale, from their largest amax, as
 * llm-compressor's fused weight observers (compressed-tensors' generate_gparam: 2688 x (1 / amax) in
 * float32) and ModelOpt's export (amax / 2688) give it; the others keep their own. */
Test(ckpt, nvfp4_fused)
{
    static const char *const sch[] = {"ct-nvfp4", "modelopt-nvfp4"};
    static const char *const leaf[] = {"weight_global_scale", "weight_scale_2"};
    static const char *const mods[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                       "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    static const int group[] = {0, 0, 0, 1, 2, 2, 3};
    for (int i = 0; i < 2; i++) {
        char out[128];
        qk_err err = {0};
        snprintf(out, sizeof out, "%s/%s-fused", tmproot, sch[i]);
        cr_assert_eq(qk_ckpt_quantize(S4M, out, sch[i], &(qk_ckpt_opts){.quiet = true}, &err), 0, "%s", err.msg);
        opened s = open_dir(S4M), q = open_dir(out);
        float amax[4] = {0}, g[7];
        for (int m = 0; m < 7; m++) {
            char n[128];
            snprintf(n, sizeof n, "model.layers.1.%s.weight", mods[m]);
            const qk_ck_tensor *t = qk_ckpt_find(s.ck, n);
            float *x = read_all(&s, t);
            for (uint64_t k = 0; k < t->nelem; k++)
                amax[group[m]] = fmaxf(amax[group[m]], fabsf(x[k]));
            free(x);
            snprintf(n, sizeof n, "model.layers.1.%s.%s", mods[m], leaf[i]);
            const qk_hf_tensor *h = qk_hf_find(q.hf, n);
            cr_assert_not_null(h, "%s", n);
            memcpy(&g[m], h->data, 4);
        }
        for (int m = 0; m < 7; m++) {
            volatile float r = 1.0f / amax[group[m]];
            const float want = i ? amax[group[m]] / 2688.0f : r * 2688.0f;
            cr_assert_eq(g[m], want, "%s %s: %.9g, want %.9g", sch[i], mods[m], g[m], want);
        }
        close_dir(&s);
        close_dir(&q);
    }
}

/* MLX: so.group carries the bits; K = 172 is not a multiple of 64: down_proj stays F32 */
Test(ckpt, mlx_q4) { roundtrip(&(rt){S260, "mlx-q4", {0}, "mlx", {.group = 4}, QK_CK_MLX, 30, "affine"}); }
Test(ckpt, mlx_q3_q5_q6_q2_q8)
{
    static const char *const s[] = {"mlx-q2", "mlx-q3", "mlx-q5", "mlx-q6", "mlx-q8"};
    for (int i = 0; i < 5; i++)
        roundtrip(&(rt){S4M, s[i], {.group = 32 << (i % 3)}, "mlx", {.group = s[i][5] - '0'}, QK_CK_MLX, 28, "affine"});
}

/* Sharded output: index + shards read back like the single file. */
Test(ckpt, sharded)
{
    const char *out = roundtrip(&(rt){S4M, "ct-w4a16", {.shard_size = 1000000}, "int4", {.gran = QK_GRAN_GROUP, .group = 128}, QK_CK_PACK, 28, "pack-quantized"});
    char p[256];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", out);
    cr_assert_eq(access(p, R_OK), 0);
    opened q = open_dir(out);
    cr_assert_gt(q.hf->n_files, 2);
    close_dir(&q);
}

/* --to f32 dequantizes any recognised scheme; --to bf16 rounds. */
Test(ckpt, dequantize_to_dense)
{
    const char *src = roundtrip(&(rt){S4M, "ct-nvfp4", {0}, "nvfp4", {.nvfp4_ct = true}, QK_CK_NVFP4_CT, 28, "nvfp4-pack-quantized"});
    char q[256], f[256], b[256];
    snprintf(q, sizeof q, "%s", src);
    snprintf(f, sizeof f, "%s/f32", tmproot);
    snprintf(b, sizeof b, "%s/bf16", tmproot);
    qk_err err = {0};
    cr_assert_eq(qk_ckpt_quantize(q, f, "f32", NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_ckpt_quantize(S4M, b, "bf16", NULL, &err), 0, "%s", err.msg);
    opened a = open_dir(q), d = open_dir(f), s = open_dir(S4M), h = open_dir(b);
    cr_assert(!d.ck->quantized);
    for (size_t i = 0; i < a.ck->n; i++) {
        const qk_ck_tensor *t = &a.ck->t[i], *u = qk_ckpt_find(d.ck, t->name);
        cr_assert_not_null(u);
        cr_assert_str_eq(u->w->dtype, "F32");
        float *x = read_all(&a, t), *y = read_all(&d, u);
        cr_assert(memcmp(x, y, t->nelem * 4) == 0, "%s", t->name);
        free(x), free(y);
        const qk_ck_tensor *st = qk_ckpt_find(s.ck, t->name), *ht = qk_ckpt_find(h.ck, t->name);
        cr_assert_str_eq(ht->w->dtype, "BF16");
        x = read_all(&s, st), y = read_all(&h, ht);
        for (uint64_t k = 0; k < st->nelem; k++)
            cr_assert_eq(qk_f32_bits(y[k]), qk_f32_bits(qk_bf16_to_f32(qk_f32_to_bf16(x[k]))));
        free(x), free(y);
    }
    const qk_jsonv *td = qk_jsonv_get(h.hf->config, "torch_dtype");
    cr_assert_str_eq(qk_jsonv_str(td), "bfloat16");
    cr_assert_null(qk_jsonv_get(d.hf->config, "quantization_config"));
    close_dir(&a), close_dir(&d), close_dir(&s), close_dir(&h);
}

/* The written config.json is compressed-tensors' (sorted keys, indent 2, no
 * trailing newline) and the ignore list names the unquantized linears. */
Test(ckpt, ct_config_text)
{
    const char *out = roundtrip(&(rt){S260, "ct-mxfp4", {IGN_DOWN}, "mxfp4", {0}, QK_CK_MXFP4_CT, 30, "mxfp4-pack-quantized"});
    char p[256];
    snprintf(p, sizeof p, "%s/config.json", out);
    size_t n;
    char *txt = tu_read(p, &n);
    cr_assert_not_null(txt);
    cr_assert_neq(txt[n - 1], '\n');
    cr_assert_not_null(strstr(txt, "\n  \"quantization_config\": {\n    \"config_groups\": {\n      \"group_0\": {\n"
                                   "        \"format\": \"mxfp4-pack-quantized\",\n"));
    cr_assert_not_null(strstr(txt, "\"ignore\": [\n      \"model.layers.0.mlp.down_proj\",\n"));
    cr_assert_not_null(strstr(txt, "\"model.layers.4.mlp.down_proj\",\n      \"lm_head\"\n    ],"));
    cr_assert_not_null(strstr(txt, "\"rms_norm_eps\": 1e-05,\n  \"rope_theta\": 10000.0,"));
    free(txt);
}

/* qk-inspect's view: a quantized directory lists logical F32 weights with
 * their dequantized values, and --diff against the source measures them. */
Test(ckpt, tensorset_and_diff)
{
    const char *out = roundtrip(&(rt){S260, "ct-w8a8", {0}, "int8", {.gran = QK_GRAN_ROW}, QK_CK_INT8, 35, "int-quantized"});
    char q[256];
    snprintf(q, sizeof q, "%s", out);
    qk_err err = {0};
    qk_tensorset *ts;
    cr_assert_eq(qk_tensorset_open(&ts, q, &err), 0, "%s", err.msg);
    opened o = open_dir(q);
    cr_assert_eq(ts->n, o.ck->n);
    const qk_tensor *t = qk_tensorset_find(ts, "model.layers.2.self_attn.q_proj.weight");
    cr_assert_not_null(t);
    cr_assert_eq(t->type, QK_F32);
    cr_assert_str_eq(t->type_name, "int8");
    cr_assert_eq(t->ne[0], 64);
    const qk_ck_tensor *c = qk_ckpt_find(o.ck, t->name);
    cr_assert_eq(t->nbytes, 64 * 64 + 64 * 4); /* I8 codes + F32 channel scales */
    float *x = read_all(&o, c);
    cr_assert(memcmp(x, t->data, 64 * 64 * 4) == 0);
    free(x);
    cr_assert_null(qk_tensorset_find(ts, "model.layers.2.self_attn.q_proj.weight_scale"));
    close_dir(&o);
    qk_tensorset_close(ts);
    char *buf = NULL;
    size_t bn = 0;
    FILE *f = open_memstream(&buf, &bn);
    qk_diff_opts d = {.quiet = true, .threads = 1, .max_rmse = 1.0, .min_snr = 20};
    cr_assert_eq(qk_diff_run(q, S260, &d, f, &err), 0, "%s", err.msg);
    d.max_rmse = 0; /* a quantized tensor differs from its source */
    d.tensor_glob = "model.layers.0.self_attn.q_proj.weight";
    FILE *g = fopen("/dev/null", "w");
    int rc = qk_diff_run(q, S260, &d, g, &err);
    fclose(g);
    fclose(f);
    cr_assert_eq(rc, QK_EFAIL);
    cr_assert_not_null(strstr(buf, "35 differ"), "%s", buf);
    free(buf);
}

/* ---- writer errors ------------------------------------------------------------ */

Test(ckpt, writer_errors)
{
    char out[256];
    qk_err err = {0};
    snprintf(out, sizeof out, "%s/o", tmproot);
    cr_assert_eq(qk_ckpt_quantize(S260, out, "ct-int3", NULL, &err), QK_EINPUT);
    cr_assert_eq(qk_ckpt_quantize(S260, out, "ct-w4a16", NULL, &err), QK_EINPUT);
    cr_assert_not_null(strstr(err.msg, "not a multiple of the group size 128"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "--ignore"), "%s", err.msg);
    cr_assert_eq(qk_ckpt_quantize(S260, out, "ct-fp8", &(qk_ckpt_opts){.asym = true}, &err), QK_EINPUT);
    cr_assert_eq(qk_ckpt_quantize(S260, out, "mlx-q4", &(qk_ckpt_opts){.group = 48}, &err), QK_EINPUT);
    cr_assert_eq(qk_ckpt_quantize(S260, out, "ct-fp8", &(qk_ckpt_opts){.ignore = "("}, &err), QK_EINPUT);
    cr_assert_eq(access(out, F_OK), -1); /* nothing written */
    /* never over an input or a non-empty directory; an empty one is replaced */
    cr_assert_eq(qk_ckpt_quantize(S260, S260, "ct-fp8", NULL, &err), QK_EINPUT);
    cr_assert_not_null(strstr(err.msg, "refusing to overwrite"), "%s", err.msg);
    cr_assert_eq(mkdir(out, 0755), 0);
    cr_assert_eq(qk_ckpt_quantize(S260, out, "ct-fp8", NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_ckpt_quantize(S260, out, "ct-fp8", NULL, &err), QK_EINPUT);
    /* no temporary directory left behind */
    DIR *d = opendir(tmproot);
    struct dirent *e;
    while ((e = readdir(d)))
        cr_assert_null(strstr(e->d_name, ".tmp."), "%s left behind", e->d_name);
    closedir(d);
}

/* ---- fixtures of layouts qk does not write ------------------------------------ */

typedef struct fx {
    qk_st_writer *w;
    char dir[256];
    void *keep[64];
    int nkeep;
} fx;

static void fx_begin(fx *f, const char *name, const char *config)
{
    snprintf(f->dir, sizeof f->dir, "%s/%s", tmproot, name);
    cr_assert_eq(mkdir(f->dir, 0755), 0);
    char p[320];
    snprintf(p, sizeof p, "%s/config.json", f->dir);
    FILE *c = fopen(p, "w");
    fputs(config, c);
    fclose(c);
    f->w = qk_st_writer_new(0);
    f->nkeep = 0;
}

/* Add a tensor; data is copied and kept until fx_end. */
static void fx_add(fx *f, const char *name, const char *dtype, int nd, int64_t a, int64_t b, const void *data)
{
    qk_err err = {0};
    int64_t shape[2] = {a, b};
    const qk_st_dtype *dt = qk_st_dtype_by_name(dtype);
    size_t n = (size_t)((nd == 0 ? 1 : nd == 1 ? a : a * b) * dt->bits / 8);
    void *copy = malloc(n + 1);
    memcpy(copy, data, n);
    f->keep[f->nkeep++] = copy;
    cr_assert_eq(qk_st_w_tensor(f->w, name, dtype, nd, shape, copy, &err), 0, "%s", err.msg);
}

static void fx_end(fx *f)
{
    qk_err err = {0};
    char p[320];
    snprintf(p, sizeof p, "%s/model.safetensors", f->dir);
    cr_assert_eq(qk_st_w_begin(f->w, p, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_st_writer_finish(f->w, &err), 0, "%s", err.msg);
    qk_st_writer_free(f->w);
    for (int i = 0; i < f->nkeep; i++)
        free(f->keep[i]);
}

/* The directory of f is refused by qk_ckpt_open (code 2) with each of the needles in the message. */
static void fx_refused(const fx *f, const char *needle, const char *needle2)
{
    qk_hfdir *hf;
    qk_ckpt *ck;
    qk_err err = {0};
    cr_assert_eq(qk_hf_open(&hf, f->dir, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_ckpt_open(&ck, hf, &err), QK_EINPUT);
    cr_assert_not_null(strstr(err.msg, needle), "%s", err.msg);
    cr_assert(!needle2 || strstr(err.msg, needle2), "%s", err.msg);
    qk_hf_close(hf);
}

/* Compare the logical tensor name of dir with expected [n, k] values. */
static void expect_tensor(const char *dir, const char *name, qk_ck_layout layout, int64_t n, int64_t k,
                          const float *e)
{
    opened o = open_dir(dir);
    const qk_ck_tensor *t = qk_ckpt_find(o.ck, name);
    cr_assert_not_null(t, "%s not found", name);
    cr_assert_eq(t->layout, layout, "%s: layout %s", name, qk_ck_layout_name(t->layout));
    cr_assert_eq(t->rows, n);
    cr_assert_eq(t->cols, k);
    float *y = read_all(&o, t);
    for (int64_t i = 0; i < n * k; i++)
        cr_assert(memcmp(&y[i], &e[i], 4) == 0, "%s[%lld]: %.9g, expected %.9g", name, (long long)i, y[i], e[i]);
    /* row streaming: a middle slice equals the whole */
    qk_err err = {0};
    float *z = malloc((size_t)(k * 2) * sizeof *z);
    cr_assert_eq(qk_ckpt_read_rows(o.ck, t, n / 2, 1, z, &err), 0, "%s", err.msg);
    cr_assert(memcmp(z, y + (n / 2) * k, (size_t)k * 4) == 0);
    cr_assert_eq(qk_ckpt_read_rows(o.ck, t, n, 1, z, &err), QK_EINPUT);
    free(z);
    free(y);
    close_dir(&o);
}

static uint16_t f16(float x) { return qk_f32_to_f16(x); }

/* AutoAWQ GEMM: pack order AWQ_ORDER = [0,2,4,6,1,3,5,7] (b=4), [0,2,1,3] (b=8). */
static void awq_case(int bits)
{
    enum { N = 32, K = 96, G = 32, NG = K / G };
    int pf = 32 / bits, mask = (1 << bits) - 1;
    static const int order4[8] = {0, 2, 4, 6, 1, 3, 5, 7}, order8[4] = {0, 2, 1, 3};
    const int *order = bits == 4 ? order4 : order8;
    uint64_t rng = 7 + (uint64_t)bits;
    int q[K][N], z[NG][N];
    uint16_t s[NG][N];
    int32_t qw[K * N] = {0}, qz[NG * N] = {0}; /* [K][N/pf], [NG][N/pf] */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            q[k][n] = (int)(tu_rand(&rng) & (uint64_t)mask);
    for (int g = 0; g < NG; g++)
        for (int n = 0; n < N; n++) {
            z[g][n] = (int)(tu_rand(&rng) & (uint64_t)mask);
            s[g][n] = f16(0.001f + (float)tu_uniform(&rng) * 0.02f);
        }
    for (int k = 0; k < K; k++)
        for (int p = 0; p < N / pf; p++)
            for (int i = 0; i < pf; i++)
                qw[k * (N / pf) + p] |= (int32_t)((uint32_t)q[k][p * pf + order[i]] << (bits * i));
    for (int g = 0; g < NG; g++)
        for (int p = 0; p < N / pf; p++)
            for (int i = 0; i < pf; i++)
                qz[g * (N / pf) + p] |= (int32_t)((uint32_t)z[g][p * pf + order[i]] << (bits * i));
    float e[N * K];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            e[n * K + k] = (float)(q[k][n] - z[k / G][n]) * qk_f16_to_f32(s[k / G][n]);
    char cfg[256], name[32];
    snprintf(cfg, sizeof cfg, "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": %d, \"group_size\": %d, "
                              "\"zero_point\": true, \"version\": \"gemm\"}}", bits, G);
    snprintf(name, sizeof name, "awq%d", bits);
    fx f;
    fx_begin(&f, name, cfg);
    fx_add(&f, "model.layers.0.mlp.up_proj.qweight", "I32", 2, K, N / pf, qw);
    fx_add(&f, "model.layers.0.mlp.up_proj.qzeros", "I32", 2, NG, N / pf, qz);
    fx_add(&f, "model.layers.0.mlp.up_proj.scales", "F16", 2, NG, N, s);
    float nw[4] = {1, 2, 3, 4};
    fx_add(&f, "model.norm.weight", "F32", 1, 4, 0, nw);
    fx_end(&f);
    expect_tensor(f.dir, "model.layers.0.mlp.up_proj.weight", QK_CK_AWQ, N, K, e);
    expect_tensor(f.dir, "model.norm.weight", QK_CK_DENSE, 1, 4, nw);
}

Test(ckpt, awq_4bit) { awq_case(4); }
Test(ckpt, awq_8bit) { awq_case(8); }

/* GPTQ v1 (zeros stored minus one), act-order g_idx, or v2 without offset. */
static void gptq_case(int bits, bool v2)
{
    enum { N = 40, K = 64, G = 16, NG = K / G };
    int pf = 32 / bits, mask = (1 << bits) - 1;
    uint64_t rng = 99 + (uint64_t)bits;
    int q[K][N], z[NG][N], gi[K];
    uint16_t s[NG][N];
    int32_t qw[K][N] = {{0}}, qz[NG][N] = {{0}}, gidx[K];
    for (int k = 0; k < K; k++) { /* act-order: groups follow a permutation of the columns */
        gi[k] = (int)((k * 7 + 3) % K) / G;
        gidx[k] = gi[k];
        for (int n = 0; n < N; n++)
            q[k][n] = (int)(tu_rand(&rng) & (uint64_t)mask);
    }
    for (int g = 0; g < NG; g++)
        for (int n = 0; n < N; n++) {
            z[g][n] = 1 + (int)(tu_rand(&rng) % (uint64_t)mask); /* 1..mask: z - 1 fits */
            s[g][n] = f16(0.0005f + (float)tu_uniform(&rng) * 0.01f);
        }
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            qw[k / pf][n] |= (int32_t)((uint32_t)q[k][n] << (bits * (k % pf)));
    int nzc = (N + pf - 1) / pf;
    for (int g = 0; g < NG; g++)
        for (int n = 0; n < N; n++)
            qz[g][n / pf] |= (int32_t)((uint32_t)(z[g][n] - (v2 ? 0 : 1)) << (bits * (n % pf)));
    int32_t qzc[NG * N];
    for (int g = 0; g < NG; g++)
        memcpy(qzc + g * nzc, qz[g], (size_t)nzc * 4);
    float e[N * K];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            e[n * K + k] = (float)(q[k][n] - z[gi[k]][n]) * qk_f16_to_f32(s[gi[k]][n]);
    char cfg[300], name[32];
    snprintf(cfg, sizeof cfg, "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": %d, \"group_size\": %d, "
                              "\"desc_act\": true, \"sym\": false%s}}", bits, G,
             v2 ? ", \"checkpoint_format\": \"gptq_v2\"" : "");
    snprintf(name, sizeof name, "gptq%d%s", bits, v2 ? "v2" : "");
    fx f;
    fx_begin(&f, name, cfg);
    fx_add(&f, "model.layers.0.self_attn.o_proj.qweight", "I32", 2, K / pf, N, qw);
    fx_add(&f, "model.layers.0.self_attn.o_proj.qzeros", "I32", 2, NG, nzc, qzc);
    fx_add(&f, "model.layers.0.self_attn.o_proj.scales", "F16", 2, NG, N, s);
    fx_add(&f, "model.layers.0.self_attn.o_proj.g_idx", "I32", 1, K, 0, gidx);
    fx_end(&f);
    expect_tensor(f.dir, "model.layers.0.self_attn.o_proj.weight", QK_CK_GPTQ, N, K, e);
}

Test(ckpt, gptq_4bit_act_order) { gptq_case(4, false); }
Test(ckpt, gptq_8bit_act_order) { gptq_case(8, false); }
Test(ckpt, gptq_v2) { gptq_case(4, true); }

/* bitsandbytes 4-bit: blocks over the flattened tensor, high nibble first. */
static void bnb4_case(bool nested, bool nf4)
{
    enum { N = 7, K = 50, NE = N * K, BS = 64, NB = (NE + BS - 1) / BS, NBS = 4, NNB = (NB + NBS - 1) / NBS };
    uint64_t rng = 5 + nested + 2 * nf4;
    uint8_t codes[NE], packed[(NE + 1) / 2] = {0}, am8[NB];
    float am[NB], nam[NNB], nqm[256], qm[16];
    for (int i = 0; i < 16; i++)
        qm[i] = nf4 ? qk_nf4_values[i] : qk_bnb_fp4_values[i];
    for (int i = 0; i < NE; i++) {
        codes[i] = (uint8_t)(tu_rand(&rng) & 15);
        packed[i / 2] |= (uint8_t)(i % 2 ? codes[i] : codes[i] << 4);
    }
    for (int i = 0; i < 256; i++)
        nqm[i] = (float)(i - 128) / 128.0f;
    for (int j = 0; j < NNB; j++)
        nam[j] = 0.01f + (float)j * 0.003f;
    float off = 0.0421f;
    for (int j = 0; j < NB; j++) {
        am8[j] = (uint8_t)(tu_rand(&rng) & 255);
        am[j] = nested ? nqm[am8[j]] * nam[j / NBS] + off : 0.5f + (float)tu_uniform(&rng);
    }
    float e[NE];
    for (int i = 0; i < NE; i++)
        e[i] = qm[codes[i]] * am[i / BS];
    char qs[400], name[32];
    if (nested)
        snprintf(qs, sizeof qs, "{\"quant_type\": \"%s\", \"blocksize\": %d, \"dtype\": \"bfloat16\", \"shape\": [%d, %d], "
                               "\"nested_blocksize\": %d, \"nested_dtype\": \"float32\", \"nested_offset\": %.9g}",
                 nf4 ? "nf4" : "fp4", BS, N, K, NBS, off);
    else
        snprintf(qs, sizeof qs, "{\"quant_type\": \"%s\", \"blocksize\": %d, \"dtype\": \"float16\", \"shape\": [%d, %d]}",
                 nf4 ? "nf4" : "fp4", BS, N, K);
    snprintf(name, sizeof name, "bnb%d%d", nested, nf4);
    fx f;
    fx_begin(&f, name, "{\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_4bit\": true, "
                       "\"bnb_4bit_quant_type\": \"nf4\", \"bnb_4bit_use_double_quant\": true}}");
    const char *m = "model.layers.0.mlp.gate_proj.weight";
    char nm[128];
    fx_add(&f, m, "U8", 2, (NE + 1) / 2, 1, packed);
    snprintf(nm, sizeof nm, "%s.absmax", m);
    fx_add(&f, nm, nested ? "U8" : "F32", 1, NB, 0, nested ? (const void *)am8 : (const void *)am);
    snprintf(nm, sizeof nm, "%s.quant_map", m);
    fx_add(&f, nm, "F32", 1, 16, 0, qm);
    if (nested) {
        snprintf(nm, sizeof nm, "%s.nested_absmax", m);
        fx_add(&f, nm, "F32", 1, NNB, 0, nam);
        snprintf(nm, sizeof nm, "%s.nested_quant_map", m);
        fx_add(&f, nm, "F32", 1, 256, 0, nqm);
    }
    snprintf(nm, sizeof nm, "%s.quant_state.bitsandbytes__%s", m, nf4 ? "nf4" : "fp4");
    fx_add(&f, nm, "U8", 1, (int64_t)strlen(qs), 0, qs);
    fx_end(&f);
    float ee[NE]; /* nested absmax is computed in f32 the same way */
    memcpy(ee, e, sizeof ee);
    expect_tensor(f.dir, m, QK_CK_BNB4, N, K, ee);
}

Test(ckpt, bnb_nf4) { bnb4_case(false, true); }
Test(ckpt, bnb_nf4_double_quant) { bnb4_case(true, true); }
Test(ckpt, bnb_fp4_double_quant) { bnb4_case(true, false); }

Test(ckpt, bnb_llm_int8)
{
    enum { N = 12, K = 20 };
    int8_t q[N * K];
    float scb[N], e[N * K];
    uint64_t rng = 11;
    for (int i = 0; i < N * K; i++)
        q[i] = (int8_t)(tu_rand(&rng) & 255);
    for (int r = 0; r < N; r++)
        scb[r] = 0.1f + (float)r;
    for (int i = 0; i < N * K; i++)
        e[i] = (float)q[i] * scb[i / K] * 7.874015718698502e-3f;
    fx f;
    fx_begin(&f, "llmint8", "{\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_8bit\": true}}");
    fx_add(&f, "model.layers.1.mlp.down_proj.weight", "I8", 2, N, K, q);
    fx_add(&f, "model.layers.1.mlp.down_proj.SCB", "F32", 1, N, 0, scb);
    uint8_t fmt = 0;
    fx_add(&f, "model.layers.1.mlp.down_proj.weight_format", "U8", 0, 0, 0, &fmt);
    fx_end(&f);
    expect_tensor(f.dir, "model.layers.1.mlp.down_proj.weight", QK_CK_BNB8, N, K, e);
}

/* MLX mxfp4 mode: E2M1 codes in U32 words (LSB first), E8M0 scales per 32. */
Test(ckpt, mlx_mxfp4)
{
    enum { N = 6, K = 64 };
    uint64_t rng = 3;
    uint8_t codes[N * K], sc[N * K / 32];
    uint32_t wq[N * K / 8] = {0};
    float e[N * K];
    for (int i = 0; i < N * K / 32; i++)
        sc[i] = (uint8_t)(118 + tu_rand(&rng) % 16);
    for (int i = 0; i < N * K; i++) {
        codes[i] = (uint8_t)(tu_rand(&rng) & 15);
        wq[i / 8] |= (uint32_t)codes[i] << (4 * (i % 8));
        e[i] = qk_elem_decode(QK_ELEM_FP4_E2M1, codes[i]) * ldexpf(1.0f, sc[i / 32] - 127);
    }
    fx f;
    fx_begin(&f, "mlxfp", "{\"quantization\": {\"group_size\": 32, \"bits\": 4, \"mode\": \"mxfp4\"}}");
    fx_add(&f, "model.layers.0.self_attn.v_proj.weight", "U32", 2, N, K / 8, wq);
    fx_add(&f, "model.layers.0.self_attn.v_proj.scales", "U8", 2, N, K / 32, sc);
    fx_end(&f);
    expect_tensor(f.dir, "model.layers.0.self_attn.v_proj.weight", QK_CK_MLX, N, K, e);
}

/* DeepSeek-style FP8 (quant_method fp8): weight_scale_inv per 128x128
 * block, edge blocks partial. */
Test(ckpt, fp8_block_partial)
{
    enum { N = 200, K = 300, BR = 2, BC = 3 };
    static uint8_t q[N * K];
    static float e[N * K];
    float s[BR * BC];
    uint64_t rng = 17;
    for (int i = 0; i < BR * BC; i++)
        s[i] = 0.001f * (float)(i + 1);
    for (int i = 0; i < N * K; i++) {
        q[i] = (uint8_t)(tu_rand(&rng) & 255);
        if ((q[i] & 0x7F) == 0x7F)
            q[i] = 0x12; /* no NaN codes */
        e[i] = qk_elem_decode(QK_ELEM_FP8_E4M3, q[i]) * s[(i / K / 128) * BC + (i % K) / 128];
    }
    fx f;
    fx_begin(&f, "dsfp8", "{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", "
                          "\"activation_scheme\": \"dynamic\", \"weight_block_size\": [128, 128]}}");
    fx_add(&f, "model.layers.3.mlp.gate_proj.weight", "F8_E4M3", 2, N, K, q);
    fx_add(&f, "model.layers.3.mlp.gate_proj.weight_scale_inv", "F32", 2, BR, BC, s);
    fx_end(&f);
    expect_tensor(f.dir, "model.layers.3.mlp.gate_proj.weight", QK_CK_FP8, N, K, e);
}

/* ModelOpt FP8: one weight_scale and an input_scale (not listed). */
Test(ckpt, modelopt_fp8)
{
    enum { N = 8, K = 16 };
    uint8_t q[N * K];
    float e[N * K], s = 0.0123f, is = 0.5f;
    for (int i = 0; i < N * K; i++) {
        q[i] = (uint8_t)(i * 5 + 1);
        e[i] = qk_elem_decode(QK_ELEM_FP8_E4M3, q[i]) * s;
    }
    char p[400];
    fx f;
    fx_begin(&f, "mofp8", "{\"architectures\": [\"LlamaForCausalLM\"]}");
    snprintf(p, sizeof p, "%s/hf_quant_config.json", f.dir);
    FILE *h = fopen(p, "w");
    fputs("{\"producer\": {\"name\": \"modelopt\"}, \"quantization\": {\"quant_algo\": \"FP8\", \"exclude_modules\": [\"lm_head\"]}}", h);
    fclose(h);
    fx_add(&f, "model.layers.0.mlp.up_proj.weight", "F8_E4M3", 2, N, K, q);
    fx_add(&f, "model.layers.0.mlp.up_proj.weight_scale", "F32", 0, 0, 0, &s);
    fx_add(&f, "model.layers.0.mlp.up_proj.input_scale", "F32", 0, 0, 0, &is);
    fx_end(&f);
    expect_tensor(f.dir, "model.layers.0.mlp.up_proj.weight", QK_CK_FP8, N, K, e);
    opened o = open_dir(f.dir);
    cr_assert_eq(o.ck->n, 1);
    close_dir(&o);
}

/* compressed-tensors pack-quantized with act-order weight_g_idx and
 * asymmetric zero points packed along N (pack_to_int32 packed_dim=0): 4 bits
 * as 8 values a word (every release), 3 bits as 10 values a word (up to
 * 0.12) or as a dense bit stream straddling words (0.13 on). */
static void put_bits(int32_t *words, int64_t base, int64_t stride, int64_t j, int bits, bool dense, uint32_t v)
{
    int64_t pf = 32 / bits, word = dense ? j * bits / 32 : j / pf, sh = dense ? j * bits % 32 : (j % pf) * bits;
    words[base + word * stride] |= (int32_t)(v << sh);
    if (sh + bits > 32)
        words[base + (word + 1) * stride] |= (int32_t)(v >> (32 - sh));
}

static void ct_pack_case(int bits, bool dense, const char *name)
{
    enum { N = 21, K = 64, G = 16, NG = K / G };
    int off = 1 << (bits - 1), pf = 32 / bits;
    int W = dense ? (K * bits + 31) / 32 : (K + pf - 1) / pf, ZR = dense ? (N * bits + 31) / 32 : (N + pf - 1) / pf;
    int q[N][K], z[NG * N], gi[K];
    float s[N * NG], e[N * K];
    int32_t wp[N * K] = {0}, zp[N * NG] = {0}, gidx[K];
    int64_t shape[2] = {N, K};
    uint64_t rng = 23 + (uint64_t)bits;
    for (int k = 0; k < K; k++)
        gidx[k] = gi[k] = (k * 5) % NG;
    for (int n = 0; n < N; n++)
        for (int g = 0; g < NG; g++) {
            z[n * NG + g] = (int)(tu_rand(&rng) % (uint64_t)(2 * off)) - off;
            s[n * NG + g] = 0.01f * (float)(1 + (n + g) % 7);
            put_bits(zp, g, NG, n, bits, dense, (uint32_t)(z[n * NG + g] + off));
        }
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            q[n][k] = (int)(tu_rand(&rng) % (uint64_t)(2 * off)) - off;
            put_bits(wp, (int64_t)n * W, 1, k, bits, dense, (uint32_t)(q[n][k] + off));
            e[n * K + k] = (float)(q[n][k] - z[n * NG + gi[k]]) * s[n * NG + gi[k]];
        }
    char cfg[600];
    snprintf(cfg, sizeof cfg, "{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\", "
             "\"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": %d, "
             "\"type\": \"int\", \"symmetric\": false, \"strategy\": \"group\", \"group_size\": %d, "
             "\"actorder\": \"group\"}}}, \"ignore\": [\"lm_head\"]}}", bits, G);
    fx f;
    fx_begin(&f, name, cfg);
    fx_add(&f, "model.layers.0.mlp.up_proj.weight_packed", "I32", 2, N, W, wp);
    fx_add(&f, "model.layers.0.mlp.up_proj.weight_scale", "F32", 2, N, NG, s);
    fx_add(&f, "model.layers.0.mlp.up_proj.weight_zero_point", "I32", 2, ZR, NG, zp);
    fx_add(&f, "model.layers.0.mlp.up_proj.weight_g_idx", "I32", 1, K, 0, gidx);
    fx_add(&f, "model.layers.0.mlp.up_proj.weight_shape", "I64", 1, 2, 0, shape);
    fx_end(&f);
    expect_tensor(f.dir, "model.layers.0.mlp.up_proj.weight", QK_CK_PACK, N, K, e);
}

Test(ckpt, ct_pack_g_idx_4bit) { ct_pack_case(4, false, "ctpack4"); }
Test(ckpt, ct_pack_g_idx_3bit_words) { ct_pack_case(3, false, "ctpack3w"); }
Test(ckpt, ct_pack_g_idx_3bit_stream) { ct_pack_case(3, true, "ctpack3s"); }

/* Parts that do not fit the logical shape are input errors naming the tensor. */
Test(ckpt, bad_parts)
{
    int32_t qw[16 * 2] = {0}, qz[2] = {0};
    uint16_t s[3 * 16] = {0};
    fx f;
    fx_begin(&f, "badawq", "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 8}}");
    fx_add(&f, "m.qweight", "I32", 2, 16, 2, qw);
    fx_add(&f, "m.qzeros", "I32", 2, 1, 2, qz);
    fx_add(&f, "m.scales", "F16", 2, 3, 16, s); /* 16 / 8 = 2 groups, not 3 */
    fx_end(&f);
    fx_refused(&f, "m.scales", NULL);

    uint8_t w[8] = {0}, bad[3] = {'{', 'x', '}'};
    float qm[16] = {0}, am[1] = {1};
    fx_begin(&f, "badbnb", "{\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_4bit\": true}}");
    fx_add(&f, "m.weight", "U8", 2, 8, 1, w);
    fx_add(&f, "m.weight.absmax", "F32", 1, 1, 0, am);
    fx_add(&f, "m.weight.quant_map", "F32", 1, 16, 0, qm);
    fx_add(&f, "m.weight.quant_state.bitsandbytes__nf4", "U8", 1, 3, 0, bad);
    fx_end(&f);
    fx_refused(&f, "bad JSON", NULL);
}

/* A quantized module that also keeps a float weight: the extra tensor is named
 * (and without any config, since no layout has both). */
Test(ckpt, extra_float_weight_beside_qweight)
{
    int32_t qw[16 * 2] = {0}, qz[2 * 2] = {0};
    uint16_t s[2 * 16] = {0};
    float w[16 * 16] = {0};
    const char *const configs[] = {
        "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 8}}", "{}"};
    for (int c = 0; c < 2; c++) {
        fx f;
        char name[32];
        snprintf(name, sizeof name, "extra%d", c);
        fx_begin(&f, name, configs[c]);
        fx_add(&f, "m.qweight", "I32", 2, 16, 2, qw);
        fx_add(&f, "m.qzeros", "I32", 2, 2, 2, qz);
        fx_add(&f, "m.scales", "F16", 2, 2, 16, s);
        fx_add(&f, "m.weight", "F32", 2, 16, 16, w);
        fx_end(&f);
        fx_refused(&f, "m.weight at offset ", "extra tensor: m is stored as awq (qweight), and also has a F32 weight");
    }
}

/* NVFP4 and MXFP4 scales are FP8 / E8M0 codes whatever the model's dtype: a
 * BF16 model quantizes (it failed with "scale type 30 is not available") and
 * its quantized modules read back finite. */
Test(ckpt, fp4_schemes_of_a_bf16_model)
{
    static const char *const s[] = {"ct-nvfp4", "modelopt-nvfp4", "ct-mxfp4"};
    for (int i = 0; i < 3; i++) {
        char out[300];
        snprintf(out, sizeof out, "%s/bf16-%s", tmproot, s[i]);
        qk_err err = {0};
        cr_assert_eq(qk_ckpt_quantize("goldens/models/stories260K/hf-bf16", out, s[i],
                                      &(qk_ckpt_opts){.ignore = "mlp"}, &err), 0, "%s: %s", s[i], err.msg);
        opened o = open_dir(out);
        const qk_ck_tensor *t = qk_ckpt_find(o.ck, "model.layers.0.self_attn.q_proj.weight");
        cr_assert(t && t->layout != QK_CK_DENSE, "%s", s[i]);
        float *x = read_all(&o, t);
        for (uint64_t k = 0; k < t->nelem; k++)
            cr_assert(isfinite(x[k]));
        free(x);
        close_dir(&o);
    }
}

/* gpt-oss's experts against {"quant_method": "mxfp4"} (ckpt_claim.c): blocks need their
 * scales, and blocks beside a float PROJ is an extra tensor under any config; the
 * claim over float experts and modules_to_not_convert are tests/cli_reliability.sh's. */
Test(ckpt, gpt_oss_mxfp4_experts)
{
    static const uint8_t blocks[4 * 16] = {0}, scales[4] = {127, 127, 127, 127};
    static const float w[4 * 4] = {0};
    const char *mx = "{\"quantization_config\": {\"quant_method\": \"mxfp4\"}}";
    const char *E = "model.layers.0.mlp.experts.";
    char b[96], s[96], d[96];
    snprintf(b, sizeof b, "%sdown_proj_blocks", E);
    snprintf(s, sizeof s, "%sdown_proj_scales", E);
    snprintf(d, sizeof d, "%sdown_proj", E);
    fx f;
    fx_begin(&f, "mx-noscales", mx);
    fx_add(&f, b, "U8", 2, 4, 16, blocks);
    fx_end(&f);
    fx_refused(&f, "down_proj_blocks at offset ", "MXFP4 blocks without their scales: no model.layers.0.mlp.experts.down_proj_scales");
    const char *const configs[] = {mx, "{}"};
    for (int c = 0; c < 2; c++) {
        char name[32];
        snprintf(name, sizeof name, "mx-extra%d", c);
        fx_begin(&f, name, configs[c]);
        fx_add(&f, b, "U8", 2, 4, 16, blocks);
        fx_add(&f, s, "U8", 1, 4, 0, scales);
        fx_add(&f, d, "F32", 2, 4, 4, w);
        fx_end(&f);
        fx_refused(&f, "down_proj at offset ", "extra tensor: model.layers.0.mlp.experts is stored as MXFP4 "
                   "(down_proj_blocks), and also has a float down_proj (F32)");
    }
    fx_begin(&f, "mx-ok", mx);
    fx_add(&f, b, "U8", 2, 4, 16, blocks);
    fx_add(&f, s, "U8", 1, 4, 0, scales);
    fx_end(&f);
    qk_hfdir *hf;
    qk_ckpt *ck;
    qk_err err = {0};
    cr_assert_eq(qk_hf_open(&hf, f.dir, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_ckpt_open(&ck, hf, &err), 0, "%s", err.msg);
    qk_ckpt_close(ck);
    qk_hf_close(hf);
}
