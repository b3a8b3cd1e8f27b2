/* quant_model.c - llama-quantize-compatible model quantization: presets,
 * option parsing helpers and the plan (per-tensor types and every check).
 * See quant_model.h; the type rules themselves are in quant_rules.c, the
 * output metadata and the streaming writer in quant_write.c. */
#include "lib/quant/quant_model.h"

#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/quant/quant_plan.h"
#include "lib/quant/quant_rules.h"
#include "kernels/types.h"
#include "lib/core/ere.h"

#define FTYPE_GUESSED 1024   /* LLAMA_FTYPE_GUESSED */

/* ---- presets (tools/quantize/quantize.cpp QUANT_OPTIONS, same order) ---------- */

static const qk_quant_preset presets[] = {
    {"Q1_0", 40, " 1.125 bpw quantization"},
    {"Q2_0", 41, " 2.25 bpw quantization (group 64)"},
    {"Q4_0", 2, " 4.34G, +0.4685 ppl @ Llama-3-8B"},
    {"Q4_1", 3, " 4.78G, +0.4511 ppl @ Llama-3-8B"},
    {"MXFP4_MOE", 38, " MXFP4 MoE"},
    {"Q5_0", 8, " 5.21G, +0.1316 ppl @ Llama-3-8B"},
    {"Q5_1", 9, " 5.65G, +0.1062 ppl @ Llama-3-8B"},
    {"IQ2_XXS", 19, " 2.06 bpw quantization"},
    {"IQ2_XS", 20, " 2.31 bpw quantization"},
    {"IQ2_S", 28, " 2.5  bpw quantization"},
    {"IQ2_M", 29, " 2.7  bpw quantization"},
    {"IQ1_S", 24, " 1.56 bpw quantization"},
    {"IQ1_M", 31, " 1.75 bpw quantization"},
    {"TQ1_0", 36, " 1.69 bpw ternarization"},
    {"TQ2_0", 37, " 2.06 bpw ternarization"},
    {"Q2_K", 10, " 2.96G, +3.5199 ppl @ Llama-3-8B"},
    {"Q2_K_S", 21, " 2.96G, +3.1836 ppl @ Llama-3-8B"},
    {"IQ3_XXS", 23, " 3.06 bpw quantization"},
    {"IQ3_S", 26, " 3.44 bpw quantization"},
    {"IQ3_M", 27, " 3.66 bpw quantization mix"},
    {"Q3_K", 12, "alias for Q3_K_M"},
    {"IQ3_XS", 22, " 3.3 bpw quantization"},
    {"Q3_K_S", 11, " 3.41G, +1.6321 ppl @ Llama-3-8B"},
    {"Q3_K_M", 12, " 3.74G, +0.6569 ppl @ Llama-3-8B"},
    {"Q3_K_L", 13, " 4.03G, +0.5562 ppl @ Llama-3-8B"},
    {"IQ4_NL", 25, " 4.50 bpw non-linear quantization"},
    {"IQ4_XS", 30, " 4.25 bpw non-linear quantization"},
    {"Q4_K", 15, "alias for Q4_K_M"},
    {"Q4_K_S", 14, " 4.37G, +0.2689 ppl @ Llama-3-8B"},
    {"Q4_K_M", 15, " 4.58G, +0.1754 ppl @ Llama-3-8B"},
    {"Q5_K", 17, "alias for Q5_K_M"},
    {"Q5_K_S", 16, " 5.21G, +0.1049 ppl @ Llama-3-8B"},
    {"Q5_K_M", 17, " 5.33G, +0.0569 ppl @ Llama-3-8B"},
    {"Q6_K", 18, " 6.14G, +0.0217 ppl @ Llama-3-8B"},
    {"Q8_0", 7, " 7.96G, +0.0026 ppl @ Llama-3-8B"},
    {"F16", 1, "14.00G, +0.0020 ppl @ Mistral-7B"},
    {"BF16", 32, "14.00G, -0.0050 ppl @ Mistral-7B"},
    {"F32", 0, "26.00G              @ 7B"},
    {"COPY", 0, "only copy tensors, no quantizing"},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

const qk_quant_preset *qk_quant_presets(size_t *n)
{
    *n = N_PRESETS;
    return presets;
}

const qk_quant_preset *qk_quant_preset_find(const char *s)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcasecmp(presets[i].name, s) == 0)
            return &presets[i];
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end)
        return NULL;
    for (size_t i = 0; i < N_PRESETS; i++)
        if (presets[i].ftype == v)
            return &presets[i];
    return NULL;
}

