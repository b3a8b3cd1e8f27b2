/* quantcfg.c - quantization configs of Hugging Face checkpoints (see
 * quantcfg.h for the rules).  Every method is reduced to the same model:
 * ordered groups (arguments + target patterns) and ignore patterns. */
#include "formats/quantcfg.h"

#include <fnmatch.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ere.h"

typedef enum { PAT_EXACT, PAT_REGEX, PAT_CLASS, PAT_SUBSTR, PAT_GLOB } patkind;

typedef struct pat {
    patkind kind;
    char *s;       /* as written (without "re:") */
    regex_t re;
    bool re_ok;
} pat;

typedef struct group {
    char *name;
    char *format;  /* per-group format, or NULL for the config's */
    pat *t;
    size_t nt;
    qk_qargs w, a;
} group;

typedef struct priv {
    group *g;
    size_t ng;
    pat *ign;
    size_t ni;
} priv;

const char *qk_qmethod_name(qk_qmethod m)
{
    static const char *const n[] = {"none", "compressed-tensors", "fp8", "awq", "gptq",
                                    "bitsandbytes", "mlx", "modelopt", "other"};
    return (unsigned)m <= QK_QM_OTHER ? n[m] : "?";
}

/* ---- building ------------------------------------------------------------ */

typedef struct bctx {
    qk_quantcfg *cfg;
    priv *p;
    const char *path; /* file for messages */
    qk_err *err;
} bctx;

static int oom(bctx *b) { return qk_errf(b->err, QK_EIO, "%s: out of memory", b->path); }

/* Python re syntax -> POSIX ERE for what appears in these configs:
 * \d \D and non-capturing groups; anchored at the start like re.match. */
char *qk_py_to_ere(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n * 5 + 8), *q = o;
    if (!o)
        return NULL;
    q += sprintf(q, "^(");
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && (s[i + 1] == 'd' || s[i + 1] == 'D')) {
            q += sprintf(q, s[i + 1] == 'd' ? "[0-9]" : "[^0-9]");
            i++;
        } else if (s[i] == '(' && s[i + 1] == '?' && s[i + 2] == ':') {
            *q++ = '(';
            i += 2;
        } else if (s[i] == '\\' && s[i + 1]) {
            *q++ = s[i++];
            *q++ = s[i];
        } else
            *q++ = s[i];
    }
    q += sprintf(q, ")");
    return o;
}

static int add_pat(bctx *b, pat **arr, size_t *n, patkind kind, const char *s, const char *field,
                   const qk_jsonv *where)
{
    pat *na = realloc(*arr, (*n + 1) * sizeof *na);
    if (!na)
        return oom(b);
    *arr = na;
    pat *p = &na[*n];
    memset(p, 0, sizeof *p);
    if (!(p->s = strdup(s)))
        return oom(b);
    p->kind = kind;
    (*n)++;
    if (kind == PAT_REGEX) {
        char *ere = qk_py_to_ere(s);
        if (!ere)
            return oom(b);
        char m[128];
        int rc = qk_ere_compile(&p->re, ere, REG_EXTENDED | REG_NOSUB, m, sizeof m);
        free(ere);
        if (rc != 0)
            return qk_err_at(b->err, b->path, field, where ? where->off : 0, "bad regex \"%.80s\": %s", s, m);
        p->re_ok = true;
    }
    return QK_OK;
}

/* A compressed-tensors target or ignore entry. */
static int add_ct_pat(bctx *b, pat **arr, size_t *n, const qk_jsonv *v, const char *field)
{
    const char *s = qk_jsonv_str(v);
    if (!s)
        return qk_err_at(b->err, b->path, field, v->off, "must be a string");
    if (strncmp(s, "re:", 3) == 0)
        return add_pat(b, arr, n, PAT_REGEX, s + 3, field, v);
    /* Class names (CamelCase, no dots) vs module names. */
    bool cls = s[0] >= 'A' && s[0] <= 'Z' && !strchr(s, '.');
    return add_pat(b, arr, n, cls ? PAT_CLASS : PAT_EXACT, s, field, v);
}

static group *new_group(bctx *b, const char *name)
{
    group *ng = realloc(b->p->g, (b->p->ng + 1) * sizeof *ng);
    if (!ng)
        return NULL;
    b->p->g = ng;
    group *g = &ng[b->p->ng];
    memset(g, 0, sizeof *g);
    if (!(g->name = strdup(name)))
        return NULL;
    b->p->ng++;
    return g;
}

static void set_str(char *dst, size_t cap, const char *s) { snprintf(dst, cap, "%s", s ? s : ""); }

