/*
 * The admin commands of the Membership issue, in nodetool's output shapes:
 * status, ring, info, gossipinfo, describecluster, describering,
 * getendpoints, version, statusbinary, enablebinary, disablebinary,
 * statusgossip, enablegossip, disablegossip,
 * getcompactionthroughput, setcompactionthroughput, stopdaemon (the
 * commands on tables, drain included, are admin_tables.c's).
 *
 * `status`, `describering` and `getendpoints` take a keyspace of the schema
 * (system ones included) or an explicit replication in place of the
 * keyspace name: "class=NetworkTopologyStrategy,dc1=3,dc2=3".
 * `getendpoints` reads the key as nodetool does: typed by the table's
 * partition key columns, ':' between the parts of a compound key.
 */
#define LOG_MODULE "admin"
#include "client/auth/auth.h"
#include "common/err.h"
#include "common/log.h"
#include "common/murmur3.h"
#include "common/ratelimit.h"
#include "gossip/gossip.h"
#include "node/admin.h"
#include "node/cql_service.h"
#include "node/members.h"
#include "node/node_internal.h"
#include "node/transport.h"
#include "ring/ring.h"
#include "storage/storage.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DCS 64

/* ---- helpers ------------------------------------------------------------- */

/* Bytes as nodetool prints them: "812 bytes", "3.42 MiB". */
static void format_bytes(double v, char *out, size_t cap)
{
	static const char *const units[] = {"bytes", "KiB", "MiB", "GiB",
					    "TiB"};
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, cap, "%.0f %s", v, units[u]);
	else
		snprintf(out, cap, "%.2f %s", v, units[u]);
}

/* A node's load: this node's from storage now, a peer's as gossiped. */
static void load_text(const struct node *n,
		      const struct gossip_endpoint_info *info, char *out,
		      size_t cap)
{
	const char *state = info->states[GOSSIP_STATE_LOAD];
	double v = info->is_self && n->cql
			   ? (double)cql_service_load_bytes(n->cql)
			   : (state ? strtod(state, NULL) : 0);
	format_bytes(v, out, cap);
}

/* A keyspace of the schema, or "class=...,k=v,..." as an explicit
 * replication (handy for "what if" questions before creating it). */
static struct ring_strategy *strategy_for(struct node *n, const char *ks,
					  struct buf *err)
{
	const char *keys[33], *values[33];
	size_t count = 0;
	const struct cql_keyspace *k =
		n->cql ? cql_schema_keyspace(cql_service_schema(n->cql), ks)
		       : NULL;
	if (k) {
		const struct storage_keyspace_meta *m = cql_keyspace_meta(k);
		keys[count] = "class";
		values[count++] = m->replication_class;
		for (size_t i = 0; i < m->replication_count && count < 33;
		     i++) {
			keys[count] = m->replication_keys[i];
			values[count++] = m->replication_values[i];
		}
		struct ring_strategy *s = ring_strategy_new(
			keys, values, count, cql_keyspace_is_system(k));
		if (!s)
			admin_printf(err, "%s\n", err_msg());
		return s;
	}
	if (!strchr(ks, '=')) {
		admin_printf(
			err,
			"Keyspace '%s' does not exist (or give a replication "
			"such as class=NetworkTopologyStrategy,dc1=3)\n",
			ks);
		return NULL;
	}
	char *copy = strdup(ks);
	if (!copy)
		return NULL;
	char *save = NULL;
	for (char *kv = strtok_r(copy, ",", &save); kv && count < 32;
	     kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq) {
			admin_printf(err, "bad replication option '%s'\n", kv);
			free(copy);
			return NULL;
		}
		*eq = '\0';
		keys[count] = kv;
		values[count++] = eq + 1;
	}
	struct ring_strategy *s = ring_strategy_new(keys, values, count, false);
	if (!s)
		admin_printf(err, "%s\n", err_msg());
	free(copy);
	return s;
}

/* Fraction of the ring each endpoint holds: primary ranges, or replicated
 * ranges under `s` (effective ownership). own[] is indexed by ring
 * endpoint. */
static int ownership(struct ring *r, const struct ring_strategy *s, double *own)
{
	size_t n = ring_endpoint_count(r);
	const struct ring_placement *p = s ? ring_placement_get(r, s) : NULL;
	if (s && !p)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct token_range_list l = {0};
		int rc = p ? ring_placement_ranges(p, i, false, false, &l)
			   : ring_primary_ranges(r, i, &l);
		if (rc != 0) {
			token_range_list_free(&l);
			return -1;
		}
		own[i] = 0;
		for (size_t k = 0; k < l.n; k++)
			own[i] += token_range_fraction(l.v[k]);
		token_range_list_free(&l);
	}
	return 0;
}

