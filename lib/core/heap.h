/* heap.h - a binary min-heap of fixed-size elements ordered by a caller's
 * "before" predicate (used by the tokenizers' bigram merge queues).
 * Ties are broken only by the predicate, so the pop order is deterministic. */
#ifndef QK_HEAP_H
#define QK_HEAP_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/core/err.h"

typedef struct qk_heap {
    unsigned char *v;
    size_t n, cap, size;                        /* elements, capacity, element size */
    bool (*before)(const void *a, const void *b); /* a pops before b */
} qk_heap;

static inline void qk_heap_init(qk_heap *h, size_t size, bool (*before)(const void *, const void *))
{
    *h = (qk_heap){.size = size, .before = before};
}
int qk_heap_push(qk_heap *h, const void *elem, qk_err *err);
/* Remove the first element into *out; the heap must not be empty. */
void qk_heap_pop(qk_heap *h, void *out);
void qk_heap_free(qk_heap *h);

#endif