static int bad_type(bctx *b, const char *field, const qk_jsonv *v, const char *want)
{
    return qk_err_at(b->err, b->path, field, v->off, "is %s, expected %s", qk_jtype_name(v->type), want);
}

/* Optional integer member. */
static int get_int(bctx *b, const qk_jsonv *obj, const char *key, const char *prefix, int64_t *out)
{
    const qk_jsonv *v = qk_jsonv_get(obj, key);
    if (!v || v->type == QK_JNULL)
        return QK_OK;
    if (!qk_jsonv_i64(v, out)) {
        char f[200];
        snprintf(f, sizeof f, "%s.%s", prefix, key);
        return bad_type(b, f, v, "an integer");
    }
    return QK_OK;
}

static int get_bool(bctx *b, const qk_jsonv *obj, const char *key, const char *prefix, bool *out)
{
    const qk_jsonv *v = qk_jsonv_get(obj, key);
    if (!v || v->type == QK_JNULL)
        return QK_OK;
    if (v->type == QK_JSTR && strcmp(v->str.s, "local") == 0) { /* dynamic: "local" */
        *out = true;
        return QK_OK;
    }
    if (!qk_jsonv_bool(v, out)) {
        char f[200];
        snprintf(f, sizeof f, "%s.%s", prefix, key);
        return bad_type(b, f, v, "a boolean");
    }
    return QK_OK;
}

/* compressed-tensors QuantizationArgs. */
static int parse_ct_args(bctx *b, const qk_jsonv *v, const char *field, qk_qargs *a)
{
    memset(a, 0, sizeof *a);
    if (!v || v->type == QK_JNULL)
        return QK_OK;
    if (v->type != QK_JOBJ)
        return bad_type(b, field, v, "an object");
    int64_t bits = 8, gs = 0;
    a->present = true;
    a->symmetric = true;
    int rc = get_int(b, v, "num_bits", field, &bits);
    if (!rc)
        rc = get_int(b, v, "group_size", field, &gs);
    if (!rc)
        rc = get_bool(b, v, "symmetric", field, &a->symmetric);
    if (!rc)
        rc = get_bool(b, v, "dynamic", field, &a->dynamic);
    if (rc)
        return rc;
    if (bits < 1 || bits > 64)
        return qk_err_at(b->err, b->path, field, v->off, "num_bits %lld out of range", (long long)bits);
    a->num_bits = (int)bits;
    a->group_size = gs;
    set_str(a->type, sizeof a->type, qk_jsonv_get_str(v, "type", "int"));
    set_str(a->strategy, sizeof a->strategy, qk_jsonv_get_str(v, "strategy", ""));
    const qk_jsonv *bs = qk_jsonv_get(v, "block_structure");
    if (qk_jsonv_len(bs) == 2 && qk_jsonv_is(bs, QK_JARR)) {
        qk_jsonv_i64(qk_jsonv_at(bs, 0), &a->block[0]);
        qk_jsonv_i64(qk_jsonv_at(bs, 1), &a->block[1]);
    }
    return QK_OK;
}

static int build_ct(bctx *b, const qk_jsonv *qc)
{
    set_str(b->cfg->format, sizeof b->cfg->format, qk_jsonv_get_str(qc, "format", "dense"));
    const qk_jsonv *groups = qk_jsonv_get(qc, "config_groups");
    if (groups && groups->type != QK_JOBJ)
        return bad_type(b, "quantization_config.config_groups", groups, "an object");
    char f[256];
    for (size_t i = 0; i < qk_jsonv_len(groups); i++) {
        const qk_jsonm *m = qk_jsonv_member(groups, i);
        snprintf(f, sizeof f, "quantization_config.config_groups.%.64s", m->key);
        if (m->val->type != QK_JOBJ)
            return bad_type(b, f, m->val, "an object");
        group *g = new_group(b, m->key);
        if (!g)
            return oom(b);
        const char *gf = qk_jsonv_get_str(m->val, "format", NULL);
        if (gf && !(g->format = strdup(gf)))
            return oom(b);
        char sub[300];
        snprintf(sub, sizeof sub, "%s.weights", f);
        int rc = parse_ct_args(b, qk_jsonv_get(m->val, "weights"), sub, &g->w);
        snprintf(sub, sizeof sub, "%s.input_activations", f);
        if (!rc)
            rc = parse_ct_args(b, qk_jsonv_get(m->val, "input_activations"), sub, &g->a);
        if (rc)
            return rc;
        const qk_jsonv *t = qk_jsonv_get(m->val, "targets");
        snprintf(sub, sizeof sub, "%s.targets", f);
        if (!qk_jsonv_is(t, QK_JARR))
            return t ? bad_type(b, sub, t, "an array") : qk_err_at(b->err, b->path, sub, m->val->off, "missing");
        for (size_t k = 0; k < t->arr.n; k++)
            if ((rc = add_ct_pat(b, &g->t, &g->nt, t->arr.items[k], sub)))
                return rc;
    }
    const qk_jsonv *ign = qk_jsonv_get(qc, "ignore");
    if (ign && ign->type != QK_JARR && ign->type != QK_JNULL)
        return bad_type(b, "quantization_config.ignore", ign, "an array");
    for (size_t k = 0; k < qk_jsonv_len(ign); k++) {
        int rc = add_ct_pat(b, &b->p->ign, &b->p->ni, ign->arr.items[k], "quantization_config.ignore");
        if (rc)
            return rc;
    }
    return QK_OK;
}

