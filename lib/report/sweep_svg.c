/* sweep_svg.c - qk-report's plots as plain SVG 1.1 (no script, no CSS, no
 * external font): explicit size and viewBox, every mark a basic shape, so
 * they render the same in any browser; see sweep_report.h. */
#include "lib/report/sweep_report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 720.0
#define H 440.0
#define ML 78.0   /* plot area margins */
#define MR 190.0
#define MT 44.0
#define MB 56.0

/* colour-blind safe (Okabe-Ito), by family */
static const char *const fam_color[QK_FAM_COUNT] = {"#56B4E9", "#0072B2", "#D55E00", "#009E73",
                                                    "#CC79A7", "#E69F00", "#999933"};

const char *qk_rep_plot_file(int plot)
{
    static const char *const f[QK_REP_N_PLOTS] = {"kld_bpw.svg", "ppl_bpw.svg", "kld_pct.svg"};
    return plot >= 0 && plot < QK_REP_N_PLOTS ? f[plot] : "plot.svg";
}

void qk_rep_xml_esc(qk_sbuf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': qk_sb_printf(b, "&lt;"); break;
        case '>': qk_sb_printf(b, "&gt;"); break;
        case '&': qk_sb_printf(b, "&amp;"); break;
        case '"': qk_sb_printf(b, "&quot;"); break;
        default: qk_sb_printf(b, "%c", *s);
        }
    }
}

#define esc qk_rep_xml_esc

/* The file name of a model path (labels). */
static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    if (s && s[1])
        return s + 1;
    if (s) { /* "dir/": the component before the slash */
        const char *q = s;
        while (q > p && q[-1] != '/')
            q--;
        return q;
    }
    return p;
}

/* A marker of the family's shape centred on (x, y). */
static void marker(qk_sbuf *b, int fam, double x, double y, double r)
{
    const char *c = fam_color[fam];
    switch (fam) {
    case QK_FAM_LEGACY:
        qk_sb_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"%s\"/>\n", x, y, r, c);
        break;
    case QK_FAM_KQUANT:
        qk_sb_printf(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n",
                     x - r, y - r, 2 * r, 2 * r, c);
        break;
    case QK_FAM_IQ:
        qk_sb_printf(b, "<polygon points=\"%.2f,%.2f %.2f,%.2f %.2f,%.2f\" fill=\"%s\"/>\n", x,
                     y - 1.2 * r, x + 1.1 * r, y + 0.8 * r, x - 1.1 * r, y + 0.8 * r, c);
        break;
    case QK_FAM_CT:
        qk_sb_printf(b, "<polygon points=\"%.2f,%.2f %.2f,%.2f %.2f,%.2f %.2f,%.2f\" fill=\"%s\"/>\n",
                     x, y - 1.3 * r, x + 1.3 * r, y, x, y + 1.3 * r, x - 1.3 * r, y, c);
        break;
    case QK_FAM_MLX:
        qk_sb_printf(b, "<polygon points=\"%.2f,%.2f %.2f,%.2f %.2f,%.2f\" fill=\"%s\"/>\n", x,
                     y + 1.2 * r, x + 1.1 * r, y - 0.8 * r, x - 1.1 * r, y - 0.8 * r, c);
        break;
    case QK_FAM_FLOAT:
        qk_sb_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"none\" stroke=\"%s\" "
                     "stroke-width=\"2\"/>\n", x, y, r, c);
        break;
    default:
        qk_sb_printf(b, "<path d=\"M%.2f %.2fL%.2f %.2fM%.2f %.2fL%.2f %.2f\" stroke=\"%s\" "
                     "stroke-width=\"2.5\"/>\n", x - r, y - r, x + r, y + r, x - r, y + r, x + r,
                     y - r, c);
    }
}

typedef struct {
    double x0, x1, y0, y1; /* data range (log10 for a log axis) */
    bool xlog, ylog;
    double px0, px1, py0, py1;
} frame;

static double fx(const frame *f, double v)
{
    const double t = f->xlog ? log10(v) : v;
    return f->px0 + (t - f->x0) / (f->x1 - f->x0) * (f->px1 - f->px0);
}

