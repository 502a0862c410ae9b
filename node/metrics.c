/*
 * The Prometheus metrics endpoint (node_internal.h, docs/observability.md).
 *
 * GET /metrics answers the text exposition format (version 0.0.4), built
 * on the loop from the counters the modules keep anyway (the coordinator's,
 * the engine's, hinted handoff's, the transport's, gossip's): a scrape
 * reads them, it never changes them, and the hot paths pay nothing for the
 * endpoint. Names and labels follow instaclustr/cassandra-exporter where it
 * has the metric (cassandra_client_request_*, cassandra_table_*, ...);
 * Cassini's own are cassini_*, in base units.
 */
#include "client/proto/server.h"
#include "client/schema/schema.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/inet.h"
#include "common/log.h"
#include "common/ratelimit.h"
#include "gossip/gossip.h"
#include "node/cql_service.h"
#include "node/node_internal.h"
#include "node/node_repair_internal.h"
#include "node/transport.h"
#include "repair/repair.h"
#include "replication/hints.h"
#include "replication/replication.h"
#include "storage/storage.h"

#include <dirent.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct node_metrics {
	struct node *n;
	struct evhttp *http;
};

/* ---- text format --------------------------------------------------------- */

static void out(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void out(struct buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (len < 0)
		return;
	if ((size_t)len >= sizeof(tmp))
		len = (int)sizeof(tmp) - 1;
	buf_append(b, tmp, (size_t)len);
}

static void family(struct buf *b, const char *name, const char *type,
		   const char *help)
{
	out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with \, " and newlines escaped, as the format wants. */
static const char *esc(const char *v, char *dst, size_t cap)
{
	size_t o = 0;
	for (; *v && o + 2 < cap; v++) {
		if (*v == '\\' || *v == '"' || *v == '\n') {
			dst[o++] = '\\';
			dst[o++] = *v == '\n' ? 'n' : *v;
		} else {
			dst[o++] = *v;
		}
	}
	dst[o] = '\0';
	return dst;
}

static void sample(struct buf *b, const char *name, const char *labels,
		   double v)
{
	if (labels && *labels)
		out(b, "%s{%s} %.17g\n", name, labels, v);
	else
		out(b, "%s %.17g\n", name, v);
}

/* ---- client requests ----------------------------------------------------- */

static const char *const kind_name[REPL_REQ_KINDS] = {
	[REPL_REQ_READ] = "read",
	[REPL_REQ_WRITE] = "write",
	[REPL_REQ_RANGE] = "rangeslice",
};

static bool req_active(const struct repl_req_stats *s)
{
	return s->lat.count || s->timeouts || s->unavailables || s->failures;
}

/* Buckets at every power of two (every 4th of the coordinator's
 * log-linear ones), so a series has about 20 bounds; the counts are exact
 * because the bounds are bucket edges. */
static void latency_histogram(struct buf *b, const char *name,
			      const char *labels, const struct repl_latency *l)
{
	uint64_t cum = 0;
	for (unsigned k = 0; k < REPL_LAT_BUCKETS; k++) {
		cum += l->buckets[k];
		bool edge = k >= 8 && (k - 8) % 4 == 3;
		if (!edge || k == REPL_LAT_BUCKETS - 1)
			continue;
		out(b, "%s_bucket{%s,le=\"%.6f\"} %" PRIu64 "\n", name, labels,
		    (double)repl_latency_bucket_upper(k) / 1e6, cum);
	}
	out(b, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, labels,
	    l->count);
	out(b, "%s_sum{%s} %.6f\n", name, labels, (double)l->sum_us / 1e6);
	out(b, "%s_count{%s} %" PRIu64 "\n", name, labels, l->count);
}

/* A table histogram (storage's, in the same buckets), values divided
 * by `scale` (1e6: µs to seconds). */
static void table_histogram(struct buf *b, const char *name, const char *labels,
			    const struct storage_hist *h, double scale)
{
	uint64_t cum = 0;
	for (unsigned k = 0; k < LOGHIST_BUCKETS; k++) {
		cum += h->buckets[k];
		/* counts (scale 1) keep their exact buckets 0-7, as
		 * Cassandra's EstimatedHistogram starts 1, 2, 3...: "SSTables
		 * per read" p99 of 2 must not read as "at most 15" */
		bool edge = k < 8 ? scale == 1 : (k - 8) % 4 == 3;
		if (!edge || k == LOGHIST_BUCKETS - 1)
			continue;
		out(b, "%s_bucket{%s,le=\"%.6f\"} %" PRIu64 "\n", name, labels,
		    (double)loghist_upper(k) / scale, cum);
	}
	out(b, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, labels,
	    h->count);
	out(b, "%s_sum{%s} %.6f\n", name, labels, (double)h->sum / scale);
	out(b, "%s_count{%s} %" PRIu64 "\n", name, labels, h->count);
}

static void client_requests(struct buf *b, const struct repl_stats *st)
{
	char labels[128];
	family(b, "cassandra_client_request_latency_seconds", "histogram",
	       "Latency of client requests that succeeded, by operation and "
	       "consistency level (coordinator).");
	for (int k = 0; k < REPL_REQ_KINDS; k++)
		for (int cl = 0; cl < REPL_CL_COUNT; cl++) {
			const struct repl_req_stats *s = &st->by_cl[k][cl];
			if (!req_active(s))
				continue;
			snprintf(labels, sizeof(labels),
				 "operation=\"%s\",consistency=\"%s\"",
				 kind_name[k], repl_cl_name(cl));
			latency_histogram(
				b, "cassandra_client_request_latency_seconds",
				labels, &s->lat);
		}
	static const struct {
		const char *name, *help;
		size_t off;
	} counters[] = {
		{"cassandra_client_request_timeouts_total",
		 "Client requests that timed out.",
		 offsetof(struct repl_req_stats, timeouts)},
		{"cassandra_client_request_unavailable_exceptions_total",
		 "Client requests answered Unavailable.",
		 offsetof(struct repl_req_stats, unavailables)},
		{"cassandra_client_request_failures_total",
		 "Client requests that failed (read/write failures, "
		 "overloaded).",
		 offsetof(struct repl_req_stats, failures)},
	};
	for (size_t c = 0; c < sizeof(counters) / sizeof(counters[0]); c++) {
		family(b, counters[c].name, "counter", counters[c].help);
		for (int k = 0; k < REPL_REQ_KINDS; k++)
			for (int cl = 0; cl < REPL_CL_COUNT; cl++) {
				const struct repl_req_stats *s =
					&st->by_cl[k][cl];
				if (!req_active(s))
					continue;
				uint64_t v;
				memcpy(&v, (const char *)s + counters[c].off,
				       sizeof(v));
				snprintf(labels, sizeof(labels),
					 "operation=\"%s\",consistency=\"%s\"",
					 kind_name[k], repl_cl_name(cl));
				sample(b, counters[c].name, labels, (double)v);
			}
	}
}

/* ---- the rest of the node ------------------------------------------------ */

static void coordinator(struct buf *b, const struct repl_stats *st,
			const struct transport_stats *ts,
			const struct storage_stats *ss)
{
	const struct {
		const char *name, *type, *help;
		uint64_t v;
	} rows[] = {
		{"cassini_coordinator_requests_in_flight", "gauge",
		 "Requests this node coordinates that await replicas.",
		 st->inflight},
		{"cassini_read_repairs_total", "counter",
		 "Read-repair writes sent to replicas that lacked data.",
		 st->read_repairs},
		{"cassini_digest_mismatches_total", "counter",
		 "Reads whose replicas' digests differed.",
		 st->digest_mismatches},
		{"cassini_speculative_retries_total", "counter",
		 "Reads retried on another replica because one was slow.",
		 st->speculative_retries},
		{"cassini_replica_filtering_protection_partitions_total",
		 "counter",
		 "Partitions indexed reads read again from replicas that did "
		 "not return them (replica filtering protection).",
		 st->protection_reads},
		{"cassini_replica_filtering_protection_requests_total",
		 "counter",
		 "Messages that carried those reads to other replicas.",
		 st->protection_messages},
		{"cassini_batches_logged_total", "counter",
		 "Logged batches written to the batchlog.", st->batches_logged},
		{"cassini_batches_replayed_total", "counter",
		 "Batches replayed from this node's batchlog.",
		 st->batches_replayed},
		{"cassini_internode_messages_sent_total", "counter",
		 "Internode messages sent.", ts->sent},
		{"cassini_internode_messages_received_total", "counter",
		 "Internode messages received.", ts->received},
		{"cassini_internode_timeouts_total", "counter",
		 "Internode requests that got no answer in time.",
		 ts->timeouts},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		family(b, rows[i].name, rows[i].type, rows[i].help);
		sample(b, rows[i].name, NULL, (double)rows[i].v);
	}
	/* As tpstats' "Dropped" (admin_data.c): past their deadline here or
	 * in the transport; refused writes count as dropped mutations. */
	family(b, "cassandra_dropped_messages_total", "counter",
	       "Messages dropped past their deadline, by type.");
	const struct {
		const char *name;
		uint32_t verb;
	} verbs[] = {
		{"MUTATION", REPL_VERB_MUTATION},
		{"READ", REPL_VERB_READ},
		{"RANGE_SLICE", REPL_VERB_RANGE},
	};
	char labels[64];
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		snprintf(labels, sizeof(labels), "message_type=\"%s\"",
			 verbs[i].name);
		sample(b, "cassandra_dropped_messages_total", labels,
		       (double)(st->dropped[verbs[i].verb] +
				ts->expired_by_verb[verbs[i].verb] +
				(verbs[i].verb == REPL_VERB_MUTATION
					 ? ss->writes_refused
					 : 0)));
	}
}

static void hints(struct buf *b, struct hints *h)
{
	struct hints_stats hs = {0};
	if (h)
		hints_get_stats(h, &hs);
	family(b, "cassandra_storage_hints_total", "counter",
	       "Hints stored for replicas that did not answer.");
	sample(b, "cassandra_storage_hints_total", NULL, (double)hs.stored);
	family(b, "cassandra_storage_hints_in_progress", "gauge",
	       "Hints sent and not yet acknowledged.");
	sample(b, "cassandra_storage_hints_in_progress", NULL,
	       (double)hs.in_flight);
	family(b, "cassini_hints_delivered_total", "counter",
	       "Hints delivered (acknowledged; a resent hint counts again).");
	sample(b, "cassini_hints_delivered_total", NULL, (double)hs.delivered);
	family(b, "cassini_hints_dropped_total", "counter",
	       "Hints not stored, by reason.");
	sample(b, "cassini_hints_dropped_total", "reason=\"window\"",
	       (double)hs.dropped_window);
	sample(b, "cassini_hints_dropped_total", "reason=\"size\"",
	       (double)hs.dropped_size);
	sample(b, "cassini_hints_dropped_total", "reason=\"disabled\"",
	       (double)hs.dropped_disabled);
	family(b, "cassini_hints_hosts", "gauge",
	       "Hosts this node keeps hints for.");
	sample(b, "cassini_hints_hosts", NULL, (double)hs.hosts);
}

static void native(struct buf *b, const struct cql_server_stats *cs)
{
	family(b, "cassandra_client_native_connections", "gauge",
	       "CQL connections open now.");
	sample(b, "cassandra_client_native_connections", NULL,
	       (double)cs->connections);
	const struct {
		const char *name, *type, *help;
		uint64_t v;
	} rows[] = {
		{"cassini_native_connections_total", "counter",
		 "CQL connections accepted since start.",
		 cs->connections_total},
		{"cassini_native_connections_refused_total", "counter",
		 "CQL connections refused (native_transport_max_connections).",
		 cs->connections_refused},
		{"cassini_native_requests_total", "counter",
		 "CQL requests received.", cs->requests},
		{"cassini_native_requests_in_flight_bytes", "gauge",
		 "Bytes of CQL requests being served.", cs->inflight_bytes},
		{"cassini_native_overloaded_total", "counter",
		 "CQL requests answered Overloaded.", cs->overloaded},
		{"cassini_native_protocol_errors_total", "counter",
		 "CQL frames answered with a protocol error.",
		 cs->protocol_errors},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		family(b, rows[i].name, rows[i].type, rows[i].help);
		sample(b, rows[i].name, NULL, (double)rows[i].v);
	}
}

static void storage_node(struct buf *b, const struct storage_stats *ss,
			 const struct conf *c)
{
	const struct {
		const char *name, *type, *help;
		double v;
	} rows[] = {
		{"cassandra_storage_load_bytes", "gauge",
		 "Bytes of live SSTables on disk.", (double)ss->sstable_bytes},
		{"cassandra_commit_log_size_bytes", "gauge",
		 "Bytes of the live commitlog segments (segments x "
		 "commitlog_segment_size).",
		 (double)ss->commitlog_segments *
			 (double)c->commitlog_segment_size},
		{"cassandra_commit_log_completed_tasks_total", "counter",
		 "Commitlog records made durable by a sync.",
		 (double)ss->commitlog_sync_writes},
		{"cassandra_compaction_completed_total", "counter",
		 "Compactions completed.", (double)ss->compactions},
		{"cassandra_compaction_pending_tasks", "gauge",
		 "Compactions running or due now (per table at most one of "
		 "each).",
		 (double)ss->compactions_pending},
		{"cassini_memtable_flushes_total", "counter",
		 "Memtables flushed to SSTables.", (double)ss->flushes},
		{"cassini_memtable_bytes", "gauge",
		 "Bytes held by memtables (their arenas).",
		 (double)ss->memtable_bytes},
		{"cassini_storage_writes_waiting", "gauge",
		 "Writes waiting for memtable room now.",
		 (double)ss->writes_waiting},
		{"cassini_storage_writes_refused_total", "counter",
		 "Writes refused because memtables stayed full.",
		 (double)ss->writes_refused},
		{"cassini_storage_corrupt_blocks_total", "counter",
		 "SSTable reads that failed a checksum.",
		 (double)ss->corrupt_blocks},
		{"cassini_storage_writes_stopped", "gauge",
		 "1 when a disk or commit failure stopped writes.",
		 ss->writes_stopped ? 1.0 : 0.0},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		family(b, rows[i].name, rows[i].type, rows[i].help);
		sample(b, rows[i].name, NULL, rows[i].v);
	}
	/* Cassandra's WaitingOnCommit timer; a summary without quantiles. */
	family(b, "cassandra_commit_log_commit_latency_seconds", "summary",
	       "Time the commitlog's syncs took (batch and group modes).");
	sample(b, "cassandra_commit_log_commit_latency_seconds_sum", NULL,
	       (double)ss->commitlog_sync_us / 1e6);
	sample(b, "cassandra_commit_log_commit_latency_seconds_count", NULL,
	       (double)ss->commitlog_syncs);
}

static void tables(struct buf *b, struct node *n)
{
	struct storage *db = cql_service_storage(n->cql);
	const struct cql_schema *schema = cql_service_schema(n->cql);
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} rows[] = {
		{"cassandra_table_live_sstables", "gauge", "Live SSTables.",
		 offsetof(struct storage_stats, sstable_count)},
		{"cassandra_table_live_disk_space_bytes", "gauge",
		 "Bytes of live SSTables.",
		 offsetof(struct storage_stats, sstable_bytes)},
		{"cassandra_table_estimated_partitions", "gauge",
		 "Partitions in memtables and SSTables (an upper bound).",
		 offsetof(struct storage_stats, estimated_partitions)},
		{"cassandra_table_memtable_live_bytes", "gauge",
		 "Bytes of data in the table's memtables.",
		 offsetof(struct storage_stats, memtable_data_bytes)},
		{"cassandra_table_memtable_switches", "counter",
		 "Memtables flushed.", offsetof(struct storage_stats, flushes)},
		{"cassini_table_compactions_total", "counter",
		 "Compactions of the table.",
		 offsetof(struct storage_stats, compactions)},
		{"cassini_table_tombstone_compactions_total", "counter",
		 "Single-SSTable tombstone compactions of the table.",
		 offsetof(struct storage_stats, tombstone_compactions)},
		{"cassandra_table_bytes_flushed_total", "counter",
		 "SSTable bytes (Data.db and Index.db) flushes wrote.",
		 offsetof(struct storage_stats, flushed_bytes)},
		{"cassandra_table_compaction_bytes_written_total", "counter",
		 "SSTable bytes (Data.db and Index.db) compactions wrote.",
		 offsetof(struct storage_stats, compaction_bytes_written)},
		{"cassini_table_local_reads_total", "counter",
		 "Point reads this replica answered.",
		 offsetof(struct storage_stats, local_reads)},
		{"cassini_table_local_writes_total", "counter",
		 "Mutations this replica applied.",
		 offsetof(struct storage_stats, local_writes)},
	};
	size_t nrows = sizeof(rows) / sizeof(rows[0]);
	/* One pass per family keeps each family's samples together, as the
	 * format requires; the stats are read once per table. */
	size_t count = 0;
	for (size_t i = 0; i < cql_schema_keyspace_count(schema); i++)
		count += cql_keyspace_table_count(
			cql_schema_keyspace_at(schema, i));
	struct row {
		char labels[400];
		struct storage_stats st;
		struct storage_table_hists h;
	} *all = calloc(count ? count : 1, sizeof(*all));
	if (!all)
		return;
	size_t m = 0;
	char ks[150], tb[150];
	for (size_t i = 0; i < cql_schema_keyspace_count(schema); i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(schema, i);
		for (size_t j = 0; j < cql_keyspace_table_count(k); j++) {
			const struct storage_table_meta *t =
				cql_table_meta(cql_keyspace_table_at(k, j));
			if (storage_stats(db, t->id, &all[m].st) != 0 ||
			    storage_table_histograms(db, t->id, &all[m].h))
				continue;
			snprintf(all[m].labels, sizeof(all[m].labels),
				 "keyspace=\"%s\",table=\"%s\"",
				 esc(t->keyspace, ks, sizeof(ks)),
				 esc(t->name, tb, sizeof(tb)));
			m++;
		}
	}
	for (size_t r = 0; r < nrows; r++) {
		family(b, rows[r].name, rows[r].type, rows[r].help);
		for (size_t i = 0; i < m; i++) {
			uint64_t v;
			memcpy(&v, (const char *)&all[i].st + rows[r].off,
			       sizeof(v));
			sample(b, rows[r].name, all[i].labels, (double)v);
		}
	}
	static const struct {
		const char *name, *help;
		size_t off;
		double scale;
	} hists[] = {
		{"cassandra_table_read_latency_seconds",
		 "Point reads this replica answered (its storage read).",
		 offsetof(struct storage_table_hists, read_us), 1e6},
		{"cassandra_table_write_latency_seconds",
		 "Mutations this replica applied (commitlog and memtable).",
		 offsetof(struct storage_table_hists, write_us), 1e6},
		{"cassandra_table_sstables_per_read",
		 "SSTables each point read read.",
		 offsetof(struct storage_table_hists, sstables), 1},
		{"cassandra_table_estimated_partition_size_bytes",
		 "Live SSTables' partitions by size.",
		 offsetof(struct storage_table_hists, partition_bytes), 1},
		{"cassandra_table_estimated_partition_cells",
		 "Live SSTables' partitions by cell count (each SSTable's "
		 "mean).",
		 offsetof(struct storage_table_hists, cells), 1},
	};
	for (size_t r = 0; r < sizeof(hists) / sizeof(hists[0]); r++) {
		family(b, hists[r].name, "histogram", hists[r].help);
		for (size_t i = 0; i < m; i++)
			table_histogram(b, hists[r].name, all[i].labels,
					(const struct storage_hist
						 *)((const char *)&all[i].h +
						    hists[r].off),
					hists[r].scale);
	}
	free(all);
}

