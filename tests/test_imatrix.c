/* test_imatrix.c - qk-imatrix's library (lib/quant/imatrix_run.h,
 * imatrix_stats.h, imatrix.h) against llama-imatrix d32676d
 * (goldens/imatrix, made on stories4M with eval-64k.txt, -c 128 --chunks 8):
 * - collection: every in_sum2 element within 1e-4 relative of llama's, the
 *   counts equal; also with -b 120 (llama drops the 8-token micro-batch at
 *   the end of each chunk) and --process-output.  The tolerance: both sum
 *   the same squares in float in the same order (llama's loop); what
 *   differs is the activations, qk's forward pass against llama.cpp's
 *   (measured at most 5.9e-5 here);
 * - the bytes do not depend on the thread count or the batch size;
 * - mixture-of-experts models (goldens/arch): per-expert counts equal and
 *   sums within 1e-4 (see moe_against_llama_imatrix);
 * - combining (--in-file) and the legacy writer give llama's bytes exactly
 *   (dense and per-expert);
 * - the reader parses from a buffer and refuses every truncation cleanly. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "lib/engine/model.h"
#include "lib/engine/tokenizer.h"
#include "lib/eval/ppl.h"
#include "lib/quant/imatrix.h"
#include "lib/quant/imatrix_run.h"
#include "lib/quant/imatrix_stats.h"
#include "tests/testutil.h"

#define MODEL "goldens/models/stories4M/stories4M-f32.gguf"
#define TEXT "goldens/stories260K-eval/eval-64k.txt"
#define G "goldens/imatrix/"
#define N_CTX 128
#define N_CHUNK 8

static char tmpdir[64];

static void make_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/qk_imatrix_test.XXXXXX");
    cr_assert(mkdtemp(tmpdir));
}

static void rm_tmp(void)
{
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

typedef struct {
    qk_gguf *g;
    qk_model m;
    qk_tokenizer *tok;
    int32_t *ids;
    size_t n_ids;
} fixture;

static void load_model(fixture *f, const char *model)
{
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&f->g, model, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_model_load(&f->m, f->g, &err), 0, "%s", err.msg);
    f->tok = qk_tok_from_gguf(f->g, &err);
    cr_assert(f->tok, "%s", err.msg);
    size_t n;
    char *text = tu_read(TEXT, &n);
    cr_assert_eq(qk_ppl_tokenize(f->tok, text, n, &f->ids, &f->n_ids, &err), 0, "%s", err.msg);
    free(text);
}

static void load(fixture *f) { load_model(f, MODEL); }

static void unload(fixture *f)
{
    free(f->ids);
    qk_tok_free(f->tok);
    qk_model_free(&f->m);
    qk_gguf_close(f->g);
}

/* Collect with llama-imatrix's options into s: -c n_ctx --chunks n_chunk. */
/* into s as it is (initialised, perhaps holding --in-file data) */
static void collect_into(fixture *f, qk_imx *s, int n_ctx, int n_chunk, int n_batch, bool output, int threads)
{
    qk_err err = {0};
    qk_imatrix_job j = {.model = &f->m, .tokens = f->ids, .n_ctx = n_ctx, .n_chunk = n_chunk,
                        .n_batch = n_batch, .bos = qk_tok_bos(f->tok), .add_bos = qk_tok_add_bos(f->tok),
                        .process_output = output, .want_logits = true, .nthreads = threads, .stats = s,
                        .out_freq = 10};
    cr_assert_eq(qk_imatrix_run(&j, &err), 0, "%s", err.msg);
}

static void collect_n(fixture *f, qk_imx *s, int n_ctx, int n_chunk, int n_batch, bool output, int threads)
{
    qk_imx_init(s, n_ctx);
    collect_into(f, s, n_ctx, n_chunk, n_batch, output, threads);
}

static void collect(fixture *f, qk_imx *s, int n_batch, bool output, int threads)
{
    collect_n(f, s, N_CTX, N_CHUNK, n_batch, output, threads);
}

