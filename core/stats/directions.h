/* directions.h - the direction set of the r_η engine (stats/profile.h).
 *
 * Unit vectors u in pixel space, each fixed by (seed, global base index b),
 * so a run can be continued from any index and any batch size gives the
 * same vectors.  Base direction b's raw draw is a Gaussian vector (seeded
 * by (seed, b)), blurred for the low-pass family, or row b of the user's
 * directions.  Without blocks each raw draw is normalised on its own; with
 * orthonormal blocks of k (block > 1), block B = b / k is the Gram-Schmidt
 * orthonormalisation, in index order, of the raw draws B·k .. B·k + k − 1,
 * so base b is the unit part of its draw orthogonal to the earlier ones of
 * its block (the first of a block is the independent direction itself).
 * Directions within a block are exchangeable and exactly orthogonal, which
 * makes sums of quadratic forms such as Σ‖J u‖² vary less than with
 * independent draws (a full block of k = d gives ‖J‖_F² exactly).
 *
 * Set index i (0 ≤ i < size): i < ndirs is base first + i; with antipodes,
 * i ≥ ndirs is −(base first + i − ndirs).
 */
#ifndef SR_DIRECTIONS_H
#define SR_DIRECTIONS_H

#include "tensor/tensor.h"

typedef enum {
    SR_DIRS_GAUSSIAN = 0, /* isotropic Gaussian, normalised */
    SR_DIRS_USER = 1,     /* rows of user, normalised */
    SR_DIRS_LOWPASS = 2,  /* Gaussian noise blurred with lowpass_sigma (px), normalised */
} sr_dir_family;

typedef struct sr_dir_set {
    sr_dir_family family;
    uint64_t seed;
    int64_t first, ndirs; /* base directions first .. first + ndirs − 1 */
    int antipodal;
    int64_t block;        /* orthonormal blocks of this many; <= 1: independent */
    const sr_tensor *user;
    double lowpass_sigma;
    const sr_tensor *like; /* the image: d and the shape the spatial families blur over */
    /* the block being built: columns 0..ncols−1 of block cached_block */
    int64_t cached_block, ncols;
    double *q, *h; /* block × d rows; block scratch values */
} sr_dir_set;

/* Check the set against the image (a user family's rows, a block no
 * larger than d) and prepare its cache; 0 or −1 with the error set. */
int sr_dirs_init(sr_dir_set *s, const sr_tensor *like);
/* Set index i into out[d]. */
int sr_dirs_get(sr_dir_set *s, int64_t i, double *out);
void sr_dirs_free(sr_dir_set *s);

#endif
