/* ckpt_static.h - static activation scales for qk-quant --to ct-fp8-static,
 * ct-w8a8-static and ct-nvfp4a4 (--calib TEXT), as llm-compressor 0.14's
 * QuantizationModifier with the presets FP8 and NVFP4 computes them, and
 * with config_groups of INT8 weights per channel and static per-tensor
 * INT8 activations (observer static_minmax) (compressed-tensors 0.19); and
 * the input_scale of modelopt-nvfp4 --calib, as ModelOpt 0.47's
 * mtq.quantize (NVFP4_DEFAULT_CFG, max calibration) and export_hf_checkpoint
 * write it.
 *
 * The activations: the float model (quantization stays disabled while
 * llm-compressor calibrates: its sequential pipeline runs under
 * DisableQuantization, and QuantizationModifier leaves the weights as they
 * are) run on the calibration chunks by qk's engine through the sequential
 * pipeline of lib/quant/gptq_model.h (F32 KV cache); each linear module's
 * input rows, every token of every chunk (BOS first), are seen once.
 *
 * The observer: the preset's input_activations name "static_minmax"
 * (llmcompressor/observers/min_max.py StaticMinMaxObserver): the running
 * min and max of everything seen, no moving average (the "minmax" observer
 * of older presets averaged with constant 0.01); calculate_qparams widens
 * the range to hold 0, so what counts is amax = max |x| over all tokens:
 *   FP8 (strategy tensor):   input_scale = amax / 448 (float32; amax 0 gives
 *                            float32's eps)
 *   INT8 (strategy tensor):  input_scale = amax / 127.5 (bit_range 255 / 2)
 *   NVFP4 (tensor_group 16): input_global_scale = generate_gparam =
 *                            (1 / amax) * 2688 in float32 (torch evaluates
 *                            scalar / tensor as reciprocal times scalar; 1
 *                            when that is not finite); the per-16 block
 *                            scales stay dynamic (DynamicType.LOCAL).
 * NVFP4 weights (ct-nvfp4 too: qk_ckw_nvfp4_globals): the weight observers
 * of fused siblings (q/k/v_proj, gate/up_proj under one parent,
 * llmcompressor/observers/helpers.py FUSED_LAYER_NAMES) share one
 * weight_global_scale, generate_gparam of their largest amax.
 *
 * ModelOpt: calibration runs the float model too (enable_stats_collection
 * disables every quantizer's quantization), the max calibrator keeps amax;
 * input_scale = amax / 2688 (float32, shape []); export's
 * preprocess_linear_fusion gives q/k/v_proj and gate/up_proj the largest
 * weight amax of their group, so their weight_scale_2 (amax / 2688) is
 * shared, as for ct-nvfp4a4. */
#ifndef QK_CKPT_STATIC_H
#define QK_CKPT_STATIC_H

#include <stddef.h>

#include "lib/core/err.h"
#include "lib/quant/ckpt_calib.h"

/* amax[i] = max |input| of module modules[i] ("model.layers.0.mlp.down_proj")
 * over c's calibration tokens, on src_dir's float model.  Errors (code 2):
 * a quantized or mixture-of-experts source, a module that is not a product
 * of a decoder layer, a text shorter than the chunks asked for, no
 * tokenizer; out of memory (3). */
int qk_ckpt_act_amax(const char *src_dir, const char *const *modules, size_t n, const qk_ckpt_calib *c,
                     float *amax, qk_err *err);

/* compressed-tensors 0.19 generate_gparam: 2688 * (1 / amax) in float32, 1
 * when not finite. */
float qk_ct_gparam(float amax);
/* compressed-tensors 0.19 calculate_qparams of a symmetric FP8 E4M3 tensor
 * scale: amax / 448, float32's eps for 0; of INT8: amax / 127.5. */
float qk_ct_fp8_scale(float amax);
float qk_ct_int8_scale(float amax);
/* ModelOpt 0.47 NVFP4QTensor.get_activation_scaling_factor: amax / (6 * 448). */
float qk_mo_nvfp4_input_scale(float amax);

#endif
