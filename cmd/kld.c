/* kld.c - qk-kld: perplexity and KL-divergence runs, llama-perplexity's
 * numbers (lib/eval/ppl.h, lib/eval/kldstats.h), base files in llama.cpp's format or
 * qk's compressed one (lib/eval/kldbase.h), CI thresholds, and sharding through
 * partial-results files merged into the statistics of one run. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "lib/core/cli.h"
#include "cmd/commands.h"
#include "lib/engine/forward.h"
#include "formats/gguf.h"
#include "lib/engine/modelfile.h"
#include "lib/core/json.h"
#include "lib/eval/kldbase.h"
#include "lib/eval/kldsplit.h"
#include "lib/eval/kldstats.h"
#include "lib/eval/logits_file.h"
#include "lib/core/mapfile.h"
#include "lib/eval/ppl.h"
#include "lib/eval/tasks_cmd.h"
#include "lib/core/progress.h"
#include "lib/study/study_cmd.h"
#include "lib/engine/tokenizer.h"

static const char usage_text[] =
    "usage: qk-kld -m MODEL -f TEXT [-c N_CTX] [--chunks N] [-b N] [-t N] [--kld-base-out FILE]\n"
    "       qk-kld -m MODEL --kld-base FILE [-f TEXT] [thresholds]\n"
    "       qk-kld -m MODEL --base MODEL_B -f TEXT [thresholds]\n"
    "       qk-kld ... --chunk-range A:B --partial-out PART.qkpart\n"
    "       qk-kld --merge PART.qkpart... [--json] [thresholds]\n"
    "       qk-kld --logits Q.logits --logits-base B.logits [--json] [thresholds]\n"
    "       qk-kld -m MODEL [--base MODEL_B] --hellaswag|--winogrande|--multiple-choice\n"
    "              -f FILE|-bf FILE [--*-tasks N] [--min-score|--min-recovery|--min-agreement PCT]\n"
    "\n"
    "Perplexity and KL divergence as llama-perplexity computes them: the text is cut into\n"
    "windows of N_CTX tokens (BOS first), the second half of each window is scored.\n"
    "With --logits, two qk-run --logits-out files of the same tokens are compared instead:\n"
    "every row but the last is scored (row i predicts token i+1), the base in full precision.\n"
    "\n"
    "  -m, --model MODEL       the model: GGUF, or a Hugging Face directory (plain or quantized)\n"
    "  -f, --file TEXT         evaluation text\n"
    "  -c, --ctx-size N        window size in tokens (default 512)\n"
    "      --chunks N          at most N windows\n"
    "  -b, --batch-size N      tokens per forward call (default 512, at most -c)\n"
    "      --kv-type f16|f32   KV cache type (default f16, llama.cpp's numerics)\n"
    "      --act-type T        default (activations encoded as llama.cpp does) or f32 (float\n"
    "                          activations: the weights' error alone, as if dequantized to F32)\n"
    "      --split-error       also report the weight-only error (f32 activations) and the\n"
    "                          activation-quantization share (default against f32); one more pass\n"
    "      --noise-floor       also estimate how far two correct implementations of this arithmetic\n"
    "                          drift apart (activation encoders' variants: two more passes)\n"
    "      --above-floor       thresholds count only beyond the noise floor (implies --noise-floor)\n"
    "      --max-kld-weights X exit 1 when the weight-only Mean KLD > X (implies --split-error)\n"
    "      --kld-base FILE     compare against base log-probs (llama.cpp or qk format)\n"
    "      --base MODEL_B      compare against MODEL_B (GGUF or HF directory) in the same pass\n"
    "      --tokenizer FILE    tokenizer (GGUF, tokenizer.json or HF directory); default: the GGUF\n"
    "                          among -m and --base, else -m's or --base's tokenizer.json\n"
    "      --kld-base-out FILE write the model's log-probs as a base file\n"
    "      --kld-base-format F llama (default: llama-perplexity's --kl-divergence-base) or qk\n"
    "      --chunk-range A:B   only chunks A..B-1 (0-based; B may be omitted: to the end)\n"
    "      --partial-out FILE  write the partial results of these chunks (.qkpart)\n"
    "      --merge             the arguments are .qkpart files: print their merged statistics\n"
    "      --logits FILE       the model's logits from qk-run --logits-out (no -m, -f)\n"
    "      --logits-base FILE  the base's logits from qk-run --logits-out, same tokens\n"
    "      --max-kld-mean X    exit 1 when Mean KLD > X\n"
    "      --max-kld-p99 X     exit 1 when the 99.0% KLD > X\n"
    "      --max-ppl-ratio X   exit 1 when Mean PPL(Q)/PPL(base) > X\n"
    "      --min-same-top X    exit 1 when Same top p < X percent\n"
    "      --wire FMT          numerics study on MODEL (not the base): quantize the hidden state\n"
    "                          at pipeline-stage boundaries (fp32, bf16, fp16, fp8-e4m3, fp8-e5m2,\n"
    "                          int8-token, int4-token, int4-group32, mxfp8, mxfp6, mxfp4, nvfp4)\n"
    "      --wire-every K      a boundary after every K layers\n"
    "      --wire-at L1,L2     boundaries after these layers\n"
    "      --stages S          S nearly equal stages (S-1 boundaries)\n"
    "      --wire-lossless     also measure zstd on the bf16 hidden states at the boundaries\n"
    "      --kv-cache TYPE     numerics study on MODEL: quantize keys and values as they enter\n"
    "                          the cache (f32, f16, bf16, fp8-e4m3, fp8-e5m2 [:tensor|:head], int8,\n"
    "                          int4, nvfp4); implies --kv-type f32\n"
    "      --kv-key-per-channel  keys per channel in groups of 32 tokens (KIVI)\n"
    "      --kv-rotate           a Hadamard per head on keys and values around the codec (QuaRot)\n"
    "      --hellaswag         HellaSwag acc_norm of the tasks in -f FILE (as llama-perplexity)\n"
    "      --hellaswag-tasks N   N tasks drawn as llama-perplexity draws them (default 400)\n"
    "      --winogrande        Winogrande score of the CSV in -f FILE\n"
    "      --winogrande-tasks N  N tasks drawn as llama-perplexity does (default: all)\n"
    "      --multiple-choice   multiple-choice score (mc1) of llama.cpp's binary file\n"
    "      --multiple-choice-tasks N  N tasks drawn as llama-perplexity does (default: all)\n"
    "  -bf, --binary-file FILE the task file read as it is (-f drops one trailing newline)\n"
    "      --min-score PCT     exit 1 when the task score < PCT percent\n"
    "      --min-recovery PCT  exit 1 when score / base score < PCT percent (needs --base)\n"
    "      --min-agreement PCT exit 1 when the models agree on < PCT percent of the tasks\n"
    "                          (task runs write their --json report with --partial-out FILE)\n"
    "  -t, --threads N         threads (0 = all CPUs; results do not depend on N)\n"
    "      --json              one JSON document on stdout instead of the text report\n"
    "  -q, --quiet             no progress or timing on stderr\n"
    "  -h, --help              this text\n"
    "\n"
    "Exit codes: 0 ok, 1 a threshold was exceeded, 2 usage or input error, 3 I/O error.\n";

typedef struct {
    const char *prog;
    const char *model, *text, *base_file, *base_model, *base_out, *part_out;
    const char *logits, *logits_base; /* --logits, --logits-base */
    const char *tokenizer;            /* --tokenizer */
    int base_format;
    int n_ctx, n_chunks, n_batch, threads, kv_type;
    bool have_ctx, have_range, json, quiet, merge, kv_type_given;
    qk_study_opts st; /* --wire, --kv-cache on the model under test (lib/study/study_cmd.h) */
    qk_tasks_opts tk; /* --hellaswag, --winogrande, --multiple-choice (lib/eval/tasks_cmd.h) */
    int range_a, range_b; /* range_b < 0: to the end */
    double max_kld_mean, max_kld_p99, max_ppl_ratio, min_same_top, max_kld_weights;
    bool has_max_kld_mean, has_max_kld_p99, has_max_ppl_ratio, has_min_same_top, has_max_kld_weights;
    int act_type;                   /* --act-type */
    bool split, floor, above_floor; /* --split-error, --noise-floor, --above-floor */
    qk_kld_extra *x;                /* their runs (lib/eval/kldsplit.h), NULL when off */
} args;

