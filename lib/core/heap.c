#include "lib/core/heap.h"

#include <stdlib.h>
#include <string.h>

#define AT(h, i) ((h)->v + (i) * (h)->size)

int qk_heap_push(qk_heap *h, const void *elem, qk_err *err)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        unsigned char *v = realloc(h->v, cap * h->size);
        if (!v)
            return qk_errf(err, QK_EIO, "out of memory");
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) { /* sift up */
        size_t p = (i - 1) / 2;
        if (!h->before(elem, AT(h, p)))
            break;
        memcpy(AT(h, i), AT(h, p), h->size);
        i = p;
    }
    memcpy(AT(h, i), elem, h->size);
    return 0;
}

void qk_heap_pop(qk_heap *h, void *out)
{
    memcpy(out, AT(h, 0), h->size);
    const unsigned char *last = AT(h, --h->n);
    size_t i = 0;
    for (;;) { /* sift the last element down from the root */
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->before(AT(h, c + 1), AT(h, c)))
            c++;
        if (!h->before(AT(h, c), last))
            break;
        memcpy(AT(h, i), AT(h, c), h->size);
        i = c;
    }
    if (h->n)
        memcpy(AT(h, i), last, h->size);
}

void qk_heap_free(qk_heap *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}
