/* The forward pass, model loading and sampling, against llama.cpp d32676d
 * (reference data from llama.cpp in goldens/llamacpp: stories260K and stories4M):
 * - window 1 of `llama-perplexity -c 256` (tokens 0..255 of eval-64k, the
 *   second half scored): with the F16 cache (llama.cpp's default) stories260K
 *   reproduces its "[1]" printout to 2 units of the 4th decimal and the log-probabilities of
 *   its base-logits file f32.kld; F32 cache and stories4M: close to them;
 * - quantized stories4M (Q8_0 from llama-quantize; check_quantized() works for
 *   every type there, but the scalar K/IQ kernels make them slow): window-1
 *   perplexity and KL divergence from F32 agree with llama-perplexity's;
 * - greedy generation of the three prompts of greedy.txt prints llama.cpp's
 *   text exactly (stories260K with F16 and F32 cache, stories4M with F16);
 * - logits are bit-identical with 1, 2 and 3 threads, and between one batch,
 *   other batch sizes and token-by-token decoding of the same tokens;
 * - bad token ids and a full cache are errors (code 2); a missing tensor or
 *   an unsupported architecture is an error naming it; an absent output.weight
 *   ties the lm head to the embeddings; NEOX rope (qwen2) on un-permuted q/k
 *   rows gives llama's NORMAL-rope logits;
 * - the sampler: greedy, seeded determinism, top-k / top-p limits, and the
 *   empirical distribution against the softmax. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "lib/engine/forward.h"
#include "formats/gguf.h"
#include "lib/engine/model.h"
#include "lib/engine/sampling.h"
#include "lib/engine/tokenizer.h"
#include "tests/testutil.h"

#define MODEL "goldens/models/stories260K/stories260K-f32.gguf"
#define REF "goldens/llamacpp/stories260K/"
#define EVAL "goldens/stories260K-eval/"
#define MODEL4M "goldens/models/stories4M/stories4M-f32.gguf"
#define REF4M "goldens/llamacpp/stories4M/"
#define WINDOW 256

typedef struct {
    qk_gguf *g;
    qk_model m;
} loaded;

static void load_path(loaded *l, const char *path)
{
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&l->g, path, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_model_load(&l->m, l->g, &err), 0, "%s", err.msg);
}

static void load(loaded *l) { load_path(l, MODEL); }

static void unload(loaded *l)
{
    qk_model_free(&l->m);
    qk_gguf_close(l->g);
}

static qk_ctx *new_ctx(const qk_model *m, int n_ctx, int n_batch, int nthreads, int kv_type)
{
    qk_err err = {0};
    qk_ctx *c;
    qk_ctx_params p = {.n_ctx = n_ctx, .n_batch = n_batch, .nthreads = nthreads, .kv_type = kv_type};
    cr_assert_eq(qk_ctx_new(&c, m, &p, &err), 0, "%s", err.msg);
    return c;
}

/* A whole text file as a NUL-terminated string. */
static char *read_text(const char *path)
{
    size_t n;
    char *text = tu_read(path, &n);
    text = realloc(text, n + 1);
    cr_assert(text);
    text[n] = 0;
    return text;
}

/* The first n ids of eval-64k.tokens.txt ("[1, 301, ...]"). */
static int32_t *eval_tokens(int n)
{
    char *text = read_text(EVAL "eval-64k.tokens.txt");
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    const char *p = text;
    for (int i = 0; i < n; i++) {
        while (*p && (*p < '0' || *p > '9'))
            p++;
        cr_assert(*p, "eval-64k.tokens.txt has fewer than %d ids", n);
        ids[i] = (int32_t)strtol(p, (char **)&p, 10);
    }
    free(text);
    return ids;
}

/* All logits of tokens[0..n) evaluated in batches of n_batch. */
static float *run_all(const qk_model *m, const int32_t *tokens, int n, int n_batch, int nthreads,
                      int kv_type)
{
    qk_err err = {0};
    qk_ctx *c = new_ctx(m, n, n_batch, nthreads, kv_type);
    float *logits = malloc((size_t)n * m->hp.n_vocab * sizeof *logits);
    cr_assert_eq(qk_forward(c, tokens, n, logits, true, &err), 0, "%s", err.msg);
    cr_assert_eq(c->n_past, n);
    qk_ctx_free(c);
    return logits;
}

/* The "[1]X.XXXX" value of a llama-perplexity printout. */
static double ref_ppl_window1(const char *path)
{
    char *text = read_text(path);
    const char *p = strstr(text, "[1]");
    cr_assert(p, "no [1] in %s", path);
    double v = strtod(p + 3, NULL);
    free(text);
    return v;
}

/* How one model's window 1 compares with what llama-perplexity -c 256
 * printed and wrote to its base-logits file. */
