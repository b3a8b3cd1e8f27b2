/* sweep_render.c - qk-report's report.md, report.json and report.html from
 * plain rows, and the output directory (sweep_report.h). */
#include "lib/report/sweep_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/json.h"
#include "lib/core/outfile.h"

static void size_str(char *buf, size_t n, uint64_t b)
{
    if (b >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, n, "%.2f MiB", (double)b / (double)(1ull << 20));
    else
        snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
}

/* Markdown cell text: '|' escaped. */
static void md_cell(qk_sbuf *b, const char *s)
{
    for (; *s; s++)
        qk_sb_printf(b, *s == '|' ? "\\|" : "%c", *s);
}

#define html_esc qk_rep_xml_esc

/* The cells after the model name, shared by the Markdown and HTML tables. */
enum { N_COLS = 9 };
static const char *const col_title[N_COLS] = {"format", "scheme", "bpw", "size", "PPL ratio",
                                              "Mean KLD", "99% KLD", "same top", ""};

static void cells(const qk_rep *r, const qk_rep_row *w, char out[][96], int *n)
{
    int k = 0;
    snprintf(out[k++], 96, "%s", w->d.format);
    snprintf(out[k++], 96, "%s", w->d.scheme);
    snprintf(out[k++], 96, "%.3f", w->d.bpw);
    size_str(out[k++], 96, w->d.size);
    snprintf(out[k++], 96, "%.4f ± %.4f", w->ppl_ratio, w->ppl_ratio_err);
    if (isfinite(w->kld_lo) && isfinite(w->kld_hi))
        snprintf(out[k++], 96, "%.6f [%.6f, %.6f]", w->kld, w->kld_lo, w->kld_hi);
    else
        snprintf(out[k++], 96, "%.6f ± %.6f", w->kld, w->kld_err);
    snprintf(out[k++], 96, "%.6f", w->kld_pct[2]);
    snprintf(out[k++], 96, "%.3f %%", w->same_top);
    for (int t = 0; t < r->n_tasks; t++) {
        const qk_rep_task *q = &w->task[t];
        if (isnan(q->recovery))
            snprintf(out[k++], 96, "- (score %.2f %%, agree %.1f %%)", q->score, q->agree);
        else
            snprintf(out[k++], 96, "%.2f %% [%.2f, %.2f], agree %.1f %%", q->recovery, q->rec_lo,
                     q->rec_hi, q->agree);
    }
    *n = k;
}

static void task_title(char *buf, size_t n, const qk_rep *r, int t)
{
    snprintf(buf, n, "%s recovery", r->task[t].title);
}

