/*
 * Planned growth: the balance floor of a rack layout, and tokens for a DC
 * whose nodes, racks and join order are known in advance (Cassandra's
 * `generatetokens`, CASSANDRA-16205). docs/ring.md, "Planned growth".
 *
 * ring_tokens_plan grows the DC one node at a time with the allocator,
 * each join told the next node's rack (ring_tokens_allocate_planned), and
 * measures the spread after every join. It does so `tries` times from
 * different seeds and keeps the plan whose worst spread, over the DC sizes
 * that can be balanced within 10%, is lowest: the next joiner's rack
 * known, a single growth is within 10% in most seeds, and the odd one a
 * point above is not kept.
 */
#include "ring/ring_internal.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

#define PLAN_TARGET 0.10 /* floors above this are not counted */

double ring_balance_floor(const size_t *rack_nodes, size_t nracks, int rf,
			  bool *racks_eq_rf)
{
	size_t nodes = 0, kmax = 0, kmin = SIZE_MAX, used = 0;
	for (size_t r = 0; r < nracks; r++) {
		nodes += rack_nodes[r];
		if (!rack_nodes[r])
			continue;
		used++;
		kmax = rack_nodes[r] > kmax ? rack_nodes[r] : kmax;
		kmin = rack_nodes[r] < kmin ? rack_nodes[r] : kmin;
	}
	*racks_eq_rf = false;
	if (used <= 1 || nodes <= (size_t)rf || used < (size_t)rf)
		return 0;
	if (used == (size_t)rf) {
		/* every range has one replica in each rack */
		*racks_eq_rf = kmax != kmin;
		return (double)kmax / (double)kmin - 1;
	}
	/* More racks than RF: a rack holds at most one replica of a range */
	double level = ring_capped_level(rack_nodes, nracks, rf), hi = 0,
	       lo = 1;
	for (size_t r = 0; r < nracks; r++) {
		if (!rack_nodes[r])
			continue;
		double share = rack_share(rack_nodes[r], level);
		hi = share > hi ? share : hi;
		lo = share < lo ? share : lo;
	}
	return hi / lo - 1;
}

/* One growth of the plan from `seed`: tokens and spread after each join. */
static int plan_once(const struct ring_plan_progress *pr, unsigned try_,
		     const char *const *racks, size_t nodes, int rf,
		     size_t num_tokens, uint64_t seed, int64_t *tokens,
		     double *spread)
{
	struct ring_builder *b = ring_builder_new();
	if (!b)
		return err_set(ERR_NOMEM, "token plan");
	int rc = 0;
	for (size_t i = 0; i < nodes && !rc; i++) {
		int64_t *t = tokens + i * num_tokens;
		struct ring *r = ring_builder_build(b);
		rc = !r ? -1
			: ring_tokens_allocate_planned(
				  r, "dc1", racks[i],
				  i + 1 < nodes ? racks[i + 1] : NULL, rf,
				  num_tokens, seed + i, t);
		ring_unref(r);
		if (rc)
			break;
		struct ring_endpoint e = {.dc = "dc1",
					  .rack = racks[i],
					  .tokens = t,
					  .num_tokens = num_tokens};
		e.addr.family = INET_V4;
		e.addr.ip[0] = 10;
		e.addr.ip[2] = (uint8_t)(i >> 8);
		e.addr.ip[3] = (uint8_t)i;
		rc = ring_builder_set_endpoint(b, &e);
		if (rc)
			break;
		r = ring_builder_build(b);
		rc = !r ? -1 : ring_dc_spread(r, "dc1", rf, &spread[i]);
		ring_unref(r);
		if (pr && pr->each)
			pr->each(pr->arg, try_, i + 1);
	}
	ring_builder_delete(b);
	return rc;
}

int ring_tokens_plan(const char *const *racks, size_t nodes, int rf,
		     size_t num_tokens, uint64_t seed, unsigned tries,
		     const struct ring_plan_progress *progress, int64_t *tokens,
		     double *spread)
{
	if (nodes < 1 || nodes > RING_PLAN_NODES_MAX || rf < 1 ||
	    num_tokens < 1 || num_tokens > RING_TOKENS_MAX || tries < 1)
		return err_set(ERR_INVALID,
			       "a plan needs 1..%d nodes, rf >= 1, 1..%d "
			       "tokens and at least one try",
			       RING_PLAN_NODES_MAX, RING_TOKENS_MAX);
	/* the counted sizes: those whose floor is within the target */
	const char **names = calloc(nodes, sizeof(*names));
	size_t *count = calloc(nodes, sizeof(*count)), nracks = 0;
	bool *counted = calloc(nodes, sizeof(*counted));
	int64_t *t = malloc(nodes * num_tokens * sizeof(*t));
	double *s = malloc(nodes * sizeof(*s));
	int rc = 0;
	if (!names || !count || !counted || !t || !s) {
		rc = err_set(ERR_NOMEM, "token plan");
		goto out;
	}
	for (size_t i = 0; i < nodes; i++) {
		size_t k = 0;
		while (k < nracks && strcmp(names[k], racks[i]) != 0)
			k++;
		if (k == nracks)
			names[nracks++] = racks[i];
		count[k]++;
		bool eq;
		counted[i] = ring_balance_floor(count, nracks, rf, &eq) <=
			     PLAN_TARGET;
	}
	double best = 0, best_sum = 0;
	for (unsigned k = 0; k < tries; k++) {
		rc = plan_once(progress, k + 1, racks, nodes, rf, num_tokens,
			       seed + 1000 * (uint64_t)k, t, s);
		if (rc)
			break;
		double worst = 0, sum = 0;
		for (size_t i = 0; i < nodes; i++) {
			if (!counted[i])
				continue;
			worst = s[i] > worst ? s[i] : worst;
			sum += s[i];
		}
		if (k == 0 || worst < best - 1e-9 ||
		    (worst < best + 1e-9 && sum < best_sum)) {
			best = worst;
			best_sum = sum;
			memcpy(tokens, t, nodes * num_tokens * sizeof(*t));
			memcpy(spread, s, nodes * sizeof(*s));
		}
	}
out:
	free(names);
	free(count);
	free(counted);
	free(t);
	free(s);
	return rc;
}
