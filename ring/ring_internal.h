/*
 * Private structures shared by ring.c, placement.c, strategy.c, snitch.c and
 * alloc.c. Nothing outside ring/ includes this.
 */
#ifndef CASSINI_RING_RING_INTERNAL_H
#define CASSINI_RING_RING_INTERNAL_H

#include "ring/ring.h"

#include <pthread.h>
#include <stdatomic.h>

/* An endpoint as the ring stores it: the public view (strings and tokens
 * owned by the ring) plus interned dc and rack ids. */
struct ring_ep {
	struct ring_endpoint pub;
	uint32_t dc;   /* index into ring.dc_names */
	uint32_t rack; /* global rack id, unique per (dc, rack) */
};

struct placement_cache {
	struct placement_cache *next;
	char *key; /* ring_strategy_describe() */
	struct ring_placement *p;
};

struct ring {
	atomic_int refs;
	size_t nep;
	struct ring_ep *eps; /* sorted by address */
	int local;
	struct inet_addr local_addr;
	bool has_local;
	size_t ndc;
	char **dc_names; /* sorted */
	size_t nrack;
	/* Tokens of NORMAL and LEAVING endpoints, ascending. */
	size_t ntok;
	int64_t *tok;
	uint32_t *owner;
	bool transitions; /* any BOOT or LEAVING endpoint */
	_Atomic(struct placement_cache *) cache;
	pthread_mutex_t cache_lock;
};

/* A token ring restricted to some endpoints: what placement walks. Endpoint
 * numbers are the ring's. */
struct ring_view {
	size_t ntok;
	const int64_t *tok;
	const uint32_t *owner;
	const struct ring *ring; /* dc/rack of each endpoint */
};

/* Replicas for each token of a view: tokens[i]'s range maps to
 * eps[off[i] .. off[i+1]). */
struct rmap {
	size_t ntok;
	int64_t *tok;
	uint32_t *off;
	uint32_t *eps;
};

struct ring_strategy {
	enum ring_strategy_class cls;
	int rf;     /* Simple */
	size_t ndc; /* NTS */
	char **dcs;
	int *dc_rf;
	char *describe;
};

/* Computes the replica map of a view. 0 or -1 (ERR_NOMEM). */
int ring_rmap_build(const struct ring_view *v, const struct ring_strategy *s,
		    struct rmap *out);
void ring_rmap_free(struct rmap *m);
/* Index of the view token whose range holds t (first >= t, wrapping). */
size_t ring_tokens_lower_bound(const int64_t *tok, size_t n, int64_t t);

/* Fair replicated load per node in a DC whose racks hold k[0..R) nodes, at
 * RF rf with at least rf racks: rf / nodes, except that a rack holds at
 * most one replica of a range, so a rack whose share would pass 1 is capped
 * and the others carry the rest. Returns the share of an uncapped node;
 * rack_share() gives any rack's (docs/ring.md, "What balance is
 * possible"). */
double ring_capped_level(const size_t *k, size_t R, int rf);

static inline double rack_share(size_t k, double level)
{
	return (double)k * level > 1 + 1e-12 ? 1 / (double)k : level;
}

#endif
