/* meta_print.h - the header part of qk-inspect's report: format, version,
 * architecture and hyper-parameters, file type, and metadata key/values. */
#ifndef QK_META_PRINT_H
#define QK_META_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "lib/core/json.h"
#include "formats/tensorset.h"

void qk_meta_text(FILE *out, const qk_tensorset *s, const char *glob, bool full);
/* Adds "format", "version", "architecture", "hyperparameters", "file_type",
 * "metadata" keys to the open JSON object. */
void qk_meta_json(qk_json *j, const qk_tensorset *s, const char *glob, bool full);

#endif
