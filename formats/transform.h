/* transform.h - compressed-tensors' transform_config (quantization_config.
 * transform_config of config.json, compressed_tensors/transform/
 * transform_config.py, transform_scheme.py, transform_args.py): named groups
 * {type, apply [{targets, ignore, location, inverse}], head_dim, precision,
 * randomize, requires_grad}.  SpinQuant and QuaRot checkpoints (llm-
 * compressor's SpinQuantModifier) write their rotations this way: the
 * weight_input / weight_output entries are already fused into the stored
 * weights; the online ones (location input, output, q_attn, k_cache) are
 * applied at run time.
 *
 * Accepted: type "hadamard" (Sylvester's matrix, kernels/hadamard.h),
 * randomize false, precision torch.float32 / torch.float64, head_dim null or
 * a power of two.  Anything else (random-hadamard or random-matrix, whose
 * matrices come from a generator; another precision; an unknown location)
 * is code 2 naming config.json, the field and its offset. */
#ifndef QK_TRANSFORM_H
#define QK_TRANSFORM_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/core/jsonp.h"

typedef enum qk_tloc {
    QK_TL_INPUT, QK_TL_WEIGHT_INPUT, QK_TL_WEIGHT_OUTPUT, QK_TL_OUTPUT, QK_TL_K_CACHE, QK_TL_Q_ATTN
} qk_tloc;

typedef struct qk_tapply {
    qk_tloc loc;
    bool inverse;
    uint64_t off;         /* offset of this entry in config.json */
    void *targets, *ignore; /* compiled patterns (private) */
} qk_tapply;

typedef struct qk_tgroup {
    char name[64];
    int head_dim;         /* 0: null (the module's size) */
    bool f64;             /* precision torch.float64 (else float32) */
    uint64_t off;
    int n_apply;
    qk_tapply *apply;
} qk_tgroup;

typedef struct qk_tcfg {
    int n;
    qk_tgroup *g;
} qk_tcfg;

/* The transform_config of config (the parsed config.json; path for
 * messages).  *out NULL when there is none or it is empty. */
int qk_tcfg_parse(const qk_jsonv *config, const char *path, qk_tcfg **out, qk_err *err);
void qk_tcfg_free(qk_tcfg *t);

/* "input", "weight_input", ... */
const char *qk_tloc_name(qk_tloc l);
static inline bool qk_tloc_online(qk_tloc l) { return l != QK_TL_WEIGHT_INPUT && l != QK_TL_WEIGHT_OUTPUT; }

/* Whether module (a module path, "model.layers.0.mlp.down_proj") is a target
 * of a and not ignored (compressed-tensors' match_named_modules: exact names
 * and "re:" regexes matched from the start). */
bool qk_tapply_matches(const qk_tapply *a, const char *module);

/* Whether a stored tensor is an online transform's own parameter
 * (MODULE.GROUP_LOCATION.weight or .perm, as save_pretrained writes the
 * transform submodule): not a weight of the model. */
bool qk_tcfg_is_param(const qk_tcfg *t, const char *tensor_name);

#endif
