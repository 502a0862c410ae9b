/*
 * Range movements: the data of the ranges that change hands when a node
 * joins or leaves, moved with repair sessions (one per keyspace), as
 * Cassandra's bootstrap, decommission and removenode move it.
 *
 * The caller first gossips the moving endpoint's new state, so every
 * coordinator counts the endpoints that will replicate a range as pending
 * replicas (ring/'s pending endpoints) and sends them its writes:
 *
 *   bootstrap     this node, BOOT: it fetches the ranges it is pending
 *                 for from their live current replicas in its datacenter
 *                 (in any datacenter when none of its own is alive);
 *   decommission  this node, LEAVING: it hands each range it replicates
 *                 to the range's pending endpoints (its new replicas);
 *   removenode    a dead node, LEAVING as we gossip it: each range it
 *                 replicated goes to its new replicas from the live
 *                 current ones;
 *   rebuild       this node, NORMAL (no state to gossip, no ring delay):
 *                 it fetches every range it replicates from the live
 *                 replicas of a source datacenter (or of any).
 *
 * Then:
 *   1. schema (bootstrap): wait until every live peer gossips our schema
 *      version (at most SCHEMA_WAIT_ROUNDS gossip rounds; then go on with
 *      a warning), so every table to move is known here;
 *   2. nothing to move (no user keyspace has a table and a range that
 *      moves): done at once, with no ring delay;
 *   3. ring delay: wait `ring_delay` after the state went out, for it to
 *      reach every coordinator (writes they take after that reach the new
 *      replicas too);
 *   4. paxos repair (bootstrap, decommission, rebuild; Cassandra 4.1's
 *      repairPaxosForTopologyChange): per keyspace, every live natural
 *      replica of the moving ranges finishes the unfinished proposals it
 *      holds there (paxos_cleanup, node_cas_paxos_cleanup), so what is
 *      streamed holds every value Paxos may have chosen. EACH_QUORUM of
 *      each range's natural replicas must be alive. Off with
 *      paxos_repair_enabled: false or skip_paxos_repair_on_topology_change,
 *      per keyspace with skip_paxos_repair_on_topology_change_keyspaces.
 *      A failure is retried as a failed session is (below);
 *   5. per keyspace, one repair session over the moving ranges among
 *      their old and new replicas as above. Repair's row-level sync sends
 *      each replica the rows it lacks, merging versions, and tombstones
 *      travel like rows;
 *   6. done(ok): the caller gossips the final state (NORMAL, LEFT).
 *
 * A session that fails (a replica died, another repair holds the range)
 * is retried from its keyspace after RETRY_ROUNDS gossip rounds, with the
 * replicas alive then, up to `max_attempts` (0: until it works). All of it
 * runs on the loop; scans run on the repair worker.
 */
#define LOG_MODULE "movement"
#include "client/schema/schema.h"
#include "common/err.h"
#include "common/log.h"
#include "gossip/gossip.h"
#include "node/cql_cas.h"
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

static const char *const kind_names[] = {"bootstrap", "decommission",
					 "removenode", "rebuild"};

enum phase { WAIT_SCHEMA, WAIT_RING, PAXOS_REPAIR, STREAM, DONE };

/* How long the replicas of one keyspace's moving ranges get to finish
 * their unfinished proposals there. */
#define PAXOS_REPAIR_TIMEOUT_MS (120u * 1000u)

struct node_move {
	struct node *n;
	struct node_repair *nr;
	struct node_move_config c;
	const char *name; /* kind_names[c.kind] */
	struct env_timer *timer;
	enum phase phase;
	uint64_t start_us; /* when the state went out (env_mono_us) */
	unsigned rounds;   /* ticks spent waiting for schema agreement */
	size_t ki;         /* the keyspace to move next (schema order) */
	char keyspace[64]; /* the one moving, for messages */
	unsigned attempts; /* failed sessions */
	uint64_t rows, bytes, keyspaces;
	uint64_t paxos_completed; /* unfinished proposals finished */
	/* progress (node_move_get_progress): the moving (keyspace, range)
	 * pieces and keyspaces counted when streaming begins, those done,
	 * and the running session's */
	uint64_t ranges_total, ranges_done, keyspaces_total, cur_ranges;
};

