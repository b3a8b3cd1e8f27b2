/* quantcfg.h - which quantization scheme applies to which weight tensor, as
 * a checkpoint's config declares it.
 *
 * Recognised (from config.json "quantization_config" unless noted):
 *   compressed-tensors  quant_method "compressed-tensors": format,
 *                       config_groups {targets, weights, input_activations},
 *                       ignore (names, "re:" regexes, class names)
 *   fp8                 quant_method "fp8" (DeepSeek/Qwen block FP8):
 *                       weight_block_size, activation_scheme, fmt,
 *                       modules_to_not_convert / ignored_layers
 *   awq                 bits, group_size, zero_point, version, modules_to_not_convert
 *   gptq                bits, group_size, desc_act, sym, lm_head
 *   bitsandbytes        load_in_4bit / load_in_8bit, bnb_4bit_quant_type,
 *                       bnb_4bit_use_double_quant, llm_int8_skip_modules
 *   mlx                 top-level "quantization" {group_size, bits, mode}
 *                       with per-module overrides keyed by module path
 *   modelopt            hf_quant_config.json "quantization" {quant_algo,
 *                       group_size, exclude_modules (wildcards),
 *                       quantized_layers for MIXED_PRECISION}; also
 *                       quant_method "modelopt" in config.json
 *
 * Which modules a method covers (what the loaders do, simplified to what a
 * tensor name tells):
 *   - A tensor name is MODULE.LEAF; LEAF is a weight ("weight",
 *     "weight_packed", "qweight") or a known companion ("weight_scale",
 *     "scales", "qzeros", "weight.absmax", ...); the scheme is the module's.
 *   - A linear module is one whose weight is 2-D (n_dims 2, or n_dims < 0
 *     when unknown) and whose last path component does not name an
 *     embedding ("embed*", "wte", "wpe"): those are class "Embedding".
 *   - compressed-tensors: a module is quantized when it matches a target of
 *     a config group ("Linear" / "Embedding" class names, exact module
 *     names, "re:" regexes matched at the start of the name like Python's
 *     re.match) and matches nothing in ignore.  When several groups match,
 *     exact names win over regexes over class names (as
 *     compressed_tensors.utils.match orders them), then the first group.
 *     Regexes are POSIX extended (glibc regcomp) after rewriting \d, \D and
 *     (?: which ERE lacks.
 *   - fp8, awq, gptq, bitsandbytes: every linear module except lm_head
 *     (gptq: unless "lm_head": true) and those whose name contains an entry
 *     of modules_to_not_convert (llm_int8_skip_modules, ignored_layers).
 *   - mlx: linear and embedding modules; an override object replaces the
 *     defaults for that module, an override false leaves it unquantized.
 *   - modelopt: linear modules not matching exclude_modules (fnmatch
 *     wildcards); MIXED_PRECISION: only the modules in quantized_layers.
 */
#ifndef QK_QUANTCFG_H
#define QK_QUANTCFG_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "formats/hfdir.h"
#include "lib/core/jsonp.h"

typedef enum qk_qmethod {
    QK_QM_NONE = 0, QK_QM_COMPRESSED_TENSORS, QK_QM_FP8, QK_QM_AWQ, QK_QM_GPTQ,
    QK_QM_BNB, QK_QM_MLX, QK_QM_MODELOPT, QK_QM_OTHER
} qk_qmethod;

/* Quantization arguments of weights or activations. */
typedef struct qk_qargs {
    bool present;
    int num_bits;
    char type[16];       /* "int", "float", "nf4", "fp4" */
    char strategy[16];   /* "tensor", "channel", "group", "block", "tensor_group", "token", "" */
    int64_t group_size;  /* 0: none */
    int64_t block[2];    /* block_structure (rows, cols); 0: none */
    bool symmetric;
    bool dynamic;
} qk_qargs;

typedef struct qk_qscheme {
    bool quantized;
    qk_qmethod method;
    const char *method_name; /* "compressed-tensors", "fp8", ... or "none" */
    const char *format;      /* CT format, MLX mode, ModelOpt algo, ...; "" if none */
    const char *group;       /* CT config group / matching rule; "" if none */
    const char *reason;      /* why not quantized; "" when quantized */
    char role[48];           /* the tensor's leaf: "weight", "weight_scale", ... */
    qk_qargs w, a;
    char desc[256];          /* "int4 w/ group 128 symmetric, act: none" or
                                "not quantized (ignored)" */
} qk_qscheme;

typedef struct qk_quantcfg qk_quantcfg;
struct qk_quantcfg {
    qk_qmethod method;
    char method_name[32];
    char format[48];
    char source[32];     /* "config.json", "hf_quant_config.json" or "" */
    char desc[256];      /* one line: method, format, groups */
    void *priv;
};

const char *qk_qmethod_name(qk_qmethod m);

/* A Python re pattern of these configs as POSIX ERE, anchored at the start as
 * re.match (\\d, \\D, non-capturing groups rewritten); malloc'd, NULL when out
 * of memory. */
char *qk_py_to_ere(const char *s);

/* From parsed config.json and/or hf_quant_config.json (either may be NULL);
 * paths are for messages.  No quantization found: method QK_QM_NONE. */
int qk_quantcfg_parse(qk_quantcfg **out, const qk_jsonv *config, const char *config_path,
                      const qk_jsonv *hf_quant_config, const char *hqc_path, qk_err *err);
int qk_quantcfg_open_hf(qk_quantcfg **out, const qk_hfdir *hf, qk_err *err);
void qk_quantcfg_free(qk_quantcfg *cfg);

/* The scheme for one tensor (n_dims of the tensor, or -1 if unknown). */
void qk_quantcfg_scheme_for(const qk_quantcfg *cfg, const char *tensor_name, int n_dims,
                            qk_qscheme *out);

#endif
