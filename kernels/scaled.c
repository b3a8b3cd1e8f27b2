/* scaled.c - scaled quantization schemes (scaled.h): scale derivation per
 * rule, encode/decode of the packed layout, and the scheme table that
 * qk-quant's raw path and --list-types use. */
#include "kernels/scaled.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/core/ckd.h"
#include "kernels/half.h"
#include "kernels/types.h"

static const qk_scheme schemes[] = {
    {"fp8_e4m3", "FP8 E4M3 (OFP8 fn): bare codes, or absmax scale amax/448 per --granularity",
     QK_ELEM_FP8_E4M3, QK_RULE_ABSMAX, QK_GRAN_NONE, 0, true},
    {"fp8_e5m2", "FP8 E5M2 (OFP8): bare codes, or absmax scale amax/57344 per --granularity",
     QK_ELEM_FP8_E5M2, QK_RULE_ABSMAX, QK_GRAN_NONE, 0, true},
    {"e8m0", "E8M0 power-of-two codes (the MX scale type), bare", QK_ELEM_E8M0, QK_RULE_NONE,
     QK_GRAN_NONE, 0, false},
    {"fp4_e2m1", "FP4 E2M1 (MX element): bare codes, or absmax scale amax/6 per --granularity",
     QK_ELEM_FP4_E2M1, QK_RULE_ABSMAX, QK_GRAN_NONE, 0, true},
    {"fp6_e2m3", "FP6 E2M3 (MX element): bare codes, or absmax scale amax/7.5 per --granularity",
     QK_ELEM_FP6_E2M3, QK_RULE_ABSMAX, QK_GRAN_NONE, 0, true},
    {"fp6_e3m2", "FP6 E3M2 (MX element): bare codes, or absmax scale amax/28 per --granularity",
     QK_ELEM_FP6_E3M2, QK_RULE_ABSMAX, QK_GRAN_NONE, 0, true},
    {"mxfp4", "OCP MX: 32 FP4 E2M1 sharing an E8M0 scale", QK_ELEM_FP4_E2M1, QK_RULE_MX,
     QK_GRAN_GROUP, 32, false},
    {"mxfp6_e2m3", "OCP MX: 32 FP6 E2M3 sharing an E8M0 scale", QK_ELEM_FP6_E2M3, QK_RULE_MX,
     QK_GRAN_GROUP, 32, false},
    {"mxfp6_e3m2", "OCP MX: 32 FP6 E3M2 sharing an E8M0 scale", QK_ELEM_FP6_E3M2, QK_RULE_MX,
     QK_GRAN_GROUP, 32, false},
    {"mxfp8_e4m3", "OCP MX: 32 FP8 E4M3 sharing an E8M0 scale", QK_ELEM_FP8_E4M3, QK_RULE_MX,
     QK_GRAN_GROUP, 32, false},
    {"mxfp8_e5m2", "OCP MX: 32 FP8 E5M2 sharing an E8M0 scale", QK_ELEM_FP8_E5M2, QK_RULE_MX,
     QK_GRAN_GROUP, 32, false},
    {"mxint8", "OCP MX: 32 INT8 (implicit 2^-6) sharing an E8M0 scale", QK_ELEM_INT8, QK_RULE_MX,
     QK_GRAN_GROUP, 32, false},
    {"nvfp4", "NVFP4: 16 FP4 E2M1 sharing an FP8 E4M3 scale, times an FP32 global scale",
     QK_ELEM_FP4_E2M1, QK_RULE_NVFP4, QK_GRAN_GROUP, 16, false},
    {"int8", "INT8 symmetric, scale amax/127.5 (default per channel)", QK_ELEM_INT8,
     QK_RULE_ABSMAX, QK_GRAN_ROW, 0, true},
    {"int4", "INT4 symmetric, scale amax/7.5 (default group:128)", QK_ELEM_INT4, QK_RULE_ABSMAX,
     QK_GRAN_GROUP, 128, true},
    {"uint8", "UINT8 asymmetric with a zero point (default per channel)", QK_ELEM_UINT8,
     QK_RULE_MINMAX, QK_GRAN_ROW, 0, true},
    {"uint4", "UINT4 asymmetric with a zero point (default group:128)", QK_ELEM_UINT4,
     QK_RULE_MINMAX, QK_GRAN_GROUP, 128, true},
    {"nf4", "bitsandbytes NF4, absmax per group (default group:64)", QK_ELEM_NF4, QK_RULE_BNB,
     QK_GRAN_GROUP, 64, true},
    {"bnb_fp4", "bitsandbytes FP4, absmax per group (default group:64)", QK_ELEM_BNB_FP4,
     QK_RULE_BNB, QK_GRAN_GROUP, 64, true},
};
#define N_SCHEMES (sizeof schemes / sizeof schemes[0])