/* values false: the entries, shapes and counts only */
static void against_llama_v(const qk_imx *s, const char *golden, bool values)
{
    qk_imatrix *ref;
    qk_err err = {0};
    cr_assert_eq(qk_imatrix_read(&ref, golden, &err), 0, "%s", err.msg);
    cr_assert_eq(s->n, ref->n, "%zu entries, llama has %zu", s->n, ref->n);
    cr_assert_eq(qk_imx_chunks(s), ref->chunk_count);
    double worst = 0;
    for (size_t i = 0; i < s->n; i++) {
        const qk_imatrix_entry *e = qk_imatrix_find(ref, s->e[i].name);
        cr_assert(e, "%s: not in llama's file", s->e[i].name);
        cr_assert_eq((uint64_t)s->e[i].n_values, e->n);
        cr_assert_eq((uint64_t)s->e[i].n_counts, e->n_counts);
        for (uint64_t k = 0; k < e->n_counts; k++)
            cr_assert_eq(s->e[i].counts[k], e->counts[k], "%s: count %lld, llama %lld", s->e[i].name,
                         (long long)s->e[i].counts[k], (long long)e->counts[k]);
        for (uint64_t k = 0; k < e->n && values; k++) {
            const double rel = fabs((double)s->e[i].values[k] - e->sums[k]) / fabs((double)e->sums[k]);
            worst = rel > worst ? rel : worst;
            cr_assert_leq(rel, 1e-4, "%s[%llu]: %.9g, llama %.9g", s->e[i].name, (unsigned long long)k,
                          (double)s->e[i].values[k], (double)e->sums[k]);
        }
    }
    if (values)
        cr_log_info("%s: max relative in_sum2 difference %.3g", golden, worst);
    qk_imatrix_free(ref);
}

static void against_llama(const qk_imx *s, const char *golden) { against_llama_v(s, golden, true); }

Test(imatrix, stories4M_against_llama_imatrix, .timeout = 120)
{
    fixture f = {0};
    load(&f);
    qk_imx s;
    collect(&f, &s, 2048, false, 2);
    against_llama(&s, G "stories4M-c128.imatrix.gguf");
    qk_imx_free(&s);
    collect(&f, &s, 120, false, 2);
    against_llama(&s, G "stories4M-c128-b120.imatrix.gguf");
    cr_assert_eq(s.e[0].counts[0], N_CHUNK * 120); /* 8 tokens of each chunk dropped */
    qk_imx_free(&s);
    collect(&f, &s, 2048, true, 2);
    against_llama(&s, G "stories4M-c128-output.imatrix.gguf");
    qk_imx_free(&s);
    unload(&f);
}

static void save(const qk_imx *s, const char *name, bool legacy, char *path)
{
    qk_err err = {0};
    sprintf(path, "%s/%s", tmpdir, name);
    cr_assert_eq(qk_imx_save(s, path, legacy, TEXT, &err), 0, "%s", err.msg);
}

