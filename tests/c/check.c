/* check.c - finite-difference and adjoint checks shared by the layer tests. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int check_randn(sr_tensor *t, int ndim, const int64_t *shape, uint64_t seed)
{
    sr_rng r;
    sr_rng_seed(&r, seed);
    if (sr_tensor_alloc(t, SR_F64, ndim, shape))
        return -1;
    sr_tensor_fill_normal(t, &r, 0, 1);
    return 0;
}

double check_rel_diff(const sr_tensor *a, const sr_tensor *b)
{
    int64_t n = sr_numel(a);
    double md = 0, mb = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(sr_get_flat(a, i) - sr_get_flat(b, i));
        double v = fabs(sr_get_flat(b, i));
        if (d > md || isnan(d))
            md = isnan(d) ? INFINITY : d;
        if (v > mb)
            mb = v;
    }
    return md / (mb > 1e-300 ? mb : 1e-300);
}

static double dot(const sr_tensor *a, const sr_tensor *b)
{
    double s = 0;
    int64_t n = sr_numel(a);
    for (int64_t i = 0; i < n; i++)
        s += sr_get_flat(a, i) * sr_get_flat(b, i);
    return s;
}

/* f(x) into out (a copy, so later calls cannot overwrite it). */
static int eval(sr_module *m, const sr_tensor *x, sr_tensor *out)
{
    sr_run run = SR_RUN_INIT;
    if (sr_module_forward(m, x, &run))
        return -1;
    return sr_tensor_copy(out, &m->out);
}

typedef struct {
    sr_rng *rng;
    double num;   /* <grad, delta> accumulated */
    int apply;    /* 0: draw delta & accumulate; +1/-1: shift params by ±h*delta */
    double h;
    sr_tensor *deltas;
    int i;
} param_state;

static int param_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    (void)owner;
    param_state *s = ud;
    if (!p->trainable)
        return 0;
    sr_tensor *d = &s->deltas[s->i++];
    int64_t n = sr_numel(&p->value);
    if (s->apply == 0) {
        if (sr_tensor_alloc(d, SR_F64, p->value.ndim, p->value.shape))
            return -1;
        sr_tensor_fill_normal(d, s->rng, 0, 1);
        if (p->grad.storage)
            s->num += dot(&p->grad, d);
    } else {
        for (int64_t j = 0; j < n; j++)
            sr_set_flat(&p->value, j, sr_get_flat(&p->value, j) + s->apply * s->h * sr_get_flat(d, j));
    }
    return 0;
}

static int count_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    (void)owner;
    if (p->trainable)
        (*(int *)ud)++;
    return 0;
}