const qk_scheme *qk_scheme_by_name(const char *name)
{
    for (size_t i = 0; i < N_SCHEMES; i++)
        if (strcasecmp(schemes[i].name, name) == 0)
            return &schemes[i];
    return NULL;
}

const qk_scheme *qk_scheme_next(const qk_scheme *prev)
{
    if (!prev)
        return &schemes[0];
    size_t i = (size_t)(prev - schemes) + 1;
    return i < N_SCHEMES ? &schemes[i] : NULL;
}

/* ---- options -------------------------------------------------------------- */

static int parse_pos(const char *p, char **end, long max, long *v)
{
    errno = 0;
    *v = strtol(p, end, 10);
    return errno || *end == p || *v < 1 || *v > max;
}

int qk_gran_parse(const char *text, qk_scheme_opts *o, qk_err *err)
{
    static const struct { const char *name; qk_gran g; } words[] = {
        {"none", QK_GRAN_NONE}, {"tensor", QK_GRAN_TENSOR}, {"channel", QK_GRAN_ROW},
        {"token", QK_GRAN_ROW}, {"row", QK_GRAN_ROW},
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(text, words[i].name) == 0) {
            o->gran = words[i].g;
            return 0;
        }
    char *end;
    long a, b;
    if (strncmp(text, "group:", 6) == 0) {
        if (parse_pos(text + 6, &end, 1L << 24, &a) || *end)
            return qk_errf(err, QK_EINPUT, "--granularity: bad group size in '%s'", text);
        o->gran = QK_GRAN_GROUP;
        o->group = (int)a;
        return 0;
    }
    if (strcmp(text, "block") == 0) {
        o->gran = QK_GRAN_BLOCK;
        o->block_rows = o->block_cols = 128;
        return 0;
    }
    if (strncmp(text, "block:", 6) == 0) {
        if (parse_pos(text + 6, &end, 1L << 24, &a) || (*end != 'x' && *end != 'X') ||
            parse_pos(end + 1, &end, 1L << 24, &b) || *end)
            return qk_errf(err, QK_EINPUT, "--granularity: bad block '%s' (want block:RxC)", text);
        o->gran = QK_GRAN_BLOCK;
        o->block_rows = (int)a;
        o->block_cols = (int)b;
        return 0;
    }
    return qk_errf(err, QK_EINPUT,
                   "--granularity: '%s' is not tensor, channel, token, group:G, block:RxC or none",
                   text);
}

/* ---- layout --------------------------------------------------------------- */

static bool elem_is_int(qk_elem e)
{
    return e == QK_ELEM_INT8 || e == QK_ELEM_UINT8 || e == QK_ELEM_INT4 || e == QK_ELEM_UINT4;
}

static const char *gran_word(qk_gran g)
{
    static const char *const w[] = {"default", "none", "tensor", "channel", "group", "block"};
    return w[g];
}