/* ---- one keyspace's request ---------------------------------------------- */

struct pieces {
	struct node_move *m;
	const struct ring *ring;
	uint32_t ep; /* the moving endpoint's index in `ring` */
	struct node_repair_job *job;
	uint64_t lost; /* removenode: pieces no live replica holds */
};

static bool has(const uint32_t *v, size_t n, uint32_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static bool alive(struct pieces *ps, const struct inet_addr *a)
{
	return inet_addr_eq(a, &ps->m->n->conf.broadcast_address) ||
	       gossip_is_alive(ps->m->n->gossip, a);
}

static int push(struct inet_addr *out, size_t *k, const struct inet_addr *a)
{
	for (size_t i = 0; i < *k; i++)
		if (inet_addr_eq(&out[i], a))
			return 0;
	if (*k == REPAIR_MAX_REPLICAS)
		return err_set(ERR_INVALID, "more than %d replicas of a range",
			       REPAIR_MAX_REPLICAS);
	out[(*k)++] = *a;
	return 0;
}

/* The sources of a fetch: the live natural replicas of `dc` (rebuild's
 * source datacenter; NULL: any), or for bootstrap those of our DC, or of
 * any DC when none of ours is alive (a datacenter being added). */
static int add_sources(struct pieces *ps, const struct ring_replicas *rep,
		       const char *dc, struct inet_addr *out, size_t *k)
{
	size_t first = *k;
	const char *self = ps->m->n->conf.dc;
	bool rebuild = ps->m->c.kind == NODE_MOVE_REBUILD;
	for (int pass = 0; pass < 2 && *k == first; pass++)
		for (size_t i = 0; i < rep->n_natural; i++) {
			const struct ring_endpoint *e =
				ring_endpoint_get(ps->ring, rep->natural[i]);
			const char *want = rebuild     ? dc
					   : pass == 0 ? self
						       : NULL;
			if ((rebuild && pass == 1) ||
			    (want && strcmp(e->dc, want)) ||
			    rep->natural[i] == ps->ep || !alive(ps, &e->addr))
				continue;
			if (push(out, k, &e->addr))
				return -1;
		}
	return 0;
}

/* The piece's participants into `out` (*k of them); -1 with err set when
 * it cannot move now. */
static int participants(struct pieces *ps, struct token_range range,
			const struct ring_replicas *rep, struct inet_addr *out,
			size_t *k)
{
	const struct inet_addr *self = &ps->m->n->conf.broadcast_address;
	*k = 0;
	switch (ps->m->c.kind) {
	case NODE_MOVE_BOOTSTRAP:
	case NODE_MOVE_REBUILD:
		if (push(out, k, self) ||
		    add_sources(ps, rep, ps->m->c.source_dc, out, k))
			return -1;
		if (*k == 1)
			return err_set(ERR_UNAVAILABLE,
				       "no live replica%s%s holds (%" PRId64
				       ",%" PRId64 "]",
				       ps->m->c.source_dc ? " in " : "",
				       ps->m->c.source_dc ? ps->m->c.source_dc
							  : "",
				       range.left, range.right);
		return 0;
	case NODE_MOVE_DECOMMISSION:
	case NODE_MOVE_REMOVE:
		for (size_t i = 0; i < rep->n_pending; i++) {
			const struct ring_endpoint *e =
				ring_endpoint_get(ps->ring, rep->pending[i]);
			if (!alive(ps, &e->addr)) {
				char a[INET_ADDR_STRLEN];
				return err_set(ERR_UNAVAILABLE,
					       "%s, a new replica of (%" PRId64
					       ",%" PRId64 "], is down",
					       inet_addr_format(&e->addr, a,
								sizeof(a)),
					       range.left, range.right);
			}
			if (push(out, k, &e->addr))
				return -1;
		}
		size_t targets = *k;
		for (size_t i = 0; i < rep->n_natural; i++) {
			const struct ring_endpoint *e =
				ring_endpoint_get(ps->ring, rep->natural[i]);
			/* decommission hands its own copy over; removenode
			 * sends what the live replicas hold */
			bool source = ps->m->c.kind == NODE_MOVE_DECOMMISSION
					      ? rep->natural[i] == ps->ep
					      : rep->natural[i] != ps->ep &&
							alive(ps, &e->addr);
			if (source && push(out, k, &e->addr))
				return -1;
		}
		if (*k == targets) { /* no live copy left: nothing to send */
			ps->lost++;
			*k = 0;
		}
		return 0;
	}
	return err_set(ERR_INVALID, "unknown movement");
}

static int add_piece(void *arg, struct token_range range,
		     const struct ring_replicas *rep)
{
	struct pieces *ps = arg;
	/* a joiner fetches what it is pending for; the others move what
	 * the node replicates */
	bool moves = ps->m->c.kind == NODE_MOVE_BOOTSTRAP
			     ? has(rep->pending, rep->n_pending, ps->ep)
			     : has(rep->natural, rep->n_natural, ps->ep);
	if (!moves)
		return 0;
	/* a range nobody replicated yet (the first node of a cluster, whose
	 * system_auth has tables from the start) holds no data anywhere */
	if (ps->m->c.kind == NODE_MOVE_BOOTSTRAP && rep->n_natural == 0)
		return 0;
	struct inet_addr reps[REPAIR_MAX_REPLICAS];
	size_t k;
	if (participants(ps, range, rep, reps, &k))
		return -1;
	if (k < 2)
		return 0; /* no new replica, or no copy left to send */
	return node_repair_job_push(ps->job, range.left, range.right, reps,
				    NULL, k);
}

/* The moving pieces of `k` into `job`. -1 with err set. */
static int pieces_of(struct node_move *m, const struct cql_keyspace *k,
		     struct node_repair_job *job, uint64_t *lost)
{
	struct pieces ps = {.m = m, .job = job};
	ps.ring = members_ring(m->n->members);
	int ep = ring_endpoint_find(ps.ring, &m->c.ep);
	if (ep < 0)
		return err_set(ERR_NOT_FOUND, "the moving node has no tokens");
	ps.ep = (uint32_t)ep;
	const struct ring_placement *p =
		ring_placement_get(ps.ring, cql_keyspace_strategy(k));
	if (!p || ring_placement_pieces(p, m->c.kind != NODE_MOVE_REBUILD,
					add_piece, &ps))
		return -1;
	if (lost)
		*lost = ps.lost;
	return 0;
}

/* Whether `k` moves: a replicated user keyspace with tables, or
 * system_auth under PasswordAuthenticator (its roles move with the
 * ranges, as in Cassandra; under AllowAllAuthenticator no role can be
 * made, so there is nothing to wait for). */
static bool moves(const struct node_move *m, const struct cql_keyspace *k)
{
	if (cql_keyspace_is_system(k) &&
	    m->n->conf.authenticator != CONF_AUTH_PASSWORD)
		return false;
	return cql_keyspace_is_stored(k) && cql_keyspace_table_count(k) &&
	       ring_strategy_class(cql_keyspace_strategy(k)) !=
		       RING_STRATEGY_LOCAL;
}

/* ---- one keyspace's paxos repair ----------------------------------------- */

/* The moving ranges of a keyspace and the live natural replicas that may
 * hold proposals in them (Cassandra's topology-change paxos repair:
 * ActiveRepairService.repairPaxosForTopologyChange). */
struct ppieces {
	struct node_move *m;
	const struct ring *ring;
	uint32_t ep;
	const char *keyspace;
	struct paxos_range *ranges;
	size_t nranges, cap;
	struct inet_addr eps[REPAIR_MAX_REPLICAS * 4];
	size_t neps;
	char error[600];
};

static int paxos_piece(void *arg, struct token_range range,
		       const struct ring_replicas *rep)
{
	struct ppieces *pp = arg;
	struct node_move *m = pp->m;
	bool moves = m->c.kind == NODE_MOVE_BOOTSTRAP
			     ? has(rep->pending, rep->n_pending, pp->ep)
			     : has(rep->natural, rep->n_natural, pp->ep);
	if (!moves || rep->n_natural == 0)
		return 0;
	/* EACH_QUORUM of the natural replicas must be alive, as Cassandra
	 * asks (PaxosRepair.hasSufficientLiveNodesForTopologyChange) */
	char down[400] = "";
	size_t dlen = 0;
	bool enough = true;
	for (size_t i = 0; i < rep->n_natural; i++) {
		const struct ring_endpoint *e =
			ring_endpoint_get(pp->ring, rep->natural[i]);
		int all = 0, up = 0;
		for (size_t k = 0; k < rep->n_natural; k++) {
			const struct ring_endpoint *o =
				ring_endpoint_get(pp->ring, rep->natural[k]);
			if (strcmp(o->dc, e->dc) != 0)
				continue;
			all++;
			if (inet_addr_eq(&o->addr,
					 &m->n->conf.broadcast_address) ||
			    gossip_is_alive(m->n->gossip, &o->addr))
				up++;
		}
		if (up < all / 2 + 1)
			enough = false;
		bool alive =
			inet_addr_eq(&e->addr, &m->n->conf.broadcast_address) ||
			gossip_is_alive(m->n->gossip, &e->addr);
		if (!alive) {
			char a[INET_ADDR_STRLEN];
			int w = snprintf(
				down + dlen, sizeof(down) - dlen, "%s%s",
				dlen ? ", " : "",
				inet_addr_format(&e->addr, a, sizeof(a)));
			if (w > 0 && (size_t)w < sizeof(down) - dlen)
				dlen += (size_t)w;
			continue;
		}
		size_t j;
		for (j = 0; j < pp->neps; j++)
			if (inet_addr_eq(&pp->eps[j], &e->addr))
				break;
		if (j == pp->neps) {
			if (pp->neps == sizeof(pp->eps) / sizeof(pp->eps[0]))
				return err_set(ERR_INVALID,
					       "too many replicas to repair");
			pp->eps[pp->neps++] = e->addr;
		}
	}
	if (!enough) {
		snprintf(pp->error, sizeof(pp->error),
			 "Insufficient live nodes to repair paxos for (%" PRId64
			 ",%" PRId64 "] in %s for %s. There must be enough "
			 "live nodes to satisfy EACH_QUORUM, but the following "
			 "nodes are down: %s. This check can be skipped by "
			 "setting skip_paxos_repair_on_topology_change or "
			 "skip_paxos_repair_on_topology_change_keyspaces; "
			 "skipping it can lead to paxos correctness issues",
			 range.left, range.right, pp->keyspace, m->name, down);
		return err_set(ERR_UNAVAILABLE, "%s", pp->error);
	}
	if (pp->nranges == pp->cap) {
		size_t cap = pp->cap ? pp->cap * 2 : 16;
		struct paxos_range *v =
			realloc(pp->ranges, cap * sizeof(*pp->ranges));
		if (!v)
			return err_set(ERR_NOMEM, "paxos repair ranges");
		pp->ranges = v;
		pp->cap = cap;
	}
	pp->ranges[pp->nranges++] =
		(struct paxos_range){range.left, range.right};
	return 0;
}

static bool paxos_skipped(const struct node_move *m, const char *ks)
{
	const struct conf_string_list *l =
		&m->n->conf.skip_paxos_repair_on_topology_change_keyspaces;
	for (size_t i = 0; i < l->count; i++)
		if (strcmp(l->items[i], ks) == 0)
			return true;
	return false;
}

/* ---- the steps ----------------------------------------------------------- */

static void say(struct node_move *m, const char *line)
{
	LOG_INFO("%s: %s", m->name, line);
	if (m->c.progress)
		m->c.progress(m->c.arg, line);
}

static void arm(struct node_move *m, unsigned rounds)
{
	env_timer_arm(m->n->env, m->timer,
		      (uint64_t)rounds * m->n->conf.gossip_interval_ms * 1000u);
}

/* Whether some keyspace has a range to move. */
/* Whether a keyspace has ranges to move; counts them all for the
 * progress (ranges_total, keyspaces_total). */
static bool anything_to_move(struct node_move *m)
{
	const struct cql_schema *s = cql_service_schema(m->n->cql);
	bool any = false;
	m->ranges_total = m->keyspaces_total = 0;
	for (size_t i = 0; i < cql_schema_keyspace_count(s); i++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, i);
		struct node_repair_job j = {0};
		if (!moves(m, k))
			continue;
		int rc = pieces_of(m, k, &j, NULL);
		size_t count = j.nranges;
		node_repair_job_free(&j);
		if (count) {
			m->ranges_total += count;
			m->keyspaces_total++;
		}
		if (rc || count)
			any = true; /* on error, the stream step says why */
	}
	return any;
}

