/* conv_meta.c - general.* metadata and file naming (conv_meta.h), after
 * gguf-py's metadata.py and utility.py (llama.cpp d32676d).  The regexes of
 * get_model_id_components are matched by hand below, each beside its
 * pattern. */
#include "lib/convert/conv_meta.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/files.h"
#include "lib/core/strbuf.h"

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

/* \d+([.]\d+)* over s[0..n) */
static bool dotted_number(const char *s, size_t n)
{
    size_t i = 0;
    for (;;) {
        size_t st = i;
        while (i < n && isdigit((unsigned char)s[i]))
            i++;
        if (i == st)
            return false;
        if (i == n)
            return true;
        if (s[i] != '.')
            return false;
        i++;
    }
}

/* (v|iter)?\d+([.]\d+)*  (IGNORECASE) */
static bool is_version(const char *p)
{
    size_t n = strlen(p);
    if (dotted_number(p, n))
        return true;
    if (n > 1 && tolower((unsigned char)p[0]) == 'v' && dotted_number(p + 1, n - 1))
        return true;
    return n > 4 && !strncasecmp(p, "iter", 4) && dotted_number(p + 4, n - 4);
}

/* i?q\d(_\w)*|b?fp?(16|32)  (IGNORECASE) */
static bool is_quant_type(const char *p)
{
    const char *s = p;
    if (tolower((unsigned char)*s) == 'i')
        s++;
    if (tolower((unsigned char)*s) == 'q' && isdigit((unsigned char)s[1])) {
        s += 2;
        while (*s == '_' && (isalnum((unsigned char)s[1]) || s[1] == '_'))
            s += 2;
        if (!*s)
            return true;
    }
    s = p;
    if (tolower((unsigned char)*s) == 'b')
        s++;
    if (tolower((unsigned char)*s) != 'f')
        return false;
    s++;
    if (tolower((unsigned char)*s) == 'p')
        s++;
    return !strcmp(s, "16") || !strcmp(s, "32");
}

/* (([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl)  (IGNORECASE) */
static bool is_size(const char *p)
{
    static const char *const words[] = {"small", "mini", "medium", "large", "xl", "xxl"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcasecmp(p, words[i]))
            return true;
    size_t n = strlen(p);
    /* try every split of the optional prefix: (A | \d+x) */
    for (int pre = 0; pre < 2; pre++) {
        size_t i = 0;
        if (pre) {
            if (tolower((unsigned char)p[0]) == 'a') {
                i = 1;
            } else {
                while (i < n && isdigit((unsigned char)p[i]))
                    i++;
                if (i == 0 || i >= n || tolower((unsigned char)p[i]) != 'x')
                    continue;
                i++;
            }
        }
        size_t st = i;
        while (i < n && isdigit((unsigned char)p[i]))
            i++;
        if (i == st)
            continue;
        /* ([._]\d+)? then [KMBT] then [\d]? : backtracking is not needed
         * since the letter must follow a digit run */
        size_t j = i;
        if (j < n && (p[j] == '.' || p[j] == '_')) {
            size_t k = j + 1;
            while (k < n && isdigit((unsigned char)p[k]))
                k++;
            if (k > j + 1)
                j = k;
        }
        if (j < n && strchr("kmbtKMBT", p[j])) {
            size_t e = j + 1;
            if (e == n || (e + 1 == n && isdigit((unsigned char)p[e])))
                return true;
        }
    }
    return false;
}

static bool is_finetune_word(const char *p)
{
    return !strcasecmp(p, "chat") || !strcasecmp(p, "instruct") || !strcasecmp(p, "vision") || !strcasecmp(p, "lora");
}

enum { T_BASENAME = 1, T_SIZE = 2, T_FINETUNE = 4, T_VERSION = 8, T_TYPE = 16 };

/* "-".join of the parts carrying bit (size labels deduplicated). */
static char *join_parts(char **parts, const int *types, size_t n, int bit, int exclude, bool dedup)
{
    qk_sbuf b = {0};
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(types[i] & bit) || (types[i] & exclude))
            continue;
        bool seen = false;
        for (size_t j = 0; j < i && dedup; j++)
            seen = seen || ((types[j] & bit) && !strcmp(parts[j], parts[i]));
        if (seen)
            continue;
        qk_sb_printf(&b, "%s%s", k++ ? "-" : "", parts[i]);
    }
    return b.s;
}

