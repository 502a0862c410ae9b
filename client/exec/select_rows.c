/*
 * What a SELECT sends back (see select.h): rows in the protocol's RESULT
 * form, aggregates over them, and the paging state that resumes them.
 */
#include "client/exec/select_internal.h"

#include "client/cql/cql_floor.h"
#include "client/cql/cql_values.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- paging -------------------------------------------------------------- */

static int clustering_cmp(const struct cql_select_plan *p,
			  const struct slice *a, size_t na,
			  const struct slice *b, size_t nb)
{
	for (size_t i = 0; i < na && i < nb; i++) {
		const struct storage_column *c = &p->m->columns[p->m->ck[i]];
		int r = storage_type_cmp(c->type, a[i].ptr, a[i].len, b[i].ptr,
					 b[i].len);
		if (r)
			return c->desc ? -r : r;
	}
	return na < nb ? -1 : na > nb;
}

static bool is_position_partition(const struct cql_select_plan *p,
				  const struct storage_result *r, size_t k)
{
	if (!p->pos.set)
		return false;
	if (!p->scan) /* key lists resume at the position's key */
		return k == 0 && slice_eq(r->key, p->pos.key);
	return r->token == p->pos.token && slice_eq(r->key, p->pos.key);
}

/* Whether `row` of the position's partition was looked at already. */
static bool before_position(const struct cql_select_plan *p,
			    const struct storage_row_view *row)
{
	if (p->pos.whole)
		return true;
	int c = clustering_cmp(p, row->clustering, row->clustering_count,
			       p->pos.ck, p->pos.ck_count);
	return (p->cmd.reverse ? -c : c) <= 0;
}

static bool passes_filters(const struct cql_select_plan *p,
			   const struct storage_result *r,
			   const struct storage_row_view *row,
			   const struct storage_row_view *stat);
static bool column_value(const struct cql_select_plan *p,
			 const struct storage_result *r,
			 const struct storage_row_view *row,
			 const struct storage_row_view *stat, int column,
			 struct slice *v);

size_t cql_select_plan_rows_new(const struct cql_select_plan *p,
				const struct storage_result *r, size_t k)
{
	/* As the encoder sees them: a partition with only a live static row
	 * is one row unless the clustering was restricted, DISTINCT takes a
	 * partition's first row, and rows that fail the filters are not
	 * counted (a page is of rows sent; counting the others cut pages
	 * short, even empty, and drivers stop at an empty page). */
	if (p->grouped)
		return cql_select_group_rows_new(p, r, k);
	const struct storage_row_view *stat = r->static_row;
	bool static_live = stat && stat->cell_count > 0;
	bool at_pos = is_position_partition(p, r, k);
	if (at_pos && p->pos.whole)
		return 0;
	if (!r->row_count || p->distinct) {
		const struct storage_row_view *first =
			r->row_count ? &r->rows[0] : NULL;
		bool shown =
			first || (static_live && !p->clustering_restricted);
		return shown && passes_filters(p, r, first, stat);
	}
	if (!at_pos && !p->nfilters)
		return r->row_count;
	size_t fresh = 0;
	for (size_t i = 0; i < r->row_count; i++)
		fresh += !(at_pos && before_position(p, &r->rows[i])) &&
			 passes_filters(p, r, &r->rows[i], stat);
	/* PER PARTITION LIMIT: the rows the encoder sends of it */
	return cql_select_ppl_clamp(p, at_pos, fresh);
}

static int page_decode(struct cql_select_plan *p, const struct slice *state);

int cql_select_plan_page(struct cql_select_plan *p, int32_t page_size,
			 const struct slice *state)
{
	/* Cassandra pages aggregates internally, paged or not (GROUP BY
	 * too). */
	if (p->post_order && (page_size > 0 || p->aggregate || p->grouped))
		return err_set(ERR_INVALID,
			       "Cannot page queries with both ORDER BY and a "
			       "IN restriction on the partition key; you must "
			       "either remove the ORDER BY or the IN and sort "
			       "client side, or disable paging for this query");
	if (p->aggregate && !p->grouped)
		return 0; /* one row, whatever the page size */
	if (page_size > 0) {
		p->paged = true;
		p->page = (size_t)page_size;
	}
	if (state && p->paged && page_decode(p, state) != 0)
		return -1;
	/* A single-partition read must reach one row past the page. */
	if (p->paged && p->cmd.limit && !p->distinct && !p->grouped) {
		uint64_t need = p->pos.in_partition + p->page + 1;
		if (need < p->cmd.limit)
			p->cmd.limit = (uint32_t)need;
	}
	return 0;
}

