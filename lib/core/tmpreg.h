/* tmpreg.h - the registry of live named temporaries (outfile.c's): paths
 * removed at exit() and on SIGINT, SIGTERM and SIGHUP.  Internal to
 * lib/core/outfile.c; writers use outfile.h.
 *
 * Lock-free and async-signal-safe: a slot holds a malloc'd copy of the path
 * and whoever swaps it out (qk_tmpreg_del, or the handler) owns it, so a
 * signal on any thread at any moment removes each temporary at most once
 * and never reads freed memory.  Entries are per process: a forked child
 * (Criterion runs tests in children) leaves its parent's alone. */
#ifndef QK_TMPREG_H
#define QK_TMPREG_H

/* Register path (a file, or a directory of files); returns the slot plus
 * one, or 0 when the registry is full or out of memory (the temporary is then
 * still removed on every ordinary path, just not by a signal).  The first
 * call installs the handlers. */
int qk_tmpreg_add(const char *path);
/* Forget slot live (a value from qk_tmpreg_add; 0 is a no-op) without
 * removing anything: call after the path was renamed or removed. */
void qk_tmpreg_del(int live);
/* Remove a directory and the files in it (async-signal-safe). */
void qk_tmpreg_remove_tree(const char *dir);

#endif
