#include "lib/core/outfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/files.h"
#include "lib/core/tmpreg.h"

/* mkstemp creates 0600 and mkdtemp 0700; outputs get the usual 0666 (0777)
 * & ~umask.  umask can only be read by setting it, so read it once. */
static mode_t umask_bits;
static bool proc_fd_ok; /* /proc/self/fd/N can name an O_TMPFILE file for linkat */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init(void)
{
    mode_t u = umask(022);
    umask(u);
    umask_bits = u;
    struct sigaction old;
    if (sigaction(SIGXFSZ, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
        signal(SIGXFSZ, SIG_IGN);
    proc_fd_ok = access("/proc/self/fd", X_OK) == 0;
}

void qk_out_init(void) { pthread_once(&init_once, init); }

/* Block the signals the registry handles while a named temporary is created
 * and registered, so that no signal can fall between the two. */
static void block_signals(sigset_t *old)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &s, old);
}
static void restore_signals(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* ---- the stream: a FILE over the descriptor that remembers the first write error ---- */

struct qk_out_sink {
    int fd;
    int errnum;   /* errno of the first failed write, 0 if none */
    bool discard; /* aborting: drop what is still buffered */
};

static ssize_t sink_write(void *cookie, const char *buf, size_t n)
{
    struct qk_out_sink *s = cookie;
    if (s->discard)
        return (ssize_t)n;
    if (s->errnum)
        return -1;
    for (size_t done = 0; done < n;) {
        ssize_t k = write(s->fd, buf + done, n - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            s->errnum = k < 0 ? errno : EIO;
            return -1;
        }
        done += (size_t)k;
    }
    return (ssize_t)n;
}

/* DST's directory ("." for a bare name), malloc'd. */
static char *dir_of(const char *dst)
{
    const char *slash = strrchr(dst, '/');
    if (!slash)
        return strdup(".");
    return strndup(dst, slash == dst ? 1 : (size_t)(slash - dst));
}

/* An unnamed file in DST's directory, or -1 where O_TMPFILE is not to be had. */
static int open_unnamed(const char *dst)
{
#ifdef O_TMPFILE
    const char *named = getenv("QK_OUT_NAMED");
    if (!proc_fd_ok || (named && *named && strcmp(named, "0")))
        return -1;
    char *dir = dir_of(dst);
    int fd = dir ? open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666) : -1;
    free(dir);
    return fd;
#else
    (void)dst;
    return -1;
#endif
}

/* Link the unnamed file fd at path (which must not exist). */
static int link_unnamed(int fd, const char *path)
{
    if (linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH) == 0)
        return 0;
    if (errno != ENOENT && errno != EPERM && errno != EINVAL) /* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH */
        return -1;
    char p[32];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, p, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}

/* "DST.tmp.XXXXXX" with six fresh characters (for a name linkat may claim). */
static void unique_name(char *out, size_t cap, const char *dst)
{
    static _Atomic unsigned long seq;
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
                 (atomic_fetch_add(&seq, 1) * 0x9e3779b97f4a7c15ull);
    char r[7];
    for (int i = 0; i < 6; i++) {
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ull;
        r[i] = abc[(x >> 33) % (sizeof abc - 1)];
    }
    r[6] = 0;
    snprintf(out, cap, "%s.tmp.%s", dst, r);
}