static int page_decode(struct cql_select_plan *p, const struct slice *state)
{
	struct cursor c = cursor_make(state->ptr, state->len);
	struct page_pos *pos = &p->pos;
	uint8_t magic, flags, nck;
	uint16_t klen;
	uint64_t token;
	if (cursor_u8(&c, &magic) || magic != PAGE_STATE_MAGIC ||
	    cursor_u8(&c, &flags) || cursor_be32(&c, &pos->key_index) ||
	    cursor_be64(&c, &token) || cursor_be64(&c, &pos->emitted) ||
	    cursor_be64(&c, &pos->in_partition) || cursor_be16(&c, &klen) ||
	    cursor_take(&c, klen, &pos->key) || cursor_u8(&c, &nck) ||
	    nck > p->m->ck_count)
		goto bad;
	for (size_t i = 0; i < nck; i++) {
		uint32_t len;
		if (cursor_be32(&c, &len) || cursor_take(&c, len, &pos->ck[i]))
			goto bad;
	}
	if (cursor_left(&c) || pos->emitted >= p->user_limit ||
	    (!p->scan &&
	     (pos->key_index >= p->key_count ||
	      !slice_eq(cql_select_plan_key(p, pos->key_index), pos->key))))
		goto bad;
	pos->token = (int64_t)token;
	pos->whole = flags & PAGE_WHOLE;
	pos->ck_count = nck;
	pos->set = true;
	/* The plan's arena outlives the state's frame: keep copies. */
	for (size_t i = 0; i <= nck; i++) {
		struct slice *v = i < nck ? &pos->ck[i] : &pos->key;
		if (v->len && !(v->ptr = arena_memdup(p->a, v->ptr, v->len))) {
			memset(pos, 0, sizeof(*pos));
			return err_set(ERR_NOMEM, "out of memory");
		}
	}
	return 0;
bad:
	memset(pos, 0, sizeof(*pos));
	/* Cassandra answers a Protocol error, which makes drivers drop the
	 * connection; Invalid keeps it. */
	return err_set(ERR_INVALID, "Invalid value for the paging state");
}

static int encode_position(const struct cql_select_plan *p,
			   const struct storage_result *r, size_t k,
			   const struct storage_row_view *row, bool whole,
			   uint64_t emitted, uint64_t in_partition,
			   struct buf *out)
{
	size_t nck = whole || !row ? 0 : row->clustering_count;
	/* Results skip partitions that added no row (the data path drops
	 * them), so the k-th result is not the k-th key: find its key. */
	size_t key_index = cql_select_plan_first_key(p) + k;
	for (size_t i = cql_select_plan_first_key(p);
	     !p->scan && i < p->key_count; i++)
		if (slice_eq(cql_select_plan_key(p, i), r->key)) {
			key_index = i;
			break;
		}
	int rc = buf_put_u8(out, PAGE_STATE_MAGIC) ||
		 buf_put_u8(out, whole || !row ? PAGE_WHOLE : 0) ||
		 buf_put_be32(out, (uint32_t)key_index) ||
		 buf_put_be64(out, (uint64_t)r->token) ||
		 buf_put_be64(out, emitted) ||
		 buf_put_be64(out, in_partition) ||
		 buf_put_be16(out, (uint16_t)r->key.len) ||
		 buf_append(out, r->key.ptr, r->key.len) ||
		 buf_put_u8(out, (uint8_t)nck);
	for (size_t i = 0; rc == 0 && i < nck; i++)
		rc = buf_put_be32(out, (uint32_t)row->clustering[i].len) ||
		     buf_append(out, row->clustering[i].ptr,
				row->clustering[i].len);
	return rc ? -1 : 0;
}

/* ---- encoding ------------------------------------------------------------ */

static const struct storage_cell_view *
find_cell(const struct storage_row_view *row, int column)
{
	for (size_t i = 0; row && i < row->cell_count; i++)
		if (row->cells[i].column == column)
			return &row->cells[i];
	return NULL;
}

/* A non-frozen user type's value rebuilt from its field cells (path: the
 * field's index, a big-endian smallint), as a frozen one is sent: every
 * field of the type, -1 for those without a cell; null with none. */
static int write_udt(struct buf *out, const struct storage_row_view *row,
		     int column, const struct storage_type *t)
{
	size_t mark = out->len, have = 0;
	if (buf_put_be32(out, 0) != 0)
		return -1;
	for (size_t f = 0; f < t->count; f++) {
		const struct storage_cell_view *hit = NULL;
		for (size_t i = 0; row && !hit && i < row->cell_count; i++) {
			const struct storage_cell_view *c = &row->cells[i];
			if (c->column == column && c->path.len == 2 &&
			    be16_load(c->path.ptr) == f)
				hit = c;
		}
		have += hit != NULL;
		if (hit ? buf_put_be32(out, (uint32_t)hit->value.len) ||
				    buf_append(out, hit->value.ptr,
					       hit->value.len)
			: buf_put_be32(out, UINT32_MAX))
			return -1;
	}
	if (have == 0) {
		out->len = mark;
		return cql_write_bytes(out, NULL, -1);
	}
	be32_store(out->data + mark, (uint32_t)(out->len - mark - 4));
	return 0;
}

