/* test_safetensors.c - safetensors reader/writer and Hugging Face
 * directories: the malformed corpus, stories260K against Python's reading of
 * the same header, byte-exact round trips, streaming, sharded directories. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/hfdir.h"
#include "formats/safetensors.h"
#include "tests/testutil.h"
#include "kernels/types.h"

#define F32_DIR "goldens/models/stories260K/hf-f32"
#define BF16_DIR "goldens/models/stories260K/hf-bf16"
#define BAD_DIR "tests/bad/safetensors"

/* ---- malformed corpus ------------------------------------------------------ */

static void check_bad(const char *file, unsigned long long off, const char *what)
{
    char path[512], want[64];
    snprintf(path, sizeof path, BAD_DIR "/%s", file);
    snprintf(want, sizeof want, " at offset %llu: ", off);
    qk_err err = {0};
    qk_st *st = NULL;
    int rc = qk_st_open(&st, path, &err);
    cr_expect_eq(rc, QK_EINPUT, "%s: rc %d (%s)", file, rc, err.msg);
    cr_expect_null(st);
    cr_expect_eq(strncmp(err.msg, path, strlen(path)), 0, "%s: message does not start with the path: %s", file, err.msg);
    cr_expect(strstr(err.msg, want), "%s: expected '%s' in: %s", file, want, err.msg);
    cr_expect(strstr(err.msg, what), "%s: expected '%s' in: %s", file, what, err.msg);
    /* The same through the in-memory entry point. */
    size_t n;
    void *buf = tu_read(path, &n);
    qk_err e2 = {0};
    rc = qk_st_open_mem(&st, buf, n, path, &e2);
    cr_expect_eq(rc, QK_EINPUT, "%s (mem): rc %d", file, rc);
    cr_expect_str_eq(e2.msg, err.msg);
    free(buf);
}

Test(safetensors, bad_corpus)
{
    FILE *f = fopen(BAD_DIR "/EXPECTED.tsv", "r");
    cr_assert(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\n")] = '\0';
        char *file = strtok(line, "\t"), *off = strtok(NULL, "\t"), *what = strtok(NULL, "");
        cr_assert(file && off && what, "bad EXPECTED.tsv line");
        check_bad(file, strtoull(off, NULL, 10), what);
        n++;
    }
    fclose(f);
    cr_expect_geq(n, 15);
    /* Every corpus file is listed. */
    DIR *d = opendir(BAD_DIR);
    cr_assert(d);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));)
        files += strstr(e->d_name, ".safetensors") != NULL;
    closedir(d);
    cr_expect_eq(files, n, "%d corpus files, %d in EXPECTED.tsv", files, n);
}

/* ---- stories260K against Python --------------------------------------------- */

