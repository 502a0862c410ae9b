/*
 * replication/: the coordinator. Any node coordinates any request: it finds
 * the replicas of a partition (ring/), decides from the failure detector
 * whether enough of them are alive for the consistency level, sends the
 * mutation or read to them, counts answers per datacenter and answers the
 * client with success, Unavailable, or a timeout. The same module serves
 * the replica side of those messages (apply a mutation, read a partition).
 *
 * Consistency arithmetic follows Cassandra's ConsistencyLevel: block-for is
 * computed from the keyspace's replication factors (not from how many nodes
 * exist), per datacenter for EACH_QUORUM and the LOCAL_ levels; pending
 * endpoints (BOOT, LEAVING) add to a write's block-for.
 *
 * Reads: the closest live replica (snitch proximity) sends its data, the
 * others up to block-for send a digest. All equal: done. Otherwise every
 * contacted replica sends its data, the versions are merged last-write-wins
 * (storage_fragment_merge) and, unless the table says read_repair = 'NONE',
 * the merged partition is written back to every contacted replica whose
 * version differed before the client gets its answer (blocking read repair:
 * a value a QUORUM read returned is never "un-read" by a later one).
 *
 * Range reads walk the ring one vnode range at a time in token order
 * (repl_range_step); each step reads the range from block-for replicas and
 * merges their partitions.
 *
 * A state machine over the env seam: messages go out with env_send and come
 * back through repl_receive; timeouts are env timers; the local replica is
 * reached through `struct repl_store_ops` (the node's storage engine, or an
 * in-memory store in tests/sim). Everything runs on the env's loop thread.
 *
 * Wire (replication.proto): every request carries a request id and an
 * absolute wall-clock deadline; replicas drop requests past it and count
 * them per verb; answers travel as one-way messages of the matching
 * response verb.
 */
#ifndef CASSINI_REPLICATION_REPLICATION_H
#define CASSINI_REPLICATION_REPLICATION_H

#include "common/env.h"
#include "common/inet.h"
#include "ring/ring.h"
#include "storage/storage.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Internode verbs of the coordinator (requests even, responses odd). */
enum repl_verb {
	REPL_VERB_MUTATION = 30,
	REPL_VERB_MUTATION_RSP = 31,
	REPL_VERB_READ = 32,
	REPL_VERB_READ_RSP = 33,
	REPL_VERB_RANGE = 34,
	REPL_VERB_RANGE_RSP = 35,
	REPL_VERB_BATCH_STORE = 36,
	REPL_VERB_BATCH_STORE_RSP = 37,
	REPL_VERB_BATCH_REMOVE = 38, /* one-way */
	REPL_VERB_TRUNCATE = 39,     /* answered on REPL_VERB_MUTATION_RSP */
	REPL_VERB_COUNTER = 28,      /* an increment to its counter leader */
	REPL_VERB_COUNTER_RSP = 29,
	REPL_VERB_FIRST = REPL_VERB_COUNTER,
	REPL_VERB_LAST = REPL_VERB_TRUNCATE,
};

/* Consistency levels, numbered as in the native protocol. */
enum repl_cl {
	REPL_CL_ANY = 0x0000,
	REPL_CL_ONE = 0x0001,
	REPL_CL_TWO = 0x0002,
	REPL_CL_THREE = 0x0003,
	REPL_CL_QUORUM = 0x0004,
	REPL_CL_ALL = 0x0005,
	REPL_CL_LOCAL_QUORUM = 0x0006,
	REPL_CL_EACH_QUORUM = 0x0007,
	REPL_CL_SERIAL = 0x0008,
	REPL_CL_LOCAL_SERIAL = 0x0009,
	REPL_CL_LOCAL_ONE = 0x000A,
};
/* "QUORUM", ...; "UNKNOWN" for other values. */
const char *repl_cl_name(int cl);

enum repl_write_type {
	REPL_WRITE_SIMPLE,
	REPL_WRITE_BATCH,
	REPL_WRITE_UNLOGGED_BATCH,
	REPL_WRITE_BATCH_LOG,
	REPL_WRITE_COUNTER,
};
/* As the protocol spells it: "SIMPLE", "BATCH", ... */
const char *repl_write_type_name(enum repl_write_type t);

/* How a request ended. Unavailable carries (cl, required, alive); the
 * timeouts carry (cl, received, block_for) and data_present or write_type;
 * the others a message (REPL_TRUNCATE_ERROR: a replica failed or did not
 * answer a truncate in time). */
