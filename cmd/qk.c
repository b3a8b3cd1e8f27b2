/* qk.c - the multi-call entry point: `qk CMD ...` and `qk-CMD ...` are one. */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "lib/core/outfile.h"

#ifndef QK_VERSION
#define QK_VERSION "0.1.0"
#endif

static const struct command {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} commands[] = {
    {"help", NULL, "list the commands"},
    {"inspect", cmd_inspect, "look inside GGUF and safetensors checkpoints; compare two"},
    {"quant", cmd_quant, "quantize GGUF models like llama-quantize (same bytes); encode/decode tensors"},
    {"run", cmd_run, "run a model: generate text, write logits, tokenize"},
    {"kld", cmd_kld, "perplexity and KL-divergence against a reference"},
    {"bench", cmd_bench, "speed and numerics benchmarks"},
    {"imatrix", cmd_imatrix, "importance matrices from calibration text, as llama-imatrix makes them"},
    {"convert", cmd_convert, "Hugging Face directory to GGUF, as convert_hf_to_gguf.py writes it"},
    {"report", cmd_report, "many models against a base: table, JSON, HTML and plots; sharded plans"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: qk COMMAND [ARGS...]   (or qk-COMMAND [ARGS...])\n\ncommands:\n");
    for (size_t i = 1; i < N_COMMANDS; i++) /* [0] is help itself */
        if (commands[i].fn)
            fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'qk COMMAND --help' describes each; 'man qk-COMMAND' has the details.\n");
}

static int run(const char *name, int argc, char **argv)
{
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0 && (i == 0 || commands[i].fn)) {
            if (!commands[i].fn) {
                usage(stdout);
                return 0;
            }
            char display[64];
            snprintf(display, sizeof display, "qk-%s", name);
            argv[0] = display;
            return commands[i].fn(argc, argv);
        }
    }
    fprintf(stderr, "qk: '%s' is not a qk command; see 'qk --help'\n", name);
    return 2;
}

int main(int argc, char **argv)
{
    qk_out_init(); /* past `ulimit -f` a write fails with EFBIG instead of a silent SIGXFSZ */
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (strncmp(base, "qk-", 3) == 0)
        return run(base + 3, argc, argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("qk %s\n", QK_VERSION);
        return 0;
    }
    return run(argv[1], argc - 1, argv + 1);
}
