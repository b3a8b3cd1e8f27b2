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
#include "lib/engine/modelfile.h"
#include "formats/ftype.h"
#include "formats/gguf.h"
#include "lib/core/progress.h"
#include "kernels/types.h"

enum {
    C_MODEL, C_SIZE, C_PARAMS, C_BPW, C_BACKEND, C_THREADS, C_TEST, C_TS, C_ROOF,
    C_FILE, C_BYTES, C_NPARAMS, C_NPROMPT, C_NGEN, C_NDEPTH, C_NBATCH, C_KV, C_ACT, C_BPT, C_BW, C_NCOLS
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
    {"n_depth", "n_depth", NULL, true},
    {"n_batch", "n_batch", NULL, true},
    {"kv_cache", "kv cache", NULL, true},
    {"act_type", "activations", NULL, true},
    {"bytes_per_token", "bytes/token", NULL, true},
    {"read_gbps", "read GB/s", NULL, true},
};

/* ---- what a model is and reads ---------------------------------------------------- */

static double weight_bytes(const qk_weight *w)
{
    return w->wq ? (double)w->wq->bytes : (double)w->rows * (double)w->row_size;
}

void qk_model_decode_bytes(const qk_model *m, int kv_type, int64_t n_past, double *weights,
                           double *kv)
{
    const qk_hparams *hp = &m->hp;
    const double e = hp->n_embd, f = sizeof(float);
    double w = weight_bytes(&m->tok_embd) / (double)m->tok_embd.rows; /* one embedding row */
    w += weight_bytes(&m->output) + e * f;            /* lm head, output norm */
    if (m->output_bias)
        w += (double)hp->n_vocab * f;
    for (int il = 0; il < hp->n_layer; il++) {
        const qk_layer *l = &m->layers[il];
        const qk_weight *mats[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down,
                                   &l->gate_inp, &l->gate_inp_shexp, &l->gate_shexp, &l->up_shexp,
                                   &l->down_shexp};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            w += mats[i]->data || mats[i]->wq ? weight_bytes(mats[i]) : 0.0; /* parted: no data */
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
    const char *name = g && qk_gguf_get_uint(g, "general.file_type", &ft) ? qk_ftype_name((long)ft) : NULL;
    if (name) {
        const char *u = strchr(name, '_'); /* drop "MOSTLY_" / "ALL_" */
        snprintf(type, sizeof type, "%s", u ? u + 1 : name);
    } else if (m->hp.n_layer > 0) {
        /* the first layer's query weight: its type, or a parted layout with its bits and activations */
        const qk_weight *w = &m->layers[0].wq;
        const qk_type_traits *t = qk_type_get(w->type);
        if (w->wq)
            snprintf(type, sizeof type, "%s%.0d/%s", t->name, w->wq->type == QK_W_PACK || w->wq->type == QK_W_MLX ||
                     w->wq->type == QK_W_GPTQ || w->wq->type == QK_W_AWQ ? w->wq->bits : 0,
                     w->wq->act == QK_F32 ? "a16" : qk_type_get(w->wq->act)->name);
        else
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

/* The cache before a timed test: empty (depth 0), or back to the depth
 * tokens evaluated once by fill_depth. */
static int rewind_to(qk_ctx *c, int depth, qk_err *err)
{
    if (depth)
        return qk_ctx_rewind(c, depth, err);
    qk_ctx_reset(c);
    return 0;
}

/* One prompt of n tokens after the depth tokens in the cache (llama-bench
 * test_prompt); the first token is BOS when the cache is empty. */
static int time_pp(runner *u, qk_ctx *c, int depth, int32_t *toks, int n, double *sec, qk_err *err)
{
    for (int i = 0; i < n; i++)
        toks[i] = i == 0 && depth == 0 && u->bos >= 0 ? u->bos : rand_token(u);
    int rc = rewind_to(c, depth, err);
    if (rc)
        return rc;
    const double t0 = qk_bench_now();
    rc = qk_forward(c, toks, n, u->logits, false, err);
    *sec = qk_bench_now() - t0;
    return rc;
}

/* n single-token steps after the depth tokens (llama-bench test_gen). */
static int time_tg(runner *u, qk_ctx *c, int depth, int n, double *sec, qk_err *err)
{
    int rc = rewind_to(c, depth, err);
    if (rc)
        return rc;
    int32_t tok = depth == 0 && u->bos >= 0 ? u->bos : rand_token(u);
    const double t0 = qk_bench_now();
    for (int i = 0; i < n; i++) {
        if ((rc = qk_forward(c, &tok, 1, u->logits, false, err)))
            return rc;
        tok = rand_token(u);
    }
    *sec = qk_bench_now() - t0;
    return 0;
}

/* depth tokens (BOS first) into an empty cache, untimed. */
static int fill_depth(runner *u, qk_ctx *c, int32_t *toks, int depth, qk_err *err)
{
    for (int i = 0; i < depth; i++)
        toks[i] = i == 0 && u->bos >= 0 ? u->bos : rand_token(u);
    qk_ctx_reset(c);
    return qk_forward(c, toks, depth, NULL, false, err);
}

typedef struct {
    const qk_model_bench_opts *o;
    qk_report *r;
    qk_progress *pr;
    qk_bw_burst *burst[QK_BENCH_LIST_MAX]; /* per entry of o->threads, made on first use */
    /* the model in hand */
    const char *path, *desc;
    uint64_t bytes, params;
    const qk_model *m;
    runner u;
    int32_t *toks;
} bench;

/* One read burst at threads[ti] (its buffer made on first use). */
static int burst(bench *b, int ti, double *bw, qk_err *err)
{
    if (!b->burst[ti]) {
        int rc = qk_bw_burst_new(&b->burst[ti], b->o->threads[ti], b->o->bw_bytes, err);
        if (rc)
            return rc;
    }
    return qk_bw_burst_run(b->burst[ti], bw, err);
}

/* One row: ppP (gen = false) or tgN (gen = true) after depth cached tokens,
 * at threads[ti]. */
static int run_test(bench *b, bool gen, int n, int depth, int ti, qk_err *err)
{
    const qk_model_bench_opts *o = b->o;
    const int nt = o->threads[ti];
    const bool bursts = gen && o->bandwidth == 0;
    qk_ctx *c;
    qk_ctx_params cp = {.n_ctx = depth + n, .n_batch = o->n_batch, .nthreads = nt, .kv_type = o->kv_type,
                        .act_type = o->act_type};
    int rc = qk_ctx_new(&c, b->m, &cp, err);
    if (rc)
        return rc;
    double sec, ts[QK_STATS_MAX], bw[QK_STATS_MAX + 1];
    if (o->warmup) { /* as llama-bench: from an empty cache */
        rc = gen ? time_tg(&b->u, c, 0, 1, &sec, err) : time_pp(&b->u, c, 0, b->toks, n, &sec, err);
        qk_progress_add(b->pr, 1);
    }
    if (!rc && depth)
        rc = fill_depth(&b->u, c, b->toks, depth, err);
    for (int i = 0; !rc && i < o->reps; i++) {
        if (bursts && (rc = burst(b, ti, &bw[i], err)))
            break;
        rc = gen ? time_tg(&b->u, c, depth, n, &sec, err) : time_pp(&b->u, c, depth, b->toks, n, &sec, err);
        ts[i] = sec > 0 ? n / sec : 0;
        qk_progress_add(b->pr, 1);
    }
    if (!rc && bursts)
        rc = burst(b, ti, &bw[o->reps], err);
    qk_ctx_free(c);
    if (rc)
        return rc;

    qk_report *r = b->r;
    char test[48], backend[32];
    int len = snprintf(test, sizeof test, "%s%d", gen ? "tg" : "pp", n);
    if (depth)
        snprintf(test + len, sizeof test - (size_t)len, " @ d%d", depth);
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
    qk_report_int(r, C_NDEPTH, depth);
    qk_report_int(r, C_NBATCH, o->n_batch ? o->n_batch : 512);
    qk_report_str(r, C_KV, o->kv_type == QK_F16 ? "f16" : "f32");
    qk_report_str(r, C_ACT, qk_act_type_name(o->act_type));
    if (!gen || o->bandwidth < 0)
        return 0;
    /* token i (0-based) attends to depth + i + 1 positions: on average depth + (n + 1) / 2 */
    double wb, kvb;
    qk_model_decode_bytes(b->m, o->kv_type, 0, &wb, &kvb);
    const double per_token = wb + kvb * (depth + (n + 1) / 2.0);
    const double bwm = o->bandwidth > 0 ? o->bandwidth : qk_stats_of(bw, o->reps + 1).median;
    const qk_stats st = qk_stats_of(ts, o->reps);
    const double pct = 100.0 * per_token * st.mean / bwm;
    qk_report_num(r, C_ROOF, pct);
    qk_report_num(r, C_BPT, per_token);
    qk_report_num(r, C_BW, bwm / 1e9);
    qk_report_note(r, "%s %s, %d thread%s: decode at %.0f %% of the bandwidth roofline "
                      "(%.2f MB/token x %.2f t/s / %.2f GB/s%s)",
                   b->desc, test, nt, nt == 1 ? "" : "s", pct, per_token / 1e6, st.mean, bwm / 1e9,
                   o->bandwidth > 0 ? ", given" : ", median of the read bursts between the repetitions");
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
    qk_model_file mf;
    int rc = qk_model_file_open(&mf, path, true, err);
    if (rc)
        return rc;
    const qk_gguf *g = mf.g;
    const qk_model m = *mf.m;
    const uint64_t bytes = mf.bytes, params = mf.params;
    char desc[96];
    describe(g, &m, params, desc, sizeof desc);
    uint64_t v;
    bool add_bos = true;
    b->u = (runner){.m = &m, .bos = -1, .rng = o->seed};
    if (g) {
        qk_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos);
        if (add_bos && qk_gguf_get_uint(g, "tokenizer.ggml.bos_token_id", &v) && v < (uint64_t)m.hp.n_vocab)
            b->u.bos = (int32_t)v;
    } else {
        const int64_t bos = qk_jsonv_get_i64(mf.hf->hf->config, "bos_token_id", -1);
        b->u.bos = bos >= 0 && bos < m.hp.n_vocab ? (int32_t)bos : -1;
    }
    b->path = path;
    b->desc = desc;
    b->bytes = bytes;
    b->params = params;
    b->m = &m;
    const int max_p = max_of(o->prompts, o->n_prompts), max_d = max_of(o->depths, o->n_depths);
    b->toks = malloc((size_t)(max_p > max_d ? max_p : max_d > 0 ? max_d : 1) * sizeof *b->toks);
    b->u.logits = malloc((size_t)m.hp.n_vocab * sizeof(float));
    if (!b->toks || !b->u.logits)
        rc = qk_errf(err, QK_EIO, "out of memory");
    /* llama-bench's order: prompts, then generations, each over the depths */
    const int zero = 0, nd = o->n_depths ? o->n_depths : 1;
    const int *depths = o->n_depths ? o->depths : &zero;
    for (int i = 0; !rc && i < o->n_prompts; i++)
        for (int di = 0; !rc && di < nd; di++)
            for (int ti = 0; !rc && o->prompts[i] > 0 && ti < o->n_threads; ti++)
                rc = run_test(b, false, o->prompts[i], depths[di], ti, err);
    for (int i = 0; !rc && i < o->n_gens; i++)
        for (int di = 0; !rc && di < nd; di++)
            for (int ti = 0; !rc && o->gens[i] > 0 && ti < o->n_threads; ti++)
                rc = run_test(b, true, o->gens[i], depths[di], ti, err);
    free(b->toks);
    free(b->u.logits);
    b->toks = NULL;
    b->m = NULL;
    qk_model_file_close(&mf);
    return rc;
}

int qk_bench_model(const qk_model_bench_opts *o, qk_report *r, qk_err *err)
{
    qk_report_init(r, "model", model_cols, C_NCOLS);
    if (o->reps < 1 || o->reps > QK_STATS_MAX || o->n_threads < 1 || o->n_threads > QK_BENCH_LIST_MAX ||
        o->n_prompts > QK_BENCH_LIST_MAX || o->n_gens > QK_BENCH_LIST_MAX || o->n_depths > QK_BENCH_LIST_MAX)
        return qk_errf(err, QK_EINPUT, "repetitions must be in [1, %d], 1..%d thread counts",
                       QK_STATS_MAX, QK_BENCH_LIST_MAX);
    for (int i = 0; i < o->n_depths; i++)
        if (o->depths[i] < 0)
            return qk_errf(err, QK_EINPUT, "-d %d: a depth is a count of tokens", o->depths[i]);
    int tests = 0;
    for (int i = 0; i < o->n_prompts; i++)
        tests += o->prompts[i] > 0;
    for (int i = 0; i < o->n_gens; i++)
        tests += o->gens[i] > 0;
    qk_progress pr;
    qk_progress_init(&pr, "bench",
                     (uint64_t)o->n_models * (uint64_t)tests * (uint64_t)(o->n_depths ? o->n_depths : 1) *
                         (uint64_t)o->n_threads * (uint64_t)(o->reps + o->warmup),
                     o->quiet);
    bench b = {.o = o, .r = r, .pr = &pr};
    int rc = 0;
    for (int i = 0; !rc && i < o->n_models; i++)
        rc = bench_one(&b, o->models[i], err);
    qk_progress_end(&pr);
    for (int ti = 0; ti < o->n_threads; ti++)
        qk_bw_burst_free(b.burst[ti]);
    if (rc)
        return rc;
    char cpu[256];
    qk_bench_cpu_name(cpu, sizeof cpu);
    qk_report_meta_str(r, "cpu", cpu);
    qk_report_meta_str(r, "simd", qk_cpu_level_name(qk_cpu_level_active()));
    qk_report_meta_str(r, "amx", qk_cpu_has_amx() && qk_cpu_level_active() == QK_CPU_AVX512 ? "yes" : "no");
    qk_report_meta_int(r, "repetitions", o->reps);
    qk_report_meta_str(r, "warmup", o->warmup ? "yes" : "no");
    qk_report_meta_int(r, "n_batch", o->n_batch ? o->n_batch : 512);
    qk_report_meta_str(r, "kv_cache", o->kv_type == QK_F16 ? "f16" : "f32");
    qk_report_meta_str(r, "act_type", qk_act_type_name(o->act_type));
    if (o->bandwidth > 0)
        qk_report_meta_num(r, "read_gbps_given", o->bandwidth / 1e9, "%.2f");
    else if (o->bandwidth == 0)
        qk_report_meta_int(r, "read_burst_bytes", (int64_t)o->bw_bytes);
    return 0;
}
