/* GGUF reader and writer: the malformed corpus (tests/bad/gguf, made by
 * tests/bad/make_bad_gguf.py), stories260K's metadata and tensor table
 * against what shared/tools/ggufhash.py and a Python parse of the file say,
 * byte-identical round trips, every value type, and split models. */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "tests/testutil.h"
#include "kernels/types.h"

#define STORIES "goldens/models/stories260K/stories260K-f32.gguf"
#define BAD "tests/bad/gguf/"

/* ---- helpers ------------------------------------------------------------- */

static char *tmpdir(void)
{
    char *d = strdup("/tmp/qk_test_gguf.XXXXXX");
    cr_assert(d && mkdtemp(d), "mkdtemp");
    return d;
}

/* Remove a flat temp directory and everything in it. */
static void rmtree(char *d)
{
    DIR *dir = opendir(d);
    cr_assert(dir);
    struct dirent *e;
    char p[512];
    while ((e = readdir(dir)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", d, e->d_name);
            unlink(p);
        }
    closedir(dir);
    rmdir(d);
    free(d);
}

static int count_entries(const char *d)
{
    DIR *dir = opendir(d);
    cr_assert(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(dir);
    return n;
}

static bool str_is(qk_str s, const char *c) { return qk_str_eq(s, c); }

/* The message must read "<path>: <field> at offset <N>: <what>" with field
 * containing want_field (NULL: any). */
static void check_msg(const qk_err *e, const char *path, const char *want_field)
{
    size_t pl = strlen(path);
    cr_assert(strncmp(e->msg, path, pl) == 0 && e->msg[pl] == ':' && e->msg[pl + 1] == ' ',
              "message does not start with the path: %s", e->msg);
    const char *field = e->msg + pl + 2;
    const char *at = strstr(field, " at offset ");
    cr_assert(at && at > field, "no field / offset: %s", e->msg);
    const char *num = at + strlen(" at offset ");
    char *end;
    errno = 0;
    strtoull(num, &end, 10);
    cr_assert(end > num && errno == 0 && end[0] == ':' && end[1] == ' ' && end[2], "bad offset: %s", e->msg);
    if (want_field) {
        char f[512];
        snprintf(f, sizeof f, "%.*s", (int)(at - field), field);
        cr_assert(strstr(f, want_field), "field '%s' does not name '%s': %s", f, want_field, e->msg);
    }
}

/* ---- malformed corpus ------------------------------------------------------ */

Test(gguf, bad_corpus_every_file_fails_naming_its_field)
{
    FILE *f = fopen(BAD "EXPECTED.tsv", "r");
    cr_assert(f, "cannot open " BAD "EXPECTED.tsv");
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\n")] = 0;
        char *name = strtok(line, "\t"), *field = strtok(NULL, "\t"), *flag = strtok(NULL, "\t");
        cr_assert(name && field, "bad EXPECTED.tsv line");
        char path[256];
        snprintf(path, sizeof path, BAD "%s", name);
        qk_gguf *g = NULL;
        qk_err e = {0};
        int rc = qk_gguf_open(&g, path, 0, &e);
        cr_assert_eq(rc, QK_EINPUT, "%s: rc %d (%s)", name, rc, e.msg);
        cr_assert_eq(e.code, QK_EINPUT);
        cr_assert_null(g);
        check_msg(&e, path, field);

        /* parsing the bytes in memory gives the same message */
        if (!flag || strcmp(flag, "split") != 0) {
            size_t size;
            void *buf = tu_read(path, &size);
            qk_err e2 = {0};
            rc = qk_gguf_open_mem(&g, buf, size, path, &e2);
            cr_assert_eq(rc, QK_EINPUT, "%s in memory: rc %d", name, rc);
            cr_assert_str_eq(e2.msg, e.msg);
            free(buf);
        }
        n++;
    }
    fclose(f);
    cr_assert_geq(n, 30, "only %d malformed files", n);

    /* the base the defects were made from is valid */
    qk_gguf *g;
    qk_err e = {0};
    cr_assert_eq(qk_gguf_open(&g, BAD "valid_base.gguf", 0, &e), 0, "%s", e.msg);
    cr_assert_eq(g->n_tensors, 3);
    qk_gguf_close(g);
}

/* Every prefix of a valid file fails cleanly, up to the end of its data. */
static void check_prefixes(const char *path)
{
    size_t size;
    uint8_t *buf = tu_read(path, &size);
    qk_gguf *g;
    qk_err e = {0};
    cr_assert_eq(qk_gguf_open_mem(&g, buf, size, path, &e), 0, "%s", e.msg);
    uint64_t end = g->data_offset;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->data_offset + g->tensors[i].offset + g->tensors[i].nbytes > end)
            end = g->data_offset + g->tensors[i].offset + g->tensors[i].nbytes;
    qk_gguf_close(g);
    for (size_t n = 0; n < size; n++) {
        uint8_t *cut = malloc(n ? n : 1); /* exact size: ASan sees any overread */
        memcpy(cut, buf, n);
        qk_err e2 = {0};
        int rc = qk_gguf_open_mem(&g, cut, n, path, &e2);
        if (n < end) {
            cr_assert_eq(rc, QK_EINPUT, "prefix %zu of %s opened", n, path);
            check_msg(&e2, path, NULL);
        } else {
            cr_assert_eq(rc, 0, "prefix %zu: %s", n, e2.msg);
            qk_gguf_close(g);
        }
        free(cut);
    }
    free(buf);
}

Test(gguf, every_truncation_fails_cleanly)
{
    check_prefixes(BAD "valid_base.gguf");
}

/* ---- stories260K: metadata ------------------------------------------------- */

