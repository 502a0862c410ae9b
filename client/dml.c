/*
 * Mutation building for INSERT, UPDATE and DELETE (see dml.h for the
 * semantics). Values are resolved once into an arena (literals serialized
 * for their column's type, bound values taken as they came), then the keys
 * are expanded (IN gives several) and each partition gets one mutation.
 */
#include "client/dml.h"

#include "common/err.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TTL  630720000 /* 20 years, Cassandra's cap */
#define MAX_KEYS 4096      /* partitions or rows one statement may expand to */
#define UNSET    (-2)

struct val {
	const uint8_t *ptr;
	int32_t len; /* -1 null, -2 unset */
};

/* A restriction on one key column. */
struct restr {
	bool eq; /* = or IN: vals */
	struct val *vals;
	size_t n;
	bool has_lo, lo_incl, has_hi, hi_incl; /* slices (DELETE only) */
	struct val lo, hi;
};

struct build {
	const struct cql_table *t;
	const struct storage_table_meta *m;
	const struct cql_value *binds;
	size_t nbinds;
	const struct cql_write_ctx *ctx;
	struct arena a;
	int64_t ts;
	int32_t ttl;
	struct cql_mutations *out;
};

/* ---- values -------------------------------------------------------------- */

static int resolve(struct build *b, const struct cql_term *t,
		   const struct storage_type *type, const char *column,
		   struct val *out)
{
	if (t->kind == CQL_TERM_BIND) {
		if ((size_t)t->bind_index >= b->nbinds)
			return err_set(ERR_INVALID,
				       "No value given for bind "
				       "marker %d",
				       t->bind_index);
		const struct cql_value *v = &b->binds[t->bind_index];
		out->ptr = v->ptr;
		out->len = v->len < 0 ? (v->len == CQL_VALUE_UNSET ? UNSET : -1)
				      : v->len;
		return 0;
	}
	struct buf tmp;
	struct cql_column_type ct = {type->kind, type->elem, type->value};
	buf_init(&tmp);
	int rc = cql_term_serialize(t, &ct, column, b->ctx->fn, b->ctx->cmp,
				    &tmp);
	if (rc < 0) {
		buf_free(&tmp);
		return -1;
	}
	if (rc == 1) {
		out->ptr = NULL;
		out->len = -1;
	} else {
		out->ptr = arena_memdup(
			&b->a, tmp.data ? tmp.data : (const uint8_t *)"",
			tmp.len);
		out->len = (int32_t)tmp.len;
	}
	buf_free(&tmp);
	return out->ptr || out->len < 0 ? 0 : -1;
}

/* Walks a serialized collection: n, then [int len][bytes] (twice per map
 * entry). Calls fn for each element (value NULL for lists and sets). */
typedef int (*elem_fn)(struct build *b, void *arg, struct val key,
		       const struct val *value);

static int each_element(struct build *b, struct val coll, bool is_map,
			const char *column, elem_fn fn, void *arg)
{
	struct cursor c = cursor_make(coll.ptr, (size_t)coll.len);
	uint32_t n;
	if (cursor_be32(&c, &n) != 0)
		goto bad;
	for (uint32_t i = 0; i < n; i++) {
		struct val k, v;
		struct slice s;
		uint32_t len;
		if (cursor_be32(&c, &len) != 0 || (int32_t)len < 0 ||
		    cursor_take(&c, len, &s) != 0)
			goto bad;
		k = (struct val){s.ptr, (int32_t)len};
		if (is_map) {
			if (cursor_be32(&c, &len) != 0 || (int32_t)len < 0 ||
			    cursor_take(&c, len, &s) != 0)
				goto bad;
			v = (struct val){s.ptr, (int32_t)len};
		}
		if (fn(b, arg, k, is_map ? &v : NULL) != 0)
			return -1;
	}
	if (cursor_left(&c) == 0)
		return 0;
bad:
	return err_set(ERR_INVALID,
		       "Invalid collection value for %s: not a "
		       "valid serialized collection",
		       column);
}

/* ---- WHERE --------------------------------------------------------------- */

static int key_kind(const struct storage_table_meta *m, int c)
{
	return c < 0 ? -1 : m->columns[c].kind;
}

