/*
 * The system_views tables the node fills from its own state (the CQL
 * layer defines them and sorts the rows): gossip_info from the gossiper,
 * pending_hints from the hint store, disk_usage and sstable_tasks from
 * storage, internode_inbound/outbound from the transport, repairs and
 * repair_sessions from repair's states (node_views_repair.c),
 * sai_column_indexes and system."IndexInfo" from the schema and storage's
 * index build states. Called on
 * the event loop for each SELECT on one of them; each reads in-memory
 * state only.
 */
#include "common/err.h"
#include "common/inet.h"
#include "gossip/gossip.h"
#include "node/cql_service.h"
#include "node/members.h"
#include "node/node_internal.h"
#include "node/transport.h"
#include "replication/hints.h"
#include "replication/replication.h"
#include "ring/ring.h"
#include "storage/storage.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Cassandra's column for an application state: its name in lower case. */
static void state_column(enum gossip_app_state k, const char *suffix, char *dst,
			 size_t cap)
{
	const char *name = gossip_app_state_name(k);
	size_t n = 0;
	for (; name[n] && n + 1 < cap; n++)
		dst[n] = (char)tolower((unsigned char)name[n]);
	dst[n] = 0;
	strncat(dst, suffix, cap - n - 1);
}

static int gossip_info(struct node *n, struct cql_view_rows *b)
{
	size_t count = gossip_endpoint_count(n->gossip);
	for (size_t i = 0; i < count; i++) {
		struct gossip_endpoint_info e;
		if (gossip_endpoint_at(n->gossip, i, &e) != 0)
			continue;
		char host[INET_ADDR_STRLEN];
		inet_addr_format_host(&e.addr, host, sizeof(host));
		if (cql_view_row(b) || cql_view_inet(b, "address", &e.addr) ||
		    cql_view_int(b, "port", e.addr.port) ||
		    cql_view_text(b, "hostname", host) ||
		    cql_view_int(b, "generation", (int32_t)e.generation) ||
		    cql_view_int(b, "heartbeat", e.heartbeat))
			return -1;
		for (int k = 0; k < GOSSIP_STATE_COUNT; k++) {
			if (!e.states[k])
				continue;
			char col[64];
			if (k != GOSSIP_STATE_TOKENS) {
				state_column(k, "", col, sizeof(col));
				if (cql_view_text(b, col, e.states[k]))
					return -1;
			}
			state_column(k, "_version", col, sizeof(col));
			if (cql_view_int(b, col, e.versions[k]))
				return -1;
		}
	}
	return 0;
}

static int pending_hints(struct node *n, struct cql_view_rows *b)
{
	struct hints *h = cql_service_hints(n->cql);
	if (!h)
		return 0;
	size_t total = hints_list_pending(h, NULL, 0);
	struct hints_host_stats *hosts =
		calloc(total ? total : 1, sizeof(*hosts));
	if (!hosts)
		return err_set(ERR_NOMEM, "no memory for pending_hints");
	size_t got = hints_list_pending(h, hosts, total);
	if (got > total)
		got = total;
	struct ring *r = members_ring(n->members);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < got; i++) {
		const struct hints_host_stats *hs = &hosts[i];
		/* Cassandra's "Unknown" for a host no longer in the ring */
		const char *rack = "Unknown", *dc = "Unknown",
			   *status = "Unknown";
		int ep = ring_endpoint_find_host_id(r, hs->host_id);
		const struct ring_endpoint *e =
			ep >= 0 ? ring_endpoint_get(r, (size_t)ep) : NULL;
		if (e) {
			rack = e->rack;
			dc = e->dc;
			status = gossip_is_alive(n->gossip, &e->addr) ? "UP"
								      : "DOWN";
		}
		rc = cql_view_row(b) ||
		     cql_view_uuid(b, "host_id", hs->host_id) ||
		     cql_view_text(b, "rack", rack) ||
		     cql_view_text(b, "dc", dc) ||
		     cql_view_text(b, "status", status) ||
		     cql_view_int(b, "files", (int32_t)hs->files) ||
		     cql_view_bigint(b, "total_size", (int64_t)hs->bytes) ||
		     cql_view_timestamp(b, "newest", hs->newest_us / 1000) ||
		     cql_view_timestamp(b, "oldest", hs->oldest_us / 1000);
		if (rc == 0 && e)
			rc = cql_view_inet(b, "address", &e->addr) ||
			     cql_view_int(b, "port", e->addr.port);
	}
	free(hosts);
	return rc ? -1 : 0;
}