static uint32_t crc32(const uint8_t *p, uint64_t n)
{
    uint32_t c = 0xffffffffu;
    for (uint64_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

/* Python reads the header with json + struct (no safetensors package) and
 * prints: name dtype dims... | begin end crc32 */
static FILE *python_dump(const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,struct,sys,zlib\n"
             "b=open(sys.argv[1],\"rb\").read(); n=struct.unpack(\"<Q\",b[:8])[0]; h=json.loads(b[8:8+n])\n"
             "for k,v in h.items():\n"
             "  if k==\"__metadata__\": print(\"META\", json.dumps(v, sort_keys=True)); continue\n"
             "  s,e=v[\"data_offsets\"]; print(k, v[\"dtype\"], len(v[\"shape\"]), *v[\"shape\"], s, e, zlib.crc32(b[8+n+s:8+n+e]))\n"
             "' %s",
             path);
    return popen(cmd, "r");
}

static void compare_with_python(const char *path, int want_type)
{
    qk_err err = {0};
    qk_st *st = NULL;
    cr_assert_eq(qk_st_open(&st, path, &err), 0, "%s", err.msg);
    FILE *py = python_dump(path);
    cr_assert(py, "cannot run python3");
    char line[1024];
    size_t i = 0;
    while (fgets(line, sizeof line, py)) {
        if (strncmp(line, "META ", 5) == 0) {
            cr_expect(strstr(line, "\"format\": \"pt\""));
            cr_expect_str_eq(qk_st_meta_get(st, "format"), "pt");
            continue;
        }
        cr_assert_lt(i, st->n_tensors, "python lists more tensors");
        const qk_st_tensor *t = &st->tensors[i++];
        char name[256], dtype[32];
        int nd, pos;
        cr_assert_eq(sscanf(line, "%255s %31s %d%n", name, dtype, &nd, &pos), 3);
        cr_expect_str_eq(t->name, name);
        cr_expect_str_eq(t->dtype->name, dtype);
        cr_expect_eq(t->type, want_type);
        cr_assert_eq(t->n_dims, nd);
        const char *p = line + pos;
        for (int d = 0; d < nd; d++) {
            long long x;
            int k;
            cr_assert_eq(sscanf(p, "%lld%n", &x, &k), 1);
            p += k;
            cr_expect_eq(t->shape[d], x);
            cr_expect_eq(t->ne[nd - 1 - d], x);
        }
        unsigned long long b, e, crc;
        cr_assert_eq(sscanf(p, "%llu %llu %llu", &b, &e, &crc), 3);
        cr_expect_eq(t->begin, b);
        cr_expect_eq(t->end, e);
        cr_expect_eq(t->nbytes, e - b);
        cr_expect_eq(crc32(t->data, t->nbytes), (uint32_t)crc, "%s: data differs", name);
        cr_expect_eq(t->nbytes, qk_row_size(t->type, t->ne[0]) * (t->nelem / (uint64_t)t->ne[0]));
        cr_expect_eq(qk_st_find(st, name), t);
    }
    cr_expect_eq(pclose(py), 0);
    cr_expect_eq(i, st->n_tensors);
    cr_expect_null(qk_st_find(st, "no.such.tensor"));
    qk_st_close(st);
}

Test(safetensors, stories260K_matches_python)
{
    compare_with_python(F32_DIR "/model.safetensors", QK_F32);
    compare_with_python(BF16_DIR "/model.safetensors", QK_BF16);
}

Test(safetensors, stories260K_known_tensors)
{
    qk_err err = {0};
    qk_st *st = NULL;
    cr_assert_eq(qk_st_open(&st, F32_DIR "/model.safetensors", &err), 0, "%s", err.msg);
    /* config.json: hidden 64, intermediate 172, vocab 512, 5 layers, 4 kv heads x 8. */
    const qk_st_tensor *t = qk_st_find(st, "model.embed_tokens.weight");
    cr_assert(t);
    cr_expect(t->n_dims == 2 && t->shape[0] == 512 && t->shape[1] == 64 && t->ne[0] == 64 && t->ne[1] == 512);
    t = qk_st_find(st, "model.layers.4.mlp.down_proj.weight");
    cr_assert(t);
    cr_expect(t->shape[0] == 64 && t->shape[1] == 172);
    t = qk_st_find(st, "model.layers.0.self_attn.k_proj.weight");
    cr_assert(t);
    cr_expect(t->shape[0] == 32 && t->shape[1] == 64);
    t = qk_st_find(st, "model.norm.weight");
    cr_assert(t);
    cr_expect(t->n_dims == 1 && t->ne[0] == 64 && t->ne[1] == 1);
    qk_st_close(st);
}

/* ---- writer ------------------------------------------------------------------ */

static char tmpdir[256];

static void mk_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/qk_test_st_XXXXXX");
    cr_assert(mkdtemp(tmpdir));
}

static void rm_tmp(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_expect_eq(system(cmd), 0);
}

