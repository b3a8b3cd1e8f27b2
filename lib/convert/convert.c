/* convert.c - the conversion (convert.h): ModelBase.__init__ (tensor index,
 * --outtype auto), prepare_tensors (names, types), prepare_metadata
 * (general.*, hyper-parameters, file name), set_vocab, and gguf-py's
 * GGUFWriter (key order, split plan, shard names) of llama.cpp's
 * convert_hf_to_gguf.py / conversion/base.py at d32676d. */
#include "lib/convert/convert.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/hfnames.h"
#include "kernels/types.h"
#include "lib/convert/conv_impl.h"
#include "lib/convert/conv_meta.h"
#include "lib/convert/conv_vocab.h"
#include "lib/core/files.h"
#include "lib/core/progress.h"

int qk_conv_outtype_parse(const char *s)
{
    static const struct { const char *name; int v; } t[] = {
        {"f32", QK_CONV_F32}, {"f16", QK_CONV_F16}, {"bf16", QK_CONV_BF16}, {"q8_0", QK_CONV_Q8_0}, {"auto", QK_CONV_AUTO},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i].name))
            return t[i].v;
    return -2;
}

int qk_conv_parse_size(const char *s, uint64_t *out)
{
    size_t n = strlen(s);
    uint64_t mul = 1;
    if (n && (s[n - 1] == 'K' || s[n - 1] == 'M' || s[n - 1] == 'G')) {
        mul = s[n - 1] == 'K' ? 1000 : s[n - 1] == 'M' ? 1000000 : 1000000000;
        n--;
    }
    if (!n)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]) || v > UINT64_MAX / 10 / mul)
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v * mul;
    return 0;
}

static const char *ftype_name(int ftype)
{
    switch (ftype) {
    case QK_CONV_F32: return "F32";
    case QK_CONV_F16: return "F16";
    case QK_CONV_BF16: return "BF16";
    default: return "Q8_0";
    }
}

static int ftype_tensor_type(int ftype)
{
    switch (ftype) {
    case QK_CONV_F32: return QK_F32;
    case QK_CONV_F16: return QK_F16;
    case QK_CONV_BF16: return QK_BF16;
    default: return QK_Q8_0;
    }
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const qk_hf_tensor *const *)a)->name, (*(const qk_hf_tensor *const *)b)->name);
}

/* The tensors as ModelBase.index_tensors lists them: files in sorted
 * order, names sorted within a file (SafetensorsLocal). */
static const qk_hf_tensor **converter_order(const qk_hfdir *hf)
{
    const qk_hf_tensor **order = malloc((hf->n_tensors ? hf->n_tensors : 1) * sizeof *order);
    if (!order)
        return NULL;
    size_t k = 0;
    for (int f = 0; f < hf->n_files; f++) {
        size_t first = k;
        for (size_t i = 0; i < hf->n_tensors; i++)
            if (hf->tensors[i].file == f)
                order[k++] = &hf->tensors[i];
        qsort(order + first, k - first, sizeof *order, cmp_name);
    }
    return order;
}

/* TextModel.filter_tensors / the skipped names of prepare_tensors. */
static bool dropped(const char *n)
{
    static const char *const prefixes[] = {"mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.", "resampler.",
                                           "sound_encoder.", "sound_projection.", "speech_embeddings."};
    static const char *const inside[] = {"visual.", "vision.", "audio.", "talker.", "vision_", "audio_", "token2wav.",
                                         "code2wav.", "projector.", "pre_mm_projector_norm", "image_newline",
                                         "view_seperator", "patch_embed", "patch_embedding", "patch_merger.",
                                         "patch_merge_mlp.", "model.connector."};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(n, prefixes[i], strlen(prefixes[i])))
            return true;
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++)
        if (strstr(n, inside[i]))
            return true;
    size_t l = strlen(n);
    static const char *const ends[] = {".attention.masked_bias", ".attention.bias", ".rotary_emb.inv_freq"};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
        if (l >= strlen(ends[i]) && !strcmp(n + l - strlen(ends[i]), ends[i]))
            return true;
    return false;
}

typedef struct plan {
    qk_conv_tensor *t;
    size_t n;
    int n_shards;
    const qk_hf_tensor **experts;  /* the stacked tensors' sources */
} plan;

