/*
 * Fragments: what one replica holds of one partition, as a mutation, so a
 * coordinator can compare replicas (digest), reconcile them (merge), turn
 * the merged version into rows (resolve) and write it back (read repair,
 * through storage_apply).
 *
 * Every fragment this file returns is in one canonical form, so equal
 * content gives equal bytes (and digests) whatever the SSTable layout or
 * the order of the inputs:
 *
 *   - one partition deletion, the maximum of all (storage_deletion_max);
 *   - range tombstones sorted by (start, end, bytes, deletion), one per
 *     distinct pair of bounds (the maximum deletion), none that the
 *     partition deletion covers;
 *   - atoms sorted by storage_atom_cmp, one reconciled version per key
 *     (storage_atom_reconcile), none that a partition, range, row or collection
 *     deletion covers (Cassandra drops those while merging too). Cell
 *     tombstones stay; an expired cell stays as the tombstone compaction
 *     would make of it (same timestamp, its expiry as deletion time), so
 *     fragments do not depend on which SSTables were compacted.
 *
 * Dropping shadowed atoms never changes what a resolve returns: whatever
 * covers an atom stays in the fragment (a deletion is only dropped when a
 * wider one covers it, which then covers what it covered), and a version
 * that loses a reconcile against a dropped one is covered as well.
 *
 * Range tombstones are not clipped to a read's slices (a read keeps those
 * that overlap them, whole), nor are tombstones purged past gc_grace.
 */
#include "common/err.h"
#include "common/murmur3.h"
#include "storage/mutation_internal.h"
#include "storage/read_internal.h"
#include "storage/storage.h"

#include <stdlib.h>
#include <string.h>

/* ---- bound positions ----------------------------------------------------- */

static int prefix_len(struct slice p)
{
	int kind;
	struct slice vals[64];
	return storage_ck_decode(p, &kind, vals, 64);
}

/* A bound is a position between clusterings: (prefix, -1) just before
 * every clustering starting with the prefix, (prefix, +1) just after
 * them. An inclusive start and an exclusive end sit before their prefix;
 * an exclusive start and an inclusive end after it. */
static int pos_cmp(const struct storage_table_meta *t, struct slice a, int sa,
		   struct slice b, int sb)
{
	int na = prefix_len(a), nb = prefix_len(b);
	int c;
	if (na <= nb)
		c = -storage_ck_cmp_prefix(t, b, a);
	else
		c = storage_ck_cmp_prefix(t, a, b);
	if (c)
		return c;
	if (na == nb)
		return (sa > sb) - (sa < sb);
	/* the shorter prefix's block holds the longer one */
	return na < nb ? sa : -sb;
}

static int start_side(bool incl)
{
	return incl ? -1 : 1;
}

static int end_side(bool incl)
{
	return incl ? 1 : -1;
}

/* Whether [start, end] and the read bound may share a clustering. */
static bool rtomb_overlaps(const struct storage_table_meta *t,
			   const struct rtomb *r, const struct read_bound *b)
{
	return pos_cmp(t, r->start, start_side(r->start_incl), b->end,
		       end_side(b->end_incl)) < 0 &&
	       pos_cmp(t, b->start, start_side(b->start_incl), r->end,
		       end_side(r->end_incl)) < 0;
}

/* Range tombstones with the same bounds compare 0 up to the deletion. */
static int rtomb_bounds_cmp(const struct storage_table_meta *t,
			    const struct rtomb *a, const struct rtomb *b)
{
	int c = pos_cmp(t, a->start, start_side(a->start_incl), b->start,
			start_side(b->start_incl));
	if (!c)
		c = pos_cmp(t, a->end, end_side(a->end_incl), b->end,
			    end_side(b->end_incl));
	if (!c)
		c = slice_cmp(a->start, b->start);
	if (!c)
		c = slice_cmp(a->end, b->end);
	if (!c)
		c = (a->start_incl > b->start_incl) -
		    (a->start_incl < b->start_incl);
	if (!c)
		c = (a->end_incl > b->end_incl) - (a->end_incl < b->end_incl);
	return c;
}

static int rtomb_sort_cmp(const void *x, const void *y, void *t)
{
	const struct rtomb *a = x, *b = y;
	int c = rtomb_bounds_cmp(t, a, b);
	if (c)
		return c;
	if (a->del.ts != b->del.ts)
		return a->del.ts < b->del.ts ? -1 : 1;
	return (a->del.ldt > b->del.ldt) - (a->del.ldt < b->del.ldt);
}

static int atom_sort_cmp(const void *x, const void *y, void *t)
{
	return storage_atom_cmp(t, x, y);
}

/* ---- the canonical form -------------------------------------------------- */

/* storage_atom_reconcile, with versions that tie (the same cell, equal in all
 * but bytes that compare equal by type) ordered by their bytes, so the winner
 * does not depend on the input order. */
static const struct atom *reconcile_total(const struct atom *a,
					  const struct atom *b)
{
	const struct atom *w = storage_atom_reconcile(a, b);
	if (w == storage_atom_reconcile(b, a))
		return w;
	int c = slice_cmp(a->ck, b->ck);
	if (!c)
		c = slice_cmp(a->path, b->path);
	return c >= 0 ? a : b;
}

