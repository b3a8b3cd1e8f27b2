/* Element codecs (kernels/elements.h): exhaustive decode tables against
 * ml_dtypes (goldens/elements) and the specifications' tables, encode of
 * every representable value and every midpoint, and >= 10^7 random float
 * bit patterns against a nearest-representable search. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/elements.h"
#include "kernels/fp4.h"
#include "kernels/half.h"
#include "tests/testutil.h"
#include "kernels/types.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static const qk_elem minifloats[] = {QK_ELEM_FP8_E4M3, QK_ELEM_FP8_E5M2, QK_ELEM_E8M0,
                                     QK_ELEM_FP6_E2M3, QK_ELEM_FP6_E3M2, QK_ELEM_FP4_E2M1};
#define N_MINI (sizeof minifloats / sizeof minifloats[0])

static bool same_float(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return qk_f32_bits(a) == qk_f32_bits(b);
}

/* ---- decode: every code ---------------------------------------------------- */

Test(elements, decode_every_code_matches_ml_dtypes)
{
    for (size_t f = 0; f < N_MINI; f++) {
        const qk_elem_info *in = qk_elem_get(minifloats[f]);
        char path[256];
        snprintf(path, sizeof path, "goldens/elements/%s.decode.txt", in->name);
        char *text = tu_read(path, NULL), *p = strchr(text, '\n') + 1; /* skip the comment */
        unsigned code, bits, n = 0;
        int used;
        while (sscanf(p, "%x %x%n", &code, &bits, &used) == 2) {
            float want = qk_bits_f32(bits), got = qk_elem_decode(minifloats[f], (uint8_t)code);
            cr_assert(same_float(got, want), "%s code %02x: %a, ml_dtypes %a", in->name, code,
                      (double)got, (double)want);
            p += used;
            n++;
        }
        cr_assert_eq(n, 1u << in->bits, "%s: %u codes in the golden", in->name, n);
        free(text);
    }
}

/* Values read off the specifications' tables (OFP8 rev 1.0 sec. 5.1; MX v1.0
 * sec. 5.3.2, 5.3.3, 5.4.1), checked by hand. */
