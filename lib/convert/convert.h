/* convert.h - Hugging Face directory -> GGUF, byte-identical to llama.cpp's
 * convert_hf_to_gguf.py (d32676d) for the architectures of its table (Llama, Mistral, Mixtral, Qwen2, Qwen3,
 * Qwen2-MoE, Qwen3-MoE, Gemma 2, Gemma 3, Phi-3, gpt-oss with BF16 experts)
 * (lib/convert/conv_arch.c) and the byte-level BPE tokenizers transformers
 * writes.  Tensors are read, converted and written one row block at a time
 * (source pages released behind), so memory stays near the tokenizer's
 * size whatever the model's.
 *
 * What the converter would refuse (unknown architecture, unknown
 * pre-tokenizer hash, missing tokenizer, unmappable tensor) is refused, and
 * so is what qk does not reproduce yet (SentencePiece tokenizers outside
 * Gemma, llama3 rope scaling, MXFP4 experts, model cards): QK_EINPUT with one line
 * naming it; nothing is written then. */
#ifndef QK_CONVERT_H
#define QK_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"

/* --outtype, and the llama_ftype each writes as general.file_type. */
enum qk_conv_outtype { QK_CONV_F32 = 0, QK_CONV_F16 = 1, QK_CONV_Q8_0 = 7, QK_CONV_BF16 = 32, QK_CONV_AUTO = -1,
                       /* not a --outtype: f16 when the first matrix is stored as F16, f32 otherwise (the
                        * lossless float file qk-quant MODEL_DIR quantizes) */
                       QK_CONV_SOURCE = -3 };

typedef struct qk_conv_opts {
    const char *model_dir;
    const char *outfile;        /* NULL: MODEL_DIR/<default name>.gguf */
    int outtype;                /* enum qk_conv_outtype */
    bool vocab_only, dry_run;
    uint64_t split_max_size;    /* bytes; 0: one file */
    int threads;
    bool progress;
} qk_conv_opts;

typedef struct qk_conv_result {
    char arch[32];              /* general.architecture */
    char hf_arch[64];
    char pre[64];               /* tokenizer.ggml.pre */
    char outtype[8];            /* "F32", "F16", "BF16", "Q8_0" */
    int64_t n_params;
    uint64_t n_tensors, n_bytes;  /* tensor data bytes written */
    size_t n_files;
    char **files;               /* the output files, in order */
} qk_conv_result;

/* "f32", "f16", "bf16", "q8_0", "auto" -> enum; -2 when unknown. */
int qk_conv_outtype_parse(const char *s);
/* convert_hf_to_gguf.py's split_str_to_n_bytes ("N", "NK", "NM", "NG"). */
int qk_conv_parse_size(const char *s, uint64_t *out);

int qk_convert(const qk_conv_opts *o, qk_conv_result *r, qk_err *err);
void qk_conv_result_free(qk_conv_result *r);

#endif
