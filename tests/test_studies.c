/* Numerics studies (docs/studies.md): pipeline-wire codecs (lib/study/wire.h),
 * KV-cache codecs (lib/engine/kvquant.h), their engine hooks (lib/engine/forward.h), the
 * KLD runner (lib/study/study_run.h) and the error scorecard (lib/study/study_error.h).
 * - every wire format's encode writes the scheme kernels' bytes
 *   (kernels/scaled.h) and its quantize-dequantize equals theirs bit for
 *   bit; int8-token, bf16/fp16, MX and NVFP4 also against the element
 *   codecs and building blocks directly;
 * - bf16 on a bf16-representable hidden state is the identity: a model
 *   whose residual stream is rounded to bf16 after every layer gives the
 *   same logits with and without --wire bf16 at every boundary;
 * - --wire fp32 and --kv-cache f32 give logits memcmp-equal to the plain
 *   engine, and the KLD runner reports exactly 0 for them;
 * - wire and KV codecs (KIVI keys included) give bit-identical logits for
 *   1 and 3 threads and for one batch, other batch splits and token-by-token
 *   decoding;
 * - KV codecs: per token-head and per-channel (KIVI) cells hold at most
 *   2^bits levels within half a step of the input; bytes per token;
 * - scorecard: cells equal direct scheme/GGUF round trips, zero padding
 *   equals a partial last group, synthetic generators are seeded and have
 *   their distributions' moments, output bytes do not depend on threads. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "lib/engine/forward.h"
#include "formats/gguf.h"
#include "kernels/half.h"
#include "kernels/hadamard.h"
#include "lib/engine/kvquant.h"
#include "lib/engine/model.h"
#include "kernels/quantize.h"
#include "kernels/scaled.h"
#include "lib/study/study_error.h"
#include "lib/study/study_run.h"
#include "kernels/types.h"
#include "lib/study/wire.h"
#include "tests/testutil.h"

#define MODEL "goldens/models/stories260K/stories260K-f32.gguf"

/* Rows of Gaussians with a few outliers, a zero row and a tiny row. */
static float *test_rows(int n_tok, int n, uint64_t seed)
{
    float *x = malloc((size_t)n_tok * n * sizeof *x);
    cr_assert(x);
    for (int i = 0; i < n_tok * n; i++)
        x[i] = tu_gauss(&seed) * (i % 29 == 0 ? 40.0f : 1.0f);
    memset(x, 0, (size_t)n * sizeof *x);
    for (int i = 0; i < n; i++)
        x[n + i] *= 1e-30f;
    return x;
}

static const char *const wire_schemes[QK_WIRE_FMT_COUNT] = {
    [QK_WIRE_FP8_E4M3] = "fp8_e4m3", [QK_WIRE_FP8_E5M2] = "fp8_e5m2",
    [QK_WIRE_INT8_TOKEN] = "int8", [QK_WIRE_INT4_TOKEN] = "int4",
    [QK_WIRE_INT4_GROUP32] = "int4", [QK_WIRE_MXFP8] = "mxfp8_e4m3",
    [QK_WIRE_MXFP6] = "mxfp6_e2m3", [QK_WIRE_MXFP4] = "mxfp4", [QK_WIRE_NVFP4] = "nvfp4",
};

static qk_scheme_opts wire_opts(qk_wire_fmt f)
{
    qk_scheme_opts o = {0};
    if (f == QK_WIRE_INT4_GROUP32)
        o.gran = QK_GRAN_GROUP, o.group = 32;
    else if (f <= QK_WIRE_INT4_TOKEN)
        o.gran = QK_GRAN_ROW;
    return o;
}

Test(wire, formats_are_the_scheme_kernels)
{
    const int n = 128, n_tok = 6;
    float *x = test_rows(n_tok, n, 7);
    for (int f = QK_WIRE_FP8_E4M3; f < QK_WIRE_FMT_COUNT; f++) {
        qk_err err = {0};
        const qk_scheme *s = qk_scheme_by_name(wire_schemes[f]);
        qk_scheme_opts o = wire_opts((qk_wire_fmt)f);
        const size_t nb = qk_wire_token_bytes((qk_wire_fmt)f, n);
        cr_assert_eq(nb, qk_scheme_encoded_size(s, 1, n, &o), "%s", qk_wire_fmt_name(f));
        uint8_t *a = malloc(nb), *b = malloc(nb);
        float *y = malloc((size_t)n * sizeof *y), *z = malloc((size_t)n * sizeof *z);
        float *q = malloc((size_t)n_tok * n * sizeof *q);
        memcpy(q, x, (size_t)n_tok * n * sizeof *q);
        cr_assert_eq(qk_wire_qdq((qk_wire_fmt)f, q, n_tok, n, &err), 0, "%s", err.msg);
        for (int t = 0; t < n_tok; t++) {
            const float *row = x + (size_t)t * n;
            cr_assert_eq(qk_wire_encode((qk_wire_fmt)f, row, n, a, &err), 0, "%s", err.msg);
            cr_assert_eq(qk_scheme_encode(s, row, 1, n, &o, b, &err), 0, "%s", err.msg);
            cr_assert_eq(memcmp(a, b, nb), 0, "%s row %d: bytes differ", qk_wire_fmt_name(f), t);
            cr_assert_eq(qk_wire_decode((qk_wire_fmt)f, a, n, y, &err), 0);
            cr_assert_eq(qk_scheme_qdq(s, row, 1, n, &o, z, &err), 0);
            cr_assert_eq(memcmp(y, z, (size_t)n * sizeof *y), 0, "%s row %d", qk_wire_fmt_name(f), t);
            cr_assert_eq(memcmp(q + (size_t)t * n, z, (size_t)n * sizeof *z), 0, "%s qdq row %d",
                         qk_wire_fmt_name(f), t);
        }
        free(a), free(b), free(y), free(z), free(q);
    }
    free(x);
}

