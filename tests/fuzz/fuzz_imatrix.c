/* fuzz_imatrix.c - libFuzzer harness for the importance-matrix readers
 * (lib/quant/imatrix.c): llama-imatrix's GGUF files and the legacy .dat
 * layout, the normalisation, sorting and the include/exclude filter.  A
 * loaded matrix has sorted unique names and finite-or-reported values. */
#include "lib/quant/imatrix.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    qk_err err = {0};
    qk_imatrix *m = NULL;
    int rc = qk_imatrix_load(&m, path, &err);
    if (rc) {
        fuzz_refused(rc, &err, path);
        return 0;
    }
    for (size_t i = 0; i < m->n; i++) {
        if (!m->e[i].name || (m->e[i].n && !m->e[i].values))
            abort();
        if (i && strcmp(m->e[i - 1].name, m->e[i].name) >= 0)
            abort();
        if (qk_imatrix_find(m, m->e[i].name) != &m->e[i])
            abort();
    }
    static const char *const inc[] = {"attn"}, *const exc[] = {"ffn_down", "output"};
    qk_imatrix_filter(m, inc, 1, exc, 2);
    qk_imatrix_free(m);
    return 0;
}
