#include "lib/core/cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include <stdio.h>

#include "lib/core/threads.h"

int qk_cli_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out, qk_err *err)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return qk_errf(err, QK_EINPUT, "%s: '%s' is not an integer in [%lld, %lld]", opt, s,
                       (long long)lo, (long long)hi);
    *out = v;
    return 0;
}

int qk_cli_double(const char *opt, const char *s, double *out, qk_err *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return qk_errf(err, QK_EINPUT, "%s: '%s' is not a number", opt, s);
    *out = v;
    return 0;
}

int qk_cli_threads(const char *s, int *out, qk_err *err)
{
    int64_t v;
    if (qk_cli_int("--threads", s, 0, 1024, &v, err))
        return QK_EINPUT;
    *out = v == 0 ? qk_cpu_count() : (int)v;
    return 0;
}

int qk_cli_shape(const char *s, int64_t *rows, int64_t *cols, qk_err *err)
{
    char *end;
    errno = 0;
    long long a = strtoll(s, &end, 10);
    if (errno || end == s || a <= 0)
        goto bad;
    if (*end == '\0') {
        *rows = 1;
        *cols = a;
        return 0;
    }
    if (*end != 'x' && *end != 'X')
        goto bad;
    const char *p = end + 1;
    long long b = strtoll(p, &end, 10);
    if (errno || end == p || *end || b <= 0)
        goto bad;
    *rows = a;
    *cols = b;
    return 0;
bad:
    return qk_errf(err, QK_EINPUT, "--shape: '%s' is not ROWSxCOLS with positive integers", s);
}

int qk_cli_bad_option(const char *prog, char **argv, int optind_now)
{
    const char *arg = optind_now > 0 ? argv[optind_now - 1] : "?";
    fprintf(stderr, "%s: unknown option or missing argument: '%s'; see --help\n", prog, arg);
    return QK_EINPUT;
}
