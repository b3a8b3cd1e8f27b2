/* tok_pretok.c - BPE pre-tokenizers: llama.cpp's unicode_regex_split()
 * (src/unicode.cpp) over the regex lists of llm_tokenizer_bpe's constructor
 * (src/llama-vocab.cpp), both at d32676d.
 *
 * One table, pre_kinds[], holds per pre-tokenizer the regexes llama.cpp
 * applies, verbatim, and whether words are byte-encoded (GPT-2's byte to
 * code point mapping) before merging.  Each regex in turn cuts every current
 * piece further, keeping both its matches and the text between them.  A regex
 * that unicode_regex_split_custom() recognizes by its exact text runs its
 * hand-written splitter (custom_splitters[]: GPT-2, Llama 3, Qwen2, Qwen3.5,
 * Kimi-K2, AFMoE digits, newline runs); any other runs through tok_regex.c
 * the way llama.cpp runs it through std::regex:
 *   - a regex naming a category (\p{N}, \p{L}, \p{P}, \p{M}, \p{S}, \p{Lu} ...)
 *     is matched over the "collapsed" text - each code point >= 128 replaced
 *     by one byte for its category (0xD1 N, 0xD2 L, 0xD3 P, 0xD4 M, 0xD5 S,
 *     0xD0 other; white space by 0x0B) - with every \p{..} rewritten into
 *     that byte plus its ASCII members (collapse_regex below);
 *   - any other over the code points, non-ASCII white space replaced by
 *     0x0B (std::wregex's \s knows only ASCII).
 * Pieces are runs of code points; splitting never looks across pieces. */
#define QK_TOKENIZER_INTERNAL
#include "lib/engine/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/unicode.h"
#include "lib/engine/tok_regex.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_REGEXES 6