static int read_text(const char *path, char **out, size_t *n, qk_err *err)
{
    qk_map m;
    int rc = qk_map_open(&m, path, err);
    if (rc)
        return rc;
    *out = malloc(m.size + 1);
    if (!*out) {
        qk_map_close(&m);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    if (m.size)
        memcpy(*out, m.data, m.size);
    (*out)[m.size] = 0;
    *n = m.size;
    qk_map_close(&m);
    return 0;
}

/* ---- output ------------------------------------------------------------------ */

typedef struct {
    const args *a;
    bool header_done;
} print_ctx;

static void on_chunk(void *ud, int chunk_no, const qk_kld_acc *acc)
{
    print_ctx *p = ud;
    if (p->a->json)
        return;
    if (acc->mode == QK_KLD_MODE_KLD && !p->header_done) {
        qk_kld_print_table_header(stdout);
        p->header_done = true;
    }
    qk_kld_print_chunk(stdout, acc, chunk_no);
}

typedef struct {
    const char *option, *what;
    double limit, value;
    bool ok;
} bound;

/* The numerics studies of a run and the checkpoints' bits per weight, for
 * the report (NULL for --merge). */
typedef struct {
    const qk_wire *wire;
    const qk_hparams *hp;
    double bpw, bpw_base; /* stored bits per weight of -m and --base (0: no --base) */
} study_view;

static void json_report(const args *a, const study_view *sv, const qk_kld_acc *acc,
                        const qk_kld_summary *s, bool ppl_ok,
                        double ppl, double ppl_err, int n_ctx, int n_vocab, int first, int last,
                        int total, const bound *b, int nb)
{
    qk_json j;
    qk_json_init(&j, stdout, true);
    qk_json_obj(&j);
    qk_json_key(&j, "mode"), qk_json_str(&j, acc->mode == QK_KLD_MODE_KLD ? "kld" : "ppl");
    qk_json_key(&j, "model"), qk_json_str(&j, a->merge ? NULL : a->model);
    qk_json_key(&j, "base");
    qk_json_str(&j, a->base_model ? a->base_model : a->base_file);
    qk_json_key(&j, "n_ctx"), qk_json_int(&j, n_ctx);
    qk_json_key(&j, "n_vocab"), qk_json_int(&j, n_vocab);
    qk_json_key(&j, "chunks");
    qk_json_obj(&j);
    qk_json_key(&j, "first"), qk_json_int(&j, first);
    qk_json_key(&j, "last"), qk_json_int(&j, last);
    qk_json_key(&j, "total"), qk_json_int(&j, total);
    qk_json_end_obj(&j);
    qk_json_key(&j, "tokens_scored"), qk_json_uint(&j, acc->count);
    qk_json_key(&j, "act_type"), qk_json_str(&j, qk_act_type_name(a->act_type));
    if (sv) {
        qk_json_key(&j, "bits_per_weight");
        qk_json_obj(&j);
        qk_json_key(&j, "model"), qk_json_f64(&j, sv->bpw);
        qk_json_key(&j, "base");
        if (sv->bpw_base > 0)
            qk_json_f64(&j, sv->bpw_base);
        else
            qk_json_null(&j);
        qk_json_end_obj(&j);
        qk_study_json(&j, &a->st, sv->wire, sv->hp);
    }
    if (acc->mode == QK_KLD_MODE_PPL) {
        qk_json_key(&j, "ppl");
        qk_json_obj(&j);
        qk_json_key(&j, "value"), qk_json_f64(&j, ppl);
        qk_json_key(&j, "error");
        if (ppl_ok)
            qk_json_f64(&j, ppl_err);
        else
            qk_json_null(&j);
        qk_json_end_obj(&j);
    } else {
        qk_json_key(&j, "perplexity");
        qk_json_obj(&j);
        qk_kld_json_ve(&j, "ppl_q", s->ppl);
        qk_kld_json_ve(&j, "ppl_base", s->ppl_base);
        qk_json_key(&j, "cor_ln_ppl_pct"), qk_json_f64(&j, 100.0 * s->cor);
        qk_kld_json_ve(&j, "ln_ppl_ratio", s->ln_ratio);
        qk_kld_json_ve(&j, "ppl_ratio", s->ratio);
        qk_kld_json_ve(&j, "ppl_diff", s->diff);
        qk_json_end_obj(&j);
        static const char *const kn[] = {"max", "p99_9", "p99", "p95", "p90", "median",
                                         "p10", "p5", "p1", "p0_1", "min"};
        qk_json_key(&j, "kld");
        qk_json_obj(&j);
        qk_json_key(&j, "mean"), qk_json_f64(&j, s->kld.v);
        qk_json_key(&j, "error"), qk_json_f64(&j, s->kld.e);
        for (int i = 0; i < 11; i++)
            qk_json_key(&j, kn[i]), qk_json_f64(&j, s->kld_pct[i]);
        qk_json_end_obj(&j);
        static const char *const pn[] = {"max", "p99_9", "p99", "p95", "p90", "p75", "median",
                                         "p25", "p10", "p5", "p1", "p0_1", "min"};
        qk_json_key(&j, "delta_p_pct");
        qk_json_obj(&j);
        qk_json_key(&j, "mean"), qk_json_f64(&j, s->dp.v);
        qk_json_key(&j, "error"), qk_json_f64(&j, s->dp.e);
        for (int i = 0; i < 13; i++)
            qk_json_key(&j, pn[i]), qk_json_f64(&j, s->dp_pct[i]);
        qk_json_end_obj(&j);
        qk_kld_json_ve(&j, "rms_delta_p_pct", s->rms_dp);
        qk_kld_json_ve(&j, "same_top_p_pct", s->same_top);
        if (a->x)
            qk_kld_extra_json(&j, a->x);
    }
    qk_json_key(&j, "thresholds");
    qk_json_arr(&j);
    bool all = true;
    for (int i = 0; i < nb; i++) {
        qk_json_obj(&j);
        qk_json_key(&j, "option"), qk_json_str(&j, b[i].option);
        qk_json_key(&j, "limit"), qk_json_f64(&j, b[i].limit);
        qk_json_key(&j, "value"), qk_json_f64(&j, b[i].value);
        qk_json_key(&j, "ok"), qk_json_bool(&j, b[i].ok);
        qk_json_end_obj(&j);
        all = all && b[i].ok;
    }
    qk_json_end_arr(&j);
    qk_json_key(&j, "ok"), qk_json_bool(&j, all);
    qk_json_end_obj(&j);
    qk_json_done(&j);
}

static int thresholds(const args *a, const qk_kld_summary *s, bound *b)
{
    int n = 0;
    /* --above-floor: the KLD figures less the floor's, same top plus what the floor loses */
    const qk_kld_figure *fl = a->above_floor ? &a->x->flr : &(qk_kld_figure){.same_top = {100, 0}};
    const double mean = s->kld.v - fl->mean.v, p99 = s->kld_pct[2] - fl->p99.v;
    const double top = s->same_top.v + (100.0 - fl->same_top.v);
    if (a->has_max_kld_mean)
        b[n++] = (bound){"--max-kld-mean", a->above_floor ? "Mean KLD above the floor" : "Mean KLD",
                         a->max_kld_mean, mean, mean <= a->max_kld_mean};
    if (a->has_max_kld_p99)
        b[n++] = (bound){"--max-kld-p99", a->above_floor ? "99.0% KLD above the floor" : "99.0% KLD",
                         a->max_kld_p99, p99, p99 <= a->max_kld_p99};
    if (a->has_max_ppl_ratio)
        b[n++] = (bound){"--max-ppl-ratio", "Mean PPL(Q)/PPL(base)", a->max_ppl_ratio, s->ratio.v,
                         s->ratio.v <= a->max_ppl_ratio};
    if (a->has_min_same_top)
        b[n++] = (bound){"--min-same-top", a->above_floor ? "Same top p (%) with the floor's misses back"
                         : "Same top p (%)", a->min_same_top, top, top >= a->min_same_top};
    if (a->has_max_kld_weights)
        b[n++] = (bound){"--max-kld-weights", "weight-only Mean KLD", a->max_kld_weights,
                         a->x->wts.mean.v, a->x->wts.mean.v <= a->max_kld_weights};
    return n;
}

static bool any_threshold(const args *a)
{
    return a->has_max_kld_mean || a->has_max_kld_p99 || a->has_max_ppl_ratio || a->has_min_same_top ||
           a->has_max_kld_weights;
}

/* Final report (text or JSON) and the thresholds' verdict. */
static int finish(const args *a, const study_view *sv, qk_kld_acc *acc, int n_ctx, int n_vocab, int first, int last,
                  int total)
{
    qk_kld_summary s = {0};
    double ppl = 0, ppl_err = 0;
    bool ppl_ok = false;
    if (acc->mode == QK_KLD_MODE_KLD)
        qk_kld_summarize(acc, &s);
    else
        ppl_ok = qk_kld_final_ppl(acc, &ppl, &ppl_err);
    if (a->x && acc->mode == QK_KLD_MODE_KLD)
        qk_kld_extra_finish(a->x, acc);
    bound b[5];
    const int nb = acc->mode == QK_KLD_MODE_KLD ? thresholds(a, &s, b) : 0;
    if (a->json) {
        json_report(a, sv, acc, &s, ppl_ok, ppl, ppl_err, n_ctx, n_vocab, first, last, total, b, nb);
    } else if (acc->mode == QK_KLD_MODE_PPL) {
        fputc('\n', stdout);
        if (ppl_ok)
            printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl_err);
        else
            printf("Final estimate: PPL = %.4f (no error estimate: variance not positive)\n", ppl);
    } else {
        fputc('\n', stdout);
        qk_kld_print_summary(stdout, &s);
        if (a->x)
            qk_kld_extra_print(stdout, a->x);
    }
    if (!a->json && sv) {
        printf("Bits per weight: %.4f (%s)", sv->bpw, a->model);
        if (sv->bpw_base > 0)
            printf(", %.4f (%s)", sv->bpw_base, a->base_model);
        putchar('\n');
    }
    if (!a->json && sv && (a->st.has_wire || a->st.has_kvq)) {
        fputc('\n', stdout);
        qk_study_print(stdout, NULL, &a->st, sv->wire, sv->hp);
    }
    fflush(stdout);
    int rc = 0;
    for (int i = 0; i < nb; i++) {
        if (b[i].ok)
            continue;
        fprintf(stderr, "%s: %s %g violated: %s = %.8g\n", a->prog, b[i].option, b[i].limit,
                b[i].what, b[i].value);
        rc = 1;
    }
    return rc;
}

