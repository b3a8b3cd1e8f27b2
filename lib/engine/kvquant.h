/* kvquant.h - KV-cache quantization, simulated: keys and values are
 * quantized and dequantized as they are written into the engine's F32
 * cache (lib/engine/forward.c), and the bytes the quantized cache would hold are
 * counted.
 *
 * Types (TYPE[:SCALE] for --kv-cache):
 *   f32                identity (the control)
 *   f16, bf16          round to nearest even; 2 bytes/element
 *   fp8-e4m3, fp8-e5m2 SCALE tensor (default): one per-tensor scale of 1.0,
 *                      a plain saturating cast (vLLM's kv_cache_dtype=fp8
 *                      without calibrated scales); SCALE head: scheme fp8_*
 *                      with an absmax scale per token and KV head (F16)
 *   int8, int4         asymmetric per token and KV head: scheme uint8/uint4
 *                      (compressed-tensors minmax: scale (hi-lo)/range with
 *                      lo <= 0 <= hi, a zero point), F16 scale + 1-byte zero
 *   nvfp4              scheme nvfp4 over each token's row of all KV heads
 *                      (16-element blocks with E4M3 scales, one F32 global
 *                      scale per token row and layer): rows of kv_dim, a
 *                      multiple of 16 (heads of 8 share a block)
 * Keys per channel (key_per_channel, KIVI: Liu et al. 2024, "KIVI: A
 * Tuning-Free Asymmetric 2bit Quantization for KV Cache"): keys are kept in
 * full precision until a group of key_group tokens (aligned to positions
 * 0, G, 2G, ...) is complete, then that group is quantized with one scale
 * (and zero) per channel over its G tokens.  A query at position p sees the
 * keys of the groups complete at p (end <= p+1) quantized and the rest in
 * full precision, whatever the batch split.  Needs int8, int4 or
 * fp8-*:head.  Values stay per token.
 *
 * Rotated (rotate, --kv-rotate; QuaRot: Ashkboos et al. 2024): each head's
 * key and value row is multiplied by the normalized Hadamard matrix of
 * head_dim (kernels/hadamard.h, float64 rule) before it is quantized and
 * by it again after (H / sqrt(d) is its own inverse): what a model computes
 * when q and k are rotated online alike (q.k unchanged) and the values'
 * rotation is undone in o_proj, the rounding error then spread over the
 * head.  head_dim must be a power of two.
 *
 * Bytes per cached token count codes, scales, zero points and global
 * scales; a KIVI key group's scales are spread over its G tokens, and the
 * full-precision tail of at most G-1 keys is not counted. */
#ifndef QK_KVQUANT_H
#define QK_KVQUANT_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/core/err.h"

typedef enum qk_kvq_type {
    QK_KVQ_F32,
    QK_KVQ_F16,
    QK_KVQ_BF16,
    QK_KVQ_FP8_E4M3,
    QK_KVQ_FP8_E5M2,
    QK_KVQ_INT8,
    QK_KVQ_INT4,
    QK_KVQ_NVFP4,
    QK_KVQ_TYPE_COUNT
} qk_kvq_type;

#define QK_KVQ_KEY_GROUP 32 /* KIVI's group size G */

typedef struct qk_kvq {
    qk_kvq_type type;
    bool per_head;          /* fp8: per token-head scales (else per tensor, scale 1) */
    bool key_per_channel;   /* KIVI keys */
    int key_group;          /* tokens per key group (0: QK_KVQ_KEY_GROUP) */
    bool rotate;            /* Hadamard per head around the codec (QuaRot's K and V rotations) */
} qk_kvq;

/* Parse TYPE[:tensor|:head] into q (key_per_channel left as it is). */
int qk_kvq_parse(const char *text, qk_kvq *q, qk_err *err);
/* "int4", "fp8-e4m3:head", "int4+kivi", "int4+rot" ... into buf. */
void qk_kvq_name(const qk_kvq *q, char *buf, size_t n);
/* Whether the codec suits heads of head_dim (keys) and head_dim_v (values)
 * with n_head_kv heads (code 2 with a message when not). */
int qk_kvq_check(const qk_kvq *q, int n_head_kv, int head_dim, int head_dim_v, qk_err *err);

/* Quantize-dequantize n_tok rows of n_head heads of hd elements in place
 * (per-token codecs: every type; keys of a KIVI codec go through
 * qk_kvq_key_group instead). */
int qk_kvq_rows(const qk_kvq *q, float *rows, int n_tok, int n_head, int hd, qk_err *err);
/* KIVI: quantize-dequantize one complete key group, rows[g][dim] with
 * g = key_group tokens, one scale per channel (column). */
int qk_kvq_key_group(const qk_kvq *q, float *rows, int dim, int hd, qk_err *err);
/* The key group size in effect. */
int qk_kvq_group(const qk_kvq *q);

/* Bytes one cached token takes per layer: keys (n_head_kv heads of
 * head_dim) and values (of head_dim_v). */
void qk_kvq_token_bytes(const qk_kvq *q, int n_head_kv, int head_dim, int head_dim_v,
                        double *k_bytes, double *v_bytes);

#endif
