/* iq2_search.c - the neighbour maps of the IQ2 encoders, ggml's
 * iq2xs_init_impl (ggml-quants.c, llama.cpp d32676d) computed once per type
 * under pthread_once and read-only afterwards.
 *
 * ggml builds, for every packed group u of 8 levels (0..3 each) that is not a
 * grid point, the list of grid points at the nwant smallest distinct squared
 * distances sum_j (2*lg_j - 2*lu_j)^2, sorted by (distance, index) with qsort.
 * That order is total, so the same list comes from bucketing by distance and
 * scanning the grid in index order, which is what we do (no sort). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "iq2_grids.h"
#include "types.h"

/* Largest squared level distance over 8 coordinates: 8 * 3^2. */
#define MAX_D2 72

typedef struct {
    const uint64_t *grid; /* decode codebook */
    int grid_size;
    int nwant;
    qk_iq2_search s;
    pthread_once_t once;
    int ok;
} slot;

static slot slots[3] = {
    {qk_iq2xxs_grid, 256, 2, {0}, PTHREAD_ONCE_INIT, 0},
    {qk_iq2xs_grid, 512, 2, {0}, PTHREAD_ONCE_INIT, 0},
    {qk_iq2s_grid, 1024, 1, {0}, PTHREAD_ONCE_INIT, 0},
};

/* Append v to a growable uint16 array; false when memory ran out. */
static int push(uint16_t **a, size_t *n, size_t *cap, uint16_t v)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 65536;
        uint16_t *p = realloc(*a, c * sizeof **a);
        if (!p)
            return 0;
        *a = p, *cap = c;
    }
    (*a)[(*n)++] = v;
    return 1;
}

/* Squared level distance of every grid point to the off-grid group u, via
 * two 256-entry tables (one per half of the 8 coordinates). */
static void distances(const uint16_t *code, int grid_size, int u, uint8_t *d2)
{
    uint8_t half[2][256];
    for (int h = 0; h < 2; h++) {
        for (int b = 0; b < 256; b++) {
            int s = 0;
            for (int k = 0; k < 4; k++) {
                int diff = ((b >> 2 * k) & 3) - ((u >> (8 * h + 2 * k)) & 3);
                s += diff * diff;
            }
            half[h][b] = (uint8_t)s;
        }
    }
    for (int j = 0; j < grid_size; j++)
        d2[j] = (uint8_t)(half[0][code[j] & 0xff] + half[1][code[j] >> 8]);
}

static int build(slot *sl)
{
    const int n = sl->grid_size;
    int8_t(*pos)[8] = malloc((size_t)n * sizeof *pos);
    uint16_t *code = malloc((size_t)n * sizeof *code);
    uint8_t *d2 = malloc((size_t)n);
    int32_t *map = malloc(QK_IQ2_MAP_SIZE * sizeof *map);
    uint16_t *nb = NULL;
    size_t nn = 0, cap = 0;
    if (!pos || !code || !d2 || !map)
        goto fail;

    for (int u = 0; u < QK_IQ2_MAP_SIZE; u++)
        map[u] = -1;
    for (int j = 0; j < n; j++) {
        unsigned c = 0;
        for (int k = 0; k < 8; k++) {
            int l = qk_iq2_level((uint8_t)(sl->grid[j] >> 8 * k));
            pos[j][k] = (int8_t)(2 * l + 1);
            c |= (unsigned)l << 2 * k;
        }
        code[j] = (uint16_t)c;
        if (c < QK_IQ2_MAP_SIZE)
            map[c] = j;
    }

    for (int u = 0; u < QK_IQ2_MAP_SIZE; u++) {
        if (map[u] >= 0)
            continue;
        distances(code, n, u, d2);
        int count[MAX_D2 + 1] = {0};
        for (int j = 0; j < n; j++)
            count[d2[j]]++;
        /* the nwant smallest distances present, and how many points have them */
        int want[3], nhave = 0, total = 0;
        for (int d = 0; d <= MAX_D2 && nhave < sl->nwant; d++)
            if (count[d])
                want[nhave++] = d, total += count[d];
        map[u] = -(int32_t)nn - 1;
        if (!push(&nb, &nn, &cap, (uint16_t)total))
            goto fail;
        for (int w = 0; w < nhave; w++)
            for (int j = 0; j < n; j++)
                if (d2[j] == want[w] && !push(&nb, &nn, &cap, (uint16_t)j))
                    goto fail;
    }
    free(code), free(d2);
    sl->s = (qk_iq2_search){.grid_size = n, .pos = (const int8_t(*)[8])pos, .map = map,
                            .neighbours = nb};
    return 1;
fail:
    free(pos), free(code), free(d2), free(map), free(nb);
    return 0;
}

static void init_xxs(void) { slots[0].ok = build(&slots[0]); }
static void init_xs(void) { slots[1].ok = build(&slots[1]); }
static void init_s(void) { slots[2].ok = build(&slots[2]); }

const qk_iq2_search *qk_iq2_search_get(int type)
{
    int i;
    switch (type) {
    case QK_IQ2_XXS: i = 0, pthread_once(&slots[0].once, init_xxs); break;
    case QK_IQ2_XS: i = 1, pthread_once(&slots[1].once, init_xs); break;
    case QK_IQ2_S: i = 2, pthread_once(&slots[2].once, init_s); break;
    default: return NULL;
    }
    return slots[i].ok ? &slots[i].s : NULL;
}
