/*
 * The read merge: collect, reconcile, shadow, expire, build rows.
 */
#define LOG_MODULE "storage"
#include "storage/read_internal.h"

#include "common/err.h"
#include "common/log.h"
#include "common/zalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	/* a first array of at most 1 KiB stays in malloc's per-thread cache
	 * (one read's arrays are short-lived and usually small) */
	size_t n = *cap ? *cap * 2 : elem <= 64 ? 16 : 1024 / elem;
	if (!n)
		n = 1;
	while (n < need)
		n *= 2;
	void *p = realloc(*arr, n * elem);
	if (!p)
		return err_set(ERR_NOMEM, "read buffer");
	*arr = p;
	*cap = n;
	return 0;
}

int storage_read_ctx_init(struct read_ctx *c,
			  const struct storage_table_meta *t,
			  const struct storage_read_cmd *cmd, int64_t now_sec)
{
	memset(c, 0, sizeof(*c));
	c->t = t;
	c->cmd = cmd;
	c->now_sec = now_sec;
	c->pdel.ts = DELETION_NONE;
	c->warn_threshold = INT64_MAX;
	c->fail_threshold = INT64_MAX;
	size_t n = cmd->slices ? cmd->slice_count : 1;
	c->bounds = zcalloc(n ? n : 1, sizeof(*c->bounds));
	if (!c->bounds)
		return err_set(ERR_NOMEM, "read bounds");
	c->bound_count = n;
	buf_init(&c->bound_bytes);
	/* Encode first, then point into the final buffer. */
	size_t *offs = zcalloc(2 * (n ? n : 1) + 1, sizeof(size_t));
	if (!offs)
		return err_set(ERR_NOMEM, "read bounds");
	for (size_t i = 0; i < n; i++) {
		const struct storage_slice *s =
			cmd->slices ? &cmd->slices[i] : NULL;
		offs[2 * i] = c->bound_bytes.len;
		if (storage_ck_encode(&c->bound_bytes, CK_ROW,
				      s ? s->start : NULL,
				      s ? s->start_count : 0)) {
			free(offs);
			return -1;
		}
		offs[2 * i + 1] = c->bound_bytes.len;
		if (storage_ck_encode(&c->bound_bytes, CK_ROW,
				      s ? s->end : NULL,
				      s ? s->end_count : 0)) {
			free(offs);
			return -1;
		}
		c->bounds[i].start_incl =
			!s || s->start_incl || !s->start_count;
		c->bounds[i].end_incl = !s || s->end_incl || !s->end_count;
	}
	offs[2 * n] = c->bound_bytes.len;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *base = c->bound_bytes.data;
		c->bounds[i].start = slice_make(base + offs[2 * i],
						offs[2 * i + 1] - offs[2 * i]);
		c->bounds[i].end =
			slice_make(base + offs[2 * i + 1],
				   offs[2 * i + 2] - offs[2 * i + 1]);
	}
	free(offs);
	return 0;
}

void storage_read_ctx_reset(struct read_ctx *c)
{
	c->found = false;
	c->have_hash = false;
	c->pdel.ts = DELETION_NONE;
	c->rt_count = 0;
	c->atom_count = 0;
	for (size_t i = 0; i < c->keep_count; i++)
		c->keep[i].release(c->keep[i].p);
	c->keep_count = 0;
}

void storage_read_ctx_destroy(struct read_ctx *c)
{
	storage_read_ctx_reset(c);
	free(c->bounds);
	buf_free(&c->bound_bytes);
	free(c->rts);
	free(c->atoms);
	free(c->keep);
	memset(c, 0, sizeof(*c));
}

bool storage_read_ctx_wants(const struct read_ctx *c, struct slice ck)
{
	if (ck.len && ck.ptr[0] == CK_STATIC)
		return c->cmd->with_static;
	for (size_t i = 0; i < c->bound_count; i++) {
		const struct read_bound *b = &c->bounds[i];
		if (storage_ck_after_start(c->t, ck, b->start, b->start_incl) &&
		    storage_ck_before_end(c->t, ck, b->end, b->end_incl))
			return true;
	}
	return false;
}

