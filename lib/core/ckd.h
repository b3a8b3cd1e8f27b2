/* ckd.h - overflow-checked size arithmetic.  Every size computed from input
 * goes through these.  Each returns true when the result OVERFLOWED (like C23
 * ckd_add/ckd_mul), leaving *r unspecified. */
#ifndef QK_CKD_H
#define QK_CKD_H

#include <stdbool.h>
#include <stdint.h>

static inline bool qk_ckd_add(uint64_t *r, uint64_t a, uint64_t b) { return __builtin_add_overflow(a, b, r); }
static inline bool qk_ckd_mul(uint64_t *r, uint64_t a, uint64_t b) { return __builtin_mul_overflow(a, b, r); }
/* Round a up to a multiple of align (align > 0). */
static inline bool qk_ckd_align(uint64_t *r, uint64_t a, uint64_t align)
{
    uint64_t t;
    if (__builtin_add_overflow(a, align - 1, &t))
        return true;
    *r = t - t % align;
    return false;
}

/* Whether a zstd frame of n bytes can decompress to raw bytes: at most 32768 n
 * (each block of at most 128 KiB costs a 3-byte header and a 1-byte RLE
 * body).  Check a size read from a header with it before allocating. */
static inline bool qk_ckd_zstd_fits(uint64_t raw, uint64_t n) { return n && raw / 32768 <= n; }

#endif
