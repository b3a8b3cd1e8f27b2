/* kldbase.c - llama-perplexity's base-logits file and qk's compressed one
 * (format descriptions in kldbase.h; the quantization is log_softmax(...,
 * uint16_t *log_prob, ...) of tools/perplexity/perplexity.cpp). */
#include "lib/eval/kldbase.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "lib/core/ckd.h"
#include "lib/engine/matmul.h"
#include "lib/core/outfile.h"
#include "lib/core/threads.h"
#include "kernels/expf.h"
#include "kernels/types.h"

#define LLAMA_MAGIC "_logits_"
#define QK_MAGIC "QKKLDB1"
#define QK_END "QKKLDEND"
#define QK_HDR 40

/* perplexity.cpp's nearest_int: round to nearest through the float
 * mantissa (|fval| <= 4194303). */
static int nearest_int(float fval)
{
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

void qk_kldb_quantize_row(const float *logits, int n_vocab, float *scale_out, float *min_lp_out,
                          uint16_t *q)
{
    float max_logit = logits[0], min_logit = logits[0];
    for (int i = 1; i < n_vocab; i++) {
        max_logit = fmaxf(max_logit, logits[i]);
        min_logit = fminf(min_logit, logits[i]);
    }
    min_logit = fmaxf(min_logit, max_logit - 16);
    const double sum_exp = qk_expf_sum(logits, max_logit, (size_t)n_vocab);
    const float log_sum_exp = (float)log(sum_exp);
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit) / 65535.f;
    *scale_out = scale;
    *min_lp_out = min_log_prob;
    if (scale != 0.0f) {
        const float inv_scale = 1 / scale;
        for (int i = 0; i < n_vocab; i++)
            q[i] = logits[i] > min_logit ? (uint16_t)nearest_int(inv_scale * (logits[i] - min_logit)) : 0;
    } else {
        memset(q, 0, (size_t)n_vocab * sizeof *q);
    }
}

float qk_kldb_lse(const float *logits, int n_vocab, float *max_out)
{
    const float max = qk_row_max(logits, (size_t)n_vocab);
    const double sum = qk_expf_sum(logits, max, (size_t)n_vocab);
    *max_out = max;
    return (float)log(sum);
}

void qk_kldb_logprobs(const float *logits, int n_vocab, float *lp)
{
    float max;
    const float lse = qk_kldb_lse(logits, n_vocab, &max);
    for (int i = 0; i < n_vocab; i++)
        lp[i] = QK_KLDB_LOGPROB(logits[i], max, lse);
}

static size_t llama_nv(int n_vocab) { return 2 * (((size_t)n_vocab + 1) / 2) + 4; }

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* Bytes of one QK group of g rows. */
static size_t group_bytes(int g, int n_vocab)
{
    return (size_t)g * (8 + 8 * QK_KLDB_TOP + 2 * (size_t)n_vocab);
}

/* ---- reader ------------------------------------------------------------------ */

struct qk_kldb_reader {
    qk_kldb_info info;
    char *path;
    FILE *f;
    uint64_t data_off;      /* LLAMA: first row; QK: unused */
    uint64_t *frames;       /* QK: n_chunk frame offsets */
    ZSTD_DCtx *z;
    uint8_t *in;            /* QK: compressed input buffer */
    size_t in_cap;
    ZSTD_inBuffer zin;
    uint8_t *row;           /* QK: one group */
    int chunk, row_in_chunk; /* next row to read */
    int group_start, group_rows; /* QK: rows of the chunk held in `row` */
    /* QK factored */
    uint8_t *head_buf;      /* the decompressed output-layer block */
    qk_weight head;
    const float *bias;
    float *hid;             /* hidden states of a batch of rows */
    size_t hid_cap;         /* rows */
    qk_matmul_ws ws;
    int nthreads;
    /* LLAMA (llama_rows): a batch of rows' bytes, and where each came from */
    uint8_t *raw;
    struct raw_at {
        uint64_t off;       /* file offset */
        int chunk, row;     /* in the file */
        bool bad;           /* failed the log-probability check */
    } *raw_at;
    size_t raw_cap;         /* rows */
};

const qk_kldb_info *qk_kldb_reader_info(const qk_kldb_reader *r) { return &r->info; }

void qk_kldb_close(qk_kldb_reader *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    ZSTD_freeDCtx(r->z);
    qk_matmul_ws_free(&r->ws);
    free(r->head_buf), free(r->hid), free((void *)r->bias);
    free(r->info.tokens), free(r->path), free(r->frames), free(r->in), free(r->row);
    free(r->raw), free(r->raw_at);
    free(r);
}

static int read_at(qk_kldb_reader *r, uint64_t off, void *buf, size_t n, const char *field,
                   qk_err *err)
{
    if (fseeko(r->f, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, n, r->f) != n)
        return qk_err_at(err, r->path, field, off, "truncated: cannot read %zu bytes", n);
    return 0;
}

