/*
 * ring/: the token ring, replica placement and token allocation.
 *
 * A pure library: no I/O, no clock, no globals. Every other module asks it
 * who owns what. Placement agrees bit for bit with Cassandra and with the
 * DataStax drivers, because token-aware drivers compute it themselves.
 *
 * Life cycle (copy-on-write). Gossip keeps a `struct ring_builder`, applies
 * what it learns (ring_builder_set_endpoint / _remove_endpoint) and calls
 * ring_builder_build() to get an immutable `struct ring`, which it publishes
 * by swapping a pointer. Readers take a reference (ring_ref) for as long as
 * they use it. A ring never changes after it is built, so everything it
 * returns stays valid while the caller holds a reference, and reads need no
 * locks. Replica maps are computed per replication strategy on first use and
 * cached inside the ring (thread-safe); a new ring starts with an empty cache,
 * which is how maps are "rebuilt on ring change".
 *
 * Endpoint statuses follow Cassandra's token metadata:
 *   NORMAL   owns its tokens;
 *   LEAVING  still owns its tokens; the nodes that will take its ranges are
 *            pending endpoints for writes;
 *   BOOT     owns nothing yet; its tokens make it a pending endpoint for the
 *            ranges it will own.
 *
 * See also ring/token.h (tokens, ranges), ring/murmur3.h (partitioner) and
 * docs/ring.md.
 */
#ifndef CASSINI_RING_RING_H
#define CASSINI_RING_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/inet.h"
#include "common/rand.h"
#include "ring/token.h"

enum ring_status {
	RING_STATUS_NORMAL = 0,
	RING_STATUS_BOOT,
	RING_STATUS_LEAVING,
};

/* Longest dc or rack name accepted. */
#define RING_NAME_MAX 256
/* Most tokens one endpoint may hold (Cassandra caps num_tokens far lower). */
#define RING_TOKENS_MAX 4096

/* One node as gossip describes it. */
struct ring_endpoint {
	struct inet_addr addr; /* identity within a ring */
	uint8_t host_id[16];
	const char *dc;   /* non-empty */
	const char *rack; /* non-empty */
	enum ring_status status;
	const int64_t *tokens; /* num_tokens distinct tokens, any order */
	size_t num_tokens;
};

struct ring;
struct ring_builder;

/* ---- building ------------------------------------------------------------ */

struct ring_builder *ring_builder_new(void);
/* A builder holding everything `r` holds (to derive the next ring). */
struct ring_builder *ring_builder_from_ring(const struct ring *r);
void ring_builder_delete(struct ring_builder *b);
/* Adds the endpoint, or replaces the one with the same address. Everything
 * is copied. 0 or -1 (ERR_INVALID: empty/too long dc or rack, too many
 * tokens, a token repeated within the endpoint, bad status; ERR_NOMEM). */
int ring_builder_set_endpoint(struct ring_builder *b,
			      const struct ring_endpoint *ep);
/* 0, or -1 with ERR_NOT_FOUND. */
int ring_builder_remove_endpoint(struct ring_builder *b,
				 const struct inet_addr *addr);
/* Names this node (LocalStrategy, proximity). It need not be added yet. */
void ring_builder_set_local(struct ring_builder *b,
			    const struct inet_addr *addr);
/* A new immutable ring with one reference. NULL with ERR_INVALID when two
 * endpoints claim the same token (the message names both), or ERR_NOMEM. */
struct ring *ring_builder_build(const struct ring_builder *b);

/* ---- references ---------------------------------------------------------- */

struct ring *ring_ref(struct ring *r);
/* Drops a reference; the last one frees the ring and its cached maps. NULL
 * is ignored. */
void ring_unref(struct ring *r);

/* ---- endpoints ----------------------------------------------------------- */

/* Endpoints are numbered 0..count-1 in address order; the numbers are stable
 * for one ring only. */
