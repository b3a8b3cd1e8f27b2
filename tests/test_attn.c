/* test_attn.c - the attention inner loops (kernels/attn.h): every SIMD
 * level gives the scalar reference's bits (memcmp) for scores (one query
 * and several), fused value accumulation, scaling and F16 rows, head sizes with and
 * without a tail of n % 8 elements; and the scalar score follows the
 * documented order (checked against a literal evaluation of it). */
#include <math.h>
#include <string.h>

#include "attn.h"
#include "cpu.h"
#include "half.h"
#include "testutil.h" /* criterion.h first */

#define MAXN 160

static void fill(uint64_t *s, int n, float *x, uint16_t *h)
{
    for (int i = 0; i < n; i++) {
        x[i] = tu_gauss(s) * 3.0f;
        h[i] = qk_f32_to_f16(tu_gauss(s));
    }
}

Test(attn, score_order_as_documented)
{
    const qk_attn_kernels *k = qk_attn_kernels_at(QK_CPU_SCALAR);
    uint64_t s = 5;
    float q[MAXN], kv[MAXN];
    uint16_t h[MAXN];
    fill(&s, 72, q, h);
    fill(&s, 72, kv, h);
    float l[8] = {0};
    for (int i = 0; i < 64; i++)
        l[i % 8] = fmaf(q[i], kv[i], l[i % 8]);
    float want = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (int i = 64; i < 69; i++)
        want = fmaf(q[i], kv[i], want);
    const float got = k->score_f32(q, kv, 69);
    cr_assert(!memcmp(&got, &want, sizeof got), "score %.9g, documented order %.9g", got, want);
}

Test(attn, levels_equal_scalar)
{
    const qk_attn_kernels *ref = qk_attn_kernels_at(QK_CPU_SCALAR);
    const int sizes[] = {8, 13, 64, 72, 128, 160};
    uint64_t s = 11;
    int checked = 0;
    for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
        const qk_attn_kernels *k = qk_attn_kernels_at(level);
        cr_assert(k);
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            const int n = sizes[si];
            for (int rep = 0; rep < 50; rep++) {
                float q[MAXN], kf[MAXN], vf[MAXN], a[MAXN], b[MAXN];
                uint16_t kh[MAXN], vh[MAXN];
                fill(&s, n, q, kh);
                fill(&s, n, kf, vh);
                fill(&s, n, vf, vh);
                float r1 = ref->score_f32(q, kf, n), r2 = k->score_f32(q, kf, n);
                cr_assert(!memcmp(&r1, &r2, sizeof r1), "score_f32 n %d level %d", n, level);
                const float w = tu_gauss(&s);
                memcpy(a, q, sizeof(float) * (size_t)n);
                memcpy(b, q, sizeof(float) * (size_t)n);
                ref->axpy_f32(a, w, vf, n), k->axpy_f32(b, w, vf, n);
                cr_assert(!memcmp(a, b, sizeof(float) * (size_t)n), "axpy_f32 n %d", n);
                ref->scale(a, w, n), k->scale(b, w, n);
                cr_assert(!memcmp(a, b, sizeof(float) * (size_t)n), "scale n %d", n);
                /* several queries against one key: each equals its own score */
                const float *qs[7] = {q, kf, vf, a, b, q, kf};
                float o[7];
                k->score_f32_n(qs, 7, vf, n, o);
                for (int j = 0; j < 7; j++) {
                    r1 = ref->score_f32(qs[j], vf, n);
                    cr_assert(!memcmp(&r1, &o[j], sizeof r1), "score_f32_n n %d query %d", n, j);
                }
                ref->f16_row(kh, a, n), k->f16_row(kh, b, n);
                cr_assert(!memcmp(a, b, sizeof(float) * (size_t)n), "f16_row n %d", n);
                checked++;
            }
        }
    }
    cr_log_info("%d attention kernel cases identical to scalar", checked);
}