static int restrict_column(struct build *b, struct restr *r,
			   const struct cql_relation *rel, int c,
			   bool allow_slice)
{
	const struct storage_column *col = &b->m->columns[c];
	if (rel->op == CQL_OP_EQ || rel->op == CQL_OP_IN) {
		if (r->eq || r->has_lo || r->has_hi)
			return err_set(
				ERR_INVALID,
				"%s cannot be restricted by more than one "
				"relation if it includes an Equal",
				col->name);
		r->eq = true;
		if (rel->op == CQL_OP_EQ) {
			r->vals = arena_alloc(&b->a, sizeof(*r->vals));
			r->n = 1;
			return r->vals ? resolve(b, rel->value, &col->type,
						 col->name, r->vals)
				       : -1;
		}
		const struct cql_term *v = rel->value;
		if (v->kind == CQL_TERM_TUPLE) {
			r->n = v->count;
			r->vals = arena_alloc(&b->a, (v->count + 1) *
							     sizeof(*r->vals));
			if (!r->vals)
				return -1;
			for (size_t i = 0; i < v->count; i++)
				if (resolve(b, v->items[i], &col->type,
					    col->name, &r->vals[i]) != 0)
					return -1;
			return 0;
		}
		/* IN ? : a bound list of values. */
		struct storage_type lt = {STORAGE_TYPE_LIST, col->type.kind, 0,
					  true};
		struct val list;
		if (resolve(b, v, &lt, col->name, &list) != 0)
			return -1;
		if (list.len == UNSET)
			return err_set(ERR_INVALID,
				       "Invalid unset value for column %s",
				       col->name);
		if (list.len < 0)
			return err_set(ERR_INVALID,
				       "Invalid null value for IN "
				       "restriction on %s",
				       col->name);
		struct cursor cur = cursor_make(list.ptr, (size_t)list.len);
		uint32_t n;
		if (cursor_be32(&cur, &n) != 0 || n > MAX_KEYS)
			return err_set(ERR_INVALID, "Invalid IN list for %s",
				       col->name);
		r->n = n;
		r->vals = arena_alloc(&b->a, (n + 1) * sizeof(*r->vals));
		if (!r->vals)
			return -1;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t len;
			struct slice s;
			if (cursor_be32(&cur, &len) != 0 || (int32_t)len < 0 ||
			    cursor_take(&cur, len, &s) != 0)
				return err_set(ERR_INVALID,
					       "Invalid IN list for %s",
					       col->name);
			r->vals[i] = (struct val){s.ptr, (int32_t)len};
		}
		return 0;
	}
	if (!allow_slice || col->kind != STORAGE_COLUMN_CLUSTERING)
		return err_set(ERR_INVALID,
			       "Only EQ and IN relation are supported on the "
			       "partition key (unless you use the token() "
			       "function)%s",
			       col->kind == STORAGE_COLUMN_CLUSTERING
				       ? " or on clustering columns here"
				       : "");
	bool lo = rel->op == CQL_OP_GT || rel->op == CQL_OP_GTE;
	bool incl = rel->op == CQL_OP_GTE || rel->op == CQL_OP_LTE;
	if (rel->op == CQL_OP_NEQ || rel->op == CQL_OP_CONTAINS ||
	    rel->op == CQL_OP_CONTAINS_KEY)
		return err_set(ERR_INVALID, "Unsupported \"%s\" relation on %s",
			       rel->op == CQL_OP_NEQ ? "!=" : "CONTAINS",
			       col->name);
	if (r->eq || (lo ? r->has_lo : r->has_hi))
		return err_set(ERR_INVALID,
			       "More than one restriction was found "
			       "for the %s bound on %s",
			       lo ? "start" : "end", col->name);
	struct val v;
	if (resolve(b, rel->value, &col->type, col->name, &v) != 0)
		return -1;
	if (lo) {
		r->has_lo = true;
		r->lo_incl = incl;
		r->lo = v;
	} else {
		r->has_hi = true;
		r->hi_incl = incl;
		r->hi = v;
	}
	return 0;
}

/* Fills rs[column] for each key column restricted by the WHERE clause. */
static int restrict_where(struct build *b, const struct cql_relation *rels,
			  size_t n, struct restr *rs, bool allow_slice)
{
	for (size_t i = 0; i < n; i++) {
		const struct cql_relation *rel = &rels[i];
		if (rel->kind == CQL_REL_TOKEN)
			return err_set(
				ERR_INVALID,
				"The token function cannot be used in WHERE "
				"clauses for UPDATE and DELETE statements");
		if (rel->kind == CQL_REL_TUPLE)
			return err_set(
				ERR_UNSUPPORTED,
				"Multi-column relations in UPDATE and DELETE "
				"are not supported by Cassini yet");
		int c = cql_table_column(b->t, rel->columns[0]);
		if (c < 0)
			return err_set(
				ERR_INVALID,
				"Undefined column name %s in table %s.%s",
				rel->columns[0], b->m->keyspace, b->m->name);
		int kind = key_kind(b->m, c);
		if (kind != STORAGE_COLUMN_PARTITION_KEY &&
		    kind != STORAGE_COLUMN_CLUSTERING)
			return err_set(ERR_INVALID,
				       "Non PRIMARY KEY columns found in where "
				       "clause: %s",
				       rel->columns[0]);
		if (restrict_column(b, &rs[c], rel, c, allow_slice) != 0)
			return -1;
	}
	return 0;
}

