#include "lib/core/tmpreg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define SLOTS 64

static _Atomic(char *) slot_path[SLOTS];
static _Atomic pid_t slot_pid[SLOTS];

static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
#define NSIGS (int)(sizeof sigs / sizeof sigs[0])
static struct sigaction old_act[NSIGS];

void qk_tmpreg_remove_tree(const char *dir)
{
    if (unlink(dir) == 0 || (errno != EISDIR && errno != EPERM))
        return; /* a file (or gone) */
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    for (int pass = 0; fd >= 0 && pass < 4; pass++) {
        /* getdents64 rather than readdir: no malloc, so a signal handler may call this */
        char buf[4096] __attribute__((aligned(8)));
        ssize_t n;
        lseek(fd, 0, SEEK_SET);
        while ((n = getdents64(fd, buf, sizeof buf)) > 0)
            for (ssize_t off = 0; off < n;) {
                const struct dirent64 *e = (const struct dirent64 *)(buf + off);
                off += e->d_reclen;
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                    unlinkat(fd, e->d_name, 0);
            }
        if (rmdir(dir) == 0 || errno != ENOTEMPTY)
            break;
    }
    if (fd >= 0)
        close(fd);
}

/* Remove every live temporary of this process; release: free the paths too
 * (at exit; a signal handler may not call free). */
static void remove_all(bool release)
{
    const pid_t me = getpid();
    for (int i = 0; i < SLOTS; i++) {
        if (atomic_load(&slot_pid[i]) != me)
            continue;
        char *p = atomic_exchange(&slot_path[i], NULL);
        if (p)
            qk_tmpreg_remove_tree(p);
        if (release)
            free(p);
    }
}

static void at_exit(void) { remove_all(true); }

static void on_signal(int sig)
{
    const int saved = errno;
    remove_all(false);
    for (int i = 0; i < NSIGS; i++)
        if (sigs[i] == sig)
            sigaction(sig, &old_act[i], NULL);
    errno = saved;
    raise(sig); /* delivered when this handler returns: the old disposition decides */
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void install(void)
{
    atexit(at_exit);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NSIGS; i++)
        sigaddset(&sa.sa_mask, sigs[i]);
    for (int i = 0; i < NSIGS; i++) {
        /* only over the default action: SIG_IGN (nohup) stays immune, and a
         * handler someone else installed stays theirs */
        if (sigaction(sigs[i], NULL, &old_act[i]) != 0 || (old_act[i].sa_flags & SA_SIGINFO) ||
            old_act[i].sa_handler != SIG_DFL)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

int qk_tmpreg_add(const char *path)
{
    pthread_once(&once, install);
    char *p = strdup(path);
    if (!p)
        return 0;
    const pid_t me = getpid();
    for (int i = 0; i < SLOTS; i++) {
        char *expect = NULL;
        if (atomic_load(&slot_path[i]) == NULL) {
            atomic_store(&slot_pid[i], me);
            if (atomic_compare_exchange_strong(&slot_path[i], &expect, p))
                return i + 1;
        }
    }
    free(p);
    return 0;
}

void qk_tmpreg_del(int live)
{
    if (live < 1 || live > SLOTS)
        return;
    free(atomic_exchange(&slot_path[live - 1], NULL));
}
