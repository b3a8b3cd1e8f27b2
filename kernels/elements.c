/* elements.c - element codecs (elements.h) and the kernel family of the
 * checkpoint element types F8_E4M3, F8_E5M2 and E8M0 (types.h): one code
 * per byte, decoded exactly, encoded saturating with ties to even. */
#include "kernels/elements.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "kernels/fp4.h"
#include "kernels/types.h"

/* bitsandbytes csrc/kernels.cu: the nf4 table (dDequantizeNF4) and the FP4
 * tree (dDequantizeFP4Tree), float literals exactly as spelled there. */
const float qk_nf4_values[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};
const float qk_bnb_fp4_values[16] = {
    0.00000000f, 5.208333333e-03f, 0.66666667f, 1.00000000f,
    0.33333333f, 0.50000000f, 0.16666667f, 0.25000000f,
    -0.00000000f, -5.208333333e-03f, -0.66666667f, -1.00000000f,
    -0.33333333f, -0.50000000f, -0.16666667f, -0.25000000f,
};

/* dQuantizeNF4's pivots, low to high: code = number of pivots below x. */
static const float nf4_pivots[15] = {
    -0.8480964004993439f, -0.6106329262256622f, -0.4599952697753906f, -0.33967943489551544f,
    -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
    0.1202552504837513f, 0.2035212516784668f, 0.2920137718319893f, 0.3893125355243683f,
    0.5016634166240692f, 0.6427869200706482f, 0.8614784181118011f,
};
/* dQuantizeFP4's pivots on |x|, low to high, and the magnitude code of each
 * bucket (0, 1/192, 1/6, 1/4, 1/3, 1/2, 2/3, 1). */
static const float fp4_pivots[7] = {0.00260417f, 0.0859375f, 0.20833333f, 0.29166667f,
                                    0.4166667f, 0.583333f, 0.8333333f};
static const uint8_t fp4_bucket_code[8] = {0, 1, 6, 7, 4, 5, 2, 3};

#define F(nm, b, e, m, bias, fl, sg, inf, nan, emax, mx, mn) \
    {nm, b, e, m, bias, fl, sg, inf, nan, emax, mx, mn}
static const qk_elem_info infos[QK_ELEM_COUNT] = {
    [QK_ELEM_FP8_E4M3] = F("fp8_e4m3", 8, 4, 3, 7, true, true, false, true, 8, 448.0f, -448.0f),
    [QK_ELEM_FP8_E5M2] = F("fp8_e5m2", 8, 5, 2, 15, true, true, true, true, 15, 57344.0f, -57344.0f),
    [QK_ELEM_E8M0] = F("e8m0", 8, 8, 0, 127, true, false, false, true, 127, 0x1p127f, 0x1p-127f),
    [QK_ELEM_FP6_E2M3] = F("fp6_e2m3", 6, 2, 3, 1, true, true, false, false, 2, 7.5f, -7.5f),
    [QK_ELEM_FP6_E3M2] = F("fp6_e3m2", 6, 3, 2, 3, true, true, false, false, 4, 28.0f, -28.0f),
    [QK_ELEM_FP4_E2M1] = F("fp4_e2m1", 4, 2, 1, 1, true, true, false, false, 2, 6.0f, -6.0f),
    [QK_ELEM_INT8] = F("int8", 8, 0, 0, 0, false, true, false, false, 0, 127.0f, -128.0f),
    [QK_ELEM_UINT8] = F("uint8", 8, 0, 0, 0, false, false, false, false, 0, 255.0f, 0.0f),
    [QK_ELEM_INT4] = F("int4", 4, 0, 0, 0, false, true, false, false, 0, 7.0f, -8.0f),
    [QK_ELEM_UINT4] = F("uint4", 4, 0, 0, 0, false, false, false, false, 0, 15.0f, 0.0f),
    [QK_ELEM_NF4] = F("nf4", 4, 0, 0, 0, false, true, false, false, 0, 1.0f, -1.0f),
    [QK_ELEM_BNB_FP4] = F("bnb_fp4", 4, 0, 0, 0, false, true, false, false, 0, 1.0f, -1.0f),
};
#undef F

const qk_elem_info *qk_elem_get(qk_elem e)
{
    return (unsigned)e < QK_ELEM_COUNT ? &infos[e] : NULL;
}

const qk_elem_info *qk_elem_by_name(const char *name)
{
    for (int e = 0; e < QK_ELEM_COUNT; e++)
        if (strcasecmp(infos[e].name, name) == 0)
            return &infos[e];
    return NULL;
}

/* ---- minifloats ----------------------------------------------------------- */