void node_move_get_progress(const struct node_move *m,
			    struct node_move_progress *out)
{
	*out = (struct node_move_progress){.kind = m->name,
					   .streaming = m->phase != DONE,
					   .ranges_total = m->ranges_total,
					   .ranges_done = m->ranges_done,
					   .keyspaces_total =
						   m->keyspaces_total,
					   .keyspaces_done = m->keyspaces,
					   .rows = m->rows,
					   .bytes = m->bytes};
}

static void finish(struct node_move *m, bool ok, const char *error)
{
	m->phase = DONE;
	if (ok) {
		char line[200];
		snprintf(line, sizeof(line),
			 "complete: %" PRIu64 " keyspaces, %" PRIu64
			 " rows (%" PRIu64 " bytes) streamed in %.1f s",
			 m->keyspaces, m->rows, m->bytes,
			 (double)(env_mono_us(m->n->env) - m->start_us) / 1e6);
		say(m, line);
	} else {
		LOG_WARN("%s failed: %s", m->name, error);
	}
	m->c.done(m->c.arg, ok, error);
}

static void stream_next(struct node_move *m);
static void paxos_next(struct node_move *m);

static void failed(struct node_move *m, const char *why)
{
	m->attempts++;
	if (m->c.max_attempts && m->attempts >= m->c.max_attempts) {
		finish(m, false, why);
		return;
	}
	char line[600];
	snprintf(line, sizeof(line),
		 "%s; retrying in %u gossip rounds (attempt %u)", why,
		 RETRY_ROUNDS, m->attempts + 1);
	LOG_WARN("%s: %s", m->name, line);
	if (m->c.progress)
		m->c.progress(m->c.arg, line);
	arm(m, RETRY_ROUNDS);
}

