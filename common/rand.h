/*
 * A small, fast, seedable PRNG (xoshiro256**, seeded through splitmix64).
 *
 * Not for secrets. The real env seeds it from getrandom(); the simulator from
 * the test seed, so one seed replays one run exactly.
 */
#ifndef CASSINI_COMMON_RAND_H
#define CASSINI_COMMON_RAND_H

#include <stdint.h>

struct rng {
	uint64_t s[4];
};

void rng_seed(struct rng *r, uint64_t seed);
uint64_t rng_next(struct rng *r);
/* Uniform in [0, bound); bound 0 returns 0. Unbiased (rejection). */
uint64_t rng_below(struct rng *r, uint64_t bound);
/* Uniform in [0, 1). */
double rng_double(struct rng *r);

#endif
