/* Task scoring (lib/eval/tasks.h) against llama-perplexity d32676d
 * (goldens/tasks/llama, see goldens/tasks/README.md):
 * - std::mt19937 and libstdc++'s uniform_int_distribution<size_t> and the
 *   float draw of Winogrande / multiple choice give g++ 12's numbers;
 * - the readers: line counts, labels, CSV quoting, llama's unread last line,
 *   truncated binary files; every error names the file and the line or task;
 * - on stories260K (F32, F16) and stories4M (F32, Q4_K_M) over the three
 *   TinyStories task files: the same tasks in the same order as
 *   llama-perplexity drew them, and the same pick for every task, except
 *   where the two candidates' llama scores are closer than qk's scores
 *   deviate from llama's for them (the engines' logits differ: a candidate's
 *   mean log-probability by up to 1.5e-3 on stories260K F32, 8e-3 on its F16,
 *   5e-4 on stories4M F32, and 0.11 on stories4M Q4_K_M, whose Q4_K logits differ from
 *   llama.cpp's (PPL 7.3657 vs 7.3574 on chunk 2 of eval-64k at -c 256) - a
 *   different pick is then a numerical tie, not a scoring difference); the
 *   F32 and F16 runs must have no different pick at all; where every pick is
 *   equal the final score is llama-perplexity's, digit for digit (HellaSwag:
 *   the last line of its table).  make check scores stories4M's first 24 drawn
 *   tasks of each file; QK_TASKS_FULL=1 scores all of them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/files.h"
#include "lib/engine/modelfile.h"
#include "lib/eval/tasks.h"
#include "lib/eval/tasks_cmd.h"
#include "tests/testutil.h" /* criterion.h first: parameterized.h after it */
#include <criterion/parameterized.h>

#define GT "goldens/tasks/"
#define HS GT "hellaswag-stories.txt"
#define WG GT "winogrande-stories.csv"
#define MC GT "mc-stories.bin"

/* ---- random numbers (g++ 12, see goldens/tasks/README.md) ---------------------- */

Test(tasks_rng, mt19937)
{
    qk_mt19937 r;
    qk_mt_seed(&r, 1);
    const uint32_t want[] = {1791095845u, 4282876139u, 3093770124u, 4005303368u, 491263u};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(qk_mt_next(&r), want[i]);
    qk_mt_seed(&r, 5489); /* the default seed; the standard's 10000th value */
    uint32_t v = 0;
    for (int i = 0; i < 10000; i++)
        v = qk_mt_next(&r);
    cr_assert_eq(v, 4123659995u);
}

Test(tasks_rng, uniform_int_distribution)
{
    qk_mt19937 r;
    qk_mt_seed(&r, 1);
    const uint64_t hi[] = {0, 1, 2, 5, 119, 1000, 10041, 3000000000u};
    const uint64_t want[] = {0, 1, 2, 5, 0, 128, 3036, 440267677, 0, 0, 1, 1, 46, 345, 6725, 1190302406};
    for (int k = 0; k < 16; k++)
        cr_assert_eq(qk_mt_uniform(&r, hi[k % 8]), want[k], "draw %d", k);
}

Test(tasks_rng, float_draw_and_hellaswag_order)
{
    qk_mt19937 r;
    qk_mt_seed(&r, 1);
    const int64_t want[] = {62, 147, 105, 136, 0, 18, 43, 141, 20, 33};
    for (int n = 149, k = 0; n >= 140; n--, k++)
        cr_assert_eq(qk_mt_draw_float(&r, (size_t)n), want[k]);
    /* hellaswag_score's order of 120 tasks */
    size_t len;
    char *buf = tu_read(HS, &len);
    qk_taskset ts;
    qk_err err = {0};
    cr_assert_eq(qk_tasks_parse(&ts, QK_TASK_HELLASWAG, buf, len, 400, HS, &err), 0, "%s", err.msg);
    const int order[] = {50, 119, 85, 111, 0, 15, 36, 118, 18, 29, 11, 49, 24, 48, 43, 81, 52, 110, 66, 100};
    cr_assert_eq(ts.n, 120);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(ts.t[i].index, order[i], "task %d", i);
    qk_taskset_free(&ts);
    free(buf);
}

/* ---- readers ------------------------------------------------------------------ */

static int parse(int kind, const char *s, size_t n, size_t max, qk_taskset *ts, qk_err *err)
{
    return qk_tasks_parse(ts, kind, s, n, max, "F.txt", err);
}

