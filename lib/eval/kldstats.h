/* kldstats.h - the statistics llama-perplexity prints for perplexity and
 * KL-divergence runs (tools/perplexity/perplexity.cpp at d32676d), and the
 * partial-results file (.qkpart) that lets a run be split over machines.
 *
 * Every scored token contributes one record.  Records are added in token
 * order and the sums are accumulated exactly as llama-perplexity does (the
 * same float and double steps), so a run split into parts and merged from
 * their records gives the bytes of one run over all chunks.
 *
 * Two modes:
 *   PPL  no base distribution: nll only; the "[i]ppl," progress line and
 *        "Final estimate: PPL = X +/- Y";
 *   KLD  against a base: the chunk table and the three statistics blocks
 *        (perplexity, KL divergence, token probability). */
#ifndef QK_KLDSTATS_H
#define QK_KLDSTATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/core/err.h"

enum { QK_KLD_MODE_PPL = 0, QK_KLD_MODE_KLD = 1 };

/* One scored token. */
typedef struct qk_kld_tok {
    double nll;       /* -log p(token): PPL mode the double llama adds; KLD mode a float */
    double kld;       /* KLD: sum over the vocabulary, as llama's double */
    float nll_base;   /* KLD: -log p_base(token) */
    float p_diff;     /* KLD: p(token) - p_base(token) */
    uint8_t same_top; /* KLD: argmax equals the base's argmax */
} qk_kld_tok;

typedef struct qk_kld_acc {
    int mode;
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
    float max_p_diff;
    uint64_t n_same_top, count;
    float *kld_values, *p_diff_values; /* KLD: one per token, for the percentiles */
    size_t cap;
    bool keep;                         /* keep every record (for --partial-out) */
    qk_kld_tok *rec;
    size_t n_rec, cap_rec;
} qk_kld_acc;

void qk_kld_acc_init(qk_kld_acc *a, int mode, bool keep_records);
void qk_kld_acc_free(qk_kld_acc *a);
/* Add one token (out of memory: code 3). */
int qk_kld_acc_add(qk_kld_acc *a, const qk_kld_tok *t, qk_err *err);

/* A value with its uncertainty. */
typedef struct qk_kld_ve {
    double v, e;
} qk_kld_ve;

/* Everything the final block prints (KLD mode), in the printed units. */
typedef struct qk_kld_summary {
    uint64_t count;
    qk_kld_ve ppl, ppl_base, ln_ratio, ratio, diff;
    double cor;                  /* Cor(ln PPL(Q), ln PPL(base)), a fraction */
    qk_kld_ve kld;
    double kld_pct[11];          /* max, 99.9, 99, 95, 90, median, 10, 5, 1, 0.1, min */
    qk_kld_ve dp;                /* mean delta p, percent */
    double dp_pct[15];           /* max, 99.9, 99, 95, 90, 75, median, 25, 10, 5, 1, 0.1, min (13 used) */
    qk_kld_ve rms_dp;            /* percent */
    qk_kld_ve same_top;          /* percent */
} qk_kld_summary;

/* PPL mode: the final estimate (ppl and its error); false when the
 * variance is not positive (llama prints an error instead). */
bool qk_kld_final_ppl(const qk_kld_acc *a, double *ppl, double *err);

/* Progress output after a chunk (1-based chunk number as printed):
 * PPL mode "[n]X.XXXX," ; KLD mode one row of the chunk table. */
void qk_kld_print_chunk(FILE *f, const qk_kld_acc *a, int chunk_no);
/* The KLD chunk table's header line. */
void qk_kld_print_table_header(FILE *f);

/* The percentile rule of llama-perplexity's kl_divergence() (linear
 * interpolation in float) on n >= 1 sorted values. */
float qk_kld_percentile(const float *sorted, size_t n, float fraction);

/* Sort the value arrays and fill the summary (KLD mode, count >= 1). */
void qk_kld_summarize(qk_kld_acc *a, qk_kld_summary *s);
/* The three statistics blocks as llama-perplexity prints them. */
void qk_kld_print_summary(FILE *f, const qk_kld_summary *s);

/* ---- partial results (.qkpart) -----------------------------------------
 * "QKPART1\0", then little-endian u32 version (1), mode, n_ctx, n_vocab,
 * n_chunk (of the whole run), chunk_a, chunk_b (this part: [a, b)), rows per
 * chunk, u64 tokens hash (FNV-1a of the run's int32 tokens), u64 records;
 * then one zstd frame of the records, 25 bytes each: f64 nll, f64 kld,
 * f32 nll_base, f32 p_diff, u8 same_top. */
typedef struct qk_part_info {
    int mode, n_ctx, n_vocab, n_chunk, chunk_a, chunk_b, rows;
    uint64_t tokens_hash, n_records;
} qk_part_info;

uint64_t qk_tokens_hash(const int32_t *tokens, size_t n);
/* Write a's records (kept with keep_records) as a part file, atomically. */
int qk_part_write(const char *path, const qk_part_info *info, const qk_kld_acc *a, qk_err *err);
/* Read a part's header (validated: sizes, counts). */
int qk_part_read_info(const char *path, qk_part_info *info, qk_err *err);
/* Replay a part's records into a, calling on_chunk after each chunk
 * (chunk number = absolute, 1-based).  Errors: truncated or corrupt data. */
int qk_part_replay(const char *path, const qk_part_info *info, qk_kld_acc *a,
                   void (*on_chunk)(void *ud, int chunk_no, const qk_kld_acc *a), void *ud,
                   qk_err *err);
/* Merge parts given in any order: read their headers, check they are one run
 * (mode, n_ctx, vocabulary, tokens) cut into contiguous chunk ranges without
 * overlap or gap, and replay their records in chunk order into acc
 * (initialised here; free it with qk_kld_acc_free also on error).  first:
 * the header of the part with the lowest chunks; chunk_b: where the last
 * part ends. */
int qk_parts_merge(char *const *paths, int n, qk_kld_acc *acc, qk_part_info *first, int *chunk_b,
                   void (*on_chunk)(void *ud, int chunk_no, const qk_kld_acc *a), void *ud,
                   qk_err *err);

#endif
