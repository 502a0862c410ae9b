/*
 * SELECT planning (see select.h): WHERE into keys, token ranges and
 * clustering slices; selections, ORDER BY and limits. What a read sends
 * back is select_rows.c's.
 */
#include "client/exec/select_internal.h"

#include "client/cql/cql_values.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values -------------------------------------------------------------- */

/* What a term gave: a value, null, or (bound) unset. */
enum given { GIVEN_VALUE, GIVEN_NULL, GIVEN_UNSET };

/* A relation's value for column type `type`, copied into the arena;
 * *given says whether it was null or unset instead. */
static int value_of(struct cql_select_plan *p, const struct cql_term *t,
		    const struct storage_type *type, const char *column,
		    const struct cql_value *binds, size_t nbinds,
		    struct slice *out, enum given *given)
{
	*given = GIVEN_VALUE;
	if (t->kind == CQL_TERM_BIND) {
		if ((size_t)t->bind_index >= nbinds)
			return err_set(ERR_INVALID,
				       "No value given for bind "
				       "marker %d",
				       t->bind_index);
		const struct cql_value *v = &binds[t->bind_index];
		if (v->len < 0) {
			*given = v->len == CQL_VALUE_UNSET ? GIVEN_UNSET
							   : GIVEN_NULL;
			return 0;
		}
		out->ptr = arena_memdup(p->a,
					v->len ? v->ptr : (const uint8_t *)"",
					(size_t)v->len);
		out->len = (size_t)v->len;
		return out->ptr ? 0 : -1;
	}
	struct buf b;
	struct cql_column_type ct = {type->kind, type->elem, type->value};
	/* without the request's (result metadata only): no now() needed */
	struct cql_timeuuid_gen g;
	struct cql_fn_ctx none = {.timeuuids = &g};
	cql_timeuuid_gen_init(&g, 0);
	buf_init(&b);
	struct cql_fn_ctx fn = p->fn ? *p->fn : none;
	fn.binds = binds;
	fn.nbinds = nbinds;
	int rc = cql_term_serialize(t, &ct, column, &fn, NULL, &b);
	if (rc < 0) {
		buf_free(&b);
		return -1;
	}
	*given = rc == 1 ? GIVEN_NULL : GIVEN_VALUE;
	out->ptr = arena_memdup(p->a, b.data ? b.data : (const uint8_t *)"",
				b.len);
	out->len = b.len;
	buf_free(&b);
	return out->ptr ? 0 : -1;
}

/* A key column's value in a condition, which may be neither null nor
 * unset (Cassandra's restrictions). */
static int condition_value(struct cql_select_plan *p, const struct cql_term *t,
			   const struct storage_column *col,
			   const struct cql_value *binds, size_t nbinds,
			   struct slice *out)
{
	enum given given;
	if (value_of(p, t, &col->type, col->name, binds, nbinds, out, &given) !=
	    0)
		return -1;
	if (given == GIVEN_UNSET)
		return err_set(ERR_INVALID, "Invalid unset value for column %s",
			       col->name);
	if (given == GIVEN_NULL)
		return err_set(ERR_INVALID,
			       "Invalid null value in condition for column %s",
			       col->name);
	return 0;
}

static int64_t token_value(const struct slice *v)
{
	return (int64_t)be64_load(v->ptr);
}

/* ---- WHERE --------------------------------------------------------------- */

struct key_restr {
	struct slice *vals;
	size_t n;
};

static int restrict_partition(struct cql_select_plan *p,
			      const struct cql_relation *r, int c,
			      struct key_restr *kr,
			      const struct cql_value *binds, size_t nbinds)
{
	const struct storage_column *col = &p->m->columns[c];
	enum given given;
	if (kr->vals)
		return err_set(ERR_INVALID,
			       "%s cannot be restricted by more than "
			       "one relation if it includes an Equal",
			       col->name);
	if (r->op == CQL_OP_EQ) {
		kr->vals = arena_alloc(p->a, sizeof(*kr->vals));
		kr->n = 1;
		return kr->vals ? condition_value(p, r->value, col, binds,
						  nbinds, kr->vals)
				: -1;
	}
	if (r->op != CQL_OP_IN)
		return err_set(ERR_INVALID,
			       "Only EQ and IN relation are supported on the "
			       "partition key (unless you use the token() "
			       "function)");
	if (col->kind == STORAGE_COLUMN_PARTITION_KEY)
		p->key_in = true;
	if (r->value->kind == CQL_TERM_TUPLE) {
		kr->n = r->value->count;
		kr->vals = arena_alloc(p->a, (kr->n + 1) * sizeof(*kr->vals));
		for (size_t i = 0; kr->vals && i < kr->n; i++)
			if (condition_value(p, r->value->items[i], col, binds,
					    nbinds, &kr->vals[i]) != 0)
				return -1;
		return kr->vals ? 0 : -1;
	}
	struct storage_type lt = {STORAGE_TYPE_LIST, col->type.kind, 0, true};
	struct slice list;
	if (value_of(p, r->value, &lt, col->name, binds, nbinds, &list,
		     &given) != 0)
		return -1;
	if (given != GIVEN_VALUE)
		return err_set(ERR_INVALID, "Invalid %s value for column %s",
			       given == GIVEN_NULL ? "null" : "unset",
			       col->name);
	struct cursor cur = cursor_make(list.ptr, list.len);
	uint32_t n;
	if (cursor_be32(&cur, &n) != 0 || n > 4096)
		return err_set(ERR_INVALID, "Invalid IN list for %s",
			       col->name);
	kr->n = n;
	kr->vals = arena_alloc(p->a, (n + 1) * sizeof(*kr->vals));
	for (uint32_t i = 0; kr->vals && i < n; i++) {
		uint32_t len;
		if (cursor_be32(&cur, &len) != 0 || (int32_t)len < 0 ||
		    cursor_take(&cur, len, &kr->vals[i]) != 0)
			return err_set(ERR_INVALID, "Invalid IN list for %s",
				       col->name);
	}
	return kr->vals ? 0 : -1;
}

