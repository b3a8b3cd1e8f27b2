#include "lib/core/outfile.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* mkstemp creates 0600; outputs get the usual 0666 & ~umask.  umask can only
 * be read by setting it, so read it once. */
static mode_t file_mode;
static pthread_once_t mode_once = PTHREAD_ONCE_INIT;
static void read_umask(void)
{
    mode_t u = umask(022);
    umask(u);
    file_mode = 0666 & ~u;
}

int qk_out_open(qk_out *o, const char *dst, qk_err *err)
{
    pthread_once(&mode_once, read_umask);
    memset(o, 0, sizeof *o);
    size_t n = strlen(dst);
    o->dst = strdup(dst);
    o->tmp = malloc(n + 16);
    if (!o->dst || !o->tmp) {
        qk_out_abort(o);
        return qk_errf(err, QK_EIO, "%s: out of memory", dst);
    }
    memcpy(o->tmp, dst, n);
    memcpy(o->tmp + n, ".tmp.XXXXXX", 12);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        qk_err_sys(err, dst, "cannot create temporary output");
        free(o->tmp);
        o->tmp = NULL;
        qk_out_abort(o);
        return QK_EIO;
    }
    if (fchmod(fd, file_mode) != 0) {
        close(fd);
        qk_err_sys(err, dst, "cannot set mode of temporary output");
        qk_out_abort(o);
        return QK_EIO;
    }
    o->f = fdopen(fd, "wb");
    if (!o->f) {
        close(fd);
        qk_err_sys(err, dst, "cannot open temporary output");
        qk_out_abort(o);
        return QK_EIO;
    }
    return QK_OK;
}

int qk_out_write(qk_out *o, const void *buf, size_t n, qk_err *err)
{
    if (n && fwrite(buf, 1, n, o->f) != n)
        return qk_err_sys(err, o->dst, "write failed");
    o->written += n;
    return QK_OK;
}

int qk_out_pad(qk_out *o, size_t n, qk_err *err)
{
    static const unsigned char zeros[64];
    while (n > 0) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        int rc = qk_out_write(o, zeros, k, err);
        if (rc)
            return rc;
        n -= k;
    }
    return QK_OK;
}

int qk_out_commit(qk_out *o, qk_err *err)
{
    int rc = QK_OK;
    if (fflush(o->f) != 0 || fsync(fileno(o->f)) != 0)
        rc = qk_err_sys(err, o->dst, "write failed");
    if (fclose(o->f) != 0 && rc == QK_OK)
        rc = qk_err_sys(err, o->dst, "close failed");
    o->f = NULL;
    if (rc == QK_OK && rename(o->tmp, o->dst) != 0)
        rc = qk_err_sys(err, o->dst, "cannot rename into place");
    if (rc == QK_OK) {
        free(o->tmp);
        o->tmp = NULL;
    }
    qk_out_abort(o);
    return rc;
}

void qk_out_abort(qk_out *o)
{
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    if (o->tmp) {
        int saved = errno;
        unlink(o->tmp);
        errno = saved;
    }
    free(o->tmp);
    free(o->dst);
    o->tmp = NULL;
    o->dst = NULL;
}
