/* study_cmd.c - the numerics studies as command pieces (study_cmd.h). */
#include "lib/study/study_cmd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/cli.h"
#include "lib/core/files.h"
#include "formats/gguf.h"
#include "lib/study/study_error.h"
#include "lib/study/study_run.h"
#include "lib/engine/tokenizer.h"
#include "kernels/types.h"

/* ---- shared options of qk-run and qk-kld ---------------------------------------- */

static int pos_int(const char *opt, const char *arg, int *out, qk_err *err)
{
    int64_t v;
    if (qk_cli_int(opt, arg, 1, 1 << 20, &v, err))
        return -1;
    *out = (int)v;
    return 1;
}

int qk_study_opt(qk_study_opts *s, int c, const char *arg, qk_err *err)
{
    switch (c) {
    case QK_STUDY_O_WIRE:
        s->has_wire = true;
        return qk_wire_fmt_parse(arg, &s->wire.fmt, err) ? -1 : 1;
    case QK_STUDY_O_WIRE_EVERY: return pos_int("--wire-every", arg, &s->wire.every, err);
    case QK_STUDY_O_WIRE_AT: return qk_wire_parse_at(arg, &s->wire, err) ? -1 : 1;
    case QK_STUDY_O_STAGES: return pos_int("--stages", arg, &s->wire.stages, err);
    case QK_STUDY_O_WIRE_LOSSLESS: s->wire.lossless = true; return 1;
    case QK_STUDY_O_KV_CACHE: {
        const bool kpc = s->kvq.key_per_channel, rot = s->kvq.rotate;
        s->has_kvq = true;
        if (qk_kvq_parse(arg, &s->kvq, err))
            return -1;
        s->kvq.key_per_channel = kpc;
        s->kvq.rotate = rot;
        return 1;
    }
    case QK_STUDY_O_KV_KPC: s->kvq.key_per_channel = true; return 1;
    case QK_STUDY_O_KV_ROT: s->kvq.rotate = true; return 1;
    default: return 0;
    }
}

int qk_study_check(qk_study_opts *s, bool kv_type_given, int *kv_type, qk_err *err)
{
    const qk_wire_spec *w = &s->wire;
    if ((w->every || w->stages || w->n_at || w->lossless) && !s->has_wire)
        return qk_errf(err, QK_EINPUT,
                       "--wire-every, --wire-at, --stages and --wire-lossless need --wire");
    if (s->has_wire && !w->every && !w->stages && !w->n_at)
        return qk_errf(err, QK_EINPUT, "--wire needs --wire-every, --wire-at or --stages");
    if (s->kvq.key_per_channel && !s->has_kvq)
        return qk_errf(err, QK_EINPUT, "--kv-key-per-channel needs --kv-cache");
    if (s->kvq.rotate && !s->has_kvq)
        return qk_errf(err, QK_EINPUT, "--kv-rotate needs --kv-cache");
    if (s->has_kvq) {
        if (kv_type_given && *kv_type != QK_F32)
            return qk_errf(err, QK_EINPUT,
                           "--kv-cache simulates its type in the F32 cache: drop --kv-type f16");
        *kv_type = QK_F32;
    }
    return 0;
}

int qk_study_prepare(const qk_study_opts *s, const qk_hparams *hp, qk_wire *w, qk_err *err)
{
    memset(w, 0, sizeof *w);
    if (s->has_kvq) {
        int rc = qk_kvq_check(&s->kvq, hp->n_head_kv, hp->head_dim, hp->head_dim_v, err);
        if (rc)
            return rc;
    }
    return s->has_wire ? qk_wire_init(w, &s->wire, hp->n_layer, hp->n_embd, err) : 0;
}

void qk_study_kv_bytes(const qk_study_opts *s, const qk_hparams *hp, double *bytes, double *bf16)
{
    double kb = 0, vb = 0;
    qk_kvq_token_bytes(&s->kvq, hp->n_head_kv, hp->head_dim, hp->head_dim_v, &kb, &vb);
    *bytes = hp->n_layer * (kb + vb);
    *bf16 = 2.0 * hp->n_layer * hp->n_head_kv * (hp->head_dim + hp->head_dim_v);
}

