/*
 * Keyspace and table metadata: what the storage engine needs to know about
 * a table to store and order its data.
 *
 * These are plain descriptors. The Client issue creates them from CQL DDL
 * and spreads them through the cluster; storage only reads them. A table's
 * columns are numbered by their index in `columns`; that number is what
 * mutations and read results carry, so a column list is append-only for
 * the life of a table (a dropped column keeps its slot).
 *
 * Schema evolution (ALTER TABLE): a table's meta is replaced by a newer
 * version with storage_table_update. A newer version may only append
 * columns and mark columns dropped; a column number never changes meaning,
 * so commitlog records, SSTables and memtables written under any earlier
 * version stay readable without rewriting. A dropped column's cells are
 * never read again and compaction purges them; a column re-added under the
 * same name gets a new slot, ignores cells written at or before the
 * earlier drop, and reads the old slot's cells written after it
 * (Cassandra's rule for re-added columns: storage_column_read_as).
 */
#ifndef CASSINI_STORAGE_SCHEMA_H
#define CASSINI_STORAGE_SCHEMA_H

#include "storage/types.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum storage_column_kind {
	STORAGE_COLUMN_PARTITION_KEY = 0,
	STORAGE_COLUMN_CLUSTERING,
	STORAGE_COLUMN_REGULAR,
	STORAGE_COLUMN_STATIC,
};

/* "partition key", "clustering", "regular", "static" ("unknown" past
 * them), as layout errors and sstablemetadata name a column's kind. */
const char *storage_column_kind_name(unsigned kind);

struct storage_column {
	char *name;
	uint8_t kind; /* enum storage_column_kind */
	bool desc;    /* clustering order DESC */
	/* Held by the meta (storage_type_hold), dropped with it. */
	const struct storage_type *type;
	/* Position among the columns of the same kind (key components and
	 * clustering columns are ordered by it). */
	uint16_t position;
	/* ALTER TABLE DROP: the slot stays, its cells are never read again. */
	bool dropped;
	/* Cells of this slot with a timestamp at or before this (microseconds)
	 * are ignored: for a dropped column its drop time; for a column
	 * re-added after a drop of the same name, that drop's time. INT64_MIN
	 * when neither. */
	int64_t dropped_at;
};

enum storage_compression {
	STORAGE_COMPRESSION_NONE = 0,
	STORAGE_COMPRESSION_LZ4,
	STORAGE_COMPRESSION_DEFLATE,
};

enum storage_compaction {
	STORAGE_COMPACTION_SIZE_TIERED = 0,
	STORAGE_COMPACTION_TIME_WINDOW,
	STORAGE_COMPACTION_LEVELED,
};

struct storage_table_options {
	uint8_t compression;   /* enum storage_compression; LZ4 default */
	uint32_t chunk_length; /* data block size in bytes; 16 KiB */
	double bloom_filter_fp_chance; /* 0.01 */
	int64_t gc_grace_seconds;      /* 864000 */
	int32_t default_time_to_live;
	uint8_t compaction;                /* enum storage_compaction */
	uint32_t min_threshold;            /* 4 */
	uint32_t max_threshold;            /* 32 */
	int64_t compaction_window_seconds; /* time-window size; 1 day */
	/* Single-SSTable tombstone compactions (both strategies): one runs
	 * when an SSTable older than tombstone_compaction_interval seconds
	 * (86400) holds more than tombstone_threshold (0.2) droppable
	 * tombstones per cell, and, unless unchecked_tombstone_compaction,
	 * the SSTables overlapping it leave enough of them purgeable. */
	double tombstone_threshold;
	int64_t tombstone_compaction_interval;
	bool unchecked_tombstone_compaction;
	/* Leveled: the size an output SSTable is cut at (160 MiB) and how
	 * much bigger each level is than the one before (10). */
	uint64_t sstable_size_bytes;
	uint32_t fanout_size;
};

/* What an index over a column indexes (Cassandra's IndexTarget.Type). */
enum storage_index_target {
	STORAGE_INDEX_VALUE = 0, /* a simple or frozen column's value; a key
				  * component; a clustering value */
	STORAGE_INDEX_KEYS,      /* keys(m): a map's keys */
	STORAGE_INDEX_VALUES,    /* values(m|l|s): elements / map values */
	STORAGE_INDEX_ENTRIES,   /* entries(m): (key, value) pairs */
	STORAGE_INDEX_FULL,      /* full(frozen): the whole value */
};

/* A storage-attached index of a table (the executor's CREATE INDEX). The
 * engine keeps an index over each memtable and writes a component per
 * SSTable for each (docs/indexes.md). */
struct storage_index {
	char *name;      /* unique in the keyspace; the component's name */
	uint16_t column; /* the indexed column's number */
	uint8_t target;  /* enum storage_index_target */
	/* the text analyzer (STORAGE_SAI_*: case_sensitive=false,
	 * normalize=true, ascii=true): terms stored and queried are the
	 * analysed values (storage_sai_analyze) */
	uint8_t analyzer;
};

