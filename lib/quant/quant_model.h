/* quant_model.h - quantize a whole GGUF model the way llama-quantize does.
 *
 * A port of llama.cpp d32676d's src/llama-quant.cpp and
 * tools/quantize/quantize.cpp: the presets (file types), the per-tensor type
 * choice (which tensors are quantized at all, the output / token-embedding
 * rules, the attn_v / attn_k / attn_output / ffn_* bumps by layer and
 * preset, GQA and expert adjustments, fallbacks for row lengths that are not
 * a multiple of the block, --tensor-type patterns, --pure), the importance
 * matrix requirements, and the metadata written (general.file_type,
 * general.quantization_version, quantize.imatrix.*, split keys).  Given the
 * same input and options the output file is byte-identical to
 * llama-quantize's, with any thread count.
 *
 * Two steps: qk_quant_plan_make() decides every tensor's type and checks
 * everything that can fail on bad input (nothing is written); qk_quant_run()
 * streams the output: tensors are converted and encoded in slabs of rows
 * split across threads (memory O(threads x slab) beyond the input mapping),
 * written to temporary files and renamed into place only when every shard is
 * complete.
 */
#ifndef QK_QUANT_MODEL_H
#define QK_QUANT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "formats/gguf.h"
#include "lib/quant/imatrix.h"

/* A llama-quantize preset: name, the llama_ftype it selects (written as
 * general.file_type), its description. */
typedef struct qk_quant_preset {
    const char *name;
    int ftype;
    const char *desc;
} qk_quant_preset;

/* The preset table in llama-quantize's order; *n gets its length. */
const qk_quant_preset *qk_quant_presets(size_t *n);
/* By name (case-insensitive) or by file-type number (first preset with that
 * number, so 0 is F32, not COPY); NULL when unknown. */
const qk_quant_preset *qk_quant_preset_find(const char *s);
/* llama_ftype_get_default_type(): the tensor type a file type starts from,
 * -1 for an unknown file type. */
int qk_ftype_default_type(int ftype);

/* --override-kv KEY=TYPE:VALUE (TYPE int, float, bool or str). */
enum { QK_KVO_INT, QK_KVO_FLOAT, QK_KVO_BOOL, QK_KVO_STR };
typedef struct qk_quant_kvo {
    char key[128];
    int tag;
    int64_t i;
    double f;
    bool b;
    char s[128];
} qk_quant_kvo;
/* Parse like common's string_parse_kv_override (code 2 on malformed text). */
int qk_quant_parse_kvo(const char *s, qk_quant_kvo *o, qk_err *err);

/* --tensor-type PATTERN=TYPE: PATTERN is a regular expression searched in the
 * tensor name (lower-cased as llama-quantize does); first match wins. */
typedef struct qk_quant_tt {
    char *pattern;
    int type;
} qk_quant_tt;
/* Parse "PATTERN=TYPE" into *o (pattern malloc'd); code 2 when malformed or
 * the type is unknown or the pattern is not a valid regular expression. */
int qk_quant_parse_tt(const char *s, qk_quant_tt *o, qk_err *err);
/* --tensor-type-file: PATTERN=TYPE entries separated by white space (as
 * llama-quantize reads them with >>), appended to *tt (*n_tt entries,
 * realloc'd); code 2 at the first bad entry (those before it are kept). */
int qk_quant_parse_tt_list(const char *text, size_t n, qk_quant_tt **tt, size_t *n_tt, qk_err *err);

typedef struct qk_quant_opts {
    int ftype;                  /* a preset's file type */
    bool only_copy;             /* COPY */
    bool allow_requantize;
    bool leave_output;          /* --leave-output-tensor */
    bool pure;
    bool keep_split;
    bool dry_run;
    bool measure;               /* per-tensor SNR / NMSE of the encoded data */
    int output_tensor_type;     /* -1: the rules decide */
    int token_embedding_type;   /* -1: the rules decide */
    const qk_imatrix *imatrix;  /* after --include/--exclude-weights; NULL: none */
    const char *imatrix_file;   /* the --imatrix argument as given (stored in the output) */
    const qk_quant_tt *tt;      /* --tensor-type, in order */
    size_t n_tt;
    const int *prune;           /* --prune-layers, sorted, unique */
    size_t n_prune;
    const qk_quant_kvo *kvo;    /* --override-kv, in order */
    size_t n_kvo;
    int nthreads;
    /* --method gptq (lib/quant/gptq_model.h): the importance data comes from
     * the calibration, so the type rules are those with an imatrix; the
     * calibration is recorded as quantize.gptq.dataset / .chunks_count. */
    bool calibrated;
    const char *calib_file;
    int calib_chunks;
} qk_quant_opts;

/* One tensor of the output. */
typedef struct qk_quant_item {
    const qk_gguf_tensor *src;
    char name[64];          /* output name (--prune-layers renumbers blocks) */
    int type;               /* chosen type */
    char why[112];          /* why that type */
    bool quantize;          /* type differs from the source: convert and encode */
    const float *imatrix;   /* importance for this tensor, or NULL */
    int shard;              /* output shard (0 unless --keep-split) */
    uint64_t bytes;         /* output data bytes */
    double err2, ref2;      /* --measure: sum of squared error / of squared source */
    bool measured;
    uint8_t *data;          /* the encoded bytes when made before the run (GPTQ), owned by the plan */
    bool gptq;              /* data is GPTQ's (else round to nearest) */
} qk_quant_item;

typedef struct qk_quant_plan {
    const qk_gguf *g;
    qk_quant_opts o;
    qk_quant_item *t;       /* in output order */
    size_t n;
    int n_shards;
    uint32_t file_type;     /* general.file_type written */
    int n_fallback;         /* tensors that needed a fallback type */
    int n_imatrix_used;     /* tensors encoded with importance data */
    bool would_need_imatrix; /* --dry-run without --imatrix: a real run would refuse */
    uint64_t n_elements, bytes_in, bytes_out;
} qk_quant_plan;

/* Decide every tensor's type and check the input and options; nothing is
 * written.  g must outlive the plan, and so must o's pointers. */
int qk_quant_plan_make(qk_quant_plan **out, const qk_gguf *g, const qk_quant_opts *o, qk_err *err);
void qk_quant_plan_free(qk_quant_plan *p);

/* Output file name of shard i: out itself, or with --keep-split
 * "OUT-%05d-of-%05d.gguf" as llama_split_path() makes it.  Returns a
 * malloc'd string or NULL. */
char *qk_quant_shard_path(const qk_quant_plan *p, const char *out, int shard);

/* Write the output (not for dry runs).  progress(ctx, elements) is called
 * from the calling thread after each slab (may be NULL). */
int qk_quant_run(qk_quant_plan *p, const char *out, void (*progress)(void *, uint64_t), void *pctx,
                 qk_err *err);

#endif
