/* expf_impl.h - what the expf kernels share (private to kernels/): glibc's
 * constants (__exp2f_data: invln2_scaled, shift, poly_scaled; see expf.h),
 * its table, and the reference kernels. */
#ifndef QK_EXPF_IMPL_H
#define QK_EXPF_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define QK_EXPF_INVLN2N 0x1.71547652b82fep+5 /* 32 / ln 2 */
#define QK_EXPF_SHIFT 0x1.8p+52
#define QK_EXPF_C0 0x1.c6af84b912394p-20   /* 0x1.c6af84b912394p-5 / 32^3 */
#define QK_EXPF_C1 0x1.ebfce50fac4f3p-13   /* 0x1.ebfce50fac4f3p-3 / 32^2 */
#define QK_EXPF_C2 0x1.62e42ff0c52d6p-6    /* 0x1.62e42ff0c52d6p-1 / 32 */

extern const uint64_t qk_expf_tab[32];

/* The reference kernels (qk_expf_fn, qk_swiglu_fn); the SIMD kernels give
 * them the steps with a lane of |x| >= 88 or NaN (each element reads its
 * input before its output is written, so in place works). */
void qk_expf_ref(const float *x, float sub, float *out, size_t n);

void qk_swiglu_ref(float *g, const float *u, size_t n);

#endif