typedef struct {
    double ppl, ref_ppl;   /* perplexity over the scored half, ours and llama.cpp's */
    double mean, worst;    /* |log p ours - log p llama.cpp| over the scored rows */
    double kld;            /* mean KL divergence from llama.cpp's distribution */
} window_cmp;

/* log_softmax of perplexity.cpp: max in float, sum of expf in double. */
static double log_sum(const float *lg, int nv, float *max_out)
{
    float max = lg[0];
    for (int i = 1; i < nv; i++)
        max = lg[i] > max ? lg[i] : max;
    double sum = 0.0;
    for (int i = 0; i < nv; i++)
        sum += expf(lg[i] - max);
    *max_out = max;
    return log(sum);
}

/* f32.kld: "_logits_", n_ctx, n_vocab, n_chunk (int32), the tokens of every
 * window (BOS first), then per window n_ctx-1-n_ctx/2 rows of (float scale,
 * float min_log_prob, n_vocab uint16 q) padded to nv = 2*((n_vocab+1)/2)+4
 * uint16: log p_i = min_log_prob + scale * q_i for q_i > 0 (perplexity.cpp). */
static window_cmp compare_window1(const char *model, const char *dir, int kv_type)
{
    loaded l;
    load_path(&l, model);
    char path[256];
    snprintf(path, sizeof path, "%s/f32.window1.kld", dir);
    size_t size;
    uint8_t *kld = tu_read(path, &size);
    const int nv = l.m.hp.n_vocab, first = WINDOW / 2, rows = WINDOW - 1 - first;
    int32_t hdr[3];
    cr_assert(size > 20 && memcmp(kld, "_logits_", 8) == 0);
    memcpy(hdr, kld + 8, sizeof hdr);
    cr_assert_eq(hdr[0], WINDOW);
    cr_assert_eq(hdr[1], nv);
    int32_t *tok = malloc(WINDOW * sizeof *tok);
    memcpy(tok, kld + 20, WINDOW * sizeof *tok);
    int32_t *eval = eval_tokens(WINDOW);
    eval[0] = 1; /* perplexity.cpp puts BOS first in each window */
    cr_assert(memcmp(tok, eval, WINDOW * sizeof *tok) == 0, "f32.kld and eval-64k disagree");
    free(eval);
    const size_t nvp = 2 * (((size_t)nv + 1) / 2) + 4;
    const uint8_t *lp = kld + 20 + (size_t)hdr[2] * WINDOW * sizeof(int32_t);
    cr_assert(lp + (size_t)rows * nvp * 2 <= kld + size);

    float *logits = run_all(&l.m, tok, WINDOW, WINDOW, 2, kv_type);
    window_cmp r = {0};
    double nll = 0.0;
    long n = 0;
    for (int i = 0; i < rows; i++) {
        const float *lg = logits + (size_t)(first + i) * nv;
        const uint8_t *row = lp + (size_t)i * nvp * 2;
        float scale, min_lp, max;
        memcpy(&scale, row, 4);
        memcpy(&min_lp, row + 4, 4);
        const double lse = log_sum(lg, nv, &max);
        nll -= lg[tok[first + i + 1]] - max - lse;
        for (int v = 0; v < nv; v++) {
            uint16_t q;
            memcpy(&q, row + 8 + 2 * (size_t)v, 2);
            const float base = min_lp + scale * q;
            if (base > -16.0f) /* perplexity.cpp's KL divergence: base log-probs above -16 */
                r.kld += expf(base) * (base - (lg[v] - max - lse));
            if (q == 0)
                continue; /* at or below llama.cpp's floor (max - 16) */
            const double d = fabs((lg[v] - max - lse) - base);
            r.worst = d > r.worst ? d : r.worst;
            r.mean += d;
            n++;
        }
    }
    r.mean /= n > 0 ? (double)n : 1.0;
    r.kld /= rows;
    r.ppl = exp(nll / rows);
    snprintf(path, sizeof path, "%s/ppl-f32.stdout.txt", dir);
    r.ref_ppl = ref_ppl_window1(path);
    free(logits), free(tok), free(kld);
    unload(&l);
    return r;
}

/* With llama.cpp's F16 cache the printout (4 decimals) is reproduced to
 * within 2 units of its last digit; log-probabilities differ by about 1e-3
 * of F16 rounding noise, amplified by any last-bit difference upstream
 * (ggml sums in SIMD order).  The F32 products' order decides the last
 * digit: llama.cpp's AVX-512 build sums in 16 lanes, qk in the 8 lanes of
 * kernels/fdot.h (issue #24); a double sum gave 4.04484, the 8 lanes give
 * 4.04494, with the same log-prob agreement (mean 6.0e-4 and 6.1e-4,
 * largest 6.2e-3 and 7.0e-3). */
