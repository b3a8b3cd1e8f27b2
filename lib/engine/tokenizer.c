/* tokenizer.c - the vocabulary (token texts, scores, attributes, special ids,
 * add-BOS/EOS flags), special-token partitioning, dispatch to the SPM and
 * BPE tokenizers (tok_spm.c, tok_bpe.c); detokenizing is tok_decode.c's and
 * the GGUF / tokenizer.json loaders tok_load.c's.
 * Follows llama_vocab::impl of llama.cpp (src/llama-vocab.cpp, d32676d). */
#define QK_TOKENIZER_INTERNAL
#include "lib/engine/tokenizer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"
#include "lib/core/unicode.h"

/* ---- small containers ---------------------------------------------------- */

int qk_ids_push(qk_ids *a, int32_t id, qk_err *err)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return qk_errf(err, QK_EIO, "tokenizer: out of memory");
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}

static uint64_t fnv1a(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define FNV_SEED 0xcbf29ce484222325ull

/* Open-addressing table with room for n entries at load <= 1/2. */
static uint32_t *table_new(uint64_t n, uint64_t *mask)
{
    uint64_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    *mask = cap - 1;
    return calloc(cap, sizeof(uint32_t));
}

int32_t qk_tok_find(const qk_tokenizer *t, const char *text, size_t len)
{
    for (uint64_t h = fnv1a(FNV_SEED, text, len) & t->tab_mask;; h = (h + 1) & t->tab_mask) {
        uint32_t e = t->tab[h];
        if (!e)
            return QK_TOKEN_NULL;
        int32_t id = (int32_t)(e - 1);
        if (qk_tok_streq(qk_tok_ptr(t, id), t->len[id], text, len))
            return id;
    }
}

static uint64_t pair_hash(const char *l, size_t ln, const char *r, size_t rn)
{
    uint64_t h = fnv1a(FNV_SEED, l, ln);
    h = fnv1a(h ^ 0xff, "\x1f", 1);
    return fnv1a(h, r, rn);
}

int64_t qk_bpe_rank(const qk_tokenizer *t, const char *l, size_t ln, const char *r, size_t rn)
{
    if (!t->n_merges)
        return -1;
    for (uint64_t h = pair_hash(l, ln, r, rn) & t->mtab_mask;; h = (h + 1) & t->mtab_mask) {
        uint32_t e = t->mtab[h];
        if (!e)
            return -1;
        uint64_t i = e - 1;
        const char *m = t->merge_arena + t->m_off[i];
        if (qk_tok_streq(m, t->m_left[i], l, ln) && qk_tok_streq(m + t->m_left[i] + 1, t->m_right[i], r, rn))
            return (int64_t)i;
    }
}

/* ---- pre-tokenizer names ---------------------------------------------------- */

enum { PF_IGNORE_MERGES = 1, PF_ADD_BOS = 2, PF_KEEP_SPACES = 4, PF_NO_BOS_ID = 8, PF_ESCAPE_SPACES = 16 };

/* tokenizer.ggml.pre names llama.cpp accepts whose rules are implemented
 * here, with the flags its loader sets for them (llama_vocab::impl::load). */
static const struct pre_name {
    const char *name;
    int pre, flags;
} pre_names[] = {
    {"default", QK_PRE_DEFAULT, 0},
    {"llama-bpe", QK_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"llama3", QK_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"llama-v3", QK_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"falcon3", QK_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"falcon-h1", QK_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"pixtral", QK_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"midm-2.0", QK_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"lfm2", QK_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"jina-v5-nano", QK_PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS},
    {"dbrx", QK_PRE_LLAMA3, 0},
    {"smaug-bpe", QK_PRE_LLAMA3, 0},
    {"glm4", QK_PRE_LLAMA3, PF_NO_BOS_ID},
    {"chatglm-bpe", QK_PRE_LLAMA3, PF_NO_BOS_ID},
    {"deepseek-llm", QK_PRE_DEEPSEEK_LLM, PF_KEEP_SPACES},
    {"falcon", QK_PRE_FALCON, 0},
    {"starcoder", QK_PRE_STARCODER, 0},
    {"refact", QK_PRE_STARCODER, 0},
    {"command-r", QK_PRE_STARCODER, PF_KEEP_SPACES},
    {"smollm", QK_PRE_STARCODER, PF_KEEP_SPACES},
    {"codeshell", QK_PRE_STARCODER, 0},
    {"exaone", QK_PRE_STARCODER, 0},
    {"minerva-7b", QK_PRE_STARCODER, 0},
    {"mellum2", QK_PRE_STARCODER, 0},
    {"gpt-2", QK_PRE_GPT2, 0},
    {"phi-2", QK_PRE_GPT2, 0},
    {"jina-es", QK_PRE_GPT2, 0},
    {"jina-de", QK_PRE_GPT2, 0},
    {"gigachat", QK_PRE_GPT2, 0},
    {"jina-v2-es", QK_PRE_GPT2, 0},
    {"jina-v2-de", QK_PRE_GPT2, 0},
    {"a.x-4.0", QK_PRE_GPT2, 0},
    {"mellum", QK_PRE_GPT2, 0},
    {"modern-bert", QK_PRE_GPT2, 0},
    {"jina-v1-en", QK_PRE_GPT2, 0},
    {"jina-v2-code", QK_PRE_GPT2, 0},
    {"roberta-bpe", QK_PRE_GPT2, 0},
    {"exaone4", QK_PRE_GPT2, 0},
    {"mpt", QK_PRE_GPT2, 0},
    {"olmo", QK_PRE_GPT2, 0},
    {"jais", QK_PRE_GPT2, 0},
    {"trillion", QK_PRE_GPT2, PF_KEEP_SPACES},
    {"granite-docling", QK_PRE_GPT2, PF_KEEP_SPACES},
    {"qwen2", QK_PRE_QWEN2, PF_KEEP_SPACES},
    {"deepseek-r1-qwen", QK_PRE_QWEN2, PF_KEEP_SPACES},
    {"kormo", QK_PRE_QWEN2, PF_KEEP_SPACES},
    {"f2llmv2", QK_PRE_QWEN2, PF_KEEP_SPACES},
    {"megrez", QK_PRE_QWEN2, 0},
    {"stablelm2", QK_PRE_QWEN2, 0},
    {"hunyuan", QK_PRE_QWEN2, PF_KEEP_SPACES},
    {"solar-open", QK_PRE_QWEN2, PF_KEEP_SPACES},
    {"grok-2", QK_PRE_QWEN2, PF_KEEP_SPACES},
    {"minicpm5", QK_PRE_MINICPM5, PF_IGNORE_MERGES},
    {"deepseek-coder", QK_PRE_DEEPSEEK_CODER, PF_KEEP_SPACES},
    {"deepseek-v3", QK_PRE_DEEPSEEK3, PF_KEEP_SPACES},
    {"hunyuan-dense", QK_PRE_DEEPSEEK3, PF_KEEP_SPACES},
    {"joyai-llm", QK_PRE_DEEPSEEK3, PF_KEEP_SPACES},
    {"youtu", QK_PRE_YOUTU, PF_KEEP_SPACES | PF_IGNORE_MERGES},
    {"jais-2", QK_PRE_JAIS2, 0},
    {"gemma4", QK_PRE_GEMMA4, PF_ESCAPE_SPACES},
    {"granite-embed-multi-311m", QK_PRE_GEMMA4, PF_ESCAPE_SPACES},
    {"sarvam-moe", QK_PRE_GEMMA4, PF_ESCAPE_SPACES | PF_KEEP_SPACES},
    {"whitespace", QK_PRE_WHITESPACE, 0},
    {"qwen35", QK_PRE_QWEN35, PF_KEEP_SPACES},
    {"poro-chat", QK_PRE_PORO, PF_KEEP_SPACES},
    {"bloom", QK_PRE_PORO, 0},
    {"gpt3-finnish", QK_PRE_PORO, 0},
    {"viking", QK_PRE_VIKING, PF_KEEP_SPACES},
    {"tekken", QK_PRE_TEKKEN, PF_KEEP_SPACES | PF_IGNORE_MERGES | PF_ADD_BOS},
    {"exaone-moe", QK_PRE_EXAONE_MOE, 0},
    {"chameleon", QK_PRE_CHAMELEON, PF_ADD_BOS | PF_KEEP_SPACES},
    {"gpt-4o", QK_PRE_GPT4O, PF_KEEP_SPACES},
    {"llama4", QK_PRE_GPT4O, PF_KEEP_SPACES},
    {"kanana2", QK_PRE_GPT4O, PF_KEEP_SPACES},
    {"talkie", QK_PRE_GPT4O, PF_KEEP_SPACES},
    {"minimax-m2", QK_PRE_GPT4O, PF_KEEP_SPACES},
    {"granite-embed-multi-97m", QK_PRE_GRANITE_EMB_MULTI, PF_KEEP_SPACES | PF_IGNORE_MERGES},
    {"tiny_aya", QK_PRE_TINY_AYA, PF_KEEP_SPACES},
    {"cohere2moe", QK_PRE_TINY_AYA, PF_KEEP_SPACES},
    {"superbpe", QK_PRE_SUPERBPE, PF_KEEP_SPACES},
    {"bailingmoe", QK_PRE_BAILINGMOE, PF_KEEP_SPACES},
    {"bailingmoe2", QK_PRE_BAILINGMOE, PF_KEEP_SPACES},
    {"llada-moe", QK_PRE_BAILINGMOE, PF_KEEP_SPACES},
    {"seed-coder", QK_PRE_SEED_CODER, PF_KEEP_SPACES},
    {"kimi-k2", QK_PRE_KIMI_K2, PF_KEEP_SPACES},
    {"afmoe", QK_PRE_AFMOE, PF_KEEP_SPACES},
    {"laguna", QK_PRE_LAGUNA, PF_KEEP_SPACES},
};

static const struct pre_name *pre_lookup(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++)
        if (qk_tok_cstr_eq(name, len, pre_names[i].name))
            return &pre_names[i];
    return NULL;
}

