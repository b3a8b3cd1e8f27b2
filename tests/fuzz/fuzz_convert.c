/* fuzz_convert.c - libFuzzer harness for what qk-convert reads from a
 * Hugging Face directory before any tensor (lib/convert): config.json's
 * hyper-parameters and architecture (conv_arch.c), the vocabulary from
 * tokenizer.json and tokenizer_config.json with the converter's
 * pre-tokenizer check hash (conv_vocab.c), and the general.* metadata from
 * config.json and generation_config.json (conv_meta.c).  Input: config.json
 * NUL tokenizer.json NUL tokenizer_config.json NUL generation_config.json
 * (an empty part: no such file), written to a scratch directory.  A
 * refusal must be code 2 in one line naming a file of the directory. */
#include <stdlib.h>

#include "formats/hfdir.h"
#include "lib/convert/conv_impl.h"
#include "lib/convert/conv_meta.h"
#include "lib/convert/conv_vocab.h"
#include "tests/fuzz/fuzz_util.h"

static char dir[64];

static void cleanup(void)
{
    static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                        "generation_config.json"};
    char p[128];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

static void put(const char *name, const uint8_t *data, size_t n)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
    if (!n)
        return;
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/qk-fuzz-convert-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(dir))
            abort();
        atexit(cleanup);
    }
    const uint8_t *p[4];
    size_t n[4] = {0};
    int k = fuzz_split(data, size, 4, p, n);
    if (n[0] == 0)
        return 0; /* no config.json: qk_convert refuses the directory before reading it */
    static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                        "generation_config.json"};
    for (int i = 0; i < 4; i++)
        put(names[i], p[i], i < k ? n[i] : 0);
    char cfg_path[128];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    qk_err err = {0};
    qk_jsonv *config = NULL;
    int rc = qk_hf_json_load(&config, cfg_path, 0, &err);
    if (rc) {
        fuzz_refused(rc, &err, dir);
        return 0;
    }
    const char *hf_arch = qk_jsonv_str(qk_jsonv_at(qk_jsonv_get(config, "architectures"), 0));
    const qk_conv_arch *a = hf_arch ? qk_conv_arch_find(hf_arch) : NULL;
    qk_conv_hp hp;
    rc = qk_conv_hparams(config, cfg_path, &hp, &err);
    if (rc)
        fuzz_refused(rc, &err, dir);
    else if (hp.vocab_size < 1 || hp.n_layer < 0 || hp.n_embd < 1 || hp.n_head < 1)
        abort(); /* the converter needs them: refused, not returned */
    if (!rc) {
        qk_conv_vocab v;
        err = (qk_err){0};
        rc = qk_conv_vocab_load(&v, dir, config, (uint32_t)hp.vocab_size, a ? a->llama_class : true, &err);
        if (rc)
            fuzz_refused(rc, &err, dir);
        else
            qk_conv_vocab_free(&v);
    }
    qk_conv_meta m = {0};
    err = (qk_err){0};
    rc = qk_conv_meta_load(&m, dir, config, 123456789, &err);
    if (rc) {
        fuzz_refused(rc, &err, dir);
    } else {
        char *name = qk_conv_default_name(&m, m.size_label ? m.size_label : "124M", "F16", NULL);
        free(name);
        qk_conv_meta_free(&m);
    }
    qk_jsonv_free(config);
    return 0;
}