/* n_ctx, n_vocab, n_chunk sanity and the derived sizes. */
static int check_dims(qk_kldb_reader *r, uint64_t off, qk_err *err)
{
    qk_kldb_info *in = &r->info;
    if (in->n_ctx < 4 || in->n_ctx > (1 << 24) || in->n_vocab < 2 || in->n_vocab > (1 << 24) ||
        in->n_chunk < 1 || in->n_chunk > (1 << 28))
        return qk_err_at(err, r->path, "header", off, "implausible n_ctx %d, n_vocab %d, n_chunk %d",
                         in->n_ctx, in->n_vocab, in->n_chunk);
    in->rows = in->n_ctx - 1 - in->n_ctx / 2;
    return 0;
}

static int check_tokens(qk_kldb_reader *r, uint64_t off, qk_err *err)
{
    const qk_kldb_info *in = &r->info;
    const size_t n = (size_t)in->n_ctx * (size_t)in->n_chunk;
    for (size_t i = 0; i < n; i++)
        if (in->tokens[i] < 0 || in->tokens[i] >= in->n_vocab)
            return qk_err_at(err, r->path, "tokens", off + 4 * i,
                             "token %zu is %d, outside the vocabulary of %d", i,
                             (int)in->tokens[i], in->n_vocab);
    return 0;
}

static int open_llama(qk_kldb_reader *r, uint64_t size, qk_err *err)
{
    uint8_t h[20];
    int rc = read_at(r, 0, h, sizeof h, "header", err);
    if (rc)
        return rc;
    qk_kldb_info *in = &r->info;
    in->format = QK_KLDB_LLAMA;
    in->n_ctx = (int32_t)get32(h + 8);
    in->n_vocab = (int32_t)get32(h + 12);
    in->n_chunk = (int32_t)get32(h + 16);
    if ((rc = check_dims(r, 8, err)))
        return rc;
    uint64_t ntok = (uint64_t)in->n_ctx * (uint64_t)in->n_chunk, want, rows_bytes;
    if (qk_ckd_mul(&rows_bytes, (uint64_t)in->n_chunk * (uint64_t)in->rows, llama_nv(in->n_vocab) * 2) ||
        qk_ckd_add(&want, 20 + 4 * ntok, rows_bytes))
        return qk_err_at(err, r->path, "header", 8, "sizes overflow");
    if (size != want)
        return qk_err_at(err, r->path, size < want ? "log-probs" : "size", size < want ? size : want,
                         "%s: %llu bytes, but n_ctx %d, n_vocab %d and %d chunks need %llu",
                         size < want ? "truncated" : "trailing bytes", (unsigned long long)size,
                         in->n_ctx, in->n_vocab, in->n_chunk, (unsigned long long)want);
    in->tokens = malloc((size_t)ntok * 4);
    r->nthreads = 1;
    if (!in->tokens)
        return qk_errf(err, QK_EIO, "out of memory");
    if ((rc = read_at(r, 20, in->tokens, (size_t)ntok * 4, "tokens", err)) ||
        (rc = check_tokens(r, 20, err)))
        return rc;
    r->data_off = 20 + 4 * ntok;
    return 0;
}

/* The factored encoding's output layer: type, bias flag, shape, bytes. */
static int read_head(qk_kldb_reader *r, uint64_t off, uint64_t zsize, qk_err *err)
{
    qk_kldb_info *in = &r->info;
    uint8_t *z = malloc((size_t)zsize);
    if (!z)
        return qk_errf(err, QK_EIO, "out of memory");
    int rc = read_at(r, off, z, (size_t)zsize, "output layer", err);
    const unsigned long long n = rc ? 0 : ZSTD_getFrameContentSize(z, (size_t)zsize);
    if (!rc && (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n < 24 ||
                !qk_ckd_zstd_fits(n, zsize)))
        rc = qk_err_at(err, r->path, "output layer", off, "corrupt data");
    if (!rc && !(r->head_buf = malloc((size_t)n)))
        rc = qk_errf(err, QK_EIO, "out of memory (%llu bytes)", n);
    if (!rc) {
        const size_t got = ZSTD_decompress(r->head_buf, (size_t)n, z, (size_t)zsize);
        if (ZSTD_isError(got) || got != n)
            rc = qk_err_at(err, r->path, "output layer", off, "corrupt data");
    }
    free(z);
    if (rc)
        return rc;
    const uint8_t *b = r->head_buf;
    const int type = (int)get32(b);
    const uint32_t has_bias = get32(b + 4);
    const uint64_t cols = get64(b + 8), rows = get64(b + 16);
    const qk_type_traits *tt = qk_type_get(type);
    const qk_type_traits *vt = tt && tt->vec_dot_type >= 0 ? qk_type_get(tt->vec_dot_type) : NULL;
    if (!tt || !tt->vec_dot || !vt || (tt->vec_dot_type != QK_F32 && !vt->from_float))
        return qk_err_at(err, r->path, "output layer", off, "type %d has no dot product", type);
    if (rows != (uint64_t)in->n_vocab || cols < 1 || cols > (1 << 20) || has_bias > 1)
        return qk_err_at(err, r->path, "output layer", off, "shape %llu x %llu for a vocabulary of %d",
                         (unsigned long long)rows, (unsigned long long)cols, in->n_vocab);
    const size_t rs = qk_row_size(type, (int64_t)cols);
    uint64_t want;
    if (rs == 0 || qk_row_size(tt->vec_dot_type, (int64_t)cols) == 0 || qk_ckd_mul(&want, rows, rs) ||
        qk_ckd_add(&want, want, 24 + (has_bias ? 4 * rows : 0)) || want != n)
        return qk_err_at(err, r->path, "output layer", off, "%llu bytes do not hold %llu rows of %s",
                         n, (unsigned long long)rows, tt->name);
    r->head = (qk_weight){.name = "output", .name_len = 6, .type = type, .rows = (int64_t)rows,
                          .cols = (int64_t)cols, .row_size = rs, .data = b + 24};
    if (has_bias) {
        /* 24 + rows * row_size need not be 4-aligned: copy to the end's aligned spot */
        float *bias = malloc(4 * (size_t)rows);
        if (!bias)
            return qk_errf(err, QK_EIO, "out of memory");
        memcpy(bias, b + 24 + rows * rs, 4 * (size_t)rows);
        r->bias = bias;
    }
    in->factored = true;
    in->n_embd = (int)cols;
    return 0;
}

