/* tasks.h - HellaSwag, Winogrande and multiple-choice scoring as
 * llama-perplexity computes them (tools/perplexity/perplexity.cpp at d32676d:
 * hellaswag_score, winogrande_score, multiple_choice_score).
 *
 * Reading (lib/eval/tasks_parse.c): the file's bytes as -f (one trailing
 * '\n' removed) or -bf (as they are) gave them, parsed from a buffer (a fuzz
 * harness can call the parsers directly), then the tasks selected and
 * ordered as llama-perplexity does with its std::mt19937 (seed 1) and
 * libstdc++'s std::uniform_int_distribution, reproduced bit for bit in
 * lib/eval/tasks_rng.c:
 *   HellaSwag    6 lines per task: context, gold label (0..3), 4 endings;
 *                min(N, --hellaswag-tasks, default 400) tasks drawn without
 *                replacement by uniform_int_distribution<size_t> over the
 *                tasks left; a candidate is context + " " + ending.
 *   Winogrande   CSV lines index,sentence,option1,option2,answer (1 or 2),
 *                the sentence with one "_" (quoted when it holds commas);
 *                as llama-perplexity's reader, a last line that does not
 *                end in '\n' (after -f dropped one) is not read, and a first
 *                line without '_' (a header) is skipped; any other line
 *                llama-perplexity would skip (not 4 separating commas, no
 *                '_', an answer not 1 or 2) is an error here.  With --winogrande-tasks N < the count,
 *                N tasks drawn by int(rng() / 2^32 * left) in float.  A
 *                candidate is first + option + second; first + option is
 *                the part not scored when both continuations are longer
 *                than 3 tokens.
 *   Multiple choice  llama.cpp's binary file: u32 n_task, u32 offset of each
 *                task, then per task a string (u32 length, bytes) question
 *                and two answer sets mc1 and mc2 (u32 n <= 100, n strings,
 *                n int32 labels 0 or 1); only mc1 is scored, correct where
 *                its label is 1.  All tasks in file order, or with
 *                --multiple-choice-tasks N < n_task, N drawn as Winogrande
 *                draws them and read at their offsets.  A candidate is
 *                question + " " + answer.
 *
 * Scoring (lib/eval/tasks_score.c): each candidate is tokenized with BOS
 * (llama's common_tokenize(ctx, text, true)); the tokens all candidates share
 * (the common prefix) are evaluated once, then each candidate's rest after
 * them, so every candidate is one sequence as in llama-perplexity's batch.
 *   HellaSwag, multiple choice: the mean log-probability of the candidate's
 *     tokens after the common prefix (the first from the prefix's last
 *     logits through a double softmax, the rest as compute_logprobs does in
 *     float; HellaSwag sums in double, multiple choice in float); the
 *     highest wins, the first on ties.
 *   Winogrande: the mean log-probability of the tokens after first + option
 *     when both continuations after the common prefix are longer than 3
 *     tokens, else of those after the common prefix (and then, exactly as
 *     llama-perplexity, the second option's first token is scored from the
 *     logits after the first candidate's last token); the last token is left
 *     out when more than one remains; option 1 wins only when strictly
 *     higher.
 * A task needs common prefix + each candidate's rest tokens within 4 x n_ctx
 * (llama-perplexity's context for these scores: -c per sequence, four
 * parallel sequences in one cache).
 */
#ifndef QK_TASKS_H
#define QK_TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/engine/forward.h"
#include "lib/engine/model.h"
#include "lib/engine/tokenizer.h"

enum qk_task_kind { QK_TASK_HELLASWAG = 1, QK_TASK_WINOGRANDE = 2, QK_TASK_MC = 3 };

/* "hellaswag", "winogrande", "multiple-choice"; the score's title ("HellaSwag", ...). */
const char *qk_task_kind_name(int kind);
const char *qk_task_kind_title(int kind);

/* ---- llama-perplexity's random numbers (tasks_rng.c) --------------------- */

typedef struct qk_mt19937 {
    uint32_t mt[624];
    int i;
} qk_mt19937;

void qk_mt_seed(qk_mt19937 *r, uint32_t seed);
/* std::mt19937::operator(). */
uint32_t qk_mt_next(qk_mt19937 *r);
/* std::uniform_int_distribution<size_t>(0, hi)(rng) as libstdc++ (GCC 11..14)
 * computes it for a 32-bit engine: Lemire's nearly divisionless method;
 * hi < 2^32. */
uint64_t qk_mt_uniform(qk_mt19937 *r, uint64_t hi);
/* int(scale * rng() * n), all float, scale = 1 / (1 + (float)UINT32_MAX):
 * Winogrande's and multiple choice's draw of an index below n (it can reach
 * n by rounding: the caller checks). */
int64_t qk_mt_draw_float(qk_mt19937 *r, size_t n);

/* ---- task files (tasks_parse.c) ------------------------------------------ */