/* One group covering every linear module. */
static group *linear_group(bctx *b, const char *name)
{
    group *g = new_group(b, name);
    if (g && add_pat(b, &g->t, &g->nt, PAT_CLASS, "Linear", "", NULL))
        return NULL;
    return g;
}

/* Lists of module-name substrings not to convert (transformers quantizers). */
static int add_skip_list(bctx *b, const qk_jsonv *qc, const char *key)
{
    const qk_jsonv *l = qk_jsonv_get(qc, key);
    if (!l || l->type == QK_JNULL)
        return QK_OK;
    char f[128];
    snprintf(f, sizeof f, "quantization_config.%s", key);
    if (l->type != QK_JARR)
        return bad_type(b, f, l, "an array");
    for (size_t i = 0; i < l->arr.n; i++) {
        const char *s = qk_jsonv_str(l->arr.items[i]);
        if (!s)
            return bad_type(b, f, l->arr.items[i], "a string");
        int rc = add_pat(b, &b->p->ign, &b->p->ni, PAT_SUBSTR, s, f, l->arr.items[i]);
        if (rc)
            return rc;
    }
    return QK_OK;
}

static void args(qk_qargs *a, const char *type, int bits, const char *strategy, int64_t gs, bool sym, bool dyn)
{
    memset(a, 0, sizeof *a);
    a->present = true;
    set_str(a->type, sizeof a->type, type);
    a->num_bits = bits;
    set_str(a->strategy, sizeof a->strategy, strategy);
    a->group_size = gs;
    a->symmetric = sym;
    a->dynamic = dyn;
}

static int build_fp8(bctx *b, const qk_jsonv *qc)
{
    group *g = linear_group(b, "fp8");
    if (!g)
        return oom(b);
    const qk_jsonv *bs = qk_jsonv_get(qc, "weight_block_size");
    const char *fmt = qk_jsonv_get_str(qc, "fmt", "e4m3");
    set_str(b->cfg->format, sizeof b->cfg->format, fmt);
    if (bs && bs->type != QK_JNULL) {
        if (!qk_jsonv_is(bs, QK_JARR) || bs->arr.n != 2 || !qk_jsonv_i64(bs->arr.items[0], &g->w.block[0]) ||
            !qk_jsonv_i64(bs->arr.items[1], &g->w.block[1]) || g->w.block[0] <= 0 || g->w.block[1] <= 0)
            return qk_err_at(b->err, b->path, "quantization_config.weight_block_size", bs->off,
                             "must be two positive integers");
        int64_t b0 = g->w.block[0], b1 = g->w.block[1];
        args(&g->w, "float", 8, "block", 0, true, false);
        g->w.block[0] = b0;
        g->w.block[1] = b1;
    } else
        args(&g->w, "float", 8, "tensor", 0, true, false);
    const char *act = qk_jsonv_get_str(qc, "activation_scheme", "dynamic");
    /* Block FP8 activations: per-token groups of the block width. */
    args(&g->a, "float", 8, g->w.block[1] ? "group" : "tensor", g->w.block[1], true, strcmp(act, "dynamic") == 0);
    int rc = add_pat(b, &b->p->ign, &b->p->ni, PAT_SUBSTR, "lm_head", "", NULL);
    if (!rc)
        rc = add_skip_list(b, qc, "modules_to_not_convert");
    if (!rc)
        rc = add_skip_list(b, qc, "ignored_layers");
    return rc;
}