Test(gguf, stories260k_metadata)
{
    qk_gguf *g;
    qk_err e = {0};
    cr_assert_eq(qk_gguf_open(&g, STORIES, 0, &e), 0, "%s", e.msg);
    cr_assert_eq(g->version, 3);
    cr_assert_eq(g->n_kv, 19);
    cr_assert_eq(g->alignment, 32);
    cr_assert_eq(g->n_shards, 1);
    cr_assert_eq(g->file_size, 1185376);
    cr_assert_eq(g->total_size, 1185376);

    /* scalar values as ggufhash.py --kv prints them */
    qk_str s;
    cr_assert(qk_gguf_get_str(g, "general.architecture", &s) && str_is(s, "llama"));
    cr_assert(qk_gguf_get_str(g, "tokenizer.ggml.model", &s) && str_is(s, "llama"));
    uint64_t u;
    int64_t i;
    cr_assert(qk_gguf_get_uint(g, "llama.block_count", &u) && u == 5);
    cr_assert(qk_gguf_get_uint(g, "llama.embedding_length", &u) && u == 64);
    cr_assert(qk_gguf_get_uint(g, "llama.feed_forward_length", &u) && u == 172);
    cr_assert(qk_gguf_get_int(g, "llama.attention.head_count_kv", &i) && i == 4);
    cr_assert(qk_gguf_get_uint(g, "tokenizer.ggml.seperator_token_id", &u) && u == 4294967295u);
    double d;
    cr_assert(qk_gguf_get_f64(g, "llama.attention.layer_norm_rms_epsilon", &d));
    cr_assert_eq(d, 9.999999747378752e-06);
    /* wrong types and missing keys */
    cr_assert_not(qk_gguf_get_str(g, "llama.block_count", &s));
    cr_assert_not(qk_gguf_get_uint(g, "general.architecture", &u));
    cr_assert_not(qk_gguf_get_f64(g, "llama.block_count", &d));
    bool b;
    cr_assert_not(qk_gguf_get_bool(g, "llama.block_count", &b));
    cr_assert_not(qk_gguf_get_uint(g, "no.such.key", &u));
    cr_assert_null(qk_gguf_find(g, "no.such.key"));

    /* arrays: values read with Python from the file */
    const qk_gguf_kv *tok = qk_gguf_find(g, "tokenizer.ggml.tokens");
    cr_assert(tok);
    cr_assert_eq(tok->v.type, QK_GGUF_ARRAY);
    cr_assert_eq(tok->v.arr.elem, QK_GGUF_STRING);
    cr_assert_eq(tok->v.arr.n, 512);
    cr_assert(tok->v.arr.items);
    cr_assert(str_is(tok->v.arr.items[0].s, "<unk>"));
    cr_assert(str_is(tok->v.arr.items[1].s, "<s>"));
    cr_assert(str_is(tok->v.arr.items[2].s, "</s>"));
    cr_assert(str_is(tok->v.arr.items[3].s, "<0x00>"));
    cr_assert(str_is(tok->v.arr.items[510].s, "~"));
    cr_assert(str_is(tok->v.arr.items[511].s, "\xe2\x80\x8a"));
    cr_assert_eq(tok->v.arr.items[511].type, QK_GGUF_STRING);
    const qk_gguf_kv *sc = qk_gguf_find(g, "tokenizer.ggml.scores");
    cr_assert(sc && sc->v.arr.elem == QK_GGUF_F32 && sc->v.arr.n == 512 && !sc->v.arr.items);
    cr_assert_eq(qk_gguf_arr_f64(&sc->v, 0), 0.0);
    cr_assert_eq(qk_gguf_arr_f64(&sc->v, 510), -251.0);
    cr_assert_eq(qk_gguf_arr_f64(&sc->v, 511), -252.0);
    cr_assert_eq(qk_gguf_arr_f64(&sc->v, 512), 0.0); /* out of range */
    const qk_gguf_kv *tt = qk_gguf_find(g, "tokenizer.ggml.token_type");
    cr_assert(tt && tt->v.arr.elem == QK_GGUF_I32 && tt->v.arr.n == 512);
    cr_assert_eq(qk_gguf_arr_i64(&tt->v, 0), 2);
    cr_assert_eq(qk_gguf_arr_i64(&tt->v, 1), 3);
    cr_assert_eq(qk_gguf_arr_i64(&tt->v, 3), 6);
    cr_assert_eq(qk_gguf_arr_i64(&tt->v, 511), 1);
    cr_assert_eq(qk_gguf_arr_i64(&tok->v, 0), 0); /* not a numeric array */
    qk_gguf_close(g);
}

/* ---- stories260K: tensor table ---------------------------------------------- */