/* A collection column's value rebuilt from its cells. */
static int write_collection(struct buf *out, const struct storage_row_view *row,
			    int column, uint16_t kind)
{
	size_t n = 0, mark = out->len;
	for (size_t i = 0; row && i < row->cell_count; i++)
		n += row->cells[i].column == column;
	if (n == 0)
		return cql_write_bytes(out, NULL, -1);
	if (buf_put_be32(out, 0) != 0 || buf_put_be32(out, (uint32_t)n) != 0)
		return -1;
	for (size_t i = 0; i < row->cell_count; i++) {
		const struct storage_cell_view *c = &row->cells[i];
		if (c->column != column)
			continue;
		struct slice first =
			kind == STORAGE_TYPE_LIST ? c->value : c->path;
		if (buf_put_be32(out, (uint32_t)first.len) ||
		    buf_append(out, first.ptr, first.len))
			return -1;
		if (kind == STORAGE_TYPE_MAP &&
		    (buf_put_be32(out, (uint32_t)c->value.len) ||
		     buf_append(out, c->value.ptr, c->value.len)))
			return -1;
	}
	be32_store(out->data + mark, (uint32_t)(out->len - mark - 4));
	return 0;
}

static int filter_cmp(const struct cql_select_plan *p, const struct filter *f,
		      struct slice v, struct slice want)
{
	(void)p;
	return storage_type_cmp(f->type, v.ptr, v.len, want.ptr, want.len);
}

/* v analysed against f's analysed values: 1 matches, 0 not, -1 no memory
 * (taken as no match). */
static bool filter_analysed(const struct filter *f, struct slice v)
{
	struct buf b = {0};
	bool hit = false;
	if (storage_sai_analyze(f->analyzer, v.ptr, v.len, &b) == 0) {
		struct slice a = slice_make(
			b.data ? b.data : (const uint8_t *)"", b.len);
		if (f->op == CQL_OP_IN) {
			for (size_t i = 0; i < f->n_in && !hit; i++)
				hit = slice_eq(a, f->ain[i]);
		} else {
			hit = slice_eq(a, f->avalue);
		}
	}
	buf_free(&b);
	return hit;
}

static bool filter_passes(const struct cql_select_plan *p,
			  const struct filter *f, struct slice v)
{
	if (f->analyzer) /* = and IN only (no ranges on text indexes) */
		return filter_analysed(f, v);
	if (f->op == CQL_OP_IN) {
		for (size_t i = 0; i < f->n_in; i++)
			if (filter_cmp(p, f, v, f->in[i]) == 0)
				return true;
		return false;
	}
	int c = filter_cmp(p, f, v, f->value);
	switch (f->op) {
	case CQL_OP_LT:
		return c < 0;
	case CQL_OP_LTE:
		return c <= 0;
	case CQL_OP_GT:
		return c > 0;
	case CQL_OP_GTE:
		return c >= 0;
	default:
		return c == 0;
	}
}

/* CONTAINS / CONTAINS KEY on a frozen collection's one value ([int n]
 * then [int length][bytes] elements, two per map entry): a list's or
 * set's elements, a map's values (CONTAINS) or keys (CONTAINS KEY). A
 * null, empty or malformed value holds nothing. */
static bool frozen_contains(const struct filter *f, uint16_t kind,
			    struct slice v)
{
	if (v.len < 4)
		return false;
	uint32_t n = be32_load(v.ptr);
	size_t pos = 4;
	size_t per = kind == STORAGE_TYPE_MAP ? 2 : 1;
	/* the map element compared: its key (0) or its value (1) */
	size_t want = kind == STORAGE_TYPE_MAP && f->op == CQL_OP_CONTAINS;
	for (uint32_t i = 0; i < n; i++) {
		for (size_t k = 0; k < per; k++) {
			if (v.len - pos < 4)
				return false;
			uint32_t len = be32_load(v.ptr + pos);
			pos += 4;
			if (len & 0x80000000u) /* a null element */
				continue;
			if (len > v.len - pos)
				return false;
			if (k == want &&
			    storage_type_cmp(f->type, v.ptr + pos, len,
					     f->value.ptr, f->value.len) == 0)
				return true;
			pos += len;
		}
	}
	return false;
}

/* CONTAINS / CONTAINS KEY on a collection's cells: set elements and map
 * keys are the cells' paths, list elements and map values their values;
 * a frozen collection (a cell or a key column) is one value. */
static bool contains(const struct cql_select_plan *p, const struct filter *f,
		     const struct storage_result *r,
		     const struct storage_row_view *row,
		     const struct storage_row_view *stat)
{
	const struct storage_column *col = &p->m->columns[f->column];
	if (col->type->frozen) {
		struct slice v;
		return column_value(p, r, row, stat, f->column, &v) &&
		       frozen_contains(f, col->type->kind, v);
	}
	const struct storage_row_view *src =
		col->kind == STORAGE_COLUMN_STATIC ? stat : row;
	bool by_path = f->op == CQL_OP_CONTAINS_KEY ||
		       col->type->kind == STORAGE_TYPE_SET;
	for (size_t i = 0; src && i < src->cell_count; i++) {
		const struct storage_cell_view *c = &src->cells[i];
		if (c->column != f->column)
			continue;
		struct slice x = by_path ? c->path : c->value;
		if (storage_type_cmp(f->type, x.ptr, x.len, f->value.ptr,
				     f->value.len) == 0)
			return true;
	}
	return false;
}