/* The regex lists of llm_tokenizer_bpe's constructor, verbatim. */
static const struct pre_kind {
    const char *regex[MAX_REGEXES];
    bool raw_utf8;               /* byte_encode = false */
} pre_kinds[QK_PRE_COUNT] = {
    [QK_PRE_DEFAULT] = {{
        "[\\p{P}\\$\\+<=>\\^~\\|]+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        "\\p{N}+",
        "[0-9][0-9][0-9]",
    }, false},
    [QK_PRE_GPT2] = {{
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    }, false},
    [QK_PRE_LLAMA3] = {{
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_QWEN2] = {{
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_DEEPSEEK_LLM] = {{
        "[\r\n]",
        "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
        "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
        "\\s+$",
        "[一-龥ࠀ-一가-퟿]+",
        "\\p{N}+",
    }, false},
    [QK_PRE_FALCON] = {{
        "[\\p{P}\\$\\+<=>\\^~\\|`]+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        "[0-9][0-9][0-9]",
    }, false},
    [QK_PRE_STARCODER] = {{
        "\\p{N}",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    }, false},
    [QK_PRE_JAIS2] = {{
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    }, false},
    [QK_PRE_DEEPSEEK3] = {{
        "\\p{N}{1,3}",
        "[一-龥぀-ゟ゠-ヿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_YOUTU] = {{
        "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_DEEPSEEK_CODER] = {{
        "[\r\n]",
        "\\s?\\p{L}+",
        "\\s?\\p{P}+",
        "[一-龥ࠀ-一가-퟿]+",
        "\\p{N}",
    }, false},
    [QK_PRE_QWEN35] = {{
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_PORO] = {{
        " ?[^(\\s|.,!?…。，、।۔،)]+",
    }, false},
    [QK_PRE_VIKING] = {{
        " ?[^(\\s|.,!?…。，、।۔،)]+",
        "\\p{N}",
    }, false},
    [QK_PRE_TEKKEN] = {{
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_CHAMELEON] = {{
        "<sentinel:[0-9]+>",
        "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
        "([\\t\\n]|    |  )",
        "\\p{N}",
        "[\\p{P}!-/:-@\\[-`{-~]",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    }, false},
    [QK_PRE_GPT4O] = {{
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_GRANITE_EMB_MULTI] = {{
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_TINY_AYA] = {{
        "\\d{1,3}(?=(?:\\d{3})*\\b)",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_KIMI_K2] = {{
        "\\p{Han}+",
    }, false},
    [QK_PRE_SUPERBPE] = {{
        "\\p{N}+",
        "(?=(\\d{3})+(?!\\d))",
    }, false},
    [QK_PRE_BAILINGMOE] = {{
        "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_SEED_CODER] = {{
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_AFMOE] = {{
        "\\p{AFMoE_digits}",
        "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_LAGUNA] = {{
        "[^\\n]+|[\\n]+",
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_EXAONE_MOE] = {{
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_GEMMA4] = {{
        "[^\\n]+|[\\n]+",
    }, true},
    [QK_PRE_MINICPM5] = {{
        "\\p{N}{1,3}",
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    }, false},
    [QK_PRE_WHITESPACE] = {{
        "\\S+",
    }, true},
};

bool qk_pre_raw_utf8(int pre)
{
    return pre >= 0 && pre < QK_PRE_COUNT && pre_kinds[pre].raw_utf8;
}

/* ---- pieces -------------------------------------------------------------------- */

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

/* Emitting the pieces of one input piece: unicode.cpp's _add_token.  Empty
 * pieces are dropped (std::regex's empty matches give empty words, which
 * merge to nothing). */
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

#define IS(f, what) (((f) & (what)) != 0)

static uint16_t flags_at(const uint32_t *c, size_t n, size_t i)
{
    return i < n ? qk_ucd_flags(c[i]) : 0;
}

/* ---- the hand-written splitters of unicode.cpp ---------------------------------- */

typedef int (*split_fn)(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err);

/* 's|'t|'re|'ve|'m|'ll|'d at c[pos] (case-insensitive when fold): its length, or 0. */
static size_t contraction(const uint32_t *c, size_t n, size_t pos, bool fold)
{
    if (pos >= n || c[pos] != '\'' || pos + 1 >= n)
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

/* The white-space tail shared by the Llama 3 family and Kimi-K2:
 * \s*[\r\n]+ | \s+(?!\S) | \s+ | one unmatched character. */
static size_t space_tail(const uint32_t *c, size_t n, size_t pos, bool crlf)
{
    size_t ws = 0, last_rn = 0;
    while (IS(flags_at(c, n, pos + ws), QK_UCD_WHITESPACE)) {
        if (c[pos + ws] == '\r' || c[pos + ws] == '\n')
            last_rn = pos + ws + 1;
        ws++;
    }
    if (crlf && last_rn)
        return last_rn;
    if (ws > 1 && pos + ws < n)
        return pos + ws - 1;
    return pos + (ws ? ws : 1);
}

#define NOT_LNW(f) (!IS(f, QK_UCD_WHITESPACE | QK_UCD_LETTER | QK_UCD_NUMBER))

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
 * (unicode_regex_split_custom_gpt2). */
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
            /* the class of the first character after the optional space decides */
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
        pos = space_tail(c, n, pos, false);
        cut(&k, pos);
    }
    return k.rc;
}

/* The alternatives after the letters, shared by the Llama 3 family and
 * Kimi-K2: \p{N}{1,digits_max} (repeated over a longer run), then
 *  ?[^\s<word>]+[\r\n]*, then the white-space tail; cuts and returns the
 * new position.  (unicode.cpp tests the first character's own flags for being
 * defined, and the one after an optional space for the class; Kimi-K2's
 * variant tests the latter twice, which decides the same.) */
static size_t llama3_tail(cutter *k, const uint32_t *c, size_t n, size_t pos, size_t digits_max, uint16_t word)
{
    uint32_t cpt = c[pos];
    uint16_t flags = qk_ucd_flags(cpt);
    if (IS(flags, QK_UCD_NUMBER)) {
        size_t ini = pos;
        while (IS(flags_at(c, n, pos), QK_UCD_NUMBER)) {
            if (++pos - ini >= digits_max) {
                cut(k, pos);
                ini = pos;
            }
        }
        cut(k, pos);
        return pos;
    }
    uint16_t f2 = cpt == ' ' ? flags_at(c, n, pos + 1) : flags;
    if (!IS(f2, word) && flags) {
        pos += cpt == ' ';
        while (!IS(f2, word) && f2)
            f2 = flags_at(c, n, ++pos);
        while (pos < n && (c[pos] == '\r' || c[pos] == '\n'))
            pos++;
        cut(k, pos);
        return pos;
    }
    pos = space_tail(c, n, pos, true);
    cut(k, pos);
    return pos;
}

/* Llama 3 (digits_max 3), Qwen2 (1) and Qwen3.5 (1, marks):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with Qwen3.5's letter runs [\p{L}\p{M}]+ and its [^\s\p{L}\p{M}\p{N}]
 * (unicode_regex_split_custom_llama3 / _qwen2 / _qwen35). */
static int split_llama3_like(const uint32_t *c, size_t n, qk_sizes *out, size_t digits_max, bool marks,
                             qk_err *err)
{
    cutter k = {out, 0, 0, err};
    const uint16_t letter = QK_UCD_LETTER | (marks ? QK_UCD_MARK : 0);
    const uint16_t word = QK_UCD_WHITESPACE | QK_UCD_NUMBER | letter;
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
            (IS(flags, letter) || IS(flags_at(c, n, pos + 1), letter))) {
            pos++;
            while (IS(flags_at(c, n, pos), letter))
                pos++;
            cut(&k, pos);
            continue;
        }
        pos = llama3_tail(&k, c, n, pos, digits_max, word);
    }
    return k.rc;
}

static int split_llama3(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err)
{
    return split_llama3_like(c, n, out, 3, false, err);
}

static int split_qwen2(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err)
{
    return split_llama3_like(c, n, out, 1, false, err);
}

static int split_qwen35(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err)
{
    return split_llama3_like(c, n, out, 1, true, err);
}

/* unicode_cpt_is_han */
static bool is_han(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0x2CEB0 && c <= 0x2EBEF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool letter_not_han(const uint32_t *c, size_t n, size_t i)
{
    return i < n && IS(qk_ucd_flags(c[i]), QK_UCD_LETTER) && !is_han(c[i]);
}

/* Kimi-K2 (unicode_regex_split_custom_kimi_k2, triggered by "\p{Han}+"):
 *   [\p{Han}]+ | [^\r\n\p{L}\p{N}]?<letters but Han>+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 *   | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+ */
static int split_kimi_k2(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err)
{
    cutter k = {out, 0, 0, err};
    size_t pos = 0;
    while (pos < n && !k.rc) {
        uint32_t cpt = c[pos];
        uint16_t flags = qk_ucd_flags(cpt);
        if (is_han(cpt)) {
            while (pos < n && is_han(c[pos]))
                pos++;
            cut(&k, pos);
            continue;
        }
        bool lead_ok = !(cpt == '\r' || cpt == '\n' || IS(flags, QK_UCD_LETTER) || IS(flags, QK_UCD_NUMBER));
        if ((IS(flags, QK_UCD_LETTER) && !is_han(cpt)) || (lead_ok && letter_not_han(c, n, pos + 1))) {
            bool lead = false, letters = false;
            if (lead_ok) {
                lead = true;
                pos++;
            }
            while (letter_not_han(c, n, pos)) {
                letters = true;
                pos++;
            }
            if (letters || (!lead && letter_not_han(c, n, pos))) {
                if (!letters)
                    pos++;
                while (letter_not_han(c, n, pos))
                    pos++;
                if (pos < n && c[pos] == '\'' && pos + 1 < n) {
                    uint32_t a = qk_ucd_tolower(c[pos + 1]);
                    if (a == 's' || a == 't' || a == 'm' || a == 'd') {
                        pos += 2;
                    } else if (pos + 2 < n) {
                        uint32_t b = qk_ucd_tolower(c[pos + 2]);
                        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                            pos += 3;
                    }
                }
                cut(&k, pos);
                continue;
            }
            if (lead)
                pos--;
        }
        pos = llama3_tail(&k, c, n, pos, 3, QK_UCD_WHITESPACE | QK_UCD_LETTER | QK_UCD_NUMBER);
    }
    return k.rc;
}

/* AFMoE digits (unicode_regex_split_custom_afmoe; also tiny_aya's
 * \d{1,3}(?=(?:\d{3})*\b)): a run of \p{N} is cut into a leading group of
 * (length mod 3) digits, then groups of three; other text passes whole. */
static int split_afmoe_digits(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err)
{
    cutter k = {out, 0, 0, err};
    size_t pos = 0;
    while (pos < n && !k.rc) {
        if (!IS(qk_ucd_flags(c[pos]), QK_UCD_NUMBER)) {
            pos++;
            continue;
        }
        size_t start = pos;
        while (pos < n && IS(qk_ucd_flags(c[pos]), QK_UCD_NUMBER))
            pos++;
        size_t cur = start, rem = (pos - start) % 3;
        if (rem) {
            cur += rem;
            cut(&k, cur);
        }
        while (cur < pos) {
            cur += 3;
            cut(&k, cur);
        }
    }
    cut(&k, n);
    return k.rc;
}

/* [^\n]+|[\n]+ (unicode_regex_split_custom_newlines). */
static int split_newlines(const uint32_t *c, size_t n, qk_sizes *out, qk_err *err)
{
    cutter k = {out, 0, 0, err};
    size_t pos = 0;
    while (pos < n && !k.rc) {
        bool nl = c[pos] == '\n';
        while (pos < n && (c[pos] == '\n') == nl)
            pos++;
        cut(&k, pos);
    }
    return k.rc;
}

/* unicode_regex_split_custom: regexes with a hand-written splitter, by text. */
static const struct custom_splitter {
    const char *regex;
    split_fn fn;
} custom_splitters[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)", split_gpt2},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", split_llama3},
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", split_llama3},
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", split_qwen2},
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", split_qwen35},
    {"\\p{Han}+", split_kimi_k2},
    {"\\p{AFMoE_digits}", split_afmoe_digits},
    {"[^\\n]+|[\\n]+", split_newlines},
    {"\\d{1,3}(?=(?:\\d{3})*\\b)", split_afmoe_digits},
};

static split_fn custom_for(const char *regex)
{
    for (size_t i = 0; i < N_OF(custom_splitters); i++)
        if (!strcmp(custom_splitters[i].regex, regex))
            return custom_splitters[i].fn;
    return NULL;
}

/* ---- std::regex splitting ---------------------------------------------------------- */

/* The \p{..} names unicode_regex_split knows, and what they collapse to. */
static const struct ucat {
    const char *name;
    uint16_t flag;
} ucats[] = {
    {"\\p{N}", QK_UCD_NUMBER}, {"\\p{L}", QK_UCD_LETTER},  {"\\p{P}", QK_UCD_PUNCTUATION},
    {"\\p{M}", QK_UCD_MARK},   {"\\p{S}", QK_UCD_SYMBOL},  {"\\p{Lu}", QK_UCD_LETTER},
    {"\\p{Ll}", QK_UCD_LETTER}, {"\\p{Lt}", QK_UCD_LETTER}, {"\\p{Lm}", QK_UCD_LETTER},
    {"\\p{Lo}", QK_UCD_LETTER},
};

/* k_ucat_cpt and k_ucat_map: the byte standing for a category in the
 * collapsed text, and the regex text of its ASCII members. */
static uint8_t ucat_byte(uint16_t flag)
{
    switch (flag) {
    case QK_UCD_NUMBER: return 0xD1;
    case QK_UCD_LETTER: return 0xD2;
    case QK_UCD_PUNCTUATION: return 0xD3;
    case QK_UCD_MARK: return 0xD4;
    case QK_UCD_SYMBOL: return 0xD5;
    default: return 0xD0;
    }
}

static const char *ucat_ascii(uint16_t flag)
{
    switch (flag) {
    case QK_UCD_NUMBER: return "0-9";
    case QK_UCD_LETTER: return "A-Za-z";
    case QK_UCD_PUNCTUATION: return "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}";
    case QK_UCD_SYMBOL: return "\\$\\+<->^`\\|";
    default: return "";
    }
}

static bool uses_categories(const char *regex)
{
    for (size_t i = 0; i < N_OF(ucats); i++)
        if (strstr(regex, ucats[i].name))
            return true;
    return false;
}

typedef struct units {
    uint32_t *v;
    size_t n, cap;
} units;

static bool units_put(units *u, uint32_t x)
{
    if (u->n == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 256;
        uint32_t *v = realloc(u->v, cap * sizeof *v);
        if (!v)
            return false;
        u->v = v;
        u->cap = cap;
    }
    u->v[u->n++] = x;
    return true;
}

static bool units_puts(units *u, const char *s)
{
    for (; *s; s++)
        if (!units_put(u, (uint8_t)*s))
            return false;
    return true;
}

/* The collapsed form of a regex, as unicode_regex_split builds it: every
 * known \p{..} becomes [<byte><ascii members>] (without the brackets inside
 * a bracket expression).  llama.cpp refuses such a regex with non-ASCII text. */
static int collapse_regex(const char *re, units *u, qk_err *err)
{
    size_t len = strlen(re);
    bool inside = false;
    for (size_t i = 0; i < len; i++) {
        if ((uint8_t)re[i] >= 0x80)
            return qk_errf(err, QK_EINPUT, "pre-tokenizer regex mixes categories and non-ASCII text");
        bool ok = true;
        if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) {
            ok = units_put(u, '[');
            inside = true;
        } else if (inside && re[i] == ']' && re[i - 1] != '\\') {
            ok = units_put(u, ']');
            inside = false;
        } else {
            const char *close = re[i] == '\\' && i + 3 < len && re[i + 1] == 'p' && re[i + 2] == '{'
                                    ? strchr(re + i + 3, '}')
                                    : NULL;
            const struct ucat *cat = NULL;
            if (close && (size_t)(close - re) <= i + 10)
                for (size_t k = 0; k < N_OF(ucats) && !cat; k++)
                    if (strlen(ucats[k].name) == (size_t)(close - re) - i + 1 &&
                        !memcmp(ucats[k].name, re + i, strlen(ucats[k].name)))
                        cat = &ucats[k];
            if (cat) {
                ok = (inside || units_put(u, '[')) && units_put(u, ucat_byte(cat->flag)) &&
                     units_puts(u, ucat_ascii(cat->flag)) && (inside || units_put(u, ']'));
                i = (size_t)(close - re);
            } else {
                ok = units_put(u, (uint8_t)re[i]);
            }
        }
        if (!ok)
            return qk_errf(err, QK_EIO, "tokenizer: out of memory");
    }
    return 0;
}

/* The regex as code points (std::wregex). */
static int wide_regex(const char *re, units *u, qk_err *err)
{
    size_t len = strlen(re);
    for (size_t off = 0; off < len;) {
        size_t adv;
        if (!units_put(u, qk_utf8_decode(re + off, len - off, &adv)))
            return qk_errf(err, QK_EIO, "tokenizer: out of memory");
        off += adv;
    }
    return 0;
}

/* The two texts std::regex sees: collapsed bytes, or code points with
 * non-ASCII white space as \v. */
static uint32_t collapsed_unit(uint32_t c)
{
    if (c < 0x80)
        return c;
    uint16_t f = qk_ucd_flags(c);
    if (IS(f, QK_UCD_WHITESPACE))
        return 0x0B;
    return ucat_byte(f & QK_UCD_CATEGORIES);
}

static uint32_t wide_unit(uint32_t c)
{
    return c > 0x7f && IS(qk_ucd_flags(c), QK_UCD_WHITESPACE) ? 0x0B : c;
}

/* unicode_regex_split_stl over one piece t[0..n): the matches of
 * std::regex_iterator (after an empty match: a non-empty one at the same
 * place, else the search goes on one further) and the text between them. */
static int split_by_regex(const qk_rx *rx, const uint32_t *t, size_t n, qk_rx_stack *st, qk_sizes *out,
                          qk_err *err)
{
    cutter k = {out, 0, 0, err};
    size_t b, e;
    int m = qk_rx_search(rx, t, 0, n, false, false, st, &b, &e);
    while (m == 1 && !k.rc) {
        cut(&k, b);
        cut(&k, e);
        if (e > b) {
            m = qk_rx_search(rx, t, e, n, false, false, st, &b, &e);
        } else if (e == n) {
            m = 0;
        } else {
            size_t from = e;
            m = qk_rx_search(rx, t, from, n, true, true, st, &b, &e);
            if (m == 0)
                m = qk_rx_search(rx, t, from + 1, n, false, false, st, &b, &e);
        }
    }
    if (m < 0)
        return qk_errf(err, QK_EIO, "tokenizer: out of memory");
    cut(&k, n);
    return k.rc;
}

/* One regex of the list over every current piece. */
static int split_step(const char *regex, const uint32_t *cpts, const uint32_t *collapsed, const uint32_t *wide,
                      const qk_sizes *cur, qk_sizes *next, qk_err *err)
{
    split_fn fn = custom_for(regex);
    int rc = 0;
    size_t start = 0;
    if (fn) {
        for (size_t i = 0; i < cur->n && !rc; i++) {
            rc = fn(cpts + start, cur->v[i], next, err);
            start += cur->v[i];
        }
        return rc;
    }
    bool collapse = uses_categories(regex);
    units pat = {0};
    rc = collapse ? collapse_regex(regex, &pat, err) : wide_regex(regex, &pat, err);
    qk_rx *rx = rc ? NULL : qk_rx_compile(pat.v, pat.n, err);
    free(pat.v);
    if (!rx)
        return rc ? rc : QK_EINPUT;
    const uint32_t *text = collapse ? collapsed : wide;
    qk_rx_stack st = {0};
    for (size_t i = 0; i < cur->n && !rc; i++) {
        rc = split_by_regex(rx, text + start, cur->v[i], &st, next, err);
        start += cur->v[i];
    }
    qk_rx_stack_free(&st);
    qk_rx_free(rx);
    return rc;
}

int qk_pre_split_cpts(int pre, const uint32_t *cpts, size_t n, qk_sizes *out, qk_err *err)
{
    if (pre < 0 || pre >= QK_PRE_COUNT)
        pre = QK_PRE_DEFAULT;
    const struct pre_kind *kind = &pre_kinds[pre];
    qk_sizes cur = {0}, next = {0};
    uint32_t *collapsed = malloc((n ? n : 1) * sizeof *collapsed);
    uint32_t *wide = malloc((n ? n : 1) * sizeof *wide);
    int rc = collapsed && wide ? 0 : qk_errf(err, QK_EIO, "tokenizer: out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        collapsed[i] = collapsed_unit(cpts[i]);
        wide[i] = wide_unit(cpts[i]);
    }
    if (n && !rc)
        rc = qk_sizes_push(&cur, n, err);
    for (size_t s = 0; s < MAX_REGEXES && kind->regex[s] && !rc; s++) {
        next.n = 0;
        rc = split_step(kind->regex[s], cpts, collapsed, wide, &cur, &next, err);
        qk_sizes t = cur;
        cur = next;
        next = t;
    }
    for (size_t i = 0; i < cur.n && !rc; i++)
        rc = qk_sizes_push(out, cur.v[i], err);
    free(collapsed);
    free(wide);
    free(cur.v);
    free(next.v);
    return rc;
}

int qk_pre_check_all(qk_err *err)
{
    for (int p = 0; p < QK_PRE_COUNT; p++)
        for (size_t s = 0; s < MAX_REGEXES && pre_kinds[p].regex[s]; s++) {
            const char *re = pre_kinds[p].regex[s];
            if (custom_for(re))
                continue;
            units pat = {0};
            int rc = uses_categories(re) ? collapse_regex(re, &pat, err) : wide_regex(re, &pat, err);
            qk_rx *rx = rc ? NULL : qk_rx_compile(pat.v, pat.n, err);
            free(pat.v);
            if (!rx)
                return rc ? rc : QK_EINPUT;
            qk_rx_free(rx);
        }
    return 0;
}
