/*
 * storage/: the local LSM engine.
 *
 * Layering (leveldb's): a shared commitlog, one memtable per table, immutable
 * SSTables, size-tiered compaction. Semantics are Cassandra's: partitions
 * ordered by (Murmur3 token, key bytes), clustering by per-type order,
 * last-write-wins reconcile with Cassandra's tie-breaks, tombstones purged
 * only after gc_grace_seconds. See docs/storage.md and
 * docs/sstable-format.md.
 *
 * Threads: every call below may be made from the event-loop thread except
 * the ones marked "blocks" (reads that miss memory, flush, compact, drain,
 * close, the *_sync conveniences), which belong on a worker thread. The
 * engine does disk work on its own threads: one commitlog syncer, one
 * flusher, one compactor. Completions of asynchronous writes are handed to
 * the `post` hook of the options so they run on the caller's loop; without
 * a hook they run on the engine's syncer thread.
 *
 * Errors: 0 / -1 with the per-thread error slot (common/err.h); across
 * threads the status travels in the completion.
 */
#ifndef CASSINI_STORAGE_STORAGE_H
#define CASSINI_STORAGE_STORAGE_H

#include "common/buf.h"
#include "common/env.h"
#include "common/err.h"
#include "common/loghist.h"
#include "storage/schema.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct arena;
struct conf;
struct storage;
struct storage_mutation;
struct storage_read_cmd;

/* ---- mutations ----------------------------------------------------------- */

/* A mutation of one partition of table `t` (borrowed; must stay live while
 * the mutation is built). `key` is the serialized partition key (for a
 * composite key: each component as be16 length, bytes, 0x00), copied. */
struct storage_mutation *
storage_mutation_new(const struct storage_table_meta *t, const uint8_t *key,
		     size_t len);
void storage_mutation_delete(struct storage_mutation *m);
int64_t storage_mutation_token(const struct storage_mutation *m);
const uint8_t *storage_mutation_table_id(const struct storage_mutation *m);
/* The serialized partition key; borrowed, live while the mutation is. */
struct slice storage_mutation_key(const struct storage_mutation *m);
/* Component i of serialized partition key `key` of table `t` (the key
 * itself for a single-column key); an empty slice with a NULL pointer when
 * the key has no such component or is malformed. Borrowed from `key`. */
struct slice storage_pk_component(const struct storage_table_meta *t,
				  struct slice key, size_t i);

/* Selects the row the next cell calls go to: a full clustering (values
 * copied), or the static row. The default is the empty clustering (tables
 * without clustering columns). */
int storage_mutation_set_row(struct storage_mutation *m,
			     const struct slice *clustering, size_t n);
int storage_mutation_set_static_row(struct storage_mutation *m);

/* Writes a cell of `column` in the current row. `path` is NULL for simple
 * and frozen columns; for a non-frozen collection it is the element's key
 * (set element, map key, list position timeuuid). ttl 0 = no expiry;
 * `now_sec` is the write's local time (expiry = now_sec + ttl). */
int storage_mutation_put(struct storage_mutation *m, int column,
			 const uint8_t *path, size_t path_len,
			 const uint8_t *value, size_t len, int64_t ts,
			 int32_t ttl, int64_t now_sec);
/* The row marker (INSERT's primary key liveness). */
int storage_mutation_put_marker(struct storage_mutation *m, int64_t ts,
				int32_t ttl, int64_t now_sec);
/* Tombstones: one cell (or collection element), a whole collection, the
 * current row, a clustering range, the partition. Bounds are clustering
 * prefixes; an empty bound is unbounded. */
int storage_mutation_delete_cell(struct storage_mutation *m, int column,
				 const uint8_t *path, size_t path_len,
				 int64_t ts, int64_t now_sec);
int storage_mutation_delete_collection(struct storage_mutation *m, int column,
				       int64_t ts, int64_t now_sec);
int storage_mutation_delete_row(struct storage_mutation *m, int64_t ts,
				int64_t now_sec);
int storage_mutation_delete_range(struct storage_mutation *m,
				  const struct slice *start, size_t nstart,
				  bool start_incl, const struct slice *end,
				  size_t nend, bool end_incl, int64_t ts,
				  int64_t now_sec);
int storage_mutation_delete_partition(struct storage_mutation *m, int64_t ts,
				      int64_t now_sec);

/* ---- counters -------------------------------------------------------------
 *
 * A counter cell is a counter context: one shard per host id that ever
 * applied an increment as counter leader, each a (clock, count) pair; its
 * value is the sum of the counts. Stored as one atom per shard: the path
 * is the 16-byte host id, the timestamp the clock, the value the count
 * (8 bytes, big-endian). Two versions of a shard reconcile as any cell
 * does (the higher clock wins; equal clocks: the larger value bytes), so
 * memtables, SSTables, compaction, digests, read repair, hints and repair
 * streaming carry and merge counter states without knowing about them;
 * reads sum a cell's live shards into one bigint cell. This is
 * Cassandra's CounterContext with only global shards (Cassandra 2.1+
 * writes no others), keyed by host id rather than a separate counter id.
 *
 * A client's increment travels as a delta shard (host id zero, the delta
 * as count) from the coordinator to the counter leader, which turns it
 * into its own shard (storage_counter_resolve); a delta shard is never
 * stored (storage_mutation_validate refuses it).
 *
 * Deletion: a deleted counter cannot be reused (Cassandra's rule; the
 * CQL layer writes every tombstone of a counter table at
 * STORAGE_COUNTER_TOMBSTONE_TS, so it shadows every shard, later ones
 * included, until gc_grace_seconds pass and compaction purges it). */
#define STORAGE_COUNTER_ID_LEN       16
#define STORAGE_COUNTER_TOMBSTONE_TS INT64_MAX

/* The delta shard of an increment of counter `column` in the current
 * row. */
int storage_mutation_put_counter_delta(struct storage_mutation *m, int column,
				       int64_t delta);
/* The shard of host `id` (not all zero) with (clock, count). */
int storage_mutation_put_counter_shard(struct storage_mutation *m, int column,
				       const uint8_t id[16], int64_t clock,
				       int64_t count);
/* Whether `m` holds a delta shard (needs a counter leader). */
bool storage_mutation_has_counter_deltas(const struct storage_mutation *m);
/* The leader's step (Cassandra's CounterMutation.processModifications): a
 * new mutation (the caller's, borrowing `t`) where each delta shard of
 * `deltas` becomes the shard of `host_id`, with clock max(now_us, old
 * clock + 1) and count old count + delta, the old (clock, count) being the
 * live shard of `host_id` for that cell in `current` (this node's
 * fragment of the partition, borrowed; NULL or missing: (0, 0)). Other
 * content of `deltas` is copied. NULL on error. */
