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

#include "kernels/iq2_grids.h"
#include "kernels/types.h"

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

/* Make room for `more` entries in a growable uint16 array; false when
 * memory ran out. */
static int reserve(uint16_t **a, size_t n, size_t *cap, size_t more)
{
    if (n + more <= *cap)
        return 1;
    size_t c = *cap ? *cap : 65536;
    while (c < n + more)
        c *= 2;
    uint16_t *p = realloc(*a, c * sizeof **a);
    if (!p)
        return 0;
    *a = p, *cap = c;
    return 1;
}

/* sq4[a][b]: squared level distance between the 4 coordinates packed in
 * byte a and those in byte b (half a packed group).  Built once per table. */
static void half_distances(uint8_t (*sq4)[256])
{
    for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b++) {
            int s = 0;
            for (int k = 0; k < 4; k++) {
                int diff = ((a >> 2 * k) & 3) - ((b >> 2 * k) & 3);
                s += diff * diff;
            }
            sq4[a][b] = (uint8_t)s;
        }
}

static int build(slot *sl)
{
    const int n = sl->grid_size;
    int8_t(*pos)[8] = malloc((size_t)n * sizeof *pos);
    uint16_t *code = malloc((size_t)n * sizeof *code);
    uint8_t *d2 = malloc((size_t)n);
    uint8_t(*sq4)[256] = malloc(256 * sizeof *sq4);
    int32_t *map = malloc(QK_IQ2_MAP_SIZE * sizeof *map);
    uint16_t *nb = NULL;
    size_t nn = 0, cap = 0;
    if (!pos || !code || !d2 || !sq4 || !map)
        goto fail;
    half_distances(sq4);

    /* the grid: coordinates, packed levels, and the map of on-grid groups */
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

    /* every off-grid group: its nearest points, by (distance, index) */
    for (int u = 0; u < QK_IQ2_MAP_SIZE; u++) {
        if (map[u] >= 0)
            continue;
        const uint8_t *lo = sq4[u & 0xff], *hi = sq4[u >> 8];
        int count[MAX_D2 + 1] = {0};
        for (int j = 0; j < n; j++) {
            d2[j] = (uint8_t)(lo[code[j] & 0xff] + hi[code[j] >> 8]);
            count[d2[j]]++;
        }
        /* the nwant smallest distances present; slot[d]: where the next
         * point at distance d goes (0: not wanted) */
        size_t slot_of[MAX_D2 + 1] = {0}, next = nn + 1;
        int nhave = 0;
        for (int d = 0; d <= MAX_D2 && nhave < sl->nwant; d++)
            if (count[d])
                slot_of[d] = next, next += (size_t)count[d], nhave++;
        if (!reserve(&nb, nn, &cap, next - nn))
            goto fail;
        map[u] = -(int32_t)nn - 1;
        nb[nn] = (uint16_t)(next - nn - 1);
        for (int j = 0; j < n; j++)
            if (slot_of[d2[j]])
                nb[slot_of[d2[j]]++] = (uint16_t)j;
        nn = next;
    }
    free(code), free(d2), free(sq4);
    sl->s = (qk_iq2_search){.grid_size = n, .pos = (const int8_t(*)[8])pos, .map = map,
                            .neighbours = nb};
    return 1;
fail:
    free(pos), free(code), free(d2), free(sq4), free(map), free(nb);
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
