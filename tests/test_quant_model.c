/* test_quant_model.c - qk-quant's model quantization against llama-quantize.
 *
 * - stories4M (goldens/models/stories4M) quantized with nine presets must be
 *   byte-identical to llama-quantize's files (goldens/quant/stories4M.sha256,
 *   sha256 of ../shared/reference/stories4M/stories4M-TYPE.gguf), and with a
 *   synthetic importance matrix in both formats to the files llama-quantize
 *   made from it (goldens/quant/stories4M-imatrix.sha256);
 * - with llama-imatrix's importance matrix for smol135m-seed1, two of that
 *   model's tensors encoded for each imatrix preset must give the bytes
 *   llama-quantize wrote (goldens/quant/smol-slice.*);
 * - the per-tensor types chosen for every preset on the synthetic smol135m
 *   and bench250m models must equal llama-quantize's choices
 *   (goldens/quant/types/, from ../shared/reference/synthetic): the model
 *   headers are rebuilt as sparse files, so no tensor data is needed;
 * - the importance-matrix readers, thread-count independence, --prune-layers,
 *   --keep-split, and the refusals.
 * Under AddressSanitizer the slowest encodings are skipped (they run in the
 * normal build of `make check`).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "lib/quant/imatrix.h"
#include "lib/quant/quant_model.h"
#include "kernels/quantize.h"
#include "lib/core/sha256.h"
#include "tests/testutil.h"
#include "kernels/types.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define STORIES "goldens/models/stories4M/stories4M-f32.gguf"
#define GQ "goldens/quant/"

/* ---- SHA-256 of outputs, for comparing with the stored hashes ---- */

static void file_sha(const char *path, char out[65])
{
    size_t n;
    uint8_t *p = tu_read(path, &n);
    qk_sha256_hex(p, n, out);
    free(p);
}

/* ---- helpers ------------------------------------------------------------------ */

static char tmpdir[64];

static void make_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/qk_quant_test.XXXXXX");
    cr_assert(mkdtemp(tmpdir));
}

static void rm_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

static qk_quant_opts opts_for(const char *preset, int threads)
{
    const qk_quant_preset *p = qk_quant_preset_find(preset);
    cr_assert(p, "preset %s", preset);
    return (qk_quant_opts){.ftype = p->ftype, .only_copy = !strcmp(p->name, "COPY"),
                           .output_tensor_type = -1, .token_embedding_type = -1, .nthreads = threads};
}

/* Quantize in -> out with o; returns the exit code, message in err. */
static int quantize(const char *in, const char *out, const qk_quant_opts *o, qk_err *err)
{
    qk_gguf *g;
    int rc = qk_gguf_open(&g, in, 0, err);
    if (rc)
        return rc;
    qk_quant_plan *p;
    rc = qk_quant_plan_make(&p, g, o, err);
    if (!rc) {
        rc = qk_quant_run(p, out, NULL, NULL, err);
        qk_quant_plan_free(p);
    }
    qk_gguf_close(g);
    return rc;
}

static bool in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, list[i]))
            return true;
    return false;
}

/* Encodings that take seconds under ASan: left to the normal build. */
static bool heavy(const char *preset)
{
    static const char *const l[] = {"IQ4_XS", "Q2_K", "Q3_K_M", "Q5_K_M", "IQ2_XXS", "IQ2_XS", "IQ2_S",
                                    "IQ3_XXS", "IQ1_S", "IQ1_M", "Q2_K_S"};
    return UNDER_ASAN && in_list(preset, l, sizeof l / sizeof l[0]);
}

/* The slowest IQ searches on stories4M (2-5 s each): only with QK_SLOW_TESTS=1
 * (tools/check-synthetic.sh covers these presets on larger models). */
static bool slow(const char *preset)
{
    static const char *const l[] = {"IQ2_XXS", "IQ2_XS", "IQ3_XXS"};
    const char *env = getenv("QK_SLOW_TESTS");
    return (!env || strcmp(env, "1") != 0) && in_list(preset, l, sizeof l / sizeof l[0]);
}

/* ---- byte equality with llama-quantize ------------------------------------------- */

