/* kldstats.c - llama-perplexity's accumulators, printouts and percentile
 * rules (tools/perplexity/perplexity.cpp: kl_divergence_result, log_softmax,
 * kl_divergence(), perplexity()), and the .qkpart partial-results file. */
#include "lib/eval/kldstats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "lib/core/ckd.h"
#include "lib/core/outfile.h"

void qk_kld_acc_init(qk_kld_acc *a, int mode, bool keep_records)
{
    memset(a, 0, sizeof *a);
    a->mode = mode;
    a->keep = keep_records;
}

void qk_kld_acc_free(qk_kld_acc *a)
{
    free(a->kld_values), free(a->p_diff_values), free(a->rec);
    memset(a, 0, sizeof *a);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem, qk_err *err)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 1024;
    while (n < need)
        n *= 2;
    uint64_t bytes;
    if (qk_ckd_mul(&bytes, n, elem))
        return qk_errf(err, QK_EIO, "out of memory (%zu records)", n);
    void *q = realloc(*p, (size_t)bytes);
    if (!q)
        return qk_errf(err, QK_EIO, "out of memory (%zu records)", n);
    *p = q;
    *cap = n;
    return 0;
}

/* The KLD steps of log_softmax(..., kl_divergence_result &): nll, nll_base
 * and p_diff are floats there, so their squares and products are float
 * products added to double sums. */
int qk_kld_acc_add(qk_kld_acc *a, const qk_kld_tok *t, qk_err *err)
{
    if (a->keep) {
        size_t cap = a->cap_rec;
        if (grow((void **)&a->rec, &cap, a->n_rec + 1, sizeof *a->rec, err))
            return err->code;
        a->cap_rec = cap;
        a->rec[a->n_rec++] = *t;
    }
    if (a->mode == QK_KLD_MODE_PPL) {
        a->sum_nll += t->nll;
        a->sum_nll2 += t->nll * t->nll;
        a->count++;
        return 0;
    }
    size_t cap = a->cap;
    if (grow((void **)&a->kld_values, &cap, a->count + 1, sizeof(float), err))
        return err->code;
    cap = a->cap;
    if (grow((void **)&a->p_diff_values, &cap, a->count + 1, sizeof(float), err))
        return err->code;
    a->cap = cap;
    const float nll = (float)t->nll, nb = t->nll_base, pd = t->p_diff;
    a->sum_nll += nll;
    a->sum_nll2 += nll * nll;
    a->sum_nll_base += nb;
    a->sum_nll_base2 += nb * nb;
    a->sum_nll_nll_base += nll * nb;
    a->sum_kld += t->kld;
    a->sum_kld2 += t->kld * t->kld;
    a->n_same_top += t->same_top != 0;
    a->sum_p_diff += pd;
    const double pd2 = pd * pd;
    a->sum_p_diff2 += pd2;
    a->sum_p_diff4 += pd2 * pd2;
    a->max_p_diff = fmaxf(a->max_p_diff, fabsf(pd));
    a->kld_values[a->count] = (float)t->kld;
    a->p_diff_values[a->count] = pd;
    a->count++;
    return 0;
}

/* mean_and_uncertainty of kl_divergence(): no error for 10 values or fewer. */
static qk_kld_ve mean_unc(double sum, double sum2, uint64_t count)
{
    qk_kld_ve r = {0, 0};
    if (count < 1)
        return r;
    r.v = sum / (double)count;
    double df = sum2 / (double)count - r.v * r.v;
    r.e = df > 0 && count > 10 ? sqrt(df / (double)(count - 1)) : 0.0;
    return r;
}

/* covariance of kl_divergence(): 0 below 10 values. */
static double covariance(double suma, double sumb, double sumab, uint64_t count)
{
    if (count < 10)
        return 0.0;
    double var = sumab / (double)count - (suma / (double)count) * (sumb / (double)count);
    return var / (double)(count - 1);
}

