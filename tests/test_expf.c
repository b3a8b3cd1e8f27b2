/* test_expf.c - kernels/expf.h against glibc's expf:
 * - every level's values over two sets, a stride of 251 through all 2^32
 *   float bit patterns (17.1 M values: zeros, subnormals, the overflow and
 *   underflow edges, infinities, NaNs) and every 2^-20 step of [-16, 0)
 *   (16.8 M values, where log-probabilities and log-softmax arguments
 *   lie): their FNV-1a digests must be the ones glibc 2.36's __expf_fma
 *   gave (computed on the machine of stop 35 from the C library's expf,
 *   the program in the comment of DIGEST_*), and where this process's C
 *   library is glibc >= 2.28 on a CPU with FMA and AVX2 (glibc then runs
 *   __expf_fma), each value must equal the library's own;
 * - all 2^32 floats were compared once, outside this test (45 s): no
 *   level differs from glibc there;
 * - the SIMD kernels equal the reference at every length (their tails),
 *   in place, with a nonzero sub, and with special lanes among normal ones;
 * - SwiGLU (qk_swiglu_fn) at every level equals g / (1 + qk_expf(-g)) * u. */
#include <gnu/libc-version.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/expf.h"
#include "tests/testutil.h"

/* for (u = 0; u < 2^32; u += 251) h = (h ^ bits(expf(float of u))) * FNV prime, NaN as 0x7fc00000 */
#define DIGEST_STRIDE 0x632e4aa5dfe23030ull
/* the same over x = -16 + k 2^-20, k < 16 2^20 */
#define DIGEST_DENSE 0x82f3b2bade7b6ac7ull

static uint64_t fnv(uint64_t h, float y)
{
    uint32_t o;
    memcpy(&o, &y, 4);
    if (isnan(y))
        o = 0x7fc00000u;
    return (h ^ o) * 1099511628211ull;
}

static int glibc_fma(void)
{
    int major = 0, minor = 0;
    if (sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor) != 2)
        return 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    return (major > 2 || (major == 2 && minor >= 28)) && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

enum { BLOCK = 1 << 16 };

/* The digest of a level over one set (dense: the [-16, 0) steps), and the
 * count of values that differ from the C library's expf when libc is set. */
static uint64_t digest(qk_expf_fn k, int dense, int libc, long *differ)
{
    static float x[BLOCK], y[BLOCK];
    uint64_t h = 1469598103934665603ull;
    const int64_t total = dense ? (16ll << 20) : (int64_t)(((1ull << 32) + 250) / 251);
    *differ = 0;
    for (int64_t i0 = 0; i0 < total; i0 += BLOCK) {
        const int m = (int)(total - i0 < BLOCK ? total - i0 : BLOCK);
        for (int i = 0; i < m; i++) {
            if (dense) {
                x[i] = -16.0f + (float)(i0 + i) * 0x1p-20f;
            } else {
                const uint32_t u = (uint32_t)((uint64_t)(i0 + i) * 251);
                memcpy(&x[i], &u, 4);
            }
        }
        k(x, 0.0f, y, (size_t)m);
        for (int i = 0; i < m; i++) {
            h = fnv(h, y[i]);
            if (libc) {
                const float want = expf(x[i]);
                if (memcmp(&want, &y[i], 4) && !(isnan(want) && isnan(y[i])))
                    (*differ)++;
            }
        }
    }
    return h;
}

Test(expf, every_level_gives_glibc_values, .timeout = 300)
{
    const int libc = glibc_fma();
    if (!libc)
        tu_note("the C library is not glibc's FMA expf: only the committed digests are compared");
    for (int level = 0; level <= (int)qk_cpu_supported(); level++) {
        long d1, d2;
        const uint64_t h1 = digest(qk_expf_ops_at(level)->expf, 0, libc, &d1);
        const uint64_t h2 = digest(qk_expf_ops_at(level)->expf, 1, libc, &d2);
        cr_expect(d1 == 0 && d2 == 0, "level %s: %ld and %ld values differ from the C library's expf",
                  qk_cpu_level_name(level), d1, d2);
        cr_expect(h1 == DIGEST_STRIDE, "level %s: stride digest 0x%016llx", qk_cpu_level_name(level),
                  (unsigned long long)h1);
        cr_expect(h2 == DIGEST_DENSE, "level %s: dense digest 0x%016llx", qk_cpu_level_name(level),
                  (unsigned long long)h2);
    }
}

/* Normal values with special ones mixed in: +-88 and beyond, the underflow
 * edges, infinities, NaN, subnormals, zeros. */