static int open_qk(qk_kldb_reader *r, uint64_t size, qk_err *err)
{
    uint8_t h[QK_HDR + 8];
    int rc = read_at(r, 0, h, sizeof h, "header", err);
    if (rc)
        return rc;
    qk_kldb_info *in = &r->info;
    in->format = QK_KLDB_QK;
    if (get32(h + 8) != 1)
        return qk_err_at(err, r->path, "version", 8, "version %u is not supported", get32(h + 8));
    in->n_ctx = (int32_t)get32(h + 12);
    in->n_vocab = (int32_t)get32(h + 16);
    in->n_chunk = (int32_t)get32(h + 20);
    if ((rc = check_dims(r, 12, err)))
        return rc;
    if (get32(h + 24) != QK_KLDB_TOP || get32(h + 28) != QK_KLDB_GROUP)
        return qk_err_at(err, r->path, "header", 24, "unsupported layout (top %u, group %u)",
                         get32(h + 24), get32(h + 28));
    /* trailer and index */
    uint8_t t[16];
    uint64_t idx_bytes = 8 * (uint64_t)in->n_chunk;
    if (size < QK_HDR + 8 + idx_bytes + 16)
        return qk_err_at(err, r->path, "trailer", size, "truncated: %llu bytes",
                         (unsigned long long)size);
    if ((rc = read_at(r, size - 16, t, 16, "trailer", err)))
        return rc;
    const uint64_t idx = get64(t);
    if (memcmp(t + 8, QK_END, 8) != 0 || idx != size - 16 - idx_bytes)
        return qk_err_at(err, r->path, "trailer", size - 16, "truncated or damaged (no index)");
    const uint64_t ntok = (uint64_t)in->n_ctx * (uint64_t)in->n_chunk;
    const uint64_t tsize = get64(h + QK_HDR);
    if (tsize > size || !qk_ckd_zstd_fits(ntok * 4, tsize))
        return qk_err_at(err, r->path, "tokens", QK_HDR, "%llu bytes cannot hold %llu tokens",
                         (unsigned long long)tsize, (unsigned long long)ntok);
    r->frames = malloc((size_t)idx_bytes);
    in->tokens = malloc((size_t)ntok * 4);
    if (!r->frames || !in->tokens)
        return qk_errf(err, QK_EIO, "out of memory");
    if ((rc = read_at(r, idx, r->frames, (size_t)idx_bytes, "index", err)))
        return rc;
    uint64_t prev = QK_HDR + 8 + tsize;
    if (tsize > size || prev + 8 > idx)
        return qk_err_at(err, r->path, "tokens", QK_HDR, "size %llu is past the end",
                         (unsigned long long)tsize);
    uint8_t hs[8];
    if ((rc = read_at(r, prev, hs, 8, "output layer", err)))
        return rc;
    const uint64_t hsize = get64(hs), hoff = prev + 8;
    if (hsize > idx - hoff)
        return qk_err_at(err, r->path, "output layer", prev, "size %llu is past the end",
                         (unsigned long long)hsize);
    if (hsize && (rc = read_head(r, hoff, hsize, err)))
        return rc;
    prev = hoff + hsize;
    for (int c = 0; c < in->n_chunk; c++) {
        if (r->frames[c] < prev || r->frames[c] >= idx)
            return qk_err_at(err, r->path, "index", idx + 8 * (uint64_t)c,
                             "chunk %d offset %llu is out of order", c,
                             (unsigned long long)r->frames[c]);
        prev = r->frames[c] + 1;
    }
    uint8_t *zt = malloc(tsize ? (size_t)tsize : 1);
    if (!zt)
        return qk_errf(err, QK_EIO, "out of memory");
    if ((rc = read_at(r, QK_HDR + 8, zt, (size_t)tsize, "tokens", err))) {
        free(zt);
        return rc;
    }
    const size_t n = ZSTD_decompress(in->tokens, (size_t)ntok * 4, zt, (size_t)tsize);
    free(zt);
    if (ZSTD_isError(n) || n != ntok * 4)
        return qk_err_at(err, r->path, "tokens", QK_HDR + 8, "corrupt token data");
    if ((rc = check_tokens(r, QK_HDR + 8, err)))
        return rc;
    r->z = ZSTD_createDCtx();
    r->in_cap = ZSTD_DStreamInSize();
    r->in = malloc(r->in_cap);
    r->row = malloc(group_bytes(QK_KLDB_GROUP, in->n_vocab));
    r->nthreads = 1;
    if (!r->z || !r->in || !r->row)
        return qk_errf(err, QK_EIO, "out of memory");
    return 0;
}

