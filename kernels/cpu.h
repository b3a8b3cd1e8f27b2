/* cpu.h - run-time choice of SIMD kernels.
 *
 * The format table (types.h) keeps the scalar reference kernels in its rows;
 * they stay callable for tests.  This layer picks, once per process
 * (pthread_once), the fastest implementation of each type's dot product,
 * activation encoder (from_float) and decoder (to_float) for the CPU:
 *
 *   scalar   the table's reference kernels (any CPU)
 *   avx2     AVX2 + FMA + F16C                     (kernels/x86/avx2_*.c)
 *   avx512   AVX-512 F/BW/VL/DQ                     (kernels/x86/avx512*.c: the activation
 *            encoders, the F16/BF16 prompt products, attention; with VNNI
 *            also the packed Q4_0, Q8_0, Q4_K, Q5_K, Q6_K and IQ4_XS products)
 *
 * The level is the highest the CPU and OS support; the environment variable
 * QK_CPU=scalar|avx2|avx512 lowers it (a level the CPU lacks cannot be forced;
 * an unknown value is ignored).  Each function is compiled with
 * __attribute__((target(...))), never -march, so the binary runs on any
 * x86-64.  A level without its own kernel for a type uses the next lower one.
 *
 * Reproducibility (issue #10): every dot product and every activation
 * encoder returns the SAME BITS at every level.  Quantized dots (weights x
 * Q8_0 / Q8_K activations) sum the exact integer products per block in any
 * order (integers are associative) and then apply the reference's float
 * operations in the reference's order (per output, per block, no FMA).  The
 * float dots F16 and BF16 follow one float-dot order (llama.cpp's AVX2 one:
 * 8 float lanes with FMA and a fixed tree, or for rows that are no multiple
 * of 8 ggml_vec_dot_f16's 32 lanes; defined in float.c), which the scalar
 * reference and the
 * SIMD kernels implement alike (the AVX-512 kernels hold two such 8-lane
 * accumulators in one 512-bit register); F32 x F32 and the float-activation
 * products (fdot_tile) follow the same order (kernels/fdot.h).
 * tests/test_simd.c checks all of it with memcmp. */
#ifndef QK_CPU_H
#define QK_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/types.h"

typedef enum qk_cpu_level {
    QK_CPU_SCALAR = 0,
    QK_CPU_AVX2 = 1,
    QK_CPU_AVX512 = 2,
    QK_CPU_LEVELS = 3
} qk_cpu_level;

/* A tile of dot products: for r < nr, t < nt
 *     out[t * ldo + r] = vec_dot(n, x + r * xs, y + t * ys)
 * bit for bit, whatever nr and nt (so results never depend on the tiling). */
typedef void (*qk_dot_tile_fn)(int64_t n, const void *x, size_t xs, int nr, const void *y,
                               size_t ys, int nt, float *out, size_t ldo);

/* Repacked weights (optional, per type and level): groups of QK_PACK_ROWS
 * rows rearranged so that a kernel reads each group as one stream with the
 * rows' values side by side.
 *   pack_size: bytes of one packed group of rows of n columns, or 0 when
 *         the kernel does not take rows of n columns (they stay unpacked);
 *   pack: rows [0, QK_PACK_ROWS) at x (row stride xs, n columns) into the
 *         pack_size(n) bytes at dst;
 *   packed_tile: ng packed groups at xp (consecutive) against nt activation
 *         rows: out[t * ldo + r] for the 8 * ng rows, vec_dot's bits.
 * Optionally (all three or none) a product whose activation rows are made
 * once for the whole product rather than once per tile:
 *   pack_act_size: bytes of such a row of n columns;
 *   pack_act: one vec_dot_type row of n columns at y into the
 *         pack_act_size(n) bytes at dst, the layout the kernel reads (F16,
 *         BF16: floats; the K-quants: each block's quants permuted);
 *   packed_tile_act: packed_tile on rows made by pack_act (ys bytes apart),
 *         any nt, the same bits. */
#define QK_PACK_ROWS 8
typedef size_t (*qk_pack_size_fn)(int64_t n);
typedef void (*qk_pack_fn)(int64_t n, const void *x, size_t xs, void *dst);
typedef void (*qk_packed_tile_fn)(int64_t n, const void *xp, int ng, const void *y, size_t ys,
                                  int nt, float *out, size_t ldo);
typedef void (*qk_pack_act_fn)(int64_t n, const void *y, void *dst);

/* Float-activation products (--act-type f32, issue #24): weight rows of any
 * type with a decoder against float activation rows: for r < nr, t < nt
 *     out[t * ldo + r] = the float-dot order (kernels/fdot.h) over the
 *                        decoded row r (x + r * xs, n elements) and the
 *                        floats y + t * ys
 * which is the F32 x F32 product on the dequantized row, bit for bit, at
 * every level and whatever nr and nt.  k: the kernels of the weight type at
 * the level the function belongs to (its to_float decodes the row a block
 * at a time, never the whole matrix).  ys counts floats. */
