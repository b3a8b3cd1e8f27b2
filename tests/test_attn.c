/* test_attn.c - the attention inner loops (kernels/attn.h):
 * - qk_attn_expf against the C library's expf (within 2 ulp where the
 *   result is normal; 0, inf and NaN where expf gives them) and against the
 *   bits of llama.cpp's AVX2 ggml_v_expf at 16 points, fast and split-scale
 *   paths (printed by a scratch program calling ggml_vec_soft_max_f32(8, y,
 *   x, 0) of libggml-cpu, llama.cpp d32676d built for AVX2);
 * - the scalar scores, softmax step and value step follow attn.h's text
 *   (checked against a literal evaluation of it, one query at a time);
 * - every SIMD level gives the scalar reference's bits (memcmp) for query
 *   counts, key counts, head sizes and positions that cover the tails. */
#include <math.h>
#include <string.h>

#include "kernels/attn.h"
#include "kernels/cpu.h"
#include "kernels/half.h"
#include "tests/testutil.h" /* criterion.h first */

#define MAXD 136
#define MAXQ 64
#define T QK_ATT_TILE

static float ulps(float a, float b)
{
    return fabsf(a - b) / (nextafterf(fabsf(b), INFINITY) - fabsf(b));
}

Test(attn, expf_close_to_libm)
{
    float worst = 0;
    for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
        const float a = qk_attn_expf(x), b = expf(x);
        const float u = ulps(a, b);
        worst = u > worst ? u : worst;
        cr_assert_leq(u, 2.0f, "x %.9g: %.9g, expf %.9g", x, a, b);
    }
    cr_log_info("qk_attn_expf: worst %.2f ulp", worst);
    cr_assert_eq(qk_attn_expf(0.0f), 1.0f);
    cr_assert_eq(qk_attn_expf(-INFINITY), 0.0f);
    cr_assert_eq(qk_attn_expf(-200.0f), 0.0f);
    cr_assert(isinf(qk_attn_expf(100.0f)));
    cr_assert(isnan(qk_attn_expf(NAN)));
    /* below -87.3 the result is subnormal; the split scale keeps it close */
    cr_assert_leq(fabsf(qk_attn_expf(-95.0f) - expf(-95.0f)), 4e-45f);
}

Test(attn, expf_bits_of_llama_cpp_avx2)
{
    static const struct {
        float x;
        uint32_t bits;
    } v[] = {
        {0x0p+0, 0x3f800000},      {-0x1p+0, 0x3ebc5ab2},     {0x1p+0, 0x402df855},
        {-0x1p-1, 0x3f1b4597},     {-0x1.d9999ap+1, 0x3cca88fd}, {0x1.2p+1, 0x4117cdc3},
        {-0x1.4p+3, 0x383e6bce},   {-0x1.48p+4, 0x30abd1d9},  {-0x1.ep+5, 0x142d70ca},
        {-0x1.5cp+6, 0x00b33686},  {-0x1.62p+6, 0x0027fce2},  {-0x1.7cp+6, 0x00000f64},
        {-0x1.ap+6, 0x00000000},   {0x1.9p+5, 0x638c881e},    {0x1.6p+6, 0x7ef882b7},
        {0x1.62e43p-1, 0x40000000},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        const float y = qk_attn_expf(v[i].x);
        uint32_t u;
        memcpy(&u, &y, sizeof u);
        cr_expect_eq(u, v[i].bits, "x %a: %08x, llama.cpp %08x", v[i].x, u, v[i].bits);
    }
}

/* The literal text of attn.h for one query i. */
static float lit_score(const float *qt, int nqp, const float *kf, int hd, float scale, int k, int i)
{
    float s = 0.0f;
    for (int d = 0; d < hd; d++)
        s = fmaf(qt[d * nqp + i], kf[k * hd + d], s);
    return scale * s;
}

typedef struct {
    int nqp, nq, nk, hd, hdv, p0;
    float qt[MAXD * MAXQ], kf[T * MAXD], vf[T * MAXD], st[T * MAXQ], acc[MAXQ * MAXD];
    float M[MAXQ], S[MAXQ], ms[MAXQ];
    int pos[MAXQ];
} tcase;

static void make(tcase *c, uint64_t *s, int nq, int nk, int hd, int hdv, int p0)
{
    c->nq = nq, c->nqp = (nq + 7) / 8 * 8, c->nk = nk, c->hd = hd, c->hdv = hdv, c->p0 = p0;
    for (int i = 0; i < MAXD * MAXQ; i++)
        c->qt[i] = tu_gauss(s);
    for (int i = 0; i < T * MAXD; i++)
        c->kf[i] = qk_f16_to_f32(qk_f32_to_f16(tu_gauss(s))), c->vf[i] = tu_gauss(s);
    for (int i = 0; i < MAXQ * MAXD; i++)
        c->acc[i] = tu_gauss(s);
    for (int i = 0; i < c->nqp; i++) {
        /* positions before, inside and after the tile; padding queries -1 */
        c->pos[i] = i < nq ? p0 - 2 + (int)(tu_rand(s) % (uint64_t)(nk + 4)) : -1;
        const bool fresh = tu_rand(s) % 3 == 0;
        c->M[i] = fresh ? -INFINITY : tu_gauss(s) * 4.0f;
        c->S[i] = fresh ? 0.0f : 1.0f + fabsf(tu_gauss(s));
    }
}

