/* metrics.c - ReLU activation boundaries and pattern changes. */
#include "stats/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Modules through which the map stays piecewise linear with ReLU as the
 * only kink: affine layers, containers and relu (max-pooling also switches,
 * but its boundaries are not tracked). */
typedef struct {
    const char *bad;
} pl_state;

static int pl_cb(const char *path, sr_module *m, int depth, void *ud)
{
    (void)path;
    (void)depth;
    pl_state *s = ud;
    if (sr_module_is_affine(m) || (m->ops->flags & (SR_MOD_COMBINES | SR_MOD_RELU)))
        return 0;
    s->bad = m->ops->kind;
    return 1;
}

int sr_check_piecewise_linear(sr_module *m)
{
    pl_state s = {NULL};
    sr_module_walk(m, pl_cb, &s);
    if (s.bad)
        return sr_fail("the network is not piecewise linear with ReLU kinks only (found %s)", s.bad);
    return 0;
}

typedef struct {
    int64_t k;
    double *dist, *dist_neg;
    int64_t units;
    const sr_tensor *ref; /* flips: pre-activations at x, per relu in walk order */
    int idx;
    double *flips;
    int64_t rows;
    sr_tensor *refs;
    int nrefs, collect;
} relu_state;

/* Distances from one ReLU's recorded stacked input (1 + k rows). */
static void relu_distances(const sr_tensor *z, relu_state *s)
{
    int64_t rs = sr_rowsize(z);
    s->units += rs;
    for (int64_t j = 0; j < s->k; j++) {
        double best = s->dist[j], best_neg = s->dist_neg ? s->dist_neg[j] : 0;
        for (int64_t e = 0; e < rs; e++) {
            double z0 = sr_get_flat(z, e), dz = sr_get_flat(z, (1 + j) * rs + e);
            /* Units exactly at 0 sit on a boundary already: the region is
             * the half-space they are moving into, so they do not limit t. */
            if (z0 == 0 || dz == 0)
                continue;
            double t = -z0 / dz;
            if (t > 0 && t < best)
                best = t;
            if (t < 0 && -t < best_neg)
                best_neg = -t;
        }
        s->dist[j] = best;
        if (s->dist_neg)
            s->dist_neg[j] = best_neg;
    }
}

static int boundary_cb(const char *path, sr_module *m, int depth, void *ud)
{
    (void)path;
    (void)depth;
    relu_state *s = ud;
    if (!(m->ops->flags & SR_MOD_RELU) || !m->saved.storage)
        return 0;
    /* A ReLU that did not run in this pass (beyond a tap) holds nothing. */
    if (m->saved.shape[0] == 1 + s->k)
        relu_distances(&m->saved, s);
    sr_tensor_free(&m->saved);
    return 0;
}

int sr_relu_boundary_walk(sr_module *m, int64_t k, double *dist_pos, double *dist_neg, int64_t *nunits)
{
    relu_state s = {k, dist_pos, dist_neg, 0, NULL, 0, NULL, 0, NULL, 0, 0};
    for (int64_t j = 0; j < k; j++) {
        dist_pos[j] = INFINITY;
        if (dist_neg)
            dist_neg[j] = INFINITY;
    }
    if (sr_module_walk(m, boundary_cb, &s))
        return -1;
    if (nunits)
        *nunits = s.units;
    return 0;
}

int sr_relu_boundary(sr_module *m, const sr_tensor *xv, int64_t k, double *dist, int64_t *nunits)
{
    if (xv->ndim < 1 || xv->shape[0] != 1 + k)
        return sr_fail("relu_boundary: stacked input %s must hold 1 + %lld rows", SR_SHAPE(xv), (long long)k);
    if (sr_check_piecewise_linear(m))
        return sr_fail_context("relu_boundary");
    sr_run run = SR_RUN_INIT;
    run.n = 1;
    run.k = k;
    run.record_relu = 1;
    /* The one-sided tangents at ReLUs exactly at 0 (kernels/kink.h): such a
     * unit is in the half-space v moves into, so the units after it see its
     * tangent max(0, ż), as the profile's exact shortcut does; PyTorch's
     * mask (x > 0) dropped it and misplaced every later boundary. */
    run.directional = 1;
    if (sr_module_jvp(m, xv, &run))
        return -1;
    return sr_relu_boundary_walk(m, k, dist, NULL, nunits);
}

static int flips_cb(const char *path, sr_module *m, int depth, void *ud)
{
    (void)path;
    (void)depth;
    relu_state *s = ud;
    if (!(m->ops->flags & SR_MOD_RELU))
        return 0;
    if (!m->saved.storage)
        return sr_fail("relu_flips: a ReLU did not record its input");
    if (s->collect) {
        sr_tensor *r = realloc(s->refs, (size_t)(s->nrefs + 1) * sizeof *r);
        if (!r)
            return sr_fail("relu_flips: out of memory");
        s->refs = r;
        s->refs[s->nrefs] = (sr_tensor)SR_TENSOR_INIT;
        if (sr_tensor_copy(&s->refs[s->nrefs], &m->saved))
            return -1;
        s->nrefs++;
    } else {
        if (s->idx >= s->nrefs)
            return sr_fail("relu_flips: the network changed between passes");
        const sr_tensor *ref = &s->refs[s->idx++], *z = &m->saved;
        int64_t rs = sr_rowsize(ref);
        if (sr_rowsize(z) != rs)
            return sr_fail("relu_flips: layer sizes changed between passes");
        for (int64_t r = 0; r < s->rows; r++) {
            int64_t c = 0;
            /* A unit exactly at 0 at x is on its boundary: the one-sided
             * rule puts it in whichever half-space the row lies in, so it
             * never flips (and the count → 0 as η → 0, as r → 1). */
            for (int64_t e = 0; e < rs; e++) {
                double z0 = sr_get_flat(ref, e);
                c += z0 != 0 && (z0 > 0) != (sr_get_flat(z, r * rs + e) > 0);
            }
            s->flips[r] += (double)c;
        }
        s->units += rs;
    }
    sr_tensor_free(&m->saved);
    return 0;
}

int sr_relu_flips(sr_module *m, const sr_tensor *x, const sr_tensor *X, double *flips)
{
    if (x->ndim < 1 || x->shape[0] != 1)
        return sr_fail("relu_flips: reference input %s must be one row", SR_SHAPE(x));
    relu_state s = {0, NULL, NULL, 0, NULL, 0, flips, X->shape[0], NULL, 0, 1};
    sr_run run = SR_RUN_INIT;
    run.record_relu = 1;
    int rc = -1;
    if (sr_module_forward(m, x, &run) || sr_module_walk(m, flips_cb, &s))
        goto done;
    s.collect = 0;
    for (int64_t r = 0; r < X->shape[0]; r++)
        flips[r] = 0;
    run = (sr_run)SR_RUN_INIT;
    run.record_relu = 1;
    if (sr_module_forward(m, X, &run) || sr_module_walk(m, flips_cb, &s))
        goto done;
    for (int64_t r = 0; r < X->shape[0]; r++)
        flips[r] = s.units ? flips[r] / (double)s.units : NAN;
    rc = 0;
done:
    for (int i = 0; i < s.nrefs; i++)
        sr_tensor_free(&s.refs[i]);
    free(s.refs);
    return rc;
}
