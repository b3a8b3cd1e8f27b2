/* logits_file.c - writer and reader of the logits file (see logits_file.h). */
#include "lib/eval/logits_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "lib/core/ckd.h"
#include "kernels/half.h"
#include "lib/core/outfile.h"
#include "kernels/types.h"

#define ZLEVEL 3 /* logits barely compress; a cheap level keeps decoding pace */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p) { return get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

static size_t elt_size(int dtype) { return dtype == QK_F16 ? 2 : 4; }

/* ---- writer ----------------------------------------------------------------------- */

struct qk_logits_writer {
    qk_out out;
    ZSTD_CCtx *z;
    uint32_t n_vocab;
    int dtype;
    uint8_t *row;            /* one encoded row */
    uint8_t *zbuf;           /* compressed output chunk */
    size_t zcap;
    uint64_t data_size;
    int32_t *tokens;
    size_t n_tokens, cap_tokens;
};

static void header(uint8_t h[QK_LOGITS_HEADER], uint32_t dtype, uint32_t n_vocab,
                   uint32_t n_tokens, uint64_t data_size)
{
    memcpy(h, QK_LOGITS_MAGIC, 8);
    put_u32(h + 8, QK_LOGITS_VERSION);
    put_u32(h + 12, dtype);
    put_u32(h + 16, n_vocab);
    put_u32(h + 20, n_tokens);
    put_u64(h + 24, data_size);
}

