/*
 * DDL, tables: CREATE/ALTER/DROP TABLE applied to the registry, and the
 * resolution of the column types they name.
 */
#include "client/schema/schema_ddl_internal.h"

#include "common/buf.h"
#include "common/uuid.h"
#include "ring/ring.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

/* ---- types --------------------------------------------------------------- */

static const struct {
	const char *name;
	uint16_t kind;
} simple_types[] = {
	{"ascii", STORAGE_TYPE_ASCII},
	{"bigint", STORAGE_TYPE_BIGINT},
	{"blob", STORAGE_TYPE_BLOB},
	{"boolean", STORAGE_TYPE_BOOLEAN},
	{"date", STORAGE_TYPE_DATE},
	{"decimal", STORAGE_TYPE_DECIMAL},
	{"double", STORAGE_TYPE_DOUBLE},
	{"duration", STORAGE_TYPE_DURATION},
	{"float", STORAGE_TYPE_FLOAT},
	{"inet", STORAGE_TYPE_INET},
	{"int", STORAGE_TYPE_INT},
	{"smallint", STORAGE_TYPE_SMALLINT},
	{"text", STORAGE_TYPE_TEXT},
	{"varchar", STORAGE_TYPE_TEXT},
	{"time", STORAGE_TYPE_TIME},
	{"timestamp", STORAGE_TYPE_TIMESTAMP},
	{"timeuuid", STORAGE_TYPE_TIMEUUID},
	{"tinyint", STORAGE_TYPE_TINYINT},
	{"uuid", STORAGE_TYPE_UUID},
	{"varint", STORAGE_TYPE_VARINT},
};

static int simple_kind(const char *name)
{
	for (size_t i = 0; i < sizeof(simple_types) / sizeof(simple_types[0]);
	     i++)
		if (strcmp(simple_types[i].name, name) == 0)
			return simple_types[i].kind;
	return -1;
}

static bool is_collection_name(const char *n)
{
	return strcmp(n, "list") == 0 || strcmp(n, "set") == 0 ||
	       strcmp(n, "map") == 0;
}

/* The raw type as Cassandra's messages print it (CQL3Type.Raw.toString):
 * "list<list<int>>", "frozen<set<text>>". */
static void raw_text(const struct cql_type_ast *t, struct buf *b)
{
	if (t->frozen)
		buf_append(b, "frozen<", 7);
	buf_append(b, t->name, strlen(t->name));
	if (t->param_count) {
		buf_append(b, "<", 1);
		for (size_t i = 0; i < t->param_count; i++) {
			if (i)
				buf_append(b, ", ", 2);
			raw_text(t->params[i], b);
		}
		buf_append(b, ">", 1);
	}
	if (t->frozen)
		buf_append(b, ">", 1);
}

static enum cql_schema_status fail_raw(const char *what,
				       const struct cql_type_ast *t)
{
	struct buf b;
	buf_init(&b);
	raw_text(t, &b);
	enum cql_schema_status st =
		fail(CQL_SCHEMA_INVALID, "%s%.*s", what, (int)b.len,
		     b.data ? (const char *)b.data : "");
	buf_free(&b);
	return st;
}

/* Whether a raw type is one that freezes (a collection, a UDT name). */
static bool freezable(const struct cql_type_ast *t)
{
	return is_collection_name(t->name) ||
	       (strcmp(t->name, "tuple") != 0 &&
		strcmp(t->name, "vector") != 0 && simple_kind(t->name) < 0 &&
		strcmp(t->name, "counter") != 0);
}

static enum cql_schema_status resolve(const struct cql_type_ast *t,
				      const struct cql_keyspace *ks,
				      bool frozen, int depth,
				      const struct storage_type **out);

/* CQL3Type.Raw.RawCollection.prepare: no non-frozen collection inside a
 * non-frozen one, no counters, no durations in sets or as map keys. */
