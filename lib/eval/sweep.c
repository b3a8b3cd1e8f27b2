/* sweep.c - qk-report's evaluation of many models against one base, in one
 * process or as a plan of shards merged back; see sweep.h. */
#include "lib/eval/sweep.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/files.h"
#include "lib/core/jsonp.h"
#include "lib/core/progress.h"
#include "lib/engine/modelfile.h"
#include "lib/eval/ppl.h"
#include "lib/eval/tasks_cmd.h"

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "out of memory"); }

/* ---- what every path needs: the tokenizer and the text's windows ------------------ */

typedef struct {
    qk_tokenizer *tok;
    int32_t *ids;
    size_t n_ids;
    int n_chunk;
    uint64_t hash;     /* of the n_chunk windows, as .qkpart files record it */
} text_view;

static void text_free(text_view *t)
{
    qk_tok_free(t->tok);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

/* The tokenizer of the base if it is a GGUF file, else of the first GGUF model. */
static int text_prepare(const qk_sweep_opts *o, char *const *models, int n_models, text_view *t,
                        qk_err *err)
{
    memset(t, 0, sizeof *t);
    const char *src = !qk_model_path_is_hf(o->base) ? o->base : NULL;
    for (int i = 0; !src && i < n_models; i++)
        if (!qk_model_path_is_hf(models[i]))
            src = models[i];
    if (!src)
        return qk_errf(err, QK_EINPUT, "%s: a Hugging Face directory has no GGUF tokenizer: give a "
                       "GGUF model as the base or among the models", o->base);
    qk_gguf *g = NULL;
    int rc = qk_gguf_open(&g, src, 0, err);
    if (rc)
        return rc;
    t->tok = qk_tok_from_gguf(g, err);
    qk_gguf_close(g);
    if (!t->tok)
        return err->code ? err->code : QK_EINPUT;
    char *text = NULL;
    size_t n = 0;
    if ((rc = qk_read_file(o->text, false, &text, &n, err)) ||
        (rc = qk_ppl_tokenize(t->tok, text, n, &t->ids, &t->n_ids, err))) {
        free(text);
        text_free(t);
        return rc;
    }
    free(text);
    if (t->n_ids < 2 * (size_t)o->n_ctx) {
        rc = qk_errf(err, QK_EINPUT, "%s: too short: %zu tokens, at least %d needed for -c %d",
                     o->text, t->n_ids, 2 * o->n_ctx, o->n_ctx);
        text_free(t);
        return rc;
    }
    t->n_chunk = (int)(t->n_ids / (size_t)o->n_ctx);
    if (o->n_chunks > 0 && o->n_chunks < t->n_chunk)
        t->n_chunk = o->n_chunks;
    t->hash = qk_tokens_hash(t->ids, (size_t)t->n_chunk * (size_t)o->n_ctx);
    return 0;
}

static int result_init(qk_sweep_result *r, const qk_sweep_opts *o, int n_models, int n_chunk,
                       qk_err *err)
{
    memset(r, 0, sizeof *r);
    r->m = calloc((size_t)n_models, sizeof *r->m);
    if (!r->m)
        return oom(err);
    r->n_models = n_models;
    r->n_ctx = o->n_ctx;
    r->n_chunk = n_chunk;
    r->n_tasks = o->n_tasks;
    return 0;
}

void qk_sweep_result_free(qk_sweep_result *r)
{
    free(r->m);
    memset(r, 0, sizeof *r);
}

/* A task file's bytes as qk-kld reads them: HellaSwag and Winogrande as -f
 * (one trailing newline dropped), multiple choice as -bf. */
static int read_tasks(const qk_sweep_taskfile *tf, char **buf, size_t *n, qk_err *err)
{
    qk_tasks_opts to = {.kind = tf->kind};
    const char *path;
    if (tf->kind == QK_TASK_MC)
        to.bin_file = tf->path;
    return qk_tasks_read(&to, tf->kind == QK_TASK_MC ? NULL : tf->path, buf, n, &path, err);
}

/* ---- one process ---------------------------------------------------------------- */

typedef struct {
    const qk_sweep_opts *o;
    char *const *models;
    int n_models;
    const text_view *tv;
    const qk_model *base;
    char *task_buf[QK_SWEEP_MAX_TASKS];
    size_t task_len[QK_SWEEP_MAX_TASKS];
    qk_task_answers base_ans[QK_SWEEP_MAX_TASKS];
    int threads_per_job;
    qk_sweep_result *r;
    pthread_mutex_t mu;
    int next;
    int err_at;        /* lowest model index that failed */
    qk_err err;
    qk_progress prog;
} run_state;

static void on_chunk(void *ud, int chunk_no, const qk_kld_acc *a)
{
    run_state *s = ud;
    pthread_mutex_lock(&s->mu);
    qk_progress_add(&s->prog, 1);
    pthread_mutex_unlock(&s->mu);
}

static int eval_model(run_state *s, int i, qk_err *err)
{
    const qk_sweep_opts *o = s->o;
    qk_model_file mf;
    qk_kld_acc acc;
    memset(&acc, 0, sizeof acc);
    int rc = qk_model_file_open(&mf, s->models[i], true, err);
    if (rc)
        return rc;
    if (mf.m->hp.n_vocab != s->base->hp.n_vocab) {
        rc = qk_errf(err, QK_EINPUT, "%s: a vocabulary of %d tokens, the base %s has %d", s->models[i],
                     mf.m->hp.n_vocab, o->base, s->base->hp.n_vocab);
        goto done;
    }
    qk_kld_acc_init(&acc, QK_KLD_MODE_KLD, false);
    qk_ppl_job job = {.model = mf.m, .base_model = s->base, .tokens = s->tv->ids, .n_ctx = o->n_ctx,
                      .chunk_a = 0, .chunk_b = s->tv->n_chunk, .bos = qk_tok_bos(s->tv->tok),
                      .add_bos = qk_tok_add_bos(s->tv->tok), .n_batch = o->n_batch,
                      .nthreads = s->threads_per_job, .kv_type = o->kv_type, .acc = &acc,
                      .on_chunk = on_chunk, .ud = s};
    if ((rc = qk_ppl_run(&job, err)))
        goto done;
    qk_sweep_model *m = &s->r->m[i];
    qk_kld_summarize(&acc, &m->kld);
    m->tokens = acc.count;
    for (int k = 0; k < o->n_tasks; k++) {
        const qk_sweep_taskfile *tf = &o->task[k];
        qk_taskset ts;
        qk_task_answers a;
        if ((rc = qk_tasks_eval(tf->kind, s->task_buf[k], s->task_len[k], tf->n_tasks, tf->path, mf.m,
                                NULL, s->tv->tok, o->n_ctx, o->n_batch, s->threads_per_job,
                                o->kv_type, true, &ts, &a, NULL, err)))
            goto done;
        m->task[k].kind = tf->kind;
        m->task[k].n = ts.n;
        qk_task_compare(&a, &s->base_ans[k], &m->task[k].cmp);
        qk_taskset_free(&ts);
        qk_task_answers_free(&a);
        pthread_mutex_lock(&s->mu);
        qk_progress_add(&s->prog, 1);
        pthread_mutex_unlock(&s->mu);
    }
done:
    qk_kld_acc_free(&acc);
    qk_model_file_close(&mf);
    return rc;
}

static void *worker(void *arg)
{
    run_state *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        const int i = s->next < s->n_models && s->err_at == INT_MAX ? s->next++ : -1;
        pthread_mutex_unlock(&s->mu);
        if (i < 0)
            return NULL;
        qk_err e = {0};
        if (eval_model(s, i, &e)) {
            pthread_mutex_lock(&s->mu);
            if (i < s->err_at) {
                s->err_at = i;
                s->err = e;
            }
            pthread_mutex_unlock(&s->mu);
        }
    }
}

