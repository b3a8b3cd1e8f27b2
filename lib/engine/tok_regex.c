/* tok_regex.c - the ECMAScript subset of tok_regex.h: a compiler to a small
 * backtracking program and its interpreter.
 *
 * Program: CHAR u, SET k, SPLIT x y (try x, on failure y), JMP x, EOL ($),
 * LOOK/NLOOK y (run the lookahead body that follows, anchored here; go on at
 * y when it matched / did not), MATCH.  A quantified atom is emitted once per
 * copy it needs, by parsing its text again: x{2,4} is x x (x (x)?)?, and
 * x* is L: SPLIT body, out; body; JMP L.  The interpreter keeps an explicit
 * stack of (pc, position) alternatives, so long runs do not recurse; a
 * lookahead runs the same interpreter on its body and keeps only whether it
 * matched (ECMAScript lookaheads are atomic). */
#include "lib/engine/tok_regex.h"

#include <stdlib.h>
#include <string.h>

enum { OP_CHAR, OP_SET, OP_SPLIT, OP_JMP, OP_EOL, OP_LOOK, OP_NLOOK, OP_MATCH };

typedef struct rx_ins {
    uint8_t op;
    uint32_t a, b;
} rx_ins;

enum { CL_D = 1, CL_ND = 2, CL_S = 4, CL_NS = 8, CL_W = 16, CL_NW = 32 };

typedef struct rx_set {
    bool neg;
    uint8_t classes;
    uint32_t n;          /* ranges */
    uint32_t (*r)[2];
} rx_set;

struct qk_rx {
    rx_ins *code;
    size_t n_code, cap_code;
    rx_set *sets;
    size_t n_sets, cap_sets;
};

typedef struct qk_rx_frame {
    uint32_t pc;
    size_t pos;
} qk_rx_frame;

/* ---- the compiler ------------------------------------------------------------ */

typedef struct rx_comp {
    qk_rx *r;
    const uint32_t *p;
    size_t n, i;
    int depth;
    qk_err *err;
    bool failed;
} rx_comp;

static bool fail(rx_comp *c, const char *what)
{
    if (!c->failed)
        qk_errf(c->err, QK_EINPUT, "regex: %s at offset %zu", what, c->i);
    c->failed = true;
    return false;
}

static uint32_t emit(rx_comp *c, uint8_t op, uint32_t a, uint32_t b)
{
    qk_rx *r = c->r;
    if (r->n_code == r->cap_code) {
        size_t cap = r->cap_code ? r->cap_code * 2 : 64;
        rx_ins *v = realloc(r->code, cap * sizeof *v);
        if (!v) {
            fail(c, "out of memory");
            return 0;
        }
        r->code = v;
        r->cap_code = cap;
    }
    r->code[r->n_code] = (rx_ins){op, a, b};
    return (uint32_t)r->n_code++;
}

static uint32_t here(const rx_comp *c) { return (uint32_t)c->r->n_code; }

static bool at(const rx_comp *c, uint32_t ch) { return c->i < c->n && c->p[c->i] == ch; }

static int hexval(uint32_t u)
{
    if (u >= '0' && u <= '9')
        return (int)(u - '0');
    if (u >= 'a' && u <= 'f')
        return (int)(u - 'a' + 10);
    if (u >= 'A' && u <= 'F')
        return (int)(u - 'A' + 10);
    return -1;
}

/* After a backslash: a class escape (sets *cls, returns true) or one unit. */
static bool escape(rx_comp *c, bool in_class, uint8_t *cls, uint32_t *u)
{
    if (c->i >= c->n)
        return fail(c, "trailing backslash");
    uint32_t e = c->p[c->i++];
    *cls = 0;
    switch (e) {
    case 'd': *cls = CL_D; return true;
    case 'D': *cls = CL_ND; return true;
    case 's': *cls = CL_S; return true;
    case 'S': *cls = CL_NS; return true;
    case 'w': *cls = CL_W; return true;
    case 'W': *cls = CL_NW; return true;
    case 'n': *u = '\n'; return true;
    case 'r': *u = '\r'; return true;
    case 't': *u = '\t'; return true;
    case 'v': *u = '\v'; return true;
    case 'f': *u = '\f'; return true;
    case '0': *u = 0; return true;
    case 'x':
    case 'u': {
        int len = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int k = 0; k < len; k++) {
            int h = c->i < c->n ? hexval(c->p[c->i]) : -1;
            if (h < 0)
                return fail(c, "bad hexadecimal escape");
            v = v * 16 + (uint32_t)h;
            c->i++;
        }
        *u = v;
        return true;
    }
    case 'b':
        if (in_class) {
            *u = '\b';
            return true;
        }
        return fail(c, "\\b is not supported");
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9'))
            return fail(c, "unsupported escape");
        *u = e; /* identity escape */
        return true;
    }
}