int qk_kldb_open(qk_kldb_reader **out, const char *path, qk_err *err)
{
    *out = NULL;
    qk_kldb_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    int rc;
    struct stat st;
    r->f = fopen(path, "rb");
    if (!r->f || fstat(fileno(r->f), &st) != 0) {
        rc = qk_err_sys(err, path, "cannot open");
        goto fail;
    }
    uint8_t magic[8];
    if (fread(magic, 1, 8, r->f) != 8) {
        rc = qk_err_at(err, path, "magic", 0, "truncated: not a base log-probability file");
        goto fail;
    }
    if (memcmp(magic, LLAMA_MAGIC, 8) == 0)
        rc = open_llama(r, (uint64_t)st.st_size, err);
    else if (memcmp(magic, QK_MAGIC, 8) == 0)
        rc = open_qk(r, (uint64_t)st.st_size, err);
    else
        rc = qk_err_at(err, path, "magic", 0,
                       "not a base log-probability file (llama.cpp \"_logits_\" or qk)");
    if (rc)
        goto fail;
    if ((rc = qk_kldb_seek_chunk(r, 0, err)))
        goto fail;
    *out = r;
    return 0;
fail:
    qk_kldb_close(r);
    return rc;
}

int qk_kldb_seek_chunk(qk_kldb_reader *r, int chunk, qk_err *err)
{
    const qk_kldb_info *in = &r->info;
    if (chunk < 0 || chunk >= in->n_chunk)
        return qk_errf(err, QK_EINPUT, "%s: chunk %d is outside its %d chunks", r->path, chunk + 1,
                       in->n_chunk);
    r->chunk = chunk;
    r->row_in_chunk = 0;
    r->group_start = r->group_rows = 0;
    uint64_t off;
    if (in->format == QK_KLDB_LLAMA)
        off = r->data_off + (uint64_t)chunk * (uint64_t)in->rows * llama_nv(in->n_vocab) * 2;
    else
        off = r->frames[chunk];
    if (fseeko(r->f, (off_t)off, SEEK_SET) != 0)
        return qk_err_sys(err, r->path, "seek");
    if (in->format == QK_KLDB_QK) {
        ZSTD_DCtx_reset(r->z, ZSTD_reset_session_only);
        r->zin = (ZSTD_inBuffer){r->in, 0, 0};
    }
    return 0;
}

/* Decompress exactly n bytes of the current chunk frame into dst. */
static int zread(qk_kldb_reader *r, uint8_t *dst, size_t n, qk_err *err)
{
    ZSTD_outBuffer zout = {dst, n, 0};
    while (zout.pos < n) {
        if (r->zin.pos == r->zin.size) {
            const size_t got = fread(r->in, 1, r->in_cap, r->f);
            if (got == 0)
                return qk_err_at(err, r->path, "log-probs", (uint64_t)ftello(r->f),
                                 "truncated data in chunk %d", r->chunk + 1);
            r->zin = (ZSTD_inBuffer){r->in, got, 0};
        }
        const size_t rc = ZSTD_decompressStream(r->z, &zout, &r->zin);
        if (ZSTD_isError(rc))
            return qk_err_at(err, r->path, "log-probs", r->frames[r->chunk],
                             "chunk %d: corrupt data (%s)", r->chunk + 1, ZSTD_getErrorName(rc));
        if (rc == 0 && zout.pos < n)
            return qk_err_at(err, r->path, "log-probs", r->frames[r->chunk],
                             "chunk %d holds fewer rows than %d", r->chunk + 1, r->info.rows);
    }
    return 0;
}

static void dequant(const uint8_t *hdr, const uint8_t *hi, const uint8_t *lo, size_t stride,
                    int n_vocab, float *lp)
{
    float scale, min_lp;
    memcpy(&scale, hdr, 4);
    memcpy(&min_lp, hdr + 4, 4);
    for (int i = 0; i < n_vocab; i++) {
        const uint16_t q = (uint16_t)(hi ? (hi[(size_t)i * stride] << 8 | lo[(size_t)i * stride])
                                         : (lo[2 * (size_t)i] | lo[2 * (size_t)i + 1] << 8));
        lp[i] = scale * q + min_lp;
    }
}

/* A decoded row must be log-probabilities: no NaN, none above 0 (1e-3: the
 * float rounding of a 16-bit row's top value, -log-sum-exp, stays far below). */
static int bad_token(const float *lp, int n_vocab)
{
    for (int i = 0; i < n_vocab; i++)
        if (!(lp[i] <= 1e-3f))
            return i;
    return -1;
}

