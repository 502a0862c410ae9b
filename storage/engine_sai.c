/*
 * Indexed queries' storage side: the candidate partitions of one term in
 * a token range, from every memtable's index and every SSTable's index
 * component, merged in token order without repeats.
 *
 * What cannot be answered from an index is answered by listing: a
 * memtable made before the index existed, an SSTable written before it
 * (no component), or one whose component is missing, corrupt or of an
 * earlier index of the same name gives every partition it holds in the
 * range. Candidates are a superset, never a subset, of the partitions
 * holding the term live; the reader re-checks the data. A listed SSTable
 * has its component written again by the index builder in the background
 * (engine_sai_build.c); an index still being built is refused.
 */
#define LOG_MODULE "storage"
#include "storage/engine_internal.h"
#include "storage/memtable_internal.h"
#include "storage/sai_component.h"
#include "storage/sai_internal.h"

#include "common/err.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

struct cand {
	int64_t token;
	size_t off, len;       /* the partition key, in the bytes */
	size_t ck_off, ck_len; /* the row's clustering, or none (0) */
};

struct collect {
	struct cand *v;
	size_t n, cap;
	struct buf bytes;
	int64_t start, end;
	bool full;
	int err;
	/* the page: at most pg->limit kept; once more were seen, only those
	 * up to the limit-th (`capped` at cap_token, cap_key) are kept */
	const struct storage_index_page *pg;
	bool capped, more;
	int64_t cap_token;
	struct buf cap_key;
	uint64_t shrinks; /* times the kept set was cut down */
	size_t shrink_at; /* entries held when the next cut is due */
	bool rows;        /* the component keys carry rows */
	/* a component lookup: the first key wanted, and how many of the
	 * current term's keys were kept */
	struct buf from;
	size_t run_kept;
	int64_t run_token;
	struct buf run_last;
	uint64_t visited; /* index entries walked */
};

static bool in_range(const struct collect *c, int64_t token)
{
	return c->full || (token > c->start && token <= c->end);
}

static struct slice cand_key(const struct collect *c, const struct cand *x)
{
	return (struct slice){c->bytes.data + x->off, x->len};
}

/* Appends a candidate as it is (no range or page check): partition
 * `key`, and its row `ck` (empty: the partition). */
static void push(struct collect *c, int64_t token, struct slice key,
		 struct slice ck)
{
	if (c->err)
		return;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct cand *v = realloc(c->v, cap * sizeof(*v));
		if (!v) {
			c->err = 1;
			return;
		}
		c->v = v;
		c->cap = cap;
	}
	size_t off = c->bytes.len;
	if (buf_append(&c->bytes, key.ptr, key.len) ||
	    buf_append(&c->bytes, ck.ptr, ck.len)) {
		c->err = 1;
		return;
	}
	c->v[c->n++] =
		(struct cand){token, off, key.len, off + key.len, ck.len};
}

static void shrink(struct collect *c);

static void add(struct collect *c, int64_t token, struct slice key,
		struct slice ck)
{
	if (c->err || !in_range(c, token))
		return;
	const struct storage_index_page *pg = c->pg;
	if (pg && pg->after &&
	    storage_partition_cmp(token, key, pg->after_token, pg->after_key) <=
		    0)
		return;
	if (c->capped &&
	    storage_partition_cmp(
		    token, key, c->cap_token,
		    (struct slice){c->cap_key.data, c->cap_key.len}) > 0) {
		c->more = true;
		return;
	}
	push(c, token, key, ck);
	/* a page's worth kept: cut back to the limit now and then (a
	 * limit's partitions may hold several rows each) */
	if (pg && pg->limit && c->n >= 2 * pg->limit + 16 &&
	    c->n >= c->shrink_at) {
		shrink(c);
		c->shrink_at = 2 * c->n;
	}
}

/* A memtable: its index, or every partition in the range. */
static bool term_in(struct slice t, const struct sai_bound *lo,
		    const struct sai_bound *hi, bool *past)
{
	*past = false;
	if (lo) {
		int r = slice_cmp(t, (struct slice){lo->term, lo->len});
		if (r < 0 || (r == 0 && !lo->incl))
			return false;
	}
	if (hi) {
		int r = slice_cmp(t, (struct slice){hi->term, hi->len});
		if (r > 0 || (r == 0 && !hi->incl)) {
			*past = true;
			return false;
		}
	}
	return true;
}