/* Two letters as nodetool prints them: Up/Down, Normal/Leaving/Joining. */
static void state_code(const struct gossip_endpoint_info *info, char out[3])
{
	out[0] = info->is_self || info->alive ? 'U' : 'D';
	if (!info->states[GOSSIP_STATE_TOKENS] ||
	    info->status == GOSSIP_STATUS_BOOT)
		out[1] = 'J';
	else if (info->status == GOSSIP_STATUS_LEAVING)
		out[1] = 'L';
	else
		out[1] = 'N';
	out[2] = '\0';
}

static size_t token_count_of(const char *tokens)
{
	if (!tokens || !*tokens)
		return 0;
	size_t n = 1;
	for (const char *p = tokens; *p; p++)
		n += *p == ',';
	return n;
}

/* Sorted, distinct DC names known to gossip. */
static size_t gossip_dcs(struct gossip *g, const char **dcs)
{
	size_t n = 0;
	for (size_t i = 0; i < gossip_endpoint_count(g); i++) {
		struct gossip_endpoint_info info;
		gossip_endpoint_at(g, i, &info);
		const char *dc = info.states[GOSSIP_STATE_DC];
		if (!dc || info.status == GOSSIP_STATUS_LEFT)
			continue;
		size_t k = 0;
		while (k < n && strcmp(dcs[k], dc) < 0)
			k++;
		if (k < n && strcmp(dcs[k], dc) == 0)
			continue;
		if (n == MAX_DCS)
			break;
		memmove(&dcs[k + 1], &dcs[k], (n - k) * sizeof(*dcs));
		dcs[k] = dc;
		n++;
	}
	return n;
}

static void host_of(const struct inet_addr *a, char *out)
{
	inet_addr_format_host(a, out, INET_ADDR_STRLEN);
}

/* ---- status -------------------------------------------------------------- */

#define NO_EFFECTIVE_OWNERSHIP                                                 \
	"Note: Non-system keyspaces don't have the same replication "          \
	"settings, effective ownership information is meaningless"

/* The keyspace `status` without one measures, as nodetool does: the first
 * user keyspace when they all replicate alike, system_traces when there is
 * none, or NULL when they differ (ownership is then meaningless). */
static const char *status_keyspace(struct node *n)
{
	if (!n->cql)
		return NULL;
	const struct cql_schema *sc = cql_service_schema(n->cql);
	const struct cql_keyspace *first = NULL;
	for (size_t i = 0; i < cql_schema_keyspace_count(sc); i++) {
		const struct cql_keyspace *k = cql_schema_keyspace_at(sc, i);
		if (cql_keyspace_is_system(k))
			continue;
		if (!first)
			first = k;
		else if (strcmp(ring_strategy_describe(
					cql_keyspace_strategy(k)),
				ring_strategy_describe(
					cql_keyspace_strategy(first))) != 0)
			return NULL;
	}
	return first ? cql_keyspace_meta(first)->name : "system_traces";
}

/* What status and ring [keyspace] measure: the strategy of `ks` (of
 * status_keyspace when NULL; *s stays NULL when ownership is meaningless)
 * and every endpoint's ownership under it in *own. The caller frees both.
 * 0, or the command's exit status with `err` written. */
static int ownership_for(struct node *n, const char *ks, struct ring *r,
			 struct buf *err, struct ring_strategy **s,
			 double **own)
{
	*s = NULL;
	*own = NULL;
	ks = ks ? ks : status_keyspace(n);
	if (ks && !(*s = strategy_for(n, ks, err)))
		return 1;
	size_t ne = ring_endpoint_count(r);
	*own = calloc(ne ? ne : 1, sizeof(**own));
	if (!*own || (*s && ownership(r, *s, *own) != 0)) {
		admin_printf(err, "cannot compute ownership: %s\n", err_msg());
		free(*own);
		ring_strategy_delete(*s);
		return 2;
	}
	return 0;
}

