/* imatrix.c - qk-imatrix: importance matrices as llama-imatrix makes them
 * (the same options, chunks, counts and file formats), collected through
 * the engine's product hook (lib/quant/imatrix_run.h) and saved by
 * lib/quant/imatrix_stats.h; the perplexity of the chunks is scored as
 * llama-imatrix prints it (lib/eval/ppl.h, lib/eval/kldstats.h). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/commands.h"
#include "formats/gguf.h"
#include "lib/core/cli.h"
#include "lib/core/files.h"
#include "lib/core/json.h"
#include "lib/core/mapfile.h"
#include "lib/core/progress.h"
#include "lib/core/threads.h"
#include "lib/engine/model.h"
#include "lib/engine/tokenizer.h"
#include "lib/eval/kldstats.h"
#include "lib/eval/ppl.h"
#include "lib/quant/imatrix.h"
#include "lib/quant/imatrix_run.h"
#include "lib/quant/imatrix_stats.h"

static const char usage_text[] =
    "usage: qk-imatrix -m MODEL -f TEXT [-o imatrix.gguf] [-c 512] [--chunks N] [-b N]\n"
    "                  [--process-output] [--output-frequency N] [--in-file F ...]\n"
    "                  [--output-format gguf|dat] [-t N] [--json]\n"
    "       qk-imatrix --in-file F [--in-file F ...] [-o OUT]     (combine only)\n"
    "\n"
    "Collect an importance matrix as llama-imatrix (llama.cpp d32676d) does: the text is cut\n"
    "into chunks of N_CTX tokens (BOS first), and for every weight of the blocks the squares\n"
    "of its product inputs are summed per column.  Products of fewer than 16 rows of llama's\n"
    "micro-batches are ignored; the perplexity of each chunk's second half is printed.\n"
    "Mixture-of-experts models: each expert tensor gets per-expert sums and counts from\n"
    "the rows routed to each expert, in every micro-batch (llama-imatrix's MUL_MAT_ID rule).\n"
    "The file is llama-imatrix's GGUF imatrix (or legacy .dat) that qk-quant and\n"
    "llama-quantize read with --imatrix.  Its bytes do not depend on -t.\n"
    "\n"
    "  -m, --model MODEL          the model (GGUF)\n"
    "  -f, --file TEXT            calibration text\n"
    "  -o, --output-file FILE     output (default imatrix.gguf; also --output)\n"
    "  -c, --ctx-size N           chunk size in tokens (default 512)\n"
    "      --chunks N             use N chunks (default: all the text has)\n"
    "      --chunk N              skip the first N chunks (also --from-chunk)\n"
    "  -b, --batch-size N         llama-imatrix's batch size (default 2048): decides which\n"
    "                             products count (at least 16 rows per 512-token micro-batch)\n"
    "      --process-output       also collect output.weight\n"
    "      --no-ppl               do not compute the perplexity (--ppl: do, the default)\n"
    "      --output-frequency N   save the file every N chunks (default 10)\n"
    "      --save-frequency N     also save OUT.at_N every N chunks (default 0: never)\n"
    "      --in-file F            add the sums and counts of an existing imatrix (repeatable)\n"
    "      --output-format FMT    gguf (default) or dat (the legacy format)\n"
    "      --parse-special        parse special tokens in the text\n"
    "  -t, --threads N            threads (0 = all CPUs, the default)\n"
    "      --json                 one JSON report on stdout instead of the text (schema in\n"
    "                             qk-imatrix(1))\n"
    "  -q, --quiet                no progress or timing on stderr\n"
    "  -h, --help                 this text\n"
    "\n"
    "Not implemented: llama-imatrix's --show-statistics.\n"
    "Exit codes: 0 ok, 2 usage or input error, 3 I/O error.\n";

typedef struct {
    const char *prog, *model, *text, *out;
    const char **in_files;
    int n_in;
    int n_ctx, n_chunks, i_chunk, n_batch, out_freq, save_freq, threads;
    int format; /* llama's imat_dat: -1 gguf given, 0 default, 1 dat */
    bool process_output, ppl, parse_special, json, quiet;
} args;

/* ---- perplexity of the chunks, as llama-imatrix prints it -------------------------- */

typedef struct {
    const args *a;
    const int32_t *tokens;
    int n_ctx, n_vocab;
    qk_kld_acc acc;
} ppl_ctx;

static int on_logits(void *ud, int chunk, int pos0, int n, const float *logits, qk_err *err)
{
    ppl_ctx *p = ud;
    const int32_t *tok = p->tokens + (size_t)chunk * p->n_ctx;
    qk_kld_tok *rec = malloc((size_t)(n > 0 ? n : 1) * sizeof *rec);
    if (!rec)
        return qk_errf(err, QK_EIO, "out of memory (%d scored tokens)", n);
    /* each token's value on the threads, then added in order */
    qk_ppl_nll_rows(logits, p->n_vocab, tok + pos0 + 1, n, rec, p->a->threads);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = qk_kld_acc_add(&p->acc, &rec[i], err) ? err->code : 0;
    free(rec);
    return rc;
}

