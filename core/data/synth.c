/* synth.c - seeded synthetic image distributions, index draws, FFT. */
#include "data/synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/threads.h"
#include "data/augment.h"

/* ---- seeds ------------------------------------------------------------ */

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Item i's stream: a hash of (seed, i, purpose), so streams of neighbouring
 * items or seeds share nothing. */
static uint64_t item_seed(uint64_t seed, int64_t i, uint64_t purpose)
{
    return mix64(mix64(seed ^ purpose) ^ mix64((uint64_t)i));
}

int64_t sr_synth_label(uint64_t seed, int64_t i, int64_t classes)
{
    sr_rng r;
    sr_rng_seed(&r, item_seed(seed, i, 0x6c6162656cull /* "label" */));
    return classes > 0 ? (int64_t)sr_rng_below(&r, (uint64_t)classes) : 0;
}

int sr_sample_indices(int64_t *out, int64_t n, int64_t k, uint64_t seed)
{
    if (n < 0 || k < 0 || k > n)
        return sr_fail("permutation: cannot draw %lld of %lld without replacement", (long long)k,
                       (long long)n);
    int64_t *a = malloc(sizeof *a * (size_t)(n ? n : 1));
    if (!a)
        return sr_fail("permutation: out of memory for %lld indices", (long long)n);
    for (int64_t i = 0; i < n; i++)
        a[i] = i;
    sr_rng r;
    sr_rng_seed(&r, seed);
    for (int64_t i = 0; i < k; i++) {
        int64_t j = i + (int64_t)sr_rng_below(&r, (uint64_t)(n - i));
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
        out[i] = a[i];
    }
    free(a);
    return 0;
}

/* ---- FFT: recursive mixed radix (decimation in time) ------------------ */

static int smallest_factor(int n)
{
    for (int p = 2; (int64_t)p * p <= n; p++)
        if (n % p == 0)
            return p;
    return n;
}

/* out[0..n) = DFT of in[0], in[stride], ...; tw holds the N-th roots of
 * unity of the top-level size N, and this level's roots are every
 * tws-th one.  X[k + q·m] = Σ_r w_n^{r(k+qm)} Y_r[k], Y_r the m-point DFT of
 * the r-th decimated sequence (m = n/p). */
static void fft_rec(double complex *out, const double complex *in, int n, int64_t stride,
                    const double complex *tw, int64_t N, int64_t tws, double complex *t)
{
    if (n == 1) {
        out[0] = in[0];
        return;
    }
    int p = smallest_factor(n), m = n / p;
    for (int r = 0; r < p; r++)
        fft_rec(out + (int64_t)r * m, in + r * stride, m, stride * p, tw, N, tws * p, t);
    for (int k = 0; k < m; k++) {
        for (int r = 0; r < p; r++)
            t[r] = out[(int64_t)r * m + k] * tw[((int64_t)r * k * tws) % N];
        for (int q = 0; q < p; q++) {
            double complex s = 0;
            for (int r = 0; r < p; r++)
                s += t[r] * tw[((int64_t)r * q % p) * m * tws % N];
            out[(int64_t)q * m + k] = s;
        }
    }
}

int sr_fft(double complex *x, int n, int inverse)
{
    if (n < 1)
        return sr_fail("fft: length %d must be positive", n);
    double complex *tw = malloc(sizeof *tw * (size_t)n), *in = malloc(sizeof *in * (size_t)n),
                   *t = malloc(sizeof *t * (size_t)n);
    if (!tw || !in || !t) {
        free(tw), free(in), free(t);
        return sr_fail("fft: out of memory (n = %d)", n);
    }
    double sgn = inverse ? 1 : -1;
    for (int j = 0; j < n; j++)
        tw[j] = cexp(sgn * 2 * M_PI * I * j / n);
    memcpy(in, x, sizeof *in * (size_t)n);
    fft_rec(x, in, n, 1, tw, n, 1, t);
    free(tw), free(in), free(t);
    return 0;
}

