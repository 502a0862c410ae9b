/*
 * Atoms: clustering order, reconcile, and the atom codec shared by
 * mutations and SSTable blocks.
 *
 * Atom encoding (all integers big-endian or unsigned LEB128):
 *
 *   uvarint ck_len, ck bytes
 *   uvarint slot
 *   u8      kind
 *   u8      flags            ATOM_TOMBSTONE | ATOM_EXPIRING
 *   uvarint path_len, path
 *   be64    timestamp
 *   be32    ttl              only when EXPIRING
 *   be64    ldt              only when EXPIRING or TOMBSTONE
 *   uvarint value_len, value
 */
#include "storage/atom_internal.h"

#include "common/err.h"

#include <string.h>

int storage_ck_encode(struct buf *out, int kind, const struct slice *vals,
		      size_t n)
{
	size_t before = out->len;
	if (buf_put_u8(out, (uint8_t)kind))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (buf_put_uvarint(out, vals[i].len) ||
		    buf_append(out, vals[i].ptr, vals[i].len)) {
			out->len = before;
			return -1;
		}
	}
	return 0;
}

int storage_ck_decode(struct slice ck, int *kind, struct slice *vals,
		      size_t max)
{
	struct cursor c = cursor_make(ck.ptr, ck.len);
	uint8_t k;
	if (cursor_u8(&c, &k) || k > CK_ROW)
		return -1;
	*kind = k;
	size_t n = 0;
	while (cursor_left(&c)) {
		uint64_t len;
		struct slice v;
		if (n == max || cursor_uvarint(&c, &len) ||
		    len > cursor_left(&c) || cursor_take(&c, len, &v))
			return -1;
		vals[n++] = v;
	}
	return (int)n;
}

/* Compares components pairwise. In prefix mode a `b` that runs out first
 * matches (0). Malformed encodings compare as raw bytes. */
static int ck_walk(const struct storage_table_meta *t, struct slice a,
		   struct slice b, bool prefix_mode)
{
	if (a.len == 0 || b.len == 0)
		return (a.len > 0) - (b.len > 0);
	if (a.ptr[0] != b.ptr[0])
		return a.ptr[0] < b.ptr[0] ? -1 : 1;
	struct cursor ca = cursor_make(a.ptr + 1, a.len - 1);
	struct cursor cb = cursor_make(b.ptr + 1, b.len - 1);
	for (size_t i = 0;; i++) {
		bool ea = cursor_left(&ca) == 0, eb = cursor_left(&cb) == 0;
		if (eb)
			return (ea || prefix_mode) ? 0 : 1;
		if (ea)
			return -1;
		uint64_t la, lb;
		struct slice va, vb;
		if (cursor_uvarint(&ca, &la) || la > cursor_left(&ca) ||
		    cursor_take(&ca, la, &va) || cursor_uvarint(&cb, &lb) ||
		    lb > cursor_left(&cb) || cursor_take(&cb, lb, &vb))
			return slice_cmp(a, b);
		static const struct storage_type blob = {
			.kind = STORAGE_TYPE_BLOB};
		const struct storage_type *type = &blob;
		bool desc = false;
		if (t && i < t->ck_count) {
			const struct storage_column *col =
				&t->columns[t->ck[i]];
			type = col->type;
			desc = col->desc;
		}
		int c = storage_type_cmp(type, va.ptr, va.len, vb.ptr, vb.len);
		if (c)
			return desc ? -c : c;
	}
}

int storage_ck_cmp(const struct storage_table_meta *t, struct slice a,
		   struct slice b)
{
	return ck_walk(t, a, b, false);
}

int storage_ck_cmp_prefix(const struct storage_table_meta *t, struct slice ck,
			  struct slice prefix)
{
	return ck_walk(t, ck, prefix, true);
}

bool storage_ck_after_start(const struct storage_table_meta *t, struct slice ck,
			    struct slice start, bool incl)
{
	int c = storage_ck_cmp_prefix(t, ck, start);
	return c > 0 || (c == 0 && incl);
}

bool storage_ck_before_end(const struct storage_table_meta *t, struct slice ck,
			   struct slice end, bool incl)
{
	int c = storage_ck_cmp_prefix(t, ck, end);
	return c < 0 || (c == 0 && incl);
}

