/*
 * Internal to the coordinator (coordinator.c, coord_write.c, coord_read.c,
 * replica.c): the coordinator's state, its operations and the helpers those
 * files share. Helpers used by one file only stay static there.
 *
 * The batchlog store (batchlog.c) keeps its own header, repl_internal.h,
 * which this one includes: batchlog.c needs none of what is here.
 *
 * Every message the coordinator sends for an operation gets a request id
 * that maps (one hash table of struct slot) to the operation and the
 * target it went to; slot targets at and above BL_TARGET are the batchlog
 * stores of a logged batch.
 */
#ifndef CASSINI_REPLICATION_COORD_INTERNAL_H
#define CASSINI_REPLICATION_COORD_INTERNAL_H

#include "common/arena.h"
#include "common/buf.h"
#include "common/env.h"
#include "common/err.h"
#include "common/inet.h"
#include "replication/repl_internal.h"
#include "replication/replication.h"
#include "ring/ring.h"
#include "storage/storage.h"

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ID_BUCKETS 4096
/* Slot targets at and above this are a batchlog store of a write. */
#define BL_TARGET 0x80000000u
#define BL_MAX    2

enum op_kind { OP_WRITE, OP_READ, OP_RANGE, OP_DELIVER, OP_TRUNCATE };

struct op;

/* One message in flight: request id -> (operation, target slot). */
struct slot {
	struct slot *next; /* hash chain */
	uint64_t id;
	struct op *op;
	uint32_t target;
};

struct repl {
	struct env *env;
	struct repl_options o;
	const struct repl_store_ops *store;
	void *store_arg;
	struct repl_hooks hooks;
	uint64_t next_id;
	struct slot *ids[ID_BUCKETS];
	struct op *ops; /* every live operation, for repl_delete */
	/* Operations by deadline, soonest first, and the one timer that
	 * fires for the soonest (armed_us: its deadline; 0: not armed).
	 * A finished operation only leaves the list; the timer is not
	 * touched per operation. */
	struct op *dl_head, *dl_tail;
	struct env_timer *dl_timer;
	uint64_t dl_armed_us;
	struct batchlog *bl; /* batches kept for others; NULL: none */
	struct env_timer *bl_timer;
	bool bl_replaying;
	struct repl_stats st;
	/* per-table coordinator latencies: open addressing on the id,
	 * tlat_cap a power of two (0: none yet), never shrunk */
	struct repl_table_lat *tlat;
	size_t ntlat, tlat_cap;
	struct ctr_state
		*ctr;      /* counter leader and forwards (coord_counter.c) */
	size_t background; /* answered operations still waiting
			      (repl_op_answered) */
};

/* ---- operations ---------------------------------------------------------- */

struct target {
	uint32_t ep;  /* ring endpoint index */
	uint32_t mut; /* writes: which mutation */
	int16_t dc;   /* index into the strategy's dcs, -1 if none */
	bool local_dc;
	bool pending; /* a pending endpoint (writes) */
	bool sent, answered, ok;
	uint16_t fail_code; /* answered, not ok: enum repl_failure_code */
	uint64_t id;
	/* reads */
	uint8_t round; /* the phase its last request belongs to */
	uint8_t digest[16];
	bool has_digest; /* digest[] is set */
	struct storage_mutation *frag;
	struct storage_mutation **frags; /* ranges */
	size_t nfrags;
	bool cut;
	/* ranges: a replica filtering protection read for contact `of` of
	 * the partitions op->pk[pk .. pk + npk) (their versions in
	 * `frags`) */
	uint32_t of;
	uint32_t pk, npk;
};

struct wmut {
	struct buf enc;
	int block_for;
	int acks, failures, targets;
	int *dc_need, *dc_acks; /* EACH_QUORUM, per strategy dc */
	size_t ndc;
	bool satisfied;
	/* The caller's mutation, valid only inside repl_write (the local
	 * replica applies it straight away). */
	const struct storage_mutation *m;
	uint8_t table_id[16]; /* m's, for the table's latency */
};

