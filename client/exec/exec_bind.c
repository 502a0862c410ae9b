/*
 * Bind markers: the names and types of a statement's markers (for
 * PREPARE's metadata), the checks of the values bound to them, and the
 * mapping of a request's values onto them.
 */
#define LOG_MODULE "client"
#include "client/exec/exec_internal.h"

#include "client/schema/describe.h"
#include "client/schema/system_tables.h"
#include "common/log.h"
#include "common/murmur3.h"

#include <stdlib.h>
#include <string.h>

static const struct storage_type *simple(uint16_t kind)
{
	const struct storage_type *t = storage_type_simple(kind);
	return t ? t : storage_type_simple(STORAGE_TYPE_BLOB);
}

/* set<elem> in the statement's arena (a map's `m = m - ?`), or NULL. */
static const struct storage_type *set_of(struct arena *a,
					 const struct storage_type *elem)
{
	struct storage_type *t = arena_alloc(a, sizeof(*t));
	const struct storage_type **sub = arena_alloc(a, sizeof(*sub));
	if (!t || !sub)
		return NULL;
	sub[0] = elem;
	*t = (struct storage_type){
		.kind = STORAGE_TYPE_SET, .count = 1, .sub = sub};
	return t;
}

static void bind_set(struct bind_ctx *x, const struct cql_term *t,
		     const char *name, const struct storage_type *type);

/* Markers in a call's arguments take the resolved function's argument
 * types, named arg0(system.f); a hinted one, (int)?, the hint's type
 * (Cassandra's FunctionCall and TypeCast). A call that does not resolve
 * fails the PREPARE, as in Cassandra. */
static void bind_call(struct bind_ctx *x, const struct cql_term *t)
{
	if (t->kind == CQL_TERM_HINT) {
		bool failed = false;
		uint16_t k = cql_fn_term_type(t, &failed);
		const struct cql_term *in = t->items[0];
		if (failed) {
			x->failed = true;
			return;
		}
		char *text = arena_alloc(x->a, 200);
		if (text)
			cql_fn_term_text(t, text, 200);
		if (in->kind == CQL_TERM_BIND)
			bind_set(x, in, text ? text : "?", simple(k));
		else
			bind_call(x, in);
		return;
	}
	if (t->kind != CQL_TERM_FUNCTION || strcmp(t->text, "token") == 0)
		return;
	if (strcmp(t->text, "fromjson") == 0 ||
	    strcmp(t->text, "from_json") == 0) {
		/* fromJson(?): a text, whatever its receiver */
		if (t->count == 1)
			bind_set(x, t->items[0], "arg0(system.fromjson)",
				 simple(STORAGE_TYPE_TEXT));
		return;
	}
	if (strcmp(t->text, "tojson") == 0 || strcmp(t->text, "to_json") == 0) {
		err_set(ERR_INVALID,
			"toJson() may only be used within the selection "
			"clause");
		x->failed = true;
		return;
	}
	struct cql_fn f;
	if (cql_fn_term_resolve(t, &f) != 0) {
		x->failed = true;
		return;
	}
	if (!f.nargs)
		return;
	const struct cql_term *a = t->items[0];
	if (a->kind == CQL_TERM_BIND) {
		size_t n = strlen(f.name) + 20;
		char *name = arena_alloc(x->a, n);
		if (name)
			snprintf(name, n, "arg0(system.%s)", f.name);
		bind_set(x, a, name ? name : "arg0", simple(f.arg));
	} else {
		bind_call(x, a);
	}
}

/* pre + the receiver's name + post: value(l), key(m), u.f. */
static const char *spec_name(struct bind_ctx *x, const char *pre,
			     const char *name, const char *post)
{
	size_t n = strlen(pre) + strlen(name) + strlen(post) + 1;
	char *s = arena_alloc(x->a, n);
	if (!s)
		return name;
	snprintf(s, n, "%s%s%s", pre, name, post);
	return s;
}

