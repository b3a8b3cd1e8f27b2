#include "lib/report/meta_print.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <string.h>

#include "formats/ftype.h"
#include "formats/gguf.h"
#include "formats/hfdir.h"

#define ARRAY_PREVIEW 6

static bool want_key(const char *glob, qk_str key)
{
    if (!glob)
        return true;
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(key.len < 511 ? key.len : 511), key.ptr);
    return fnmatch(glob, buf, 0) == 0;
}

/* Element i of an array value as a scalar value. */
static qk_gguf_value arr_item(const qk_gguf_value *v, uint64_t i)
{
    if (v->arr.items)
        return v->arr.items[i];
    qk_gguf_value e = {.type = v->arr.elem};
    switch (v->arr.elem) {
    case QK_GGUF_F32: case QK_GGUF_F64: e.f = qk_gguf_arr_f64(v, i); break;
    case QK_GGUF_I8: case QK_GGUF_I16: case QK_GGUF_I32: case QK_GGUF_I64:
        e.i = qk_gguf_arr_i64(v, i); break;
    default: e.u = (uint64_t)qk_gguf_arr_i64(v, i); break;
    }
    return e;
}

static void type_str(const qk_gguf_value *v, char *buf, size_t n)
{
    if (v->type != QK_GGUF_ARRAY) {
        snprintf(buf, n, "%s", qk_gguf_vtype_name(v->type));
        return;
    }
    snprintf(buf, n, "%s[%" PRIu64 "]", qk_gguf_vtype_name(v->arr.elem), v->arr.n);
}

static void value_text(FILE *out, const qk_gguf_value *v, bool full)
{
    switch (v->type) {
    case QK_GGUF_STRING: qk_json_escape(out, v->s.ptr, v->s.len); break;
    case QK_GGUF_BOOL: fputs(v->u ? "true" : "false", out); break;
    case QK_GGUF_F32: case QK_GGUF_F64: fprintf(out, "%.9g", v->f); break;
    case QK_GGUF_I8: case QK_GGUF_I16: case QK_GGUF_I32: case QK_GGUF_I64:
        fprintf(out, "%" PRId64, v->i); break;
    case QK_GGUF_ARRAY: {
        uint64_t shown = full || v->arr.n <= ARRAY_PREVIEW ? v->arr.n : ARRAY_PREVIEW;
        fputc('[', out);
        for (uint64_t i = 0; i < shown; i++) {
            qk_gguf_value e = arr_item(v, i);
            if (i)
                fputs(", ", out);
            value_text(out, &e, full);
        }
        if (shown < v->arr.n)
            fprintf(out, ", ... (%" PRIu64 " more)", v->arr.n - shown);
        fputc(']', out);
        break;
    }
    default: fprintf(out, "%" PRIu64, v->u); break;
    }
}

static void value_json(qk_json *j, const qk_gguf_value *v, bool full)
{
    switch (v->type) {
    case QK_GGUF_STRING: qk_json_strn(j, v->s.ptr, v->s.len); break;
    case QK_GGUF_BOOL: qk_json_bool(j, v->u != 0); break;
    case QK_GGUF_F32: case QK_GGUF_F64: qk_json_f64(j, v->f); break;
    case QK_GGUF_I8: case QK_GGUF_I16: case QK_GGUF_I32: case QK_GGUF_I64: qk_json_int(j, v->i); break;
    case QK_GGUF_ARRAY: {
        uint64_t shown = full || v->arr.n <= ARRAY_PREVIEW ? v->arr.n : ARRAY_PREVIEW;
        qk_json_arr(j);
        for (uint64_t i = 0; i < shown; i++) {
            qk_gguf_value e = arr_item(v, i);
            value_json(j, &e, full);
        }
        qk_json_end_arr(j);
        break;
    }
    default: qk_json_uint(j, v->u); break;
    }
}

/* "llama" for general.architecture = llama, or NULL. */
static bool gguf_arch(const qk_gguf *g, qk_str *arch)
{
    return qk_gguf_get_str(g, "general.architecture", arch);
}

static bool is_hparam(qk_str key, qk_str arch)
{
    return arch.len && key.len > arch.len + 1 && memcmp(key.ptr, arch.ptr, arch.len) == 0 &&
           key.ptr[arch.len] == '.';
}

