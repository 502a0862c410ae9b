/*
 * Hinted handoff: the hint store and the hint dispatcher.
 *
 * When a replica does not acknowledge a write (it is down, or it timed out),
 * the coordinator keeps the mutation as a hint for that replica and replays
 * it when the replica is back. Hints are stored per target host in
 * append-only files in `hints_directory` (format in docs/hints.md):
 *
 *   <host-uuid>-<seq>.hints   file header, then records:
 *     be32 length | be32 crc(length) | be64 created_us, mutation | be32 crc
 *   hints.state               when each host was first seen down
 *
 * Delivery replays a host's files in order through the caller's async
 * `send` hook, with at most `max_in_flight` hints unacknowledged and the
 * bytes throttled to `throttle` per second (shared by every target). A file
 * is deleted once all its records are acknowledged. A failed send stops the
 * delivery to that host; the next attempt (host up, or the periodic check)
 * starts again at the first unacknowledged record. Delivery is
 * at-least-once: mutations carry their own timestamps, so a replayed
 * duplicate is harmless.
 *
 * Threads: every function runs on the env's loop thread, and the hooks are
 * called there. Blocking disk work (reading hint files, fsync of a finished
 * file, rewriting the state file) goes through the `offload` hook; when it is
 * NULL that work runs inline on the loop (tests, tools). Still done on the
 * loop in every case: write(2) of appended hints, opening, creating and
 * unlinking files, and hints_open's scan of existing files (startup).
 *
 * Durability: appended hints are not fsynced on the store path; a file is
 * fsynced when it is closed for writing (rotation, delivery start, close).
 * A crash may lose the unsynced tail, as in Cassandra; a torn last record
 * is discarded on open. Delivery progress inside a file is not persisted:
 * after a restart a partly delivered file is replayed from its start.
 */
#ifndef CASSINI_REPLICATION_HINTS_H
#define CASSINI_REPLICATION_HINTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct conf;
struct env;
struct hints;

/* A send finished: status 0 = the target acknowledged the mutation, -1 =
 * it failed or timed out. */
typedef void (*hints_done_fn)(void *done_arg, int status);

/*
 * Sends one hinted mutation to `host_id` as a normal mutation request.
 * The mutation bytes (storage_mutation_encode's, original timestamps
 * inside) are borrowed for the duration of the call: copy them. Returns 0
 * and later calls done(done_arg, status) exactly once, on the loop thread
 * (it may call it before returning); or returns -1 and never calls it.
 */
typedef int (*hints_send_fn)(void *arg, const uint8_t host_id[16],
			     const uint8_t *mutation, size_t len,
			     int64_t created_us, hints_done_fn done,
			     void *done_arg);

/* Whether the failure detector thinks `host_id` is up; the periodic check
 * delivers only to hosts it says are alive. */
typedef bool (*hints_alive_fn)(void *arg, const uint8_t host_id[16]);

/*
 * Runs run(job) off the loop (a worker thread), then done(job) on the loop
 * thread. run touches only the job. If it cannot defer (no memory), it may
 * run both inline.
 */
typedef void (*hints_offload_fn)(void *arg, void (*run)(void *job),
				 void (*done)(void *job), void *job);

struct hints_options {
	struct env *env; /* clocks, timers, files; must outlive the store */
	const char *dir; /* hints_directory; created if missing; copied */
	bool enabled;    /* hinted_handoff_enabled */
	/* hinted_handoff_disabled_datacenters (copied) */
	const char *const *disabled_dcs;
	size_t disabled_dc_count;
	uint64_t max_window_ms;     /* max_hint_window */
	uint64_t max_size_per_host; /* bytes on disk per target; 0 = no cap */
	uint64_t throttle;          /* bytes/s for all targets; 0 = none */
	uint64_t max_file_size;     /* a file is rotated past this; 128 MiB */
	uint32_t max_in_flight;     /* unacknowledged sends per host; 128 */
	uint64_t check_interval_ms; /* periodic delivery check; 10 s */
	size_t read_chunk;          /* bytes per read step; 128 KiB */

	hints_send_fn send;       /* required */
	hints_alive_fn alive;     /* NULL: hosts not marked down are alive */
	void *hook_arg;           /* for send and alive */
	hints_offload_fn offload; /* NULL: blocking work runs inline */
	void *offload_arg;
};

/* Defaults as in conf (hints enabled, 3 h window, 1024 KiB/s, no cap);
 * env, dir and send still to set. */
void hints_options_default(struct hints_options *o);
/* Defaults, then the conf keys. Strings are borrowed from `c`, which must
 * outlive hints_open (the store copies them). */
void hints_options_from_conf(struct hints_options *o, const struct conf *c,
			     struct env *env);

/*
 * Opens the store: creates the directory, reads hints.state, finds and
 * scans every hint file (counting records, discarding a torn tail,
 * skipping and counting corrupt records with a warning that names the file
 * and offset) and arms the periodic check. Blocks on disk: call at startup.
 * NULL with err set.
 */
