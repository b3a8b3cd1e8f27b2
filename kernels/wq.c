/* wq.c - the parted checkpoint layouts (wq.h): element access, the row
 * decoders (the scalar reference of every layout) and the float products.
 *
 * The decoders compute what formats/ckpt*.c's dequantizers compute, value
 * for value (they cite the producers): (q - zero) * scale with the code and
 * zero as integers turned into float (compressed-tensors, AWQ, GPTQ),
 * scale * q + bias (MLX affine), E2M1/E4M3 codes times their block
 * multiplier (NVFP4: float(scale) / global in compressed-tensors' convention,
 * float(scale) * weight_scale_2 in ModelOpt's; MX: times 2^(e - 127), exact),
 * bitsandbytes' code book times the block absmax (nested: nested_map[code] *
 * nested_absmax + offset), LLM.int8 q * SCB * (1/127). */
#include "kernels/wq.h"

#include <math.h>
#include <string.h>

#include "kernels/elements.h"
#include "kernels/fdot.h"
#include "kernels/half.h"
#include "kernels/wq_impl.h"

/* ---- element access ----------------------------------------------------------- */

float qk_wq_val(const uint8_t *p, int type, int64_t i)
{
    uint32_t u;
    switch (type) {
    case QK_F32:
    case QK_F16:
    case QK_BF16: return qk_wq_val_inline(p, type, i);
    case QK_F8_E4M3: return qk_elem_decode(QK_ELEM_FP8_E4M3, p[i]);
    case QK_F8_E5M2: return qk_elem_decode(QK_ELEM_FP8_E5M2, p[i]);
    case QK_E8M0: return qk_elem_decode(QK_ELEM_E8M0, p[i]);
    case QK_U8: return (float)p[i];
    case QK_I8: return (float)(int8_t)p[i];
    case QK_I32: memcpy(&u, p + 4 * i, 4); return (float)(int32_t)u;
    case QK_U32: memcpy(&u, p + 4 * i, 4); return (float)u;
    default: return NAN;
    }
}

int64_t qk_wq_group(const qk_wq *w, int64_t k)
{
    if (w->gidx) {
        int32_t g;
        memcpy(&g, w->gidx + 4 * k, 4);
        return g;
    }
    return k / w->s.cdiv;
}

float qk_wq_scale(const qk_wq *w, int64_t r, int64_t k)
{
    const qk_wq_grid *s = &w->s;
    return qk_wq_val(s->p, s->type, r / s->rdiv * s->rs + qk_wq_group(w, k) * s->cs);
}

static inline uint32_t word_at(const uint8_t *p, int64_t i)
{
    uint32_t u;
    memcpy(&u, p + 4 * i, 4);
    return u;
}

/* AWQ's interleave: output j of a word sits in field awq_order(j) (ckpt_awq_gptq.c). */
static const int awq_rev4[8] = {0, 4, 1, 5, 2, 6, 3, 7};
static const int awq_rev8[4] = {0, 2, 1, 3};

static int field_of(int j, int bits, bool awq)
{
    if (!awq)
        return j;
    return bits == 4 ? awq_rev4[j] : awq_rev8[j];
}

float qk_wq_zero(const qk_wq *w, int64_t r, int64_t k)
{
    const qk_wq_grid *z = &w->z;
    if (!z->p)
        return 0.0f;
    const int64_t R = r / z->rdiv, C = qk_wq_group(w, k);
    if (z->bits == 0)
        return qk_wq_val(z->p, z->type, R * z->rs + C * z->cs);
    const uint32_t mask = (1u << z->bits) - 1;
    if (z->stream) {
        const int64_t pos = R * z->bits, wi = pos / 32;
        const int sh = (int)(pos % 32);
        uint64_t v = word_at(z->p, wi * z->rs + C * z->cs) >> sh;
        if (sh + z->bits > 32)
            v |= (uint64_t)word_at(z->p, (wi + 1) * z->rs + C * z->cs) << (32 - sh);
        return (float)((int)(v & mask) + z->offset);
    }
    const int pf = 32 / z->bits;
    const uint32_t word = word_at(z->p, R / pf * z->rs + C * z->cs);
    const int sh = z->bits * field_of((int)(R % pf), z->bits, z->awq_order);
    return (float)((int)((word >> sh) & mask) + z->offset);
}

