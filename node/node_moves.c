/*
 * nodetool's commands that move ranges between nodes (movement.c does the
 * streaming):
 *
 *   decommission [--force]   this node leaves: it gossips LEAVING, streams
 *                            each range it replicates to the range's new
 *                            replicas, gossips LEFT, keeps
 *                            `decommissioned` in local_state (it refuses
 *                            to start again) and stops ring_delay later,
 *                            once the ring has heard. Refused, as
 *                            Cassandra refuses it, when a keyspace's RF
 *                            is at least the nodes of the DC (the data
 *                            would have fewer replicas), unless --force.
 *   removenode <host id>     a dead node leaves: we gossip LEAVING on its
 *                            behalf (gossip_set_remote_state), its ranges
 *                            go to their new replicas from the live
 *                            copies, then we gossip it LEFT.
 *   removenode status        the removal under way, if any.
 *   rebuild [source dc]      this node fetches every range it replicates
 *                            (from the source datacenter's replicas).
 *   assassinate <address>    a dead node is gossiped LEFT at once,
 *                            nothing streamed (the last resort).
 *
 * A decommission or removenode fails back to NORMAL when streaming fails
 * MAX_ATTEMPTS times; the data is then where it was. One at a time per
 * node.
 */
#define LOG_MODULE "node"
#include "client/schema/schema.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "gossip/gossip.h"
#include "node/admin.h"
#include "node/cql_service.h"
#include "node/members.h"
#include "node/node_internal.h"
#include "replication/hints.h"
#include "ring/ring.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Failed streaming sessions before giving up: about a minute (another
 * node's scheduled segment may hold a range for a while). */
#define MAX_ATTEMPTS 10
/* How long a LEFT state says it is kept (Cassandra's 3 days), in ms. */
#define LEFT_EXPIRY_MS (3ull * 24 * 3600 * 1000)

struct node_moves {
	struct node *n;
	struct node_move *move;
	struct admin_reply *reply;
	enum node_move_kind kind; /* the command's: not BOOTSTRAP */
	char source_dc[64];       /* rebuild's; "" for any */
	struct inet_addr ep;      /* the node leaving */
	char host_id[37];
	int64_t token; /* its first token, for STATUS */
	struct env_timer *stop_timer;
	bool handing; /* decommission: hints go to another node */
	struct inet_addr hints_to;
};

/* STATUS `status` ("LEFT": with its expiry) of a node whose first token
 * is `token`. */
static void status_value(char *v, size_t cap, const char *status, int64_t token,
			 struct env *env)
{
	if (strcmp(status, "LEFT") == 0)
		snprintf(v, cap, "LEFT,%lld,%llu", (long long)token,
			 (unsigned long long)(env_wall_us(env) / 1000 +
					      LEFT_EXPIRY_MS));
	else
		snprintf(v, cap, "%s,%lld", status, (long long)token);
}

/* The leaving node's STATUS: ours, or the dead node's on its behalf. */
static int set_status(struct node_moves *l, const char *status)
{
	char v[96];
	status_value(v, sizeof(v), status, l->token, l->n->env);
	if (l->kind == NODE_MOVE_REBUILD)
		return 0; /* the node stays NORMAL */
	return l->kind == NODE_MOVE_REMOVE
		       ? gossip_set_remote_state(l->n->gossip, &l->ep,
						 GOSSIP_STATE_STATUS_WITH_PORT,
						 v)
		       : gossip_set_local_state(l->n->gossip,
						GOSSIP_STATE_STATUS_WITH_PORT,
						v);
}

static const char *command(const struct node_moves *l)
{
	return node_move_kind_name(l->kind);
}

static void on_progress(void *arg, const char *line)
{
	struct node_moves *l = arg;
	char text[700];
	snprintf(text, sizeof(text), "[%s] %s\n", command(l), line);
	if (l->reply)
		admin_reply_progress(l->reply, text);
}

static void finish(struct node_moves *l, int status, const char *out,
		   const char *err)
{
	if (l->reply)
		admin_reply_finish(l->reply, status, out, err);
	l->reply = NULL;
}

