/* bench_report.c - one table, three renderings (see bench_report.h). */
#include "lib/bench/bench_report.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/json.h"

int qk_report_fmt_parse(const char *s, qk_report_fmt *out, qk_err *err)
{
    static const char *const names[] = {"md", "csv", "json"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (qk_report_fmt)i;
            return 0;
        }
    return qk_errf(err, QK_EINPUT, "-o: unknown output format '%s' (md, csv or json)", s);
}

void qk_report_init(qk_report *r, const char *command, const qk_col *cols, int ncols)
{
    memset(r, 0, sizeof *r);
    r->command = command;
    r->cols = cols;
    r->ncols = ncols;
}

static void cell_free(qk_cell *c)
{
    free(c->s);
    free(c->samples);
    memset(c, 0, sizeof *c);
}

void qk_report_free(qk_report *r)
{
    for (int i = 0; i < r->nrows * r->ncols; i++)
        cell_free(&r->cells[i]);
    for (int i = 0; i < r->nmeta; i++) {
        free(r->meta_keys[i]);
        cell_free(&r->meta[i]);
    }
    for (int i = 0; i < r->nnotes; i++)
        free(r->notes[i]);
    free(r->cells);
    free(r->meta_keys);
    free(r->meta);
    free(r->notes);
    memset(r, 0, sizeof *r);
}