struct storage_mutation *
storage_counter_resolve(const struct storage_table_meta *t,
			const struct storage_mutation *deltas,
			const struct storage_mutation *current,
			const uint8_t host_id[16], int64_t now_us);
/* The read the leader needs before storage_counter_resolve: the rows `m`
 * writes (a slice per clustering; the static row; the whole partition for
 * a table without clustering columns). The command's key, slices and
 * values live in `a`. */
int storage_counter_read_cmd(const struct storage_table_meta *t,
			     const struct storage_mutation *m, struct arena *a,
			     struct storage_read_cmd *cmd);

/* The one serialized form (commitlog, hints, internode, streaming):
 * versioned and CRC-protected. Appends to `out`. */
int storage_mutation_encode(const struct storage_mutation *m, struct buf *out);
/* Decodes untrusted bytes; the result owns copies. NULL with ERR_CORRUPT. */
struct storage_mutation *storage_mutation_decode(const uint8_t *p, size_t len);

/* Whether every value of `m` (a mutation of table `t`, borrowed) is valid
 * for its column's type (storage_value_validate): partition key
 * components, clustering values and range tombstone bounds, cell values,
 * collection paths (a list's: a version-1 timeuuid). storage_apply and
 * its variants refuse an invalid mutation with this error (ERR_INVALID
 * naming the table and column, with the validator's message). */
int storage_mutation_validate(const struct storage_table_meta *t,
			      const struct storage_mutation *m);
/* Removes from `m` the atoms and range tombstones holding an invalid
 * value (*dropped counts them); -1 with the error when the partition key
 * itself is invalid (the whole mutation must go). For data written
 * before values were validated (commitlog replay). */
int storage_mutation_drop_invalid(const struct storage_table_meta *t,
				  struct storage_mutation *m, size_t *dropped);

/* Adds `delta` to every timestamp in the mutation (cells, markers,
 * tombstones), keeping their differences: a conditional write is built
 * before its Paxos ballot is known and stamped with the ballot's time. */
void storage_mutation_shift_timestamps(struct storage_mutation *m,
				       int64_t delta);

/* About the bytes the mutation's content takes (its encoding's size,
 * without computing it), for throttles and limits. */
size_t storage_mutation_size(const struct storage_mutation *m);
/* Whether the mutation holds nothing (no atom, range tombstone or
 * partition deletion). */
bool storage_mutation_is_empty(const struct storage_mutation *m);
/* Tombstones a fragment holds at `now_sec`: partition deletion, range
 * tombstones, and every atom not live then (tombstones, row and
 * collection deletions, expired cells): what a read of it "scans" for
 * tombstone_warn_threshold. */
uint64_t storage_mutation_tombstones(const struct storage_mutation *m,
				     int64_t now_sec);
/* Rows a fragment holds (the static row included): its distinct
 * clusterings among atoms, live or not; range tombstones and the
 * partition deletion are not rows. What replica filtering protection
 * counts against cached_rows_warn_threshold. */
size_t storage_mutation_rows(const struct storage_mutation *m);
/* The encoded clusterings of fragment m's regular rows (their atoms,
 * live or not; not the static row, range tombstones or the partition
 * deletion), each once in m's order: the first `cap` into out (borrowed
 * from m, live while it is), and how many there are returned. What
 * replica filtering protection compares replicas' row answers by. */
size_t storage_fragment_row_cks(const struct storage_mutation *m,
				struct slice *out, size_t cap);
/* A 16-byte digest of the mutation's content (table id, key, deletions,
 * atoms; not its meta pointer): MurmurHash3_x64_128 of its encoding, so
 * equal content in the same order gives equal digests on every node.
 * Fragments (below) are canonical, so equal fragments have equal digests. */
void storage_mutation_digest(const struct storage_mutation *m, uint8_t out[16]);

/* ---- the engine ---------------------------------------------------------- */

/* Runs `fn(arg, status, code)` on the caller's loop; the hook copies the
 * four values and returns at once. */
typedef void (*storage_done_fn)(void *arg, int status, enum err_code code);
typedef void (*storage_post_fn)(void *post_arg, storage_done_fn fn, void *arg,
				int status, enum err_code code);

/* Cassandra's disk_access_mode. Mapped files (mmap, mmap_index_only for
 * Index.db alone) serve blocks in the OS page cache with no system call
 * and no copy (bytes not in memory are still read with pread, and the
 * loop's reads never wait for the disk); standard always preads. A disk
 * error under a mapped page is SIGBUS rather than an I/O error, as with
 * Cassandra's mmap. Auto is mmap on 64-bit builds and standard on 32-bit
 * ones (Cassandra's hasLargeAddressSpace), where mapping every SSTable
 * would exhaust the address space. */
enum storage_disk_access {
	STORAGE_DISK_ACCESS_MMAP = 0,
	STORAGE_DISK_ACCESS_MMAP_INDEX_ONLY = 1,
	STORAGE_DISK_ACCESS_STANDARD = 2,
	STORAGE_DISK_ACCESS_AUTO = 3,
};

struct storage_options {
	struct env *env;      /* files and the clock; must outlive db */
	const char *data_dir; /* SSTables: data_dir/<ks>/<table>-<id>/ */
	const char *commitlog_dir;
	int commitlog_sync; /* enum conf_commitlog_sync */
	uint64_t commitlog_sync_period_ms;
	uint64_t commitlog_sync_group_window_ms;
	uint64_t commitlog_segment_size;
	int commit_failure_policy; /* enum conf_failure_policy */
	int disk_failure_policy;
	uint64_t memtable_heap_space;
	double memtable_cleanup_threshold;
	/* How long a write that finds the memtables full waits for a flush
	 * to make room before it fails (write_request_timeout: its
	 * coordinator has answered a timeout by then); 2 s. */
	uint64_t write_wait_ms;
	uint64_t compaction_throughput; /* bytes/s, 0 = unthrottled */
	int64_t tombstone_warn_threshold;
	int64_t tombstone_failure_threshold;
	bool auto_compaction;    /* default true */
	size_t block_cache_size; /* decoded SSTable blocks; 32 MiB, 0 = off */
	/* enum storage_disk_access: how point reads reach SSTable bytes */
	int disk_access_mode;
	storage_post_fn post; /* may be NULL */
	void *post_arg;
	/* (term, key) pairs an index component's builder holds before it
	 * spills a sorted run to a temporary file (0: SAI_BUILDER_HOLD;
	 * tests lower it) */
	size_t sai_build_hold;
};

/* Defaults equal to conf's; `env` and the directories still to set. */
void storage_options_default(struct storage_options *o);
/* From a loaded configuration (the first data directory is used). The
 * strings are borrowed from `c`. */
void storage_options_from_conf(struct storage_options *o, const struct conf *c,
			       struct env *env);