bool storage_read_ctx_past_end(const struct read_ctx *c, struct slice ck)
{
	if (ck.len && ck.ptr[0] == CK_STATIC)
		return false;
	const struct read_bound *b = &c->bounds[c->bound_count - 1];
	return !storage_ck_before_end(c->t, ck, b->end, b->end_incl);
}

int storage_read_ctx_add_atom(struct read_ctx *c, const struct atom *a)
{
	/* A dropped column's cells are gone for every reader (reads,
	 * fragments, scans, compaction, which thereby purges them), but
	 * those newer than the drop belong to a column re-added under its
	 * name (compaction rewrites them under the new slot). */
	struct atom moved;
	if (a->slot != ATOM_SLOT_ROW && c->t) {
		int col = storage_column_read_as(c->t, (size_t)a->slot - 1,
						 a->ts);
		if (col < 0)
			return 0;
		if ((size_t)col != (size_t)a->slot - 1) {
			moved = *a;
			moved.slot = (uint16_t)(col + 1);
			a = &moved;
		}
	}
	/* A memory-only read runs on an event loop: a big partition is a
	 * worker's job however it is stored. */
	if (c->cached_only && c->atom_count >= READ_CACHED_MAX_ATOMS)
		return err_set(ERR_AGAIN, "a partition of more than %u cells",
			       READ_CACHED_MAX_ATOMS);
	if (grow((void **)&c->atoms, &c->atom_cap, c->atom_count + 1,
		 sizeof(*c->atoms)))
		return -1;
	c->atoms[c->atom_count++] = *a;
	c->found = true;
	return 0;
}

int storage_read_ctx_add_rtomb(struct read_ctx *c, const struct rtomb *r)
{
	if (grow((void **)&c->rts, &c->rt_cap, c->rt_count + 1,
		 sizeof(*c->rts)))
		return -1;
	c->rts[c->rt_count++] = *r;
	c->found = true;
	return 0;
}

void storage_read_ctx_add_pdel(struct read_ctx *c, struct deletion d)
{
	if (d.ts == DELETION_NONE)
		return;
	c->pdel = storage_deletion_max(c->pdel, d);
	c->found = true;
}

int storage_read_ctx_keep_ref(struct read_ctx *c, void *p,
			      void (*release)(void *))
{
	if (grow((void **)&c->keep, &c->keep_cap, c->keep_count + 1,
		 sizeof(*c->keep))) {
		release(p);
		return -1;
	}
	c->keep[c->keep_count++] = (struct read_keep){p, release};
	return 0;
}

int storage_read_ctx_keep(struct read_ctx *c, void *p)
{
	return storage_read_ctx_keep_ref(c, p, free);
}

int storage_read_ctx_add_mt_partition(struct read_ctx *c,
				      struct mt_partition *p)
{
	struct mt_pmeta *pm = mt_partition_meta(p);
	if (pm) {
		storage_read_ctx_add_pdel(c, pm->pdel);
		for (size_t i = 0; i < pm->rt_count; i++)
			if (storage_read_ctx_add_rtomb(c, &pm->rts[i]))
				return -1;
	}
	/* Static row first, then each slice from its start. */
	struct skiplist_node *n = skiplist_seek(&p->atoms, NULL);
	for (; n; n = skiplist_next(n)) {
		const struct atom *a = skiplist_key(n);
		if (a->ck.ptr[0] != CK_STATIC)
			break;
		if (c->cmd->with_static && storage_read_ctx_add_atom(c, a))
			return -1;
	}
	for (size_t i = 0; i < c->bound_count; i++) {
		const struct read_bound *b = &c->bounds[i];
		struct atom probe = {.ck = b->start};
		for (n = skiplist_seek(&p->atoms, &probe); n;
		     n = skiplist_next(n)) {
			const struct atom *a = skiplist_key(n);
			if (!storage_ck_before_end(c->t, a->ck, b->end,
						   b->end_incl))
				break;
			if (!storage_ck_after_start(c->t, a->ck, b->start,
						    b->start_incl))
				continue;
			if (storage_read_ctx_add_atom(c, a))
				return -1;
		}
	}
	return 0;
}

int storage_read_ctx_add_memtable(struct read_ctx *c, const struct memtable *mt,
				  int64_t token, struct slice key)
{
	struct mt_partition *p = memtable_find(mt, token, key);
	return p ? storage_read_ctx_add_mt_partition(c, p) : 0;
}

