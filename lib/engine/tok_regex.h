/* tok_regex.h - the subset of ECMAScript regular expressions that llama.cpp's
 * pre-tokenizer regexes use, matched the way libstdc++'s std::regex /
 * std::wregex match them (unicode_regex_split_stl, src/unicode.cpp d32676d):
 * a backtracking search, leftmost start, alternatives in order, greedy (or
 * lazy) quantifiers, atomic lookaheads.
 *
 * Patterns and texts are arrays of 32-bit units: code points for std::wregex,
 * or the bytes of llama.cpp's "collapsed" text and regex for std::regex.
 * Classes: literal units and ranges, \s \S \d \D \w \W (the "C" locale: ASCII
 * only), negation.  Groups: ( ), (?: ), (?= ), (?! ).  Quantifiers: * + ?
 * {n} {n,} {n,m}, each optionally lazy.  Anchor: $ (end of the searched
 * range).  Not supported (compile error): back-references, ^, \b, \B, ., (?i
 * and loops whose body can match the empty string - none of llama.cpp's
 * regexes has one, and libstdc++'s rule for them is not ECMAScript's.
 *
 * A compiled regex is immutable and may be shared between threads. */
#ifndef QK_TOK_REGEX_H
#define QK_TOK_REGEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/err.h"

typedef struct qk_rx qk_rx;

/* Compile pat[0..n); NULL with err set on a syntax error or memory. */
qk_rx *qk_rx_compile(const uint32_t *pat, size_t n, qk_err *err);
void qk_rx_free(qk_rx *r);

/* A backtracking stack; reuse one across searches (zero-initialize it). */
typedef struct qk_rx_stack {
    struct qk_rx_frame *v;
    size_t n, cap;
} qk_rx_stack;
void qk_rx_stack_free(qk_rx_stack *s);

/* std::regex_search over t[from..end): the leftmost match, as [*b, *e).
 * not_null: reject empty matches; anchored: only a match starting at from
 * (match_not_null / match_continuous).  Returns 1 found, 0 none, or -1 when
 * out of memory. */
int qk_rx_search(const qk_rx *r, const uint32_t *t, size_t from, size_t end, bool not_null, bool anchored,
                 qk_rx_stack *st, size_t *b, size_t *e);

#endif
