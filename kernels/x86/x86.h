/* x86.h - SIMD kernel tables of kernels/x86/ (private to kernels/).
 *
 * Each file exports a table of qk_simd_ops (or qk_pack_ops) rows terminated by {.id = -1};
 * cpu.c merges them over the scalar reference.  The functions inside are
 * compiled with __attribute__((target(...))) and must only be called after
 * cpu.c has checked the CPU (qk_kernels_for / qk_kernels_at). */
#ifndef QK_X86_H
#define QK_X86_H

#include <stdbool.h>

#include "kernels/cpu.h"

typedef struct qk_simd_ops {
    int id;
    qk_dot_tile_fn dot_tile;     /* set together with vec_dot (same bits) */
    qk_vec_dot_fn vec_dot;
    qk_from_float_fn from_float;
    qk_to_float_fn to_float;
    qk_quantize_fn quantize;     /* same bytes as the table's encoder */
} qk_simd_ops;

/* Rows of packed-weight kernels (cpu.h's pack, packed_tile), terminated by {.id = -1}. */
typedef struct qk_pack_ops {
    int id;
    qk_pack_size_fn pack_size;
    qk_pack_fn pack;
    qk_packed_tile_fn packed_tile;
    int decode; /* also for one-token products (else those read the rows as they are) */
    int tile_rows; /* rows per prompt-batch packed_tile call (a multiple of 8; required) */
    qk_pack_size_fn pack_act_size;      /* optional, with pack_act and packed_tile_act (cpu.h) */
    qk_pack_act_fn pack_act;
    qk_packed_tile_fn packed_tile_act;
    int act_tokens; /* activation rows per packed_tile_act call (0: the engine's default) */
} qk_pack_ops;

/* pack_act_size of the kernels whose activation rows are made floats (F16, BF16). */
static inline size_t qk_x86_float_act_size(int64_t n) { return (size_t)n * sizeof(float); }

#if defined(__x86_64__) || defined(__i386__)
#define QK_X86 1
extern const qk_simd_ops qk_x86_avx2_legacy[];
extern const qk_simd_ops qk_x86_avx2_kquants[];
extern const qk_simd_ops qk_x86_avx2_float[];
extern const qk_pack_ops qk_x86_avx2_packed[];
extern const qk_pack_ops qk_x86_avx2_packed_k4[];
extern const qk_pack_ops qk_x86_avx2_packed_k6[];
extern const qk_pack_ops qk_x86_avx2_packed_sum[];
extern const qk_pack_ops qk_x86_avx2_packed_f[];
extern const qk_simd_ops qk_x86_avx512[];
extern const qk_simd_ops qk_x86_avx512_f32act[];
/* AVX-512 VNNI packed kernels (avx512_packed*.c; merged only where the CPU
 * has VNNI).  A row with pack NULL keeps the level below's packing. */
extern const qk_pack_ops qk_x86_avx512_packed[];
extern const qk_pack_ops qk_x86_avx512_packed_k[];
extern const qk_pack_ops qk_x86_avx512_packed_f[];

/* amx_packed.c: the first nt - nt % 16 tokens of the AVX-512 level's Q4_0,
 * Q5_0, Q8_0 or IQ4_XS tile (its packing) with AMX-INT8, the same bits;
 * returns how many it took (0 without qk_cpu_has_amx(), or for kind
 * QK_AMX_NONE). */
enum { QK_AMX_NONE, QK_AMX_Q4_0, QK_AMX_Q5_0, QK_AMX_Q8_0, QK_AMX_IQ4_XS };
int qk_x86_amx_tile32(int kind, int64_t n, const void *xp, int ng, const void *y, size_t ys, int nt, float *out,
                      size_t ldo);

/* avx2_packed.c's Q8_0 packing with every quant byte XORed with flip. */
void qk_x86_q8_0_pack_xor(int64_t n, const void *x, size_t xs, void *dst, uint8_t flip);

extern const qk_wq_ops qk_x86_avx2_wq[]; /* parted layouts (wq.h): the table's bits */
void qk_x86_avx2_wq_tile(const struct qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                         size_t ldo);
/* AVX-512: the float products on rows repacked at load (avx512_wq.c) */
extern const qk_wq_ops qk_x86_avx512_wq[];
/* INT8 W8A8 with VNNI (avx512_wq_i8.c): the packing (wq_pack's contract),
 * and the tile when w->packed is that packing (else false, nothing done) */