/* int8-token, bf16, fp16, MX and NVFP4 from the element codecs directly. */
Test(wire, formats_from_the_element_codecs)
{
    const int n = 64, n_tok = 5;
    float *x = test_rows(n_tok, n, 11);
    float *q = malloc((size_t)n_tok * n * sizeof *q);
    qk_err err = {0};
    for (int f = QK_WIRE_FP32; f < QK_WIRE_FMT_COUNT; f++) {
        if (f != QK_WIRE_FP32 && f != QK_WIRE_BF16 && f != QK_WIRE_FP16 &&
            f != QK_WIRE_INT8_TOKEN && f != QK_WIRE_MXFP4 && f != QK_WIRE_MXFP8 &&
            f != QK_WIRE_NVFP4)
            continue;
        memcpy(q, x, (size_t)n_tok * n * sizeof *q);
        cr_assert_eq(qk_wire_qdq((qk_wire_fmt)f, q, n_tok, n, &err), 0, "%s", err.msg);
        for (int t = 0; t < n_tok; t++) {
            const float *r = x + (size_t)t * n;
            float want[64], amax = 0.0f;
            for (int i = 0; i < n; i++)
                amax = fmaxf(amax, fabsf(r[i]));
            if (f == QK_WIRE_FP32) {
                memcpy(want, r, sizeof want);
            } else if (f == QK_WIRE_BF16 || f == QK_WIRE_FP16) {
                for (int i = 0; i < n; i++)
                    want[i] = f == QK_WIRE_BF16 ? qk_bf16_to_f32(qk_f32_to_bf16(r[i]))
                                                : qk_f16_to_f32(qk_f32_to_f16(r[i]));
            } else if (f == QK_WIRE_INT8_TOKEN) { /* s = max(amax/127.5, 2^-23), RNE, clamp */
                const float s = fmaxf(amax / 127.5f, FLT_EPSILON);
                for (int i = 0; i < n; i++) {
                    float c = rintf(r[i] / s) + 0.0f; /* an integer code has no -0 */
                    c = c > 127.0f ? 127.0f : c < -128.0f ? -128.0f : c;
                    want[i] = c * s;
                }
            } else if (f == QK_WIRE_NVFP4) { /* modelopt: g = amax/2688 per token */
                const float g = qk_nvfp4_global_scale(amax, false);
                for (int b = 0; b < n; b += 16) {
                    float bm = 0.0f;
                    for (int i = 0; i < 16; i++)
                        bm = fmaxf(bm, fabsf(r[b + i]));
                    const float d = qk_nvfp4_dequant_scale(qk_nvfp4_block_scale(bm, g, false), g, false);
                    for (int i = 0; i < 16; i++)
                        want[b + i] = qk_elem_decode(QK_ELEM_FP4_E2M1,
                                                     qk_elem_encode(QK_ELEM_FP4_E2M1, r[b + i] / d,
                                                                    QK_ENC_SAT)) * d;
                }
            } else {
                const qk_elem e = f == QK_WIRE_MXFP4 ? QK_ELEM_FP4_E2M1 : QK_ELEM_FP8_E4M3;
                for (int b = 0; b < n; b += 32) {
                    uint8_t sc, codes[32];
                    qk_mx_encode_block(e, r + b, 32, &sc, codes);
                    qk_mx_decode_block(e, sc, codes, 32, want + b);
                }
            }
            cr_assert_eq(memcmp(q + (size_t)t * n, want, sizeof want), 0, "%s row %d",
                         qk_wire_fmt_name(f), t);
        }
    }
    free(x), free(q);
}