static int row_error(const qk_kldb_reader *r, const float *lp, int i, uint64_t off, int chunk, int row, qk_err *err)
{
    return qk_err_at(err, r->path, "log-probs", off, "chunk %d row %d: token %d has log-probability %g", chunk + 1,
                     row, i, (double)lp[i]);
}

static int check_row(const qk_kldb_reader *r, const float *lp, uint64_t off, qk_err *err)
{
    const int i = bad_token(lp, r->info.n_vocab);
    return i < 0 ? 0 : row_error(r, lp, i, off, r->chunk, r->row_in_chunk, err);
}

typedef struct {
    qk_kldb_reader *r;
    float *lp;
} llama_job;

static void llama_decode(void *ctx, size_t begin, size_t end)
{
    const llama_job *j = ctx;
    const qk_kldb_reader *r = j->r;
    const int nv = r->info.n_vocab;
    const size_t n = llama_nv(nv) * 2;
    for (size_t k = begin; k < end; k++) {
        float *lp = j->lp + k * (size_t)nv;
        dequant(r->raw + k * n, NULL, r->raw + k * n + 8, 1, nv, lp);
        r->raw_at[k].bad = bad_token(lp, nv) >= 0;
    }
}

/* LLAMA: n rows read one after another, then decoded and checked by
 * r->nthreads threads (each row on its own: the same values); the first
 * bad row is reported with its offset, chunk and row. */
static int llama_rows(qk_kldb_reader *r, int n, float *lp, qk_err *err)
{
    const int nv = r->info.n_vocab;
    const size_t rb = llama_nv(nv) * 2;
    int rc;
    if ((size_t)n > r->raw_cap) {
        free(r->raw), free(r->raw_at);
        r->raw = malloc((size_t)n * rb);
        r->raw_at = malloc((size_t)n * sizeof *r->raw_at);
        r->raw_cap = r->raw && r->raw_at ? (size_t)n : 0;
        if (!r->raw_cap)
            return qk_errf(err, QK_EIO, "out of memory");
    }
    for (int k = 0; k < n; k++) {
        if (r->row_in_chunk == r->info.rows && (rc = qk_kldb_seek_chunk(r, r->chunk + 1, err)))
            return rc;
        struct raw_at *at = &r->raw_at[k];
        *at = (struct raw_at){.off = (uint64_t)ftello(r->f), .chunk = r->chunk, .row = r->row_in_chunk};
        if (fread(r->raw + (size_t)k * rb, 1, rb, r->f) != rb)
            return qk_err_at(err, r->path, "log-probs", at->off, "truncated");
        r->row_in_chunk++;
    }
    llama_job j = {r, lp};
    qk_parallel_for(r->nthreads, (size_t)n, 1, llama_decode, &j);
    for (int k = 0; k < n; k++)
        if (r->raw_at[k].bad) {
            const float *row = lp + (size_t)k * nv;
            const struct raw_at *at = &r->raw_at[k];
            return row_error(r, row, bad_token(row, nv), at->off, at->chunk, at->row, err);
        }
    return 0;
}

int qk_kldb_read_row(qk_kldb_reader *r, float *lp, qk_err *err)
{
    const qk_kldb_info *in = &r->info;
    int rc;
    if (in->factored)
        return qk_kldb_read_rows(r, 1, lp, err);
    if (in->format == QK_KLDB_LLAMA)
        return llama_rows(r, 1, lp, err);
    if (r->row_in_chunk == in->rows && (rc = qk_kldb_seek_chunk(r, r->chunk + 1, err)))
        return rc;
    const int nv = in->n_vocab;
    int k = r->row_in_chunk - r->group_start;
    if (k >= r->group_rows) {
        const int g = in->rows - r->row_in_chunk < QK_KLDB_GROUP ? in->rows - r->row_in_chunk
                                                                 : QK_KLDB_GROUP;
        if ((rc = zread(r, r->row, group_bytes(g, nv), err)))
            return rc;
        r->group_start = r->row_in_chunk;
        r->group_rows = g;
        k = 0;
    }
    const int g = r->group_rows;
    const uint8_t *hdr = r->row + 8 * (size_t)k;
    const uint8_t *ids = r->row + 8 * (size_t)g + 4 * (size_t)QK_KLDB_TOP * k;
    const uint8_t *vals = r->row + 8 * (size_t)g + 4 * (size_t)QK_KLDB_TOP * (g + k);
    const uint8_t *hi = r->row + (8 + 8 * (size_t)QK_KLDB_TOP) * g + k;
    const uint8_t *lo = hi + (size_t)g * nv;
    dequant(hdr, hi, lo, (size_t)g, nv, lp);
    for (int j = 0; j < QK_KLDB_TOP && j < nv; j++) {
        const uint32_t id = get32(ids + 4 * j);
        if (id >= (uint32_t)nv)
            return qk_err_at(err, r->path, "log-probs", r->frames[r->chunk],
                             "chunk %d: top token id %u is outside the vocabulary", r->chunk + 1, id);
        memcpy(&lp[id], vals + 4 * j, 4);
    }
    if ((rc = check_row(r, lp, r->frames[r->chunk], err)))
        return rc;
    r->row_in_chunk++;
    return 0;
}

