/* act.c - activations:
 *   relu     y = max(x, 0)
 *   gelu     y = x·Φ(x) (approximate="none", the erf form) or the tanh form
 *            0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))   (approximate="tanh")
 *   softmax  over one dim (the last by default), max-subtracted; log=true:
 *            the log-softmax (x − max) − log Σ e^(x − max)
 *   pointwise maps y = f(x) with f' for the JVP and backward: sigmoid, tanh,
 *            hardsigmoid (max(0, min(1, αx + β))), hardswish (x·relu6(x + 3)/6),
 *            leaky_relu, clip (ReLU6 = clip 0..6), elu, softplus, erf, sqrt, pow
 *            (a constant exponent), exp, log, abs, neg, reciprocal.  At a kink
 *            the derivative is the one of the side the kink's point belongs to
 *            in torch (leaky_relu, clip and hardsigmoid: 0 or the slope
 *            of the open interval; abs: 0 at 0); under run->directional each
 *            tangent takes the slope of the side it moves into
 *            (pointwise_kinks, kernels/kink.h), and ReLU max(0, t) at 0.
 *
 * Elementwise layers have a diagonal Jacobian: tangent rows are the tangent
 * times f'(x) of their primal row.  ReLU's mask and GELU's derivative come
 * from the primal input (GELU's is computed once per primal element into a
 * workspace, then applied to all k tangents).  At x = 0 ReLU's derivative is
 * 0, PyTorch's convention in both backward and forward AD.
 *
 * Transcendentals.  glibc's scalar erff / tanhf / expf cost 7-20 ns here and
 * never vectorise without -ffast-math; in a ViT the GELUs alone would then
 * cost about as much as all the GEMMs.  So float32 uses inline, vectorisable
 * forms (below: a Cody-Waite exp with Cephes' polynomial, and Φ from a
 * rational erfc, relative error ~2e-7 over the whole float range), and
 * float64 calls libm, so the float64 reference path stays accurate to
 * rounding.  Both are written so that 1 + erf and 1 + tanh never cancel:
 * Φ(x) = erfc(−x/√2)/2 and 1 + tanh u = 2/(1 + e^{−2u}).  The GELU loops
 * ask for 8 lanes: GCC's Zen tuning otherwise picks 4, and the erf form ran
 * ~20% slower so on one thread here (Zen 1, which splits 256-bit operations
 * in two anyway; fewer instructions still win).
 *
 * Tangent blocks are walked in chunks of ACT_CHUNK elements so that a single
 * image with many tangents still spreads over the threads. */
#ifdef SR_REAL

/* y = gelu(x) and, when deriv is not NULL, deriv = gelu'(x).  The form is
 * switched outside the loops so each loop vectorises with one formula. */
static void SR_FN(gelu_fwd)(real *y, real *deriv, const real *x, int64_t n, int tanh_form)
{
    #pragma omp parallel for schedule(static) if (n > ACT_OMP_MIN / 8)
    for (int64_t c = 0; c < n; c += ACT_CHUNK) {
        int64_t e1 = c + ACT_CHUNK < n ? c + ACT_CHUNK : n;
        if (tanh_form && deriv) {
            ACT_SIMD
            for (int64_t e = c; e < e1; e++)
                y[e] = SR_FN(gelu_tanh)(x[e], &deriv[e]);
        } else if (tanh_form) {
            ACT_SIMD
            for (int64_t e = c; e < e1; e++) {
                real d;
                y[e] = SR_FN(gelu_tanh)(x[e], &d);
            }
        } else if (deriv) {
            ACT_SIMD
            for (int64_t e = c; e < e1; e++)
                y[e] = SR_FN(gelu_erf)(x[e], &deriv[e]);
        } else {
            ACT_SIMD
            for (int64_t e = c; e < e1; e++) {
                real d;
                y[e] = SR_FN(gelu_erf)(x[e], &d);
            }
        }
    }
}

/* y_t = d ⊙ v_t, d the derivative row of t's primal (n primal rows). */
static void SR_FN(diag_tangents)(real *yt, const real *vt, const real *d, int64_t n, int64_t k,
                                 int64_t rs)
{
    int64_t nc = (rs + ACT_CHUNK - 1) / ACT_CHUNK;
    #pragma omp parallel for schedule(static) if (n * k * rs > ACT_OMP_MIN)
    for (int64_t bk = 0; bk < n * k * nc; bk++) {
        int64_t t = bk / nc, e0 = (bk % nc) * ACT_CHUNK, e1 = e0 + ACT_CHUNK < rs ? e0 + ACT_CHUNK : rs;
        const real *dr = d + (t / k) * rs, *vr = vt + t * rs;
        real *yr = yt + t * rs;
        #pragma omp simd
        for (int64_t e = e0; e < e1; e++)
            yr[e] = dr[e] * vr[e];
    }
}

/* gx = gy ⊙ gelu'(x), the derivative recomputed from the saved input. */
static void SR_FN(gelu_bwd)(real *gx, const real *gy, const real *x, int64_t n, int tanh_form)
{
    #pragma omp parallel for schedule(static) if (n > ACT_OMP_MIN / 8)
    for (int64_t c = 0; c < n; c += ACT_CHUNK) {
        int64_t e1 = c + ACT_CHUNK < n ? c + ACT_CHUNK : n;
        if (tanh_form) {
            ACT_SIMD
            for (int64_t e = c; e < e1; e++) {
                real d;
                SR_FN(gelu_tanh)(x[e], &d);
                gx[e] = gy[e] * d;
            }
        } else {
            ACT_SIMD
            for (int64_t e = c; e < e1; e++) {
                real d;
                SR_FN(gelu_erf)(x[e], &d);
                gx[e] = gy[e] * d;
            }
        }
    }
}