/* name, type, dims: ggufhash.py output; offsets: a Python parse of the file. */
static const struct {
    const char *name;
    int type;
    uint32_t n_dims;
    int64_t ne[2];
    uint64_t offset;
} stories_tensors[] = {
    {"token_embd.weight", 0, 2, {64, 512}, 0},
    {"output_norm.weight", 0, 1, {64}, 131072},
    {"output.weight", 0, 2, {64, 512}, 131328},
    {"blk.0.attn_q.weight", 0, 2, {64, 64}, 262400},
    {"blk.0.attn_k.weight", 0, 2, {64, 32}, 278784},
    {"blk.0.attn_v.weight", 0, 2, {64, 32}, 286976},
    {"blk.0.attn_output.weight", 0, 2, {64, 64}, 295168},
    {"blk.0.attn_norm.weight", 0, 1, {64}, 311552},
    {"blk.0.ffn_gate.weight", 0, 2, {64, 172}, 311808},
    {"blk.0.ffn_down.weight", 0, 2, {172, 64}, 355840},
    {"blk.0.ffn_up.weight", 0, 2, {64, 172}, 399872},
    {"blk.0.ffn_norm.weight", 0, 1, {64}, 443904},
    {"blk.1.attn_q.weight", 0, 2, {64, 64}, 444160},
    {"blk.1.attn_k.weight", 0, 2, {64, 32}, 460544},
    {"blk.1.attn_v.weight", 0, 2, {64, 32}, 468736},
    {"blk.1.attn_output.weight", 0, 2, {64, 64}, 476928},
    {"blk.1.attn_norm.weight", 0, 1, {64}, 493312},
    {"blk.1.ffn_gate.weight", 0, 2, {64, 172}, 493568},
    {"blk.1.ffn_down.weight", 0, 2, {172, 64}, 537600},
    {"blk.1.ffn_up.weight", 0, 2, {64, 172}, 581632},
    {"blk.1.ffn_norm.weight", 0, 1, {64}, 625664},
    {"blk.2.attn_q.weight", 0, 2, {64, 64}, 625920},
    {"blk.2.attn_k.weight", 0, 2, {64, 32}, 642304},
    {"blk.2.attn_v.weight", 0, 2, {64, 32}, 650496},
    {"blk.2.attn_output.weight", 0, 2, {64, 64}, 658688},
    {"blk.2.attn_norm.weight", 0, 1, {64}, 675072},
    {"blk.2.ffn_gate.weight", 0, 2, {64, 172}, 675328},
    {"blk.2.ffn_down.weight", 0, 2, {172, 64}, 719360},
    {"blk.2.ffn_up.weight", 0, 2, {64, 172}, 763392},
    {"blk.2.ffn_norm.weight", 0, 1, {64}, 807424},
    {"blk.3.attn_q.weight", 0, 2, {64, 64}, 807680},
    {"blk.3.attn_k.weight", 0, 2, {64, 32}, 824064},
    {"blk.3.attn_v.weight", 0, 2, {64, 32}, 832256},
    {"blk.3.attn_output.weight", 0, 2, {64, 64}, 840448},
    {"blk.3.attn_norm.weight", 0, 1, {64}, 856832},
    {"blk.3.ffn_gate.weight", 0, 2, {64, 172}, 857088},
    {"blk.3.ffn_down.weight", 0, 2, {172, 64}, 901120},
    {"blk.3.ffn_up.weight", 0, 2, {64, 172}, 945152},
    {"blk.3.ffn_norm.weight", 0, 1, {64}, 989184},
    {"blk.4.attn_q.weight", 0, 2, {64, 64}, 989440},
    {"blk.4.attn_k.weight", 0, 2, {64, 32}, 1005824},
    {"blk.4.attn_v.weight", 0, 2, {64, 32}, 1014016},
    {"blk.4.attn_output.weight", 0, 2, {64, 64}, 1022208},
    {"blk.4.attn_norm.weight", 0, 1, {64}, 1038592},
    {"blk.4.ffn_gate.weight", 0, 2, {64, 172}, 1038848},
    {"blk.4.ffn_down.weight", 0, 2, {172, 64}, 1082880},
    {"blk.4.ffn_up.weight", 0, 2, {64, 172}, 1126912},
    {"blk.4.ffn_norm.weight", 0, 1, {64}, 1170944},
};

Test(gguf, stories260k_tensor_table)
{
    qk_gguf *g;
    qk_err e = {0};
    cr_assert_eq(qk_gguf_open(&g, STORIES, 0, &e), 0, "%s", e.msg);
    size_t n = sizeof stories_tensors / sizeof stories_tensors[0];
    cr_assert_eq(g->n_tensors, n);
    cr_assert_eq(g->data_offset, 14176);
    for (size_t k = 0; k < n; k++) {
        const qk_gguf_tensor *t = &g->tensors[k];
        cr_assert(str_is(t->name, stories_tensors[k].name), "tensor %zu", k);
        cr_assert_eq(t->type, stories_tensors[k].type);
        cr_assert_eq(t->n_dims, stories_tensors[k].n_dims);
        int64_t ne1 = t->n_dims > 1 ? stories_tensors[k].ne[1] : 1;
        cr_assert(t->ne[0] == stories_tensors[k].ne[0] && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1);
        cr_assert_eq(t->offset, stories_tensors[k].offset);
        cr_assert_eq(t->nbytes, (uint64_t)(t->ne[0] * ne1 * 4));
        cr_assert_eq(t->data, g->maps[0].data + 14176 + t->offset);
        cr_assert_eq(t->shard, 0);
        cr_assert_eq(qk_gguf_find_tensor(g, stories_tensors[k].name), t);
    }
    cr_assert_null(qk_gguf_find_tensor(g, "blk.5.attn_q.weight"));
    /* ggufhash.py: token_embd and output have the same sha256, the others differ */
    const qk_gguf_tensor *a = qk_gguf_find_tensor(g, "token_embd.weight");
    const qk_gguf_tensor *b = qk_gguf_find_tensor(g, "output.weight");
    cr_assert_eq(memcmp(a->data, b->data, a->nbytes), 0);
    a = qk_gguf_find_tensor(g, "blk.0.attn_q.weight");
    b = qk_gguf_find_tensor(g, "blk.1.attn_q.weight");
    cr_assert_neq(memcmp(a->data, b->data, a->nbytes), 0);
    qk_gguf_close(g);
}

/* ---- writer: byte-identical round trip ---------------------------------------- */

/* Write every kv and tensor of src to dst with the writer. */
static void copy_gguf(const qk_gguf *g, const char *dst)
{
    qk_err e = {0};
    qk_gguf_writer *w = qk_gguf_writer_new(g->version);
    cr_assert(w);
    for (uint64_t i = 0; i < g->n_kv; i++)
        cr_assert_eq(qk_gguf_w_kv_copy(w, &g->kv[i], &e), 0, "%s", e.msg);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        cr_assert_eq(qk_gguf_w_tensor_copy(w, &g->tensors[i], &e), 0, "%s", e.msg);
    cr_assert_eq(qk_gguf_w_begin(w, dst, &e), 0, "%s", e.msg);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const qk_gguf_tensor *t = &g->tensors[i];
        /* in two pieces, to exercise streaming */
        size_t half = (size_t)t->nbytes / 2;
        cr_assert_eq(qk_gguf_w_data(w, t->data, half, &e), 0, "%s", e.msg);
        cr_assert_eq(qk_gguf_w_data(w, t->data + half, (size_t)t->nbytes - half, &e), 0, "%s", e.msg);
        cr_assert_eq(qk_gguf_w_end_tensor(w, &e), 0, "%s", e.msg);
    }
    cr_assert_eq(qk_gguf_writer_finish(w, &e), 0, "%s", e.msg);
    qk_gguf_writer_free(w);
}

