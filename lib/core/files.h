/* files.h - whole-file helpers: read a file into memory, join paths, copy a
 * file.  Outputs that must be complete or absent go through outfile.h. */
#ifndef QK_FILES_H
#define QK_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/core/err.h"

/* The whole of path in a malloc'd buffer with a NUL after its n bytes.  A
 * missing file is code 3 "cannot open", or, with missing_ok, QK_OK with
 * *out NULL and *n 0. */
int qk_read_file(const char *path, bool missing_ok, char **out, size_t *n, qk_err *err);

/* "dir/name", malloc'd; NULL when out of memory. */
char *qk_path_join(const char *dir, const char *name);

/* Copy src to dst (atomically, through outfile.h).  A missing src is QK_OK
 * with nothing written. */
int qk_copy_file_if_exists(const char *src, const char *dst, qk_err *err);

#endif
