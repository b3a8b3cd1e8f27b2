/* conv_vocab.c - the converter's byte-level BPE vocabulary (conv_vocab.h).
 * Follows TextModel.get_vocab_base / get_vocab_base_pre / _set_vocab_gpt2
 * (llama.cpp conversion/base.py) and gguf-py's SpecialVocab (vocab.py) at
 * d32676d, for the tokenizer.json files transformers writes. */
#include "lib/convert/conv_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "lib/core/files.h"
#include "lib/core/sha256.h"
#include "lib/core/strbuf.h"
#include "lib/engine/tokenizer.h"

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5 };

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "qk-convert: out of memory"); }

static bool file_exists(const char *dir, const char *name)
{
    char *p = qk_path_join(dir, name);
    struct stat st;
    bool ok = p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
    free(p);
    return ok;
}

/* Parse dir/name; *out NULL when the file is absent. */
static int load_json(const char *dir, const char *name, qk_jsonv **out, char **buf_out, size_t *n_out, qk_err *err)
{
    *out = NULL;
    char *path = qk_path_join(dir, name), *buf = NULL;
    size_t n = 0;
    if (!path)
        return oom(err);
    int rc = qk_read_file(path, true, &buf, &n, err);
    if (!rc && buf) {
        qk_jsonp_err je;
        if (qk_jsonp_parse(buf, n, 0, out, &je))
            rc = qk_err_at(err, path, "JSON", je.off, "%s", je.msg);
    }
    free(path);
    if (buf_out && !rc)
        *buf_out = buf, *n_out = n;
    else
        free(buf);
    return rc;
}

/* does_token_look_special */
static bool looks_special(const char *t)
{
    size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]"))
        return true;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>"))
        return true;
    static const char fl[] = "<\xef\xbd\x9c", fr[] = "\xef\xbd\x9c>"; /* <｜ ｜> */
    if (n >= 8 && !strncmp(t, fl, 4) && !strcmp(t + n - 4, fr))
        return true;
    return n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>';
}


/* A user-defined token with U+2581 replaced by spaces. */
static char *unescape_spaces(const char *s)
{
    qk_sbuf b = {0};
    for (const char *p = s; *p;) {
        if (!strncmp(p, "\xe2\x96\x81", 3)) {
            qk_sb_printf(&b, " ");
            p += 3;
        } else {
            qk_sb_printf(&b, "%c", *p++);
        }
    }
    return b.s ? b.s : strndup("", 0);
}

/* The tokenizer's ids of the check text with the post-processor's added
 * special tokens (TemplateProcessing "single"; ByteLevel adds none). */
static int check_ids(const qk_jsonv *root, const char *pre_name, const char *path, qk_sbuf *out, qk_err *err)
{
    qk_tokenizer *t = qk_tok_from_hf_root(root, path, pre_name, err);
    if (!t)
        return err->code ? err->code : QK_EINPUT;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = qk_tok_encode(t, qk_conv_chktxt, qk_conv_chktxt_len, false, true, &ids, &n_ids, err);
    qk_tok_free(t);
    if (rc)
        return rc;
    /* the post-processor's template around sequence A */
    const qk_jsonv *pp = qk_jsonv_get(root, "post_processor");
    const qk_jsonv *procs = qk_jsonv_get(pp, "processors");
    size_t n_procs = procs ? qk_jsonv_len(procs) : (pp && pp->type == QK_JOBJ);
    qk_sbuf pre = {0}, post = {0};
    for (size_t k = 0; k < n_procs && !rc; k++) {
        const qk_jsonv *p = procs ? qk_jsonv_at(procs, k) : pp;
        const char *type = qk_jsonv_get_str(p, "type", "");
        if (!strcmp(type, "ByteLevel"))
            continue;
        if (strcmp(type, "TemplateProcessing") != 0) {
            rc = qk_err_at(err, path, "post_processor.type", p->off, "'%s' is not supported by qk-convert", type);
            break;
        }
        const qk_jsonv *single = qk_jsonv_get(p, "single"), *st = qk_jsonv_get(p, "special_tokens");
        bool after = false;
        for (size_t i = 0; i < qk_jsonv_len(single) && !rc; i++) {
            const qk_jsonv *e = qk_jsonv_at(single, i);
            if (qk_jsonv_get(e, "Sequence")) {
                after = true;
                continue;
            }
            const char *sid = qk_jsonv_get_str(qk_jsonv_get(e, "SpecialToken"), "id", NULL);
            const qk_jsonv *tids = qk_jsonv_get(qk_jsonv_get(st, sid ? sid : ""), "ids");
            if (!sid || !tids) {
                rc = qk_err_at(err, path, "post_processor.single", e->off, "unsupported template entry");
                break;
            }
            for (size_t j = 0; j < qk_jsonv_len(tids); j++) {
                int64_t v;
                qk_jsonv_i64(qk_jsonv_at(tids, j), &v);
                qk_sb_printf(after ? &post : &pre, "%lld, ", (long long)v);
            }
        }
    }
    /* str(list): "[a, b, c]" */
    qk_sb_printf(out, "[%s", pre.s ? pre.s : "");
    for (size_t i = 0; i < n_ids; i++)
        qk_sb_printf(out, "%d, ", ids[i]);
    qk_sb_printf(out, "%s", post.s ? post.s : "");
    if (out->n >= 2 && out->s[out->n - 2] == ',')
        out->n -= 2, out->s[out->n] = '\0';
    qk_sb_printf(out, "]");
    free(pre.s);
    free(post.s);
    free(ids);
    return rc;
}

