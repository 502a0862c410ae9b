/*
 * Lightweight transactions: single-partition Paxos (Cassandra's LWT, in the
 * shape of its Paxos v2: prepare carries the read, two round trips for an
 * uncontended write).
 *
 * Every partition is its own sequence of Paxos instances. Each replica of
 * the partition is an acceptor with three registers (paxos_state, kept in
 * the node's system.paxos through struct paxos_store_ops):
 *
 *   promised   the highest ballot it promised (it answers no lower one)
 *   accepted   the newest (ballot, update) it accepted, not yet known committed
 *   committed  the newest (ballot, update) it saw committed
 *
 * A round of the proposer (paxos.c), any node, for one CAS or SERIAL read:
 *
 *   1. PREPARE(ballot) to every replica; a replica whose promise is lower
 *      raises it, stores it, reads its local copy of the partition and
 *      answers PROMISE(accepted, committed, read). A quorum of promises
 *      (`needed`) goes on; enough refusals that no quorum can come back off
 *      (randomised, exponential) and retry above the highest promise seen.
 *   2. If the newest accepted value among the promises is newer than the
 *      newest commit (an in-progress proposal, maybe of a proposer that
 *      died) it is proposed again under our ballot, committed, and the round
 *      restarts. If some promiser lacks the newest commit, the commit is sent
 *      to it, and the round restarts. Only a quorum that agrees on the newest
 *      commit is read: every committed value is then on a quorum (induction
 *      over the commits), so the merged reads of any quorum hold them all.
 *   3. The caller's decide() sees the merged read: it returns an update (the
 *      conditions held) or none (they did not, or a SERIAL read).
 *   4. PROPOSE(ballot, update) to every replica; accepted iff the replica's
 *      promise is not higher. A quorum of acceptances chooses the update:
 *      COMMIT to every replica, answer once `commit_block_for` applied it
 *      (the update is applied with the ballot's time as its timestamp).
 *
 * The rule of CASSANDRA-6013: once a proposal may have been accepted by any
 * replica, the proposer never retries it nor answers "not applied" (another
 * proposer may complete it): it only retries when every replica refused;
 * otherwise the outcome is unknown and the request times out (WriteTimeout,
 * write type CAS).
 *
 * Ballots (paxos_ballot) are version-1 timeuuids: the time field is wall
 * microseconds * 10 (Cassandra's layout), the low 64 bits are random per
 * process start, so two coordinators (or two lives of one) never share a
 * ballot. paxos_clock makes them strictly increasing per coordinator: never
 * at or below the last one issued, the persisted floor (paxos_options), or
 * a promise learnt from a refusal, whatever the wall clock does.
 *
 * Updates, reads and partition keys are opaque bytes here: the node's
 * encoded storage mutations and fragments (client/exec/cas.c), a register
 * in tests/sim/test_paxos.c. A state machine over the env seam; everything
 * runs on the env's loop thread.
 */
#ifndef CASSINI_REPLICATION_PAXOS_H
#define CASSINI_REPLICATION_PAXOS_H

#include "common/buf.h"
#include "common/env.h"
#include "common/inet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Internode verbs of Paxos (requests even, responses odd). */
enum paxos_verb {
	PAXOS_VERB_PREPARE = 70,
	PAXOS_VERB_PREPARE_RSP = 71,
	PAXOS_VERB_PROPOSE = 72,
	PAXOS_VERB_PROPOSE_RSP = 73,
	PAXOS_VERB_COMMIT = 74,
	PAXOS_VERB_COMMIT_RSP = 75,
	/* paxos repair of moving ranges (paxos_cleanup_*) */
	PAXOS_VERB_CLEANUP = 76,
	PAXOS_VERB_CLEANUP_RSP = 77,
	PAXOS_VERB_FIRST = PAXOS_VERB_PREPARE,
	PAXOS_VERB_LAST = PAXOS_VERB_CLEANUP_RSP,
};

/* ---- ballots ------------------------------------------------------------- */

/* Ordered by (us, lsb); zero is "none" and below every real ballot. */
struct paxos_ballot {
	int64_t us;   /* unix microseconds */
	uint64_t lsb; /* the timeuuid's clock sequence and node: unique */
};

int paxos_ballot_cmp(const struct paxos_ballot *a,
		     const struct paxos_ballot *b);
