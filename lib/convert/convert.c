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

/* GGUFWriter.add_tensor_info's split rule. */
static void assign_shards(qk_conv_plan *p, uint64_t max_size)
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

/* --outtype auto: the first tensor of two or more dimensions that is BF16
 * or F16 decides; F16 otherwise.  *first gets that tensor's type (-1: none). */
static int guess_ftype(const qk_hfdir *hf, int *first)
{
    const qk_hf_tensor **order = qk_conv_source_order(hf);
    int ft = QK_CONV_F16;
    *first = -1;
    for (size_t i = 0; order && i < hf->n_tensors; i++) {
        if (order[i]->n_dims < 2)
            continue;
        if (order[i]->type == QK_BF16 || order[i]->type == QK_F16) {
            ft = order[i]->type == QK_BF16 ? QK_CONV_BF16 : QK_CONV_F16;
            *first = order[i]->type;
            break;
        }
    }
    free(order);
    return ft;
}

/* Everything a conversion decides before writing. */
typedef struct conv {
    const qk_conv_opts *o;
    qk_hfdir *hf;
    qk_jsonv *config;
    char *cfg_path;
    const qk_conv_arch *a;
    const char *hf_arch;
    qk_conv_cfg cfg;
    qk_conv_hp hp;
    qk_conv_plan p;
    qk_conv_meta m;
    qk_conv_vocab v;
    bool have_vocab;
    int ftype;
    const char *size_label;     /* NULL: none */
} conv;

/* The vocabulary path of each converter class's set_vocab. */
static int vocab_mode(const qk_conv_arch *a)
{
    switch (a->cls) {
    case QK_CC_LLAMA: return QK_VOCAB_LLAMA;
    case QK_CC_QWEN2: return QK_VOCAB_SPM_OR_GPT2;
    case QK_CC_GEMMA2: return QK_VOCAB_GEMMA2;
    case QK_CC_GEMMA3: return QK_VOCAB_GEMMA3;
    case QK_CC_PHI3: return QK_VOCAB_PHI3;
    default: return QK_VOCAB_GPT2;
    }
}

static void conv_free(conv *c)
{
    if (c->have_vocab)
        qk_conv_vocab_free(&c->v);
    qk_conv_meta_free(&c->m);
    qk_conv_plan_free(&c->p);
    qk_conv_cfg_free(&c->cfg);
    free(c->cfg_path);
    qk_jsonv_free(c->config);
    qk_hf_close(c->hf);
    memset(c, 0, sizeof *c);
}

/* ModelBase.__init__ to prepare_metadata: read, check and plan everything;
 * nothing is written. */
static int conv_prepare(conv *c, const qk_conv_opts *o, qk_err *err)
{
    memset(c, 0, sizeof *c);
    c->o = o;
    int rc = is_dir(o->model_dir) ? 0 : qk_errf(err, QK_EINPUT, "%s: not a directory", o->model_dir);
    c->cfg_path = qk_path_join(o->model_dir, "config.json");
    struct stat cst;
    if (!rc && (!c->cfg_path || stat(c->cfg_path, &cst) != 0))
        rc = qk_errf(err, QK_EINPUT, "%s: missing config.json (the converter reads the hyper-parameters from it)",
                     o->model_dir);
    if (!rc)
        rc = qk_hf_json_load(&c->config, c->cfg_path, 0, err);
    const qk_jsonv *arches = rc ? NULL : qk_jsonv_get(c->config, "architectures");
    c->hf_arch = qk_jsonv_str(qk_jsonv_at(arches, 0));
    if (!rc && !c->hf_arch)
        rc = qk_err_at(err, c->cfg_path, "architectures", 0, "missing: the converter cannot detect the architecture");
    if (!rc && !(c->a = qk_conv_arch_find(c->hf_arch)))
        rc = qk_err_at(err, c->cfg_path, "architectures", 0, "'%s': qk-convert reproduces %s", c->hf_arch,
                       qk_conv_arch_list());
    if (!rc)
        rc = qk_conv_cfg_load(&c->cfg, c->a, c->config, c->cfg_path, &c->hp, err);
    if (!rc)
        rc = qk_hf_open(&c->hf, o->model_dir, err);
    if (!rc) {
        char *mj = qk_path_join(o->model_dir, "modules.json");
        struct stat st;
        if (mj && stat(mj, &st) == 0)
            rc = qk_errf(err, QK_EINPUT, "%s: sentence-transformers modules (pooling): not reproduced by qk-convert yet", mj);
        free(mj);
    }
    int first;
    c->ftype = o->outtype;
    if (!rc && c->ftype == QK_CONV_AUTO)
        c->ftype = guess_ftype(c->hf, &first);
    if (!rc && c->ftype == QK_CONV_SOURCE) {
        guess_ftype(c->hf, &first);
        c->ftype = first == QK_F16 ? QK_CONV_F16 : QK_CONV_F32;
    }
    if (!rc) {
        rc = qk_conv_vocab_load(&c->v, o->model_dir, c->config, (uint32_t)c->hp.vocab_size, vocab_mode(c->a), err);
        c->have_vocab = !rc;
    }
    if (!rc && !o->vocab_only)
        rc = qk_conv_plan_make(&c->p, c->hf, c->a, &c->cfg, &c->hp, c->v.n_real, c->ftype, err);
    if (!rc)
        rc = qk_conv_meta_load(&c->m, o->model_dir, c->config, c->p.n_params, err);
    if (!rc) {
        c->size_label = c->m.size_label ? c->m.size_label : c->p.size_label[0] ? c->p.size_label : NULL;
        assign_shards(&c->p, o->split_max_size);
    }
    return rc;
}