static enum cql_schema_status
resolve_collection(const struct cql_type_ast *t, const struct cql_keyspace *ks,
		   bool frozen, int depth, const struct storage_type **out)
{
	bool map = strcmp(t->name, "map") == 0;
	size_t want = map ? 2 : 1;
	if (t->param_count != want)
		return fail(CQL_SCHEMA_INVALID, "%s takes %zu type parameter%s",
			    t->name, want, want > 1 ? "s" : "");
	for (size_t i = 0; i < want; i++) {
		const struct cql_type_ast *p = t->params[i];
		if (p->number)
			return fail(CQL_SCHEMA_SYNTAX,
				    "Invalid type parameter %s", p->name);
		if (strcmp(p->name, "counter") == 0)
			return fail_raw("Counters are not allowed inside "
					"collections: ",
					t);
		if (strcmp(p->name, "duration") == 0 &&
		    (strcmp(t->name, "set") == 0 || (map && i == 0)))
			return fail_raw(map ? "Durations are not allowed as "
					      "map keys: "
					    : "Durations are not allowed "
					      "inside sets: ",
					t);
		if (!frozen && freezable(p) && !p->frozen)
			return fail_raw(
				is_collection_name(p->name)
					? "Non-frozen collections are "
					  "not allowed inside "
					  "collections: "
					: "Non-frozen UDTs are not "
					  "allowed inside collections: ",
				t);
	}
	const struct storage_type *sub[2] = {NULL, NULL};
	enum cql_schema_status st = CQL_SCHEMA_OK;
	for (size_t i = 0; i < want && st == CQL_SCHEMA_OK; i++)
		st = resolve(t->params[i], ks, true, depth + 1, &sub[i]);
	if (st == CQL_SCHEMA_OK) {
		uint16_t kind = strcmp(t->name, "list") == 0 ? STORAGE_TYPE_LIST
				: strcmp(t->name, "set") == 0
					? STORAGE_TYPE_SET
					: STORAGE_TYPE_MAP;
		*out = storage_type_new_collection(kind, frozen, sub[0],
						   sub[1]);
		if (!*out)
			st = nomem();
	}
	storage_type_unref(sub[0]);
	storage_type_unref(sub[1]);
	return st;
}

/* tuple<T1, ..., Tn>: frozen, and so are its components. */
static enum cql_schema_status resolve_tuple(const struct cql_type_ast *t,
					    const struct cql_keyspace *ks,
					    int depth,
					    const struct storage_type **out)
{
	if (t->param_count == 0)
		return fail(CQL_SCHEMA_SYNTAX, "tuple takes type parameters");
	if (t->param_count > STORAGE_TYPE_MAX_CHILDREN)
		return fail(CQL_SCHEMA_INVALID, "too many tuple components");
	const struct storage_type **comps =
		calloc(t->param_count, sizeof(*comps));
	if (!comps)
		return nomem();
	enum cql_schema_status st = CQL_SCHEMA_OK;
	for (size_t i = 0; i < t->param_count && st == CQL_SCHEMA_OK; i++) {
		if (strcmp(t->params[i]->name, "counter") == 0)
			st = fail(CQL_SCHEMA_INVALID,
				  "Counters are not allowed inside tuples");
		else if (t->params[i]->number)
			st = fail(CQL_SCHEMA_SYNTAX,
				  "Invalid type parameter %s",
				  t->params[i]->name);
		else
			st = resolve(t->params[i], ks, true, depth + 1,
				     &comps[i]);
	}
	if (st == CQL_SCHEMA_OK &&
	    !(*out = storage_type_new_tuple(comps, t->param_count)))
		st = nomem();
	for (size_t i = 0; i < t->param_count; i++)
		storage_type_unref(comps[i]);
	free(comps);
	return st;
}

/* vector<T, N> (Cassandra 5.0): N > 0, T frozen, not a counter. */
static enum cql_schema_status resolve_vector(const struct cql_type_ast *t,
					     const struct cql_keyspace *ks,
					     int depth,
					     const struct storage_type **out)
{
	if (t->param_count != 2 || t->params[0]->number ||
	    !t->params[1]->number)
		return fail(CQL_SCHEMA_SYNTAX,
			    "vector takes a type and a dimension: "
			    "vector<float, 3>");
	const char *d = t->params[1]->name;
	char *end;
	errno = 0;
	long long n = strtoll(d, &end, 10);
	if (*end || errno || n <= 0 || n > STORAGE_TYPE_MAX_DIMENSION)
		return fail(CQL_SCHEMA_INVALID,
			    "vectors may only have positive dimentions; given "
			    "%s",
			    d);
	if (strcmp(t->params[0]->name, "counter") == 0)
		return fail(CQL_SCHEMA_INVALID,
			    "Counters are not allowed inside vectors");
	const struct storage_type *elem = NULL;
	enum cql_schema_status st =
		resolve(t->params[0], ks, true, depth + 1, &elem);
	if (st != CQL_SCHEMA_OK)
		return st;
	if (!(*out = storage_type_new_vector(elem, (uint32_t)n)))
		st = nomem();
	storage_type_unref(elem);
	return st;
}

