/*
 * repair/: Merkle-tree anti-entropy with row-level sync.
 *
 * A repair session runs on one node (the coordinator; usually a replica
 * itself) over a list of tables and token ranges, each range with its
 * replicas. For each (table, range), in order:
 *
 *   VALIDATE  every replica scans the range (a consistent view of its
 *             memtables and SSTables, on a worker in the node) into a
 *             Merkle tree (merkle.h: a node is the XOR of the 16-byte
 *             row digests of its token range), built at the deepest
 *             depth the session space allows and folded to about two
 *             leaves per partition. It KEEPS that tree for the task and
 *             answers its depth and its top REPAIR_TOP_LEVELS (6) levels.
 *   TREE      compare, level by level: the coordinator compares the
 *             replicas' nodes of one level and asks, per round trip, for
 *             the children of the nodes that differ only, down to the
 *             shallowest depth any replica kept. Values are 64 bits (the
 *             first 8 bytes of a node: a differing subtree looks equal
 *             with probability 2^-64 per comparison); only left children
 *             travel (right = parent XOR left). Replicas equal at a node
 *             are equal below it, so one of them (this node first) is
 *             asked for its subtree. The differing nodes at that depth
 *             are the mismatching leaves.
 *   ROWS      every replica (again one per group of equal replicas at a
 *             leaf) answers (key, row id, row digest) for every row in
 *             the mismatching leaves, named by index
 *             (storage_fragment_rows).
 *   FETCH     for each row whose digests differ (or that some replica
 *             lacks), one copy of each distinct version is fetched from a
 *             replica holding it (storage_fragment_select_rows).
 *   merge     versions of a partition's rows are merged last-write-wins
 *             (storage_fragment_merge); the merged rows each replica's
 *             digest disagrees with are selected for it.
 *   APPLY     each replica writes what it was sent through the normal
 *             write path (original timestamps and tombstones).
 *
 * So the trees cost about (differing leaves x depth) node values plus the
 * top levels, not a whole tree; only rows that differ travel, and only to
 * replicas that need them; replicas in sync stream nothing. `preview`
 * stops before APPLY and reports what would stream. The coordinator's own
 * messages (as a replica) go through a local queue, never the network.
 *
 * A session runs up to `jobs` tasks at once (nodetool's -j), never two of
 * the same table whose ranges overlap. When VALIDATEs go out is the
 * request's parallelism: all replicas of a task at once (parallel), one
 * replica at a time (sequential), or one per datacenter at a time
 * (dc_parallel); across the session's running tasks, so under sequential
 * no two replicas of overlapping ranges ever validate at the same time.
 * A replica's validation (its scan) ends with its VALIDATE answer: the
 * TREE rounds that follow read the tree it kept and scan nothing, so
 * they run whatever the parallelism (under sequential a replica answers
 * TREE requests while another validates).
 *
 * Participants keep, per (table, range) under repair, a claim and the
 * tree VALIDATE built (up to one per running task of a session, so up to
 * `jobs` per coordinator): a VALIDATE that overlaps another coordinator's
 * claim is refused ("overlapping repair"), so concurrent sessions on the
 * same data do not run. A claim and its tree end with the task (RELEASE),
 * with a newer session of the same coordinator claiming an overlapping
 * range (a session's own running tasks never overlap), or expire
 * (validate + request timeouts after the session's last request to the
 * node, on a timer; under sequential and dc_parallel the end of each
 * validation sends the replicas that answered and wait for the others a
 * TREE naming no node, which keeps their claims alive), so a
 * session that fails (a timeout, an error answer, a dead participant or
 * coordinator) leaves nothing behind and can be rerun. Kept trees are
 * bounded: a task's by the session space, all of a node's by 4 session
 * spaces (past it a tree is kept coarser). One session runs at a time
 * per coordinating node.
 *
 * A state machine over the env seam: messages go out with env_send (to
 * this node itself through a zero-delay timer) and come in through
 * repair_receive; timeouts are env timers; storage is reached through
 * `struct repair_store_ops`. Everything runs on the env's loop thread,
 * except the store's per-fragment callbacks (see below).
 */
#ifndef CASSINI_REPAIR_REPAIR_H
#define CASSINI_REPAIR_REPAIR_H