Test(quant_model, stories4M_matches_llama_quantize, .timeout = 120)
{
    make_tmp();
    char *list = tu_read(GQ "stories4M.sha256", NULL);
    int checked = 0;
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        char want[65], file[128], preset[32];
        cr_assert_eq(sscanf(line, "%64s %127s", want, file), 2);
        cr_assert_eq(sscanf(file, "stories4M-%31[^.].gguf", preset), 1);
        if (heavy(preset))
            continue;
        qk_quant_opts o = opts_for(preset, 2);
        char out[256], got[65];
        snprintf(out, sizeof out, "%s/%s", tmpdir, file);
        qk_err err = {0};
        cr_assert_eq(quantize(STORIES, out, &o, &err), 0, "%s: %s", preset, err.msg);
        file_sha(out, got);
        cr_expect_str_eq(got, want, "%s differs from llama-quantize's file", preset);
        checked++;
    }
    cr_assert_geq(checked, UNDER_ASAN ? 4 : 9);
    free(list);
    rm_tmp();
}

/* stories4M with the synthetic importance matrix (both file formats): the
 * whole files llama-quantize wrote (goldens/quant/stories4M-imatrix.sha256),
 * quantize.imatrix.* metadata included. */
Test(quant_model, stories4M_imatrix_matches_llama_quantize, .timeout = 120)
{
    make_tmp();
    char *list = tu_read(GQ "stories4M-imatrix.sha256", NULL);
    int checked = 0;
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        char want[65], preset[32], imfile[64];
        cr_assert_eq(sscanf(line, "%64s %31s %63s", want, preset, imfile), 3);
        if (heavy(preset) || slow(preset))
            continue;
        char impath[128];
        snprintf(impath, sizeof impath, GQ "%s", imfile);
        qk_imatrix *im;
        qk_err err = {0};
        cr_assert_eq(qk_imatrix_load(&im, impath, &err), 0, "%s", err.msg);
        qk_quant_opts o = opts_for(preset, 2);
        o.imatrix = im;
        o.imatrix_file = imfile; /* llama-quantize stores the argument as given */
        char out[128], got[65];
        snprintf(out, sizeof out, "%s/%s.gguf", tmpdir, preset);
        cr_assert_eq(quantize(STORIES, out, &o, &err), 0, "%s: %s", preset, err.msg);
        file_sha(out, got);
        cr_expect_str_eq(got, want, "%s with %s differs from llama-quantize's file", preset, imfile);
        qk_imatrix_free(im);
        checked++;
    }
    cr_assert_geq(checked, 2);
    free(list);
    rm_tmp();
}

/* smol135m-seed1 with llama-imatrix's own matrix: two tensors cut from the
 * model (goldens/quant/smol-slice.gguf) encoded with the types and importance
 * data llama-quantize used for each imatrix preset must give its bytes
 * (per-tensor sha256 from ../shared/reference/synthetic, smol-slice.expect). */
Test(quant_model, smol_slice_imatrix_matches_llama_quantize, .timeout = 120)
{
    qk_gguf *g;
    qk_imatrix *im;
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&g, GQ "smol-slice.gguf", 0, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_imatrix_load(&im, GQ "smol-slice.imatrix.gguf", &err), 0, "%s", err.msg);
    cr_assert_eq(im->chunk_count, 6);
    cr_assert_str_eq(im->datasets[0], "corpus.en");
    char *list = tu_read(GQ "smol-slice.expect", NULL);
    char done[64][96];
    int n_done = 0, checked = 0;
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        char preset[32], name[64], want[65], got[65], key[96];
        int type;
        cr_assert_eq(sscanf(line, "%31s %63s %d %64s", preset, name, &type, want), 4);
        snprintf(key, sizeof key, "%s %d", name, type);
        bool seen = false;
        for (int i = 0; i < n_done; i++)
            seen |= !strcmp(done[i], key);
        /* the slowest searches (seconds each) run in tools/check-synthetic.sh */
        bool slow = type == QK_IQ1_M || type == QK_IQ1_S || type == QK_IQ2_XS || type == QK_IQ2_S ||
                    (UNDER_ASAN && (type == QK_IQ2_XXS || type == QK_IQ3_XXS));
        if (seen || slow)
            continue;
        snprintf(done[n_done++], sizeof done[0], "%s", key);
        const qk_gguf_tensor *t = qk_gguf_find_tensor(g, name);
        const qk_imatrix_entry *e = qk_imatrix_find(im, name);
        cr_assert(t && e && e->n == (uint64_t)t->ne[0]);
        size_t n = (size_t)(t->ne[0] * t->ne[1]), qn = qk_row_size(type, t->ne[0]) * (size_t)t->ne[1];
        float *x = malloc(n * sizeof *x);
        uint8_t *q = malloc(qn);
        qk_type_get(t->type)->to_float(t->data, x, (int64_t)n);
        cr_assert_eq(qk_quantize_rows(type, x, q, t->ne[1], t->ne[0], e->values, 2, &err), 0, "%s", err.msg);
        qk_sha256_hex(q, qn, got);
        cr_expect_str_eq(got, want, "%s as %s (%s) differs from llama-quantize", name,
                         qk_type_get(type)->name, preset);
        free(x);
        free(q);
        checked++;
    }
    cr_assert_geq(checked, UNDER_ASAN ? 8 : 10);
    free(list);
    qk_imatrix_free(im);
    qk_gguf_close(g);
}