size_t ring_endpoint_count(const struct ring *r);
/* Borrowed; live while the ring is. tokens are sorted ascending. */
const struct ring_endpoint *ring_endpoint_get(const struct ring *r, size_t i);
/* Index of the endpoint, or -1. */
int ring_endpoint_find(const struct ring *r, const struct inet_addr *addr);
int ring_endpoint_find_host_id(const struct ring *r, const uint8_t host_id[16]);
/* Index of the local endpoint, or -1 when unset or not in the ring. */
int ring_local_endpoint(const struct ring *r);

/* Datacenters that have at least one endpoint, in name order. */
size_t ring_dc_count(const struct ring *r);
const char *ring_dc_name(const struct ring *r, size_t i);

/* ---- tokens and ownership (NORMAL and LEAVING endpoints) ----------------- */

size_t ring_token_count(const struct ring *r);
/* i-th token in ascending order, and the endpoint owning it. */
int64_t ring_token_at(const struct ring *r, size_t i);
size_t ring_token_owner_at(const struct ring *r, size_t i);
/* The range ending at the i-th token: (token[i-1], token[i]], wrapping for
 * i == 0; the full ring when there is one token. */
struct token_range ring_range_at(const struct ring *r, size_t i);
/* Index of the ring token whose range holds `t` (the first token >= t,
 * wrapping to 0). REQUIRES: ring_token_count(r) > 0. O(log n). */
size_t ring_token_index(const struct ring *r, int64_t t);
/* Endpoint owning `t` (primary, ignoring replication), or -1 on an empty
 * ring. */
int ring_owner(const struct ring *r, int64_t t);
/* Appends the ranges ending at the endpoint's tokens (its primary ranges
 * without replication), in ring order. 0 or -1 (ERR_NOMEM). */
int ring_primary_ranges(const struct ring *r, size_t ep,
			struct token_range_list *out);

/* ---- replication strategies ---------------------------------------------- */

enum ring_strategy_class {
	RING_STRATEGY_SIMPLE,
	RING_STRATEGY_NETWORK_TOPOLOGY,
	RING_STRATEGY_LOCAL,
};

struct ring_strategy;

/* Parses replication options as CQL gives them: string pairs such as
 * {"class": "NetworkTopologyStrategy", "dc1": "3"}. The class may be short
 * or `org.apache.cassandra.locator.X`. Errors (NULL, ERR_CONFIG) carry
 * Cassandra's wording, e.g. "Unable to find replication strategy class
 * 'org.apache.cassandra.locator.Foo'", "replication_factor is an option for
 * SimpleStrategy, not NetworkTopologyStrategy", "Replication factor must be
 * numeric; found x". `allow_local` admits LocalStrategy (system keyspaces);
 * without it LocalStrategy is refused as Cassandra refuses it from users.
 * Strings are copied. */
struct ring_strategy *ring_strategy_new(const char *const *keys,
					const char *const *values, size_t n,
					bool allow_local);
void ring_strategy_delete(struct ring_strategy *s);
enum ring_strategy_class ring_strategy_class(const struct ring_strategy *s);
/* Replication factor in `dc` (NTS), the single RF (Simple; dc ignored), or 1
 * (Local). */
int ring_strategy_rf(const struct ring_strategy *s, const char *dc);
/* NetworkTopologyStrategy's datacenters as configured (also those with no
 * node yet), in the order given; 0 for the other classes. `i` <
 * ring_strategy_dc_count; the name is borrowed. */
size_t ring_strategy_dc_count(const struct ring_strategy *s);
const char *ring_strategy_dc_at(const struct ring_strategy *s, size_t i,
				int *rf);
/* Canonical text, e.g. "NetworkTopologyStrategy{dc1:3,dc2:2}"; two
 * strategies with the same text place replicas identically. Borrowed. */
const char *ring_strategy_describe(const struct ring_strategy *s);

/* ---- replica placement --------------------------------------------------- */

/* Endpoint indexes (into the ring) that a token maps to. `natural` are the
 * replicas in Cassandra's order: the first is the primary replica; within a
 * DC the order is the driver's and Cassandra's rack-aware walk order.
 * `pending` are extra endpoints that writes must also reach (BOOT/LEAVING).
 * Arrays are borrowed and live while the ring is. */
struct ring_replicas {
	const uint32_t *natural;
	size_t n_natural;
	const uint32_t *pending;
	size_t n_pending;
};

