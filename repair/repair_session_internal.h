/*
 * The coordinator's side of a repair session, shared by the files that
 * implement it: repair_session.c (tasks, the step machine, answers,
 * timeouts) and repair_sync.c (the tree exchange and the row sync). The
 * object, its messages and the public calls are in repair.c.
 */
#ifndef CASSINI_REPAIR_REPAIR_SESSION_INTERNAL_H
#define CASSINI_REPAIR_REPAIR_SESSION_INTERNAL_H

#include "repair/repair_internal.h"

#include "common/arena.h"

enum phase {
	PHASE_VALIDATE,
	PHASE_TREE,
	PHASE_ROWS,
	PHASE_FETCH,
	PHASE_APPLY,
};

static inline const char *phase_name(enum phase p)
{
	switch (p) {
	case PHASE_VALIDATE:
		return "validation";
	case PHASE_TREE:
		return "tree exchange";
	case PHASE_ROWS:
		return "row hashes";
	case PHASE_FETCH:
		return "row fetch";
	default:
		return "apply";
	}
}

/* A row digest a replica answered (ROWS). */
struct entry {
	struct slice key, id;
	uint8_t digest[16];
	uint8_t replica;
};

struct replica {
	struct inet_addr addr;
	const char *dc;         /* dc_parallel's group; NULL: one */
	size_t peer;            /* index in the session's peers */
	int waiting;            /* answers still due in this phase */
	bool asked;             /* VALIDATE sent (they go out one by one) */
	bool self;              /* this node: its messages stay local */
	int64_t incarnation;    /* when the task began (0: unknown) */
	uint64_t sent_us;       /* its latest request, for trace */
	uint32_t depth, levels; /* its VALIDATE answer: the kept tree's */
	uint64_t *top;          /* ... levels 0..levels, heap-style */
	uint32_t *req;          /* TREE, ROWS: nodes asked of it */
	size_t nreq;
	uint64_t *got;    /* its TREE answer: their left children */
	struct buf apply; /* encoded selections to send, back to back */
	size_t *ends;     /* their ends in `apply` */
	size_t nends, ends_cap;
	struct repair_row *wanted; /* FETCH: rows to read from it */
	size_t nwanted, wanted_cap;
};

struct repair_session;

/* A (table, range) task in flight: one of the session's `jobs` lanes.
 * The step functions name it `s` (they were the session's before -j). */
struct task {
	struct repair_session *sess;
	struct repair *r;
	bool busy;     /* the lane runs a task */
	uint32_t task; /* its number in the session, in every message */
	size_t ti, ri; /* its table and range */
	uint64_t start_us;
	uint64_t rows_streamed, bytes_streamed; /* for its result */
	const struct storage_table_meta *meta;  /* a reference (task_reset) */
	enum phase phase;
	struct replica rep[REPAIR_MAX_REPLICAS];
	size_t nrep;
	struct merkle_range *mism;
	size_t nmism;
	/* The tree exchange: the frontier, nodes of `level` that differ (or
	 * are not compared yet), each with every replica's value at
	 * fval[i * nrep + replica] and, once compared, the replica whose
	 * answers stand for each (frep: the first of those holding the same
	 * value, this node first). At `depth` the frontier is the
	 * mismatching leaves. */
	int depth, level;
	uint32_t *fidx;
	uint64_t *fval;
	uint8_t *frep;
	size_t nf;
	struct arena rows_arena; /* a task's row keys and ids */
	struct entry *entries;
	size_t nentries, entries_cap;
	struct storage_mutation **frags; /* fetched, decoded */
	size_t nfrags, frags_cap;
	struct env_timer *timer; /* the step's deadline */
	/* APPLY under the stream throttle: sending (answers do not end the
	 * phase yet), the next replica and selection to send, the timer that
	 * resumes once the bucket has room */
	bool sending;
	size_t send_rep, send_first;
	struct env_timer *pace_timer;
};

