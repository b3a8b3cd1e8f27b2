/* fuzz_safetensors.c - libFuzzer harness for the safetensors reader (and
 * through it the JSON parser).  A file that opens must be self-consistent:
 * every tensor inside the buffer, sizes matching shapes, data covered
 * exactly; a file that does not open must say why in the usual form. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    qk_err err = {0};
    qk_st *st = NULL;
    int rc = qk_st_open_mem(&st, data, size, "fuzz", &err);
    if (rc) {
        if (rc != QK_EINPUT || strncmp(err.msg, "fuzz: ", 6) != 0 || !strstr(err.msg, " at offset "))
            abort();
        return 0;
    }
    uint64_t covered = 0;
    for (size_t i = 0; i < st->n_tensors; i++) {
        const qk_st_tensor *t = &st->tensors[i];
        if (t->end > st->data_size || t->end - t->begin != t->nbytes || t->data != data + st->data_start + t->begin)
            abort();
        covered += t->nbytes;
        if (t->nbytes) { /* touch the first and last byte */
            volatile uint8_t x = t->data[0] ^ t->data[t->nbytes - 1];
            (void)x;
        }
        if (t->name_len == strlen(t->name) && qk_st_find(st, t->name) == NULL)
            abort();
    }
    if (covered != st->data_size)
        abort();
    for (size_t i = 0; i < st->n_meta; i++)
        if (!st->meta[i].key || !st->meta[i].value)
            abort();
    qk_st_close(st);
    return 0;
}
