/* wq.h - weights stored as separate parts: the layouts of quantized Hugging
 * Face checkpoints (compressed-tensors, ModelOpt, AWQ, GPTQ, MLX,
 * bitsandbytes; formats/ckpt.h finds the parts) as rows of the format table.
 *
 * DESIGN (issue #18).  A GGUF weight is one row-major byte array of one type:
 * row r is row_size bytes at data + r * row_size, and a kernel sees it
 * through one pointer.  These layouts keep codes, scales, zero points,
 * biases, group indices and global scales in separate tensors, some of them
 * transposed (AWQ packs eight output channels into a word, GPTQ eight input
 * features), so a row of the weight is no contiguous span.  Rather than
 * copying them into a GGUF-like block layout (a second copy of the model, and
 * no longer the stored bytes), a qk_wq is a small VIEW of the parts as
 * stored: a pointer and strides per part, in the file mapping.  A qk_weight
 * (lib/engine/model.h) whose `wq` is set is computed by its type's wq
 * kernels; every GGUF weight keeps its data/row_size path and its packed
 * kernels untouched (wq is NULL for them).
 *
 * Each layout is one row of the table (types.h ids QK_W_*: name, code bits
 * per weight, in_gguf false) with three kernels (qk_kernels, cpu.h):
 *   wq_rows   decoder: rows of the weight to float, exactly as the
 *             checkpoint's dequantizer (formats/ckpt.h) computes them;
 *   wq_tile   the products of a tile of rows against activation rows of the
 *             weight's activation type wq->act;
 * and each activation encoding is a row too (ids QK_A_*) with
 *   wq_act    its encoder: one float row to the encoded row, with the
 *             parameters the weight carries (static input_scale,
 *             input_global_scale, group, symmetry).
 * The activation type of a weight is not fixed by its layout (FP8 weights
 * pair with float activations in W8A16, with FP8 activations in W8A8), so it
 * is wq->act, set by the model builder from the checkpoint's
 * input_activations; F32 means none (the W*A16 schemes).
 *
 * THE PRODUCTS, two arithmetics:
 *   float  (activations F32, QK_A_FP8, QK_A_MX8, QK_A_MX4): the activation
 *          encoders of these types fake-quantize, giving floats (the
 *          quantized value times its scale, as compressed-tensors' QDQ and
 *          the engines' dequantized operands), and every output element is
 *          THE FLOAT-DOT ORDER of kernels/fdot.h (the one of F16/BF16 and of
 *          every --act-type f32 product, issue #24) over the decoded weight
 *          row (each weight decoded exactly as wq_rows does, in registers)
 *          and x: for n a multiple of 8, 8 fused multiply-add lanes and
 *          ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).  A product therefore
 *          equals the float-activation product of the dequantized row bit
 *          for bit (tests/test_wq.c checks it).
 *   integer (QK_A_I8 with W_INT8 / W_PACK, QK_A_NV4 with W_NVFP4): integer
 *          products summed exactly (int32) per scale group, then the
 *          scales in the order documented at each kernel (kernels/wq_int.c).
 *   E4M3 x E4M3 (QK_A_F8B with W_FP8 E4M3 weights of one float scale a
 *          row or a tensor, dynamic per-token or static per-tensor FP8
 *          activations): the products of the two codes' values (exact in
 *          float) summed in FP8 ORDER (kernels/wq_f8.c: 16 lanes, a pair of
 *          elements a lane step, AVX512-BF16's vdpbf16ps), then
 *          out = as * (ws * sum): vLLM's FP8 GEMM, the codes multiplied and
 *          summed in float, then both scales; QK_A_F8G, FP8_BLOCK's 128 x 128
 *          weight blocks with activations in groups of 128, the same sums
 *          per group, each scaled by its two scales into a running sum.
 * Every SIMD level returns the scalar reference's bits for every element,
 * whatever the tile (kernels/x86/avx2_wq*.c; tests/test_wq.c).  A level may
 * repack a view's codes at load (cpu.h wq_pack; lib/engine/matmul.c
 * qk_weight_pack sets the view's `packed` for the products): the stored
 * bytes rearranged, not decoded (kernels/x86/avx512_wq*.c).
 *
 * The W*A16 schemes are the float products with F32 activations: a weight
 * block decoded in registers and multiplied into float activations, the
 * semantics of issue #24's --act-type f32 for the GGUF types (cpu.h's
 * fdot_tile), in the same order (fdot.h), so both paths sum alike; under
 * --act-type f32 an A8 scheme's weight is computed this way too (matmul.c
 * gives its view float activations), its weight-only error.
 */