/* A memtable term's sorted entries (memtable_internal.h): from where the
 * page resumes (or the token range starts), until the range's end or the
 * page's limit of partitions. */
static void from_sorted(struct collect *c, const struct skiplist *s)
{
	const struct storage_index_page *pg = c->pg;
	struct mt_partition pp = {.token = 0};
	struct mt_sai_ref probe = {&pp, {NULL, 0}};
	const struct mt_sai_ref *from = NULL;
	if (pg && pg->after && (c->full || pg->after_token > c->start)) {
		pp.token = pg->after_token;
		pp.key = pg->after_key;
		probe.ck = MT_SAI_CK_LAST; /* past every row of it */
		from = &probe;
	} else if (!c->full) {
		if (c->start == INT64_MAX)
			return;
		pp.token = c->start + 1;
		from = &probe;
	}
	const struct mt_partition *last = NULL;
	size_t kept = 0;
	for (struct skiplist_node *n = skiplist_seek(s, from); n && !c->err;
	     n = skiplist_next(n)) {
		const struct mt_sai_ref *r = skiplist_key(n);
		const struct mt_partition *p = r->part;
		if (!c->full && p->token > c->end)
			break;
		if (p != last) {
			/* the term's limit-th partition bounds the page, as
			 * in component_key */
			if ((pg && pg->limit && kept >= pg->limit) ||
			    (c->capped &&
			     storage_partition_cmp(
				     p->token, p->key, c->cap_token,
				     (struct slice){c->cap_key.data,
						    c->cap_key.len}) > 0)) {
				c->more = true;
				break;
			}
			kept++;
			last = p;
		}
		c->visited++;
		add(c, p->token, p->key, r->ck);
	}
}

static void from_memtable(struct collect *c, const struct memtable *mt,
			  const struct storage_index *ix,
			  const struct sai_bound *lo,
			  const struct sai_bound *hi, uint64_t *scanned)
{
	const struct skiplist *sl = memtable_sai(mt, ix->name);
	const struct storage_index *mix =
		storage_table_meta_index(mt->meta, ix->name);
	char a[64], b[64];
	if (sl && mix && sai_index_ident(mt->meta, mix, a, sizeof(a)) >= 0 &&
	    sai_index_ident(mt->meta, ix, b, sizeof(b)) >= 0 &&
	    strcmp(a, b) == 0) {
		struct mt_sai_term probe = {
			.term = lo ? (struct slice){lo->term, lo->len}
				   : (struct slice){NULL, 0},
		};
		for (struct skiplist_node *n = skiplist_seek(sl, &probe); n;
		     n = skiplist_next(n)) {
			struct mt_sai_term *t = skiplist_key(n);
			bool past;
			if (!term_in(t->term, lo, hi, &past)) {
				if (past)
					break;
				continue;
			}
			const struct skiplist *sorted = atomic_load_explicit(
				&t->sorted, memory_order_acquire);
			if (sorted) {
				from_sorted(c, sorted);
				continue;
			}
			/* the entries published when the count was read;
			 * a chunk's next is only read when the count says
			 * the writer linked it (it may be linking it now) */
			size_t left = atomic_load_explicit(
				&t->count, memory_order_acquire);
			const struct mt_sai_chunk *ch = t->head;
			while (ch) {
				for (uint32_t k = 0; k < ch->cap && left;
				     k++, left--) {
					c->visited++;
					add(c, ch->parts[k].part->token,
					    ch->parts[k].part->key,
					    ch->parts[k].ck);
				}
				if (!left)
					break;
				ch = ch->next;
			}
		}
		return;
	}
	if (!memtable_is_empty(mt))
		(*scanned)++;
	for (struct skiplist_node *n = memtable_seek_token(
		     mt, c->full ? INT64_MIN : c->start, c->full);
	     n; n = skiplist_next(n)) {
		const struct mt_partition *p = mt_node_partition(n);
		if (!c->full && p->token > c->end)
			break;
		add(c, p->token, p->key, (struct slice){NULL, 0});
	}
}

/* A component's key. Keys of a term come in partition order: once one is
 * beyond the token range, or beyond what the page can keep, so are the
 * rest of the term's (false: skip them). */