static int sort_cmp(const void *a, const void *b, void *t)
{
	return storage_atom_cmp(t, a, b);
}

void storage_read_ctx_merge(struct read_ctx *c)
{
	if (c->atom_count < 2)
		return;
	qsort_r(c->atoms, c->atom_count, sizeof(*c->atoms), sort_cmp,
		(void *)c->t);
	size_t w = 0;
	for (size_t i = 1; i < c->atom_count; i++) {
		if (storage_atom_cmp(c->t, &c->atoms[w], &c->atoms[i]) == 0)
			c->atoms[w] = *storage_atom_reconcile(&c->atoms[w],
							      &c->atoms[i]);
		else
			c->atoms[++w] = c->atoms[i];
	}
	c->atom_count = w + 1;
}

/* arena_memdup does not align; struct arrays need it. */
static void *dup_aligned(struct arena *ar, const void *p, size_t n)
{
	void *d = arena_alloc(ar, n);
	if (d)
		memcpy(d, p, n);
	return d;
}

struct builder {
	struct read_ctx *c;
	struct arena *ar;
	struct storage_row_view *rows;
	size_t row_count, row_cap;
	struct storage_row_view static_row;
	bool has_static;
	struct storage_cell_view *cells;
	size_t cell_count, cell_cap;
	uint64_t tombstones;
};

static bool projected(const struct read_ctx *c, uint16_t column)
{
	if (!c->cmd->columns)
		return true;
	for (size_t i = 0; i < c->cmd->column_count; i++)
		if (c->cmd->columns[i] == column)
			return true;
	return false;
}

/* A counter's shards (one atom per host id, consecutive) read as one
 * bigint cell: the sum of their counts, the latest shard's clock as its
 * timestamp. */
static int add_counter_shard(struct builder *b, const struct atom *a)
{
	uint16_t column = (uint16_t)(a->slot - 1);
	int64_t count =
		a->value.len == 8 ? (int64_t)be64_load(a->value.ptr) : 0;
	if (b->cell_count && b->cells[b->cell_count - 1].column == column) {
		struct storage_cell_view *v = &b->cells[b->cell_count - 1];
		uint8_t *p = (uint8_t *)v->value.ptr;
		be64_store(p, (uint64_t)((int64_t)be64_load(p) + count));
		if (a->ts > v->ts)
			v->ts = a->ts;
		return 0;
	}
	uint8_t *p = arena_alloc(b->ar, 8);
	if (!p || grow((void **)&b->cells, &b->cell_cap, b->cell_count + 1,
		       sizeof(*b->cells)))
		return err_set(ERR_NOMEM, "row");
	be64_store(p, (uint64_t)count);
	b->cells[b->cell_count++] = (struct storage_cell_view){
		.column = column, .value = slice_make(p, 8), .ts = a->ts};
	return 0;
}

static int add_cell(struct builder *b, const struct atom *a)
{
	if (b->c->t->columns[a->slot - 1].type->kind == STORAGE_TYPE_COUNTER)
		return add_counter_shard(b, a);
	if (grow((void **)&b->cells, &b->cell_cap, b->cell_count + 1,
		 sizeof(*b->cells)))
		return -1;
	struct storage_cell_view *v = &b->cells[b->cell_count++];
	v->column = (uint16_t)(a->slot - 1);
	v->path = a->path;
	v->value = a->value;
	v->ts = a->ts;
	v->ttl = (a->flags & ATOM_EXPIRING) ? a->ttl : 0;
	v->expiry = (a->flags & ATOM_EXPIRING) ? a->ldt : 0;
	return 0;
}

