/* FP8 W8A8 as codes times codes (kernels/wq_f8.c, QK_A_F8B): the encoder
 * against QK_A_FP8's codes and scale, the products against THE FP8 ORDER
 * recomputed here from the codes, and every SIMD level (memcmp) over several
 * tile shapes, packed and not; the instruction the AVX-512 level stands on
 * (vdpbf16ps: odd element first, each sum rounded) where the CPU has it. */
#include <math.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/elements.h"
#include "kernels/fdot.h"
#include "kernels/half.h"
#include "kernels/types.h"
#include "kernels/wq.h"
#include "tests/testutil.h"

#ifdef __x86_64__
#include <immintrin.h>
#endif

static float bf16v(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return qk_bf16_to_f32(h);
}

/* Activations with the cases the encoder meets: outliers, zeros, a NaN. */
static float *acts(int64_t n, int nt, uint64_t *rng)
{
    float *x = malloc(sizeof(float) * (size_t)(n * nt));
    cr_assert(x);
    for (int64_t i = 0; i < n * nt; i++)
        x[i] = i % 41 == 3 ? 0.0f : tu_gauss(rng) * (i % 37 == 0 ? 30.0f : 1.0f);
    x[5] = NAN;
    return x;
}

/* THE FP8 ORDER over weight codes q and an encoded activation row; grouped
 * (QK_A_F8G): per 128 columns, into the running lanes with the two scales. */
static float rule(const qk_wq *w, const uint8_t *q, const uint8_t *row, int64_t n, int64_t r)
{
    const bool grp = w->act == QK_A_F8G;
    const int64_t G = grp ? 128 : n;
    qk_a_i8_head h;
    memcpy(&h, row, sizeof h);
    const uint8_t *a = row + QK_A_I8_HEAD;
    float run[16] = {0}, lane[16] = {0};
    for (int64_t g0 = 0; g0 < n; g0 += G) {
        memset(lane, 0, sizeof lane);
        for (int64_t k = g0; k < g0 + G; k += 2) {
            const int l = (int)(k % 32) / 2;
            lane[l] = fmaf(qk_fp8_e4m3_to_f32(q[k + 1]), bf16v(a + 2 * (k + 1)), lane[l]);
            lane[l] = fmaf(qk_fp8_e4m3_to_f32(q[k]), bf16v(a + 2 * k), lane[l]);
        }
        if (grp) {
            float ag;
            memcpy(&ag, a + 2 * n + 4 * (g0 / 128), 4);
            const float f = ag * qk_wq_scale(w, r, g0);
            for (int l = 0; l < 16; l++)
                run[l] = fmaf(lane[l], f, run[l]);
        }
    }
    const float *s = grp ? run : lane;
    float t[8];
    for (int l = 0; l < 8; l++)
        t[l] = s[l] + s[l + 8];
    const float sum = ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
    return grp ? sum : h.scale * (qk_wq_scale(w, r, 0) * sum);
}

/* Every level's encoder gives the scalar bytes; the codes and scale are QK_A_FP8's. */
static void check_encoder(const qk_wq *w, const float *x, int64_t n)
{
    const int act = w->act;
    const size_t ys = qk_row_size(act, n);
    uint8_t *want = malloc(ys), *got = malloc(ys);
    float *fl = malloc(sizeof(float) * (size_t)n);
    cr_assert(want && got && fl);
    qk_kernels_at(act, QK_CPU_SCALAR)->wq_act(w, x, want, n);
    qk_wq wf = *w;
    wf.act = QK_A_FP8;
    qk_kernels_at(QK_A_FP8, QK_CPU_SCALAR)->wq_act(&wf, x, fl, n);
    qk_a_i8_head h;
    memcpy(&h, want, sizeof h);
    for (int64_t i = 0; i < n; i++) {
        float s = h.scale;
        if (act == QK_A_F8G)
            memcpy(&s, want + QK_A_I8_HEAD + 2 * n + 4 * (i / 128), 4);
        const float v = bf16v(want + QK_A_I8_HEAD + 2 * i) * s;
        cr_assert(memcmp(&v, &fl[i], 4) == 0, "element %lld: code value x scale %a, QK_A_FP8 has %a", (long long)i,
                  (double)v, (double)fl[i]);
    }
    for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
        memset(got, 0x5A, ys);
        qk_kernels_at(act, level)->wq_act(w, x, got, n);
        cr_assert(memcmp(got, want, ys) == 0, "%s encoder differs", qk_cpu_level_name(level));
    }
    free(want), free(got), free(fl);
}

