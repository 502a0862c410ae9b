/*
 * Memtable: two-level skiplist over one arena. See memtable_internal.h.
 */
#include "storage/memtable_internal.h"

#include "common/err.h"
#include "storage/sai_internal.h"

#include <stdlib.h>
#include <string.h>

int storage_partition_cmp(int64_t ta, struct slice ka, int64_t tb,
			  struct slice kb)
{
	if (ta != tb)
		return ta < tb ? -1 : 1;
	return slice_cmp(ka, kb);
}

static int part_cmp(const void *ctx, const void *a, const void *b)
{
	(void)ctx;
	const struct mt_partition *x = a, *y = b;
	return storage_partition_cmp(x->token, x->key, y->token, y->key);
}

/* Token order as unsigned 64 bits: most comparisons never reach the key. */
static uint64_t part_order(const void *a)
{
	const struct mt_partition *p = a;
	return (uint64_t)p->token ^ (1ull << 63);
}

static int atom_node_cmp(const void *ctx, const void *a, const void *b)
{
	return storage_atom_cmp(ctx, a, b);
}

struct memtable *memtable_new(const struct storage_table_meta *t)
{
	struct memtable *mt = calloc(1, sizeof(*mt));
	if (!mt) {
		err_set(ERR_NOMEM, "memtable");
		return NULL;
	}
	/* 4 KiB first, up to 256 KiB blocks: the memtable of a table that
	 * is not written to (most of a large schema) costs one small block
	 * (a first block of 256 KiB was 75 KiB of RSS a table) */
	arena_create_growing(&mt->arena, 4 * 1024, 256 * 1024);
	mt->meta = storage_table_meta_ref(t);
	atomic_init(&mt->refs, 1);
	atomic_init(&mt->index, NULL);
	mt->min_ts = INT64_MAX;
	mt->max_ts = INT64_MIN;
	if (skiplist_init_ordered(&mt->parts, &mt->arena, part_cmp, part_order,
				  NULL)) {
		arena_destroy(&mt->arena);
		storage_table_meta_unref(mt->meta);
		free(mt);
		return NULL;
	}
	size_t ni = t->index_count;
	if (ni) {
		mt->sai = arena_alloc(&mt->arena, ni * sizeof(*mt->sai));
		for (size_t i = 0; mt->sai && i < ni; i++)
			if (skiplist_init(&mt->sai[i], &mt->arena,
					  memtable_sai_cmp, NULL)) {
				mt->sai = NULL;
				break;
			}
		if (!mt->sai) {
			memtable_unref(mt);
			err_set(ERR_NOMEM, "memtable index");
			return NULL;
		}
	}
	return mt;
}

int memtable_sai_cmp(const void *ctx, const void *a, const void *b)
{
	(void)ctx;
	const struct mt_sai_term *x = a, *y = b;
	return slice_cmp(x->term, y->term);
}

int memtable_sai_ref_cmp(const void *ctx, const void *a, const void *b)
{
	(void)ctx;
	const struct mt_sai_ref *x = a, *y = b;
	int r = storage_partition_cmp(x->part->token, x->part->key,
				      y->part->token, y->part->key);
	if (r)
		return r;
	bool xl = x->ck.len == SIZE_MAX, yl = y->ck.len == SIZE_MAX;
	if (xl || yl)
		return xl == yl ? 0 : xl ? 1 : -1;
	return slice_cmp(x->ck, y->ck);
}

uint64_t memtable_sai_ref_order(const void *a)
{
	const struct mt_sai_ref *x = a;
	return (uint64_t)x->part->token ^ (1ull << 63);
}

const struct skiplist *memtable_sai(const struct memtable *mt, const char *name)
{
	for (size_t i = 0; mt->sai && i < mt->meta->index_count; i++)
		if (strcmp(mt->meta->indexes[i].name, name) == 0)
			return &mt->sai[i];
	return NULL;
}

/* A new chunk of `cap` entries in the arena, or NULL. */
static struct mt_sai_chunk *sai_chunk_new(struct memtable *mt, uint32_t cap)
{
	struct mt_sai_chunk *c = arena_alloc(
		&mt->arena, sizeof(*c) + cap * sizeof(struct mt_sai_ref));
	if (c) {
		c->next = NULL;
		c->cap = cap;
	}
	return c;
}