#define HS_TASK "Story: a\n1\ne0\ne1\ne2\ne3\n"

Test(tasks_parse, hellaswag)
{
    qk_taskset ts;
    qk_err err = {0};
    const char ok[] = HS_TASK HS_TASK;
    cr_assert_eq(parse(QK_TASK_HELLASWAG, ok, sizeof ok - 2, 0, &ts, &err), 0, "%s", err.msg);
    cr_assert_eq(ts.n, 2);
    cr_assert_str_eq(ts.t[0].text[1], "Story: a e1");
    cr_assert(ts.t[0].correct[1] && !ts.t[0].correct[0]);
    cr_assert_eq(ts.t[0].line, 1);
    qk_taskset_free(&ts);
    const char seven[] = HS_TASK "extra\n";
    cr_assert_eq(parse(QK_TASK_HELLASWAG, seven, sizeof seven - 1, 0, &ts, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "F.txt: line 7:"), "%s", err.msg);
    const char label[] = HS_TASK "Story: b\n4\ne0\ne1\ne2\ne3\n";
    cr_assert_eq(parse(QK_TASK_HELLASWAG, label, sizeof label - 1, 0, &ts, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "F.txt: line 8: gold label '4'"), "%s", err.msg);
    cr_assert_eq(parse(QK_TASK_HELLASWAG, "", 0, 0, &ts, &err), QK_EINPUT);
}

Test(tasks_parse, winogrande)
{
    qk_taskset ts;
    qk_err err = {0};
    /* header skipped; a quoted sentence with commas; the unterminated last line not read */
    const char csv[] = "index,sentence,option1,option2,answer\n"
                       "0,\"So, Tom gave _ a cat, and left.\",Ann,Bob,2\n"
                       "1,Ann saw _ run.,Tom,Sue,1\n"
                       "2,Not read _ here.,A,B,1";
    cr_assert_eq(parse(QK_TASK_WINOGRANDE, csv, sizeof csv - 1, 0, &ts, &err), 0, "%s", err.msg);
    cr_assert_eq(ts.n, 2);
    cr_assert_str_eq(ts.t[0].text[0], "So, Tom gave Ann a cat, and left.");
    cr_assert_str_eq(ts.t[0].base[1], "So, Tom gave Bob");
    cr_assert(ts.t[0].correct[1] && ts.t[1].correct[0]);
    cr_assert_eq(ts.t[1].line, 3);
    qk_taskset_free(&ts);
    const char bad[] = "0,Ann saw _ run.,Tom,Sue,1\n1,Ann saw _ run.,Tom,Sue,3\n";
    cr_assert_eq(parse(QK_TASK_WINOGRANDE, bad, sizeof bad - 1, 0, &ts, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "F.txt: line 2: answer '3'"), "%s", err.msg);
    const char nobl[] = "0,Ann saw _ run.,Tom,Sue,1\n1,Ann saw run.,Tom,Sue,1\n";
    cr_assert_eq(parse(QK_TASK_WINOGRANDE, nobl, sizeof nobl - 1, 0, &ts, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "F.txt: line 2:"), "%s", err.msg);
    const char commas[] = "0,Ann saw _ run.,Tom\n";
    cr_assert_eq(parse(QK_TASK_WINOGRANDE, commas, sizeof commas - 1, 0, &ts, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "F.txt: line 1: not index,sentence"), "%s", err.msg);
}

Test(tasks_parse, multiple_choice)
{
    size_t len;
    char *buf = tu_read(MC, &len);
    qk_taskset ts;
    qk_err err = {0};
    cr_assert_eq(parse(QK_TASK_MC, buf, len, 0, &ts, &err), 0, "%s", err.msg);
    cr_assert_eq(ts.n, 120);
    int ones = 0;
    for (int c = 0; c < ts.t[0].n_cand; c++)
        ones += ts.t[0].correct[c];
    cr_assert_eq(ones, 1);
    cr_assert(!strncmp(ts.t[0].text[0], "Story: ", 7));
    qk_taskset_free(&ts);
    /* the same tasks at their offsets when drawn */
    cr_assert_eq(parse(QK_TASK_MC, buf, len, 10, &ts, &err), 0, "%s", err.msg);
    cr_assert_eq(ts.n, 10);
    qk_taskset_free(&ts);
    /* truncated inside a task; cut inside the offsets */
    cr_assert_eq(parse(QK_TASK_MC, buf, len - 9, 0, &ts, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "F.txt: task 119 at offset "), "%s", err.msg);
    cr_assert_eq(parse(QK_TASK_MC, buf, 100, 0, &ts, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "F.txt: offset 4: truncated"), "%s", err.msg);
    /* a label out of range: the last int32 of the file is the last task's last mc2 label */
    buf[len - 4] = 2;
    cr_assert_eq(parse(QK_TASK_MC, buf, len, 0, &ts, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "task 119 at offset ") && strstr(err.msg, "is 2 (0 or 1)"), "%s", err.msg);
    free(buf);
}

