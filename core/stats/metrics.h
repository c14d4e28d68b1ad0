/* metrics.h - finite-scale metrics of piecewise-linear (ReLU) encoders,
 * computed on the same inputs and directions as the profile:
 *  - the exact distance along u to the first activation boundary: for each
 *    ReLU unit with pre-activation z(x) and directional derivative ż = J_z u,
 *    the unit flips at t = −z/ż when that is positive; the minimum over
 *    units is the largest η for which x+ηu stays in x's linear region, where
 *    Φ(x+ηu) − Φ(x) = η J u exactly (for nets whose only nonlinearity is
 *    ReLU);
 *  - the fraction of ReLU units whose sign differs between x and x+ηu.
 * Both follow the directional rule at exact ties (kernels/kink.h): a unit
 * exactly at 0 at x lies in the half-space u moves into, so it neither
 * limits the distance nor counts as a flip, and its one-sided tangent
 * max(0, ż) reaches the layers after it. */
#ifndef SR_METRICS_H
#define SR_METRICS_H

#include "nn/module.h"

/* 0 if every nonlinearity of m is a ReLU (so the boundary distance is
 * exact); else -1 naming the first other nonlinear layer. */
int sr_check_piecewise_linear(sr_module *m);

/* dist[j] for the k tangent rows of a stacked input xv (1 + k rows): the
 * first-boundary distance of each direction (INFINITY if none ahead).
 * Directions need not be unit: the distance is in multiples of v. */
int sr_relu_boundary(sr_module *m, const sr_tensor *xv, int64_t k, double *dist, int64_t *nunits);

/* After a stacked jvp run with run.record_relu (1 + k rows): distances for
 * +v (dist_pos) and −v (dist_neg, may be NULL) from every ReLU that ran
 * (ReLUs beyond a tap did not run and are skipped); frees what they saved. */
int sr_relu_boundary_walk(sr_module *m, int64_t k, double *dist_pos, double *dist_neg, int64_t *nunits);

/* flips[r] = fraction of ReLU units whose sign at row r of X differs from
 * the sign at x (one input), for the R rows of X. */
int sr_relu_flips(sr_module *m, const sr_tensor *x, const sr_tensor *X, double *flips);

#endif