static int cmd_status(void *arg, size_t argc, const char *const *argv,
		      struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (argc > 1)
		return admin_usage_error(err, "status [keyspace]");
	struct ring *r = members_ring(n->members);
	struct ring_strategy *s;
	double *own;
	int rc = ownership_for(n, argc ? argv[0] : NULL, r, err, &s, &own);
	if (rc)
		return rc;
	const char *dcs[MAX_DCS];
	size_t ndc = gossip_dcs(n->gossip, dcs);
	for (size_t d = 0; d < ndc; d++) {
		admin_printf(out, "Datacenter: %s\n", dcs[d]);
		size_t ul = strlen("Datacenter: ") + strlen(dcs[d]);
		for (size_t k = 0; k < ul; k++)
			admin_printf(out, "=");
		admin_printf(out, "\nStatus=Up/Down\n"
				  "|/ State=Normal/Leaving/Joining/Moving\n");
		admin_printf(out, "--  %-15s %-10s %-7s %-17s %-36s  %s\n",
			     "Address", "Load", "Tokens",
			     s ? "Owns (effective)" : "Owns", "Host ID",
			     "Rack");
		for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
			struct gossip_endpoint_info info;
			gossip_endpoint_at(n->gossip, i, &info);
			const char *dc = info.states[GOSSIP_STATE_DC];
			if (!dc || strcmp(dc, dcs[d]) != 0 ||
			    info.status == GOSSIP_STATUS_LEFT)
				continue;
			char code[3], host[INET_ADDR_STRLEN], load[32],
				owns[16] = "?";
			state_code(&info, code);
			host_of(&info.addr, host);
			load_text(n, &info, load, sizeof(load));
			int idx = ring_endpoint_find(r, &info.addr);
			if (idx >= 0 && s)
				snprintf(owns, sizeof(owns), "%.1f%%",
					 own[idx] * 100.0);
			const char *hid = info.states[GOSSIP_STATE_HOST_ID];
			const char *rack = info.states[GOSSIP_STATE_RACK];
			admin_printf(out,
				     "%s  %-15s %-10s %-7zu %-17s %-36s  %s\n",
				     code, host, load,
				     token_count_of(
					     info.states[GOSSIP_STATE_TOKENS]),
				     owns, hid ? hid : "?", rack ? rack : "?");
		}
		admin_printf(out, "\n");
	}
	if (!s)
		admin_printf(out, "%s\n", NO_EFFECTIVE_OWNERSHIP);
	free(own);
	ring_strategy_delete(s);
	return 0;
}

/* ---- ring ---------------------------------------------------------------- */

static int cmd_ring(void *arg, size_t argc, const char *const *argv,
		    struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (argc > 1)
		return admin_usage_error(err, "ring [keyspace]");
	struct ring *r = members_ring(n->members);
	struct ring_strategy *s;
	double *own;
	int rc = ownership_for(n, argc ? argv[0] : NULL, r, err, &s, &own);
	if (rc)
		return rc;
	bool vnodes = false;
	for (size_t d = 0; d < ring_dc_count(r); d++) {
		const char *dc = ring_dc_name(r, d);
		admin_printf(out, "\nDatacenter: %s\n==========\n", dc);
		admin_printf(out, "%-16s%-12s%-7s%-8s%-16s%-20s%s\n", "Address",
			     "Rack", "Status", "State", "Load", "Owns",
			     "Token");
		int64_t last = 0;
		for (size_t i = 0; i < ring_token_count(r); i++) {
			const struct ring_endpoint *ep =
				ring_endpoint_get(r, ring_token_owner_at(r, i));
			if (strcmp(ep->dc, dc) == 0)
				last = ring_token_at(r, i);
		}
		admin_printf(out, "%79s%lld\n", "", (long long)last);
		for (size_t i = 0; i < ring_token_count(r); i++) {
			size_t e = ring_token_owner_at(r, i);
			const struct ring_endpoint *ep =
				ring_endpoint_get(r, e);
			if (strcmp(ep->dc, dc) != 0)
				continue;
			struct gossip_endpoint_info info;
			char host[INET_ADDR_STRLEN], load[32], owns[16];
			if (gossip_endpoint_find(n->gossip, &ep->addr, &info) !=
			    0)
				continue;
			host_of(&ep->addr, host);
			load_text(n, &info, load, sizeof(load));
			if (s)
				snprintf(owns, sizeof(owns), "%.2f%%",
					 own[e] * 100.0);
			else
				snprintf(owns, sizeof(owns), "?");
			vnodes = vnodes || ep->num_tokens > 1;
			bool up = info.is_self || info.alive;
			const char *state =
				ep->status == RING_STATUS_LEAVING ? "Leaving"
				: ep->status == RING_STATUS_BOOT  ? "Joining"
								  : "Normal";
			admin_printf(out, "%-16s%-12s%-7s%-8s%-16s%-20s%lld\n",
				     host, ep->rack, up ? "Up" : "Down", state,
				     load, owns,
				     (long long)ring_token_at(r, i));
		}
	}
	admin_printf(out, "\n");
	if (vnodes)
		admin_printf(out,
			     "  Warning: \"nodetool ring\" is used to output "
			     "all the tokens of a node.\n  To view status "
			     "related info of a node use \"nodetool status\" "
			     "instead.\n\n");
	if (!s)
		admin_printf(out, "\n  %s\n", NO_EFFECTIVE_OWNERSHIP);
	free(own);
	ring_strategy_delete(s);
	return 0;
}

