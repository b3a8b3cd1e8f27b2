/* actvar.h - numerically equivalent variants of the activation encoders,
 * for qk-kld --noise-floor (issue #24).
 *
 * A quantized product first rounds its float activations to the weight
 * type's activation type (Q8_0, Q8_1, Q8_K; F16 and BF16 for F16 and BF16
 * weights).  Two correct implementations of that rounding differ in the last
 * bit of the inverse scale they multiply by (ggml's x86 encoder computes
 * 127 / amax, its reference 1 / (amax / 127); other backends divide by d)
 * and in how they break ties (rintf, roundf, the 1.5 * 2^23 trick), and
 * every upstream last-bit difference moves values across rounding
 * boundaries the same way.  A variant encoder is such another
 * implementation:
 *   QK_ACTV_UP    the inverse scale of every block one ulp larger in
 *                 magnitude, and ties rounded the other way (half away from
 *                 zero where the encoder rounds half to even, and back);
 *   QK_ACTV_DOWN  one ulp smaller in magnitude, ties the other way.
 * The stored scale (d) is unchanged, so a variant block is as valid an
 * encoding of the same floats as the default one.  F16 and BF16 have no
 * scale: each value is nudged one float ulp away from (UP) or toward (DOWN)
 * zero before it is rounded.  F32 activations (F32 weights, --act-type f32)
 * are not rounded and have no variant.
 * QK_ACTV_SAME runs the variant code with no perturbation: it gives the
 * default encoder's bytes (tests/test_f32act.c checks it), so a difference
 * a variant makes is the perturbation's alone.
 * Variants are scalar code and give the same bytes at every SIMD level. */
#ifndef QK_ACTVAR_H
#define QK_ACTVAR_H

#include "kernels/types.h"

enum { QK_ACTV_NONE = 0, QK_ACTV_UP = 1, QK_ACTV_DOWN = 2, QK_ACTV_SAME = 3 };

/* The encoder of activation type `type` under `variant`; for QK_ACTV_NONE
 * NULL (use the type's own from_float).  NULL also for a type without a
 * variant (F32, or not an activation type). */
qk_from_float_fn qk_actvar_from_float(int type, int variant);

#endif