/* Creates the engine; nothing is read yet. */
struct storage *storage_new(const struct storage_options *o);
/* Registers a table (the meta is copied) and loads its SSTables. Before
 * storage_start for existing tables, so replay finds them. */
int storage_table_add(struct storage *db, const struct storage_table_meta *t,
		      bool durable_writes);
/* Replaces a registered table's meta by a newer version of it (ALTER
 * TABLE: columns added or dropped, options changed; the meta is copied).
 * `t` must be a successor of the current version
 * (storage_table_meta_check_successor; else ERR_INVALID), ERR_NOT_FOUND
 * for an unregistered table. Data written under earlier versions stays
 * readable; cells of dropped columns are no longer read and are purged by
 * compaction. A non-empty memtable is queued for flushing. An earlier
 * version lives on while a memtable, SSTable, read or reference
 * (storage_table_meta_acquire) holds it. Any time after storage_new. */
int storage_table_update(struct storage *db,
			 const struct storage_table_meta *t);
/* Forgets a table (DROP TABLE, DROP KEYSPACE): from now on writes, reads,
 * flushes, truncates and compactions of it fail with ERR_NOT_FOUND as for
 * an unknown table; its memtables (their writes need no flush: the table
 * is gone) no longer count against memtable_heap_space, nor keep
 * commitlog segments. A read, scan, flush or compaction of it already
 * under way finishes with what it holds; the table's memory is freed
 * when the last of them ends. Its SSTables stay on disk in its directory
 * (as Cassandra's auto_snapshot keeps a copy of a dropped table); a
 * table created again gets a new id, hence a new directory.
 * ERR_NOT_FOUND for an unregistered table. Any time after storage_new;
 * the caller must not use ids it got for the table meanwhile. */
int storage_table_drop(struct storage *db, const uint8_t id[16]);
/* Removes leftovers, replays the commitlog, starts the worker threads.
 * Fails (commit_failure_policy stop) naming file and offset when the log
 * is corrupt anywhere but its torn tail. Blocks. */
int storage_start(struct storage *db);
/* Flushes every memtable and stops the workers. Blocks. */
int storage_drain(struct storage *db);
/* Stops the workers (no flush; the commitlog covers the memtables) and
 * frees everything. Blocks. */
void storage_delete(struct storage *db);

/* Applies a mutation (copied into the log and memtable before returning);
 * an invalid one (storage_mutation_validate) is refused, ERR_INVALID.
 * `done` fires once the write is acknowledged: after write(2) for
 * `periodic` and for keyspaces without durable_writes (then inline, before
 * storage_apply returns), after fdatasync for `batch` and `group` (then
 * through the post hook). On -1 nothing was applied and `done` never
 * fires.
 *
 * While the memtables (flushing ones too) hold memtable_heap_space, a
 * write waits, in arrival order, for a flush to make room (as
 * Cassandra's do), then is applied from the flush thread and acknowledged
 * through the post hook; one that waited write_wait_ms fails with
 * ERR_OVERLOADED through it. Once the waiting writes hold a quarter of
 * memtable_heap_space, more are refused at once (-1, ERR_OVERLOADED), and
 * so is a write without `done`. */
int storage_apply(struct storage *db, const struct storage_mutation *m,
		  storage_done_fn done, void *arg);
/* storage_apply for an event loop serving many writes a turn. Under
 * `periodic`, a write to a durable keyspace is appended to the commitlog
 * without a system call, and `done` fires from the next
 * storage_write_deferred, after one write(2) of every such record (so the
 * periodic promise holds: acknowledged after write(2)); otherwise as
 * storage_apply. Call both from one thread, and storage_write_deferred
 * before that thread answers anything that depends on the writes (an
 * event loop: later in the same turn). */
int storage_apply_deferred(struct storage *db, const struct storage_mutation *m,
			   storage_done_fn done, void *arg);
void storage_write_deferred(struct storage *db);
/* storage_apply and wait for the acknowledgement. Blocks: under batch and
 * group the calling thread runs (or joins) the covering fdatasync. */
int storage_apply_sync(struct storage *db, const struct storage_mutation *m);
/* For a thread that writes without `done` (storage_apply_sync, or
 * storage_apply with none: a benchmark, a tool) and was refused with
 * ERR_OVERLOADED: blocks until the memtables have room and no write waits
 * for it, then returns 0; the refused write applied nothing, so the caller
 * retries it. -1 when writes stopped (the flush failed: the stop's error),
 * the engine stops (ERR_CLOSED), or `timeout_ms` passes (ERR_TIMEOUT;
 * 0 waits without a limit). */
int storage_wait_for_room(struct storage *db, uint64_t timeout_ms);

/* ---- reads --------------------------------------------------------------- */

/* A clustering slice: [start, end] as prefixes (empty = unbounded). */
struct storage_slice {
	const struct slice *start;
	size_t start_count;
	bool start_incl;
	const struct slice *end;
	size_t end_count;
	bool end_incl;
};

/* What a read met, for its trace events (Cassandra's "Merged data from
 * memtables and N sstables", "Read N live rows and M tombstone cells"):
 * the read adds to it. */
struct storage_read_stats {
	/* point reads: SSTables read past their bloom filter; scans: in
	 * view */
	unsigned sstables;
	uint64_t live_rows;  /* live rows of the partitions read */
	uint64_t tombstones; /* tombstones met (the thresholds' count) */
	/* Point reads, where the time goes (bench/storage_bench
	 * --read_stats): SSTables whose bloom filter was asked and those it
	 * let through (minus `sstables_found`: its false positives), index
	 * and data blocks used and of them those not in the block cache
	 * (read with pread, checked, decompressed: `miss_bytes` raw). */
	uint64_t bloom_checks, bloom_passes, sstables_found;
	uint64_t index_blocks, index_misses, data_blocks, data_misses;
	uint64_t miss_bytes;
};

struct storage_read_cmd {
	const uint8_t *key; /* serialized partition key */
	size_t key_len;
	const struct storage_slice *slices; /* NULL: the whole partition */
	size_t slice_count;                 /* slices ascending, disjoint */
	bool reverse;
	uint32_t limit;          /* rows, 0 = unlimited */
	const uint16_t *columns; /* projection; NULL = every column */
	size_t column_count;
	bool with_static; /* include the static row */
	/* NULL, or what the read met is added there (not encoded: each
	 * node's read fills its own) */
	struct storage_read_stats *stats;
	/* Scans: only the SSTables pending for this incremental repair
	 * session (16 bytes), no memtable (NULL: everything). */
	const uint8_t *pending_repair;
};

struct storage_cell_view {
	uint16_t column;
	struct slice path; /* empty for simple columns */
	struct slice value;
	int64_t ts;
	int32_t ttl;    /* 0 when not expiring */
	int64_t expiry; /* seconds; 0 when not expiring */
};

