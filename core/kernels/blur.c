/* blur.c - the Gaussian blur of blur.h: a separable pass over (H, W)
 * planes, reflect padding, sums in double. */
#ifdef SR_REAL

/* One separable blur of `planes` (H, W) planes: rows into a double scratch
 * plane, then columns into y.  ih/iw map padded positions -r..n+r-1 to
 * reflected source indices, so the inner loops carry no branches. */
static void SR_FN(blur_planes)(real *y, const real *x, int64_t planes, int64_t H, int64_t W,
                               const double *k, int r, const int64_t *ih, const int64_t *iw,
                               double *scratch_all, int nt)
{
#pragma omp parallel for schedule(static) num_threads(nt) if (planes > 1 && H * W > 4096)
    for (int64_t p = 0; p < planes; p++) {
        double *tmp = scratch_all + (size_t)sr_omp_thread() * (size_t)(H * W);
        const real *xp = x + p * H * W;
        real *yp = y + p * H * W;
        for (int64_t i = 0; i < H; i++) {
            const real *row = xp + i * W;
            for (int64_t j = 0; j < W; j++) {
                double s = 0;
                for (int t = -r; t <= r; t++)
                    s += k[t + r] * row[iw[j + t + r]];
                tmp[i * W + j] = s;
            }
        }
        for (int64_t i = 0; i < H; i++)
            for (int64_t j = 0; j < W; j++) {
                double s = 0;
                for (int t = -r; t <= r; t++)
                    s += k[t + r] * tmp[ih[i + t + r] * W + j];
                yp[i * W + j] = (real)s;
            }
    }
}

#else

#include "kernels/blur.h"
#include "tensor/tensor_ops.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "base/threads.h"

static inline int sr_omp_thread(void) { return omp_get_thread_num(); }

#define SR_GENERIC_FILE "kernels/blur.c"
#include "base/generic.h"

int sr_blur_ksize(double sigma) { return 2 * (int)ceil(3 * sigma) + 1; }

int sr_blur_kernel(double *k, int ksize, double sigma)
{
    if (ksize < 1 || ksize % 2 == 0)
        return sr_fail("image.blur: kernel size %d must be odd and positive", ksize);
    if (!(sigma > 0))
        return sr_fail("image.blur: sigma %g must be positive", sigma);
    int r = ksize / 2;
    double s = 0;
    for (int i = -r; i <= r; i++) {
        k[i + r] = exp(-0.5 * (i / sigma) * (i / sigma));
        s += k[i + r];
    }
    for (int i = 0; i < ksize; i++)
        k[i] /= s;
    return 0;
}

/* torch's "reflect" extended periodically: ... 2 1 | 0 1 2 .. n-1 | n-2 ... */
static int64_t reflect(int64_t j, int64_t n)
{
    if (n == 1)
        return 0;
    int64_t p = 2 * (n - 1);
    j %= p;
    if (j < 0)
        j += p;
    return j >= n ? p - j : j;
}

int sr_blur(sr_tensor *out, const sr_tensor *t, double sigma, int ksize)
{
    if (t->ndim < 2 || !t->storage)
        return sr_fail("image.blur: input %s must have at least 2 dims (..., H, W)", SR_SHAPE(t));
    if (!(sigma >= 0) || sigma > 1e4)
        return sr_fail("image.blur: sigma %g must be in [0, 1e4]", sigma);
    if (sigma == 0 && ksize <= 1) {
        if (out == t)
            return 0;
        return sr_tensor_copy(out, t);
    }
    if (ksize == 0)
        ksize = sr_blur_ksize(sigma);
    if (ksize > 100001)
        return sr_fail("image.blur: kernel size %d too large", ksize);
    int64_t H = t->shape[t->ndim - 2], W = t->shape[t->ndim - 1];
    int64_t planes = (H > 0 && W > 0) ? sr_numel(t) / (H * W) : 0;
    int r = ksize / 2;
    double *k = malloc(sizeof *k * (size_t)ksize);
    int64_t *ih = malloc(sizeof *ih * (size_t)(H + 2 * r));
    int64_t *iw = malloc(sizeof *iw * (size_t)(W + 2 * r));
    int nt = sr_threads_get();
    double *scratch = malloc(sizeof *scratch * (size_t)(H * W) * (size_t)nt + 1);
    sr_tensor res = SR_TENSOR_INIT;
    int rc = -1;
    if (!k || !ih || !iw || !scratch) {
        sr_fail("image.blur: out of memory");
        goto done;
    }
    if (sr_blur_kernel(k, ksize, sigma))
        goto done;
    for (int64_t j = -r; j < H + r; j++)
        ih[j + r] = reflect(j, H);
    for (int64_t j = -r; j < W + r; j++)
        iw[j + r] = reflect(j, W);
    if (sr_tensor_alloc(&res, t->dtype, t->ndim, t->shape)) {
        sr_fail_context("image.blur");
        goto done;
    }
    SR_DISPATCH(t->dtype, blur_planes, sr_data(&res), sr_data(t), planes, H, W, k, r, ih, iw,
                scratch, nt);
    sr_tensor_free(out);
    *out = res;
    res = (sr_tensor)SR_TENSOR_INIT;
    rc = 0;
done:
    sr_tensor_free(&res);
    free(k);
    free(ih);
    free(iw);
    free(scratch);
    return rc;
}

#endif
