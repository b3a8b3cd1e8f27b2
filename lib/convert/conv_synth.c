/* conv_synth.c - synthetic Hugging Face directories (conv_synth.h). */
#include "lib/convert/conv_synth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/safetensors.h"
#include "kernels/half.h"
#include "lib/core/files.h"
#include "lib/core/outfile.h"
#include "lib/core/strbuf.h"

typedef struct synth_t {
    char file[128], name[160], dtype[8];
    int n_dims;
    int64_t shape[4];
} synth_t;

static uint64_t next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int write_text(const char *dir, const char *name, const char *text, size_t n, qk_err *err)
{
    char *p = qk_path_join(dir, name);
    if (!p)
        return qk_errf(err, QK_EIO, "out of memory");
    int rc = qk_out_write_file(p, text, n, err);
    free(p);
    return rc;
}

static int copy_in(const char *case_dir, const char *out_dir, const char *name, bool optional, qk_err *err)
{
    char *src = qk_path_join(case_dir, name), *buf = NULL;
    size_t n = 0;
    int rc = src ? qk_read_file(src, optional, &buf, &n, err) : qk_errf(err, QK_EIO, "out of memory");
    if (!rc && buf)
        rc = write_text(out_dir, name, buf, n, err);
    free(buf);
    free(src);
    return rc;
}

/* tokenizer.json of GPT-2's vocab.json and merges.txt, laid out as the
 * tokenizers library writes a byte-level BPE. */
