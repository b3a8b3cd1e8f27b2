/* tasks_cmd.c - qk-kld --hellaswag / --winogrande / --multiple-choice: options,
 * the run, llama-perplexity's printed lines, the JSON report and the gates;
 * see tasks_cmd.h. */
#include "lib/eval/tasks_cmd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/cli.h"
#include "lib/core/files.h"
#include "lib/core/mapfile.h"
#include "lib/core/outfile.h"
#include "lib/core/progress.h"

static int pct_arg(const char *opt, const char *s, double *v, bool *has, qk_err *err)
{
    char buf[64];
    const size_t n = strlen(s);
    if (n > 0 && n < sizeof buf && s[n - 1] == '%') { /* "99.5%" */
        memcpy(buf, s, n - 1);
        buf[n - 1] = 0;
        s = buf;
    }
    if (qk_cli_double(opt, s, v, err))
        return -1;
    *has = true;
    return 1;
}

static int set_kind(qk_tasks_opts *o, int kind, qk_err *err)
{
    if (o->kind && o->kind != kind) {
        qk_errf(err, QK_EINPUT, "--%s and --%s: one task kind per run", qk_task_kind_name(o->kind),
                qk_task_kind_name(kind));
        return -1;
    }
    o->kind = kind;
    return 1;
}

static int count_arg(const char *opt, const char *s, size_t *out, qk_err *err)
{
    int64_t v;
    if (qk_cli_int(opt, s, 0, 1 << 30, &v, err))
        return -1;
    *out = (size_t)v;
    return 1;
}

int qk_tasks_opt(qk_tasks_opts *o, int c, const char *arg, qk_err *err)
{
    switch (c) {
    case QK_TASKS_O_HS: return set_kind(o, QK_TASK_HELLASWAG, err);
    case QK_TASKS_O_WG: return set_kind(o, QK_TASK_WINOGRANDE, err);
    case QK_TASKS_O_MC: return set_kind(o, QK_TASK_MC, err);
    case QK_TASKS_O_HS_N: {
        int r = count_arg("--hellaswag-tasks", arg, &o->n_tasks[QK_TASK_HELLASWAG], err);
        if (r > 0 && o->n_tasks[QK_TASK_HELLASWAG] == 0) {
            qk_errf(err, QK_EINPUT, "--hellaswag-tasks: at least 1");
            return -1;
        }
        return r;
    }
    case QK_TASKS_O_WG_N: return count_arg("--winogrande-tasks", arg, &o->n_tasks[QK_TASK_WINOGRANDE], err);
    case QK_TASKS_O_MC_N: return count_arg("--multiple-choice-tasks", arg, &o->n_tasks[QK_TASK_MC], err);
    case QK_TASKS_O_BF: o->bin_file = arg; return 1;
    case QK_TASKS_O_MIN_REC: return pct_arg("--min-recovery", arg, &o->min_recovery, &o->has_min_recovery, err);
    case QK_TASKS_O_MIN_AGREE: return pct_arg("--min-agreement", arg, &o->min_agreement, &o->has_min_agreement, err);
    case QK_TASKS_O_MIN_SCORE: return pct_arg("--min-score", arg, &o->min_score, &o->has_min_score, err);
    default: return 0;
    }
}

int qk_tasks_check(const qk_tasks_opts *o, const char *text_file, bool has_base, qk_err *err)
{
    if (!o->kind) {
        if (o->has_min_recovery || o->has_min_agreement || o->has_min_score || o->bin_file ||
            o->n_tasks[1] || o->n_tasks[2] || o->n_tasks[3])
            return qk_errf(err, QK_EINPUT, "--min-score, --min-recovery, --min-agreement, -bf and "
                           "--*-tasks need --hellaswag, --winogrande or --multiple-choice");
        return 0;
    }
    if ((o->has_min_recovery || o->has_min_agreement) && !has_base)
        return qk_errf(err, QK_EINPUT, "--min-recovery and --min-agreement need --base MODEL_B");
    if (!!text_file == !!o->bin_file)
        return qk_errf(err, QK_EINPUT, "--%s reads its tasks from -f FILE or -bf FILE (one of them)",
                       qk_task_kind_name(o->kind));
    return 0;
}

void qk_tasks_fix_argv(int argc, char **argv)
{
    static char bf[] = "--binary-file";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "-bf"))
            argv[i] = bf;
    }
}

int qk_tasks_read(const qk_tasks_opts *o, const char *text_file, char **buf, size_t *n,
                  const char **path, qk_err *err)
{
    *path = o->bin_file ? o->bin_file : text_file;
    int rc = qk_read_file(*path, false, buf, n, err);
    if (!rc && !o->bin_file && *n > 0 && (*buf)[*n - 1] == '\n')
        (*buf)[--*n] = 0; /* common/arg.cpp, -f: params.prompt.pop_back() */
    return rc;
}