Test(quant_model, output_independent_of_threads, .timeout = 60)
{
    make_tmp();
    char a[128], b[128], ha[65], hb[65];
    snprintf(a, sizeof a, "%s/t1.gguf", tmpdir);
    snprintf(b, sizeof b, "%s/t3.gguf", tmpdir);
    qk_err err = {0};
    qk_quant_opts o = opts_for("Q4_K_S", 1);
    o.measure = true;
    cr_assert_eq(quantize(STORIES, a, &o, &err), 0, "%s", err.msg);
    o.nthreads = 3;
    cr_assert_eq(quantize(STORIES, b, &o, &err), 0, "%s", err.msg);
    file_sha(a, ha);
    file_sha(b, hb);
    cr_assert_str_eq(ha, hb);
    rm_tmp();
}

/* ---- per-tensor types on the synthetic models (headers only) ---------------------- */

typedef struct { char name[64]; int64_t ne[2]; int nd; } tinfo;

static void put_u32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }
static void put_u64(FILE *f, uint64_t v) { fwrite(&v, 8, 1, f); }
static void put_s(FILE *f, const char *s)
{
    put_u64(f, strlen(s));
    fwrite(s, 1, strlen(s), f);
}

/* A GGUF whose header is the model's and whose (zero) data is a hole. */
static void write_sparse_model(const char *path, char **kv, int n_kv, const tinfo *t, int n_t)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fwrite("GGUF", 1, 4, f);
    put_u32(f, 3);
    put_u64(f, (uint64_t)n_t);
    put_u64(f, (uint64_t)n_kv);
    for (int i = 0; i < n_kv; i++) {
        char *key = kv[i], *val = strchr(kv[i], '\t');
        *val++ = 0;
        put_s(f, key);
        char *end;
        unsigned long u = strtoul(val, &end, 10);
        if (*end == 0 && end != val) {
            put_u32(f, QK_GGUF_U32);
            put_u32(f, (uint32_t)u);
        } else if (strchr(val, '.') && (strtod(val, &end), *end == 0)) {
            float x = (float)strtod(val, NULL);
            put_u32(f, QK_GGUF_F32);
            fwrite(&x, 4, 1, f);
        } else {
            put_u32(f, QK_GGUF_STRING);
            put_s(f, val);
        }
    }
    uint64_t off = 0;
    for (int i = 0; i < n_t; i++) {
        put_s(f, t[i].name);
        put_u32(f, (uint32_t)t[i].nd);
        for (int d = 0; d < t[i].nd; d++)
            put_u64(f, (uint64_t)t[i].ne[d]);
        int ty = t[i].nd == 1 ? QK_F32 : QK_F16;
        put_u32(f, (uint32_t)ty);
        put_u64(f, off);
        off += (uint64_t)t[i].ne[0] * (uint64_t)t[i].ne[1] * (ty == QK_F32 ? 4 : 2);
        off = (off + 31) / 32 * 32;
    }
    long pos = ftell(f);
    long data = (pos + 31) / 32 * 32;
    cr_assert_eq(ftruncate(fileno(f), (off_t)(data + (long)off)), 0);
    fclose(f);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const qk_imatrix_entry *)a)->name, ((const qk_imatrix_entry *)b)->name);
}

