/*
 * Mutation building for INSERT, UPDATE and DELETE (see dml.h for the
 * semantics). Values are resolved once into an arena (literals serialized
 * for their column's type, bound values taken as they came), then the keys
 * are expanded (IN gives several) and each partition gets one mutation.
 */
#include "client/cql/cql_functions.h"
#include "client/exec/dml_internal.h"

#include "common/err.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values -------------------------------------------------------------- */

int cql_dml_resolve(struct build *b, const struct cql_term *t,
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
	buf_init(&tmp);
	struct cql_fn_ctx fn = {0};
	if (b->ctx->fn)
		fn = *b->ctx->fn;
	fn.binds = b->binds;
	fn.nbinds = b->nbinds;
	int rc = cql_term_serialize_or_unset(t, type, column, &fn, b->ctx->cmp,
					     &tmp);
	if (rc < 0) {
		buf_free(&tmp);
		return -1;
	}
	if (rc == 2) { /* [?, ?] with an element unset: the whole value */
		out->ptr = NULL;
		out->len = UNSET;
	} else if (rc == 1) {
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
	if (p->col->type->kind == STORAGE_TYPE_LIST) {
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

/* A non-frozen user type's cell path: the field's index, a big-endian
 * smallint (Cassandra's UserType.cellPathForField). */
static void udt_field_path(uint8_t path[2], size_t idx)
{
	path[0] = (uint8_t)(idx >> 8);
	path[1] = (uint8_t)idx;
}

/* The index of field `name` of user type `t`, or -1. */
static int udt_field_index(const struct storage_type *t, const char *name)
{
	for (size_t i = 0; t->kind == STORAGE_TYPE_UDT && i < t->count; i++)
		if (strcmp(t->field_names[i], name) == 0)
			return (int)i;
	return -1;
}

/* A whole non-frozen user type value written as one cell per non-null
 * field (UserTypes.Setter); the caller deleted the older cells. */
static int put_udt_fields(struct build *b, struct storage_mutation *mu,
			  int column, struct val v)
{
	const struct storage_column *col = &b->m->columns[column];
	struct cursor c = cursor_make(v.ptr, (size_t)v.len);
	for (size_t i = 0; i < col->type->count && c.pos < c.end; i++) {
		uint32_t len;
		struct slice s;
		if (cursor_be32(&c, &len) != 0)
			return err_set(ERR_INVALID, "Invalid value for %s",
				       col->name);
		if ((int32_t)len < 0)
			continue;
		if (cursor_take(&c, len, &s) != 0)
			return err_set(ERR_INVALID, "Invalid value for %s",
				       col->name);
		uint8_t path[2];
		udt_field_path(path, i);
		if (storage_mutation_put(mu, column, path, 2, s.ptr, len, b->ts,
					 b->ttl, b->ctx->now_sec) != 0)
			return -1;
	}
	return 0;
}

/* Writes `v` into `column` of the current row: replace semantics. */
static int write_value(struct build *b, struct storage_mutation *mu, int column,
		       struct val v)
{
	const struct storage_column *col = &b->m->columns[column];
	bool multicell = storage_type_is_multicell(col->type);
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
	if (col->type->kind == STORAGE_TYPE_UDT)
		return put_udt_fields(b, mu, column, v);
	struct put_ctx p = {mu, column, col, false};
	return each_element(b, v, col->type->kind == STORAGE_TYPE_MAP,
			    col->name, put_element, &p);
}

/* ---- USING --------------------------------------------------------------- */

/* USING TIMESTAMP and TTL (Cassandra's Attributes): an unset timestamp
 * or TTL is not given; a null TTL is 0 (no TTL), a null timestamp is
 * refused. */
static int using_clause(struct build *b, const struct cql_using *u)
{
	const struct storage_type bigint = {.kind = STORAGE_TYPE_BIGINT};
	const struct storage_type integer = {.kind = STORAGE_TYPE_INT};
	b->ts = b->ctx->timestamp;
	b->ttl = b->m->options.default_time_to_live;
	struct val v;
	if (u->timestamp) {
		if (cql_dml_resolve(b, u->timestamp, &bigint, "[timestamp]",
				    &v) != 0)
			return -1;
		if (v.len == 8)
			b->ts = (int64_t)be64_load(v.ptr);
		else if (v.len == -1)
			return err_set(ERR_INVALID,
				       "Invalid null value of timestamp");
		else if (v.len != UNSET)
			return err_set(ERR_INVALID, "Invalid timestamp value");
	}
	/* Long.MIN_VALUE means "no timestamp" inside Cassandra (and
	 * Cassini), so no write may carry it (UpdateParameters). */
	if (b->ts == INT64_MIN)
		return err_set(
			ERR_INVALID,
			"Out of bound timestamp, must be in [%lld, %lld]",
			(long long)INT64_MIN + 1, (long long)INT64_MAX);
	if (u->ttl) {
		if (cql_dml_resolve(b, u->ttl, &integer, "[ttl]", &v) != 0)
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
		} else if (v.len == -1) {
			b->ttl = 0;
		} else if (v.len != UNSET) {
			return err_set(ERR_INVALID, "Invalid TTL value");
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
	struct cql_insert json;
	if (in->json) {
		if (cql_dml_json_insert(&b->a, in, b->t, b->binds, b->nbinds,
					&json, &b->binds, &b->nbinds) != 0)
			return -1;
		in = &json;
	}
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
					       "The column names contains "
					       "duplicates");
		cols[i] = c;
		const struct storage_column *col = &m->columns[c];
		if (cql_dml_resolve(b, in->values[i], col->type, col->name,
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
	struct buf keys;
	size_t *offs, nkeys;
	buf_init(&keys);
	int rc = cql_dml_partition_keys(b, rs, &keys, &offs, &nkeys);
	struct slice *rows = NULL;
	size_t nrows = 1;
	/* Only static columns: the clustering may be omitted. Given, the
	 * INSERT writes the row too, its primary-key liveness included
	 * (Cassandra's UpdateStatement: an INSERT names a row). */
	bool ck_given = false;
	for (size_t i = 0; i < m->ck_count; i++)
		ck_given |= rs[m->ck[i]].eq;
	bool need_rows =
		m->ck_count == 0 || any_regular || !any_static || ck_given;
	if (rc == 0 && need_rows)
		rc = cql_dml_clusterings(b, rs, &rows, &nrows);
	if (rc == 0)
		rc = using_clause(b, &in->using);
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

/* ---- operations ---------------------------------------------------------- */

/* A term as Cassandra prints it in its messages (Term.Raw's text): 1,
 * 'a', [1, 2], {k: v}, ?, now(). */
static void term_text(const struct cql_term *t, struct buf *out)
{
	switch (t->kind) {
	case CQL_TERM_NULL:
		buf_append(out, "null", 4);
		return;
	case CQL_TERM_BIND:
		buf_append(out, "?", 1);
		return;
	case CQL_TERM_STRING:
		buf_append(out, "'", 1);
		buf_append(out, t->text, t->len);
		buf_append(out, "'", 1);
		return;
	case CQL_TERM_BLOB:
		buf_append(out, "0x", 2);
		buf_append(out, t->text, t->len);
		return;
	case CQL_TERM_INTEGER:
	case CQL_TERM_FLOAT:
		if (t->negative)
			buf_append(out, "-", 1);
		buf_append(out, t->text, t->len);
		return;
	case CQL_TERM_BOOLEAN:
	case CQL_TERM_UUID:
		buf_append(out, t->text, t->len);
		return;
	case CQL_TERM_HINT: {
		char text[200];
		cql_fn_term_text(t, text, sizeof(text));
		buf_append(out, text, strlen(text));
		return;
	}
	default:
		break;
	}
	const char *open =
		t->kind == CQL_TERM_LIST ? "["
		: t->kind == CQL_TERM_TUPLE || t->kind == CQL_TERM_FUNCTION
			? "("
			: "{";
	const char *close = *open == '[' ? "]" : *open == '(' ? ")" : "}";
	if (t->kind == CQL_TERM_FUNCTION)
		buf_append(out, t->text, t->len);
	buf_append(out, open, 1);
	for (size_t i = 0; i < t->count; i++) {
		if (i)
			buf_append(out,
				   t->kind == CQL_TERM_MAP && i % 2 ? ": "
								    : ", ",
				   2);
		term_text(t->items[i], out);
	}
	buf_append(out, close, 1);
}

/* The operation as Cassandra prints it: "v = v + 1" and, for a prepend,
 * "l = [1] - l" (its Operation.Prepend prints a '-'). */
static void op_text(const struct cql_assignment *a, struct buf *out)
{
	const char *c = a->target.name;
	buf_append(out, c, strlen(c));
	if (a->target.field) {
		buf_append(out, ".", 1);
		buf_append(out, a->target.field, strlen(a->target.field));
	}
	if (a->target.element) {
		buf_append(out, "[", 1);
		term_text(a->target.element, out);
		buf_append(out, "]", 1);
	}
	buf_append(out, " = ", 3);
	if (a->kind == CQL_ASSIGN_PREPEND) {
		term_text(a->value, out);
		buf_append(out, " - ", 3);
		buf_append(out, c, strlen(c));
	} else if (a->kind == CQL_ASSIGN_SET) {
		term_text(a->value, out);
	} else {
		buf_append(out, c, strlen(c));
		buf_append(out, a->kind == CQL_ASSIGN_ADD ? " + " : " - ", 3);
		term_text(a->value, out);
	}
	buf_append(out, "", 1); /* NUL */
}

static int op_error(const struct cql_assignment *a, const char *what,
		    const char *column)
{
	struct buf t;
	buf_init(&t);
	op_text(a, &t);
	err_set(ERR_INVALID, "Invalid operation (%s) for %s column %s",
		t.data ? (const char *)t.data : "?", what, column);
	buf_free(&t);
	return -1;
}

/* A counter table: its non-key columns are counters (CREATE TABLE
 * refuses a mix). */
static bool counter_table(const struct storage_table_meta *m)
{
	for (size_t i = 0; i < m->column_count; i++)
		if (m->columns[i].type->kind == STORAGE_TYPE_COUNTER)
			return true;
	return false;
}

bool cql_dml_counter_table(const struct cql_table *t)
{
	return counter_table(cql_table_meta(t));
}

/* ModificationStatement.validate and UpdateStatement.ParsedInsert for
 * counter tables. */
static int counter_check(const struct cql_stmt *s,
			 const struct storage_table_meta *m)
{
	if (!counter_table(m))
		return 0;
	const struct cql_using *u = NULL;
	if (s->kind == CQL_STMT_INSERT)
		return err_set(ERR_INVALID,
			       "INSERT statements are not allowed on counter "
			       "tables, use UPDATE instead");
	if (s->kind == CQL_STMT_UPDATE)
		u = &s->u.update.using;
	else if (s->kind == CQL_STMT_DELETE)
		u = &s->u.del.using;
	if (u && u->timestamp)
		return err_set(ERR_INVALID, "Cannot provide custom timestamp "
					    "for counter updates");
	if (u && u->ttl)
		return err_set(ERR_INVALID,
			       "Cannot provide custom TTL for counter updates");
	return 0;
}

/* Whether an assignment suits its column's type, with Cassandra's
 * messages (Operation.*.prepare); needs no values, so PREPARE checks it
 * too. */
static int check_assignment(const struct storage_column *col,
			    const struct cql_assignment *a)
{
	const struct storage_type *ty = col->type;
	bool collection = storage_type_is_collection(ty->kind);
	bool multicell = collection && !ty->frozen;
	if (a->target.field) {
		/* u.f = v (UserTypes.SetterByField) */
		if (ty->kind != STORAGE_TYPE_UDT)
			return op_error(a, "non-UDT", col->name);
		if (ty->frozen)
			return op_error(a, "frozen UDT", col->name);
		if (udt_field_index(ty, a->target.field) < 0)
			return err_set(ERR_INVALID,
				       "UDT column %s does not have a field "
				       "named %s",
				       col->name, a->target.field);
		if (a->kind != CQL_ASSIGN_SET)
			return op_error(a, "non counter", col->name);
		return 0;
	}
	if (a->target.element) {
		if (!collection)
			return op_error(a, "non collection", col->name);
		if (!multicell)
			return op_error(a, "frozen collection", col->name);
		if (ty->kind == STORAGE_TYPE_SET)
			return op_error(a, "set", col->name);
		if (ty->kind == STORAGE_TYPE_LIST)
			return err_set(
				ERR_UNSUPPORTED,
				"Setting a list element by index needs a "
				"read before the write, which Cassini "
				"does not do yet");
		return 0;
	}
	const struct cql_term *v = a->value;
	bool literal = v->kind == CQL_TERM_LIST || v->kind == CQL_TERM_SET ||
		       v->kind == CQL_TERM_MAP;
	if (ty->kind == STORAGE_TYPE_COUNTER) {
		if (a->kind == CQL_ASSIGN_SET)
			return err_set(ERR_INVALID,
				       "Cannot set the value of counter column "
				       "%s (counters can only be "
				       "incremented/decremented, not set)",
				       col->name);
		if (a->kind == CQL_ASSIGN_PREPEND)
			return op_error(a, "non list", col->name);
		return 0;
	}
	switch (a->kind) {
	case CQL_ASSIGN_SET:
		return 0;
	case CQL_ASSIGN_PREPEND:
		if (ty->kind != STORAGE_TYPE_LIST)
			return op_error(a, "non list", col->name);
		if (!multicell)
			return op_error(a, "frozen list", col->name);
		return 0;
	case CQL_ASSIGN_ADD:
	case CQL_ASSIGN_REMOVE:
		if (!collection)
			return op_error(a, "non counter", col->name);
		if (!multicell)
			return op_error(a, "frozen collection", col->name);
		if (ty->kind == STORAGE_TYPE_MAP && literal &&
		    v->kind != (a->kind == CQL_ASSIGN_ADD ? CQL_TERM_MAP
							  : CQL_TERM_SET) &&
		    v->count > 0) {
			struct buf t;
			buf_init(&t);
			term_text(v, &t);
			buf_append(&t, "", 1);
			err_set(ERR_INVALID,
				"Value for a map %s has to be a %s, but was: "
				"'%s'",
				a->kind == CQL_ASSIGN_ADD ? "addition"
							  : "substraction",
				a->kind == CQL_ASSIGN_ADD ? "map" : "set",
				t.data ? (const char *)t.data : "?");
			buf_free(&t);
			return -1;
		}
		if (a->kind == CQL_ASSIGN_REMOVE &&
		    ty->kind == STORAGE_TYPE_LIST)
			return err_set(ERR_UNSUPPORTED,
				       "Removing list elements by value needs "
				       "a read before the write, which Cassini "
				       "does not do yet");
		return 0;
	}
	return 0;
}

static int apply_assignment(struct build *b, struct storage_mutation *mu,
			    const struct cql_assignment *a, int c)
{
	const struct storage_column *col = &b->m->columns[c];
	const struct storage_type *ty = col->type;
	struct val v;
	if (a->target.field) {
		/* u.f = v (check_assignment ran) */
		int f = udt_field_index(ty, a->target.field);
		uint8_t path[2];
		udt_field_path(path, (size_t)f);
		if (cql_dml_resolve(b, a->value, ty->sub[f], col->name, &v) !=
		    0)
			return -1;
		if (v.len == UNSET)
			return 0;
		if (v.len < 0)
			return storage_mutation_delete_cell(
				mu, c, path, 2, b->ts, b->ctx->now_sec);
		return storage_mutation_put(mu, c, path, 2, v.ptr,
					    (size_t)v.len, b->ts, b->ttl,
					    b->ctx->now_sec);
	}
	if (a->target.element) {
		/* m[k] = v (Maps.SetterByKey; check_assignment ran) */
		struct val k;
		if (cql_dml_resolve(b, a->target.element, ty->sub[0], col->name,
				    &k) != 0 ||
		    cql_dml_resolve(b, a->value, ty->sub[1], col->name, &v) !=
			    0)
			return -1;
		if (k.len == UNSET)
			return err_set(ERR_INVALID, "Invalid unset map key");
		if (k.len < 0)
			return err_set(ERR_INVALID, "Invalid null map key");
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
	const struct storage_type *operand = ty;
	const struct storage_type *key_sub[1] = {ty->count ? ty->sub[0] : ty};
	struct storage_type keys = {
		.kind = STORAGE_TYPE_SET, .count = 1, .sub = key_sub};
	if (a->kind == CQL_ASSIGN_REMOVE && ty->kind == STORAGE_TYPE_MAP)
		operand = &keys;
	if (cql_dml_resolve(b, a->value, operand, col->name, &v) != 0)
		return -1;
	if (ty->kind == STORAGE_TYPE_COUNTER) {
		/* Constants.Adder / Substracter: unset does nothing */
		bool add = a->kind == CQL_ASSIGN_ADD;
		if (v.len == UNSET)
			return 0;
		if (v.len < 0)
			return err_set(ERR_INVALID,
				       "Invalid null value for counter %s",
				       add ? "increment" : "decrement");
		if (v.len != 8)
			return err_set(ERR_INVALID,
				       "Expected 8 or 0 byte long (%d)",
				       (int)v.len);
		int64_t d = (int64_t)be64_load(v.ptr);
		if (!add && d == INT64_MIN)
			return err_set(ERR_INVALID,
				       "The negation of %lld overflows "
				       "supported counter precision (signed 8 "
				       "bytes integer)",
				       (long long)d);
		return storage_mutation_put_counter_delta(mu, c, add ? d : -d);
	}
	if (a->kind == CQL_ASSIGN_SET)
		return write_value(b, mu, c, v);
	/* Adding, removing or prepending null or unset does nothing
	 * (Lists.Appender, Sets.Adder, Maps.Putter, ...). */
	if (v.len < 0)
		return 0;
	if (a->kind == CQL_ASSIGN_PREPEND)
		return prepend_elements(b, mu, c, v, col->name);
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
		if (check_assignment(&m->columns[c], &up->assignments[i]) != 0)
			return -1;
	}
	if (only_static &&
	    cql_dml_where_names_clustering(b, up->where, up->where_count))
		return err_set(
			ERR_INVALID,
			"Invalid restrictions on clustering columns since "
			"the UPDATE statement modifies only static "
			"columns");
	if (cql_dml_restrict_where(b, up->where, up->where_count, rs, false) !=
		    0 ||
	    using_clause(b, &up->using) != 0)
		return -1;
	struct buf keys;
	size_t *offs, nkeys;
	struct slice *rows = NULL;
	size_t nrows = 0;
	buf_init(&keys);
	int rc = cql_dml_partition_keys(b, rs, &keys, &offs, &nkeys);
	if (rc == 0 && !only_static)
		rc = cql_dml_clusterings(b, rs, &rows, &nrows);
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
/* DELETE without columns on a clustering prefix of = (or IN: one range
 * for each combination) and an optional final slice. */
static int delete_range(struct build *b, struct storage_mutation *mu,
			struct restr *rs)
{
	const struct storage_table_meta *m = b->m;
	struct slice start[32], end[32];
	size_t np = 0, combos = 1;
	for (; np < m->ck_count && rs[m->ck[np]].eq; np++) {
		combos *= rs[m->ck[np]].n;
		if (combos > MAX_KEYS)
			return err_set(ERR_INVALID,
				       "Too many rows in IN restrictions (more "
				       "than %d)",
				       MAX_KEYS);
	}
	const struct restr *last = np < m->ck_count ? &rs[m->ck[np]] : NULL;
	for (size_t j = np + 1; last && j < m->ck_count; j++) {
		const struct restr *later = &rs[m->ck[j]];
		if (later->eq || later->has_lo || later->has_hi)
			return err_set(ERR_INVALID,
				       "PRIMARY KEY column \"%s\" cannot be "
				       "restricted as preceding column \"%s\" "
				       "is not restricted",
				       m->columns[m->ck[j]].name,
				       m->columns[m->ck[np]].name);
	}
	for (size_t k = 0; k < combos; k++) {
		size_t idx = k;
		for (size_t i = np; i-- > 0;) {
			const struct restr *r = &rs[m->ck[i]];
			struct val v = r->vals[idx % r->n];
			idx /= r->n;
			if (cql_dml_key_value_ok(&m->columns[m->ck[i]], v) != 0)
				return -1;
			start[i] = end[i] = slice_make(v.ptr, (size_t)v.len);
		}
		size_t nstart = np, nend = np;
		bool start_incl = true, end_incl = true;
		if (last) {
			/* Bounds are in clustering order: a DESC column's
			 * lowest value is the end of its range. */
			bool desc = m->columns[m->ck[np]].desc;
			bool has_first = desc ? last->has_hi : last->has_lo;
			bool has_last = desc ? last->has_lo : last->has_hi;
			if (has_first) {
				const struct val *v =
					desc ? &last->hi : &last->lo;
				start[nstart++] =
					slice_make(v->ptr, (size_t)v->len);
				start_incl =
					desc ? last->hi_incl : last->lo_incl;
			}
			if (has_last) {
				const struct val *v =
					desc ? &last->lo : &last->hi;
				end[nend++] =
					slice_make(v->ptr, (size_t)v->len);
				end_incl = desc ? last->lo_incl : last->hi_incl;
			}
		}
		int rc;
		if (nstart == m->ck_count && nend == m->ck_count &&
		    np == m->ck_count)
			rc = storage_mutation_set_row(mu, start, nstart) ||
			     storage_mutation_delete_row(mu, b->ts,
							 b->ctx->now_sec);
		else if (nstart == 0 && nend == 0)
			rc = storage_mutation_delete_partition(mu, b->ts,
							       b->ctx->now_sec);
		else
			rc = storage_mutation_delete_range(
				mu, start, nstart, start_incl, end, nend,
				end_incl, b->ts, b->ctx->now_sec);
		if (rc)
			return -1;
	}
	return 0;
}

/* DELETE c[e]: what Cassandra's ElementDeletion accepts. */
static int check_deletion(const struct storage_column *col,
			  const struct cql_column_ref *ref)
{
	if (ref->field) {
		/* DELETE u.f (Operation.FieldDeletion) */
		if (col->type->kind != STORAGE_TYPE_UDT)
			return err_set(ERR_INVALID,
				       "Invalid field deletion operation for "
				       "non-UDT column %s",
				       col->name);
		if (col->type->frozen)
			return err_set(ERR_INVALID,
				       "Frozen UDT column %s does not support "
				       "field deletion",
				       col->name);
		if (udt_field_index(col->type, ref->field) < 0)
			return err_set(ERR_INVALID,
				       "UDT column %s does not have a field "
				       "named %s",
				       col->name, ref->field);
		return 0;
	}
	if (!ref->element)
		return 0;
	if (!storage_type_is_collection(col->type->kind))
		return err_set(ERR_INVALID,
			       "Invalid deletion operation for non collection "
			       "column %s",
			       col->name);
	if (col->type->frozen)
		return err_set(ERR_INVALID,
			       "Invalid deletion operation for frozen "
			       "collection column %s",
			       col->name);
	if (col->type->kind == STORAGE_TYPE_LIST)
		return err_set(ERR_UNSUPPORTED,
			       "Deleting a list element by index needs a read "
			       "before the write, which Cassini does not do "
			       "yet");
	return 0;
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
				storage_type_is_multicell(col->type) ||
				col->type->kind == STORAGE_TYPE_COUNTER;
			if (ref->field) {
				uint8_t path[2];
				udt_field_path(path,
					       (size_t)udt_field_index(
						       col->type, ref->field));
				rc = storage_mutation_delete_cell(
					mu, cols[i], path, 2, b->ts,
					b->ctx->now_sec);
			} else if (ref->element) {
				/* s[e], m[k] (check_deletion ran) */
				bool is_map =
					col->type->kind == STORAGE_TYPE_MAP;
				struct val k;
				if (cql_dml_resolve(b, ref->element,
						    col->type->sub[0],
						    col->name, &k) != 0)
					return -1;
				if (k.len == -1)
					return err_set(ERR_INVALID,
						       is_map ? "Invalid null "
								"map key"
							      : "Invalid null "
								"set element");
				if (k.len == UNSET) {
					if (is_map)
						return err_set(ERR_INVALID,
							       "Invalid unset "
							       "map key");
					continue; /* deletes nothing */
				}
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
	bool only_static = true;
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
		only_static &= kind == STORAGE_COLUMN_STATIC;
		if (check_deletion(&m->columns[c], &d->columns[i]) != 0)
			return -1;
	}
	if (d->column_count && only_static &&
	    cql_dml_where_names_clustering(b, d->where, d->where_count))
		return err_set(
			ERR_INVALID,
			"Invalid restrictions on clustering columns since "
			"the DELETE statement modifies only static "
			"columns");
	if (cql_dml_restrict_where(b, d->where, d->where_count, rs, true) !=
		    0 ||
	    using_clause(b, &d->using) != 0)
		return -1;
	/* A deleted counter cannot be reused (Cassandra's rule): its
	 * tombstone shadows every shard, later increments included. */
	if (counter_table(m))
		b->ts = STORAGE_COUNTER_TOMBSTONE_TS;
	struct buf keys;
	size_t *offs, nkeys;
	buf_init(&keys);
	int rc = cql_dml_partition_keys(b, rs, &keys, &offs, &nkeys);
	bool full_ck = true;
	for (size_t i = 0; i < m->ck_count; i++)
		full_ck &= rs[m->ck[i]].eq;
	struct slice *rows = NULL;
	size_t nrows = 1;
	/* Whole rows (IN on the clustering included) or cells of rows;
	 * otherwise a range or the partition. */
	bool by_rows = full_ck && (d->column_count || m->ck_count);
	if (rc == 0 && by_rows)
		rc = cql_dml_clusterings(b, rs, &rows, &nrows);
	for (size_t k = 0; rc == 0 && k < nkeys; k++) {
		struct storage_mutation *mu = new_mutation(b, &keys, offs, k);
		rc = mu ? 0 : -1;
		if (rc == 0 && d->column_count == 0 && !by_rows) {
			rc = delete_range(b, mu, rs);
			continue;
		}
		if (d->column_count == 0) {
			for (size_t r = 0; rc == 0 && r < nrows; r++)
				rc = storage_mutation_set_row(
					     mu, rows + r * m->ck_count,
					     m->ck_count) ||
				     storage_mutation_delete_row(
					     mu, b->ts, b->ctx->now_sec);
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

/* Forms Cassandra accepts and Cassini cannot run yet (they need a read
 * before the write) prepare, and are refused when executed. */
int cql_dml_check(const struct cql_stmt *s, const struct cql_table *t)
{
	struct build b = {.t = t, .m = cql_table_meta(t)};
	const struct storage_table_meta *m = b.m;
	if (counter_check(s, m) != 0)
		return -1;
	if (s->kind == CQL_STMT_UPDATE) {
		const struct cql_update *up = &s->u.update;
		bool only_static = true;
		for (size_t i = 0; i < up->assignment_count; i++) {
			int c = cql_table_column(
				t, up->assignments[i].target.name);
			if (c < 0)
				continue; /* answered with the values */
			only_static &=
				m->columns[c].kind == STORAGE_COLUMN_STATIC;
			if (m->columns[c].kind ==
				    STORAGE_COLUMN_PARTITION_KEY ||
			    m->columns[c].kind == STORAGE_COLUMN_CLUSTERING)
				continue;
			if (check_assignment(&m->columns[c],
					     &up->assignments[i]) != 0 &&
			    err_code() != ERR_UNSUPPORTED)
				return -1;
		}
		if (only_static && up->assignment_count &&
		    cql_dml_where_names_clustering(&b, up->where,
						   up->where_count))
			return err_set(ERR_INVALID,
				       "Invalid restrictions on clustering "
				       "columns since the UPDATE statement "
				       "modifies only static columns");
	} else if (s->kind == CQL_STMT_DELETE) {
		const struct cql_delete *d = &s->u.del;
		bool only_static = true;
		for (size_t i = 0; i < d->column_count; i++) {
			int c = cql_table_column(t, d->columns[i].name);
			if (c < 0 ||
			    m->columns[c].kind ==
				    STORAGE_COLUMN_PARTITION_KEY ||
			    m->columns[c].kind == STORAGE_COLUMN_CLUSTERING) {
				only_static = false;
				continue;
			}
			only_static &=
				m->columns[c].kind == STORAGE_COLUMN_STATIC;
			if (check_deletion(&m->columns[c], &d->columns[i]) !=
				    0 &&
			    err_code() != ERR_UNSUPPORTED)
				return -1;
		}
		if (d->column_count && only_static &&
		    cql_dml_where_names_clustering(&b, d->where,
						   d->where_count))
			return err_set(ERR_INVALID,
				       "Invalid restrictions on clustering "
				       "columns since the DELETE statement "
				       "modifies only static columns");
	}
	return 0;
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
	if (counter_check(s, b.m) != 0)
		return -1;
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
