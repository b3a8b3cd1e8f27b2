/* qk-convert against llama.cpp's convert_hf_to_gguf.py: for every case in
 * goldens/convert (see its README), the synthetic Hugging Face directory is
 * rebuilt (lib/convert/conv_synth.h), converted with each option set of the
 * case's expected.txt, and every output file's name and sha256 must be the
 * converter's.  Also: what the converter refuses is refused (exit code 2
 * class errors) without writing anything. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/convert/conv_meta.h"
#include "lib/convert/conv_synth.h"
#include "lib/convert/convert.h"
#include "lib/core/sha256.h"
#include "tests/testutil.h"

#define CASES "goldens/convert"

static void file_sha256(const char *path, char hex[65])
{
    size_t n;
    char *buf = tu_read(path, &n);
    qk_sha256_hex(buf, n, hex);
    free(buf);
}

static char *make_dir(const char *tmp, const char *name)
{
    char *dir = malloc(strlen(tmp) + strlen(name) + 2);
    sprintf(dir, "%s/%s", tmp, name);
    char case_dir[512];
    snprintf(case_dir, sizeof case_dir, CASES "/%s", name);
    qk_err err = {0};
    cr_assert_eq(qk_conv_synth_dir(case_dir, "goldens/vocab/gpt2_vocab.json", "goldens/vocab/gpt2_merges.txt", 1, dir,
                                   &err),
                 0, "%s", err.msg);
    return dir;
}

static int n_threads = 1;

/* Run one option set ("", "--outtype q8_0", "--vocab-only", "--split-max-size 4M"). */
static int run_opts(const char *dir, const char *opts, qk_conv_result *r, qk_err *err)
{
    qk_conv_opts o = {.model_dir = dir, .outtype = QK_CONV_AUTO, .threads = n_threads};
    char buf[128];
    snprintf(buf, sizeof buf, "%s", opts);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        if (!strcmp(tok, "--outtype"))
            o.outtype = qk_conv_outtype_parse(strtok(NULL, " "));
        else if (!strcmp(tok, "--vocab-only"))
            o.vocab_only = true;
        else if (!strcmp(tok, "--split-max-size"))
            cr_assert_eq(qk_conv_parse_size(strtok(NULL, " "), &o.split_max_size), 0);
        else
            cr_assert_fail("expected.txt: unknown option %s", tok);
    }
    return qk_convert(&o, r, err);
}

static void check_case(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, CASES "/%s/expected.txt", name);
    size_t n;
    char *exp = tu_read(path, &n);
    exp = realloc(exp, n + 1);
    exp[n] = '\0';
    char tmpl[] = "/tmp/qk-convert-XXXXXX";
    char *tmp = mkdtemp(tmpl);
    cr_assert(tmp);
    char *dir = make_dir(tmp, name);
    size_t checked = 0;
    for (char *line = exp; *line;) {
        char *nl = strchr(line, '\n');
        cr_assert(nl, "%s: unterminated line", path);
        *nl = '\0';
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        cr_assert(t1 && t2, "%s: bad line '%s'", path, line);
        *t1 = *t2 = '\0';
        const char *opts = line;
        qk_conv_result r;
        qk_err err = {0};
        cr_assert_eq(run_opts(dir, opts, &r, &err), 0, "%s '%s': %s", name, opts, err.msg);
        /* this line and the following ones with the same options are its files */
        for (size_t f = 0; f < r.n_files; f++) {
            cr_assert(t1 && t2, "%s '%s': qk wrote more files than the converter", name, opts);
            const char *file = t1 + 1, *hash = t2 + 1;
            const char *base = strrchr(r.files[f], '/') ? strrchr(r.files[f], '/') + 1 : r.files[f];
            cr_assert_str_eq(base, file, "%s '%s': file name", name, opts);
            char got[65];
            file_sha256(r.files[f], got);
            cr_assert_str_eq(got, hash, "%s '%s': %s differs from the converter's", name, opts, file);
            unlink(r.files[f]);
            checked++;
            line = nl + 1;
            if (f + 1 < r.n_files) {
                nl = strchr(line, '\n');
                cr_assert(nl && !strncmp(line, opts, strlen(opts)) && line[strlen(opts)] == '\t',
                          "%s '%s': the converter wrote fewer files", name, opts);
                *nl = '\0';
                t1 = strchr(line, '\t');
                t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
                *t1 = *t2 = '\0';
            }
        }
        qk_conv_result_free(&r);
    }
    cr_assert_gt(checked, 0, "%s: nothing checked", name);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    cr_assert_eq(system(cmd), 0);
    free(dir);
    free(exp);
}

