/* files.c - whole-file helpers (files.h). */
#include "lib/core/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/outfile.h"

int qk_read_file(const char *path, bool missing_ok, char **out, size_t *n, qk_err *err)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return missing_ok && errno == ENOENT ? QK_OK : qk_err_sys(err, path, "cannot open");
    size_t cap = 4096, len = 0, k;
    char *b = malloc(cap + 1);
    while (b && (k = fread(b + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) {
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!b)
        return qk_errf(err, QK_EIO, "%s: out of memory", path);
    if (bad) {
        free(b);
        return qk_err_sys(err, path, "read failed");
    }
    b[len] = 0;
    *out = b;
    *n = len;
    return QK_OK;
}

char *qk_path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int qk_copy_file_if_exists(const char *src, const char *dst, qk_err *err)
{
    FILE *in = fopen(src, "rb");
    if (!in)
        return errno == ENOENT ? QK_OK : qk_err_sys(err, src, "cannot open");
    qk_out out;
    int rc = qk_out_open(&out, dst, err);
    char buf[65536];
    size_t k;
    while (!rc && (k = fread(buf, 1, sizeof buf, in)) > 0)
        rc = qk_out_write(&out, buf, k, err);
    if (!rc && ferror(in))
        rc = qk_err_sys(err, src, "read failed");
    fclose(in);
    if (!rc)
        rc = qk_out_commit(&out, err);
    qk_out_abort(&out);
    return rc;
}
