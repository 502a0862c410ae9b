/*
 * Bootstrap: a new node fetches the data it will replicate before it
 * serves, as Cassandra's does (auto_bootstrap, not for seeds).
 *
 * The node gossips its tokens with STATUS BOOT, so every coordinator
 * counts it as a pending replica of the ranges it takes and sends it the
 * writes of those ranges from then on. Then:
 *
 *   1. schema: wait until every live peer gossips our schema version (at
 *      most SCHEMA_WAIT_ROUNDS gossip rounds; then go on with a warning),
 *      so every table to fetch is known here;
 *   2. nothing to fetch (no keyspace outside the system ones has a table
 *      and gives this node a range): done at once, no ring delay;
 *   3. ring delay: wait `ring_delay` after BOOT went out, for the state to
 *      reach every coordinator (writes they take after that reach us);
 *   4. per keyspace, one repair session over the pieces this node is
 *      pending for (ring_placement_pending_pieces) among this node and
 *      the live current replicas of each piece in our datacenter (or in
 *      any, when none is there). Repair's row-level sync fetches every
 *      row we lack from whichever replica holds it, merging versions, so
 *      a row a QUORUM write left on two of three replicas arrives even if
 *      the third is the one that gives the range up;
 *   5. done: the caller gossips NORMAL and opens the native port.
 *
 * A session that fails (a replica died, another repair claims the range)
 * is retried from its keyspace after RETRY_ROUNDS gossip rounds, with the
 * replicas alive then; the node stays joining (UJ) until every keyspace
 * is fetched. All of it runs on the loop; the scans run on the repair
 * worker.
 */
#define LOG_MODULE "bootstrap"
#include "client/schema.h"
#include "common/err.h"
#include "common/log.h"
#include "common/uuid.h"
#include "gossip/gossip.h"
#include "node/cql_service.h"
#include "node/members.h"
#include "node/node_internal.h"
#include "repair/repair.h"
#include "ring/ring.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA_WAIT_ROUNDS 60
#define RETRY_ROUNDS       5
#define BOOTSTRAP_JOBS     REPAIR_MAX_JOBS

enum phase { WAIT_SCHEMA, WAIT_RING, STREAM, DONE };

struct node_bootstrap {
	struct node *n;
	struct node_repair *nr;
	node_bootstrap_done_fn done;
	struct env_timer *timer;
	enum phase phase;
	uint64_t boot_us;  /* when BOOT went out (env_mono_us) */
	unsigned rounds;   /* ticks spent waiting for schema agreement */
	size_t ki;         /* the keyspace to fetch next (schema order) */
	char keyspace[64]; /* the one being fetched, for messages */
	unsigned attempts;
	uint64_t rows, bytes, keyspaces;
};

/* ---- one keyspace's request ---------------------------------------------- */

struct pieces {
	struct node *n;
	const struct ring *ring;
	struct repair_range *v;
	struct inet_addr *addrs; /* REPAIR_MAX_REPLICAS per range */
	size_t count, cap;
};

/* The sources of a piece: its live current replicas in our DC, or in any
 * DC when none of ours is alive (a datacenter being added). */
static size_t sources(struct pieces *ps, const uint32_t *natural, size_t n,
		      struct inet_addr *out)
{
	size_t k = 0;
	for (int pass = 0; pass < 2 && k <= 1; pass++)
		for (size_t i = 0; i < n && k < REPAIR_MAX_REPLICAS; i++) {
			const struct ring_endpoint *e =
				ring_endpoint_get(ps->ring, natural[i]);
			if ((pass == 0 && strcmp(e->dc, ps->n->conf.dc)) ||
			    inet_addr_eq(&e->addr,
					 &ps->n->conf.listen_address) ||
			    !gossip_is_alive(ps->n->gossip, &e->addr))
				continue;
			out[k++] = e->addr;
		}
	return k;
}

static int add_piece(void *arg, struct token_range range,
		     const uint32_t *natural, size_t n)
{
	struct pieces *ps = arg;
	if (ps->count == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 64;
		struct repair_range *v = realloc(ps->v, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "bootstrap ranges");
		ps->v = v;
		struct inet_addr *a = realloc(
			ps->addrs, cap * REPAIR_MAX_REPLICAS * sizeof(*a));
		if (!a)
			return err_set(ERR_NOMEM, "bootstrap ranges");
		ps->addrs = a;
		ps->cap = cap;
	}
	struct inet_addr *reps = &ps->addrs[ps->count * REPAIR_MAX_REPLICAS];
	reps[0] = ps->n->conf.listen_address;
	size_t k = sources(ps, natural, n, reps + 1);
	if (k == 0)
		return err_set(ERR_UNAVAILABLE,
			       "no live replica holds (%" PRId64 ",%" PRId64
			       "]",
			       range.left, range.right);
	ps->v[ps->count++] = (struct repair_range){
		.start = range.left, .end = range.right, .nreplicas = k + 1};
	return 0;
}