static inline bool paxos_ballot_is_none(const struct paxos_ballot *b)
{
	return b->us == 0 && b->lsb == 0;
}
/* As a version-1 timeuuid (16 bytes, network order). */
void paxos_ballot_to_uuid(const struct paxos_ballot *b, uint8_t out[16]);
/* 0, or -1 (ERR_PROTOCOL) when the bytes are not a version-1 uuid of a
 * time we could have made. The all-zero uuid is the none ballot. */
int paxos_ballot_from_uuid(const uint8_t in[16], struct paxos_ballot *b);

/* One coordinator's ballot source. */
struct paxos_clock {
	int64_t last_us;
	uint64_t lsb;
};
/* `lsb`: random per process (env_random); `floor_us`: no ballot at or
 * below it is issued (a persisted high-water mark). */
void paxos_clock_init(struct paxos_clock *c, uint64_t lsb, int64_t floor_us);
/* A ballot above the last one issued, above `min` (a promise learnt from a
 * refusal; may be none) and at `wall_us` when the clock is ahead of both. */
struct paxos_ballot paxos_clock_next(struct paxos_clock *c, int64_t wall_us,
				     const struct paxos_ballot *min);

/* ---- acceptor state (pure) ----------------------------------------------- */

/* One partition's acceptor registers; updates are owned bytes. */
struct paxos_state {
	struct paxos_ballot promised;
	struct paxos_ballot accepted;
	struct buf accepted_update;
	struct paxos_ballot committed;
	struct buf committed_update;
};
void paxos_state_init(struct paxos_state *s);
void paxos_state_free(struct paxos_state *s);
/* A deep copy into `dst` (initialised). 0 or -1 (ERR_NOMEM). */
int paxos_state_copy(struct paxos_state *dst, const struct paxos_state *src);

/* PREPARE: promises `b` when it is above the promise (1, the state changed
 * and must be stored before the answer), else refuses (0). */
int paxos_state_prepare(struct paxos_state *s, const struct paxos_ballot *b);
/* PROPOSE: accepts (b, update) unless a higher ballot was promised: 1 (the
 * state changed), 0 refused, -1 ERR_NOMEM (state unchanged). */
int paxos_state_propose(struct paxos_state *s, const struct paxos_ballot *b,
			struct slice update);
/* COMMIT: records (b, update) as the newest commit when it is newer (1) and
 * forgets an accepted value it supersedes; 0 when it is not newer (the
 * update is applied to the data either way: it is idempotent); -1
 * ERR_NOMEM. */
int paxos_state_commit(struct paxos_state *s, const struct paxos_ballot *b,
		       struct slice update);

/* The stored form (a system.paxos row's value), versioned and checksummed:
 *
 *   u8 version (1) | promised uuid[16] | accepted uuid[16] |
 *   uvarint len | accepted update | committed uuid[16] |
 *   uvarint len | committed update | be32 crc32c of all before
 */
int paxos_state_encode(const struct paxos_state *s, struct buf *out);
/* 0, or -1 (ERR_CORRUPT) for bytes that are not a whole stored state;
 * updates are capped at PAXOS_UPDATE_MAX. `s` initialised by the callee. */
int paxos_state_decode(struct slice in, struct paxos_state *s);

#define PAXOS_UPDATE_MAX (64u << 20)

/* ---- the local acceptor's storage ---------------------------------------- */

typedef void (*paxos_done_fn)(void *arg, int status);
/* Local read: `data` borrowed during the call; status -1 on failure. */
typedef void (*paxos_read_fn)(void *arg, int status, struct slice data);
/* Loaded state: `st` borrowed during the call (none stored: empty state). */
typedef void (*paxos_load_fn)(void *arg, int status,
			      const struct paxos_state *st);

/* What an acceptor needs from its node. Completions run on the loop (inline
 * or later); the acceptor serialises its work per partition key, so at most
 * one call per key is in flight. */
struct paxos_store_ops {
	/* The partition's acceptor state (system.paxos). */
	void (*load)(void *arg, struct slice key, paxos_load_fn done,
		     void *darg);
	/* Stores it durably before done runs. */
	void (*save)(void *arg, struct slice key, const struct paxos_state *st,
		     paxos_done_fn done, void *darg);
	/* This replica's copy of the partition (for the proposer's merge). */
	void (*read)(void *arg, struct slice key, paxos_read_fn done,
		     void *darg);
	/* Applies a committed update with the ballot's timestamp. */
	void (*apply)(void *arg, struct slice key, const struct paxos_ballot *b,
		      struct slice update, paxos_done_fn done, void *darg);
};

/* ---- the proposer -------------------------------------------------------- */

struct paxos;

