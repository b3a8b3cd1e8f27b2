/* scaled.h - scaled quantization of a ROWS x COLS float matrix (row-major;
 * rows are output channels of a weight, or tokens of an activation; cols run
 * along the input dimension) into element codes (elements.h) plus scales.
 *
 * Scalings ("granularity": which elements share one scale):
 *   none        bare element codes, no scale
 *   tensor      one scale for the whole matrix
 *   channel     one scale per row (per output channel of a weight)
 *   token       the same for activations: one scale per row (per token)
 *   group:G     one scale per G consecutive elements of a row (G | COLS; 32, 64, 128 usual)
 *   block:RxC   one scale per R x C tile (DeepSeek-style FP8: 128x128; edge tiles may be partial)
 *   MX          32 consecutive elements of a row share an E8M0 scale (OCP MX v1.0)
 *   NVFP4       16 consecutive elements share an FP8 E4M3 scale, times one FP32 global scale
 *
 * Scale rules (how a scale is derived; each as its reference states it):
 *   absmax  (fp8_*, fp6_*, fp4_e2m1 with a granularity; int8, int4):
 *           compressed-tensors calculate_qparams, symmetric: s = amax / (range/2)
 *           where range = qmax - qmin (int8: amax/127.5, int4: amax/7.5, fp8_e4m3:
 *           amax/448, ...), s = max(s, 2^-23); code = saturating encode of x / s
 *           (integers: round half even, clamp to [qmin, qmax]).  Decode: value(code) * s.
 *   minmax  (uint8, uint4: asymmetric with a zero point; compressed-tensors
 *           symmetric=false): lo = min(min x, 0), hi = max(max x, 0),
 *           s = max((hi - lo) / range, 2^-23), z = clamp(qmin - rint(lo / s), qmin, qmax),
 *           q = rint(clamp(x / s + z, qmin, qmax)) over the signed range
 *           (int8/int4); stored as unsigned code q - qmin and zero point
 *           z - qmin.  Decode: (code - zero) * s.
 *   MX      OCP MX v1.0 sec. 6.3: shared_exp = floor(log2(amax)) - emax_elem
 *           (emax_elem: E2M1 2, E2M3 2, E3M2 4, E4M3 8, E5M2 15, INT8 0),
 *           clamped to [-127, 127]; X = 2^shared_exp (E8M0 byte shared_exp + 127);
 *           P_i = element encode of V_i / X with round half even and clamping
 *           to +-max normal.  amax = 0 gives X = 2^-127.  A block holding
 *           NaN or +-Inf gets X = NaN (0xFF) and then decodes to all NaN
 *           (MX sec. 5: a NaN scale makes the whole block NaN).  MXINT8
 *           elements are two's complement with an implicit 2^-6 (MX sec. 5.3),
 *           encoded round half even and clamped to +-127 (the symmetric range
 *           of the MX reference code; 0x80 = -2 still decodes).
 *   NVFP4   NVIDIA TensorRT Model Optimizer (modelopt NVFP4QTensor), default:
 *           global g = amax(tensor) / (6 * 448) (weight_scale_2), block scale
 *           s = e4m3(block_amax / (6 * g)) (1.0 when block_amax = 0; clamped
 *           to 448), element code = E2M1(x / (float(s) * g)), decode
 *           value * (float(s) * g).  With opts.nvfp4_ct: compressed-tensors'
 *           convention, g = 448 * 6 / amax(tensor) (weight_global_scale),
 *           s = e4m3(clamp(g * (block_amax / 6), -448, 448)) (0 -> 0.125),
 *           code = E2M1(clamp(x / (float(s) / g), -6, 6)), decode value * (float(s) / g).
 *           E2M1 rounding is half to even in both (modelopt _cast_fp4,
 *           compressed-tensors cast_to_fp4).  An all-zero tensor gets g = 1.
 *           --global-scale G passes g (in the chosen convention) instead.
 *   bnb     bitsandbytes blockwise (kQuantizeBlockwise): absmax per group
 *           (F32), code = tree(x * (1 / absmax)) (elements.h), decode
 *           table[code] * absmax.  An all-zero group has absmax 0 and codes
 *           as bitsandbytes gives them (the tree of NaN).
 *
 * Packed byte layout of every scheme (qk_scheme_encode's output; little
 * endian; no padding or alignment between the parts, which follow in order):
 *   1. codes: row by row.  Bare schemes (granularity none) use one byte per
 *      element, the code in its low bits.  Scaled schemes pack each row as an
 *      LSB-first bit stream at the element width: element j occupies bits
 *      [j*b, j*b + b) where bit k of the row is bit k%8 of its byte k/8; so at
 *      4 bits element 2i is the low nibble of byte i and 2i+1 the high nibble
 *      (compressed-tensors/modelopt nvfp4 and mxfp4 order), at 6 bits four
 *      elements fill three bytes; a row is ceil(COLS*b/8) bytes.  int4 codes
 *      are 4-bit two's complement, uint4 unsigned, nf4/bnb_fp4 table indices.
 *   2. scales, row-major over the scale grid (tensor 1x1, channel ROWSx1,
 *      group ROWSx(COLS/G), block ceil(ROWS/R)xceil(COLS/C), MX ROWSx(COLS/32),
 *      NVFP4 ROWSx(COLS/16)): F32 (or F16/BF16, opts.scale_type) for absmax,
 *      minmax and bnb; one E8M0 byte for MX; one FP8 E4M3 byte for NVFP4.
 *   3. zero points (uint8, uint4): one unsigned byte per scale, same grid.
 *   4. NVFP4 only: the global scale, one F32.
 * qk_scheme_layout_of() gives the offset and size of each part.
 */