/*
 * Markers inside a literal of `type` ([?, ?], {?: ?}, (?, ?), {f: ?}):
 * each takes its element's type and the receiver names Cassandra gives
 * them (Lists/Sets/Maps.valueSpecOf / keySpecOf: value(l), key(m);
 * Tuples.componentSpecOf: t[0]; UserTypes.fieldSpecOf: u.f), nested as
 * deep as the literal is. False when t is no literal of that shape.
 */
static bool bind_literal(struct bind_ctx *x, const struct cql_term *t,
			 const char *name, const struct storage_type *type)
{
	uint16_t k = type->kind;
	bool seq = t->kind == CQL_TERM_LIST &&
		   (k == STORAGE_TYPE_LIST || k == STORAGE_TYPE_VECTOR);
	bool set = t->kind == CQL_TERM_SET && k == STORAGE_TYPE_SET;
	if (seq || set) {
		const char *n = spec_name(x, "value(", name, ")");
		for (size_t i = 0; i < t->count; i++)
			bind_set(x, t->items[i], n, type->sub[0]);
		return true;
	}
	if (t->kind == CQL_TERM_MAP && k == STORAGE_TYPE_MAP) {
		const char *kn = spec_name(x, "key(", name, ")");
		const char *vn = spec_name(x, "value(", name, ")");
		for (size_t i = 0; i + 1 < t->count; i += 2) {
			bind_set(x, t->items[i], kn, type->sub[0]);
			bind_set(x, t->items[i + 1], vn, type->sub[1]);
		}
		return true;
	}
	if (t->kind == CQL_TERM_TUPLE && k == STORAGE_TYPE_TUPLE) {
		for (size_t i = 0; i < t->count && i < type->count; i++) {
			char idx[32];
			snprintf(idx, sizeof(idx), "[%zu]", i);
			bind_set(x, t->items[i], spec_name(x, "", name, idx),
				 type->sub[i]);
		}
		return true;
	}
	if (t->kind == CQL_TERM_UDT && k == STORAGE_TYPE_UDT) {
		for (size_t i = 0; i < t->count; i++) {
			size_t f = 0;
			while (f < type->count &&
			       strcmp(type->field_names[f], t->names[i]) != 0)
				f++;
			if (f == type->count)
				continue; /* refused when the value is built */
			bind_set(x, t->items[i],
				 spec_name(x, "", name,
					   spec_name(x, ".", t->names[i], "")),
				 type->sub[f]);
		}
		return true;
	}
	return false;
}

static void bind_set(struct bind_ctx *x, const struct cql_term *t,
		     const char *name, const struct storage_type *type)
{
	if (t && (t->kind == CQL_TERM_FUNCTION || t->kind == CQL_TERM_HINT)) {
		bind_call(x, t);
		return;
	}
	if (t && type && t->kind != CQL_TERM_BIND &&
	    bind_literal(x, t, name, type))
		return;
	if (!t || t->kind != CQL_TERM_BIND || t->bind_index >= x->nb || !type)
		return;
	x->b[t->bind_index] =
		(struct bind_spec){t->text ? t->text : name, type, false, true};
}

/* bind_set with the name `fn(column)`: a marker, or the markers inside a
 * literal, named after it (value(m)'s list: value(value(m))). */
static void bind_set_of(struct bind_ctx *x, const struct cql_term *t,
			const char *fn, const char *column,
			const struct storage_type *type)
{
	if (!t || (t->kind == CQL_TERM_BIND && t->bind_index >= x->nb))
		return;
	size_t n = strlen(fn) + strlen(column) + 3;
	char *name = arena_alloc(x->a, n);
	if (name)
		snprintf(name, n, "%s(%s)", fn, column);
	bind_set(x, t, name ? name : column, type);
}