void qk_rep_markdown(qk_sbuf *b, const qk_rep *r)
{
    char sz[32];
    size_str(sz, sizeof sz, r->base_d.size);
    qk_sb_printf(b, "# qk-report\n\nBase: `%s` (%s %s, %.3f bpw, %s), PPL %.4f ± %.4f\n\n", r->base,
                 r->base_d.format, r->base_d.scheme, r->base_d.bpw, sz, r->base_ppl, r->base_ppl_err);
    qk_sb_printf(b, "Text: `%s`, %d windows of %d tokens, %llu tokens scored per model\n\n", r->text,
                 r->n_chunk, r->n_ctx, (unsigned long long)r->tokens);
    for (int t = 0; t < r->n_tasks; t++)
        qk_sb_printf(b, "%s: `%s`, %d of %d tasks; base score %.2f %% [%.2f, %.2f]\n\n", r->task[t].title,
                     r->task[t].path, r->task[t].n, r->task[t].n_file, r->task[t].pct, r->task[t].lo,
                     r->task[t].hi);
    qk_sb_printf(b, "| model |");
    for (int c = 0; c < N_COLS - 1; c++)
        qk_sb_printf(b, " %s |", col_title[c]);
    for (int t = 0; t < r->n_tasks; t++) {
        char tt[64];
        task_title(tt, sizeof tt, r, t);
        qk_sb_printf(b, " %s |", tt);
    }
    qk_sb_printf(b, "\n|---|---|---|---:|---:|---:|---:|---:|---:|");
    for (int t = 0; t < r->n_tasks; t++)
        qk_sb_printf(b, "---:|");
    qk_sb_printf(b, "\n");
    for (int i = 0; i < r->n_rows; i++) {
        char c[N_COLS - 1 + QK_REP_MAX_TASKS][96];
        int n;
        cells(r, &r->rows[i], c, &n);
        qk_sb_printf(b, "| `");
        md_cell(b, r->rows[i].name);
        qk_sb_printf(b, "` |");
        for (int k = 0; k < n; k++) {
            qk_sb_printf(b, " ");
            md_cell(b, c[k]);
            qk_sb_printf(b, " |");
        }
        qk_sb_printf(b, "\n");
    }
    qk_sb_printf(b, "\nPPL ratio: Mean PPL(Q)/PPL(base) with its uncertainty; Mean KLD with its "
                 "uncertainty; 99%% KLD: the 99th percentile per token; same top: tokens whose most "
                 "likely next token is the base's; recovery: task score / base score with a 95 %% "
                 "interval; agree: tasks where model and base pick the same answer.\n\n");
    for (int p = 0; p < QK_REP_N_PLOTS; p++)
        qk_sb_printf(b, "![%s](%s)\n", qk_rep_plot_file(p), qk_rep_plot_file(p));
}

static void j_ve(qk_json *j, const char *key, double v, double e)
{
    qk_json_key(j, key);
    qk_json_obj(j);
    qk_json_key(j, "value"), qk_json_f64(j, v);
    qk_json_key(j, "error"), qk_json_f64(j, e);
    qk_json_end_obj(j);
}

static void j_desc(qk_json *j, const qk_rep_desc *d)
{
    qk_json_key(j, "format"), qk_json_str(j, d->format);
    qk_json_key(j, "scheme"), qk_json_str(j, d->scheme);
    qk_json_key(j, "family"), qk_json_str(j, qk_rep_family_name(d->family));
    qk_json_key(j, "bpw"), qk_json_f64(j, d->bpw);
    qk_json_key(j, "size"), qk_json_uint(j, d->size);
}

static void j_range(qk_json *j, const char *key, double v, double lo, double hi)
{
    qk_json_key(j, key);
    qk_json_obj(j);
    qk_json_key(j, "pct"), qk_json_f64(j, v);
    qk_json_key(j, "lo95"), qk_json_f64(j, lo);
    qk_json_key(j, "hi95"), qk_json_f64(j, hi);
    qk_json_end_obj(j);
}