#ifndef QK_SCALED_H
#define QK_SCALED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/elements.h"
#include "lib/core/err.h"

typedef enum qk_gran {
    QK_GRAN_DEFAULT = 0, /* the scheme's own */
    QK_GRAN_NONE,
    QK_GRAN_TENSOR,
    QK_GRAN_ROW,   /* channel / token */
    QK_GRAN_GROUP, /* group:G */
    QK_GRAN_BLOCK, /* block:RxC */
} qk_gran;

typedef enum qk_scale_rule {
    QK_RULE_NONE,   /* bare codes only (e8m0) */
    QK_RULE_ABSMAX, /* bare unless a granularity is given (fp8_*, fp6_*, fp4_e2m1), int8, int4 */
    QK_RULE_MINMAX, /* uint8, uint4 */
    QK_RULE_MX,
    QK_RULE_NVFP4,
    QK_RULE_BNB,    /* nf4, bnb_fp4 */
} qk_scale_rule;

typedef struct qk_scheme {
    const char *name;    /* fp8_e4m3, mxfp4, nvfp4, int4, ... */
    const char *summary; /* one line for --list-types */
    qk_elem elem;
    qk_scale_rule rule;
    qk_gran gran;        /* default granularity */
    int group;           /* default (or, for MX/NVFP4, fixed) group size */
    bool gran_choice;    /* accepts a granularity option */
} qk_scheme;

typedef struct qk_scheme_opts {
    qk_gran gran;           /* QK_GRAN_DEFAULT: the scheme's */
    int group;              /* G of group:G */
    int block_rows, block_cols; /* R, C of block:RxC */
    bool has_global_scale;  /* NVFP4: use global_scale instead of computing it */
    float global_scale;
    bool nvfp4_ct;          /* NVFP4: compressed-tensors' convention (see above) */
    int scale_type;         /* absmax/minmax scales: QK_F32 (0, default), QK_F16 or QK_BF16 */
    bool nonsat;            /* bare codes: overflow to Inf/NaN (QK_ENC_NONSAT) */
} qk_scheme_opts;