static void endpoints(struct buf *b, struct node *n)
{
	size_t count = gossip_endpoint_count(n->gossip);
	struct gossip_endpoint_info *eps =
		calloc(count ? count : 1, sizeof(*eps));
	if (!eps)
		return;
	size_t m = 0, live = 0;
	for (size_t i = 0; i < count; i++)
		if (gossip_endpoint_at(n->gossip, i, &eps[m]) == 0) {
			live += eps[m].alive || eps[m].is_self;
			m++;
		}
	family(b, "cassini_gossip_live_endpoints", "gauge",
	       "Endpoints this node sees UP (itself included).");
	sample(b, "cassini_gossip_live_endpoints", NULL, (double)live);
	family(b, "cassini_gossip_down_endpoints", "gauge",
	       "Endpoints this node sees DOWN.");
	sample(b, "cassini_gossip_down_endpoints", NULL, (double)(m - live));
	char host[INET_ADDR_STRLEN], labels[96];
	const char *fam[] = {"cassandra_endpoint_active",
			     "cassandra_endpoint_generation",
			     "cassini_endpoint_phi"};
	const char *help[] = {"1 when the endpoint is UP, 0 when DOWN.",
			      "The endpoint's gossip generation.",
			      "The failure detector's suspicion of the "
			      "endpoint (convicted past "
			      "phi_convict_threshold)."};
	for (int f = 0; f < 3; f++) {
		family(b, fam[f], "gauge", help[f]);
		for (size_t i = 0; i < m; i++) {
			if (eps[i].is_self && f == 2)
				continue;
			snprintf(labels, sizeof(labels), "endpoint=\"%s\"",
				 inet_addr_format_host(&eps[i].addr, host,
						       sizeof(host)));
			double v = f == 0   ? (eps[i].alive || eps[i].is_self)
				   : f == 1 ? (double)eps[i].generation
					    : eps[i].phi;
			sample(b, fam[f], labels, v);
		}
	}
	free(eps);
}

