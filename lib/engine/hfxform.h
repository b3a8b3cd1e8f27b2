/* hfxform.h - the online transforms of a Hugging Face checkpoint's
 * transform_config (formats/transform.h) set on the model's weights. */
#ifndef QK_HFXFORM_H
#define QK_HFXFORM_H

#include "formats/hfdir.h"
#include "formats/transform.h"
#include "lib/engine/model.h"

/* For every online entry of t: location "input" on a decoder layer's linear
 * layers (self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj) sets the
 * weight's in_had (block: the group's head_dim, else the layer's input
 * size).  A stored transform matrix (MODULE.GROUP_input.weight) must be
 * Sylvester's matrix of that size.  Code 2 naming config.json (path), the
 * group and its offset: another online location (output, q_attn, k_cache),
 * a target qk does not compute this way (lm_head, experts), a block that
 * does not divide the input, two transforms on one input, or q/k/v
 * (gate/up), which share their input, transformed differently. */
int qk_hf_apply_transforms(const qk_tcfg *t, const qk_hfdir *hf, const char *path, qk_model *m, qk_err *err);

#endif
