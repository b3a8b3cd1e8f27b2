/* Scaled schemes (kernels/scaled.h): scale derivations checked element by
 * element against a nearest-value search, layouts, bit packing, and the
 * GGUF MXFP4/NVFP4 types proven equal to MX MXFP4 / NVFP4 sub-blocks where
 * they are the same mathematics. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/fp4.h"
#include "kernels/half.h"
#include "kernels/scaled.h"
#include "tests/testutil.h"
#include "kernels/types.h"

/* Nearest code of v among all codes of e (ties: even code), saturating;
 * minifloats keep the sign of v (-tiny -> -0). */
static uint8_t nearest_code(qk_elem e, double v)
{
    const qk_elem_info *in = qk_elem_get(e);
    int best = -1, ncodes = 1 << in->bits;
    unsigned sign = 0;
    if (in->is_float && in->is_signed) { /* search the magnitude, then add the sign bit */
        sign = signbit(v) ? (unsigned)ncodes / 2 : 0;
        v = fabs(v);
        ncodes /= 2;
    }
    double bd = 0;
    for (int c = 0; c < ncodes; c++) {
        double d = fabs((double)qk_elem_decode(e, (uint8_t)c) - v);
        if (isnan(d) || isinf(qk_elem_decode(e, (uint8_t)c)))
            continue;
        if (best < 0 || d < bd || (d == bd && c % 2 == 0 && best % 2 == 1)) {
            best = c;
            bd = d;
        }
    }
    return (uint8_t)((unsigned)best | sign);
}

static void fill(float *x, size_t n, uint64_t seed, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tu_gauss(&seed) * scale;
}

Test(scaled, scheme_table)
{
    static const char *const names[] = {
        "fp8_e4m3", "fp8_e5m2", "e8m0", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "mxfp4",
        "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3", "mxfp8_e5m2", "mxint8", "nvfp4", "int8",
        "int4", "uint8", "uint4", "nf4", "bnb_fp4"};
    int n = 0;
    for (const qk_scheme *s = qk_scheme_next(NULL); s; s = qk_scheme_next(s), n++)
        cr_assert_str_eq(s->name, names[n]);
    cr_assert_eq(n, (int)(sizeof names / sizeof names[0]));
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(qk_scheme_by_name(names[i])->name, names[i]);
    cr_assert_str_eq(qk_scheme_by_name("MXFP4")->name, "mxfp4");
    cr_assert_null(qk_scheme_by_name("q4_0"));
}

Test(scaled, granularity_parse)
{
    qk_scheme_opts o = {0};
    qk_err err = {0};
    cr_assert_eq(qk_gran_parse("channel", &o, &err), 0);
    cr_assert_eq(o.gran, QK_GRAN_ROW);
    cr_assert_eq(qk_gran_parse("token", &o, &err), 0);
    cr_assert_eq(o.gran, QK_GRAN_ROW);
    cr_assert_eq(qk_gran_parse("group:64", &o, &err), 0);
    cr_assert(o.gran == QK_GRAN_GROUP && o.group == 64);
    cr_assert_eq(qk_gran_parse("block:128x64", &o, &err), 0);
    cr_assert(o.gran == QK_GRAN_BLOCK && o.block_rows == 128 && o.block_cols == 64);
    cr_assert_eq(qk_gran_parse("block", &o, &err), 0);
    cr_assert(o.block_rows == 128 && o.block_cols == 128);
    static const char *const bad[] = {"group:", "group:0", "group:-3", "group:12x", "block:12",
                                      "block:0x4", "chan", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(qk_gran_parse(bad[i], &o, &err), QK_EINPUT, "%s", bad[i]);
        cr_assert(strstr(err.msg, "--granularity"));
    }
}

