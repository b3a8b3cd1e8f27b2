/* study_error.c - the quantization-error scorecard (study_error.h). */
#include "lib/study/study_error.h"

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/core/json.h"
#include "kernels/quantize.h"
#include "formats/tensorset.h"
#include "lib/core/threads.h"
#include "kernels/types.h"

/* ---- synthetic matrices ------------------------------------------------- */

int qk_syn_parse(const char *text, qk_syn_spec *s, qk_err *err)
{
    if (strcmp(text, "gaussian") == 0) {
        s->kind = QK_SYN_GAUSSIAN;
    } else if (strcmp(text, "laplace") == 0) {
        s->kind = QK_SYN_LAPLACE;
    } else if (strcmp(text, "outlier-channels") == 0) {
        s->kind = QK_SYN_OUTLIER;
    } else if (strncmp(text, "student-t:", 10) == 0) {
        char *end;
        errno = 0;
        double nu = strtod(text + 10, &end);
        if (errno || end == text + 10 || *end || !(nu > 0.0 && nu <= 1e6))
            return qk_errf(err, QK_EINPUT, "--synthetic: bad degrees of freedom in '%s'", text);
        s->kind = QK_SYN_STUDENT_T;
        s->nu = nu;
    } else {
        return qk_errf(err, QK_EINPUT,
                       "--synthetic: '%s' is not gaussian, laplace, student-t:NU or "
                       "outlier-channels",
                       text);
    }
    if (s->rows <= 0)
        s->rows = 256;
    if (s->cols <= 0)
        s->cols = 4096;
    if (!s->seed)
        s->seed = 1;
    return 0;
}

void qk_syn_name(const qk_syn_spec *s, char *buf, size_t n)
{
    switch (s->kind) {
    case QK_SYN_GAUSSIAN: snprintf(buf, n, "gaussian"); break;
    case QK_SYN_LAPLACE: snprintf(buf, n, "laplace"); break;
    case QK_SYN_STUDENT_T: snprintf(buf, n, "student-t:%g", s->nu); break;
    case QK_SYN_OUTLIER: snprintf(buf, n, "outlier-channels"); break;
    default: snprintf(buf, n, "?"); break;
    }
}