/* A user type's name: the keyspace's type, frozen or not. */
static enum cql_schema_status resolve_udt(const struct cql_type_ast *t,
					  const struct cql_keyspace *ks,
					  bool frozen,
					  const struct storage_type **out)
{
	const char *ksn = ks->meta->name;
	if (t->keyspace && strcmp(t->keyspace, ksn) != 0)
		return fail(CQL_SCHEMA_INVALID,
			    "Statement on keyspace %s cannot refer to a user "
			    "type in keyspace %s; user types can only be used "
			    "in the keyspace they are defined in",
			    ksn, t->keyspace);
	const struct storage_type *node =
		t->param_count ? NULL : schema_type_node(ks, t->name);
	if (!node)
		return fail(CQL_SCHEMA_INVALID, "Unknown type %s.%s", ksn,
			    t->name);
	if (!(*out = storage_type_with_frozen(node, frozen)))
		return nomem();
	return CQL_SCHEMA_OK;
}

/* `frozen`: inside a frozen type or a collection, whose collections and
 * UDTs freeze too (CQL3Type.Raw.freeze). */
static enum cql_schema_status resolve(const struct cql_type_ast *t,
				      const struct cql_keyspace *ks,
				      bool frozen, int depth,
				      const struct storage_type **out)
{
	*out = NULL;
	if (depth > STORAGE_TYPE_MAX_DEPTH)
		return fail(CQL_SCHEMA_INVALID, "Type nested too deeply");
	if (t->number)
		return fail(CQL_SCHEMA_SYNTAX, "Unknown type %s", t->name);
	frozen = frozen || t->frozen;
	if (is_collection_name(t->name))
		return resolve_collection(t, ks, frozen, depth, out);
	if (strcmp(t->name, "tuple") == 0)
		return resolve_tuple(t, ks, depth, out);
	if (strcmp(t->name, "vector") == 0)
		return resolve_vector(t, ks, depth, out);
	int k = strcmp(t->name, "counter") == 0 ? STORAGE_TYPE_COUNTER
						: simple_kind(t->name);
	if (k < 0)
		/* A user-defined type name: resolved by the UDT registry
		 * (storage_type_new_udt), once there is one. */
		return resolve_udt(t, ks, frozen, out);
	if (t->param_count)
		return fail(CQL_SCHEMA_INVALID, "Type %s takes no parameters",
			    t->name);
	if (t->frozen)
		return fail(
			CQL_SCHEMA_INVALID,
			"frozen<> is only allowed on collections, tuples, and "
			"user-defined types (got %s)",
			t->name);
	*out = storage_type_simple((uint16_t)k);
	return CQL_SCHEMA_OK;
}

enum cql_schema_status cql_schema_type_resolve(const struct cql_type_ast *t,
					       const struct cql_keyspace *ks,
					       const struct storage_type **out)
{
	return resolve(t, ks, false, 0, out);
}

/* ---- tables -------------------------------------------------------------- */

static enum cql_schema_status resolve_table(struct cql_schema *s,
					    const struct cql_qname *q,
					    const char *current, bool internal,
					    struct cql_keyspace **ks)
{
	const char *name = q->keyspace ? q->keyspace : current;
	if (!name)
		return fail(
			CQL_SCHEMA_INVALID,
			"No keyspace has been specified. USE a keyspace, or "
			"explicitly specify keyspace.tablename");
	*ks = schema_keyspace_mut(s, name);
	if (!*ks)
		return fail(CQL_SCHEMA_INVALID, "Keyspace '%s' doesn't exist",
			    name);
	if (!internal && (*ks)->system)
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", name);
	return CQL_SCHEMA_OK;
}

static const struct cql_column_def *find_def(const struct cql_create_table *ct,
					     const char *name)
{
	for (size_t i = 0; i < ct->column_count; i++)
		if (strcmp(ct->columns[i].name, name) == 0)
			return &ct->columns[i];
	return NULL;
}