int qk_tok_pre_from_name(const char *name, size_t len)
{
    const struct pre_name *p = pre_lookup(name, len);
    return p ? p->pre : -1;
}

const char *qk_tok_pre_name(int pre)
{
    /* the first name of the table with this pre-tokenizer */
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++)
        if (pre_names[i].pre == pre)
            return pre_names[i].name;
    return "?";
}

/* ---- building ------------------------------------------------------------- */

void qk_tok_spec_init(qk_tok_spec *s)
{
    memset(s, 0, sizeof *s);
    s->bos = s->eos = s->eot = s->eom = s->unk = s->sep = s->pad = s->mask = -2;
    s->fim_pre = s->fim_suf = s->fim_mid = s->fim_pad = s->fim_rep = s->fim_sep = -2;
    s->add_bos = s->add_eos = s->add_space_prefix = -1;
    s->lowercase = s->strip_accents = -1;
}

void qk_tok_free(qk_tokenizer *t)
{
    if (!t)
        return;
    free(t->arena);
    free(t->off);
    free(t->len);
    free(t->score);
    free(t->attr);
    free(t->tab);
    free(t->merge_arena);
    free(t->m_off);
    free(t->m_left);
    free(t->m_right);
    free(t->mtab);
    free(t->special);
    free(t->eog);
    free(t);
}

