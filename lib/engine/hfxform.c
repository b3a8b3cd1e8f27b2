/* hfxform.c - transform_config's online transforms on the model's weights
 * (see hfxform.h).  compressed-tensors applies an "input" transform as a
 * forward pre-hook on the module (transform/factory/base.py): the module's
 * input times the block-diagonal Hadamard, divided by sqrt(block), in the
 * scheme's precision; the forward pass does the same (forward.c). */
#include "lib/engine/hfxform.h"

#include <stdio.h>
#include <string.h>

#include "kernels/hadamard.h"
#include "kernels/types.h"

static const char *const suffixes[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                       "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                       "mlp.down_proj"};
#define N_SUF (int)(sizeof suffixes / sizeof suffixes[0])

static qk_weight *weight_of(qk_layer *L, int s)
{
    qk_weight *const w[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return w[s];
}

/* The stored matrix, when save_pretrained kept one, must be Sylvester's. */
static int check_stored(const qk_hfdir *hf, const char *module, const qk_tgroup *g, int n, qk_err *err)
{
    char name[300];
    snprintf(name, sizeof name, "%s.%s_input.weight", module, g->name);
    const qk_hf_tensor *t = qk_hf_find(hf, name);
    if (!t)
        return QK_OK;
    const uint64_t off = t->st ? t->st->info_offset : 0;
    if (t->n_dims != 2 || t->shape[0] != n || t->shape[1] != n || (t->type != QK_F64 && t->type != QK_F32))
        return qk_err_at(err, hf->dir, name, off, "the transform matrix must be F64 or F32 [%d, %d] (%s)", n, n,
                         t->dtype);
    for (int r = 0; r < n; r++)
        for (int c = 0; c < n; c++) {
            double v;
            if (t->type == QK_F64) {
                memcpy(&v, t->data + ((size_t)r * n + c) * 8, 8);
            } else {
                float f;
                memcpy(&f, t->data + ((size_t)r * n + c) * 4, 4);
                v = f;
            }
            if (v != (__builtin_popcount((unsigned)(r & c)) & 1 ? -1.0 : 1.0))
                return qk_err_at(err, hf->dir, name, off,
                                 "is not Sylvester's Hadamard matrix (element [%d, %d] = %g): "
                                 "type \"hadamard\" says it is", r, c, v);
        }
    return QK_OK;
}

/* A tensor of hf whose module matches a but is none of the layers' linears. */
static const char *stray_target(const qk_hfdir *hf, const qk_tapply *a, int n_layer)
{
    for (size_t i = 0; i < hf->n_tensors; i++) {
        char mod[300];
        const char *nm = hf->tensors[i].name, *dot = strrchr(nm, '.');
        if (!dot || (size_t)(dot - nm) >= sizeof mod)
            continue;
        memcpy(mod, nm, (size_t)(dot - nm));
        mod[dot - nm] = 0;
        if (!qk_tapply_matches(a, mod))
            continue;
        int il, end = 0;
        bool ours = false;
        if (sscanf(mod, "model.layers.%d.%n", &il, &end) == 1 && end && il >= 0 && il < n_layer)
            for (int s = 0; s < N_SUF; s++)
                ours |= strcmp(mod + end, suffixes[s]) == 0;
        if (!ours)
            return nm;
    }
    return NULL;
}

int qk_hf_apply_transforms(const qk_tcfg *t, const qk_hfdir *hf, const char *path, qk_model *m, qk_err *err)
{
    for (int gi = 0; t && gi < t->n; gi++) {
        const qk_tgroup *g = &t->g[gi];
        for (int ai = 0; ai < g->n_apply; ai++) {
            const qk_tapply *a = &g->apply[ai];
            char field[160];
            snprintf(field, sizeof field, "transform_config.config_groups.%s", g->name);
            if (!qk_tloc_online(a->loc))
                continue; /* fused into the stored weights */
            if (a->loc != QK_TL_INPUT)
                return qk_err_at(err, path, field, a->off,
                                 "location %s is not applied by qk (online transforms qk applies: input, on the "
                                 "decoder layers' linear layers)", qk_tloc_name(a->loc));
            const char *stray = stray_target(hf, a, m->hp.n_layer);
            if (stray)
                return qk_err_at(err, path, field, a->off,
                                 "an input transform on %s is not applied by qk (only on the decoder layers' "
                                 "q/k/v/o_proj, gate/up/down_proj)", stray);
            for (int il = 0; il < m->hp.n_layer; il++)
                for (int s = 0; s < N_SUF; s++) {
                    char mod[200];
                    snprintf(mod, sizeof mod, "model.layers.%d.%s", il, suffixes[s]);
                    qk_weight *w = weight_of(&m->layers[il], s);
                    if (!qk_tapply_matches(a, mod) || !w->rows)
                        continue;
                    const int64_t n = g->head_dim ? g->head_dim : w->cols;
                    if (!qk_is_pow2(n) || w->cols % n || n > (1 << 20))
                        return qk_err_at(err, path, field, a->off,
                                         "%s: a Hadamard of size %lld on %lld input features (a power of two "
                                         "dividing them)", mod, (long long)n, (long long)w->cols);
                    if (w->in_had)
                        return qk_err_at(err, path, field, a->off,
                                         "%s: a second online transform on one input is not applied by qk", mod);
                    if (check_stored(hf, mod, g, (int)n, err))
                        return err->code;
                    w->in_had = (int)n;
                    w->in_had_f64 = g->f64;
                }
        }
    }
    for (int il = 0; t && il < m->hp.n_layer; il++) {
        const qk_layer *L = &m->layers[il];
        if ((L->wk.in_had != L->wq.in_had || L->wv.in_had != L->wq.in_had ||
             L->wk.in_had_f64 != L->wq.in_had_f64 || L->wv.in_had_f64 != L->wq.in_had_f64) ||
            (L->w_up.in_had != L->w_gate.in_had || L->w_up.in_had_f64 != L->w_gate.in_had_f64))
            return qk_err_at(err, path, "transform_config", 0,
                             "layer %d: q/k/v_proj (gate/up_proj), which read one input, have different input "
                             "transforms: not applied by qk", il);
    }
    return QK_OK;
}