/* A term as Cassandra's messages quote it: ?, :name, 'text', 1, ... */
static const char *term_text(struct arena *a, const struct cql_term *t)
{
	char *s;
	if (!t)
		return "";
	switch (t->kind) {
	case CQL_TERM_BIND:
		if (!t->text)
			return "?";
		s = arena_alloc(a, strlen(t->text) + 2);
		if (s)
			sprintf(s, ":%s", t->text);
		return s ? s : "?";
	case CQL_TERM_NULL:
		return "null";
	case CQL_TERM_STRING:
	case CQL_TERM_INTEGER:
	case CQL_TERM_FLOAT:
	case CQL_TERM_BOOLEAN:
	case CQL_TERM_UUID:
	case CQL_TERM_BLOB: {
		bool quote = t->kind == CQL_TERM_STRING;
		size_t n = t->len > 64 ? 64 : t->len;
		s = arena_alloc(a, n + 6);
		if (s)
			sprintf(s, "%s%s%s%.*s%s", quote ? "'" : "",
				t->negative ? "-" : "",
				t->kind == CQL_TERM_BLOB ? "0x" : "", (int)n,
				t->text ? t->text : "", quote ? "'" : "");
		return s ? s : "?";
	}
	default:
		return "...";
	}
}

static int bind_relations(struct bind_ctx *x, const struct cql_relation *rels,
			  size_t n)
{
	const struct storage_table_meta *m = cql_table_meta(x->t);
	for (size_t i = 0; i < n; i++) {
		const struct cql_relation *r = &rels[i];
		if (r->kind == CQL_REL_TOKEN) {
			const struct cql_term *v = r->value;
			bind_set(x, v, "partition key token",
				 simple(STORAGE_TYPE_BIGINT));
			/* token(k) > token(?): the key's own columns */
			for (size_t k = 0; v->kind == CQL_TERM_FUNCTION &&
					   k < v->count && k < m->pk_count;
			     k++)
				bind_set(x, v->items[k],
					 m->columns[m->pk[k]].name,
					 m->columns[m->pk[k]].type);
			continue;
		}
		if (r->kind == CQL_REL_TUPLE &&
		    r->value->kind == CQL_TERM_TUPLE) {
			/* (c1, c2) > (?, ?): each its column's */
			for (size_t k = 0;
			     k < r->value->count && k < r->column_count; k++) {
				int c = cql_table_column(x->t, r->columns[k]);
				if (c >= 0)
					bind_set(x, r->value->items[k],
						 r->columns[k],
						 m->columns[c].type);
			}
			continue;
		}
		if (r->kind != CQL_REL_COLUMN)
			continue;
		int c = cql_table_column(x->t, r->columns[0]);
		if (c < 0)
			continue;
		const char *name = m->columns[c].name;
		const struct storage_type *ty = m->columns[c].type;
		if (r->element) { /* m[k] = v: key(m), value(m) */
			if (cql_where_element_check(&m->columns[c], r) != 0)
				return -1;
			bind_set_of(x, r->element, "key", name, ty->sub[0]);
			bind_set_of(x, r->value, "value", name, ty->sub[1]);
			continue;
		}
		if (r->op == CQL_OP_IN) {
			if (r->value->kind == CQL_TERM_BIND) {
				bind_set_of(x, r->value, "in", name, ty);
				if (r->value->bind_index < x->nb)
					x->b[r->value->bind_index].in_list =
						true;
			} else if (r->value->kind == CQL_TERM_TUPLE) {
				for (size_t k = 0; k < r->value->count; k++)
					bind_set(x, r->value->items[k], name,
						 ty);
			}
			continue;
		}
		if (r->op == CQL_OP_CONTAINS_KEY) {
			if (ty->kind != STORAGE_TYPE_MAP)
				return err_set(ERR_INVALID,
					       "Cannot use CONTAINS KEY on "
					       "non-map column %s",
					       name);
			bind_set_of(x, r->value, "key", name, ty->sub[0]);
			continue;
		}
		if (r->op == CQL_OP_CONTAINS) {
			if (!storage_type_is_collection(ty->kind))
				return err_set(ERR_INVALID,
					       "Cannot use CONTAINS on "
					       "non-collection column %s",
					       name);
			bool map = ty->kind == STORAGE_TYPE_MAP;
			bind_set_of(x, r->value, "value", name,
				    ty->sub[map ? 1 : 0]);
			continue;
		}
		bind_set(x, r->value, name, ty);
	}
	return 0;
}

void cql_exec_bind_using(struct bind_ctx *x, const struct cql_using *u)
{
	bind_set(x, u->ttl, "[ttl]", simple(STORAGE_TYPE_INT));
	bind_set(x, u->timestamp, "[timestamp]", simple(STORAGE_TYPE_BIGINT));
}

