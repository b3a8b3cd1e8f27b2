/* unicode.c - look-ups over the generated tables and llama.cpp-compatible
 * UTF-8 handling (src/unicode.cpp at d32676d). */
#include "lib/core/unicode.h"

#include <pthread.h>

static uint16_t flags_of(uint32_t cpt);

/* The first 256 code points' flags, looked up by the tokenizers' pre-splitting
 * for nearly every character of most text: filled once from the tables. */
static uint16_t latin1[256];
static pthread_once_t latin1_once = PTHREAD_ONCE_INIT;

static void latin1_fill(void)
{
    for (uint32_t c = 0; c < 256; c++)
        latin1[c] = flags_of(c);
}

uint16_t qk_ucd_flags(uint32_t cpt)
{
    if (cpt < 256) {
        pthread_once(&latin1_once, latin1_fill);
        return latin1[cpt];
    }
    return flags_of(cpt);
}

static uint16_t flags_of(uint32_t cpt)
{
    if (cpt >= QK_UCD_MAX_CPT)
        return QK_UCD_UNDEFINED;
    /* last run whose first code point is <= cpt */
    size_t lo = 0, hi = qk_ucd_n_ranges;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (qk_ucd_ranges[mid].first <= cpt)
            lo = mid;
        else
            hi = mid;
    }
    uint16_t f = qk_ucd_ranges[lo].flags;
    for (size_t i = 0; i < qk_ucd_n_whitespace && qk_ucd_whitespace[i] <= cpt; i++)
        if (qk_ucd_whitespace[i] == cpt)
            f |= QK_UCD_WHITESPACE;
    return f;
}

uint32_t qk_ucd_tolower(uint32_t cpt)
{
    size_t lo = 0, hi = qk_ucd_n_lower;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (qk_ucd_lower[mid].from < cpt)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < qk_ucd_n_lower && qk_ucd_lower[lo].from == cpt ? qk_ucd_lower[lo].to : cpt;
}

size_t qk_utf8_len(uint8_t lead)
{
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[lead >> 4];
}

static bool is_cont(const char *s, size_t n, size_t i)
{
    return i < n && ((uint8_t)s[i] & 0xc0) == 0x80;
}

uint32_t qk_utf8_decode(const char *s, size_t n, size_t *adv)
{
    uint8_t c = (uint8_t)s[0];
    *adv = 1;
    if (!(c & 0x80))
        return c;
    if (!(c & 0x40))
        return QK_UCD_REPLACEMENT; /* stray continuation byte */
    if (!(c & 0x20)) {
        if (!is_cont(s, n, 1))
            return QK_UCD_REPLACEMENT;
        *adv = 2;
        return (uint32_t)(c & 0x1f) << 6 | ((uint8_t)s[1] & 0x3f);
    }
    if (!(c & 0x10)) {
        if (!is_cont(s, n, 1) || !is_cont(s, n, 2))
            return QK_UCD_REPLACEMENT;
        *adv = 3;
        return (uint32_t)(c & 0x0f) << 12 | (uint32_t)((uint8_t)s[1] & 0x3f) << 6 | ((uint8_t)s[2] & 0x3f);
    }
    if (!(c & 0x08)) {
        if (!is_cont(s, n, 1) || !is_cont(s, n, 2) || !is_cont(s, n, 3))
            return QK_UCD_REPLACEMENT;
        *adv = 4;
        return (uint32_t)(c & 0x07) << 18 | (uint32_t)((uint8_t)s[1] & 0x3f) << 12 |
               (uint32_t)((uint8_t)s[2] & 0x3f) << 6 | ((uint8_t)s[3] & 0x3f);
    }
    return QK_UCD_REPLACEMENT;
}

size_t qk_utf8_encode(uint32_t cpt, char out[4])
{
    if (cpt <= 0x7f) {
        out[0] = (char)cpt;
        return 1;
    }
    if (cpt <= 0x7ff) {
        out[0] = (char)(0xc0 | (cpt >> 6));
        out[1] = (char)(0x80 | (cpt & 0x3f));
        return 2;
    }
    if (cpt <= 0xffff) {
        out[0] = (char)(0xe0 | (cpt >> 12));
        out[1] = (char)(0x80 | ((cpt >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cpt & 0x3f));
        return 3;
    }
    if (cpt < QK_UCD_MAX_CPT) {
        out[0] = (char)(0xf0 | (cpt >> 18));
        out[1] = (char)(0x80 | ((cpt >> 12) & 0x3f));
        out[2] = (char)(0x80 | ((cpt >> 6) & 0x3f));
        out[3] = (char)(0x80 | (cpt & 0x3f));
        return 4;
    }
    return 0;
}

/* Bytes GPT-2 keeps as themselves: '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF. */
static bool byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
}

uint32_t qk_byte_to_cpt(uint8_t b)
{
    if (byte_is_printable(b))
        return b;
    uint32_t k = 0; /* rank of b among the non-printable bytes */
    for (unsigned i = 0; i < b; i++)
        k += !byte_is_printable(i);
    return 0x100 + k;
}

int qk_cpt_to_byte(uint32_t cpt)
{
    if (cpt < 0x100)
        return byte_is_printable(cpt) ? (int)cpt : -1;
    if (cpt >= 0x100 + 68)
        return -1;
    uint32_t k = cpt - 0x100;
    for (unsigned b = 0; b < 256; b++)
        if (!byte_is_printable(b) && k-- == 0)
            return (int)b;
    return -1;
}

uint32_t qk_ucd_nfd_first(uint32_t cpt)
{
    /* the last run starting at or before cpt (upper_bound - 1) */
    size_t lo = 0, hi = qk_ucd_n_nfd;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (qk_ucd_nfd[mid].first <= cpt)
            lo = mid + 1;
        else
            hi = mid;
    }
    const qk_ucd_nfd_run *r = &qk_ucd_nfd[lo - 1];
    return r->first <= cpt && cpt <= r->last ? r->nfd : cpt;
}
