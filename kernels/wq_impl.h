/* wq_impl.h - shared by the parted-layout kernels (kernels/wq*.c and
 * kernels/x86/avx2_wq*.c); private to kernels/. */
#ifndef QK_WQ_IMPL_H
#define QK_WQ_IMPL_H

#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/half.h"
#include "kernels/wq.h"

/* Activation rows of one float tile pass (the lanes of each stay in registers
 * or on the stack). */
#define QK_WQ_MAX_NT 64

/* qk_wq_val, the float grid types (F32, F16, BF16) inline: kernels read a
 * scale a row and group, and a call each cost the AVX2 decode 14 % on Zen 1. */
static inline float qk_wq_val_inline(const uint8_t *p, int type, int64_t i)
{
    uint16_t h;
    float f;
    switch (type) {
    case QK_F32: memcpy(&f, p + 4 * i, 4); return f;
    case QK_F16: memcpy(&h, p + 2 * i, 2); return qk_f16_to_f32(h);
    case QK_BF16: memcpy(&h, p + 2 * i, 2); return qk_bf16_to_f32(h);
    default: return qk_wq_val(p, type, i);
    }
}

/* Elements [k0, k0 + n) of row r decoded to float (the reference). */
typedef void (*qk_wq_dec_fn)(const qk_wq *w, int64_t r, int64_t k0, int64_t n, float *y);
qk_wq_dec_fn qk_wq_decoder(int type);

/* The block multiplier of an FP4 scale byte: 2^(e-127) for E8M0 scales,
 * float(e4m3) / g or * g for NVFP4 (as ckpt_ct.c / ckpt_modelopt.c). */
float qk_wq_fp4_mult(const qk_wq *w, uint8_t sb);
/* Activation types whose rows are floats (the float products). */
bool qk_wq_act_float(int act);

/* NVFP4 W4A4 (wq_int.c): block b's exact sum of the doubled E2M1 values of
 * a weight row's codes q (two a byte, the even element low) and an
 * activation row's codes a, and the block's multiplier, dw_b * da_b (da_b
 * read from the activation row's header). */
int32_t qk_wq_nv4_isum(const uint8_t *q, const int8_t *a, int64_t b);
float qk_wq_nv4_mult(const qk_wq *w, const uint8_t *srow, const uint8_t *arow, int64_t b);

/* The integer products (wq_int.c). */
void qk_wq_tile_i8(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                   size_t ldo);
void qk_wq_tile_nv4(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                    size_t ldo);
void qk_wq_tile_f8b(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                    size_t ldo);
void qk_wq_tile_i8o(const qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                    size_t ldo);

/* The activation encoders (wq_act.c). */
void qk_wq_act_fp8(const qk_wq *w, const float *x, void *dst, int64_t n);
void qk_wq_act_mx(const qk_wq *w, const float *x, void *dst, int64_t n);
void qk_wq_act_i8(const qk_wq *w, const float *x, void *dst, int64_t n);
void qk_wq_act_nv4(const qk_wq *w, const float *x, void *dst, int64_t n);
void qk_wq_act_i8o(const qk_wq *w, const float *x, void *dst, int64_t n);
void qk_wq_act_f8b(const qk_wq *w, const float *x, void *dst, int64_t n);
void qk_wq_act_f8g(const qk_wq *w, const float *x, void *dst, int64_t n);

/* The header every level's wq_pack (cpu.h) writes at the start of its
 * packing: the packing's magic, its variant (0 where it has one form) and
 * the view's shape, the rest of the header's bytes zero.  A tile reads
 * w->packed only where qk_wq_packed_as finds its own magic and the view's
 * shape there (the AVX-512 level's tile falls back into the AVX2 one with
 * its own packing in w->packed). */
typedef struct {
    uint32_t magic;
    int32_t kind;
    int64_t rows, cols;
} qk_wq_pack_head;

static inline void qk_wq_pack_head_put(uint8_t *dst, size_t bytes, uint32_t magic, int32_t kind, const qk_wq *w)
{
    const qk_wq_pack_head h = {.magic = magic, .kind = kind, .rows = w->rows, .cols = w->cols};
    memset(dst, 0, bytes);
    memcpy(dst, &h, sizeof h);
}

/* Is w->packed the packing named magic, for w's shape (its header in *h)? */
static inline bool qk_wq_packed_as(const qk_wq *w, uint32_t magic, qk_wq_pack_head *h)
{
    if (!w->packed)
        return false;
    memcpy(h, w->packed, sizeof *h);
    return h->magic == magic && h->rows == w->rows && h->cols == w->cols;
}

/* The parts of a QK_A_NV4 row at dst of n columns (wq.h): nb block
 * multipliers, nb code sums, the codes. */
typedef struct {
    int64_t nb;
    uint8_t *mult, *sums;
    int8_t *q;
} qk_a_nv4_parts;

static inline qk_a_nv4_parts qk_a_nv4_parts_of(void *dst, int64_t n)
{
    const int64_t nb = n / QK_A_NV4_BLOCK;
    return (qk_a_nv4_parts){.nb = nb, .mult = dst, .sums = (uint8_t *)dst + nb * 4, .q = (int8_t *)dst + nb * 8};
}

/* Whether a SIMD QK_A_NV4 encoder takes w: not a noise-floor variant, the
 * global scale positive and finite (else qk_wq_act_nv4 encodes). */
static inline bool qk_a_nv4_simd_takes(const qk_wq *w)
{
    return !w->a_variant && w->a_global > 0.0f && w->a_global <= FLT_MAX;
}

#endif
