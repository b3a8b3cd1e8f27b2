/* tasks_rng.c - std::mt19937 and the two ways llama-perplexity draws task
 * indices with it, bit for bit as libstdc++ computes them
 * (/usr/include/c++/12/bits/random.tcc: mersenne_twister_engine::seed and
 * _M_gen_rand; bits/uniform_int_dist.h: uniform_int_distribution::operator()
 * and _S_nd). */
#include "lib/eval/tasks.h"

enum { MT_N = 624, MT_M = 397 };

void qk_mt_seed(qk_mt19937 *r, uint32_t seed)
{
    r->mt[0] = seed;
    for (uint32_t i = 1; i < MT_N; i++)
        r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + i;
    r->i = MT_N;
}

static void twist(qk_mt19937 *r)
{
    const uint32_t upper = 0x80000000u, lower = 0x7fffffffu, a = 0x9908b0dfu;
    uint32_t *mt = r->mt;
    int k;
    for (k = 0; k < MT_N - MT_M; k++) {
        const uint32_t y = (mt[k] & upper) | (mt[k + 1] & lower);
        mt[k] = mt[k + MT_M] ^ (y >> 1) ^ ((y & 1u) ? a : 0u);
    }
    for (; k < MT_N - 1; k++) {
        const uint32_t y = (mt[k] & upper) | (mt[k + 1] & lower);
        mt[k] = mt[k + (MT_M - MT_N)] ^ (y >> 1) ^ ((y & 1u) ? a : 0u);
    }
    const uint32_t y = (mt[MT_N - 1] & upper) | (mt[0] & lower);
    mt[MT_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ ((y & 1u) ? a : 0u);
    r->i = 0;
}

uint32_t qk_mt_next(qk_mt19937 *r)
{
    if (r->i >= MT_N)
        twist(r);
    uint32_t z = r->mt[r->i++];
    z ^= z >> 11;
    z ^= (z << 7) & 0x9d2c5680u;
    z ^= (z << 15) & 0xefc60000u;
    z ^= z >> 18;
    return z;
}

uint64_t qk_mt_uniform(qk_mt19937 *r, uint64_t hi)
{
    if (hi >= 0xffffffffu) /* __urngrange == __urange: the engine's value as it is */
        return qk_mt_next(r);
    /* __urngrange > __urange, a 32-bit engine: _S_nd<uint64_t>(urng, uint32_t(hi + 1)) */
    const uint32_t range = (uint32_t)hi + 1u;
    uint64_t product = (uint64_t)qk_mt_next(r) * range;
    uint32_t low = (uint32_t)product;
    if (low < range) {
        const uint32_t threshold = (uint32_t)(0u - range) % range;
        while (low < threshold) {
            product = (uint64_t)qk_mt_next(r) * range;
            low = (uint32_t)product;
        }
    }
    return product >> 32;
}

int64_t qk_mt_draw_float(qk_mt19937 *r, size_t n)
{
    /* float scale = 1/(1.f + (float)rng.max()); int j = int(scale*rng()*aux.size()); */
    const float scale = 1.0f / (1.0f + (float)0xffffffffu);
    const float x = scale * (float)qk_mt_next(r);
    return (int64_t)(x * (float)n);
}