/* ---- info, gossipinfo, describecluster, version -------------------------- */

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, rss = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = 0;
	fclose(f);
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static int cmd_info(void *arg, size_t argc, const char *const *argv,
		    struct buf *out, struct buf *err)
{
	struct node *n = arg;
	bool all_tokens = argc == 1 && (strcmp(argv[0], "-T") == 0 ||
					strcmp(argv[0], "--tokens") == 0);
	if (argc > 1 || (argc == 1 && !all_tokens))
		return admin_usage_error(err, "info [-T|--tokens]");
	struct gossip_endpoint_info self;
	gossip_endpoint_find(n->gossip, &n->conf.broadcast_address, &self);
	char load[32];
	load_text(n, &self, load, sizeof(load));
	int64_t up_s = (env_wall_us(n->env) - n->start_wall_us) / 1000000;
	admin_printf(out, "%-23s: %s\n", "ID", n->local.host_id);
	admin_printf(out, "%-23s: %s\n", "Gossip active",
		     gossip_running(n->gossip) ? "true" : "false");
	admin_printf(out, "%-23s: %s\n", "Native Transport active",
		     n->cql && cql_service_serving(n->cql) ? "true" : "false");
	admin_printf(out, "%-23s: %s\n", "Load", load);
	admin_printf(out, "%-23s: %lld\n", "Generation No",
		     (long long)n->local.generation);
	admin_printf(out, "%-23s: %lld\n", "Uptime (seconds)", (long long)up_s);
	admin_printf(out, "%-23s: %.2f\n", "Memory RSS (MiB)",
		     (double)rss_kib() / 1024.0);
	admin_printf(out, "%-23s: %s\n", "Data Center", n->conf.dc);
	admin_printf(out, "%-23s: %s\n", "Rack", n->conf.rack);
	admin_printf(out, "%-23s: %s\n", "Exceptions", "0");
	if (n->local.token_count == 0)
		admin_printf(out, "%-23s: (none yet: joining)\n", "Token");
	else if (all_tokens || n->local.token_count == 1)
		for (size_t i = 0; i < n->local.token_count; i++)
			admin_printf(out, "%-23s: %lld\n", "Token",
				     (long long)n->local.tokens[i]);
	else
		admin_printf(out,
			     "%-23s: (invoke with -T/--tokens to see all "
			     "%zu tokens)\n",
			     "Token", n->local.token_count);
	return 0;
}

static int cmd_gossipinfo(void *arg, size_t argc, const char *const *argv,
			  struct buf *out, struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc > 0)
		return admin_usage_error(err, "gossipinfo");
	for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
		struct gossip_endpoint_info info;
		char a[INET_ADDR_STRLEN];
		gossip_endpoint_at(n->gossip, i, &info);
		admin_printf(out, "/%s\n",
			     inet_addr_format(&info.addr, a, sizeof(a)));
		admin_printf(out, "  generation:%lld\n",
			     (long long)info.generation);
		admin_printf(out, "  heartbeat:%d\n", info.heartbeat);
		for (int k = 0; k < GOSSIP_STATE_COUNT; k++) {
			if (!info.states[k])
				continue;
			admin_printf(out, "  %s:%d:%s\n",
				     gossip_app_state_name(k), info.versions[k],
				     k == GOSSIP_STATE_TOKENS ? "<hidden>"
							      : info.states[k]);
		}
	}
	return 0;
}

