/* iq3_grids.h - the IQ3_XXS / IQ3_S codebooks and the encoder's view of them.
 *
 * A codebook entry is four magnitudes, one per byte (byte j = element j).
 * Every magnitude is one of eight levels: IQ3_XXS uses the values
 * 4 12 20 28 36 44 52 62, IQ3_S the odd values 1 3 ... 15.  Signs are stored
 * apart from the magnitudes.
 *
 * The encoder (ggml's iq3xs_init_impl / iq3_find_best_neighbour) does not
 * look at the decoded values: it describes a point by its four level codes
 * l (0..7, packed 3 bits each into a 12-bit code) and measures it by the odd
 * values 2l+1.  For a code that is not in the codebook it keeps the list of
 * nearby codebook entries: those at the 2 (IQ3_XXS) or 3 (IQ3_S) smallest
 * squared distances, ordered by (distance, entry index).
 */
#ifndef QK_IQ3_GRIDS_H
#define QK_IQ3_GRIDS_H

#include <stdint.h>

#define QK_IQ3XXS_NGRID 256
#define QK_IQ3S_NGRID 512

extern const uint32_t qk_iq3xxs_grid[QK_IQ3XXS_NGRID]; /* ggml iq3xxs_grid */
extern const uint32_t qk_iq3s_grid[QK_IQ3S_NGRID];     /* ggml iq3s_grid */
/* ggml ksigns_iq2xs: 7 sign bits plus an eighth that makes the count even. */
extern const uint8_t qk_iq3_ksigns[128];

/* The encoder's read-only tables for one codebook (built once, thread-safe). */
typedef struct qk_iq3_search {
    int ngrid;
    const int8_t (*q)[4];      /* q[g][j] = 2l+1 for entry g, element j */
    const int16_t *map;        /* 12-bit code -> entry, or -1 when off the codebook */
    const uint32_t *first;     /* 12-bit code -> start of its list in near[] */
    const uint16_t *count;     /* 12-bit code -> length of that list (0 on the codebook) */
    const uint16_t *near;      /* neighbour lists, back to back */
    uint32_t nnear;            /* their total length */
} qk_iq3_search;

/* The tables for ngrid 256 (IQ3_XXS) or 512 (IQ3_S); NULL for other sizes. */
const qk_iq3_search *qk_iq3_search_get(int ngrid);

/* ggml iq3_find_best_neighbour: among the neighbours of the off-codebook
 * code, the entry g minimising sum_j w[j] * (scale*q[g][j] - xval[j])^2
 * (first one wins ties).  Writes its levels to L[4] and returns it. */
int qk_iq3_best_neighbour(const qk_iq3_search *s, unsigned code, const float *xval,
                          const float *w, float scale, int8_t *L);

#endif