static void gguf_text(FILE *out, const qk_tensorset *s, const char *glob, bool full)
{
    const qk_gguf *g = s->gguf;
    fprintf(out, "file:         %s\n", s->path);
    fprintf(out, "format:       GGUF v%" PRIu32 ", %d file%s, alignment %" PRIu32
                 ", data at offset %" PRIu64 "\n",
            g->version, g->n_shards, g->n_shards == 1 ? "" : "s", g->alignment, g->data_offset);
    fprintf(out, "size:         %" PRIu64 " bytes\n", s->file_bytes);
    qk_str arch = {0};
    if (gguf_arch(g, &arch)) {
        fprintf(out, "architecture: %.*s\n", (int)arch.len, arch.ptr);
        for (uint64_t i = 0; i < g->n_kv; i++) {
            const qk_gguf_kv *kv = &g->kv[i];
            if (kv->v.type == QK_GGUF_ARRAY || !is_hparam(kv->key, arch))
                continue;
            fprintf(out, "  %-36.*s ", (int)(kv->key.len - arch.len - 1), kv->key.ptr + arch.len + 1);
            value_text(out, &kv->v, false);
            fputc('\n', out);
        }
    }
    uint64_t ft;
    if (qk_gguf_get_uint(g, "general.file_type", &ft)) {
        const char *nm = qk_ftype_name((long)ft);
        fprintf(out, "file type:    %" PRIu64 " (%s)\n", ft, nm ? nm : "unknown");
    }
    fprintf(out, "\nmetadata (%" PRIu64 " keys%s):\n", g->n_kv, glob ? ", matching shown" : "");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const qk_gguf_kv *kv = &g->kv[i];
        if (!want_key(glob, kv->key))
            continue;
        char ts[48];
        type_str(&kv->v, ts, sizeof ts);
        fprintf(out, "  %-40.*s %-14s ", (int)kv->key.len, kv->key.ptr, ts);
        value_text(out, &kv->v, full);
        fputc('\n', out);
    }
}

static void gguf_json(qk_json *j, const qk_tensorset *s, const char *glob, bool full)
{
    const qk_gguf *g = s->gguf;
    qk_json_key(j, "format"), qk_json_str(j, "gguf");
    qk_json_key(j, "version"), qk_json_uint(j, g->version);
    qk_json_key(j, "files"), qk_json_int(j, g->n_shards);
    qk_json_key(j, "alignment"), qk_json_uint(j, g->alignment);
    qk_json_key(j, "data_offset"), qk_json_uint(j, g->data_offset);
    qk_json_key(j, "size"), qk_json_uint(j, s->file_bytes);
    qk_str arch = {0};
    bool has_arch = gguf_arch(g, &arch);
    qk_json_key(j, "architecture");
    if (has_arch)
        qk_json_strn(j, arch.ptr, arch.len);
    else
        qk_json_null(j);
    qk_json_key(j, "hyperparameters");
    qk_json_obj(j);
    for (uint64_t i = 0; has_arch && i < g->n_kv; i++) {
        const qk_gguf_kv *kv = &g->kv[i];
        if (kv->v.type == QK_GGUF_ARRAY || !is_hparam(kv->key, arch))
            continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(kv->key.len - arch.len - 1), kv->key.ptr + arch.len + 1);
        qk_json_key(j, key);
        value_json(j, &kv->v, false);
    }
    qk_json_end_obj(j);
    uint64_t ft;
    qk_json_key(j, "file_type");
    if (qk_gguf_get_uint(g, "general.file_type", &ft))
        qk_json_str(j, qk_ftype_name((long)ft));
    else
        qk_json_null(j);
    qk_json_key(j, "metadata");
    qk_json_arr(j);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const qk_gguf_kv *kv = &g->kv[i];
        if (!want_key(glob, kv->key))
            continue;
        char ts[48];
        type_str(&kv->v, ts, sizeof ts);
        qk_json_obj(j);
        qk_json_key(j, "key"), qk_json_strn(j, kv->key.ptr, kv->key.len);
        qk_json_key(j, "type"), qk_json_str(j, ts);
        qk_json_key(j, "value");
        value_json(j, &kv->v, full);
        qk_json_end_obj(j);
    }
    qk_json_end_arr(j);
}

