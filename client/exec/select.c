/*
 * SELECT planning (see select.h): the plan's making and accessors, ORDER
 * BY, limits and the checks of a selection. WHERE is select_where.c's,
 * selectors select_selectors.c's; what a read sends back is
 * select_rows.c's.
 */
#include "client/exec/select_internal.h"

#include "client/cql/cql_values.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int plan_order(struct cql_select_plan *p, const struct cql_select *q)
{
	const struct storage_table_meta *m = p->m;
	if (!q->order_count)
		return 0;
	if (p->scan)
		return err_set(ERR_INVALID,
			       "ORDER BY is only supported when the "
			       "partition key is restricted by an EQ "
			       "or an IN.");
	/* Cassandra's isReversed: the ORDER BY columns follow the
	 * clustering, skipping only columns restricted by =, and all agree
	 * on reversing the clustering order or not. */
	int reverse = -1;
	size_t at = 0;
	for (size_t i = 0; i < q->order_count; i++) {
		int c = cql_table_column(p->t, q->order[i].column);
		if (c < 0)
			return err_set(
				ERR_INVALID,
				"Undefined column name %s in table %s.%s",
				q->order[i].column, m->keyspace, m->name);
		const struct storage_column *col = &m->columns[c];
		if (col->kind != STORAGE_COLUMN_CLUSTERING)
			return err_set(
				ERR_INVALID,
				"Order by is currently only supported "
				"on the clustered columns of the PRIMARY "
				"KEY, got %s",
				col->name);
		while (at < col->position && p->ck_eq[at])
			at++;
		if (at != col->position)
			return err_set(ERR_INVALID,
				       "Order by currently only supports "
				       "the ordering of columns following "
				       "their declared order in the "
				       "PRIMARY KEY");
		at++;
		int r = q->order[i].descending != col->desc;
		if (reverse >= 0 && r != reverse)
			return err_set(ERR_INVALID,
				       "Unsupported order by relation");
		reverse = r;
	}
	p->cmd.reverse = reverse == 1;
	/* With IN on the partition key the rows of every partition are
	 * sorted together after the reads (Cassandra's post-query
	 * ordering), which a paged query cannot do. */
	p->post_order = p->key_in;
	/* the columns skipped are restricted by =: equal in every row */
	p->order_count = at;
	return 0;
}

/* LIMIT or PER PARTITION LIMIT, as Cassandra 4.1's getLimit (its words
 * are the same for both): unset is no limit. */
static int limit_of(struct cql_select_plan *p, const struct cql_term *t,
		    const struct cql_value *binds, size_t nbinds, size_t *out)
{
	if (!t)
		return 0;
	const struct storage_type integer = {.kind = STORAGE_TYPE_INT};
	struct slice v;
	enum given given;
	if (cql_select_value_of(p, t, &integer, "[limit]", binds, nbinds, &v,
				&given) != 0)
		return -1;
	if (given == GIVEN_UNSET)
		return 0;
	if (given == GIVEN_NULL)
		return err_set(ERR_INVALID, "Invalid null value of limit");
	if (v.len != 4)
		return err_set(ERR_INVALID, "Invalid limit value");
	int32_t n = (int32_t)be32_load(v.ptr);
	if (n <= 0)
		return err_set(ERR_INVALID, "LIMIT must be strictly positive");
	*out = (size_t)n;
	return 0;
}

/* A column named by a relation of the WHERE clause (-1 for token() and
 * unknown names). */
static int relation_column(const struct cql_select_plan *p,
			   const struct cql_relation *r, size_t i)
{
	return r->kind == CQL_REL_TOKEN ? -1
					: cql_table_column(p->t, r->columns[i]);
}

/* Whether the statement reads a partition key range (the partition key
 * not restricted by = or IN on every column). */
static bool names_key_range(const struct cql_select_plan *p,
			    const struct cql_select *q)
{
	const struct storage_table_meta *m = p->m;
	for (size_t k = 0; k < m->pk_count; k++) {
		bool eq = false;
		for (size_t i = 0; i < q->where_count && !eq; i++) {
			const struct cql_relation *r = &q->where[i];
			eq = r->kind == CQL_REL_COLUMN &&
			     (r->op == CQL_OP_EQ || r->op == CQL_OP_IN) &&
			     relation_column(p, r, 0) == m->pk[k];
		}
		if (!eq)
			return true;
	}
	return false;
}

/* The checks that need no values, made once the selection is planned
 * (Cassandra's SelectStatement.prepare and StatementRestrictions), in its
 * order. */