/* "PROG: " or nothing, as two %s arguments. */
#define P(prog) (prog) ? (prog) : "", (prog) ? ": " : ""

void qk_study_print(FILE *f, const char *prog, const qk_study_opts *s, const qk_wire *w,
                    const qk_hparams *hp)
{
    if (s->has_wire) {
        const double bpe = qk_wire_bytes_per_elem(&w->st);
        fprintf(f, "%s%swire: %s at %d boundaries, %.4f bytes/element (%.2fx vs bf16)\n", P(prog),
                qk_wire_fmt_name(s->wire.fmt), w->n_boundaries, bpe, bpe > 0 ? 2.0 / bpe : 0.0);
        if (s->wire.lossless)
            fprintf(f,
                    "%s%swire: lossless bf16: zstd-1 %.3fx (shuffled %.3fx), zstd-3 %.3fx "
                    "(shuffled %.3fx)\n",
                    P(prog), qk_wire_lossless_ratio(&w->st, 0, false),
                    qk_wire_lossless_ratio(&w->st, 0, true),
                    qk_wire_lossless_ratio(&w->st, 1, false),
                    qk_wire_lossless_ratio(&w->st, 1, true));
    }
    if (s->has_kvq) {
        char name[64];
        double bytes, bf16;
        qk_kvq_name(&s->kvq, name, sizeof name);
        qk_study_kv_bytes(s, hp, &bytes, &bf16);
        fprintf(f, "%s%skv cache: %s, %.1f bytes/token (%.3f of bf16)\n", P(prog), name, bytes,
                bytes / bf16);
    }
}

void qk_study_json(qk_json *j, const qk_study_opts *s, const qk_wire *w, const qk_hparams *hp)
{
    if (s->has_wire) {
        const double bpe = qk_wire_bytes_per_elem(&w->st);
        qk_json_key(j, "wire");
        qk_json_obj(j);
        qk_json_key(j, "format"), qk_json_str(j, qk_wire_fmt_name(s->wire.fmt));
        qk_json_key(j, "boundaries"), qk_json_int(j, w->n_boundaries);
        qk_json_key(j, "bytes_per_elem"), qk_json_f64(j, bpe);
        qk_json_key(j, "ratio_vs_bf16"), qk_json_f64(j, bpe > 0 ? 2.0 / bpe : 0.0);
        if (s->wire.lossless) {
            qk_json_key(j, "lossless_bf16");
            qk_json_obj(j);
            qk_json_key(j, "zstd1"), qk_json_f64(j, qk_wire_lossless_ratio(&w->st, 0, false));
            qk_json_key(j, "zstd1_shuffled"), qk_json_f64(j, qk_wire_lossless_ratio(&w->st, 0, true));
            qk_json_key(j, "zstd3"), qk_json_f64(j, qk_wire_lossless_ratio(&w->st, 1, false));
            qk_json_key(j, "zstd3_shuffled"), qk_json_f64(j, qk_wire_lossless_ratio(&w->st, 1, true));
            qk_json_end_obj(j);
        }
        qk_json_end_obj(j);
    }
    if (s->has_kvq) {
        char name[64];
        double bytes, bf16;
        qk_kvq_name(&s->kvq, name, sizeof name);
        qk_study_kv_bytes(s, hp, &bytes, &bf16);
        qk_json_key(j, "kv_cache");
        qk_json_obj(j);
        qk_json_key(j, "type"), qk_json_str(j, name);
        qk_json_key(j, "bytes_per_token"), qk_json_f64(j, bytes);
        qk_json_key(j, "ratio_vs_bf16"), qk_json_f64(j, bytes / bf16);
        qk_json_end_obj(j);
    }
}

/* ---- sweeps ---------------------------------------------------------------------- */

typedef qk_sweep_opts opts;

