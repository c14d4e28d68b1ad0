/* reduce.c - sums, means, maxima and minima over dims of a sample:
 *   reduce{op = "mean" | "sum" | "max" | "min", dims = {...}, keepdim = false}
 * (dims 0-based after the batch, so >= 1, or negative from the end).  Sums
 * and means are linear: the JVP is the op on the whole stack, backward
 * spreads gy (divided by the count for a mean) over the reduced dims.  Sums
 * in double, in a fixed order per sample.  Max and min are piecewise
 * linear: each output records where its extreme is (the first of equal
 * ones; a NaN wins, as in PyTorch), a tangent reads its primal's place,
 * backward puts gy there.  Under run->directional a tangent takes the
 * largest (min: smallest) tangent among the elements tied with the
 * extreme (kernels/kink.h). */
#ifdef SR_REAL

/* y[r][o] = scale · Σ x[r][e] over the elements e of output o; ostride[d]
 * is the output stride of input dim d (0 for a reduced dim). */
static void SR_FN(reduce_fwd)(real *y, const real *x, int64_t rows, int nd, const int64_t *ishape,
                              const int64_t *ostride, int64_t xrs, int64_t yrs, double scale, double *acc)
{
    #pragma omp parallel for schedule(static) if (rows * xrs > REDUCE_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        double *a = acc + r * yrs;
        for (int64_t o = 0; o < yrs; o++)
            a[o] = 0;
        const real *xr = x + r * xrs;
        int64_t last = ishape[nd - 1], ls = ostride[nd - 1];
        for (int64_t e0 = 0; e0 < xrs; e0 += last) {
            int64_t o = reduce_out_offset(e0 / last, nd, ishape, ostride);
            for (int64_t j = 0; j < last; j++)
                a[o + j * ls] += xr[e0 + j];
        }
        real *yr = y + r * yrs;
        for (int64_t o = 0; o < yrs; o++)
            yr[o] = (real)(a[o] * scale);
    }
}

/* gx[r][e] = scale · gy[r][o(e)]. */
static void SR_FN(reduce_bwd)(real *gx, const real *gy, int64_t rows, int nd, const int64_t *ishape,
                              const int64_t *ostride, int64_t xrs, int64_t yrs, double scale)
{
    #pragma omp parallel for schedule(static) if (rows * xrs > REDUCE_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const real *gr = gy + r * yrs;
        real *xr = gx + r * xrs;
        int64_t last = ishape[nd - 1], ls = ostride[nd - 1];
        for (int64_t e0 = 0; e0 < xrs; e0 += last) {
            int64_t o = reduce_out_offset(e0 / last, nd, ishape, ostride);
            for (int64_t j = 0; j < last; j++)
                xr[e0 + j] = (real)(gr[o + j * ls] * scale);
        }
    }
}

/* y[r][o] = the max (sign 1) or min (-1) over output o's elements, at
 * flat element idx[r][o] of the sample. */
static void SR_FN(reduce_ext)(real *y, int64_t *idx, const real *x, int64_t rows, int nd, const int64_t *ishape,
                              const int64_t *ostride, int64_t xrs, int64_t yrs, int sign)
{
    #pragma omp parallel for schedule(static) if (rows * xrs > REDUCE_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        real *yr = y + r * yrs;
        int64_t *ir = idx + r * yrs;
        for (int64_t o = 0; o < yrs; o++)
            ir[o] = -1;
        const real *xr = x + r * xrs;
        int64_t last = ishape[nd - 1], ls = ostride[nd - 1];
        for (int64_t e0 = 0; e0 < xrs; e0 += last) {
            int64_t o = reduce_out_offset(e0 / last, nd, ishape, ostride);
            for (int64_t j = 0; j < last; j++) {
                int64_t oo = o + j * ls;
                real v = xr[e0 + j];
                if (ir[oo] < 0 || (yr[oo] == yr[oo] && (v != v || (sign > 0 ? v > yr[oo] : v < yr[oo])))) {
                    yr[oo] = v;
                    ir[oo] = e0 + j;
                }
            }
        }
    }
}

/* out[t][o] = v[t][idx[primal of t][o]] over tangent rows t (backward:
 * scatter, gx[r][idx[r][o]] += gy[r][o]). */