void qk_conv_id_components(const char *model_id, int64_t total_params, char **full_name, char **org, char **basename,
                           char **finetune, char **version, char **size_label)
{
    *full_name = *org = *basename = *finetune = *version = *size_label = NULL;
    if (!model_id)
        return;
    if (strchr(model_id, ' ')) {
        *full_name = dup0(model_id);
        return;
    }
    const char *slash = strchr(model_id, '/');
    const char *name = slash ? slash + 1 : model_id;
    if (slash && slash > model_id && model_id[0] != '.')
        *org = strndup(model_id, (size_t)(slash - model_id));
    else if (slash && slash == model_id)
        *org = dup0("");
    *full_name = dup0(name);
    /* name_parts: split on '-', empty parts removed */
    size_t cap = strlen(name) + 1, n = 0;
    char **parts = calloc(cap, sizeof *parts);
    int *types = calloc(cap, sizeof *types);
    for (const char *p = name; parts && types;) {
        const char *d = strchr(p, '-');
        size_t len = d ? (size_t)(d - p) : strlen(p);
        if (len)
            parts[n++] = strndup(p, len);
        if (!d)
            break;
        p = d + 1;
    }
    for (size_t i = 0; i < n; i++) {
        char *part = parts[i];
        if (is_version(part)) {
            types[i] |= T_VERSION;
        } else if (is_quant_type(part)) {
            types[i] |= T_TYPE;
            for (char *c = part; *c; c++)
                *c = (char)toupper((unsigned char)*c);
        } else if (i > 0 && is_size(part)) {
            for (char *c = part; *c; c++)
                if (*c == '_')
                    *c = '.';
            size_t len = strlen(part);
            if (isdigit((unsigned char)part[len - 1]) && len >= 2) { /* bloom-7b1 -> 7.1b */
                char last = part[len - 1], prev = part[len - 2];
                char *np = malloc(len + 2);
                memcpy(np, part, len - 2);
                np[len - 2] = '.';
                np[len - 1] = last;
                np[len] = prev;
                np[len + 1] = '\0';
                free(part);
                parts[i] = part = np;
                len++;
            }
            if (len > 1 && isdigit((unsigned char)part[len - 2]) && strchr("kmbt", part[len - 1]))
                part[len - 1] = (char)toupper((unsigned char)part[len - 1]);
            if (total_params != 0) {
                /* float(part[:-1]) * 1000 ** " KMBT".find(part[-1]) */
                char *num = strndup(part, len - 1), *end;
                double v = strtod(num, &end);
                bool ok = *num && !*end && !isspace((unsigned char)num[0]) && strspn(num, "0123456789.") == strlen(num);
                free(num);
                if (ok) {
                    const char *f = strchr(" KMBT", part[len - 1]);
                    int e = f && part[len - 1] ? (int)(f - " KMBT") : -1;
                    double label = v * pow(1000.0, e);
                    int64_t a = total_params < 0 ? -total_params : total_params;
                    if ((total_params < 0 && label < (double)(a / 8)) ||
                        (total_params > 0 && fabs(label - (double)total_params) > (double)(7 * total_params / 8))) {
                        types[i] |= T_FINETUNE;
                        part[len - 1] = (char)tolower((unsigned char)part[len - 1]);
                    }
                }
            }
            if (!types[i])
                types[i] |= T_SIZE;
        } else if (i > 0 && is_finetune_word(part)) {
            types[i] |= total_params < 0 && !strcasecmp(part, "lora") ? T_TYPE : T_FINETUNE;
        }
    }
    /* word-based size labels go when a number-based one is there */
    bool numeric = false;
    for (size_t i = 0; i < n; i++)
        if (types[i] & T_SIZE)
            for (const char *c = parts[i]; *c; c++)
                numeric = numeric || isdigit((unsigned char)*c);
    if (numeric)
        for (size_t i = 0; i < n; i++) {
            bool alpha = true;
            for (const char *c = parts[i]; *c; c++)
                alpha = alpha && isalpha((unsigned char)*c);
            if ((types[i] & T_SIZE) && alpha)
                types[i] &= ~T_SIZE;
        }
    bool at_start = true;
    for (size_t i = 0; i < n; i++) {
        if (at_start && ((!types[i] && isalpha((unsigned char)parts[i][0])) || (types[i] & T_VERSION))) {
            types[i] |= T_BASENAME;
        } else {
            at_start = false;
            if (!types[i])
                types[i] |= T_FINETUNE;
        }
    }
    for (size_t i = n; i-- > 0;) { /* no basename on a trailing version */
        if ((types[i] & T_BASENAME) && types[i] != T_BASENAME)
            types[i] &= ~T_BASENAME;
        else
            break;
    }
    *basename = join_parts(parts, types, n, T_BASENAME, 0, false);
    *size_label = join_parts(parts, types, n, T_SIZE, 0, true);
    *finetune = join_parts(parts, types, n, T_FINETUNE, 0, false);
    *version = join_parts(parts, types, n, T_VERSION, T_BASENAME, false);
    if (!*size_label && !*finetune && !*version) {
        free(*basename);
        *basename = NULL;
    }
    for (size_t i = 0; i < n; i++)
        free(parts[i]);
    free(parts);
    free(types);
}

