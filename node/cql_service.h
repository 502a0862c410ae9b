/*
 * The node's CQL side: the storage engine, the schema (with its log), the
 * data path, the statement executor and the native-protocol server,
 * started and stopped together.
 *
 * Start-up order matters: the schema log is replayed first so the engine
 * knows every table before it replays its commitlog; the client port opens
 * last, once the node has its tokens (as Cassandra's native transport
 * starts after joining the ring): a driver that connected to a node without
 * tokens would build a token map with nothing in it.
 */
#ifndef CASSINI_NODE_CQL_SERVICE_H
#define CASSINI_NODE_CQL_SERVICE_H

#include "client/schema/system_tables.h"
#include "conf/conf.h"

#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

struct event_base;
struct env;
struct cql_service;
struct node_cas;

/* The node's current view for system.local / system.peers. */
typedef void (*cql_service_node_info_fn)(void *arg, struct cql_node_info *out);

struct ring;
struct inet_addr;
struct repl_stats;

/* What the service asks the node (all with the `arg` of
 * cql_service_new). */
struct cql_service_hooks {
	cql_service_node_info_fn node_info;
	/* The ring as gossip describes it (borrowed until the next call). */
	struct ring *(*ring)(void *arg);
	/* The failure detector's verdict on a peer. */
	bool (*is_alive)(void *arg, const struct inet_addr *ep);
	/* The thread pools as tpstats shows them, for system_views
	 * (at most `cap`; returns how many). Optional. */
	size_t (*thread_pools)(void *arg, struct cql_thread_pool *out,
			       size_t cap);
	/* The node-made system_views tables (cql_views_info.table_rows).
	 * Optional. */
	int (*view_rows)(void *arg, const char *table,
			 struct cql_view_rows *rows);
};

#define CQL_SERVICE_POOLS_MAX 16

/* Opens storage under the configured directories and replays the schema
 * log and the commitlog. Blocks while replaying (call before the loop
 * runs). `c` must outlive the service. NULL with err set. */
struct cql_service *cql_service_new(const struct conf *c,
				    struct event_base *base, struct env *env,
				    const struct cql_service_hooks *h,
				    void *arg);

/* A coordinator message (REPL_VERB_*) from a peer. */
void cql_service_receive(struct cql_service *s, const struct inet_addr *from,
			 uint32_t verb, const uint8_t *msg, size_t len);
/* A peer came up (0), went down (1) or left the ring (2): hinted
 * handoff's cues (enum cql_data_peer_event). */
void cql_service_peer_event(struct cql_service *s, const uint8_t host_id[16],
			    int ev);
/* The hint store, for the admin commands (NULL without one). */
struct hints *cql_service_hints(struct cql_service *s);
/* The authentication module (roles, logins), or NULL before it starts. */
struct cql_auth *cql_service_auth(struct cql_service *s);
/* Decommission's hint hand-over (cql_data_hand_over_hints). */
int cql_service_hand_over_hints(struct cql_service *s,
				const struct inet_addr *to,
				void (*done)(void *arg, bool ok), void *arg);
void cql_service_hand_over_cancel(struct cql_service *s);
/* The LWT side (node/cql_cas.h): paxos repair, test hooks. */
struct node_cas *cql_service_cas(struct cql_service *s);
struct cql_server_stats;
/* A server TLS context from client_encryption_options (or the same keys of
 * jmx_encryption_options), made anew from its files (thread-safe: it reads
 * only `ce`), or NULL with err set ("SECTION: ..."). */
struct ssl_ctx_st;
struct ssl_ctx_st *
cql_service_tls_context(const struct conf_client_encryption *ce,
			const char *section);
/* New client connections use `ctx` (owned from here); established ones
 * keep the context they started with. */
void cql_service_set_tls(struct cql_service *s, struct ssl_ctx_st *ctx);

/* The CQL server's connections and requests (zeros before it serves). */
void cql_service_server_stats(const struct cql_service *s,
			      struct cql_server_stats *out);
/* The coordinator's counters and latencies. */
void cql_service_data_stats(const struct cql_service *s,
			    struct repl_stats *out);
struct repl_table_latency;
/* One table's coordinator latencies (system_views.coordinator_*_latency):
 * false when none were recorded. */
bool cql_service_table_latency(const struct cql_service *s,
			       const uint8_t id[16],
			       struct repl_table_latency *out);

/* Listens on rpc_address:native_transport_port; after stop_serving, again
 * (enablebinary); nothing while listening. -1 with err set when the port
 * cannot be bound. */
int cql_service_serve(struct cql_service *s);

/* Bytes of live SSTables: the node's load, as nodetool status shows it. */
uint64_t cql_service_load_bytes(const struct cql_service *s);

/* The events drivers follow the cluster by (their control connection
 * registers for them): TOPOLOGY_CHANGE NEW_NODE / REMOVED_NODE or
 * STATUS_CHANGE UP / DOWN (`topology` false) for the node whose native
 * address is `native`, to every client registered for the kind. Nothing
 * before the native port opens. */
void cql_service_node_event(struct cql_service *s, bool topology,
			    const char *change, const struct inet_addr *native);

