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

/* The default seed used when a caller gives none (srgeo.seed(n) sets it). */
uint64_t sr_default_seed(void);
void sr_set_default_seed(uint64_t seed);

#endif
