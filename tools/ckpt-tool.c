/* ckpt-tool.c - drives formats/ckpt.h for tools/crosscheck.py (make
 * crosscheck) until qk-quant --to is wired: not installed, not a command.
 *
 *   ckpt-tool --to SCHEME [--asym] [--group N] [--ignore RE] [--shard-size BYTES] SRC OUT_DIR
 *   ckpt-tool --list DIR      logical tensors: name layout scheme shape
 *   ckpt-tool --elements      decode table of every element format: NAME CODE F32-BITS (hex)
 *   ckpt-tool --encode NAME   raw F32 on stdin -> one code byte each on stdout (QK_ENC_NONSAT)
 *   ckpt-tool --matmul DIR WEIGHT N
 *                             N input rows (raw F32, the weight's columns each) on stdin -> the
 *                             engine's product with the model's WEIGHT (its HF name: a quantized
 *                             module's MODULE.weight computed on its stored parts), raw F32 rows
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ckpt.h"
#include "lib/quant/ckpt_write.h"
#include "kernels/elements.h"
#include "kernels/half.h"
#include "lib/engine/hfmodel.h"
#include "lib/engine/matmul.h"

static int list(const char *dir)
{
    qk_err err = {0};
    qk_hfdir *hf = NULL;
    qk_ckpt *c = NULL;
    if (qk_hf_open(&hf, dir, &err) || qk_ckpt_open(&c, hf, &err)) {
        qk_hf_close(hf);
        return qk_err_report("ckpt-tool", &err);
    }
    for (size_t i = 0; i < c->n; i++) {
        const qk_ck_tensor *t = &c->t[i];
        printf("%s\t%s\t%s\t", t->name, qk_ck_layout_name(t->layout), t->scheme);
        for (int d = 0; d < t->n_dims; d++)
            printf(d ? "x%lld" : "%lld", (long long)t->shape[d]);
        putchar('\n');
    }
    qk_ckpt_close(c);
    qk_hf_close(hf);
    return 0;
}

static int elements(void)
{
    for (int e = 0; e < QK_ELEM_COUNT; e++) {
        const qk_elem_info *in = qk_elem_get((qk_elem)e);
        for (int c = 0; c < 1 << in->bits; c++)
            printf("%s %d %08x\n", in->name, c, qk_f32_bits(qk_elem_decode((qk_elem)e, (uint8_t)c)));
    }
    return 0;
}

static int encode(const char *name)
{
    const qk_elem_info *in = qk_elem_by_name(name);
    if (!in)
        return 2;
    qk_elem e = QK_ELEM_COUNT;
    for (int i = 0; i < QK_ELEM_COUNT; i++)
        if (qk_elem_get((qk_elem)i) == in)
            e = (qk_elem)i;
    float x[4096];
    uint8_t c[4096];
    size_t n;
    while ((n = fread(x, 4, 4096, stdin)) > 0) {
        qk_elem_encode_n(e, x, c, (int64_t)n, QK_ENC_NONSAT);
        fwrite(c, 1, n, stdout);
    }
    return 0;
}

static const qk_weight *weight_named(const qk_model *m, const char *name)
{
    const size_t n = strlen(name);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const qk_layer *l = &m->layers[il];
        const qk_weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if ((size_t)ws[i]->name_len == n && memcmp(ws[i]->name, name, n) == 0)
                return ws[i];
    }
    return (size_t)m->output.name_len == n && memcmp(m->output.name, name, n) == 0 ? &m->output : NULL;
}

static int matmul(const char *dir, const char *name, int n_tok)
{
    qk_err err = {0};
    qk_hfmodel *h;
    if (qk_hfmodel_open(&h, dir, &err))
        return qk_err_report("ckpt-tool", &err);
    const qk_weight *w = weight_named(&h->m, name);
    int rc = 0;
    float *x = NULL, *y = NULL;
    if (!w || n_tok < 1) {
        fprintf(stderr, "ckpt-tool: %s: no matrix %s\n", dir, name);
        rc = 2;
        goto done;
    }
    x = malloc((size_t)n_tok * (size_t)w->cols * sizeof *x);
    y = malloc((size_t)n_tok * (size_t)w->rows * sizeof *y);
    if (!x || !y || fread(x, sizeof *x, (size_t)n_tok * (size_t)w->cols, stdin) != (size_t)n_tok * (size_t)w->cols) {
        fprintf(stderr, "ckpt-tool: expected %d rows of %lld floats on stdin\n", n_tok, (long long)w->cols);
        rc = 2;
        goto done;
    }
    qk_matmul_ws ws = {0};
    if (qk_matmul(w, x, n_tok, y, &ws, 1, &err))
        rc = qk_err_report("ckpt-tool", &err);
    else
        fwrite(y, sizeof *y, (size_t)n_tok * (size_t)w->rows, stdout);
    qk_matmul_ws_free(&ws);
done:
    free(x), free(y);
    qk_hfmodel_close(h);
    return rc;
}

int main(int argc, char **argv)
{
    qk_ckpt_opts o = {.quiet = true};
    const char *to = NULL;
    int i = 1;
    if (argc == 3 && strcmp(argv[1], "--list") == 0)
        return list(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--elements") == 0)
        return elements();
    if (argc == 3 && strcmp(argv[1], "--encode") == 0)
        return encode(argv[2]);
    if (argc == 5 && strcmp(argv[1], "--matmul") == 0)
        return matmul(argv[2], argv[3], atoi(argv[4]));
    for (; i < argc - 2; i++) {
        if (!strcmp(argv[i], "--to") && i + 1 < argc - 2)
            to = argv[++i];
        else if (!strcmp(argv[i], "--asym"))
            o.asym = true;
        else if (!strcmp(argv[i], "--group") && i + 1 < argc - 2)
            o.group = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ignore") && i + 1 < argc - 2)
            o.ignore = argv[++i];
        else if (!strcmp(argv[i], "--shard-size") && i + 1 < argc - 2)
            o.shard_size = strtoull(argv[++i], NULL, 10);
        else
            break;
    }
    if (!to || i != argc - 2) {
        fprintf(stderr, "usage: ckpt-tool --to SCHEME [--asym] [--group N] [--ignore RE] [--shard-size B] SRC OUT\n"
                        "       ckpt-tool --list DIR\n");
        return 2;
    }
    qk_err err = {0};
    if (qk_ckpt_quantize(argv[i], argv[i + 1], to, &o, &err))
        return qk_err_report("ckpt-tool", &err);
    return 0;
}
