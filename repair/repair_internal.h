/*
 * repair/ internals: the decoded form of repair.proto's messages, shared by
 * the state machine (repair.c) and the only file that sees protobuf-c
 * (repair_msg.c).
 */
#ifndef CASSINI_REPAIR_REPAIR_INTERNAL_H
#define CASSINI_REPAIR_REPAIR_INTERNAL_H

#include "common/buf.h"
#include "repair/merkle.h"
#include "repair/repair.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Caps on what a decoded message may hold. */
#define REPAIR_MAX_RANGES 65536
#define REPAIR_MAX_ROWS   (1u << 24)
#define REPAIR_ID_MAX     65536

/* The tree exchange (repair.proto): its version, the levels a VALIDATE
 * answer carries at most, the levels a TREE request may ask below each
 * node, and the node values a TREE answer may hold. */
#define REPAIR_TREE_VERSION 1
/* The levels a coordinator asks in VALIDATE: 2^6 values per replica, so
 * a range in sync costs 512 bytes per replica and a diverging one saves
 * six round trips. */
#define REPAIR_TOP_LEVELS      6
#define REPAIR_MAX_TOP_LEVELS  10
#define REPAIR_MAX_TREE_LEVELS 8
#define REPAIR_MAX_TREE_VALUES ((size_t)1 << 21)
#define REPAIR_MAX_NODES       ((size_t)1 << MERKLE_MAX_DEPTH)

struct repair_row {
	struct slice key, id;
	uint8_t digest[16];
};

/* A request or a response; slices borrow `pb` (decoded) or the caller's
 * memory (to encode). */
struct repair_msg {
	uint64_t session;
	uint32_t task;
	uint8_t table_id[16];
	struct merkle_range *ranges;
	size_t nranges;
	uint32_t max_depth;
	bool exclusive; /* VALIDATE: refuse if busy with another coordinator */
	struct repair_row *rows;
	size_t nrows;
	struct slice *frags;
	size_t nfrags;
	uint32_t levels; /* VALIDATE, TREE: levels wanted / answered */
	uint32_t level;  /* TREE, ROWS, FETCH: the level of `nodes` */
	uint32_t *nodes; /* ascending indices < 2^level (owned if decoded) */
	size_t nnodes;
	uint32_t tree_version;  /* VALIDATE and its answer */
	bool incremental;       /* VALIDATE, APPLY: the pending data */
	int64_t repaired_at;    /* COMMIT */
	struct slice table_ids; /* PREPARE, COMMIT, FAIL: 16 bytes each */
	uint64_t sstables;      /* PREPARE, COMMIT answers */
	bool ok;
	char error[256];
	uint64_t partitions;
	uint32_t depth;      /* VALIDATE answer: the kept tree's depth */
	struct slice hashes; /* VALIDATE, TREE answers: 8-byte values */
	void *pb; /* the unpacked protobuf, freed by repair_msg_free */
};

/* The `nodes` form of repair.proto: appends the runs of v[0..n)
 * (ascending) to `out`; decodes untrusted bytes into *out (malloc'd,
 * caller frees; NULL when *n is 0): ERR_PROTOCOL for anything malformed,
 * an index of 2^level or more, more than REPAIR_MAX_NODES. */
int repair_nodes_encode(const uint32_t *v, size_t n, struct buf *out);
int repair_nodes_decode(const uint8_t *p, size_t len, uint32_t level,
			uint32_t **out, size_t *n);

/* Appends the encoding to `out`. */
int repair_msg_pack_request(const struct repair_msg *m, struct buf *out);
int repair_msg_pack_response(const struct repair_msg *m, struct buf *out);
/* Decodes untrusted bytes into *out (zeroed first): ERR_PROTOCOL for
 * malformed input (a table id not of 16 bytes, a digest not of 16 bytes,
 * a row id past REPAIR_ID_MAX, counts past the caps, a level past
 * MERKLE_MAX_DEPTH, a bad node list, a tree answer whose levels exceed
 * its depth or whose values are not whole). Free with repair_msg_free
 * even on failure. */
int repair_msg_unpack_request(const uint8_t *p, size_t len,
			      struct repair_msg *out);
int repair_msg_unpack_response(const uint8_t *p, size_t len,
			       struct repair_msg *out);
void repair_msg_free(struct repair_msg *m);

/* A message to this node itself, delivered from a zero-delay timer. */
struct repair_local_msg {
	struct repair_local_msg *next;
	uint32_t verb;
	size_t len;
	uint8_t data[];
};

struct repair_session;