static void copy_all(const qk_st *st, const char *out, unsigned flags)
{
    qk_err err = {0};
    qk_st_writer *w = qk_st_writer_new(flags);
    cr_assert(w);
    for (size_t i = 0; i < st->n_meta; i++)
        cr_assert_eq(qk_st_w_meta(w, st->meta[i].key, st->meta[i].value, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < st->n_tensors; i++) {
        const qk_st_tensor *t = &st->tensors[i];
        cr_assert_eq(qk_st_w_tensor(w, t->name, t->dtype->name, t->n_dims, t->shape, t->data, &err), 0, "%s", err.msg);
    }
    cr_assert_eq(qk_st_w_begin(w, out, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_st_writer_finish(w, &err), 0, "%s", err.msg);
    qk_st_writer_free(w);
}

static void round_trip(const char *src, unsigned flags)
{
    qk_err err = {0};
    qk_st *st = NULL;
    cr_assert_eq(qk_st_open(&st, src, &err), 0, "%s", err.msg);
    char out[512];
    snprintf(out, sizeof out, "%s/rt.safetensors", tmpdir);
    copy_all(st, out, flags);
    size_t na, nb;
    void *a = tu_read(src, &na), *b = tu_read(out, &nb);
    cr_expect_eq(na, nb, "%s: %zu vs %zu bytes", src, na, nb);
    cr_expect(na == nb && memcmp(a, b, na) == 0, "%s (flags %u): bytes differ", src, flags);
    free(a);
    free(b);
    qk_st *st2 = NULL;
    cr_assert_eq(qk_st_open(&st2, out, &err), 0, "%s", err.msg);
    cr_assert_eq(st2->n_tensors, st->n_tensors);
    for (size_t i = 0; i < st->n_tensors; i++) {
        const qk_st_tensor *x = &st->tensors[i], *y = qk_st_find(st2, x->name);
        cr_assert(y);
        cr_expect(x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0);
    }
    qk_st_close(st2);
    qk_st_close(st);
}

/* The originals were written by safetensors.torch.save_file (sorted by
 * dtype then name, one dtype here), so both orders give identical bytes. */
Test(safetensors, round_trip_bytes, .init = mk_tmp, .fini = rm_tmp)
{
    round_trip(F32_DIR "/model.safetensors", 0);
    round_trip(F32_DIR "/model.safetensors", QK_ST_W_SORT);
    round_trip(BF16_DIR "/model.safetensors", 0);
    round_trip(BF16_DIR "/model.safetensors", QK_ST_W_SORT);
}

Test(safetensors, writer_sort_order_and_streaming, .init = mk_tmp, .fini = rm_tmp)
{
    qk_err err = {0};
    qk_st_writer *w = qk_st_writer_new(QK_ST_W_SORT);
    static const struct { const char *name, *dtype; int64_t n; } ts[] = {
        {"b", "F32", 3}, {"a", "F16", 5}, {"c", "F32", 1}, {"z", "U8", 7}, {"m", "F64", 2},
        {"e", "F32", 0}, {"q", "F4", 6}, {"s", "BOOL", 1},
    };
    uint8_t data[8][64];
    for (int i = 0; i < 8; i++) {
        for (int k = 0; k < 64; k++)
            data[i][k] = (uint8_t)(i * 64 + k);
        /* Even tensors streamed, odd ones from memory. */
        cr_assert_eq(qk_st_w_tensor(w, ts[i].name, ts[i].dtype, 1, &ts[i].n, i % 2 ? data[i] : NULL, &err), 0,
                     "%s", err.msg);
    }
    cr_expect_eq(qk_st_w_tensor(w, "b", "F32", 1, &ts[0].n, NULL, &err), QK_EINPUT);
    cr_expect_eq(qk_st_w_tensor(w, "x", "F99", 1, &ts[0].n, NULL, &err), QK_EINPUT);
    int64_t odd = 3;
    cr_expect_eq(qk_st_w_tensor(w, "x", "F4", 1, &odd, NULL, &err), QK_EINPUT);
    char out[512];
    snprintf(out, sizeof out, "%s/sorted.safetensors", tmpdir);
    cr_assert_eq(qk_st_w_begin(w, out, &err), 0, "%s", err.msg);
    /* Reference order: descending Dtype enum rank, then name. */
    static const char *const want[] = {"m", "b", "c", "e", "a", "z", "q", "s"};
    cr_assert_eq(qk_st_w_count(w), 8u);
    for (size_t i = 0; i < 8; i++)
        cr_expect_str_eq(qk_st_w_name(w, i), want[i]);
    for (size_t i = 0; i < 8; i++) {
        int k = 0;
        while (strcmp(ts[k].name, want[i]) != 0)
            k++;
        if (k % 2)
            continue;
        const qk_st_dtype *dt = qk_st_dtype_by_name(ts[k].dtype);
        size_t nb = (size_t)(ts[k].n * dt->bits / 8);
        if (nb > 1) { /* in two pieces */
            cr_assert_eq(qk_st_w_data(w, data[k], 1, &err), 0, "%s", err.msg);
            cr_assert_eq(qk_st_w_data(w, data[k] + 1, nb - 1, &err), 0, "%s", err.msg);
        } else if (nb)
            cr_assert_eq(qk_st_w_data(w, data[k], nb, &err), 0, "%s", err.msg);
    }
    cr_expect_eq(qk_st_w_data(w, data[0], 1, &err), QK_EINPUT);
    cr_assert_eq(qk_st_writer_finish(w, &err), 0, "%s", err.msg);
    qk_st_writer_free(w);
    qk_st *st = NULL;
    cr_assert_eq(qk_st_open(&st, out, &err), 0, "%s", err.msg);
    cr_expect_eq(st->data_start % 8, 0);
    cr_expect(!st->has_metadata);
    cr_expect_eq(st->header_len, st->data_start - 8);
    cr_assert_eq(st->n_tensors, 8u);
    for (size_t i = 0; i < 8; i++) {
        cr_expect_str_eq(st->tensors[i].name, want[i]);
        int k = 0;
        while (strcmp(ts[k].name, want[i]) != 0)
            k++;
        cr_expect_eq(memcmp(st->tensors[i].data, data[k], st->tensors[i].nbytes), 0);
        cr_expect_eq(st->tensors[i].type, qk_st_dtype_by_name(ts[k].dtype)->type);
    }
    cr_expect_eq(qk_st_find(st, "q")->nbytes, 3u);
    cr_expect_eq(qk_st_find(st, "q")->type, -1);
    qk_st_close(st);
}

Test(safetensors, writer_incomplete_leaves_nothing, .init = mk_tmp, .fini = rm_tmp)
{
    qk_err err = {0};
    qk_st_writer *w = qk_st_writer_new(0);
    int64_t n = 4;
    cr_assert_eq(qk_st_w_tensor(w, "t", "I32", 1, &n, NULL, &err), 0);
    char out[512];
    snprintf(out, sizeof out, "%s/partial.safetensors", tmpdir);
    cr_assert_eq(qk_st_w_begin(w, out, &err), 0, "%s", err.msg);
    uint8_t d[16] = {0};
    cr_assert_eq(qk_st_w_data(w, d, 8, &err), 0);
    cr_expect_eq(qk_st_w_data(w, d, 9, &err), QK_EINPUT);
    cr_expect_eq(qk_st_writer_finish(w, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "got 8 of its 16 bytes"), "%s", err.msg);
    qk_st_writer_free(w);
    cr_expect_neq(access(out, F_OK), 0);
    DIR *dd = opendir(tmpdir);
    int left = 0;
    for (struct dirent *e; (e = readdir(dd));)
        left += e->d_name[0] != '.';
    closedir(dd);
    cr_expect_eq(left, 0, "temporary files left behind");
}

/* ---- edge cases the format allows ------------------------------------------------ */

static qk_st *open_blob(const char *header, const void *data, size_t nd, qk_err *err, int *rc)
{
    size_t hl = strlen(header);
    static uint8_t buf[4096];
    cr_assert_lt(8 + hl + nd, sizeof buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    if (nd)
        memcpy(buf + 8 + hl, data, nd);
    qk_st *st = NULL;
    *rc = qk_st_open_mem(&st, buf, 8 + hl + nd, "blob", err);
    return st;
}

Test(safetensors, valid_edge_cases)
{
    qk_err err = {0};
    int rc;
    qk_st *st = open_blob("{}", NULL, 0, &err, &rc);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_expect_eq(st->n_tensors, 0u);
    qk_st_close(st);
    st = open_blob("{\"__metadata__\":{}}      ", NULL, 0, &err, &rc);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_expect(st->has_metadata && st->n_meta == 0);
    qk_st_close(st);
    /* Scalars, empty tensors, F4 pairs, unknown extra keys, any key order,
     * data order differing from header order. */
    const char *h = "{\"s\":{\"shape\":[],\"dtype\":\"I64\",\"data_offsets\":[2,10],\"x\":null},"
                    "\"e\":{\"dtype\":\"F16\",\"shape\":[3,0],\"data_offsets\":[2,2]},"
                    "\"f\":{\"dtype\":\"F4\",\"shape\":[2,2],\"data_offsets\":[0,2]},"
                    "\"__metadata__\":{\"k\":\"v\\u00e9\\ud83d\\ude00\"}}";
    uint8_t d[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    st = open_blob(h, d, sizeof d, &err, &rc);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(st->n_tensors, 3u);
    const qk_st_tensor *s = qk_st_find(st, "s");
    cr_expect(s->n_dims == 0 && s->nelem == 1 && s->nbytes == 8 && s->data[0] == 3 && s->type == QK_I64);
    cr_expect(s->ne[0] == 1);
    const qk_st_tensor *e = qk_st_find(st, "e");
    cr_expect(e->nelem == 0 && e->nbytes == 0 && e->ne[0] == 0 && e->ne[1] == 3);
    cr_expect_eq(qk_st_find(st, "f")->nbytes, 2u);
    cr_expect_str_eq(qk_st_meta_get(st, "k"), "v\xc3\xa9\xf0\x9f\x98\x80");
    qk_st_close(st);
}

Test(safetensors, dtype_table)
{
    static const struct { const char *n; int t, bits; } want[] = {
        {"F64", QK_F64, 64}, {"F32", QK_F32, 32}, {"F16", QK_F16, 16}, {"BF16", QK_BF16, 16},
        {"F8_E4M3", QK_F8_E4M3, 8}, {"F8_E5M2", QK_F8_E5M2, 8}, {"F8_E8M0", QK_E8M0, 8},
        {"I64", QK_I64, 64}, {"I32", QK_I32, 32}, {"I16", QK_I16, 16}, {"I8", QK_I8, 8},
        {"U8", QK_U8, 8}, {"U16", QK_U16, 16}, {"U32", QK_U32, 32}, {"U64", QK_U64, 64},
        {"BOOL", QK_BOOL, 8}, {"F4", -1, 4}, {"F6_E2M3", -1, 6}, {"F6_E3M2", -1, 6},
        {"F8_E4M3FNUZ", -1, 8}, {"F8_E5M2FNUZ", -1, 8}, {"C64", -1, 64},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const qk_st_dtype *d = qk_st_dtype_by_name(want[i].n);
        cr_assert(d, "%s", want[i].n);
        cr_expect_eq(d->type, want[i].t, "%s", want[i].n);
        cr_expect_eq(d->bits, want[i].bits, "%s", want[i].n);
        if (want[i].t >= 0) {
            cr_expect_eq(qk_st_dtype_by_type(want[i].t), d);
            /* Element size agrees with the type table. */
            const qk_type_traits *tt = qk_type_get(want[i].t);
            cr_assert(tt, "%s", want[i].n);
            cr_expect_eq(tt->type_size * 8 / (size_t)tt->blck, (size_t)want[i].bits, "%s", want[i].n);
        }
    }
    cr_expect_null(qk_st_dtype_by_name("f32"));
    cr_expect_null(qk_st_dtype_by_type(QK_Q4_0));
}

/* ---- Hugging Face directories ------------------------------------------------------ */

Test(hfdir, stories260K_dir_and_file)
{
    qk_err err = {0};
    qk_hfdir *hf = NULL;
    cr_assert_eq(qk_hf_open(&hf, F32_DIR, &err), 0, "%s", err.msg);
    cr_expect_eq(hf->n_files, 1);
    cr_expect_null(hf->index);
    cr_assert(hf->config);
    cr_expect_eq(qk_jsonv_get_i64(hf->config, "hidden_size", 0), 64);
    cr_expect_str_eq(qk_jsonv_get_str(hf->config, "model_type", ""), "llama");
    cr_expect_null(hf->generation_config);
    qk_st *st = NULL;
    cr_assert_eq(qk_st_open(&st, F32_DIR "/model.safetensors", &err), 0);
    cr_assert_eq(hf->n_tensors, st->n_tensors);
    for (size_t i = 0; i < st->n_tensors; i++) {
        const qk_hf_tensor *t = &hf->tensors[i];
        cr_expect_str_eq(t->name, st->tensors[i].name);
        cr_expect_eq(t->nbytes, st->tensors[i].nbytes);
        cr_expect_eq(t->file_offset, st->tensors[i].file_offset);
        cr_expect_eq(memcmp(t->data, st->tensors[i].data, t->nbytes), 0);
        cr_expect_eq(qk_hf_find(hf, t->name), t);
    }
    qk_st_close(st);
    qk_hf_close(hf);
    cr_assert_eq(qk_hf_open(&hf, BF16_DIR "/model.safetensors", &err), 0, "%s", err.msg);
    cr_expect_eq(hf->tensors[0].type, QK_BF16);
    cr_expect_str_eq(hf->tensors[0].dtype, "BF16");
    cr_expect(hf->config);
    qk_hf_close(hf);
    cr_expect_eq(qk_hf_open(&hf, "goldens/models", &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "no model.safetensors"), "%s", err.msg);
    cr_expect_eq(qk_hf_open(&hf, "/nonexistent/dir", &err), QK_EIO);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

/* Split stories260K into two shards + an index, as save_pretrained would. */
static void make_shards(const char *extra_in_shard2)
{
    qk_err err = {0};
    qk_st *st = NULL;
    cr_assert_eq(qk_st_open(&st, F32_DIR "/model.safetensors", &err), 0);
    char idx[16384];
    int k = snprintf(idx, sizeof idx, "{\"metadata\":{\"total_size\":%llu},\"weight_map\":{",
                     (unsigned long long)st->data_size);
    for (int s = 0; s < 2; s++) {
        qk_st_writer *w = qk_st_writer_new(0);
        cr_assert_eq(qk_st_w_meta(w, "format", "pt", &err), 0);
        for (size_t i = 0; i < st->n_tensors; i++) {
            const qk_st_tensor *t = &st->tensors[i];
            if ((i < st->n_tensors / 2) != (s == 0))
                continue;
            cr_assert_eq(qk_st_w_tensor(w, t->name, t->dtype->name, t->n_dims, t->shape, t->data, &err), 0);
            k += snprintf(idx + k, sizeof idx - (size_t)k, "%s\"%s\":\"model-0000%d-of-00002.safetensors\"",
                          i ? "," : "", t->name, s + 1);
        }
        if (s == 1 && extra_in_shard2) {
            int64_t n = 1;
            static const float one = 1;
            cr_assert_eq(qk_st_w_tensor(w, extra_in_shard2, "F32", 1, &n, &one, &err), 0);
        }
        char p[512];
        snprintf(p, sizeof p, "%s/model-0000%d-of-00002.safetensors", tmpdir, s + 1);
        cr_assert_eq(qk_st_w_begin(w, p, &err), 0, "%s", err.msg);
        cr_assert_eq(qk_st_writer_finish(w, &err), 0, "%s", err.msg);
        qk_st_writer_free(w);
    }
    snprintf(idx + k, sizeof idx - (size_t)k, "}}");
    write_file(tmpdir, "model.safetensors.index.json", idx);
    write_file(tmpdir, "generation_config.json", "{\"bos_token_id\": 1, \"eos_token_id\": 2}");
    qk_st_close(st);
}

Test(hfdir, sharded, .init = mk_tmp, .fini = rm_tmp)
{
    make_shards(NULL);
    qk_err err = {0};
    qk_hfdir *hf = NULL;
    cr_assert_eq(qk_hf_open(&hf, tmpdir, &err), 0, "%s", err.msg);
    cr_expect_eq(hf->n_files, 2);
    cr_expect(hf->index);
    cr_expect_eq(qk_jsonv_get_i64(hf->generation_config, "eos_token_id", 0), 2);
    qk_st *st = NULL;
    cr_assert_eq(qk_st_open(&st, F32_DIR "/model.safetensors", &err), 0);
    cr_assert_eq(hf->n_tensors, st->n_tensors);
    for (size_t i = 0; i < st->n_tensors; i++) {
        const qk_st_tensor *x = &st->tensors[i];
        const qk_hf_tensor *y = qk_hf_find(hf, x->name);
        cr_assert(y, "%s", x->name);
        cr_expect_eq(y->file, i < st->n_tensors / 2 ? 0 : 1);
        cr_expect_eq(y->n_dims, x->n_dims);
        cr_expect_eq(memcmp(y->shape, x->shape, sizeof y->shape), 0);
        cr_expect_eq(memcmp(y->ne, x->ne, sizeof y->ne), 0);
        cr_expect_eq(memcmp(y->data, x->data, x->nbytes), 0);
    }
    qk_hf_close(hf);
    /* The index path itself works too. */
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", tmpdir);
    cr_assert_eq(qk_hf_open(&hf, p, &err), 0, "%s", err.msg);
    cr_expect_eq(hf->n_tensors, st->n_tensors);
    qk_hf_close(hf);
    /* A missing shard. */
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", tmpdir);
    cr_assert_eq(unlink(p), 0);
    cr_expect_eq(qk_hf_open(&hf, tmpdir, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "does not exist"), "%s", err.msg);
    qk_st_close(st);
}

Test(hfdir, index_errors, .init = mk_tmp, .fini = rm_tmp)
{
    qk_err err = {0};
    qk_hfdir *hf = NULL;
    make_shards("model.embed_tokens.weight"); /* in both shards */
    cr_expect_eq(qk_hf_open(&hf, tmpdir, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "is in both"), "%s", err.msg);
    make_shards(NULL);
    /* A tensor listed under the wrong shard. */
    write_file(tmpdir, "model.safetensors.index.json",
               "{\"weight_map\":{\"model.norm.weight\":\"model-00001-of-00002.safetensors\"}}");
    cr_expect_eq(qk_hf_open(&hf, tmpdir, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "weight_map at offset 15: tensor 'model.norm.weight' is not in shard"), "%s", err.msg);
    write_file(tmpdir, "model.safetensors.index.json", "{\"weight_map\":{\"x\":\"../etc/passwd\"}}");
    cr_expect_eq(qk_hf_open(&hf, tmpdir, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "relative file name"), "%s", err.msg);
    write_file(tmpdir, "model.safetensors.index.json", "{\"weight_map\":[]}");
    cr_expect_eq(qk_hf_open(&hf, tmpdir, &err), QK_EINPUT);
    write_file(tmpdir, "model.safetensors.index.json", "{\"weight_map\":{\"x\":\"a.safetensors\"},}");
    cr_expect_eq(qk_hf_open(&hf, tmpdir, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "JSON at offset 36: expected a string key"), "%s", err.msg);
    /* A broken config.json is an error too. */
    make_shards(NULL);
    write_file(tmpdir, "config.json", "{\"a\":1");
    cr_expect_eq(qk_hf_open(&hf, tmpdir, &err), QK_EINPUT);
    cr_expect(strstr(err.msg, "config.json: JSON at offset 6"), "%s", err.msg);
}