static int cmd_describecluster(void *arg, size_t argc, const char *const *argv,
			       struct buf *out, struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc > 0)
		return admin_usage_error(err, "describecluster");
	admin_printf(out, "Cluster Information:\n\tName: %s\n",
		     n->conf.cluster_name);
	admin_printf(out, "\tSnitch: org.apache.cassandra.locator.%s\n",
		     n->conf.endpoint_snitch ? "GossipingPropertyFileSnitch"
					     : "SimpleSnitch");
	admin_printf(out, "\tDynamicEndPointSnitch: disabled\n");
	admin_printf(out, "\tPartitioner: %s\n", n->conf.partitioner);
	admin_printf(out, "\tSchema versions:\n\t\t(no schema yet: it arrives "
			  "with the client protocol): [");
	size_t live = 0, unreachable = 0, joining = 0, leaving = 0;
	bool first = true;
	for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
		struct gossip_endpoint_info info;
		char h[INET_ADDR_STRLEN];
		gossip_endpoint_at(n->gossip, i, &info);
		if (info.status == GOSSIP_STATUS_LEFT)
			continue;
		host_of(&info.addr, h);
		admin_printf(out, "%s%s", first ? "" : ", ", h);
		first = false;
		if (info.is_self || info.alive)
			live++;
		else
			unreachable++;
		if (!info.states[GOSSIP_STATE_TOKENS] ||
		    info.status == GOSSIP_STATUS_BOOT)
			joining++;
		if (info.status == GOSSIP_STATUS_LEAVING)
			leaving++;
	}
	admin_printf(out,
		     "]\n\nStats for all nodes:\n\tLive: %zu\n\tJoining: "
		     "%zu\n\tMoving: 0\n\tLeaving: %zu\n\tUnreachable: "
		     "%zu\n\nData Centers: \n",
		     live, joining, leaving, unreachable);
	const char *dcs[MAX_DCS];
	size_t ndc = gossip_dcs(n->gossip, dcs);
	for (size_t d = 0; d < ndc; d++) {
		size_t total = 0, down = 0;
		for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
			struct gossip_endpoint_info info;
			gossip_endpoint_at(n->gossip, i, &info);
			const char *dc = info.states[GOSSIP_STATE_DC];
			if (!dc || strcmp(dc, dcs[d]) != 0 ||
			    info.status == GOSSIP_STATUS_LEFT)
				continue;
			total++;
			if (!info.is_self && !info.alive)
				down++;
		}
		admin_printf(out, "\t%s #Nodes: %zu #Down: %zu\n", dcs[d],
			     total, down);
	}
	return 0;
}

static int cmd_version(void *arg, size_t argc, const char *const *argv,
		       struct buf *out, struct buf *err)
{
	(void)arg;
	(void)argv;
	(void)err;
	(void)argc;
	admin_printf(out, "ReleaseVersion: %s\n", CASSINI_VERSION);
	return 0;
}

/* Cassandra's system_views.internode_outbound/_inbound in brief: each
 * connection and whether it is encrypted (server_encryption_options). */
static int cmd_internodeconnections(void *arg, size_t argc,
				    const char *const *argv, struct buf *out,
				    struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc != 0) {
		admin_printf(err, "usage: internodeconnections\n");
		return 1;
	}
	struct transport_stats ts;
	transport_get_stats(n->transport, &ts);
	transport_describe_connections(n->transport, out);
	admin_printf(out,
		     "TLS handshakes: %" PRIu64 " inbound, %" PRIu64
		     " outbound, %" PRIu64 " failed; plaintext refused: "
		     "%" PRIu64 "\n",
		     ts.tls_inbound, ts.tls_outbound, ts.tls_failures,
		     ts.plaintext_refused);
	return 0;
}

/* ---- describering, getendpoints ------------------------------------------ */

static void endpoint_list(struct ring *r, const struct ring_replicas *rep,
			  struct buf *out)
{
	for (size_t k = 0; k < rep->n_natural; k++) {
		char h[INET_ADDR_STRLEN];
		host_of(&ring_endpoint_get(r, rep->natural[k])->addr, h);
		admin_printf(out, "%s%s", k ? ", " : "", h);
	}
}