/* Granularity after options, or -1 (with err) when the scheme refuses it. */
static int resolve_gran(const qk_scheme *s, const qk_scheme_opts *o, qk_err *err)
{
    qk_gran g = o->gran == QK_GRAN_DEFAULT ? s->gran : o->gran;
    if (o->gran != QK_GRAN_DEFAULT && (unsigned)o->gran > QK_GRAN_BLOCK)
        return qk_errf(err, QK_EINPUT, "bad granularity %d", (int)o->gran), -1;
    bool ok;
    switch (s->rule) {
    case QK_RULE_NONE: ok = g == QK_GRAN_NONE; break;
    case QK_RULE_ABSMAX: ok = g != QK_GRAN_NONE || !elem_is_int(s->elem); break;
    case QK_RULE_MINMAX: ok = g != QK_GRAN_NONE; break;
    case QK_RULE_MX:
    case QK_RULE_NVFP4: /* fixed blocks; group:N with N the block size is accepted */
        ok = o->gran == QK_GRAN_DEFAULT || (g == QK_GRAN_GROUP && o->group == s->group);
        break;
    case QK_RULE_BNB: ok = g == QK_GRAN_GROUP; break;
    default: ok = false;
    }
    if (!ok) {
        qk_errf(err, QK_EINPUT, "%s: granularity %s is not available (default %s%s)", s->name,
                gran_word(g), gran_word(s->gran), s->gran == QK_GRAN_GROUP ? ":G" : "");
        return -1;
    }
    return (int)g;
}

int qk_scheme_layout_of(const qk_scheme *s, int64_t rows, int64_t cols, const qk_scheme_opts *o,
                        qk_scheme_layout *l, qk_err *err)
{
    static const qk_scheme_opts none = {0};
    if (!o)
        o = &none;
    memset(l, 0, sizeof *l);
    if (rows < 1 || cols < 1)
        return qk_errf(err, QK_EINPUT, "%s: shape %lldx%lld is empty", s->name, (long long)rows,
                       (long long)cols);
    int g = resolve_gran(s, o, err);
    if (g < 0)
        return QK_EINPUT;
    l->gran = (qk_gran)g;
    const qk_elem_info *ei = qk_elem_get(s->elem);
    switch (l->gran) {
    case QK_GRAN_NONE: break;
    case QK_GRAN_TENSOR: l->cell_rows = rows, l->cell_cols = cols; break;
    case QK_GRAN_ROW: l->cell_rows = 1, l->cell_cols = cols; break;
    case QK_GRAN_GROUP: {
        int G = o->gran == QK_GRAN_GROUP ? o->group : s->group;
        if (G < 1)
            return qk_errf(err, QK_EINPUT, "%s: group size %d", s->name, G);
        if (cols % G)
            return qk_errf(err, QK_EINPUT, "%s: %lld columns is not a multiple of the group size %d",
                           s->name, (long long)cols, G);
        l->cell_rows = 1, l->cell_cols = G;
        break;
    }
    case QK_GRAN_BLOCK:
        l->cell_rows = o->block_rows > 0 ? o->block_rows : 128;
        l->cell_cols = o->block_cols > 0 ? o->block_cols : 128;
        break;
    default: break;
    }
    if (l->gran != QK_GRAN_NONE) {
        l->grid_rows = ((uint64_t)rows + (uint64_t)l->cell_rows - 1) / (uint64_t)l->cell_rows;
        l->grid_cols = ((uint64_t)cols + (uint64_t)l->cell_cols - 1) / (uint64_t)l->cell_cols;
    }
    int st = o->scale_type;
    bool float_scales = s->rule == QK_RULE_ABSMAX || s->rule == QK_RULE_MINMAX;
    if (st != QK_F32 && (!float_scales || (st != QK_F16 && st != QK_BF16)))
        return qk_errf(err, QK_EINPUT, "%s: scale type %d is not available", s->name, st);
    l->scale_bytes = s->rule == QK_RULE_MX || s->rule == QK_RULE_NVFP4 ? 1 : st == QK_F32 ? 4 : 2;
    l->bits = l->gran == QK_GRAN_NONE ? 8 : ei->bits;
    uint64_t t;
    bool over = qk_ckd_mul(&t, (uint64_t)cols, (uint64_t)l->bits) ||
                qk_ckd_align(&t, t, 8);
    l->row_bytes = t / 8;
    over = over || qk_ckd_mul(&l->codes_size, (uint64_t)rows, l->row_bytes) ||
           qk_ckd_mul(&l->n_scales, l->grid_rows, l->grid_cols) ||
           qk_ckd_mul(&l->scales_size, l->n_scales, (uint64_t)l->scale_bytes);
    l->zeros_size = s->rule == QK_RULE_MINMAX ? l->n_scales : 0;
    l->global_size = s->rule == QK_RULE_NVFP4 ? 4 : 0;
    l->scales_off = l->codes_size;
    over = over || qk_ckd_add(&l->zeros_off, l->scales_off, l->scales_size) ||
           qk_ckd_add(&l->global_off, l->zeros_off, l->zeros_size) ||
           qk_ckd_add(&l->total, l->global_off, l->global_size) ||
           qk_ckd_mul(&t, (uint64_t)rows, (uint64_t)cols) || qk_ckd_mul(&t, t, sizeof(float)) ||
           l->total > SIZE_MAX || t > SIZE_MAX;
    if (over)
        return qk_errf(err, QK_EINPUT, "%s: shape %lldx%lld is too large", s->name,
                       (long long)rows, (long long)cols);
    return 0;
}

