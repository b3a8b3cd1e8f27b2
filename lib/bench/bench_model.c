/* bench_model.c - qk-bench model (see bench_model.h; llama-bench's test_prompt
 * and test_gen in tools/llama-bench/llama-bench.cpp are the reference for
 * what is timed). */
#include "lib/bench/bench_model.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bench/bench_roofline.h"
#include "lib/bench/bench_stats.h"
#include "kernels/cpu.h"
#include "lib/engine/forward.h"
#include "formats/ftype.h"
#include "formats/gguf.h"
#include "lib/core/progress.h"
#include "kernels/types.h"

enum {
    C_MODEL, C_SIZE, C_PARAMS, C_BPW, C_BACKEND, C_THREADS, C_TEST, C_TS, C_ROOF,
    C_FILE, C_BYTES, C_NPARAMS, C_NPROMPT, C_NGEN, C_NBATCH, C_KV, C_ACT, C_BPT, C_BW, C_NCOLS
};
static const qk_col model_cols[C_NCOLS] = {
    {"model", "model", NULL, false},
    {"size_mib", "size", "%.2f MiB", false},
    {"params_m", "params", "%.2f M", false},
    {"bpw", "bpw", "%.2f", false},
    {"backend", "backend", NULL, false},
    {"threads", "threads", NULL, false},
    {"test", "test", NULL, false},
    {"tokens_per_s", "t/s", "%.2f", false},
    {"roofline_pct", "roofline", "%.0f %%", false},
    {"file", "file", NULL, true},
    {"model_bytes", "bytes", NULL, true},
    {"model_params", "parameters", NULL, true},
    {"n_prompt", "n_prompt", NULL, true},
    {"n_gen", "n_gen", NULL, true},
    {"n_batch", "n_batch", NULL, true},
    {"kv_cache", "kv cache", NULL, true},
    {"act_type", "activations", NULL, true},
    {"bytes_per_token", "bytes/token", NULL, true},
    {"read_gbps", "read GB/s", NULL, true},
};

/* ---- what a model is and reads ---------------------------------------------------- */

static double weight_bytes(const qk_weight *w) { return (double)w->rows * (double)w->row_size; }

void qk_model_decode_bytes(const qk_model *m, int kv_type, int64_t n_past, double *weights,
                           double *kv)
{
    const qk_hparams *hp = &m->hp;
    const double e = hp->n_embd, f = sizeof(float);
    double w = (double)m->tok_embd.row_size;          /* one embedding row */
    w += weight_bytes(&m->output) + e * f;            /* lm head, output norm */
    if (m->output_bias)
        w += (double)hp->n_vocab * f;
    for (int il = 0; il < hp->n_layer; il++) {
        const qk_layer *l = &m->layers[il];
        const qk_weight *mats[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down,
                                   &l->gate_inp, &l->gate_inp_shexp, &l->gate_shexp, &l->up_shexp,
                                   &l->down_shexp};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            w += mats[i]->data ? weight_bytes(mats[i]) : 0.0;
        /* a token reads the n_expert_used experts it is routed to (all experts
         * of a layer have the same size and type) */
        if (l->moe)
            w += hp->n_expert_used * (weight_bytes(&l->exps.gate[0]) + weight_bytes(&l->exps.up[0]) +
                                      weight_bytes(&l->exps.down[0]));
        w += 2 * e * f;                               /* attention and FFN norms */
        const double q = (double)hp->n_head * hp->head_dim, kvd = (double)hp->n_head_kv * hp->head_dim;
        if (l->bq)
            w += (q + 2 * kvd) * f;
        if (l->bo)
            w += e * f;
        if (l->q_norm)
            w += 2.0 * hp->head_dim * f;
    }
    const double elt = kv_type == QK_F16 ? 2 : 4;
    const double row = (double)hp->n_head_kv * (hp->head_dim + hp->head_dim_v) * elt;
    *weights = w;
    *kv = (double)hp->n_layer * (double)(n_past + 1) * row;
}