static int32_t attr_of_type(int32_t type)
{
    switch (type) {
    case QK_TT_UNKNOWN: return QK_ATTR_UNKNOWN;
    case QK_TT_UNUSED: return QK_ATTR_UNUSED;
    case QK_TT_NORMAL: return QK_ATTR_NORMAL;
    case QK_TT_CONTROL: return QK_ATTR_CONTROL;
    case QK_TT_USER_DEFINED: return QK_ATTR_USER_DEFINED;
    case QK_TT_BYTE: return QK_ATTR_BYTE;
    default: return QK_ATTR_UNDEFINED;
    }
}

/* Copy the token texts (an empty one becomes "[EMPTY_i]", as in llama.cpp)
 * and index them.  Two tokens with the same text are an error (llama.cpp
 * asserts). */
static int load_tokens(qk_tokenizer *t, const qk_tok_spec *s, const char *src, qk_err *err)
{
    uint32_t n = s->n_tokens;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        if (qk_ckd_add(&total, total, s->tokens[i].len ? s->tokens[i].len : 20))
            return qk_err_at(err, src, "tokenizer.ggml.tokens", 0, "token texts too large");
    if (total > SIZE_MAX - 1)
        return qk_err_at(err, src, "tokenizer.ggml.tokens", 0, "token texts too large");
    t->arena = malloc((size_t)total + 1);
    t->off = malloc(n * sizeof *t->off);
    t->len = malloc(n * sizeof *t->len);
    t->score = malloc(n * sizeof *t->score);
    t->attr = malloc(n * sizeof *t->attr);
    t->tab = table_new(n, &t->tab_mask);
    if (!t->arena || !t->off || !t->len || !t->score || !t->attr || !t->tab)
        return qk_tok_oom(err);
    uint64_t pos = 0;
    for (uint32_t i = 0; i < n; i++) {
        qk_str w = s->tokens[i];
        if (w.len > UINT32_MAX)
            return qk_err_at(err, src, "tokenizer.ggml.tokens", 0, "token %u too long", i);
        t->off[i] = pos;
        if (w.len) {
            memcpy(t->arena + pos, w.ptr, w.len);
            t->len[i] = (uint32_t)w.len;
        } else {
            t->len[i] = (uint32_t)snprintf(t->arena + pos, 21, "[EMPTY_%u]", i);
        }
        pos += t->len[i];
        if (t->len[i] > t->max_token_len)
            t->max_token_len = t->len[i];
        t->score[i] = s->scores ? s->scores[i] : 0.0f;
        t->attr[i] = s->types ? attr_of_type(s->types[i]) : QK_ATTR_NORMAL;
        if (qk_tok_find(t, qk_tok_ptr(t, (int32_t)i), t->len[i]) != QK_TOKEN_NULL)
            return qk_err_at(err, src, "tokenizer.ggml.tokens", 0, "token %u ('%.*s') appears twice", i,
                             (int)(t->len[i] > 64 ? 64 : t->len[i]), qk_tok_ptr(t, (int32_t)i));
        uint64_t h = fnv1a(FNV_SEED, qk_tok_ptr(t, (int32_t)i), t->len[i]) & t->tab_mask;
        while (t->tab[h])
            h = (h + 1) & t->tab_mask;
        t->tab[h] = i + 1;
    }
    return 0;
}