static void SR_FN(reduce_gather)(real *out, const real *v, const int64_t *idx, int64_t rows, int64_t k, int64_t xrs,
                                 int64_t yrs)
{
    for (int64_t t = 0; t < rows; t++)
        for (int64_t o = 0; o < yrs; o++)
            out[t * yrs + o] = v[t * xrs + idx[(t / k) * yrs + o]];
}

/* reduce_gather under the directional rule (kernels/kink.h): the largest
 * (sign 1; min: the smallest) tangent among the elements tied with the
 * primal's extreme y (SR_TIED at the group's largest magnitude, sc: n·yrs
 * scratch).  With kinks, each primal row's outputs with a tie are counted
 * (cnt: yrs scratch). */
static void SR_FN(reduce_gather_ties)(real *out, const real *v, const int64_t *idx, const real *x, const real *y,
                                      int64_t n, int64_t k, int nd, const int64_t *ishape, const int64_t *ostride,
                                      int64_t xrs, int64_t yrs, int sign, sr_kinks *kinks, int64_t *cnt, real *sc)
{
    int64_t last = ishape[nd - 1], ls = ostride[nd - 1];
    for (int64_t i = 0; i < n; i++) {
        const real *xr = x + i * xrs;
        real *sr = sc + i * yrs;
        for (int64_t o = 0; o < yrs; o++)
            sr[o] = 0;
        for (int64_t e0 = 0; e0 < xrs; e0 += last) {
            int64_t o = reduce_out_offset(e0 / last, nd, ishape, ostride);
            for (int64_t j = 0; j < last; j++)
                sr[o + j * ls] = SR_FABS(xr[e0 + j]) > sr[o + j * ls] ? SR_FABS(xr[e0 + j]) : sr[o + j * ls];
        }
    }
    for (int64_t i = 0; kinks && i < n; i++) {
        const real *xr = x + i * xrs, *yr = y + i * yrs, *sr = sc + i * yrs;
        int64_t exact = 0, near = 0;
        for (int64_t o = 0; o < yrs; o++)
            cnt[o] = 0;
        for (int64_t e0 = 0; e0 < xrs; e0 += last) {
            int64_t o = reduce_out_offset(e0 / last, nd, ishape, ostride);
            for (int64_t j = 0; j < last; j++) {
                int64_t oo = o + j * ls;
                if (e0 + j != idx[i * yrs + oo] && SR_TIED(xr[e0 + j], yr[oo], sr[oo]))
                    cnt[oo] |= xr[e0 + j] == yr[oo] ? 1 : 2;
            }
        }
        for (int64_t o = 0; o < yrs; o++) {
            exact += cnt[o] == 1;
            near += cnt[o] >= 2;
        }
        sr_kinks_add(&kinks[i], exact + near, near, 0);
    }
    for (int64_t t = 0; t < n * k; t++) {
        const real *xr = x + (t / k) * xrs, *yr = y + (t / k) * yrs, *vr = v + t * xrs, *sr = sc + (t / k) * yrs;
        real *orow = out + t * yrs;
        for (int64_t o = 0; o < yrs; o++)
            orow[o] = vr[idx[(t / k) * yrs + o]];
        for (int64_t e0 = 0; e0 < xrs; e0 += last) {
            int64_t o = reduce_out_offset(e0 / last, nd, ishape, ostride);
            for (int64_t j = 0; j < last; j++) {
                int64_t oo = o + j * ls;
                real w = vr[e0 + j];
                if (SR_TIED(xr[e0 + j], yr[oo], sr[oo]) && (sign > 0 ? w > orow[oo] : w < orow[oo]))
                    orow[oo] = w;
            }
        }
    }
}

static void SR_FN(reduce_scatter)(real *gx, const real *gy, const int64_t *idx, int64_t rows, int64_t xrs, int64_t yrs)
{
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t e = 0; e < xrs; e++)
            gx[r * xrs + e] = 0;
        for (int64_t o = 0; o < yrs; o++)
            gx[r * xrs + idx[r * yrs + o]] += gy[r * yrs + o];
    }
}

#else /* generic part */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

#define REDUCE_OMP_MIN 65536

/* The output offset of the input row `row` (an index over all input dims
 * but the last, in row-major order). */
static inline int64_t reduce_out_offset(int64_t row, int nd, const int64_t *ishape, const int64_t *ostride)
{
    int64_t o = 0;
    for (int d = nd - 2; d >= 0; d--) {
        o += (row % ishape[d]) * ostride[d];
        row /= ishape[d];
    }
    return o;
}

#define SR_GENERIC_FILE "nn/reduce.c"
#include "base/generic.h"

