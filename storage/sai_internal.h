/*
 * Storage-attached index terms: what an index stores for a value, and
 * which terms a partition key or an atom gives an index. Shared by the
 * memtable index (memtable.c), the SSTable writer (the component written
 * with every SSTable) and the query side (engine_sai.c).
 *
 * Terms are byte-comparable: bytewise order of two terms is the order of
 * their values under the column type's comparator (Cassandra's SAI does
 * the same with its ByteComparable encodings), for the numeric, date,
 * time, timestamp, uuid and timeuuid types; other types are their value
 * bytes (their order is bytewise already: text, ascii, blob, inet,
 * boolean, duration). Text of an index with an analyzer is the
 * analysed text (storage_sai_analyze: lower case, NFC, ASCII folding). An
 * entries(m) term is be32 length + the key's term, then the value's term.
 *
 * Decimals (1.0 equals 1.00) and frozen values holding a decimal or a
 * varint (whose bytes may be non-minimal) have no term whose bytes decide
 * equality: sai_index_exact says so, and queries on such an index take
 * the scan.
 */
#ifndef CASSINI_STORAGE_SAI_INTERNAL_H
#define CASSINI_STORAGE_SAI_INTERNAL_H

#include "common/buf.h"
#include "storage/atom_internal.h"

/* The type of the values the index's terms come from (for entries: the
 * map's value type); NULL when the column's type does not fit the target
 * (such an index gives no terms). */
const struct storage_type *
sai_index_value_type(const struct storage_table_meta *t,
		     const struct storage_index *ix);
/* Whether equal terms mean equal values under the type's comparator. */
bool sai_index_exact(const struct storage_table_meta *t,
		     const struct storage_index *ix);

/* Appends to `out` the term of value `v` of type `ty` (analyzer:
 * STORAGE_SAI_* bits, applied to text and ascii). -1 on ERR_NOMEM. */
int sai_term_encode(const struct storage_type *ty, unsigned analyzer,
		    struct slice v, struct buf *out);
/* Sets `out` to the index's term for a queried value: vals[0] (for an
 * entries index vals[0] the key and vals[1] the value, n = 2). */
int sai_index_term(const struct storage_table_meta *t,
		   const struct storage_index *ix, const struct slice *vals,
		   size_t n, struct buf *out);

/* The term partition key `key` gives the index (an index on a partition
 * key component), into `out`: 1 with a term, 0 when the index is not on
 * the partition key, -1 on error. */
int sai_key_term(const struct storage_table_meta *t,
		 const struct storage_index *ix, struct slice key,
		 struct buf *out);
/* The term atom `a` gives the index (a clustering value, a live cell of
 * the column or one of its elements), into `out`: 1, 0 (none), -1. */
int sai_atom_term(const struct storage_table_meta *t,
		  const struct storage_index *ix, const struct atom *a,
		  struct buf *out);

/* Whether the index's entries carry the row: an index on a regular
 * column (its values, keys, entries or whole value) of a table with
 * clustering columns. Partition key, clustering and static column
 * indexes, and tables without clustering columns, list partitions. */
bool sai_index_rows(const struct storage_table_meta *t,
		    const struct storage_index *ix);

/* What the index indexes, as the bytes kept in each component's header
 * (column number, target, analyzer, rows): "c<column> t<target> f0", or
 * "... a<analyzer bits>", then " r1" when sai_index_rows (t NULL: without
 * it, to compare two versions of one table's index). */
int sai_index_ident(const struct storage_table_meta *t,
		    const struct storage_index *ix, char *out, size_t cap);

/* The component's key for a partition: its token byte-comparable (be64,
 * sign bit flipped) then the partition key, so a term's keys are in
 * token order. */
int sai_component_key(int64_t token, struct slice key, struct buf *out);
/* The component's key for a row (sai_index_rows): token as above, be16
 * partition key length, the partition key, the row's encoded clustering;
 * a partition's rows are adjacent, in token order. */
int sai_component_row_key(int64_t token, struct slice key, struct slice ck,
			  struct buf *out);
/* Splits a row key; -1 when malformed. */
int sai_component_row_key_split(const uint8_t *p, size_t len, int64_t *token,
				struct slice *key, struct slice *ck);
/* Splits a component key; -1 when shorter than a token. */
int sai_component_key_split(const uint8_t *p, size_t len, int64_t *token,
			    struct slice *key);

#endif