static void check_tiles(const qk_wq *w, const qk_kernels *k, const float *want, const uint8_t *y, size_t ys, int T,
                        const char *what)
{
    const int R = (int)w->rows;
    static const int few[][2] = {{48, 11}, {8, 1}, {16, 1}, {5, 2}, {3, 1}, {12, 4}, {24, 8}};
    /* more than 12 tokens: whole row groups decoded a span at a time (prompt batches), cut ones as few */
    static const int many[][2] = {{48, 40}, {16, 13}, {5, 40}, {12, 20}};
    const int(*shapes)[2] = T > 12 ? many : few;
    const size_t nshapes = T > 12 ? sizeof many / sizeof many[0] : sizeof few / sizeof few[0];
    float *got = malloc(sizeof(float) * (size_t)(R * T));
    cr_assert(got);
    for (size_t s = 0; s < nshapes; s++) {
        memset(got, 0, sizeof(float) * (size_t)(R * T));
        for (int r0 = 0; r0 < R; r0 += shapes[s][0])
            for (int t0 = 0; t0 < T; t0 += shapes[s][1]) {
                const int mr = R - r0 < shapes[s][0] ? R - r0 : shapes[s][0];
                const int mt = T - t0 < shapes[s][1] ? T - t0 : shapes[s][1];
                k->wq_tile(w, r0, mr, y + (size_t)t0 * ys, ys, mt, got + t0 * R + r0, (size_t)R);
            }
        for (int i = 0; i < R * T; i++)
            cr_assert(memcmp(&got[i], &want[i], 4) == 0, "%s, tiles %dx%d: (%d, %d) = %a, want %a", what, shapes[s][0],
                      shapes[s][1], i / R, i % R, (double)got[i], (double)want[i]);
    }
    free(got);
}

/* T > 12: the prompt batches, at the packing's level only (the other
 * levels' tiles take no path of their own for them). */
static void fp8_case(int64_t C, int stype, bool per_tensor, bool astatic, bool block, int *packed, const int T)
{
    enum { R = 48, TMAX = 40 };
    uint64_t rng = 0xF8B0ull + (uint64_t)C * 7 + (uint64_t)astatic;
    uint8_t *q = malloc((size_t)(R * C));
    uint8_t sc[R * 4 * 8];
    cr_assert(q);
    for (int64_t i = 0; i < R * C; i++) {
        uint8_t c = (uint8_t)(tu_rand(&rng) >> 56);
        if ((c & 0x7F) == 0x7F) /* no NaN codes: the reference's NaN and the instruction's may differ in bits */
            c = 0x80;
        q[i] = i % 53 == 0 ? (uint8_t)(i & 0x87) : c; /* subnormals, zeros, -0 */
    }
    const int64_t nsc = block ? R * (C / 128) : R; /* block: 16 x 128 blocks (rows 16 at a time) */
    for (int64_t i = 0; i < nsc; i++) {
        const float s = 0.001f * (float)(1 + i % 7);
        if (stype == QK_F32)
            memcpy(sc + 4 * i, &s, 4);
        else {
            const uint16_t b = qk_f32_to_bf16(s);
            memcpy(sc + 2 * i, &b, 2);
        }
    }
    qk_wq w = {.type = QK_W_FP8, .elem = QK_ELEM_FP8_E4M3, .act = block ? QK_A_F8G : QK_A_F8B, .rows = R, .cols = C,
               .q = q, .q_rs = C, .g = 1.0f, .a_static = astatic && !block, .a_scale = 0.04f, .a_group = block ? 128 : 0,
               .s = {.p = sc, .type = stype, .rdiv = block ? 16 : per_tensor ? R : 1, .cdiv = block ? 128 : C,
                     .rs = block ? C / 128 : 1, .cs = 1}};
    cr_assert(block ? qk_wq_f8g_takes(&w) : qk_wq_f8b_takes(&w));
    float *x = acts(C, T, &rng);
    check_encoder(&w, x, C);
    const size_t ys = qk_row_size(w.act, C);
    uint8_t *y = malloc(ys * T);
    float want[R * TMAX];
    cr_assert(y);
    for (int t = 0; t < T; t++)
        qk_kernels_at(w.act, QK_CPU_SCALAR)->wq_act(&w, x + t * C, y + (size_t)t * ys, C);
    for (int t = 0; t < T; t++)
        for (int r = 0; r < R; r++)
            want[t * R + r] = rule(&w, q + r * C, y + (size_t)t * ys, C, r);
    char what[96];
    for (int level = 0; level <= (int)qk_cpu_supported(); level++) {
        const qk_kernels *k = qk_kernels_at(QK_W_FP8, level);
        snprintf(what, sizeof what, "C %lld %s", (long long)C, qk_cpu_level_name(level));
        if (T <= 12)
            check_tiles(&w, k, want, y, ys, T, what);
        const size_t bytes = k->wq_pack ? k->wq_pack(&w, NULL, 0, 0) : 0;
        if (!bytes)
            continue;
        uint8_t *pk = malloc(bytes);
        cr_assert(pk);
        k->wq_pack(&w, pk, 0, 2); /* in pieces, as the loader's threads build it */
        k->wq_pack(&w, pk, 2, R / 8);
        qk_wq wp = w;
        wp.packed = pk;
        snprintf(what, sizeof what, "C %lld %s packed", (long long)C, qk_cpu_level_name(level));
        check_tiles(&wp, k, want, y, ys, T, what);
        (*packed)++;
        free(pk);
    }
    free(q), free(x), free(y);
}