int qk_ftype_default_type(int ftype)
{
    static const struct { int ftype, type; } map[] = {
        {2, QK_Q4_0}, {3, QK_Q4_1}, {8, QK_Q5_0}, {9, QK_Q5_1}, {7, QK_Q8_0}, {1, QK_F16},
        {32, QK_BF16}, {0, QK_F32}, {40, QK_Q1_0}, {41, QK_Q2_0}, {38, QK_MXFP4},
        {21, QK_Q2_K}, {10, QK_Q2_K}, {22, QK_IQ3_S}, {11, QK_Q3_K}, {12, QK_Q3_K}, {13, QK_Q3_K},
        {14, QK_Q4_K}, {15, QK_Q4_K}, {16, QK_Q5_K}, {17, QK_Q5_K}, {18, QK_Q6_K}, {36, QK_TQ1_0},
        {37, QK_TQ2_0}, {19, QK_IQ2_XXS}, {20, QK_IQ2_XS}, {28, QK_IQ2_XS}, {29, QK_IQ2_S},
        {23, QK_IQ3_XXS}, {24, QK_IQ1_S}, {31, QK_IQ1_M}, {25, QK_IQ4_NL}, {30, QK_IQ4_XS},
        {26, QK_IQ3_S}, {27, QK_IQ3_S},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].ftype == ftype)
            return map[i].type;
    return -1;
}

/* ---- option parsing ------------------------------------------------------------ */

int qk_quant_parse_kvo(const char *s, qk_quant_kvo *o, qk_err *err)
{
    memset(o, 0, sizeof *o);
    const char *sep = strchr(s, '=');
    if (!sep || sep - s >= 128 || sep == s)
        return qk_errf(err, QK_EINPUT, "--override-kv: malformed '%s' (want KEY=TYPE:VALUE)", s);
    memcpy(o->key, s, (size_t)(sep - s));
    const char *v = sep + 1;
    if (!strncmp(v, "int:", 4)) {
        o->tag = QK_KVO_INT;
        o->i = atol(v + 4);
    } else if (!strncmp(v, "float:", 6)) {
        o->tag = QK_KVO_FLOAT;
        o->f = atof(v + 6);
    } else if (!strncmp(v, "bool:", 5)) {
        o->tag = QK_KVO_BOOL;
        if (!strcmp(v + 5, "true") || !strcmp(v + 5, "false"))
            o->b = v[5] == 't';
        else
            return qk_errf(err, QK_EINPUT, "--override-kv: '%s': bool must be true or false", s);
    } else if (!strncmp(v, "str:", 4)) {
        o->tag = QK_KVO_STR;
        if (strlen(v + 4) > 127)
            return qk_errf(err, QK_EINPUT, "--override-kv: '%s': a string value is at most 127 bytes", s);
        strcpy(o->s, v + 4);
    } else {
        return qk_errf(err, QK_EINPUT, "--override-kv: '%s': TYPE must be int, float, bool or str", s);
    }
    return 0;
}

/* ECMAScript (std::regex) -> POSIX extended: \d and \D have no ERE spelling. */
static char *to_posix_regex(const char *p)
{
    size_t n = strlen(p);
    char *out = malloc(n * 4 + 1);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\\' && (p[i + 1] == 'd' || p[i + 1] == 'D')) {
            const char *cls = p[i + 1] == 'd' ? "[0-9]" : "[^0-9]";
            memcpy(out + k, cls, strlen(cls));
            k += strlen(cls);
            i++;
        } else {
            out[k++] = p[i];
            if (p[i] == '\\' && i + 1 < n)
                out[k++] = p[++i];
        }
    }
    out[k] = 0;
    return out;
}

static int compile_pattern(regex_t *re, const char *pattern, qk_err *err)
{
    char *px = to_posix_regex(pattern);
    if (!px)
        return qk_errf(err, QK_EIO, "out of memory");
    char msg[128];
    int rc = qk_ere_compile(re, px, REG_EXTENDED | REG_NOSUB, msg, sizeof msg);
    free(px);
    if (rc)
        return qk_errf(err, QK_EINPUT, "--tensor-type: pattern '%.200s': %s", pattern, msg);
    return 0;
}

