/* transform.c - compressed-tensors' transform_config (see transform.h). */
#include "formats/transform.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/quantcfg.h"
#include "kernels/hadamard.h"
#include "lib/core/ere.h"

typedef struct tpat {
    char *exact;   /* NULL: a regex */
    regex_t re;
} tpat;

typedef struct tpats {
    int n;
    tpat *p;
} tpats;

static const char *const loc_names[] = {"input", "weight_input", "weight_output", "output", "k_cache", "q_attn"};

const char *qk_tloc_name(qk_tloc l) { return (unsigned)l <= QK_TL_Q_ATTN ? loc_names[l] : "?"; }

static void free_pats(tpats *ps)
{
    if (!ps)
        return;
    for (int i = 0; i < ps->n; i++) {
        if (ps->p[i].exact)
            free(ps->p[i].exact);
        else
            regfree(&ps->p[i].re);
    }
    free(ps->p);
    free(ps);
}

void qk_tcfg_free(qk_tcfg *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++) {
        for (int j = 0; j < t->g[i].n_apply; j++) {
            free_pats(t->g[i].apply[j].targets);
            free_pats(t->g[i].apply[j].ignore);
        }
        free(t->g[i].apply);
    }
    free(t->g);
    free(t);
}

static int oom(qk_err *err) { return qk_errf(err, QK_EIO, "out of memory"); }

/* A list of strings (or one string, as TransformArgs.wrap_singleton). */
static int parse_pats(const qk_jsonv *v, const char *path, const char *field, tpats **out, qk_err *err)
{
    tpats *ps = calloc(1, sizeof *ps);
    if (!ps)
        return oom(err);
    *out = ps;
    if (!v || v->type == QK_JNULL)
        return QK_OK;
    const bool one = v->type == QK_JSTR;
    if (!one && v->type != QK_JARR)
        return qk_err_at(err, path, field, v->off, "must be a string or a list of strings");
    const size_t n = one ? 1 : qk_jsonv_len(v);
    if (!(ps->p = calloc(n ? n : 1, sizeof *ps->p)))
        return oom(err);
    for (size_t i = 0; i < n; i++) {
        const qk_jsonv *s = one ? v : qk_jsonv_at(v, i);
        const char *str = qk_jsonv_str(s);
        if (!str)
            return qk_err_at(err, path, field, s->off, "must be a string");
        tpat *p = &ps->p[ps->n];
        if (strncmp(str, "re:", 3) == 0) {
            char *ere = qk_py_to_ere(str + 3), msg[128];
            if (!ere)
                return oom(err);
            int rc = qk_ere_compile(&p->re, ere, REG_EXTENDED | REG_NOSUB, msg, sizeof msg);
            free(ere);
            if (rc)
                return qk_err_at(err, path, field, s->off, "bad regex \"%.80s\": %s", str, msg);
        } else if (!(p->exact = strdup(str)))
            return oom(err);
        ps->n++;
    }
    return QK_OK;
}

static bool pats_match(const tpats *ps, const char *module)
{
    for (int i = 0; ps && i < ps->n; i++)
        if (ps->p[i].exact ? strcmp(ps->p[i].exact, module) == 0 : regexec(&ps->p[i].re, module, 0, NULL, 0) == 0)
            return true;
    return false;
}

bool qk_tapply_matches(const qk_tapply *a, const char *module)
{
    return pats_match(a->targets, module) && !pats_match(a->ignore, module);
}

