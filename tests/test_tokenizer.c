/* Tokenizers against llama.cpp's tokenizer test suites (goldens/vocab, see
 * its README) and against llama.cpp's tokenization of the stories260K
 * evaluation text (goldens/stories260K-eval).
 *
 * A suite is ggml-vocab-NAME.gguf (a vocabulary-only GGUF) with NAME.gguf.inp
 * (inputs separated by "\n__ggml_vocab_test__\n") and NAME.gguf.out (the
 * expected ids, one line per input).  As in llama.cpp's
 * tests/test-tokenizer-0.cpp, each input is tokenized with add_special =
 * false and parse_special = false and must give exactly the ids of its line. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "tests/testutil.h"
#define QK_TOKENIZER_INTERNAL
#include "lib/engine/tokenizer.h"

#define VOCAB "goldens/vocab/ggml-vocab-"

typedef struct suite {
    size_t n;
    char **text;
    size_t *len;
    char **line;     /* the matching line of the .out / .splits file */
    char *raw, *out;
} suite;

/* Split like read_tests() of test-tokenizer-0.cpp. */
static void suite_load(suite *s, const char *name, const char *ext)
{
    char path[256];
    size_t n_raw, n_out;
    snprintf(path, sizeof path, VOCAB "%s.gguf.inp", name);
    s->raw = tu_read(path, &n_raw);
    snprintf(path, sizeof path, VOCAB "%s.gguf.%s", name, ext);
    s->out = tu_read(path, &n_out);
    s->out = realloc(s->out, n_out + 1);
    s->out[n_out] = '\0';
    s->n = 0;
    s->text = NULL;
    s->len = NULL;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep);
    for (size_t pos = 0; pos < n_raw;) {
        const char *m = memmem(s->raw + pos, n_raw - pos, sep, sl);
        size_t end = m ? (size_t)(m - s->raw) : n_raw;
        s->text = realloc(s->text, (s->n + 1) * sizeof *s->text);
        s->len = realloc(s->len, (s->n + 1) * sizeof *s->len);
        s->text[s->n] = s->raw + pos;
        s->len[s->n] = end - pos;
        s->n++;
        pos = m ? end + sl : n_raw;
    }
    s->line = calloc(s->n, sizeof *s->line);
    char *p = s->out;
    for (size_t i = 0; i < s->n; i++) {
        cr_assert(*p, "%s.%s: fewer lines than inputs", name, ext);
        s->line[i] = p;
        char *nl = strchr(p, '\n');
        cr_assert(nl, "%s.%s: line %zu unterminated", name, ext, i + 1);
        *nl = '\0';
        p = nl + 1;
    }
    cr_assert_eq(*p, '\0', "%s.%s: more lines than inputs", name, ext);
    cr_assert_gt(s->n, 40, "%s: too few inputs", name);
}

static void suite_free(suite *s)
{
    free(s->text);
    free(s->len);
    free(s->line);
    free(s->raw);
    free(s->out);
}

/* The integers of a line ("474 287 29871" or "3 1 1"). */
static size_t parse_ints(const char *line, long *v, size_t cap)
{
    size_t n = 0;
    char *end;
    for (const char *p = line;; p = end) {
        long x = strtol(p, &end, 10);
        if (end == p)
            break;
        cr_assert_lt(n, cap);
        v[n++] = x;
    }
    return n;
}

static qk_tokenizer *open_vocab(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, VOCAB "%s.gguf", name);
    qk_gguf *g;
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&g, path, 0, &err), 0, "%s", err.msg);
    qk_tokenizer *t = qk_tok_from_gguf(g, &err);
    qk_gguf_close(g); /* the tokenizer keeps copies */
    cr_assert(t, "%s", err.msg);
    return t;
}