enum { RED_MEAN, RED_SUM, RED_MAX, RED_MIN };

typedef struct {
    int op, keepdim, ndims;
    int64_t dims[SR_MAXDIM]; /* as given */
    /* the last call */
    int nd;                  /* input dims after the batch */
    int64_t ishape[SR_MAXDIM], ostride[SR_MAXDIM], xrs, yrs;
    double scale;
    sr_tensor acc;           /* float64 sums */
    int64_t *idx;            /* max / min: where each output's extreme is (primal rows) */
    size_t idx_cap;
    int64_t idx_rows;        /* rows idx covers (backward needs a forward with save) */
} reduce_impl;

/* Output shape for input x; fills the plan in c. */
static int reduce_plan(sr_module *m, const sr_tensor *x, int *ond, int64_t *oshape)
{
    reduce_impl *c = m->impl;
    int nd = x->ndim - 1, red[SR_MAXDIM] = {0};
    if (nd < 1)
        return sr_fail("reduce: input %s has no dims after the batch", SR_SHAPE(x));
    for (int i = 0; i < c->ndims; i++) {
        int64_t d = c->dims[i] < 0 ? c->dims[i] + x->ndim : c->dims[i];
        if (d < 1 || d >= x->ndim)
            return sr_fail("reduce: dim %lld does not fit input %s (dims 1..%d; dim 0 is the batch)",
                           (long long)c->dims[i], SR_SHAPE(x), nd);
        if (red[d - 1]++)
            return sr_fail("reduce: dim %lld is listed twice", (long long)c->dims[i]);
    }
    int64_t count = 1, os = 1;
    *ond = 1;
    oshape[0] = x->shape[0];
    for (int d = nd - 1; d >= 0; d--) {
        c->ishape[d] = x->shape[d + 1];
        if (red[d]) {
            count *= c->ishape[d];
            c->ostride[d] = 0;
        } else {
            c->ostride[d] = os;
            os *= c->ishape[d];
        }
    }
    for (int d = 0; d < nd; d++)
        if (!red[d] || c->keepdim)
            oshape[(*ond)++] = red[d] ? 1 : c->ishape[d];
    c->nd = nd;
    c->xrs = sr_rowsize(x);
    c->yrs = os;
    c->scale = c->op == RED_MEAN ? 1.0 / (double)count : 1.0;
    if (count == 0 && c->op != RED_SUM)
        return sr_fail("reduce: the %s over an empty dim of %s", c->op == RED_MEAN ? "mean" : "extreme", SR_SHAPE(x));
    return 0;
}

static int reduce_run(sr_module *m, const sr_tensor *x, sr_run *run, int jvp)
{
    reduce_impl *c = m->impl;
    int ond = 0;
    int64_t oshape[SR_MAXDIM];
    if (reduce_plan(m, x, &ond, oshape) || sr_module_output(m, run, x->dtype, ond, oshape))
        return -1;
    int64_t rows = x->shape[0];
    if (c->op >= RED_MAX) {
        int64_t np = jvp ? run->n : rows, need = np * c->yrs;
        if ((size_t)need > c->idx_cap) {
            int64_t *p = realloc(c->idx, (size_t)need * sizeof *p);
            if (!p)
                return sr_fail("reduce: out of memory");
            c->idx = p, c->idx_cap = (size_t)need;
        }
        SR_DISPATCH(x->dtype, reduce_ext, sr_data(&m->out), c->idx, sr_data(x), np, c->nd, c->ishape, c->ostride,
                    c->xrs, c->yrs, c->op == RED_MAX ? 1 : -1);
        if (jvp) {
            size_t es = sr_dtype_size(x->dtype);
            void *yt = (char *)sr_data(&m->out) + (size_t)(np * c->yrs) * es;
            const void *vt = (const char *)sr_data(x) + (size_t)(np * c->xrs) * es;
            if (run->directional) {
                int64_t ny = np * c->yrs > 0 ? np * c->yrs : 1;
                int64_t *cnt = malloc((size_t)ny * sizeof *cnt);
                void *sc = malloc((size_t)ny * es);
                if (!cnt || !sc) {
                    free(cnt);
                    free(sc);
                    return sr_fail("reduce: out of memory");
                }
                SR_DISPATCH(x->dtype, reduce_gather_ties, yt, vt, c->idx, sr_data(x), sr_data(&m->out), np, run->k,
                            c->nd, c->ishape, c->ostride, c->xrs, c->yrs, c->op == RED_MAX ? 1 : -1, run->kinks, cnt,
                            sc);
                free(cnt);
                free(sc);
            } else {
                SR_DISPATCH(x->dtype, reduce_gather, yt, vt, c->idx, np * run->k, run->k, c->xrs, c->yrs);
            }
        }
        c->idx_rows = !jvp && run->save ? np : 0;
        return 0;
    }
    int64_t na = rows * c->yrs;
    if (sr_pool_ensure(run->pool, &c->acc, SR_F64, 1, (int64_t[]){na > 0 ? na : 1}))
        return -1;
    SR_DISPATCH(x->dtype, reduce_fwd, sr_data(&m->out), sr_data(x), rows, c->nd, c->ishape, c->ostride, c->xrs,
                c->yrs, c->scale, sr_f64(&c->acc));
    sr_pool_put(run->pool, &c->acc);
    return 0;
}