/* ring_delay after LEFT: the ring has heard; the command answers (as
 * nodetool's returns once the node has left) and the node stops. */
static void on_stop(void *arg)
{
	struct node_moves *l = arg;
	char a[INET_ADDR_STRLEN], out[300];
	snprintf(out, sizeof(out),
		 "Decommissioned: %s left the ring; the node stops now\n",
		 inet_addr_format(&l->ep, a, sizeof(a)));
	finish(l, 0, out, "");
	node_stop(l->n, "decommissioned");
}

static void leave(struct node_moves *l);
static void hand_over_hints(struct node_moves *l);

static void on_moved(void *arg, bool ok, const char *error)
{
	struct node_moves *l = arg;
	char a[INET_ADDR_STRLEN], out[300], err[600];
	inet_addr_format(&l->ep, a, sizeof(a));
	node_move_delete(l->move); /* done() may delete it */
	l->move = NULL;
	if (!ok) {
		/* the data is where it was: back to NORMAL */
		if (set_status(l, "NORMAL") != 0)
			LOG_ERROR("cannot gossip NORMAL again: %s", err_msg());
		snprintf(err, sizeof(err), "error: %s of %s failed: %s%s\n",
			 command(l), a, error,
			 l->kind == NODE_MOVE_REBUILD ? ""
						      : "; it is NORMAL again");
		finish(l, 2, "", err);
		return;
	}
	if (l->kind == NODE_MOVE_REBUILD) {
		snprintf(out, sizeof(out), "Rebuilt %s\n", a);
		finish(l, 0, out, "");
		return;
	}
	if (l->kind == NODE_MOVE_DECOMMISSION)
		hand_over_hints(l); /* then leave() */
	else
		leave(l);
}

/* The data is with its new replicas: the node (or the dead node on whose
 * behalf we act) leaves the ring. */
static void leave(struct node_moves *l)
{
	struct node *n = l->n;
	char a[INET_ADDR_STRLEN], out[300], err[600];
	inet_addr_format(&l->ep, a, sizeof(a));
	/* recorded first: a crash from here on must not bring the node back
	 * with its old ranges */
	if (l->kind == NODE_MOVE_DECOMMISSION) {
		n->local.decommissioned = true;
		if (local_state_save(n->env, n->conf.saved_caches_directory,
				     &n->local) != 0)
			LOG_ERROR("cannot record the decommission: %s",
				  err_msg());
	}
	if (set_status(l, "LEFT") != 0) {
		snprintf(err, sizeof(err), "error: cannot gossip LEFT: %s\n",
			 err_msg());
		finish(l, 2, "", err);
		return;
	}
	if (l->kind == NODE_MOVE_REMOVE) {
		LOG_INFO("removenode: %s (host id %s) left the ring", a,
			 l->host_id);
		snprintf(out, sizeof(out), "Removed %s (host id %s)\n", a,
			 l->host_id);
		finish(l, 0, out, "");
		return;
	}
	/* as Cassandra: clients go at once (their drivers move to other
	 * nodes); gossip goes on until the ring has heard */
	cql_service_stop_serving(n->cql);
	gossip_set_local_state(n->gossip, GOSSIP_STATE_RPC_READY, "false");
	LOG_INFO("decommissioned: left the ring, native transport closed; "
		 "stopping in %" PRIu64 " ms",
		 n->conf.ring_delay_ms);
	snprintf(out, sizeof(out),
		 "LEFT gossiped; waiting %.1f s for the ring to hear it",
		 (double)n->conf.ring_delay_ms / 1000.0);
	on_progress(l, out);
	env_timer_arm(n->env, l->stop_timer, n->conf.ring_delay_ms * 1000u);
}

/* Hints this node keeps (for *hosts other nodes). */
static uint64_t pending_hints(struct node_moves *l, size_t *hosts)
{
	struct hints *h = cql_service_hints(l->n->cql);
	*hosts = 0;
	if (!h)
		return 0;
	enum { CAP = 64 };
	struct hints_host_stats st[CAP];
	*hosts = hints_list_pending(h, st, CAP);
	if (*hosts > CAP) {
		struct hints_stats all;
		hints_get_stats(h, &all);
		return all.stored; /* an upper bound; enough for a message */
	}
	uint64_t records = 0;
	for (size_t i = 0; i < *hosts; i++)
		records += st[i].records;
	return records;
}