static int disk_usage(struct node *n, struct cql_view_rows *b)
{
	struct storage *db = cql_service_storage(n->cql);
	const struct cql_schema *schema = cql_service_schema(n->cql);
	for (size_t i = 0; i < cql_schema_keyspace_count(schema); i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(schema, i);
		for (size_t j = 0; j < cql_keyspace_table_count(k); j++) {
			const struct storage_table_meta *t =
				cql_table_meta(cql_keyspace_table_at(k, j));
			struct storage_stats st;
			if (storage_stats(db, t->id, &st) != 0)
				continue;
			/* Cassandra rounds up to the next MiB */
			int64_t mib =
				(int64_t)((st.sstable_bytes + (1u << 20) - 1) >>
					  20);
			if (cql_view_row(b) ||
			    cql_view_text(b, "keyspace_name", t->keyspace) ||
			    cql_view_text(b, "table_name", t->name) ||
			    cql_view_bigint(b, "mebibytes", mib))
				return -1;
		}
	}
	return 0;
}

/* A histogram's percentile p (0..100), in its unit (the coordinator's
 * buckets: common/loghist.h). */
static double hist_at(const struct storage_hist *h, double p)
{
	struct repl_latency l = {.count = h->count, .sum_us = h->sum};
	memcpy(l.buckets, h->buckets, sizeof(l.buckets));
	return (double)repl_latency_percentile(&l, p);
}

/* Cassandra rounds its TableMetricTables' doubles to 3 decimals. */
static double round3(double v)
{
	return (double)(int64_t)(v * 1000 + 0.5) / 1000;
}

enum table_metric {
	TM_READ,
	TM_WRITE,
	TM_SCAN,
	TM_MAX_PARTITION,
	TM_ROWS,
	TM_TOMBSTONES,
	TM_COORD_READ,
	TM_COORD_SCAN,
	TM_COORD_WRITE
};

/* A coordinator latency (microseconds, repl's buckets) as a row's
 * count, max_ms, p50th_ms, p99th_ms. */
static int latency_cols(struct cql_view_rows *b, const struct repl_latency *l)
{
	return cql_view_bigint(b, "count", (int64_t)l->count) ||
	       cql_view_double(b, "max_ms",
			       round3((double)repl_latency_percentile(l, 100) /
				      1000)) ||
	       cql_view_double(
		       b, "p50th_ms",
		       round3((double)repl_latency_percentile(l, 50) / 1000)) ||
	       cql_view_double(
		       b, "p99th_ms",
		       round3((double)repl_latency_percentile(l, 99) / 1000));
}

/* Cassandra 4.1's TableMetricTables, one row per table: the latency
 * tables (count, p50th_ms, p99th_ms, max_ms of the replica's own point
 * reads or writes since start; per_second, a five-minute rate Cassini
 * does not keep, is null) and max_partition_size (the live SSTables'
 * largest partition, in MiB rounded up). */