static int check_selection(const struct cql_select_plan *p,
			   const struct cql_select *q)
{
	const struct storage_table_meta *m = p->m;
	bool clustering = false, other = false;
	for (size_t i = 0; i < q->where_count; i++)
		for (size_t k = 0; k < q->where[i].column_count; k++) {
			int c = relation_column(p, &q->where[i], k);
			uint8_t kind = c >= 0 ? m->columns[c].kind : 0xff;
			clustering |= kind == STORAGE_COLUMN_CLUSTERING;
			other |= kind == STORAGE_COLUMN_REGULAR;
		}
	/* Only static (and partition key) columns selected. */
	bool any_static = false, only_static = !q->star;
	for (size_t i = 0; i < p->nouts; i++) {
		int c = p->outs[i].column;
		if (c < 0)
			continue;
		any_static |= m->columns[c].kind == STORAGE_COLUMN_STATIC;
		only_static &=
			m->columns[c].kind == STORAGE_COLUMN_STATIC ||
			m->columns[c].kind == STORAGE_COLUMN_PARTITION_KEY;
	}
	if (only_static && any_static && clustering)
		return err_set(ERR_INVALID,
			       "Cannot restrict clustering columns when "
			       "selecting only static columns");
	if (q->distinct) {
		if (q->per_partition_limit)
			return err_set(ERR_INVALID,
				       "PER PARTITION LIMIT is not allowed "
				       "with SELECT DISTINCT queries");
		if (clustering || other)
			return err_set(ERR_INVALID,
				       "SELECT DISTINCT with WHERE clause only "
				       "supports restriction by partition key "
				       "and/or static columns.");
		bool selected[16] = {false};
		for (size_t i = 0; i < p->nouts; i++) {
			const struct out_col *o = &p->outs[i];
			if (o->kind == OUT_TOKEN)
				for (size_t k = 0; k < m->pk_count; k++)
					selected[k] = true;
			int col = o->column;
			for (const struct sel_expr *e = o->expr;
			     o->kind == OUT_FN && e; e = e->arg)
				col = e->column >= 0 ? e->column : col;
			if (col < 0)
				continue;
			uint8_t kind = m->columns[col].kind;
			if (kind != STORAGE_COLUMN_PARTITION_KEY &&
			    kind != STORAGE_COLUMN_STATIC)
				return err_set(ERR_INVALID,
					       "SELECT DISTINCT queries must "
					       "only request partition key "
					       "columns and/or static columns "
					       "(not %s)",
					       m->columns[col].name);
			if (kind == STORAGE_COLUMN_PARTITION_KEY)
				selected[m->columns[col].position] = true;
		}
		/* A key range must select the whole key, so that no
		 * grouping is needed after the read. */
		for (size_t k = 0; names_key_range(p, q) && k < m->pk_count;
		     k++)
			if (!selected[k])
				return err_set(ERR_INVALID,
					       "SELECT DISTINCT queries must "
					       "request all the partition key "
					       "columns (missing %s)",
					       m->columns[m->pk[k]].name);
	}
	/* GROUP BY's own checks come before this one (Cassandra's
	 * getAggregationSpecification) */
	size_t group_ck;
	if (q->group_by_count && cql_select_group_check(p, q, &group_ck) != 0)
		return -1;
	if (p->aggregate && !q->group_by_count && q->per_partition_limit)
		return err_set(ERR_INVALID,
			       "PER PARTITION LIMIT is not allowed with "
			       "aggregate queries.");
	return 0;
}

static int plan_selection(struct cql_select_plan *p, const struct cql_select *q)
{
	if (q->star)
		return cql_select_plan_star(p);
	for (size_t i = 0; i < q->selector_count; i++)
		if (cql_select_plan_selector(p, &q->selectors[i]) != 0)
			return -1;
	return 0;
}

