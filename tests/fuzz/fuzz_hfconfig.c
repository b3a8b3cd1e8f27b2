/* fuzz_hfconfig.c - libFuzzer harness for a Hugging Face directory's
 * configs against its tensors: config.json (quantization_config of every
 * method, MLX "quantization"), hf_quant_config.json and model.safetensors,
 * one input holding the three separated by NUL bytes (an empty part is an
 * absent file).  Exercises qk_hf_open_mem, the quantization-config parser
 * (quantcfg.c), the model's hyper-parameters and family (lib/engine/hfmodel.c
 * qk_hf_config_hparams, hfarch.c), the scheme look-up, qk_ckpt_open's grouping, layout setup and
 * claim checks (ckpt*.c) and the dequantization of a first and last row of
 * every logical tensor.  A refusal must be code 2 in one line naming the
 * directory; an opened checkpoint must read back. */
#include <math.h>

#include "formats/ckpt.h"
#include "formats/hfdir.h"
#include "formats/quantcfg.h"
#include "lib/engine/hfarch.h"
#include "lib/engine/hfmodel.h"
#include "tests/fuzz/fuzz_util.h"

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p[3];
    size_t n[3];
    int k = fuzz_split(data, size, 3, p, n);
    if (k < 3)
        return 0; /* not three parts */
    qk_err err = {0};
    qk_hfdir *hf = NULL;
    int rc = qk_hf_open_mem(&hf, "fuzz", p[2], n[2], n[0] ? (const char *)p[0] : NULL, n[0],
                            n[1] ? (const char *)p[1] : NULL, n[1], &err);
    if (rc) {
        fuzz_refused(rc, &err, "fuzz");
        return 0;
    }
    if (hf->config) { /* the model's reading of config.json (lib/engine/hfmodel.c, hfarch.c) */
        qk_hparams hp;
        bool tied;
        qk_hf_rope_tables rt = {0};
        const qk_hf_family *fam = NULL;
        if ((rc = qk_hf_config_hparams(hf->config, "fuzz/config.json", &hp, &tied, &rt, &err)))
            fuzz_refused(rc, &err, "fuzz");
        free(rt.freqs), free(rt.lng), free(rt.shrt);
        err = (qk_err){0};
        if ((rc = qk_hf_family_find(hf->config, "fuzz/config.json", &fam, &err)))
            fuzz_refused(rc, &err, "fuzz");
        err = (qk_err){0};
    }
    qk_quantcfg *qc = NULL;
    if ((rc = qk_quantcfg_open_hf(&qc, hf, &err))) {
        fuzz_refused(rc, &err, "fuzz");
        qk_hf_close(hf);
        return 0;
    }
    for (size_t i = 0; i < hf->n_tensors; i++) {
        qk_qscheme s;
        qk_quantcfg_scheme_for(qc, hf->tensors[i].name, hf->tensors[i].n_dims, &s);
        sink += (float)strlen(s.desc);
    }
    qk_quantcfg_free(qc);
    qk_ckpt *ck = NULL;
    if ((rc = qk_ckpt_open(&ck, hf, &err))) {
        fuzz_refused(rc, &err, "fuzz");
        qk_hf_close(hf);
        return 0;
    }
    for (size_t i = 0; i < ck->n; i++) {
        const qk_ck_tensor *t = &ck->t[i];
        if (t->rows < 1 || t->cols < 1 || t->cols > (1 << 16))
            continue;
        float *row = malloc((size_t)t->cols * sizeof *row);
        if (!row)
            abort();
        for (int64_t r = 0; r < 2; r++) {
            rc = qk_ckpt_read_rows(ck, t, r ? t->rows - 1 : 0, 1, row, &err);
            if (rc) { /* only a dtype without a decoder may refuse */
                fuzz_refused(rc, &err, NULL);
                if (t->layout != QK_CK_DENSE)
                    abort();
                break;
            }
            sink += row[0] + row[t->cols - 1];
        }
        free(row);
    }
    qk_ckpt_close(ck);
    qk_hf_close(hf);
    return 0;
}
