/* reduce.c - sums and means over dims of a sample:
 *   reduce{op = "mean" | "sum", dims = {...}, keepdim = false}
 * (dims 0-based after the batch, so >= 1, or negative from the end).  Both
 * are linear: the JVP is the op on the whole stack, backward spreads gy
 * (divided by the count for a mean) over the reduced dims.  Sums in double,
 * in a fixed order per sample. */
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
            int64_t rem = e0 / last, o = 0;
            for (int d = nd - 2; d >= 0; d--) {
                o += (rem % ishape[d]) * ostride[d];
                rem /= ishape[d];
            }
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
            int64_t rem = e0 / last, o = 0;
            for (int d = nd - 2; d >= 0; d--) {
                o += (rem % ishape[d]) * ostride[d];
                rem /= ishape[d];
            }
            for (int64_t j = 0; j < last; j++)
                xr[e0 + j] = (real)(gr[o + j * ls] * scale);
        }
    }
}

#else /* generic part */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

#define REDUCE_OMP_MIN 65536

#define SR_GENERIC_FILE "nn/reduce.c"
#include "base/generic.h"

typedef struct {
    int mean, keepdim, ndims;
    int64_t dims[SR_MAXDIM]; /* as given */
    /* the last call */
    int nd;                  /* input dims after the batch */
    int64_t ishape[SR_MAXDIM], ostride[SR_MAXDIM], xrs, yrs;
    double scale;
    sr_tensor acc;           /* float64 sums */
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
    c->scale = c->mean ? 1.0 / (double)count : 1.0;
    if (count == 0 && c->mean)
        return sr_fail("reduce: the mean over an empty dim of %s", SR_SHAPE(x));
    return 0;
}

static int reduce_run(sr_module *m, const sr_tensor *x, sr_run *run)
{
    reduce_impl *c = m->impl;
    int ond = 0;
    int64_t oshape[SR_MAXDIM];
    if (reduce_plan(m, x, &ond, oshape) || sr_module_output(m, run, x->dtype, ond, oshape))
        return -1;
    int64_t na = x->shape[0] * c->yrs;
    if (sr_pool_ensure(run->pool, &c->acc, SR_F64, 1, (int64_t[]){na > 0 ? na : 1}))
        return -1;
    SR_DISPATCH(x->dtype, reduce_fwd, sr_data(&m->out), sr_data(x), x->shape[0], c->nd, c->ishape, c->ostride,
                c->xrs, c->yrs, c->scale, sr_f64(&c->acc));
    sr_pool_put(run->pool, &c->acc);
    return 0;
}

static int reduce_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    reduce_impl *c = m->impl;
    int64_t xs[SR_MAXDIM];
    xs[0] = gy->shape[0];
    memcpy(xs + 1, c->ishape, (size_t)c->nd * sizeof(int64_t));
    if (sr_module_grad_input(m, run, gy->dtype, c->nd + 1, xs))
        return -1;
    SR_DISPATCH(gy->dtype, reduce_bwd, sr_data(&m->gin), sr_data(gy), gy->shape[0], c->nd, c->ishape, c->ostride,
                c->xrs, c->yrs, c->scale);
    return 0;
}

static void reduce_free(sr_module *m) { sr_tensor_free(&((reduce_impl *)m->impl)->acc); }

static void reduce_describe(const sr_module *m, char *buf, size_t n)
{
    const reduce_impl *c = m->impl;
    size_t len = (size_t)snprintf(buf, n, "%s over {", c->mean ? "mean" : "sum");
    for (int i = 0; i < c->ndims && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, i ? ",%lld" : "%lld", (long long)c->dims[i]);
    if (len < n)
        snprintf(buf + len, n - len, "}%s", c->keepdim ? ", keepdim" : "");
}

static const sr_module_ops reduce_ops = {
    .kind = "reduce", .forward = reduce_run, .jvp = reduce_run, .backward = reduce_backward, .free_impl = reduce_free,
    .describe = reduce_describe, .is_affine = sr_module_affine_always,
};

sr_module *sr_reduce_create(const sr_opts *o)
{
    reduce_impl cfg = {0};
    double d[SR_MAXDIM];
    int nd = 0, op, r = o->get_nums(o, "dims", d, SR_MAXDIM, &nd);
    if (r < 0 || sr_opt_choice(o, "op", (const char *[]){"mean", "sum", NULL}, &op) ||
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
    cfg.mean = op == 0;
    sr_module *m = sr_module_new(&reduce_ops, sizeof cfg);
    if (m)
        *(reduce_impl *)m->impl = cfg;
    return m;
}

#endif
