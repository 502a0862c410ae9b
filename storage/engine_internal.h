/*
 * The engine's shared state: tables, their memtables and SSTable sets, and
 * the worker threads. Private to storage/ (engine.c, engine_tables.c,
 * engine_flush.c, engine_write.c, engine_read.c, compaction.c).
 *
 * Locking: `db->mu` guards the table list, every table's active and
 * flushing memtables, its current version and counters. Memtables are
 * written under it; reads and flushes take references under it and then
 * work without it. Lock order: db->mu, then the commitlog's own lock.
 */
#ifndef CASSINI_STORAGE_ENGINE_INTERNAL_H
#define CASSINI_STORAGE_ENGINE_INTERNAL_H

#include "storage/commitlog_internal.h"
#include "storage/sstable_internal.h"

#include <pthread.h>

/* An immutable set of SSTables, newest first. */
struct version {
	_Atomic int refs;
	struct sstable **ssts;
	size_t count;
};

/* What a read sees of a table: memtables and an SSTable version, all
 * referenced (engine_read.c). */
struct engine_snapshot {
	struct table *t;                       /* a reference */
	const struct storage_table_meta *meta; /* the table's, a reference */
	struct memtable **mts;                 /* newest first */
	size_t mt_count;
	struct version *v;
};
int storage_engine_snapshot_take(struct storage *db, const uint8_t id[16],
				 struct engine_snapshot *s);
void storage_engine_snapshot_release(struct engine_snapshot *s);

struct table {
	/* The newest version (a reference; replaced under the lock by
	 * storage_table_update). Read it under the lock, or take a
	 * reference under it: memtables, SSTables, reads and compactions
	 * keep the version they started with (every version describes the
	 * same column numbers), and an earlier one is freed with the last
	 * of them. */
	const struct storage_table_meta *meta;
	bool durable;
	char *dir;
	struct memtable *active;
	struct memtable **flushing; /* oldest first */
	size_t flushing_count;
	struct version *version;
	uint64_t next_gen;
	struct clpos flushed; /* commitlog position the SSTables cover */
	/* The last truncate (storage_truncate): records logged at or before
	 * `truncated_at` and SSTable generations up to `truncated_gen` belong
	 * to the truncated past. Persisted in <dir>/truncated.txt. */
	struct clpos truncated_at;
	uint64_t truncated_gen;
	int64_t truncated_wall_us; /* when, on the env's wall clock; 0: never */
	/* While a truncate makes its record durable (`truncating`): the
	 * memtables it set aside (readers no longer see them; the commitlog
	 * keeps their segments), brought back if the record fails. */
	struct memtable **trunc_mts;
	size_t trunc_count;
	bool truncating;
	bool compacting;
	/* The running compaction (while `compacting`; set under the lock
	 * when it starts): its task id, kind ("Compaction", "Cleanup",
	 * "Tombstone Compaction"), the inputs' Data.db bytes, and how far
	 * the merge has read into them (the compactor stores it, readers of
	 * storage_compactions_active load it). */
	uint8_t compaction_id[16];
	const char *compaction_kind;
	uint64_t compaction_total;
	_Atomic uint64_t compaction_done;
	bool flush_failed;
	uint64_t flushes, compactions;
	uint64_t bytes_compacted; /* inputs' Data.db bytes, compactions done */
	uint64_t tombstone_compactions; /* single-SSTable ones */
	/* Data.db + Index.db bytes the flushes and compactions wrote */
	uint64_t flushed_bytes, compacted_bytes;
	/* leveled: per level, the last token of the SSTable compacted last
	 * (the next one starts after it: Cassandra's round robin) */
	int64_t lcs_next[9];
	uint64_t writes;        /* mutations applied (under the lock) */
	_Atomic uint64_t reads; /* point reads answered */
	/* tablehistograms (common/loghist.h buckets): reads' µs and
	 * SSTables read (any thread, relaxed), writes' µs (the lock) */
	_Atomic uint64_t read_us_sum, read_us[LOGHIST_BUCKETS];
	_Atomic uint64_t scan_us_sum, scan_us[LOGHIST_BUCKETS]; /* ranges */
	_Atomic uint64_t sst_sum, sst_per_read[LOGHIST_BUCKETS];
	/* live rows and tombstones each of those reads met */
	_Atomic uint64_t live_sum, live_per_read[LOGHIST_BUCKETS];
	_Atomic uint64_t tomb_sum, tomb_per_read[LOGHIST_BUCKETS];
	uint64_t write_us_sum, write_us[LOGHIST_BUCKETS];
	/* reads past tombstone_warn_threshold / failure_threshold */
	_Atomic uint64_t tombstone_warnings, tombstone_failures;
	/* toppartitions, profileload (sampler.c): which samplers count now
	 * (1 << kind; relaxed: the hot path's only cost), and the samplers
	 * (made by the first window, under the lock; freed with the table) */
	_Atomic unsigned sampling;
	struct storage_sampler *samplers[STORAGE_SAMPLERS];
	/* References: the table list's (until storage_table_drop unlinks
	 * it), and one per flush, compaction, truncate, snapshot or read
	 * working on the table without the lock (storage_engine_table_get). The
	 * last storage_engine_table_unref frees it. */
	_Atomic unsigned refs;
	/* Storage-attached index builds (engine_sai_build.c), under the
	 * lock: an index listed here is not queryable on this node until
	 * its build finishes. */
	struct index_build *builds;
	size_t nbuilds;
	bool dropped;    /* unlinked by storage_table_drop (under the lock) */
	struct env *env; /* the engine's (table_free removes an empty dir) */
	struct table *next;
};

