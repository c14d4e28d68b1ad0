/* directions.c - the direction set of the r_η engine (see directions.h). */
#include "stats/directions.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "kernels/blur.h"

static uint64_t mix(uint64_t seed, uint64_t i)
{
    uint64_t z = seed ^ (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int sr_dirs_init(sr_dir_set *s, const sr_tensor *like)
{
    int64_t d = sr_numel(like);
    s->like = like;
    s->cached_block = -1;
    s->ncols = 0;
    s->q = s->h = NULL;
    if (s->family == SR_DIRS_USER) {
        const sr_tensor *u = s->user;
        if (!u || u->ndim < 1 || u->shape[0] < s->first + s->ndirs || sr_rowsize(u) != d)
            return sr_fail("profile: user directions %s must hold %lld rows of %lld values",
                           u ? SR_SHAPE(u) : "(none)", (long long)(s->first + s->ndirs), (long long)d);
        if (s->block > 1)
            return sr_fail("profile: orthogonal blocks apply to random directions, not user directions");
    }
    if (s->block > 1) {
        if (s->block > d)
            return sr_fail("profile: orthogonal blocks of %lld directions exceed the input's %lld dimensions %s",
                           (long long)s->block, (long long)d, SR_SHAPE(like));
        s->q = malloc((size_t)(s->block * d) * sizeof *s->q);
        s->h = malloc((size_t)s->block * sizeof *s->h);
        if (!s->q || !s->h)
            return sr_fail("profile: out of memory for an orthogonal block of %lld x %lld", (long long)s->block,
                           (long long)d);
    }
    return 0;
}

void sr_dirs_free(sr_dir_set *s)
{
    free(s->q);
    free(s->h);
    s->q = s->h = NULL;
    s->cached_block = -1;
    s->ncols = 0;
}

/* The raw draw of global base direction b (not normalised). */
static int raw_draw(const sr_dir_set *s, int64_t b, double *out)
{
    int64_t d = sr_numel(s->like);
    if (s->family == SR_DIRS_USER) {
        for (int64_t e = 0; e < d; e++)
            out[e] = sr_get_flat(s->user, b * d + e);
        return 0;
    }
    sr_rng r;
    sr_rng_seed(&r, mix(s->seed, (uint64_t)b));
    for (int64_t e = 0; e < d; e++)
        out[e] = sr_rng_normal(&r);
    if (s->family == SR_DIRS_LOWPASS && s->lowpass_sigma > 0) {
        /* Blur the noise image over its spatial dims (the same kernel as
         * the blurred evaluation sets); normalised by the caller. */
        sr_tensor t = SR_TENSOR_INIT;
        if (sr_tensor_alloc(&t, SR_F64, s->like->ndim, s->like->shape))
            return -1;
        memcpy(sr_data(&t), out, (size_t)d * sizeof *out);
        int rc = sr_blur(&t, &t, s->lowpass_sigma, 0);
        if (rc == 0)
            memcpy(out, sr_data(&t), (size_t)d * sizeof *out);
        sr_tensor_free(&t);
        if (rc)
            return sr_fail_context("profile: lowpass directions");
    }
    return 0;
}

static double norm_of(const double *v, int64_t d)
{
    double n = 0;
    for (int64_t e = 0; e < d; e++)
        n += v[e] * v[e];
    return sqrt(n);
}

/* Column c of block B into s->q (columns 0..c−1 present, rows of d): the
 * draw minus its projection on the earlier columns, twice (classical
 * Gram-Schmidt: one pass leaves errors of order the block's condition
 * number times rounding, the second brings them to rounding), normalised. */
static int block_column(sr_dir_set *s, int64_t B, int64_t c)
{
    int64_t d = sr_numel(s->like);
    double *v = s->q + c * d;
    if (raw_draw(s, B * s->block + c, v))
        return -1;
    double n0 = norm_of(v, d);
    /* single-threaded loops the compiler vectorises (simd reductions): a
     * threaded BLAS call on a block this small only waits for its workers */
    for (int pass = 0; pass < 2 && c > 0; pass++) {
        for (int64_t j = 0; j < c; j++) {
            const double *qj = s->q + j * d;
            double t = 0;
#pragma omp simd reduction(+ : t)
            for (int64_t e = 0; e < d; e++)
                t += qj[e] * v[e];
            s->h[j] = t;
        }
        for (int64_t j = 0; j < c; j++) {
            const double *qj = s->q + j * d;
            double t = s->h[j];
#pragma omp simd
            for (int64_t e = 0; e < d; e++)
                v[e] -= t * qj[e];
        }
    }
    double n = norm_of(v, d);
    if (!(n > 1e-8 * n0) || !isfinite(n))
        return sr_fail("profile: direction %lld is degenerate in its orthogonal block (norm %g of %g)",
                       (long long)(B * s->block + c), n, n0);
    for (int64_t e = 0; e < d; e++)
        v[e] /= n;
    return 0;
}

int sr_dirs_get(sr_dir_set *s, int64_t i, double *out)
{
    int64_t d = sr_numel(s->like), total = s->ndirs * (s->antipodal ? 2 : 1);
    if (i < 0 || i >= total)
        return sr_fail("profile: direction %lld out of range (set has %lld)", (long long)i, (long long)total);
    int64_t b = s->first + i % s->ndirs;
    double sign = (s->antipodal && i >= s->ndirs) ? -1.0 : 1.0;
    if (s->block > 1) {
        int64_t B = b / s->block, c = b % s->block;
        if (B != s->cached_block) {
            s->cached_block = B;
            s->ncols = 0;
        }
        for (; s->ncols <= c; s->ncols++)
            if (block_column(s, B, s->ncols)) {
                s->cached_block = -1;
                s->ncols = 0;
                return -1;
            }
        const double *q = s->q + c * d;
        for (int64_t e = 0; e < d; e++)
            out[e] = sign * q[e];
        return 0;
    }
    if (raw_draw(s, b, out))
        return -1;
    double nrm = norm_of(out, d);
    if (!(nrm > 0) || !isfinite(nrm))
        return sr_fail("profile: direction %lld has norm %g (cannot normalise)", (long long)b, nrm);
    for (int64_t e = 0; e < d; e++)
        out[e] *= sign / nrm;
    return 0;
}