static void check_ids(const char *name, const char *what, size_t i, const char *text, size_t len,
                      const int32_t *ids, size_t n, const long *want, size_t n_want)
{
    bool same = n == n_want;
    for (size_t j = 0; same && j < n; j++)
        same = ids[j] == want[j];
    if (!same) {
        char got[2048] = "", exp[2048] = "";
        for (size_t j = 0; j < n && strlen(got) < sizeof got - 16; j++)
            snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids[j]);
        for (size_t j = 0; j < n_want && strlen(exp) < sizeof exp - 16; j++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), " %ld", want[j]);
        cr_assert_fail("%s %s case %zu '%.*s':\n  got     %s\n  expected%s", name, what, i, (int)len, text,
                       got, exp);
    }
}

/* orig: the full vocabulary's id of each token (compact vocabularies), or NULL. */
static void run_suite_mapped(qk_tokenizer *t, const char *name, const int64_t *orig, size_t n_orig)
{
    suite s;
    suite_load(&s, name, "out");
    long want[512];
    for (size_t i = 0; i < s.n; i++) {
        int32_t *ids;
        size_t n;
        qk_err err = {0};
        cr_assert_eq(qk_tok_encode(t, s.text[i], s.len[i], false, false, &ids, &n, &err), 0, "%s", err.msg);
        for (size_t j = 0; j < n && orig; j++) {
            cr_assert(ids[j] >= 0 && (size_t)ids[j] < n_orig);
            ids[j] = (int32_t)orig[ids[j]];
        }
        size_t nw = parse_ints(s.line[i], want, 512);
        check_ids(name, "ids", i, s.text[i], s.len[i], ids, n, want, nw);
        free(ids);
    }
    suite_free(&s);
}

static void run_suite_with(qk_tokenizer *t, const char *name) { run_suite_mapped(t, name, NULL, 0); }

/* A suite whose vocabulary is committed compacted (tools/compact_vocab.py):
 * ggml-vocab-NAME.compact.gguf keeps the tokens and merges the inputs can
 * use, renumbered; qk.vocab.orig_ids maps qk's ids back to the full
 * vocabulary's, which the .out file holds. */
static void run_compact_suite(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, VOCAB "%s.compact.gguf", name);
    qk_gguf *g;
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&g, path, 0, &err), 0, "%s", err.msg);
    qk_tokenizer *t = qk_tok_from_gguf(g, &err);
    cr_assert(t, "%s", err.msg);
    const qk_gguf_kv *kv = qk_gguf_find(g, "qk.vocab.orig_ids");
    cr_assert(kv && kv->v.type == QK_GGUF_ARRAY && kv->v.arr.n == qk_tok_n_vocab(t), "%s: qk.vocab.orig_ids", name);
    int64_t *orig = malloc(kv->v.arr.n * sizeof *orig);
    for (uint64_t i = 0; i < kv->v.arr.n; i++)
        orig[i] = qk_gguf_arr_i64(&kv->v, i);
    qk_gguf_close(g);
    run_suite_mapped(t, name, orig, kv ? (size_t)qk_tok_n_vocab(t) : 0);
    free(orig);
    qk_tok_free(t);
}

Test(tokenizer_suite, llama_bpe) { run_compact_suite("llama-bpe"); }
Test(tokenizer_suite, qwen2) { run_compact_suite("qwen2"); }
Test(tokenizer_suite, qwen35) { run_compact_suite("qwen35"); }
Test(tokenizer_suite, command_r) { run_compact_suite("command-r"); }
Test(tokenizer_suite, deepseek_coder) { run_compact_suite("deepseek-coder"); }
Test(tokenizer_suite, gemma_4) { run_compact_suite("gemma-4"); }
Test(tokenizer_suite, mpt) { run_compact_suite("mpt"); }
Test(tokenizer_suite, refact) { run_compact_suite("refact"); }
Test(tokenizer_suite, bert_bge) { run_compact_suite("bert-bge"); }

