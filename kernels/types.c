/* types.c - the static half of the format table (layout facts, from ggml's
 * type_traits at llama.cpp d32676d) merged with the family kernel tables. */
#include "kernels/types.h"

#include <pthread.h>
#include <stdio.h>
#include <strings.h>

#include "kernels/wq.h"

/* name, id, blck, type_size, is_quantized, needs_imatrix, in_gguf, vec_dot_type */
#define ROW(nm, id, bl, ts, q, im, gg, vd) \
    [id] = {nm, id, bl, ts, q, im, gg, vd, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL}
/* the parted checkpoint layouts and their activation rows (wq.h): the block
 * is the codes' unit (the other parts are not counted in row sizes) */
#define WROW(nm, id, bl, ts, vd) [id] = {nm, id, bl, ts, true, false, false, vd, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL}
#define AROW(nm, id, bl, ts, ex) [id] = {nm, id, bl, ts, true, false, false, -1, ex, NULL, NULL, NULL, NULL, NULL, NULL, NULL}

static qk_type_traits table[QK_TYPE_MAX] = {
    ROW("f32", QK_F32, 1, 4, false, false, true, QK_F32),
    ROW("f16", QK_F16, 1, 2, false, false, true, QK_F16),
    ROW("q4_0", QK_Q4_0, 32, 18, true, false, true, QK_Q8_0),
    ROW("q4_1", QK_Q4_1, 32, 20, true, false, true, QK_Q8_1),
    ROW("q5_0", QK_Q5_0, 32, 22, true, false, true, QK_Q8_0),
    ROW("q5_1", QK_Q5_1, 32, 24, true, false, true, QK_Q8_1),
    ROW("q8_0", QK_Q8_0, 32, 34, true, false, true, QK_Q8_0),
    ROW("q8_1", QK_Q8_1, 32, 36, true, false, true, QK_Q8_1),
    ROW("q2_K", QK_Q2_K, 256, 84, true, false, true, QK_Q8_K),
    ROW("q3_K", QK_Q3_K, 256, 110, true, false, true, QK_Q8_K),
    ROW("q4_K", QK_Q4_K, 256, 144, true, false, true, QK_Q8_K),
    ROW("q5_K", QK_Q5_K, 256, 176, true, false, true, QK_Q8_K),
    ROW("q6_K", QK_Q6_K, 256, 210, true, false, true, QK_Q8_K),
    ROW("q8_K", QK_Q8_K, 256, 292, true, false, true, -1),
    ROW("iq2_xxs", QK_IQ2_XXS, 256, 66, true, true, true, QK_Q8_K),
    ROW("iq2_xs", QK_IQ2_XS, 256, 74, true, true, true, QK_Q8_K),
    ROW("iq3_xxs", QK_IQ3_XXS, 256, 98, true, false, true, QK_Q8_K),
    ROW("iq1_s", QK_IQ1_S, 256, 50, true, true, true, QK_Q8_K),
    ROW("iq4_nl", QK_IQ4_NL, 32, 18, true, false, true, QK_Q8_0),
    ROW("iq3_s", QK_IQ3_S, 256, 110, true, false, true, QK_Q8_K),
    ROW("iq2_s", QK_IQ2_S, 256, 82, true, false, true, QK_Q8_K),
    ROW("iq4_xs", QK_IQ4_XS, 256, 136, true, false, true, QK_Q8_K),
    ROW("i8", QK_I8, 1, 1, false, false, true, -1),
    ROW("i16", QK_I16, 1, 2, false, false, true, -1),
    ROW("i32", QK_I32, 1, 4, false, false, true, -1),
    ROW("i64", QK_I64, 1, 8, false, false, true, -1),
    ROW("f64", QK_F64, 1, 8, false, false, true, -1),
    ROW("iq1_m", QK_IQ1_M, 256, 56, true, false, true, QK_Q8_K),
    ROW("bf16", QK_BF16, 1, 2, false, false, true, QK_BF16),
    ROW("tq1_0", QK_TQ1_0, 256, 54, true, false, true, QK_Q8_K),
    ROW("tq2_0", QK_TQ2_0, 256, 66, true, false, true, QK_Q8_K),
    ROW("mxfp4", QK_MXFP4, 32, 17, true, false, true, QK_Q8_0),
    ROW("nvfp4", QK_NVFP4, 64, 36, true, false, true, QK_Q8_0),
    ROW("q1_0", QK_Q1_0, 128, 18, true, false, true, QK_Q8_0),
    ROW("q2_0", QK_Q2_0, 64, 18, true, false, true, QK_Q8_0),
    /* element types of safetensors checkpoints */
    ROW("f8_e4m3", QK_F8_E4M3, 1, 1, false, false, false, -1),
    ROW("f8_e5m2", QK_F8_E5M2, 1, 1, false, false, false, -1),
    ROW("e8m0", QK_E8M0, 1, 1, false, false, false, -1),
    ROW("u8", QK_U8, 1, 1, false, false, false, -1),
    ROW("u16", QK_U16, 1, 2, false, false, false, -1),
    ROW("u32", QK_U32, 1, 4, false, false, false, -1),
    ROW("u64", QK_U64, 1, 8, false, false, false, -1),
    ROW("bool", QK_BOOL, 1, 1, false, false, false, -1),
    WROW("w_fp8", QK_W_FP8, 1, 1, QK_F32),        /* E4M3/E5M2 codes; float or E8M0 (MXFP8) scales */
    WROW("w_int8", QK_W_INT8, 1, 1, QK_F32),
    WROW("w_pack", QK_W_PACK, 1, 1, QK_F32),     /* codes of 1 to 8 bits: qk_wq.bits */
    WROW("w_nvfp4", QK_W_NVFP4, 2, 1, QK_F32),
    WROW("w_mxfp4", QK_W_MXFP4, 2, 1, QK_F32),
    WROW("w_awq", QK_W_AWQ, 1, 1, QK_F32),
    WROW("w_gptq", QK_W_GPTQ, 1, 1, QK_F32),
    WROW("w_mlx", QK_W_MLX, 1, 1, QK_F32),
    WROW("w_bnb4", QK_W_BNB4, 2, 1, QK_F32),
    WROW("w_bnb8", QK_W_BNB8, 1, 1, QK_F32),
    AROW("a_fp8", QK_A_FP8, 1, 4, 0),              /* fake-quantized floats */
    AROW("a_mxfp8", QK_A_MX8, 1, 4, 0),
    AROW("a_mxfp4", QK_A_MX4, 1, 4, 0),
    AROW("a_int8", QK_A_I8, 1, 1, QK_A_I8_HEAD),  /* header, int8 codes */
    AROW("a_nvfp4", QK_A_NV4, 16, 24, 0),          /* 16 int8 codes, a float multiplier and their int32 sum a block */
    AROW("a_llm_int8", QK_A_I8O, 1, 5, QK_A_I8_HEAD), /* header, int8 codes, float outliers */
    AROW("a_fp8_bf16", QK_A_F8B, 1, 2, QK_A_I8_HEAD),   /* header, E4M3 values as BF16 */
    AROW("a_fp8_bf16_g128", QK_A_F8G, 128, 260, QK_A_I8_HEAD), /* header, E4M3 values as BF16, group scales */
};

