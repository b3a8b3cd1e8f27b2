/* run.c - qk-run: generate text with a GGUF file or a Hugging Face
 * directory, dump every position's logits, or tokenize / detokenize.
 *
 * The output mimics llama-completion: the prompt's pieces, then each
 * generated token's piece as soon as it is sampled (stdout flushed), stopping
 * at -n tokens, an end-of-generation token or a full context.  --json prints
 * one document at the end instead (schema in qk-run(1)).  Timings go to
 * stderr (unless -q) or into the JSON. */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/core/cli.h"
#include "lib/core/files.h"
#include "cmd/commands.h"
#include "lib/engine/forward.h"
#include "formats/gguf.h"
#include "lib/core/json.h"
#include "lib/eval/logits_file.h"
#include "lib/core/mapfile.h"
#include "lib/engine/model.h"
#include "lib/engine/modelfile.h"
#include "lib/core/progress.h"
#include "lib/engine/sampling.h"
#include "lib/core/threads.h"
#include "lib/study/study_cmd.h"
#include "lib/engine/tokenizer.h"
#include "kernels/types.h"

static const char usage_text[] =
    "usage: qk-run -m MODEL [-p PROMPT | -f FILE | --tokens-in FILE] [options]\n"
    "       qk-run --tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos]\n"
    "       qk-run --detokenize -m MODEL (-p IDS | -f FILE)\n"
    "\n"
    "Run a Llama-family model (llama, mistral, qwen2, qwen3) on the CPU: print the prompt and a\n"
    "continuation, token by token.  MODEL is a GGUF file or a Hugging Face directory\n"
    "(config.json + safetensors).\n"
    "\n"
    "  -m, --model MODEL      GGUF file or Hugging Face directory\n"
    "  -p, --prompt TEXT      prompt text (BOS added as the vocabulary says)\n"
    "  -f, --file FILE        prompt text from FILE\n"
    "      --tokens-in FILE   prompt as token ids (\"[1, 2, 3]\" or whitespace separated), as is\n"
    "      --tokenizer FILE   use the tokenizer of FILE (GGUF, tokenizer.json, or an HF directory);\n"
    "                         needed by HF directories without tokenizer.json\n"
    "  -n, --n-predict N      tokens to generate (default 128; -1: until end of generation or\n"
    "                         a full context; 0: only evaluate the prompt)\n"
    "      --temp T           temperature (default 0.8; 0: greedy)\n"
    "      --top-k K          keep the K most likely tokens (default 40; 0: all)\n"
    "      --top-p P          keep the smallest set reaching probability P (default 0.95)\n"
    "      --seed S           sampling seed (default 0; same seed, same text)\n"
    "  -c, --ctx-size N       context in tokens (default: the model's, at most 4096)\n"
    "  -b, --batch N          prompt tokens per batch (default 512; a shorter prompt goes whole);\n"
    "                         logits do not depend on it\n"
    "      --kv-type TYPE     KV cache f16 (default, as llama.cpp) or f32\n"
    "      --act-type T       default: activations encoded to each weight type's activation type\n"
    "                         (Q8_0, Q8_K, ...) as llama.cpp does; f32: float activations for\n"
    "                         every weight: the logits of the weights dequantized to F32\n"
    "      --logits-out FILE  write the logits of every evaluated position (format in qk-run(1))\n"
    "      --logits-dtype T   f32 (default) or f16 rows in --logits-out\n"
    "      --wire FMT         numerics study: quantize the hidden state at pipeline-stage\n"
    "                         boundaries (fp32, bf16, fp16, fp8-e4m3, fp8-e5m2, int8-token,\n"
    "                         int4-token, int4-group32, mxfp8, mxfp6, mxfp4, nvfp4)\n"
    "      --wire-every K     a boundary after every K layers\n"
    "      --wire-at L1,L2    boundaries after these layers\n"
    "      --stages S         S nearly equal stages (S-1 boundaries)\n"
    "      --wire-lossless    also measure zstd on the bf16 hidden states at the boundaries\n"
    "      --kv-cache TYPE    numerics study: quantize keys and values as they enter the cache\n"
    "                         (f32, f16, bf16, fp8-e4m3, fp8-e5m2 [:tensor|:head], int8, int4,\n"
    "                         nvfp4); implies --kv-type f32\n"
    "      --kv-key-per-channel  keys per channel in groups of 32 tokens (KIVI)\n"
    "      --kv-rotate           a Hadamard per head on keys and values around the codec (QuaRot)\n"
    "      --no-echo          do not print the prompt\n"
    "      --no-bos           --tokenize, -p, -f: do not add BOS/EOS\n"
    "      --tokenize         print the prompt's token ids as a JSON array and exit\n"
    "      --detokenize       print the text of the ids given by -p or -f and exit\n"
    "      --json             one JSON document on stdout: tokens, text, timings\n"
    "  -t, --threads N        threads (default 0 = all CPUs); output does not depend on it\n"
    "                         (nor on -b or the CPU's SIMD level: see REPRODUCIBILITY in qk-run(1))\n"
    "  -q, --quiet            no progress bar, no timings on stderr\n"
    "  -h, --help             this text\n"
    "\n"
    "Exit codes: 0 ok, 2 usage or input error, 3 I/O error.\n";