int qk_sweep_run(const qk_sweep_opts *o, char *const *models, int n_models, qk_sweep_result *r,
                 qk_err *err)
{
    text_view tv;
    qk_model_file base = {0};
    run_state s;
    memset(&s, 0, sizeof s);
    int rc = text_prepare(o, models, n_models, &tv, err);
    if (rc)
        return rc;
    if ((rc = result_init(r, o, n_models, tv.n_chunk, err)) ||
        (rc = qk_model_file_open(&base, o->base, true, err)))
        goto done;
    if (base.m->hp.n_vocab != (int)qk_tok_n_vocab(tv.tok)) {
        rc = qk_errf(err, QK_EINPUT, "%s: the tokenizer has %u tokens, the output layer %d", o->base,
                     qk_tok_n_vocab(tv.tok), base.m->hp.n_vocab);
        goto done;
    }
    int jobs = o->jobs < 1 ? 1 : o->jobs > n_models ? n_models : o->jobs;
    s = (run_state){.o = o, .models = models, .n_models = n_models, .tv = &tv, .base = base.m,
                    .r = r, .err_at = INT_MAX};
    s.threads_per_job = o->threads / jobs > 1 ? o->threads / jobs : 1;
    pthread_mutex_init(&s.mu, NULL);
    qk_progress_init(&s.prog, "qk-report", (uint64_t)n_models * (uint64_t)(tv.n_chunk + o->n_tasks) +
                                               (uint64_t)o->n_tasks, o->quiet);
    /* the base answers each task file once, with every thread */
    for (int k = 0; k < o->n_tasks && !rc; k++) {
        qk_taskset ts;
        if ((rc = read_tasks(&o->task[k], &s.task_buf[k], &s.task_len[k], err)) ||
            (rc = qk_tasks_eval(o->task[k].kind, s.task_buf[k], s.task_len[k], o->task[k].n_tasks,
                                o->task[k].path, base.m, NULL, tv.tok, o->n_ctx, o->n_batch,
                                o->threads, o->kv_type, true, &ts, &s.base_ans[k], NULL, err)))
            break;
        r->task_file_n[k] = ts.n_file;
        qk_task_cmp c;
        qk_task_compare(&s.base_ans[k], NULL, &c);
        r->base_task[k] = c.score;
        qk_taskset_free(&ts);
        qk_progress_add(&s.prog, 1);
    }
    if (!rc) {
        pthread_t th[64];
        int started = 0;
        if (jobs > 64)
            jobs = 64;
        for (; started < jobs - 1; started++)
            if (pthread_create(&th[started], NULL, worker, &s))
                break;
        worker(&s);
        for (int t = 0; t < started; t++)
            pthread_join(th[t], NULL);
        if (s.err_at != INT_MAX) {
            *err = s.err;
            rc = err->code ? err->code : QK_EIO;
        }
    }
    qk_progress_end(&s.prog);
    pthread_mutex_destroy(&s.mu);
done:
    for (int k = 0; k < QK_SWEEP_MAX_TASKS; k++) {
        free(s.task_buf[k]);
        qk_task_answers_free(&s.base_ans[k]);
    }
    qk_model_file_close(&base);
    text_free(&tv);
    if (rc)
        qk_sweep_result_free(r);
    return rc;
}