/* m[k] = v: the map's cell of path k holds v. */
static bool entry_matches(const struct cql_select_plan *p,
			  const struct filter *f,
			  const struct storage_row_view *row,
			  const struct storage_row_view *stat)
{
	const struct storage_column *col = &p->m->columns[f->column];
	const struct storage_row_view *src =
		col->kind == STORAGE_COLUMN_STATIC ? stat : row;
	const struct storage_type *kt = col->type->sub[0];
	for (size_t i = 0; src && i < src->cell_count; i++) {
		const struct storage_cell_view *c = &src->cells[i];
		if (c->column != f->column ||
		    storage_type_cmp(kt, c->path.ptr, c->path.len, f->key.ptr,
				     f->key.len) != 0)
			continue;
		return storage_type_cmp(f->type, c->value.ptr, c->value.len,
					f->value.ptr, f->value.len) == 0;
	}
	return false;
}

static bool passes_filters(const struct cql_select_plan *p,
			   const struct storage_result *r,
			   const struct storage_row_view *row,
			   const struct storage_row_view *stat)
{
	for (size_t i = 0; i < p->nfilters; i++) {
		const struct filter *f = &p->filters[i];
		struct slice v;
		if (f->entry) {
			if (!entry_matches(p, f, row, stat))
				return false;
			continue;
		}
		if (f->op == CQL_OP_CONTAINS || f->op == CQL_OP_CONTAINS_KEY) {
			if (!contains(p, f, r, row, stat))
				return false;
			continue;
		}
		if (!column_value(p, r, row, stat, f->column, &v) ||
		    !filter_passes(p, f, v))
			return false;
	}
	return true;
}

/* The value of a column that is not a collection in a row: a partition
 * key part, a clustering value or a cell. false when it has none. */
/* Field `idx` of a frozen user type value ([int length][bytes] per field,
 * -1 for null, trailing fields missing): false when null or missing. */
static bool udt_field(struct slice v, size_t idx, struct slice *out)
{
	size_t pos = 0;
	for (size_t i = 0; i <= idx; i++) {
		if (v.len - pos < 4 || pos > v.len)
			return false;
		uint32_t n = be32_load(v.ptr + pos);
		pos += 4;
		if (n & 0x80000000u) {
			if (i == idx)
				return false;
			continue;
		}
		if (n > v.len - pos)
			return false;
		if (i == idx) {
			out->ptr = v.ptr + pos;
			out->len = n;
			return true;
		}
		pos += n;
	}
	return false;
}

static bool column_value(const struct cql_select_plan *p,
			 const struct storage_result *r,
			 const struct storage_row_view *row,
			 const struct storage_row_view *stat, int column,
			 struct slice *v)
{
	const struct storage_column *col = &p->m->columns[column];
	if (col->kind == STORAGE_COLUMN_PARTITION_KEY) {
		*v = storage_pk_component(p->m, r->key, col->position);
		return true;
	}
	if (col->kind == STORAGE_COLUMN_CLUSTERING) {
		if (!row || col->position >= row->clustering_count)
			return false;
		*v = row->clustering[col->position];
		return true;
	}
	const struct storage_cell_view *c = find_cell(
		col->kind == STORAGE_COLUMN_STATIC ? stat : row, column);
	if (c)
		*v = c->value;
	return c != NULL;
}

static int64_t int_value(struct slice v)
{
	uint64_t x = 0;
	for (size_t i = 0; i < v.len; i++)
		x = x << 8 | v.ptr[i];
	unsigned shift = (unsigned)(64 - 8 * v.len);
	return v.len == 8 ? (int64_t)x : (int64_t)(x << shift) >> shift;
}

