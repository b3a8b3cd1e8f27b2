/* ckpt.h - quantized Hugging Face checkpoints: the logical weights of a
 * directory whose tensors were written by a quantization tool, their float
 * values (dequantization).  Writing such directories is lib/quant/ckpt_write.h's.
 *
 * A quantized module MODULE stores its weight as several tensors (the
 * "parts"); qk_ckpt_open groups them into one logical tensor MODULE.weight
 * with the shape of the original float weight [N, K] (N output channels,
 * K input features).  Layouts read (each file ckpt_*.c cites its source):
 *
 *   layout     producer / format              parts (beside MODULE.)
 *   fp8        compressed-tensors float-quantized, quant_method fp8
 *              (DeepSeek), ModelOpt FP8:      weight F8_E4M3|F8_E5M2 [N,K], weight_scale
 *              (or weight_scale_inv): 1 value, [N,1]/[N] per channel, [N,K/G] per group,
 *              [ceil(N/R),ceil(K/C)] per RxC block (edge blocks partial)
 *   int8       compressed-tensors int-quantized: weight I8 [N,K], weight_scale (as fp8),
 *              optional weight_zero_point (same grid)
 *   pack       compressed-tensors pack-quantized: weight_packed I32 [N,ceil(K/(32/b))]
 *              (or [N,ceil(K*b/32)]: newer releases pack 3/5/6/7 bits as one dense stream),
 *              weight_scale [N,ngroups], weight_shape [2], optional weight_zero_point
 *              I32 packed along N, optional weight_g_idx I32 [K]
 *   nvfp4-ct   compressed-tensors nvfp4-pack-quantized: weight_packed U8 [N,K/2],
 *              weight_scale F8_E4M3 [N,K/16], weight_global_scale F32 [1]
 *   mxfp4-ct   compressed-tensors mxfp4-pack-quantized: weight_packed U8 [N,K/2],
 *              weight_scale U8 (E8M0) [N,K/32]
 *   nvfp4-mo   ModelOpt NVFP4: weight U8 [N,K/2], weight_scale F8_E4M3 [N,K/16],
 *              weight_scale_2 F32 (scalar)
 *   awq        AutoAWQ GEMM: qweight I32 [K,N/(32/b)], qzeros I32 [K/G,N/(32/b)],
 *              scales F16 [K/G,N]; b = 4 (nibble order 0,4,1,5,2,6,3,7) or 8 (0,2,1,3)
 *   gptq       GPTQ (v1 zeros stored minus one; checkpoint_format gptq_v2 without):
 *              qweight I32 [K/(32/b),N], qzeros I32 [ngroups,N/(32/b)], scales
 *              [ngroups,N], optional g_idx I32 [K] (act-order); b = 4 or 8
 *   mlx        MLX affine: weight U32 [N,K*b/32], scales [N,K/G], biases [N,K/G],
 *              b in 2,3,4,5,6,8; mxfp4 / mxfp8 / nvfp4 modes: weight U32, scales U8
 *   bnb4       bitsandbytes NF4/FP4: weight U8 (two codes a byte, first in the high
 *              nibble), weight.absmax F32 (or U8 with weight.nested_absmax and
 *              weight.nested_quant_map), weight.quant_map F32 [16],
 *              weight.quant_state.bitsandbytes__{nf4,fp4} (JSON bytes: shape, blocksize,
 *              nested_blocksize, nested_offset); blocks run over the flattened tensor
 *   bnb8       bitsandbytes LLM.int8: weight I8 [N,K], SCB F32 [N]
 *   dense      any other tensor, as stored
 *
 * Input activation companions of a quantized module (input_scale,
 * input_global_scale, input_zero_point, output_scale) are grouped with it
 * and not listed separately.  The quantization config's claim for each
 * module is checked against its parts (ckpt_claim.c): a module claimed
 * quantized whose tensors are not, one stored in another layout, one the
 * config leaves unquantized holding quantized parts, or a quantized module
 * that also keeps a float weight, is code 2 naming the layer, the scheme and
 * the tensor missing or extra; gpt-oss's {"quant_method": "mxfp4"} is
 * checked against its experts (PROJ_blocks and PROJ_scales, or a float PROJ
 * in a module modules_to_not_convert names).  Every part's dtype and shape is checked
 * against the logical shape at open time, so dequantization cannot read out
 * of bounds; bad input is code 2 "FILE: TENSOR at offset N: what".
 */
#ifndef QK_CKPT_H
#define QK_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "formats/hfdir.h"
#include "formats/quantcfg.h"
#include "formats/transform.h"

