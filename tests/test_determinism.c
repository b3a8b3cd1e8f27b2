/* Bitwise-reproducible logits (issue #10): the same model and tokens give
 * the same logits, memcmp-equal, whatever
 * - the thread count: 1, 2, 3, 8;
 * - the prompt batch size (qk_ctx_params.n_batch): 1, 7, 64, 512, the whole
 *   prompt;
 * - whether a position is computed in a prompt batch or by a one-token
 *   decode call after a shorter prompt;
 * - the SIMD level of the kernels: QK_CPU=scalar, avx2, avx512 (a level the
 *   CPU lacks is skipped with a note in the log).
 *
 * Models, which between them take each attention path of forward.c:
 * stories260K (F32 weights; F16 cache, head size 8: the F16 accumulator;
 * 128 tokens, its training context), stories4M quantized by llama-quantize
 * (Q8_0 weights: Q8_0 activation encoding and integer dots; F16 cache, head
 * size 32: the F32 accumulator; 64 tokens) and a small random qwen3 model
 * written here with F16 weights (the float-dot order of kernels/float.c;
 * sizes that are no multiple of 16, so every dot has a tail; q/k norms and
 * biases; F32 cache; 530 tokens, so that batches of 512 split the prompt),
 * and stories4M's Q8_0 again with float activations (--act-type f32: the
 * float-activation products over Q8_0's decoders).
 *
 * The kernel level is fixed per process at the first kernel call (cpu.h),
 * so each level runs in a child process (fork before any kernel call here)
 * with QK_CPU set; the child computes the reference (1 thread, one batch)
 * and every variant, compares them itself, and hands back through shared
 * memory its verdicts and its reference logits, which the test compares
 * across levels. */
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu.h"
#include "lib/engine/forward.h"
#include "formats/gguf.h"
#include "kernels/half.h"
#include "lib/engine/model.h"
#include "tests/testutil.h"
#include "kernels/types.h"

#define STORIES260K "goldens/models/stories260K/stories260K-f32.gguf"
#define STORIES4M_Q8 "goldens/llamacpp/stories4M/stories4M-Q8_0.gguf"
#define EVAL_TOKENS "goldens/stories260K-eval/eval-64k.tokens.txt"

/* ---- the variants -------------------------------------------------------------- */

/* How one evaluation is run: tokens[0..n) (a prefix of the reference's
 * tokens: by causality its rows must equal the reference's first n rows),
 * in batches of n_batch (0: one batch of n), or, with decode_from > 0,
 * tokens [0, decode_from) as one batch and then one qk_forward call per
 * token, as generation does. */
typedef struct {
    int nthreads, n_batch, decode_from, n;
} variant;

#define MAX_VARIANTS 16
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* The matrix for a prompt of n tokens.  Long runs use few threads and big
 * batches; one-token steps (batch 1, decode) and 8 threads run on prefixes,
 * which keeps the test fast on a small, busy machine.  full = false: a
 * reduced set for the scalar level, whose only new question is the
 * kernels': a reference of at most 128 tokens plus two mixed variants. */
static int variants_for(int n, bool full, variant *v)
{
    int k = 0;
    if (!full) { /* its reference is compared with the other levels' */
        v[k++] = (variant){1, 0, 0, MIN(n, 128)};
        v[k++] = (variant){8, 7, 0, MIN(n, 40)};
        v[k++] = (variant){3, 0, MIN(n, 40) - 8, MIN(n, 40)};
        return k;
    }
    v[k++] = (variant){1, 0, 0, n}; /* the reference */
    v[k++] = (variant){2, 0, 0, n};
    v[k++] = (variant){3, 0, 0, MIN(n, 96)};
    v[k++] = (variant){8, 0, 0, MIN(n, 48)};
    v[k++] = (variant){2, 1, 0, MIN(n, 40)};
    v[k++] = (variant){3, 7, 0, MIN(n, 64)};
    v[k++] = (variant){8, 7, 0, MIN(n, 32)};
    if (n > 64)
        v[k++] = (variant){2, 64, 0, n};
    if (n > 512) /* 512 on a shorter prompt is the whole prompt again */
        v[k++] = (variant){3, 512, 0, n};
    v[k++] = (variant){3, 0, 5, MIN(n, 40)};     /* a short prompt, then decode */
    v[k++] = (variant){1, 0, MIN(n, 64) - 6, MIN(n, 64)}; /* decode the last few */
    return k;
}