/* ---- the evaluation ------------------------------------------------------------ */

int qk_tasks_eval(int kind, const char *buf, size_t n, size_t n_tasks, const char *path,
                  const qk_model *model, const qk_model *base, const qk_tokenizer *tok, int n_ctx,
                  int n_batch, int threads, int kv_type, bool quiet, qk_taskset *ts,
                  qk_task_answers *a, qk_task_answers *b, qk_err *err)
{
    qk_task_toks tt = {0};
    qk_task_scorer *sa = NULL, *sb = NULL;
    memset(a, 0, sizeof *a);
    if (b)
        memset(b, 0, sizeof *b);
    if (kind == QK_TASK_HELLASWAG && n_tasks == 0)
        n_tasks = 400; /* common_params::hellaswag_tasks */
    int rc = qk_tasks_parse(ts, kind, buf, n, n_tasks, path, err);
    if (rc)
        return rc;
    if ((rc = qk_tasks_tokenize(ts, tok, n_ctx, path, &tt, err)) ||
        (rc = qk_task_answers_init(a, ts, err)) ||
        (b && base && (rc = qk_task_answers_init(b, ts, err))) ||
        (rc = qk_task_scorer_new(&sa, model, &tt, kv_type, n_batch, threads, err)) ||
        (base && (rc = qk_task_scorer_new(&sb, base, &tt, kv_type, n_batch, threads, err))))
        goto done;
    qk_progress prog;
    qk_progress_init(&prog, qk_task_kind_name(kind), (uint64_t)ts->n, quiet);
    for (int i = 0; i < ts->n; i++) {
        if ((rc = qk_task_score(sa, ts, &tt, i, a, err)) ||
            (sb && (rc = qk_task_score(sb, ts, &tt, i, b, err)))) {
            if (rc == QK_EINPUT && !strchr(err->msg, ':')) {
                qk_err e2 = *err;
                qk_errf(err, QK_EINPUT, "%s: %s", path, e2.msg);
            }
            break;
        }
        qk_progress_add(&prog, 1);
    }
    qk_progress_end(&prog);
done:
    qk_task_scorer_free(sa);
    qk_task_scorer_free(sb);
    qk_task_toks_free(&tt);
    if (rc) {
        qk_taskset_free(ts);
        qk_task_answers_free(a);
        if (b)
            qk_task_answers_free(b);
    }
    return rc;
}

/* ---- llama-perplexity's lines ---------------------------------------------------- */

void qk_tasks_print_llama(FILE *f, int kind, const qk_taskset *ts, const qk_task_answers *a)
{
    int n_correct = 0;
    if (kind == QK_TASK_HELLASWAG)
        fputs("\ntask\tacc_norm\t95% confidence interval\n", f);
    else if (kind == QK_TASK_MC)
        fputs("\ntask\tacc_norm\n", f);
    for (int i = 0; i < ts->n; i++) {
        n_correct += a->correct[i];
        const int n_done = i + 1;
        if (kind == QK_TASK_HELLASWAG) {
            qk_task_prop p;
            qk_task_prop_make(&p, n_correct, n_done);
            fprintf(f, "%d\t%3.8lf%%\t[%3.4lf%%, %3.4lf%%]\n", n_done, p.pct, p.lo, p.hi);
        } else if (kind == QK_TASK_WINOGRANDE) {
            int answer = ts->t[i].correct[0] ? 1 : 2;
            fprintf(f, "%d\t%.4lf\t%10.6f  %10.6f  %d  %d\n", n_done, 100.0 * n_correct / n_done,
                    (float)a->score[a->off[i]], (float)a->score[a->off[i] + 1], a->pick[i] + 1, answer);
        } else {
            fprintf(f, "%d\t%.8lf\n", n_done, 100. * n_correct / n_done);
        }
    }
    fputc('\n', f);
    const int n_done = ts->n;
    if (kind == QK_TASK_WINOGRANDE && n_done > 1) {
        /* float p, sigma = 100.f * sqrt(double) */
        const float p = (float)n_correct / (float)n_done;
        const float sigma = (float)(100.0 * sqrt((double)(p * (1 - p) / (float)(n_done - 1))));
        fprintf(f, "Final Winogrande score(%d tasks): %.4lf +/- %.4lf\n", n_done, 100 * p, sigma);
    } else if (kind == QK_TASK_MC && n_done > 1) {
        int n_answers = 0;
        for (int i = 0; i < ts->n; i++)
            n_answers += ts->t[i].n_cand;
        float p = (float)n_correct / (float)n_done;
        float sigma = sqrtf(p * (1 - p) / (float)(n_done - 1));
        fprintf(f, "Final result: %.4f +/- %.4f\n", 100.f * p, 100.f * sigma);
        p = (float)n_done / (float)n_answers;
        sigma = sqrtf(p * (1 - p) / (float)(n_done - 1));
        fprintf(f, "Random chance: %.4f +/- %.4f\n", 100.f * p, 100.f * sigma);
    }
}

