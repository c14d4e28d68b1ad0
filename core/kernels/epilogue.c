/* epilogue.c - the per-channel affine map (+ ReLU) of epilogue.h: the one
 * implementation behind batchnorm2d's and normalize's own passes and the
 * map fused into a convolution's output pass; and the ReLU kernels (its
 * forward, its JVP / backward mask, the clipping sum of a residual), so
 * every ReLU in srgeo is the one expression relu1 below. */
#ifdef SR_REAL

/* ReLU of one value.  NaN passes (v < 0 is false), as in torch, so a
 * divergence stays visible to check_finite; -0 stays -0.  The layer, the
 * fused map and the residual's clipping sum all use this, so fused and
 * unfused passes agree bit for bit. */
static inline real SR_FN(relu1)(real v) { return v < 0 ? 0 : v; }

void SR_FN(sr_epilogue_rows)(real *dst, const real *src, int64_t rows, int64_t n, int64_t ld_dst,
                             int64_t ld_src, int64_t c0, const sr_epilogue *e, int tangent)
{
    for (int64_t r = 0; r < rows; r++) {
        real *d = dst + r * ld_dst;
        const real *s = src + r * ld_src;
        if (!e->C) {
            /* No affine part: the value itself, as the layers after see it
             * (no arithmetic: -0 stays -0). */
            if (e->add && !tangent) {
                const real *q = (const real *)sr_data(e->add) + (d - (const real *)e->base);
                #pragma omp simd
                for (int64_t p = 0; p < n; p++) {
                    real v = s[p] + q[p];
                    d[p] = e->relu ? SR_FN(relu1)(v) : v;
                }
            } else if (e->relu && !tangent) {
                #pragma omp simd
                for (int64_t p = 0; p < n; p++)
                    d[p] = SR_FN(relu1)(s[p]);
            } else if (d != s) {
                memcpy(d, s, (size_t)n * sizeof(real));
            }
            continue;
        }
        double m = e->mu[c0 + r], a = e->scale[c0 + r], t = e->shift ? e->shift[c0 + r] : 0;
        if (e->add && !tangent) {
            /* add_into's sum and clip, on the map's rounded value */
            const real *q = (const real *)sr_data(e->add) + (d - (const real *)e->base);
            #pragma omp simd
            for (int64_t p = 0; p < n; p++) {
                real v = (real)((s[p] - m) * a + t) + q[p];
                d[p] = e->relu ? SR_FN(relu1)(v) : v;
            }
        } else if (tangent) {
            #pragma omp simd
            for (int64_t p = 0; p < n; p++)
                d[p] = (real)(s[p] * a);
        } else if (e->relu) {
            /* on the rounded value, as the relu layer sees it */
            #pragma omp simd
            for (int64_t p = 0; p < n; p++)
                d[p] = SR_FN(relu1)((real)((s[p] - m) * a + t));
        } else {
            #pragma omp simd
            for (int64_t p = 0; p < n; p++)
                d[p] = (real)((s[p] - m) * a + t);
        }
    }
}

static void SR_FN(epi_apply)(real *y, const real *x, int64_t rows, int64_t primal_rows, int64_t C, int64_t P,
                             const sr_epilogue *e)
{
    #pragma omp parallel for collapse(2) schedule(static) if (rows * C * P > EPI_OMP_MIN)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t c = 0; c < C; c++)
            SR_FN(sr_epilogue_rows)(y + (i * C + c) * P, x + (i * C + c) * P, 1, P, P, P, c, e, i >= primal_rows);
}

/* y = relu(x) over n elements. */
static void SR_FN(relu_fwd)(real *y, const real *x, int64_t n)
{
    #pragma omp parallel for schedule(static) if (n > RELU_OMP_MIN)
    for (int64_t c = 0; c < n; c += RELU_CHUNK) {
        int64_t e1 = c + RELU_CHUNK < n ? c + RELU_CHUNK : n;
        #pragma omp simd
        for (int64_t e = c; e < e1; e++)
            y[e] = SR_FN(relu1)(x[e]);
    }
}