static bool component_key(void *arg, bool first, const uint8_t *k, uint32_t len)
{
	struct collect *c = arg;
	int64_t token;
	struct slice key, ck = {NULL, 0};
	if (first) {
		c->run_kept = 0;
		c->run_last.len = 0;
	}
	if (c->rows ? sai_component_row_key_split(k, len, &token, &key, &ck) !=
			      0
		    : sai_component_key_split(k, len, &token, &key) != 0)
		return true;
	if (!c->full && token > c->end)
		return false;
	if (!in_range(c, token))
		return true;
	const struct storage_index_page *pg = c->pg;
	if (pg && pg->after &&
	    storage_partition_cmp(token, key, pg->after_token, pg->after_key) <=
		    0)
		return true;
	if (c->capped &&
	    storage_partition_cmp(
		    token, key, c->cap_token,
		    (struct slice){c->cap_key.data, c->cap_key.len}) > 0) {
		c->more = true;
		/* row keys of one token are not in partition order: only a
		 * later token ends the walk */
		return c->rows && token == c->cap_token;
	}
	/* a partition not the run's last kept one (a partition's keys, one
	 * per row of a row-level index, are next to each other) */
	bool fresh =
		!c->run_kept ||
		storage_partition_cmp(
			token, key, c->run_token,
			(struct slice){c->run_last.data, c->run_last.len}) != 0;
	if (fresh && pg && pg->limit && c->run_kept >= pg->limit &&
	    !(c->rows && token == c->run_token)) {
		/* the term's limit-th partition bounds the page: every
		 * candidate kept is at or below it, the rest wait */
		c->more = true;
		return false;
	}
	add(c, token, key, ck);
	if (fresh) {
		c->run_kept++;
		c->run_token = token;
		c->run_last.len = 0;
		if (buf_append(&c->run_last, key.ptr, key.len))
			c->err = 1;
	}
	return true;
}

/* The first component key a lookup needs: the page's resume position, or
 * the range's start (NULL: from the first). */
static const struct buf *component_from(struct collect *c)
{
	const struct storage_index_page *pg = c->pg;
	if (pg && pg->after && (c->full || pg->after_token > c->start)) {
		/* a row-level component's keys put the partition key's
		 * length first: within a token they are not in partition
		 * order, so the seek goes to the token's first key */
		struct slice after =
			c->rows ? (struct slice){NULL, 0} : pg->after_key;
		if (sai_component_key(pg->after_token, after, &c->from))
			return NULL;
		return &c->from;
	}
	if (c->full)
		return NULL;
	if (c->start == INT64_MAX ||
	    sai_component_key(c->start + 1, (struct slice){NULL, 0}, &c->from))
		return NULL;
	return &c->from;
}

/* Every partition of `s` in the range. */
static int list_sstable(struct collect *c, struct sstable *s)
{
	struct sst_iter *it = sst_iter_new(s);
	if (!it || sst_iter_seek(it, c->full ? INT64_MIN : c->start, c->full)) {
		sst_iter_delete(it);
		return -1;
	}
	const struct sst_entry *e;
	int r;
	while ((r = sst_iter_next(it, &e)) > 0) {
		if (!c->full && e->token > c->end)
			break;
		add(c, e->token, e->key, (struct slice){NULL, 0});
	}
	sst_iter_delete(it);
	return r < 0 ? -1 : 0;
}

static int from_sstable(struct collect *c, struct sstable *s,
			const struct storage_index *ix,
			const struct sai_bound *lo, const struct sai_bound *hi,
			uint64_t *scanned)
{
	if (!c->full &&
	    (s->stats.max_token <= c->start || s->stats.min_token > c->end))
		return 0;
	struct sai_file *sf;
	if (sst_sai_get(s, ix, &sf) == 0) {
		size_t before = c->n, bytes = c->bytes.len;
		uint64_t shrinks = c->shrinks;
		bool more = c->more;
		const struct buf *from = component_from(c);
		int rc = sai_file_lookup(sf, lo, hi, from ? from->data : NULL,
					 from ? (uint32_t)from->len : 0,
					 component_key, c, &c->visited);
		if (rc == SAI_OK)
			return 0;
		/* drop what it gave (unless the kept set was cut meanwhile:
		 * then keep it, candidates may repeat) */
		if (c->shrinks == shrinks) {
			c->n = before;
			c->bytes.len = bytes;
			c->more = more;
		}
		if (rc == SAI_NOMEM)
			return err_set(ERR_NOMEM, "index lookup");
		/* a block failed its checks (or could not be read): the
		 * component is not used again, and is written again */
		sst_sai_damaged(s, sf);
	}
	(*scanned)++;
	return list_sstable(c, s);
}