/* ---- against llama-perplexity ----------------------------------------------------- */

typedef struct {
    const char *model;    /* path, or a preset of qk quant applied to src */
    const char *src, *preset;
    const char *golden;   /* goldens/tasks/llama/NAME.* */
    int kind;
    const char *file;
    size_t n_tasks;
    int limit;            /* score the first tasks only (0: all) */
    bool exact;           /* no different pick allowed */
} gcase;

/* llama's PICK lines: task, pick (Winogrande 1-based), gold, the candidates' scores, text */
typedef struct {
    int pick, n;
    double score[8];
    char text[400];
} lpick;

static int read_picks(const char *path, int kind, lpick *p, int max)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    char line[4096];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        char *save, *tok = strtok_r(line, "\t\n", &save);
        cr_assert(tok && !strcmp(tok, "PICK"));
        strtok_r(NULL, "\t\n", &save);                  /* task */
        p[n].pick = atoi(strtok_r(NULL, "\t\n", &save)); /* pick */
        if (kind == QK_TASK_WINOGRANDE)
            p[n].pick--;
        strtok_r(NULL, "\t\n", &save); /* gold / label / answer */
        p[n].n = 0;
        char *rest;
        while ((tok = strtok_r(NULL, "\t\n", &save))) {
            double v = strtod(tok, &rest);
            if (*rest || p[n].n == 8 || (kind == QK_TASK_HELLASWAG && p[n].n == 4)) {
                snprintf(p[n].text, sizeof p[n].text, "%s", tok);
                break;
            }
            p[n].score[p[n].n++] = v;
        }
        n++;
    }
    fclose(f);
    return n;
}

/* The last line of llama's stdout table (HellaSwag) or its final line (the others). */
static void llama_final(const gcase *g, char *out, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, GT "llama/%s.%s", g->golden, g->kind == QK_TASK_HELLASWAG ? "stdout.txt" : "final.txt");
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    char line[512];
    out[0] = 0;
    while (fgets(line, sizeof line, f))
        if (g->kind == QK_TASK_HELLASWAG ? (line[0] >= '0' && line[0] <= '9') : !strncmp(line, "Final", 5))
            snprintf(out, n, "%s", line);
    fclose(f);
}

static char tmp_dir_path[64];

static const char *tmp_dir(void)
{
    char *dir = tmp_dir_path;
    if (!dir[0]) {
        snprintf(dir, sizeof tmp_dir_path, "/tmp/qk_tasks_test.XXXXXX");
        cr_assert(mkdtemp(dir));
    }
    return dir;
}

