/* model_open.c - a model from a GGUF file or a Hugging Face directory (model_open.h). */
#include "lib/engine/model_open.h"

#include <string.h>
#include <sys/stat.h>

bool qk_model_path_is_hf(const char *path)
{
    struct stat st;
    const size_t n = strlen(path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return true;
    return (n > 12 && !strcmp(path + n - 12, ".safetensors")) ||
           (n > 5 && !strcmp(path + n - 5, ".json"));
}

int qk_model_file_open(qk_model_file *mf, const char *path, qk_err *err)
{
    int rc;
    memset(mf, 0, sizeof *mf);
    if (qk_model_path_is_hf(path)) {
        if ((rc = qk_hfmodel_open(&mf->hf, path, err)))
            return rc;
        mf->m = &mf->hf->m;
        return 0;
    }
    if ((rc = qk_gguf_open(&mf->g, path, 0, err)))
        return rc;
    if ((rc = qk_model_load(&mf->gm, mf->g, err))) {
        qk_gguf_close(mf->g);
        mf->g = NULL;
        return rc;
    }
    mf->m = &mf->gm;
    return 0;
}

void qk_model_file_close(qk_model_file *mf)
{
    if (mf->hf)
        qk_hfmodel_close(mf->hf);
    if (mf->g) {
        qk_model_free(&mf->gm);
        qk_gguf_close(mf->g);
    }
    memset(mf, 0, sizeof *mf);
}