/* The value of `c = v`, `c = c + v`, `c = v + c`, `c = c - v` (a map's
 * `m = m - v` takes a set of its keys, Operation.Substraction), INSERT's
 * values (kind CQL_ASSIGN_SET, no element) and `c[k] = v`, whose key is
 * key(m) for a map, idx(l) for a list (Operation.SetElement). */
static int bind_assignment(struct bind_ctx *x, const struct cql_column_ref *ref,
			   enum cql_assign_kind kind,
			   const struct cql_term *value)
{
	int c = cql_table_column(x->t, ref->name);
	if (c < 0)
		return 0;
	const struct storage_column *col = &cql_table_meta(x->t)->columns[c];
	const struct storage_type *ty = col->type;
	if (ref->field) {
		/* u.f = ?: named like the field (UserTypes.SetterByField) */
		for (size_t i = 0; ty->kind == STORAGE_TYPE_UDT &&
				   !ty->frozen && i < ty->count;
		     i++)
			if (strcmp(ty->field_names[i], ref->field) == 0) {
				size_t n = strlen(col->name) +
					   strlen(ref->field) + 2;
				char *name = arena_alloc(x->a, n);
				if (!name)
					return -1;
				snprintf(name, n, "%s.%s", col->name,
					 ref->field);
				bind_set(x, value, name, ty->sub[i]);
			}
		return 0; /* otherwise refused by the statement's checks */
	}
	if (ref->element) {
		const char *why = !storage_type_is_collection(ty->kind)
					  ? "non collection"
				  : ty->frozen ? "frozen collection"
				  : ty->kind == STORAGE_TYPE_SET ? "set"
								 : NULL;
		if (why)
			return err_set(ERR_INVALID,
				       "Invalid operation (%s[%s] = %s) for %s "
				       "column %s",
				       col->name, term_text(x->a, ref->element),
				       term_text(x->a, value), why, col->name);
		bool map = ty->kind == STORAGE_TYPE_MAP;
		bind_set_of(x, ref->element, map ? "key" : "idx", col->name,
			    map ? ty->sub[0] : simple(STORAGE_TYPE_INT));
		bind_set_of(x, value, "value", col->name, ty->sub[map ? 1 : 0]);
		return 0;
	}
	if (kind == CQL_ASSIGN_REMOVE && ty->kind == STORAGE_TYPE_MAP)
		ty = set_of(x->a, ty->sub[0]);
	bind_set(x, value, col->name, ty);
	return 0;
}

/* DELETE c[k]: idx(l), value(s) or key(m) (Operation.ElementDeletion). */
static int bind_deletion(struct bind_ctx *x, const struct cql_column_ref *ref)
{
	int c = cql_table_column(x->t, ref->name);
	if (c < 0 || !ref->element)
		return 0;
	const struct storage_column *col = &cql_table_meta(x->t)->columns[c];
	const struct storage_type *ty = col->type;
	if (!storage_type_is_collection(ty->kind) || ty->frozen)
		return err_set(ERR_INVALID,
			       "Invalid deletion operation for %s column %s",
			       ty->frozen ? "frozen collection"
					  : "non collection",
			       col->name);
	switch (ty->kind) {
	case STORAGE_TYPE_LIST:
		bind_set_of(x, ref->element, "idx", col->name,
			    simple(STORAGE_TYPE_INT));
		break;
	case STORAGE_TYPE_SET:
		bind_set_of(x, ref->element, "value", col->name, ty->sub[0]);
		break;
	default:
		bind_set_of(x, ref->element, "key", col->name, ty->sub[0]);
	}
	return 0;
}

/* IF conditions: `c op ?` takes c's type, `m[?] op ?` key(m) and
 * value(m), `l[?] op ?` idx(l) and value(l), `u.f op ?` u.f and the
 * field's type, `c IN ?` in(c). */