/* Every pre-tokenizer over GPT-2's vocabulary against llama.cpp's
 * llama-tokenize with the same tokenizer.ggml.pre (goldens/vocab/pretok-ids.txt,
 * tools/gen_pretok_ids.py): the gpt-2 suite's .inp file and pretok-extra.inp,
 * each tokenized whole, id for id. */
Test(tokenizer_pretok, every_pre_tokenizer_vs_llama_cpp)
{
    static const char *const files[] = {VOCAB "gpt-2.gguf.inp", "goldens/vocab/pretok-extra.inp"};
    char *texts[2];
    size_t lens[2];
    for (int i = 0; i < 2; i++)
        texts[i] = tu_read(files[i], &lens[i]);
    size_t nr;
    char *ref = tu_read("goldens/vocab/pretok-ids.txt", &nr);
    ref = realloc(ref, nr + 1);
    ref[nr] = '\0';
    qk_gguf *g;
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&g, VOCAB "gpt-2.gguf", 0, &err), 0, "%s", err.msg);
    size_t n_pre = 0;
    long *want = malloc(8192 * sizeof *want);
    for (char *p = ref; *p;) {
        cr_assert(!strncmp(p, "## ", 3), "pretok-ids.txt: expected a ## line");
        char *nl = strchr(p, '\n');
        *nl = '\0';
        const char *name = p + 3;
        p = nl + 1;
        qk_tokenizer *t = qk_tok_from_gguf_pre(g, name, &err);
        cr_assert(t, "%s: %s", name, err.msg);
        for (int i = 0; i < 2; i++) {
            nl = strchr(p, '\n');
            cr_assert(nl, "pretok-ids.txt: %s: too few lines", name);
            *nl = '\0';
            size_t nw = parse_ints(p, want, 8192);
            p = nl + 1;
            int32_t *ids;
            size_t n;
            cr_assert_eq(qk_tok_encode(t, texts[i], lens[i], false, false, &ids, &n, &err), 0, "%s", err.msg);
            check_ids(name, files[i], 0, "(whole file)", 12, ids, n, want, nw);
            free(ids);
        }
        qk_tok_free(t);
        n_pre++;
    }
    cr_assert_geq(n_pre, 25, "pretok-ids.txt: only %zu pre-tokenizers", n_pre);
    free(want);
    qk_gguf_close(g);
    free(ref);
    for (int i = 0; i < 2; i++)
        free(texts[i]);
}

/* Every regex of every pre-tokenizer compiles. */
Test(tokenizer_pretok, every_regex_compiles)
{
    qk_err err = {0};
    cr_assert_eq(qk_pre_check_all(&err), 0, "%s", err.msg);
}

static void run_suite(const char *name)
{
    qk_tokenizer *t = open_vocab(name);
    run_suite_with(t, name);
    qk_tok_free(t);
}

Test(tokenizer_suite, llama_spm) { run_suite("llama-spm"); }
Test(tokenizer_suite, phi_3) { run_suite("phi-3"); }
Test(tokenizer_suite, gpt_2) { run_suite("gpt-2"); }
Test(tokenizer_suite, falcon) { run_suite("falcon"); }
Test(tokenizer_suite, starcoder) { run_suite("starcoder"); }
Test(tokenizer_suite, deepseek_llm) { run_suite("deepseek-llm"); }

/* ---- tokenizer.json ------------------------------------------------------------- */

/* A text buffer allocated once, big enough for the whole document. */
typedef struct tbuf {
    char *p;
    size_t len, cap;
} tbuf;

static void put(tbuf *b, const char *s, size_t n)
{
    cr_assert_leq(b->len + n, b->cap);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void puts_(tbuf *b, const char *s) { put(b, s, strlen(s)); }

/* s[0..n) as a JSON string literal. */
static void put_json_str(tbuf *b, const char *s, size_t n)
{
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\')
            put(b, "\\", 1);
        put(b, s + i, 1);
    }
    put(b, "\"", 1);
}

/* GPT-2's tokenizer.json assembled from its vocab.json and merges.txt (the
 * files OpenAI published) must tokenize the gpt-2 suite as the GGUF does. */
