/* cli.h - helpers every driver shares: numbers from option strings, thread
 * counts, shapes. Each returns 0 on success, or fills err (code 2). */
#ifndef QK_CLI_H
#define QK_CLI_H

#include <stdint.h>

#include "lib/core/err.h"

int qk_cli_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out, qk_err *err);
int qk_cli_double(const char *opt, const char *s, double *out, qk_err *err);
/* -t/--threads: 1..1024; "0" means all online CPUs. */
int qk_cli_threads(const char *s, int *out, qk_err *err);
/* "ROWSxCOLS" (also "COLS" alone = 1 row). */
int qk_cli_shape(const char *s, int64_t *rows, int64_t *cols, qk_err *err);

/* After getopt_long returned '?' (with opterr = 0): print one line
 * "PROG: unknown option 'X' (or missing argument); see --help" and return 2. */
int qk_cli_bad_option(const char *prog, char **argv, int optind_now);

#endif