/* ---- merge ------------------------------------------------------------------- */

static int merge(const args *a, char **paths, int n, qk_err *err)
{
    qk_kld_acc acc;
    qk_part_info first;
    int last;
    print_ctx pc = {a, false};
    int rc = qk_parts_merge(paths, n, &acc, &first, &last, on_chunk, &pc, err);
    if (!rc) {
        if (acc.mode == QK_KLD_MODE_PPL && any_threshold(a))
            rc = qk_errf(err, QK_EINPUT, "thresholds need a KL-divergence run (parts have no base)");
        else
            rc = -finish(a, NULL, &acc, first.n_ctx, first.n_vocab, first.chunk_a + 1, last,
                         first.n_chunk);
    }
    qk_kld_acc_free(&acc);
    return rc;
}

/* ---- two logits files ---------------------------------------------------------- */

/* --logits Q --logits-base B: both files hold the same tokens; row i of each
 * is the distribution after tokens[0..i], so rows 0 .. n-2 are scored
 * against token i+1 with the base's exact log-probabilities. */
static int compare_logits(const args *a, qk_err *err)
{
    qk_logits_reader *q = NULL, *b = NULL;
    float *lq = NULL, *lb = NULL, *lpb = NULL;
    qk_kld_acc acc;
    qk_kld_acc_init(&acc, QK_KLD_MODE_KLD, false);
    int rc = qk_logits_open(&q, a->logits, err);
    if (!rc)
        rc = qk_logits_open(&b, a->logits_base, err);
    if (rc)
        goto done;
    if (b->n_vocab != q->n_vocab) {
        rc = qk_errf(err, QK_EINPUT, "%s: n_vocab at offset 16: %u, but %s has %u", a->logits_base,
                     b->n_vocab, a->logits, q->n_vocab);
        goto done;
    }
    if (b->n_tokens != q->n_tokens) {
        rc = qk_errf(err, QK_EINPUT, "%s: n_tokens at offset 20: %u, but %s has %u", a->logits_base,
                     b->n_tokens, a->logits, q->n_tokens);
        goto done;
    }
    for (uint32_t i = 0; i < q->n_tokens; i++)
        if (q->tokens[i] != b->tokens[i]) {
            rc = qk_errf(err, QK_EINPUT, "%s: token %u is %d, but %s has %d (another sequence)",
                         a->logits_base, i, b->tokens[i], a->logits, q->tokens[i]);
            goto done;
        }
    if (q->n_tokens < 2) {
        rc = qk_errf(err, QK_EINPUT, "%s: %u row(s): at least 2 are needed to score one token",
                     a->logits, q->n_tokens);
        goto done;
    }
    const size_t nv = q->n_vocab;
    lq = malloc(nv * sizeof *lq), lb = malloc(nv * sizeof *lb), lpb = malloc(nv * sizeof *lpb);
    if (!lq || !lb || !lpb) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto done;
    }
    for (uint32_t i = 0; i + 1 < q->n_tokens; i++) {
        qk_kld_tok t;
        if ((rc = qk_logits_next(q, lq, err)) || (rc = qk_logits_next(b, lb, err)))
            goto done;
        qk_ppl_logprobs(lb, (int)nv, lpb);
        qk_kld_score(lq, lpb, (int)nv, q->tokens[i + 1], &t);
        if ((rc = qk_kld_acc_add(&acc, &t, err)))
            goto done;
    }
    rc = -finish(a, NULL, &acc, (int)q->n_tokens, (int)nv, 1, 1, 1);