/* Softmax of rows of length L; the sum in double. */
static void SR_FN(softmax_fwd)(real *y, const real *x, int64_t rows, int64_t L)
{
    #pragma omp parallel for schedule(static) if (rows * L > ACT_OMP_MIN / 4)
    for (int64_t r = 0; r < rows; r++) {
        const real *xr = x + r * L;
        real *yr = y + r * L;
        real mx = xr[0];
        #pragma omp simd reduction(max : mx)
        for (int64_t l = 1; l < L; l++)
            mx = xr[l] > mx ? xr[l] : mx;
        double s = 0;
        #pragma omp simd reduction(+ : s)
        for (int64_t l = 0; l < L; l++) {
            yr[l] = SR_FN(act_exp)(xr[l] - mx);
            s += yr[l];
        }
        real inv = (real)(1 / s);
        #pragma omp simd
        for (int64_t l = 0; l < L; l++)
            yr[l] *= inv;
    }
}

/* out = s ⊙ (u − ⟨s, u⟩) per row: the JVP (u a tangent row) and the
 * backward (u = gy) alike, since the Jacobian diag(s) − s sᵀ is symmetric.
 * Row r of u uses the softmax row (r / R / k)·R + r mod R, R rows per
 * sample: tangents of sample i share its rows (k = R = 1: row r itself). */
static void SR_FN(softmax_tangents)(real *out, const real *u, const real *s, int64_t rows, int64_t R,
                                    int64_t k, int64_t L)
{
    #pragma omp parallel for schedule(static) if (rows * L > ACT_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const real *sr = s + ((r / R) / k * R + r % R) * L, *ur = u + r * L;
        real *yr = out + r * L;
        double dot = 0;
        #pragma omp simd reduction(+ : dot)
        for (int64_t l = 0; l < L; l++)
            dot += (double)sr[l] * ur[l];
        #pragma omp simd
        for (int64_t l = 0; l < L; l++)
            yr[l] = (real)(sr[l] * (ur[l] - dot));
    }
}

/* y = f(x) and, when d is not NULL, d = f'(x), for the pointwise op; the
 * op is switched outside the loops.  float32 uses libm here: these layers
 * come from imported graphs, where exactness counts more than speed. */
static void SR_FN(pointwise_fwd)(real *y, real *d, const real *x, int64_t n, int op, double pa, double pb)
{
    const real a = (real)pa, b = (real)pb;
#define PW_LOOP(Y, D)                                                                                     \
    _Pragma("omp parallel for schedule(static) if (n > ACT_OMP_MIN / 8)")                              \
    for (int64_t i = 0; i < n; i++) {                                                                     \
        real v = x[i], r;                                                                                 \
        r = (Y);                                                                                          \
        y[i] = r;                                                                                         \
        if (d)                                                                                            \
            d[i] = (D);                                                                                   \
    }
    switch (op) {
    case PW_SIGMOID:
        PW_LOOP(v >= 0 ? 1 / (1 + SR_EXP(-v)) : SR_EXP(v) / (1 + SR_EXP(v)), r * (1 - r))
        break;
    case PW_TANH: PW_LOOP(SR_TANH(v), 1 - r * r) break;
    case PW_HARDSIGMOID:
        PW_LOOP(a * v + b <= 0 ? 0 : a * v + b >= 1 ? 1 : a * v + b, a * v + b > 0 && a * v + b < 1 ? a : 0)
        break;
    case PW_HARDSWISH:
        PW_LOOP(v <= -3 ? 0 : v >= 3 ? v : v * (v + 3) / 6, v < -3 ? 0 : v > 3 ? 1 : (2 * v + 3) / 6)
        break;
    case PW_LEAKY_RELU: PW_LOOP(v > 0 ? v : a * v, v > 0 ? 1 : a) break;
    case PW_CLIP: PW_LOOP(v < a ? a : v > b ? b : v, v > a && v < b ? 1 : 0) break;
    case PW_ELU: PW_LOOP(v > 0 ? v : a * (SR_EXP(v) - 1), v > 0 ? 1 : r + a) break;
    case PW_SOFTPLUS:
        PW_LOOP(v > 0 ? v + log1p(exp(-(double)v)) : log1p(exp((double)v)),
                v >= 0 ? 1 / (1 + SR_EXP(-v)) : SR_EXP(v) / (1 + SR_EXP(v)))
        break;
    case PW_ERF: PW_LOOP(SR_ERF(v), (real)1.1283791670955126 * SR_EXP(-v * v)) break;
    case PW_SQRT: PW_LOOP(SR_SQRT(v), (real)0.5 / r) break;
    case PW_POW:
        if (pa == 2) {
            PW_LOOP(v * v, 2 * v)
        } else {
            PW_LOOP((real)pow(v, pa), (real)(pa * pow(v, pa - 1)))
        }
        break;
    case PW_EXP: PW_LOOP(SR_EXP(v), r) break;
    case PW_LOG: PW_LOOP(SR_LOG(v), 1 / v) break;
    case PW_ABS: PW_LOOP(SR_FABS(v), v > 0 ? 1 : v < 0 ? -1 : 0) break;
    case PW_NEG: PW_LOOP(-v, -1) break;
    default: PW_LOOP(1 / v, -r * r) break;
    }
#undef PW_LOOP
}

/* The directional rule at the op's kinks (kernels/kink.h): where x sits
 * on one, dp becomes the slope on its right (for tangents > 0) and dm the
 * one on its left (tangents < 0); elsewhere dm = dp (pointwise_fwd's d).
 * Returns the row's kinks in *ties and its points without a finite
 * one-sided derivative (sqrt, log, 1/x at 0; pow at 0 with an exponent
 * below 1 other than 0) in *singular.  The same rounded expressions as
 * pointwise_fwd decide which side x is on. */
