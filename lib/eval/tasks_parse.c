/* tasks_parse.c - the three task files as llama-perplexity reads them
 * (perplexity.cpp: hellaswag_score's line reader, load_winogrande_from_csv,
 * multiple_choice_task::deserialize) and its selection of tasks; see
 * tasks.h.  Every parser works on a buffer. */
#include "lib/eval/tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *qk_task_kind_name(int kind)
{
    return kind == QK_TASK_HELLASWAG ? "hellaswag" : kind == QK_TASK_WINOGRANDE ? "winogrande"
                                                                                 : "multiple-choice";
}

const char *qk_task_kind_title(int kind)
{
    return kind == QK_TASK_HELLASWAG ? "HellaSwag" : kind == QK_TASK_WINOGRANDE ? "Winogrande"
                                                                                 : "Multiple choice";
}

static void task_free(qk_task *t)
{
    for (int c = 0; c < t->n_cand; c++) {
        if (t->text)
            free(t->text[c]);
        if (t->base)
            free(t->base[c]);
    }
    free(t->text), free(t->base), free(t->correct);
    memset(t, 0, sizeof *t);
}

void qk_taskset_free(qk_taskset *ts)
{
    for (int i = 0; ts->t && i < ts->n; i++)
        task_free(&ts->t[i]);
    free(ts->t);
    memset(ts, 0, sizeof *ts);
}

void qk_task_where(const qk_taskset *ts, int i, char *buf, size_t n)
{
    const qk_task *t = &ts->t[i];
    if (t->line)
        snprintf(buf, n, "line %d", t->line);
    else
        snprintf(buf, n, "task %d at offset %llu", t->index, (unsigned long long)t->offset);
}

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "out of memory"); }

/* a + b + c as one malloc'd string */
static char *cat3(const char *a, size_t na, const char *b, size_t nb, const char *c, size_t nc)
{
    char *s = malloc(na + nb + nc + 1);
    if (!s)
        return NULL;
    memcpy(s, a, na);
    memcpy(s + na, b, nb);
    memcpy(s + na + nb, c, nc);
    s[na + nb + nc] = 0;
    return s;
}

static int task_alloc(qk_task *t, int n_cand, bool base)
{
    t->n_cand = n_cand;
    t->text = calloc((size_t)n_cand, sizeof *t->text);
    t->correct = calloc((size_t)n_cand, 1);
    t->base = base ? calloc((size_t)n_cand, sizeof *t->base) : NULL;
    return t->text && t->correct && (!base || t->base) ? 0 : -1;
}

/* ---- lines (std::getline on '\n') ------------------------------------------ */

typedef struct {
    const char *s;
    size_t n;
} span;

/* The lines getline yields: '\n'-separated; the rest after the last '\n'
 * only when not empty (terminated_only: not at all, Winogrande's loop). */
static int split_lines(const char *buf, size_t n, bool terminated_only, span **out, size_t *count)
{
    size_t cap = 0, k = 0;
    span *v = NULL;
    size_t i = 0;
    while (i < n) {
        const char *nl = memchr(buf + i, '\n', n - i);
        const size_t end = nl ? (size_t)(nl - buf) : n;
        if (!nl && terminated_only)
            break;
        if (k == cap) {
            cap = cap ? 2 * cap : 1024;
            span *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                free(v);
                return -1;
            }
            v = nv;
        }
        v[k++] = (span){buf + i, end - i};
        i = end + 1;
    }
    *out = v;
    *count = k;
    return 0;
}

/* An integer, optionally surrounded by blanks (' ', '\t', '\r'). */
static bool parse_small_int(span s, long *v)
{
    size_t i = 0;
    while (i < s.n && (s.s[i] == ' ' || s.s[i] == '\t' || s.s[i] == '\r'))
        i++;
    bool neg = false;
    if (i < s.n && (s.s[i] == '+' || s.s[i] == '-'))
        neg = s.s[i++] == '-';
    size_t d0 = i;
    long x = 0;
    while (i < s.n && s.s[i] >= '0' && s.s[i] <= '9' && i - d0 < 9)
        x = 10 * x + (s.s[i++] - '0');
    if (i == d0)
        return false;
    while (i < s.n && (s.s[i] == ' ' || s.s[i] == '\t' || s.s[i] == '\r'))
        i++;
    *v = neg ? -x : x;
    return i == s.n;
}

/* ---- HellaSwag -------------------------------------------------------------- */

