/*
 * Offline SSTable inspection, for cassini-tool sstablemetadata and
 * sstabledump: reads one generation's files directly, with no engine, no
 * schema and no writes. Every component is checked (magic, version,
 * checksums) and a damaged one is reported, never trusted: the caller gets
 * -1 with ERR_CORRUPT naming the file, or, for metadata, the figures of
 * the components that did read and a list of the problems.
 *
 * `path` is any component of the generation (".../ca-5-Data.db") or its
 * prefix (".../ca-5").
 */
#ifndef CASSINI_STORAGE_SSTABLE_TOOL_H
#define CASSINI_STORAGE_SSTABLE_TOOL_H

#include "common/env.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORAGE_SSTABLE_SIZE_BUCKETS 40
#define STORAGE_SSTABLE_TOMB_BINS    100

struct storage_sstable_meta {
	char dir[1024];
	uint64_t gen;
	/* Statistics.db */
	bool stats_ok;
	uint8_t stats_version; /* 1 to 4 */
	int64_t min_token, max_token;
	int64_t min_ts, max_ts;   /* microseconds */
	int64_t min_ldt, max_ldt; /* seconds; INT64_MAX / INT64_MIN: none */
	int64_t repaired_at;
	uint64_t cells, tombstones, partitions;
	uint64_t commitlog_segment, commitlog_offset;
	uint64_t data_size; /* Data.db bytes, as the statistics say */
	bool has_live_no_ttl;
	uint64_t size_hist[STORAGE_SSTABLE_SIZE_BUCKETS]; /* log2 bytes */
	/* version 2 only (zero in version 1) */
	int64_t created_at; /* seconds */
	uint64_t uncompressed_size;
	uint64_t markers; /* partition deletions + range tombstones */
	int64_t min_ttl, max_ttl;
	size_t tomb_bins;
	int64_t tomb_point[STORAGE_SSTABLE_TOMB_BINS];
	uint64_t tomb_count[STORAGE_SSTABLE_TOMB_BINS];
	uint32_t level; /* leveled compaction (version 3; else 0) */
	bool pending;   /* pending_repair names a session (version 4) */
	uint8_t pending_repair[16];
	/* Filter.db */
	bool filter_ok;
	uint64_t bloom_bits;
	uint32_t bloom_k;
	/* Summary.db */
	bool summary_ok;
	uint64_t index_blocks;
	/* file sizes on disk (-1: missing) */
	int64_t data_bytes, index_bytes;
	/* What failed to read, "; "-separated (empty when all is well). */
	char problems[1024];
};

/* Reads what it can of the generation at `path`. 0 when every component
 * read and checked out; -1 otherwise, with what did read in *out and
 * out->problems saying the rest (err set to the first problem). */
int storage_sstable_meta_read(struct env *env, const char *path,
			      struct storage_sstable_meta *out);
/* Estimated share of droppable tombstones before `gc_before` (seconds):
 * Cassandra's "Estimated droppable tombstones"; 0 without version 2. */
double storage_sstable_droppable(const struct storage_sstable_meta *m,
				 int64_t gc_before);
/* The bloom filter's false-positive chance for its partition count. */
double storage_sstable_bloom_fp(const struct storage_sstable_meta *m);

/* One column slot of the layout Statistics.db version 5 records (what
 * Cassandra keeps as the serialization header), in slot order. */
struct storage_sstable_column {
	char *name;
	char *type;   /* CQL text (storage_type_format) */
	uint8_t kind; /* STORAGE_COLUMN_* */
	bool desc;    /* a clustering column in DESC order */
	bool dropped; /* dropped before the SSTable was written */
};

/* The column layout of the generation at `path`: *out malloc'ed (free it
 * with storage_sstable_columns_free), *n slots; 0 with *n 0 (*out NULL)
 * when Statistics.db is older than version 5 and records none. -1 when
 * Statistics.db is missing or damaged (ERR_CORRUPT naming it). */
int storage_sstable_columns_read(struct env *env, const char *path,
				 struct storage_sstable_column **out,
				 size_t *n);
void storage_sstable_columns_free(struct storage_sstable_column *c, size_t n);

/* One atom of Data.db as stored (see storage/atom_internal.h): slot 0 is
 * the row (kind 0 deletion, 1 liveness), slot n+1 column n. Pointers
 * borrow the walk's block until the callback returns. */
struct storage_sstable_atom {
	const uint8_t *ck; /* encoded clustering */
	size_t ck_len;
	uint16_t slot;
	uint8_t kind;
	bool tombstone, expiring;
	const uint8_t *path; /* collection element key */
	size_t path_len;
	int64_t ts;  /* microseconds */
	int32_t ttl; /* seconds, expiring only */
	int64_t ldt; /* seconds: expiry or deletion time */
	const uint8_t *value;
	size_t value_len;
};

/* A partition from Index.db. */
struct storage_sstable_partition {
	const uint8_t *key; /* the serialized partition key */
	size_t key_len;
	int64_t token;
	bool deleted; /* partition deletion: */
	int64_t del_ts, del_ldt;
	size_t range_tombstones;
	size_t row_index_entries;
};

struct storage_sstable_dump_fns {
	/* Any callback returning non-zero stops the walk (its result is
	 * returned). */
	int (*partition)(void *arg, const struct storage_sstable_partition *p);
	int (*atom)(void *arg, const struct storage_sstable_atom *a);
	int (*partition_end)(void *arg);
	void *arg;
};

/* Walks every partition of Index.db and Data.db in order, checking every
 * block; with `key` (len key_len), only that partition. -1 with
 * ERR_CORRUPT (file and offset) on damage, after the callbacks of what
 * read before it. */
int storage_sstable_dump(struct env *env, const char *path, const uint8_t *key,
			 size_t key_len,
			 const struct storage_sstable_dump_fns *fns);

/* Verifies every checksum of the generation at `path` (Cassandra's
 * sstableverify): TOC.txt present; Statistics.db, Filter.db and Summary.db
 * (magic, version, crc, decode); every block of Data.db and Index.db in
 * file order (crc, decompression), Data.db's size against the statistics;
 * then every partition through the index (keys, entries, atoms); then
 * every index component TOC.txt lists (each block, the directory: a
 * damaged one is "Corrupted: <path> (index component)"). 0 when
 * all checks out (*partitions: how many read); -1 with what failed,
 * "; "-separated and naming the component (and the offset of a block), in
 * problems (cap bytes), err set to the first. */
int storage_sstable_verify(struct env *env, const char *path,
			   uint64_t *partitions, char *problems, size_t cap);

#endif