enum repl_outcome {
	REPL_OK = 0,
	REPL_UNAVAILABLE,
	REPL_WRITE_TIMEOUT,
	REPL_READ_TIMEOUT,
	REPL_WRITE_FAILURE,
	REPL_READ_FAILURE,
	REPL_OVERLOADED,
	REPL_INVALID,
	REPL_TRUNCATE_ERROR,
};

/* Why a replica failed a request: Cassandra's RequestFailureReason
 * codes, which native protocol v5 sends in Read_failure's and
 * Write_failure's <reasonmap>. */
enum repl_failure_code {
	REPL_FAILURE_UNKNOWN = 0x0000,
	REPL_FAILURE_READ_TOO_MANY_TOMBSTONES = 0x0001,
	REPL_FAILURE_TIMEOUT = 0x0002,
	REPL_FAILURE_INCOMPATIBLE_SCHEMA = 0x0003,
	REPL_FAILURE_READ_SIZE = 0x0004,
	REPL_FAILURE_NODE_DOWN = 0x0005,
	REPL_FAILURE_INDEX_NOT_AVAILABLE = 0x0006,
};

/* The replicas a result names (at most this many; the count goes on). */
#define REPL_RESULT_FAILURES_MAX 16

struct repl_failure {
	struct inet_addr endpoint; /* a replica (this node's own address
				      for the local one) */
	uint16_t code;             /* enum repl_failure_code */
};

struct repl_result {
	enum repl_outcome outcome;
	int cl;
	int required; /* Unavailable: required; timeouts: block_for */
	int alive;    /* Unavailable: alive; timeouts: received */
	bool data_present;
	enum repl_write_type write_type;
	/* Reads (REPL_OK): replicas whose answer held more tombstones than
	 * tombstone_warn_threshold, and the most one held (Cassandra 4.1's
	 * coordinator tombstone warning). Read failures: a replica aborted
	 * the read at its tombstone_failure_threshold. */
	uint32_t tombstone_warn_nodes;
	uint64_t tombstone_max;
	bool tombstone_abort;
	/* Indexed range steps: the replica_filtering_protection threshold
	 * the rows held for protection went past (repl_options.rfp_*_rows):
	 * with REPL_OK the warn threshold (a warning to give), with
	 * REPL_OVERLOADED the fail threshold (Cassandra fails the query);
	 * 0: none. */
	uint64_t rfp_threshold;
	/* Write and read failures: the replicas that failed and why, the
	 * first REPL_RESULT_FAILURES_MAX of them (n_failed_listed) and how
	 * many in all (n_failed); 0 where the coordinator does not know
	 * which replica failed (repl_result_add_failure). */
	uint32_t n_failed;
	uint32_t n_failed_listed;
	struct repl_failure failed[REPL_RESULT_FAILURES_MAX];
	char msg[256];
};

/* Names replica `endpoint` as failed with `code` in `res` (counted past
 * REPL_RESULT_FAILURES_MAX, not listed). */
void repl_result_add_failure(struct repl_result *res,
			     const struct inet_addr *endpoint,
			     enum repl_failure_code code);
/* The failure code of a replica's error (its err_code_name: TOMBSTONES
 * is READ_TOO_MANY_TOMBSTONES, INDEX_NOT_AVAILABLE itself, anything
 * else UNKNOWN). */
enum repl_failure_code repl_failure_code_of(const char *error);

/* ---- consistency arithmetic (pure) --------------------------------------- */

/* Replicas that must answer at `cl` for a keyspace placed by `s`, seen from
 * a coordinator in `local_dc` (Cassandra's blockFor): ONE/LOCAL_ONE/ANY 1,
 * TWO 2, THREE 3, QUORUM sum(rf)/2+1, ALL sum(rf), LOCAL_QUORUM
 * rf(local_dc)/2+1 (quorum of the rf for SimpleStrategy), EACH_QUORUM the
 * sum of every datacenter's quorum. -1 (ERR_INVALID) for SERIAL,
 * LOCAL_SERIAL and unknown levels. */
int repl_block_for(int cl, const struct ring_strategy *s, const char *local_dc);
/* A datacenter's own quorum under `s`: rf(dc)/2+1 (0 for rf 0). */
int repl_dc_quorum(const struct ring_strategy *s, const char *dc);