struct storage {
	struct storage_options o;
	char *data_dir, *commitlog_dir;
	pthread_mutex_t mu;
	pthread_cond_t work; /* flusher/compactor wake-up */
	pthread_cond_t done; /* a flush or compaction finished */
	struct table *tables;
	/* The same tables sorted by id, for lookups (every read and write
	 * finds its table: a walk of the list cost a memcmp per table) */
	struct table **by_id;
	size_t nby_id, by_id_cap;
	struct commitlog *cl;
	struct block_cache *cache;
	/* compaction_throughput: compaction's, shared with repair
	 * validation through storage_throughput_budget */
	struct ratelimit *budget;
	bool started, stopping;
	pthread_t flusher, compactor;
	/* the index builder (engine_sai_build.c) and its wake-up */
	pthread_t indexer;
	pthread_cond_t index_work;
	bool builds_held;      /* storage_index_builds_hold (tests) */
	bool builds_fail;      /* storage_index_builds_fail (tests) */
	bool compactions_held; /* storage_compactions_hold (tests) */
	/* compaction_wake.c: the timer waking the compactor when an SSTable
	 * becomes fully droppable (NULL: none started) */
	struct droppable_watch *watch;
	uint64_t build_seq; /* index builds started (their task ids) */
	bool compaction_wanted;
	bool writes_stopped;
	char stop_msg[256];
	enum err_code stop_code;
	/* Writes are being refused because memtables (flushing ones too)
	 * fill memtable_heap_space; such spells are logged at most every
	 * FULL_LOG_EVERY_US (the last at full_logged_us, with how many came
	 * since). */
	bool memtables_full, full_announced;
	uint64_t full_logged_us;
	unsigned full_spells;
	/* Writes that found them full, oldest first (storage_apply), with
	 * their encoded bytes; counters for storage_stats. */
	struct waiting_write *waiting, **waiting_tail;
	size_t waiting_bytes, waiting_count;
	bool take_wanted; /* the flush thread is to take them (must_wait) */
	uint64_t writes_waited, writes_refused;
	struct buf scratch;
	/* storage_apply_deferred's acknowledgements waiting for
	 * storage_write_deferred (its caller's thread only) */
	struct deferred_ack *acks;
	size_t nacks, acks_cap;
	/* counters */
	_Atomic uint64_t corrupt_blocks;
	uint64_t torn, replayed;
	uint64_t replay_invalid; /* records replayed without invalid values */
};

struct deferred_ack {
	storage_done_fn done;
	void *arg;
};

/* compaction_wake.c. After a compactor round that began at `round_us`
 * (wall time; compactor thread): posts a re-arm of the droppable watch
 * when the next deadline after round_us is earlier than the armed one. */
void storage_compaction_watch_note(struct storage *db, int64_t round_us);
/* storage_delete, the engine's threads joined (the watch's loop thread):
 * frees the timer; a queued re-arm then does nothing. */
void storage_compaction_watch_stop(struct storage *db);

/* Under the lock: the registered table, borrowed while the lock is held
 * (NULL: none, or dropped). */
struct table *storage_engine_table_find(struct storage *db,
					const uint8_t id[16]);
/* Lock not held: a reference to the registered table, or NULL
 * (ERR_NOT_FOUND, "unknown table"). */
/* sampler.c: a point read's figures, or a write, to the samplers on
 * (t->sampling seen set); and frees the table's samplers. */
#define STORAGE_SAMPLE_READ_KINDS                                              \
	(1u << STORAGE_SAMPLE_READS | 1u << STORAGE_SAMPLE_READ_ROW_COUNT |    \
	 1u << STORAGE_SAMPLE_READ_TOMBSTONE_COUNT |                           \
	 1u << STORAGE_SAMPLE_READ_SSTABLE_COUNT)
#define STORAGE_SAMPLE_WRITE_KINDS                                             \
	(1u << STORAGE_SAMPLE_WRITES | 1u << STORAGE_SAMPLE_WRITE_SIZE)
void storage_engine_sample_read(struct table *t, const uint8_t *key, size_t len,
				uint64_t rows, uint64_t tombstones,
				uint64_t sstables);
void storage_engine_sample_write(struct table *t,
				 const struct storage_mutation *m);
void storage_engine_samplers_free(struct table *t);
static inline bool storage_engine_sampling(struct table *t, unsigned kinds)
{
	return atomic_load_explicit(&t->sampling, memory_order_relaxed) & kinds;
}

struct table *storage_engine_table_get(struct storage *db,
				       const uint8_t id[16]);