struct storage_row_view {
	bool is_static;
	struct slice *clustering; /* ck_count values */
	size_t clustering_count;
	int64_t marker_ts; /* INT64_MIN without a live row marker */
	struct storage_cell_view *cells;
	size_t cell_count;
};

/* One partition's live data. Owns every byte it points at. */
struct storage_result {
	struct slice key;
	int64_t token;
	struct storage_row_view *static_row; /* NULL when absent/unwanted */
	struct storage_row_view *rows;
	size_t row_count;
	uint64_t tombstones; /* tombstones met while reading */
	void *priv;
};
void storage_result_delete(struct storage_result *r);

/* Reads one partition into *out (the caller frees it with
 * storage_result_delete); an absent partition gives a result with no rows.
 * Blocks (SSTable reads). Fails with ERR_CORRUPT when a block's checksum
 * fails, ERR_TOMBSTONES past tombstone_failure_threshold, ERR_NOT_FOUND for
 * an unknown table. */
int storage_read(struct storage *db, const uint8_t table_id[16],
		 const struct storage_read_cmd *cmd,
		 struct storage_result **out);

/* ---- fragments: replicated reads ------------------------------------------
 *
 * A fragment is a mutation holding what one replica has of one partition
 * within a read's slices, tombstones included, in a canonical form (see
 * docs/storage.md): a coordinator compares replicas' digests, merges their
 * fragments, resolves the merge into rows, and writes it back with
 * storage_mutation_encode / storage_mutation_decode / storage_apply (read
 * repair; skip empty ones). */

/* What this replica holds of partition cmd->key within cmd's slices (and
 * the static row when cmd->with_static), tombstones included (partition
 * deletion, range tombstones overlapping the slices, whole; row, cell and
 * collection tombstones; expired cells, as the tombstones compaction
 * makes of them), one reconciled version per atom, atoms a deletion
 * shadows left out. cmd->limit, cmd->reverse and
 * cmd->columns are ignored: the whole slice is returned, so merging
 * replicas never gives a short read. An absent partition gives an empty
 * mutation. The caller owns *out (storage_mutation_delete); it borrows
 * the table's meta. Fails like storage_read (ERR_OVERLOADED counts the
 * fragment's tombstones). Blocks. */
int storage_read_fragment(struct storage *db, const uint8_t table_id[16],
			  const struct storage_read_cmd *cmd,
			  struct storage_mutation **out);
/* storage_read_fragment from memory only: memtables, cached blocks, and
 * blocks the OS page cache holds (read with RWF_NOWAIT, never waiting for
 * the disk; bloom filters and summaries always are in memory). -1 with
 * ERR_AGAIN, having changed nothing, when a block it needs is in neither
 * cache, fails its checks (the blocking read reports that), or the partition
 * holds more than about a thousand cells: redo the read with
 * storage_read_fragment where blocking is allowed. Takes the engine mutex
 * only briefly, like a write: fit for an event loop. */
int storage_read_fragment_cached(struct storage *db, const uint8_t table_id[16],
				 const struct storage_read_cmd *cmd,
				 struct storage_mutation **out);

/* Pure (any thread): reconciles fragments of the same partition (same table id,
 * that of `t`, and key; else ERR_INVALID) into one new canonical mutation
 * (owned by the caller, borrowing `t`), by Cassandra's rules
 * (storage_atom_reconcile, storage_deletion_max, range tombstones kept). Inputs
 * are borrowed and may be decoded mutations (meta NULL). Commutative,
 * associative and idempotent: the result's encoding is the same byte for byte
 * whatever the order or grouping of the inputs. NULL on error (n == 0 is
 * ERR_INVALID). */
struct storage_mutation *
storage_fragment_merge(const struct storage_table_meta *t,
		       struct storage_mutation *const *frags, size_t n);

/* Pure (any thread): into *out (caller frees with storage_result_delete) what
 * storage_read with `cmd` (slices, static row, projection, reverse, limit,
 * TTL expiry at now_sec, deletions shadowing) would return if table `t`
 * held exactly fragment `f` (borrowed; cmd->key is ignored, f's is used).
 * Only `tombstones` may differ from a storage_read of the same data, as
 * fragments leave shadowed atoms out. */
int storage_fragment_resolve(const struct storage_table_meta *t,
			     const struct storage_mutation *f,
			     const struct storage_read_cmd *cmd,
			     int64_t now_sec, struct storage_result **out);

/* ---- fragment rows: row-level repair --------------------------------------
 *
 * A fragment seen as rows, for repair's Merkle trees and row-level sync:
 * the partition deletion and each range tombstone are pseudo-rows, then
 * each clustering (the static row first) with all its atoms. A row's id
 * is opaque bytes, equal on every replica for the same row (kind byte,
 * then the encoded clustering or range bounds); its digest is a 16-byte
 * MurmurHash3_x64_128 of the partition key, the id and the row's atoms
 * (values, timestamps, TTLs, tombstones), so canonical fragments holding
 * the same row give it the same digest. */

/* Calls fn(arg, id, digest) for each row of `f` (borrowed) in canonical
 * order; `id` is borrowed for the call. Stops at the first non-zero
 * return and returns it; 0 when every call returned 0, -1 with
 * ERR_NOMEM. */
typedef int (*storage_fragment_row_fn)(void *arg, struct slice id,
				       const uint8_t digest[16]);
int storage_fragment_rows(const struct storage_mutation *f,
			  storage_fragment_row_fn fn, void *arg);

/* A new fragment (owned by the caller, borrowing `t`, whose id must be
 * f's) with only the rows of `f` whose ids are among ids[0..n) (borrowed;
 * ids that `f` lacks are ignored), so merging the selections of every
 * row of `f` gives `f` back. NULL on error. */
struct storage_mutation *
storage_fragment_select_rows(const struct storage_table_meta *t,
			     const struct storage_mutation *f,
			     const struct slice *ids, size_t n);

/* A new fragment (owned by the caller, borrowing `t`) holding `f` without
 * the tombstones a compaction may purge: partition, range, row, collection
 * and cell deletions (expired cells included) whose deletion time is
 * before `gc_before` (now - gc_grace_seconds). Repair validates and
 * streams this view, so a replica that compacted a tombstone away and one
 * that did not yet agree. NULL on error. */
struct storage_mutation *
storage_fragment_purge(const struct storage_table_meta *t,
		       const struct storage_mutation *f, int64_t gc_before);

/* The internode form of a read command (versioned, bounds-checked; see
 * storage/read_cmd.c). Appends to `out`; ERR_INVALID for a command that
 * storage_read would refuse to read (slices given but none, a bound of
 * more than 32 values). */
int storage_read_cmd_encode(const struct storage_read_cmd *cmd,
			    struct buf *out);