/* Adds p (row ck) to term t's sorted skiplist unless it holds it. */
static int sai_sorted_put(struct memtable *mt, struct mt_sai_term *t,
			  struct skiplist *s, struct mt_partition *p,
			  struct slice ck)
{
	struct mt_sai_ref probe = {p, ck};
	struct skiplist_node *prev[SKIPLIST_MAX_HEIGHT];
	if (skiplist_find_prev(s, &probe, prev))
		return 0;
	struct mt_sai_ref *ref = arena_alloc(&mt->arena, sizeof(*ref));
	uint8_t *c = ref && ck.len ? arena_alloc_aligned(&mt->arena, ck.len, 1)
				   : NULL;
	if (!ref || (ck.len && !c))
		return err_set(ERR_NOMEM, "memtable index");
	if (ck.len)
		memcpy(c, ck.ptr, ck.len);
	*ref = (struct mt_sai_ref){p, {c, ck.len}};
	if (!skiplist_insert_at(s, ref, prev))
		return err_set(ERR_NOMEM, "memtable index");
	t->last = p;
	t->last_ck = ref->ck;
	return 0;
}

/* Gives term t its sorted skiplist, filled from its chunks, published. */
static int sai_sort(struct memtable *mt, struct mt_sai_term *t)
{
	struct skiplist *s = arena_alloc(&mt->arena, sizeof(*s));
	if (!s || skiplist_init_ordered(s, &mt->arena, memtable_sai_ref_cmp,
					memtable_sai_ref_order, NULL))
		return err_set(ERR_NOMEM, "memtable index");
	size_t left = atomic_load_explicit(&t->count, memory_order_relaxed);
	for (struct mt_sai_chunk *ch = t->head; ch && left; ch = ch->next)
		for (uint32_t k = 0; k < ch->cap && left; k++, left--) {
			struct skiplist_node *prev[SKIPLIST_MAX_HEIGHT];
			if (!skiplist_find_prev(s, &ch->parts[k], prev) &&
			    !skiplist_insert_at(s, &ch->parts[k], prev))
				return err_set(ERR_NOMEM, "memtable index");
		}
	atomic_store_explicit(&t->sorted, s, memory_order_release);
	return 0;
}

/* Adds p (row ck when not empty) under the term in mt->sai_term of index
 * i (unless it is that term's last partition or row already). */
static int sai_put(struct memtable *mt, size_t i, struct mt_partition *p,
		   struct slice ck)
{
	struct mt_sai_term probe = {
		.term = {mt->sai_term.data, mt->sai_term.len}};
	struct skiplist_node *prev[SKIPLIST_MAX_HEIGHT];
	struct skiplist_node *n = skiplist_find_prev(&mt->sai[i], &probe, prev);
	struct mt_sai_term *t = n ? skiplist_key(n) : NULL;
	if (t && t->last == p && slice_cmp(t->last_ck, ck) == 0)
		return 0;
	struct skiplist *sorted =
		t ? atomic_load_explicit(&t->sorted, memory_order_relaxed)
		  : NULL;
	if (sorted)
		return sai_sorted_put(mt, t, sorted, p, ck);
	struct mt_sai_ref ref = {p, {NULL, 0}};
	if (ck.len) {
		uint8_t *c = arena_alloc_aligned(&mt->arena, ck.len, 1);
		if (!c)
			return err_set(ERR_NOMEM, "memtable index");
		memcpy(c, ck.ptr, ck.len);
		ref.ck = (struct slice){c, ck.len};
	}
	if (!t) {
		t = arena_alloc(&mt->arena, sizeof(*t));
		uint8_t *term =
			t ? arena_alloc_aligned(
				    &mt->arena,
				    probe.term.len ? probe.term.len : 1, 1)
			  : NULL;
		struct mt_sai_chunk *c = term ? sai_chunk_new(mt, 2) : NULL;
		if (!c)
			return err_set(ERR_NOMEM, "memtable index");
		if (probe.term.len)
			memcpy(term, probe.term.ptr, probe.term.len);
		t->term = (struct slice){term, probe.term.len};
		t->head = t->tail = c;
		t->tail_used = 0;
		t->last = NULL;
		atomic_init(&t->count, 0);
		atomic_init(&t->sorted, NULL);
		c->parts[t->tail_used++] = ref;
		t->last = p;
		t->last_ck = ref.ck;
		atomic_store_explicit(&t->count, 1, memory_order_release);
		return skiplist_insert_at(&mt->sai[i], t, prev)
			       ? 0
			       : err_set(ERR_NOMEM, "memtable index");
	}
	if (t->tail_used == t->tail->cap) {
		uint32_t cap = t->tail->cap * 2;
		struct mt_sai_chunk *c = sai_chunk_new(
			mt, cap < MT_SAI_CHUNK_MAX ? cap : MT_SAI_CHUNK_MAX);
		if (!c)
			return err_set(ERR_NOMEM, "memtable index");
		t->tail->next = c; /* published with the count below */
		t->tail = c;
		t->tail_used = 0;
	}
	t->tail->parts[t->tail_used++] = ref;
	t->last = p;
	t->last_ck = ref.ck;
	size_t count =
		atomic_load_explicit(&t->count, memory_order_relaxed) + 1;
	atomic_store_explicit(&t->count, count, memory_order_release);
	return count == MT_SAI_SORT_AT ? sai_sort(mt, t) : 0;
}