static int part_cmp(const struct cand *a, const struct cand *b,
		    const uint8_t *bytes)
{
	return storage_partition_cmp(
		a->token, (struct slice){bytes + a->off, a->len}, b->token,
		(struct slice){bytes + b->off, b->len});
}

/* Partitions in token order; within one, the partition itself (no row)
 * first, then its rows bytewise. */
static int cand_cmp(const void *x, const void *y, void *arg)
{
	const struct cand *a = x, *b = y;
	const uint8_t *bytes = arg;
	int r = part_cmp(a, b, bytes);
	if (r)
		return r;
	return slice_cmp((struct slice){bytes + a->ck_off, a->ck_len},
			 (struct slice){bytes + b->ck_off, b->ck_len});
}

/* qsort_r is not C11: a small merge sort with a context. */
static void sort_cands(struct cand *v, size_t n, struct cand *tmp,
		       const uint8_t *bytes)
{
	if (n < 2)
		return;
	size_t h = n / 2;
	sort_cands(v, h, tmp, bytes);
	sort_cands(v + h, n - h, tmp, bytes);
	size_t i = 0, j = h, k = 0;
	while (i < h && j < n)
		tmp[k++] = cand_cmp(&v[j], &v[i], (void *)bytes) < 0 ? v[j++]
								     : v[i++];
	while (i < h)
		tmp[k++] = v[i++];
	while (j < n)
		tmp[k++] = v[j++];
	memcpy(v, tmp, n * sizeof(*v));
}

/* Sorts and dedupes the candidates: a partition listed whole (no row)
 * keeps no rows, one of more than SAI_ROWS_MAX rows is listed whole.
 * Beyond the page's limit of partitions they are cut (capped at the last
 * one kept, `more`). */
static int sort_unique(struct collect *c)
{
	struct cand *tmp = c->n ? malloc(c->n * sizeof(*tmp)) : NULL;
	if (c->n && !tmp)
		return err_set(ERR_NOMEM, "index candidates");
	sort_cands(c->v, c->n, tmp, c->bytes.data);
	free(tmp);
	size_t u = 0, parts = 0, limit = c->pg ? c->pg->limit : 0;
	size_t cut = 0; /* entries of the first `limit` partitions */
	for (size_t i = 0; i < c->n;) {
		size_t j = i + 1;
		while (j < c->n &&
		       part_cmp(&c->v[i], &c->v[j], c->bytes.data) == 0)
			j++;
		size_t first = u;
		for (size_t k = i; k < j; k++)
			if (u == first || cand_cmp(&c->v[u - 1], &c->v[k],
						   c->bytes.data) != 0)
				c->v[u++] = c->v[k];
		if (c->v[first].ck_len == 0 || u - first > SAI_ROWS_MAX) {
			c->v[first].ck_len = 0; /* the partition, whole */
			u = first + 1;
		}
		if (++parts == limit)
			cut = u;
		i = j;
	}
	c->n = u;
	if (!limit || parts <= limit)
		return 0;
	c->n = cut;
	c->more = true;
	const struct cand *last = &c->v[cut - 1];
	c->capped = true;
	c->cap_token = last->token;
	c->cap_key.len = 0;
	if (buf_append(&c->cap_key, c->bytes.data + last->off, last->len))
		return err_set(ERR_NOMEM, "index candidates");
	/* the kept keys' bytes only */
	struct buf b;
	buf_init(&b);
	for (size_t i = 0; i < c->n; i++) {
		size_t off = b.len;
		if (buf_append(&b, c->bytes.data + c->v[i].off, c->v[i].len) ||
		    buf_append(&b, c->bytes.data + c->v[i].ck_off,
			       c->v[i].ck_len)) {
			buf_free(&b);
			return err_set(ERR_NOMEM, "index candidates");
		}
		c->v[i].off = off;
		c->v[i].ck_off = off + c->v[i].len;
	}
	buf_free(&c->bytes);
	c->bytes = b;
	return 0;
}