Test(attn, scalar_follows_the_text)
{
    const qk_attn_kernels *k = qk_attn_kernels_at(QK_CPU_SCALAR);
    static tcase c;
    uint64_t s = 5;
    make(&c, &s, 13, 45, 72, 40, 64);
    const float scale = 0.125f;
    k->scores(c.qt, c.nqp, c.kf, c.nk, c.hd, scale, c.st);
    static float st0[T * MAXQ];
    memcpy(st0, c.st, sizeof st0);
    for (int kk = 0; kk < c.nk; kk++)
        for (int i = 0; i < c.nqp; i++) {
            const float want = lit_score(c.qt, c.nqp, c.kf, c.hd, scale, kk, i);
            cr_assert(!memcmp(&want, &c.st[kk * c.nqp + i], sizeof want), "score %d %d", kk, i);
        }
    float M0[MAXQ], S0[MAXQ];
    memcpy(M0, c.M, sizeof M0), memcpy(S0, c.S, sizeof S0);
    k->softmax(c.st, c.nqp, c.nk, c.p0, c.pos, c.M, c.S, c.ms);
    for (int i = 0; i < c.nq; i++) {
        const int nv = c.pos[i] + 1 - c.p0 < c.nk ? c.pos[i] + 1 - c.p0 : c.nk;
        float m = -INFINITY;
        for (int kk = 0; kk < nv; kk++)
            m = st0[kk * c.nqp + i] > m ? st0[kk * c.nqp + i] : m;
        if (m == -INFINITY) {
            cr_assert(c.M[i] == M0[i] && c.S[i] == S0[i] && c.ms[i] == 1.0f);
            for (int kk = 0; kk < c.nk; kk++)
                cr_assert_eq(c.st[kk * c.nqp + i], 0.0f);
            continue;
        }
        const float mn = fmaxf(M0[i], m), ms = mn > M0[i] ? expf(M0[i] - mn) : 1.0f;
        double sum = 0;
        for (int g = 0; g < T; g += 8) {
            float w[8];
            for (int l = 0; l < 8; l++)
                w[l] = g + l < nv ? qk_attn_expf(st0[(g + l) * c.nqp + i] - mn) : 0.0f;
            for (int l = 0; l < 8 && g + l < c.nk; l++)
                cr_assert(!memcmp(&w[l], &c.st[(g + l) * c.nqp + i], sizeof w[l]), "w %d %d", g + l, i);
            sum += (double)(((w[0] + w[4]) + (w[2] + w[6])) + ((w[1] + w[5]) + (w[3] + w[7])));
        }
        const float S = (float)((double)(mn > M0[i] ? S0[i] * ms : S0[i]) + sum);
        cr_assert(c.M[i] == mn && !memcmp(&c.ms[i], &ms, sizeof ms) && !memcmp(&c.S[i], &S, sizeof S),
                  "query %d: M %g/%g ms %g/%g S %.9g/%.9g", i, c.M[i], mn, c.ms[i], ms, c.S[i], S);
    }
    static float acc0[MAXQ * MAXD];
    memcpy(acc0, c.acc, sizeof acc0);
    k->pv(c.acc, c.nq, c.hdv, c.st, c.nqp, c.vf, c.nk);
    for (int i = 0; i < c.nq; i++)
        for (int d = 0; d < c.hdv; d++) {
            float a = acc0[i * c.hdv + d];
            for (int kk = 0; kk < c.nk; kk++)
                a = fmaf(c.st[kk * c.nqp + i], c.vf[kk * c.hdv + d], a);
            cr_assert(!memcmp(&a, &c.acc[i * c.hdv + d], sizeof a), "acc %d %d", i, d);
        }
}