Test(forward, stories260K_f16_cache_matches_llama_cpp)
{
    window_cmp r = compare_window1(MODEL, REF, QK_F16);
    cr_expect_lt(fabs(r.ppl - r.ref_ppl), 2e-4, "perplexity of window 1: %.6f, llama.cpp %.4f", r.ppl,
                 r.ref_ppl);
    cr_expect_lt(r.mean, 1e-3, "mean log-prob difference %g", r.mean);
    cr_expect_lt(r.worst, 0.02, "largest log-prob difference %g", r.worst);
}

/* An F32 cache is more exact than llama.cpp's own numbers: close, not equal. */
Test(forward, stories260K_f32_cache_is_close_to_llama_cpp)
{
    window_cmp r = compare_window1(MODEL, REF, QK_F32);
    cr_expect_lt(fabs(r.ppl - r.ref_ppl), 1e-3, "perplexity %.6f, llama.cpp %.4f", r.ppl,
                 r.ref_ppl);
    cr_expect_lt(r.mean, 5e-3, "mean log-prob difference %g", r.mean);
    cr_expect_lt(r.worst, 0.1, "largest log-prob difference %g", r.worst);
}

/* stories4M (head size 32): llama.cpp's tiled kernel, F32 accumulator; the
 * log-probs agree to the resolution of the base-logits file (<= 1.2e-4). */
Test(forward, stories4M_f16_cache_matches_llama_cpp)
{
    window_cmp r = compare_window1(MODEL4M, REF4M, QK_F16);
    cr_expect_lt(fabs(r.ppl - r.ref_ppl), 2e-4, "perplexity %.6f, llama.cpp %.4f", r.ppl,
                 r.ref_ppl);
    cr_expect_lt(r.mean, 2e-4, "mean log-prob difference %g", r.mean);
    cr_expect_lt(r.worst, 2e-3, "largest log-prob difference %g", r.worst);
}

/* Column `col` (1-based, whitespace-separated) of the chunk-1 row of a
 * llama-perplexity --kl-divergence printout:
 * "   1   PPL ± err   ln-ratio ± err   KLD ± err   ...". */
static double kld_printout(const char *type, int col)
{
    char path[256];
    snprintf(path, sizeof path, REF4M "kld-%s.stdout.txt", type);
    char *text = read_text(path);
    char *p = strstr(text, "\n   1 ");
    cr_assert(p, "no chunk 1 row in %s", path);
    double v = NAN;
    char *tok = strtok(p, " \n");
    for (int c = 1; tok && c <= col; c++, tok = strtok(NULL, " \n"))
        if (c == col)
            v = strtod(tok, NULL);
    free(text);
    return v;
}

/* Quantized stories4M made by llama-quantize: every y = W x goes through the
 * type's activation encoding and dot product.  llama.cpp's CPU backend sums
 * in other orders (SIMD, repacked weights), so agreement is statistical:
 * perplexity and KL divergence from the F32 model close to its printout. */
static void check_quantized(const char *type)
{
    char model[256];
    snprintf(model, sizeof model, REF4M "stories4M-%s.gguf", type);
    window_cmp r = compare_window1(model, REF4M, QK_F16);
    const double ppl = kld_printout(type, 2), kld = kld_printout(type, 8);
    cr_expect_lt(fabs(r.ppl / ppl - 1), 2e-3, "%s: perplexity %.4f, llama.cpp %.4f", type, r.ppl,
                 ppl);
    cr_expect_lt(fabs(r.kld - kld), 0.05 * kld + 3e-5, "%s: KL divergence %.6f, llama.cpp %.5f",
                 type, r.kld, kld);
}

Test(forward, stories4M_q8_0_matches_llama_cpp) { check_quantized("Q8_0"); }

static void check_threads(int kv)
{
    loaded l;
    load(&l);
    const int n = 96;
    const size_t bytes = (size_t)n * l.m.hp.n_vocab * sizeof(float);
    int32_t *tok = eval_tokens(n);
    float *ref = run_all(&l.m, tok, n, n, 1, kv);
    for (int nt = 2; nt <= 3; nt++) {
        float *got = run_all(&l.m, tok, n, n, nt, kv);
        cr_expect(memcmp(ref, got, bytes) == 0, "%d threads give other logits", nt);
        free(got);
    }
    free(ref), free(tok);
    unload(&l);
}

