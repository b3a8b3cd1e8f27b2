#include "lib/core/progress.h"

#include <stdio.h>
#include <unistd.h>

void qk_progress_init(qk_progress *p, const char *label, uint64_t total, bool quiet)
{
    p->on = !quiet && isatty(2);
    p->label = label;
    p->total = total ? total : 1;
    p->done = 0;
    p->last_pct = -1;
}

void qk_progress_add(qk_progress *p, uint64_t n)
{
    p->done += n;
    if (!p->on)
        return;
    int pct = (int)(p->done * 100 / p->total);
    if (pct > 100)
        pct = 100;
    if (pct == p->last_pct)
        return;
    p->last_pct = pct;
    int bar = pct * 30 / 100;
    fprintf(stderr, "\r%s [", p->label);
    for (int i = 0; i < 30; i++)
        fputc(i < bar ? '#' : '.', stderr);
    fprintf(stderr, "] %3d%%", pct);
    fflush(stderr);
}

void qk_progress_end(qk_progress *p)
{
    if (p->on && p->last_pct >= 0)
        fputs("\r\033[K", stderr);
    p->on = false;
}