static void on_session(void *arg, const struct repair_summary *s)
{
	struct node_move *m = arg;
	if (!s->ok) {
		char why[400];
		snprintf(why, sizeof(why), "streaming %s failed: %s",
			 m->keyspace, s->error);
		failed(m, why);
		return;
	}
	uint64_t rows = 0, bytes = 0;
	for (size_t i = 0; i < s->npeers; i++) {
		rows += s->peers[i].rows_streamed;
		bytes += s->peers[i].bytes_streamed;
	}
	char line[300];
	snprintf(line, sizeof(line),
		 "streamed %" PRIu64 " rows (%" PRIu64 " bytes) of %s, %" PRIu64
		 " table ranges in %.1f s",
		 rows, bytes, m->keyspace, s->ranges,
		 (double)s->duration_us / 1e6);
	say(m, line);
	m->rows += rows;
	m->bytes += bytes;
	m->keyspaces++;
	m->ranges_done += m->cur_ranges;
	m->ki++;
	stream_next(m);
}

static void on_paxos(void *arg, const struct paxos_cleanup_result *res)
{
	struct node_move *m = arg;
	if (res->status != 0) {
		char why[400];
		snprintf(why, sizeof(why), "paxos repair of %s failed: %s",
			 m->keyspace, res->error);
		failed(m, why);
		return;
	}
	char line[300];
	snprintf(line, sizeof(line),
		 "paxos repair of %s: %" PRIu64
		 " unfinished proposals completed on %zu replicas",
		 m->keyspace, res->completed, res->answered);
	say(m, line);
	m->paxos_completed += res->completed;
	m->ki++;
	paxos_next(m);
}