static int table_metric(struct node *n, struct cql_view_rows *b,
			enum table_metric which)
{
	struct storage *db = cql_service_storage(n->cql);
	const struct cql_schema *schema = cql_service_schema(n->cql);
	for (size_t i = 0; i < cql_schema_keyspace_count(schema); i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(schema, i);
		for (size_t j = 0; j < cql_keyspace_table_count(k); j++) {
			const struct storage_table_meta *t =
				cql_table_meta(cql_keyspace_table_at(k, j));
			if (which >= TM_COORD_READ) {
				/* this node as coordinator: every table,
				 * count 0 until it coordinated a request */
				struct repl_table_latency tl;
				cql_service_table_latency(n->cql, t->id, &tl);
				const struct repl_latency *l =
					which == TM_COORD_READ   ? &tl.read
					: which == TM_COORD_SCAN ? &tl.range
								 : &tl.write;
				if (cql_view_row(b) ||
				    cql_view_text(b, "keyspace_name",
						  t->keyspace) ||
				    cql_view_text(b, "table_name", t->name) ||
				    latency_cols(b, l))
					return -1;
				continue;
			}
			struct storage_table_hists h;
			if (storage_table_histograms(db, t->id, &h) != 0)
				continue;
			if (cql_view_row(b) ||
			    cql_view_text(b, "keyspace_name", t->keyspace) ||
			    cql_view_text(b, "table_name", t->name))
				return -1;
			if (which == TM_MAX_PARTITION) {
				uint64_t max =
					h.partition_bytes.count
						? (uint64_t)hist_at(
							  &h.partition_bytes,
							  100)
						: 0;
				if (cql_view_bigint(
					    b, "mebibytes",
					    (int64_t)((max + (1u << 20) - 1) >>
						      20)))
					return -1;
				continue;
			}
			if (which == TM_ROWS || which == TM_TOMBSTONES) {
				const struct storage_hist *x =
					which == TM_ROWS ? &h.live_rows
							 : &h.tombstones;
				if (cql_view_bigint(b, "count",
						    (int64_t)x->count) ||
				    cql_view_double(b, "max",
						    round3(hist_at(x, 100))) ||
				    cql_view_double(b, "p50th",
						    round3(hist_at(x, 50))) ||
				    cql_view_double(b, "p99th",
						    round3(hist_at(x, 99))))
					return -1;
				continue;
			}
			const struct storage_hist *l =
				which == TM_READ   ? &h.read_us
				: which == TM_SCAN ? &h.scan_us
						   : &h.write_us;
			if (cql_view_bigint(b, "count", (int64_t)l->count) ||
			    cql_view_double(b, "max_ms",
					    round3(hist_at(l, 100) / 1000)) ||
			    cql_view_double(b, "p50th_ms",
					    round3(hist_at(l, 50) / 1000)) ||
			    cql_view_double(b, "p99th_ms",
					    round3(hist_at(l, 99) / 1000)))
				return -1;
		}
	}
	return 0;
}

/* Cassandra 4.1's CachesTable, its `chunks` row: the block cache of
 * decoded SSTable blocks, Cassini's counterpart of the chunk cache. The
 * key, row and counter caches do not exist here (no rows); the recent
 * rates (five-minute meters) are not kept (null). */
static int caches(struct node *n, struct cql_view_rows *b)
{
	struct storage_cache_stats c;
	storage_cache_stats(cql_service_storage(n->cql), &c);
	/* Cassandra's ratio gauge: NaN before the first request */
	double ratio = c.requests ? (double)c.hits / (double)c.requests : NAN;
	if (cql_view_row(b) || cql_view_text(b, "name", "chunks") ||
	    cql_view_bigint(b, "capacity_bytes", (int64_t)c.capacity_bytes) ||
	    cql_view_int(b, "entry_count",
			 c.entries > INT32_MAX ? INT32_MAX
					       : (int32_t)c.entries) ||
	    cql_view_bigint(b, "hit_count", (int64_t)c.hits) ||
	    cql_view_double(b, "hit_ratio", ratio) ||
	    cql_view_bigint(b, "request_count", (int64_t)c.requests) ||
	    cql_view_bigint(b, "size_bytes", (int64_t)c.size_bytes))
		return -1;
	return 0;
}

const struct storage_table_meta *node_table_by_id(struct node *n,
						  const uint8_t id[16])
{
	const struct cql_schema *schema = cql_service_schema(n->cql);
	for (size_t i = 0; i < cql_schema_keyspace_count(schema); i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(schema, i);
		for (size_t j = 0; j < cql_keyspace_table_count(k); j++) {
			const struct storage_table_meta *t =
				cql_table_meta(cql_keyspace_table_at(k, j));
			if (memcmp(t->id, id, 16) == 0)
				return t;
		}
	}
	return NULL;
}

/* Cassandra 4.1's SSTableTasksTable: the running compactions, kind and
 * unit in lower case. */