static void check_batching(int kv)
{
    loaded l;
    load(&l);
    const int n = 80, nv = l.m.hp.n_vocab;
    const size_t bytes = (size_t)n * nv * sizeof(float);
    int32_t *tok = eval_tokens(n);
    float *ref = run_all(&l.m, tok, n, n, 2, kv);

    /* other internal batch sizes */
    const int batches[] = {1, 7, 32};
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        float *got = run_all(&l.m, tok, n, batches[b], 2, kv);
        cr_expect(memcmp(ref, got, bytes) == 0, "n_batch %d gives other logits", batches[b]);
        free(got);
    }

    /* a prompt, then one call per token asking for the last logits only */
    qk_err err = {0};
    qk_ctx *c = new_ctx(&l.m, n, 0, 3, kv);
    float *one = malloc((size_t)nv * sizeof *one);
    const int prompt = 17;
    cr_assert_eq(qk_forward(c, tok, prompt, one, false, &err), 0, "%s", err.msg);
    cr_expect(memcmp(one, ref + (size_t)(prompt - 1) * nv, nv * sizeof(float)) == 0);
    for (int i = prompt; i < n; i++) {
        cr_assert_eq(qk_forward(c, tok + i, 1, one, false, &err), 0, "%s", err.msg);
        cr_expect(memcmp(one, ref + (size_t)i * nv, nv * sizeof(float)) == 0,
                  "decode of token %d differs from the batch", i);
    }

    /* reset: the cache is reused from position 0 */
    qk_ctx_reset(c);
    cr_assert_eq(qk_forward(c, tok, 5, one, false, &err), 0, "%s", err.msg);
    cr_expect(memcmp(one, ref + 4 * (size_t)nv, nv * sizeof(float)) == 0);

    qk_ctx_free(c);
    free(one), free(ref), free(tok);
    unload(&l);
}

Test(forward, threads_f32_cache) { check_threads(QK_F32); }
Test(forward, threads_f16_cache) { check_threads(QK_F16); }
Test(forward, batching_f32_cache) { check_batching(QK_F32); }
Test(forward, batching_f16_cache) { check_batching(QK_F16); }

Test(forward, bad_tokens_and_full_cache_are_errors)
{
    loaded l;
    load(&l);
    qk_err err = {0};
    qk_ctx *c = new_ctx(&l.m, 8, 4, 1, QK_F32);
    float *lg = malloc((size_t)l.m.hp.n_vocab * sizeof *lg);
    int32_t bad[2] = {1, 512};
    cr_expect_eq(qk_forward(c, bad, 2, lg, false, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "512"), "%s", err.msg);
    bad[1] = -1;
    cr_expect_eq(qk_forward(c, bad, 2, lg, false, &err), QK_EINPUT);
    cr_expect_eq(c->n_past, 0, "a refused call appends nothing");

    int32_t *tok = eval_tokens(9);
    cr_assert_eq(qk_forward(c, tok, 8, NULL, false, &err), 0, "%s", err.msg);
    err = (qk_err){0};
    cr_expect_eq(qk_forward(c, tok + 8, 1, lg, false, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "context full"), "%s", err.msg);
    cr_expect_eq(qk_forward(c, tok, 0, lg, false, &err), QK_EINPUT);
    qk_ctx_free(c);
    free(lg), free(tok);
    unload(&l);
}

Test(forward, hyperparameters_of_stories260K)
{
    loaded l;
    load(&l);
    const qk_hparams *hp = &l.m.hp;
    /* llama.* keys of the file, and the shapes of its tensors */
    cr_expect_str_eq(hp->arch_name, "llama");
    cr_expect_eq(hp->rope_mode, QK_ROPE_NORMAL);
    cr_expect_eq(hp->n_vocab, 512);
    cr_expect_eq(hp->n_embd, 64);
    cr_expect_eq(hp->n_layer, 5);
    cr_expect_eq(hp->n_ff, 172);
    cr_expect_eq(hp->n_head, 8);
    cr_expect_eq(hp->n_head_kv, 4);
    cr_expect_eq(hp->head_dim, 8);
    cr_expect_eq(hp->n_rot, 8);
    cr_expect_eq(hp->n_ctx_train, 128);
    cr_expect_eq(hp->rope_freq_base, 10000.0f);
    cr_expect_eq(hp->rms_eps, 1e-5f);
    cr_expect_eq(l.m.layers[4].wk.rows, 32);
    cr_expect_null(l.m.layers[0].bq);
    cr_expect_null(l.m.layers[0].q_norm);
    unload(&l);
}

/* ---- greedy generation ----------------------------------------------------- */

/* Text of ids as llama-completion prints it: each token's piece, in order. */
static char *pieces(const qk_tokenizer *tk, const int32_t *ids, int n)
{
    size_t cap = 64, len = 0;
    char *out = malloc(cap);
    for (int i = 0; i < n; i++) {
        char buf[256];
        int32_t k = qk_tok_piece(tk, ids[i], buf, sizeof buf, 0, false);
        cr_assert(k >= 0, "piece of token %d does not fit", ids[i]);
        if (len + (size_t)k + 1 > cap) {
            cap = 2 * (len + (size_t)k + 1);
            out = realloc(out, cap);
        }
        memcpy(out + len, buf, (size_t)k);
        len += (size_t)k;
    }
    out[len] = 0;
    return out;
}

static void strip_newlines(char *s)
{
    size_t n = strlen(s);
    while (n && s[n - 1] == '\n')
        s[--n] = 0;
}

/* greedy.txt: "### prompt: P\n", then what `llama-completion -p P -n 64
 * --temp 0` printed (the prompt's pieces and 64 generated ones), then blank
 * lines.  Every prompt, greedy-decoded one token at a time after the prompt
 * batch, must print the same text. */