static rx_set *new_set(rx_comp *c, uint32_t *index)
{
    qk_rx *r = c->r;
    if (r->n_sets == r->cap_sets) {
        size_t cap = r->cap_sets ? r->cap_sets * 2 : 8;
        rx_set *v = realloc(r->sets, cap * sizeof *v);
        if (!v) {
            fail(c, "out of memory");
            return NULL;
        }
        r->sets = v;
        r->cap_sets = cap;
    }
    *index = (uint32_t)r->n_sets;
    rx_set *s = &r->sets[r->n_sets++];
    memset(s, 0, sizeof *s);
    return s;
}

static bool set_add(rx_comp *c, rx_set *s, uint32_t lo, uint32_t hi)
{
    if (lo > hi)
        return fail(c, "range out of order");
    void *v = realloc(s->r, (s->n + 1) * sizeof *s->r);
    if (!v)
        return fail(c, "out of memory");
    s->r = v;
    s->r[s->n][0] = lo;
    s->r[s->n][1] = hi;
    s->n++;
    return true;
}

/* A bracket expression; c->i is just past '['. */
static bool bracket(rx_comp *c)
{
    uint32_t k;
    rx_set *s = new_set(c, &k);
    if (!s)
        return false;
    if (at(c, '^')) {
        s->neg = true;
        c->i++;
    }
    bool first = true;
    while (!c->failed) {
        if (c->i >= c->n)
            return fail(c, "unterminated [");
        uint32_t u = c->p[c->i];
        if (u == ']' && !first)
            break;
        first = false;
        c->i++;
        uint8_t cls = 0;
        if (u == '\\' && !escape(c, true, &cls, &u))
            return false;
        if (cls) {
            c->r->sets[k].classes |= cls;
            continue;
        }
        if (at(c, '-') && c->i + 1 < c->n && c->p[c->i + 1] != ']') {
            c->i++;
            uint32_t hi = c->p[c->i++];
            if (hi == '\\') {
                if (!escape(c, true, &cls, &hi))
                    return false;
                if (cls)
                    return fail(c, "class escape in a range");
            }
            if (!set_add(c, &c->r->sets[k], u, hi))
                return false;
        } else if (!set_add(c, &c->r->sets[k], u, u)) {
            return false;
        }
    }
    c->i++; /* ']' */
    emit(c, OP_SET, k, 0);
    return !c->failed;
}

static bool disjunction(rx_comp *c, bool *nullable);

/* One atom at c->i: emits it and reports whether it can match empty. */
static bool atom(rx_comp *c, bool *nullable)
{
    uint32_t u = c->p[c->i++];
    *nullable = false;
    switch (u) {
    case '[':
        return bracket(c);
    case '(': {
        if (++c->depth > 64)
            return fail(c, "groups nested too deeply");
        bool ok;
        if (at(c, '?')) {
            c->i++;
            uint32_t kind = c->i < c->n ? c->p[c->i++] : 0;
            if (kind == ':') {
                ok = disjunction(c, nullable);
            } else if (kind == '=' || kind == '!') {
                uint32_t look = emit(c, kind == '=' ? OP_LOOK : OP_NLOOK, 0, 0);
                bool dummy;
                ok = disjunction(c, &dummy);
                emit(c, OP_MATCH, 0, 0);
                if (!c->failed)
                    c->r->code[look].b = here(c);
                *nullable = true;
            } else {
                return fail(c, "unsupported group");
            }
        } else {
            ok = disjunction(c, nullable); /* capture groups: nosubs */
        }
        c->depth--;
        if (!ok)
            return false;
        if (!at(c, ')'))
            return fail(c, "missing )");
        c->i++;
        return true;
    }
    case '\\': {
        uint8_t cls;
        if (!escape(c, false, &cls, &u))
            return false;
        if (cls) {
            uint32_t k;
            rx_set *s = new_set(c, &k);
            if (!s)
                return false;
            s->classes = cls;
            emit(c, OP_SET, k, 0);
            return !c->failed;
        }
        emit(c, OP_CHAR, u, 0);
        return !c->failed;
    }
    case '$':
        emit(c, OP_EOL, 0, 0);
        *nullable = true;
        return !c->failed;
    case '^':
    case '.':
        return fail(c, "^ and . are not supported");
    case '*':
    case '+':
    case '?':
    case '{':
    case ')':
    case '|':
        c->i--;
        return fail(c, "unexpected character");
    default:
        emit(c, OP_CHAR, u, 0);
        return !c->failed;
    }
}

