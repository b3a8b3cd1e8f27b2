/* wq_f8.c - FP8 W8A8 as the engines compute it: E4M3 weight codes times
 * E4M3 activation codes, summed in float, then the two scales (wq.h, QK_A_F8B).
 *
 * compressed-tensors FP8 (FP8_DYNAMIC, static FP8, ModelOpt FP8) with one
 * weight scale a row or a tensor: vLLM quantizes the token to E4M3
 * (kernels/wq_act.c qk_wq_act_f8b), multiplies the two FP8 operands with
 * float accumulation (cutlass_scaled_mm; torch._scaled_mm on other
 * devices), then applies the scales in the epilogue, D = a_scale *
 * (b_scale * accum) (csrc/quantization/cutlass_w8a8/Epilogues.md,
 * ScaledEpilogue).  The product of two E4M3 values has at most 8 significant
 * bits, so it is exact in float: only the order of the sums is a choice.
 *
 * THE FP8 ORDER.  16 float lanes, all +0.  Elements go in pairs (k, k + 1),
 * k even, in increasing order; the pair's lane is l = (k mod 32) / 2, and
 *     lane[l] = fmaf(w[k + 1], a[k + 1], lane[l]);
 *     lane[l] = fmaf(w[k], a[k], lane[l]);
 * (the odd element first: what AVX512-BF16's vdpbf16ps does with a dword's
 * two BF16 pairs, each product exact and each sum rounded to nearest even;
 * measured on the instruction, and probed again before a level uses it,
 * kernels/x86/avx512_wq_f8.c).  Then
 *     t[l] = lane[l] + lane[l + 8]  (l < 8);
 *     sum = ((t0+t4) + (t2+t6)) + ((t1+t5) + (t3+t7));
 *     out = as * (ws * sum).
 * (One 512-bit accumulator a row: the AVX-512 level streams 16 rows at
 * once, two 8-row groups, which reads the weights faster than 8 rows with
 * two accumulators each: 14.8 against 10.2 GB/s from memory at one thread.)
 * FP8_BLOCK (QK_A_F8G: 128 x 128 weight blocks, activations in groups of
 * 128, vLLM's w8a8_block_fp8_matmul: each block's product scaled by the two
 * block scales and added up): the lanes above over each group g of 128
 * columns alone (from +0), then
 *     run[l] = fmaf(lane[l], as_g * ws_g, run[l])   (run from +0, g in order);
 *     t[l] = run[l] + run[l + 8];  out = the tree of t.
 * n is a multiple of 32 (qk_wq_f8b_takes), of 128 for FP8_BLOCK.  No sum is a float denormal:
 * every product is a multiple of 2^-18 (E4M3's least value is 2^-9), so is
 * every rounded sum, and the instruction's flushing of denormals never
 * applies. */
#include <math.h>
#include <string.h>

#include "kernels/elements.h"
#include "kernels/fdot.h"
#include "kernels/half.h"
#include "kernels/wq_impl.h"

/* E4M3 codes with float scales, no act order, rows of a multiple of m columns. */
static bool e4m3_rows(const qk_wq *w, int64_t m)
{
    const bool fscale = w->s.type == QK_F32 || w->s.type == QK_F16 || w->s.type == QK_BF16;
    return w->type == QK_W_FP8 && w->elem == QK_ELEM_FP8_E4M3 && w->s.p && fscale && !w->gidx && w->cols > 0 &&
           w->cols % m == 0;
}

bool qk_wq_f8g_takes(const qk_wq *w)
{
    return e4m3_rows(w, QK_A_F8G_GROUP) && (w->s.cdiv == QK_A_F8G_GROUP || w->s.cdiv >= w->cols) &&
           w->a_group == QK_A_F8G_GROUP && !w->a_static;
}

bool qk_wq_f8b_takes(const qk_wq *w) { return e4m3_rows(w, 32) && w->s.cdiv >= w->cols && w->a_group == 0; }

static inline float bf16_val(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return qk_bf16_to_f32(h);
}

void qk_wq_tile_f8b(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out, size_t ldo)
{
    const int64_t n = w->cols;
    const bool grp = w->act == QK_A_F8G;
    const int64_t G = grp ? QK_A_F8G_GROUP : n;
    for (int t = 0; t < nt; t++) {
        const uint8_t *row = (const uint8_t *)y + (size_t)t * ys;
        qk_a_i8_head h;
        memcpy(&h, row, sizeof h);
        const uint8_t *a = row + QK_A_I8_HEAD, *as = a + 2 * n;
        for (int r = 0; r < nr; r++) {
            const uint8_t *q = w->q + (r0 + r) * w->q_rs;
            float run[16] = {0}, lane[16];
            for (int64_t g0 = 0; g0 < n; g0 += G) {
                for (int l = 0; l < 16; l++)
                    lane[l] = 0.0f;
                for (int64_t k = g0; k < g0 + G; k += 2) {
                    float *l = &lane[(k % 32) / 2];
                    *l = fmaf(qk_elem_decode(QK_ELEM_FP8_E4M3, q[k + 1]), bf16_val(a + 2 * (k + 1)), *l);
                    *l = fmaf(qk_elem_decode(QK_ELEM_FP8_E4M3, q[k]), bf16_val(a + 2 * k), *l);
                }
                if (grp) {
                    float ag;
                    memcpy(&ag, as + 4 * (g0 / G), 4);
                    const float f = ag * qk_wq_scale(w, r0 + r, g0);
                    for (int l = 0; l < 16; l++)
                        run[l] = fmaf(lane[l], f, run[l]);
                }
            }
            const float *s = grp ? run : lane;
            float t8[8];
            for (int l = 0; l < 8; l++)
                t8[l] = s[l] + s[l + 8];
            const float sum = qk_fdot_hsum8(t8);
            out[(size_t)t * ldo + (size_t)r] = grp ? sum : h.scale * (qk_wq_scale(w, r0 + r, 0) * sum);
        }
    }
}