static const qk_kernel_ops *const families[] = {
    qk_ops_float, qk_ops_legacy, qk_ops_kquants, qk_ops_iq2, qk_ops_iq1_iq3,
    qk_ops_iq4, qk_ops_ternary, qk_ops_micro, qk_ops_lowbit, qk_ops_elements,
};

static pthread_once_t merged = PTHREAD_ONCE_INIT;

static void merge(void)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        for (const qk_kernel_ops *op = families[f]; op->id >= 0; op++) {
            if (op->id >= QK_TYPE_MAX || !table[op->id].name)
                continue;
            qk_type_traits *t = &table[op->id];
            if (op->to_float)
                t->to_float = op->to_float;
            if (op->quantize)
                t->quantize = op->quantize;
            if (op->from_float)
                t->from_float = op->from_float;
            if (op->vec_dot)
                t->vec_dot = op->vec_dot;
        }
    }
    for (const qk_wq_ops *op = qk_ops_wq; op->id >= 0; op++) {
        qk_type_traits *t = &table[op->id];
        t->wq_rows = op->wq_rows;
        t->wq_tile = op->wq_tile;
        t->wq_act = op->wq_act;
    }
}

const qk_type_traits *qk_type_get(int id)
{
    if (id < 0 || id >= QK_TYPE_MAX || !table[id].name)
        return NULL;
    pthread_once(&merged, merge);
    return &table[id];
}

const qk_type_traits *qk_type_by_name(const char *name)
{
    for (int id = 0; id < QK_TYPE_MAX; id++)
        if (table[id].name && strcasecmp(table[id].name, name) == 0)
            return qk_type_get(id);
    return NULL;
}

size_t qk_row_size(int id, int64_t ncols)
{
    const qk_type_traits *t = qk_type_get(id);
    if (!t || ncols < 0 || ncols % t->blck != 0)
        return 0;
    return (size_t)(ncols / t->blck) * t->type_size + t->row_extra;
}

double qk_type_bpw(int id)
{
    const qk_type_traits *t = qk_type_get(id);
    return t ? (double)t->type_size * 8.0 / t->blck : 0.0;
}

int qk_type_next(int prev)
{
    for (int id = prev + 1; id < QK_TYPE_MAX; id++)
        if (table[id].name)
            return id;
    return -1;
}