/* Every term of `m` into the memtable's indexes. */
static int sai_apply(struct memtable *mt, struct mt_partition *p,
		     const struct storage_mutation *m)
{
	const struct storage_table_meta *t = mt->meta;
	for (size_t i = 0; i < t->index_count; i++) {
		const struct storage_index *ix = &t->indexes[i];
		bool rows = sai_index_rows(t, ix);
		int r = sai_key_term(t, ix, p->key, &mt->sai_term);
		if (r > 0)
			r = sai_put(mt, i, p, (struct slice){NULL, 0});
		if (r < 0)
			return -1;
		for (size_t j = 0; j < m->atom_count; j++) {
			r = sai_atom_term(t, ix, &m->atoms[j], &mt->sai_term);
			if (r > 0)
				r = sai_put(mt, i, p,
					    rows ? m->atoms[j].ck
						 : (struct slice){NULL, 0});
			if (r < 0)
				return -1;
		}
	}
	return 0;
}

void memtable_ref(struct memtable *m)
{
	atomic_fetch_add(&m->refs, 1);
}

void memtable_unref(struct memtable *m)
{
	if (m && atomic_fetch_sub(&m->refs, 1) == 1) {
		arena_destroy(&m->arena);
		buf_free(&m->sai_term);
		storage_table_meta_unref(m->meta);
		free(m);
	}
}

size_t memtable_bytes(const struct memtable *mt)
{
	return mt->arena.allocated + sizeof(*mt);
}

size_t memtable_data_bytes(const struct memtable *mt)
{
	return mt->arena.used;
}

bool memtable_is_empty(const struct memtable *mt)
{
	return atomic_load(&((struct memtable *)mt)->parts.count) == 0;
}

static size_t slot_of(int64_t token, size_t cap)
{
	return (size_t)((uint64_t)token * 0x9e3779b97f4a7c15ull >> 7) &
	       (cap - 1);
}

struct mt_partition *memtable_find(const struct memtable *mt, int64_t token,
				   struct slice key)
{
	struct mt_index *ix = atomic_load_explicit(
		&((struct memtable *)mt)->index, memory_order_acquire);
	if (!ix) {
		struct mt_partition probe = {.token = token, .key = key};
		struct skiplist_node *n = skiplist_find(&mt->parts, &probe);
		return n ? mt_node_partition(n) : NULL;
	}
	for (size_t i = slot_of(token, ix->cap);; i = (i + 1) & (ix->cap - 1)) {
		struct mt_partition *p = atomic_load_explicit(
			&ix->slots[i], memory_order_acquire);
		if (!p)
			return NULL;
		if (p->token == token && slice_eq(p->key, key))
			return p;
	}
}

/* Returns the slot `p` went into. */
static size_t index_put(struct mt_index *ix, struct mt_partition *p)
{
	size_t i = slot_of(p->token, ix->cap);
	while (atomic_load_explicit(&ix->slots[i], memory_order_relaxed))
		i = (i + 1) & (ix->cap - 1);
	atomic_store_explicit(&ix->slots[i], p, memory_order_release);
	return i;
}