Test(wire, bytes_names_and_bad_shapes)
{
    qk_err err = {0};
    cr_assert_eq(qk_wire_token_bytes(QK_WIRE_BF16, 64), 128);
    cr_assert_eq(qk_wire_token_bytes(QK_WIRE_INT8_TOKEN, 64), 64 + 4);     /* codes + F32 scale */
    cr_assert_eq(qk_wire_token_bytes(QK_WIRE_INT4_GROUP32, 64), 32 + 2 * 4);
    cr_assert_eq(qk_wire_token_bytes(QK_WIRE_MXFP4, 64), 32 + 2);          /* E8M0 per 32 */
    cr_assert_eq(qk_wire_token_bytes(QK_WIRE_MXFP6, 64), 48 + 2);
    cr_assert_eq(qk_wire_token_bytes(QK_WIRE_NVFP4, 64), 32 + 4 + 4);      /* E4M3 per 16, F32 global */
    cr_assert_eq(qk_wire_token_bytes(QK_WIRE_MXFP4, 48), 0);
    float x[48] = {0};
    cr_assert_eq(qk_wire_qdq(QK_WIRE_MXFP4, x, 1, 48, &err), QK_EINPUT);
    for (int f = 0; f < QK_WIRE_FMT_COUNT; f++) {
        qk_wire_fmt g;
        cr_assert_eq(qk_wire_fmt_parse(qk_wire_fmt_name(f), &g, &err), 0);
        cr_assert_eq((int)g, f);
    }
    qk_wire_fmt g;
    cr_assert_eq(qk_wire_fmt_parse("int3", &g, &err), QK_EINPUT);
    /* bf16 on bf16-representable values is the identity */
    uint64_t seed = 3;
    float r[64], q[64];
    for (int i = 0; i < 64; i++)
        r[i] = qk_bf16_to_f32(qk_f32_to_bf16(tu_gauss(&seed) * 100.0f));
    memcpy(q, r, sizeof q);
    cr_assert_eq(qk_wire_qdq(QK_WIRE_BF16, q, 1, 64, &err), 0);
    cr_assert_eq(memcmp(q, r, sizeof q), 0);
}

Test(wire, boundaries)
{
    qk_err err = {0};
    qk_wire w;
    qk_wire_spec s = {.fmt = QK_WIRE_BF16, .stages = 2};
    cr_assert_eq(qk_wire_init(&w, &s, 5, 64, &err), 0, "%s", err.msg);
    cr_assert_eq(w.n_boundaries, 1);
    cr_assert(w.after[1]); /* floor(5/2) = 2 layers in the first stage */
    qk_wire_free(&w);
    s.stages = 5;
    cr_assert_eq(qk_wire_init(&w, &s, 5, 64, &err), 0);
    cr_assert_eq(w.n_boundaries, 4);
    cr_assert(!w.after[4]);
    qk_wire_free(&w);
    s = (qk_wire_spec){.fmt = QK_WIRE_BF16, .every = 2};
    cr_assert_eq(qk_wire_init(&w, &s, 5, 64, &err), 0);
    cr_assert(w.after[1] && w.after[3] && w.n_boundaries == 2);
    qk_wire_free(&w);
    s = (qk_wire_spec){.fmt = QK_WIRE_BF16};
    cr_assert_eq(qk_wire_parse_at("1,3", &s, &err), 0);
    cr_assert_eq(qk_wire_init(&w, &s, 5, 64, &err), 0);
    cr_assert(w.after[0] && w.after[2] && w.n_boundaries == 2);
    qk_wire_free(&w);
    cr_assert_eq(qk_wire_parse_at("3,1", &s, &err), QK_EINPUT);
    cr_assert_eq(qk_wire_parse_at("1,,2", &s, &err), QK_EINPUT);
    cr_assert_eq(qk_wire_parse_at("5", &s, &err), 0);
    cr_assert_eq(qk_wire_init(&w, &s, 5, 64, &err), QK_EINPUT); /* after the last layer */
    s = (qk_wire_spec){.fmt = QK_WIRE_BF16, .every = 5};
    cr_assert_eq(qk_wire_init(&w, &s, 5, 64, &err), QK_EINPUT); /* none inside */
    s = (qk_wire_spec){.fmt = QK_WIRE_BF16, .every = 1, .stages = 2};
    cr_assert_eq(qk_wire_init(&w, &s, 5, 64, &err), QK_EINPUT);
    s = (qk_wire_spec){.fmt = QK_WIRE_MXFP4, .every = 1};
    cr_assert_eq(qk_wire_init(&w, &s, 5, 48, &err), QK_EINPUT);
}

/* ---- engine ------------------------------------------------------------------ */

typedef struct {
    qk_gguf *g;
    qk_model m;
} loaded;

static void load(loaded *l)
{
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&l->g, MODEL, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_model_load(&l->m, l->g, &err), 0, "%s", err.msg);
}

static void unload(loaded *l)
{
    qk_model_free(&l->m);
    qk_gguf_close(l->g);
}

static int32_t *some_tokens(int n, int nv)
{
    int32_t *t = malloc((size_t)n * sizeof *t);
    uint64_t s = 99;
    for (int i = 0; i < n; i++)
        t[i] = i == 0 ? 1 : (int32_t)(tu_rand(&s) % (uint64_t)nv);
    return t;
}

/* All logits of tokens[0..n) evaluated in calls of `step` tokens. */
static float *run(const qk_model *m, const int32_t *tok, int n, int step, int threads,
                  qk_ctx_params p)
{
    qk_err err = {0};
    qk_ctx *c;
    p.n_ctx = n;
    p.nthreads = threads;
    if (!p.n_batch)
        p.n_batch = step;
    cr_assert_eq(qk_ctx_new(&c, m, &p, &err), 0, "%s", err.msg);
    const int nv = m->hp.n_vocab;
    float *out = malloc((size_t)n * nv * sizeof *out);
    for (int i = 0; i < n; i += step) {
        int k = n - i < step ? n - i : step;
        cr_assert_eq(qk_forward(c, tok + i, k, out + (size_t)i * nv, true, &err), 0, "%s", err.msg);
    }
    qk_ctx_free(c);
    return out;
}