/* _set_special_token (n_vocab 0: None, any id is taken). */
static int put_id(qk_conv_vocab *v, const char *key, int64_t id, uint32_t n_vocab, qk_err *err)
{
    if (id < 0)
        return qk_errf(err, QK_EINPUT, "qk-convert: invalid value for special token %s: %lld", key, (long long)id);
    if (n_vocab && id >= n_vocab)
        return 0; /* out of range: skipped */
    for (int i = 0; i < v->n_ids; i++)
        if (!strcmp(v->ids[i].key, key))
            return 0; /* the first value stays */
    if (id > UINT32_MAX)
        return qk_errf(err, QK_EINPUT, "qk-convert: special token %s id %lld too large", key, (long long)id);
    v->ids[v->n_ids].key = key;
    v->ids[v->n_ids++].id = (uint32_t)id;
    return 0;
}

static void put_flag(qk_conv_vocab *v, const char *key, bool val)
{
    for (int i = 0; i < v->n_flags; i++)
        if (!strcmp(v->flags[i].key, key)) {
            v->flags[i].v = val; /* a dict update keeps the position */
            return;
        }
    v->flags[v->n_flags].key = key;
    v->flags[v->n_flags++].v = val;
}

/* SpecialVocab's types, the GGUF keys their ids and flags go to (NULL:
 * gguf-py has no writer for it and skips it). */
