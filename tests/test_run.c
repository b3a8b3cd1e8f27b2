/* qk-run's pieces: the Hugging Face model loader (lib/engine/hfmodel.h), the
 * logits file (lib/eval/logits_file.h) and the driver's --logits-out.
 *
 * - hf-f32 (the stories260K GGUF's source, rows in HF order) gives logits
 *   bit-identical with the GGUF, F32 and F16 caches: the q/k rows are
 *   permuted at load exactly as llama.cpp's converter does;
 * - hf-bf16 is really computed in BF16 (differs from F32, same argmax nearly
 *   everywhere); relabelled Qwen2 (NEOX rope on unpermuted rows) agrees with
 *   the GGUF up to the order of the q.k sums; an untied lm_head is used;
 * - bad directories: unsupported architecture, missing tensor, missing
 *   lm_head, missing config.json, each named; llama3 rope factors follow the
 *   converter's formula;
 * - the logits file round-trips (F32 exactly, F16 as rounded), is
 *   deterministic, and the reader rejects damaged files with code 2;
 * - `qk-run --logits-out` writes exactly the engine's logits, and the same
 *   bytes with 1 and 2 threads. */
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/engine/forward.h"
#include "formats/gguf.h"
#include "kernels/half.h"
#include "lib/engine/hfmodel.h"
#include "lib/eval/logits_file.h"
#include "lib/engine/model.h"
#include "formats/safetensors.h"
#include "lib/engine/sampling.h"
#include "tests/testutil.h"
#include "kernels/types.h"

#define MDIR "goldens/models/stories260K/"
#define GGUF MDIR "stories260K-f32.gguf"
#define TOKENS "goldens/stories260K-eval/eval-64k.tokens.txt"
#define N_TOK 64

/* ---- helpers ---------------------------------------------------------------- */

static int32_t *eval_tokens(int n)
{
    char *text = tu_read(TOKENS, NULL);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    const char *p = text;
    for (int i = 0; i < n; i++) {
        while (*p && (*p < '0' || *p > '9'))
            p++;
        cr_assert(*p, "fewer than %d ids in " TOKENS, n);
        ids[i] = (int32_t)strtol(p, (char **)&p, 10);
    }
    free(text);
    return ids;
}

static float *logits_of(const qk_model *m, const int32_t *tok, int n, int kv_type, int threads)
{
    qk_err err = {0};
    qk_ctx *c;
    qk_ctx_params p = {.n_ctx = n, .nthreads = threads, .kv_type = kv_type};
    cr_assert_eq(qk_ctx_new(&c, m, &p, &err), 0, "%s", err.msg);
    float *lg = malloc((size_t)n * m->hp.n_vocab * sizeof *lg);
    cr_assert_eq(qk_forward(c, tok, n, lg, true, &err), 0, "%s", err.msg);
    qk_ctx_free(c);
    return lg;
}

typedef struct {
    qk_gguf *g;
    qk_model m;
} gguf_model;

static void gguf_load(gguf_model *gm)
{
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&gm->g, GGUF, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_model_load(&gm->m, gm->g, &err), 0, "%s", err.msg);
}

static void gguf_unload(gguf_model *gm)
{
    qk_model_free(&gm->m);
    qk_gguf_close(gm->g);
}

static qk_hfmodel *hf_load(const char *dir)
{
    qk_err err = {0};
    qk_hfmodel *h;
    cr_assert_eq(qk_hfmodel_open(&h, dir, &err), 0, "%s", err.msg);
    return h;
}

