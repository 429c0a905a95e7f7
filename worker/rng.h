/*
 * worker/rng.h - the worker's portable, seeded random numbers.
 *
 * xoshiro256** (Blackman & Vigna, 2018) seeded through splitmix64, so a seed
 * gives the same stream on every platform and compiler. Used for the global
 * sample order (data.c) and parameter initialisation (models/). Not for
 * anything secret. Plain data; one generator per user, not thread-safe.
 */
#ifndef PS_WORKER_RNG_H
#define PS_WORKER_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t s[4]; /* xoshiro256** state; never all zero */
} ps_rng_t;

/* splitmix64 step: advances *x and returns a well-mixed 64-bit value. */
static inline uint64_t ps_rng_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Seeds r from (seed, stream): distinct streams give unrelated sequences. */
static inline void ps_rng_init(ps_rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed;
    uint64_t mix = ps_rng_splitmix64(&x) ^ (stream * 0xD1B54A32D192ED03ULL);
    for (int i = 0; i < 4; i++) {
        r->s[i] = ps_rng_splitmix64(&mix);
    }
}

static inline uint64_t ps_rng_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* Next 64 random bits (xoshiro256**). */
static inline uint64_t ps_rng_next(ps_rng_t *r)
{
    uint64_t *s = r->s;
    const uint64_t result = ps_rng_rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ps_rng_rotl(s[3], 45);
    return result;
}

/* Uniform integer in [0, bound), bound > 0, without modulo bias (rejection). */
static inline uint64_t ps_rng_below(ps_rng_t *r, uint64_t bound)
{
    const uint64_t threshold = (0 - bound) % bound; /* 2^64 mod bound */
    for (;;) {
        uint64_t x = ps_rng_next(r);
        if (x >= threshold) {
            return x % bound;
        }
    }
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double ps_rng_double(ps_rng_t *r)
{
    return (double)(ps_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

#ifdef __cplusplus
}
#endif
#endif