/* A partition replica filtering protection reads from one contact: the
 * rows other contacts returned and it did not (encoded clusterings,
 * borrowed from the others' fragments, the array in op->a), or the
 * partition whole within the read's slices (nrows 0). */
struct protect_key {
	const struct storage_mutation *p;
	const struct slice *rows;
	size_t nrows;
};

struct op {
	enum op_kind kind;
	struct op *prev, *next;
	struct repl *r;
	struct ring *ring;
	int cl;
	uint64_t start_us;
	uint64_t deadline_us; /* on the repl's deadline list while linked */
	struct op *dl_prev, *dl_next;
	bool replied;
	bool background; /* answered (repl_op_answered): no longer counts in
			  * flight
			  */
	/* Frees requested while `hold` > 0 wait for the holder: an answer can
	 * arrive inline (a local apply) while a send loop still runs. */
	int hold;
	bool free_pending;
	bool sending; /* a send loop runs: answers wait for its end */
	struct target *t;
	size_t nt;
	size_t outstanding; /* messages without an answer */
	int phase;
	bool traced; /* in trace session `trace` */
	uint8_t trace[16];
	/* writes */
	enum repl_write_type wt;
	/* the local replica applied the mutations already (a counter
	 * leader): its target counts as acknowledged without a write */
	bool self_applied;
	bool logged;      /* a logged batch going through the batchlog */
	bool in_batchlog; /* still storing it */
	uint8_t batch_id[16];
	uint32_t bl_ep[BL_MAX];
	size_t nbl;
	int bl_acks;
	uint64_t bl_id[BL_MAX];
	bool bl_sent[BL_MAX], bl_answered[BL_MAX];
	struct wmut *muts;
	size_t nmut, unsatisfied;
	repl_write_done_fn wdone;
	/* reads */
	uint8_t table_id[16];
	int64_t token; /* the partition's (trace events) */
	/* a reference: the read merges with it after the caller's table
	 * may have been altered or dropped */
	const struct storage_table_meta *meta;
	struct buf cmd_enc;
	struct arena a; /* decoded cmd for the local store */
	struct storage_read_cmd cmd;
	bool read_repair;
	int block_for;
	size_t ncontact; /* reads: targets asked first; the rest are spares */
	struct env_timer *spec_timer;
	int64_t spec_delay_us; /* -1: no speculative retry */
	struct storage_mutation *merged;
	repl_read_done_fn rdone;
	/* ranges */
	int64_t start, sub_end, end;
	uint32_t max_partitions;
	repl_range_done_fn gdone;
	size_t ncontact_range; /* targets read; protection reads and repair
				  targets follow */
	/* an indexed range read: its restriction (copied into `a`) */
	bool has_index;
	struct repl_index_expr ix;
	struct storage_index_bound ix_bounds[2]; /* ix.lo, ix.hi */
	struct storage_mutation **rr_out; /* the answer, held while repairs */
	size_t rr_n;                      /* are acknowledged */
	int64_t rr_resume;
	bool rr_finished;
	/* indexed range reads: the partitions replica filtering
	 * protection reads, grouped by the contact they are read from
	 * (borrowed from the contacts' lists), and the rows the step holds
	 * for protection (Cassandra's cached rows) */
	struct protect_key *pk;
	uint64_t rfp_rows;
	/* reads: replicas whose answer held more than
	 * tombstone_warn_threshold tombstones, and the most one held */
	uint32_t tomb_warn_nodes;
	uint64_t tomb_max;
	/* hint deliveries */
	struct inet_addr to;
	repl_deliver_fn ddone;
	void *arg;
};

/* Local replica completions carry the request id through this. */
struct local_ctx {
	struct repl *r;
	uint64_t id;
	/* a traced point read's session (traced) and storage counts */
	bool traced;
	uint8_t trace[16];
	uint64_t start_us;
	struct storage_read_stats stats;
	bool scan; /* a traced scan of (start, end] */
	int64_t start, end;
};