static void bind_conditions(struct bind_ctx *x, const struct cql_condition *cs,
			    size_t n)
{
	const struct storage_table_meta *m = cql_table_meta(x->t);
	for (size_t i = 0; i < n; i++) {
		const struct cql_condition *cd = &cs[i];
		int c = cql_table_column(x->t, cd->column.name);
		if (c < 0)
			continue;
		const char *name = m->columns[c].name;
		const struct storage_type *ty = m->columns[c].type;
		if (cd->column.field) {
			/* u.f op ?: UserTypes.fieldSpecOf, u.f */
			size_t f = 0;
			while (ty->kind == STORAGE_TYPE_UDT && f < ty->count &&
			       strcmp(ty->field_names[f], cd->column.field))
				f++;
			if (ty->kind != STORAGE_TYPE_UDT || f == ty->count) {
				if (ty->kind == STORAGE_TYPE_UDT)
					err_set(ERR_INVALID,
						"Unknown field %s for column "
						"%s",
						cd->column.field, name);
				else
					err_set(ERR_INVALID,
						"Invalid field selection: %s "
						"is not a user type",
						name);
				x->failed = true;
				return;
			}
			name = spec_name(x, name, ".", cd->column.field);
			ty = ty->sub[f];
		}
		if (cd->column.element && (ty->kind == STORAGE_TYPE_MAP ||
					   ty->kind == STORAGE_TYPE_LIST)) {
			bool map = ty->kind == STORAGE_TYPE_MAP;
			bind_set_of(x, cd->column.element, map ? "key" : "idx",
				    name,
				    map ? ty->sub[0]
					: simple(STORAGE_TYPE_INT));
			ty = map ? ty->sub[1] : ty->sub[0];
			if (cd->op != CQL_OP_IN) {
				bind_set_of(x, cd->value, "value", name, ty);
				continue;
			}
		}
		if (cd->op == CQL_OP_IN) {
			if (cd->value->kind == CQL_TERM_BIND) {
				bind_set_of(x, cd->value, "in", name, ty);
				if (cd->value->bind_index < x->nb)
					x->b[cd->value->bind_index].in_list =
						true;
			} else if (cd->value->kind == CQL_TERM_TUPLE ||
				   cd->value->kind == CQL_TERM_LIST) {
				for (size_t k = 0; k < cd->value->count; k++)
					bind_set(x, cd->value->items[k], name,
						 ty);
			}
			continue;
		}
		bind_set(x, cd->value, name, ty);
	}
}

/* Types every marker of `s` on table `t`; pk[] gets the marker bound to
 * each partition key component (-1 when a component is not a marker).
 * -1 with ERR_INVALID and Cassandra's message for an operation Cassandra
 * refuses when it prepares the statement (there is no type to give its
 * marker). */
