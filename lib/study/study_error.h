/* study_error.h - the quantization-error scorecard: every weight matrix of a
 * checkpoint (or one synthetic matrix) quantized and dequantized with each
 * format x granularity, and the error measured.
 *
 * Per (tensor, format): with x the weights and y = dequant(quant(x)), sums in
 * double in index order,
 *   SNR dB  10 log10(sum x^2 / sum (x-y)^2)   (+inf when exact)
 *   NMSE    sum (x-y)^2 / sum x^2
 *   max abs max |x - y|
 *   bytes per element: the encoding's bytes (codes, scales, zero points,
 *   global scales) / elements.
 * Rows whose length is not a multiple of the format's group or block are
 * padded with zeros to the next multiple before quantizing ("padded"):
 * zeros change no absmax, no MX or NVFP4 scale, and the padding is cut off
 * before measuring.  For the element schemes the bytes count one scale per
 * (partial) group and the codes of the real elements only; for the GGUF
 * types the bytes are those of the padded rows (GGUF stores whole blocks).
 *
 * Formats (families: the element type; granularities as kernels/scaled.h):
 *   int8, int4           tensor, channel, group 128/64/32 (absmax, F32 scales)
 *   fp8_e4m3, fp8_e5m2   tensor, channel, group 128, block 128x128, MX
 *                        (mxfp8_*: 32 sharing an E8M0 scale)
 *   fp6_e2m3             tensor, channel, group 128, MX (mxfp6_e2m3)
 *   fp4_e2m1             tensor, channel, group 128/32/16, MX (mxfp4),
 *                        NVFP4 (16 sharing an E4M3 scale, F32 global)
 *   gguf                 every GGUF type qk encodes without an importance
 *                        matrix, through kernels/quantize.h (F16, BF16 too)
 * Summary per format: parameter-weighted mean SNR over the tensors it
 * covers (sum nelem*SNR / sum nelem), weighted mean bytes per element, and
 * the gain in dB of that mean over the same family's per-tensor and group-128
 * rows (the GGUF family has neither).
 *
 * Everything is deterministic and independent of the thread count: jobs
 * (one tensor x one format) write their own result slots. */
#ifndef QK_STUDY_ERROR_H
#define QK_STUDY_ERROR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/core/err.h"
#include "kernels/scaled.h"

/* ---- synthetic matrices ------------------------------------------------- */

enum { QK_SYN_GAUSSIAN = 1, QK_SYN_LAPLACE, QK_SYN_STUDENT_T, QK_SYN_OUTLIER };

typedef struct qk_syn_spec {
    int kind;
    double nu;             /* student-t degrees of freedom (> 0) */
    int64_t rows, cols;    /* default 256 x 4096 */
    uint64_t seed;         /* default 1 */
} qk_syn_spec;

/* Parse gaussian | laplace | student-t:NU | outlier-channels (rows, cols and
 * seed keep their values; zero ones get the defaults). */
int qk_syn_parse(const char *text, qk_syn_spec *s, qk_err *err);
/* The distribution's name as parsed ("student-t:3"). */
void qk_syn_name(const qk_syn_spec *s, char *buf, size_t n);
/* Fill x[rows*cols] (row-major) from a splitmix64 stream seeded with seed:
 * gaussian N(0,1) by Box-Muller; laplace with unit variance by the inverse
 * CDF; student-t N(0,1) / sqrt(chi2_nu / nu) with chi2 from Marsaglia-Tsang
 * gamma variates; outlier-channels N(0,1) with about 1% of the input
 * channels (columns, chosen by the same stream) scaled by 20 (LLM.int8's
 * outlier features).  Same seed, same bytes. */
void qk_syn_fill(const qk_syn_spec *s, float *x);

/* ---- formats ------------------------------------------------------------- */

typedef struct qk_ecard_fmt {
    char family[16];       /* int4, fp8_e4m3, fp4_e2m1, gguf, ... */
    char gran[16];         /* tensor, channel, g128, block128, mx, nvfp4, or the GGUF type */
    char label[32];        /* "int4 g128", "mxfp4", "q4_K", "gguf-nvfp4" */
    const qk_scheme *scheme; /* NULL: a GGUF type */
    qk_scheme_opts opts;
    int gguf_type;         /* -1 unless a GGUF type */
    int group;             /* elements per row a scale covers (padding unit), 0: none */
} qk_ecard_fmt;

/* The default list (above).  *out is malloc'd. */
int qk_ecard_default_formats(qk_ecard_fmt **out, int *n, qk_err *err);
/* Keep the formats whose label or family is one of the comma-separated
 * names ("int4,mxfp4,nvfp4,q4_K", "gguf", "int4 g128"; the GGUF types
 * MXFP4 and NVFP4 are "gguf-mxfp4" and "gguf-nvfp4"). */
int qk_ecard_filter(qk_ecard_fmt *f, int *n, const char *list, qk_err *err);

/* ---- the card ------------------------------------------------------------ */

typedef struct qk_ecard_cell {
    bool ok;               /* false: the format cannot encode this tensor (message in note) */
    bool padded;
    double snr_db, nmse, max_abs, bpe;
} qk_ecard_cell;

typedef struct qk_ecard_tensor {
    char *name;
    int64_t rows, cols;
} qk_ecard_tensor;

typedef struct qk_ecard_sum {
    double snr_db;         /* parameter-weighted mean */
    double bpe;            /* parameter-weighted mean */
    double gain_tensor, gain_g128; /* NAN when the family has no such row */
    uint64_t params;       /* elements covered */
    int n_tensors;
} qk_ecard_sum;

typedef struct qk_ecard {
    char source[512];      /* path or "synthetic:NAME RxC seed S" */
    qk_ecard_fmt *fmts;
    int n_fmt;
    qk_ecard_tensor *tensors;
    int n_tensor, cap_tensor;
    qk_ecard_cell *cells;  /* [n_tensor][n_fmt] */
    qk_ecard_sum *sums;    /* [n_fmt], after qk_ecard_summarize */
} qk_ecard;

/* A card for these formats (copied).  Free with qk_ecard_free. */
int qk_ecard_init(qk_ecard *c, const char *source, const qk_ecard_fmt *fmts, int n_fmt,
                  qk_err *err);
void qk_ecard_free(qk_ecard *c);
/* Score one matrix x[rows*cols] with every format, in parallel over
 * formats (nthreads). */
int qk_ecard_add(qk_ecard *c, const char *name, const float *x, int64_t rows, int64_t cols,
                 int nthreads, qk_err *err);
/* Every 2-D tensor of a checkpoint (formats/tensorset.h: GGUF file, split
 * set, .safetensors or Hugging Face directory) whose name matches the
 * fnmatch(3) pattern glob (NULL: all), decoded to float first. */
int qk_ecard_add_checkpoint(qk_ecard *c, const char *path, const char *glob, int nthreads,
                            qk_err *err);
void qk_ecard_summarize(qk_ecard *c);

/* Output.  md: the summary table (and per-tensor tables when per_tensor);
 * csv: one row per (tensor, format) with kind "tensor", then one per
 * format with kind "summary"; json: {"source", "formats": [...], "tensors":
 * [...]} (schemas in docs/studies.md). */
void qk_ecard_write_md(const qk_ecard *c, FILE *f, bool per_tensor);
void qk_ecard_write_csv(const qk_ecard *c, FILE *f);
void qk_ecard_write_json(const qk_ecard *c, FILE *f);

#endif
