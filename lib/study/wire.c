/* wire.c - pipeline-wire activation compression (wire.h). */
#include "lib/study/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zstd.h>

#include "kernels/half.h"
#include "kernels/scaled.h"

/* A wire format: a plain float rounding (scheme NULL) or a scheme of
 * kernels/scaled.h at a granularity. */
typedef struct {
    const char *name;
    const char *scheme;
    qk_gran gran;
    int group;
} wire_fmt_def;

static const wire_fmt_def fmts[QK_WIRE_FMT_COUNT] = {
    [QK_WIRE_FP32] = {"fp32", NULL, QK_GRAN_DEFAULT, 0},
    [QK_WIRE_BF16] = {"bf16", NULL, QK_GRAN_DEFAULT, 0},
    [QK_WIRE_FP16] = {"fp16", NULL, QK_GRAN_DEFAULT, 0},
    [QK_WIRE_FP8_E4M3] = {"fp8-e4m3", "fp8_e4m3", QK_GRAN_ROW, 0},
    [QK_WIRE_FP8_E5M2] = {"fp8-e5m2", "fp8_e5m2", QK_GRAN_ROW, 0},
    [QK_WIRE_INT8_TOKEN] = {"int8-token", "int8", QK_GRAN_ROW, 0},
    [QK_WIRE_INT4_TOKEN] = {"int4-token", "int4", QK_GRAN_ROW, 0},
    [QK_WIRE_INT4_GROUP32] = {"int4-group32", "int4", QK_GRAN_GROUP, 32},
    [QK_WIRE_MXFP8] = {"mxfp8", "mxfp8_e4m3", QK_GRAN_DEFAULT, 0},
    [QK_WIRE_MXFP6] = {"mxfp6", "mxfp6_e2m3", QK_GRAN_DEFAULT, 0},
    [QK_WIRE_MXFP4] = {"mxfp4", "mxfp4", QK_GRAN_DEFAULT, 0},
    [QK_WIRE_NVFP4] = {"nvfp4", "nvfp4", QK_GRAN_DEFAULT, 0},
};

const char *qk_wire_fmt_name(qk_wire_fmt f)
{
    return (unsigned)f < QK_WIRE_FMT_COUNT ? fmts[f].name : NULL;
}

int qk_wire_fmt_parse(const char *s, qk_wire_fmt *f, qk_err *err)
{
    for (int i = 0; i < QK_WIRE_FMT_COUNT; i++)
        if (strcasecmp(s, fmts[i].name) == 0) {
            *f = (qk_wire_fmt)i;
            return 0;
        }
    return qk_errf(err, QK_EINPUT,
                   "--wire: '%s' is not fp32, bf16, fp16, fp8-e4m3, fp8-e5m2, int8-token, "
                   "int4-token, int4-group32, mxfp8, mxfp6, mxfp4 or nvfp4",
                   s);
}

/* The scheme of a scaled format and its options (NULL for the plain ones). */
static const qk_scheme *fmt_scheme(qk_wire_fmt f, qk_scheme_opts *o)
{
    memset(o, 0, sizeof *o);
    if (!fmts[f].scheme)
        return NULL;
    o->gran = fmts[f].gran;
    o->group = fmts[f].group;
    return qk_scheme_by_name(fmts[f].scheme);
}

size_t qk_wire_token_bytes(qk_wire_fmt f, int n)
{
    if ((unsigned)f >= QK_WIRE_FMT_COUNT || n < 1)
        return 0;
    if (f == QK_WIRE_FP32)
        return (size_t)n * 4;
    if (f == QK_WIRE_BF16 || f == QK_WIRE_FP16)
        return (size_t)n * 2;
    qk_scheme_opts o;
    const qk_scheme *s = fmt_scheme(f, &o);
    return qk_scheme_encoded_size(s, 1, n, &o);
}

static int check_n(qk_wire_fmt f, int n, qk_err *err)
{
    if (qk_wire_token_bytes(f, n) == 0)
        return qk_errf(err, QK_EINPUT, "--wire %s: a hidden state of %d elements does not suit it%s",
                       qk_wire_fmt_name(f) ? qk_wire_fmt_name(f) : "?", n,
                       f == QK_WIRE_NVFP4 ? " (needs a multiple of 16)"
                                          : " (needs a multiple of 32)");
    return 0;
}