/* ---- what a child hands back ------------------------------------------------------ */

typedef struct {
    int level;              /* qk_cpu_level_active() in the child */
    int status;             /* 0 done, else failed (msg says why) */
    int n_variants;
    variant v[MAX_VARIANTS];
    long first_diff[MAX_VARIANTS]; /* -1: equal to the reference; else first float index */
    char msg[sizeof(((qk_err *)0)->msg)];
    float logits[];         /* the reference: n rows of n_vocab */
} shared;

/* The first n ids of eval-64k.tokens.txt (read before forking). */
static int32_t *eval_tokens(int n)
{
    char *text = tu_read(EVAL_TOKENS, NULL);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    cr_assert(ids);
    const char *p = text;
    for (int i = 0; i < n; i++) {
        while (*p && (*p < '0' || *p > '9'))
            p++;
        cr_assert(*p, "fewer than %d ids in " EVAL_TOKENS, n);
        ids[i] = (int32_t)strtol(p, (char **)&p, 10);
    }
    free(text);
    return ids;
}

/* Logits of every position of tokens[0..v.n) under variant v into out; 0 or
 * an error code with err set.  (Child process: no Criterion asserts.) */
static int evaluate(const qk_model *m, const int32_t *tok, int kv_type, int act_type, variant v,
                    float *out, qk_err *err)
{
    const size_t nv = (size_t)m->hp.n_vocab;
    const int n = v.n;
    qk_ctx *c;
    qk_ctx_params p = {.n_ctx = n, .n_batch = v.n_batch ? v.n_batch : n, .nthreads = v.nthreads,
                       .kv_type = kv_type, .act_type = act_type};
    int rc = qk_ctx_new(&c, m, &p, err);
    if (rc)
        return rc;
    if (!v.decode_from) {
        rc = qk_forward(c, tok, n, out, true, err);
    } else {
        rc = qk_forward(c, tok, v.decode_from, out, true, err);
        for (int i = v.decode_from; !rc && i < n; i++)
            rc = qk_forward(c, tok + i, 1, out + (size_t)i * nv, false, err);
    }
    qk_ctx_free(c);
    return rc;
}

static long first_difference(const float *a, const float *b, size_t count)
{
    if (memcmp(a, b, count * sizeof *a) == 0)
        return -1;
    for (size_t i = 0; i < count; i++)
        if (memcmp(a + i, b + i, sizeof *a) != 0)
            return (long)i;
    return -1;
}

/* The child's work: kernels at QK_CPU=level_name, every variant. */
static int child_run(shared *sh, const char *path, const int32_t *tok, int n, int kv_type,
                     int act_type)
{
    qk_err err = {0};
    sh->level = (int)qk_cpu_level_active();
    qk_gguf *g;
    qk_model m;
    if (qk_gguf_open(&g, path, 0, &err))
        goto fail;
    if (qk_model_load(&m, g, &err)) {
        qk_gguf_close(g);
        goto fail;
    }
    const size_t nv = (size_t)m.hp.n_vocab;
    float *got = malloc((size_t)n * nv * sizeof *got);
    int rc = got ? 0 : qk_errf(&err, QK_EIO, "out of memory");
    sh->n_variants = variants_for(n, sh->level > QK_CPU_SCALAR, sh->v);
    for (int i = 0; !rc && i < sh->n_variants; i++) {
        rc = evaluate(&m, tok, kv_type, act_type, sh->v[i], i ? got : sh->logits, &err);
        sh->first_diff[i] =
            rc || !i ? -1 : first_difference(sh->logits, got, (size_t)sh->v[i].n * nv);
    }
    free(got);
    qk_model_free(&m);
    qk_gguf_close(g);
    if (rc)
        goto fail;
    sh->status = 0;
    return 0;
fail:
    snprintf(sh->msg, sizeof sh->msg, "%s", err.msg);
    sh->status = 1;
    return 1;
}

