/* test_quantcfg.c - quantization configs (tests/fixtures/quantcfg/, written
 * after the formats' documentation and published checkpoints): which scheme
 * applies to which tensor of a Llama-shaped checkpoint. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "formats/hfdir.h"
#include "formats/quantcfg.h"

#define FIX "tests/fixtures/quantcfg/"

static qk_jsonv *load(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, FIX "%s", name);
    qk_jsonv *v = NULL;
    qk_err err = {0};
    cr_assert_eq(qk_hf_json_load(&v, p, 0, &err), 0, "%s", err.msg);
    return v;
}

static qk_quantcfg *open_cfg(const char *config, const char *hqc)
{
    qk_jsonv *c = config ? load(config) : NULL, *h = hqc ? load(hqc) : NULL;
    qk_quantcfg *q = NULL;
    qk_err err = {0};
    cr_assert_eq(qk_quantcfg_parse(&q, c, config, h, hqc, &err), 0, "%s", err.msg);
    qk_jsonv_free(c); /* the config keeps no pointers into the DOM */
    qk_jsonv_free(h);
    return q;
}

typedef struct want {
    const char *tensor;
    int n_dims;
    const char *desc; /* exact */
} want;

static void check(const char *config, const char *hqc, qk_qmethod method, const char *format, const want *w)
{
    qk_quantcfg *q = open_cfg(config, hqc);
    cr_expect_eq(q->method, method, "%s: method %d", config, q->method);
    cr_expect_str_eq(q->format, format, "%s", config);
    for (; w->tensor; w++) {
        qk_qscheme s;
        qk_quantcfg_scheme_for(q, w->tensor, w->n_dims, &s);
        cr_expect_str_eq(s.desc, w->desc, "%s: %s", config ? config : hqc, w->tensor);
        cr_expect_eq(s.quantized, strncmp(w->desc, "not quantized", 13) != 0);
    }
    qk_quantcfg_free(q);
}

#define END {NULL, 0, NULL}
#define NOT_LINEAR "not quantized (not a linear weight)"
#define IGNORED "not quantized (ignored)"

Test(quantcfg, compressed_tensors_w4a16)
{
    static const want w[] = {
        {"model.layers.0.self_attn.q_proj.weight", 2, "compressed-tensors pack-quantized: int4 w/ group 128 symmetric, act: none"},
        {"model.layers.0.self_attn.q_proj.weight_packed", 2, "compressed-tensors pack-quantized: int4 w/ group 128 symmetric, act: none"},
        {"model.layers.31.mlp.down_proj.weight_scale", 2, "compressed-tensors pack-quantized: int4 w/ group 128 symmetric, act: none"},
        {"lm_head.weight", 2, IGNORED},
        {"model.embed_tokens.weight", 2, "not quantized (not a linear weight)"},
        {"model.norm.weight", 1, NOT_LINEAR},
        {"model.layers.0.self_attn.q_proj.bias", 1, "not quantized (not a weight tensor)"},
        END};
    check("ct_w4a16.json", NULL, QK_QM_COMPRESSED_TENSORS, "pack-quantized", w);
    qk_quantcfg *q = open_cfg("ct_w4a16.json", NULL);
    qk_qscheme s;
    qk_quantcfg_scheme_for(q, "model.layers.0.self_attn.q_proj.weight_packed", -1, &s);
    cr_expect_str_eq(s.role, "weight_packed");
    cr_expect_str_eq(s.group, "group_0");
    cr_expect(s.w.present && s.w.num_bits == 4 && s.w.group_size == 128 && s.w.symmetric && !s.a.present);
    cr_expect_str_eq(s.w.strategy, "group");
    qk_quantcfg_free(q);
}