int cql_exec_bind_resolve(struct arena *a, const struct cql_stmt *s,
			  const struct cql_table *t, struct bind_spec *b,
			  int nb, int *pk)
{
	const struct storage_table_meta *m = cql_table_meta(t);
	struct bind_ctx x = {a, b, nb, t, false};
	for (size_t i = 0; i < m->pk_count; i++)
		pk[i] = -1;
	const struct cql_relation *where = NULL;
	size_t nwhere = 0;
	switch (s->kind) {
	case CQL_STMT_SELECT:
		where = s->u.select.where;
		nwhere = s->u.select.where_count;
		bind_set(&x, s->u.select.limit, "[limit]",
			 simple(STORAGE_TYPE_INT));
		bind_set(&x, s->u.select.per_partition_limit,
			 "[per_partition_limit]", simple(STORAGE_TYPE_INT));
		break;
	case CQL_STMT_INSERT:
		bind_set(&x, s->u.insert.json, "[json]",
			 simple(STORAGE_TYPE_TEXT));
		for (size_t i = 0; i < s->u.insert.column_count; i++) {
			struct cql_column_ref ref = {s->u.insert.columns[i],
						     NULL, NULL};
			bind_assignment(&x, &ref, CQL_ASSIGN_SET,
					s->u.insert.values[i]);
			for (size_t k = 0; k < m->pk_count; k++)
				if (strcmp(m->columns[m->pk[k]].name,
					   s->u.insert.columns[i]) == 0 &&
				    s->u.insert.values[i]->kind ==
					    CQL_TERM_BIND)
					pk[k] = s->u.insert.values[i]
							->bind_index;
		}
		cql_exec_bind_using(&x, &s->u.insert.using);
		return x.failed ? -1 : 0;
	case CQL_STMT_UPDATE:
		cql_exec_bind_using(&x, &s->u.update.using);
		for (size_t i = 0; i < s->u.update.assignment_count; i++) {
			const struct cql_assignment *as =
				&s->u.update.assignments[i];
			if (bind_assignment(&x, &as->target, as->kind,
					    as->value) != 0)
				return -1;
		}
		where = s->u.update.where;
		nwhere = s->u.update.where_count;
		bind_conditions(&x, s->u.update.conditions,
				s->u.update.condition_count);
		break;
	case CQL_STMT_DELETE:
		cql_exec_bind_using(&x, &s->u.del.using);
		for (size_t i = 0; i < s->u.del.column_count; i++)
			if (bind_deletion(&x, &s->u.del.columns[i]) != 0)
				return -1;
		where = s->u.del.where;
		nwhere = s->u.del.where_count;
		bind_conditions(&x, s->u.del.conditions,
				s->u.del.condition_count);
		break;
	default:
		return 0;
	}
	if (bind_relations(&x, where, nwhere) != 0)
		return -1;
	for (size_t i = 0; i < nwhere; i++) {
		const struct cql_relation *r = &where[i];
		if (r->kind != CQL_REL_COLUMN || r->op != CQL_OP_EQ ||
		    r->value->kind != CQL_TERM_BIND)
			continue;
		for (size_t k = 0; k < m->pk_count; k++)
			if (strcmp(m->columns[m->pk[k]].name, r->columns[0]) ==
			    0)
				pk[k] = r->value->bind_index;
	}
	return x.failed ? -1 : 0;
}

/* ---- bound values: validation and canonical form ------------------------ */

/* A serialized list (IN ?) of values of `elem`; nulls are allowed (the
 * restriction refuses them later, as Cassandra's does). Appends the list
 * with each element in canonical form to `out`. */
static int check_in_list(const struct storage_type *elem, const uint8_t *v,
			 size_t len, struct buf *out)
{
	struct cursor c = cursor_make(v, len);
	uint32_t n;
	if (cursor_be32(&c, &n) != 0)
		return err_set(ERR_INVALID, "Not enough bytes to read a list");
	if ((int32_t)n < 0)
		return err_set(ERR_INVALID,
			       "The data cannot be deserialized as a list");
	if (buf_put_be32(out, n) != 0)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t l;
		struct slice e;
		if (cursor_be32(&c, &l) != 0)
			return err_set(ERR_INVALID,
				       "Not enough bytes to read a list");
		if ((int32_t)l < 0) {
			if (buf_put_be32(out, l) != 0)
				return -1;
			continue;
		}
		if (cursor_take(&c, l, &e) != 0)
			return err_set(ERR_INVALID,
				       "Not enough bytes to read a list");
		size_t mark = out->len;
		if (storage_value_validate(elem, e.ptr, e.len) != 0 ||
		    buf_put_be32(out, 0) != 0 ||
		    storage_value_normalize(elem, e.ptr, e.len, out) != 0)
			return -1;
		be32_store(out->data + mark, (uint32_t)(out->len - mark - 4));
	}
	if (cursor_left(&c))
		return err_set(ERR_INVALID,
			       "Unexpected extraneous bytes after list value");
	return 0;
}

/* One bound value against its marker's type, as Cassandra checks it when
 * it binds it (Constants/Lists/Sets/Maps.Marker: the type's validator and
 * its message). Sets and maps (and IN lists of them) get their canonical
 * form, so a frozen one is found by equality and a map's repeated key
 * keeps its last value. *out is `v` itself when nothing changed. */
