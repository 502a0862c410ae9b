/*
 * Replica-map rebuild benchmark: a ring of 1,000 endpoints x 16 random
 * tokens in 3 DCs (3 racks each), NetworkTopologyStrategy with RF 3 in every
 * DC. Times ring_builder_build + ring_placement_new (what a ring change
 * costs one keyspace) and lookups through the map.
 *
 *   ring_bench [endpoints=1000] [tokens=16] [rounds=10]
 */
#include "common/err.h"
#include "common/rand.h"
#include "ring/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	size_t neps = argc > 1 ? (size_t)atoi(argv[1]) : 1000;
	size_t ntok = argc > 2 ? (size_t)atoi(argv[2]) : 16;
	int rounds = argc > 3 ? atoi(argv[3]) : 10;
	struct rng rng;
	rng_seed(&rng, 42);
	struct ring_builder *b = ring_builder_new();
	int64_t *toks = malloc(ntok * sizeof(*toks));
	static const char *dcs[] = {"dc1", "dc2", "dc3"};
	static const char *racks[] = {"r1", "r2", "r3"};
	for (size_t i = 0; i < neps; i++) {
		struct ring_endpoint e = {0};
		e.addr.family = INET_V4;
		e.addr.ip[0] = 10;
		e.addr.ip[1] = (uint8_t)(i % 3);
		e.addr.ip[2] = (uint8_t)(i >> 8);
		e.addr.ip[3] = (uint8_t)i;
		e.dc = dcs[i % 3];
		e.rack = racks[(i / 3) % 3];
		ring_tokens_random(&rng, NULL, ntok, toks);
		e.tokens = toks;
		e.num_tokens = ntok;
		if (ring_builder_set_endpoint(b, &e)) {
			fprintf(stderr, "error: %s\n", err_msg());
			return 1;
		}
	}
	const char *k[] = {"class", "dc1", "dc2", "dc3"};
	const char *v[] = {"NetworkTopologyStrategy", "3", "3", "3"};
	struct ring_strategy *s = ring_strategy_new(k, v, 4, false);
	double best_build = 1e9, best_map = 1e9, sum_map = 0;
	for (int i = 0; i < rounds; i++) {
		double t0 = now_ms();
		struct ring *r = ring_builder_build(b);
		double t1 = now_ms();
		struct ring_placement *p = ring_placement_new(r, s);
		double t2 = now_ms();
		if (!r || !p) {
			fprintf(stderr, "error: %s\n", err_msg());
			return 1;
		}
		if (t1 - t0 < best_build)
			best_build = t1 - t0;
		if (t2 - t1 < best_map)
			best_map = t2 - t1;
		sum_map += t2 - t1;
		if (i == rounds - 1) {
			size_t nl = 1000000, hits = 0;
			struct ring_replicas rep;
			double t3 = now_ms();
			for (size_t q = 0; q < nl; q++) {
				ring_placement_lookup(
					p, (int64_t)rng_next(&rng), &rep);
				hits += rep.n_natural;
			}
			double t4 = now_ms();
			printf("lookups: %.0f ns each (%zu replicas per "
			       "token)\n",
			       (t4 - t3) * 1e6 / (double)nl, hits / nl);
		}
		ring_placement_delete(p);
		ring_unref(r);
	}
	printf("%zu endpoints x %zu tokens, 3 DCs, NTS RF 3/3/3: ring build "
	       "%.2f ms, replica map build %.2f ms best, %.2f ms mean over "
	       "%d\n",
	       neps, ntok, best_build, best_map, sum_map / rounds, rounds);
	ring_strategy_delete(s);
	ring_builder_delete(b);
	free(toks);
	return 0;
}
