/* test_search.c - the eight-group SIMD scale searches (kernels/x86/
 * avx2_search.c) against the scalar searches of quant_common.c: identical
 * levels and identical scale bits (memcmp) on random groups, groups with
 * importance weights, all-zero and tiny groups, ties for the largest |x|,
 * and the real shapes the encoders use.  The scalar searches themselves are
 * checked against ggml's bytes by test_golden. */
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/quant_common.h"
#include "tests/testutil.h" /* criterion.h first */
#include "kernels/x86/x86.h"

#ifdef QK_X86
/* Fill 8 groups of n: kind 0 gaussian, 1 with zero/tiny groups and ties,
 * 2 small integers (many exact ties in the rounding). */
static void fill(uint64_t *s, int kind, int n, float *x, float *w)
{
    for (int i = 0; i < 8 * n; i++) {
        x[i] = tu_gauss(s) * (float)(1 + (i / n));
        w[i] = (float)tu_uniform(s) * 3.0f;
    }
    if (kind == 1) {
        memset(x, 0, sizeof(float) * (size_t)n);            /* group 0: zero */
        for (int i = 0; i < n; i++)
            x[n + i] = 1e-17f * (float)i;                   /* group 1: below eps */
        x[2 * n + 3] = 5.0f, x[2 * n + 7] = -5.0f;          /* group 2: |x| tie */
        w[3 * n + 1] = 0.0f;                                /* group 3: a zero weight */
        for (int i = 0; i < n; i++) {
            x[4 * n + i] = -2.0f;                           /* group 4: constant < 0 */
            x[5 * n + i] = 3.0f;                            /* group 5: constant > 0 */
        }
    } else if (kind == 2) {
        for (int i = 0; i < 8 * n; i++)
            x[i] = (float)((int)(tu_rand(s) % 17) - 8) * 0.5f;
    }
}

Test(search, qx_quants_x8_equals_scalar)
{
    if (qk_cpu_supported() < QK_CPU_AVX2) {
        cr_skip_test("no AVX2 here: nothing to compare");
    }
    const int shapes[][2] = {{16, 32}, {16, 4}, {32, 8}, {16, 2}};
    uint64_t s = 42;
    int cases = 0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int n = shapes[sh][0], nmax = shapes[sh][1];
        for (int rep = 0; rep < 200; rep++) {
            float x[8 * QK_SEARCH_MAX_N], w[8 * QK_SEARCH_MAX_N];
            fill(&s, rep % 3, n, x, w);
            for (int weighted = 0; weighted < 2; weighted++) {
                const float *qw = weighted ? w : NULL;
                int8_t La[8 * QK_SEARCH_MAX_N], Lb[8 * QK_SEARCH_MAX_N];
                float sa[8], sb[8];
                for (int g = 0; g < 8; g++)
                    sa[g] = qk_make_qx_quants(n, nmax, x + g * n, La + g * n,
                                              qw ? qw + g * n : NULL);
                qk_x86_avx2_make_qx_quants_x8(n, nmax, x, Lb, qw, sb);
                cr_assert(!memcmp(sa, sb, sizeof sa), "scales differ: n %d nmax %d rep %d w %d", n,
                          nmax, rep, weighted);
                cr_assert(!memcmp(La, Lb, (size_t)(8 * n)), "levels differ: n %d nmax %d rep %d w %d",
                          n, nmax, rep, weighted);
                cases++;
            }
        }
    }
    cr_log_info("%d eight-group cases identical", cases);
}

Test(search, qkx_quants_x8_equals_scalar)
{
    if (qk_cpu_supported() < QK_CPU_AVX2) {
        cr_skip_test("no AVX2 here: nothing to compare");
    }
    /* n, nmax, rmin, rdelta, nstep, use_mad: Q4_K/Q5_K _ref, their _impl,
     * Q2_K, Q4_1/Q5_1 with an imatrix, a mad variant, no search */
    const struct {
        int n, nmax;
        float rmin, rdelta;
        int nstep;
        bool mad;
    } shapes[] = {{32, 15, -1.0f, 0.1f, 20, false}, {32, 31, -0.5f, 0.1f, 15, false},
                  {32, 15, -0.9f, 0.05f, 36, false}, {16, 3, -0.5f, 0.1f, 15, true},
                  {32, 31, -0.9f, 0.05f, 36, false}, {16, 3, -0.9f, 0.05f, 36, false},
                  {32, 15, -1.0f, 0.1f, 0, false}};
    uint64_t s = 7;
    int cases = 0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int n = shapes[sh].n, nmax = shapes[sh].nmax;
        for (int rep = 0; rep < 200; rep++) {
            float x[8 * QK_SEARCH_MAX_N], w[8 * QK_SEARCH_MAX_N];
            fill(&s, rep % 3, n, x, w);
            uint8_t La[8 * QK_SEARCH_MAX_N], Lb[8 * QK_SEARCH_MAX_N], Laux[QK_SEARCH_MAX_N];
            float sa[8], sb[8], ma[8], mb[8];
            for (int g = 0; g < 8; g++)
                sa[g] = qk_make_qkx_quants(n, nmax, x + g * n, w + g * n, La + g * n, ma + g, Laux,
                                           shapes[sh].rmin, shapes[sh].rdelta, shapes[sh].nstep,
                                           shapes[sh].mad);
            qk_x86_avx2_make_qkx_quants_x8(n, nmax, x, w, Lb, sb, mb, shapes[sh].rmin,
                                           shapes[sh].rdelta, shapes[sh].nstep, shapes[sh].mad);
            cr_assert(!memcmp(sa, sb, sizeof sa), "scales differ: shape %zu rep %d", sh, rep);
            cr_assert(!memcmp(ma, mb, sizeof ma), "mins differ: shape %zu rep %d", sh, rep);
            cr_assert(!memcmp(La, Lb, (size_t)(8 * n)), "levels differ: shape %zu rep %d", sh, rep);
            cases++;
        }
    }
    cr_log_info("%d eight-group cases identical", cases);
}
#else
Test(search, not_x86) { cr_skip_test("not x86: the searches have no SIMD version"); }
#endif