Test(tokenizer_hf_json, gpt_2_suite)
{
    size_t nv, nm;
    char *vocab = tu_read("goldens/vocab/gpt2_vocab.json", &nv);
    char *merges = tu_read("goldens/vocab/gpt2_merges.txt", &nm);
    tbuf b = {malloc(nv + 3 * nm + 4096), 0, nv + 3 * nm + 4096};
    puts_(&b, "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 50256, \"content\": "
              "\"<|endoftext|>\", \"special\": true}], \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
              "\"add_prefix_space\": false, \"use_regex\": true}, \"model\": {\"type\": \"BPE\", \"vocab\": ");
    put(&b, vocab, nv);
    puts_(&b, ", \"merges\": [");
    size_t count = 0;
    for (size_t pos = 0; pos < nm;) {
        char *nl = memchr(merges + pos, '\n', nm - pos);
        size_t end = nl ? (size_t)(nl - merges) : nm;
        if (end > pos && !(end - pos >= 8 && memcmp(merges + pos, "#version", 8) == 0)) {
            if (count++)
                puts_(&b, ", ");
            put_json_str(&b, merges + pos, end - pos);
        }
        pos = end + 1;
    }
    puts_(&b, "]}}");
    char *json = b.p;
    size_t len = b.len;
    cr_assert_eq(count, 50000);

    qk_err err = {0};
    qk_tokenizer *t = qk_tok_from_hf_json_mem(json, len, "gpt2-tokenizer.json", &err);
    cr_assert(t, "%s", err.msg);
    cr_assert_eq(qk_tok_n_vocab(t), 50257);
    cr_assert_eq(qk_tok_pre(t), QK_PRE_GPT2);
    cr_assert_eq(qk_tok_eos(t), 50256);
    run_suite_with(t, "gpt-2");
    qk_tok_free(t);

    /* a pre-tokenizer it cannot reproduce is refused, not approximated */
    const char *bad = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                      "\"pre_tokenizer\": {\"type\": \"Whitespace\"}}";
    cr_assert_null(qk_tok_from_hf_json_mem(bad, strlen(bad), "bad.json", &err));
    cr_assert_eq(err.code, QK_EINPUT);
    free(json);
    free(vocab);
    free(merges);
}

/* ---- pre-tokenizer splits (llama-bpe, qwen2: no vocabulary here) ---------- */

/* qk's split of every input with pre forced onto the GPT-2 vocabulary must
 * equal the split the model's original regex makes (tools/gen_pretok_splits.py). */
static void run_splits(const char *name, int pre)
{
    qk_tokenizer *t = open_vocab("gpt-2");
    qk_tok_set_pre(t, pre);
    suite s;
    suite_load(&s, name, "splits");
    long want[512];
    for (size_t i = 0; i < s.n; i++) {
        size_t *lens, n;
        qk_err err = {0};
        cr_assert_eq(qk_tok_pre_split(t, s.text[i], s.len[i], &lens, &n, &err), 0, "%s", err.msg);
        int32_t got[512];
        cr_assert_lt(n, 512);
        for (size_t j = 0; j < n; j++)
            got[j] = (int32_t)lens[j];
        size_t nw = parse_ints(s.line[i], want, 512);
        check_ids(name, "split", i, s.text[i], s.len[i], got, n, want, nw);
        free(lens);
    }
    suite_free(&s);
    qk_tok_free(t);
}

Test(tokenizer_split, gpt_2_regex) { run_splits("gpt-2", QK_PRE_GPT2); }
Test(tokenizer_split, llama_bpe_regex) { run_splits("llama-bpe", QK_PRE_LLAMA3); }
Test(tokenizer_split, qwen2_regex) { run_splits("qwen2", QK_PRE_QWEN2); }

