/* test_jsonp.c - the JSON parser against RFC 8259's grammar: values,
 * offsets, escapes, numbers, limits, and errors with their offsets. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/jsonp.h"

static qk_jsonv *ok(const char *s, unsigned flags)
{
    qk_jsonv *v = NULL;
    qk_jsonp_err e;
    int rc = qk_jsonp_parse(s, strlen(s), flags, &v, &e);
    cr_assert_eq(rc, 0, "%s: %s at %llu", s, e.msg, (unsigned long long)e.off);
    return v;
}

static void bad(const char *s, size_t n, unsigned flags, uint64_t off, const char *what)
{
    qk_jsonv *v = (qk_jsonv *)1;
    qk_jsonp_err e;
    cr_expect_eq(qk_jsonp_parse(s, n, flags, &v, &e), -1, "accepted: %.*s", (int)n, s);
    cr_expect_null(v);
    cr_expect_eq(e.off, off, "%.*s: offset %llu, want %llu (%s)", (int)n, s, (unsigned long long)e.off,
                 (unsigned long long)off, e.msg);
    cr_expect(strstr(e.msg, what), "%.*s: '%s' lacks '%s'", (int)n, s, e.msg, what);
}

#define BAD(s, off, what) bad(s, strlen(s), 0, off, what)

Test(jsonp, object_order_and_offsets)
{
    const char *s = " {\"b\": [1, true, null], \"a\" :\"x\", \"c\":{}} ";
    qk_jsonv *v = ok(s, 0);
    cr_assert_eq(v->type, QK_JOBJ);
    cr_expect_eq(v->off, 1);
    cr_assert_eq(qk_jsonv_len(v), 3u);
    cr_expect_str_eq(qk_jsonv_member(v, 0)->key, "b");
    cr_expect_str_eq(qk_jsonv_member(v, 1)->key, "a");
    cr_expect_str_eq(qk_jsonv_member(v, 2)->key, "c");
    cr_expect_eq(qk_jsonv_member(v, 1)->key_off, (uint64_t)(strstr(s, "\"a\"") - s));
    const qk_jsonv *b = qk_jsonv_get(v, "b");
    cr_expect_eq(b->off, (uint64_t)(strchr(s, '[') - s));
    cr_expect_eq(qk_jsonv_at(b, 1)->off, (uint64_t)(strstr(s, "true") - s));
    cr_expect_eq(qk_jsonv_at(b, 2)->type, QK_JNULL);
    cr_expect_null(qk_jsonv_at(b, 3));
    bool t = false;
    cr_expect(qk_jsonv_bool(qk_jsonv_at(b, 1), &t) && t);
    cr_expect_str_eq(qk_jsonv_get_str(v, "a", NULL), "x");
    cr_expect_eq(qk_jsonv_get(v, "a")->off, (uint64_t)(strstr(s, "\"x\"") - s));
    cr_expect_eq(qk_jsonv_len(qk_jsonv_get(v, "c")), 0u);
    cr_expect_null(qk_jsonv_get(v, "d"));
    cr_expect_null(qk_jsonv_get(b, "a"));
    cr_expect_null(qk_jsonv_str(b));
    cr_expect_str_eq(qk_jtype_name(v->type), "object");
    qk_jsonv_free(v);
}

Test(jsonp, scalars_at_top_level)
{
    qk_jsonv *v = ok("\"s\"", 0);
    cr_expect_str_eq(qk_jsonv_str(v), "s");
    qk_jsonv_free(v);
    v = ok("\t\r\n false \n", 0);
    cr_expect_eq(v->type, QK_JBOOL);
    cr_expect_eq(v->off, 4);
    qk_jsonv_free(v);
    v = ok("null", 0);
    cr_expect_eq(v->type, QK_JNULL);
    qk_jsonv_free(v);
}

Test(jsonp, strings_unescaped_to_utf8)
{
    qk_jsonv *v = ok("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20ac\\ud83d\\ude00\\u0000z\"", 0);
    const char want[] = "a\"b\\c/d\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\0z";
    cr_assert_eq(v->str.len, sizeof want - 1);
    cr_expect_eq(memcmp(v->str.s, want, sizeof want - 1), 0);
    cr_expect_eq(v->str.s[v->str.len], '\0');
    qk_jsonv_free(v);
    v = ok("\"\xe4\xb8\xad\xf0\x9f\x98\x80\"", 0); /* raw UTF-8 kept */
    cr_expect_str_eq(v->str.s, "\xe4\xb8\xad\xf0\x9f\x98\x80");
    qk_jsonv_free(v);
}