static void pieces_free(struct pieces *ps)
{
	free(ps->v);
	free(ps->addrs);
}

/* The tables of `k` as repair names them; *count 0 when it has none. */
static struct repair_table *tables_of(const struct cql_keyspace *k,
				      char (**names)[300], size_t *count)
{
	size_t nt = cql_keyspace_table_count(k);
	*count = 0;
	*names = NULL;
	if (!nt)
		return NULL;
	struct repair_table *t = calloc(nt, sizeof(*t));
	*names = calloc(nt, sizeof(**names));
	if (!t || !*names) {
		free(t);
		free(*names);
		*names = NULL;
		err_set(ERR_NOMEM, "bootstrap tables");
		return NULL;
	}
	for (size_t i = 0; i < nt; i++) {
		const struct storage_table_meta *m =
			cql_table_meta(cql_keyspace_table_at(k, i));
		memcpy(t[i].id, m->id, 16);
		snprintf((*names)[i], sizeof((*names)[i]), "%s.%s",
			 cql_keyspace_meta(k)->name, m->name);
		t[i].name = (*names)[i];
	}
	*count = nt;
	return t;
}

/* Whether `k` is fetched: a replicated user keyspace with tables. */
static bool fetched(const struct cql_keyspace *k)
{
	return !cql_keyspace_is_system(k) && cql_keyspace_table_count(k) &&
	       ring_strategy_class(cql_keyspace_strategy(k)) !=
		       RING_STRATEGY_LOCAL;
}

/* The pieces of `k` this node is pending for. -1 with err set. */
static int pieces_of(struct node_bootstrap *b, const struct cql_keyspace *k,
		     struct pieces *ps)
{
	memset(ps, 0, sizeof(*ps));
	ps->n = b->n;
	ps->ring = members_ring(b->n->members);
	int self = ring_endpoint_find(ps->ring, &b->n->conf.listen_address);
	if (self < 0)
		return err_set(ERR_NOT_FOUND, "this node is not in the ring");
	const struct ring_placement *p =
		ring_placement_get(ps->ring, cql_keyspace_strategy(k));
	if (!p)
		return -1;
	if (ring_placement_pending_pieces(p, (size_t)self, add_piece, ps)) {
		pieces_free(ps);
		return -1;
	}
	for (size_t i = 0; i < ps->count; i++)
		ps->v[i].replicas = &ps->addrs[i * REPAIR_MAX_REPLICAS];
	return 0;
}

/* ---- the steps ----------------------------------------------------------- */

static void arm(struct node_bootstrap *b, unsigned rounds)
{
	env_timer_arm(b->n->env, b->timer,
		      (uint64_t)rounds * b->n->conf.gossip_interval_ms * 1000u);
}

static bool schema_agrees(struct node *n)
{
	uint8_t v[16];
	char ours[37];
	cql_service_schema_version(n->cql, v);
	uuid_format(v, ours);
	for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
		struct gossip_endpoint_info info;
		if (gossip_endpoint_at(n->gossip, i, &info) != 0 ||
		    info.is_self || !info.alive)
			continue;
		const char *theirs = info.states[GOSSIP_STATE_SCHEMA];
		if (!theirs || strcmp(theirs, ours) != 0)
			return false;
	}
	return true;
}

/* Whether some keyspace gives this node a range to fetch. */
static bool anything_to_fetch(struct node_bootstrap *b)
{
	const struct cql_schema *s = cql_service_schema(b->n->cql);
	for (size_t i = 0; i < cql_schema_keyspace_count(s); i++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, i);
		struct pieces ps;
		if (!fetched(k))
			continue;
		if (pieces_of(b, k, &ps) != 0)
			return true; /* let the stream step say why */
		size_t count = ps.count;
		pieces_free(&ps);
		if (count)
			return true;
	}
	return false;
}

static void finish(struct node_bootstrap *b)
{
	b->phase = DONE;
	uint64_t s = (env_mono_us(b->n->env) - b->boot_us) / 1000000u;
	LOG_INFO("bootstrap complete: %" PRIu64 " keyspaces, %" PRIu64
		 " rows (%" PRIu64 " bytes) fetched, %" PRIu64 " s after BOOT",
		 b->keyspaces, b->rows, b->bytes, s);
	b->done(b->n);
}

static void stream_next(struct node_bootstrap *b);