static bool in_list(const char *const *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

/* Checks keys, statics and clustering order of a CREATE TABLE. */
static enum cql_schema_status check_create(const struct cql_create_table *ct)
{
	for (size_t i = 0; i < ct->column_count; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(ct->columns[i].name, ct->columns[j].name) ==
			    0)
				return fail(
					CQL_SCHEMA_INVALID,
					"Multiple definition of identifier %s",
					ct->columns[i].name);
	size_t nkeys = ct->partition_key_count + ct->clustering_count;
	for (size_t i = 0; i < nkeys; i++) {
		const char *k =
			i < ct->partition_key_count
				? ct->partition_key[i]
				: ct->clustering[i - ct->partition_key_count];
		const struct cql_column_def *d = find_def(ct, k);
		if (!d)
			return fail(
				CQL_SCHEMA_INVALID,
				"Unknown definition %s referenced in PRIMARY "
				"KEY",
				k);
		if (d->is_static)
			return fail(CQL_SCHEMA_INVALID,
				    "Static column %s cannot be part of the "
				    "PRIMARY KEY",
				    k);
		for (size_t j = 0; j < i; j++) {
			const char *o =
				j < ct->partition_key_count
					? ct->partition_key[j]
					: ct->clustering
						  [j - ct->partition_key_count];
			if (strcmp(o, k) == 0)
				return fail(
					CQL_SCHEMA_INVALID,
					"Multiple definition of identifier %s",
					k);
		}
	}
	if (ct->partition_key_count > 16 || ct->clustering_count > 32)
		return fail(
			CQL_SCHEMA_UNSUPPORTED,
			"Tables with more than 16 partition key or 32 "
			"clustering columns are not supported by Cassini yet");
	for (size_t i = 0; i < ct->column_count; i++)
		if (ct->columns[i].is_static && ct->clustering_count == 0)
			return fail(CQL_SCHEMA_INVALID,
				    "Static columns are only useful (and thus "
				    "allowed) if the table has at least one "
				    "clustering column");
	for (size_t i = 0; i < ct->order_count; i++) {
		const char *c = ct->order[i].column;
		size_t pos = 0;
		while (pos < ct->clustering_count &&
		       strcmp(ct->clustering[pos], c) != 0)
			pos++;
		if (pos == ct->clustering_count)
			return fail(
				CQL_SCHEMA_INVALID,
				"Only clustering key columns can be defined "
				"in CLUSTERING ORDER directive");
		if (pos != i)
			return fail(
				CQL_SCHEMA_INVALID,
				"The order of columns in the CLUSTERING ORDER "
				"directive must be the one of the clustering "
				"key (%s must appear before %s)",
				ct->clustering[i < ct->clustering_count ? i
									: 0],
				c);
	}
	return CQL_SCHEMA_OK;
}

/* A table whose non-key columns are counters (Cassandra's isCounter flag:
 * set when it was created with counters; dropped ones still count). */
static bool counter_table(const struct storage_table_meta *m)
{
	for (size_t i = 0; i < m->column_count; i++)
		if (m->columns[i].type->kind == STORAGE_TYPE_COUNTER)
			return true;
	return false;
}

static enum cql_schema_status add_column(struct storage_table_meta *m,
					 const struct cql_column_def *d,
					 enum storage_column_kind kind,
					 bool desc,
					 const struct cql_keyspace *ks)
{
	const struct storage_type *type;
	enum cql_schema_status st = cql_schema_type_resolve(d->type, ks, &type);
	if (st != CQL_SCHEMA_OK)
		return st;
	bool key = kind == STORAGE_COLUMN_PARTITION_KEY ||
		   kind == STORAGE_COLUMN_CLUSTERING;
	bool multicell_udt = type->kind == STORAGE_TYPE_UDT &&
			     storage_type_is_multicell(type);
	bool nested_multicell = false;
	for (size_t i = 0; multicell_udt && i < type->count; i++)
		nested_multicell = nested_multicell ||
				   storage_type_is_multicell(type->sub[i]);
	if (key && multicell_udt)
		st = fail(
			CQL_SCHEMA_INVALID,
			"Invalid non-frozen user-defined type for PRIMARY KEY "
			"component %s",
			d->name);
	else if (nested_multicell)
		st = fail(CQL_SCHEMA_INVALID,
			  "Non-frozen UDTs with nested non-frozen collections "
			  "are not supported");
	else if (key && storage_type_is_multicell(type))
		st = fail(CQL_SCHEMA_INVALID,
			  "Invalid non-frozen collection type for PRIMARY KEY "
			  "component %s",
			  d->name);
	else if (key && type->kind == STORAGE_TYPE_COUNTER)
		st = fail(CQL_SCHEMA_INVALID,
			  "counter type is not supported for PRIMARY KEY "
			  "column '%s'",
			  d->name);
	else if (key && storage_type_contains(type, STORAGE_TYPE_DURATION))
		st = fail(CQL_SCHEMA_INVALID,
			  "duration type is not supported for PRIMARY KEY "
			  "part %s",
			  d->name);
	else if (storage_table_meta_add_column(m, d->name, kind, type, desc) <
		 0)
		st = nomem();
	storage_type_unref(type);
	return st;
}

static struct cql_table *table_new(struct storage_table_meta *m)
{
	struct cql_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->meta = m;
	schema_table_options_default(&t->opts);
	return t;
}

/* A CREATE TABLE for a table that exists, applied elsewhere first (t is
 * the statement's table): the creation raced on two nodes, and every node
 * keeps the id that sorts first, so they all end with the same table
 * whatever order the two statements reach them in. */
static enum cql_schema_status
settle_table_race(struct cql_schema *s, struct cql_keyspace *ks,
		  struct cql_table *old, struct cql_table *t,
		  struct cql_schema_change *change)
{
	if (memcmp(old->meta->id, t->meta->id, 16) <= 0) {
		schema_table_free(t); /* ours wins, or it is the same table */
		return CQL_SCHEMA_NOOP;
	}
	if (schema_reserve_dropped(s, 1) != 0 ||
	    schema_retire(s, RETIRED_TABLE, old) != 0) {
		schema_table_free(t);
		return nomem();
	}
	set_change(change, "UPDATED", "TABLE", ks->meta->name, t->meta->name);
	change->replaced = true;
	memcpy(change->old_id, old->meta->id, 16);
	schema_note_dropped(s, change, old->meta->id);
	schema_table_remove(ks, old);
	schema_table_insert(ks, t); /* cannot fail: the slot was freed */
	return CQL_SCHEMA_OK;
}

enum cql_schema_status
schema_create_table(struct cql_schema *s, const struct cql_create_table *ct,
		    const char *current, const uint8_t new_id[16],
		    enum schema_origin origin, struct cql_schema_change *change)
{
	struct cql_keyspace *ks;
	enum cql_schema_status st = resolve_table(
		s, &ct->table, current, origin == SCHEMA_INTERNAL, &ks);
	if (st != CQL_SCHEMA_OK)
		return st;
	if (!valid_name(ct->table.name))
		return fail(CQL_SCHEMA_INVALID,
			    "Table name must not be empty, more than %d "
			    "characters long, or contain non-alphanumeric-"
			    "underscore characters (got \"%s\")",
			    NAME_MAX_LEN, ct->table.name);
	struct cql_table *old = schema_table_mut(ks, ct->table.name);
	if (old && origin != SCHEMA_REPLICATED) {
		if (ct->if_not_exists)
			return CQL_SCHEMA_NOOP;
		err_set(ERR_EXISTS,
			"Cannot add already existing table \"%s\" to keyspace "
			"\"%s\"",
			ct->table.name, ks->meta->name);
		return CQL_SCHEMA_ALREADY_EXISTS;
	}
	if ((st = check_create(ct)) != CQL_SCHEMA_OK)
		return st;

	uint8_t id[16];
	memcpy(id, new_id, 16);
	struct storage_table_options topts;
	struct cql_table_options copts;
	storage_table_options_default(&topts);
	schema_table_options_default(&copts);
	size_t applied;
	if ((st = schema_table_options(ct->options, ct->option_count, &topts,
				       &copts, id, NULL, 0, &applied)) !=
	    CQL_SCHEMA_OK)
		return st;

	struct storage_table_meta *m =
		storage_table_meta_new(ks->meta->name, ct->table.name, id);
	if (!m)
		return nomem();
	const char *ksn = ks->meta->name;
	for (size_t i = 0; st == CQL_SCHEMA_OK && i < ct->partition_key_count;
	     i++)
		st = add_column(m, find_def(ct, ct->partition_key[i]),
				STORAGE_COLUMN_PARTITION_KEY, false, ks);
	for (size_t i = 0; st == CQL_SCHEMA_OK && i < ct->clustering_count;
	     i++) {
		bool desc = i < ct->order_count && ct->order[i].descending;
		st = add_column(m, find_def(ct, ct->clustering[i]),
				STORAGE_COLUMN_CLUSTERING, desc, ks);
	}
	for (size_t i = 0; st == CQL_SCHEMA_OK && i < ct->column_count; i++) {
		const struct cql_column_def *d = &ct->columns[i];
		if (in_list(ct->partition_key, ct->partition_key_count,
			    d->name) ||
		    in_list(ct->clustering, ct->clustering_count, d->name))
			continue;
		st = add_column(m, d,
				d->is_static ? STORAGE_COLUMN_STATIC
					     : STORAGE_COLUMN_REGULAR,
				false, ks);
	}
	/* CreateTableStatement's counter table validation */
	bool counters = false, others = false;
	for (size_t i = 0; st == CQL_SCHEMA_OK && i < m->column_count; i++) {
		const struct storage_column *c = &m->columns[i];
		if (c->kind == STORAGE_COLUMN_REGULAR ||
		    c->kind == STORAGE_COLUMN_STATIC) {
			counters |= c->type->kind == STORAGE_TYPE_COUNTER;
			others |= c->type->kind != STORAGE_TYPE_COUNTER;
		}
	}
	if (st == CQL_SCHEMA_OK && counters && others)
		st = fail(CQL_SCHEMA_INVALID, "Cannot mix counter and non "
					      "counter columns in the same "
					      "table");
	if (st == CQL_SCHEMA_OK && counters && topts.default_time_to_live > 0)
		st = fail(CQL_SCHEMA_INVALID,
			  "Cannot set default_time_to_live on a table with "
			  "counters");
	struct cql_table *t = st == CQL_SCHEMA_OK ? table_new(m) : NULL;
	if (st == CQL_SCHEMA_OK && !t)
		st = nomem();
	if (st != CQL_SCHEMA_OK) {
		storage_table_meta_delete(m);
		return st;
	}
	m->options = topts;
	t->opts = copts;
	if (old)
		return settle_table_race(s, ks, old, t, change);
	if (schema_table_insert(ks, t) != 0) {
		schema_table_free(t);
		return nomem();
	}
	set_change(change, "CREATED", "TABLE", ksn, ct->table.name);
	return CQL_SCHEMA_OK;
}

/* A copy of `old` with its own meta, for ALTER TABLE. */
static struct cql_table *table_copy(const struct cql_table *old)
{
	struct storage_table_meta *m = storage_table_meta_clone(old->meta);
	if (!m)
		return NULL;
	struct cql_table *t = table_new(m);
	if (!t) {
		storage_table_meta_delete(m);
		return NULL;
	}
	t->opts = old->opts;
	memcpy(t->option_time, old->option_time, sizeof(t->option_time));
	t->columns_diverged = old->columns_diverged;
	if (schema_indexes_copy(t, old) != 0) {
		schema_table_free(t);
		return NULL;
	}
	return t;
}

struct cql_table *schema_table_retyped(const struct cql_table *old,
				       const char *name,
				       const struct storage_type *repl)
{
	struct cql_table *t = table_copy(old);
	if (!t)
		return NULL;
	struct storage_table_meta *m = t->meta;
	for (size_t i = 0; i < m->column_count; i++) {
		const struct storage_type *ty = schema_type_rebuild(
			m->columns[i].type, m->keyspace, name, repl);
		if (!ty) {
			schema_table_free(t);
			return NULL;
		}
		storage_type_unref(m->columns[i].type);
		m->columns[i].type = ty;
	}
	return t;
}

/* ADD of a name dropped before: Cassandra's checks, and the latest drop
 * time of that name, before which the new column's cells are ignored. */
static enum cql_schema_status readd_check(const struct storage_table_meta *m,
					  const struct cql_column_def *d,
					  const struct cql_keyspace *ks,
					  int64_t *dropped_at)
{
	const struct storage_type *type;
	enum cql_schema_status st = cql_schema_type_resolve(d->type, ks, &type);
	if (st != CQL_SCHEMA_OK)
		return st;
	*dropped_at = INT64_MIN;
	const struct storage_column *last = NULL;
	for (size_t i = 0; i < m->column_count; i++) {
		const struct storage_column *c = &m->columns[i];
		if (!c->dropped || strcmp(c->name, d->name) != 0)
			continue;
		last = c;
		if (c->dropped_at > *dropped_at)
			*dropped_at = c->dropped_at;
	}
	if (!last) {
		storage_type_unref(type);
		return CQL_SCHEMA_OK;
	}
	char now[1024], before[1024];
	int rc = cql_type_text(type, now, sizeof(now)) ||
		 cql_type_text(last->type, before, sizeof(before));
	storage_type_unref(type);
	if (rc)
		return nomem();
	if (strcmp(now, before) != 0)
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot re-add previously dropped column '%s' of "
			    "type %s, incompatible with previous type %s",
			    d->name, now, before);
	bool was_static = last->kind == STORAGE_COLUMN_STATIC;
	if (was_static != d->is_static)
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot re-add previously dropped column '%s' of "
			    "kind %s, incompatible with previous kind %s",
			    d->name, d->is_static ? "STATIC" : "REGULAR",
			    was_static ? "STATIC" : "REGULAR");
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status alter_columns(struct cql_table *t,
					    const struct cql_alter_table *at,
					    const struct cql_keyspace *ksp)
{
	const char *ks = ksp->meta->name;
	struct storage_table_meta *m = t->meta;
	enum cql_schema_status st = CQL_SCHEMA_OK;
	if (at->kind == CQL_ALTER_ADD) {
		for (size_t i = 0; i < at->column_count; i++) {
			const struct cql_column_def *d = &at->columns[i];
			if (cql_table_column(t, d->name) >= 0)
				return fail(
					CQL_SCHEMA_INVALID,
					"Column with name '%s' already exists",
					d->name);
			if (d->is_static && m->ck_count == 0)
				return fail(CQL_SCHEMA_INVALID,
					    "Static columns are only useful "
					    "(and thus allowed) if the table "
					    "has at least one clustering "
					    "column");
			/* Cassandra's table validation, after the checks
			 * above */
			bool is_counter = strcmp(d->type->name, "counter") == 0;
			if (counter_table(m) && !is_counter)
				return fail(CQL_SCHEMA_CONFIG,
					    "%s.%s: Cannot have a non counter "
					    "column (\"%s\") in a counter "
					    "table",
					    ks, m->name, d->name);
			if (!counter_table(m) && is_counter)
				return fail(CQL_SCHEMA_CONFIG,
					    "%s.%s: Cannot have a counter "
					    "column (\"%s\") in a non counter "
					    "table",
					    ks, m->name, d->name);
			int64_t dropped_at;
			if ((st = readd_check(m, d, ksp, &dropped_at)) !=
			    CQL_SCHEMA_OK)
				return st;
			size_t slot = m->column_count;
			st = add_column(m, d,
					d->is_static ? STORAGE_COLUMN_STATIC
						     : STORAGE_COLUMN_REGULAR,
					false, ksp);
			if (st != CQL_SCHEMA_OK)
				return st;
			m->columns[slot].dropped_at = dropped_at;
		}
		return CQL_SCHEMA_OK;
	}
	if (at->kind == CQL_ALTER_DROP) {
		for (size_t i = 0; i < at->name_count; i++) {
			/* a set of names, as Cassandra's: repeats are one */
			if (in_list(at->names, i, at->names[i]))
				continue;
			int c = cql_table_column(t, at->names[i]);
			if (c < 0)
				return fail(CQL_SCHEMA_INVALID,
					    "Column %s was not found in table "
					    "'%s.%s'",
					    at->names[i], ks, m->name);
			uint8_t kind = m->columns[c].kind;
			if (kind == STORAGE_COLUMN_PARTITION_KEY ||
			    kind == STORAGE_COLUMN_CLUSTERING)
				return fail(CQL_SCHEMA_INVALID,
					    "Cannot drop PRIMARY KEY column %s",
					    at->names[i]);
			const struct cql_index *ix = cql_table_index_on(t, c);
			if (ix)
				return fail(CQL_SCHEMA_INVALID,
					    "Cannot drop column %s because it "
					    "has dependent secondary indexes "
					    "(%s)",
					    at->names[i], ix->name);
			m->columns[c].dropped = true;
			/* 0 when the statement came without a time (a
			 * schema record of the first version): the slot is
			 * hidden all the same. */
			m->columns[c].dropped_at =
				at->has_timestamp ? at->timestamp : 0;
		}
		return CQL_SCHEMA_OK;
	}
	/* RENAME: pairs from, to; only key columns, as Cassandra. */
	for (size_t i = 0; i + 1 < at->name_count; i += 2) {
		int c = cql_table_column(t, at->names[i]);
		if (c < 0)
			return fail(CQL_SCHEMA_INVALID,
				    "Column %s was not found in table %s.%s",
				    at->names[i], ks, m->name);
		uint8_t kind = m->columns[c].kind;
		if (kind != STORAGE_COLUMN_PARTITION_KEY &&
		    kind != STORAGE_COLUMN_CLUSTERING)
			return fail(CQL_SCHEMA_INVALID,
				    "Cannot rename non PRIMARY KEY column %s",
				    at->names[i]);
		const struct cql_index *ix = cql_table_index_on(t, c);
		if (ix)
			return fail(CQL_SCHEMA_INVALID,
				    "Cannot rename column %s because it has "
				    "dependent secondary indexes (%s)",
				    at->names[i], ix->name);
		if (cql_table_column(t, at->names[i + 1]) >= 0)
			return fail(CQL_SCHEMA_INVALID,
				    "Cannot rename column %s to %s in keyspace "
				    "%s; another column of that name already "
				    "exist",
				    at->names[i], at->names[i + 1], ks);
		char *copy = strdup(at->names[i + 1]);
		if (!copy)
			return nomem();
		free(m->columns[c].name);
		m->columns[c].name = copy;
	}
	return CQL_SCHEMA_OK;
}

