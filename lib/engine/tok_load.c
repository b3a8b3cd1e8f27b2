/* tok_load.c - building a tokenizer from a GGUF file's tokenizer.ggml.*
 * keys (llama_vocab::impl::load, src/llama-vocab.cpp, d32676d) or from a
 * Hugging Face tokenizer.json (the model, added tokens and pre-tokenizer of
 * the tokenizers library's serialization). */
#define QK_TOKENIZER_INTERNAL
#include "lib/engine/tokenizer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"
#include "lib/core/jsonp.h"
#include "lib/core/mapfile.h"

/* ---- GGUF ---------------------------------------------------------------------- */

/* NUL-terminated copy of a string key's value; NULL when absent. */
static char *gguf_cstr(const qk_gguf *g, const char *key)
{
    qk_str v;
    if (!qk_gguf_get_str(g, key, &v))
        return NULL;
    char *c = malloc(v.len + 1);
    if (c) {
        memcpy(c, v.ptr, v.len);
        c[v.len] = '\0';
    }
    return c;
}

/* The string elements of an array key, or an error when it has another type. */
static int gguf_str_array(const qk_gguf *g, const char *key, qk_str **out, uint64_t *n, bool required,
                          qk_err *err)
{
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    *out = NULL;
    *n = 0;
    if (!kv)
        return required ? qk_err_at(err, g->path, key, 0, "missing") : 0;
    if (kv->v.type != QK_GGUF_ARRAY || kv->v.arr.elem != QK_GGUF_STRING || !kv->v.arr.items)
        return qk_err_at(err, g->path, key, kv->offset, "not an array of strings");
    uint64_t bytes;
    if (qk_ckd_mul(&bytes, kv->v.arr.n, sizeof(qk_str)) || bytes > SIZE_MAX)
        return qk_err_at(err, g->path, key, kv->offset, "array too large");
    *out = malloc(bytes ? (size_t)bytes : 1);
    if (!*out)
        return qk_tok_oom(err);
    for (uint64_t i = 0; i < kv->v.arr.n; i++)
        (*out)[i] = kv->v.arr.items[i].s;
    *n = kv->v.arr.n;
    return 0;
}

/* A numeric array of at least n elements (NULL when absent). */
static int gguf_num_array(const qk_gguf *g, const char *key, uint64_t n, const qk_gguf_value **out,
                          qk_err *err)
{
    const qk_gguf_kv *kv = qk_gguf_find(g, key);
    *out = NULL;
    if (!kv)
        return 0;
    const qk_gguf_value *v = &kv->v;
    if (v->type != QK_GGUF_ARRAY || v->arr.elem == QK_GGUF_STRING || v->arr.elem == QK_GGUF_ARRAY ||
        v->arr.elem == QK_GGUF_BOOL)
        return qk_err_at(err, g->path, key, kv->offset, "not a numeric array");
    if (v->arr.n < n)
        return qk_err_at(err, g->path, key, kv->offset, "%llu entries for %llu tokens",
                         (unsigned long long)v->arr.n, (unsigned long long)n);
    *out = v;
    return 0;
}

static int64_t gguf_id(const qk_gguf *g, const char *key)
{
    int64_t v;
    return qk_gguf_get_int(g, key, &v) ? v : -2;
}

static int gguf_flag(const qk_gguf *g, const char *key)
{
    bool b;
    return qk_gguf_get_bool(g, key, &b) ? b : -1;
}

qk_tokenizer *qk_tok_from_gguf(const qk_gguf *g, qk_err *err) { return qk_tok_from_gguf_pre(g, NULL, err); }