/* prepare_tensors: the tensors in the converter's order (files in sorted
 * order, names sorted within a file), mapped and typed. */
/* The output type and bytes of a planned tensor (prepare_tensors' rules). */
static void type_tensor(qk_conv_tensor *t, int ftype)
{
    size_t nl = strlen(t->name);
    bool f32 = t->n_dims <= 1 || (nl > 12 && !strcmp(t->name + nl - 12, "_norm.weight")) ||
               strstr(t->name, ".ffn_gate_inp.") || (nl < 7 || strcmp(t->name + nl - 7, ".weight") != 0);
    t->type = f32 ? QK_F32 : ftype_tensor_type(ftype);
    if (t->type == QK_Q8_0 && t->ne[0] % 32)
        t->type = QK_F16; /* QuantError: falls back to F16 */
    uint64_t rows = 1;
    for (uint32_t d = 1; d < t->n_dims; d++)
        rows *= (uint64_t)t->ne[d];
    t->nbytes = qk_row_size(t->type, t->ne[0]) * rows;
}

/* model.layers.N.block_sparse_moe.experts.X.wK.weight: layer, expert, K. */
static bool expert_name(const char *name, long *layer, long *x, int *w)
{
    int end = 0;
    char wk[3] = "";
    if (sscanf(name, "model.layers.%ld.block_sparse_moe.experts.%ld.w%1[123].weight%n", layer, x, wk, &end) != 3 ||
        name[end] != '\0')
        return false;
    *w = wk[0] - '1';
    return true;
}

/* prepare_tensors: the tensors in the converter's order (files in sorted
 * order, names sorted within a file), mapped and typed; Mixtral's experts
 * stacked per layer when its last one comes (LlamaModel.modify_tensors). */
