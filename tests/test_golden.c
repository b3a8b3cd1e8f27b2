/* Bit-exactness against ggml: for every TYPE.MODE.q in goldens/ggml (made by
 * ggml_quantize_chunk at llama.cpp d32676d, see goldens/ggml/README.md),
 * encoding input.f32 (8 x 4096, with imatrix.f32 for MODE=imatrix) must give
 * the file byte for byte, and decoding the file must give TYPE.MODE.deq.f32
 * bit for bit.  Also: encoding with 1, 2 and 7 threads gives identical bytes. */
#include <string.h>
#include <strings.h>

#include "kernels/quantize.h"
#include "tests/testutil.h"
#include "kernels/types.h"

#define ROWS 8
#define COLS 4096
#define G "goldens/ggml/"

static int first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (int)i;
    return -1;
}

static void check_mode(const char *name, const char *mode)
{
    char path[256];
    snprintf(path, sizeof path, G "%s.%s.q", name, mode);
    FILE *probe = fopen(path, "rb");
    if (!probe)
        return; /* this type has no golden for the mode (see README) */
    fclose(probe);

    const qk_type_traits *t = qk_type_by_name(name);
    cr_assert(t, "%s not in the table", name);
    size_t in_n, im_n, q_n, d_n;
    float *in = tu_read(G "input.f32", &in_n);
    float *im = tu_read(G "imatrix.f32", &im_n);
    uint8_t *want = tu_read(path, &q_n);
    snprintf(path, sizeof path, G "%s.%s.deq.f32", name, mode);
    float *want_deq = tu_read(path, &d_n);
    cr_assert_eq(in_n, ROWS * COLS * 4);
    cr_assert_eq(q_n, qk_row_size(t->id, COLS) * ROWS);

    const float *imatrix = strcmp(mode, "imatrix") == 0 ? im : NULL;
    uint8_t *got = calloc(1, q_n);
    qk_err err = {0};
    cr_assert_eq(qk_quantize_rows(t->id, in, got, ROWS, COLS, imatrix, 1, &err), 0, "%s", err.msg);
    int d = first_diff(got, want, q_n);
    cr_expect_eq(d, -1, "%s.%s encode differs first at byte %d (row %d)", name, mode, d,
                 d < 0 ? -1 : d / (int)qk_row_size(t->id, COLS));

    /* thread-count independence */
    uint8_t *got_t = calloc(1, q_n);
    for (int nt = 2; nt <= 7; nt += 5) {
        memset(got_t, 0xA5, q_n);
        cr_assert_eq(qk_quantize_rows(t->id, in, got_t, ROWS, COLS, imatrix, nt, &err), 0);
        cr_expect(memcmp(got, got_t, q_n) == 0, "%s.%s: %d threads differ", name, mode, nt);
    }

    float *deq = calloc(ROWS * COLS, sizeof(float));
    cr_assert_eq(qk_dequantize_rows(t->id, want, deq, ROWS, COLS, 1, &err), 0, "%s", err.msg);
    d = first_diff((uint8_t *)deq, (uint8_t *)want_deq, d_n);
    cr_expect_eq(d, -1, "%s.%s decode differs first at element %d", name, mode, d < 0 ? -1 : d / 4);

    free(in), free(im), free(want), free(want_deq), free(got), free(got_t), free(deq);
}

#define GOLDEN(nm)                          \
    Test(golden, nm)                        \
    {                                       \
        check_mode(#nm, "plain");           \
        check_mode(#nm, "imatrix");         \
    }

GOLDEN(f16)
GOLDEN(bf16)
GOLDEN(q4_0)
GOLDEN(q4_1)
GOLDEN(q5_0)
GOLDEN(q5_1)
GOLDEN(q8_0)
GOLDEN(q2_K)
GOLDEN(q3_K)
GOLDEN(q4_K)
GOLDEN(q5_K)
GOLDEN(q6_K)
GOLDEN(iq2_xxs)
GOLDEN(iq2_xs)
GOLDEN(iq2_s)
GOLDEN(iq3_xxs)
GOLDEN(iq3_s)
GOLDEN(iq1_s)
GOLDEN(iq1_m)
GOLDEN(iq4_nl)
GOLDEN(iq4_xs)
GOLDEN(tq1_0)
GOLDEN(tq2_0)
GOLDEN(mxfp4)
GOLDEN(nvfp4)
GOLDEN(q1_0)
GOLDEN(q2_0)

/* Every golden file in the manifest is covered by a test above. */
Test(golden, manifest_covered)
{
    static const char *covered[] = {"f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
        "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs",
        "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs", "tq1_0", "tq2_0", "mxfp4", "nvfp4",
        "q1_0", "q2_0"};
    FILE *f = fopen(G "manifest.tsv", "r");
    cr_assert(f);
    char line[512];
    int rows = 0;
    cr_assert(fgets(line, sizeof line, f)); /* header */
    while (fgets(line, sizeof line, f)) {
        char name[64];
        cr_assert_eq(sscanf(line, "%63s", name), 1);
        bool found = false;
        for (size_t i = 0; i < sizeof covered / sizeof covered[0]; i++)
            found |= strcmp(covered[i], name) == 0;
        cr_expect(found, "manifest type %s has no golden test", name);
        rows++;
    }
    fclose(f);
    cr_expect_eq(rows, 49);
}