/* o with its defaults filled in. */
static opts with_defaults(const opts *o)
{
    opts r = *o;
    if (!r.n_ctx)
        r.n_ctx = 256;
    if (!r.threads)
        r.threads = 1;
    if (!r.seed)
        r.seed = 1;
    return r;
}

/* ---- error ------------------------------------------------------------------- */

typedef struct {
    const qk_ecard *card;
    bool per_tensor;
} error_ud;

static void emit_error(FILE *f, const char *fmt, void *p)
{
    const error_ud *u = p;
    if (strcmp(fmt, "csv") == 0)
        qk_ecard_write_csv(u->card, f);
    else if (strcmp(fmt, "json") == 0)
        qk_ecard_write_json(u->card, f);
    else
        qk_ecard_write_md(u->card, f, u->per_tensor);
}

int qk_sweep_error(const qk_sweep_opts *o0, qk_sweep_sink sink, void *sink_ud, qk_err *err)
{
    const opts ov = with_defaults(o0), *o = &ov;
    if (!o->model == !o->synthetic)
        return qk_errf(err, QK_EINPUT, "give -m CHECKPOINT or --synthetic DIST");
    qk_ecard_fmt *fmts;
    int n_fmt, rc;
    if ((rc = qk_ecard_default_formats(&fmts, &n_fmt, err)))
        return rc;
    if (o->formats && (rc = qk_ecard_filter(fmts, &n_fmt, o->formats, err))) {
        free(fmts);
        return rc;
    }
    qk_ecard card;
    char source[512];
    qk_syn_spec syn = {.seed = o->seed};
    if (o->synthetic) {
        if (o->shape && sscanf(o->shape, "%lldx%lld", (long long *)&syn.rows,
                               (long long *)&syn.cols) != 2) {
            free(fmts);
            return qk_errf(err, QK_EINPUT, "--shape: want RxC");
        }
        if ((rc = qk_syn_parse(o->synthetic, &syn, err))) {
            free(fmts);
            return rc;
        }
        char name[64];
        qk_syn_name(&syn, name, sizeof name);
        snprintf(source, sizeof source, "synthetic %s %lldx%lld seed %llu", name,
                 (long long)syn.rows, (long long)syn.cols, (unsigned long long)syn.seed);
    } else {
        snprintf(source, sizeof source, "%s%s%s", o->model, o->tensors ? " --tensors " : "",
                 o->tensors ? o->tensors : "");
    }
    rc = qk_ecard_init(&card, source, fmts, n_fmt, err);
    free(fmts);
    if (rc)
        return rc;
    if (o->synthetic) {
        float *x = malloc((size_t)(syn.rows * syn.cols) * sizeof *x);
        if (!x) {
            qk_ecard_free(&card);
            return qk_errf(err, QK_EIO, "out of memory");
        }
        qk_syn_fill(&syn, x);
        char name[64];
        qk_syn_name(&syn, name, sizeof name);
        rc = qk_ecard_add(&card, name, x, syn.rows, syn.cols, o->threads, err);
        free(x);
    } else {
        rc = qk_ecard_add_checkpoint(&card, o->model, o->tensors, o->threads, err);
    }
    if (!rc) {
        qk_ecard_summarize(&card);
        error_ud ud = {&card, o->per_tensor};
        rc = sink(sink_ud, emit_error, &ud, err);
    }
    qk_ecard_free(&card);
    return rc;
}

/* ---- wire and kv: model, text, configurations ----------------------------------- */

typedef struct {
    qk_gguf *g;
    qk_model m;
    qk_tokenizer *tok;
    int32_t *ids;
    size_t n_ids;
} loaded;