/* Builds the canonical fragment of partition `key` from unsorted parts;
 * sorts `rts` and `atoms` in place (they are scratch copies). */
static struct storage_mutation *
fragment_build(const struct storage_table_meta *t, int64_t token,
	       struct slice key, struct deletion pdel, struct rtomb *rts,
	       size_t nrt, struct atom *atoms, size_t na)
{
	struct storage_mutation *m =
		storage_mutation_new_token(t, key.ptr, key.len, token);
	if (!m)
		return NULL;
	m->pdel = pdel;
	if (nrt > 1)
		qsort_r(rts, nrt, sizeof(*rts), rtomb_sort_cmp, (void *)t);
	for (size_t i = 0; i < nrt; i++) {
		/* the last of a run with equal bounds has the max deletion */
		if (i + 1 < nrt &&
		    rtomb_bounds_cmp(t, &rts[i], &rts[i + 1]) == 0)
			continue;
		if (deletion_covers(pdel, rts[i].del.ts))
			continue;
		if (storage_mutation_push_rtomb(m, &rts[i]))
			goto fail;
	}
	if (na > 1)
		qsort_r(atoms, na, sizeof(*atoms), atom_sort_cmp, (void *)t);
	size_t w = 0;
	for (size_t i = 1; i < na; i++) {
		if (storage_atom_cmp(t, &atoms[w], &atoms[i]) == 0)
			atoms[w] = *reconcile_total(&atoms[w], &atoms[i]);
		else
			atoms[++w] = atoms[i];
	}
	if (na)
		na = w + 1;
	struct deletion none = {DELETION_NONE, 0};
	struct deletion row_del = none, coll_del = none;
	uint16_t coll_slot = 0;
	for (size_t i = 0; i < na; i++) {
		const struct atom *a = &atoms[i];
		if (i == 0 || storage_ck_cmp(t, atoms[i - 1].ck, a->ck) != 0) {
			row_del = none;
			coll_del = none;
		}
		bool covered = deletion_covers(pdel, a->ts) ||
			       storage_rtombs_cover(t, m->rts, m->rt_count,
						    a->ck, a->ts);
		if (a->kind == ATOM_KIND_DELETION && a->slot == ATOM_SLOT_ROW) {
			row_del = storage_deletion_max(
				row_del, (struct deletion){a->ts, a->ldt});
		} else if (a->kind == ATOM_KIND_DELETION) {
			covered = covered || deletion_covers(row_del, a->ts);
			coll_slot = a->slot;
			coll_del = (struct deletion){a->ts, a->ldt};
		} else {
			covered = covered || deletion_covers(row_del, a->ts) ||
				  (a->slot == coll_slot &&
				   deletion_covers(coll_del, a->ts));
		}
		if (!covered && storage_mutation_push_atom(m, a))
			goto fail;
	}
	return m;
fail:
	storage_mutation_delete(m);
	return NULL;
}

/* An expired cell is a tombstone from its expiry on: compaction rewrites
 * it so (compaction.c), and a fragment does the same, so it does not
 * depend on which SSTables were compacted. */
static void expire(struct atom *a, int64_t now_sec)
{
	if ((a->flags & ATOM_EXPIRING) && a->ldt <= now_sec) {
		a->flags = ATOM_TOMBSTONE;
		a->ttl = 0;
		a->value = slice_make(NULL, 0);
	}
}

int storage_read_ctx_fragment(struct read_ctx *c, int64_t token,
			      struct slice key, struct storage_mutation **out)
{
	*out = NULL;
	struct rtomb *rts = NULL;
	struct atom *atoms = NULL;
	if (c->rt_count)
		rts = malloc(c->rt_count * sizeof(*rts));
	if (c->atom_count)
		atoms = malloc(c->atom_count * sizeof(*atoms));
	if ((c->rt_count && !rts) || (c->atom_count && !atoms)) {
		free(rts);
		free(atoms);
		return err_set(ERR_NOMEM, "fragment");
	}
	size_t nrt = 0;
	for (size_t i = 0; i < c->rt_count; i++) {
		for (size_t j = 0; j < c->bound_count; j++) {
			if (rtomb_overlaps(c->t, &c->rts[i], &c->bounds[j])) {
				rts[nrt++] = c->rts[i];
				break;
			}
		}
	}
	for (size_t i = 0; i < c->atom_count; i++) {
		atoms[i] = c->atoms[i];
		expire(&atoms[i], c->now_sec);
	}
	struct storage_mutation *m = fragment_build(
		c->t, token, key, c->pdel, rts, nrt, atoms, c->atom_count);
	free(rts);
	free(atoms);
	if (!m)
		return -1;
	uint64_t tombstones = storage_mutation_tombstones(m, c->now_sec);
	uint64_t rows = 0;
	const struct atom *last = NULL;
	for (size_t i = 0; i < m->atom_count; i++) {
		const struct atom *a = &m->atoms[i];
		if (!storage_atom_is_live(a, c->now_sec) ||
		    (last && slice_eq(last->ck, a->ck)))
			continue;
		rows++;
		last = a;
	}
	(void)key;
	if (storage_read_ctx_check_tombstones(c, tombstones, rows, token)) {
		storage_mutation_delete(m);
		return -1;
	}
	*out = m;
	return 0;
}