/* Decodes untrusted bytes into *out: ERR_CORRUPT on anything malformed,
 * never a crash. The key, slices and columns are copied into `a` (live
 * while `a` is); `p` may be freed afterwards. */
int storage_read_cmd_decode(const uint8_t *p, size_t len, struct arena *a,
			    struct storage_read_cmd *out);

/* A reference to the registered table's newest meta (release it with
 * storage_table_meta_unref; it outlives an ALTER or a DROP of the table),
 * or NULL. */
const struct storage_table_meta *
storage_table_meta_acquire(struct storage *db, const uint8_t id[16]);

/* Range scan over (start_token, end_token] in token order, over the set of
 * memtables and SSTables of the moment it opens (flushes and compactions
 * may run meanwhile). `cmd` gives projection, slices and the per-partition
 * limit; its key is ignored. */
struct storage_scan;
struct storage_scan *storage_scan_open(struct storage *db,
				       const uint8_t table_id[16],
				       int64_t start_token, int64_t end_token,
				       const struct storage_read_cmd *cmd);
/* 1 with a partition in *out, 0 at the end, -1 on error. Blocks. */
int storage_scan_next(struct storage_scan *s, struct storage_result **out);
/* The same as a fragment per partition (storage_read_fragment), in token
 * order; partitions whose fragment would be empty are skipped. The caller
 * owns *out. 1 with a fragment, 0 at the end, -1 on error. Blocks. */
int storage_scan_next_fragment(struct storage_scan *s,
			       struct storage_mutation **out);
void storage_scan_close(struct storage_scan *s);
/* Counts the scan, from its open to now, as one range read of its table
 * (storage_table_hists' scan_us): a replica's answer to a range command,
 * never a repair's or a compaction's scan. */
void storage_scan_count(struct storage_scan *s);
/* The same for a range read answered otherwise (an index query's
 * candidates read one by one), `us` long. */
void storage_table_count_range(struct storage *db, const uint8_t table_id[16],
			       uint64_t us);

/* ---- storage-attached indexes ----------------------------------------------
 *
 * Each memtable keeps an index of the terms its writes brought, and each
 * SSTable a component per index (docs/indexes.md). They over-report:
 * a deleted, expired or overwritten value stays a candidate until
 * compaction drops it, so whoever reads the candidates re-checks the
 * data; they never miss a partition that holds a live matching value. */

/* Candidate partitions, in token order, each once. Owns its bytes. */
struct storage_index_keys {
	size_t count;
	int64_t *tokens;
	struct slice *keys;
	/* Per entry: the row of the partition (its encoded clustering, as
	 * storage_read_fragment_rows takes it), or empty: the partition
	 * whole. An index on a regular column of a table with clustering
	 * columns lists rows; a partition's entries are adjacent (its key
	 * repeats), the partition whole (if listed) first and then alone.
	 * NULL: every entry is a partition. */
	struct slice *rows;
	/* SSTables (and memtables) the index could not serve (no component
	 * for the index, missing or corrupt): every partition they hold in
	 * the range is a candidate */
	uint64_t scanned;
	/* Index entries the lookup walked (components' decoded entries,
	 * memtables' term entries): a paged step's work */
	uint64_t visited;
	struct buf bytes; /* the keys' */
	/* A lookup stopped by its page's limit (or a set operation over
	 * one): the candidates are exact up to and including the resume
	 * position (resume_token, resume_key) only; ask again with the page
	 * resuming after it. The resume position is the last candidate of a
	 * lookup; of an intersection or union it need not be one of its
	 * keys. */
	bool more;
	int64_t resume_token;
	struct slice resume_key; /* in resume_bytes */
	struct buf resume_bytes;
};
void storage_index_keys_free(struct storage_index_keys *k);
/* A partition with more matching rows than this is listed whole. */
#define SAI_ROWS_MAX 256

/* storage_read_fragment of partition cmd->key within only the rows
 * `rows` (n, an index's entries of it: encoded clusterings, any order,
 * repeats allowed) that lie in cmd->slices (every one without slices:
 * the query's clustering restrictions intersected with the index's
 * rows), the static row as cmd->with_static says. None left: an empty
 * fragment. Blocks. */
int storage_read_fragment_rows(struct storage *db, const uint8_t table_id[16],
			       const struct storage_read_cmd *cmd,
			       const struct slice *rows, size_t n,
			       struct storage_mutation **out);

/* cmd restricted to rows[0..n) of its partition (encoded clusterings, as
 * storage_read_fragment_rows takes them; any order, repeats allowed)
 * that lie in cmd->slices (all without slices): *out is cmd with one
 * single-row slice per distinct such row, ascending in t's order (none:
 * zero slices, which read nothing), the slices in `a` (live while `a`
 * is; rows are borrowed).
 * Replica filtering protection asks a replica for those rows alone.
 * ERR_CORRUPT for a clustering that is not a row's, ERR_NOMEM. */
int storage_read_cmd_rows(const struct storage_table_meta *t,
			  const struct storage_read_cmd *cmd,
			  const struct slice *rows, size_t n, struct arena *a,
			  struct storage_read_cmd *out);

/* How much of a candidate lookup to answer: at most `limit` candidates
 * (0: every one), the first partitions after (after_token, after_key)
 * when `after` (a previous answer's resume position), in token order.
 * Bounds the answer's memory to about `limit` keys, and an SSTable
 * component's work to about `limit` entries and a block per term (a
 * lookup seeks to `after` in each term's keys and stops a term after
 * `limit` partitions); a memtable's index still walks every entry of its
 * terms (they are in write order). */
struct storage_index_page {
	size_t limit;
	bool after;
	int64_t after_token;
	struct slice after_key;
};

/* Set operations over candidate key sets (each in token order, each key
 * once, as the lookups give them), into *out (free it with
 * storage_index_keys_free; its `scanned` is the inputs' sum). Where an
 * input has `more`, the result stops at the earliest such input's resume
 * position and has `more` with that resume position: the result is exact
 * up to there. intersect: the partitions of both (two ANDed indexed
 * restrictions); union: of any of sets[0..n) (an IN's values). 0, or -1
 * (ERR_NOMEM). */
int storage_index_keys_intersect(const struct storage_index_keys *a,
				 const struct storage_index_keys *b,
				 struct storage_index_keys *out);
int storage_index_keys_union(const struct storage_index_keys *sets, size_t n,
			     struct storage_index_keys *out);

/* The partitions of table `table_id` within token range (start, end]
 * (start == end: the whole ring; start > end: ERR_INVALID, split it) that
 * may hold `vals` in index `index`: the indexed value (vals[0], n 1; for
 * an entries index key and value, n 2, or n 1 with both as one
 * tuple<key, value> value) as the client sends it. Merged
 * over the memtables and SSTables of the moment. ERR_NOT_FOUND for an
 * unknown table, ERR_INVALID for an unknown index, ERR_UNSUPPORTED for
 * one whose terms cannot decide equality (decimals: scan instead).
 * `page` (NULL: every candidate) bounds the answer: out->more when it
 * stopped at page->limit. Fills *out (free it with
 * storage_index_keys_free). Blocks (loads components). */
