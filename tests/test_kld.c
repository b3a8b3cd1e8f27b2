/* qk-kld's library (lib/eval/ppl.h, lib/eval/kldbase.h, lib/eval/kldstats.h) against
 * llama-perplexity d32676d (goldens/kld, goldens/stories260K-eval):
 * - tokenization of the evaluation text equals llama.cpp's, BOS first;
 * - stories260K -c 256: the "[i]" progress values of chunks 1..4 equal
 *   llama's printout (within 1 in the 4th decimal; the full run's final
 *   "PPL = 3.8980 +/- 0.05722" is checked with QK_KLD_FULL=1, ~25 s);
 * - against llama's base file (4-chunk slice of f32.kld): F32 gives mean KLD
 *   < 1e-5 and same top >= 99.9 %; the F16 model (every 2-D weight through
 *   the F16 encoder, as llama-quantize F16 does) gives each chunk row of
 *   llama's kld-f16 printout within 2 in its last digit;
 * - the llama-format writer: header and tokens byte-identical to llama's,
 *   rows re-quantize to llama's bytes; the qk format holds the same values
 *   with the top tokens exact, in well under half the size; its factored
 *   encoding reads back the forward pass's log-probs bit for bit;
 * - sharding: parts merged give the bytes of one run; results do not
 *   depend on the thread count or the batch size;
 * - bad input: truncated and foreign base files are errors (code 2). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/engine/forward.h"
#include "formats/gguf.h"
#include "lib/eval/kldbase.h"
#include "lib/eval/kldstats.h"
#include "lib/engine/model.h"
#include "lib/eval/ppl.h"
#include "kernels/quantize.h"
#include "lib/engine/sampling.h"
#include "tests/testutil.h"
#include "lib/engine/tokenizer.h"
#include "kernels/types.h"

#define MODEL "goldens/models/stories260K/stories260K-f32.gguf"
#define TEXT "goldens/stories260K-eval/eval-64k.txt"
#define TOKENS "goldens/stories260K-eval/eval-64k.tokens.txt"
#define G "goldens/kld/"
#define BASE4 G "stories260K-f32-c256-4chunks.kld"
#define N_CTX 256

typedef struct {
    qk_gguf *g;
    qk_model m;
    qk_tokenizer *tok;
} loaded;

static void load(loaded *l, const char *path)
{
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&l->g, path, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_model_load(&l->m, l->g, &err), 0, "%s", err.msg);
    l->tok = qk_tok_from_gguf(l->g, &err);
    cr_assert(l->tok, "%s", err.msg);
}

static void unload(loaded *l)
{
    qk_tok_free(l->tok);
    qk_model_free(&l->m);
    qk_gguf_close(l->g);
}

static int32_t *text_tokens(const loaded *l, size_t *n)
{
    size_t size;
    char *text = tu_read(TEXT, &size);
    int32_t *ids;
    qk_err err = {0};
    cr_assert_eq(qk_ppl_tokenize(l->tok, text, size, &ids, n, &err), 0, "%s", err.msg);
    free(text);
    return ids;
}

static char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 256, "/tmp/qk_test_kld_%d_%s", (int)getpid(), name);
    return p;
}

/* A run over chunks [a, b) into acc (mode set by the caller). */
typedef struct {
    const qk_model *base_model;
    qk_kldb_reader *in;
    qk_kldb_writer *out;
    int a, b, nthreads, n_batch, kv;
} run_opts;

static void run(const loaded *l, const int32_t *tokens, const run_opts *o, qk_kld_acc *acc)
{
    qk_err err = {0};
    qk_ppl_job j = {.model = &l->m, .base_model = o->base_model, .base_in = o->in,
                    .base_out = o->out, .tokens = tokens, .n_ctx = N_CTX, .chunk_a = o->a,
                    .chunk_b = o->b, .bos = qk_tok_bos(l->tok), .add_bos = qk_tok_add_bos(l->tok),
                    .n_batch = o->n_batch, .nthreads = o->nthreads ? o->nthreads : 2,
                    .kv_type = o->kv ? o->kv : QK_F16, .acc = acc};
    cr_assert_eq(qk_ppl_run(&j, &err), 0, "%s", err.msg);
}