int sr_fft2(double complex *x, int h, int w, int inverse)
{
    if (h < 1 || w < 1)
        return sr_fail("fft2: size %dx%d must be positive", h, w);
    for (int i = 0; i < h; i++)
        if (sr_fft(x + (int64_t)i * w, w, inverse))
            return -1;
    double complex *col = malloc(sizeof *col * (size_t)h);
    if (!col)
        return sr_fail("fft2: out of memory");
    for (int j = 0; j < w; j++) {
        for (int i = 0; i < h; i++)
            col[i] = x[(int64_t)i * w + j];
        if (sr_fft(col, h, inverse)) {
            free(col);
            return -1;
        }
        for (int i = 0; i < h; i++)
            x[(int64_t)i * w + j] = col[i];
    }
    free(col);
    return 0;
}

/* ---- the distributions ------------------------------------------------ */

int sr_synth_kind_parse(const char *name, sr_synth_kind *kind)
{
    static const char *names[] = {"uniform", "gaussian", "pink", "dead_leaves"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0) {
            *kind = (sr_synth_kind)i;
            return 0;
        }
    return sr_fail("synth: unknown kind '%s' (uniform, gaussian, pink, dead_leaves)", name);
}

const char *sr_synth_kind_name(sr_synth_kind k)
{
    static const char *names[] = {"uniform", "gaussian", "pink", "dead_leaves"};
    return (unsigned)k < 4 ? names[k] : "?";
}

/* Spectrum with amplitude f^-alpha (f in cycles per pixel, DC zero) and
 * random complex Gaussian coefficients; the real part of its inverse DFT
 * is a real field whose spectrum is the Hermitian part, still ∝ f^-alpha. */
