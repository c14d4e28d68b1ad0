/* synth.h - seeded synthetic images (uniform / Gaussian noise, 1/f "pink"
 * noise, dead leaves), seeded index draws, and the small FFT they use.
 * No Lua here.
 *
 * Every item is a pure function of (seed, index): item i of a noise set is
 * generated from its own RNG stream seeded by mixing seed and i, so any
 * subset, batch order or thread count gives the same pixels, and "the
 * regenerated training inputs" of a noise-trained model are just the same
 * (seed, index) pairs again. */
#ifndef SR_SYNTH_H
#define SR_SYNTH_H

#include <complex.h>
#include <stdint.h>

#include "tensor/tensor.h"

typedef enum {
    SR_SYNTH_UNIFORM = 0, /* i.i.d. U[0,1) per pixel: the trainer's noise images (augment.h) */
    SR_SYNTH_GAUSSIAN,    /* i.i.d. N(mean, std²) per pixel, clamped to [0,1] */
    SR_SYNTH_PINK,        /* amplitude spectrum ∝ 1/f^alpha (alpha 1: power 1/f², natural images) */
    SR_SYNTH_DEAD_LEAVES, /* occluding discs, radii with density ∝ r^-alpha on [rmin, rmax] */
} sr_synth_kind;

typedef struct sr_synth_opts {
    sr_synth_kind kind;
    double mean, std;   /* gaussian: 0.5, 0.25 */
    double alpha;       /* pink: 1 (amplitude exponent); dead leaves: 3 (radius density) */
    double rmin, rmax;  /* dead leaves, pixels: 1 and max(H,W)/2 when 0 */
} sr_synth_opts;

#define SR_SYNTH_OPTS_INIT {SR_SYNTH_UNIFORM, 0.5, 0.25, 0, 0, 0}

/* "uniform" | "gaussian" | "pink" | "dead_leaves" -> kind. */
int sr_synth_kind_parse(const char *name, sr_synth_kind *kind);
const char *sr_synth_kind_name(sr_synth_kind kind);

/* out = items idx[0..b) (0-based, any non-negative index) of the set
 * (seed, opts) as a (b, c, h, w) tensor of dtype; values in [0, 1].  Pink
 * noise is min-max normalised per image over all channels (an affine map:
 * the spectrum's slope is unchanged).  Parallel over items. */
int sr_synth_items(sr_tensor *out, const sr_synth_opts *o, uint64_t seed, const int64_t *idx,
                   int64_t b, int64_t c, int64_t h, int64_t w, sr_dtype dtype);

/* Class label in [0, classes) of item i of a seeded set (i.i.d. uniform). */
int64_t sr_synth_label(uint64_t seed, int64_t i, int64_t classes);

/* The first k entries of a uniform random permutation of 0..n-1 (a draw
 * of k of n without replacement), by a forward Fisher-Yates seeded with
 * seed: the k-draw is a prefix of the (k+1)-draw. */
int sr_sample_indices(int64_t *out, int64_t n, int64_t k, uint64_t seed);

/* In-place DFT of n complex values (any n: mixed radix over the factors
 * of n, O(n Σ factors)): X_k = Σ_j x_j e^{∓2πi jk/n}, minus sign forward,
 * plus sign with inverse=1 (unscaled). */
int sr_fft(double complex *x, int n, int inverse);
/* 2-D DFT of an (h, w) row-major complex plane, in place (unscaled). */
int sr_fft2(double complex *x, int h, int w, int inverse);

/* Radially averaged power spectrum |DFT|² of the (H, W) planes of t (its
 * last two dims), each plane's mean removed, averaged over planes: power[r]
 * for r = 0 .. nbins-1 = min(H,W)/2, bin r holding the frequencies with
 * round(m·|f|) = r (f in cycles per pixel, m = min(H, W)).  For checking
 * spectral slopes: a natural image has power ∝ 1/f². */
int sr_radial_spectrum(const sr_tensor *t, double *power, int nbins);

#endif
