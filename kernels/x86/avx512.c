/* avx512.c - the AVX-512 level's own kernels.
 *
 * None yet: this level uses the AVX2 kernels (cpu.c copies each level's set
 * from the one below), which give the same bits.  Kept as the place where
 * AVX-512 BW/VL/VNNI variants go; any kernel added here must equal the AVX2
 * one bitwise (quantized dots: same integer block sums and float steps;
 * float dots: the float-dot order of kernels/float.c, one 8-lane
 * accumulator per pair, not 16 lanes). */
#include "kernels/x86/x86.h"

#ifdef QK_X86
const qk_simd_ops qk_x86_avx512[] = {
    {.id = -1},
};
#endif