/* str.title() of one word, and str.islower(). */
static void title_word(qk_sbuf *b, const char *w, size_t n)
{
    bool prev_cased = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)w[i];
        bool cased = isalpha(c);
        qk_sb_printf(b, "%c", cased ? (prev_cased ? tolower(c) : toupper(c)) : c);
        prev_cased = cased;
    }
}

static bool word_islower(const char *w, size_t n)
{
    bool cased = false;
    for (size_t i = 0; i < n; i++) {
        if (isupper((unsigned char)w[i]))
            return false;
        cased = cased || islower((unsigned char)w[i]);
    }
    return cased;
}

/* ^(v\d+(?:\.\d+)*|\d.*)$ */
static bool version_like(const char *w, size_t n)
{
    if (n && isdigit((unsigned char)w[0]))
        return true;
    return n > 1 && w[0] == 'v' && dotted_number(w + 1, n - 1);
}

char *qk_conv_id_to_title(const char *s)
{
    qk_sbuf b = {0};
    char *t = dup0(s);
    if (!t)
        return NULL;
    for (char *c = t; *c; c++)
        if (*c == '-')
            *c = ' ';
    size_t k = 0;
    for (const char *p = t; *p;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && !isspace((unsigned char)*e))
            e++;
        size_t n = (size_t)(e - p);
        if (k++)
            qk_sb_printf(&b, " ");
        if (word_islower(p, n) && !version_like(p, n))
            title_word(&b, p, n);
        else
            qk_sb_printf(&b, "%.*s", (int)n, p);
        p = e;
    }
    free(t);
    return b.s ? b.s : dup0("");
}

/* Apply one model id's components where nothing is set yet. */
static void apply_id(qk_conv_meta *m, const char *model_id, int64_t total_params)
{
    char *full, *org, *base, *ft, *ver, *size;
    qk_conv_id_components(model_id, total_params, &full, &org, &base, &ft, &ver, &size);
    if (!m->name && full)
        m->name = qk_conv_id_to_title(full);
    if (!m->organization && org)
        m->organization = qk_conv_id_to_title(org);
#define TAKE(field, v) \
    if (!m->field && v) { \
        m->field = v;     \
        v = NULL;         \
    }
    TAKE(basename, base)
    TAKE(finetune, ft)
    TAKE(version, ver)
    TAKE(size_label, size)
#undef TAKE
    free(full), free(org), free(base), free(ft), free(ver), free(size);
}

int qk_conv_meta_load(qk_conv_meta *m, const char *dir, const qk_jsonv *config, int64_t total_params,
                      qk_err *err)
{
    memset(m, 0, sizeof *m);
    char *readme = qk_path_join(dir, "README.md"), *buf = NULL;
    size_t n = 0;
    int rc = readme ? qk_read_file(readme, true, &buf, &n, err) : qk_errf(err, QK_EIO, "out of memory");
    if (!rc && buf && n >= 3 && !strncmp(buf, "---", 3) && (n == 3 || buf[3] == '\n' || buf[3] == '\r'))
        rc = qk_errf(err, QK_EINPUT, "%s: model card metadata (YAML front matter): not reproduced by qk-convert yet",
                     readme);
    free(buf);
    free(readme);
    if (rc)
        return rc;
    const char *nop = qk_jsonv_get_str(config, "_name_or_path", NULL);
    if (nop) {
        size_t slashes = 0;
        for (const char *c = nop; *c; c++)
            slashes += *c == '/';
        if (slashes <= 1)
            apply_id(m, nop, total_params);
    }
    /* the directory's own name (Path.name: after the last '/') */
    char *d = dup0(dir);
    size_t dl = strlen(d);
    while (dl > 1 && d[dl - 1] == '/')
        d[--dl] = '\0';
    const char *base = strrchr(d, '/') ? strrchr(d, '/') + 1 : d;
    if (!strcmp(base, "."))
        base = ""; /* Path(".").name */
    if (*base)
        apply_id(m, base, total_params);
    free(d);
    qk_jsonv *gen = NULL;
    char *gp = qk_path_join(dir, "generation_config.json"), *gbuf = NULL;
    size_t gn = 0;
    if (gp && !qk_read_file(gp, true, &gbuf, &gn, err) && gbuf) {
        qk_jsonp_err je;
        if (qk_jsonp_parse(gbuf, gn, 0, &gen, &je))
            gen = NULL; /* not all models have a valid generation_config.json */
    }
    free(gp);
    free(gbuf);
    m->has_top_k = qk_jsonv_i64(qk_jsonv_get(gen, "top_k"), &m->top_k);
    m->has_top_p = qk_jsonv_f64(qk_jsonv_get(gen, "top_p"), &m->top_p);
    m->has_min_p = qk_jsonv_f64(qk_jsonv_get(gen, "min_p"), &m->min_p);
    m->has_temp = qk_jsonv_f64(qk_jsonv_get(gen, "temperature"), &m->temp);
    qk_jsonv_free(gen);
    if (!m->name)
        m->name = dup0(base[0] ? base : "");
    return 0;
}

