/* conv_synth.h - deterministic random-weight Hugging Face directories for
 * the conversion tests and benchmarks, so that neither has to store weights.
 *
 * A case folder holds config.json (as transformers' save_pretrained wrote it
 * for a model made with AutoModelForCausalLM.from_config), optionally
 * generation_config.json, and tensors.txt: one line per tensor,
 * "FILE NAME DTYPE DIM0 DIM1 ..." (outermost first), FILE the safetensors
 * file holding it (model.safetensors, or model-00001-of-00002.safetensors
 * and so on: several files get model.safetensors.index.json).  The output
 * folder gets those files with pseudo-random weights (a fixed 64-bit
 * generator; norms near 1, the rest uniform in [-0.05, 0.05]), plus the
 * GPT-2 tokenizer (tokenizer.json assembled from vocab_json and merges_txt
 * as the tokenizers library lays it out, tokenizer_config.json), or, when
 * the case has a file tokenizer_dir naming a folder (relative to the case),
 * that folder's tokenizer.json and tokenizer_config.json. */
#ifndef QK_CONV_SYNTH_H
#define QK_CONV_SYNTH_H

#include <stdint.h>

#include "lib/core/err.h"

int qk_conv_synth_dir(const char *case_dir, const char *vocab_json, const char *merges_txt, uint64_t seed,
                      const char *out_dir, qk_err *err);

#endif