static int check_bind(struct arena *a, const struct bind_spec *b,
		      const struct cql_value *v, struct cql_value *out)
{
	*out = *v;
	if (!b->known || v->len < 0)
		return 0;
	const uint8_t *p = v->len ? v->ptr : (const uint8_t *)"";
	size_t len = (size_t)v->len;
	bool canon = b->type->kind == STORAGE_TYPE_SET ||
		     b->type->kind == STORAGE_TYPE_MAP ||
		     (b->type->count &&
		      (storage_type_contains(b->type, STORAGE_TYPE_SET) ||
		       storage_type_contains(b->type, STORAGE_TYPE_MAP)));
	if (!b->in_list) {
		if (storage_value_validate(b->type, p, len) != 0)
			return -1;
		if (!canon)
			return 0;
	}
	struct buf tmp;
	buf_init(&tmp);
	int rc = b->in_list ? check_in_list(b->type, p, len, &tmp)
			    : storage_value_normalize(b->type, p, len, &tmp);
	if (rc == 0 && (tmp.len != len || memcmp(tmp.data, p, len) != 0)) {
		uint8_t *copy = arena_memdup(a, tmp.data, tmp.len);
		if (!copy)
			rc = err_set(ERR_NOMEM, "out of memory");
		else
			*out = (struct cql_value){(int32_t)tmp.len, copy};
	}
	buf_free(&tmp);
	return rc;
}

/* Types the markers of a statement on `t` (which also refuses, as
 * Cassandra's PREPARE does, operations whose markers have no type) and
 * checks every bound value (check_bind). *out is the values to run with:
 * `binds` itself, or a copy with values in canonical form. Answers the
 * error and returns -1. */
int cql_exec_check_binds(struct job *j, const struct cql_stmt *s,
			 const struct cql_table *t,
			 const struct cql_value *binds, size_t n,
			 const struct cql_value **out)
{
	*out = binds;
	struct bind_spec *b = arena_alloc(j->a, (n + 1) * sizeof(*b));
	int pk[16];
	if (!b) {
		reply_error(j, CQL_ERR_SERVER, "out of memory");
		return -1;
	}
	memset(b, 0, (n + 1) * sizeof(*b));
	if (cql_exec_bind_resolve(j->a, s, t, b, (int)n, pk) != 0) {
		reply_bind_error(j);
		return -1;
	}
	struct cql_value *copy = NULL;
	for (size_t i = 0; i < n; i++) {
		struct cql_value v;
		if (check_bind(j->a, &b[i], &binds[i], &v) != 0) {
			reply_bind_error(j);
			return -1;
		}
		if (v.ptr == binds[i].ptr && v.len == binds[i].len)
			continue;
		if (!copy) {
			copy = arena_alloc(j->a, n * sizeof(*copy));
			if (!copy) {
				reply_error(j, CQL_ERR_SERVER, "out of memory");
				return -1;
			}
			memcpy(copy, binds, n * sizeof(*copy));
		}
		copy[i] = v;
	}
	if (copy)
		*out = copy;
	return 0;
}

/* Maps the request's values onto the statement's markers (by position, or
 * by name with flag 0x40). */
const struct cql_value *cql_exec_bind_values(struct job *j,
					     const struct cql_query_params *p,
					     int nbinds, const char **names)
{
	char msg[160];
	if (p->value_count != (uint16_t)nbinds) {
		snprintf(msg, sizeof(msg),
			 "There were %d markers(?) in CQL but %u bound "
			 "variables",
			 nbinds, p->value_count);
		reply_error(j, CQL_ERR_INVALID, msg);
		return NULL;
	}
	if (!(p->flags & CQL_QF_VALUE_NAMES) || nbinds == 0)
		return p->values;
	struct cql_value *v = arena_alloc(j->a, (size_t)nbinds * sizeof(*v));
	if (!v)
		return NULL;
	for (int i = 0; i < nbinds; i++) {
		bool found = false;
		for (int k = 0; k < nbinds && !found; k++) {
			if (names[i] && slice_eq(p->value_names[k],
						 slice_from_cstr(names[i]))) {
				v[i] = p->values[k];
				found = true;
			}
		}
		if (!found) {
			snprintf(msg, sizeof(msg),
				 "No value given for bind "
				 "marker %s",
				 names[i] ? names[i] : "?");
			reply_error(j, CQL_ERR_INVALID, msg);
			return NULL;
		}
	}
	return v;
}