/* The numbers of a printout line, in order. */
static int numbers(const char *line, double *v, int max, int *decimals)
{
    int n = 0;
    const char *p = line;
    while (*p && *p != '\n' && n < max) {
        if ((*p >= '0' && *p <= '9') || ((*p == '-') && p[1] >= '0' && p[1] <= '9')) {
            char *end;
            v[n] = strtod(p, &end);
            const char *dot = memchr(p, '.', (size_t)(end - p));
            decimals[n] = dot ? (int)(end - dot - 1) : 0;
            n++;
            p = end;
        } else {
            p++;
        }
    }
    return n;
}

/* ---- tokenization and perplexity -------------------------------------------- */

Test(ppl, tokenization_equals_llama_cpp)
{
    loaded l;
    load(&l, MODEL);
    size_t n;
    int32_t *ids = text_tokens(&l, &n);
    char *ref = tu_read(TOKENS, NULL);
    const char *p = ref;
    size_t i = 0;
    for (; *p; i++) {
        while (*p && (*p < '0' || *p > '9'))
            p++;
        if (!*p)
            break;
        long v = strtol(p, (char **)&p, 10);
        cr_assert_lt(i, n, "fewer tokens than llama.cpp");
        cr_assert_eq(ids[i], v, "token %zu: %d, llama.cpp %ld", i, ids[i], v);
    }
    cr_expect_eq(i, n, "%zu tokens, llama.cpp %zu", n, i);
    cr_expect_eq(ids[0], qk_tok_bos(l.tok));
    free(ref), free(ids);
    unload(&l);
}

/* The acceptance run: all 122 chunks, "Final estimate: PPL = 3.8980 +/- 0.05722". */
Test(ppl, full_run_final_estimate, .timeout = 600)
{
    if (!getenv("QK_KLD_FULL"))
        cr_skip_test("set QK_KLD_FULL=1 for the 122-chunk run");
    loaded l;
    load(&l, MODEL);
    size_t n;
    int32_t *ids = text_tokens(&l, &n);
    const int chunks = (int)(n / N_CTX);
    qk_kld_acc acc;
    qk_kld_acc_init(&acc, QK_KLD_MODE_PPL, false);
    qk_err err = {0};
    qk_kldb_writer *w;
    char *path = tmp_path("full.kld");
    cr_assert_eq(qk_kldb_create(&w, path, QK_KLDB_LLAMA, N_CTX, l.m.hp.n_vocab, chunks, ids, 3, NULL, &err), 0);
    run(&l, ids, &(run_opts){.out = w, .a = 0, .b = chunks}, &acc);
    cr_assert_eq(qk_kldb_finish(w, &err), 0, "%s", err.msg);
    double ppl, e;
    cr_assert(qk_kld_final_ppl(&acc, &ppl, &e));
    char got[64];
    snprintf(got, sizeof got, "PPL = %.4f +/- %.5f", ppl, e);
    cr_expect_str_eq(got, "PPL = 3.8980 +/- 0.05722"); /* llama-perplexity's stderr, README */
    remove(path);
    qk_kld_acc_free(&acc);
    free(ids);
    unload(&l);
}

/* ---- KL divergence against llama.cpp's base file ----------------------------- */

static void kld_against_base(const char *model, qk_kld_acc *acc, int chunks, int nthreads, int n_batch)
{
    loaded l;
    load(&l, model);
    qk_err err = {0};
    qk_kldb_reader *r;
    cr_assert_eq(qk_kldb_open(&r, BASE4, &err), 0, "%s", err.msg);
    const qk_kldb_info *in = qk_kldb_reader_info(r);
    cr_assert_eq(in->n_ctx, N_CTX);
    cr_assert_eq(in->n_chunk, 4);
    qk_kld_acc_init(acc, QK_KLD_MODE_KLD, true);
    run(&l, in->tokens, &(run_opts){.in = r, .a = 0, .b = chunks, .nthreads = nthreads, .n_batch = n_batch},
        acc);
    qk_kldb_close(r);
    unload(&l);
}