/* Where the two splits differ only in how digits group, the ids through the
 * GPT-2 vocabulary must still agree piece by piece with the Llama 3 / Qwen2
 * shapes: "3333333" is 333|333|3 for Llama 3 and seven pieces for Qwen2. */
Test(tokenizer_split, digit_groups)
{
    qk_tokenizer *t = open_vocab("gpt-2");
    static const struct { int pre; const char *text; size_t want[8]; size_t n; } cases[] = {
        {QK_PRE_LLAMA3, "3333333", {3, 3, 1}, 3},
        {QK_PRE_QWEN2, "3333333", {1, 1, 1, 1, 1, 1, 1}, 7},
        {QK_PRE_GPT2, "3333333", {7}, 1},
        {QK_PRE_LLAMA3, "HELLO'S x", {5, 2, 2}, 3},
        {QK_PRE_GPT2, "HELLO'S x", {5, 1, 1, 2}, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        qk_tok_set_pre(t, cases[c].pre);
        size_t *lens, n;
        qk_err err = {0};
        cr_assert_eq(qk_tok_pre_split(t, cases[c].text, strlen(cases[c].text), &lens, &n, &err), 0);
        cr_assert_eq(n, cases[c].n, "case %zu: %zu pieces", c, n);
        for (size_t j = 0; j < n; j++)
            cr_assert_eq(lens[j], cases[c].want[j], "case %zu piece %zu", c, j);
        free(lens);
    }
    qk_tok_free(t);
}

/* ---- round trips -------------------------------------------------------------- */

/* The space clean-up llama_detokenize applies to BPE vocabularies (except
 * deepseek-llm's) changes these; inputs holding one are not expected back. */
static bool has_cleaned_pattern(const char *s, size_t n)
{
    static const char *const pat[] = {" ?", " !", " .", " ,", " ' ", " 's", " 'm", " 're", " 've"};
    for (size_t i = 0; i < sizeof pat / sizeof pat[0]; i++)
        if (memmem(s, n, pat[i], strlen(pat[i])))
            return true;
    return false;
}

static void run_roundtrip(const char *name, bool cleans)
{
    qk_tokenizer *t = open_vocab(name);
    suite s;
    suite_load(&s, name, "out");
    size_t checked = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (cleans && has_cleaned_pattern(s.text[i], s.len[i]))
            continue;
        int32_t *ids;
        size_t n, dn;
        char *back;
        qk_err err = {0};
        cr_assert_eq(qk_tok_encode(t, s.text[i], s.len[i], false, false, &ids, &n, &err), 0);
        cr_assert_eq(qk_tok_decode(t, ids, n, false, false, &back, &dn, &err), 0);
        cr_assert(dn == s.len[i] && memcmp(back, s.text[i], dn) == 0, "%s case %zu: '%.*s' came back as '%s'",
                  name, i, (int)s.len[i], s.text[i], back);
        free(back);
        free(ids);
        checked++;
    }
    cr_assert_gt(checked, s.n / 2);
    suite_free(&s);
    qk_tok_free(t);
}

Test(tokenizer_roundtrip, llama_spm) { run_roundtrip("llama-spm", false); }
Test(tokenizer_roundtrip, phi_3) { run_roundtrip("phi-3", false); }
Test(tokenizer_roundtrip, gpt_2) { run_roundtrip("gpt-2", true); }
Test(tokenizer_roundtrip, falcon) { run_roundtrip("falcon", true); }
Test(tokenizer_roundtrip, starcoder) { run_roundtrip("starcoder", true); }
Test(tokenizer_roundtrip, deepseek_llm) { run_roundtrip("deepseek-llm", false); }

/* ---- stories260K: the evaluation text as llama.cpp tokenized it -------------- */