static int sstable_tasks(struct node *n, struct cql_view_rows *b)
{
	struct storage_compaction_info c[64];
	size_t got =
		storage_compactions_active(cql_service_storage(n->cql), c, 64);
	for (size_t i = 0; i < got && i < 64; i++) {
		const struct storage_table_meta *t =
			node_table_by_id(n, c[i].table_id);
		char kind[32];
		size_t k = 0;
		for (; c[i].kind[k] && k + 1 < sizeof(kind); k++)
			kind[k] = (char)tolower((unsigned char)c[i].kind[k]);
		kind[k] = 0;
		double ratio =
			c[i].total ? (double)c[i].completed / (double)c[i].total
				   : 1.0;
		if (cql_view_row(b) ||
		    cql_view_text(b, "keyspace_name", t ? t->keyspace : "*") ||
		    cql_view_text(b, "table_name", t ? t->name : "*") ||
		    cql_view_uuid(b, "task_id", c[i].task_id) ||
		    cql_view_double(b, "completion_ratio", ratio) ||
		    cql_view_text(b, "kind", kind) ||
		    cql_view_bigint(b, "progress", (int64_t)c[i].completed) ||
		    cql_view_bigint(b, "total", (int64_t)c[i].total) ||
		    cql_view_text(b, "unit", "bytes"))
			return -1;
	}
	return 0;
}

/* A peer's row key: address, port, and its dc and rack as the ring knows
 * them (Cassandra's snitch says UNKNOWN_DC / UNKNOWN_RACK otherwise). */
static int internode_key(struct node *n, struct cql_view_rows *b,
			 const struct inet_addr *a)
{
	struct ring *r = members_ring(n->members);
	int ep = ring_endpoint_find(r, a);
	const struct ring_endpoint *e =
		ep >= 0 ? ring_endpoint_get(r, (size_t)ep) : NULL;
	return cql_view_row(b) || cql_view_inet(b, "address", a) ||
	       cql_view_int(b, "port", a->port) ||
	       cql_view_text(b, "dc", e ? e->dc : "UNKNOWN_DC") ||
	       cql_view_text(b, "rack", e ? e->rack : "UNKNOWN_RACK");
}

#define VIEW_COUNT(b, col, v) cql_view_bigint(b, col, (int64_t)(v))

/* Cassandra 4.1's internode_outbound: what this node sent each peer. We
 * queue no message past a deadline and have no reserve capacity: those
 * counters are 0; using_bytes is what is queued, as in Cassandra. */
static int internode_outbound(struct node *n, struct cql_view_rows *b)
{
	size_t total = transport_outbound_peers(n->transport, NULL, 0);
	struct transport_outbound_stats *st =
		calloc(total ? total : 1, sizeof(*st));
	if (!st)
		return err_set(ERR_NOMEM, "no memory for internode_outbound");
	size_t got = transport_outbound_peers(n->transport, st, total);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < got && i < total; i++) {
		const struct transport_outbound_stats *o = &st[i];
		rc = internode_key(n, b, &o->addr) ||
		     VIEW_COUNT(b, "using_bytes", o->pending_bytes) ||
		     VIEW_COUNT(b, "using_reserve_bytes", 0) ||
		     VIEW_COUNT(b, "pending_count", o->pending_count) ||
		     VIEW_COUNT(b, "pending_bytes", o->pending_bytes) ||
		     VIEW_COUNT(b, "sent_count", o->sent_count) ||
		     VIEW_COUNT(b, "sent_bytes", o->sent_bytes) ||
		     VIEW_COUNT(b, "expired_count", 0) ||
		     VIEW_COUNT(b, "expired_bytes", 0) ||
		     VIEW_COUNT(b, "error_count", o->error_count) ||
		     VIEW_COUNT(b, "error_bytes", o->error_bytes) ||
		     VIEW_COUNT(b, "overload_count", o->overload_count) ||
		     VIEW_COUNT(b, "overload_bytes", o->overload_bytes) ||
		     VIEW_COUNT(b, "active_connections",
				o->active_connections) ||
		     VIEW_COUNT(b, "connection_attempts",
				o->connection_attempts) ||
		     VIEW_COUNT(b, "successful_connection_attempts",
				o->successful_connection_attempts);
	}
	free(st);
	return rc ? -1 : 0;
}