Test(convert, llama_bf16_every_outtype_vocab_split) { check_case("Llama-Tiny-v1.0-Chat"); }
Test(convert, llama_f16) { check_case("llama-f16"); }
/* the bytes do not depend on the thread count */
Test(convert, llama_f16_three_threads)
{
    n_threads = 3;
    check_case("llama-f16");
}
Test(convert, llama_f32_tied) { check_case("llama-f32"); }
Test(convert, mistral_bf16) { check_case("Mistral-Mini-7B"); }
Test(convert, qwen2_sharded) { check_case("Qwen2-Test-0.5B-Instruct"); }
Test(convert, qwen3_tied) { check_case("qwen3-tiny"); }
Test(convert, mixtral_experts) { check_case("Mixtral-Tiny-v0.1"); }

/* What the converter refuses: an unknown architecture, a missing tokenizer,
 * a tokenizer whose pre-tokenizer hash it does not know. */
Test(convert, refusals)
{
    char tmpl[] = "/tmp/qk-convert-XXXXXX";
    char *tmp = mkdtemp(tmpl);
    char *dir = make_dir(tmp, "llama-f16");
    char p[600], cmd[1300];
    qk_conv_result r;
    qk_err err = {0};
    /* unknown pre-tokenizer: one more merge changes the ids of the check text */
    snprintf(cmd, sizeof cmd, "sed -i 's/\"merges\": \\[/\"merges\": [\"e r\", /' '%s/tokenizer.json'", dir);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(run_opts(dir, "", &r, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "pre-tokenizer not recognized"), "%s", err.msg);
    qk_conv_result_free(&r);
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    unlink(p);
    err = (qk_err){0};
    cr_assert_eq(run_opts(dir, "", &r, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "missing tokenizer.json"), "%s", err.msg);
    qk_conv_result_free(&r);
    snprintf(cmd, sizeof cmd, "sed -i 's/LlamaForCausalLM/FooForCausalLM/' '%s/config.json'", dir);
    cr_assert_eq(system(cmd), 0);
    err = (qk_err){0};
    cr_assert_eq(run_opts(dir, "", &r, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "FooForCausalLM"), "%s", err.msg);
    qk_conv_result_free(&r);
    /* nothing was written */
    DIR *d = opendir(dir);
    for (struct dirent *e; (e = readdir(d));)
        cr_assert(!strstr(e->d_name, ".gguf"), "%s written", e->d_name);
    closedir(d);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}

/* gguf-py's naming heuristics on model ids (values from metadata.py run on them). */
Test(convert, model_id_components)
{
    char *full, *org, *base, *ft, *ver, *size;
    qk_conv_id_components("Mixtral-8x7B-Instruct-v0.1", 0, &full, &org, &base, &ft, &ver, &size);
    cr_assert_str_eq(base, "Mixtral");
    cr_assert_str_eq(size, "8x7B");
    cr_assert_str_eq(ft, "Instruct");
    cr_assert_str_eq(ver, "v0.1");
    free(full), free(org), free(base), free(ft), free(ver), free(size);
    qk_conv_id_components("bigscience/bloom-7b1", 0, &full, &org, &base, &ft, &ver, &size);
    cr_assert_str_eq(org, "bigscience");
    cr_assert_str_eq(base, "bloom");
    cr_assert_str_eq(size, "7.1B");
    free(full), free(org), free(base), free(ft), free(ver), free(size);
    char *t = qk_conv_id_to_title("meta-llama-3.1-8b v2");
    cr_assert_str_eq(t, "Meta Llama 3.1 8b v2");
    free(t);
    char label[32];
    qk_conv_size_label(6493632, label, sizeof label);
    cr_assert_str_eq(label, "6.5M");
    qk_conv_size_label(248000000, label, sizeof label);
    cr_assert_str_eq(label, "248M");
}