/* "llama 15M F32": architecture, parameter count, file type (llama_model_desc's look). */
static void describe(const qk_gguf *g, const qk_model *m, uint64_t params, char *buf, size_t n)
{
    char size[32], type[32] = "?";
    if (params < 1000000)
        snprintf(size, sizeof size, "%.0fK", params / 1e3);
    else if (params < 10000000)
        snprintf(size, sizeof size, "%.1fM", params / 1e6);
    else if (params < 1000000000)
        snprintf(size, sizeof size, "%.0fM", params / 1e6);
    else
        snprintf(size, sizeof size, "%.1fB", params / 1e9);
    uint64_t ft;
    const char *name = qk_gguf_get_uint(g, "general.file_type", &ft) ? qk_ftype_name((long)ft) : NULL;
    if (name) {
        const char *u = strchr(name, '_'); /* drop "MOSTLY_" / "ALL_" */
        snprintf(type, sizeof type, "%s", u ? u + 1 : name);
    } else if (m->hp.n_layer > 0) {
        const qk_type_traits *t = qk_type_get(m->layers[0].wq.type);
        snprintf(type, sizeof type, "%s", t ? t->name : "?");
        for (char *p = type; *p; p++)
            *p = (char)toupper((unsigned char)*p);
    }
    snprintf(buf, n, "%s %s %s", m->hp.arch_name, size, type);
}

/* ---- timing ------------------------------------------------------------------------ */

static uint64_t next_rand(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    const qk_model *m;
    int32_t bos;      /* -1: none */
    uint64_t rng;
    float *logits;    /* one row */
} runner;

static int32_t rand_token(runner *u) { return (int32_t)(next_rand(&u->rng) % (uint64_t)u->m->hp.n_vocab); }

/* One prompt of n tokens from an empty cache (llama-bench test_prompt). */
static int time_pp(runner *u, qk_ctx *c, int32_t *toks, int n, double *sec, qk_err *err)
{
    for (int i = 0; i < n; i++)
        toks[i] = i == 0 && u->bos >= 0 ? u->bos : rand_token(u);
    qk_ctx_reset(c);
    const double t0 = qk_bench_now();
    int rc = qk_forward(c, toks, n, u->logits, false, err);
    *sec = qk_bench_now() - t0;
    return rc;
}

/* n single-token steps from an empty cache (llama-bench test_gen). */
static int time_tg(runner *u, qk_ctx *c, int n, double *sec, qk_err *err)
{
    qk_ctx_reset(c);
    int32_t tok = u->bos >= 0 ? u->bos : rand_token(u);
    const double t0 = qk_bench_now();
    for (int i = 0; i < n; i++) {
        int rc = qk_forward(c, &tok, 1, u->logits, false, err);
        if (rc)
            return rc;
        tok = rand_token(u);
    }
    *sec = qk_bench_now() - t0;
    return 0;
}

typedef struct {
    const qk_model_bench_opts *o;
    qk_report *r;
    qk_progress *pr;
    double bw[QK_BENCH_LIST_MAX]; /* per entry of o->threads: bytes/s, 0 unknown */
    /* the model in hand */
    const char *path, *desc;
    uint64_t bytes, params;
    const qk_model *m;
    runner u;
    int32_t *toks;
} bench;

static int bandwidth(bench *b, int ti, double *out, qk_err *err)
{
    const qk_model_bench_opts *o = b->o;
    if (o->bandwidth != 0) {
        *out = o->bandwidth;
        return 0;
    }
    if (b->bw[ti] == 0) {
        int rc = qk_roofline_bandwidth(o->threads[ti], o->bw_bytes, o->bw_passes, &b->bw[ti], err);
        if (rc)
            return rc;
    }
    *out = b->bw[ti];
    return 0;
}

