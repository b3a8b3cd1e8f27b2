/* Exhaustive checks of the f16/bf16 conversions against their definitions. */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/half.h"

/* Reference: nearest f16 by exhaustive search over finite codes (ties to even). */
Test(half, f16_decode_all_codes_roundtrip)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = qk_f16_to_f32((uint16_t)h);
        if (isnan(f)) {
            cr_assert(((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff));
            continue;
        }
        cr_assert_eq(qk_f32_to_f16(f), h, "code %04x", h);
    }
}

Test(half, f16_encode_midpoints_ties_to_even)
{
    /* between consecutive positive finite codes a and a+1, the midpoint goes to the even code */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double lo = qk_f16_to_f32((uint16_t)h), hi = qk_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact in f32: f16 has 11 bits */
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        cr_assert_eq(qk_f32_to_f16(mid), want, "mid %04x", h);
        cr_assert_eq(qk_f32_to_f16(nextafterf(mid, 0)), h);
        cr_assert_eq(qk_f32_to_f16(nextafterf(mid, INFINITY)), h + 1);
    }
    cr_assert_eq(qk_f32_to_f16(65520.0f), 0x7c00);
    cr_assert_eq(qk_f32_to_f16(nextafterf(65520.0f, 0)), 0x7bff);
    cr_assert_eq(qk_f32_to_f16(-INFINITY), 0xfc00);
    cr_assert_eq(qk_f32_to_f16(0x1p-25f), 0);          /* tie to even: zero */
    cr_assert_eq(qk_f32_to_f16(nextafterf(0x1p-25f, 1)), 1);
}

Test(half, bf16)
{
    cr_assert_eq(qk_f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(qk_f32_to_bf16(qk_bits_f32(0x3f808000u)), 0x3f80); /* tie, even */
    cr_assert_eq(qk_f32_to_bf16(qk_bits_f32(0x3f818000u)), 0x3f82); /* tie, odd -> up */
    cr_assert_eq(qk_f32_to_bf16(qk_bits_f32(0x7f800001u)) & 0x7fc0, 0x7fc0);
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = qk_bf16_to_f32((uint16_t)h);
        if (!isnan(f))
            cr_assert_eq(qk_f32_to_bf16(f), h);
    }
}
