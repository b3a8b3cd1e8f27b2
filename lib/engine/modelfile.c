/* modelfile.c - opening a model from a GGUF file or a Hugging Face
 * directory, and tokenizers (see modelfile.h). */
#include "lib/engine/modelfile.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/ckpt.h"

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

bool qk_model_path_is_hf(const char *path)
{
    return is_dir(path) || ends_with(path, ".safetensors") || ends_with(path, ".json");
}

/* Stored bytes and logical elements of every tensor of an HF checkpoint. */
static void hf_sizes(qk_model_file *mf)
{
    const qk_hfdir *hf = mf->hf->hf;
    for (size_t i = 0; i < hf->n_tensors; i++)
        mf->bytes += hf->tensors[i].nbytes;
    const qk_ckpt *ck = mf->hf->ck;
    if (ck) {
        for (size_t i = 0; i < ck->n; i++)
            mf->params += ck->t[i].nelem;
    } else {
        for (size_t i = 0; i < hf->n_tensors; i++)
            mf->params += hf->tensors[i].nelem;
    }
}

int qk_model_file_open(qk_model_file *mf, const char *path, bool with_model, qk_err *err)
{
    memset(mf, 0, sizeof *mf);
    int rc;
    if (qk_model_path_is_hf(path)) {
        if (!with_model)
            return 0;
        if ((rc = qk_hfmodel_open(&mf->hf, path, err)))
            return rc;
        mf->m = &mf->hf->m;
        hf_sizes(mf);
        return 0;
    }
    if ((rc = qk_gguf_open(&mf->g, path, 0, err)))
        return rc;
    for (uint64_t i = 0; i < mf->g->n_tensors; i++) {
        const qk_gguf_tensor *t = &mf->g->tensors[i];
        mf->bytes += t->nbytes;
        mf->params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    if (!with_model)
        return 0;
    if ((rc = qk_model_load(&mf->gm, mf->g, err))) {
        qk_model_file_close(mf);
        return rc;
    }
    mf->have_gm = true;
    mf->m = &mf->gm;
    return 0;
}

void qk_model_file_close(qk_model_file *mf)
{
    if (mf->have_gm)
        qk_model_free(&mf->gm);
    qk_hfmodel_close(mf->hf);
    qk_gguf_close(mf->g);
    memset(mf, 0, sizeof *mf);
}

double qk_model_file_bpw(const qk_model_file *mf)
{
    return mf->params ? (double)mf->bytes * 8.0 / (double)mf->params : 0.0;
}

int qk_tokenizer_from(const char *path, qk_tokenizer **out, qk_err *err)
{
    *out = NULL;
    if (is_dir(path)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/tokenizer.json", path);
        *out = qk_tok_from_hf_json(p, err);
    } else if (ends_with(path, ".json")) {
        *out = qk_tok_from_hf_json(path, err);
    } else {
        qk_gguf *g;
        if (qk_gguf_open(&g, path, 0, err))
            return err->code;
        *out = qk_tok_from_gguf(g, err);
        qk_gguf_close(g);
    }
    return *out ? 0 : (err->code ? err->code : QK_EINPUT);
}

int qk_hf_tokenizer(const char *model, qk_tokenizer **out, qk_err *err)
{
    char dir[4096], p[4096 + 16];
    snprintf(dir, sizeof dir, "%s", model);
    if (!is_dir(dir)) {
        char *slash = strrchr(dir, '/');
        snprintf(slash ? slash : dir, sizeof dir - (size_t)(slash ? slash - dir : 0), "%s",
                 slash ? "" : ".");
    }
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    struct stat st;
    if (stat(p, &st) != 0)
        return qk_err_at(err, dir, "tokenizer.json", 0,
                         "missing: give --tokenizer FILE (a GGUF file or tokenizer.json with "
                         "this model's vocabulary)");
    *out = qk_tok_from_hf_json(p, err);
    return *out ? 0 : (err->code ? err->code : QK_EINPUT);
}
