/* augment.h - the training data pipeline's random parts, made reproducible:
 * epoch shuffles, batch assembly with random crop + horizontal flip,
 * Gaussian input noise and uniform-noise images.  (Blur is srgeo.image.blur.)
 *
 * Every random draw is a pure function of (seed, what, index): a batch's
 * augmentation is seeded by the step number, a row's stream by its position
 * in the batch, an image of a noise data set by its index.  So nothing but
 * the step count has to be saved for a resumed run to see exactly the
 * batches an uninterrupted run sees, and no result depends on how OpenMP
 * splits the rows.
 */
#ifndef SR_AUGMENT_H
#define SR_AUGMENT_H

#include <stdint.h>

#include "tensor/tensor.h"

/* A seed derived from (seed, a, b) by splitmix64 finalisers: distinct
 * inputs give unrelated streams (used as mix(seed, STREAM, step)). */
uint64_t sr_seed_mix(uint64_t seed, uint64_t a, uint64_t b);

/* out[0..n) = a uniformly random permutation of 0..n-1 (Fisher-Yates with
 * sr_rng seeded by seed). */
int sr_permutation(int64_t *out, int64_t n, uint64_t seed);

/* Batch assembly.  out (n, C, H, W) = rows idx[0..n) (0-based) of src
 * (N, C, H, W), each, when pad > 0, cropped at a random offset from the
 * image zero-padded by `pad` on every side (torchvision RandomCrop(H,
 * padding=pad)), then, when flip, mirrored left-right with probability 1/2
 * (RandomHorizontalFlip).  Row r draws from sr_seed_mix(seed, 0, r).
 * pad = 0 and flip = 0 is a plain gather.  out is reused (sr_tensor_ensure)
 * and must not share storage with src. */
int sr_augment_batch(sr_tensor *out, const sr_tensor *src, const int64_t *idx, int64_t n, int pad,
                     int flip, uint64_t seed);

/* x += sigma * N(0, 1) elementwise, in place; row r of dim 0 draws from
 * sr_seed_mix(seed, 1, r). */
int sr_add_gaussian(sr_tensor *x, double sigma, uint64_t seed);

/* Fill x (N, ...) with i.i.d. uniform [0, 1) values; image i (row i of dim
 * 0) draws from sr_seed_mix(seed, 2, first + i), so a noise data set's image
 * does not depend on how many are made or in which chunk. */
int sr_fill_uniform_rows(sr_tensor *x, uint64_t seed, int64_t first);

#endif