/* splitmix64 (Steele, Lea, Flood 2014) */
static uint64_t next_u64(uint64_t *st)
{
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in (0, 1): 53 bits, never 0 */
static double uniform(uint64_t *st) { return ((double)(next_u64(st) >> 11) + 0.5) / 9007199254740992.0; }

static double normal(uint64_t *st)
{
    const double u = uniform(st), v = uniform(st);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Gamma(a, 1) by Marsaglia and Tsang (2000); a < 1 through Gamma(a+1) U^(1/a). */
static double gamma_var(uint64_t *st, double a)
{
    if (a < 1.0)
        return gamma_var(st, a + 1.0) * pow(uniform(st), 1.0 / a);
    const double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = normal(st);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        const double u = uniform(st);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v;
    }
}

void qk_syn_fill(const qk_syn_spec *s, float *x)
{
    uint64_t st = s->seed;
    const size_t n = (size_t)s->rows * (size_t)s->cols;
    for (size_t i = 0; i < n; i++) {
        double v;
        switch (s->kind) {
        case QK_SYN_LAPLACE: {
            const double u = uniform(&st) - 0.5;
            v = (u < 0 ? 1.0 : -1.0) * log(1.0 - 2.0 * fabs(u)) / sqrt(2.0);
            break;
        }
        case QK_SYN_STUDENT_T:
            v = normal(&st) / sqrt(2.0 * gamma_var(&st, s->nu / 2.0) / s->nu);
            break;
        default: v = normal(&st); break;
        }
        x[i] = (float)v;
    }
    if (s->kind == QK_SYN_OUTLIER)
        for (int64_t j = 0; j < s->cols; j++)
            if (uniform(&st) < 0.01)
                for (int64_t r = 0; r < s->rows; r++)
                    x[r * s->cols + j] *= 20.0f;
}

/* ---- formats ------------------------------------------------------------- */

static int add_fmt(qk_ecard_fmt *f, int *n, const char *family, const char *gran,
                   const char *scheme, const char *granularity)
{
    qk_ecard_fmt *e = &f[(*n)++];
    memset(e, 0, sizeof *e);
    qk_err err;
    snprintf(e->family, sizeof e->family, "%s", family);
    snprintf(e->gran, sizeof e->gran, "%s", gran);
    e->gguf_type = -1;
    e->scheme = qk_scheme_by_name(scheme);
    if (!e->scheme)
        return -1;
    if (granularity && qk_gran_parse(granularity, &e->opts, &err))
        return -1;
    if (e->scheme->rule == QK_RULE_MX || e->scheme->rule == QK_RULE_NVFP4) {
        e->group = e->scheme->group;
        snprintf(e->label, sizeof e->label, "%s", e->scheme->name);
    } else {
        e->group = e->opts.gran == QK_GRAN_GROUP ? e->opts.group : 0;
        snprintf(e->label, sizeof e->label, "%s %s", family, gran);
    }
    return 0;
}

int qk_ecard_default_formats(qk_ecard_fmt **out, int *n, qk_err *err)
{
    static const struct { const char *family, *gran, *scheme, *granularity; } rows[] = {
        {"int8", "tensor", "int8", "tensor"}, {"int8", "channel", "int8", "channel"},
        {"int8", "g128", "int8", "group:128"}, {"int8", "g64", "int8", "group:64"},
        {"int8", "g32", "int8", "group:32"},
        {"int4", "tensor", "int4", "tensor"}, {"int4", "channel", "int4", "channel"},
        {"int4", "g128", "int4", "group:128"}, {"int4", "g64", "int4", "group:64"},
        {"int4", "g32", "int4", "group:32"},
        {"fp8_e4m3", "tensor", "fp8_e4m3", "tensor"}, {"fp8_e4m3", "channel", "fp8_e4m3", "channel"},
        {"fp8_e4m3", "g128", "fp8_e4m3", "group:128"},
        {"fp8_e4m3", "block128", "fp8_e4m3", "block:128x128"},
        {"fp8_e4m3", "mx", "mxfp8_e4m3", NULL},
        {"fp8_e5m2", "tensor", "fp8_e5m2", "tensor"}, {"fp8_e5m2", "channel", "fp8_e5m2", "channel"},
        {"fp8_e5m2", "g128", "fp8_e5m2", "group:128"},
        {"fp8_e5m2", "block128", "fp8_e5m2", "block:128x128"},
        {"fp8_e5m2", "mx", "mxfp8_e5m2", NULL},
        {"fp6_e2m3", "tensor", "fp6_e2m3", "tensor"}, {"fp6_e2m3", "channel", "fp6_e2m3", "channel"},
        {"fp6_e2m3", "g128", "fp6_e2m3", "group:128"}, {"fp6_e2m3", "mx", "mxfp6_e2m3", NULL},
        {"fp4_e2m1", "tensor", "fp4_e2m1", "tensor"}, {"fp4_e2m1", "channel", "fp4_e2m1", "channel"},
        {"fp4_e2m1", "g128", "fp4_e2m1", "group:128"}, {"fp4_e2m1", "g32", "fp4_e2m1", "group:32"},
        {"fp4_e2m1", "g16", "fp4_e2m1", "group:16"}, {"fp4_e2m1", "mx", "mxfp4", NULL},
        {"fp4_e2m1", "nvfp4", "nvfp4", NULL},
    };
    const int n_rows = (int)(sizeof rows / sizeof rows[0]);
    qk_ecard_fmt *f = calloc((size_t)n_rows + QK_TYPE_MAX, sizeof *f);
    if (!f)
        return qk_errf(err, QK_EIO, "out of memory");
    int k = 0;
    for (int i = 0; i < n_rows; i++)
        if (add_fmt(f, &k, rows[i].family, rows[i].gran, rows[i].scheme, rows[i].granularity)) {
            free(f);
            return qk_errf(err, QK_EIO, "scorecard: scheme %s is missing", rows[i].scheme);
        }
    /* GGUF types qk can encode without an importance matrix; Q8_1 and Q8_K
     * are activation types */
    for (int id = qk_type_next(-1); id >= 0; id = qk_type_next(id)) {
        const qk_type_traits *t = qk_type_get(id);
        bool want = t && t->in_gguf && t->quantize && !t->needs_imatrix &&
                    (t->is_quantized || id == QK_F16 || id == QK_BF16) && id != QK_Q8_1 &&
                    id != QK_Q8_K;
        if (!want)
            continue;
        qk_ecard_fmt *e = &f[k++];
        memset(e, 0, sizeof *e);
        snprintf(e->family, sizeof e->family, "gguf");
        snprintf(e->gran, sizeof e->gran, "%s", t->name);
        /* gguf-mxfp4, gguf-nvfp4: not the schemes of the same name */
        snprintf(e->label, sizeof e->label, "%s%s", qk_scheme_by_name(t->name) ? "gguf-" : "",
                 t->name);
        e->gguf_type = id;
        e->group = t->blck > 1 ? t->blck : 0;
    }
    *out = f;
    *n = k;
    return 0;
}

int qk_ecard_filter(qk_ecard_fmt *f, int *n, const char *list, qk_err *err)
{
    char *copy = strdup(list);
    if (!copy)
        return qk_errf(err, QK_EIO, "out of memory");
    bool *keep = calloc((size_t)*n + 1, sizeof *keep);
    if (!keep) {
        free(copy);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    int rc = 0;
    char *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        bool any = false;
        for (int i = 0; i < *n; i++)
            if (strcasecmp(w, f[i].label) == 0 || strcasecmp(w, f[i].family) == 0)
                keep[i] = any = true;
        if (!any) {
            rc = qk_errf(err, QK_EINPUT, "--formats: no format called '%s'", w);
            break;
        }
    }
    if (!rc) {
        int k = 0;
        for (int i = 0; i < *n; i++)
            if (keep[i])
                f[k++] = f[i];
        *n = k;
    }
    free(keep), free(copy);
    return rc;
}

/* ---- one cell ------------------------------------------------------------ */

/* Quantize-dequantize x (rows x cols, rows padded to pc columns in xp/yp)
 * into y; fills bpe.  Returns 0 or an error code. */
static int qdq(const qk_ecard_fmt *f, const float *x, int64_t rows, int64_t cols, float *y,
               double *bpe, bool *padded, qk_err *err)
{
    int64_t pc = cols;
    if (f->group > 0 && cols % f->group)
        pc = (cols / f->group + 1) * f->group;
    *padded = pc != cols;
    const float *src = x;
    float *xp = NULL, *yp = y;
    if (*padded) {
        xp = calloc((size_t)(rows * pc), sizeof *xp);
        yp = malloc((size_t)(rows * pc) * sizeof *yp);
        if (!xp || !yp) {
            free(xp), free(yp);
            return qk_errf(err, QK_EIO, "out of memory");
        }
        for (int64_t r = 0; r < rows; r++)
            memcpy(xp + r * pc, x + r * cols, (size_t)cols * sizeof *x);
        src = xp;
    }
    int rc = 0;
    if (f->scheme) {
        qk_scheme_layout l;
        if (!(rc = qk_scheme_layout_of(f->scheme, rows, pc, &f->opts, &l, err)) &&
            !(rc = qk_scheme_qdq(f->scheme, src, rows, pc, &f->opts, yp, err))) {
            const uint64_t codes = (uint64_t)rows * (((uint64_t)cols * (uint64_t)l.bits + 7) / 8);
            *bpe = (double)(l.total - l.codes_size + codes) / (double)(rows * cols);
        }
    } else {
        const size_t rs = qk_row_size(f->gguf_type, pc);
        uint8_t *buf = rs ? malloc(rs * (size_t)rows) : NULL;
        if (!buf) {
            rc = qk_errf(err, rs ? QK_EIO : QK_EINPUT, "%s: cannot encode rows of %lld", f->label,
                         (long long)pc);
        } else if (!(rc = qk_quantize_rows(f->gguf_type, src, buf, rows, pc, NULL, 1, err)) &&
                   !(rc = qk_dequantize_rows(f->gguf_type, buf, yp, rows, pc, 1, err))) {
            *bpe = (double)(rs * (size_t)rows) / (double)(rows * cols);
        }
        free(buf);
    }
    if (!rc && *padded)
        for (int64_t r = 0; r < rows; r++)
            memcpy(y + r * cols, yp + r * pc, (size_t)cols * sizeof *y);
    free(xp);
    if (*padded)
        free(yp);
    return rc;
}

static void measure(const float *x, const float *y, size_t n, qk_ecard_cell *c)
{
    double sx = 0.0, se = 0.0, mx = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)x[i] - (double)y[i];
        sx += (double)x[i] * (double)x[i];
        se += d * d;
        if (fabs(d) > mx || d != d)
            mx = fabs(d);
    }
    c->nmse = sx > 0 ? se / sx : (se > 0 ? INFINITY : 0.0);
    c->snr_db = se > 0 ? 10.0 * log10(sx / se) : INFINITY;
    c->max_abs = mx;
}