/* A hook that rounds the residual stream to bf16 after every layer (so the
 * hidden state at each boundary is bf16-exact), then calls the wire. */
typedef struct {
    qk_wire *wire;
} bf16_model;

static int bf16_hook(void *user, int layer, float *x, int n_tok, int n_embd, qk_err *err)
{
    for (size_t i = 0; i < (size_t)n_tok * n_embd; i++)
        x[i] = qk_bf16_to_f32(qk_f32_to_bf16(x[i]));
    bf16_model *b = user;
    return b->wire ? qk_wire_layer_hook(b->wire, layer, x, n_tok, n_embd, err) : 0;
}

Test(engine, wire_fp32_and_kv_f32_are_exact)
{
    loaded l;
    load(&l);
    const int n = 48, nv = l.m.hp.n_vocab;
    int32_t *tok = some_tokens(n, nv);
    qk_err err = {0};
    float *plain = run(&l.m, tok, n, n, 1, (qk_ctx_params){0});
    qk_wire w;
    qk_wire_spec s = {.fmt = QK_WIRE_FP32, .every = 1};
    cr_assert_eq(qk_wire_init(&w, &s, l.m.hp.n_layer, l.m.hp.n_embd, &err), 0);
    float *wired = run(&l.m, tok, n, n, 1,
                       (qk_ctx_params){.layer_hook = qk_wire_layer_hook, .hook_user = &w});
    cr_assert_eq(memcmp(plain, wired, (size_t)n * nv * sizeof *plain), 0);
    cr_assert_eq(w.st.tokens, (uint64_t)n * 4);
    qk_kvq f32 = {.type = QK_KVQ_F32};
    float *kv = run(&l.m, tok, n, n, 1, (qk_ctx_params){.kvq = &f32});
    cr_assert_eq(memcmp(plain, kv, (size_t)n * nv * sizeof *plain), 0);
    /* a lossy wire does change them */
    qk_wire w4;
    s.fmt = QK_WIRE_INT4_TOKEN;
    cr_assert_eq(qk_wire_init(&w4, &s, l.m.hp.n_layer, l.m.hp.n_embd, &err), 0);
    float *lossy = run(&l.m, tok, n, n, 1,
                       (qk_ctx_params){.layer_hook = qk_wire_layer_hook, .hook_user = &w4});
    cr_assert_neq(memcmp(plain, lossy, (size_t)n * nv * sizeof *plain), 0);
    qk_wire_free(&w), qk_wire_free(&w4);
    free(plain), free(wired), free(kv), free(lossy), free(tok);
    unload(&l);
}

Test(engine, wire_bf16_on_a_bf16_exact_stream_changes_nothing)
{
    loaded l;
    load(&l);
    const int n = 40, nv = l.m.hp.n_vocab;
    int32_t *tok = some_tokens(n, nv);
    qk_err err = {0};
    bf16_model alone = {NULL};
    float *a = run(&l.m, tok, n, n, 1, (qk_ctx_params){.layer_hook = bf16_hook, .hook_user = &alone});
    qk_wire w;
    qk_wire_spec s = {.fmt = QK_WIRE_BF16, .every = 1};
    cr_assert_eq(qk_wire_init(&w, &s, l.m.hp.n_layer, l.m.hp.n_embd, &err), 0);
    bf16_model wired = {&w};
    float *b = run(&l.m, tok, n, n, 1, (qk_ctx_params){.layer_hook = bf16_hook, .hook_user = &wired});
    cr_assert_eq(memcmp(a, b, (size_t)n * nv * sizeof *a), 0);
    cr_assert_eq(w.st.tokens, (uint64_t)n * (l.m.hp.n_layer - 1));
    qk_wire_free(&w);
    free(a), free(b), free(tok);
    unload(&l);
}

/* Logits for one configuration under several threads and batch splits. */
static void check_invariant(const qk_model *m, const qk_wire_spec *ws, const qk_kvq *kvq)
{
    const int n = 70, nv = m->hp.n_vocab;
    int32_t *tok = some_tokens(n, nv);
    qk_err err = {0};
    static const int cases[][2] = {{70, 1}, {70, 3}, {7, 1}, {33, 2}, {1, 1}};
    float *ref = NULL;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        qk_wire w;
        qk_ctx_params p = {.kvq = kvq};
        if (ws) {
            cr_assert_eq(qk_wire_init(&w, ws, m->hp.n_layer, m->hp.n_embd, &err), 0, "%s", err.msg);
            p.layer_hook = qk_wire_layer_hook, p.hook_user = &w;
        }
        float *out = run(m, tok, n, cases[k][0], cases[k][1], p);
        if (ws)
            qk_wire_free(&w);
        if (!ref) {
            ref = out;
            continue;
        }
        cr_assert_eq(memcmp(ref, out, (size_t)n * nv * sizeof *out), 0,
                     "step %d threads %d differ", cases[k][0], cases[k][1]);
        free(out);
    }
    free(ref), free(tok);
}