int qk_out_open(qk_out *o, const char *dst, qk_err *err)
{
    qk_out_init();
    memset(o, 0, sizeof *o);
    size_t n = strlen(dst);
    o->dst = strdup(dst);
    o->sink = calloc(1, sizeof *o->sink);
    if (!o->dst || !o->sink) {
        qk_out_abort(o);
        return qk_errf(err, QK_EIO, "%s: out of memory", dst);
    }
    o->sink->fd = -1;
    int fd = open_unnamed(dst);
    if (fd < 0) {
        if (!(o->tmp = malloc(n + 16))) {
            qk_out_abort(o);
            return qk_errf(err, QK_EIO, "%s: out of memory", dst);
        }
        memcpy(o->tmp, dst, n);
        memcpy(o->tmp + n, ".tmp.XXXXXX", 12);
        sigset_t old;
        block_signals(&old);
        fd = mkostemp(o->tmp, O_CLOEXEC);
        if (fd >= 0)
            o->live = qk_tmpreg_add(o->tmp);
        restore_signals(&old);
        if (fd < 0) {
            qk_err_sys(err, dst, "cannot create temporary output");
            free(o->tmp);
            o->tmp = NULL;
            qk_out_abort(o);
            return QK_EIO;
        }
        if (fchmod(fd, 0666 & ~umask_bits) != 0) {
            close(fd);
            qk_err_sys(err, dst, "cannot set mode of temporary output");
            qk_out_abort(o);
            return QK_EIO;
        }
    }
    o->sink->fd = fd;
    o->f = fopencookie(o->sink, "w", (cookie_io_functions_t){.write = sink_write});
    if (!o->f) {
        qk_err_sys(err, dst, "cannot open temporary output");
        qk_out_abort(o);
        return QK_EIO;
    }
    setvbuf(o->f, NULL, _IOFBF, 1 << 18);
    return QK_OK;
}

/* The write error: the first failed write's errno when known. */
static int write_failed(qk_out *o, qk_err *err)
{
    if (o->sink && o->sink->errnum)
        errno = o->sink->errnum;
    else if (!errno)
        errno = EIO;
    return qk_err_sys(err, o->dst, "write failed");
}

int qk_out_write(qk_out *o, const void *buf, size_t n, qk_err *err)
{
    if (o->sink->errnum || (n && fwrite(buf, 1, n, o->f) != n))
        return write_failed(o, err);
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

int qk_out_pwrite(qk_out *o, uint64_t off, const void *buf, size_t n, qk_err *err)
{
    if (off > o->written || n > o->written - off)
        return qk_errf(err, QK_EIO, "%s: internal error: rewrite past the end", o->dst);
    if (fflush(o->f) != 0 || o->sink->errnum)
        return write_failed(o, err);
    for (size_t done = 0; done < n;) {
        ssize_t k = pwrite(o->sink->fd, (const char *)buf + done, n - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            o->sink->errnum = k < 0 ? errno : EIO;
            return write_failed(o, err);
        }
        done += (size_t)k;
    }
    return QK_OK;
}

/* fsync a directory so the names in it last; EINVAL: the filesystem has no such thing. */
static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd) != 0 && errno != EINVAL ? -1 : 0;
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* Put the finished unnamed file at o->dst: linked there, or when DST exists
 * linked at a fresh name and renamed over it. */
static int place_unnamed(qk_out *o, qk_err *err)
{
    int fd = o->sink->fd;
    if (link_unnamed(fd, o->dst) == 0)
        return QK_OK;
    if (errno != EEXIST)
        return qk_err_sys(err, o->dst, "cannot put the output in place");
    size_t cap = strlen(o->dst) + 16;
    char *name = malloc(cap);
    if (!name)
        return qk_errf(err, QK_EIO, "%s: out of memory", o->dst);
    int live = 0, rc = -1;
    for (int tries = 0; tries < 100 && rc != 0; tries++) {
        unique_name(name, cap, o->dst);
        sigset_t old;
        block_signals(&old);
        if ((rc = link_unnamed(fd, name)) == 0)
            live = qk_tmpreg_add(name);
        restore_signals(&old);
        if (rc != 0 && errno != EEXIST)
            break;
    }
    int code = QK_OK;
    if (rc != 0)
        code = qk_err_sys(err, o->dst, "cannot put the output in place");
    else if (rename(name, o->dst) != 0) {
        code = qk_err_sys(err, o->dst, "cannot rename into place");
        unlink(name);
    }
    qk_tmpreg_del(live);
    free(name);
    return code;
}