Test(scaled, layouts)
{
    qk_scheme_opts g32 = {.gran = QK_GRAN_GROUP, .group = 32}, blk = {.gran = QK_GRAN_BLOCK,
                                                                    .block_rows = 128, .block_cols = 128};
    /* hand-computed sizes: codes + scales (+ zero points) (+ global) */
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("mxfp4"), 4, 64, NULL), 4 * 32 + 4 * 2);
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("mxfp6_e3m2"), 1, 32, NULL), 24 + 1);
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("mxfp8_e5m2"), 2, 64, NULL), 128 + 4);
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("mxint8"), 1, 96, NULL), 96 + 3);
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("nvfp4"), 2, 32, NULL), 32 + 4 + 4);
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("int4"), 3, 64, &g32), 96 + 3 * 2 * 4);
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("uint4"), 3, 64, &g32), 96 + 24 + 6);
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("int8"), 5, 7, NULL), 35 + 5 * 4);
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("fp8_e4m3"), 200, 300, &blk), 60000 + 6 * 4);
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("fp8_e4m3"), 3, 5, NULL), 15);
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("fp4_e2m1"), 3, 5, NULL), 15); /* bare: a byte each */
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("nf4"), 2, 128, NULL), 128 + 4 * 4);
    qk_scheme_opts bf = {.scale_type = QK_BF16};
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("int8"), 5, 8, &bf), 40 + 10);
    qk_scheme_layout l;
    qk_err err = {0};
    cr_assert_eq(qk_scheme_layout_of(qk_scheme_by_name("uint4"), 3, 64, &g32, &l, &err), 0);
    cr_assert(l.codes_off == 0 && l.scales_off == 96 && l.zeros_off == 120 && l.total == 126);
    /* refusals */
    static const struct { const char *s; int64_t r, c; qk_scheme_opts o; const char *msg; } bad[] = {
        {"mxfp4", 1, 48, {0}, "multiple"},
        {"mxfp4", 1, 64, {.gran = QK_GRAN_TENSOR}, "not available"},
        {"nvfp4", 1, 64, {.gran = QK_GRAN_GROUP, .group = 32}, "not available"},
        {"e8m0", 1, 64, {.gran = QK_GRAN_ROW}, "not available"},
        {"int8", 1, 64, {.gran = QK_GRAN_NONE}, "not available"},
        {"nf4", 1, 64, {.gran = QK_GRAN_TENSOR}, "not available"},
        {"int4", 1, 100, {0}, "multiple"},
        {"int8", 0, 4, {0}, "empty"},
        {"mxfp4", 1, 32, {.scale_type = QK_F16}, "scale type"},
        {"int8", 1 << 30, 1LL << 40, {0}, "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const qk_scheme *s = qk_scheme_by_name(bad[i].s);
        cr_assert_eq(qk_scheme_layout_of(s, bad[i].r, bad[i].c, &bad[i].o, &l, &err), QK_EINPUT, "%zu", i);
        cr_assert(strstr(err.msg, bad[i].msg), "%zu: %s", i, err.msg);
        cr_assert_eq(qk_scheme_encoded_size(s, bad[i].r, bad[i].c, &bad[i].o), 0u);
    }
    /* group:32 spelled out for mxfp4 is its own block size: accepted */
    qk_scheme_opts mx32 = {.gran = QK_GRAN_GROUP, .group = 32};
    cr_assert_eq(qk_scheme_encoded_size(qk_scheme_by_name("mxfp4"), 1, 32, &mx32), 17u);
}

Test(scaled, bit_packing)
{
    uint8_t c4[2] = {1, 2}, c6[4] = {0, 0x3F, 0, 0}, out[8], back[64];
    qk_pack_codes(c4, 2, 4, out);
    cr_assert_eq(out[0], 0x21); /* element 0 in the low nibble */
    qk_pack_codes(c6, 4, 6, out);
    cr_assert(out[0] == 0xC0 && out[1] == 0x0F && out[2] == 0x00); /* bits 6..11 */
    uint64_t s = 3;
    for (int bits = 4; bits <= 8; bits += 2) {
        uint8_t codes[64], packed[64];
        for (int i = 0; i < 64; i++)
            codes[i] = (uint8_t)(tu_rand(&s) & ((1u << bits) - 1));
        for (int n = 1; n <= 64; n++) {
            qk_pack_codes(codes, n, bits, packed);
            qk_unpack_codes(packed, n, bits, back);
            cr_assert_arr_eq(codes, back, (size_t)n);
        }
    }
}

/* ---- scale derivations ---------------------------------------------------- */

/* Decode the scales part of absmax/minmax/bnb encodings as floats. */
static float scale_at(const uint8_t *buf, const qk_scheme_layout *l, size_t k)
{
    float s;
    memcpy(&s, buf + l->scales_off + 4 * k, 4);
    return s;
}