/* Merges "left right" split at the first space after position 0; a repeated
 * pair keeps its first rank (std::map::emplace). */
static int load_merges(qk_tokenizer *t, const qk_tok_spec *s, const char *src, qk_err *err)
{
    uint64_t n = s->n_merges, total = 0;
    if (n == 0)
        return 0;
    if (n >= UINT32_MAX)
        return qk_err_at(err, src, "tokenizer.ggml.merges", 0, "too many merges");
    for (uint64_t i = 0; i < n; i++)
        if (qk_ckd_add(&total, total, s->merges[i].len + 1) || s->merges[i].len > UINT32_MAX)
            return qk_err_at(err, src, "tokenizer.ggml.merges", 0, "merges too large");
    if (total > SIZE_MAX)
        return qk_err_at(err, src, "tokenizer.ggml.merges", 0, "merges too large");
    t->merge_arena = malloc((size_t)total);
    t->m_off = malloc(n * sizeof *t->m_off);
    t->m_left = malloc(n * sizeof *t->m_left);
    t->m_right = malloc(n * sizeof *t->m_right);
    t->mtab = table_new(n, &t->mtab_mask);
    if (!t->merge_arena || !t->m_off || !t->m_left || !t->m_right || !t->mtab)
        return qk_tok_oom(err);
    t->n_merges = n;
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        qk_str m = s->merges[i];
        char *d = t->merge_arena + pos;
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        t->m_off[i] = pos;
        if (sp) {
            t->m_left[i] = (uint32_t)(sp - m.ptr);
            t->m_right[i] = (uint32_t)(m.len - t->m_left[i] - 1);
            memcpy(d, m.ptr, m.len);
            pos += m.len;
        } else { /* no separator: the pair ("", "") */
            t->m_left[i] = t->m_right[i] = 0;
            d[0] = ' ';
            pos += 1;
        }
        const char *l = d, *r = d + t->m_left[i] + 1;
        if (qk_bpe_rank(t, l, t->m_left[i], r, t->m_right[i]) >= 0)
            continue;
        uint64_t h = pair_hash(l, t->m_left[i], r, t->m_right[i]) & t->mtab_mask;
        while (t->mtab[h])
            h = (h + 1) & t->mtab_mask;
        t->mtab[h] = (uint32_t)i + 1;
    }
    return 0;
}

static void add_attr_by_text(qk_tokenizer *t, const char *text, int32_t set, int32_t clear)
{
    int32_t id = qk_tok_find(t, text, strlen(text));
    if (id != QK_TOKEN_NULL)
        t->attr[id] = (t->attr[id] | set) & ~clear;
}

/* The id of the lowest-numbered token whose text is in list, or
 * QK_TOKEN_NULL: a hash lookup per text (token texts are unique). */
static int32_t lowest_in(const qk_tokenizer *t, const char *const *list)
{
    int32_t best = QK_TOKEN_NULL;
    for (; *list; list++) {
        int32_t id = qk_tok_find(t, *list, strlen(*list));
        if (id != QK_TOKEN_NULL && (best == QK_TOKEN_NULL || id < best))
            best = id;
    }
    return best;
}

/* The special-token id *slot, when still unset, becomes the lowest id whose
 * text is in list, marked CONTROL.  (llama.cpp walks an unordered_map, so
 * when several texts are present which one it picks is unspecified.) */
static void detect_special(qk_tokenizer *t, int32_t *slot, const char *const *list)
{
    if (*slot != QK_TOKEN_NULL)
        return;
    int32_t id = lowest_in(t, list);
    if (id != QK_TOKEN_NULL) {
        *slot = id;
        t->attr[id] |= QK_ATTR_CONTROL;
    }
}

/* The ids of the tokens whose texts are in list, in increasing id order
 * (as a walk over the vocabulary meets them); returns how many, at most
 * cap. */