static void on_handed(void *arg, bool ok)
{
	struct node_moves *l = arg;
	l->handing = false;
	size_t hosts;
	uint64_t left = pending_hints(l, &hosts);
	char a[INET_ADDR_STRLEN], line[300];
	inet_addr_format(&l->hints_to, a, sizeof(a));
	if (ok)
		snprintf(line, sizeof(line), "hints handed over to %s", a);
	else
		snprintf(line, sizeof(line),
			 "warning: handing hints over to %s failed: %" PRIu64
			 " hints for %zu nodes leave with this node (repair "
			 "brings their data)",
			 a, left, hosts);
	if (ok)
		LOG_INFO("decommission: %s", line);
	else
		LOG_WARN("decommission: %s", line);
	on_progress(l, line);
	leave(l);
}

/* A live NORMAL peer to take our hints: of our DC if there is one. */
static bool hints_target(struct node_moves *l, struct inet_addr *out)
{
	struct node *n = l->n;
	struct ring *r = members_ring(n->members);
	bool found = false;
	for (size_t i = 0; i < ring_endpoint_count(r); i++) {
		const struct ring_endpoint *e = ring_endpoint_get(r, i);
		if (e->status != RING_STATUS_NORMAL ||
		    inet_addr_eq(&e->addr, &l->ep) ||
		    !gossip_is_alive(n->gossip, &e->addr))
			continue;
		if (strcmp(e->dc, n->conf.dc) == 0) {
			*out = e->addr;
			return true;
		}
		if (!found)
			*out = e->addr;
		found = true;
	}
	return found;
}

/* Decommission, once the ranges are streamed: the hints this node keeps
 * for down replicas go to a live node, which delivers them when their
 * targets come back (Cassandra's decommission streams them too); then
 * leave(). */
static void hand_over_hints(struct node_moves *l)
{
	size_t hosts;
	uint64_t records = pending_hints(l, &hosts);
	if (!records) {
		leave(l);
		return;
	}
	char a[INET_ADDR_STRLEN], line[300];
	if (!hints_target(l, &l->hints_to)) {
		snprintf(line, sizeof(line),
			 "warning: no live node to take %" PRIu64
			 " hints for %zu nodes: they leave with this node "
			 "(repair brings their data)",
			 records, hosts);
		LOG_WARN("decommission: %s", line);
		on_progress(l, line);
		leave(l);
		return;
	}
	snprintf(line, sizeof(line),
		 "handing %" PRIu64 " hints for %zu nodes over to %s", records,
		 hosts, inet_addr_format(&l->hints_to, a, sizeof(a)));
	LOG_INFO("decommission: %s", line);
	on_progress(l, line);
	l->handing = true; /* on_handed may run before the call returns */
	if (cql_service_hand_over_hints(l->n->cql, &l->hints_to, on_handed,
					l) != 0) {
		l->handing = false;
		LOG_WARN("decommission: cannot hand hints over: %s", err_msg());
		leave(l);
	}
}

static int start_move(struct node_moves *l, struct buf *err)
{
	if (set_status(l, "LEAVING") != 0) {
		admin_printf(err, "cannot gossip LEAVING: %s\n", err_msg());
		return 2;
	}
	struct node_move_config mc = {
		.kind = l->kind,
		.source_dc = l->source_dc[0] ? l->source_dc : NULL,
		.ep = l->ep,
		.max_attempts = MAX_ATTEMPTS,
		.progress = on_progress,
		.done = on_moved,
		.arg = l};
	if (!(l->reply = admin_defer(l->n->admin)) ||
	    !(l->move = node_move_start(l->n, l->n->repair, &mc))) {
		if (l->reply)
			finish(l, 2, "", "error: out of memory\n");
		set_status(l, "NORMAL");
		admin_printf(err, "%s\n", err_msg());
		return 2;
	}
	char a[INET_ADDR_STRLEN], line[200];
	inet_addr_format(&l->ep, a, sizeof(a));
	if (l->kind == NODE_MOVE_REBUILD)
		snprintf(line, sizeof(line), "%s fetches its ranges from %s", a,
			 l->source_dc[0] ? l->source_dc : "any datacenter");
	else
		snprintf(line, sizeof(line),
			 "%s (host id %s) is LEAVING; streaming starts in "
			 "%.1f s",
			 a, l->host_id,
			 (double)l->n->conf.ring_delay_ms / 1000.0);
	on_progress(l, line);
	return ADMIN_PENDING;
}