enum { T_BOS, T_EOS, T_UNK, T_SEP, T_PAD, T_CLS, T_MASK, T_EOT, T_EOM, N_ALL };
static const struct {
    const char *typ, *id_key, *add_key;
} special_types[N_ALL] = {
    {"bos", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token"},
    {"eos", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_eos_token"},
    {"unk", "tokenizer.ggml.unknown_token_id", NULL},
    {"sep", "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.add_sep_token"},
    {"pad", "tokenizer.ggml.padding_token_id", NULL},
    {"cls", NULL, NULL},
    {"mask", "tokenizer.ggml.mask_token_id", NULL},
    {"eot", "tokenizer.ggml.eot_token_id", NULL},  /* added to the types by TemplateProcessing */
    {"eom", "tokenizer.ggml.eom_token_id", NULL},
};

/* tokenizer_config.json's X_token entries as SpecialVocab sees (and edits)
 * them: each a string, another JSON value (shown as OTHER, which equals no
 * string), or absent (NULL). */
static const char OTHER[] = "\x01(not a string)";
typedef struct tc_entry {
    bool edited;
    const char *s;             /* string value, or NULL */
    const qk_jsonv *j;         /* non-string value, or NULL */
} tc_entry;
typedef struct tc_view {
    const qk_jsonv *tc;
    tc_entry e[N_ALL];
    int n_types;               /* special_token_types: 7, 8 or 9 */
} tc_view;

static tc_entry tc_raw(const tc_view *t, int typ)
{
    if (t->e[typ].edited)
        return t->e[typ];
    char key[32];
    snprintf(key, sizeof key, "%s_token", special_types[typ].typ);
    const qk_jsonv *v = qk_jsonv_get(t->tc, key);
    tc_entry r = {false, NULL, NULL};
    if (v && v->type == QK_JSTR)
        r.s = v->str.s;
    else if (v && v->type != QK_JNULL)
        r.j = v;
    return r;
}

/* The value as Python's truthiness and == see it. */
static const char *tc_get(const tc_view *t, int typ)
{
    tc_entry r = tc_raw(t, typ);
    if (r.s)
        return *r.s ? r.s : NULL;
    if (!r.j || (r.j->type == QK_JBOOL && !r.j->b) || ((r.j->type == QK_JOBJ || r.j->type == QK_JARR) && !qk_jsonv_len(r.j)) ||
        (r.j->type == QK_JNUM && r.j->num.d == 0))
        return NULL;
    return OTHER;
}

/* tokenizer_config[X_token] = the value of Y (a string, or Y's JSON value). */
static void tc_copy(tc_view *t, int typ, int from, const char *s)
{
    tc_entry r = s && s != OTHER ? (tc_entry){true, s, NULL} : tc_raw(t, from);
    r.edited = true;
    t->e[typ] = r;
}

/* The token text of an entry: a string, or a dict's "content". */
static const char *tc_content(const tc_view *t, int typ)
{
    tc_entry r = tc_raw(t, typ);
    if (r.s)
        return r.s;
    return qk_jsonv_is(qk_jsonv_get(r.j, "content"), QK_JSTR) ? qk_jsonv_get_str(r.j, "content", NULL) : NULL;
}

static bool same(const char *a, const char *b) { return a && b && a != OTHER && b != OTHER && !strcmp(a, b); }

/* The crude TemplateProcessing parse of _try_load_from_tokenizer_json: which
 * of BOS / EOS / SEP the template adds, and the entries it fills in. */
static void template_processing(qk_conv_vocab *v, tc_view *t, const qk_jsonv *p)
{
    bool have_tc = qk_jsonv_len(t->tc) > 0; /* an empty tokenizer_config is falsy */
    const char *bos = tc_get(t, T_BOS), *cls = tc_get(t, T_CLS), *eos = tc_get(t, T_EOS), *sep = tc_get(t, T_SEP);
    const qk_jsonv *single = qk_jsonv_get(p, "single"), *pair = qk_jsonv_get(p, "pair");
    size_t ns = qk_jsonv_len(single);
    const char *first = NULL, *last = NULL;
    if (ns > 1) {
        first = qk_jsonv_get_str(qk_jsonv_get(qk_jsonv_at(single, 0), "SpecialToken"), "id", NULL);
        if (first && *first) {
            if (!have_tc) {
                bos = first;
            } else if (!same(first, bos) && !same(first, cls)) {
                if (!bos)
                    tc_copy(t, T_BOS, T_BOS, bos = first);
                if (!cls)
                    tc_copy(t, T_CLS, T_CLS, cls = first);
            }
            put_flag(v, special_types[T_BOS].add_key, same(first, bos) || same(first, cls));
        } else {
            first = NULL;
        }
        last = qk_jsonv_get_str(qk_jsonv_get(qk_jsonv_at(single, ns - 1), "SpecialToken"), "id", NULL);
        if (last && *last) {
            if (!have_tc) {
                eos = last;
            } else if (!same(last, eos)) {
                if (t->n_types < T_EOT + 1) {
                    t->n_types = T_EOT + 1;
                    tc_copy(t, T_EOT, T_EOS, eos);
                } else if (t->n_types < T_EOM + 1) {
                    t->n_types = T_EOM + 1;
                    tc_copy(t, T_EOM, T_EOS, eos);
                }
                tc_copy(t, T_EOS, T_EOS, eos = last);
            }
            put_flag(v, special_types[T_EOS].add_key, same(last, eos));
        } else {
            last = NULL;
        }
    }
    size_t np = qk_jsonv_len(pair);
    if (!np)
        return;
    size_t start = first && same(qk_jsonv_get_str(qk_jsonv_get(qk_jsonv_at(pair, 0), "SpecialToken"), "id", NULL), first);
    size_t stop = np - (last && same(qk_jsonv_get_str(qk_jsonv_get(qk_jsonv_at(pair, np - 1), "SpecialToken"), "id", NULL),
                                     last));
    if (stop <= start)
        return;
    const char *a = qk_jsonv_get_str(qk_jsonv_get(qk_jsonv_at(pair, start), "Sequence"), "id", NULL);
    const char *b = qk_jsonv_get_str(qk_jsonv_get(qk_jsonv_at(pair, stop - 1), "Sequence"), "id", NULL);
    if (!a || !b || strcmp(a, "A") || strcmp(b, "B") || stop - start <= 2)
        return;
    /* A [sep] [eos] B */
    bool add_sep = false;
    size_t mid = stop - start - 2;
    const char *e = qk_jsonv_get_str(qk_jsonv_get(qk_jsonv_at(pair, start + 1), "SpecialToken"), "id", NULL);
    if (e && *e && (same(e, sep) || same(e, eos)) && !last)
        add_sep = true;
    if (mid == 2) {
        e = qk_jsonv_get_str(qk_jsonv_get(qk_jsonv_at(pair, start + 2), "SpecialToken"), "id", NULL);
        if (e && *e && (same(e, sep) || same(e, eos)))
            add_sep = true;
    }
    put_flag(v, special_types[T_SEP].add_key, add_sep);
    if (add_sep && !sep && have_tc)
        tc_copy(t, T_SEP, T_EOS, eos);
}

/* A text file as Python's open(encoding="utf-8").read() gives it: "\r\n"
 * and "\r" become "\n". */
static int read_text(const char *dir, const char *name, char **out, qk_err *err)
{
    char *p = qk_path_join(dir, name), *buf = NULL;
    size_t n = 0;
    int rc = p ? qk_read_file(p, false, &buf, &n, err) : oom(err);
    free(p);
    if (rc)
        return rc;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\r') {
            buf[k++] = '\n';
            if (i + 1 < n && buf[i + 1] == '\n')
                i++;
        } else {
            buf[k++] = buf[i];
        }
    }
    char *s = malloc(k + 1);
    if (s) {
        memcpy(s, buf, k);
        s[k] = '\0';
    }
    free(buf);
    *out = s;
    return s ? 0 : oom(err);
}

/* A chat template value: a string, or a list of {name, template} (gguf-py's
 * add_chat_template: "default" is tokenizer.chat_template, each other name
 * tokenizer.chat_template.NAME, their names in tokenizer.chat_templates). */
