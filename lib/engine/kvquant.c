/* kvquant.c - KV-cache quantization (kvquant.h) through the scheme kernels
 * of kernels/scaled.h. */
#include "lib/engine/kvquant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/hadamard.h"
#include "kernels/half.h"
#include "kernels/scaled.h"
#include "kernels/types.h"

static const char *const type_names[QK_KVQ_TYPE_COUNT] = {
    "f32", "f16", "bf16", "fp8-e4m3", "fp8-e5m2", "int8", "int4", "nvfp4",
};

int qk_kvq_parse(const char *text, qk_kvq *q, qk_err *err)
{
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    int t = -1;
    for (int i = 0; i < QK_KVQ_TYPE_COUNT; i++)
        if (strlen(type_names[i]) == len && strncasecmp(text, type_names[i], len) == 0)
            t = i;
    if (t < 0)
        return qk_errf(err, QK_EINPUT,
                       "--kv-cache: '%s' is not f32, f16, bf16, fp8-e4m3[:tensor|:head], "
                       "fp8-e5m2[:tensor|:head], int8, int4 or nvfp4",
                       text);
    bool fp8 = t == QK_KVQ_FP8_E4M3 || t == QK_KVQ_FP8_E5M2;
    bool head = false;
    if (colon) {
        if (!fp8)
            return qk_errf(err, QK_EINPUT, "--kv-cache: '%s': only fp8 types take :tensor or :head",
                           text);
        if (strcmp(colon + 1, "head") == 0)
            head = true;
        else if (strcmp(colon + 1, "tensor") != 0)
            return qk_errf(err, QK_EINPUT, "--kv-cache: '%s': the scale is :tensor or :head", text);
    }
    q->type = (qk_kvq_type)t;
    q->per_head = head;
    return 0;
}

void qk_kvq_name(const qk_kvq *q, char *buf, size_t n)
{
    const char *t = (unsigned)q->type < QK_KVQ_TYPE_COUNT ? type_names[q->type] : "?";
    snprintf(buf, n, "%s%s%s%s", t, q->per_head ? ":head" : "", q->key_per_channel ? "+kivi" : "",
             q->rotate ? "+rot" : "");
}

int qk_kvq_group(const qk_kvq *q) { return q->key_group > 0 ? q->key_group : QK_KVQ_KEY_GROUP; }

/* The scheme and options of a scaled type (NULL: f32, f16, bf16). */
static const qk_scheme *type_scheme(const qk_kvq *q, qk_scheme_opts *o)
{
    memset(o, 0, sizeof *o);
    switch (q->type) {
    case QK_KVQ_FP8_E4M3:
    case QK_KVQ_FP8_E5M2:
        o->gran = q->per_head ? QK_GRAN_ROW : QK_GRAN_NONE;
        o->scale_type = q->per_head ? QK_F16 : QK_F32;
        return qk_scheme_by_name(q->type == QK_KVQ_FP8_E4M3 ? "fp8_e4m3" : "fp8_e5m2");
    case QK_KVQ_INT8:
    case QK_KVQ_INT4:
        o->gran = QK_GRAN_ROW;
        o->scale_type = QK_F16;
        return qk_scheme_by_name(q->type == QK_KVQ_INT8 ? "uint8" : "uint4");
    case QK_KVQ_NVFP4:
        return qk_scheme_by_name("nvfp4");
    default:
        return NULL;
    }
}

int qk_kvq_check(const qk_kvq *q, int n_head_kv, int head_dim, int head_dim_v, qk_err *err)
{
    if ((unsigned)q->type >= QK_KVQ_TYPE_COUNT)
        return qk_errf(err, QK_EINPUT, "--kv-cache: bad type %d", (int)q->type);
    if (q->type == QK_KVQ_NVFP4 &&
        ((n_head_kv * head_dim) % 16 || (n_head_kv * head_dim_v) % 16))
        return qk_errf(err, QK_EINPUT,
                       "--kv-cache nvfp4: key and value rows (%d and %d) must be multiples of 16",
                       n_head_kv * head_dim, n_head_kv * head_dim_v);
    if (q->rotate && (!qk_is_pow2(head_dim) || !qk_is_pow2(head_dim_v)))
        return qk_errf(err, QK_EINPUT, "--kv-rotate: head sizes %d and %d must be powers of two (Hadamard)",
                       head_dim, head_dim_v);
    if (q->key_per_channel) {
        bool ok = q->type == QK_KVQ_INT8 || q->type == QK_KVQ_INT4 ||
                  ((q->type == QK_KVQ_FP8_E4M3 || q->type == QK_KVQ_FP8_E5M2) && q->per_head);
        if (!ok)
            return qk_errf(err, QK_EINPUT,
                           "--kv-key-per-channel needs --kv-cache int8, int4 or fp8-*:head");
        if (q->key_group < 0)
            return qk_errf(err, QK_EINPUT, "--kv-key-per-channel: bad group %d", q->key_group);
    }
    return 0;
}