int storage_index_candidates(struct storage *db, const uint8_t table_id[16],
			     const char *index, const struct slice *vals,
			     size_t n, int64_t start_token, int64_t end_token,
			     const struct storage_index_page *page,
			     struct storage_index_keys *out);

/* A bound of a range of indexed values (as the client sends them). */
struct storage_index_bound {
	struct slice value;
	bool incl;
};
/* storage_index_candidates for the values within [lo, hi] in the column
 * type's order (a bound NULL: unbounded; incl false: exclusive); not for
 * an entries index (ERR_INVALID). */
int storage_index_candidates_range(struct storage *db,
				   const uint8_t table_id[16],
				   const char *index,
				   const struct storage_index_bound *lo,
				   const struct storage_index_bound *hi,
				   int64_t start_token, int64_t end_token,
				   const struct storage_index_page *page,
				   struct storage_index_keys *out);

/* Building an index over existing data (docs/indexes.md, "Building an
 * index"): CREATE INDEX on a table holding data, a restart finding
 * SSTables without the index's component, or storage_index_rebuild
 * start a build on the engine's index builder thread. Until it finishes
 * the candidate calls above answer ERR_INDEX_NOT_AVAILABLE. */
enum { STORAGE_INDEX_BUILT = 0, STORAGE_INDEX_BUILDING = 1 };
/* STORAGE_INDEX_BUILT / _BUILDING, or -1 (ERR_NOT_FOUND: no such table or
 * index). Any thread, never blocks. */
int storage_index_state(struct storage *db, const uint8_t table_id[16],
			const char *index);
/* Rebuilds every SSTable's component of the index (nodetool
 * rebuild_index): the index is unavailable until done. 0, or -1
 * (ERR_NOT_FOUND). Returns at once. */
int storage_index_rebuild(struct storage *db, const uint8_t table_id[16],
			  const char *index);
/* A build under way (or waiting, or failed). */
struct storage_index_build_info {
	uint8_t table_id[16];
	uint8_t task_id[16];
	char index[128];
	uint64_t completed, total; /* Data.db bytes of the SSTables to build */
	bool running, failed;
};
/* Test clusters (the indexbuildfault admin command): while held, a
 * build waits before its first SSTable (running, at 0 of its total);
 * released, they go on. */
void storage_index_builds_hold(struct storage *db, bool hold);
/* Test clusters (indexbuildfault fail|ok): while set, every build fails
 * at its first SSTable with an I/O error, as a disk error would make it. */
void storage_index_builds_fail(struct storage *db, bool fail);
/* The bytes on disk of index `index`'s components over the table's live
 * SSTables (tablestats). -1 with ERR_NOT_FOUND for an unknown table. */
int storage_index_disk_bytes(struct storage *db, const uint8_t table_id[16],
			     const char *index, uint64_t *bytes);
/* Fills up to `cap` of the builds; returns how many there are. */
size_t storage_index_builds(struct storage *db,
			    struct storage_index_build_info *out, size_t cap);

/* ---- maintenance and statistics ------------------------------------------ */

/* Flushes the table's memtable (NULL id: every table) and waits. Blocks. */
int storage_flush(struct storage *db, const uint8_t *table_id);
/* Runs compaction rounds for the table until none applies; `major` merges
 * every SSTable into one. Blocks. */
int storage_compact(struct storage *db, const uint8_t table_id[16], bool major);
/* Test clusters (the compactionfault admin command): while held, a major
 * compaction asked for (storage_compact) waits before its merge, running
 * (compactionstats lists it at 0%); released, it goes on. */
void storage_compactions_hold(struct storage *db, bool hold);
/* Wakes the compactor when an SSTable becomes fully droppable (nothing but
 * tombstones and expired cells, all past gc_grace), with a timer of the
 * engine's env: call on the loop thread that owns the env's timers, after
 * storage_start; the timer fires there, its re-arms (an SSTable flushed
 * or imported that expires sooner) come through the post hook, and
 * storage_delete is then to be called on that thread too. -1 when the
 * env has no timers. Only matters with auto compaction on. */
int storage_droppable_watch_start(struct storage *db);

/* A compaction running now (Cassandra's CompactionInfo, as
 * compactionstats and system_views.sstable_tasks show it). */
struct storage_compaction_info {
	uint8_t table_id[16];
	uint8_t task_id[16];
	const char *kind; /* "Compaction", "Cleanup", "Tombstone Compaction",
			   * "Secondary index build" */
	uint64_t completed, total; /* bytes of the inputs' Data.db */
};
/* Fills up to `cap` of the compactions running now (one per table at
 * most); returns how many run (may exceed cap). Any thread. */
size_t storage_compactions_active(struct storage *db,
				  struct storage_compaction_info *out,
				  size_t cap);

/* A token range (left, right], left < right. */
struct storage_token_range {
	int64_t left, right;
};
/* nodetool cleanup: flushes the table, then rewrites all its SSTables into
 * one that keeps only the partitions whose token lies in one of `keep`
 * (sorted, non-overlapping; the ranges this node replicates), as a major
 * compaction would (purgeable tombstones go too). *dropped (may be NULL)
 * gets the partitions left out. Blocks. */
int storage_cleanup(struct storage *db, const uint8_t table_id[16],
		    const struct storage_token_range *keep, size_t nkeep,
		    uint64_t *dropped);
/* nodetool garbagecollect: each SSTable rewritten alone without what the
 * table's other SSTables shadow (deleted partitions and rows; with
 * `cell`, also cells they hold newer) and its purgeable tombstones, as
 * Cassandra's single-SSTable "Remove deleted data" compactions. Blocks. */
int storage_garbagecollect(struct storage *db, const uint8_t table_id[16],
			   bool cell);
/* nodetool scrub: each SSTable rewritten alone, the partitions whose
 * blocks fail their checksum or do not decode dropped (*dropped; the log
 * names each), the others kept (*kept). A counter table's corrupt
 * partition fails it (ERR_CORRUPT) unless skip_corrupted, as in
 * Cassandra. The caller snapshots first. Blocks. */
int storage_scrub(struct storage *db, const uint8_t table_id[16],
		  bool skip_corrupted, uint64_t *kept, uint64_t *dropped);