int qk_out_commit(qk_out *o, qk_err *err)
{
    int rc = QK_OK;
    errno = 0;
    if (fflush(o->f) != 0 || ferror(o->f) || o->sink->errnum)
        rc = write_failed(o, err);
    else if (fsync(o->sink->fd) != 0)
        rc = qk_err_sys(err, o->dst, "write failed");
    else if (!o->tmp)
        rc = place_unnamed(o, err);
    else if (rename(o->tmp, o->dst) != 0)
        rc = qk_err_sys(err, o->dst, "cannot rename into place");
    else {
        qk_tmpreg_del(o->live);
        o->live = 0;
        free(o->tmp);
        o->tmp = NULL;
    }
    if (rc == QK_OK) {
        /* In place and complete: the directory's fsync only makes the new
         * name survive a power cut, so its failure is not the output's. */
        char *dir = dir_of(o->dst);
        if (dir)
            fsync_dir(dir);
        free(dir);
    }
    qk_out_abort(o);
    return rc;
}

void qk_out_abort(qk_out *o)
{
    int saved = errno;
    if (o->f) {
        o->sink->discard = true;
        fclose(o->f);
    }
    o->f = NULL;
    if (o->sink && o->sink->fd >= 0)
        close(o->sink->fd);
    if (o->tmp)
        unlink(o->tmp);
    qk_tmpreg_del(o->live);
    free(o->sink);
    free(o->tmp);
    free(o->dst);
    memset(o, 0, sizeof *o);
    errno = saved;
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

int qk_outdir_open(qk_outdir *d, const char *dst, qk_err *err)
{
    qk_out_init();
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
    sigset_t old;
    block_signals(&old);
    bool made = mkdtemp(d->tmp) != NULL;
    if (made)
        d->live = qk_tmpreg_add(d->tmp);
    restore_signals(&old);
    if (!made) {
        int rc = qk_err_sys(err, d->tmp, "cannot create");
        free(d->tmp);
        d->tmp = NULL;
        qk_outdir_abort(d);
        return rc;
    }
    if (chmod(d->tmp, 0777 & ~umask_bits) != 0) {
        int rc = qk_err_sys(err, d->tmp, "cannot set mode of");
        qk_outdir_abort(d);
        return rc;
    }
    return QK_OK;
}

char *qk_outdir_path(const qk_outdir *d, const char *name) { return qk_path_join(d->tmp, name); }

int qk_outdir_commit(qk_outdir *d, qk_err *err)
{
    int rc = QK_OK;
    if (fsync_dir(d->tmp) != 0)
        rc = qk_err_sys(err, d->dst, "write failed");
    else if (d->replace_empty && rmdir(d->dst) != 0)
        rc = qk_err_sys(err, d->dst, "cannot replace the empty directory");
    else if (rename(d->tmp, d->dst) != 0)
        rc = qk_err_sys(err, d->dst, "cannot rename the finished output into place");
    else {
        qk_tmpreg_del(d->live);
        d->live = 0;
        free(d->tmp);
        d->tmp = NULL;
        char *parent = dir_of(d->dst);
        if (parent)
            fsync_dir(parent); /* as for files: the output is complete either way */
        free(parent);
    }
    qk_outdir_abort(d);
    return rc;
}

void qk_outdir_name_err(const qk_outdir *d, qk_err *err)
{
    const size_t tl = d->tmp ? strlen(d->tmp) : 0;
    char *at = tl ? strstr(err->msg, d->tmp) : NULL;
    if (!at)
        return;
    char rest[sizeof err->msg];
    snprintf(rest, sizeof rest, "%s", at + tl);
    snprintf(at, sizeof err->msg - (size_t)(at - err->msg), "%s%s", d->dst, rest);
}

void qk_outdir_abort(qk_outdir *d)
{
    int saved = errno;
    if (d->tmp)
        qk_tmpreg_remove_tree(d->tmp);
    qk_tmpreg_del(d->live);
    free(d->tmp);
    free(d->dst);
    memset(d, 0, sizeof *d);
    errno = saved;
}