struct paxos_options {
	struct inet_addr self;
	uint64_t write_timeout_ms;      /* each phase's wait: 2000 */
	uint64_t contention_timeout_ms; /* cas_contention_timeout: 1000 */
	/* No ballot at or below this (unix us) is issued. */
	int64_t ballot_floor_us;
	/* Acceptor: PREPARE and PROPOSE of a ballot older than wall - this
	 * (us) are refused, with that floor as the promise (0: none). Set it
	 * at most the shortest time a register whose state expired kept it
	 * past its newest ballot (system.paxos's TTL, paxos_state_purging:
	 * legacy), so an expired register cannot take a ballot below one it
	 * had promised or committed (docs/lwt.md, "Purging system.paxos"). */
	int64_t purge_window_us;
	/* Trace events (NULL: none): `session` the statement's (16 bytes),
	 * Cassandra's thread name, the microseconds since this node began
	 * the step, and the activity. The proposer records those of a
	 * request with a trace_session, each acceptor those of a request
	 * carrying one. */
	void (*trace)(void *arg, const uint8_t *session, const char *thread,
		      int64_t elapsed_us, const char *activity);
	void *trace_arg;
	/* TEST ONLY: the proposer skips completing an in-progress accepted
	 * proposal (the bug of CASSANDRA-6012) so the simulation can show the
	 * linearizability checker catches it. */
	bool test_skip_in_progress;
};
void paxos_options_default(struct paxos_options *o);

/* `env` and the store's target outlive the paxos. NULL with err set. */
struct paxos *paxos_new(struct env *env, const struct paxos_options *o,
			const struct paxos_store_ops *store, void *store_arg);
/* Pending requests are dropped without their callbacks. */
void paxos_delete(struct paxos *p);

/* A message of a PAXOS_VERB_* verb from `from`. Malformed ones are counted
 * and dropped. */
void paxos_receive(struct paxos *p, const struct inet_addr *from, uint32_t verb,
		   const uint8_t *msg, size_t len);

/* The conditions: given the merged read (borrowed during the call), put
 * the update to propose into `update` and return 1, or return 0 for none
 * (conditions false, or a read); -1 fails the request. The update must be
 * stamped with `ballot`'s time (ballots grow along the chosen sequence, so
 * LWT writes order as Paxos chose them). */
typedef int (*paxos_decide_fn)(void *arg, const struct paxos_ballot *ballot,
			       struct slice current, struct buf *update);

/* Merges the promisers' reads (borrowed) into one partition: 0, or -1
 * (the request fails). */
typedef int (*paxos_merge_fn)(void *arg, const struct slice *reads, size_t n,
			      struct buf *out);

enum paxos_outcome {
	PAXOS_OK = 0,        /* decided; `applied` says whether it wrote */
	PAXOS_WRITE_TIMEOUT, /* outcome unknown to the client (CAS) */
	PAXOS_READ_TIMEOUT,  /* a SERIAL read got no quorum in time */
	PAXOS_FAILED,        /* decide() failed, or no memory */
};

enum paxos_phase {
	PAXOS_PHASE_PREPARE,
	PAXOS_PHASE_PROPOSE,
	PAXOS_PHASE_COMMIT,
};

struct paxos_result {
	enum paxos_outcome outcome;
	bool applied;
	/* The merged read decide() saw (owned by the callee of done: free it
	 * with buf_free), for "not applied" answers and SERIAL reads. */
	struct buf current;
	/* Timeouts: the phase, answers received and those waited for. */
	enum paxos_phase phase;
	int received, block_for;
	/* Proposals accepted by some but not a quorum (CAS_WRITE_UNKNOWN). */
	bool proposal_partial;
	int contentions; /* rounds lost to other proposers */
};

typedef void (*paxos_done_cb)(void *arg, struct paxos_result *res);

struct paxos_request {
	struct slice key; /* the partition (copied) */
	/* The partition's replicas that the caller found alive (copied);
	 * the caller answered Unavailable before when fewer than `needed`. */
	const struct inet_addr *replicas;
	size_t n;
	int needed;           /* promises / acceptances: the serial quorum */
	int commit_block_for; /* commit acks before answering (0: ANY) */
	bool is_read;         /* a SERIAL read: timeouts are read timeouts */
	/* Paxos repair: a round goes on only with this node's own promise
	 * among the quorum's, so the proposal it accepted is seen (finished,
	 * or found superseded by a newer commit). Its refusal is contention;
	 * without it in `replicas` the request fails at once. */
	bool wait_self;
	paxos_merge_fn merge;
	paxos_decide_fn decide;
	void *decide_arg; /* for merge and decide */
	/* the statement's trace session (16 bytes, copied), or NULL: the
	 * messages carry it and each node traces its steps */
	const uint8_t *trace_session;
};

