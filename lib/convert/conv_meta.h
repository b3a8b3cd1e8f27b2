/* conv_meta.h - the general.* metadata and the output file name of a
 * conversion, as gguf-py's Metadata (metadata.py: the heuristics over
 * config.json's _name_or_path and the directory name, generation_config's
 * sampling keys) and utility.py (size_label, naming_convention,
 * fill_templated_filename) compute them (llama.cpp d32676d). */
#ifndef QK_CONV_META_H
#define QK_CONV_META_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/core/jsonp.h"

typedef struct qk_conv_meta {
    char *name, *organization, *basename, *finetune, *version, *size_label;
    /* generation_config.json sampling keys (present: has bit set) */
    bool has_top_k, has_top_p, has_min_p, has_temp;
    int64_t top_k;
    double top_p, min_p, temp;
} qk_conv_meta;

/* total_params: the converted tensors' element count (0 for --vocab-only).
 * Refuses a README.md with a YAML front matter (model card metadata is not
 * reproduced yet). */
int qk_conv_meta_load(qk_conv_meta *m, const char *dir, const qk_jsonv *config, int64_t total_params,
                      qk_err *err);
void qk_conv_meta_free(qk_conv_meta *m);

/* model_weight_count_rounded_notation / size_label (no experts). */
void qk_conv_size_label(int64_t total_params, char *out, size_t n);
/* naming_convention(): output_type NULL for none, kind NULL or "vocab". */
char *qk_conv_default_name(const qk_conv_meta *m, const char *size_label, const char *output_type, const char *kind);
/* fill_templated_filename (str.format with {}, {ftype}, {outtype},
 * {FTYPE}, {OUTTYPE}); NULL with err set for another field. */
char *qk_conv_fill_template(const char *name, const char *output_type, qk_err *err);

/* get_model_id_components and id_to_title (exposed for the tests). */
void qk_conv_id_components(const char *model_id, int64_t total_params, char **full_name, char **org, char **basename,
                           char **finetune, char **version, char **size_label);
char *qk_conv_id_to_title(const char *s);

#endif
