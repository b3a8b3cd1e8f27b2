/* outfile.h - atomic output: write to DST.tmp.XXXXXX beside DST, rename into
 * place on commit, remove on abort.  Nothing partial is ever left at DST. */
#ifndef QK_OUTFILE_H
#define QK_OUTFILE_H

#include <stdint.h>
#include <stdio.h>

#include "lib/core/err.h"

typedef struct qk_out {
    FILE *f;
    char *tmp;
    char *dst;
    uint64_t written;
} qk_out;

int qk_out_open(qk_out *o, const char *dst, qk_err *err);
int qk_out_write(qk_out *o, const void *buf, size_t n, qk_err *err);
/* Write n zero bytes (padding). */
int qk_out_pad(qk_out *o, size_t n, qk_err *err);
/* Flush, fsync, rename into place. On failure the temp file is removed. */
int qk_out_commit(qk_out *o, qk_err *err);
/* Remove the temp file; safe to call after commit or on a zeroed qk_out. */
void qk_out_abort(qk_out *o);

#endif
