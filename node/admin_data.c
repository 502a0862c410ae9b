/*
 * The admin commands of the coordinator and hinted handoff, in nodetool's
 * output shapes: tpstats, proxyhistograms, tablehistograms,
 * listpendinghints,
 * enablehandoff, disablehandoff, pausehandoff, resumehandoff,
 * setmaxhintwindow, statushandoff.
 */
#define LOG_MODULE "admin"
#include "client/schema/schema.h"
#include "common/err.h"
#include "common/log.h"
#include "common/uuid.h"
#include "gossip/gossip.h"
#include "node/admin.h"
#include "node/cql_cas.h"
#include "node/cql_service.h"
#include "node/members.h"
#include "node/node_internal.h"
#include "node/transport.h"
#include "replication/hints.h"
#include "replication/replication.h"
#include "ring/ring.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- tpstats ------------------------------------------------------------- */

size_t node_thread_pools(void *arg, struct cql_thread_pool *out, size_t cap)
{
	struct node *n = arg;
	struct repl_stats st;
	cql_service_data_stats(n->cql, &st);
	struct hints_stats hs = {0};
	struct hints *h = cql_service_hints(n->cql);
	if (h)
		hints_get_stats(h, &hs);
	/* Writes that found the memtables full wait for a flush: they are
	 * MutationStage's blocked ones, as in Cassandra. */
	struct storage_stats ss = {0};
	storage_stats(cql_service_storage(n->cql), NULL, &ss);
	const struct cql_thread_pool pools[] = {
		{"CoordinatorStage", (int32_t)st.inflight, 0, 0,
		 (int64_t)(st.writes + st.reads + st.ranges), 0, 0},
		{"MutationStage", 0, 0, 0, (int64_t)st.replica_mutations,
		 (int64_t)ss.writes_waiting, (int64_t)ss.writes_waited},
		{"ReadStage", 0, 0, 0, (int64_t)st.replica_reads, 0, 0},
		{"RangeStage", 0, 0, 0, (int64_t)st.replica_ranges, 0, 0},
		{"ReadRepairStage", 0, 0, 0, (int64_t)st.read_repairs, 0, 0},
		{"HintsDispatcher", (int32_t)hs.in_flight, 0, 0,
		 (int64_t)hs.delivered, 0, 0},
		{"BatchlogTasks", (int32_t)st.batchlog_pending, 0, 0,
		 (int64_t)st.batches_replayed, 0, 0},
		{"MigrationStage", (int32_t)n->schema_pull_in_flight, 0, 0,
		 (int64_t)n->schema_pulls, 0, 0},
	};
	size_t count = sizeof(pools) / sizeof(pools[0]);
	for (size_t i = 0; i < count && i < cap; i++)
		out[i] = pools[i];
	return count;
}

static int cmd_tpstats(void *arg, size_t argc, const char *const *argv,
		       struct buf *out, struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc != 0)
		return admin_usage_error(err, "tpstats");
	struct transport_stats ts;
	transport_get_stats(n->transport, &ts);
	struct repl_stats st;
	cql_service_data_stats(n->cql, &st);
	struct hints_stats hs = {0};
	struct hints *h = cql_service_hints(n->cql);
	if (h)
		hints_get_stats(h, &hs);
	struct storage_stats ss = {0};
	storage_stats(cql_service_storage(n->cql), NULL, &ss);
	struct cql_thread_pool pools[CQL_SERVICE_POOLS_MAX];
	size_t np = node_thread_pools(n, pools, CQL_SERVICE_POOLS_MAX);
	admin_printf(out, "%-28s %6s %7s %12s %7s %16s\n", "Pool Name",
		     "Active", "Pending", "Completed", "Blocked",
		     "All time blocked");
	for (size_t i = 0; i < np && i < CQL_SERVICE_POOLS_MAX; i++)
		admin_printf(out,
			     "%-28s %6" PRId32 " %7" PRId32 " %12" PRId64
			     " %7" PRId64 " %16" PRId64 "\n",
			     pools[i].name, pools[i].active_tasks,
			     pools[i].pending_tasks, pools[i].completed_tasks,
			     pools[i].blocked_tasks,
			     pools[i].blocked_tasks_all_time);
	admin_printf(out, "\n%-28s %8s\n", "Message type", "Dropped");
	struct {
		const char *name;
		uint32_t verb;
	} verbs[] = {
		{"MUTATION", REPL_VERB_MUTATION},
		{"READ", REPL_VERB_READ},
		{"RANGE_SLICE", REPL_VERB_RANGE},
	};
	/* MUTATION counts the writes storage refused or failed after
	 * waiting write_request_timeout for memtable room too. */
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		admin_printf(out, "%-28s %8" PRIu64 "\n", verbs[i].name,
			     st.dropped[verbs[i].verb] +
				     ts.expired_by_verb[verbs[i].verb] +
				     (verbs[i].verb == REPL_VERB_MUTATION
					      ? ss.writes_refused
					      : 0));
	admin_printf(out, "%-28s %8" PRIu64 "\n", "HINT",
		     hs.dropped_window + hs.dropped_size);
	return 0;
}