Test(quantcfg, compressed_tensors_fp8_int8_nvfp4_block)
{
    static const want fp8[] = {
        {"model.layers.3.mlp.experts.7.up_proj.weight", 2, "compressed-tensors float-quantized: float8 per-channel symmetric, act: float8 per-token symmetric dynamic"},
        {"model.layers.3.mlp.gate.weight", 2, IGNORED},
        {"model.layers.3.mlp.gate_proj.weight", 2, "compressed-tensors float-quantized: float8 per-channel symmetric, act: float8 per-token symmetric dynamic"},
        END};
    check("ct_fp8_dynamic.json", NULL, QK_QM_COMPRESSED_TENSORS, "float-quantized", fp8);
    static const want i8[] = {
        {"model.layers.0.mlp.up_proj.weight", 2, "compressed-tensors int-quantized: int8 per-channel symmetric, act: int8 per-token symmetric dynamic"},
        END};
    check("ct_w8a8_int.json", NULL, QK_QM_COMPRESSED_TENSORS, "int-quantized", i8);
    static const want nv[] = {
        {"model.layers.0.mlp.up_proj.weight_packed", 2, "compressed-tensors nvfp4-pack-quantized: float4 w/ tensor_group 16 symmetric, act: float4 w/ tensor_group 16 symmetric dynamic"},
        {"model.layers.0.mlp.up_proj.weight_global_scale", 1, "compressed-tensors nvfp4-pack-quantized: float4 w/ tensor_group 16 symmetric, act: float4 w/ tensor_group 16 symmetric dynamic"},
        {"model.layers.9.mlp.gate.weight", 2, IGNORED},
        END};
    check("ct_nvfp4.json", NULL, QK_QM_COMPRESSED_TENSORS, "nvfp4-pack-quantized", nv);
    static const want blk[] = {
        {"model.layers.0.self_attn.o_proj.weight", 2, "compressed-tensors float-quantized: float8 w/ block 128x128 symmetric, act: float8 w/ group 128 symmetric dynamic"},
        {"model.layers.0.self_attn.o_proj.weight_scale", 2, "compressed-tensors float-quantized: float8 w/ block 128x128 symmetric, act: float8 w/ group 128 symmetric dynamic"},
        {"model.embed_tokens.weight", 2, IGNORED},
        END};
    check("ct_fp8_block.json", NULL, QK_QM_COMPRESSED_TENSORS, "float-quantized", blk);
}

Test(quantcfg, compressed_tensors_mixed_groups)
{
    static const want w[] = {
        /* regex target beats the Linear class target */
        {"model.layers.5.self_attn.k_proj.weight", 2, "compressed-tensors int-quantized: int8 per-channel symmetric, act: int8 per-token symmetric dynamic"},
        {"model.layers.5.self_attn.k_proj_extra.weight", 2, "compressed-tensors pack-quantized: int4 w/ group 128 symmetric, act: none"},
        {"model.layers.5.mlp.up_proj.weight", 2, "compressed-tensors pack-quantized: int4 w/ group 128 symmetric, act: none"},
        /* exact name beats both */
        {"model.layers.1.mlp.down_proj.weight_packed", 2, "compressed-tensors pack-quantized: int4 w/ group 32 asymmetric, act: none"},
        {"model.layers.1.mlp.down_proj.weight_zero_point", 2, "compressed-tensors pack-quantized: int4 w/ group 32 asymmetric, act: none"},
        /* ignore regexes: re.match semantics (anchored at the start), \d */
        {"model.layers.0.mlp.up_proj.weight", 2, IGNORED},
        {"model.layers.0.self_attn.q_proj.weight", 2, "compressed-tensors int-quantized: int8 per-channel symmetric, act: int8 per-token symmetric dynamic"},
        {"model.layers.10.mlp.up_proj.weight", 2, "compressed-tensors pack-quantized: int4 w/ group 128 symmetric, act: none"},
        {"model.layers.12.mlp.gate.weight", 2, IGNORED},
        {"lm_head.weight", 2, IGNORED},
        END};
    check("ct_mixed.json", NULL, QK_QM_COMPRESSED_TENSORS, "mixed-precision", w);
}