qk_tokenizer *qk_tok_from_gguf_pre(const qk_gguf *g, const char *pre_name, qk_err *err)
{
    qk_tok_spec s;
    qk_tok_spec_init(&s);
    qk_str model;
    if (!qk_gguf_get_str(g, "tokenizer.ggml.model", &model)) {
        qk_err_at(err, g->path, "tokenizer.ggml.model", 0, "missing: the file has no vocabulary");
        return NULL;
    }
    if (qk_str_eq(model, "llama")) {
        s.type = QK_TOK_SPM;
    } else if (qk_str_eq(model, "gpt2")) {
        s.type = QK_TOK_BPE;
    } else if (qk_str_eq(model, "bert")) {
        s.type = QK_TOK_WPM;
    } else if (qk_str_eq(model, "gemma4")) {
        s.type = QK_TOK_BPE; /* SentencePiece-style BPE: no default special ids */
        s.no_default_ids = true;
    } else {
        qk_err_at(err, g->path, "tokenizer.ggml.model", 0, "unsupported tokenizer '%.*s'",
                  (int)(model.len > 64 ? 64 : model.len), model.ptr);
        return NULL;
    }
    qk_tokenizer *t = NULL;
    qk_str *tokens = NULL, *merges = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    char *pre = gguf_cstr(g, "tokenizer.ggml.pre");
    char *name = gguf_cstr(g, "general.name");
    char *arch = gguf_cstr(g, "general.architecture");
    uint64_t n_tok, n_merges = 0;
    const qk_gguf_value *vs, *vt;
    if (gguf_str_array(g, "tokenizer.ggml.tokens", &tokens, &n_tok, true, err))
        goto done;
    if (n_tok == 0 || n_tok > INT32_MAX) {
        qk_err_at(err, g->path, "tokenizer.ggml.tokens", 0, "bad token count %llu", (unsigned long long)n_tok);
        goto done;
    }
    if (s.type == QK_TOK_BPE && gguf_str_array(g, "tokenizer.ggml.merges", &merges, &n_merges, true, err))
        goto done;
    if (gguf_num_array(g, "tokenizer.ggml.scores", n_tok, &vs, err) ||
        gguf_num_array(g, "tokenizer.ggml.token_type", n_tok, &vt, err))
        goto done;
    if (vs) {
        if (!(scores = malloc(n_tok * sizeof *scores))) {
            qk_tok_oom(err);
            goto done;
        }
        for (uint64_t i = 0; i < n_tok; i++)
            scores[i] = (float)qk_gguf_arr_f64(vs, i);
    }
    if (vt) {
        if (!(types = malloc(n_tok * sizeof *types))) {
            qk_tok_oom(err);
            goto done;
        }
        for (uint64_t i = 0; i < n_tok; i++) {
            int64_t v = qk_gguf_arr_i64(vt, i);
            types[i] = v < 0 || v > 6 ? QK_TT_UNDEFINED : (int32_t)v;
        }
    }
    s.pre = s.no_default_ids ? "gemma4" : pre_name ? pre_name : pre;
    s.name = name;
    s.arch = arch;
    s.n_tokens = (uint32_t)n_tok;
    s.tokens = tokens;
    s.scores = scores;
    s.types = types;
    s.n_merges = n_merges;
    s.merges = merges;
    s.bos = gguf_id(g, "tokenizer.ggml.bos_token_id");
    s.eos = gguf_id(g, "tokenizer.ggml.eos_token_id");
    s.eot = gguf_id(g, "tokenizer.ggml.eot_token_id");
    s.eom = gguf_id(g, "tokenizer.ggml.eom_token_id");
    s.unk = gguf_id(g, "tokenizer.ggml.unknown_token_id");
    s.sep = gguf_id(g, "tokenizer.ggml.seperator_token_id");
    s.pad = gguf_id(g, "tokenizer.ggml.padding_token_id");
    s.mask = gguf_id(g, "tokenizer.ggml.mask_token_id");
    s.fim_pre = gguf_id(g, "tokenizer.ggml.fim_pre_token_id");
    s.fim_suf = gguf_id(g, "tokenizer.ggml.fim_suf_token_id");
    s.fim_mid = gguf_id(g, "tokenizer.ggml.fim_mid_token_id");
    s.fim_pad = gguf_id(g, "tokenizer.ggml.fim_pad_token_id");
    s.fim_rep = gguf_id(g, "tokenizer.ggml.fim_rep_token_id");
    s.fim_sep = gguf_id(g, "tokenizer.ggml.fim_sep_token_id");
    /* deprecated names of the first three FIM ids */
    if (s.fim_pre == -2)
        s.fim_pre = gguf_id(g, "tokenizer.ggml.prefix_token_id");
    if (s.fim_suf == -2)
        s.fim_suf = gguf_id(g, "tokenizer.ggml.suffix_token_id");
    if (s.fim_mid == -2)
        s.fim_mid = gguf_id(g, "tokenizer.ggml.middle_token_id");
    s.add_bos = gguf_flag(g, "tokenizer.ggml.add_bos_token");
    s.add_eos = gguf_flag(g, "tokenizer.ggml.add_eos_token");
    s.add_space_prefix = gguf_flag(g, "tokenizer.ggml.add_space_prefix");
    s.lowercase = gguf_flag(g, "tokenizer.ggml.normalizer.lowercase");
    s.strip_accents = gguf_flag(g, "tokenizer.ggml.normalizer.strip_accents");
    t = qk_tok_new(&s, g->path, err);
done:
    free(tokens);
    free(merges);
    free(scores);
    free(types);
    free(pre);
    free(name);
    free(arch);
    return t;
}