static int set_template(qk_conv_vocab *v, const qk_jsonv *ct, const char *where, qk_err *err)
{
    if (!ct || ct->type == QK_JNULL)
        return 0;
    if (ct->type == QK_JSTR) {
        v->chat_template = strndup(ct->str.s, ct->str.len);
        return v->chat_template ? 0 : oom(err);
    }
    if (ct->type != QK_JARR)
        return 0; /* "Bad type for chat_template field": ignored */
    for (size_t i = 0; i < qk_jsonv_len(ct); i++) {
        const qk_jsonv *c = qk_jsonv_at(ct, i);
        const char *name = qk_jsonv_get_str(c, "name", "");
        const qk_jsonv *tmpl = qk_jsonv_get(c, "template");
        if (!*name || !tmpl || tmpl->type == QK_JNULL)
            continue;
        if (tmpl->type != QK_JSTR)
            return qk_errf(err, QK_EINPUT, "%s: chat template '%s' is not a string", where, name);
        char **dst = !strcmp(name, "default") ? &v->chat_template : &v->tmpl;
        if (dst == &v->tmpl) {
            if (v->tmpl_name && strcmp(v->tmpl_name, name))
                return qk_errf(err, QK_EINPUT,
                               "%s: more than one named chat template: the converter writes their names in a Python set's "
                               "order, which qk-convert does not reproduce", where);
            free(v->tmpl_name);
            v->tmpl_name = strdup(name);
            if (!v->tmpl_name)
                return oom(err);
            for (char *q = v->tmpl_name; *q; q++)
                if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')))
                    *q = '_';
        }
        free(*dst);
        *dst = strndup(tmpl->str.s, tmpl->str.len);
        if (!*dst)
            return oom(err);
    }
    return 0;
}

/* tokenizer_config.get("chat_template", chat_template.jinja or chat_template.json's). */
static int chat_template(qk_conv_vocab *v, const char *dir, const qk_jsonv *tc, qk_err *err)
{
    const qk_jsonv *ct = qk_jsonv_get(tc, "chat_template");
    if (ct)
        return set_template(v, ct, "tokenizer_config.json", err);
    if (file_exists(dir, "chat_template.jinja")) {
        char *extra = qk_path_join(dir, "additional_chat_templates");
        DIR *d = extra ? opendir(extra) : NULL;
        bool more = false;
        for (struct dirent *e; d && (e = readdir(d));) {
            size_t l = strlen(e->d_name);
            more = more || (l > 6 && !strcmp(e->d_name + l - 6, ".jinja"));
        }
        if (d)
            closedir(d);
        free(extra);
        if (more)
            return qk_errf(err, QK_EINPUT, "%s: additional_chat_templates/: not reproduced by qk-convert yet", dir);
        return read_text(dir, "chat_template.jinja", &v->chat_template, err);
    }
    if (file_exists(dir, "chat_template.json")) {
        qk_jsonv *j = NULL;
        int rc = load_json(dir, "chat_template.json", &j, NULL, NULL, err);
        if (!rc)
            rc = set_template(v, qk_jsonv_get(j, "chat_template"), "chat_template.json", err);
        qk_jsonv_free(j);
        return rc;
    }
    return 0;
}

/* SpecialVocab._try_load_from_tokenizer_json's tokenizer_config part and
 * _try_load_from_config_json. */
static int special_vocab(qk_conv_vocab *v, const char *dir, const qk_jsonv *tok, const qk_jsonv *config, uint32_t n_vocab,
                         qk_err *err)
{
    qk_jsonv *tc = NULL;
    int rc = load_json(dir, "tokenizer_config.json", &tc, NULL, NULL, err);
    if (rc)
        return rc;
    tc_view t = {.tc = tc, .n_types = T_MASK + 1};
    bool have_tc = qk_jsonv_len(tc) > 0;
    /* cls/sep stand in for missing bos/eos (with a tokenizer.json) */
    if (tok && have_tc && !tc_get(&t, T_BOS) && tc_get(&t, T_CLS))
        tc_copy(&t, T_BOS, T_CLS, tc_get(&t, T_CLS));
    if (tok && have_tc && !tc_get(&t, T_EOS) && tc_get(&t, T_SEP))
        tc_copy(&t, T_EOS, T_SEP, tc_get(&t, T_SEP));
    const qk_jsonv *pp = qk_jsonv_get(tok, "post_processor");
    if (pp && pp->type == QK_JOBJ) {
        const qk_jsonv *procs = qk_jsonv_get(pp, "processors");
        size_t n = procs ? qk_jsonv_len(procs) : 1;
        for (size_t k = 0; k < n && !rc; k++) {
            const qk_jsonv *p = procs ? qk_jsonv_at(procs, k) : pp;
            const char *type = qk_jsonv_get_str(p, "type", "");
            if (!strcmp(type, "RobertaProcessing"))
                rc = qk_errf(err, QK_EINPUT, "%s: tokenizer.json post_processor RobertaProcessing: not reproduced by qk-convert yet",
                             dir);
            else if (!strcmp(type, "TemplateProcessing"))
                template_processing(v, &t, p);
        }
    }
    const qk_jsonv *added = qk_jsonv_get(tok, "added_tokens");
    if (!rc && have_tc) {
        rc = chat_template(v, dir, tc, err);
        for (int i = 0; i < t.n_types && !rc; i++) {
            char key[32];
            snprintf(key, sizeof key, "add_%s_token", special_types[i].typ);
            bool b;
            if (qk_jsonv_bool(qk_jsonv_get(tc, key), &b) && special_types[i].add_key)
                put_flag(v, special_types[i].add_key, b);
            const char *content = tc_content(&t, i);
            if (!content)
                continue;
            for (size_t j = 0; j < qk_jsonv_len(added); j++) {
                const qk_jsonv *a = qk_jsonv_at(added, j);
                if (!strcmp(qk_jsonv_get_str(a, "content", ""), content)) {
                    int64_t id;
                    if (qk_jsonv_i64(qk_jsonv_get(a, "id"), &id) && special_types[i].id_key)
                        rc = put_id(v, special_types[i].id_key, id, n_vocab, err);
                    break;
                }
            }
        }
    }
    for (int i = 0; i < t.n_types && !rc; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s_token_id", special_types[i].typ);
        const qk_jsonv *e = qk_jsonv_get(config, key);
        int64_t id;
        if (e && e->type == QK_JNUM && (e->num.flags & QK_JNUM_INT) && qk_jsonv_i64(e, &id) && special_types[i].id_key)
            rc = put_id(v, special_types[i].id_key, id, n_vocab, err);
    }
    qk_jsonv_free(tc);
    return rc;
}