Test(tokenizer_stories, eval_64k)
{
    qk_gguf *g;
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&g, "goldens/models/stories260K/stories260K-f32.gguf", 0, &err), 0, "%s", err.msg);
    qk_tokenizer *t = qk_tok_from_gguf(g, &err);
    cr_assert(t, "%s", err.msg);
    qk_gguf_close(g);
    cr_assert_eq(qk_tok_type(t), QK_TOK_SPM);
    cr_assert(qk_tok_add_bos(t));
    cr_assert_eq(qk_tok_bos(t), 1);
    cr_assert_eq(qk_tok_eos(t), 2);

    size_t n_text, n_ref;
    char *text = tu_read("goldens/stories260K-eval/eval-64k.txt", &n_text);
    char *ref = tu_read("goldens/stories260K-eval/eval-64k.tokens.txt", &n_ref);
    ref = realloc(ref, n_ref + 1);
    ref[n_ref] = '\0';
    int32_t *ids;
    size_t n;
    cr_assert_eq(qk_tok_encode(t, text, n_text, true, false, &ids, &n, &err), 0, "%s", err.msg);

    /* "[1, 301, 427, ...]" */
    size_t k = 0;
    char *p = ref;
    while (*p && *p != '[')
        p++;
    cr_assert_eq(*p, '[');
    p++;
    for (;;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        cr_assert_lt(k, n, "more reference ids than ours (%zu)", n);
        cr_assert_eq(ids[k], v, "id %zu: got %d, llama.cpp %ld", k, ids[k], v);
        k++;
        p = end;
        while (*p == ',' || *p == ' ' || *p == '\n')
            p++;
    }
    cr_assert_eq(*p, ']');
    cr_assert_eq(k, n, "llama.cpp made %zu ids, we %zu", k, n);
    cr_assert_gt(n, 10000);

    /* and back: the ids after BOS detokenize to the text (llama_detokenize
     * drops the prefixed space only when no BOS precedes) */
    char *back;
    size_t bn;
    cr_assert_eq(qk_tok_decode(t, ids + 1, n - 1, false, false, &back, &bn, &err), 0);
    cr_assert(bn == n_text && memcmp(back, text, bn) == 0, "eval text does not round-trip");
    free(back);
    free(ids);
    free(text);
    free(ref);
    qk_tok_free(t);
}

/* ---- special tokens, flags, edge cases ---------------------------------------- */

/* Ids below come from the llama-spm suite: "Hello world" is 15043 3186. */
Test(tokenizer_special, spm_parse_special_and_bos)
{
    qk_tokenizer *t = open_vocab("llama-spm");
    int32_t *ids;
    size_t n;
    qk_err err = {0};
    /* parse_special: "<s>" is BOS, and the text after it gets the space prefix again */
    cr_assert_eq(qk_tok_encode(t, "Hello<s>world", 13, false, true, &ids, &n, &err), 0);
    cr_assert_eq(n, 3);
    cr_assert(ids[0] == 15043 && ids[1] == 1 && ids[2] == 3186);
    free(ids);
    /* without it, "<s>" is plain text */
    cr_assert_eq(qk_tok_encode(t, "Hello<s>world", 13, false, false, &ids, &n, &err), 0);
    cr_assert_gt(n, 3);
    for (size_t i = 0; i < n; i++)
        cr_assert_neq(ids[i], 1);
    free(ids);
    /* add_special prepends BOS (tokenizer.ggml.add_bos_token = true), no EOS */
    cr_assert_eq(qk_tok_encode(t, "Hello world", 11, true, false, &ids, &n, &err), 0);
    cr_assert(n == 3 && ids[0] == 1 && ids[1] == 15043 && ids[2] == 3186);
    /* control tokens render only when asked */
    char buf[16];
    cr_assert_eq(qk_tok_piece(t, 1, buf, sizeof buf, 0, false), 0);
    cr_assert_eq(qk_tok_piece(t, 1, buf, sizeof buf, 0, true), 3);
    cr_assert_eq(memcmp(buf, "<s>", 3), 0);
    /* too small a buffer reports the size needed */
    cr_assert_eq(qk_tok_piece(t, 15043, buf, 2, 0, false), -6);
    cr_assert_eq(qk_tok_detokenize(t, ids, (int32_t)n, buf, 4, false, false), -12);
    cr_assert(qk_tok_is_eog(t, 2) && !qk_tok_is_eog(t, 1));
    free(ids);
    qk_tok_free(t);
}

