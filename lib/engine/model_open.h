/* model_open.h - the engine's model from a path, whatever qk can run: a GGUF
 * file (lib/engine/model.h over formats/gguf.h) or a Hugging Face directory,
 * .safetensors or config.json (lib/engine/hfmodel.h). */
#ifndef QK_MODEL_OPEN_H
#define QK_MODEL_OPEN_H

#include <stdbool.h>

#include "lib/core/err.h"
#include "formats/gguf.h"
#include "lib/engine/hfmodel.h"
#include "lib/engine/model.h"

typedef struct qk_model_file {
    qk_gguf *g;        /* a GGUF file (its tokenizer lives here), else NULL */
    qk_model gm;
    qk_hfmodel *hf;    /* a Hugging Face directory, else NULL */
    const qk_model *m; /* the model, either way */
} qk_model_file;

/* A directory, a .safetensors file or a .json file: a Hugging Face checkpoint. */
bool qk_model_path_is_hf(const char *path);
int qk_model_file_open(qk_model_file *mf, const char *path, qk_err *err);
/* Safe on a zeroed or failed qk_model_file. */
void qk_model_file_close(qk_model_file *mf);

#endif