static int build_awq_gptq(bctx *b, const qk_jsonv *qc, bool awq)
{
    group *g = linear_group(b, awq ? "awq" : "gptq");
    if (!g)
        return oom(b);
    int64_t bits = 4, gs = 128;
    const char *pre = "quantization_config";
    const char *bkey = awq && qk_jsonv_get(qc, "w_bit") ? "w_bit" : "bits";
    int rc = get_int(b, qc, bkey, pre, &bits);
    if (!rc)
        rc = get_int(b, qc, "group_size", pre, &gs);
    if (!rc && awq && qk_jsonv_get(qc, "q_group_size"))
        rc = get_int(b, qc, "q_group_size", pre, &gs);
    if (rc)
        return rc;
    if (bits < 1 || bits > 16)
        return qk_err_at(b->err, b->path, "quantization_config.bits", qk_jsonv_get(qc, bkey)->off,
                         "%lld out of range", (long long)bits);
    bool sym;
    if (awq) {
        bool zp = true;
        rc = get_bool(b, qc, "zero_point", pre, &zp);
        sym = !zp;
        set_str(b->cfg->format, sizeof b->cfg->format, qk_jsonv_get_str(qc, "version", "gemm"));
    } else {
        sym = true;
        bool desc = false;
        rc = get_bool(b, qc, "sym", pre, &sym);
        if (!rc)
            rc = get_bool(b, qc, "desc_act", pre, &desc);
        set_str(b->cfg->format, sizeof b->cfg->format, desc ? "desc_act" : "");
    }
    if (rc)
        return rc;
    /* group_size -1 means per output channel. */
    args(&g->w, "int", (int)bits, gs > 0 ? "group" : "channel", gs > 0 ? gs : 0, sym, false);
    bool lm = false;
    if (!awq && (rc = get_bool(b, qc, "lm_head", pre, &lm)))
        return rc;
    if (!lm && (rc = add_pat(b, &b->p->ign, &b->p->ni, PAT_SUBSTR, "lm_head", "", NULL)))
        return rc;
    return add_skip_list(b, qc, "modules_to_not_convert");
}

static int build_bnb(bctx *b, const qk_jsonv *qc)
{
    const char *pre = "quantization_config";
    bool l4 = false, l8 = false, dq = false;
    int rc = get_bool(b, qc, "load_in_4bit", pre, &l4);
    if (!rc)
        rc = get_bool(b, qc, "load_in_8bit", pre, &l8);
    if (!rc)
        rc = get_bool(b, qc, "bnb_4bit_use_double_quant", pre, &dq);
    if (rc)
        return rc;
    if (!l4 && !l8)
        return qk_err_at(b->err, b->path, pre, qc->off, "bitsandbytes: neither load_in_4bit nor load_in_8bit");
    group *g = linear_group(b, l4 ? "bnb-4bit" : "bnb-8bit");
    if (!g)
        return oom(b);
    if (l4) {
        const char *qt = qk_jsonv_get_str(qc, "bnb_4bit_quant_type", "fp4");
        /* bitsandbytes 4-bit: absmax blocks of 64. */
        args(&g->w, qt, 4, "block", 64, true, false);
        snprintf(b->cfg->format, sizeof b->cfg->format, "%s%s", qt, dq ? "+double-quant" : "");
    } else {
        /* LLM.int8(): per-row absmax int8. */
        args(&g->w, "int", 8, "channel", 0, true, false);
        set_str(b->cfg->format, sizeof b->cfg->format, "llm.int8");
    }
    rc = add_pat(b, &b->p->ign, &b->p->ni, PAT_SUBSTR, "lm_head", "", NULL);
    return rc ? rc : add_skip_list(b, qc, "llm_int8_skip_modules");
}

