/* conv-synth.c - writes a synthetic Hugging Face directory from a case
 * folder (lib/convert/conv_synth.h) for tools/gen_convert_goldens.py
 * (make crosscheck) and tools/bench-convert.sh (make bench): not installed,
 * not a command.
 *
 *   conv-synth CASE_DIR OUT_DIR [SEED]
 * The GPT-2 tokenizer comes from goldens/vocab (run from the repository root). */
#include <stdio.h>
#include <stdlib.h>

#include "lib/convert/conv_synth.h"

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: conv-synth CASE_DIR OUT_DIR [SEED]\n");
        return 2;
    }
    qk_err err = {0};
    unsigned long long seed = argc == 4 ? strtoull(argv[3], NULL, 10) : 1;
    if (qk_conv_synth_dir(argv[1], "goldens/vocab/gpt2_vocab.json", "goldens/vocab/gpt2_merges.txt", seed, argv[2], &err))
        return qk_err_report("conv-synth", &err);
    return 0;
}
