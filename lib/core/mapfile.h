/* mapfile.h - read-only memory mapping of a whole input file. */
#ifndef QK_MAPFILE_H
#define QK_MAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"

typedef struct qk_map {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
    int fd;
} qk_map;

int qk_map_open(qk_map *m, const char *path, qk_err *err);
void qk_map_close(qk_map *m);
/* Drop the resident pages wholly inside [p, p + n) of a qk_map_open
 * mapping (they are read from the file again if touched): memory back once
 * a copy of the bytes is all that is used. */
void qk_map_release(const void *p, size_t n);
/* True when a and b name the same existing file (device + inode). */
int qk_same_file(const char *a, const char *b);

#endif