static int cmd_describering(void *arg, size_t argc, const char *const *argv,
			    struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (argc != 1)
		return admin_usage_error(err, "describering <keyspace>");
	struct ring_strategy *s = strategy_for(n, argv[0], err);
	if (!s)
		return 1;
	struct ring *r = members_ring(n->members);
	admin_printf(out, "Schema Version:(none yet)\nTokenRange: \n");
	for (size_t i = 0; i < ring_token_count(r); i++) {
		struct token_range range = ring_range_at(r, i);
		struct ring_replicas rep;
		if (ring_replicas_for_token(r, s, range.right, &rep) != 0)
			break;
		admin_printf(out,
			     "\tTokenRange(start_token:%lld, end_token:%lld, "
			     "endpoints:[",
			     (long long)range.left, (long long)range.right);
		endpoint_list(r, &rep, out);
		admin_printf(out, "], rpc_endpoints:[");
		endpoint_list(r, &rep, out);
		admin_printf(out, "], endpoint_details:[");
		for (size_t k = 0; k < rep.n_natural; k++) {
			const struct ring_endpoint *ep =
				ring_endpoint_get(r, rep.natural[k]);
			char h[INET_ADDR_STRLEN];
			host_of(&ep->addr, h);
			admin_printf(out,
				     "%sEndpointDetails(host:%s, "
				     "datacenter:%s, rack:%s)",
				     k ? ", " : "", h, ep->dc, ep->rack);
		}
		admin_printf(out, "])\n");
	}
	ring_strategy_delete(s);
	return 0;
}

static int cmd_getendpoints(void *arg, size_t argc, const char *const *argv,
			    struct buf *out, struct buf *err)
{
	struct node *n = arg;
	if (argc != 3)
		return admin_usage_error(
			err, "getendpoints <keyspace> <table> <key>");
	struct ring_strategy *s = strategy_for(n, argv[0], err);
	if (!s)
		return 1;
	const struct cql_table *t =
		n->cql ? cql_schema_table(cql_service_schema(n->cql), argv[0],
					  argv[1])
		       : NULL;
	bool what_if = strchr(argv[0], '=') != NULL;
	if (!t && !what_if) {
		admin_printf(err, "Table '%s.%s' does not exist\n", argv[0],
			     argv[1]);
		ring_strategy_delete(s);
		return 1;
	}
	/* With a replication in place of a keyspace there is no table: the
	 * key is the bytes of a single text (or blob) column. */
	struct buf key;
	buf_init(&key);
	if (!t) {
		if (buf_append(&key, argv[2], strlen(argv[2])) != 0) {
			ring_strategy_delete(s);
			return 2;
		}
	} else if (cql_table_key_from_text(t, argv[2], &key) != 0) {
		admin_printf(err, "bad key '%s': %s\n", argv[2], err_msg());
		buf_free(&key);
		ring_strategy_delete(s);
		return 1;
	}
	int64_t token = murmur3_token(key.data, key.len);
	buf_free(&key);
	struct ring *r = members_ring(n->members);
	struct ring_replicas rep;
	int rc = ring_replicas_for_token(r, s, token, &rep);
	if (rc == 0) {
		for (size_t k = 0; k < rep.n_natural; k++) {
			char h[INET_ADDR_STRLEN];
			host_of(&ring_endpoint_get(r, rep.natural[k])->addr, h);
			admin_printf(out, "%s\n", h);
		}
	} else {
		admin_printf(err, "%s\n", err_msg());
	}
	ring_strategy_delete(s);
	return rc == 0 ? 0 : 2;
}

/* ---- the native transport and compaction's throughput ------------------- */

/* nodetool statusbinary / enablebinary / disablebinary: whether clients
 * are served; disabling closes the listener and every client connection
 * (drivers go to other nodes), enabling listens again. */
static int cmd_statusbinary(void *arg, size_t argc, const char *const *argv,
			    struct buf *out, struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc != 0) {
		admin_printf(err, "usage: statusbinary\n");
		return 1;
	}
	admin_printf(out, "%s\n",
		     n->cql && cql_service_serving(n->cql) ? "running"
							   : "not running");
	return 0;
}

static int cmd_binary(struct node *n, size_t argc, bool enable, struct buf *err)
{
	if (argc != 0) {
		admin_printf(err, "usage: %s\n",
			     enable ? "enablebinary" : "disablebinary");
		return 1;
	}
	if (!n->cql || !cql_service_started(n->cql)) {
		admin_printf(err, "error: the native transport has not "
				  "started yet\n");
		return 2;
	}
	if (!enable) {
		if (cql_service_serving(n->cql)) {
			cql_service_stop_serving(n->cql);
			LOG_INFO("native transport stopped (disablebinary)");
		}
		return 0;
	}
	if (n->drained) {
		admin_printf(err, "error: this node is drained; restart it "
				  "to serve clients\n");
		return 2;
	}
	if (cql_service_serve(n->cql) != 0) {
		admin_printf(err, "error: %s\n", err_msg());
		return 2;
	}
	return 0;
}

