#include "lib/core/mapfile.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int qk_map_open(qk_map *m, const char *path, qk_err *err)
{
    m->data = NULL;
    m->size = 0;
    m->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m->fd < 0)
        return qk_err_sys(err, path, "cannot open");
    struct stat st;
    if (fstat(m->fd, &st) != 0) {
        qk_err_sys(err, path, "cannot stat");
        close(m->fd);
        m->fd = -1;
        return QK_EIO;
    }
    if (S_ISDIR(st.st_mode)) {
        close(m->fd);
        m->fd = -1;
        return qk_errf(err, QK_EINPUT, "%s: is a directory", path);
    }
    m->size = (size_t)st.st_size;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, m->fd, 0);
        if (p == MAP_FAILED) {
            qk_err_sys(err, path, "cannot map");
            close(m->fd);
            m->fd = -1;
            return QK_EIO;
        }
        m->data = p;
    }
    return QK_OK;
}

void qk_map_close(qk_map *m)
{
    if (m->data)
        munmap((void *)m->data, m->size);
    if (m->fd >= 0)
        close(m->fd);
    m->data = NULL;
    m->size = 0;
    m->fd = -1;
}

void qk_map_release(const void *p, size_t n)
{
    const long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return;
    const uintptr_t a = (uintptr_t)p, pg = (uintptr_t)ps;
    const uintptr_t lo = (a + pg - 1) / pg * pg, hi = (a + n) / pg * pg;
    if (hi > lo) /* advice only: a failure leaves the pages resident */
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

int qk_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
