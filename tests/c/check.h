/* check.h - generic derivative checks for any module (float64).
 *
 * check_module runs, for a float64 module and input x:
 *  - JVP vs central differences: for k random tangents v,
 *      rel = ||Jv - (f(x+hv) - f(x-hv))/2h|| / ||fd||
 *  - the adjoint identity <w, Jv> = <J^T w, v> with backward (input grads);
 *  - parameter gradients vs central differences of L(θ) = <w, f(x; θ)>
 *    along a random parameter direction (trainable parameters only).
 * It returns the worst errors so tests can assert on them. */
#ifndef SR_CHECK_H
#define SR_CHECK_H

#include "../../core/module.h"

typedef struct check_result {
    double jvp_fd;      /* worst relative error of the JVP vs finite differences */
    double adjoint;     /* worst relative violation of <w,Jv> = <J^T w, v> */
    double param_fd;    /* relative error of parameter grads vs finite differences */
    double primal;      /* max |jvp primal rows - forward| */
} check_result;

/* k tangents; h is the finite-difference step (1e-6 is a good default for
 * smooth layers; pass a smaller one near kinks). Returns 0 or -1 (error). */
int check_module(sr_module *m, const sr_tensor *x, int k, double h, uint64_t seed,
                 check_result *res);

/* Random float64 tensor (normal), for inputs. */
int check_randn(sr_tensor *t, int ndim, const int64_t *shape, uint64_t seed);

/* max |a-b| / max(|b|_inf, tiny) */
double check_rel_diff(const sr_tensor *a, const sr_tensor *b);

#endif
