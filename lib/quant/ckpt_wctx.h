/* ckpt_wctx.h - private to the Hugging Face checkpoint writer: its context,
 * shared by ckpt_write.c (the plan and the weights) and ckpt_config.c (the
 * config files).  Not for other folders. */
#ifndef QK_CKPT_WCTX_H
#define QK_CKPT_WCTX_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

#include "formats/ckpt.h"
#include "lib/core/jsonp.h"
#include "lib/core/outfile.h"
#include "lib/core/pyjson.h"
#include "lib/quant/ckpt_write.h"
#include "lib/quant/rotate.h"

/* The compressed-tensors and ModelOpt releases whose output layout this follows. */
#define CT_VERSION "0.12.2"
#define MODELOPT_VERSION "0.29.0"

typedef enum { K_CT_FP8, K_CT_FP8_BLOCK, K_CT_W8A8, K_CT_W4A16, K_CT_NVFP4, K_CT_MXFP4, K_MO_NVFP4, K_MLX,
               K_DENSE } kind;

typedef struct target {
    kind k;
    int bits;
    int group;     /* group size, or block edge for ct-fp8-block */
    bool asym;
    bool a8;       /* K_CT_W4A16 as ct-w4a8: dynamic per-token int8 activations */
    int dtype;     /* K_DENSE: QK_F32 / QK_F16 / QK_BF16 */
    bool astatic;  /* static activations from --calib (ckpt_static.c): K_CT_FP8 as ct-fp8-static (per-tensor
                    * weights, input_scale), K_CT_NVFP4 as ct-nvfp4a4 (W4A4, input_global_scale) */
} target;

typedef struct opart {
    char *name;
    const char *dtype;
    int nd;
    int64_t shape[2];
    uint64_t nbytes;
} opart;

typedef struct omod {
    const qk_ck_tensor *src;
    bool quant;
    bool raw;      /* dense, written as stored */
    bool synth;    /* --rotate's R4 matrix (not from the source) */
    int np;
    opart p[5];
    int shard;
    uint64_t bytes;
} omod;

typedef struct wctx {
    const qk_ckpt_opts *o;
    target tg;
    qk_hfdir *hf;
    qk_ckpt *ck;
    int model_dtype;   /* QK_F32 / QK_F16 / QK_BF16 */
    regex_t ignore_re;
    bool has_ignore;
    omod *m;
    size_t nm;
    qk_rot *rot;          /* --rotate */
    int r4;               /* --rotate: R4's block (0 until rotation() sets it; a rotated calibration source
                           * takes its output's) */
    qk_ck_tensor lm_t, r4_t; /* --rotate: the untied lm head (the embeddings' source), R4's matrix */
    int nshards;
    qk_outdir out;
    qk_err *err;
    qk_calib_res cres;   /* --method gptq: the modules' levels */
    float *act;          /* static schemes: per w->m[i], its input's calibrated amax */
    float *wglob;        /* NVFP4: per w->m[i], its (fused) global scale (weight_global_scale, weight_scale_2) */
} wctx;

/* The linear module of a weight tensor ("model.layers.0.mlp.down_proj"), in
 * buf; NULL when t is not a linear layer's 2-D weight. */
const char *qk_ckw_linear_module(const qk_ck_tensor *t, char *buf, size_t cap);
/* buf[0..n) parsed as JSON; an error names what. */
int qk_ckw_parse_text(const char *buf, size_t n, const char *what, qk_jsonv **out, qk_err *err);
/* Members m[0..n) written as one JSON object to the output's name, as
 * Python's json.dump(indent, sort_keys) writes it (lib/core/pyjson.h). */
int qk_ckw_write_json(const wctx *w, const char *name, qk_pyj_member *m, size_t n, int indent, int sort, bool newline);
/* Static schemes (ckpt_static.c): calibrate the input amax of every quantized
 * module, and for ct-nvfp4a4 the fused weight global scales. */
int qk_ckw_static_prepare(wctx *w, const char *src_dir);
/* NVFP4 (ct-nvfp4, ct-nvfp4a4, modelopt-nvfp4): w->wglob, one weight global scale per fusion group
 * (q/k/v_proj, gate/up_proj), as llm-compressor's fused weight observers and ModelOpt's export give it. */
int qk_ckw_nvfp4_globals(wctx *w);
/* The activation part of module m (input_scale / input_global_scale) into buf. */
void qk_ckw_static_part(const wctx *w, const omod *m, uint8_t *buf);
/* config.json (and ModelOpt's hf_quant_config.json) into w's output. */
int qk_ckw_write_config(wctx *w);

#endif
