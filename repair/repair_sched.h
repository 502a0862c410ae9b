/*
 * Scheduled repair: cycles of segment sessions, run inside every node.
 *
 * Each node repairs only the ranges it is primary for (as `repair -pr`),
 * so the cluster covers the ring once per cycle without a leader. For
 * each table the node's primary ranges are cut into segments (at most
 * `partitions_per_segment` estimated partitions, at least
 * `segments_per_node` in all); a segment is one ordinary repair session
 * (repair.h) over one table and one subrange, started `exclusive`: every
 * replica refuses it while it takes part in another coordinator's task,
 * so a replica is in one scheduled segment at a time (Reaper's rule) and
 * a segment never overlaps a manual session. Such a refusal, a local
 * session already running, or a replica down postpones the segment: it
 * is not a failure.
 *
 * One segment runs at a time on a node. After a segment that took d the
 * scheduler sleeps d*(1-intensity)/intensity. A failed or timed-out
 * segment is retried after `retry_delay`; after `segment_retries` failures
 * it is split in two (up to REPAIR_SCHED_MAX_SPLITS times), as a segment
 * that keeps failing is usually one that is too big.
 *
 * A table's deadline is the start of its last completed cycle (or when the
 * scheduler first saw it) plus gc_grace_fraction * gc_grace_seconds: its
 * cycle must finish by then or tombstones may be purged on some replicas
 * before all have them. Work is ordered by deadline, earliest first; a
 * table is "at risk" when its remaining segments, at the rate observed so
 * far (work plus sleep), cannot finish before its deadline.
 *
 * The state (current cycles with each segment's outcome, the last
 * completed cycles, pauses) is encoded by repair_sched_encode and handed
 * to ops->save after every change; repair_sched_load restores it, so a
 * restart resumes a cycle at its next unfinished segment.
 *
 * A state machine over the env seam (clock, timers, random), like
 * repair.c; it runs on the env's loop thread and never blocks.
 */
#ifndef CASSINI_REPAIR_REPAIR_SCHED_H
#define CASSINI_REPAIR_REPAIR_SCHED_H

#include "common/buf.h"
#include "common/env.h"
#include "common/inet.h"
#include "repair/repair.h"
#include "ring/token.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A segment that keeps failing is split at most this many times. */
#define REPAIR_SCHED_MAX_SPLITS 6
/* Completed cycles remembered per table. */
#define REPAIR_SCHED_HISTORY  8
#define REPAIR_SCHED_NAME_MAX 160

/* A time window, minutes of the UTC day: [start, end), crossing midnight
 * when end <= start (start == end: the whole day). */
struct repair_sched_window {
	uint16_t start, end;
};

/* "HH:MM-HH:MM". 0 or -1 (ERR_CONFIG, a message naming the text). */
int repair_sched_window_parse(const char *text,
			      struct repair_sched_window *out);
/* Whether `wall_us` falls in one of the windows; no windows: always. */
bool repair_sched_windows_open(const struct repair_sched_window *w, size_t n,
			       int64_t wall_us);

/* Per-table tuning; unset fields keep the section's values. */
struct repair_sched_tuning {
	int enabled;                    /* -1 unset, 0, 1 */
	double intensity;               /* 0 unset, else (0, 1] */
	int64_t segments_per_node;      /* -1 unset */
	int64_t partitions_per_segment; /* 0 unset */
	int64_t bytes_per_segment;      /* 0 unset */
	int incremental; /* -1 unset (full), 0 full, 1 incremental sessions */
};

/* "ks.table key=value ..." (keys enabled, incremental, intensity,
 * segments_per_node, partitions_per_segment, bytes_per_segment; bytes as a
 * number with an optional KiB, MiB or GiB). The name goes to `name` (cap
 * bytes). 0 or -1 (ERR_CONFIG, a message naming the bad part). */
int repair_sched_tuning_parse(const char *text, char *name, size_t cap,
			      struct repair_sched_tuning *out);

/* What a table holds in the ranges to cut, and the segment limits. */
struct repair_sched_plan_in {
	uint64_t partitions;        /* estimated */
	uint64_t bytes;             /* estimated data bytes */
	uint64_t per_segment;       /* most partitions in a segment */
	uint64_t bytes_per_segment; /* most bytes in a segment; 0: any */
	uint64_t segments_per_node; /* at least this many in all */
};

/* Cuts `ranges` (holding `in`'s partitions and bytes, spread by token
 * width) into segments appended to `out`: each range into
 * max(ceil(its partitions / per_segment), ceil(its bytes /
 * bytes_per_segment), its share of segments_per_node rounded up, 1)
 * equal pieces. 0 or -1 (ERR_NOMEM). */
int repair_sched_plan(const struct token_range_list *ranges,
		      const struct repair_sched_plan_in *in,
		      struct token_range_list *out);

/* last_start_us (0: never) or else first_seen_us, plus fraction *
 * gc_grace_seconds; wall clock microseconds. */
int64_t repair_sched_deadline(int64_t last_start_us, int64_t first_seen_us,
			      int64_t gc_grace_seconds, double fraction);

