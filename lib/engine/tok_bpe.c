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

/* One symbol's ids: its token, else a token per byte of its text where one
 * exists - the byte itself for byte-encoded words (llama.cpp's fallback,
 * which rarely finds any), "<0xXX>" for raw UTF-8 ones. */
static int emit_word_symbol(const qk_tokenizer *t, const char *s, size_t n, qk_ids *out, qk_err *err)
{
    int32_t id = qk_tok_find(t, s, n);
    if (id != QK_TOKEN_NULL)
        return qk_ids_push(out, id, err);
    bool raw = qk_pre_raw_utf8(t->pre);
    for (size_t j = 0; j < n; j++) {
        static const char hex[] = "0123456789ABCDEF";
        uint8_t b = (uint8_t)s[j];
        char x[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        id = raw ? qk_tok_find(t, x, 6) : qk_tok_find(t, s + j, 1);
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
    size_t nl = 0;
    while (nl < n && w[nl] == '\n')
        nl++;
    if (t->pre == QK_PRE_GEMMA4 && nl == n && qk_tok_find(t, w, n) != QK_TOKEN_NULL)
        return emit_word_symbol(t, w, n, out, err); /* llama.cpp PR 21343 */
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

/* Byte-level encode the code points c[0..n) into buf (grown as needed);
 * raw: UTF-8 only. */
static int byte_encode(const uint32_t *c, size_t n, bool raw, char **buf, size_t *cap, size_t *len, qk_err *err)
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
        if (raw) {
            memcpy(*buf + k, u, ul);
            k += ul;
            continue;
        }
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
    char *escaped = NULL;
    if (t->escape_spaces) { /* llama_escape_whitespace: ' ' -> U+2581 */
        size_t spaces = 0, k = 0;
        for (size_t i = 0; i < n; i++)
            spaces += text[i] == ' ';
        if (!(escaped = malloc(n + 2 * spaces + 1)))
            return qk_errf(err, QK_EIO, "tokenizer: out of memory");
        for (size_t i = 0; i < n; i++) {
            if (text[i] == ' ') {
                memcpy(escaped + k, "\xe2\x96\x81", 3);
                k += 3;
            } else {
                escaped[k++] = text[i];
            }
        }
        text = escaped;
        n = k;
    }
    int rc = decode_cpts(text, n, &cpts, &nc, err);
    free(escaped);
    if (rc)
        return rc;
    rc = qk_pre_split_cpts(t->pre, cpts, nc, &pieces, err);
    bool raw = qk_pre_raw_utf8(t->pre);
    bpe_ctx c = {t, NULL, NULL, 0, 0, {0}};
    qk_heap_init(&c.heap, sizeof(bpe_bigram), bpe_before);
    char *word = NULL;
    size_t cap = 0, start = 0;
    for (size_t i = 0; i < pieces.n && !rc; i++) {
        size_t wl = 0;
        rc = byte_encode(cpts + start, pieces.v[i], raw, &word, &cap, &wl, err);
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