Test(jsonp, string_errors)
{
    BAD("\"abc", 0, "unterminated string");
    BAD("\"a\\x\"", 2, "invalid escape");
    BAD("\"\\u12g4\"", 5, "invalid hex digit");
    BAD("\"\\u12", 0, "unterminated");
    BAD("\"\\ud800\"", 1, "not followed by a low surrogate");
    BAD("\"\\ud800\\u0041\"", 1, "not followed by a low surrogate");
    BAD("\"\\udc00\"", 1, "lone low surrogate");
    BAD("\"a\tb\"", 2, "raw control character 0x09");
    BAD("\"\xc0\xaf\"", 1, "invalid UTF-8"); /* overlong '/' */
    BAD("\"\xed\xa0\x80\"", 1, "invalid UTF-8"); /* encoded surrogate */
    BAD("\"\xf4\x90\x80\x80\"", 1, "invalid UTF-8"); /* > U+10FFFF */
    BAD("\"\xe2\x82\"", 1, "invalid UTF-8"); /* truncated sequence */
    BAD("\"\x80\"", 1, "invalid UTF-8");
}

Test(jsonp, numbers)
{
    qk_jsonv *v = ok("[0, -0, 42, -9223372036854775808, 9223372036854775807, 18446744073709551615,"
                     " 18446744073709551616, 1.5, 1e3, -2.0E+1, 1e-2, 123456789012345678901234567890]", 0);
    int64_t i;
    uint64_t u;
    double d;
    cr_expect(qk_jsonv_u64(qk_jsonv_at(v, 0), &u) && u == 0);
    cr_expect(qk_jsonv_i64(qk_jsonv_at(v, 1), &i) && i == 0);
    cr_expect(qk_jsonv_u64(qk_jsonv_at(v, 1), &u) && u == 0);
    cr_expect(qk_jsonv_i64(qk_jsonv_at(v, 2), &i) && i == 42);
    cr_expect(qk_jsonv_at(v, 2)->num.flags & QK_JNUM_INT);
    cr_expect(qk_jsonv_i64(qk_jsonv_at(v, 3), &i) && i == INT64_MIN);
    cr_expect(!qk_jsonv_u64(qk_jsonv_at(v, 3), &u));
    cr_expect(qk_jsonv_i64(qk_jsonv_at(v, 4), &i) && i == INT64_MAX);
    cr_expect(qk_jsonv_u64(qk_jsonv_at(v, 5), &u) && u == UINT64_MAX);
    cr_expect(!qk_jsonv_i64(qk_jsonv_at(v, 5), &i));
    const qk_jsonv *big = qk_jsonv_at(v, 6);
    cr_expect(!qk_jsonv_u64(big, &u) && !qk_jsonv_i64(big, &i));
    cr_expect(qk_jsonv_f64(big, &d) && d == 18446744073709551616.0);
    cr_expect(!qk_jsonv_i64(qk_jsonv_at(v, 7), &i));
    cr_expect(qk_jsonv_f64(qk_jsonv_at(v, 7), &d) && d == 1.5);
    cr_expect(qk_jsonv_i64(qk_jsonv_at(v, 8), &i) && i == 1000);
    cr_expect(!(qk_jsonv_at(v, 8)->num.flags & QK_JNUM_INT));
    cr_expect(qk_jsonv_i64(qk_jsonv_at(v, 9), &i) && i == -20);
    cr_expect(!qk_jsonv_u64(qk_jsonv_at(v, 9), &u));
    cr_expect(qk_jsonv_f64(qk_jsonv_at(v, 10), &d) && d == 0.01);
    cr_expect(qk_jsonv_f64(qk_jsonv_at(v, 11), &d) && d == 123456789012345678901234567890.0);
    qk_jsonv_free(v);
    BAD("01", 0, "leading zero");
    BAD("-", 1, "expected a digit");
    BAD("1.", 2, "after '.'");
    BAD("1e", 2, "exponent");
    BAD("+1", 0, "expected a JSON value");
    BAD(".5", 0, "expected a JSON value");
    BAD("1e999", 0, "out of range");
    BAD("[1,-1e400]", 3, "out of range");
    BAD("NaN", 0, "expected a JSON value");
    BAD("0x10", 1, "end of input after the JSON value");
}