/* One replica as the Unavailable check sees it. */
struct repl_live {
	const char *dc;
	bool alive;
};
/* Whether enough replicas are alive for `cl` (Cassandra's
 * assureSufficientLiveReplicas): 0, or -1 with `res` filled as
 * Unavailable (cl, required, alive). `pending` (replicas that are pending
 * endpoints; they add to the block-for of a write) are the last
 * `n_pending` entries of `reps`. ANY never fails. */
int repl_check_live(int cl, const struct ring_strategy *s, const char *local_dc,
		    const struct repl_live *reps, size_t n, size_t n_pending,
		    struct repl_result *res);

/* ---- the local replica --------------------------------------------------- */

/* Completion of a local read: `frags` (n of them, in token order) owned by
 * the callee from then on (free each with storage_mutation_delete and the
 * array with free()); status -1 with `code` on failure. `cut`: a range read
 * stopped at its partition limit. */
typedef void (*repl_store_read_fn)(void *arg, int status, enum err_code code,
				   struct storage_mutation **frags, size_t n,
				   bool cut);

/* An index restriction a range read carries to its replicas
 * (docs/indexes.md, "Indexed range reads"): each replica answers with only
 * the partitions its index gives as candidates for it
 * (storage_index_candidates), not every partition of the range. Either
 * values (a partition holding any of them: =, IN, CONTAINS, CONTAINS KEY,
 * one lookup per value) or a range of values (`range`; lo / hi NULL when
 * unbounded). With `and_ix`, a second restriction on another index ANDed
 * with it: the replica answers with the intersection of both indexes'
 * candidates (Cassandra's sai_intersection_clause_limit of 2). The
 * coordinator re-checks every row it sends: candidates are a superset. */
struct repl_index_expr {
	const char *name; /* the index (storage_index's name) */
	const struct slice *vals;
	size_t n_vals;
	bool range;
	const struct storage_index_bound *lo, *hi;
	const struct repl_index_expr *and_ix; /* its own and_ix unused */
	/* The replica may read only the rows the index lists of a
	 * partition (not the whole slice): set by the coordinator for
	 * every indexed step (with several contacts replica filtering
	 * protection compares rows). On the first restriction only. */
	bool rows;
};
/* At most this many values (an IN of more reads the range whole). */
#define REPL_INDEX_MAX_VALUES 64
/* Partitions one replica filtering protection message reads at most
 * (ReadReq.keys and cmd's key). */
#define REPL_PROTECT_BATCH 64
struct arena;
/* Copies `src` (at most REPL_INDEX_MAX_VALUES values; none kept for a
 * range) into `a` as `dst`, its bounds in bounds[0] (lo) and bounds[1]
 * (hi), its and_ix (and that one's bounds) into `a` too. 0, or -1 with
 * ERR_NOMEM. */
int repl_index_expr_copy(struct arena *a, const struct repl_index_expr *src,
			 struct repl_index_expr *dst,
			 struct storage_index_bound bounds[2]);

/* What the coordinator needs from this node's storage. Completions run on
 * the loop thread (later, or inline). */
struct repl_store_ops {
	/* storage_apply's contract. */
	int (*apply)(void *s, const struct storage_mutation *m,
		     storage_done_fn done, void *arg);
	/* One partition (cmd->key) as a fragment (storage_read_fragment).
	 * cmd->stats, when set, is filled before `done` runs and must live
	 * until then (as `arg` does). */
	void (*read)(void *s, const uint8_t table_id[16],
		     const struct storage_read_cmd *cmd,
		     repl_store_read_fn done, void *arg);
	/* Partitions of (start, end] in token order, at most `max` (cut when
	 * the limit stopped it). */
	void (*scan)(void *s, const uint8_t table_id[16], int64_t start,
		     int64_t end, const struct storage_read_cmd *cmd,
		     uint32_t max, repl_store_read_fn done, void *arg);
	/* Optional: scan's answer restricted to the candidates of index
	 * restriction `ix` (borrowed for the call): the partitions of
	 * (start, end] the index lists, in token order, each as scan gives
	 * it, skipping empty ones; the whole range (scan) where the index
	 * cannot answer (ERR_UNSUPPORTED, an index this node does not
	 * know). NULL: scan serves indexed range reads too. */
	void (*index_scan)(void *s, const uint8_t table_id[16], int64_t start,
			   int64_t end, const struct storage_read_cmd *cmd,
			   const struct repl_index_expr *ix, uint32_t max,
			   repl_store_read_fn done, void *arg);
	/* A reference to the table's meta (the caller releases it with
	 * storage_table_meta_unref); NULL when unknown. */
	const struct storage_table_meta *(*meta)(void *s,
						 const uint8_t table_id[16]);
	/* Empties the table (storage_truncate, on a worker); `done` runs
	 * on the loop, later or inline. May be NULL: truncates then fail. */
	void (*truncate)(void *s, const uint8_t table_id[16],
			 storage_done_fn done, void *arg);
	/* Wall-clock microseconds of the table's last truncate here, 0 if
	 * never (storage_truncated_at): batchlog replay skips mutations of
	 * tables truncated after the batch was written. May be NULL. */
	int64_t (*truncated_at)(void *s, const uint8_t table_id[16]);
};