/* One row: ppP (gen = false) or tgN (gen = true) at threads[ti]. */
static int run_test(bench *b, bool gen, int n, int ti, qk_err *err)
{
    const qk_model_bench_opts *o = b->o;
    const int nt = o->threads[ti];
    qk_ctx *c;
    qk_ctx_params cp = {.n_ctx = n, .n_batch = o->n_batch, .nthreads = nt, .kv_type = o->kv_type,
                        .act_type = o->act_type};
    int rc = qk_ctx_new(&c, b->m, &cp, err);
    if (rc)
        return rc;
    double sec, ts[QK_STATS_MAX];
    if (o->warmup) {
        rc = gen ? time_tg(&b->u, c, 1, &sec, err) : time_pp(&b->u, c, b->toks, n, &sec, err);
        qk_progress_add(b->pr, 1);
    }
    for (int i = 0; !rc && i < o->reps; i++) {
        rc = gen ? time_tg(&b->u, c, n, &sec, err) : time_pp(&b->u, c, b->toks, n, &sec, err);
        ts[i] = sec > 0 ? n / sec : 0;
        qk_progress_add(b->pr, 1);
    }
    qk_ctx_free(c);
    if (rc)
        return rc;

    qk_report *r = b->r;
    char test[32], backend[32];
    snprintf(test, sizeof test, "%s%d", gen ? "tg" : "pp", n);
    snprintf(backend, sizeof backend, "CPU %s", qk_cpu_level_name(qk_cpu_level_active()));
    qk_report_row(r);
    qk_report_str(r, C_MODEL, b->desc);
    qk_report_num(r, C_SIZE, (double)b->bytes / (1024.0 * 1024.0));
    qk_report_num(r, C_PARAMS, (double)b->params / 1e6);
    qk_report_num(r, C_BPW, b->params ? (double)b->bytes * 8 / (double)b->params : 0);
    qk_report_str(r, C_BACKEND, backend);
    qk_report_int(r, C_THREADS, nt);
    qk_report_str(r, C_TEST, test);
    qk_report_stats(r, C_TS, ts, o->reps);
    qk_report_str(r, C_FILE, b->path);
    qk_report_int(r, C_BYTES, (int64_t)b->bytes);
    qk_report_int(r, C_NPARAMS, (int64_t)b->params);
    qk_report_int(r, C_NPROMPT, gen ? 0 : n);
    qk_report_int(r, C_NGEN, gen ? n : 0);
    qk_report_int(r, C_NBATCH, o->n_batch ? o->n_batch : 512);
    qk_report_str(r, C_KV, o->kv_type == QK_F16 ? "f16" : "f32");
    qk_report_str(r, C_ACT, qk_act_type_name(o->act_type));
    if (!gen || o->bandwidth < 0)
        return 0;
    /* tokens attend to 1..n positions: on average (n + 1) / 2, i.e. n_past (n - 1) / 2 */
    double wb, kvb, bw;
    qk_model_decode_bytes(b->m, o->kv_type, 0, &wb, &kvb);
    const double per_token = wb + kvb * (n + 1) / 2.0;
    if ((rc = bandwidth(b, ti, &bw, err)))
        return rc;
    const qk_stats st = qk_stats_of(ts, o->reps);
    const double pct = 100.0 * per_token * st.mean / bw;
    qk_report_num(r, C_ROOF, pct);
    qk_report_num(r, C_BPT, per_token);
    qk_report_num(r, C_BW, bw / 1e9);
    qk_report_note(r, "%s %s, %d thread%s: decode at %.0f %% of the bandwidth roofline "
                      "(%.2f MB/token x %.2f t/s / %.2f GB/s)",
                   b->desc, test, nt, nt == 1 ? "" : "s", pct, per_token / 1e6, st.mean, bw / 1e9);
    const size_t llc = qk_bench_llc_bytes();
    if (per_token < 2.0 * (double)llc)
        qk_report_note(r, "  (%.2f MB/token is less than twice the %zu MiB last-level cache: the "
                          "weights are partly read from cache, and the share can pass 100 %%)",
                       per_token / 1e6, llc >> 20);
    return 0;
}