Test(jsonp, structure_errors)
{
    bad("", 0, 0, 0, "expected a JSON value, found end of input");
    BAD("   ", 3, "end of input");
    BAD("[1,]", 3, "expected a JSON value");
    BAD("[1 2]", 3, "expected ',' or ']'");
    BAD("{\"a\" 1}", 5, "expected ':'");
    BAD("{\"a\":1,}", 7, "expected a string key");
    BAD("{a:1}", 1, "expected a string key");
    BAD("{\"a\":1", 6, "expected ',' or '}'");
    BAD("[", 1, "end of input");
    BAD("tru", 0, "expected a JSON value");
    BAD("nul", 0, "expected a JSON value");
    BAD("{} {}", 3, "end of input after the JSON value");
    BAD("// c\n{}", 0, "expected a JSON value");
    bad("[1]\0", 4, 0, 3, "found byte 0x00");
}

Test(jsonp, duplicate_keys)
{
    const char *s = "{\"a\":1,\"b\":{\"x\":1,\"x\":2},\"a\":3}";
    qk_jsonv *v = ok(s, 0);
    int64_t i;
    cr_expect(qk_jsonv_i64(qk_jsonv_get(v, "a"), &i) && i == 3, "last one wins");
    qk_jsonv_free(v);
    /* The first repeat found is the one with the smallest offset. */
    bad(s, strlen(s), QK_JSONP_NO_DUP_KEYS, 18, "duplicate key \"x\"");
    const char *s2 = "{\"a\":1,\"b\":2,\"a\":3}";
    bad(s2, strlen(s2), QK_JSONP_NO_DUP_KEYS, 13, "duplicate key \"a\"");
    /* Keys differing only after an embedded NUL are distinct. */
    const char *s3 = "{\"a\\u0000b\":1,\"a\\u0000c\":2,\"a\":3}";
    v = ok(s3, QK_JSONP_NO_DUP_KEYS);
    qk_jsonv_free(v);
}

static char *nested(int depth)
{
    char *s = malloc((size_t)depth * 2 + 1);
    for (int i = 0; i < depth; i++) {
        s[i] = '[';
        s[2 * depth - 1 - i] = ']';
    }
    s[2 * depth] = '\0';
    return s;
}

Test(jsonp, depth_limit)
{
    char *s = nested(QK_JSONP_MAX_DEPTH);
    qk_jsonv *v = ok(s, 0);
    qk_jsonv_free(v);
    free(s);
    s = nested(QK_JSONP_MAX_DEPTH + 1);
    bad(s, strlen(s), 0, QK_JSONP_MAX_DEPTH, "nesting deeper than 64");
    free(s);
    s = nested(100000); /* no stack overflow */
    bad(s, strlen(s), 0, QK_JSONP_MAX_DEPTH, "nesting deeper");
    free(s);
}

Test(jsonp, not_nul_terminated)
{
    /* The parser reads exactly n bytes. */
    char *buf = malloc(4);
    memcpy(buf, "[12]", 4);
    qk_jsonv *v = NULL;
    qk_jsonp_err e;
    cr_assert_eq(qk_jsonp_parse(buf, 4, 0, &v, &e), 0);
    int64_t i;
    cr_expect(qk_jsonv_i64(qk_jsonv_at(v, 0), &i) && i == 12);
    qk_jsonv_free(v);
    cr_expect_eq(qk_jsonp_parse(buf, 3, 0, &v, &e), -1);
    memcpy(buf, "\"ab\\", 4);
    cr_expect_eq(qk_jsonp_parse(buf, 4, 0, &v, &e), -1);
    memcpy(buf, "\"\\u1", 4);
    cr_expect_eq(qk_jsonp_parse(buf, 4, 0, &v, &e), -1);
    free(buf);
}

Test(jsonp, many_members)
{
    /* A large object (duplicate check is n log n). */
    size_t n = 20000, cap = n * 24 + 16, k = 0;
    char *s = malloc(cap);
    s[k++] = '{';
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(s + k, cap - k, "%s\"key%zu\":%zu", i ? "," : "", i, i);
    s[k++] = '}';
    qk_jsonv *v = NULL;
    qk_jsonp_err e;
    cr_assert_eq(qk_jsonp_parse(s, k, QK_JSONP_NO_DUP_KEYS, &v, &e), 0, "%s", e.msg);
    cr_expect_eq(qk_jsonv_len(v), n);
    cr_expect_eq(qk_jsonv_get_i64(v, "key12345", -1), 12345);
    qk_jsonv_free(v);
    free(s);
}
