/*
 * Statement execution: decode the request, parse the CQL, dispatch, and
 * answer with one frame. Prepared statements keep their text (and the
 * keyspace they were prepared in). A prepared SELECT, INSERT, UPDATE,
 * DELETE or BATCH also keeps its syntax tree, parsed at its first EXECUTE
 * and read-only from then on (lexing and parsing were ~6% of a node's CPU
 * under cassini-stress); DDL, USE and DESCRIBE are parsed on every
 * EXECUTE, as running them may evict the prepared statement itself.
 */
#define LOG_MODULE "client"
#include "client/exec/executor.h"
#include "client/cql/cql_functions.h"

#include "client/cql/cql_parse.h"
#include "client/cql/cql_values.h"
#include "client/exec/dml.h"
#include "client/exec/select.h"
#include "client/schema/describe.h"
#include "client/schema/system_tables.h"
#include "common/err.h"
#include "common/log.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREPARED_MAX 20000

struct prepared {
	uint8_t id[16];
	char *query;
	size_t len;
	char *keyspace; /* USE keyspace at PREPARE time, or NULL */
	/* "keyspace.table" of each table the statement names: an ALTER or
	 * DROP of one evicts it (cql_exec_schema_changed). */
	char **tables;
	size_t table_count;
	/* The syntax tree, once parsed (DML, SELECT, BATCH only). */
	struct arena ast_arena;
	struct cql_stmt *stmt;
	int nbinds;
	const char **names;
	bool uncacheable; /* parsed once: a kind that is parsed every time */
	struct prepared *next;
};

struct cql_exec {
	struct cql_schema *schema;
	struct cql_schema *views; /* system_views, system_virtual_schema */
	struct cql_exec_hooks hooks;
	struct cql_server *server;
	struct prepared *prepared; /* newest first */
	size_t prepared_count;
};

static struct prepared *prepared_find(struct cql_exec *e, const uint8_t *id,
				      size_t len);

/* A statement ready to run: its text, parameters, and where it came from. */
struct job {
	struct cql_exec *e;
	struct cql_request *req;
	const struct cql_request_info *info;
	const char *keyspace; /* effective USE keyspace */
	struct arena *a;
	struct buf out;
	const char *query; /* the statement's text, for the data path */
	size_t query_len;
};

struct cql_exec *cql_exec_new(struct cql_schema *schema,
			      const struct cql_exec_hooks *hooks)
{
	struct cql_exec *e = calloc(1, sizeof(*e));
	if (!e) {
		err_set(ERR_NOMEM, "cannot allocate the executor");
		return NULL;
	}
	e->schema = schema;
	e->hooks = *hooks;
	if (!(e->views = cql_schema_new_views())) {
		free(e);
		return NULL;
	}
	return e;
}

static void prepared_free(struct prepared *p)
{
	for (size_t i = 0; i < p->table_count; i++)
		free(p->tables[i]);
	free(p->tables);
	free(p->query);
	free(p->keyspace);
	if (p->stmt)
		arena_destroy(&p->ast_arena);
	free(p);
}

void cql_exec_delete(struct cql_exec *e)
{
	if (!e)
		return;
	while (e->prepared) {
		struct prepared *p = e->prepared;
		e->prepared = p->next;
		prepared_free(p);
	}
	cql_schema_delete(e->views);
	free(e);
}

static bool prepared_uses(const struct prepared *p, const char *ks,
			  const char *table)
{
	size_t kl = strlen(ks);
	for (size_t i = 0; i < p->table_count; i++) {
		const char *n = p->tables[i];
		if (strncmp(n, ks, kl) == 0 && n[kl] == '.' &&
		    (!table || strcmp(n + kl + 1, table) == 0))
			return true;
	}
	return false;
}

void cql_exec_schema_changed(struct cql_exec *e,
			     const struct cql_schema_change *c)
{
	bool table = strcmp(c->target, "TABLE") == 0;
	if (strcmp(c->change, "CREATED") == 0 ||
	    (!table && strcmp(c->change, "DROPPED") != 0))
		return;
	size_t evicted = 0;
	for (struct prepared **pp = &e->prepared; *pp;) {
		struct prepared *p = *pp;
		if (!prepared_uses(p, c->keyspace, table ? c->name : NULL)) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		prepared_free(p);
		e->prepared_count--;
		evicted++;
	}
	if (evicted)
		LOG_INFO("schema: %zu prepared statement%s on %s%s%s evicted",
			 evicted, evicted == 1 ? "" : "s", c->keyspace,
			 table ? "." : "", table ? c->name : "");
}

void cql_exec_set_server(struct cql_exec *e, struct cql_server *server)
{
	e->server = server;
}

size_t cql_exec_prepared_count(const struct cql_exec *e)
{
	return e->prepared_count;
}

/* ---- replies ------------------------------------------------------------- */

static void finish(struct job *j)
{
	if (j->out.len == 0) /* encoding failed: still answer */
		cql_encode_error(&j->out, j->info->version, j->info->stream,
				 CQL_ERR_SERVER, "out of memory");
	cql_request_reply(j->req, j->out.data, j->out.len);
	buf_free(&j->out);
}

static void reply_error(struct job *j, uint32_t code, const char *msg)
{
	buf_clear(&j->out);
	cql_encode_error(&j->out, j->info->version, j->info->stream, code, msg);
}