int check_module(sr_module *m, const sr_tensor *x, int k, double h, uint64_t seed,
                 check_result *res)
{
    int rc = -1;
    sr_rng rng;
    sr_rng_seed(&rng, seed);
    memset(res, 0, sizeof *res);
    sr_tensor y0 = SR_TENSOR_INIT, stack = SR_TENSOR_INIT, jv = SR_TENSOR_INIT, xp = SR_TENSOR_INIT,
              xm = SR_TENSOR_INIT, fp = SR_TENSOR_INIT, fm = SR_TENSOR_INIT, w = SR_TENSOR_INIT,
              gx = SR_TENSOR_INIT, row = SR_TENSOR_INIT, vrow = SR_TENSOR_INIT;
    sr_tensor *deltas = NULL;
    int64_t n = x->shape[0], rs = sr_rowsize(x);
    if (x->dtype != SR_F64 || m->dtype != SR_F64)
        return sr_fail("check_module: needs float64 module and input");
    if (eval(m, x, &y0))
        goto done;
    int64_t ys = sr_rowsize(&y0);

    /* Stacked [x; v] with random tangents. */
    int64_t sshape[SR_MAXDIM];
    memcpy(sshape, x->shape, sizeof sshape);
    sshape[0] = n * (1 + k);
    if (sr_tensor_alloc(&stack, SR_F64, x->ndim, sshape))
        goto done;
    memcpy(sr_f64(&stack), sr_f64(x), (size_t)(n * rs) * sizeof(double));
    for (int64_t i = n * rs; i < sr_numel(&stack); i++)
        sr_f64(&stack)[i] = sr_rng_normal(&rng);
    sr_run run = SR_RUN_INIT;
    run.n = n;
    run.k = k;
    if (sr_module_jvp(m, &stack, &run) || sr_tensor_copy(&jv, &m->out))
        goto done;
    if (jv.shape[0] != n * (1 + k) || sr_rowsize(&jv) != ys) {
        sr_fail("check_module: jvp output %s, forward %s", SR_SHAPE(&jv), SR_SHAPE(&y0));
        goto done;
    }
    for (int64_t i = 0; i < n * ys; i++) {
        double d = fabs(sr_f64(&jv)[i] - sr_f64(&y0)[i]);
        if (d > res->primal)
            res->primal = d;
    }

    /* Finite differences per tangent: perturb every primal row i by its
     * tangent (i, j) at once (rows are independent for per-sample layers,
     * and for batch-coupled ones the stacked tangent is the joint one). */
    if (sr_tensor_copy(&xp, x) || sr_tensor_copy(&xm, x))
        goto done;
    for (int j = 0; j < k; j++) {
        for (int64_t i = 0; i < n; i++) {
            const double *v = sr_f64(&stack) + (n + i * k + j) * rs;
            for (int64_t e = 0; e < rs; e++) {
                sr_f64(&xp)[i * rs + e] = sr_f64(x)[i * rs + e] + h * v[e];
                sr_f64(&xm)[i * rs + e] = sr_f64(x)[i * rs + e] - h * v[e];
            }
        }
        if (eval(m, &xp, &fp) || eval(m, &xm, &fm))
            goto done;
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) {
            const double *jvr = sr_f64(&jv) + (n + i * k + j) * ys;
            for (int64_t e = 0; e < ys; e++) {
                double fd = (sr_f64(&fp)[i * ys + e] - sr_f64(&fm)[i * ys + e]) / (2 * h);
                num += (jvr[e] - fd) * (jvr[e] - fd);
                den += fd * fd;
            }
        }
        double rel = sqrt(num) / (sqrt(den) > 1e-300 ? sqrt(den) : 1e-300);
        if (rel > res->jvp_fd || isnan(rel))
            res->jvp_fd = isnan(rel) ? INFINITY : rel;
    }

    /* Adjoint: one w per output, backward gives J^T w; compare with each
     * tangent j: sum_i <w_i, J v_ij> = sum_i <(J^T w)_i, v_ij>. */
    if (check_randn(&w, y0.ndim, y0.shape, seed + 1))
        goto done;
    sr_module_zero_grad(m);
    run = (sr_run)SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    if (sr_module_forward(m, x, &run) || sr_module_backward(m, &w, &run) ||
        sr_tensor_copy(&gx, &m->gin))
        goto done;
    if (!sr_same_shape(&gx, x)) {
        sr_fail("check_module: input gradient %s, input %s", SR_SHAPE(&gx), SR_SHAPE(x));
        goto done;
    }
    for (int j = 0; j < k; j++) {
        double lhs = 0, rhs = 0, scale = 0;
        for (int64_t i = 0; i < n; i++) {
            const double *jvr = sr_f64(&jv) + (n + i * k + j) * ys;
            const double *v = sr_f64(&stack) + (n + i * k + j) * rs;
            for (int64_t e = 0; e < ys; e++) {
                lhs += sr_f64(&w)[i * ys + e] * jvr[e];
                scale += fabs(sr_f64(&w)[i * ys + e] * jvr[e]);
            }
            for (int64_t e = 0; e < rs; e++)
                rhs += sr_f64(&gx)[i * rs + e] * v[e];
        }
        double rel = fabs(lhs - rhs) / (scale > 1e-300 ? scale : 1e-300);
        if (rel > res->adjoint || isnan(rel))
            res->adjoint = isnan(rel) ? INFINITY : rel;
    }

    /* Parameter gradients vs FD of L(θ) = <w, f(x;θ)> along random δθ. */
    int np = 0;
    sr_module_walk_params(m, count_cb, &np);
    if (np) {
        deltas = calloc((size_t)np, sizeof *deltas);
        param_state ps = {&rng, 0, 0, h, deltas, 0};
        if (!deltas || sr_module_walk_params(m, param_cb, &ps))
            goto done;
        double analytic = ps.num;
        ps.apply = 1; ps.i = 0;
        sr_module_walk_params(m, param_cb, &ps);
        if (eval(m, x, &fp))
            goto done;
        ps.apply = -2; ps.i = 0;
        sr_module_walk_params(m, param_cb, &ps);
        if (eval(m, x, &fm))
            goto done;
        ps.apply = 1; ps.i = 0;
        sr_module_walk_params(m, param_cb, &ps); /* restore */
        double fd = (dot(&w, &fp) - dot(&w, &fm)) / (2 * h);
        double scale = fabs(fd) > fabs(analytic) ? fabs(fd) : fabs(analytic);
        res->param_fd = fabs(fd - analytic) / (scale > 1e-300 ? scale : 1e-300);
        if (isnan(res->param_fd))
            res->param_fd = INFINITY;
    }
    rc = 0;
done:
    if (deltas) {
        for (int i = 0; i < np; i++)
            sr_tensor_free(&deltas[i]);
        free(deltas);
    }
    sr_tensor *all[] = {&y0, &stack, &jv, &xp, &xm, &fp, &fm, &w, &gx, &row, &vrow};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sr_tensor_free(all[i]);
    return rc;
}
