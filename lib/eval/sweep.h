/* sweep.h - qk-report's evaluation: many models against one base on the
 * same text (KL divergence and perplexity, lib/eval/ppl.h) and the same task
 * files (lib/eval/tasks.h), in one process with several models at once, or
 * as a plan of independent shell commands (qk-kld shards writing .qkpart and
 * task-report files) whose parts are merged back into the same numbers.
 *
 * One process: every model's chunks are evaluated beside the base in the
 * same pass (qk-kld --base), so its statistics are those of
 * "qk-kld -m MODEL --base BASE -f TEXT" over all chunks; the base answers
 * each task file once and each model once.  The plan's shards compute the
 * same records and answers, so merging them gives the same results, bit
 * for bit. */
#ifndef QK_SWEEP_H
#define QK_SWEEP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/core/err.h"
#include "lib/eval/kldstats.h"
#include "lib/eval/tasks.h"

#define QK_SWEEP_MAX_TASKS 3

typedef struct qk_sweep_taskfile {
    int kind;              /* QK_TASK_* */
    const char *path;
    size_t n_tasks;        /* --*-tasks (0: llama-perplexity's default) */
} qk_sweep_taskfile;

typedef struct qk_sweep_opts {
    const char *base;      /* the base model */
    const char *text;      /* -f */
    int n_ctx;             /* -c (default 512) */
    int n_chunks;          /* --chunks (0: all) */
    int n_batch, threads, jobs, kv_type;
    bool quiet;
    int n_tasks;
    qk_sweep_taskfile task[QK_SWEEP_MAX_TASKS];
} qk_sweep_opts;

/* One task file's results for one model. */
typedef struct qk_sweep_task {
    int kind;
    int n;                 /* tasks scored */
    qk_task_cmp cmp;       /* against the base */
} qk_sweep_task;

typedef struct qk_sweep_model {
    const char *path;
    qk_kld_summary kld;    /* KL divergence, perplexity ratio, same top, percentiles */
    uint64_t tokens;       /* scored */
    qk_sweep_task task[QK_SWEEP_MAX_TASKS];
} qk_sweep_model;

typedef struct qk_sweep_result {
    int n_ctx, n_chunk;    /* windows of the text */
    int n_models;
    qk_sweep_model *m;
    int n_tasks;
    qk_task_prop base_task[QK_SWEEP_MAX_TASKS];  /* the base's score per task file */
    int task_file_n[QK_SWEEP_MAX_TASKS];         /* tasks in each file */
} qk_sweep_result;

/* Evaluate every model against the base (o->jobs at once, the threads
 * shared between them; results do not depend on either). */
int qk_sweep_run(const qk_sweep_opts *o, char *const *models, int n_models, qk_sweep_result *r,
                 qk_err *err);

/* The plan: one shell command per shard on out - each model's chunks in
 * ranges of shard_chunks (0: all in one), and each model x task file -
 * every one writing one file into parts_dir (m<i>.c<A>-<B>.qkpart,
 * m<i>.<kind>.json) through qk_exe's qk-kld.  Paths become absolute, so the
 * lines run from any directory of a machine that sees the same files. */
int qk_sweep_plan(const qk_sweep_opts *o, char *const *models, int n_models, const char *parts_dir,
                  int shard_chunks, const char *qk_exe, FILE *out, qk_err *err);

/* The results from a plan's parts in parts_dir (same options and models). */
int qk_sweep_merge(const qk_sweep_opts *o, char *const *models, int n_models, const char *parts_dir,
                   qk_sweep_result *r, qk_err *err);

void qk_sweep_result_free(qk_sweep_result *r);

#endif
