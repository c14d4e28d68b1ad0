/* augment.c - reproducible shuffles, crop + flip batches, input noise,
 * noise images for the trainer (see augment.h). */
#ifdef SR_REAL

/* One output row: crop offset (oy, ox) into the zero-padded image, mirror
 * when flip.  (C, H, W) -> (C, H, W). */
static void SR_FN(crop_flip_row)(real *dst, const real *src, int64_t c, int64_t h, int64_t w, int64_t oy,
                                 int64_t ox, int flip)
{
    for (int64_t ch = 0; ch < c; ch++) {
        const real *s = src + ch * h * w;
        real *d = dst + ch * h * w;
        for (int64_t y = 0; y < h; y++) {
            int64_t sy = y + oy;
            real *drow = d + y * w;
            if (sy < 0 || sy >= h) {
                for (int64_t x = 0; x < w; x++)
                    drow[x] = 0;
                continue;
            }
            const real *srow = s + sy * w;
            for (int64_t x = 0; x < w; x++) {
                int64_t sx = (flip ? w - 1 - x : x) + ox;
                drow[x] = (sx >= 0 && sx < w) ? srow[sx] : 0;
            }
        }
    }
}

static void SR_FN(augment_rows)(real *out, const real *src, const int64_t *idx, int64_t n, int64_t c,
                                int64_t h, int64_t w, int pad, int flip, uint64_t seed)
{
    int64_t row = c * h * w;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; r++) {
        const real *s = src + idx[r] * row;
        real *d = out + r * row;
        if (pad == 0 && !flip) {
            memcpy(d, s, (size_t)row * sizeof(real));
            continue;
        }
        sr_rng g;
        sr_rng_seed(&g, sr_seed_mix(seed, 0, (uint64_t)r));
        /* torchvision order: crop (top, left drawn in [0, 2 pad]) then flip. */
        int64_t oy = 0, ox = 0;
        if (pad > 0) {
            oy = (int64_t)sr_rng_below(&g, (uint64_t)(2 * pad + 1)) - pad;
            ox = (int64_t)sr_rng_below(&g, (uint64_t)(2 * pad + 1)) - pad;
        }
        /* out(y, x) = crop(y, fl ? w-1-x : x), crop(y, x) = src(y+oy, x+ox). */
        int fl = flip && (sr_rng_u64(&g) >> 63);
        SR_FN(crop_flip_row)(d, s, c, h, w, oy, ox, fl);
    }
}

static void SR_FN(add_gaussian_rows)(real *x, int64_t n, int64_t row, double sigma, uint64_t seed)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; r++) {
        sr_rng g;
        sr_rng_seed(&g, sr_seed_mix(seed, 1, (uint64_t)r));
        real *p = x + r * row;
        for (int64_t i = 0; i < row; i++)
            p[i] = (real)(p[i] + sigma * sr_rng_normal(&g));
    }
}

static void SR_FN(uniform_rows)(real *x, int64_t n, int64_t row, uint64_t seed, int64_t first)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; r++) {
        sr_rng g;
        sr_rng_seed(&g, sr_seed_mix(seed, 2, (uint64_t)(first + r)));
        real *p = x + r * row;
        for (int64_t i = 0; i < row; i++)
            p[i] = (real)sr_rng_uniform(&g);
    }
}

#else /* generic part */

#include "data/augment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

#define SR_GENERIC_FILE "data/augment.c"
#include "base/generic.h"

static uint64_t fmix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t sr_seed_mix(uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t h = fmix(seed + 0x9e3779b97f4a7c15ull);
    h = fmix(h ^ (a + 0x632be59bd9b4e019ull));
    return fmix(h ^ (b + 0x85157af5ull * 0x9e3779b97f4a7c15ull));
}

int sr_permutation(int64_t *out, int64_t n, uint64_t seed)
{
    if (n < 0)
        return sr_fail("permutation: negative length %lld", (long long)n);
    sr_rng g;
    sr_rng_seed(&g, seed);
    for (int64_t i = 0; i < n; i++)
        out[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)sr_rng_below(&g, (uint64_t)i + 1);
        int64_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
    return 0;
}

int sr_augment_batch(sr_tensor *out, const sr_tensor *src, const int64_t *idx, int64_t n, int pad,
                     int flip, uint64_t seed)
{
    if (src->ndim != 4)
        return sr_fail("augment: images %s must be (N,C,H,W)", SR_SHAPE(src));
    if (pad < 0 || (pad > 0 && (pad > src->shape[2] || pad > src->shape[3])))
        return sr_fail("augment: crop padding %d must be in 0..min(H, W) for images %s", pad, SR_SHAPE(src));
    if (n < 1)
        return sr_fail("augment: empty batch");
    for (int64_t r = 0; r < n; r++)
        if (idx[r] < 0 || idx[r] >= src->shape[0])
            return sr_fail("augment: index %lld (row %lld of the batch) is outside the %lld images",
                           (long long)idx[r], (long long)r, (long long)src->shape[0]);
    if (out->storage && out->storage == src->storage)
        return sr_fail("augment: output shares storage with the source images");
    int64_t shape[4] = {n, src->shape[1], src->shape[2], src->shape[3]};
    if (sr_tensor_ensure(out, src->dtype, 4, shape))
        return -1;
    SR_DISPATCH(src->dtype, augment_rows, sr_data(out), sr_data(src), idx, n, shape[1], shape[2], shape[3], pad,
                flip, seed);
    return 0;
}

int sr_add_gaussian(sr_tensor *x, double sigma, uint64_t seed)
{
    if (!x->storage || x->ndim < 1)
        return sr_fail("gaussian noise: input %s needs a batch dimension", SR_SHAPE(x));
    if (!(sigma >= 0) || !isfinite(sigma))
        return sr_fail("gaussian noise: sigma %g must be finite and >= 0", sigma);
    SR_DISPATCH(x->dtype, add_gaussian_rows, sr_data(x), x->shape[0], sr_rowsize(x), sigma, seed);
    return 0;
}

int sr_fill_uniform_rows(sr_tensor *x, uint64_t seed, int64_t first)
{
    if (!x->storage || x->ndim < 1)
        return sr_fail("noise images: tensor %s needs a batch dimension", SR_SHAPE(x));
    SR_DISPATCH(x->dtype, uniform_rows, sr_data(x), x->shape[0], sr_rowsize(x), seed, first);
    return 0;
}

#endif