static double float_value(struct slice v)
{
	if (v.len == 4) {
		uint32_t u = be32_load(v.ptr);
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	uint64_t u = be64_load(v.ptr);
	double d;
	memcpy(&d, &u, 8);
	return d;
}

static void agg_add(const struct cql_select_plan *p, const struct out_col *o,
		    struct agg_acc *a, struct slice v)
{
	const struct storage_type *type = p->m->columns[o->column].type;
	uint16_t kind = type->kind;
	size_t w = select_int_width(kind);
	bool numeric_ok = w ? v.len == w
			    : v.len == (kind == STORAGE_TYPE_FLOAT ? 4u : 8u);
	if ((o->agg == AGG_SUM || o->agg == AGG_AVG) && !numeric_ok)
		return; /* an empty value (blob-cast) has no number */
	a->n++;
	switch (o->agg) {
	case AGG_COUNT:
		return;
	case AGG_MIN:
	case AGG_MAX: {
		int c = a->n == 1 ? 0
				  : storage_type_cmp(type, v.ptr, v.len,
						     a->best.ptr, a->best.len);
		if (a->n == 1 || (o->agg == AGG_MIN ? c < 0 : c > 0))
			a->best = v;
		return;
	}
	case AGG_SUM:
	case AGG_AVG:
		if (w) {
			int64_t x = int_value(v);
			a->isum += (uint64_t)x;
			a->wide += x;
		} else {
			a->dsum += float_value(v);
		}
		return;
	}
}

static int agg_write(const struct cql_select_plan *p, const struct out_col *o,
		     const struct agg_acc *a, struct buf *out)
{
	uint16_t kind = p->m->columns[o->column].type->kind;
	size_t w = select_int_width(kind);
	uint8_t b[8];
	if (o->agg == AGG_COUNT) {
		be64_store(b, a->n);
		return cql_write_bytes(out, b, 8);
	}
	if (o->agg == AGG_MIN || o->agg == AGG_MAX)
		return a->n ? cql_write_bytes(out, a->best.ptr,
					      (int32_t)a->best.len)
			    : cql_write_bytes(out, NULL, -1);
	/* sum and avg of no rows are 0; an integer avg truncates toward
	 * zero, in the column's type (Java's integer division) */
	if (w) {
		int64_t v = o->agg == AGG_SUM ? (int64_t)a->isum
			    : a->n ? (int64_t)(a->wide / (__int128)a->n)
				   : 0;
		be64_store(b, (uint64_t)v);
		return cql_write_bytes(out, b + 8 - w, (int32_t)w);
	}
	double d = o->agg == AGG_SUM ? a->dsum
		   : a->n            ? a->dsum / (double)a->n
				     : 0;
	if (kind == STORAGE_TYPE_FLOAT) {
		float f = (float)d;
		uint32_t u;
		memcpy(&u, &f, 4);
		be32_store(b, u);
		return cql_write_bytes(out, b, 4);
	}
	uint64_t u;
	memcpy(&u, &d, 8);
	be64_store(b, u);
	return cql_write_bytes(out, b, 8);
}

/* A function selection's value for one row: 0 with *v (in `scratch` or
 * the row), 1 for null, -1 on error. */
static int eval_expr(const struct cql_select_plan *p, const struct sel_expr *e,
		     const struct storage_result *r,
		     const struct storage_row_view *row,
		     const struct storage_row_view *stat, struct buf *scratch,
		     struct slice *v)
{
	if (e->is_const) {
		*v = e->value;
		return e->null ? 1 : 0;
	}
	if (e->column >= 0)
		return column_value(p, r, row, stat, e->column, v) ? 0 : 1;
	struct buf tmp;
	struct slice a = {NULL, 0};
	int rc = 0;
	buf_init(&tmp);
	if (e->arg)
		rc = eval_expr(p, e->arg, r, row, stat, &tmp, &a);
	if (rc == 0 && e->floor) {
		int64_t f;
		uint8_t b[8];
		size_t n = e->floor->kind == CQL_FLOOR_DATE ? 4 : 8;
		rc = cql_select_floor_value(e->floor, a, &f);
		if (n == 4)
			be32_store(b, (uint32_t)(f + (1LL << 31)));
		else
			be64_store(b, (uint64_t)f);
		size_t mark = scratch->len;
		if (rc == 0 && (rc = buf_append(scratch, b, n)) == 0) {
			v->ptr = scratch->data + mark;
			v->len = n;
		}
	} else if (rc >= 0 && !e->floor) {
		size_t mark = scratch->len;
		rc = cql_fn_apply(&e->fn, rc == 1 ? NULL : a.ptr,
				  rc == 1 ? -1 : (int32_t)a.len, NULL, scratch);
		if (rc == 0) {
			v->ptr = scratch->data ? scratch->data + mark
					       : (const uint8_t *)"";
			v->len = scratch->len - mark;
		}
	}
	buf_free(&tmp);
	return rc;
}

/* One output column of a row. */
static int write_out(const struct cql_select_plan *p, struct buf *out,
		     const struct out_col *o, const struct storage_result *r,
		     const struct storage_row_view *row,
		     const struct storage_row_view *stat, int64_t now_sec)
{
	uint8_t b[8];
	if (o->kind == OUT_TOKEN) {
		be64_store(b, (uint64_t)r->token);
		return cql_write_bytes(out, b, 8);
	}
	if (o->kind == OUT_FN) {
		struct buf tmp;
		struct slice v;
		buf_init(&tmp);
		int rc = eval_expr(p, o->expr, r, row, stat, &tmp, &v);
		if (rc >= 0)
			rc = cql_write_bytes(out, rc ? NULL : v.ptr,
					     rc ? -1 : (int32_t)v.len);
		buf_free(&tmp);
		return rc;
	}
	const struct storage_column *col = &p->m->columns[o->column];
	if (o->kind == OUT_FIELD) {
		struct slice v;
		const struct storage_cell_view *fc = NULL;
		bool have;
		size_t d0 = 0;
		const struct storage_row_view *fr =
			col->kind == STORAGE_COLUMN_STATIC ? stat : row;
		if (col->type->kind == STORAGE_TYPE_UDT && !col->type->frozen) {
			/* the first field is its own cell */
			have = false;
			for (size_t i = 0; fr && !have && i < fr->cell_count;
			     i++) {
				fc = &fr->cells[i];
				have = fc->column == o->column &&
				       fc->path.len == 2 &&
				       be16_load(fc->path.ptr) == o->fields[0];
			}
			if (have)
				v = fc->value;
			d0 = 1;
		} else if (col->kind == STORAGE_COLUMN_PARTITION_KEY ||
			   col->kind == STORAGE_COLUMN_CLUSTERING)
			have = column_value(p, r, row, stat, o->column, &v);
		else if ((have = (fc = find_cell(
					  col->kind == STORAGE_COLUMN_STATIC
						  ? stat
						  : row,
					  o->column)) != NULL))
			v = fc->value;
		for (size_t d = d0; have && d < o->field_depth; d++)
			have = udt_field(v, o->fields[d], &v);
		return have ? cql_write_bytes(out, v.ptr, (int32_t)v.len)
			    : cql_write_bytes(out, NULL, -1);
	}
	if (col->kind == STORAGE_COLUMN_PARTITION_KEY ||
	    col->kind == STORAGE_COLUMN_CLUSTERING) {
		struct slice v;
		return column_value(p, r, row, stat, o->column, &v)
			       ? cql_write_bytes(out, v.ptr, (int32_t)v.len)
			       : cql_write_bytes(out, NULL, -1);
	}
	const struct storage_row_view *src =
		col->kind == STORAGE_COLUMN_STATIC ? stat : row;
	if (o->kind == OUT_ELEMENT) {
		for (size_t i = 0; src && i < src->cell_count; i++) {
			const struct storage_cell_view *c = &src->cells[i];
			if (c->column == o->column &&
			    slice_eq(c->path, o->element)) {
				struct slice v =
					col->type->kind == STORAGE_TYPE_MAP
						? c->value
						: c->path;
				return cql_write_bytes(out, v.ptr,
						       (int32_t)v.len);
			}
		}
		return cql_write_bytes(out, NULL, -1);
	}
	if (o->kind == OUT_WRITETIMES || o->kind == OUT_TTLS ||
	    o->kind == OUT_MAXWRITETIME)
		return cql_select_write_cell_times(p, out, o, src, now_sec);
	if (o->kind == OUT_COLUMN && col->type->kind == STORAGE_TYPE_UDT &&
	    !col->type->frozen)
		return write_udt(out, src, o->column, col->type);
	if (o->kind == OUT_COLUMN &&
	    storage_type_is_collection(col->type->kind) && !col->type->frozen)
		return write_collection(out, src, o->column, col->type->kind);
	if ((o->kind == OUT_WRITETIME || o->kind == OUT_TTL) &&
	    o->field_depth > 0) {
		/* writetime(u.f) of a non-frozen user type: the field's cell */
		const struct storage_cell_view *fc = NULL;
		for (size_t i = 0; src && !fc && i < src->cell_count; i++)
			if (src->cells[i].column == o->column &&
			    src->cells[i].path.len == 2 &&
			    be16_load(src->cells[i].path.ptr) == o->fields[0])
				fc = &src->cells[i];
		return cql_select_write_cell_time(out, o->kind == OUT_WRITETIME,
						  fc, now_sec);
	}
	const struct storage_cell_view *c = find_cell(src, o->column);
	if (!c)
		return cql_write_bytes(out, NULL, -1);
	if (o->kind == OUT_WRITETIME) {
		be64_store(b, (uint64_t)c->ts);
		return cql_write_bytes(out, b, 8);
	}
	if (o->kind == OUT_TTL) {
		if (c->ttl <= 0)
			return cql_write_bytes(out, NULL, -1);
		int64_t left = c->expiry - now_sec;
		be32_store(b, (uint32_t)(left > 0 ? left : 0));
		return cql_write_bytes(out, b, 4);
	}
	return cql_write_bytes(out, c->value.ptr, (int32_t)c->value.len);
}

static int write_row(const struct cql_select_plan *p, struct buf *out,
		     const struct storage_result *r,
		     const struct storage_row_view *row,
		     const struct storage_row_view *stat, int64_t now_sec)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < p->nouts; i++)
		rc = write_out(p, out, &p->outs[i], r, row, stat, now_sec);
	return rc;
}

