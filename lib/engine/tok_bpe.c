/* tok_bpe.c - byte-level BPE ("gpt2" vocabularies): the pre-tokenizers chosen
 * by tokenizer.ggml.pre, GPT-2's byte-to-unicode encoding and merging by
 * merge rank.  Implements llama.cpp's unicode_regex_split() (src/unicode.cpp)
 * and llm_tokenizer_bpe_session (src/llama-vocab.cpp) at d32676d.
 *
 * Pre-tokenizing.  llama.cpp gives each pre-tokenizer a list of regexes;
 * each regex in turn cuts every current piece further, keeping both its
 * matches and the text between them as pieces.  A few regexes have
 * hand-written splitters in unicode.cpp (GPT-2, Llama 3, Qwen2); the rest run
 * through std::regex, over a "collapsed" text when they use \p{..} classes
 * (each non-ASCII code point replaced by one byte standing for its category,
 * and non-ASCII white space by \v) or else over the code points with
 * non-ASCII white space replaced by \v.  Below, every regex is an explicit C
 * function, with the regex it implements and the std::regex details that
 * decide its edge cases in its comment.  All work on code points; a piece
 * is a run of code points and splitting never looks across pieces. */
#define QK_TOKENIZER_INTERNAL
#include "lib/core/heap.h"
#include "lib/engine/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/unicode.h"

/* ---- character classes ---------------------------------------------------- */

static uint16_t flags_at(const uint32_t *c, size_t n, size_t i)
{
    return i < n ? qk_ucd_flags(c[i]) : 0;
}

#define IS(f, what) (((f) & (what)) != 0)

/* \p{P} and the listed ASCII symbols, as the collapsed std::regex sees them:
 * ASCII by the explicit ranges, other code points by category (white space
 * first: it collapses to \v, which no class here holds).  ASCII punctuation
 * and symbols are 0x21-0x2F, 0x3A-0x40, 0x5B-0x60, 0x7B-0x7E; "default" omits
 * the backquote 0x60, "falcon" keeps it. */
static bool is_punct_run_char(uint32_t c, bool backquote)
{
    if (c < 0x80) {
        if (c == '`')
            return backquote;
        return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) ||
               (c >= 0x7b && c <= 0x7e);
    }
    uint16_t f = qk_ucd_flags(c);
    return !IS(f, QK_UCD_WHITESPACE) && (f & QK_UCD_CATEGORIES) == QK_UCD_PUNCTUATION;
}

/* \p{N} on the collapsed text: ASCII digits, or a non-ASCII number. */
static bool is_collapsed_number(uint32_t c)
{
    if (c < 0x80)
        return c >= '0' && c <= '9';
    uint16_t f = qk_ucd_flags(c);
    return !IS(f, QK_UCD_WHITESPACE) && (f & QK_UCD_CATEGORIES) == QK_UCD_NUMBER;
}

/* The code point std::wregex sees: non-ASCII white space becomes \v. */
static uint32_t wide_char(uint32_t c)
{
    return c > 0x7f && IS(qk_ucd_flags(c), QK_UCD_WHITESPACE) ? 0x0b : c;
}

/* \s of std::wregex in the "C" locale: ASCII white space only. */
static bool is_wide_space(uint32_t w)
{
    return w == ' ' || (w >= 0x09 && w <= 0x0d);
}

typedef struct cpt_range { uint32_t lo, hi; } cpt_range;

static bool in_ranges(uint32_t w, const cpt_range *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (w >= r[i].lo && w <= r[i].hi)
            return true;
    return false;
}

/* deepseek-llm's letter class, transcribed from its regex (llama-vocab.cpp). */
static const cpt_range ds_letters[] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
    {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};
/* deepseek-llm's punctuation class [!-/:-~！-／：-～‘-‟　-。]; note that ':-~'
 * includes the ASCII letters and that U+3000 never matches (it is white
 * space, so the text holds \v there). */