/* One range movement at a time in the ring (Cassandra's consistent range
 * movement): a leave computed while another node joins or leaves would
 * hand ranges to replicas that are about to change. `target` may be
 * moving itself (a dead joiner being removed). */
static bool ring_busy(struct node_moves *l, const struct inet_addr *target,
		      struct buf *err)
{
	const struct ring_endpoint *e = members_moving(l->n->members, target);
	if (!e)
		return false;
	char a[INET_ADDR_STRLEN];
	admin_printf(err,
		     "%s is %s: wait until it is done (removenode it if it "
		     "died)\n",
		     inet_addr_format(&e->addr, a, sizeof(a)),
		     e->status == RING_STATUS_BOOT ? "joining" : "leaving");
	return true;
}

static bool busy(struct node_moves *l, struct buf *err)
{
	if (l->move || l->reply) {
		admin_printf(err, "a decommission, removenode or rebuild is "
				  "already running on this node\n");
		return true;
	}
	if (l->n->bootstrap || l->n->local.bootstrapping ||
	    !l->n->local.token_count) {
		admin_printf(err, "this node has not joined the ring yet\n");
		return true;
	}
	return false;
}

/* Cassandra's check: leaving must not leave a keyspace's data with fewer
 * replicas than its RF in our DC. */
static int replication_allows(struct node *n, struct buf *err)
{
	struct ring *r = members_ring(n->members);
	size_t in_dc = 0, all = 0;
	for (size_t i = 0; i < ring_endpoint_count(r); i++) {
		const struct ring_endpoint *e = ring_endpoint_get(r, i);
		if (e->status == RING_STATUS_BOOT || !e->num_tokens)
			continue;
		all++;
		in_dc += strcmp(e->dc, n->conf.dc) == 0;
	}
	if (all < 2) {
		admin_printf(err, "no other normal nodes in the ring; "
				  "decommission would be pointless\n");
		return -1;
	}
	const struct cql_schema *s = cql_service_schema(n->cql);
	for (size_t i = 0; i < cql_schema_keyspace_count(s); i++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(s, i);
		const struct ring_strategy *st = cql_keyspace_strategy(k);
		if (cql_keyspace_is_system(k) ||
		    ring_strategy_class(st) == RING_STRATEGY_LOCAL)
			continue;
		bool simple = ring_strategy_class(st) == RING_STRATEGY_SIMPLE;
		size_t nodes = simple ? all : in_dc;
		int rf = ring_strategy_rf(st, n->conf.dc);
		if (rf > 0 && (size_t)rf >= nodes) {
			admin_printf(err,
				     "Not enough live nodes to maintain "
				     "replication factor in keyspace %s (RF = "
				     "%d, N = %zu). Perform a forceful "
				     "decommission to ignore.\n",
				     cql_keyspace_meta(k)->name, rf, nodes);
			return -1;
		}
	}
	return 0;
}

static int cmd_decommission(void *arg, size_t argc, const char *const *argv,
			    struct buf *out, struct buf *err)
{
	(void)out;
	struct node_moves *l = arg;
	struct node *n = l->n;
	bool force = argc == 1 && (strcmp(argv[0], "--force") == 0 ||
				   strcmp(argv[0], "-f") == 0);
	if (argc > 1 || (argc == 1 && !force)) {
		admin_printf(err, "usage: decommission [--force]\n");
		return 1;
	}
	if (busy(l, err) || ring_busy(l, NULL, err) ||
	    (!force && replication_allows(n, err) != 0))
		return 2;
	l->kind = NODE_MOVE_DECOMMISSION;
	l->source_dc[0] = '\0';
	l->ep = n->conf.broadcast_address;
	memcpy(l->host_id, n->local.host_id, sizeof(l->host_id));
	l->token = n->local.tokens[0];
	return start_move(l, err);
}

