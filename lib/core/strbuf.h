/* strbuf.h - a growable text buffer for generated text: printf appends,
 * and an allocation failure is remembered (bad) rather than returned at
 * every call, so a caller checks once at the end. */
#ifndef QK_STRBUF_H
#define QK_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/core/err.h"

typedef struct qk_sbuf {
    char *s;        /* NUL-terminated once anything was appended; free() it */
    size_t n, cap;
    bool bad;       /* out of memory (or a format error) at some append */
} qk_sbuf;

void qk_sb_printf(qk_sbuf *b, const char *fmt, ...) QK_PRINTF(2, 3);
/* A JSON string literal of s (quotes and backslashes escaped, control bytes as \u00XX). */
void qk_sb_jstr(qk_sbuf *b, const char *s);

#endif