uint32_t qk_wq_code(const qk_wq *w, int64_t r, int64_t k)
{
    const int b = w->bits;
    const uint32_t mask = (1u << b) - 1;
    switch (w->order) {
    case QK_WQ_WORDS: {
        const int pf = 32 / b;
        return word_at(w->q + r * w->q_rs, k / pf) >> (b * (int)(k % pf)) & mask;
    }
    case QK_WQ_STREAM: {
        const uint8_t *row = w->q + r * w->q_rs;
        const uint64_t pos = (uint64_t)k * (uint64_t)b, byte = pos / 8;
        uint32_t v = row[byte];
        if (byte + 1 < (uint64_t)w->q_rs)
            v |= (uint32_t)row[byte + 1] << 8;
        return v >> (pos % 8) & mask;
    }
    case QK_WQ_GPTQ: {
        const int pf = 32 / b;
        return word_at(w->q, k / pf * w->rows + r) >> (b * (int)(k % pf)) & mask;
    }
    case QK_WQ_AWQ: {
        const int pf = 32 / b;
        return word_at(w->q, k * (w->rows / pf) + r / pf) >> (b * field_of((int)(r % pf), b, true)) & mask;
    }
    default: return 0;
    }
}

bool qk_wq_act_same(const qk_wq *a, const qk_wq *b)
{
    return a->act == b->act && a->a_group == b->a_group && a->a_static == b->a_static &&
           a->a_asym == b->a_asym && (!a->a_static || a->a_scale == b->a_scale) &&
           a->a_global == b->a_global && a->a_variant == b->a_variant && a->a_threshold == b->a_threshold;
}

/* ---- the decoders (elements [k0, k0 + n) of row r) ---------------------------------- */

static void dec_fp8(const qk_wq *w, int64_t r, int64_t k0, int64_t n, float *y)
{
    const uint8_t *q = w->q + r * w->q_rs;
    for (int64_t k = k0; k < k0 + n; k++)
        y[k - k0] = qk_elem_decode((qk_elem)w->elem, q[k]) * qk_wq_scale(w, r, k);
}

static void dec_int8(const qk_wq *w, int64_t r, int64_t k0, int64_t n, float *y)
{
    const uint8_t *q = w->q + r * w->q_rs;
    for (int64_t k = k0; k < k0 + n; k++) {
        const float s = qk_wq_scale(w, r, k);
        y[k - k0] = w->z.p ? ((float)(int8_t)q[k] - qk_wq_zero(w, r, k)) * s : (float)(int8_t)q[k] * s;
    }
}

/* CT pack-quantized, AWQ, GPTQ: (q - zero) * scale; MLX affine: scale * q + bias. */
static void dec_int(const qk_wq *w, int64_t r, int64_t k0, int64_t n, float *y)
{
    for (int64_t k = k0; k < k0 + n; k++) {
        const float q = (float)((int)qk_wq_code(w, r, k) - w->code_offset), s = qk_wq_scale(w, r, k);
        y[k - k0] = w->bias ? s * q + qk_wq_zero(w, r, k) : (q - qk_wq_zero(w, r, k)) * s;
    }
}

float qk_wq_fp4_mult(const qk_wq *w, uint8_t sb)
{
    if (w->s.type == QK_E8M0)
        return qk_elem_decode(QK_ELEM_E8M0, sb);
    const float s = qk_elem_decode(QK_ELEM_FP8_E4M3, sb);
    return w->g_div ? s / w->g : s * w->g;
}

/* E2M1 codes two a byte, the even element in the low nibble. */
static void dec_fp4(const qk_wq *w, int64_t r, int64_t k0, int64_t n, float *y)
{
    const uint8_t *q = w->q + r * w->q_rs;
    const uint8_t *srow = w->s.p + r / w->s.rdiv * w->s.rs;
    for (int64_t k = k0; k < k0 + n; k++) {
        const uint8_t c = q[k / 2] >> (k % 2 * 4) & 15;
        const float d = qk_wq_fp4_mult(w, srow[k / w->s.cdiv * w->s.cs]);
        y[k - k0] = qk_elem_decode(QK_ELEM_FP4_E2M1, c) * d;
    }
}

/* bitsandbytes 4-bit: blocks over the flattened tensor, the first code of a
 * byte in the high nibble. */
static float bnb_absmax(const qk_wq *w, uint64_t j)
{
    if (w->nested_map)
        return qk_wq_val(w->nested_map, QK_F32, w->s.p[j]) *
                   qk_wq_val(w->nested_absmax, QK_F32, (int64_t)(j / (uint64_t)w->nested_block)) +
               w->nested_offset;
    return qk_wq_val(w->s.p, w->s.type, (int64_t)j);
}

static void dec_bnb4(const qk_wq *w, int64_t r, int64_t k0, int64_t n, float *y)
{
    const uint64_t i0 = (uint64_t)r * (uint64_t)w->cols + (uint64_t)k0;
    uint64_t cur = UINT64_MAX;
    float am = 0;
    for (uint64_t i = i0; i < i0 + (uint64_t)n; i++) {
        const uint64_t j = i / (uint64_t)w->block;
        if (j != cur) {
            cur = j;
            am = bnb_absmax(w, j);
        }
        const uint8_t b = w->q[i / 2];
        y[i - i0] = qk_wq_val(w->qmap, QK_F32, i % 2 ? b & 15u : b >> 4) * am;
    }
}

