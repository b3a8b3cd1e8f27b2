/* kldsplit.c - the error split and the noise floor of qk-kld (kldsplit.h). */
#include "lib/eval/kldsplit.h"

#include <math.h>
#include <string.h>

#include "kernels/actvar.h"
#include "lib/engine/matmul.h"

void qk_kld_extra_init(qk_kld_extra *x, bool split, bool floor, int act_type)
{
    memset(x, 0, sizeof *x);
    x->split = split, x->floor = floor;
    qk_kld_acc_init(&x->weights, QK_KLD_MODE_KLD, false);
    qk_kld_acc_init(&x->share, QK_KLD_MODE_KLD, false);
    qk_kld_acc_init(&x->noise, QK_KLD_MODE_KLD, false);
    if (split)
        x->v[x->n_variants++] = (qk_ppl_variant){.act_type = QK_ACT_F32, .vs_base = &x->weights,
                                                 .model_vs = &x->share};
    if (floor && act_type != QK_ACT_F32) {
        static const int var[2] = {QK_ACTV_UP, QK_ACTV_DOWN};
        for (int i = 0; i < 2; i++)
            x->v[x->n_variants++] = (qk_ppl_variant){.act_type = act_type, .act_variant = var[i],
                                                     .vs_model = &x->noise};
        x->floor_passes = 2;
    }
}

void qk_kld_extra_free(qk_kld_extra *x)
{
    qk_kld_acc_free(&x->weights);
    qk_kld_acc_free(&x->share);
    qk_kld_acc_free(&x->noise);
}

qk_kld_figure qk_kld_figure_of(qk_kld_acc *a)
{
    qk_kld_figure f = {.count = a->count};
    if (a->count == 0)
        return f;
    qk_kld_summary s;
    qk_kld_summarize(a, &s);
    const size_t n = a->count;
    const double p = 0.99, d = sqrt(p * (1 - p) / (double)n);
    const float lo = qk_kld_percentile(a->kld_values, n, (float)fmax(0.0, p - d));
    const float hi = qk_kld_percentile(a->kld_values, n, (float)fmin(1.0, p + d));
    f.mean = s.kld;
    f.p99 = (qk_kld_ve){s.kld_pct[2], 0.5 * ((double)hi - (double)lo)};
    f.same_top = s.same_top;
    return f;
}

void qk_kld_extra_finish(qk_kld_extra *x, qk_kld_acc *total)
{
    x->total = qk_kld_figure_of(total);
    x->wts = qk_kld_figure_of(&x->weights);
    x->act = qk_kld_figure_of(&x->share);
    x->flr = qk_kld_figure_of(&x->noise);
    if (x->floor && !x->floor_passes) /* f32 activations: nothing is rounded, the floor is zero */
        x->flr.same_top.v = 100.0;
}

bool qk_kld_above_floor(const qk_kld_figure *f, const qk_kld_figure *floor)
{
    const double e = sqrt(f->mean.e * f->mean.e + floor->mean.e * floor->mean.e);
    return f->mean.v - floor->mean.v > 2.0 * e;
}

/* ---- report ------------------------------------------------------------------- */

static void print_row(FILE *f, const char *name, const qk_kld_figure *g, const char *above)
{
    static const char *const pm = "\xc2\xb1";
    fprintf(f, "%-31s: %10.6f %s %9.6f  %10.6f %s %9.6f  %7.3f %s %5.3f %%%s%s\n", name, g->mean.v, pm,
            g->mean.e, g->p99.v, pm, g->p99.e, g->same_top.v, pm, g->same_top.e, *above ? "  " : "", above);
}

void qk_kld_extra_print(FILE *f, const qk_kld_extra *x)
{
    if (!x->split && !x->floor)
        return;
    const qk_kld_figure *fl = &x->flr;
    const char *yes = "yes", *no = "no", *na = x->floor ? "-" : "";
#define ABOVE(g) (x->floor ? (qk_kld_above_floor(g, fl) ? yes : no) : na)
    fprintf(f, "\n====== %s ======\n", x->split && x->floor ? "Error split and noise floor"
                                       : x->split            ? "Error split"
                                                             : "Noise floor");
    fprintf(f, "%-31s  %10s%12s  %10s%12s  %8s%9s%s\n", "", "Mean KLD", "", "99.0% KLD", "",
            "Same top", "", x->floor ? "  above floor" : "");
    print_row(f, x->split ? "total (default arithmetic)" : "this run", &x->total, ABOVE(&x->total));
    if (x->split) {
        print_row(f, "weights only (f32 activations)", &x->wts, na);
        print_row(f, "activation quantization", &x->act, ABOVE(&x->act));
    }
    if (x->floor) {
        char name[64];
        if (x->floor_passes)
            snprintf(name, sizeof name, "noise floor (%d passes)", x->floor_passes);
        else
            snprintf(name, sizeof name, "noise floor (f32 act.: none)");
        print_row(f, name, fl, "");
    }
#undef ABOVE
}

void qk_kld_json_ve(qk_json *j, const char *key, qk_kld_ve v)
{
    qk_json_key(j, key);
    qk_json_obj(j);
    qk_json_key(j, "value"), qk_json_f64(j, v.v);
    qk_json_key(j, "error"), qk_json_f64(j, v.e);
    qk_json_end_obj(j);
}

/* {"mean": VE, "p99": VE, "same_top_pct": VE, "tokens": n, "above_floor": bool|null} */
static void json_fig(qk_json *j, const char *key, const qk_kld_figure *g, const qk_kld_figure *floor)
{
    qk_json_key(j, key);
    qk_json_obj(j);
    qk_kld_json_ve(j, "mean", g->mean);
    qk_kld_json_ve(j, "p99", g->p99);
    qk_kld_json_ve(j, "same_top_pct", g->same_top);
    qk_json_key(j, "tokens"), qk_json_uint(j, g->count);
    qk_json_key(j, "above_floor");
    if (floor)
        qk_json_bool(j, qk_kld_above_floor(g, floor));
    else
        qk_json_null(j);
    qk_json_end_obj(j);
}

void qk_kld_extra_json(qk_json *j, const qk_kld_extra *x)
{
    const qk_kld_figure *fl = x->floor ? &x->flr : NULL;
    if (x->split) {
        qk_json_key(j, "split");
        qk_json_obj(j);
        json_fig(j, "total", &x->total, fl);
        json_fig(j, "weights", &x->wts, NULL);
        json_fig(j, "activations", &x->act, fl);
        qk_json_end_obj(j);
    }
    if (x->floor) {
        qk_json_key(j, "noise_floor");
        qk_json_obj(j);
        qk_json_key(j, "passes"), qk_json_int(j, x->floor_passes);
        qk_json_key(j, "variants");
        qk_json_arr(j);
        if (x->floor_passes) {
            qk_json_str(j, "act-scale+1ulp");
            qk_json_str(j, "act-scale-1ulp");
        }
        qk_json_end_arr(j);
        qk_kld_json_ve(j, "mean", x->flr.mean);
        qk_kld_json_ve(j, "p99", x->flr.p99);
        qk_kld_json_ve(j, "same_top_pct", x->flr.same_top);
        qk_json_key(j, "tokens"), qk_json_uint(j, x->flr.count);
        qk_json_key(j, "run_above_floor"), qk_json_bool(j, qk_kld_above_floor(&x->total, &x->flr));
        qk_json_end_obj(j);
    }
}
