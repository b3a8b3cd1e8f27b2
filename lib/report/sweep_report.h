/* sweep_report.h - qk-report's output: what each checkpoint is (format,
 * scheme, family, bits per weight, size), and the report of many models
 * against one base rendered from plain rows as Markdown, JSON, HTML and SVG
 * plots drawn here (no plotting dependency):
 *   kld_bpw.svg   Mean KLD (log scale) against bits per weight, one marker
 *                 shape per family (GGUF legacy, K-quants, IQ,
 *                 compressed-tensors, MLX; others and float formats too)
 *   ppl_bpw.svg   PPL(Q)/PPL(base) against bits per weight
 *   kld_pct.svg   per model the KLD percentiles (log scale): 1 %..99 % line,
 *                 10 %..90 % box, median, 99.9 % and max points
 * The HTML embeds the three; report.md links them.  Output bytes depend on
 * the rows only. */
#ifndef QK_SWEEP_REPORT_H
#define QK_SWEEP_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/core/strbuf.h"

enum qk_rep_family {
    QK_FAM_FLOAT = 0, QK_FAM_LEGACY, QK_FAM_KQUANT, QK_FAM_IQ, QK_FAM_CT, QK_FAM_MLX, QK_FAM_OTHER,
    QK_FAM_COUNT
};

/* "float", "GGUF legacy", "K-quants", "IQ", "compressed-tensors", "MLX", "other". */
const char *qk_rep_family_name(int family);

/* What a checkpoint is. */
typedef struct qk_rep_desc {
    char format[16];       /* "GGUF" or "safetensors" */
    char scheme[96];       /* "Q4_K_M", "F32", "compressed-tensors int4 g128", "mlx int4 g64" */
    int family;
    double bpw;            /* 8 x bytes / elements over every tensor */
    uint64_t size;         /* bytes of the file(s) */
} qk_rep_desc;

int qk_rep_describe(const char *path, qk_rep_desc *d, qk_err *err);

/* One task file's column for a model. */
typedef struct qk_rep_task {
    double score, score_lo, score_hi;    /* percent, 95 % interval */
    double recovery, rec_lo, rec_hi;     /* score / base score, percent; NaN: undefined */
    double agree;                        /* same answer as the base, percent */
    int n_disagree;
} qk_rep_task;

#define QK_REP_MAX_TASKS 3

typedef struct qk_rep_row {
    const char *name;      /* the model as given */
    qk_rep_desc d;
    double ppl, ppl_err;   /* PPL(Q) */
    double ppl_ratio, ppl_ratio_err;
    double kld, kld_err;   /* Mean KLD */
    double kld_pct[11];    /* max, 99.9, 99, 95, 90, median, 10, 5, 1, 0.1, min (%) */
    double same_top, same_top_err; /* percent */
    /* Reserved for qk-kld --split-error / --noise-floor (issue #24): an
     * interval of Mean KLD from the split of the text, NaN while unknown; the
     * KLD plot draws it as an error bar and the table prints it when set. */
    double kld_lo, kld_hi;
    qk_rep_task task[QK_REP_MAX_TASKS];
} qk_rep_row;

typedef struct qk_rep {
    const char *base;      /* the base model as given */
    qk_rep_desc base_d;
    double base_ppl, base_ppl_err;
    const char *text;
    int n_ctx, n_chunk;
    uint64_t tokens;       /* scored per model */
    int n_tasks;
    struct {
        const char *title, *path;
        int n, n_file;     /* tasks scored, in the file */
        double pct, lo, hi;/* the base's score */
    } task[QK_REP_MAX_TASKS];
    int n_rows;
    qk_rep_row *rows;
} qk_rep;

void qk_rep_markdown(qk_sbuf *b, const qk_rep *r);
/* s with <, >, & and " as HTML/XML entities. */
void qk_rep_xml_esc(qk_sbuf *b, const char *s);
void qk_rep_json(qk_sbuf *b, const qk_rep *r);
void qk_rep_html(qk_sbuf *b, const qk_rep *r);

enum { QK_REP_PLOT_KLD_BPW = 0, QK_REP_PLOT_PPL_BPW, QK_REP_PLOT_KLD_PCT, QK_REP_N_PLOTS };
/* "kld_bpw.svg", ... */
const char *qk_rep_plot_file(int plot);
void qk_rep_svg(qk_sbuf *b, const qk_rep *r, int plot);

/* DIR/report.md, report.json, report.html and the three SVG files, as one
 * directory: all of it or nothing (lib/core/outfile.h qk_outdir). */
int qk_rep_write_dir(const char *dir, const qk_rep *r, qk_err *err);

#endif
