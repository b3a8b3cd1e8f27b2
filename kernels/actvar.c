/* actvar.c - the activation encoders Q8_0, Q8_1 (llama.cpp's x86 ones, see
 * kernels/legacy.c) and Q8_K (quantize_row_q8_K_ref), written once with the
 * perturbations of actvar.h as parameters: legacy.c and kquants.c call them
 * unperturbed, the noise floor's variants perturbed.  F16 and BF16 as half.h. */
#include "kernels/actvar.h"

#include <math.h>

#include "kernels/half.h"
#include "kernels/quant_common.h"

/* A perturbation: inverse scales moved `ulp` (-1, 0, +1) ulps in magnitude;
 * ties broken the other way when `flip`. */
typedef struct {
    int ulp;
    bool flip;
} pert;

static float nudge(float v, int ulp)
{
    if (!ulp || v == 0.0f || !isfinite(v))
        return v;
    const float away = v > 0 ? INFINITY : -INFINITY;
    return nextafterf(v, ulp > 0 ? away : 0.0f);
}

/* Round half to even (rintf, the encoders' rule) or, flipped, half away
 * from zero (roundf). */
static float round_q8(float v, bool flip) { return flip ? roundf(v) : rintf(v); }

/* v as cvtps2dq converts it after rounding half to even or, flipped, half
 * away from zero: a non-finite or out-of-range v is INT32_MIN. */
static int32_t q8_cvt(float v, bool flip)
{
    if (!(v >= -2147483648.0f && v < 2147483648.0f))
        return INT32_MIN;
    return (int32_t)round_q8(v, flip);
}

/* That value to int8 as the saturating packs do. */
static int8_t q8_sat(int32_t v) { return (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v); }

/* One block of 32: d = amax / 127 is stored; the quants use id = 127 / amax,
 * perturbed.  *sum (may be NULL): the converted values' sum in 32 bits as the
 * x86 encoder adds them before packing (wrapping; it differs from the int8
 * quants' sum only where 127 / amax overflows, for a block of subnormals). */
static float q8_block(const float *x, int8_t *qs, pert p, int32_t *sum)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    const float d = amax / 127.f;
    const float id = nudge(amax != 0.0f ? 127.f / amax : 0.0f, p.ulp);
    uint32_t s = 0;
    for (int j = 0; j < 32; j++) {
        const int32_t v = q8_cvt(x[j] * id, p.flip);
        qs[j] = q8_sat(v);
        s += (uint32_t)v;
    }
    if (sum)
        *sum = (int32_t)s;
    return d;
}

void qk_q8_0_act_row(const float *src, void *dst, int64_t n, int ulp, bool flip)
{
    const pert p = {ulp, flip};
    qk_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++)
        qk_st_f16(y[i].d, q8_block(src + i * 32, y[i].qs, p, NULL));
}

void qk_q8_1_act_row(const float *src, void *dst, int64_t n, int ulp, bool flip)
{
    const pert p = {ulp, flip};
    qk_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t sum;
        const float d = q8_block(src + i * 32, y[i].qs, p, &sum);
        qk_st_f16(y[i].d, d);
        qk_st_f16(y[i].s, sum * d);
    }
}

/* qk_nearest_int (half to even) or, flipped, half away from zero. */
static int nearest_q8K(float v, bool flip) { return flip ? qk_trunc_i32(roundf(v)) : qk_nearest_int(v); }

/* quantize_row_q8_K_ref: d = 1 / iscale is stored; the quants use
 * iscale = -127 / max, perturbed.  An all-zero block gets d = 0 and zero
 * quants; ggml leaves its bsums unwritten there, we write zeros. */
void qk_q8_K_act_row(const float *x, void *dst, int64_t n, int ulp, bool flip)
{
    const pert p = {ulp, flip};
    qk_block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K; j++) {
            const float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.f / max, is = nudge(iscale, p.ulp);
        for (int j = 0; j < QK_K; j++) {
            const int v = nearest_q8K(is * x[j], p.flip);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += y[i].qs[16 * j + l];
            qk_st_u16(y[i].bsums + 2 * j, (uint16_t)(int16_t)sum);
        }
        qk_st_f32(y[i].d, 1 / iscale);
    }
}

static void f16_enc(const float *src, void *dst, int64_t n, int ulp, bool flip)
{
    (void)flip; /* a nudge leaves no tie */
    uint8_t *d = dst;
    for (int64_t i = 0; i < n; i++)
        qk_st_u16(d + 2 * i, qk_f32_to_f16(nudge(src[i], ulp)));
}

static void bf16_enc(const float *src, void *dst, int64_t n, int ulp, bool flip)
{
    (void)flip; /* a nudge leaves no tie */
    uint8_t *d = dst;
    for (int64_t i = 0; i < n; i++)
        qk_st_u16(d + 2 * i, qk_f32_to_bf16(nudge(src[i], ulp)));
}

/* One qk_from_float_fn per (type, variant). */
#define VARIANTS(enc)                                                                  \
    static void enc##_up(const float *s, void *d, int64_t n) { enc(s, d, n, 1, true); }   \
    static void enc##_down(const float *s, void *d, int64_t n) { enc(s, d, n, -1, true); } \
    static void enc##_same(const float *s, void *d, int64_t n) { enc(s, d, n, 0, false); }

VARIANTS(qk_q8_0_act_row)
VARIANTS(qk_q8_1_act_row)
VARIANTS(qk_q8_K_act_row)
VARIANTS(f16_enc)
VARIANTS(bf16_enc)

qk_from_float_fn qk_actvar_from_float(int type, int variant)
{
    static const struct {
        int type;
        qk_from_float_fn fn[3]; /* UP, DOWN, SAME */
    } rows[] = {
        {QK_Q8_0, {qk_q8_0_act_row_up, qk_q8_0_act_row_down, qk_q8_0_act_row_same}},
        {QK_Q8_1, {qk_q8_1_act_row_up, qk_q8_1_act_row_down, qk_q8_1_act_row_same}},
        {QK_Q8_K, {qk_q8_K_act_row_up, qk_q8_K_act_row_down, qk_q8_K_act_row_same}},
        {QK_F16, {f16_enc_up, f16_enc_down, f16_enc_same}},
        {QK_BF16, {bf16_enc_up, bf16_enc_down, bf16_enc_same}},
    };
    if (variant < QK_ACTV_UP || variant > QK_ACTV_SAME)
        return NULL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].type == type)
            return rows[i].fn[variant - 1];
    return NULL;
}