size_t qk_scheme_encoded_size(const qk_scheme *s, int64_t rows, int64_t cols, const qk_scheme_opts *o)
{
    qk_scheme_layout l;
    qk_err err;
    return qk_scheme_layout_of(s, rows, cols, o, &l, &err) ? 0 : (size_t)l.total;
}

/* ---- bit packing ---------------------------------------------------------- */

void qk_pack_codes(const uint8_t *codes, int64_t n, int bits, uint8_t *out)
{
    if (bits == 8) {
        memcpy(out, codes, (size_t)n);
        return;
    }
    unsigned mask = (1u << bits) - 1;
    memset(out, 0, (size_t)((n * bits + 7) / 8));
    for (int64_t i = 0; i < n; i++) {
        uint64_t bit = (uint64_t)i * (uint64_t)bits;
        unsigned v = codes[i] & mask, sh = (unsigned)(bit % 8);
        out[bit / 8] |= (uint8_t)(v << sh);
        if (sh + (unsigned)bits > 8)
            out[bit / 8 + 1] |= (uint8_t)(v >> (8 - sh));
    }
}

void qk_unpack_codes(const uint8_t *in, int64_t n, int bits, uint8_t *codes)
{
    if (bits == 8) {
        memcpy(codes, in, (size_t)n);
        return;
    }
    unsigned mask = (1u << bits) - 1;
    for (int64_t i = 0; i < n; i++) {
        uint64_t bit = (uint64_t)i * (uint64_t)bits;
        unsigned sh = (unsigned)(bit % 8), v = in[bit / 8] >> sh;
        if (sh + (unsigned)bits > 8)
            v |= (unsigned)in[bit / 8 + 1] << (8 - sh);
        codes[i] = (uint8_t)(v & mask);
    }
}

/* ---- MX (OCP MX v1.0 sec. 6.3) -------------------------------------------- */

static int mx_emax(qk_elem e) { return e == QK_ELEM_INT8 ? 0 : qk_elem_get(e)->emax; }

uint8_t qk_mx_scale(qk_elem e, const float *x, int n)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (!(a <= FLT_MAX)) /* NaN or Inf: the scale is NaN */
            return 0xFF;
        if (a > amax)
            amax = a;
    }
    if (amax == 0.0f) /* log2(0) = -inf: clamps to -127 */
        return 0;
    int ex;
    (void)frexpf(amax, &ex); /* floor(log2(amax)) = ex - 1, also for subnormals */
    int se = ex - 1 - mx_emax(e);
    if (se < -127)
        se = -127;
    return (uint8_t)(se + 127); /* se <= 127 - emax: never the NaN code */
}

/* MXINT8 element: round(v * 2^6) half even, clamped to +-127 (MX sec. 5.3). */
static uint8_t mxint8_encode(float v)
{
    float r = rintf(v);
    r = r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
    return (uint8_t)(int8_t)r;
}