/* _parse_normalizer */
static void parse_normalizer(qk_conv_vocab *v, const qk_jsonv *n)
{
    const char *type = qk_jsonv_get_str(n, "type", "");
    bool b;
    if (!strcmp(type, "Lowercase")) {
        v->lowercase = 1;
    } else if (!strcmp(type, "StripAccents")) {
        v->strip_accents = 1;
    } else if (!strcmp(type, "BertNormalizer")) {
        if (qk_jsonv_bool(qk_jsonv_get(n, "lowercase"), &b))
            v->lowercase = b;
        if (qk_jsonv_bool(qk_jsonv_get(n, "strip_accents"), &b))
            v->strip_accents = b;
    } else if (!strcmp(type, "Sequence")) {
        const qk_jsonv *list = qk_jsonv_get(n, "normalizers");
        for (size_t i = 0; i < qk_jsonv_len(list); i++)
            parse_normalizer(v, qk_jsonv_at(list, i));
    }
}

/* Merges as the converter stores them: "a b", spaces inside a part of the
 * pair form written as U+0120. */
static int load_merges(qk_conv_vocab *v, const qk_jsonv *merges, const char *path, qk_err *err)
{
    v->n_merges = qk_jsonv_len(merges);
    v->merges = calloc(v->n_merges ? v->n_merges : 1, sizeof *v->merges);
    if (!v->merges)
        return oom(err);
    for (uint64_t i = 0; i < v->n_merges; i++) {
        const qk_jsonv *m = qk_jsonv_at(merges, i);
        if (qk_jsonv_is(m, QK_JSTR)) {
            v->merges[i] = strndup(m->str.s, m->str.len);
        } else if (qk_jsonv_len(m) == 2 && qk_jsonv_is(qk_jsonv_at(m, 0), QK_JSTR) &&
                   qk_jsonv_is(qk_jsonv_at(m, 1), QK_JSTR)) {
            qk_sbuf b = {0};
            for (int k = 0; k < 2; k++) {
                const qk_jsonv *part = qk_jsonv_at(m, (size_t)k);
                if (k)
                    qk_sb_printf(&b, " ");
                for (size_t j = 0; j < part->str.len; j++) {
                    if (part->str.s[j] == ' ')
                        qk_sb_printf(&b, "\xc4\xa0");
                    else
                        qk_sb_printf(&b, "%c", part->str.s[j]);
                }
            }
            v->merges[i] = b.s ? b.s : strndup("", 0);
        } else {
            return qk_err_at(err, path, "model.merges", m->off, "unknown merges format");
        }
        if (!v->merges[i])
            return oom(err);
    }
    return 0;
}

/* LlamaModel.set_vocab's tokenizer_config part. */
static int llama_prefix(qk_conv_vocab *v, const char *dir, qk_err *err)
{
    qk_jsonv *tc = NULL;
    int rc = load_json(dir, "tokenizer_config.json", &tc, NULL, NULL, err);
    bool b;
    if (!rc && qk_jsonv_bool(qk_jsonv_get(tc, "add_prefix_space"), &b))
        v->add_space_prefix = b;
    if (!rc && !strcmp(qk_jsonv_get_str(tc, "tokenizer_class", ""), "HybridDNATokenizer"))
        rc = qk_errf(err, QK_EINPUT, "%s: HybridDNATokenizer: not supported by qk-convert", dir);
    qk_jsonv_free(tc);
    return rc;
}