Test(elements, decode_spec_tables)
{
    static const struct { qk_elem e; uint8_t code; float v; } t[] = {
        {QK_ELEM_FP8_E4M3, 0x7E, 448.0f}, {QK_ELEM_FP8_E4M3, 0xFE, -448.0f},
        {QK_ELEM_FP8_E4M3, 0x08, 0x1p-6f}, {QK_ELEM_FP8_E4M3, 0x07, 0.875f * 0x1p-6f},
        {QK_ELEM_FP8_E4M3, 0x01, 0x1p-9f}, {QK_ELEM_FP8_E4M3, 0x38, 1.0f},
        {QK_ELEM_FP8_E4M3, 0x78, 256.0f}, {QK_ELEM_FP8_E4M3, 0x80, -0.0f},
        {QK_ELEM_FP8_E5M2, 0x7B, 57344.0f}, {QK_ELEM_FP8_E5M2, 0x04, 0x1p-14f},
        {QK_ELEM_FP8_E5M2, 0x03, 0.75f * 0x1p-14f}, {QK_ELEM_FP8_E5M2, 0x01, 0x1p-16f},
        {QK_ELEM_FP8_E5M2, 0x3C, 1.0f}, {QK_ELEM_FP8_E5M2, 0x7C, INFINITY},
        {QK_ELEM_FP8_E5M2, 0xFC, -INFINITY},
        {QK_ELEM_FP6_E2M3, 0x1F, 7.5f}, {QK_ELEM_FP6_E2M3, 0x08, 1.0f},
        {QK_ELEM_FP6_E2M3, 0x07, 0.875f}, {QK_ELEM_FP6_E2M3, 0x01, 0.125f},
        {QK_ELEM_FP6_E2M3, 0x3F, -7.5f},
        {QK_ELEM_FP6_E3M2, 0x1F, 28.0f}, {QK_ELEM_FP6_E3M2, 0x04, 0.25f},
        {QK_ELEM_FP6_E3M2, 0x03, 0.1875f}, {QK_ELEM_FP6_E3M2, 0x01, 0.0625f},
        {QK_ELEM_FP6_E3M2, 0x0C, 1.0f},
        {QK_ELEM_FP4_E2M1, 0x7, 6.0f}, {QK_ELEM_FP4_E2M1, 0x2, 1.0f}, {QK_ELEM_FP4_E2M1, 0x1, 0.5f},
        {QK_ELEM_FP4_E2M1, 0xF, -6.0f}, {QK_ELEM_FP4_E2M1, 0x8, -0.0f},
        {QK_ELEM_E8M0, 0x7F, 1.0f}, {QK_ELEM_E8M0, 0x00, 0x1p-127f}, {QK_ELEM_E8M0, 0xFE, 0x1p127f},
        {QK_ELEM_E8M0, 0x80, 2.0f},
        {QK_ELEM_INT8, 0x80, -128.0f}, {QK_ELEM_INT8, 0x7F, 127.0f}, {QK_ELEM_INT8, 0xFF, -1.0f},
        {QK_ELEM_UINT8, 0xFF, 255.0f}, {QK_ELEM_INT4, 0x8, -8.0f}, {QK_ELEM_INT4, 0x7, 7.0f},
        {QK_ELEM_INT4, 0xF, -1.0f}, {QK_ELEM_UINT4, 0xF, 15.0f},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        cr_assert(same_float(qk_elem_decode(t[i].e, t[i].code), t[i].v), "%s %02x",
                  qk_elem_get(t[i].e)->name, t[i].code);
    /* every E2M1 magnitude (MX sec. 5.3.3) */
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int c = 0; c < 16; c++)
        cr_assert(same_float(qk_elem_decode(QK_ELEM_FP4_E2M1, (uint8_t)c), c & 8 ? -e2m1[c & 7] : e2m1[c]));
    /* NaN codes: E4M3 S.1111.111 only; E5M2 S.11111.{01,10,11}; E8M0 0xFF */
    for (int c = 0; c < 256; c++) {
        bool nan4 = (c & 0x7F) == 0x7F, nan5 = (c & 0x7C) == 0x7C && (c & 3);
        cr_assert_eq(isnan(qk_elem_decode(QK_ELEM_FP8_E4M3, (uint8_t)c)), nan4, "e4m3 %02x", c);
        cr_assert_eq(isnan(qk_elem_decode(QK_ELEM_FP8_E5M2, (uint8_t)c)), nan5, "e5m2 %02x", c);
        cr_assert_eq(isnan(qk_elem_decode(QK_ELEM_E8M0, (uint8_t)c)), c == 0xFF);
        cr_assert_eq(qk_elem_decode(QK_ELEM_INT8, (uint8_t)c), (float)(int8_t)c);
        cr_assert_eq(qk_elem_decode(QK_ELEM_UINT8, (uint8_t)c), (float)c);
    }
    for (int c = 0; c < 64; c++) { /* FP6: no Inf, no NaN */
        cr_assert(isfinite(qk_elem_decode(QK_ELEM_FP6_E2M3, (uint8_t)c)));
        cr_assert(isfinite(qk_elem_decode(QK_ELEM_FP6_E3M2, (uint8_t)c)));
    }
    /* info rows agree with the decoded tables */
    for (size_t f = 0; f < N_MINI; f++) {
        const qk_elem_info *in = qk_elem_get(minifloats[f]);
        float mx = 0.0f;
        for (int c = 0; c < 1 << in->bits; c++) {
            float v = qk_elem_decode(minifloats[f], (uint8_t)c);
            if (isfinite(v) && v > mx)
                mx = v;
        }
        cr_assert_eq(mx, in->max, "%s max", in->name);
        int ex;
        frexpf(mx, &ex);
        cr_assert_eq(ex - 1, in->emax, "%s emax", in->name);
    }
    cr_assert_eq(qk_elem_by_name("FP8_E4M3"), qk_elem_get(QK_ELEM_FP8_E4M3));
    cr_assert_null(qk_elem_by_name("fp7"));
}