/* Per insert while the index grows from C to 2C slots: the 2C new slots
 * are zeroed GROW_ZERO at a time, then the C old ones copied GROW_COPY at
 * a time. Growth starts at C/2 entries and ends C/8 inserts later. */
#define GROW_ZERO 32
#define GROW_COPY 16

static struct mt_index *index_new(struct memtable *mt, size_t cap)
{
	struct mt_index *ix = arena_alloc_aligned(
		&mt->arena, sizeof(*ix) + cap * sizeof(ix->slots[0]), 8);
	if (ix)
		ix->cap = cap;
	return ix;
}

/* Gives up on the index (out of memory): lookups use the skiplist. */
static void index_drop(struct memtable *mt)
{
	atomic_store_explicit(&mt->index, NULL, memory_order_release);
	mt->growing = NULL;
	mt->indexed++;
}

static void grow_step(struct memtable *mt, struct mt_index *ix)
{
	struct mt_index *nx = mt->growing;
	if (!mt->grow_copying) {
		size_t end = mt->grow_pos + GROW_ZERO;
		for (size_t i = mt->grow_pos; i < end && i < nx->cap; i++)
			atomic_init(&nx->slots[i], NULL);
		mt->grow_pos = end;
		if (end >= nx->cap) {
			mt->grow_copying = true;
			mt->grow_pos = 0;
		}
		return;
	}
	size_t end = mt->grow_pos + GROW_COPY;
	for (size_t i = mt->grow_pos; i < end && i < ix->cap; i++) {
		struct mt_partition *q = atomic_load_explicit(
			&ix->slots[i], memory_order_relaxed);
		if (q)
			index_put(nx, q);
	}
	mt->grow_pos = end;
	if (end >= ix->cap) {
		atomic_store_explicit(&mt->index, nx, memory_order_release);
		mt->growing = NULL;
	}
}

/* Adds a new partition to the index (see memtable_internal.h for how it
 * grows). Without memory the index is dropped and lookups fall back to
 * the skiplist. */
static void index_add(struct memtable *mt, struct mt_partition *p)
{
	struct mt_index *ix =
		atomic_load_explicit(&mt->index, memory_order_relaxed);
	if (!ix && mt->indexed)
		return; /* given up on */
	if (!ix) {
		if (!(ix = index_new(mt, 64))) {
			index_drop(mt);
			return;
		}
		for (size_t i = 0; i < ix->cap; i++)
			atomic_init(&ix->slots[i], NULL);
		atomic_store_explicit(&mt->index, ix, memory_order_release);
	}
	if (!mt->growing && 2 * (mt->indexed + 1) > ix->cap) {
		if (!(mt->growing = index_new(mt, 2 * ix->cap))) {
			index_drop(mt);
			return;
		}
		mt->grow_pos = 0;
		mt->grow_copying = false;
	}
	size_t slot = index_put(ix, p);
	/* Slots already copied are not looked at again. */
	if (mt->growing && mt->grow_copying && slot < mt->grow_pos)
		index_put(mt->growing, p);
	mt->indexed++;
	if (mt->growing)
		grow_step(mt, ix);
}

struct skiplist_node *memtable_seek_token(const struct memtable *mt,
					  int64_t token, bool inclusive)
{
	/* The empty key sorts before every key of the same token. */
	struct mt_partition probe = {.token = token};
	struct skiplist_node *n = skiplist_seek(&mt->parts, &probe);
	while (!inclusive && n && mt_node_partition(n)->token == token)
		n = skiplist_next(n);
	return n;
}

static struct mt_partition *get_partition(struct memtable *mt,
					  const struct storage_mutation *m)
{
	/* One skiplist search whether the partition is new or not. */
	struct skiplist_node *prev[SKIPLIST_MAX_HEIGHT];
	if (atomic_load_explicit(&mt->index, memory_order_relaxed)) {
		struct mt_partition *known =
			memtable_find(mt, m->token, m->key);
		if (known)
			return known;
	}
	struct mt_partition probe = {.token = m->token, .key = m->key};
	struct skiplist_node *n = skiplist_find_prev(&mt->parts, &probe, prev);
	if (n)
		return mt_node_partition(n);
	struct mt_partition *p = arena_alloc(&mt->arena, sizeof(*p));
	void *k = p ? arena_memdup(&mt->arena, m->key.ptr, m->key.len) : NULL;
	if (!k) {
		err_set(ERR_NOMEM, "memtable partition");
		return NULL;
	}
	p->token = m->token;
	p->key = slice_make(k, m->key.len);
	atomic_init(&p->meta, NULL);
	if (skiplist_init(&p->atoms, &mt->arena, atom_node_cmp, mt->meta) ||
	    !skiplist_insert_at(&mt->parts, p, prev))
		return NULL;
	index_add(mt, p);
	return p;
}