static int reduce_forward(sr_module *m, const sr_tensor *x, sr_run *run) { return reduce_run(m, x, run, 0); }
static int reduce_jvp(sr_module *m, const sr_tensor *x, sr_run *run) { return reduce_run(m, x, run, 1); }

static int reduce_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    reduce_impl *c = m->impl;
    int64_t xs[SR_MAXDIM];
    xs[0] = gy->shape[0];
    memcpy(xs + 1, c->ishape, (size_t)c->nd * sizeof(int64_t));
    if (c->op >= RED_MAX && c->idx_rows != gy->shape[0])
        return sr_fail("reduce backward: forward was not run with save");
    if (sr_module_grad_input(m, run, gy->dtype, c->nd + 1, xs))
        return -1;
    if (c->op >= RED_MAX)
        SR_DISPATCH(gy->dtype, reduce_scatter, sr_data(&m->gin), sr_data(gy), c->idx, gy->shape[0], c->xrs, c->yrs);
    else
        SR_DISPATCH(gy->dtype, reduce_bwd, sr_data(&m->gin), sr_data(gy), gy->shape[0], c->nd, c->ishape, c->ostride,
                    c->xrs, c->yrs, c->scale);
    return 0;
}

static void reduce_free(sr_module *m)
{
    reduce_impl *c = m->impl;
    sr_tensor_free(&c->acc);
    free(c->idx);
}

static int reduce_is_affine(const sr_module *m) { return ((const reduce_impl *)m->impl)->op < RED_MAX; }

static const char *const reduce_names[] = {"mean", "sum", "max", "min", NULL};

static void reduce_describe(const sr_module *m, char *buf, size_t n)
{
    const reduce_impl *c = m->impl;
    size_t len = (size_t)snprintf(buf, n, "%s over {", reduce_names[c->op]);
    for (int i = 0; i < c->ndims && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, i ? ",%lld" : "%lld", (long long)c->dims[i]);
    if (len < n)
        snprintf(buf + len, n - len, "}%s", c->keepdim ? ", keepdim" : "");
}

static const sr_module_ops reduce_ops = {
    .kind = "reduce", .forward = reduce_forward, .jvp = reduce_jvp, .backward = reduce_backward,
    .free_impl = reduce_free, .describe = reduce_describe, .is_affine = reduce_is_affine,
};

sr_module *sr_reduce_create(const sr_opts *o)
{
    reduce_impl cfg = {0};
    double d[SR_MAXDIM];
    int nd = 0, r = o->get_nums(o, "dims", d, SR_MAXDIM, &nd);
    if (r < 0 || sr_opt_choice(o, "op", reduce_names, &cfg.op) ||
        sr_opt_bool(o, "keepdim", 0, &cfg.keepdim))
        return NULL;
    if (r == 0 || nd < 1) {
        sr_fail("reduce: option dims (the dims to reduce, >= 1) is required");
        return NULL;
    }
    for (int i = 0; i < nd; i++) {
        if (d[i] != floor(d[i]) || d[i] == 0 || fabs(d[i]) > SR_MAXDIM) {
            sr_fail("reduce: dims entry %d is %g (dim 0 is the batch)", i + 1, d[i]);
            return NULL;
        }
        cfg.dims[i] = (int64_t)d[i];
    }
    cfg.ndims = nd;
    sr_module *m = sr_module_new(&reduce_ops, sizeof cfg);
    if (m)
        *(reduce_impl *)m->impl = cfg;
    return m;
}

#endif
