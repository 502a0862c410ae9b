/*
 * GROUP BY (see select.h): Cassandra 4.1's grouping of a SELECT's rows by
 * the partition key and a prefix of the clustering columns.
 *
 * A group never spans partitions (the whole partition key is grouped), and
 * the data path keeps whole partitions, so every group the encoder sees is
 * complete. Each group gives one row: its aggregates, and the other
 * selections from the group's first row (as Cassandra's selectors keep the
 * first value they see). LIMIT, PER PARTITION LIMIT and the page size count
 * groups, and a page ends on a group boundary: its paging state names the
 * last group sent (partition and clustering prefix), so the next page
 * starts at the next group, even when rows were written into that group
 * meanwhile.
 */
#include "client/exec/select_internal.h"

#include "client/cql/cql_floor.h"
#include "common/err.h"

#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- planning ------------------------------------------------------------ */

/* Whether the WHERE clause restricts `column` by = (alone or in a tuple
 * of =), as Cassandra's isColumnRestrictedByEq. */
static bool restricted_by_eq(const struct cql_select_plan *p,
			     const struct cql_select *q, int column)
{
	for (size_t i = 0; i < q->where_count; i++) {
		const struct cql_relation *r = &q->where[i];
		if (r->op != CQL_OP_EQ || r->kind == CQL_REL_TOKEN)
			continue;
		for (size_t k = 0; k < r->column_count; k++)
			if (cql_table_column(p->t, r->columns[k]) == column)
				return true;
	}
	return false;
}

static bool is_aggregate(const char *name)
{
	static const char *const aggs[] = {"count", "min", "max", "sum", "avg"};
	for (size_t i = 0; i < sizeof(aggs) / sizeof(aggs[0]); i++)
		if (strcmp(name, aggs[i]) == 0)
			return true;
	return false;
}

int cql_select_floor_signatures_error(void)
{
	return err_set(
		ERR_INVALID,
		"Invalid call to function system.floor, none of its type "
		"signatures match (known type signatures: system.floor : "
		"(timestamp, duration) -> timestamp, system.floor : "
		"(timestamp, duration, timestamp) -> timestamp, system.floor "
		": (timeuuid, duration) -> timestamp, system.floor : "
		"(timeuuid, duration, timestamp) -> timestamp, system.floor : "
		"(date, duration) -> date, system.floor : (date, duration, "
		"date) -> date, system.floor : (time, duration) -> time)");
}

int cql_select_floor_args(uint16_t type, const struct cql_term *const *args,
			  size_t nargs, struct cql_floor_spec *out)
{
	if (nargs > 2)
		return cql_select_floor_signatures_error();
	uint16_t kind = type;
	out->kind = kind == STORAGE_TYPE_TIMESTAMP  ? CQL_FLOOR_TIMESTAMP
		    : kind == STORAGE_TYPE_TIMEUUID ? CQL_FLOOR_TIMEUUID
		    : kind == STORAGE_TYPE_DATE     ? CQL_FLOOR_DATE
						    : CQL_FLOOR_TIME;
	bool typed = kind == STORAGE_TYPE_TIMESTAMP ||
		     kind == STORAGE_TYPE_TIMEUUID ||
		     kind == STORAGE_TYPE_DATE || kind == STORAGE_TYPE_TIME;
	if (!typed || nargs == 0 || (out->kind == CQL_FLOOR_TIME && nargs == 2))
		return cql_select_floor_signatures_error();
	const struct cql_term *d = args[0], *st = nargs == 2 ? args[1] : NULL;
	if (d->kind == CQL_TERM_BIND || (st && st->kind == CQL_TERM_BIND))
		return err_set(ERR_UNSUPPORTED,
			       "Bind markers in floor() are not supported by "
			       "Cassini yet");
	if (d->kind != CQL_TERM_DURATION ||
	    (st && st->kind != CQL_TERM_STRING &&
	     !(st->kind == CQL_TERM_INTEGER && out->kind != CQL_FLOOR_DATE)))
		return cql_select_floor_signatures_error();
	if (cql_parse_duration(d->text, d->len, d->negative, &out->dur) != 0)
		return -1;
	out->start = 0;
	if (st && st->kind == CQL_TERM_INTEGER) {
		char *end;
		errno = 0;
		long long v = strtoll(st->text, &end, 10);
		if (errno)
			return err_set(ERR_INVALID, "Invalid start time %s",
				       st->text);
		out->start = st->negative ? -v : v;
	} else if (st) {
		int rc =
			out->kind == CQL_FLOOR_DATE
				? cql_parse_date(st->text, st->len, &out->start)
				: cql_parse_timestamp(st->text, st->len,
						      &out->start);
		if (rc != 0)
			return -1;
	}
	return 0;
}

