/* f32act.c - the scalar reference of the float-activation products (see
 * f32act.h and cpu.h's qk_fdot_tile_fn). */
#include "kernels/f32act.h"

#include "kernels/fdot.h"
#include "kernels/types.h"

#define TOKENS 64 /* activation rows per pass over a weight row */

void qk_fdot_tile_ref(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr,
                      const float *y, size_t ys, int nt, float *out, size_t ldo)
{
    const qk_type_traits *t = qk_type_get(k->id);
    const int64_t ch = qk_fdot_chunk(t->blck);
    float w[QK_FDOT_CHUNK];
    qk_fdot_acc acc[TOKENS];
    for (int r = 0; r < nr; r++) {
        const uint8_t *row = (const uint8_t *)x + (size_t)r * xs;
        for (int t0 = 0; t0 < nt; t0 += TOKENS) {
            const int q = nt - t0 < TOKENS ? nt - t0 : TOKENS;
            for (int i = 0; i < q; i++)
                qk_fdot_begin(&acc[i], n);
            for (int64_t c0 = 0; c0 < n; c0 += ch) {
                const int64_t m = n - c0 < ch ? n - c0 : ch;
                k->to_float(row + (size_t)(c0 / t->blck) * t->type_size, w, m);
                for (int i = 0; i < q; i++)
                    qk_fdot_feed(&acc[i], c0, w, y + (size_t)(t0 + i) * ys + (size_t)c0, m);
            }
            for (int i = 0; i < q; i++)
                out[(size_t)(t0 + i) * ldo + (size_t)r] = qk_fdot_end(&acc[i]);
        }
    }
}