/* Under the lock or not: another reference to a table one is held on. */
void storage_engine_table_ref(struct table *t);
/* Drops a reference (any thread, lock not held); the last frees it. */
void storage_engine_table_unref(struct table *t);
int64_t storage_engine_now_sec(struct storage *db);
void storage_version_ref(struct version *v);
void storage_version_unref(struct version *v);
/* New version = old minus `drop` plus `add` (NULL allowed). */
/* Writes `mt` to a new SSTable of `t` (pending for the incremental repair
 * session `pending` when not NULL); *out is it, opened. No lock held. */
int storage_engine_write_memtable(struct storage *db, struct table *t,
				  const struct storage_table_meta *meta,
				  struct memtable *mt, const uint8_t *pending,
				  struct sstable **out);
struct version *storage_version_edit(const struct version *old,
				     struct sstable *const *drop, size_t ndrop,
				     struct sstable *add);
/* storage_version_edit with several SSTables added (a leveled compaction's). */
struct version *storage_version_edit_many(const struct version *old,
					  struct sstable *const *drop,
					  size_t ndrop,
					  struct sstable *const *add,
					  size_t nadd);
/* Records a read that hit a damaged block and applies
 * disk_failure_policy. */
void storage_engine_note_corruption(struct storage *db, struct sstable *s);
/* Writes a sorted stream of partitions from a source into a new SSTable
 * generation of `t`; shared by flush and compaction. */
uint64_t storage_engine_next_gen(struct storage *db, struct table *t);

/* compaction.c */
void *storage_engine_compactor_main(void *arg);
int storage_engine_compact_table(struct storage *db, struct table *t,
				 bool major);
int storage_engine_compaction_recover(struct storage *db, struct table *t);
/* Whether a background round would start a compaction of `t` now (the
 * lock held). */
bool storage_engine_compaction_due(struct storage *db, struct table *t);
/* Unlinks every component of SSTable generation `gen` in `dir`. */
void storage_engine_remove_generation(struct env *env, const char *dir,
				      uint64_t gen);
/* The generations of the `<prefix>-<gen>.log` files in `dir` (compaction
 * and import logs), at most 256. */
struct storage_log_list {
	uint64_t gens[256];
	size_t n;
};
int storage_engine_list_logs(struct env *env, const char *dir,
			     const char *prefix, struct storage_log_list *out);

/* sstable_import.c: finishes or rolls back an import a crash cut short
 * (its import-<gen>.log), before the table's SSTables are listed. */
int storage_import_recover(struct storage *db, struct table *t);

/* engine_sai_build.c: building storage-attached indexes over existing
 * data (docs/indexes.md, "Building an index"). */
struct index_build {
	char *name;
	uint8_t task_id[16];
	bool running; /* the builder works on it now */
	bool force;   /* rebuild every SSTable's component (rebuild_index) */
	bool again;   /* asked for again while running: run once more */
	/* stopped on an error: unavailable until rebuild_index succeeds,
	 * across restarts too (<table dir>/sai-failed-<index>.txt) */
	bool failed;
	/* a repair: components a query found unusable are written again;
	 * the index stays queryable (those SSTables are listed meanwhile) */
	bool repair;
	uint64_t total, done; /* Data.db bytes of the SSTables of this pass */
};
/* Under the lock: `t`'s meta changed from `prev` (NULL: the table was
 * just loaded). Indexes new in it (or over something else now) start a
 * build when the table holds data; dropped ones stop theirs. */
void storage_engine_sai_update(struct storage *db, struct table *t,
			       const struct storage_table_meta *prev,
			       bool had_data);
/* Under the lock: whether index `name` of `t` is being built. */
bool storage_engine_sai_building(const struct table *t, const char *name);
/* Lock not held: a query of index `name` had to list SSTables whose
 * component is missing or unusable; the builder writes them again in
 * the background (the index stays queryable). */
void storage_engine_sai_repair(struct storage *db, struct table *t,
			       const char *name);
void storage_engine_sai_free(struct table *t);
void *storage_engine_indexer_main(void *arg);

/* A write that found the memtables full (storage_apply): its mutation
 * encoded, and its acknowledgement. */
struct waiting_write {
	struct waiting_write *next;
	storage_done_fn done;
	void *arg;
	uint64_t since_us; /* env_mono_us when it arrived */
	size_t len;
	uint8_t data[];
};

/* engine_flush.c: memtable flushes and the flush thread. */
int storage_engine_switch_memtable(struct storage *db, struct table *t);
void storage_engine_discard_log(struct storage *db);
void storage_engine_stop_writes(struct storage *db, const char *why);
void *storage_engine_flusher_main(void *arg);
/* engine_write.c: the write path and the writes that wait for room. */
int storage_engine_validate(const struct table *t,
			    const struct storage_mutation *m);
struct waiting_write *storage_engine_waiting_pop(struct storage *db);
void storage_engine_take_waiting(struct storage *db);
int storage_engine_apply(struct storage *db, const struct storage_mutation *m,
			 storage_done_fn done, void *arg,
			 struct clpos *wait_pos, bool deferred, bool waited,
			 bool *ack_now);

#endif
