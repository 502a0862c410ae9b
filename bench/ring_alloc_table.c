/*
 * Prints the balance of the replication-aware token allocator: a DC is
 * grown one node at a time (each new node calling ring_tokens_allocate on
 * the current ring), and after each join the replicated ownership of every
 * node (NTS, RF 3 in the DC) is measured with ring_dc_ownership.
 *
 *   ring_alloc_table [max_nodes=12] [seeds=10] [num_tokens=16] [rf=3]
 *                    [layouts=31 (bit mask of the five below)] [per_seed=0]
 *                    [planned=0]
 *
 * Spread = max/min - 1 of the nodes' replicated ownership, worst over seeds.
 * With per_seed = 1 it also prints every seed's spreads (from 3 nodes on)
 * and, per DC size, how many seeds are above 10%. With planned = 1 every
 * join is told the next joiner's rack (ring_tokens_allocate_planned), as in
 * a plan (generatetokens); with planned = 2 every join but the last, as
 * when max_nodes nodes start together (only the max_nodes row counts).
 * Layouts: one rack; racks = nodes (every node its own rack); 3, 4 and 5
 * racks filled round robin.
 *
 * Where no token choice can reach 10% the cell says so instead of reporting
 * a failure: with racks == RF every rack holds exactly one replica of every
 * range, so unequal racks are unbalanced by k_max/k_min; with racks > RF a
 * rack holds at most one replica of a range, so a rack of k nodes whose fair
 * share k*RF/N exceeds 1 is capped (ring_balance_floor; docs/ring.md has
 * the proofs). The last column is the slowest single allocation over all
 * layouts and seeds at that DC size, in CPU time (the process is single
 * threaded).
 */
#include "common/err.h"
#include "ring/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXN    64
#define LAYOUTS 5

static const int layout_racks[LAYOUTS] = {1, 0, 3, 4, 5}; /* 0: per node */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Lowest max/min - 1 any token choice can give `nodes` nodes spread round
 * robin over `racks` racks (0: one rack per node) at RF `rf`; sets *eq when
 * racks == RF with unequal racks. */
static double floor_of(int racks, size_t nodes, int rf, bool *eq)
{
	size_t k[MAXN] = {0};
	size_t nr = racks == 0 || (size_t)racks > nodes ? nodes : (size_t)racks;
	for (size_t i = 0; i < nodes; i++)
		k[i % nr]++;
	return ring_balance_floor(k, nr, rf, eq);
}

/* Grows one DC; worst[n] gets the spread after node n joined if it is
 * worse, last[n] the spread itself. */
static int grow(int layout, size_t max_nodes, size_t ntok, int rf, int planned,
		uint64_t seed, double *worst, double *last, double *slowest)
{
	struct ring_builder *b = ring_builder_new();
	int64_t toks[256];
	for (size_t n = 1; n <= max_nodes; n++) {
		char rack[32];
		struct ring *r = ring_builder_build(b);
		if (!r)
			return -1;
		int nr = layout_racks[layout];
		snprintf(rack, sizeof(rack), "r%zu",
			 nr ? (n - 1) % (size_t)nr + 1 : n);
		double t0 = now_ms();
		char next[32];
		snprintf(next, sizeof(next), "r%zu",
			 nr ? n % (size_t)nr + 1 : n + 1);
		if (ring_tokens_allocate_planned(
			    r, "dc1", rack,
			    planned == 1 || (planned == 2 && n < max_nodes)
				    ? next
				    : NULL,
			    rf, ntok, seed * 1000 + n, toks)) {
			ring_unref(r);
			return -1;
		}
		double ms = now_ms() - t0;
		if (ms > slowest[n])
			slowest[n] = ms;
		ring_unref(r);
		struct ring_endpoint e = {0};
		e.addr.family = INET_V4;
		e.addr.ip[0] = 10;
		e.addr.ip[3] = (uint8_t)n;
		e.dc = "dc1";
		e.rack = rack;
		e.tokens = toks;
		e.num_tokens = ntok;
		if (ring_builder_set_endpoint(b, &e))
			return -1;
		r = ring_builder_build(b);
		double s;
		if (ring_dc_spread(r, "dc1", rf, &s))
			s = -1;
		ring_unref(r);
		last[n] = s;
		if (s > worst[n])
			worst[n] = s;
	}
	ring_builder_delete(b);
	return 0;
}