int cql_select_floor_value(const struct cql_floor_spec *fl, struct slice v,
			   int64_t *out)
{
	const struct storage_duration *d = &fl->dur;
	switch ((enum cql_floor_kind)fl->kind) {
	case CQL_FLOOR_DATE:
		if (v.len != 4)
			break;
		return cql_floor_date((int64_t)be32_load(v.ptr) - (1LL << 31),
				      d, fl->start, out);
	case CQL_FLOOR_TIME:
		if (v.len != 8)
			break;
		return cql_floor_time((int64_t)be64_load(v.ptr), d, out);
	case CQL_FLOOR_TIMEUUID: {
		if (v.len != 16)
			break;
		int64_t us = cql_timeuuid_unix_us(v.ptr);
		int64_t ms = us / 1000 - (us % 1000 < 0);
		return cql_floor_timestamp(ms, d, fl->start, out);
	}
	case CQL_FLOOR_TIMESTAMP:
		if (v.len != 8)
			break;
		return cql_floor_timestamp((int64_t)be64_load(v.ptr), d,
					   fl->start, out);
	}
	*out = 0; /* an empty value: a window of its own */
	return 0;
}

/* The function of GROUP BY element g, on column c: Cassandra's
 * validateGroupByFunction, the function's resolution and the column
 * checks; floor() is the one Cassini computes. */
static int group_fn_check(const struct cql_select_plan *p,
			  const struct cql_group_fn *fn, const char *name,
			  int c, struct cql_floor_spec *out)
{
	const struct storage_column *col = &p->m->columns[c];
	if (is_aggregate(fn->name))
		return err_set(ERR_INVALID,
			       "Aggregate functions are not supported within "
			       "the GROUP BY clause, got: system.%s",
			       fn->name);
	if (strcmp(fn->name, "floor") != 0) {
		struct cql_fn_arg arg = {.type = col->type->kind, .text = name};
		struct cql_fn f;
		int rc = fn->nargs ? 1 : cql_fn_resolve(fn->name, &arg, 1, &f);
		if (rc < 0)
			return -1;
		if (rc == 1 && !fn->nargs)
			return err_set(ERR_INVALID, "Unknown function '%s'",
				       fn->name);
		if (rc == 1)
			return err_set(ERR_UNSUPPORTED,
				       "GROUP BY %s() is not supported by "
				       "Cassini yet (only floor())",
				       fn->name);
		if (col->kind != STORAGE_COLUMN_CLUSTERING)
			return err_set(ERR_INVALID,
				       "Group by functions are only supported "
				       "on clustering columns, got %s",
				       name);
		static const char *const monotonic[] = {
			"todate", "totimestamp", "tounixtimestamp", "dateof",
			"unixtimestampof"};
		for (size_t i = 0; i < 5; i++)
			if (strcmp(fn->name, monotonic[i]) == 0)
				return err_set(ERR_UNSUPPORTED,
					       "GROUP BY %s() is not supported "
					       "by Cassini yet (only floor())",
					       fn->name);
		char sig[128];
		cql_fn_signature(&f, sig, sizeof(sig));
		return err_set(ERR_INVALID,
			       "Only monotonic functions are supported in the "
			       "GROUP BY clause. Got: %s ",
			       sig);
	}
	if (cql_select_floor_args(col->type->kind,
				  (const struct cql_term *const *)fn->args,
				  fn->nargs, out) != 0)
		return -1;
	if (col->kind != STORAGE_COLUMN_CLUSTERING)
		return err_set(ERR_INVALID,
			       "Group by functions are only supported on "
			       "clustering columns, got %s",
			       name);
	return cql_floor_check((enum cql_floor_kind)out->kind, &out->dur);
}