/* Fork a child with QK_CPU=name; wait for it.  Returns its shared block. */
static shared *run_level(const char *name, const char *path, const int32_t *tok, int n,
                         int n_vocab, int kv_type, int act_type, size_t *map_size)
{
    *map_size = sizeof(shared) + (size_t)n * (size_t)n_vocab * sizeof(float);
    shared *sh = mmap(NULL, *map_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(sh != MAP_FAILED);
    sh->status = -1;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork failed");
    if (pid == 0) {
        setenv("QK_CPU", name, 1);
        _exit(child_run(sh, path, tok, n, kv_type, act_type));
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st), "QK_CPU=%s: the child died (signal %d)", name,
              WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    cr_assert_eq(sh->status, 0, "QK_CPU=%s: %s", name, sh->msg);
    return sh;
}

static void describe(char *buf, size_t n, variant v)
{
    if (v.decode_from)
        snprintf(buf, n, "%d tokens, %d threads, prompt of %d then one-token decode", v.n,
                 v.nthreads, v.decode_from);
    else if (v.n_batch)
        snprintf(buf, n, "%d tokens, %d threads, batches of %d", v.n, v.nthreads, v.n_batch);
    else
        snprintf(buf, n, "%d tokens, %d thread%s, one batch", v.n, v.nthreads,
                 v.nthreads > 1 ? "s" : "");
}

/* The whole matrix for one model: every variant at every level equals the
 * scalar level's reference. */
static void check_model_act(const char *path, int n_vocab, int n, int kv_type, int act_type)
{
    int32_t *tok = eval_tokens(n);
    for (int i = 0; i < n; i++)
        tok[i] %= n_vocab;
    static const char *const levels[] = {"scalar", "avx2", "avx512"};
    shared *ref = NULL;
    size_t ref_size = 0;
    int checked = 0;
    for (int l = 0; l < 3; l++) {
        size_t size;
        shared *sh = run_level(levels[l], path, tok, n, n_vocab, kv_type, act_type, &size);
        if (sh->level != l) { /* the CPU lacks it: QK_CPU cannot raise the level */
            cr_log_info("%s: QK_CPU=%s not supported by this CPU: skipped", path, levels[l]);
            munmap(sh, size);
            continue;
        }
        for (int i = 1; i < sh->n_variants; i++) {
            char what[96];
            describe(what, sizeof what, sh->v[i]);
            cr_expect_eq(sh->first_diff[i], -1,
                         "%s, QK_CPU=%s, %s: logits differ from 1 thread, one batch (first at "
                         "row %ld, token %ld)",
                         path, levels[l], what, sh->first_diff[i] / n_vocab,
                         sh->first_diff[i] % n_vocab);
        }
        cr_log_info("%s: QK_CPU=%s: reference of %d tokens and %d variants", path, levels[l],
                    sh->v[0].n, sh->n_variants - 1);
        checked++;
        if (!ref) {
            ref = sh, ref_size = size;
            continue;
        }
        const int rows = MIN(ref->v[0].n, sh->v[0].n);
        const long d = first_difference(ref->logits, sh->logits, (size_t)rows * n_vocab);
        cr_expect_eq(d, -1, "%s: QK_CPU=%s differs from QK_CPU=scalar (first at row %ld)", path,
                     levels[l], d / n_vocab);
        munmap(sh, size);
    }
    cr_assert_geq(checked, 2, "scalar and at least one SIMD level ran");
    /* the logits are real numbers, not an all-equal degenerate output */
    bool finite = true, varied = false;
    for (size_t i = 0; i < (size_t)ref->v[0].n * n_vocab; i++) {
        finite &= isfinite(ref->logits[i]) != 0;
        varied |= ref->logits[i] != ref->logits[0];
    }
    cr_expect(finite && varied, "%s: degenerate logits", path);
    munmap(ref, ref_size);
    free(tok);
}

static void check_model(const char *path, int n_vocab, int n, int kv_type)
{
    check_model_act(path, n_vocab, n, kv_type, QK_ACT_DEFAULT);
}

/* ---- a small random F16 model -------------------------------------------------- */

enum { R_EMBD = 72, R_HEADS = 3, R_HEADS_KV = 1, R_HEAD = 24, R_FF = 136, R_VOCAB = 300, R_LAYERS = 2 };

static void put_tensor(qk_gguf_writer *w, const char *name, int type, int64_t ne0, int64_t ne1)
{
    qk_err err = {0};
    const int64_t ne[2] = {ne0, ne1};
    cr_assert_eq(qk_gguf_w_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, &err), 0, "%s", err.msg);
}