struct cql_select_plan *
cql_select_plan_new(struct arena *a, const struct cql_select *q,
		    const struct cql_table *t, const struct cql_value *binds,
		    size_t bind_count, const struct cql_fn_ctx *fn)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	struct cql_select_plan *p = arena_alloc(a, sizeof(*p));
	if (!p)
		return NULL;
	memset(p, 0, sizeof(*p));
	p->t = t;
	p->m = m;
	p->a = a;
	p->fn = fn;
	buf_init(&p->keys);
	p->outs = arena_alloc(a, (m->column_count + q->selector_count + 1) *
					 sizeof(*p->outs));
	p->filters = arena_alloc(a, (q->where_count + 1) * sizeof(*p->filters));
	if (!p->outs || !p->filters)
		return NULL;
	p->json = q->json;
	if (plan_selection(p, q) != 0 || check_selection(p, q) != 0 ||
	    cql_select_plan_where(p, q, binds, bind_count) != 0)
		goto fail;
	p->distinct = q->distinct;
	size_t limit = 0, ppl = 0;
	if (plan_order(p, q) != 0 ||
	    limit_of(p, q->limit, binds, bind_count, &limit) != 0 ||
	    limit_of(p, q->per_partition_limit, binds, bind_count, &ppl) != 0)
		goto fail;
	p->user_limit = limit ? limit : SIZE_MAX;
	p->page = CQL_SELECT_MAX_ROWS;
	p->per_partition_limit = ppl;
	p->cmd.with_static = true;
	/* Filters need every row; otherwise the engine can stop early. */
	if (!p->nfilters && !p->aggregate && !p->distinct && p->key_count == 1)
		p->cmd.limit =
			(uint32_t)(ppl && ppl < p->user_limit ? ppl
				   : p->user_limit < CQL_SELECT_MAX_ROWS + 1
					   ? p->user_limit
					   : CQL_SELECT_MAX_ROWS + 1);
	else if (!p->nfilters && !p->aggregate && ppl)
		p->cmd.limit = (uint32_t)ppl;
	if (p->distinct)
		p->cmd.limit = 1;
	if (q->group_by_count && cql_select_group_plan(p, q) != 0)
		goto fail;
	/* The keys buffer lives in the arena so nothing leaks with it. */
	if (p->keys.len) {
		uint8_t *copy = arena_memdup(a, p->keys.data, p->keys.len);
		buf_free(&p->keys);
		if (!copy)
			return NULL;
		p->keys.data = copy; /* arena-owned from here on */
		p->keys.len = p->keys.cap = 0;
	}
	p->fn = NULL;
	return p;
fail:
	buf_free(&p->keys);
	return NULL;
}

size_t cql_select_plan_key_count(const struct cql_select_plan *p)
{
	return p->scan ? 0 : p->key_count;
}

struct slice cql_select_plan_key(const struct cql_select_plan *p, size_t i)
{
	return slice_make(p->keys.data + p->key_offs[i],
			  p->key_offs[i + 1] - p->key_offs[i]);
}

bool cql_select_plan_is_scan(const struct cql_select_plan *p)
{
	return p->scan;
}

bool cql_select_plan_is_filtered(const struct cql_select_plan *p)
{
	return p->nfilters > 0;
}

bool cql_select_plan_is_aggregate(const struct cql_select_plan *p)
{
	return p->aggregate;
}

void cql_select_plan_range(const struct cql_select_plan *p, int64_t *start,
			   int64_t *end)
{
	*start = p->start_token;
	*end = p->end_token;
	/* Resume at the position's partition (ranges are start-exclusive;
	 * a token is never INT64_MIN). */
	if (p->pos.set && p->pos.token - 1 > *start)
		*start = p->pos.token - 1;
}

size_t cql_select_plan_first_key(const struct cql_select_plan *p)
{
	return p->pos.set ? p->pos.key_index : 0;
}

const struct storage_read_cmd *
cql_select_plan_cmd(const struct cql_select_plan *p)
{
	return &p->cmd;
}

const uint8_t *cql_select_plan_table_id(const struct cql_select_plan *p)
{
	return p->m->id;
}

size_t cql_select_plan_row_budget(const struct cql_select_plan *p)
{
	if (p->aggregate && !p->grouped)
		return SIZE_MAX;
	if (p->post_order) /* sorted before the LIMIT: every row */
		return p->page + 1;
	size_t left = p->user_limit - (size_t)p->pos.emitted;
	/* One row past the page tells a full page from the last one. */
	return (left < p->page ? left : p->page) + 1;
}

/* A plan of the selection only: the result columns do not depend on WHERE
 * or on bound values. */
static struct cql_select_plan *selection_plan(struct arena *a,
					      const struct cql_select *q,
					      const struct cql_table *t)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	struct cql_select_plan *p = arena_alloc(a, sizeof(*p));
	if (!p) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	memset(p, 0, sizeof(*p));
	p->t = t;
	p->m = m;
	p->a = a;
	buf_init(&p->keys);
	p->outs = arena_alloc(a, (m->column_count + q->selector_count + 1) *
					 sizeof(*p->outs));
	if (!p->outs) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	int rc = plan_selection(p, q);
	buf_free(&p->keys);
	return rc == 0 ? p : NULL;
}

int cql_select_check(struct arena *a, const struct cql_select *q,
		     const struct cql_table *t)
{
	struct cql_select_plan *p = selection_plan(a, q, t);
	return p ? check_selection(p, q) : -1;
}

int cql_select_result_specs(struct arena *a, const struct cql_select *q,
			    const struct cql_table *t,
			    struct cql_column_spec **specs, size_t *n)
{
	struct cql_select_plan *p = selection_plan(a, q, t);
	if (!p)
		return -1;
	p->json = q->json;
	struct cql_column_spec *sp = cql_select_specs(p, n);
	if (!sp)
		return err_set(ERR_NOMEM, "out of memory");
	*specs = sp;
	return 0;
}