/* Before streaming (Cassandra 4.1's repairPaxosForTopologyChange): each
 * moving keyspace's ranges get a paxos repair on their live natural
 * replicas, one keyspace at a time; then the streaming starts. A failure
 * is retried as a failed stream is. */
static void paxos_next(struct node_move *m)
{
	const struct conf *conf = &m->n->conf;
	const struct cql_schema *s = cql_service_schema(m->n->cql);
	bool off = !conf->paxos_repair_enabled ||
		   conf->skip_paxos_repair_on_topology_change ||
		   m->c.kind == NODE_MOVE_REMOVE;
	if (off && m->ki == 0 && m->c.kind != NODE_MOVE_REMOVE)
		say(m, conf->paxos_repair_enabled
			       ? "skipping the paxos repair of moving ranges: "
				 "skip_paxos_repair_on_topology_change is set"
			       : "skipping the paxos repair of moving ranges: "
				 "paxos_repair_enabled is false");
	for (; !off && m->ki < cql_schema_keyspace_count(s); m->ki++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, m->ki);
		if (!moves(m, k))
			continue;
		const char *name = cql_keyspace_meta(k)->name;
		if (paxos_skipped(m, name)) {
			char line[200];
			snprintf(line, sizeof(line),
				 "skipping the paxos repair of %s: in "
				 "skip_paxos_repair_on_topology_change_"
				 "keyspaces",
				 name);
			say(m, line);
			continue;
		}
		snprintf(m->keyspace, sizeof(m->keyspace), "%s", name);
		struct ppieces *pp = calloc(1, sizeof(*pp));
		if (!pp) {
			failed(m, "paxos repair: out of memory");
			return;
		}
		pp->m = m;
		pp->keyspace = name;
		pp->ring = members_ring(m->n->members);
		int ep = ring_endpoint_find(pp->ring, &m->c.ep);
		const struct ring_placement *p =
			ep < 0 ? NULL
			       : ring_placement_get(pp->ring,
						    cql_keyspace_strategy(k));
		pp->ep = ep < 0 ? 0 : (uint32_t)ep;
		int rc = p ? ring_placement_pieces(
				     p, m->c.kind != NODE_MOVE_REBUILD,
				     paxos_piece, pp)
			   : -1;
		char why[700];
		if (rc != 0) {
			snprintf(why, sizeof(why), "paxos repair of %s: %s",
				 name,
				 pp->error[0] ? pp->error
					      : (p ? err_msg()
						   : "the moving node has no "
						     "tokens"));
		} else if (pp->nranges > 0) {
			char line[200];
			snprintf(line, sizeof(line),
				 "paxos repair of %s: %zu ranges on %zu "
				 "replicas",
				 name, pp->nranges, pp->neps);
			say(m, line);
			rc = node_cas_paxos_cleanup(
				cql_service_cas(m->n->cql), name, pp->ranges,
				pp->nranges, pp->eps, pp->neps,
				PAXOS_REPAIR_TIMEOUT_MS, on_paxos, m);
			if (rc != 0)
				snprintf(why, sizeof(why),
					 "paxos repair of %s: %s", name,
					 err_msg());
		}
		size_t nranges = pp->nranges;
		free(pp->ranges);
		free(pp);
		if (rc != 0) {
			failed(m, why);
			return;
		}
		if (nranges > 0)
			return; /* on_paxos goes on */
	}
	m->phase = STREAM;
	m->ki = 0;
	stream_next(m);
}