typedef struct run_opts {
    const char *prog, *model, *prompt, *file, *tokens_in, *tokenizer, *logits_out;
    int64_t n_predict, n_ctx, n_batch;
    qk_sampler_params sp;
    int threads, kv_type, logits_dtype, act_type;
    bool json, quiet, tokenize, detokenize, no_bos, no_echo;
    bool kv_type_given;
    qk_study_opts st;         /* --wire, --kv-cache (lib/study/study_cmd.h) */
} run_opts;

/* What -m opened (lib/engine/modelfile.h) and a tokenizer. */
typedef struct loaded {
    qk_model_file mf;
    const qk_model *m;
    qk_tokenizer *tok;
} loaded;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- reading inputs ------------------------------------------------------------ */

/* Token ids written as "[1, 2, 3]" or "1 2 3": digits separated by spaces,
 * commas, and one optional pair of brackets. */
static int parse_ids(const char *src, const char *text, int32_t **ids, size_t *n_ids, qk_err *err)
{
    size_t cap = 64, n = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v)
        return qk_errf(err, QK_EIO, "out of memory");
    for (const char *p = text; *p;) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',' || *p == '[' ||
            *p == ']') {
            p++;
            continue;
        }
        if (*p < '0' || *p > '9') {
            free(v);
            return qk_err_at(err, src, "token ids", (uint64_t)(p - text),
                             "unexpected character '%c' (want ids like [1, 2, 3])", *p);
        }
        char *end;
        unsigned long long x = strtoull(p, &end, 10);
        if (x > INT32_MAX) {
            free(v);
            return qk_err_at(err, src, "token ids", (uint64_t)(p - text), "id %.20s is too large",
                             p);
        }
        if (n == cap) {
            int32_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) {
                free(v);
                return qk_errf(err, QK_EIO, "out of memory");
            }
            v = nv, cap *= 2;
        }
        v[n++] = (int32_t)x;
        p = end;
    }
    *ids = v;
    *n_ids = n;
    return 0;
}

/* The -p text or the -f file's contents (malloc'd). */
static int input_text(const run_opts *o, char **text, size_t *n, qk_err *err)
{
    if (o->file)
        return qk_read_file(o->file, false, text, n, err);
    *n = strlen(o->prompt);
    *text = strdup(o->prompt);
    return *text ? 0 : qk_errf(err, QK_EIO, "out of memory");
}

/* ---- opening the model and the tokenizer ----------------------------------------- */

static void unload(loaded *l)
{
    qk_tok_free(l->tok);
    qk_model_file_close(&l->mf);
    memset(l, 0, sizeof *l);
}