/* ---- the coordinator ----------------------------------------------------- */

struct repl;

struct repl_hooks {
	/* The current ring, borrowed until the next call (the coordinator
	 * takes a reference for what it keeps). */
	struct ring *(*ring)(void *arg);
	/* Failure detector verdict; the local node is always alive. */
	bool (*is_alive)(void *arg, const struct inet_addr *ep);
	/* Optional: store a hint for a replica that is down or timed out
	 * (`mutation` is the encoded mutation). 0 when stored. */
	int (*hint)(void *arg, const uint8_t host_id[16], const char *dc,
		    const uint8_t *mutation, size_t len);
	/* Optional: keep a hint another node hands over (it leaves the
	 * ring) for `host_id`, created at `created_us`. 0 when kept; without
	 * it handed-over hints are refused. */
	int (*take_hint)(void *arg, const uint8_t host_id[16],
			 const uint8_t *mutation, size_t len,
			 int64_t created_us);
	/* The replication strategy of a table's keyspace, for batchlog
	 * replay; NULL when the table is unknown (dropped). Required with a
	 * batchlog_dir. */
	const struct ring_strategy *(*strategy)(void *arg,
						const uint8_t table_id[16]);
	/* Optional: runs run(job) off the loop (a worker thread), then
	 * done(job) on the loop; the batchlog's file work goes through it.
	 * NULL: both run inline (the simulator). */
	void (*offload)(void *arg, void (*run)(void *job),
			void (*done)(void *job), void *job);
	/* Optional: one event of trace session `session` (16 bytes) that
	 * this node records (system_traces.events, source: this node):
	 * `thread` as Cassandra's ("ReadStage-1"), `elapsed_us` since this
	 * node began the traced step. Must not block. */
	void (*trace)(void *arg, const uint8_t *session, const char *thread,
		      int64_t elapsed_us, const char *activity);
	void *arg;
};

struct repl_options {
	struct inet_addr self;        /* this node's internode address */
	uint64_t write_timeout_ms;    /* write_request_timeout: 2000 */
	uint64_t read_timeout_ms;     /* read_request_timeout: 5000 */
	uint64_t range_timeout_ms;    /* range_request_timeout: 10000 */
	uint64_t truncate_timeout_ms; /* truncate_request_timeout: 60000 */
	/* Requests in flight on this coordinator past which new ones are
	 * answered Overloaded (0 = 4096). */
	size_t max_inflight;
	/* Where batches of other coordinators are kept until applied; NULL:
	 * no batchlog (logged batches are then written like unlogged ones
	 * and this node keeps no one's batches). */
	const char *batchlog_dir;
	/* How often due batches are looked for (0 = 1000 ms); a batch is due
	 * 2 * write_timeout_ms after it was stored. */
	uint64_t batchlog_replay_interval_ms;
	/* Tombstones in one replica's answer past which a read reports it
	 * (repl_result.tombstone_warn_nodes); 0: never. */
	uint64_t tombstone_warn_threshold;
	/* Replica filtering protection's bounds (Cassandra's
	 * replica_filtering_protection: cached_rows_warn_threshold,
	 * cached_rows_fail_threshold): rows one indexed range step holds
	 * while it protects (every contact's version of every partition
	 * merged, a row a contact lacks counted for it too) past which it
	 * reports a warning, or fails as Overloaded; 0: never. */
	uint64_t rfp_warn_rows, rfp_fail_rows;
	/* cas_contention_timeout: how long a lightweight transaction retries
	 * after losing to other proposers (0 = 1000 ms). Used by the node's
	 * Paxos (paxos.h), which shares the write timeout. */
	uint64_t cas_contention_timeout_ms;
	/* Where lightweight transactions keep their ballot lease (a unix-us
	 * high-water mark, so ballots keep growing across restarts and clock
	 * steps); NULL: none. */
	const char *paxos_ballot_file;
};
void repl_options_default(struct repl_options *o);
/* Changes rfp_warn_rows and rfp_fail_rows (0: never) for steps that
 * begin from now on. */
