#include "lib/core/outfile.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/files.h"

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

int qk_out_write_file(const char *dst, const void *buf, size_t n, qk_err *err)
{
    qk_out o;
    int rc = qk_out_open(&o, dst, err);
    if (!rc && ((rc = qk_out_write(&o, buf, n, err)) || (rc = qk_out_commit(&o, err))))
        qk_out_abort(&o);
    return rc;
}

/* ---- directories -------------------------------------------------------------------- */

static bool empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool empty = d != NULL;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = false;
    if (d)
        closedir(d);
    return empty;
}

/* Remove dir and the files in it (the output directories hold no subdirectories). */
static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *p = qk_path_join(dir, e->d_name);
        if (p)
            unlink(p);
        free(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int qk_outdir_open(qk_outdir *d, const char *dst, qk_err *err)
{
    memset(d, 0, sizeof *d);
    size_t dl = strlen(dst);
    while (dl > 1 && dst[dl - 1] == '/')
        dl--;
    if (!dl)
        return qk_errf(err, QK_EINPUT, "empty output directory name");
    if (!(d->dst = strndup(dst, dl)) || !(d->tmp = malloc(dl + 16))) {
        qk_outdir_abort(d);
        return qk_errf(err, QK_EIO, "%s: out of memory", dst);
    }
    struct stat st;
    d->replace_empty = stat(d->dst, &st) == 0;
    if (d->replace_empty && !(S_ISDIR(st.st_mode) && empty_dir(d->dst))) {
        int rc = qk_errf(err, QK_EINPUT, "%s: exists and is not an empty directory (refusing to overwrite)", d->dst);
        free(d->tmp);
        d->tmp = NULL;
        qk_outdir_abort(d);
        return rc;
    }
    snprintf(d->tmp, dl + 16, "%s.tmp.XXXXXX", d->dst);
    if (!mkdtemp(d->tmp)) {
        int rc = qk_err_sys(err, d->tmp, "cannot create");
        free(d->tmp);
        d->tmp = NULL;
        qk_outdir_abort(d);
        return rc;
    }
    return QK_OK;
}

char *qk_outdir_path(const qk_outdir *d, const char *name) { return qk_path_join(d->tmp, name); }

int qk_outdir_commit(qk_outdir *d, qk_err *err)
{
    int rc = QK_OK;
    if (d->replace_empty && rmdir(d->dst) != 0)
        rc = qk_err_sys(err, d->dst, "cannot replace the empty directory");
    else if (rename(d->tmp, d->dst) != 0)
        rc = qk_err_sys(err, d->dst, "cannot rename the finished output into place");
    else {
        free(d->tmp);
        d->tmp = NULL;
    }
    qk_outdir_abort(d);
    return rc;
}

void qk_outdir_abort(qk_outdir *d)
{
    if (d->tmp) {
        int saved = errno;
        remove_tree(d->tmp);
        errno = saved;
    }
    free(d->tmp);
    free(d->dst);
    d->tmp = NULL;
    d->dst = NULL;
}
