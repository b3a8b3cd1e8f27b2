/* jsonp.c - recursive-descent JSON parser (RFC 8259) building a DOM.
 * Grammar references below are to RFC 8259 sections. */
#include "lib/core/jsonp.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ckd.h"

typedef struct parser {
    const unsigned char *p;
    size_t n, pos;
    unsigned flags;
    qk_jsonp_err *e;
} parser;

static int fail(parser *ps, size_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(parser *ps, size_t off, const char *fmt, ...)
{
    if (ps->e) {
        ps->e->off = off;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->e->msg, sizeof ps->e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Describe the byte at pos for messages. */
static void describe(const parser *ps, size_t pos, char *buf, size_t n)
{
    if (pos >= ps->n)
        snprintf(buf, n, "end of input");
    else if (ps->p[pos] >= 0x20 && ps->p[pos] < 0x7f)
        snprintf(buf, n, "'%c'", ps->p[pos]);
    else
        snprintf(buf, n, "byte 0x%02x", ps->p[pos]);
}

static int unexpected(parser *ps, const char *wanted)
{
    char what[32];
    describe(ps, ps->pos, what, sizeof what);
    return fail(ps, ps->pos, "expected %s, found %s", wanted, what);
}

static void skip_ws(parser *ps)
{
    /* RFC 8259 section 2: ws = space, tab, LF, CR. */
    while (ps->pos < ps->n) {
        unsigned char c = ps->p[ps->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        ps->pos++;
    }
}

static qk_jsonv *new_value(parser *ps, qk_jtype t, size_t off)
{
    qk_jsonv *v = calloc(1, sizeof *v);
    if (!v) {
        fail(ps, off, "out of memory");
        return NULL;
    }
    v->type = t;
    v->off = off;
    return v;
}

/* Grow *buf (elements of size sz) so that it holds at least need elements. */
static int grow(parser *ps, void **buf, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return 0;
    uint64_t ncap = *cap ? *cap : 4, bytes;
    while (ncap < need)
        if (qk_ckd_mul(&ncap, ncap, 2))
            return fail(ps, ps->pos, "too many elements");
    if (qk_ckd_mul(&bytes, ncap, sz) || bytes > SIZE_MAX)
        return fail(ps, ps->pos, "too many elements");
    void *nb = realloc(*buf, (size_t)bytes);
    if (!nb)
        return fail(ps, ps->pos, "out of memory");
    *buf = nb;
    *cap = (size_t)ncap;
    return 0;
}

/* ---- strings (RFC 8259 section 7) --------------------------------------- */

static int hex4(parser *ps, size_t at, unsigned *out)
{
    if (ps->n - at < 4)
        return fail(ps, at, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = ps->p[at + (size_t)i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10u;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10u;
        else
            return fail(ps, at + (size_t)i, "invalid hex digit in \\u escape");
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xc0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xe0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        dst[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    dst[0] = (char)(0xf0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    dst[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Length of the well-formed UTF-8 sequence at p[0..avail) (RFC 3629
 * section 4), or 0 when it is malformed, overlong, a surrogate or past
 * U+10FFFF. */
static size_t utf8_len(const unsigned char *p, size_t avail)
{
    unsigned char c = p[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (avail < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return len;
}

/* Parse the string starting at the quote at ps->pos into a new buffer. */
static int parse_string(parser *ps, char **out, size_t *out_len)
{
    size_t start = ps->pos++;
    /* The unescaped text is never longer than the escaped text. */
    size_t end = ps->pos;
    while (end < ps->n && ps->p[end] != '"') {
        if (ps->p[end] == '\\' && end + 1 < ps->n)
            end++;
        end++;
    }
    if (end >= ps->n)
        return fail(ps, start, "unterminated string");
    char *s = malloc(end - ps->pos + 1);
    if (!s)
        return fail(ps, start, "out of memory");
    size_t k = 0;
    while (ps->p[ps->pos] != '"') {
        unsigned char c = ps->p[ps->pos];
        if (c < 0x20) {
            free(s);
            return fail(ps, ps->pos, "raw control character 0x%02x in string", c);
        }
        if (c >= 0x80) {
            size_t l = utf8_len(ps->p + ps->pos, ps->n - ps->pos);
            if (!l) {
                free(s);
                return fail(ps, ps->pos, "invalid UTF-8 in string");
            }
            memcpy(s + k, ps->p + ps->pos, l);
            k += l;
            ps->pos += l;
            continue;
        }
        if (c != '\\') {
            s[k++] = (char)c;
            ps->pos++;
            continue;
        }
        size_t esc = ps->pos;
        unsigned char x = ps->p[ps->pos + 1];
        ps->pos += 2;
        switch (x) {
        case '"': s[k++] = '"'; break;
        case '\\': s[k++] = '\\'; break;
        case '/': s[k++] = '/'; break;
        case 'b': s[k++] = '\b'; break;
        case 'f': s[k++] = '\f'; break;
        case 'n': s[k++] = '\n'; break;
        case 'r': s[k++] = '\r'; break;
        case 't': s[k++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(ps, ps->pos, &cp)) {
                free(s);
                return -1;
            }
            ps->pos += 4;
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                free(s);
                return fail(ps, esc, "lone low surrogate \\u%04x", cp);
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (ps->n - ps->pos < 6 || ps->p[ps->pos] != '\\' || ps->p[ps->pos + 1] != 'u') {
                    free(s);
                    return fail(ps, esc, "high surrogate \\u%04x not followed by a low surrogate", cp);
                }
                if (hex4(ps, ps->pos + 2, &lo)) {
                    free(s);
                    return -1;
                }
                if (lo < 0xdc00 || lo > 0xdfff) {
                    free(s);
                    return fail(ps, esc, "high surrogate \\u%04x not followed by a low surrogate", cp);
                }
                ps->pos += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            k += put_utf8(s + k, cp);
            break;
        }
        default:
            free(s);
            return fail(ps, esc, "invalid escape in string");
        }
    }
    ps->pos++; /* closing quote */
    s[k] = '\0';
    *out = s;
    *out_len = k;
    return 0;
}

/* ---- numbers (RFC 8259 section 6) --------------------------------------- */

static size_t digits(parser *ps)
{
    size_t n0 = ps->pos;
    while (ps->pos < ps->n && ps->p[ps->pos] >= '0' && ps->p[ps->pos] <= '9')
        ps->pos++;
    return ps->pos - n0;
}

static int parse_number(parser *ps, qk_jsonv *v)
{
    size_t start = ps->pos;
    bool neg = false, is_int = true;
    if (ps->p[ps->pos] == '-') {
        neg = true;
        ps->pos++;
    }
    size_t int_start = ps->pos;
    size_t nd = digits(ps);
    if (nd == 0)
        return unexpected(ps, "a digit");
    if (nd > 1 && ps->p[int_start] == '0')
        return fail(ps, int_start, "leading zero in number");
    if (ps->pos < ps->n && ps->p[ps->pos] == '.') {
        ps->pos++;
        is_int = false;
        if (digits(ps) == 0)
            return unexpected(ps, "a digit after '.'");
    }
    if (ps->pos < ps->n && (ps->p[ps->pos] == 'e' || ps->p[ps->pos] == 'E')) {
        ps->pos++;
        is_int = false;
        if (ps->pos < ps->n && (ps->p[ps->pos] == '+' || ps->p[ps->pos] == '-'))
            ps->pos++;
        if (digits(ps) == 0)
            return unexpected(ps, "a digit in the exponent");
    }
    size_t len = ps->pos - start;
    char small[64], *tmp = small;
    if (len >= sizeof small && !(tmp = malloc(len + 1)))
        return fail(ps, start, "out of memory");
    memcpy(tmp, ps->p + start, len);
    tmp[len] = '\0';
    errno = 0;
    double d = strtod(tmp, NULL);
    if (tmp != small)
        free(tmp);
    if (isinf(d))
        return fail(ps, start, "number out of range");
    v->num.d = d;
    if (is_int) {
        v->num.flags |= QK_JNUM_INT;
        uint64_t mag = 0;
        bool over = false;
        for (size_t i = int_start; i < int_start + nd && !over; i++)
            over = qk_ckd_mul(&mag, mag, 10) || qk_ckd_add(&mag, mag, (uint64_t)(ps->p[i] - '0'));
        if (!over) {
            if (!neg) {
                v->num.u = mag;
                v->num.flags |= QK_JNUM_U64;
                if (mag <= (uint64_t)INT64_MAX) {
                    v->num.i = (int64_t)mag;
                    v->num.flags |= QK_JNUM_I64;
                }
            } else if (mag <= (uint64_t)INT64_MAX + 1) {
                v->num.i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
                v->num.flags |= QK_JNUM_I64;
                if (mag == 0) {
                    v->num.u = 0;
                    v->num.flags |= QK_JNUM_U64;
                }
            }
        }
    } else if (d == floor(d) && fabs(d) < 0x1p63) {
        /* 1.0, 1e3: integral values written as floats. */
        v->num.i = (int64_t)d;
        v->num.flags |= QK_JNUM_I64;
        if (d >= 0) {
            v->num.u = (uint64_t)d;
            v->num.flags |= QK_JNUM_U64;
        }
    }
    return 0;
}

/* ---- values ---------------------------------------------------------------- */

static int parse_value(parser *ps, int depth, qk_jsonv **out);

static int literal(parser *ps, const char *word)
{
    size_t l = strlen(word);
    if (ps->n - ps->pos < l || memcmp(ps->p + ps->pos, word, l) != 0)
        return unexpected(ps, "a JSON value");
    ps->pos += l;
    return 0;
}

static int parse_array(parser *ps, int depth, qk_jsonv *v)
{
    size_t cap = 0;
    ps->pos++; /* [ */
    skip_ws(ps);
    if (ps->pos < ps->n && ps->p[ps->pos] == ']') {
        ps->pos++;
        return 0;
    }
    for (;;) {
        if (grow(ps, (void **)&v->arr.items, &cap, v->arr.n + 1, sizeof *v->arr.items))
            return -1;
        skip_ws(ps);
        int rc = parse_value(ps, depth + 1, &v->arr.items[v->arr.n]);
        v->arr.n++; /* owned from here on, complete or not */
        if (rc)
            return -1;
        skip_ws(ps);
        if (ps->pos < ps->n && ps->p[ps->pos] == ',') {
            ps->pos++;
            continue;
        }
        if (ps->pos < ps->n && ps->p[ps->pos] == ']') {
            ps->pos++;
            return 0;
        }
        return unexpected(ps, "',' or ']'");
    }
}

static int cmp_member(const void *a, const void *b)
{
    const qk_jsonm *x = *(const qk_jsonm *const *)a, *y = *(const qk_jsonm *const *)b;
    size_t l = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, l);
    if (c)
        return c;
    if (x->key_len != y->key_len)
        return x->key_len < y->key_len ? -1 : 1;
    return x->key_off < y->key_off ? -1 : x->key_off > y->key_off;
}

/* Report the first repeated key (the repeat with the smallest offset). */
static int check_dups(parser *ps, const qk_jsonv *v)
{
    size_t n = v->obj.n;
    if (n < 2)
        return 0;
    const qk_jsonm **idx = malloc(n * sizeof *idx);
    if (!idx)
        return fail(ps, v->off, "out of memory");
    for (size_t i = 0; i < n; i++)
        idx[i] = &v->obj.m[i];
    qsort(idx, n, sizeof *idx, cmp_member);
    const qk_jsonm *dup = NULL;
    for (size_t i = 1; i < n; i++)
        if (idx[i]->key_len == idx[i - 1]->key_len &&
            memcmp(idx[i]->key, idx[i - 1]->key, idx[i]->key_len) == 0 &&
            (!dup || idx[i]->key_off < dup->key_off))
            dup = idx[i];
    free(idx);
    if (!dup)
        return 0;
    return fail(ps, dup->key_off, "duplicate key \"%.64s\"", dup->key);
}

static int parse_object(parser *ps, int depth, qk_jsonv *v)
{
    size_t cap = 0;
    ps->pos++; /* { */
    skip_ws(ps);
    if (ps->pos < ps->n && ps->p[ps->pos] == '}') {
        ps->pos++;
        return 0;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->pos >= ps->n || ps->p[ps->pos] != '"')
            return unexpected(ps, "a string key");
        if (grow(ps, (void **)&v->obj.m, &cap, v->obj.n + 1, sizeof *v->obj.m))
            return -1;
        qk_jsonm *m = &v->obj.m[v->obj.n];
        memset(m, 0, sizeof *m);
        m->key_off = ps->pos;
        if (parse_string(ps, &m->key, &m->key_len))
            return -1;
        v->obj.n++; /* owned from here on, freed with v */
        skip_ws(ps);
        if (ps->pos >= ps->n || ps->p[ps->pos] != ':')
            return unexpected(ps, "':'");
        ps->pos++;
        skip_ws(ps);
        if (parse_value(ps, depth + 1, &m->val))
            return -1;
        skip_ws(ps);
        if (ps->pos < ps->n && ps->p[ps->pos] == ',') {
            ps->pos++;
            continue;
        }
        if (ps->pos < ps->n && ps->p[ps->pos] == '}') {
            ps->pos++;
            break;
        }
        return unexpected(ps, "',' or '}'");
    }
    if (ps->flags & QK_JSONP_NO_DUP_KEYS)
        return check_dups(ps, v);
    return 0;
}

static int parse_value(parser *ps, int depth, qk_jsonv **out)
{
    *out = NULL;
    if (ps->pos >= ps->n)
        return unexpected(ps, "a JSON value");
    if (depth > QK_JSONP_MAX_DEPTH)
        return fail(ps, ps->pos, "nesting deeper than %d levels", QK_JSONP_MAX_DEPTH);
    unsigned char c = ps->p[ps->pos];
    qk_jtype t;
    switch (c) {
    case '{': t = QK_JOBJ; break;
    case '[': t = QK_JARR; break;
    case '"': t = QK_JSTR; break;
    case 't': case 'f': t = QK_JBOOL; break;
    case 'n': t = QK_JNULL; break;
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            t = QK_JNUM;
        else
            return unexpected(ps, "a JSON value");
    }
    qk_jsonv *v = new_value(ps, t, ps->pos);
    if (!v)
        return -1;
    *out = v; /* the caller frees it, complete or not */
    switch (t) {
    case QK_JOBJ: return parse_object(ps, depth, v);
    case QK_JARR: return parse_array(ps, depth, v);
    case QK_JSTR: return parse_string(ps, &v->str.s, &v->str.len);
    case QK_JNUM: return parse_number(ps, v);
    case QK_JNULL: return literal(ps, "null");
    case QK_JBOOL:
        v->b = c == 't';
        return literal(ps, v->b ? "true" : "false");
    }
    return -1;
}

int qk_jsonp_parse(const char *buf, size_t n, unsigned flags, qk_jsonv **root, qk_jsonp_err *e)
{
    parser ps = {.p = (const unsigned char *)buf, .n = n, .flags = flags, .e = e};
    *root = NULL;
    if (e) {
        e->off = 0;
        e->msg[0] = '\0';
    }
    qk_jsonv *v = NULL;
    skip_ws(&ps);
    if (parse_value(&ps, 1, &v) == 0) {
        skip_ws(&ps);
        if (ps.pos == ps.n) {
            *root = v;
            return 0;
        }
        unexpected(&ps, "end of input after the JSON value");
    }
    qk_jsonv_free(v);
    return -1;
}

void qk_jsonv_free(qk_jsonv *v)
{
    if (!v)
        return;
    switch (v->type) {
    case QK_JSTR:
        free(v->str.s);
        break;
    case QK_JARR:
        for (size_t i = 0; i < v->arr.n; i++)
            qk_jsonv_free(v->arr.items[i]);
        free(v->arr.items);
        break;
    case QK_JOBJ:
        for (size_t i = 0; i < v->obj.n; i++) {
            free(v->obj.m[i].key);
            qk_jsonv_free(v->obj.m[i].val);
        }
        free(v->obj.m);
        break;
    default:
        break;
    }
    free(v);
}

/* ---- accessors ------------------------------------------------------------- */

const char *qk_jtype_name(qk_jtype t)
{
    static const char *const names[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

bool qk_jsonv_is(const qk_jsonv *v, qk_jtype t) { return v && v->type == t; }

const qk_jsonv *qk_jsonv_get(const qk_jsonv *obj, const char *key)
{
    if (!qk_jsonv_is(obj, QK_JOBJ))
        return NULL;
    size_t l = strlen(key);
    for (size_t i = obj->obj.n; i-- > 0;)
        if (obj->obj.m[i].key_len == l && memcmp(obj->obj.m[i].key, key, l) == 0)
            return obj->obj.m[i].val;
    return NULL;
}

const qk_jsonv *qk_jsonv_at(const qk_jsonv *arr, size_t i)
{
    return qk_jsonv_is(arr, QK_JARR) && i < arr->arr.n ? arr->arr.items[i] : NULL;
}

size_t qk_jsonv_len(const qk_jsonv *v)
{
    if (qk_jsonv_is(v, QK_JARR))
        return v->arr.n;
    if (qk_jsonv_is(v, QK_JOBJ))
        return v->obj.n;
    return 0;
}

const qk_jsonm *qk_jsonv_member(const qk_jsonv *obj, size_t i)
{
    return qk_jsonv_is(obj, QK_JOBJ) && i < obj->obj.n ? &obj->obj.m[i] : NULL;
}

const char *qk_jsonv_str(const qk_jsonv *v) { return qk_jsonv_is(v, QK_JSTR) ? v->str.s : NULL; }

bool qk_jsonv_i64(const qk_jsonv *v, int64_t *out)
{
    if (!qk_jsonv_is(v, QK_JNUM) || !(v->num.flags & QK_JNUM_I64))
        return false;
    *out = v->num.i;
    return true;
}

bool qk_jsonv_u64(const qk_jsonv *v, uint64_t *out)
{
    if (!qk_jsonv_is(v, QK_JNUM) || !(v->num.flags & QK_JNUM_U64))
        return false;
    *out = v->num.u;
    return true;
}

bool qk_jsonv_f64(const qk_jsonv *v, double *out)
{
    if (!qk_jsonv_is(v, QK_JNUM))
        return false;
    *out = v->num.d;
    return true;
}

bool qk_jsonv_bool(const qk_jsonv *v, bool *out)
{
    if (!qk_jsonv_is(v, QK_JBOOL))
        return false;
    *out = v->b;
    return true;
}

const char *qk_jsonv_get_str(const qk_jsonv *obj, const char *key, const char *dflt)
{
    const char *s = qk_jsonv_str(qk_jsonv_get(obj, key));
    return s ? s : dflt;
}

bool qk_jsonv_get_bool(const qk_jsonv *obj, const char *key, bool dflt)
{
    bool b;
    return qk_jsonv_bool(qk_jsonv_get(obj, key), &b) ? b : dflt;
}

int64_t qk_jsonv_get_i64(const qk_jsonv *obj, const char *key, int64_t dflt)
{
    int64_t i;
    return qk_jsonv_i64(qk_jsonv_get(obj, key), &i) ? i : dflt;
}