/* An importance matrix with the entries llama-imatrix writes for these
 * models: every blk.N.{attn_*,ffn_*}.weight, ne0 values each. */
static qk_imatrix *fake_imatrix(const tinfo *t, int n_t, float *ones)
{
    qk_imatrix *im = calloc(1, sizeof *im);
    im->e = calloc((size_t)n_t, sizeof *im->e);
    for (int i = 0; i < n_t; i++) {
        if (strncmp(t[i].name, "blk.", 4) || t[i].nd != 2)
            continue;
        im->e[im->n++] = (qk_imatrix_entry){.name = strdup(t[i].name), .n = (uint64_t)t[i].ne[0]};
    }
    for (size_t i = 0; i < im->n; i++) {
        im->e[i].values = malloc((size_t)im->e[i].n * sizeof(float));
        memcpy(im->e[i].values, ones, (size_t)im->e[i].n * sizeof(float));
    }
    qsort(im->e, im->n, sizeof *im->e, cmp_entry);
    return im;
}

static void check_types(const char *model)
{
    char path[128];
    snprintf(path, sizeof path, GQ "types/%s.tsv", model);
    char *text = tu_read(path, NULL);
    char *kv[64], *refused[8], *header = NULL;
    int n_kv = 0, n_refused = 0, n_t = 0;
    tinfo *t = calloc(1024, sizeof *t);
    int *types = calloc(1024 * 64, sizeof *types);
    char *presets[64];
    int n_p = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "kv\t", 3)) {
            kv[n_kv++] = line + 3;
        } else if (!strncmp(line, "#refused\t", 9)) {
            refused[n_refused++] = line + 9;
        } else if (!header) {
            header = line;
        } else {
            char *f = strtok_r(line, "\t", &line);
            snprintf(t[n_t].name, sizeof t[n_t].name, "%s", f);
            char *dims = strtok_r(NULL, "\t", &line);
            t[n_t].nd = sscanf(dims, "%" SCNd64 "x%" SCNd64, &t[n_t].ne[0], &t[n_t].ne[1]);
            if (t[n_t].nd == 1)
                t[n_t].ne[1] = 1;
            int k = 0;
            for (char *v = strtok_r(NULL, "\t", &line); v; v = strtok_r(NULL, "\t", &line))
                types[n_t * 64 + k++] = atoi(v);
            n_t++;
        }
    }
    cr_assert(header && n_t > 0);
    strtok_r(header, "\t", &header); /* name */
    strtok_r(NULL, "\t", &header);   /* dims */
    for (char *p = strtok_r(NULL, "\t", &header); p; p = strtok_r(NULL, "\t", &header))
        presets[n_p++] = p;

    make_tmp();
    char gpath[128];
    snprintf(gpath, sizeof gpath, "%s/model.gguf", tmpdir);
    write_sparse_model(gpath, kv, n_kv, t, n_t);
    qk_gguf *g;
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&g, gpath, 0, &err), 0, "%s", err.msg);
    float *ones = malloc(8192 * sizeof(float));
    for (int i = 0; i < 8192; i++)
        ones[i] = 1.0f;
    qk_imatrix *im = fake_imatrix(t, n_t, ones);
    for (int pi = 0; pi < n_p; pi++) {
        char name[32];
        snprintf(name, sizeof name, "%s", presets[pi]);
        char *dot = strchr(name, '.');
        if (dot)
            *dot = 0; /* "IQ2_XXS.imatrix" */
        qk_quant_opts o = opts_for(name, 1);
        o.imatrix = dot ? im : NULL;
        qk_quant_plan *p;
        cr_assert_eq(qk_quant_plan_make(&p, g, &o, &err), 0, "%s %s: %s", model, presets[pi], err.msg);
        cr_assert_eq(p->n, (size_t)n_t);
        int wrong = 0;
        for (int i = 0; i < n_t; i++) {
            cr_expect_str_eq(p->t[i].name, t[i].name, "%s: order", presets[pi]);
            if (p->t[i].type != types[i * 64 + pi] && wrong++ < 3)
                cr_expect_fail("%s %s: %s is %s, llama-quantize chose %s (%s)", model, presets[pi], t[i].name,
                               qk_type_get(p->t[i].type)->name, qk_type_get(types[i * 64 + pi])->name, p->t[i].why);
        }
        cr_expect_eq(wrong, 0, "%s %s: %d tensors typed differently", model, presets[pi], wrong);
        cr_expect_eq(p->file_type, (uint32_t)qk_quant_preset_find(name)->ftype);
        qk_quant_plan_free(p);
    }
    for (int i = 0; i < n_refused; i++) {
        char name[32];
        sscanf(refused[i], "%31s", name);
        qk_quant_opts o = opts_for(name, 1);
        qk_quant_plan *p = NULL;
        cr_expect_eq(qk_quant_plan_make(&p, g, &o, &err), 2, "%s %s must be refused", model, name);
        qk_quant_plan_free(p);
    }
    qk_imatrix_free(im);
    free(ones);
    qk_gguf_close(g);
    rm_tmp();
    free(t);
    free(types);
    free(text);
}