static const struct storage_type *path_type(const struct storage_table_meta *t,
					    uint16_t slot)
{
	if (!t || slot == 0 || slot > t->column_count)
		return storage_type_simple(STORAGE_TYPE_BLOB);
	return storage_type_path_type(t->columns[slot - 1].type);
}

int storage_atom_cmp_in_row(const struct storage_table_meta *t,
			    const struct atom *a, const struct atom *b)
{
	if (a->slot != b->slot)
		return a->slot < b->slot ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (a->path.len == 0 && b->path.len == 0)
		return 0;
	return storage_type_cmp(path_type(t, a->slot), a->path.ptr, a->path.len,
				b->path.ptr, b->path.len);
}

int storage_atom_cmp(const struct storage_table_meta *t, const struct atom *a,
		     const struct atom *b)
{
	int c = storage_ck_cmp(t, a->ck, b->ck);
	return c ? c : storage_atom_cmp_in_row(t, a, b);
}

/* Returns >0 when a beats b. */
static int atom_order(const struct atom *a, const struct atom *b)
{
	if (a->ts != b->ts)
		return a->ts > b->ts ? 1 : -1;
	int ta = (a->flags & ATOM_TOMBSTONE) != 0;
	int tb = (b->flags & ATOM_TOMBSTONE) != 0;
	if (ta != tb)
		return ta - tb;
	int xa = (a->flags & ATOM_EXPIRING) != 0;
	int xb = (b->flags & ATOM_EXPIRING) != 0;
	if (xa != xb)
		return xa - xb;
	if ((ta || xa) && a->ldt != b->ldt)
		return a->ldt > b->ldt ? 1 : -1;
	int c = slice_cmp(a->value, b->value);
	if (c)
		return c;
	if (a->ttl != b->ttl)
		return a->ttl > b->ttl ? 1 : -1;
	return 0;
}

const struct atom *storage_atom_reconcile(const struct atom *a,
					  const struct atom *b)
{
	return atom_order(a, b) >= 0 ? a : b;
}

bool storage_atom_is_live(const struct atom *a, int64_t now_sec)
{
	if (a->flags & ATOM_TOMBSTONE)
		return false;
	if ((a->flags & ATOM_EXPIRING) && a->ldt <= now_sec)
		return false;
	return a->kind == ATOM_KIND_LIVE;
}

bool storage_atom_is_tombstone_like(const struct atom *a, int64_t now_sec)
{
	return !storage_atom_is_live(a, now_sec);
}

struct deletion storage_deletion_max(struct deletion a, struct deletion b)
{
	if (a.ts != b.ts)
		return a.ts > b.ts ? a : b;
	return a.ldt >= b.ldt ? a : b;
}

int storage_atom_encode(struct buf *out, const struct atom *a)
{
	size_t before = out->len;
	if (buf_reserve(out, storage_atom_encoded_size_hint(a)))
		return -1;
	int rc = buf_put_uvarint(out, a->ck.len) ||
		 buf_append(out, a->ck.ptr, a->ck.len) ||
		 buf_put_uvarint(out, a->slot) || buf_put_u8(out, a->kind) ||
		 buf_put_u8(out, a->flags) ||
		 buf_put_uvarint(out, a->path.len) ||
		 buf_append(out, a->path.ptr, a->path.len) ||
		 buf_put_be64(out, (uint64_t)a->ts);
	if (!rc && (a->flags & ATOM_EXPIRING))
		rc = buf_put_be32(out, (uint32_t)a->ttl);
	if (!rc && (a->flags & (ATOM_EXPIRING | ATOM_TOMBSTONE)))
		rc = buf_put_be64(out, (uint64_t)a->ldt);
	if (!rc)
		rc = buf_put_uvarint(out, a->value.len) ||
		     buf_append(out, a->value.ptr, a->value.len);
	if (rc) {
		out->len = before;
		return -1;
	}
	return 0;
}

size_t storage_atom_encoded_size_hint(const struct atom *a)
{
	return a->ck.len + a->path.len + a->value.len + 48;
}

static int take_bytes(struct cursor *c, struct slice *out)
{
	uint64_t len;
	if (cursor_uvarint(c, &len) || len > cursor_left(c))
		return -1;
	return cursor_take(c, (size_t)len, out);
}