void qk_kldb_set_threads(qk_kldb_reader *r, int nthreads) { r->nthreads = nthreads; }

int qk_kldb_read_rows(qk_kldb_reader *r, int n, float *lp, qk_err *err)
{
    const qk_kldb_info *in = &r->info;
    const size_t nv = (size_t)in->n_vocab;
    int rc;
    if (!in->factored && in->format == QK_KLDB_LLAMA)
        return llama_rows(r, n, lp, err);
    if (!in->factored) {
        for (int k = 0; k < n; k++)
            if ((rc = qk_kldb_read_row(r, lp + k * nv, err)))
                return rc;
        return 0;
    }
    const size_t e = (size_t)in->n_embd;
    if ((size_t)n > r->hid_cap) {
        float *p = realloc(r->hid, (size_t)n * e * sizeof *p);
        if (!p)
            return qk_errf(err, QK_EIO, "out of memory");
        r->hid = p;
        r->hid_cap = (size_t)n;
    }
    for (int k = 0; k < n; k++) {
        if (r->row_in_chunk == in->rows && (rc = qk_kldb_seek_chunk(r, r->chunk + 1, err)))
            return rc;
        if ((rc = zread(r, (uint8_t *)(r->hid + k * e), e * sizeof(float), err)))
            return rc;
        r->row_in_chunk++;
    }
    if ((rc = qk_matmul(&r->head, r->hid, n, lp, &r->ws, r->nthreads, err)))
        return rc;
    for (int k = 0; k < n; k++) {
        float *l = lp + k * nv;
        if (r->bias)
            for (size_t i = 0; i < nv; i++)
                l[i] += r->bias[i];
        qk_kldb_logprobs(l, (int)nv, l);
        if ((rc = check_row(r, l, r->frames[r->chunk], err)))
            return rc;
    }
    return 0;
}

/* ---- writer ------------------------------------------------------------------ */

struct qk_kldb_writer {
    int format, n_vocab, rows, n_chunk;
    qk_out o;
    bool open;
    uint64_t rows_written, rows_total;
    uint16_t *q;            /* one row */
    uint8_t *group;         /* QK: one group */
    int in_group;
    ZSTD_CCtx *z;
    uint8_t *zbuf;
    size_t zcap;
    uint64_t *frames;
    int *top;               /* QK: top ids of a row */
    /* QK: the group being staged */
    uint8_t *st_hdr, *st_ids, *st_vals;
    uint16_t *st_q;
    bool factored;          /* QK factored: rows are hidden states */
    int n_embd;
};

bool qk_kldb_factored_pays(uint64_t rows_total, const qk_weight *w)
{
    const double head = (double)w->rows * (double)w->row_size + 4.0 * (double)w->rows;
    const double fact = head + (double)rows_total * (double)w->cols * 4.0;
    const double llama = (double)rows_total * 2.0 * (double)llama_nv((int)w->rows);
    return 2.0 * fact < llama;
}

bool qk_kldb_wants_hidden(const qk_kldb_writer *w) { return w->factored; }

/* The factored encoding's output-layer block as one zstd frame. */
static int write_head(qk_kldb_writer *w, const qk_kldb_head *head, int level, qk_err *err)
{
    const qk_weight *hw = head->w;
    if (hw->rows != w->n_vocab || hw->cols < 1)
        return qk_errf(err, QK_EINPUT, "%s: output layer of %lld rows for a vocabulary of %d",
                       w->o.dst, (long long)hw->rows, w->n_vocab);
    const size_t wb = (size_t)hw->rows * hw->row_size, n = 24 + wb + (head->bias ? 4 * (size_t)hw->rows : 0);
    uint8_t *b = malloc(n);
    const size_t cap = ZSTD_compressBound(n);
    uint8_t *z = malloc(cap);
    int rc = 0;
    if (!b || !z) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto done;
    }
    put32(b, (uint32_t)hw->type);
    put32(b + 4, head->bias != NULL);
    put64(b + 8, (uint64_t)hw->cols);
    put64(b + 16, (uint64_t)hw->rows);
    memcpy(b + 24, hw->data, wb);
    if (head->bias)
        memcpy(b + 24 + wb, head->bias, 4 * (size_t)hw->rows);
    const size_t zn = ZSTD_compress(z, cap, b, n, level);
    if (ZSTD_isError(zn)) {
        rc = qk_errf(err, QK_EIO, "%s: zstd: %s", w->o.dst, ZSTD_getErrorName(zn));
        goto done;
    }
    uint8_t sz[8];
    put64(sz, zn);
    if (!(rc = qk_out_write(&w->o, sz, 8, err)))
        rc = qk_out_write(&w->o, z, zn, err);
    w->factored = true;
    w->n_embd = (int)hw->cols;
done:
    free(b), free(z);
    return rc;
}