/* ---- Hugging Face tokenizer.json -------------------------------------------- */

/* The Split regexes of the pre-tokenizers qk implements, as tokenizer.json
 * files spell them. */
static const struct hf_regex {
    const char *regex, *pre;
} hf_regexes[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "gpt-2"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama-bpe"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "qwen2"},
};

/* The pre-tokenizer name for a tokenizer.json pre_tokenizer; NULL if unsupported. */
static const char *hf_pre_name(const qk_jsonv *pt)
{
    const char *type = qk_jsonv_get_str(pt, "type", "");
    if (strcmp(type, "ByteLevel") == 0)
        return qk_jsonv_get_bool(pt, "use_regex", true) ? "gpt-2" : NULL;
    if (strcmp(type, "Sequence") != 0)
        return NULL;
    const qk_jsonv *list = qk_jsonv_get(pt, "pretokenizers");
    const char *pre = NULL;
    bool byte_level = false;
    for (size_t i = 0; i < qk_jsonv_len(list); i++) {
        const qk_jsonv *p = qk_jsonv_at(list, i);
        const char *pty = qk_jsonv_get_str(p, "type", "");
        if (strcmp(pty, "Split") == 0 && !pre) {
            const char *re = qk_jsonv_get_str(qk_jsonv_get(p, "pattern"), "Regex", "");
            for (size_t k = 0; k < sizeof hf_regexes / sizeof hf_regexes[0]; k++)
                if (strcmp(re, hf_regexes[k].regex) == 0)
                    pre = hf_regexes[k].pre;
            if (!pre)
                return NULL;
        } else if (strcmp(pty, "ByteLevel") == 0 && !byte_level) {
            byte_level = true;
            if (qk_jsonv_get_bool(p, "use_regex", true)) {
                if (pre)
                    return NULL; /* two regex splits */
                pre = "gpt-2";
            }
        } else {
            return NULL;
        }
    }
    return byte_level ? pre : NULL;
}

typedef struct hf_build {
    qk_str *tokens;
    int32_t *types;
    uint32_t n;
    qk_str *merges;
    char **owned;   /* merge strings built from ["a", "b"] pairs */
    uint64_t n_merges;
} hf_build;

static int hf_set_token(hf_build *b, const char *name, uint64_t id, const char *s, size_t len, int32_t type,
                        uint64_t off, qk_err *err)
{
    if (id >= b->n)
        return qk_err_at(err, name, "model.vocab", off, "token id %llu out of range", (unsigned long long)id);
    if (b->tokens[id].ptr && !(type != QK_TT_NORMAL && qk_tok_streq(b->tokens[id].ptr, b->tokens[id].len, s, len)))
        return qk_err_at(err, name, "model.vocab", off, "token id %llu given twice", (unsigned long long)id);
    b->tokens[id] = (qk_str){s, len};
    b->types[id] = type;
    return 0;
}