struct repair_sched_options {
	double intensity;                /* (0, 1]: 0.9 */
	uint64_t partitions_per_segment; /* 2^20 */
	uint64_t bytes_per_segment;      /* 1 GiB; 0: no byte budget */
	uint64_t segments_per_node;      /* 0: by partitions only */
	uint64_t segment_timeout_ms;     /* 30 min */
	uint32_t segment_retries;        /* failures before a split: 3 */
	uint64_t retry_delay_ms;         /* 30 s */
	const struct repair_sched_window *windows; /* copied */
	size_t nwindows;
	double gc_grace_fraction;       /* 0.7 */
	uint64_t min_cycle_interval_ms; /* 1 day */
	uint64_t check_interval_ms;     /* 30 s */
	uint64_t initial_delay_ms;      /* 5 min */
	/* per-table overrides, copied */
	const char (*tuning_names)[REPAIR_SCHED_NAME_MAX];
	const struct repair_sched_tuning *tunings;
	size_t ntunings;
};
void repair_sched_options_default(struct repair_sched_options *o);

/* A table to repair, as the node sees it now. */
struct repair_sched_table_info {
	char name[REPAIR_SCHED_NAME_MAX]; /* "ks.table" */
	uint8_t id[16];
	int64_t gc_grace_seconds;
	/* TimeWindowCompactionStrategy: incremental=true runs full repairs
	 * (anticompaction would split its windows' SSTables) */
	bool time_window;
	uint64_t partitions; /* estimated, in `ranges` */
	uint64_t bytes;      /* estimated data bytes, in `ranges` */
	/* this node's primary ranges with at least two replicas */
	struct token_range_list ranges;
};

/* What the scheduler needs from its node. Called on the loop thread. */
struct repair_sched_ops {
	/* The replicated tables (non-system keyspaces) and this node's
	 * primary ranges of each: *out malloc'ed (the caller frees each
	 * `ranges` and the array). 0 or -1. */
	int (*tables)(void *arg, struct repair_sched_table_info **out,
		      size_t *n);
	/* The replicas of the table's range holding `token`: at most `cap`
	 * into out. 0 or -1. */
	int (*replicas)(void *arg, const uint8_t table_id[16], int64_t token,
			struct inet_addr *out, size_t cap, size_t *n);
	/* Optional: the failure detector; a segment waits while one of its
	 * replicas is down. */
	bool (*is_alive)(void *arg, const struct inet_addr *ep);
	/* Persist the encoded state; takes ownership of `data` (malloc'ed).
	 * Must not block: the node writes it on a worker. */
	void (*save)(void *arg, uint8_t *data, size_t len);
	/* Optional: a segment ended (`error` NULL when it succeeded;
	 * `postponed` when it will simply run later: a busy replica, a
	 * pause); `started_us` is when it started (env_mono_us). */
	void (*segment_done)(void *arg, const char *table, int64_t start,
			     int64_t end, uint64_t started_us,
			     const char *error, bool postponed);
};

struct repair_sched;

/* `env`, `repair` and the ops' `arg` must outlive the scheduler. The
 * scheduler starts idle: call repair_sched_start. */
struct repair_sched *repair_sched_new(struct env *env, struct repair *repair,
				      const struct repair_sched_options *o,
				      const struct repair_sched_ops *ops,
				      void *arg);
/* A running segment is cancelled (not recorded). */
void repair_sched_delete(struct repair_sched *s);

/* Restores an encoded state (before start). -1 (ERR_CORRUPT with what is
 * wrong: a bad checksum, a truncated file, a bad line) leaves the
 * scheduler as it was. */
int repair_sched_load(struct repair_sched *s, const uint8_t *data, size_t len);
/* The state, with a trailing crc32c line; appended to `out`. */
int repair_sched_encode(const struct repair_sched *s, struct buf *out);

/* Looks for work after initial_delay, then keeps going. */
void repair_sched_start(struct repair_sched *s);

/* `filter`: NULL for the whole scheduler, "ks" or "ks.table". Pausing
 * cancels a running segment of what it pauses (it reruns from scratch
 * on resume; not a failure). -1 (ERR_NOT_FOUND) when nothing matches. */
int repair_sched_pause(struct repair_sched *s, const char *filter, bool pause);
/* Starts a new cycle now for the matching tables that have none running
 * (ignoring min_cycle_interval); their cycles, and those running, ignore
 * the initial delay, the intensity sleep and the windows until they
 * complete. Returns how many tables matched; -1 (ERR_NOT_FOUND) none. */
int repair_sched_run_now(struct repair_sched *s, const char *filter);

/* Whether the local repair session is a scheduled segment. */
bool repair_sched_running(const struct repair_sched *s);
/* The running segment: 1 with its table ("ks.table"), range and how
 * long it has run, else 0. */
struct repair_sched_segment {
	char name[REPAIR_SCHED_NAME_MAX];
	int64_t start, end; /* (start, end] */
	uint64_t running_us;
};
int repair_sched_get_running(const struct repair_sched *s,
			     struct repair_sched_segment *out);
/* Cancels the running segment so a manual session can start; it is
 * retried later (not a failure). */
void repair_sched_preempt(struct repair_sched *s);

struct repair_sched_table_status {
	const char *name; /* borrowed */
	size_t segments, done;
	int64_t cycle_start_us;             /* wall; 0: no cycle running */
	int64_t last_start_us, last_end_us; /* 0: none completed */
	int64_t deadline_us;
	uint64_t cycles;           /* completed since the state began */
	uint64_t failures, splits; /* this cycle */
	bool at_risk, paused, enabled, running;
};
size_t repair_sched_table_count(const struct repair_sched *s);
/* REQUIRES: i < repair_sched_table_count(s). */
void repair_sched_table_get(const struct repair_sched *s, size_t i,
			    struct repair_sched_table_status *out);
/* A nodetool-style table of the above, for `repair schedule status`;
 * `filter` as for pause; a "ks.table" filter adds its completed cycles. */
int repair_sched_format_status(const struct repair_sched *s, const char *filter,
			       struct buf *out);

#endif