Test(kld, f32_against_llama_base)
{
    qk_kld_acc acc;
    kld_against_base(MODEL, &acc, 4, 2, 0);
    qk_kld_summary s;
    qk_kld_summarize(&acc, &s);
    cr_expect_eq(s.count, 4 * 127);
    cr_expect_lt(fabs(s.kld.v), 1e-5, "mean KLD %g", s.kld.v);
    cr_expect_geq(s.same_top.v, 99.9, "same top %.3f %%", s.same_top.v);
    qk_kld_acc_free(&acc);
}

/* stories260K with every 2-D weight encoded as F16 by the format table. */
static void write_f16_model(const char *dst)
{
    qk_err err = {0};
    qk_gguf *g;
    cr_assert_eq(qk_gguf_open(&g, MODEL, 0, &err), 0, "%s", err.msg);
    qk_gguf_writer *w = qk_gguf_writer_new(3);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (!qk_str_eq(g->kv[i].key, "general.file_type"))
            cr_assert_eq(qk_gguf_w_kv_copy(w, &g->kv[i], &err), 0, "%s", err.msg);
    cr_assert_eq(qk_gguf_w_kv_u32(w, "general.file_type", 1, &err), 0); /* MOSTLY_F16 */
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const qk_gguf_tensor *t = &g->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        cr_assert_eq(qk_gguf_w_tensor(w, name, t->n_dims >= 2 ? QK_F16 : t->type, t->n_dims, t->ne,
                                      &err), 0, "%s", err.msg);
    }
    cr_assert_eq(qk_gguf_w_begin(w, dst, &err), 0, "%s", err.msg);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const qk_gguf_tensor *t = &g->tensors[i];
        if (t->n_dims >= 2) {
            const int64_t rows = (int64_t)(t->nbytes / 4) / t->ne[0];
            void *buf = malloc((size_t)(rows * t->ne[0] * 2));
            cr_assert_eq(qk_quantize_rows(QK_F16, (const float *)t->data, buf, rows, t->ne[0], NULL,
                                          1, &err), 0, "%s", err.msg);
            cr_assert_eq(qk_gguf_w_data(w, buf, (size_t)(rows * t->ne[0] * 2), &err), 0);
            free(buf);
        } else {
            cr_assert_eq(qk_gguf_w_data(w, t->data, t->nbytes, &err), 0);
        }
        cr_assert_eq(qk_gguf_w_end_tensor(w, &err), 0, "%s", err.msg);
    }
    cr_assert_eq(qk_gguf_writer_finish(w, &err), 0, "%s", err.msg);
    qk_gguf_writer_free(w);
    qk_gguf_close(g);
}

/* Each chunk row of llama's F16 printout: PPL, KLD and same-top within 2 in
 * their last printed digit.  ln(PPL ratio) (and its standard error) and RMS
 * dp of an F16 model are differences of the same order as our engine's own
 * distance from llama.cpp's logits (F32 model vs llama's F32 base file: ln
 * ratio about 2e-5, RMS dp about 0.011 %), so those get 8e-5 and 0.010 %. */
Test(kld, f16_chunk_rows_match_llama_cpp)
{
    char *model = tmp_path("f16.gguf");
    write_f16_model(model);
    loaded l;
    load(&l, model);
    qk_err err = {0};
    qk_kldb_reader *r;
    cr_assert_eq(qk_kldb_open(&r, BASE4, &err), 0, "%s", err.msg);
    qk_kld_acc acc;
    qk_kld_acc_init(&acc, QK_KLD_MODE_KLD, false);
    char *ref = tu_read(G "stories260K-kld-f16.stdout.txt", NULL);
    for (int c = 0; c < 4; c++) {
        run(&l, qk_kldb_reader_info(r)->tokens, &(run_opts){.in = r, .a = c, .b = c + 1}, &acc);
        char line[512], key[16];
        FILE *f = fmemopen(line, sizeof line, "w");
        qk_kld_print_chunk(f, &acc, c + 1);
        fclose(f);
        snprintf(key, sizeof key, "\n%4d ", c + 1);
        const char *want = strstr(ref, key);
        cr_assert(want, "no chunk %d row", c + 1);
        double a[12], b[12];
        int da[12], db[12];
        const int na = numbers(line, a, 12, da), nb = numbers(want + 1, b, 12, db);
        cr_assert_eq(na, nb, "%s", line);
        static const double tol[11] = {0, 2, 2, 8, 8, 2, 2, 10, 2, 2, 2};
        for (int i = 1; i < na && i < 11; i++)
            cr_expect_leq(fabs(a[i] - b[i]) * pow(10, db[i]), tol[i] + 1e-6,
                          "chunk %d field %d: %s vs llama.cpp %.60s", c + 1, i, line, want + 1);
    }
    qk_kld_acc_free(&acc);
    qk_kldb_close(r);
    free(ref);
    unload(&l);
    remove(model);
}