static double fy(const frame *f, double v)
{
    const double t = f->ylog ? log10(v) : v;
    return f->py0 - (t - f->y0) / (f->y1 - f->y0) * (f->py0 - f->py1);
}

/* A step of 1, 2 or 5 x 10^k giving at most about 6 ticks over [lo, hi]. */
static double nice_step(double lo, double hi)
{
    const double raw = (hi - lo) / 6;
    const double p = pow(10, floor(log10(raw)));
    return raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
}

static void lin_range(double lo, double hi, double *a, double *b)
{
    if (!(hi > lo)) {
        const double m = fabs(lo) > 0 ? fabs(lo) * 0.01 : 0.5;
        lo -= m, hi += m;
    }
    const double pad = (hi - lo) * 0.08;
    lo -= pad, hi += pad;
    const double s = nice_step(lo, hi);
    *a = floor(lo / s) * s;
    *b = ceil(hi / s) * s;
}

static void begin(qk_sbuf *b, double h, const char *title)
{
    qk_sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                 "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\" "
                 "font-size=\"12\">\n<rect width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n"
                 "<text x=\"%.1f\" y=\"24\" font-size=\"15\" font-weight=\"bold\">", W, h, W, h, W, h,
                 ML);
    esc(b, title);
    qk_sb_printf(b, "</text>\n");
}

/* Grid, ticks, tick labels and axis titles. */
static void axes(qk_sbuf *b, const frame *f, const char *xlab, const char *ylab, bool ygrid_labels)
{
    qk_sb_printf(b, "<g stroke=\"#d9d9d9\" stroke-width=\"1\">\n");
    const double sx = f->xlog ? 1 : nice_step(f->x0, f->x1), sy = f->ylog ? 1 : nice_step(f->y0, f->y1);
    for (double t = f->x0; t <= f->x1 + 1e-9 * (f->x1 - f->x0); t += sx) {
        const double x = f->px0 + (t - f->x0) / (f->x1 - f->x0) * (f->px1 - f->px0);
        qk_sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, f->py0, x, f->py1);
    }
    for (double t = f->y0; ygrid_labels && t <= f->y1 + 1e-9 * (f->y1 - f->y0); t += sy) {
        const double y = f->py0 - (t - f->y0) / (f->y1 - f->y0) * (f->py0 - f->py1);
        qk_sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", f->px0, y, f->px1, y);
    }
    qk_sb_printf(b, "</g>\n<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
                 "stroke=\"#333333\"/>\n", f->px0, f->py1, f->px1 - f->px0, f->py0 - f->py1);
    qk_sb_printf(b, "<g fill=\"#333333\" text-anchor=\"middle\">\n");
    for (double t = f->x0; t <= f->x1 + 1e-9 * (f->x1 - f->x0); t += sx) {
        const double x = f->px0 + (t - f->x0) / (f->x1 - f->x0) * (f->px1 - f->px0);
        if (f->xlog)
            qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\">1e%+d</text>\n", x, f->py0 + 18, (int)lround(t));
        else
            qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\">%g</text>\n", x, f->py0 + 18, t);
    }
    qk_sb_printf(b, "</g>\n<g fill=\"#333333\" text-anchor=\"end\">\n");
    for (double t = f->y0; ygrid_labels && t <= f->y1 + 1e-9 * (f->y1 - f->y0); t += sy) {
        const double y = f->py0 - (t - f->y0) / (f->y1 - f->y0) * (f->py0 - f->py1);
        if (f->ylog)
            qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\">1e%+d</text>\n", f->px0 - 6, y + 4, (int)lround(t));
        else
            qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\">%.4g</text>\n", f->px0 - 6, y + 4, t);
    }
    qk_sb_printf(b, "</g>\n<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">", (f->px0 + f->px1) / 2,
                 f->py0 + 40);
    esc(b, xlab);
    qk_sb_printf(b, "</text>\n");
    if (ylab) {
        qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" transform=\"rotate(-90 %.2f "
                     "%.2f)\">", 18.0, (f->py0 + f->py1) / 2, 18.0, (f->py0 + f->py1) / 2);
        esc(b, ylab);
        qk_sb_printf(b, "</text>\n");
    }
}