/* Rows held for post-query ordering (IN on the partition key with ORDER
 * BY): Cassandra sorts the rows of all partitions by the ORDER BY columns
 * (stable: ties keep the read order) before it applies the LIMIT. */
struct held_row {
	const struct storage_result *r;
	const struct storage_row_view *row, *stat;
	size_t seq;
};

struct held {
	struct held_row *v;
	size_t n, cap;
};

static int hold_row(struct held *h, const struct storage_result *r,
		    const struct storage_row_view *row,
		    const struct storage_row_view *stat)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 64;
		struct held_row *v = realloc(h->v, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "out of memory");
		h->v = v;
		h->cap = cap;
	}
	h->v[h->n] = (struct held_row){r, row, stat, h->n};
	h->n++;
	return 0;
}

static int held_cmp(const void *a, const void *b, void *arg)
{
	const struct cql_select_plan *p = arg;
	const struct held_row *x = a, *y = b;
	int c = 0;
	if (!x->row || !y->row) /* a partition's static row only */
		c = (x->row != NULL) - (y->row != NULL);
	else
		c = clustering_cmp(p, x->row->clustering,
				   x->row->clustering_count < p->order_count
					   ? x->row->clustering_count
					   : p->order_count,
				   y->row->clustering,
				   y->row->clustering_count < p->order_count
					   ? y->row->clustering_count
					   : p->order_count);
	if (p->cmd.reverse)
		c = -c;
	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static void sort_held(const struct cql_select_plan *p, struct held *h)
{
	if (h->n > 1)
		qsort_r(h->v, h->n, sizeof(*h->v), held_cmp, (void *)p);
}

int cql_select_encode(const struct cql_select_plan *p,
		      struct storage_result *const *results, size_t n,
		      bool read_cut, int64_t now_sec, uint8_t version,
		      int16_t stream, struct buf *out)
{
	if (p->grouped)
		return cql_select_group_encode(p, results, n, read_cut, now_sec,
					       version, stream, out);
	size_t nspecs;
	struct cql_column_spec *specs = cql_select_specs(p, &nspecs);
	if (!specs)
		return err_set(ERR_NOMEM, "out of memory encoding rows");
	struct agg_acc *accs =
		p->aggregate
			? arena_alloc_aligned(p->a, p->nouts * sizeof(*accs),
					      alignof(struct agg_acc))
			: NULL;
	if (p->aggregate && !accs)
		return err_set(ERR_NOMEM, "out of memory encoding rows");
	if (accs)
		memset(accs, 0, p->nouts * sizeof(*accs));
	struct buf rowsb, state;
	buf_init(&rowsb);
	buf_init(&state);
	uint64_t emitted = p->pos.emitted, counted = 0;
	/* Post-query ordering holds every row (no LIMIT) until the end. */
	size_t limit = p->post_order ? SIZE_MAX : p->user_limit;
	struct held held = {NULL, 0, 0};
	struct first_row {
		const struct storage_result *r;
		const struct storage_row_view *row, *stat;
	} first = {0};
	size_t page_rows = 0;
	bool more = false, stop = false;
	/* The last row looked at, sent or not: where the next page starts. */
	struct {
		const struct storage_result *r;
		size_t k;
		const struct storage_row_view *row;
		bool whole;
		uint64_t in_partition;
	} last = {0};
	int rc = 0;
	for (size_t k = 0; rc == 0 && !stop && k < n; k++) {
		const struct storage_result *r = results[k];
		const struct storage_row_view *stat = r->static_row;
		bool static_live = stat && stat->cell_count > 0;
		bool at_pos = is_position_partition(p, r, k);
		if (at_pos && p->pos.whole)
			continue;
		uint64_t in_partition = at_pos ? p->pos.in_partition : 0;
		size_t nrows = r->row_count;
		/* A partition with only static data still shows as one row,
		 * unless the clustering was restricted. */
		bool static_only =
			nrows == 0 && static_live && !p->clustering_restricted;
		if (p->distinct && (nrows || static_live))
			nrows = 1;
		bool whole = static_only || p->distinct;
		for (size_t i = 0;
		     rc == 0 && (i < nrows || (static_only && i == 0)); i++) {
			const struct storage_row_view *row =
				whole ? (r->row_count ? &r->rows[0] : NULL)
				      : &r->rows[i];
			if (at_pos && !whole && before_position(p, row))
				continue;
			if (emitted >= limit) {
				stop = true;
				break;
			}
			if (page_rows == p->page) {
				stop = more = true;
				break;
			}
			last.r = r;
			last.k = k;
			last.row = whole ? NULL : row;
			last.whole = whole;
			last.in_partition = in_partition;
			if (!passes_filters(p, r, row, stat))
				continue;
			if (p->per_partition_limit &&
			    in_partition >= p->per_partition_limit) {
				last.whole = true; /* the rest is not wanted */
				break;
			}
			last.in_partition = ++in_partition;
			if (p->aggregate) {
				/* other selections take the first row's
				 * values, as in Cassandra */
				if (!counted++)
					first = (struct first_row){
						r, static_only ? NULL : row,
						stat};
				for (size_t o = 0; o < p->nouts; o++) {
					struct slice v;
					if (p->outs[o].kind == OUT_AGG &&
					    column_value(p, r,
							 static_only ? NULL
								     : row,
							 stat,
							 p->outs[o].column, &v))
						agg_add(p, &p->outs[o],
							&accs[o], v);
				}
				continue;
			}
			if (p->post_order)
				rc = hold_row(&held, r,
					      static_only ? NULL : row, stat);
			else
				rc = write_row(p, &rowsb, r,
					       static_only ? NULL : row, stat,
					       now_sec);
			page_rows++;
			emitted++;
		}
	}
	if (rc == 0 && !stop)
		more = read_cut && emitted < limit;
	if (rc == 0 && p->post_order) {
		/* Every selected row is held: sort, then the LIMIT. */
		sort_held(p, &held);
		page_rows = held.n < p->user_limit ? held.n : p->user_limit;
		for (size_t i = 0; rc == 0 && i < page_rows; i++)
			rc = write_row(p, &rowsb, held.v[i].r, held.v[i].row,
				       held.v[i].stat, now_sec);
	}
	free(held.v);
	if (rc == 0 && p->aggregate) {
		for (size_t o = 0; rc == 0 && o < p->nouts; o++) {
			const struct out_col *oc = &p->outs[o];
			uint8_t b[8];
			be64_store(b, counted);
			rc = oc->kind == OUT_AGG
				     ? agg_write(p, oc, &accs[o], &rowsb)
			     : oc->kind == OUT_COUNT
				     ? cql_write_bytes(&rowsb, b, 8)
			     : first.r
				     ? write_out(p, &rowsb, oc, first.r,
						 first.row, first.stat, now_sec)
				     : cql_write_bytes(&rowsb, NULL, -1);
		}
		page_rows = 1;
		more = false;
	}
	if (rc == 0 && more && !p->paged) {
		buf_free(&rowsb);
		return err_set(ERR_INVALID,
			       "This SELECT would return more than %d rows in "
			       "one reply; page it (set a fetch size) or add "
			       "a LIMIT",
			       CQL_SELECT_MAX_ROWS);
	}
	if (rc == 0)
		rc = cql_select_json_rows(p, &rowsb, page_rows);
	if (rc == 0 && more && last.r)
		rc = encode_position(p, last.r, last.k, last.row, last.whole,
				     emitted, last.in_partition, &state);
	return cql_select_reply_rows(out, version, stream, specs, nspecs,
				     more && last.r, page_rows, &rowsb, &state,
				     rc);
}

int cql_select_reply_rows(struct buf *out, uint8_t version, int16_t stream,
			  const struct cql_column_spec *specs, size_t nspecs,
			  bool has_state, size_t page_rows, struct buf *rowsb,
			  struct buf *state, int rc)
{
	struct slice ps = slice_make(state->data, state->len);
	long start = -1;
	if (rc == 0)
		start = cql_frame_begin(out, version, 0, stream, CQL_OP_RESULT);
	if (rc != 0 || start < 0 || cql_write_int(out, CQL_RESULT_ROWS) ||
	    cql_write_rows_metadata(out, specs, nspecs, has_state ? &ps : NULL,
				    false) ||
	    cql_write_int(out, (int32_t)page_rows) ||
	    buf_append(out, rowsb->data, rowsb->len)) {
		if (start >= 0)
			out->len = (size_t)start;
		buf_free(rowsb);
		buf_free(state);
		/* a function's refusal of a row's value (blobAsInt of 3
		 * bytes) is the answer */
		if (rc != 0 && (err_code() == ERR_INVALID ||
				err_code() == ERR_UNSUPPORTED))
			return -1;
		return err_set(ERR_NOMEM, "out of memory encoding rows");
	}
	cql_frame_end(out, start);
	buf_free(rowsb);
	buf_free(state);
	return 0;
}

/* ---- for GROUP BY (select_group.c) --------------------------------------- */

bool cql_select_at_position(const struct cql_select_plan *p,
			    const struct storage_result *r, size_t k)
{
	return is_position_partition(p, r, k);
}

size_t cql_select_ppl_clamp(const struct cql_select_plan *p, bool at_pos,
			    size_t n)
{
	if (!p->per_partition_limit)
		return n;
	uint64_t done = at_pos ? p->pos.in_partition : 0;
	uint64_t left = done < p->per_partition_limit
				? p->per_partition_limit - done
				: 0;
	return n > left ? (size_t)left : n;
}

bool cql_select_row_passes(const struct cql_select_plan *p,
			   const struct storage_result *r,
			   const struct storage_row_view *row,
			   const struct storage_row_view *stat)
{
	return passes_filters(p, r, row, stat);
}

bool cql_select_column_value(const struct cql_select_plan *p,
			     const struct storage_result *r,
			     const struct storage_row_view *row,
			     const struct storage_row_view *stat, int column,
			     struct slice *v)
{
	return column_value(p, r, row, stat, column, v);
}

int cql_select_write_out(const struct cql_select_plan *p, struct buf *out,
			 const struct out_col *o,
			 const struct storage_result *r,
			 const struct storage_row_view *row,
			 const struct storage_row_view *stat, int64_t now_sec)
{
	return write_out(p, out, o, r, row, stat, now_sec);
}

void cql_select_agg_add(const struct cql_select_plan *p,
			const struct out_col *o, struct agg_acc *a,
			struct slice v)
{
	agg_add(p, o, a, v);
}

int cql_select_agg_write(const struct cql_select_plan *p,
			 const struct out_col *o, const struct agg_acc *a,
			 struct buf *out)
{
	return agg_write(p, o, a, out);
}
