#include "lib/core/json.h"

#include <math.h>
#include <string.h>

void qk_json_init(qk_json *j, FILE *f, bool pretty)
{
    memset(j, 0, sizeof *j);
    j->f = f;
    j->pretty = pretty;
    j->first[0] = true;
}

static void indent(qk_json *j)
{
    if (!j->pretty)
        return;
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++)
        fputs("  ", j->f);
}

/* Called before every value or key: comma and newline as needed. */
static void before(qk_json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->depth > 0) {
        if (!j->first[j->depth])
            fputc(',', j->f);
        indent(j);
    }
    j->first[j->depth] = false;
}

static void open_(qk_json *j, char c)
{
    before(j);
    fputc(c, j->f);
    if (j->depth + 1 < QK_JSON_MAX_DEPTH)
        j->depth++;
    j->first[j->depth] = true;
}

static void close_(qk_json *j, char c)
{
    bool empty = j->first[j->depth];
    if (j->depth > 0)
        j->depth--;
    if (!empty)
        indent(j);
    fputc(c, j->f);
}

void qk_json_obj(qk_json *j) { open_(j, '{'); }
void qk_json_end_obj(qk_json *j) { close_(j, '}'); }
void qk_json_arr(qk_json *j) { open_(j, '['); }
void qk_json_end_arr(qk_json *j) { close_(j, ']'); }

void qk_json_escape(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

void qk_json_key(qk_json *j, const char *key)
{
    before(j);
    qk_json_escape(j->f, key, strlen(key));
    fputs(j->pretty ? ": " : ":", j->f);
    j->after_key = true;
}

void qk_json_strn(qk_json *j, const char *s, size_t n)
{
    before(j);
    qk_json_escape(j->f, s, n);
}

void qk_json_str(qk_json *j, const char *s)
{
    if (!s) {
        qk_json_null(j);
        return;
    }
    qk_json_strn(j, s, strlen(s));
}

void qk_json_int(qk_json *j, int64_t v) { before(j); fprintf(j->f, "%lld", (long long)v); }
void qk_json_uint(qk_json *j, uint64_t v) { before(j); fprintf(j->f, "%llu", (unsigned long long)v); }

void qk_json_f32(qk_json *j, float v)
{
    before(j);
    if (isfinite(v))
        fprintf(j->f, "%.9g", (double)v);
    else
        fputs("null", j->f);
}

void qk_json_f64(qk_json *j, double v)
{
    before(j);
    if (isfinite(v))
        fprintf(j->f, "%.17g", v);
    else
        fputs("null", j->f);
}

void qk_json_bool(qk_json *j, bool v) { before(j); fputs(v ? "true" : "false", j->f); }
void qk_json_null(qk_json *j) { before(j); fputs("null", j->f); }
void qk_json_done(qk_json *j) { fputc('\n', j->f); }