size_t qk_x86_avx512_i8_pack(const struct qk_wq *w, uint8_t *dst, int64_t g0, int64_t g1);
void qk_x86_avx512_act_i8(const struct qk_wq *w, const float *x, void *dst, int64_t n);
void qk_x86_avx512_act_fp8(const struct qk_wq *w, const float *x, void *dst, int64_t n);
void qk_x86_avx512_act_f8b(const struct qk_wq *w, const float *x, void *dst, int64_t n);
void qk_x86_avx512_act_f8g(const struct qk_wq *w, const float *x, void *dst, int64_t n);
/* INT8 W8A8 (W_INT8 x QK_A_I8): avx2_wq_i8.c's packing (wq_pack's contract),
 * and the tile, on that packing when w->packed is it, else on the rows as
 * stored (false: a shape it does not take, nothing done) */
size_t qk_x86_avx2_i8_pack(const struct qk_wq *w, uint8_t *dst, int64_t g0, int64_t g1);
bool qk_x86_avx2_i8_tile(const struct qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                         size_t ldo);
bool qk_x86_avx2_f8_tile(const struct qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                         size_t ldo);
/* NVFP4 W4A4 (W_NVFP4 with one E4M3 scale a 16 columns x QK_A_NV4): avx2_wq_nv4.c */
void qk_x86_avx2_nv4_tile(const struct qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                          size_t ldo);
void qk_x86_avx2_act_nv4(const struct qk_wq *w, const float *x, void *dst, int64_t n);
size_t qk_x86_avx512_f8_pack(const struct qk_wq *w, uint8_t *dst, int64_t g0, int64_t g1);
bool qk_x86_avx512_f8_tile(const struct qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                           size_t ldo);
bool qk_x86_avx512_i8_tile(const struct qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                           size_t ldo);
/* NVFP4 W4A4 with VNNI (avx512_wq_nv4.c): the same three */
size_t qk_x86_avx512_nv4_pack(const struct qk_wq *w, uint8_t *dst, int64_t g0, int64_t g1);
void qk_x86_avx512_act_nv4(const struct qk_wq *w, const float *x, void *dst, int64_t n);
bool qk_x86_avx512_nv4_tile(const struct qk_wq *w, int64_t r0, int nr, const void *y, size_t ys, int nt, float *out,
                            size_t ldo);
/* Prompt batches on weights decoded to floats once per span of 8 rows
 * (avx512_float.c; the F16 packing's, avx512_wq.c's float products): the
 * source decodes group g's columns [k0, k0 + nc) into wf, chunk j of 8
 * columns at wf + 64 j, per row pair p row 2p's 8 floats then row 2p + 1's,
 * and names the bytes that decoding reads (prefetched while the group
 * before it is in use).  Every output is THE FLOAT-DOT ORDER (fdot.h) of
 * its row's floats and the token's: y holds nt rows of n floats, ys bytes
 * apart; out[t * ldo + 8 g + r]. */
typedef struct qk_x86_wf_src qk_x86_wf_src;
struct qk_x86_wf_src {
    void (*decode)(const qk_x86_wf_src *s, int g, int64_t k0, int nc, float *wf);
    const uint8_t *(*bytes)(const qk_x86_wf_src *s, int g, int64_t k0, int nc, size_t *len);
    int align; /* spans start and end at multiples of this many columns (8 or 16; n is one) */
};
void qk_x86_avx512_wf_tile(int64_t n, int ng, const qk_x86_wf_src *src, const void *y, size_t ys, int nt, float *out,
                           size_t ldo);
/* Float-activation products and the F32 x F32 tile (avx2_f32act.c): the
 * generic tile over any type's to_float at the AVX2 level. */
extern const qk_simd_ops qk_x86_avx2_f32act[];
void qk_x86_avx2_fdot_tile(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr,
                           const float *y, size_t ys, int nt, float *out, size_t ldo);
void qk_x86_avx512_fdot_tile(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr,
                             const float *y, size_t ys, int nt, float *out, size_t ldo);

/* glibc's expf of x[i] - sub, and SwiGLU with it (avx2_expf.c, avx512_expf.c; see kernels/expf.h). */
struct qk_expf_ops;
extern const struct qk_expf_ops qk_x86_avx2_expf_ops, qk_x86_avx512_expf_ops;

/* Outer-product sums (avx2_gram.c, avx512_gram.c; see kernels/gram.h). */
void qk_x86_avx2_gram(double *s, int64_t d, const float *x, int64_t n, int64_t i0, int64_t i1);
void qk_x86_avx512_gram(double *s, int64_t d, const float *x, int64_t n, int64_t i0, int64_t i1);

