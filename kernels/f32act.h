/* f32act.h - float-activation products (private to kernels/; the public
 * entry is cpu.h's qk_kernels.fdot_tile and qk_fdot_tile).
 *
 * A weight row of any type with a decoder is multiplied with float
 * activations in the float-dot order of kernels/fdot.h over the row's
 * decoded values: the bits of the F32 product on the dequantized row.  The
 * row is decoded QK_FDOT_CHUNK elements at a time (whole blocks, by the
 * type's to_float) into a buffer on the stack; no float copy of a matrix or
 * of a whole row is made.  A new weight format gets these products by
 * giving its to_float (types.h) and nothing else; a level may add a faster
 * decoder (cpu.h's to_float, bitwise equal) and the products use it. */
#ifndef QK_F32ACT_H
#define QK_F32ACT_H

#include <stdint.h>

#include "kernels/cpu.h"

#define QK_FDOT_CHUNK 256 /* elements decoded at a time (at most) */

/* Elements per decoded piece for a type of block size blck (whole blocks),
 * or 0 when a block is larger than QK_FDOT_CHUNK (no float-activation
 * product). */
static inline int64_t qk_fdot_chunk(int blck)
{
    return blck <= 0 || blck > QK_FDOT_CHUNK ? 0 : QK_FDOT_CHUNK / blck * blck;
}

/* The scalar reference of qk_fdot_tile_fn (cpu.h), for every type: k's
 * to_float decodes the row pieces. */
void qk_fdot_tile_ref(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr,
                      const float *y, size_t ys, int nt, float *out, size_t ldo);

#endif