static void retry(struct node_bootstrap *b, const char *why)
{
	b->attempts++;
	LOG_WARN("%s; retrying in %u gossip rounds (attempt %u)", why,
		 RETRY_ROUNDS, b->attempts + 1);
	arm(b, RETRY_ROUNDS);
}

static void on_session(void *arg, const struct repair_summary *s)
{
	struct node_bootstrap *b = arg;
	if (!s->ok) {
		char why[400];
		snprintf(why, sizeof(why), "fetching %s failed: %s",
			 b->keyspace, s->error);
		retry(b, why);
		return;
	}
	uint64_t rows = 0, bytes = 0;
	for (size_t i = 0; i < s->npeers; i++) {
		rows += s->peers[i].rows_fetched;
		bytes += s->peers[i].bytes_fetched;
	}
	LOG_INFO("fetched %" PRIu64 " rows (%" PRIu64 " bytes) of %s, %" PRIu64
		 " table ranges in %.1f s",
		 rows, bytes, b->keyspace, s->ranges,
		 (double)s->duration_us / 1e6);
	b->rows += rows;
	b->bytes += bytes;
	b->keyspaces++;
	b->ki++;
	stream_next(b);
}

/* Starts the session of the next keyspace with pieces; finishes when none
 * is left. */
static void stream_next(struct node_bootstrap *b)
{
	const struct cql_schema *s = cql_service_schema(b->n->cql);
	for (; b->ki < cql_schema_keyspace_count(s); b->ki++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, b->ki);
		if (!fetched(k))
			continue;
		const char *name = cql_keyspace_meta(k)->name;
		struct pieces ps;
		char why[300];
		if (pieces_of(b, k, &ps) != 0) {
			snprintf(why, sizeof(why), "keyspace %s: %s", name,
				 err_msg());
			retry(b, why);
			return;
		}
		if (!ps.count) {
			pieces_free(&ps);
			continue;
		}
		char(*names)[300];
		size_t nt;
		struct repair_table *tables = tables_of(k, &names, &nt);
		struct repair_request q = {.tables = tables,
					   .ntables = nt,
					   .ranges = ps.v,
					   .nranges = ps.count,
					   .parallelism = REPAIR_PARALLEL,
					   .jobs = BOOTSTRAP_JOBS};
		snprintf(b->keyspace, sizeof(b->keyspace), "%s", name);
		LOG_INFO("fetching keyspace %s: %zu tables, %zu "
			 "ranges",
			 name, nt, ps.count);
		int rc = tables ? node_repair_start(b->nr, &q, on_session, b)
				: -1;
		if (rc != 0)
			snprintf(why, sizeof(why), "keyspace %s: %s", name,
				 err_msg());
		free(tables);
		free(names);
		pieces_free(&ps);
		if (rc != 0)
			retry(b, why);
		return; /* on_session goes on */
	}
	finish(b);
}

static void tick(void *arg)
{
	struct node_bootstrap *b = arg;
	struct node *n = b->n;
	switch (b->phase) {
	case WAIT_SCHEMA:
		if (!schema_agrees(n) && ++b->rounds < SCHEMA_WAIT_ROUNDS) {
			arm(b, 1);
			return;
		}
		if (b->rounds >= SCHEMA_WAIT_ROUNDS)
			LOG_WARN("the schema still differs from "
				 "some peers' after %u gossip rounds; going "
				 "on with the tables known here",
				 b->rounds);
		if (!anything_to_fetch(b)) {
			LOG_INFO("no data to fetch");
			finish(b);
			return;
		}
		b->phase = WAIT_RING;
		/* fall through */
	case WAIT_RING: {
		uint64_t waited = env_mono_us(n->env) - b->boot_us,
			 delay = n->conf.ring_delay_ms * 1000u;
		if (waited < delay) {
			env_timer_arm(n->env, b->timer, delay - waited);
			return;
		}
		b->phase = STREAM;
		b->ki = 0;
		stream_next(b);
		return;
	}
	case STREAM:
		stream_next(b); /* a retry */
		return;
	case DONE:
		return;
	}
}

struct node_bootstrap *node_bootstrap_new(struct node *n,
					  struct node_repair *nr,
					  node_bootstrap_done_fn done)
{
	struct node_bootstrap *b = calloc(1, sizeof(*b));
	if (!b || !(b->timer = env_timer_new(n->env, tick, b))) {
		free(b);
		err_set(ERR_NOMEM, "bootstrap");
		return NULL;
	}
	b->n = n;
	b->nr = nr;
	b->done = done;
	b->boot_us = env_mono_us(n->env);
	env_timer_arm(n->env, b->timer, 0);
	return b;
}

void node_bootstrap_delete(struct node_bootstrap *b)
{
	if (!b)
		return;
	env_timer_free(b->n->env, b->timer);
	free(b);
}
