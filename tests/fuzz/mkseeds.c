/* mkseeds.c - writes the small binary seeds of the eval-file harnesses with
 * qk's own writers (tests/fuzz/mkseeds.sh builds and runs it; not part of
 * any build): KL-divergence base files (llama and qk, quantized and
 * factored) and QKLOGITS files of a tiny made-up vocabulary, and .qkpart
 * files of both modes.  Usage: mkseeds OUTDIR (OUTDIR/kldbase, logits,
 * qkpart must exist). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/types.h"
#include "lib/eval/kldbase.h"
#include "lib/eval/kldstats.h"
#include "lib/eval/logits_file.h"

static uint64_t rng = 88172645463325252ull;
static float rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / (float)(1 << 24) * 8.0f - 4.0f;
}

static void die(const qk_err *e)
{
    fprintf(stderr, "mkseeds: %s\n", e->msg);
    exit(1);
}

/* A base file of n_chunk chunks of n_ctx tokens over vocabulary nv; factored
 * when n_embd > 0 (an F32 output layer [nv, n_embd] with a bias). */
static void base(const char *path, int format, int n_ctx, int nv, int n_chunk, int n_embd)
{
    qk_err err = {0};
    int32_t tok[4 * 64];
    for (int i = 0; i < n_ctx * n_chunk; i++)
        tok[i] = i % nv;
    static float w[64 * 16], bias[64], hid[16], logits[64];
    for (int i = 0; i < nv * n_embd; i++)
        w[i] = rnd() * 0.25f;
    for (int i = 0; i < nv; i++)
        bias[i] = rnd() * 0.1f;
    qk_weight hw = {.name = "output.weight", .name_len = 13, .type = QK_F32, .rows = nv, .cols = n_embd,
                    .row_size = (size_t)n_embd * 4, .data = (const uint8_t *)w};
    qk_kldb_head head = {&hw, bias};
    qk_kldb_writer *wr;
    if (qk_kldb_create(&wr, path, format, n_ctx, nv, n_chunk, tok, 3, n_embd ? &head : NULL, &err))
        die(&err);
    for (int r = 0; r < n_chunk * (n_ctx - 1 - n_ctx / 2); r++) {
        for (int i = 0; i < n_embd; i++)
            hid[i] = rnd();
        for (int v = 0; v < nv; v++) {
            double s = bias[v];
            for (int i = 0; i < n_embd; i++)
                s += w[v * n_embd + i] * hid[i];
            logits[v] = n_embd ? (float)s : rnd();
        }
        if (qk_kldb_write_row(wr, logits, hid, &err))
            die(&err);
    }
    if (qk_kldb_finish(wr, &err))
        die(&err);
    qk_kldb_free(wr);
}

static void logits(const char *path, int nv, int n, int dtype)
{
    qk_err err = {0};
    qk_logits_writer *w;
    float row[64];
    if (qk_logits_create(&w, path, (uint32_t)nv, dtype, &err))
        die(&err);
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < nv; i++)
            row[i] = rnd();
        if (qk_logits_append(w, t % nv, row, &err))
            die(&err);
    }
    if (qk_logits_finish(w, &err))
        die(&err);
}

static void part(const char *path, int mode, int chunk_a, int chunk_b, int rows)
{
    qk_err err = {0};
    qk_kld_acc a;
    qk_kld_acc_init(&a, mode, true);
    for (int i = 0; i < (chunk_b - chunk_a) * rows; i++) {
        qk_kld_tok t = {.nll = 1.5 + rnd() * 0.2, .nll_base = 1.5f + rnd() * 0.2f, .kld = fabsf(rnd()) * 1e-3,
                        .p_diff = rnd() * 1e-2f, .same_top = i % 7 != 0};
        if (mode == QK_KLD_MODE_PPL)
            t.kld = 0, t.nll_base = 0, t.p_diff = 0, t.same_top = 0;
        if (qk_kld_acc_add(&a, &t, &err))
            die(&err);
    }
    int32_t tok[64];
    for (int i = 0; i < 64; i++)
        tok[i] = i;
    qk_part_info in = {.mode = mode, .n_ctx = 8, .n_vocab = 16, .n_chunk = 4, .chunk_a = chunk_a, .chunk_b = chunk_b,
                       .rows = rows, .tokens_hash = qk_tokens_hash(tok, 32), .n_records = a.n_rec};
    if (qk_part_write(path, &in, &a, &err))
        die(&err);
    qk_kld_acc_free(&a);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char p[512];
#define AT(sub, name) (snprintf(p, sizeof p, "%s/%s/%s", argv[1], sub, name), p)
    base(AT("kldbase", "llama-c8-v16-x2.kld"), QK_KLDB_LLAMA, 8, 16, 2, 0);
    base(AT("kldbase", "llama-c4-v3-x1.kld"), QK_KLDB_LLAMA, 4, 3, 1, 0);
    base(AT("kldbase", "qk-c8-v16-x3.qkb"), QK_KLDB_QK, 8, 16, 3, 0);
    base(AT("kldbase", "qk-c40-v20-x2.qkb"), QK_KLDB_QK, 40, 20, 2, 0); /* more rows than a group */
    base(AT("kldbase", "qk-factored-c8-v16-e4-x2.qkb"), QK_KLDB_QK, 8, 16, 2, 4);
    base(AT("kldbase", "qk-factored-c16-v9-e3-x1.qkb"), QK_KLDB_QK, 16, 9, 1, 3);
    logits(AT("logits", "f32-v16-x5.qkl"), 16, 5, QK_F32);
    logits(AT("logits", "f16-v7-x3.qkl"), 7, 3, QK_F16);
    logits(AT("logits", "f32-v4-x1.qkl"), 4, 1, QK_F32);
    part(AT("qkpart", "kld-0-2.qkpart"), QK_KLD_MODE_KLD, 0, 2, 3);
    part(AT("qkpart", "kld-3-4.qkpart"), QK_KLD_MODE_KLD, 3, 4, 3);
    part(AT("qkpart", "ppl-1-3.qkpart"), QK_KLD_MODE_PPL, 1, 3, 3);
    return 0;
}