/* The process_* family of Prometheus' client libraries. */
static void process(struct buf *b, struct node *n)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		family(b, "process_cpu_seconds_total", "counter",
		       "User and system CPU time.");
		sample(b, "process_cpu_seconds_total", NULL,
		       (double)ru.ru_utime.tv_sec +
			       (double)ru.ru_utime.tv_usec / 1e6 +
			       (double)ru.ru_stime.tv_sec +
			       (double)ru.ru_stime.tv_usec / 1e6);
	}
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, resident = 0;
	if (f) {
		if (fscanf(f, "%lu %lu", &size, &resident) == 2) {
			double page = (double)sysconf(_SC_PAGESIZE);
			family(b, "process_resident_memory_bytes", "gauge",
			       "Resident memory.");
			sample(b, "process_resident_memory_bytes", NULL,
			       (double)resident * page);
			family(b, "process_virtual_memory_bytes", "gauge",
			       "Virtual memory.");
			sample(b, "process_virtual_memory_bytes", NULL,
			       (double)size * page);
		}
		fclose(f);
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		size_t fds = 0;
		for (struct dirent *e; (e = readdir(d));)
			fds += e->d_name[0] != '.';
		closedir(d);
		family(b, "process_open_fds", "gauge",
		       "Open file descriptors.");
		sample(b, "process_open_fds", NULL, (double)(fds - 1));
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		family(b, "process_max_fds", "gauge",
		       "The file descriptor limit.");
		sample(b, "process_max_fds", NULL, (double)rl.rlim_cur);
	}
	family(b, "process_start_time_seconds", "gauge",
	       "Start time since the epoch.");
	sample(b, "process_start_time_seconds", NULL,
	       (double)n->start_wall_us / 1e6);
}