static void SR_FN(pointwise_kinks)(real *dp, real *dm, const real *x, int64_t n, int op, double pa, double pb,
                                   int64_t *ties, int64_t *singular)
{
    const real a = (real)pa, b = (real)pb;
    int64_t nt = 0, ns = 0;
    for (int64_t i = 0; i < n; i++) {
        real v = x[i], r = dp[i], l = r;
        switch (op) {
        case PW_HARDSIGMOID: {
            real z = a * v + b; /* clip(z, 0, 1): at 0 max(0, a·t), at 1 min(0, a·t) */
            if (z == 0)
                r = a > 0 ? a : 0, l = a < 0 ? a : 0;
            else if (z == 1)
                r = a < 0 ? a : 0, l = a > 0 ? a : 0;
            break;
        }
        case PW_HARDSWISH:
            if (v == -3)
                r = (real)-0.5, l = 0;
            else if (v == 3)
                r = 1, l = (real)1.5;
            break;
        case PW_LEAKY_RELU:
        case PW_ELU: /* elu's left slope at 0 is alpha (e^0·alpha) */
            if (v == 0)
                r = 1, l = a;
            break;
        case PW_CLIP:
            if (a < b && v == a)
                r = 1, l = 0;
            else if (a < b && v == b)
                r = 0, l = 1;
            break;
        case PW_ABS:
            if (v == 0)
                r = 1, l = -1;
            break;
        case PW_SQRT:
        case PW_LOG:
        case PW_RECIPROCAL: ns += v == 0; break;
        case PW_POW: ns += v == 0 && pa < 1 && pa != 0; break;
        default: break;
        }
        nt += r != l;
        dp[i] = r;
        dm[i] = l;
    }
    *ties += nt;
    *singular += ns;
}

/* y_t = s ⊙ v_t with s the right slope dp where v_t > 0, else the left dm
 * (rows of t's primal): the directional diag_tangents. */
static void SR_FN(sided_tangents)(real *yt, const real *vt, const real *dp, const real *dm, int64_t n, int64_t k,
                                  int64_t rs)
{
    int64_t nc = (rs + ACT_CHUNK - 1) / ACT_CHUNK;
    #pragma omp parallel for schedule(static) if (n * k * rs > ACT_OMP_MIN)
    for (int64_t bk = 0; bk < n * k * nc; bk++) {
        int64_t t = bk / nc, e0 = (bk % nc) * ACT_CHUNK, e1 = e0 + ACT_CHUNK < rs ? e0 + ACT_CHUNK : rs;
        const real *pr = dp + (t / k) * rs, *mr = dm + (t / k) * rs, *vr = vt + t * rs;
        real *yr = yt + t * rs;
        #pragma omp simd
        for (int64_t e = e0; e < e1; e++)
            yr[e] = (vr[e] > 0 ? pr[e] : mr[e]) * vr[e];
    }
}

/* gx = gy ⊙ f'(x) (f' recomputed from the saved input). */
static void SR_FN(pointwise_bwd)(real *gx, const real *gy, const real *x, real *work, int64_t n, int op, double a,
                                 double b)
{
    SR_FN(pointwise_fwd)(work, gx, x, n, op, a, b);
    #pragma omp parallel for simd schedule(static) if (n > ACT_OMP_MIN)
    for (int64_t i = 0; i < n; i++)
        gx[i] *= gy[i];
}

/* Softmax along a dim with `inner` elements after it: rows of L at
 * stride inner (outer · inner of them); the sums in double. */
/* The largest of a row of L at stride inner: both softmaxes shift by it. */
static inline real SR_FN(strided_max)(const real *xr, int64_t L, int64_t inner)
{
    real mx = xr[0];
    for (int64_t l = 1; l < L; l++)
        mx = xr[l * inner] > mx ? xr[l * inner] : mx;
    return mx;
}

static void SR_FN(softmax_fwd_strided)(real *y, const real *x, int64_t outer, int64_t L, int64_t inner)
{
    #pragma omp parallel for schedule(static) if (outer * L * inner > ACT_OMP_MIN / 4)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const real *xr = x + o * L * inner + i;
            real *yr = y + o * L * inner + i;
            real mx = SR_FN(strided_max)(xr, L, inner);
            double sum = 0;
            for (int64_t l = 0; l < L; l++) {
                yr[l * inner] = SR_FN(act_exp)(xr[l * inner] - mx);
                sum += yr[l * inner];
            }
            real inv = (real)(1 / sum);
            for (int64_t l = 0; l < L; l++)
                yr[l * inner] *= inv;
        }
}

/* softmax_tangents along a strided dim: block o of u (outer blocks of
 * L · inner) uses the softmax block (o / R / k)·R + o mod R. */
static void SR_FN(softmax_tangents_strided)(real *out, const real *u, const real *s, int64_t outer, int64_t R,
                                            int64_t k, int64_t L, int64_t inner)
{
    #pragma omp parallel for schedule(static) if (outer * L * inner > ACT_OMP_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const real *sr = s + ((o / R) / k * R + o % R) * L * inner + i, *ur = u + o * L * inner + i;
            real *yr = out + o * L * inner + i;
            double dot = 0;
            for (int64_t l = 0; l < L; l++)
                dot += (double)sr[l * inner] * ur[l * inner];
            for (int64_t l = 0; l < L; l++)
                yr[l * inner] = (real)(sr[l * inner] * (ur[l * inner] - dot));
        }
}

/* Log-softmax along a dim of L at stride inner (outer · inner rows):
 * (x − max) − log Σ e^(x − max), torch's order; the sum in double. */
static void SR_FN(log_softmax_fwd)(real *y, const real *x, int64_t outer, int64_t L, int64_t inner)
{
    #pragma omp parallel for schedule(static) if (outer * L * inner > ACT_OMP_MIN / 4)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const real *xr = x + o * L * inner + i;
            real *yr = y + o * L * inner + i;
            real mx = SR_FN(strided_max)(xr, L, inner);
            double sum = 0;
            for (int64_t l = 0; l < L; l++)
                sum += SR_FN(act_exp)(xr[l * inner] - mx);
            real lse = (real)log(sum);
            for (int64_t l = 0; l < L; l++)
                yr[l * inner] = (xr[l * inner] - mx) - lse;
        }
}

/* The log-softmax's Jacobian I − 1 sᵀ (s = e^y, y the saved output) is
 * not symmetric: the JVP is u − ⟨s, u⟩ per row, backward g − s Σ g.
 * Block o of u uses the output block (o / R / k)·R + o mod R (as
 * softmax_tangents_strided). */