/* Grow an array of *cap elements of size elt to hold n; false on failure. */
static bool grow(void **p, int *cap, int n, size_t elt)
{
    if (n <= *cap)
        return true;
    int nc = *cap ? *cap * 2 : 8;
    while (nc < n)
        nc *= 2;
    void *q = realloc(*p, (size_t)nc * elt);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

void qk_report_row(qk_report *r)
{
    if (r->oom)
        return;
    void *p = r->cells;
    int cap = r->cap_rows * r->ncols, need = (r->nrows + 1) * r->ncols;
    if (!grow(&p, &cap, need, sizeof(qk_cell))) {
        r->oom = true;
        return;
    }
    r->cells = p;
    r->cap_rows = cap / (r->ncols ? r->ncols : 1);
    memset(&r->cells[r->nrows * r->ncols], 0, (size_t)r->ncols * sizeof(qk_cell));
    r->nrows++;
}

static qk_cell *cur(qk_report *r, int col)
{
    if (r->oom || r->nrows == 0 || col < 0 || col >= r->ncols)
        return NULL;
    qk_cell *c = &r->cells[(r->nrows - 1) * r->ncols + col];
    cell_free(c);
    return c;
}

static void set_str(qk_report *r, qk_cell *c, const char *s)
{
    c->kind = QK_CELL_STR;
    if (!(c->s = strdup(s ? s : ""))) {
        c->kind = QK_CELL_NONE;
        r->oom = true;
    }
}

void qk_report_str(qk_report *r, int col, const char *s)
{
    qk_cell *c = cur(r, col);
    if (c)
        set_str(r, c, s);
}

void qk_report_int(qk_report *r, int col, int64_t v)
{
    qk_cell *c = cur(r, col);
    if (c)
        *c = (qk_cell){.kind = QK_CELL_INT, .i = v};
}

void qk_report_num(qk_report *r, int col, double v)
{
    qk_cell *c = cur(r, col);
    if (c)
        *c = (qk_cell){.kind = QK_CELL_NUM, .x = v};
}

void qk_report_stats(qk_report *r, int col, const double *samples, int n)
{
    qk_cell *c = cur(r, col);
    if (!c)
        return;
    if (n > QK_STATS_MAX)
        n = QK_STATS_MAX;
    c->kind = QK_CELL_STATS;
    c->st = qk_stats_of(samples, n);
    if (n > 0) {
        if (!(c->samples = malloc((size_t)n * sizeof *c->samples))) {
            c->kind = QK_CELL_NONE;
            r->oom = true;
            return;
        }
        memcpy(c->samples, samples, (size_t)n * sizeof *c->samples);
    }
}

static qk_cell *meta_slot(qk_report *r, const char *key)
{
    if (r->oom)
        return NULL;
    for (int i = 0; i < r->nmeta; i++)
        if (strcmp(r->meta_keys[i], key) == 0) {
            cell_free(&r->meta[i]);
            return &r->meta[i];
        }
    void *pk = r->meta_keys, *pm = r->meta;
    int ck = r->cap_meta, cm = r->cap_meta;
    bool ok = grow(&pk, &ck, r->nmeta + 1, sizeof(char *));
    r->meta_keys = pk;
    ok = ok && grow(&pm, &cm, r->nmeta + 1, sizeof(qk_cell));
    r->meta = pm;
    char *k = ok ? strdup(key) : NULL;
    if (!k) {
        r->oom = true;
        return NULL;
    }
    r->cap_meta = ck < cm ? ck : cm;
    r->meta_keys[r->nmeta] = k;
    qk_cell *c = &r->meta[r->nmeta++];
    memset(c, 0, sizeof *c);
    return c;
}

void qk_report_meta_str(qk_report *r, const char *key, const char *s)
{
    qk_cell *c = meta_slot(r, key);
    if (c)
        set_str(r, c, s);
}

void qk_report_meta_int(qk_report *r, const char *key, int64_t v)
{
    qk_cell *c = meta_slot(r, key);
    if (c)
        *c = (qk_cell){.kind = QK_CELL_INT, .i = v};
}

void qk_report_meta_num(qk_report *r, const char *key, double v, const char *fmt)
{
    qk_cell *c = meta_slot(r, key);
    if (c)
        *c = (qk_cell){.kind = QK_CELL_NUM, .x = v, .fmt = fmt};
}

void qk_report_note(qk_report *r, const char *fmt, ...)
{
    if (r->oom)
        return;
    void *p = r->notes;
    if (!grow(&p, &r->cap_notes, r->nnotes + 1, sizeof(char *))) {
        r->oom = true;
        return;
    }
    r->notes = p;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (!s) {
        r->oom = true;
        return;
    }
    r->notes[r->nnotes++] = s;
}

/* ---- rendering ---------------------------------------------------------------- */

#define CELL_MAX 96

/* A cell as md text into buf[CELL_MAX]; sets *num when it is a number. */
static void md_text(const qk_cell *c, const char *fmt, char *buf, bool *num)
{
    const char *f = fmt ? fmt : "%.3g";
    *num = c->kind == QK_CELL_INT || c->kind == QK_CELL_NUM || c->kind == QK_CELL_STATS;
    switch (c->kind) {
    case QK_CELL_NONE: snprintf(buf, CELL_MAX, "-"); break;
    case QK_CELL_STR: snprintf(buf, CELL_MAX, "%s", c->s); break;
    case QK_CELL_INT: snprintf(buf, CELL_MAX, "%lld", (long long)c->i); break;
    case QK_CELL_NUM: snprintf(buf, CELL_MAX, f, c->x); break;
    case QK_CELL_STATS: {
        char m[CELL_MAX / 2 - 4], s[CELL_MAX / 2 - 4];
        snprintf(m, sizeof m, f, c->st.mean);
        snprintf(s, sizeof s, f, c->st.sd);
        snprintf(buf, CELL_MAX, "%s ± %s", m, s);
        break;
    }
    }
}

/* Display width of UTF-8 text (code points; "±" is one column). */
static int width(const char *s)
{
    int w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

static void pad(FILE *f, int n)
{
    for (int i = 0; i < n; i++)
        fputc(' ', f);
}

static int write_md(const qk_report *r, FILE *f)
{
    const int nc = r->ncols;
    int *w = calloc((size_t)nc, sizeof *w);
    bool *num = calloc((size_t)nc, sizeof *num);
    if (!w || !num) {
        free(w);
        free(num);
        return -1;
    }
    char buf[CELL_MAX];
    for (int j = 0; j < nc; j++) {
        if (r->cols[j].md_hide)
            continue;
        w[j] = width(r->cols[j].title);
        bool str = false; /* a column of numbers, or of nothing but a number format, is right-aligned */
        for (int i = 0; i < r->nrows; i++) {
            bool isnum;
            md_text(&r->cells[i * nc + j], r->cols[j].fmt, buf, &isnum);
            num[j] |= isnum;
            str |= r->cells[i * nc + j].kind == QK_CELL_STR;
            w[j] = width(buf) > w[j] ? width(buf) : w[j];
        }
        num[j] |= !str && r->cols[j].fmt;
        if (w[j] < 3)
            w[j] = 3;
    }
    for (int j = 0; j < nc; j++) {
        if (r->cols[j].md_hide)
            continue;
        fprintf(f, "| %s", r->cols[j].title);
        pad(f, w[j] - width(r->cols[j].title) + 1);
    }
    fputs("|\n", f);
    for (int j = 0; j < nc; j++) {
        if (r->cols[j].md_hide)
            continue;
        fputs("| ", f);
        for (int k = 0; k < w[j] - 1; k++)
            fputc('-', f);
        fputs(num[j] ? ": " : "- ", f);
    }
    fputs("|\n", f);
    for (int i = 0; i < r->nrows; i++) {
        for (int j = 0; j < nc; j++) {
            if (r->cols[j].md_hide)
                continue;
            bool isnum;
            md_text(&r->cells[i * nc + j], r->cols[j].fmt, buf, &isnum);
            fputs("| ", f);
            if (num[j])
                pad(f, w[j] - width(buf));
            fputs(buf, f);
            if (!num[j])
                pad(f, w[j] - width(buf));
            fputc(' ', f);
        }
        fputs("|\n", f);
    }
    free(w);
    free(num);
    if (r->nmeta || r->nnotes)
        fputc('\n', f);
    for (int i = 0; i < r->nmeta; i++) {
        bool isnum;
        md_text(&r->meta[i], r->meta[i].fmt, buf, &isnum);
        fprintf(f, "%s: %s\n", r->meta_keys[i], buf);
    }
    if (r->nmeta && r->nnotes)
        fputc('\n', f);
    for (int i = 0; i < r->nnotes; i++)
        fprintf(f, "%s\n", r->notes[i]);
    return 0;
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* A column is a statistics column when any of its cells is. */
static bool stats_col(const qk_report *r, int j)
{
    for (int i = 0; i < r->nrows; i++)
        if (r->cells[i * r->ncols + j].kind == QK_CELL_STATS)
            return true;
    return false;
}

static void write_csv(const qk_report *r, FILE *f)
{
    static const char *const parts[] = {"mean", "sd", "median"};
    for (int j = 0; j < r->ncols; j++) {
        if (stats_col(r, j)) {
            for (int k = 0; k < 3; k++) {
                char h[128];
                snprintf(h, sizeof h, "%s_%s", r->cols[j].key, parts[k]);
                fputs(j || k ? "," : "", f);
                csv_field(f, h);
            }
        } else {
            fputs(j ? "," : "", f);
            csv_field(f, r->cols[j].key);
        }
    }
    fputs("\r\n", f);
    for (int i = 0; i < r->nrows; i++) {
        for (int j = 0; j < r->ncols; j++) {
            const qk_cell *c = &r->cells[i * r->ncols + j];
            const bool sc = stats_col(r, j);
            fputs(j ? "," : "", f);
            switch (c->kind) {
            case QK_CELL_NONE: fputs(sc ? ",," : "", f); break;
            case QK_CELL_STR: csv_field(f, c->s); break;
            case QK_CELL_INT: fprintf(f, "%lld", (long long)c->i); break;
            case QK_CELL_NUM: fprintf(f, "%.6g", c->x); break;
            case QK_CELL_STATS:
                fprintf(f, "%.6g,%.6g,%.6g", c->st.mean, c->st.sd, c->st.median);
                break;
            }
        }
        fputs("\r\n", f);
    }
}

static void json_cell(qk_json *j, const qk_cell *c)
{
    switch (c->kind) {
    case QK_CELL_NONE: qk_json_null(j); break;
    case QK_CELL_STR: qk_json_str(j, c->s); break;
    case QK_CELL_INT: qk_json_int(j, c->i); break;
    case QK_CELL_NUM: qk_json_f64(j, c->x); break;
    case QK_CELL_STATS:
        qk_json_obj(j);
        qk_json_key(j, "mean"), qk_json_f64(j, c->st.mean);
        qk_json_key(j, "sd"), qk_json_f64(j, c->st.sd);
        qk_json_key(j, "median"), qk_json_f64(j, c->st.median);
        qk_json_key(j, "min"), qk_json_f64(j, c->st.min);
        qk_json_key(j, "max"), qk_json_f64(j, c->st.max);
        qk_json_key(j, "n"), qk_json_int(j, c->st.n);
        qk_json_key(j, "samples");
        qk_json_arr(j);
        for (int i = 0; i < c->st.n; i++)
            qk_json_f64(j, c->samples[i]);
        qk_json_end_arr(j);
        qk_json_end_obj(j);
        break;
    }
}

static void write_json(const qk_report *r, FILE *f)
{
    qk_json j;
    qk_json_init(&j, f, true);
    qk_json_obj(&j);
    qk_json_key(&j, "command"), qk_json_str(&j, r->command);
    qk_json_key(&j, "meta");
    qk_json_obj(&j);
    for (int i = 0; i < r->nmeta; i++) {
        qk_json_key(&j, r->meta_keys[i]);
        json_cell(&j, &r->meta[i]);
    }
    qk_json_end_obj(&j);
    qk_json_key(&j, "rows");
    qk_json_arr(&j);
    for (int i = 0; i < r->nrows; i++) {
        qk_json_obj(&j);
        for (int k = 0; k < r->ncols; k++) {
            qk_json_key(&j, r->cols[k].key);
            json_cell(&j, &r->cells[i * r->ncols + k]);
        }
        qk_json_end_obj(&j);
    }
    qk_json_end_arr(&j);
    qk_json_key(&j, "notes");
    qk_json_arr(&j);
    for (int i = 0; i < r->nnotes; i++)
        qk_json_str(&j, r->notes[i]);
    qk_json_end_arr(&j);
    qk_json_end_obj(&j);
    qk_json_done(&j);
}

int qk_report_write(const qk_report *r, qk_report_fmt fmt, FILE *f, qk_err *err)
{
    if (r->oom)
        return qk_errf(err, QK_EIO, "out of memory while building the report");
    switch (fmt) {
    case QK_REPORT_MD:
        if (write_md(r, f))
            return qk_errf(err, QK_EIO, "out of memory while writing the report");
        break;
    case QK_REPORT_CSV: write_csv(r, f); break;
    case QK_REPORT_JSON: write_json(r, f); break;
    }
    return 0;
}
