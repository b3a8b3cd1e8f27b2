#include "lib/core/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* One line whatever a file put in the names it quotes: control bytes become '?'. */
static void one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

int qk_errf(qk_err *e, int code, const char *fmt, ...)
{
    if (!e)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    one_line(e->msg);
    e->code = code;
    return code;
}

int qk_err_at(qk_err *e, const char *file, const char *field, uint64_t off,
              const char *fmt, ...)
{
    if (!e)
        return QK_EINPUT;
    int n = snprintf(e->msg, sizeof e->msg, "%s: %s at offset %llu: ", file ? file : "-",
                     field, (unsigned long long)off);
    if (n < 0 || (size_t)n >= sizeof e->msg)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg + n, sizeof e->msg - (size_t)n, fmt, ap);
    va_end(ap);
    one_line(e->msg);
    e->code = QK_EINPUT;
    return QK_EINPUT;
}

int qk_err_sys(qk_err *e, const char *file, const char *what)
{
    int saved = errno;
    return qk_errf(e, QK_EIO, "%s: %s: %s", file ? file : "-", what, strerror(saved));
}

int qk_err_report(const char *prog, const qk_err *e)
{
    fprintf(stderr, "%s: %s\n", prog, e->msg);
    return e->code ? e->code : QK_EINPUT;
}