static int ids_in(const qk_tokenizer *t, const char *const *list, int32_t *ids, int cap)
{
    int n = 0;
    for (; *list && n < cap; list++) {
        int32_t id = qk_tok_find(t, *list, strlen(*list));
        if (id != QK_TOKEN_NULL)
            ids[n++] = id;
    }
    qsort(ids, (size_t)n, sizeof *ids, qk_tok_cmp_i32);
    return n;
}

static int eog_add(qk_tokenizer *t, int32_t id)
{
    if (id == QK_TOKEN_NULL)
        return 0;
    for (uint32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id)
            return 0;
    t->eog[t->n_eog++] = id;
    return 0;
}

static void eog_remove(qk_tokenizer *t, int32_t id)
{
    for (uint32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) {
            t->eog[i] = t->eog[--t->n_eog];
            return;
        }
}

static bool eog_has_text(const qk_tokenizer *t, const char *text, int32_t *id)
{
    for (uint32_t i = 0; i < t->n_eog; i++)
        if (qk_tok_cstr_eq(qk_tok_ptr(t, t->eog[i]), t->len[t->eog[i]], text)) {
            if (id)
                *id = t->eog[i];
            return true;
        }
    return false;
}

/* Text-detected special tokens, end-of-generation set and the per-model
 * attribute fixes of llama_vocab::impl::load. */
static int detect_specials(qk_tokenizer *t)
{
    static const char *const eot[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
        "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
        "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>", NULL};
    static const char *const eom[] = {"<|eom_id|>", NULL};
    static const char *const fim_pre[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>",
        "<|code_prefix|>", "<|prefix|>", NULL};
    static const char *const fim_suf[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>",
        "<|code_suffix|>", "<|suffix|>", NULL};
    static const char *const fim_mid[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>",
        "<|code_middle|>", "<|middle|>", NULL};
    static const char *const fim_pad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
    static const char *const fim_rep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
        "<reponame>", NULL};
    static const char *const fim_sep[] = {"<|file_sep|>", NULL};
    static const char *const eog[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
        "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
        "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
        "<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
        "[e~[", NULL};
    static const char *const always_render[] = {"<|channel|>", "<|message|>", "<|start|>",
        "<|constrain|>", NULL};

    detect_special(t, &t->eot, eot);
    detect_special(t, &t->eom, eom);
    detect_special(t, &t->fim_pre, fim_pre);
    detect_special(t, &t->fim_suf, fim_suf);
    detect_special(t, &t->fim_mid, fim_mid);
    detect_special(t, &t->fim_pad, fim_pad);
    detect_special(t, &t->fim_rep, fim_rep);
    detect_special(t, &t->fim_sep, fim_sep);

    /* control tokens named "...unused..." are unused */
    for (uint32_t id = 0; id < t->n_vocab; id++)
        if ((t->attr[id] & QK_ATTR_CONTROL) && memmem(qk_tok_ptr(t, (int32_t)id), t->len[id], "unused", 6))
            t->attr[id] |= QK_ATTR_UNUSED;

    t->eog = malloc((t->n_vocab + 8) * sizeof *t->eog);
    if (!t->eog)
        return -1;
    eog_add(t, t->fim_pad);
    eog_add(t, t->fim_rep);
    eog_add(t, t->fim_sep);
    int32_t ids[64];
    int n_ids = ids_in(t, eog, ids, 64);
    for (int i = 0; i < n_ids; i++) {
        eog_add(t, ids[i]);
        t->attr[ids[i]] |= QK_ATTR_CONTROL;
    }
    n_ids = ids_in(t, always_render, ids, 64);
    for (int i = 0; i < n_ids; i++)
        t->attr[ids[i]] = QK_ATTR_USER_DEFINED;
    eog_add(t, t->eos);
    eog_add(t, t->eot);
    eog_add(t, t->eom);
    /* o200k_harmony / solar-open: "<|end|>" is not end-of-generation there */
    int32_t end_id;
    if (eog_has_text(t, "<|end|>", &end_id) &&
        ((eog_has_text(t, "<|return|>", NULL) && eog_has_text(t, "<|call|>", NULL)) ||
         ((eog_has_text(t, "<|call|>", NULL) || eog_has_text(t, "<|calls|>", NULL)) &&
          eog_has_text(t, "<|flush|>", NULL)))) {
        eog_remove(t, end_id);
        t->attr[end_id] = QK_ATTR_USER_DEFINED;
    }
    /* gemma4 / paddleocr: "</s>" is not end-of-generation there */
    int32_t s_id;
    if (eog_has_text(t, "<|tool_response>", NULL) && eog_has_text(t, "</s>", &s_id)) {
        eog_remove(t, s_id);
        t->attr[s_id] = QK_ATTR_NORMAL;
    }
    qsort(t->eog, t->n_eog, sizeof *t->eog, qk_tok_cmp_i32);
    return 0;
}