/* ---- the plan ----------------------------------------------------------------- */

/* s in single quotes for sh ('\'' for a quote). */
static void shq(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++)
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    fputc('\'', f);
}

/* An absolute path: realpath for what exists, else the working directory + p. */
static char *abs_path(const char *p)
{
    char *r = realpath(p, NULL);
    if (r || p[0] == '/')
        return r ? r : strdup(p);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return strdup(p);
    return qk_path_join(cwd, p);
}

static const char *kv_name(int kv_type) { return kv_type == QK_F32 ? "f32" : "f16"; }

int qk_sweep_plan(const qk_sweep_opts *o, char *const *models, int n_models, const char *parts_dir,
                  int shard_chunks, const char *qk_exe, FILE *out, qk_err *err)
{
    text_view tv;
    int rc = text_prepare(o, models, n_models, &tv, err);
    if (rc)
        return rc;
    const int n_chunk = tv.n_chunk;
    text_free(&tv);
    const int K = shard_chunks > 0 ? shard_chunks : n_chunk;
    char *P = abs_path(parts_dir), *B = abs_path(o->base), *T = abs_path(o->text);
    if (!P || !B || !T) {
        free(P), free(B), free(T);
        return oom(err);
    }
    for (int i = 0; i < n_models && !rc; i++) {
        char *M = abs_path(models[i]);
        if (!M) {
            rc = oom(err);
            break;
        }
        for (int pass = 0; pass <= o->n_tasks; pass++) {
            for (int a = 0; a < (pass == 0 ? n_chunk : 1); a += K) {
                const qk_sweep_taskfile *tf = pass ? &o->task[pass - 1] : NULL;
                fputs("mkdir -p ", out), shq(out, P);
                fputs(" && ", out), shq(out, qk_exe);
                fputs(" kld -q -m ", out), shq(out, M);
                fputs(" --base ", out), shq(out, B);
                char *F = tf ? abs_path(tf->path) : NULL;
                if (tf) {
                    fprintf(out, " --%s %s ", qk_task_kind_name(tf->kind), tf->kind == QK_TASK_MC ? "-bf" : "-f");
                    shq(out, F ? F : tf->path);
                    if (tf->n_tasks)
                        fprintf(out, " --%s-tasks %zu", qk_task_kind_name(tf->kind), tf->n_tasks);
                } else {
                    fputs(" -f ", out), shq(out, T);
                }
                free(F);
                fprintf(out, " -c %d", o->n_ctx);
                if (!tf)
                    fprintf(out, " --chunks %d", n_chunk);
                if (o->n_batch > 0)
                    fprintf(out, " -b %d", o->n_batch);
                fprintf(out, " -t %d --kv-type %s", o->threads, kv_name(o->kv_type));
                char name[96];
                if (tf) {
                    snprintf(name, sizeof name, "m%03d.%s.json", i, qk_task_kind_name(tf->kind));
                } else {
                    const int b = a + K < n_chunk ? a + K : n_chunk;
                    fprintf(out, " --chunk-range %d:%d", a, b);
                    snprintf(name, sizeof name, "m%03d.c%06d-%06d.qkpart", i, a, b);
                }
                char *dst = qk_path_join(P, name);
                fputs(" --partial-out ", out), shq(out, dst ? dst : name);
                free(dst);
                fputs(" >/dev/null\n", out);
            }
        }
        free(M);
    }
    free(P), free(B), free(T);
    if (!rc && fflush(out))
        rc = qk_errf(err, QK_EIO, "cannot write the plan");
    return rc;
}