void qk_mx_encode_block(qk_elem e, const float *x, int n, uint8_t *scale, uint8_t *codes)
{
    uint8_t b = qk_mx_scale(e, x, n);
    *scale = b;
    if (b == 0xFF) { /* the block is NaN whatever the elements say */
        uint8_t c = qk_elem_get(e)->has_nan ? qk_elem_encode(e, NAN, QK_ENC_SAT) : 0;
        memset(codes, c, (size_t)n);
        return;
    }
    int se = (int)b - 127;
    for (int i = 0; i < n; i++)
        codes[i] = e == QK_ELEM_INT8 ? mxint8_encode(ldexpf(x[i], 6 - se))
                                     : qk_elem_encode(e, ldexpf(x[i], -se), QK_ENC_SAT);
}

void qk_mx_decode_block(qk_elem e, uint8_t scale, const uint8_t *codes, int n, float *y)
{
    int se = (int)scale - 127;
    for (int i = 0; i < n; i++) {
        if (scale == 0xFF)
            y[i] = NAN;
        else if (e == QK_ELEM_INT8)
            y[i] = ldexpf((float)(int8_t)codes[i], se - 6);
        else
            y[i] = ldexpf(qk_elem_decode(e, codes[i]), se); /* exact: a power-of-two scaling */
    }
}

/* ---- NVFP4 ---------------------------------------------------------------- */

float qk_nvfp4_global_scale(float amax, bool ct)
{
    if (!(amax > 0.0f) || !(amax <= FLT_MAX))
        return 1.0f;
    return ct ? 2688.0f / amax : amax / 2688.0f; /* 2688 = 6 * 448 */
}

uint8_t qk_nvfp4_block_scale(float block_amax, float g, bool ct)
{
    if (ct) { /* compressed-tensors calculate_qparams: clamp, cast, 0 -> 0.125 */
        uint8_t b = qk_elem_encode(QK_ELEM_FP8_E4M3, g * (block_amax / 6.0f), QK_ENC_SAT);
        return qk_elem_decode(QK_ELEM_FP8_E4M3, b) == 0.0f ? qk_elem_encode(QK_ELEM_FP8_E4M3, 0.125f, QK_ENC_SAT) : b;
    }
    float s = block_amax / (6.0f * g); /* modelopt get_weights_scaling_factor */
    if (s == 0.0f)
        s = 1.0f;
    return qk_elem_encode(QK_ELEM_FP8_E4M3, s, QK_ENC_SAT);
}

float qk_nvfp4_dequant_scale(uint8_t scale, float g, bool ct)
{
    float s = qk_elem_decode(QK_ELEM_FP8_E4M3, scale);
    return ct ? s / g : s * g;
}

/* ---- absmax / minmax / bnb scales ----------------------------------------- */

/* Half the integer range (compressed-tensors' bit_range / 2), or the
 * element's max for the float elements. */
static float half_range(qk_elem e)
{
    switch (e) {
    case QK_ELEM_INT8: return 127.5f;
    case QK_ELEM_INT4: return 7.5f;
    default: return qk_elem_get(e)->max;
    }
}

/* Signed range of an integer element (uint8/uint4 quantize over it). */
static void int_range(qk_elem e, float *lo, float *hi)
{
    bool four = e == QK_ELEM_INT4 || e == QK_ELEM_UINT4;
    *lo = four ? -8.0f : -128.0f;
    *hi = four ? 7.0f : 127.0f;
}

/* round half even into [lo, hi]; NaN -> 0 (or lo when 0 is outside). */
static float rint_clamp(float v, float lo, float hi)
{
    if (isnan(v))
        return lo > 0.0f ? lo : 0.0f;
    v = v < lo ? lo : v > hi ? hi : v;
    return rintf(v);
}

static float round_to(float s, int type)
{
    if (type == QK_F16)
        return qk_f16_to_f32(qk_f32_to_f16(s));
    if (type == QK_BF16)
        return qk_bf16_to_f32(qk_f32_to_bf16(s));
    return s;
}

static void put_scale(uint8_t *p, float s, int type)
{
    if (type == QK_F32) {
        memcpy(p, &s, 4);
        return;
    }
    uint16_t h = type == QK_F16 ? qk_f32_to_f16(s) : qk_f32_to_bf16(s);
    memcpy(p, &h, 2);
}