/* ---- toppartitions' and profileload's samplers (storage/sampler.c) ------
 *
 * Per table, in a window: the partitions read (point reads) and written
 * most often, a Space-Saving top-k of `capacity` counters (READS,
 * WRITES); and the reads and writes with the largest figure (the rest), a
 * top `capacity` of single operations by that figure, a partition may
 * appear more than once, as in Cassandra's MaxSampler: the live rows
 * (READ_ROW_COUNT), tombstones (READ_TOMBSTONE_COUNT) and SSTables
 * (READ_SSTABLE_COUNT) a point read met, a mutation's bytes (WRITE_SIZE).
 * The kinds are in Cassandra's SamplerType order. Not sampling costs the
 * reads and writes one relaxed load of a flag word. Begin and finish are
 * the caller's to pair (one window at a time per table and kind: a second
 * begin is refused, ERR_INVALID "already sampling"). */
enum {
	STORAGE_SAMPLE_READS,
	STORAGE_SAMPLE_WRITES,
	STORAGE_SAMPLE_READ_ROW_COUNT,
	STORAGE_SAMPLE_READ_TOMBSTONE_COUNT,
	STORAGE_SAMPLE_READ_SSTABLE_COUNT,
	STORAGE_SAMPLE_WRITE_SIZE,
	STORAGE_SAMPLERS
};
#define STORAGE_SAMPLE_MAX_CAPACITY 65536
int storage_sample_begin(struct storage *db, const uint8_t table_id[16],
			 unsigned kinds, size_t capacity);
struct storage_sample {
	uint8_t *key; /* the serialized partition key */
	size_t key_len;
	/* count overestimates by at most error; the figure for the
	 * largest-figure kinds (error 0) */
	uint64_t count, error;
};
/* Ends kind's window: its top `k` (count descending) in *out, *n of
 * them (free with storage_samples_free; out may be NULL: just stop), and
 * the distinct keys it counted (*cardinality, at most capacity). */
int storage_sample_finish(struct storage *db, const uint8_t table_id[16],
			  int kind, size_t k, struct storage_sample **out,
			  uint64_t *n, uint64_t *cardinality);
void storage_samples_free(struct storage_sample *s, size_t n);

/* ---- incremental repair -------------------------------------------------
 *
 * An SSTable is unrepaired, pending an incremental repair session (a
 * 16-byte id) or repaired (repaired_at > 0, milliseconds). All of these
 * block (disk work): call them off the event loop. */

/* Prepare: flushes the table, then marks as pending for `session` every
 * unrepaired SSTable that lies within `ranges` (sorted, non-overlapping,
 * non-wrapping) and anticompacts every one that lies partly inside: it
 * is rewritten into the part inside (pending) and the rest (unrepaired),
 * both at level 0. Waits for a running compaction of the table.
 * *marked (may be NULL) gets the SSTables marked whole, *split those
 * anticompacted. */
int storage_repair_anticompact(struct storage *db, const uint8_t table_id[16],
			       const struct storage_token_range *ranges,
			       size_t nranges, const uint8_t session[16],
			       uint64_t *marked, uint64_t *split);
/* Finalize (repaired_at > 0: they become repaired at that time) or fail
 * (0: unrepaired again) every SSTable of the table pending for `session`
 * (NULL: for any session). Rewrites only their Statistics.db. *count (may
 * be NULL) gets how many changed. */
int storage_repair_set_state(struct storage *db, const uint8_t table_id[16],
			     const uint8_t *session, int64_t repaired_at,
			     uint64_t *count);
/* Writes `m[0..n)` (one table's) into a new SSTable pending for `session`
 * (an incremental repair's streamed data) and adds it to the table; fsynced
 * before it returns. */
int storage_repair_ingest(struct storage *db, const uint8_t table_id[16],
			  const struct storage_mutation *const *m, size_t n,
			  const uint8_t session[16]);
/* The table's SSTables by state: unrepaired, pending (any session),
 * repaired; and their Data.db bytes. */
struct storage_repair_counts {
	uint64_t unrepaired, pending, repaired;
	uint64_t unrepaired_bytes, pending_bytes, repaired_bytes;
};
int storage_repair_counts(struct storage *db, const uint8_t table_id[16],
			  struct storage_repair_counts *out);
/* One live SSTable of a table and its repair state (tests, tools). */
struct storage_sstable_info {
	uint64_t gen;
	const char *path; /* ".../ca-GEN", the components' prefix */
	int64_t repaired_at;
	bool pending; /* pending_repair names a session */
	uint8_t pending_repair[16];
	uint32_t level;
	int64_t min_token, max_token;
	uint64_t partitions, data_bytes;
};
typedef void (*storage_sstable_fn)(void *arg,
				   const struct storage_sstable_info *s);
/* Calls each(arg, info) for every SSTable of the table's current set, in
 * the set's order, with no engine lock held (the files stay while the
 * call runs). -1 with ERR_NOT_FOUND for an unknown table. */
int storage_sstables(struct storage *db, const uint8_t table_id[16],
		     storage_sstable_fn each, void *arg);

/* nodetool snapshot: flushes the table, then hard-links its SSTables into
 * <table dir>/snapshots/<tag>/ (ERR_EXISTS when that tag exists;
 * ERR_INVALID for an empty tag or one with '/'). Blocks. */
int storage_snapshot(struct storage *db, const uint8_t table_id[16],
		     const char *tag);
struct storage_snapshot_info {
	const char *tag;     /* borrowed for the call */
	uint64_t bytes;      /* its files' sizes */
	uint64_t true_bytes; /* of files the table no longer has */
};
typedef void (*storage_snapshot_fn)(void *arg,
				    const struct storage_snapshot_info *s);
/* Calls each(arg, info) for every snapshot of the table. Blocks (disk). */
int storage_snapshot_list(struct storage *db, const uint8_t table_id[16],
			  storage_snapshot_fn each, void *arg);
/* nodetool verify: checks every checksum of each live SSTable of the table
 * (as storage_sstable_verify does offline), logging each corrupt one with
 * what failed. 0 when all are sound; -1 with ERR_CORRUPT when *corrupt of
 * *sstables are not (or another error). Blocks (reads every SSTable). */
int storage_verify(struct storage *db, const uint8_t table_id[16],
		   size_t *sstables, size_t *corrupt);
/* nodetool import / refresh (storage/sstable_import.c): the SSTables of
 * each directory in `dirs` (none: refresh, those in the table's own
 * directory that are not live) join the table's live set under fresh
 * generations, all at once and durably (a crash leaves all or none of
 * them, never two copies). A directory any of whose SSTables fails the
 * checks (`verify`: every checksum; `check_tokens`: every partition's
 * token in one of `owned`, the ranges this node replicates) is left out
 * whole and failed[i] set; the others still load. Sources are moved
 * (hard links, then unlinked) unless `copy`. The new SSTables are level
 * 0 unless keep_level and unrepaired unless keep_repaired. *imported
 * gets how many loaded. -1 on an error that stops it all (a directory
 * that does not exist: ERR_NOT_FOUND "Directory %s does not exist").
 * Blocks (reads every SSTable it checks). */