static int parse_hellaswag(qk_taskset *ts, const char *buf, size_t n, size_t max_tasks,
                           const char *path, qk_err *err)
{
    span *ln = NULL;
    size_t nl = 0;
    int *left = NULL;
    if (split_lines(buf, n, false, &ln, &nl))
        return oom(err);
    int rc = 0;
    if (nl == 0) {
        rc = qk_errf(err, QK_EINPUT, "%s: no tasks (HellaSwag: 6 lines per task)", path);
        goto done;
    }
    if (nl % 6 || nl / 6 > (1u << 30)) {
        rc = qk_errf(err, QK_EINPUT, "%s: line %zu: the file ends inside task %zu (%zu lines; "
                     "HellaSwag has 6 lines per task)", path, nl, nl / 6, nl);
        goto done;
    }
    const size_t n_file = nl / 6;
    for (size_t t = 0; t < n_file; t++) {
        long g;
        if (!parse_small_int(ln[6 * t + 1], &g) || g < 0 || g > 3) {
            rc = qk_errf(err, QK_EINPUT, "%s: line %zu: gold label '%.*s' of task %zu out of range "
                         "(0..3)", path, 6 * t + 2, (int)(ln[6 * t + 1].n > 40 ? 40 : ln[6 * t + 1].n),
                         ln[6 * t + 1].s, t);
            goto done;
        }
    }
    size_t count = max_tasks && max_tasks < n_file ? max_tasks : n_file;
    ts->t = calloc(count, sizeof *ts->t);
    left = malloc(n_file * sizeof *left);
    if (!ts->t || !left) {
        rc = oom(err);
        goto done;
    }
    ts->n_file = (int)n_file;
    for (size_t t = 0; t < n_file; t++)
        left[t] = (int)t;
    /* std::mt19937 rng(1); per task: uniform_int_distribution<size_t>(0, left - 1),
     * then the chosen task is erased from the lines */
    qk_mt19937 rng;
    qk_mt_seed(&rng, 1);
    size_t n_left = n_file;
    for (size_t i = 0; i < count; i++) {
        const size_t j = (size_t)qk_mt_uniform(&rng, n_left - 1);
        const int idx = left[j];
        memmove(left + j, left + j + 1, (n_left - j - 1) * sizeof *left);
        n_left--;
        qk_task *t = &ts->t[ts->n++];
        if (task_alloc(t, 4, false)) {
            rc = oom(err);
            goto done;
        }
        t->index = idx;
        t->line = 6 * idx + 1;
        const span c = ln[6 * idx];
        long g;
        parse_small_int(ln[6 * idx + 1], &g);
        t->correct[g] = 1;
        for (int e = 0; e < 4; e++) {
            const span s = ln[6 * idx + 2 + e];
            if (!(t->text[e] = cat3(c.s, c.n, " ", 1, s.s, s.n))) {
                rc = oom(err);
                goto done;
            }
        }
    }
done:
    free(ln), free(left);
    return rc;
}

/* ---- Winogrande ------------------------------------------------------------- */

typedef struct {
    span first, second, choice[2];
    int answer;
    int line;
} wino_row;

/* One CSV line as load_winogrande_from_csv reads it; 1: skipped (a header
 * on the first line), -1: malformed (err set). */
static int wino_line(span s, int line_no, const char *path, wino_row *w, qk_err *err)
{
    size_t comma[4];
    int ipos = 0;
    bool quote = false;
    for (size_t i = 0; i < s.n && ipos < 4; i++) {
        if (!quote) {
            if (s.s[i] == ',')
                comma[ipos++] = i;
            else if (s.s[i] == '"')
                quote = true;
        } else if (s.s[i] == '"') {
            quote = false;
        }
    }
    if (ipos != 4) {
        qk_errf(err, QK_EINPUT, "%s: line %d: not index,sentence,option1,option2,answer (%d "
                "separating commas)", path, line_no, ipos);
        return -1;
    }
    span sent;
    if (s.s[comma[0] + 1] == '"')
        sent = (span){s.s + comma[0] + 2, comma[1] - comma[0] - 3};
    else
        sent = (span){s.s + comma[0] + 1, comma[1] - comma[0] - 1};
    const char *us = memchr(sent.s, '_', sent.n);
    if (!us) {
        if (line_no == 1)
            return 1;
        qk_errf(err, QK_EINPUT, "%s: line %d: the sentence has no '_' to fill", path, line_no);
        return -1;
    }
    long a;
    span ans = {s.s + comma[3] + 1, s.n - comma[3] - 1};
    if (!parse_small_int(ans, &a) || a < 1 || a > 2) {
        if (line_no == 1 && !parse_small_int(ans, &a))
            return 1;
        qk_errf(err, QK_EINPUT, "%s: line %d: answer '%.*s' out of range (1 or 2)", path, line_no,
                (int)(ans.n > 40 ? 40 : ans.n), ans.s);
        return -1;
    }
    w->first = (span){sent.s, (size_t)(us - sent.s)};
    w->second = (span){us + 1, sent.n - (size_t)(us - sent.s) - 1};
    w->choice[0] = (span){s.s + comma[1] + 1, comma[2] - comma[1] - 1};
    w->choice[1] = (span){s.s + comma[2] + 1, comma[3] - comma[2] - 1};
    w->answer = (int)a;
    w->line = line_no;
    return 0;
}