/* Largest finite magnitude code (sign bit clear). */
static unsigned mf_max_code(const qk_elem_info *f)
{
    if (f->has_inf) /* E5M2: all-ones exponent is Inf/NaN */
        return ((1u << f->ebits) - 2) << f->mbits | ((1u << f->mbits) - 1);
    if (f->has_nan) /* E4M3: only S.1111.111 is NaN */
        return (1u << (f->bits - 1)) - 2;
    return (1u << (f->bits - 1)) - 1;
}

static float mf_decode(const qk_elem_info *f, unsigned code)
{
    unsigned sbit = 1u << (f->bits - 1), mag = code & (sbit - 1);
    unsigned E = mag >> f->mbits, M = mag & ((1u << f->mbits) - 1);
    float v;
    if (f->has_inf && E == (1u << f->ebits) - 1)
        v = M == 0 ? INFINITY : NAN;
    else if (f->has_nan && !f->has_inf && mag == sbit - 1)
        v = NAN;
    else if (E == 0)
        v = ldexpf((float)M, 1 - f->bias - f->mbits);
    else
        v = ldexpf((float)(M + (1u << f->mbits)), (int)E - f->bias - f->mbits);
    return (code & sbit) ? -v : v;
}

/* Magnitude code of finite a >= 0, before any overflow check: with
 * e = max(floor(log2 a), emin) and n = a / 2^(e - m) rounded to an integer
 * (ties to even), the code is (e - emin) * 2^m + n.  This covers subnormals
 * (e = emin, n < 2^m) and the carry into the next binade (n = 2^(m+1)).  The
 * scaling by a power of two is exact (the quotient is at least 2^m or a
 * subnormal scaled up). */
static unsigned long mf_round(const qk_elem_info *f, float a)
{
    if (a == 0.0f)
        return 0;
    int ex, emin = 1 - f->bias;
    (void)frexpf(a, &ex);
    int e = ex - 1 < emin ? emin : ex - 1;
    float n = rintf(ldexpf(a, f->mbits - e)); /* default rounding: to nearest even */
    return ((unsigned long)(e - emin) << f->mbits) + (unsigned long)n;
}

static uint8_t mf_encode(const qk_elem_info *f, float x, int mode)
{
    unsigned sbit = 1u << (f->bits - 1), maxc = mf_max_code(f);
    unsigned sign = signbit(x) ? sbit : 0;
    if (isnan(x)) {
        if (!f->has_nan)
            return (uint8_t)sign;
        return (uint8_t)(sign | (f->has_inf ? maxc + 3 : sbit - 1)); /* E5M2 0x7E, E4M3 0x7F */
    }
    unsigned over = mode == QK_ENC_NONSAT && f->has_nan
                        ? (f->has_inf ? maxc + 1 : sbit - 1) /* Inf, or E4M3 NaN */
                        : maxc;
    if (isinf(x))
        return (uint8_t)(sign | over);
    unsigned long c = mf_round(f, fabsf(x));
    return (uint8_t)(sign | (c > maxc ? over : (unsigned)c));
}

/* E8M0: 2^(code-127), no sign, no zero, 0xFF NaN (MX v1.0 sec. 5.4.1). */
static uint8_t e8m0_encode(float x, int mode)
{
    if (!(x > 0.0f))
        return 0xFF;
    if (isinf(x))
        return mode == QK_ENC_SAT ? 0xFE : 0xFF;
    int ex;
    float fr = frexpf(x, &ex); /* x = fr * 2^ex, fr in [0.5, 1) */
    int e = ex - 1;
    if (fr >= 0.75f) /* at or past 1.5 * 2^e: up (ties up, see elements.h) */
        e++;
    if (e < -127)
        return 0x00;
    if (e > 127)
        return mode == QK_ENC_SAT ? 0xFE : 0xFF;
    return (uint8_t)(e + 127);
}

/* ---- integers and code books ---------------------------------------------- */

static uint8_t int_encode(float x, float lo, float hi)
{
    if (isnan(x))
        return 0;
    float r = rintf(x);
    r = r < lo ? lo : r > hi ? hi : r;
    return (uint8_t)(int)r; /* two's complement of negative values */
}

static uint8_t nf4_encode(float x)
{
    uint8_t c = 0;
    while (c < 15 && x > nf4_pivots[c])
        c++;
    return c;
}

static uint8_t bnb_fp4_encode(float x)
{
    uint8_t sign = x < 0.0f ? 8 : 0;
    float a = fabsf(x);
    int b = 0;
    while (b < 7 && a > fp4_pivots[b])
        b++;
    return (uint8_t)(fp4_bucket_code[b] + sign);
}