typedef struct {
    const char *name;
    int type;
    int64_t ne0, ne1;
    float scale, offset; /* values: offset + scale * gauss */
} tdesc;

static int random_tensors(tdesc *t)
{
    int k = 0;
    const float we = 1.0f / sqrtf((float)R_EMBD), wf = 1.0f / sqrtf((float)R_FF);
    t[k++] = (tdesc){"token_embd.weight", QK_F16, R_EMBD, R_VOCAB, 1.0f, 0};
    t[k++] = (tdesc){"output_norm.weight", QK_F32, R_EMBD, 1, 0.1f, 1.0f};
    t[k++] = (tdesc){"output.weight", QK_F16, R_EMBD, R_VOCAB, we, 0};
    static char names[R_LAYERS][13][40];
    for (int il = 0; il < R_LAYERS; il++) {
        static const char *const base[13] = {
            "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
            "attn_output.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias",
            "attn_q_norm.weight", "attn_k_norm.weight", "ffn_norm.weight", "ffn_gate.weight",
            "ffn_up.weight"};
        for (int j = 0; j < 13; j++)
            snprintf(names[il][j], sizeof names[il][j], "blk.%d.%s", il, base[j]);
        const int q = R_HEADS * R_HEAD, kv = R_HEADS_KV * R_HEAD;
        t[k++] = (tdesc){names[il][0], QK_F32, R_EMBD, 1, 0.1f, 1.0f};
        t[k++] = (tdesc){names[il][1], QK_F16, R_EMBD, q, we, 0};
        t[k++] = (tdesc){names[il][2], QK_F16, R_EMBD, kv, we, 0};
        t[k++] = (tdesc){names[il][3], QK_F16, R_EMBD, kv, we, 0};
        t[k++] = (tdesc){names[il][4], QK_F16, q, R_EMBD, we, 0};
        t[k++] = (tdesc){names[il][5], QK_F32, q, 1, 0.1f, 0};
        t[k++] = (tdesc){names[il][6], QK_F32, kv, 1, 0.1f, 0};
        t[k++] = (tdesc){names[il][7], QK_F32, kv, 1, 0.1f, 0};
        t[k++] = (tdesc){names[il][8], QK_F32, R_HEAD, 1, 0.1f, 1.0f};
        t[k++] = (tdesc){names[il][9], QK_F32, R_HEAD, 1, 0.1f, 1.0f};
        t[k++] = (tdesc){names[il][10], QK_F32, R_EMBD, 1, 0.1f, 1.0f};
        t[k++] = (tdesc){names[il][11], QK_F16, R_EMBD, R_FF, we, 0};
        t[k++] = (tdesc){names[il][12], QK_F16, R_EMBD, R_FF, we, 0};
        static char down[R_LAYERS][40];
        snprintf(down[il], sizeof down[il], "blk.%d.ffn_down.weight", il);
        t[k++] = (tdesc){down[il], QK_F16, R_FF, R_EMBD, wf, 0};
    }
    return k;
}