static void shrink(struct collect *c)
{
	c->shrinks++;
	if (sort_unique(c))
		c->err = 1;
}

/* The candidates as they are (sorted) into *out, with the resume
 * position when `more`. */
static int emit(struct collect *c, struct storage_index_keys *out, bool more,
		int64_t resume_token, struct slice resume_key)
{
	size_t u = c->n;
	out->tokens = u ? malloc(u * sizeof(*out->tokens)) : NULL;
	out->keys = u ? malloc(u * sizeof(*out->keys)) : NULL;
	out->rows = u ? malloc(u * sizeof(*out->rows)) : NULL;
	if (u && (!out->tokens || !out->keys || !out->rows))
		return err_set(ERR_NOMEM, "index candidates");
	out->more = more;
	if (more) {
		out->resume_token = resume_token;
		if (buf_append(&out->resume_bytes, resume_key.ptr,
			       resume_key.len))
			return err_set(ERR_NOMEM, "index candidates");
		out->resume_key = (struct slice){out->resume_bytes.data,
						 out->resume_bytes.len};
	}
	out->bytes = c->bytes;
	buf_init(&c->bytes);
	for (size_t i = 0; i < u; i++) {
		out->tokens[i] = c->v[i].token;
		out->keys[i] = (struct slice){out->bytes.data + c->v[i].off,
					      c->v[i].len};
		out->rows[i] = c->v[i].ck_len
				       ? (struct slice){out->bytes.data +
								c->v[i].ck_off,
							c->v[i].ck_len}
				       : (struct slice){NULL, 0};
	}
	out->count = u;
	return 0;
}

static int finish(struct collect *c, struct storage_index_keys *out)
{
	if (sort_unique(c))
		return -1;
	if (!c->more || !c->n)
		return emit(c, out, false, 0, (struct slice){NULL, 0});
	const struct cand *last = &c->v[c->n - 1];
	return emit(c, out, true, last->token, cand_key(c, last));
}

static void collect_free(struct collect *c)
{
	free(c->v);
	buf_free(&c->bytes);
	buf_free(&c->cap_key);
	buf_free(&c->from);
	buf_free(&c->run_last);
}

/* The earliest resume position of the sets with `more`: the results of
 * a set operation are exact up to it. False when none has more. */
static bool sets_bound(const struct storage_index_keys *sets, size_t n,
		       int64_t *token, struct slice *key)
{
	bool any = false;
	for (size_t i = 0; i < n; i++) {
		if (!sets[i].more)
			continue;
		if (!any || storage_partition_cmp(sets[i].resume_token,
						  sets[i].resume_key, *token,
						  *key) < 0) {
			*token = sets[i].resume_token;
			*key = sets[i].resume_key;
		}
		any = true;
	}
	return any;
}

static int set_done(struct collect *c, struct storage_index_keys *out,
		    const struct storage_index_keys *sets, size_t n, bool more,
		    int64_t bt, struct slice bk)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++)
		out->scanned += sets[i].scanned;
	int rc = c->err ? err_set(ERR_NOMEM, "index candidates")
			: emit(c, out, more, bt, bk);
	collect_free(c);
	if (rc)
		storage_index_keys_free(out);
	return rc;
}

/* The end of the run of entries of set k's partition at i. */
static size_t group_end(const struct storage_index_keys *k, size_t i)
{
	size_t j = i + 1;
	while (j < k->count &&
	       storage_partition_cmp(k->tokens[i], k->keys[i], k->tokens[j],
				     k->keys[j]) == 0)
		j++;
	return j;
}

static struct slice row_of(const struct storage_index_keys *k, size_t i)
{
	return k->rows ? k->rows[i] : (struct slice){NULL, 0};
}

