/* tasks_cmd.h - qk-kld's task scoring (--hellaswag, --winogrande,
 * --multiple-choice) as a command piece: the options (llama-perplexity's
 * names), one run of a model (and optionally its base in the same pass) over
 * a task file, the text report (llama-perplexity's lines), the JSON report,
 * and the gates --min-score, --min-recovery, --min-agreement. */
#ifndef QK_TASKS_CMD_H
#define QK_TASKS_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "lib/core/err.h"
#include "lib/core/json.h"
#include "lib/engine/model.h"
#include "lib/engine/tokenizer.h"
#include "lib/eval/tasks.h"

enum {
    QK_TASKS_O_HS = 1100, QK_TASKS_O_HS_N, QK_TASKS_O_WG, QK_TASKS_O_WG_N, QK_TASKS_O_MC,
    QK_TASKS_O_MC_N, QK_TASKS_O_BF, QK_TASKS_O_MIN_REC, QK_TASKS_O_MIN_AGREE, QK_TASKS_O_MIN_SCORE
};

/* struct option entries (getopt.h) for a command's long-option table. */
#define QK_TASKS_LONG_OPTIONS                                                                 \
    {"hellaswag", no_argument, 0, QK_TASKS_O_HS},                                            \
    {"hellaswag-tasks", required_argument, 0, QK_TASKS_O_HS_N},                              \
    {"winogrande", no_argument, 0, QK_TASKS_O_WG},                                           \
    {"winogrande-tasks", required_argument, 0, QK_TASKS_O_WG_N},                             \
    {"multiple-choice", no_argument, 0, QK_TASKS_O_MC},                                      \
    {"multiple-choice-tasks", required_argument, 0, QK_TASKS_O_MC_N},                        \
    {"binary-file", required_argument, 0, QK_TASKS_O_BF},                                    \
    {"min-recovery", required_argument, 0, QK_TASKS_O_MIN_REC},                              \
    {"min-agreement", required_argument, 0, QK_TASKS_O_MIN_AGREE},                           \
    {"min-score", required_argument, 0, QK_TASKS_O_MIN_SCORE}

typedef struct qk_tasks_opts {
    int kind;              /* QK_TASK_*, 0: no task scoring */
    size_t n_tasks[4];     /* by kind; 0: llama-perplexity's default (400, all, all) */
    const char *bin_file;  /* -bf FILE */
    double min_recovery, min_agreement, min_score;
    bool has_min_recovery, has_min_agreement, has_min_score;
} qk_tasks_opts;

/* Handle getopt's c: 1 when it was one of the options above, 0 when not, -1
 * on a bad value (err set, code 2). */
int qk_tasks_opt(qk_tasks_opts *o, int c, const char *arg, qk_err *err);
/* Usage errors: the gates or -bf without task scoring, -f and -bf together
 * or neither, --min-recovery / --min-agreement without a base. */
int qk_tasks_check(const qk_tasks_opts *o, const char *text_file, bool has_base, qk_err *err);
/* argv with llama's "-bf" spelled "--binary-file" (getopt would read it as
 * -b f), in place. */
void qk_tasks_fix_argv(int argc, char **argv);

/* The task file's bytes as llama-perplexity takes them: -f drops one trailing
 * '\n', -bf keeps every byte.  *path: the one given. */
int qk_tasks_read(const qk_tasks_opts *o, const char *text_file, char **buf, size_t *n,
                  const char **path, qk_err *err);

/* One scoring run. */
typedef struct qk_tasks_job {
    const char *prog;
    const char *model_path, *base_path;  /* for the report */
    const qk_model *model, *base;        /* base may be NULL */
    const qk_tokenizer *tok;
    const char *text_file;               /* -f */
    int n_ctx, n_batch, threads, kv_type;
    bool json, quiet;
    const char *json_out;                /* also write the JSON report here (atomically) */
} qk_tasks_job;

/* Read, select, tokenize, answer every task with the model (and the base),
 * print the report, write json_out.  Returns 0, -1 when a gate failed (one
 * line on stderr for each), or an error code. */
int qk_tasks_cmd(const qk_tasks_opts *o, const qk_tasks_job *j, qk_err *err);

/* llama-perplexity's lines for a's answers: the per-task table it prints on
 * stdout, then its final lines (Winogrande: "Final Winogrande score(N
 * tasks): X +/- S", multiple choice: "Final result: X +/- S" and "Random
 * chance: ..."; llama-perplexity prints those on stderr, and the Winogrande
 * one only from 100 tasks on), with the same float and double steps. */
void qk_tasks_print_llama(FILE *f, int kind, const qk_taskset *ts, const qk_task_answers *a);

/* The evaluation without the report: the selected tasks and each model's
 * answers (b: NULL without a base).  Free with qk_taskset_free and
 * qk_task_answers_free. */
int qk_tasks_eval(int kind, const char *buf, size_t n, size_t n_tasks, const char *path,
                  const qk_model *model, const qk_model *base, const qk_tokenizer *tok, int n_ctx,
                  int n_batch, int threads, int kv_type, bool quiet, qk_taskset *ts,
                  qk_task_answers *a, qk_task_answers *b, qk_err *err);

#endif