static int write_general(qk_gguf_writer *w, const qk_conv_meta *m, const char *size_label, qk_err *err)
{
    int rc = qk_gguf_w_kv_str(w, "general.type", "model", err);
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

/* The key/values of the first (or only) file, in the converter's order. */
static int write_kvs(qk_gguf_writer *w, const conv *c, qk_err *err)
{
    int rc = qk_gguf_w_kv_str(w, "general.architecture", c->a->gguf_arch, err);
    if (!rc && !c->o->vocab_only)
        rc = qk_conv_write_early(w, c->a, &c->cfg, err);
    if (!rc)
        rc = write_general(w, &c->m, c->size_label, err);
    if (!rc)
        rc = qk_conv_write_hparams(w, c->a, &c->cfg, &c->hp, c->ftype, err);
    if (!rc)
        rc = qk_gguf_w_kv_u32(w, "general.quantization_version", 2, err);
    if (!rc)
        rc = qk_conv_vocab_write(w, &c->v, err);
    return rc;
}

static int write_files(const conv *c, qk_conv_result *r, qk_err *err)
{
    const qk_conv_plan *p = &c->p;
    int rc = 0;
    qk_progress pr;
    uint64_t total = 0;
    for (size_t i = 0; i < p->n; i++)
        total += p->t[i].nbytes;
    qk_progress_init(&pr, "qk-convert", total, !c->o->progress);
    for (int s = 0; s < p->n_shards && !rc; s++) {
        qk_gguf_writer *w = qk_gguf_writer_new(3);
        if (!w)
            return qk_errf(err, QK_EIO, "qk-convert: out of memory");
        if (!p->n)
            qk_gguf_writer_no_pad_empty(w);
        if (s == 0)
            rc = write_kvs(w, c, err);
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
            rc = qk_conv_write_tensor(w, &p->t[i], c->o->threads, err);
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
    conv c;
    char *path = NULL;
    int rc = conv_prepare(&c, o, err);
    if (!rc && !(path = output_path(o, &c.m, c.size_label, c.ftype, err)))
        rc = err->code ? err->code : qk_errf(err, QK_EIO, "qk-convert: out of memory");
    if (!rc) {
        const qk_conv_plan *p = &c.p;
        snprintf(r->arch, sizeof r->arch, "%s", c.a->gguf_arch);
        snprintf(r->hf_arch, sizeof r->hf_arch, "%s", c.hf_arch);
        snprintf(r->pre, sizeof r->pre, "%s", c.v.pre);
        snprintf(r->outtype, sizeof r->outtype, "%s", ftype_name(c.ftype));
        r->n_params = p->n_params;
        r->n_tensors = p->n;
        r->n_files = (size_t)p->n_shards;
        r->files = calloc(r->n_files, sizeof *r->files);
        for (int s = 0; r->files && s < p->n_shards; s++)
            r->files[s] = p->n_shards > 1 ? shard_name(path, s, p->n_shards) : strdup(path);
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
        rc = write_files(&c, r, err);
    conv_free(&c);
    free(path);
    return rc;
}

void qk_conv_result_free(qk_conv_result *r)
{
    for (size_t i = 0; r->files && i < r->n_files; i++)
        free(r->files[i]);
    free(r->files);
    memset(r, 0, sizeof *r);
}