Test(wq_f8, products_every_level)
{
    int packed = 0, cases = 0;
    static const int64_t cols[] = {320, 288, 32, 1024};
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
        for (int m = 0; m < 6; m++) {
            if (m >= 4 && cols[c] % 128) /* FP8_BLOCK: 128 x 128 blocks, activations in groups of 128 */
                continue;
            fp8_case(cols[c], m & 1 ? QK_BF16 : QK_F32, m & 1, (m & 2) != 0, m >= 4, &packed, 11);
            cases++;
        }
    /* prompt batches of 40 tokens: per row, per tensor static, FP8_BLOCK; 1024 columns (two spans of the
     * prompt tile) and 2080 (three, the last 32 wide) */
    static const int64_t pcols[] = {1024, 2080};
    for (size_t c = 0; c < sizeof pcols / sizeof pcols[0]; c++)
        for (int i = 0; i < 3; i++) {
            const int m = (int[]){0, 3, 4}[i];
            if (m >= 4 && pcols[c] % 128)
                continue;
            fp8_case(pcols[c], m & 1 ? QK_BF16 : QK_F32, m & 1, (m & 2) != 0, m >= 4, &packed, 40);
            cases++;
        }
    if (qk_cpu_supported() >= QK_CPU_AVX512 && qk_cpu_has_bf16_vbmi())
        cr_assert_eq(packed, cases, "this CPU has AVX512-BF16 and VBMI, but the AVX-512 level packed %d of %d", packed,
                     cases);
    else
        tu_note("no AVX512-BF16 + VBMI here: the packed FP8 products were not run");
}

Test(wq_f8, takes)
{
    uint8_t b[4] = {0};
    qk_wq w = {.type = QK_W_FP8, .elem = QK_ELEM_FP8_E4M3, .rows = 8, .cols = 64, .q = b, .q_rs = 64,
               .s = {.p = b, .type = QK_F32, .rdiv = 1, .cdiv = 64, .rs = 1, .cs = 1}};
    cr_assert(qk_wq_f8b_takes(&w));
    w.cols = 48;
    cr_assert(!qk_wq_f8b_takes(&w), "rows of 48 take the float products");
    w.cols = 256, w.s.cdiv = 128;
    cr_assert(!qk_wq_f8b_takes(&w), "128x128 blocks take the float products");
    w.s.cdiv = 256, w.a_group = 128;
    cr_assert(!qk_wq_f8b_takes(&w), "per-group activations take the float products");
    w.a_group = 0, w.s.type = QK_E8M0;
    cr_assert(!qk_wq_f8b_takes(&w), "MXFP8 takes the float products");
    w.s.type = QK_F32, w.elem = QK_ELEM_FP8_E5M2;
    cr_assert(!qk_wq_f8b_takes(&w));
    w.elem = QK_ELEM_FP8_E4M3, w.cols = 256, w.s.cdiv = 128, w.a_group = 128;
    cr_assert(qk_wq_f8g_takes(&w), "FP8_BLOCK takes the grouped products");
    w.a_group = 64;
    cr_assert(!qk_wq_f8g_takes(&w), "groups of 64 take the float products");
    w.a_group = 128, w.cols = 192;
    cr_assert(!qk_wq_f8g_takes(&w));
}

#ifdef __x86_64__
__attribute__((target("avx512f,avx512bf16"))) static void dp(const float *acc, const uint16_t *a, const uint16_t *b,
                                                              float *o)
{
    __m512bh x, y;
    memcpy(&x, a, 64);
    memcpy(&y, b, 64);
    _mm512_storeu_ps(o, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), x, y));
}

/* The rule the AVX-512 level is built on, on the instruction itself:
 * 2^24 + 1 - 1 is 2^24 - 1 with the odd pair first and each sum rounded,
 * 2^24 with the even pair first or one rounding of the three. */
Test(wq_f8, vdpbf16ps_sums_the_odd_pair_first)
{
    if (!qk_cpu_has_bf16_vbmi()) {
        cr_skip_test("no AVX512-BF16 here: the instruction's order was not checked");
    }
    float acc[16] = {16777216.0f}, o[16];
    uint16_t a[32] = {0}, b[32] = {0};
    a[1] = b[1] = b[0] = qk_f32_to_bf16(1.0f);
    a[0] = qk_f32_to_bf16(-1.0f);
    dp(acc, a, b, o);
    cr_assert_eq(o[0], 16777215.0f, "vdpbf16ps gave %.1f", (double)o[0]);
    cr_assert_eq(o[1], 0.0f);
}
#endif
