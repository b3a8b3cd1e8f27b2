/* types.h - the one table of number formats.
 *
 * Every tensor type qk knows (all live ggml/GGUF types, plus element formats
 * that only appear in safetensors checkpoints) has one row here: name, id,
 * block size, bytes per block, and the kernels: decode to float, encode from
 * float (optionally weighted by a per-column importance vector), the
 * activation type its dot product pairs with, and the dot product itself.
 * Nothing else in the code knows a block layout: everything asks this table.
 *
 * Kernels live in family files (float.c, legacy.c, kquants.c, iq2.c,
 * iq1_iq3.c, iq4.c, ternary.c, micro.c, lowbit.c, elements.c).  Each family exports a table of
 * qk_kernel_ops rows, terminated by a row with id -1, which types.c merges
 * into the type table.
 */
#ifndef QK_TYPES_H
#define QK_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type ids (GGUF on-disk values).  Gaps are removed types. */
typedef enum qk_type {
    QK_F32 = 0, QK_F16 = 1, QK_Q4_0 = 2, QK_Q4_1 = 3,
    QK_Q5_0 = 6, QK_Q5_1 = 7, QK_Q8_0 = 8, QK_Q8_1 = 9,
    QK_Q2_K = 10, QK_Q3_K = 11, QK_Q4_K = 12, QK_Q5_K = 13, QK_Q6_K = 14, QK_Q8_K = 15,
    QK_IQ2_XXS = 16, QK_IQ2_XS = 17, QK_IQ3_XXS = 18, QK_IQ1_S = 19, QK_IQ4_NL = 20,
    QK_IQ3_S = 21, QK_IQ2_S = 22, QK_IQ4_XS = 23,
    QK_I8 = 24, QK_I16 = 25, QK_I32 = 26, QK_I64 = 27, QK_F64 = 28,
    QK_IQ1_M = 29, QK_BF16 = 30,
    QK_TQ1_0 = 34, QK_TQ2_0 = 35,
    QK_MXFP4 = 39, QK_NVFP4 = 40, QK_Q1_0 = 41, QK_Q2_0 = 42,
    QK_GGML_TYPE_COUNT = 43,
    /* qk-only element types (never written to GGUF). */
    QK_EXT_BASE = 64,
    QK_F8_E4M3 = 64, QK_F8_E5M2 = 65, QK_E8M0 = 66,
    QK_U8 = 67, QK_U16 = 68, QK_U32 = 69, QK_U64 = 70, QK_BOOL = 71,
    /* qk-only weight layouts of quantized Hugging Face checkpoints: their parts
     * are separate tensors, seen through a qk_wq (kernels/wq.h) */
    QK_W_FP8 = 80, QK_W_INT8 = 81, QK_W_PACK = 82, QK_W_NVFP4 = 83, QK_W_MXFP4 = 84,
    QK_W_AWQ = 86, QK_W_GPTQ = 87, QK_W_MLX = 88, QK_W_BNB4 = 89, QK_W_BNB8 = 90,
    /* ... and the activation encodings of their schemes (wq.h) */
    QK_A_FP8 = 96, QK_A_MX8 = 97, QK_A_MX4 = 98, QK_A_I8 = 99, QK_A_NV4 = 100, QK_A_I8O = 101, QK_A_F8B = 102, QK_A_F8G = 103,
    QK_TYPE_MAX = 128
} qk_type;

#define QK_K 256 /* super-block size of the K-, IQ- and TQ-quants */

/* Decode n elements (n a multiple of the block size) from src to floats. */
typedef void (*qk_to_float_fn)(const void *src, float *dst, int64_t n);
/* Encode nrows rows of ncols floats into dst (rows packed back to back),
 * optionally weighted by imatrix[ncols] (NULL: none).  Must equal ggml's
 * ggml_quantize_chunk() for the same arguments, byte for byte.  Returns
 * bytes written. */
typedef size_t (*qk_quantize_fn)(const float *src, void *dst, int64_t nrows, int64_t ncols,
                                 const float *imatrix);
/* Activation-side row encoder (ggml's from_float for a vec_dot_type):
 * encode n floats (one row) into dst. */
typedef void (*qk_from_float_fn)(const float *src, void *dst, int64_t n);
/* Dot product of one weight row x (this type) and one activation row y
 * (vec_dot_type) of n elements. */
typedef float (*qk_vec_dot_fn)(int64_t n, const void *x, const void *y);