#include "common/env.h"
#include "common/inet.h"
#include "storage/storage.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Internode verbs (requests even, responses odd). */
enum repair_verb {
	REPAIR_VERB_VALIDATE = 40,
	REPAIR_VERB_VALIDATE_RSP = 41,
	REPAIR_VERB_ROWS = 42,
	REPAIR_VERB_ROWS_RSP = 43,
	REPAIR_VERB_FETCH = 44,
	REPAIR_VERB_FETCH_RSP = 45,
	REPAIR_VERB_APPLY = 46,
	REPAIR_VERB_APPLY_RSP = 47,
	REPAIR_VERB_RELEASE = 48, /* one-way: a task's claim ends */
	REPAIR_VERB_TREE = 50,
	REPAIR_VERB_TREE_RSP = 51,
	/* incremental repair's consistent session (repair_incr.c,
	 * repair_local.c) */
	REPAIR_VERB_PREPARE = 52,
	REPAIR_VERB_PREPARE_RSP = 53,
	REPAIR_VERB_PROPOSE = 54,
	REPAIR_VERB_PROMISE = 55,
	REPAIR_VERB_COMMIT = 56,
	REPAIR_VERB_COMMIT_RSP = 57,
	REPAIR_VERB_FAIL = 58, /* one-way */
	REPAIR_VERB_FIRST = REPAIR_VERB_VALIDATE,
	REPAIR_VERB_LAST = REPAIR_VERB_FAIL,
};

/* Called for each fragment of a scan, possibly on another thread (a
 * worker in the node); it touches only the state of the job `arg`.
 * `frag` is borrowed for the call. Non-zero stops the scan, which then
 * fails. */
typedef int (*repair_scan_each_fn)(void *arg,
				   const struct storage_mutation *frag);

/* What repair needs from this node's storage. */
struct repair_store_ops {
	/* storage_apply's contract; `m` may be a decoded mutation. */
	int (*apply)(void *s, const struct storage_mutation *m,
		     storage_done_fn done, void *arg);
	/* Calls each(arg, frag) for every non-empty fragment
	 * (storage_scan_next_fragment) of the partitions of (start, end],
	 * start < end, in token order; then done(arg, status, code) on the
	 * loop thread (later, or inline). */
	void (*scan)(void *s, const uint8_t table_id[16], int64_t start,
		     int64_t end, repair_scan_each_fn each,
		     storage_done_fn done, void *arg);
	/* A reference to the table's meta, released with
	 * storage_table_meta_unref when the job or task using it ends (an
	 * ALTER or DROP of the table may come meanwhile); NULL when
	 * unknown. */
	const struct storage_table_meta *(*meta)(void *s,
						 const uint8_t table_id[16]);
	/* Optional: runs run(job) off the loop (a worker thread), then
	 * done(job) on the loop: folding and encoding a validation's tree.
	 * NULL: both run inline (the simulator). */
	void (*offload)(void *s, void (*run)(void *job),
			void (*done)(void *job), void *job);
	/* Incremental repair (optional, all four or none: without them an
	 * incremental session is refused). `session` is the 16-byte id
	 * SSTables record as pending_repair. Each calls done on the loop.
	 * prepare: storage_repair_anticompact of the table over `ranges`
	 * (sorted, disjoint, non-wrapping). */
	void (*prepare)(void *s, const uint8_t table_id[16],
			const struct storage_token_range *ranges, size_t n,
			const uint8_t session[16], uint64_t *marked,
			storage_done_fn done, void *arg);
	/* storage_repair_set_state: repaired at `repaired_at` (ms), or
	 * unrepaired again (0). *count: the SSTables changed (prepare's
	 * *marked: marked whole or split), set before done runs. */
	void (*finish)(void *s, const uint8_t table_id[16],
		       const uint8_t session[16], int64_t repaired_at,
		       uint64_t *count, storage_done_fn done, void *arg);
	/* scan's contract over only the data pending for `session`. */
	void (*scan_pending)(void *s, const uint8_t table_id[16],
			     const uint8_t session[16], int64_t start,
			     int64_t end, repair_scan_each_fn each,
			     storage_done_fn done, void *arg);
	/* Writes m[0..n) as data pending for `session`
	 * (storage_repair_ingest); takes the mutations and the array. */
	void (*apply_pending)(void *s, const uint8_t table_id[16],
			      const uint8_t session[16],
			      struct storage_mutation **m, size_t n,
			      storage_done_fn done, void *arg);
};