static int make_plan(const qk_hfdir *hf, const qk_conv_arch *a, const qk_conv_hp *hp, int ftype, plan *p,
                     int64_t *n_params, qk_err *err)
{
    size_t k = hf->n_tensors;
    const qk_hf_tensor **order = converter_order(hf);
    p->t = calloc(hf->n_tensors ? hf->n_tensors : 1, sizeof *p->t);
    int64_t ne_ = hp->n_expert > 0 ? hp->n_expert : 1;
    const qk_hf_tensor **ex = a->experts ? calloc((size_t)(hp->n_layer * 3 * ne_) + 1, sizeof *ex) : NULL;
    int *ex_count = a->experts ? calloc((size_t)hp->n_layer + 1, sizeof *ex_count) : NULL;
    if (!order || !p->t || (a->experts && (!ex || !ex_count))) {
        free(order);
        free(ex);
        free(ex_count);
        return qk_errf(err, QK_EIO, "qk-convert: out of memory");
    }
    int rc = 0;
    *n_params = 0;
    for (size_t i = 0; i < k && !rc; i++) {
        const qk_hf_tensor *s = order[i];
        const char *name = s->name;
        if (dropped(name))
            continue;
        if (strstr(name, "language_model."))
            rc = qk_errf(err, QK_EINPUT, "%s: tensor '%s': multimodal checkpoints are not reproduced by qk-convert", hf->dir, name);
        if (!rc && s->type != QK_F32 && s->type != QK_F16 && s->type != QK_BF16)
            rc = qk_errf(err, QK_EINPUT, "%s: tensor '%s' is %s: qk-convert reads F32, F16 and BF16 safetensors", hf->dir,
                         name, s->dtype);
        if (rc)
            break;
        long layer, x;
        int w;
        if (a->experts && expert_name(name, &layer, &x, &w)) {
            if (layer < 0 || layer >= hp->n_layer || x < 0 || x >= ne_ || s->n_dims != 2) {
                rc = qk_errf(err, QK_EINPUT, "%s: tensor '%s': expert or layer out of range", hf->dir, name);
                break;
            }
            ex[(layer * 3 + w) * ne_ + x] = s;
            if (++ex_count[layer] < 3 * ne_)
                continue;
            /* the layer's experts are all here: w1, w2, w3 stacked */
            static const char *const names[3] = {"ffn_gate_exps", "ffn_down_exps", "ffn_up_exps"};
            for (int k3 = 0; k3 < 3 && !rc; k3++) {
                qk_conv_tensor *t = &p->t[p->n];
                const qk_hf_tensor **srcs = &ex[(layer * 3 + k3) * ne_];
                for (long e = 0; e < ne_ && !rc; e++)
                    if (!srcs[e] || srcs[e]->ne[0] != srcs[0]->ne[0] || srcs[e]->ne[1] != srcs[0]->ne[1] ||
                        srcs[e]->type != srcs[0]->type)
                        rc = qk_errf(err, QK_EINPUT, "%s: layer %ld: experts of different shapes or types", hf->dir, layer);
                if (rc)
                    break;
                snprintf(t->name, sizeof t->name, "blk.%ld.%s.weight", layer, names[k3]);
                t->src = srcs[0];
                t->srcs = srcs;
                t->n_src = (int)ne_;
                t->n_dims = 3;
                t->ne[0] = srcs[0]->ne[0];
                t->ne[1] = srcs[0]->ne[1];
                t->ne[2] = ne_;
                t->ne[3] = 1;
                type_tensor(t, ftype);
                *n_params += (int64_t)(srcs[0]->nelem * (uint64_t)ne_);
                p->n++;
            }
            continue;
        }
        qk_conv_tensor *t = &p->t[p->n];
        int perm;
        if (qk_hf_to_gguf_name(name, t->name, sizeof t->name, &perm))
            rc = qk_errf(err, QK_EINPUT, "%s: can not map tensor '%s' (the converter refuses it)", hf->dir, name);
        if (rc)
            break;
        t->src = s;
        t->n_src = 1;
        t->n_dims = (uint32_t)(s->n_dims ? s->n_dims : 1);
        for (int d = 0; d < 4; d++)
            t->ne[d] = s->ne[d];
        if (a->permute_qk && perm == QK_PERM_Q)
            t->perm_heads = (int)hp->n_head;
        else if (a->permute_qk && perm == QK_PERM_K)
            t->perm_heads = (int)(hp->n_head != hp->n_head_kv ? hp->n_head_kv : hp->n_head);
        if (t->perm_heads > 0 && (s->shape[0] % (2 * t->perm_heads)))
            rc = qk_errf(err, QK_EINPUT, "%s: tensor '%s': %lld rows do not split into %d heads", hf->dir, name,
                         (long long)s->shape[0], t->perm_heads);
        type_tensor(t, ftype);
        *n_params += (int64_t)s->nelem;
        p->n++;
    }
    for (int64_t l = 0; a->experts && l < hp->n_layer && !rc; l++)
        if (ex_count[l] && ex_count[l] < 3 * ne_)
            rc = qk_errf(err, QK_EINPUT, "%s: layer %lld: unprocessed experts (the converter refuses them)", hf->dir,
                         (long long)l);
    free(order);
    free(ex_count);
    p->experts = ex;
    return rc;
}

/* GGUFWriter.add_tensor_info's split rule. */
static void assign_shards(plan *p, uint64_t max_size)
{
    uint64_t cur = 0;
    size_t in_shard = 0;
    int shard = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (in_shard > 0 && max_size && cur + p->t[i].nbytes > max_size) {
            shard++;
            cur = 0;
            in_shard = 0;
        }
        p->t[i].shard = shard;
        cur += p->t[i].nbytes;
        in_shard++;
    }
    p->n_shards = shard + 1;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* fname_out: MODEL_DIR (or an --outfile directory) / default name, or the
 * --outfile template filled in. */
static char *output_path(const qk_conv_opts *o, const qk_conv_meta *m, const char *size_label, int ftype, qk_err *err)
{
    const char *target = o->outfile ? o->outfile : o->model_dir;
    if (is_dir(target)) {
        char *name = o->vocab_only ? qk_conv_default_name(m, NULL, NULL, "vocab")
                                   : qk_conv_default_name(m, size_label, ftype_name(ftype), NULL);
        char *file = malloc(strlen(name) + 6);
        if (file)
            sprintf(file, "%s.gguf", name);
        free(name);
        char *full = file ? qk_path_join(target, file) : NULL;
        free(file);
        return full;
    }
    const char *slash = strrchr(target, '/');
    char *filled = qk_conv_fill_template(slash ? slash + 1 : target, ftype_name(ftype), err);
    if (!filled)
        return NULL;
    char *full = malloc((slash ? (size_t)(slash - target) + 1 : 0) + strlen(filled) + 1);
    if (full)
        sprintf(full, "%.*s%s", slash ? (int)(slash - target) + 1 : 0, target, filled);
    free(filled);
    return full;
}