/* The families present, one marker and name each, right of the plot. */
static void legend(qk_sbuf *b, const qk_rep *r, double x, double y)
{
    bool have[QK_FAM_COUNT] = {false};
    for (int i = 0; i < r->n_rows; i++)
        have[r->rows[i].d.family] = true;
    qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" font-weight=\"bold\">family</text>\n", x, y);
    static const int order[] = {QK_FAM_LEGACY, QK_FAM_KQUANT, QK_FAM_IQ, QK_FAM_CT, QK_FAM_MLX,
                                QK_FAM_FLOAT, QK_FAM_OTHER};
    for (size_t k = 0; k < sizeof order / sizeof *order; k++) {
        if (!have[order[k]])
            continue;
        y += 20;
        marker(b, order[k], x + 6, y - 4, 5);
        qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\">%s</text>\n", x + 18, y, qk_rep_family_name(order[k]));
    }
}

/* Point labels placed where they overlap no earlier one (right above, right below, left above,
 * left below the marker); a label with no free place is left out (the table has it). */
typedef struct {
    double x0[512], y0[512], x1[512], y1[512];
    int n;
} labels;

static void point_label(qk_sbuf *b, labels *L, double x, double y, const char *s)
{
    const double w = 6.0 * (double)strlen(s), h = 11;
    static const double dx[4] = {7, 7, -7, -7}, dy[4] = {-6, 14, -6, 14};
    for (int k = 0; k < 4; k++) {
        const double lx = dx[k] > 0 ? x + dx[k] : x + dx[k] - w, ly = y + dy[k];
        bool free = lx >= 0 && lx + w <= W;
        for (int i = 0; free && i < L->n; i++)
            free = lx + w < L->x0[i] || lx > L->x1[i] || ly < L->y0[i] || ly - h > L->y1[i];
        if (!free)
            continue;
        if (L->n < 512) {
            L->x0[L->n] = lx, L->x1[L->n] = lx + w, L->y0[L->n] = ly - h, L->y1[L->n] = ly;
            L->n++;
        }
        qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"10\" fill=\"#444444\">", lx, ly);
        esc(b, s);
        qk_sb_printf(b, "</text>\n");
        return;
    }
}

/* The bpw plots leave float formats (F32, F16, BF16: the references) out when there is a
 * quantized model to show. */
static bool bpw_drawn(const qk_rep *r, const qk_rep_row *w)
{
    if (w->d.family != QK_FAM_FLOAT)
        return true;
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].d.family != QK_FAM_FLOAT)
            return false;
    return true;
}

static void bpw_range(const qk_rep *r, double *a, double *b)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < r->n_rows; i++)
        if (bpw_drawn(r, &r->rows[i])) {
            lo = fmin(lo, r->rows[i].d.bpw);
            hi = fmax(hi, r->rows[i].d.bpw);
        }
    if (!isfinite(lo))
        lo = 0, hi = 32;
    lin_range(lo, hi, a, b);
    *a = fmax(*a, 0.0);
}

static void note(qk_sbuf *b, double y, const char *s)
{
    qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"10\">%s</text>\n", W - MR + 16, y, s);
}