/* fp4.h (the GGUF MXFP4/NVFP4 helpers) and elements agree. */
Test(elements, shares_fp4_h)
{
    for (int c = 0; c < 16; c++)
        cr_assert_eq(qk_elem_decode(QK_ELEM_FP4_E2M1, (uint8_t)c), 0.5f * (float)qk_e2m1_x2[c]);
    cr_assert(signbit(qk_elem_decode(QK_ELEM_FP4_E2M1, 8))); /* fp4.h's doubled table has no -0 */
    for (int b = 0; b < 256; b++)
        cr_assert(same_float(qk_elem_decode(QK_ELEM_E8M0, (uint8_t)b), qk_e8m0_to_f32((uint8_t)b)));
}

/* ---- encode: golden, representable values, midpoints ---------------------- */

Test(elements, encode_matches_ml_dtypes)
{
    for (size_t f = 0; f < N_MINI; f++) {
        const qk_elem_info *in = qk_elem_get(minifloats[f]);
        char path[256];
        snprintf(path, sizeof path, "goldens/elements/%s.encode.txt", in->name);
        char *text = tu_read(path, NULL), *p = strchr(text, '\n') + 1;
        unsigned bits, code, n = 0;
        int used;
        while (sscanf(p, "%x %x%n", &bits, &code, &used) == 2) {
            /* ml_dtypes' casts are the non-saturating conversion.  One known
             * difference: ml_dtypes rounds float32 subnormals in (2^-127,
             * 1.5 * 2^-127) up to E8M0 2^-126 (it rounds the float's raw
             * mantissa field); the nearest value is 2^-127, which we return. */
            if (minifloats[f] == QK_ELEM_E8M0 && bits > 0x00400000u && bits < 0x00600000u) {
                cr_assert_eq(code, 0x01);
                cr_assert_eq(qk_elem_encode(QK_ELEM_E8M0, qk_bits_f32(bits), QK_ENC_NONSAT), 0x00);
                p += used;
                continue;
            }
            uint8_t got = qk_elem_encode(minifloats[f], qk_bits_f32(bits), QK_ENC_NONSAT);
            cr_assert_eq(got, code, "%s(%a = %08x): %02x, ml_dtypes %02x", in->name,
                         (double)qk_bits_f32(bits), bits, got, code);
            p += used;
            n++;
        }
        cr_assert_gt(n, 4000u);
        free(text);
    }
}

Test(elements, encode_every_representable_value)
{
    for (size_t f = 0; f < N_MINI; f++) {
        qk_elem e = minifloats[f];
        const qk_elem_info *in = qk_elem_get(e);
        for (int c = 0; c < 1 << in->bits; c++) {
            float v = qk_elem_decode(e, (uint8_t)c);
            if (isnan(v))
                continue;
            cr_assert_eq(qk_elem_encode(e, v, QK_ENC_NONSAT), c, "%s %02x", in->name, c);
            if (!isinf(v))
                cr_assert_eq(qk_elem_encode(e, v, QK_ENC_SAT), c, "%s %02x", in->name, c);
        }
    }
    for (int c = 0; c < 256; c++) {
        cr_assert_eq(qk_elem_encode(QK_ELEM_INT8, (float)(int8_t)c, 0), c);
        cr_assert_eq(qk_elem_encode(QK_ELEM_UINT8, (float)c, 0), c);
    }
    for (int c = 0; c < 16; c++) {
        cr_assert_eq(qk_elem_encode(QK_ELEM_INT4, qk_elem_decode(QK_ELEM_INT4, (uint8_t)c), 0), c);
        cr_assert_eq(qk_elem_encode(QK_ELEM_UINT4, (float)c, 0), c);
        cr_assert_eq(qk_elem_encode(QK_ELEM_NF4, qk_nf4_values[c], 0), c);
        if (c != 8) /* -0 encodes as +0 (bitsandbytes: sign from x < 0) */
            cr_assert_eq(qk_elem_encode(QK_ELEM_BNB_FP4, qk_bnb_fp4_values[c], 0), c);
    }
}