/* MLX: defaults, then per-module overrides (objects or false). */
static int build_mlx(bctx *b, const qk_jsonv *q)
{
    int64_t bits = 4, gs = 64;
    int rc = get_int(b, q, "bits", "quantization", &bits);
    if (!rc)
        rc = get_int(b, q, "group_size", "quantization", &gs);
    if (rc)
        return rc;
    const char *mode = qk_jsonv_get_str(q, "mode", "affine");
    set_str(b->cfg->format, sizeof b->cfg->format, mode);
    bool affine = strcmp(mode, "affine") == 0;
    /* Overrides first: exact names win anyway, but keep them visible. */
    for (size_t i = 0; i < qk_jsonv_len(q); i++) {
        const qk_jsonm *m = qk_jsonv_member(q, i);
        if (m->val->type == QK_JBOOL && !m->val->b) {
            if ((rc = add_pat(b, &b->p->ign, &b->p->ni, PAT_EXACT, m->key, "quantization", m->val)))
                return rc;
        } else if (m->val->type == QK_JOBJ) {
            char f[200];
            snprintf(f, sizeof f, "quantization.%.100s", m->key);
            group *g = new_group(b, m->key);
            if (!g)
                return oom(b);
            int64_t ob = bits, og = gs;
            if ((rc = get_int(b, m->val, "bits", f, &ob)) || (rc = get_int(b, m->val, "group_size", f, &og)))
                return rc;
            const char *om = qk_jsonv_get_str(m->val, "mode", mode);
            args(&g->w, strcmp(om, "affine") == 0 ? "int" : om, (int)ob, "group", og,
                 strcmp(om, "affine") != 0, false);
            if ((rc = add_pat(b, &g->t, &g->nt, PAT_EXACT, m->key, f, m->val)))
                return rc;
        }
    }
    group *g = new_group(b, "default");
    if (!g)
        return oom(b);
    /* affine: scale and bias per group (asymmetric); mxfp4 etc.: scale only. */
    args(&g->w, affine ? "int" : mode, (int)bits, "group", gs, !affine, false);
    rc = add_pat(b, &g->t, &g->nt, PAT_CLASS, "Linear", "", NULL);
    return rc ? rc : add_pat(b, &g->t, &g->nt, PAT_CLASS, "Embedding", "", NULL);
}

/* ModelOpt algorithm names -> arguments. */
static void modelopt_args(const char *algo, int64_t gs, qk_qargs *w, qk_qargs *a)
{
    memset(w, 0, sizeof *w);
    memset(a, 0, sizeof *a);
    if (strcasecmp(algo, "FP8") == 0) {
        args(w, "float", 8, "tensor", 0, true, false);
        args(a, "float", 8, "tensor", 0, true, false);
    } else if (strcasecmp(algo, "FP8_PB_WO") == 0) {
        args(w, "float", 8, "block", 0, true, false);
        w->block[0] = w->block[1] = 128;
    } else if (strcasecmp(algo, "FP8_PER_CHANNEL_PER_TOKEN") == 0) {
        args(w, "float", 8, "channel", 0, true, false);
        args(a, "float", 8, "token", 0, true, true);
    } else if (strncasecmp(algo, "NVFP4", 5) == 0) {
        args(w, "float", 4, "tensor_group", gs ? gs : 16, true, false);
        if (strcasecmp(algo, "NVFP4") == 0)
            args(a, "float", 4, "tensor_group", gs ? gs : 16, true, true);
    } else if (strcasecmp(algo, "W4A8_AWQ") == 0) {
        args(w, "int", 4, "group", gs ? gs : 128, true, false);
        args(a, "float", 8, "tensor", 0, true, false);
    } else if (strcasecmp(algo, "W4A16_AWQ") == 0 || strcasecmp(algo, "INT4_AWQ") == 0) {
        args(w, "int", 4, "group", gs ? gs : 128, true, false);
    } else if (strcasecmp(algo, "INT8_SQ") == 0 || strcasecmp(algo, "W8A8_SQ_PER_CHANNEL") == 0) {
        args(w, "int", 8, "channel", 0, true, false);
        args(a, "int", 8, "tensor", 0, true, false);
    } else if (strcasecmp(algo, "MXFP8") == 0) {
        args(w, "float", 8, "group", 32, true, false);
        args(a, "float", 8, "group", 32, true, true);
    }
}