static int value_type_cmp(const void *a, const void *b, void *type)
{
	const struct slice *x = a, *y = b;
	return storage_type_cmp(type, x->ptr, x->len, y->ptr, y->len);
}

/* Sorts a key column's IN values by its type's order and drops repeats
 * (Cassandra's IN is a TreeSet of the key type). */
static void sort_unique(struct key_restr *kr, const struct storage_type *type)
{
	if (kr->n < 2)
		return;
	qsort_r(kr->vals, kr->n, sizeof(*kr->vals), value_type_cmp,
		(void *)type);
	size_t w = 1;
	for (size_t i = 1; i < kr->n; i++)
		if (value_type_cmp(&kr->vals[w - 1], &kr->vals[i],
				   (void *)type) != 0)
			kr->vals[w++] = kr->vals[i];
	kr->n = w;
}

/* The partition keys: the product of each component's values, in the
 * key type's order without repeats (compound keys compare component by
 * component, so sorted components give a sorted product), checked as
 * Cassandra checks keys (QueryProcessor.validateKey). */
static int build_keys(struct cql_select_plan *p, struct key_restr *kr)
{
	const struct storage_table_meta *m = p->m;
	size_t total = 1;
	for (size_t i = 0; i < m->pk_count; i++) {
		sort_unique(&kr[i], &m->columns[m->pk[i]].type);
		total *= kr[i].n;
		if (total > 4096)
			return err_set(ERR_INVALID,
				       "Too many partitions in IN "
				       "restrictions (more than 4096)");
	}
	p->key_offs = arena_alloc(p->a, (total + 1) * sizeof(*p->key_offs));
	if (!p->key_offs)
		return -1;
	for (size_t k = 0; k < total; k++) {
		size_t idx = k;
		struct slice parts[16];
		size_t len = 0;
		for (size_t i = m->pk_count; i-- > 0;) {
			parts[i] = kr[i].vals[idx % kr[i].n];
			idx /= kr[i].n;
			len += m->pk_count == 1 ? parts[i].len
						: 3 + parts[i].len;
		}
		if (len == 0)
			return err_set(ERR_INVALID, "Key may not be empty");
		if (len > 65535)
			return err_set(ERR_INVALID,
				       "Key length of %zu is longer than "
				       "maximum of 65535",
				       len);
		p->key_offs[p->key_count++] = p->keys.len;
		if (m->pk_count == 1
			    ? buf_append(&p->keys, parts[0].ptr, parts[0].len)
			    : murmur3_compound_key(&p->keys, parts,
						   m->pk_count))
			return -1;
	}
	p->key_offs[p->key_count] = p->keys.len;
	return 0;
}

/* The right side of a token() relation: a bigint, or token(values) of
 * a partition key (Murmur3 over its key, as for a lookup). */
static int token_of_values(struct cql_select_plan *p,
			   const struct cql_term *value,
			   const struct cql_value *binds, size_t nbinds,
			   int64_t *out)
{
	const struct storage_table_meta *m = p->m;
	struct slice v;
	enum given given;
	if (value->kind != CQL_TERM_FUNCTION ||
	    strcmp(value->text, "token") != 0) {
		struct storage_type bigint = {.kind = STORAGE_TYPE_BIGINT};
		if (value_of(p, value, &bigint, "partition key token", binds,
			     nbinds, &v, &given) != 0)
			return -1;
		/* Cassandra: "Invalid null token value" (an unset one it
		 * reads as an empty token and fails on) */
		if (given != GIVEN_VALUE)
			return err_set(ERR_INVALID, "Invalid %s token value",
				       given == GIVEN_NULL ? "null" : "unset");
		if (v.len != 8)
			return err_set(ERR_INVALID, "Invalid token value");
		*out = token_value(&v);
		return 0;
	}
	if (value->count != m->pk_count)
		return err_set(ERR_INVALID,
			       "Invalid number of arguments in call to "
			       "function system.token: %zu required but %zu "
			       "provided",
			       m->pk_count, value->count);
	/* token(?, ...) is a function call: an unset argument is refused,
	 * a null one makes a null token (FunctionCall). */
	struct slice parts[16];
	for (size_t i = 0; i < m->pk_count; i++) {
		const struct storage_column *col = &m->columns[m->pk[i]];
		if (value_of(p, value->items[i], &col->type, col->name, binds,
			     nbinds, &parts[i], &given) != 0)
			return -1;
		if (given == GIVEN_UNSET)
			return err_set(ERR_INVALID,
				       "Invalid unset value for argument in "
				       "call to function token");
		if (given == GIVEN_NULL)
			return err_set(ERR_INVALID, "Invalid null token value");
	}
	if (m->pk_count == 1) {
		*out = murmur3_token(parts[0].ptr, parts[0].len);
		return 0;
	}
	return murmur3_compound_token(parts, m->pk_count, out);
}

static int restrict_token(struct cql_select_plan *p,
			  const struct cql_relation *r,
			  const struct cql_value *binds, size_t nbinds)
{
	const struct storage_table_meta *m = p->m;
	bool ok = r->column_count == m->pk_count;
	for (size_t i = 0; ok && i < m->pk_count; i++)
		ok = strcmp(r->columns[i], m->columns[m->pk[i]].name) == 0;
	if (!ok)
		return err_set(ERR_INVALID,
			       "The token function arguments must be "
			       "the partition key columns, in order");
	int64_t t;
	if (token_of_values(p, r->value, binds, nbinds, &t) != 0)
		return -1;
	p->scan = true;
	switch (r->op) {
	case CQL_OP_GT:
		p->start_token = t > p->start_token ? t : p->start_token;
		break;
	case CQL_OP_GTE:
		if (t != INT64_MIN && t - 1 > p->start_token)
			p->start_token = t - 1;
		break;
	case CQL_OP_LT:
		if (t != INT64_MIN && t - 1 < p->end_token)
			p->end_token = t - 1;
		break;
	case CQL_OP_LTE:
		p->end_token = t < p->end_token ? t : p->end_token;
		break;
	default: /* = */
		p->start_token = t == INT64_MIN ? t : t - 1;
		p->end_token = t;
	}
	return 0;
}