/* ---- proxyhistograms ----------------------------------------------------- */

static int cmd_proxyhistograms(void *arg, size_t argc, const char *const *argv,
			       struct buf *out, struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc != 0)
		return admin_usage_error(err, "proxyhistograms");
	struct repl_stats st;
	cql_service_data_stats(n->cql, &st);
	struct repl_latency cas_w, cas_r, view_w = {0};
	node_cas_latencies(cql_service_cas(n->cql), &cas_w, &cas_r);
	/* nodetool 4.1's layout; View Write stays empty (materialized views
	 * are disabled) */
	admin_printf(out, "proxy histograms\n");
	admin_printf(out, "%-10s%19s%19s%19s%19s%19s%19s\n", "Percentile",
		     "Read Latency", "Write Latency", "Range Latency",
		     "CAS Read Latency", "CAS Write Latency",
		     "View Write Latency");
	admin_printf(out, "%-10s%19s%19s%19s%19s%19s%19s\n", "", "(micros)",
		     "(micros)", "(micros)", "(micros)", "(micros)",
		     "(micros)");
	static const struct {
		const char *label;
		double p;
	} rows[] = {{"50%", 50}, {"75%", 75}, {"95%", 95}, {"98%", 98},
		    {"99%", 99}, {"Min", 0},  {"Max", 100}};
	const struct repl_latency *cols[] = {&st.read_lat,  &st.write_lat,
					     &st.range_lat, &cas_r,
					     &cas_w,        &view_w};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		admin_printf(out, "%-10s", rows[i].label);
		for (size_t c = 0; c < sizeof(cols) / sizeof(cols[0]); c++)
			admin_printf(out, "%19.2f",
				     (double)repl_latency_percentile(
					     cols[c], rows[i].p));
		admin_printf(out, "\n");
	}
	admin_printf(out,
		     "\nUnavailables: %" PRIu64 ", write timeouts: %" PRIu64
		     ", read timeouts: %" PRIu64 ", overloaded: %" PRIu64
		     ", digest mismatches: %" PRIu64
		     ", speculative retries: %" PRIu64 "\n",
		     st.unavailables, st.write_timeouts, st.read_timeouts,
		     st.overloaded, st.digest_mismatches,
		     st.speculative_retries);
	return 0;
}

/* ---- tablehistograms ----------------------------------------------------- */

_Static_assert(REPL_LAT_BUCKETS == LOGHIST_BUCKETS,
	       "storage's histograms use the coordinator's buckets");

static uint64_t hist_percentile(const struct storage_hist *h, double p)
{
	struct repl_latency l = {.count = h->count, .sum_us = h->sum};
	memcpy(l.buckets, h->buckets, sizeof(l.buckets));
	return repl_latency_percentile(&l, p);
}

static void print_table_histograms(struct buf *out, const char *ks,
				   const char *tb,
				   const struct storage_table_hists *h)
{
	admin_printf(out, "%s/%s histograms\n", ks, tb);
	admin_printf(out, "%-10s%18s%18s%18s%18s%18s\n", "Percentile",
		     "Read Latency", "Write Latency", "SSTables",
		     "Partition Size", "Cell Count");
	admin_printf(out, "%-10s%18s%18s%18s%18s%18s\n", "", "(micros)",
		     "(micros)", "", "(bytes)", "");
	static const struct {
		const char *label;
		double p;
	} rows[] = {{"50%", 50}, {"75%", 75}, {"95%", 95}, {"98%", 98},
		    {"99%", 99}, {"Min", 0},  {"Max", 100}};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		admin_printf(
			out, "%-10s%18.2f%18.2f%18.2f%18.0f%18.0f\n",
			rows[i].label,
			(double)hist_percentile(&h->read_us, rows[i].p),
			(double)hist_percentile(&h->write_us, rows[i].p),
			(double)hist_percentile(&h->sstables, rows[i].p),
			(double)hist_percentile(&h->partition_bytes, rows[i].p),
			(double)hist_percentile(&h->cells, rows[i].p));
	admin_printf(out, "\n");
}

/* Without arguments: every table this node stores, keyspace by keyspace,
 * as nodetool lists every table store. */