static int load(const opts *o, loaded *l, qk_err *err)
{
    memset(l, 0, sizeof *l);
    if (!o->model || !o->text)
        return qk_errf(err, QK_EINPUT, "need -m MODEL.gguf and -f TEXT");
    int rc = qk_gguf_open(&l->g, o->model, 0, err);
    if (rc || (rc = qk_model_load(&l->m, l->g, err)))
        return rc;
    if (!(l->tok = qk_tok_from_gguf(l->g, err)))
        return err->code;
    char *buf;
    size_t n;
    if ((rc = qk_read_file(o->text, false, &buf, &n, err)))
        return rc;
    if (n && buf[n - 1] == '\n') /* llama-perplexity drops one trailing newline */
        n--;
    rc = qk_tok_encode(l->tok, buf, n, true, false, &l->ids, &l->n_ids, err);
    free(buf);
    if (!rc && o->chunks > 0 && l->n_ids > (size_t)o->chunks * (size_t)o->n_ctx)
        l->n_ids = (size_t)o->chunks * (size_t)o->n_ctx;
    return rc;
}

static void unload(loaded *l)
{
    free(l->ids);
    qk_tok_free(l->tok);
    if (l->g)
        qk_model_free(&l->m);
    qk_gguf_close(l->g);
}

static void fmt_pct(FILE *f, double v) { fprintf(f, "%.2f", 100.0 * v); }

/* One result row's KLD columns (md). */
static void md_kld(FILE *f, const qk_study_res *r)
{
    fprintf(f, "%.6f ± %.6f | %.6f | %.4f | ", r->kld_mean, r->kld_se, r->kld_p99, r->ppl);
    fprintf(f, "%+.3f | ", 100.0 * (r->ppl / r->ppl_base - 1.0));
    fmt_pct(f, r->same_top);
    fputs(" |\n", f);
}

static void json_kld(qk_json *j, const qk_study_res *r)
{
    qk_json_key(j, "tokens"), qk_json_uint(j, r->n);
    qk_json_key(j, "kld_mean"), qk_json_f64(j, r->kld_mean);
    qk_json_key(j, "kld_se"), qk_json_f64(j, r->kld_se);
    qk_json_key(j, "kld_p99"), qk_json_f64(j, r->kld_p99);
    qk_json_key(j, "kld_max"), qk_json_f64(j, r->kld_max);
    qk_json_key(j, "ppl"), qk_json_f64(j, r->ppl);
    qk_json_key(j, "ppl_base"), qk_json_f64(j, r->ppl_base);
    qk_json_key(j, "same_top"), qk_json_f64(j, r->same_top);
}

static void csv_kld(FILE *f, const qk_study_res *r)
{
    fprintf(f, "%llu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g", (unsigned long long)r->n, r->kld_mean,
            r->kld_se, r->kld_p99, r->kld_max, r->ppl, r->ppl_base, r->same_top);
}

#define KLD_CSV_COLS "tokens,kld_mean,kld_se,kld_p99,kld_max,ppl,ppl_base,same_top"

static int parse_list_int(const char *text, int *v, int max, int *n, qk_err *err)
{
    *n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > 4096 || *n == max || (*end && *end != ','))
            return qk_errf(err, QK_EINPUT, "bad list '%s'", text);
        v[(*n)++] = (int)x;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : qk_errf(err, QK_EINPUT, "empty list");
}

typedef struct {
    const opts *o;
    size_t n_ids;
    const qk_wire_spec *specs;
    const qk_kvq *kvqs;
    const qk_study_res *res;
    int n;
    double bf16;           /* kv: bytes per token of a bf16 cache */
    int n_layer;
} sweep_ud;