/* One point slice per IN value after the equality prefix, in clustering
 * order and without repeats (the storage read wants them ascending and
 * disjoint). */
static int in_slices(struct cql_select_plan *p, const struct slice *prefix,
		     size_t np, const struct storage_column *col,
		     struct slice *vals, size_t n)
{
	/* Insertion sort with the column's order: IN lists are short. */
	for (size_t i = 1; i < n; i++) {
		struct slice v = vals[i];
		size_t j = i;
		while (j > 0) {
			int c = storage_type_cmp(&col->type, vals[j - 1].ptr,
						 vals[j - 1].len, v.ptr, v.len);
			if ((col->desc ? -c : c) <= 0)
				break;
			vals[j] = vals[j - 1];
			j--;
		}
		vals[j] = v;
	}
	struct storage_slice *sl = arena_alloc(p->a, (n + 1) * sizeof(*sl));
	if (!sl)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k && storage_type_cmp(&col->type, sl[k - 1].start[np].ptr,
					  sl[k - 1].start[np].len, vals[i].ptr,
					  vals[i].len) == 0)
			continue; /* a repeated value */
		struct slice *key = arena_alloc(p->a, (np + 1) * sizeof(*key));
		if (!key)
			return -1;
		memcpy(key, prefix, np * sizeof(*key));
		key[np] = vals[i];
		sl[k++] = (struct storage_slice){key, np + 1, true,
						 key, np + 1, true};
	}
	p->cmd.slices = sl;
	p->cmd.slice_count = k;
	return 0;
}

/* (c1, c2, ...) op (v1, v2, ...) on the first clustering columns, in
 * order: one = or up to two bounds, a slice of the clustering order from or
 * to that prefix (as c1 = v1 AND c2 > v2 would be, without the c1 = v1).
 * The columns must share one direction (Cassandra splits a slice over
 * ASC and DESC columns into several; not supported here yet), and IN on a
 * tuple is not supported yet. */
static int restrict_tuples(struct cql_select_plan *p,
			   const struct cql_relation *const *rels, size_t n,
			   const struct cql_value *binds, size_t nbinds)
{
	const struct storage_table_meta *m = p->m;
	struct slice *start = NULL, *end = NULL;
	size_t ns = 0, ne = 0;
	bool si = true, ei = true;
	for (size_t k = 0; k < n; k++) {
		const struct cql_relation *r = rels[k];
		const struct cql_term *v = r->value;
		bool ok = r->column_count <= m->ck_count;
		for (size_t i = 0; ok && i < r->column_count; i++)
			ok = strcmp(r->columns[i], m->columns[m->ck[i]].name) ==
				     0 &&
			     m->columns[m->ck[i]].desc ==
				     m->columns[m->ck[0]].desc;
		if (!ok)
			return err_set(
				ERR_INVALID,
				"A multi-column relation must name the "
				"first clustering columns in PRIMARY KEY "
				"order, all in the same clustering "
				"direction (Cassini does not split "
				"mixed directions yet)");
		if (r->op == CQL_OP_IN || r->op == CQL_OP_NEQ ||
		    r->op == CQL_OP_CONTAINS || r->op == CQL_OP_CONTAINS_KEY)
			return err_set(ERR_UNSUPPORTED,
				       "Only =, <, <=, > and >= multi-column "
				       "relations are supported by Cassini "
				       "yet");
		if (v->kind != CQL_TERM_TUPLE)
			return err_set(ERR_UNSUPPORTED,
				       "A multi-column relation needs a "
				       "tuple of values, (?, ?) rather "
				       "than ? (tuples are not supported by "
				       "Cassini yet)");
		if (v->count != r->column_count)
			return err_set(ERR_INVALID,
				       "Expected %zu elements in value tuple, "
				       "but got %zu",
				       r->column_count, v->count);
		struct slice *vals =
			arena_alloc(p->a, (v->count + 1) * sizeof(*vals));
		if (!vals)
			return -1;
		for (size_t i = 0; i < v->count; i++) {
			/* a tuple is written whole: no unset field
			 * (Tuples.DelayedValue) */
			const struct cql_term *it = v->items[i];
			if (it->kind == CQL_TERM_BIND &&
			    (size_t)it->bind_index < nbinds &&
			    binds[it->bind_index].len == CQL_VALUE_UNSET)
				return err_set(ERR_INVALID,
					       "Invalid unset value for tuple "
					       "field number %zu",
					       i);
			if (condition_value(p, it, &m->columns[m->ck[i]], binds,
					    nbinds, &vals[i]) != 0)
				return -1;
		}
		bool eq = r->op == CQL_OP_EQ;
		/* DESC columns invert < and > in clustering order */
		bool lo = (r->op == CQL_OP_GT || r->op == CQL_OP_GTE) !=
			  m->columns[m->ck[0]].desc;
		bool incl = eq || r->op == CQL_OP_GTE || r->op == CQL_OP_LTE;
		if ((eq || lo) && start)
			return err_set(ERR_INVALID,
				       "More than one restriction was found "
				       "for the start bound on %s",
				       r->columns[0]);
		if ((eq || !lo) && end)
			return err_set(ERR_INVALID,
				       "More than one restriction was found "
				       "for the end bound on %s",
				       r->columns[0]);
		for (size_t i = 0; eq && i < v->count; i++)
			p->ck_eq[i] = true;
		if (eq || lo) {
			start = vals;
			ns = v->count;
			si = incl;
		}
		if (eq || !lo) {
			end = vals;
			ne = v->count;
			ei = incl;
		}
	}
	p->clustering_restricted = true;
	p->slice = (struct storage_slice){start, ns, si, end, ne, ei};
	p->cmd.slices = &p->slice;
	p->cmd.slice_count = 1;
	return 0;
}