static int write_tokenizer(const char *out_dir, const char *vocab_json, const char *merges_txt, qk_err *err)
{
    char *vocab = NULL, *merges = NULL;
    size_t nv = 0, nm = 0;
    int rc = qk_read_file(vocab_json, false, &vocab, &nv, err);
    if (!rc)
        rc = qk_read_file(merges_txt, false, &merges, &nm, err);
    qk_sbuf b = {0};
    if (!rc) {
        qk_sb_printf(&b, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [{\"id\": 50256, "
                         "\"content\": \"<|endoftext|>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                         "\"normalized\": false, \"special\": true}], \"normalizer\": null, \"pre_tokenizer\": {\"type\": "
                         "\"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}, "
                         "\"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": false, "
                         "\"use_regex\": true}, \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
                         "\"trim_offsets\": true, \"use_regex\": true}, \"model\": {\"type\": \"BPE\", \"dropout\": null, "
                         "\"unk_token\": null, \"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, "
                         "\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false, \"vocab\": ");
        qk_sb_printf(&b, "%.*s, \"merges\": [", (int)nv, vocab);
        size_t k = 0;
        for (char *line = merges, *end = merges + nm; line < end;) {
            char *nl = memchr(line, '\n', (size_t)(end - line));
            size_t len = nl ? (size_t)(nl - line) : (size_t)(end - line);
            if (len && line[0] != '#') {
                char *piece = strndup(line, len);
                qk_sb_printf(&b, "%s", k++ ? ", " : "");
                qk_sb_jstr(&b, piece);
                free(piece);
            }
            line += len + 1;
        }
        qk_sb_printf(&b, "]}}\n");
        rc = b.bad ? qk_errf(err, QK_EIO, "out of memory") : write_text(out_dir, "tokenizer.json", b.s, b.n, err);
    }
    static const char config[] = "{\n  \"bos_token\": \"<|endoftext|>\",\n  \"eos_token\": \"<|endoftext|>\",\n"
                                 "  \"model_max_length\": 1024,\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n"
                                 "  \"unk_token\": \"<|endoftext|>\"\n}\n";
    if (!rc)
        rc = write_text(out_dir, "tokenizer_config.json", config, sizeof config - 1, err);
    free(b.s);
    free(vocab);
    free(merges);
    return rc;
}

static int read_manifest(const char *case_dir, synth_t **out, size_t *n_out, qk_err *err)
{
    char *p = qk_path_join(case_dir, "tensors.txt"), *buf = NULL;
    size_t n = 0;
    int rc = p ? qk_read_file(p, false, &buf, &n, err) : qk_errf(err, QK_EIO, "out of memory");
    synth_t *t = NULL;
    size_t k = 0;
    for (char *line = buf, *end = buf + n; !rc && line && line < end;) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        if (nl)
            *nl = '\0';
        if (*line) {
            synth_t *g = realloc(t, (k + 1) * sizeof *t);
            if (!g) {
                rc = qk_errf(err, QK_EIO, "out of memory");
                break;
            }
            t = g;
            synth_t *s = &t[k];
            memset(s, 0, sizeof *s);
            long long d[4];
            int got = sscanf(line, "%127s %159s %7s %lld %lld %lld %lld", s->file, s->name, s->dtype, &d[0], &d[1], &d[2], &d[3]);
            if (got < 4)
                rc = qk_errf(err, QK_EINPUT, "%s: bad line '%s'", p, line);
            s->n_dims = got - 3;
            for (int i = 0; i < s->n_dims; i++)
                s->shape[i] = d[i];
            k++;
        }
        line = nl ? nl + 1 : end;
    }
    free(buf);
    free(p);
    *out = t;
    *n_out = k;
    return rc;
}

static int write_shard(const char *out_dir, const char *file, const synth_t *t, size_t n, uint64_t *seed, qk_err *err)
{
    qk_st_writer *w = qk_st_writer_new(QK_ST_W_SORT);
    if (!w)
        return qk_errf(err, QK_EIO, "out of memory");
    int rc = qk_st_w_meta(w, "format", "pt", err);
    for (size_t i = 0; i < n && !rc; i++)
        if (!strcmp(t[i].file, file))
            rc = qk_st_w_tensor(w, t[i].name, t[i].dtype, t[i].n_dims, t[i].shape, NULL, err);
    char *path = qk_path_join(out_dir, file);
    if (!rc)
        rc = qk_st_w_begin(w, path, err);
    /* the tensors in the writer's order, each from its own seed */
    for (size_t k = 0; k < qk_st_w_count(w) && !rc; k++) {
        const synth_t *s = NULL;
        for (size_t i = 0; i < n && !s; i++)
            if (!strcmp(t[i].file, file) && !strcmp(t[i].name, qk_st_w_name(w, k)))
                s = &t[i];
        uint64_t nel = 1, st = *seed;
        for (int d = 0; d < s->n_dims; d++)
            nel *= (uint64_t)s->shape[d];
        for (const char *c = s->name; *c; c++)
            st = st * 131 + (uint8_t)*c;
        bool norm = strstr(s->name, "norm") != NULL;
        size_t es = !strcmp(s->dtype, "F32") ? 4 : 2;
        uint8_t buf[4096];
        size_t fill = 0;
        for (uint64_t e = 0; e < nel && !rc; e++) {
            float u = (float)((double)(next(&st) >> 11) / 9007199254740992.0) * 0.1f - 0.05f;
            float v = norm ? 1.0f + u : u;
            if (es == 4) {
                memcpy(buf + fill, &v, 4);
            } else {
                uint16_t h = !strcmp(s->dtype, "BF16") ? qk_f32_to_bf16(v) : qk_f32_to_f16(v);
                memcpy(buf + fill, &h, 2);
            }
            fill += es;
            if (fill == sizeof buf || e + 1 == nel) {
                rc = qk_st_w_data(w, buf, fill, err);
                fill = 0;
            }
        }
    }
    if (!rc)
        rc = qk_st_writer_finish(w, err);
    qk_st_writer_free(w);
    free(path);
    return rc;
}

int qk_conv_synth_dir(const char *case_dir, const char *vocab_json, const char *merges_txt, uint64_t seed,
                      const char *out_dir, qk_err *err)
{
    if (mkdir(out_dir, 0755) && errno != EEXIST)
        return qk_err_sys(err, out_dir, "mkdir");
    synth_t *t = NULL;
    size_t n = 0;
    int rc = read_manifest(case_dir, &t, &n, err);
    if (!rc)
        rc = copy_in(case_dir, out_dir, "config.json", false, err);
    if (!rc)
        rc = copy_in(case_dir, out_dir, "generation_config.json", true, err);
    /* a case may name a folder (relative to it) with its own tokenizer */
    char *tp = rc ? NULL : qk_path_join(case_dir, "tokenizer_dir"), *tdir = NULL;
    size_t tn = 0;
    if (!rc && tp)
        rc = qk_read_file(tp, true, &tdir, &tn, err);
    if (!rc && tdir) {
        while (tn && (tdir[tn - 1] == '\n' || tdir[tn - 1] == ' '))
            tdir[--tn] = '\0';
        char *from = qk_path_join(case_dir, tdir);
        /* tokenizer.json and/or a SentencePiece tokenizer.model, and tokenizer_config.json */
        rc = from ? copy_in(from, out_dir, "tokenizer.json", true, err) : qk_errf(err, QK_EIO, "out of memory");
        if (!rc)
            rc = copy_in(from, out_dir, "tokenizer.model", true, err);
        if (!rc)
            rc = copy_in(from, out_dir, "tokenizer_config.json", false, err);
        free(from);
    } else if (!rc) {
        rc = write_tokenizer(out_dir, vocab_json, merges_txt, err);
        /* a case's own tokenizer_config.json (Phi-3's GPT2Tokenizer class) replaces the default one */
        if (!rc)
            rc = copy_in(case_dir, out_dir, "tokenizer_config.json", true, err);
    }
    free(tp);
    free(tdir);
    /* the distinct files, in order of first mention */
    size_t n_files = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        bool seen = false;
        for (size_t j = 0; j < i; j++)
            seen = seen || !strcmp(t[j].file, t[i].file);
        if (!seen) {
            n_files++;
            rc = write_shard(out_dir, t[i].file, t, n, &seed, err);
        }
    }
    if (!rc && n_files > 1) {
        qk_sbuf b = {0};
        qk_sb_printf(&b, "{\"metadata\": {}, \"weight_map\": {");
        for (size_t i = 0; i < n; i++) {
            qk_sb_printf(&b, "%s", i ? ", " : "");
            qk_sb_jstr(&b, t[i].name);
            qk_sb_printf(&b, ": ");
            qk_sb_jstr(&b, t[i].file);
        }
        qk_sb_printf(&b, "}}\n");
        rc = write_text(out_dir, "model.safetensors.index.json", b.s, b.n, err);
        free(b.s);
    }
    free(t);
    return rc;
}