static int group_check(const struct cql_select_plan *p,
		       const struct cql_select *q, size_t *ck,
		       struct cql_floor_spec *fl, bool *has_floor)
{
	static const char order_msg[] =
		"Group by currently only support groups of columns following "
		"their declared order in the PRIMARY KEY";
	const struct storage_table_meta *m = p->m;
	size_t npk = m->pk_count + m->ck_count, next = 0, prefix = 0;
	for (size_t g = 0; g < q->group_by_count; g++) {
		const char *name = q->group_by[g];
		int c = cql_table_column(p->t, name);
		if (c < 0)
			return err_set(ERR_INVALID,
				       "Undefined column name %s in table "
				       "%s.%s",
				       name, m->keyspace, m->name);
		uint8_t kind = m->columns[c].kind;
		const struct cql_group_fn *fn =
			q->group_fns && q->group_fns[g].name ? &q->group_fns[g]
							     : NULL;
		if (fn) {
			if (group_fn_check(p, fn, name, c, fl) != 0)
				return -1;
			*has_floor = true;
		} else if (kind != STORAGE_COLUMN_PARTITION_KEY &&
			   kind != STORAGE_COLUMN_CLUSTERING)
			return err_set(ERR_INVALID,
				       "Group by is currently only supported "
				       "on the columns of the PRIMARY KEY, "
				       "got %s",
				       name);
		else if (*has_floor)
			return err_set(ERR_INVALID,
				       "Functions are only supported on the "
				       "last element of the GROUP BY clause");
		for (;;) {
			if (next == npk)
				return err_set(ERR_INVALID, "%s", order_msg);
			int key = next < m->pk_count
					  ? m->pk[next]
					  : m->ck[next - m->pk_count];
			if (next++ >= m->pk_count)
				prefix++;
			if (key == c)
				break;
			if (!restricted_by_eq(p, q, key))
				return err_set(ERR_INVALID, "%s", order_msg);
		}
	}
	if (next < m->pk_count)
		return err_set(ERR_INVALID, "Group by is not supported on only "
					    "a part of the partition key");
	if (prefix > 0 && q->distinct)
		return err_set(ERR_INVALID,
			       "Grouping on clustering columns is not allowed "
			       "for SELECT DISTINCT queries");
	*ck = prefix;
	return 0;
}

int cql_select_group_check(const struct cql_select_plan *p,
			   const struct cql_select *q, size_t *ck)
{
	struct cql_floor_spec fl;
	bool has_floor = false;
	return group_check(p, q, ck, &fl, &has_floor);
}

int cql_select_group_plan(struct cql_select_plan *p, const struct cql_select *q)
{
	size_t ck;
	struct cql_floor_spec fl = {0};
	bool has_floor = false;
	if (group_check(p, q, &ck, &fl, &has_floor) != 0)
		return -1;
	p->grouped = true;
	p->group_ck = ck;
	p->group_floor = has_floor;
	p->group_fl = fl;
	/* Whole partitions, so that every group is complete (LIMIT counts
	 * groups, not rows); DISTINCT reads a partition's first row. */
	p->cmd.limit = p->distinct ? 1 : 0;
	return 0;
}

bool cql_select_plan_is_grouped(const struct cql_select_plan *p)
{
	return p->grouped;
}

bool cql_select_plan_key_in(const struct cql_select_plan *p)
{
	return p->key_in;
}

bool cql_select_plan_key_restricted(const struct cql_select_plan *p)
{
	return !p->scan || p->token_restricted;
}

/* ---- groups -------------------------------------------------------------- */

/* The floor of the last grouped clustering value `v` (a time window's
 * start, in the column's unit): 0, or -1 with Cassandra's error (a time
 * before the window's start). */
static int floor_key(const struct cql_select_plan *p, struct slice v,
		     int64_t *out)
{
	return cql_select_floor_value(&p->group_fl, v, out);
}

/* Compares clustering value i of two rows as grouping does: the last
 * grouped one by its floor under GROUP BY floor(). */
static int group_value_cmp(const struct cql_select_plan *p, size_t i,
			   struct slice a, struct slice b, int *rc)
{
	const struct storage_column *c = &p->m->columns[p->m->ck[i]];
	if (!p->group_floor || i + 1 != p->group_ck || !a.len || !b.len)
		return storage_type_cmp(c->type, a.ptr, a.len, b.ptr, b.len);
	int64_t fa, fb;
	if (floor_key(p, a, &fa) != 0 || floor_key(p, b, &fb) != 0) {
		*rc = -1;
		return 1;
	}
	return fa < fb ? -1 : fa > fb;
}

/* Whether rows a and b (of one partition; NULL: its static row) are in
 * one group. */
static bool same_group(const struct cql_select_plan *p,
		       const struct storage_row_view *a,
		       const struct storage_row_view *b, int *rc)
{
	if (!a || !b)
		return a == b || p->group_ck == 0;
	for (size_t i = 0; i < p->group_ck; i++) {
		if (i >= a->clustering_count || i >= b->clustering_count)
			return a->clustering_count == b->clustering_count;
		if (group_value_cmp(p, i, a->clustering[i], b->clustering[i],
				    rc) != 0)
			return false;
	}
	return true;
}

/* Whether `row` of the position's partition belongs to a group sent
 * already: at or before the position's clustering prefix, in read
 * order. */