/* Open -m; with_model false: only the tokenizer (vocabulary-only GGUFs). */
static int load(const run_opts *o, bool with_model, loaded *l, qk_err *err)
{
    memset(l, 0, sizeof *l);
    int rc = qk_model_file_open(&l->mf, o->model, with_model, err);
    if (rc)
        return rc;
    l->m = l->mf.m;
    if (o->tokenizer)
        rc = qk_tokenizer_from(o->tokenizer, &l->tok, err);
    else if (l->mf.g)
        rc = (l->tok = qk_tok_from_gguf(l->mf.g, err)) ? 0 : (err->code ? err->code : QK_EINPUT);
    else
        rc = qk_hf_tokenizer(o->model, &l->tok, err);
    if (rc)
        unload(l);
    return rc;
}

/* ---- tokenize / detokenize ------------------------------------------------------ */

static int do_tokenize(const run_opts *o, qk_err *err)
{
    loaded l;
    if (load(o, false, &l, err))
        return err->code;
    char *text;
    size_t n;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = input_text(o, &text, &n, err);
    if (!rc) {
        rc = qk_tok_encode(l.tok, text, n, !o->no_bos, true, &ids, &n_ids, err);
        free(text);
    }
    if (!rc) {
        /* the layout of llama.cpp's tokens lists: "[1, 2, 3]" */
        putchar('[');
        for (size_t i = 0; i < n_ids; i++)
            printf(i ? ", %d" : "%d", (int)ids[i]);
        puts("]");
    }
    free(ids);
    unload(&l);
    return rc;
}

static int do_detokenize(const run_opts *o, qk_err *err)
{
    loaded l;
    if (load(o, false, &l, err))
        return err->code;
    char *text, *out = NULL;
    size_t n, out_len;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = input_text(o, &text, &n, err);
    if (!rc) {
        rc = parse_ids(o->file ? o->file : "-p", text, &ids, &n_ids, err);
        free(text);
    }
    for (size_t i = 0; !rc && i < n_ids; i++)
        if ((uint32_t)ids[i] >= qk_tok_n_vocab(l.tok))
            rc = qk_errf(err, QK_EINPUT, "token %zu: id %d is outside the vocabulary [0, %u)", i,
                         (int)ids[i], qk_tok_n_vocab(l.tok));
    if (!rc)
        rc = qk_tok_decode(l.tok, ids, n_ids, false, false, &out, &out_len, err);
    if (!rc)
        fwrite(out, 1, out_len, stdout);
    free(out);
    free(ids);
    unload(&l);
    return rc;
}

/* ---- generation ------------------------------------------------------------------- */

typedef struct gen {
    const run_opts *o;
    loaded l;
    qk_ctx *ctx;
    qk_sampler smp;
    bool have_smp;
    qk_logits_writer *lw;
    int32_t *prompt;
    size_t n_prompt;
    int32_t *out;             /* generated ids */
    size_t n_out;
    char *text;               /* their pieces (for --json) */
    size_t text_len, text_cap;
    const char *stop;         /* "length", "eog", "context" */
    double load_ms, prompt_ms, decode_ms;
    int n_decoded;            /* tokens evaluated after the prompt */
    int n_ctx;
    qk_wire wire;             /* --wire: the boundary codec and its counters */
} gen;

static int append_text(gen *g, const char *s, size_t n, qk_err *err)
{
    if (g->text_len + n + 1 > g->text_cap) {
        size_t cap = 2 * (g->text_len + n + 1);
        char *t = realloc(g->text, cap);
        if (!t)
            return qk_errf(err, QK_EIO, "out of memory");
        g->text = t, g->text_cap = cap;
    }
    memcpy(g->text + g->text_len, s, n);
    g->text_len += n;
    g->text[g->text_len] = 0;
    return 0;
}