/* Copies the pending cells and clustering into the arena as one row. */
static int emit_row(struct builder *b, struct slice ck, int64_t marker_ts)
{
	struct storage_row_view row = {.marker_ts = marker_ts};
	int kind;
	struct slice vals[32];
	int n = storage_ck_decode(ck, &kind, vals, 32);
	if (n < 0)
		return err_set(ERR_CORRUPT, "malformed clustering");
	row.is_static = kind == CK_STATIC;
	row.clustering_count = (size_t)n;
	if (n) {
		row.clustering =
			dup_aligned(b->ar, vals, (size_t)n * sizeof(*vals));
		if (!row.clustering)
			return err_set(ERR_NOMEM, "row");
	}
	row.cell_count = b->cell_count;
	if (b->cell_count) {
		row.cells = dup_aligned(b->ar, b->cells,
					b->cell_count * sizeof(*b->cells));
		if (!row.cells)
			return err_set(ERR_NOMEM, "row");
	}
	b->cell_count = 0;
	if (row.is_static) {
		b->static_row = row;
		b->has_static = true;
		return 0;
	}
	if (grow((void **)&b->rows, &b->row_cap, b->row_count + 1,
		 sizeof(*b->rows)))
		return -1;
	b->rows[b->row_count++] = row;
	return 0;
}

/* Walks one row's atoms [i, j). */
static int build_row(struct builder *b, size_t i, size_t j)
{
	struct read_ctx *c = b->c;
	struct deletion row_del = {DELETION_NONE, 0}, coll_del = row_del;
	uint16_t coll_slot = 0;
	int64_t marker_ts = INT64_MIN;
	bool live = false;
	b->cell_count = 0;
	for (size_t k = i; k < j; k++) {
		const struct atom *a = &c->atoms[k];
		bool shadowed = deletion_covers(c->pdel, a->ts) ||
				deletion_covers(row_del, a->ts) ||
				(a->slot == coll_slot &&
				 deletion_covers(coll_del, a->ts)) ||
				storage_rtombs_cover(c->t, c->rts, c->rt_count,
						     a->ck, a->ts);
		if (a->kind == ATOM_KIND_DELETION) {
			b->tombstones++;
			struct deletion d = {a->ts, a->ldt};
			if (a->slot == ATOM_SLOT_ROW) {
				row_del = storage_deletion_max(row_del, d);
			} else {
				coll_slot = a->slot;
				coll_del = d;
			}
			continue;
		}
		if (!storage_atom_is_live(a, c->now_sec)) {
			b->tombstones++;
			continue;
		}
		if (shadowed)
			continue;
		live = true;
		if (a->slot == ATOM_SLOT_ROW) {
			marker_ts = a->ts;
			continue;
		}
		if (a->slot - 1 >= (int)c->t->column_count ||
		    !projected(c, (uint16_t)(a->slot - 1)))
			continue;
		if (add_cell(b, a))
			return -1;
	}
	if (!live)
		return 0;
	return emit_row(b, c->atoms[i].ck, marker_ts);
}

static void apply_order_and_limit(struct builder *b)
{
	const struct storage_read_cmd *cmd = b->c->cmd;
	if (cmd->reverse) {
		for (size_t i = 0, j = b->row_count; i + 1 < j; i++, j--) {
			struct storage_row_view t = b->rows[i];
			b->rows[i] = b->rows[j - 1];
			b->rows[j - 1] = t;
		}
	}
	if (cmd->limit && b->row_count > cmd->limit)
		b->row_count = cmd->limit;
}

/* The partition key's columns, "pk" or "p1, p2", for a query's shape. */
static void pk_names(const struct storage_table_meta *t, char *out, size_t cap)
{
	size_t k = 0;
	out[0] = '\0';
	for (size_t i = 0; i < t->pk_count && k < cap; i++)
		k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? ", " : "",
				      t->columns[t->pk[i]].name);
}

int storage_read_ctx_check_tombstones(struct read_ctx *c, uint64_t n,
				      uint64_t live_rows, int64_t token)
{
	c->seen_live_rows += live_rows;
	c->seen_tombstones += n;
	if (c->cmd->stats) {
		c->cmd->stats->live_rows += live_rows;
		c->cmd->stats->tombstones += n;
	}
	if ((int64_t)n <= c->warn_threshold && (int64_t)n <= c->fail_threshold)
		return 0;
	char pk[256];
	pk_names(c->t, pk, sizeof(pk));
	if ((int64_t)n > c->fail_threshold) {
		c->tombstone_failures++;
		LOG_AT(LOG_LEVEL_ERROR,
		       "Scanned over %lld tombstones during query SELECT * "
		       "FROM %s.%s WHERE token(%s) = %lld (see "
		       "tombstone_failure_threshold); query aborted",
		       (long long)c->fail_threshold, c->t->keyspace, c->t->name,
		       pk, (long long)token);
		return err_set(ERR_TOMBSTONES,
			       "read of %s.%s scanned %llu "
			       "tombstones (tombstone_failure_threshold %lld)",
			       c->t->keyspace, c->t->name,
			       (unsigned long long)n,
			       (long long)c->fail_threshold);
	}
	c->tombstone_warnings++;
	LOG_AT(LOG_LEVEL_WARN,
	       "Read %llu live rows and %llu tombstone cells for query "
	       "SELECT * FROM %s.%s WHERE token(%s) = %lld (see "
	       "tombstone_warn_threshold)",
	       (unsigned long long)live_rows, (unsigned long long)n,
	       c->t->keyspace, c->t->name, pk, (long long)token);
	return 0;
}

