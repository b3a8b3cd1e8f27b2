/* meta_print.c - the header part of qk-inspect's report.
 *
 * One walk per container (gguf_walk, hf_walk) visits, in order: the format
 * line, the architecture and its hyper-parameters, the file type, the
 * quantization config and the metadata entries.  Each visit goes to one
 * sink (put_*), which writes either the text report or the JSON keys, so
 * the two outputs cannot drift apart. */
#include "lib/report/meta_print.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <string.h>

#include "formats/ftype.h"
#include "formats/gguf.h"
#include "formats/hfdir.h"

#define ARRAY_PREVIEW 6

/* ---- values: a GGUF value, a parsed JSON value, or a plain string ------------------ */

typedef struct mval {
    const qk_gguf_value *g;
    const qk_jsonv *j;
    const char *s;   /* when neither */
} mval;

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

static void gguf_value_text(FILE *out, const qk_gguf_value *v, bool full)
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
            gguf_value_text(out, &e, full);
        }
        if (shown < v->arr.n)
            fprintf(out, ", ... (%" PRIu64 " more)", v->arr.n - shown);
        fputc(']', out);
        break;
    }
    default: fprintf(out, "%" PRIu64, v->u); break;
    }
}

static void gguf_value_json(qk_json *j, const qk_gguf_value *v, bool full)
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
            gguf_value_json(j, &e, full);
        }
        qk_json_end_arr(j);
        break;
    }
    default: qk_json_uint(j, v->u); break;
    }
}

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

/* JSON values go into the JSON report whole: the text report previews long arrays. */
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

/* ---- the sink: text or JSON ---------------------------------------------------------- */

typedef struct sink {
    FILE *out;         /* text report, or NULL */
    qk_json *j;        /* JSON report, or NULL */
    bool full;         /* metadata values in full */
    bool arch;         /* an architecture was named: text shows hyper-parameters under it */
    int type_width;    /* text: width of the metadata type column */
} sink;

/* What the format line says. */
typedef struct head {
    const char *path, *format;   /* format: "gguf" or "safetensors" */
    int files;
    bool gguf, indexed;
    uint32_t version, alignment;
    uint64_t data_offset, size;
} head;

static void put_value(sink *k, mval v, bool full)
{
    if (k->j) {
        if (v.g)
            gguf_value_json(k->j, v.g, full);
        else if (v.j)
            jv_json(k->j, v.j);
        else
            qk_json_str(k->j, v.s);
    } else if (v.g) {
        gguf_value_text(k->out, v.g, full);
    } else if (v.j) {
        jv_text(k->out, v.j, full);
    } else {
        qk_json_escape(k->out, v.s, strlen(v.s));
    }
}

static void put_head(sink *k, const head *h)
{
    if (k->j) {
        qk_json_key(k->j, "format"), qk_json_str(k->j, h->format);
        if (h->gguf)
            qk_json_key(k->j, "version"), qk_json_uint(k->j, h->version);
        qk_json_key(k->j, "files"), qk_json_int(k->j, h->files);
        if (h->gguf) {
            qk_json_key(k->j, "alignment"), qk_json_uint(k->j, h->alignment);
            qk_json_key(k->j, "data_offset"), qk_json_uint(k->j, h->data_offset);
        }
        qk_json_key(k->j, "size"), qk_json_uint(k->j, h->size);
        return;
    }
    fprintf(k->out, "file:         %s\n", h->path);
    if (h->gguf)
        fprintf(k->out, "format:       GGUF v%" PRIu32 ", %d file%s, alignment %" PRIu32
                        ", data at offset %" PRIu64 "\n",
                h->version, h->files, h->files == 1 ? "" : "s", h->alignment, h->data_offset);
    else
        fprintf(k->out, "format:       safetensors, %d file%s%s\n", h->files, h->files == 1 ? "" : "s",
                h->indexed ? " (sharded, with index)" : "");
    fprintf(k->out, "size:         %" PRIu64 " bytes\n", h->size);
}