static void SR_FN(log_softmax_tangents)(real *out, const real *u, const real *y, int64_t outer, int64_t R, int64_t k,
                                        int64_t L, int64_t inner, int backward)
{
    #pragma omp parallel for schedule(static) if (outer * L * inner > ACT_OMP_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const real *yr = y + ((o / R) / k * R + o % R) * L * inner + i, *ur = u + o * L * inner + i;
            real *r = out + o * L * inner + i;
            double dot = 0;
            for (int64_t l = 0; l < L; l++)
                dot += backward ? (double)ur[l * inner] : exp((double)yr[l * inner]) * ur[l * inner];
            for (int64_t l = 0; l < L; l++)
                r[l * inner] = backward ? (real)(ur[l * inner] - exp((double)yr[l * inner]) * dot)
                                        : (real)(ur[l * inner] - dot);
        }
}

#else /* generic part */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nn/layers.h"

/* Below this many elements a loop is not worth waking the OpenMP team
 * (GELU and softmax do more work per element, so they split sooner). */
#define ACT_OMP_MIN 65536
#define ACT_CHUNK 4096
/* The GELU loops: eight lanes (see the header). */
#define ACT_SIMD _Pragma("omp simd simdlen(8)")

/* The elementwise helpers below must inline into the `omp simd` loops to
 * vectorise; GCC's -O2 heuristics decline the larger ones at several call
 * sites, hence always_inline. */
#if defined(__GNUC__)
#define ACT_INLINE static inline __attribute__((always_inline))
#else
#define ACT_INLINE static inline
#endif

#define GELU_K0 0.7978845608028654   /* √(2/π) */
#define GELU_K1 0.044715
#define RSQRT2 0.7071067811865476    /* 1/√2 */
#define RSQRT2PI 0.3989422804014327  /* 1/√(2π) */

/* a·b + c, fused where the target has FMA (the build's -std=c11 turns off
 * contraction, and without hardware FMA fmaf is a slow libm call). */
#ifdef __FMA__
#define ACT_FMA(a, b, c) fmaf(a, b, c)
#else
#define ACT_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* e^x in float32 without libm, for x in [-87, 88]: x = n·ln2 + r, |r| <=
 * ln2/2 (ln2 split in a short head, so n·head is exact), e^r by Cephes'
 * expf polynomial (relative error ~1 ulp), 2^n through the exponent bits. */