static int hf_merges(hf_build *b, const qk_jsonv *merges, const char *name, qk_err *err)
{
    b->n_merges = qk_jsonv_len(merges);
    b->merges = calloc(b->n_merges ? b->n_merges : 1, sizeof *b->merges);
    b->owned = calloc(b->n_merges ? b->n_merges : 1, sizeof *b->owned);
    if (!b->merges || !b->owned)
        return qk_tok_oom(err);
    for (uint64_t i = 0; i < b->n_merges; i++) {
        const qk_jsonv *m = qk_jsonv_at(merges, i);
        if (qk_jsonv_is(m, QK_JSTR)) {
            b->merges[i] = (qk_str){m->str.s, m->str.len};
            continue;
        }
        const qk_jsonv *l = qk_jsonv_at(m, 0), *r = qk_jsonv_at(m, 1);
        if (qk_jsonv_len(m) != 2 || !qk_jsonv_is(l, QK_JSTR) || !qk_jsonv_is(r, QK_JSTR))
            return qk_err_at(err, name, "model.merges", m->off, "merge %llu is neither \"a b\" nor [\"a\", \"b\"]",
                             (unsigned long long)i);
        size_t len = l->str.len + 1 + r->str.len;
        char *c = malloc(len);
        if (!c)
            return qk_tok_oom(err);
        memcpy(c, l->str.s, l->str.len);
        c[l->str.len] = ' ';
        memcpy(c + l->str.len + 1, r->str.s, r->str.len);
        b->owned[i] = c;
        b->merges[i] = (qk_str){c, len};
    }
    return 0;
}

static int64_t hf_find(const hf_build *b, const char *text)
{
    for (uint32_t i = 0; i < b->n; i++)
        if (b->tokens[i].ptr && qk_tok_cstr_eq(b->tokens[i].ptr, b->tokens[i].len, text))
            return i;
    return -2;
}