void repl_set_protection_thresholds(struct repl *r, uint64_t warn,
				    uint64_t fail);

/* `env`, `store` (with `store_arg`) and the hooks' targets must outlive the
 * coordinator. NULL with err set. */
struct repl *repl_new(struct env *env, const struct repl_options *o,
		      const struct repl_store_ops *store, void *store_arg,
		      const struct repl_hooks *hooks);
/* Pending requests are dropped without their callbacks, except hint
 * deliveries, which are told they failed. */
void repl_delete(struct repl *r);

/* A message of a REPL_VERB_* verb from `from`. */
void repl_receive(struct repl *r, const struct inet_addr *from, uint32_t verb,
		  const uint8_t *msg, size_t len);

/* Runs exactly once per request, on the loop (possibly before the call that
 * started it returns). */
typedef void (*repl_write_done_fn)(void *arg, const struct repl_result *res);

/* One partition's mutation and the strategy of its keyspace (both borrowed
 * for the call). */
struct repl_mutation {
	const struct storage_mutation *m;
	const struct ring_strategy *strategy;
};

/* Writes every mutation to its replicas at `cl`; done once each has been
 * acknowledged by block-for replicas (counted per datacenter as the level
 * says). Unavailable is decided for all of them before anything is sent.
 * SERIAL and LOCAL_SERIAL are Invalid.
 *
 * A logged batch (REPL_WRITE_BATCH) of more than one mutation, with a
 * batchlog, is first stored on up to two other live nodes of this
 * datacenter (this node when it is alone in it; Unavailable at ONE when
 * none is alive); a timeout there is a WriteTimeout of type BATCH_LOG.
 * Once the mutations are acknowledged the copies are removed; if they are
 * not (the coordinator died), those nodes replay the batch. */
void repl_write(struct repl *r, const struct repl_mutation *muts, size_t n,
		int cl, enum repl_write_type wt, repl_write_done_fn done,
		void *arg);
/* repl_write in trace session `trace_session` (16 bytes, or NULL): the
 * mutation requests carry it and the replicas trace their steps. */
void repl_write_traced(struct repl *r, const struct repl_mutation *muts,
		       size_t n, int cl, enum repl_write_type wt,
		       const uint8_t *trace_session, repl_write_done_fn done,
		       void *arg);

/* A counter write (Cassandra's StorageProxy.mutateCounter): each mutation
 * holds delta shards (storage_mutation_put_counter_delta) of one partition
 * and goes to one replica, its counter leader: this node when it is a
 * replica of the partition, else a random live replica of this datacenter
 * (any live one when this datacenter has none, unless `cl` is a LOCAL_
 * level: Unavailable). The leader locks the partition, reads its own
 * shards, writes the next ones (storage_counter_resolve) locally, unlocks,
 * and replicates the resulting shards, not the deltas, to the other
 * replicas at `cl` (hints, if they are down, hold the shards too). `done`
 * once every mutation's leader answered: OK, Unavailable, or a
 * WriteTimeout of write type COUNTER (received 0 when the leader itself
 * did not answer in write_request_timeout). ANY, SERIAL and LOCAL_SERIAL
 * are Invalid.
 *
 * Guarantees (as Cassandra's): an increment is applied at most once per
 * request that reached its leader, but a timed-out increment may have
 * been applied (a retry can count it twice), and one the leader applied
 * but did not replicate before it failed is lost with the leader's
 * commitlog tail (see docs/coordinator.md). */
void repl_counter_write(struct repl *r, const struct repl_mutation *muts,
			size_t n, int cl, repl_write_done_fn done, void *arg);
/* repl_counter_write in trace session `trace_session` (16 bytes, or
 * NULL): the coordinator's forward, the leader's lock, read, write and
 * replication are traced under it. */
void repl_counter_write_traced(struct repl *r, const struct repl_mutation *muts,
			       size_t n, int cl, const uint8_t *trace_session,
			       repl_write_done_fn done, void *arg);