/* format_shard_names: {stem}-{i:05d}-of-{n:05d}.gguf beside the path. */
static char *shard_name(const char *path, int i, int n)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - path) : strlen(path);
    char *s = malloc(strlen(path) + 32);
    if (s)
        sprintf(s, "%.*s-%05d-of-%05d.gguf", (int)stem, path, i + 1, n);
    return s;
}

static int write_general(qk_gguf_writer *w, const qk_conv_arch *a, const qk_conv_meta *m, const char *size_label,
                         qk_err *err)
{
    int rc = qk_gguf_w_kv_str(w, "general.architecture", a->gguf_arch, err);
    if (!rc)
        rc = qk_gguf_w_kv_str(w, "general.type", "model", err);
    if (!rc && m->has_top_k)
        rc = qk_gguf_w_kv_i32(w, "general.sampling.top_k", (int32_t)m->top_k, err);
    if (!rc && m->has_top_p)
        rc = qk_gguf_w_kv_f32(w, "general.sampling.top_p", (float)m->top_p, err);
    if (!rc && m->has_min_p)
        rc = qk_gguf_w_kv_f32(w, "general.sampling.min_p", (float)m->min_p, err);
    if (!rc && m->has_temp)
        rc = qk_gguf_w_kv_f32(w, "general.sampling.temp", (float)m->temp, err);
    if (!rc)
        rc = qk_gguf_w_kv_str(w, "general.name", m->name, err);
    if (!rc && m->version)
        rc = qk_gguf_w_kv_str(w, "general.version", m->version, err);
    if (!rc && m->organization)
        rc = qk_gguf_w_kv_str(w, "general.organization", m->organization, err);
    if (!rc && m->finetune)
        rc = qk_gguf_w_kv_str(w, "general.finetune", m->finetune, err);
    if (!rc && m->basename)
        rc = qk_gguf_w_kv_str(w, "general.basename", m->basename, err);
    if (!rc && size_label)
        rc = qk_gguf_w_kv_str(w, "general.size_label", size_label, err);
    return rc;
}

static int write_vocab(qk_gguf_writer *w, const qk_conv_vocab *v, qk_err *err)
{
    int rc = 0;
    if (v->add_space_prefix >= 0)
        rc = qk_gguf_w_kv_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix, err);
    if (!rc)
        rc = qk_gguf_w_kv_str(w, "tokenizer.ggml.model", "gpt2", err);
    if (!rc)
        rc = qk_gguf_w_kv_str(w, "tokenizer.ggml.pre", v->pre, err);
    if (!rc)
        rc = qk_gguf_w_kv_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens, v->n, err);
    if (!rc)
        rc = qk_gguf_w_kv_arr(w, "tokenizer.ggml.token_type", QK_GGUF_I32, v->types, v->n, err);
    if (!rc && v->n_merges)
        rc = qk_gguf_w_kv_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, v->n_merges, err);
    for (int i = 0; i < v->n_ids && !rc; i++)
        rc = qk_gguf_w_kv_u32(w, v->ids[i].key, v->ids[i].id, err);
    for (int i = 0; i < v->n_flags && !rc; i++)
        rc = qk_gguf_w_kv_bool(w, v->flags[i].key, v->flags[i].v, err);
    if (!rc && v->chat_template)
        rc = qk_gguf_w_kv_str(w, "tokenizer.chat_template", v->chat_template, err);
    if (!rc && v->lowercase >= 0)
        rc = qk_gguf_w_kv_bool(w, "tokenizer.ggml.normalizer.lowercase", v->lowercase, err);
    if (!rc && v->strip_accents >= 0)
        rc = qk_gguf_w_kv_bool(w, "tokenizer.ggml.normalizer.strip_accents", v->strip_accents, err);
    return rc;
}

/* --outtype auto: the first tensor of two or more dimensions that is BF16
 * or F16 decides; F16 otherwise. */
static int guess_ftype(const qk_hfdir *hf)
{
    const qk_hf_tensor **order = converter_order(hf);
    int ft = QK_CONV_F16;
    if (!order)
        return ft;
    for (size_t i = 0; i < hf->n_tensors; i++) {
        if (order[i]->n_dims < 2)
            continue;
        if (order[i]->type == QK_BF16) {
            ft = QK_CONV_BF16;
            break;
        }
        if (order[i]->type == QK_F16) {
            ft = QK_CONV_F16;
            break;
        }
    }
    free(order);
    return ft;
}