int qk_quant_parse_tt(const char *s, qk_quant_tt *o, qk_err *err)
{
    o->pattern = NULL;
    const char *sep = strchr(s, '=');
    if (!sep)
        return qk_errf(err, QK_EINPUT, "--tensor-type: malformed '%s' (want PATTERN=TYPE)", s);
    if (sep == s)
        return qk_errf(err, QK_EINPUT, "--tensor-type: '%s': missing tensor name", s);
    if (!sep[1])
        return qk_errf(err, QK_EINPUT, "--tensor-type: '%s': missing quantization type", s);
    const qk_type_traits *t = qk_type_by_name(sep + 1);
    if (!t || !t->in_gguf || t->id >= QK_GGML_TYPE_COUNT)
        return qk_errf(err, QK_EINPUT, "--tensor-type: '%s': invalid ggml type '%s'", s, sep + 1);
    o->pattern = strndup(s, (size_t)(sep - s));
    if (!o->pattern)
        return qk_errf(err, QK_EIO, "out of memory");
    for (char *c = o->pattern; *c; c++) /* llama-quantize lower-cases the name part */
        *c = (char)tolower((unsigned char)*c);
    o->type = t->id;
    regex_t re;
    int rc = compile_pattern(&re, o->pattern, err);
    if (rc) {
        free(o->pattern);
        o->pattern = NULL;
        return rc;
    }
    regfree(&re);
    return 0;
}

int qk_quant_parse_tt_list(const char *text, size_t n, qk_quant_tt **tt, size_t *n_tt, qk_err *err)
{
    for (size_t i = 0; i < n;) {
        while (i < n && isspace((unsigned char)text[i]))
            i++;
        size_t j = i;
        while (j < n && !isspace((unsigned char)text[j]))
            j++;
        if (j == i)
            break;
        qk_quant_tt *p = realloc(*tt, (*n_tt + 1) * sizeof *p);
        char *entry = strndup(text + i, j - i); /* a NUL ends it, as c_str() does */
        if (p)
            *tt = p;
        if (!p || !entry) {
            free(entry);
            return qk_errf(err, QK_EIO, "out of memory");
        }
        int rc = qk_quant_parse_tt(entry, &p[*n_tt], err);
        free(entry);
        if (rc)
            return rc;
        (*n_tt)++;
        i = j;
    }
    return 0;
}

/* ---- model facts --------------------------------------------------------------- */

static const qk_quant_kvo *find_kvo(const qk_quant_opts *o, const char *key)
{
    for (size_t i = o->n_kvo; i-- > 0;)
        if (!strcmp(o->kvo[i].key, key))
            return &o->kvo[i];
    return NULL;
}

/* An integer hyperparameter "ARCH.SUFFIX": scalar, or element 0 of an array
 * (get_key_or_arr); --override-kv int values apply as in the model loader. */
static bool hparam(const qk_gguf *g, const qk_quant_opts *o, const char *arch, const char *suffix,
                   uint64_t *out)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const qk_quant_kvo *ov = find_kvo(o, key);
    if (ov && ov->tag == QK_KVO_INT) {
        *out = (uint64_t)ov->i;
        return true;
    }
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    if (!kv)
        return false;
    if (kv->v.type == QK_GGUF_ARRAY) {
        if (kv->v.arr.n == 0 || kv->v.arr.elem == QK_GGUF_STRING || kv->v.arr.elem == QK_GGUF_ARRAY)
            return false;
        *out = (uint64_t)qk_gguf_arr_i64(&kv->v, 0);
        return true;
    }
    return qk_gguf_get_uint(g, key, out);
}

/* llama.cpp's LLM_TYPE_70B (the only model type the rules look at). */
static bool is_70b(const char *arch, uint64_t n_layer, uint64_t n_expert, uint64_t n_head, uint64_t n_head_kv)
{
    if (!strcmp(arch, "llama"))
        return n_expert != 8 && n_layer == 80 && n_head != n_head_kv;
    if (!strcmp(arch, "deci") || !strcmp(arch, "olmo") || !strcmp(arch, "qwen2"))
        return n_layer == 80;
    if (!strcmp(arch, "jais2"))
        return n_layer == 68;
    return false;
}