typedef struct {
    const qk_ecard *card;
    const float *x;
    int64_t rows, cols;
    qk_ecard_cell *cells;
    int failed;            /* out of memory in some job */
} add_job;

static void add_range(void *ctx, size_t begin, size_t end)
{
    add_job *j = ctx;
    const size_t n = (size_t)(j->rows * j->cols);
    float *y = malloc(n * sizeof *y);
    for (size_t k = begin; k < end; k++) {
        qk_ecard_cell *c = &j->cells[k];
        qk_err err = {0};
        memset(c, 0, sizeof *c);
        if (!y) {
            __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
            continue;
        }
        int rc = qdq(&j->card->fmts[k], j->x, j->rows, j->cols, y, &c->bpe, &c->padded, &err);
        if (rc == QK_EIO)
            __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        if (rc)
            continue;
        c->ok = true;
        measure(j->x, y, n, c);
    }
    free(y);
}

/* ---- the card ------------------------------------------------------------ */

int qk_ecard_init(qk_ecard *c, const char *source, const qk_ecard_fmt *fmts, int n_fmt,
                  qk_err *err)
{
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "%s", source);
    c->fmts = malloc((size_t)(n_fmt ? n_fmt : 1) * sizeof *c->fmts);
    if (!c->fmts)
        return qk_errf(err, QK_EIO, "out of memory");
    memcpy(c->fmts, fmts, (size_t)n_fmt * sizeof *fmts);
    c->n_fmt = n_fmt;
    return 0;
}

