/* fuzz_spm.c - libFuzzer harness for qk-convert's SentencePiece path
 * (lib/convert/conv_spm.c, the tokenizer.model protobuf reader, and the
 * vocabulary the converter builds from it in conv_vocab.c's load_spm: the
 * padding to the model's vocab_size, tokenizer_config.json's
 * added_tokens_decoder, the special tokens).  Input: two bytes of
 * vocab_size (little-endian; 0: the pieces' count), then
 * tokenizer_config.json NUL tokenizer.json NUL tokenizer.model (an empty
 * part: no such file; the protobuf last, since it holds NUL bytes), written
 * to a scratch directory and loaded as Gemma2Model.set_vocab reads it.  A
 * refusal must be code 2 in one line naming the directory or a file in it;
 * a loaded vocabulary has vocab_size tokens, each with text and a known
 * token type. */
#include <stdlib.h>

#include "lib/convert/conv_vocab.h"
#include "tests/fuzz/fuzz_util.h"

static const char *const names[] = {"tokenizer_config.json", "tokenizer.json", "tokenizer.model"};
enum { N_PARTS = sizeof names / sizeof names[0] };
static qk_jsonv *config;

static void free_config(void) { qk_jsonv_free(config); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_dir("spm", names, N_PARTS);
    if (!config) {
        static const char cfg[] = "{\"architectures\": [\"Gemma2ForCausalLM\"], \"bos_token_id\": 2, "
                                  "\"eos_token_id\": 1, \"pad_token_id\": 0}";
        qk_jsonp_err je;
        if (qk_jsonp_parse(cfg, sizeof cfg - 1, 0, &config, &je))
            abort();
        atexit(free_config);
    }
    if (size < 2)
        return 0;
    const uint32_t vocab_size = (uint32_t)data[0] | (uint32_t)data[1] << 8;
    const uint8_t *p[N_PARTS];
    size_t n[N_PARTS] = {0};
    int k = fuzz_split(data + 2, size - 2, N_PARTS, p, n);
    for (int i = 0; i < N_PARTS; i++)
        fuzz_dir_put(names[i], p[i], i < k ? n[i] : 0);
    qk_conv_vocab v;
    qk_err err = {0};
    int rc = qk_conv_vocab_load(&v, dir, config, vocab_size, QK_VOCAB_GEMMA2, &err);
    if (rc) {
        fuzz_refused(rc, &err, dir);
    } else {
        if (!v.n || (vocab_size && v.n != vocab_size) || !v.tokens || !v.scores || !v.types)
            abort();
        for (uint32_t i = 0; i < v.n; i++)
            if (!v.tokens[i] || v.types[i] < 1 || v.types[i] > 6)
                abort(); /* every token has text and one of sentencepiece's types */
    }
    qk_conv_vocab_free(&v);
    return 0;
}