static int remove_status(struct node_moves *l, struct buf *out)
{
	char a[INET_ADDR_STRLEN];
	if (l->kind == NODE_MOVE_REMOVE && l->move)
		admin_printf(out, "RemovalStatus: Removing %s (host id %s)\n",
			     inet_addr_format(&l->ep, a, sizeof(a)),
			     l->host_id);
	else
		admin_printf(out, "RemovalStatus: No removals in process.\n");
	return 0;
}

static int cmd_removenode(void *arg, size_t argc, const char *const *argv,
			  struct buf *out, struct buf *err)
{
	struct node_moves *l = arg;
	struct node *n = l->n;
	if (argc != 1) {
		admin_printf(err, "usage: removenode <host id> | status\n");
		return 1;
	}
	if (strcmp(argv[0], "status") == 0)
		return remove_status(l, out);
	uint8_t id[16];
	if (members_parse_host_id(argv[0], id) != 0) {
		admin_printf(err, "not a host id: %s\n", argv[0]);
		return 1;
	}
	if (busy(l, err))
		return 2;
	struct ring *r = members_ring(n->members);
	int i = ring_endpoint_find_host_id(r, id);
	if (i < 0) {
		admin_printf(err, "Host ID not found.\n");
		return 2;
	}
	const struct ring_endpoint *e = ring_endpoint_get(r, (size_t)i);
	char a[INET_ADDR_STRLEN];
	inet_addr_format(&e->addr, a, sizeof(a));
	if (inet_addr_eq(&e->addr, &n->conf.broadcast_address)) {
		admin_printf(err, "Cannot remove self\n");
		return 2;
	}
	struct inet_addr target = e->addr; /* e lives until the ring changes */
	if (ring_busy(l, &target, err))
		return 2;
	if (gossip_is_alive(n->gossip, &e->addr)) {
		admin_printf(
			err,
			"Node /%s is alive and owns this ID. Use "
			"decommission command to remove it from the ring\n",
			a);
		return 2;
	}
	l->kind = NODE_MOVE_REMOVE;
	l->source_dc[0] = '\0';
	l->ep = e->addr;
	snprintf(l->host_id, sizeof(l->host_id), "%s", argv[0]);
	l->token = e->tokens[0];
	if (e->status == RING_STATUS_BOOT) {
		/* it died joining: it replicates nothing yet, but coordinators
		 * keep sending it writes (and counting it) until it is gone */
		if (set_status(l, "LEFT") != 0) {
			admin_printf(err, "cannot gossip LEFT: %s\n",
				     err_msg());
			return 2;
		}
		LOG_INFO("removenode: %s (host id %s), which was joining, left "
			 "the ring",
			 a, l->host_id);
		admin_printf(out,
			     "Removed %s (host id %s); it was joining: nothing "
			     "to stream\n",
			     a, l->host_id);
		return 0;
	}
	/* NORMAL, or LEAVING when a decommission died midway */
	return start_move(l, err);
}

/* nodetool assassinate <address>: the last resort for a dead node that
 * removenode cannot take out (its replicas are gone too): it is gossiped
 * LEFT on its behalf at once, and nothing is streamed. */
