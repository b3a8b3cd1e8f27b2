/* modelfile.h - a model from whatever holds it: a GGUF file (or split set),
 * or a Hugging Face directory (plain or quantized: lib/engine/hfmodel.h), and
 * a tokenizer from a GGUF file, a tokenizer.json or an HF directory.  What
 * qk-run, qk-kld and qk-bench open their -m / --base with. */
#ifndef QK_MODELFILE_H
#define QK_MODELFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "lib/core/err.h"
#include "lib/engine/hfmodel.h"
#include "lib/engine/model.h"
#include "lib/engine/tokenizer.h"

typedef struct qk_model_file {
    qk_gguf *g;          /* the GGUF file, or NULL */
    qk_hfmodel *hf;      /* the HF directory, or NULL */
    qk_model gm;         /* g's model */
    bool have_gm;
    const qk_model *m;   /* the model (NULL when opened for its tokenizer only) */
    uint64_t bytes;      /* stored bytes of all its tensors (every part of a quantized one) */
    uint64_t params;     /* their logical elements (a quantized tensor counts its float shape) */
} qk_model_file;

/* A Hugging Face checkpoint (a directory, .safetensors or .json) rather than a GGUF file? */
bool qk_model_path_is_hf(const char *path);

/* Open path; with_model false: only the GGUF header (for its tokenizer). */
int qk_model_file_open(qk_model_file *mf, const char *path, bool with_model, qk_err *err);
void qk_model_file_close(qk_model_file *mf);
/* Bits per weight of the checkpoint: bytes * 8 / params. */
double qk_model_file_bpw(const qk_model_file *mf);

/* A tokenizer from a GGUF file, a tokenizer.json, or an HF directory's
 * tokenizer.json. */
int qk_tokenizer_from(const char *path, qk_tokenizer **out, qk_err *err);
/* The tokenizer.json beside an HF checkpoint's weights, or an error asking
 * for --tokenizer. */
int qk_hf_tokenizer(const char *model, qk_tokenizer **out, qk_err *err);

#endif
