/* tokenizer.h - text <-> token ids, matching llama.cpp (src/llama-vocab.cpp at
 * d32676d) id for id.
 *
 * Three vocabulary types:
 *   SPM  tokenizer.ggml.model = "llama": SentencePiece-style merging by token
 *        score, spaces escaped as U+2581, byte fallback <0xXX>  (lib/engine/tok_spm.c)
 *   BPE  tokenizer.ggml.model = "gpt2": byte-level BPE by merge rank after a
 *        pre-tokenizer chosen by tokenizer.ggml.pre (lib/engine/tok_pretok.c,
 *        lib/engine/tok_bpe.c); "gemma4": the same on raw UTF-8
 *   WPM  tokenizer.ggml.model = "bert": WordPiece, longest match (lib/engine/tok_wpm.c)
 *
 * qk_tok_encode() is llama_tokenize(vocab, text, add_special, parse_special):
 * add_special adds BOS/EOS as the vocabulary's add-BOS/add-EOS flags say;
 * parse_special lets control tokens written in the text ("<s>") become their
 * ids.  User-defined tokens are always matched, as in llama.cpp.
 * qk_tok_piece() is llama_token_to_piece() and qk_tok_detokenize() is
 * llama_detokenize(), including its leading-space and space-cleaning rules.
 *
 * A tokenizer is immutable once built and may be shared between threads.
 * Token texts are copied: the source (a GGUF mapping) may be closed after. */
#ifndef QK_TOKENIZER_H
#define QK_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "formats/gguf.h"
#include "lib/core/jsonp.h"

typedef struct qk_tokenizer qk_tokenizer;

#define QK_TOKEN_NULL (-1)

enum qk_tok_type { QK_TOK_SPM = 1, QK_TOK_BPE = 2, QK_TOK_WPM = 3 };

/* Pre-tokenizers: one per distinct regex list of llama.cpp's
 * llm_tokenizer_bpe (lib/engine/tok_pretok.c holds the lists); several
 * tokenizer.ggml.pre names share one (qk_tok_pre_from_name). */
enum qk_tok_pre {
    QK_PRE_DEFAULT = 0,        /* "default" (and SPM vocabularies) */
    QK_PRE_GPT2,               /* "gpt-2", "phi-2", "mpt", "olmo", "jais", ... */
    QK_PRE_LLAMA3,             /* "llama-bpe", "llama3", "dbrx", "smaug-bpe", "chatglm-bpe", ... */
    QK_PRE_QWEN2,              /* "qwen2", "stablelm2", "hunyuan", "grok-2", ... */
    QK_PRE_DEEPSEEK_LLM,       /* "deepseek-llm" */
    QK_PRE_FALCON,             /* "falcon" */
    QK_PRE_STARCODER,          /* "starcoder", "refact", "command-r", "smollm", "exaone", ... */
    QK_PRE_JAIS2,              /* "jais-2" */
    QK_PRE_DEEPSEEK3,          /* "deepseek-v3", "hunyuan-dense", "joyai-llm" */
    QK_PRE_YOUTU,              /* "youtu" */
    QK_PRE_DEEPSEEK_CODER,     /* "deepseek-coder" */
    QK_PRE_QWEN35,             /* "qwen35" */
    QK_PRE_PORO,               /* "poro-chat", "bloom", "gpt3-finnish" */
    QK_PRE_VIKING,             /* "viking" */
    QK_PRE_TEKKEN,             /* "tekken" */
    QK_PRE_CHAMELEON,          /* "chameleon" */
    QK_PRE_GPT4O,              /* "gpt-4o", "llama4", "minimax-m2", ... */
    QK_PRE_GRANITE_EMB_MULTI,  /* "granite-embed-multi-97m" */
    QK_PRE_TINY_AYA,           /* "tiny_aya", "cohere2moe" */
    QK_PRE_KIMI_K2,            /* "kimi-k2" */
    QK_PRE_SUPERBPE,           /* "superbpe" */
    QK_PRE_BAILINGMOE,         /* "bailingmoe", "bailingmoe2", "llada-moe" */
    QK_PRE_SEED_CODER,         /* "seed-coder" */
    QK_PRE_AFMOE,              /* "afmoe" */
    QK_PRE_LAGUNA,             /* "laguna" */
    QK_PRE_EXAONE_MOE,         /* "exaone-moe" */
    QK_PRE_GEMMA4,             /* "gemma4", "sarvam-moe", ...: raw UTF-8, spaces as U+2581 */
    QK_PRE_MINICPM5,           /* "minicpm5" */
    QK_PRE_WHITESPACE,         /* "whitespace" */
    QK_PRE_COUNT
};