/* TextModel._set_vocab_gpt2 (get_vocab_base, get_vocab_base_pre, SpecialVocab with merges). */
static int load_gpt2(qk_conv_vocab *v, const char *dir, const qk_jsonv *config, uint32_t vocab_size, bool llama_family,
                     qk_err *err)
{
    qk_jsonv *tok = NULL;
    char *buf = NULL;
    size_t n = 0;
    char *path = qk_path_join(dir, "tokenizer.json");
    if (!path)
        return oom(err);
    v->model = "gpt2";
    int rc = load_json(dir, "tokenizer.json", &tok, &buf, &n, err);
    if (!rc && !tok)
        rc = qk_errf(err, QK_EINPUT, "%s: missing tokenizer.json (the converter needs a tokenizer)", dir);
    const qk_jsonv *model = qk_jsonv_get(tok, "model");
    if (!rc && strcmp(qk_jsonv_get_str(model, "type", ""), "BPE") != 0)
        rc = qk_err_at(err, path, "model.type", model ? model->off : 0, "'%s': qk-convert reproduces BPE tokenizers only",
                       qk_jsonv_get_str(model, "type", "?"));
    if (!rc && llama_family && qk_jsonv_get_bool(model, "byte_fallback", false) &&
        !strcmp(qk_jsonv_get_str(qk_jsonv_get(tok, "decoder"), "type", ""), "Sequence"))
        rc = qk_errf(err, QK_EINPUT, "%s: SentencePiece-style BPE tokenizer.json (byte_fallback): not supported by qk-convert yet",
                     path);
    /* the token list: model.vocab and added_tokens by id */
    const qk_jsonv *vocab = qk_jsonv_get(model, "vocab"), *added = qk_jsonv_get(tok, "added_tokens");
    v->n = vocab_size;
    if (!rc) {
        v->tokens = calloc(vocab_size ? vocab_size : 1, sizeof *v->tokens);
        v->types = calloc(vocab_size ? vocab_size : 1, sizeof *v->types);
        if (!v->tokens || !v->types)
            rc = oom(err);
    }
    bool *is_added = rc ? NULL : calloc(vocab_size ? vocab_size : 1, sizeof *is_added);
    bool *special = rc ? NULL : calloc(vocab_size ? vocab_size : 1, sizeof *special);
    if (!rc && (!is_added || !special))
        rc = oom(err);
    for (size_t i = 0; i < qk_jsonv_len(vocab) && !rc; i++) {
        const qk_jsonm *m = qk_jsonv_member(vocab, i);
        uint64_t id;
        if (!qk_jsonv_u64(m->val, &id))
            rc = qk_err_at(err, path, "model.vocab", m->key_off, "bad id");
        else if (id >= vocab_size)
            rc = qk_errf(err, QK_EINPUT, "%s: token id %llu is not below the model's vocab_size %u", path,
                         (unsigned long long)id, vocab_size);
        else {
            free(v->tokens[id]); /* two tokens with one id: the last wins, as the converter's reverse map */
            if (!(v->tokens[id] = strndup(m->key, m->key_len)))
                rc = oom(err);
        }
    }
    for (size_t i = 0; i < qk_jsonv_len(added) && !rc; i++) {
        const qk_jsonv *a = qk_jsonv_at(added, i);
        const qk_jsonv *c = qk_jsonv_get(a, "content");
        uint64_t id;
        if (!qk_jsonv_u64(qk_jsonv_get(a, "id"), &id) || !qk_jsonv_is(c, QK_JSTR)) {
            rc = qk_err_at(err, path, "added_tokens", a->off, "bad entry");
        } else if (id >= vocab_size) {
            rc = qk_errf(err, QK_EINPUT, "%s: added token id %llu is not below the model's vocab_size %u", path,
                         (unsigned long long)id, vocab_size);
        } else {
            free(v->tokens[id]);
            if (!(v->tokens[id] = strndup(c->str.s, c->str.len)))
                rc = oom(err);
            is_added[id] = true;
            special[id] = qk_jsonv_get_bool(a, "special", false);
        }
    }
    for (uint32_t i = 0; i < vocab_size && !rc; i++) {
        if (!v->tokens[i]) {
            char pad[32];
            snprintf(pad, sizeof pad, "[PAD%u]", i);
            v->tokens[i] = strndup(pad, strlen(pad));
            v->types[i] = TT_UNUSED;
        } else if (!is_added[i]) {
            v->types[i] = TT_NORMAL;
        } else if (special[i] || looks_special(v->tokens[i])) {
            v->types[i] = TT_CONTROL;
        } else {
            char *u = unescape_spaces(v->tokens[i]);
            free(v->tokens[i]);
            v->tokens[i] = u;
            v->types[i] = TT_USER_DEFINED;
        }
        if (!v->tokens[i])
            rc = oom(err);
    }
    free(is_added);
    free(special);
    /* the pre-tokenizer by its check hash */
    if (!rc) {
        qk_sbuf s = {0};
        /* transformers 5's AutoTokenizer gives qwen2/qwen3 models Qwen2Tokenizer,
         * which rebuilds the pre-tokenizer as Qwen2's split whatever
         * tokenizer.json holds; the converter hashes that tokenizer's ids */
        const char *mt = qk_jsonv_get_str(config, "model_type", "");
        const char *pre = !strcmp(mt, "qwen2") || !strcmp(mt, "qwen3") ? "qwen2" : NULL;
        rc = check_ids(tok, pre, path, &s, err);
        if (!rc) {
            qk_sha256_hex(s.s, s.n, v->chkhsh);
            v->pre = qk_conv_pre_for_hash(v->chkhsh);
            if (!v->pre)
                rc = qk_errf(err, QK_EINPUT, "%s: BPE pre-tokenizer not recognized (chkhsh %s): the converter refuses it",
                             path, v->chkhsh);
        }
        free(s.s);
    }
    if (!rc)
        rc = load_merges(v, qk_jsonv_get(model, "merges"), path, err);
    if (!rc && qk_jsonv_get(tok, "normalizer"))
        parse_normalizer(v, qk_jsonv_get(tok, "normalizer"));
    if (!rc)
        rc = special_vocab(v, dir, tok, config, 0, err);
    v->n_real = (int64_t)(qk_jsonv_len(vocab) + qk_jsonv_len(added));
    qk_jsonv_free(tok);
    free(buf);
    free(path);
    return rc;
}