static void print_summary(FILE *f, const qk_tasks_job *j, int kind, const qk_taskset *ts,
                          const qk_task_cmp *c)
{
    fprintf(f, "%s: %d of %d tasks: %.4f%% [%.4f%%, %.4f%%] (95%% interval)\n",
            qk_task_kind_title(kind), c->score.k, ts->n, c->score.pct, c->score.lo, c->score.hi);
    if (!j->base)
        return;
    fprintf(f, "base %s: %d of %d tasks: %.4f%% [%.4f%%, %.4f%%]\n", j->base_path, c->base.k, ts->n,
            c->base.pct, c->base.lo, c->base.hi);
    if (isnan(c->recovery))
        fprintf(f, "recovery: undefined (the base answers no task right)\n");
    else
        fprintf(f, "recovery: %.4f%% [%.4f%%, %.4f%%] (score / base score, 95%% interval)\n",
                c->recovery, c->rec_lo, c->rec_hi);
    fprintf(f, "agreement: %.4f%% [%.4f%%, %.4f%%] (same answer; %d tasks differ)\n", c->agree.pct,
            c->agree.lo, c->agree.hi, c->n_disagree);
}

/* ---- JSON ------------------------------------------------------------------------ */

static void json_prop(qk_json *js, const char *key, const qk_task_prop *p, const char *count_key)
{
    qk_json_key(js, key);
    qk_json_obj(js);
    qk_json_key(js, "pct"), qk_json_f64(js, p->pct);
    qk_json_key(js, count_key), qk_json_int(js, p->k);
    qk_json_key(js, "lo95"), qk_json_f64(js, p->lo);
    qk_json_key(js, "hi95"), qk_json_f64(js, p->hi);
    qk_json_key(js, "sigma"), qk_json_f64(js, p->sigma);
    qk_json_end_obj(js);
}

typedef struct {
    const char *option, *what;
    double limit, value;
    bool ok;
} gate;

static int gates(const qk_tasks_opts *o, const qk_task_cmp *c, bool has_base, gate *g)
{
    int n = 0;
    if (o->has_min_score)
        g[n++] = (gate){"--min-score", "score (%)", o->min_score, c->score.pct,
                        c->score.pct >= o->min_score};
    if (o->has_min_recovery)
        g[n++] = (gate){"--min-recovery", "recovery (%)", o->min_recovery, c->recovery,
                        has_base && c->recovery >= o->min_recovery};
    if (o->has_min_agreement)
        g[n++] = (gate){"--min-agreement", "agreement (%)", o->min_agreement, c->agree.pct,
                        has_base && c->agree.pct >= o->min_agreement};
    return n;
}