static int on_chunk(void *ud, int chunk, qk_err *err)
{
    ppl_ctx *p = ud;
    if (!p->a->json && p->a->ppl)
        qk_kld_print_chunk(stdout, &p->acc, chunk + 1);
    return 0;
}

/* ---- report -------------------------------------------------------------------------- */

static void report_json(const args *a, const qk_imx *s, int n_chunk, size_t n_tokens, const ppl_ctx *pc)
{
    qk_json j;
    qk_json_init(&j, stdout, true);
    qk_json_obj(&j);
    qk_json_key(&j, "model"), qk_json_str(&j, a->model);
    qk_json_key(&j, "text"), qk_json_str(&j, a->text);
    qk_json_key(&j, "output"), qk_json_str(&j, a->out);
    qk_json_key(&j, "format"), qk_json_str(&j, a->format > 0 ? "dat" : "gguf");
    qk_json_key(&j, "in_files");
    qk_json_arr(&j);
    for (int i = 0; i < a->n_in; i++)
        qk_json_str(&j, a->in_files[i]);
    qk_json_end_arr(&j);
    qk_json_key(&j, "n_ctx"), qk_json_int(&j, a->n_ctx);
    qk_json_key(&j, "tokens"), qk_json_uint(&j, n_tokens);
    qk_json_key(&j, "chunks");
    qk_json_obj(&j);
    qk_json_key(&j, "skipped"), qk_json_int(&j, a->text ? a->i_chunk : 0);
    qk_json_key(&j, "processed"), qk_json_int(&j, n_chunk);
    qk_json_end_obj(&j);
    qk_json_key(&j, "chunk_count"), qk_json_int(&j, s->last_chunk);
    qk_json_key(&j, "chunk_size"), qk_json_int(&j, s->chunk_size);
    qk_json_key(&j, "entries"), qk_json_uint(&j, s->n);
    qk_json_key(&j, "ppl");
    double ppl, e;
    if (pc && a->ppl && pc->acc.count > 0) {
        const bool ok = qk_kld_final_ppl(&pc->acc, &ppl, &e);
        qk_json_obj(&j);
        qk_json_key(&j, "value"), qk_json_f64(&j, ppl);
        qk_json_key(&j, "error");
        if (ok)
            qk_json_f64(&j, e);
        else
            qk_json_null(&j);
        qk_json_key(&j, "tokens_scored"), qk_json_uint(&j, pc->acc.count);
        qk_json_end_obj(&j);
    } else {
        qk_json_null(&j);
    }
    qk_json_end_obj(&j);
    qk_json_done(&j);
}

/* ---- the run ------------------------------------------------------------------------- */

static int same_as_input(const args *a, qk_err *err)
{
    if (a->model && qk_same_file(a->model, a->out))
        return qk_errf(err, QK_EINPUT, "%s: output is the same file as the model", a->out);
    if (a->text && qk_same_file(a->text, a->out))
        return qk_errf(err, QK_EINPUT, "%s: output is the same file as the text", a->out);
    for (int i = 0; i < a->n_in; i++)
        if (qk_same_file(a->in_files[i], a->out))
            return qk_errf(err, QK_EINPUT, "%s: output is the same file as --in-file %s", a->out,
                           a->in_files[i]);
    return 0;
}

static int combine(const args *a, qk_imx *s, qk_err *err)
{
    for (int i = 0; i < a->n_in; i++) {
        qk_imatrix *m;
        int rc = qk_imatrix_read(&m, a->in_files[i], err);
        if (!rc)
            rc = qk_imx_combine(s, m, a->in_files[i], err);
        qk_imatrix_free(m);
        if (rc)
            return rc;
    }
    return 0;
}