/* Clustering restrictions: equalities on a prefix, then one range or an
 * IN on the last restricted column. */
static int restrict_clustering(struct cql_select_plan *p,
			       const struct cql_relation **by_col,
			       const struct cql_value *binds, size_t nbinds)
{
	const struct storage_table_meta *m = p->m;
	struct slice *start =
		arena_alloc(p->a, (m->ck_count + 1) * sizeof(*start));
	struct slice *end = arena_alloc(p->a, (m->ck_count + 1) * sizeof(*end));
	size_t ns = 0, ne = 0;
	bool si = true, ei = true, ranged = false;
	struct key_restr in = {NULL, 0};
	const struct storage_column *in_col = NULL;
	if (!start || !end)
		return -1;
	for (size_t i = 0; i < m->ck_count; i++) {
		int c = m->ck[i];
		const struct storage_column *col = &m->columns[c];
		/* up to two relations per column (a range has two ends) */
		const struct cql_relation *rels[2] = {by_col[2 * c],
						      by_col[2 * c + 1]};
		if (!rels[0])
			continue;
		if (in_col)
			return err_set(ERR_UNSUPPORTED,
				       "Restrictions after an IN on clustering "
				       "column %s are not supported by "
				       "Cassini yet",
				       in_col->name);
		if (ranged)
			return err_set(ERR_INVALID,
				       "Clustering column \"%s\" cannot "
				       "be restricted (preceding column "
				       "is restricted by a non-EQ "
				       "relation)",
				       col->name);
		if (ns != i || ne != i)
			return err_set(ERR_INVALID,
				       "PRIMARY KEY column \"%s\" cannot "
				       "be restricted as preceding column "
				       "\"%s\" is not restricted",
				       col->name,
				       m->columns[m->ck[i - 1]].name);
		p->clustering_restricted = true;
		for (int k = 0; k < 2 && rels[k]; k++) {
			const struct cql_relation *r = rels[k];
			struct slice v;
			if (r->op == CQL_OP_IN) {
				if (rels[1])
					return err_set(
						ERR_INVALID,
						"More than one restriction "
						"was found for %s",
						col->name);
				if (restrict_partition(p, r, c, &in, binds,
						       nbinds) != 0)
					return -1;
				in_col = col;
				break;
			}
			if (r->op == CQL_OP_NEQ || r->op == CQL_OP_CONTAINS ||
			    r->op == CQL_OP_CONTAINS_KEY)
				return err_set(ERR_INVALID,
					       "Unsupported relation on "
					       "clustering column %s",
					       col->name);
			if (condition_value(p, r->value, col, binds, nbinds,
					    &v) != 0)
				return -1;
			/* A DESC column inverts < and > in clustering order. */
			bool lo = r->op == CQL_OP_GT || r->op == CQL_OP_GTE;
			if (col->desc && r->op != CQL_OP_EQ)
				lo = !lo;
			bool incl = r->op == CQL_OP_GTE || r->op == CQL_OP_LTE;
			if (r->op == CQL_OP_EQ) {
				start[ns++] = end[ne++] = v;
				p->ck_eq[i] = true;
			} else {
				ranged = true;
				if (lo) {
					start[ns++] = v;
					si = incl;
				} else {
					end[ne++] = v;
					ei = incl;
				}
			}
		}
	}
	if (!p->clustering_restricted)
		return 0;
	if (in_col)
		return in_slices(p, start, ns, in_col, in.vals, in.n);
	p->slice = (struct storage_slice){start, ns, si, end, ne, ei};
	p->cmd.slices = &p->slice;
	p->cmd.slice_count = 1;
	return 0;
}