/* Token types as stored in tokenizer.ggml.token_type (llama_token_type). */
enum {
    QK_TT_UNDEFINED = 0, QK_TT_NORMAL = 1, QK_TT_UNKNOWN = 2, QK_TT_CONTROL = 3,
    QK_TT_USER_DEFINED = 4, QK_TT_UNUSED = 5, QK_TT_BYTE = 6,
};

/* Token attributes (llama_token_attr bits). */
enum {
    QK_ATTR_UNDEFINED = 0,
    QK_ATTR_UNKNOWN = 1 << 0, QK_ATTR_UNUSED = 1 << 1, QK_ATTR_NORMAL = 1 << 2,
    QK_ATTR_CONTROL = 1 << 3, QK_ATTR_USER_DEFINED = 1 << 4, QK_ATTR_BYTE = 1 << 5,
    QK_ATTR_NORMALIZED = 1 << 6, QK_ATTR_LSTRIP = 1 << 7, QK_ATTR_RSTRIP = 1 << 8,
    QK_ATTR_SINGLE_WORD = 1 << 9,
};

/* A vocabulary given as arrays (what the GGUF and tokenizer.json loaders
 * build; also handy for tests).  Strings need not be NUL-terminated. */
typedef struct qk_tok_spec {
    int type;                  /* QK_TOK_SPM or QK_TOK_BPE */
    const char *pre;           /* tokenizer.ggml.pre; NULL: "default" */
    bool no_default_ids;       /* BPE without llama.cpp's default BOS/EOS 11 ("gemma4" model) */
    const char *name;          /* general.name (per-model attribute fixes); may be NULL */
    const char *arch;          /* general.architecture; may be NULL */
    uint32_t n_tokens;
    const qk_str *tokens;
    const float *scores;       /* n_tokens or NULL (all 0) */
    const int32_t *types;      /* n_tokens QK_TT_* or NULL (all NORMAL) */
    uint64_t n_merges;         /* BPE: "left right" strings, rank = index */
    const qk_str *merges;
    /* Special token ids; -2 = not given (use the type's default). */
    int64_t bos, eos, eot, eom, unk, sep, pad, mask;
    int64_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    /* -1 = not given (use the type's default), else 0/1. */
    int add_bos, add_eos, add_space_prefix;
    int lowercase, strip_accents;  /* tokenizer.ggml.normalizer.* (WordPiece) */
} qk_tok_spec;

/* A spec with every optional field "not given". */
void qk_tok_spec_init(qk_tok_spec *s);

qk_tokenizer *qk_tok_new(const qk_tok_spec *spec, const char *src, qk_err *err);
/* From a GGUF's tokenizer.ggml.* keys. */
qk_tokenizer *qk_tok_from_gguf(const qk_gguf *g, qk_err *err);
/* From a Hugging Face tokenizer.json: a "BPE" model with a ByteLevel
 * pre-tokenizer, alone (GPT-2's regex) or after a Split whose regex is
 * GPT-2's, Llama 3's or Qwen2's.  added_tokens become control tokens
 * ("special": true) or user-defined ones.  tokenizer.json does not name BOS
 * and EOS: "<|endoftext|>", "<|begin_of_text|>"/"<|end_of_text|>" or
 * "<s>"/"</s>" are used when present.  (Metaspace, i.e. SentencePiece-style
 * BPE, is not supported yet.)  The _mem form parses buf[0..n); name is for
 * messages. */