Test(quant_model, types_smol135m_every_preset) { check_types("smol135m-seed1"); }
Test(quant_model, types_bench250m_every_preset) { check_types("bench250m-seed7"); }

/* ---- importance matrices ---------------------------------------------------------- */

Test(imatrix, gguf_and_legacy_agree)
{
    qk_imatrix *a, *b;
    qk_err err = {0};
    cr_assert_eq(qk_imatrix_load(&a, GQ "stories4M.imatrix.gguf", &err), 0, "%s", err.msg);
    cr_assert_eq(qk_imatrix_load(&b, GQ "stories4M.imatrix.dat", &err), 0, "%s", err.msg);
    cr_assert(!a->legacy && b->legacy);
    cr_assert_eq(a->n, 29); /* 28 weights + one for a tensor the model lacks */
    cr_assert_eq(b->n, 28);
    cr_assert_eq(a->chunk_count, 3);
    cr_assert_eq(b->chunk_count, 3);
    cr_assert_eq(a->chunk_size, 256);
    cr_assert_eq(a->n_datasets, 1);
    cr_assert_str_eq(a->datasets[0], "synthetic.txt");
    cr_assert_str_eq(b->datasets[0], "synthetic.txt");
    for (size_t i = 0; i < b->n; i++) {
        const qk_imatrix_entry *x = qk_imatrix_find(a, b->e[i].name);
        cr_assert(x, "%s", b->e[i].name);
        cr_assert_eq(x->n, b->e[i].n);
        for (uint64_t k = 0; k < x->n; k++)
            cr_assert_float_eq(x->values[k], b->e[i].values[k], 1e-5f * fabsf(x->values[k]) + 1e-7f);
    }
    /* count 0: every column weighs 1 */
    const qk_imatrix_entry *z = qk_imatrix_find(a, "blk.2.attn_output.weight");
    cr_assert(z && z->values[0] == 1.0f && z->values[255] == 1.0f);
    const char *inc[] = {"ffn_"};
    qk_imatrix_filter(a, inc, 1, NULL, 0);
    cr_assert_eq(a->n, 12);
    const char *exc[] = {"blk.0."};
    qk_imatrix_filter(a, NULL, 0, exc, 1);
    cr_assert_eq(a->n, 9);
    qk_imatrix_free(a);
    qk_imatrix_free(b);
}

Test(imatrix, bad_files_refused)
{
    make_tmp();
    char p[128];
    qk_imatrix *m;
    qk_err err = {0};
    static const uint8_t junk[][12] = {{0}, {0xff, 0xff, 0xff, 0x7f}, {1, 0, 0, 0, 200, 0, 0, 0}};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        snprintf(p, sizeof p, "%s/bad%zu.dat", tmpdir, i);
        FILE *f = fopen(p, "wb");
        fwrite(junk[i], 1, sizeof junk[i], f);
        fclose(f);
        cr_expect_eq(qk_imatrix_load(&m, p, &err), 2, "junk %zu accepted", i);
    }
    /* a model is a GGUF but not an importance matrix */
    cr_expect_eq(qk_imatrix_load(&m, STORIES, &err), 2);
    cr_expect(strstr(err.msg, "imatrix"), "%s", err.msg);
    snprintf(p, sizeof p, "%s/missing.dat", tmpdir);
    cr_expect_eq(qk_imatrix_load(&m, p, &err), 3);
    rm_tmp();
}