struct buf;

/* Text analysis of an index (Cassandra 5.0's NonTokenizingAnalyzer), in
 * this order: lower case, Unicode NFC, ASCII folding of Latin letters. */
#define STORAGE_SAI_LOWER     0x01u
#define STORAGE_SAI_NORMALIZE 0x02u
#define STORAGE_SAI_ASCII     0x04u

/* Appends to `out` the analysis of the text p[0..n) (UTF-8; bytes that are
 * not UTF-8 are appended as given) under `analyzer` (STORAGE_SAI_* bits).
 * -1 on ERR_NOMEM. */
int storage_sai_analyze(unsigned analyzer, const uint8_t *p, size_t n,
			struct buf *out);

struct storage_table_meta {
	uint8_t id[16]; /* the table's uuid */
	char *keyspace;
	char *name;
	struct storage_column *columns;
	size_t column_count;
	/* Derived by storage_table_meta_add_column: the column numbers of the
	 * partition key and clustering components, in position order. */
	uint16_t pk[16];
	size_t pk_count;
	uint16_t ck[32];
	size_t ck_count;
	struct storage_table_options options;
	/* Storage-attached indexes (storage_table_meta_add_index). */
	struct storage_index *indexes;
	size_t index_count;
	/* References (storage_table_meta_ref): storage_table_meta_delete
	 * drops one and frees the meta with the last. */
	_Atomic unsigned refs;
};

struct storage_keyspace_meta {
	char *name;
	bool durable_writes;
	char *replication_class; /* "SimpleStrategy", "NetworkTopologyStrategy"
				  */
	char **replication_keys; /* e.g. "replication_factor", "dc1" */
	char **replication_values;
	size_t replication_count;
};

void storage_table_options_default(struct storage_table_options *o);

/* A table with no columns and default options, holding one reference
 * (the caller's). NULL on ERR_NOMEM. */
struct storage_table_meta *storage_table_meta_new(const char *keyspace,
						  const char *name,
						  const uint8_t id[16]);
/* Drops a reference; the last one frees the meta. */
void storage_table_meta_delete(struct storage_table_meta *t);
/*
 * Lifetime: a meta is built (add_column, options) while only its creator
 * holds it, and never changed once shared: an ALTER makes a new version.
 * Whoever keeps a meta beyond the call that lent it takes a reference and
 * drops it with storage_table_meta_unref (any thread): memtables and
 * SSTables keep the version they were made with, a coordinator's read
 * keeps the version it merges with, a repair job the one it streams with.
 */
const struct storage_table_meta *
storage_table_meta_ref(const struct storage_table_meta *t);
void storage_table_meta_unref(const struct storage_table_meta *t);
/* Appends a column; key and clustering components take the next position
 * of their kind. The meta holds `type` (storage_type_hold: a literal node
 * is copied, so the caller's may be on its stack). Returns the column
 * number, or -1. */
int storage_table_meta_add_column(struct storage_table_meta *t,
				  const char *name,
				  enum storage_column_kind kind,
				  const struct storage_type *type, bool desc);
/* Appends an index over column `column` (an existing column; a name not
 * yet used by the table's indexes). 0, or -1 with ERR_INVALID / NOMEM. */
int storage_table_meta_add_index(struct storage_table_meta *t, const char *name,
				 size_t column,
				 enum storage_index_target target,
				 unsigned analyzer);
/* Removes every index (a caller rebuilding the list). */
void storage_table_meta_clear_indexes(struct storage_table_meta *t);
/* The index named `name`, or NULL. */
const struct storage_index *
storage_table_meta_index(const struct storage_table_meta *t, const char *name);
/* A deep copy, or NULL. */
struct storage_table_meta *
storage_table_meta_clone(const struct storage_table_meta *t);
/* Whether `next` may replace `prev` (storage_table_update): the same id,
 * keyspace and key columns; every column of `prev` still there with the
 * same kind and type (key columns may be renamed); a dropped column stays
 * dropped; columns only appended. 0, or -1 with ERR_INVALID naming what
 * differs. */
int storage_table_meta_check_successor(const struct storage_table_meta *prev,
				       const struct storage_table_meta *next);
/* The column a cell of column number `column` written at `ts` is read
 * as, or -1 when a drop hides it. Cassandra knows columns by name: a drop
 * hides the cells of that name written at or before its time, and a
 * column re-added under the name reads the older slot's cells written
 * after that time as its own (they are newer than the drop). So a cell of
 * a dropped slot is read as the slot re-added after it (following every
 * later drop of the name), or hidden when none was. */
int storage_column_read_as(const struct storage_table_meta *t, size_t column,
			   int64_t ts);

struct storage_keyspace_meta *storage_keyspace_meta_new(const char *name,
							bool durable_writes);
void storage_keyspace_meta_delete(struct storage_keyspace_meta *k);
int storage_keyspace_meta_set_replication(struct storage_keyspace_meta *k,
					  const char *key, const char *value);

#endif