int qk_wire_encode(qk_wire_fmt f, const float *x, int n, uint8_t *buf, qk_err *err)
{
    if (check_n(f, n, err))
        return err->code;
    if (f == QK_WIRE_FP32) {
        memcpy(buf, x, (size_t)n * 4);
        return 0;
    }
    if (f == QK_WIRE_BF16 || f == QK_WIRE_FP16) {
        for (int i = 0; i < n; i++) {
            uint16_t h = f == QK_WIRE_BF16 ? qk_f32_to_bf16(x[i]) : qk_f32_to_f16(x[i]);
            buf[2 * i] = (uint8_t)h;
            buf[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return 0;
    }
    qk_scheme_opts o;
    const qk_scheme *s = fmt_scheme(f, &o);
    return qk_scheme_encode(s, x, 1, n, &o, buf, err);
}

int qk_wire_decode(qk_wire_fmt f, const uint8_t *buf, int n, float *y, qk_err *err)
{
    if (check_n(f, n, err))
        return err->code;
    if (f == QK_WIRE_FP32) {
        memcpy(y, buf, (size_t)n * 4);
        return 0;
    }
    if (f == QK_WIRE_BF16 || f == QK_WIRE_FP16) {
        for (int i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(buf[2 * i] | buf[2 * i + 1] << 8);
            y[i] = f == QK_WIRE_BF16 ? qk_bf16_to_f32(h) : qk_f16_to_f32(h);
        }
        return 0;
    }
    qk_scheme_opts o;
    const qk_scheme *s = fmt_scheme(f, &o);
    return qk_scheme_decode(s, buf, 1, n, &o, y, err);
}

int qk_wire_qdq(qk_wire_fmt f, float *x, int n_tok, int n, qk_err *err)
{
    if (check_n(f, n, err))
        return err->code;
    if (f == QK_WIRE_FP32)
        return 0;
    uint8_t *buf = malloc(qk_wire_token_bytes(f, n));
    if (!buf)
        return qk_errf(err, QK_EIO, "out of memory");
    int rc = 0;
    for (int t = 0; t < n_tok && !rc; t++) {
        float *row = x + (size_t)t * n;
        rc = qk_wire_encode(f, row, n, buf, err) || qk_wire_decode(f, buf, n, row, err);
    }
    free(buf);
    return rc ? err->code : 0;
}

/* ---- boundaries --------------------------------------------------------------- */

int qk_wire_parse_at(const char *text, qk_wire_spec *s, qk_err *err)
{
    const char *p = text;
    s->n_at = 0;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 1 || v > 1 << 20 || (*end && *end != ','))
            return qk_errf(err, QK_EINPUT, "--wire-at: bad layer list '%s' (want L1,L2,...)", text);
        if (s->n_at == QK_WIRE_MAX_AT)
            return qk_errf(err, QK_EINPUT, "--wire-at: more than %d boundaries", QK_WIRE_MAX_AT);
        if (s->n_at && v <= s->at[s->n_at - 1])
            return qk_errf(err, QK_EINPUT, "--wire-at: layers must increase ('%s')", text);
        s->at[s->n_at++] = (int)v;
        if (!*end)
            return 0;
        p = end + 1;
    }
}