static void emit_wire(FILE *f, const char *fmt, void *p)
{
    const sweep_ud *u = p;
    const qk_study_res *res = u->res;
    if (strcmp(fmt, "csv") == 0) {
        fprintf(f, "format,boundaries,bytes_per_elem,ratio_vs_bf16," KLD_CSV_COLS
                   ",zstd1,zstd1_shuffled,zstd3,zstd3_shuffled\n");
        for (int k = 0; k < u->n; k++) {
            const double bpe = qk_wire_bytes_per_elem(&res[k].wire);
            fprintf(f, "%s,%d,%.6g,%.6g,", qk_wire_fmt_name(u->specs[k].fmt), res[k].n_boundaries,
                    bpe, 2.0 / bpe);
            csv_kld(f, &res[k]);
            if (u->specs[k].lossless)
                fprintf(f, ",%.6g,%.6g,%.6g,%.6g", qk_wire_lossless_ratio(&res[k].wire, 0, false),
                        qk_wire_lossless_ratio(&res[k].wire, 0, true),
                        qk_wire_lossless_ratio(&res[k].wire, 1, false),
                        qk_wire_lossless_ratio(&res[k].wire, 1, true));
            else
                fputs(",,,,", f);
            fputc('\n', f);
        }
    } else if (strcmp(fmt, "json") == 0) {
        qk_json j;
        qk_json_init(&j, f, true);
        qk_json_obj(&j);
        qk_json_key(&j, "model"), qk_json_str(&j, u->o->model);
        qk_json_key(&j, "text"), qk_json_str(&j, u->o->text);
        qk_json_key(&j, "tokens"), qk_json_uint(&j, u->n_ids);
        qk_json_key(&j, "n_ctx"), qk_json_int(&j, u->o->n_ctx);
        qk_json_key(&j, "configs");
        qk_json_arr(&j);
        for (int k = 0; k < u->n; k++) {
            qk_json_obj(&j);
            qk_json_key(&j, "format"), qk_json_str(&j, qk_wire_fmt_name(u->specs[k].fmt));
            qk_json_key(&j, "boundaries"), qk_json_int(&j, res[k].n_boundaries);
            qk_json_key(&j, "bytes_per_elem"), qk_json_f64(&j, qk_wire_bytes_per_elem(&res[k].wire));
            json_kld(&j, &res[k]);
            if (u->specs[k].lossless) {
                qk_json_key(&j, "lossless_bf16");
                qk_json_obj(&j);
                qk_json_key(&j, "zstd1"), qk_json_f64(&j, qk_wire_lossless_ratio(&res[k].wire, 0, false));
                qk_json_key(&j, "zstd1_shuffled"), qk_json_f64(&j, qk_wire_lossless_ratio(&res[k].wire, 0, true));
                qk_json_key(&j, "zstd3"), qk_json_f64(&j, qk_wire_lossless_ratio(&res[k].wire, 1, false));
                qk_json_key(&j, "zstd3_shuffled"), qk_json_f64(&j, qk_wire_lossless_ratio(&res[k].wire, 1, true));
                qk_json_end_obj(&j);
            }
            qk_json_end_obj(&j);
        }
        qk_json_end_arr(&j);
        qk_json_end_obj(&j);
        qk_json_done(&j);
    } else {
        fprintf(f, "Pipeline-wire sweep: %s, %zu tokens of %s, -c %d, %llu scored tokens per row\n\n",
                u->o->model, u->n_ids, u->o->text, u->o->n_ctx,
                u->n ? (unsigned long long)res[0].n : 0ull);
        fprintf(f, "| wire | boundaries | bytes/elem | vs bf16 | mean KLD | KLD p99 | PPL | ΔPPL %% | "
                   "same top %% |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int k = 0; k < u->n; k++) {
            const double bpe = qk_wire_bytes_per_elem(&res[k].wire);
            fprintf(f, "| %s | %d | %.4f | %.2fx | ", qk_wire_fmt_name(u->specs[k].fmt),
                    res[k].n_boundaries, bpe, 2.0 / bpe);
            md_kld(f, &res[k]);
        }
        bool any = false;
        for (int k = 0; k < u->n; k++)
            if (u->specs[k].lossless) {
                if (!any)
                    fprintf(f, "\nLossless control: zstd on the bf16 hidden states at the boundaries "
                               "(ratio = bf16 bytes / compressed bytes; one message per boundary "
                               "per %d-token batch)\n\n| boundaries | zstd-1 | zstd-1 shuffled | "
                               "zstd-3 | zstd-3 shuffled |\n|---:|---:|---:|---:|---:|\n",
                            u->o->n_ctx / 2);
                any = true;
                fprintf(f, "| %d | %.3fx | %.3fx | %.3fx | %.3fx |\n", res[k].n_boundaries,
                        qk_wire_lossless_ratio(&res[k].wire, 0, false),
                        qk_wire_lossless_ratio(&res[k].wire, 0, true),
                        qk_wire_lossless_ratio(&res[k].wire, 1, false),
                        qk_wire_lossless_ratio(&res[k].wire, 1, true));
            }
    }
}