static int run(args *a, qk_err *err)
{
    qk_imx s;
    qk_imx_init(&s, a->n_ctx);
    qk_gguf *g = NULL;
    qk_model m = {0};
    bool have_model = false;
    qk_tokenizer *tok = NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0, n_text = 0;
    ppl_ctx pc = {.a = a};
    qk_kld_acc_init(&pc.acc, QK_KLD_MODE_PPL, false);
    int n_chunk = 0, rc;
    if ((rc = same_as_input(a, err)) || (rc = combine(a, &s, err)))
        goto done;
    if (!a->text) { /* combine only */
        rc = qk_imx_save(&s, a->out, a->format > 0, NULL, err);
        goto done;
    }
    if ((rc = qk_gguf_open(&g, a->model, 0, err)) || (rc = qk_model_load(&m, g, err)))
        goto done;
    have_model = true;
    if (!(tok = qk_tok_from_gguf(g, err))) {
        rc = err->code ? err->code : QK_EINPUT;
        goto done;
    }
    if ((rc = qk_read_file(a->text, false, &text, &n_text, err)))
        goto done;
    if (n_text > 0 && text[n_text - 1] == '\n') /* llama's -f drops one trailing newline */
        n_text--;
    if ((rc = qk_tok_encode(tok, text, n_text, true, a->parse_special, &ids, &n_ids, err)))
        goto done;
    const size_t c = (size_t)a->n_ctx;
    if (a->i_chunk > 0 && (size_t)(a->i_chunk + 2) * c >= n_ids) {
        rc = qk_errf(err, QK_EINPUT, "%s: %zu tokens: not enough left after skipping %d chunks of %d",
                     a->text, n_ids, a->i_chunk, a->n_ctx);
        goto done;
    }
    const int32_t *tokens = ids + (size_t)a->i_chunk * c;
    const size_t n_tok = n_ids - (size_t)a->i_chunk * c;
    if (n_tok < 2 * c) {
        rc = qk_errf(err, QK_EINPUT, "%s: %zu tokens: at least %zu are needed for chunks of %d", a->text,
                     n_tok, 2 * c, a->n_ctx);
        goto done;
    }
    n_chunk = (int)(n_tok / c);
    if (a->n_chunks > 0) {
        if (a->n_chunks > n_chunk) {
            rc = qk_errf(err, QK_EINPUT, "%s: --chunks %d: the text has only %d chunks of %d tokens",
                         a->text, a->n_chunks, n_chunk, a->n_ctx);
            goto done;
        }
        n_chunk = a->n_chunks;
    }
    pc.tokens = tokens, pc.n_ctx = a->n_ctx, pc.n_vocab = m.hp.n_vocab;
    qk_progress prog;
    qk_progress_init(&prog, "qk-imatrix", (uint64_t)n_chunk, a->quiet);
    qk_imatrix_job job = {
        .model = &m, .tokens = tokens, .n_ctx = a->n_ctx, .n_chunk = n_chunk, .n_batch = a->n_batch,
        .bos = qk_tok_bos(tok), .add_bos = qk_tok_add_bos(tok), .process_output = a->process_output,
        .want_logits = a->ppl, .nthreads = a->threads, .stats = &s, .on_logits = on_logits,
        .on_chunk = on_chunk, .ud = &pc, .out_path = a->out, .legacy = a->format > 0,
        .prompt_file = a->text, .out_freq = a->out_freq, .save_freq = a->save_freq,
        .progress = prog.on ? &prog : NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = qk_imatrix_run(&job, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (prog.on)
        qk_progress_end(&prog);
    if (!rc)
        rc = qk_imx_save(&s, a->out, a->format > 0, a->text, err);
    if (rc)
        goto done;
    if (!a->json && a->ppl) {
        double ppl, e;
        if (qk_kld_final_ppl(&pc.acc, &ppl, &e))
            printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, e);
        else
            printf("\nUnexpected negative standard deviation of log(prob)\n");
    }
    if (!a->quiet) {
        const double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        fprintf(stderr, "%s: %d chunks, %llu tokens in %.2f s (%.1f tokens/s)\n", a->prog, n_chunk,
                (unsigned long long)job.tokens_evaluated, sec,
                sec > 0 ? (double)job.tokens_evaluated / sec : 0.0);
    }
done:
    if (!rc && a->json)
        report_json(a, &s, n_chunk, n_ids, a->text ? &pc : NULL);
    else if (!rc && !a->quiet)
        fprintf(stderr, "%s: %zu entries, %d chunks of %d, saved to %s\n", a->prog, s.n, (int)s.last_chunk,
                s.chunk_size, a->out);
    qk_kld_acc_free(&pc.acc);
    qk_imx_free(&s);
    qk_tok_free(tok);
    if (have_model)
        qk_model_free(&m);
    qk_gguf_close(g);
    free(text);
    free(ids);
    return rc;
}

/* ---- options ------------------------------------------------------------------------- */

int cmd_imatrix(int argc, char **argv)
{
    enum { O_CHUNKS = 256, O_CHUNK, O_POUT, O_PPL, O_NOPPL, O_OFREQ, O_SFREQ, O_IN, O_FMT, O_SPECIAL,
           O_JSON };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"output-file", required_argument, 0, 'o'}, {"output", required_argument, 0, 'o'},
        {"ctx-size", required_argument, 0, 'c'}, {"chunks", required_argument, 0, O_CHUNKS},
        {"chunk", required_argument, 0, O_CHUNK}, {"from-chunk", required_argument, 0, O_CHUNK},
        {"batch-size", required_argument, 0, 'b'}, {"process-output", no_argument, 0, O_POUT},
        {"ppl", no_argument, 0, O_PPL}, {"no-ppl", no_argument, 0, O_NOPPL},
        {"output-frequency", required_argument, 0, O_OFREQ},
        {"save-frequency", required_argument, 0, O_SFREQ}, {"in-file", required_argument, 0, O_IN},
        {"output-format", required_argument, 0, O_FMT}, {"parse-special", no_argument, 0, O_SPECIAL},
        {"threads", required_argument, 0, 't'}, {"json", no_argument, 0, O_JSON},
        {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    args a = {.prog = argv[0], .out = "imatrix.gguf", .n_ctx = 512, .n_batch = 2048, .out_freq = 10,
              .threads = qk_cpu_count(), .ppl = true};
    qk_err err = {0};
    int64_t v;
    int c, rc = 0;
    optind = 1;
    opterr = 0;
    while (!rc && (c = getopt_long(argc, argv, "m:f:o:c:b:t:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': a.model = optarg; break;
        case 'f': a.text = optarg; break;
        case 'o': a.out = optarg; break;
        case 'c':
            if (!(rc = qk_cli_int("-c", optarg, 1, 1 << 24, &v, &err)))
                a.n_ctx = (int)v;
            break;
        case O_CHUNKS:
            if (!(rc = qk_cli_int("--chunks", optarg, 1, 1 << 28, &v, &err)))
                a.n_chunks = (int)v;
            break;
        case O_CHUNK:
            if (!(rc = qk_cli_int("--chunk", optarg, 0, 1 << 28, &v, &err)))
                a.i_chunk = (int)v;
            break;
        case 'b':
            if (!(rc = qk_cli_int("-b", optarg, 1, 1 << 24, &v, &err)))
                a.n_batch = (int)v;
            break;
        case O_POUT: a.process_output = true; break;
        case O_PPL: a.ppl = true; break;
        case O_NOPPL: a.ppl = false; break;
        case O_OFREQ:
            if (!(rc = qk_cli_int("--output-frequency", optarg, 1, 1 << 28, &v, &err)))
                a.out_freq = (int)v;
            break;
        case O_SFREQ:
            if (!(rc = qk_cli_int("--save-frequency", optarg, 0, 1 << 28, &v, &err)))
                a.save_freq = (int)v;
            break;
        case O_IN: {
            const char **p = realloc(a.in_files, (size_t)(a.n_in + 1) * sizeof *p);
            if (!p) {
                rc = qk_errf(&err, QK_EIO, "out of memory");
                break;
            }
            a.in_files = p;
            p[a.n_in++] = optarg;
            break;
        }
        case O_FMT:
            if (!strcmp(optarg, "gguf"))
                a.format = -1;
            else if (!strcmp(optarg, "dat"))
                a.format = 1;
            else
                rc = qk_errf(&err, QK_EINPUT, "--output-format '%s': expected gguf or dat", optarg);
            break;
        case O_SPECIAL: a.parse_special = true; break;
        case 't': rc = qk_cli_threads(optarg, &a.threads, &err); break;
        case O_JSON: a.json = true; break;
        case 'q': a.quiet = true; break;
        case 'h': fputs(usage_text, stdout); free(a.in_files); return 0;
        default: free(a.in_files); return qk_cli_bad_option(argv[0], argv, optind);
        }
    }
    if (!rc && optind < argc)
        rc = qk_errf(&err, QK_EINPUT, "unexpected argument '%s'; see --help", argv[optind]);
    if (!rc && a.text && !a.model)
        rc = qk_errf(&err, QK_EINPUT, "need -m MODEL with -f TEXT; see --help");
    if (!rc && !a.text && a.n_in == 0)
        rc = qk_errf(&err, QK_EINPUT, "need -m MODEL -f TEXT, or --in-file files to combine; see --help");
    if (!rc && a.n_batch > a.n_ctx && a.n_batch % a.n_ctx)
        rc = qk_errf(&err, QK_EINPUT, "-b %d: a batch larger than the chunk (-c %d) must be a multiple of it",
                     a.n_batch, a.n_ctx);
    const size_t ol = strlen(a.out);
    if (!rc && a.format == 0 && !a.quiet && (ol < 5 || strcmp(a.out + ol - 5, ".gguf")))
        fprintf(stderr, "%s: warning: %s is written as GGUF; --output-format dat gives the legacy format\n",
                argv[0], a.out);
    if (!rc)
        rc = run(&a, &err);
    free(a.in_files);
    return rc ? qk_err_report(argv[0], &err) : 0;
}