int storage_atom_decode(struct cursor *c, struct atom *a)
{
	uint64_t slot, ts, ldt = 0;
	uint32_t ttl = 0;
	memset(a, 0, sizeof(*a));
	if (take_bytes(c, &a->ck) || a->ck.len == 0 || a->ck.ptr[0] > CK_ROW ||
	    cursor_uvarint(c, &slot) || slot > 0xffff ||
	    cursor_u8(c, &a->kind) || a->kind > ATOM_KIND_LIVE ||
	    cursor_u8(c, &a->flags) ||
	    (a->flags & ~(ATOM_TOMBSTONE | ATOM_EXPIRING)) ||
	    take_bytes(c, &a->path) || cursor_be64(c, &ts))
		return -1;
	if ((a->flags & ATOM_EXPIRING) && cursor_be32(c, &ttl))
		return -1;
	if ((a->flags & (ATOM_EXPIRING | ATOM_TOMBSTONE)) &&
	    cursor_be64(c, &ldt))
		return -1;
	if (take_bytes(c, &a->value))
		return -1;
	if (a->kind == ATOM_KIND_DELETION && !(a->flags & ATOM_TOMBSTONE))
		return -1;
	a->slot = (uint16_t)slot;
	a->ts = (int64_t)ts;
	a->ttl = (int32_t)ttl;
	a->ldt = (int64_t)ldt;
	return 0;
}

int storage_rtomb_encode(struct buf *out, const struct rtomb *r)
{
	size_t before = out->len;
	if (buf_put_uvarint(out, r->start.len) ||
	    buf_append(out, r->start.ptr, r->start.len) ||
	    buf_put_uvarint(out, r->end.len) ||
	    buf_append(out, r->end.ptr, r->end.len) ||
	    buf_put_u8(out, (uint8_t)(r->start_incl | r->end_incl << 1)) ||
	    buf_put_be64(out, (uint64_t)r->del.ts) ||
	    buf_put_be64(out, (uint64_t)r->del.ldt)) {
		out->len = before;
		return -1;
	}
	return 0;
}

int storage_rtomb_decode(struct cursor *c, struct rtomb *r)
{
	uint8_t flags;
	uint64_t ts, ldt;
	if (take_bytes(c, &r->start) || take_bytes(c, &r->end) ||
	    cursor_u8(c, &flags) || flags > 3 || cursor_be64(c, &ts) ||
	    cursor_be64(c, &ldt))
		return -1;
	if (r->start.len == 0 || r->end.len == 0 || r->start.ptr[0] != CK_ROW ||
	    r->end.ptr[0] != CK_ROW)
		return -1;
	r->start_incl = flags & 1;
	r->end_incl = (flags >> 1) & 1;
	r->del.ts = (int64_t)ts;
	r->del.ldt = (int64_t)ldt;
	if (r->del.ts == DELETION_NONE)
		return -1;
	return 0;
}

static int dup_slice(struct arena *ar, struct slice *s)
{
	if (s->len == 0) {
		s->ptr = (const uint8_t *)"";
		return 0;
	}
	void *p = arena_memdup(ar, s->ptr, s->len);
	if (!p)
		return -1;
	s->ptr = p;
	return 0;
}

int storage_atom_copy(struct arena *ar, const struct atom *src,
		      struct atom *dst)
{
	*dst = *src;
	return dup_slice(ar, &dst->ck) || dup_slice(ar, &dst->path) ||
			       dup_slice(ar, &dst->value)
		       ? -1
		       : 0;
}

int storage_rtomb_copy(struct arena *ar, const struct rtomb *src,
		       struct rtomb *dst)
{
	*dst = *src;
	return dup_slice(ar, &dst->start) || dup_slice(ar, &dst->end) ? -1 : 0;
}

bool storage_rtombs_cover(const struct storage_table_meta *t,
			  const struct rtomb *r, size_t n, struct slice ck,
			  int64_t ts)
{
	if (ck.len == 0 || ck.ptr[0] == CK_STATIC)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (ts > r[i].del.ts)
			continue;
		if (storage_ck_after_start(t, ck, r[i].start,
					   r[i].start_incl) &&
		    storage_ck_before_end(t, ck, r[i].end, r[i].end_incl))
			return true;
	}
	return false;
}