qk_tokenizer *qk_tok_from_hf_json(const char *path, qk_err *err);
qk_tokenizer *qk_tok_from_hf_json_mem(const char *buf, size_t n, const char *name, qk_err *err);
/* The same from a parsed tokenizer.json; pre (a tokenizer.ggml.pre name)
 * replaces the file's pre-tokenizer when not NULL (transformers' tokenizer
 * classes that rebuild it, e.g. Qwen2Tokenizer). */
qk_tokenizer *qk_tok_from_hf_root(const qk_jsonv *root, const char *name, const char *pre, qk_err *err);
void qk_tok_free(qk_tokenizer *t);

/* llama_tokenize: *ids is malloc'd (free() it; NULL when *n_ids is 0).
 * Returns 0 or an error code (bad input: a byte with no token; memory). */
int qk_tok_encode(const qk_tokenizer *t, const char *text, size_t n, bool add_special,
                  bool parse_special, int32_t **ids, size_t *n_ids, qk_err *err);

/* llama_token_to_piece: writes at most len bytes (no NUL); returns the piece
 * length, or minus the length needed when len is too small.  lstrip: skip up
 * to that many leading spaces.  special: render control/unknown tokens. */
int32_t qk_tok_piece(const qk_tokenizer *t, int32_t id, char *buf, int32_t len,
                     int32_t lstrip, bool special);
/* llama_detokenize: same return convention as qk_tok_piece. */
int32_t qk_tok_detokenize(const qk_tokenizer *t, const int32_t *ids, int32_t n_ids, char *text,
                          int32_t text_len_max, bool remove_special, bool unparse_special);
/* Detokenize into a malloc'd NUL-terminated string. */
int qk_tok_decode(const qk_tokenizer *t, const int32_t *ids, size_t n_ids, bool remove_special,
                  bool unparse_special, char **out, size_t *out_len, qk_err *err);

/* Pre-tokenizer split of text (BPE vocabularies; SPM: one piece): the
 * words before byte-level encoding, as byte lengths into text's re-encoding
 * (text itself unless it holds invalid UTF-8).  *lens is malloc'd. */
int qk_tok_pre_split(const qk_tokenizer *t, const char *text, size_t n, size_t **lens,
                     size_t *n_lens, qk_err *err);

uint32_t qk_tok_n_vocab(const qk_tokenizer *t);
int qk_tok_type(const qk_tokenizer *t);
int qk_tok_pre(const qk_tokenizer *t);
/* Change the pre-tokenizer of a BPE vocabulary (tests use it to run another
 * model's splitting rules over the GPT-2 vocabulary). */
void qk_tok_set_pre(qk_tokenizer *t, int pre);
/* enum qk_tok_pre from a tokenizer.ggml.pre name; -1 when unknown. */
int qk_tok_pre_from_name(const char *name, size_t len);
const char *qk_tok_pre_name(int pre);

int32_t qk_tok_bos(const qk_tokenizer *t);
int32_t qk_tok_eos(const qk_tokenizer *t);
int32_t qk_tok_eot(const qk_tokenizer *t);
int32_t qk_tok_unk(const qk_tokenizer *t);
int32_t qk_tok_pad(const qk_tokenizer *t);
bool qk_tok_add_bos(const qk_tokenizer *t);
bool qk_tok_add_eos(const qk_tokenizer *t);
bool qk_tok_add_space_prefix(const qk_tokenizer *t);
/* End-of-generation token (EOS, EOT, EOM, "<|im_end|>", ...). */
bool qk_tok_is_eog(const qk_tokenizer *t, int32_t id);
/* Stored text / score / QK_ATTR_* of a token; id must be < n_vocab. */
qk_str qk_tok_text(const qk_tokenizer *t, int32_t id);
float qk_tok_score(const qk_tokenizer *t, int32_t id);
int32_t qk_tok_attr(const qk_tokenizer *t, int32_t id);
/* Id of a token text; QK_TOKEN_NULL when absent. */
int32_t qk_tok_find(const qk_tokenizer *t, const char *text, size_t len);