/* A token's piece as llama-completion prints it (control tokens empty). */
static int piece(const qk_tokenizer *t, int32_t id, char **buf, size_t *cap, size_t *len,
                 qk_err *err)
{
    int32_t k = qk_tok_piece(t, id, *buf, (int32_t)*cap, 0, false);
    if (k < 0) {
        char *nb = realloc(*buf, (size_t)-k);
        if (!nb)
            return qk_errf(err, QK_EIO, "out of memory");
        *buf = nb, *cap = (size_t)-k;
        k = qk_tok_piece(t, id, *buf, (int32_t)*cap, 0, false);
    }
    *len = k < 0 ? 0 : (size_t)k;
    return 0;
}

static int print_pieces(const gen *g, const int32_t *ids, size_t n, qk_err *err)
{
    size_t cap = 256, len;
    char *buf = malloc(cap);
    if (!buf)
        return qk_errf(err, QK_EIO, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (piece(g->l.tok, ids[i], &buf, &cap, &len, err)) {
            free(buf);
            return err->code;
        }
        fwrite(buf, 1, len, stdout);
    }
    free(buf);
    fflush(stdout);
    return 0;
}

static int prompt_tokens(gen *g, qk_err *err)
{
    const run_opts *o = g->o;
    char *text;
    size_t n;
    if (o->tokens_in) {
        if (qk_read_file(o->tokens_in, false, &text, &n, err))
            return err->code;
        int rc = parse_ids(o->tokens_in, text, &g->prompt, &g->n_prompt, err);
        free(text);
        return rc;
    }
    if (input_text(o, &text, &n, err))
        return err->code;
    int rc = qk_tok_encode(g->l.tok, text, n, !o->no_bos, true, &g->prompt, &g->n_prompt, err);
    free(text);
    return rc;
}

/* The context size: -c, else the model's (at most 4096). */
static int context_size(gen *g, qk_err *err)
{
    const int train = g->l.m->hp.n_ctx_train;
    if (g->o->n_ctx > 0) {
        if (train > 0 && g->o->n_ctx > train && !g->o->quiet) /* llama.cpp warns too */
            fprintf(stderr, "%s: warning: -c %lld is beyond the %d tokens the model was trained on\n",
                    g->o->prog, (long long)g->o->n_ctx, train);
        g->n_ctx = (int)g->o->n_ctx;
    } else {
        g->n_ctx = train > 0 && train < 4096 ? train : 4096;
    }
    if (g->n_prompt == 0)
        return qk_errf(err, QK_EINPUT, "the prompt is empty (no tokens)");
    if (g->n_prompt > (size_t)g->n_ctx)
        return qk_errf(err, QK_EINPUT,
                       "the prompt is %zu tokens, longer than the context of %d tokens (-c)",
                       g->n_prompt, g->n_ctx);
    return 0;
}

/* Evaluate the prompt (in chunks when every row's logits are wanted),
 * leaving the last row's logits in last[n_vocab]. */
static int eval_prompt(gen *g, float *last, qk_err *err)
{
    const int nv = g->l.m->hp.n_vocab;
    qk_progress pr;
    qk_progress_init(&pr, "prompt", g->n_prompt, g->o->quiet || g->o->json);
    /* calls of one batch (-b) each; the split into calls and batches does
     * not change any value (forward.h, REPRODUCIBILITY in qk-run(1)) */
    size_t chunk = (size_t)g->ctx->n_batch;
    if (g->lw && (size_t)nv * chunk > ((size_t)1 << 25))
        chunk = ((size_t)1 << 25) / (size_t)nv > 0 ? ((size_t)1 << 25) / (size_t)nv : 1;
    float *rows = NULL;
    if (g->lw && !(rows = malloc(chunk * (size_t)nv * sizeof *rows)))
        return qk_errf(err, QK_EIO, "out of memory");
    int rc = 0;
    double t0 = now_ms();
    for (size_t done = 0; !rc && done < g->n_prompt; done += chunk) {
        size_t b = g->n_prompt - done < chunk ? g->n_prompt - done : chunk;
        if (g->lw) {
            rc = qk_forward(g->ctx, g->prompt + done, (int)b, rows, true, err);
            for (size_t i = 0; !rc && i < b; i++)
                rc = qk_logits_append(g->lw, g->prompt[done + i], rows + i * (size_t)nv, err);
            if (!rc && done + b == g->n_prompt)
                memcpy(last, rows + (b - 1) * (size_t)nv, (size_t)nv * sizeof *last);
        } else {
            rc = qk_forward(g->ctx, g->prompt + done, (int)b, last, false, err);
        }
        qk_progress_add(&pr, b);
    }
    g->prompt_ms = now_ms() - t0;
    qk_progress_end(&pr);
    free(rows);
    return rc;
}