/* Tokens partitioned out of the text before tokenizing, longest text first
 * (llama.cpp's cache_special_tokens; ties by id here, where std::sort leaves
 * their order unspecified). */
typedef struct len_id {
    uint32_t len;
    int32_t id;
} len_id;

static int cmp_len_id(const void *a, const void *b)
{
    const len_id *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int sort_special(qk_tokenizer *t)
{
    len_id *v = malloc((t->n_special ? t->n_special : 1) * sizeof *v);
    if (!v)
        return -1;
    for (uint32_t i = 0; i < t->n_special; i++)
        v[i] = (len_id){t->len[t->special[i]], t->special[i]};
    qsort(v, t->n_special, sizeof *v, cmp_len_id);
    for (uint32_t i = 0; i < t->n_special; i++)
        t->special[i] = v[i].id;
    free(v);
    return 0;
}

static char ascii_lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

/* needle (lowercase) in hay lowercased, as llama.cpp matches model names */
static bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; hay && *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && ascii_lower(hay[i]) == needle[i])
            i++;
        if (i == n)
            return true;
    }
    return false;
}

static int build_special_cache(qk_tokenizer *t, const qk_tok_spec *s)
{
    t->special = malloc((t->n_vocab ? t->n_vocab : 1) * sizeof *t->special);
    if (!t->special)
        return -1;
    for (uint32_t id = 0; id < t->n_vocab; id++)
        if (t->attr[id] & (QK_ATTR_CONTROL | QK_ATTR_USER_DEFINED | QK_ATTR_UNKNOWN))
            t->special[t->n_special++] = (int32_t)id;
    if (sort_special(t))
        return -1;

    /* per-model attributes, by tokenizer / model / architecture name */
    const char *pre = s->pre ? s->pre : "";
    if (strstr(pre, "jina-v2-de") || strstr(pre, "jina-v2-es") || strstr(pre, "jina-v2-code") ||
        (s->arch && (strstr(s->arch, "nomic-bert-moe") || strstr(s->arch, "jina-bert-v3")))) {
        add_attr_by_text(t, "<mask>", QK_ATTR_LSTRIP, 0);
    } else if (contains_ci(s->name, "phi-3") || contains_ci(s->name, "phi3")) {
        for (uint32_t i = 0; i < t->n_special; i++)
            t->attr[t->special[i]] |= QK_ATTR_RSTRIP;
        add_attr_by_text(t, "</s>", QK_ATTR_RSTRIP, 0);
        add_attr_by_text(t, "<unk>", 0, QK_ATTR_RSTRIP);
        add_attr_by_text(t, "<s>", 0, QK_ATTR_RSTRIP);
        add_attr_by_text(t, "<|endoftext|>", 0, QK_ATTR_RSTRIP);
    } else if (contains_ci(s->name, "modern-bert")) {
        add_attr_by_text(t, "[MASK]", QK_ATTR_LSTRIP, 0);
    }
    return 0;
}

/* A special id from the spec: absent keeps the default (dropped when out of
 * range); out of range keeps the default, as llama.cpp does. */
static void set_special(int32_t *slot, int64_t given, uint32_t n_vocab)
{
    if (*slot >= 0 && (uint32_t)*slot >= n_vocab)
        *slot = QK_TOKEN_NULL;
    if (given >= 0 && given < (int64_t)n_vocab)
        *slot = (int32_t)given;
}