int storage_index_keys_intersect(const struct storage_index_keys *a,
				 const struct storage_index_keys *b,
				 struct storage_index_keys *out)
{
	struct storage_index_keys two[2] = {*a, *b};
	int64_t bt = 0;
	struct slice bk = {NULL, 0};
	bool more = sets_bound(two, 2, &bt, &bk);
	struct collect c = {0};
	size_t i = 0, j = 0;
	while (i < a->count && j < b->count) {
		int r = storage_partition_cmp(a->tokens[i], a->keys[i],
					      b->tokens[j], b->keys[j]);
		if (r < 0) {
			i = group_end(a, i);
			continue;
		}
		if (r > 0) {
			j = group_end(b, j);
			continue;
		}
		if (more &&
		    storage_partition_cmp(a->tokens[i], a->keys[i], bt, bk) > 0)
			break;
		size_t ie = group_end(a, i), je = group_end(b, j);
		bool aw = row_of(a, i).len == 0, bw = row_of(b, j).len == 0;
		if (aw && bw) {
			push(&c, a->tokens[i], a->keys[i], row_of(a, i));
		} else if (aw || bw) {
			/* one lists the partition whole: the other's rows */
			const struct storage_index_keys *o = aw ? b : a;
			for (size_t k = aw ? j : i; k < (aw ? je : ie); k++)
				push(&c, o->tokens[k], o->keys[k],
				     row_of(o, k));
		} else {
			/* the rows both list (each in bytewise order) */
			for (size_t x = i, y = j; x < ie && y < je;) {
				int d = slice_cmp(row_of(a, x), row_of(b, y));
				if (d == 0)
					push(&c, a->tokens[x], a->keys[x],
					     row_of(a, x));
				x += d <= 0;
				y += d >= 0;
			}
		}
		i = ie;
		j = je;
	}
	return set_done(&c, out, two, 2, more, bt, bk);
}

int storage_index_keys_union(const struct storage_index_keys *sets, size_t n,
			     struct storage_index_keys *out)
{
	int64_t bt = 0;
	struct slice bk = {NULL, 0};
	bool more = sets_bound(sets, n, &bt, &bk);
	struct collect c = {0};
	/* every entry up to the bound, then sorted and deduped (a partition
	 * one set lists whole is whole) */
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < sets[i].count; k++) {
			if (more &&
			    storage_partition_cmp(sets[i].tokens[k],
						  sets[i].keys[k], bt, bk) > 0)
				break;
			push(&c, sets[i].tokens[k], sets[i].keys[k],
			     row_of(&sets[i], k));
		}
	if (!c.err && sort_unique(&c))
		c.err = 1;
	return set_done(&c, out, sets, n, more, bt, bk);
}

void storage_index_keys_free(struct storage_index_keys *k)
{
	if (!k)
		return;
	free(k->tokens);
	free(k->keys);
	free(k->rows);
	buf_free(&k->bytes);
	buf_free(&k->resume_bytes);
	memset(k, 0, sizeof(*k));
}

/* The candidates of terms within [lo, hi] of index ix (checked). */
static int candidates(struct storage *db, struct engine_snapshot *snap,
		      const struct storage_index *ix,
		      const struct sai_bound *lo, const struct sai_bound *hi,
		      int64_t start_token, int64_t end_token,
		      const struct storage_index_page *page,
		      struct storage_index_keys *out)
{
	struct collect c = {.start = start_token,
			    .end = end_token,
			    .full = start_token == end_token,
			    .pg = page,
			    .rows = sai_index_rows(snap->meta, ix)};
	int rc = 0;
	for (size_t i = 0; i < snap->mt_count; i++)
		from_memtable(&c, snap->mts[i], ix, lo, hi, &out->scanned);
	uint64_t listed = 0;
	for (size_t i = 0; !rc && i < snap->v->count; i++) {
		struct sstable *s = snap->v->ssts[i];
		if (atomic_load(&s->excluded))
			continue;
		rc = from_sstable(&c, s, ix, lo, hi, &listed);
		if (rc && err_code() == ERR_CORRUPT)
			storage_engine_note_corruption(db, s);
	}
	out->scanned += listed;
	out->visited = c.visited;
	/* an SSTable without a usable component: written again */
	if (listed)
		storage_engine_sai_repair(db, snap->t, ix->name);
	if (!rc && c.err)
		rc = err_set(ERR_NOMEM, "index candidates");
	if (!rc)
		rc = finish(&c, out);
	collect_free(&c);
	return rc;
}