Test(scaled, absmax_scales_and_codes)
{
    static const struct { const char *name; const char *gran; float half; } cases[] = {
        {"int8", "channel", 127.5f}, {"int4", "group:32", 7.5f}, {"int8", "tensor", 127.5f},
        {"fp8_e4m3", "tensor", 448.0f}, {"fp8_e4m3", "channel", 448.0f},
        {"fp8_e4m3", "block:128x128", 448.0f}, {"fp8_e5m2", "group:64", 57344.0f},
        {"fp6_e2m3", "group:32", 7.5f}, {"fp4_e2m1", "token", 6.0f}, {"int4", "block:16x64", 7.5f},
    };
    const int64_t R = 200, C = 320;
    float *x = malloc(R * C * sizeof(float)), *y = malloc(R * C * sizeof(float));
    fill(x, R * C, 11, 0.02f);
    x[5] = 0.9f, x[C + 7] = -1.3f; /* outliers */
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const qk_scheme *s = qk_scheme_by_name(cases[t].name);
        qk_scheme_opts o = {0};
        qk_err err = {0};
        cr_assert_eq(qk_gran_parse(cases[t].gran, &o, &err), 0);
        qk_scheme_layout l;
        cr_assert_eq(qk_scheme_layout_of(s, R, C, &o, &l, &err), 0, "%s", err.msg);
        uint8_t *buf = malloc(l.total), *codes = malloc(C);
        cr_assert_eq(qk_scheme_encode(s, x, R, C, &o, buf, &err), 0, "%s", err.msg);
        cr_assert_eq(qk_scheme_decode(s, buf, R, C, &o, y, &err), 0);
        /* every scale is amax(cell) / (range / 2), computed here independently */
        for (uint64_t gr = 0; gr < l.grid_rows; gr++)
            for (uint64_t gc = 0; gc < l.grid_cols; gc++) {
                float amax = 0;
                for (int64_t r = (int64_t)gr * l.cell_rows; r < R && r < (int64_t)(gr + 1) * l.cell_rows; r++)
                    for (int64_t c = (int64_t)gc * l.cell_cols; c < C && c < (int64_t)(gc + 1) * l.cell_cols; c++)
                        amax = fmaxf(amax, fabsf(x[r * C + c]));
                cr_assert_eq(scale_at(buf, &l, gr * l.grid_cols + gc), amax / cases[t].half, "%s %s",
                             cases[t].name, cases[t].gran);
            }
        /* every code is the nearest of x / scale (integers clamp to their range) */
        for (int64_t r = 0; r < R; r++) {
            qk_unpack_codes(buf + r * l.row_bytes, C, l.bits, codes);
            for (int64_t c = 0; c < C; c++) {
                size_t k = (size_t)((uint64_t)(r / l.cell_rows) * l.grid_cols + (uint64_t)(c / l.cell_cols));
                float sc = scale_at(buf, &l, k), v = x[r * C + c] / sc;
                uint8_t want = nearest_code(s->elem, v);
                cr_assert_eq(codes[c], want, "%s %s [%lld,%lld] v=%a", cases[t].name, cases[t].gran,
                             (long long)r, (long long)c, (double)v);
                cr_assert_eq(y[r * C + c], qk_elem_decode(s->elem, want) * sc);
            }
        }
        free(buf), free(codes);
    }
    free(x), free(y);
}

Test(scaled, minmax_zero_points)
{
    const int64_t R = 4, C = 128;
    float x[R * C], y[R * C];
    fill(x, R * C, 5, 1.0f);
    for (int i = 0; i < C; i++)
        x[2 * C + i] = fabsf(x[2 * C + i]) + 0.5f; /* an all-positive row: lo = 0 */
    const qk_scheme *s = qk_scheme_by_name("uint4");
    qk_scheme_opts o = {.gran = QK_GRAN_GROUP, .group = 64};
    qk_scheme_layout l;
    qk_err err = {0};
    cr_assert_eq(qk_scheme_layout_of(s, R, C, &o, &l, &err), 0);
    uint8_t buf[512], codes[C];
    cr_assert_eq(qk_scheme_encode(s, x, R, C, &o, buf, &err), 0);
    cr_assert_eq(qk_scheme_decode(s, buf, R, C, &o, y, &err), 0);
    for (int64_t r = 0; r < R; r++) {
        qk_unpack_codes(buf + r * l.row_bytes, C, 4, codes);
        for (int g = 0; g < 2; g++) {
            size_t k = (size_t)(r * 2 + g);
            float lo = 0, hi = 0;
            for (int j = 0; j < 64; j++)
                lo = fminf(lo, x[r * C + g * 64 + j]), hi = fmaxf(hi, x[r * C + g * 64 + j]);
            float sc = scale_at(buf, &l, k);
            cr_assert_eq(sc, (hi - lo) / 15.0f);
            int zu = buf[l.zeros_off + k], z = zu - 8;
            cr_assert_eq(z, (int)fminf(7, fmaxf(-8, -8.0f - rintf(lo / sc))));
            if (r == 2)
                cr_assert_eq(zu, 0);
            for (int j = 0; j < 64; j++) {
                float xv = x[r * C + g * 64 + j];
                int q = (int)rintf(fminf(7, fmaxf(-8, xv / sc + (float)z)));
                cr_assert_eq(codes[g * 64 + j], q + 8);
                cr_assert_eq(y[r * C + g * 64 + j], (float)(q - z) * sc);
                cr_assert_leq(fabsf(y[r * C + g * 64 + j] - xv), sc * 0.5f * 1.0001f);
            }
        }
    }
}