typedef struct qk_scheme_layout {
    qk_gran gran;                   /* resolved granularity (MX/NVFP4/bnb: GROUP) */
    int64_t cell_rows, cell_cols;   /* elements sharing one scale: rows x cols */
    int bits;                       /* code width in the codes part (8 when bare) */
    uint64_t row_bytes;             /* bytes of one row of codes */
    uint64_t grid_rows, grid_cols;  /* scale grid (0 x 0 when bare) */
    uint64_t n_scales;
    int scale_bytes;                /* bytes per scale: 1, 2 or 4 */
    uint64_t codes_off, codes_size;
    uint64_t scales_off, scales_size;
    uint64_t zeros_off, zeros_size;
    uint64_t global_off, global_size;
    uint64_t total;
} qk_scheme_layout;

/* The scheme called name (case-insensitive), or NULL. */
const qk_scheme *qk_scheme_by_name(const char *name);
/* Iterate: qk_scheme_next(NULL) is the first, NULL after the last. */
const qk_scheme *qk_scheme_next(const qk_scheme *prev);

/* Parse a granularity: none, tensor, channel, token, row, group:G,
 * block:RxC (block alone: 128x128).  Fills o->gran/group/block_*. */
int qk_gran_parse(const char *text, qk_scheme_opts *o, qk_err *err);

/* Resolve the layout of a ROWS x COLS tensor (o may be NULL: defaults).
 * Fails (code 2, message) on a bad shape or an unsupported granularity. */
int qk_scheme_layout_of(const qk_scheme *s, int64_t rows, int64_t cols, const qk_scheme_opts *o,
                        qk_scheme_layout *l, qk_err *err);
/* Bytes of the encoding, or 0 when the shape or options are invalid. */
size_t qk_scheme_encoded_size(const qk_scheme *s, int64_t rows, int64_t cols, const qk_scheme_opts *o);
/* Encode x (rows*cols floats) into out (qk_scheme_encoded_size bytes). */
int qk_scheme_encode(const qk_scheme *s, const float *x, int64_t rows, int64_t cols,
                     const qk_scheme_opts *o, void *out, qk_err *err);
/* Decode in (qk_scheme_encoded_size bytes) into y (rows*cols floats). */
int qk_scheme_decode(const qk_scheme *s, const void *in, int64_t rows, int64_t cols,
                     const qk_scheme_opts *o, float *y, qk_err *err);
/* Quantize-dequantize: y = decode(encode(x)) (y may equal x). */
int qk_scheme_qdq(const qk_scheme *s, const float *x, int64_t rows, int64_t cols,
                  const qk_scheme_opts *o, float *y, qk_err *err);

/* ---- building blocks (for checkpoint readers and writers) ---------------- */

/* MX (OCP MX v1.0 sec. 6.3): the E8M0 scale byte of n values for element e
 * (fp8_e4m3, fp8_e5m2, fp6_*, fp4_e2m1 or int8), and one block's codes (one
 * per byte) and its decode. */
uint8_t qk_mx_scale(qk_elem e, const float *x, int n);
void qk_mx_encode_block(qk_elem e, const float *x, int n, uint8_t *scale, uint8_t *codes);
void qk_mx_decode_block(qk_elem e, uint8_t scale, const uint8_t *codes, int n, float *y);

/* NVFP4 (see above; ct selects compressed-tensors' convention). */
float qk_nvfp4_global_scale(float tensor_amax, bool ct);
uint8_t qk_nvfp4_block_scale(float block_amax, float global, bool ct);
/* The multiplier of an E2M1 value: float(s) * g, or float(s) / g for ct. */
float qk_nvfp4_dequant_scale(uint8_t scale, float global, bool ct);

/* LSB-first bit packing of n codes of width bits (4, 6 or 8) into
 * ceil(n*bits/8) bytes, and back. */
void qk_pack_codes(const uint8_t *codes, int64_t n, int bits, uint8_t *out);
void qk_unpack_codes(const uint8_t *in, int64_t n, int bits, uint8_t *codes);

#endif