struct repair_options {
	struct inet_addr self;        /* this node's internode address */
	uint64_t validate_timeout_ms; /* a tree per replica: 600000 */
	uint64_t request_timeout_ms;  /* rows, fetch, apply: 120000 */
	size_t session_space;         /* a tree's bytes: 16 MiB */
	size_t message_bytes;         /* an APPLY message: 4 MiB */
	/* Optional: the failure detector's verdict. While a session waits,
	 * a replica it waits for that is convicted fails the session at the
	 * next check (every alive_check_ms, 1000), not at the timeout. */
	bool (*is_alive)(void *arg, const struct inet_addr *ep);
	/* Optional, with is_alive: a replica's incarnation (its gossip
	 * generation; 0 when unknown). A replica a session waits for whose
	 * incarnation changed since its task began (it restarted and forgot
	 * the session, perhaps before anyone convicted it) fails the
	 * session at the same check, as Cassandra's RepairSession fails
	 * when a participant restarts. */
	int64_t (*incarnation)(void *arg, const struct inet_addr *ep);
	void *alive_arg;
	uint64_t alive_check_ms;
	/* Participant sessions (repair_local_*): a session neither finalized
	 * nor failed that hears nothing of its coordinator for
	 * local_timeout_ms (Cassandra's repair_fail_timeout, 1 day), or whose
	 * coordinator's incarnation changed since its PREPARE (it restarted
	 * and forgot it), is failed at the next check (every local_check_ms,
	 * 5000): its pending data is unrepaired, never left pending. */
	uint64_t local_timeout_ms;
	uint64_t local_check_ms;
	/* Optional: runs on the loop after a participant session changed
	 * state (persist repair_locals_encode's image). */
	void (*locals_changed)(void *arg);
	void *locals_arg;
	/* stream_throughput_outbound: the bytes per second of rows this
	 * node's sessions send (APPLY messages: repair, bootstrap,
	 * decommission, rebuild); 0 is unthrottled. A token bucket paced by
	 * timers: a message waits for its bytes, the loop never does. */
	uint64_t stream_throughput;
};
void repair_options_default(struct repair_options *o);

struct repair;

/* The outbound stream throttle (nodetool setstreamthroughput): takes
 * effect for the next message. */
void repair_set_stream_throughput(struct repair *r, uint64_t bytes_per_sec);
uint64_t repair_stream_throughput(const struct repair *r);
/* What the throttle did since start: APPLY bytes sent, the times a
 * message waited for its bytes and the microseconds it waited in all. */
struct repair_stream_stats {
	uint64_t bytes, waits, waited_us;
};
void repair_stream_stats(const struct repair *r,
			 struct repair_stream_stats *out);

/* ---- sessions ------------------------------------------------------------ */

#define REPAIR_MAX_REPLICAS 16

struct repair_range {
	int64_t start, end;               /* (start, end], wrap-around aware */
	const struct inet_addr *replicas; /* borrowed for the call */
	size_t nreplicas;                 /* 1..REPAIR_MAX_REPLICAS */
	/* Optional, for REPAIR_DC_PARALLEL: dcs[i] is replicas[i]'s
	 * datacenter (borrowed for the call). NULL: all in one. */
	const char *const *dcs;
};

/* When a task's replicas are asked to validate (nodetool's -seq, default,
 * -dcpar). */
enum repair_parallelism {
	REPAIR_PARALLEL = 0, /* every replica at once */
	REPAIR_SEQUENTIAL,   /* one replica of a range at a time */
	REPAIR_DC_PARALLEL,  /* one per datacenter of a range at a time */
};

#define REPAIR_MAX_JOBS 4 /* tasks of a session at once (nodetool's -j) */

