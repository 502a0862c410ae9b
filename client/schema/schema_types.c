/*
 * User-defined types: CREATE TYPE, ALTER TYPE ADD / RENAME, DROP TYPE, as
 * Cassandra 4.1's CreateTypeStatement, AlterTypeStatement and
 * DropTypeStatement apply them, with their checks in their order and
 * their sentences.
 *
 * A type lives in its keyspace (struct cql_user_type, sorted by name),
 * is replaced by an ALTER (the old object retired for pinned readers like
 * a table), and goes with its keyspace. Its field types are kept as the
 * CQL text Cassandra prints for the prepared type: native names (varchar
 * is text), collections frozen or not as declared with their elements
 * frozen, tuples always frozen, user types as frozen<name> unless they
 * are a non-frozen column's type (never inside a type: a type's fields
 * hold frozen user types only). Fields may name user types of the same
 * keyspace only; a type cannot name itself (it does not exist while it is
 * created, and ALTER TYPE ADD refuses a circular reference).
 *
 * What the statement travels as is its text (schema log, schema push):
 * the registry replays it like any DDL.
 */
#include "client/schema/schema_ddl_internal.h"

#include "client/schema/describe.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the type objects ---------------------------------------------------- */

void schema_type_free(struct cql_user_type *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->field_count; i++) {
		free(t->field_names[i]);
		free(t->field_types[i]);
	}
	for (size_t i = 0; i < t->ref_count; i++)
		free(t->refs[i]);
	free(t->field_names);
	free(t->field_types);
	free(t->refs);
	free(t->keyspace);
	free(t->name);
	storage_type_unref(t->node);
	free(t);
}

static struct cql_user_type *type_alloc(const char *ks, const char *name,
					size_t fields)
{
	struct cql_user_type *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	size_t n = fields ? fields : 1;
	t->keyspace = strdup(ks);
	t->name = strdup(name);
	t->field_names = calloc(n, sizeof(char *));
	t->field_types = calloc(n, sizeof(char *));
	t->refs = calloc(n, sizeof(char *));
	if (!t->keyspace || !t->name || !t->field_names || !t->field_types ||
	    !t->refs) {
		schema_type_free(t);
		return NULL;
	}
	return t;
}

/* Its share of the schema version: a hash of its definition. */
static void type_digest(struct cql_user_type *t)
{
	struct buf b;
	buf_init(&b);
	buf_append(&b, t->name, strlen(t->name) + 1);
	for (size_t i = 0; i < t->field_count; i++) {
		buf_append(&b, t->field_names[i],
			   strlen(t->field_names[i]) + 1);
		buf_append(&b, t->field_types[i],
			   strlen(t->field_types[i]) + 1);
	}
	murmur3_hash128(b.data ? b.data : (const uint8_t *)"", b.len,
			0x75647400, t->digest);
	buf_free(&b);
}

static bool has_ref(const struct cql_user_type *t, const char *name)
{
	for (size_t i = 0; i < t->ref_count; i++)
		if (strcmp(t->refs[i], name) == 0)
			return true;
	return false;
}

/* Whether `t` names user type `name`, directly or through the types its
 * fields name (AbstractType.referencesUserType). The graph has no cycle:
 * depth bounds the walk all the same. */
static bool type_references(const struct cql_keyspace *k,
			    const struct cql_user_type *t, const char *name,
			    size_t depth)
{
	if (has_ref(t, name))
		return true;
	if (depth > k->type_count)
		return false;
	for (size_t i = 0; i < t->ref_count; i++) {
		const struct cql_user_type *r =
			schema_type_mut((struct cql_keyspace *)k, t->refs[i]);
		if (r && type_references(k, r, name, depth + 1))
			return true;
	}
	return false;
}

/* ---- field types --------------------------------------------------------- */

static const char *const native_names[] = {
	"ascii",    "bigint",  "blob",     "boolean",   "counter",  "date",
	"decimal",  "double",  "duration", "float",     "inet",     "int",
	"smallint", "text",    "time",     "timestamp", "timeuuid", "tinyint",
	"uuid",     "varchar", "varint",
};

static bool is_native(const char *name)
{
	for (size_t i = 0; i < sizeof(native_names) / sizeof(native_names[0]);
	     i++)
		if (strcmp(native_names[i], name) == 0)
			return true;
	return false;
}

static bool is_collection(const struct cql_type_ast *t)
{
	return !t->keyspace &&
	       (strcmp(t->name, "list") == 0 || strcmp(t->name, "set") == 0 ||
		strcmp(t->name, "map") == 0);
}

static bool is_tuple(const struct cql_type_ast *t)
{
	return !t->keyspace && strcmp(t->name, "tuple") == 0;
}

/* A user type's name (not native, not a collection or tuple). */
static bool is_udt(const struct cql_type_ast *t)
{
	return t->keyspace || (!is_native(t->name) && !is_collection(t) &&
			       !is_tuple(t) && strcmp(t->name, "vector") != 0);
}