static float get_scale(const uint8_t *p, int type)
{
    if (type == QK_F32) {
        float s;
        memcpy(&s, p, 4);
        return s;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return type == QK_F16 ? qk_f16_to_f32(h) : qk_bf16_to_f32(h);
}

static size_t cell_of(const qk_scheme_layout *l, int64_t r, int64_t c)
{
    return (size_t)((uint64_t)(r / l->cell_rows) * l->grid_cols + (uint64_t)(c / l->cell_cols));
}

/* Per-cell statistics: lo/hi (min and max, NaN ignored) over each cell. */
static void cell_minmax(const qk_scheme_layout *l, const float *x, int64_t rows, int64_t cols,
                        float *lo, float *hi)
{
    for (uint64_t i = 0; i < l->n_scales; i++)
        lo[i] = hi[i] = 0.0f; /* compressed-tensors includes 0 in the range */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            size_t k = cell_of(l, r, c);
            float v = x[r * cols + c];
            if (v < lo[k])
                lo[k] = v;
            if (v > hi[k])
                hi[k] = v;
        }
}

/* ---- encode / decode ------------------------------------------------------ */

typedef struct {
    const qk_scheme *s;
    const qk_scheme_opts *o;
    qk_scheme_layout l;
    float *scale;  /* per cell: absmax/minmax/bnb scale */
    float *zero;   /* per cell: minmax zero point (signed range) */
    float global;  /* NVFP4 */
} plan;

static int plan_alloc(plan *p, qk_err *err)
{
    size_t n = (size_t)p->l.n_scales;
    p->scale = calloc(n ? n : 1, sizeof(float));
    p->zero = calloc(n ? n : 1, sizeof(float));
    if (!p->scale || !p->zero)
        return qk_errf(err, QK_EIO, "out of memory (%zu scales)", n);
    return 0;
}

static void plan_free(plan *p)
{
    free(p->scale);
    free(p->zero);
}

/* Scales of the absmax and minmax rules from the data. */
static int derive_scales(plan *p, const float *x, int64_t rows, int64_t cols, qk_err *err)
{
    const qk_scheme *s = p->s;
    size_t n = (size_t)p->l.n_scales;
    float *lo = malloc(n * sizeof(float)), *hi = malloc(n * sizeof(float));
    if (!lo || !hi) {
        free(lo), free(hi);
        return qk_errf(err, QK_EIO, "out of memory (%zu scales)", n);
    }
    cell_minmax(&p->l, x, rows, cols, lo, hi);
    int st = p->o->scale_type;
    for (size_t k = 0; k < n; k++) {
        if (s->rule == QK_RULE_ABSMAX) {
            float amax = fmaxf(-lo[k], hi[k]);
            p->scale[k] = round_to(fmaxf(amax / half_range(s->elem), FLT_EPSILON), st);
        } else { /* minmax over the signed range */
            float qlo, qhi;
            int_range(s->elem, &qlo, &qhi);
            float sc = round_to(fmaxf((hi[k] - lo[k]) / (qhi - qlo), FLT_EPSILON), st);
            p->scale[k] = sc;
            p->zero[k] = rint_clamp(qlo - rint_clamp(lo[k] / sc, -16777216.0f, 16777216.0f), qlo, qhi);
        }
    }
    free(lo), free(hi);
    return 0;
}

/* One element's code (absmax, minmax, bnb: the per-cell rules). */
static uint8_t encode_elem(const plan *p, float v, size_t k)
{
    const qk_scheme *s = p->s;
    switch (s->rule) {
    case QK_RULE_NONE: return qk_elem_encode(s->elem, v, p->o->nonsat ? QK_ENC_NONSAT : QK_ENC_SAT);
    case QK_RULE_ABSMAX:
        if (p->l.gran == QK_GRAN_NONE)
            return qk_elem_encode(s->elem, v, p->o->nonsat ? QK_ENC_NONSAT : QK_ENC_SAT);
        return qk_elem_encode(s->elem, v / p->scale[k], QK_ENC_SAT);
    case QK_RULE_MINMAX: {
        float qlo, qhi;
        int_range(s->elem, &qlo, &qhi);
        float q = rint_clamp(v / p->scale[k] + p->zero[k], qlo, qhi);
        return (uint8_t)(int)(q - qlo);
    }
    case QK_RULE_BNB: return qk_elem_encode(s->elem, v * (1.0f / p->scale[k]), QK_ENC_SAT);
    default: return 0;
    }
}