/* Decimal number at c->i. */
static bool number(rx_comp *c, uint32_t *v)
{
    size_t start = c->i;
    *v = 0;
    while (c->i < c->n && c->p[c->i] >= '0' && c->p[c->i] <= '9') {
        *v = *v * 10 + (c->p[c->i++] - '0');
        if (*v > 100000)
            return fail(c, "repeat count too large");
    }
    return c->i > start || fail(c, "bad repeat count");
}

#define REP_INF UINT32_MAX

/* A quantifier at c->i, if any: *min, *max (REP_INF), *lazy. */
static bool quantifier(rx_comp *c, bool *has, uint32_t *min, uint32_t *max, bool *lazy)
{
    *has = false;
    if (c->i >= c->n)
        return true;
    uint32_t q = c->p[c->i];
    if (q == '*' || q == '+' || q == '?') {
        c->i++;
        *min = q == '+';
        *max = q == '?' ? 1 : REP_INF;
    } else if (q == '{') {
        c->i++;
        if (!number(c, min))
            return false;
        *max = *min;
        if (at(c, ',')) {
            c->i++;
            *max = REP_INF;
            if (!at(c, '}') && !number(c, max))
                return false;
        }
        if (!at(c, '}') || *max < *min)
            return fail(c, "bad {n,m}");
        c->i++;
    } else {
        return true;
    }
    *has = true;
    *lazy = at(c, '?');
    if (*lazy)
        c->i++;
    return true;
}

static uint32_t split(rx_comp *c, bool lazy, uint32_t body, uint32_t out)
{
    return lazy ? emit(c, OP_SPLIT, out, body) : emit(c, OP_SPLIT, body, out);
}

static void patch_split(rx_comp *c, uint32_t at_pc, bool lazy, uint32_t body, uint32_t out)
{
    if (c->failed)
        return;
    c->r->code[at_pc].a = lazy ? out : body;
    c->r->code[at_pc].b = lazy ? body : out;
}

/* Emit one more copy of the atom whose text is p[start..end). */
static bool atom_copy(rx_comp *c, size_t start, size_t end)
{
    bool dummy;
    c->i = start;
    if (!atom(c, &dummy))
        return false;
    return c->i == end || fail(c, "internal: atom copy");
}

/* A term: an atom and its quantifier, the atom emitted once per copy. */
static bool term(rx_comp *c, bool *nullable)
{
    size_t start = c->i;
    uint32_t pc0 = here(c);
    bool an;
    if (!atom(c, &an))
        return false;
    size_t end = c->i;
    bool has, lazy;
    uint32_t min, max;
    if (!quantifier(c, &has, &min, &max, &lazy))
        return false;
    *nullable = an;
    if (!has)
        return true;
    size_t after = c->i;
    if (an && max != min)
        return fail(c, "a loop whose body can match empty");
    *nullable = an || min == 0;
    c->r->n_code = pc0; /* the first emission only measured the atom */
    for (uint32_t k = 0; k < min; k++)
        if (!atom_copy(c, start, end))
            return false;
    if (max == REP_INF) {
        uint32_t loop = split(c, lazy, 0, 0);
        if (!atom_copy(c, start, end))
            return false;
        emit(c, OP_JMP, loop, 0);
        patch_split(c, loop, lazy, loop + 1, here(c));
    } else if (max > min) {
        uint32_t n_opt = max - min;
        uint32_t *sp = malloc(n_opt * sizeof *sp);
        if (!sp)
            return fail(c, "out of memory");
        for (uint32_t k = 0; k < n_opt; k++) {
            sp[k] = split(c, lazy, 0, 0);
            if (!atom_copy(c, start, end)) {
                free(sp);
                return false;
            }
        }
        for (uint32_t k = 0; k < n_opt; k++)
            patch_split(c, sp[k], lazy, sp[k] + 1, here(c));
        free(sp);
    }
    c->i = after;
    return !c->failed;
}

static bool alternative(rx_comp *c, bool *nullable)
{
    *nullable = true;
    while (c->i < c->n && !at(c, '|') && !at(c, ')')) {
        bool tn;
        if (!term(c, &tn))
            return false;
        *nullable = *nullable && tn;
    }
    return true;
}

static bool disjunction(rx_comp *c, bool *nullable)
{
    /* a|b|c:  SPLIT L1, N1; L1: a; JMP END; N1: SPLIT L2, N2; ... c; END: */
    uint32_t jumps[256];
    size_t n_jumps = 0;
    *nullable = false;
    for (;;) {
        uint32_t sp = emit(c, OP_SPLIT, 0, 0);
        bool an;
        if (!alternative(c, &an))
            return false;
        *nullable = *nullable || an;
        if (!at(c, '|')) {
            /* last alternative: the SPLIT becomes a no-op jump into it */
            if (!c->failed)
                c->r->code[sp] = (rx_ins){OP_JMP, sp + 1, 0};
            break;
        }
        c->i++;
        if (n_jumps == sizeof jumps / sizeof jumps[0])
            return fail(c, "too many alternatives");
        jumps[n_jumps++] = emit(c, OP_JMP, 0, 0);
        if (!c->failed)
            c->r->code[sp] = (rx_ins){OP_SPLIT, sp + 1, here(c)};
    }
    for (size_t k = 0; k < n_jumps && !c->failed; k++)
        c->r->code[jumps[k]].a = here(c);
    return !c->failed;
}