static bool sent_before(const struct cql_select_plan *p,
			const struct storage_row_view *row)
{
	if (p->pos.whole || !row)
		return true;
	for (size_t i = 0; i < p->pos.ck_count && i < row->clustering_count;
	     i++) {
		const struct storage_column *c = &p->m->columns[p->m->ck[i]];
		int bad = 0;
		int r = group_value_cmp(p, i, row->clustering[i], p->pos.ck[i],
					&bad);
		if (bad)
			return false; /* read again, the error is the reply */
		if (c->desc)
			r = -r;
		if (r)
			return (p->cmd.reverse ? -r : r) < 0;
	}
	return true;
}

/* A partition's rows as grouping sees them: a partition with only a live
 * static row is one row (unless the clustering was restricted), DISTINCT
 * takes the first row. */
struct part_rows {
	const struct storage_row_view *stat;
	size_t n;
	bool static_only, whole;
};

static struct part_rows part_rows(const struct cql_select_plan *p,
				  const struct storage_result *r)
{
	struct part_rows pr = {r->static_row, r->row_count, false, false};
	bool static_live = pr.stat && pr.stat->cell_count > 0;
	pr.static_only = !pr.n && static_live && !p->clustering_restricted;
	if (p->distinct)
		pr.n = pr.n || static_live;
	else if (pr.static_only)
		pr.n = 1;
	pr.whole = pr.static_only || p->distinct || p->group_ck == 0;
	return pr;
}

static const struct storage_row_view *
part_row(const struct storage_result *r, const struct part_rows *pr, size_t i)
{
	if (pr->static_only || !r->row_count)
		return NULL;
	return &r->rows[i];
}

size_t cql_select_group_rows_new(const struct cql_select_plan *p,
				 const struct storage_result *r, size_t k)
{
	bool at_pos = cql_select_at_position(p, r, k);
	if (at_pos && p->pos.whole)
		return 0;
	struct part_rows pr = part_rows(p, r);
	size_t groups = 0;
	const struct storage_row_view *prev = NULL;
	for (size_t i = 0; i < pr.n; i++) {
		const struct storage_row_view *row = part_row(r, &pr, i);
		if ((at_pos && sent_before(p, row)) ||
		    !cql_select_row_passes(p, r, row, pr.stat))
			continue;
		int bad = 0;
		if (groups && same_group(p, prev, row, &bad) && !bad)
			continue;
		groups++;
		prev = row;
	}
	return cql_select_ppl_clamp(p, at_pos, groups);
}

/* ---- encoding ------------------------------------------------------------ */

struct group {
	const struct storage_result *r;
	size_t k;
	const struct storage_row_view *first, *stat;
	bool whole;
	uint64_t rows;
};

/* The paging state after group `g` (the format page_decode reads: the
 * clustering is the group's prefix, or none for a whole partition). */
static int group_position(const struct cql_select_plan *p,
			  const struct group *g, uint64_t emitted,
			  uint64_t in_partition, struct buf *out)
{
	bool whole = g->whole || !g->first;
	size_t nck = whole ? 0 : p->group_ck;
	if (!whole && nck > g->first->clustering_count)
		nck = g->first->clustering_count;
	size_t key_index = cql_select_plan_first_key(p) + g->k;
	for (size_t i = cql_select_plan_first_key(p);
	     !p->scan && i < p->key_count; i++)
		if (slice_eq(cql_select_plan_key(p, i), g->r->key)) {
			key_index = i;
			break;
		}
	int rc = buf_put_u8(out, PAGE_STATE_MAGIC) ||
		 buf_put_u8(out, whole ? PAGE_WHOLE : 0) ||
		 buf_put_be32(out, (uint32_t)key_index) ||
		 buf_put_be64(out, (uint64_t)g->r->token) ||
		 buf_put_be64(out, emitted) ||
		 buf_put_be64(out, in_partition) ||
		 buf_put_be16(out, (uint16_t)g->r->key.len) ||
		 buf_append(out, g->r->key.ptr, g->r->key.len) ||
		 buf_put_u8(out, (uint8_t)nck);
	for (size_t i = 0; rc == 0 && i < nck; i++)
		rc = buf_put_be32(out, (uint32_t)g->first->clustering[i].len) ||
		     buf_append(out, g->first->clustering[i].ptr,
				g->first->clustering[i].len);
	return rc ? -1 : 0;
}

/* One group's row: its aggregates, count(*) of its rows, the rest from
 * its first row. */
