/* jacobian.c - subspace iteration for the top right singular vectors of J. */
#include "stats/jacobian.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

/* Orthonormalise the k rows of v (k × d) in place (modified Gram-Schmidt,
 * twice for stability); a row that collapses is replaced by noise. */
static void orthonormalise(double *v, int64_t k, int64_t d, sr_rng *rng)
{
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < k; i++) {
            double *vi = v + i * d;
            for (int64_t j = 0; j < i; j++) {
                const double *vj = v + j * d;
                double dot = 0;
                for (int64_t e = 0; e < d; e++)
                    dot += vi[e] * vj[e];
                for (int64_t e = 0; e < d; e++)
                    vi[e] -= dot * vj[e];
            }
            double n = 0;
            for (int64_t e = 0; e < d; e++)
                n += vi[e] * vi[e];
            n = sqrt(n);
            if (!(n > 1e-300)) {
                for (int64_t e = 0; e < d; e++)
                    vi[e] = sr_rng_normal(rng);
                i--; /* redo this row */
                continue;
            }
            for (int64_t e = 0; e < d; e++)
                vi[e] /= n;
        }
}

/* JV (k × nf) for the rows of v, via one stacked jvp. */
static int apply_j(sr_module *m, const sr_tensor *x, const sr_module *tap, const double *v, int64_t k,
                   double **jv, int64_t *nf)
{
    int64_t d = sr_numel(x);
    sr_tensor stack = SR_TENSOR_INIT, tap_out = SR_TENSOR_INIT;
    int64_t shape[SR_MAXDIM];
    memcpy(shape, x->shape, sizeof shape);
    shape[0] = 1 + k;
    if (sr_tensor_alloc(&stack, x->dtype, x->ndim, shape))
        return -1;
    for (int64_t e = 0; e < d; e++)
        sr_set_flat(&stack, e, sr_get_flat(x, e));
    for (int64_t e = 0; e < k * d; e++)
        sr_set_flat(&stack, d + e, v[e]);
    sr_run run = SR_RUN_INIT;
    const sr_module *taps[1] = {tap};
    run.n = 1;
    run.k = k;
    sr_run_tap(&run, taps, &tap_out);
    int rc = sr_module_jvp(m, &stack, &run);
    if (rc == 0) {
        const sr_tensor *out = tap ? &tap_out : &m->out;
        *nf = sr_rowsize(out);
        *jv = realloc(*jv, (size_t)(k * *nf) * sizeof **jv);
        if (!*jv)
            rc = sr_fail("jacobian_top: out of memory");
        for (int64_t e = 0; rc == 0 && e < k * *nf; e++)
            (*jv)[e] = sr_get_flat(out, *nf + e);
    }
    sr_tensor_free(&stack);
    sr_tensor_free(&tap_out);
    return rc;
}

/* g (k × d) = Jᵀ w for the k rows of w (k × nf), via k copies of x. */
static int apply_jt(sr_module *m, const sr_tensor *x, const sr_module *tap, const double *w, int64_t k,
                    int64_t nf, double *g)
{
    int64_t d = sr_numel(x);
    sr_tensor xs = SR_TENSOR_INIT, ws = SR_TENSOR_INIT, tap_out = SR_TENSOR_INIT;
    int64_t shape[SR_MAXDIM];
    memcpy(shape, x->shape, sizeof shape);
    shape[0] = k;
    int rc = -1;
    if (sr_tensor_alloc(&xs, x->dtype, x->ndim, shape))
        goto done;
    for (int64_t r = 0; r < k; r++)
        for (int64_t e = 0; e < d; e++)
            sr_set_flat(&xs, r * d + e, sr_get_flat(x, e));
    sr_run run = SR_RUN_INIT;
    const sr_module *taps[1] = {tap};
    run.save = 1;
    sr_run_tap(&run, taps, &tap_out);
    if (sr_module_forward(m, &xs, &run))
        goto done;
    const sr_tensor *out = tap ? &tap_out : &m->out;
    if (sr_tensor_alloc(&ws, x->dtype, out->ndim, out->shape) || sr_rowsize(out) != nf) {
        sr_fail("jacobian_top: feature size changed between passes");
        goto done;
    }
    for (int64_t e = 0; e < k * nf; e++)
        sr_set_flat(&ws, e, w[e]);
    sr_tensor_free(&tap_out);
    if (sr_module_backward(m, &ws, &run))
        goto done;
    for (int64_t e = 0; e < k * d; e++)
        g[e] = sr_get_flat(&m->gin, e);
    rc = 0;
done:
    sr_tensor_free(&xs);
    sr_tensor_free(&ws);
    sr_tensor_free(&tap_out);
    return rc;
}

int sr_jacobian_top(sr_module *m, const sr_tensor *x, const sr_module *tap, int64_t k, int iters,
                    uint64_t seed, sr_tensor *V, double *sv)
{
    if (x->ndim < 2 || x->shape[0] != 1)
        return sr_fail("jacobian_top: input %s must be a single image (1, C, H, W)", SR_SHAPE(x));
    int64_t d = sr_numel(x);
    if (k < 1 || k > d)
        return sr_fail("jacobian_top: k=%lld must be in 1..%lld (the input size)", (long long)k, (long long)d);
    if (iters < 1)
        return sr_fail("jacobian_top: iters must be >= 1");
    if (m->training)
        return sr_fail("jacobian_top: the model is in training mode; call m:eval() first");
    sr_rng rng;
    sr_rng_seed(&rng, seed);
    int rc = -1;
    double *v = malloc((size_t)(k * d) * sizeof *v), *jv = NULL;
    int64_t *order = malloc((size_t)k * sizeof *order);
    double *norms = malloc((size_t)k * sizeof *norms);
    if (!v || !order || !norms) {
        sr_fail("jacobian_top: out of memory");
        goto done;
    }
    for (int64_t e = 0; e < k * d; e++)
        v[e] = sr_rng_normal(&rng);
    orthonormalise(v, k, d, &rng);
    int64_t nf = 0;
    for (int it = 0; it < iters; it++) {
        if (apply_j(m, x, tap, v, k, &jv, &nf) || apply_jt(m, x, tap, jv, k, nf, v))
            goto done;
        orthonormalise(v, k, d, &rng);
    }
    /* Singular values of the final basis; order by them. */
    if (apply_j(m, x, tap, v, k, &jv, &nf))
        goto done;
    for (int64_t i = 0; i < k; i++) {
        double s = 0;
        for (int64_t e = 0; e < nf; e++)
            s += jv[i * nf + e] * jv[i * nf + e];
        norms[i] = sqrt(s);
        order[i] = i;
    }
    for (int64_t i = 1; i < k; i++) /* insertion sort, k is small */
        for (int64_t j = i; j > 0 && norms[order[j]] > norms[order[j - 1]]; j--) {
            int64_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t shape[SR_MAXDIM];
    memcpy(shape, x->shape, sizeof shape);
    shape[0] = k;
    if (sr_tensor_alloc(V, x->dtype, x->ndim, shape))
        goto done;
    for (int64_t i = 0; i < k; i++) {
        sv[i] = norms[order[i]];
        for (int64_t e = 0; e < d; e++)
            sr_set_flat(V, i * d + e, v[order[i] * d + e]);
    }
    rc = 0;
done:
    free(v);
    free(jv);
    free(order);
    free(norms);
    return rc;
}