static int cmd_enablebinary(void *arg, size_t argc, const char *const *argv,
			    struct buf *out, struct buf *err)
{
	(void)argv;
	(void)out;
	return cmd_binary(arg, argc, true, err);
}

static int cmd_disablebinary(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	(void)argv;
	(void)out;
	return cmd_binary(arg, argc, false, err);
}

/* nodetool statusgossip / disablegossip / enablegossip. Disabling
 * announces a shutdown to every peer (they mark us down) and stops
 * rounds; enabling gossips again with a newer generation and the STATUS
 * we had. Clients are still served in between, as in Cassandra. */
static int cmd_statusgossip(void *arg, size_t argc, const char *const *argv,
			    struct buf *out, struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc != 0) {
		admin_printf(err, "usage: statusgossip\n");
		return 1;
	}
	admin_printf(out, "%s\n",
		     gossip_running(n->gossip) ? "running" : "not running");
	return 0;
}

static int cmd_disablegossip(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	(void)argv;
	(void)out;
	struct node *n = arg;
	if (argc != 0) {
		admin_printf(err, "usage: disablegossip\n");
		return 1;
	}
	if (!gossip_running(n->gossip))
		return 0;
	struct gossip_endpoint_info self;
	if (gossip_endpoint_find(n->gossip, &n->conf.broadcast_address,
				 &self) != 0 ||
	    self.status != GOSSIP_STATUS_NORMAL) {
		admin_printf(err, "Unable to stop gossip because the node is "
				  "not in the normal state. Try to stop the "
				  "node instead.\n");
		return 1;
	}
	LOG_WARN("stopping gossip by operator request");
	gossip_announce_shutdown(n->gossip);
	return 0;
}

static int cmd_enablegossip(void *arg, size_t argc, const char *const *argv,
			    struct buf *out, struct buf *err)
{
	(void)argv;
	(void)out;
	struct node *n = arg;
	if (argc != 0) {
		admin_printf(err, "usage: enablegossip\n");
		return 1;
	}
	if (n->drained) {
		admin_printf(err, "error: this node is drained; restart it "
				  "to gossip\n");
		return 1;
	}
	if (gossip_running(n->gossip))
		return 0;
	LOG_WARN("starting gossip by operator request");
	if (gossip_resume(n->gossip) != 0) {
		admin_printf(err, "Unable to start gossip: %s\n", err_msg());
		return 1;
	}
	return 0;
}

/* nodetool getcompactionthroughput / setcompactionthroughput <MB/s>: the
 * budget compaction and repair validation share (compaction_throughput);
 * 0 is unlimited. Not saved: a restart reads node.yaml again, as in
 * Cassandra. Cassandra 4.1 prints MB/s meaning MiB/s. */
static int cmd_getcompactionthroughput(void *arg, size_t argc,
				       const char *const *argv, struct buf *out,
				       struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc != 0) {
		admin_printf(err, "usage: getcompactionthroughput\n");
		return 1;
	}
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	uint64_t rate = ratelimit_rate(
		storage_throughput_budget(cql_service_storage(n->cql)));
	admin_printf(out, "Current compaction throughput: %" PRIu64 " MB/s\n",
		     (rate + (1u << 20) - 1) >> 20);
	return 0;
}

static int cmd_setcompactionthroughput(void *arg, size_t argc,
				       const char *const *argv, struct buf *out,
				       struct buf *err)
{
	(void)out;
	struct node *n = arg;
	char *end = NULL;
	unsigned long long mb = 0;
	if (argc == 1 && argv[0][0] >= '0' && argv[0][0] <= '9') {
		errno = 0;
		mb = strtoull(argv[0], &end, 10);
	}
	if (argc != 1 || !end || *end || errno || mb > (1ull << 30)) {
		admin_printf(err, "usage: setcompactionthroughput "
				  "<value_in_mb> (0 disables throttling)\n");
		return 1;
	}
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	ratelimit_set_rate(
		storage_throughput_budget(cql_service_storage(n->cql)),
		(uint64_t)mb << 20);
	LOG_INFO("compaction throughput set to %llu MB/s%s", mb,
		 mb ? "" : " (unthrottled)");
	return 0;
}

