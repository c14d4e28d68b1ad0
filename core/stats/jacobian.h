/* jacobian.h - Jacobian-derived directions and norms of an encoder at x. */
#ifndef SR_JACOBIAN_H
#define SR_JACOBIAN_H

#include "nn/module.h"

/* Top-k right singular vectors of J = ∂Φ_tap/∂x at one input x (1,C,H,W)
 * by subspace iteration on JᵀJ (a stacked JVP then a batched VJP per
 * iteration, Gram-Schmidt in double).  V receives (k, C, H, W) unit
 * vectors in the model's dtype, sv[k] the singular values ‖J v_i‖ in
 * decreasing order.  The model must be in eval mode. */
int sr_jacobian_top(sr_module *m, const sr_tensor *x, const sr_module *tap, int64_t k, int iters,
                    uint64_t seed, sr_tensor *V, double *sv);

#endif