/* ---- Hugging Face directories: config.json and __metadata__ ---------- */

static void jv_text(FILE *out, const qk_jsonv *v, bool full)
{
    switch (v->type) {
    case QK_JNULL: fputs("null", out); break;
    case QK_JBOOL: fputs(v->b ? "true" : "false", out); break;
    case QK_JNUM:
        if (v->num.flags & QK_JNUM_I64)
            fprintf(out, "%" PRId64, v->num.i);
        else if (v->num.flags & QK_JNUM_U64)
            fprintf(out, "%" PRIu64, v->num.u);
        else
            fprintf(out, "%.17g", v->num.d);
        break;
    case QK_JSTR: qk_json_escape(out, v->str.s, v->str.len); break;
    case QK_JARR: {
        size_t shown = full || v->arr.n <= ARRAY_PREVIEW ? v->arr.n : ARRAY_PREVIEW;
        fputc('[', out);
        for (size_t i = 0; i < shown; i++) {
            if (i)
                fputs(", ", out);
            jv_text(out, v->arr.items[i], full);
        }
        if (shown < v->arr.n)
            fprintf(out, ", ... (%zu more)", v->arr.n - shown);
        fputc(']', out);
        break;
    }
    case QK_JOBJ:
        fputc('{', out);
        for (size_t i = 0; i < v->obj.n; i++) {
            if (i)
                fputs(", ", out);
            qk_json_escape(out, v->obj.m[i].key, v->obj.m[i].key_len);
            fputs(": ", out);
            jv_text(out, v->obj.m[i].val, full);
        }
        fputc('}', out);
        break;
    }
}

static void jv_json(qk_json *j, const qk_jsonv *v)
{
    switch (v->type) {
    case QK_JNULL: qk_json_null(j); break;
    case QK_JBOOL: qk_json_bool(j, v->b); break;
    case QK_JNUM:
        if (v->num.flags & QK_JNUM_I64)
            qk_json_int(j, v->num.i);
        else if (v->num.flags & QK_JNUM_U64)
            qk_json_uint(j, v->num.u);
        else
            qk_json_f64(j, v->num.d);
        break;
    case QK_JSTR: qk_json_strn(j, v->str.s, v->str.len); break;
    case QK_JARR:
        qk_json_arr(j);
        for (size_t i = 0; i < v->arr.n; i++)
            jv_json(j, v->arr.items[i]);
        qk_json_end_arr(j);
        break;
    case QK_JOBJ:
        qk_json_obj(j);
        for (size_t i = 0; i < v->obj.n; i++) {
            qk_json_key(j, v->obj.m[i].key);
            jv_json(j, v->obj.m[i].val);
        }
        qk_json_end_obj(j);
        break;
    }
}

static bool want_ckey(const char *glob, const char *key)
{
    return !glob || fnmatch(glob, key, 0) == 0;
}

static const char *hf_arch(const qk_hfdir *h)
{
    const qk_jsonv *a = qk_jsonv_at(qk_jsonv_get(h->config, "architectures"), 0);
    return qk_jsonv_str(a) ? qk_jsonv_str(a) : qk_jsonv_get_str(h->config, "model_type", NULL);
}

static void hf_text(FILE *out, const qk_tensorset *s, const char *glob, bool full)
{
    const qk_hfdir *h = s->st;
    fprintf(out, "file:         %s\n", s->path);
    fprintf(out, "format:       safetensors, %d file%s%s\n", h->n_files, h->n_files == 1 ? "" : "s",
            h->index_path ? " (sharded, with index)" : "");
    fprintf(out, "size:         %" PRIu64 " bytes\n", s->file_bytes);
    const char *arch = h->config ? hf_arch(h) : NULL;
    if (arch) {
        fprintf(out, "architecture: %s\n", arch);
        for (size_t i = 0; i < qk_jsonv_len(h->config); i++) {
            const qk_jsonm *m = qk_jsonv_member(h->config, i);
            if (m->val->type == QK_JNUM || m->val->type == QK_JBOOL) {
                fprintf(out, "  %-36s ", m->key);
                jv_text(out, m->val, false);
                fputc('\n', out);
            }
        }
    }
    const char *dt = qk_jsonv_get_str(h->config, "torch_dtype", NULL);
    if (dt)
        fprintf(out, "dtype:        %s\n", dt);
    fputs("\nmetadata (config.json, then each file's __metadata__):\n", out);
    for (size_t i = 0; i < qk_jsonv_len(h->config); i++) {
        const qk_jsonm *m = qk_jsonv_member(h->config, i);
        char key[300];
        snprintf(key, sizeof key, "config.%s", m->key);
        if (!want_ckey(glob, key))
            continue;
        fprintf(out, "  %-40s %-8s ", key, qk_jtype_name(m->val->type));
        jv_text(out, m->val, full);
        fputc('\n', out);
    }
    for (int f = 0; f < h->n_files; f++) {
        for (size_t i = 0; i < h->files[f]->n_meta; i++) {
            const qk_st_meta *m = &h->files[f]->meta[i];
            char key[300];
            snprintf(key, sizeof key, "__metadata__.%s", m->key);
            if (!want_ckey(glob, key))
                continue;
            fprintf(out, "  %-40s %-8s ", key, "string");
            qk_json_escape(out, m->value, strlen(m->value));
            fputc('\n', out);
        }
    }
}