/* ---- options and refusals ----------------------------------------------------------- */

Test(quant_model, presets_and_aliases)
{
    cr_assert_eq(qk_quant_preset_find("q4_k")->ftype, 15);
    cr_assert_eq(qk_quant_preset_find("Q4_K_M")->ftype, 15);
    cr_assert_str_eq(qk_quant_preset_find("0")->name, "F32");
    cr_assert_str_eq(qk_quant_preset_find("15")->name, "Q4_K");
    cr_assert_str_eq(qk_quant_preset_find("copy")->name, "COPY");
    cr_assert_null(qk_quant_preset_find("Q4_K_X"));
    cr_assert_null(qk_quant_preset_find("7b"));
    cr_assert_eq(qk_ftype_default_type(28), QK_IQ2_XS); /* IQ2_S starts from IQ2_XS */
    cr_assert_eq(qk_ftype_default_type(22), QK_IQ3_S);  /* IQ3_XS from IQ3_S */
    cr_assert_eq(qk_ftype_default_type(5), -1);
    qk_quant_kvo kv;
    qk_err err = {0};
    cr_assert_eq(qk_quant_parse_kvo("a.b=int:-7", &kv, &err), 0);
    cr_assert(kv.tag == QK_KVO_INT && kv.i == -7);
    cr_assert_eq(qk_quant_parse_kvo("a.b=bool:yes", &kv, &err), 2);
    cr_assert_eq(qk_quant_parse_kvo("a.b=blob:1", &kv, &err), 2);
    qk_quant_tt tt;
    cr_assert_eq(qk_quant_parse_tt("ATTN_V=q8_0", &tt, &err), 0);
    cr_assert_str_eq(tt.pattern, "attn_v");
    cr_assert_eq(tt.type, QK_Q8_0);
    free(tt.pattern);
    cr_assert_eq(qk_quant_parse_tt("attn_v=q9_9", &tt, &err), 2);
    cr_assert_eq(qk_quant_parse_tt("=q8_0", &tt, &err), 2);
    cr_assert_eq(qk_quant_parse_tt("(attn=q8_0", &tt, &err), 2);
}

static qk_quant_plan *plan_of(qk_gguf *g, const qk_quant_opts *o)
{
    qk_quant_plan *p;
    qk_err err = {0};
    cr_assert_eq(qk_quant_plan_make(&p, g, o, &err), 0, "%s", err.msg);
    return p;
}

static const qk_quant_item *item(const qk_quant_plan *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->t[i].name, name))
            return &p->t[i];
    cr_assert_fail("no tensor %s", name);
    return NULL;
}