/* ---- public --------------------------------------------------------------- */

float qk_elem_decode(qk_elem e, uint8_t code)
{
    switch (e) {
    case QK_ELEM_E8M0: return qk_e8m0_to_f32(code); /* fp4.h: 0 -> 2^-127, 0xFF -> NaN */
    case QK_ELEM_FP4_E2M1: /* equal to fp4.h's qk_e2m1_to_f32 but for -0 (test_elements) */
    case QK_ELEM_FP8_E4M3:
    case QK_ELEM_FP8_E5M2:
    case QK_ELEM_FP6_E2M3:
    case QK_ELEM_FP6_E3M2: return mf_decode(&infos[e], code & ((1u << infos[e].bits) - 1));
    case QK_ELEM_INT8: return (float)(int8_t)code;
    case QK_ELEM_UINT8: return (float)code;
    case QK_ELEM_INT4: return (float)((int)(code & 15) - ((code & 8) ? 16 : 0));
    case QK_ELEM_UINT4: return (float)(code & 15);
    case QK_ELEM_NF4: return qk_nf4_values[code & 15];
    case QK_ELEM_BNB_FP4: return qk_bnb_fp4_values[code & 15];
    default: return NAN;
    }
}

uint8_t qk_elem_encode(qk_elem e, float x, int mode)
{
    switch (e) {
    case QK_ELEM_E8M0: return e8m0_encode(x, mode);
    case QK_ELEM_FP8_E4M3:
    case QK_ELEM_FP8_E5M2:
    case QK_ELEM_FP6_E2M3:
    case QK_ELEM_FP6_E3M2:
    case QK_ELEM_FP4_E2M1: return mf_encode(&infos[e], x, mode);
    case QK_ELEM_INT8: return int_encode(x, -128.0f, 127.0f);
    case QK_ELEM_UINT8: return int_encode(x, 0.0f, 255.0f);
    case QK_ELEM_INT4: return int_encode(x, -8.0f, 7.0f) & 15;
    case QK_ELEM_UINT4: return int_encode(x, 0.0f, 15.0f);
    case QK_ELEM_NF4: return nf4_encode(x);
    case QK_ELEM_BNB_FP4: return bnb_fp4_encode(x);
    default: return 0;
    }
}

void qk_elem_decode_n(qk_elem e, const uint8_t *codes, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = qk_elem_decode(e, codes[i]);
}

void qk_elem_encode_n(qk_elem e, const float *src, uint8_t *codes, int64_t n, int mode)
{
    for (int64_t i = 0; i < n; i++)
        codes[i] = qk_elem_encode(e, src[i], mode);
}

/* ---- kernel family: the checkpoint element types of types.h --------------- */

static void e4m3_to_float(const void *src, float *dst, int64_t n) { qk_elem_decode_n(QK_ELEM_FP8_E4M3, src, dst, n); }
static void e5m2_to_float(const void *src, float *dst, int64_t n) { qk_elem_decode_n(QK_ELEM_FP8_E5M2, src, dst, n); }
static void e8m0_to_float(const void *src, float *dst, int64_t n) { qk_elem_decode_n(QK_ELEM_E8M0, src, dst, n); }

/* Not ggml types: the encoders are the saturating element codecs. */
static size_t encode_rows(qk_elem e, const float *src, void *dst, int64_t nrows, int64_t ncols)
{
    qk_elem_encode_n(e, src, dst, nrows * ncols, QK_ENC_SAT);
    return (size_t)nrows * (size_t)ncols;
}
static size_t e4m3_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols, const float *imatrix)
{
    (void)imatrix;
    return encode_rows(QK_ELEM_FP8_E4M3, src, dst, nrows, ncols);
}
static size_t e5m2_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols, const float *imatrix)
{
    (void)imatrix;
    return encode_rows(QK_ELEM_FP8_E5M2, src, dst, nrows, ncols);
}
static size_t e8m0_quantize(const float *src, void *dst, int64_t nrows, int64_t ncols, const float *imatrix)
{
    (void)imatrix;
    return encode_rows(QK_ELEM_E8M0, src, dst, nrows, ncols);
}

const qk_kernel_ops qk_ops_elements[] = {
    {.id = QK_F8_E4M3, .to_float = e4m3_to_float, .quantize = e4m3_quantize},
    {.id = QK_F8_E5M2, .to_float = e5m2_to_float, .quantize = e5m2_quantize},
    {.id = QK_E8M0, .to_float = e8m0_to_float, .quantize = e8m0_quantize},
    {.id = -1},
};