struct repl_read {
	const uint8_t *table_id; /* 16 bytes */
	const struct storage_table_meta *meta;
	const struct ring_strategy *strategy;
	int cl;
	const struct storage_read_cmd *cmd; /* cmd->key: the partition */
	int64_t token;                      /* of cmd->key */
	bool read_repair;                   /* false: read_repair = 'NONE' */
	/* The table's speculative_retry: "99p" (NULL), "NONE", "ALWAYS",
	 * "50ms", "95PERCENTILE". */
	const char *speculative_retry;
	/* The trace session (16 bytes) the read is part of, or NULL: the
	 * read requests carry it and the replicas trace their steps. */
	const uint8_t *trace_session;
};

/* `frag`: the partition as block-for replicas agree on it (owned by the
 * callee; NULL unless res->outcome is REPL_OK). */
typedef void (*repl_read_done_fn)(void *arg, const struct repl_result *res,
				  struct storage_mutation *frag);
/* Everything `q` points at is copied; it may go after the call. */
void repl_read(struct repl *r, const struct repl_read *q,
	       repl_read_done_fn done, void *arg);

struct repl_range {
	const uint8_t *table_id;
	const struct storage_table_meta *meta;
	const struct ring_strategy *strategy;
	int cl;
	const struct storage_read_cmd *cmd; /* slices, projection; key unused */
	int64_t start, end;                 /* (start, end], start < end */
	uint32_t max_partitions;
	bool read_repair; /* false: read_repair = 'NONE' */
	/* the trace session (16 bytes) or NULL: the replicas trace their
	 * scans under it */
	const uint8_t *trace_session;
	/* NULL, or the index restriction the replicas answer with (each
	 * replica's candidates only; replica filtering protection below) */
	const struct repl_index_expr *index;
	/* Read the vnode ranges after the first whose natural replicas are
	 * the same in the same step (Cassandra's range merger): a step
	 * covers repl_range_piece_end's piece. */
	bool merge;
};

/* One step of a range read: the partitions of the first vnode range that
 * (start, end] crosses (with `merge`, of the piece repl_range_piece_end
 * gives; at most max_partitions), merged from block-for replicas, in
 * token order.
 *
 * With an index restriction, replicas answer with their candidates only,
 * so a partition one contact returns and another does not may be one the
 * other holds in a newer version that no longer matches (or deleted).
 * Replica filtering protection (Cassandra's ReplicaFilteringProtection):
 * before the merge, every such partition (up to where the first cut
 * contact stopped) is read from each contact that did not return it, so
 * the merge sees every contact's version and the newest wins; read
 * repair then compares real versions too. Unless `read_repair` is off, a
 * contacted replica that lacked a partition or held an older version gets the
 * merged one written back before the answer (blocking read repair, as
 * for single partitions). `resume`: where the next step starts (pass it
 * as `start`); `finished`: (start, end] is exhausted. `frags` and each
 * fragment are owned by the callee. */
typedef void (*repl_range_done_fn)(void *arg, const struct repl_result *res,
				   struct storage_mutation **frags, size_t n,
				   int64_t resume, bool finished);
void repl_range_step(struct repl *r, const struct repl_range *q,
		     repl_range_done_fn done, void *arg);
/* Where the first step of (start, end] (start < end) ends on the ring as
 * this coordinator sees it now: the first vnode range's end, or with
 * `merge` the end of the run of vnode ranges after it whose natural
 * replicas under `s` are the same set. */
int64_t repl_range_piece_end(struct repl *r, const struct ring_strategy *s,
			     int64_t start, int64_t end, bool merge);

/* Truncates a table on every node of the ring, as Cassandra's TRUNCATE:
 * every endpoint must be alive (else Unavailable at ALL, required = the
 * number of endpoints, alive = the live ones; nothing is sent), each one,
 * this node included, is sent a truncate and `done` runs once all have
 * acknowledged (REPL_OK, cl ALL), or with REPL_TRUNCATE_ERROR and a message
 * at the first failure or after truncate_timeout_ms. A replica that
 * truncated before the error stays truncated (there is no undo). */
void repl_truncate(struct repl *r, const uint8_t table_id[16],
		   repl_write_done_fn done, void *arg);

/* ---- hint delivery ------------------------------------------------------- */