static int write_files(const qk_conv_opts *o, const plan *p, const qk_conv_arch *a, const qk_conv_hp *hp,
                       const qk_conv_meta *m, const char *size_label, const qk_conv_vocab *v, int ftype,
                       qk_conv_result *r, qk_err *err)
{
    int rc = 0;
    qk_progress pr;
    uint64_t total = 0;
    for (size_t i = 0; i < p->n; i++)
        total += p->t[i].nbytes;
    qk_progress_init(&pr, "qk-convert", total, !o->progress);
    for (int s = 0; s < p->n_shards && !rc; s++) {
        qk_gguf_writer *w = qk_gguf_writer_new(3);
        if (!w)
            return qk_errf(err, QK_EIO, "qk-convert: out of memory");
        if (!p->n)
            qk_gguf_writer_no_pad_empty(w);
        if (s == 0) {
            rc = write_general(w, a, m, size_label, err);
            if (!rc)
                rc = qk_conv_write_hparams(w, a, hp, ftype, err);
            if (!rc)
                rc = qk_gguf_w_kv_u32(w, "general.quantization_version", 2, err);
            if (!rc)
                rc = write_vocab(w, v, err);
        }
        if (!rc && p->n_shards > 1) {
            rc = qk_gguf_w_kv_u16(w, "split.no", (uint16_t)s, err);
            if (!rc)
                rc = qk_gguf_w_kv_u16(w, "split.count", (uint16_t)p->n_shards, err);
            if (!rc)
                rc = qk_gguf_w_kv_i32(w, "split.tensors.count", (int32_t)p->n, err);
        }
        for (size_t i = 0; i < p->n && !rc; i++) {
            const qk_conv_tensor *t = &p->t[i];
            if (t->shard == s)
                rc = qk_gguf_w_tensor(w, t->name, t->type, t->n_dims, t->ne, err);
        }
        if (!rc)
            rc = qk_gguf_w_begin(w, r->files[s], err);
        for (size_t i = 0; i < p->n && !rc; i++) {
            if (p->t[i].shard != s)
                continue;
            rc = qk_conv_write_tensor(w, &p->t[i], o->threads, err);
            r->n_bytes += p->t[i].nbytes;
            qk_progress_add(&pr, p->t[i].nbytes);
        }
        if (!rc)
            rc = qk_gguf_writer_finish(w, err);
        qk_gguf_writer_free(w);
    }
    qk_progress_end(&pr);
    return rc;
}