static int cmd_assassinate(void *arg, size_t argc, const char *const *argv,
			   struct buf *out, struct buf *err)
{
	struct node_moves *l = arg;
	struct node *n = l->n;
	struct inet_addr a;
	if (argc != 1 ||
	    inet_addr_parse(argv[0], (uint16_t)n->conf.storage_port, &a)) {
		admin_printf(err, "usage: assassinate <address>\n");
		return 1;
	}
	struct gossip_endpoint_info info;
	if (gossip_endpoint_find(n->gossip, &a, &info) != 0) {
		admin_printf(err, "unknown node: %s\n", argv[0]);
		return 2;
	}
	if (info.is_self || info.alive) {
		admin_printf(err,
			     "%s is %s: only a dead node can be assassinated "
			     "(use decommission)\n",
			     argv[0], info.is_self ? "this node" : "alive");
		return 2;
	}
	char text[INET_ADDR_STRLEN];
	inet_addr_format(&a, text, sizeof(text));
	if (info.generation == 0) {
		/* known only from our saved peers: nobody gossips it */
		if (gossip_remove_endpoint(n->gossip, &a) != 0) {
			admin_printf(err, "cannot forget it: %s\n", err_msg());
			return 2;
		}
		LOG_WARN("assassinate: %s, known only from the saved peers, "
			 "forgotten",
			 text);
		admin_printf(out,
			     "Assassinated %s (known only from this node's "
			     "saved peers: forgotten)\n",
			     text);
		return 0;
	}
	const char *tok = info.states[GOSSIP_STATE_TOKENS];
	char v[96];
	status_value(v, sizeof(v), "LEFT", tok ? strtoll(tok, NULL, 10) : 0,
		     n->env);
	if (gossip_set_remote_state(n->gossip, &a,
				    GOSSIP_STATE_STATUS_WITH_PORT, v) != 0) {
		admin_printf(err, "cannot gossip LEFT: %s\n", err_msg());
		return 2;
	}
	LOG_WARN("assassinate: %s gossiped LEFT; its data was not streamed",
		 text);
	admin_printf(out,
		     "Assassinated %s (nothing was streamed: repair the "
		     "keyspaces it replicated)\n",
		     text);
	return 0;
}

/* nodetool rebuild [source dc]: this node fetches every range it
 * replicates from their replicas in the source datacenter (any other node
 * without one): how a datacenter added with auto_bootstrap: false, or one
 * whose data was lost, is filled. */
static int cmd_rebuild(void *arg, size_t argc, const char *const *argv,
		       struct buf *out, struct buf *err)
{
	(void)out;
	struct node_moves *l = arg;
	struct node *n = l->n;
	if (argc > 1) {
		admin_printf(err, "usage: rebuild [source datacenter]\n");
		return 1;
	}
	if (busy(l, err))
		return 2;
	if (argc == 1) {
		struct ring *r = members_ring(n->members);
		bool known = false;
		for (size_t i = 0; i < ring_dc_count(r) && !known; i++)
			known = strcmp(ring_dc_name(r, i), argv[0]) == 0;
		if (!known || strlen(argv[0]) >= sizeof(l->source_dc)) {
			admin_printf(err, "unknown datacenter: %s\n", argv[0]);
			return 2;
		}
	}
	l->kind = NODE_MOVE_REBUILD;
	snprintf(l->source_dc, sizeof(l->source_dc), "%s", argc ? argv[0] : "");
	l->ep = n->conf.broadcast_address;
	memcpy(l->host_id, n->local.host_id, sizeof(l->host_id));
	l->token = n->local.tokens[0];
	return start_move(l, err);
}

struct node_moves *node_moves_new(struct node *n)
{
	struct node_moves *l = calloc(1, sizeof(*l));
	if (!l || !(l->stop_timer = env_timer_new(n->env, on_stop, l))) {
		free(l);
		err_set(ERR_NOMEM, "decommission");
		return NULL;
	}
	l->n = n;
	if (admin_register(n->admin, "decommission", "decommission [--force]",
			   cmd_decommission, l) ||
	    admin_register(n->admin, "removenode",
			   "removenode <host id> | status", cmd_removenode,
			   l) ||
	    admin_register(n->admin, "rebuild", "rebuild [source datacenter]",
			   cmd_rebuild, l) ||
	    admin_register(n->admin, "assassinate", "assassinate <address>",
			   cmd_assassinate, l)) {
		node_moves_delete(l);
		return NULL;
	}
	return l;
}

void node_moves_delete(struct node_moves *l)
{
	if (!l)
		return;
	node_move_delete(l->move);
	if (l->handing)
		cql_service_hand_over_cancel(l->n->cql);
	finish(l, 2, "", "error: the node is shutting down\n");
	env_timer_free(l->n->env, l->stop_timer);
	free(l);
}

const struct node_move *node_moves_current(const struct node_moves *l)
{
	return l ? l->move : NULL;
}