void qk_ecard_free(qk_ecard *c)
{
    for (int i = 0; i < c->n_tensor; i++)
        free(c->tensors[i].name);
    free(c->tensors), free(c->cells), free(c->sums), free(c->fmts);
    memset(c, 0, sizeof *c);
}

int qk_ecard_add(qk_ecard *c, const char *name, const float *x, int64_t rows, int64_t cols,
                 int nthreads, qk_err *err)
{
    if (rows < 1 || cols < 1)
        return qk_errf(err, QK_EINPUT, "%s: empty matrix", name);
    if (c->n_tensor == c->cap_tensor) {
        int cap = c->cap_tensor ? 2 * c->cap_tensor : 16;
        qk_ecard_tensor *t = realloc(c->tensors, (size_t)cap * sizeof *t);
        if (!t)
            return qk_errf(err, QK_EIO, "out of memory");
        c->tensors = t;
        qk_ecard_cell *cells = realloc(c->cells, (size_t)cap * (size_t)c->n_fmt * sizeof *cells);
        if (!cells)
            return qk_errf(err, QK_EIO, "out of memory");
        c->cells = cells;
        c->cap_tensor = cap;
    }
    qk_ecard_tensor *t = &c->tensors[c->n_tensor];
    if (!(t->name = strdup(name)))
        return qk_errf(err, QK_EIO, "out of memory");
    t->rows = rows, t->cols = cols;
    add_job j = {.card = c, .x = x, .rows = rows, .cols = cols,
                 .cells = c->cells + (size_t)c->n_tensor * c->n_fmt};
    qk_parallel_for(nthreads, (size_t)c->n_fmt, 1, add_range, &j);
    c->n_tensor++;
    if (j.failed)
        return qk_errf(err, QK_EIO, "out of memory scoring %s", name);
    return 0;
}

