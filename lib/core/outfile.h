/* outfile.h - atomic output: every file or directory qk writes goes through here.
 *
 * An output is complete or absent.  The bytes go to a temporary beside DST
 * (same directory, so the final step is a link or a rename, never a copy);
 * commit flushes, fsyncs and puts it in place at once; anything else removes
 * it.  New writers use this and nothing else (no fopen(..., "w"), mkstemp or
 * mkdtemp of their own):
 *
 *     qk_out o;
 *     if ((rc = qk_out_open(&o, path, err)))
 *         return rc;
 *     if ((rc = qk_out_write(&o, buf, n, err)) || (rc = qk_out_commit(&o, err)))
 *         qk_out_abort(&o);       // after a failed commit abort is a no-op
 *
 * or, for a buffer in memory, qk_out_write_file(path, buf, n, err).  o.f may
 * also be handed to fprintf-style writers; a failure there is found and
 * reported (with its errno text) at commit.
 *
 * How the temporary is made:
 *   - On Linux, an unnamed file (open O_TMPFILE in DST's directory), linked
 *     into place at commit (linkat AT_EMPTY_PATH, else /proc/self/fd/N).  A
 *     process killed at any point, even by SIGKILL, leaves nothing.  linkat
 *     cannot replace: when DST exists the file is linked to a unique name
 *     DST.tmp.XXXXXX which is then renamed over DST, so replacing stays
 *     atomic (only a kill in the microseconds between the two calls can
 *     leave that name behind).
 *   - Where O_TMPFILE is refused (filesystem or kernel without it, or
 *     QK_OUT_NAMED=1 in the environment, which the tests use to exercise
 *     this path), a named DST.tmp.XXXXXX (mkstemp), renamed into place.
 *   - Directories (qk_outdir) are always named (DST.tmp.XXXXXX, mkdtemp):
 *     O_TMPFILE makes no directories, so SIGKILL can leave one behind.
 * Every named temporary is in a registry of live temporaries until it is
 * committed or removed; exit() and SIGINT, SIGTERM and SIGHUP remove them
 * (the handler unlinks, restores the previous disposition and re-raises, so
 * the exit status still tells the signal).  Dispositions set to SIG_IGN are
 * left alone.
 *
 * Errors: EFBIG, ENOSPC, EIO ... on any write, fsync, link or rename are one
 * message "DST: write failed: File too large" with code QK_EIO (3), and the
 * temporary is gone.  SIGXFSZ is ignored from the first qk_out_open on (as
 * from qk's main), so exceeding `ulimit -f` is EFBIG, not a silent kill.
 * Callers check that DST is not one of their inputs; this layer replaces
 * whatever DST names (a file; directories only when empty). */
#ifndef QK_OUTFILE_H
#define QK_OUTFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/core/err.h"

struct qk_out_sink;

typedef struct qk_out {
    FILE *f;                  /* buffered stream over the temporary */
    char *dst;
    char *tmp;                /* the named temporary; NULL for an unnamed (O_TMPFILE) one */
    uint64_t written;         /* bytes passed to qk_out_write / qk_out_pad so far */
    struct qk_out_sink *sink; /* the descriptor under f and the first write error */
    int live;                 /* registry slot of tmp plus one; 0: none */
} qk_out;

/* Ignore SIGXFSZ (unless a handler is installed), so that writing past
 * `ulimit -f` fails with EFBIG.  Called by qk_out_open; drivers call it first. */
void qk_out_init(void);

int qk_out_open(qk_out *o, const char *dst, qk_err *err);
int qk_out_write(qk_out *o, const void *buf, size_t n, qk_err *err);
/* Write n zero bytes (padding). */
int qk_out_pad(qk_out *o, size_t n, qk_err *err);
/* Overwrite n bytes already written at offset off (a header completed at the
 * end); off + n <= written.  The stream position does not move. */
int qk_out_pwrite(qk_out *o, uint64_t off, const void *buf, size_t n, qk_err *err);
/* Flush, fsync, put into place.  On failure the temporary is removed. */
int qk_out_commit(qk_out *o, qk_err *err);
/* Remove the temporary; safe to call after commit or on a zeroed qk_out. */
void qk_out_abort(qk_out *o);

/* open, write buf[0..n), commit: the whole of DST at once. */
int qk_out_write_file(const char *dst, const void *buf, size_t n, qk_err *err);

/* An output directory built as DST.tmp.XXXXXX beside DST and renamed into
 * place on commit.  DST must not exist, or be an empty directory (then it is
 * replaced); a trailing '/' is ignored.  Write its files with qk_out_open on
 * qk_outdir_path(d, name) (the directory holds no subdirectories). */
typedef struct qk_outdir {
    char *tmp;              /* the directory being filled */
    char *dst;
    bool replace_empty;     /* DST exists as an empty directory */
    int live;               /* registry slot of tmp plus one; 0: none */
} qk_outdir;

int qk_outdir_open(qk_outdir *d, const char *dst, qk_err *err);
/* "TMP/name" (malloc'd; NULL when out of memory): where to write a file of the output. */
char *qk_outdir_path(const qk_outdir *d, const char *name);
/* fsync the files' directory entries, rename into place. */
int qk_outdir_commit(qk_outdir *d, qk_err *err);
/* In err's message, the temporary directory's name becomes DST's, so that a
 * failure writing one of its files names the output, not the temporary. */
void qk_outdir_name_err(const qk_outdir *d, qk_err *err);
/* Remove the temporary directory and its files; safe after commit or on a zeroed qk_outdir. */
void qk_outdir_abort(qk_outdir *d);

#endif
