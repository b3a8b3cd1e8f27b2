/* tok_decode.c - token ids back to text: llama_token_to_piece() and
 * llama_detokenize() of llama.cpp (src/llama-vocab.cpp, d32676d), with their
 * leading-space and space-cleaning rules, and the vocabulary's accessors. */
#define QK_TOKENIZER_INTERNAL
#include "lib/engine/tokenizer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/unicode.h"

/* ---- decoding -------------------------------------------------------------- */

/* Write the piece s[0..n) to buf, skipping up to lstrip leading spaces
 * (token_to_piece's _try_copy). */
static int32_t copy_piece(const char *s, size_t n, char *buf, int32_t len, int32_t lstrip)
{
    for (int32_t i = 0; i < lstrip && n && *s == ' '; i++) {
        s++;
        n--;
    }
    if (n > INT32_MAX - 1)
        return INT32_MIN; /* cannot be reported */
    if (len < 0 || (size_t)len < n)
        return -(int32_t)n;
    if (n)
        memcpy(buf, s, n);
    return (int32_t)n;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* token_to_byte: strtol of the two characters after "<0x". */
static char token_byte(const qk_tokenizer *t, int32_t id)
{
    const char *s = qk_tok_ptr(t, id);
    int v = 0;
    for (uint32_t i = 3; i < 5 && i < t->len[id] && hexval(s[i]) >= 0; i++)
        v = v * 16 + hexval(s[i]);
    return (char)v;
}

/* Render a piece into a malloc'd buffer when it differs from the stored text. */
static char *unescape_spm(const char *s, size_t n, size_t *out_n)
{
    char *b = malloc(n ? n : 1);
    if (!b)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            b[k++] = ' ';
            i += 2;
        } else {
            b[k++] = s[i];
        }
    }
    *out_n = k;
    return b;
}

/* llama_decode_text: byte-level code points back to bytes; a code point that
 * is not a byte's image becomes "[UNK_BYTE_0x<its utf-8 hex><text>]". */
static char *decode_bytelevel(const char *s, size_t n, size_t *out_n)
{
    size_t cap = n + 16, k = 0;
    char *b = malloc(cap);
    if (!b)
        return NULL;
    for (size_t off = 0; off < n;) {
        size_t adv;
        uint32_t cpt = qk_utf8_decode(s + off, n - off, &adv);
        off += adv;
        int byte = qk_cpt_to_byte(cpt);
        size_t need = byte >= 0 ? 1 : 12 + 8 + n + 1;
        if (k + need > cap) {
            cap = 2 * (k + need);
            char *nb = realloc(b, cap);
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
        }
        if (byte >= 0) {
            b[k++] = (char)byte;
            continue;
        }
        char u[4];
        size_t ul = qk_utf8_encode(cpt, u);
        k += (size_t)sprintf(b + k, "[UNK_BYTE_0x");
        for (size_t j = 0; j < ul; j++)
            k += (size_t)sprintf(b + k, "%02x", (uint8_t)u[j]);
        memcpy(b + k, s, n);
        k += n;
        b[k++] = ']';
    }
    *out_n = k;
    return b;
}

int32_t qk_tok_piece(const qk_tokenizer *t, int32_t id, char *buf, int32_t len, int32_t lstrip, bool special)
{
    if (id < 0 || (uint32_t)id >= t->n_vocab)
        return 0;
    int32_t attr = t->attr[id];
    const char *s = qk_tok_ptr(t, id);
    size_t n = t->len[id];
    if (attr & (QK_ATTR_UNKNOWN | QK_ATTR_CONTROL))
        return special ? copy_piece(s, n, buf, len, lstrip) : 0;
    if (attr & QK_ATTR_USER_DEFINED)
        return copy_piece(s, n, buf, len, lstrip);
    if (attr & QK_ATTR_NORMAL) {
        size_t rn;
        char *r = t->type != QK_TOK_BPE || t->escape_spaces ? unescape_spm(s, n, &rn) : decode_bytelevel(s, n, &rn);
        if (!r)
            return INT32_MIN; /* out of memory */
        int32_t k = copy_piece(r, rn, buf, len, lstrip);
        free(r);
        return k;
    }
    if (attr & QK_ATTR_BYTE) {
        char b = token_byte(t, id);
        return copy_piece(&b, 1, buf, len, lstrip);
    }
    return 0;
}

