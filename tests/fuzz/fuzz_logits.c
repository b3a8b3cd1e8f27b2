/* fuzz_logits.c - libFuzzer harness for the QKLOGITS reader (qk-run
 * --logits-out files, lib/eval/logits_file.c): header, zstd stream of rows,
 * token trailer.  Every row of an opened file reads back, or the reader
 * refuses as bad input; nothing is read past n_tokens rows. */
#include "lib/eval/logits_file.h"
#include "tests/fuzz/fuzz_util.h"

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    qk_err err = {0};
    qk_logits_reader *r = NULL;
    int rc = qk_logits_open(&r, path, &err);
    if (rc) {
        fuzz_refused(rc, &err, path);
        return 0;
    }
    if (r->n_vocab < 1 || !r->tokens)
        abort();
    float *row = malloc((size_t)r->n_vocab * sizeof *row);
    if (!row)
        abort();
    for (uint32_t i = 0; i < r->n_tokens && !rc; i++)
        if (!(rc = qk_logits_next(r, row, &err)))
            sink += row[0] + row[r->n_vocab - 1];
    if (rc)
        fuzz_refused(rc, &err, path);
    else if (qk_logits_next(r, row, &err) == 0) /* one row too many */
        abort();
    free(row);
    qk_logits_close(r);
    return 0;
}
