/* ckpt_pack.h - the byte layouts of qk-quant --to's output tensors
 * (lib/quant/ckpt_write.c): float rows in the model's dtype, MLX's bit
 * stream, compressed-tensors' int32 packing. */
#ifndef QK_CKPT_PACK_H
#define QK_CKPT_PACK_H

#include <stdbool.h>
#include <stdint.h>

/* Little-endian word i of p. */
void qk_ckw_put_u32(uint8_t *p, uint64_t i, uint32_t v);
/* n floats as QK_F32, QK_F16 or QK_BF16 (round to nearest even). */
void qk_ckw_convert_floats(const float *x, uint64_t n, int type, uint8_t *out);
/* LSB-first bit stream of n codes of `bits` bits (MLX's packing). */
void qk_ckw_pack_bits(const uint8_t *codes, int64_t n, int bits, uint8_t *out);
/* compressed-tensors' pack_to_int32 of n rows of k 4-bit codes (two a byte,
 * row_bytes apart); sym: the codes are offset by 8 as stored. */
void qk_ckw_ct_pack_rows(const uint8_t *codes, int64_t n, int64_t k, uint64_t row_bytes, bool sym, uint8_t *out);

#endif
