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
#include <sys/wait.h>
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
Test(convert, qwen3moe_experts) { check_case("Qwen3MoE-Tiny"); }
Test(convert, qwen2moe_shared_expert) { check_case("Qwen2MoE-Tiny"); }
Test(convert, gemma2_sentencepiece_softcap) { check_case("Gemma2-Tiny"); }
Test(convert, gemma3_norms_sliding_window) { check_case("Gemma3-Tiny"); }
Test(convert, phi3_longrope_fused) { check_case("Phi3-Tiny"); }
Test(convert, gpt_oss_bf16_experts) { check_case("GptOss-Tiny"); }

/* qk-quant MODEL_DIR OUT TYPE converts and quantizes in one command: the
 * same bytes as qk-convert --outtype f32 (f16 for an F16 directory) and then
 * qk-quant, and no temporary file is left beside OUT. */
static void quant_dir_case(const char *name, const char *outtype, const char *type)
{
    const char *qk = getenv("QK_BIN") ? getenv("QK_BIN") : "build/qk";
    char tmpl[] = "/tmp/qk-convert-XXXXXX";
    char *tmp = mkdtemp(tmpl);
    cr_assert(tmp);
    char *dir = make_dir(tmp, name);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "mkdir '%s/one' '%s/two' && %s quant -q -t 2 '%s' '%s/one/out.gguf' %s && "
             "%s convert -q --outtype %s --outfile '%s/two/float.gguf' '%s' >/dev/null && "
             "%s quant -q -t 1 '%s/two/float.gguf' '%s/two/out.gguf' %s && cmp '%s/one/out.gguf' '%s/two/out.gguf' && "
             "[ \"$(ls -A '%s/one')\" = out.gguf ]",
             tmp, tmp, qk, dir, tmp, type, qk, outtype, tmp, dir, qk, tmp, tmp, type, tmp, tmp, tmp);
    cr_assert_eq(system(cmd), 0, "%s %s: qk-quant MODEL_DIR differs from qk-convert --outtype %s + qk-quant", name, type,
                 outtype);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}

Test(convert, quant_model_dir_bf16_moe) { quant_dir_case("Qwen3MoE-Tiny", "f32", "Q4_K_M"); }
Test(convert, quant_model_dir_f16) { quant_dir_case("llama-f16", "f16", "Q6_K"); }

/* The binaries on a directory the converter refuses: qk-convert and
 * qk-quant MODEL_DIR exit 2 with one line on stderr naming `what`. */
static void cli_refuses(const char *tmp, const char *dir, const char *what)
{
    const char *qk = getenv("QK_BIN") ? getenv("QK_BIN") : "build/qk";
    const char *cmds[2] = {"convert -q '%s'", "quant -q '%s' '%s/q.gguf' Q4_0"};
    for (int i = 0; i < 2; i++) {
        char sub[1200], cmd[4096], errf[600];
        snprintf(sub, sizeof sub, cmds[i], dir, tmp);
        snprintf(errf, sizeof errf, "%s/stderr", tmp);
        snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>'%s'", qk, sub, errf);
        int st = system(cmd);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "qk %s: exit %d, want 2", sub, WEXITSTATUS(st));
        size_t n;
        char *msg = tu_read(errf, &n);
        msg = realloc(msg, n + 1);
        msg[n] = '\0';
        cr_assert(n > 0 && strchr(msg, '\n') == msg + n - 1, "qk %s: stderr is not one line: %s", sub, msg);
        cr_assert(strstr(msg, what), "qk %s: '%s' not named in: %s", sub, what, msg);
        free(msg);
        unlink(errf);
    }
}

/* No .gguf in dir (a refusal writes nothing); then tmp is removed and dir freed. */
static void nothing_written(const char *tmp, char *dir)
{
    DIR *d = opendir(dir);
    cr_assert(d);
    for (struct dirent *e; (e = readdir(d));)
        cr_assert(!strstr(e->d_name, ".gguf"), "%s written", e->d_name);
    closedir(d);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}

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
    cli_refuses(tmp, dir, "pre-tokenizer not recognized");
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    unlink(p);
    err = (qk_err){0};
    cr_assert_eq(run_opts(dir, "", &r, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "missing tokenizer.json"), "%s", err.msg);
    qk_conv_result_free(&r);
    cli_refuses(tmp, dir, "missing tokenizer.json");
    snprintf(cmd, sizeof cmd, "sed -i 's/LlamaForCausalLM/FooForCausalLM/' '%s/config.json'", dir);
    cr_assert_eq(system(cmd), 0);
    err = (qk_err){0};
    cr_assert_eq(run_opts(dir, "", &r, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "FooForCausalLM"), "%s", err.msg);
    qk_conv_result_free(&r);
    cli_refuses(tmp, dir, "FooForCausalLM");
    nothing_written(tmp, dir);
}

/* The classes whose set_vocab needs a SentencePiece tokenizer.model
 * (Gemma2Model always, Phi3MiniModel unless the class is GPT2Tokenizer):
 * without one the converter stops, and so does qk, writing nothing. */
Test(convert, refusals_missing_sentencepiece)
{
    const char *cases[2] = {"Gemma2-Tiny", "Phi3-Tiny"};
    for (int c = 0; c < 2; c++) {
        char tmpl[] = "/tmp/qk-convert-XXXXXX";
        char *tmp = mkdtemp(tmpl);
        char *dir = make_dir(tmp, cases[c]);
        char p[600], cmd[1300];
        snprintf(p, sizeof p, "%s/%s", dir, c == 0 ? "tokenizer.model" : "tokenizer_config.json");
        if (c == 1) {
            snprintf(cmd, sizeof cmd, "sed -i 's/GPT2Tokenizer/LlamaTokenizer/' '%s'", p);
            cr_assert_eq(system(cmd), 0);
        } else {
            cr_assert_eq(unlink(p), 0);
        }
        qk_conv_result r;
        qk_err err = {0};
        cr_assert_eq(run_opts(dir, "", &r, &err), QK_EINPUT, "%s", cases[c]);
        cr_assert(strstr(err.msg, "missing tokenizer.model"), "%s: %s", cases[c], err.msg);
        qk_conv_result_free(&r);
        cli_refuses(tmp, dir, "missing tokenizer.model");
        nothing_written(tmp, dir);
    }
}

/* A truncated tokenizer.model: one line naming the file and the offset. */
Test(convert, truncated_sentencepiece)
{
    char tmpl[] = "/tmp/qk-convert-XXXXXX";
    char *tmp = mkdtemp(tmpl);
    char *dir = make_dir(tmp, "Gemma2-Tiny");
    char p[600];
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    cr_assert_eq(truncate(p, 1000), 0);
    qk_conv_result r;
    qk_err err = {0};
    cr_assert_eq(run_opts(dir, "", &r, &err), QK_EINPUT);
    cr_assert(strstr(err.msg, "tokenizer.model") && strstr(err.msg, "malformed protobuf"), "%s", err.msg);
    qk_conv_result_free(&r);
    nothing_written(tmp, dir);
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
