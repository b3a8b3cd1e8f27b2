/* sha256.h - SHA-256 (FIPS 180-4), for content hashes that must equal
 * Python's hashlib.sha256 (convert_hf_to_gguf.py's tokenizer check hash,
 * whole-file hashes in the tests). */
#ifndef QK_SHA256_H
#define QK_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct qk_sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t n;
} qk_sha256;

void qk_sha256_init(qk_sha256 *s);
void qk_sha256_update(qk_sha256 *s, const void *data, size_t n);
void qk_sha256_final(qk_sha256 *s, uint8_t out[32]);
/* Hex digest (64 characters and a NUL) of data[0..n). */
void qk_sha256_hex(const void *data, size_t n, char out[65]);
void qk_sha256_to_hex(const uint8_t d[32], char out[65]);

#endif