/* Cassandra 4.1's internode_inbound: what each peer sent this node.
 * Messages are handled as they arrive (nothing is scheduled or
 * throttled), and a frame that cannot be decoded closes its connection
 * (never recovered): those counters are as they must be here. */
static int internode_inbound(struct node *n, struct cql_view_rows *b)
{
	size_t total = transport_inbound_peers(n->transport, NULL, 0);
	struct transport_inbound_stats *st =
		calloc(total ? total : 1, sizeof(*st));
	if (!st)
		return err_set(ERR_NOMEM, "no memory for internode_inbound");
	size_t got = transport_inbound_peers(n->transport, st, total);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < got && i < total; i++) {
		const struct transport_inbound_stats *o = &st[i];
		rc = internode_key(n, b, &o->addr) ||
		     VIEW_COUNT(b, "using_bytes", o->using_bytes) ||
		     VIEW_COUNT(b, "using_reserve_bytes", 0) ||
		     VIEW_COUNT(b, "corrupt_frames_recovered", 0) ||
		     VIEW_COUNT(b, "corrupt_frames_unrecovered",
				o->error_count) ||
		     VIEW_COUNT(b, "error_count", o->error_count) ||
		     VIEW_COUNT(b, "error_bytes", o->error_bytes) ||
		     VIEW_COUNT(b, "expired_count", o->expired_count) ||
		     VIEW_COUNT(b, "expired_bytes", o->expired_bytes) ||
		     VIEW_COUNT(b, "scheduled_count", 0) ||
		     VIEW_COUNT(b, "scheduled_bytes", 0) ||
		     VIEW_COUNT(b, "processed_count", o->processed_count) ||
		     VIEW_COUNT(b, "processed_bytes", o->processed_bytes) ||
		     VIEW_COUNT(b, "received_count", o->received_count) ||
		     VIEW_COUNT(b, "received_bytes", o->received_bytes) ||
		     VIEW_COUNT(b, "throttled_count", 0) ||
		     VIEW_COUNT(b, "throttled_nanos", 0);
	}
	free(st);
	return rc ? -1 : 0;
}

/* SAI's IndexTermType.isLiteral: strings, booleans and frozen values
 * (compared by their bytes), for what the index's terms are made of. */
static bool index_is_string(const struct storage_table_meta *t,
			    const struct storage_index *ix)
{
	const struct storage_type *ty = t->columns[ix->column].type;
	if (ix->target == STORAGE_INDEX_FULL)
		return true;
	if (ix->target == STORAGE_INDEX_KEYS && ty->count >= 1)
		ty = ty->sub[0];
	else if ((ix->target == STORAGE_INDEX_VALUES ||
		  ix->target == STORAGE_INDEX_ENTRIES) &&
		 ty->count >= 1)
		ty = ty->sub[ty->kind == STORAGE_TYPE_MAP && ty->count > 1];
	if (ty->frozen && ty->count)
		return true;
	return ty->kind == STORAGE_TYPE_TEXT ||
	       ty->kind == STORAGE_TYPE_ASCII ||
	       ty->kind == STORAGE_TYPE_BOOLEAN;
}

/* Cassandra 5.0's sai_column_indexes (a row per index: queryable once
 * built on this node, building while its build runs) and system."IndexInfo"
 * (a row per index built on this node). */