/* Checks a key value (no null, no unset, no empty partition key). */
static int key_value_ok(const struct storage_column *col, struct val v,
			bool partition)
{
	if (v.len == UNSET)
		return err_set(ERR_INVALID, "Invalid unset value for column %s",
			       col->name);
	if (v.len < 0)
		return err_set(ERR_INVALID,
			       "Invalid null value %sfor %s key "
			       "part %s",
			       "", partition ? "partition" : "clustering",
			       col->name);
	if (partition && v.len == 0)
		return err_set(ERR_INVALID, "Key may not be empty");
	return 0;
}

/* The partition keys (serialized) restricted by rs. */
static int partition_keys(struct build *b, struct restr *rs, struct buf *keys,
			  size_t **offsets, size_t *nkeys)
{
	const struct storage_table_meta *m = b->m;
	size_t total = 1;
	struct vec_missing {
		char names[256];
	} miss = {""};
	for (size_t i = 0; i < m->pk_count; i++) {
		const struct restr *r = &rs[m->pk[i]];
		if (!r->eq) {
			size_t l = strlen(miss.names);
			snprintf(miss.names + l, sizeof(miss.names) - l, "%s%s",
				 l ? ", " : "", m->columns[m->pk[i]].name);
			continue;
		}
		total *= r->n ? r->n : 1;
		if (total > MAX_KEYS)
			return err_set(ERR_INVALID,
				       "Too many partitions in IN restrictions "
				       "(more than %d)",
				       MAX_KEYS);
	}
	if (miss.names[0])
		return err_set(ERR_INVALID,
			       "Some partition key parts are missing: "
			       "%s",
			       miss.names);
	size_t *offs = arena_alloc(&b->a, (total + 1) * sizeof(*offs));
	if (!offs)
		return -1;
	size_t count = 0;
	for (size_t k = 0; k < total; k++) {
		size_t idx = k;
		struct slice parts[16];
		for (size_t i = m->pk_count; i-- > 0;) {
			const struct restr *r = &rs[m->pk[i]];
			if (r->n == 0) {
				*nkeys = 0; /* IN () matches nothing */
				*offsets = offs;
				return 0;
			}
			struct val v = r->vals[idx % r->n];
			idx /= r->n;
			if (key_value_ok(&m->columns[m->pk[i]], v, true) != 0)
				return -1;
			parts[i] = slice_make(v.ptr, (size_t)v.len);
		}
		offs[count++] = keys->len;
		if (m->pk_count == 1) {
			if (buf_append(keys, parts[0].ptr, parts[0].len) != 0)
				return -1;
		} else if (murmur3_compound_key(keys, parts, m->pk_count) !=
			   0) {
			return -1;
		}
	}
	offs[count] = keys->len;
	*offsets = offs;
	*nkeys = count;
	return 0;
}

/* Every full clustering (values in `rows`, ck_count slices each). */
static int clusterings(struct build *b, struct restr *rs, struct slice **rows,
		       size_t *nrows)
{
	const struct storage_table_meta *m = b->m;
	size_t total = 1;
	for (size_t i = 0; i < m->ck_count; i++) {
		const struct restr *r = &rs[m->ck[i]];
		if (!r->eq)
			return err_set(ERR_INVALID,
				       "Some clustering keys are "
				       "missing: %s",
				       m->columns[m->ck[i]].name);
		total *= r->n;
		if (total > MAX_KEYS)
			return err_set(ERR_INVALID,
				       "Too many rows in IN "
				       "restrictions (more than %d)",
				       MAX_KEYS);
	}
	struct slice *out =
		arena_alloc(&b->a, (total * m->ck_count + 1) * sizeof(*out));
	if (!out)
		return -1;
	for (size_t k = 0; k < total; k++) {
		size_t idx = k;
		for (size_t i = m->ck_count; i-- > 0;) {
			const struct restr *r = &rs[m->ck[i]];
			struct val v = r->vals[idx % r->n];
			idx /= r->n;
			if (key_value_ok(&m->columns[m->ck[i]], v, false) != 0)
				return -1;
			out[k * m->ck_count + i] =
				slice_make(v.ptr, (size_t)v.len);
		}
	}
	*rows = out;
	*nrows = m->ck_count ? total : 1;
	return 0;
}

/* ---- cells --------------------------------------------------------------- */

struct put_ctx {
	struct storage_mutation *mu;
	int column;
	const struct storage_column *col;
	bool remove;
};

static int put_element(struct build *b, void *arg, struct val key,
		       const struct val *value)
{
	struct put_ctx *p = arg;
	if (p->remove)
		return storage_mutation_delete_cell(p->mu, p->column, key.ptr,
						    (size_t)key.len, b->ts,
						    b->ctx->now_sec);
	if (p->col->type.kind == STORAGE_TYPE_LIST) {
		/* A list element's path is a fresh timeuuid; its value is the
		 * element. */
		uint8_t id[16];
		cql_timeuuid_next(b->ctx->fn->timeuuids, b->ctx->fn->now_us,
				  id);
		return storage_mutation_put(p->mu, p->column, id, 16, key.ptr,
					    (size_t)key.len, b->ts, b->ttl,
					    b->ctx->now_sec);
	}
	/* Sets: the element is the path, the value is empty. Maps: key, value.
	 */
	return storage_mutation_put(p->mu, p->column, key.ptr, (size_t)key.len,
				    value ? value->ptr : (const uint8_t *)"",
				    value ? (size_t)value->len : 0, b->ts,
				    b->ttl, b->ctx->now_sec);
}

