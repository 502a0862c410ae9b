/*
 * SELECT planning, WHERE: relations into partition keys, token ranges,
 * clustering slices and filters, and the values they name.
 */
#include "client/exec/select_internal.h"

#include "client/cql/cql_values.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values -------------------------------------------------------------- */

/* A relation's value for column type `type`, copied into the arena;
 * *given says whether it was null or unset instead. */
int cql_select_value_of(struct cql_select_plan *p, const struct cql_term *t,
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
	/* without the request's (result metadata only): no now() needed */
	struct cql_timeuuid_gen g;
	struct cql_fn_ctx none = {.timeuuids = &g};
	cql_timeuuid_gen_init(&g, 0);
	buf_init(&b);
	struct cql_fn_ctx fn = p->fn ? *p->fn : none;
	fn.binds = binds;
	fn.nbinds = nbinds;
	int rc = cql_term_serialize(t, type, column, &fn, NULL, &b);
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
	if (cql_select_value_of(p, t, col->type, col->name, binds, nbinds, out,
				&given) != 0)
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
	struct storage_type lt =
		STORAGE_TYPE_COLLECTION(STORAGE_TYPE_LIST, true, col->type);
	struct slice list;
	if (cql_select_value_of(p, r->value, &lt, col->name, binds, nbinds,
				&list, &given) != 0)
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
		sort_unique(&kr[i], m->columns[m->pk[i]].type);
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
		if (cql_select_value_of(p, value, &bigint,
					"partition key token", binds, nbinds,
					&v, &given) != 0)
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
		if (cql_select_value_of(p, value->items[i], col->type,
					col->name, binds, nbinds, &parts[i],
					&given) != 0)
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
	p->token_restricted = true;
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
			int c = storage_type_cmp(col->type, vals[j - 1].ptr,
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
		if (k && storage_type_cmp(col->type, sl[k - 1].start[np].ptr,
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

/* ---- filters and secondary indexes -------------------------------------- */

static const char index_ops_refused[] =
	"Column '%s' has an index but does not support the operators "
	"specified in the query. If you want to execute this query despite "
	"the performance unpredictability, use ALLOW FILTERING";

static const char filtering_refused[] =
	"Cannot execute this query as it might involve data filtering and "
	"thus may have unpredictable performance. If you want to execute "
	"this query despite the performance unpredictability, use ALLOW "
	"FILTERING";

int cql_where_element_check(const struct storage_column *col,
			    const struct cql_relation *r)
{
	uint16_t k = col->type->kind;
	if (k == STORAGE_TYPE_LIST)
		return err_set(ERR_INVALID,
			       "Indexes on list entries (%s[index] = value) "
			       "are not currently supported.",
			       col->name);
	if (k != STORAGE_TYPE_MAP)
		return err_set(ERR_INVALID, "Column %s cannot be used as a map",
			       col->name);
	if (col->type->frozen)
		return err_set(ERR_INVALID,
			       "Map-entry equality predicates on frozen map "
			       "column %s are not supported",
			       col->name);
	if (r->op != CQL_OP_EQ)
		return err_set(ERR_INVALID,
			       "Only EQ relations are supported on map "
			       "entries");
	return 0;
}

/* The index that serves `op` on `c`, or NULL: values(c) for CONTAINS,
 * keys(c) for CONTAINS KEY, entries(c) for c[k] = v (`entry`), the
 * column's or full(c) otherwise. */
static const struct cql_index *serving_index(const struct cql_select_plan *p,
					     int c, enum cql_op op, bool entry)
{
	for (size_t i = 0; i < cql_table_index_count(p->t); i++) {
		const struct cql_index *ix = cql_table_index_at(p->t, i);
		if (ix->column != c)
			continue;
		if (entry) {
			if (op == CQL_OP_EQ && ix->target == CQL_INDEX_ENTRIES)
				return ix;
			continue;
		}
		if (op == CQL_OP_CONTAINS ? ix->target == CQL_INDEX_VALUES
		    : op == CQL_OP_CONTAINS_KEY
			    ? ix->target == CQL_INDEX_KEYS
			    : ix->target == CQL_INDEX_SIMPLE ||
				      ix->target == CQL_INDEX_FULL)
			return ix;
	}
	return NULL;
}

/* Whether SAI answers `op` on the column: = and IN on every type, ranges
 * on the non-literal ones (SAI's literal types, text, ascii and boolean,
 * and frozen collections take = only). */
static bool index_supports(const struct storage_column *col, enum cql_op op)
{
	if (op == CQL_OP_EQ || op == CQL_OP_IN || op == CQL_OP_CONTAINS ||
	    op == CQL_OP_CONTAINS_KEY)
		return true; /* (CONTAINS: when an index serves it) */
	if (op != CQL_OP_LT && op != CQL_OP_LTE && op != CQL_OP_GT &&
	    op != CQL_OP_GTE)
		return false;
	uint16_t k = col->type->kind;
	return k != STORAGE_TYPE_TEXT && k != STORAGE_TYPE_ASCII &&
	       k != STORAGE_TYPE_BOOLEAN && !storage_type_is_collection(k);
}

/* The analysed copies of a filter's values (an index's text analyzer:
 * rows are compared analysed, as the index's terms are). */
static int analyze_one(struct cql_select_plan *p, unsigned analyzer,
		       struct slice v, struct slice *out)
{
	struct buf b = {0};
	if (storage_sai_analyze(analyzer, v.ptr, v.len, &b) != 0)
		return -1;
	out->len = b.len;
	out->ptr = arena_memdup(p->a, b.data ? b.data : (const uint8_t *)"",
				b.len ? b.len : 1);
	buf_free(&b);
	return out->ptr ? 0 : err_set(ERR_NOMEM, "filter");
}

static int analyze_filter(struct cql_select_plan *p, struct filter *f)
{
	if (!f->analyzer)
		return 0;
	if (f->op != CQL_OP_IN)
		return analyze_one(p, f->analyzer, f->value, &f->avalue);
	f->ain = arena_alloc(p->a, (f->n_in + 1) * sizeof(*f->ain));
	if (!f->ain)
		return err_set(ERR_NOMEM, "filter");
	for (size_t i = 0; i < f->n_in; i++)
		if (analyze_one(p, f->analyzer, f->in[i], &f->ain[i]) != 0)
			return -1;
	return 0;
}

/* A restriction checked against every row read: of an indexed column
 * (ix), or of any column under ALLOW FILTERING (ix NULL). */
static int add_filter(struct cql_select_plan *p, const struct cql_relation *r,
		      int c, const struct cql_index *ix,
		      const struct cql_value *binds, size_t nbinds)
{
	const struct storage_column *col = &p->m->columns[c];
	bool ranged = r->op == CQL_OP_LT || r->op == CQL_OP_LTE ||
		      r->op == CQL_OP_GT || r->op == CQL_OP_GTE;
	bool coll = storage_type_is_collection(col->type->kind);
	bool multi = coll && !col->type->frozen;
	bool has = r->op == CQL_OP_CONTAINS || r->op == CQL_OP_CONTAINS_KEY;
	if (col->type->kind == STORAGE_TYPE_UDT && !col->type->frozen) {
		char text[160] = "?";
		cql_type_text(col->type, text, sizeof(text));
		return err_set(ERR_INVALID,
			       "Non-frozen UDT column '%s' (%s) cannot be "
			       "restricted by any relation",
			       col->name, text);
	}
	if (has && !coll)
		return err_set(
			ERR_INVALID,
			"Cannot use CONTAINS on non-collection column %s",
			col->name);
	if (r->op == CQL_OP_CONTAINS_KEY && col->type->kind != STORAGE_TYPE_MAP)
		return err_set(ERR_INVALID,
			       "Cannot use CONTAINS KEY on non-map column %s",
			       col->name);
	if ((r->op != CQL_OP_EQ && r->op != CQL_OP_IN && !ranged && !has) ||
	    (multi && !has) || (ranged && coll))
		return err_set(ERR_UNSUPPORTED,
			       "ALLOW FILTERING or an index with an operator "
			       "other than =, <, <=, >, >=, IN, CONTAINS or "
			       "CONTAINS KEY is not supported by Cassini yet");
	struct filter *f = &p->filters[p->nfilters++];
	memset(f, 0, sizeof(*f));
	f->column = c;
	f->op = r->op;
	f->type = col->type;
	f->ix = ix;
	if (has) /* the elements' (map: values') or the map's keys' type */
		f->type =
			col->type->sub[r->op == CQL_OP_CONTAINS &&
						       col->type->kind ==
							       STORAGE_TYPE_MAP
					       ? 1
					       : 0];
	f->analyzer = ix && !ranged &&
				      (col->type->kind == STORAGE_TYPE_TEXT ||
				       col->type->kind == STORAGE_TYPE_ASCII)
			      ? cql_index_analyzer(ix)
			      : 0;
	if (r->op == CQL_OP_IN) {
		struct key_restr kr = {NULL, 0};
		bool key_in = p->key_in;
		int rc = restrict_partition(p, r, c, &kr, binds, nbinds);
		p->key_in = key_in;
		if (rc != 0)
			return -1;
		f->in = kr.vals;
		f->n_in = kr.n;
		return analyze_filter(p, f);
	}
	enum given given;
	if (cql_select_value_of(p, r->value, f->type, col->name, binds, nbinds,
				&f->value, &given) != 0)
		return -1;
	/* RowFilter.Expression.validate */
	if (given != GIVEN_VALUE)
		return err_set(
			ERR_INVALID, "Unsupported %s value for column %s",
			given == GIVEN_NULL ? "null" : "unset", col->name);
	return analyze_filter(p, f);
}

/* m[k] = v, checked against every row read (an entries(m) index's, or
 * under ALLOW FILTERING): SingleColumnRestriction's map entry
 * restriction and its validate(). */
static int add_entry_filter(struct cql_select_plan *p,
			    const struct cql_relation *r, int c,
			    const struct cql_index *ix,
			    const struct cql_value *binds, size_t nbinds)
{
	const struct storage_column *col = &p->m->columns[c];
	struct filter *f = &p->filters[p->nfilters++];
	memset(f, 0, sizeof(*f));
	f->column = c;
	f->op = CQL_OP_EQ;
	f->type = col->type->sub[1];
	f->ix = ix;
	f->entry = true;
	enum given kg, vg;
	if (cql_select_value_of(p, r->element, col->type->sub[0], col->name,
				binds, nbinds, &f->key, &kg) != 0 ||
	    cql_select_value_of(p, r->value, col->type->sub[1], col->name,
				binds, nbinds, &f->value, &vg) != 0)
		return -1;
	if (kg != GIVEN_VALUE)
		return err_set(ERR_INVALID,
			       "Unsupported %s map key for column %s",
			       kg == GIVEN_NULL ? "null" : "unset", col->name);
	if (vg != GIVEN_VALUE)
		return err_set(ERR_INVALID,
			       "Unsupported %s map value for column %s",
			       vg == GIVEN_NULL ? "null" : "unset", col->name);
	/* the pair as a tuple<key, value> value: [int n][bytes] each */
	size_t n = 8 + f->key.len + f->value.len;
	uint8_t *b = arena_alloc(p->a, n);
	if (!b)
		return err_set(ERR_NOMEM, "filter");
	be32_store(b, (uint32_t)f->key.len);
	memcpy(b + 4, f->key.ptr, f->key.len);
	be32_store(b + 4 + f->key.len, (uint32_t)f->value.len);
	memcpy(b + 8 + f->key.len, f->value.ptr, f->value.len);
	f->pair = (struct slice){b, n};
	return 0;
}

/* Whether every partition key column is restricted by = or IN. */
static bool partition_restricted(const struct cql_select_plan *p,
				 const struct cql_select *q)
{
	const struct storage_table_meta *m = p->m;
	bool seen[32] = {false};
	size_t n = 0;
	for (size_t i = 0; i < q->where_count; i++) {
		const struct cql_relation *r = &q->where[i];
		if (r->kind != CQL_REL_COLUMN ||
		    (r->op != CQL_OP_EQ && r->op != CQL_OP_IN))
			continue;
		int c = cql_table_column(p->t, r->columns[0]);
		if (c < 0 ||
		    m->columns[c].kind != STORAGE_COLUMN_PARTITION_KEY ||
		    m->columns[c].position >= 32 ||
		    seen[m->columns[c].position])
			continue;
		seen[m->columns[c].position] = true;
		n++;
	}
	return n == m->pk_count;
}

int cql_select_plan_where(struct cql_select_plan *p, const struct cql_select *q,
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
	bool full_pk = partition_restricted(p, q);
	/* StatementRestrictions: with a restriction an index serves, the
	 * key columns the key does not fix are filtered, as ALLOW FILTERING
	 * would (Cassandra's hasQueriableIndex) */
	bool uses_index = false;
	for (size_t i = 0; i < q->where_count && !uses_index; i++) {
		const struct cql_relation *r = &q->where[i];
		int c = r->kind == CQL_REL_COLUMN
				? cql_table_column(p->t, r->columns[0])
				: -1;
		uses_index = c >= 0 &&
			     serving_index(p, c, r->op, r->element != NULL) &&
			     index_supports(&m->columns[c], r->op);
	}
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
		if (r->element) { /* m[k] = v: a map is never a key column */
			if (cql_where_element_check(col, r) != 0)
				return -1;
			const struct cql_index *eix =
				serving_index(p, c, r->op, true);
			if (!q->allow_filtering && !eix &&
			    cql_table_index_on(p->t, c))
				return err_set(ERR_INVALID, index_ops_refused,
					       col->name);
			if (!q->allow_filtering && !eix)
				return err_set(ERR_INVALID, "%s",
					       filtering_refused);
			if (add_entry_filter(p, r, c, eix, binds, nbinds) != 0)
				return -1;
			continue;
		}
		bool slice = r->op == CQL_OP_LT || r->op == CQL_OP_LTE ||
			     r->op == CQL_OP_GT || r->op == CQL_OP_GTE;
		/* SingleColumnRelation.newSliceRestriction */
		if (slice &&
		    storage_type_contains(col->type, STORAGE_TYPE_DURATION))
			return err_set(ERR_INVALID,
				       "Slice restrictions are not supported "
				       "on duration columns");
		const struct cql_index *ix = serving_index(p, c, r->op, false);
		/* An indexed key column the key does not fix is served by
		 * its index: its rows are found by the column's value. */
		bool key_col = col->kind == STORAGE_COLUMN_PARTITION_KEY ||
			       col->kind == STORAGE_COLUMN_CLUSTERING;
		/* CONTAINS on a frozen collection key column: filtered
		 * (StatementRestrictions: a clustering column needs an index
		 * or filtering, a partition key part filtering) */
		if (key_col && (r->op == CQL_OP_CONTAINS ||
				r->op == CQL_OP_CONTAINS_KEY)) {
			if (!q->allow_filtering && !uses_index)
				return err_set(
					ERR_INVALID, "%s",
					col->kind == STORAGE_COLUMN_CLUSTERING
						? "Clustering columns can only "
						  "be restricted with CONTAINS "
						  "with a secondary index or "
						  "filtering"
						: filtering_refused);
			if (add_filter(p, r, c, NULL, binds, nbinds) != 0)
				return -1;
			continue;
		}
		bool by_index = key_col && !full_pk && (ix || uses_index) &&
				!(col->kind == STORAGE_COLUMN_CLUSTERING &&
				  q->allow_filtering);
		if (by_index) {
			if (ix && !index_supports(col, r->op) &&
			    !q->allow_filtering)
				return err_set(ERR_INVALID, index_ops_refused,
					       col->name);
			if (add_filter(p, r, c, ix, binds, nbinds) != 0)
				return -1;
			continue;
		}
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
			if (!q->allow_filtering && !ix &&
			    cql_table_index_on(p->t, c))
				return err_set(ERR_INVALID, index_ops_refused,
					       col->name);
			if (!q->allow_filtering && !ix)
				return err_set(ERR_INVALID, "%s",
					       filtering_refused);
			if (ix && !q->allow_filtering &&
			    !index_supports(col, r->op))
				return err_set(ERR_INVALID, index_ops_refused,
					       col->name);
			if (add_filter(p, r, c, ix, binds, nbinds) != 0)
				return -1;
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

/* ---- the index restriction replicas answer with -------------------------- */

/* Whether the index of `f` can give the candidates of a range of values:
 * SAI's ranges (not the literal types, whose terms may be folded, nor
 * collections). */
static bool index_ranges(const struct filter *f)
{
	uint16_t k = f->type->kind;
	return f->ix->target == CQL_INDEX_SIMPLE && k != STORAGE_TYPE_TEXT &&
	       k != STORAGE_TYPE_ASCII && k != STORAGE_TYPE_BOOLEAN &&
	       !storage_type_is_collection(k);
}

/* The best index restriction on an index other than `skip`. */
static bool plan_index_pick(const struct cql_select_plan *p, const void *skip,
			    struct cql_select_index *out)
{
	memset(out, 0, sizeof(*out));
	if (!p->scan)
		return false;
	const struct filter *eq = NULL, *in = NULL, *ranged = NULL;
	for (size_t i = 0; i < p->nfilters; i++) {
		const struct filter *f = &p->filters[i];
		if (!f->ix || (const void *)f->ix == skip)
			continue;
		switch (f->op) {
		case CQL_OP_EQ:
		case CQL_OP_CONTAINS:
		case CQL_OP_CONTAINS_KEY:
			if (!eq)
				eq = f;
			break;
		case CQL_OP_IN:
			if (!in && f->n_in > 0 &&
			    f->n_in <= CQL_SELECT_INDEX_MAX)
				in = f;
			break;
		case CQL_OP_LT:
		case CQL_OP_LTE:
		case CQL_OP_GT:
		case CQL_OP_GTE:
			if (!ranged && index_ranges(f))
				ranged = f;
			break;
		default:
			break;
		}
	}
	if (eq || in) {
		out->ix = (eq ? eq : in)->ix;
		out->name = (eq ? eq : in)->ix->name;
		out->vals = eq ? (eq->entry ? &eq->pair : &eq->value) : in->in;
		out->n_vals = eq ? 1 : in->n_in;
		return true;
	}
	if (!ranged)
		return false;
	/* every bound on that column through that index: the tightest
	 * is not needed (the rows are re-checked), one of each side is */
	out->ix = ranged->ix;
	out->name = ranged->ix->name;
	out->range = true;
	for (size_t i = 0; i < p->nfilters; i++) {
		const struct filter *f = &p->filters[i];
		if (f->ix != ranged->ix || f->column != ranged->column)
			continue;
		bool lower = f->op == CQL_OP_GT || f->op == CQL_OP_GTE;
		bool upper = f->op == CQL_OP_LT || f->op == CQL_OP_LTE;
		if (lower && !out->lo) {
			out->lo_b = (struct storage_index_bound){
				f->value, f->op == CQL_OP_GTE};
			out->lo = &out->lo_b;
		} else if (upper && !out->hi) {
			out->hi_b = (struct storage_index_bound){
				f->value, f->op == CQL_OP_LTE};
			out->hi = &out->hi_b;
		}
	}
	return true;
}

bool cql_select_plan_index(const struct cql_select_plan *p,
			   struct cql_select_index *out)
{
	return plan_index_pick(p, NULL, out);
}

bool cql_select_plan_index_and(const struct cql_select_plan *p,
			       const struct cql_select_index *first,
			       struct cql_select_index *out)
{
	return first->ix && plan_index_pick(p, first->ix, out);
}