static void json_report(FILE *f, const qk_tasks_job *j, int kind, const char *path,
                        const qk_taskset *ts, const qk_task_answers *a, const qk_task_answers *b,
                        const qk_task_cmp *c, const gate *g, int ng)
{
    qk_json js;
    qk_json_init(&js, f, true);
    qk_json_obj(&js);
    qk_json_key(&js, "mode"), qk_json_str(&js, qk_task_kind_name(kind));
    qk_json_key(&js, "model"), qk_json_str(&js, j->model_path);
    qk_json_key(&js, "base"), qk_json_str(&js, j->base ? j->base_path : NULL);
    qk_json_key(&js, "file"), qk_json_str(&js, path);
    qk_json_key(&js, "n_ctx"), qk_json_int(&js, j->n_ctx);
    qk_json_key(&js, "tasks_in_file"), qk_json_int(&js, ts->n_file);
    qk_json_key(&js, "tasks"), qk_json_int(&js, ts->n);
    json_prop(&js, "score", &c->score, "correct");
    if (b) {
        json_prop(&js, "base_score", &c->base, "correct");
        qk_json_key(&js, "recovery");
        qk_json_obj(&js);
        qk_json_key(&js, "pct"), qk_json_f64(&js, c->recovery);
        qk_json_key(&js, "lo95"), qk_json_f64(&js, c->rec_lo);
        qk_json_key(&js, "hi95"), qk_json_f64(&js, c->rec_hi);
        qk_json_end_obj(&js);
        json_prop(&js, "agreement", &c->agree, "same");
    }
    for (int pass = b ? 0 : 1; pass < 2; pass++) {
        qk_json_key(&js, pass == 0 ? "disagreements" : "answers");
        qk_json_arr(&js);
        for (int i = 0; i < ts->n; i++) {
            if (pass == 0 && a->pick[i] == b->pick[i])
                continue;
            qk_json_obj(&js);
            qk_json_key(&js, "task"), qk_json_int(&js, i + 1);
            qk_json_key(&js, "index"), qk_json_int(&js, ts->t[i].index);
            qk_json_key(&js, "pick"), qk_json_int(&js, a->pick[i]);
            qk_json_key(&js, "correct"), qk_json_bool(&js, a->correct[i]);
            if (pass == 1) {
                qk_json_key(&js, "scores");
                qk_json_arr(&js);
                for (int k = 0; k < ts->t[i].n_cand; k++)
                    qk_json_f64(&js, a->score[a->off[i] + (size_t)k]);
                qk_json_end_arr(&js);
            }
            if (b) {
                qk_json_key(&js, "base_pick"), qk_json_int(&js, b->pick[i]);
                qk_json_key(&js, "base_correct"), qk_json_bool(&js, b->correct[i]);
            }
            qk_json_end_obj(&js);
        }
        qk_json_end_arr(&js);
    }
    qk_json_key(&js, "thresholds");
    qk_json_arr(&js);
    bool all = true;
    for (int i = 0; i < ng; i++) {
        qk_json_obj(&js);
        qk_json_key(&js, "option"), qk_json_str(&js, g[i].option);
        qk_json_key(&js, "limit"), qk_json_f64(&js, g[i].limit);
        qk_json_key(&js, "value"), qk_json_f64(&js, g[i].value);
        qk_json_key(&js, "ok"), qk_json_bool(&js, g[i].ok);
        qk_json_end_obj(&js);
        all = all && g[i].ok;
    }
    qk_json_end_arr(&js);
    qk_json_key(&js, "ok"), qk_json_bool(&js, all);
    qk_json_end_obj(&js);
    qk_json_done(&js);
}

static int write_json_file(const char *dst, const qk_tasks_job *j, int kind, const char *path,
                           const qk_taskset *ts, const qk_task_answers *a, const qk_task_answers *b,
                           const qk_task_cmp *c, const gate *g, int ng, qk_err *err)
{
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f)
        return qk_errf(err, QK_EIO, "out of memory");
    json_report(f, j, kind, path, ts, a, b, c, g, ng);
    int rc = fclose(f) ? qk_errf(err, QK_EIO, "out of memory") : 0;
    if (!rc)
        rc = qk_out_write_file(dst, mem, len, err);
    free(mem);
    return rc;
}

int qk_tasks_cmd(const qk_tasks_opts *o, const qk_tasks_job *j, qk_err *err)
{
    char *buf = NULL;
    size_t n = 0;
    const char *path;
    qk_taskset ts = {0};
    qk_task_answers a = {0}, b = {0};
    int rc = qk_tasks_read(o, j->text_file, &buf, &n, &path, err);
    if (rc)
        return rc;
    if (j->json_out && qk_same_file(j->json_out, path)) {
        free(buf);
        return qk_errf(err, QK_EINPUT, "%s: output is the same file as input %s", j->json_out, path);
    }
    rc = qk_tasks_eval(o->kind, buf, n, o->n_tasks[o->kind], path, j->model, j->base, j->tok,
                       j->n_ctx, j->n_batch, j->threads, j->kv_type, j->quiet, &ts, &a,
                       j->base ? &b : NULL, err);
    free(buf);
    if (rc)
        return rc;
    qk_task_cmp c;
    qk_task_compare(&a, j->base ? &b : NULL, &c);
    gate g[3];
    const int ng = gates(o, &c, j->base != NULL, g);
    if (j->json) {
        json_report(stdout, j, o->kind, path, &ts, &a, j->base ? &b : NULL, &c, g, ng);
    } else {
        qk_tasks_print_llama(stdout, o->kind, &ts, &a);
        print_summary(stdout, j, o->kind, &ts, &c);
    }
    fflush(stdout);
    if (j->json_out)
        rc = write_json_file(j->json_out, j, o->kind, path, &ts, &a, j->base ? &b : NULL, &c, g, ng,
                             err);
    for (int i = 0; i < ng && !rc; i++)
        if (!g[i].ok) {
            fprintf(stderr, "%s: %s %g violated: %s = %.4f\n", j->prog, g[i].option, g[i].limit,
                        g[i].what, g[i].value);
        }
    for (int i = 0; i < ng && !rc; i++)
        if (!g[i].ok)
            rc = -1;
    qk_taskset_free(&ts);
    qk_task_answers_free(&a);
    qk_task_answers_free(&b);
    return rc;
}
