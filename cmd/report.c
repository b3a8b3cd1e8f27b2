/* report.c - qk-report: many models against one base on the same text and
 * tasks (lib/eval/sweep.h evaluates, lib/report/sweep_report.h describes the
 * checkpoints and renders report.md, report.json, report.html and the SVG
 * plots); --plan prints the same work as shell commands, one per shard, and
 * --merge-dir builds the report from their parts. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "kernels/types.h"
#include "lib/core/cli.h"
#include "lib/eval/sweep.h"
#include "lib/report/sweep_report.h"

static const char usage_text[] =
    "usage: qk-report --base MODEL_B -f TEXT [options] [-o DIR] [-j N] MODEL...\n"
    "       qk-report --plan --parts DIR [--shard-chunks K] [options] MODEL...\n"
    "       qk-report --merge-dir DIR [options] [-o OUT] MODEL...\n"
    "\n"
    "Evaluate every MODEL (GGUF files and Hugging Face directories, any mix) against MODEL_B\n"
    "on the same text - KL divergence, perplexity ratio, same top token, as qk-kld --base\n"
    "computes them - and on the same task files, and report one row per model: format, scheme,\n"
    "bits per weight, size, PPL ratio, Mean KLD, 99% KLD, same top, task recovery; with plots.\n"
    "\n"
    "  --base MODEL_B          the reference model\n"
    "  -f, --file TEXT         evaluation text\n"
    "  -c, --ctx-size N        window size in tokens (default 512)\n"
    "      --chunks N          at most N windows\n"
    "  -b, --batch-size N      tokens per forward call (default: as qk-kld)\n"
    "      --kv-type f16|f32   KV cache type (default f16)\n"
    "      --hellaswag FILE    also score HellaSwag tasks (hellaswag_val_full.txt format)\n"
    "      --hellaswag-tasks N   N of them, drawn as llama-perplexity draws them (default 400)\n"
    "      --winogrande FILE   also score a Winogrande CSV\n"
    "      --winogrande-tasks N  N of them (default: all)\n"
    "      --multiple-choice FILE  also score llama.cpp's binary multiple-choice file\n"
    "      --multiple-choice-tasks N  N of them (default: all)\n"
    "  -o, --output DIR        write DIR/report.md, report.json, report.html and the plots\n"
    "                          (kld_bpw.svg, ppl_bpw.svg, kld_pct.svg) as one directory\n"
    "  -j, --jobs N            evaluate N models at once, the threads shared (default 1)\n"
    "  -t, --threads N         threads in all (0 = all CPUs; results do not depend on N)\n"
    "      --plan              print one shell command per shard instead (for GNU parallel or\n"
    "                          a Slurm array); each writes one part into --parts DIR\n"
    "      --parts DIR         where the plan's commands write their parts\n"
    "      --shard-chunks K    K windows per shard (default: all of a model's in one)\n"
    "      --merge-dir DIR     build the report from the parts a plan wrote into DIR\n"
    "      --json              report.json on stdout instead of report.md\n"
    "  -q, --quiet             no progress on stderr\n"
    "  -h, --help              this text\n"
    "\n"
    "Exit codes: 0 ok, 2 usage or input error, 3 I/O error.\n";

typedef struct {
    qk_sweep_opts so;
    const char *out, *parts, *merge_dir;
    bool plan, json;
    int shard_chunks;
} args;

static int add_task(args *a, int kind, const char *path, qk_err *err)
{
    for (int k = 0; k < a->so.n_tasks; k++)
        if (a->so.task[k].kind == kind)
            return qk_errf(err, QK_EINPUT, "--%s given twice", qk_task_kind_name(kind));
    a->so.task[a->so.n_tasks++] = (qk_sweep_taskfile){kind, path, 0};
    return 0;
}

static int set_count(args *a, int kind, const char *opt, const char *s, qk_err *err)
{
    int64_t v;
    if (qk_cli_int(opt, s, 1, 1 << 30, &v, err))
        return err->code;
    for (int k = 0; k < a->so.n_tasks; k++)
        if (a->so.task[k].kind == kind) {
            a->so.task[k].n_tasks = (size_t)v;
            return 0;
        }
    return qk_errf(err, QK_EINPUT, "%s needs --%s FILE before it", opt, qk_task_kind_name(kind));
}

/* The rows from the evaluation and each checkpoint's description. */
static int build_report(const args *a, char *const *models, const qk_sweep_result *r, qk_rep *rep,
                        qk_err *err)
{
    memset(rep, 0, sizeof *rep);
    int rc = qk_rep_describe(a->so.base, &rep->base_d, err);
    if (rc)
        return rc;
    rep->rows = calloc((size_t)r->n_models, sizeof *rep->rows);
    if (!rep->rows)
        return qk_errf(err, QK_EIO, "out of memory");
    rep->base = a->so.base;
    rep->text = a->so.text;
    rep->n_ctx = r->n_ctx;
    rep->n_chunk = r->n_chunk;
    rep->tokens = r->n_models ? r->m[0].tokens : 0;
    rep->base_ppl = r->n_models ? r->m[0].kld.ppl_base.v : NAN;
    rep->base_ppl_err = r->n_models ? r->m[0].kld.ppl_base.e : NAN;
    rep->n_tasks = r->n_tasks;
    for (int t = 0; t < r->n_tasks; t++) {
        rep->task[t].title = qk_task_kind_title(a->so.task[t].kind);
        rep->task[t].path = a->so.task[t].path;
        rep->task[t].n = r->base_task[t].n;
        rep->task[t].n_file = r->task_file_n[t];
        rep->task[t].pct = r->base_task[t].pct;
        rep->task[t].lo = r->base_task[t].lo;
        rep->task[t].hi = r->base_task[t].hi;
    }
    rep->n_rows = r->n_models;
    for (int i = 0; i < r->n_models; i++) {
        qk_rep_row *w = &rep->rows[i];
        const qk_kld_summary *s = &r->m[i].kld;
        if ((rc = qk_rep_describe(models[i], &w->d, err)))
            return rc;
        w->name = models[i];
        w->ppl = s->ppl.v, w->ppl_err = s->ppl.e;
        w->ppl_ratio = s->ratio.v, w->ppl_ratio_err = s->ratio.e;
        w->kld = s->kld.v, w->kld_err = s->kld.e;
        memcpy(w->kld_pct, s->kld_pct, sizeof w->kld_pct);
        w->same_top = s->same_top.v, w->same_top_err = s->same_top.e;
        w->kld_lo = w->kld_hi = NAN;
        for (int t = 0; t < r->n_tasks; t++) {
            const qk_task_cmp *c = &r->m[i].task[t].cmp;
            w->task[t] = (qk_rep_task){c->score.pct, c->score.lo, c->score.hi, c->recovery, c->rec_lo,
                                       c->rec_hi, c->agree.pct, c->n_disagree};
        }
    }
    return 0;
}