static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    uint8_t *pa = tu_read(a, &na), *pb = tu_read(b, &nb);
    cr_assert_eq(na, nb, "%s is %zu bytes, %s is %zu", a, na, b, nb);
    cr_assert_eq(memcmp(pa, pb, na), 0, "%s and %s differ", a, b);
    free(pa);
    free(pb);
}

Test(gguf, stories260k_round_trip_is_byte_identical)
{
    char *d = tmpdir(), out[256];
    snprintf(out, sizeof out, "%s/copy.gguf", d);
    qk_gguf *g;
    qk_err e = {0};
    cr_assert_eq(qk_gguf_open(&g, STORIES, 0, &e), 0, "%s", e.msg);
    copy_gguf(g, out);
    qk_gguf_close(g);
    assert_same_file(STORIES, out);
    cr_assert_eq(count_entries(d), 1); /* no temp file left */
    rmtree(d);
}

Test(gguf, writer_freed_without_finish_leaves_nothing)
{
    char *d = tmpdir(), out[256];
    snprintf(out, sizeof out, "%s/never.gguf", d);
    qk_err e = {0};
    qk_gguf_writer *w = qk_gguf_writer_new(3);
    int64_t ne[1] = {4};
    cr_assert_eq(qk_gguf_w_tensor(w, "t", QK_F32, 1, ne, &e), 0);
    cr_assert_eq(qk_gguf_w_begin(w, out, &e), 0, "%s", e.msg);
    cr_assert_leq(count_entries(d), 1); /* the temporary: unnamed (O_TMPFILE) where it can be */
    float x[4] = {1, 2, 3, 4};
    cr_assert_eq(qk_gguf_w_data(w, x, sizeof x, &e), 0);
    qk_gguf_writer_free(w);
    cr_assert_eq(count_entries(d), 0);
    rmtree(d);
}

/* ---- writer: every value type ------------------------------------------------ */

static qk_gguf_value scalar(int type, uint64_t u)
{
    qk_gguf_value v = {.type = type};
    v.u = u;
    return v;
}