static void run_case(const gcase *g)
{
    char model[256];
    if (g->preset) { /* qk quant makes the file llama-quantize makes (byte for byte) */
        const char *qk = getenv("QK_BIN") ? getenv("QK_BIN") : "build/qk";
        snprintf(model, sizeof model, "%s/%s.gguf", tmp_dir(), g->golden);
        char cmd[768];
        snprintf(cmd, sizeof cmd, "'%s' quant -q '%s' '%s' %s >/dev/null 2>&1", qk, g->src, model, g->preset);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
    } else {
        snprintf(model, sizeof model, "%s", g->model);
    }
    qk_model_file mf;
    qk_err err = {0};
    cr_assert_eq(qk_model_file_open(&mf, model, true, &err), 0, "%s", err.msg);
    qk_tokenizer *tok = qk_tok_from_gguf(mf.g, &err);
    cr_assert(tok, "%s", err.msg);
    qk_tasks_opts to = {.kind = g->kind, .bin_file = g->kind == QK_TASK_MC ? g->file : NULL};
    char *buf;
    size_t len;
    const char *path;
    cr_assert_eq(qk_tasks_read(&to, g->kind == QK_TASK_MC ? NULL : g->file, &buf, &len, &path, &err), 0);
    qk_taskset ts;
    cr_assert_eq(qk_tasks_parse(&ts, g->kind, buf, len, g->n_tasks, path, &err), 0, "%s", err.msg);
    qk_task_toks tt;
    cr_assert_eq(qk_tasks_tokenize(&ts, tok, 512, path, &tt, &err), 0, "%s", err.msg);
    qk_task_answers a;
    cr_assert_eq(qk_task_answers_init(&a, &ts, &err), 0);
    qk_task_scorer *sc;
    cr_assert_eq(qk_task_scorer_new(&sc, mf.m, &tt, QK_F16, 0, 2, &err), 0, "%s", err.msg);
    static lpick lp[200];
    char gp[256];
    snprintf(gp, sizeof gp, GT "llama/%s.picks.txt", g->golden);
    const int nl = read_picks(gp, g->kind, lp, 200);
    cr_assert_eq(nl, ts.n, "%s: %d PICK lines, %d tasks drawn", g->golden, nl, ts.n);
    int limit = g->limit && g->limit < ts.n && !getenv("QK_TASKS_FULL") ? g->limit : ts.n;
    int differ = 0;
    double dev = 0;
    for (int i = 0; i < ts.n; i++) /* every drawn task, in llama's order (scored or not) */
        cr_assert(!strncmp(ts.t[i].text[0], lp[i].text, strlen(lp[i].text)),
                  "%s task %d: llama drew '%s', qk '%s'", g->golden, i + 1, lp[i].text, ts.t[i].text[0]);
    for (int i = 0; i < limit; i++) {
        cr_assert_eq(qk_task_score(sc, &ts, &tt, i, &a, &err), 0, "%s", err.msg);
        const double *q = a.score + a.off[i];
        cr_assert_eq(lp[i].n, ts.t[i].n_cand);
        for (int c = 0; c < lp[i].n; c++)
            dev = fmax(dev, fabs(q[c] - lp[i].score[c]));
        const int p = a.pick[i], l = lp[i].pick;
        if (p == l)
            continue;
        differ++;
        const double margin = fabs(lp[i].score[l] - lp[i].score[p]);
        const double d = fabs(q[p] - lp[i].score[p]) + fabs(q[l] - lp[i].score[l]);
        cr_assert(!g->exact, "%s task %d: qk picks %d, llama %d (margin %g)", g->golden, i + 1, p, l, margin);
        cr_assert(margin < 1e-6 || margin <= d, "%s task %d: qk picks %d, llama %d: margin %g, not within "
                  "the engines' deviation %g", g->golden, i + 1, p, l, margin, d);
    }
    cr_log_info("%s: %d tasks, %d different picks, max |score - llama's| %.3g\n", g->golden, limit, differ, dev);
    if (!differ && limit == ts.n) { /* the printed final score is llama's */
        char *mem = NULL;
        size_t ml = 0;
        FILE *f = open_memstream(&mem, &ml);
        qk_tasks_print_llama(f, g->kind, &ts, &a);
        fclose(f);
        char want[512], got[512] = "";
        llama_final(g, want, sizeof want);
        /* HellaSwag: the line of the last task llama's stdout has (its log can lose the last) */
        const int last = g->kind == QK_TASK_HELLASWAG ? atoi(want) : 0;
        for (char *s = strtok(mem, "\n"); s; s = strtok(NULL, "\n"))
            if (g->kind == QK_TASK_HELLASWAG ? atoi(s) == last && s[0] >= '1' && s[0] <= '9'
                                             : !strncmp(s, "Final", 5))
                snprintf(got, sizeof got, "%s\n", s);
        cr_assert_str_eq(got, want, "%s: final line", g->golden);
        free(mem);
    }
    qk_task_scorer_free(sc);
    qk_task_answers_free(&a);
    qk_task_toks_free(&tt);
    qk_taskset_free(&ts);
    free(buf);
    qk_tok_free(tok);
    qk_model_file_close(&mf);
}

#define S260 "goldens/models/stories260K/stories260K-f32.gguf"
#define S4M "goldens/models/stories4M/stories4M-f32.gguf"
/* Tasks scored (every drawn task's text is compared with llama's): stories260K F32 all of
 * them, so the printed final line is llama's; its F16 runs and the -n variants (whose point is
 * which tasks are drawn) the first 20; stories4M the first 24 (all with QK_TASKS_FULL=1, a few
 * minutes).  Under the sanitizers (about 10x slower; the plain pass has compared every answer) 12, 6 and
 * 6: the same code on fewer tasks, 147 -> about 60 CPU-seconds of make check. */
