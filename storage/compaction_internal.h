/*
 * What compaction.c, compaction_pick.c, compaction_log.c and
 * anticompaction.c (incremental repair's splits and repair states) share:
 * a compaction job, running one, its log, and choosing its inputs.
 */
#ifndef CASSINI_STORAGE_COMPACTION_INTERNAL_H
#define CASSINI_STORAGE_COMPACTION_INTERNAL_H

#include "storage/engine_internal.h"
#include "storage/sstable_internal.h"

/* ---- the merge ----------------------------------------------------------- */

struct job {
	struct storage *db;
	struct table *t;
	/* The table's meta when the job started (a reference: an ALTER may
	 * replace the table's meanwhile). */
	const struct storage_table_meta *meta;
	struct sstable **in;
	size_t n;
	/* The oldest timestamp in any memtable when the job started: data
	 * there may be shadowed by a tombstone the job sees. (No references
	 * are held: a long compaction must not pin flushed memtables.) */
	int64_t mt_min_ts;
	struct version *v;
	int64_t now, gc_before;
	struct sst_writer *w;    /* the output being written */
	uint64_t throttle_bytes; /* written bytes already paid for */
	/* Leveled: outputs are cut at max_output bytes (0: one output) and
	 * go to out_level; the finished-writing ones wait in done_w (their
	 * generations in out_gens, the current one's last). */
	uint64_t max_output;
	uint32_t out_level;
	struct sst_writer_options wo;
	struct sst_writer **done_w;
	uint64_t *out_gens;
	size_t nout;
	size_t npub; /* of them, the non-empty ones published (run_job) */
	/* cleanup: only partitions in these ranges are written */
	bool cleanup;
	const struct storage_token_range *keep;
	size_t nkeep, next_keep; /* the first range not behind the merge */
	uint64_t dropped;
	/* anticompaction (with cleanup's ranges): partitions in them go to
	 * the first output (pending for `session`), the rest to the second */
	bool anti;
	const uint8_t *session;
	/* garbagecollect / scrub (one SSTable, `only`, per job):
	 * gc 1 drops what other SSTables' deletions shadow (-g ROW), 2 also
	 * cells they hold newer (-g CELL); scrub skips the partitions it
	 * cannot read (counted in `dropped`), failing instead on a counter
	 * table unless skip_corrupted */
	struct sstable *only;
	int gc;
	bool scrub, skip_corrupted, counters;
	uint64_t kept;
	struct read_ctx *shadow;
};

/* Runs the merge into one output, or several (leveled). On success *out
 * holds j->npub opened SSTables: those of the j->nout outputs that are
 * not empty (an empty one is never published). */
int storage_compaction_run_job(struct job *j, struct sstable ***out);
/* compaction_log.c: writes j's log (its outputs, inputs and, once every
 * output is complete, "done") atomically. */
int storage_compaction_write_log(struct job *j, bool done);
/* Finishes (output complete) or rolls back (output incomplete) every
 * compaction a crash interrupted; with `only_done`, just removes logs
 * whose inputs are all gone. */
int storage_compaction_process_logs(struct storage *db, struct table *t,
				    bool only_done);

/* ---- choosing inputs (compaction_pick.c) --------------------------------- */

/* What a compaction is: its inputs' count is pick_inputs' answer. */
struct pick {
	bool tombstone; /* a single-SSTable tombstone compaction */
	bool leveled;   /* outputs cut at sstable_size, at out_level */
	uint32_t out_level;
};

/* Inputs for the next compaction of `t` into out (room for every SSTable
 * of its version), the lock held. A major compaction or a cleanup takes
 * every SSTable of `state`'s repair state (as Cassandra runs one per
 * repaired, unrepaired and pending set); a background one first takes
 * the fully expired SSTables, then the strategy's pick, then a tombstone
 * compaction of an SSTable with a generation below tomb_below. Returns
 * how many. */
size_t storage_compaction_pick_inputs(struct table *t, bool major, bool cleanup,
				      const struct sstable *state, int64_t now,
				      int64_t mt_min_ts, uint64_t tomb_below,
				      struct pick *p, struct sstable **out);
/* The distinct repair states of v's usable SSTables, each named by one
 * SSTable of it (out has room for v->count), in the order they come. */
size_t storage_compaction_repair_states(const struct version *v,
					struct sstable **out);

#endif