Test(gguf, every_value_type_round_trips)
{
    char *d = tmpdir(), p1[256], p2[256];
    snprintf(p1, sizeof p1, "%s/all.gguf", d);
    snprintf(p2, sizeof p2, "%s/all2.gguf", d);
    qk_err e = {0};
    qk_gguf_writer *w = qk_gguf_writer_new(2);
    cr_assert(w);
    cr_assert_null(qk_gguf_writer_new(1));
    cr_assert_null(qk_gguf_writer_new(4));

    /* scalars of every type, through kv_copy of hand-made values */
    struct {
        const char *key;
        qk_gguf_value v;
    } sc[] = {
        {"t.u8", scalar(QK_GGUF_U8, 200)},
        {"t.i8", {.type = QK_GGUF_I8, .i = -100}},
        {"t.u16", scalar(QK_GGUF_U16, 65000)},
        {"t.i16", {.type = QK_GGUF_I16, .i = -32000}},
        {"t.u64", scalar(QK_GGUF_U64, 0xfedcba9876543210ull)},
        {"t.i64", {.type = QK_GGUF_I64, .i = INT64_MIN + 5}},
        {"t.f64", {.type = QK_GGUF_F64, .f = 3.141592653589793}},
        {"t.bool_false", scalar(QK_GGUF_BOOL, 0)},
    };
    for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++) {
        qk_gguf_kv kv = {.key = {sc[k].key, strlen(sc[k].key)}, .v = sc[k].v};
        cr_assert_eq(qk_gguf_w_kv_copy(w, &kv, &e), 0, "%s", e.msg);
    }
    cr_assert_eq(qk_gguf_w_kv_u32(w, "t.u32", 4000000000u, &e), 0);
    cr_assert_eq(qk_gguf_w_kv_i32(w, "t.i32", -2000000000, &e), 0);
    cr_assert_eq(qk_gguf_w_kv_u64(w, "t.u64b", 1ull << 40, &e), 0);
    cr_assert_eq(qk_gguf_w_kv_f32(w, "t.f32", -1.5f, &e), 0);
    cr_assert_eq(qk_gguf_w_kv_bool(w, "t.bool", true, &e), 0);
    cr_assert_eq(qk_gguf_w_kv_str(w, "t.str", "h\xc3\xa9llo", &e), 0);
    cr_assert_eq(qk_gguf_w_kv_str(w, "t.empty", "", &e), 0);
    cr_assert_eq(qk_gguf_w_kv_u32(w, "general.alignment", 64, &e), 0);

    /* fixed-size arrays of every element type */
    const uint8_t raw[64] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0xff, 0x80, 0x7f};
    static const int fixed[] = {QK_GGUF_U8, QK_GGUF_I8, QK_GGUF_U16, QK_GGUF_I16, QK_GGUF_U32, QK_GGUF_I32,
                                QK_GGUF_F32, QK_GGUF_BOOL, QK_GGUF_U64, QK_GGUF_I64, QK_GGUF_F64};
    for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) {
        char key[32];
        snprintf(key, sizeof key, "a.%s", qk_gguf_vtype_name(fixed[k]));
        cr_assert_eq(qk_gguf_w_kv_arr(w, key, fixed[k], raw, 3, &e), 0, "%s", e.msg);
    }
    float fl[3] = {0.5f, -2.0f, 1e30f};
    cr_assert_eq(qk_gguf_w_kv_arr(w, "a.floats", QK_GGUF_F32, fl, 3, &e), 0);
    cr_assert_eq(qk_gguf_w_kv_arr(w, "a.empty", QK_GGUF_U32, NULL, 0, &e), 0);
    cr_assert_neq(qk_gguf_w_kv_arr(w, "a.bad", QK_GGUF_STRING, raw, 1, &e), 0);
    const char *strs[] = {"one", "", "three"};
    cr_assert_eq(qk_gguf_w_kv_arr_str(w, "a.strings", strs, 3, &e), 0);

    /* nested: [[u16 x2], [], [u16 x1]] and [[["x", "yz"]], []] */
    uint16_t h[3] = {1000, 2000, 3000};
    qk_gguf_value in1[3] = {
        {.type = QK_GGUF_ARRAY, .arr = {QK_GGUF_U16, 2, (const uint8_t *)h, NULL}},
        {.type = QK_GGUF_ARRAY, .arr = {QK_GGUF_U16, 0, NULL, NULL}},
        {.type = QK_GGUF_ARRAY, .arr = {QK_GGUF_U16, 1, (const uint8_t *)(h + 2), NULL}},
    };
    qk_gguf_kv nested = {.key = {"n.u16", 5}, .v = {.type = QK_GGUF_ARRAY, .arr = {QK_GGUF_ARRAY, 3, NULL, in1}}};
    cr_assert_eq(qk_gguf_w_kv_copy(w, &nested, &e), 0, "%s", e.msg);
    qk_gguf_value leaf[2] = {{.type = QK_GGUF_STRING, .s = {"x", 1}}, {.type = QK_GGUF_STRING, .s = {"yz", 2}}};
    qk_gguf_value mid[1] = {{.type = QK_GGUF_ARRAY, .arr = {QK_GGUF_STRING, 2, NULL, leaf}}};
    qk_gguf_value top[2] = {{.type = QK_GGUF_ARRAY, .arr = {QK_GGUF_ARRAY, 1, NULL, mid}},
                            {.type = QK_GGUF_ARRAY, .arr = {QK_GGUF_STRING, 0, NULL, NULL}}};
    qk_gguf_kv nested2 = {.key = {"n.str", 5}, .v = {.type = QK_GGUF_ARRAY, .arr = {QK_GGUF_ARRAY, 2, NULL, top}}};
    cr_assert_eq(qk_gguf_w_kv_copy(w, &nested2, &e), 0, "%s", e.msg);

    /* a later kv replaces the value in place */
    cr_assert_eq(qk_gguf_w_kv_str(w, "t.replaced", "old", &e), 0);
    cr_assert_eq(qk_gguf_w_kv_u32(w, "t.after", 7, &e), 0);
    cr_assert_eq(qk_gguf_w_kv_u32(w, "t.replaced", 99, &e), 0);

    /* tensors of several types; data deterministic */
    struct {
        const char *name;
        int type;
        uint32_t nd;
        int64_t ne[4];
    } ts[] = {
        {"f32", QK_F32, 2, {3, 5}},     {"q4_0", QK_Q4_0, 2, {64, 3}}, {"q4_K", QK_Q4_K, 3, {256, 2, 2}},
        {"f16", QK_F16, 4, {2, 1, 3, 1}}, {"empty", QK_Q8_0, 2, {0, 7}}, {"i8", QK_I8, 1, {5}},
    };
    size_t nt = sizeof ts / sizeof ts[0];
    for (size_t k = 0; k < nt; k++)
        cr_assert_eq(qk_gguf_w_tensor(w, ts[k].name, ts[k].type, ts[k].nd, ts[k].ne, &e), 0, "%s", e.msg);
    cr_assert_eq(qk_gguf_w_begin(w, p1, &e), 0, "%s", e.msg);
    cr_assert_neq(qk_gguf_w_kv_u32(w, "late", 1, &e), 0); /* header already written */
    uint64_t seed = 42;
    uint8_t *bufs[sizeof ts / sizeof ts[0]];
    for (size_t k = 0; k < nt; k++) {
        uint64_t rows = (uint64_t)ts[k].ne[1] * (ts[k].nd > 2 ? (uint64_t)ts[k].ne[2] : 1) *
                        (ts[k].nd > 3 ? (uint64_t)ts[k].ne[3] : 1);
        size_t nb = qk_row_size(ts[k].type, ts[k].ne[0]) * (ts[k].nd > 1 ? rows : 1);
        bufs[k] = malloc(nb + 1);
        for (size_t j = 0; j < nb; j++)
            bufs[k][j] = (uint8_t)tu_rand(&seed);
        cr_assert_eq(qk_gguf_w_data(w, bufs[k], nb, &e), 0, "%s", e.msg);
        cr_assert_eq(qk_gguf_w_end_tensor(w, &e), 0, "%s", e.msg);
    }
    cr_assert_eq(qk_gguf_writer_finish(w, &e), 0, "%s", e.msg);
    qk_gguf_writer_free(w);

    /* read back */
    qk_gguf *g;
    cr_assert_eq(qk_gguf_open(&g, p1, 0, &e), 0, "%s", e.msg);
    cr_assert_eq(g->version, 2);
    cr_assert_eq(g->alignment, 64);
    cr_assert_eq(g->data_offset % 64, 0);
    uint64_t u;
    int64_t i;
    double f;
    bool b;
    qk_str s;
    cr_assert(qk_gguf_get_uint(g, "t.u8", &u) && u == 200);
    cr_assert(qk_gguf_get_int(g, "t.i8", &i) && i == -100);
    cr_assert_not(qk_gguf_get_uint(g, "t.i8", &u)); /* negative */
    cr_assert(qk_gguf_get_uint(g, "t.u16", &u) && u == 65000);
    cr_assert(qk_gguf_get_int(g, "t.i16", &i) && i == -32000);
    cr_assert(qk_gguf_get_uint(g, "t.u32", &u) && u == 4000000000u);
    cr_assert(qk_gguf_get_int(g, "t.i32", &i) && i == -2000000000);
    cr_assert(qk_gguf_get_uint(g, "t.u64", &u) && u == 0xfedcba9876543210ull);
    cr_assert_not(qk_gguf_get_int(g, "t.u64", &i)); /* beyond int64 */
    cr_assert(qk_gguf_get_int(g, "t.i64", &i) && i == INT64_MIN + 5);
    cr_assert(qk_gguf_get_f64(g, "t.f32", &f) && f == -1.5);
    cr_assert(qk_gguf_get_f64(g, "t.f64", &f) && f == 3.141592653589793);
    cr_assert(qk_gguf_get_bool(g, "t.bool", &b) && b);
    cr_assert(qk_gguf_get_bool(g, "t.bool_false", &b) && !b);
    cr_assert(qk_gguf_get_str(g, "t.str", &s) && str_is(s, "h\xc3\xa9llo"));
    cr_assert(qk_gguf_get_str(g, "t.empty", &s) && s.len == 0);
    cr_assert(qk_gguf_get_uint(g, "t.replaced", &u) && u == 99);
    cr_assert(str_is(g->kv[g->n_kv - 2].key, "t.replaced")); /* kept its place before t.after */
    cr_assert(str_is(g->kv[g->n_kv - 1].key, "t.after"));

    /* fixed arrays from raw = {1, 2, 3, 4, 5, 6, ...} little-endian */
    const qk_gguf_kv *kv = qk_gguf_find(g, "a.u8");
    cr_assert(kv && kv->v.arr.n == 3 && qk_gguf_arr_i64(&kv->v, 2) == 3);
    cr_assert_eq(qk_gguf_arr_i64(&qk_gguf_find(g, "a.i8")->v, 1), 2);
    cr_assert_eq(qk_gguf_arr_i64(&qk_gguf_find(g, "a.u16")->v, 1), 0x0403);
    cr_assert_eq(qk_gguf_arr_i64(&qk_gguf_find(g, "a.i16")->v, 0), 0x0201);
    cr_assert_eq(qk_gguf_arr_i64(&qk_gguf_find(g, "a.u32")->v, 1), 0x08070605);
    cr_assert_eq(qk_gguf_arr_i64(&qk_gguf_find(g, "a.i32")->v, 2), 0x0c0b0a09);
    cr_assert_eq(qk_gguf_arr_i64(&qk_gguf_find(g, "a.u64")->v, 1), 0x100f0e0d0c0b0a09ll);
    cr_assert_eq(qk_gguf_arr_i64(&qk_gguf_find(g, "a.i64")->v, 2), 0x7f80ff);
    cr_assert_eq(qk_gguf_arr_i64(&qk_gguf_find(g, "a.bool")->v, 2), 3);
    cr_assert_eq(qk_gguf_find(g, "a.f64")->v.arr.elem, QK_GGUF_F64);
    const qk_gguf_kv *fk = qk_gguf_find(g, "a.floats");
    cr_assert(qk_gguf_arr_f64(&fk->v, 0) == 0.5 && qk_gguf_arr_f64(&fk->v, 1) == -2.0 &&
              qk_gguf_arr_f64(&fk->v, 2) == (double)1e30f);
    cr_assert_eq(qk_gguf_find(g, "a.empty")->v.arr.n, 0);
    const qk_gguf_kv *sk = qk_gguf_find(g, "a.strings");
    cr_assert(sk->v.arr.n == 3 && str_is(sk->v.arr.items[0].s, "one") && str_is(sk->v.arr.items[1].s, "") &&
              str_is(sk->v.arr.items[2].s, "three"));
    const qk_gguf_kv *nk = qk_gguf_find(g, "n.u16");
    cr_assert(nk->v.arr.elem == QK_GGUF_ARRAY && nk->v.arr.n == 3 && nk->v.arr.items);
    cr_assert(nk->v.arr.items[0].arr.n == 2 && qk_gguf_arr_i64(&nk->v.arr.items[0], 1) == 2000);
    cr_assert(nk->v.arr.items[1].arr.n == 0);
    cr_assert(nk->v.arr.items[2].arr.n == 1 && qk_gguf_arr_i64(&nk->v.arr.items[2], 0) == 3000);
    const qk_gguf_kv *n2 = qk_gguf_find(g, "n.str");
    const qk_gguf_value *m0 = &n2->v.arr.items[0];
    cr_assert(m0->arr.elem == QK_GGUF_ARRAY && m0->arr.n == 1);
    cr_assert(m0->arr.items[0].arr.elem == QK_GGUF_STRING && m0->arr.items[0].arr.n == 2);
    cr_assert(str_is(m0->arr.items[0].arr.items[1].s, "yz"));
    cr_assert(n2->v.arr.items[1].arr.elem == QK_GGUF_STRING && n2->v.arr.items[1].arr.n == 0);

    cr_assert_eq(g->n_tensors, nt);
    for (size_t k = 0; k < nt; k++) {
        const qk_gguf_tensor *t = qk_gguf_find_tensor(g, ts[k].name);
        cr_assert(t && t->type == ts[k].type && t->n_dims == ts[k].nd);
        cr_assert_eq(t->offset % 64, 0);
        for (uint32_t j = 0; j < 4; j++)
            cr_assert_eq(t->ne[j], j < ts[k].nd ? ts[k].ne[j] : 1);
        cr_assert_eq(memcmp(t->data, bufs[k], t->nbytes), 0, "tensor %s", ts[k].name);
        free(bufs[k]);
    }
    cr_assert_eq(qk_gguf_find_tensor(g, "q4_K")->nbytes, 4 * 144);
    cr_assert_eq(qk_gguf_find_tensor(g, "empty")->nbytes, 0);

    /* and what was read writes back to the same bytes */
    copy_gguf(g, p2);
    qk_gguf_close(g);
    assert_same_file(p1, p2);
    rmtree(d);
}

