/* iq1_search.c - the IQ1 encoder's codebook tables: ggml's iq2xs_init_impl
 * for IQ1_S / IQ1_M (grid size 2048: level codes of every entry, code ->
 * entry map, neighbour lists) and iq1_find_best_neighbour2.  Built once
 * with pthread_once, then only read.
 *
 * ggml indexes its map by the 16-bit code (2 bits a level) and also builds
 * lists for codes with a level of 3, which the encoders never look up; here
 * the map is indexed by the base-3 code of levels 0..2 only, and each list
 * is the one ggml builds for that code. */
#include "kernels/iq1_grids.h"

#include <float.h>
#include <limits.h>
#include <pthread.h>

#define NCODE 6561 /* 3^8 */

/* Total length of the neighbour lists of the 4513 off-codebook codes with
 * levels 0..2: a fact of the fixed codebook.  The builder never writes past
 * it. */
#define NEAR_CAP 327721

static int8_t q_tab[QK_IQ1S_NGRID][8];
static int16_t map_tab[NCODE];
static uint32_t first_tab[NCODE];
static uint16_t count_tab[NCODE];
static uint16_t near_tab[NEAR_CAP];
static qk_iq1_search search;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* ggml iq2xs_init_impl with nwant = 3: the neighbours of an off-codebook
 * code are all entries at its 3 smallest distinct squared distances, ordered
 * by (distance, index) as ggml's qsort leaves them. */
static void build(void)
{
    for (unsigned c = 0; c < NCODE; c++)
        map_tab[c] = -1;
    for (int g = 0; g < QK_IQ1S_NGRID; g++) {
        int8_t L[8];
        for (int j = 0; j < 8; j++) {
            int v = (int8_t)(uint8_t)(qk_iq1s_grid[g] >> 8 * j); /* -1, 0 or 1 */
            L[j] = (int8_t)(v + 1);
            q_tab[g][j] = (int8_t)(2 * L[j] + 1);
        }
        map_tab[qk_iq1_code(L)] = (int16_t)g;
    }
    uint32_t used = 0;
    int d2[QK_IQ1S_NGRID];
    for (unsigned c = 0; c < NCODE; c++) {
        first_tab[c] = used;
        count_tab[c] = 0;
        if (map_tab[c] >= 0)
            continue;
        int pos[8];
        for (unsigned j = 0, r = c; j < 8; j++, r /= 3)
            pos[j] = (int)(2 * (r % 3) + 1);
        for (int g = 0; g < QK_IQ1S_NGRID; g++) {
            d2[g] = 0;
            for (int j = 0; j < 8; j++)
                d2[g] += (q_tab[g][j] - pos[j]) * (q_tab[g][j] - pos[j]);
        }
        for (int k = 0, prev = -1; k < 3; k++) {
            int m = INT_MAX;
            for (int g = 0; g < QK_IQ1S_NGRID; g++)
                if (d2[g] > prev && d2[g] < m)
                    m = d2[g];
            if (m == INT_MAX)
                break;
            for (int g = 0; g < QK_IQ1S_NGRID && used < NEAR_CAP; g++)
                if (d2[g] == m) {
                    near_tab[used++] = (uint16_t)g;
                    count_tab[c]++;
                }
            prev = m;
        }
    }
    search = (qk_iq1_search){.q = (const int8_t(*)[8])q_tab, .map = map_tab, .first = first_tab,
                             .count = count_tab, .near = near_tab, .nnear = used};
}

const qk_iq1_search *qk_iq1_search_get(void)
{
    pthread_once(&once, build);
    return &search;
}

int qk_iq1_best_neighbour(const qk_iq1_search *s, unsigned code, const float *xval,
                          const float *w, float scale, const float *xg)
{
    const uint16_t *near = s->near + s->first[code];
    int n = s->count[code];
    /* ggml falls back to a full search and then asserts when no candidate
     * beats FLT_MAX, which only non-finite input causes; keep the first
     * neighbour then. */
    int best = n > 0 ? near[0] : 0;
    float best_d2 = FLT_MAX;
    for (int k = 0; k < n; k++) {
        const int8_t *q = s->q[near[k]];
        float d2 = 0;
        for (int j = 0; j < 8; j++) {
            float diff = scale * xg[(q[j] - 1) / 2] - xval[j];
            d2 += w[j] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = near[k];
        }
    }
    return best;
}