/* Replicas of `token` under `s`, from the ring's cached replica map for that
 * strategy (built on first use: O(tokens * RF); then O(log n) per lookup).
 * 0 or -1 (ERR_NOMEM). An empty ring gives no replicas. */
int ring_replicas_for_token(const struct ring *r, const struct ring_strategy *s,
			    int64_t token, struct ring_replicas *out);

/* An uncached replica map, for callers that manage their own (and for the
 * benchmark). Holds a reference to the ring. */
struct ring_placement;
struct ring_placement *ring_placement_new(const struct ring *r,
					  const struct ring_strategy *s);
void ring_placement_delete(struct ring_placement *p);
void ring_placement_lookup(const struct ring_placement *p, int64_t token,
			   struct ring_replicas *out);
/* Appends the normalized ranges for which `ep` is a natural replica
 * (`primary_only`: the first replica, as `repair -pr` uses), or a pending
 * endpoint when `pending` is set. 0 or -1 (ERR_NOMEM). */
int ring_placement_ranges(const struct ring_placement *p, size_t ep,
			  bool primary_only, bool pending,
			  struct token_range_list *out);
/* The ring cut where replicas change: calls each(arg, range, rep) for
 * every range whose natural and pending replicas stay the same (adjacent
 * ranges with the same ones are merged), in token order; with `moving`,
 * only those that have pending endpoints: the ranges that move while
 * endpoints join (BOOT) or leave (LEAVING). A joining endpoint fetches the
 * ranges it is pending for from their natural replicas; a leaving one
 * hands the ranges it replicates to their pending endpoints. `rep` is
 * borrowed for the call. Stops at and returns a non-zero return of
 * `each`; else 0. Nothing for LocalStrategy. */
typedef int (*ring_piece_fn)(void *arg, struct token_range range,
			     const struct ring_replicas *rep);
int ring_placement_pieces(const struct ring_placement *p, bool moving,
			  ring_piece_fn each, void *arg);
/* The cached placement `ring_replicas_for_token` uses; borrowed, live while
 * the ring is. NULL with ERR_NOMEM. */
const struct ring_placement *ring_placement_get(const struct ring *r,
						const struct ring_strategy *s);

/* ---- snitch (GossipingPropertyFileSnitch semantics) ---------------------- */

/* Each node's dc and rack come from its rackdc.properties (conf/) and reach
 * the others by gossip, which puts them in the ring's endpoints. */

/* Proximity of `ep` seen from `from`: 0 same node, 1 same rack, 2 same DC,
 * 3 other DC. */
int ring_snitch_proximity(const struct ring *r, size_t from, size_t ep);
/* Stable-sorts endpoint indexes by proximity to `from` (read replica
 * choice): this node, same rack, same DC, other DCs. */
void ring_snitch_sort(const struct ring *r, size_t from, uint32_t *eps,
		      size_t n);

/* ---- token allocation ---------------------------------------------------- */

/* `n` random tokens from `rng`, distinct, never RING_TOKEN_MIN, none already
 * in `r` (r may be NULL). 0 or -1. */
int ring_tokens_random(struct rng *rng, const struct ring *r, size_t n,
		       int64_t *out);
/* Parses `initial_token` ("t1,t2,..." with optional spaces). Stores up to
 * `cap` tokens, sets *n. 0 or -1 (ERR_CONFIG naming the bad token, a repeat,
 * more than cap, or an empty list). */
int ring_tokens_parse_initial(const char *text, int64_t *out, size_t cap,
			      size_t *n);
/* Replication-aware allocation (allocate_tokens_for_local_replication_factor)
 * for a node joining `dc`/`rack`: picks `num_tokens` tokens that minimise the
 * spread of replicated ownership (NTS walk with RF `rf`, racks respected)
 * among the DC's endpoints. Existing tokens never move. Deterministic for a
 * given ring and seed. 0 or -1 (ERR_INVALID, ERR_NOMEM). */
int ring_tokens_allocate(const struct ring *r, const char *dc, const char *rack,
			 int rf, size_t num_tokens, uint64_t seed,
			 int64_t *out);
