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

/* The cost of ere as glibc compiles it (CAP when over the bound): its nodes
 * once X+ is expanded to XX* and X{n,m} to m copies, where repeating (+ or
 * {}) an operand that matches the empty string costs the square of the
 * copies (the epsilon closures of such stacks are quadratic: 10 nested
 * "(b*)+" took 2 s).  *backref when it has a back-reference; *bad_repeat when a
 * repetition has nothing to repeat: at the start of the pattern, a group or
 * an alternative, or after another repetition (one lazy '?' aside), which
 * ECMAScript and Python refuse too ("b+++*++++" took 0.3 s). */
static size_t ere_size(const char *s, bool *backref, bool *bad_repeat)
{
    struct {
        size_t alt, seq, last;  /* nodes: finished alternatives, this one, its last atom */
        bool alt_null, seq_null, last_null; /* whether each can match the empty string */
        bool seq_null_prev_ok; /* the sequence before its last atom matches the empty string */
    } st[64];
    int d = 0;
    st[0].alt = st[0].seq = st[0].last = 0;
    st[0].alt_null = false, st[0].seq_null = true, st[0].last_null = false, st[0].seq_null_prev_ok = true;
    int after = 0; /* 0: nothing to repeat, 1: an atom, 2: a repetition, 3: a repetition and '?' */
    *backref = *bad_repeat = false;
    for (size_t i = 0; s[i];) {
        size_t atom = 0, len;
        bool atom_null = false;
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
            st[d].alt_null = false, st[d].seq_null = true, st[d].last_null = false, st[d].seq_null_prev_ok = true;
            after = 0;
            i++;
            continue;
        } else if (c == ')' && d > 0) {
            atom = add(add(st[d].alt, st[d].seq), 1);
            atom_null = st[d].alt_null || st[d].seq_null;
            d--, i++;
        } else if (c == '|') {
            st[d].alt = add(add(st[d].alt, st[d].seq), 1);
            st[d].alt_null = st[d].alt_null || st[d].seq_null;
            st[d].seq = st[d].last = 0;
            st[d].seq_null = true, st[d].last_null = false, st[d].seq_null_prev_ok = true;
            after = 0;
            i++;
            continue;
        } else if (c == '?' && after == 2) { /* lazy: the same match for a search */
            after = 3;
            i++;
            continue;
        } else if (c == '*' || c == '?' || c == '+' || (c == '{' && interval(s + i, &len))) {
            if (after != 1)
                *bad_repeat = true;
            after = 2;
            size_t k = 1;
            bool min_zero = c != '+';
            if (c == '{') {
                k = interval(s + i, &len);
                min_zero = s[i + 1] == '0' || s[i + 1] == ',';
            } else if (c == '+')
                k = 2;
            /* the operand, made k copies (squared when it matches empty and is copied) */
            size_t grown = mul(st[d].last, k);
            if (st[d].last_null && (c == '+' || k > 1))
                grown = mul(grown, grown);
            st[d].seq = add(add(st[d].seq, grown - (grown < st[d].last ? grown : st[d].last)), 1);
            st[d].last = grown;
            st[d].last_null = st[d].last_null || min_zero;
            st[d].seq_null = st[d].seq_null_prev_ok && st[d].last_null;
            i += c == '{' ? len : 1;
            if (st[d].seq >= CAP)
                return CAP;
            continue;
        } else
            atom = 1, i++;
        after = 1;
        st[d].seq = add(st[d].seq, atom);
        st[d].last = atom;
        st[d].last_null = atom_null;
        st[d].seq_null_prev_ok = st[d].seq_null;
        st[d].seq_null = st[d].seq_null && atom_null;
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
    bool backref, bad_repeat;
    const size_t n = ere_size(ere, &backref, &bad_repeat);
    if (bad_repeat) {
        snprintf(msg, cap, "a repetition with nothing to repeat");
        return REG_BADRPT;
    }
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