Test(gguf, vtype_names)
{
    static const char *want[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                 "bool", "string", "array", "u64", "i64", "f64"};
    for (int t = 0; t < QK_GGUF_VTYPE_COUNT; t++)
        cr_assert_str_eq(qk_gguf_vtype_name(t), want[t]);
    cr_assert_str_eq(qk_gguf_vtype_name(13), "invalid");
    cr_assert_str_eq(qk_gguf_vtype_name(-1), "invalid");
}

Test(gguf, writer_rejects_bad_input)
{
    qk_err e = {0};
    qk_gguf_writer *w = qk_gguf_writer_new(3);
    int64_t ne[4] = {33, 2, 1, 1}, ok[2] = {32, 2}, neg[2] = {4, -1}, big[3] = {1ll << 40, 1ll << 40, 1 << 20};
    cr_assert_eq(qk_gguf_w_tensor(w, "t", QK_Q4_0, 2, ne, &e), QK_EINPUT); /* 33 % 32 */
    cr_assert_eq(qk_gguf_w_tensor(w, "t", 4, 2, ok, &e), QK_EINPUT);       /* removed type */
    cr_assert_eq(qk_gguf_w_tensor(w, "t", QK_F8_E4M3, 2, ok, &e), QK_EINPUT); /* not a GGUF type */
    cr_assert_eq(qk_gguf_w_tensor(w, "t", QK_F32, 0, ok, &e), QK_EINPUT);
    cr_assert_eq(qk_gguf_w_tensor(w, "t", QK_F32, 5, ne, &e), QK_EINPUT);
    cr_assert_eq(qk_gguf_w_tensor(w, "t", QK_F32, 2, neg, &e), QK_EINPUT);
    cr_assert_eq(qk_gguf_w_tensor(w, "t", QK_F32, 3, big, &e), QK_EINPUT);
    char longname[80];
    memset(longname, 'x', 70);
    longname[70] = 0;
    cr_assert_eq(qk_gguf_w_tensor(w, longname, QK_F32, 2, ok, &e), QK_EINPUT);
    cr_assert_eq(qk_gguf_w_kv_u32(w, "general.alignment", 48, &e), QK_EINPUT);
    cr_assert_eq(qk_gguf_w_kv_u64(w, "general.alignment", 32, &e), QK_EINPUT);
    cr_assert_eq(qk_gguf_w_kv_u32(w, "", 1, &e), QK_EINPUT);
    /* data before begin, finish before begin */
    cr_assert_eq(qk_gguf_w_data(w, ok, 4, &e), QK_EINPUT);
    cr_assert_eq(qk_gguf_writer_finish(w, &e), QK_EINPUT);
    qk_gguf_writer_free(w);

    /* duplicate tensor names are refused at begin; nothing is created */
    char *d = tmpdir(), out[256];
    snprintf(out, sizeof out, "%s/dup.gguf", d);
    w = qk_gguf_writer_new(3);
    cr_assert_eq(qk_gguf_w_tensor(w, "a", QK_F32, 2, ok, &e), 0);
    cr_assert_eq(qk_gguf_w_tensor(w, "b", QK_F32, 2, ok, &e), 0);
    cr_assert_eq(qk_gguf_w_tensor(w, "a", QK_F32, 2, ok, &e), 0);
    cr_assert_eq(qk_gguf_w_begin(w, out, &e), QK_EINPUT);
    cr_assert(strstr(e.msg, "'a'"), "%s", e.msg);
    qk_gguf_writer_free(w);
    cr_assert_eq(count_entries(d), 0);

    /* a wrong byte count fails and the output never appears */
    w = qk_gguf_writer_new(3);
    cr_assert_eq(qk_gguf_w_tensor(w, "a", QK_F32, 2, ok, &e), 0);
    cr_assert_eq(qk_gguf_w_begin(w, out, &e), 0, "%s", e.msg);
    float x[64] = {0};
    cr_assert_eq(qk_gguf_w_data(w, x, 100, &e), 0);
    cr_assert_eq(qk_gguf_w_end_tensor(w, &e), QK_EINPUT); /* 256 bytes expected */
    cr_assert_neq(qk_gguf_writer_finish(w, &e), 0);
    qk_gguf_writer_free(w);
    cr_assert_eq(count_entries(d), 0);
    w = qk_gguf_writer_new(3);
    cr_assert_eq(qk_gguf_w_tensor(w, "a", QK_F32, 2, ok, &e), 0);
    cr_assert_eq(qk_gguf_w_begin(w, out, &e), 0, "%s", e.msg);
    cr_assert_eq(qk_gguf_w_data(w, x, 257, &e), QK_EINPUT); /* more than the tensor holds */
    qk_gguf_writer_free(w);
    /* a missing tensor */
    w = qk_gguf_writer_new(3);
    cr_assert_eq(qk_gguf_w_tensor(w, "a", QK_F32, 2, ok, &e), 0);
    cr_assert_eq(qk_gguf_w_begin(w, out, &e), 0, "%s", e.msg);
    cr_assert_eq(qk_gguf_writer_finish(w, &e), QK_EINPUT);
    qk_gguf_writer_free(w);
    cr_assert_eq(count_entries(d), 0);
    rmtree(d);
}