/* GPTQ's loops (avx2_gptq.c, avx512_gptq.c; see kernels/gptq_ops.h); the AVX-512 table keeps
 * AVX2's rows of V; inv_finish: the scalar rest of an element of U from term m0 of its dot on. */
struct qk_gptq_ops;
extern const struct qk_gptq_ops qk_x86_avx2_gptq;
extern const struct qk_gptq_ops qk_x86_avx512_gptq;
void qk_x86_avx2_chol_rows(double *a, int64_t n, int64_t r0, int64_t r1, int64_t jlo, int64_t jhi);
double qk_x86_gptq_inv_finish(const double *vi, const double *p, int64_t w, int64_t c, int64_t i, int64_t len,
                              int64_t m0, double s[4]);

/* Attention inner loops (avx2_attn.c; see attn.h). */
struct qk_attn_kernels;
extern const struct qk_attn_kernels qk_x86_avx2_attn;
extern const struct qk_attn_kernels qk_x86_avx512_attn; /* avx512_attn.c */
void qk_x86_avx2_attn_scale(float *acc, float s, int n); /* its scale too */

/* Eight-group scale searches (avx2_search.c; see quant_common.h). */
void qk_x86_avx2_make_qx_quants_x8(int n, int nmax, const float *x, int8_t *L, const float *qw,
                                   float *scales);
void qk_x86_avx2_make_qkx_quants_x8(int n, int nmax, const float *x, const float *weights,
                                    uint8_t *L, float *scales, float *the_mins, float rmin,
                                    float rdelta, int nstep, bool use_mad);
/* IQ4's sub-block scale search (kernels/iq4.c sub_scale) on 8 groups of 32:
 * group g is x + 32g (importance qw + 32g or NULL) with sigma2[g]. */
void qk_x86_avx2_iq4_scales_x8(const float *x, const float *qw, const float *sigma2,
                               const int8_t *codebook, int ntry, float *scales);
/* ggml's kvalues_iq4nl (avx2_legacy.c). */
extern const int8_t qk_x86_iq4nl_values[16];

/* IQ4's pack_sub: 32 values at inverse scale id to 16 bytes of codebook-index nibbles. */
void qk_x86_avx2_iq4_pack(const float *x, float id, const int8_t *codebook, uint8_t *qs);
#endif

/* A vec_dot that is a 1 x 1 tile of `tile`. */
#define QK_VEC_DOT_OF_TILE(name, tile)                            \
    static float name(int64_t n, const void *x, const void *y)    \
    {                                                             \
        float o;                                                  \
        tile(n, x, 0, 1, y, 0, 1, &o, 1);                         \
        return o;                                                 \
    }

/* QK_TILE_OF_DOTT(name, dotT, T): a tile kernel from dotT(n, x, y[T], nt,
 * out[T]), one weight row against up to T activation rows: tokens in groups
 * of T, each group against every row. */
#define QK_TILE_OF_DOTT(name, dotT, T)                                                      \
    static void name(int64_t n, const void *x, size_t xs, int nr, const void *y, size_t ys, \
                     int nt, float *out, size_t ldo)                                        \
    {                                                                                       \
        for (int t0 = 0; t0 < nt; t0 += T) {                                                \
            const int q = nt - t0 < T ? nt - t0 : T;                                        \
            const uint8_t *yr[T];                                                           \
            for (int k = 0; k < q; k++)                                                     \
                yr[k] = (const uint8_t *)y + (size_t)(t0 + k) * ys;                         \
            for (int r = 0; r < nr; r++) {                                                  \
                float o[T];                                                                 \
                dotT(n, (const uint8_t *)x + (size_t)r * xs, yr, q, o);                     \
                for (int k = 0; k < q; k++)                                                 \
                    out[(size_t)(t0 + k) * ldo + (size_t)r] = o[k];                         \
            }                                                                               \
        }                                                                                   \
    }

/* Target attribute strings of the levels. */
#define QK_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define QK_TARGET_AVX512 \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define QK_TARGET_AVX512VNNI \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define QK_TARGET_AMX \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8")))
#define QK_TARGET_AVX512BF16 \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512bf16")))

/* The AMX tile palette (ldtilecfg's 64 bytes, palette 1).  Kernels keep
 * theirs as a constant: GCC 12's _tile_loadconfig names only the first 8
 * bytes of its operand as read, so the stores of a local one can be dropped. */
typedef struct {
    uint8_t palette, start;
    uint8_t rsv[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} qk_amx_cfg;

#endif