Test(quant_model, overrides_prune_and_refusals)
{
    qk_gguf *g;
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&g, STORIES, 0, &err), 0);
    qk_quant_opts o = opts_for("Q4_K_M", 1);
    qk_quant_tt tt[2];
    cr_assert_eq(qk_quant_parse_tt("blk\\.[0-1]\\.ffn_(up|gate)=q8_0", &tt[0], &err), 0);
    cr_assert_eq(qk_quant_parse_tt("attn_q=iq4_nl", &tt[1], &err), 0);
    o.tt = tt;
    o.n_tt = 2;
    o.output_tensor_type = QK_F16;
    o.leave_output = false;
    qk_quant_plan *p = plan_of(g, &o);
    cr_assert_eq(item(p, "blk.1.ffn_up.weight")->type, QK_Q8_0);
    cr_assert_eq(item(p, "blk.2.ffn_up.weight")->type, QK_Q4_K);
    cr_assert_eq(item(p, "blk.3.attn_q.weight")->type, QK_IQ4_NL);
    cr_assert_eq(item(p, "output.weight")->type, QK_F16);
    cr_assert_eq(item(p, "output_norm.weight")->type, QK_F32);
    qk_quant_plan_free(p);
    free(tt[0].pattern);
    free(tt[1].pattern);

    /* --pure: one type; --leave-output-tensor keeps output.weight */
    o = opts_for("Q4_K_M", 1);
    o.pure = true;
    o.leave_output = true;
    p = plan_of(g, &o);
    cr_assert_eq(item(p, "blk.0.attn_v.weight")->type, QK_Q4_K);
    cr_assert_eq(item(p, "blk.0.ffn_down.weight")->type, QK_Q4_K);
    cr_assert_eq(item(p, "output.weight")->type, QK_F32);
    qk_quant_plan_free(p);

    /* --prune-layers 1,2: blocks 0 3 become 0 1 */
    o = opts_for("Q8_0", 1);
    int prune[] = {1, 2};
    o.prune = prune;
    o.n_prune = 2;
    p = plan_of(g, &o);
    cr_assert_eq(p->n, 39 - 2 * 9);
    item(p, "blk.1.attn_q.weight");
    cr_assert_eq(item(p, "blk.1.attn_q.weight")->src, qk_gguf_find_tensor(g, "blk.3.attn_q.weight"));
    qk_quant_plan_free(p);

    /* IQ2_XXS needs an importance matrix; so does Q2_K_S */
    qk_quant_plan *none = NULL;
    o = opts_for("IQ2_XXS", 1);
    cr_assert_eq(qk_quant_plan_make(&none, g, &o, &err), 2);
    cr_assert(strstr(err.msg, "importance matrix"), "%s", err.msg);
    o.dry_run = true; /* a dry run only notes it */
    p = plan_of(g, &o);
    cr_assert(p->would_need_imatrix);
    qk_quant_plan_free(p);

    /* an importance matrix of the wrong size, or for another model */
    qk_imatrix *im;
    cr_assert_eq(qk_imatrix_load(&im, GQ "stories4M.imatrix.gguf", &err), 0);
    im->e[0].n -= 1;
    o = opts_for("Q4_K_M", 1);
    o.imatrix = im;
    cr_assert_eq(qk_quant_plan_make(&none, g, &o, &err), 2);
    cr_assert(strstr(err.msg, "another model"), "%s", err.msg);
    for (size_t i = 0; i < im->n; i++) /* names of another model (still sorted) */
        snprintf(im->e[i].name, strlen(im->e[i].name) + 1, "zz.%03zu", i);
    cr_assert_eq(qk_quant_plan_make(&none, g, &o, &err), 2);
    cr_assert(strstr(err.msg, "none of its"), "%s", err.msg);
    const char *exc[] = {"zz."};
    qk_imatrix_filter(im, NULL, 0, exc, 1);
    cr_assert_eq(im->n, 0); /* everything filtered: as if none was given */
    p = plan_of(g, &o);
    qk_quant_plan_free(p);
    qk_imatrix_free(im);
    qk_gguf_close(g);
}

Test(quant_model, requantize_needs_permission, .timeout = 60)
{
    make_tmp();
    char q8[128], out[128];
    snprintf(q8, sizeof q8, "%s/q8.gguf", tmpdir);
    snprintf(out, sizeof out, "%s/q4.gguf", tmpdir);
    qk_err err = {0};
    qk_quant_opts o = opts_for("Q8_0", 2);
    cr_assert_eq(quantize(STORIES, q8, &o, &err), 0, "%s", err.msg);
    o = opts_for("Q4_0", 2);
    cr_assert_eq(quantize(q8, out, &o, &err), 2);
    cr_assert(strstr(err.msg, "requantiz"), "%s", err.msg);
    cr_assert_eq(access(out, F_OK), -1, "partial output left");
    o.allow_requantize = true;
    cr_assert_eq(quantize(q8, out, &o, &err), 0, "%s", err.msg);
    /* COPY keeps every tensor and the file type */
    o = opts_for("COPY", 2);
    char cp[128];
    snprintf(cp, sizeof cp, "%s/copy.gguf", tmpdir);
    cr_assert_eq(quantize(q8, cp, &o, &err), 0, "%s", err.msg);
    qk_gguf *g;
    cr_assert_eq(qk_gguf_open(&g, cp, 0, &err), 0);
    uint64_t ft;
    cr_assert(qk_gguf_get_uint(g, "general.file_type", &ft) && ft == 7);
    cr_assert_eq(qk_gguf_find_tensor(g, "blk.0.attn_q.weight")->type, QK_Q8_0);
    qk_gguf_close(g);
    /* the output may not be the input */
    o = opts_for("Q8_0", 1);
    o.allow_requantize = true;
    cr_assert_eq(quantize(q8, q8, &o, &err), 2);
    rm_tmp();
}