/* A qwen3 model with Gaussian weights (F16 matrices, F32 vectors) at path. */
static void write_random_f16(const char *path)
{
    qk_err err = {0};
    qk_gguf_writer *w = qk_gguf_writer_new(3);
    cr_assert(w);
    cr_assert_eq(qk_gguf_w_kv_str(w, "general.architecture", "qwen3", &err), 0, "%s", err.msg);
    static const struct { const char *key; uint32_t v; } dims[] = {
        {"qwen3.embedding_length", R_EMBD}, {"qwen3.block_count", R_LAYERS},
        {"qwen3.feed_forward_length", R_FF}, {"qwen3.attention.head_count", R_HEADS},
        {"qwen3.attention.head_count_kv", R_HEADS_KV}, {"qwen3.attention.key_length", R_HEAD},
        {"qwen3.attention.value_length", R_HEAD}, {"qwen3.context_length", 1024}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        cr_assert_eq(qk_gguf_w_kv_u32(w, dims[i].key, dims[i].v, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_gguf_w_kv_f32(w, "qwen3.attention.layer_norm_rms_epsilon", 1e-6f, &err), 0);
    cr_assert_eq(qk_gguf_w_kv_f32(w, "qwen3.rope.freq_base", 10000.0f, &err), 0);
    tdesc t[3 + 14 * R_LAYERS];
    const int nt = random_tensors(t);
    for (int i = 0; i < nt; i++)
        put_tensor(w, t[i].name, t[i].type, t[i].ne0, t[i].ne1);
    cr_assert_eq(qk_gguf_w_begin(w, path, &err), 0, "%s", err.msg);
    uint64_t rng = 0xDE7E4A11ull;
    for (int i = 0; i < nt; i++) {
        const size_t count = (size_t)t[i].ne0 * (size_t)t[i].ne1;
        const size_t esize = t[i].type == QK_F16 ? 2 : 4;
        uint8_t *buf = malloc(count * esize);
        cr_assert(buf);
        for (size_t j = 0; j < count; j++) {
            const float x = t[i].offset + t[i].scale * tu_gauss(&rng);
            if (t[i].type == QK_F16) {
                const uint16_t h = qk_f32_to_f16(x);
                memcpy(buf + 2 * j, &h, 2);
            } else {
                memcpy(buf + 4 * j, &x, 4);
            }
        }
        cr_assert_eq(qk_gguf_w_data(w, buf, count * esize, &err), 0, "%s", err.msg);
        cr_assert_eq(qk_gguf_w_end_tensor(w, &err), 0, "%s", err.msg);
        free(buf);
    }
    cr_assert_eq(qk_gguf_writer_finish(w, &err), 0, "%s", err.msg);
    qk_gguf_writer_free(w);
}

/* ---- the tests ------------------------------------------------------------------ */

Test(determinism, stories260K_f32) { check_model(STORIES260K, 512, 128, QK_F16); }

Test(determinism, stories4M_q8_0) { check_model(STORIES4M_Q8, 32000, 64, QK_F16); }

/* --act-type f32: the float-activation products (kernels/f32act.c,
 * kernels/x86/avx2_f32act.c) with Q8_0's decoder of each level. */
Test(determinism, stories4M_q8_0_f32_activations)
{
    check_model_act(STORIES4M_Q8, 32000, 64, QK_F16, QK_ACT_F32);
}

Test(determinism, random_qwen3_f16)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/qk_test_determinism_%d.gguf", (int)getpid());
    write_random_f16(path);
    check_model(path, R_VOCAB, 530, QK_F32);
    remove(path);
}