static int rows_plain(const qk_kvq *q, float *rows, int n_tok, int n_head, int hd, qk_err *err);

/* The Hadamard per head of hd around the codec (rotate). */
static int rot(float *rows, int64_t n_rows, int dim, int hd, qk_err *err)
{
    return qk_hadamard_rows_f64(rows, n_rows, dim, dim, hd) ? qk_errf(err, QK_EIO, "out of memory") : 0;
}

int qk_kvq_rows(const qk_kvq *q, float *rows, int n_tok, int n_head, int hd, qk_err *err)
{
    if (!q->rotate || q->type == QK_KVQ_F32)
        return rows_plain(q, rows, n_tok, n_head, hd, err);
    const int dim = n_head * hd;
    if (rot(rows, n_tok, dim, hd, err) || rows_plain(q, rows, n_tok, n_head, hd, err))
        return err->code;
    return rot(rows, n_tok, dim, hd, err);
}

static int rows_plain(const qk_kvq *q, float *rows, int n_tok, int n_head, int hd, qk_err *err)
{
    const size_t count = (size_t)n_tok * (size_t)n_head * (size_t)hd;
    switch (q->type) {
    case QK_KVQ_F32: return 0;
    case QK_KVQ_F16:
        for (size_t i = 0; i < count; i++)
            rows[i] = qk_f16_to_f32(qk_f32_to_f16(rows[i]));
        return 0;
    case QK_KVQ_BF16:
        for (size_t i = 0; i < count; i++)
            rows[i] = qk_bf16_to_f32(qk_f32_to_bf16(rows[i]));
        return 0;
    default: break;
    }
    qk_scheme_opts o;
    const qk_scheme *s = type_scheme(q, &o);
    if (q->type == QK_KVQ_NVFP4) { /* one token row (all heads) at a time */
        const int dim = n_head * hd;
        for (int t = 0; t < n_tok; t++)
            if (qk_scheme_qdq(s, rows + (size_t)t * dim, 1, dim, &o, rows + (size_t)t * dim, err))
                return err->code;
        return 0;
    }
    /* per token-head rows (or bare codes): every head row is its own cell */
    return qk_scheme_qdq(s, rows, (int64_t)n_tok * n_head, hd, &o, rows, err);
}

int qk_kvq_key_group(const qk_kvq *q, float *rows, int dim, int hd, qk_err *err)
{
    const int g = qk_kvq_group(q);
    if (q->rotate && rot(rows, g, dim, hd, err))
        return err->code;
    float *tr = malloc((size_t)g * (size_t)dim * sizeof *tr);
    if (!tr)
        return qk_errf(err, QK_EIO, "out of memory");
    for (int t = 0; t < g; t++) /* [g][dim] -> [dim][g]: a channel per row */
        for (int d = 0; d < dim; d++)
            tr[(size_t)d * g + t] = rows[(size_t)t * dim + d];
    qk_scheme_opts o;
    const qk_scheme *s = type_scheme(q, &o);
    int rc = qk_scheme_qdq(s, tr, dim, g, &o, tr, err);
    if (!rc)
        for (int t = 0; t < g; t++)
            for (int d = 0; d < dim; d++)
                rows[(size_t)t * dim + d] = tr[(size_t)d * g + t];
    free(tr);
    if (!rc && q->rotate)
        rc = rot(rows, g, dim, hd, err);
    return rc;
}

/* Bytes of one token's rows of n_head heads of hd (per-token codecs). */
static double token_bytes(const qk_kvq *q, int n_head, int hd)
{
    const double n = (double)n_head * hd;
    switch (q->type) {
    case QK_KVQ_F32: return 4 * n;
    case QK_KVQ_F16:
    case QK_KVQ_BF16: return 2 * n;
    default: break;
    }
    qk_scheme_opts o;
    const qk_scheme *s = type_scheme(q, &o);
    if (q->type == QK_KVQ_NVFP4)
        return (double)qk_scheme_encoded_size(s, 1, n_head * hd, &o);
    /* fp8 per tensor: bare codes; its one scale per layer is not per token */
    return (double)qk_scheme_encoded_size(s, n_head, hd, &o);
}

void qk_kvq_token_bytes(const qk_kvq *q, int n_head_kv, int head_dim, int head_dim_v,
                        double *k_bytes, double *v_bytes)
{
    *v_bytes = token_bytes(q, n_head_kv, head_dim_v);
    if (q->key_per_channel) {
        qk_scheme_opts o;
        const qk_scheme *s = type_scheme(q, &o);
        const int g = qk_kvq_group(q);
        *k_bytes = (double)qk_scheme_encoded_size(s, n_head_kv * head_dim, g, &o) / g;
    } else {
        *k_bytes = token_bytes(q, n_head_kv, head_dim);
    }
}