/* Non-negative finite magnitudes in code order (asserted increasing). */
static int magnitudes(qk_elem e, double *mag)
{
    const qk_elem_info *in = qk_elem_get(e);
    int n = 0, half = in->is_signed ? 1 << (in->bits - 1) : 1 << in->bits;
    for (int c = 0; c < half; c++) {
        float v = qk_elem_decode(e, (uint8_t)c);
        if (!isfinite(v))
            break;
        if (n)
            cr_assert_gt(v, mag[n - 1], "%s not increasing at %02x", in->name, c);
        mag[n++] = v;
    }
    return n;
}

Test(elements, encode_every_midpoint)
{
    for (size_t f = 0; f < N_MINI; f++) {
        qk_elem e = minifloats[f];
        const qk_elem_info *in = qk_elem_get(e);
        double mag[256];
        int n = magnitudes(e, mag);
        unsigned sbit = in->is_signed ? 1u << (in->bits - 1) : 0;
        for (int i = 0; i + 1 < n; i++) {
            float mid = (float)((mag[i] + mag[i + 1]) / 2);
            cr_assert_eq((double)mid, (mag[i] + mag[i + 1]) / 2, "midpoint exact");
            int even = e == QK_ELEM_E8M0 ? i + 1 : (i % 2 == 0 ? i : i + 1); /* e8m0: ties up */
            for (int s = 0; s < (sbit ? 2 : 1); s++) {
                float sg = s ? -1.0f : 1.0f;
                unsigned sb = s ? sbit : 0;
                cr_assert_eq(qk_elem_encode(e, sg * mid, 0), sb | (unsigned)even, "%s mid %d", in->name, i);
                cr_assert_eq(qk_elem_encode(e, sg * nextafterf(mid, 0.0f), 0), sb | (unsigned)i);
                cr_assert_eq(qk_elem_encode(e, sg * nextafterf(mid, INFINITY), 0), sb | (unsigned)(i + 1));
            }
        }
    }
    /* integers: k + 0.5 goes to the even neighbour */
    for (int k = -128; k < 127; k++) {
        int want = (k % 2 == 0) ? k : k + 1;
        cr_assert_eq((int8_t)qk_elem_encode(QK_ELEM_INT8, (float)k + 0.5f, 0), want);
    }
    cr_assert_eq(qk_elem_encode(QK_ELEM_INT8, 300.0f, 0), 0x7F);
    cr_assert_eq(qk_elem_encode(QK_ELEM_INT8, -300.0f, 0), 0x80);
    cr_assert_eq(qk_elem_encode(QK_ELEM_INT4, -8.5f, 0), 0x8);
    cr_assert_eq(qk_elem_encode(QK_ELEM_INT4, 7.5f, 0), 0x7);
    cr_assert_eq(qk_elem_encode(QK_ELEM_INT4, 6.5f, 0), 0x6);
    cr_assert_eq(qk_elem_encode(QK_ELEM_UINT4, -3.0f, 0), 0);
    cr_assert_eq(qk_elem_encode(QK_ELEM_INT8, NAN, 0), 0);
}