/* Starts the session of the next keyspace with moving ranges; finishes
 * when none is left. */
static void stream_next(struct node_move *m)
{
	const struct cql_schema *s = cql_service_schema(m->n->cql);
	for (; m->ki < cql_schema_keyspace_count(s); m->ki++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, m->ki);
		if (!moves(m, k))
			continue;
		const char *name = cql_keyspace_meta(k)->name;
		snprintf(m->keyspace, sizeof(m->keyspace), "%s", name);
		struct node_repair_job j = {0};
		uint64_t lost = 0;
		char why[300];
		int rc = pieces_of(m, k, &j, &lost);
		if (lost)
			LOG_WARN("%s: %" PRIu64 " ranges of %s have no live "
				 "replica left: their data is lost unless "
				 "the node comes back",
				 m->name, lost, name);
		if (!rc && !j.nranges) {
			node_repair_job_free(&j);
			continue;
		}
		if (!rc)
			rc = node_repair_job_tables(&j, k, NULL, NULL);
		if (!rc) {
			struct repair_request q = {.parallelism =
							   REPAIR_PARALLEL,
						   .jobs = REPAIR_MAX_JOBS,
						   .unlisted = true};
			node_repair_job_request(&j, &q);
			m->cur_ranges = j.nranges;
			char line[200];
			snprintf(
				line, sizeof(line),
				"streaming keyspace %s: %zu tables, %zu ranges",
				name, j.ntables, j.nranges);
			say(m, line);
			rc = node_repair_start(m->nr, &q, on_session, m);
		}
		if (rc != 0)
			snprintf(why, sizeof(why), "keyspace %s: %s", name,
				 err_msg());
		node_repair_job_free(&j);
		if (rc != 0)
			failed(m, why);
		return; /* on_session goes on */
	}
	finish(m, true, "");
}

