/* strbuf.c - growable text buffer (strbuf.h). */
#include "lib/core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void qk_sb_printf(qk_sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->bad = true;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = (b->cap ? b->cap * 2 : 256) + (size_t)k;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->bad = true;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
}

void qk_sb_jstr(qk_sbuf *b, const char *s)
{
    qk_sb_printf(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            qk_sb_printf(b, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            qk_sb_printf(b, "\\u%04x", (unsigned char)*s);
        else
            qk_sb_printf(b, "%c", *s);
    }
    qk_sb_printf(b, "\"");
}