static int pink_item(double *y, int64_t c, int64_t h, int64_t w, double alpha, sr_rng *r)
{
    double complex *z = malloc(sizeof *z * (size_t)(h * w));
    if (!z)
        return -1;
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t ch = 0; ch < c; ch++) {
        for (int64_t i = 0; i < h; i++) {
            double fy = (double)(i <= h / 2 ? i : i - h) / (double)h;
            for (int64_t j = 0; j < w; j++) {
                double fx = (double)(j <= w / 2 ? j : j - w) / (double)w;
                double f = sqrt(fx * fx + fy * fy);
                double a = f > 0 ? pow(f, -alpha) : 0;
                double re = sr_rng_normal(r), im = sr_rng_normal(r);
                z[i * w + j] = a * (re + I * im);
            }
        }
        if (sr_fft2(z, (int)h, (int)w, 1)) {
            free(z);
            return -1;
        }
        for (int64_t k = 0; k < h * w; k++) {
            double v = creal(z[k]);
            y[ch * h * w + k] = v;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    free(z);
    double s = hi > lo ? 1 / (hi - lo) : 0;
    for (int64_t k = 0; k < c * h * w; k++)
        y[k] = (y[k] - lo) * s;
    return 0;
}

/* Dead leaves, front to back: each new disc paints only pixels no earlier
 * (nearer) disc covered, until every pixel is covered.  Centres are uniform
 * over the image grown by rmax, so borders see the same statistics as the
 * middle; radii r = inverse-CDF draws from density ∝ r^-alpha. */
static int dead_leaves_item(double *y, int64_t c, int64_t h, int64_t w, double alpha, double rmin,
                            double rmax, sr_rng *r)
{
    unsigned char *cov = calloc((size_t)(h * w), 1);
    if (!cov)
        return -1;
    int64_t left = h * w;
    double e = 1 - alpha;
    double a0 = fabs(e) < 1e-12 ? log(rmin) : pow(rmin, e);
    double a1 = fabs(e) < 1e-12 ? log(rmax) : pow(rmax, e);
    double colour[16];
    for (int64_t disc = 0; left > 0 && disc < 2000000; disc++) {
        double u = sr_rng_uniform(r);
        double rad = fabs(e) < 1e-12 ? exp(a0 + u * (a1 - a0)) : pow(a0 + u * (a1 - a0), 1 / e);
        double cx = -rmax + sr_rng_uniform(r) * ((double)w + 2 * rmax);
        double cy = -rmax + sr_rng_uniform(r) * ((double)h + 2 * rmax);
        for (int64_t ch = 0; ch < c && ch < 16; ch++)
            colour[ch] = sr_rng_uniform(r);
        int64_t x0 = (int64_t)floor(cx - rad), x1 = (int64_t)ceil(cx + rad);
        int64_t y0 = (int64_t)floor(cy - rad), y1 = (int64_t)ceil(cy + rad);
        x0 = x0 < 0 ? 0 : x0, y0 = y0 < 0 ? 0 : y0;
        x1 = x1 > w - 1 ? w - 1 : x1, y1 = y1 > h - 1 ? h - 1 : y1;
        double r2 = rad * rad;
        for (int64_t i = y0; i <= y1; i++)
            for (int64_t j = x0; j <= x1; j++) {
                double dx = (double)j + 0.5 - cx, dy = (double)i + 0.5 - cy;
                if (cov[i * w + j] || dx * dx + dy * dy > r2)
                    continue;
                cov[i * w + j] = 1;
                left--;
                for (int64_t ch = 0; ch < c; ch++)
                    y[ch * h * w + i * w + j] = colour[ch < 16 ? ch : 15];
            }
    }
    /* Only reachable with absurd parameters: fill the rest mid-grey. */
    for (int64_t k = 0; left > 0 && k < h * w; k++)
        if (!cov[k])
            for (int64_t ch = 0; ch < c; ch++)
                y[ch * h * w + k] = 0.5;
    free(cov);
    return 0;
}

int sr_synth_items(sr_tensor *out, const sr_synth_opts *o, uint64_t seed, const int64_t *idx,
                   int64_t b, int64_t c, int64_t h, int64_t w, sr_dtype dtype)
{
    if (b < 0 || c < 1 || h < 1 || w < 1 || c > 64 || h > 8192 || w > 8192)
        return sr_fail("synth: bad item shape (%lld,%lld,%lld) or count %lld", (long long)c,
                       (long long)h, (long long)w, (long long)b);
    for (int64_t i = 0; i < b; i++)
        if (idx[i] < 0)
            return sr_fail("synth: negative index %lld", (long long)idx[i]);
    double alpha = o->alpha;
    double rmin = o->rmin > 0 ? o->rmin : 1, rmax = o->rmax > 0 ? o->rmax : (h > w ? h : w) / 2.0;
    if (o->kind == SR_SYNTH_PINK) {
        alpha = alpha ? alpha : 1;
        if (!(alpha >= 0 && alpha <= 8))
            return sr_fail("synth: pink alpha %g out of [0, 8]", alpha);
    } else if (o->kind == SR_SYNTH_DEAD_LEAVES) {
        alpha = alpha ? alpha : 3;
        if (!(alpha > 0 && alpha <= 10) || !(rmin > 0) || !(rmax >= rmin))
            return sr_fail("synth: dead leaves needs alpha in (0, 10] and 0 < rmin <= rmax (got "
                           "%g, %g, %g)", alpha, rmin, rmax);
    } else if (o->kind == SR_SYNTH_GAUSSIAN) {
        if (!(o->std >= 0) || !isfinite(o->mean))
            return sr_fail("synth: gaussian needs std >= 0 (got mean %g, std %g)", o->mean, o->std);
    } else if (o->kind != SR_SYNTH_UNIFORM) {
        return sr_fail("synth: unknown kind %d", (int)o->kind);
    }
    sr_tensor t = SR_TENSOR_INIT;
    if (sr_tensor_alloc(&t, dtype, 4, (int64_t[]){b, c, h, w}))
        return -1;
    int64_t per = c * h * w;
    if (o->kind == SR_SYNTH_UNIFORM) {
        /* The trainer's noise data set (augment.h) is the one definition of
         * "uniform-noise image i of seed s", so a noise-trained model's
         * training inputs can be regenerated here exactly. */
        for (int64_t i = 0; i < b; i++) {
            sr_tensor row = SR_TENSOR_INIT;
            int bad = sr_tensor_narrow(&row, &t, i, 1) || sr_fill_uniform_rows(&row, seed, idx[i]);
            sr_tensor_free(&row);
            if (bad) {
                sr_tensor_free(&t);
                return -1;
            }
        }
        sr_tensor_free(out);
        *out = t;
        return 0;
    }
    int failed = 0, nt = sr_threads_get();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (b > 1 && nt > 1)
    for (int64_t i = 0; i < b; i++) {
        sr_rng r;
        sr_rng_seed(&r, item_seed(seed, idx[i], (uint64_t)o->kind));
        double *y = malloc(sizeof *y * (size_t)per);
        if (!y) {
#pragma omp atomic write
            failed = 1;
            continue;
        }
        int bad = 0;
        switch (o->kind) {
        case SR_SYNTH_UNIFORM: /* handled above */
            break;
        case SR_SYNTH_GAUSSIAN:
            for (int64_t k = 0; k < per; k++) {
                double v = o->mean + o->std * sr_rng_normal(&r);
                y[k] = v < 0 ? 0 : v > 1 ? 1 : v;
            }
            break;
        case SR_SYNTH_PINK:
            bad = pink_item(y, c, h, w, alpha, &r);
            break;
        case SR_SYNTH_DEAD_LEAVES:
            bad = dead_leaves_item(y, c, h, w, alpha, rmin, rmax, &r);
            break;
        }
        if (bad) {
#pragma omp atomic write
            failed = 1;
        }
        if (dtype == SR_F64)
            memcpy(sr_f64(&t) + i * per, y, sizeof *y * (size_t)per);
        else
            for (int64_t k = 0; k < per; k++)
                sr_f32(&t)[i * per + k] = (float)y[k];
        free(y);
    }
    if (failed) {
        sr_tensor_free(&t);
        return sr_fail("synth: out of memory generating %s items", sr_synth_kind_name(o->kind));
    }
    sr_tensor_free(out);
    *out = t;
    return 0;
}

int sr_radial_spectrum(const sr_tensor *t, double *power, int nbins)
{
    if (t->ndim < 2 || !t->storage)
        return sr_fail("radial_spectrum: input %s needs (..., H, W)", SR_SHAPE(t));
    int64_t H = t->shape[t->ndim - 2], W = t->shape[t->ndim - 1];
    int64_t m = H < W ? H : W;
    if (H < 2 || W < 2 || H > 8192 || W > 8192 || nbins != m / 2 + 1)
        return sr_fail("radial_spectrum: planes %lldx%lld need 2..8192 a side and %lld bins",
                       (long long)H, (long long)W, (long long)(m / 2 + 1));
    int64_t planes = sr_numel(t) / (H * W);
    double complex *z = malloc(sizeof *z * (size_t)(H * W));
    int64_t *count = calloc((size_t)nbins, sizeof *count);
    if (!z || !count) {
        free(z), free(count);
        return sr_fail("radial_spectrum: out of memory");
    }
    for (int r = 0; r < nbins; r++)
        power[r] = 0;
    for (int64_t p = 0; p < planes; p++) {
        double mean = 0;
        for (int64_t k = 0; k < H * W; k++)
            mean += sr_get_flat(t, p * H * W + k);
        mean /= (double)(H * W);
        for (int64_t k = 0; k < H * W; k++)
            z[k] = sr_get_flat(t, p * H * W + k) - mean;
        sr_fft2(z, (int)H, (int)W, 0);
        for (int64_t i = 0; i < H; i++) {
            double fy = (double)(i <= H / 2 ? i : i - H) / (double)H;
            for (int64_t j = 0; j < W; j++) {
                double fx = (double)(j <= W / 2 ? j : j - W) / (double)W;
                int64_t r = llround((double)m * sqrt(fx * fx + fy * fy));
                if (r < nbins) {
                    double a = cabs(z[i * W + j]);
                    power[r] += a * a;
                    count[r]++;
                }
            }
        }
    }
    for (int r = 0; r < nbins; r++)
        power[r] = count[r] ? power[r] / (double)count[r] : 0;
    free(z);
    free(count);
    return 0;
}
