/* rng.c - xoshiro256** (Blackman & Vigna), seeded through splitmix64. */
#include "base/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double sr_rng_hash_unit(uint64_t seed, uint64_t i)
{
    uint64_t x = seed + i * 0x9e3779b97f4a7c15ull;
    uint64_t h = splitmix64(&x);
    return (double)(2 * (int64_t)(h >> 40) + 1 - (1 << 24)) * 0x1.0p-24;
}

void sr_rng_seed(sr_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    r->has_spare = 0;
    r->spare = 0;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sr_rng_u64(sr_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sr_rng_uniform(sr_rng *r) { return (double)(sr_rng_u64(r) >> 11) * 0x1.0p-53; }

double sr_rng_normal(sr_rng *r)
{
    /* Marsaglia's polar method; the spare keeps the stream position exact. */
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u, v, s;
    do {
        u = 2.0 * sr_rng_uniform(r) - 1.0;
        v = 2.0 * sr_rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double f = sqrt(-2.0 * log(s) / s);
    r->spare = v * f;
    r->has_spare = 1;
    return u * f;
}

uint64_t sr_rng_below(sr_rng *r, uint64_t n)
{
    /* Rejection avoids modulo bias. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = sr_rng_u64(r);
    while (x >= lim);
    return x % n;
}

static uint64_t default_seed = 0x5eed;
uint64_t sr_default_seed(void) { return default_seed; }
void sr_set_default_seed(uint64_t seed) { default_seed = seed; }