void qk_rx_free(qk_rx *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_sets; i++)
        free(r->sets[i].r);
    free(r->sets);
    free(r->code);
    free(r);
}

qk_rx *qk_rx_compile(const uint32_t *pat, size_t n, qk_err *err)
{
    qk_rx *r = calloc(1, sizeof *r);
    if (!r) {
        qk_errf(err, QK_EIO, "regex: out of memory");
        return NULL;
    }
    rx_comp c = {r, pat, n, 0, 0, err, false};
    bool nullable;
    if (disjunction(&c, &nullable) && c.i < n)
        fail(&c, "unbalanced )");
    emit(&c, OP_MATCH, 0, 0);
    if (c.failed) {
        qk_rx_free(r);
        return NULL;
    }
    return r;
}

/* ---- the interpreter ------------------------------------------------------------ */

void qk_rx_stack_free(qk_rx_stack *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

static bool push(qk_rx_stack *s, uint32_t pc, size_t pos)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        qk_rx_frame *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (qk_rx_frame){pc, pos};
    return true;
}

/* \s \d \w of std::regex in the "C" locale (ASCII only). */
static bool is_space(uint32_t u) { return u == ' ' || (u >= '\t' && u <= '\r'); }
static bool is_digit(uint32_t u) { return u >= '0' && u <= '9'; }
static bool is_word(uint32_t u)
{
    return is_digit(u) || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_';
}

static bool set_has(const rx_set *s, uint32_t u)
{
    bool in = false;
    uint8_t k = s->classes;
    if (k)
        in = ((k & CL_D) && is_digit(u)) || ((k & CL_ND) && !is_digit(u)) || ((k & CL_S) && is_space(u)) ||
             ((k & CL_NS) && !is_space(u)) || ((k & CL_W) && is_word(u)) || ((k & CL_NW) && !is_word(u));
    for (uint32_t i = 0; i < s->n && !in; i++)
        in = u >= s->r[i][0] && u <= s->r[i][1];
    return in != s->neg;
}

/* Run the program from pc at pos over t[..end): 1 and *out = the end of the
 * first match in priority order, 0 none, -1 out of memory.  The stack above
 * its level on entry is this run's own. */
static int run(const qk_rx *r, uint32_t pc, const uint32_t *t, size_t pos, size_t end, bool not_null,
               qk_rx_stack *st, size_t *out)
{
    size_t base = st->n, start = pos;
    for (;;) {
        const rx_ins *in = &r->code[pc];
        bool ok;
        switch (in->op) {
        case OP_CHAR:
            ok = pos < end && t[pos] == in->a;
            pc++, pos++;
            break;
        case OP_SET:
            ok = pos < end && set_has(&r->sets[in->a], t[pos]);
            pc++, pos++;
            break;
        case OP_SPLIT:
            if (!push(st, in->b, pos))
                return -1;
            pc = in->a;
            continue;
        case OP_JMP:
            pc = in->a;
            continue;
        case OP_EOL:
            ok = pos == end;
            pc++;
            break;
        case OP_LOOK:
        case OP_NLOOK: {
            size_t ignored;
            int m = run(r, pc + 1, t, pos, end, false, st, &ignored);
            if (m < 0)
                return -1;
            ok = (m == 1) == (in->op == OP_LOOK);
            pc = in->b;
            break;
        }
        default: /* OP_MATCH */
            ok = !(not_null && pos == start);
            if (ok) {
                *out = pos;
                st->n = base;
                return 1;
            }
            break;
        }
        if (ok)
            continue;
        if (st->n == base)
            return 0;
        st->n--;
        pc = st->v[st->n].pc;
        pos = st->v[st->n].pos;
    }
}

int qk_rx_search(const qk_rx *r, const uint32_t *t, size_t from, size_t end, bool not_null, bool anchored,
                 qk_rx_stack *st, size_t *b, size_t *e)
{
    for (size_t s = from; s <= end; s++) {
        st->n = 0;
        int m = run(r, 0, t, s, end, not_null, st, e);
        if (m)
            return m < 0 ? -1 : (*b = s, 1);
        if (anchored)
            break;
    }
    return 0;
}