/* 0: the target acknowledged; -1: it failed or timed out. */
typedef void (*repl_deliver_fn)(void *arg, int status);
/* Sends one encoded mutation (a hint, original timestamps inside) to `to`
 * as a mutation request under write_request_timeout. 0 and `done` runs
 * exactly once later; -1 (nothing sent) and it never runs. */
int repl_deliver(struct repl *r, const struct inet_addr *to,
		 const uint8_t *mutation, size_t len, repl_deliver_fn done,
		 void *arg);

/* Hands one hint for `host_id` over to `to` (a node leaving the ring
 * passes its hints on), under write_request_timeout. 0 and `done` runs
 * exactly once later; -1 (nothing sent) and it never runs. */
int repl_hand_over(struct repl *r, const struct inet_addr *to,
		   const uint8_t host_id[16], const uint8_t *mutation,
		   size_t len, int64_t created_us, repl_deliver_fn done,
		   void *arg);

/* ---- statistics (tpstats, proxyhistograms) ------------------------------- */

#define REPL_LAT_BUCKETS 80 /* the last holds everything above ~2.1 s */

/* Latencies in a fixed log-linear histogram (microseconds). */
struct repl_latency {
	uint64_t count;
	uint64_t sum_us;
	uint64_t buckets[REPL_LAT_BUCKETS];
};
/* The upper bound of bucket b in microseconds (its values are <= it). */
uint64_t repl_latency_bucket_upper(unsigned b);
/* The value at percentile p (0..100), in microseconds (bucket's upper
 * bound); 0 when empty. */
uint64_t repl_latency_percentile(const struct repl_latency *l, double p);
/* Counts one latency of `us` microseconds. */
void repl_lat_add(struct repl_latency *l, uint64_t us);

/* Client requests by kind and consistency level, as Cassandra's
 * ClientRequest metrics scoped Read-QUORUM, Write-ONE, RangeSlice-...:
 * latencies of those that succeeded, and the ones that timed out, were
 * unavailable or failed (write/read failures, overloaded). */
enum repl_req_kind {
	REPL_REQ_READ = 0,
	REPL_REQ_WRITE,
	REPL_REQ_RANGE,
	REPL_REQ_KINDS
};
#define REPL_CL_COUNT (REPL_CL_LOCAL_ONE + 1)
struct repl_req_stats {
	uint64_t timeouts, unavailables, failures;
	struct repl_latency lat;
};

struct repl_stats {
	uint64_t writes, reads, ranges, truncates; /* coordinated */
	uint64_t unavailables, write_timeouts, read_timeouts, overloaded;
	uint64_t digest_mismatches, read_repairs; /* repair writes sent */
	uint64_t speculative_retries;
	/* indexed range reads: partitions read from a contact that did not
	 * return them (replica filtering protection), and the messages
	 * that carried them (up to REPL_PROTECT_BATCH partitions each; the
	 * local replica's are read without one) */
	uint64_t protection_reads, protection_messages;
	uint64_t hints_written;
	/* counter writes coordinated, and increments this node led */
	uint64_t counter_writes, counter_leads;
	uint64_t batches_logged, batches_stored, batches_replayed;
	uint64_t batchlog_pending; /* batches this node keeps for others */
	uint64_t replica_mutations, replica_reads, replica_ranges,
		replica_truncates, hints_taken; /* served */
	uint64_t dropped[REPL_VERB_LAST + 1];   /* past their deadline */
	uint64_t inflight;   /* requests awaiting their answer */
	uint64_t background; /* answered, still waiting for slow replicas */
	struct repl_latency write_lat, read_lat, range_lat;
	struct repl_req_stats by_cl[REPL_REQ_KINDS][REPL_CL_COUNT];
};
void repl_get_stats(const struct repl *r, struct repl_stats *out);

/* Per table, the latencies of the requests this node coordinated that
 * succeeded (Cassandra's table metrics CoordinatorReadLatency,
 * CoordinatorWriteLatency, CoordinatorScanLatency): point reads, writes
 * (a batch counts once for each table it wrote), range reads. */
struct repl_table_latency {
	struct repl_latency read, write, range;
};
/* false when nothing was recorded for the table (*out zeroed). */
bool repl_get_table_latency(const struct repl *r, const uint8_t table_id[16],
			    struct repl_table_latency *out);
/* A dropped table's latencies go (a DROP TABLE or DROP KEYSPACE). */
void repl_forget_table(struct repl *r, const uint8_t table_id[16]);

#endif