/* Prepended list elements: paths that sort before every appended one and
 * before those of every earlier prepend (cql_timeuuid_prepend). */
static int prepend_elements(struct build *b, struct storage_mutation *mu,
			    int column, struct val coll, const char *name)
{
	struct cursor c = cursor_make(coll.ptr, (size_t)coll.len);
	uint32_t n;
	if (cursor_be32(&c, &n) != 0 || n > cursor_left(&c) / 4)
		return err_set(ERR_INVALID, "Invalid list value for %s", name);
	if (n == 0)
		return 0;
	uint8_t *ids = arena_alloc(&b->a, 16 * (size_t)n);
	if (!ids)
		return err_set(ERR_NOMEM, "out of memory");
	cql_timeuuid_prepend(b->ctx->fn->timeuuids, b->ctx->fn->now_us, n, ids);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t len;
		struct slice s;
		if (cursor_be32(&c, &len) != 0 || (int32_t)len < 0 ||
		    cursor_take(&c, len, &s) != 0)
			return err_set(ERR_INVALID, "Invalid list value for %s",
				       name);
		if (storage_mutation_put(mu, column, ids + 16 * (size_t)i, 16,
					 s.ptr, len, b->ts, b->ttl,
					 b->ctx->now_sec) != 0)
			return -1;
	}
	return 0;
}

/* Writes `v` into `column` of the current row: replace semantics. */
static int write_value(struct build *b, struct storage_mutation *mu, int column,
		       struct val v)
{
	const struct storage_column *col = &b->m->columns[column];
	bool multicell =
		storage_type_is_collection(col->type.kind) && !col->type.frozen;
	if (v.len == UNSET)
		return 0;
	if (v.len < 0)
		return multicell
			       ? storage_mutation_delete_collection(
					 mu, column, b->ts, b->ctx->now_sec)
			       : storage_mutation_delete_cell(mu, column, NULL,
							      0, b->ts,
							      b->ctx->now_sec);
	if (!multicell)
		return storage_mutation_put(mu, column, NULL, 0, v.ptr,
					    (size_t)v.len, b->ts, b->ttl,
					    b->ctx->now_sec);
	/* Replacing a collection: older elements die, these live. */
	if (storage_mutation_delete_collection(mu, column, b->ts - 1,
					       b->ctx->now_sec) != 0)
		return -1;
	struct put_ctx p = {mu, column, col, false};
	return each_element(b, v, col->type.kind == STORAGE_TYPE_MAP, col->name,
			    put_element, &p);
}

/* ---- USING --------------------------------------------------------------- */

static int using_clause(struct build *b, const struct cql_using *u)
{
	const struct storage_type bigint = {.kind = STORAGE_TYPE_BIGINT};
	const struct storage_type integer = {.kind = STORAGE_TYPE_INT};
	b->ts = b->ctx->timestamp;
	b->ttl = b->m->options.default_time_to_live;
	struct val v;
	if (u->timestamp) {
		if (resolve(b, u->timestamp, &bigint, "[timestamp]", &v) != 0)
			return -1;
		if (v.len == 8)
			b->ts = (int64_t)be64_load(v.ptr);
		else if (v.len != UNSET)
			return err_set(ERR_INVALID,
				       "Invalid %s value for "
				       "timestamp",
				       v.len < 0 ? "null" : "bigint");
	}
	if (u->ttl) {
		if (resolve(b, u->ttl, &integer, "[ttl]", &v) != 0)
			return -1;
		if (v.len == 4) {
			int32_t ttl = (int32_t)be32_load(v.ptr);
			if (ttl < 0)
				return err_set(ERR_INVALID,
					       "A TTL must be greater "
					       "or equal to 0, but "
					       "was %d",
					       ttl);
			if (ttl > MAX_TTL)
				return err_set(
					ERR_INVALID,
					"ttl is too large. requested (%d) "
					"maximum (%d)",
					ttl, MAX_TTL);
			b->ttl = ttl;
		} else if (v.len != UNSET) {
			return err_set(ERR_INVALID,
				       "Invalid null value of TTL");
		}
	}
	return 0;
}

/* ---- statements ---------------------------------------------------------- */