Test(engine, wire_and_kv_codecs_are_thread_and_batch_invariant)
{
    loaded l;
    load(&l);
    qk_wire_spec nv = {.fmt = QK_WIRE_NVFP4, .stages = 3, .lossless = true};
    qk_kvq kivi = {.type = QK_KVQ_INT4, .key_per_channel = true, .key_group = 16};
    check_invariant(&l.m, &nv, &kivi);
    qk_wire_spec i4 = {.fmt = QK_WIRE_INT4_GROUP32, .every = 1};
    qk_kvq fp8 = {.type = QK_KVQ_FP8_E4M3, .per_head = true};
    check_invariant(&l.m, &i4, &fp8);
    qk_kvq nvkv = {.type = QK_KVQ_NVFP4};
    check_invariant(&l.m, NULL, &nvkv);
    unload(&l);
}

Test(engine, kv_codec_needs_f32_cache_and_fitting_heads)
{
    loaded l;
    load(&l);
    qk_err err = {0};
    qk_ctx *c;
    qk_kvq q = {.type = QK_KVQ_INT8};
    qk_ctx_params p = {.n_ctx = 16, .kv_type = QK_F16, .kvq = &q};
    cr_assert_eq(qk_ctx_new(&c, &l.m, &p, &err), QK_EINPUT);
    q = (qk_kvq){.type = QK_KVQ_BF16, .key_per_channel = true};
    p.kv_type = QK_F32;
    cr_assert_eq(qk_ctx_new(&c, &l.m, &p, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "per-channel"));
    unload(&l);
}

Test(engine, kld_runner_is_exactly_zero_for_the_controls)
{
    loaded l;
    load(&l);
    const int n = 128;
    int32_t *tok = some_tokens(n, l.m.hp.n_vocab);
    qk_err err = {0};
    qk_wire_spec fp32 = {.fmt = QK_WIRE_FP32, .every = 1, .lossless = true};
    qk_wire_spec i4 = {.fmt = QK_WIRE_INT4_TOKEN, .every = 1};
    qk_kvq f32 = {.type = QK_KVQ_F32}, f16 = {.type = QK_KVQ_F16};
    qk_study_cfg cfg[4] = {{.wire = &fp32}, {.kvq = &f32}, {.wire = &i4}, {.kvq = &f16}};
    qk_study_res r[4];
    cr_assert_eq(qk_study_run(&l.m, tok, n, 64, 1, 2, cfg, 4, r, &err), 0, "%s", err.msg);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(r[k].n, 2 * 31);
        cr_assert_eq(r[k].kld_mean, 0.0);
        cr_assert_eq(r[k].kld_max, 0.0);
        cr_assert_eq(r[k].same_top, 1.0);
        cr_assert_eq(r[k].ppl, r[k].ppl_base);
    }
    cr_assert_gt(r[2].kld_mean, r[3].kld_mean);
    cr_assert_gt(r[3].kld_mean, 0.0);
    cr_assert_eq(r[0].n_boundaries, 4);
    cr_assert_eq(r[0].wire.wire_bytes, r[0].wire.elements * 4);
    cr_assert_gt(qk_wire_lossless_ratio(&r[0].wire, 1, true), 1.0);
    /* bytes per cached token: f32 and f16 over 5 layers of 2 x 32 */
    cr_assert_eq(r[1].kv_bytes_token, 5 * 64 * 4.0);
    cr_assert_eq(r[3].kv_bytes_token, 5 * 64 * 2.0);
    free(tok);
    unload(&l);
}

/* ---- KV codecs ------------------------------------------------------------------ */

static int distinct(const float *v, int n, int stride)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = v[(size_t)j * stride] == v[(size_t)i * stride];
        k += !seen;
    }
    return k;
}