int main(int argc, char **argv)
{
	size_t max_nodes = argc > 1 ? (size_t)atoi(argv[1]) : 12;
	int seeds = argc > 2 ? atoi(argv[2]) : 10;
	size_t ntok = argc > 3 ? (size_t)atoi(argv[3]) : 16;
	int rf = argc > 4 ? atoi(argv[4]) : 3;
	int mask = argc > 5 ? atoi(argv[5]) : 31;
	bool per_seed = argc > 6 && atoi(argv[6]) != 0;
	int planned = argc > 7 ? atoi(argv[7]) : 0;
	if (max_nodes < 1 || max_nodes >= MAXN || ntok < 1 || ntok > 256) {
		fprintf(stderr, "bad arguments\n");
		return 2;
	}
	static const char *names[LAYOUTS] = {"1 rack", "rack per node",
					     "3 racks (rr)", "4 racks (rr)",
					     "5 racks (rr)"};
	double worst[LAYOUTS][MAXN], slowest[MAXN], last[MAXN];
	int above[MAXN];
	memset(worst, 0, sizeof(worst));
	memset(slowest, 0, sizeof(slowest));
	for (int layout = 0; layout < LAYOUTS; layout++) {
		if (!(mask >> layout & 1))
			continue;
		memset(above, 0, sizeof(above));
		for (int s = 1; s <= seeds; s++) {
			if (grow(layout, max_nodes, ntok, rf, planned,
				 (uint64_t)s, worst[layout], last, slowest)) {
				fprintf(stderr, "error: %s\n", err_msg());
				return 1;
			}
			if (per_seed)
				printf("%s, seed %2d:", names[layout], s);
			for (size_t n = 3; per_seed && n <= max_nodes; n++) {
				printf(" %5.1f", 100 * last[n]);
				above[n] += last[n] > 0.10;
			}
			if (per_seed)
				printf("\n");
		}
		if (!per_seed)
			continue;
		printf("%s, seeds above 10%%:", names[layout]);
		for (size_t n = 3; n <= max_nodes; n++)
			printf(" %5d", above[n]);
		printf("\n");
	}
	printf("num_tokens=%zu rf=%d seeds=%d%s: worst max/min-1 of "
	       "replicated ownership\n",
	       ntok, rf, seeds,
	       planned == 1   ? ", next joiner's rack known"
	       : planned == 2 ? ", started together (the last row counts)"
			      : "");
	printf("| nodes/DC |");
	for (int l = 0; l < LAYOUTS; l++)
		if (mask >> l & 1)
			printf(" %s |", names[l]);
	printf(" slowest join (CPU) |\n|---|");
	for (int l = 0; l < LAYOUTS; l++)
		if (mask >> l & 1)
			printf("---|");
	printf("---|\n");
	for (size_t n = 3; n <= max_nodes; n++) {
		printf("| %zu |", n);
		for (int l = 0; l < LAYOUTS; l++) {
			if (!(mask >> l & 1))
				continue;
			bool eq;
			double fl = floor_of(layout_racks[l], n, rf, &eq);
			if (eq)
				printf(" n/a: racks == RF, unequal (%.1f%%) |",
				       100 * worst[l][n]);
			else if (fl > 0.10)
				printf(" n/a: floor %.1f%% (%.1f%%) |",
				       100 * fl, 100 * worst[l][n]);
			else
				printf(" %.1f%% |", 100 * worst[l][n]);
		}
		printf(" %.0f ms |\n", slowest[n]);
	}
	return 0;
}
