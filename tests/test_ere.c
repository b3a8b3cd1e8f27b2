/* test_ere.c - bounded regular expressions (lib/core/ere.h): what real
 * patterns use compiles and matches as regcomp's would; repetitions that
 * expand exponentially and back-references are refused before regcomp. */
#include <string.h>

#include "lib/core/ere.h"
#include "tests/testutil.h"

static int try(const char *p)
{
    regex_t re;
    char msg[128];
    int rc = qk_ere_compile(&re, p, REG_EXTENDED | REG_NOSUB, msg, sizeof msg);
    if (!rc)
        regfree(&re);
    return rc;
}

Test(ere, real_patterns_compile_and_match)
{
    static const char *const ok[] = {"attn_q", "^(blk\\.[0-9]+\\.ffn_(up|gate))", "[]a]+x{2,3}", "[^]]*",
                                     "[[:alpha:]_]+\\.weight$", "a{0}", "(a|b|c)*d?", "x{2,}", "a{,3}",
                                     "a+?b", "\\*x+", "(a+)+b", "[*+]+", "(\\.[0-9]+)*x", "blk\\.([0-9]+\\.)?ffn",
                                     "((x)?)*y", "(a|b)?c{2}"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        cr_expect_eq(try(ok[i]), 0, "%s", ok[i]);
    regex_t re;
    char msg[128];
    cr_assert_eq(qk_ere_compile(&re, "^blk\\.[01]\\.attn_(q|k)", REG_EXTENDED | REG_NOSUB, msg, sizeof msg), 0);
    cr_expect_eq(regexec(&re, "blk.1.attn_k.weight", 0, NULL, 0), 0);
    cr_expect_neq(regexec(&re, "blk.2.attn_k.weight", 0, NULL, 0), 0);
    regfree(&re);
}

Test(ere, exponential_patterns_refused)
{
    char p[200];
    /* stacked repetitions: nothing to repeat (std::regex and Python refuse them too) */
    static const char *const stacked[] = {"a++", "b+++*++++++++l2", "a*+", "a{2}{3}", "a+??", "*a", "(*a)", "x|+y"};
    for (size_t i = 0; i < sizeof stacked / sizeof stacked[0]; i++)
        cr_expect_eq(try(stacked[i]), REG_BADRPT, "%s", stacked[i]);
    strcpy(p, "");
    for (int i = 0; i < 14; i++)
        strcat(p, "(");
    strcat(p, "a");
    for (int i = 0; i < 14; i++)
        strcat(p, ")+");
    cr_expect_eq(try(p), REG_ESIZE, "%s", p);
    cr_expect_eq(try("(a{99}){99}"), REG_ESIZE);
    cr_expect_eq(try("x{65535}"), REG_ESIZE);
    cr_expect_eq(try("(ab){,9999}"), REG_ESIZE);
    cr_expect_eq(try("((a|b){64}){64}"), REG_ESIZE);
    /* repeating what matches the empty string: its cost is squared (glibc's epsilon closures) */
    static const char *const nullable[] = {"(((((((((((b*)+)+)+)+)+)+)+)+)+)+)", "((((((((((b|)+)+)+)+)+)+)+)+)+)+",
                                           "(((b*)+){16}){16}", "((b?){2}){1000}"};
    for (size_t i = 0; i < sizeof nullable / sizeof nullable[0]; i++)
        cr_expect_eq(try(nullable[i]), REG_ESIZE, "%s", nullable[i]);
    cr_expect_eq(try("(a)\\1"), REG_BADPAT);
    cr_expect_eq(try("[\\1]"), 0); /* inside a bracket it is no back-reference */
    cr_expect_eq(try("(a{60}){60}"), 0); /* 3600 nodes: under the bound */
}