struct hints *hints_open(const struct hints_options *o);
/*
 * Stops delivery, fsyncs and closes the files being written, and writes the
 * state. Blocks. Sends or offloaded jobs still outstanding keep the memory
 * alive until their done callbacks run (which then do nothing); run the
 * loop (or drain the workers' completions) to let them finish.
 */
void hints_close(struct hints *h);

/* ---- storing --------------------------------------------------------------
 */

/*
 * Whether a write that `host_id` (in datacenter `dc`, NULL if unknown)
 * missed should become a hint: handoff enabled, dc not disabled, and the
 * host not down for longer than the window at wall time `now_us`.
 */
bool hints_should_hint(struct hints *h, const uint8_t host_id[16],
		       const char *dc, int64_t now_us);

/*
 * Appends a hint for `host_id`: the mutation bytes (copied) created at wall
 * time `created_us`. One write(2), no fsync. Fails with ERR_UNAVAILABLE
 * when handoff is disabled or the host has been down longer than the
 * window (counted as dropped_window), ERR_OVERLOADED past
 * max_size_per_host (dropped_size), ERR_INVALID for an empty or oversized
 * mutation, or an I/O error. The dc check is hints_should_hint's.
 */
int hints_store(struct hints *h, const uint8_t host_id[16],
		const uint8_t *mutation, size_t len, int64_t created_us);

/* ---- handing over (decommission) ------------------------------------------
 */

/* A hand-over ended: ok when every hint went (the store is empty). */
typedef void (*hints_handed_fn)(void *arg, bool ok);

/*
 * A node leaving the ring hands its hints over to another node, which
 * keeps them for their targets (Cassandra's decommission does the same):
 * every host's hints are sent through `via` (with via_arg) instead of the
 * `send` hook, whatever the state of their targets and even while
 * delivery is paused, and deleted once acknowledged; hints stored
 * meanwhile go too. `done` runs once, on the loop (before this returns
 * when there is nothing to hand over), with ok false after a failed send
 * (what was not handed over stays). 0, or -1: ERR_EXISTS while one runs,
 * ERR_CLOSED.
 */
int hints_hand_over(struct hints *h, hints_send_fn via, void *via_arg,
		    hints_handed_fn done, void *arg);
/* Forgets the running hand-over (its `done` never runs): sends go to the
 * targets again. For an owner that goes away first. */
void hints_hand_over_cancel(struct hints *h);

/* ---- what the failure detector and the ring say ---------------------------
 */

/* The host was convicted at wall time `since_us`. The first down time is
 * kept (persisted) until hints_host_up; the window counts from it.
 * Delivery to it stops. */
void hints_host_down(struct hints *h, const uint8_t host_id[16],
		     int64_t since_us);
/* The host is up: forget its down time and start delivering its hints. */
void hints_host_up(struct hints *h, const uint8_t host_id[16]);
/* The host left the ring: delete its hints and forget it. */
void hints_host_removed(struct hints *h, const uint8_t host_id[16]);

/* ---- operator controls (cassini-tool) -------------------------------------
 */

/* enablehandoff / disablehandoff: whether new hints are stored. */
void hints_set_enabled(struct hints *h, bool enabled);
/* pausehandoff / resumehandoff: whether hints are delivered. */
void hints_set_paused(struct hints *h, bool paused);
/* setmaxhintwindow */
void hints_set_max_window(struct hints *h, uint64_t max_window_ms);
/* sethintedhandoffthrottlekb (bytes/s here; 0 = unthrottled) */
void hints_set_throttle(struct hints *h, uint64_t bytes_per_sec);
/* disablehintsfordc / enablehintsfordc. 0, or -1 (ERR_NOMEM). */
int hints_set_dc_enabled(struct hints *h, const char *dc, bool enabled);
/* truncatehints: deletes every stored hint. */
void hints_truncate_all(struct hints *h);

/* ---- stats (listpendinghints) ---------------------------------------------
 */

struct hints_host_stats {
	uint8_t host_id[16];
	uint64_t files;
	uint64_t bytes;        /* on disk, including records already sent */
	uint64_t records;      /* stored and not yet deleted */
	int64_t oldest_us;     /* creation time of the oldest hint */
	int64_t newest_us;     /* and of the newest */
	int64_t down_since_us; /* 0 when not known down */
	bool delivering;
};

struct hints_stats {
	uint64_t stored;
	uint64_t delivered;        /* acks; a resent hint counts again */
	uint64_t dropped_window;   /* refused: host down past the window */
	uint64_t dropped_size;     /* refused: max_size_per_host */
	uint64_t dropped_disabled; /* refused: handoff disabled */
	uint64_t corrupt;          /* corrupt records or regions skipped */
	uint64_t send_failures;    /* deliveries stopped by a failed send */
	uint64_t hosts;            /* hosts with hints on disk */
	uint64_t in_flight;        /* sends awaiting their done callback */
};

void hints_get_stats(struct hints *h, struct hints_stats *out);
/* Fills up to `cap` entries, one per host with hints, in no particular
 * order; returns how many hosts have hints (may exceed cap). */
size_t hints_list_pending(struct hints *h, struct hints_host_stats *out,
			  size_t cap);

#endif