Test(quantcfg, fp8_awq_gptq)
{
    static const want fp8[] = {
        {"model.layers.0.mlp.experts.3.down_proj.weight", 2, "fp8 e4m3: float8 w/ block 128x128 symmetric, act: float8 w/ group 128 symmetric dynamic"},
        {"model.layers.0.mlp.experts.3.down_proj.weight_scale_inv", 2, "fp8 e4m3: float8 w/ block 128x128 symmetric, act: float8 w/ group 128 symmetric dynamic"},
        {"model.layers.0.mlp.gate.weight", 2, IGNORED},
        {"lm_head.weight", 2, IGNORED},
        {"model.layers.0.input_layernorm.weight", 1, NOT_LINEAR},
        END};
    check("fp8_block.json", NULL, QK_QM_FP8, "e4m3", fp8);
    static const want awq[] = {
        {"model.layers.0.self_attn.v_proj.qweight", 2, "awq gemm: int4 w/ group 128 asymmetric, act: none"},
        {"model.layers.0.self_attn.v_proj.qzeros", 2, "awq gemm: int4 w/ group 128 asymmetric, act: none"},
        {"model.layers.0.self_attn.v_proj.scales", 2, "awq gemm: int4 w/ group 128 asymmetric, act: none"},
        {"lm_head.weight", 2, IGNORED},
        END};
    check("awq.json", NULL, QK_QM_AWQ, "gemm", awq);
    static const want gptq[] = {
        {"model.layers.0.mlp.gate_proj.qweight", 2, "gptq desc_act: int4 w/ group 128 symmetric, act: none"},
        {"model.layers.0.mlp.gate_proj.g_idx", 1, "gptq desc_act: int4 w/ group 128 symmetric, act: none"},
        {"lm_head.weight", 2, IGNORED},
        END};
    check("gptq.json", NULL, QK_QM_GPTQ, "desc_act", gptq);
    static const want g8[] = {
        {"model.layers.0.mlp.gate_proj.qweight", 2, "gptq: int8 per-channel asymmetric, act: none"},
        {"lm_head.qweight", 2, "gptq: int8 per-channel asymmetric, act: none"},
        END};
    check("gptq_channel_lmhead.json", NULL, QK_QM_GPTQ, "", g8);
}

Test(quantcfg, bitsandbytes)
{
    static const want nf4[] = {
        {"model.layers.0.mlp.up_proj.weight", 2, "bitsandbytes nf4+double-quant: nf4 w/ block 64 symmetric, act: none"},
        {"model.layers.0.mlp.up_proj.weight.absmax", 1, "bitsandbytes nf4+double-quant: nf4 w/ block 64 symmetric, act: none"},
        {"model.layers.0.mlp.up_proj.weight.quant_state.bitsandbytes__nf4", 1, "bitsandbytes nf4+double-quant: nf4 w/ block 64 symmetric, act: none"},
        {"lm_head.weight", 2, IGNORED},
        END};
    check("bnb_nf4.json", NULL, QK_QM_BNB, "nf4+double-quant", nf4);
    static const want i8[] = {
        {"model.layers.0.mlp.up_proj.weight", 2, "bitsandbytes llm.int8: int8 per-channel symmetric, act: none"},
        {"model.layers.0.mlp.up_proj.SCB", 1, "bitsandbytes llm.int8: int8 per-channel symmetric, act: none"},
        {"model.layers.0.mlp.down_proj.weight", 2, IGNORED},
        END};
    check("bnb_int8.json", NULL, QK_QM_BNB, "llm.int8", i8);
}

Test(quantcfg, mlx)
{
    static const want w[] = {
        {"model.layers.3.self_attn.q_proj.weight", 2, "mlx affine: int4 w/ group 64 asymmetric, act: none"},
        {"model.layers.3.self_attn.q_proj.scales", 2, "mlx affine: int4 w/ group 64 asymmetric, act: none"},
        {"model.layers.3.self_attn.q_proj.biases", 2, "mlx affine: int4 w/ group 64 asymmetric, act: none"},
        {"model.embed_tokens.weight", 2, "mlx affine: int6 w/ group 32 asymmetric, act: none"},
        {"model.layers.0.mlp.down_proj.weight", 2, "mlx affine: int8 w/ group 64 asymmetric, act: none"},
        {"lm_head.weight", 2, IGNORED},
        {"model.norm.weight", 1, NOT_LINEAR},
        END};
    check("mlx.json", NULL, QK_QM_MLX, "affine", w);
    static const want m4[] = {
        {"model.layers.3.mlp.up_proj.weight", 2, "mlx mxfp4: mxfp4 w/ group 32 symmetric, act: none"},
        {"model.embed_tokens.scales", 2, "mlx mxfp4: mxfp4 w/ group 32 symmetric, act: none"},
        END};
    check("mlx_mxfp4.json", NULL, QK_QM_MLX, "mxfp4", m4);
}

