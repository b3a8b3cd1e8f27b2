/* fuzz_kldbase.c - libFuzzer harness for the KL-divergence base files
 * (lib/eval/kldbase.c): llama-perplexity's --kl-divergence-base layout and
 * qk's (quantized and factored encodings, chunk index, trailer).  An opened
 * file has a consistent header; the rows of its first and last chunk read
 * back (or fail as bad input, for a corrupt frame), and are log-probabilities
 * (no NaN, at most 0). */
#include <math.h>

#include "lib/eval/kldbase.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    qk_err err = {0};
    qk_kldb_reader *r = NULL;
    int rc = qk_kldb_open(&r, path, &err);
    if (rc) {
        fuzz_refused(rc, &err, path);
        return 0;
    }
    const qk_kldb_info *in = qk_kldb_reader_info(r);
    if (in->n_ctx < 4 || in->n_vocab < 2 || in->n_chunk < 1 || in->rows != in->n_ctx - 1 - in->n_ctx / 2 ||
        !in->tokens)
        abort();
    float *lp = malloc((size_t)in->n_vocab * 2 * sizeof *lp);
    if (!lp)
        abort();
    const int chunks[2] = {in->n_chunk - 1, 0};
    for (int c = 0; c < 2 && !rc; c++) {
        if ((rc = qk_kldb_seek_chunk(r, chunks[c], &err)))
            break;
        for (int row = 0; row < in->rows && row < 4 && !rc; row++) {
            if ((rc = row == 1 && in->rows > 2 ? qk_kldb_read_rows(r, 2, lp, &err) : qk_kldb_read_row(r, lp, &err)))
                break;
            row += row == 1 && in->rows > 2;
            for (int i = 0; i < in->n_vocab; i++)
                if (!(lp[i] <= 1e-3f)) /* the reader refuses rows that are not log-probabilities */
                    abort();
        }
    }
    if (rc)
        fuzz_refused(rc, &err, path);
    free(lp);
    qk_kldb_close(r);
    return 0;
}