/* The type as written (CQL3Type.Raw.toString), for messages. */
static void raw_text(struct buf *b, const struct cql_type_ast *t)
{
	if (t->frozen)
		buf_append(b, "frozen<", 7);
	if (t->keyspace) {
		buf_append(b, t->keyspace, strlen(t->keyspace));
		buf_append(b, ".", 1);
	}
	buf_append(b, t->name, strlen(t->name));
	if (t->param_count) {
		buf_append(b, "<", 1);
		for (size_t i = 0; i < t->param_count; i++) {
			if (i)
				buf_append(b, ", ", 2);
			raw_text(b, t->params[i]);
		}
		buf_append(b, ">", 1);
	}
	if (t->frozen)
		buf_append(b, ">", 1);
}

/* The raw text in a string (cut to fit). */
static void raw_string(const struct cql_type_ast *t, char *dst, size_t cap)
{
	struct buf b;
	buf_init(&b);
	raw_text(&b, t);
	snprintf(dst, cap, "%.*s", (int)b.len, b.data ? (char *)b.data : "");
	buf_free(&b);
}

/* Fails with `prefix`, the raw text of `t`, `suffix`. */
static enum cql_schema_status
fail_raw(const char *prefix, const struct cql_type_ast *t, const char *suffix)
{
	char raw[256];
	raw_string(t, raw, sizeof(raw));
	return fail(CQL_SCHEMA_INVALID, "%s%s%s", prefix, raw, suffix);
}

/* What preparing a field type needs and collects. */
struct prep {
	const struct cql_keyspace *k;
	struct buf *out;
	struct cql_user_type *t; /* refs go here */
};

