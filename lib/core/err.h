/* err.h - errors as values, carried up to the driver which prints one line.
 *
 * Exit codes (everywhere): 0 ok, 1 a check or threshold failed, 2 usage or
 * input error, 3 I/O or system error.  A function that fails fills a qk_err
 * and returns its code; the driver prints "prog: <msg>" and exits with it.
 */
#ifndef QK_ERR_H
#define QK_ERR_H

#include <stdint.h>

enum { QK_OK = 0, QK_EFAIL = 1, QK_EINPUT = 2, QK_EIO = 3 };

typedef struct qk_err {
    int code;
    char msg[1024];
} qk_err;

#if defined(__GNUC__)
#define QK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define QK_PRINTF(a, b)
#endif

/* Free-form message with an explicit code; returns code. */
int qk_errf(qk_err *e, int code, const char *fmt, ...) QK_PRINTF(3, 4);
/* Bad input: "FILE: FIELD at offset N: what"; code 2; returns 2. */
int qk_err_at(qk_err *e, const char *file, const char *field, uint64_t off,
              const char *fmt, ...) QK_PRINTF(5, 6);
/* System error: "FILE: what: strerror(errno)"; code 3; returns 3. */
int qk_err_sys(qk_err *e, const char *file, const char *what);
/* Print "prog: msg" on stderr and return the code (for drivers). */
int qk_err_report(const char *prog, const qk_err *e);

#endif
