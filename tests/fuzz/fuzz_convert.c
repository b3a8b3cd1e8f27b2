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
 * one line naming the directory or a file in it.  Inputs whose config.json
 * pads the vocabulary past 8192 tokens are skipped: padding is one loop, the
 * same at 8192 entries as at 151,936, and mutants of the Qwen2-sized seeds
 * (150 ms each under ASan) held the runs at 60-120 executions a second. */
#include <stdlib.h>

#include "lib/convert/convert.h"
#include "lib/core/jsonp.h"
#include "tests/fuzz/fuzz_util.h"

static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                    "generation_config.json", "model.safetensors"};
enum { N_PARTS = sizeof names / sizeof names[0] };

static bool big_vocab(const uint8_t *cfg, size_t n)
{
    qk_jsonv *root = NULL;
    qk_jsonp_err je;
    bool big = false;
    if (qk_jsonp_parse((const char *)cfg, n, 0, &root, &je) == 0) {
        const qk_jsonv *objs[2] = {root, qk_jsonv_get(root, "text_config")};
        for (int i = 0; i < 2; i++) {
            int64_t v;
            const qk_jsonv *x = objs[i] ? qk_jsonv_get(objs[i], "vocab_size") : NULL;
            big |= x && qk_jsonv_i64(x, &v) && v > 8192;
        }
    }
    qk_jsonv_free(root);
    return big;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_dir("convert", names, N_PARTS);
    const uint8_t *p[N_PARTS];
    size_t n[N_PARTS] = {0};
    int k = fuzz_split(data, size, N_PARTS, p, n);
    if (big_vocab(p[0], n[0]))
        return 0;
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