int qk_ecard_add_checkpoint(qk_ecard *c, const char *path, const char *glob, int nthreads,
                            qk_err *err)
{
    qk_tensorset *s;
    int rc = qk_tensorset_open(&s, path, err);
    if (rc)
        return rc;
    int added = 0;
    for (uint64_t i = 0; i < s->n && !rc; i++) {
        const qk_tensor *t = &s->t[i];
        if (t->n_dims < 2 || (glob && fnmatch(glob, t->name, 0) != 0))
            continue;
        const qk_type_traits *tt = t->type >= 0 ? qk_type_get(t->type) : NULL;
        const uint64_t rows = qk_tensor_rows(t);
        const int64_t cols = t->ne[0];
        if (!tt || !tt->to_float || cols % tt->blck || rows > INT64_MAX / (uint64_t)cols ||
            rows * (uint64_t)cols > SIZE_MAX / sizeof(float))
            continue; /* not a decodable matrix */
        float *x = malloc((size_t)(rows * (uint64_t)cols) * sizeof *x);
        if (!x) {
            rc = qk_errf(err, QK_EIO, "out of memory for %s", t->name);
            break;
        }
        if (!(rc = qk_dequantize_rows(t->type, t->data, x, (int64_t)rows, cols, nthreads, err)))
            rc = qk_ecard_add(c, t->name, x, (int64_t)rows, cols, nthreads, err);
        free(x);
        added++;
    }
    qk_tensorset_close(s);
    if (!rc && added == 0)
        rc = qk_errf(err, QK_EINPUT, "%s: no matrix%s%s", path, glob ? " matches " : "",
                     glob ? glob : "");
    return rc;
}

static int find_fmt(const qk_ecard *c, const char *family, const char *gran)
{
    for (int i = 0; i < c->n_fmt; i++)
        if (strcmp(c->fmts[i].family, family) == 0 && strcmp(c->fmts[i].gran, gran) == 0)
            return i;
    return -1;
}

void qk_ecard_summarize(qk_ecard *c)
{
    free(c->sums);
    c->sums = calloc((size_t)(c->n_fmt ? c->n_fmt : 1), sizeof *c->sums);
    if (!c->sums)
        return;
    for (int k = 0; k < c->n_fmt; k++) {
        qk_ecard_sum *s = &c->sums[k];
        double snr = 0.0, bpe = 0.0;
        for (int t = 0; t < c->n_tensor; t++) {
            const qk_ecard_cell *cell = &c->cells[(size_t)t * c->n_fmt + k];
            if (!cell->ok)
                continue;
            const double n = (double)c->tensors[t].rows * (double)c->tensors[t].cols;
            snr += n * cell->snr_db;
            bpe += n * cell->bpe;
            s->params += (uint64_t)n;
            s->n_tensors++;
        }
        s->snr_db = s->params ? snr / (double)s->params : NAN;
        s->bpe = s->params ? bpe / (double)s->params : NAN;
    }
    for (int k = 0; k < c->n_fmt; k++) {
        int it = find_fmt(c, c->fmts[k].family, "tensor");
        int ig = find_fmt(c, c->fmts[k].family, "g128");
        c->sums[k].gain_tensor = it >= 0 ? c->sums[k].snr_db - c->sums[it].snr_db : NAN;
        c->sums[k].gain_g128 = ig >= 0 ? c->sums[k].snr_db - c->sums[ig].snr_db : NAN;
    }
}