static void dec_bnb8(const qk_wq *w, int64_t r, int64_t k0, int64_t n, float *y)
{
    const uint8_t *q = w->q + r * w->q_rs;
    const float s = qk_wq_val(w->s.p, w->s.type, r);
    for (int64_t k = k0; k < k0 + n; k++)
        y[k - k0] = (float)(int8_t)q[k] * s * 7.874015718698502e-3f;
}

qk_wq_dec_fn qk_wq_decoder(int type)
{
    switch (type) {
    case QK_W_FP8: return dec_fp8;
    case QK_W_INT8: return dec_int8;
    case QK_W_PACK:
    case QK_W_AWQ:
    case QK_W_GPTQ:
    case QK_W_MLX: return dec_int;
    case QK_W_NVFP4:
    case QK_W_MXFP4: return dec_fp4;
    case QK_W_BNB4: return dec_bnb4;
    case QK_W_BNB8: return dec_bnb8;
    default: return NULL;
    }
}

static void wq_rows(const qk_wq *w, int64_t r0, int64_t nr, float *out)
{
    const qk_wq_dec_fn dec = qk_wq_decoder(w->type);
    for (int64_t r = 0; r < nr; r++)
        dec(w, r0 + r, 0, w->cols, out + r * w->cols);
}

/* ---- the float products (kernels/fdot.h's order, wq.h) ------------------------- */

typedef struct {
    const qk_wq *w;
    qk_wq_dec_fn dec;
    int64_t r0;
} wq_float_rows;

static void wq_float_dec(const void *ctx, int r, int64_t k0, int64_t m, float *out)
{
    const wq_float_rows *c = ctx;
    c->dec(c->w, c->r0 + r, k0, m, out);
}

/* The float activations (QK_F32 rows, or FP8/MX codes decoded to floats by
 * the activation encoder): the decoded weights against them in fdot.h's order. */
static void float_tile(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                       size_t ldo)
{
    const wq_float_rows c = {w, qk_wq_decoder(w->type), r0};
    qk_fdot_rows(&c, wq_float_dec, w->cols, QK_FDOT_ROWS_CHUNK, nr, y, ys / sizeof(float), nt, out, ldo);
}

static void wq_tile(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out, size_t ldo)
{
    switch (w->act) {
    case QK_A_I8: qk_wq_tile_i8(w, r0, nr, y, ys, nt, out, ldo); return;
    case QK_A_NV4: qk_wq_tile_nv4(w, r0, nr, y, ys, nt, out, ldo); return;
    case QK_A_I8O: qk_wq_tile_i8o(w, r0, nr, y, ys, nt, out, ldo); return;
    case QK_A_F8B:
    case QK_A_F8G: qk_wq_tile_f8b(w, r0, nr, y, ys, nt, out, ldo); return;
    default: float_tile(w, r0, nr, y, ys, nt, out, ldo); return;
    }
}

bool qk_wq_act_float(int act) { return act == QK_F32 || act == QK_A_FP8 || act == QK_A_MX8 || act == QK_A_MX4; }

/* ---- the table's rows ----------------------------------------------------------- */

#define WQ_ROW(t) {.id = t, .wq_rows = wq_rows, .wq_tile = wq_tile}

const qk_wq_ops qk_ops_wq[] = {
    WQ_ROW(QK_W_FP8), WQ_ROW(QK_W_INT8), WQ_ROW(QK_W_PACK), WQ_ROW(QK_W_NVFP4), WQ_ROW(QK_W_MXFP4),
    WQ_ROW(QK_W_AWQ), WQ_ROW(QK_W_GPTQ), WQ_ROW(QK_W_MLX), WQ_ROW(QK_W_BNB4), WQ_ROW(QK_W_BNB8),
    {.id = QK_A_FP8, .wq_act = qk_wq_act_fp8}, {.id = QK_A_MX8, .wq_act = qk_wq_act_mx},
    {.id = QK_A_MX4, .wq_act = qk_wq_act_mx}, {.id = QK_A_I8, .wq_act = qk_wq_act_i8},
    {.id = QK_A_NV4, .wq_act = qk_wq_act_nv4}, {.id = QK_A_I8O, .wq_act = qk_wq_act_i8o},
    {.id = QK_A_F8B, .wq_act = qk_wq_act_f8b}, {.id = QK_A_F8G, .wq_act = qk_wq_act_f8g},
    {.id = -1},
};
