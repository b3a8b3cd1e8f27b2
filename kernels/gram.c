/* gram.c - the scalar reference of the outer-product sums (see gram.h) and
 * the choice of kernel by CPU level. */
#include "kernels/gram.h"

#include "kernels/cpu.h"
#include "kernels/x86/x86.h"

static void gram_ref(double *s, int64_t d, const float *x, int64_t n, int64_t i0, int64_t i1)
{
    for (int64_t t = 0; t < n; t++) {
        const float *xt = x + t * d;
        for (int64_t i = i0; i < i1; i++) {
            const double xi = xt[i];
            double *si = s + i * d;
            for (int64_t j = i; j < d; j++)
                si[j] += xi * (double)xt[j];
        }
    }
}

qk_gram_fn qk_gram_kernel_at(int level)
{
    if (level < 0 || level > (int)qk_cpu_supported())
        return NULL;
#ifdef QK_X86
    if (level >= QK_CPU_AVX512)
        return qk_x86_avx512_gram;
    if (level >= QK_CPU_AVX2)
        return qk_x86_avx2_gram;
#endif
    return gram_ref;
}

qk_gram_fn qk_gram_kernel(void) { return qk_gram_kernel_at(qk_cpu_level_active()); }