static int write_group(const struct cql_select_plan *p, const struct group *g,
		       const struct agg_acc *accs, int64_t now_sec,
		       struct buf *out)
{
	int rc = 0;
	for (size_t o = 0; rc == 0 && o < p->nouts; o++) {
		const struct out_col *oc = &p->outs[o];
		uint8_t b[8];
		be64_store(b, g->rows);
		rc = oc->kind == OUT_AGG
			     ? cql_select_agg_write(p, oc, &accs[o], out)
		     : oc->kind == OUT_COUNT
			     ? cql_write_bytes(out, b, 8)
			     : cql_select_write_out(p, out, oc, g->r, g->first,
						    g->stat, now_sec);
	}
	return rc;
}

static void group_add(const struct cql_select_plan *p, struct group *g,
		      struct agg_acc *accs, const struct storage_row_view *row)
{
	g->rows++;
	for (size_t o = 0; o < p->nouts; o++) {
		struct slice v;
		if (p->outs[o].kind == OUT_AGG &&
		    cql_select_column_value(p, g->r, row, g->stat,
					    p->outs[o].column, &v))
			cql_select_agg_add(p, &p->outs[o], &accs[o], v);
	}
}

int cql_select_group_encode(const struct cql_select_plan *p,
			    struct storage_result *const *results, size_t n,
			    bool read_cut, int64_t now_sec, uint8_t version,
			    int16_t stream, struct buf *out)
{
	size_t nspecs;
	struct cql_column_spec *specs = cql_select_specs(p, &nspecs);
	struct agg_acc *accs = arena_alloc_aligned(
		p->a, (p->nouts + 1) * sizeof(*accs), alignof(struct agg_acc));
	if (!specs || !accs)
		return err_set(ERR_NOMEM, "out of memory encoding rows");
	struct buf rowsb, state;
	buf_init(&rowsb);
	buf_init(&state);
	uint64_t emitted = p->pos.emitted, last_in_partition = 0;
	size_t page_rows = 0;
	bool more = false, stop = false, open = false;
	struct group g = {0}, last = {0};
	int rc = 0;
	for (size_t k = 0; rc == 0 && !stop && k < n; k++) {
		const struct storage_result *r = results[k];
		bool at_pos = cql_select_at_position(p, r, k);
		if (at_pos && p->pos.whole)
			continue;
		uint64_t in_partition = at_pos ? p->pos.in_partition : 0;
		struct part_rows pr = part_rows(p, r);
		for (size_t i = 0; rc == 0 && i <= pr.n; i++) {
			const struct storage_row_view *row =
				i < pr.n ? part_row(r, &pr, i) : NULL;
			if (i < pr.n &&
			    ((at_pos && sent_before(p, row)) ||
			     !cql_select_row_passes(p, r, row, pr.stat)))
				continue;
			/* The end of the partition ends its last group. */
			/* Every row's window, as Cassandra computes floor()
			 * of each: a time before the start is an error. */
			int64_t win;
			if (i < pr.n && p->group_floor && row &&
			    row->clustering_count >= p->group_ck &&
			    floor_key(p, row->clustering[p->group_ck - 1],
				      &win) != 0) {
				rc = -1;
				break;
			}
			if (open &&
			    (i == pr.n || !same_group(p, g.first, row, &rc))) {
				rc = write_group(p, &g, accs, now_sec, &rowsb);
				open = false;
				page_rows++;
				emitted++;
				last = g;
				last_in_partition = ++in_partition;
			}
			if (i == pr.n || rc != 0)
				break;
			if (!open) {
				if (p->per_partition_limit &&
				    in_partition >= p->per_partition_limit)
					break; /* the rest is not wanted */
				if (emitted >= p->user_limit) {
					stop = true;
					break;
				}
				if (page_rows == p->page) {
					stop = more = true;
					break;
				}
				g = (struct group){r,       k,        row,
						   pr.stat, pr.whole, 0};
				memset(accs, 0, p->nouts * sizeof(*accs));
				open = true;
			}
			group_add(p, &g, accs, row);
		}
	}
	if (rc == 0 && !stop)
		more = read_cut && emitted < p->user_limit;
	if (rc == 0 && more && !p->paged) {
		buf_free(&rowsb);
		return err_set(ERR_INVALID,
			       "This SELECT would return more than %d rows in "
			       "one reply; page it (set a fetch size) or add "
			       "a LIMIT",
			       CQL_SELECT_MAX_ROWS);
	}
	if (rc == 0) /* SELECT JSON, toJson() */
		rc = cql_select_json_rows(p, &rowsb, page_rows);
	bool has_state = rc == 0 && more && last.r;
	if (has_state)
		rc = group_position(p, &last, emitted, last_in_partition,
				    &state);
	return cql_select_reply_rows(out, version, stream, specs, nspecs,
				     has_state, page_rows, &rowsb, &state, rc);
}