bool qk_kld_final_ppl(const qk_kld_acc *a, double *ppl, double *err)
{
    const double n = (double)a->count;
    const double nll = a->sum_nll / n;
    double nll2 = a->sum_nll2 / n;
    *ppl = exp(nll);
    nll2 -= nll * nll;
    if (!(nll2 > 0)) {
        *err = 0;
        return false;
    }
    *err = sqrt(nll2 / (n - 1)) * *ppl;
    return true;
}

void qk_kld_print_table_header(FILE *f)
{
    fputs("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence"
          "              \xce\x94p RMS            Same top p\n", f);
}

void qk_kld_print_chunk(FILE *f, const qk_kld_acc *a, int chunk_no)
{
    if (a->mode == QK_KLD_MODE_PPL) {
        fprintf(f, "[%d]%.4f,", chunk_no, exp(a->sum_nll / (double)a->count));
        fflush(f);
        return;
    }
    const qk_kld_ve lp = mean_unc(a->sum_nll, a->sum_nll2, a->count);
    const qk_kld_ve lb = mean_unc(a->sum_nll_base, a->sum_nll_base2, a->count);
    const double cov = covariance(a->sum_nll, a->sum_nll_base, a->sum_nll_nll_base, a->count);
    const double ppl = exp(lp.v);
    const qk_kld_ve kl = mean_unc(a->sum_kld, a->sum_kld2, a->count);
    const qk_kld_ve mse = mean_unc(a->sum_p_diff2, a->sum_p_diff4, a->count);
    const double rms = sqrt(mse.v);
    const double top = 1. * (double)a->n_same_top / (double)a->count;
    fprintf(f, "%4d", chunk_no);
    fprintf(f, "    %9.4f \xc2\xb1 %9.4f", ppl, ppl * lp.e);
    fprintf(f, "    %10.5f \xc2\xb1 %10.5f", lp.v - lb.v, sqrt(lp.e * lp.e + lb.e * lb.e - 2.0 * cov));
    fprintf(f, "    %10.5f \xc2\xb1 %10.5f", kl.v, kl.e);
    fprintf(f, "    %6.3f \xc2\xb1 %6.3f %%", 100.0 * rms, 100.0 * (0.5 / rms * mse.e));
    fprintf(f, "    %6.3f \xc2\xb1 %6.3f %%", 100.0 * top,
            100.0 * sqrt(top * (1 - top) / (double)(a->count - 1)));
    fputc('\n', f);
    fflush(f);
}