/* Tangent rows: y_t = v_t where the primal row's x > 0, else 0, or with
 * directional max(v_t, 0) where x is 0 (kernels/kink.h).  Also the
 * backward (gx = gy·[x > 0]) with n = k = 1 and the gradient as tangent.
 * Walked in chunks of RELU_CHUNK elements so that a single image with many
 * tangents still spreads over the threads. */
static void SR_FN(relu_tangents)(real *yt, const real *vt, const real *x, int64_t n, int64_t k, int64_t rs,
                                 int directional, sr_kinks *kinks)
{
    int64_t nc = (rs + RELU_CHUNK - 1) / RELU_CHUNK;
    #pragma omp parallel for schedule(static) if (n * k * rs > RELU_OMP_MIN)
    for (int64_t bk = 0; bk < n * k * nc; bk++) {
        int64_t t = bk / nc, e0 = (bk % nc) * RELU_CHUNK, e1 = e0 + RELU_CHUNK < rs ? e0 + RELU_CHUNK : rs;
        const real *xr = x + (t / k) * rs, *vr = vt + t * rs;
        real *yr = yt + t * rs;
        if (directional) {
            /* at the kink, the side the tangent moves into: max(0, t) */
            #pragma omp simd
            for (int64_t e = e0; e < e1; e++)
                yr[e] = xr[e] > 0 || (xr[e] == 0 && vr[e] > 0) ? vr[e] : 0;
        } else {
            #pragma omp simd
            for (int64_t e = e0; e < e1; e++)
                yr[e] = xr[e] > 0 ? vr[e] : 0;
        }
    }
    if (directional && kinks)
        for (int64_t i = 0; i < n; i++) {
            int64_t z = 0;
            const real *xr = x + i * rs;
            #pragma omp simd reduction(+ : z)
            for (int64_t e = 0; e < rs; e++)
                z += xr[e] == 0;
            kinks[i].ties += z;
        }
}

static void SR_FN(add_relu)(real *o, const real *p, const real *q, int64_t n, int relu)
{
    #pragma omp parallel for simd schedule(static) if (n > RELU_OMP_MIN)
    for (int64_t i = 0; i < n; i++) {
        real v = p[i] + q[i];
        o[i] = relu ? SR_FN(relu1)(v) : v;
    }
}

#else
#include <string.h>

#include "kernels/epilogue.h"

/* Below this many elements a pass is not worth waking the threads. */
#define EPI_OMP_MIN 32768
#define RELU_OMP_MIN 65536
#define RELU_CHUNK 4096

#define SR_GENERIC_FILE "kernels/epilogue.c"
#include "base/generic.h"

void sr_epilogue_apply(sr_dtype dt, void *y, const void *x, int64_t rows, int64_t primal_rows, int64_t C,
                       int64_t P, const sr_epilogue *e)
{
    SR_DISPATCH(dt, epi_apply, y, x, rows, primal_rows, C, P, e);
}

void sr_epilogue_jvp_mask(sr_dtype dt, void *y, int64_t n, int64_t k, int64_t rs, const sr_epilogue *e)
{
    if (!e->relu)
        return;
    void *yt = (char *)y + (size_t)(n * rs) * sr_dtype_size(dt);
    sr_relu_tangents(dt, yt, yt, y, n, k, rs, e->directional, e->kinks);
    sr_relu_apply(dt, y, y, n * rs);
}

void sr_relu_apply(sr_dtype dt, void *y, const void *x, int64_t n) { SR_DISPATCH(dt, relu_fwd, y, x, n); }

void sr_relu_tangents(sr_dtype dt, void *yt, const void *vt, const void *x, int64_t n, int64_t k, int64_t rs,
                      int directional, sr_kinks *kinks)
{
    SR_DISPATCH(dt, relu_tangents, yt, vt, x, n, k, rs, directional, kinks);
}

void sr_add_relu(sr_dtype dt, void *out, const void *a, const void *b, int64_t n, int relu)
{
    SR_DISPATCH(dt, add_relu, out, a, b, n, relu);
}

#endif