static const cpt_range ds_punct[] = {
    {0x0021, 0x002F}, {0x003A, 0x007E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F},
    {0x3000, 0x3002},
};
/* deepseek-llm's CJK class [一-龥ࠀ-一가-퟿]. */
static const cpt_range ds_cjk[] = {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- pieces ----------------------------------------------------------------- */

int qk_sizes_push(qk_sizes *a, size_t x, qk_err *err)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        size_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return qk_errf(err, QK_EIO, "tokenizer: out of memory");
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

/* Emitting pieces of one input piece: the unicode.cpp "_add_token" helper.
 * Empty pieces are dropped. */
typedef struct cutter {
    qk_sizes *out;
    size_t prev_end;
    int rc;
    qk_err *err;
} cutter;

static void cut(cutter *k, size_t end)
{
    if (end > k->prev_end && !k->rc)
        k->rc = qk_sizes_push(k->out, end - k->prev_end, k->err);
    k->prev_end = end;
}

typedef int (*split_fn)(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err);

/* ---- hand-written splitters of unicode.cpp ------------------------------------ */

/* 's|'t|'re|'ve|'m|'ll|'d at c[pos] (case-insensitive when fold): its length, or 0. */
static size_t contraction(const uint32_t *c, size_t n, size_t pos, bool fold)
{
    if (c[pos] != '\'' || pos + 1 >= n)
        return 0;
    uint32_t a = fold ? qk_ucd_tolower(c[pos + 1]) : c[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (pos + 2 >= n)
        return 0;
    uint32_t b = fold ? qk_ucd_tolower(c[pos + 2]) : c[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* Length of the white-space run at pos. */
static size_t space_run(const uint32_t *c, size_t n, size_t pos)
{
    size_t k = 0;
    while (IS(flags_at(c, n, pos + k), QK_UCD_WHITESPACE))
        k++;
    return k;
}

#define NOT_LNW(f) (!IS(f, QK_UCD_WHITESPACE | QK_UCD_LETTER | QK_UCD_NUMBER))

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (unicode_regex_split_custom_gpt2; used by gpt-2, falcon, starcoder, default). */
static int split_gpt2(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err)
{
    cutter k = {out, 0, 0, err};
    size_t pos = 0;
    while (pos < n && !k.rc) {
        uint32_t cpt = c[pos];
        uint16_t flags = qk_ucd_flags(cpt);
        size_t clen = contraction(c, n, pos, false);
        if (clen) {
            pos += clen;
            cut(&k, pos);
            continue;
        }
        uint16_t f2 = cpt == ' ' ? flags_at(c, n, pos + 1) : flags;
        if (IS(f2, QK_UCD_LETTER) || IS(f2, QK_UCD_NUMBER) || (NOT_LNW(f2) && f2)) {
            /*  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ : the class of the
             * first character after the optional space decides */
            uint16_t want = IS(f2, QK_UCD_LETTER) ? QK_UCD_LETTER : IS(f2, QK_UCD_NUMBER) ? QK_UCD_NUMBER : 0;
            pos += cpt == ' ';
            if (want) {
                while (IS(f2, want))
                    f2 = flags_at(c, n, ++pos);
            } else {
                while (NOT_LNW(f2) && f2)
                    f2 = flags_at(c, n, ++pos);
            }
            cut(&k, pos);
            continue;
        }
        size_t ws = space_run(c, n, pos);
        if (ws > 1 && pos + ws < n) {
            /* \s+(?!\S): leave the last space to prefix the next word */
            pos += ws - 1;
            cut(&k, pos);
            continue;
        }
        pos += ws ? ws : 1; /* \s+, or one unmatched character */
        cut(&k, pos);
    }
    return k.rc;
}

/* Llama 3 (digits_max = 3) and Qwen2 (digits_max = 1):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * (unicode_regex_split_custom_llama3 / _qwen2, whose \p{N} is \p{N}{1,1}). */
static int split_llama3_like(const uint32_t *c, size_t n, qk_sizes *out, size_t digits_max, qk_err *err)
{
    cutter k = {out, 0, 0, err};
    size_t pos = 0;
    while (pos < n && !k.rc) {
        uint32_t cpt = c[pos];
        uint16_t flags = qk_ucd_flags(cpt);
        size_t clen = contraction(c, n, pos, true);
        if (clen) {
            pos += clen;
            cut(&k, pos);
            continue;
        }
        /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (!(cpt == '\r' || cpt == '\n' || IS(flags, QK_UCD_NUMBER)) &&
            (IS(flags, QK_UCD_LETTER) || IS(flags_at(c, n, pos + 1), QK_UCD_LETTER))) {
            pos++;
            while (IS(flags_at(c, n, pos), QK_UCD_LETTER))
                pos++;
            cut(&k, pos);
            continue;
        }
        /* \p{N}{1,digits_max}, repeated over a longer run */
        if (IS(flags, QK_UCD_NUMBER)) {
            size_t ini = pos;
            while (IS(flags_at(c, n, pos), QK_UCD_NUMBER)) {
                if (++pos - ini >= digits_max) {
                    cut(&k, pos);
                    ini = pos;
                }
            }
            cut(&k, pos);
            continue;
        }
        /*  ?[^\s\p{L}\p{N}]+[\r\n]*  (unicode.cpp tests the first character's
         * own flags for being defined, and the one after the space for class) */
        uint16_t f2 = cpt == ' ' ? flags_at(c, n, pos + 1) : flags;
        if (NOT_LNW(f2) && flags) {
            pos += cpt == ' ';
            while (NOT_LNW(f2) && f2)
                f2 = flags_at(c, n, ++pos);
            while (pos < n && (c[pos] == '\r' || c[pos] == '\n'))
                pos++;
            cut(&k, pos);
            continue;
        }
        /* \s*[\r\n]+ : up to the last \r or \n of the white-space run */
        size_t ws = 0, last_rn = 0;
        while (IS(flags_at(c, n, pos + ws), QK_UCD_WHITESPACE)) {
            if (c[pos + ws] == '\r' || c[pos + ws] == '\n')
                last_rn = pos + ws + 1;
            ws++;
        }
        if (last_rn) {
            pos = last_rn;
            cut(&k, pos);
            continue;
        }
        if (ws > 1 && pos + ws < n) { /* \s+(?!\S) */
            pos += ws - 1;
            cut(&k, pos);
            continue;
        }
        pos += ws ? ws : 1; /* \s+, or one unmatched character */
        cut(&k, pos);
    }
    return k.rc;
}

static int split_llama3(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err)
{
    return split_llama3_like(c, n, out, 3, err);
}

static int split_qwen2(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err)
{
    return split_llama3_like(c, n, out, 1, err);
}

/* ---- std::regex splitters --------------------------------------------------- */

/* unicode_regex_split_stl: every match and every gap between matches becomes a
 * piece.  find(c, n, from, &b, &e) reports the leftmost match at or after
 * from (ECMAScript: leftmost start, greedy quantifiers), false when none. */
typedef bool (*match_fn)(const uint32_t *c, size_t n, size_t from, size_t *b, size_t *e);

static int split_by_matches(const uint32_t *c, size_t n, qk_sizes *out, match_fn find, qk_err *err)
{
    cutter k = {out, 0, 0, err};
    size_t b, e;
    for (size_t from = 0; from < n && find(c, n, from, &b, &e); from = e) {
        cut(&k, b);
        cut(&k, e);
    }
    cut(&k, n);
    return k.rc;
}

/* Leftmost run of characters satisfying pred. */
#define RUN_FINDER(name, pred)                                                       \
    static bool name(const uint32_t *c, size_t n, size_t from, size_t *b, size_t *e) \
    {                                                                                \
        size_t i = from;                                                             \
        while (i < n && !(pred(c[i])))                                               \
            i++;                                                                     \
        if (i == n)                                                                  \
            return false;                                                            \
        *b = i;                                                                      \
        while (i < n && (pred(c[i])))                                                \
            i++;                                                                     \
        *e = i;                                                                      \
        return true;                                                                 \
    }

#define PUNCT_DEFAULT(x) is_punct_run_char(x, false)
#define PUNCT_FALCON(x) is_punct_run_char(x, true)
#define DS_CJK(x) in_ranges(wide_char(x), ds_cjk, N_OF(ds_cjk))
/* [\p{P}\$\+<=>\^~\|]+  ("default") */
RUN_FINDER(find_punct_default, PUNCT_DEFAULT)
/* [\p{P}\$\+<=>\^~\|`]+  ("falcon") */
RUN_FINDER(find_punct_falcon, PUNCT_FALCON)
/* \p{N}+ */
RUN_FINDER(find_numbers, is_collapsed_number)
/* [一-龥ࠀ-一가-퟿]+  (deepseek-llm) */
RUN_FINDER(find_ds_cjk, DS_CJK)

/* \p{N}: one number character. */
static bool find_number(const uint32_t *c, size_t n, size_t from, size_t *b, size_t *e)
{
    for (size_t i = from; i < n; i++)
        if (is_collapsed_number(c[i])) {
            *b = i;
            *e = i + 1;
            return true;
        }
    return false;
}

/* [0-9][0-9][0-9]: three ASCII digits, left to right without overlap. */
static bool find_3digits(const uint32_t *c, size_t n, size_t from, size_t *b, size_t *e)
{
    for (size_t i = from; i + 3 <= n; i++) {
        bool d = true;
        for (size_t j = i; j < i + 3 && d; j++)
            d = c[j] >= '0' && c[j] <= '9';
        if (d) {
            *b = i;
            *e = i + 3;
            return true;
        }
    }
    return false;
}

/* [\r\n]: one carriage return or line feed. */
static bool find_crlf(const uint32_t *c, size_t n, size_t from, size_t *b, size_t *e)
{
    for (size_t i = from; i < n; i++)
        if (c[i] == '\r' || c[i] == '\n') {
            *b = i;
            *e = i + 1;
            return true;
        }
    return false;
}

/* \s?[CLASS]+ over the wide text: starts at the first i where CLASS holds, or
 * where \s holds and CLASS holds at i+1 (the optional space is greedy). */
static bool find_space_opt_run(const uint32_t *c, size_t n, size_t from, size_t *b, size_t *e,
                               const cpt_range *cls, size_t ncls)
{
    for (size_t i = from; i < n; i++) {
        size_t start = i;
        uint32_t w = wide_char(c[i]);
        if (is_wide_space(w) && i + 1 < n && in_ranges(wide_char(c[i + 1]), cls, ncls))
            i++;
        else if (!in_ranges(w, cls, ncls))
            continue;
        while (i < n && in_ranges(wide_char(c[i]), cls, ncls))
            i++;
        *b = start;
        *e = i;
        return true;
    }
    return false;
}

static bool find_ds_letters(const uint32_t *c, size_t n, size_t from, size_t *b, size_t *e)
{
    return find_space_opt_run(c, n, from, b, e, ds_letters, N_OF(ds_letters));
}

static bool find_ds_punct(const uint32_t *c, size_t n, size_t from, size_t *b, size_t *e)
{
    return find_space_opt_run(c, n, from, b, e, ds_punct, N_OF(ds_punct));
}

/* \s+$ : the white space ending the piece ($ is the end of the piece). */
static bool find_trailing_space(const uint32_t *c, size_t n, size_t from, size_t *b, size_t *e)
{
    size_t i = n;
    while (i > from && is_wide_space(wide_char(c[i - 1])))
        i--;
    if (i == n)
        return false;
    *b = i;
    *e = n;
    return true;
}

#define MATCH_SPLITTER(name, finder)                                            \
    static int name(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err) \
    {                                                                           \
        return split_by_matches(c, n, out, finder, err);                       \
    }
MATCH_SPLITTER(split_punct_default, find_punct_default)
MATCH_SPLITTER(split_punct_falcon, find_punct_falcon)
MATCH_SPLITTER(split_numbers, find_numbers)
MATCH_SPLITTER(split_number, find_number)
MATCH_SPLITTER(split_3digits, find_3digits)
MATCH_SPLITTER(split_crlf, find_crlf)
MATCH_SPLITTER(split_ds_letters, find_ds_letters)
MATCH_SPLITTER(split_ds_punct, find_ds_punct)
MATCH_SPLITTER(split_trailing_space, find_trailing_space)
MATCH_SPLITTER(split_ds_cjk, find_ds_cjk)

/* The regex lists of llm_tokenizer_bpe's constructor, in order. */
static const split_fn pre_steps[QK_PRE_COUNT][7] = {
    [QK_PRE_DEFAULT] = {split_punct_default, split_gpt2, split_numbers, split_3digits},
    [QK_PRE_GPT2] = {split_gpt2},
    [QK_PRE_LLAMA3] = {split_llama3},
    [QK_PRE_QWEN2] = {split_qwen2},
    [QK_PRE_DEEPSEEK_LLM] = {split_crlf, split_ds_letters, split_ds_punct, split_trailing_space,
                             split_ds_cjk, split_numbers},
    [QK_PRE_FALCON] = {split_punct_falcon, split_gpt2, split_3digits},
    [QK_PRE_STARCODER] = {split_number, split_gpt2},
};

int qk_pre_split_cpts(int pre, const uint32_t *cpts, size_t n, qk_sizes *out, qk_err *err)
{
    qk_sizes cur = {0}, next = {0};
    int rc = 0;
    if (pre < 0 || pre >= QK_PRE_COUNT)
        pre = QK_PRE_DEFAULT;
    if (n)
        rc = qk_sizes_push(&cur, n, err);
    for (size_t s = 0; s < N_OF(pre_steps[0]) && pre_steps[pre][s] && !rc; s++) {
        next.n = 0;
        size_t start = 0;
        for (size_t i = 0; i < cur.n && !rc; i++) {
            rc = pre_steps[pre][s](cpts + start, cur.v[i], &next, err);
            start += cur.v[i];
        }
        qk_sizes t = cur;
        cur = next;
        next = t;
    }
    for (size_t i = 0; i < cur.n && !rc; i++)
        rc = qk_sizes_push(out, cur.v[i], err);
    free(cur.v);
    free(next.v);
    return rc;
}

/* ---- merging ------------------------------------------------------------------ */

typedef struct bpe_sym {
    int32_t prev, next;
    size_t off, n;
} bpe_sym;

typedef struct bpe_bigram {
    int32_t left, right;
    int64_t rank;
    size_t ln, rn;          /* the halves' lengths when queued */
} bpe_bigram;


/* Priority: lower rank first, then smaller left index. */
static bool bpe_before(const void *pa, const void *pb)
{
    const bpe_bigram *a = pa, *b = pb;
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}


typedef struct bpe_ctx {
    const qk_tokenizer *t;
    const char *w;           /* the byte-encoded word */
    bpe_sym *sym;
    size_t n_sym, cap_sym;
    qk_heap heap;
} bpe_ctx;

static int add_bigram(bpe_ctx *c, int32_t left, int32_t right, qk_err *err)
{
    if (left < 0 || right < 0)
        return 0;
    const bpe_sym *l = &c->sym[left], *r = &c->sym[right];
    int64_t rank = qk_bpe_rank(c->t, c->w + l->off, l->n, c->w + r->off, r->n);
    if (rank < 0)
        return 0;
    bpe_bigram b = {left, right, rank, l->n, r->n};
    return qk_heap_push(&c->heap, &b, err);
}

/* One symbol's ids: its token, else a token per raw byte of its (encoded)
 * text where one exists - llama.cpp's fallback, which rarely finds any. */
static int emit_word_symbol(const qk_tokenizer *t, const char *s, size_t n, qk_ids *out, qk_err *err)
{
    int32_t id = qk_tok_find(t, s, n);
    if (id != QK_TOKEN_NULL)
        return qk_ids_push(out, id, err);
    for (size_t j = 0; j < n; j++) {
        id = qk_tok_find(t, s + j, 1);
        if (id != QK_TOKEN_NULL) {
            int rc = qk_ids_push(out, id, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Merge one byte-encoded word w[0..n) and append its ids. */
static int bpe_word(bpe_ctx *c, const char *w, size_t n, qk_ids *out, qk_err *err)
{
    const qk_tokenizer *t = c->t;
    if (t->ignore_merges && qk_tok_find(t, w, n) != QK_TOKEN_NULL)
        return emit_word_symbol(t, w, n, out, err);
    if (n > c->cap_sym) {
        bpe_sym *s = realloc(c->sym, n * sizeof *s);
        if (!s)
            return qk_errf(err, QK_EIO, "tokenizer: out of memory");
        c->sym = s;
        c->cap_sym = n;
    }
    c->w = w;
    c->n_sym = 0;
    c->heap.n = 0;
    for (size_t off = 0; off < n;) {
        size_t len = qk_utf8_len((uint8_t)w[off]);
        if (len > n - off)
            len = n - off;
        bpe_sym *s = &c->sym[c->n_sym];
        s->off = off;
        s->n = len;
        s->prev = (int32_t)c->n_sym - 1;
        off += len;
        s->next = off == n ? -1 : (int32_t)c->n_sym + 1;
        c->n_sym++;
    }
    int rc = 0;
    for (size_t i = 1; i < c->n_sym && !rc; i++)
        rc = add_bigram(c, (int32_t)i - 1, (int32_t)i, err);
    while (c->heap.n && !rc) {
        bpe_bigram b;
        qk_heap_pop(&c->heap, &b);
        bpe_sym *l = &c->sym[b.left], *r = &c->sym[b.right];
        /* outdated when either half changed since it was queued */
        if (l->n == 0 || r->n == 0 || l->n != b.ln || r->n != b.rn)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            c->sym[r->next].prev = b.left;
        rc = add_bigram(c, l->prev, b.left, err);
        if (!rc)
            rc = add_bigram(c, b.left, l->next, err);
    }
    for (size_t i = 0; i < c->n_sym && !rc; i++)
        if (c->sym[i].n)
            rc = emit_word_symbol(t, w + c->sym[i].off, c->sym[i].n, out, err);
    return rc;
}

/* Decode text like unicode_cpts_from_utf8 into a malloc'd array. */
static int decode_cpts(const char *text, size_t n, uint32_t **cpts, size_t *n_cpts, qk_err *err)
{
    uint32_t *c = malloc((n ? n : 1) * sizeof *c);
    if (!c)
        return qk_errf(err, QK_EIO, "tokenizer: out of memory");
    size_t k = 0;
    for (size_t off = 0; off < n;) {
        size_t adv;
        c[k++] = qk_utf8_decode(text + off, n - off, &adv);
        off += adv;
    }
    *cpts = c;
    *n_cpts = k;
    return 0;
}

int qk_tok_pre_split(const qk_tokenizer *t, const char *text, size_t n, size_t **lens, size_t *n_lens,
                     qk_err *err)
{
    uint32_t *cpts;
    size_t nc;
    qk_sizes pieces = {0}, bytes = {0};
    *lens = NULL;
    *n_lens = 0;
    int rc = decode_cpts(text, n, &cpts, &nc, err);
    if (rc)
        return rc;
    if (t->type == QK_TOK_BPE)
        rc = qk_pre_split_cpts(t->pre, cpts, nc, &pieces, err);
    else if (nc)
        rc = qk_sizes_push(&pieces, nc, err);
    size_t start = 0;
    for (size_t i = 0; i < pieces.n && !rc; i++) {
        size_t nb = 0;
        char u[4];
        for (size_t j = start; j < start + pieces.v[i]; j++)
            nb += qk_utf8_encode(cpts[j], u);
        start += pieces.v[i];
        rc = qk_sizes_push(&bytes, nb, err);
    }
    free(pieces.v);
    free(cpts);
    if (rc) {
        free(bytes.v);
        return rc;
    }
    *lens = bytes.v;
    *n_lens = bytes.n;
    return 0;
}

/* Byte-level encode the code points c[0..n) into buf (grown as needed). */
static int byte_encode(const uint32_t *c, size_t n, char **buf, size_t *cap, size_t *len, qk_err *err)
{
    size_t need = n * 8; /* <= 4 UTF-8 bytes, each <= 2 bytes once encoded */
    if (need > *cap) {
        char *b = realloc(*buf, need);
        if (!b)
            return qk_errf(err, QK_EIO, "tokenizer: out of memory");
        *buf = b;
        *cap = need;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char u[4];
        size_t ul = qk_utf8_encode(c[i], u);
        if (!ul)
            return qk_errf(err, QK_EINPUT, "tokenizer: invalid code point U+%X in text", (unsigned)c[i]);
        for (size_t j = 0; j < ul; j++) {
            char e[4];
            size_t el = qk_utf8_encode(qk_byte_to_cpt((uint8_t)u[j]), e);
            memcpy(*buf + k, e, el);
            k += el;
        }
    }
    *len = k;
    return 0;
}

int qk_bpe_encode(const qk_tokenizer *t, const char *text, size_t n, qk_ids *out, qk_err *err)
{
    uint32_t *cpts;
    size_t nc;
    qk_sizes pieces = {0};
    int rc = decode_cpts(text, n, &cpts, &nc, err);
    if (rc)
        return rc;
    rc = qk_pre_split_cpts(t->pre, cpts, nc, &pieces, err);
    bpe_ctx c = {t, NULL, NULL, 0, 0, {0}};
    qk_heap_init(&c.heap, sizeof(bpe_bigram), bpe_before);
    char *word = NULL;
    size_t cap = 0, start = 0;
    for (size_t i = 0; i < pieces.n && !rc; i++) {
        size_t wl = 0;
        rc = byte_encode(cpts + start, pieces.v[i], &word, &cap, &wl, err);
        if (!rc)
            rc = bpe_word(&c, word, wl, out, err);
        start += pieces.v[i];
    }
    free(word);
    free(c.sym);
    qk_heap_free(&c.heap);
    free(pieces.v);
    free(cpts);
    return rc;
}