ACT_INLINE float exp_core_f32(float x)
{
    /* Adding 1.5·2²³ rounds to an integer held in the low mantissa bits:
     * n as a float and, from the bits, as an integer, with no libm floorf
     * and no float-to-int conversion (both block vectorisation). */
    float t = ACT_FMA(x, 1.44269504088896341f, 12582912.0f);
    float n = t - 12582912.0f;
    float r = ACT_FMA(n, -0.693359375f, x);
    r = ACT_FMA(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = ACT_FMA(p, r, 1.3981999507e-3f);
    p = ACT_FMA(p, r, 8.3334519073e-3f);
    p = ACT_FMA(p, r, 4.1665795894e-2f);
    p = ACT_FMA(p, r, 1.6666665459e-1f);
    p = ACT_FMA(p, r, 5.0000001201e-1f);
    p = ACT_FMA(p, r * r, r + 1.0f);
    uint32_t tb, bits;
    memcpy(&tb, &t, sizeof tb);
    bits = (tb - 0x4B400000u + 127u) << 23; /* (n + 127) << 23; a NaN stays NaN through p */
    float s;
    memcpy(&s, &bits, sizeof s);
    return p * s;
}

/* min(max(x, lo), hi) as a bitwise blend of compare masks (a NaN passes
 * through).  Under GCC's default -ftrapping-math a float select that feeds
 * arithmetic becomes a branch, and the loop does not vectorise; integer
 * and/or on the bits does. */
ACT_INLINE float clamp_f32(float x, float lo, float hi)
{
    uint32_t xb, lb, hb;
    memcpy(&xb, &x, sizeof xb);
    memcpy(&lb, &lo, sizeof lb);
    memcpy(&hb, &hi, sizeof hb);
    uint32_t ml = 0u - (uint32_t)isless(x, lo), mh = 0u - (uint32_t)isgreater(x, hi);
    xb = (xb & ~ml) | (lb & ml);
    xb = (xb & ~mh) | (hb & mh);
    float r;
    memcpy(&r, &xb, sizeof r);
    return r;
}

/* Keep the bits of v where mask is all ones, else those of alt. */
ACT_INLINE float blend_f32(uint32_t mask, float v, float alt)
{
    uint32_t vb, ab;
    memcpy(&vb, &v, sizeof vb);
    memcpy(&ab, &alt, sizeof ab);
    vb = (vb & mask) | (ab & ~mask);
    memcpy(&v, &vb, sizeof v);
    return v;
}

/* e^x for any x: 0 below -87 (the true value is a denormal there, and a
 * caller such as x·φ(x) must not see 1e-38 multiplied by a huge x), +inf
 * above 88.7, NaN for NaN. */
ACT_INLINE float act_exp_f32(float x)
{
    float e = exp_core_f32(clamp_f32(x, -87.0f, 88.0f));
    e = blend_f32(0u - (uint32_t)isless(x, -87.0f), 0.0f, e);
    return blend_f32(0u - (uint32_t)isgreater(x, 88.7f), INFINITY, e);
}
ACT_INLINE double act_exp_f64(double x) { return exp(x); }

/* Beyond |x| = 12.9, Φ(−|x|) < 2.1e-38 is below float's normal range: GELU
 * is x or 0 there (and the derivative 1 or 0). */
#define GELU_XMAX 12.9f

/* gelu(x) = x·Φ(x), *d = Φ(x) + x·φ(x), from E = Φ(−|x|) = erfc(a)/2 with
 * a = |x|/√2 (Φ(x) = E below 0, 1 − E above: no cancellation in the lower
 * tail).  erfc(a) = e^{−a²}·R(a) with R(a) = P(a)/Q(a), a (4, 5) rational
 * fitted for least relative error on a in [0, 9.2] (4.7e-9; P and Q are
 * written in |x|, with the 1/2 and the 1/√2 folded in, and all their
 * coefficients positive, so Horner does not cancel).  e^{−a²} = e^{−x²/2}
 * also gives φ.  A NaN or ±inf x reaches y and d through the final
 * products with x (x·Φ: −inf·0 is NaN, as in torch). */
ACT_INLINE float gelu_erf_f32(float x, float *d)
{
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    xb &= 0x7fffffffu;
    float ax;
    memcpy(&ax, &xb, sizeof ax);
    uint32_t far = 0u - (uint32_t)isgreater(ax, GELU_XMAX);
    ax = blend_f32(far, GELU_XMAX, ax);
    float p = 3.99528863e-3f;
    p = ACT_FMA(p, ax, 3.98151278e-2f);
    p = ACT_FMA(p, ax, 1.80802912e-1f);
    p = ACT_FMA(p, ax, 4.35001880e-1f);
    p = ACT_FMA(p, ax, 0.5f);
    float q = 1.00145536e-2f;
    q = ACT_FMA(q, ax, 9.98093709e-2f);
    q = ACT_FMA(q, ax, 4.63050693e-1f);
    q = ACT_FMA(q, ax, 1.19238448f);
    q = ACT_FMA(q, ax, 1.66788864f);
    q = ACT_FMA(q, ax, 1.0f);
    float g = blend_f32(far, 0.0f, exp_core_f32(-0.5f * ax * ax)); /* e^{−x²/2} */
    float e = p / q * g;                                          /* Φ(−|x|) */
    float cdf = blend_f32(0u - (uint32_t)isless(x, 0.0f), e, 1.0f - e);
    *d = ACT_FMA(x, (float)RSQRT2PI * g, cdf);
    return x * cdf;
}
ACT_INLINE double gelu_erf_f64(double x, double *d)
{
    double cdf = 0.5 * erfc(-x * RSQRT2);
    *d = cdf + x * RSQRT2PI * exp(-0.5 * x * x);
    return x * cdf;
}

/* The tanh form with u = k0(x + k1x³), through m = e^{−2u} and
 * g = 1/(1 + m):  1 + tanh u = 2g,  1 − tanh² u = 4mg²,  so
 *     y = x·g,   y' = g + 2x·m·g²·k0(1 + 3k1x²).
 * No cancellation on either side, y = x exactly once m < ulp, and m·g² <= 1
 * cannot overflow.  Where 2u < −80 (−700 in float64) m would overflow: g is
 * 0 there.  The derivative's tail is dropped where m or g is 0 (x² may be
 * inf: no 0·inf), its true size being below e^-80·x³ there. */
ACT_INLINE float gelu_tanh_f32(float x, float *d)
{
    float x2 = x * x, a = -2 * (float)GELU_K0 * (x + (float)GELU_K1 * x2 * x); /* a = −2u */
    uint32_t neg = 0u - (uint32_t)isgreater(a, 80.0f), pos = 0u - (uint32_t)isless(a, -87.0f);
    float m = blend_f32(pos, 0.0f, exp_core_f32(clamp_f32(a, -87.0f, 80.0f)));
    float g = blend_f32(neg, 0.0f, 1.0f / (1.0f + m));
    float tail = blend_f32(neg | pos, 0.0f, 2 * x * m * g * g * (float)GELU_K0 * (1 + 3 * (float)GELU_K1 * x2));
    *d = g + tail;
    return x * g;
}
ACT_INLINE double gelu_tanh_f64(double x, double *d)
{
    double x2 = x * x, a = -2 * GELU_K0 * (x + GELU_K1 * x2 * x);
    if (isgreater(a, 700.0)) {
        *d = 0;
        return x * 0.0;
    }
    double m = exp(a), g = 1 / (1 + m);
    *d = g + (m == 0 ? 0.0 : 2 * x * m * g * g * GELU_K0 * (1 + 3 * GELU_K1 * x2));
    return x * g;
}

enum {
    PW_SIGMOID, PW_TANH, PW_HARDSIGMOID, PW_HARDSWISH, PW_LEAKY_RELU, PW_CLIP, PW_ELU, PW_SOFTPLUS, PW_ERF, PW_SQRT,
    PW_POW, PW_EXP, PW_LOG, PW_ABS, PW_NEG, PW_RECIPROCAL, PW_N
};

#define SR_GENERIC_FILE "nn/act.c"
#include "base/generic.h"

/* Primal rows of a forward (k = 0: all rows) or stacked jvp call. */
static int64_t primal_rows(const sr_tensor *x, const sr_run *run, int jvp)
{
    return jvp ? run->n : x->shape[0];
}

static int need_batch(const sr_module *m, const sr_tensor *x)
{
    if (x->ndim < 1)
        return sr_fail("%s: input %s needs a batch dimension", m->ops->kind, SR_SHAPE(x));
    return 0;
}

/* ======================= relu ============================================ */

static int relu_run(sr_module *m, const sr_tensor *xv, sr_run *run, int jvp)
{
    if (need_batch(m, xv) || sr_module_output_like(m, run, xv))
        return -1;
    int64_t n = primal_rows(xv, run, jvp), rs = sr_rowsize(xv);
    sr_relu_apply(xv->dtype, sr_data(&m->out), sr_data(xv), n * rs);
    if (jvp) {
        size_t off = (size_t)(n * rs) * sr_dtype_size(xv->dtype);
        sr_relu_tangents(xv->dtype, (char *)sr_data(&m->out) + off, (const char *)sr_data(xv) + off, sr_data(xv), n,
                         run->k, rs, run->directional, run->kinks);
    }
    /* The activation-pattern metrics (metrics.c) read the recorded input,
     * stacked in a jvp.  Backward needs only the pattern x > 0, which
     * y = max(x, 0) holds as well (also for -0 and NaN): saving y lets the
     * input, typically a BatchNorm output, go back to the pool once read. */
    if (run->record_relu)
        sr_tensor_share(&m->saved, xv);
    else if (!jvp && run->save)
        sr_tensor_share(&m->saved, &m->out);
    return 0;
}

static int relu_forward(sr_module *m, const sr_tensor *x, sr_run *run) { return relu_run(m, x, run, 0); }
static int relu_jvp(sr_module *m, const sr_tensor *xv, sr_run *run) { return relu_run(m, xv, run, 1); }

static int relu_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    const sr_tensor *x = &m->saved;
    if (!x->storage)
        return sr_fail("relu backward: forward was not run with save");
    if (sr_module_grad_input_like(m, run, x))
        return -1;
    /* one "primal" row holding everything, one tangent: gx = gy·[x > 0] */
    sr_relu_tangents(x->dtype, sr_data(&m->gin), sr_data(gy), sr_data(x), 1, 1, sr_numel(x), 0, NULL);
    return 0;
}