/* Runs one CAS (or SERIAL read) to its end; done runs exactly once, on the
 * loop, possibly before this returns. */
void paxos_cas(struct paxos *p, const struct paxos_request *rq,
	       paxos_done_cb done, void *arg);

/* TEST ONLY (test clusters: `paxosfault`): this proposer's own proposals
 * go to itself alone, so each is accepted by one replica and left
 * unfinished (a coordinator that died right after its accept); in-progress
 * completions are sent to all as usual. */
void paxos_test_propose_self_only(struct paxos *p, bool on);

struct paxos_stats {
	uint64_t cas, reads;                  /* coordinated */
	uint64_t prepares, proposes, commits; /* served as acceptor */
	uint64_t contentions, in_progress_completed, laggard_commits;
	uint64_t write_timeouts, read_timeouts, unknown_outcomes;
	uint64_t malformed;     /* messages dropped undecodable */
	uint64_t stale_ballots; /* refused: older than purge_window_us */
};
void paxos_get_stats(const struct paxos *p, struct paxos_stats *out);
/* The time (unix us) of the newest ballot this proposer issued, or its
 * floor: what a persisted high-water mark must stay above. */
int64_t paxos_last_ballot_us(const struct paxos *p);

/* ---- paxos repair of ranges that move (paxos_cleanup.c) -------------------
 *
 * Cassandra 4.1's topology-change paxos repair (PaxosCleanup): before a
 * bootstrapping node streams, and before a leaving node hands its ranges
 * over, every unfinished proposal (accepted, newer than its commit) held by
 * a natural replica of a moving range is finished, so the data streamed
 * holds every value Paxos may have chosen there and the new replica set
 * (whose quorums need not meet the old one's) cannot lose one.
 *
 * The coordinator (the moving node) sends PAXOS_VERB_CLEANUP (keyspace,
 * ranges) to each endpoint it names (its own share runs locally); each
 * runs `local` (the node's paxos repair restricted to the ranges) and
 * answers once it ended. Succeeds only when every endpoint answered ok
 * before the timeout. */

/* (left, right] on the token ring; left >= right wraps. */
struct paxos_range {
	int64_t left, right;
};
bool paxos_range_contains(const struct paxos_range *r, int64_t token);

typedef void (*paxos_cleanup_local_done)(void *darg, int status,
					 uint64_t completed, uint64_t failed);
/* Finishes this node's unfinished proposals of `keyspace` in the ranges
 * (borrowed during the call); done exactly once, later or inline. */
typedef void (*paxos_cleanup_local_fn)(void *arg, const char *keyspace,
				       const struct paxos_range *r, size_t n,
				       paxos_cleanup_local_done done,
				       void *darg);

struct paxos_cleanup;
struct paxos_cleanup *paxos_cleanup_new(struct env *env,
					const struct inet_addr *self,
					paxos_cleanup_local_fn local,
					void *local_arg);
/* Runs pending ones end without their callbacks; a local repair under way
 * must not call its done after this (the node cancels its repairs). */
void paxos_cleanup_delete(struct paxos_cleanup *pc);
/* PAXOS_VERB_CLEANUP / _RSP from `from`; malformed ones are dropped. */
void paxos_cleanup_receive(struct paxos_cleanup *pc,
			   const struct inet_addr *from, uint32_t verb,
			   const uint8_t *msg, size_t len);

struct paxos_cleanup_result {
	int status; /* 0: every endpoint finished its share */
	uint64_t completed, failed;
	size_t asked, answered;
	char error[256]; /* status != 0: the first endpoint that failed */
};
typedef void (*paxos_cleanup_cb)(void *arg,
				 const struct paxos_cleanup_result *res);
/* Asks `eps` (copied) to repair `keyspace`'s ranges (copied); done exactly
 * once, on the loop, never inline. 0, or -1 (ERR_NOMEM, ERR_INVALID). */
int paxos_cleanup_start(struct paxos_cleanup *pc, const char *keyspace,
			const struct paxos_range *r, size_t nr,
			const struct inet_addr *eps, size_t ne,
			uint64_t timeout_ms, paxos_cleanup_cb done, void *arg);
/* The jobs started with (done, arg) end without their callback. */
void paxos_cleanup_cancel(struct paxos_cleanup *pc, paxos_cleanup_cb done,
			  void *arg);

#endif