qk_tokenizer *qk_tok_new(const qk_tok_spec *s, const char *src, qk_err *err)
{
    if (s->type != QK_TOK_SPM && s->type != QK_TOK_BPE && s->type != QK_TOK_WPM) {
        qk_errf(err, QK_EINPUT, "%s: unsupported tokenizer type", src);
        return NULL;
    }
    if (s->n_tokens == 0 || s->n_tokens > INT32_MAX) {
        qk_err_at(err, src, "tokenizer.ggml.tokens", 0, "bad token count %u", s->n_tokens);
        return NULL;
    }
    qk_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        qk_tok_oom(err);
        return NULL;
    }
    t->type = s->type;
    t->n_vocab = s->n_tokens;
    t->eot = t->eom = t->sep = t->pad = t->mask = QK_TOKEN_NULL;
    t->fim_pre = t->fim_suf = t->fim_mid = t->fim_pad = t->fim_rep = t->fim_sep = QK_TOKEN_NULL;
    int pflags = 0;
    if (t->type == QK_TOK_SPM) {
        t->pre = QK_PRE_DEFAULT;
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_space_prefix = true;
        t->add_bos = true;
    } else if (t->type == QK_TOK_WPM) {
        t->pre = QK_PRE_DEFAULT;
        t->bos = 101, t->eos = QK_TOKEN_NULL, t->unk = 100, t->sep = 102, t->pad = 0, t->mask = 103;
        t->clean_spaces = true;
        t->add_bos = true;
    } else {
        t->bos = 11, t->eos = 11, t->unk = QK_TOKEN_NULL;
        t->clean_spaces = true;
        const char *pre = s->pre && *s->pre ? s->pre : "default";
        const struct pre_name *p = pre_lookup(pre, strlen(pre));
        if (!p) {
            qk_err_at(err, src, "tokenizer.ggml.pre", 0, "unknown or unsupported pre-tokenizer '%s'", pre);
            qk_tok_free(t);
            return NULL;
        }
        t->pre = p->pre;
        pflags = p->flags;
        t->ignore_merges = pflags & PF_IGNORE_MERGES;
        t->add_bos = pflags & PF_ADD_BOS;
        t->clean_spaces = !(pflags & PF_KEEP_SPACES);
        t->escape_spaces = pflags & PF_ESCAPE_SPACES;
        if (pflags & PF_NO_BOS_ID)
            t->bos = QK_TOKEN_NULL;
        if (s->no_default_ids)
            t->bos = t->eos = QK_TOKEN_NULL;
    }
    if (s->add_space_prefix >= 0)
        t->add_space_prefix = s->add_space_prefix;
    /* normalizer options (WordPiece; the "whitespace" pre-tokenizer does not lowercase) */
    t->lowercase = s->lowercase >= 0 ? s->lowercase : t->pre != QK_PRE_WHITESPACE;
    t->strip_accents = s->strip_accents >= 0 ? s->strip_accents : t->lowercase;
    if (load_tokens(t, s, src, err) || load_merges(t, s, src, err)) {
        qk_tok_free(t);
        return NULL;
    }
    uint32_t n = t->n_vocab;
    set_special(&t->bos, s->bos, n);
    set_special(&t->eos, s->eos, n);
    set_special(&t->eot, s->eot, n);
    set_special(&t->eom, s->eom, n);
    set_special(&t->unk, s->unk, n);
    set_special(&t->sep, s->sep, n);
    set_special(&t->pad, s->pad, n);
    set_special(&t->mask, s->mask, n);
    set_special(&t->fim_pre, s->fim_pre, n);
    set_special(&t->fim_suf, s->fim_suf, n);
    set_special(&t->fim_mid, s->fim_mid, n);
    set_special(&t->fim_pad, s->fim_pad, n);
    set_special(&t->fim_rep, s->fim_rep, n);
    set_special(&t->fim_sep, s->fim_sep, n);
    if (s->add_bos >= 0)
        t->add_bos = s->add_bos;
    if (s->add_eos >= 0)
        t->add_eos = s->add_eos;
    if (detect_specials(t) || build_special_cache(t, s)) {
        qk_tok_oom(err);
        qk_tok_free(t);
        return NULL;
    }
    return t;
}

/* ---- encoding -------------------------------------------------------------- */

/* A piece of the text: raw bytes [off, off+len), or a token (len == 0). */
typedef struct frag {
    size_t off, len;
    int32_t id;
} frag;

typedef struct frags {
    frag *v;
    size_t n, cap;
} frags;

static int frags_push(frags *a, frag f, qk_err *err)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        frag *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return qk_tok_oom(err);
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = f;
    return 0;
}

static bool is_c_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static const char *find_bytes(const char *hay, size_t hn, const char *needle, size_t nn)
{
    return nn <= hn ? memmem(hay, hn, needle, nn) : NULL;
}

/* Cut one raw fragment at every occurrence of the special token id
 * (tokenizer_st_partition's inner loop, with its LSTRIP/RSTRIP trimming). */
static int cut_fragment(const qk_tokenizer *t, const char *text, frag f, int32_t id, frags *out, qk_err *err)
{
    const char *tt = qk_tok_ptr(t, id);
    size_t tl = t->len[id];
    int32_t attr = t->attr[id];
    size_t base = f.off, blen = f.len;
    int rc = 0;
    for (;;) {
        const char *m = find_bytes(text + base, blen, tt, tl);
        if (!m) {
            if (blen)
                rc = frags_push(out, (frag){base, blen, QK_TOKEN_NULL}, err);
            return rc;
        }
        size_t mpos = (size_t)(m - text);
        if (mpos > base) {
            size_t ll = mpos - base;
            if (attr & QK_ATTR_LSTRIP)
                while (ll > 0 && is_c_space(text[base + ll - 1]))
                    ll--;
            if (ll && (rc = frags_push(out, (frag){base, ll, QK_TOKEN_NULL}, err)))
                return rc;
        }
        if ((rc = frags_push(out, (frag){mpos, 0, id}, err)))
            return rc;
        size_t end = base + blen;
        if (mpos + tl >= end)
            return 0;
        base = mpos + tl;
        blen = end - base;
        if (attr & QK_ATTR_RSTRIP)
            while (blen > 0 && is_c_space(text[base])) {
                base++;
                blen--;
            }
    }
}

