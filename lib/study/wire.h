/* wire.h - pipeline-wire activation compression: what a pipeline-parallel
 * stage boundary would do to the residual stream if the sender quantized the
 * hidden state and the receiver dequantized it.
 *
 * Formats (one token row of n elements is one message unit; every scale is
 * the token's own, so a token's result never depends on the other tokens of
 * its batch):
 *   fp32          identity (the control: logits are bit-identical to no wire)
 *   bf16, fp16    round to nearest even (kernels/half.h); 2 bytes/element
 *   fp8-e4m3      scheme fp8_e4m3, per-token absmax scale amax/448 (F32)
 *   fp8-e5m2      scheme fp8_e5m2, per-token absmax scale amax/57344 (F32)
 *   int8-token    scheme int8, symmetric per-token scale amax/127.5 (F32)
 *   int4-token    scheme int4, symmetric per-token scale amax/7.5 (F32)
 *   int4-group32  scheme int4, one scale per 32 elements (F32)
 *   mxfp8         scheme mxfp8_e4m3: 32 FP8 E4M3 sharing an E8M0 scale
 *   mxfp6         scheme mxfp6_e2m3: 32 FP6 E2M3 sharing an E8M0 scale
 *   mxfp4         scheme mxfp4: 32 FP4 E2M1 sharing an E8M0 scale
 *   nvfp4         scheme nvfp4: 16 FP4 E2M1 sharing an E4M3 scale, times an
 *                 F32 global scale computed per token (the token row is
 *                 the tensor)
 * The scaled formats are kernels/scaled.h's schemes applied to a 1 x n
 * matrix: qk_wire_encode() writes exactly qk_scheme_encode()'s bytes and
 * qk_wire_decode() reads them back, so the quantize-dequantize is the scheme
 * kernels' own.
 *
 * Boundaries: "after layer L" (1 <= L < n_layer; the residual stream that
 * leaves layer L-1 and enters layer L).  --wire-every K puts one after every
 * K layers, --wire-at L1,L2,... at the listed ones, --stages S cuts the
 * layers into S nearly equal stages (boundaries after floor(i*n_layer/S),
 * i = 1..S-1).
 *
 * Lossless control (spec.lossless): at each boundary the hidden state (the
 * one arriving there, before any lossy codec) is rounded to bf16 and
 * compressed with zstd at levels 1 and 3, as stored (little-endian bf16) and
 * byte-shuffled (all low bytes, then all high bytes: the sign/exponent bytes
 * grouped); each boundary crossing of one forward batch is one message,
 * compressed on its own, so the ratio depends on the batch size (message
 * size) but never on the thread count. */
#ifndef QK_WIRE_H
#define QK_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"

typedef enum qk_wire_fmt {
    QK_WIRE_FP32,
    QK_WIRE_BF16,
    QK_WIRE_FP16,
    QK_WIRE_FP8_E4M3,
    QK_WIRE_FP8_E5M2,
    QK_WIRE_INT8_TOKEN,
    QK_WIRE_INT4_TOKEN,
    QK_WIRE_INT4_GROUP32,
    QK_WIRE_MXFP8,
    QK_WIRE_MXFP6,
    QK_WIRE_MXFP4,
    QK_WIRE_NVFP4,
    QK_WIRE_FMT_COUNT
} qk_wire_fmt;

#define QK_WIRE_MAX_AT 64

/* Name of a format ("int4-group32"), or NULL when out of range. */
const char *qk_wire_fmt_name(qk_wire_fmt f);
/* Parse a format name (case-insensitive). */
int qk_wire_fmt_parse(const char *s, qk_wire_fmt *f, qk_err *err);
/* Bytes one token row of n elements takes on the wire, scales included;
 * 0 when n does not suit the format (a multiple of 32 for int4-group32 and
 * MX, of 16 for nvfp4). */
size_t qk_wire_token_bytes(qk_wire_fmt f, int n);
/* One token row x[n] -> buf[qk_wire_token_bytes] and back (y may equal x). */
int qk_wire_encode(qk_wire_fmt f, const float *x, int n, uint8_t *buf, qk_err *err);
int qk_wire_decode(qk_wire_fmt f, const uint8_t *buf, int n, float *y, qk_err *err);
/* Quantize-dequantize n_tok rows of n in place, each row through its own
 * encode and decode. */
int qk_wire_qdq(qk_wire_fmt f, float *x, int n_tok, int n, qk_err *err);

/* What the options say (resolved against a model by qk_wire_init). */
typedef struct qk_wire_spec {
    qk_wire_fmt fmt;
    int every;                 /* --wire-every K (0: not given) */
    int stages;                /* --stages S (0: not given) */
    int n_at;                  /* --wire-at: boundaries after these layers */
    int at[QK_WIRE_MAX_AT];
    bool lossless;             /* --wire-lossless: zstd ratios at the boundaries */
} qk_wire_spec;

/* Parse "L1,L2,..." (positive, strictly increasing) into s->at. */
int qk_wire_parse_at(const char *text, qk_wire_spec *s, qk_err *err);

/* Counters over every boundary crossing so far. */
typedef struct qk_wire_stats {
    uint64_t messages;         /* boundary crossings (one per boundary per forward batch) */
    uint64_t tokens;           /* token rows sent */
    uint64_t elements;         /* floats sent */
    uint64_t wire_bytes;       /* their bytes in the wire format */
    uint64_t zstd[2][2];       /* lossless: compressed bytes [level 1, 3][plain, shuffled] */
} qk_wire_stats;

typedef struct qk_wire {
    qk_wire_spec spec;
    int n_layer, n_embd;
    int n_boundaries;
    uint8_t *after;            /* [n_layer]: 1 when a boundary follows layer i (0-based) */
    qk_wire_stats st;
    uint8_t *buf, *zbuf;       /* scratch for the lossless control */
    size_t cap, zcap;
    void *zctx;                /* ZSTD_CCtx */
} qk_wire;

/* Resolve the boundaries for a model of n_layer layers and n_embd-wide
 * hidden states.  Errors (code 2): no boundary given or none inside the
 * model, a layer out of range, n_embd not suiting the format. */
int qk_wire_init(qk_wire *w, const qk_wire_spec *s, int n_layer, int n_embd, qk_err *err);
void qk_wire_free(qk_wire *w);
/* Forget the counters. */
void qk_wire_reset_stats(qk_wire *w);

/* The engine hook (qk_ctx_params.layer_hook, user = the qk_wire): after
 * layer `layer` it compresses the hidden state when a boundary follows. */
int qk_wire_layer_hook(void *user, int layer, float *x, int n_tok, int n_embd, qk_err *err);

/* Bytes per element on the wire, and the lossless ratios (bf16 bytes /
 * compressed bytes; 0 when nothing was sent). */
double qk_wire_bytes_per_elem(const qk_wire_stats *s);
double qk_wire_lossless_ratio(const qk_wire_stats *s, int level_index, bool shuffled);

#endif