/* Fusion: the ReLU closes the output map of the layers before it. */
static int relu_fold(sr_module *m, sr_epilogue *e)
{
    (void)m;
    if (e->relu || e->add)
        return 0;
    e->relu = 1;
    return 1;
}

static const sr_module_ops relu_ops = {
    .kind = "relu", .forward = relu_forward, .jvp = relu_jvp, .backward = relu_backward,
    .flags = SR_MOD_RELU, .fold = relu_fold,
};

sr_module *sr_relu_create(const sr_opts *o)
{
    (void)o;
    return sr_module_new(&relu_ops, 0);
}

/* ======================= gelu ============================================ */

typedef struct {
    int tanh_form;
    sr_tensor deriv; /* jvp workspace: gelu'(x) of the primal rows */
} gelu_impl;

static int gelu_run(sr_module *m, const sr_tensor *xv, sr_run *run, int jvp)
{
    gelu_impl *g = m->impl;
    if (need_batch(m, xv) || sr_module_output_like(m, run, xv))
        return -1;
    int64_t n = primal_rows(xv, run, jvp), rs = sr_rowsize(xv);
    void *deriv = NULL;
    if (jvp) {
        if (sr_tensor_ensure(&g->deriv, xv->dtype, 1, (int64_t[]){n * rs}))
            return -1;
        deriv = sr_data(&g->deriv);
    }
    SR_DISPATCH(xv->dtype, gelu_fwd, sr_data(&m->out), deriv, sr_data(xv), n * rs, g->tanh_form);
    if (jvp) {
        size_t off = (size_t)(n * rs) * sr_dtype_size(xv->dtype);
        SR_DISPATCH(xv->dtype, diag_tangents, (void *)((char *)sr_data(&m->out) + off),
                    (const void *)((const char *)sr_data(xv) + off), deriv, n, run->k, rs);
    } else if (run->save) {
        sr_tensor_share(&m->saved, xv);
    }
    return 0;
}

static int gelu_forward(sr_module *m, const sr_tensor *x, sr_run *run) { return gelu_run(m, x, run, 0); }
static int gelu_jvp(sr_module *m, const sr_tensor *xv, sr_run *run) { return gelu_run(m, xv, run, 1); }

static int gelu_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    gelu_impl *g = m->impl;
    const sr_tensor *x = &m->saved;
    if (!x->storage)
        return sr_fail("gelu backward: forward was not run with save");
    if (sr_module_grad_input_like(m, run, x))
        return -1;
    SR_DISPATCH(x->dtype, gelu_bwd, sr_data(&m->gin), sr_data(gy), sr_data(x), sr_numel(x), g->tanh_form);
    return 0;
}

static void gelu_free(sr_module *m)
{
    gelu_impl *g = m->impl;
    sr_tensor_free(&g->deriv);
}

static void gelu_describe(const sr_module *m, char *buf, size_t n)
{
    const gelu_impl *g = m->impl;
    snprintf(buf, n, "approximate=%s", g->tanh_form ? "tanh" : "none");
}

static const sr_module_ops gelu_ops = {
    .kind = "gelu", .forward = gelu_forward, .jvp = gelu_jvp, .backward = gelu_backward,
    .free_impl = gelu_free, .describe = gelu_describe
};

sr_module *sr_gelu_create(const sr_opts *o)
{
    int tanh_form;
    if (sr_opt_choice(o, "approximate", (const char *[]){"none", "tanh", NULL}, &tanh_form))
        return NULL;
    sr_module *m = sr_module_new(&gelu_ops, sizeof(gelu_impl));
    if (m)
        ((gelu_impl *)m->impl)->tanh_form = tanh_form;
    return m;
}

/* ======================= softmax ========================================= */

typedef struct {
    int64_t dim; /* as given: -1 the last */
    int log;     /* log-softmax (ONNX's LogSoftmax, torch's log_softmax) */
} softmax_impl;

/* The softmax dim of x as (outer rows per sample R, length L, inner). */
static int softmax_layout(const sr_module *m, const sr_tensor *x, int64_t *R, int64_t *L, int64_t *inner)
{
    const softmax_impl *c = m->impl;
    int64_t d = c->dim < 0 ? c->dim + x->ndim : c->dim;
    if (x->ndim < 2)
        return sr_fail("softmax: input %s needs a batch dimension", SR_SHAPE(x));
    if (d < 1 || d >= x->ndim)
        return sr_fail("softmax: dim %lld does not fit input %s (dims 1..; dim 0 is the batch)", (long long)c->dim,
                       SR_SHAPE(x));
    *L = x->shape[d];
    if (*L < 1)
        return sr_fail("softmax: input %s has an empty dim %lld", SR_SHAPE(x), (long long)d);
    *inner = 1;
    for (int64_t j = d + 1; j < x->ndim; j++)
        *inner *= x->shape[j];
    *R = sr_rowsize(x) / (*L * *inner);
    return 0;
}