/* --keep-split: a two-shard input gives two shards whose tensors are those of
 * the single-file quantization. */
Test(quant_model, keep_split_shards, .timeout = 60)
{
    make_tmp();
    qk_gguf *g;
    qk_err err = {0};
    cr_assert_eq(qk_gguf_open(&g, STORIES, 0, &err), 0);
    char sp[2][160];
    for (int s = 0; s < 2; s++) {
        snprintf(sp[s], sizeof sp[s], "%s/in-%05d-of-00002.gguf", tmpdir, s + 1);
        qk_gguf_writer *w = qk_gguf_writer_new(3);
        if (s == 0)
            for (uint64_t i = 0; i < g->n_kv; i++)
                cr_assert_eq(qk_gguf_w_kv_copy(w, &g->kv[i], &err), 0);
        uint16_t no = (uint16_t)s, cnt = 2;
        qk_gguf_kv k1 = {.key = {"split.no", 8}, .v = {.type = QK_GGUF_U16, .u = no}};
        qk_gguf_kv k2 = {.key = {"split.count", 11}, .v = {.type = QK_GGUF_U16, .u = cnt}};
        cr_assert_eq(qk_gguf_w_kv_copy(w, &k1, &err), 0);
        cr_assert_eq(qk_gguf_w_kv_copy(w, &k2, &err), 0);
        cr_assert_eq(qk_gguf_w_kv_i32(w, "split.tensors.count", (int32_t)g->n_tensors, &err), 0);
        for (uint64_t i = (uint64_t)s * 20; i < (s ? g->n_tensors : 20); i++)
            cr_assert_eq(qk_gguf_w_tensor_copy(w, &g->tensors[i], &err), 0);
        cr_assert_eq(qk_gguf_w_begin(w, sp[s], &err), 0, "%s", err.msg);
        for (uint64_t i = (uint64_t)s * 20; i < (s ? g->n_tensors : 20); i++) {
            cr_assert_eq(qk_gguf_w_data(w, g->tensors[i].data, g->tensors[i].nbytes, &err), 0);
            cr_assert_eq(qk_gguf_w_end_tensor(w, &err), 0);
        }
        cr_assert_eq(qk_gguf_writer_finish(w, &err), 0, "%s", err.msg);
        qk_gguf_writer_free(w);
    }
    char one[160], base[160];
    snprintf(one, sizeof one, "%s/one.gguf", tmpdir);
    snprintf(base, sizeof base, "%s/out", tmpdir);
    qk_quant_opts o = opts_for("Q6_K", 2);
    cr_assert_eq(quantize(STORIES, one, &o, &err), 0, "%s", err.msg);
    o.keep_split = true;
    cr_assert_eq(quantize(sp[0], base, &o, &err), 0, "%s", err.msg);
    qk_gguf *a, *b;
    char s1[200], s2[200];
    snprintf(s1, sizeof s1, "%s-00001-of-00002.gguf", base);
    snprintf(s2, sizeof s2, "%s-00002-of-00002.gguf", base);
    cr_assert_eq(access(s2, F_OK), 0, "second shard missing");
    cr_assert_eq(qk_gguf_open(&a, one, 0, &err), 0);
    cr_assert_eq(qk_gguf_open(&b, s1, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(b->n_shards, 2);
    cr_assert_eq(a->n_tensors, b->n_tensors);
    for (uint64_t i = 0; i < a->n_tensors; i++) {
        const qk_gguf_tensor *x = &a->tensors[i];
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)x->name.len, x->name.ptr);
        const qk_gguf_tensor *y = qk_gguf_find_tensor(b, name);
        cr_assert(y && y->type == x->type && y->nbytes == x->nbytes, "%s", name);
        cr_assert_eq(memcmp(x->data, y->data, x->nbytes), 0, "%s data", name);
    }
    qk_gguf_close(a);
    qk_gguf_close(b);
    qk_gguf_close(g);
    rm_tmp();
}
