#include "threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    qk_range_fn fn;
    void *ctx;
    size_t n, grain, nranges;
    atomic_size_t next;
} job;

static void *worker(void *arg)
{
    job *jb = arg;
    for (;;) {
        size_t r = atomic_fetch_add(&jb->next, 1);
        if (r >= jb->nranges)
            break;
        size_t b = r * jb->grain;
        size_t e = b + jb->grain < jb->n ? b + jb->grain : jb->n;
        jb->fn(jb->ctx, b, e);
    }
    return NULL;
}

void qk_parallel_for(int nthreads, size_t n, size_t grain, qk_range_fn fn, void *ctx)
{
    if (n == 0)
        return;
    if (grain == 0)
        grain = 1;
    job jb = {.fn = fn, .ctx = ctx, .n = n, .grain = grain, .nranges = (n + grain - 1) / grain};
    atomic_init(&jb.next, 0);
    size_t nt = nthreads < 1 ? 1 : (size_t)nthreads;
    if (nt > jb.nranges)
        nt = jb.nranges;
    if (nt <= 1) {
        worker(&jb);
        return;
    }
    pthread_t *th = malloc((nt - 1) * sizeof *th);
    size_t started = 0;
    for (size_t i = 0; th && i < nt - 1; i++) {
        if (pthread_create(&th[i], NULL, worker, &jb) != 0)
            break;
        started++;
    }
    worker(&jb);
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
}

int qk_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