/* A (table, range) task that ended, for a caller's history. */
struct repair_task_result {
	uint64_t session;
	const char *table; /* "ks.table"; borrowed for the call */
	int64_t start, end;
	bool ok;
	const char *error;    /* "" when ok; borrowed for the call */
	uint64_t duration_us; /* from its first VALIDATE to its end */
	uint64_t mismatched_ranges;
	uint64_t rows_streamed, bytes_streamed; /* would stream: preview */
};
/* Runs on the loop when a started task ends: done, or failed with its
 * session (every task then running reports). Borrowed for the call. */
typedef void (*repair_task_fn)(void *arg, const struct repair_task_result *t);

struct repair_table {
	uint8_t id[16];
	const char *name; /* "ks.table", for progress lines */
};

struct repair_request {
	const struct repair_table *tables;
	size_t ntables;
	const struct repair_range *ranges;
	size_t nranges;
	bool preview; /* report what would stream, stream nothing */
	/* A scheduled segment: each replica refuses the VALIDATE while it
	 * takes part in another coordinator's task ("replica busy: ..."),
	 * so a replica is in at most one such segment at a time. */
	bool exclusive;
	/* The deepest tree replicas build (1..20; 0: 20). A caller that
	 * knows a range holds few partitions spares every replica a tree of
	 * 2^20 leaves built, folded and freed per range. */
	uint32_t max_depth;
	enum repair_parallelism parallelism;
	uint32_t jobs; /* 1..REPAIR_MAX_JOBS; 0: 1 */
	/* Per-step lines through `progress`, each starting "trace: "
	 * (requests, answers, mismatches, what streams where, elapsed). */
	bool trace;
	repair_task_fn task_done; /* optional; gets repair_start's `arg` */
	/* Incremental (Cassandra 4's consistent session): every participant
	 * first marks its unrepaired data of the session's tables within the
	 * ranges it replicates as pending (PREPARE, anticompacting what lies
	 * partly inside); validation and streaming cover only that; when all
	 * tasks succeed the pending data becomes repaired (PROPOSE, COMMIT),
	 * else unrepaired again (FAIL). Not with preview. */
	bool incremental;
	/* Incremental over a subset of the replicas (-dc, -local, -hosts):
	 * the session runs as above but its data is never marked repaired
	 * (it goes back to unrepaired at the end), as Cassandra sets
	 * repairedAt only for global repairs. */
	bool partial;
	/* Not a repair (bootstrap's, decommission's or rebuild's streaming
	 * session): kept out of repair_states. */
	bool unlisted;
	/* Optional: what the operator asked, for repair_states (copied). */
	const struct repair_asked *asked;
};

/* The options of a repair command beyond the request's own, as
 * Cassandra's RepairOption names them (system_views.repairs). */
struct repair_asked {
	bool primary_range; /* -pr */
	bool subrange;      /* -st/-et */
	bool scheduled;     /* a segment of the repair scheduler */
	const char *const *column_families; /* the tables named */
	size_t ncolumn_families;
	const char *const *data_centers; /* -dc */
	size_t ndata_centers;
	const char *const *hosts; /* -hosts, as given */
	size_t nhosts;
};

struct repair_peer_stats {
	struct inet_addr addr;
	uint64_t rows_streamed, bytes_streamed; /* sent to it */
	uint64_t rows_fetched, bytes_fetched;   /* read from it */
};

struct repair_summary {
	uint64_t session;
	bool ok;
	char error[256];
	uint64_t ranges;     /* (table, range) pairs validated */
	uint64_t partitions; /* ... partitions the replicas' trees hold */
	uint64_t mismatched_ranges; /* coalesced leaf ranges that differed */
	uint64_t rows_hashed;       /* row digests received for them */
	uint64_t rows_mismatched;   /* rows whose versions differed */
	uint64_t leaves_mismatched; /* Merkle leaves that differed */
	/* Bytes of VALIDATE, TREE and ROWS messages (both ways) exchanged
	 * with replicas other than this node, and of node values in them. */
	uint64_t tree_bytes;
	uint64_t hash_bytes;
	uint64_t duration_us;
	const struct repair_peer_stats *peers; /* every replica met */
	size_t npeers;
	bool incremental;
	uint8_t uuid[16];    /* incremental: the pending_repair id */
	uint64_t marked;     /* SSTables marked pending (all participants) */
	uint64_t repaired;   /* ... then marked repaired */
	int64_t repaired_at; /* ms */
	bool partial;        /* request.partial: nothing marked repaired */
};