static int build_modelopt(bctx *b, const qk_jsonv *q, const char *pre)
{
    const char *algo = qk_jsonv_get_str(q, "quant_algo", NULL);
    if (!algo)
        return qk_err_at(b->err, b->path, pre, q->off, "missing quant_algo");
    set_str(b->cfg->format, sizeof b->cfg->format, algo);
    int64_t gs = 0;
    int rc = get_int(b, q, "group_size", pre, &gs);
    if (rc)
        return rc;
    char f[160];
    if (strcasecmp(algo, "MIXED_PRECISION") == 0) {
        const qk_jsonv *ql = qk_jsonv_get(q, "quantized_layers");
        snprintf(f, sizeof f, "%s.quantized_layers", pre);
        if (!qk_jsonv_is(ql, QK_JOBJ))
            return ql ? bad_type(b, f, ql, "an object") : qk_err_at(b->err, b->path, f, q->off, "missing");
        for (size_t i = 0; i < ql->obj.n; i++) {
            const qk_jsonm *m = &ql->obj.m[i];
            const char *la = qk_jsonv_get_str(m->val, "quant_algo", NULL);
            if (!la)
                return qk_err_at(b->err, b->path, f, m->val->off, "layer '%.80s' has no quant_algo", m->key);
            int64_t lg = gs;
            if ((rc = get_int(b, m->val, "group_size", f, &lg)))
                return rc;
            group *g = new_group(b, la);
            if (!g)
                return oom(b);
            modelopt_args(la, lg, &g->w, &g->a);
            if ((rc = add_pat(b, &g->t, &g->nt, PAT_EXACT, m->key, f, m->val)))
                return rc;
        }
    } else {
        group *g = linear_group(b, algo);
        if (!g)
            return oom(b);
        modelopt_args(algo, gs, &g->w, &g->a);
    }
    const char *keys[] = {"exclude_modules", "ignore"};
    for (int k = 0; k < 2; k++) {
        const qk_jsonv *ex = qk_jsonv_get(q, keys[k]);
        snprintf(f, sizeof f, "%s.%s", pre, keys[k]);
        if (ex && ex->type != QK_JARR && ex->type != QK_JNULL)
            return bad_type(b, f, ex, "an array");
        for (size_t i = 0; i < qk_jsonv_len(ex); i++) {
            const char *s = qk_jsonv_str(ex->arr.items[i]);
            if (!s)
                return bad_type(b, f, ex->arr.items[i], "a string");
            if ((rc = add_pat(b, &b->p->ign, &b->p->ni, PAT_GLOB, s, f, ex->arr.items[i])))
                return rc;
        }
    }
    return QK_OK;
}

static void summarize(qk_quantcfg *cfg)
{
    priv *p = cfg->priv;
    int k = snprintf(cfg->desc, sizeof cfg->desc, "%s", cfg->method_name);
    if (cfg->format[0] && k > 0 && (size_t)k < sizeof cfg->desc)
        k += snprintf(cfg->desc + k, sizeof cfg->desc - (size_t)k, " %s", cfg->format);
    if (k > 0 && (size_t)k < sizeof cfg->desc && cfg->method != QK_QM_NONE)
        snprintf(cfg->desc + k, sizeof cfg->desc - (size_t)k, ", %zu group%s, %zu ignore rule%s", p->ng,
                 p->ng == 1 ? "" : "s", p->ni, p->ni == 1 ? "" : "s");
}

static int build(bctx *b, const qk_jsonv *config, const char *cpath, const qk_jsonv *hqc, const char *hpath)
{
    qk_quantcfg *cfg = b->cfg;
    const qk_jsonv *qc = qk_jsonv_get(config, "quantization_config");
    const qk_jsonv *mlx = qk_jsonv_get(config, "quantization");
    const qk_jsonv *mo = qk_jsonv_get(hqc, "quantization");
    b->path = cpath ? cpath : "config.json";
    if (qc && qc->type != QK_JOBJ && qc->type != QK_JNULL)
        return bad_type(b, "quantization_config", qc, "an object");
    const char *qm = qk_jsonv_get_str(qc, "quant_method", NULL);
    if (qm) {
        set_str(cfg->source, sizeof cfg->source, "config.json");
        set_str(cfg->method_name, sizeof cfg->method_name, qm);
        if (strcmp(qm, "compressed-tensors") == 0) {
            cfg->method = QK_QM_COMPRESSED_TENSORS;
            return build_ct(b, qc);
        }
        if (strcmp(qm, "fp8") == 0) {
            cfg->method = QK_QM_FP8;
            return build_fp8(b, qc);
        }
        if (strcmp(qm, "awq") == 0 || strcmp(qm, "gptq") == 0) {
            cfg->method = qm[0] == 'a' ? QK_QM_AWQ : QK_QM_GPTQ;
            return build_awq_gptq(b, qc, qm[0] == 'a');
        }
        if (strcmp(qm, "bitsandbytes") == 0) {
            cfg->method = QK_QM_BNB;
            return build_bnb(b, qc);
        }
        if (strcmp(qm, "modelopt") == 0) {
            cfg->method = QK_QM_MODELOPT;
            return build_modelopt(b, qc, "quantization_config");
        }
        cfg->method = QK_QM_OTHER;
        return QK_OK;
    }
    if (qk_jsonv_is(mo, QK_JOBJ)) {
        b->path = hpath ? hpath : "hf_quant_config.json";
        cfg->method = QK_QM_MODELOPT;
        set_str(cfg->source, sizeof cfg->source, "hf_quant_config.json");
        set_str(cfg->method_name, sizeof cfg->method_name, "modelopt");
        return build_modelopt(b, mo, "quantization");
    }
    if (qk_jsonv_is(mlx, QK_JOBJ)) {
        cfg->method = QK_QM_MLX;
        set_str(cfg->source, sizeof cfg->source, "config.json");
        set_str(cfg->method_name, sizeof cfg->method_name, "mlx");
        return build_mlx(b, mlx);
    }
    if (qc && qc->type == QK_JOBJ && (qk_jsonv_get(qc, "load_in_4bit") || qk_jsonv_get(qc, "load_in_8bit"))) {
        cfg->method = QK_QM_BNB; /* old bitsandbytes configs lack quant_method */
        set_str(cfg->source, sizeof cfg->source, "config.json");
        set_str(cfg->method_name, sizeof cfg->method_name, "bitsandbytes");
        return build_bnb(b, qc);
    }
    set_str(cfg->method_name, sizeof cfg->method_name, "none");
    return QK_OK;
}

