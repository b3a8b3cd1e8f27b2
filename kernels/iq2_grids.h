/* iq2_grids.h - the IQ2 codebooks (data, equal to ggml's) and the search
 * structures the IQ2 encoders use to snap 8 magnitudes to a grid point.
 *
 * Codebooks: qk_iq2xxs_grid (256 points, IQ2_XXS), qk_iq2xs_grid (512,
 * IQ2_XS), qk_iq2s_grid (1024, IQ2_S).  Each uint64 holds one point's 8
 * magnitudes, element j in byte j (bits 8j..8j+7); the magnitudes are
 * 0x08, 0x19, 0x2b (levels 0, 1, 2).  A group of 8 signs is one byte, bit j
 * set = element j negative; qk_ksigns_iq2xs expands 7 stored sign bits to 8
 * by even parity (bit 7 = parity of bits 0..6), qk_kmask_iq2xs[j] = 1 << j. */
#ifndef QK_IQ2_GRIDS_H
#define QK_IQ2_GRIDS_H

#include <stdint.h>

extern const uint8_t qk_kmask_iq2xs[8];
extern const uint8_t qk_ksigns_iq2xs[128];
extern const uint64_t qk_iq2xxs_grid[256];
extern const uint64_t qk_iq2xs_grid[512];
extern const uint64_t qk_iq2s_grid[1024];

/* Level (0..2) of a grid magnitude byte; 3 for a byte no grid holds. */
static inline int qk_iq2_level(uint8_t b) { return b == 0x08 ? 0 : b == 0x19 ? 1 : b == 0x2b ? 2 : 3; }

/* --- encoder search tables (ggml's iq2xs_init_impl), built in iq2_search.c */

/* A group of 8 levels l_j in 0..3 is packed as u = sum l_j << 2j; every
 * grid point (levels 0..2) packs below this bound. */
#define QK_IQ2_MAP_SIZE 43692

typedef struct qk_iq2_search {
    int grid_size;
    /* grid_size x 8: the point's coordinates 2*l+1 (1, 3, 5), as ggml's
     * kgrid_q2xs bytes. */
    const int8_t (*pos)[8];
    /* QK_IQ2_MAP_SIZE entries: packed levels u -> grid index when u is a grid
     * point, else -(o + 1) where neighbours[o] is the count n of u's nearest
     * grid points and neighbours[o+1..o+n] their indices. */
    const int32_t *map;
    /* Nearest grid points of each off-grid u: every point at the nwant
     * smallest distinct squared distances (nwant 2 for IQ2_XXS/XS, 1 for
     * IQ2_S), ordered by distance then index (ggml's qsort order). */
    const uint16_t *neighbours;
} qk_iq2_search;

/* The search tables of QK_IQ2_XXS, QK_IQ2_XS or QK_IQ2_S, built on first use
 * (thread-safe, read-only afterwards).  NULL for another type or when memory
 * ran out building them. */
const qk_iq2_search *qk_iq2_search_get(int type);

#endif
