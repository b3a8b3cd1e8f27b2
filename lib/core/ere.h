/* ere.h - POSIX extended regular expressions from untrusted text (configs,
 * --tensor-type files) compiled with a bound on their cost: glibc's regcomp
 * expands X+ into XX* and X{n,m} into copies of X, so a short pattern such
 * as "((a+)+)+..." or "(a{99}){99}" asks for memory exponential in its
 * length, and back-references make regexec exponential in time.  Both are
 * refused before regcomp sees them. */
#ifndef QK_ERE_H
#define QK_ERE_H

#include <regex.h>
#include <stddef.h>

/* Nodes the expanded pattern may have: far above any real tensor pattern. */
#define QK_ERE_MAX_NODES 4096

/* regcomp(re, ere, cflags) after the checks; 0 or a regcomp error code, or
 * REG_ESIZE (too complex) / REG_BADPAT (a back-reference).  The message goes
 * to msg[0..cap) on failure; re is then not to be freed. */
int qk_ere_compile(regex_t *re, const char *ere, int cflags, char *msg, size_t cap);

#endif