/* ---- internal: shared by lib/engine/tokenizer.c, lib/engine/tok_spm.c, lib/engine/tok_bpe.c ---- */
#ifdef QK_TOKENIZER_INTERNAL

#include <string.h>

/* A growable array of token ids. */
typedef struct qk_ids {
    int32_t *v;
    size_t n, cap;
} qk_ids;
int qk_ids_push(qk_ids *a, int32_t id, qk_err *err);

/* Growable array of sizes (pre-tokenizer piece lengths). */
typedef struct qk_sizes {
    size_t *v;
    size_t n, cap;
} qk_sizes;
int qk_sizes_push(qk_sizes *a, size_t x, qk_err *err);

struct qk_tokenizer {
    int type, pre;
    uint32_t n_vocab;
    char *arena;            /* all token texts */
    uint64_t *off;          /* token i: arena + off[i], len[i] bytes */
    uint32_t *len;
    float *score;
    int32_t *attr;
    uint32_t *tab;          /* text -> id+1 (0: empty), open addressing */
    uint64_t tab_mask;

    /* BPE merges: rank i pairs merge_arena[m_off[i]..] split at m_split[i]. */
    uint64_t n_merges;
    char *merge_arena;
    uint64_t *m_off;
    uint32_t *m_left, *m_right;  /* byte lengths of the two halves */
    uint32_t *mtab;              /* (left,right) -> rank+1 */
    uint64_t mtab_mask;

    int32_t bos, eos, eot, eom, unk, sep, pad, mask, linefeed;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_space_prefix, clean_spaces, ignore_merges, escape_spaces;
    bool lowercase, strip_accents;  /* WordPiece normalizer */
    uint32_t max_token_len;

    int32_t *special;       /* control/user-defined/unknown ids, longest text first */
    uint32_t n_special;
    int32_t *eog;           /* sorted */
    uint32_t n_eog;
};

static inline const char *qk_tok_ptr(const qk_tokenizer *t, int32_t id) { return t->arena + t->off[id]; }

/* Helpers the tokenizer's files (tokenizer.c, tok_*.c) share. */
static inline bool qk_tok_streq(const char *a, size_t an, const char *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}
static inline bool qk_tok_cstr_eq(const char *a, size_t an, const char *c)
{
    return qk_tok_streq(a, an, c, strlen(c));
}
static inline int qk_tok_oom(qk_err *err) { return qk_errf(err, QK_EIO, "tokenizer: out of memory"); }
static inline int qk_tok_cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* SPM: append the ids of one raw-text fragment (already space-escaped). */
int qk_spm_encode(const qk_tokenizer *t, const char *text, size_t n, qk_ids *out, qk_err *err);
/* WPM: split, normalize and cover one raw-text fragment (lib/engine/tok_wpm.c). */
int qk_wpm_encode(const qk_tokenizer *t, const char *text, size_t n, qk_ids *out, qk_err *err);
/* BPE: pre-tokenize, byte-encode and merge one raw-text fragment. */
int qk_bpe_encode(const qk_tokenizer *t, const char *text, size_t n, qk_ids *out, qk_err *err);
/* Merge rank of the pair (left, right); -1 when not a merge. */
int64_t qk_bpe_rank(const qk_tokenizer *t, const char *l, size_t ln, const char *r, size_t rn);
/* Pre-tokenize cpts[0..n) with pre; piece lengths (in code points) to out
 * (lib/engine/tok_pretok.c). */
int qk_pre_split_cpts(int pre, const uint32_t *cpts, size_t n, qk_sizes *out, qk_err *err);
/* Whether pre's words are merged as raw UTF-8 (llama.cpp's byte_encode = false). */
bool qk_pre_raw_utf8(int pre);
/* qk_tok_from_gguf with tokenizer.ggml.pre replaced by pre (NULL: as stored);
 * the tests run every pre-tokenizer over one vocabulary with it. */
qk_tokenizer *qk_tok_from_gguf_pre(const qk_gguf *g, const char *pre, qk_err *err);
/* Compile every regex of every pre-tokenizer (a self-check for the tests). */
int qk_pre_check_all(qk_err *err);

#endif

#endif