static int all_table_histograms(struct node *n, struct buf *out)
{
	const struct cql_schema *schema = cql_service_schema(n->cql);
	struct storage *db = cql_service_storage(n->cql);
	for (size_t i = 0; i < cql_schema_keyspace_count(schema); i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(schema, i);
		for (size_t j = 0; j < cql_keyspace_table_count(k); j++) {
			const struct storage_table_meta *m =
				cql_table_meta(cql_keyspace_table_at(k, j));
			struct storage_table_hists h;
			if (storage_table_histograms(db, m->id, &h) == 0)
				print_table_histograms(out, m->keyspace,
						       m->name, &h);
		}
	}
	return 0;
}

/* nodetool tablehistograms [<keyspace> <table> | <keyspace.table>]: the
 * replica's local read/write latencies, SSTables per read, and the live
 * SSTables' partition sizes and (estimated) cell counts; every table
 * without arguments. */
static int cmd_tablehistograms(void *arg, size_t argc, const char *const *argv,
			       struct buf *out, struct buf *err)
{
	struct node *n = arg;
	char ks[256], tb[256];
	const char *dot = argc == 1 ? strchr(argv[0], '.') : NULL;
	if (argc == 0) {
		/* below */
	} else if (argc == 2 && strlen(argv[0]) < sizeof(ks) &&
		   strlen(argv[1]) < sizeof(tb)) {
		snprintf(ks, sizeof(ks), "%s", argv[0]);
		snprintf(tb, sizeof(tb), "%s", argv[1]);
	} else if (dot && dot != argv[0] && dot[1] &&
		   (size_t)(dot - argv[0]) < sizeof(ks) &&
		   strlen(dot + 1) < sizeof(tb)) {
		snprintf(ks, sizeof(ks), "%.*s", (int)(dot - argv[0]), argv[0]);
		snprintf(tb, sizeof(tb), "%s", dot + 1);
	} else {
		admin_printf(err, "error: tablehistograms requires <keyspace> "
				  "<table> or <keyspace.table> format "
				  "argument.\n");
		return 1;
	}
	if (!n->cql) {
		admin_printf(err, "error: this node serves no data\n");
		return 2;
	}
	if (argc == 0)
		return all_table_histograms(n, out);
	const struct cql_table *ct =
		cql_schema_table(cql_service_schema(n->cql), ks, tb);
	struct storage_table_hists h;
	if (!ct || storage_table_histograms(cql_service_storage(n->cql),
					    cql_table_meta(ct)->id, &h) != 0) {
		admin_printf(err, "error: Unknown table %s.%s\n", ks, tb);
		return 2;
	}
	print_table_histograms(out, ks, tb, &h);
	return 0;
}

/* ---- hinted handoff ------------------------------------------------------ */

static struct hints *hints_or_err(struct node *n, struct buf *err)
{
	struct hints *h = cql_service_hints(n->cql);
	if (!h)
		admin_printf(err,
			     "hinted handoff is not running on this node\n");
	return h;
}

static void format_time(int64_t us, char *out, size_t cap)
{
	time_t t = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int cmd_listpendinghints(void *arg, size_t argc, const char *const *argv,
				struct buf *out, struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc != 0)
		return admin_usage_error(err, "listpendinghints");
	struct hints *h = hints_or_err(n, err);
	if (!h)
		return 1;
	struct hints_host_stats hosts[256];
	size_t total = hints_list_pending(h, hosts, 256);
	size_t shown = total < 256 ? total : 256;
	if (shown == 0) {
		admin_printf(out,
			     "This node does not have any pending hints\n");
		return 0;
	}
	struct ring *r = members_ring(n->members);
	admin_printf(out,
		     "%-36s  %-15s %-8s %-8s %-6s %11s %11s  %-20s  %-20s\n",
		     "Host ID", "Address", "Rack", "DC", "Status",
		     "Total hints", "Total files", "Newest", "Oldest");
	for (size_t i = 0; i < shown; i++) {
		char id[37], addr[INET_ADDR_STRLEN] = "?", newest[32],
			     oldest[32];
		const char *rack = "?", *dc = "?", *status = "?";
		uuid_format(hosts[i].host_id, id);
		int ep = ring_endpoint_find_host_id(r, hosts[i].host_id);
		if (ep >= 0) {
			const struct ring_endpoint *e =
				ring_endpoint_get(r, (size_t)ep);
			inet_addr_format_host(&e->addr, addr, sizeof(addr));
			rack = e->rack;
			dc = e->dc;
			status = gossip_is_alive(n->gossip, &e->addr) ? "UP"
								      : "DOWN";
		}
		format_time(hosts[i].newest_us, newest, sizeof(newest));
		format_time(hosts[i].oldest_us, oldest, sizeof(oldest));
		admin_printf(out,
			     "%-36s  %-15s %-8s %-8s %-6s %11" PRIu64
			     " %11" PRIu64 "  %-20s  %-20s\n",
			     id, addr, rack, dc, status, hosts[i].records,
			     hosts[i].files, newest, oldest);
	}
	return 0;
}