Test(scaled, bf16_scales)
{
    const int64_t R = 3, C = 64;
    float x[R * C], y[R * C];
    fill(x, R * C, 9, 3.0f);
    const qk_scheme *s = qk_scheme_by_name("int8");
    qk_scheme_opts o = {.scale_type = QK_BF16};
    uint8_t buf[256];
    qk_err err = {0};
    cr_assert_eq(qk_scheme_encoded_size(s, R, C, &o), (size_t)(R * C + R * 2));
    cr_assert_eq(qk_scheme_encode(s, x, R, C, &o, buf, &err), 0);
    cr_assert_eq(qk_scheme_decode(s, buf, R, C, &o, y, &err), 0);
    for (int64_t r = 0; r < R; r++) {
        float amax = 0;
        for (int64_t c = 0; c < C; c++)
            amax = fmaxf(amax, fabsf(x[r * C + c]));
        uint16_t h;
        memcpy(&h, buf + R * C + 2 * r, 2);
        float sc = qk_bf16_to_f32(h);
        cr_assert_eq(h, qk_f32_to_bf16(amax / 127.5f));
        for (int64_t c = 0; c < C; c++)
            cr_assert_eq(y[r * C + c], (float)(int8_t)buf[r * C + c] * sc);
    }
}

Test(scaled, bnb_blockwise)
{
    const int64_t R = 2, C = 128;
    float x[R * C], y[R * C];
    fill(x, R * C, 21, 0.1f);
    for (int j = 64; j < 128; j++)
        x[j] = 0.0f; /* an all-zero block */
    for (int b = 0; b < 2; b++) {
        const qk_scheme *s = qk_scheme_by_name(b ? "bnb_fp4" : "nf4");
        uint8_t buf[256], codes[C];
        qk_err err = {0};
        cr_assert_eq(qk_scheme_encode(s, x, R, C, NULL, buf, &err), 0);
        cr_assert_eq(qk_scheme_decode(s, buf, R, C, NULL, y, &err), 0);
        for (int64_t r = 0; r < R; r++) {
            qk_unpack_codes(buf + r * 64, C, 4, codes);
            for (int g = 0; g < 2; g++) {
                float amax = 0, sc;
                for (int j = 0; j < 64; j++)
                    amax = fmaxf(amax, fabsf(x[r * C + g * 64 + j]));
                memcpy(&sc, buf + R * 64 + 4 * (r * 2 + g), 4);
                cr_assert_eq(sc, amax);
                for (int j = 0; j < 64; j++) {
                    float xv = x[r * C + g * 64 + j];
                    cr_assert_eq(codes[g * 64 + j], qk_elem_encode(s->elem, xv * (1.0f / amax), 0));
                    cr_assert_eq(y[r * C + g * 64 + j], qk_elem_decode(s->elem, codes[g * 64 + j]) * amax);
                }
            }
        }
        for (int j = 64; j < 128; j++)
            cr_assert_eq(y[j], 0.0f);
    }
}

/* ---- MX (OCP MX v1.0 sec. 6.3) ------------------------------------------- */