/* The architecture (NULL: none), then the hyper-parameters object opens. */
static void put_arch(sink *k, const char *arch, size_t len)
{
    k->arch = arch != NULL;
    if (k->j) {
        qk_json_key(k->j, "architecture");
        if (arch)
            qk_json_strn(k->j, arch, len);
        else
            qk_json_null(k->j);
        qk_json_key(k->j, "hyperparameters");
        qk_json_obj(k->j);
    } else if (arch) {
        fprintf(k->out, "architecture: %.*s\n", (int)len, arch);
    }
}

static void put_hparam(sink *k, const char *key, size_t len, mval v)
{
    if (k->j) {
        char buf[256];
        snprintf(buf, sizeof buf, "%.*s", (int)len, key);
        qk_json_key(k->j, buf);
        put_value(k, v, false);
    } else if (k->arch) {
        fprintf(k->out, "  %-36.*s ", (int)len, key);
        put_value(k, v, false);
        fputc('\n', k->out);
    }
}

/* The hyper-parameters close; the file type: GGUF's general.file_type (number and name),
 * or a directory's torch_dtype (text label "dtype"). */
static void put_file_type(sink *k, bool has_num, uint64_t num, const char *name)
{
    if (k->j) {
        qk_json_end_obj(k->j);
        qk_json_key(k->j, "file_type"), qk_json_str(k->j, name);
    } else if (has_num) {
        fprintf(k->out, "file type:    %" PRIu64 " (%s)\n", num, name ? name : "unknown");
    } else if (name) {
        fprintf(k->out, "dtype:        %s\n", name);
    }
}

/* JSON only: the quantization config of a directory. */
static void put_quant_config(sink *k, const qk_jsonv *qc)
{
    if (!k->j)
        return;
    qk_json_key(k->j, "quantization_config");
    if (qc)
        jv_json(k->j, qc);
    else
        qk_json_null(k->j);
}

static void put_meta_begin(sink *k, const char *title)
{
    if (k->j) {
        qk_json_key(k->j, "metadata");
        qk_json_arr(k->j);
    } else {
        fprintf(k->out, "\nmetadata (%s):\n", title);
    }
}

static void put_meta(sink *k, const char *key, size_t len, const char *type, mval v)
{
    if (k->j) {
        qk_json_obj(k->j);
        qk_json_key(k->j, "key"), qk_json_strn(k->j, key, len);
        qk_json_key(k->j, "type"), qk_json_str(k->j, type);
        qk_json_key(k->j, "value");
        put_value(k, v, k->full);
        qk_json_end_obj(k->j);
    } else {
        fprintf(k->out, "  %-40.*s %-*s ", (int)len, key, k->type_width, type);
        put_value(k, v, k->full);
        fputc('\n', k->out);
    }
}

static void put_meta_end(sink *k)
{
    if (k->j)
        qk_json_end_arr(k->j);
}

/* ---- the walks ------------------------------------------------------------------------- */

static bool want(const char *glob, const char *key, size_t len)
{
    if (!glob)
        return true;
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < 511 ? len : 511), key);
    return fnmatch(glob, buf, 0) == 0;
}