static void plot_kld_bpw(qk_sbuf *b, const qk_rep *r)
{
    frame f = {.xlog = false, .ylog = true, .px0 = ML, .px1 = W - MR, .py0 = H - MB, .py1 = MT};
    bpw_range(r, &f.x0, &f.x1);
    double lo = INFINITY, hi = -INFINITY;
    int zero = 0, floats = 0;
    for (int i = 0; i < r->n_rows; i++) {
        const double v = r->rows[i].kld;
        if (!bpw_drawn(r, &r->rows[i]))
            floats++;
        else if (v > 0 && isfinite(v))
            lo = fmin(lo, v), hi = fmax(hi, v);
        else
            zero++;
    }
    if (!isfinite(lo))
        lo = 1e-4, hi = 1e-1;
    f.y0 = floor(log10(lo));
    f.y1 = ceil(log10(hi));
    if (f.y1 <= f.y0)
        f.y1 = f.y0 + 1;
    begin(b, H, "Mean KL divergence against bits per weight");
    axes(b, &f, "bits per weight", "Mean KLD (log scale)", true);
    labels L = {.n = 0};
    for (int i = 0; i < r->n_rows; i++) {
        const qk_rep_row *w = &r->rows[i];
        if (!bpw_drawn(r, w) || !(w->kld > 0 && isfinite(w->kld)))
            continue;
        const double x = fx(&f, w->d.bpw), y = fy(&f, w->kld);
        if (isfinite(w->kld_lo) && isfinite(w->kld_hi) && w->kld_lo > 0) /* #24's error bars */
            qk_sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\"/>\n", x,
                         fy(&f, w->kld_lo), x, fy(&f, w->kld_hi), fam_color[w->d.family]);
        marker(b, w->d.family, x, y, 5);
    }
    for (int i = 0; i < r->n_rows; i++) {
        const qk_rep_row *w = &r->rows[i];
        if (bpw_drawn(r, w) && w->kld > 0 && isfinite(w->kld))
            point_label(b, &L, fx(&f, w->d.bpw), fy(&f, w->kld), w->d.scheme);
    }
    legend(b, r, W - MR + 16, MT + 10);
    char t[64];
    if (zero) {
        snprintf(t, sizeof t, "%d not drawn (KLD 0)", zero);
        note(b, H - MB - 14, t);
    }
    if (floats) {
        snprintf(t, sizeof t, "%d float format%s: table only", floats, floats > 1 ? "s" : "");
        note(b, H - MB, t);
    }
    qk_sb_printf(b, "</svg>\n");
}

/* PPL ratios above this are broken models: drawn on the top edge with their value, so the
 * axis shows the others. */
#define PPL_CLIP 1.5

static void plot_ppl_bpw(qk_sbuf *b, const qk_rep *r)
{
    frame f = {.xlog = false, .ylog = false, .px0 = ML, .px1 = W - MR, .py0 = H - MB, .py1 = MT};
    bpw_range(r, &f.x0, &f.x1);
    double lo = INFINITY, hi = -INFINITY;
    int floats = 0, below = 0;
    for (int i = 0; i < r->n_rows; i++)
        below += bpw_drawn(r, &r->rows[i]) && r->rows[i].ppl_ratio <= PPL_CLIP;
    const double clip = below >= 2 ? PPL_CLIP : INFINITY;
    for (int i = 0; i < r->n_rows; i++) {
        const double v = r->rows[i].ppl_ratio, e = r->rows[i].ppl_ratio_err;
        if (!bpw_drawn(r, &r->rows[i]))
            floats++;
        else if (isfinite(v) && v <= clip)
            lo = fmin(lo, v - (isfinite(e) ? e : 0)), hi = fmax(hi, v + (isfinite(e) ? e : 0));
    }
    if (!isfinite(lo))
        lo = hi = 1;
    lin_range(fmin(lo, 1.0), fmax(hi, 1.0), &f.y0, &f.y1);
    begin(b, H, "Perplexity ratio against bits per weight");
    axes(b, &f, "bits per weight", "PPL(Q) / PPL(base)", true);
    qk_sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#888888\" "
                 "stroke-dasharray=\"4 3\"/>\n", f.px0, fy(&f, 1.0), f.px1, fy(&f, 1.0));
    labels L = {.n = 0};
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < r->n_rows; i++) {
            const qk_rep_row *w = &r->rows[i];
            if (!bpw_drawn(r, w) || !isfinite(w->ppl_ratio))
                continue;
            const bool over = w->ppl_ratio > f.y1;
            const double x = fx(&f, w->d.bpw), y = over ? f.py1 + 6 : fy(&f, w->ppl_ratio);
            if (pass == 1) {
                char t[96];
                snprintf(t, sizeof t, over ? "%s (%.2f)" : "%s", w->d.scheme, w->ppl_ratio);
                point_label(b, &L, x, y, t);
                continue;
            }
            if (!over && isfinite(w->ppl_ratio_err) && w->ppl_ratio_err > 0)
                qk_sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\"/>\n", x,
                             fy(&f, fmax(w->ppl_ratio - w->ppl_ratio_err, f.y0)), x,
                             fy(&f, fmin(w->ppl_ratio + w->ppl_ratio_err, f.y1)), fam_color[w->d.family]);
            marker(b, w->d.family, x, y, 5);
        }
    legend(b, r, W - MR + 16, MT + 10);
    if (isfinite(clip) && below < r->n_rows - floats)
        note(b, H - MB - 14, "above the axis: on its top edge");
    if (floats) {
        char t[64];
        snprintf(t, sizeof t, "%d float format%s: table only", floats, floats > 1 ? "s" : "");
        note(b, H - MB, t);
    }
    qk_sb_printf(b, "</svg>\n");
}

