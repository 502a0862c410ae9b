/*
 * Lightweight transactions on the node: the data path's conditional writes
 * (client/exec/cas.h for the CQL side) run as Paxos rounds
 * (replication/paxos.h) among the partition's replicas, with each
 * replica's acceptor registers kept in the local table system.paxos.
 *
 * system.paxos (node-local, never replicated by the write path):
 *
 *   row_key blob       the partition key of the user table
 *   cf_id   uuid       the user table (clustering)
 *   state   blob       paxos_state_encode's form: promised, accepted
 *                      (ballot, update), committed (ballot, update)
 *
 * Participants: SERIAL takes every natural and pending replica, and needs
 * quorum(natural) + pending promises; LOCAL_SERIAL those of the local
 * datacenter with its local quorum. The commit waits for the statement's
 * consistency level (ANY: none).
 */
#ifndef CASSINI_NODE_CQL_CAS_H
#define CASSINI_NODE_CQL_CAS_H

#include "client/exec/executor.h"
#include "common/env.h"
#include "replication/paxos.h"
#include "replication/replication.h"
#include "storage/storage.h"

struct node_cas;

struct node_cas_hooks {
	struct ring *(*ring)(void *arg); /* borrowed for the call */
	bool (*is_alive)(void *arg, const struct inet_addr *ep);
	/* run(job) off the loop, then done(job) on it (the lease writes) */
	void (*offload)(void *arg, void (*run)(void *job),
			void (*done)(void *job), void *job);
	void *arg;
};

/* Registers system.paxos with the engine (before storage_start). */
int node_cas_table_add(struct storage *db);

/* `store` is the data path's local replica (reads through the caches,
 * deferred commitlog writes); it and `schema` outlive the node_cas.
 *
 * `ballot_file` (may be NULL) holds the ballot lease: read at start (it
 * blocks: startup), ballots are issued above it, and it is kept an hour
 * ahead of the newest ballot (rewritten off the loop when less than ten
 * minutes remain), so a restarted node never reuses the time of a ballot
 * of its previous life even when its clock stepped back. */
struct node_cas *node_cas_new(struct env *env, const struct inet_addr *self,
			      const char *ballot_file,
			      const struct paxos_options *po,
			      const struct repl_store_ops *store,
			      void *store_arg, struct cql_schema *schema,
			      const struct node_cas_hooks *hooks);
void node_cas_delete(struct node_cas *c);

/* A conditional INSERT/UPDATE/DELETE or BATCH (cql_cas_is_conditional). */
void node_cas_write(struct node_cas *c, const struct cql_data_request *dr);

/* Before a SERIAL / LOCAL_SERIAL read of one partition: a Paxos round
 * without a proposal, which completes any in-progress one. done(arg, 0)
 * then, or done(arg, -1) having replied the error to `req`. */
void node_cas_serial_prepare(struct node_cas *c, const struct cql_table *t,
			     struct slice pk, int serial_cl,
			     struct cql_request *req, uint8_t version,
			     int16_t stream,
			     void (*done)(void *arg, int status), void *arg);

/* Paxos repair (nodetool repair --paxos-only): every partition of this
 * node's system.paxos (of `keyspace` and `table`, each NULL for all) whose
 * accepted proposal is newer than its commit is finished by the SERIAL
 * read's round (it re-proposes and commits the newest accepted value its
 * promisers report, and proposes nothing of its own) with this node's
 * own promise among them (paxos_request.wait_self), a few at a time, on
 * the loop. done runs once with the counts: 0 (with
 * *handle set when not NULL), or -1 (ERR_NOMEM, done will not run). */
struct node_cas_repair_counts {
	uint64_t scanned;   /* system.paxos rows of the tables taken */
	uint64_t completed; /* unfinished ones whose round succeeded */
	uint64_t failed;    /* rounds that failed (unavailable, timeout) */
};
typedef void (*node_cas_repair_fn)(void *arg,
				   const struct node_cas_repair_counts *n);
struct prep_job;
int node_cas_paxos_repair(struct node_cas *c, const char *keyspace,
			  const char *table, node_cas_repair_fn done, void *arg,
			  struct prep_job **handle);
/* done will not run (a repair of `handle` still under way stops; nothing
 * when it already ended). node_cas_delete cancels them all. */
void node_cas_paxos_repair_cancel(struct node_cas *c, struct prep_job *handle);
/* Paxos repair of ranges that move (paxos_cleanup_start): every endpoint
 * in `eps` (this node's share runs here) finishes the unfinished proposals
 * it holds of `keyspace` in the ranges; done once, never inline. The
 * endpoints' own shares are node_cas_paxos_repair restricted to the
 * ranges. 0 or -1 with err set. */
int node_cas_paxos_cleanup(struct node_cas *c, const char *keyspace,
			   const struct paxos_range *r, size_t nr,
			   const struct inet_addr *eps, size_t ne,
			   uint64_t timeout_ms, paxos_cleanup_cb done,
			   void *arg);
/* paxos_cleanup_cancel. */
void node_cas_paxos_cleanup_cancel(struct node_cas *c, paxos_cleanup_cb done,
				   void *arg);
/* paxos_test_propose_self_only (test clusters). */
void node_cas_test_propose_self_only(struct node_cas *c, bool on);

void node_cas_receive(struct node_cas *c, const struct inet_addr *from,
		      uint32_t verb, const uint8_t *msg, size_t len);
void node_cas_stats(const struct node_cas *c, struct paxos_stats *out);
/* Latencies of the Paxos rounds that decided, as Cassandra's CASWrite and
 * CASRead client request metrics: conditional writes, and SERIAL reads'
 * rounds (the data read after the round counts as a read). Paxos repair's
 * rounds are not counted. */
void node_cas_latencies(const struct node_cas *c, struct repl_latency *write,
			struct repl_latency *read);

#endif
