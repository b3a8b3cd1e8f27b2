/* ere.c - bounded compilation of POSIX EREs (ere.h). */
#include "lib/core/ere.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP (QK_ERE_MAX_NODES + 1)

static size_t add(size_t a, size_t b) { return a + b > CAP ? CAP : a + b; }
static size_t mul(size_t a, size_t b) { return b && a > CAP / b ? CAP : a * b > CAP ? CAP : a * b; }

/* An interval {n}, {n,} or {n,m} at s; the copies glibc makes of its operand
 * (at least 1), its length in *len; 0 when s is no interval (then '{' is a
 * literal, as glibc reads it). */
static size_t interval(const char *s, size_t *len)
{
    const char *p = s + 1;
    size_t n = 0, m = 0;
    bool comma = false, has_m = false;
    if ((*p < '0' || *p > '9') && *p != ',') /* "{,m}" is glibc's {0,m} */
        return 0;
    while (*p >= '0' && *p <= '9')
        n = n > CAP ? CAP : n * 10 + (size_t)(*p++ - '0');
    if (*p == ',') {
        comma = true;
        p++;
        while (*p >= '0' && *p <= '9') {
            has_m = true;
            m = m > CAP ? CAP : m * 10 + (size_t)(*p++ - '0');
        }
    }
    if (*p != '}')
        return 0;
    *len = (size_t)(p + 1 - s);
    size_t k = has_m ? m : comma ? n + 1 : n;
    return k ? k : 1;
}

/* The expanded size of ere (CAP when over the bound); *backref when it has one. */
static size_t ere_size(const char *s, bool *backref)
{
    struct { size_t alt, seq, last; } st[64] = {{0, 0, 0}};
    int d = 0;
    *backref = false;
    for (size_t i = 0; s[i];) {
        size_t atom = 0, len;
        const char c = s[i];
        if (c == '\\') {
            if (s[i + 1] >= '1' && s[i + 1] <= '9')
                *backref = true;
            atom = 1, i += s[i + 1] ? 2 : 1;
        } else if (c == '[') { /* to the closing ']': "[]...]", "[^]...]", "[:alpha:]" inside */
            size_t j = i + 1;
            if (s[j] == '^')
                j++;
            if (s[j] == ']')
                j++;
            while (s[j] && s[j] != ']') {
                if (s[j] == '[' && (s[j + 1] == ':' || s[j + 1] == '.' || s[j + 1] == '=')) {
                    const char close[3] = {s[j + 1], ']', 0};
                    const char *e = strstr(s + j + 2, close);
                    j = e ? (size_t)(e - s) + 2 : j + 1;
                } else
                    j++;
            }
            atom = 1, i = s[j] ? j + 1 : j;
        } else if (c == '(') {
            if (++d == 64)
                return CAP;
            st[d].alt = st[d].seq = st[d].last = 0;
            i++;
            continue;
        } else if (c == ')' && d > 0) {
            atom = add(add(st[d].alt, st[d].seq), 1);
            d--, i++;
        } else if (c == '|') {
            st[d].alt = add(add(st[d].alt, st[d].seq), 1);
            st[d].seq = st[d].last = 0;
            i++;
            continue;
        } else if (c == '*' || c == '?') {
            st[d].seq = add(st[d].seq, 1);
            i++;
            continue;
        } else if (c == '+' || (c == '{' && interval(s + i, &len))) {
            const size_t k = c == '+' ? 2 : interval(s + i, &len);
            st[d].seq = add(st[d].seq, mul(st[d].last, k - 1));
            st[d].last = mul(st[d].last, k);
            i += c == '+' ? 1 : len;
            if (st[d].seq >= CAP)
                return CAP;
            continue;
        } else
            atom = 1, i++;
        st[d].seq = add(st[d].seq, atom);
        st[d].last = atom;
        if (st[d].seq >= CAP)
            return CAP;
    }
    size_t total = 0;
    for (; d >= 0; d--)
        total = add(total, add(st[d].alt, st[d].seq));
    return total;
}

int qk_ere_compile(regex_t *re, const char *ere, int cflags, char *msg, size_t cap)
{
    bool backref;
    const size_t n = ere_size(ere, &backref);
    if (backref) {
        snprintf(msg, cap, "back-references are not supported");
        return REG_BADPAT;
    }
    if (n >= CAP) {
        snprintf(msg, cap, "too complex (repetitions expand past %d nodes)", QK_ERE_MAX_NODES);
        return REG_ESIZE;
    }
    int rc = regcomp(re, ere, cflags);
    if (rc)
        regerror(rc, re, msg, cap);
    return rc;
}