Test(kld, threads_and_batch_size_do_not_change_results)
{
    qk_kld_acc a, b;
    kld_against_base(MODEL, &a, 1, 1, 0);
    kld_against_base(MODEL, &b, 1, 3, 37);
    cr_assert_eq(a.n_rec, b.n_rec);
    for (size_t i = 0; i < a.n_rec; i++) {
        const qk_kld_tok *x = &a.rec[i], *y = &b.rec[i];
        cr_assert(x->nll == y->nll && x->kld == y->kld && x->nll_base == y->nll_base &&
                      x->p_diff == y->p_diff && x->same_top == y->same_top,
                  "token %zu differs", i);
    }
    cr_expect_eq(a.sum_kld, b.sum_kld);
    qk_kld_acc_free(&a), qk_kld_acc_free(&b);
}

/* ---- base files -------------------------------------------------------------------- */

Test(kldbase, llama_writer_matches_llama_bytes)
{
    loaded l;
    load(&l, MODEL);
    size_t n;
    int32_t *ids = text_tokens(&l, &n);
    char *path = tmp_path("w.kld");
    qk_err err = {0};
    qk_kldb_writer *w;
    cr_assert_eq(qk_kldb_create(&w, path, QK_KLDB_LLAMA, N_CTX, 512, 4, ids, 3, NULL, &err), 0);
    qk_kld_acc acc;
    qk_kld_acc_init(&acc, QK_KLD_MODE_PPL, false);
    /* the "[i]X.XXXX" progress values of a run writing a base file (llama's
     * ppl-f32 printout was made with one): within 1 in the 4th decimal */
    char *pref = tu_read(G "stories260K-ppl-f32.stdout.txt", NULL);
    for (int c = 0; c < 4; c++) {
        run(&l, ids, &(run_opts){.out = w, .a = c, .b = c + 1}, &acc);
        char key[16];
        snprintf(key, sizeof key, "[%d]", c + 1);
        const char *at = strstr(pref, key);
        cr_assert(at);
        const double want = strtod(at + strlen(key), NULL), got = exp(acc.sum_nll / (double)acc.count);
        cr_expect_leq(fabs(round(got * 1e4) - round(want * 1e4)), 1.0, "chunk %d: %.4f, llama.cpp %.4f",
                      c + 1, got, want);
    }
    free(pref);
    cr_assert_eq(qk_kldb_finish(w, &err), 0, "%s", err.msg);
    size_t ns, nr;
    uint8_t *ours = tu_read(path, &ns), *ref = tu_read(BASE4, &nr);
    cr_assert_eq(ns, nr, "size %zu, llama.cpp %zu", ns, nr);
    const size_t head = 20 + 4 * 4 * N_CTX;
    cr_expect(memcmp(ours, ref, head) == 0, "header or tokens differ from llama.cpp's");
    /* llama's rows, dequantized and quantized again, give its bytes back */
    const size_t row = 2 * (2 * (512 / 2) + 4);
    float lg[512];
    uint16_t q[512];
    int worst = 0;
    for (size_t r = 0; r < 4 * 127; r++) {
        const uint8_t *p = ref + head + r * row;
        float scale, min_lp;
        memcpy(&scale, p, 4);
        memcpy(&min_lp, p + 4, 4);
        for (int i = 0; i < 512; i++) {
            uint16_t v;
            memcpy(&v, p + 8 + 2 * i, 2);
            lg[i] = v ? scale * v : -100.0f; /* a logit; the floor well below max-16 */
        }
        float s2, m2;
        qk_kldb_quantize_row(lg, 512, &s2, &m2, q);
        cr_expect_lt(fabsf(s2 - scale), 1e-9f);
        for (int i = 0; i < 512; i++) {
            uint16_t v;
            memcpy(&v, p + 8 + 2 * i, 2);
            const int d = abs((int)q[i] - (int)v);
            worst = d > worst ? d : worst;
        }
        /* and our own rows are close to llama's (logits agree to ~1e-3) */
        const uint8_t *o = ours + head + r * row;
        float so;
        memcpy(&so, o, 4);
        cr_expect_lt(fabsf(so - scale), 1e-6f);
    }
    cr_expect_leq(worst, 1, "re-quantized values differ by %d", worst);
    free(ours), free(ref), free(ids);
    qk_kldb_free(w);
    qk_kld_acc_free(&acc);
    remove(path);
    unload(&l);
}

