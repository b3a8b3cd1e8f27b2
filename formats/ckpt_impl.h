/* ckpt_impl.h - shared by the checkpoint layout readers (ckpt_*.c): the
 * parts of one module, element access to stored tensors, and each layout's
 * setup (validate parts against the logical shape). */
#ifndef QK_CKPT_IMPL_H
#define QK_CKPT_IMPL_H

#include <stdarg.h>
#include <string.h>

#include "formats/ckpt.h"
#include "kernels/elements.h"
#include "kernels/half.h"
#include "kernels/types.h"

/* Leaves a module's tensors end in (after "MODULE."). */
enum {
    CK_WEIGHT, CK_WEIGHT_PACKED, CK_QWEIGHT,                  /* main */
    CK_WEIGHT_SCALE, CK_WEIGHT_SCALE_INV, CK_WEIGHT_SCALE_2, CK_WEIGHT_ZERO_POINT,
    CK_WEIGHT_GLOBAL_SCALE, CK_WEIGHT_G_IDX, CK_WEIGHT_SHAPE,
    CK_INPUT_SCALE, CK_INPUT_GLOBAL_SCALE, CK_INPUT_ZERO_POINT, CK_OUTPUT_SCALE,
    CK_SCALES, CK_BIASES, CK_QZEROS, CK_G_IDX, CK_SCB, CK_WEIGHT_FORMAT,
    CK_ABSMAX, CK_QUANT_MAP, CK_NESTED_ABSMAX, CK_NESTED_QUANT_MAP, CK_QSTATE_NF4, CK_QSTATE_FP4,
    CK_NLEAF
};

typedef struct ck_parts {
    const qk_hf_tensor *p[CK_NLEAF];
} ck_parts;

typedef struct ck_ctx {
    const qk_hfdir *hf;
    const qk_quantcfg *cfg;
    qk_qscheme sc;       /* the config's scheme for the module */
    qk_err *err;
} ck_ctx;

/* ---- element access (little-endian host, as the rest of qk) ------------- */

static inline bool ck_is_float(const qk_hf_tensor *t)
{
    return t->type == QK_F32 || t->type == QK_F16 || t->type == QK_BF16 || t->type == QK_F64 ||
           t->type == QK_F8_E4M3 || t->type == QK_F8_E5M2;
}

static inline bool ck_is_int(const qk_hf_tensor *t)
{
    return t->type == QK_I8 || t->type == QK_U8 || t->type == QK_I16 || t->type == QK_U16 ||
           t->type == QK_I32 || t->type == QK_U32 || t->type == QK_I64 || t->type == QK_U64;
}

/* Value i of a float tensor (ck_is_float). */
static inline float ck_f(const qk_hf_tensor *t, uint64_t i)
{
    const uint8_t *p = t->data;
    uint16_t h;
    float f;
    double d;
    switch (t->type) {
    case QK_F32: memcpy(&f, p + i * 4, 4); return f;
    case QK_F16: memcpy(&h, p + i * 2, 2); return qk_f16_to_f32(h);
    case QK_BF16: memcpy(&h, p + i * 2, 2); return qk_bf16_to_f32(h);
    case QK_F64: memcpy(&d, p + i * 8, 8); return (float)d;
    case QK_F8_E4M3: return qk_elem_decode(QK_ELEM_FP8_E4M3, p[i]);
    case QK_F8_E5M2: return qk_elem_decode(QK_ELEM_FP8_E5M2, p[i]);
    default: return 0;
    }
}

/* Value i of an integer tensor (ck_is_int). */
static inline int64_t ck_i(const qk_hf_tensor *t, uint64_t i)
{
    const uint8_t *p = t->data;
    switch (t->type) {
    case QK_I8: return (int8_t)p[i];
    case QK_U8: return p[i];
    case QK_I16: { int16_t v; memcpy(&v, p + i * 2, 2); return v; }
    case QK_U16: { uint16_t v; memcpy(&v, p + i * 2, 2); return v; }
    case QK_I32: { int32_t v; memcpy(&v, p + i * 4, 4); return v; }
    case QK_U32: { uint32_t v; memcpy(&v, p + i * 4, 4); return v; }
    case QK_I64: { int64_t v; memcpy(&v, p + i * 8, 8); return v; }
    case QK_U64: { uint64_t v; memcpy(&v, p + i * 8, 8); return (int64_t)v; }
    default: return 0;
    }
}

/* 32-bit word i of an I32/U32 tensor, unsigned. */
static inline uint32_t ck_u32(const qk_hf_tensor *t, uint64_t i)
{
    uint32_t v;
    memcpy(&v, t->data + i * 4, 4);
    return v;
}

/* ---- checks --------------------------------------------------------------- */

/* "FILE: TENSOR at offset N: what" (code 2). */
int ck_bad(ck_ctx *c, const qk_hf_tensor *t, const char *fmt, ...) QK_PRINTF(3, 4);
/* t is 2-D [r, c] (or, when allow_1d, 1-D [r] with c == 1). */
bool ck_is2(const qk_hf_tensor *t, int64_t r, int64_t c, bool allow_1d);
/* Require a float (or integer) dtype. */
int ck_need_float(ck_ctx *c, const qk_hf_tensor *t);
int ck_need_int(ck_ctx *c, const qk_hf_tensor *t);
int ck_need_type(ck_ctx *c, const qk_hf_tensor *t, int type);
/* Require t present (a companion named MODULE.leaf). */
int ck_need(ck_ctx *c, const qk_hf_tensor *main, const qk_hf_tensor *t, const char *leaf);
/* Set t->n_dims/shape/rows/cols/nelem from [n, k]. */
void ck_set_shape2(qk_ck_tensor *t, int64_t n, int64_t k);
static inline int64_t ck_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- layouts (each file's setup; the row decoders are the format table's,
 * kernels/wq.c, through qk_ckpt_wq) ---------------------------------------- */

/* ckpt_ct.c (fp8 and int8 also serve ModelOpt FP8 and quant_method fp8). */
int ck_setup_fp8(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p);
int ck_setup_int8(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p);
int ck_setup_pack(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p);
int ck_setup_fp4_ct(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p, bool nv);
/* ckpt_modelopt.c */
int ck_setup_nvfp4_mo(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p);
/* ckpt_awq_gptq.c */
int ck_setup_awq(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p);
int ck_setup_gptq(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p);
/* ckpt_mlx.c */
int ck_setup_mlx(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p);
/* ckpt_bnb.c */
int ck_setup_bnb4(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p);
int ck_setup_bnb8(ck_ctx *c, qk_ck_tensor *t, const ck_parts *p);

#endif