enum cql_schema_status schema_alter_table(struct cql_schema *s,
					  const struct cql_alter_table *at,
					  const char *current, bool internal,
					  int columns_before,
					  struct cql_schema_change *change)
{
	struct cql_keyspace *ks;
	enum cql_schema_status st =
		resolve_table(s, &at->table, current, internal, &ks);
	if (st != CQL_SCHEMA_OK)
		return st;
	struct cql_table *old = schema_table_mut(ks, at->table.name);
	if (!old)
		return fail(CQL_SCHEMA_INVALID, "Table '%s.%s' doesn't exist",
			    ks->meta->name, at->table.name);
	struct cql_table *t = table_copy(old);
	if (!t)
		return nomem();
	if (at->kind == CQL_ALTER_WITH) {
		uint8_t id[16];
		size_t applied;
		memcpy(id, old->meta->id, 16);
		st = schema_table_options(
			at->options, at->option_count, &t->meta->options,
			&t->opts, id, t->option_time,
			at->has_timestamp ? at->timestamp : 0, &applied);
		/* Every option was written later on another node. */
		if (st == CQL_SCHEMA_OK && applied == 0)
			st = CQL_SCHEMA_NOOP;
		if (st == CQL_SCHEMA_OK && counter_table(t->meta) &&
		    t->meta->options.default_time_to_live > 0)
			st = fail(CQL_SCHEMA_INVALID,
				  "Cannot set default_time_to_live on a table "
				  "with counters");
	} else {
		st = alter_columns(t, at, ks);
	}
	if (st == CQL_SCHEMA_OK && schema_retire(s, RETIRED_TABLE, old) != 0)
		st = nomem();
	if (st != CQL_SCHEMA_OK) {
		schema_table_free(t);
		return st;
	}
	schema_table_remove(ks, old);
	schema_table_insert(ks, t); /* cannot fail: the slot was freed */
	set_change(change, "UPDATED", "TABLE", ks->meta->name, at->table.name);
	if (at->kind == CQL_ALTER_ADD)
		change->columns_before = (int)old->meta->column_count;
	/* The node that ran this ADD had another number of columns: an ADD
	 * of another column ran there at the same time, and the two nodes
	 * gave the new columns each other's numbers. */
	if (columns_before >= 0 &&
	    (size_t)columns_before != old->meta->column_count &&
	    !t->columns_diverged) {
		t->columns_diverged = true;
		change->diverged = true;
	}
	return CQL_SCHEMA_OK;
}