Test(kvquant, per_head_and_per_channel_cells)
{
    qk_err err = {0};
    const int n_tok = 32, heads = 4, hd = 16, dim = heads * hd;
    float *x = test_rows(n_tok, dim, 5), *y = malloc((size_t)n_tok * dim * sizeof *y);
    static const qk_kvq_type types[] = {QK_KVQ_INT8, QK_KVQ_INT4};
    for (int k = 0; k < 2; k++) {
        const int levels = types[k] == QK_KVQ_INT8 ? 256 : 16;
        qk_kvq q = {.type = types[k]};
        memcpy(y, x, (size_t)n_tok * dim * sizeof *y);
        cr_assert_eq(qk_kvq_rows(&q, y, n_tok, heads, hd, &err), 0, "%s", err.msg);
        for (int c = 0; c < n_tok * heads; c++) { /* each token-head: <= levels values, error <= step/2 */
            const float *a = x + (size_t)c * hd, *b = y + (size_t)c * hd;
            float lo = 0, hi = 0, e = 0;
            for (int i = 0; i < hd; i++)
                lo = fminf(lo, a[i]), hi = fmaxf(hi, a[i]), e = fmaxf(e, fabsf(a[i] - b[i]));
            cr_assert_leq(distinct(b, hd, 1), levels);
            const float step = (hi - lo) / (float)(levels - 1);
            /* half a step inside the grid; the zero point's rounding moves
             * the grid by up to half a step, so an end value clamps to
             * within one step (the scale is at least 2^-23: a row of 1e-30s
             * rounds to 0) */
            cr_assert_leq(e, fmaxf(step * 1.01f, FLT_EPSILON), "cell %d: error %g step %g", c, e,
                          step);
        }
        q.key_per_channel = true;
        memcpy(y, x, (size_t)n_tok * dim * sizeof *y);
        cr_assert_eq(qk_kvq_key_group(&q, y, dim, dim, &err), 0, "%s", err.msg);
        for (int d = 0; d < dim; d++)
            cr_assert_leq(distinct(y + d, n_tok, dim), levels, "channel %d", d);
    }
    /* fp8 per tensor is a plain saturating cast */
    qk_kvq f8 = {.type = QK_KVQ_FP8_E4M3};
    memcpy(y, x, (size_t)n_tok * dim * sizeof *y);
    cr_assert_eq(qk_kvq_rows(&f8, y, n_tok, heads, hd, &err), 0);
    for (int i = 0; i < n_tok * dim; i++)
        cr_assert_eq(y[i], qk_fp8_e4m3_to_f32(qk_f32_to_fp8_e4m3(x[i])));
    free(x), free(y);
}

Test(kvquant, parse_and_bytes)
{
    qk_err err = {0};
    qk_kvq q = {0};
    cr_assert_eq(qk_kvq_parse("fp8-e5m2:head", &q, &err), 0);
    cr_assert(q.type == QK_KVQ_FP8_E5M2 && q.per_head);
    cr_assert_eq(qk_kvq_parse("int4:head", &q, &err), QK_EINPUT);
    cr_assert_eq(qk_kvq_parse("q4_0", &q, &err), QK_EINPUT);
    cr_assert_eq(qk_kvq_parse("fp8-e4m3:row", &q, &err), QK_EINPUT);
    double kb, vb;
    const int h = 8, d = 128; /* a typical model's KV heads */
    q = (qk_kvq){.type = QK_KVQ_BF16};
    qk_kvq_token_bytes(&q, h, d, d, &kb, &vb);
    cr_assert_eq(kb, 2.0 * h * d);
    q = (qk_kvq){.type = QK_KVQ_FP8_E4M3};
    qk_kvq_token_bytes(&q, h, d, d, &kb, &vb);
    cr_assert_eq(kb + vb, 2.0 * h * d); /* half of bf16 */
    q.per_head = true;
    qk_kvq_token_bytes(&q, h, d, d, &kb, &vb);
    cr_assert_eq(kb, h * (d + 2.0)); /* F16 scale per head */
    q = (qk_kvq){.type = QK_KVQ_INT4};
    qk_kvq_token_bytes(&q, h, d, d, &kb, &vb);
    cr_assert_eq(vb, h * (d / 2 + 2.0 + 1.0)); /* codes, F16 scale, zero point */
    q.key_per_channel = true;
    qk_kvq_token_bytes(&q, h, d, d, &kb, &vb);
    cr_assert_eq(kb, (h * d * (QK_KVQ_KEY_GROUP / 2 + 3.0)) / QK_KVQ_KEY_GROUP);
    q = (qk_kvq){.type = QK_KVQ_NVFP4};
    qk_kvq_token_bytes(&q, h, d, d, &kb, &vb);
    cr_assert_eq(kb, h * d / 2 + h * d / 16 + 4.0);
    char name[32];
    q = (qk_kvq){.type = QK_KVQ_FP8_E4M3, .per_head = true, .key_per_channel = true};
    qk_kvq_name(&q, name, sizeof name);
    cr_assert_str_eq(name, "fp8-e4m3:head+kivi");
}

/* --kv-rotate: the codec conjugated by the normalized Hadamard matrix of the
 * head (kernels/hadamard.h): the plain codec's output on H x / sqrt(d),
 * rotated back; the identity codec stays the identity (H / sqrt(d) is its
 * own inverse); "+rot" in the name; head sizes must be powers of two.
 * (Whether it helps is a property of the model: qk-kld's numbers.) */