/* Compaction's bytes and limit, repair's sessions and streamed bytes. */
static void operations(struct buf *b, struct node *n,
		       const struct storage_stats *ss)
{
	family(b, "cassandra_compaction_bytes_compacted_total", "counter",
	       "Data.db bytes read by the compactions done (BytesCompacted); "
	       "its rate is the compaction throughput.");
	sample(b, "cassandra_compaction_bytes_compacted_total", NULL,
	       (double)ss->bytes_compacted);
	family(b, "cassini_compaction_remaining_bytes", "gauge",
	       "Data.db bytes the running compactions have left to read.");
	sample(b, "cassini_compaction_remaining_bytes", NULL,
	       (double)ss->compaction_remaining_bytes);
	family(b, "cassini_compaction_throughput_limit_bytes_per_second",
	       "gauge", "compaction_throughput (0: unthrottled).");
	sample(b, "cassini_compaction_throughput_limit_bytes_per_second", NULL,
	       (double)ratelimit_rate(
		       storage_throughput_budget(cql_service_storage(n->cql))));
	if (n->repair && n->repair->repair) {
		struct repair *r = n->repair->repair;
		struct repair_counts rc;
		repair_get_counts(r, &rc);
		static const char *const kinds[REPAIR_KINDS] = {
			"full", "incremental", "preview"};
		family(b, "cassini_repair_sessions_total", "counter",
		       "Repair sessions this node coordinated that ended, "
		       "manual and scheduled.");
		for (int k = 0; k < REPAIR_KINDS; k++)
			for (int ok = 1; ok >= 0; ok--) {
				char l[96];
				snprintf(l, sizeof(l),
					 "type=\"%s\",outcome=\"%s\"", kinds[k],
					 ok ? "success" : "failure");
				sample(b, "cassini_repair_sessions_total", l,
				       (double)(ok ? rc.succeeded[k]
						   : rc.failed[k]));
			}
		family(b, "cassini_repair_sessions_running", "gauge",
		       "1 while a repair session this node coordinates runs.");
		sample(b, "cassini_repair_sessions_running", NULL,
		       rc.running ? 1.0 : 0.0);
		family(b, "cassini_repair_streamed_bytes_total", "counter",
		       "Bytes of rows the ended repair sessions sent "
		       "replicas.");
		sample(b, "cassini_repair_streamed_bytes_total", NULL,
		       (double)rc.bytes_streamed);
		family(b, "cassini_repair_streamed_rows_total", "counter",
		       "Rows the ended repair sessions sent replicas.");
		sample(b, "cassini_repair_streamed_rows_total", NULL,
		       (double)rc.rows_streamed);
		struct repair_stream_stats st;
		repair_stream_stats(r, &st);
		family(b, "cassini_stream_outgoing_bytes_total", "counter",
		       "Bytes of rows sent by every session (repair, "
		       "bootstrap, "
		       "decommission, removenode, rebuild) as they go "
		       "(Cassandra's Streaming TotalOutgoingBytes).");
		sample(b, "cassini_stream_outgoing_bytes_total", NULL,
		       (double)st.bytes);
	}
}