static int generate(gen *g, float *logits, qk_err *err)
{
    const run_opts *o = g->o;
    const bool stream = !o->json;
    size_t cap = 256, len;
    char *buf = malloc(cap);
    size_t max = o->n_predict < 0 ? SIZE_MAX : (size_t)o->n_predict;
    g->out = malloc((max < (size_t)g->n_ctx ? max : (size_t)g->n_ctx) * sizeof *g->out + 1);
    if (!buf || !g->out) {
        free(buf);
        return qk_errf(err, QK_EIO, "out of memory");
    }
    g->stop = "length";
    int rc = 0;
    double t0 = now_ms();
    while (!rc && g->n_out < max) {
        int32_t id = qk_sample(&g->smp, logits);
        if (qk_tok_is_eog(g->l.tok, id)) {
            g->stop = "eog";
            break;
        }
        g->out[g->n_out++] = id;
        if ((rc = piece(g->l.tok, id, &buf, &cap, &len, err)))
            break;
        if (stream) {
            fwrite(buf, 1, len, stdout);
            fflush(stdout);
        } else if ((rc = append_text(g, buf, len, err))) {
            break;
        }
        if (g->n_out == max)
            break; /* the last token needs no evaluation */
        if (g->ctx->n_past >= g->n_ctx) {
            g->stop = "context";
            break;
        }
        rc = qk_forward(g->ctx, &id, 1, logits, false, err);
        if (!rc && g->lw)
            rc = qk_logits_append(g->lw, id, logits, err);
        g->n_decoded++;
    }
    g->decode_ms = now_ms() - t0;
    free(buf);
    return rc;
}

static double per_s(double n, double ms) { return ms > 0 ? n * 1e3 / ms : 0.0; }

static void print_json(const gen *g)
{
    const run_opts *o = g->o;
    const qk_model *m = g->l.m;
    qk_json j;
    qk_json_init(&j, stdout, true);
    qk_json_obj(&j);
    qk_json_key(&j, "model"), qk_json_str(&j, o->model);
    qk_json_key(&j, "architecture"), qk_json_str(&j, m->hp.arch_name);
    qk_json_key(&j, "n_vocab"), qk_json_int(&j, m->hp.n_vocab);
    qk_json_key(&j, "n_ctx"), qk_json_int(&j, g->n_ctx);
    qk_json_key(&j, "kv_type"), qk_json_str(&j, o->kv_type == QK_F16 ? "f16" : "f32");
    qk_json_key(&j, "act_type"), qk_json_str(&j, qk_act_type_name(o->act_type));
    qk_json_key(&j, "threads"), qk_json_int(&j, o->threads);
    qk_json_key(&j, "n_batch"), qk_json_int(&j, g->ctx->n_batch);
    qk_json_key(&j, "sampling");
    qk_json_obj(&j);
    qk_json_key(&j, "temp"), qk_json_f32(&j, o->sp.temp);
    qk_json_key(&j, "top_k"), qk_json_int(&j, o->sp.top_k);
    qk_json_key(&j, "top_p"), qk_json_f32(&j, o->sp.top_p);
    qk_json_key(&j, "seed"), qk_json_uint(&j, o->sp.seed);
    qk_json_end_obj(&j);
    qk_json_key(&j, "prompt_tokens");
    qk_json_arr(&j);
    for (size_t i = 0; i < g->n_prompt; i++)
        qk_json_int(&j, g->prompt[i]);
    qk_json_end_arr(&j);
    qk_json_key(&j, "tokens");
    qk_json_arr(&j);
    for (size_t i = 0; i < g->n_out; i++)
        qk_json_int(&j, g->out[i]);
    qk_json_end_arr(&j);
    qk_json_key(&j, "text"), qk_json_strn(&j, g->text ? g->text : "", g->text_len);
    qk_json_key(&j, "stop"), qk_json_str(&j, g->stop);
    qk_study_json(&j, &o->st, &g->wire, &m->hp);
    if (o->st.has_kvq)
        qk_json_key(&j, "kv_bytes_cached"), qk_json_f64(&j, qk_ctx_kv_bytes(g->ctx));
    qk_json_key(&j, "timings");
    qk_json_obj(&j);
    qk_json_key(&j, "load_ms"), qk_json_f64(&j, g->load_ms);
    qk_json_key(&j, "prompt_n"), qk_json_int(&j, (int64_t)g->n_prompt);
    qk_json_key(&j, "prompt_ms"), qk_json_f64(&j, g->prompt_ms);
    qk_json_key(&j, "prompt_tokens_per_s"), qk_json_f64(&j, per_s((double)g->n_prompt, g->prompt_ms));
    qk_json_key(&j, "decode_n"), qk_json_int(&j, g->n_decoded);
    qk_json_key(&j, "decode_ms"), qk_json_f64(&j, g->decode_ms);
    qk_json_key(&j, "decode_tokens_per_s"), qk_json_f64(&j, per_s(g->n_decoded, g->decode_ms));
    qk_json_end_obj(&j);
    qk_json_end_obj(&j);
    qk_json_done(&j);
}