int qk_sweep_wire(const qk_sweep_opts *o0, qk_sweep_sink sink, void *sink_ud, qk_err *err)
{
    const opts ov = with_defaults(o0), *o = &ov;
    loaded l;
    int rc = load(o, &l, err);
    int nb[16], n_nb = 0;
    bool sel[QK_WIRE_FMT_COUNT];
    for (int f = 0; f < QK_WIRE_FMT_COUNT; f++)
        sel[f] = !o->formats;
    if (!rc)
        rc = parse_list_int(o->boundaries ? o->boundaries : "1,2,4", nb, 16, &n_nb, err);
    if (!rc && o->formats) {
        char *copy = strdup(o->formats), *save = NULL;
        for (char *w = strtok_r(copy, ",", &save); w && !rc; w = strtok_r(NULL, ",", &save)) {
            qk_wire_fmt f;
            if (!(rc = qk_wire_fmt_parse(w, &f, err)))
                sel[f] = true;
        }
        free(copy);
    }
    const int L = l.m.hp.n_layer;
    for (int i = 0; i < n_nb && !rc; i++)
        if (nb[i] + 1 > L)
            rc = qk_errf(err, QK_EINPUT, "%d boundaries: the model has %d layers", nb[i], L);
    qk_wire_spec specs[QK_WIRE_FMT_COUNT * 16];
    qk_study_cfg cfgs[QK_WIRE_FMT_COUNT * 16];
    int n = 0;
    for (int f = 0; f < QK_WIRE_FMT_COUNT && !rc; f++)
        for (int i = 0; i < n_nb && sel[f]; i++) {
            /* B boundaries: B+1 equal stages; the lossless control rides on fp32 */
            specs[n] = (qk_wire_spec){.fmt = (qk_wire_fmt)f, .stages = nb[i] + 1,
                                      .lossless = f == QK_WIRE_FP32};
            cfgs[n] = (qk_study_cfg){.wire = &specs[n]};
            n++;
        }
    qk_study_res *res = calloc((size_t)(n ? n : 1), sizeof *res);
    if (!rc && !res)
        rc = qk_errf(err, QK_EIO, "out of memory");
    if (!rc)
        rc = qk_study_run(&l.m, l.ids, l.n_ids, o->n_ctx, qk_tok_bos(l.tok), o->threads, cfgs, n,
                          res, err);
    if (!rc) {
        sweep_ud u = {.o = o, .n_ids = l.n_ids, .specs = specs, .res = res, .n = n};
        rc = sink(sink_ud, emit_wire, &u, err);
    }
    free(res);
    unload(&l);
    return rc;
}

