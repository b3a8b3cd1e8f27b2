/* f32act.c - the scalar reference of the float-activation products (see
 * f32act.h and cpu.h's qk_fdot_tile_fn). */
#include "kernels/f32act.h"

#include "kernels/fdot.h"
#include "kernels/types.h"

typedef struct {
    const qk_kernels *k;
    const qk_type_traits *t;
    const uint8_t *x;
    size_t xs;
} f32act_rows;

/* Row r's elements k0 .. k0+m-1 (whole blocks) by the type's to_float. */
static void f32act_dec(const void *ctx, int r, int64_t k0, int64_t m, float *w)
{
    const f32act_rows *c = ctx;
    c->k->to_float(c->x + (size_t)r * c->xs + (size_t)(k0 / c->t->blck) * c->t->type_size, w, m);
}

void qk_fdot_tile_ref(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr,
                      const float *y, size_t ys, int nt, float *out, size_t ldo)
{
    const f32act_rows c = {k, qk_type_get(k->id), x, xs};
    qk_fdot_rows(&c, f32act_dec, n, qk_fdot_chunk(c.t->blck), nr, y, ys, nt, out, ldo);
}