static int max_of(const int *v, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static int bench_one(bench *b, const char *path, qk_err *err)
{
    const qk_model_bench_opts *o = b->o;
    qk_gguf *g = NULL;
    qk_model m = {0};
    int rc = qk_gguf_open(&g, path, 0, err);
    if (rc)
        return rc;
    if ((rc = qk_model_load(&m, g, err))) {
        qk_gguf_close(g);
        return rc;
    }
    uint64_t bytes = 0, params = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const qk_gguf_tensor *t = &g->tensors[i];
        bytes += t->nbytes;
        params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    char desc[96];
    describe(g, &m, params, desc, sizeof desc);
    uint64_t v;
    bool add_bos = true;
    qk_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos);
    b->u = (runner){.m = &m, .bos = -1, .rng = o->seed};
    if (add_bos && qk_gguf_get_uint(g, "tokenizer.ggml.bos_token_id", &v) && v < (uint64_t)m.hp.n_vocab)
        b->u.bos = (int32_t)v;
    b->path = path;
    b->desc = desc;
    b->bytes = bytes;
    b->params = params;
    b->m = &m;
    const int max_p = max_of(o->prompts, o->n_prompts);
    b->toks = malloc((size_t)(max_p > 0 ? max_p : 1) * sizeof *b->toks);
    b->u.logits = malloc((size_t)m.hp.n_vocab * sizeof(float));
    if (!b->toks || !b->u.logits)
        rc = qk_errf(err, QK_EIO, "out of memory");
    for (int i = 0; !rc && i < o->n_prompts; i++)
        for (int ti = 0; !rc && o->prompts[i] > 0 && ti < o->n_threads; ti++)
            rc = run_test(b, false, o->prompts[i], ti, err);
    for (int i = 0; !rc && i < o->n_gens; i++)
        for (int ti = 0; !rc && o->gens[i] > 0 && ti < o->n_threads; ti++)
            rc = run_test(b, true, o->gens[i], ti, err);
    free(b->toks);
    free(b->u.logits);
    b->toks = NULL;
    b->m = NULL;
    qk_model_free(&m);
    qk_gguf_close(g);
    return rc;
}

int qk_bench_model(const qk_model_bench_opts *o, qk_report *r, qk_err *err)
{
    qk_report_init(r, "model", model_cols, C_NCOLS);
    if (o->reps < 1 || o->reps > QK_STATS_MAX || o->n_threads < 1 || o->n_threads > QK_BENCH_LIST_MAX ||
        o->n_prompts > QK_BENCH_LIST_MAX || o->n_gens > QK_BENCH_LIST_MAX)
        return qk_errf(err, QK_EINPUT, "repetitions must be in [1, %d], 1..%d thread counts",
                       QK_STATS_MAX, QK_BENCH_LIST_MAX);
    int tests = 0;
    for (int i = 0; i < o->n_prompts; i++)
        tests += o->prompts[i] > 0;
    for (int i = 0; i < o->n_gens; i++)
        tests += o->gens[i] > 0;
    qk_progress pr;
    qk_progress_init(&pr, "bench",
                     (uint64_t)o->n_models * (uint64_t)tests * (uint64_t)o->n_threads *
                         (uint64_t)(o->reps + o->warmup),
                     o->quiet);
    bench b = {.o = o, .r = r, .pr = &pr};
    int rc = 0;
    for (int i = 0; !rc && i < o->n_models; i++)
        rc = bench_one(&b, o->models[i], err);
    qk_progress_end(&pr);
    if (rc)
        return rc;
    char cpu[256];
    qk_bench_cpu_name(cpu, sizeof cpu);
    qk_report_meta_str(r, "cpu", cpu);
    qk_report_meta_str(r, "simd", qk_cpu_level_name(qk_cpu_level_active()));
    qk_report_meta_int(r, "repetitions", o->reps);
    qk_report_meta_str(r, "warmup", o->warmup ? "yes" : "no");
    qk_report_meta_int(r, "n_batch", o->n_batch ? o->n_batch : 512);
    qk_report_meta_str(r, "kv_cache", o->kv_type == QK_F16 ? "f16" : "f32");
    qk_report_meta_str(r, "act_type", qk_act_type_name(o->act_type));
    if (o->bandwidth > 0)
        qk_report_meta_num(r, "read_gbps_given", o->bandwidth / 1e9, "%.2f");
    for (int ti = 0; ti < o->n_threads; ti++)
        if (b.bw[ti] > 0) {
            char key[48];
            snprintf(key, sizeof key, "read_gbps_%dt", o->threads[ti]);
            qk_report_meta_num(r, key, b.bw[ti] / 1e9, "%.2f");
        }
    return 0;
}