static void check_greedy(const char *model, const char *dir, int kv_type)
{
    loaded l;
    load_path(&l, model);
    qk_err err = {0};
    qk_tokenizer *tk = qk_tok_from_gguf(l.g, &err);
    cr_assert(tk, "%s", err.msg);
    char path[256];
    snprintf(path, sizeof path, "%s/greedy.txt", dir);
    char *text = read_text(path);
    const char *tag = "### prompt: ";
    int prompts = 0;
    for (char *p = strstr(text, tag); p; prompts++) {
        char *prompt = p + strlen(tag), *eol = strchr(prompt, '\n');
        cr_assert(eol);
        *eol = 0;
        char *want = eol + 1, *next = strstr(want, tag);
        if (next)
            next[-1] = 0, next[0] = 0; /* cut before the next tag */
        strip_newlines(want);

        int32_t *ids;
        size_t n_ids;
        cr_assert_eq(qk_tok_encode(tk, prompt, strlen(prompt), true, false, &ids, &n_ids, &err), 0,
                     "%s", err.msg);
        const int n_gen = 64, total = (int)n_ids + n_gen;
        ids = realloc(ids, (size_t)total * sizeof *ids);
        qk_ctx *c = new_ctx(&l.m, total, 0, 2, kv_type);
        float *lg = malloc((size_t)l.m.hp.n_vocab * sizeof *lg);
        cr_assert_eq(qk_forward(c, ids, (int)n_ids, lg, false, &err), 0, "%s", err.msg);
        for (int i = (int)n_ids; i < total; i++) {
            ids[i] = qk_argmax(lg, l.m.hp.n_vocab);
            cr_assert(!qk_tok_is_eog(tk, ids[i]), "end of generation after %d tokens", i);
            if (i + 1 < total)
                cr_assert_eq(qk_forward(c, ids + i, 1, lg, false, &err), 0, "%s", err.msg);
        }
        char *got = pieces(tk, ids, total);
        strip_newlines(got);
        cr_expect_str_eq(got, want, "prompt '%s' (%s cache)", prompt,
                         kv_type == QK_F16 ? "f16" : "f32");
        free(got), free(lg), free(ids);
        qk_ctx_free(c);
        p = next;
    }
    cr_expect_eq(prompts, 3);
    free(text);
    qk_tok_free(tk);
    unload(&l);
}

Test(forward, greedy_stories260K_f16_cache) { check_greedy(MODEL, REF, QK_F16); }
Test(forward, greedy_stories260K_f32_cache) { check_greedy(MODEL, REF, QK_F32); }
Test(forward, greedy_stories4M_f16_cache) { check_greedy(MODEL4M, REF4M, QK_F16); }

/* ---- model files that differ from stories260K in one way ------------------ */

typedef struct {
    const char *src;    /* the model to vary (NULL: stories260K) */
    const char *skip;   /* leave this tensor out */
    const char *arch;   /* relabel general.architecture and the llama.* keys */
    bool to_neox;       /* q/k rows back in Hugging Face order (rope NEOX) */
} variant;

static bool key_is(qk_str s, const char *prefix) { return s.len >= strlen(prefix) && !memcmp(s.ptr, prefix, strlen(prefix)); }

/* Undo convert_hf_to_gguf.py's permute() of q/k rows within each head:
 * GGUF row h*hd + 2i + j holds Hugging Face row h*hd + j*hd/2 + i. */
static void *neox_rows(const qk_gguf_tensor *t, int hd)
{
    const size_t row = (size_t)t->ne[0] * sizeof(float);
    uint8_t *out = malloc(t->nbytes);
    for (int64_t r = 0; r < t->ne[1]; r++) {
        const int64_t h = r / hd, i = (r % hd) / 2, j = r % 2;
        memcpy(out + (size_t)(h * hd + j * hd / 2 + i) * row, t->data + (size_t)r * row, row);
    }
    return out;
}