/* ---- merging a plan's parts ------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* parts_dir/m<i>.c*.qkpart, sorted */
static int list_parts(const char *dir, int i, char ***out, int *n, qk_err *err)
{
    char pre[32];
    snprintf(pre, sizeof pre, "m%03d.c", i);
    DIR *d = opendir(dir);
    if (!d)
        return qk_err_sys(err, dir, "cannot open the parts directory");
    char **v = NULL;
    int k = 0, cap = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t L = strlen(e->d_name);
        if (strncmp(e->d_name, pre, strlen(pre)) || L < 8 || strcmp(e->d_name + L - 7, ".qkpart"))
            continue;
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            char **nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) {
                rc = oom(err);
                break;
            }
            v = nv;
        }
        if (!(v[k] = qk_path_join(dir, e->d_name))) {
            rc = oom(err);
            break;
        }
        k++;
    }
    closedir(d);
    if (!rc)
        qsort(v, (size_t)k, sizeof *v, cmp_str);
    *out = v;
    *n = k;
    return rc;
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int merge_kld(const qk_sweep_opts *o, const text_view *tv, const char *dir, int i,
                     qk_sweep_model *m, qk_err *err)
{
    char **paths = NULL;
    int n = 0;
    int rc = list_parts(dir, i, &paths, &n, err);
    if (rc) {
        free_list(paths, n);
        return rc;
    }
    if (n == 0) {
        rc = qk_errf(err, QK_EINPUT, "%s: no m%03d.c*.qkpart for model %d (%s): run its shards first",
                     dir, i, i, m->path);
        free_list(paths, n);
        return rc;
    }
    qk_kld_acc acc;
    qk_part_info first;
    int last = 0;
    rc = qk_parts_merge(paths, n, &acc, &first, &last, NULL, NULL, err);
    if (!rc && (first.mode != QK_KLD_MODE_KLD || first.n_ctx != o->n_ctx ||
                first.n_chunk != tv->n_chunk || first.tokens_hash != tv->hash))
        rc = qk_errf(err, QK_EINPUT, "%s: another run (mode, -c, --chunks or text differ from these "
                     "options)", paths[0]);
    if (!rc && (first.chunk_a != 0 || last != tv->n_chunk))
        rc = qk_errf(err, QK_EINPUT, "%s: the parts of model %d cover chunks %d..%d of 0..%d", dir, i,
                     first.chunk_a, last - 1, tv->n_chunk - 1);
    if (!rc) {
        qk_kld_summarize(&acc, &m->kld);
        m->tokens = acc.count;
    }
    qk_kld_acc_free(&acc);
    free_list(paths, n);
    return rc;
}

