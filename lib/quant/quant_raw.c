/* quant_raw.c - raw encode/decode through the format table and the schemes. */
#include "lib/quant/quant_raw.h"

#include <stdlib.h>

#include "lib/core/ckd.h"
#include "lib/core/json.h"
#include "lib/core/mapfile.h"
#include "lib/core/outfile.h"
#include "kernels/quantize.h"
#include "kernels/types.h"

void qk_raw_list(FILE *f, bool json)
{
    qk_json j;
    qk_json_init(&j, f, true);
    if (json) {
        qk_json_obj(&j);
        qk_json_key(&j, "types");
        qk_json_arr(&j);
    } else {
        fprintf(f, "%-9s %4s %6s %6s %8s %10s %-8s %s\n", "name", "id", "block", "bytes", "bpw",
               "importance", "dot_with", "kernels");
    }
    for (int id = qk_type_next(-1); id >= 0; id = qk_type_next(id)) {
        const qk_type_traits *t = qk_type_get(id);
        const qk_type_traits *vd = t->vec_dot_type >= 0 ? qk_type_get(t->vec_dot_type) : NULL;
        if (!json) {
            fprintf(f, "%-9s %4d %6d %6zu %8.4f %10s %-8s %s%s%s%s%s\n", t->name, t->id, t->blck,
                   t->type_size, qk_type_bpw(id), t->needs_imatrix ? "required" : "-",
                   vd ? vd->name : "-", t->to_float ? "decode " : "", t->quantize ? "encode " : "",
                   t->vec_dot ? "dot " : "", t->from_float ? "activation" : "",
                   t->wq_rows ? "parts: decode dot" : t->wq_act ? "parts: activation" : "");
            continue;
        }
        qk_json_obj(&j);
        qk_json_key(&j, "name"), qk_json_str(&j, t->name);
        qk_json_key(&j, "id"), qk_json_int(&j, t->id);
        qk_json_key(&j, "block"), qk_json_int(&j, t->blck);
        qk_json_key(&j, "bytes"), qk_json_uint(&j, t->type_size);
        qk_json_key(&j, "bpw"), qk_json_f64(&j, qk_type_bpw(id));
        qk_json_key(&j, "gguf"), qk_json_bool(&j, t->in_gguf);
        qk_json_key(&j, "needs_importance"), qk_json_bool(&j, t->needs_imatrix);
        qk_json_key(&j, "activation_type"), qk_json_str(&j, vd ? vd->name : NULL);
        qk_json_key(&j, "decode"), qk_json_bool(&j, t->to_float != NULL);
        qk_json_key(&j, "encode"), qk_json_bool(&j, t->quantize != NULL);
        qk_json_key(&j, "dot"), qk_json_bool(&j, t->vec_dot != NULL);
        qk_json_key(&j, "parts"), qk_json_bool(&j, t->wq_rows != NULL || t->wq_act != NULL);
        qk_json_end_obj(&j);
    }
    /* the datacenter schemes (kernels/scaled.h), bits per weight at 4096 columns */
    if (json) {
        qk_json_end_arr(&j);
        qk_json_key(&j, "schemes");
        qk_json_arr(&j);
    } else {
        fprintf(f, "\nschemes (raw encode/decode; mxfp4 and nvfp4 with --granularity/--global-scale):\n");
    }
    for (const qk_scheme *sc = qk_scheme_next(NULL); sc; sc = qk_scheme_next(sc)) {
        double b = (double)qk_scheme_encoded_size(sc, 1, 4096, NULL) * 8.0 / 4096;
        if (!json) {
            fprintf(f, "%-11s %8.4f  %s\n", sc->name, b, sc->summary);
            continue;
        }
        qk_json_obj(&j);
        qk_json_key(&j, "name"), qk_json_str(&j, sc->name);
        qk_json_key(&j, "bpw"), qk_json_f64(&j, b);
        qk_json_key(&j, "summary"), qk_json_str(&j, sc->summary);
        qk_json_end_obj(&j);
    }
    if (json) {
        qk_json_end_arr(&j);
        qk_json_end_obj(&j);
        qk_json_done(&j);
    }
}

/* Map `path` and check it holds exactly `want` bytes. */
static int map_exact(qk_map *m, const char *path, uint64_t want, const char *what, qk_err *err)
{
    int rc = qk_map_open(m, path, err);
    if (rc)
        return rc;
    if (m->size != want) {
        qk_map_close(m);
        return qk_err_at(err, path, what, 0, "size is %zu bytes, expected %llu", m->size,
                         (unsigned long long)want);
    }
    return 0;
}

