/*
 * Prints the balance of the replication-aware token allocator: a DC is
 * grown one node at a time (each new node calling ring_tokens_allocate on
 * the current ring), and after each join the replicated ownership of every
 * node (NTS, RF 3 in the DC) is measured with ring_dc_ownership.
 *
 *   ring_alloc_table [max_nodes=12] [seeds=10] [num_tokens=16] [rf=3]
 *                    [layouts=15 (bit mask of the four below)]
 *
 * Spread = max/min - 1 of the nodes' replicated ownership, worst over seeds.
 * Layouts: one rack; racks = nodes (every node its own rack); 3 racks filled
 * round robin (balanced only when the node count is a multiple of 3, since
 * each rack then holds exactly one replica of everything); 5 racks round
 * robin.
 */
#include "common/err.h"
#include "ring/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 64

static double spread(const struct ring *r, int rf, size_t nodes)
{
	double own[MAXN], mx = 0, mn = 1e9;
	if (ring_dc_ownership(r, "dc1", rf, own))
		return -1;
	for (size_t i = 0; i < nodes; i++) {
		mx = own[i] > mx ? own[i] : mx;
		mn = own[i] < mn ? own[i] : mn;
	}
	return mx / mn - 1;
}

/* Grows one DC; worst[n] gets the spread after node n joined. */
static int grow(int layout, size_t max_nodes, size_t ntok, int rf,
                uint64_t seed, double *worst)
{
	struct ring_builder *b = ring_builder_new();
	int64_t toks[256];
	for (size_t n = 1; n <= max_nodes; n++) {
		char rack[32];
		struct ring *r = ring_builder_build(b);
		if (!r)
			return -1;
		if (layout == 0)
			snprintf(rack, sizeof(rack), "r1");
		else if (layout == 1)
			snprintf(rack, sizeof(rack), "r%zu", n);
		else if (layout == 2)
			snprintf(rack, sizeof(rack), "r%zu", (n - 1) % 3 + 1);
		else
			snprintf(rack, sizeof(rack), "r%zu", (n - 1) % 5 + 1);
		if (ring_tokens_allocate(r, "dc1", rack, rf, ntok,
		                         seed * 1000 + n, toks)) {
			ring_unref(r);
			return -1;
		}
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
		double s = spread(r, rf, n);
		ring_unref(r);
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
	int mask = argc > 5 ? atoi(argv[5]) : 15;
	if (max_nodes < 1 || max_nodes >= MAXN || ntok < 1 || ntok > 256) {
		fprintf(stderr, "bad arguments\n");
		return 2;
	}
	static const char *names[] = {"1 rack", "rack per node",
	                              "3 racks (rr)", "5 racks (rr)"};
	double worst[4][MAXN];
	memset(worst, 0, sizeof(worst));
	for (int layout = 0; layout < 4; layout++)
		for (int s = 1; s <= seeds && (mask >> layout & 1); s++)
			if (grow(layout, max_nodes, ntok, rf, (uint64_t)s,
			         worst[layout])) {
				fprintf(stderr, "error: %s\n", err_msg());
				return 1;
			}
	printf("num_tokens=%zu rf=%d seeds=%d: worst max/min-1 of replicated "
	       "ownership\n",
	       ntok, rf, seeds);
	printf("| nodes/DC | %s | %s | %s | %s |\n|---|---|---|---|---|\n",
	       names[0], names[1], names[2], names[3]);
	for (size_t n = 3; n <= max_nodes; n++)
		printf("| %zu | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", n,
		       100 * worst[0][n], 100 * worst[1][n], 100 * worst[2][n],
		       100 * worst[3][n]);
	return 0;
}