static int model_facts(const qk_gguf *g, const qk_quant_opts *o, qk_qrules *r, char *arch,
                       size_t archlen, uint64_t *n_layer, qk_err *err)
{
    qk_str a;
    if (!qk_gguf_get_str(g, "general.architecture", &a) || a.len == 0 || a.len >= archlen)
        return qk_err_at(err, g->path, "general.architecture", 0, "missing: not a llama.cpp model");
    memcpy(arch, a.ptr, (size_t)a.len);
    arch[a.len] = 0;
    if (!hparam(g, o, arch, "block_count", n_layer) || *n_layer == 0 || *n_layer > 512)
        return qk_err_at(err, g->path, "block_count", 0, "missing or invalid %s.block_count", arch);
    uint64_t n_expert = 0, n_head = 0, n_head_kv;
    hparam(g, o, arch, "expert_count", &n_expert);
    hparam(g, o, arch, "attention.head_count", &n_head);
    if (!hparam(g, o, arch, "attention.head_count_kv", &n_head_kv))
        n_head_kv = n_head;
    r->falcon = !strcmp(arch, "falcon");
    r->n_expert = (uint32_t)n_expert;
    r->n_layer = (int)*n_layer;
    r->n_gqa = n_head_kv ? (uint32_t)(n_head / n_head_kv) : 0;
    r->is_70b = is_70b(arch, *n_layer, n_expert, n_head, n_head_kv);
    return 0;
}

/* ---- tensor order and names ------------------------------------------------------ */

static int layer_from_prefix(const char *s)
{
    int l = -1;
    if (sscanf(s, "blk.%d.", &l) != 1)
        return -1;
    return l;
}

/* llama_model_loader's weights_map order: by "blk.N." layer (-1 for others),
 * then by name. */