/* ---- coordinator.c: ids, operations, sending, answers -------------------- */

/* Counts a client request's outcome by kind and level (repl_stats.by_cl). */
void repl_count_request(struct repl *r, enum repl_req_kind kind, int cl,
			const struct repl_result *res, uint64_t start_us);
uint64_t repl_now_us(struct repl *r);
/* Counts a successful request's latency for its table. */
void repl_table_lat_add(struct repl *r, const uint8_t table_id[16],
			enum repl_req_kind kind, uint64_t us);
/* One event of trace session `session` (NULL: none) through the trace
 * hook, `start_us` (repl_now_us) when this node began the step. */
void repl_trace(struct repl *r, const uint8_t *session, const char *thread,
		uint64_t start_us, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* A peer as Cassandra 4 names one in trace events: "/127.0.0.1:7000". */
#define REPL_TRACE_PEER_LEN (INET_ADDR_STRLEN + 1)
void repl_trace_peer(const struct inet_addr *a, char out[REPL_TRACE_PEER_LEN]);
/* A traced op's "Sending <verb> message to /<peer> message size N bytes"
 * (Cassandra 4's verb names: READ_REQ, MUTATION_REQ, RANGE_REQ, ...; N is
 * the message's encoded size). */
void repl_trace_send(struct op *op, const char *verb, uint32_t ep,
		     const ProtobufCMessage *msg);
/* A traced op's "Full(/<peer>,(l,r])" of token `token`'s vnode range:
 * Cassandra's name of a full replica in read repair's trace events. */
void repl_trace_replica(const struct op *op, uint32_t ep, int64_t token,
			char *out, size_t cap);
/* A traced read's storage steps, in Cassandra's words (ReadStage-1):
 * "Merged data from memtables and N sstables" (a `point` read's only),
 * then "Read N live rows and M tombstone cells". */
void repl_trace_read_stats(struct repl *r, const uint8_t *session,
			   const char *thread, uint64_t start_us,
			   const struct storage_read_stats *st, bool point);
/* A traced scan of (start, end]: "Executing seq scan across N sstables
 * for (min(..), max(..)]" and the rows and tombstones it read. */
void repl_trace_scan_stats(struct repl *r, const uint8_t *session,
			   uint64_t start_us, int64_t start, int64_t end,
			   const struct storage_read_stats *st);

/* The hash chain of request id `id`. */
struct slot **repl_bucket_of(struct repl *r, uint64_t id);
/* Registers a new request id for `op->t[target]` (stored in its `id`).
 * 0 or -1 (ERR_NOMEM). */
int repl_slot_add(struct repl *r, struct op *op, uint32_t target);
/* Removes the slot of `id` and returns it (the caller frees), or NULL. */
struct slot *repl_slot_take(struct repl *r, uint64_t id);
/* A request to op->t[i] begins: a new id, marked sent, one more answer
 * awaited. 0 or -1 (ERR_NOMEM, nothing changed). */
int repl_target_begin(struct op *op, size_t i);
/* Its send failed: the id is forgotten and no answer is awaited. */
void repl_target_unsent(struct op *op, size_t i);

/* (Re)sets the operation's deadline to `timeout_ms` from now; when it
 * passes, the operation's timeout handler runs. */
void repl_op_set_deadline(struct op *op, uint64_t timeout_ms);

/* A new operation, linked and with its timeout armed; NULL with err set. */
struct op *repl_op_new(struct repl *r, enum op_kind kind, int cl,
		       uint64_t timeout_ms, void *arg);
/* Unregisters every id of the operation and frees it (once nobody holds
 * it). */
void repl_op_free(struct op *op);
/* The requester has its answer: marks the operation replied, and what
 * it still waits for (slow replicas to hint, read repairs) is background
 * work that no longer counts against max_inflight. */
void repl_op_answered(struct op *op);
/* Drops a hold taken with `op->hold++`; frees a free requested meanwhile. */
void repl_op_unhold(struct op *op);

void repl_result_init(struct repl_result *res, enum repl_outcome o, int cl);
#define BACKGROUND_FACTOR 16

/* True (and `res` filled with Overloaded) when max_inflight requests
 * await their answer, or BACKGROUND_FACTOR times as many answered ones
 * still wait for slow replicas (their memory is bounded too). */
bool repl_overloaded(struct repl *r, struct repl_result *res, int cl);

/* Wall-clock deadline for a request sent now. */
int64_t repl_deadline_us(struct repl *r, uint64_t timeout_ms);
int repl_send_packed(struct repl *r, const struct inet_addr *to, uint32_t verb,
		     const ProtobufCMessage *msg);
const struct inet_addr *repl_ep_addr(const struct op *op, uint32_t ep);
bool repl_is_self(const struct op *op, uint32_t ep);
/* Index of `dc` in the strategy's datacenters, -1 if none. */
int repl_strategy_dc_index(const struct ring_strategy *s, const char *dc);
/* This node's datacenter, NULL when it is not in the ring. */
const char *repl_local_dc(const struct ring *ring);

/* Local replica completions (repl_store_ops.apply) for request `id`. */
struct local_ctx *repl_local_ctx_new(struct repl *r, uint64_t id);
/* This node's partitions of (start, end]: the store's index_scan for an
 * index restriction `ix` (when it has one), else its scan. */
void repl_store_range(struct repl *r, const uint8_t table_id[16], int64_t start,
		      int64_t end, const struct storage_read_cmd *cmd,
		      const struct repl_index_expr *ix, uint32_t max,
		      repl_store_read_fn done, void *arg);
void repl_local_apply_done(void *arg, int status, enum err_code code);

/* An answer for request `id` (remote or local). Takes ownership of
 * `frags`. */
void repl_on_answer(struct repl *r, uint64_t id, bool ok, const char *error,
		    const uint8_t *digest, struct storage_mutation **frags,
		    size_t n, bool cut);

/* ---- coord_write.c: writes and the coordinator side of the batchlog ------ */

void repl_write_answer(struct op *op, struct target *t, bool ok,
		       const char *error);
void repl_write_timeout(struct op *op);
/* The answer of batchlog endpoint `k` (op->bl_ep[k]). */
void batchlog_answer(struct op *op, size_t k, bool ok, const char *why);

/* repl_write for a counter leader: the local replica has applied `muts`
 * already; it counts as acknowledged and is not written again. */
void repl_write_self_applied(struct repl *r, const struct repl_mutation *muts,
			     size_t n, int cl, enum repl_write_type wt,
			     const uint8_t *trace_session,
			     repl_write_done_fn done, void *arg);

/* ---- coord_counter.c: counter writes --------------------------------------
 */

struct ctr_state;
/* Serves REPL_VERB_COUNTER / REPL_VERB_COUNTER_RSP; false for other verbs. */
bool repl_counter_receive(struct repl *r, const struct inet_addr *from,
			  uint32_t verb, const uint8_t *msg, size_t len);
/* Frees the counter state (pending requests are dropped). */
void repl_counter_free(struct repl *r);

/* ---- coord_read.c: single-partition and range reads ---------------------- */

/* Takes ownership of `frags`. */
void repl_read_answer(struct op *op, struct target *t, bool ok,
		      const char *error, const uint8_t *digest,
		      struct storage_mutation **frags, size_t n);
void repl_read_timeout(struct op *op);
/* Takes ownership of `frags`. */
void repl_range_answer(struct op *op, struct target *t, bool ok,
		       const char *error, struct storage_mutation **frags,
		       size_t n, bool cut);
void repl_range_timeout(struct op *op);

/* Shared by the read files: coord_read.c (single partitions), coord_range.c
 * (range steps), coord_protect.c (replica filtering protection),
 * coord_read_wire.c (the messages). */
/* Local replica completions of reads and scans for request id `c->id`. */
void repl_local_read_done(void *arg, int status, enum err_code code,
			  struct storage_mutation **frags, size_t n, bool cut);

/* Counts the tombstones of each replica's answer against
 * tombstone_warn_threshold (single reads: its fragment; range steps: its
 * fragments together). */
void repl_read_count_tombstones(struct op *op);

/* "Sending read-repair-mutation to Full(/<peer>,(l,r])": a traced read
 * repairs the replica `ep` of `token`. */
void repl_read_trace_repair(struct op *op, uint32_t ep, int64_t token);

/* Live replicas of `token` sorted by proximity; the first `want` are the
 * ones to contact. Fills `res` with Unavailable when too few are alive. */
int repl_read_plan(struct op *op, const struct ring_strategy *s, int64_t token,
		   bool spares, struct repl_result *res);

/* Sends contact `i` its READ (data, or a digest when `digest`); the
 * local replica reads through the store (coord_read_wire.c). */
void repl_read_send(struct op *op, size_t i, bool digest);

/* Sends contact `i` the step's RANGE request (with its index
 * expression); the local replica scans through the store. */
void repl_range_send(struct op *op, size_t i);

/* Token order of two partitions' fragments. */
int repl_frag_cmp(const struct storage_mutation *a,
		  const struct storage_mutation *b);

/* Answers a range step's caller with `res` and the merged fragments. */
void repl_range_reply(struct op *op, const struct repl_result *res,
		      struct storage_mutation **frags, size_t n, int64_t resume,
		      bool finished);

/* The earliest point where a cut contact stopped (NULL: none was cut):
 * past it some contact may hold partitions it did not send. */
const struct storage_mutation *repl_range_bound(const struct op *op);

/* Fails a range step for want of memory. */
void repl_range_fail_nomem(struct op *op);

/* The rows held for protection passed rfp_fail_rows: the step fails
 * as Cassandra's query does (OverloadedException; the node words the
 * message with the query). */
void repl_protect_fail_cached(struct op *op);

/* A protection read for contact `i` of the partitions op->pk[first ..
 * first + n) (each its rows, or whole): a new target after the contacts,
 * sent now as one message (cmd's key the first, ReadReq.keys the rest,
 * ReadReq.cmds the rows' commands); the local replica reads its one
 * partition (n is 1 then) through the store. 0, or -1 with ERR_NOMEM. */
int repl_protect_read(struct op *op, size_t i, size_t first, size_t n);

/* Replica filtering protection, the reads: every contact answered an
 * indexed range read with its own candidates (rows, or partitions);
 * each row (up to the bound) that some contact returned and another did
 * not is read from that other, whose version may be newer and no longer
 * match (or deleted), a partition's such rows together: up
 * to REPL_PROTECT_BATCH partitions a message to a remote contact, one
 * store read each for the local one. 0 (op->outstanding > 0 when reads
 * were sent), 1 when the rows held passed rfp_fail_rows (nothing sent),
 * or -1 with ERR_NOMEM. */
int repl_protect(struct op *op);

/* Replica filtering protection, the merge: each protection read's
 * versions join its contact's list (in token order, merged with the
 * contact's own fragment of the partition), so the merge and the repairs
 * see every contact's version of every row. 0 or -1 (ERR_NOMEM). */
int repl_protect_merge(struct op *op);

/* ---- coord_truncate.c: truncates ----------------------------------------- */

void repl_truncate_answer(struct op *op, struct target *t, bool ok,
			  const char *error);
void repl_truncate_timeout(struct op *op);

/* ---- replica.c: the replica side and batchlog replay --------------------- */

/* Serves a request verb (mutation, read, range, batchlog store/remove)
 * from another node's coordinator; false when `verb` is not one. */
bool repl_serve(struct repl *r, const struct inet_addr *from, uint32_t verb,
		const uint8_t *msg, size_t len);
/* The batchlog replay timer (armed by repl_new when a batchlog is kept). */
void repl_replay_tick(void *arg);

#endif
