/*
 * The replicated data path: CQL statements on user tables, turned into
 * mutations and read plans (client/), coordinated at the request's
 * consistency level (replication/), over this node's storage engine as the
 * local replica.
 *
 * Writes: the mutations of a statement or batch go to repl_write with the
 * strategy of each table's keyspace. Reads by key: one repl_read per
 * partition in plan order; the merged fragment is resolved with the plan's
 * read command. Scans: repl_range_step in token order until the page (or
 * LIMIT) is full. Replies are encoded here, errors as the protocol's
 * Unavailable / timeout / failure bodies.
 *
 * The store side runs storage reads on worker threads and hands their
 * completions back to the loop.
 */
#ifndef CASSINI_NODE_CQL_DATA_H
#define CASSINI_NODE_CQL_DATA_H

#include "client/exec/executor.h"
#include "common/env.h"
#include "common/loopq.h"
#include "replication/hints.h"
#include "replication/replication.h"
#include "storage/storage.h"

struct cql_data;
struct node_cas;

struct cql_data_hooks {
	struct ring *(*ring)(void *arg);
	bool (*is_alive)(void *arg, const struct inet_addr *ep);
	void *arg;
};

struct hints;
struct hints_options;

/* Borrowed: db, env, q (the loop's queue), schema; they must outlive it.
 * Reads pin the schema while they run (cql_schema_pin). `ho`: hinted
 * handoff's options (its hooks are set here), or NULL for none. Opening
 * the hint store blocks (a scan of its files). */
struct cql_data *cql_data_new(struct storage *db, struct env *env,
			      struct loopq *q, struct cql_schema *schema,
			      const struct repl_options *o,
			      const struct hints_options *ho,
			      const struct cql_data_hooks *hooks);
/* Waits for storage reads on the workers; their completions are queued on
 * `q` (run them before cql_data_delete). */
void cql_data_stop(struct cql_data *d);
void cql_data_delete(struct cql_data *d);

/* The executor's data hook (arg = the cql_data). */
void cql_data_request(void *arg, const struct cql_data_request *dr);
/* A replication message (REPL_VERB_*) from a peer. */
void cql_data_receive(struct cql_data *d, const struct inet_addr *from,
		      uint32_t verb, const uint8_t *msg, size_t len);
void cql_data_stats(const struct cql_data *d, struct repl_stats *out);
struct repl_table_latency;
/* The coordinator latencies of one table (repl_get_table_latency). */
void cql_data_forget_table(struct cql_data *d, const uint8_t id[16]);
bool cql_data_table_latency(const struct cql_data *d, const uint8_t id[16],
			    struct repl_table_latency *out);
/* SELECTs slower than timeout_us go to the slow query log
 * (node/slow_queries.h); 0 turns it off. -1 with err set. */
int cql_data_set_slow_query_timeout(struct cql_data *d, uint64_t timeout_us);

/* What the failure detector and the ring say about a peer, for hinted
 * handoff (down: the hint window starts; up: delivery starts; removed:
 * its hints are dropped). */
enum cql_data_peer_event {
	CQL_DATA_PEER_UP,
	CQL_DATA_PEER_DOWN,
	CQL_DATA_PEER_REMOVED,
};
void cql_data_peer_event(struct cql_data *d, const uint8_t host_id[16],
			 enum cql_data_peer_event ev);
/* batch_size_warn_threshold, batch_size_fail_threshold (bytes; 0 = no
 * check) and unlogged_batch_across_partitions_warn_threshold. */
/* The tombstone_failure_threshold named in the ReadFailure of a read a
 * replica aborted (Cassandra 4.1's "N nodes scanned over T tombstones and
 * aborted the query ..."). */
void cql_data_set_tombstone_failure_threshold(struct cql_data *d,
					      int64_t threshold);
struct node_trace;
/* Where this node's events of trace sessions (its replica's steps, the
 * replication coordinator's sends) go; NULL: dropped. */
void cql_data_set_tracer(struct cql_data *d, struct node_trace *t);
void cql_data_set_batch_limits(struct cql_data *d, uint64_t warn_bytes,
			       uint64_t fail_bytes,
			       int64_t unlogged_partitions);
/* The hint store (admin commands), or NULL. */
struct hints *cql_data_hints(struct cql_data *d);
/* Decommission: hands every stored hint over to `to`, which keeps them
 * for their targets (hints_hand_over; `done` at once when handoff is
 * off). 0 or -1 with err set. */
int cql_data_hand_over_hints(struct cql_data *d, const struct inet_addr *to,
			     hints_handed_fn done, void *arg);
/* Forgets the hand-over under way (its done never runs). */
void cql_data_hand_over_cancel(struct cql_data *d);
/* The LWT side (paxos repair, test hooks). */
struct node_cas *cql_data_cas(struct cql_data *d);

#endif