Test(elements, specials_and_saturation)
{
    /* E4M3: saturating by default; ml_dtypes/torch-style NaN on overflow */
    cr_assert_eq(qk_f32_to_fp8_e4m3(1e9f), 0x7E);
    cr_assert_eq(qk_f32_to_fp8_e4m3(-INFINITY), 0xFE);
    cr_assert_eq(qk_f32_to_fp8_e4m3(464.0f), 0x7E);
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP8_E4M3, 464.0f, QK_ENC_NONSAT), 0x7E); /* tie to even 448 */
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP8_E4M3, nextafterf(464.0f, 1e9f), QK_ENC_NONSAT), 0x7F);
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP8_E4M3, INFINITY, QK_ENC_NONSAT), 0x7F);
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP8_E4M3, -NAN, 0), 0xFF);
    /* E5M2: 61440 is the midpoint to 2^16; ties go to the even code, Inf */
    cr_assert_eq(qk_f32_to_fp8_e5m2(61440.0f), 0x7B);
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP8_E5M2, 61440.0f, QK_ENC_NONSAT), 0x7C);
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP8_E5M2, nextafterf(61440.0f, 0), QK_ENC_NONSAT), 0x7B);
    cr_assert_eq(qk_f32_to_fp8_e5m2(-INFINITY), 0xFB);
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP8_E5M2, -INFINITY, QK_ENC_NONSAT), 0xFC);
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP8_E5M2, NAN, 0), 0x7E);
    /* signed zeros and underflow keep the sign */
    cr_assert_eq(qk_f32_to_fp8_e4m3(-0.0f), 0x80);
    cr_assert_eq(qk_f32_to_fp8_e4m3(-0x1p-11f), 0x80);
    cr_assert_eq(qk_f32_to_fp8_e4m3(0x1p-10f), 0x00); /* half the min subnormal: tie to 0 */
    cr_assert_eq(qk_f32_to_fp8_e4m3(nextafterf(0x1p-10f, 1)), 0x01);
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP4_E2M1, 100.0f, QK_ENC_NONSAT), 0x7);
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP6_E3M2, -INFINITY, QK_ENC_NONSAT), 0x3F);
    cr_assert_eq(qk_elem_encode(QK_ELEM_FP6_E2M3, NAN, 0), 0x00);
    /* E8M0 */
    cr_assert_eq(qk_elem_encode(QK_ELEM_E8M0, 0.0f, 0), 0xFF);
    cr_assert_eq(qk_elem_encode(QK_ELEM_E8M0, -1.0f, 0), 0xFF);
    cr_assert_eq(qk_elem_encode(QK_ELEM_E8M0, 1.5f, 0), 0x80);
    cr_assert_eq(qk_elem_encode(QK_ELEM_E8M0, 0x1p-140f, 0), 0x00);
    cr_assert_eq(qk_elem_encode(QK_ELEM_E8M0, 0x1.8p127f, QK_ENC_NONSAT), 0xFF);
    cr_assert_eq(qk_elem_encode(QK_ELEM_E8M0, 0x1.8p127f, QK_ENC_SAT), 0xFE);
    cr_assert_eq(qk_elem_encode(QK_ELEM_E8M0, INFINITY, QK_ENC_SAT), 0xFE);
}

/* ---- random bit patterns vs a nearest-representable search --------------- */

typedef struct {
    qk_elem e;
    double mag[256];
    int n;         /* finite magnitudes, codes 0..n-1 */
    unsigned sbit; /* sign bit of the code (0 for e8m0) */
} ref_t;

/* Nearest magnitude to a >= 0 by binary search over the table, ties to the
 * even code (e8m0: up), saturating at the top. */
static int ref_nearest(const ref_t *r, double a)
{
    if (a >= r->mag[r->n - 1])
        return r->n - 1;
    int lo = 0, hi = r->n - 1; /* mag[lo] <= a < mag[hi] */
    if (a < r->mag[0])
        return 0;
    while (hi - lo > 1) {
        int m = (lo + hi) / 2;
        if (r->mag[m] <= a)
            lo = m;
        else
            hi = m;
    }
    double dl = a - r->mag[lo], dh = r->mag[hi] - a;
    if (dl != dh)
        return dl < dh ? lo : hi;
    return r->e == QK_ELEM_E8M0 ? hi : (lo % 2 == 0 ? lo : hi);
}

/* The same by scanning every code. */
static int ref_scan(const ref_t *r, double a)
{
    int best = 0;
    for (int i = 1; i < r->n; i++) {
        double d = fabs(r->mag[i] - a), bd = fabs(r->mag[best] - a);
        if (d < bd || (d == bd && (r->e == QK_ELEM_E8M0 || i % 2 == 0)))
            best = i;
    }
    return best;
}