Test(attn, levels_equal_scalar)
{
    const qk_attn_kernels *ref = qk_attn_kernels_at(QK_CPU_SCALAR);
    static const int nqs[] = {1, 3, 8, 13, 48, 64}, nks[] = {1, 4, 7, 37, 64}, hds[] = {8, 13, 64, 72, 128};
    static tcase a, b;
    uint64_t s = 11;
    int checked = 0;
    for (int level = 1; level <= (int)qk_cpu_supported(); level++) {
        const qk_attn_kernels *k = qk_attn_kernels_at(level);
        cr_assert(k);
        for (int rep = 0; rep < 60; rep++) {
            const int nq = nqs[rep % 6], nk = nks[rep / 6 % 5], hd = hds[(rep + rep / 5) % 5];
            const int hdv = hds[(rep + 2) % 5], p0 = rep % 2 ? 0 : 128;
            make(&a, &s, nq, nk, hd, hdv, p0);
            memcpy(&b, &a, sizeof a);
            const float scale = 1.0f / sqrtf((float)hd);
            ref->scores(a.qt, a.nqp, a.kf, nk, hd, scale, a.st);
            k->scores(b.qt, b.nqp, b.kf, nk, hd, scale, b.st);
            cr_assert(!memcmp(a.st, b.st, sizeof(float) * (size_t)(nk * a.nqp)), "scores level %d case %d",
                      level, rep);
            ref->softmax(a.st, a.nqp, nk, p0, a.pos, a.M, a.S, a.ms);
            k->softmax(b.st, b.nqp, nk, p0, b.pos, b.M, b.S, b.ms);
            cr_assert(!memcmp(a.st, b.st, sizeof(float) * (size_t)(nk * a.nqp)), "weights case %d", rep);
            cr_assert(!memcmp(a.M, b.M, sizeof a.M) && !memcmp(a.S, b.S, sizeof a.S) &&
                          !memcmp(a.ms, b.ms, sizeof a.ms),
                      "M/S/ms case %d", rep);
            ref->pv(a.acc, nq, hdv, a.st, a.nqp, a.vf, nk);
            k->pv(b.acc, nq, hdv, b.st, b.nqp, b.vf, nk);
            cr_assert(!memcmp(a.acc, b.acc, sizeof a.acc), "pv case %d", rep);
            ref->scale(a.acc, 0.37f, nq * hdv), k->scale(b.acc, 0.37f, nq * hdv);
            cr_assert(!memcmp(a.acc, b.acc, sizeof a.acc), "scale case %d", rep);
            uint16_t h[MAXD];
            for (int i = 0; i < hd; i++)
                h[i] = qk_f32_to_f16(a.qt[i]);
            ref->f16_row(h, a.vf, hd), k->f16_row(h, b.vf, hd);
            cr_assert(!memcmp(a.vf, b.vf, sizeof(float) * (size_t)hd), "f16_row case %d", rep);
            checked++;
        }
    }
    cr_log_info("%d attention kernel cases identical to scalar", checked);
}

/* scores4 on k4_rows' layout gives every level's scores on float rows, bit
 * for bit, from F16 and from float rows with a stride; each level's k4
 * layout is the scalar one. */
Test(attn, scores4_equal_scores)
{
    const qk_attn_kernels *ref = qk_attn_kernels_at(QK_CPU_SCALAR);
    static const int nqs[] = {1, 3, 4, 8, 13, 16}, nks[] = {1, 4, 7, 37, 64}, hds[] = {8, 13, 64, 72, 128, 136};
    static tcase a;
    static float k4a[T * MAXD], k4b[T * MAXD], st[T * MAXQ], rowsf[T * (MAXD + 5)];
    static uint16_t rowsh[T * (MAXD + 5)];
    uint64_t s = 17;
    int checked = 0;
    for (int level = 0; level <= (int)qk_cpu_supported(); level++) {
        const qk_attn_kernels *k = qk_attn_kernels_at(level);
        if (!k->scores4) {
            cr_log_info("level %d: no scores4 (scores on rows serve it)", level);
            continue;
        }
        for (int rep = 0; rep < 60; rep++) {
            const int nq = nqs[rep % 6], nk = nks[rep / 6 % 5], hd = hds[(rep + rep / 5) % 6];
            const int stride = hd + rep % 2 * 5, f16 = rep / 30;
            make(&a, &s, nq, nk, hd, hd, 0);
            for (int kk = 0; kk < nk; kk++)
                for (int d = 0; d < hd; d++) {
                    rowsf[kk * stride + d] = a.kf[kk * hd + d];
                    rowsh[kk * stride + d] = qk_f32_to_f16(a.kf[kk * hd + d]); /* exact: kf is F16-rounded */
                }
            const void *rows = f16 ? (const void *)rowsh : (const void *)rowsf;
            const float scale = 1.0f / sqrtf((float)hd);
            ref->scores(a.qt, a.nqp, a.kf, nk, hd, scale, a.st);
            memset(k4a, 0xff, sizeof k4a), memset(k4b, 0xff, sizeof k4b);
            ref->k4_rows(rows, f16, (size_t)stride, nk, hd, k4a);
            k->k4_rows(rows, f16, (size_t)stride, nk, hd, k4b);
            cr_assert(!memcmp(k4a, k4b, sizeof(float) * (size_t)((nk + 3) / 4 * 4 * hd)), "k4 level %d case %d",
                      level, rep);
            k->scores4(a.qt, a.nqp, nq, k4b, nk, hd, scale, st);
            for (int kk = 0; kk < nk; kk++)
                cr_assert(!memcmp(&a.st[kk * a.nqp], &st[kk * a.nqp], sizeof(float) * (size_t)nq),
                          "scores4 level %d case %d key %d", level, rep, kk);
            checked++;
        }
    }
    cr_log_info("%d scores4 cases identical to scores", checked);
}