static int softmax_run(sr_module *m, const sr_tensor *xv, sr_run *run, int jvp)
{
    int64_t R, L, inner;
    if (softmax_layout(m, xv, &R, &L, &inner) || sr_module_output_like(m, run, xv))
        return -1;
    int64_t n = primal_rows(xv, run, jvp);
    if (((softmax_impl *)m->impl)->log) {
        SR_DISPATCH(xv->dtype, log_softmax_fwd, sr_data(&m->out), sr_data(xv), n * R, L, inner);
        if (jvp) {
            size_t off = (size_t)(n * R * L * inner) * sr_dtype_size(xv->dtype);
            void *yt = (char *)sr_data(&m->out) + off;
            const void *vt = (const char *)sr_data(xv) + off;
            SR_DISPATCH(xv->dtype, log_softmax_tangents, yt, vt, sr_data(&m->out), n * run->k * R, R, run->k, L,
                        inner, 0);
        } else if (run->save) {
            sr_tensor_share(&m->saved, &m->out);
        }
        return 0;
    }
    if (inner == 1)
        SR_DISPATCH(xv->dtype, softmax_fwd, sr_data(&m->out), sr_data(xv), n * R, L);
    else
        SR_DISPATCH(xv->dtype, softmax_fwd_strided, sr_data(&m->out), sr_data(xv), n * R, L, inner);
    if (jvp) {
        size_t off = (size_t)(n * R * L * inner) * sr_dtype_size(xv->dtype);
        void *yt = (char *)sr_data(&m->out) + off;
        const void *vt = (const char *)sr_data(xv) + off;
        if (inner == 1)
            SR_DISPATCH(xv->dtype, softmax_tangents, yt, vt, sr_data(&m->out), n * run->k * R, R, run->k, L);
        else
            SR_DISPATCH(xv->dtype, softmax_tangents_strided, yt, vt, sr_data(&m->out), n * run->k * R, R, run->k,
                        L, inner);
    } else if (run->save) {
        /* backward needs s = y; sharing it makes the next forward allocate
         * afresh rather than overwrite it */
        sr_tensor_share(&m->saved, &m->out);
    }
    return 0;
}

static int softmax_forward(sr_module *m, const sr_tensor *x, sr_run *run) { return softmax_run(m, x, run, 0); }
static int softmax_jvp(sr_module *m, const sr_tensor *xv, sr_run *run) { return softmax_run(m, xv, run, 1); }

static int softmax_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    const sr_tensor *s = &m->saved;
    int64_t R, L, inner;
    if (!s->storage)
        return sr_fail("softmax backward: forward was not run with save");
    if (softmax_layout(m, s, &R, &L, &inner) || sr_module_grad_input_like(m, run, s))
        return -1;
    int64_t rows = sr_numel(s) / (L * inner);
    if (((softmax_impl *)m->impl)->log)
        SR_DISPATCH(s->dtype, log_softmax_tangents, sr_data(&m->gin), sr_data(gy), sr_data(s), rows, 1, 1, L, inner,
                    1);
    else if (inner == 1)
        SR_DISPATCH(s->dtype, softmax_tangents, sr_data(&m->gin), sr_data(gy), sr_data(s), rows, 1, 1, L);
    else
        SR_DISPATCH(s->dtype, softmax_tangents_strided, sr_data(&m->gin), sr_data(gy), sr_data(s), rows, 1, 1, L,
                    inner);
    return 0;
}

static void softmax_describe(const sr_module *m, char *buf, size_t n)
{
    const softmax_impl *c = m->impl;
    snprintf(buf, n, "dim %lld%s", (long long)c->dim, c->log ? ", log" : "");
}

static const sr_module_ops softmax_ops = {
    .kind = "softmax", .forward = softmax_forward, .jvp = softmax_jvp, .backward = softmax_backward,
    .describe = softmax_describe,
};

sr_module *sr_softmax_create(const sr_opts *o)
{
    softmax_impl cfg;
    if (sr_opt_int(o, "dim", -1, &cfg.dim) || sr_opt_bool(o, "log", 0, &cfg.log))
        return NULL;
    if (cfg.dim == 0) {
        sr_fail("softmax: dim 0 is the batch (use dim >= 1 or -1)");
        return NULL;
    }
    sr_module *m = sr_module_new(&softmax_ops, sizeof cfg);
    if (m)
        *(softmax_impl *)m->impl = cfg;
    return m;
}

/* ======================= pointwise ======================================= */

typedef struct {
    int op;
    double a, b;        /* the op's constants: slope, alpha, bounds, exponent */
    sr_tensor deriv;    /* jvp workspace: f'(x) of the primal rows */
    sr_tensor left;     /* directional jvp: the slopes left of x (pointwise_kinks) */
} pw_impl;

static int pw_run(sr_module *m, const sr_tensor *xv, sr_run *run, int jvp)
{
    pw_impl *c = m->impl;
    if (need_batch(m, xv) || sr_module_output_like(m, run, xv))
        return -1;
    int64_t n = primal_rows(xv, run, jvp), rs = sr_rowsize(xv);
    int sided = jvp && run->directional;
    void *deriv = NULL;
    if (jvp) {
        int64_t len[1] = {n * rs > 0 ? n * rs : 1};
        if (sr_pool_ensure(run->pool, &c->deriv, xv->dtype, 1, len) ||
            (sided && sr_pool_ensure(run->pool, &c->left, xv->dtype, 1, len)))
            return -1;
        deriv = sr_data(&c->deriv);
    }
    SR_DISPATCH(xv->dtype, pointwise_fwd, sr_data(&m->out), deriv, sr_data(xv), n * rs, c->op, c->a, c->b);
    if (jvp) {
        size_t es = sr_dtype_size(xv->dtype), off = (size_t)(n * rs) * es;
        void *yt = (char *)sr_data(&m->out) + off;
        const void *vt = (const char *)sr_data(xv) + off;
        if (sided) {
            for (int64_t i = 0; i < n; i++) {
                int64_t ties = 0, singular = 0;
                SR_DISPATCH(xv->dtype, pointwise_kinks, (void *)((char *)deriv + (size_t)(i * rs) * es),
                            (void *)((char *)sr_data(&c->left) + (size_t)(i * rs) * es),
                            (const void *)((const char *)sr_data(xv) + (size_t)(i * rs) * es), rs, c->op, c->a, c->b,
                            &ties, &singular);
                sr_kinks_add(run->kinks ? &run->kinks[i] : NULL, ties, 0, singular);
            }
            SR_DISPATCH(xv->dtype, sided_tangents, yt, vt, deriv, sr_data(&c->left), n, run->k, rs);
            sr_pool_put(run->pool, &c->left);
        } else {
            SR_DISPATCH(xv->dtype, diag_tangents, yt, vt, deriv, n, run->k, rs);
        }
        sr_pool_put(run->pool, &c->deriv);
    } else if (run->save) {
        sr_tensor_share(&m->saved, xv);
    }
    return 0;
}