/* A task part (qk-kld's --json report): the answers of the model and the base. */
static int read_task_part(const char *path, int kind, qk_task_answers *a, qk_task_answers *b,
                          int *n_file, qk_err *err)
{
    char *buf = NULL;
    size_t n = 0;
    qk_jsonv *root = NULL;
    qk_jsonp_err je;
    int rc = qk_read_file(path, false, &buf, &n, err);
    if (rc)
        return rc;
    if (qk_jsonp_parse(buf, n, 0, &root, &je)) {
        rc = qk_err_at(err, path, "json", je.off, "%s", je.msg);
        goto done;
    }
    const char *mode = qk_jsonv_get_str(root, "mode", "");
    const qk_jsonv *ans = qk_jsonv_get(root, "answers");
    const int64_t nt = qk_jsonv_get_i64(root, "tasks", -1);
    if (strcmp(mode, qk_task_kind_name(kind)) || !qk_jsonv_is(ans, QK_JARR) || nt < 0 ||
        (int64_t)qk_jsonv_len(ans) != nt || nt > (1 << 30)) {
        rc = qk_errf(err, QK_EINPUT, "%s: not a qk-kld --%s report with a base", path,
                     qk_task_kind_name(kind));
        goto done;
    }
    *n_file = (int)qk_jsonv_get_i64(root, "tasks_in_file", 0);
    const int N = (int)nt;
    qk_task_answers *ab[2] = {a, b};
    for (int w = 0; w < 2; w++) {
        memset(ab[w], 0, sizeof *ab[w]);
        ab[w]->n = N;
        ab[w]->pick = calloc((size_t)(N ? N : 1), sizeof *ab[w]->pick);
        ab[w]->correct = calloc((size_t)(N ? N : 1), 1);
        if (!ab[w]->pick || !ab[w]->correct) {
            rc = oom(err);
            goto done;
        }
    }
    for (int t = 0; t < N; t++) {
        const qk_jsonv *e = qk_jsonv_at(ans, (size_t)t);
        int64_t p = -1, bp = -1;
        bool c = false, bc = false;
        if (!qk_jsonv_i64(qk_jsonv_get(e, "pick"), &p) || !qk_jsonv_i64(qk_jsonv_get(e, "base_pick"), &bp) ||
            !qk_jsonv_bool(qk_jsonv_get(e, "correct"), &c) ||
            !qk_jsonv_bool(qk_jsonv_get(e, "base_correct"), &bc) || p < 0 || bp < 0 || p > 100 || bp > 100) {
            rc = qk_err_at(err, path, "answers", e ? e->off : 0, "answer %d lacks pick, correct, "
                           "base_pick or base_correct", t + 1);
            goto done;
        }
        a->pick[t] = (int)p, a->correct[t] = c;
        b->pick[t] = (int)bp, b->correct[t] = bc;
    }
done:
    qk_jsonv_free(root);
    free(buf);
    return rc;
}

static bool same_answers(const qk_task_answers *x, const qk_task_answers *y)
{
    if (x->n != y->n)
        return false;
    for (int i = 0; i < x->n; i++)
        if (x->pick[i] != y->pick[i] || x->correct[i] != y->correct[i])
            return false;
    return true;
}

int qk_sweep_merge(const qk_sweep_opts *o, char *const *models, int n_models, const char *parts_dir,
                   qk_sweep_result *r, qk_err *err)
{
    text_view tv;
    int rc = text_prepare(o, models, n_models, &tv, err);
    if (rc)
        return rc;
    qk_task_answers base0[QK_SWEEP_MAX_TASKS];
    memset(base0, 0, sizeof base0);
    if ((rc = result_init(r, o, n_models, tv.n_chunk, err)))
        goto done;
    for (int i = 0; i < n_models && !rc; i++) {
        qk_sweep_model *m = &r->m[i];
        m->path = models[i];
        if ((rc = merge_kld(o, &tv, parts_dir, i, m, err)))
            break;
        for (int k = 0; k < o->n_tasks && !rc; k++) {
            char name[64];
            snprintf(name, sizeof name, "m%03d.%s.json", i, qk_task_kind_name(o->task[k].kind));
            char *path = qk_path_join(parts_dir, name);
            qk_task_answers a, b;
            memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
            int n_file = 0;
            if (!path)
                rc = oom(err);
            else if (!(rc = read_task_part(path, o->task[k].kind, &a, &b, &n_file, err))) {
                m->task[k].kind = o->task[k].kind;
                m->task[k].n = a.n;
                qk_task_compare(&a, &b, &m->task[k].cmp);
                if (i == 0) {
                    base0[k] = b;
                    memset(&b, 0, sizeof b);
                    r->task_file_n[k] = n_file;
                    r->base_task[k] = m->task[k].cmp.base;
                } else if (!same_answers(&b, &base0[k])) {
                    rc = qk_errf(err, QK_EINPUT, "%s: the base's answers differ from those in "
                                 "m000.%s.json (another base or task file)", path,
                                 qk_task_kind_name(o->task[k].kind));
                }
            }
            qk_task_answers_free(&a);
            qk_task_answers_free(&b);
            free(path);
        }
    }
done:
    for (int k = 0; k < QK_SWEEP_MAX_TASKS; k++)
        qk_task_answers_free(&base0[k]);
    text_free(&tv);
    if (rc)
        qk_sweep_result_free(r);
    return rc;
}
