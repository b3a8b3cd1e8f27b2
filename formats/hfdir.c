/* hfdir.c - Hugging Face model directories (see hfdir.h). */
#include "formats/hfdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/mapfile.h"

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int parse_json(qk_jsonv **out, const char *path, const char *buf, size_t n, qk_err *err)
{
    qk_jsonp_err je;
    if (qk_jsonp_parse(buf, n, 0, out, &je))
        return qk_err_at(err, path, "JSON", je.off, "%s", je.msg);
    return QK_OK;
}

int qk_hf_json_load(qk_jsonv **out, const char *path, int optional, qk_err *err)
{
    *out = NULL;
    if (optional && !exists(path))
        return QK_OK;
    qk_map m;
    int rc = qk_map_open(&m, path, err);
    if (rc)
        return rc;
    rc = parse_json(out, path, (const char *)m.data, m.size, err);
    qk_map_close(&m);
    return rc;
}

/* A shard name from weight_map: relative, without ".." components. */
static int safe_name(const char *s)
{
    if (!*s || s[0] == '/')
        return 0;
    for (const char *p = s; *p;) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        p += l + (e ? 1 : 0);
        if (!e)
            break;
    }
    return 1;
}

static int add_file(qk_hfdir *hf, const char *path, qk_err *err)
{
    char **np = realloc(hf->file_paths, (size_t)(hf->n_files + 1) * sizeof *np);
    if (np)
        hf->file_paths = np;
    qk_st **nf = realloc(hf->files, (size_t)(hf->n_files + 1) * sizeof *nf);
    if (nf)
        hf->files = nf;
    if (!np || !nf || !(hf->file_paths[hf->n_files] = strdup(path)))
        return qk_errf(err, QK_EIO, "%s: out of memory", path);
    hf->files[hf->n_files] = NULL;
    hf->n_files++;
    return qk_st_open(&hf->files[hf->n_files - 1], path, err);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int open_index(qk_hfdir *hf, qk_err *err)
{
    int rc = qk_hf_json_load(&hf->index, hf->index_path, 0, err);
    if (rc)
        return rc;
    const qk_jsonv *wm = qk_jsonv_get(hf->index, "weight_map");
    if (!qk_jsonv_is(wm, QK_JOBJ))
        return qk_err_at(err, hf->index_path, "weight_map", wm ? wm->off : 0, "missing or not an object");
    /* The distinct shard names, sorted. */
    size_t n = wm->obj.n, k = 0;
    const char **names = malloc((n ? n : 1) * sizeof *names);
    if (!names)
        return qk_errf(err, QK_EIO, "%s: out of memory", hf->index_path);
    for (size_t i = 0; i < n; i++) {
        const qk_jsonm *m = &wm->obj.m[i];
        const char *s = qk_jsonv_str(m->val);
        if (!s || !safe_name(s) || strlen(s) != m->val->str.len) {
            free(names);
            return qk_err_at(err, hf->index_path, "weight_map", m->val->off,
                             "tensor '%.64s': shard must be a relative file name", m->key);
        }
        names[k++] = s;
    }
    qsort(names, k, sizeof *names, cmp_str);
    for (size_t i = 0; i < k && rc == QK_OK; i++) {
        if (i && strcmp(names[i], names[i - 1]) == 0)
            continue;
        char *p = join(hf->dir, names[i]);
        if (!p)
            rc = qk_errf(err, QK_EIO, "%s: out of memory", hf->index_path);
        else if (!exists(p))
            rc = qk_errf(err, QK_EINPUT, "%s: shard %s listed in weight_map does not exist", hf->index_path, p);
        else
            rc = add_file(hf, p, err);
        free(p);
    }
    free(names);
    if (rc)
        return rc;
    /* Every listed tensor must be in its shard. */
    for (size_t i = 0; i < n; i++) {
        const qk_jsonm *m = &wm->obj.m[i];
        int f = 0;
        while (f < hf->n_files) {
            const char *base = hf->file_paths[f] + strlen(hf->dir) + 1;
            if (strcmp(base, m->val->str.s) == 0)
                break;
            f++;
        }
        if (f == hf->n_files || !qk_st_find(hf->files[f], m->key))
            return qk_err_at(err, hf->index_path, "weight_map", m->key_off,
                             "tensor '%.64s' is not in shard %s", m->key, m->val->str.s);
    }
    return QK_OK;
}

static int cmp_tensor(const void *a, const void *b, void *arg)
{
    const qk_hf_tensor *ts = arg;
    return strcmp(ts[*(const size_t *)a].name, ts[*(const size_t *)b].name);
}

static int unify(qk_hfdir *hf, qk_err *err)
{
    size_t n = 0;
    for (int f = 0; f < hf->n_files; f++)
        n += hf->files[f]->n_tensors;
    hf->tensors = calloc(n ? n : 1, sizeof *hf->tensors);
    hf->by_name = malloc((n ? n : 1) * sizeof *hf->by_name);
    if (!hf->tensors || !hf->by_name)
        return qk_errf(err, QK_EIO, "%s: out of memory", hf->dir);
    for (int f = 0; f < hf->n_files; f++)
        for (size_t i = 0; i < hf->files[f]->n_tensors; i++) {
            const qk_st_tensor *s = &hf->files[f]->tensors[i];
            qk_hf_tensor *t = &hf->tensors[hf->n_tensors];
            t->name = s->name;
            t->type = s->type;
            t->dtype = s->dtype->name;
            t->n_dims = s->n_dims;
            memcpy(t->shape, s->shape, sizeof t->shape);
            memcpy(t->ne, s->ne, sizeof t->ne);
            t->nelem = s->nelem;
            t->nbytes = s->nbytes;
            t->data = s->data;
            t->file_offset = s->file_offset;
            t->file = f;
            t->st = s;
            hf->by_name[hf->n_tensors] = hf->n_tensors;
            hf->n_tensors++;
        }
    qsort_r(hf->by_name, n, sizeof *hf->by_name, cmp_tensor, hf->tensors);
    for (size_t i = 1; i < n; i++) {
        const qk_hf_tensor *a = &hf->tensors[hf->by_name[i - 1]], *b = &hf->tensors[hf->by_name[i]];
        if (strcmp(a->name, b->name) == 0)
            return qk_errf(err, QK_EINPUT, "%s: tensor '%.64s' is in both %s and %s", hf->dir, a->name,
                           hf->file_paths[a->file], hf->file_paths[b->file]);
    }
    return QK_OK;
}

static int open_configs(qk_hfdir *hf, qk_err *err)
{
    static const char *const names[] = {"config.json", "generation_config.json", "hf_quant_config.json"};
    qk_jsonv **slots[] = {&hf->config, &hf->generation_config, &hf->hf_quant_config};
    for (int i = 0; i < 3; i++) {
        char *p = join(hf->dir, names[i]);
        if (!p)
            return qk_errf(err, QK_EIO, "%s: out of memory", hf->dir);
        int rc = qk_hf_json_load(slots[i], p, 1, err);
        free(p);
        if (rc)
            return rc;
    }
    return QK_OK;
}

static int open_path(qk_hfdir *hf, const char *path, qk_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return qk_err_sys(err, path, "cannot open");
    int rc;
    if (S_ISDIR(st.st_mode)) {
        if (!(hf->dir = strdup(path)))
            return qk_errf(err, QK_EIO, "%s: out of memory", path);
        char *single = join(path, "model.safetensors");
        if (!single)
            return qk_errf(err, QK_EIO, "%s: out of memory", path);
        if (exists(single)) {
            rc = add_file(hf, single, err);
            free(single);
        } else {
            free(single);
            if (!(hf->index_path = join(path, "model.safetensors.index.json")))
                return qk_errf(err, QK_EIO, "%s: out of memory", path);
            if (!exists(hf->index_path))
                return qk_errf(err, QK_EINPUT, "%s: no model.safetensors or model.safetensors.index.json", path);
            rc = open_index(hf, err);
        }
    } else {
        const char *slash = strrchr(path, '/');
        hf->dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
        if (!hf->dir)
            return qk_errf(err, QK_EIO, "%s: out of memory", path);
        if (ends_with(path, ".json")) {
            if (!(hf->index_path = strdup(path)))
                return qk_errf(err, QK_EIO, "%s: out of memory", path);
            rc = open_index(hf, err);
        } else
            rc = add_file(hf, path, err);
    }
    if (!rc)
        rc = unify(hf, err);
    if (!rc)
        rc = open_configs(hf, err);
    return rc;
}

int qk_hf_open(qk_hfdir **out, const char *path, qk_err *err)
{
    *out = NULL;
    qk_hfdir *hf = calloc(1, sizeof *hf);
    if (!hf)
        return qk_errf(err, QK_EIO, "%s: out of memory", path);
    int rc = open_path(hf, path, err);
    if (rc) {
        qk_hf_close(hf);
        return rc;
    }
    *out = hf;
    return QK_OK;
}

int qk_hf_open_mem(qk_hfdir **out, const char *dir, const void *st, size_t st_n, const char *config,
                   size_t config_n, const char *hqc, size_t hqc_n, qk_err *err)
{
    *out = NULL;
    qk_hfdir *hf = calloc(1, sizeof *hf);
    char *st_path = join(dir, "model.safetensors"), *cp = join(dir, "config.json"),
         *hp = join(dir, "hf_quant_config.json");
    int rc = hf && st_path && cp && hp && (hf->dir = strdup(dir)) ? QK_OK : qk_errf(err, QK_EIO, "%s: out of memory", dir);
    char **np = rc ? NULL : malloc(sizeof *np);
    qk_st **nf = rc ? NULL : malloc(sizeof *nf);
    if (!rc && (!np || !nf))
        rc = qk_errf(err, QK_EIO, "%s: out of memory", dir);
    if (!rc) {
        hf->file_paths = np;
        hf->files = nf;
        np = NULL, nf = NULL;
        hf->file_paths[0] = st_path;
        hf->files[0] = NULL;
        hf->n_files = 1;
        st_path = NULL;
        rc = qk_st_open_mem(&hf->files[0], st, st_n, hf->file_paths[0], err);
    }
    if (!rc)
        rc = unify(hf, err);
    if (!rc && config)
        rc = parse_json(&hf->config, cp, config, config_n, err);
    if (!rc && hqc)
        rc = parse_json(&hf->hf_quant_config, hp, hqc, hqc_n, err);
    free(np), free(nf), free(st_path), free(cp), free(hp);
    if (rc) {
        qk_hf_close(hf);
        return rc;
    }
    *out = hf;
    return QK_OK;
}

void qk_hf_close(qk_hfdir *hf)
{
    if (!hf)
        return;
    for (int f = 0; f < hf->n_files; f++) {
        qk_st_close(hf->files[f]);
        free(hf->file_paths[f]);
    }
    free(hf->files);
    free(hf->file_paths);
    free(hf->tensors);
    free(hf->by_name);
    qk_jsonv_free(hf->index);
    qk_jsonv_free(hf->config);
    qk_jsonv_free(hf->generation_config);
    qk_jsonv_free(hf->hf_quant_config);
    free(hf->index_path);
    free(hf->dir);
    free(hf);
}

const qk_hf_tensor *qk_hf_find(const qk_hfdir *hf, const char *name)
{
    size_t lo = 0, hi = hf->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const qk_hf_tensor *t = &hf->tensors[hf->by_name[mid]];
        int r = strcmp(t->name, name);
        if (!r)
            return t;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