static int plan_where(struct cql_select_plan *p, const struct cql_select *q,
		      const struct cql_value *binds, size_t nbinds)
{
	const struct storage_table_meta *m = p->m;
	struct key_restr kr[16] = {{NULL, 0}};
	const struct cql_relation **by_col =
		arena_alloc(p->a, 2 * (m->column_count + 1) * sizeof(*by_col));
	size_t npk = 0;
	const struct cql_relation *tuples[2];
	size_t ntuples = 0;
	if (!by_col)
		return -1;
	memset(by_col, 0, 2 * (m->column_count + 1) * sizeof(*by_col));
	p->start_token = INT64_MIN;
	p->end_token = INT64_MAX;
	for (size_t i = 0; i < q->where_count; i++) {
		const struct cql_relation *r = &q->where[i];
		if (r->kind == CQL_REL_TOKEN) {
			if (restrict_token(p, r, binds, nbinds) != 0)
				return -1;
			continue;
		}
		if (r->kind == CQL_REL_TUPLE) {
			if (ntuples == 2)
				return err_set(ERR_INVALID,
					       "More than two multi-column "
					       "relations on the clustering "
					       "columns");
			tuples[ntuples++] = r;
			continue;
		}
		int c = cql_table_column(p->t, r->columns[0]);
		if (c < 0)
			return err_set(ERR_INVALID,
				       "Undefined column name %s in "
				       "table %s.%s",
				       r->columns[0], m->keyspace, m->name);
		const struct storage_column *col = &m->columns[c];
		if (col->kind == STORAGE_COLUMN_PARTITION_KEY) {
			if (restrict_partition(p, r, c, &kr[col->position],
					       binds, nbinds) != 0)
				return -1;
			npk++;
		} else if (col->kind == STORAGE_COLUMN_CLUSTERING) {
			size_t slot = by_col[2 * c] ? 2 * (size_t)c + 1
						    : 2 * (size_t)c;
			if (by_col[2 * c + 1] ||
			    (by_col[2 * c] && (by_col[2 * c]->op == CQL_OP_EQ ||
					       r->op == CQL_OP_EQ)))
				return err_set(
					ERR_INVALID,
					"More than one restriction was found "
					"for %s",
					col->name);
			by_col[slot] = r;
		} else {
			if (!q->allow_filtering)
				return err_set(
					ERR_INVALID,
					"Cannot execute this query as it might "
					"involve data filtering and thus may "
					"have unpredictable performance. If "
					"you want to execute this query "
					"despite the performance "
					"unpredictability, use ALLOW "
					"FILTERING");
			if (r->op != CQL_OP_EQ ||
			    (storage_type_is_collection(col->type.kind) &&
			     !col->type.frozen))
				return err_set(
					ERR_UNSUPPORTED,
					"ALLOW FILTERING with an operator "
					"other than = or on a collection "
					"column is not supported by Cassini "
					"yet");
			struct filter *f = &p->filters[p->nfilters++];
			enum given given;
			f->column = c;
			if (value_of(p, r->value, &col->type, col->name, binds,
				     nbinds, &f->value, &given) != 0)
				return -1;
			/* RowFilter.Expression.validate */
			if (given != GIVEN_VALUE)
				return err_set(ERR_INVALID,
					       "Unsupported %s value "
					       "for column %s",
					       given == GIVEN_NULL ? "null"
								   : "unset",
					       col->name);
		}
	}
	if (npk && p->scan)
		return err_set(ERR_INVALID,
			       "Partition key restrictions and token() "
			       "restrictions cannot be mixed");
	for (size_t i = 0; npk && i < m->pk_count; i++)
		if (!kr[i].vals)
			return err_set(
				ERR_INVALID,
				"Cannot execute this query as it might "
				"involve data filtering and thus may have "
				"unpredictable performance. If you want to "
				"execute this query despite the performance "
				"unpredictability, use ALLOW FILTERING");
	if (npk) {
		if (build_keys(p, kr) != 0)
			return -1;
	} else {
		p->scan = true;
	}
	if (ntuples) {
		for (size_t i = 0; i < m->ck_count; i++)
			if (by_col[2 * m->ck[i]])
				return err_set(
					ERR_UNSUPPORTED,
					"Multi-column relations together "
					"with single-column ones on the "
					"clustering columns are not "
					"supported by Cassini yet");
		if (restrict_tuples(p, tuples, ntuples, binds, nbinds) != 0)
			return -1;
	} else if (restrict_clustering(p, by_col, binds, nbinds) != 0) {
		return -1;
	}
	if (p->scan && p->clustering_restricted && !q->allow_filtering)
		return err_set(
			ERR_INVALID,
			"Cannot execute this query as it might involve data "
			"filtering and thus may have unpredictable "
			"performance. If you want to execute this query "
			"despite the performance unpredictability, use "
			"ALLOW FILTERING");
	return 0;
}

/* ---- selectors ----------------------------------------------------------- */

/* Names are copied: the statement's text dies with its request, while the
 * plan lives until the rows are encoded, after the reads. */
static int add_out(struct cql_select_plan *p, enum out_kind k, int column,
		   const char *name, struct storage_type type)
{
	const char *copy = arena_strdup(p->a, name);
	if (!copy)
		return -1;
	p->outs[p->nouts++] = (struct out_col){
		.kind = k, .column = column, .name = copy, .type = type};
	return 0;
}

static int plan_star(struct cql_select_plan *p)
{
	const struct storage_table_meta *m = p->m;
	/* Schema names outlive the plan: no copies needed here. */
	for (size_t i = 0; i < m->pk_count; i++)
		p->outs[p->nouts++] =
			(struct out_col){.kind = OUT_COLUMN,
					 .column = m->pk[i],
					 .name = m->columns[m->pk[i]].name,
					 .type = m->columns[m->pk[i]].type};
	for (size_t i = 0; i < m->ck_count; i++)
		p->outs[p->nouts++] =
			(struct out_col){.kind = OUT_COLUMN,
					 .column = m->ck[i],
					 .name = m->columns[m->ck[i]].name,
					 .type = m->columns[m->ck[i]].type};
	/* Then the static columns, then the regular ones, each by name
	 * (Cassandra's TableMetadata.allColumnsInSelectOrder). */
	for (int pass = 0; pass < 2; pass++) {
		uint8_t want = pass == 0 ? STORAGE_COLUMN_STATIC
					 : STORAGE_COLUMN_REGULAR;
		size_t first = p->nouts;
		for (size_t c = 0; c < m->column_count; c++) {
			if (m->columns[c].kind != want ||
			    cql_table_column_dropped(p->t, c))
				continue;
			size_t at = p->nouts++;
			while (at > first && strcmp(p->outs[at - 1].name,
						    m->columns[c].name) > 0) {
				p->outs[at] = p->outs[at - 1];
				at--;
			}
			p->outs[at] =
				(struct out_col){.kind = OUT_COLUMN,
						 .column = (int)c,
						 .name = m->columns[c].name,
						 .type = m->columns[c].type};
		}
	}
	return 0;
}

/* The column a function of one column takes, or -1 with the error. */
static int function_column(const struct cql_select_plan *p,
			   const struct cql_selector *s)
{
	if (s->arg_count != 1 || s->args[0].kind != CQL_SEL_COLUMN)
		return err_set(ERR_INVALID,
			       "Invalid call to function system.%s: it takes "
			       "one column (other arguments are not supported "
			       "by Cassini yet)",
			       s->name);
	int c = cql_table_column(p->t, s->args[0].name);
	if (c < 0)
		return err_set(ERR_INVALID, "Undefined column name %s",
			       s->args[0].name);
	return c;
}

/* count(col), min, max, sum and avg of one column, as Cassandra's native
 * aggregates: sum and avg of the integer and floating types (varint and
 * decimal would need arbitrary precision), min and max of any type that is
 * not a collection. NULL values are skipped. */