#ifndef QK_WQ_H
#define QK_WQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/types.h"

/* A per-cell parameter of the weight (scales, zero points, biases): element
 * (r, k) uses cell (r / rdiv, k / cdiv), or (r / rdiv, gidx[k]) with act
 * order.  The cell (R, C) is element R * rs + C * cs of the part. */
typedef struct qk_wq_grid {
    const uint8_t *p;      /* NULL: absent */
    int type;              /* QK_F32 F16 BF16 F8_E4M3 E8M0 (scales), I8 U8 I32 F* (zeros) */
    int64_t rdiv, cdiv;
    int64_t rs, cs;
    /* zero points packed in I32 words along R (CT pack-quantized, GPTQ and
     * AWQ qzeros): bits > 0; cell (R, C) is then field R % (32/bits) (AWQ:
     * at position awq order) of word (R / (32/bits)) * rs + C * cs */
    int bits;
    int offset;            /* added to a packed zero (GPTQ v1: 1) */
    bool awq_order;
    bool stream;           /* packed as one LSB-first bit stream along R instead (CT >= 0.13
                              for 3, 5, 6, 7 bits): field R at bit R * bits of word column C */
} qk_wq_grid;

/* Code layouts of the integer rows. */
enum {
    QK_WQ_WORDS = 0,  /* row-major I32 words of 32/bits whole codes (CT pack-quantized) */
    QK_WQ_STREAM,     /* row-major LSB-first bit stream (MLX; CT >= 0.13 for 3/5/6/7 bits) */
    QK_WQ_GPTQ,       /* I32 [K/pf, N]: code (n, k) in word (k/pf) * N + n */
    QK_WQ_AWQ,        /* I32 [K, N/pf]: code (n, k) in word k * N/pf + n/pf, AWQ order */
};

typedef struct qk_wq {
    int type;              /* QK_W_* */
    int act;               /* activation type of the products: QK_F32 or QK_A_* */
    int64_t rows, cols;
    uint64_t bytes;        /* stored bytes of all the parts (what a product reads) */
    int bits;              /* code width */
    int elem;              /* qk_elem (elements.h) of float codes and code books */
    int order;             /* QK_WQ_* (integer rows) */
    const uint8_t *q;      /* codes */
    int64_t q_rs;          /* bytes from row r to row r + 1 (row-major layouts) */
    int code_offset;       /* subtracted from an unsigned code (CT pack: 2^(bits-1)) */
    qk_wq_grid s;          /* scales */
    qk_wq_grid z;          /* zero points (value (q - z) * s) or MLX biases (s * q + b) */
    bool bias;             /* z holds MLX biases */
    const uint8_t *gidx;   /* I32 [cols] group of each input feature (act order), or NULL */
    float g;               /* NVFP4 global scale (CT: divisor, ModelOpt: multiplier); 1 else */
    bool g_div;            /* CT's convention: the block multiplier is float(s) / g */
    /* bitsandbytes NF4/FP4: blocks of `block` over the flattened weight,
     * absmax F32 in s (cdiv = block), or U8 codes of nested_map times
     * nested_absmax[block / nested_block] plus nested_offset */
    const uint8_t *qmap;   /* F32 [16] */
    const uint8_t *nested_map, *nested_absmax; /* F32 [256], F32 */
    int64_t block, nested_block;
    float nested_offset;
    /* the activation side (wq_act's parameters) */
    int64_t a_group;       /* elements per activation scale; 0: the whole row (token or tensor) */
    bool a_static;         /* static per-tensor scale a_scale (input_scale), else dynamic */
    float a_scale;
    float a_global;        /* NVFP4: input_global_scale */
    bool a_asym;           /* int8: asymmetric, a zero point per token */
    float a_threshold;     /* LLM.int8 (QK_A_I8O): outlier threshold (llm_int8_threshold); 0: none */
    /* QK_ACTV_UP / QK_ACTV_DOWN (kernels/actvar.h): qk-kld --noise-floor's
     * variant encoders, the divisor (or inverse scale) of every scale group
     * one float ulp the other way, the scale multiplied back unchanged; 0:
     * none (set by the matmul for a variant run, never by a checkpoint) */
    int a_variant;
    /* The rows repacked at load by the active level's wq_pack (cpu.h), for
     * its wq_tile (the products' bits are the same either way); NULL: none.
     * Set by the matmul from qk_weight.packed, never by a checkpoint. */
    const uint8_t *packed;
} qk_wq;