/* Whether CQL clients are served (false before serve and after
 * stop_serving). */
bool cql_service_serving(const struct cql_service *s);
/* Whether the native transport was opened once (it may be stopped now). */
bool cql_service_started(const struct cql_service *s);
/* Closes the native transport listener and every client connection (drain). */
void cql_service_stop_serving(struct cql_service *s);

/* Maintenance of `n` tables on the maintenance thread: a flush of their
 * memtables (n == 0: every table), a major compaction of each (every
 * SSTable merged into one; n > 0), or a cleanup of each (flushed, then
 * rewritten without the partitions outside its ranges: those of table i
 * are ranges[range_off[i] .. range_off[i + 1]), sorted; n > 0). In two
 * steps so a caller can take its own resources in between: prepare (NULL
 * with err set; everything is copied), then start, which cannot fail: the
 * work runs on the maintenance thread and `done` runs on the loop with 0
 * or -1 and a message. A prepared job that is not started is released
 * with free(). */
enum cql_maintenance {
	CQL_MAINTENANCE_FLUSH,
	CQL_MAINTENANCE_COMPACT,
	CQL_MAINTENANCE_CLEANUP,
	CQL_MAINTENANCE_SNAPSHOT,       /* the tag: cql_service_flush_set_tag */
	CQL_MAINTENANCE_CLEAR_SNAPSHOT, /* the tag; none: every snapshot */
	CQL_MAINTENANCE_LIST_SNAPSHOTS, /* `done` gets the lines as msg */
	/* every table verified; `done` gets the keyspaces of those with a
	 * corrupt SSTable as msg, one per line ("" when all are sound) */
	CQL_MAINTENANCE_VERIFY,
	/* garbagecollect (CQL_MAINTENANCE_GC_CELL: -g CELL) */
	CQL_MAINTENANCE_GARBAGECOLLECT,
	/* scrub: the tag names the snapshot taken first ("": none); `done`
	 * gets a line per table that lost partitions */
	CQL_MAINTENANCE_SCRUB,
};
#define CQL_MAINTENANCE_GC_CELL        1u
#define CQL_MAINTENANCE_SKIP_CORRUPTED 2u
typedef void (*cql_service_done_fn)(void *arg, int status, const char *msg);
struct cql_flush;
struct storage_token_range;
struct cql_flush *
cql_service_flush_prepare(struct cql_service *s, const uint8_t (*table_ids)[16],
			  size_t n, enum cql_maintenance what,
			  const struct storage_token_range *ranges,
			  const size_t *range_off);
/* The snapshot tag of a SNAPSHOT or CLEAR_SNAPSHOT job (copied; at most
 * 200 bytes). */
void cql_service_flush_set_tag(struct cql_flush *f, const char *tag);
/* CQL_MAINTENANCE_GC_CELL, CQL_MAINTENANCE_SKIP_CORRUPTED. */
void cql_service_flush_set_flags(struct cql_flush *f, unsigned flags);
void cql_service_flush_start(struct cql_flush *f, cql_service_done_fn done,
			     void *arg);

/* Closes client connections and stops storage (the commitlog covers what
 * was not flushed). Blocks briefly while workers finish. */
void cql_service_delete(struct cql_service *s);

/* nodetool settraceprobability / gettraceprobability: the share of
 * statements traced without the client asking, 0 (the default) to 1;
 * -1 (ERR_INVALID) outside, or before the CQL server started. */
int cql_service_set_trace_probability(struct cql_service *s, double p);
double cql_service_trace_probability(const struct cql_service *s);

/* Called (on the loop) after each applied schema change, with the record
 * as it travels between nodes; `local` when a client of this node made it
 * (the node pushes those to its peers). */
typedef void (*cql_service_change_fn)(void *arg, const uint8_t *record,
				      size_t len, bool local);
void cql_service_on_schema_change(struct cql_service *s,
				  cql_service_change_fn fn, void *arg);

/* Applies a schema record from a peer (push or pull). Records already
 * applied are skipped; one that does not apply is logged and skipped. */
void cql_service_apply_record(struct cql_service *s, const uint8_t *record,
			      size_t len);

/* Appends every applied record in order, each as u32 length + record. */
int cql_service_records(const struct cql_service *s, struct buf *out);

/* The schema registry (keyspaces, tables, replication), for the admin
 * commands; valid until cql_service_delete. */
const struct cql_schema *cql_service_schema(const struct cql_service *s);

struct storage;
struct loopq;
/* The storage engine and the loop's completion queue (repair's store);
 * valid until cql_service_delete. */
struct storage *cql_service_storage(const struct cql_service *s);
struct loopq *cql_service_loopq(const struct cql_service *s);
/* The maintenance worker (made on first use; NULL with err set), for the
 * admin commands' blocking work (import); valid until cql_service_delete,
 * which finishes its queued jobs. */
struct workers;
struct workers *cql_service_maintenance(struct cql_service *s);

/* The schema version system.local reports (for gossip's SCHEMA state). */
void cql_service_schema_version(const struct cql_service *s, uint8_t out[16]);

#endif