void qk_rep_json(qk_sbuf *b, const qk_rep *r)
{
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f) {
        b->bad = true;
        return;
    }
    qk_json j;
    qk_json_init(&j, f, true);
    qk_json_obj(&j);
    qk_json_key(&j, "base");
    qk_json_obj(&j);
    qk_json_key(&j, "model"), qk_json_str(&j, r->base);
    j_desc(&j, &r->base_d);
    j_ve(&j, "ppl", r->base_ppl, r->base_ppl_err);
    qk_json_end_obj(&j);
    qk_json_key(&j, "text"), qk_json_str(&j, r->text);
    qk_json_key(&j, "n_ctx"), qk_json_int(&j, r->n_ctx);
    qk_json_key(&j, "chunks"), qk_json_int(&j, r->n_chunk);
    qk_json_key(&j, "tokens_scored"), qk_json_uint(&j, r->tokens);
    qk_json_key(&j, "tasks");
    qk_json_arr(&j);
    for (int t = 0; t < r->n_tasks; t++) {
        qk_json_obj(&j);
        qk_json_key(&j, "task"), qk_json_str(&j, r->task[t].title);
        qk_json_key(&j, "file"), qk_json_str(&j, r->task[t].path);
        qk_json_key(&j, "tasks"), qk_json_int(&j, r->task[t].n);
        qk_json_key(&j, "tasks_in_file"), qk_json_int(&j, r->task[t].n_file);
        j_range(&j, "base_score", r->task[t].pct, r->task[t].lo, r->task[t].hi);
        qk_json_end_obj(&j);
    }
    qk_json_end_arr(&j);
    qk_json_key(&j, "models");
    qk_json_arr(&j);
    static const char *const kn[] = {"max", "p99_9", "p99", "p95", "p90", "median",
                                     "p10", "p5", "p1", "p0_1", "min"};
    for (int i = 0; i < r->n_rows; i++) {
        const qk_rep_row *w = &r->rows[i];
        qk_json_obj(&j);
        qk_json_key(&j, "model"), qk_json_str(&j, w->name);
        j_desc(&j, &w->d);
        j_ve(&j, "ppl", w->ppl, w->ppl_err);
        j_ve(&j, "ppl_ratio", w->ppl_ratio, w->ppl_ratio_err);
        qk_json_key(&j, "kld");
        qk_json_obj(&j);
        qk_json_key(&j, "mean"), qk_json_f64(&j, w->kld);
        qk_json_key(&j, "error"), qk_json_f64(&j, w->kld_err);
        for (int k = 0; k < 11; k++)
            qk_json_key(&j, kn[k]), qk_json_f64(&j, w->kld_pct[k]);
        qk_json_key(&j, "interval"); /* qk-kld --split-error (issue #24); null until then */
        if (isfinite(w->kld_lo) && isfinite(w->kld_hi)) {
            qk_json_arr(&j);
            qk_json_f64(&j, w->kld_lo);
            qk_json_f64(&j, w->kld_hi);
            qk_json_end_arr(&j);
        } else {
            qk_json_null(&j);
        }
        qk_json_end_obj(&j);
        j_ve(&j, "same_top_pct", w->same_top, w->same_top_err);
        qk_json_key(&j, "tasks");
        qk_json_arr(&j);
        for (int t = 0; t < r->n_tasks; t++) {
            const qk_rep_task *q = &w->task[t];
            qk_json_obj(&j);
            qk_json_key(&j, "task"), qk_json_str(&j, r->task[t].title);
            j_range(&j, "score", q->score, q->score_lo, q->score_hi);
            j_range(&j, "recovery", q->recovery, q->rec_lo, q->rec_hi);
            qk_json_key(&j, "agreement_pct"), qk_json_f64(&j, q->agree);
            qk_json_key(&j, "disagreements"), qk_json_int(&j, q->n_disagree);
            qk_json_end_obj(&j);
        }
        qk_json_end_arr(&j);
        qk_json_end_obj(&j);
    }
    qk_json_end_arr(&j);
    qk_json_key(&j, "plots");
    qk_json_arr(&j);
    for (int p = 0; p < QK_REP_N_PLOTS; p++)
        qk_json_str(&j, qk_rep_plot_file(p));
    qk_json_end_arr(&j);
    qk_json_end_obj(&j);
    qk_json_done(&j);
    if (fclose(f) || !mem) {
        b->bad = true;
    } else {
        qk_sb_printf(b, "%.*s", (int)len, mem);
    }
    free(mem);
}