/* The kernel types (types.h):
 *   qk_wq_rows_fn  rows [r0, r0 + nr) decoded to float (nr * cols), as the
 *                  dequantizer;
 *   qk_wq_tile_fn  out[t * ldo + r] = product of row r0 + r (r < nr) and the
 *                  activation row t (t < nt, at y + t * ys, of type w->act);
 *                  bit for bit the same whatever r0, nr and nt;
 *   qk_wq_act_fn   the activation row x[n] encoded into dst
 *                  (qk_row_size(act, n) bytes) for the products of weight w
 *                  (its a_* parameters). */

/* Do two weights take the same encoding of the same input (act type and
 * parameters)? */
bool qk_wq_act_same(const qk_wq *a, const qk_wq *b);

/* ---- element access (little-endian, unaligned) ---------------------------- */

/* Float value of element i of a part of type t (F32 F16 BF16 F8_E4M3 F8_E5M2
 * E8M0 U8 I8 I32 U32). */
float qk_wq_val(const uint8_t *p, int type, int64_t i);
/* Scale of element (r, k). */
float qk_wq_scale(const qk_wq *w, int64_t r, int64_t k);
/* Zero point (or bias) of element (r, k) as a float, 0 when absent. */
float qk_wq_zero(const qk_wq *w, int64_t r, int64_t k);
/* Group (scale column) of input feature k. */
int64_t qk_wq_group(const qk_wq *w, int64_t k);
/* Unsigned integer code of element (r, k) of an integer row (pack, AWQ,
 * GPTQ, MLX affine). */
uint32_t qk_wq_code(const qk_wq *w, int64_t r, int64_t k);

/* ---- activation rows -------------------------------------------------------- */

/* QK_A_I8: header, then n int8 codes. */
typedef struct qk_a_i8_head {
    float scale;
    int32_t zero;          /* 0 when symmetric */
    int32_t pad[2];
} qk_a_i8_head;
#define QK_A_I8_HEAD ((size_t)sizeof(qk_a_i8_head))

/* QK_A_I8O (bitsandbytes LLM.int8): qk_a_i8_head {scale: the row's absmax
 * over its non-outliers, zero: the number of outliers}, n int8 codes (0 at
 * the outliers), then n floats: the outliers' values, 0 elsewhere. */

/* QK_A_F8B: qk_a_i8_head {scale: the token's scale (dynamic) or the static
 * input_scale}, then n BF16 words: each code's E4M3 value (exact in BF16).
 * The encoding of QK_A_FP8 (the same codes and scale), kept apart. */

/* QK_A_F8G (FP8_BLOCK's activations, dynamic per token group of 128):
 * qk_a_i8_head (unused), n BF16 words as QK_A_F8B's, then the n / 128 group
 * scales (floats). */
#define QK_A_F8G_GROUP 128

/* Does w take QK_A_F8B for its FP8 activations (E4M3 codes, one float scale
 * a row or a tensor, rows a multiple of 32, a token-wide scale)? */
bool qk_wq_f8b_takes(const qk_wq *w);
/* Does w take QK_A_F8G (E4M3 codes with float scales of 128 x 128 blocks
 * or one a row, activations in groups of 128, rows a multiple of 128)? */
bool qk_wq_f8g_takes(const qk_wq *w);

/* A checkpoint's FP8 E4M3 KV cache with a static per-tensor scale
 * (compressed-tensors kv_cache_scheme, k_scale / v_scale): x[i] =
 * e4m3(clamp(x[i] / scale, -448, 448)) * scale in place (kernels/wq_act.c). */
void qk_wq_kv_fp8(float *x, int64_t n, float scale);

/* QK_A_NV4: n/16 float block multipliers (float(scale) / global), n/16
 * int32 sums of each block's codes (the offset term of the unsigned x signed
 * byte products, kernels/x86/avx512_wq_nv4.c), then n int8 codes holding
 * twice the E2M1 value (-12..12). */
#define QK_A_NV4_BLOCK 16

#endif
