/*
 * The read merge: every source (memtables, SSTables) adds what it holds of
 * one partition within the requested slices to a read context; finishing
 * the context reconciles duplicates, applies deletions and TTL expiry, and
 * builds the caller's rows.
 *
 * Atoms added to a context borrow their bytes: the source must keep them
 * live until the context is destroyed (a memtable reference, or a block
 * handed to storage_read_ctx_keep).
 */
#ifndef CASSINI_STORAGE_READ_INTERNAL_H
#define CASSINI_STORAGE_READ_INTERNAL_H

#include "storage/memtable_internal.h"
#include "storage/storage.h"

struct read_bound {
	struct slice start, end; /* encoded prefixes */
	bool start_incl, end_incl;
};

struct read_keep {
	void *p;
	void (*release)(void *p);
};

/* Cells past which a memory-only read gives up (ERR_AGAIN). */
#define READ_CACHED_MAX_ATOMS 1024u

struct read_ctx {
	const struct storage_table_meta *t;
	const struct storage_read_cmd *cmd;
	struct read_bound *bounds; /* one per slice; one unbounded if none */
	size_t bound_count;
	struct buf bound_bytes;
	int64_t now_sec;
	int64_t warn_threshold, fail_threshold;
	/* storage_read_ctx_check_tombstones' verdicts (tablestats counts them)
	 */
	uint64_t tombstone_warnings, tombstone_failures;
	/* live rows and tombstones storage_read_ctx_check_tombstones saw */
	uint64_t seen_live_rows, seen_tombstones;

	bool found;
	bool cached_only; /* fail with ERR_AGAIN rather than read the disk */
	bool have_hash;   /* key_hash holds the bloom hash of the key */
	/* point reads: SSTables whose key range and bloom filter let the
	 * read in (Cassandra's SSTablesPerRead counts these) */
	unsigned sstables_touched;
	uint64_t key_hash[2];
	struct deletion pdel;
	struct rtomb *rts;
	size_t rt_count, rt_cap;
	struct atom *atoms;
	size_t atom_count, atom_cap;
	struct read_keep *keep;
	size_t keep_count, keep_cap;
};

int storage_read_ctx_init(struct read_ctx *c,
			  const struct storage_table_meta *t,
			  const struct storage_read_cmd *cmd, int64_t now_sec);
/* Resets the per-partition state for the next partition of a scan. */
void storage_read_ctx_reset(struct read_ctx *c);
void storage_read_ctx_destroy(struct read_ctx *c);

/* Whether an atom with this clustering belongs to the read. */
bool storage_read_ctx_wants(const struct read_ctx *c, struct slice ck);
/* True once `ck` is past the last slice: a forward source may stop. */
bool storage_read_ctx_past_end(const struct read_ctx *c, struct slice ck);
int storage_read_ctx_add_atom(struct read_ctx *c, const struct atom *a);
int storage_read_ctx_add_rtomb(struct read_ctx *c, const struct rtomb *r);
void storage_read_ctx_add_pdel(struct read_ctx *c, struct deletion d);
/* Takes ownership of a malloc'ed buffer the added atoms point into. */
int storage_read_ctx_keep(struct read_ctx *c, void *p);
/* Holds `p` (released with `release`) until the context is reset. */
int storage_read_ctx_keep_ref(struct read_ctx *c, void *p,
			      void (*release)(void *));

/* Adds a memtable's part of the partition (the memtable must stay
 * referenced until the context is destroyed). */
int storage_read_ctx_add_memtable(struct read_ctx *c, const struct memtable *mt,
				  int64_t token, struct slice key);
int storage_read_ctx_add_mt_partition(struct read_ctx *c,
				      struct mt_partition *p);

/* Sorts the atoms and reconciles equal ones in place. */
void storage_read_ctx_merge(struct read_ctx *c);

/* Builds the result. */
int storage_read_ctx_finish(struct read_ctx *c, int64_t token, struct slice key,
			    struct storage_result **out);
/* ERR_OVERLOADED past the failure threshold; logs past the warning one. */
/* Cassandra's tombstone thresholds for one partition read that met `n`
 * tombstones and `live_rows` live rows: past the warning one, logs "Read
 * N live rows and M tombstone cells for query ..."; past the failure one,
 * -1 with ERR_TOMBSTONES. */
int storage_read_ctx_check_tombstones(struct read_ctx *c, uint64_t n,
				      uint64_t live_rows, int64_t token);

/* fragment.c: the context's raw contents (range tombstones that overlap
 * its slices, every atom reconciled once, shadowed ones dropped) as a
 * mutation of partition `key` of c->t, which it borrows. */
int storage_read_ctx_fragment(struct read_ctx *c, int64_t token,
			      struct slice key, struct storage_mutation **out);

#endif