int qk_wire_init(qk_wire *w, const qk_wire_spec *s, int n_layer, int n_embd, qk_err *err)
{
    memset(w, 0, sizeof *w);
    w->spec = *s;
    w->n_layer = n_layer;
    w->n_embd = n_embd;
    if ((unsigned)s->fmt >= QK_WIRE_FMT_COUNT)
        return qk_errf(err, QK_EINPUT, "--wire: bad format %d", (int)s->fmt);
    if (check_n(s->fmt, n_embd, err))
        return err->code;
    int given = (s->every > 0) + (s->stages > 0) + (s->n_at > 0);
    if (given != 1)
        return qk_errf(err, QK_EINPUT,
                       "--wire needs exactly one of --wire-every, --wire-at and --stages");
    if (n_layer < 2)
        return qk_errf(err, QK_EINPUT, "--wire: a model of %d layer has no stage boundary", n_layer);
    if (!(w->after = calloc((size_t)n_layer, 1)))
        return qk_errf(err, QK_EIO, "out of memory");
    if (s->every > 0) {
        for (int L = s->every; L < n_layer; L += s->every)
            w->after[L - 1] = 1;
    } else if (s->stages > 0) {
        if (s->stages > n_layer) {
            qk_wire_free(w);
            return qk_errf(err, QK_EINPUT, "--stages %d: the model has only %d layers", s->stages,
                           n_layer);
        }
        for (int i = 1; i < s->stages; i++)
            w->after[(int)((int64_t)i * n_layer / s->stages) - 1] = 1;
    } else {
        for (int i = 0; i < s->n_at; i++) {
            if (s->at[i] >= n_layer) {
                qk_wire_free(w);
                return qk_errf(err, QK_EINPUT,
                               "--wire-at %d: a boundary must follow a layer 1..%d of the model's %d",
                               s->at[i], n_layer - 1, n_layer);
            }
            w->after[s->at[i] - 1] = 1;
        }
    }
    for (int i = 0; i < n_layer; i++)
        w->n_boundaries += w->after[i];
    if (w->n_boundaries == 0) {
        qk_wire_free(w);
        return qk_errf(err, QK_EINPUT, "--wire: no stage boundary inside the model's %d layers",
                       n_layer);
    }
    if (s->lossless && !(w->zctx = ZSTD_createCCtx())) {
        qk_wire_free(w);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    return 0;
}

void qk_wire_free(qk_wire *w)
{
    if (!w)
        return;
    free(w->after), free(w->buf), free(w->zbuf);
    ZSTD_freeCCtx(w->zctx);
    w->after = w->buf = w->zbuf = NULL;
    w->zctx = NULL;
}

void qk_wire_reset_stats(qk_wire *w) { memset(&w->st, 0, sizeof w->st); }

static int grow(uint8_t **p, size_t *cap, size_t need, qk_err *err)
{
    if (need <= *cap)
        return 0;
    uint8_t *q = realloc(*p, need);
    if (!q)
        return qk_errf(err, QK_EIO, "out of memory");
    *p = q;
    *cap = need;
    return 0;
}

/* The lossless control: x (count floats) as bf16, plain and byte-shuffled,
 * through zstd levels 1 and 3. */
static int lossless(qk_wire *w, const float *x, size_t count, qk_err *err)
{
    const size_t raw = count * 2, bound = ZSTD_compressBound(raw);
    if (grow(&w->buf, &w->cap, 2 * raw, err) || grow(&w->zbuf, &w->zcap, bound, err))
        return err->code;
    uint8_t *plain = w->buf, *shuf = w->buf + raw;
    for (size_t i = 0; i < count; i++) {
        uint16_t h = qk_f32_to_bf16(x[i]);
        plain[2 * i] = (uint8_t)h, plain[2 * i + 1] = (uint8_t)(h >> 8);
        shuf[i] = (uint8_t)h, shuf[count + i] = (uint8_t)(h >> 8);
    }
    static const int levels[2] = {1, 3};
    for (int l = 0; l < 2; l++)
        for (int s = 0; s < 2; s++) {
            size_t z = ZSTD_compressCCtx(w->zctx, w->zbuf, bound, s ? shuf : plain, raw, levels[l]);
            if (ZSTD_isError(z))
                return qk_errf(err, QK_EIO, "zstd: %s", ZSTD_getErrorName(z));
            w->st.zstd[l][s] += z;
        }
    return 0;
}

int qk_wire_layer_hook(void *user, int layer, float *x, int n_tok, int n_embd, qk_err *err)
{
    qk_wire *w = user;
    if (layer < 0 || layer >= w->n_layer || !w->after[layer])
        return 0;
    if (n_embd != w->n_embd)
        return qk_errf(err, QK_EINPUT, "wire: hidden state of %d, expected %d", n_embd, w->n_embd);
    const size_t count = (size_t)n_tok * (size_t)n_embd;
    if (w->spec.lossless && lossless(w, x, count, err))
        return err->code;
    if (qk_wire_qdq(w->spec.fmt, x, n_tok, n_embd, err))
        return err->code;
    w->st.messages++;
    w->st.tokens += (uint64_t)n_tok;
    w->st.elements += count;
    w->st.wire_bytes += (uint64_t)n_tok * qk_wire_token_bytes(w->spec.fmt, n_embd);
    return 0;
}

double qk_wire_bytes_per_elem(const qk_wire_stats *s)
{
    return s->elements ? (double)s->wire_bytes / (double)s->elements : 0.0;
}

double qk_wire_lossless_ratio(const qk_wire_stats *s, int level_index, bool shuffled)
{
    uint64_t z = s->zstd[level_index & 1][shuffled];
    return z ? (double)(s->elements * 2) / (double)z : 0.0;
}