static void write_variant(const char *dst, const variant *v)
{
    loaded l;
    load_path(&l, v->src ? v->src : MODEL);
    const qk_gguf *g = l.g;
    qk_err err = {0};
    qk_gguf_writer *w = qk_gguf_writer_new(3);
    cr_assert(w);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const qk_gguf_kv *kv = &g->kv[i];
        char key[256];
        int rc;
        if (v->arch && qk_str_eq(kv->key, "general.architecture")) {
            rc = qk_gguf_w_kv_str(w, "general.architecture", v->arch, &err);
        } else if (v->arch && key_is(kv->key, "llama.")) {
            snprintf(key, sizeof key, "%s.%.*s", v->arch, (int)kv->key.len - 6, kv->key.ptr + 6);
            rc = kv->v.type == QK_GGUF_F32 ? qk_gguf_w_kv_f32(w, key, (float)kv->v.f, &err)
                                           : qk_gguf_w_kv_u32(w, key, (uint32_t)kv->v.u, &err);
        } else {
            rc = qk_gguf_w_kv_copy(w, kv, &err);
        }
        cr_assert_eq(rc, 0, "%s", err.msg);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!v->skip || !qk_str_eq(g->tensors[i].name, v->skip))
            cr_assert_eq(qk_gguf_w_tensor_copy(w, &g->tensors[i], &err), 0, "%s", err.msg);
    cr_assert_eq(qk_gguf_w_begin(w, dst, &err), 0, "%s", err.msg);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const qk_gguf_tensor *t = &g->tensors[i];
        if (v->skip && qk_str_eq(t->name, v->skip))
            continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        void *buf = NULL;
        if (v->to_neox && (strstr(name, "attn_q.weight") || strstr(name, "attn_k.weight")))
            buf = neox_rows(t, l.m.hp.head_dim);
        cr_assert_eq(qk_gguf_w_data(w, buf ? buf : t->data, t->nbytes, &err), 0, "%s", err.msg);
        cr_assert_eq(qk_gguf_w_end_tensor(w, &err), 0, "%s", err.msg);
        free(buf);
    }
    cr_assert_eq(qk_gguf_writer_finish(w, &err), 0, "%s", err.msg);
    qk_gguf_writer_free(w);
    unload(&l);
}

/* Write the variant to a temp file and try to load it. */
static int load_variant(const variant *v, loaded *l, qk_err *err, char *path, size_t path_size)
{
    snprintf(path, path_size, "/tmp/qk_test_forward_%d.gguf", (int)getpid());
    write_variant(path, v);
    cr_assert_eq(qk_gguf_open(&l->g, path, 0, err), 0, "%s", err->msg);
    int rc = qk_model_load(&l->m, l->g, err);
    if (rc)
        qk_gguf_close(l->g);
    return rc;
}

static void expect_load_error(const variant *v, const char *needle)
{
    loaded l;
    qk_err err = {0};
    char path[128];
    cr_expect_eq(load_variant(v, &l, &err, path, sizeof path), QK_EINPUT, "loaded anyway");
    cr_expect(strstr(err.msg, needle), "message '%s' does not name '%s'", err.msg, needle);
    remove(path);
}

Test(model, missing_tensor_is_named)
{
    expect_load_error(&(variant){.skip = "blk.3.ffn_up.weight"}, "blk.3.ffn_up.weight");
    expect_load_error(&(variant){.skip = "output_norm.weight"}, "output_norm.weight");
    expect_load_error(&(variant){.skip = "token_embd.weight"}, "token_embd.weight");
}

Test(model, unsupported_architecture_is_named)
{
    expect_load_error(&(variant){.arch = "gpt2"}, "gpt2");
}

Test(model, qwen3_needs_its_q_norm)
{
    expect_load_error(&(variant){.arch = "qwen3"}, "blk.0.attn_q_norm.weight");
}

/* the families of lib/engine/arch.c: each asks for its own keys and tensors */
#define ARCH "goldens/arch/"
Test(model, family_traits_are_required)
{
    expect_load_error(&(variant){.arch = "qwen3moe"}, "qwen3moe.expert_count");
    expect_load_error(&(variant){.arch = "gemma2"}, "blk.0.post_attention_norm.weight");
    expect_load_error(&(variant){.arch = "gpt-oss"}, "gpt-oss.attention.sliding_window");
    expect_load_error(&(variant){.src = ARCH "qwen3moe/qwen3moe-f32.gguf",
                                 .skip = "blk.1.ffn_gate_inp.weight"}, "blk.1.ffn_gate_inp.weight");
    expect_load_error(&(variant){.src = ARCH "mixtral/mixtral-f32.gguf",
                                 .skip = "blk.0.ffn_down_exps.weight"}, "blk.0.ffn_down_exps.weight");
    expect_load_error(&(variant){.src = ARCH "gpt-oss/gpt-oss-f32.gguf",
                                 .skip = "blk.1.attn_sinks.weight"}, "blk.1.attn_sinks.weight");
    expect_load_error(&(variant){.src = ARCH "phi3/phi3-f32.gguf",
                                 .skip = "blk.0.attn_qkv.weight"}, "blk.0.attn_q.weight");
}