/* The clean_up_tokenization_spaces passes of llama_detokenize. */
static int32_t clean_spaces(char *text, int32_t total)
{
    /* " ?", " !", " .", " ," lose the space */
    int32_t n1 = total, k = total ? 1 : 0;
    for (int32_t i = 1; i < n1; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            k--;
        text[k++] = x;
    }
    /* " ' " becomes "'" */
    int32_t n2 = k;
    k = n2 ? 1 : 0;
    for (int32_t i = 1; i < n2; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < n2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            k--;
            text[++i] = '\0';
        }
        text[k++] = x;
    }
    /* " 's", " 'm", " 're", " 've" lose the space */
    int32_t n3 = k;
    k = n3 ? 1 : 0;
    for (int32_t i = 1; i < n3; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm')
                k--;
            else if (i + 2 < n3 && ((x1 == 'r' && text[i + 2] == 'e') || (x1 == 'v' && text[i + 2] == 'e')))
                k--;
        }
        text[k++] = x;
    }
    return k;
}

int32_t qk_tok_detokenize(const qk_tokenizer *t, const int32_t *ids, int32_t n_ids, char *text,
                          int32_t text_len_max, bool remove_special, bool unparse_special)
{
    int32_t avail = text_len_max, total = 0;
    bool remove_space = t->add_space_prefix;
    if (remove_special && t->add_bos && n_ids > 0 && ids[0] == t->bos) {
        remove_space = false;
        n_ids--;
        ids++;
    }
    if (remove_special && t->add_eos && n_ids > 0 && ids[n_ids - 1] == t->eos)
        n_ids--;
    for (int32_t i = 0; i < n_ids; i++) {
        int32_t k = qk_tok_piece(t, ids[i], text, avail, remove_space, unparse_special);
        remove_space = false;
        if (k == INT32_MIN)
            return INT32_MIN;
        if (k < 0) {
            avail = 0;
            total -= k;
        } else if (k > 0) {
            avail -= k;
            text += k;
            total += k;
        }
    }
    if (total > text_len_max)
        return -total;
    if (t->clean_spaces) {
        text -= total;
        total = clean_spaces(text, total);
    }
    return total;
}

int qk_tok_decode(const qk_tokenizer *t, const int32_t *ids, size_t n_ids, bool remove_special,
                  bool unparse_special, char **out, size_t *out_len, qk_err *err)
{
    *out = NULL;
    *out_len = 0;
    if (n_ids > INT32_MAX)
        return qk_errf(err, QK_EINPUT, "tokenizer: too many tokens to decode");
    int32_t cap = 64;
    for (;;) {
        char *buf = malloc((size_t)cap + 1);
        if (!buf)
            return qk_tok_oom(err);
        int32_t k = qk_tok_detokenize(t, ids, (int32_t)n_ids, buf, cap, remove_special, unparse_special);
        if (k >= 0) {
            buf[k] = '\0';
            *out = buf;
            *out_len = (size_t)k;
            return 0;
        }
        free(buf);
        if (k == INT32_MIN || -k > INT32_MAX - 1)
            return qk_tok_oom(err);
        cap = -k;
    }
}

/* ---- accessors --------------------------------------------------------------- */

uint32_t qk_tok_n_vocab(const qk_tokenizer *t) { return t->n_vocab; }
int qk_tok_type(const qk_tokenizer *t) { return t->type; }
int qk_tok_pre(const qk_tokenizer *t) { return t->pre; }
void qk_tok_set_pre(qk_tokenizer *t, int pre)
{
    if (pre >= 0 && pre < QK_PRE_COUNT)
        t->pre = pre;
}
int32_t qk_tok_bos(const qk_tokenizer *t) { return t->bos; }
int32_t qk_tok_eos(const qk_tokenizer *t) { return t->eos; }
int32_t qk_tok_eot(const qk_tokenizer *t) { return t->eot; }
int32_t qk_tok_unk(const qk_tokenizer *t) { return t->unk; }
int32_t qk_tok_pad(const qk_tokenizer *t) { return t->pad; }
bool qk_tok_add_bos(const qk_tokenizer *t) { return t->add_bos; }
bool qk_tok_add_eos(const qk_tokenizer *t) { return t->add_eos; }
bool qk_tok_add_space_prefix(const qk_tokenizer *t) { return t->add_space_prefix; }

bool qk_tok_is_eog(const qk_tokenizer *t, int32_t id)
{
    return id != QK_TOKEN_NULL && bsearch(&id, t->eog, t->n_eog, sizeof *t->eog, qk_tok_cmp_i32) != NULL;
}

qk_str qk_tok_text(const qk_tokenizer *t, int32_t id)
{
    return (qk_str){qk_tok_ptr(t, id), t->len[id]};
}

float qk_tok_score(const qk_tokenizer *t, int32_t id) { return t->score[id]; }
int32_t qk_tok_attr(const qk_tokenizer *t, int32_t id) { return t->attr[id]; }