static int plan_aggregate(struct cql_select_plan *p,
			  const struct cql_selector *s, enum agg_fn fn)
{
	const struct storage_table_meta *m = p->m;
	int c = function_column(p, s);
	if (c < 0)
		return -1;
	struct storage_type type = m->columns[c].type;
	uint16_t k = type.kind;
	bool numeric = select_int_width(k) || k == STORAGE_TYPE_FLOAT ||
		       k == STORAGE_TYPE_DOUBLE;
	if ((fn == AGG_SUM || fn == AGG_AVG) && !numeric)
		return err_set(
			k == STORAGE_TYPE_VARINT || k == STORAGE_TYPE_DECIMAL
				? ERR_UNSUPPORTED
				: ERR_INVALID,
			"%s of a %s column is not supported%s", s->name,
			k == STORAGE_TYPE_VARINT    ? "varint"
			: k == STORAGE_TYPE_DECIMAL ? "decimal"
						    : "non-numeric",
			k == STORAGE_TYPE_VARINT || k == STORAGE_TYPE_DECIMAL
				? " by Cassini yet"
				: "");
	if (fn != AGG_COUNT && storage_type_is_collection(k))
		return err_set(ERR_INVALID,
			       "Invalid call to function system.%s on the "
			       "collection %s",
			       s->name, m->columns[c].name);
	if (fn == AGG_COUNT)
		type = (struct storage_type){.kind = STORAGE_TYPE_BIGINT};
	char name[160];
	snprintf(name, sizeof(name), "system.%s(%s)", s->name,
		 m->columns[c].name);
	if (add_out(p, OUT_AGG, c, s->alias ? s->alias : name, type) != 0)
		return -1;
	p->outs[p->nouts - 1].agg = fn;
	p->aggregate = true;
	return 0;
}

/* m['k'] and s[e] (Cassandra 4.0): a map's value at a key, a set's
 * element if present; NULL otherwise. */
static int plan_element(struct cql_select_plan *p, const struct cql_selector *s)
{
	const struct storage_table_meta *m = p->m;
	int c = cql_table_column(p->t, s->name);
	if (c < 0)
		return err_set(ERR_INVALID,
			       "Undefined column name %s in selection clause",
			       s->name);
	struct storage_type type = m->columns[c].type;
	if (type.kind != STORAGE_TYPE_MAP && type.kind != STORAGE_TYPE_SET)
		return err_set(ERR_INVALID,
			       "Element selection is only allowed on sets and "
			       "maps, but %s is not one",
			       s->name);
	if (type.frozen)
		return err_set(ERR_UNSUPPORTED,
			       "Element selection on frozen collections is "
			       "not supported by Cassini yet");
	if (s->term->kind == CQL_TERM_BIND)
		return err_set(ERR_UNSUPPORTED,
			       "Bind markers in selections are not supported "
			       "by Cassini yet");
	struct storage_type key = {.kind = type.elem};
	struct slice k;
	enum given given;
	if (value_of(p, s->term, &key, s->name, NULL, 0, &k, &given) != 0)
		return -1;
	if (given != GIVEN_VALUE)
		return err_set(ERR_INVALID,
			       "Invalid null value for an element of %s",
			       s->name);
	char name[160];
	snprintf(name, sizeof(name), "%s[%.*s]", s->name,
		 s->term->text ? (int)s->term->len : 1,
		 s->term->text ? s->term->text : "?");
	struct storage_type result = {
		.kind = type.kind == STORAGE_TYPE_MAP ? type.value : type.elem};
	if (add_out(p, OUT_ELEMENT, c, s->alias ? s->alias : name, result) != 0)
		return -1;
	p->outs[p->nouts - 1].element = k;
	return 0;
}

/* A selector made of native functions, casts, columns and constants
 * (Selectable.WithFunction, WithCast, WithTerm): its expression, its
 * type and its name as Cassandra's result metadata gives it
 * ("system.blobasint(b)", "cast(v as int)"). 1 when `s` is a function
 * that is not a native scalar one (the caller looks further). */