Test(model, experts_are_views_of_one_tensor)
{
    loaded l;
    load_path(&l, ARCH "qwen3moe/qwen3moe-f32.gguf");
    const qk_hparams *hp = &l.m.hp;
    cr_expect_eq(hp->n_expert, 8);
    cr_expect_eq(hp->n_expert_used, 2);
    cr_expect_eq(hp->n_ff_exp, 32);
    const qk_layer *L = &l.m.layers[1];
    cr_assert(L->moe);
    const qk_gguf_tensor *t = qk_gguf_find_tensor(l.g, "blk.1.ffn_up_exps.weight");
    for (int e = 0; e < hp->n_expert; e++) {
        cr_expect_eq(L->exps.up[e].rows, 32);
        cr_expect_eq(L->exps.up[e].cols, 64);
        cr_expect_eq(L->exps.up[e].data, t->data + (size_t)e * 32 * L->exps.up[e].row_size);
    }
    unload(&l);
    /* phi3: q, k, v as row ranges of attn_qkv, gate and up as halves of ffn_up */
    load_path(&l, ARCH "phi3/phi3-f32.gguf");
    const qk_layer *P = &l.m.layers[0];
    const qk_gguf_tensor *qkv = qk_gguf_find_tensor(l.g, "blk.0.attn_qkv.weight");
    cr_expect_eq(P->wq.data, qkv->data);
    cr_expect_eq(P->wk.data, qkv->data + 64 * P->wq.row_size);
    cr_expect_eq(P->wv.data, qkv->data + 96 * P->wq.row_size);
    cr_expect_eq(P->w_up.data, P->w_gate.data + 64 * P->w_gate.row_size);
    cr_expect(l.m.rope_long && l.m.rope_short);
    unload(&l);
}

Test(model, absent_output_is_tied_to_embeddings)
{
    loaded l;
    qk_err err = {0};
    char path[128];
    cr_assert_eq(load_variant(&(variant){.skip = "output.weight"}, &l, &err, path, sizeof path), 0,
                 "%s", err.msg);
    cr_expect_eq(l.m.output.data, l.m.tok_embd.data);
    cr_expect_eq(l.m.output.rows, 512);
    unload(&l);
    remove(path);
}

/* The converter permutes q/k rows so that llama's NORMAL rope on GGUF rows
 * is NEOX rope on the original rows: relabelled qwen2 with the rows put back
 * must give the same logits up to the order of the q.k sums. */
Test(model, neox_rope_on_hf_rows_equals_normal_rope)
{
    loaded a, b;
    load(&a);
    qk_err err = {0};
    char path[128];
    cr_assert_eq(load_variant(&(variant){.arch = "qwen2", .to_neox = true}, &b, &err, path,
                              sizeof path),
                 0, "%s", err.msg);
    cr_expect_eq(b.m.hp.rope_mode, QK_ROPE_NEOX);
    const int n = 48, nv = a.m.hp.n_vocab;
    int32_t *tok = eval_tokens(n);
    float *la = run_all(&a.m, tok, n, n, 1, QK_F32);
    float *lb = run_all(&b.m, tok, n, n, 1, QK_F32);
    double worst = 0.0;
    for (size_t i = 0; i < (size_t)n * nv; i++)
        worst = fmax(worst, fabs(la[i] - lb[i]));
    cr_expect_lt(worst, 1e-4, "largest logit difference %g", worst);
    cr_expect_gt(worst, 0.0, "NEOX and NORMAL gave identical bytes: rows not permuted?");
    for (int t = 0; t < n; t++)
        cr_expect_eq(qk_argmax(la + (size_t)t * nv, nv), qk_argmax(lb + (size_t)t * nv, nv));
    free(la), free(lb), free(tok);
    unload(&a), unload(&b);
    remove(path);
}

/* ---- sampling --------------------------------------------------------------- */

Test(sampling, greedy_is_first_argmax)
{
    const float v[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, -INFINITY};
    cr_expect_eq(qk_argmax(v, 6), 1);
    qk_sampler s;
    qk_err err = {0};
    qk_sampler_params p = {.temp = 0.0f, .top_p = 1.0f, .seed = 7};
    cr_assert_eq(qk_sampler_init(&s, 6, &p, &err), 0, "%s", err.msg);
    for (int i = 0; i < 10; i++)
        cr_expect_eq(qk_sample(&s, v), 1);
    qk_sampler_free(&s);
}

Test(sampling, bad_parameters_are_errors)
{
    qk_sampler s;
    qk_err err = {0};
    qk_sampler_params p = {.temp = -1.0f, .top_p = 1.0f};
    cr_expect_eq(qk_sampler_init(&s, 4, &p, &err), QK_EINPUT);
    p = (qk_sampler_params){.temp = 1.0f, .top_p = 0.0f};
    cr_expect_eq(qk_sampler_init(&s, 4, &p, &err), QK_EINPUT);
    p = (qk_sampler_params){.temp = NAN, .top_p = 0.5f};
    cr_expect_eq(qk_sampler_init(&s, 4, &p, &err), QK_EINPUT);
    p = (qk_sampler_params){.temp = 1.0f, .top_p = 1.0f};
    cr_expect_eq(qk_sampler_init(&s, 0, &p, &err), QK_EINPUT);
}

static void draw(const float *logits, int n, qk_sampler_params p, int count, int *hist)
{
    qk_sampler s;
    qk_err err = {0};
    cr_assert_eq(qk_sampler_init(&s, n, &p, &err), 0, "%s", err.msg);
    memset(hist, 0, (size_t)n * sizeof *hist);
    for (int i = 0; i < count; i++) {
        int32_t t = qk_sample(&s, logits);
        cr_assert(t >= 0 && t < n);
        hist[t]++;
    }
    qk_sampler_free(&s);
}

