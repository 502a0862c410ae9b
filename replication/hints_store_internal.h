/*
 * Private to the hint store: its structures, shared by hints.c (the store:
 * files, state, storing, membership, controls, stats) and hints_deliver.c
 * (the dispatcher: throttle, delivery, hand-over).
 */
#ifndef CASSINI_REPLICATION_HINTS_STORE_INTERNAL_H
#define CASSINI_REPLICATION_HINTS_STORE_INTERNAL_H

#include "common/buf.h"
#include "common/env.h"
#include "replication/hints.h"
#include "replication/hints_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hint_file {
	uint64_t seq;
	uint64_t size; /* sound bytes; readers stop here */
	uint64_t records;
	int64_t oldest_us;
	int64_t newest_us;
	uint64_t damage_hwm; /* damage below this was counted already */
	struct env_file *wf; /* open for appending, else NULL */
	struct hint_file *next;
};

struct hint_host;

/* One send awaiting its callback. */
struct hint_slot {
	struct hint_host *host;
	uint64_t epoch; /* the host's epoch when sent */
	uint64_t start;
	uint64_t end;
	bool done;
	bool ok;
};

struct hint_host {
	struct hints *h;
	uint8_t id[16];
	char idtext[37];
	struct hint_file *files; /* ascending seq */
	uint64_t file_count;
	uint64_t bytes;
	uint64_t records;
	int64_t down_since_us; /* 0 = not known down */
	bool removed;          /* left the ring; freed once unreferenced */

	/* delivery */
	bool delivering;
	bool failed;     /* stop sending; reset once outstanding is 0 */
	bool pumping;    /* inside host_pump: callbacks must not re-enter */
	bool want_start; /* a start came while the last attempt drained */
	struct hint_file *cur;
	struct hints_cursor pos;
	uint64_t acked_off; /* start of the first unacknowledged record */
	uint8_t *chunk;     /* file bytes [chunk_off, chunk_off + chunk_len) */
	uint64_t chunk_off;
	size_t chunk_len;
	bool read_busy;
	uint64_t epoch; /* bumped when the current file changes */
	struct hint_slot *ring;
	uint32_t head;        /* oldest slot */
	uint32_t count;       /* slots in use */
	uint32_t outstanding; /* sends awaiting a callback */
	uint32_t jobs;        /* offloaded reads referencing the host */
};

struct hints {
	struct hints_options o;
	struct env *env;
	char *dir;
	char **dcs; /* disabled datacenters */
	size_t dc_count;
	bool enabled;
	bool paused;
	bool closing;
	uint64_t max_window_ms;
	uint64_t throttle;

	struct hint_host **hosts;
	size_t host_count;
	size_t host_cap;
	size_t rr; /* round-robin start for pumping every host */
	uint64_t next_seq;
	struct buf scratch;

	double tokens; /* throttle bucket, bytes */
	uint64_t tokens_at;
	struct env_timer *throttle_timer;
	bool throttle_armed;
	struct env_timer *check_timer;

	bool state_dirty;
	bool state_busy;

	uint64_t refs; /* outstanding sends and offloaded jobs */
	struct hints_stats st;

	/* hints_hand_over: while ho_send is set, every send goes through
	 * it (to another node) instead of o.send (to the target). */
	hints_send_fn ho_send;
	void *ho_arg;
	hints_handed_fn ho_done;
	void *ho_done_arg;
	bool ho_failed;
};

/* hints.c */
void hints_file_path(const struct hints *h, const struct hint_host *x,
		     uint64_t seq, char *out, size_t cap);
void hints_host_maybe_free(struct hint_host *x);
/* Drops a reference; true when that freed the store (closed). */
bool hints_release(struct hints *h);
void hints_offload(struct hints *h, void (*run)(void *), void (*done)(void *),
		   void *job);
/* The file stops taking appends (synced and closed, off the loop). */
void hints_file_retire(struct hints *h, struct hint_file *f);

/* hints_deliver.c */
void hints_host_pump(struct hint_host *x);
/* Starts delivering to x unless it is busy, paused or has nothing. */
bool hints_host_start(struct hint_host *x);
void hints_host_reset(struct hint_host *x);
void hints_pump_all(struct hints *h);
void hints_on_throttle(void *arg);
void hints_on_check(void *arg);
double hints_throttle_burst(const struct hints *h);
/* A send failed: the host stops sending (count: it was a send failure). */
void hints_host_fail(struct hint_host *x, bool count);
void hints_host_clear_cur(struct hint_host *x);
/* After the host's sends or state changed: back to idle when a failed
 * attempt has drained; ends a hand-over; frees a removed host. */
void hints_host_after(struct hint_host *x);
/* Starts delivery to every host with hints that is alive and idle. */
void hints_start_eligible(struct hints *h);

#endif