static int plan_expr(struct cql_select_plan *p, const struct cql_selector *s,
		     struct sel_expr **out, char *name, size_t cap)
{
	struct sel_expr *e = arena_alloc(p->a, sizeof(*e));
	if (!e)
		return -1;
	memset(e, 0, sizeof(*e));
	e->column = -1;
	*out = e;
	if (s->kind == CQL_SEL_COLUMN) {
		int c = cql_table_column(p->t, s->name);
		if (c < 0)
			return err_set(ERR_INVALID,
				       "Undefined column name %s in "
				       "selection clause",
				       s->name);
		e->column = c;
		e->type = p->m->columns[c].type.kind;
		if (storage_type_is_collection(e->type))
			e->type = CQL_FN_TYPE_COLLECTION;
		snprintf(name, cap, "%s", s->name);
		return 0;
	}
	if (s->kind == CQL_SEL_TERM) {
		cql_fn_term_text(s->term, name, cap);
		if (s->term->kind == CQL_TERM_BIND)
			return err_set(ERR_UNSUPPORTED,
				       "Bind markers in selections are not "
				       "supported by Cassini yet");
		if (s->term->kind != CQL_TERM_HINT &&
		    s->term->kind != CQL_TERM_FUNCTION) {
			e->is_const = true;
			e->literal = s->term; /* typed by the call */
			return 0;
		}
		struct buf b;
		buf_init(&b);
		int rc = cql_fn_term_eval(s->term, p->fn, NULL, &e->type, &b);
		if (rc >= 0) {
			e->is_const = true;
			e->null = rc == 1;
			e->value.ptr = arena_memdup(
				p->a, b.data ? b.data : (const uint8_t *)"",
				b.len);
			e->value.len = b.len;
			rc = e->value.ptr ? 0 : -1;
		}
		buf_free(&b);
		return rc;
	}
	const char *fname = s->name;
	char cast_name[48];
	if (s->kind == CQL_SEL_CAST) {
		uint16_t to = s->type && !s->type->param_count
				      ? cql_fn_type_of_name(s->type->name)
				      : 0;
		if (!to)
			return err_set(ERR_INVALID,
				       "Invalid cast to type %s: only native "
				       "types can be cast to",
				       s->type ? s->type->name : "?");
		snprintf(cast_name, sizeof(cast_name), "cast_as_%s",
			 strcmp(s->type->name, "varchar") == 0 ? "text"
							       : s->type->name);
		fname = cast_name;
	} else if (s->kind != CQL_SEL_FUNCTION) {
		return err_set(ERR_UNSUPPORTED,
			       "This selector is not supported as a "
			       "function argument by Cassini yet");
	}
	struct cql_fn_arg args[4];
	struct sel_expr *argx[4];
	char texts[4][160];
	size_t n = s->arg_count < 4 ? s->arg_count : 4;
	for (size_t i = 0; i < n; i++) {
		const struct cql_selector *a = &s->args[i];
		if (a->kind == CQL_SEL_FUNCTION ||
		    a->kind == CQL_SEL_COUNT_STAR) {
			struct cql_fn probe;
			struct cql_fn_arg none[4] = {{0}};
			if (a->kind == CQL_SEL_COUNT_STAR ||
			    cql_fn_resolve(a->name, none, 0, &probe) == 1) {
				/* not a native scalar: writetime, ttl,
				 * token, an aggregate */
				err_clear();
				return err_set(ERR_UNSUPPORTED,
					       "Function %s as an argument of "
					       "another function is not "
					       "supported by Cassini yet",
					       a->kind == CQL_SEL_COUNT_STAR
						       ? "count"
						       : a->name);
			}
			err_clear();
		}
		int rc = plan_expr(p, a, &argx[i], texts[i], sizeof(texts[i]));
		if (rc != 0)
			return rc < 0 ? -1 : rc;
		args[i] = (struct cql_fn_arg){argx[i]->type, argx[i]->literal,
					      texts[i]};
	}
	if (s->kind == CQL_SEL_CAST) {
		char tn[40];
		snprintf(tn, sizeof(tn), "%s", s->type->name);
		snprintf(name, cap, "cast(%s as %s)", texts[0], tn);
		if (argx[0]->type == cql_fn_type_of_name(s->type->name)) {
			*out = argx[0]; /* the same type: the value itself */
			return 0;
		}
	} else {
		size_t at = (size_t)snprintf(name, cap, "system.%s(", fname);
		for (size_t i = 0; i < n && at + 2 < cap; i++)
			at += (size_t)snprintf(name + at, cap - at, "%s%s",
					       i ? ", " : "", texts[i]);
		if (at + 1 < cap)
			snprintf(name + at, cap - at, ")");
	}
	int rc = cql_fn_resolve(fname, args, s->arg_count, &e->fn);
	if (rc == 1 && s->kind == CQL_SEL_CAST)
		return err_set(ERR_INVALID, "%s cannot be cast to %s", texts[0],
			       s->type->name);
	if (rc != 0)
		return rc;
	if (cql_fn_check_supported(&e->fn) != 0)
		return -1;
	e->type = e->fn.ret;
	if (e->fn.nargs) {
		struct sel_expr *a = argx[0];
		if (a->literal) {
			/* the literal, for the argument's type */
			struct buf b;
			struct cql_column_type ct = {e->fn.arg, 0, 0};
			char spec[64];
			snprintf(spec, sizeof(spec), "arg0(system.%s)", fname);
			buf_init(&b);
			int r = cql_term_serialize(a->literal, &ct, spec, p->fn,
						   NULL, &b);
			if (r >= 0) {
				a->null = r == 1;
				a->value.ptr = arena_memdup(
					p->a,
					b.data ? b.data : (const uint8_t *)"",
					b.len);
				a->value.len = b.len;
				a->type = e->fn.arg;
			}
			buf_free(&b);
			if (r < 0 || !a->value.ptr)
				return -1;
		}
		e->arg = a;
	}
	/* no column below: one value for the whole query (now() too) */
	if (!e->arg || e->arg->is_const) {
		struct buf b;
		buf_init(&b);
		rc = cql_fn_apply(
			&e->fn,
			e->arg && !e->arg->null ? e->arg->value.ptr : NULL,
			e->arg && !e->arg->null ? (int32_t)e->arg->value.len
						: -1,
			p->fn, &b);
		if (rc >= 0) {
			e->is_const = true;
			e->null = rc == 1;
			e->value.ptr = arena_memdup(
				p->a, b.data ? b.data : (const uint8_t *)"",
				b.len);
			e->value.len = b.len;
			rc = e->value.ptr ? 0 : -1;
		}
		buf_free(&b);
	}
	return rc;
}

/* A selector of native functions, a cast or a typed constant. 1 when `s`
 * is none of them. */
static int plan_function(struct cql_select_plan *p,
			 const struct cql_selector *s)
{
	if (s->kind == CQL_SEL_TERM && s->term->kind != CQL_TERM_HINT &&
	    s->term->kind != CQL_TERM_FUNCTION) {
		char text[160];
		cql_fn_term_text(s->term, text, sizeof(text));
		return err_set(ERR_INVALID,
			       "Cannot infer type for term %s in selection "
			       "clause (try using a cast to force a type)",
			       text);
	}
	if (s->kind == CQL_SEL_FUNCTION) {
		struct cql_fn probe;
		struct cql_fn_arg none[4] = {{0}};
		int rc = cql_fn_resolve(s->name, none, 0, &probe);
		err_clear();
		if (rc == 1)
			return 1;
	}
	struct sel_expr *e;
	char name[256];
	if (plan_expr(p, s, &e, name, sizeof(name)) != 0)
		return -1;
	if (add_out(p, OUT_FN, -1, s->alias ? s->alias : name,
		    (struct storage_type){.kind = e->type}) != 0)
		return -1;
	p->outs[p->nouts - 1].expr = e;
	return 0;
}