#ifdef __SANITIZE_ADDRESS__
#define S4M_LIMIT 6
#define S260_LIMIT 12
#define S260_SOME 6
#else
#define S4M_LIMIT 24
#define S260_LIMIT 0
#define S260_SOME 20
#endif

static const gcase cases[] = {
    {S260, NULL, NULL, "s260-f32-hellaswag", QK_TASK_HELLASWAG, HS, 400, S260_LIMIT, true},
    {S260, NULL, NULL, "s260-f32-winogrande", QK_TASK_WINOGRANDE, WG, 0, S260_LIMIT, true},
    {S260, NULL, NULL, "s260-f32-mc", QK_TASK_MC, MC, 0, S260_LIMIT, true},
    {S260, NULL, NULL, "s260-f32-hellaswag-n50", QK_TASK_HELLASWAG, HS, 50, S260_SOME, true},
    {S260, NULL, NULL, "s260-f32-winogrande-n100", QK_TASK_WINOGRANDE, WG, 100, S260_SOME, true},
    {S260, NULL, NULL, "s260-f32-mc-n60", QK_TASK_MC, MC, 60, S260_SOME, true},
    {NULL, S260, "F16", "s260-f16-hellaswag", QK_TASK_HELLASWAG, HS, 400, S260_SOME, true},
    {NULL, S260, "F16", "s260-f16-winogrande", QK_TASK_WINOGRANDE, WG, 0, S260_SOME, true},
    {NULL, S260, "F16", "s260-f16-mc", QK_TASK_MC, MC, 0, S260_SOME, true},
    {S4M, NULL, NULL, "s4m-f32-hellaswag", QK_TASK_HELLASWAG, HS, 400, S4M_LIMIT, true},
    {S4M, NULL, NULL, "s4m-f32-winogrande", QK_TASK_WINOGRANDE, WG, 0, S4M_LIMIT, true},
    {S4M, NULL, NULL, "s4m-f32-mc", QK_TASK_MC, MC, 0, S4M_LIMIT, true},
    {NULL, S4M, "Q4_K_M", "s4m-q4km-hellaswag", QK_TASK_HELLASWAG, HS, 400, S4M_LIMIT, false},
    {NULL, S4M, "Q4_K_M", "s4m-q4km-winogrande", QK_TASK_WINOGRANDE, WG, 0, S4M_LIMIT, false},
    {NULL, S4M, "Q4_K_M", "s4m-q4km-mc", QK_TASK_MC, MC, 0, S4M_LIMIT, false},
};

/* One test a case, so the runner spreads them over its jobs. */
ParameterizedTestParameters(tasks_llama, same_answers_as_llama_perplexity)
{
    static int idx[sizeof cases / sizeof *cases];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        idx[i] = (int)i;
    return cr_make_param_array(int, idx, sizeof cases / sizeof *cases);
}

ParameterizedTest(int *i, tasks_llama, same_answers_as_llama_perplexity, .timeout = 1200)
{
    run_case(&cases[*i]);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir());
    cr_assert_eq(system(cmd), 0);
    tmp_dir_path[0] = 0; /* the next case makes its own (one process for all under --no-fork) */
}

/* A task longer than the context is an error naming the file and the task. */
Test(tasks_llama, task_longer_than_context)
{
    qk_model_file mf;
    qk_err err = {0};
    cr_assert_eq(qk_model_file_open(&mf, S260, true, &err), 0, "%s", err.msg);
    qk_tokenizer *tok = qk_tok_from_gguf(mf.g, &err);
    size_t len;
    char *buf = tu_read(HS, &len);
    qk_taskset ts;
    cr_assert_eq(qk_tasks_parse(&ts, QK_TASK_HELLASWAG, buf, len, 400, HS, &err), 0);
    qk_task_toks tt;
    cr_assert_eq(qk_tasks_tokenize(&ts, tok, 16, HS, &tt, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, HS ": line ") && strstr(err.msg, "more than the context of 64 (4 x -c 16)"),
              "%s", err.msg);
    qk_taskset_free(&ts);
    free(buf);
    qk_tok_free(tok);
    qk_model_file_close(&mf);
}