Test(scaled, mx_scale_derivation)
{
    static const char *const names[] = {"mxfp4", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3",
                                        "mxfp8_e5m2", "mxint8"};
    static const int emax[] = {2, 2, 4, 8, 15, 0};
    uint64_t seed = 77;
    for (int t = 0; t < 6; t++) {
        const qk_scheme *s = qk_scheme_by_name(names[t]);
        for (int it = 0; it < 400; it++) {
            float x[32], y[32];
            float mag = ldexpf(1.0f, (int)(tu_rand(&seed) % 80) - 40);
            for (int i = 0; i < 32; i++)
                x[i] = tu_gauss(&seed) * mag;
            uint8_t sb, codes[32];
            qk_mx_encode_block(s->elem, x, 32, &sb, codes);
            float amax = 0;
            for (int i = 0; i < 32; i++)
                amax = fmaxf(amax, fabsf(x[i]));
            int want = (int)floor(log2((double)amax)) - emax[t];
            cr_assert_eq((int)sb - 127, want < -127 ? -127 : want, "%s", names[t]);
            qk_mx_decode_block(s->elem, sb, codes, 32, y);
            double X = ldexp(1.0, (int)sb - 127);
            for (int i = 0; i < 32; i++) {
                double v = (double)x[i] / X;
                if (s->elem == QK_ELEM_INT8) { /* two's complement * 2^-6, clamped to +-127 */
                    double q = nearbyint(v * 64.0);
                    q = q > 127 ? 127 : q < -127 ? -127 : q;
                    cr_assert_eq((int8_t)codes[i], (int)q);
                    cr_assert_eq((double)y[i], q / 64.0 * X);
                } else {
                    cr_assert_eq(codes[i], nearest_code(s->elem, v), "%s v=%a", names[t], v);
                    cr_assert_eq((double)y[i], (double)qk_elem_decode(s->elem, codes[i]) * X);
                }
            }
        }
        /* zero block: shared exponent clamps to -127; NaN/Inf: the scale is NaN */
        float z[32] = {0}, y[32];
        uint8_t sb, codes[32];
        qk_mx_encode_block(s->elem, z, 32, &sb, codes);
        cr_assert_eq(sb, 0);
        z[3] = NAN;
        qk_mx_encode_block(s->elem, z, 32, &sb, codes);
        cr_assert_eq(sb, 0xFF);
        qk_mx_decode_block(s->elem, sb, codes, 32, y);
        for (int i = 0; i < 32; i++)
            cr_assert(isnan(y[i]));
        z[3] = -INFINITY;
        cr_assert_eq(qk_mx_scale(s->elem, z, 32), 0xFF);
        z[3] = 0x1p-140f; /* floor(log2) - emax below -127: clamped */
        cr_assert_eq(qk_mx_scale(s->elem, z, 32), 0);
        z[3] = 3.0e38f;
        cr_assert_eq(qk_mx_scale(s->elem, z, 32), 127 + 127 - emax[t]);
    }
}

/* GGUF MXFP4 (ggml: e, qs[16] with element j in the low nibble of qs[j] and
 * j+16 in the high nibble) is the MX MXFP4 mathematics: the same scale byte
 * (floor(log2 amax) - 2 + 127) and the same codes except where V/X is exactly
 * midway between two E2M1 values (ggml keeps the first of equals, MX rounds
 * to even), and the same decoded values for every scale byte but 0xFF. */
Test(scaled, mxfp4_equals_gguf_mxfp4)
{
    const qk_type_traits *gg = qk_type_get(QK_MXFP4);
    const qk_scheme *mx = qk_scheme_by_name("mxfp4");
    uint64_t seed = 1234;
    int ties = 0;
    for (int it = 0; it < 20000; it++) {
        float x[32];
        float mag = ldexpf(1.0f, (int)(tu_rand(&seed) % 60) - 30);
        for (int i = 0; i < 32; i++)
            x[i] = tu_gauss(&seed) * mag;
        if (it % 10 == 0) { /* plant exact midpoints below amax (X unchanged) */
            float X = qk_e8m0_to_f32(qk_mx_scale(QK_ELEM_FP4_E2M1, x, 32));
            static const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f};
            for (int i = 0; i < 4; i++)
                x[tu_rand(&seed) % 32] = mids[tu_rand(&seed) % 6] * X * ((i & 1) ? -1.0f : 1.0f);
        }
        uint8_t ours[17], ggml[17], codes[32];
        qk_err err = {0};
        cr_assert_eq(qk_scheme_encode(mx, x, 1, 32, NULL, ours, &err), 0);
        gg->quantize(x, ggml, 1, 32, NULL);
        cr_assert_eq(ours[16], ggml[0], "scale byte");
        qk_unpack_codes(ours, 32, 4, codes);
        float X = qk_e8m0_to_f32(ours[16]);
        for (int j = 0; j < 32; j++) {
            uint8_t g = j < 16 ? ggml[1 + j] & 15 : ggml[1 + j - 16] >> 4;
            if (g == codes[j] || (g | codes[j]) == 8) /* +0 and -0: ggml prefers +0 */
                continue;
            /* a tie: |V/X| is a midpoint and ours is the even code */
            double v = fabs((double)x[j] / X);
            bool mid = v == 0.25 || v == 0.75 || v == 1.25 || v == 1.75 || v == 2.5 || v == 3.5 || v == 5.0;
            cr_assert(mid && codes[j] % 2 == 0, "block %d elem %d: v=%a ours %d ggml %d", it, j, v,
                      codes[j], g);
            ties++;
        }
        /* same codes in ggml's layout decode to our values */
        uint8_t blk[17];
        blk[0] = ours[16];
        for (int j = 0; j < 16; j++)
            blk[1 + j] = (uint8_t)(codes[j] | codes[j + 16] << 4);
        float yg[32], yo[32];
        gg->to_float(blk, yg, 32);
        cr_assert_eq(qk_scheme_decode(mx, ours, 1, 32, NULL, yo, &err), 0);
        for (int j = 0; j < 32; j++)
            cr_assert_eq(yg[j], yo[j]);
    }
    cr_assert_gt(ties, 0); /* the planted midpoints did differ */
    for (int e = 0; e < 255; e++)
        for (int c = 0; c < 16; c++)
            cr_assert_eq((float)qk_e2m1_x2[c] * qk_e8m0_to_f32_half((uint8_t)e),
                         ldexpf(qk_elem_decode(QK_ELEM_FP4_E2M1, (uint8_t)c), e - 127));
}

