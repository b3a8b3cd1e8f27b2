/* pyjson.h - JSON written the way Python's json.dump writes it: indent N,
 * separators (",", ": "), ensure_ascii (non-ASCII as \uXXXX), sort_keys
 * optional (all levels, or the top level only as mlx_lm does).  Values come
 * from the JSON parser (jsonp.h); numbers are copied from the text they were
 * parsed from, so they round-trip as Python wrote them.  For files that must
 * come out byte for byte as the Python tools write them (config.json). */
#ifndef QK_PYJSON_H
#define QK_PYJSON_H

#include <stddef.h>
#include <stdio.h>

#include "lib/core/jsonp.h"

typedef struct qk_pyj_src {
    const qk_jsonv *v;
    const char *buf;  /* text v was parsed from */
} qk_pyj_src;

typedef struct qk_pyj_member {
    const char *key;
    size_t klen;
    qk_pyj_src v;
} qk_pyj_member;

/* Write the object of members m[0..n) (reordered when sorted).  sort: 0 as
 * given, 1 the top level sorted, 2 every level sorted (sort_keys=True).  A
 * failure shows as the stream's error. */
void qk_pyjson_object(FILE *f, qk_pyj_member *m, size_t n, int indent, int sort);

#endif
