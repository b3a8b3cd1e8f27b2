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

typedef struct qk_kernel_ops {
    int id;
    qk_to_float_fn to_float;
    qk_quantize_fn quantize;
    qk_from_float_fn from_float;
    qk_vec_dot_fn vec_dot;
} qk_kernel_ops;

typedef struct qk_type_traits {
    const char *name;   /* canonical name, ggml's spelling (case-insensitive lookup) */
    int id;
    int blck;           /* elements per block */
    size_t type_size;   /* bytes per block */
    bool is_quantized;  /* block-quantized (not a plain float/int element type) */
    bool needs_imatrix; /* encoding requires an importance matrix (ggml_quantize_requires_imatrix) */
    bool in_gguf;       /* a GGUF file may hold it */
    int vec_dot_type;   /* activation type of the dot product; -1 if none */
    qk_to_float_fn to_float;
    qk_quantize_fn quantize;
    qk_from_float_fn from_float;
    qk_vec_dot_fn vec_dot;
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

#endif