typedef struct qk_task {
    int index;          /* 0-based task number in the file */
    int line;           /* text files: 1-based line of the task (its first line); 0: binary */
    uint64_t offset;    /* multiple choice: byte offset of the task */
    int n_cand;         /* candidates: 4 (HellaSwag), 2 (Winogrande), 1..100 */
    char **text;        /* the candidates' full texts */
    char **base;        /* Winogrande: first + option of each candidate; else NULL */
    uint8_t *correct;   /* per candidate: 1 where it is a right answer */
} qk_task;

typedef struct qk_taskset {
    int kind;
    int n_file;         /* tasks in the file */
    int n;              /* selected tasks, in llama-perplexity's order */
    qk_task *t;
} qk_taskset;

/* Parse buf[0..n) - the file's bytes as -f (trailing '\n' removed) or -bf
 * read them - and select up to max_tasks (0: every task; HellaSwag's
 * default is 400, the caller's) as llama-perplexity does.  path names the
 * file in messages: "PATH: line L: ..." or "PATH: task I at offset O: ...".
 * Errors (code 2): a line count not a multiple of 6, a label out of range,
 * a malformed CSV line, a truncated or inconsistent binary file, no tasks. */
int qk_tasks_parse(qk_taskset *ts, int kind, const char *buf, size_t n, size_t max_tasks,
                   const char *path, qk_err *err);
void qk_taskset_free(qk_taskset *ts);
/* "line 103" or "task 17 at offset 4711" (for messages). */
void qk_task_where(const qk_taskset *ts, int i, char *buf, size_t n);

/* ---- scoring (tasks_score.c) --------------------------------------------- */

/* The tokens of one task. */
typedef struct qk_task_tok {
    int n_cand;
    int32_t **seq;      /* candidate token sequences (BOS first) */
    size_t *len;
    size_t cp;          /* common prefix */
    size_t required;    /* cp + sum of (len - cp): llama-perplexity's tokens for the task */
    size_t n_base[2];   /* Winogrande: tokens of first + option */
} qk_task_tok;

typedef struct qk_task_toks {
    int n;
    qk_task_tok *t;
    size_t max_len;     /* the longest candidate (KV cache size) */
    size_t max_rows;    /* the most logits rows one candidate needs */
} qk_task_toks;

/* Tokenize every selected task and check it can be scored as
 * llama-perplexity scores it: a common prefix, every candidate longer than
 * it, and required <= 4 * n_ctx (else code 2 naming path and the task). */
int qk_tasks_tokenize(const qk_taskset *ts, const qk_tokenizer *tok, int n_ctx, const char *path,
                      qk_task_toks *out, qk_err *err);
void qk_task_toks_free(qk_task_toks *tt);

/* One model's answers. */
typedef struct qk_task_answers {
    int n;
    int *pick;          /* chosen candidate (0-based) */
    uint8_t *correct;
    double *score;      /* every candidate's score: task i's at score[off[i] .. + n_cand)
                         * (the mean log-probability; Winogrande the two options' scores) */
    size_t *off;
} qk_task_answers;

int qk_task_answers_init(qk_task_answers *a, const qk_taskset *ts, qk_err *err);
void qk_task_answers_free(qk_task_answers *a);

/* Scores tasks for one model; reusable across calls. */
typedef struct qk_task_scorer qk_task_scorer;

int qk_task_scorer_new(qk_task_scorer **out, const qk_model *m, const qk_task_toks *tt,
                       int kv_type, int n_batch, int nthreads, qk_err *err);
void qk_task_scorer_free(qk_task_scorer *s);
/* Answer task i of ts (tokens tt->t[i]) into a->...[i]. */
int qk_task_score(qk_task_scorer *s, const qk_taskset *ts, const qk_task_toks *tt, int i,
                  qk_task_answers *a, qk_err *err);

/* ---- statistics (tasks_stats.c) ------------------------------------------ */

/* A proportion k / n with its 95 % Wilson score interval (z = 1.95996398454,
 * HellaSwag's) and its standard error sqrt(p (1 - p) / (n - 1)) as
 * llama-perplexity prints for Winogrande and multiple choice; in percent. */
typedef struct qk_task_prop {
    int k, n;
    double pct, lo, hi, sigma;
} qk_task_prop;

void qk_task_prop_make(qk_task_prop *p, int k, int n);

/* A model against its base on the same tasks. */
typedef struct qk_task_cmp {
    qk_task_prop score, base;   /* fraction correct */
    qk_task_prop agree;         /* same pick */
    double recovery, rec_lo, rec_hi; /* score / base score, percent; 95 % interval (delta
                                  * method with the paired covariance, on the paired 2x2
                                  * table with 0.5 added to each cell); NaN without a base
                                  * score */
    int n_disagree;
} qk_task_cmp;

void qk_task_compare(const qk_task_answers *a, const qk_task_answers *b, qk_task_cmp *c);

#endif
