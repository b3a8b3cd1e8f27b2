/* outfile.h - atomic output: write to DST.tmp.XXXXXX beside DST, rename into
 * place on commit, remove on abort.  Nothing partial is ever left at DST.
 * The same for a directory of files (qk_outdir): complete or absent. */
#ifndef QK_OUTFILE_H
#define QK_OUTFILE_H

#include <stdbool.h>
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

/* open, write buf[0..n), commit: the whole of DST at once. */
int qk_out_write_file(const char *dst, const void *buf, size_t n, qk_err *err);

/* An output directory built as DST.tmp.XXXXXX beside DST and renamed into
 * place on commit.  DST must not exist, or be an empty directory (then it is
 * replaced); a trailing '/' is ignored. */
typedef struct qk_outdir {
    char *tmp;              /* the directory being filled */
    char *dst;
    bool replace_empty;     /* DST exists as an empty directory */
} qk_outdir;

int qk_outdir_open(qk_outdir *d, const char *dst, qk_err *err);
/* "TMP/name" (malloc'd; NULL when out of memory): where to write a file of the output. */
char *qk_outdir_path(const qk_outdir *d, const char *name);
int qk_outdir_commit(qk_outdir *d, qk_err *err);
/* Remove the temporary directory and its files; safe after commit or on a zeroed qk_outdir. */
void qk_outdir_abort(qk_outdir *d);

#endif