static void emit_kv(FILE *f, const char *fmt, void *p)
{
    const sweep_ud *u = p;
    const qk_study_res *res = u->res;
    char name[64];
    if (strcmp(fmt, "csv") == 0) {
        fprintf(f, "kv_cache,bytes_per_token,ratio_vs_bf16," KLD_CSV_COLS "\n");
        for (int k = 0; k < u->n; k++) {
            qk_kvq_name(&u->kvqs[k], name, sizeof name);
            fprintf(f, "%s,%.6g,%.6g,", name, res[k].kv_bytes_token, res[k].kv_bytes_token / u->bf16);
            csv_kld(f, &res[k]);
            fputc('\n', f);
        }
    } else if (strcmp(fmt, "json") == 0) {
        qk_json j;
        qk_json_init(&j, f, true);
        qk_json_obj(&j);
        qk_json_key(&j, "model"), qk_json_str(&j, u->o->model);
        qk_json_key(&j, "text"), qk_json_str(&j, u->o->text);
        qk_json_key(&j, "tokens"), qk_json_uint(&j, u->n_ids);
        qk_json_key(&j, "n_ctx"), qk_json_int(&j, u->o->n_ctx);
        qk_json_key(&j, "bf16_bytes_per_token"), qk_json_f64(&j, u->bf16);
        qk_json_key(&j, "configs");
        qk_json_arr(&j);
        for (int k = 0; k < u->n; k++) {
            qk_kvq_name(&u->kvqs[k], name, sizeof name);
            qk_json_obj(&j);
            qk_json_key(&j, "kv_cache"), qk_json_str(&j, name);
            qk_json_key(&j, "bytes_per_token"), qk_json_f64(&j, res[k].kv_bytes_token);
            json_kld(&j, &res[k]);
            qk_json_end_obj(&j);
        }
        qk_json_end_arr(&j);
        qk_json_end_obj(&j);
        qk_json_done(&j);
    } else {
        fprintf(f, "KV-cache sweep: %s, %zu tokens of %s, -c %d (a bf16 cache: %.0f bytes per "
                   "token over %d layers)\n\n",
                u->o->model, u->n_ids, u->o->text, u->o->n_ctx, u->bf16, u->n_layer);
        fprintf(f, "| KV cache | bytes/token | vs bf16 | mean KLD | KLD p99 | PPL | ΔPPL %% | same "
                   "top %% |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int k = 0; k < u->n; k++) {
            qk_kvq_name(&u->kvqs[k], name, sizeof name);
            fprintf(f, "| %s | %.1f | %.3f | ", name, res[k].kv_bytes_token,
                    res[k].kv_bytes_token / u->bf16);
            md_kld(f, &res[k]);
        }
    }
}

int qk_sweep_kv(const qk_sweep_opts *o0, qk_sweep_sink sink, void *sink_ud, qk_err *err)
{
    const opts ov = with_defaults(o0), *o = &ov;
    static const char *const defaults =
        "f32,f16,bf16,fp8-e4m3,fp8-e4m3:head,fp8-e5m2,fp8-e5m2:head,int8,int4,nvfp4,"
        "int8+kivi,int4+kivi,fp8-e4m3:head+kivi";
    loaded l;
    int rc = load(o, &l, err);
    qk_kvq kvqs[64];
    qk_study_cfg cfgs[64];
    int n = 0;
    char *copy = strdup(o->types ? o->types : defaults), *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w && !rc; w = strtok_r(NULL, ",", &save)) {
        if (n == 64) {
            rc = qk_errf(err, QK_EINPUT, "--types: at most 64");
            break;
        }
        /* suffixes +kivi and +rot, in either order */
        bool kivi = false, rotv = false;
        for (char *plus; (plus = strrchr(w, '+'));) {
            if (!strcmp(plus, "+kivi"))
                kivi = true;
            else if (!strcmp(plus, "+rot"))
                rotv = true;
            else
                break;
            *plus = 0;
        }
        memset(&kvqs[n], 0, sizeof kvqs[n]);
        if ((rc = qk_kvq_parse(w, &kvqs[n], err)))
            break;
        kvqs[n].key_per_channel = kivi;
        kvqs[n].rotate = rotv;
        cfgs[n] = (qk_study_cfg){.kvq = &kvqs[n]};
        n++;
    }
    free(copy);
    qk_study_res *res = calloc((size_t)(n ? n : 1), sizeof *res);
    if (!rc && !res)
        rc = qk_errf(err, QK_EIO, "out of memory");
    if (!rc)
        rc = qk_study_run(&l.m, l.ids, l.n_ids, o->n_ctx, qk_tok_bos(l.tok), o->threads, cfgs, n,
                          res, err);
    if (!rc) {
        const qk_hparams *hp = &l.m.hp;
        sweep_ud u = {.o = o, .n_ids = l.n_ids, .kvqs = kvqs, .res = res, .n = n,
                      .bf16 = 2.0 * hp->n_layer * hp->n_head_kv * (hp->head_dim + hp->head_dim_v),
                      .n_layer = hp->n_layer};
        rc = sink(sink_ud, emit_kv, &u, err);
    }
    free(res);
    unload(&l);
    return rc;
}