static float decode_elem(const plan *p, uint8_t c, size_t k)
{
    const qk_scheme *s = p->s;
    switch (s->rule) {
    case QK_RULE_NONE: return qk_elem_decode(s->elem, c);
    case QK_RULE_ABSMAX:
        if (p->l.gran == QK_GRAN_NONE)
            return qk_elem_decode(s->elem, c);
        return qk_elem_decode(s->elem, c) * p->scale[k];
    case QK_RULE_MINMAX: {
        float qlo, qhi;
        int_range(s->elem, &qlo, &qhi);
        return ((float)c + qlo - p->zero[k]) * p->scale[k];
    }
    case QK_RULE_BNB: return qk_elem_decode(s->elem, c) * p->scale[k];
    default: return NAN;
    }
}

static float tensor_amax(const float *x, size_t n)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    return amax;
}

static int plan_init(plan *p, const qk_scheme *s, int64_t rows, int64_t cols,
                     const qk_scheme_opts *o, qk_err *err)
{
    static const qk_scheme_opts none = {0};
    memset(p, 0, sizeof *p);
    p->s = s;
    p->o = o ? o : &none;
    int rc = qk_scheme_layout_of(s, rows, cols, p->o, &p->l, err);
    return rc ? rc : plan_alloc(p, err);
}

int qk_scheme_encode(const qk_scheme *s, const float *x, int64_t rows, int64_t cols,
                     const qk_scheme_opts *o, void *out, qk_err *err)
{
    plan p;
    int rc = plan_init(&p, s, rows, cols, o, err);
    uint8_t *row = NULL, *dst = out;
    if (rc)
        goto done;
    if (!(row = malloc((size_t)cols))) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto done;
    }
    const qk_scheme_layout *l = &p.l;
    bool ct = p.o->nvfp4_ct;
    if (s->rule == QK_RULE_ABSMAX || s->rule == QK_RULE_MINMAX) {
        if (l->gran != QK_GRAN_NONE && (rc = derive_scales(&p, x, rows, cols, err)))
            goto done;
    } else if (s->rule == QK_RULE_NVFP4) {
        p.global = p.o->has_global_scale ? p.o->global_scale
                                         : qk_nvfp4_global_scale(tensor_amax(x, (size_t)(rows * cols)), ct);
        memcpy(dst + l->global_off, &p.global, 4);
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        if (s->rule == QK_RULE_MX) {
            for (int64_t c = 0; c < cols; c += l->cell_cols)
                qk_mx_encode_block(s->elem, xr + c, (int)l->cell_cols,
                                   dst + l->scales_off + cell_of(l, r, c), row + c);
        } else if (s->rule == QK_RULE_NVFP4) {
            for (int64_t c = 0; c < cols; c += l->cell_cols) {
                float amax = tensor_amax(xr + c, (size_t)l->cell_cols);
                uint8_t sb = qk_nvfp4_block_scale(amax, p.global, ct);
                float d = qk_nvfp4_dequant_scale(sb, p.global, ct);
                dst[l->scales_off + cell_of(l, r, c)] = sb;
                for (int64_t j = 0; j < l->cell_cols; j++)
                    row[c + j] = qk_elem_encode(QK_ELEM_FP4_E2M1, xr[c + j] / d, QK_ENC_SAT);
            }
        } else {
            if (s->rule == QK_RULE_BNB) /* groups lie in one row: absmax here */
                for (int64_t c = 0; c < cols; c += l->cell_cols)
                    p.scale[cell_of(l, r, c)] = tensor_amax(xr + c, (size_t)l->cell_cols);
            for (int64_t c = 0; c < cols; c++)
                row[c] = encode_elem(&p, xr[c], l->gran == QK_GRAN_NONE ? 0 : cell_of(l, r, c));
        }
        qk_pack_codes(row, cols, l->bits, dst + l->codes_off + (uint64_t)r * l->row_bytes);
    }
    if (s->rule == QK_RULE_ABSMAX || s->rule == QK_RULE_MINMAX || s->rule == QK_RULE_BNB) {
        for (uint64_t k = 0; k < l->n_scales; k++) {
            put_scale(dst + l->scales_off + k * (uint64_t)l->scale_bytes, p.scale[k],
                      s->rule == QK_RULE_BNB ? QK_F32 : p.o->scale_type);
            if (s->rule == QK_RULE_MINMAX) {
                float qlo, qhi;
                int_range(s->elem, &qlo, &qhi);
                dst[l->zeros_off + k] = (uint8_t)(int)(p.zero[k] - qlo);
            }
        }
    }
