/*
 * Private to gossip/: the decoded forms of gossip messages (gossip_msg.c
 * turns protobuf-c bytes into these and back) and the failure detector.
 */
#ifndef CASSINI_GOSSIP_INTERNAL_H
#define CASSINI_GOSSIP_INTERNAL_H

#include "common/buf.h"
#include "common/inet.h"
#include "gossip/gossip.h"

#include <stddef.h>
#include <stdint.h>

/* Caps on what a decoder accepts, checked before anything is allocated. */
#define GOSSIP_MAX_ENDPOINTS 100000u
#define GOSSIP_MAX_VALUE_LEN 65536u
#define GOSSIP_MAX_NAME_LEN  256u
/* Older heartbeat ages are sent and taken as this (the failure detector
 * has convicted long before). */
#define GOSSIP_MAX_HEARTBEAT_AGE_US 60000000u

struct gossip_digest {
	struct inet_addr addr;
	int64_t generation;
	int32_t max_version;
};

struct gossip_wire_app {
	uint32_t key;      /* < GOSSIP_STATE_COUNT after validation */
	const char *value; /* borrowed from the decoded message */
	int32_t version;
};

struct gossip_wire_state {
	struct inet_addr addr;
	int64_t generation;
	int32_t heartbeat;
	uint32_t beats;  /* heartbeats of this generation; 0: not sent */
	uint32_t age_us; /* how long ago the heartbeat was born */
	size_t count;
	struct gossip_wire_app *apps;
};

/* A decoded message. Strings point into storage owned by the struct; free
 * with gossip_msg_free. */
struct gossip_msg {
	uint32_t verb;
	const char *cluster_name; /* SYN */
	const char *partitioner;  /* SYN */
	size_t digest_count;      /* SYN digests, ACK requests */
	struct gossip_digest *digests;
	size_t state_count; /* ACK, ACK2 */
	struct gossip_wire_state *states;
	void *pb; /* the unpacked protobuf, opaque */
};

/* Decodes `verb` (SYN, ACK or ACK2) from untrusted bytes. Unknown
 * application-state keys are dropped; bad addresses, negative versions and
 * oversize lists fail with ERR_PROTOCOL. */
int gossip_msg_decode(uint32_t verb, const uint8_t *data, size_t len,
		      struct gossip_msg *out);
void gossip_msg_free(struct gossip_msg *m);

/* Encoders append the packed message to `out`. */
int gossip_msg_encode_syn(const char *cluster, const char *partitioner,
			  const struct gossip_digest *d, size_t n,
			  struct buf *out);
int gossip_msg_encode_ack(const struct gossip_digest *req, size_t nreq,
			  const struct gossip_wire_state *st, size_t nst,
			  struct buf *out);
int gossip_msg_encode_ack2(const struct gossip_wire_state *st, size_t nst,
			   struct buf *out);

/* ---- phi-accrual failure detector (gossip_fd.c) ------------------------
 *
 * Cassandra's ArrivalWindow over heartbeat intervals from one endpoint, at
 * most `cap` samples (the oldest drop out), intervals above
 * `max_interval_us` ignored. The first report seeds the window with
 * `initial_us`. phi = (now - last) / mean, scaled by 1/ln(10).
 *
 * Unlike Cassandra, a report says when the heartbeat was *born* (our clock,
 * estimated from the age gossip carries with it) and its number, so the
 * samples measure the peer's heartbeat interval rather than the jitter of
 * gossip's spread, and phi counts from the peer's last heartbeat rather
 * than from when its news happened to reach us.
 */
struct gossip_fd_window {
	uint32_t *samples; /* microseconds, ring buffer grown lazily */
	uint32_t cap, len, head, alloc;
	uint64_t sum;
	uint64_t last_us;    /* latest evidence of life; 0: no report yet */
	uint64_t initial_us; /* the starting guess, counted until warm */
	uint64_t base_us;    /* birth of the last heartbeat sampled */
	uint32_t base_beats; /* its number (0: unnumbered) */
	bool based;          /* base_* hold a heartbeat */
};

/* Measured intervals after which the starting guess stops counting. */
#define GOSSIP_FD_WARMUP 8u

void gossip_fd_init(struct gossip_fd_window *w, uint32_t cap);
void gossip_fd_free(struct gossip_fd_window *w);
/* A new incarnation: its heartbeats are numbered afresh. Samples stay. */
void gossip_fd_restart(struct gossip_fd_window *w);
/* Records heartbeat number `beats` (0: unnumbered, counts as the next one),
 * born at `born_us`. Older or repeated heartbeats change nothing. Returns 0
 * or -1 (ERR_NOMEM, window unchanged). */
int gossip_fd_report(struct gossip_fd_window *w, uint64_t born_us,
		     uint32_t beats, uint64_t initial_us,
		     uint64_t max_interval_us);
/* Evidence of life that is not a heartbeat (an ECHO answer): phi counts
 * from `now_us`; no sample. */
void gossip_fd_touch(struct gossip_fd_window *w, uint64_t now_us);
/* Cassandra-scaled phi; 0 before the first report. */
double gossip_fd_phi(const struct gossip_fd_window *w, uint64_t now_us);
double gossip_fd_mean_us(const struct gossip_fd_window *w);

#endif