void qk_kldb_free(qk_kldb_writer *w)
{
    if (!w)
        return;
    if (w->open)
        qk_out_abort(&w->o);
    ZSTD_freeCCtx(w->z);
    free(w->q), free(w->group), free(w->zbuf), free(w->frames), free(w->top);
    free(w->st_hdr), free(w->st_ids), free(w->st_vals), free(w->st_q);
    free(w);
}

int qk_kldb_create(qk_kldb_writer **out, const char *path, int format, int n_ctx, int n_vocab,
                   int n_chunk, const int32_t *tokens, int level, const qk_kldb_head *head,
                   qk_err *err)
{
    *out = NULL;
    if (n_ctx < 4 || n_vocab < 2 || n_chunk < 1)
        return qk_errf(err, QK_EINPUT, "%s: cannot write a base file for n_ctx %d, %d chunks", path,
                       n_ctx, n_chunk);
    qk_kldb_writer *w = calloc(1, sizeof *w);
    if (!w)
        return qk_errf(err, QK_EIO, "out of memory");
    w->format = format;
    w->n_vocab = n_vocab;
    w->n_chunk = n_chunk;
    w->rows = n_ctx - 1 - n_ctx / 2;
    w->rows_total = (uint64_t)w->rows * (uint64_t)n_chunk;
    const size_t ntok = (size_t)n_ctx * (size_t)n_chunk;
    int rc = 0;
    w->q = calloc(llama_nv(n_vocab), 2);
    if (!w->q) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto fail;
    }
    if ((rc = qk_out_open(&w->o, path, err)))
        goto fail;
    w->open = true;
    if (format == QK_KLDB_LLAMA) {
        uint8_t h[20];
        memcpy(h, LLAMA_MAGIC, 8);
        put32(h + 8, (uint32_t)n_ctx);
        put32(h + 12, (uint32_t)n_vocab);
        put32(h + 16, (uint32_t)n_chunk);
        if ((rc = qk_out_write(&w->o, h, sizeof h, err)) ||
            (rc = qk_out_write(&w->o, tokens, ntok * 4, err)))
            goto fail;
        *out = w;
        return 0;
    }
    uint8_t h[QK_HDR] = {0};
    memcpy(h, QK_MAGIC, 8);
    const uint32_t v[6] = {1, (uint32_t)n_ctx, (uint32_t)n_vocab, (uint32_t)n_chunk, QK_KLDB_TOP,
                           QK_KLDB_GROUP};
    for (int i = 0; i < 6; i++)
        put32(h + 8 + 4 * i, v[i]);
    w->z = ZSTD_createCCtx();
    w->zcap = ZSTD_compressBound(ntok * 4) > ZSTD_CStreamOutSize() ? ZSTD_compressBound(ntok * 4)
                                                                   : ZSTD_CStreamOutSize();
    w->zbuf = malloc(w->zcap);
    w->group = malloc(group_bytes(QK_KLDB_GROUP, n_vocab));
    w->frames = calloc((size_t)n_chunk, 8);
    w->top = malloc(QK_KLDB_TOP * sizeof *w->top);
    w->st_hdr = malloc(8 * QK_KLDB_GROUP);
    w->st_ids = malloc(4 * QK_KLDB_TOP * QK_KLDB_GROUP);
    w->st_vals = malloc(4 * QK_KLDB_TOP * QK_KLDB_GROUP);
    w->st_q = malloc((size_t)QK_KLDB_GROUP * (size_t)n_vocab * 2);
    if (!w->z || !w->zbuf || !w->group || !w->frames || !w->top || !w->st_hdr || !w->st_ids ||
        !w->st_vals || !w->st_q) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto fail;
    }
    const size_t zn = ZSTD_compressCCtx(w->z, w->zbuf, w->zcap, tokens, ntok * 4, level);
    if (ZSTD_isError(zn)) {
        rc = qk_errf(err, QK_EIO, "%s: zstd: %s", path, ZSTD_getErrorName(zn));
        goto fail;
    }
    uint8_t sz[8];
    put64(sz, zn);
    if ((rc = qk_out_write(&w->o, h, sizeof h, err)) || (rc = qk_out_write(&w->o, sz, 8, err)) ||
        (rc = qk_out_write(&w->o, w->zbuf, zn, err)))
        goto fail;
    put64(sz, 0);
    if ((rc = head ? write_head(w, head, level, err) : qk_out_write(&w->o, sz, 8, err)))
        goto fail;
    ZSTD_CCtx_reset(w->z, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(w->z, ZSTD_c_compressionLevel, level);
    *out = w;
    return 0;
fail:
    qk_kldb_free(w);
    return rc;
}

/* Push a buffer through the chunk's zstd frame (end: close the frame). */
static int zpush(qk_kldb_writer *w, const void *buf, size_t n, bool end, qk_err *err)
{
    ZSTD_inBuffer in = {buf, n, 0};
    for (;;) {
        ZSTD_outBuffer zo = {w->zbuf, w->zcap, 0};
        const size_t left = ZSTD_compressStream2(w->z, &zo, &in, end ? ZSTD_e_end : ZSTD_e_continue);
        if (ZSTD_isError(left))
            return qk_errf(err, QK_EIO, "%s: zstd: %s", w->o.dst, ZSTD_getErrorName(left));
        if (zo.pos && qk_out_write(&w->o, w->zbuf, zo.pos, err))
            return err->code;
        if (end ? left == 0 : in.pos == in.size)
            return 0;
    }
}