/* TextModel._set_vocab_sentencepiece (_create_vocab_sentencepiece, then
 * SpecialVocab without merges, which still reads a tokenizer.json). */
static int load_spm(qk_conv_vocab *v, const char *dir, const qk_jsonv *config, uint32_t vocab_size, qk_err *err)
{
    if (file_exists(dir, "added_tokens.json"))
        return qk_errf(err, QK_EINPUT, "%s: added_tokens.json beside tokenizer.model: not reproduced by qk-convert yet", dir);
    char *path = qk_path_join(dir, "tokenizer.model");
    qk_conv_spm sp;
    int rc = path ? qk_conv_spm_read(path, &sp, err) : oom(err);
    free(path);
    if (rc)
        return rc;
    v->model = "llama";
    v->pre = "default";
    v->n = vocab_size ? vocab_size : (uint32_t)sp.n;
    v->tokens = calloc(v->n, sizeof *v->tokens);
    v->scores = malloc(v->n * sizeof *v->scores);
    v->types = malloc(v->n * sizeof *v->types);
    if (!v->tokens || !v->scores || !v->types)
        rc = oom(err);
    for (uint32_t i = 0; i < v->n && !rc; i++) {
        if (i < sp.n) {
            v->tokens[i] = sp.pieces[i];
            sp.pieces[i] = NULL;
            v->scores[i] = sp.scores[i];
            v->types[i] = sp.types[i];
        } else {
            char pad[32];
            snprintf(pad, sizeof pad, "[PAD%u]", i);
            v->tokens[i] = strdup(pad);
            v->scores[i] = -10000.0f;
            v->types[i] = 5; /* UNUSED */
            if (!v->tokens[i])
                rc = oom(err);
        }
    }
    qk_conv_spm_free(&sp);
    /* tokenizer_config.json's added_tokens_decoder, in its order */
    qk_jsonv *tc = NULL;
    char *tcp = qk_path_join(dir, "tokenizer_config.json");
    if (!rc)
        rc = tcp ? load_json(dir, "tokenizer_config.json", &tc, NULL, NULL, err) : oom(err);
    const qk_jsonv *atd = qk_jsonv_get(tc, "added_tokens_decoder");
    for (size_t i = 0; !rc && atd && atd->type == QK_JOBJ && i < qk_jsonv_len(atd); i++) {
        const qk_jsonm *m = qk_jsonv_member(atd, i);
        const char *key = m->key;
        const qk_jsonv *e = m->val;
        char *endp;
        long long id = strtoll(key, &endp, 10);
        const char *content = qk_jsonv_get_str(e, "content", NULL);
        if (!*key || *endp || id < 0 || !content) {
            rc = qk_err_at(err, tcp, "added_tokens_decoder", e ? e->off : 0, "entry '%s': not an id with a content", key);
            break;
        }
        if (id >= v->n)
            continue; /* out of range: ignored */
        bool special = qk_jsonv_get_bool(e, "special", false) || looks_special(content);
        char *t = special ? strdup(content) : unescape_spaces(content);
        if (!t) {
            rc = oom(err);
            break;
        }
        free(v->tokens[id]);
        v->tokens[id] = t;
        v->types[id] = special ? 3 : 4; /* CONTROL, USER_DEFINED */
        v->scores[id] = -1000.0f;
    }
    qk_jsonv_free(tc);
    free(tcp);
    qk_jsonv *tok = NULL;
    if (!rc)
        rc = load_json(dir, "tokenizer.json", &tok, NULL, NULL, err);
    if (!rc && qk_jsonv_get(tok, "normalizer"))
        parse_normalizer(v, qk_jsonv_get(tok, "normalizer"));
    if (!rc)
        rc = special_vocab(v, dir, tok, config, v->n, err);
    v->n_real = v->n;
    qk_jsonv_free(tok);
    return rc;
}

static int tokenizer_class(const char *dir, char *out, size_t n, qk_err *err)
{
    qk_jsonv *tc = NULL;
    char *p = qk_path_join(dir, "tokenizer_config.json");
    int rc = load_json(dir, "tokenizer_config.json", &tc, NULL, NULL, err);
    const char *cls = qk_jsonv_get_str(tc, "tokenizer_class", NULL);
    if (!rc && tc && !cls)
        rc = qk_err_at(err, p, "tokenizer_class", 0, "missing (Phi-3's converter reads it)");
    snprintf(out, n, "%s", cls ? cls : "");
    qk_jsonv_free(tc);
    free(p);
    return rc;
}

