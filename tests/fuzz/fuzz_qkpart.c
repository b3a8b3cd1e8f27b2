/* fuzz_qkpart.c - libFuzzer harness for qk-kld's partial-results files
 * (.qkpart, lib/eval/kldstats.c): header validation, then the records
 * replayed into an accumulator and the final statistics computed. */
#include "lib/eval/kldstats.h"
#include "tests/fuzz/fuzz_util.h"

static volatile int sink;

static void on_chunk(void *ud, int chunk_no, const qk_kld_acc *a)
{
    qk_kld_print_chunk(ud, a, chunk_no);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    qk_err err = {0};
    qk_part_info info;
    int rc = qk_part_read_info(path, &info, &err);
    if (rc) {
        fuzz_refused(rc, &err, path);
        return 0;
    }
    if (info.chunk_a < 0 || info.chunk_b <= info.chunk_a || info.chunk_b > info.n_chunk)
        abort();
    qk_kld_acc a;
    qk_kld_acc_init(&a, info.mode, false);
    FILE *devnull = fopen("/dev/null", "w");
    rc = qk_part_replay(path, &info, &a, on_chunk, devnull, &err);
    if (rc)
        fuzz_refused(rc, &err, path);
    else if (a.count && a.mode == QK_KLD_MODE_KLD) {
        qk_kld_summary s;
        qk_kld_summarize(&a, &s);
        qk_kld_print_summary(devnull, &s);
    } else if (a.count) {
        double ppl, e;
        sink += qk_kld_final_ppl(&a, &ppl, &e);
    }
    fclose(devnull);
    qk_kld_acc_free(&a);
    return 0;
}
