/* jsonp.h - a small JSON (RFC 8259) parser into a read-only tree.
 *
 * The whole text is parsed up front into a DOM: objects keep their members
 * in file order, every value remembers the byte offset in the buffer where
 * it starts (for "at offset N" error messages), strings are unescaped to
 * UTF-8 (\uXXXX escapes with surrogate pairs; lone surrogates, raw control
 * characters and invalid UTF-8 are errors), numbers keep their double value
 * and, when written as an integer that fits, the exact int64/uint64 value.
 * Nesting is limited to QK_JSONP_MAX_DEPTH; all sizes are overflow-checked;
 * errors are returned as values, never abort().
 */
#ifndef QK_JSONP_H
#define QK_JSONP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QK_JSONP_MAX_DEPTH 64

typedef enum qk_jtype {
    QK_JNULL = 0, QK_JBOOL, QK_JNUM, QK_JSTR, QK_JARR, QK_JOBJ
} qk_jtype;

/* Number flags. */
enum {
    QK_JNUM_INT = 1, /* written as an integer (no fraction, no exponent) */
    QK_JNUM_I64 = 2, /* .i holds the exact value */
    QK_JNUM_U64 = 4, /* .u holds the exact value (non-negative) */
};

typedef struct qk_jsonv qk_jsonv;
typedef struct qk_jsonm {
    char *key;        /* unescaped, NUL-terminated (may hold embedded NULs) */
    size_t key_len;
    uint64_t key_off; /* offset of the key's opening quote */
    qk_jsonv *val;
} qk_jsonm;

struct qk_jsonv {
    qk_jtype type;
    uint64_t off;     /* offset of the value's first byte in the buffer */
    union {
        bool b;
        struct { double d; int64_t i; uint64_t u; unsigned flags; } num;
        struct { char *s; size_t len; } str;
        struct { qk_jsonv **items; size_t n; } arr;
        struct { qk_jsonm *m; size_t n; } obj;
    };
};

typedef struct qk_jsonp_err {
    uint64_t off;     /* byte offset in the buffer where parsing failed */
    char msg[160];
} qk_jsonp_err;

/* Parse flags. */
enum {
    QK_JSONP_NO_DUP_KEYS = 1, /* a key twice in one object is an error */
};

/* Parse buf[0..n) (one JSON value, surrounded by optional whitespace).
 * Returns 0 and sets *root, or -1 and fills e. */
int qk_jsonp_parse(const char *buf, size_t n, unsigned flags, qk_jsonv **root, qk_jsonp_err *e);
void qk_jsonv_free(qk_jsonv *v);

/* "null", "boolean", "number", "string", "array", "object". */
const char *qk_jtype_name(qk_jtype t);

/* Accessors: all accept NULL and return NULL / false / 0 on type mismatch. */
bool qk_jsonv_is(const qk_jsonv *v, qk_jtype t);
/* Member by key: the last one when a key repeats (as Python's json does). */
const qk_jsonv *qk_jsonv_get(const qk_jsonv *obj, const char *key);
const qk_jsonv *qk_jsonv_at(const qk_jsonv *arr, size_t i);
/* Members of an object or items of an array; 0 for other types. */
size_t qk_jsonv_len(const qk_jsonv *v);
const qk_jsonm *qk_jsonv_member(const qk_jsonv *obj, size_t i);
const char *qk_jsonv_str(const qk_jsonv *v);
/* Integers: true when v is a number with an exact integral value in range
 * (1, 1.0 and 1e0 all qualify). */
bool qk_jsonv_i64(const qk_jsonv *v, int64_t *out);
bool qk_jsonv_u64(const qk_jsonv *v, uint64_t *out);
bool qk_jsonv_f64(const qk_jsonv *v, double *out);
bool qk_jsonv_bool(const qk_jsonv *v, bool *out);
/* Convenience: member key of obj as a string / bool / integer, with a
 * default when absent or of another type. */
const char *qk_jsonv_get_str(const qk_jsonv *obj, const char *key, const char *dflt);
bool qk_jsonv_get_bool(const qk_jsonv *obj, const char *key, bool dflt);
int64_t qk_jsonv_get_i64(const qk_jsonv *obj, const char *key, int64_t dflt);

#endif
