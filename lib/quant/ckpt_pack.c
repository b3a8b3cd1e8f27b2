/* ckpt_pack.c - the byte layouts of qk-quant --to's output tensors (see
 * ckpt_pack.h). */
#include "lib/quant/ckpt_pack.h"

#include <string.h>

#include "kernels/half.h"
#include "kernels/types.h"

void qk_ckw_put_u32(uint8_t *p, uint64_t i, uint32_t v) { memcpy(p + i * 4, &v, 4); }

void qk_ckw_convert_floats(const float *x, uint64_t n, int type, uint8_t *out)
{
    for (uint64_t i = 0; i < n; i++) {
        if (type == QK_F32) {
            memcpy(out + i * 4, &x[i], 4);
        } else {
            uint16_t h = type == QK_F16 ? qk_f32_to_f16(x[i]) : qk_f32_to_bf16(x[i]);
            memcpy(out + i * 2, &h, 2);
        }
    }
}

/* LSB-first bit stream of n codes of any width (MLX's packing). */
void qk_ckw_pack_bits(const uint8_t *codes, int64_t n, int bits, uint8_t *out)
{
    memset(out, 0, (size_t)(((uint64_t)n * (uint64_t)bits + 7) / 8));
    for (int64_t j = 0; j < n; j++) {
        uint64_t pos = (uint64_t)j * (uint64_t)bits;
        unsigned v = (unsigned)codes[j] << (pos % 8);
        out[pos / 8] |= (uint8_t)v;
        if (v >> 8)
            out[pos / 8 + 1] |= (uint8_t)(v >> 8);
    }
}

/* pack_to_int32 (pack_quantized.py): 4-bit values stored + 8, eight to a word,
 * value i at bits 4i; rows padded with 0. */
void qk_ckw_ct_pack_rows(const uint8_t *codes, int64_t n, int64_t k, uint64_t row_bytes, bool sym, uint8_t *out)
{
    uint64_t words = (uint64_t)(k + 7) / 8;
    memset(out, 0, (size_t)((uint64_t)n * words * 4));
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < k; j++) {
            uint8_t b = codes[(uint64_t)r * row_bytes + (uint64_t)j / 2];
            uint32_t u = (j % 2 ? b >> 4 : b & 15u) ^ (sym ? 8u : 0u);
            uint64_t wi = (uint64_t)r * words + (uint64_t)j / 8;
            uint32_t v;
            memcpy(&v, out + wi * 4, 4);
            qk_ckw_put_u32(out, wi, v | u << (4 * (j % 8)));
        }
}