static int cmd_stopdaemon(void *arg, size_t argc, const char *const *argv,
			  struct buf *out, struct buf *err)
{
	(void)argc;
	(void)argv;
	(void)out;
	(void)err;
	node_stop(arg, "stopdaemon");
	return 0;
}

/* ---- authentication ------------------------------------------------------ */

static void admin_checked(void *arg, const char *refusal)
{
	char msg[600];
	if (refusal)
		snprintf(msg, sizeof(msg), "Authentication failed! %s",
			 refusal);
	admin_auth_done(arg, refusal ? msg : NULL);
}

/* With PasswordAuthenticator every admin command needs a superuser's
 * credentials, as nodetool's against a JMX with authentication. */
static void admin_auth(void *arg, const char *user, const char *password,
		       struct admin_auth_ticket *t)
{
	struct node *n = arg;
	struct cql_auth *au = n->cql ? cql_service_auth(n->cql) : NULL;
	if (!user) {
		admin_auth_done(t,
				"Authentication failed! Credentials required "
				"(this node runs PasswordAuthenticator: "
				"cassini-tool -u USER -pw PASSWORD, or "
				"--password-file FILE)");
		return;
	}
	if (!au) {
		admin_auth_done(t, "Authentication failed! The node does not "
				   "serve logins yet");
		return;
	}
	cql_auth_check_superuser(au, user, password ? password : "",
				 admin_checked, t);
}

int node_admin_register(struct node *n)
{
	if (n->conf.authenticator == CONF_AUTH_PASSWORD)
		admin_set_auth(n->admin, admin_auth, n);
	static const struct {
		const char *name, *usage;
		admin_command_fn fn;
	} cmds[] = {
		{"status",
		 "status [keyspace]     nodetool-style cluster status "
		 "(UN/DN/UJ/UL rows per datacenter)",
		 cmd_status},
		{"ring",
		 "ring [keyspace]       every token with its owner and the "
		 "owner's share",
		 cmd_ring},
		{"info",
		 "info [-T]             this node: id, load, generation, "
		 "uptime, tokens",
		 cmd_info},
		{"gossipinfo",
		 "gossipinfo            every endpoint's gossip "
		 "state",
		 cmd_gossipinfo},
		{"describecluster",
		 "describecluster       name, snitch, "
		 "partitioner, live/unreachable per DC",
		 cmd_describecluster},
		{"describering",
		 "describering <ks>     token ranges and their "
		 "replicas (ks: a built-in keyspace or "
		 "class=...,dc1=3)",
		 cmd_describering},
		{"getendpoints",
		 "getendpoints <ks> <table> <key>  replicas of a "
		 "text key, one address per line",
		 cmd_getendpoints},
		{"version", "version               release version",
		 cmd_version},
		{"statusbinary",
		 "statusbinary          whether clients are served",
		 cmd_statusbinary},
		{"enablebinary",
		 "enablebinary          serve clients again (after "
		 "disablebinary)",
		 cmd_enablebinary},
		{"disablebinary",
		 "disablebinary         stop serving clients (closes every "
		 "connection)",
		 cmd_disablebinary},
		{"statusgossip",
		 "statusgossip          whether this node gossips",
		 cmd_statusgossip},
		{"disablegossip",
		 "disablegossip         stop gossiping (peers mark this node "
		 "down)",
		 cmd_disablegossip},
		{"enablegossip",
		 "enablegossip          gossip again (after disablegossip)",
		 cmd_enablegossip},
		{"getcompactionthroughput",
		 "getcompactionthroughput  compaction's throughput cap",
		 cmd_getcompactionthroughput},
		{"setcompactionthroughput",
		 "setcompactionthroughput <MB/s>  set it (0: unthrottled)",
		 cmd_setcompactionthroughput},
		{"stopdaemon", "stopdaemon            stop this node",
		 cmd_stopdaemon},
		{"internodeconnections",
		 "internodeconnections  internode connections, encrypted or "
		 "not",
		 cmd_internodeconnections},
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (admin_register(n->admin, cmds[i].name, cmds[i].usage,
				   cmds[i].fn, n) != 0)
			return -1;
	if (node_admin_register_tables(n) != 0 ||
	    node_admin_register_faults(n) != 0 ||
	    node_admin_register_compaction(n) != 0 ||
	    node_admin_register_trace(n) != 0 ||
	    node_admin_register_toppartitions(n) != 0 ||
	    node_admin_register_import(n) != 0)
		return -1;
	return node_admin_register_data(n);
}