/* The QK_KLDB_TOP largest logits, largest first (ties: lower id first). */
static void top_ids(const float *l, int nv, int *top, int k)
{
    int n = 0;
    for (int i = 0; i < nv; i++) {
        if (n == k && !(l[i] > l[top[k - 1]]))
            continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && l[i] > l[top[j - 1]]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = i;
    }
}

/* Emit the staged group of w->in_group rows: headers, top ids, top values,
 * then the high and low byte planes, token-major (row index fastest). */
static int flush_group(qk_kldb_writer *w, bool end_chunk, qk_err *err)
{
    const size_t g = (size_t)w->in_group, nv = (size_t)w->n_vocab, K = QK_KLDB_TOP;
    uint8_t *b = w->group;
    memcpy(b, w->st_hdr, 8 * g);
    memcpy(b + 8 * g, w->st_ids, 4 * K * g);
    memcpy(b + 8 * g + 4 * K * g, w->st_vals, 4 * K * g);
    uint8_t *hi = b + (8 + 8 * K) * g, *lo = hi + g * nv;
    for (size_t k = 0; k < g; k++) {
        const uint16_t *q = w->st_q + k * nv;
        for (size_t i = 0; i < nv; i++) {
            hi[i * g + k] = (uint8_t)(q[i] >> 8);
            lo[i * g + k] = (uint8_t)(q[i] & 0xff);
        }
    }
    w->in_group = 0;
    return zpush(w, b, group_bytes((int)g, w->n_vocab), end_chunk, err);
}

int qk_kldb_write_row(qk_kldb_writer *w, const float *logits, const float *hidden, qk_err *err)
{
    if (w->rows_written == w->rows_total)
        return qk_errf(err, QK_EINPUT, "%s: more rows than the header's chunks", w->o.dst);
    const int nv = w->n_vocab;
    const int row_in_chunk = (int)(w->rows_written % (uint64_t)w->rows);
    float scale, min_lp;
    if (w->format == QK_KLDB_LLAMA) {
        qk_kldb_quantize_row(logits, nv, &scale, &min_lp, w->q + 4);
        memcpy(w->q, &scale, 4);
        memcpy(w->q + 2, &min_lp, 4);
        w->rows_written++;
        return qk_out_write(&w->o, w->q, llama_nv(nv) * 2, err);
    }
    if (row_in_chunk == 0)
        w->frames[w->rows_written / (uint64_t)w->rows] = w->o.written;
    w->rows_written++;
    if (w->factored) {
        if (!hidden)
            return qk_errf(err, QK_EINPUT, "%s: the factored encoding needs hidden states", w->o.dst);
        int rc = zpush(w, hidden, (size_t)w->n_embd * sizeof *hidden, false, err);
        if (!rc && row_in_chunk == w->rows - 1)
            rc = zpush(w, NULL, 0, true, err);
        return rc;
    }
    const size_t k = (size_t)w->in_group, K = QK_KLDB_TOP;
    qk_kldb_quantize_row(logits, nv, &scale, &min_lp, w->st_q + k * (size_t)nv);
    memcpy(w->st_hdr + 8 * k, &scale, 4);
    memcpy(w->st_hdr + 8 * k + 4, &min_lp, 4);
    /* exact log-probs of the top tokens: logit - max - log(sum exp), in float */
    const int kt = QK_KLDB_TOP < nv ? QK_KLDB_TOP : nv;
    top_ids(logits, nv, w->top, kt);
    const float max_logit = logits[w->top[0]];
    const float lse = (float)log(qk_expf_sum(logits, max_logit, (size_t)nv));
    for (size_t j = 0; j < K; j++) {
        const int id = w->top[j < (size_t)kt ? j : 0];
        const float lp = logits[id] - max_logit - lse;
        put32(w->st_ids + 4 * (K * k + j), (uint32_t)id);
        memcpy(w->st_vals + 4 * (K * k + j), &lp, 4);
    }
    w->in_group++;
    const bool end_chunk = row_in_chunk == w->rows - 1;
    if (w->in_group == QK_KLDB_GROUP || end_chunk)
        return flush_group(w, end_chunk, err);
    return 0;
}

int qk_kldb_finish(qk_kldb_writer *w, qk_err *err)
{
    if (w->rows_written != w->rows_total)
        return qk_errf(err, QK_EINPUT, "%s: %llu of %llu rows written", w->o.dst,
                       (unsigned long long)w->rows_written, (unsigned long long)w->rows_total);
    if (w->format == QK_KLDB_QK) {
        const uint64_t idx = w->o.written;
        uint8_t t[16];
        put64(t, idx);
        memcpy(t + 8, QK_END, 8);
        if (qk_out_write(&w->o, w->frames, 8 * (size_t)w->n_chunk, err) ||
            qk_out_write(&w->o, t, 16, err))
            return err->code;
    }
    int rc = qk_out_commit(&w->o, err);
    w->open = false;
    return rc;
}