typedef enum qk_ck_layout {
    QK_CK_DENSE = 0,
    QK_CK_FP8,
    QK_CK_INT8,
    QK_CK_PACK,
    QK_CK_NVFP4_CT,
    QK_CK_MXFP4_CT,
    QK_CK_NVFP4_MO,
    QK_CK_AWQ,
    QK_CK_GPTQ,
    QK_CK_MLX,
    QK_CK_BNB4,
    QK_CK_BNB8,
    QK_CK_LAYOUT_COUNT
} qk_ck_layout;

typedef struct qk_ck_tensor {
    char *name;              /* logical name (MODULE.weight, or the stored name when dense) */
    qk_ck_layout layout;
    char scheme[96];         /* short description: "fp8_e4m3 channel", "int4 g128 asym", ... */
    int n_dims;
    int64_t shape[QK_ST_MAX_DIMS]; /* logical shape, outermost first */
    int64_t rows, cols;      /* rows = product of shape[0..n-2], cols = shape[n-1] */
    uint64_t nelem;
    uint64_t stored_bytes;   /* bytes of every stored part */
    const qk_hf_tensor *w;   /* the stored weight (weight, weight_packed, qweight) */
    /* parts (NULL when absent) */
    const qk_hf_tensor *scale, *scale2, *zero, *gidx, *bias, *qmap, *nabsmax, *nqmap, *wshape, *qstate;
    /* parameters resolved at open */
    int bits;                /* code width */
    int64_t group;           /* elements of a row per scale (0: one scale per row or tensor) */
    int64_t block_r, block_c;/* fp8/int8 block scaling (0: none) */
    int64_t scale_rows, scale_cols; /* scale grid */
    int elem;                /* qk_elem of the codes (float layouts) */
    int scale_elem;          /* qk_elem of U8 scales (E8M0, FP8 E4M3), -1: a float dtype */
    bool zero_offset;        /* gptq v1: stored zero + 1 */
    bool zero_packed;        /* pack: zero points packed along N in I32 words */
    bool bitstream;          /* pack: dense bit stream across words (compressed-tensors >= 0.13 for
                                3, 5, 6, 7 bits) instead of 32/b whole values a word */
    int64_t blocksize, nested_blocksize; /* bnb4 */
    float nested_offset;     /* bnb4 */
} qk_ck_tensor;

typedef struct qk_ckpt {
    const qk_hfdir *hf;      /* borrowed */
    qk_quantcfg *cfg;        /* owned; method QK_QM_NONE when not quantized */
    bool quantized;          /* at least one logical tensor is not dense */
    qk_tcfg *tcfg;           /* owned: quantization_config.transform_config, or NULL */
    size_t n;
    qk_ck_tensor *t;         /* in the order of the stored main tensors */
} qk_ckpt;

const char *qk_ck_layout_name(qk_ck_layout l);

/* Group the tensors of hf (which must outlive the handle). */
int qk_ckpt_open(qk_ckpt **out, const qk_hfdir *hf, qk_err *err);
void qk_ckpt_close(qk_ckpt *c);
const qk_ck_tensor *qk_ckpt_find(const qk_ckpt *c, const char *name);

/* Float values of rows [r0, r0 + nr) of logical tensor t (nr * t->cols
 * floats into out).  Dense tensors go through the type table's decoder;
 * fails (code 2) for a dtype without one. */
int qk_ckpt_read_rows(const qk_ckpt *c, const qk_ck_tensor *t, int64_t r0, int64_t nr, float *out,
                      qk_err *err);
/* The kernels' view of a quantized (non-dense) logical tensor's parts
 * (kernels/wq.h; in the mapping, nothing copied), with float activations
 * (w->act QK_F32).  Fails (code 2, naming the tensor) for a layout the
 * products do not take. */
struct qk_wq;
int qk_ckpt_wq(const qk_ck_tensor *t, struct qk_wq *w, qk_err *err);
/* All of it: t->nelem floats. */
int qk_ckpt_read(const qk_ckpt *c, const qk_ck_tensor *t, float *out, qk_err *err);

/* MLX affine quantization (mlx/ops.cpp affine_quantize) of one row of cols
 * values in groups of group: codes (one per byte), scales and biases (cols /
 * group each, float32 before any cast to the model's dtype). */
void qk_mlx_affine_quantize_row(const float *x, int64_t cols, int group, int bits, uint8_t *codes,
                                float *scales, float *biases);

#endif