static int wino_task(qk_task *t, const wino_row *w, int index)
{
    if (task_alloc(t, 2, true))
        return -1;
    t->index = index;
    t->line = w->line;
    t->correct[w->answer - 1] = 1;
    for (int c = 0; c < 2; c++) {
        t->text[c] = cat3(w->first.s, w->first.n, w->choice[c].s, w->choice[c].n, w->second.s,
                          w->second.n);
        t->base[c] = cat3(w->first.s, w->first.n, w->choice[c].s, w->choice[c].n, "", 0);
        if (!t->text[c] || !t->base[c])
            return -1;
    }
    return 0;
}

/* The shared draw of Winogrande and multiple choice: aux = 0..n-1; per task
 * j = int(scale * rng() * aux.size()), take aux[j], aux[j] = aux.back(). */
static int draw_tasks(size_t n, size_t count, int *out, const char *path, qk_err *err)
{
    int *aux = malloc(n * sizeof *aux);
    if (!aux)
        return oom(err);
    for (size_t i = 0; i < n; i++)
        aux[i] = (int)i;
    qk_mt19937 rng;
    qk_mt_seed(&rng, 1);
    size_t left = n;
    for (size_t i = 0; i < count; i++) {
        const int64_t j = qk_mt_draw_float(&rng, left);
        if (j < 0 || (size_t)j >= left) {
            free(aux);
            return qk_errf(err, QK_EINPUT, "%s: draw %zu of %zu tasks rounds to index %lld of %zu "
                           "(llama-perplexity reads past its array here); choose another count",
                           path, i, count, (long long)j, left);
        }
        out[i] = aux[j];
        aux[j] = aux[--left];
    }
    free(aux);
    return 0;
}

static int parse_winogrande(qk_taskset *ts, const char *buf, size_t n, size_t max_tasks,
                            const char *path, qk_err *err)
{
    span *ln = NULL;
    size_t nl = 0;
    wino_row *rows = NULL;
    int *pick = NULL;
    if (split_lines(buf, n, true, &ln, &nl))
        return oom(err);
    int rc = 0;
    size_t nr = 0;
    rows = malloc((nl ? nl : 1) * sizeof *rows);
    if (!rows) {
        rc = oom(err);
        goto done;
    }
    for (size_t i = 0; i < nl; i++) {
        if (nl > (1u << 30)) {
            rc = qk_errf(err, QK_EINPUT, "%s: more than 2^30 lines", path);
            goto done;
        }
        const int r = wino_line(ln[i], (int)i + 1, path, &rows[nr], err);
        if (r < 0) {
            rc = err->code;
            goto done;
        }
        nr += r == 0;
    }
    if (nr == 0) {
        rc = qk_errf(err, QK_EINPUT, "%s: no tasks (Winogrande: lines "
                     "index,sentence,option1,option2,answer ending in a newline)", path);
        goto done;
    }
    const size_t count = max_tasks && max_tasks < nr ? max_tasks : nr;
    ts->n_file = (int)nr;
    ts->t = calloc(count, sizeof *ts->t);
    pick = malloc(count * sizeof *pick);
    if (!ts->t || !pick) {
        rc = oom(err);
        goto done;
    }
    if (count < nr) {
        if ((rc = draw_tasks(nr, count, pick, path, err)))
            goto done;
    } else {
        for (size_t i = 0; i < count; i++)
            pick[i] = (int)i;
    }
    for (size_t i = 0; i < count; i++)
        if (wino_task(&ts->t[ts->n++], &rows[pick[i]], pick[i])) {
            rc = oom(err);
            goto done;
        }
done:
    free(ln), free(rows), free(pick);
    return rc;
}

