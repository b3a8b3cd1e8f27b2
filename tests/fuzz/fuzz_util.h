/* fuzz_util.h - shared by the libFuzzer harnesses: the input as a file (for
 * readers that take a path), the bad-input contract, and splitting one input
 * into several documents. */
#ifndef QK_FUZZ_UTIL_H
#define QK_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/core/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* data[0..size) as the contents of a file; returns its path (one memfd,
 * rewritten each call). */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("qk-fuzz", MFD_CLOEXEC);
        if (fd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0)
        abort();
    for (size_t done = 0; done < size;) {
        ssize_t k = pwrite(fd, data + done, size - done, (off_t)done);
        if (k <= 0)
            abort();
        done += (size_t)k;
    }
    return path;
}

/* A reader refused the input: it must be bad input (code 2), said in one
 * line that names the file.  Anything else is a finding. */
static inline void fuzz_refused(int rc, const qk_err *e, const char *name)
{
    if (rc != QK_EINPUT || !e->msg[0] || strchr(e->msg, '\n') || (name && !strstr(e->msg, name))) {
        fprintf(stderr, "bad refusal (code %d): %s\n", rc, e->msg);
        abort();
    }
}

/* Split data at NUL bytes into at most max parts (the last takes the rest);
 * returns the number of parts.  JSON text holds no raw NUL, so one input can
 * carry a config.json, an hf_quant_config.json and a safetensors file. */
static inline int fuzz_split(const uint8_t *data, size_t size, int max, const uint8_t **p, size_t *n)
{
    int k = 0;
    size_t start = 0;
    for (size_t i = 0; i < size && k < max - 1; i++)
        if (data[i] == 0) {
            p[k] = data + start;
            n[k++] = i - start;
            start = i + 1;
        }
    p[k] = data + start;
    n[k++] = size - start;
    return k;
}

/* A scratch directory for harnesses whose reader takes a directory: made
 * once (in /dev/shm where it can be written), its files names[0..n) and the
 * directory removed at exit.  fuzz_dir_put writes one file; an empty part
 * means no such file. */
static char fuzz_dir_path[64];
static const char *const *fuzz_dir_names;
static int fuzz_dir_n;

static inline void fuzz_dir_put(const char *name, const uint8_t *data, size_t n)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, name);
    unlink(p);
    if (!n)
        return;
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f))
        abort();
}

static inline void fuzz_dir_cleanup(void)
{
    for (int i = 0; i < fuzz_dir_n; i++)
        fuzz_dir_put(fuzz_dir_names[i], NULL, 0);
    rmdir(fuzz_dir_path);
}

/* The directory's path, made on the first call (tag names it). */
static inline const char *fuzz_dir(const char *tag, const char *const *names, int n)
{
    if (!fuzz_dir_path[0]) {
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/qk-fuzz-%s-XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", tag);
        if (!mkdtemp(fuzz_dir_path))
            abort();
        fuzz_dir_names = names, fuzz_dir_n = n;
        atexit(fuzz_dir_cleanup);
    }
    return fuzz_dir_path;
}

#endif
