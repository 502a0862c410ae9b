/*
 * Proximity order for choosing read replicas, GossipingPropertyFileSnitch
 * style: a node's dc and rack are what its rackdc.properties says (conf/),
 * spread by gossip into the ring. Closer is: the node itself, then the same
 * rack, then the same DC, then other DCs. Ties keep their given order, so a
 * caller that wants load spreading shuffles first. No dynamic (latency)
 * scoring here; that belongs to the coordinator.
 */
#include "ring/ring_internal.h"

int ring_snitch_proximity(const struct ring *r, size_t from, size_t ep)
{
	if (from == ep)
		return 0;
	if (from >= r->nep || ep >= r->nep)
		return 3;
	const struct ring_ep *a = &r->eps[from], *b = &r->eps[ep];
	if (a->dc != b->dc)
		return 3;
	return a->rack == b->rack ? 1 : 2;
}

void ring_snitch_sort(const struct ring *r, size_t from, uint32_t *eps,
		      size_t n)
{
	/* Insertion sort: replica lists are short and it is stable. */
	for (size_t i = 1; i < n; i++) {
		uint32_t x = eps[i];
		int px = ring_snitch_proximity(r, from, x);
		size_t j = i;
		while (j > 0 &&
		       ring_snitch_proximity(r, from, eps[j - 1]) > px) {
			eps[j] = eps[j - 1];
			j--;
		}
		eps[j] = x;
	}
}