/* A bootstrap's (or decommission's, removenode's, rebuild's) progress,
 * while one runs here. */
static void movements(struct buf *b, struct node *n)
{
	const struct node_move *mv[2] = {n->bootstrap,
					 node_moves_current(n->moves)};
	bool head = false;
	for (int i = 0; i < 2; i++) {
		if (!mv[i])
			continue;
		struct node_move_progress p;
		node_move_get_progress(mv[i], &p);
		if (!head) {
			family(b, "cassini_movement_ranges", "gauge",
			       "The (keyspace, range) pieces a bootstrap, "
			       "decommission, removenode or rebuild streams: "
			       "state streamed or all.");
			head = true;
		}
		char l[96];
		snprintf(l, sizeof(l), "operation=\"%s\",state=\"streamed\"",
			 p.kind);
		sample(b, "cassini_movement_ranges", l, (double)p.ranges_done);
		snprintf(l, sizeof(l), "operation=\"%s\",state=\"all\"",
			 p.kind);
		sample(b, "cassini_movement_ranges", l, (double)p.ranges_total);
	}
	const char *fams[3][2] = {
		{"cassini_movement_keyspaces",
		 "Keyspaces the movement streams: state streamed or all."},
		{"cassini_movement_streamed_bytes",
		 "Bytes of rows the movement sent so far."},
		{"cassini_movement_streamed_rows",
		 "Rows the movement sent so far."}};
	for (int f = 0; head && f < 3; f++) {
		family(b, fams[f][0], "gauge", fams[f][1]);
		for (int i = 0; i < 2; i++) {
			if (!mv[i])
				continue;
			struct node_move_progress p;
			node_move_get_progress(mv[i], &p);
			char l[96];
			if (f == 0) {
				snprintf(l, sizeof(l),
					 "operation=\"%s\",state=\"streamed\"",
					 p.kind);
				sample(b, fams[f][0], l,
				       (double)p.keyspaces_done);
				snprintf(l, sizeof(l),
					 "operation=\"%s\",state=\"all\"",
					 p.kind);
				sample(b, fams[f][0], l,
				       (double)p.keyspaces_total);
				continue;
			}
			snprintf(l, sizeof(l), "operation=\"%s\"", p.kind);
			sample(b, fams[f][0], l,
			       (double)(f == 1 ? p.bytes : p.rows));
		}
	}
}