/* ---- the public calls ---------------------------------------------------- */

uint64_t storage_mutation_tombstones(const struct storage_mutation *m,
				     int64_t now_sec)
{
	uint64_t n = m->rt_count + (m->pdel.ts != DELETION_NONE);
	for (size_t i = 0; i < m->atom_count; i++)
		n += !storage_atom_is_live(&m->atoms[i], now_sec);
	return n;
}

size_t storage_mutation_rows(const struct storage_mutation *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->atom_count; i++)
		n += i == 0 ||
		     slice_cmp(m->atoms[i].ck, m->atoms[i - 1].ck) != 0;
	return n;
}

size_t storage_fragment_row_cks(const struct storage_mutation *m,
				struct slice *out, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < m->atom_count; i++) {
		struct slice ck = m->atoms[i].ck;
		if (i > 0 && slice_cmp(ck, m->atoms[i - 1].ck) == 0)
			continue;
		if (ck.len == 0 || ck.ptr[0] != CK_ROW)
			continue; /* the static row */
		if (n < cap)
			out[n] = ck;
		n++;
	}
	return n;
}

bool storage_mutation_is_empty(const struct storage_mutation *m)
{
	return m->atom_count == 0 && m->rt_count == 0 &&
	       m->pdel.ts == DELETION_NONE;
}

struct storage_mutation *
storage_fragment_merge(const struct storage_table_meta *t,
		       struct storage_mutation *const *frags, size_t n)
{
	if (n == 0) {
		err_set(ERR_INVALID, "merge of no fragments");
		return NULL;
	}
	size_t nrt = 0, na = 0;
	struct deletion pdel = {DELETION_NONE, 0};
	for (size_t i = 0; i < n; i++) {
		const struct storage_mutation *f = frags[i];
		if (memcmp(f->table_id, t->id, 16) != 0 ||
		    !slice_eq(f->key, frags[0]->key)) {
			err_set(ERR_INVALID, "fragments of different "
					     "partitions");
			return NULL;
		}
		nrt += f->rt_count;
		na += f->atom_count;
		pdel = storage_deletion_max(pdel, f->pdel);
	}
	struct rtomb *rts = nrt ? malloc(nrt * sizeof(*rts)) : NULL;
	struct atom *atoms = na ? malloc(na * sizeof(*atoms)) : NULL;
	if ((nrt && !rts) || (na && !atoms)) {
		free(rts);
		free(atoms);
		err_set(ERR_NOMEM, "fragment merge");
		return NULL;
	}
	nrt = na = 0;
	for (size_t i = 0; i < n; i++) {
		const struct storage_mutation *f = frags[i];
		if (f->rt_count)
			memcpy(rts + nrt, f->rts, f->rt_count * sizeof(*rts));
		if (f->atom_count)
			memcpy(atoms + na, f->atoms,
			       f->atom_count * sizeof(*atoms));
		nrt += f->rt_count;
		na += f->atom_count;
	}
	struct storage_mutation *m = fragment_build(
		t, frags[0]->token, frags[0]->key, pdel, rts, nrt, atoms, na);
	free(rts);
	free(atoms);
	return m;
}

int storage_fragment_resolve(const struct storage_table_meta *t,
			     const struct storage_mutation *f,
			     const struct storage_read_cmd *cmd,
			     int64_t now_sec, struct storage_result **out)
{
	*out = NULL;
	struct read_ctx c;
	int rc = storage_read_ctx_init(&c, t, cmd, now_sec);
	if (!rc)
		storage_read_ctx_add_pdel(&c, f->pdel);
	for (size_t i = 0; !rc && i < f->rt_count; i++)
		rc = storage_read_ctx_add_rtomb(&c, &f->rts[i]);
	for (size_t i = 0; !rc && i < f->atom_count; i++)
		if (storage_read_ctx_wants(&c, f->atoms[i].ck))
			rc = storage_read_ctx_add_atom(&c, &f->atoms[i]);
	if (!rc)
		rc = storage_read_ctx_finish(&c, f->token, f->key, out);
	storage_read_ctx_destroy(&c);
	return rc;
}

void storage_mutation_digest(const struct storage_mutation *m, uint8_t out[16])
{
	struct buf b;
	buf_init(&b);
	uint64_t h[2];
	if (storage_mutation_encode(m, &b) == 0) {
		murmur3_hash128(b.data, b.len, 0, h);
	} else {
		/* Out of memory: a digest that matches no other, so the
		 * coordinator falls back to reading the data. */
		h[0] = ~(uint64_t)(uintptr_t)m;
		h[1] = (uint64_t)(uintptr_t)&b;
	}
	buf_free(&b);
	be64_store(out, h[0]);
	be64_store(out + 8, h[1]);
}