static enum cql_schema_status add_ref(struct prep *p, const char *name)
{
	if (has_ref(p->t, name))
		return CQL_SCHEMA_OK;
	/* refs has room for one per field: grow past that */
	char **refs =
		realloc(p->t->refs, (p->t->ref_count + 1) * sizeof(char *));
	if (!refs)
		return nomem();
	p->t->refs = refs;
	if (!(refs[p->t->ref_count] = strdup(name)))
		return nomem();
	p->t->ref_count++;
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status
prepare(struct prep *p, const struct cql_type_ast *t, bool frozen, int depth);

/* A collection's element: frozen when the collection is, else it must be
 * frozen itself if it can be. */
static enum cql_schema_status prepare_element(struct prep *p,
					      const struct cql_type_ast *coll,
					      const struct cql_type_ast *e,
					      bool frozen, int depth)
{
	if (!frozen && !e->frozen && is_collection(e))
		return fail_raw("Non-frozen collections are not allowed inside "
				"collections: ",
				coll, "");
	if (!frozen && !e->frozen && is_udt(e))
		return fail_raw("Non-frozen UDTs are not allowed inside "
				"collections: ",
				coll, "");
	if (!e->keyspace && strcmp(e->name, "counter") == 0)
		return fail_raw("Counters are not allowed inside collections: ",
				coll, "");
	return prepare(p, e, true, depth + 1);
}

static enum cql_schema_status prepare_collection(struct prep *p,
						 const struct cql_type_ast *t,
						 bool frozen, int depth)
{
	bool map = strcmp(t->name, "map") == 0;
	size_t want = map ? 2 : 1;
	enum cql_schema_status st;
	if (t->param_count != want)
		return fail(CQL_SCHEMA_INVALID, "%s takes %zu type parameter%s",
			    t->name, want, want > 1 ? "s" : "");
	const struct cql_type_ast *first = t->params[0];
	if (!first->keyspace && strcmp(first->name, "duration") == 0 &&
	    !first->param_count) {
		if (strcmp(t->name, "set") == 0)
			return fail_raw(
				"Durations are not allowed inside sets: ", t,
				"");
		if (map)
			return fail_raw(
				"Durations are not allowed as map keys: ", t,
				"");
	}
	if (frozen)
		buf_append(p->out, "frozen<", 7);
	buf_append(p->out, t->name, strlen(t->name));
	buf_append(p->out, "<", 1);
	if ((st = prepare_element(p, t, t->params[0], frozen, depth)) !=
	    CQL_SCHEMA_OK)
		return st;
	if (map) {
		buf_append(p->out, ", ", 2);
		if ((st = prepare_element(p, t, t->params[1], frozen, depth)) !=
		    CQL_SCHEMA_OK)
			return st;
	}
	buf_append(p->out, ">", 1);
	if (frozen)
		buf_append(p->out, ">", 1);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status
prepare_tuple(struct prep *p, const struct cql_type_ast *t, int depth)
{
	enum cql_schema_status st;
	if (!t->param_count)
		return fail(CQL_SCHEMA_INVALID,
			    "tuple type must have at least one component");
	buf_append(p->out, "frozen<tuple<", 13);
	for (size_t i = 0; i < t->param_count; i++) {
		const struct cql_type_ast *e = t->params[i];
		if (!e->keyspace && strcmp(e->name, "counter") == 0)
			return fail(CQL_SCHEMA_INVALID,
				    "Counters are not allowed inside tuples");
		if (i)
			buf_append(p->out, ", ", 2);
		if ((st = prepare(p, e, true, depth + 1)) != CQL_SCHEMA_OK)
			return st;
	}
	buf_append(p->out, ">>", 2);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status
prepare_udt(struct prep *p, const struct cql_type_ast *t, bool frozen)
{
	const char *ks = p->k->meta->name;
	if (t->keyspace && strcmp(t->keyspace, ks) != 0)
		return fail(CQL_SCHEMA_INVALID,
			    "Statement on keyspace %s cannot refer to a user "
			    "type in keyspace %s; user types can only be used "
			    "in the keyspace they are defined in",
			    ks, t->keyspace);
	if (t->param_count ||
	    !schema_type_mut((struct cql_keyspace *)p->k, t->name))
		return fail(CQL_SCHEMA_INVALID, "Unknown type %s.%s", ks,
			    t->name);
	if (frozen)
		buf_append(p->out, "frozen<", 7);
	if (cql_describe_name(t->name, p->out) != 0)
		return nomem();
	if (frozen)
		buf_append(p->out, ">", 1);
	return add_ref(p, t->name);
}

/* Appends the CQL text of `t` (frozen: it is inside a frozen type). */
static enum cql_schema_status
prepare(struct prep *p, const struct cql_type_ast *t, bool frozen, int depth)
{
	if (depth > 32)
		return fail(CQL_SCHEMA_INVALID, "type nested too deep");
	frozen = frozen || t->frozen;
	if (is_collection(t))
		return prepare_collection(p, t, frozen, depth);
	if (is_tuple(t))
		return prepare_tuple(p, t, depth);
	if (!t->keyspace && strcmp(t->name, "vector") == 0)
		return fail(CQL_SCHEMA_UNSUPPORTED,
			    "The vector type is not supported by Cassini yet");
	if (is_udt(t))
		return prepare_udt(p, t, frozen);
	if (t->param_count)
		return fail(CQL_SCHEMA_INVALID, "Type %s takes no parameters",
			    t->name);
	if (t->frozen)
		return fail(CQL_SCHEMA_INVALID,
			    "frozen<> is only allowed on collections, tuples, "
			    "and user-defined types (got %s)",
			    t->name);
	const char *name = strcmp(t->name, "varchar") == 0 ? "text" : t->name;
	buf_append(p->out, name, strlen(name));
	return CQL_SCHEMA_OK;
}

/* Field i of `ut` gets the prepared text of `ast`. */
static enum cql_schema_status set_field(const struct cql_keyspace *k,
					struct cql_user_type *ut, size_t i,
					const char *name,
					const struct cql_type_ast *ast)
{
	struct buf b;
	buf_init(&b);
	struct prep p = {k, &b, ut};
	enum cql_schema_status st = prepare(&p, ast, false, 0);
	if (st == CQL_SCHEMA_OK) {
		buf_append(&b, "", 1);
		if (!b.data || !(ut->field_types[i] = strdup((char *)b.data)) ||
		    !(ut->field_names[i] = strdup(name)))
			st = nomem();
	}
	buf_free(&b);
	return st;
}

/* ---- nodes --------------------------------------------------------------- */

/* ut->node from its fields' types (borrowed). */
static enum cql_schema_status make_node(struct cql_user_type *ut,
					const struct storage_type *const *subs)
{
	ut->node = storage_type_new_udt(ut->keyspace, ut->name,
					(const char *const *)ut->field_names,
					subs, ut->field_count, true);
	return ut->node ? CQL_SCHEMA_OK : nomem();
}

const struct storage_type *schema_type_node(const struct cql_keyspace *k,
					    const char *name)
{
	const struct cql_user_type *t =
		schema_type_mut((struct cql_keyspace *)k, name);
	return t ? t->node : NULL;
}

static bool names_type(const struct storage_type *t, const char *ks,
		       const char *name)
{
	return t->kind == STORAGE_TYPE_UDT && strcmp(t->name, name) == 0 &&
	       strcmp(t->keyspace, ks) == 0;
}

static bool type_uses(const struct storage_type *t, const char *ks,
		      const char *name, int depth)
{
	if (names_type(t, ks, name))
		return true;
	if (depth > STORAGE_TYPE_MAX_DEPTH)
		return false;
	for (size_t i = 0; i < t->count; i++)
		if (type_uses(t->sub[i], ks, name, depth + 1))
			return true;
	return false;
}

static const struct storage_type *rebuild(const struct storage_type *t,
					  const char *ks, const char *name,
					  const struct storage_type *repl,
					  int depth)
{
	if (names_type(t, ks, name))
		return storage_type_with_frozen(repl, t->frozen);
	if (!t->count || depth > STORAGE_TYPE_MAX_DEPTH ||
	    !type_uses(t, ks, name, depth))
		return storage_type_hold(t);
	const struct storage_type **subs = calloc(t->count, sizeof(*subs));
	if (!subs)
		return NULL;
	bool ok = true;
	for (size_t i = 0; i < t->count && ok; i++)
		ok = (subs[i] = rebuild(t->sub[i], ks, name, repl,
					depth + 1)) != NULL;
	const struct storage_type *out = NULL;
	if (ok) {
		switch (t->kind) {
		case STORAGE_TYPE_TUPLE:
			out = storage_type_new_tuple(subs, t->count);
			break;
		case STORAGE_TYPE_UDT:
			out = storage_type_new_udt(t->keyspace, t->name,
						   t->field_names, subs,
						   t->count, t->frozen);
			break;
		case STORAGE_TYPE_VECTOR:
			out = storage_type_new_vector(subs[0], t->dimension);
			break;
		default: /* list, set, map */
			out = storage_type_new_collection(
				t->kind, t->frozen, subs[0],
				t->count > 1 ? subs[1] : NULL);
		}
	}
	for (size_t i = 0; i < t->count; i++)
		storage_type_unref(subs[i]);
	free(subs);
	return out;
}

const struct storage_type *schema_type_rebuild(const struct storage_type *t,
					       const char *ks, const char *name,
					       const struct storage_type *repl)
{
	const struct storage_type *out = rebuild(t, ks, name, repl, 0);
	if (!out)
		err_set(ERR_NOMEM, "out of memory");
	return out;
}

bool schema_table_uses_type(const struct cql_keyspace *k,
			    const struct cql_table *t, const char *name,
			    bool key_only)
{
	const struct storage_table_meta *m = t->meta;
	for (size_t i = 0; i < m->column_count; i++) {
		const struct storage_column *c = &m->columns[i];
		if (c->dropped ||
		    (key_only && c->kind != STORAGE_COLUMN_PARTITION_KEY))
			continue;
		if (type_uses(c->type, k->meta->name, name, 0))
			return true;
	}
	return false;
}

bool cql_table_uses_type(const struct cql_keyspace *k,
			 const struct cql_table *t, const char *name)
{
	return schema_table_uses_type(k, t, name, false);
}

/* ---- statements ---------------------------------------------------------- */

static void type_change(struct cql_schema_change *c, const char *change,
			const char *ks, const char *name)
{
	memset(c, 0, sizeof(*c));
	c->change = change;
	c->target = "TYPE";
	c->columns_before = -1;
	snprintf(c->keyspace, sizeof(c->keyspace), "%s", ks);
	snprintf(c->name, sizeof(c->name), "%s", name);
}

static enum cql_schema_status resolve_keyspace(struct cql_schema *s,
					       const struct cql_type_stmt *ts,
					       const char *current,
					       const char **name,
					       struct cql_keyspace **k)
{
	*k = NULL;
	*name = ts->name.keyspace ? ts->name.keyspace : current;
	if (!*name)
		return fail(
			CQL_SCHEMA_INVALID,
			"No keyspace has been specified. USE a keyspace, or "
			"explicitly specify keyspace.tablename");
	*k = schema_keyspace_mut(s, *name);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status create_type(struct cql_schema *s,
					  const struct cql_type_stmt *ts,
					  const char *current, bool internal,
					  struct cql_schema_change *change)
{
	const char *ksn, *name = ts->name.name;
	struct cql_keyspace *k;
	enum cql_schema_status st = resolve_keyspace(s, ts, current, &ksn, &k);
	if (st != CQL_SCHEMA_OK)
		return st;
	if (!k)
		return fail(CQL_SCHEMA_INVALID, "Keyspace '%s' doesn't exist",
			    ksn);
	if (!internal && k->system)
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ksn);
	if (schema_type_mut(k, name)) {
		if (ts->if_not_exists)
			return CQL_SCHEMA_NOOP;
		return fail(CQL_SCHEMA_INVALID,
			    "A user type with name '%s' already exists", name);
	}
	for (size_t i = 0; i < ts->field_count; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(ts->fields[i], ts->fields[j]) == 0)
				return fail(CQL_SCHEMA_INVALID,
					    "Duplicate field name '%s' in type "
					    "'%s'",
					    ts->fields[i], name);
	for (size_t i = 0; i < ts->field_count; i++) {
		const struct cql_type_ast *t = ts->types[i];
		if (!t->keyspace && strcmp(t->name, "counter") == 0)
			return fail(CQL_SCHEMA_INVALID,
				    "A user type cannot contain counters");
		if (is_udt(t) && !t->frozen)
			return fail(CQL_SCHEMA_INVALID,
				    "A user type cannot contain non-frozen "
				    "UDTs");
	}
	struct cql_user_type *ut = type_alloc(ksn, name, ts->field_count);
	if (!ut)
		return nomem();
	for (size_t i = 0; i < ts->field_count; i++) {
		if ((st = set_field(k, ut, i, ts->fields[i], ts->types[i])) !=
		    CQL_SCHEMA_OK) {
			schema_type_free(ut);
			return st;
		}
		ut->field_count++;
	}
	const struct storage_type **subs =
		calloc(ut->field_count ? ut->field_count : 1, sizeof(*subs));
	if (!subs) {
		schema_type_free(ut);
		return nomem();
	}
	for (size_t i = 0; st == CQL_SCHEMA_OK && i < ut->field_count; i++)
		st = cql_schema_type_resolve(ts->types[i], k, &subs[i]);
	if (st == CQL_SCHEMA_OK)
		st = make_node(ut, subs);
	for (size_t i = 0; i < ut->field_count; i++)
		storage_type_unref(subs[i]);
	free(subs);
	if (st != CQL_SCHEMA_OK) {
		schema_type_free(ut);
		return st;
	}
	type_digest(ut);
	if (schema_type_insert(k, ut) != 0) {
		schema_type_free(ut);
		return nomem();
	}
	type_change(change, "CREATED", ksn, name);
	return CQL_SCHEMA_OK;
}

static bool same_type(const struct cql_user_type *a,
		      const struct cql_user_type *b)
{
	if (a->field_count != b->field_count)
		return false;
	for (size_t i = 0; i < a->field_count; i++)
		if (strcmp(a->field_names[i], b->field_names[i]) != 0 ||
		    strcmp(a->field_types[i], b->field_types[i]) != 0)
			return false;
	return true;
}

/* Orders two definitions of one type: fields by name then type, fewer
 * first. */
static int type_cmp(const struct cql_user_type *a,
		    const struct cql_user_type *b)
{
	for (size_t i = 0; i < a->field_count && i < b->field_count; i++) {
		int c = strcmp(a->field_names[i], b->field_names[i]);
		if (c == 0)
			c = strcmp(a->field_types[i], b->field_types[i]);
		if (c)
			return c;
	}
	return a->field_count < b->field_count   ? -1
	       : a->field_count > b->field_count ? 1
						 : 0;
}

/* A CREATE TYPE another node applied: when the type exists here (two
 * nodes created it at once, or this is an echo of its creation), the
 * definition that sorts first stays on every node. */
static enum cql_schema_status
create_type_replicated(struct cql_schema *s, const struct cql_type_stmt *ts,
		       const char *current, struct cql_schema_change *change)
{
	const char *ksn;
	struct cql_keyspace *k;
	enum cql_schema_status st = resolve_keyspace(s, ts, current, &ksn, &k);
	if (st != CQL_SCHEMA_OK)
		return st;
	struct cql_user_type *old =
		k ? schema_type_mut(k, ts->name.name) : NULL;
	if (!old)
		return create_type(s, ts, current, false, change);
	/* build the statement's version beside the existing one */
	schema_type_remove(k, old);
	struct cql_type_stmt plain = *ts;
	plain.if_not_exists = false;
	st = create_type(s, &plain, current, false, change);
	struct cql_user_type *made =
		st == CQL_SCHEMA_OK ? schema_type_mut(k, ts->name.name) : NULL;
	if (made)
		schema_type_remove(k, made);
	if (!made || same_type(made, old) || type_cmp(made, old) >= 0) {
		schema_type_free(made);
		schema_type_insert(k, old); /* its slot is free */
		return made ? CQL_SCHEMA_NOOP : st;
	}
	if (schema_retire(s, RETIRED_TYPE, old) != 0) {
		schema_type_free(made);
		schema_type_insert(k, old);
		return nomem();
	}
	schema_type_insert(k, made);
	type_change(change, "UPDATED", ksn, ts->name.name);
	return CQL_SCHEMA_OK;
}

/* A copy of `old` with room for `extra` more fields. */
static struct cql_user_type *type_copy(const struct cql_user_type *old,
				       size_t extra)
{
	struct cql_user_type *t =
		type_alloc(old->keyspace, old->name, old->field_count + extra);
	if (!t)
		return NULL;
	char **refs =
		realloc(t->refs, (old->ref_count + extra + 1) * sizeof(char *));
	if (!refs) {
		schema_type_free(t);
		return NULL;
	}
	t->refs = refs;
	for (size_t i = 0; i < old->field_count; i++) {
		t->field_names[i] = strdup(old->field_names[i]);
		t->field_types[i] = strdup(old->field_types[i]);
		t->field_count++;
		if (!t->field_names[i] || !t->field_types[i]) {
			schema_type_free(t);
			return NULL;
		}
	}
	for (size_t i = 0; i < old->ref_count; i++) {
		if (!(t->refs[i] = strdup(old->refs[i]))) {
			schema_type_free(t);
			return NULL;
		}
		t->ref_count++;
	}
	return t;
}

static enum cql_schema_status alter_add(const struct cql_keyspace *k,
					const struct cql_user_type *old,
					const struct cql_type_stmt *ts,
					struct cql_user_type **out)
{
	const char *field = ts->fields[0];
	for (size_t i = 0; i < old->field_count; i++)
		if (strcmp(old->field_names[i], field) == 0) {
			if (ts->field_if)
				return CQL_SCHEMA_NOOP;
			return fail(
				CQL_SCHEMA_INVALID,
				"Cannot add field %s to type %s.%s: a field "
				"with name %s already exists",
				field, old->keyspace, old->name, field);
		}
	const struct cql_type_ast *ast = ts->types[0];
	struct cql_user_type *t = type_copy(old, 1);
	if (!t)
		return nomem();
	size_t refs_before = t->ref_count;
	enum cql_schema_status st = set_field(k, t, t->field_count, field, ast);
	if (st != CQL_SCHEMA_OK) {
		schema_type_free(t);
		return st;
	}
	t->field_count++;
	/* ADD of a field of the type itself, or of a type that names it */
	bool circular = false;
	for (size_t i = refs_before; i < t->ref_count && !circular; i++) {
		const struct cql_user_type *r =
			schema_type_mut((struct cql_keyspace *)k, t->refs[i]);
		circular = strcmp(t->refs[i], old->name) == 0 ||
			   (r && type_references(k, r, old->name, 0));
	}
	if (circular) {
		char raw[256];
		raw_string(ast, raw, sizeof(raw));
		schema_type_free(t);
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot add new field %s of type %s to user type "
			    "%s.%s as it would create a circular reference",
			    field, raw, old->keyspace, old->name);
	}
	/* a partition key's tokens would change */
	struct buf tables;
	buf_init(&tables);
	for (size_t i = 0; i < k->table_count; i++) {
		if (!schema_table_uses_type(k, k->tables[i], old->name, true))
			continue;
		if (tables.len)
			buf_append(&tables, ", ", 2);
		buf_append(&tables, old->keyspace, strlen(old->keyspace));
		buf_append(&tables, ".", 1);
		buf_append(&tables, k->tables[i]->meta->name,
			   strlen(k->tables[i]->meta->name));
	}
	if (tables.len) {
		char raw[256];
		raw_string(ast, raw, sizeof(raw));
		st = fail(CQL_SCHEMA_INVALID,
			  "Cannot add new field %s of type %s to user type "
			  "%s.%s as the type is being used in partition key by "
			  "the following tables: %.*s",
			  field, raw, old->keyspace, old->name, (int)tables.len,
			  (const char *)tables.data);
		buf_free(&tables);
		schema_type_free(t);
		return st;
	}
	buf_free(&tables);
	size_t n = old->field_count;
	const struct storage_type **subs = calloc(n + 1, sizeof(*subs));
	if (!subs) {
		schema_type_free(t);
		return nomem();
	}
	for (size_t i = 0; i < n; i++)
		subs[i] = old->node->sub[i];
	st = cql_schema_type_resolve(ast, k, &subs[n]);
	if (st == CQL_SCHEMA_OK)
		st = make_node(t, subs);
	storage_type_unref(subs[n]);
	free(subs);
	if (st != CQL_SCHEMA_OK) {
		schema_type_free(t);
		return st;
	}
	*out = t;
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status alter_rename(const struct cql_user_type *old,
					   const struct cql_type_stmt *ts,
					   struct cql_user_type **out)
{
	struct cql_user_type *t = type_copy(old, 0);
	if (!t)
		return nomem();
	for (size_t i = 0; i + 1 < ts->field_count; i += 2) {
		const char *from = ts->fields[i], *to = ts->fields[i + 1];
		size_t at = old->field_count;
		for (size_t f = 0; f < old->field_count; f++)
			if (strcmp(old->field_names[f], from) == 0)
				at = f;
		if (at == old->field_count) {
			if (ts->field_if)
				continue;
			schema_type_free(t);
			return fail(CQL_SCHEMA_INVALID,
				    "Unkown field %s in user type %s.%s", from,
				    old->keyspace, old->name);
		}
		char *dup = strdup(to);
		if (!dup) {
			schema_type_free(t);
			return nomem();
		}
		free(t->field_names[at]);
		t->field_names[at] = dup;
	}
	for (size_t i = 0; i < t->field_count; i++)
		for (size_t j = 0; j < t->field_count; j++)
			if (i != j &&
			    strcmp(t->field_names[i], t->field_names[j]) == 0) {
				/* Cassandra's format names the keyspace in
				 * the type's place */
				enum cql_schema_status st = fail(
					CQL_SCHEMA_INVALID,
					"Duplicate field name %s in type %s",
					t->field_names[i], old->keyspace);
				schema_type_free(t);
				return st;
			}
	enum cql_schema_status st = make_node(t, old->node->sub);
	if (st != CQL_SCHEMA_OK) {
		schema_type_free(t);
		return st;
	}
	*out = t;
	return CQL_SCHEMA_OK;
}

/* Puts `t` in place of `old`, and new versions of the types and tables
 * that name it (directly or through other types) in place of theirs, so
 * their nodes describe the new definition. Everything that can fail is
 * built before anything changes. Takes `t`. */
static enum cql_schema_status replace_everywhere(struct cql_schema *s,
						 struct cql_keyspace *k,
						 struct cql_user_type *old,
						 struct cql_user_type *t)
{
	size_t nt = k->type_count, nb = k->table_count;
	struct cql_user_type **types = calloc(nt ? nt : 1, sizeof(*types));
	struct cql_table **tables = calloc(nb ? nb : 1, sizeof(*tables));
	bool ok = types && tables;
	for (size_t i = 0; ok && i < nt; i++) {
		const struct cql_user_type *u = k->types[i];
		if (u == old || !type_references(k, u, old->name, 0))
			continue;
		struct cql_user_type *c = type_copy(u, 0);
		ok = c && (c->node = schema_type_rebuild(u->node, k->meta->name,
							 old->name, t->node));
		if (c) {
			type_digest(c);
			types[i] = c;
		}
	}
	for (size_t i = 0; ok && i < nb; i++)
		if (schema_table_uses_type(k, k->tables[i], old->name, false))
			ok = (tables[i] = schema_table_retyped(
				      k->tables[i], old->name, t->node)) !=
			     NULL;
	size_t retiring = 1;
	for (size_t i = 0; ok && i < nt; i++)
		retiring += types[i] != NULL;
	for (size_t i = 0; ok && i < nb; i++)
		retiring += tables[i] != NULL;
	/* room in the retired list for all, so the retires below cannot
	 * fail half way */
	ok = ok && schema_reserve_retired(s, retiring) == 0;
	if (!ok) {
		for (size_t i = 0; types && i < nt; i++)
			schema_type_free(types[i]);
		for (size_t i = 0; tables && i < nb; i++)
			schema_table_free(tables[i]);
		free(types);
		free(tables);
		schema_type_free(t);
		return nomem();
	}
	for (size_t i = 0; i < nt; i++) {
		if (!types[i])
			continue;
		struct cql_user_type *u = schema_type_mut(k, types[i]->name);
		schema_retire(s, RETIRED_TYPE, u);
		schema_type_remove(k, u);
		schema_type_insert(k, types[i]); /* its slot was freed */
	}
	for (size_t i = 0; i < nb; i++) {
		if (!tables[i])
			continue;
		struct cql_table *b =
			schema_table_mut(k, tables[i]->meta->name);
		schema_retire(s, RETIRED_TABLE, b);
		schema_table_remove(k, b);
		schema_table_insert(k, tables[i]); /* its slot was freed */
	}
	schema_retire(s, RETIRED_TYPE, old);
	schema_type_remove(k, old);
	schema_type_insert(k, t); /* cannot fail: the slot was freed */
	free(types);
	free(tables);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status alter_type(struct cql_schema *s,
					 const struct cql_type_stmt *ts,
					 const char *current, bool internal,
					 struct cql_schema_change *change)
{
	const char *ksn, *name = ts->name.name;
	struct cql_keyspace *k;
	enum cql_schema_status st = resolve_keyspace(s, ts, current, &ksn, &k);
	if (st != CQL_SCHEMA_OK)
		return st;
	struct cql_user_type *old = k ? schema_type_mut(k, name) : NULL;
	if (!old) {
		if (ts->if_exists)
			return CQL_SCHEMA_NOOP;
		return fail(CQL_SCHEMA_INVALID, "Type %s.%s doesn't exist", ksn,
			    name);
	}
	if (!internal && k->system)
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ksn);
	if (ts->alter == CQL_ALTER_TYPE_ALTER)
		return fail(CQL_SCHEMA_INVALID,
			    "Altering field types is no longer supported");
	struct cql_user_type *t = NULL;
	st = ts->alter == CQL_ALTER_TYPE_ADD ? alter_add(k, old, ts, &t)
					     : alter_rename(old, ts, &t);
	if (st != CQL_SCHEMA_OK)
		return st;
	type_digest(t);
	st = replace_everywhere(s, k, old, t);
	if (st != CQL_SCHEMA_OK)
		return st;
	type_change(change, "UPDATED", ksn, name);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status drop_type(struct cql_schema *s,
					const struct cql_type_stmt *ts,
					const char *current, bool internal,
					struct cql_schema_change *change)
{
	const char *ksn, *name = ts->name.name;
	struct cql_keyspace *k;
	enum cql_schema_status st = resolve_keyspace(s, ts, current, &ksn, &k);
	if (st != CQL_SCHEMA_OK)
		return st;
	struct cql_user_type *t = k ? schema_type_mut(k, name) : NULL;
	if (!t) {
		if (ts->if_exists)
			return CQL_SCHEMA_NOOP;
		return fail(CQL_SCHEMA_INVALID, "Type '%s.%s' doesn't exist",
			    ksn, name);
	}
	if (!internal && k->system)
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ksn);
	struct buf users;
	buf_init(&users);
	for (size_t i = 0; i < k->type_count; i++) {
		if (!type_references(k, k->types[i], name, 0))
			continue;
		if (users.len)
			buf_append(&users, ", ", 2);
		buf_append(&users, k->types[i]->name,
			   strlen(k->types[i]->name));
	}
	const char *what = "user types";
	if (!users.len) {
		what = "tables";
		for (size_t i = 0; i < k->table_count; i++) {
			if (!schema_table_uses_type(k, k->tables[i], name,
						    false))
				continue;
			if (users.len)
				buf_append(&users, ", ", 2);
			buf_append(&users, k->tables[i]->meta->name,
				   strlen(k->tables[i]->meta->name));
		}
	}
	if (users.len) {
		buf_append(&users, "", 1);
		st = users.data ? fail(CQL_SCHEMA_INVALID,
				       "Cannot drop user type '%s.%s' as it "
				       "is still used by %s %s",
				       ksn, name, what, (char *)users.data)
				: nomem();
		buf_free(&users);
		return st;
	}
	buf_free(&users);
	if (schema_retire(s, RETIRED_TYPE, t) != 0)
		return nomem();
	schema_type_remove(k, t);
	type_change(change, "DROPPED", ksn, name);
	return CQL_SCHEMA_OK;
}

enum cql_schema_status schema_type_apply(struct cql_schema *s,
					 const struct cql_stmt *stmt,
					 const char *current_keyspace,
					 enum schema_origin origin,
					 struct cql_schema_change *change)
{
	const struct cql_type_stmt *ts = &stmt->u.type;
	bool internal = origin == SCHEMA_INTERNAL;
	if (origin == SCHEMA_REPLICATED && stmt->kind == CQL_STMT_CREATE_TYPE)
		return create_type_replicated(s, ts, current_keyspace, change);
	switch (stmt->kind) {
	case CQL_STMT_CREATE_TYPE:
		return create_type(s, ts, current_keyspace, internal, change);
	case CQL_STMT_ALTER_TYPE:
		return alter_type(s, ts, current_keyspace, internal, change);
	case CQL_STMT_DROP_TYPE:
		return drop_type(s, ts, current_keyspace, internal, change);
	default:
		return fail(CQL_SCHEMA_INVALID, "not a type statement");
	}
}

/* ---- lookups ------------------------------------------------------------- */

const struct cql_user_type *cql_keyspace_type(const struct cql_keyspace *k,
					      const char *name)
{
	return schema_type_mut((struct cql_keyspace *)k, name);
}

size_t cql_keyspace_type_count(const struct cql_keyspace *k)
{
	return k->type_count;
}

const struct cql_user_type *cql_keyspace_type_at(const struct cql_keyspace *k,
						 size_t i)
{
	return i < k->type_count ? k->types[i] : NULL;
}

const char *cql_user_type_keyspace(const struct cql_user_type *t)
{
	return t->keyspace;
}

const char *cql_user_type_name(const struct cql_user_type *t)
{
	return t->name;
}

size_t cql_user_type_field_count(const struct cql_user_type *t)
{
	return t->field_count;
}

const char *cql_user_type_field_name(const struct cql_user_type *t, size_t i)
{
	return t->field_names[i];
}

const char *cql_user_type_field_type(const struct cql_user_type *t, size_t i)
{
	return t->field_types[i];
}

/* Types in the order DESCRIBE and the python driver's export_as_string
 * list them: by name, each after the types its fields name. */
static size_t order_visit(const struct cql_keyspace *k, size_t i, bool *done,
			  const struct cql_user_type **out, size_t n,
			  size_t depth)
{
	if (done[i] || depth > k->type_count)
		return n;
	done[i] = true;
	const struct cql_user_type *t = k->types[i];
	/* refs are in the order the fields name them, as the driver
	 * walks them */
	for (size_t r = 0; r < t->ref_count; r++)
		for (size_t j = 0; j < k->type_count; j++)
			if (strcmp(k->types[j]->name, t->refs[r]) == 0)
				n = order_visit(k, j, done, out, n, depth + 1);
	out[n++] = t;
	return n;
}

int cql_keyspace_types_ordered(const struct cql_keyspace *k,
			       const struct cql_user_type **out)
{
	bool *done = calloc(k->type_count ? k->type_count : 1, sizeof(bool));
	if (!done)
		return err_set(ERR_NOMEM, "out of memory");
	size_t n = 0;
	for (size_t i = 0; i < k->type_count; i++)
		n = order_visit(k, i, done, out, n, 0);
	free(done);
	return 0;
}