qk_tokenizer *qk_tok_from_hf_root(const qk_jsonv *root, const char *name, const char *pre_override, qk_err *err)
{
    const qk_jsonv *model = qk_jsonv_get(root, "model");
    if (strcmp(qk_jsonv_get_str(model, "type", ""), "BPE") != 0) {
        qk_err_at(err, name, "model.type", model ? model->off : 0, "only BPE models are supported");
        return NULL;
    }
    const char *pre = pre_override ? pre_override : hf_pre_name(qk_jsonv_get(root, "pre_tokenizer"));
    if (!pre) {
        qk_err_at(err, name, "pre_tokenizer", 0, "unsupported pre-tokenizer (ByteLevel with a GPT-2, Llama 3 or Qwen2 split expected)");
        return NULL;
    }
    const qk_jsonv *vocab = qk_jsonv_get(model, "vocab"), *added = qk_jsonv_get(root, "added_tokens");
    if (!qk_jsonv_is(vocab, QK_JOBJ)) {
        qk_err_at(err, name, "model.vocab", model->off, "missing or not an object");
        return NULL;
    }
    /* the vocabulary size: one past the largest id */
    uint64_t n = 0, id;
    for (size_t i = 0; i < qk_jsonv_len(vocab); i++) {
        const qk_jsonm *m = qk_jsonv_member(vocab, i);
        if (!qk_jsonv_u64(m->val, &id) || id >= INT32_MAX) {
            qk_err_at(err, name, "model.vocab", m->key_off, "bad id for '%.64s'", m->key);
            return NULL;
        }
        n = id + 1 > n ? id + 1 : n;
    }
    for (size_t i = 0; i < qk_jsonv_len(added); i++) {
        const qk_jsonv *a = qk_jsonv_at(added, i);
        if (!qk_jsonv_u64(qk_jsonv_get(a, "id"), &id) || id >= INT32_MAX ||
            !qk_jsonv_is(qk_jsonv_get(a, "content"), QK_JSTR)) {
            qk_err_at(err, name, "added_tokens", a ? a->off : 0, "entry %zu has no valid id/content", i);
            return NULL;
        }
        n = id + 1 > n ? id + 1 : n;
    }
    hf_build b = {0};
    qk_tokenizer *t = NULL;
    b.n = (uint32_t)n;
    b.tokens = calloc(n ? n : 1, sizeof *b.tokens);
    b.types = calloc(n ? n : 1, sizeof *b.types);
    if (!b.tokens || !b.types) {
        qk_tok_oom(err);
        goto done;
    }
    for (size_t i = 0; i < qk_jsonv_len(vocab); i++) {
        const qk_jsonm *m = qk_jsonv_member(vocab, i);
        qk_jsonv_u64(m->val, &id);
        if (hf_set_token(&b, name, id, m->key, m->key_len, QK_TT_NORMAL, m->key_off, err))
            goto done;
    }
    for (size_t i = 0; i < qk_jsonv_len(added); i++) {
        const qk_jsonv *a = qk_jsonv_at(added, i), *c = qk_jsonv_get(a, "content");
        qk_jsonv_u64(qk_jsonv_get(a, "id"), &id);
        int32_t type = qk_jsonv_get_bool(a, "special", false) ? QK_TT_CONTROL : QK_TT_USER_DEFINED;
        if (hf_set_token(&b, name, id, c->str.s, c->str.len, type, a->off, err))
            goto done;
    }
    /* ids no token has (a vocabulary with holes): unused placeholders, which
     * the vocabulary names [EMPTY_<id>] as llama.cpp does */
    for (uint32_t i = 0; i < b.n; i++)
        if (!b.tokens[i].ptr) {
            b.tokens[i] = (qk_str){"", 0};
            b.types[i] = QK_TT_UNUSED;
        }
    if (hf_merges(&b, qk_jsonv_get(model, "merges"), name, err))
        goto done;
    qk_tok_spec s;
    qk_tok_spec_init(&s);
    s.type = QK_TOK_BPE;
    s.pre = pre;
    s.n_tokens = b.n;
    s.tokens = b.tokens;
    s.types = b.types;
    s.n_merges = b.n_merges;
    s.merges = b.merges;
    s.add_space_prefix = 0;
    int64_t eot = hf_find(&b, "<|endoftext|>");
    s.bos = hf_find(&b, "<|begin_of_text|>");
    s.eos = hf_find(&b, "<|end_of_text|>");
    if (s.bos < 0)
        s.bos = hf_find(&b, "<s>");
    if (s.eos < 0)
        s.eos = hf_find(&b, "</s>");
    if (s.bos < 0)
        s.bos = eot;
    if (s.eos < 0)
        s.eos = eot;
    t = qk_tok_new(&s, name, err);
done:
    for (uint64_t i = 0; b.owned && i < b.n_merges; i++)
        free(b.owned[i]);
    free(b.owned);
    free(b.merges);
    free(b.tokens);
    free(b.types);
    return t;
}

qk_tokenizer *qk_tok_from_hf_json_mem(const char *buf, size_t n, const char *name, qk_err *err)
{
    qk_jsonv *root;
    qk_jsonp_err je;
    if (qk_jsonp_parse(buf, n, 0, &root, &je)) {
        qk_err_at(err, name, "JSON", je.off, "%s", je.msg);
        return NULL;
    }
    qk_tokenizer *t = qk_tok_from_hf_root(root, name, NULL, err);
    qk_jsonv_free(root);
    return t;
}

qk_tokenizer *qk_tok_from_hf_json(const char *path, qk_err *err)
{
    qk_map m;
    if (qk_map_open(&m, path, err))
        return NULL;
    qk_tokenizer *t = qk_tok_from_hf_json_mem((const char *)m.data, m.size, path, err);
    qk_map_close(&m);
    return t;
}
