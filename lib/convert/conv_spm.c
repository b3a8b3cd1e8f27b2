/* conv_spm.c - the pieces of a SentencePiece tokenizer.model, as
 * SentencePieceProcessor gives them to the converter's
 * _create_vocab_sentencepiece (IdToPiece, GetScore, IsUnknown / IsControl /
 * IsUnused / IsByte).  The file is sentencepiece's ModelProto
 * (sentencepiece_model.proto, Apache-2.0) in protobuf's wire format:
 * field 1 repeated SentencePiece { 1: piece (string), 2: score (float),
 * 3: type (enum, NORMAL when absent) }; every other field is skipped. */
#include <stdlib.h>
#include <string.h>

#include "lib/convert/conv_vocab.h"
#include "lib/core/files.h"

/* sentencepiece's SentencePiece.Type */
enum { SP_NORMAL = 1, SP_UNKNOWN = 2, SP_CONTROL = 3, SP_USER_DEFINED = 4, SP_UNUSED = 5, SP_BYTE = 6 };

static int varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
    uint64_t r = 0;
    for (int s = 0; s < 64; s += 7) {
        if (*i >= n)
            return -1;
        uint8_t b = p[(*i)++];
        r |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* Read a field's key, then a varint's value into *v (wire type 0) or the
 * extent of its payload into *len (the payload starts at *i). */
static int field(const uint8_t *p, size_t n, size_t *i, uint32_t *num, int *wt, size_t *len, uint64_t *v)
{
    uint64_t key;
    if (varint(p, n, i, &key))
        return -1;
    *num = (uint32_t)(key >> 3);
    *wt = (int)(key & 7);
    *len = 0;
    *v = 0;
    switch (*wt) {
    case 0: return varint(p, n, i, v);
    case 1: *len = 8; break;
    case 5: *len = 4; break;
    case 2:
        if (varint(p, n, i, v))
            return -1;
        *len = (size_t)*v;
        break;
    default: return -1;
    }
    return *len <= n - *i ? 0 : -1;
}

static int bad(qk_err *err, const char *path, size_t off)
{
    return qk_err_at(err, path, "SentencePiece ModelProto", off, "malformed protobuf");
}

int qk_conv_spm_read(const char *path, qk_conv_spm *s, qk_err *err)
{
    memset(s, 0, sizeof *s);
    char *buf = NULL;
    size_t n = 0;
    int rc = qk_read_file(path, false, &buf, &n, err);
    if (rc)
        return rc;
    const uint8_t *p = (const uint8_t *)buf;
    size_t cap = 0;
    for (size_t i = 0; i < n && !rc;) {
        size_t at = i, len;
        uint32_t num;
        int wt;
        uint64_t v;
        if (field(p, n, &i, &num, &wt, &len, &v)) {
            rc = bad(err, path, at);
            break;
        }
        size_t end = i + len;
        if (num != 1 || wt != 2) {
            i = end;
            continue;
        }
        if (s->n == cap) {
            cap = cap ? 2 * cap : 1024;
            char **pc = realloc(s->pieces, cap * sizeof *pc);
            float *sc = pc ? realloc(s->scores, cap * sizeof *sc) : NULL;
            int32_t *ty = sc ? realloc(s->types, cap * sizeof *ty) : NULL;
            if (pc)
                s->pieces = pc;
            if (sc)
                s->scores = sc;
            if (ty)
                s->types = ty;
            if (!ty) {
                rc = qk_errf(err, QK_EIO, "qk-convert: out of memory");
                break;
            }
        }
        char *piece = NULL;
        float score = 0;
        int32_t type = SP_NORMAL;
        while (i < end && !rc) {
            size_t fat = i, flen;
            uint32_t fnum;
            int fwt;
            if (field(p, end, &i, &fnum, &fwt, &flen, &v)) {
                rc = bad(err, path, fat);
                break;
            }
            if (fnum == 1 && fwt == 2) {
                free(piece);
                piece = strndup((const char *)p + i, flen);
                if (!piece)
                    rc = qk_errf(err, QK_EIO, "qk-convert: out of memory");
            } else if (fnum == 2 && fwt == 5) {
                uint32_t u = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16 | (uint32_t)p[i + 3] << 24;
                memcpy(&score, &u, sizeof score);
            } else if (fnum == 3 && fwt == 0) {
                type = (int32_t)v;
            }
            i += flen;
        }
        if (!rc && !piece)
            rc = qk_err_at(err, path, "SentencePiece ModelProto", at, "piece %zu has no text", s->n);
        if (rc) {
            free(piece);
            break;
        }
        s->pieces[s->n] = piece;
        s->scores[s->n] = score;
        /* _create_vocab_sentencepiece's token types: user-defined pieces count as normal */
        s->types[s->n] = type == SP_UNKNOWN || type == SP_CONTROL || type == SP_UNUSED || type == SP_BYTE ? type : SP_NORMAL;
        s->n++;
    }
    if (!rc && !s->n)
        rc = qk_err_at(err, path, "SentencePiece ModelProto", 0, "no pieces");
    free(buf);
    if (rc)
        qk_conv_spm_free(s);
    return rc;
}

void qk_conv_spm_free(qk_conv_spm *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->pieces[i]);
    free(s->pieces);
    free(s->scores);
    free(s->types);
    memset(s, 0, sizeof *s);
}
