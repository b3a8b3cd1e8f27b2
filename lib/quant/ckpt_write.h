/* ckpt_write.h - qk-quant --to SCHEME SRC OUT_DIR: write a quantized (or
 * dequantized) Hugging Face directory the way the producing tool does
 * (lib/quant/ckpt_write.c; the layouts read back are formats/ckpt.h's). */
#ifndef QK_CKPT_WRITE_H
#define QK_CKPT_WRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/quant/ckpt_calib.h"

typedef struct qk_ckpt_opts {
    bool asym;               /* ct-w4a16: asymmetric (zero points) */
    int group;               /* group size (0: the scheme's default) */
    const char *ignore;      /* POSIX extended regex of module names to leave unquantized, or NULL */
    uint64_t shard_size;     /* bytes per shard (0: 5 GB, as transformers' max_shard_size) */
    bool quiet;              /* no progress bar */
    bool rotate;             /* --rotate hadamard: SpinQuant R1, R2, R4 (lib/quant/rotate.h) */
    qk_ckpt_calib *calib;    /* --method and calibration (lib/quant/ckpt_calib.h), or NULL: round to nearest */
} qk_ckpt_opts;

/* Names accepted by qk_ckpt_quantize, for --help and completions. */
extern const char *const qk_ckpt_schemes[];
/* Whether scheme takes static activation scales from opts.calib's text
 * (lib/quant/ckpt_static.h): ct-fp8-static, ct-w8a8-static and ct-nvfp4a4
 * need it; modelopt-nvfp4 gains its input_scale from it. */
bool qk_ckpt_scheme_static(const char *scheme);

/* Read the Hugging Face directory src_dir (F32/F16/BF16, or any layout
 * above), quantize its linear weights to scheme and write a complete
 * directory out_dir: config.json with the producing tool's
 * quantization_config, model.safetensors or shards + index,
 * generation_config.json and tokenizer files copied.  Output is built in a
 * temporary directory beside out_dir and renamed into place when complete;
 * out_dir must not exist (or be an empty directory) and may not be src_dir.
 * Schemes: ct-fp8, ct-fp8-static, ct-fp8-block, ct-w8a8, ct-w8a8-static, ct-w4a16, ct-w4a8, ct-nvfp4,
 * ct-nvfp4a4, ct-mxfp4,
 * modelopt-nvfp4, mlx-q2/q3/q4/q5/q6/q8, bf16, f16, f32. */
int qk_ckpt_quantize(const char *src_dir, const char *out_dir, const char *scheme, const qk_ckpt_opts *o,
                     qk_err *err);

#endif
