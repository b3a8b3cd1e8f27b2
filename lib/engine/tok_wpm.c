/* tok_wpm.c - WordPiece ("bert" vocabularies): llm_tokenizer_wpm_session of
 * llama.cpp (src/llama-vocab.cpp, d32676d).  The text is cut into words at
 * white space and around punctuation, ASCII symbols and CJK ideographs, with
 * control characters dropped, optionally lowercased and stripped of accents
 * (NFD's first code point, marks dropped); each word, prefixed with U+2581,
 * is covered greedily by the longest tokens from the left, or becomes the
 * unknown token when some position has none. */
#define QK_TOKENIZER_INTERNAL
#include "lib/engine/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/unicode.h"

/* is_chinese_char of llama.cpp (0x2B920, not 0x2B820, as HF's Rust code has it) */
static bool is_chinese_char(uint32_t c)
{
    return (c >= 0x04E00 && c <= 0x09FFF) || (c >= 0x03400 && c <= 0x04DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0x0F900 && c <= 0x0FAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

typedef struct word_buf {
    char *v;
    size_t n, cap;
} word_buf;

static int put(word_buf *w, const char *s, size_t n, qk_err *err)
{
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        while (cap < w->n + n)
            cap *= 2;
        char *v = realloc(w->v, cap);
        if (!v)
            return qk_tok_oom(err);
        w->v = v;
        w->cap = cap;
    }
    memcpy(w->v + w->n, s, n);
    w->n += n;
    return 0;
}

/* Greedy longest-match of one word (already prefixed with U+2581). */
static int wpm_word(const qk_tokenizer *t, const char *w, size_t n, qk_ids *out, qk_err *err)
{
    size_t mark = out->n;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        size_t j = n < i + t->max_token_len + 1 ? n : i + t->max_token_len + 1;
        int32_t id = QK_TOKEN_NULL;
        for (; j > i; j--)
            if ((id = qk_tok_find(t, w + i, j - i)) != QK_TOKEN_NULL)
                break;
        if (id == QK_TOKEN_NULL) { /* discard the word's tokens */
            out->n = mark;
            break;
        }
        rc = qk_ids_push(out, id, err);
        i = j - 1;
    }
    if (!rc && out->n == mark)
        rc = qk_ids_push(out, t->unk, err);
    return rc;
}

static int flush(const qk_tokenizer *t, word_buf *w, qk_ids *out, qk_err *err)
{
    int rc = w->n > 3 ? wpm_word(t, w->v, w->n, out, err) : 0;
    w->n = 0;
    return rc ? rc : put(w, "\xe2\x96\x81", 3, err);
}

int qk_wpm_encode(const qk_tokenizer *t, const char *text, size_t n, qk_ids *out, qk_err *err)
{
    word_buf w = {0};
    int rc = put(&w, "\xe2\x96\x81", 3, err);
    for (size_t off = 0; off < n && !rc;) {
        size_t adv;
        uint32_t cpt = qk_utf8_decode(text + off, n - off, &adv);
        off += adv;
        if (t->strip_accents)
            cpt = qk_ucd_nfd_first(cpt);
        uint16_t f = qk_ucd_flags(cpt);
        if (f & QK_UCD_WHITESPACE) {
            rc = flush(t, &w, out, err);
            continue;
        }
        if (cpt == 0 || cpt == 0xFFFD || (f & QK_UCD_CONTROL))
            continue;
        if (t->strip_accents && (f & QK_UCD_MARK))
            continue;
        char u[4];
        size_t ul = qk_utf8_encode(t->lowercase ? qk_ucd_tolower(cpt) : cpt, u);
        if ((f & QK_UCD_PUNCTUATION) || (cpt < 0x7F && (f & QK_UCD_SYMBOL)) || is_chinese_char(cpt)) {
            rc = flush(t, &w, out, err);
            if (!rc)
                rc = put(&w, u, ul, err);
            if (!rc)
                rc = flush(t, &w, out, err);
        } else {
            rc = put(&w, u, ul, err);
        }
    }
    if (!rc)
        rc = flush(t, &w, out, err);
    free(w.v);
    return rc;
}