struct qk_kernels;
typedef void (*qk_fdot_tile_fn)(const struct qk_kernels *k, int64_t n, const void *x, size_t xs,
                                int nr, const float *y, size_t ys, int nt, float *out, size_t ldo);

typedef struct qk_kernels {
    int id;                     /* type id */
    qk_vec_dot_fn vec_dot;      /* weight type: dot with its vec_dot_type row; NULL if none */
    qk_dot_tile_fn dot_tile;    /* the same as a tile, or NULL: call through qk_dot_tile() */
    qk_from_float_fn from_float;/* activation encoder of this type; NULL if none */
    qk_to_float_fn to_float;    /* decoder; NULL if none */
    qk_quantize_fn quantize;    /* weight encoder (the table's bytes exactly); NULL if none */
    qk_pack_size_fn pack_size;  /* repacking (all three set or all NULL) */
    qk_pack_fn pack;
    qk_packed_tile_fn packed_tile;
    int pack_decode;            /* packed_tile is also the faster one-token product */
    int pack_tile_rows;         /* rows per prompt-batch packed_tile call (a multiple of 8) */
    qk_pack_size_fn pack_act_size; /* activation rows made once a product, or NULL */
    qk_pack_act_fn pack_act;
    qk_packed_tile_fn packed_tile_act;
    int pack_act_tokens;        /* activation rows per packed_tile_act call (0: the engine's default) */
    /* parted checkpoint layouts (kernels/wq.h): QK_W_* decoder and products,
     * QK_A_* activation encoder; NULL for the other types */
    qk_wq_rows_fn wq_rows;
    qk_wq_tile_fn wq_tile;
    qk_wq_act_fn wq_act;
    qk_wq_pack_fn wq_pack;      /* this level's repacking of a QK_W_* view (wq.h packed), or NULL */
    /* level each came from (lower when a level has no kernel; level_pack:
     * packed_tile's, -1 when there is none) */
    signed char level_dot, level_from, level_to, level_quantize, level_pack, level_wq;
    /* float-activation product; NULL for a type without a decoder or with
     * blocks of more than 256 elements.  Every level has one for every type
     * that has a decoder: a generic kernel over to_float unless the level
     * gives the type its own */
    qk_fdot_tile_fn fdot_tile;
    signed char level_fdot;
} qk_kernels;

/* The highest level this CPU and OS support. */
qk_cpu_level qk_cpu_supported(void);
/* The level in use: qk_cpu_supported(), lowered by QK_CPU. */
qk_cpu_level qk_cpu_level_active(void);
/* "scalar", "avx2", "avx512" (NULL for a bad level). */
const char *qk_cpu_level_name(int level);
/* True when the CPU has AVX-512 VNNI (informational). */
int qk_cpu_has_vnni(void);
/* True when the CPU has AVX512-BF16 and AVX512-VBMI (the FP8 W8A8 products,
 * kernels/x86/avx512_wq_f8.c). */
int qk_cpu_has_bf16_vbmi(void);
/* True when the CPU has AMX-INT8 and the OS lets this process use the tile
 * registers (asked once), and QK_AMX=0 was not set: the AVX-512 level then
 * takes its Q4_0, Q5_0, Q8_0, IQ4_XS and INT8 W8A8 prompt products there
 * (kernels/x86/amx_packed.c, avx512_wq_i8.c; the same bits).
 * qk_cpu_set_amx(0) turns that off, (1) on again where there is AMX (tests
 * run both); not thread-safe, call it between products. */
int qk_cpu_has_amx(void);
void qk_cpu_set_amx(int on);

/* Kernels of type id at the active level, or NULL for an unknown id. */
const qk_kernels *qk_kernels_for(int id);
/* Kernels of type id at level (fallbacks filled in), or NULL when the id is
 * unknown or the CPU does not support level.  Level QK_CPU_SCALAR is the
 * format table's reference (dot_tile loops vec_dot). */
const qk_kernels *qk_kernels_at(int id, int level);

/* k's fdot_tile (which must be set). */
static inline void qk_fdot_tile(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr,
                                const float *y, size_t ys, int nt, float *out, size_t ldo)
{
    k->fdot_tile(k, n, x, xs, nr, y, ys, nt, out, ldo);
}

/* k's dot_tile, or a loop over k's vec_dot where the level has no tile kernel. */
void qk_dot_tile(const qk_kernels *k, int64_t n, const void *x, size_t xs, int nr, const void *y,
                 size_t ys, int nt, float *out, size_t ldo);

#endif