/* The kernels of the parted weight layouts (QK_W_*, QK_A_*): kernels/wq.h. */
struct qk_wq;
typedef void (*qk_wq_rows_fn)(const struct qk_wq *w, int64_t r0, int64_t nr, float *out);
typedef void (*qk_wq_tile_fn)(const struct qk_wq *w, int64_t r0, int nr, const void *y, size_t ys,
                              int nt, float *out, size_t ldo);
typedef void (*qk_wq_act_fn)(const struct qk_wq *w, const float *x, void *dst, int64_t n);
/* Repacking at load (wq.h's packed): with dst NULL the bytes of w's packed
 * form (0: this level does not pack w); else row groups [g0, g1) of 8 rows
 * (and the header with g0 = 0) written into dst, the whole packed buffer. */
typedef size_t (*qk_wq_pack_fn)(const struct qk_wq *w, uint8_t *dst, int64_t g0, int64_t g1);

typedef struct qk_kernel_ops {
    int id;
    qk_to_float_fn to_float;
    qk_quantize_fn quantize;
    qk_from_float_fn from_float;
    qk_vec_dot_fn vec_dot;
} qk_kernel_ops;

/* The parted layouts' rows (wq.c), merged into the same table. */
typedef struct qk_wq_ops {
    int id;
    qk_wq_rows_fn wq_rows;   /* QK_W_*: row decoder, products */
    qk_wq_tile_fn wq_tile;
    qk_wq_act_fn wq_act;     /* QK_A_*: activation encoder */
    qk_wq_pack_fn wq_pack;   /* QK_W_*: repacking at load for wq_tile (optional) */
} qk_wq_ops;

typedef struct qk_type_traits {
    const char *name;   /* canonical name, ggml's spelling (case-insensitive lookup) */
    int id;
    int blck;           /* elements per block */
    size_t type_size;   /* bytes per block */
    bool is_quantized;  /* block-quantized (not a plain float/int element type) */
    bool needs_imatrix; /* encoding requires an importance matrix (ggml_quantize_requires_imatrix) */
    bool in_gguf;       /* a GGUF file may hold it */
    int vec_dot_type;   /* activation type of the dot product; -1 if none */
    size_t row_extra;   /* bytes of a row besides its blocks (QK_A_I8's header) */
    qk_to_float_fn to_float;
    qk_quantize_fn quantize;
    qk_from_float_fn from_float;
    qk_vec_dot_fn vec_dot;
    qk_wq_rows_fn wq_rows;
    qk_wq_tile_fn wq_tile;
    qk_wq_act_fn wq_act;
} qk_type_traits;

/* Row for id, or NULL for an unknown or removed id. */
const qk_type_traits *qk_type_get(int id);
/* Row by name (case-insensitive: "q4_K", "Q4_K", "iq2_xxs", "BF16", ...). */
const qk_type_traits *qk_type_by_name(const char *name);
/* Bytes of a row of ncols elements, or 0 when ncols is not a multiple of the
 * block size or the type is unknown. */
size_t qk_row_size(int id, int64_t ncols);
/* Bits per weight of the type (type_size * 8 / blck). */
double qk_type_bpw(int id);
/* Iterate: ids in table order; returns -1 after the last. */
int qk_type_next(int prev_id);

/* Family kernel tables, each terminated by {.id = -1}. */
extern const qk_kernel_ops qk_ops_float[];    /* F32 F16 BF16 F64 I8..I64 U8..U64 BOOL */
extern const qk_kernel_ops qk_ops_legacy[];   /* Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 */
extern const qk_kernel_ops qk_ops_kquants[];  /* Q2_K..Q6_K Q8_K */
extern const qk_kernel_ops qk_ops_iq2[];      /* IQ2_XXS IQ2_XS IQ2_S */
extern const qk_kernel_ops qk_ops_iq1_iq3[];  /* IQ3_XXS IQ3_S IQ1_S IQ1_M */
extern const qk_kernel_ops qk_ops_iq4[];      /* IQ4_NL IQ4_XS */
extern const qk_kernel_ops qk_ops_ternary[];  /* TQ1_0 TQ2_0 */
extern const qk_kernel_ops qk_ops_micro[];    /* MXFP4 NVFP4 */
extern const qk_kernel_ops qk_ops_lowbit[];   /* Q1_0 Q2_0 */
extern const qk_kernel_ops qk_ops_elements[]; /* F8_E4M3 F8_E5M2 E8M0 (checkpoint element types) */
extern const qk_wq_ops qk_ops_wq[];           /* QK_W_* QK_A_* (parted checkpoint layouts, wq.h) */

#endif