/* A line of progress ("ks.t (a,b]: 2 mismatched ranges, ..."), borrowed
 * for the call. */
typedef void (*repair_progress_fn)(void *arg, const char *line);
/* Runs exactly once per started session, on the loop; `s` is borrowed
 * for the call. */
typedef void (*repair_done_fn)(void *arg, const struct repair_summary *s);

struct repair;

/* `env` and `store` (with `store_arg`) must outlive the repair object. */
struct repair *repair_new(struct env *env, const struct repair_options *o,
			  const struct repair_store_ops *store,
			  void *store_arg);
/* A running session is dropped without its callbacks. Scans in flight
 * keep the object until they complete. */
void repair_delete(struct repair *r);

/* A message of a REPAIR_VERB_* verb from `from`. */
void repair_receive(struct repair *r, const struct inet_addr *from,
		    uint32_t verb, const uint8_t *msg, size_t len);

/* Starts a session (everything `q` points at is copied). 0 with its id
 * in *session (may be NULL); `done` then runs exactly once, possibly
 * before this returns (a table the store does not know). -1 (and no
 * callback) with ERR_EXISTS while another session runs, ERR_INVALID for
 * an empty request, a range without replicas or jobs past
 * REPAIR_MAX_JOBS. `progress` may be NULL. */
int repair_start(struct repair *r, const struct repair_request *q,
		 repair_progress_fn progress, repair_done_fn done, void *arg,
		 uint64_t *session);

/* Whether a session runs. */
bool repair_running(const struct repair *r);
/* Where the running session is, for netstats. */
struct repair_status {
	uint64_t session;
	size_t task, tasks; /* (table, range) pairs: done so far, in all */
	size_t running;     /* tasks in flight; the fields below: the oldest */
	const char *table;  /* borrowed until the loop runs again */
	const char
		*phase; /* "validation", "row hashes", "row fetch", "apply" */
	const struct repair_peer_stats *peers; /* counts so far; borrowed */
	size_t npeers;
};
/* 1 with *out filled while a session runs, else 0. */
int repair_get_status(const struct repair *r, struct repair_status *out);

/* The trees this node keeps for other coordinators' tasks (as a
 * participant: from VALIDATE until the task's RELEASE or its claim's
 * expiry), and their bytes in *bytes (may be NULL). */
size_t repair_kept_trees(const struct repair *r, size_t *bytes);

/* ---- incremental sessions, participant side ------------------------------
 * Cassandra's LocalSessions: every consistent session this node takes
 * part in (the last REPAIR_MAX_LOCAL of them, in memory). */
struct merkle_range;
enum repair_local_state {
	REPAIR_LOCAL_PREPARING = 0,
	REPAIR_LOCAL_PREPARED,
	REPAIR_LOCAL_REPAIRING,
	REPAIR_LOCAL_FINALIZE_PROMISED,
	REPAIR_LOCAL_FINALIZED,
	REPAIR_LOCAL_FAILED,
};
const char *repair_local_state_name(enum repair_local_state s);

#define REPAIR_MAX_LOCAL 64

struct repair_local_info {
	uint8_t uuid[16];
	uint64_t session;
	struct inet_addr coordinator;
	enum repair_local_state state;
	int64_t started_ms, updated_ms; /* wall clock */
	int64_t repaired_at;            /* FINALIZED: ms */
	const uint8_t *table_ids;       /* 16 bytes each; borrowed */
	size_t ntables;
	const struct merkle_range *ranges; /* borrowed */
	size_t nranges;
	uint64_t marked; /* SSTables PREPARE marked */
};
typedef void (*repair_local_fn)(void *arg, const struct repair_local_info *s);
/* Calls each(arg, info) for every local session, oldest first. */
void repair_local_list(const struct repair *r, repair_local_fn each, void *arg);
/* Fails a local session not yet finalized (repair_admin cancel): its
 * pending data becomes unrepaired. 0, or -1 with ERR_NOT_FOUND (no such
 * session) or ERR_INVALID (finalized or failed already). */