static void gguf_walk(sink *k, const qk_tensorset *s, const char *glob)
{
    const qk_gguf *g = s->gguf;
    put_head(k, &(head){.path = s->path, .format = "gguf", .files = g->n_shards, .gguf = true,
                        .version = g->version, .alignment = g->alignment, .data_offset = g->data_offset,
                        .size = s->file_bytes});
    qk_str arch = {0};
    bool has_arch = qk_gguf_get_str(g, "general.architecture", &arch);
    put_arch(k, has_arch ? arch.ptr : NULL, arch.len);
    for (uint64_t i = 0; has_arch && i < g->n_kv; i++) {
        const qk_gguf_kv *kv = &g->kv[i];
        qk_str key = kv->key;
        if (kv->v.type != QK_GGUF_ARRAY && arch.len && key.len > arch.len + 1 &&
            memcmp(key.ptr, arch.ptr, arch.len) == 0 && key.ptr[arch.len] == '.')
            put_hparam(k, key.ptr + arch.len + 1, key.len - arch.len - 1, (mval){.g = &kv->v});
    }
    uint64_t ft;
    bool has_ft = qk_gguf_get_uint(g, "general.file_type", &ft);
    put_file_type(k, has_ft, ft, has_ft ? qk_ftype_name((long)ft) : NULL);
    char title[64];
    snprintf(title, sizeof title, "%" PRIu64 " keys%s", g->n_kv, glob ? ", matching shown" : "");
    k->type_width = 14;
    put_meta_begin(k, title);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const qk_gguf_kv *kv = &g->kv[i];
        if (!want(glob, kv->key.ptr, kv->key.len))
            continue;
        char ts[48];
        if (kv->v.type == QK_GGUF_ARRAY)
            snprintf(ts, sizeof ts, "%s[%" PRIu64 "]", qk_gguf_vtype_name(kv->v.arr.elem), kv->v.arr.n);
        else
            snprintf(ts, sizeof ts, "%s", qk_gguf_vtype_name(kv->v.type));
        put_meta(k, kv->key.ptr, kv->key.len, ts, (mval){.g = &kv->v});
    }
    put_meta_end(k);
}

static void hf_walk(sink *k, const qk_tensorset *s, const char *glob)
{
    const qk_hfdir *h = s->st;
    put_head(k, &(head){.path = s->path, .format = "safetensors", .files = h->n_files,
                        .indexed = h->index_path != NULL, .size = s->file_bytes});
    const char *arch = NULL;
    if (h->config) {
        const qk_jsonv *a = qk_jsonv_at(qk_jsonv_get(h->config, "architectures"), 0);
        arch = qk_jsonv_str(a) ? qk_jsonv_str(a) : qk_jsonv_get_str(h->config, "model_type", NULL);
    }
    put_arch(k, arch, arch ? strlen(arch) : 0);
    for (size_t i = 0; i < qk_jsonv_len(h->config); i++) {
        const qk_jsonm *m = qk_jsonv_member(h->config, i);
        if (m->val->type == QK_JNUM || m->val->type == QK_JBOOL)
            put_hparam(k, m->key, strlen(m->key), (mval){.j = m->val});
    }
    put_file_type(k, false, 0, qk_jsonv_get_str(h->config, "torch_dtype", NULL));
    const qk_jsonv *qc = qk_jsonv_get(h->config, "quantization_config");
    put_quant_config(k, qc ? qc : h->hf_quant_config);
    k->type_width = 8;
    put_meta_begin(k, "config.json, then each file's __metadata__");
    for (size_t i = 0; i < qk_jsonv_len(h->config); i++) {
        const qk_jsonm *m = qk_jsonv_member(h->config, i);
        char key[300];
        int n = snprintf(key, sizeof key, "config.%s", m->key);
        if (want(glob, key, (size_t)n))
            put_meta(k, key, (size_t)n, qk_jtype_name(m->val->type), (mval){.j = m->val});
    }
    for (int f = 0; f < h->n_files; f++) {
        for (size_t i = 0; i < h->files[f]->n_meta; i++) {
            const qk_st_meta *m = &h->files[f]->meta[i];
            char key[300];
            int n = snprintf(key, sizeof key, "__metadata__.%s", m->key);
            if (want(glob, key, (size_t)n))
                put_meta(k, key, (size_t)n, "string", (mval){.s = m->value});
        }
    }
    put_meta_end(k);
}

static void walk(sink *k, const qk_tensorset *s, const char *glob)
{
    if (s->kind == QK_SET_GGUF)
        gguf_walk(k, s, glob);
    else
        hf_walk(k, s, glob);
}

void qk_meta_text(FILE *out, const qk_tensorset *s, const char *glob, bool full)
{
    walk(&(sink){.out = out, .full = full}, s, glob);
}

void qk_meta_json(qk_json *j, const qk_tensorset *s, const char *glob, bool full)
{
    walk(&(sink){.j = j, .full = full}, s, glob);
}
