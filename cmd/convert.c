/* convert.c - qk-convert: a Hugging Face model directory to GGUF, the same
 * bytes as llama.cpp's convert_hf_to_gguf.py (lib/convert/convert.h). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "lib/convert/convert.h"
#include "lib/core/cli.h"
#include "lib/core/json.h"

static const char usage_text[] =
    "usage: qk-convert [options] MODEL_DIR\n"
    "\n"
    "Convert a Hugging Face model directory (config.json, safetensors, tokenizer.json) to GGUF,\n"
    "byte-identical to llama.cpp's convert_hf_to_gguf.py with the same options. Reproduced:\n"
    "LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,\n"
    "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM,\n"
    "Phi3ForCausalLM and GptOssForCausalLM (BF16 experts) with F32, F16 or BF16 safetensors\n"
    "(sharded or not) and a byte-level BPE tokenizer.json (Gemma: also SentencePiece\n"
    "tokenizer.model).  What the converter refuses, or qk does not reproduce yet (tokenizer.model\n"
    "outside Gemma, llama3 rope scaling, MXFP4 experts, model card front matter), is refused\n"
    "with one line; nothing is written then.\n"
    "\n"
    "  --outfile F          output file; default MODEL_DIR/<Name>-<Size>-<TYPE>.gguf as the\n"
    "                       converter names it; {ftype} in F becomes the output type\n"
    "  --outtype T          f32, f16, bf16, q8_0 or auto (default auto: BF16 or F16 as the\n"
    "                       first matrix is stored, else F16)\n"
    "  --vocab-only         write only the tokenizer and metadata\n"
    "  --split-max-size N   split into files of at most N bytes of tensors (N, NK, NM, NG)\n"
    "  --dry-run            print the file names that would be written, write nothing\n"
    "  --json               one JSON document on stdout (schema in qk-convert(1))\n"
    "  -t, --threads N      threads converting each row block (0 = all CPUs; default 1);\n"
    "                       the bytes do not depend on it\n"
    "  -q, --quiet          no progress bar\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit codes: 0 ok, 2 usage or input error (also: what the converter would refuse), 3 I/O error.\n";

static void print_json(const qk_conv_result *r, bool dry_run)
{
    qk_json j;
    qk_json_init(&j, stdout, true);
    qk_json_obj(&j);
    qk_json_key(&j, "architecture");
    qk_json_str(&j, r->arch);
    qk_json_key(&j, "hf_architecture");
    qk_json_str(&j, r->hf_arch);
    qk_json_key(&j, "pre_tokenizer");
    qk_json_str(&j, r->pre);
    qk_json_key(&j, "outtype");
    qk_json_str(&j, r->outtype);
    qk_json_key(&j, "parameters");
    qk_json_int(&j, r->n_params);
    qk_json_key(&j, "tensors");
    qk_json_uint(&j, r->n_tensors);
    qk_json_key(&j, "tensor_bytes");
    qk_json_uint(&j, r->n_bytes);
    qk_json_key(&j, "dry_run");
    qk_json_bool(&j, dry_run);
    qk_json_key(&j, "files");
    qk_json_arr(&j);
    for (size_t i = 0; i < r->n_files; i++)
        qk_json_str(&j, r->files[i]);
    qk_json_end_arr(&j);
    qk_json_end_obj(&j);
    qk_json_done(&j);
}

int cmd_convert(int argc, char **argv)
{
    enum { O_OUTFILE = 256, O_OUTTYPE, O_VOCAB_ONLY, O_SPLIT, O_DRY_RUN, O_JSON };
    static const struct option opts[] = {
        {"outfile", required_argument, 0, O_OUTFILE},   {"outtype", required_argument, 0, O_OUTTYPE},
        {"vocab-only", no_argument, 0, O_VOCAB_ONLY},   {"split-max-size", required_argument, 0, O_SPLIT},
        {"dry-run", no_argument, 0, O_DRY_RUN},         {"json", no_argument, 0, O_JSON},
        {"threads", required_argument, 0, 't'},         {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},                  {0, 0, 0, 0}};
    qk_conv_opts o = {.outtype = QK_CONV_AUTO, .threads = 1};
    bool json = false, quiet = false;
    qk_err err = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "t:qh", opts, NULL)) != -1) {
        switch (c) {
        case O_OUTFILE: o.outfile = optarg; break;
        case O_OUTTYPE:
            if ((o.outtype = qk_conv_outtype_parse(optarg)) == -2) {
                fprintf(stderr, "%s: --outtype '%s': f32, f16, bf16, q8_0 or auto\n", argv[0], optarg);
                return 2;
            }
            break;
        case O_VOCAB_ONLY: o.vocab_only = true; break;
        case O_SPLIT:
            if (qk_conv_parse_size(optarg, &o.split_max_size)) {
                fprintf(stderr, "%s: --split-max-size '%s': a number, optionally followed by K, M or G\n", argv[0],
                        optarg);
                return 2;
            }
            break;
        case O_DRY_RUN: o.dry_run = true; break;
        case O_JSON: json = true; break;
        case 't':
            if (qk_cli_threads(optarg, &o.threads, &err))
                return qk_err_report(argv[0], &err);
            break;
        case 'q': quiet = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return qk_cli_bad_option(argv[0], argv, optind);
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "%s: need one MODEL_DIR; see --help\n", argv[0]);
        return 2;
    }
    o.model_dir = argv[optind];
    o.progress = !quiet && !json && isatty(2);
    qk_conv_result r;
    int rc = qk_convert(&o, &r, &err);
    if (rc) {
        qk_conv_result_free(&r);
        return qk_err_report(argv[0], &err);
    }
    if (json)
        print_json(&r, o.dry_run);
    else
        for (size_t i = 0; i < r.n_files; i++)
            printf("%s\n", r.files[i]);
    qk_conv_result_free(&r);
    return 0;
}
