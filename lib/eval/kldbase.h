/* kldbase.h - base log-probability files for KL-divergence runs.
 *
 * Two formats, both read and written as streams (one scored token after
 * another; never the whole file in memory):
 *
 * LLAMA  llama-perplexity's --kl-divergence-base file, byte for byte
 *        (perplexity.cpp at d32676d): "_logits_", int32 n_ctx, n_vocab,
 *        n_chunk, the n_chunk * n_ctx tokens (as tokenized, BOS first), then
 *        per chunk n_ctx - 1 - n_ctx/2 rows of nv = 2*((n_vocab+1)/2) + 4
 *        uint16: float scale, float min_log_prob, n_vocab values q, zero pad.
 *        With max the row's largest logit and min_logit = max(min, max - 16):
 *        log p_i = min_log_prob + scale * q_i, q_i = round((l_i - min_logit)
 *        / scale) for l_i > min_logit, else 0 (at or below the floor).
 *
 * QK     zstd-compressed, in one of two encodings, never coarser than LLAMA:
 *        quantized: LLAMA's 16-bit value for every token, plus the exact
 *          float log-probabilities of the QK_KLDB_TOP most likely tokens of
 *          each row; the high and low bytes of the 16-bit values in separate
 *          planes (token-major, QK_KLDB_GROUP rows per group);
 *        factored: the model's output layer once (its stored type and bytes,
 *          and its bias) and per row the final hidden state after the output
 *          norm (n_embd floats); the reader recomputes the logits with
 *          qk_matmul, bit-identical to the forward pass, so every
 *          log-probability is exact.  Its size grows with n_embd instead of
 *          n_vocab per row: the writer's caller picks it when it is the
 *          smaller (qk_kldb_factored_pays).
 *        Layout:
 *          "QKKLDB1\0", u32 version 1, n_ctx, n_vocab, n_chunk, n_top,
 *          group, u64 0;
 *          u64 size, zstd frame of the int32 tokens;
 *          u64 size (0: quantized encoding), zstd frame of the output layer:
 *            u32 type, u32 has_bias, u64 n_embd, u64 n_vocab, the rows'
 *            bytes, n_vocab f32 bias when has_bias;
 *          one zstd frame per chunk: quantized, for each group of up to
 *            `group` rows: rows x (f32 scale, f32 min_log_prob), rows x n_top
 *            u32 ids, rows x n_top f32 log-probs, n_vocab x rows high bytes
 *            of q, n_vocab x rows low bytes; factored, rows x n_embd f32;
 *          index: n_chunk u64 frame offsets; trailer: u64 index offset,
 *          "QKKLDEND".
 *        A chunk can be reached without reading the ones before it.
 */
#ifndef QK_KLDBASE_H
#define QK_KLDBASE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/core/err.h"
#include "lib/engine/model.h"

enum { QK_KLDB_LLAMA = 1, QK_KLDB_QK = 2 };

#define QK_KLDB_TOP 8    /* exact log-probs kept per row (QK) */
#define QK_KLDB_GROUP 16 /* rows per plane group (QK) */

typedef struct qk_kldb_info {
    int format;
    int n_ctx, n_vocab, n_chunk;
    int rows;             /* scored rows per chunk: n_ctx - 1 - n_ctx/2 */
    bool factored;        /* QK factored encoding */
    int n_embd;           /* factored: hidden-state size */
    int32_t *tokens;      /* n_chunk * n_ctx */
} qk_kldb_info;

/* One row as llama-perplexity quantizes the logits l[0..n_vocab):
 * scale, min_log_prob and q[0..n_vocab). */
void qk_kldb_quantize_row(const float *logits, int n_vocab, float *scale, float *min_log_prob,
                          uint16_t *q);

/* Exact log-probabilities in float: logit - max - (float)log(sum exp).  The
 * one computation of a log-probability from logits: base rows, in-process
 * bases and the model under test all go through these, so a model compared
 * with itself is exactly 0. */
#define QK_KLDB_LOGPROB(logit, max, lse) ((logit) - (max) - (lse))
/* (float)log(sum expf(logit - max)) in double, and *max the largest logit. */
float qk_kldb_lse(const float *logits, int n_vocab, float *max);
void qk_kldb_logprobs(const float *logits, int n_vocab, float *lp);

typedef struct qk_kldb_reader qk_kldb_reader;

/* Open either format (recognised by its magic); checks the header, the
 * tokens (inside the vocabulary) and the size (truncation: code 2). */
int qk_kldb_open(qk_kldb_reader **out, const char *path, qk_err *err);
const qk_kldb_info *qk_kldb_reader_info(const qk_kldb_reader *r);
/* Position at the first row of chunk c (0-based). */
int qk_kldb_seek_chunk(qk_kldb_reader *r, int chunk, qk_err *err);
/* The next row as float log-probabilities lp[0..n_vocab): min_log_prob +
 * scale * q in float (llama's dequantization), the exact values where the
 * file has them (QK top tokens, QK factored: all). */
int qk_kldb_read_row(qk_kldb_reader *r, float *lp, qk_err *err);
/* The next n rows into lp[n * n_vocab] (factored: one matrix product). */
int qk_kldb_read_rows(qk_kldb_reader *r, int n, float *lp, qk_err *err);
/* Threads for the factored encoding's matrix products (default 1). */
void qk_kldb_set_threads(qk_kldb_reader *r, int nthreads);
void qk_kldb_close(qk_kldb_reader *r);

typedef struct qk_kldb_writer qk_kldb_writer;

/* The output layer for the QK factored encoding. */
typedef struct qk_kldb_head {
    const qk_weight *w;   /* n_vocab rows of n_embd */
    const float *bias;    /* n_vocab or NULL */
} qk_kldb_head;

/* Whether the factored encoding of rows_total rows is under half of
 * LLAMA's size (the quantized encoding's typical best). */
bool qk_kldb_factored_pays(uint64_t rows_total, const qk_weight *w);

/* Start a base file (atomically replaced on finish).  head: QK only, the
 * factored encoding (NULL: quantized). */
int qk_kldb_create(qk_kldb_writer **out, const char *path, int format, int n_ctx, int n_vocab,
                   int n_chunk, const int32_t *tokens, int level, const qk_kldb_head *head,
                   qk_err *err);
/* True when rows need their hidden state (factored encoding). */
bool qk_kldb_wants_hidden(const qk_kldb_writer *w);
/* Append the next scored row from its logits[0..n_vocab) and, factored,
 * its normalised hidden state[0..n_embd) (else NULL). */
int qk_kldb_write_row(qk_kldb_writer *w, const float *logits, const float *hidden, qk_err *err);
/* Check every row was written, write the index, rename into place. */
int qk_kldb_finish(qk_kldb_writer *w, qk_err *err);
/* Free (removes the temp file when not finished). */
void qk_kldb_free(qk_kldb_writer *w);

#endif