Test(kvquant, rotate_is_the_codec_conjugated)
{
    enum { hd = 32, heads = 2, n_tok = 8, dim = hd * heads };
    float x[n_tok * dim], y[n_tok * dim], z[n_tok * dim];
    unsigned s = 3;
    for (int i = 0; i < n_tok * dim; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.2f;
        if (i % hd == 5)
            x[i] = 4.0f; /* an outlier channel per head */
    }
    qk_err err = {0};
    qk_kvq q = {.type = QK_KVQ_INT4}, r = {.type = QK_KVQ_INT4, .rotate = true};
    cr_assert_eq(qk_kvq_check(&r, heads, hd, hd, &err), 0);
    memcpy(y, x, sizeof x), memcpy(z, x, sizeof x);
    cr_assert_eq(qk_kvq_rows(&q, y, n_tok, heads, hd, &err), 0);
    cr_assert_eq(qk_kvq_rows(&r, z, n_tok, heads, hd, &err), 0);
    cr_assert(memcmp(y, z, sizeof y) != 0);
    /* the definition: rotate, the plain codec, rotate back */
    float w[n_tok * dim];
    memcpy(w, x, sizeof x);
    qk_hadamard_rows_f64(w, n_tok, dim, dim, hd);
    cr_assert_eq(qk_kvq_rows(&q, w, n_tok, heads, hd, &err), 0);
    qk_hadamard_rows_f64(w, n_tok, dim, dim, hd);
    cr_assert(memcmp(w, z, sizeof w) == 0);
    qk_kvq f = {.type = QK_KVQ_F32, .rotate = true};
    memcpy(y, x, sizeof x);
    cr_assert_eq(qk_kvq_rows(&f, y, n_tok, heads, hd, &err), 0);
    cr_assert(memcmp(y, x, sizeof x) == 0);
    char name[32];
    r.key_per_channel = true;
    qk_kvq_name(&r, name, sizeof name);
    cr_assert_str_eq(name, "int4+kivi+rot");
    qk_kvq bad = {.type = QK_KVQ_INT4, .rotate = true};
    cr_assert_eq(qk_kvq_check(&bad, 2, 24, 24, &err), QK_EINPUT);
}

/* ---- scorecard --------------------------------------------------------------- */

static qk_ecard_fmt *formats(int *n, const char *only)
{
    qk_err err = {0};
    qk_ecard_fmt *f;
    cr_assert_eq(qk_ecard_default_formats(&f, n, &err), 0, "%s", err.msg);
    if (only)
        cr_assert_eq(qk_ecard_filter(f, n, only, &err), 0, "%s", err.msg);
    return f;
}

Test(scorecard, cells_are_direct_round_trips)
{
    qk_err err = {0};
    int n;
    qk_ecard_fmt *f = formats(&n, "int4,mxfp4,nvfp4,fp8_e4m3,q4_0,q8_0,gguf-nvfp4");
    cr_assert_eq(n, 5 + 1 + 1 + 5 + 3);
    const int64_t rows = 12, cols = 256;
    qk_syn_spec syn = {.rows = rows, .cols = cols, .seed = 4};
    cr_assert_eq(qk_syn_parse("laplace", &syn, &err), 0);
    float *x = malloc((size_t)(rows * cols) * sizeof *x), *y = malloc((size_t)(rows * cols) * sizeof *y);
    qk_syn_fill(&syn, x);
    qk_ecard card;
    cr_assert_eq(qk_ecard_init(&card, "t", f, n, &err), 0);
    cr_assert_eq(qk_ecard_add(&card, "m", x, rows, cols, 2, &err), 0, "%s", err.msg);
    qk_ecard_summarize(&card);
    for (int k = 0; k < n; k++) {
        const qk_ecard_cell *c = &card.cells[k];
        cr_assert(c->ok && !c->padded, "%s", f[k].label);
        double bytes;
        if (f[k].scheme) {
            cr_assert_eq(qk_scheme_qdq(f[k].scheme, x, rows, cols, &f[k].opts, y, &err), 0);
            bytes = (double)qk_scheme_encoded_size(f[k].scheme, rows, cols, &f[k].opts);
        } else {
            size_t rs = qk_row_size(f[k].gguf_type, cols);
            uint8_t *buf = malloc(rs * rows);
            cr_assert_eq(qk_quantize_rows(f[k].gguf_type, x, buf, rows, cols, NULL, 1, &err), 0);
            cr_assert_eq(qk_dequantize_rows(f[k].gguf_type, buf, y, rows, cols, 1, &err), 0);
            bytes = (double)(rs * rows);
            free(buf);
        }
        double sx = 0, se = 0;
        for (int64_t i = 0; i < rows * cols; i++)
            sx += (double)x[i] * x[i], se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        cr_assert_eq(c->snr_db, 10.0 * log10(sx / se), "%s", f[k].label);
        cr_assert_eq(c->nmse, se / sx);
        cr_assert_eq(c->bpe, bytes / (double)(rows * cols), "%s", f[k].label);
        /* one tensor: the mean is the cell (n * snr / n) */
        cr_assert_float_eq(card.sums[k].snr_db, c->snr_db, 1e-12 * fabs(c->snr_db));
    }
    /* gains within a family */
    cr_assert_eq(card.sums[0].gain_tensor, 0.0);
    cr_assert_eq(card.sums[2].gain_g128, 0.0);
    cr_assert_eq(card.sums[4].gain_tensor, card.sums[4].snr_db - card.sums[0].snr_db);
    cr_assert(isnan(card.sums[n - 1].gain_tensor)); /* GGUF types have no per-tensor row */
    qk_ecard_free(&card);
    free(f), free(x), free(y);
}