int qk_quantcfg_parse(qk_quantcfg **out, const qk_jsonv *config, const char *config_path,
                      const qk_jsonv *hf_quant_config, const char *hqc_path, qk_err *err)
{
    *out = NULL;
    qk_quantcfg *cfg = calloc(1, sizeof *cfg);
    priv *p = calloc(1, sizeof *p);
    if (!cfg || !p) {
        free(cfg);
        free(p);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    cfg->priv = p;
    bctx b = {.cfg = cfg, .p = p, .err = err};
    int rc = build(&b, config, config_path, hf_quant_config, hqc_path);
    if (rc) {
        qk_quantcfg_free(cfg);
        return rc;
    }
    summarize(cfg);
    *out = cfg;
    return QK_OK;
}

int qk_quantcfg_open_hf(qk_quantcfg **out, const qk_hfdir *hf, qk_err *err)
{
    char cp[4096], hp[4096];
    snprintf(cp, sizeof cp, "%s/config.json", hf->dir);
    snprintf(hp, sizeof hp, "%s/hf_quant_config.json", hf->dir);
    return qk_quantcfg_parse(out, hf->config, cp, hf->hf_quant_config, hp, err);
}

static void free_pats(pat *a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (a[i].re_ok)
            regfree(&a[i].re);
        free(a[i].s);
    }
    free(a);
}

void qk_quantcfg_free(qk_quantcfg *cfg)
{
    if (!cfg)
        return;
    priv *p = cfg->priv;
    if (p) {
        for (size_t i = 0; i < p->ng; i++) {
            free(p->g[i].name);
            free(p->g[i].format);
            free_pats(p->g[i].t, p->g[i].nt);
        }
        free(p->g);
        free_pats(p->ign, p->ni);
        free(p);
    }
    free(cfg);
}

/* ---- look-up --------------------------------------------------------------- */

/* Leaves a tensor name may end in, longest first where one is a suffix of
 * another; "main" marks the weight itself. */
static const struct { const char *leaf; bool main; } leaves[] = {
    {"weight.quant_state.bitsandbytes__nf4", false},
    {"weight.quant_state.bitsandbytes__fp4", false},
    {"weight.nested_quant_map", false},
    {"weight.nested_absmax", false},
    {"weight.quant_map", false},
    {"weight.absmax", false},
    {"weight_global_scale", false},
    {"input_global_scale", false},
    {"weight_zero_point", false},
    {"weight_scale_inv", false},
    {"weight_packed", true},
    {"weight_scale_2", false},
    {"weight_scale", false},
    {"weight_format", false},
    {"weight_g_idx", false},
    {"weight_shape", false},
    {"input_scale", false},
    {"output_scale", false},
    {"qweight", true},
    {"qzeros", false},
    {"scales", false},
    {"biases", false},
    {"g_idx", false},
    {"weight", true},
    {"SCB", false},
};

static bool is_embedding(const char *module)
{
    const char *last = strrchr(module, '.');
    last = last ? last + 1 : module;
    return strncmp(last, "embed", 5) == 0 || strstr(last, "_embed") || strcmp(last, "wte") == 0 ||
           strcmp(last, "wpe") == 0 || strcmp(last, "tok_embeddings") == 0;
}

/* Match strength: 3 exact name, 2 regex, 1 class, 0 none. */
static int match(const pat *p, const char *module, const char *cls)
{
    switch (p->kind) {
    case PAT_EXACT: return strcmp(p->s, module) == 0 ? 3 : 0;
    case PAT_REGEX: return regexec(&p->re, module, 0, NULL, 0) == 0 ? 2 : 0;
    case PAT_CLASS: return cls && strcmp(p->s, cls) == 0 ? 1 : 0;
    case PAT_SUBSTR: return strstr(module, p->s) ? 3 : 0;
    case PAT_GLOB: return fnmatch(p->s, module, 0) == 0 ? 3 : 0;
    }
    return 0;
}