Test(quantcfg, modelopt)
{
    static const want nv[] = {
        {"model.layers.2.mlp.down_proj.weight", 2, "modelopt NVFP4: float4 w/ tensor_group 16 symmetric, act: float4 w/ tensor_group 16 symmetric dynamic"},
        {"model.layers.2.mlp.down_proj.weight_scale_2", 0, "modelopt NVFP4: float4 w/ tensor_group 16 symmetric, act: float4 w/ tensor_group 16 symmetric dynamic"},
        {"model.layers.2.mlp.down_proj.input_scale", 0, "modelopt NVFP4: float4 w/ tensor_group 16 symmetric, act: float4 w/ tensor_group 16 symmetric dynamic"},
        {"model.layers.2.mlp.gate.weight", 2, IGNORED},
        {"lm_head.weight", 2, IGNORED},
        END};
    check("plain.json", "modelopt_nvfp4.hf_quant_config.json", QK_QM_MODELOPT, "NVFP4", nv);
    static const want f8[] = {
        {"model.layers.1.self_attn.q_proj.weight", 2, "modelopt FP8: float8 per-tensor symmetric, act: float8 per-tensor symmetric"},
        {"model.layers.0.self_attn.q_proj.weight", 2, IGNORED},
        END};
    check(NULL, "modelopt_fp8.hf_quant_config.json", QK_QM_MODELOPT, "FP8", f8);
    static const want mx[] = {
        {"model.layers.0.mlp.down_proj.weight", 2, "modelopt MIXED_PRECISION: float8 per-tensor symmetric, act: float8 per-tensor symmetric"},
        {"model.layers.0.mlp.up_proj.weight", 2, "modelopt MIXED_PRECISION: float4 w/ tensor_group 16 symmetric, act: float4 w/ tensor_group 16 symmetric dynamic"},
        {"model.layers.0.mlp.gate_proj.weight", 2, "not quantized (no target matches)"},
        END};
    check("plain.json", "modelopt_mixed.hf_quant_config.json", QK_QM_MODELOPT, "MIXED_PRECISION", mx);
    static const want cj[] = {
        {"model.layers.1.self_attn.q_proj.weight", 2, "modelopt NVFP4: float4 w/ tensor_group 16 symmetric, act: float4 w/ tensor_group 16 symmetric dynamic"},
        {"model.layers.0.self_attn.q_proj.weight", 2, IGNORED},
        END};
    check("modelopt_config.json", NULL, QK_QM_MODELOPT, "NVFP4", cj);
}

Test(quantcfg, none_other_and_errors)
{
    static const want none[] = {{"model.layers.0.mlp.up_proj.weight", 2, "not quantized (no quantization config)"}, END};
    check("plain.json", NULL, QK_QM_NONE, "", none);
    static const want hqq[] = {{"model.layers.0.mlp.up_proj.weight", 2, "not quantized (quantization method not supported)"}, END};
    check("hqq.json", NULL, QK_QM_OTHER, "", hqq);
    qk_quantcfg *q = open_cfg("hqq.json", NULL);
    cr_expect_str_eq(q->method_name, "hqq");
    qk_quantcfg_free(q);
    qk_jsonv *c = load("bad_regex.json");
    qk_err err = {0};
    cr_expect_eq(qk_quantcfg_parse(&q, c, "bad_regex.json", NULL, NULL, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "bad_regex.json: quantization_config.config_groups.group_0.targets at offset "), "%s", err.msg);
    cr_expect(strstr(err.msg, "bad regex \"model.(layers\""), "%s", err.msg);
    cr_expect_null(q);
    qk_jsonv_free(c);
    c = load("bad_num_bits.json");
    cr_expect_eq(qk_quantcfg_parse(&q, c, "bad_num_bits.json", NULL, NULL, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "quantization_config.config_groups.group_0.weights.num_bits at offset"), "%s", err.msg);
    cr_expect(strstr(err.msg, "is string, expected an integer"), "%s", err.msg);
    qk_jsonv_free(c);
}

/* Through a model directory: stories260K has no quantization. */
Test(quantcfg, hf_directory)
{
    qk_hfdir *hf = NULL;
    qk_err err = {0};
    cr_assert_eq(qk_hf_open(&hf, "goldens/models/stories260K/hf-f32", &err), 0, "%s", err.msg);
    qk_quantcfg *q = NULL;
    cr_assert_eq(qk_quantcfg_open_hf(&q, hf, &err), 0, "%s", err.msg);
    cr_expect_eq(q->method, QK_QM_NONE);
    for (size_t i = 0; i < hf->n_tensors; i++) {
        qk_qscheme s;
        qk_quantcfg_scheme_for(q, hf->tensors[i].name, hf->tensors[i].n_dims, &s);
        cr_expect(!s.quantized);
    }
    qk_quantcfg_free(q);
    qk_hf_close(hf);
}