int qk_logits_create(qk_logits_writer **out, const char *path, uint32_t n_vocab, int dtype,
                     qk_err *err)
{
    *out = NULL;
    if (dtype != QK_F32 && dtype != QK_F16)
        return qk_errf(err, QK_EINPUT, "%s: logits dtype must be f32 or f16", path);
    if (n_vocab < 1 || (uint64_t)n_vocab * 4 > SIZE_MAX / 2)
        return qk_errf(err, QK_EINPUT, "%s: bad vocabulary size %u", path, n_vocab);
    qk_logits_writer *w = calloc(1, sizeof *w);
    if (!w)
        return qk_errf(err, QK_EIO, "out of memory");
    w->n_vocab = n_vocab;
    w->dtype = dtype;
    w->zcap = ZSTD_CStreamOutSize();
    w->row = malloc((size_t)n_vocab * elt_size(dtype));
    w->zbuf = malloc(w->zcap);
    w->z = ZSTD_createCCtx();
    if (!w->row || !w->zbuf || !w->z) {
        qk_logits_discard(w);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    if (ZSTD_isError(ZSTD_CCtx_setParameter(w->z, ZSTD_c_compressionLevel, ZLEVEL)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(w->z, ZSTD_c_checksumFlag, 1))) {
        qk_logits_discard(w);
        return qk_errf(err, QK_EIO, "zstd: cannot set up the compressor");
    }
    uint8_t h[QK_LOGITS_HEADER];
    header(h, (uint32_t)dtype, n_vocab, 0, 0); /* fixed at finish */
    if (qk_out_open(&w->out, path, err) || qk_out_write(&w->out, h, sizeof h, err)) {
        qk_logits_discard(w);
        return err->code;
    }
    *out = w;
    return 0;
}

/* Feed in[0..n) to the compressor (mode ZSTD_e_end: finish the frame). */
static int compress(qk_logits_writer *w, const void *in, size_t n, ZSTD_EndDirective mode,
                    qk_err *err)
{
    ZSTD_inBuffer ib = {in, n, 0};
    for (;;) {
        ZSTD_outBuffer ob = {w->zbuf, w->zcap, 0};
        size_t left = ZSTD_compressStream2(w->z, &ob, &ib, mode);
        if (ZSTD_isError(left))
            return qk_errf(err, QK_EIO, "%s: zstd: %s", w->out.dst, ZSTD_getErrorName(left));
        if (qk_out_write(&w->out, w->zbuf, ob.pos, err))
            return err->code;
        w->data_size += ob.pos;
        if (mode == ZSTD_e_end ? left == 0 : ib.pos == ib.size)
            return 0;
    }
}

int qk_logits_append(qk_logits_writer *w, int32_t token, const float *row, qk_err *err)
{
    if (w->n_tokens >= UINT32_MAX)
        return qk_errf(err, QK_EINPUT, "%s: too many rows", w->out.dst);
    if (w->n_tokens == w->cap_tokens) {
        size_t cap = w->cap_tokens ? 2 * w->cap_tokens : 256;
        int32_t *t = realloc(w->tokens, cap * sizeof *t);
        if (!t)
            return qk_errf(err, QK_EIO, "out of memory");
        w->tokens = t;
        w->cap_tokens = cap;
    }
    w->tokens[w->n_tokens++] = token;
    if (w->dtype == QK_F16) {
        for (uint32_t i = 0; i < w->n_vocab; i++) {
            const uint16_t h = qk_f32_to_f16(row[i]);
            w->row[2 * (size_t)i] = (uint8_t)h;
            w->row[2 * (size_t)i + 1] = (uint8_t)(h >> 8);
        }
    } else {
        for (uint32_t i = 0; i < w->n_vocab; i++) {
            uint32_t bits;
            memcpy(&bits, &row[i], 4);
            put_u32(w->row + 4 * (size_t)i, bits);
        }
    }
    return compress(w, w->row, (size_t)w->n_vocab * elt_size(w->dtype), ZSTD_e_continue, err);
}

int qk_logits_finish(qk_logits_writer *w, qk_err *err)
{
    int rc = compress(w, NULL, 0, ZSTD_e_end, err);
    for (size_t i = 0; !rc && i < w->n_tokens; i++) {
        uint8_t b[4];
        put_u32(b, (uint32_t)w->tokens[i]);
        rc = qk_out_write(&w->out, b, 4, err);
    }
    if (!rc) {
        uint8_t h[QK_LOGITS_HEADER];
        header(h, (uint32_t)w->dtype, w->n_vocab, (uint32_t)w->n_tokens, w->data_size);
        rc = qk_out_pwrite(&w->out, 0, h, sizeof h, err);
    }
    if (!rc)
        rc = qk_out_commit(&w->out, err);
    qk_logits_discard(w);
    return rc;
}

void qk_logits_discard(qk_logits_writer *w)
{
    if (!w)
        return;
    qk_out_abort(&w->out);
    ZSTD_freeCCtx(w->z);
    free(w->row), free(w->zbuf), free(w->tokens);
    free(w);
}

/* ---- reader ----------------------------------------------------------------------- */

struct qk_logits_rd {
    FILE *f;
    char *path;
    ZSTD_DCtx *z;
    uint8_t *in;             /* compressed input chunk */
    size_t in_cap;
    ZSTD_inBuffer ib;
    uint64_t left;           /* compressed bytes not yet read from the file */
    uint8_t *row;            /* one encoded row */
    size_t ret;              /* last ZSTD_decompressStream result (0: frame ended) */
};

static int bad(const qk_logits_reader *r, const char *field, uint64_t off, const char *what,
               qk_err *err)
{
    return qk_err_at(err, r->rd->path, field, off, "%s", what);
}

static int read_at(qk_logits_reader *r, uint64_t off, void *buf, size_t n, const char *field,
                   qk_err *err)
{
    FILE *f = r->rd->f;
    if (fseeko(f, (off_t)off, SEEK_SET) != 0)
        return qk_err_sys(err, r->rd->path, "seek failed");
    if (fread(buf, 1, n, f) != n)
        return ferror(f) ? qk_err_sys(err, r->rd->path, "read failed")
                         : bad(r, field, off, "file is truncated", err);
    return 0;
}

static int read_header(qk_logits_reader *r, uint64_t file_size, qk_err *err)
{
    uint8_t h[QK_LOGITS_HEADER];
    if (read_at(r, 0, h, sizeof h, "header", err))
        return err->code;
    if (memcmp(h, QK_LOGITS_MAGIC, 8) != 0)
        return bad(r, "magic", 0, "not a qk logits file", err);
    r->version = get_u32(h + 8);
    if (r->version != QK_LOGITS_VERSION)
        return qk_err_at(err, r->rd->path, "version", 8, "version %u is not supported (1)",
                         r->version);
    uint32_t dtype = get_u32(h + 12);
    if (dtype != QK_F32 && dtype != QK_F16)
        return qk_err_at(err, r->rd->path, "dtype", 12, "type %u is neither F32 (0) nor F16 (1)",
                         dtype);
    r->dtype = (int)dtype;
    r->n_vocab = get_u32(h + 16);
    if (r->n_vocab < 1 || r->n_vocab > (1u << 24)) /* the largest vocabularies are near 2^18 */
        return qk_err_at(err, r->rd->path, "n_vocab", 16, "%u is not between 1 and 2^24", r->n_vocab);
    r->n_tokens = get_u32(h + 20);
    r->data_size = get_u64(h + 24);
    uint64_t end;
    if (qk_ckd_add(&end, QK_LOGITS_HEADER, r->data_size) ||
        qk_ckd_add(&end, end, (uint64_t)r->n_tokens * 4) || end != file_size)
        return qk_err_at(err, r->rd->path, "data_size", 24,
                         "header sizes (%llu data bytes, %u tokens) do not match the file size "
                         "%llu",
                         (unsigned long long)r->data_size, r->n_tokens,
                         (unsigned long long)file_size);
    return 0;
}

int qk_logits_open(qk_logits_reader **out, const char *path, qk_err *err)
{
    *out = NULL;
    qk_logits_reader *r = calloc(1, sizeof *r);
    struct qk_logits_rd *rd = calloc(1, sizeof *rd);
    if (!r || !rd) {
        free(r), free(rd);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    r->rd = rd;
    rd->path = strdup(path);
    if (!rd->path) {
        qk_logits_close(r);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    rd->f = fopen(path, "rb");
    if (!rd->f) {
        qk_err_sys(err, path, "cannot open");
        qk_logits_close(r);
        return QK_EIO;
    }
    if (fseeko(rd->f, 0, SEEK_END) != 0) {
        qk_err_sys(err, path, "seek failed");
        qk_logits_close(r);
        return QK_EIO;
    }
    const uint64_t file_size = (uint64_t)ftello(rd->f);
    if (read_header(r, file_size, err))
        goto fail;
    r->tokens = malloc((size_t)(r->n_tokens ? r->n_tokens : 1) * sizeof *r->tokens);
    rd->in_cap = ZSTD_DStreamInSize();
    rd->in = malloc(rd->in_cap);
    rd->row = malloc((size_t)r->n_vocab * elt_size(r->dtype));
    rd->z = ZSTD_createDCtx();
    if (!r->tokens || !rd->in || !rd->row || !rd->z) {
        qk_errf(err, QK_EIO, "out of memory");
        goto fail;
    }
    const uint64_t tok_off = QK_LOGITS_HEADER + r->data_size;
    for (uint32_t i = 0; i < r->n_tokens; i++) {
        uint8_t b[4];
        if (read_at(r, tok_off + 4 * (uint64_t)i, b, 4, "tokens", err))
            goto fail;
        r->tokens[i] = (int32_t)get_u32(b);
    }
    if (fseeko(rd->f, QK_LOGITS_HEADER, SEEK_SET) != 0) {
        qk_err_sys(err, path, "seek failed");
        goto fail;
    }
    rd->left = r->data_size;
    rd->ib = (ZSTD_inBuffer){rd->in, 0, 0};
    rd->ret = 1;
    *out = r;
    return 0;
fail:
    qk_logits_close(r);
    return err->code;
}

/* Refill the input chunk when it is used up; false when nothing is left. */
static int refill(qk_logits_reader *r, uint64_t where, bool *more, qk_err *err)
{
    struct qk_logits_rd *rd = r->rd;
    *more = true;
    if (rd->ib.pos < rd->ib.size)
        return 0;
    if (rd->left == 0) {
        *more = false;
        return 0;
    }
    size_t k = rd->left < rd->in_cap ? (size_t)rd->left : rd->in_cap;
    if (fread(rd->in, 1, k, rd->f) != k)
        return ferror(rd->f) ? qk_err_sys(err, rd->path, "read failed")
                             : bad(r, "data", where, "file is truncated", err);
    rd->left -= k;
    rd->ib = (ZSTD_inBuffer){rd->in, k, 0};
    return 0;
}

/* One decompression step into ob; *progress says whether anything moved. */
static int step(qk_logits_reader *r, ZSTD_outBuffer *ob, uint64_t where, bool *progress,
                qk_err *err)
{
    struct qk_logits_rd *rd = r->rd;
    const size_t in0 = rd->ib.pos, out0 = ob->pos;
    rd->ret = ZSTD_decompressStream(rd->z, ob, &rd->ib);
    if (ZSTD_isError(rd->ret)) {
        char what[160];
        snprintf(what, sizeof what, "corrupt compressed rows: %s", ZSTD_getErrorName(rd->ret));
        return bad(r, "data", where, what, err);
    }
    *progress = rd->ib.pos != in0 || ob->pos != out0;
    return 0;
}

/* Decompress exactly n bytes into out. */
static int inflate(qk_logits_reader *r, uint8_t *out, size_t n, qk_err *err)
{
    struct qk_logits_rd *rd = r->rd;
    ZSTD_outBuffer ob = {out, n, 0};
    const uint64_t where = QK_LOGITS_HEADER + (r->data_size - rd->left);
    while (ob.pos < ob.size) {
        bool more, progress;
        if (rd->ret == 0)
            return bad(r, "data", where, "the compressed rows end early", err);
        if (refill(r, where, &more, err) || step(r, &ob, where, &progress, err))
            return err->code;
        if (!progress && !more)
            return bad(r, "data", where, "the compressed rows are truncated", err);
    }
    return 0;
}

/* After the last row: the frame (and its checksum) must end, and the data
 * with it. */
static int expect_end(qk_logits_reader *r, qk_err *err)
{
    struct qk_logits_rd *rd = r->rd;
    const uint64_t where = QK_LOGITS_HEADER + (r->data_size - rd->left);
    uint8_t extra[16];
    while (rd->ret != 0) {
        ZSTD_outBuffer ob = {extra, sizeof extra, 0};
        bool more, progress;
        if (refill(r, where, &more, err) || step(r, &ob, where, &progress, err))
            return err->code;
        if (ob.pos > 0)
            return bad(r, "data", where, "more rows than n_tokens", err);
        if (!progress && !more)
            return bad(r, "data", where, "the compressed rows are truncated", err);
    }
    if (rd->ib.pos != rd->ib.size || rd->left != 0)
        return bad(r, "data", where, "bytes after the compressed rows", err);
    return 0;
}

int qk_logits_next(qk_logits_reader *r, float *row, qk_err *err)
{
    struct qk_logits_rd *rd = r->rd;
    if (r->next >= r->n_tokens)
        return qk_errf(err, QK_EINPUT, "%s: all %u rows have been read", rd->path, r->n_tokens);
    if (inflate(r, rd->row, (size_t)r->n_vocab * elt_size(r->dtype), err) ||
        (r->next + 1 == r->n_tokens && expect_end(r, err)))
        return err->code;
    if (r->dtype == QK_F16) {
        for (uint32_t i = 0; i < r->n_vocab; i++) {
            const uint8_t *p = rd->row + 2 * (size_t)i;
            row[i] = qk_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
        }
    } else {
        for (uint32_t i = 0; i < r->n_vocab; i++) {
            uint32_t bits = get_u32(rd->row + 4 * (size_t)i);
            memcpy(&row[i], &bits, 4);
        }
    }
    r->next++;
    return 0;
}

void qk_logits_close(qk_logits_reader *r)
{
    if (!r)
        return;
    if (r->rd) {
        if (r->rd->f)
            fclose(r->rd->f);
        ZSTD_freeDCtx(r->rd->z);
        free(r->rd->in), free(r->rd->row), free(r->rd->path);
        free(r->rd);
    }
    free(r->tokens);
    free(r);
}
