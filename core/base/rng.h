/* rng.h - seeded, reproducible random numbers (xoshiro256** + splitmix64).
 *
 * Every random draw in srgeo comes from an explicit sr_rng seeded by the
 * caller, so results depend only on seeds (and never on thread scheduling:
 * parallel fills split the stream deterministically by index).
 */
#ifndef SR_RNG_H
#define SR_RNG_H

#include <stdint.h>

typedef struct sr_rng {
    uint64_t s[4];
    int has_spare;
    double spare;
} sr_rng;

void sr_rng_seed(sr_rng *r, uint64_t seed);
uint64_t sr_rng_u64(sr_rng *r);
double sr_rng_uniform(sr_rng *r);           /* [0, 1) with 53 random bits */
double sr_rng_normal(sr_rng *r);            /* standard normal */
uint64_t sr_rng_below(sr_rng *r, uint64_t n); /* uniform integer in [0, n) */

/* Element i of the counter-based stream `seed`: a value in (-1, 1) that
 * depends on (seed, i) alone, so a fill needs no sequential state and other
 * languages reproduce it bit for bit (tests/fixtures/gen_models.py does, in
 * NumPy).  h = splitmix64's finaliser applied to seed + (i + 1) * 0x9e3779b97f4a7c15
 * (mod 2^64); v = (2 (h >> 40) + 1 - 2^24) / 2^24: 24 significant bits, so
 * v * s is exact in double for any float32 s. */
double sr_rng_hash_unit(uint64_t seed, uint64_t i);

/* The default seed used when a caller gives none (srgeo.seed(n) sets it). */
uint64_t sr_default_seed(void);
void sr_set_default_seed(uint64_t seed);

#endif