static void describe_args(const qk_qargs *a, char *buf, size_t cap)
{
    if (!a->present) {
        snprintf(buf, cap, "none");
        return;
    }
    char strat[48] = "";
    if (a->block[0] && a->block[1])
        snprintf(strat, sizeof strat, " w/ block %lldx%lld", (long long)a->block[0], (long long)a->block[1]);
    else if (a->group_size > 0)
        snprintf(strat, sizeof strat, " w/ %s %lld", strcmp(a->strategy, "tensor_group") == 0 ? "tensor_group" :
                 strcmp(a->strategy, "block") == 0 ? "block" : "group", (long long)a->group_size);
    else if (a->strategy[0])
        snprintf(strat, sizeof strat, " per-%s", a->strategy);
    bool named = strcmp(a->type, "int") && strcmp(a->type, "float");
    /* "int4 w/ group 128 symmetric" */
    char t[24];
    if (named)
        snprintf(t, sizeof t, "%s", a->type);
    else
        snprintf(t, sizeof t, "%s%d", a->type, a->num_bits);
    snprintf(buf, cap, "%s%s %s%s", t, strat, a->symmetric ? "symmetric" : "asymmetric",
             a->dynamic ? " dynamic" : "");
}

static void not_quantized(qk_qscheme *o, const char *why)
{
    o->quantized = false;
    o->reason = why;
    snprintf(o->desc, sizeof o->desc, "not quantized (%s)", why);
}

void qk_quantcfg_scheme_for(const qk_quantcfg *cfg, const char *name, int n_dims, qk_qscheme *o)
{
    memset(o, 0, sizeof *o);
    o->method = cfg ? cfg->method : QK_QM_NONE;
    o->method_name = cfg ? cfg->method_name : "none";
    o->format = "";
    o->group = "";
    o->reason = "";
    if (!cfg || cfg->method == QK_QM_NONE) {
        not_quantized(o, "no quantization config");
        return;
    }
    if (cfg->method == QK_QM_OTHER) {
        not_quantized(o, "quantization method not supported");
        return;
    }
    /* Split MODULE.LEAF. */
    size_t n = strlen(name);
    const char *leaf = NULL;
    bool main = false;
    for (size_t i = 0; i < sizeof leaves / sizeof leaves[0]; i++) {
        size_t l = strlen(leaves[i].leaf);
        if (n > l && name[n - l - 1] == '.' && strcmp(name + n - l, leaves[i].leaf) == 0) {
            leaf = leaves[i].leaf;
            main = leaves[i].main;
            break;
        }
    }
    if (!leaf) {
        not_quantized(o, "not a weight tensor");
        return;
    }
    snprintf(o->role, sizeof o->role, "%s", leaf);
    char module[512];
    snprintf(module, sizeof module, "%.*s", (int)(n - strlen(leaf) - 1), name);
    /* The module's class, as far as the name and shape tell. */
    const char *cls = NULL;
    if (is_embedding(module))
        cls = "Embedding";
    else if (!main || strcmp(leaf, "weight") != 0 || n_dims < 0 || n_dims == 2)
        cls = "Linear";
    const priv *p = cfg->priv;
    for (size_t i = 0; i < p->ni; i++)
        if (match(&p->ign[i], module, cls)) {
            not_quantized(o, "ignored");
            return;
        }
    const group *best = NULL;
    int bs = 0;
    for (size_t g = 0; g < p->ng; g++)
        for (size_t t = 0; t < p->g[g].nt; t++) {
            int s = match(&p->g[g].t[t], module, cls);
            if (s > bs) {
                bs = s;
                best = &p->g[g];
            }
        }
    if (!best) {
        not_quantized(o, cls && strcmp(cls, "Linear") == 0 ? "no target matches" : "not a linear weight");
        return;
    }
    o->quantized = true;
    o->group = best->name;
    o->format = best->format ? best->format : cfg->format;
    o->w = best->w;
    o->a = best->a;
    char wd[96], ad[96];
    describe_args(&o->w, wd, sizeof wd);
    describe_args(&o->a, ad, sizeof ad);
    snprintf(o->desc, sizeof o->desc, "%s%s%s: %s, act: %s", cfg->method_name, o->format[0] ? " " : "",
             o->format, wd, ad);
}
