/* fuzz_tensor_type.c - libFuzzer harness for --tensor-type patterns: the
 * input is a --tensor-type-file (PATTERN=TYPE entries separated by white
 * space; qk_quant_parse_tt_list: the type look-up, the ECMAScript-to-POSIX
 * rewrite, regcomp), and the parsed list plans a Q4_K_M quantization of a
 * small two-block llama model (the rules match every tensor name against the
 * patterns, pick fallbacks, check imatrix needs).  A refusal is code 2 in
 * one line. */
#include "formats/gguf.h"
#include "kernels/types.h"
#include "lib/quant/quant_model.h"
#include "tests/fuzz/fuzz_util.h"

static const qk_gguf *model(void)
{
    static qk_gguf *g;
    if (g)
        return g;
    char path[64];
    snprintf(path, sizeof path, "/tmp/qk-fuzz-tt-%d.gguf", (int)getpid());
    qk_err err = {0};
    qk_gguf_writer *w = qk_gguf_writer_new(3);
    static const struct { const char *name; int64_t ne0, ne1; } t[] = {
        {"token_embd.weight", 256, 64}, {"output_norm.weight", 256, 1}, {"output.weight", 256, 64},
        {"blk.0.attn_norm.weight", 256, 1}, {"blk.0.attn_q.weight", 256, 256}, {"blk.0.attn_k.weight", 256, 128},
        {"blk.0.attn_v.weight", 256, 128}, {"blk.0.attn_output.weight", 256, 256},
        {"blk.0.ffn_norm.weight", 256, 1}, {"blk.0.ffn_gate.weight", 256, 512}, {"blk.0.ffn_up.weight", 256, 512},
        {"blk.0.ffn_down.weight", 512, 256}, {"blk.1.attn_q.weight", 256, 256}, {"blk.1.attn_k.weight", 256, 128},
        {"blk.1.attn_v.weight", 256, 128}, {"blk.1.attn_output.weight", 256, 256},
        {"blk.1.ffn_gate.weight", 256, 512}, {"blk.1.ffn_up.weight", 256, 512}, {"blk.1.ffn_down.weight", 512, 256},
    };
    const size_t nt = sizeof t / sizeof t[0];
    int rc = !w || qk_gguf_w_kv_str(w, "general.architecture", "llama", &err) ||
             qk_gguf_w_kv_u32(w, "llama.block_count", 2, &err) || qk_gguf_w_kv_u32(w, "llama.embedding_length", 256, &err) ||
             qk_gguf_w_kv_u32(w, "llama.attention.head_count", 4, &err) ||
             qk_gguf_w_kv_u32(w, "llama.attention.head_count_kv", 2, &err) ||
             qk_gguf_w_kv_u32(w, "llama.feed_forward_length", 512, &err);
    for (size_t i = 0; i < nt && !rc; i++) {
        int64_t ne[2] = {t[i].ne0, t[i].ne1};
        rc = qk_gguf_w_tensor(w, t[i].name, QK_F32, t[i].ne1 > 1 ? 2 : 1, ne, &err);
    }
    rc = rc || qk_gguf_w_begin(w, path, &err);
    static float zeros[512 * 256];
    for (size_t i = 0; i < nt && !rc; i++)
        rc = qk_gguf_w_data(w, zeros, (size_t)(t[i].ne0 * t[i].ne1) * 4, &err) || qk_gguf_w_end_tensor(w, &err);
    rc = rc || qk_gguf_writer_finish(w, &err) || qk_gguf_open(&g, path, 0, &err);
    qk_gguf_writer_free(w);
    unlink(path); /* mapped: the file may go */
    if (rc) {
        fprintf(stderr, "fuzz_tensor_type: cannot make the model: %s\n", err.msg);
        abort();
    }
    return g;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const qk_gguf *g = model();
    qk_err err = {0};
    qk_quant_tt *tt = NULL;
    size_t n = 0;
    int rc = qk_quant_parse_tt_list((const char *)data, size, &tt, &n, &err);
    if (rc)
        fuzz_refused(rc, &err, "--tensor-type");
    else {
        qk_quant_opts o = {.ftype = qk_quant_preset_find("Q4_K_M")->ftype, .output_tensor_type = -1,
                           .token_embedding_type = -1, .tt = tt, .n_tt = n, .nthreads = 1, .dry_run = true};
        qk_quant_plan *p = NULL;
        rc = qk_quant_plan_make(&p, g, &o, &err);
        if (rc)
            fuzz_refused(rc, &err, NULL);
        else
            for (size_t i = 0; i < p->n; i++)
                if (!qk_type_get(p->t[i].type))
                    abort();
        qk_quant_plan_free(p);
    }
    for (size_t i = 0; i < n; i++)
        free(tt[i].pattern);
    free(tt);
    return 0;
}
