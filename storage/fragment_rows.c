/*
 * Fragment rows: a canonical fragment (fragment.c) cut into rows for
 * repair. Row ids:
 *
 *   0x00                               the partition deletion
 *   0x01 flags bound(start) bound(end) a range tombstone; flags bit 0 the
 *                                      start is inclusive, bit 1 the end;
 *                                      each bound uvarint length + bytes
 *   0x02 clustering                    a row (encoded clustering, static
 *                                      or regular) and all its atoms
 *
 * A row's digest hashes be32 key length, key, be32 id length, id and the
 * row's content (the deletion's timestamp and ldt, or each atom's
 * encoding), so the same row in two partitions hashes differently and a
 * leaf can XOR row digests. Ids compare by bytes only; they are equal on
 * every replica because fragments are canonical.
 */
#include "common/err.h"
#include "common/murmur3.h"
#include "storage/mutation_internal.h"
#include "storage/storage.h"

#include <stdlib.h>
#include <string.h>

enum { ROW_PDEL = 0, ROW_RTOMB = 1, ROW_CK = 2 };

static int id_rtomb(struct buf *id, const struct rtomb *r)
{
	uint8_t flags =
		(uint8_t)((r->start_incl ? 1 : 0) | (r->end_incl ? 2 : 0));
	if (buf_put_u8(id, ROW_RTOMB) || buf_put_u8(id, flags) ||
	    buf_put_uvarint(id, r->start.len) ||
	    buf_append(id, r->start.ptr, r->start.len) ||
	    buf_put_uvarint(id, r->end.len) ||
	    buf_append(id, r->end.ptr, r->end.len))
		return -1;
	return 0;
}

static int id_ck(struct buf *id, struct slice ck)
{
	if (buf_put_u8(id, ROW_CK) || buf_append(id, ck.ptr, ck.len))
		return -1;
	return 0;
}

/* Starts the digest input: key and id. */
static int hash_head(struct buf *h, const struct storage_mutation *f,
		     const struct buf *id)
{
	buf_clear(h);
	if (buf_put_be32(h, (uint32_t)f->key.len) ||
	    buf_append(h, f->key.ptr, f->key.len) ||
	    buf_put_be32(h, (uint32_t)id->len) ||
	    buf_append(h, id->data, id->len))
		return -1;
	return 0;
}

static void hash_out(const struct buf *h, uint8_t out[16])
{
	uint64_t v[2];
	murmur3_hash128(h->data, h->len, 0, v);
	be64_store(out, v[0]);
	be64_store(out + 8, v[1]);
}

static int put_deletion(struct buf *h, struct deletion d)
{
	if (buf_put_be64(h, (uint64_t)d.ts) || buf_put_be64(h, (uint64_t)d.ldt))
		return -1;
	return 0;
}

/* Rows of `f` in canonical order; `fn` gets each id and digest. */
static int walk(const struct storage_mutation *f, storage_fragment_row_fn fn,
		void *arg)
{
	struct buf id, h;
	buf_init(&id);
	buf_init(&h);
	uint8_t dg[16];
	int rc = 0;
	if (f->pdel.ts != DELETION_NONE) {
		if (buf_put_u8(&id, ROW_PDEL) || hash_head(&h, f, &id) ||
		    put_deletion(&h, f->pdel))
			goto nomem;
		hash_out(&h, dg);
		if ((rc = fn(arg, buf_slice(&id), dg)) != 0)
			goto out;
	}
	for (size_t i = 0; i < f->rt_count; i++) {
		buf_clear(&id);
		if (id_rtomb(&id, &f->rts[i]) || hash_head(&h, f, &id) ||
		    put_deletion(&h, f->rts[i].del))
			goto nomem;
		hash_out(&h, dg);
		if ((rc = fn(arg, buf_slice(&id), dg)) != 0)
			goto out;
	}
	for (size_t i = 0; i < f->atom_count;) {
		struct slice ck = f->atoms[i].ck;
		buf_clear(&id);
		if (id_ck(&id, ck) || hash_head(&h, f, &id))
			goto nomem;
		size_t j = i;
		/* canonical: a row's atoms are adjacent, same ck bytes */
		for (; j < f->atom_count && slice_eq(f->atoms[j].ck, ck); j++)
			if (storage_atom_encode(&h, &f->atoms[j]))
				goto nomem;
		hash_out(&h, dg);
		if ((rc = fn(arg, buf_slice(&id), dg)) != 0)
			goto out;
		i = j;
	}
	goto out;
nomem:
	rc = err_set(ERR_NOMEM, "fragment rows");
out:
	buf_free(&id);
	buf_free(&h);
	return rc;
}

