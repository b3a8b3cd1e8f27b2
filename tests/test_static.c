/* Static activation scales from calibration (lib/quant/ckpt_static.h):
 * qk-quant --to ct-fp8-static / ct-nvfp4a4 / ct-w8a8-static /
 * modelopt-nvfp4 --calib on stories4M against the references' own numbers
 * for the same tokens (goldens/calib/
 * static-lc.txt, written by tools/crosscheck_static.py --golden:
 * QuantizationModifier(scheme=FP8 / NVFP4, and config_groups of INT8 W8A8
 * with static per-tensor activations), ModelOpt's NVFP4_DEFAULT_CFG export
 * for modelopt-nvfp4 --calib, 2 x 128 tokens of goldens/calib/calib-6k.txt).
 *
 * The weights' scales do not depend on the activations: FP8's per-tensor
 * weight_scale, NVFP4's fused weight_global_scale and ModelOpt's fused
 * weight_scale_2 must be the reference's bit for bit.  The input scales are
 * the amax of each Linear's input from two float32 forward passes
 * (transformers', qk's engine): within REL relative (measured on this set:
 * see goldens/calib/README.md). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/hfdir.h"
#include "kernels/types.h"
#include "kernels/wq.h"
#include "lib/quant/ckpt_static.h"
#include "lib/quant/ckpt_write.h"
#include "tests/testutil.h"

#define S4M "goldens/models/stories4M/hf-f32"
#define REL 1e-5

static char tmproot[64];

static void setup(void)
{
    snprintf(tmproot, sizeof tmproot, "/tmp/qk-static-XXXXXX");
    cr_assert_not_null(mkdtemp(tmproot));
}


static void teardown(void) { tu_rm_rf(tmproot); }

TestSuite(static_scales, .init = setup, .fini = teardown);

/* Under ASan+UBSan (QK_SANITIZED, set by make asan-test) the same code runs on 32 tokens, without the
 * golden's numbers (those are the plain pass's, bit for bit), so that make check stays in its budget. */
static bool sanitized(void) { return getenv("QK_SANITIZED") != NULL; }

/* Write S4M as scheme, calibrated as the golden was (sanitized: one chunk of 32), into tmproot; rotate:
 * --rotate hadamard. */
static const char *make_rot(const char *scheme, int threads, bool rotate)
{
    static char out[128];
    snprintf(out, sizeof out, "%s/%s-%d%s", tmproot, scheme, threads, rotate ? "-rot" : "");
    qk_ckpt_calib c = {.text = "goldens/calib/calib-6k.txt", .tokenizer = "goldens/models/stories4M/stories4M-f32.gguf",
                       .n_ctx = sanitized() ? 32 : 128, .n_chunks = sanitized() ? 1 : 2, .o = {.nthreads = threads},
                       .quiet = true};
    qk_ckpt_opts o = {.quiet = true, .calib = &c, .rotate = rotate};
    qk_err err = {0};
    cr_assert_eq(qk_ckpt_quantize(S4M, out, scheme, &o, &err), 0, "%s: %s", scheme, err.msg);
    return out;
}

static const char *make(const char *scheme, int threads) { return make_rot(scheme, threads, false); }

/* Every golden line of preset against dir's tensors (sanitized: the input scales only there, positive);
 * returns how many input scales. */
static int against_golden(const char *dir, const char *preset, const char *input_leaf)
{
    qk_hfdir *hf;
    qk_err err = {0};
    const bool san = sanitized();
    cr_assert_eq(qk_hf_open(&hf, dir, &err), 0, "%s", err.msg);
    char *g = tu_read("goldens/calib/static-lc.txt", NULL), *save = NULL;
    int n_in = 0, n_w = 0;
    double worst = 0;
    for (char *line = strtok_r(g, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char p[16], mod[256], leaf[64], name[400];
        double want;
        if (line[0] == '#' || sscanf(line, "%15s %255s %63s %lf", p, mod, leaf, &want) != 4 || strcmp(p, preset))
            continue;
        snprintf(name, sizeof name, "%s.%s", mod, leaf);
        const qk_hf_tensor *t = qk_hf_find(hf, name);
        cr_assert_not_null(t, "%s: no %s", dir, name);
        cr_assert_eq(t->nelem, 1, "%s", name);
        cr_assert_eq(t->type, QK_F32, "%s: %s", name, t->dtype);
        const float got = qk_wq_val(t->data, t->type, 0);
        cr_assert(got > 0.0f && isfinite(got), "%s: %g", name, got);
        if (!strcmp(leaf, input_leaf)) {
            const double rel = fabs((double)got / want - 1);
            worst = rel > worst ? rel : worst;
            cr_assert(san || rel <= REL, "%s: qk %.9g, the reference %.9g (relative %.3g)", name, got, want, rel);
            n_in++;
        } else { /* the weights' scales do not depend on the calibration tokens */
            cr_assert_eq(got, (float)want, "%s: qk %.9g, the reference %.9g", name, got, want);
            n_w++;
        }
    }
    cr_assert(n_w == n_in || (n_w == 0 && !strcmp(preset, "W8A8_STATIC")), "%s: %d input scales, %d weight scales",
              preset, n_in, n_w);
    if (!san)
        cr_log_info("%s: %d input scales, largest relative difference %.3g", preset, n_in, worst);
    free(g);
    qk_hf_close(hf);
    return n_in;
}

Test(static_scales, fp8_static_is_llm_compressors)
{
    cr_assert_eq(against_golden(make("ct-fp8-static", 2), "FP8", "input_scale"), 28);
}

Test(static_scales, nvfp4a4_is_llm_compressors)
{
    cr_assert_eq(against_golden(make("ct-nvfp4a4", 2), "NVFP4", "input_global_scale"), 28);
}

/* --rotate hadamard: the scales observed on the rotated model (R4 online before down_proj), as
 * llm-compressor's [SpinQuantModifier (R4 on blocks of 16), QuantizationModifier(scheme=NVFP4)] gives them;
 * the weights' global scales are those of the rotated weights. */
Test(static_scales, nvfp4a4_rotated_is_llm_compressors)
{
    cr_assert_eq(against_golden(make_rot("ct-nvfp4a4", 2, true), "NVFP4_SPIN", "input_global_scale"), 28);
}

Test(static_scales, w8a8_static_is_llm_compressors)
{
    cr_assert_eq(against_golden(make("ct-w8a8-static", 2), "W8A8_STATIC", "input_scale"), 28);
}

Test(static_scales, modelopt_nvfp4_is_modelopts)
{
    cr_assert_eq(against_golden(make("modelopt-nvfp4", 2), "MO_NVFP4", "input_scale"), 28);
}

/* compressed-tensors' rules at their edges */
Test(static_scales, rules)
{
    cr_assert_eq(qk_ct_fp8_scale(0.0f), 0x1p-23f); /* float32's eps for an all-zero input */
    cr_assert_eq(qk_ct_fp8_scale(448.0f), 1.0f);
    cr_assert_eq(qk_ct_gparam(0.0f), 1.0f);       /* 2688 / tiny is not finite */
    cr_assert_eq(qk_ct_gparam(2688.0f), 2688.0f * (1.0f / 2688.0f));
    /* torch's scalar / tensor is reciprocal times scalar: not always the quotient */
    int differs = 0;
    for (float a = 1.0f; a < 2.0f; a += 0x1p-10f)
        differs += qk_ct_gparam(a) != 2688.0f / a;
    cr_assert_gt(differs, 0);
}
