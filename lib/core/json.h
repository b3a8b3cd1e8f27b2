/* json.h - streaming JSON writer with automatic commas and indentation.
 * Numbers are printed so that they round-trip (%.9g for float, %.17g for
 * double); non-finite numbers become null.  Output bytes are deterministic. */
#ifndef QK_JSON_H
#define QK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define QK_JSON_MAX_DEPTH 32

typedef struct qk_json {
    FILE *f;
    int depth;
    bool first[QK_JSON_MAX_DEPTH];
    bool after_key;
    bool pretty;
} qk_json;

void qk_json_init(qk_json *j, FILE *f, bool pretty);
void qk_json_obj(qk_json *j);  /* { */
void qk_json_end_obj(qk_json *j);
void qk_json_arr(qk_json *j);  /* [ */
void qk_json_end_arr(qk_json *j);
void qk_json_key(qk_json *j, const char *key);
void qk_json_str(qk_json *j, const char *s);
void qk_json_strn(qk_json *j, const char *s, size_t n);
void qk_json_int(qk_json *j, int64_t v);
void qk_json_uint(qk_json *j, uint64_t v);
void qk_json_f32(qk_json *j, float v);
void qk_json_f64(qk_json *j, double v);
void qk_json_bool(qk_json *j, bool v);
void qk_json_null(qk_json *j);
/* Finish the document with a newline. */
void qk_json_done(qk_json *j);
/* Write s as a JSON string literal (with quotes) to f. */
void qk_json_escape(FILE *f, const char *s, size_t n);

#endif