static int set_flag(void *arg, size_t argc, struct buf *err, const char *name,
		    void (*fn)(struct hints *, bool), bool v)
{
	struct node *n = arg;
	if (argc != 0)
		return admin_usage_error(err, name);
	struct hints *h = hints_or_err(n, err);
	if (!h)
		return 1;
	fn(h, v);
	LOG_INFO("%s", name);
	return 0;
}

static int cmd_enablehandoff(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	(void)argv;
	(void)out;
	return set_flag(arg, argc, err, "enablehandoff", hints_set_enabled,
			true);
}

static int cmd_disablehandoff(void *arg, size_t argc, const char *const *argv,
			      struct buf *out, struct buf *err)
{
	(void)argv;
	(void)out;
	return set_flag(arg, argc, err, "disablehandoff", hints_set_enabled,
			false);
}

static int cmd_pausehandoff(void *arg, size_t argc, const char *const *argv,
			    struct buf *out, struct buf *err)
{
	(void)argv;
	(void)out;
	return set_flag(arg, argc, err, "pausehandoff", hints_set_paused, true);
}

static int cmd_resumehandoff(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	(void)argv;
	(void)out;
	return set_flag(arg, argc, err, "resumehandoff", hints_set_paused,
			false);
}

static int cmd_setmaxhintwindow(void *arg, size_t argc, const char *const *argv,
				struct buf *out, struct buf *err)
{
	(void)out;
	struct node *n = arg;
	char *end = NULL;
	long long ms = argc == 1 ? strtoll(argv[0], &end, 10) : -1;
	if (argc != 1 || !end || *end || ms < 0)
		return admin_usage_error(err,
					 "setmaxhintwindow <milliseconds>");
	struct hints *h = hints_or_err(n, err);
	if (!h)
		return 1;
	hints_set_max_window(h, (uint64_t)ms);
	LOG_INFO("max hint window set to %lld ms", ms);
	return 0;
}

static int cmd_statushandoff(void *arg, size_t argc, const char *const *argv,
			     struct buf *out, struct buf *err)
{
	(void)argv;
	struct node *n = arg;
	if (argc != 0)
		return admin_usage_error(err, "statushandoff");
	struct hints *h = cql_service_hints(n->cql);
	struct hints_stats hs = {0};
	if (h)
		hints_get_stats(h, &hs);
	struct repl_stats rs;
	cql_service_data_stats(n->cql, &rs);
	admin_printf(out,
		     "Hinted handoff is %s\nstored %" PRIu64
		     ", delivered %" PRIu64 ", dropped (window) %" PRIu64
		     ", dropped (size) %" PRIu64 ", dropped (disabled) %" PRIu64
		     ", corrupt %" PRIu64 ", taken from leaving nodes %" PRIu64
		     "\n",
		     h ? "running" : "not running", hs.stored, hs.delivered,
		     hs.dropped_window, hs.dropped_size, hs.dropped_disabled,
		     hs.corrupt, rs.hints_taken);
	return 0;
}

int node_admin_register_data(struct node *n)
{
	static const struct {
		const char *name, *usage;
		admin_command_fn fn;
	} cmds[] = {
		{"tpstats",
		 "tpstats               coordinator and replica stages, "
		 "dropped messages per verb",
		 cmd_tpstats},
		{"proxyhistograms",
		 "proxyhistograms       read/write/range latency "
		 "percentiles seen by this coordinator",
		 cmd_proxyhistograms},
		{"tablehistograms",
		 "tablehistograms [<ks> <table>]  a table's (every table's) "
		 "local read/write latency, SSTables per read, partition "
		 "size and cell count percentiles",
		 cmd_tablehistograms},
		{"listpendinghints",
		 "listpendinghints      hints this node holds, per target",
		 cmd_listpendinghints},
		{"enablehandoff", "enablehandoff         store hints again",
		 cmd_enablehandoff},
		{"disablehandoff", "disablehandoff        stop storing hints",
		 cmd_disablehandoff},
		{"pausehandoff", "pausehandoff          stop delivering hints",
		 cmd_pausehandoff},
		{"resumehandoff", "resumehandoff         deliver hints again",
		 cmd_resumehandoff},
		{"setmaxhintwindow",
		 "setmaxhintwindow <ms> how long a down node collects hints",
		 cmd_setmaxhintwindow},
		{"statushandoff",
		 "statushandoff         hinted handoff state and counters",
		 cmd_statushandoff},
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (admin_register(n->admin, cmds[i].name, cmds[i].usage,
				   cmds[i].fn, n) != 0)
			return -1;
	return 0;
}