/* The snapshot and the index, checked for a query. */
static const struct storage_index *
query_open(struct storage *db, const uint8_t table_id[16], const char *index,
	   int64_t start_token, int64_t end_token, struct engine_snapshot *snap,
	   struct storage_index_keys *out)
{
	memset(out, 0, sizeof(*out));
	if (start_token > end_token) {
		err_set(ERR_INVALID, "a wrapping token range");
		return NULL;
	}
	if (storage_engine_snapshot_take(db, table_id, snap))
		return NULL;
	const struct storage_index *ix =
		storage_table_meta_index(snap->meta, index);
	bool building = false;
	if (ix) {
		pthread_mutex_lock(&db->mu);
		building = storage_engine_sai_building(snap->t, index);
		pthread_mutex_unlock(&db->mu);
	}
	if (!ix) {
		err_set(ERR_INVALID, "table %s.%s has no index %s",
			snap->meta->keyspace, snap->meta->name, index);
	} else if (building) {
		/* Cassandra's IndexNotAvailableException */
		err_set(ERR_INDEX_NOT_AVAILABLE,
			"The secondary index '%s' is not yet available", index);
		ix = NULL;
	} else if (!sai_index_exact(snap->meta, ix)) {
		err_set(ERR_UNSUPPORTED,
			"index %s: its terms do not decide equality", index);
		ix = NULL;
	}
	if (!ix)
		storage_engine_snapshot_release(snap);
	return ix;
}

static int query_close(struct engine_snapshot *snap, int rc,
		       struct storage_index_keys *out)
{
	if (rc) {
		storage_index_keys_free(out);
	}
	storage_engine_snapshot_release(snap);
	return rc;
}

int storage_index_candidates(struct storage *db, const uint8_t table_id[16],
			     const char *index, const struct slice *vals,
			     size_t n, int64_t start_token, int64_t end_token,
			     const struct storage_index_page *page,
			     struct storage_index_keys *out)
{
	struct engine_snapshot snap;
	const struct storage_index *ix = query_open(
		db, table_id, index, start_token, end_token, &snap, out);
	if (!ix)
		return -1;
	struct buf term;
	buf_init(&term);
	int rc = sai_index_term(snap.meta, ix, vals, n, &term);
	struct sai_bound b = {term.data, (uint32_t)term.len, true};
	if (!rc)
		rc = candidates(db, &snap, ix, &b, &b, start_token, end_token,
				page, out);
	buf_free(&term);
	return query_close(&snap, rc, out);
}

int storage_index_candidates_range(struct storage *db,
				   const uint8_t table_id[16],
				   const char *index,
				   const struct storage_index_bound *lo,
				   const struct storage_index_bound *hi,
				   int64_t start_token, int64_t end_token,
				   const struct storage_index_page *page,
				   struct storage_index_keys *out)
{
	struct engine_snapshot snap;
	const struct storage_index *ix = query_open(
		db, table_id, index, start_token, end_token, &snap, out);
	if (!ix)
		return -1;
	int rc = 0;
	if (ix->target == STORAGE_INDEX_ENTRIES)
		rc = err_set(ERR_INVALID, "index %s: no ranges on entries",
			     index);
	struct buf lt, ht;
	buf_init(&lt);
	buf_init(&ht);
	if (!rc && lo)
		rc = sai_index_term(snap.meta, ix, &lo->value, 1, &lt);
	if (!rc && hi)
		rc = sai_index_term(snap.meta, ix, &hi->value, 1, &ht);
	struct sai_bound lb = {lt.data, (uint32_t)lt.len, lo && lo->incl};
	struct sai_bound hb = {ht.data, (uint32_t)ht.len, hi && hi->incl};
	if (!rc)
		rc = candidates(db, &snap, ix, lo ? &lb : NULL, hi ? &hb : NULL,
				start_token, end_token, page, out);
	buf_free(&lt);
	buf_free(&ht);
	return query_close(&snap, rc, out);
}

struct row_ref {
	struct slice ck;
	const struct storage_table_meta *t;
};

static int row_cmp(const struct row_ref *a, const struct row_ref *b)
{
	return storage_ck_cmp(a->t, a->ck, b->ck);
}

/* qsort has no context: a small merge sort. */
static void sort_rows(struct row_ref *v, size_t n, struct row_ref *tmp)
{
	if (n < 2)
		return;
	size_t h = n / 2;
	sort_rows(v, h, tmp);
	sort_rows(v + h, n - h, tmp);
	size_t i = 0, j = h, k = 0;
	while (i < h && j < n)
		tmp[k++] = row_cmp(&v[j], &v[i]) < 0 ? v[j++] : v[i++];
	while (i < h)
		tmp[k++] = v[i++];
	while (j < n)
		tmp[k++] = v[j++];
	memcpy(v, tmp, n * sizeof(*v));
}