void qk_rep_html(qk_sbuf *b, const qk_rep *r)
{
    char sz[32];
    size_str(sz, sizeof sz, r->base_d.size);
    qk_sb_printf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<title>qk-report</title>\n<style>\nbody{font-family:DejaVu Sans,Arial,Helvetica,"
                 "sans-serif;margin:24px;color:#222}\ntable{border-collapse:collapse;font-size:13px}\n"
                 "th,td{border:1px solid #ccc;padding:3px 8px;white-space:nowrap}\ntd.n{text-align:right}\nth{background:"
                 "#f2f2f2}\nsvg{display:block;margin:18px 0}\n</style>\n</head>\n<body>\n<h1>qk-report</h1>\n"
                 "<p>Base: <code>");
    html_esc(b, r->base);
    qk_sb_printf(b, "</code> (%s %s, %.3f bpw, %s), PPL %.4f ± %.4f<br>\nText: <code>", r->base_d.format,
                 r->base_d.scheme, r->base_d.bpw, sz, r->base_ppl, r->base_ppl_err);
    html_esc(b, r->text);
    qk_sb_printf(b, "</code>, %d windows of %d tokens, %llu tokens scored per model", r->n_chunk,
                 r->n_ctx, (unsigned long long)r->tokens);
    for (int t = 0; t < r->n_tasks; t++) {
        qk_sb_printf(b, "<br>\n%s: <code>", r->task[t].title);
        html_esc(b, r->task[t].path);
        qk_sb_printf(b, "</code>, %d of %d tasks; base score %.2f %% [%.2f, %.2f]", r->task[t].n,
                     r->task[t].n_file, r->task[t].pct, r->task[t].lo, r->task[t].hi);
    }
    qk_sb_printf(b, "</p>\n<table>\n<tr><th>model</th>");
    for (int c = 0; c < N_COLS - 1; c++)
        qk_sb_printf(b, "<th>%s</th>", col_title[c]);
    for (int t = 0; t < r->n_tasks; t++) {
        char tt[64];
        task_title(tt, sizeof tt, r, t);
        qk_sb_printf(b, "<th>%s</th>", tt);
    }
    qk_sb_printf(b, "</tr>\n");
    for (int i = 0; i < r->n_rows; i++) {
        char c[N_COLS - 1 + QK_REP_MAX_TASKS][96];
        int n;
        cells(r, &r->rows[i], c, &n);
        qk_sb_printf(b, "<tr><td title=\"");
        html_esc(b, r->rows[i].name);
        qk_sb_printf(b, "\"><code>");
        const char *sl = strrchr(r->rows[i].name, '/');
        html_esc(b, sl && sl[1] ? sl + 1 : r->rows[i].name);
        qk_sb_printf(b, "</code></td>");
        for (int k = 0; k < n; k++) {
            qk_sb_printf(b, k >= 2 ? "<td class=\"n\">" : "<td>");
            html_esc(b, c[k]);
            qk_sb_printf(b, "</td>");
        }
        qk_sb_printf(b, "</tr>\n");
    }
    qk_sb_printf(b, "</table>\n");
    for (int p = 0; p < QK_REP_N_PLOTS; p++) {
        qk_sb_printf(b, "<div id=\"%.*s\">\n", (int)(strlen(qk_rep_plot_file(p)) - 4), qk_rep_plot_file(p));
        qk_rep_svg(b, r, p);
        qk_sb_printf(b, "</div>\n");
    }
    qk_sb_printf(b, "</body>\n</html>\n");
}

int qk_rep_write_dir(const char *dir, const qk_rep *r, qk_err *err)
{
    qk_outdir d;
    int rc = qk_outdir_open(&d, dir, err);
    if (rc)
        return rc;
    for (int k = 0; k < 3 + QK_REP_N_PLOTS && !rc; k++) {
        qk_sbuf b = {0};
        const char *name = k == 0 ? "report.md" : k == 1 ? "report.json" : k == 2 ? "report.html"
                                                                                 : qk_rep_plot_file(k - 3);
        if (k == 0)
            qk_rep_markdown(&b, r);
        else if (k == 1)
            qk_rep_json(&b, r);
        else if (k == 2)
            qk_rep_html(&b, r);
        else
            qk_rep_svg(&b, r, k - 3);
        char *path = qk_outdir_path(&d, name);
        if (b.bad || !path)
            rc = qk_errf(err, QK_EIO, "out of memory");
        else
            rc = qk_out_write_file(path, b.s ? b.s : "", b.n, err);
        free(path);
        free(b.s);
    }
    if (!rc)
        rc = qk_outdir_commit(&d, err);
    else
        qk_outdir_abort(&d);
    return rc;
}
