/* fuzz_tasks.c - libFuzzer harness for the task files of qk-kld
 * --hellaswag, --winogrande and --multiple-choice (lib/eval/tasks_parse.c:
 * llama-perplexity's readers, the mt19937 draws of a task subset), then the
 * tokenization check that every selected task can be scored
 * (qk_tasks_tokenize, with stories260K's tokenizer when the harness runs
 * from the repository root).  Input: one byte choosing the kind (byte % 3)
 * and the task count asked for (byte / 3 % 8: all, 1, 2, 3, 5, 10, 400 or
 * 2^20), then the file's bytes.  A parsed set has n <= n_file selected tasks
 * with distinct indexes, each with its kind's candidate count, texts and
 * 0/1 labels (exactly one right answer for HellaSwag and Winogrande). */
#include "formats/gguf.h"
#include "lib/engine/tokenizer.h"
#include "lib/eval/tasks.h"
#include "tests/fuzz/fuzz_util.h"

static qk_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    qk_gguf *g = NULL;
    qk_err err = {0};
    if (qk_gguf_open(&g, "goldens/models/stories260K/stories260K-f32.gguf", 0, &err) == 0) {
        tok = qk_tok_from_gguf(g, &err);
        qk_gguf_close(g);
    }
    if (!tok)
        fprintf(stderr, "fuzz_tasks: no stories260K tokenizer (run from the repository root): parsing only\n");
    return 0;
}

static void check_set(const qk_taskset *ts, int kind)
{
    if (ts->kind != kind || ts->n < 1 || ts->n > ts->n_file || !ts->t)
        abort();
    uint8_t *seen = calloc((size_t)ts->n_file, 1);
    if (!seen)
        abort();
    for (int i = 0; i < ts->n; i++) {
        const qk_task *t = &ts->t[i];
        if (t->index < 0 || t->index >= ts->n_file || seen[t->index]++)
            abort();
        const int want = kind == QK_TASK_HELLASWAG ? 4 : kind == QK_TASK_WINOGRANDE ? 2 : 0;
        if ((want && t->n_cand != want) || t->n_cand < 1 || t->n_cand > 100)
            abort();
        int right = 0;
        for (int c = 0; c < t->n_cand; c++) {
            if (!t->text[c] || t->correct[c] > 1 || (kind == QK_TASK_WINOGRANDE && !t->base[c]))
                abort();
            right += t->correct[c];
        }
        if (want && right != 1)
            abort();
        char where[96];
        qk_task_where(ts, i, where, sizeof where);
        if (!where[0])
            abort();
    }
    free(seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const size_t counts[8] = {0, 1, 2, 3, 5, 10, 400, 1u << 20};
    const int kind = QK_TASK_HELLASWAG + data[0] % 3;
    const size_t max_tasks = counts[data[0] / 3 % 8];
    /* a copy of exactly the file's bytes, so that ASan sees a read past them */
    char *buf = malloc(size - 1 ? size - 1 : 1);
    if (!buf)
        abort();
    memcpy(buf, data + 1, size - 1);
    qk_taskset ts = {0};
    qk_err err = {0};
    const char *path = "fuzz-tasks.txt";
    int rc = qk_tasks_parse(&ts, kind, buf, size - 1, max_tasks, path, &err);
    if (rc) {
        fuzz_refused(rc, &err, path);
        free(buf);
        return 0;
    }
    check_set(&ts, kind);
    qk_task_answers a;
    if (qk_task_answers_init(&a, &ts, &err) == 0)
        qk_task_answers_free(&a);
    if (tok) {
        qk_task_toks tt = {0};
        err = (qk_err){0};
        rc = qk_tasks_tokenize(&ts, tok, 32, path, &tt, &err);
        if (rc)
            fuzz_refused(rc, &err, path);
        else {
            if (tt.n != ts.n)
                abort();
            for (int i = 0; i < tt.n; i++)
                if (tt.t[i].required > 4 * 32 || tt.t[i].cp < 1)
                    abort();
            qk_task_toks_free(&tt);
        }
    }
    qk_taskset_free(&ts);
    free(buf);
    return 0;
}