static void plot_kld_pct(qk_sbuf *b, const qk_rep *r)
{
    const double row_h = 26, h = MT + MB + 20 + row_h * (r->n_rows ? r->n_rows : 1);
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < r->n_rows; i++)
        for (int k = 0; k < 9; k++) { /* max .. 1 % */
            const double v = r->rows[i].kld_pct[k];
            if (v > 0 && isfinite(v))
                lo = fmin(lo, v), hi = fmax(hi, v);
        }
    if (!isfinite(lo))
        lo = 1e-6, hi = 1;
    lo = fmax(lo, hi * 1e-8);
    frame f = {.xlog = true, .ylog = false, .px0 = ML + 130, .px1 = W - 40, .py0 = h - MB, .py1 = MT,
               .x0 = floor(log10(lo)), .x1 = ceil(log10(hi)), .y0 = 0, .y1 = 1};
    if (f.x1 <= f.x0)
        f.x1 = f.x0 + 1;
    begin(b, h, "KL divergence percentiles per model");
    axes(b, &f, "KLD per token (log scale)", NULL, false);
    for (int i = 0; i < r->n_rows; i++) {
        const qk_rep_row *w = &r->rows[i];
        const double y = MT + 10 + row_h * (i + 0.5);
        const char *c = fam_color[w->d.family];
#define PX(k) fx(&f, fmax(w->kld_pct[k], pow(10, f.x0)))
        qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" font-size=\"11\">", f.px0 - 8, y + 4);
        esc(b, base_name(w->name));
        qk_sb_printf(b, "</text>\n");
        if (!(w->kld_pct[0] > 0))
            continue;
        qk_sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
                     "stroke-width=\"1.5\"/>\n", PX(8), y, PX(2), y, c);
        qk_sb_printf(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"12\" fill=\"%s\" "
                     "fill-opacity=\"0.45\" stroke=\"%s\"/>\n", PX(6), y - 6, fmax(PX(4) - PX(6), 1.0), c, c);
        qk_sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#000000\" "
                     "stroke-width=\"2\"/>\n", PX(5), y - 7, PX(5), y + 7);
        qk_sb_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" fill=\"%s\"/>\n", PX(1), y, c);
        qk_sb_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" fill=\"none\" stroke=\"%s\"/>\n", PX(0), y, c);
#undef PX
    }
    qk_sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"10\" fill=\"#444444\">line 1%%..99%%, box "
                 "10%%..90%%, bar median, dot 99.9%%, ring max</text>\n", f.px0, 38.0);
    qk_sb_printf(b, "</svg>\n");
}

void qk_rep_svg(qk_sbuf *b, const qk_rep *r, int plot)
{
    if (plot == QK_REP_PLOT_KLD_BPW)
        plot_kld_bpw(b, r);
    else if (plot == QK_REP_PLOT_PPL_BPW)
        plot_ppl_bpw(b, r);
    else
        plot_kld_pct(b, r);
}