/* ---- output -------------------------------------------------------------- */

/* A number for md/csv: "inf", "" (csv) / "—" (md) for NaN, else %.*f. */
static void num(FILE *f, double v, int prec, bool md)
{
    if (isnan(v))
        fputs(md ? "—" : "", f);
    else if (isinf(v))
        fputs(v > 0 ? "inf" : "-inf", f);
    else
        fprintf(f, "%.*f", prec, v);
}

void qk_ecard_write_md(const qk_ecard *c, FILE *f, bool per_tensor)
{
    uint64_t total = 0;
    for (int t = 0; t < c->n_tensor; t++)
        total += (uint64_t)(c->tensors[t].rows * c->tensors[t].cols);
    fprintf(f, "Quantization-error scorecard: %s (%d matrices, %llu parameters)\n\n", c->source,
            c->n_tensor, (unsigned long long)total);
    fprintf(f, "| family | granularity | format | bits/elem | mean SNR dB | vs tensor dB | "
               "vs g128 dB | coverage |\n");
    fprintf(f, "|---|---|---|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < c->n_fmt; k++) {
        const qk_ecard_sum *s = &c->sums[k];
        fprintf(f, "| %s | %s | %s | ", c->fmts[k].family, c->fmts[k].gran, c->fmts[k].label);
        num(f, s->bpe * 8, 3, true), fputs(" | ", f);
        num(f, s->snr_db, 2, true), fputs(" | ", f);
        num(f, s->gain_tensor, 2, true), fputs(" | ", f);
        num(f, s->gain_g128, 2, true);
        fprintf(f, " | %d/%d |\n", s->n_tensors, c->n_tensor);
    }
    if (!per_tensor)
        return;
    for (int t = 0; t < c->n_tensor; t++) {
        const qk_ecard_tensor *tn = &c->tensors[t];
        fprintf(f, "\n%s (%lld x %lld)\n\n", tn->name, (long long)tn->rows, (long long)tn->cols);
        fprintf(f, "| format | bits/elem | SNR dB | NMSE | max abs err | padded |\n");
        fprintf(f, "|---|---:|---:|---:|---:|---|\n");
        for (int k = 0; k < c->n_fmt; k++) {
            const qk_ecard_cell *cell = &c->cells[(size_t)t * c->n_fmt + k];
            fprintf(f, "| %s | ", c->fmts[k].label);
            if (!cell->ok) {
                fputs("n/a | | | | |\n", f);
                continue;
            }
            num(f, cell->bpe * 8, 3, true), fputs(" | ", f);
            num(f, cell->snr_db, 2, true);
            fprintf(f, " | %.4e | %.4e | %s |\n", cell->nmse, cell->max_abs,
                    cell->padded ? "yes" : "no");
        }
    }
}