Test(scorecard, padding_is_a_partial_last_group)
{
    qk_err err = {0};
    int n;
    qk_ecard_fmt *f = formats(&n, "int4 g32");
    cr_assert_eq(n, 1);
    float x[3 * 40], y[40];
    uint64_t s = 8;
    for (int i = 0; i < 3 * 40; i++)
        x[i] = tu_gauss(&s);
    qk_ecard card;
    cr_assert_eq(qk_ecard_init(&card, "t", f, n, &err), 0);
    cr_assert_eq(qk_ecard_add(&card, "m", x, 3, 40, 1, &err), 0, "%s", err.msg);
    cr_assert(card.cells[0].padded);
    /* reference: each row as a group of 32 plus a last group of 8, one absmax scale each */
    const qk_scheme *i4 = qk_scheme_by_name("int4");
    qk_scheme_opts t = {.gran = QK_GRAN_TENSOR};
    double sx = 0, se = 0;
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(qk_scheme_qdq(i4, x + r * 40, 1, 32, &t, y, &err), 0);
        cr_assert_eq(qk_scheme_qdq(i4, x + r * 40 + 32, 1, 8, &t, y + 32, &err), 0);
        for (int i = 0; i < 40; i++) {
            double d = (double)x[r * 40 + i] - y[i];
            sx += (double)x[r * 40 + i] * x[r * 40 + i], se += d * d;
        }
    }
    cr_assert_eq(card.cells[0].snr_db, 10.0 * log10(sx / se));
    /* bytes: 20 code bytes and 2 F32 scales per row */
    cr_assert_eq(card.cells[0].bpe, (3 * (20 + 8)) / 120.0);
    qk_ecard_free(&card);
    free(f);
}

static char *card_csv(const char *path, int threads)
{
    qk_err err = {0};
    int n;
    qk_ecard_fmt *f = formats(&n, "int8,fp4_e2m1,q4_0,q4_K");
    qk_ecard card;
    cr_assert_eq(qk_ecard_init(&card, path, f, n, &err), 0);
    cr_assert_eq(qk_ecard_add_checkpoint(&card, path, "blk.[01].*", threads, &err), 0, "%s", err.msg);
    qk_ecard_summarize(&card);
    char *buf;
    size_t len;
    FILE *m = open_memstream(&buf, &len);
    qk_ecard_write_csv(&card, m);
    qk_ecard_write_json(&card, m);
    qk_ecard_write_md(&card, m, true);
    fclose(m);
    cr_assert_eq(card.n_tensor, 14); /* 7 matrices in each of blocks 0 and 1 */
    qk_ecard_free(&card);
    free(f);
    return buf;
}

Test(scorecard, checkpoint_output_independent_of_threads)
{
    char *a = card_csv(MODEL, 1), *b = card_csv(MODEL, 3);
    cr_assert_str_eq(a, b);
    cr_assert(strstr(a, "tensor,blk.0.ffn_down.weight,64,172,int8,g32,int8 g32,"));
    free(a), free(b);
    qk_err err = {0};
    qk_ecard card;
    int n;
    qk_ecard_fmt *f = formats(&n, "int8");
    cr_assert_eq(qk_ecard_init(&card, "x", f, n, &err), 0);
    cr_assert_eq(qk_ecard_add_checkpoint(&card, MODEL, "nothing*", 1, &err), QK_EINPUT);
    cr_assert_eq(qk_ecard_filter(f, &n, "int5", &err), QK_EINPUT);
    qk_ecard_free(&card);
    free(f);
}

static void moments(const char *dist, double want_var, double tol)
{
    qk_err err = {0};
    qk_syn_spec s = {.rows = 256, .cols = 512, .seed = 12};
    cr_assert_eq(qk_syn_parse(dist, &s, &err), 0, "%s", err.msg);
    const size_t n = 256 * 512;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    qk_syn_fill(&s, x);
    qk_syn_fill(&s, y);
    cr_assert_eq(memcmp(x, y, n * sizeof *x), 0, "%s: same seed, same bytes", dist);
    s.seed = 13;
    qk_syn_fill(&s, y);
    cr_assert_neq(memcmp(x, y, n * sizeof *x), 0);
    double m = 0, v = 0;
    for (size_t i = 0; i < n; i++)
        m += x[i], v += (double)x[i] * x[i];
    m /= (double)n;
    v = v / (double)n - m * m;
    cr_assert_lt(fabs(m), 0.02 * sqrt(want_var), "%s mean %g", dist, m);
    cr_assert_lt(fabs(v / want_var - 1.0), tol, "%s variance %g, want %g", dist, v, want_var);
    free(x), free(y);
}

Test(scorecard, synthetic_distributions)
{
    moments("gaussian", 1.0, 0.02);
    moments("laplace", 1.0, 0.03);
    moments("student-t:8", 8.0 / 6.0, 0.05);   /* nu / (nu - 2) */
    moments("student-t:2.5", 5.0, 0.5);        /* heavy tail: a loose check */
    /* outlier-channels: about 1% of the columns scaled by 20, so the
     * variance is about 1 + 0.01 * 399 */
    moments("outlier-channels", 1.0 + 0.01 * 399.0, 0.5);
    qk_err err = {0};
    qk_syn_spec s = {0};
    cr_assert_eq(qk_syn_parse("student-t:0", &s, &err), QK_EINPUT);
    cr_assert_eq(qk_syn_parse("uniform", &s, &err), QK_EINPUT);
}
