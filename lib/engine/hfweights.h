/* hfweights.h - the weights of a quantized Hugging Face checkpoint as the
 * engine computes them: each logical tensor (formats/ckpt.h) a view of its
 * stored parts (kernels/wq.h) with the activation side its scheme declares
 * (input_activations, input_scale, input_global_scale), or a plain tensor
 * (the modules a checkpoint leaves in float: lm_head, embeddings, norms,
 * routers).  Private to lib/engine (hfmodel.c). */
#ifndef QK_HFWEIGHTS_H
#define QK_HFWEIGHTS_H

#include <stdbool.h>

#include "formats/ckpt.h"
#include "kernels/wq.h"
#include "lib/core/err.h"
#include "lib/engine/model.h"

/* The view of quantized logical tensor t of ck for the products, with its
 * activation type and parameters.  A scheme or layer the kernels cannot
 * compute is an error (code 2) naming the tensor and the config key
 * (quantization_config.config_groups.GROUP.input_activations.strategy, ...);
 * config_path names config.json. */
int qk_hf_weight_view(const qk_ckpt *ck, const qk_ck_tensor *t, const char *config_path, qk_wq *out,
                      qk_err *err);

/* The checkpoint's kv_cache_scheme (compressed-tensors quantization_config):
 * float 8 bits, tensor, static: each layer's k_scale and v_scale
 * (model.layers.N.self_attn.{k,v}_scale) into m->layers[N].kv_scale.  No
 * scheme: nothing; another one, or a missing scale: code 2 naming the key. */
int qk_hf_kv_scales(const qk_ckpt *ck, const char *config_path, qk_model *m, qk_err *err);

#endif
