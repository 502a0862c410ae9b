/*
 * The engine's unit of data: the atom.
 *
 * Every piece of a partition is an atom ordered by
 *     (clustering, column slot, kind, path)
 * where the clustering is encoded (see below), column slot 0 is the row
 * itself and slot n+1 is the table's column n:
 *
 *   slot 0, kind 0   row deletion (tombstone)
 *   slot 0, kind 1   row marker: the primary key's liveness (INSERT)
 *   slot n, kind 0   whole-collection deletion of column n-1 (tombstone)
 *   slot n, kind 1   a cell; for non-frozen collections one per element,
 *                    keyed by `path` (set element, map key, list timeuuid)
 *
 * Two atoms with the same key reconcile (storage_atom_reconcile); every atom
 * kind obeys the same cell rule, so a memtable, an SSTable and a merge all hold
 * at most one atom per key. Deletions that cover many atoms (partition and
 * range tombstones, row and collection deletions) shadow at read and
 * compaction time: an atom whose timestamp is <= the deletion's is gone.
 *
 * Clustering encoding: one byte (0 static row, 1 regular row) then each
 * component as uvarint length + bytes. A bound is a prefix of a regular
 * clustering (kind byte 1 and up to ck_count components).
 *
 * Times: timestamps are microseconds; ldt ("local deletion time") is in
 * seconds: the expiry of an expiring cell, the deletion time of a
 * tombstone.
 */
#ifndef CASSINI_STORAGE_ATOM_INTERNAL_H
#define CASSINI_STORAGE_ATOM_INTERNAL_H

#include "common/arena.h"
#include "common/buf.h"
#include "storage/schema.h"

#include <stdbool.h>
#include <stdint.h>

#define CK_STATIC 0
#define CK_ROW    1

enum atom_flags {
	ATOM_TOMBSTONE = 1 << 0,
	ATOM_EXPIRING = 1 << 1,
};

#define ATOM_KIND_DELETION 0
#define ATOM_KIND_LIVE     1
#define ATOM_SLOT_ROW      0

/* "No deletion". */
#define DELETION_NONE INT64_MIN

struct atom {
	struct slice ck;
	uint16_t slot;
	uint8_t kind;
	uint8_t flags;
	struct slice path;
	int64_t ts;
	int32_t ttl; /* seconds, expiring cells only */
	int64_t ldt; /* seconds; expiry or deletion time */
	struct slice value;
};

struct deletion {
	int64_t ts; /* DELETION_NONE when there is none */
	int64_t ldt;
};

/* A clustering range tombstone [start, end]; bounds are encoded prefixes
 * (an empty prefix, kind byte only, is unbounded). */
struct rtomb {
	struct slice start, end;
	bool start_incl, end_incl;
	struct deletion del;
};

/* Clustering codec. */
int storage_ck_encode(struct buf *out, int kind, const struct slice *vals,
		      size_t n);
/* Splits an encoded clustering into at most `max` components. Returns the
 * count, or -1 on a malformed encoding. */
int storage_ck_decode(struct slice ck, int *kind, struct slice *vals,
		      size_t max);
/* Full order: static first, then components by type (DESC reversed), a
 * prefix before its extensions. */
int storage_ck_cmp(const struct storage_table_meta *t, struct slice a,
		   struct slice b);
/* Compares only as many components as `prefix` has: 0 when `ck` starts
 * with `prefix`. */
int storage_ck_cmp_prefix(const struct storage_table_meta *t, struct slice ck,
			  struct slice prefix);
bool storage_ck_after_start(const struct storage_table_meta *t, struct slice ck,
			    struct slice start, bool incl);
bool storage_ck_before_end(const struct storage_table_meta *t, struct slice ck,
			   struct slice end, bool incl);

int storage_atom_cmp(const struct storage_table_meta *t, const struct atom *a,
		     const struct atom *b);
/* Same key, different clustering ignored: compares slot, kind, path. */
int storage_atom_cmp_in_row(const struct storage_table_meta *t,
			    const struct atom *a, const struct atom *b);
/* The winner of two versions of the same atom under Cassandra's rules;
 * a total order, so reconcile is commutative, associative and idempotent. */
const struct atom *storage_atom_reconcile(const struct atom *a,
					  const struct atom *b);
bool storage_atom_is_live(const struct atom *a, int64_t now_sec);
bool storage_atom_is_tombstone_like(const struct atom *a, int64_t now_sec);
/* Reconcile for deletions: the later timestamp, then the later ldt. */
struct deletion storage_deletion_max(struct deletion a, struct deletion b);
static inline bool deletion_covers(struct deletion d, int64_t ts)
{
	return d.ts != DELETION_NONE && ts <= d.ts;
}

/* Atom codec (mutations, SSTable blocks). Decoded slices borrow the input. */
int storage_atom_encode(struct buf *out, const struct atom *a);
int storage_atom_decode(struct cursor *c, struct atom *a);
size_t storage_atom_encoded_size_hint(const struct atom *a);
int storage_rtomb_encode(struct buf *out, const struct rtomb *r);
int storage_rtomb_decode(struct cursor *c, struct rtomb *r);
/* Copies the atom's bytes into the arena. */
int storage_atom_copy(struct arena *ar, const struct atom *src,
		      struct atom *dst);
int storage_rtomb_copy(struct arena *ar, const struct rtomb *src,
		       struct rtomb *dst);

/* Does any range tombstone in the list cover (ck, ts)? */
bool storage_rtombs_cover(const struct storage_table_meta *t,
			  const struct rtomb *r, size_t n, struct slice ck,
			  int64_t ts);

#endif