int storage_fragment_rows(const struct storage_mutation *f,
			  storage_fragment_row_fn fn, void *arg)
{
	return walk(f, fn, arg);
}

static int id_sort_cmp(const void *x, const void *y)
{
	return slice_cmp(*(const struct slice *)x, *(const struct slice *)y);
}

static bool id_wanted(const struct slice *sorted, size_t n,
		      const struct buf *id)
{
	struct slice key = buf_slice(id);
	if (n == 0)
		return false;
	return bsearch(&key, sorted, n, sizeof(*sorted), id_sort_cmp) != NULL;
}

struct storage_mutation *
storage_fragment_select_rows(const struct storage_table_meta *t,
			     const struct storage_mutation *f,
			     const struct slice *ids, size_t n)
{
	if (memcmp(t->id, f->table_id, 16) != 0) {
		err_set(ERR_INVALID, "fragment of another table");
		return NULL;
	}
	struct slice *sorted = n ? malloc(n * sizeof(*sorted)) : NULL;
	struct storage_mutation *m =
		storage_mutation_new(t, f->key.ptr, f->key.len);
	struct buf id;
	buf_init(&id);
	if ((n && !sorted) || !m)
		goto nomem;
	if (n) {
		memcpy(sorted, ids, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), id_sort_cmp);
	}
	if (f->pdel.ts != DELETION_NONE) {
		if (buf_put_u8(&id, ROW_PDEL))
			goto nomem;
		if (id_wanted(sorted, n, &id))
			m->pdel = f->pdel;
	}
	for (size_t i = 0; i < f->rt_count; i++) {
		buf_clear(&id);
		if (id_rtomb(&id, &f->rts[i]))
			goto nomem;
		if (id_wanted(sorted, n, &id) &&
		    storage_mutation_push_rtomb(m, &f->rts[i]))
			goto nomem;
	}
	for (size_t i = 0; i < f->atom_count;) {
		struct slice ck = f->atoms[i].ck;
		buf_clear(&id);
		if (id_ck(&id, ck))
			goto nomem;
		bool want = id_wanted(sorted, n, &id);
		size_t j = i;
		for (; j < f->atom_count && slice_eq(f->atoms[j].ck, ck); j++)
			if (want && storage_mutation_push_atom(m, &f->atoms[j]))
				goto nomem;
		i = j;
	}
	free(sorted);
	buf_free(&id);
	return m;
nomem:
	err_set(ERR_NOMEM, "fragment row selection");
	free(sorted);
	buf_free(&id);
	if (m)
		storage_mutation_delete(m);
	return NULL;
}

struct storage_mutation *
storage_fragment_purge(const struct storage_table_meta *t,
		       const struct storage_mutation *f, int64_t gc_before)
{
	if (memcmp(t->id, f->table_id, 16) != 0) {
		err_set(ERR_INVALID, "fragment of another table");
		return NULL;
	}
	struct storage_mutation *m =
		storage_mutation_new(t, f->key.ptr, f->key.len);
	if (!m)
		return NULL;
	/* shadowed atoms are already out of a canonical fragment, so
	 * dropping a deletion brings nothing back */
	if (f->pdel.ts != DELETION_NONE && f->pdel.ldt >= gc_before)
		m->pdel = f->pdel;
	for (size_t i = 0; i < f->rt_count; i++)
		if (f->rts[i].del.ldt >= gc_before &&
		    storage_mutation_push_rtomb(m, &f->rts[i]))
			goto fail;
	for (size_t i = 0; i < f->atom_count; i++) {
		const struct atom *a = &f->atoms[i];
		bool tomb = a->kind == ATOM_KIND_DELETION ||
			    (a->flags & ATOM_TOMBSTONE);
		if (tomb && a->ldt < gc_before)
			continue;
		if (storage_mutation_push_atom(m, a))
			goto fail;
	}
	return m;
fail:
	storage_mutation_delete(m);
	return NULL;
}