static void gen_free(gen *g)
{
    qk_logits_discard(g->lw);
    if (g->have_smp)
        qk_sampler_free(&g->smp);
    qk_ctx_free(g->ctx);
    unload(&g->l);
    free(g->prompt), free(g->out), free(g->text);
}

static int do_run(const run_opts *o, qk_err *err)
{
    gen g = {.o = o};
    float *logits = NULL;
    double t0 = now_ms();
    int rc = load(o, true, &g.l, err);
    if (rc)
        return rc;
    g.load_ms = now_ms() - t0;
    const int nv = g.l.m->hp.n_vocab;
    qk_ctx_params cp = {.n_ctx = 0, .n_batch = (int)o->n_batch, .nthreads = o->threads,
                        .kv_type = o->kv_type, .act_type = o->act_type};
    if ((rc = prompt_tokens(&g, err)) || (rc = context_size(&g, err)))
        goto done;
    cp.n_ctx = g.n_ctx;
    if ((rc = qk_study_prepare(&o->st, &g.l.m->hp, &g.wire, err)))
        goto done;
    cp.layer_hook = o->st.has_wire ? qk_wire_layer_hook : NULL;
    cp.hook_user = o->st.has_wire ? &g.wire : NULL;
    cp.kvq = o->st.has_kvq ? &o->st.kvq : NULL;
    if ((rc = qk_ctx_new(&g.ctx, g.l.m, &cp, err)) ||
        (rc = qk_sampler_init(&g.smp, nv, &o->sp, err)))
        goto done;
    g.have_smp = true;
    if (o->logits_out && (rc = qk_logits_create(&g.lw, o->logits_out, (uint32_t)nv,
                                                o->logits_dtype, err)))
        goto done;
    if (!(logits = malloc((size_t)nv * sizeof *logits))) {
        rc = qk_errf(err, QK_EIO, "out of memory");
        goto done;
    }
    const bool echo = !o->json && !o->no_echo && !o->tokens_in;
    if (echo && (rc = print_pieces(&g, g.prompt, g.n_prompt, err)))
        goto done;
    if ((rc = eval_prompt(&g, logits, err)) || (rc = generate(&g, logits, err)))
        goto done;
    if (g.lw) {
        rc = qk_logits_finish(g.lw, err);
        g.lw = NULL;
        if (rc)
            goto done;
    }
    if (o->json) {
        print_json(&g);
    } else if (echo || g.n_out > 0) {
        putchar('\n');
        fflush(stdout);
    }
    if (!o->quiet && !o->json) {
        if (strcmp(g.stop, "context") == 0)
            fprintf(stderr, "%s: stopped: the context of %d tokens is full\n", o->prog, g.n_ctx);
        fprintf(stderr,
                "%s: prompt %zu tokens in %.1f ms (%.1f tokens/s), generated %zu tokens in %.1f "
                "ms (%.1f tokens/s)\n",
                o->prog, g.n_prompt, g.prompt_ms, per_s((double)g.n_prompt, g.prompt_ms), g.n_out,
                g.decode_ms, per_s(g.n_decoded, g.decode_ms));
    }
    if (!o->quiet) {
        qk_study_print(stderr, o->prog, &o->st, &g.wire, &g.l.m->hp);
        if (o->st.has_kvq)
            fprintf(stderr, "%s: kv cache: %.0f bytes for the %d cached tokens\n", o->prog,
                    qk_ctx_kv_bytes(g.ctx), g.ctx->n_past);
    }
done:
    free(logits);
    qk_wire_free(&g.wire);
    gen_free(&g);
    return rc;
}

