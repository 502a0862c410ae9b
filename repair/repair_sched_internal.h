/*
 * repair/ scheduler internals, shared by the state machine
 * (repair_sched.c) and its state file and status text (repair_sched_io.c).
 */
#ifndef CASSINI_REPAIR_REPAIR_SCHED_INTERNAL_H
#define CASSINI_REPAIR_REPAIR_SCHED_INTERNAL_H

#include "repair/repair_sched.h"

struct sched_seg {
	int64_t start, end; /* (start, end] */
	bool done;
	uint32_t failures;      /* since its last split */
	uint32_t depth;         /* times split */
	uint64_t not_before_us; /* mono; not persisted */
};

struct sched_cycle {
	int64_t start_us, end_us; /* wall */
	uint64_t segments, failures, splits;
};

struct sched_table {
	char name[REPAIR_SCHED_NAME_MAX];
	uint8_t id[16];
	int64_t gc_grace_seconds;
	double density;   /* estimated partitions per unit of ring fraction */
	bool known;       /* in the node's latest table list */
	bool time_window; /* TWCS: segments are full repairs */
	bool twcs_noted;  /* the refusal of incremental=true is logged */
	bool paused;      /* by repair schedule pause ks[.table] */
	bool forced;      /* run-now: this cycle ignores windows and sleeps */
	bool run_now;
	struct repair_sched_tuning tuning; /* resolved: every field set */
	int64_t first_seen_us;             /* wall */
	int64_t cycle_start_us;            /* wall; 0: none running */
	struct sched_seg *segs;
	size_t nsegs, cap;
	uint64_t failures, splits; /* this cycle */
	/* observed: microseconds per segment, work and sleep */
	double seg_us;
	uint64_t observed;
	struct sched_cycle history[REPAIR_SCHED_HISTORY]; /* newest last */
	size_t nhistory;
	uint64_t cycles; /* completed, ever */
};

struct repair_sched {
	struct env *env;
	struct repair *repair;
	struct repair_sched_options o;
	struct repair_sched_window *windows;
	char (*tuning_names)[REPAIR_SCHED_NAME_MAX];
	struct repair_sched_tuning *tunings;
	const struct repair_sched_ops *ops;
	void *arg;
	struct sched_table **tables;
	size_t ntables;
	bool paused;
	bool started;
	bool refreshed; /* the node's table list was read at least once */
	struct env_timer *timer;   /* the next look for work */
	struct env_timer *timeout; /* the running segment's */
	uint64_t sleep_until_us;   /* mono: intensity */
	/* the running segment */
	struct sched_table *run_table;
	size_t run_seg;
	uint64_t run_start_us;
	bool run_preempted; /* cancelled by pause or preempt: not a failure */
	bool run_timed_out;
};

/* Finds a table by name. */
struct sched_table *repair_sched_table_find(const struct repair_sched *s,
					    const char *name);
/* A new table (added to s->tables). NULL on ERR_NOMEM. */
struct sched_table *repair_sched_table_add(struct repair_sched *s,
					   const char *name,
					   const uint8_t id[16]);
int repair_sched_seg_push(struct sched_table *t, struct sched_seg g);
int64_t repair_sched_table_deadline(const struct repair_sched *s,
				    const struct sched_table *t);
bool repair_sched_table_at_risk(const struct repair_sched *s,
				const struct sched_table *t, int64_t now_wall);

#endif