int storage_read_cmd_rows(const struct storage_table_meta *t,
			  const struct storage_read_cmd *cmd,
			  const struct slice *rows, size_t n, struct arena *a,
			  struct storage_read_cmd *out)
{
	size_t nc = t->ck_count;
	struct row_ref *v = malloc((n ? n : 1) * sizeof(*v));
	struct row_ref *tmp = malloc((n ? n : 1) * sizeof(*tmp));
	struct slice *vals =
		arena_alloc(a, (n * nc > 0 ? n * nc : 1) * sizeof(*vals));
	struct storage_slice *sl = arena_alloc(a, (n ? n : 1) * sizeof(*sl));
	/* cmd's own slices, their bounds encoded as prefixes: rows outside
	 * every one are left out (the query's clustering restrictions
	 * intersected with the index's rows) */
	size_t nb = cmd->slices ? cmd->slice_count : 0;
	size_t *off = malloc((2 * nb + 1) * sizeof(*off));
	struct buf bb;
	buf_init(&bb);
	int rc = 0;
	if (!v || !tmp || !vals || !sl || !off)
		rc = err_set(ERR_NOMEM, "index rows");
	for (size_t i = 0; !rc && i < nb; i++) {
		const struct storage_slice *q = &cmd->slices[i];
		off[2 * i] = bb.len;
		if (storage_ck_encode(&bb, CK_ROW, q->start, q->start_count))
			rc = err_set(ERR_NOMEM, "index rows");
		off[2 * i + 1] = bb.len;
		if (!rc && storage_ck_encode(&bb, CK_ROW, q->end, q->end_count))
			rc = err_set(ERR_NOMEM, "index rows");
	}
	if (!rc)
		off[2 * nb] = bb.len;
	size_t m = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		bool in = nb == 0;
		for (size_t b = 0; !in && b < nb; b++) {
			const struct storage_slice *q = &cmd->slices[b];
			struct slice st =
				slice_make(bb.data + off[2 * b],
					   off[2 * b + 1] - off[2 * b]);
			struct slice en =
				slice_make(bb.data + off[2 * b + 1],
					   off[2 * b + 2] - off[2 * b + 1]);
			in = storage_ck_after_start(t, rows[i], st,
						    q->start_incl ||
							    !q->start_count) &&
			     storage_ck_before_end(t, rows[i], en,
						   q->end_incl ||
							   !q->end_count);
		}
		if (in)
			v[m++] = (struct row_ref){rows[i], t};
	}
	free(off);
	buf_free(&bb);
	if (!rc)
		sort_rows(v, m, tmp);
	/* one single-row slice per distinct row, ascending */
	size_t ns = 0;
	for (size_t i = 0; !rc && i < m; i++) {
		if (i > 0 && row_cmp(&v[i - 1], &v[i]) == 0)
			continue;
		int kind;
		int k = storage_ck_decode(v[i].ck, &kind, vals + ns * nc, nc);
		if (k < 0 || kind != CK_ROW) {
			rc = err_set(ERR_CORRUPT, "an index row of %s.%s",
				     t->keyspace, t->name);
			break;
		}
		sl[ns] = (struct storage_slice){.start = vals + ns * nc,
						.start_count = (size_t)k,
						.start_incl = true,
						.end = vals + ns * nc,
						.end_count = (size_t)k,
						.end_incl = true};
		ns++;
	}
	if (!rc) {
		*out = *cmd;
		out->slices = sl;
		out->slice_count = ns;
	}
	free(v);
	free(tmp);
	return rc;
}

int storage_read_fragment_rows(struct storage *db, const uint8_t table_id[16],
			       const struct storage_read_cmd *cmd,
			       const struct slice *rows, size_t n,
			       struct storage_mutation **out)
{
	*out = NULL;
	const struct storage_table_meta *t =
		storage_table_meta_acquire(db, table_id);
	if (!t)
		return err_set(ERR_NOT_FOUND, "no such table");
	struct arena a;
	arena_create(&a, 0);
	struct storage_read_cmd c;
	int rc = storage_read_cmd_rows(t, cmd, rows, n, &a, &c);
	if (!rc)
		rc = storage_read_fragment(db, table_id, &c, out);
	arena_destroy(&a);
	storage_table_meta_unref(t);
	return rc;
}