/* ---- options ------------------------------------------------------------------------ */

static int parse_type(const char *opt, const char *s, int *out, qk_err *err)
{
    if (strcmp(s, "f32") == 0 || strcmp(s, "F32") == 0)
        *out = QK_F32;
    else if (strcmp(s, "f16") == 0 || strcmp(s, "F16") == 0)
        *out = QK_F16;
    else
        return qk_errf(err, QK_EINPUT, "%s: '%s' is neither f32 nor f16", opt, s);
    return 0;
}

static int check_opts(run_opts *o, qk_err *err)
{
    if (!o->model)
        return qk_errf(err, QK_EINPUT, "need -m MODEL; see --help");
    int inputs = !!o->prompt + !!o->file + !!o->tokens_in;
    if (inputs != 1)
        return qk_errf(err, QK_EINPUT, "give exactly one of -p, -f and --tokens-in; see --help");
    if ((o->tokenize || o->detokenize) && o->tokens_in)
        return qk_errf(err, QK_EINPUT, "--tokenize and --detokenize read -p or -f");
    if (o->tokenize && o->detokenize)
        return qk_errf(err, QK_EINPUT, "--tokenize and --detokenize exclude each other");
    if (o->logits_out) {
        if (qk_same_file(o->logits_out, o->model) ||
            (o->tokenizer && qk_same_file(o->logits_out, o->tokenizer)) ||
            (o->file && qk_same_file(o->logits_out, o->file)) ||
            (o->tokens_in && qk_same_file(o->logits_out, o->tokens_in)))
            return qk_errf(err, QK_EINPUT, "--logits-out %s would overwrite an input",
                           o->logits_out);
    }
    if (qk_study_check(&o->st, o->kv_type_given, &o->kv_type, err))
        return err->code;
    if (o->threads == 0)
        o->threads = qk_cpu_count();
    return 0;
}