/* ---- split models ------------------------------------------------------------- */

/* Writes PREFIX-0000k-of-00003.gguf; shard k holds tensors 2k, 2k+1. */
static void write_shards(const char *prefix, int bad_no_shard, int tensors_count, const char *dup_name)
{
    qk_err e = {0};
    for (int k = 0; k < 3; k++) {
        char p[512], name[32];
        snprintf(p, sizeof p, "%s-%05d-of-%05d.gguf", prefix, k + 1, 3);
        qk_gguf_writer *w = qk_gguf_writer_new(3);
        uint16_t no = (uint16_t)(k == bad_no_shard ? 0 : k), count = 3;
        int32_t nt = tensors_count;
        if (k == 0)
            cr_assert_eq(qk_gguf_w_kv_str(w, "general.architecture", "llama", &e), 0);
        /* an empty array first: the u16 below replaces it in place */
        cr_assert_eq(qk_gguf_w_kv_arr(w, "split.no", QK_GGUF_U16, &no, 0, &e), 0);
        qk_gguf_kv kv = {.key = {"split.no", 8}, .v = {.type = QK_GGUF_U16, .u = no}};
        cr_assert_eq(qk_gguf_w_kv_copy(w, &kv, &e), 0);
        kv = (qk_gguf_kv){.key = {"split.count", 11}, .v = {.type = QK_GGUF_U16, .u = count}};
        cr_assert_eq(qk_gguf_w_kv_copy(w, &kv, &e), 0);
        cr_assert_eq(qk_gguf_w_kv_i32(w, "split.tensors.count", nt, &e), 0);
        for (int j = 0; j < 2; j++) {
            int64_t ne[2] = {4 + j, 2 + k};
            snprintf(name, sizeof name, "t%d", 2 * k + j);
            cr_assert_eq(qk_gguf_w_tensor(w, k == 2 && j == 1 && dup_name ? dup_name : name, QK_F32, 2, ne, &e),
                         0, "%s", e.msg);
        }
        cr_assert_eq(qk_gguf_w_begin(w, p, &e), 0, "%s", e.msg);
        for (int j = 0; j < 2; j++) {
            float x[5 * 4];
            for (int q = 0; q < (4 + j) * (2 + k); q++)
                x[q] = (float)(100 * (2 * k + j) + q);
            cr_assert_eq(qk_gguf_w_data(w, x, sizeof(float) * (size_t)((4 + j) * (2 + k)), &e), 0);
            cr_assert_eq(qk_gguf_w_end_tensor(w, &e), 0);
        }
        cr_assert_eq(qk_gguf_writer_finish(w, &e), 0, "%s", e.msg);
        qk_gguf_writer_free(w);
    }
}

