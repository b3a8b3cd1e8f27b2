/* pyjson.c - Python json.dump's output (pyjson.h). */
#include "lib/core/pyjson.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pyj {
    FILE *f;
    int indent;
    int sort;         /* 0 none, 1 top level, 2 all */
} pyj;

static void pj_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp = c;
        size_t len = 1;
        if (c >= 0xF0 && i + 3 < n) {
            cp = (uint32_t)(c & 7) << 18 | (uint32_t)(s[i + 1] & 63) << 12 | (uint32_t)(s[i + 2] & 63) << 6 |
                 (uint32_t)(s[i + 3] & 63);
            len = 4;
        } else if (c >= 0xE0 && i + 2 < n) {
            cp = (uint32_t)(c & 15) << 12 | (uint32_t)(s[i + 1] & 63) << 6 | (uint32_t)(s[i + 2] & 63);
            len = 3;
        } else if (c >= 0xC0 && i + 1 < n) {
            cp = (uint32_t)(c & 31) << 6 | (uint32_t)(s[i + 1] & 63);
            len = 2;
        }
        i += len;
        if (cp == '"' || cp == '\\')
            fprintf(f, "\\%c", (char)cp);
        else if (cp == '\n')
            fputs("\\n", f);
        else if (cp == '\r')
            fputs("\\r", f);
        else if (cp == '\t')
            fputs("\\t", f);
        else if (cp == '\b')
            fputs("\\b", f);
        else if (cp == '\f')
            fputs("\\f", f);
        else if (cp < 0x20 || (cp >= 0x7F && cp < 0x10000))
            fprintf(f, "\\u%04x", (unsigned)cp);
        else if (cp >= 0x10000)
            fprintf(f, "\\u%04x\\u%04x", (unsigned)(0xD800 + ((cp - 0x10000) >> 10)),
                    (unsigned)(0xDC00 + ((cp - 0x10000) & 0x3FF)));
        else
            fputc((int)cp, f);
    }
    fputc('"', f);
}

static void pj_nl(pyj *p, int depth)
{
    fprintf(p->f, "\n%*s", depth * p->indent, "");
}

static int cmp_kv(const void *a, const void *b)
{
    const qk_pyj_member *x = a, *y = b;
    int c = memcmp(x->key, y->key, x->klen < y->klen ? x->klen : y->klen);
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static void pj_value(pyj *p, qk_pyj_src v, int depth);

/* An object from n members (sorted when asked). */
static void pj_members(pyj *p, qk_pyj_member *m, size_t n, int depth)
{
    if (!n) {
        fputs("{}", p->f);
        return;
    }
    if (p->sort == 2 || (p->sort == 1 && depth == 0))
        qsort(m, n, sizeof *m, cmp_kv);
    fputc('{', p->f);
    for (size_t i = 0; i < n; i++) {
        pj_nl(p, depth + 1);
        pj_str(p->f, m[i].key, m[i].klen);
        fputs(": ", p->f);
        pj_value(p, m[i].v, depth + 1);
        if (i + 1 < n)
            fputc(',', p->f);
    }
    pj_nl(p, depth);
    fputc('}', p->f);
}

static void pj_value(pyj *p, qk_pyj_src s, int depth)
{
    const qk_jsonv *v = s.v;
    switch (v->type) {
    case QK_JNULL: fputs("null", p->f); break;
    case QK_JBOOL: fputs(v->b ? "true" : "false", p->f); break;
    case QK_JNUM: {
        size_t k = (size_t)v->off;
        while (s.buf[k] && strchr("0123456789+-.eE", s.buf[k]))
            fputc(s.buf[k++], p->f);
        break;
    }
    case QK_JSTR: pj_str(p->f, v->str.s, v->str.len); break;
    case QK_JARR:
        if (!v->arr.n) {
            fputs("[]", p->f);
            break;
        }
        fputc('[', p->f);
        for (size_t i = 0; i < v->arr.n; i++) {
            pj_nl(p, depth + 1);
            pj_value(p, (qk_pyj_src){v->arr.items[i], s.buf}, depth + 1);
            if (i + 1 < v->arr.n)
                fputc(',', p->f);
        }
        pj_nl(p, depth);
        fputc(']', p->f);
        break;
    case QK_JOBJ: {
        qk_pyj_member *m = malloc((v->obj.n ? v->obj.n : 1) * sizeof *m);
        if (!m) /* out of memory while printing: the caller sees the stream error */
            return;
        for (size_t i = 0; i < v->obj.n; i++)
            m[i] = (qk_pyj_member){v->obj.m[i].key, v->obj.m[i].key_len, {v->obj.m[i].val, s.buf}};
        pj_members(p, m, v->obj.n, depth);
        free(m);
        break;
    }
    }
}


void qk_pyjson_object(FILE *f, qk_pyj_member *m, size_t n, int indent, int sort)
{
    pyj p = {.f = f, .indent = indent, .sort = sort};
    pj_members(&p, m, n, 0);
}