int qk_convert(const qk_conv_opts *o, qk_conv_result *r, qk_err *err)
{
    memset(r, 0, sizeof *r);
    qk_hfdir *hf = NULL;
    plan p = {0};
    qk_conv_meta m = {0};
    qk_conv_vocab v = {0};
    bool have_vocab = false;
    char *path = NULL;
    int rc = is_dir(o->model_dir) ? 0 : qk_errf(err, QK_EINPUT, "%s: not a directory", o->model_dir);
    char *cfg_path = qk_path_join(o->model_dir, "config.json");
    struct stat cst;
    if (!rc && (!cfg_path || stat(cfg_path, &cst) != 0))
        rc = qk_errf(err, QK_EINPUT, "%s: missing config.json (the converter reads the hyper-parameters from it)",
                     o->model_dir);
    qk_jsonv *config = NULL;
    if (!rc)
        rc = qk_hf_json_load(&config, cfg_path, 0, err);
    const qk_jsonv *arches = rc ? NULL : qk_jsonv_get(config, "architectures");
    const char *hf_arch = qk_jsonv_str(qk_jsonv_at(arches, 0));
    const qk_conv_arch *a = NULL;
    if (!rc && !hf_arch)
        rc = qk_err_at(err, cfg_path, "architectures", 0, "missing: the converter cannot detect the architecture");
    if (!rc && !(a = qk_conv_arch_find(hf_arch)))
        rc = qk_err_at(err, cfg_path, "architectures", 0,
                       "'%s': qk-convert reproduces LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM and "
                       "Qwen3ForCausalLM",
                       hf_arch);
    qk_conv_hp hp;
    if (!rc)
        rc = qk_conv_hparams(config, cfg_path, &hp, err);
    if (!rc)
        rc = qk_hf_open(&hf, o->model_dir, err);
    if (!rc) {
        char *mj = qk_path_join(o->model_dir, "modules.json");
        struct stat st;
        if (mj && stat(mj, &st) == 0)
            rc = qk_errf(err, QK_EINPUT, "%s: sentence-transformers modules (pooling): not reproduced by qk-convert yet", mj);
        free(mj);
    }
    int ftype = o->outtype;
    if (!rc && ftype == QK_CONV_AUTO)
        ftype = guess_ftype(hf);
    int64_t n_params = 0;
    if (!rc && !o->vocab_only)
        rc = make_plan(hf, a, &hp, ftype, &p, &n_params, err);
    if (!rc)
        rc = qk_conv_meta_load(&m, o->model_dir, config, n_params, err);
    char size_label[48] = "";
    const char *sl = m.size_label;
    if (!rc && !sl && n_params > 0) {
        /* get_total_parameter_count / size_label: experts as COUNTxSIZE */
        int64_t shared = 0, expert = 0, expert_sum = 0, n_exp_tensors = 0;
        for (size_t i = 0; i < p.n; i++) {
            const qk_conv_tensor *t = &p.t[i];
            int64_t size = 1;
            for (uint32_t d = 0; d < t->n_dims; d++)
                size *= t->ne[d];
            if (strstr(t->name, "_exps.") && t->n_dims >= 3) {
                expert += size / t->ne[2];
                expert_sum += t->ne[2];
                n_exp_tensors++;
            } else {
                shared += size;
            }
        }
        if (n_exp_tensors) {
            char part[32];
            qk_conv_size_label(shared + expert, part, sizeof part);
            snprintf(size_label, sizeof size_label, "%lldx%s", (long long)(expert_sum / n_exp_tensors), part);
        } else {
            qk_conv_size_label(n_params, size_label, sizeof size_label);
        }
        sl = size_label;
    }
    if (!rc && !(path = output_path(o, &m, sl, ftype, err)))
        rc = err->code ? err->code : qk_errf(err, QK_EIO, "qk-convert: out of memory");
    if (!rc) {
        rc = qk_conv_vocab_load(&v, o->model_dir, config, (uint32_t)hp.vocab_size, a->llama_class, err);
        have_vocab = !rc;
    }
    if (!rc) {
        assign_shards(&p, o->split_max_size);
        snprintf(r->arch, sizeof r->arch, "%s", a->gguf_arch);
        snprintf(r->hf_arch, sizeof r->hf_arch, "%s", hf_arch);
        snprintf(r->pre, sizeof r->pre, "%s", v.pre);
        snprintf(r->outtype, sizeof r->outtype, "%s", ftype_name(ftype));
        r->n_params = n_params;
        r->n_tensors = p.n;
        r->n_files = (size_t)p.n_shards;
        r->files = calloc(r->n_files, sizeof *r->files);
        for (int s = 0; r->files && s < p.n_shards; s++)
            r->files[s] = p.n_shards > 1 ? shard_name(path, s, p.n_shards) : strdup(path);
        for (size_t s = 0; r->files && s < r->n_files && !rc; s++)
            if (!r->files[s])
                rc = qk_errf(err, QK_EIO, "qk-convert: out of memory");
        if (!r->files)
            rc = qk_errf(err, QK_EIO, "qk-convert: out of memory");
        for (size_t s = 0; s < r->n_files && !rc; s++)
            if (qk_same_file(r->files[s], o->model_dir))
                rc = qk_errf(err, QK_EINPUT, "%s: output would overwrite an input", r->files[s]);
    }
    if (!rc && !o->dry_run)
        rc = write_files(o, &p, a, &hp, &m, sl, &v, ftype, r, err);
    if (have_vocab)
        qk_conv_vocab_free(&v);
    qk_conv_meta_free(&m);
    free(p.t);
    free(p.experts);
    free(path);
    free(cfg_path);
    qk_jsonv_free(config);
    qk_hf_close(hf);
    return rc;
}

void qk_conv_result_free(qk_conv_result *r)
{
    for (size_t i = 0; r->files && i < r->n_files; i++)
        free(r->files[i]);
    free(r->files);
    memset(r, 0, sizeof *r);
}