/* Both formats from one run: the qk file dequantizes to the llama file's
 * values except at the top tokens, which are exact, and is < 1/2 the size. */
Test(kldbase, qk_format_holds_llama_values_and_exact_top)
{
    loaded l;
    load(&l, MODEL);
    size_t n;
    int32_t *ids = text_tokens(&l, &n);
    char *pl = tmp_path("b.kld"), *pq = tmp_path("b.qkb");
    qk_err err = {0};
    qk_kldb_writer *wl, *wq;
    const int chunks = 2;
    cr_assert_eq(qk_kldb_create(&wl, pl, QK_KLDB_LLAMA, N_CTX, 512, chunks, ids, 3, NULL, &err), 0);
    cr_assert_eq(qk_kldb_create(&wq, pq, QK_KLDB_QK, N_CTX, 512, chunks, ids, 9, NULL, &err), 0);
    qk_kld_acc acc;
    qk_kld_acc_init(&acc, QK_KLD_MODE_PPL, false);
    run(&l, ids, &(run_opts){.out = wl, .a = 0, .b = chunks}, &acc);
    qk_kld_acc_free(&acc);
    /* the same logits again for the qk writer, with the exact log-probs kept */
    qk_ctx *c;
    qk_ctx_params cp = {.n_ctx = N_CTX, .n_batch = N_CTX, .nthreads = 2, .kv_type = QK_F16};
    cr_assert_eq(qk_ctx_new(&c, &l.m, &cp, &err), 0);
    float *lg = malloc((size_t)N_CTX * 512 * sizeof *lg);
    float *exact = malloc((size_t)chunks * 127 * 512 * sizeof *exact);
    for (int ch = 0; ch < chunks; ch++) {
        int32_t win[N_CTX];
        memcpy(win, ids + ch * N_CTX, sizeof win);
        win[0] = qk_tok_bos(l.tok);
        qk_ctx_reset(c);
        cr_assert_eq(qk_forward(c, win, N_CTX, lg, true, &err), 0, "%s", err.msg);
        for (int r = 0; r < 127; r++) {
            const float *row = lg + (size_t)(128 + r) * 512;
            cr_assert_eq(qk_kldb_write_row(wq, row, NULL, &err), 0, "%s", err.msg);
            qk_ppl_logprobs(row, 512, exact + ((size_t)ch * 127 + r) * 512);
        }
    }
    cr_assert_eq(qk_kldb_finish(wl, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_kldb_finish(wq, &err), 0, "%s", err.msg);
    qk_kldb_reader *rl, *rq;
    cr_assert_eq(qk_kldb_open(&rl, pl, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_kldb_open(&rq, pq, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_kldb_reader_info(rq)->format, QK_KLDB_QK);
    cr_assert(memcmp(qk_kldb_reader_info(rq)->tokens, qk_kldb_reader_info(rl)->tokens,
                     (size_t)chunks * N_CTX * 4) == 0);
    float a[512], b[512];
    int exact_hits = 0;
    for (int r = 0; r < chunks * 127; r++) {
        cr_assert_eq(qk_kldb_read_row(rl, a, &err), 0, "%s", err.msg);
        cr_assert_eq(qk_kldb_read_row(rq, b, &err), 0, "%s", err.msg);
        const float *x = exact + (size_t)r * 512;
        for (int i = 0; i < 512; i++) {
            if (a[i] == b[i])
                continue;
            cr_assert_eq(b[i], x[i], "row %d token %d: qk %g, llama %g, exact %g", r, i, b[i], a[i], x[i]);
            exact_hits++;
        }
        const int top = qk_argmax(x, 512);
        cr_expect_eq(b[top], x[top], "row %d: the top token is not exact", r);
    }
    cr_expect_gt(exact_hits, 0);
    /* random access: back to chunk 1 */
    cr_assert_eq(qk_kldb_seek_chunk(rq, 1, &err), 0);
    cr_assert_eq(qk_kldb_read_row(rq, b, &err), 0);
    const int top = qk_argmax(exact + (size_t)127 * 512, 512);
    cr_expect_eq(b[top], exact[(size_t)127 * 512 + top]);
    size_t sl, sq;
    free(tu_read(pl, &sl));
    free(tu_read(pq, &sq));
    cr_expect_lt(sq * 2, sl, "qk %zu bytes, llama %zu", sq, sl);
    /* truncated: the index is gone */
    cr_assert_eq(truncate(pq, (off_t)sq - 5), 0);
    qk_kldb_reader *bad;
    cr_expect_eq(qk_kldb_open(&bad, pq, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "truncated"), "%s", err.msg);
    qk_kldb_close(rl), qk_kldb_close(rq);
    qk_ctx_free(c);
    free(lg), free(exact), free(ids);
    qk_kldb_free(wl), qk_kldb_free(wq);
    remove(pl), remove(pq);
    unload(&l);
}

/* The factored qk encoding: the output layer once plus each row's hidden
 * state.  The run computes the logits itself to keep the hidden states: its
 * scores equal a plain run's bit for bit, and the file reads back the exact
 * log-probabilities of the forward pass. */
Test(kldbase, qk_factored_is_exact)
{
    loaded l;
    load(&l, MODEL);
    size_t n;
    int32_t *ids = text_tokens(&l, &n);
    char *pq = tmp_path("f.qkb");
    qk_err err = {0};
    qk_kldb_writer *w;
    const int chunks = 2;
    const qk_kldb_head head = {&l.m.output, l.m.output_bias};
    cr_assert_eq(qk_kldb_create(&w, pq, QK_KLDB_QK, N_CTX, 512, chunks, ids, 9, &head, &err), 0,
                 "%s", err.msg);
    cr_assert(qk_kldb_wants_hidden(w));
    qk_kld_acc a, b;
    qk_kld_acc_init(&a, QK_KLD_MODE_PPL, true);
    qk_kld_acc_init(&b, QK_KLD_MODE_PPL, true);
    run(&l, ids, &(run_opts){.out = w, .a = 0, .b = chunks, .n_batch = 40}, &a);
    cr_assert_eq(qk_kldb_finish(w, &err), 0, "%s", err.msg);
    /* a plain run writing an ordinary file: the same per-token nll */
    char *pl = tmp_path("f.kld");
    qk_kldb_writer *wl;
    cr_assert_eq(qk_kldb_create(&wl, pl, QK_KLDB_LLAMA, N_CTX, 512, chunks, ids, 3, NULL, &err), 0);
    run(&l, ids, &(run_opts){.out = wl, .a = 0, .b = chunks}, &b);
    cr_assert_eq(qk_kldb_finish(wl, &err), 0, "%s", err.msg);
    cr_assert_eq(a.n_rec, b.n_rec);
    for (size_t i = 0; i < a.n_rec; i++)
        cr_assert_eq(a.rec[i].nll, b.rec[i].nll, "token %zu", i);
    /* read back: the forward pass's exact log-probs */
    qk_kldb_reader *r;
    cr_assert_eq(qk_kldb_open(&r, pq, &err), 0, "%s", err.msg);
    cr_assert(qk_kldb_reader_info(r)->factored);
    cr_assert_eq(qk_kldb_reader_info(r)->n_embd, l.m.hp.n_embd);
    qk_ctx *c;
    qk_ctx_params cp = {.n_ctx = N_CTX, .n_batch = N_CTX, .nthreads = 2, .kv_type = QK_F16};
    cr_assert_eq(qk_ctx_new(&c, &l.m, &cp, &err), 0);
    float *lg = malloc((size_t)N_CTX * 512 * sizeof *lg), *got = malloc(127 * 512 * sizeof *got);
    float want[512];
    cr_assert_eq(qk_kldb_seek_chunk(r, 1, &err), 0); /* random access first */
    for (int ch = 1; ch >= 0; ch--) {
        int32_t win[N_CTX];
        memcpy(win, ids + ch * N_CTX, sizeof win);
        win[0] = qk_tok_bos(l.tok);
        qk_ctx_reset(c);
        cr_assert_eq(qk_forward(c, win, N_CTX, lg, true, &err), 0, "%s", err.msg);
        cr_assert_eq(qk_kldb_seek_chunk(r, ch, &err), 0);
        cr_assert_eq(qk_kldb_read_rows(r, 100, got, &err), 0, "%s", err.msg);
        cr_assert_eq(qk_kldb_read_rows(r, 27, got + 100 * 512, &err), 0, "%s", err.msg);
        for (int row = 0; row < 127; row++) {
            qk_ppl_logprobs(lg + (size_t)(128 + row) * 512, 512, want);
            cr_assert(memcmp(want, got + (size_t)row * 512, sizeof want) == 0, "chunk %d row %d", ch, row);
        }
    }
    size_t sq, sl;
    free(tu_read(pq, &sq));
    free(tu_read(pl, &sl));
    /* the output layer dominates 2 chunks; the writer's caller picks the
     * factored encoding only when it is under half of llama's size */
    cr_expect_lt(sq, sl, "factored %zu bytes, llama %zu", sq, sl);
    cr_expect_not(qk_kldb_factored_pays(2 * 127, &l.m.output));
    cr_expect(qk_kldb_factored_pays(122 * 127, &l.m.output));
    qk_kldb_close(r);
    qk_ctx_free(c);
    free(lg), free(got), free(ids);
    qk_kldb_free(w), qk_kldb_free(wl);
    qk_kld_acc_free(&a), qk_kld_acc_free(&b);
    remove(pq), remove(pl);
    unload(&l);
}

Test(kldbase, truncated_and_foreign_files_are_errors)
{
    size_t n;
    uint8_t *b = tu_read(BASE4, &n);
    char *p = tmp_path("t.kld");
    qk_err err = {0};
    qk_kldb_reader *r;
    const size_t cuts[] = {4, 12, 20 + 100, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        FILE *f = fopen(p, "wb");
        fwrite(b, 1, cuts[i], f);
        fclose(f);
        err = (qk_err){0};
        cr_expect_eq(qk_kldb_open(&r, p, &err), QK_EINPUT, "cut at %zu", cuts[i]);
        cr_expect(strstr(err.msg, "truncated"), "cut at %zu: %s", cuts[i], err.msg);
    }
    /* a token outside the vocabulary */
    uint8_t *c = malloc(n);
    memcpy(c, b, n);
    const int32_t big = 600;
    memcpy(c + 20 + 4 * 10, &big, 4);
    FILE *f = fopen(p, "wb");
    fwrite(c, 1, n, f);
    fclose(f);
    cr_expect_eq(qk_kldb_open(&r, p, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "token 10"), "%s", err.msg);
    /* not a base file */
    cr_expect_eq(qk_kldb_open(&r, MODEL, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "magic"), "%s", err.msg);
    free(b), free(c);
    remove(p);
}

/* ---- partial results --------------------------------------------------------------- */

static void print_all(qk_kld_acc *acc, char *buf, size_t n)
{
    FILE *f = fmemopen(buf, n, "w");
    qk_kld_summary s;
    qk_kld_summarize(acc, &s);
    qk_kld_print_summary(f, &s);
    fclose(f);
}

Test(kldstats, merged_parts_equal_one_run)
{
    loaded l;
    load(&l, MODEL);
    qk_err err = {0};
    qk_kldb_reader *r;
    cr_assert_eq(qk_kldb_open(&r, BASE4, &err), 0, "%s", err.msg);
    const qk_kldb_info *in = qk_kldb_reader_info(r);
    qk_kld_acc whole, p1, p2, merged;
    qk_kld_acc_init(&whole, QK_KLD_MODE_KLD, false);
    qk_kld_acc_init(&p1, QK_KLD_MODE_KLD, true);
    qk_kld_acc_init(&p2, QK_KLD_MODE_KLD, true);
    run(&l, in->tokens, &(run_opts){.in = r, .a = 0, .b = 2}, &whole);
    run(&l, in->tokens, &(run_opts){.in = r, .a = 1, .b = 2}, &p2);
    run(&l, in->tokens, &(run_opts){.in = r, .a = 0, .b = 1}, &p1);
    const uint64_t h = qk_tokens_hash(in->tokens, 4 * N_CTX);
    qk_part_info i1 = {QK_KLD_MODE_KLD, N_CTX, 512, 4, 0, 1, 127, h, 0};
    qk_part_info i2 = {QK_KLD_MODE_KLD, N_CTX, 512, 4, 1, 2, 127, h, 0};
    char *f1 = tmp_path("1.qkpart"), *f2 = tmp_path("2.qkpart");
    cr_assert_eq(qk_part_write(f1, &i1, &p1, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_part_write(f2, &i2, &p2, &err), 0, "%s", err.msg);
    qk_part_info g1, g2;
    cr_assert_eq(qk_part_read_info(f1, &g1, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_part_read_info(f2, &g2, &err), 0, "%s", err.msg);
    cr_expect_eq(g2.chunk_a, 1);
    cr_expect_eq(g2.n_records, 127);
    qk_kld_acc_init(&merged, QK_KLD_MODE_KLD, false);
    cr_assert_eq(qk_part_replay(f1, &g1, &merged, NULL, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_part_replay(f2, &g2, &merged, NULL, NULL, &err), 0, "%s", err.msg);
    static char a[8192], b[8192];
    print_all(&whole, a, sizeof a);
    print_all(&merged, b, sizeof b);
    cr_expect_str_eq(a, b);
    cr_expect_eq(whole.sum_kld, merged.sum_kld);
    cr_expect_eq(whole.sum_nll2, merged.sum_nll2);
    /* a damaged part */
    size_t n;
    uint8_t *raw = tu_read(f2, &n);
    FILE *f = fopen(f2, "wb");
    fwrite(raw, 1, n - 10, f);
    fclose(f);
    cr_expect_eq(qk_part_replay(f2, &g2, &merged, NULL, NULL, &err), QK_EINPUT);
    free(raw);
    qk_kld_acc_free(&whole), qk_kld_acc_free(&p1), qk_kld_acc_free(&p2), qk_kld_acc_free(&merged);
    qk_kldb_close(r);
    remove(f1), remove(f2);
    unload(&l);
}

/* The statistics of llama's printout recomputed from its own per-token
 * rules: percentiles of an even count, errors of a small sample. */
Test(kldstats, percentiles_and_small_samples)
{
    qk_kld_acc a;
    qk_err err = {0};
    qk_kld_acc_init(&a, QK_KLD_MODE_KLD, false);
    for (int i = 0; i < 10; i++) {
        qk_kld_tok t = {.nll = 1.0 + 0.1 * i, .kld = 0.01 * (10 - i), .nll_base = 1.0f,
                        .p_diff = 0.001f * (float)(i - 5), .same_top = i % 2};
        cr_assert_eq(qk_kld_acc_add(&a, &t, &err), 0);
    }
    qk_kld_summary s;
    qk_kld_summarize(&a, &s);
    cr_expect_float_eq(s.kld_pct[0], 0.1, 1e-7);                        /* max */
    cr_expect_float_eq(s.kld_pct[10], 0.01, 1e-7);                      /* min */
    cr_expect_float_eq(s.kld_pct[5], 0.5f * (0.05f + 0.06f), 1e-7);     /* median of 10 */
    cr_expect_float_eq(s.kld_pct[2], (1 - 0.91f) * 0.09f + 0.91f * 0.1f, 1e-6); /* 99 %: p = 8.91 */
    cr_expect_eq(s.kld.e, 0.0, "no error for 10 values or fewer");
    cr_expect_float_eq(s.same_top.v, 50.0, 1e-9);
    qk_kld_acc_free(&a);
}