/* tokenizer_st_partition: for each special token, longest first, split every
 * raw fragment around its occurrences.  Without parse_special, control and
 * unknown tokens stay text; user-defined ones are always split out. */
static int partition(const qk_tokenizer *t, const char *text, size_t n, bool parse_special, frags *out,
                     qk_err *err)
{
    frags cur = {0}, next = {0};
    int rc = n ? frags_push(&cur, (frag){0, n, QK_TOKEN_NULL}, err) : 0;
    for (uint32_t s = 0; s < t->n_special && !rc; s++) {
        int32_t id = t->special[s];
        if (!parse_special && (t->attr[id] & (QK_ATTR_CONTROL | QK_ATTR_UNKNOWN)))
            continue;
        if (!find_bytes(text, n, qk_tok_ptr(t, id), t->len[id]))
            continue; /* fast path: nowhere in the text */
        next.n = 0;
        for (size_t i = 0; i < cur.n && !rc; i++)
            rc = cur.v[i].id != QK_TOKEN_NULL ? frags_push(&next, cur.v[i], err)
                                             : cut_fragment(t, text, cur.v[i], id, &next, err);
        frags tmp = cur;
        cur = next;
        next = tmp;
    }
    free(next.v);
    if (rc) {
        free(cur.v);
        return rc;
    }
    *out = cur;
    return 0;
}

/* SPM fragment: optional leading space, then spaces escaped to U+2581. */
static int spm_fragment(const qk_tokenizer *t, const char *s, size_t n, bool prefix, qk_ids *out, qk_err *err)
{
    size_t spaces = prefix, len;
    for (size_t i = 0; i < n; i++)
        spaces += s[i] == ' ';
    if (n > (SIZE_MAX - 1) / 3)
        return qk_tok_oom(err);
    char *buf = malloc(n + 2 * spaces + 3);
    if (!buf)
        return qk_tok_oom(err);
    len = 0;
    if (prefix) {
        memcpy(buf, "\xe2\x96\x81", 3);
        len = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(buf + len, "\xe2\x96\x81", 3);
            len += 3;
        } else {
            buf[len++] = s[i];
        }
    }
    int rc = qk_spm_encode(t, buf, len, out, err);
    free(buf);
    return rc;
}

int qk_tok_encode(const qk_tokenizer *t, const char *text, size_t n, bool add_special, bool parse_special,
                  int32_t **ids, size_t *n_ids, qk_err *err)
{
    *ids = NULL;
    *n_ids = 0;
    if (n > INT32_MAX / 4)
        return qk_errf(err, QK_EINPUT, "tokenizer: text too long (%zu bytes)", n);
    frags fr = {0};
    qk_ids out = {0};
    /* WordPiece adds BOS (CLS) and SEP whatever its flags say */
    bool wpm = t->type == QK_TOK_WPM, add_bos = wpm || t->add_bos, add_eos = !wpm && t->add_eos;
    int32_t last = wpm ? t->sep : t->eos;
    if (add_special && ((add_bos && t->bos == QK_TOKEN_NULL) || ((add_eos || wpm) && last == QK_TOKEN_NULL)))
        return qk_errf(err, QK_EINPUT, "tokenizer: BOS/EOS is to be added but the vocabulary has none");
    int rc = partition(t, text, n, parse_special, &fr, err);
    if (!rc && add_special && add_bos)
        rc = qk_ids_push(&out, t->bos, err);
    bool prev_special = true; /* SPM: prefix a space to the first text */
    for (size_t i = 0; i < fr.n && !rc; i++) {
        frag f = fr.v[i];
        if (f.id != QK_TOKEN_NULL) {
            rc = qk_ids_push(&out, f.id, err);
            prev_special = true;
        } else if (t->type == QK_TOK_SPM) {
            rc = spm_fragment(t, text + f.off, f.len, t->add_space_prefix && prev_special, &out, err);
            prev_special = false;
        } else if (wpm) {
            rc = qk_wpm_encode(t, text + f.off, f.len, &out, err);
        } else {
            rc = qk_bpe_encode(t, text + f.off, f.len, &out, err);
        }
    }
    if (!rc && add_special && (add_eos || wpm))
        rc = qk_ids_push(&out, last, err);
    free(fr.v);
    if (rc) {
        free(out.v);
        return rc;
    }
    *ids = out.v;
    *n_ids = out.n;
    return 0;
}