/* Expected code of x in mode, built from the search and the stated rules. */
static unsigned ref_encode(const ref_t *r, float x, int mode)
{
    const qk_elem_info *in = qk_elem_get(r->e);
    unsigned sb = signbit(x) ? r->sbit : 0;
    unsigned top = (unsigned)r->n - 1;
    unsigned nan = in->has_inf ? top + 3 : in->has_nan ? top + 1 : 0; /* E5M2 0x7E, E4M3 0x7F */
    unsigned over = mode == QK_ENC_NONSAT && in->has_nan ? top + 1 : top; /* Inf or NaN */
    if (r->e == QK_ELEM_E8M0) {
        if (!(x > 0.0f))
            return 0xFF;
        over = mode == QK_ENC_NONSAT ? 0xFF : 0xFE;
        if (isinf(x))
            return over;
        double next = 2.0 * r->mag[top], mid = (r->mag[top] + next) / 2;
        if ((double)x >= mid)
            return over;
        return (unsigned)ref_nearest(r, x);
    }
    if (isnan(x))
        return in->has_nan ? (sb | nan) : sb;
    if (isinf(x))
        return sb | over;
    double a = fabs((double)x);
    if (mode == QK_ENC_NONSAT && in->has_nan) {
        double next = r->mag[top] + (r->mag[top] - r->mag[top - 1]), mid = (r->mag[top] + next) / 2;
        if (a > mid || (a == mid && top % 2 == 1))
            return sb | over;
    }
    return sb | (unsigned)ref_nearest(r, a);
}

static float random_pattern(uint64_t *s, const qk_elem_info *in)
{
    uint64_t u = tu_rand(s);
    uint32_t bits = (uint32_t)(u >> 32);
    switch (u & 7) {
    case 0: case 1: /* any pattern: NaN, Inf, subnormals, huge, tiny */
        return qk_bits_f32(bits);
    case 2: { /* near the top: up to 4x past the max */
        double v = tu_uniform(s) * 4.0 * in->max;
        return (v > 3.4e38 ? INFINITY : (float)v) * ((u & 8) ? -1.0f : 1.0f);
    }
    default: { /* exponent within the format's range, +-3 binades */
        int lo = in->emax - (1 << in->ebits) - in->mbits - 3, span = (1 << in->ebits) + in->mbits + 6;
        if (in->ebits == 8)
            lo = -152, span = 282;
        int e = lo + (int)((u >> 8) % (uint64_t)span);
        uint32_t be = (uint32_t)(e + 127);
        if (e < -126) /* a float subnormal */
            return qk_bits_f32((bits & 0x80000000u) |
                               (bits & 0x7fffffu) >> (unsigned)(-126 - e > 23 ? 23 : -126 - e));
        if (be >= 255)
            be = 254;
        return qk_bits_f32((bits & 0x807fffffu) | be << 23);
    }
    }
}

Test(elements, random_patterns_vs_nearest_search, .timeout = 60)
{
    /* 6 formats x 1.75e6 patterns x 2 modes >= 10^7 (fewer under sanitizers) */
    const int per = SANITIZED ? 200000 : 1750000;
    uint64_t seed = 0x9e3779b97f4a7c15ull, total = 0;
    for (size_t f = 0; f < N_MINI; f++) {
        ref_t r = {.e = minifloats[f]};
        const qk_elem_info *in = qk_elem_get(r.e);
        r.n = magnitudes(r.e, r.mag);
        r.sbit = in->is_signed ? 1u << (in->bits - 1) : 0;
        for (int i = 0; i < per; i++) {
            float x = random_pattern(&seed, in);
            if (i < 20000 && fabsf(x) <= 2 * in->max) /* the binary search agrees with a full scan */
                cr_assert_eq(ref_nearest(&r, fabs((double)x)), ref_scan(&r, fabs((double)x)),
                             "%s %a: %d vs %d", in->name, (double)x, ref_nearest(&r, fabs((double)x)),
                             ref_scan(&r, fabs((double)x)));
            for (int mode = 0; mode < 2; mode++) {
                unsigned want = ref_encode(&r, x, mode), got = qk_elem_encode(r.e, x, mode);
                if (got != want)
                    cr_assert_eq(got, want, "%s mode %d x=%a (%08x): %02x want %02x", in->name, mode,
                                 (double)x, qk_f32_bits(x), got, want);
            }
            total += 2;
        }
    }
    cr_assert_geq(total, SANITIZED ? 2000000u : 10000000u);
}