static struct storage_mutation *new_mutation(struct build *b,
					     const struct buf *keys,
					     const size_t *offs, size_t k)
{
	struct storage_mutation *mu = storage_mutation_new(
		b->m, keys->data + offs[k], offs[k + 1] - offs[k]);
	if (!mu)
		return NULL;
	struct cql_mutations *o = b->out;
	struct storage_mutation **items =
		realloc(o->items, (o->count + 1) * sizeof(*items));
	if (!items) {
		storage_mutation_delete(mu);
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	o->items = items;
	o->items[o->count++] = mu;
	return mu;
}

static int build_insert(struct build *b, const struct cql_insert *in)
{
	const struct storage_table_meta *m = b->m;
	struct restr *rs = arena_alloc(&b->a, m->column_count * sizeof(*rs));
	struct val *vals =
		arena_alloc(&b->a, (in->column_count + 1) * sizeof(*vals));
	int *cols = arena_alloc(&b->a, (in->column_count + 1) * sizeof(*cols));
	if (!rs || !vals || !cols)
		return -1;
	memset(rs, 0, m->column_count * sizeof(*rs));
	bool any_static = false, any_regular = false;
	for (size_t i = 0; i < in->column_count; i++) {
		int c = cql_table_column(b->t, in->columns[i]);
		if (c < 0)
			return err_set(ERR_INVALID,
				       "Undefined column name %s in "
				       "table %s.%s",
				       in->columns[i], m->keyspace, m->name);
		for (size_t j = 0; j < i; j++)
			if (cols[j] == c)
				return err_set(ERR_INVALID,
					       "Multiple definitions found for "
					       "column %s",
					       in->columns[i]);
		cols[i] = c;
		const struct storage_column *col = &m->columns[c];
		if (resolve(b, in->values[i], &col->type, col->name,
			    &vals[i]) != 0)
			return -1;
		if (col->kind == STORAGE_COLUMN_PARTITION_KEY ||
		    col->kind == STORAGE_COLUMN_CLUSTERING) {
			rs[c].eq = true;
			rs[c].vals = &vals[i];
			rs[c].n = 1;
		} else if (col->kind == STORAGE_COLUMN_STATIC) {
			any_static = true;
		} else {
			any_regular = true;
		}
	}
	if (using_clause(b, &in->using) != 0)
		return -1;
	struct buf keys;
	size_t *offs, nkeys;
	buf_init(&keys);
	int rc = partition_keys(b, rs, &keys, &offs, &nkeys);
	struct slice *rows = NULL;
	size_t nrows = 1;
	/* Only static columns: the clustering may be omitted. */
	bool need_rows = m->ck_count == 0 || any_regular || !any_static;
	for (size_t i = 0; rc == 0 && need_rows && i < m->ck_count; i++)
		if (!rs[m->ck[i]].eq)
			rc = err_set(ERR_INVALID,
				     "Some clustering keys are "
				     "missing: %s",
				     m->columns[m->ck[i]].name);
	if (rc == 0 && need_rows)
		rc = clusterings(b, rs, &rows, &nrows);
	for (size_t k = 0; rc == 0 && k < nkeys; k++) {
		struct storage_mutation *mu = new_mutation(b, &keys, offs, k);
		rc = mu ? 0 : -1;
		if (rc == 0 && need_rows) {
			rc = storage_mutation_set_row(mu, rows, m->ck_count) ||
			     storage_mutation_put_marker(mu, b->ts, b->ttl,
							 b->ctx->now_sec);
			for (size_t i = 0; rc == 0 && i < in->column_count; i++)
				if (m->columns[cols[i]].kind ==
				    STORAGE_COLUMN_REGULAR)
					rc = write_value(b, mu, cols[i],
							 vals[i]);
		}
		if (rc == 0 && any_static) {
			rc = storage_mutation_set_static_row(mu);
			for (size_t i = 0; rc == 0 && i < in->column_count; i++)
				if (m->columns[cols[i]].kind ==
				    STORAGE_COLUMN_STATIC)
					rc = write_value(b, mu, cols[i],
							 vals[i]);
		}
	}
	buf_free(&keys);
	return rc ? -1 : 0;
}

static int apply_assignment(struct build *b, struct storage_mutation *mu,
			    const struct cql_assignment *a, int c)
{
	const struct storage_column *col = &b->m->columns[c];
	const struct storage_type *ty = &col->type;
	bool multicell = storage_type_is_collection(ty->kind) && !ty->frozen;
	struct val v;
	if (a->target.element) {
		if (!multicell)
			return err_set(ERR_INVALID,
				       "Invalid operation (%s[?] = ?) for "
				       "non-collection or frozen column %s",
				       col->name, col->name);
		if (ty->kind != STORAGE_TYPE_MAP)
			return err_set(
				ERR_UNSUPPORTED,
				"Setting a list element by index needs a "
				"read before the write, which Cassini "
				"does not do yet");
		struct storage_type kt = {.kind = ty->elem},
				    vt = {.kind = ty->value};
		struct val k;
		if (resolve(b, a->target.element, &kt, col->name, &k) != 0 ||
		    resolve(b, a->value, &vt, col->name, &v) != 0)
			return -1;
		if (k.len < 0) /* Maps.SetterByKey */
			return err_set(ERR_INVALID, "Invalid %s map key",
				       k.len == UNSET ? "unset" : "null");
		if (v.len == UNSET)
			return 0;
		if (v.len < 0)
			return storage_mutation_delete_cell(
				mu, c, k.ptr, (size_t)k.len, b->ts,
				b->ctx->now_sec);
		return storage_mutation_put(mu, c, k.ptr, (size_t)k.len, v.ptr,
					    (size_t)v.len, b->ts, b->ttl,
					    b->ctx->now_sec);
	}
	/* c = c - {..} on a map removes keys: the operand is a set of keys. */
	struct storage_type operand = *ty;
	if (a->kind == CQL_ASSIGN_REMOVE && ty->kind == STORAGE_TYPE_MAP)
		operand = (struct storage_type){STORAGE_TYPE_SET, ty->elem, 0,
						false};
	if (resolve(b, a->value, &operand, col->name, &v) != 0)
		return -1;
	if (a->kind == CQL_ASSIGN_SET)
		return write_value(b, mu, c, v);
	if (!multicell)
		return err_set(ERR_INVALID,
			       "Invalid operation (%s = %s %s ?) for "
			       "non-collection or frozen column %s",
			       col->name, col->name,
			       a->kind == CQL_ASSIGN_REMOVE ? "-" : "+",
			       col->name);
	if (v.len == UNSET)
		return 0;
	if (v.len < 0)
		return err_set(ERR_INVALID, "Invalid null value for %s",
			       col->name);
	if (a->kind == CQL_ASSIGN_PREPEND) {
		if (ty->kind != STORAGE_TYPE_LIST)
			return err_set(ERR_INVALID,
				       "Invalid operation (%s = ? + "
				       "%s) for non list column %s",
				       col->name, col->name, col->name);
		return prepend_elements(b, mu, c, v, col->name);
	}
	if (a->kind == CQL_ASSIGN_REMOVE && ty->kind == STORAGE_TYPE_LIST)
		return err_set(
			ERR_UNSUPPORTED,
			"Removing list elements by value needs a read "
			"before the write, which Cassini does not do yet");
	struct put_ctx p = {mu, c, col, a->kind == CQL_ASSIGN_REMOVE};
	bool map_pairs =
		ty->kind == STORAGE_TYPE_MAP && a->kind == CQL_ASSIGN_ADD;
	return each_element(b, v, map_pairs, col->name, put_element, &p);
}

static int build_update(struct build *b, const struct cql_update *up)
{
	const struct storage_table_meta *m = b->m;
	struct restr *rs = arena_alloc(&b->a, m->column_count * sizeof(*rs));
	int *cols =
		arena_alloc(&b->a, (up->assignment_count + 1) * sizeof(*cols));
	if (!rs || !cols)
		return -1;
	memset(rs, 0, m->column_count * sizeof(*rs));
	bool only_static = true;
	for (size_t i = 0; i < up->assignment_count; i++) {
		const char *name = up->assignments[i].target.name;
		int c = cql_table_column(b->t, name);
		if (c < 0)
			return err_set(ERR_INVALID,
				       "Undefined column name %s in "
				       "table %s.%s",
				       name, m->keyspace, m->name);
		int kind = m->columns[c].kind;
		if (kind == STORAGE_COLUMN_PARTITION_KEY ||
		    kind == STORAGE_COLUMN_CLUSTERING)
			return err_set(ERR_INVALID,
				       "PRIMARY KEY part %s found in "
				       "SET part",
				       name);
		only_static &= kind == STORAGE_COLUMN_STATIC;
		cols[i] = c;
	}
	if (restrict_where(b, up->where, up->where_count, rs, false) != 0 ||
	    using_clause(b, &up->using) != 0)
		return -1;
	bool ck_given = false;
	for (size_t i = 0; i < m->ck_count; i++)
		ck_given |= rs[m->ck[i]].eq || rs[m->ck[i]].has_lo ||
			    rs[m->ck[i]].has_hi;
	if (only_static && ck_given)
		return err_set(
			ERR_INVALID,
			"Invalid restrictions on clustering columns since "
			"the UPDATE statement modifies only static "
			"columns");
	struct buf keys;
	size_t *offs, nkeys;
	struct slice *rows = NULL;
	size_t nrows = 0;
	buf_init(&keys);
	int rc = partition_keys(b, rs, &keys, &offs, &nkeys);
	if (rc == 0 && !only_static)
		rc = clusterings(b, rs, &rows, &nrows);
	for (size_t k = 0; rc == 0 && k < nkeys; k++) {
		struct storage_mutation *mu = new_mutation(b, &keys, offs, k);
		rc = mu ? 0 : -1;
		/* Regular columns on every row the keys name. */
		for (size_t r = 0; rc == 0 && r < nrows; r++) {
			rc = storage_mutation_set_row(
				mu, rows + r * m->ck_count, m->ck_count);
			for (size_t i = 0; rc == 0 && i < up->assignment_count;
			     i++)
				if (m->columns[cols[i]].kind !=
				    STORAGE_COLUMN_STATIC)
					rc = apply_assignment(
						b, mu, &up->assignments[i],
						cols[i]);
		}
		/* Static columns once per partition. */
		bool positioned = false;
		for (size_t i = 0; rc == 0 && i < up->assignment_count; i++) {
			if (m->columns[cols[i]].kind != STORAGE_COLUMN_STATIC)
				continue;
			if (!positioned) {
				rc = storage_mutation_set_static_row(mu);
				positioned = true;
			}
			if (rc == 0)
				rc = apply_assignment(
					b, mu, &up->assignments[i], cols[i]);
		}
	}
	buf_free(&keys);
	return rc ? -1 : 0;
}

/* DELETE without columns on a clustering prefix + optional final slice. */
static int delete_range(struct build *b, struct storage_mutation *mu,
			struct restr *rs)
{
	const struct storage_table_meta *m = b->m;
	struct slice start[32], end[32];
	size_t nstart = 0, nend = 0;
	bool start_incl = true, end_incl = true;
	size_t i = 0;
	for (; i < m->ck_count && rs[m->ck[i]].eq; i++) {
		const struct restr *r = &rs[m->ck[i]];
		if (r->n != 1)
			return err_set(
				ERR_UNSUPPORTED,
				"IN on a clustering column of a range "
				"deletion is not supported by Cassini yet");
		if (key_value_ok(&m->columns[m->ck[i]], r->vals[0], false) != 0)
			return -1;
		start[nstart++] = end[nend++] =
			slice_make(r->vals[0].ptr, (size_t)r->vals[0].len);
	}
	if (i < m->ck_count) {
		const struct restr *r = &rs[m->ck[i]];
		/* Bounds are in clustering order: a DESC column's lowest
		 * value is the end of its range. */
		bool desc = m->columns[m->ck[i]].desc;
		bool has_first = desc ? r->has_hi : r->has_lo;
		bool has_last = desc ? r->has_lo : r->has_hi;
		if (has_first) {
			const struct val *v = desc ? &r->hi : &r->lo;
			start[nstart++] = slice_make(v->ptr, (size_t)v->len);
			start_incl = desc ? r->hi_incl : r->lo_incl;
		}
		if (has_last) {
			const struct val *v = desc ? &r->lo : &r->hi;
			end[nend++] = slice_make(v->ptr, (size_t)v->len);
			end_incl = desc ? r->lo_incl : r->hi_incl;
		}
		for (size_t j = i + 1; j < m->ck_count; j++) {
			const struct restr *later = &rs[m->ck[j]];
			if (later->eq || later->has_lo || later->has_hi)
				return err_set(
					ERR_INVALID,
					"PRIMARY KEY column \"%s\" cannot be "
					"restricted as preceding column "
					"\"%s\" is not restricted",
					m->columns[m->ck[j]].name,
					m->columns[m->ck[i]].name);
		}
	}
	if (nstart == m->ck_count && nend == m->ck_count && i == m->ck_count)
		return storage_mutation_set_row(mu, start, nstart) ||
		       storage_mutation_delete_row(mu, b->ts, b->ctx->now_sec);
	if (nstart == 0 && nend == 0)
		return storage_mutation_delete_partition(mu, b->ts,
							 b->ctx->now_sec);
	return storage_mutation_delete_range(mu, start, nstart, start_incl, end,
					     nend, end_incl, b->ts,
					     b->ctx->now_sec);
}

static int delete_columns(struct build *b, struct storage_mutation *mu,
			  const struct cql_delete *d, const int *cols,
			  struct slice *row)
{
	const struct storage_table_meta *m = b->m;
	int rc = 0;
	for (int pass = 0; pass < 2 && rc == 0; pass++) {
		bool stat = pass == 1;
		bool positioned = false;
		for (size_t i = 0; rc == 0 && i < d->column_count; i++) {
			const struct storage_column *col = &m->columns[cols[i]];
			if ((col->kind == STORAGE_COLUMN_STATIC) != stat)
				continue;
			if (!stat && !row)
				return err_set(
					ERR_INVALID,
					"Range deletions are not supported "
					"for specific columns");
			if (!positioned) {
				rc = stat ? storage_mutation_set_static_row(mu)
					  : storage_mutation_set_row(
						    mu, row, m->ck_count);
				positioned = true;
			}
			if (rc)
				break;
			const struct cql_column_ref *ref = &d->columns[i];
			bool multicell =
				storage_type_is_collection(col->type.kind) &&
				!col->type.frozen;
			if (ref->element) {
				if (!multicell ||
				    col->type.kind == STORAGE_TYPE_LIST)
					return err_set(
						ERR_UNSUPPORTED,
						"Deleting %s needs a read "
						"before "
						"the write, which Cassini does "
						"not "
						"do yet",
						multicell ? "a list element by "
							    "index"
							  : "an element of a "
							    "frozen or "
							    "non-collection "
							    "column");
				struct storage_type kt = {
					.kind = col->type.elem};
				struct val k;
				if (resolve(b, ref->element, &kt, col->name,
					    &k) != 0)
					return -1;
				if (k.len < 0) /* Maps.DiscarderByKey */
					return err_set(ERR_INVALID,
						       "Invalid %s map key",
						       k.len == UNSET ? "unset"
								      : "null");
				rc = storage_mutation_delete_cell(
					mu, cols[i], k.ptr, (size_t)k.len,
					b->ts, b->ctx->now_sec);
			} else if (multicell) {
				rc = storage_mutation_delete_collection(
					mu, cols[i], b->ts, b->ctx->now_sec);
			} else {
				rc = storage_mutation_delete_cell(
					mu, cols[i], NULL, 0, b->ts,
					b->ctx->now_sec);
			}
		}
	}
	return rc;
}

static int build_delete(struct build *b, const struct cql_delete *d)
{
	const struct storage_table_meta *m = b->m;
	struct restr *rs = arena_alloc(&b->a, m->column_count * sizeof(*rs));
	int *cols = arena_alloc(&b->a, (d->column_count + 1) * sizeof(*cols));
	if (!rs || !cols)
		return -1;
	memset(rs, 0, m->column_count * sizeof(*rs));
	for (size_t i = 0; i < d->column_count; i++) {
		int c = cql_table_column(b->t, d->columns[i].name);
		if (c < 0)
			return err_set(ERR_INVALID,
				       "Undefined column name %s in "
				       "table %s.%s",
				       d->columns[i].name, m->keyspace,
				       m->name);
		int kind = m->columns[c].kind;
		if (kind == STORAGE_COLUMN_PARTITION_KEY ||
		    kind == STORAGE_COLUMN_CLUSTERING)
			return err_set(ERR_INVALID,
				       "Invalid identifier %s for "
				       "deletion (should not be a "
				       "PRIMARY KEY part)",
				       d->columns[i].name);
		cols[i] = c;
	}
	if (restrict_where(b, d->where, d->where_count, rs, true) != 0 ||
	    using_clause(b, &d->using) != 0)
		return -1;
	struct buf keys;
	size_t *offs, nkeys;
	buf_init(&keys);
	int rc = partition_keys(b, rs, &keys, &offs, &nkeys);
	bool full_ck = true;
	for (size_t i = 0; i < m->ck_count; i++)
		full_ck &= rs[m->ck[i]].eq;
	struct slice *rows = NULL;
	size_t nrows = 1;
	if (rc == 0 && d->column_count && full_ck)
		rc = clusterings(b, rs, &rows, &nrows);
	for (size_t k = 0; rc == 0 && k < nkeys; k++) {
		struct storage_mutation *mu = new_mutation(b, &keys, offs, k);
		rc = mu ? 0 : -1;
		if (rc == 0 && d->column_count == 0) {
			rc = delete_range(b, mu, rs);
			continue;
		}
		for (size_t r = 0; rc == 0 && r < nrows; r++)
			rc = delete_columns(b, mu, d, cols,
					    rows ? rows + r * m->ck_count
						 : NULL);
	}
	buf_free(&keys);
	return rc ? -1 : 0;
}

int cql_dml_build(const struct cql_stmt *s, const struct cql_table *t,
		  const struct cql_value *binds, size_t bind_count,
		  const struct cql_write_ctx *ctx, struct cql_mutations *out)
{
	struct build b = {.t = t,
			  .m = cql_table_meta(t),
			  .binds = binds,
			  .nbinds = bind_count,
			  .ctx = ctx,
			  .out = out};
	int rc;
	out->items = NULL;
	out->count = 0;
	arena_create(&b.a, 0);
	switch (s->kind) {
	case CQL_STMT_INSERT:
		rc = build_insert(&b, &s->u.insert);
		break;
	case CQL_STMT_UPDATE:
		rc = build_update(&b, &s->u.update);
		break;
	case CQL_STMT_DELETE:
		rc = build_delete(&b, &s->u.del);
		break;
	default:
		rc = err_set(ERR_INVALID, "not a data modification statement");
	}
	arena_destroy(&b.a);
	if (rc != 0)
		cql_mutations_free(out);
	return rc;
}

void cql_mutations_free(struct cql_mutations *m)
{
	for (size_t i = 0; i < m->count; i++)
		storage_mutation_delete(m->items[i]);
	free(m->items);
	m->items = NULL;
	m->count = 0;
}