/* ---- NVFP4 ------------------------------------------------------------------ */

Test(scaled, nvfp4_modelopt_derivation)
{
    const int64_t R = 8, C = 64;
    float x[R * C], y[R * C];
    fill(x, R * C, 31, 0.05f);
    x[77] = -2.5f; /* the tensor amax */
    for (int j = 0; j < 16; j++)
        x[3 * C + 16 + j] = 0.0f; /* an all-zero block */
    const qk_scheme *s = qk_scheme_by_name("nvfp4");
    uint8_t buf[512], codes[C];
    qk_err err = {0};
    cr_assert_eq(qk_scheme_encode(s, x, R, C, NULL, buf, &err), 0);
    cr_assert_eq(qk_scheme_decode(s, buf, R, C, NULL, y, &err), 0);
    float g;
    memcpy(&g, buf + R * 32 + R * 4, 4);
    cr_assert_eq(g, 2.5f / 2688.0f); /* weight_scale_2 = amax / (6 * 448) */
    for (int64_t r = 0; r < R; r++) {
        qk_unpack_codes(buf + r * 32, C, 4, codes);
        for (int b = 0; b < 4; b++) {
            float amax = 0;
            for (int j = 0; j < 16; j++)
                amax = fmaxf(amax, fabsf(x[r * C + b * 16 + j]));
            uint8_t sb = buf[R * 32 + r * 4 + b];
            float want = amax / (6.0f * g);
            cr_assert_eq(sb, amax == 0 ? 0x38 : nearest_code(QK_ELEM_FP8_E4M3, want)); /* 0 -> 1.0 */
            float d = qk_elem_decode(QK_ELEM_FP8_E4M3, sb) * g;
            for (int j = 0; j < 16; j++) {
                float xv = x[r * C + b * 16 + j];
                cr_assert_eq(codes[b * 16 + j], nearest_code(QK_ELEM_FP4_E2M1, xv / d));
                cr_assert_eq(y[r * C + b * 16 + j], qk_elem_decode(QK_ELEM_FP4_E2M1, codes[b * 16 + j]) * d);
            }
        }
    }
    cr_assert_eq(buf[R * 32 + 1 * 4 + 0], 0x7E); /* the block with the tensor amax: scale 448 */
    /* compressed-tensors: g = 2688 / amax, zero block scale 0.125, decode s / g */
    qk_scheme_opts ct = {.nvfp4_ct = true};
    cr_assert_eq(qk_scheme_encode(s, x, R, C, &ct, buf, &err), 0);
    memcpy(&g, buf + R * 32 + R * 4, 4);
    cr_assert_eq(g, 2688.0f / 2.5f);
    cr_assert_eq(buf[R * 32 + 3 * 4 + 1], 0x20); /* 0.125 */
    cr_assert_eq(qk_scheme_decode(s, buf, R, C, &ct, y, &err), 0);
    for (int64_t r = 0; r < R; r++)
        for (int b = 0; b < 4; b++) {
            float amax = 0;
            for (int j = 0; j < 16; j++)
                amax = fmaxf(amax, fabsf(x[r * C + b * 16 + j]));
            uint8_t sb = buf[R * 32 + r * 4 + b];
            if (amax > 0)
                cr_assert_eq(sb, nearest_code(QK_ELEM_FP8_E4M3, g * (amax / 6.0f)));
            float d = qk_elem_decode(QK_ELEM_FP8_E4M3, sb) / g;
            for (int j = 0; j < 16; j++)
                cr_assert_leq(fabsf(y[r * C + b * 16 + j] - x[r * C + b * 16 + j]), 1.0001f * d);
        }
    /* a given global scale is used as is */
    qk_scheme_opts fixed = {.has_global_scale = true, .global_scale = 0.5f};
    cr_assert_eq(qk_scheme_encode(s, x, R, C, &fixed, buf, &err), 0);
    memcpy(&g, buf + R * 32 + R * 4, 4);
    cr_assert_eq(g, 0.5f);
}