struct repair_session {
	struct repair *r;
	uint64_t id;
	struct arena arena; /* the request's copies */
	struct repair_table *tables;
	size_t ntables;
	struct repair_range *ranges;
	size_t nranges;
	bool preview;
	bool exclusive;
	bool trace;
	uint32_t max_depth;
	enum repair_parallelism parallelism;
	size_t jobs;
	size_t next;    /* tasks started: table next / nranges, ... */
	uint32_t ntask; /* the latest task number */
	struct task lanes[REPAIR_MAX_JOBS];
	struct repair_peer_stats *peers;
	size_t npeers;
	uint64_t start_us;
	struct repair_summary sum;
	struct env_timer *alive_timer; /* failure detector checks */
	repair_progress_fn progress;
	repair_done_fn done;
	repair_task_fn task_done;
	void *arg;
	/* incremental (repair_incr.c): the consistent session's phase, the
	 * participants (peers) whose answer it awaits, its deadline */
	bool incremental;
	uint8_t uuid[16];
	int incr;
	bool *awaiting;
	struct env_timer *incr_timer;
	int64_t repaired_at;
	struct repair_state *state; /* repair_states.c; NULL: unlisted */
};

enum incr_phase {
	INCR_NONE = 0,
	INCR_PREPARE,
	INCR_REPAIR,
	INCR_PROPOSE,
	INCR_COMMIT,
};

/* ---- repair_incr.c: the consistent session (coordinator) --------------- */

/* Sends PREPARE to every participant; the tasks start once all prepared.
 * -1 when the session ended. */
int repair_incr_begin(struct repair_session *ss);
/* Every task is done: PROPOSE, then COMMIT; ends the session. */
void repair_incr_finalize(struct repair_session *ss);
/* The session ends (failed): FAIL to every participant. */
void repair_incr_fail(struct repair_session *ss);
/* A PREPARE, PROMISE or COMMIT answer. */
void repair_incr_receive(struct repair_session *ss,
			 const struct inet_addr *from, uint32_t verb,
			 const struct repair_msg *m);
/* Fails the session when a participant it awaits is down. 1: ended. */
int repair_incr_alive_check(struct repair_session *ss);

/* ---- repair_states.c: the session's record for repair_state_list ------- */

void repair_state_begin(struct repair_session *s,
			const struct repair_request *q);
/* The session reached `step` (and every step before it). */
void repair_state_step(struct repair_session *s, enum repair_step step);
void repair_state_task_ended(struct repair_session *s);
void repair_state_end(struct repair_session *s, bool ok, const char *error);

/* ---- repair_session.c: tasks and the step machine ---------------------- */

void repair_session_free(struct repair_session *ss);
/* Starts what the session's lanes may run now; -1 when it ended. */
int repair_session_pump(struct repair_session *ss);
/* Ends the session as done (incremental: once committed). */
void repair_session_succeed(struct repair_session *ss);
/* Ends the session as failed with this message (every task released). */
void repair_session_abort(struct repair_session *ss, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Timer callbacks: the failure detector check, a step's deadline. */
void repair_session_alive_check(void *arg);
void repair_task_timeout(void *arg);

struct repair_range *repair_task_cur_range(struct task *s);
const char *repair_task_cur_table(struct task *s);
/* A progress line for the tool. */
void repair_task_progress(struct task *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A --trace line: "trace: +ELAPSED TABLE (START,END]: ...". */
void repair_task_trace(struct task *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Fails the task's session (every running task with it). */
void repair_task_fail(struct task *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Arms the task's step deadline. */
void repair_task_arm(struct task *s, uint64_t ms);
/* Sends request `q` to replica i (its session, task and table filled in)
 * and counts the answer as due. */
int repair_task_send(struct task *s, size_t i, uint32_t verb,
		     struct repair_msg *q);
/* Answers still due in the task's step. */
size_t repair_task_waiting(const struct task *s);
/* The task is done: its lane takes the next one. */
void repair_task_next(struct task *s);

/* ---- repair_sync.c: the tree exchange and the row sync --------------------
 */

/* A VALIDATE answer's depth and top levels, a TREE answer's values. */
int repair_sync_take_top(struct task *s, struct replica *p,
			 const struct repair_msg *m);
int repair_sync_take_tree(struct replica *p, const struct repair_msg *m);
/* Every replica answered the TREE round / VALIDATE. */
void repair_sync_tree_round_done(struct task *s);
void repair_sync_trees_done(struct task *s);
/* A ROWS answer's entries; every replica answered ROWS / FETCH / APPLY. */
int repair_sync_add_entries(struct task *s, size_t i,
			    const struct repair_msg *m);
void repair_sync_rows_done(struct task *s);
void repair_sync_fetch_done(struct task *s);
void repair_sync_apply_done(struct task *s);
/* The pace timer: sends what the stream throttle allows now. */
void repair_sync_send_more(void *arg);

#endif