static int cmp_weight_order(const void *a, const void *b)
{
    const qk_quant_item *x = a, *y = b;
    int la = layer_from_prefix(x->name), lb = layer_from_prefix(y->name);
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* --keep-split: by input shard, then by data offset. */
static int cmp_shard_order(const void *a, const void *b)
{
    const qk_quant_item *x = a, *y = b;
    if (x->src->shard != y->src->shard)
        return x->src->shard < y->src->shard ? -1 : 1;
    return (x->src->offset > y->src->offset) - (x->src->offset < y->src->offset);
}

/* First "blk.<digits>." in name: *pos, *len of the digits; false if none. */
static bool find_block(const char *name, size_t *pos, size_t *len)
{
    for (const char *p = strstr(name, "blk."); p; p = strstr(p + 1, "blk.")) {
        size_t n = 0;
        while (isdigit((unsigned char)p[4 + n]))
            n++;
        if (n > 0 && p[4 + n] == '.') {
            *pos = (size_t)(p - name) + 4;
            *len = n;
            return true;
        }
    }
    return false;
}

typedef struct prune_map {
    int orig[1024];     /* orig block -> new block, -1 pruned, -2 not seen yet */
    int next_id;
} prune_map;

/* remap_layer(): renumber blocks around the pruned ones, in tensor order.
 * Returns false when the tensor is pruned. */
static bool remap_layer(char name[64], const qk_quant_opts *o, prune_map *pm, qk_err *err, int *rc)
{
    size_t pos, len;
    *rc = 0;
    if (o->n_prune == 0 || !find_block(name, &pos, &len))
        return true;
    long blk = len > 6 ? 1000000 : strtol(name + pos, NULL, 10);
    if (blk >= 1024) {
        *rc = qk_errf(err, QK_EINPUT, "%s: block number too large for --prune-layers", name);
        return false;
    }
    if (pm->orig[blk] == -2) {
        bool pruned = false;
        for (size_t i = 0; i < o->n_prune; i++)
            pruned |= o->prune[i] == blk;
        if (pruned) {
            pm->orig[blk] = -1;
        } else if (blk < o->prune[0]) {
            pm->orig[blk] = (int)blk;
            pm->next_id = (int)blk + 1;
        } else {
            pm->orig[blk] = pm->next_id++;
        }
    }
    if (pm->orig[blk] == -1)
        return false;
    char tmp[80];
    snprintf(tmp, sizeof tmp, "%.*s%d%s", (int)pos, name, pm->orig[blk], name + pos + len);
    if (strlen(tmp) >= 64) {
        *rc = qk_errf(err, QK_EINPUT, "%s: renamed tensor name too long", name);
        return false;
    }
    strcpy(name, tmp);
    return true;
}

/* ---- the plan ------------------------------------------------------------------ */

void qk_quant_plan_free(qk_quant_plan *p)
{
    if (!p)
        return;
    plan_priv *pv = priv_of(p);
    for (size_t i = 0; i < pv->n_re; i++)
        regfree(&pv->re[i]);
    free(pv->re);
    free(pv->tt_type);
    for (size_t i = 0; p->t && i < p->n; i++)
        free(p->t[i].data);
    free(p->t);
    free(p);
}

/* general.file_type for COPY: the input's, or guessed from the most common
 * tensor type (llama_model_loader), marked GUESSED. */
static uint32_t copy_file_type(const qk_gguf *g, const qk_quant_item *t, size_t n)
{
    uint64_t ft;
    if (qk_gguf_get_uint(g, "general.file_type", &ft))
        return (uint32_t)ft;
    static const int type_ftype[][2] = {
        {QK_F32, 0}, {QK_F16, 1}, {QK_BF16, 32}, {QK_Q4_0, 2}, {QK_Q4_1, 3}, {QK_Q5_0, 8},
        {QK_Q5_1, 9}, {QK_Q8_0, 7}, {QK_Q2_K, 10}, {QK_Q3_K, 12}, {QK_Q4_K, 15}, {QK_Q5_K, 17},
        {QK_Q6_K, 18}, {QK_TQ1_0, 36}, {QK_TQ2_0, 37}, {QK_IQ2_XXS, 19}, {QK_IQ2_XS, 20},
        {QK_IQ2_S, 28}, {QK_IQ3_XXS, 23}, {QK_IQ1_S, 24}, {QK_IQ1_M, 31}, {QK_IQ4_NL, 25},
        {QK_IQ4_XS, 30}, {QK_IQ3_S, 26}, {QK_NVFP4, 39}, {QK_Q1_0, 40}, {QK_Q2_0, 41},
    };
    uint32_t count[QK_TYPE_MAX] = {0}, best = 0;
    int best_type = QK_F32;
    for (size_t i = 0; i < n; i++) {
        int ty = t[i].src->type;
        if (ty < 0 || ty >= QK_TYPE_MAX)
            continue;
        if (best < ++count[ty]) {
            best = count[ty];
            best_type = ty;
        }
    }
    for (size_t i = 0; i < sizeof type_ftype / sizeof type_ftype[0]; i++)
        if (type_ftype[i][0] == best_type)
            return (uint32_t)(type_ftype[i][1] | FTYPE_GUESSED);
    return FTYPE_GUESSED; /* ALL_F32 */
}

/* Checks on one tensor that will be converted and encoded (llama-quant's
 * main loop, done up front so that nothing is written on bad input). */
static int check_encode(qk_quant_plan *p, qk_quant_item *it, bool requires, qk_err *err)
{
    const qk_gguf_tensor *s = it->src;
    const qk_type_traits *st = qk_type_get(s->type), *dt = qk_type_get(it->type);
    const qk_imatrix *im = p->o.imatrix;
    if (im) {
        /* looked up under the tensor's input name (remap_imatrix undoes --prune-layers) */
        char orig[64];
        snprintf(orig, sizeof orig, "%.*s", (int)s->name.len, s->name.ptr);
        const qk_imatrix_entry *e = qk_imatrix_find(im, orig);
        if (e) {
            uint64_t want = (uint64_t)s->ne[0] * (uint64_t)s->ne[2];
            bool embd = !strcmp(it->name, "token_embd.weight") || !strcmp(it->name, "per_layer_token_embd.weight");
            if (e->n == want)
                it->imatrix = e->values;
            else if (!embd)
                return qk_errf(err, QK_EINPUT,
                               "importance matrix: %s has %llu values, the tensor needs %llu "
                               "(an imatrix for another model?)", orig, (unsigned long long)e->n,
                               (unsigned long long)want);
        }
    }
    if (!it->imatrix && requires && !p->o.calibrated)
        return qk_errf(err, QK_EINPUT, "%s: the importance matrix has no data for this tensor, which "
                       "%s requires", it->name, dt->name);
    if (!it->imatrix && dt->needs_imatrix)
        return qk_errf(err, QK_EINPUT, "%s: %s cannot be encoded without an importance matrix (--imatrix)",
                       it->name, dt->name);
    if (!is_float_type(s->type)) {
        if (!st || !st->is_quantized || !st->to_float)
            return qk_errf(err, QK_EINPUT, "%s: cannot convert tensor type %s", it->name,
                           st ? st->name : "?");
        if (!p->o.allow_requantize)
            return qk_errf(err, QK_EINPUT, "%s: requantizing from type %s is disabled (use --allow-requantize)",
                           it->name, st->name);
    }
    if (!dt->quantize || !dt->in_gguf)
        return qk_errf(err, QK_EINPUT, "%s: no encoder for %s", it->name, dt->name);
    return 0;
}

static int plan_types(qk_quant_plan *p, qk_qrules *r, int default_type, qk_err *err)
{
    bool have_im = p->o.imatrix != NULL || p->o.calibrated;
    for (size_t i = 0; i < p->n; i++) {
        qk_quant_item *it = &p->t[i];
        const qk_gguf_tensor *s = it->src;
        const char *why;
        it->type = s->type;
        if (!qk_qrules_allows(r, it->name, s->ne, &why)) {
            snprintf(it->why, sizeof it->why, "%s", why);
        } else {
            int rc = qk_qrules_type(r, it->name, s->ne, default_type, &it->type, it->why, sizeof it->why, err);
            if (rc)
                return rc;
            bool requires = qk_qrules_requires_imatrix(it->name, it->type, p->o.ftype);
            if (requires && !have_im) {
                if (!p->o.dry_run)
                    return qk_errf(err, QK_EINPUT, "this quantization requires an importance matrix "
                                   "(--imatrix): %s would be %s", it->name, qk_type_get(it->type)->name);
                p->would_need_imatrix = true;
            }
            it->quantize = it->type != s->type;
            if (it->quantize && !p->o.dry_run && (rc = check_encode(p, it, requires, err)))
                return rc;
        }
        it->bytes = (uint64_t)qk_row_size(it->type, s->ne[0]) * nrows_of(s);
        if (it->bytes == 0 && s->nbytes && it->type == s->type)
            it->bytes = s->nbytes;
        if (it->imatrix)
            p->n_imatrix_used++;
        p->bytes_in += s->nbytes;
        p->bytes_out += it->bytes;
        p->n_elements += (uint64_t)s->ne[0] * nrows_of(s);
    }
    p->n_fallback = r->n_fallback;
    return 0;
}

static int compile_tt(qk_quant_plan *p, qk_qrules *r, qk_err *err)
{
    plan_priv *pv = priv_of(p);
    if (p->o.n_tt == 0)
        return 0;
    pv->re = calloc(p->o.n_tt, sizeof *pv->re);
    pv->tt_type = calloc(p->o.n_tt, sizeof *pv->tt_type);
    if (!pv->re || !pv->tt_type)
        return qk_errf(err, QK_EIO, "out of memory");
    for (size_t i = 0; i < p->o.n_tt; i++) {
        int rc = compile_pattern(&pv->re[i], p->o.tt[i].pattern, err);
        if (rc)
            return rc;
        pv->n_re++;
        pv->tt_type[i] = p->o.tt[i].type;
    }
    r->tt_re = pv->re;
    r->tt_type = pv->tt_type;
    r->n_tt = p->o.n_tt;
    return 0;
}

/* The imatrix must describe this model: some entry names one of its tensors,
 * and its values are finite (llama-quant checks every entry). */
static int check_imatrix(const qk_quant_plan *p, qk_err *err)
{
    const qk_imatrix *im = p->o.imatrix;
    if (!im)
        return 0;
    for (size_t i = 0; i < im->n; i++)
        for (uint64_t k = 0; k < im->e[i].n; k++)
            if (!isfinite(im->e[i].values[k]))
                return qk_errf(err, QK_EINPUT, "importance matrix: %s: non-finite value %g",
                               im->e[i].name, (double)im->e[i].values[k]);
    for (uint64_t i = 0; i < p->g->n_tensors; i++) {
        char name[64];
        const qk_gguf_tensor *t = &p->g->tensors[i];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        if (qk_imatrix_find(im, name))
            return 0;
    }
    return qk_errf(err, QK_EINPUT, "importance matrix: none of its %zu entries names a tensor of %s "
                   "(an imatrix for another model?)", im->n, p->g->path);
}

int qk_quant_plan_make(qk_quant_plan **out, const qk_gguf *g, const qk_quant_opts *o, qk_err *err)
{
    *out = NULL;
    int default_type = qk_ftype_default_type(o->ftype);
    if (default_type < 0)
        return qk_errf(err, QK_EINPUT, "invalid output file type %d", o->ftype);
    qk_quant_plan *p = calloc(1, sizeof *p + sizeof(plan_priv));
    if (!p)
        return qk_errf(err, QK_EIO, "out of memory");
    p->g = g;
    p->o = *o;
    if (p->o.imatrix && p->o.imatrix->n == 0)
        p->o.imatrix = NULL; /* everything filtered away: as if none was given */
    plan_priv *pv = priv_of(p);
    qk_qrules r = {.ftype = o->ftype, .only_copy = o->only_copy, .pure = o->pure,
                   .quantize_output = !o->leave_output, .output_type = o->output_tensor_type,
                   .embd_type = o->token_embedding_type,
                   .has_imatrix = p->o.imatrix != NULL || o->calibrated};
    uint64_t n_layer;
    int rc = model_facts(g, o, &r, pv->arch, sizeof pv->arch, &n_layer, err);
    if (!rc)
        rc = compile_tt(p, &r, err);
    if (!rc)
        rc = check_imatrix(p, err);
    if (rc)
        goto fail;

    p->t = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *p->t);
    if (!p->t) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto fail;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const qk_gguf_tensor *t = &g->tensors[i];
        if (t->name.len >= 64) {
            rc = qk_err_at(err, g->path, "tensor name", t->info_offset, "name longer than 63 bytes");
            goto fail;
        }
        p->t[i].src = t;
        memcpy(p->t[i].name, t->name.ptr, (size_t)t->name.len);
        p->t[i].name[t->name.len] = 0;
    }
    p->n = (size_t)g->n_tensors;
    qsort(p->t, p->n, sizeof *p->t, cmp_weight_order);

    /* --prune-layers: drop and renumber blocks in that order */
    if (o->n_prune) {
        prune_map *pm = malloc(sizeof *pm);
        if (!pm) {
            rc = qk_errf(err, QK_EIO, "out of memory");
            goto fail;
        }
        for (int i = 0; i < 1024; i++)
            pm->orig[i] = -2;
        pm->next_id = 0;
        size_t k = 0;
        for (size_t i = 0; i < p->n; i++) {
            if (remap_layer(p->t[i].name, o, pm, err, &rc))
                p->t[k++] = p->t[i];
            else if (rc)
                break;
        }
        pv->n_layer_out = (uint64_t)pm->next_id;
        pv->pruned = true;
        free(pm);
        if (rc)
            goto fail;
        p->n = k;
    }
    if (o->keep_split) {
        /* qsort is not stable, but (shard, offset) is unique */
        qsort(p->t, p->n, sizeof *p->t, cmp_shard_order);
    }
    p->n_shards = 1;
    for (size_t i = 0; i < p->n; i++) {
        p->t[i].shard = o->keep_split ? p->t[i].src->shard : 0;
        if (p->t[i].shard + 1 > p->n_shards)
            p->n_shards = p->t[i].shard + 1;
    }

    /* counters (init_quantize_state_counters) */
    r.tied = true;
    for (size_t i = 0; i < p->n; i++) {
        int cat = qk_qrules_category(p->t[i].name);
        if (qk_qrules_cat_is_attn_v(cat))
            r.n_attention_wv++;
        if (cat == QK_CAT_OUTPUT)
            r.tied = false;
    }
    p->file_type = o->only_copy ? copy_file_type(g, p->t, p->n) : (uint32_t)o->ftype;
    if ((rc = plan_types(p, &r, default_type, err)))
        goto fail;
    *out = p;
    return 0;
fail:
    qk_quant_plan_free(p);
    return rc;
}