static char tmpdir[64];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/qk_test_run_XXXXXX");
    cr_assert(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_expect_eq(system(cmd), 0);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* hf-f32's config.json with `from` replaced by `to` (to NULL: as is). */
static void write_config(const char *from, const char *to)
{
    char *cfg = tu_read(MDIR "hf-f32/config.json", NULL);
    char path[128], *out = cfg;
    if (from) {
        char *at = strstr(cfg, from);
        cr_assert(at, "config.json has no '%s'", from);
        size_t n = strlen(cfg) - strlen(from) + strlen(to) + 1;
        out = malloc(n);
        snprintf(out, n, "%.*s%s%s", (int)(at - cfg), cfg, to, at + strlen(from));
    }
    snprintf(path, sizeof path, "%s/config.json", tmpdir);
    write_text(path, out);
    if (out != cfg)
        free(out);
    free(cfg);
}

/* hf-f32's tensors into tmpdir/model.safetensors, leaving out `skip` and
 * adding the embeddings again as `extra` (either may be NULL). */
static void write_weights(const char *skip, const char *extra)
{
    qk_err err = {0};
    qk_st *st;
    cr_assert_eq(qk_st_open(&st, MDIR "hf-f32/model.safetensors", &err), 0, "%s", err.msg);
    qk_st_writer *w = qk_st_writer_new(0);
    for (size_t i = 0; i < st->n_tensors; i++) {
        const qk_st_tensor *t = &st->tensors[i];
        if (skip && strcmp(t->name, skip) == 0)
            continue;
        cr_assert_eq(qk_st_w_tensor(w, t->name, t->dtype->name, t->n_dims, t->shape, t->data,
                                    &err),
                     0, "%s", err.msg);
    }
    if (extra) {
        const qk_st_tensor *e = qk_st_find(st, "model.embed_tokens.weight");
        cr_assert_eq(qk_st_w_tensor(w, extra, e->dtype->name, e->n_dims, e->shape, e->data, &err),
                     0, "%s", err.msg);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    cr_assert_eq(qk_st_w_begin(w, path, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_st_writer_finish(w, &err), 0, "%s", err.msg);
    qk_st_writer_free(w);
    qk_st_close(st);
}

/* Open tmpdir, expecting failure with code 2 and `needle` in the message. */
static void expect_hf_error(const char *needle)
{
    qk_err err = {0};
    qk_hfmodel *h = NULL;
    cr_expect_eq(qk_hfmodel_open(&h, tmpdir, &err), QK_EINPUT, "opened anyway (%s)", err.msg);
    cr_expect_null(h);
    cr_expect(strstr(err.msg, needle), "message '%s' does not name '%s'", err.msg, needle);
}

/* ---- Hugging Face directories ------------------------------------------------- */

static void check_f32_identical(int kv_type)
{
    gguf_model gm;
    gguf_load(&gm);
    qk_hfmodel *h = hf_load(MDIR "hf-f32");
    const qk_hparams *a = &gm.m.hp, *b = &h->m.hp;
    cr_expect_eq(a->n_vocab, b->n_vocab);
    cr_expect_eq(a->n_embd, b->n_embd);
    cr_expect_eq(a->n_layer, b->n_layer);
    cr_expect_eq(a->n_ff, b->n_ff);
    cr_expect_eq(a->n_head, b->n_head);
    cr_expect_eq(a->n_head_kv, b->n_head_kv);
    cr_expect_eq(a->head_dim, b->head_dim);
    cr_expect_eq(a->n_rot, b->n_rot);
    cr_expect_eq(a->rope_mode, b->rope_mode);
    cr_expect_eq(a->rope_freq_base, b->rope_freq_base);
    cr_expect_eq(a->rms_eps, b->rms_eps);
    cr_expect_eq(a->kq_scale, b->kq_scale);
    cr_expect_eq(h->m.output.data, h->m.tok_embd.data, "tie_word_embeddings: lm head = embeddings");
    int32_t *tok = eval_tokens(N_TOK);
    float *la = logits_of(&gm.m, tok, N_TOK, kv_type, 2);
    float *lb = logits_of(&h->m, tok, N_TOK, kv_type, 2);
    cr_expect(memcmp(la, lb, (size_t)N_TOK * a->n_vocab * sizeof *la) == 0,
              "hf-f32 logits differ from the GGUF's");
    free(la), free(lb), free(tok);
    qk_hfmodel_close(h);
    gguf_unload(&gm);
}

Test(hfmodel, f32_dir_is_bit_identical_to_gguf_f32_cache) { check_f32_identical(QK_F32); }
Test(hfmodel, f32_dir_is_bit_identical_to_gguf_f16_cache) { check_f32_identical(QK_F16); }

Test(hfmodel, bf16_dir_computes_in_bf16)
{
    gguf_model gm;
    gguf_load(&gm);
    qk_hfmodel *h = hf_load(MDIR "hf-bf16");
    cr_expect_eq(h->m.layers[0].wq.type, QK_BF16);
    const int nv = gm.m.hp.n_vocab;
    int32_t *tok = eval_tokens(N_TOK);
    float *la = logits_of(&gm.m, tok, N_TOK, QK_F16, 1);
    float *lb = logits_of(&h->m, tok, N_TOK, QK_F16, 1);
    int same_top = 0;
    double worst = 0;
    for (int t = 0; t < N_TOK; t++) {
        same_top += qk_argmax(la + (size_t)t * nv, nv) == qk_argmax(lb + (size_t)t * nv, nv);
        for (int i = 0; i < nv; i++)
            worst = fmax(worst, fabs(la[(size_t)t * nv + i] - lb[(size_t)t * nv + i]));
    }
    cr_expect_gt(worst, 0.0, "bf16 gave the f32 logits: not computed in bf16?");
    cr_expect_lt(worst, 0.5, "bf16 logits far from f32: %g", worst);
    cr_expect_geq(same_top, N_TOK - 2, "argmax agrees at only %d of %d positions", same_top, N_TOK);
    free(la), free(lb), free(tok);
    qk_hfmodel_close(h);
    gguf_unload(&gm);
}

/* Qwen2 keeps HF rows and rotates halves (NEOX): same function as llama's
 * permuted rows, up to the order of the q.k sums. */
Test(hfmodel, qwen2_uses_neox_rope_on_hf_rows)
{
    make_tmpdir();
    write_config("LlamaForCausalLM", "Qwen2ForCausalLM");
    write_weights(NULL, NULL);
    gguf_model gm;
    gguf_load(&gm);
    qk_hfmodel *h = hf_load(tmpdir);
    cr_expect_eq(h->m.hp.arch, QK_ARCH_QWEN2);
    cr_expect_eq(h->m.hp.rope_mode, QK_ROPE_NEOX);
    const int nv = gm.m.hp.n_vocab;
    int32_t *tok = eval_tokens(N_TOK);
    float *la = logits_of(&gm.m, tok, N_TOK, QK_F32, 1);
    float *lb = logits_of(&h->m, tok, N_TOK, QK_F32, 1);
    double worst = 0;
    for (size_t i = 0; i < (size_t)N_TOK * nv; i++)
        worst = fmax(worst, fabs(la[i] - lb[i]));
    cr_expect_lt(worst, 1e-4, "largest difference %g", worst);
    cr_expect_gt(worst, 0.0, "identical bytes: were the rows permuted?");
    free(la), free(lb), free(tok);
    qk_hfmodel_close(h);
    gguf_unload(&gm);
    remove_tmpdir();
}

Test(hfmodel, untied_lm_head_is_used)
{
    make_tmpdir();
    write_config("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
    write_weights(NULL, "lm_head.weight");
    qk_hfmodel *h = hf_load(tmpdir);
    cr_expect_neq(h->m.output.data, h->m.tok_embd.data);
    cr_expect_eq(h->m.output.name_len, 14);
    cr_expect(memcmp(h->m.output.name, "lm_head.weight", 14) == 0);
    gguf_model gm;
    gguf_load(&gm);
    int32_t *tok = eval_tokens(16);
    float *la = logits_of(&gm.m, tok, 16, QK_F32, 1);
    float *lb = logits_of(&h->m, tok, 16, QK_F32, 1);
    cr_expect(memcmp(la, lb, (size_t)16 * gm.m.hp.n_vocab * sizeof *la) == 0);
    free(la), free(lb), free(tok);
    gguf_unload(&gm);
    qk_hfmodel_close(h);
    remove_tmpdir();
}

Test(hfmodel, unsupported_architecture_is_named)
{
    make_tmpdir();
    write_config("LlamaForCausalLM", "GPT2LMHeadModel");
    write_weights(NULL, NULL);
    expect_hf_error("GPT2LMHeadModel");
    remove_tmpdir();
}

Test(hfmodel, missing_tensor_is_named)
{
    make_tmpdir();
    write_config(NULL, NULL);
    write_weights("model.layers.3.mlp.up_proj.weight", NULL);
    expect_hf_error("model.layers.3.mlp.up_proj.weight");
    write_weights("model.norm.weight", NULL);
    expect_hf_error("model.norm.weight");
    write_weights("model.layers.0.self_attn.k_proj.weight", NULL);
    expect_hf_error("model.layers.0.self_attn.k_proj.weight");
    remove_tmpdir();
}

Test(hfmodel, untied_without_lm_head_is_an_error)
{
    make_tmpdir();
    write_config("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
    write_weights(NULL, NULL);
    expect_hf_error("lm_head.weight");
    remove_tmpdir();
}

Test(hfmodel, bad_configs_are_named)
{
    make_tmpdir();
    write_weights(NULL, NULL);
    expect_hf_error("config.json"); /* none at all */
    write_config("\"hidden_size\": 64", "\"hidden_size\": 65");
    expect_hf_error("model.embed_tokens.weight"); /* shape no longer fits */
    write_config("\"num_key_value_heads\": 4", "\"num_key_value_heads\": 3");
    expect_hf_error("num_key_value_heads");
    write_config("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"");
    expect_hf_error("gelu");
    write_config("\"vocab_size\": 512", "\"vocab_size\": 513");
    expect_hf_error("vocab_size");
    write_config("\"rope_theta\": 10000.0",
                 "\"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": \"dynamic\"}");
    expect_hf_error("dynamic"); /* yarn and longrope are supported (hfarch.c) */
    remove_tmpdir();
}

/* conversion/llama.py generate_extra_tensors, in double. */
static double llama3_factor(int i, int dim, double base, double factor, double lo, double hi,
                            double old_ctx)
{
    double freq = 1.0 / pow(base, (double)(2 * i) / dim);
    double wavelen = 2 * M_PI / freq;
    if (wavelen < old_ctx / hi)
        return 1.0;
    if (wavelen > old_ctx / lo)
        return factor;
    double smooth = (old_ctx / wavelen - lo) / (hi - lo);
    return 1.0 / ((1 - smooth) / factor + smooth);
}

Test(hfmodel, llama3_rope_scaling_gives_rope_freqs)
{
    make_tmpdir();
    write_config("\"rope_theta\": 10000.0",
                 "\"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", "
                 "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                 "\"original_max_position_embeddings\": 1000}");
    write_weights(NULL, NULL);
    qk_hfmodel *h = hf_load(tmpdir);
    cr_assert_not_null(h->m.rope_freqs);
    int n_factor = 0, n_one = 0, n_smooth = 0;
    for (int i = 0; i < h->m.hp.n_rot / 2; i++) {
        double want = llama3_factor(i, h->m.hp.n_rot, 10000.0, 8.0, 1.0, 4.0, 1000.0);
        cr_expect_float_eq(h->m.rope_freqs[i], want, 1e-5 * want, "factor %d: %g, want %g", i,
                           h->m.rope_freqs[i], want);
        n_one += want == 1.0, n_factor += want == 8.0, n_smooth += want != 1.0 && want != 8.0;
    }
    cr_expect(n_one && n_factor && n_smooth, "the test config should exercise all three cases");
    qk_hfmodel_close(h);
    remove_tmpdir();
}

/* ---- the logits file -------------------------------------------------------------- */

static void write_rows(const char *path, int dtype, const float *rows, const int32_t *tok,
                       int n, int nv)
{
    qk_err err = {0};
    qk_logits_writer *w;
    cr_assert_eq(qk_logits_create(&w, path, (uint32_t)nv, dtype, &err), 0, "%s", err.msg);
    for (int i = 0; i < n; i++)
        cr_assert_eq(qk_logits_append(w, tok[i], rows + (size_t)i * nv, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_logits_finish(w, &err), 0, "%s", err.msg);
}

static float *random_rows(int n, int nv)
{
    uint64_t s = 12345;
    float *r = malloc((size_t)n * nv * sizeof *r);
    for (size_t i = 0; i < (size_t)n * nv; i++)
        r[i] = 4.0f * tu_gauss(&s);
    r[3] = INFINITY, r[4] = -INFINITY, r[5] = 0.0f, r[6] = -0.0f, r[7] = 70000.0f;
    return r;
}

static void check_round_trip(int dtype)
{
    make_tmpdir();
    const int n = 37, nv = 1000;
    float *rows = random_rows(n, nv);
    int32_t tok[37];
    for (int i = 0; i < n; i++)
        tok[i] = 7 * i + 1;
    char path[128], path2[128];
    snprintf(path, sizeof path, "%s/a.logits", tmpdir);
    snprintf(path2, sizeof path2, "%s/b.logits", tmpdir);
    write_rows(path, dtype, rows, tok, n, nv);
    write_rows(path2, dtype, rows, tok, n, nv);
    size_t sa, sb;
    uint8_t *a = tu_read(path, &sa), *b = tu_read(path2, &sb);
    cr_expect(sa == sb && memcmp(a, b, sa) == 0, "the same rows gave different bytes");
    free(a), free(b);

    qk_err err = {0};
    qk_logits_reader *r;
    cr_assert_eq(qk_logits_open(&r, path, &err), 0, "%s", err.msg);
    cr_expect_eq(r->n_vocab, (uint32_t)nv);
    cr_expect_eq(r->n_tokens, (uint32_t)n);
    cr_expect_eq(r->dtype, dtype);
    float *row = malloc((size_t)nv * sizeof *row);
    for (int i = 0; i < n; i++) {
        cr_expect_eq(r->tokens[i], tok[i]);
        cr_assert_eq(qk_logits_next(r, row, &err), 0, "row %d: %s", i, err.msg);
        for (int k = 0; k < nv; k++) {
            float want = rows[(size_t)i * nv + k];
            if (dtype == QK_F16)
                want = qk_f16_to_f32(qk_f32_to_f16(want));
            cr_assert(memcmp(&row[k], &want, 4) == 0, "row %d col %d: %g, want %g", i, k, row[k],
                      want);
        }
    }
    cr_expect_eq(qk_logits_next(r, row, &err), QK_EINPUT, "read past the last row");
    qk_logits_close(r);
    free(row), free(rows);
    remove_tmpdir();
}

Test(logits_file, f32_round_trip_is_exact) { check_round_trip(QK_F32); }
Test(logits_file, f16_round_trip_is_f16_rounding) { check_round_trip(QK_F16); }

/* Read every row of path; the first error code (0: none) and message. */
static int read_all(const char *path, qk_err *err)
{
    qk_logits_reader *r;
    int rc = qk_logits_open(&r, path, err);
    if (rc)
        return rc;
    float *row = malloc((size_t)r->n_vocab * sizeof *row);
    for (uint32_t i = 0; !rc && i < r->n_tokens; i++)
        rc = qk_logits_next(r, row, err);
    free(row);
    qk_logits_close(r);
    return rc;
}

static void write_bytes(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

Test(logits_file, damaged_files_are_input_errors)
{
    make_tmpdir();
    const int n = 5, nv = 300;
    float *rows = random_rows(n, nv);
    int32_t tok[5] = {1, 2, 3, 4, 5};
    char good[128], bad[128];
    snprintf(good, sizeof good, "%s/good.logits", tmpdir);
    snprintf(bad, sizeof bad, "%s/bad.logits", tmpdir);
    write_rows(good, QK_F32, rows, tok, n, nv);
    size_t size;
    uint8_t *orig = tu_read(good, &size), *b = malloc(size);
    qk_err err = {0};
    cr_expect_eq(read_all(good, &err), 0, "%s", err.msg);

    struct { size_t at; int len; uint32_t v; const char *field; } edits[] = {
        {0, 1, 'X', "magic"}, {8, 4, 2, "version"}, {12, 4, 8, "dtype"},
        {16, 4, 0, "n_vocab"}, {20, 4, 6, "data_size"}, {24, 4, 7, "data_size"},
        {16, 4, 301, "data"},   /* rows no longer fit the frame */
        {44, 1, 0x5a, "data"},  /* a byte inside the frame */
    };
    for (size_t e = 0; e < sizeof edits / sizeof edits[0]; e++) {
        memcpy(b, orig, size);
        if (edits[e].len == 1)
            b[edits[e].at] ^= (uint8_t)edits[e].v;
        else
            put32(b + edits[e].at, edits[e].v);
        write_bytes(bad, b, size);
        memset(&err, 0, sizeof err);
        cr_expect_eq(read_all(bad, &err), QK_EINPUT, "edit %zu accepted", e);
        cr_expect(strstr(err.msg, edits[e].field), "edit %zu: '%s' does not name %s", e, err.msg,
                  edits[e].field);
    }
    /* truncated anywhere */
    for (size_t cut = 0; cut < size; cut += size / 7 + 1) {
        write_bytes(bad, orig, cut);
        memset(&err, 0, sizeof err);
        cr_expect_eq(read_all(bad, &err), QK_EINPUT, "cut at %zu accepted", cut);
    }
    /* fewer rows declared than the frame holds */
    memcpy(b, orig, size);
    put32(b + 20, 4);
    write_bytes(bad, b, size - 4); /* one token id fewer, so the sizes agree */
    memset(&err, 0, sizeof err);
    cr_expect_eq(read_all(bad, &err), QK_EINPUT, "extra row accepted");
    cr_expect(strstr(err.msg, "more rows"), "%s", err.msg);
    memset(&err, 0, sizeof err);
    cr_expect_eq(read_all("/nonexistent/x.logits", &err), QK_EIO);
    free(orig), free(b), free(rows);
    remove_tmpdir();
}

Test(logits_file, unfinished_files_leave_nothing)
{
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/x.logits", tmpdir);
    qk_err err = {0};
    qk_logits_writer *w;
    float row[16] = {0};
    cr_assert_eq(qk_logits_create(&w, path, 16, QK_F32, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_logits_append(w, 1, row, &err), 0, "%s", err.msg);
    qk_logits_discard(w);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", tmpdir);
    cr_expect_eq(system(cmd), 0, "the discarded output left files behind");
    cr_expect_eq(qk_logits_create(&w, path, 16, QK_Q4_0, &err), QK_EINPUT);
    cr_expect_eq(qk_logits_create(&w, "/nonexistent/dir/x.logits", 16, QK_F32, &err), QK_EIO);
    remove_tmpdir();
}

/* ---- qk-run --logits-out ------------------------------------------------------------ */

static const char *qk_bin(void)
{
    const char *b = getenv("QK_BIN");
    return b && *b ? b : "build/qk";
}

/* The first 40 eval tokens through the binary; rows must be the engine's
 * logits for those tokens (F16 cache, the default), with 1 or 2 threads. */
Test(run_cli, logits_out_rows_are_the_engine_logits)
{
    make_tmpdir();
    const int n = 40;
    int32_t *tok = eval_tokens(n);
    char ids[128], out1[128], out2[128], cmd[1024];
    snprintf(ids, sizeof ids, "%s/ids.txt", tmpdir);
    FILE *f = fopen(ids, "w");
    for (int i = 0; i < n; i++)
        fprintf(f, "%d%s", tok[i], i + 1 < n ? ", " : "\n");
    fclose(f);
    for (int t = 1; t <= 2; t++) {
        snprintf(t == 1 ? out1 : out2, sizeof out1, "%s/l%d.logits", tmpdir, t);
        snprintf(cmd, sizeof cmd, "'%s' run -m " GGUF " --tokens-in '%s' -n 0 -q -t %d "
                 "--logits-out '%s' >/dev/null", qk_bin(), ids, t, t == 1 ? out1 : out2);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
    }
    size_t s1, s2;
    uint8_t *b1 = tu_read(out1, &s1), *b2 = tu_read(out2, &s2);
    cr_expect(s1 == s2 && memcmp(b1, b2, s1) == 0, "-t 1 and -t 2 wrote different bytes");
    free(b1), free(b2);

    gguf_model gm;
    gguf_load(&gm);
    const int nv = gm.m.hp.n_vocab;
    float *want = logits_of(&gm.m, tok, n, QK_F16, 1);
    qk_err err = {0};
    qk_logits_reader *r;
    cr_assert_eq(qk_logits_open(&r, out1, &err), 0, "%s", err.msg);
    cr_assert_eq(r->n_tokens, (uint32_t)n);
    cr_assert_eq(r->n_vocab, (uint32_t)nv);
    float *row = malloc((size_t)nv * sizeof *row);
    for (int i = 0; i < n; i++) {
        cr_expect_eq(r->tokens[i], tok[i]);
        cr_assert_eq(qk_logits_next(r, row, &err), 0, "%s", err.msg);
        cr_expect(memcmp(row, want + (size_t)i * nv, (size_t)nv * sizeof *row) == 0,
                  "row %d differs from the engine's logits", i);
    }
    qk_logits_close(r);
    free(row), free(want), free(tok);
    gguf_unload(&gm);
    remove_tmpdir();
}