/* A participant's note that a coordinator's session repairs a range. */
struct repair_claim {
	struct inet_addr coordinator;
	uint64_t session;
	uint8_t table_id[16];
	struct merkle_range range;
	uint64_t expires_us; /* env_mono_us; 0: free slot */
	/* The tree VALIDATE built, kept for TREE requests until the claim
	 * ends (RELEASE, expiry, a newer session of the coordinator); owned.
	 * `tree_bytes` is reserved in kept_bytes from the end of the scan
	 * (the tree is folded off the loop meanwhile). */
	struct merkle_tree *tree;
	size_t tree_bytes;
};

#define REPAIR_MAX_CLAIMS 64

/* A task a coordinator released here, remembered for a claim's lifetime:
 * its RELEASE may overtake its VALIDATE (a reconnect between the two, or a
 * simulated link that reorders), which must then not claim the range. */
struct repair_released {
	struct inet_addr coordinator;
	uint64_t session;
	uint8_t table_id[16];
	struct merkle_range range;
	uint64_t until_us; /* env_mono_us; 0: free slot */
};

struct repair {
	struct env *env;
	struct repair_options o;
	const struct repair_store_ops *store;
	void *store_arg;
	struct repair_session *session; /* the running one, or NULL */
	uint64_t next_session;
	struct repair_local_msg *local_head, *local_tail;
	struct env_timer *local_timer;
	struct repair_claim claims[REPAIR_MAX_CLAIMS];
	struct repair_released released[REPAIR_MAX_CLAIMS]; /* a ring */
	size_t released_next;
	size_t kept_bytes;             /* the claims' trees */
	struct env_timer *claim_timer; /* frees trees of expired claims */
	size_t jobs; /* participant scans and applies in flight */
	/* incremental sessions this node takes part in (repair_local.c) */
	struct repair_local *locals[REPAIR_MAX_LOCAL];
	size_t nlocals;
	struct env_timer *sweep_timer; /* fails timed-out local sessions */
	bool deleting; /* repair_delete ran; the last job frees */
	/* the outbound stream throttle: when the bucket is empty again (the
	 * mono time the bytes sent so far are paid for), and its counters */
	uint64_t stream_free_us;
	struct repair_stream_stats stream;
	/* repair_states.c: the last sessions' states, a ring */
	struct repair_state *states[REPAIR_MAX_STATES];
	size_t states_next;
	struct repair_counts counts;
};

/* repair_states.c: frees every kept state (repair_free). */
struct repair_state;
void repair_states_free(struct repair *r);

/* Sends `b` to `to` (to this node itself through the local queue). */
int repair_send(struct repair *r, const struct inet_addr *to, uint32_t verb,
		const struct buf *b);
/* The non-wrapping pieces of (start, end], in token order: 0 to 2. */
size_t repair_pieces(struct merkle_range r, struct merkle_range out[2]);

/* The participant side (repair_replica.c): a request. */
void repair_replica_receive(struct repair *r, const struct inet_addr *from,
			    uint32_t verb, const uint8_t *msg, size_t len);
/* A job finished: frees `r` when it was deleted meanwhile. */
void repair_job_release(struct repair *r);

/* -1 (ERR_EXISTS, "replica busy: ...") while a live claim of a
 * coordinator other than `from` exists: an exclusive PREPARE waits. */
int repair_claims_busy(struct repair *r, const struct inet_addr *from);
/* Ends claim c (frees its tree). */
void repair_claim_end(struct repair *r, struct repair_claim *c);
/* Ends the expired claims and arms the timer for the next expiry. */
void repair_claims_sweep(void *arg);

/* Whether (a) and (b), wrap-around aware, share a token. */
bool repair_ranges_overlap(struct merkle_range a, struct merkle_range b);

/* repair_local.c: the participant's consistent sessions. */
struct repair_local;
void repair_local_receive(struct repair *r, const struct inet_addr *from,
			  uint32_t verb, const struct repair_msg *q);
/* The PREPARED (or REPAIRING) session of `from`'s session `id`, now
 * REPAIRING; NULL (error set) when there is none. */
struct repair_local *repair_local_repairing(struct repair *r,
					    const struct inet_addr *from,
					    uint64_t id);
const uint8_t *repair_local_uuid(const struct repair_local *l);
void repair_locals_free(struct repair *r);
/* Fails the local sessions past their timeout (or whose coordinator
 * restarted); rearms itself. */
void repair_locals_sweep(void *arg);

/* The coordinator side (repair.c): a response. */
void repair_session_receive(struct repair *r, const struct inet_addr *from,
			    uint32_t verb, const uint8_t *msg, size_t len);

#endif
