/* iq1_grids.h - the IQ1_S / IQ1_M codebook and the encoder's view of it.
 *
 * A codebook entry is eight values in {-1, 0, +1}, one int8 per byte (byte j
 * = element j); a block adds a shift of +-IQ1S_DELTA to all of them.
 *
 * The encoder (ggml's iq2xs_init_impl for IQ1_S/IQ1_M, grid size 2048, and
 * iq1_find_best_neighbour2) describes a point by its eight level codes l
 * (value + 1, in 0..2, packed 2 bits each into a 16-bit code) and keeps, for
 * every code with all levels in 0..2 that is not in the codebook, the list of
 * codebook entries at the 3 smallest squared distances (measured on 2l+1),
 * ordered by (distance, entry index).  Codes with a level of 3 never occur
 * when encoding, so they get no list.
 */
#ifndef QK_IQ1_GRIDS_H
#define QK_IQ1_GRIDS_H

#include <stdint.h>

#define QK_IQ1S_NGRID 2048
#define QK_IQ1S_DELTA 0.125f /* ggml IQ1S_DELTA */
#define QK_IQ1M_DELTA 0.125f /* ggml IQ1M_DELTA */

extern const uint64_t qk_iq1s_grid[QK_IQ1S_NGRID]; /* ggml iq1s_grid */

typedef struct qk_iq1_search {
    const int8_t (*q)[8];      /* q[g][j] = 2l+1 (1, 3 or 5) for entry g, element j */
    const int16_t *map;        /* base-3 code (sum l_j 3^j) -> entry, or -1 */
    const uint32_t *first;     /* base-3 code -> start of its list in near[] */
    const uint16_t *count;     /* base-3 code -> length of that list (0 on the codebook) */
    const uint16_t *near;      /* neighbour lists, back to back */
    uint32_t nnear;            /* their total length */
} qk_iq1_search;

/* The tables (built once, thread-safe). */
const qk_iq1_search *qk_iq1_search_get(void);

/* Base-3 code of eight levels L[j] in 0..2. */
static inline unsigned qk_iq1_code(const int8_t *L)
{
    unsigned c = 0;
    for (int j = 7; j >= 0; j--)
        c = 3 * c + (unsigned)L[j];
    return c;
}

/* ggml iq1_find_best_neighbour2: among the neighbours of the off-codebook
 * code, the entry g minimising sum_j w[j] * (scale*xg[level] - xval[j])^2
 * (first one wins ties).  Returns it. */
int qk_iq1_best_neighbour(const qk_iq1_search *s, unsigned code, const float *xval,
                          const float *w, float scale, const float *xg);

#endif