Test(tokenizer_special, bpe_add_bos_flags)
{
    /* deepseek-llm sets add_bos_token (BOS 100000); gpt-2 sets none */
    qk_tokenizer *d = open_vocab("deepseek-llm"), *g = open_vocab("gpt-2");
    int32_t *a, *b;
    size_t na, nb;
    qk_err err = {0};
    cr_assert_eq(qk_tok_encode(d, "Hello", 5, true, false, &a, &na, &err), 0);
    cr_assert(na >= 2 && a[0] == 100000);
    cr_assert_eq(qk_tok_encode(g, "Hello", 5, true, false, &b, &nb, &err), 0);
    cr_assert(nb == 1 && b[0] != 50256);
    free(a);
    free(b);
    qk_tok_free(d);
    qk_tok_free(g);
}

/* Invalid UTF-8 never fails: BPE sees U+FFFD as llama.cpp does; SPM falls
 * back to byte tokens and gives the bytes back - except that SPM cuts
 * characters by lead byte alone, so a stray lead byte swallows the escaped
 * space after it, which then comes back as the raw bytes of U+2581 (as in
 * llama.cpp). */
Test(tokenizer_special, invalid_utf8)
{
    static const char bad[] = "a\xff\xfe b\xc3 \xe2\x82 \xf0\x9f\x98";
    const char *names[] = {"llama-spm", "gpt-2", "falcon", "starcoder", "deepseek-llm"};
    for (size_t k = 0; k < 5; k++) {
        qk_tokenizer *t = open_vocab(names[k]);
        int32_t *ids;
        size_t n;
        qk_err err = {0};
        cr_assert_eq(qk_tok_encode(t, bad, sizeof bad - 1, false, false, &ids, &n, &err), 0, "%s", names[k]);
        cr_assert_gt(n, 0);
        free(ids);
        qk_tok_free(t);
    }
    qk_tokenizer *t = open_vocab("llama-spm");
    static const struct { const char *in, *out; } rt[] = {
        {"a\x80\x80" "b c\xc3", "a\x80\x80" "b c\xc3"},
        {"\xff b", "\xff\xe2\x96\x81" "b"},
    };
    for (size_t k = 0; k < 2; k++) {
        int32_t *ids;
        size_t n, bn;
        char *back;
        qk_err err = {0};
        cr_assert_eq(qk_tok_encode(t, rt[k].in, strlen(rt[k].in), false, false, &ids, &n, &err), 0);
        cr_assert_eq(qk_tok_decode(t, ids, n, false, false, &back, &bn, &err), 0);
        cr_assert(bn == strlen(rt[k].out) && memcmp(back, rt[k].out, bn) == 0, "case %zu", k);
        free(back);
        free(ids);
    }
    qk_tok_free(t);
}

Test(tokenizer_special, bad_spec)
{
    qk_str toks[2] = {{"a", 1}, {"a", 1}};
    qk_tok_spec s;
    qk_tok_spec_init(&s);
    s.type = QK_TOK_BPE;
    s.n_tokens = 2;
    s.tokens = toks;
    qk_err err = {0};
    cr_assert_null(qk_tok_new(&s, "dup", &err)); /* same text twice */
    cr_assert_eq(err.code, QK_EINPUT);
    toks[1] = (qk_str){"b", 1};
    s.pre = "no-such-pre";
    cr_assert_null(qk_tok_new(&s, "pre", &err));
    cr_assert_eq(err.code, QK_EINPUT);
    s.pre = "gpt-2";
    qk_tokenizer *t = qk_tok_new(&s, "ok", &err);
    cr_assert(t, "%s", err.msg);
    qk_tok_free(t);
}