/* ---- multiple choice (binary) ----------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t n, off;
} rd;

static bool rd_u32(rd *r, uint32_t *v)
{
    if (r->n - r->off < 4)
        return false;
    const uint8_t *b = r->p + r->off;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    r->off += 4;
    return true;
}

static bool rd_str(rd *r, span *s)
{
    uint32_t len;
    if (!rd_u32(r, &len) || r->n - r->off < len)
        return false;
    *s = (span){(const char *)r->p + r->off, len};
    r->off += len;
    return true;
}

/* multiple_choice_task::deserialize at r->off, then multiple_choice_prepare_one_task's checks. */
static int mc_task(qk_task *t, rd *r, int index, const char *path, qk_err *err)
{
    const uint64_t at = r->off;
    span q, ans[100];
    int32_t lab[100];
    uint32_t n1 = 0;
#define MC_BAD(...) qk_errf(err, QK_EINPUT, "%s: task %d at offset %llu: " __VA_ARGS__)
    if (!rd_str(r, &q))
        return MC_BAD("truncated question", path, index, (unsigned long long)at);
    for (int set = 0; set < 2; set++) {
        uint32_t n;
        if (!rd_u32(r, &n))
            return MC_BAD("truncated mc%d answer count", path, index, (unsigned long long)at, set + 1);
        if (n > 100)
            return MC_BAD("mc%d has %u answers (at most 100)", path, index, (unsigned long long)at,
                          set + 1, n);
        for (uint32_t k = 0; k < n; k++) {
            span s;
            if (!rd_str(r, &s))
                return MC_BAD("truncated mc%d answer %u", path, index, (unsigned long long)at,
                              set + 1, k);
            if (set == 0)
                ans[k] = s;
        }
        for (uint32_t k = 0; k < n; k++) {
            uint32_t v;
            if (!rd_u32(r, &v))
                return MC_BAD("truncated mc%d labels", path, index, (unsigned long long)at, set + 1);
            if (v > 1)
                return MC_BAD("mc%d label %u is %d (0 or 1)", path, index, (unsigned long long)at,
                              set + 1, k, (int32_t)v);
            if (set == 0)
                lab[k] = (int32_t)v;
        }
        if (set == 0)
            n1 = n;
    }
    if (q.n == 0 || n1 == 0)
        return MC_BAD("empty question or no mc1 answers", path, index, (unsigned long long)at);
    if (task_alloc(t, (int)n1, false))
        return oom(err);
    t->index = index;
    t->offset = at;
    for (uint32_t k = 0; k < n1; k++) {
        if (ans[k].n == 0)
            return MC_BAD("mc1 answer %u is empty", path, index, (unsigned long long)at, k);
        if (!(t->text[k] = cat3(q.s, q.n, " ", 1, ans[k].s, ans[k].n)))
            return oom(err);
        t->correct[k] = lab[k] == 1;
    }
#undef MC_BAD
    return 0;
}

static int parse_mc(qk_taskset *ts, const char *buf, size_t n, size_t max_tasks, const char *path,
                    qk_err *err)
{
    rd r = {(const uint8_t *)buf, n, 0};
    uint32_t n_task;
    if (!rd_u32(&r, &n_task) || n_task == 0)
        return qk_errf(err, QK_EINPUT, "%s: offset 0: %s", path, n < 4 ? "truncated task count" : "no tasks");
    if ((uint64_t)n_task * 4 > n - 4 || n_task > (1u << 28))
        return qk_errf(err, QK_EINPUT, "%s: offset 4: truncated: %u task offsets need %llu bytes, "
                       "the file has %zu", path, n_task, 4ull * n_task + 4, n);
    const size_t count = max_tasks && max_tasks < n_task ? max_tasks : n_task;
    ts->n_file = (int)n_task;
    ts->t = calloc(count, sizeof *ts->t);
    if (!ts->t)
        return oom(err);
    int rc = 0;
    if (count == n_task) { /* all tasks, read one after the other */
        r.off = 4 + 4 * (size_t)n_task;
        for (size_t i = 0; i < count && !rc; i++)
            rc = mc_task(&ts->t[ts->n++], &r, (int)i, path, err);
        return rc;
    }
    int *pick = malloc(count * sizeof *pick);
    if (!pick)
        return oom(err);
    if (!(rc = draw_tasks(n_task, count, pick, path, err)))
        for (size_t i = 0; i < count && !rc; i++) {
            rd p = r;
            p.off = 4 + 4 * (size_t)pick[i];
            uint32_t pos = 0;
            rd_u32(&p, &pos); /* inside the offsets checked above */
            if (pos > n) {
                rc = qk_errf(err, QK_EINPUT, "%s: offset %zu: task %d at offset %u, past the end (%zu "
                             "bytes)", path, 4 + 4 * (size_t)pick[i], pick[i], pos, n);
                break;
            }
            p.off = pos;
            rc = mc_task(&ts->t[ts->n++], &p, pick[i], path, err);
        }
    free(pick);
    return rc;
}

int qk_tasks_parse(qk_taskset *ts, int kind, const char *buf, size_t n, size_t max_tasks,
                   const char *path, qk_err *err)
{
    memset(ts, 0, sizeof *ts);
    ts->kind = kind;
    int rc = kind == QK_TASK_HELLASWAG    ? parse_hellaswag(ts, buf, n, max_tasks, path, err)
             : kind == QK_TASK_WINOGRANDE ? parse_winogrande(ts, buf, n, max_tasks, path, err)
             : kind == QK_TASK_MC         ? parse_mc(ts, buf, n, max_tasks, path, err)
                                          : qk_errf(err, QK_EINPUT, "unknown task kind %d", kind);
    if (rc) {
        qk_taskset_free(ts);
        ts->kind = kind;
    }
    return rc;
}