int repair_local_fail(struct repair *r, const uint8_t uuid[16]);
/* The participant sessions as bytes (a versioned image), and back: at
 * start, before any message, the previous run's. A session the stop cut
 * short in its store work is finished: an interrupted PREPARE or FAIL
 * fails (its pending data unrepaired), an interrupted COMMIT commits
 * again; the others stay in their state until their coordinator's next
 * message or the timeout. -1 with ERR_CORRUPT for an image that does not
 * parse (nothing loaded). */
int repair_locals_encode(const struct repair *r, struct buf *out);
int repair_locals_load(struct repair *r, const uint8_t *p, size_t len);
/* The id SSTables record for session `id` of coordinator `co`. */
void repair_session_uuid(const struct inet_addr *co, uint64_t id,
			 uint8_t out[16]);

/* ---- states (Cassandra 5.0's CoordinatorState / SessionState) -----------
 * The last REPAIR_MAX_STATES sessions started here (manual and scheduled,
 * full and incremental; not the unlisted ones), with the wall-clock ms at
 * which each reached a step of Cassandra's repair: SETUP and START when
 * it starts, PREPARE_START/PREPARE_COMPLETE around incremental repair's
 * PREPARE round (a full repair prepares nothing: both at START),
 * REPAIR_START when its tasks start (a session's JOBS_START),
 * REPAIR_COMPLETE when the last task ended, then the result. */
#define REPAIR_MAX_STATES 32

enum repair_step {
	REPAIR_STEP_SETUP = 0,
	REPAIR_STEP_START,
	REPAIR_STEP_PREPARE_START,
	REPAIR_STEP_PREPARE_COMPLETE,
	REPAIR_STEP_REPAIR_START,
	REPAIR_STEP_REPAIR_COMPLETE,
	REPAIR_STEP_COUNT
};

enum repair_result {
	REPAIR_RESULT_NONE = 0, /* running */
	REPAIR_RESULT_SUCCESS,
	REPAIR_RESULT_FAILURE,
};

struct repair_state_info {
	uint64_t session;
	uint32_t command; /* 1, 2, ... in the order sessions started */
	int64_t steps_ms[REPAIR_STEP_COUNT]; /* 0: not reached */
	int64_t init_ms, updated_ms;         /* wall clock */
	uint64_t duration_ms;                /* so far while running */
	enum repair_result result;
	const char *error; /* FAILURE's; borrowed */
	/* the request */
	bool preview, incremental, trace;
	enum repair_parallelism parallelism;
	uint32_t jobs;
	struct repair_asked asked; /* its arrays borrowed */
	const char *const *tables; /* "ks.table"; borrowed */
	size_t ntables;
	const struct repair_range *ranges; /* replicas and dcs borrowed */
	size_t nranges;
	const struct inet_addr *participants; /* every replica; borrowed */
	size_t nparticipants;
	/* progress: tasks ended so far, of ntables * nranges */
	size_t tasks_done;
};
typedef void (*repair_state_fn)(void *arg, const struct repair_state_info *s);
/* Counts of the listed sessions since start (the metrics endpoint): by
 * kind (0 full, 1 incremental, 2 preview) those that ended well or not,
 * and the bytes of rows they sent replicas (previews send none). */
enum { REPAIR_KINDS = 3 };
struct repair_counts {
	uint64_t succeeded[REPAIR_KINDS], failed[REPAIR_KINDS];
	uint64_t bytes_streamed, rows_streamed;
	bool running; /* a listed session runs now */
};
void repair_get_counts(const struct repair *r, struct repair_counts *out);
/* Calls each(arg, info) for every kept state, oldest first. */
void repair_state_list(const struct repair *r, repair_state_fn each, void *arg);
/* A version-1 (time-based) UUID for session `session` started at `ms`,
 * its node bits from this node's address; `kind` (0..15) tells the ids
 * of one session apart (0: the repair, 1: its session). */
void repair_state_timeuuid(const struct repair *r, uint64_t session, int64_t ms,
			   unsigned kind, uint8_t out[16]);

/* Fails the running session ("cancelled: <why>"): its `done` runs now and
 * its replicas' claims are released; scans already running on
 * participants finish and their answers are dropped. -1 (ERR_NOT_FOUND)
 * when none runs. */
int repair_cancel(struct repair *r, const char *why);

#endif
