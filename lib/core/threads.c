/* threads.c - qk_parallel_for on a persistent pool of worker threads.
 *
 * The partition is fixed (threads.h): range r is [r*grain, min(n, (r+1)*grain)),
 * whichever thread runs it, so results never depend on the thread count or
 * on which thread took a range.
 *
 * The pool is process-wide infrastructure (the one piece of global mutable
 * state here, behind a mutex): workers are started on first use, up to the
 * largest nthreads - 1 asked for, and then wait for jobs, first spinning
 * (a one-token decode issues hundreds of small jobs per token, and a futex
 * wake-up per job would cost more than the job), then spinning with a
 * yield to any other runnable thread, then on a condition variable.  With
 * the second phase (about a millisecond) bench250m decode on 2 threads went
 * from 41-47 to 50-53 t/s (F16) and from 124-130 to 133-154 (Q4_K_M).  One
 * caller at a time owns the pool; a concurrent or nested call falls back to threads started for that call, with the same partition.
 * After fork() the child starts with an empty pool.  At exit the workers are
 * told to quit and joined, so nothing they hold outlives the process' end
 * (valgrind-clean). */
#include "lib/core/threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_WORKERS 255
#define SPIN_WAIT 1000   /* pause-only polls (about 20-40 us) */
#define YIELD_WAIT 2000  /* then polls with a yield, before sleeping */

typedef struct {
    qk_range_fn fn;
    void *ctx;
    size_t n, grain, nranges;
    atomic_size_t next;
} job;

/* Run ranges of jb until none are left. */
static void run_ranges(job *jb)
{
    for (;;) {
        size_t r = atomic_fetch_add(&jb->next, 1);
        if (r >= jb->nranges)
            break;
        size_t b = r * jb->grain;
        size_t e = b + jb->grain < jb->n ? b + jb->grain : jb->n;
        jb->fn(jb->ctx, b, e);
    }
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Poll i of a wait: a pause, and after SPIN_WAIT of them a yield too, so a
 * waiter on a busy machine gives its core to a thread that has work. */
static inline void wait_poll(int i)
{
    if (i >= SPIN_WAIT)
        sched_yield();
    cpu_relax();
}

/* ---- the pool ---------------------------------------------------------------- */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    pthread_t th[MAX_WORKERS];
    uint64_t start[MAX_WORKERS]; /* ticket when each worker was started */
    int nth;                 /* workers started */
    job jb;                  /* the current job */
    /* ticket = generation << 8 | number of workers taking part; published
     * after jb, so a worker that reads a new ticket sees its job */
    _Atomic uint64_t ticket;
    atomic_int pending;      /* taking part and not yet finished */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static pthread_mutex_t owner = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool quitting;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void *worker(void *arg)
{
    const int idx = (int)(intptr_t)arg;
    uint64_t seen = pool.start[idx]; /* jobs published after its start are its own */
    for (;;) {
        uint64_t t = seen;
        for (int i = 0; i < SPIN_WAIT + YIELD_WAIT && t == seen; i++) {
            wait_poll(i);
            t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
        }
        if (t == seen) {
            pthread_mutex_lock(&pool.mu);
            while ((t = atomic_load_explicit(&pool.ticket, memory_order_acquire)) == seen)
                pthread_cond_wait(&pool.wake, &pool.mu);
            pthread_mutex_unlock(&pool.mu);
        }
        seen = t;
        if (atomic_load(&quitting))
            return NULL;
        if (idx >= (int)(t & 0xff))
            continue; /* not needed for this job */
        run_ranges(&pool.jb);
        if (atomic_fetch_sub(&pool.pending, 1) == 1) {
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
    return NULL;
}

/* fork(): the child has none of the workers; forget them. */
static void atfork_child(void)
{
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pthread_mutex_init(&owner, NULL);
    pool.nth = 0;
}

/* exit(): wake every worker with the quit flag set and join them. */
static void shutdown_pool(void)
{
    if (pool.nth == 0)
        return;
    pthread_mutex_lock(&pool.mu);
    atomic_store(&quitting, true);
    atomic_store_explicit(&pool.ticket, ((atomic_load(&pool.ticket) >> 8) + 1) << 8,
                          memory_order_release);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.nth; i++)
        pthread_join(pool.th[i], NULL);
    pool.nth = 0;
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, atfork_child);
    atexit(shutdown_pool);
}

/* Start workers until there are want of them; returns how many there are. */
static int grow(int want)
{
    pthread_once(&atfork_once, register_atfork);
    while (pool.nth < want) {
        pool.start[pool.nth] = atomic_load(&pool.ticket);
        int rc = pthread_create(&pool.th[pool.nth], NULL, worker, (void *)(intptr_t)pool.nth);
        if (rc != 0)
            break;
        pool.nth++;
    }
    return pool.nth;
}

static void run_pooled(job *src, int nworkers)
{
    pool.jb.fn = src->fn;
    pool.jb.ctx = src->ctx;
    pool.jb.n = src->n;
    pool.jb.grain = src->grain;
    pool.jb.nranges = src->nranges;
    atomic_store(&pool.jb.next, 0);
    atomic_store(&pool.pending, nworkers);
    const uint64_t gen = (atomic_load(&pool.ticket) >> 8) + 1;
    pthread_mutex_lock(&pool.mu);
    atomic_store_explicit(&pool.ticket, gen << 8 | (uint64_t)nworkers, memory_order_release);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    run_ranges(&pool.jb);
    for (int i = 0; i < SPIN_WAIT + YIELD_WAIT && atomic_load(&pool.pending) > 0; i++)
        wait_poll(i);
    if (atomic_load(&pool.pending) > 0) {
        pthread_mutex_lock(&pool.mu);
        while (atomic_load(&pool.pending) > 0)
            pthread_cond_wait(&pool.done, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
}

/* ---- fallback: threads for this call only -------------------------------------- */

static void *spawned(void *arg)
{
    run_ranges(arg);
    return NULL;
}

static void run_spawned(job *jb, size_t nt)
{
    pthread_t *th = malloc((nt - 1) * sizeof *th);
    size_t started = 0;
    for (size_t i = 0; th && i < nt - 1; i++) {
        if (pthread_create(&th[i], NULL, spawned, jb) != 0)
            break;
        started++;
    }
    run_ranges(jb);
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
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
        run_ranges(&jb);
        return;
    }
    if (nt - 1 <= MAX_WORKERS && !atomic_load(&quitting) && pthread_mutex_trylock(&owner) == 0) {
        const int have = grow((int)nt - 1);
        if (have > 0) {
            run_pooled(&jb, have < (int)nt - 1 ? have : (int)nt - 1);
            pthread_mutex_unlock(&owner);
            return;
        }
        pthread_mutex_unlock(&owner);
    }
    run_spawned(&jb, nt);
}

int qk_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