static int report(const args *a, char *const *models, int n, qk_err *err)
{
    qk_sweep_result r;
    int rc = a->merge_dir ? qk_sweep_merge(&a->so, models, n, a->merge_dir, &r, err)
                          : qk_sweep_run(&a->so, models, n, &r, err);
    if (rc)
        return rc;
    qk_rep rep;
    rc = build_report(a, models, &r, &rep, err);
    if (!rc && a->out)
        rc = qk_rep_write_dir(a->out, &rep, err);
    if (!rc) {
        qk_sbuf b = {0};
        if (a->json)
            qk_rep_json(&b, &rep);
        else
            qk_rep_markdown(&b, &rep);
        if (b.bad)
            rc = qk_errf(err, QK_EIO, "out of memory");
        else if (b.n && (fwrite(b.s, 1, b.n, stdout) != b.n || fflush(stdout)))
            rc = qk_errf(err, QK_EIO, "cannot write the report to stdout");
        free(b.s);
    }
    free(rep.rows);
    qk_sweep_result_free(&r);
    return rc;
}

int cmd_report(int argc, char **argv)
{
    enum { O_BASE = 256, O_CHUNKS, O_KV, O_HS, O_HS_N, O_WG, O_WG_N, O_MC, O_MC_N, O_PLAN, O_PARTS,
           O_SHARD, O_MERGE, O_JSON };
    static const struct option opts[] = {
        {"base", required_argument, 0, O_BASE}, {"file", required_argument, 0, 'f'},
        {"ctx-size", required_argument, 0, 'c'}, {"chunks", required_argument, 0, O_CHUNKS},
        {"batch-size", required_argument, 0, 'b'}, {"kv-type", required_argument, 0, O_KV},
        {"hellaswag", required_argument, 0, O_HS}, {"hellaswag-tasks", required_argument, 0, O_HS_N},
        {"winogrande", required_argument, 0, O_WG}, {"winogrande-tasks", required_argument, 0, O_WG_N},
        {"multiple-choice", required_argument, 0, O_MC},
        {"multiple-choice-tasks", required_argument, 0, O_MC_N},
        {"output", required_argument, 0, 'o'}, {"jobs", required_argument, 0, 'j'},
        {"threads", required_argument, 0, 't'}, {"plan", no_argument, 0, O_PLAN},
        {"parts", required_argument, 0, O_PARTS}, {"shard-chunks", required_argument, 0, O_SHARD},
        {"merge-dir", required_argument, 0, O_MERGE}, {"json", no_argument, 0, O_JSON},
        {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    args a = {.so = {.n_ctx = 512, .threads = 1, .jobs = 1, .kv_type = QK_F16}};
    qk_err err = {0};
    int64_t v;
    int c, rc = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:c:b:o:j:t:qh", opts, NULL)) != -1) {
        switch (c) {
        case O_BASE: a.so.base = optarg; break;
        case 'f': a.so.text = optarg; break;
        case 'c':
            if (!(rc = qk_cli_int("-c", optarg, 4, 1 << 24, &v, &err)))
                a.so.n_ctx = (int)v;
            break;
        case O_CHUNKS:
            if (!(rc = qk_cli_int("--chunks", optarg, 1, 1 << 28, &v, &err)))
                a.so.n_chunks = (int)v;
            break;
        case 'b':
            if (!(rc = qk_cli_int("-b", optarg, 1, 1 << 20, &v, &err)))
                a.so.n_batch = (int)v;
            break;
        case O_KV:
            if (!strcmp(optarg, "f16") || !strcmp(optarg, "f32"))
                a.so.kv_type = optarg[1] == '1' ? QK_F16 : QK_F32;
            else
                rc = qk_errf(&err, QK_EINPUT, "--kv-type '%s': expected f16 or f32", optarg);
            break;
        case O_HS: rc = add_task(&a, QK_TASK_HELLASWAG, optarg, &err); break;
        case O_WG: rc = add_task(&a, QK_TASK_WINOGRANDE, optarg, &err); break;
        case O_MC: rc = add_task(&a, QK_TASK_MC, optarg, &err); break;
        case O_HS_N: rc = set_count(&a, QK_TASK_HELLASWAG, "--hellaswag-tasks", optarg, &err); break;
        case O_WG_N: rc = set_count(&a, QK_TASK_WINOGRANDE, "--winogrande-tasks", optarg, &err); break;
        case O_MC_N: rc = set_count(&a, QK_TASK_MC, "--multiple-choice-tasks", optarg, &err); break;
        case 'o': a.out = optarg; break;
        case 'j':
            if (!(rc = qk_cli_int("-j", optarg, 1, 64, &v, &err)))
                a.so.jobs = (int)v;
            break;
        case 't': rc = qk_cli_threads(optarg, &a.so.threads, &err); break;
        case O_PLAN: a.plan = true; break;
        case O_PARTS: a.parts = optarg; break;
        case O_SHARD:
            if (!(rc = qk_cli_int("--shard-chunks", optarg, 1, 1 << 28, &v, &err)))
                a.shard_chunks = (int)v;
            break;
        case O_MERGE: a.merge_dir = optarg; break;
        case O_JSON: a.json = true; break;
        case 'q': a.so.quiet = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return qk_cli_bad_option(argv[0], argv, optind);
        }
        if (rc)
            return qk_err_report(argv[0], &err);
    }
    const char *why = !a.so.base                       ? "need --base MODEL_B"
                      : !a.so.text                     ? "need -f TEXT"
                      : optind >= argc                 ? "need at least one MODEL"
                      : a.plan && a.merge_dir          ? "--plan and --merge-dir do not go together"
                      : a.plan && !a.parts             ? "--plan needs --parts DIR"
                      : !a.plan && (a.parts || a.shard_chunks) ? "--parts and --shard-chunks go with --plan"
                      : a.plan && (a.out || a.json)    ? "--plan prints commands: no -o or --json"
                                                       : NULL;
    if (why) {
        fprintf(stderr, "%s: %s; see --help\n", argv[0], why);
        return 2;
    }
    if (a.plan) {
        char exe[PATH_MAX];
        const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) {
            fprintf(stderr, "%s: cannot find the qk binary (/proc/self/exe)\n", argv[0]);
            return 3;
        }
        exe[n] = 0;
        rc = qk_sweep_plan(&a.so, argv + optind, argc - optind, a.parts, a.shard_chunks, exe, stdout,
                           &err);
    } else {
        rc = report(&a, argv + optind, argc - optind, &err);
    }
    return rc ? qk_err_report(argv[0], &err) : 0;
}
