/* bench_report.h - the tables every qk-bench subcommand prints, in three
 * renderings from one description:
 *
 *   md    a GitHub markdown table (numbers right-aligned, llama-bench's look),
 *         then the metadata as "key: value" lines and the notes
 *   csv   RFC 4180: a header line and one line per row; a statistics cell
 *         becomes KEY_mean, KEY_sd, KEY_median columns; no metadata
 *   json  {"command": str, "meta": {KEY: value}, "rows": [{KEY: value}],
 *          "notes": [str]}; a statistics cell is {"mean", "sd", "median",
 *          "min", "max": number, "n": int, "samples": [number]}
 *
 * Columns and metadata keys appear in the order they were declared, so the
 * structure of the output never depends on the numbers.  An unset cell is
 * "-" (md), empty (csv) or null (json). */
#ifndef QK_BENCH_REPORT_H
#define QK_BENCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/bench/bench_stats.h"
#include "lib/core/err.h"

typedef enum qk_report_fmt { QK_REPORT_MD, QK_REPORT_CSV, QK_REPORT_JSON } qk_report_fmt;

/* "md", "csv", "json" -> *out; returns 0, or 2 with err set. */
int qk_report_fmt_parse(const char *s, qk_report_fmt *out, qk_err *err);

typedef struct qk_col {
    const char *key;   /* csv/json name */
    const char *title; /* md header */
    const char *fmt;   /* printf format of a number in md ("%.2f"); NULL: "%.3g" */
    bool md_hide;      /* csv and json only (detail that would crowd the table) */
} qk_col;

typedef enum { QK_CELL_NONE, QK_CELL_STR, QK_CELL_INT, QK_CELL_NUM, QK_CELL_STATS } qk_cell_kind;

typedef struct qk_cell {
    qk_cell_kind kind;
    char *s;          /* STR (owned) */
    int64_t i;        /* INT */
    double x;         /* NUM */
    qk_stats st;      /* STATS */
    double *samples;  /* STATS: st.n samples (owned) */
    const char *fmt;  /* meta cells: md format of a NUM */
} qk_cell;

typedef struct qk_report {
    const char *command;
    const qk_col *cols;
    int ncols;
    qk_cell *cells;   /* nrows * ncols */
    int nrows, cap_rows;
    char **meta_keys;
    qk_cell *meta;
    int nmeta, cap_meta;
    char **notes;
    int nnotes, cap_notes;
    bool oom;         /* an allocation failed: qk_report_write reports it */
} qk_report;

/* cols must outlive the report. */
void qk_report_init(qk_report *r, const char *command, const qk_col *cols, int ncols);
void qk_report_free(qk_report *r);

/* Start a new row (all cells unset); the setters below fill the last row.
 * Allocation failures are remembered and reported by qk_report_write. */
void qk_report_row(qk_report *r);
void qk_report_str(qk_report *r, int col, const char *s);
void qk_report_int(qk_report *r, int col, int64_t v);
void qk_report_num(qk_report *r, int col, double v);
void qk_report_stats(qk_report *r, int col, const double *samples, int n);

/* Metadata (a key set twice keeps its first position and the new value). */
void qk_report_meta_str(qk_report *r, const char *key, const char *s);
void qk_report_meta_int(qk_report *r, const char *key, int64_t v);
void qk_report_meta_num(qk_report *r, const char *key, double v, const char *fmt);

/* A free-text note (md: a line under the table; json: "notes"; csv: none). */
void qk_report_note(qk_report *r, const char *fmt, ...) QK_PRINTF(2, 3);

/* Render to f.  Returns 0, or 3 (out of memory while building) with err set. */
int qk_report_write(const qk_report *r, qk_report_fmt fmt, FILE *f, qk_err *err);

#endif