struct storage_import_options {
	const char *const *dirs;
	size_t ndirs;
	bool keep_level, keep_repaired, verify, extended, copy;
	bool check_tokens;
	const struct storage_token_range *owned; /* sorted */
	size_t nowned;
};
int storage_import(struct storage *db, const uint8_t table_id[16],
		   const struct storage_import_options *o, bool *failed,
		   size_t *imported);
/* Deletes the table's snapshot `tag` (NULL: all of them). Blocks. */
int storage_snapshot_clear(struct storage *db, const uint8_t table_id[16],
			   const char *tag);

/* Empties the table, as CQL TRUNCATE: afterwards it reads empty, its
 * memtables are dropped and every SSTable is unlinked (once no read or scan
 * holds it); writes applied after the call began are kept. Waits for a
 * running flush or compaction of the table first, so neither can bring old
 * data back. Durable before anything is dropped: the table's truncation
 * point (the commitlog position of the moment) is written to
 * <table dir>/truncated.txt (temp file, fsync, rename), and a restart skips
 * the table's older commitlog records. The engine lock is not held across
 * that fsync (writes go on); if it fails nothing is dropped and -1 is
 * returned. ERR_NOT_FOUND for an unknown table, ERR_CLOSED before
 * storage_start. Blocks (an fsync, waits). */
int storage_truncate(struct storage *db, const uint8_t table_id[16]);
/* The wall-clock time (env, microseconds) of the table's last truncate,
 * kept across restarts; 0 when never truncated or unknown. */
int64_t storage_truncated_at(struct storage *db, const uint8_t table_id[16]);

struct storage_stats {
	uint64_t memtable_bytes;      /* exact arena bytes of live memtables */
	uint64_t memtable_data_bytes; /* what the writes in them hold */
	uint64_t sstable_count;
	uint64_t sstable_bytes;
	/* partitions in memtables and SSTables, summed: a partition in
	 * several counts several times (an upper bound, for planning) */
	uint64_t estimated_partitions;
	uint64_t flushes;
	uint64_t compactions;
	/* Data.db and Index.db bytes written by flushes and by compactions
	 * since start (Cassandra's BytesFlushed, CompactionBytesWritten;
	 * their sum over the bytes ingested: write amplification) */
	uint64_t flushed_bytes;
	uint64_t compaction_bytes_written;
	/* of them, single-SSTable tombstone compactions */
	uint64_t tombstone_compactions;
	/* partition reads past tombstone_warn_threshold, and those that
	 * failed past tombstone_failure_threshold, since start */
	uint64_t tombstone_warnings;
	uint64_t tombstone_failures;
	/* Estimated droppable tombstones of the SSTables (cell-weighted, at
	 * now - gc_grace_seconds), times 1e6 */
	uint64_t droppable_tombstones_ppm;
	/* mutations applied and point reads answered since start (nodetool
	 * tablestats' local write and read counts; scans not counted) */
	uint64_t local_writes;
	uint64_t local_reads;
	uint64_t corrupt_blocks;       /* reads that failed a checksum */
	uint64_t commitlog_torn_tails; /* records discarded at replay */
	uint64_t commitlog_replayed;   /* mutations replayed at start */
	/* records that held values invalid for their column's type
	 * (logged before values were validated): replayed without them */
	uint64_t commitlog_invalid;
	uint64_t commitlog_segments; /* live segments */
	/* batch and group since start: fdatasyncs that made writes durable
	 * and the records they covered (their ratio: writes per sync) */
	uint64_t commitlog_syncs;
	uint64_t commitlog_sync_writes;
	uint64_t commitlog_sync_us; /* time those syncs took */
	/* group: sync leaders that waited for the rest of their group, and
	 * the time they waited */
	uint64_t commitlog_gathers;
	uint64_t commitlog_gather_us;
	bool writes_stopped; /* a disk or commit failure stopped writes */
	/* writes that found the memtables full: waiting now, that waited
	 * since start, and that failed (the waiting room was full, or they
	 * waited write_wait_ms) */
	uint64_t writes_waiting;
	uint64_t writes_waited;
	uint64_t writes_refused;
	uint64_t sstables_excluded; /* corrupt, left out (best_effort) */
	/* compactions due now (a background round would start one) or
	 * running: per table 0, 1 or 2 (compactionstats' pending tasks) */
	uint64_t compactions_pending;
	/* the inputs' Data.db bytes of the compactions done since start
	 * (Cassandra's BytesCompacted), and what the running ones have left
	 * to read (compactionstats' remaining) */
	uint64_t bytes_compacted;
	uint64_t compaction_remaining_bytes;
};
int storage_stats(struct storage *db, const uint8_t *table_id,
		  struct storage_stats *out);

/* One table's histograms (tablehistograms; Cassandra's Table
 * ReadLatency, WriteLatency, SSTablesPerReadHistogram,
 * EstimatedPartitionSizeHistogram, EstimatedColumnCountHistogram), in
 * common/loghist.h's buckets, since start:
 *   read_us     point reads answered here (the replica's storage read)
 *   write_us    mutations applied here (commitlog append + memtable)
 *   sstables    SSTables each of those reads read
 *   scan_us     range reads answered here (storage_scan_count: Cassandra's
 *               RangeLatency)
 *   partition_bytes  the live SSTables' partitions by size (each
 *               SSTable's Statistics.db histogram; a partition in two
 *               SSTables counts twice; memtables not counted)
 *   cells       the same partitions by cell count, estimated: an
 *               SSTable's partitions all count at its mean cells per
 *               partition (Statistics.db keeps no per-partition count) */
struct storage_hist {
	uint64_t count, sum;
	uint64_t buckets[LOGHIST_BUCKETS];
};
struct storage_table_hists {
	struct storage_hist read_us, write_us, sstables, scan_us;
	/* live rows and tombstones each of those reads met (Cassandra's
	 * LiveScannedHistogram, TombstoneScannedHistogram) */
	struct storage_hist live_rows, tombstones;
	struct storage_hist partition_bytes, cells;
};
/* -1 (ERR_NOT_FOUND) when the table does not exist. */
int storage_table_histograms(struct storage *db, const uint8_t table_id[16],
			     struct storage_table_hists *out);

/* The block cache's figures (system_views.caches' `chunks` row): its
 * capacity and the bytes and blocks it holds now, lookups and hits since
 * start. */
struct storage_cache_stats {
	uint64_t capacity_bytes, size_bytes, entries;
	uint64_t hits, requests;
};
void storage_cache_stats(struct storage *db, struct storage_cache_stats *out);

struct ratelimit;
/* compaction_throughput's budget (common/ratelimit.h), for other disk
 * work that shares it (repair validation): any thread, while db lives. */
struct ratelimit *storage_throughput_budget(struct storage *db);

#endif