static int plan_selector(struct cql_select_plan *p,
			 const struct cql_selector *s)
{
	const struct storage_table_meta *m = p->m;
	struct storage_type bigint = {.kind = STORAGE_TYPE_BIGINT};
	struct storage_type integer = {.kind = STORAGE_TYPE_INT};
	if (s->kind == CQL_SEL_COUNT_STAR ||
	    (s->kind == CQL_SEL_FUNCTION && strcmp(s->name, "count") == 0 &&
	     s->arg_count == 1 && s->args[0].kind == CQL_SEL_TERM)) {
		p->aggregate = true;
		return add_out(p, OUT_COUNT, -1, s->alias ? s->alias : "count",
			       bigint);
	}
	if (s->kind == CQL_SEL_COLUMN) {
		int c = cql_table_column(p->t, s->name);
		if (c < 0)
			return err_set(ERR_INVALID,
				       "Undefined column name %s in "
				       "selection clause",
				       s->name);
		return add_out(p, OUT_COLUMN, c, s->alias ? s->alias : s->name,
			       m->columns[c].type);
	}
	if (s->kind == CQL_SEL_ELEMENT)
		return plan_element(p, s);
	if (s->kind == CQL_SEL_TERM || s->kind == CQL_SEL_CAST)
		return plan_function(p, s);
	if (strcmp(s->name, "token") == 0) {
		bool ok = s->arg_count == m->pk_count;
		for (size_t i = 0; ok && i < m->pk_count; i++)
			ok = s->args[i].kind == CQL_SEL_COLUMN &&
			     strcmp(s->args[i].name,
				    m->columns[m->pk[i]].name) == 0;
		if (!ok)
			return err_set(ERR_INVALID,
				       "The token function arguments "
				       "must be the partition key "
				       "columns, in order");
		char *name = arena_alloc(p->a, 256);
		if (!name)
			return -1;
		int n = snprintf(name, 256, "system.token(");
		for (size_t i = 0; i < m->pk_count && n < 240; i++)
			n += snprintf(name + n, 256 - (size_t)n, "%s%s",
				      i ? ", " : "", m->columns[m->pk[i]].name);
		snprintf(name + n, 256 - (size_t)n, ")");
		return add_out(p, OUT_TOKEN, -1, s->alias ? s->alias : name,
			       bigint);
	}
	static const struct {
		const char *name;
		enum agg_fn fn;
	} aggs[] = {{"count", AGG_COUNT},
		    {"min", AGG_MIN},
		    {"max", AGG_MAX},
		    {"sum", AGG_SUM},
		    {"avg", AGG_AVG}};
	for (size_t i = 0; i < sizeof(aggs) / sizeof(aggs[0]); i++)
		if (strcmp(s->name, aggs[i].name) == 0)
			return plan_aggregate(p, s, aggs[i].fn);
	int conv = plan_function(p, s);
	if (conv <= 0)
		return conv;
	bool wt = strcmp(s->name, "writetime") == 0,
	     ttl = strcmp(s->name, "ttl") == 0;
	if (!wt && !ttl)
		return err_set(ERR_INVALID, "Unknown function '%s'", s->name);
	int c = function_column(p, s);
	if (c < 0)
		return -1;
	const struct storage_column *col = &m->columns[c];
	const char *fname = wt ? "writeTime" : "ttl";
	if (col->kind == STORAGE_COLUMN_PARTITION_KEY ||
	    col->kind == STORAGE_COLUMN_CLUSTERING)
		return err_set(ERR_INVALID,
			       "Cannot use selection function %s on "
			       "PRIMARY KEY part %s",
			       fname, col->name);
	if (storage_type_is_collection(col->type.kind) && !col->type.frozen)
		return err_set(ERR_INVALID,
			       "Cannot use selection function %s on "
			       "non-frozen collection %s",
			       fname, col->name);
	char *name = arena_alloc(p->a, 160);
	if (!name)
		return -1;
	snprintf(name, 160, "%s(%s)", s->name, col->name);
	return add_out(p, wt ? OUT_WRITETIME : OUT_TTL, c,
		       s->alias ? s->alias : name, wt ? bigint : integer);
}

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
	if (value_of(p, t, &integer, "[limit]", binds, nbinds, &v, &given) != 0)
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
	if (p->aggregate && q->per_partition_limit)
		return err_set(ERR_INVALID,
			       "PER PARTITION LIMIT is not allowed with "
			       "aggregate queries.");
	return 0;
}

static int plan_selection(struct cql_select_plan *p, const struct cql_select *q)
{
	if (q->star)
		return plan_star(p);
	for (size_t i = 0; i < q->selector_count; i++)
		if (plan_selector(p, &q->selectors[i]) != 0)
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
	if (q->json || q->has_group_by) {
		err_set(ERR_UNSUPPORTED, "%s is not supported by Cassini yet",
			q->json ? "SELECT JSON" : "GROUP BY");
		goto fail;
	}
	if (plan_selection(p, q) != 0 || check_selection(p, q) != 0 ||
	    plan_where(p, q, binds, bind_count) != 0)
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
	if (p->aggregate)
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
	if (q->json || q->has_group_by)
		return err_set(ERR_UNSUPPORTED,
			       "%s is not supported by Cassini yet",
			       q->json ? "SELECT JSON" : "GROUP BY");
	struct cql_select_plan *p = selection_plan(a, q, t);
	return p ? check_selection(p, q) : -1;
}

int cql_select_result_specs(struct arena *a, const struct cql_select *q,
			    const struct cql_table *t,
			    struct cql_column_spec **specs, size_t *n)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	struct cql_select_plan *p = selection_plan(a, q, t);
	if (!p)
		return -1;
	struct cql_column_spec *sp =
		arena_alloc(a, (p->nouts + 1) * sizeof(*sp));
	for (size_t i = 0; sp && i < p->nouts; i++) {
		sp[i] = (struct cql_column_spec){
			m->keyspace, m->name, p->outs[i].name,
			cql_type_option_of(a, &p->outs[i].type)};
		if (!sp[i].type)
			sp = NULL;
	}
	if (!sp)
		return err_set(ERR_NOMEM, "out of memory");
	*specs = sp;
	*n = p->nouts;
	return 0;
}