done:
    free(row);
    plan_free(&p);
    return rc;
}

int qk_scheme_decode(const qk_scheme *s, const void *in, int64_t rows, int64_t cols,
                     const qk_scheme_opts *o, float *y, qk_err *err)
{
    plan p;
    int rc = plan_init(&p, s, rows, cols, o, err);
    uint8_t *row = NULL;
    const uint8_t *src = in;
    if (rc)
        goto done;
    if (!(row = malloc((size_t)cols))) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto done;
    }
    const qk_scheme_layout *l = &p.l;
    bool ct = p.o->nvfp4_ct;
    if (s->rule == QK_RULE_NVFP4)
        memcpy(&p.global, src + l->global_off, 4);
    if (s->rule == QK_RULE_ABSMAX || s->rule == QK_RULE_MINMAX || s->rule == QK_RULE_BNB) {
        int st = s->rule == QK_RULE_BNB ? QK_F32 : p.o->scale_type;
        float qlo = 0.0f, qhi;
        if (s->rule == QK_RULE_MINMAX)
            int_range(s->elem, &qlo, &qhi);
        for (uint64_t k = 0; k < l->n_scales; k++) {
            p.scale[k] = get_scale(src + l->scales_off + k * (uint64_t)l->scale_bytes, st);
            if (s->rule == QK_RULE_MINMAX)
                p.zero[k] = (float)src[l->zeros_off + k] + qlo;
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * cols;
        qk_unpack_codes(src + l->codes_off + (uint64_t)r * l->row_bytes, cols, l->bits, row);
        if (s->rule == QK_RULE_MX) {
            for (int64_t c = 0; c < cols; c += l->cell_cols)
                qk_mx_decode_block(s->elem, src[l->scales_off + cell_of(l, r, c)], row + c,
                                   (int)l->cell_cols, yr + c);
        } else if (s->rule == QK_RULE_NVFP4) {
            for (int64_t c = 0; c < cols; c += l->cell_cols) {
                float d = qk_nvfp4_dequant_scale(src[l->scales_off + cell_of(l, r, c)], p.global, ct);
                for (int64_t j = 0; j < l->cell_cols; j++)
                    yr[c + j] = qk_elem_decode(QK_ELEM_FP4_E2M1, row[c + j]) * d;
            }
        } else {
            for (int64_t c = 0; c < cols; c++)
                yr[c] = decode_elem(&p, row[c], l->gran == QK_GRAN_NONE ? 0 : cell_of(l, r, c));
        }
    }
done:
    free(row);
    plan_free(&p);
    return rc;
}

int qk_scheme_qdq(const qk_scheme *s, const float *x, int64_t rows, int64_t cols,
                  const qk_scheme_opts *o, float *y, qk_err *err)
{
    qk_scheme_layout l;
    int rc = qk_scheme_layout_of(s, rows, cols, o, &l, err);
    if (rc)
        return rc;
    void *buf = malloc(l.total ? (size_t)l.total : 1);
    if (!buf)
        return qk_errf(err, QK_EIO, "out of memory (%llu bytes)", (unsigned long long)l.total);
    rc = qk_scheme_encode(s, x, rows, cols, o, buf, err);
    if (!rc)
        rc = qk_scheme_decode(s, buf, rows, cols, o, y, err);
    free(buf);
    return rc;
}