static int pw_forward(sr_module *m, const sr_tensor *x, sr_run *run) { return pw_run(m, x, run, 0); }
static int pw_jvp(sr_module *m, const sr_tensor *xv, sr_run *run) { return pw_run(m, xv, run, 1); }

static int pw_backward(sr_module *m, const sr_tensor *gy, sr_run *run)
{
    pw_impl *c = m->impl;
    const sr_tensor *x = &m->saved;
    if (!x->storage)
        return sr_fail("%s backward: forward was not run with save", m->ops->kind);
    sr_tensor work = SR_TENSOR_INIT;
    if (sr_module_grad_input_like(m, run, x) || sr_pool_ensure_like(run->pool, &work, x))
        return -1;
    SR_DISPATCH(x->dtype, pointwise_bwd, sr_data(&m->gin), sr_data(gy), sr_data(x), sr_data(&work), sr_numel(x),
                c->op, c->a, c->b);
    sr_pool_put(run->pool, &work);
    return 0;
}

static void pw_free(sr_module *m)
{
    sr_tensor_free(&((pw_impl *)m->impl)->deriv);
    sr_tensor_free(&((pw_impl *)m->impl)->left);
}

static void pw_describe(const sr_module *m, char *buf, size_t n)
{
    const pw_impl *c = m->impl;
    switch (c->op) {
    case PW_HARDSIGMOID: snprintf(buf, n, "alpha %g, beta %g", c->a, c->b); break;
    case PW_LEAKY_RELU: snprintf(buf, n, "negative_slope %g", c->a); break;
    case PW_CLIP: snprintf(buf, n, "%g .. %g", c->a, c->b); break;
    case PW_ELU: snprintf(buf, n, "alpha %g", c->a); break;
    case PW_POW: snprintf(buf, n, "exponent %g", c->a); break;
    default: *buf = 0;
    }
}

static int pw_is_affine(const sr_module *m) { return ((const pw_impl *)m->impl)->op == PW_NEG; }

#define PW_OPS(NAME)                                                                                   \
    static const sr_module_ops NAME##_ops = {                                                          \
        .kind = #NAME, .forward = pw_forward, .jvp = pw_jvp, .backward = pw_backward, .free_impl = pw_free, \
        .describe = pw_describe, .is_affine = pw_is_affine,                                            \
    };
PW_OPS(sigmoid)
PW_OPS(tanh)
PW_OPS(hardsigmoid)
PW_OPS(hardswish)
PW_OPS(leaky_relu)
PW_OPS(clip)
PW_OPS(elu)
PW_OPS(softplus)
PW_OPS(erf)
PW_OPS(sqrt)
PW_OPS(pow)
PW_OPS(exp)
PW_OPS(log)
PW_OPS(abs)
PW_OPS(neg)
PW_OPS(reciprocal)
static const sr_module_ops *const pw_ops[PW_N] = {
    &sigmoid_ops, &tanh_ops, &hardsigmoid_ops, &hardswish_ops, &leaky_relu_ops, &clip_ops, &elu_ops, &softplus_ops,
    &erf_ops, &sqrt_ops, &pow_ops, &exp_ops, &log_ops, &abs_ops, &neg_ops, &reciprocal_ops,
};

static sr_module *pw_create(int op, double a, double b)
{
    sr_module *m = sr_module_new(pw_ops[op], sizeof(pw_impl));
    if (m) {
        pw_impl *c = m->impl;
        c->op = op, c->a = a, c->b = b;
    }
    return m;
}

static int finite_opt(const sr_opts *o, const char *key, double def, double *v)
{
    if (sr_opt_num(o, key, def, v))
        return -1;
    return isnan(*v) ? sr_fail("%s: option %s must be a number, got nan", o->op, key) : 0;
}

#define PW_PLAIN(NAME, OP) \
    sr_module *sr_##NAME##_create(const sr_opts *o) { (void)o; return pw_create(OP, 0, 0); }
PW_PLAIN(sigmoid, PW_SIGMOID)
PW_PLAIN(tanh, PW_TANH)
PW_PLAIN(hardswish, PW_HARDSWISH)
PW_PLAIN(softplus, PW_SOFTPLUS)
PW_PLAIN(erf, PW_ERF)
PW_PLAIN(sqrt, PW_SQRT)
PW_PLAIN(exp, PW_EXP)
PW_PLAIN(log, PW_LOG)
PW_PLAIN(abs, PW_ABS)
PW_PLAIN(neg, PW_NEG)
PW_PLAIN(reciprocal, PW_RECIPROCAL)

sr_module *sr_hardsigmoid_create(const sr_opts *o)
{
    double a, b; /* ONNX's defaults; torch's hardsigmoid is alpha 1/6 */
    if (finite_opt(o, "alpha", 0.2, &a) || finite_opt(o, "beta", 0.5, &b))
        return NULL;
    return pw_create(PW_HARDSIGMOID, a, b);
}

sr_module *sr_leaky_relu_create(const sr_opts *o)
{
    double a;
    return finite_opt(o, "negative_slope", 0.01, &a) ? NULL : pw_create(PW_LEAKY_RELU, a, 0);
}

sr_module *sr_elu_create(const sr_opts *o)
{
    double a;
    return finite_opt(o, "alpha", 1, &a) ? NULL : pw_create(PW_ELU, a, 0);
}

sr_module *sr_clip_create(const sr_opts *o)
{
    double lo, hi;
    if (finite_opt(o, "min", -INFINITY, &lo) || finite_opt(o, "max", INFINITY, &hi))
        return NULL;
    if (lo > hi) {
        sr_fail("clip: min %g is above max %g", lo, hi);
        return NULL;
    }
    return pw_create(PW_CLIP, lo, hi);
}

sr_module *sr_pow_create(const sr_opts *o)
{
    double p;
    int r = o->get_num(o, "exponent", &p);
    if (r < 0)
        return NULL;
    if (r == 0 || !isfinite(p)) {
        sr_fail("pow: option exponent must be a finite number%s", r ? "" : " (required)");
        return NULL;
    }
    return pw_create(PW_POW, p, 0);
}

#endif