enum cql_schema_status schema_drop_table(struct cql_schema *s,
					 const struct cql_qname *name,
					 bool if_exists, const char *current,
					 bool internal,
					 struct cql_schema_change *change)
{
	struct cql_keyspace *ks;
	enum cql_schema_status st =
		resolve_table(s, name, current, internal, &ks);
	if (st != CQL_SCHEMA_OK)
		return st == CQL_SCHEMA_INVALID && if_exists &&
				       !schema_keyspace_mut(
					       s, name->keyspace
							  ? name->keyspace
						  : current ? current
							    : "")
			       ? CQL_SCHEMA_NOOP
			       : st;
	struct cql_table *t = schema_table_mut(ks, name->name);
	if (!t) {
		if (if_exists)
			return CQL_SCHEMA_NOOP;
		return fail(CQL_SCHEMA_INVALID, "Table '%s.%s' doesn't exist",
			    ks->meta->name, name->name);
	}
	if (schema_reserve_dropped(s, 1) != 0 ||
	    schema_retire(s, RETIRED_TABLE, t) != 0)
		return nomem();
	schema_table_remove(ks, t);
	set_change(change, "DROPPED", "TABLE", ks->meta->name, name->name);
	schema_note_dropped(s, change, t->meta->id);
	return CQL_SCHEMA_OK;
}
