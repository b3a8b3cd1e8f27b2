/* mapfile.h - read-only memory mapping of a whole input file. */
#ifndef QK_MAPFILE_H
#define QK_MAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct qk_map {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
    int fd;
} qk_map;

int qk_map_open(qk_map *m, const char *path, qk_err *err);
void qk_map_close(qk_map *m);
/* True when a and b name the same existing file (device + inode). */
int qk_same_file(const char *a, const char *b);

#endif
