/* iq3_search.c - the IQ3 encoder's codebook tables: ggml's iq3xs_init_impl
 * (level codes of every entry, code -> entry map, neighbour lists) and
 * iq3_find_best_neighbour.  Built once per codebook with pthread_once, then
 * only read. */
#include "kernels/iq3_grids.h"

#include <float.h>
#include <limits.h>
#include <pthread.h>

#define NCODE 4096 /* 4 levels of 3 bits */

/* Total length of all neighbour lists: a fact of the fixed codebooks (ggml
 * stores the same lists, plus one count per off-codebook code: 22825 and
 * 28317 entries).  The builder never writes past these. */
#define XXS_NEAR 18985
#define S_NEAR 24733

typedef struct table {
    int8_t q[QK_IQ3S_NGRID][4];
    int16_t map[NCODE];
    uint32_t first[NCODE];
    uint16_t count[NCODE];
} table;

static table xxs_tab, s_tab;
static uint16_t xxs_near[XXS_NEAR], s_near[S_NEAR];
static qk_iq3_search xxs_search, s_search;
static pthread_once_t xxs_once = PTHREAD_ONCE_INIT, s_once = PTHREAD_ONCE_INIT;

/* Level code (0..7) of a stored magnitude: the codebooks use the eight
 * values of `levels` (IQ3_XXS: 4 12 ... 52 62; IQ3_S: 1 3 ... 15). */
static int level_of(uint8_t v, const uint8_t levels[8])
{
    for (int l = 0; l < 8; l++)
        if (levels[l] == v)
            return l;
    return 0; /* not reached: every byte of the codebooks is a level */
}

/* ggml iq3xs_init_impl: the neighbours of an off-codebook code are all
 * entries at its `nwant` smallest distinct squared distances (measured on
 * the odd values 2l+1), ordered by (distance, index) as ggml's qsort leaves
 * them. */
static void build(table *t, uint16_t *near, uint32_t cap, const uint32_t *grid, int ngrid,
                  const uint8_t levels[8], int nwant, qk_iq3_search *out)
{
    for (unsigned c = 0; c < NCODE; c++)
        t->map[c] = -1;
    for (int g = 0; g < ngrid; g++) {
        unsigned code = 0;
        for (int j = 0; j < 4; j++) {
            int l = level_of((uint8_t)(grid[g] >> 8 * j), levels);
            t->q[g][j] = (int8_t)(2 * l + 1);
            code |= (unsigned)l << 3 * j;
        }
        t->map[code] = (int16_t)g;
    }
    uint32_t used = 0;
    int d2[QK_IQ3S_NGRID];
    for (unsigned c = 0; c < NCODE; c++) {
        t->first[c] = used;
        t->count[c] = 0;
        if (t->map[c] >= 0)
            continue;
        for (int g = 0; g < ngrid; g++) {
            d2[g] = 0;
            for (int j = 0; j < 4; j++) {
                int diff = t->q[g][j] - (int)(2 * ((c >> 3 * j) & 7) + 1);
                d2[g] += diff * diff;
            }
        }
        for (int k = 0, prev = -1; k < nwant; k++) {
            int m = INT_MAX;
            for (int g = 0; g < ngrid; g++)
                if (d2[g] > prev && d2[g] < m)
                    m = d2[g];
            if (m == INT_MAX)
                break;
            for (int g = 0; g < ngrid && used < cap; g++)
                if (d2[g] == m) {
                    near[used++] = (uint16_t)g;
                    t->count[c]++;
                }
            prev = m;
        }
    }
    *out = (qk_iq3_search){.ngrid = ngrid, .q = (const int8_t(*)[4])t->q, .map = t->map,
                           .first = t->first, .count = t->count, .near = near, .nnear = used};
}

static const uint8_t xxs_levels[8] = {4, 12, 20, 28, 36, 44, 52, 62};
static const uint8_t s_levels[8] = {1, 3, 5, 7, 9, 11, 13, 15};

static void init_xxs(void)
{
    build(&xxs_tab, xxs_near, XXS_NEAR, qk_iq3xxs_grid, QK_IQ3XXS_NGRID, xxs_levels, 2,
          &xxs_search);
}

static void init_s(void)
{
    build(&s_tab, s_near, S_NEAR, qk_iq3s_grid, QK_IQ3S_NGRID, s_levels, 3, &s_search);
}

const qk_iq3_search *qk_iq3_search_get(int ngrid)
{
    if (ngrid == QK_IQ3XXS_NGRID) {
        pthread_once(&xxs_once, init_xxs);
        return &xxs_search;
    }
    if (ngrid == QK_IQ3S_NGRID) {
        pthread_once(&s_once, init_s);
        return &s_search;
    }
    return NULL;
}

int qk_iq3_best_neighbour(const qk_iq3_search *s, unsigned code, const float *xval,
                          const float *w, float scale, int8_t *L)
{
    const uint16_t *near = s->near + s->first[code];
    int n = s->count[code];
    /* ggml asserts when no candidate beats FLT_MAX (only with non-finite
     * input); keep the first neighbour then. */
    int best = n > 0 ? near[0] : 0;
    float best_d2 = FLT_MAX;
    for (int k = 0; k < n; k++) {
        const int8_t *q = s->q[near[k]];
        float d2 = 0;
        for (int j = 0; j < 4; j++) {
            float diff = scale * q[j] - xval[j];
            d2 += w[j] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = near[k];
        }
    }
    for (int j = 0; j < 4; j++)
        L[j] = (int8_t)((s->q[best][j] - 1) / 2);
    return best;
}
