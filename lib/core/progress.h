/* progress.h - a progress bar on stderr, drawn only when stderr is a TTY and
 * the command was not given -q.  Silent otherwise (scripts, CI). */
#ifndef QK_PROGRESS_H
#define QK_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct qk_progress {
    bool on;
    const char *label;
    uint64_t total, done;
    int last_pct;
} qk_progress;

void qk_progress_init(qk_progress *p, const char *label, uint64_t total, bool quiet);
void qk_progress_add(qk_progress *p, uint64_t n);
void qk_progress_end(qk_progress *p);

#endif