done:
    qk_kld_acc_free(&acc);
    qk_logits_close(q), qk_logits_close(b);
    free(lq), free(lb), free(lpb);
    return rc;
}

/* ---- a run ------------------------------------------------------------------- */

static int same_as_input(const args *a, const char *out, qk_err *err)
{
    const char *in[] = {a->model, a->text, a->base_file, a->base_model};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        if (in[i] && qk_same_file(in[i], out))
            return qk_errf(err, QK_EINPUT, "%s: output is the same file as input %s", out, in[i]);
    return 0;
}

static int run(const args *a, qk_err *err)
{
    qk_model_file mq = {0}, mb = {0};
    qk_tokenizer *tok = NULL;
    qk_kldb_reader *bin = NULL;
    qk_kldb_writer *bout = NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    qk_kld_acc acc;
    memset(&acc, 0, sizeof acc);
    qk_wire wire;
    memset(&wire, 0, sizeof wire);
    int rc;
    if ((a->base_out && (rc = same_as_input(a, a->base_out, err))) ||
        (a->part_out && (rc = same_as_input(a, a->part_out, err))))
        return rc;
    if ((rc = qk_model_file_open(&mq, a->model, true, err)) ||
        (rc = qk_study_prepare(&a->st, &mq.m->hp, &wire, err)))
        goto done;
    if (a->base_model && (rc = qk_model_file_open(&mb, a->base_model, true, err)))
        goto done;
    /* --tokenizer, the tokenizer of whichever model is a GGUF file, or an HF tokenizer.json */
    const qk_gguf *tg = mq.g ? mq.g : mb.g;
    if (a->tokenizer)
        rc = qk_tokenizer_from(a->tokenizer, &tok, err);
    else if (tg)
        rc = (tok = qk_tok_from_gguf(tg, err)) ? 0 : (err->code ? err->code : QK_EINPUT);
    else if ((rc = qk_hf_tokenizer(a->model, &tok, err)) && a->base_model) {
        memset(err, 0, sizeof *err);
        rc = qk_hf_tokenizer(a->base_model, &tok, err);
    }
    if (rc)
        goto done;
    const int nv = mq.m->hp.n_vocab;
    if ((int)qk_tok_n_vocab(tok) != nv) {
        rc = qk_errf(err, QK_EINPUT, "%s: the tokenizer has %u tokens, the output layer %d", a->model,
                     qk_tok_n_vocab(tok), nv);
        goto done;
    }
    if (a->tk.kind) {
        const qk_tasks_job tj = {a->prog, a->model, a->base_model, mq.m, a->base_model ? mb.m : NULL,
                                 tok, a->text, a->n_ctx, a->n_batch, a->threads, a->kv_type, a->json,
                                 a->quiet, a->part_out};
        rc = qk_tasks_cmd(&a->tk, &tj, err);
        goto done;
    }
    if (a->text) {
        size_t n = 0;
        if ((rc = read_text(a->text, &text, &n, err)) ||
            (rc = qk_ppl_tokenize(tok, text, n, &ids, &n_ids, err)))
            goto done;
    }
    int n_ctx = a->n_ctx, n_chunk;
    const int32_t *tokens;
    if (a->base_file) {
        if ((rc = qk_kldb_open(&bin, a->base_file, err)))
            goto done;
        const qk_kldb_info *bi = qk_kldb_reader_info(bin);
        if (bi->n_vocab != nv) {
            rc = qk_errf(err, QK_EINPUT, "%s: base log-probs for a vocabulary of %d tokens, %s has %d",
                         a->base_file, bi->n_vocab, a->model, nv);
            goto done;
        }
        if (a->have_ctx && a->n_ctx != bi->n_ctx) {
            rc = qk_errf(err, QK_EINPUT, "%s: made with -c %d, not %d", a->base_file, bi->n_ctx, a->n_ctx);
            goto done;
        }
        n_ctx = bi->n_ctx;
        n_chunk = bi->n_chunk;
        tokens = bi->tokens;
        if (ids) {
            const size_t need = (size_t)n_ctx * (size_t)n_chunk;
            for (size_t i = 0; i < need; i++)
                if (i >= n_ids || ids[i] != tokens[i]) {
                    rc = qk_errf(err, QK_EINPUT, "%s: another token sequence than %s: token %zu is %d in "
                                 "the base file, %s in the text", a->base_file, a->text, i, (int)tokens[i],
                                 i >= n_ids ? "absent" : "different");
                    goto done;
                }
        }
    } else {
        if (!ids) {
            rc = qk_errf(err, QK_EINPUT, "need -f TEXT (or --kld-base FILE); see --help");
            goto done;
        }
        if (n_ids < 2 * (size_t)n_ctx) {
            rc = qk_errf(err, QK_EINPUT, "%s: too short: %zu tokens, at least %d needed for -c %d",
                         a->text, n_ids, 2 * n_ctx, n_ctx);
            goto done;
        }
        n_chunk = (int)(n_ids / (size_t)n_ctx);
        tokens = ids;
    }
    if (a->n_chunks > 0 && a->n_chunks < n_chunk)
        n_chunk = a->n_chunks;
    int ca = 0, cb = n_chunk;
    if (a->have_range) {
        ca = a->range_a;
        cb = a->range_b < 0 || a->range_b > n_chunk ? n_chunk : a->range_b;
        if (ca >= cb) {
            rc = qk_errf(err, QK_EINPUT, "--chunk-range %d:%d: no chunk of the %d in this run", a->range_a,
                         a->range_b, n_chunk);
            goto done;
        }
    }
    if (a->base_model && mb.m->hp.n_vocab != nv) {
        rc = qk_errf(err, QK_EINPUT, "%s: a vocabulary of %d tokens, %s has %d", a->base_model,
                     mb.m->hp.n_vocab, a->model, nv);
        goto done;
    }
    const bool kld = bin || a->base_model;
    if (!kld && (any_threshold(a) || a->x)) {
        rc = qk_errf(err, QK_EINPUT, "%s need a base: --kld-base FILE or --base MODEL_B",
                     a->x ? "--split-error and --noise-floor" : "thresholds");
        goto done;
    }
    if (a->base_out) {
        if (ca != 0 || cb != n_chunk) {
            rc = qk_errf(err, QK_EINPUT, "--kld-base-out writes whole runs, not a --chunk-range");
            goto done;
        }
        /* qk: the factored encoding when it is the smaller one */
        const uint64_t rows_total = (uint64_t)n_chunk * (uint64_t)(n_ctx - 1 - n_ctx / 2);
        const qk_kldb_head head = {&mq.m->output, mq.m->output_bias};
        /* (the factored file recomputes logits as the output layer gives
         * them, with default activations: no final soft-capping) */
        const bool fact = a->base_format == QK_KLDB_QK && mq.m->hp.final_softcap == 0.0f &&
                          qk_kldb_factored_pays(rows_total, &mq.m->output) &&
                          (a->act_type == QK_ACT_DEFAULT || mq.m->output.type == QK_F32);
        if ((rc = qk_kldb_create(&bout, a->base_out, a->base_format, n_ctx, nv, n_chunk, tokens, 9,
                                 fact ? &head : NULL, err)))
            goto done;
    }
    qk_kld_acc_init(&acc, kld ? QK_KLD_MODE_KLD : QK_KLD_MODE_PPL, a->part_out != NULL);
    qk_progress prog;
    qk_progress_init(&prog, "qk-kld", (uint64_t)(cb - ca), a->quiet);
    print_ctx pc = {a, false};
    qk_ppl_job job = {
        .model = mq.m, .base_model = a->base_model ? mb.m : NULL, .base_in = bin, .base_out = bout,
        .tokens = tokens, .n_ctx = n_ctx, .chunk_a = ca, .chunk_b = cb, .bos = qk_tok_bos(tok),
        .add_bos = qk_tok_add_bos(tok), .n_batch = a->n_batch, .nthreads = a->threads,
        .kv_type = a->kv_type, .act_type = a->act_type, .acc = &acc, .on_chunk = on_chunk, .ud = &pc,
        .variants = a->x ? a->x->v : NULL, .n_variants = a->x ? a->x->n_variants : 0,
        .progress = prog.on ? &prog : NULL,
        .layer_hook = a->st.has_wire ? qk_wire_layer_hook : NULL,
        .hook_user = a->st.has_wire ? &wire : NULL, .kvq = a->st.has_kvq ? &a->st.kvq : NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = qk_ppl_run(&job, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (prog.on)
        qk_progress_end(&prog);
    if (rc)
        goto done;
    if (bout && (rc = qk_kldb_finish(bout, err)))
        goto done;
    if (a->part_out) {
        qk_part_info pi = {.mode = acc.mode, .n_ctx = n_ctx, .n_vocab = nv, .n_chunk = n_chunk,
                           .chunk_a = ca, .chunk_b = cb, .rows = n_ctx - 1 - n_ctx / 2,
                           .tokens_hash = qk_tokens_hash(tokens, (size_t)n_chunk * (size_t)n_ctx)};
        if ((rc = qk_part_write(a->part_out, &pi, &acc, err)))
            goto done;
    }
    const study_view sv = {&wire, &mq.m->hp, qk_model_file_bpw(&mq), a->base_model ? qk_model_file_bpw(&mb) : 0.0};
    rc = -finish(a, &sv, &acc, n_ctx, nv, ca + 1, cb, n_chunk);
    if (!a->quiet) {
        const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        fprintf(stderr, "%s: %d chunks, %llu tokens evaluated in %.2f s (%.1f tokens/s per model)\n",
                a->prog, cb - ca, (unsigned long long)job.tokens_evaluated, s,
                s > 0 ? (double)job.tokens_evaluated / s : 0.0);
    }
done:
    qk_kld_acc_free(&acc);
    qk_kldb_free(bout);
    qk_kldb_close(bin);
    qk_tok_free(tok);
    qk_model_file_close(&mq);
    qk_model_file_close(&mb);
    qk_wire_free(&wire);
    free(text), free(ids);
    return rc;
}

/* ---- options ----------------------------------------------------------------- */

static int parse_range(const char *s, args *a, qk_err *err)
{
    char *end;
    long x = strtol(s, &end, 10);
    if (end == s || *end != ':' || x < 0 || x > (1L << 28))
        return qk_errf(err, QK_EINPUT, "--chunk-range '%s': expected A:B (0-based chunks A..B-1)", s);
    a->range_a = (int)x;
    a->range_b = -1;
    if (end[1]) {
        const char *b = end + 1;
        long y = strtol(b, &end, 10);
        if (end == b || *end || y <= x || y > (1L << 28))
            return qk_errf(err, QK_EINPUT, "--chunk-range '%s': expected A:B with B > A", s);
        a->range_b = (int)y;
    }
    a->have_range = true;
    return 0;
}

static int parse_num(const char *opt, const char *s, double *v, bool *has, qk_err *err)
{
    char buf[64];
    size_t n = strlen(s);
    if (n > 0 && n < sizeof buf && s[n - 1] == '%') { /* "99.5%" */
        memcpy(buf, s, n - 1);
        buf[n - 1] = 0;
        s = buf;
    }
    if (qk_cli_double(opt, s, v, err))
        return err->code;
    *has = true;
    return 0;
}

int cmd_kld(int argc, char **argv)
{
    enum { O_CHUNKS = 256, O_KV, O_BASEF, O_BASEM, O_BOUT, O_BFMT, O_RANGE, O_POUT, O_MERGE,
           O_MKM, O_MKP, O_MPR, O_MST, O_JSON, O_LOGITS, O_LBASE, O_ACT, O_SPLIT, O_FLOOR, O_ABOVE,
           O_MKW, O_TOK };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"ctx-size", required_argument, 0, 'c'}, {"chunks", required_argument, 0, O_CHUNKS},
        {"batch-size", required_argument, 0, 'b'}, {"kv-type", required_argument, 0, O_KV},
        {"kld-base", required_argument, 0, O_BASEF}, {"base", required_argument, 0, O_BASEM},
        {"kld-base-out", required_argument, 0, O_BOUT},
        {"kld-base-format", required_argument, 0, O_BFMT},
        {"chunk-range", required_argument, 0, O_RANGE}, {"partial-out", required_argument, 0, O_POUT},
        {"merge", no_argument, 0, O_MERGE}, {"max-kld-mean", required_argument, 0, O_MKM},
        {"logits", required_argument, 0, O_LOGITS}, {"logits-base", required_argument, 0, O_LBASE},
        {"tokenizer", required_argument, 0, O_TOK},
        {"max-kld-p99", required_argument, 0, O_MKP}, {"max-ppl-ratio", required_argument, 0, O_MPR},
        {"min-same-top", required_argument, 0, O_MST}, {"json", no_argument, 0, O_JSON},
        {"threads", required_argument, 0, 't'}, {"quiet", no_argument, 0, 'q'},
        {"act-type", required_argument, 0, O_ACT}, {"split-error", no_argument, 0, O_SPLIT},
        {"noise-floor", no_argument, 0, O_FLOOR}, {"above-floor", no_argument, 0, O_ABOVE},
        {"max-kld-weights", required_argument, 0, O_MKW},
        {"help", no_argument, 0, 'h'}, QK_STUDY_LONG_OPTIONS, QK_TASKS_LONG_OPTIONS, {0, 0, 0, 0}};
    args a = {.prog = argv[0], .n_ctx = 512, .threads = 1, .kv_type = QK_F16,
              .base_format = QK_KLDB_LLAMA};
    qk_err err = {0};
    int64_t v;
    int c;
    optind = 1;
    opterr = 0;
    qk_tasks_fix_argv(argc, argv);
    while ((c = getopt_long(argc, argv, "m:f:c:b:t:qh", opts, NULL)) != -1) {
        int rc = qk_study_opt(&a.st, c, optarg, &err);
        if (!rc)
            rc = qk_tasks_opt(&a.tk, c, optarg, &err);
        if (rc < 0)
            return qk_err_report(argv[0], &err);
        if (rc)
            continue;
        switch (c) {
        case 'm': a.model = optarg; break;
        case 'f': a.text = optarg; break;
        case 'c':
            if (!(rc = qk_cli_int("-c", optarg, 4, 1 << 24, &v, &err)))
                a.n_ctx = (int)v, a.have_ctx = true;
            break;
        case O_CHUNKS:
            if (!(rc = qk_cli_int("--chunks", optarg, 1, 1 << 28, &v, &err)))
                a.n_chunks = (int)v;
            break;
        case 'b':
            if (!(rc = qk_cli_int("-b", optarg, 1, 1 << 20, &v, &err)))
                a.n_batch = (int)v;
            break;
        case O_KV:
            a.kv_type_given = true;
            if (!strcmp(optarg, "f16"))
                a.kv_type = QK_F16;
            else if (!strcmp(optarg, "f32"))
                a.kv_type = QK_F32;
            else
                rc = qk_errf(&err, QK_EINPUT, "--kv-type '%s': expected f16 or f32", optarg);
            break;
        case O_BASEF: a.base_file = optarg; break;
        case O_BASEM: a.base_model = optarg; break;
        case O_BOUT: a.base_out = optarg; break;
        case O_BFMT:
            if (!strcmp(optarg, "llama"))
                a.base_format = QK_KLDB_LLAMA;
            else if (!strcmp(optarg, "qk"))
                a.base_format = QK_KLDB_QK;
            else
                rc = qk_errf(&err, QK_EINPUT, "--kld-base-format '%s': expected llama or qk", optarg);
            break;
        case O_RANGE: rc = parse_range(optarg, &a, &err); break;
        case O_POUT: a.part_out = optarg; break;
        case O_MERGE: a.merge = true; break;
        case O_LOGITS: a.logits = optarg; break;
        case O_LBASE: a.logits_base = optarg; break;
        case O_TOK: a.tokenizer = optarg; break;
        case O_MKM: rc = parse_num("--max-kld-mean", optarg, &a.max_kld_mean, &a.has_max_kld_mean, &err); break;
        case O_MKP: rc = parse_num("--max-kld-p99", optarg, &a.max_kld_p99, &a.has_max_kld_p99, &err); break;
        case O_MPR: rc = parse_num("--max-ppl-ratio", optarg, &a.max_ppl_ratio, &a.has_max_ppl_ratio, &err); break;
        case O_MST: rc = parse_num("--min-same-top", optarg, &a.min_same_top, &a.has_min_same_top, &err); break;
        case O_MKW:
            rc = parse_num("--max-kld-weights", optarg, &a.max_kld_weights, &a.has_max_kld_weights, &err);
            break;
        case O_ACT: rc = qk_act_type_parse(optarg, &a.act_type, &err); break;
        case O_SPLIT: a.split = true; break;
        case O_FLOOR: a.floor = true; break;
        case O_ABOVE: a.above_floor = a.floor = true; break;
        case O_JSON: a.json = true; break;
        case 't': rc = qk_cli_threads(optarg, &a.threads, &err); break;
        case 'q': a.quiet = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return qk_cli_bad_option(argv[0], argv, optind);
        }
        if (rc)
            return qk_err_report(argv[0], &err);
    }
    int rc;
    a.split |= a.has_max_kld_weights;
    const bool extra = a.split || a.floor;
    if (extra && (a.logits || a.logits_base || a.merge || a.part_out || a.st.has_wire || a.st.has_kvq)) {
        fprintf(stderr, "%s: --split-error and --noise-floor run the model: not with --logits, --merge, "
                        "--partial-out or a numerics study\n", argv[0]);
        return 2;
    }
    if (a.split && a.act_type == QK_ACT_F32) {
        fprintf(stderr, "%s: --split-error splits the default arithmetic: not with --act-type f32\n", argv[0]);
        return 2;
    }
    qk_kld_extra x;
    qk_kld_extra_init(&x, a.split, a.floor, a.act_type);
    a.x = extra ? &x : NULL;
    if (a.logits || a.logits_base) {
        if (!a.logits || !a.logits_base || optind < argc || a.merge || a.model || a.text || a.tk.kind ||
            a.base_file || a.base_model || a.base_out || a.part_out || a.have_range ||
            a.st.has_wire || a.st.has_kvq) {
            fprintf(stderr, "%s: --logits FILE --logits-base FILE take only --json, -q and "
                            "thresholds; see --help\n", argv[0]);
            return 2;
        }
        rc = compare_logits(&a, &err);
    } else if (a.merge) {
        if (optind >= argc || a.model || a.text || a.tk.kind || a.base_file || a.base_model || a.base_out ||
            a.part_out || a.have_range || a.st.has_wire || a.st.has_kvq) {
            fprintf(stderr, "%s: --merge takes only .qkpart files (and --json, thresholds); see --help\n",
                    argv[0]);
            return 2;
        }
        rc = merge(&a, argv + optind, argc - optind, &err);
    } else {
        if (optind < argc) {
            fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", argv[0], argv[optind]);
            return 2;
        }
        if (!a.model) {
            fprintf(stderr, "%s: need -m MODEL; see --help\n", argv[0]);
            return 2;
        }
        if (a.base_file && a.base_model) {
            fprintf(stderr, "%s: give --kld-base FILE or --base MODEL_B, not both\n", argv[0]);
            return 2;
        }
        if (qk_study_check(&a.st, a.kv_type_given, &a.kv_type, &err) ||
            qk_tasks_check(&a.tk, a.text, a.base_model != NULL, &err))
            return qk_err_report(argv[0], &err);
        if (a.tk.kind && (a.base_file || a.base_out || a.have_range || a.st.has_wire || a.st.has_kvq ||
                          any_threshold(&a))) {
            fprintf(stderr, "%s: --%s takes -m, --base, -f/-bf, -c, -b, -t, --kv-type, --json, "
                            "--partial-out and its gates; see --help\n", argv[0], qk_task_kind_name(a.tk.kind));
            return 2;
        }
        if (a.part_out && !a.have_range) {
            a.have_range = true; /* the whole run is one part */
            a.range_a = 0;
            a.range_b = -1;
        }
        rc = run(&a, &err);
    }
    qk_kld_extra_free(&x);
    if (rc > 0)
        return qk_err_report(argv[0], &err);
    return -rc;
}
