/* fuzz_tokenizer.c - libFuzzer harness for the tokenizer.json loader
 * (qk_tok_from_hf_json_mem: BPE and SentencePiece-style models, added
 * tokens, pre-tokenizers, normalizers, decoders).  A loaded tokenizer
 * encodes a few texts (and the tail of the input as text) and decodes them;
 * every id it produces is in the vocabulary. */
#include "lib/engine/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

static volatile size_t sink;

static void roundtrip(const qk_tokenizer *t, const char *text, size_t n)
{
    int32_t *ids = NULL;
    size_t n_ids = 0;
    qk_err err = {0};
    int rc = qk_tok_encode(t, text, n, true, true, &ids, &n_ids, &err);
    if (rc) {
        fuzz_refused(rc, &err, NULL);
        return;
    }
    const int64_t nv = qk_tok_n_vocab(t);
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= nv)
            abort();
    char *out = NULL;
    size_t n_out = 0;
    if (qk_tok_decode(t, ids, n_ids, false, true, &out, &n_out, &err) == 0)
        sink += n_out;
    free(out);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p[2];
    size_t n[2];
    int k = fuzz_split(data, size, 2, p, n);
    qk_err err = {0};
    qk_tokenizer *t = qk_tok_from_hf_json_mem((const char *)p[0], n[0], "fuzz.json", &err);
    if (!t) {
        fuzz_refused(err.code, &err, "fuzz.json");
        return 0;
    }
    static const char *const texts[] = {"Hello world", " a  b\n\tc", "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 123",
                                        "<s>x</s><|endoftext|>", ""};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        roundtrip(t, texts[i], strlen(texts[i]));
    if (k == 2 && n[1] <= 4096)
        roundtrip(t, (const char *)p[1], n[1]);
    qk_tok_free(t);
    return 0;
}
