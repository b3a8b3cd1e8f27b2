/* testutil.h - small helpers shared by the Criterion tests. */
#ifndef QK_TESTUTIL_H
#define QK_TESTUTIL_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A note on what this machine could not check, on stderr.  Not
 * cr_log_warn: Criterion 2.4.1 exits 1 when a test logs a warning, so the
 * note failed make check on machines without the feature (an AVX2-only
 * CPU without AVX512-BF16); a test with nothing left to check calls
 * cr_skip_test instead. */
#define tu_note(...) (fprintf(stderr, "[NOTE] " __VA_ARGS__), fputc('\n', stderr))

/* Read a whole file; aborts the test when it cannot. */
static inline void *tu_read(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1); /* NUL-terminated, so text files can be used as strings */
    cr_assert(p);
    cr_assert_eq(fread(p, 1, (size_t)n, f), (size_t)n);
    p[n] = 0;
    fclose(f);
    if (size)
        *size = (size_t)n;
    return p;
}

/* Remove dir and everything below it (links are removed, not followed). */
static inline void tu_rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[1024];
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p)
            continue;
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            tu_rm_rf(p);
        else
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Deterministic xorshift64* generator and a Gaussian from it. */
static inline uint64_t tu_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}
static inline double tu_uniform(uint64_t *s) { return (double)(tu_rand(s) >> 11) * 0x1p-53; }
static inline float tu_gauss(uint64_t *s)
{
    double u1 = tu_uniform(s), u2 = tu_uniform(s);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return (float)(__builtin_sqrt(-2.0 * __builtin_log(u1)) * __builtin_cos(6.283185307179586 * u2));
}

#endif