/* Publishes a new deletion-info block merging the mutation's. */
static int apply_deletions(struct memtable *mt, struct mt_partition *p,
			   const struct storage_mutation *m)
{
	if (m->pdel.ts == DELETION_NONE && m->rt_count == 0)
		return 0;
	struct mt_pmeta *old = mt_partition_meta(p);
	size_t old_n = old ? old->rt_count : 0;
	struct mt_pmeta *nm = arena_alloc(&mt->arena, sizeof(*nm));
	struct rtomb *rts = NULL;
	if (nm && old_n + m->rt_count)
		rts = arena_alloc(&mt->arena,
				  (old_n + m->rt_count) * sizeof(*rts));
	if (!nm || (old_n + m->rt_count && !rts))
		return err_set(ERR_NOMEM, "memtable deletion");
	nm->pdel = old ? old->pdel : (struct deletion){DELETION_NONE, 0};
	nm->pdel = storage_deletion_max(nm->pdel, m->pdel);
	if (old_n)
		memcpy(rts, old->rts, old_n * sizeof(*rts));
	for (size_t i = 0; i < m->rt_count; i++)
		if (storage_rtomb_copy(&mt->arena, &m->rts[i], &rts[old_n + i]))
			return err_set(ERR_NOMEM, "memtable deletion");
	nm->rts = rts;
	nm->rt_count = old_n + m->rt_count;
	atomic_store_explicit(&p->meta, nm, memory_order_release);
	if (m->pdel.ts != DELETION_NONE) {
		mt->tombstone_count++;
		if (m->pdel.ts < mt->min_ts)
			mt->min_ts = m->pdel.ts;
		if (m->pdel.ts > mt->max_ts)
			mt->max_ts = m->pdel.ts;
	}
	for (size_t i = 0; i < m->rt_count; i++) {
		mt->tombstone_count++;
		if (m->rts[i].del.ts < mt->min_ts)
			mt->min_ts = m->rts[i].del.ts;
		if (m->rts[i].del.ts > mt->max_ts)
			mt->max_ts = m->rts[i].del.ts;
	}
	return 0;
}

static int apply_atom(struct memtable *mt, struct mt_partition *p,
		      const struct atom *a)
{
	struct skiplist_node *prev[SKIPLIST_MAX_HEIGHT];
	struct skiplist_node *n = skiplist_find_prev(&p->atoms, a, prev);
	if (n) {
		const struct atom *cur = skiplist_key(n);
		if (storage_atom_reconcile(cur, a) == cur)
			return 0;
	}
	struct atom *copy = arena_alloc(&mt->arena, sizeof(*copy));
	if (!copy || storage_atom_copy(&mt->arena, a, copy))
		return err_set(ERR_NOMEM, "memtable atom");
	if (n)
		skiplist_set_key(n, copy);
	else if (!skiplist_insert_at(&p->atoms, copy, prev))
		return -1;
	else
		mt->atom_count++;
	if (a->flags & ATOM_TOMBSTONE)
		mt->tombstone_count++;
	if (a->ts < mt->min_ts)
		mt->min_ts = a->ts;
	if (a->ts > mt->max_ts)
		mt->max_ts = a->ts;
	return 0;
}

int memtable_apply(struct memtable *mt, const struct storage_mutation *m)
{
	struct mt_partition *p = get_partition(mt, m);
	if (!p || apply_deletions(mt, p, m))
		return -1;
	for (size_t i = 0; i < m->atom_count; i++)
		if (apply_atom(mt, p, &m->atoms[i]))
			return -1;
	return mt->sai ? sai_apply(mt, p, m) : 0;
}
