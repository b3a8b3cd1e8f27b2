#include "kernels/quantize.h"

#include "kernels/cpu.h"
#include "lib/core/threads.h"
#include "kernels/types.h"

typedef struct {
    const qk_type_traits *t;
    const qk_kernels *k;    /* the active level's encoder and decoder */
    const float *src;
    const float *imatrix;
    void *qdata;
    float *fdata;
    int64_t ncols;
    size_t row_size;
} job;

static void encode_range(void *ctx, size_t b, size_t e)
{
    job *j = ctx;
    j->k->quantize(j->src + b * j->ncols, (uint8_t *)j->qdata + b * j->row_size, (int64_t)(e - b),
                   j->ncols, j->imatrix);
}

static void decode_range(void *ctx, size_t b, size_t e)
{
    job *j = ctx;
    j->k->to_float((const uint8_t *)j->qdata + b * j->row_size, j->fdata + b * j->ncols,
                   (int64_t)(e - b) * j->ncols);
}

static int check(const qk_type_traits *t, int type, int64_t ncols, qk_err *err)
{
    if (!t)
        return qk_errf(err, QK_EINPUT, "unknown tensor type %d", type);
    if (ncols <= 0 || ncols % t->blck)
        return qk_errf(err, QK_EINPUT, "%s: row length %lld is not a multiple of the block size %d",
                       t->name, (long long)ncols, t->blck);
    return 0;
}

/* Rows per work item: about 64 KiB of input, at least one row. */
static size_t grain_for(int64_t ncols)
{
    size_t g = (size_t)(16384 / (ncols > 0 ? ncols : 1));
    return g ? g : 1;
}

int qk_quantize_rows(int type, const float *src, void *dst, int64_t nrows, int64_t ncols,
                     const float *imatrix, int nthreads, qk_err *err)
{
    const qk_type_traits *t = qk_type_get(type);
    if (check(t, type, ncols, err))
        return QK_EINPUT;
    if (!t->quantize)
        return qk_errf(err, QK_EINPUT, "%s: no encoder", t->name);
    if (t->needs_imatrix && !imatrix)
        return qk_errf(err, QK_EINPUT, "%s: this type requires an importance matrix (--imatrix)",
                       t->name);
    job j = {.t = t, .k = qk_kernels_for(t->id), .src = src, .imatrix = imatrix, .qdata = dst, .ncols = ncols,
             .row_size = qk_row_size(type, ncols)};
    qk_parallel_for(nthreads, (size_t)nrows, grain_for(ncols), encode_range, &j);
    return 0;
}

int qk_dequantize_rows(int type, const void *src, float *dst, int64_t nrows, int64_t ncols,
                       int nthreads, qk_err *err)
{
    const qk_type_traits *t = qk_type_get(type);
    if (check(t, type, ncols, err))
        return QK_EINPUT;
    if (!t->to_float)
        return qk_errf(err, QK_EINPUT, "%s: no decoder", t->name);
    job j = {.t = t, .k = qk_kernels_for(t->id), .qdata = (void *)src, .fdata = dst, .ncols = ncols,
             .row_size = qk_row_size(type, ncols)};
    qk_parallel_for(nthreads, (size_t)nrows, grain_for(ncols), decode_range, &j);
    return 0;
}