static void fill(float *x, int n, uint64_t *s)
{
    static const float sp[] = {88.0f, 88.5f, 0x1.62e42ep6f, 0x1.62e430p6f, 89.0f, -88.0f, -100.0f,
                               -0x1.9d1d9ep6f, -0x1.9d1da0p6f, -0x1.9fe368p6f, -0x1.9fe36ap6f, -104.0f,
                               INFINITY, -INFINITY, NAN, 0x1p-149f, -0x1p-140f, 0.0f, -0.0f, 1e30f};
    for (int i = 0; i < n; i++)
        x[i] = tu_rand(s) % 13 == 0 ? sp[tu_rand(s) % (sizeof sp / sizeof *sp)] : tu_gauss(s) * 8.0f;
}

static int same(const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) && !(isnan(a[i]) && isnan(b[i])))
            return 0;
    return 1;
}

Test(expf, kernels_equal_the_reference_at_every_length)
{
    uint64_t s = 77;
    float x[300], want[300], got[300];
    for (int n = 0; n <= 300; n += n < 40 ? 1 : 37) {
        fill(x, n, &s);
        const float sub = n % 2 ? 3.25f : 0.0f;
        for (int i = 0; i < n; i++)
            want[i] = qk_expf(x[i] - sub);
        for (int level = 0; level <= (int)qk_cpu_supported(); level++) {
            qk_expf_ops_at(level)->expf(x, sub, got, (size_t)n);
            cr_expect(same(want, got, n), "level %s, n %d", qk_cpu_level_name(level), n);
            memcpy(got, x, sizeof x);
            qk_expf_ops_at(level)->expf(got, sub, got, (size_t)n);
            cr_expect(same(want, got, n), "level %s, n %d, in place", qk_cpu_level_name(level), n);
        }
    }
    cr_expect(qk_expf_ops_at(QK_CPU_AVX512 + 1) == NULL);
}

Test(expf, sums_in_order)
{
    uint64_t s = 3;
    float x[1500];
    fill(x, 1500, &s);
    for (int i = 0; i < 1500; i++)
        x[i] = isfinite(x[i]) && fabsf(x[i]) < 80.0f ? x[i] : -1.0f;
    double want = 0.0;
    for (int i = 0; i < 1500; i++)
        want += qk_expf(x[i] - 2.0f);
    const double got = qk_expf_sum(x, 2.0f, 1500);
    cr_expect(memcmp(&want, &got, sizeof want) == 0, "sum %a, want %a", got, want);
}

/* qk_row_max against its loop: rows with NaNs, infinities and zeros
 * anywhere, a NaN first element, zero maxima of either sign, at lengths on
 * both sides of the vector blocks. */
Test(expf, row_max_is_the_loop)
{
    uint64_t s = 5;
    static float x[49152];
    for (int trial = 0; trial < 400; trial++) {
        const int n = trial < 100 ? trial + 1 : trial < 300 ? 16 * (trial % 9) + trial % 7 + 30 : 49152;
        fill(x, n, &s);
        if (trial % 4 == 1) /* every value at most 0, some zeros: a zero maximum */
            for (int i = 0; i < n; i++)
                x[i] = isnan(x[i]) ? x[i] : x[i] > 0 ? (tu_rand(&s) % 2 ? -0.0f : 0.0f) : x[i];
        if (trial % 4 == 3) /* finite values, one in five NaN: a NaN after the maximum in its lane */
            for (int i = 0; i < n; i++)
                x[i] = tu_rand(&s) % 5 == 0 ? NAN : tu_gauss(&s);
        if (trial % 8 == 2)
            x[0] = NAN;
        float want = x[0];
        for (int i = 1; i < n; i++)
            want = x[i] > want ? x[i] : want;
        const float got = qk_row_max(x, (size_t)n);
        cr_expect(same(&want, &got, 1), "trial %d, n %d: %a, want %a", trial, n, (double)got, (double)want);
    }
}

Test(expf, swiglu_equals_the_reference_at_every_level)
{
    uint64_t s = 11;
    float g[300], u[300], want[300], got[300];
    for (int n = 0; n <= 300; n += n < 40 ? 1 : 37) {
        fill(g, n, &s);
        for (int i = 0; i < n; i++)
            u[i] = tu_gauss(&s);
        for (int i = 0; i < n; i++)
            want[i] = g[i] / (1.0f + qk_expf(-g[i])) * u[i];
        for (int level = 0; level <= (int)qk_cpu_supported(); level++) {
            memcpy(got, g, sizeof g);
            qk_expf_ops_at(level)->swiglu(got, u, (size_t)n);
            cr_expect(same(want, got, n), "level %s, n %d", qk_cpu_level_name(level), n);
        }
    }
}