Test(sampling, seeded_and_deterministic)
{
    const float v[5] = {1.0f, 0.5f, 0.0f, 2.0f, 1.5f};
    qk_sampler a, b;
    qk_err err = {0};
    qk_sampler_params p = {.temp = 1.0f, .top_p = 1.0f, .seed = 42};
    cr_assert_eq(qk_sampler_init(&a, 5, &p, &err), 0);
    cr_assert_eq(qk_sampler_init(&b, 5, &p, &err), 0);
    int differ_from_greedy = 0;
    for (int i = 0; i < 200; i++) {
        int32_t x = qk_sample(&a, v), y = qk_sample(&b, v);
        cr_expect_eq(x, y);
        differ_from_greedy += x != 3;
    }
    cr_expect_gt(differ_from_greedy, 0, "temperature 1 never left the argmax");
    qk_sampler_free(&a), qk_sampler_free(&b);

    int h1[5], h2[5];
    p.seed = 43;
    draw(v, 5, p, 200, h1);
    p.seed = 42;
    draw(v, 5, p, 200, h2);
    cr_expect(memcmp(h1, h2, sizeof h1) != 0, "seeds 42 and 43 drew the same histogram");
}

Test(sampling, top_k_and_top_p_limit_the_candidates)
{
    const float v[6] = {0.0f, 4.0f, 1.0f, 3.9f, 3.0f, -2.0f};
    int h[6];
    draw(v, 6, (qk_sampler_params){.temp = 1.0f, .top_k = 1, .top_p = 1.0f, .seed = 1}, 100, h);
    cr_expect_eq(h[1], 100, "top-k 1 is greedy");
    draw(v, 6, (qk_sampler_params){.temp = 2.0f, .top_k = 2, .top_p = 1.0f, .seed = 2}, 2000, h);
    cr_expect_eq(h[1] + h[3], 2000, "top-k 2 keeps tokens 1 and 3");
    cr_expect(h[1] > 0 && h[3] > 0);
    /* softmax of v: p1 = .43, p3 = .39, p4 = .16, ...: top-p .5 needs 1 and 3 */
    draw(v, 6, (qk_sampler_params){.temp = 1.0f, .top_p = 0.5f, .seed = 3}, 2000, h);
    cr_expect_eq(h[1] + h[3], 2000, "top-p 0.5 keeps tokens 1 and 3");
    draw(v, 6, (qk_sampler_params){.temp = 1.0f, .top_p = 0.01f, .seed = 4}, 100, h);
    cr_expect_eq(h[1], 100, "a tiny top-p is greedy");
}

/* top-k over a large random vocabulary keeps exactly the k largest logits:
 * with a huge temperature all k are drawn, and nothing else. */
Test(sampling, top_k_keeps_exactly_the_k_largest)
{
    enum { N = 1000, K = 37 };
    float v[N], sorted[N];
    uint64_t seed = 5;
    for (int i = 0; i < N; i++)
        v[i] = sorted[i] = tu_gauss(&seed);
    /* the K-th largest value, by selection */
    for (int i = 0; i < K; i++)
        for (int j = i + 1; j < N; j++)
            if (sorted[j] > sorted[i]) {
                float t = sorted[i];
                sorted[i] = sorted[j];
                sorted[j] = t;
            }
    int *h = malloc(N * sizeof *h);
    draw(v, N, (qk_sampler_params){.temp = 1e6f, .top_k = K, .top_p = 1.0f, .seed = 6}, 4000, h);
    int kept = 0;
    for (int i = 0; i < N; i++) {
        if (v[i] >= sorted[K - 1]) {
            cr_expect_gt(h[i], 0, "top-%d token %d never drawn", K, i);
            kept++;
        } else {
            cr_expect_eq(h[i], 0, "token %d is outside the top %d", i, K);
        }
    }
    cr_expect_eq(kept, K);
    free(h);
}

Test(sampling, frequencies_follow_the_tempered_softmax)
{
    const float v[4] = {0.0f, 1.0f, 2.0f, -1.0f};
    const float temp = 0.7f;
    const int count = 40000;
    int h[4];
    draw(v, 4, (qk_sampler_params){.temp = temp, .top_p = 1.0f, .seed = 99}, count, h);
    double z = 0.0, p[4];
    for (int i = 0; i < 4; i++)
        z += p[i] = exp(v[i] / temp);
    for (int i = 0; i < 4; i++) {
        p[i] /= z;
        const double sd = sqrt(count * p[i] * (1 - p[i]));
        cr_expect(fabs(h[i] - count * p[i]) < 5 * sd, "token %d: %d draws, expected %.0f", i,
                  h[i], count * p[i]);
    }
}