int cmd_run(int argc, char **argv)
{
    enum {
        O_TOKENS_IN = 256, O_TOKENIZER, O_TEMP, O_TOP_K, O_TOP_P, O_SEED, O_KV, O_LOGITS,
        O_LOGITS_DTYPE, O_NO_ECHO, O_NO_BOS, O_TOKENIZE, O_DETOKENIZE, O_JSON, O_ACT
    };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"prompt", required_argument, 0, 'p'},
        {"file", required_argument, 0, 'f'}, {"tokens-in", required_argument, 0, O_TOKENS_IN},
        {"tokenizer", required_argument, 0, O_TOKENIZER},
        {"n-predict", required_argument, 0, 'n'}, {"temp", required_argument, 0, O_TEMP},
        {"top-k", required_argument, 0, O_TOP_K}, {"top-p", required_argument, 0, O_TOP_P},
        {"seed", required_argument, 0, O_SEED}, {"ctx-size", required_argument, 0, 'c'},
        {"batch", required_argument, 0, 'b'},
        {"kv-type", required_argument, 0, O_KV}, {"logits-out", required_argument, 0, O_LOGITS},
        {"act-type", required_argument, 0, O_ACT},
        {"logits-dtype", required_argument, 0, O_LOGITS_DTYPE},
        {"no-echo", no_argument, 0, O_NO_ECHO}, {"no-bos", no_argument, 0, O_NO_BOS},
        {"tokenize", no_argument, 0, O_TOKENIZE}, {"detokenize", no_argument, 0, O_DETOKENIZE},
        {"json", no_argument, 0, O_JSON}, {"threads", required_argument, 0, 't'},
        {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, QK_STUDY_LONG_OPTIONS,
        {0, 0, 0, 0}};
    run_opts o = {.prog = argv[0], .n_predict = 128,
                  .sp = {.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 0},
                  .kv_type = QK_F16, .logits_dtype = QK_F32};
    qk_err err = {0};
    int c;
    int64_t v;
    double d;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:p:f:n:c:b:t:qh", opts, NULL)) != -1) {
        int rc = qk_study_opt(&o.st, c, optarg, &err);
        if (rc < 0)
            return qk_err_report(argv[0], &err);
        if (rc)
            continue;
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'p': o.prompt = optarg; break;
        case 'f': o.file = optarg; break;
        case O_TOKENS_IN: o.tokens_in = optarg; break;
        case O_TOKENIZER: o.tokenizer = optarg; break;
        case 'n': rc = qk_cli_int("-n", optarg, -1, INT32_MAX, &o.n_predict, &err); break;
        case 'c': rc = qk_cli_int("-c", optarg, 1, INT32_MAX, &o.n_ctx, &err); break;
        case 'b': rc = qk_cli_int("-b", optarg, 1, INT32_MAX, &o.n_batch, &err); break;
        case O_TEMP:
            if (!(rc = qk_cli_double("--temp", optarg, &d, &err)))
                o.sp.temp = (float)d;
            break;
        case O_TOP_K:
            if (!(rc = qk_cli_int("--top-k", optarg, 0, INT32_MAX, &v, &err)))
                o.sp.top_k = (int)v;
            break;
        case O_TOP_P:
            if (!(rc = qk_cli_double("--top-p", optarg, &d, &err)))
                o.sp.top_p = (float)d;
            break;
        case O_SEED:
            if (!(rc = qk_cli_int("--seed", optarg, 0, INT64_MAX, &v, &err)))
                o.sp.seed = (uint64_t)v;
            break;
        case O_KV:
            rc = parse_type("--kv-type", optarg, &o.kv_type, &err);
            o.kv_type_given = true;
            break;
        case O_LOGITS: o.logits_out = optarg; break;
        case O_ACT: rc = qk_act_type_parse(optarg, &o.act_type, &err); break;
        case O_LOGITS_DTYPE: rc = parse_type("--logits-dtype", optarg, &o.logits_dtype, &err); break;
        case O_NO_ECHO: o.no_echo = true; break;
        case O_NO_BOS: o.no_bos = true; break;
        case O_TOKENIZE: o.tokenize = true; break;
        case O_DETOKENIZE: o.detokenize = true; break;
        case O_JSON: o.json = true; break;
        case 't': rc = qk_cli_threads(optarg, &o.threads, &err); break;
        case 'q': o.quiet = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return qk_cli_bad_option(argv[0], argv, optind);
        }
        if (rc)
            return qk_err_report(argv[0], &err);
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", argv[0], argv[optind]);
        return 2;
    }
    if (check_opts(&o, &err))
        return qk_err_report(argv[0], &err);
    int rc = o.tokenize ? do_tokenize(&o, &err) : o.detokenize ? do_detokenize(&o, &err)
                                                              : do_run(&o, &err);
    return rc ? qk_err_report(argv[0], &err) : 0;
}