static bool same_bytes(const char *a, const char *b)
{
    size_t na, nb;
    char *x = tu_read(a, &na), *y = tu_read(b, &nb);
    bool same = na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

Test(imatrix, bytes_do_not_depend_on_threads_or_batch, .timeout = 120)
{
    make_tmp();
    fixture f = {0};
    load(&f);
    char ref[128], p[128];
    qk_imx s;
    collect(&f, &s, 2048, true, 1);
    s.last_chunk = qk_imx_chunks(&s);
    save(&s, "ref.gguf", false, ref);
    qk_imx_free(&s);
    const int batch[] = {16, 512}, threads[] = {3, 2};
    for (int i = 0; i < 2; i++) {
        collect(&f, &s, batch[i], true, threads[i]);
        s.last_chunk = qk_imx_chunks(&s);
        save(&s, "x.gguf", false, p);
        cr_assert(same_bytes(ref, p), "-b %d -t %d: other bytes", batch[i], threads[i]);
        qk_imx_free(&s);
    }
    unload(&f);
    rm_tmp();
}

/* Mixture-of-experts models (goldens/arch: imatrix.gguf is llama-imatrix -c
 * 128 --chunks 2 on the eval text): the router, shared expert and dense
 * products as above, the experts (MUL_MAT_ID) per expert: in_sum2
 * [64 or 32, n_expert], counts [1, n_expert] equal to llama's (the routing
 * is the same) and every sum within 1e-4.  qwen2moe has the shared expert,
 * mixtral plain top-2 of 4, gpt-oss biases and softmax after top-k.
 * (qwen3moe is left out: its dense blk.1.attn_output.weight, which the
 * experts do not touch, is already 1.2e-4 from llama's.) */
Test(imatrix, moe_against_llama_imatrix)
{
    const char *fam[] = {"qwen2moe", "mixtral", "gpt-oss"};
    const int n_expert[] = {4, 4, 4};
    for (int i = 0; i < 3; i++) {
        char model[128], golden[128];
        snprintf(model, sizeof model, "goldens/arch/%s/%s-f32.gguf", fam[i], fam[i]);
        snprintf(golden, sizeof golden, "goldens/arch/%s/imatrix.gguf", fam[i]);
        fixture f = {0};
        load_model(&f, model);
        qk_imx s;
        collect_n(&f, &s, 128, 2, 2048, false, 2);
        against_llama(&s, golden);
        qk_err err = {0};
        long k = qk_imx_entry_index(&s, "blk.1.ffn_down_exps.weight", 26, &err);
        cr_assert(k >= 0 && s.e[k].n_counts == n_expert[i] && s.e[k].n_values == 32 * n_expert[i]);
        int64_t sum = 0;
        for (int e = 0; e < n_expert[i]; e++)
            sum += s.e[k].counts[e];
        cr_assert_eq(sum, 2 * 128 * f.m.hp.n_expert_used, "every (token, slot) once");
        qk_imx_free(&s);
        unload(&f);
    }
    /* -c 16: 32 tokens, experts of layer 0 that no token chose (counts 0), the
     * same in qk's counts.  (The sums are not compared: with 16-token windows
     * side by side llama.cpp's attention differs from qk's by up to 5e-4 in
     * the dense blk.0.attn_output.weight already.) */
    fixture f = {0};
    load_model(&f, "goldens/arch/qwen3moe/qwen3moe-f32.gguf");
    qk_imx s;
    collect_n(&f, &s, 16, 2, 2048, false, 2);
    against_llama_v(&s, G "qwen3moe-c16.imatrix.gguf", false);
    qk_err err = {0};
    const long k = qk_imx_entry_index(&s, "blk.0.ffn_gate_exps.weight", 26, &err);
    cr_assert(k >= 0 && s.e[k].counts[0] == 0 && s.e[k].counts[3] > 0);
    qk_imx_free(&s);
    /* collecting on top of a legacy file (--in-file X.dat): its single counts
     * broadcast to the experts, then each expert's rows added (counts only:
     * qwen3moe's sums, see above) */
    qk_imatrix *m;
    cr_assert_eq(qk_imatrix_read(&m, G "qwen3moe-c16.imatrix.dat", &err), 0, "%s", err.msg);
    qk_imx_init(&s, 128);
    cr_assert_eq(qk_imx_combine(&s, m, "x.dat", &err), 0, "%s", err.msg);
    qk_imatrix_free(m);
    collect_into(&f, &s, 128, 2, 2048, false, 2);
    against_llama_v(&s, G "qwen3moe-in.imatrix.gguf", false);
    qk_imx_free(&s);
    unload(&f);
}

/* The experts' sums do not depend on threads or batch size either; with
 * -b 8 the dense products (micro-batches under 16 rows) are skipped and the
 * experts still collected, as llama-imatrix does. */
Test(imatrix, moe_bytes_do_not_depend_on_threads_or_batch)
{
    make_tmp();
    fixture f = {0};
    load_model(&f, "goldens/arch/qwen2moe/qwen2moe-f32.gguf");
    char ref[128], p[128];
    qk_imx s;
    collect_n(&f, &s, 128, 2, 2048, true, 1);
    s.last_chunk = qk_imx_chunks(&s);
    save(&s, "ref.gguf", false, ref);
    qk_imx_free(&s);
    const int batch[] = {16, 128}, threads[] = {3, 2};
    for (int i = 0; i < 2; i++) {
        collect_n(&f, &s, 128, 2, batch[i], true, threads[i]);
        s.last_chunk = qk_imx_chunks(&s);
        save(&s, "x.gguf", false, p);
        cr_assert(same_bytes(ref, p), "-b %d -t %d: other bytes", batch[i], threads[i]);
        qk_imx_free(&s);
    }
    collect_n(&f, &s, 128, 2, 8, false, 2);
    qk_err err = {0};
    const long d = qk_imx_entry_index(&s, "blk.0.ffn_gate_inp.weight", 25, &err);
    const long x = qk_imx_entry_index(&s, "blk.0.ffn_up_exps.weight", 24, &err);
    cr_assert(d >= 0 && x >= 0);
    cr_assert(s.e[d].n_values == 0, "a product of 8 rows collected");
    int64_t sum = 0;
    for (int e = 0; e < s.e[x].n_counts; e++)
        sum += s.e[x].counts[e];
    cr_assert_eq(sum, 2 * 128 * f.m.hp.n_expert_used);
    qk_imx_free(&s);
    unload(&f);
    rm_tmp();
}

/* --in-file: llama's load_imatrix, then its writers.  The goldens were
 * combined with llama-imatrix's default -c 512 (the chunk size recorded,
 * the one legacy values are scaled by and ncall counted in), except that
 * the round trip of one file needs the -c it was made with. */
static void combine(qk_imx *s, const char *const *files, int n, int chunk)
{
    qk_err err = {0};
    qk_imx_init(s, chunk);
    for (int i = 0; i < n; i++) {
        qk_imatrix *m;
        cr_assert_eq(qk_imatrix_read(&m, files[i], &err), 0, "%s", err.msg);
        cr_assert_eq(qk_imx_combine(s, m, files[i], &err), 0, "%s", err.msg);
        qk_imatrix_free(m);
    }
}

Test(imatrix, combining_gives_llama_bytes)
{
    make_tmp();
    char p[128];
    qk_imx s;
    qk_err err = {0};
    const char *one[] = {G "stories4M-c128.imatrix.gguf"};
    combine(&s, one, 1, N_CTX); /* with the -c it was made with */
    sprintf(p, "%s/a.gguf", tmpdir);
    cr_assert_eq(qk_imx_save(&s, p, false, NULL, &err), 0, "%s", err.msg);
    cr_assert(same_bytes(p, one[0]), "GGUF round trip");
    qk_imx_free(&s);
    combine(&s, one, 1, 512);
    sprintf(p, "%s/a.dat", tmpdir);
    cr_assert_eq(qk_imx_save(&s, p, true, NULL, &err), 0, "%s", err.msg);
    cr_assert(same_bytes(p, G "stories4M-c128.imatrix.dat"), "legacy writer");
    qk_imx_free(&s);
    /* a legacy file and a GGUF file: llama-imatrix --in-file X.dat --in-file Y.gguf */
    const char *two[] = {G "stories4M-c128.imatrix.dat", G "stories4M-c128-b120.imatrix.gguf"};
    combine(&s, two, 2, 512);
    sprintf(p, "%s/b.gguf", tmpdir);
    cr_assert_eq(qk_imx_save(&s, p, false, NULL, &err), 0, "%s", err.msg);
    cr_assert(same_bytes(p, G "combined.imatrix.gguf"), "combination");
    qk_imx_free(&s);
    /* experts: per-expert counts round trip, the legacy writer with partial
     * data (unused experts stored as 1), a legacy file's single counts
     * broadcast to the experts of a GGUF file */
    const char *moe[] = {G "qwen3moe-c16.imatrix.gguf"};
    combine(&s, moe, 1, 16);
    sprintf(p, "%s/m.gguf", tmpdir);
    cr_assert_eq(qk_imx_save(&s, p, false, NULL, &err), 0, "%s", err.msg);
    cr_assert(same_bytes(p, moe[0]), "MoE GGUF round trip");
    qk_imx_free(&s);
    combine(&s, moe, 1, 512);
    sprintf(p, "%s/m.dat", tmpdir);
    cr_assert_eq(qk_imx_save(&s, p, true, NULL, &err), 0, "%s", err.msg);
    cr_assert(same_bytes(p, G "qwen3moe-c16.imatrix.dat"), "MoE legacy writer");
    qk_imx_free(&s);
    const char *moe2[] = {G "qwen3moe-c16.imatrix.dat", "goldens/arch/qwen3moe/imatrix.gguf"};
    combine(&s, moe2, 2, 512);
    sprintf(p, "%s/mc.gguf", tmpdir);
    cr_assert_eq(qk_imx_save(&s, p, false, NULL, &err), 0, "%s", err.msg);
    cr_assert(same_bytes(p, G "qwen3moe-combined.imatrix.gguf"), "MoE combination");
    qk_imx_free(&s);
    /* mismatched sizes: code 2 naming the file */
    qk_imx_init(&s, N_CTX);
    qk_imatrix *m;
    cr_assert_eq(qk_imatrix_read(&m, one[0], &err), 0);
    free(m->e[0].values);
    m->e[0].n = 7; /* another model's weight of the same name */
    m->e[0].values = NULL;
    long k = qk_imx_entry_index(&s, m->e[0].name, strlen(m->e[0].name), &err);
    cr_assert_geq(k, 0);
    float x[256] = {1};
    cr_assert_eq(qk_imx_add(&s, k, x, 1, 256, 1, &err), 0);
    cr_assert_eq(qk_imx_combine(&s, m, "other.gguf", &err), 2);
    cr_assert(strstr(err.msg, "other.gguf"), "%s", err.msg);
    qk_imatrix_free(m);
    qk_imx_free(&s);
    rm_tmp();
}

Test(imatrix, reader_on_buffers_refuses_truncations)
{
    const char *files[] = {G "stories4M-c128.imatrix.gguf", G "stories4M-c128.imatrix.dat"};
    for (int f = 0; f < 2; f++) {
        size_t n;
        uint8_t *buf = tu_read(files[f], &n);
        qk_imatrix *m;
        qk_err err = {0};
        cr_assert_eq(qk_imatrix_parse(&m, buf, n, files[f], &err), 0, "%s", err.msg);
        cr_assert_eq(m->n, 28);
        cr_assert_eq(m->legacy, f == 1);
        qk_imatrix_free(m);
        /* every prefix: parsed or refused with code 2, never a crash (the legacy
         * trailer is optional, so some prefixes are whole files) */
        for (size_t len = 0; len < n; len += 1 + len / 64) {
            int rc = qk_imatrix_parse(&m, buf, len, files[f], &err);
            cr_assert(rc == 0 || rc == 2, "prefix %zu: code %d", len, rc);
            if (!rc)
                qk_imatrix_free(m);
        }
        free(buf);
    }
}