static int parse_group(const qk_jsonm *m, const char *path, qk_tgroup *g, qk_err *err)
{
    char field[160];
    const qk_jsonv *v = m->val;
    snprintf(g->name, sizeof g->name, "%s", m->key);
    snprintf(field, sizeof field, "transform_config.config_groups.%.64s", m->key);
    g->off = v->off;
    if (v->type != QK_JOBJ)
        return qk_err_at(err, path, field, v->off, "must be an object");
    const char *type = qk_jsonv_get_str(v, "type", NULL);
    if (!type || strcmp(type, "hadamard"))
        return qk_err_at(err, path, field, v->off,
                         "transform type '%.40s' is not applied by qk (only \"hadamard\": Sylvester's matrix)",
                         type ? type : "(missing)");
    if (qk_jsonv_get_bool(v, "randomize", false))
        return qk_err_at(err, path, field, v->off, "randomize true (random permutations) is not applied by qk");
    const qk_jsonv *hd = qk_jsonv_get(v, "head_dim");
    int64_t h = 0;
    if (hd && hd->type != QK_JNULL && (!qk_jsonv_i64(hd, &h) || !qk_is_pow2(h) || h > (1 << 20)))
        return qk_err_at(err, path, field, hd->off, "head_dim must be null or a power of two (Sylvester's matrix)");
    g->head_dim = (int)h;
    const char *prec = qk_jsonv_get_str(v, "precision", "torch.float32");
    if (strcmp(prec, "torch.float64") && strcmp(prec, "torch.float32") && strcmp(prec, "float64") &&
        strcmp(prec, "float32"))
        return qk_err_at(err, path, field, v->off, "precision '%.40s' is not applied by qk (float32, float64)", prec);
    g->f64 = strstr(prec, "64") != NULL;
    const qk_jsonv *ap = qk_jsonv_get(v, "apply");
    if (ap && ap->type != QK_JARR)
        return qk_err_at(err, path, field, ap->off, "apply must be a list");
    const size_t na = qk_jsonv_len(ap);
    if (!(g->apply = calloc(na ? na : 1, sizeof *g->apply)))
        return oom(err);
    for (size_t i = 0; i < na; i++) {
        const qk_jsonv *a = qk_jsonv_at(ap, i);
        qk_tapply *t = &g->apply[g->n_apply++];
        t->off = a->off;
        if (a->type != QK_JOBJ)
            return qk_err_at(err, path, field, a->off, "apply[%zu] must be an object", i);
        const char *loc = qk_jsonv_get_str(a, "location", NULL);
        int l = -1;
        for (int k = 0; loc && k <= QK_TL_Q_ATTN; k++)
            if (!strcmp(loc, loc_names[k]))
                l = k;
        if (l < 0)
            return qk_err_at(err, path, field, a->off, "apply[%zu]: unknown location '%.40s'", i,
                             loc ? loc : "(missing)");
        t->loc = (qk_tloc)l;
        t->inverse = qk_jsonv_get_bool(a, "inverse", false);
        if (parse_pats(qk_jsonv_get(a, "targets"), path, field, (tpats **)&t->targets, err) ||
            parse_pats(qk_jsonv_get(a, "ignore"), path, field, (tpats **)&t->ignore, err))
            return err->code;
    }
    return QK_OK;
}

int qk_tcfg_parse(const qk_jsonv *config, const char *path, qk_tcfg **out, qk_err *err)
{
    *out = NULL;
    const qk_jsonv *tc = qk_jsonv_get(qk_jsonv_get(config, "quantization_config"), "transform_config");
    if (!tc || tc->type == QK_JNULL || (tc->type == QK_JOBJ && qk_jsonv_len(tc) == 0))
        return QK_OK;
    const qk_jsonv *groups = qk_jsonv_get(tc, "config_groups");
    if (tc->type != QK_JOBJ || !qk_jsonv_is(groups, QK_JOBJ))
        return qk_err_at(err, path, "transform_config", tc->off, "must be an object with config_groups");
    if (qk_jsonv_len(groups) == 0)
        return QK_OK;
    qk_tcfg *t = calloc(1, sizeof *t);
    if (!t || !(t->g = calloc(qk_jsonv_len(groups), sizeof *t->g))) {
        free(t);
        return oom(err);
    }
    int rc = QK_OK;
    for (size_t i = 0; !rc && i < qk_jsonv_len(groups); i++, t->n++)
        rc = parse_group(qk_jsonv_member(groups, i), path, &t->g[i], err);
    if (rc) {
        qk_tcfg_free(t);
        return rc;
    }
    *out = t;
    return QK_OK;
}

bool qk_tcfg_is_param(const qk_tcfg *t, const char *name)
{
    const char *leaf = strrchr(name, '.');
    if (!t || !leaf || (strcmp(leaf, ".weight") && strcmp(leaf, ".perm")))
        return false;
    const char *mod_end = leaf, *mod = mod_end;
    while (mod > name && mod[-1] != '.')
        mod--;
    const size_t len = (size_t)(mod_end - mod);
    for (int i = 0; i < t->n; i++) {
        const size_t gl = strlen(t->g[i].name);
        if (len <= gl + 1 || strncmp(mod, t->g[i].name, gl) || mod[gl] != '_')
            continue;
        for (int k = 0; k <= QK_TL_Q_ATTN; k++)
            if (len == gl + 1 + strlen(loc_names[k]) && !strncmp(mod + gl + 1, loc_names[k], strlen(loc_names[k])))
                return true;
    }
    return false;
}
