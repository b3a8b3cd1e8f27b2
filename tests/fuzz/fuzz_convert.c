/* fuzz_convert.c - libFuzzer harness for what qk-convert reads from a
 * Hugging Face directory besides the tensor data (lib/convert, through its
 * public entry point qk_convert with --vocab-only --dry-run): config.json's
 * architecture and hyper-parameters, the vocabulary from tokenizer.json and
 * tokenizer_config.json with the converter's pre-tokenizer check hash, the
 * general.* metadata from config.json and generation_config.json, the output
 * name, and the safetensors header.  Input: config.json NUL tokenizer.json
 * NUL tokenizer_config.json NUL generation_config.json NUL model.safetensors
 * (an empty part: no such file; the safetensors part last, since it holds
 * NUL bytes), written to a scratch directory.  A refusal must be code 2 in
 * one line naming the directory or a file in it. */
#include <stdlib.h>

#include "lib/convert/convert.h"
#include "tests/fuzz/fuzz_util.h"

static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                    "generation_config.json", "model.safetensors"};
enum { N_PARTS = sizeof names / sizeof names[0] };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_dir("convert", names, N_PARTS);
    const uint8_t *p[N_PARTS];
    size_t n[N_PARTS] = {0};
    int k = fuzz_split(data, size, N_PARTS, p, n);
    for (int i = 0; i < N_PARTS; i++)
        fuzz_dir_put(names[i], p[i], i < k ? n[i] : 0);
    qk_conv_opts o = {.model_dir = dir, .outtype = QK_CONV_AUTO, .vocab_only = true, .dry_run = true, .threads = 1};
    qk_conv_result r;
    qk_err err = {0};
    int rc = qk_convert(&o, &r, &err);
    if (rc)
        fuzz_refused(rc, &err, dir);
    else if (r.n_files != 1 || !r.files || !r.files[0] || !r.pre[0])
        abort(); /* a vocabulary-only dry run names one file and the pre-tokenizer */
    qk_conv_result_free(&r);
    return 0;
}
