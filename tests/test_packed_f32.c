/* test_packed_f32.c - the AVX2 level's packed F32 products
 * (kernels/x86/avx2_f32.c) return the scalar reference's bits
 * (kernels/float.c f32_vec_dot) on rows with extreme values: products that
 * overflow, underflow into subnormals or cancel, infinities and NaNs, and
 * every count of tokens per tile.  (tests/test_matmul.c checks Gaussian rows
 * through qk_matmul.) */
#include <math.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/types.h"
#include "tests/testutil.h"

#define ROWS 16
#define COLS 77
#define TOK 7

static bool same(float a, float b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a); }

Test(packed_f32, extreme_values_give_the_reference_bits)
{
    const qk_kernels *k = qk_kernels_for(QK_F32), *ref = qk_kernels_at(QK_F32, QK_CPU_SCALAR);
    if (!k->pack) {
        cr_log_info("no packed F32 kernel at this level");
        return;
    }
    static float w[ROWS * COLS], x[TOK * COLS];
    uint64_t s = 99;
    const float special[] = {3e38f, -3e38f, 1e-30f, -1e-38f, 1e-45f, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f};
    for (int i = 0; i < ROWS * COLS; i++)
        w[i] = i % 13 == 0 ? special[(i / 13) % 10] : tu_gauss(&s) * 1e3f;
    for (int i = 0; i < TOK * COLS; i++)
        x[i] = i % 17 == 0 ? special[(i / 17) % 10] : tu_gauss(&s);
    w[5] = NAN; /* a NaN in one row only */
    const size_t ps = k->pack_size(COLS);
    uint8_t *packed = malloc(ps * (ROWS / QK_PACK_ROWS));
    for (int g = 0; g < ROWS / QK_PACK_ROWS; g++)
        k->pack(COLS, w + (size_t)g * QK_PACK_ROWS * COLS, COLS * sizeof(float), packed + (size_t)g * ps);
    for (int nt = 1; nt <= TOK; nt++) {
        float out[TOK * ROWS];
        k->packed_tile(COLS, packed, ROWS / QK_PACK_ROWS, x, COLS * sizeof(float), nt, out, ROWS);
        for (int t = 0; t < nt; t++)
            for (int r = 0; r < ROWS; r++) {
                const float want = ref->vec_dot(COLS, w + (size_t)r * COLS, x + (size_t)t * COLS);
                cr_assert(same(out[t * ROWS + r], want), "row %d token %d of %d: %a, reference %a", r, t, nt,
                          (double)out[t * ROWS + r], (double)want);
            }
    }
    free(packed);
}