/* ---- code books ------------------------------------------------------------ */

Test(elements, bitsandbytes_code_books)
{
    /* NF4: increasing, -1 .. 1, code 7 is 0 */
    for (int c = 1; c < 16; c++)
        cr_assert_gt(qk_nf4_values[c], qk_nf4_values[c - 1]);
    cr_assert_eq(qk_nf4_values[0], -1.0f);
    cr_assert_eq(qk_nf4_values[7], 0.0f);
    cr_assert_eq(qk_nf4_values[15], 1.0f);
    /* bitsandbytes FP4: sign bit 3; magnitudes {0, 1/16, 8, 12, 4, 6, 2, 3} / 12 */
    static const double twelfths[8] = {0, 0.0625, 8, 12, 4, 6, 2, 3};
    for (int c = 0; c < 16; c++) {
        double want = (c & 8 ? -1 : 1) * twelfths[c & 7] / 12.0;
        cr_assert(fabs((double)qk_bnb_fp4_values[c] - want) < 1e-7, "bnb fp4 %d", c);
        cr_assert_eq(signbit(qk_bnb_fp4_values[c]) != 0, (c & 8) != 0);
    }
    /* The decision trees pick the nearest value; each switch point lies
     * within 1e-6 of the exact midpoint and equal distances go down. */
    for (int b = 0; b < 2; b++) {
        qk_elem e = b ? QK_ELEM_BNB_FP4 : QK_ELEM_NF4;
        const float *tab = b ? qk_bnb_fp4_values : qk_nf4_values;
        uint64_t s = 7;
        for (int i = 0; i < 200000; i++) {
            float x = (float)(tu_uniform(&s) * 2.2 - 1.1);
            uint8_t c = qk_elem_encode(e, x, 0);
            double best = 1e9, second = 1e9;
            for (int k = 0; k < 16; k++) {
                double d = fabs((double)tab[k] - x);
                if (d < best)
                    second = best, best = d;
                else if (d < second && d != best)
                    second = d;
            }
            double got = fabs((double)tab[c] - x);
            cr_assert(got == best || got - best < 2e-6, "%s x=%a code %d: %g vs %g",
                      qk_elem_get(e)->name, (double)x, c, got, best);
        }
    }
    cr_assert_eq(qk_elem_encode(QK_ELEM_NF4, 0.8614784181118011f, 0), 14); /* at a pivot: down */
    cr_assert_eq(qk_elem_encode(QK_ELEM_NF4, nextafterf(0.8614784181118011f, 1), 0), 15);
    cr_assert_eq(qk_elem_encode(QK_ELEM_BNB_FP4, -0.9f, 0), 0xB);
    cr_assert_eq(qk_elem_encode(QK_ELEM_BNB_FP4, 0.2f, 0), 0x6);
}

/* ---- the format table rows ------------------------------------------------ */

Test(elements, type_table_rows)
{
    static const struct { int id; qk_elem e; } rows[] = {
        {QK_F8_E4M3, QK_ELEM_FP8_E4M3}, {QK_F8_E5M2, QK_ELEM_FP8_E5M2}, {QK_E8M0, QK_ELEM_E8M0}};
    for (size_t i = 0; i < 3; i++) {
        const qk_type_traits *t = qk_type_get(rows[i].id);
        cr_assert(t && t->to_float && t->quantize);
        uint8_t codes[256], back[256];
        float v[256];
        for (int c = 0; c < 256; c++)
            codes[c] = (uint8_t)c;
        t->to_float(codes, v, 256);
        for (int c = 0; c < 256; c++)
            cr_assert(same_float(v[c], qk_elem_decode(rows[i].e, (uint8_t)c)));
        for (int c = 0; c < 256; c++)
            if (!isfinite(v[c]))
                v[c] = 1.0f;
        cr_assert_eq(t->quantize(v, back, 16, 16, NULL), 256u);
        for (int c = 0; c < 256; c++)
            cr_assert_eq(back[c], qk_elem_encode(rows[i].e, v[c], QK_ENC_SAT));
    }
}