static void tick(void *arg)
{
	struct node_move *m = arg;
	struct node *n = m->n;
	switch (m->phase) {
	case WAIT_SCHEMA:
		if (m->c.kind == NODE_MOVE_BOOTSTRAP &&
		    node_schema_disagreement(n, NULL) &&
		    ++m->rounds < SCHEMA_WAIT_ROUNDS) {
			arm(m, 1);
			return;
		}
		if (m->rounds >= SCHEMA_WAIT_ROUNDS)
			LOG_WARN("%s: the schema still differs from some "
				 "peers' after %u gossip rounds; going on "
				 "with the tables known here",
				 m->name, m->rounds);
		if (!anything_to_move(m)) {
			say(m, "no data to stream");
			finish(m, true, "");
			return;
		}
		m->phase = WAIT_RING;
		/* fall through */
	case WAIT_RING: {
		/* rebuild changes no state: no one to wait for */
		uint64_t waited = env_mono_us(n->env) - m->start_us,
			 delay = m->c.kind == NODE_MOVE_REBUILD
					 ? 0
					 : n->conf.ring_delay_ms * 1000u;
		if (waited < delay) {
			env_timer_arm(n->env, m->timer, delay - waited);
			return;
		}
		m->phase = PAXOS_REPAIR;
		m->ki = 0;
		paxos_next(m);
		return;
	}
	case PAXOS_REPAIR:
		paxos_next(m); /* a retry */
		return;
	case STREAM:
		stream_next(m); /* a retry */
		return;
	case DONE:
		return;
	}
}

const char *node_move_kind_name(enum node_move_kind kind)
{
	return kind_names[kind];
}

struct node_move *node_move_start(struct node *n, struct node_repair *nr,
				  const struct node_move_config *c)
{
	struct node_move *m = calloc(1, sizeof(*m));
	if (!m || !(m->timer = env_timer_new(n->env, tick, m))) {
		free(m);
		err_set(ERR_NOMEM, "range movement");
		return NULL;
	}
	m->n = n;
	m->nr = nr;
	m->c = *c;
	m->name = kind_names[c->kind];
	m->start_us = env_mono_us(n->env);
	env_timer_arm(n->env, m->timer, 0);
	return m;
}

void node_move_delete(struct node_move *m)
{
	if (!m)
		return;
	if (m->phase == PAXOS_REPAIR && m->n->cql)
		node_cas_paxos_cleanup_cancel(cql_service_cas(m->n->cql),
					      on_paxos, m);
	env_timer_free(m->n->env, m->timer);
	free(m);
}
