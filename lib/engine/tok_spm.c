/* tok_spm.c - the SentencePiece-style tokenizer of "llama" vocabularies:
 * llama.cpp's llm_tokenizer_spm_session (src/llama-vocab.cpp, d32676d).
 *
 * The text (spaces already escaped to U+2581 by the caller) is cut into UTF-8
 * characters; then, repeatedly, the adjacent pair whose concatenation is the
 * highest-scoring vocabulary token is merged (ties: the leftmost pair).  A
 * final symbol that is not a token is emitted as one byte token per byte
 * (<0xXX>, else the one-byte token). */
#define QK_TOKENIZER_INTERNAL
#include "lib/core/heap.h"
#include "lib/engine/tokenizer.h"

#include <stdlib.h>

#include "lib/core/unicode.h"

typedef struct spm_sym {
    int32_t prev, next;
    size_t off, n;       /* bytes text[off, off+n); n == 0: merged away */
} spm_sym;

typedef struct spm_bigram {
    int32_t left, right;
    float score;
    size_t size;
} spm_bigram;


/* Priority: higher score first, then smaller left index. */
static bool spm_before(const void *pa, const void *pb)
{
    const spm_bigram *a = pa, *b = pb;
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}


typedef struct spm_ctx {
    const qk_tokenizer *t;
    const char *text;
    spm_sym *sym;
    qk_heap heap;
} spm_ctx;

/* llm_tokenizer_spm_session::try_add_bigram */
static int try_add_bigram(spm_ctx *c, int32_t left, int32_t right, qk_err *err)
{
    if (left < 0 || right < 0)
        return 0;
    size_t size = c->sym[left].n + c->sym[right].n;
    int32_t id = qk_tok_find(c->t, c->text + c->sym[left].off, size);
    if (id == QK_TOKEN_NULL)
        return 0;
    spm_bigram b = {left, right, c->t->score[id], size};
    return qk_heap_push(&c->heap, &b, err);
}

/* llama_vocab::byte_to_token for SPM: "<0xXX>", else the byte itself. */
static int spm_byte_token(const qk_tokenizer *t, uint8_t ch, int32_t *id, qk_err *err)
{
    static const char hex[] = "0123456789ABCDEF";
    char buf[6] = {'<', '0', 'x', hex[ch >> 4], hex[ch & 15], '>'};
    *id = qk_tok_find(t, buf, sizeof buf);
    if (*id == QK_TOKEN_NULL)
        *id = qk_tok_find(t, (const char *)&ch, 1);
    if (*id == QK_TOKEN_NULL)
        return qk_errf(err, QK_EINPUT, "tokenizer: vocabulary has no token for byte 0x%02X", ch);
    return 0;
}

/* resegment(): a symbol is its token, or its bytes.  (llama.cpp's rev_merge
 * recursion never applies: every merged symbol's text is a token.) */
static int emit_symbol(spm_ctx *c, const spm_sym *s, qk_ids *out, qk_err *err)
{
    int32_t id = qk_tok_find(c->t, c->text + s->off, s->n);
    if (id != QK_TOKEN_NULL)
        return qk_ids_push(out, id, err);
    for (size_t j = 0; j < s->n; j++) {
        int rc = spm_byte_token(c->t, (uint8_t)c->text[s->off + j], &id, err);
        if (rc || (rc = qk_ids_push(out, id, err)))
            return rc;
    }
    return 0;
}

static int spm_run(spm_ctx *c, size_t n_sym, qk_ids *out, qk_err *err)
{
    for (size_t i = 1; i < n_sym; i++) {
        int rc = try_add_bigram(c, (int32_t)i - 1, (int32_t)i, err);
        if (rc)
            return rc;
    }
    while (c->heap.n) {
        spm_bigram b;
        qk_heap_pop(&c->heap, &b);
        spm_sym *l = &c->sym[b.left], *r = &c->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue; /* one side was merged since */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            c->sym[r->next].prev = b.left;
        int rc = try_add_bigram(c, l->prev, b.left, err);
        if (!rc)
            rc = try_add_bigram(c, b.left, l->next, err);
        if (rc)
            return rc;
    }
    for (int32_t i = 0; i != -1; i = c->sym[i].next) {
        int rc = emit_symbol(c, &c->sym[i], out, err);
        if (rc)
            return rc;
    }
    return 0;
}

int qk_spm_encode(const qk_tokenizer *t, const char *text, size_t n, qk_ids *out, qk_err *err)
{
    if (n == 0)
        return 0;
    spm_ctx c = {t, text, malloc(n * sizeof(spm_sym)), {0}};
    qk_heap_init(&c.heap, sizeof(spm_bigram), spm_before);
    if (!c.sym)
        return qk_errf(err, QK_EIO, "tokenizer: out of memory");
    size_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t len = qk_utf8_len((uint8_t)text[off]);
        if (len > n - off)
            len = n - off;
        spm_sym *s = &c.sym[n_sym];
        s->off = off;
        s->n = len;
        s->prev = (int32_t)n_sym - 1;
        off += len;
        s->next = off == n ? -1 : (int32_t)n_sym + 1;
        n_sym++;
    }
    int rc = spm_run(&c, n_sym, out, err);
    qk_heap_free(&c.heap);
    free(c.sym);
    return rc;
}