static void hf_json(qk_json *j, const qk_tensorset *s, const char *glob, bool full)
{
    const qk_hfdir *h = s->st;
    qk_json_key(j, "format"), qk_json_str(j, "safetensors");
    qk_json_key(j, "files"), qk_json_int(j, h->n_files);
    qk_json_key(j, "size"), qk_json_uint(j, s->file_bytes);
    qk_json_key(j, "architecture"), qk_json_str(j, h->config ? hf_arch(h) : NULL);
    qk_json_key(j, "hyperparameters");
    qk_json_obj(j);
    for (size_t i = 0; i < qk_jsonv_len(h->config); i++) {
        const qk_jsonm *m = qk_jsonv_member(h->config, i);
        if (m->val->type == QK_JNUM || m->val->type == QK_JBOOL) {
            qk_json_key(j, m->key);
            jv_json(j, m->val);
        }
    }
    qk_json_end_obj(j);
    qk_json_key(j, "file_type"), qk_json_str(j, qk_jsonv_get_str(h->config, "torch_dtype", NULL));
    const qk_jsonv *qc = qk_jsonv_get(h->config, "quantization_config");
    qk_json_key(j, "quantization_config");
    if (qc || h->hf_quant_config)
        jv_json(j, qc ? qc : h->hf_quant_config);
    else
        qk_json_null(j);
    qk_json_key(j, "metadata");
    qk_json_arr(j);
    for (size_t i = 0; i < qk_jsonv_len(h->config); i++) {
        const qk_jsonm *m = qk_jsonv_member(h->config, i);
        char key[300];
        snprintf(key, sizeof key, "config.%s", m->key);
        if (!want_ckey(glob, key))
            continue;
        qk_json_obj(j);
        qk_json_key(j, "key"), qk_json_str(j, key);
        qk_json_key(j, "type"), qk_json_str(j, qk_jtype_name(m->val->type));
        qk_json_key(j, "value"), jv_json(j, m->val);
        qk_json_end_obj(j);
    }
    for (int f = 0; f < h->n_files; f++) {
        for (size_t i = 0; i < h->files[f]->n_meta; i++) {
            const qk_st_meta *m = &h->files[f]->meta[i];
            char key[300];
            snprintf(key, sizeof key, "__metadata__.%s", m->key);
            if (!want_ckey(glob, key))
                continue;
            qk_json_obj(j);
            qk_json_key(j, "key"), qk_json_str(j, key);
            qk_json_key(j, "type"), qk_json_str(j, "string");
            qk_json_key(j, "value"), qk_json_str(j, m->value);
            qk_json_end_obj(j);
        }
    }
    qk_json_end_arr(j);
    (void)full;
}

void qk_meta_text(FILE *out, const qk_tensorset *s, const char *glob, bool full)
{
    if (s->kind == QK_SET_GGUF)
        gguf_text(out, s, glob, full);
    else
        hf_text(out, s, glob, full);
}

void qk_meta_json(qk_json *j, const qk_tensorset *s, const char *glob, bool full)
{
    if (s->kind == QK_SET_GGUF)
        gguf_json(j, s, glob, full);
    else
        hf_json(j, s, glob, full);
}