/* The error of a failed parse: syntax, or an unsupported feature. */
static void reply_parse_error(struct job *j)
{
	char msg[ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s", err_msg());
	reply_error(j,
		    err_code() == ERR_UNSUPPORTED ? CQL_ERR_INVALID
						  : CQL_ERR_SYNTAX,
		    msg);
}

/* ---- bind markers: names and types --------------------------------------- */

static void reply_bind_error(struct job *j)
{
	char msg[ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s", err_msg());
	reply_error(j,
		    err_code() == ERR_NOMEM ? CQL_ERR_SERVER : CQL_ERR_INVALID,
		    msg);
}

struct bind_spec {
	const char *name;
	struct storage_type type;
	/* `IN ?`: a list of `type` (which may itself be a frozen collection,
	 * so the list is not a storage_type of its own). */
	bool in_list;
	bool known;
};

/* Typing the markers of one statement: names are Cassandra's (the
 * column's; in(c) for IN ?, key(m) / value(m) for a map's key and value,
 * idx(l) / value(l) for a list's index and element, value(s) for a set's
 * element, [limit], [ttl], ...), or the marker's own for :name. */
struct bind_ctx {
	struct arena *a;
	struct bind_spec *b;
	int nb;
	const struct cql_table *t;
	bool failed; /* a call did not resolve: the error slot says why */
};

static struct storage_type simple(uint16_t kind)
{
	return (struct storage_type){.kind = kind};
}

static void bind_set(struct bind_ctx *x, const struct cql_term *t,
		     const char *name, struct storage_type type);

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

static void bind_set(struct bind_ctx *x, const struct cql_term *t,
		     const char *name, struct storage_type type)
{
	if (t && (t->kind == CQL_TERM_FUNCTION || t->kind == CQL_TERM_HINT)) {
		bind_call(x, t);
		return;
	}
	if (!t || t->kind != CQL_TERM_BIND || t->bind_index >= x->nb)
		return;
	x->b[t->bind_index] =
		(struct bind_spec){t->text ? t->text : name, type, false, true};
}

/* bind_set with the name `fn(column)`. */
static void bind_set_of(struct bind_ctx *x, const struct cql_term *t,
			const char *fn, const char *column,
			struct storage_type type)
{
	if (!t || t->kind != CQL_TERM_BIND || t->bind_index >= x->nb)
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
		struct storage_type ty = m->columns[c].type;
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
			if (ty.kind != STORAGE_TYPE_MAP)
				return err_set(ERR_INVALID,
					       "Cannot use CONTAINS KEY on "
					       "non-map column %s",
					       name);
			bind_set_of(x, r->value, "key", name, simple(ty.elem));
			continue;
		}
		if (r->op == CQL_OP_CONTAINS) {
			if (!storage_type_is_collection(ty.kind))
				return err_set(ERR_INVALID,
					       "Cannot use CONTAINS on "
					       "non-collection column %s",
					       name);
			bool map = ty.kind == STORAGE_TYPE_MAP;
			bind_set_of(x, r->value, "value", name,
				    simple(map ? ty.value : ty.elem));
			continue;
		}
		bind_set(x, r->value, name, ty);
	}
	return 0;
}

static void bind_using(struct bind_ctx *x, const struct cql_using *u)
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
	struct storage_type ty = col->type;
	if (ref->element) {
		const char *why = !storage_type_is_collection(ty.kind)
					  ? "non collection"
				  : ty.frozen ? "frozen collection"
				  : ty.kind == STORAGE_TYPE_SET ? "set"
								: NULL;
		if (why)
			return err_set(ERR_INVALID,
				       "Invalid operation (%s[%s] = %s) for %s "
				       "column %s",
				       col->name, term_text(x->a, ref->element),
				       term_text(x->a, value), why, col->name);
		bool map = ty.kind == STORAGE_TYPE_MAP;
		bind_set_of(x, ref->element, map ? "key" : "idx", col->name,
			    simple(map ? ty.elem : STORAGE_TYPE_INT));
		bind_set_of(x, value, "value", col->name,
			    simple(map ? ty.value : ty.elem));
		return 0;
	}
	if (kind == CQL_ASSIGN_REMOVE && ty.kind == STORAGE_TYPE_MAP)
		ty = (struct storage_type){STORAGE_TYPE_SET, ty.elem, 0, false};
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
	struct storage_type ty = col->type;
	if (!storage_type_is_collection(ty.kind) || ty.frozen)
		return err_set(ERR_INVALID,
			       "Invalid deletion operation for %s column %s",
			       ty.frozen ? "frozen collection"
					 : "non collection",
			       col->name);
	switch (ty.kind) {
	case STORAGE_TYPE_LIST:
		bind_set_of(x, ref->element, "idx", col->name,
			    simple(STORAGE_TYPE_INT));
		break;
	case STORAGE_TYPE_SET:
		bind_set_of(x, ref->element, "value", col->name,
			    simple(ty.elem));
		break;
	default:
		bind_set_of(x, ref->element, "key", col->name, simple(ty.elem));
	}
	return 0;
}

/* Types every marker of `s` on table `t`; pk[] gets the marker bound to
 * each partition key component (-1 when a component is not a marker).
 * -1 with ERR_INVALID and Cassandra's message for an operation Cassandra
 * refuses when it prepares the statement (there is no type to give its
 * marker). */