int qk_conv_vocab_load(qk_conv_vocab *v, const char *dir, const qk_jsonv *config, uint32_t vocab_size, int mode,
                       qk_err *err)
{
    memset(v, 0, sizeof *v);
    v->lowercase = v->strip_accents = v->add_space_prefix = -1;
    bool spm = file_exists(dir, "tokenizer.model");
    int rc = 0;
    if (mode == QK_VOCAB_LLAMA)
        rc = llama_prefix(v, dir, err);
    if (!rc && mode == QK_VOCAB_PHI3) {
        char cls[64];
        rc = tokenizer_class(dir, cls, sizeof cls, err);
        if (!rc && !strcmp(cls, "GPT2Tokenizer"))
            mode = QK_VOCAB_GPT2;
        else if (!rc && !spm)
            rc = qk_errf(err, QK_EINPUT, "%s: missing tokenizer.model (Phi-3's converter needs it)", dir);
    }
    if (!rc && mode == QK_VOCAB_GEMMA2 && !spm)
        rc = qk_errf(err, QK_EINPUT, "%s: missing tokenizer.model (Gemma 2's converter needs it)", dir);
    if (!rc && spm && (mode == QK_VOCAB_GEMMA2 || mode == QK_VOCAB_GEMMA3)) {
        /* Gemma2Model / Gemma3Model.set_vocab: SentencePiece, then add_space_prefix false */
        rc = load_spm(v, dir, config, vocab_size, err);
        v->add_space_prefix = 0;
        v->space_prefix_last = true;
    } else if (!rc && spm && mode != QK_VOCAB_GPT2)
        rc = qk_errf(err, QK_EINPUT, "%s: tokenizer.model (SentencePiece): not supported by qk-convert yet", dir);
    else if (!rc)
        rc = load_gpt2(v, dir, config, vocab_size, mode == QK_VOCAB_LLAMA, err);
    if (rc)
        qk_conv_vocab_free(v);
    return rc;
}

void qk_conv_vocab_free(qk_conv_vocab *v)
{
    for (uint32_t i = 0; v->tokens && i < v->n; i++)
        free(v->tokens[i]);
    for (uint64_t i = 0; v->merges && i < v->n_merges; i++)
        free(v->merges[i]);
    free(v->tokens);
    free(v->scores);
    free(v->types);
    free(v->merges);
    free(v->chat_template);
    free(v->tmpl_name);
    free(v->tmpl);
    memset(v, 0, sizeof *v);
}

int qk_conv_vocab_write(qk_gguf_writer *w, const qk_conv_vocab *v, qk_err *err)
{
    int rc = 0;
    if (v->add_space_prefix >= 0 && !v->space_prefix_last)
        rc = qk_gguf_w_kv_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix, err);
    if (!rc)
        rc = qk_gguf_w_kv_str(w, "tokenizer.ggml.model", v->model, err);
    if (!rc)
        rc = qk_gguf_w_kv_str(w, "tokenizer.ggml.pre", v->pre, err);
    if (!rc)
        rc = qk_gguf_w_kv_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens, v->n, err);
    if (!rc && v->scores)
        rc = qk_gguf_w_kv_arr(w, "tokenizer.ggml.scores", QK_GGUF_F32, v->scores, v->n, err);
    if (!rc)
        rc = qk_gguf_w_kv_arr(w, "tokenizer.ggml.token_type", QK_GGUF_I32, v->types, v->n, err);
    if (!rc && v->n_merges)
        rc = qk_gguf_w_kv_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, v->n_merges, err);
    for (int i = 0; i < v->n_ids && !rc; i++)
        rc = qk_gguf_w_kv_u32(w, v->ids[i].key, v->ids[i].id, err);
    for (int i = 0; i < v->n_flags && !rc; i++)
        rc = qk_gguf_w_kv_bool(w, v->flags[i].key, v->flags[i].v, err);
    if (!rc && v->tmpl_name) {
        char key[96];
        snprintf(key, sizeof key, "tokenizer.chat_template.%s", v->tmpl_name);
        rc = qk_gguf_w_kv_str(w, key, v->tmpl, err);
        if (!rc)
            rc = qk_gguf_w_kv_arr_str(w, "tokenizer.chat_templates", (const char *const *)&v->tmpl_name, 1, err);
    }
    if (!rc && v->chat_template)
        rc = qk_gguf_w_kv_str(w, "tokenizer.chat_template", v->chat_template, err);
    if (!rc && v->lowercase >= 0)
        rc = qk_gguf_w_kv_bool(w, "tokenizer.ggml.normalizer.lowercase", v->lowercase, err);
    if (!rc && v->strip_accents >= 0)
        rc = qk_gguf_w_kv_bool(w, "tokenizer.ggml.normalizer.strip_accents", v->strip_accents, err);
    if (!rc && v->add_space_prefix >= 0 && v->space_prefix_last)
        rc = qk_gguf_w_kv_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix, err);
    return rc;
}
