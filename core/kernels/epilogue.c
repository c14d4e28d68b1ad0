/* epilogue.c - the per-channel affine map (+ ReLU) of epilogue.h: the one
 * implementation behind batchnorm2d's and normalize's own passes and the
 * map fused into a convolution's output pass. */
#ifdef SR_REAL

void SR_FN(sr_epilogue_rows)(real *dst, const real *src, int64_t rows, int64_t n, int64_t ld_dst,
                             int64_t ld_src, int64_t c0, const sr_epilogue *e, int tangent)
{
    for (int64_t r = 0; r < rows; r++) {
        real *d = dst + r * ld_dst;
        const real *s = src + r * ld_src;
        double m = e->mu[c0 + r], a = e->scale[c0 + r], t = e->shift ? e->shift[c0 + r] : 0;
        if (e->add && !tangent) {
            /* add_into's sum and clip, on the map's rounded value */
            const real *q = (const real *)sr_data(e->add) + (d - (const real *)e->base);
            #pragma omp simd
            for (int64_t p = 0; p < n; p++) {
                real v = (real)((s[p] - m) * a + t) + q[p];
                d[p] = e->relu && v < 0 ? 0 : v;
            }
        } else if (tangent) {
            #pragma omp simd
            for (int64_t p = 0; p < n; p++)
                d[p] = (real)(s[p] * a);
        } else if (e->relu) {
            /* relu's own test on the rounded value: NaN passes. */
            #pragma omp simd
            for (int64_t p = 0; p < n; p++) {
                real v = (real)((s[p] - m) * a + t);
                d[p] = v < 0 ? 0 : v;
            }
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

#else
#include "kernels/epilogue.h"
#include "nn/layers.h"
#include "tensor/tensor_ops.h"

/* Below this many elements the pass is not worth waking the threads. */
#define EPI_OMP_MIN 32768

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
    sr_relu_tangents(dt, yt, yt, y, n, k, rs);
}

#endif