static int bind_resolve(struct arena *a, const struct cql_stmt *s,
			const struct cql_table *t, struct bind_spec *b, int nb,
			int *pk)
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
		for (size_t i = 0; i < s->u.insert.column_count; i++) {
			struct cql_column_ref ref = {s->u.insert.columns[i],
						     NULL};
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
		bind_using(&x, &s->u.insert.using);
		return x.failed ? -1 : 0;
	case CQL_STMT_UPDATE:
		bind_using(&x, &s->u.update.using);
		for (size_t i = 0; i < s->u.update.assignment_count; i++) {
			const struct cql_assignment *as =
				&s->u.update.assignments[i];
			if (bind_assignment(&x, &as->target, as->kind,
					    as->value) != 0)
				return -1;
		}
		where = s->u.update.where;
		nwhere = s->u.update.where_count;
		break;
	case CQL_STMT_DELETE:
		bind_using(&x, &s->u.del.using);
		for (size_t i = 0; i < s->u.del.column_count; i++)
			if (bind_deletion(&x, &s->u.del.columns[i]) != 0)
				return -1;
		where = s->u.del.where;
		nwhere = s->u.del.where_count;
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
	bool canon = b->type.kind == STORAGE_TYPE_SET ||
		     b->type.kind == STORAGE_TYPE_MAP;
	if (!b->in_list) {
		if (storage_value_validate(&b->type, p, len) != 0)
			return -1;
		if (!canon)
			return 0;
	}
	struct buf tmp;
	buf_init(&tmp);
	int rc = b->in_list ? check_in_list(&b->type, p, len, &tmp)
			    : storage_value_normalize(&b->type, p, len, &tmp);
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
static int check_binds(struct job *j, const struct cql_stmt *s,
		       const struct cql_table *t, const struct cql_value *binds,
		       size_t n, const struct cql_value **out)
{
	*out = binds;
	struct bind_spec *b = arena_alloc(j->a, (n + 1) * sizeof(*b));
	int pk[16];
	if (!b) {
		reply_error(j, CQL_ERR_SERVER, "out of memory");
		return -1;
	}
	memset(b, 0, (n + 1) * sizeof(*b));
	if (bind_resolve(j->a, s, t, b, (int)n, pk) != 0) {
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

/* ---- statement resolution ------------------------------------------------ */

static const struct cql_qname *stmt_table(const struct cql_stmt *s)
{
	switch (s->kind) {
	case CQL_STMT_SELECT:
		return &s->u.select.table;
	case CQL_STMT_INSERT:
		return &s->u.insert.table;
	case CQL_STMT_UPDATE:
		return &s->u.update.table;
	case CQL_STMT_DELETE:
		return &s->u.del.table;
	case CQL_STMT_TRUNCATE:
		return &s->u.truncate;
	default:
		return NULL;
	}
}

static bool is_ddl(enum cql_stmt_kind k)
{
	return k == CQL_STMT_CREATE_KEYSPACE || k == CQL_STMT_ALTER_KEYSPACE ||
	       k == CQL_STMT_DROP_KEYSPACE || k == CQL_STMT_CREATE_TABLE ||
	       k == CQL_STMT_ALTER_TABLE || k == CQL_STMT_DROP_TABLE;
}

/* A write, TRUNCATE or DDL on a virtual table: refused as Cassandra does
 * for its read-only virtual tables. */
static void view_write_refused(struct job *j, const char *ks, const char *table)
{
	char msg[256];
	if (!cql_schema_table(j->e->views, ks, table))
		snprintf(msg, sizeof(msg), "unconfigured table %s", table);
	else
		snprintf(msg, sizeof(msg),
			 "Modification is not supported by table %s.%s", ks,
			 table);
	reply_error(j, CQL_ERR_INVALID, msg);
}

/* Finds the table a DML/SELECT statement targets (unqualified names are in
 * session_ks), or answers the error. */
static const struct cql_table *resolve(struct job *j, const struct cql_stmt *s,
				       const char *session_ks,
				       const char **ks_out)
{
	const struct cql_qname *q = stmt_table(s);
	const char *ks = q->keyspace ? q->keyspace : session_ks;
	char msg[512];
	if (!ks) {
		reply_error(
			j, CQL_ERR_INVALID,
			"No keyspace has been specified. USE a keyspace, or "
			"explicitly specify keyspace.tablename");
		return NULL;
	}
	*ks_out = ks;
	if (cql_system_keyspace_is_view(ks))
		return NULL; /* served from the views registry */
	if (!cql_schema_keyspace(j->e->schema, ks)) {
		snprintf(msg, sizeof(msg), "Keyspace %s does not exist", ks);
		reply_error(j, CQL_ERR_INVALID, msg);
		return NULL;
	}
	const struct cql_table *t = cql_schema_table(j->e->schema, ks, q->name);
	if (!t) {
		snprintf(msg, sizeof(msg), "unconfigured table %s", q->name);
		reply_error(j, CQL_ERR_INVALID, msg);
	} else if (cql_table_columns_diverged(t)) {
		snprintf(msg, sizeof(msg),
			 "Columns were added to %s.%s on two nodes at the same "
			 "time and are numbered differently on them; its reads "
			 "and writes are refused so that no value is read as "
			 "another column's. Drop the table and create it again",
			 ks, q->name);
		reply_error(j, CQL_ERR_INVALID, msg);
		return NULL;
	}
	return t;
}

/* ---- running ------------------------------------------------------------- */

static int schema_event(struct buf *b, uint8_t version, void *arg)
{
	const struct cql_schema_change *c = arg;
	return cql_encode_event_schema(b, version, c->change, c->target,
				       c->keyspace,
				       c->name[0] ? c->name : NULL);
}

/* NetworkTopologyStrategy's recognized options are the datacenters the
 * node knows (its own and its peers', Datacenters.getValidDatacenters)
 * and replication_factor; Cassandra 4.0+ refuses any other when the
 * statement runs (not when a peer's schema is applied). */
static int check_datacenters(struct job *j, const struct cql_stmt *s)
{
	if ((s->kind != CQL_STMT_CREATE_KEYSPACE &&
	     s->kind != CQL_STMT_ALTER_KEYSPACE) ||
	    !j->e->hooks.node_info)
		return 0;
	const struct cql_keyspace_stmt *ks = &s->u.keyspace;
	const struct cql_term *repl = NULL;
	for (size_t i = 0; i < ks->option_count; i++)
		if (strcmp(ks->options[i].name, "replication") == 0)
			repl = ks->options[i].value;
	if (!repl || repl->kind != CQL_TERM_MAP)
		return 0;
	/* what the statement answers first: already exists, doesn't exist */
	bool exists = cql_schema_keyspace(j->e->schema, ks->name) != NULL;
	if (s->kind == CQL_STMT_CREATE_KEYSPACE ? exists : !exists)
		return 0;
	bool nts = false;
	for (size_t i = 0; i + 1 < repl->count; i += 2) {
		const struct cql_term *k = repl->items[i],
				      *v = repl->items[i + 1];
		if (k->kind == CQL_TERM_STRING && k->len == 5 &&
		    memcmp(k->text, "class", 5) == 0 &&
		    v->kind == CQL_TERM_STRING)
			nts = (v->len == 23 &&
			       memcmp(v->text, "NetworkTopologyStrategy", 23) ==
				       0) ||
			      (v->len == 52 &&
			       memcmp(v->text,
				      "org.apache.cassandra.locator."
				      "NetworkTopologyStrategy",
				      52) == 0);
	}
	if (!nts)
		return 0;
	struct cql_node_info node;
	j->e->hooks.node_info(j->e->hooks.arg, &node);
	for (size_t i = 0; i + 1 < repl->count; i += 2) {
		const struct cql_term *k = repl->items[i];
		if (k->kind != CQL_TERM_STRING ||
		    (k->len == 5 && memcmp(k->text, "class", 5) == 0) ||
		    (k->len == 18 &&
		     memcmp(k->text, "replication_factor", 18) == 0))
			continue;
		bool known = node.dc && strlen(node.dc) == k->len &&
			     memcmp(node.dc, k->text, k->len) == 0;
		for (size_t p = 0; !known && p < node.peer_count; p++) {
			const char *dc = node.peers[p].dc;
			known = dc && strlen(dc) == k->len &&
				memcmp(dc, k->text, k->len) == 0;
		}
		if (!known)
			return err_set(ERR_CONFIG,
				       "Unrecognized strategy option {%.*s} "
				       "passed to NetworkTopologyStrategy for "
				       "keyspace %s",
				       (int)k->len, k->text, ks->name);
	}
	return 0;
}

/* A map literal's key or value as plain text: 'dc1' -> dc1, 3 -> 3. */
static int plain_text(const struct cql_term *t, char *dst, size_t cap)
{
	if ((t->kind != CQL_TERM_STRING && t->kind != CQL_TERM_INTEGER &&
	     t->kind != CQL_TERM_FLOAT && t->kind != CQL_TERM_BOOLEAN) ||
	    t->len + 2 > cap)
		return -1;
	snprintf(dst, cap, "%s%.*s", t->negative ? "-" : "", (int)t->len,
		 t->text);
	return 0;
}

static void put_quoted(struct buf *b, const char *s, char q)
{
	buf_append(b, &q, 1);
	for (; *s; s++) {
		buf_append(b, s, 1);
		if (*s == q)
			buf_append(b, &q, 1);
	}
	buf_append(b, &q, 1);
}

struct repl_entry {
	char key[128];
	char value[64];
};

static bool repl_has(const struct repl_entry *e, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(e[i].key, key) == 0)
			return true;
	return false;
}

/*
 * NetworkTopologyStrategy's replication_factor (Cassandra 4.0+,
 * NetworkTopologyStrategy.prepareOptions): the default for every known
 * datacenter not named; an ALTER keeps the datacenters the keyspace has;
 * datacenters at 0 are left out. The statement is rewritten (text and
 * tree) with the expanded map, so every node applies the same options.
 * 0 when nothing changed or it was rewritten, -1 on error.
 */
static int expand_replication_factor(struct job *j, const struct cql_stmt **sp,
				     const char **text, size_t *len)
{
	const struct cql_stmt *s = *sp;
	if ((s->kind != CQL_STMT_CREATE_KEYSPACE &&
	     s->kind != CQL_STMT_ALTER_KEYSPACE) ||
	    !j->e->hooks.node_info)
		return 0;
	const struct cql_keyspace_stmt *ks = &s->u.keyspace;
	const struct cql_term *repl = NULL;
	for (size_t i = 0; i < ks->option_count; i++)
		if (strcmp(ks->options[i].name, "replication") == 0)
			repl = ks->options[i].value;
	if (!repl || repl->kind != CQL_TERM_MAP || repl->count / 2 > 64)
		return 0;
	char klass[128] = "", rf[64] = "";
	struct repl_entry e[96];
	size_t n = 0;
	for (size_t i = 0; i + 1 < repl->count; i += 2) {
		char k[128], v[64];
		if (plain_text(repl->items[i], k, sizeof(k)) != 0 ||
		    plain_text(repl->items[i + 1], v, sizeof(v)) != 0)
			return 0; /* the schema's own checks answer */
		if (strcmp(k, "class") == 0)
			snprintf(klass, sizeof(klass), "%s", v);
		else if (strcmp(k, "replication_factor") == 0)
			snprintf(rf, sizeof(rf), "%s", v);
		else if (!repl_has(e, n, k)) {
			snprintf(e[n].key, sizeof(e[n].key), "%s", k);
			snprintf(e[n].value, sizeof(e[n].value), "%s", v);
			n++;
		}
	}
	if (!rf[0] || (strcmp(klass, "NetworkTopologyStrategy") != 0 &&
		       strcmp(klass, "org.apache.cassandra.locator."
				     "NetworkTopologyStrategy") != 0))
		return 0;
	const struct cql_keyspace *old =
		cql_schema_keyspace(j->e->schema, ks->name);
	if (s->kind == CQL_STMT_ALTER_KEYSPACE && old) {
		const struct storage_keyspace_meta *m = cql_keyspace_meta(old);
		for (size_t i = 0; i < m->replication_count && n < 96; i++)
			if (strcmp(m->replication_keys[i],
				   "replication_factor") != 0 &&
			    !repl_has(e, n, m->replication_keys[i])) {
				snprintf(e[n].key, sizeof(e[n].key), "%s",
					 m->replication_keys[i]);
				snprintf(e[n].value, sizeof(e[n].value), "%s",
					 m->replication_values[i]);
				n++;
			}
	}
	struct cql_node_info node;
	j->e->hooks.node_info(j->e->hooks.arg, &node);
	for (size_t p = 0; p <= node.peer_count && n < 96; p++) {
		const char *dc = p == 0 ? node.dc : node.peers[p - 1].dc;
		if (dc && !repl_has(e, n, dc)) {
			snprintf(e[n].key, sizeof(e[n].key), "%s", dc);
			snprintf(e[n].value, sizeof(e[n].value), "%s", rf);
			n++;
		}
	}
	struct buf b;
	buf_init(&b);
	buf_append(&b, s->kind == CQL_STMT_CREATE_KEYSPACE ? "CREATE" : "ALTER",
		   s->kind == CQL_STMT_CREATE_KEYSPACE ? 6 : 5);
	buf_append(&b, " KEYSPACE ", 10);
	if (ks->if_not_exists)
		buf_append(&b, "IF NOT EXISTS ", 14);
	put_quoted(&b, ks->name, '"');
	buf_append(&b, " WITH replication = {'class': ", 30);
	put_quoted(&b, klass, '\'');
	for (size_t i = 0; i < n; i++) {
		if (strcmp(e[i].value, "0") == 0)
			continue;
		buf_append(&b, ", ", 2);
		put_quoted(&b, e[i].key, '\'');
		buf_append(&b, ": ", 2);
		put_quoted(&b, e[i].value, '\'');
	}
	buf_append(&b, "}", 1);
	for (size_t i = 0; i < ks->option_count; i++) {
		char v[64];
		if (strcmp(ks->options[i].name, "replication") == 0 ||
		    plain_text(ks->options[i].value, v, sizeof(v)) != 0)
			continue;
		buf_append(&b, " AND ", 5);
		buf_append(&b, ks->options[i].name,
			   strlen(ks->options[i].name));
		buf_append(&b, " = ", 3);
		buf_append(&b, v, strlen(v));
	}
	char *copy = b.data ? arena_alloc_aligned(j->a, b.len + 1, 1) : NULL;
	if (!copy) {
		buf_free(&b);
		return err_set(ERR_NOMEM, "out of memory");
	}
	memcpy(copy, b.data, b.len);
	copy[b.len] = '\0';
	size_t n_text = b.len;
	buf_free(&b);
	int binds;
	struct cql_stmt *re = cql_parse(j->a, copy, n_text, &binds, NULL);
	if (!re)
		return -1;
	*sp = re;
	*text = copy;
	*len = n_text;
	return 0;
}

static void run_ddl(struct job *j, const struct cql_stmt *s, const char *text,
		    size_t len)
{
	struct cql_schema_change change;
	uint8_t id[16];
	if (expand_replication_factor(j, &s, &text, &len) != 0) {
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", err_msg());
		reply_error(j, CQL_ERR_CONFIG, why);
		return;
	}
	if (check_datacenters(j, s) != 0) {
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", err_msg());
		reply_error(j, CQL_ERR_CONFIG, why);
		return;
	}
	if (j->e->hooks.ddl_check &&
	    j->e->hooks.ddl_check(j->e->hooks.arg, s) != 0) {
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", err_msg());
		reply_error(j, CQL_ERR_INVALID, why);
		return;
	}
	j->e->hooks.new_table_id(j->e->hooks.arg, id);
	/* A DROP of columns and a change of options get their time here,
	 * once: the record carries it to every node and every replay. */
	struct cql_stmt stamped;
	int64_t time_us = 0;
	if (cql_schema_stmt_timed(s) && j->e->hooks.now_us) {
		stamped = *s;
		time_us = j->e->hooks.now_us(j->e->hooks.arg);
		cql_schema_stmt_set_time(&stamped, time_us);
		s = &stamped;
	}
	enum cql_schema_status st =
		cql_schema_apply(j->e->schema, s, j->keyspace, id, &change);
	char msg[ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s", err_msg());
	switch (st) {
	case CQL_SCHEMA_OK:
		LOG_INFO("schema: %s %s %s%s%s", change.change, change.target,
			 change.keyspace, change.name[0] ? "." : "",
			 change.name);
		cql_encode_result_schema_change(
			&j->out, j->info->version, j->info->stream,
			change.change, change.target, change.keyspace,
			change.name[0] ? change.name : NULL);
		cql_exec_schema_changed(j->e, &change);
		if (j->e->server)
			cql_server_broadcast(j->e->server, "SCHEMA_CHANGE",
					     schema_event, &change);
		if (j->e->hooks.schema_changed) {
			struct cql_schema_event ev = {
				&change, text, len, j->keyspace, id, time_us};
			j->e->hooks.schema_changed(j->e->hooks.arg, &ev);
		}
		return;
	case CQL_SCHEMA_NOOP:
		cql_encode_result_void(&j->out, j->info->version,
				       j->info->stream);
		return;
	case CQL_SCHEMA_ALREADY_EXISTS: {
		const char *ks = "", *table = "";
		if (s->kind == CQL_STMT_CREATE_KEYSPACE) {
			ks = s->u.keyspace.name;
		} else {
			ks = s->u.create_table.table.keyspace
				     ? s->u.create_table.table.keyspace
				     : j->keyspace;
			table = s->u.create_table.table.name;
		}
		cql_encode_already_exists(&j->out, j->info->version,
					  j->info->stream, msg, ks, table);
		return;
	}
	case CQL_SCHEMA_SYNTAX:
		reply_error(j, CQL_ERR_SYNTAX, msg);
		return;
	case CQL_SCHEMA_CONFIG:
		reply_error(j, CQL_ERR_CONFIG, msg);
		return;
	case CQL_SCHEMA_UNAUTHORIZED:
		reply_error(j, CQL_ERR_UNAUTHORIZED, msg);
		return;
	case CQL_SCHEMA_NOMEM:
		reply_error(j, CQL_ERR_SERVER, msg);
		return;
	default:
		reply_error(j, CQL_ERR_INVALID, msg);
	}
}

/* Maps the request's values onto the statement's markers (by position, or
 * by name with flag 0x40). */
static const struct cql_value *bind_values(struct job *j,
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

/* system_auth is written by the role manager only (its statements run
 * as internal requests): a client's INSERT, UPDATE, DELETE or TRUNCATE
 * there could make itself a superuser. */
static bool auth_write_refused(struct job *j, const char *ks)
{
	if (j->info->internal || strcmp(ks, "system_auth") != 0)
		return false;
	reply_error(j, CQL_ERR_UNAUTHORIZED,
		    "system_auth tables are written by the role statements "
		    "only (CREATE/ALTER/DROP ROLE, GRANT, REVOKE)");
	return true;
}

/* Hands a resolved request to the data path, which replies. */
static void to_data_path(struct job *j, struct cql_data_request *dr)
{
	if (!j->e->hooks.data) {
		reply_error(j, CQL_ERR_INVALID,
			    "Reads and writes of user tables are not served by "
			    "this node yet");
		return;
	}
	dr->req = j->req;
	dr->info = j->info;
	dr->query = j->query;
	dr->query_len = j->query_len;
	j->req = NULL;
	j->e->hooks.data(j->e->hooks.arg, dr);
}

/* Checks every write of a batch and hands them to the data path together.
 * `ts` is the batch's timestamp (INT64_MIN: none given). */
static void run_batch(struct job *j, struct cql_batch_item *items, size_t n,
		      int type, int64_t ts,
		      const struct cql_query_params *params)
{
	if (type == CQL_BATCH_COUNTER) {
		reply_error(j, CQL_ERR_INVALID,
			    "Counter batches are not supported by Cassini yet");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *ks = NULL;
		const struct cql_stmt *st = items[i].stmt;
		if (st->kind != CQL_STMT_INSERT &&
		    st->kind != CQL_STMT_UPDATE &&
		    st->kind != CQL_STMT_DELETE) {
			reply_error(
				j, CQL_ERR_INVALID,
				"Invalid statement in batch: only UPDATE, "
				"INSERT and DELETE statements are allowed.");
			return;
		}
		items[i].table = resolve(j, st,
					 items[i].keyspace ? items[i].keyspace
							   : j->keyspace,
					 &ks);
		if (!items[i].table && ks && cql_system_keyspace_is_view(ks))
			reply_error(j, CQL_ERR_UNAUTHORIZED,
				    "system keyspaces are read-only");
		if (!items[i].table)
			return;
		if (cql_system_keyspace_is_virtual(ks)) {
			reply_error(j, CQL_ERR_UNAUTHORIZED,
				    "system keyspaces are read-only");
			return;
		}
		if (auth_write_refused(j, ks))
			return;
		if (check_binds(j, st, items[i].table, items[i].binds,
				items[i].bind_count, &items[i].binds) != 0)
			return;
	}
	struct cql_data_request dr = {
		.params = params,
		.batch = items,
		.batch_count = n,
		.batch_type = type,
		.batch_timestamp = ts,
	};
	to_data_path(j, &dr);
}

static const char batch_ts_bound[] =
	"Out of bound timestamp, must be in [-9223372036854775807, "
	"9223372036854775807]";

/* A text batch's USING TIMESTAMP (Cassandra's Attributes.getTimestamp):
 * unset is not given, null is refused. *out is INT64_MIN when none was
 * given (then the client's default timestamp, or the node's clock). */
static int batch_timestamp(const struct cql_term *t,
			   const struct cql_value *binds, size_t nbinds,
			   const struct cql_query_params *params, int64_t *out)
{
	*out = params->has_timestamp ? params->timestamp : INT64_MIN;
	if (!t)
		return 0;
	struct cql_value v = {CQL_VALUE_UNSET, NULL};
	struct buf b;
	buf_init(&b);
	if (t->kind == CQL_TERM_BIND) {
		if ((size_t)t->bind_index < nbinds)
			v = binds[t->bind_index];
	} else {
		struct cql_column_type bigint = {CQL_TYPE_BIGINT, 0, 0};
		struct cql_timeuuid_gen g;
		struct cql_fn_ctx fn = {.timeuuids = &g};
		cql_timeuuid_gen_init(&g, 0);
		int rc = cql_term_serialize(t, &bigint, "[timestamp]", &fn,
					    NULL, &b);
		if (rc < 0) {
			buf_free(&b);
			return -1;
		}
		v = rc == 1 ? (struct cql_value){CQL_VALUE_NULL, NULL}
			    : (struct cql_value){(int32_t)b.len, b.data};
	}
	int rc = 0;
	if (v.len == CQL_VALUE_NULL)
		rc = err_set(ERR_INVALID, "Invalid null value of timestamp");
	else if (v.len >= 0 && v.len != 8)
		rc = err_set(ERR_INVALID, "Invalid timestamp value");
	else if (v.len == 8 && (*out = (int64_t)be64_load(v.ptr)) == INT64_MIN)
		rc = err_set(ERR_INVALID, "%s", batch_ts_bound);
	buf_free(&b);
	return rc;
}

/* BEGIN [UNLOGGED] BATCH ... APPLY BATCH: markers are numbered across the
 * whole text, so every statement sees the same values. */
static void run_text_batch(struct job *j, const struct cql_stmt *s,
			   const struct cql_value *binds, size_t nbinds,
			   const struct cql_query_params *params)
{
	const struct cql_batch_stmt *b = &s->u.batch;
	const struct cql_term *tt = b->using.timestamp;
	if (tt && tt->kind == CQL_TERM_BIND &&
	    (size_t)tt->bind_index < nbinds && binds[tt->bind_index].len >= 0 &&
	    storage_type_validate(STORAGE_TYPE_BIGINT,
				  binds[tt->bind_index].ptr,
				  (size_t)binds[tt->bind_index].len) != 0) {
		reply_bind_error(j);
		return;
	}
	struct cql_batch_item *items =
		arena_alloc(j->a, (b->count + 1) * sizeof(*items));
	if (!items) {
		reply_error(j, CQL_ERR_SERVER, "out of memory");
		return;
	}
	/* Cassandra's BatchStatement.validate */
	if (b->using.ttl) {
		reply_error(j, CQL_ERR_INVALID,
			    "Global TTL on the BATCH statement is not "
			    "supported.");
		return;
	}
	for (size_t i = 0; b->using.timestamp && i < b->count; i++) {
		const struct cql_stmt *st = b->statements[i];
		const struct cql_using *u =
			st->kind == CQL_STMT_INSERT   ? &st->u.insert.using
			: st->kind == CQL_STMT_UPDATE ? &st->u.update.using
			: st->kind == CQL_STMT_DELETE ? &st->u.del.using
						      : NULL;
		if (u && u->timestamp) {
			reply_error(j, CQL_ERR_INVALID,
				    "Timestamp must be set either on BATCH or "
				    "individual statements");
			return;
		}
	}
	int64_t ts;
	if (batch_timestamp(b->using.timestamp, binds, nbinds, params, &ts) !=
	    0) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		reply_error(j, CQL_ERR_INVALID, msg);
		return;
	}
	for (size_t i = 0; i < b->count; i++)
		items[i] = (struct cql_batch_item){b->statements[i], NULL,
						   binds, nbinds, NULL};
	run_batch(j, items, b->count, b->type, ts, params);
}

static void run_protocol_batch(struct job *j, const struct cql_batch *b)
{
	struct cql_batch_item *items =
		arena_alloc(j->a, ((size_t)b->count + 1) * sizeof(*items));
	struct cql_query_params params = {.consistency = b->consistency,
					  .has_timestamp = b->has_timestamp,
					  .timestamp = b->timestamp,
					  .page_size = -1};
	if (!items) {
		reply_error(j, CQL_ERR_SERVER, "out of memory");
		return;
	}
	for (uint16_t i = 0; i < b->count; i++) {
		const struct cql_batch_statement *bs = &b->statements[i];
		const char *text = (const char *)bs->query_or_id.ptr;
		size_t len = bs->query_or_id.len;
		const char *keyspace = NULL; /* the PREPARE-time keyspace */
		if (bs->prepared) {
			struct prepared *p = prepared_find(
				j->e, bs->query_or_id.ptr, bs->query_or_id.len);
			if (!p) {
				cql_encode_unprepared(
					&j->out, j->info->version,
					j->info->stream,
					"Prepared query with ID not "
					"found",
					bs->query_or_id.ptr,
					(uint16_t)bs->query_or_id.len);
				return;
			}
			text = p->query;
			len = p->len;
			keyspace = p->keyspace;
		}
		int nbinds;
		struct cql_stmt *st = cql_parse(j->a, text, len, &nbinds, NULL);
		if (!st) {
			reply_parse_error(j);
			return;
		}
		if ((size_t)nbinds != bs->value_count) {
			char msg[160];
			snprintf(msg, sizeof(msg),
				 "There were %d markers(?) in CQL but %u bound "
				 "variables",
				 nbinds, bs->value_count);
			reply_error(j, CQL_ERR_INVALID, msg);
			return;
		}
		items[i] = (struct cql_batch_item){st, NULL, bs->values,
						   bs->value_count, keyspace};
	}
	/* INT64_MIN is "no timestamp" here and in Cassandra (which answers
	 * a Protocol error; Invalid keeps the connection). */
	if (b->has_timestamp && b->timestamp == INT64_MIN) {
		reply_error(j, CQL_ERR_INVALID, batch_ts_bound);
		return;
	}
	run_batch(j, items, b->count, b->type,
		  b->has_timestamp ? b->timestamp : INT64_MIN, &params);
}

static void run_stmt(struct job *j, const struct cql_stmt *s, int nbinds,
		     const char **names, const char *text, size_t len,
		     const struct cql_query_params *params);

static void run(struct job *j, const char *text, size_t len,
		const struct cql_query_params *params)
{
	int nbinds;
	const char **names;
	struct cql_stmt *s = cql_parse(j->a, text, len, &nbinds, &names);
	if (!s) {
		reply_parse_error(j);
		return;
	}
	run_stmt(j, s, nbinds, names, text, len, params);
}

/* Whether a statement's tree may be kept with its prepared statement. */
static bool cacheable(enum cql_stmt_kind k)
{
	return k == CQL_STMT_SELECT || k == CQL_STMT_INSERT ||
	       k == CQL_STMT_UPDATE || k == CQL_STMT_DELETE ||
	       k == CQL_STMT_BATCH;
}

static void run_stmt(struct job *j, const struct cql_stmt *s, int nbinds,
		     const char **names, const char *text, size_t len,
		     const struct cql_query_params *params)
{
	j->query = text;
	j->query_len = len;
	if (s->kind == CQL_STMT_USE) {
		char msg[160];
		if (!cql_schema_keyspace(j->e->schema, s->u.use_keyspace)) {
			snprintf(msg, sizeof(msg),
				 "Keyspace '%s' does not exist",
				 s->u.use_keyspace);
			reply_error(j, CQL_ERR_INVALID, msg);
			return;
		}
		cql_request_set_keyspace(j->req, s->u.use_keyspace);
		cql_encode_result_set_keyspace(&j->out, j->info->version,
					       j->info->stream,
					       s->u.use_keyspace);
		return;
	}
	if (is_ddl(s->kind)) {
		run_ddl(j, s, text, len);
		return;
	}
	if (s->kind == CQL_STMT_ROLE) {
		if (!j->e->hooks.role) {
			reply_error(j, CQL_ERR_INVALID,
				    "Roles are not served by this node");
			return;
		}
		struct cql_request *req = j->req;
		j->req = NULL;
		j->e->hooks.role(j->e->hooks.arg, req, j->info, &s->u.role);
		return;
	}
	if (s->kind == CQL_STMT_DESCRIBE) {
		struct cql_node_info node;
		j->e->hooks.node_info(j->e->hooks.arg, &node);
		cql_describe(j->e->schema, &node, &s->u.describe, j->keyspace,
			     params, j->info->version, j->info->stream,
			     &j->out);
		return;
	}
	const struct cql_value *binds = bind_values(j, params, nbinds, names);
	if (!binds && nbinds)
		return;
	if (s->kind == CQL_STMT_BATCH) {
		run_text_batch(j, s, binds, (size_t)nbinds, params);
		return;
	}
	const char *ks = NULL;
	const struct cql_table *t = resolve(j, s, j->keyspace, &ks);
	if (!ks)
		return;
	if (s->kind == CQL_STMT_SELECT && cql_system_keyspace_is_virtual(ks)) {
		struct cql_node_info node;
		struct cql_views_info views = {0};
		j->e->hooks.node_info(j->e->hooks.arg, &node);
		if (j->e->hooks.views && cql_system_keyspace_is_view(ks))
			j->e->hooks.views(j->e->hooks.arg, &views);
		cql_system_select(j->e->schema, j->e->views, &views, &node,
				  &s->u.select, ks, binds, params->value_count,
				  j->info->version, j->info->stream, &j->out);
		return;
	}
	if (!t && cql_system_keyspace_is_view(ks)) {
		view_write_refused(j, ks, stmt_table(s)->name);
		return;
	}
	if (!t)
		return; /* resolve() answered */
	if (cql_system_keyspace_is_virtual(ks)) {
		reply_error(j, CQL_ERR_UNAUTHORIZED,
			    "system keyspaces are read-only");
		return;
	}
	if (s->kind != CQL_STMT_SELECT && auth_write_refused(j, ks))
		return;
	if (check_binds(j, s, t, binds, (size_t)nbinds, &binds) != 0)
		return;
	struct cql_data_request dr = {
		.stmt = s,
		.table = t,
		.binds = binds,
		.bind_count = params->value_count,
		.params = params,
	};
	to_data_path(j, &dr);
}

/* ---- PREPARE / EXECUTE --------------------------------------------------- */

static void prepared_id(const char *ks, const char *q, size_t len,
			uint8_t id[16])
{
	uint64_t h[2], k[2] = {0, 0};
	murmur3_hash128(q, len, 0x5eed, h);
	if (ks)
		murmur3_hash128(ks, strlen(ks), 0x6b73, k);
	be64_store(id, h[0] ^ k[0]);
	be64_store(id + 8, h[1] ^ k[1]);
}

static struct prepared *prepared_find(struct cql_exec *e, const uint8_t *id,
				      size_t len)
{
	if (len != 16)
		return NULL;
	for (struct prepared *p = e->prepared; p; p = p->next)
		if (memcmp(p->id, id, 16) == 0)
			return p;
	return NULL;
}

static int prepared_add(struct cql_exec *e, const uint8_t id[16],
			const char *ks, const char *q, size_t len,
			const struct cql_table *const *tables, size_t ntables)
{
	if (prepared_find(e, id, 16))
		return 0;
	struct prepared *p = calloc(1, sizeof(*p));
	char *copy = malloc(len + 1);
	char *kcopy = ks ? strdup(ks) : NULL;
	char **names = calloc(ntables ? ntables : 1, sizeof(*names));
	bool ok = p && copy && (!ks || kcopy) && names;
	for (size_t i = 0; ok && i < ntables; i++) {
		const struct storage_table_meta *m = cql_table_meta(tables[i]);
		size_t n = strlen(m->keyspace) + strlen(m->name) + 2;
		if (!(names[i] = malloc(n)))
			ok = false;
		else
			snprintf(names[i], n, "%s.%s", m->keyspace, m->name);
	}
	if (!ok) {
		for (size_t i = 0; names && i < ntables; i++)
			free(names[i]);
		free(names);
		free(p);
		free(copy);
		free(kcopy);
		return err_set(ERR_NOMEM, "out of memory");
	}
	p->tables = names;
	p->table_count = ntables;
	memcpy(copy, q, len);
	copy[len] = '\0';
	memcpy(p->id, id, 16);
	p->query = copy;
	p->len = len;
	p->keyspace = kcopy;
	p->next = e->prepared;
	e->prepared = p;
	if (++e->prepared_count > PREPARED_MAX) {
		/* Drop the oldest; a client re-prepares on Unprepared. */
		struct prepared **pp = &e->prepared;
		while ((*pp)->next)
			pp = &(*pp)->next;
		prepared_free(*pp);
		*pp = NULL;
		e->prepared_count--;
	}
	return 0;
}

/* What Cassandra refuses when it prepares a statement, before any value
 * is bound (the same checks run again when it executes). */
static int prepare_check(struct job *j, const struct cql_stmt *s,
			 const struct cql_table *t)
{
	int rc = 0;
	if (s->kind == CQL_STMT_INSERT || s->kind == CQL_STMT_UPDATE ||
	    s->kind == CQL_STMT_DELETE)
		rc = cql_dml_check(s, t);
	else if (s->kind == CQL_STMT_SELECT)
		rc = cql_select_check(j->a, &s->u.select, t);
	if (rc != 0) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		reply_error(j,
			    err_code() == ERR_NOMEM ? CQL_ERR_SERVER
						    : CQL_ERR_INVALID,
			    msg);
	}
	return rc;
}

static void run_prepare(struct job *j, struct slice query)
{
	int nbinds;
	const char **names;
	struct cql_stmt *s = cql_parse(j->a, (const char *)query.ptr, query.len,
				       &nbinds, &names);
	if (!s) {
		reply_parse_error(j);
		return;
	}
	const char *ks = NULL;
	const struct cql_table *t = NULL;
	if (stmt_table(s)) {
		t = resolve(j, s, j->keyspace, &ks);
		if (!t && !(ks && cql_system_keyspace_is_view(ks)))
			return;
		if (!t && s->kind != CQL_STMT_SELECT) {
			view_write_refused(j, ks, stmt_table(s)->name);
			return;
		}
		if (!t && !(t = cql_schema_table(j->e->views, ks,
						 stmt_table(s)->name))) {
			char msg[256];
			snprintf(msg, sizeof(msg), "unconfigured table %s",
				 stmt_table(s)->name);
			reply_error(j, CQL_ERR_INVALID, msg);
			return;
		}
	}
	struct bind_spec *b =
		arena_alloc(j->a, (size_t)(nbinds + 1) * sizeof(*b));
	int pk[16];
	size_t npk = 0;
	uint16_t pk_idx[16];
	if (!b) {
		reply_error(j, CQL_ERR_SERVER, "out of memory");
		return;
	}
	memset(b, 0, (size_t)(nbinds + 1) * sizeof(*b));
	const struct cql_table **used = NULL;
	size_t nused = 0;
	if (s->kind == CQL_STMT_BATCH) {
		/* Each statement types its own markers; a batch has no single
		 * routing key, so no partition-key indexes (as Cassandra). */
		const struct cql_batch_stmt *bs = &s->u.batch;
		used = arena_alloc(j->a, (bs->count + 1) * sizeof(*used));
		if (!used) {
			reply_error(j, CQL_ERR_SERVER, "out of memory");
			return;
		}
		for (size_t i = 0; i < bs->count; i++) {
			const struct cql_stmt *in = bs->statements[i];
			if (!stmt_table(in))
				continue;
			const struct cql_table *it =
				resolve(j, in, j->keyspace, &ks);
			if (!it) {
				if (!(ks && cql_system_keyspace_is_view(ks)))
					return;
				continue;
			}
			if (prepare_check(j, in, it) != 0)
				return;
			if (bind_resolve(j->a, in, it, b, nbinds, pk) != 0) {
				reply_bind_error(j);
				return;
			}
			used[nused++] = it;
			if (!t)
				t = it;
		}
		struct bind_ctx x = {j->a, b, nbinds, t, false};
		bind_using(&x, &bs->using);
	} else if (t) {
		if (prepare_check(j, s, t) != 0)
			return;
		used = &t;
		nused = 1;
		if (bind_resolve(j->a, s, t, b, nbinds, pk) != 0) {
			reply_bind_error(j);
			return;
		}
		const struct storage_table_meta *m = cql_table_meta(t);
		npk = m->pk_count;
		for (size_t i = 0; i < npk; i++) {
			if (pk[i] < 0) {
				npk = 0;
				break;
			}
			pk_idx[i] = (uint16_t)pk[i];
		}
	}
	struct cql_column_spec *specs =
		arena_alloc(j->a, (size_t)(nbinds + 1) * sizeof(*specs));
	for (int i = 0; specs && i < nbinds; i++) {
		if (!b[i].known) {
			reply_error(j, CQL_ERR_INVALID,
				    "Cannot infer the type of a bind marker in "
				    "this position");
			return;
		}
		struct cql_type_option *o =
			cql_type_option_of(j->a, &b[i].type);
		if (o && b[i].in_list)
			o = cql_type_option_list_of(j->a, o);
		specs[i] = (struct cql_column_spec){
			t ? cql_table_meta(t)->keyspace : "",
			t ? cql_table_meta(t)->name : "", b[i].name, o};
		if (!specs[i].type)
			specs = NULL;
	}
	uint8_t id[16];
	prepared_id(j->keyspace, (const char *)query.ptr, query.len, id);
	if (!specs ||
	    prepared_add(j->e, id, j->keyspace, (const char *)query.ptr,
			 query.len, used, nused) != 0) {
		reply_error(j, CQL_ERR_SERVER, "out of memory");
		return;
	}
	/* A SELECT's result columns: drivers that ask for skip_metadata
	 * (gocql, the Java driver) read rows with these. Each Rows reply
	 * still carries its own. */
	struct cql_column_spec *results = NULL;
	size_t nresults = 0;
	if (s->kind == CQL_STMT_SELECT) {
		int rc = -1;
		if (ks && cql_system_keyspace_is_virtual(ks))
			rc = cql_system_select_specs(
				j->a, j->e->schema, j->e->views, &s->u.select,
				j->keyspace, &results, &nresults);
		else if (t)
			rc = cql_select_result_specs(j->a, &s->u.select, t,
						     &results, &nresults);
		if (rc != 0) {
			results = NULL;
			nresults = 0;
		}
	}
	long start = cql_frame_begin(&j->out, j->info->version, 0,
				     j->info->stream, CQL_OP_RESULT);
	if (start < 0 || cql_write_int(&j->out, CQL_RESULT_PREPARED) ||
	    cql_write_prepared(&j->out, j->info->version, id, 16, specs,
			       (size_t)nbinds, pk_idx, npk, results,
			       nresults)) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		reply_error(j, CQL_ERR_SERVER, msg);
		return;
	}
	cql_frame_end(&j->out, start);
}

static void run_execute(struct job *j, const struct cql_execute *x)
{
	struct prepared *p = prepared_find(j->e, x->id.ptr, x->id.len);
	if (!p) {
		cql_encode_unprepared(&j->out, j->info->version,
				      j->info->stream,
				      "Prepared query with ID not found",
				      x->id.ptr, (uint16_t)x->id.len);
		return;
	}
	/* Resolve names in the keyspace it was prepared in. */
	if (p->keyspace)
		j->keyspace = p->keyspace;
	if (!p->stmt && !p->uncacheable) {
		arena_create(&p->ast_arena, 0);
		p->stmt = cql_parse(&p->ast_arena, p->query, p->len, &p->nbinds,
				    &p->names);
		if (!p->stmt || !cacheable(p->stmt->kind)) {
			arena_destroy(&p->ast_arena);
			p->stmt = NULL;
			p->uncacheable = true;
		}
	}
	if (p->stmt)
		run_stmt(j, p->stmt, p->nbinds, p->names, p->query, p->len,
			 &x->params);
	else
		run(j, p->query, p->len, &x->params);
}

/* ---- entry point --------------------------------------------------------- */

void cql_exec_execute(void *arg, struct cql_request *req,
		      const struct cql_request_info *info, const uint8_t *body,
		      size_t len)
{
	struct arena a;
	struct job j = {.e = arg,
			.req = req,
			.info = info,
			.keyspace = info->keyspace,
			.a = &a};
	struct cursor c = cursor_make(body, len);
	arena_create(&a, 0);
	buf_init(&j.out);
	switch (info->opcode) {
	case CQL_OP_QUERY: {
		struct cql_query q;
		if (cql_decode_query(&c, info->version, &a, &q) != 0)
			reply_error(&j, CQL_ERR_PROTOCOL, err_msg());
		else
			run(&j, (const char *)q.query.ptr, q.query.len,
			    &q.params);
		break;
	}
	case CQL_OP_PREPARE: {
		struct slice q;
		if (cql_decode_prepare(&c, &q) != 0)
			reply_error(&j, CQL_ERR_PROTOCOL, err_msg());
		else
			run_prepare(&j, q);
		break;
	}
	case CQL_OP_EXECUTE: {
		struct cql_execute x;
		if (cql_decode_execute(&c, info->version, &a, &x) != 0)
			reply_error(&j, CQL_ERR_PROTOCOL, err_msg());
		else
			run_execute(&j, &x);
		break;
	}
	default: {
		struct cql_batch b;
		if (cql_decode_batch(&c, info->version, &a, &b) != 0)
			reply_error(&j, CQL_ERR_PROTOCOL, err_msg());
		else
			run_protocol_batch(&j, &b);
	}
	}
	if (j.req)
		finish(&j);
	else
		buf_free(&j.out);
	arena_destroy(&a);
}