/* GGUF NVFP4 (ggml: 64 elements = 4 sub-blocks of 16, d[4] UE4M3 then
 * qs[32], no global scale) is NVFP4 with global scale 1: the UE4M3 byte is an
 * E4M3 byte (ggml decodes half of it), the scale is e4m3(amax / 6), and the
 * codes are the nearest E2M1 of x / scale.  ggml rounds the scale half up
 * and keeps the first of equal distances; ours rounds both half to even, so
 * they may differ only at exact ties, which the test checks. */
Test(scaled, nvfp4_equals_gguf_nvfp4_sub_blocks)
{
    for (int b = 0; b < 0x7F; b++)
        cr_assert_eq(2.0f * qk_ue4m3_to_f32_half((uint8_t)b), qk_elem_decode(QK_ELEM_FP8_E4M3, (uint8_t)b));
    /* scale encode: equal except exact e4m3 midpoints (ggml: half up) and
     * two quirks of ggml's qk_f32_to_ue4m3 (ggml_fp32_to_ue4m3): values that
     * round to 256 or more give 0x7E = 448 (its exponent test is >= 15), and
     * a subnormal rounding up to 2^-6 stays 0x07 (it clamps sub at 7).  Those
     * are checked exactly. */
    uint64_t seed = 99;
    for (int i = 0; i < 200000; i++) {
        float v = (float)(tu_uniform(&seed) * 500.0) * (i % 2 ? 1.0f : 1e-3f);
        uint8_t a = qk_f32_to_ue4m3(v), o = qk_elem_encode(QK_ELEM_FP8_E4M3, v, QK_ENC_SAT);
        if (a == 0x07 && o == 0x08) /* ggml clamps a subnormal rounding up to 2^-6 at 7 */
            continue;
        if (a != o && o >= 0x78) {
            cr_assert_eq(a, 0x7E);
            continue;
        }
        if (a != o) {
            double lo = qk_elem_decode(QK_ELEM_FP8_E4M3, (uint8_t)(a < o ? a : o));
            double hi = qk_elem_decode(QK_ELEM_FP8_E4M3, (uint8_t)(a < o ? o : a));
            cr_assert_eq((double)v, (lo + hi) / 2, "v=%a ggml %02x ours %02x", (double)v, a, o);
        }
    }
    const qk_type_traits *gg = qk_type_get(QK_NVFP4);
    const qk_scheme *s = qk_scheme_by_name("nvfp4");
    qk_scheme_opts one = {.has_global_scale = true, .global_scale = 1.0f};
    int diff = 0, n = 0;
    for (int it = 0; it < 5000; it++) {
        float x[64];
        fill(x, 64, seed + (uint64_t)it, ldexpf(1.0f, it % 16 - 8));
        uint8_t ours[32 + 4 + 4], ggml[36], codes[64];
        qk_err err = {0};
        cr_assert_eq(qk_scheme_encode(s, x, 1, 64, &one, ours, &err), 0);
        gg->quantize(x, ggml, 1, 64, NULL);
        qk_unpack_codes(ours, 64, 4, codes);
        for (int sb = 0; sb < 4; sb++) {
            float amax = 0;
            for (int j = 0; j < 16; j++)
                amax = fmaxf(amax, fabsf(x[sb * 16 + j]));
            if (ggml[sb] != ours[32 + sb]) { /* only at an exact tie of amax / 6, or the quirks */
                if (ggml[sb] == 0x07 && ours[32 + sb] == 0x08)
                    continue;
                float v = amax / 6.0f;
                if (ours[32 + sb] >= 0x78) { /* ggml: 448 from 256 up */
                    cr_assert_eq(ggml[sb], 0x7E);
                    continue;
                }
                double lo = qk_elem_decode(QK_ELEM_FP8_E4M3, ours[32 + sb]);
                double hi = qk_elem_decode(QK_ELEM_FP8_E4M3, ggml[sb]);
                cr_assert_eq((double)v, (lo + hi) / 2);
                continue;
            }
            float d = qk_elem_decode(QK_ELEM_FP8_E4M3, ours[32 + sb]);
            if (d == 0.0f) /* scale 0: every code decodes to 0 in both */
                continue;
            for (int j = 0; j < 16; j++, n++) {
                const uint8_t *qs = ggml + 4 + sb * 8;
                uint8_t g = j < 8 ? qs[j] & 15 : qs[j - 8] >> 4;
                if (g == codes[sb * 16 + j] || (g | codes[sb * 16 + j]) == 8)
                    continue;
                /* only where x / d sits on (within float rounding of) an E2M1 midpoint */
                double v = fabs((double)x[sb * 16 + j] / d), m = 0;
                static const double mids[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
                for (int k = 0; k < 7; k++)
                    if (fabs(v - mids[k]) < fabs(v - m))
                        m = mids[k];
                cr_assert_leq(fabs(v - m), m * 0x1p-22, "x/d=%a ours %d ggml %d", v, codes[sb * 16 + j], g);
                diff++;
            }
        }
        /* and the shared codes decode alike: ggml's value is half-scale times doubled codes */
        for (int j = 0; j < 64; j++) {
            float dg = 2.0f * qk_ue4m3_to_f32_half(ours[32 + j / 16]);
            cr_assert_eq(0.5f * (float)qk_e2m1_x2[codes[j]] * dg,
                         qk_elem_decode(QK_ELEM_FP4_E2M1, codes[j]) * qk_nvfp4_dequant_scale(ours[32 + j / 16], 1.0f, false));
        }
    }
    cr_assert_lt(diff, n / 1000 + 1);
}

/* ---- bare codes and round trips ------------------------------------------- */

Test(scaled, bare_codes_are_the_element_codecs)
{
    float x[6] = {1.0f, -500.0f, 1e-9f, INFINITY, -0.0f, 3.3f};
    uint8_t out[6];
    float y[6];
    qk_err err = {0};
    static const char *const names[] = {"fp8_e4m3", "fp8_e5m2", "e8m0", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2"};
    for (int t = 0; t < 6; t++) {
        const qk_scheme *s = qk_scheme_by_name(names[t]);
        for (int m = 0; m < 2; m++) {
            qk_scheme_opts o = {.nonsat = m == 1};
            cr_assert_eq(qk_scheme_encode(s, x, 2, 3, &o, out, &err), 0);
            cr_assert_eq(qk_scheme_decode(s, out, 2, 3, &o, y, &err), 0);
            for (int i = 0; i < 6; i++) {
                cr_assert_eq(out[i], qk_elem_encode(s->elem, x[i], m));
                float d = qk_elem_decode(s->elem, out[i]);
                cr_assert(y[i] == d || (isnan(y[i]) && isnan(d)));
            }
        }
    }
}

Test(scaled, round_trip_every_scheme)
{
    const int64_t R = 6, C = 256;
    float x[R * C], y[R * C];
    fill(x, R * C, 4242, 0.3f);
    for (const qk_scheme *s = qk_scheme_next(NULL); s; s = qk_scheme_next(s)) {
        qk_err err = {0};
        if (s->rule == QK_RULE_NONE) /* e8m0: positive values only */
            for (int64_t i = 0; i < R * C; i++)
                x[i] = fabsf(x[i]);
        size_t n = qk_scheme_encoded_size(s, R, C, NULL);
        cr_assert_gt(n, 0u, "%s", s->name);
        cr_assert_eq(qk_scheme_qdq(s, x, R, C, NULL, y, &err), 0, "%s: %s", s->name, err.msg);
        double se = 0, sx = 0;
        for (int64_t i = 0; i < R * C; i++) {
            cr_assert(isfinite(y[i]), "%s", s->name);
            se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
            sx += (double)x[i] * x[i];
        }
        /* relative RMS error below what the code width allows (bare codes have
         * no scale: small values vanish) */
        double lim = s->gran == QK_GRAN_NONE ? 0.8
                     : qk_elem_get(s->elem)->bits == 4                                   ? 0.2
                                                                                         : 0.08;
        cr_assert_lt(sqrt(se / sx), lim, "%s: rel rms %g", s->name, sqrt(se / sx));
    }
}
