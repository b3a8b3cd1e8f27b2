/* sweep_describe.c - what a checkpoint is, for qk-report's rows: format,
 * scheme, family, bits per weight and size (sweep_report.h). */
#include "lib/report/sweep_report.h"

#include <stdio.h>
#include <string.h>

#include "formats/ftype.h"
#include "formats/gguf.h"
#include "formats/hfdir.h"
#include "formats/quantcfg.h"
#include "formats/tensorset.h"

const char *qk_rep_family_name(int family)
{
    static const char *const n[QK_FAM_COUNT] = {"float", "GGUF legacy", "K-quants", "IQ",
                                                "compressed-tensors", "MLX", "other"};
    return family >= 0 && family < QK_FAM_COUNT ? n[family] : "other";
}

/* A llama.cpp type or file-type name ("Q4_K_M", "IQ4_XS", "Q8_0", "F16") to its family. */
static int gguf_family(const char *s)
{
    if (!strcmp(s, "F32") || !strcmp(s, "F16") || !strcmp(s, "BF16"))
        return QK_FAM_FLOAT;
    if (!strncmp(s, "IQ", 2))
        return QK_FAM_IQ;
    if (strstr(s, "_K"))
        return QK_FAM_KQUANT;
    static const char *const legacy[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"};
    for (size_t i = 0; i < sizeof legacy / sizeof *legacy; i++)
        if (!strcmp(s, legacy[i]))
            return QK_FAM_LEGACY;
    return QK_FAM_OTHER;
}

static void gguf_scheme(const qk_tensorset *s, qk_rep_desc *d)
{
    const qk_gguf *g = s->gguf;
    uint64_t ft;
    const char *name = qk_gguf_get_uint(g, "general.file_type", &ft) ? qk_ftype_name((long)ft) : NULL;
    if (name) {
        if (!strncmp(name, "MOSTLY_", 7))
            name += 7;
        else if (!strncmp(name, "ALL_", 4))
            name += 4;
        snprintf(d->scheme, sizeof d->scheme, "%s", name);
    } else { /* no file type: the type holding most bytes */
        uint64_t best = 0;
        const char *tn = "?";
        for (uint64_t i = 0; i < s->n; i++)
            if (s->t[i].nbytes > best) {
                best = s->t[i].nbytes;
                tn = s->t[i].type_name;
            }
        snprintf(d->scheme, sizeof d->scheme, "%s", tn);
        for (char *c = d->scheme; *c; c++)
            *c = *c >= 'a' && *c <= 'z' ? (char)(*c - 32) : *c;
    }
    d->family = gguf_family(d->scheme);
}

static void hf_scheme(const qk_tensorset *s, qk_rep_desc *d)
{
    const qk_hfdir *h = s->st;
    qk_quantcfg *cfg = NULL;
    qk_err e = {0};
    const char *dtype = h && h->config ? qk_jsonv_get_str(h->config, "torch_dtype", NULL) : NULL;
    if (!h || qk_quantcfg_open_hf(&cfg, h, &e) || cfg->method == QK_QM_NONE) {
        snprintf(d->scheme, sizeof d->scheme, "%s", dtype ? dtype : "unquantized");
        d->family = QK_FAM_FLOAT;
        qk_quantcfg_free(cfg);
        return;
    }
    /* the weights' arguments from the first tensor the scheme quantizes */
    qk_qscheme q = {0};
    for (uint64_t i = 0; i < s->n; i++) {
        qk_quantcfg_scheme_for(cfg, s->t[i].name, s->t[i].n_dims, &q);
        if (q.quantized)
            break;
    }
    char w[48] = "";
    if (q.quantized && q.w.present) {
        int k = snprintf(w, sizeof w, " %s%d", q.w.type[0] ? q.w.type : "int", q.w.num_bits);
        if (q.w.group_size > 0 && k > 0 && (size_t)k < sizeof w)
            k += snprintf(w + k, sizeof w - (size_t)k, " g%lld", (long long)q.w.group_size);
        if (q.a.present && q.a.num_bits && k > 0 && (size_t)k < sizeof w)
            snprintf(w + k, sizeof w - (size_t)k, " a%d", q.a.num_bits);
    }
    snprintf(d->scheme, sizeof d->scheme, "%s%s", cfg->method_name, w);
    d->family = cfg->method == QK_QM_COMPRESSED_TENSORS ? QK_FAM_CT
                : cfg->method == QK_QM_MLX             ? QK_FAM_MLX
                                                       : QK_FAM_OTHER;
    qk_quantcfg_free(cfg);
}

int qk_rep_describe(const char *path, qk_rep_desc *d, qk_err *err)
{
    memset(d, 0, sizeof *d);
    qk_tensorset *s = NULL;
    int rc = qk_tensorset_open(&s, path, err);
    if (rc)
        return rc;
    uint64_t bytes = 0, elems = 0;
    for (uint64_t i = 0; i < s->n; i++) {
        bytes += s->t[i].nbytes;
        elems += s->t[i].nelem;
    }
    d->bpw = elems ? 8.0 * (double)bytes / (double)elems : 0;
    d->size = s->file_bytes;
    if (s->kind == QK_SET_GGUF) {
        snprintf(d->format, sizeof d->format, "GGUF");
        gguf_scheme(s, d);
    } else {
        snprintf(d->format, sizeof d->format, "safetensors");
        hf_scheme(s, d);
    }
    qk_tensorset_close(s);
    return 0;
}