static void check_split_set(const qk_gguf *g, const char *first)
{
    cr_assert_eq(g->n_shards, 3);
    cr_assert_str_eq(g->path, first);
    cr_assert_eq(g->n_tensors, 6);
    qk_str s;
    cr_assert(qk_gguf_get_str(g, "general.architecture", &s) && str_is(s, "llama")); /* first shard's kvs */
    uint64_t total = 0;
    for (int k = 0; k < 3; k++)
        total += g->maps[k].size;
    cr_assert_eq(g->total_size, total);
    cr_assert_eq(g->file_size, g->maps[0].size);
    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        const qk_gguf_tensor *t = qk_gguf_find_tensor(g, name);
        cr_assert(t, "%s missing", name);
        int k = i / 2, j = i % 2;
        cr_assert_eq(t->shard, k);
        cr_assert(t->ne[0] == 4 + j && t->ne[1] == 2 + k);
        cr_assert(t->data >= g->maps[k].data && t->data + t->nbytes <= g->maps[k].data + g->maps[k].size);
        float x[20];
        memcpy(x, t->data, t->nbytes);
        for (int q = 0; q < (4 + j) * (2 + k); q++)
            cr_assert_eq(x[q], (float)(100 * i + q));
    }
}

Test(gguf, split_model_three_shards)
{
    char *d = tmpdir(), prefix[256], p1[300], p2[300], p3[300];
    snprintf(prefix, sizeof prefix, "%s/model", d);
    snprintf(p1, sizeof p1, "%s-00001-of-00003.gguf", prefix);
    snprintf(p2, sizeof p2, "%s-00002-of-00003.gguf", prefix);
    snprintf(p3, sizeof p3, "%s-00003-of-00003.gguf", prefix);
    write_shards(prefix, -1, 6, NULL);
    qk_gguf *g;
    qk_err e = {0};

    cr_assert_eq(qk_gguf_open(&g, p1, 0, &e), 0, "%s", e.msg);
    check_split_set(g, p1);
    qk_gguf_close(g);
    /* opening a later shard opens the set from the first */
    cr_assert_eq(qk_gguf_open(&g, p2, 0, &e), 0, "%s", e.msg);
    check_split_set(g, p1);
    qk_gguf_close(g);
    /* unless asked for that file alone */
    cr_assert_eq(qk_gguf_open(&g, p2, QK_GGUF_NO_SPLIT, &e), 0, "%s", e.msg);
    cr_assert(g->n_shards == 1 && g->n_tensors == 2 && str_is(g->tensors[0].name, "t2"));
    cr_assert_str_eq(g->path, p2);
    qk_gguf_close(g);

    /* a missing shard is named */
    cr_assert_eq(rename(p3, prefix), 0);
    cr_assert_eq(qk_gguf_open(&g, p1, 0, &e), QK_EINPUT);
    check_msg(&e, p1, "split.count");
    cr_assert(strstr(e.msg, "model-00003-of-00003.gguf"), "%s", e.msg);
    cr_assert_eq(rename(prefix, p3), 0);
    /* a missing first shard too */
    cr_assert_eq(rename(p1, prefix), 0);
    cr_assert_eq(qk_gguf_open(&g, p3, 0, &e), QK_EINPUT);
    check_msg(&e, p3, "split.no");
    cr_assert(strstr(e.msg, "model-00001-of-00003.gguf"), "%s", e.msg);
    rmtree(d);
}

Test(gguf, split_model_inconsistent_shards)
{
    char *d = tmpdir(), prefix[256], p1[300], p2[300], p3[300];
    snprintf(prefix, sizeof prefix, "%s/m", d);
    snprintf(p1, sizeof p1, "%s-00001-of-00003.gguf", prefix);
    snprintf(p2, sizeof p2, "%s-00002-of-00003.gguf", prefix);
    snprintf(p3, sizeof p3, "%s-00003-of-00003.gguf", prefix);
    qk_gguf *g;
    qk_err e = {0};

    write_shards(prefix, 1, 6, NULL); /* shard 2 says split.no 0 */
    cr_assert_eq(qk_gguf_open(&g, p1, 0, &e), QK_EINPUT);
    check_msg(&e, p2, "split.no");

    write_shards(prefix, -1, 7, NULL); /* split.tensors.count 7 */
    cr_assert_eq(qk_gguf_open(&g, p1, 0, &e), QK_EINPUT);
    check_msg(&e, p1, "split.tensors.count");

    write_shards(prefix, -1, 6, "t0"); /* shard 3 repeats shard 1's t0 */
    cr_assert_eq(qk_gguf_open(&g, p1, 0, &e), QK_EINPUT);
    check_msg(&e, p3, "tensor_info[1].name");
    cr_assert(strstr(e.msg, "t0"), "%s", e.msg);
    rmtree(d);
}