void qk_ecard_write_csv(const qk_ecard *c, FILE *f)
{
    fputs("kind,tensor,rows,cols,family,granularity,format,bytes_per_elem,snr_db,nmse,"
          "max_abs_err,padded,gain_vs_tensor_db,gain_vs_g128_db\n",
          f);
    for (int t = 0; t < c->n_tensor; t++)
        for (int k = 0; k < c->n_fmt; k++) {
            const qk_ecard_cell *cell = &c->cells[(size_t)t * c->n_fmt + k];
            if (!cell->ok)
                continue;
            fprintf(f, "tensor,%s,%lld,%lld,%s,%s,%s,", c->tensors[t].name,
                    (long long)c->tensors[t].rows, (long long)c->tensors[t].cols, c->fmts[k].family,
                    c->fmts[k].gran, c->fmts[k].label);
            num(f, cell->bpe, 6, false), fputc(',', f);
            num(f, cell->snr_db, 4, false);
            fprintf(f, ",%.6e,%.6e,%d,,\n", cell->nmse, cell->max_abs, cell->padded);
        }
    for (int k = 0; k < c->n_fmt; k++) {
        const qk_ecard_sum *s = &c->sums[k];
        fprintf(f, "summary,,,%llu,%s,%s,%s,", (unsigned long long)s->params, c->fmts[k].family,
                c->fmts[k].gran, c->fmts[k].label);
        num(f, s->bpe, 6, false), fputc(',', f);
        num(f, s->snr_db, 4, false), fputs(",,,,", f);
        num(f, s->gain_tensor, 4, false), fputc(',', f);
        num(f, s->gain_g128, 4, false), fputc('\n', f);
    }
}

void qk_ecard_write_json(const qk_ecard *c, FILE *f)
{
    qk_json j;
    qk_json_init(&j, f, true);
    qk_json_obj(&j);
    qk_json_key(&j, "source"), qk_json_str(&j, c->source);
    qk_json_key(&j, "formats");
    qk_json_arr(&j);
    for (int k = 0; k < c->n_fmt; k++) {
        const qk_ecard_sum *s = &c->sums[k];
        qk_json_obj(&j);
        qk_json_key(&j, "family"), qk_json_str(&j, c->fmts[k].family);
        qk_json_key(&j, "granularity"), qk_json_str(&j, c->fmts[k].gran);
        qk_json_key(&j, "format"), qk_json_str(&j, c->fmts[k].label);
        qk_json_key(&j, "params"), qk_json_uint(&j, s->params);
        qk_json_key(&j, "tensors"), qk_json_int(&j, s->n_tensors);
        qk_json_key(&j, "bytes_per_elem"), qk_json_f64(&j, s->bpe);
        qk_json_key(&j, "mean_snr_db"), qk_json_f64(&j, s->snr_db);
        qk_json_key(&j, "gain_vs_tensor_db"), qk_json_f64(&j, s->gain_tensor);
        qk_json_key(&j, "gain_vs_g128_db"), qk_json_f64(&j, s->gain_g128);
        qk_json_end_obj(&j);
    }
    qk_json_end_arr(&j);
    qk_json_key(&j, "tensors");
    qk_json_arr(&j);
    for (int t = 0; t < c->n_tensor; t++) {
        qk_json_obj(&j);
        qk_json_key(&j, "name"), qk_json_str(&j, c->tensors[t].name);
        qk_json_key(&j, "rows"), qk_json_int(&j, c->tensors[t].rows);
        qk_json_key(&j, "cols"), qk_json_int(&j, c->tensors[t].cols);
        qk_json_key(&j, "results");
        qk_json_arr(&j);
        for (int k = 0; k < c->n_fmt; k++) {
            const qk_ecard_cell *cell = &c->cells[(size_t)t * c->n_fmt + k];
            if (!cell->ok)
                continue;
            qk_json_obj(&j);
            qk_json_key(&j, "format"), qk_json_str(&j, c->fmts[k].label);
            qk_json_key(&j, "bytes_per_elem"), qk_json_f64(&j, cell->bpe);
            qk_json_key(&j, "snr_db"), qk_json_f64(&j, cell->snr_db);
            qk_json_key(&j, "nmse"), qk_json_f64(&j, cell->nmse);
            qk_json_key(&j, "max_abs_err"), qk_json_f64(&j, cell->max_abs);
            qk_json_key(&j, "padded"), qk_json_bool(&j, cell->padded);
            qk_json_end_obj(&j);
        }
        qk_json_end_arr(&j);
        qk_json_end_obj(&j);
    }
    qk_json_end_arr(&j);
    qk_json_end_obj(&j);
    qk_json_done(&j);
}