int node_metrics_render(struct node *n, struct buf *b)
{
	if (n->cql) {
		struct repl_stats *st = calloc(1, sizeof(*st));
		if (!st)
			return err_set(ERR_NOMEM, "out of memory");
		cql_service_data_stats(n->cql, st);
		struct transport_stats ts;
		transport_get_stats(n->transport, &ts);
		struct storage_stats ss = {0};
		storage_stats(cql_service_storage(n->cql), NULL, &ss);
		struct cql_server_stats cs = {0};
		cql_service_server_stats(n->cql, &cs);
		client_requests(b, st);
		coordinator(b, st, &ts, &ss);
		hints(b, cql_service_hints(n->cql));
		native(b, &cs);
		storage_node(b, &ss, &n->conf);
		operations(b, n, &ss);
		movements(b, n);
		tables(b, n);
		free(st);
	}
	if (n->gossip)
		endpoints(b, n);
	process(b, n);
	return 0;
}

/* ---- HTTP ---------------------------------------------------------------- */

static void on_metrics(struct evhttp_request *req, void *arg)
{
	struct node_metrics *m = arg;
	struct buf b;
	buf_init(&b);
	if (node_metrics_render(m->n, &b) != 0) {
		buf_free(&b);
		evhttp_send_error(req, HTTP_INTERNAL, "metrics unavailable");
		return;
	}
	struct evbuffer *body = evbuffer_new();
	if (!body || evbuffer_add(body, b.data, b.len) != 0) {
		if (body)
			evbuffer_free(body);
		buf_free(&b);
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	buf_free(&b);
	evhttp_add_header(evhttp_request_get_output_headers(req),
			  "Content-Type",
			  "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, HTTP_OK, "OK", body);
	evbuffer_free(body);
}

static void on_other(struct evhttp_request *req, void *arg)
{
	(void)arg;
	evhttp_send_error(req, HTTP_NOTFOUND, "only /metrics is served here");
}

struct node_metrics *node_metrics_new(struct node *n)
{
	const struct inet_addr *a = &n->conf.metrics_address;
	if (a->port == 0)
		return NULL;
	struct node_metrics *m = calloc(1, sizeof(*m));
	if (!m) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	m->n = n;
	char host[INET_ADDR_STRLEN];
	inet_addr_format_host(a, host, sizeof(host));
	if (!(m->http = evhttp_new(n->base))) {
		free(m);
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	evhttp_set_max_headers_size(m->http, 16384);
	evhttp_set_max_body_size(m->http, 0);
	evhttp_set_timeout(m->http, 10);
	evhttp_set_cb(m->http, "/metrics", on_metrics, m);
	evhttp_set_gencb(m->http, on_other, m);
	if (!evhttp_bind_socket_with_handle(m->http, host, a->port)) {
		evhttp_free(m->http);
		free(m);
		err_set(ERR_IO, "metrics endpoint: cannot listen on %s:%u",
			host, (unsigned)a->port);
		return NULL;
	}
	LOG_INFO("metrics endpoint on http://%s:%u/metrics", host,
		 (unsigned)a->port);
	return m;
}

void node_metrics_delete(struct node_metrics *m)
{
	if (!m)
		return;
	evhttp_free(m->http);
	free(m);
}