/* A type of the format table. */
static int raw_type(const qk_type_traits *t, const qk_raw_req *a, const char *in, const char *out,
                    qk_err *err)
{
    const bool encode = a->encode;
    size_t rs = qk_row_size(t->id, a->cols);
    if (rs == 0)
        return qk_errf(err, QK_EINPUT, "--shape: %lld columns is not a multiple of %s's block size %d",
                       (long long)a->cols, t->name, t->blck);
    if (encode ? !t->quantize : !t->to_float)
        return qk_errf(err, QK_EINPUT, "%s: no %s for this type", t->name,
                       encode ? "encoder" : "decoder");
    if (encode && t->needs_imatrix && !a->imatrix)
        return qk_errf(err, QK_EINPUT, "%s requires an importance matrix (--imatrix FILE.f32)",
                       t->name);
    if (qk_same_file(in, out))
        return qk_errf(err, QK_EINPUT, "%s: output is the same file as the input", out);
    uint64_t nf, nq;
    if (qk_ckd_mul(&nf, (uint64_t)a->rows, (uint64_t)a->cols) || qk_ckd_mul(&nf, nf, 4) ||
        qk_ckd_mul(&nq, (uint64_t)a->rows, rs))
        return qk_errf(err, QK_EINPUT, "--shape: too large");

    qk_map src, im = {0};
    im.fd = -1;
    int rc = map_exact(&src, in, encode ? nf : nq, encode ? "float32 input" : "encoded input", err);
    if (rc)
        return rc;
    if (encode && a->imatrix &&
        (rc = map_exact(&im, a->imatrix, (uint64_t)a->cols * 4, "importance matrix", err))) {
        qk_map_close(&src);
        return rc;
    }
    size_t n_out = encode ? (size_t)nq : (size_t)nf;
    void *buf = malloc(n_out ? n_out : 1);
    if (!buf) {
        rc = qk_errf(err, QK_EIO, "out of memory (%zu bytes)", n_out);
        goto done;
    }
    if (encode) {
        /* the mapping is only 4-byte aligned by page alignment: fine for float */
        rc = qk_quantize_rows(t->id, (const float *)src.data, buf, a->rows, a->cols,
                              im.data ? (const float *)im.data : NULL, a->threads, err);
    } else {
        rc = qk_dequantize_rows(t->id, src.data, buf, a->rows, a->cols, a->threads, err);
    }
    if (rc)
        goto done;
    qk_out o;
    if ((rc = qk_out_open(&o, out, err)))
        goto done;
    if ((rc = qk_out_write(&o, buf, n_out, err)) || (rc = qk_out_commit(&o, err)))
        qk_out_abort(&o);
done:
    free(buf);
    qk_map_close(&src);
    if (im.data || im.fd >= 0)
        qk_map_close(&im);
    return rc;
}

/* A datacenter scheme (kernels/scaled.h): codes, scales, zero points and a
 * global scale in the layout qk_scheme_layout_of() describes. */
static int raw_scheme(const qk_scheme *s, const qk_raw_req *a, const char *in, const char *out,
                      qk_err *err)
{
    qk_scheme_layout l;
    int rc = qk_scheme_layout_of(s, a->rows, a->cols, &a->so, &l, err);
    if (rc)
        return rc;
    if (qk_same_file(in, out))
        return qk_errf(err, QK_EINPUT, "%s: output is the same file as the input", out);
    uint64_t nf;
    if (qk_ckd_mul(&nf, (uint64_t)a->rows, (uint64_t)a->cols) || qk_ckd_mul(&nf, nf, 4))
        return qk_errf(err, QK_EINPUT, "--shape: too large");
    qk_map src;
    if ((rc = map_exact(&src, in, a->encode ? nf : l.total,
                        a->encode ? "float32 input" : "encoded input", err)))
        return rc;
    size_t n_out = a->encode ? (size_t)l.total : (size_t)nf;
    void *buf = malloc(n_out ? n_out : 1);
    if (!buf)
        rc = qk_errf(err, QK_EIO, "out of memory (%zu bytes)", n_out);
    else if (a->encode)
        rc = qk_scheme_encode(s, (const float *)src.data, a->rows, a->cols, &a->so, buf, err);
    else
        rc = qk_scheme_decode(s, src.data, a->rows, a->cols, &a->so, buf, err);
    if (!rc) {
        qk_out o;
        if (!(rc = qk_out_open(&o, out, err)) &&
            ((rc = qk_out_write(&o, buf, n_out, err)) || (rc = qk_out_commit(&o, err))))
            qk_out_abort(&o);
    }
    free(buf);
    qk_map_close(&src);
    return rc;
}

int qk_raw_convert(const qk_raw_req *r, const char *in, const char *out, qk_err *err)
{
    const qk_type_traits *t = r->scheme ? NULL : qk_type_by_name(r->type);
    if (t)
        return raw_type(t, r, in, out, err);
    const qk_scheme *s = qk_scheme_by_name(r->type);
    if (!s)
        return qk_errf(err, QK_EINPUT, "unknown type '%s' (see --list-types)", r->type);
    return raw_scheme(s, r, in, out, err);
}