static int cmp_float(const void *x, const void *y)
{
    const float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

/* The percentile lambda of kl_divergence(): linear interpolation in float. */
float qk_kld_percentile(const float *v, size_t n, float fraction)
{
    if (fraction <= 0)
        return v[0];
    if (fraction >= 1)
        return v[n - 1];
    float p = fraction * (float)(n - 1);
    size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static float median(const float *v, size_t n)
{
    return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

void qk_kld_summarize(qk_kld_acc *a, qk_kld_summary *s)
{
    memset(s, 0, sizeof *s);
    const uint64_t n = a->count;
    s->count = n;
    if (n == 0)
        return;
    qsort(a->kld_values, n, sizeof(float), cmp_float);
    qsort(a->p_diff_values, n, sizeof(float), cmp_float);

    const qk_kld_ve lp = mean_unc(a->sum_nll, a->sum_nll2, n);
    const qk_kld_ve lb = mean_unc(a->sum_nll_base, a->sum_nll_base2, n);
    s->ppl.v = exp(lp.v);
    s->ppl.e = s->ppl.v * lp.e;
    s->ppl_base.v = exp(lb.v);
    s->ppl_base.e = s->ppl_base.v * lb.e;
    const double cov = covariance(a->sum_nll, a->sum_nll_base, a->sum_nll_nll_base, n);
    s->cor = cov / (lp.e * lb.e);
    s->ln_ratio.v = lp.v - lb.v;
    s->ln_ratio.e = sqrt(lp.e * lp.e + lb.e * lb.e - 2.0 * cov);
    s->ratio.v = exp(s->ln_ratio.v);
    s->ratio.e = s->ratio.v * s->ln_ratio.e;
    const double ppl_cov = s->ppl.v * s->ppl_base.v * cov;
    s->diff.v = s->ppl.v - s->ppl_base.v;
    s->diff.e = sqrt(s->ppl.e * s->ppl.e + s->ppl_base.e * s->ppl_base.e - 2.0 * ppl_cov);

    s->kld = mean_unc(a->sum_kld, a->sum_kld2, n);
    const float *kv = a->kld_values;
    static const float kfrac[] = {0.999f, 0.990f, 0.950f, 0.900f, -1, 0.100f, 0.050f, 0.010f, 0.001f};
    s->kld_pct[0] = kv[n - 1];
    for (int i = 0; i < 9; i++)
        s->kld_pct[1 + i] = kfrac[i] < 0 ? median(kv, n) : qk_kld_percentile(kv, n, kfrac[i]);
    s->kld_pct[10] = kv[0];

    const qk_kld_ve dp = mean_unc(a->sum_p_diff, a->sum_p_diff2, n);
    s->dp.v = 100.0 * dp.v;
    s->dp.e = 100.0 * dp.e;
    const float *pv = a->p_diff_values;
    static const float pfrac[] = {0.999f, 0.990f, 0.950f, 0.900f, 0.750f, -1,
                                  0.250f, 0.100f, 0.050f, 0.010f, 0.001f};
    s->dp_pct[0] = 100.0 * pv[n - 1];
    for (int i = 0; i < 11; i++)
        s->dp_pct[1 + i] = 100.0 * (pfrac[i] < 0 ? median(pv, n) : qk_kld_percentile(pv, n, pfrac[i]));
    s->dp_pct[12] = 100.0 * pv[0];

    const qk_kld_ve mse = mean_unc(a->sum_p_diff2, a->sum_p_diff4, n);
    const double rms = sqrt(mse.v);
    s->rms_dp.v = 100.0 * rms;
    s->rms_dp.e = 100.0 * (0.5 / rms * mse.e);
    const double top = 1.0 * (double)a->n_same_top / (double)n;
    s->same_top.v = 100.0 * top;
    s->same_top.e = 100.0 * sqrt(top * (1.0 - top) / (double)(n - 1));
}

void qk_kld_print_summary(FILE *f, const qk_kld_summary *s)
{
    static const char *const pm = "\xc2\xb1", *const dp = "\xce\x94p";
    fputs("====== Perplexity statistics ======\n", f);
    fprintf(f, "Mean PPL(Q)                   : %10.6f %s %10.6f\n", s->ppl.v, pm, s->ppl.e);
    fprintf(f, "Mean PPL(base)                : %10.6f %s %10.6f\n", s->ppl_base.v, pm, s->ppl_base.e);
    fprintf(f, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * s->cor);
    fprintf(f, "Mean ln(PPL(Q)/PPL(base))     : %10.6f %s %10.6f\n", s->ln_ratio.v, pm, s->ln_ratio.e);
    fprintf(f, "Mean PPL(Q)/PPL(base)         : %10.6f %s %10.6f\n", s->ratio.v, pm, s->ratio.e);
    fprintf(f, "Mean PPL(Q)-PPL(base)         : %10.6f %s %10.6f\n", s->diff.v, pm, s->diff.e);
    fputs("\n====== KL divergence statistics ======\n", f);
    fprintf(f, "Mean    KLD: %10.6f %s %10.6f\n", s->kld.v, pm, s->kld.e);
    static const char *const kl[] = {"Maximum KLD", "99.9%   KLD", "99.0%   KLD", "95.0%   KLD",
                                     "90.0%   KLD", "Median  KLD", "10.0%   KLD", " 5.0%   KLD",
                                     " 1.0%   KLD", " 0.1%   KLD", "Minimum KLD"};
    for (int i = 0; i < 11; i++)
        fprintf(f, "%s: %10.6f\n", kl[i], s->kld_pct[i]);
    fputs("\n====== Token probability statistics ======\n", f);
    fprintf(f, "Mean    %s: %6.3f %s %5.3f %%\n", dp, s->dp.v, pm, s->dp.e);
    static const char *const pl[] = {"Maximum", "99.9%  ", "99.0%  ", "95.0%  ", "90.0%  ",
                                     "75.0%  ", "Median ", "25.0%  ", "10.0%  ", " 5.0%  ",
                                     " 1.0%  ", " 0.1%  ", "Minimum"};
    for (int i = 0; i < 13; i++)
        fprintf(f, "%s %s: %6.3f%%\n", pl[i], dp, s->dp_pct[i]);
    fprintf(f, "RMS %s    : %6.3f %s %5.3f %%\n", dp, s->rms_dp.v, pm, s->rms_dp.e);
    fprintf(f, "Same top p: %6.3f %s %5.3f %%\n", s->same_top.v, pm, s->same_top.e);
}

/* ---- .qkpart ---------------------------------------------------------------- */

#define PART_MAGIC "QKPART1"
#define PART_HDR 56
#define REC_SIZE 25

uint64_t qk_tokens_hash(const int32_t *tokens, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        const uint32_t v = (uint32_t)tokens[i];
        for (int b = 0; b < 4; b++) {
            h ^= (v >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static void pack_rec(uint8_t *p, const qk_kld_tok *t)
{
    memcpy(p, &t->nll, 8);
    memcpy(p + 8, &t->kld, 8);
    memcpy(p + 16, &t->nll_base, 4);
    memcpy(p + 20, &t->p_diff, 4);
    p[24] = t->same_top;
}

static void unpack_rec(const uint8_t *p, qk_kld_tok *t)
{
    memcpy(&t->nll, p, 8);
    memcpy(&t->kld, p + 8, 8);
    memcpy(&t->nll_base, p + 16, 4);
    memcpy(&t->p_diff, p + 20, 4);
    t->same_top = p[24];
}

int qk_part_write(const char *path, const qk_part_info *info, const qk_kld_acc *a, qk_err *err)
{
    uint8_t hdr[PART_HDR] = {0};
    memcpy(hdr, PART_MAGIC, 8);
    const uint32_t v[8] = {1, (uint32_t)info->mode, (uint32_t)info->n_ctx, (uint32_t)info->n_vocab,
                           (uint32_t)info->n_chunk, (uint32_t)info->chunk_a, (uint32_t)info->chunk_b,
                           (uint32_t)info->rows};
    for (int i = 0; i < 8; i++)
        put32(hdr + 8 + 4 * i, v[i]);
    put64(hdr + 40, info->tokens_hash);
    put64(hdr + 48, (uint64_t)a->n_rec);
    uint64_t raw;
    if (qk_ckd_mul(&raw, a->n_rec, REC_SIZE) || raw > SIZE_MAX / 2)
        return qk_errf(err, QK_EIO, "%s: too many records", path);
    uint8_t *buf = malloc(raw ? (size_t)raw : 1);
    const size_t cap = ZSTD_compressBound((size_t)raw);
    uint8_t *z = malloc(cap);
    int rc = 0;
    if (!buf || !z) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < a->n_rec; i++)
        pack_rec(buf + i * REC_SIZE, &a->rec[i]);
    const size_t zn = ZSTD_compress(z, cap, buf, (size_t)raw, 9);
    if (ZSTD_isError(zn)) {
        rc = qk_errf(err, QK_EIO, "%s: zstd: %s", path, ZSTD_getErrorName(zn));
        goto done;
    }
    qk_out o;
    if ((rc = qk_out_open(&o, path, err)))
        goto done;
    if ((rc = qk_out_write(&o, hdr, sizeof hdr, err)) || (rc = qk_out_write(&o, z, zn, err)) ||
        (rc = qk_out_commit(&o, err)))
        qk_out_abort(&o);
done:
    free(buf), free(z);
    return rc;
}

/* Read the header bytes and the rest of the file (the compressed records). */
static int part_load(const char *path, qk_part_info *info, uint8_t **rest, size_t *n_rest,
                     qk_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return qk_err_sys(err, path, "cannot open");
    uint8_t hdr[PART_HDR];
    int rc = 0;
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr) {
        rc = qk_err_at(err, path, "header", 0, "truncated: a .qkpart header is %d bytes", PART_HDR);
        goto done;
    }
    if (memcmp(hdr, PART_MAGIC, 8) != 0) {
        rc = qk_err_at(err, path, "magic", 0, "not a qk-kld partial-results file");
        goto done;
    }
    if (get32(hdr + 8) != 1) {
        rc = qk_err_at(err, path, "version", 8, "version %u is not supported", get32(hdr + 8));
        goto done;
    }
    info->mode = (int)get32(hdr + 12);
    info->n_ctx = (int)get32(hdr + 16);
    info->n_vocab = (int)get32(hdr + 20);
    info->n_chunk = (int)get32(hdr + 24);
    info->chunk_a = (int)get32(hdr + 28);
    info->chunk_b = (int)get32(hdr + 32);
    info->rows = (int)get32(hdr + 36);
    info->tokens_hash = get64(hdr + 40);
    info->n_records = get64(hdr + 48);
    if (info->mode != QK_KLD_MODE_PPL && info->mode != QK_KLD_MODE_KLD) {
        rc = qk_err_at(err, path, "mode", 12, "unknown mode %d", info->mode);
        goto done;
    }
    if (info->n_ctx < 4 || info->n_vocab < 1 || info->n_chunk < 1 || info->chunk_a < 0 ||
        info->chunk_b <= info->chunk_a || info->chunk_b > info->n_chunk ||
        info->rows != info->n_ctx - 1 - info->n_ctx / 2) {
        rc = qk_err_at(err, path, "chunk range", 16, "inconsistent header (n_ctx %d, chunks %d:%d of %d)",
                       info->n_ctx, info->chunk_a, info->chunk_b, info->n_chunk);
        goto done;
    }
    if (info->n_records != (uint64_t)(info->chunk_b - info->chunk_a) * (uint64_t)info->rows) {
        rc = qk_err_at(err, path, "records", 48, "%llu records, expected %llu",
                       (unsigned long long)info->n_records,
                       (unsigned long long)(info->chunk_b - info->chunk_a) * (uint64_t)info->rows);
        goto done;
    }
    if (rest) {
        if (fseek(f, 0, SEEK_END) != 0) {
            rc = qk_err_sys(err, path, "seek");
            goto done;
        }
        long end = ftell(f);
        if (end < PART_HDR || fseek(f, PART_HDR, SEEK_SET) != 0) {
            rc = qk_err_sys(err, path, "seek");
            goto done;
        }
        *n_rest = (size_t)(end - PART_HDR);
        *rest = malloc(*n_rest ? *n_rest : 1);
        if (!*rest) {
            rc = qk_errf(err, QK_EIO, "out of memory");
            goto done;
        }
        if (fread(*rest, 1, *n_rest, f) != *n_rest) {
            free(*rest);
            *rest = NULL;
            rc = qk_err_sys(err, path, "read");
        }
    }
done:
    fclose(f);
    return rc;
}

int qk_part_read_info(const char *path, qk_part_info *info, qk_err *err)
{
    return part_load(path, info, NULL, NULL, err);
}

int qk_part_replay(const char *path, const qk_part_info *info, qk_kld_acc *a,
                   void (*on_chunk)(void *ud, int chunk_no, const qk_kld_acc *a), void *ud,
                   qk_err *err)
{
    qk_part_info got;
    uint8_t *z = NULL;
    size_t zn = 0;
    int rc = part_load(path, &got, &z, &zn, err);
    if (rc)
        return rc;
    const uint64_t raw = info->n_records * REC_SIZE;
    const unsigned long long fsz = ZSTD_getFrameContentSize(z, zn);
    uint8_t *buf = NULL;
    if (fsz != raw) {
        rc = qk_err_at(err, path, "records", PART_HDR, "truncated or corrupt record data");
        goto done;
    }
    buf = malloc(raw ? (size_t)raw : 1);
    if (!buf) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto done;
    }
    const size_t n = ZSTD_decompress(buf, (size_t)raw, z, zn);
    if (ZSTD_isError(n) || n != raw) {
        rc = qk_err_at(err, path, "records", PART_HDR, "truncated or corrupt record data");
        goto done;
    }
    for (uint64_t i = 0; i < info->n_records; i++) {
        qk_kld_tok t;
        unpack_rec(buf + i * REC_SIZE, &t);
        if ((rc = qk_kld_acc_add(a, &t, err)))
            goto done;
        if ((i + 1) % (uint64_t)info->rows == 0 && on_chunk)
            on_chunk(ud, info->chunk_a + (int)((i + 1) / (uint64_t)info->rows), a);
    }
done:
    free(buf), free(z);
    return rc;
}

static int cmp_part(const void *x, const void *y)
{
    const qk_part_info *a = x, *b = y;
    return (a->chunk_a > b->chunk_a) - (a->chunk_a < b->chunk_a);
}

int qk_parts_merge(char *const *paths, int n, qk_kld_acc *acc, qk_part_info *first, int *chunk_b,
                   void (*on_chunk)(void *ud, int chunk_no, const qk_kld_acc *a), void *ud,
                   qk_err *err)
{
    memset(acc, 0, sizeof *acc);
    if (n < 1 || n > (1 << 20))
        return qk_errf(err, QK_EINPUT, "no .qkpart files to merge");
    qk_part_info *info = calloc((size_t)n, sizeof *info), *sorted = calloc((size_t)n, sizeof *sorted);
    int *order = calloc((size_t)n, sizeof *order);
    int rc = 0;
    if (!info || !order || !sorted) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++)
        if ((rc = qk_part_read_info(paths[i], &info[i], err)))
            goto done;
    /* sort a copy by first chunk, remembering each part's path */
    memcpy(sorted, info, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_part);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            if (info[k].chunk_a == sorted[i].chunk_a && info[k].chunk_b == sorted[i].chunk_b &&
                info[k].tokens_hash == sorted[i].tokens_hash) {
                order[i] = k;
                break;
            }
    for (int i = 0; i < n; i++) {
        const qk_part_info *p = &sorted[i], *q = &sorted[0];
        const char *path = paths[order[i]];
        if (p->mode != q->mode || p->n_ctx != q->n_ctx || p->n_vocab != q->n_vocab ||
            p->n_chunk != q->n_chunk || p->tokens_hash != q->tokens_hash) {
            rc = qk_errf(err, QK_EINPUT, "%s: another run than %s (mode, n_ctx, vocabulary or tokens differ)",
                         path, paths[order[0]]);
            goto done;
        }
        if (i > 0 && p->chunk_a != sorted[i - 1].chunk_b) {
            rc = qk_errf(err, QK_EINPUT, "%s: chunks %d..%d %s chunks %d..%d of %s", path,
                         p->chunk_a, p->chunk_b - 1,
                         p->chunk_a < sorted[i - 1].chunk_b ? "overlap" : "leave a gap after",
                         sorted[i - 1].chunk_a, sorted[i - 1].chunk_b - 1, paths[order[i - 1]]);
            goto done;
        }
    }
    qk_kld_acc_init(acc, sorted[0].mode, false);
    for (int i = 0; i < n && !rc; i++)
        rc = qk_part_replay(paths[order[i]], &sorted[i], acc, on_chunk, ud, err);
    if (!rc) {
        *first = sorted[0];
        *chunk_b = sorted[n - 1].chunk_b;
    }
done:
    free(info), free(sorted), free(order);
    return rc;
}