/* A result and the arena holding its bytes, in one allocation. */
struct result_mem {
	struct storage_result r; /* first: freeing it frees both */
	struct arena ar;
};

static void result_free(struct storage_result *r)
{
	if (!r)
		return;
	if (r->priv)
		arena_destroy(r->priv);
	free(r->rows);
	free(r);
}

/* The arena's block size for a result: what its copies need (plus
 * headroom for the rows), at least four times its largest copy (the
 * arena gives a larger one a block of its own), at most 4 KiB. A small
 * result thus takes one small block from malloc's per-thread cache. */
static size_t result_block_size(const struct read_ctx *c, struct slice key)
{
	size_t n = key.len + 128, big = key.len;
	for (size_t i = 0; i < c->atom_count && n < 4096; i++) {
		const struct atom *a = &c->atoms[i];
		n += a->ck.len + a->path.len + a->value.len + 3 * 16;
		if (a->value.len > big)
			big = a->value.len;
		if (a->ck.len > big)
			big = a->ck.len;
	}
	if (n < 4 * big + 64)
		n = 4 * big + 64;
	return n < 4096 ? n : 4096;
}

void storage_result_delete(struct storage_result *r)
{
	result_free(r);
}

int storage_read_ctx_finish(struct read_ctx *c, int64_t token, struct slice key,
			    struct storage_result **out)
{
	*out = NULL;
	storage_read_ctx_merge(c);
	struct result_mem *m = zcalloc(1, sizeof(*m));
	if (!m)
		return err_set(ERR_NOMEM, "result");
	struct storage_result *r = &m->r;
	struct arena *ar = &m->ar;
	arena_create(ar, result_block_size(c, key));
	r->priv = ar;
	r->token = token;
	struct builder b = {.c = c, .ar = ar};
	int rc = 0;
	/* Every byte the rows point at is copied into the result's arena. */
	for (size_t i = 0; i < c->atom_count && !rc; i++) {
		struct atom *a = &c->atoms[i];
		if (storage_atom_copy(ar, a, a))
			rc = err_set(ERR_NOMEM, "result");
	}
	b.tombstones = c->rt_count + (c->pdel.ts != DELETION_NONE);
	for (size_t i = 0; i < c->atom_count && !rc;) {
		size_t j = i + 1;
		while (j < c->atom_count && storage_ck_cmp(c->t, c->atoms[i].ck,
							   c->atoms[j].ck) == 0)
			j++;
		rc = build_row(&b, i, j);
		i = j;
	}
	void *k = rc ? NULL : arena_memdup(ar, key.ptr, key.len ? key.len : 1);
	if (!rc && !k)
		rc = err_set(ERR_NOMEM, "result");
	if (!rc)
		rc = storage_read_ctx_check_tombstones(c, b.tombstones,
						       b.row_count, token);
	free(b.cells);
	if (rc) {
		free(b.rows);
		result_free(r);
		return -1;
	}
	r->key = slice_make(k, key.len);
	apply_order_and_limit(&b);
	r->rows = b.rows;
	r->row_count = b.row_count;
	r->tombstones = b.tombstones;
	if (b.has_static) {
		r->static_row =
			dup_aligned(ar, &b.static_row, sizeof(b.static_row));
		if (!r->static_row) {
			result_free(r);
			return err_set(ERR_NOMEM, "result");
		}
	}
	*out = r;
	return 0;
}