static int index_views(struct node *n, struct cql_view_rows *b, bool info)
{
	struct storage *db = cql_service_storage(n->cql);
	const struct cql_schema *schema = cql_service_schema(n->cql);
	struct storage_index_build_info bi[64];
	size_t nb = storage_index_builds(db, bi, 64);
	for (size_t i = 0; i < cql_schema_keyspace_count(schema); i++) {
		const struct cql_keyspace *k =
			cql_schema_keyspace_at(schema, i);
		for (size_t j = 0; j < cql_keyspace_table_count(k); j++) {
			const struct storage_table_meta *t =
				cql_table_meta(cql_keyspace_table_at(k, j));
			for (size_t x = 0; x < t->index_count; x++) {
				const struct storage_index *ix = &t->indexes[x];
				int st = storage_index_state(db, t->id,
							     ix->name);
				if (st < 0)
					continue; /* not in storage yet */
				bool built = st == STORAGE_INDEX_BUILT;
				if (info) {
					if (built &&
					    (cql_view_row(b) ||
					     cql_view_text(b, "table_name",
							   t->keyspace) ||
					     cql_view_text(b, "index_name",
							   ix->name)))
						return -1;
					continue;
				}
				bool failed = false;
				for (size_t q = 0; q < nb && q < 64; q++)
					if (memcmp(bi[q].table_id, t->id, 16) ==
						    0 &&
					    strcmp(bi[q].index, ix->name) == 0)
						failed = bi[q].failed;
				char analyzer[112] = "NoOpAnalyzer";
				if (ix->analyzer)
					snprintf(
						analyzer, sizeof(analyzer),
						"NonTokenizingAnalyzer{"
						"caseSensitive=%s, "
						"normalized=%s, ascii=%s}",
						ix->analyzer & STORAGE_SAI_LOWER
							? "false"
							: "true",
						ix->analyzer & STORAGE_SAI_NORMALIZE
							? "true"
							: "false",
						ix->analyzer & STORAGE_SAI_ASCII
							? "true"
							: "false");
				if (cql_view_row(b) ||
				    cql_view_text(b, "keyspace_name",
						  t->keyspace) ||
				    cql_view_text(b, "index_name", ix->name) ||
				    cql_view_text(b, "table_name", t->name) ||
				    cql_view_text(
					    b, "column_name",
					    t->columns[ix->column].name) ||
				    cql_view_bool(b, "is_queryable", built) ||
				    cql_view_bool(b, "is_building",
						  !built && !failed) ||
				    cql_view_bool(b, "is_string",
						  index_is_string(t, ix)) ||
				    cql_view_text(b, "analyzer", analyzer))
					return -1;
			}
		}
	}
	return 0;
}

int node_view_rows(void *arg, const char *table, struct cql_view_rows *b)
{
	struct node *n = arg;
	if (strcmp(table, "gossip_info") == 0)
		return gossip_info(n, b);
	if (strcmp(table, "pending_hints") == 0)
		return pending_hints(n, b);
	if (strcmp(table, "disk_usage") == 0)
		return disk_usage(n, b);
	if (strcmp(table, "sstable_tasks") == 0)
		return sstable_tasks(n, b);
	if (strcmp(table, "sai_column_indexes") == 0)
		return index_views(n, b, false);
	if (strcmp(table, "IndexInfo") == 0)
		return index_views(n, b, true);
	if (strcmp(table, "caches") == 0)
		return caches(n, b);
	if (strcmp(table, "max_partition_size") == 0)
		return table_metric(n, b, TM_MAX_PARTITION);
	if (strcmp(table, "rows_per_read") == 0)
		return table_metric(n, b, TM_ROWS);
	if (strcmp(table, "tombstones_per_read") == 0)
		return table_metric(n, b, TM_TOMBSTONES);
	if (strcmp(table, "local_read_latency") == 0)
		return table_metric(n, b, TM_READ);
	if (strcmp(table, "local_write_latency") == 0)
		return table_metric(n, b, TM_WRITE);
	if (strcmp(table, "local_scan_latency") == 0)
		return table_metric(n, b, TM_SCAN);
	if (strcmp(table, "repairs") == 0 ||
	    strcmp(table, "repair_sessions") == 0)
		return node_view_repairs(n, b, table[6] == '_');
	if (strcmp(table, "internode_outbound") == 0)
		return internode_outbound(n, b);
	if (strcmp(table, "internode_inbound") == 0)
		return internode_inbound(n, b);
	if (strcmp(table, "coordinator_read_latency") == 0)
		return table_metric(n, b, TM_COORD_READ);
	if (strcmp(table, "coordinator_scan_latency") == 0)
		return table_metric(n, b, TM_COORD_SCAN);
	if (strcmp(table, "coordinator_write_latency") == 0)
		return table_metric(n, b, TM_COORD_WRITE);
	return 0;
}