void qk_conv_meta_free(qk_conv_meta *m)
{
    free(m->name), free(m->organization), free(m->basename), free(m->finetune), free(m->version);
    free(m->size_label);
    memset(m, 0, sizeof *m);
}

void qk_conv_size_label(int64_t total, char *out, size_t n)
{
    double a = (double)(total < 0 ? -total : total), s;
    const char *suffix;
    if (a > 1e12)
        s = a * 1e-12, suffix = "T";
    else if (a > 1e9)
        s = a * 1e-9, suffix = "B";
    else if (a > 1e6)
        s = a * 1e-6, suffix = "M";
    else
        s = a * 1e-3, suffix = "K";
    /* fix = max(2 - len(str(round(s)).lstrip('0')), 0) */
    char r[64];
    snprintf(r, sizeof r, "%.0f", rint(s));
    const char *digits = r + strspn(r, "0");
    int fix = 2 - (int)strlen(digits);
    if (fix < 0)
        fix = 0;
    snprintf(out, n, "%.*f%s", fix, s, suffix);
}

static void put_dashed(qk_sbuf *b, const char *s, bool slash_too)
{
    /* strip(), then ' ' (and '/') -> '-' */
    while (*s && isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    for (size_t i = 0; i < n; i++)
        qk_sb_printf(b, "%c", s[i] == ' ' || (slash_too && s[i] == '/') ? '-' : s[i]);
}

char *qk_conv_default_name(const qk_conv_meta *m, const char *size_label, const char *output_type, const char *kind)
{
    qk_sbuf b = {0};
    if (m->basename)
        put_dashed(&b, m->basename, true);
    else if (m->name)
        put_dashed(&b, m->name, true);
    else
        qk_sb_printf(&b, "ggml-model");
    if (size_label)
        qk_sb_printf(&b, "-%s", size_label);
    if (m->finetune) {
        qk_sb_printf(&b, "-");
        put_dashed(&b, m->finetune, false);
    }
    if (m->version) {
        qk_sb_printf(&b, "-");
        put_dashed(&b, m->version, false);
    }
    if (output_type) {
        qk_sb_printf(&b, "-");
        put_dashed(&b, output_type, false); /* already upper case */
    }
    if (kind)
        qk_sb_printf(&b, "-%s", kind);
    return b.s ? b.s : dup0("");
}

char *qk_conv_fill_template(const char *name, const char *output_type, qk_err *err)
{
    qk_sbuf b = {0};
    char lower[16], upper[16];
    size_t k = 0;
    for (; output_type[k] && k < sizeof lower - 1; k++) {
        lower[k] = (char)tolower((unsigned char)output_type[k]);
        upper[k] = (char)toupper((unsigned char)output_type[k]);
    }
    lower[k] = upper[k] = '\0';
    for (const char *p = name; *p; p++) {
        if (p[0] == '{' && p[1] == '{') {
            qk_sb_printf(&b, "{");
            p++;
        } else if (p[0] == '}' && p[1] == '}') {
            qk_sb_printf(&b, "}");
            p++;
        } else if (*p == '{') {
            const char *e = strchr(p, '}');
            size_t fl = e ? (size_t)(e - p - 1) : 0;
            const char *f = p + 1;
            if (e && (fl == 0 || (fl == 1 && *f == '0') || (fl == 7 && !strncmp(f, "outtype", 7)) ||
                      (fl == 5 && !strncmp(f, "ftype", 5))))
                qk_sb_printf(&b, "%s", lower);
            else if (e && ((fl == 7 && !strncmp(f, "OUTTYPE", 7)) || (fl == 5 && !strncmp(f, "FTYPE", 5))))
                qk_sb_printf(&b, "%s", upper);
            else {
                free(b.s);
                qk_errf(err, QK_EINPUT, "--outfile '%s': template field other than {ftype}/{outtype}", name);
                return NULL;
            }
            p = e;
        } else if (*p == '}') {
            free(b.s);
            qk_errf(err, QK_EINPUT, "--outfile '%s': single '}' in a template", name);
            return NULL;
        } else {
            qk_sb_printf(&b, "%c", *p);
        }
    }
    return b.s ? b.s : dup0("");
}