/* As ring_tokens_allocate, for a DC whose growth is planned: the next node
 * to join the DC will be on `next_rack` (NULL: not known, or none), and the
 * look-ahead prepares for that join only. */
int ring_tokens_allocate_planned(const struct ring *r, const char *dc,
				 const char *rack, const char *next_rack,
				 int rf, size_t num_tokens, uint64_t seed,
				 int64_t *out);
/* The bootstrap choice Cassandra makes for a joining node: `initial_token`
 * when given (it must list exactly num_tokens tokens, none already in the
 * ring), else the replication-aware allocator when alloc_rf > 0
 * (allocate_tokens_for_local_replication_factor; `next_rack` as in
 * ring_tokens_allocate_planned), else num_tokens random tokens from
 * `seed`. 0 or -1 (ERR_CONFIG for a bad initial_token, else as
 * the functions above). */
int ring_tokens_choose(const struct ring *r, const char *initial_token,
		       size_t num_tokens, int alloc_rf, const char *dc,
		       const char *rack, const char *next_rack, uint64_t seed,
		       int64_t *out);
/* Moves each of t[0..n) by a random amount of at most 2^19 (of 2^64)
 * without reaching or passing any other token of `r` (BOOT endpoints'
 * included) or of t[]: two nodes that chose the same points unaware of
 * each other end up apart, while every token keeps its place in the ring's
 * order, so the replicas of every range (and the allocator's balance, which
 * puts tokens right next to others on purpose) stay as chosen. A token
 * already in the ring is left as it is. */
void ring_tokens_jitter(const struct ring *r, struct rng *rng, int64_t *t,
			size_t n);
/* Most nodes a plan (ring_tokens_plan) may hold. */
#define RING_PLAN_NODES_MAX 128
/* Lowest max/min - 1 of replicated ownership that any tokens can give a DC
 * whose racks hold rack_nodes[0..nracks) nodes, at RF `rf` (docs/ring.md,
 * "What balance is possible"). *racks_eq_rf is set when the DC has exactly
 * RF racks of unequal sizes (each rack then owns exactly one replica of
 * every range). */
double ring_balance_floor(const size_t *rack_nodes, size_t nracks, int rf,
			  bool *racks_eq_rf);
/* Tokens for a DC grown one node at a time in a known order (Cassandra's
 * generatetokens): node i joins rack racks[i], and gets num_tokens tokens
 * in tokens[i * num_tokens ..]; spread[i] is max/min - 1 of the DC's
 * replicated ownership (NTS, RF rf) once nodes 0..i have joined. The
 * growth is run `tries` times from different seeds and the one whose worst
 * spread is lowest, over the DC sizes whose floor is within 10%, is kept.
 * `progress` (may be NULL) hears of each join: a join costs the
 * allocator's time, which grows with the DC (a 24-node growth takes about
 * 6 s, a 48-node one about 45 s). Deterministic. 0 or -1 (ERR_INVALID,
 * ERR_NOMEM). */
struct ring_plan_progress {
	/* called after each join: try 1..tries, nodes joined so far */
	void (*each)(void *arg, unsigned try_, size_t nodes);
	void *arg;
};
int ring_tokens_plan(const char *const *racks, size_t nodes, int rf,
		     size_t num_tokens, uint64_t seed, unsigned tries,
		     const struct ring_plan_progress *progress, int64_t *tokens,
		     double *spread);
/* Replicated ownership of every endpoint in `dc` under NTS with RF `rf` in
 * that DC, as a fraction of the ring (sums to min(rf, nodes)). own[] is
 * indexed by endpoint; entries outside the DC are 0. 0 or -1. */
int ring_dc_ownership(const struct ring *r, const char *dc, int rf,
		      double *own);
/* max/min - 1 of that ownership over the DC's endpoints that own tokens
 * (NORMAL and LEAVING), in *spread: the balance the allocator aims at
 * (0 for an empty DC). 0 or -1 (ERR_NOMEM). */
int ring_dc_spread(const struct ring *r, const char *dc, int rf,
		   double *spread);

#endif
