/* kink.h - what a stacked JVP does at kinks and ties, and their counts.
 *
 * A piecewise-linear map (ReLU, max-pool, clip, abs, max of operands ...)
 * has no derivative where its input sits on a kink (a ReLU input exactly 0)
 * or where maxima tie (equal values in a max-pool window), but it has a
 * one-sided directional derivative there,
 *     D⁺f(x; t) = lim_{η→0+} (f(x + ηt) − f(x)) / η,
 * which obeys the chain rule, so a forward-mode pass computes it exactly
 * when each layer decides its tie by the tangent:
 *   ReLU at 0              max(0, t)
 *   max of tied values     the largest of their tangents (min: the smallest)
 *   clip at lo / at hi     max(0, t) / min(0, t)
 *   abs at 0               |t|
 *   a kink with one-sided slopes s₊, s₋ (leaky_relu, elu, hardswish at ±3,
 *   hardsigmoid at its bounds)   s₊·t for t > 0, s₋·t for t < 0.
 * This is sr_run.directional (the profile's rule).  The default, PyTorch's
 * forward-mode rule, takes one subgradient instead (ReLU's mask x > 0, the
 * first maximum, the mean of two tied operands): exact wherever the map is
 * differentiable, not at a tie.  D⁺ is positively homogeneous in t but not
 * linear, so u and −u need their own tangents, and the adjoint identity
 * ⟨w, D⁺f(x;t)⟩ = ⟨Jᵀw, t⟩ does not hold at a tie (backward stays PyTorch's
 * subgradient).
 *
 * Which values tie.  Kinks at a constant (ReLU at 0, clip at its bounds,
 * abs at 0) are decided by exact comparison: the zeros that reach a ReLU
 * come from regions of exact zeros (a ReLU before zeroed them; every
 * convolution path maps zeros to zeros, bias and BatchNorm shift 0), and a
 * value within rounding of a kink elsewhere is a coincidence, not a tie.
 * Maxima tie within SR_TIE_ULPS epsilons of the dtype times the largest
 * magnitude of their plane (SR_TIED): a window of a constant patch holds
 * the same value in exact arithmetic, but the convolution before it
 * (Winograd's tile transforms, a GEMM's vector lanes) can round its
 * positions apart, and the first maximum's tangent is then a subgradient
 * branch again.  Measured (core/README.md, "Kinks and ties"): constant
 * images through a random-init ResNet-18, the stem max-pool's windows tie
 * exactly under some convolution paths and round apart by at most 8 such
 * ulps under others; the nearest genuine gaps were thousands.
 */
#ifndef SR_KINK_H
#define SR_KINK_H

#include <stdint.h>

/* Counts of one primal row (an image) in a directional JVP pass, added by
 * the layers' rules (the caller zeroes them). */
typedef struct sr_kinks {
    int64_t ties;     /* units at a kink, windows / outputs whose maximum is tied (exactly or within SR_TIED) */
    int64_t near;     /* of those, tied within the tolerance but not exactly */
    int64_t singular; /* points with no finite one-sided derivative: sqrt, log, 1/x at 0, pow at 0
                       * with an exponent below 1, a division by 0 (the instrument cannot be exact there) */
} sr_kinks;

/* Maxima within this many epsilons of the dtype, times the scale of the
 * values compared (the largest magnitude in the plane or group they are
 * pooled from: a convolution's rounding error scales with its inputs, not
 * with the maximum, which can be small after cancellation), are tied. */
#define SR_TIE_ULPS 16

/* Inside a generic body (base/generic.h): whether v ties with the maximum
 * mx at scale s (NaN ties nothing). */
#define SR_TIED(v, mx, s) ((v) == (mx) || SR_FABS((v) - (mx)) <= SR_TIE_ULPS * SR_REAL_EPS * (s))

/* Add to k (may be NULL) from any thread. */
static inline void sr_kinks_add(sr_kinks *k, int64_t ties, int64_t near, int64_t singular)
{
    if (!k || (!ties && !near && !singular))
        return;
    #pragma omp atomic
    k->ties += ties;
    #pragma omp atomic
    k->near += near;
    #pragma omp atomic
    k->singular += singular;
}

#endif
