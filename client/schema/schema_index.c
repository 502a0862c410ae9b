/*
 * Secondary indexes: CREATE INDEX and DROP INDEX applied to the registry,
 * with Cassandra 5.0's checks and sentences (CreateIndexStatement,
 * DropIndexStatement, StorageAttachedIndex.validateOptions).
 *
 * Every index is a storage-attached index (SAI): Cassandra 5.0 with
 * default_secondary_index: sai makes the legacy CREATE INDEX one, and
 * USING 'sai', 'StorageAttachedIndex' or the full class name name it.
 * Other classes are refused as Cassandra refuses a class it cannot load;
 * SASI as a node with sasi_indexes_enabled: false does.
 *
 * An index lives in its table's object: creating or dropping one replaces
 * the table (a copy with the same meta contents), as ALTER TABLE does, and
 * the change is UPDATED TABLE, as Cassandra's event is. Index names are
 * unique in a keyspace. A CREATE INDEX without a name takes
 * <table>_<column>_idx (non-word characters removed), then _1, _2, ...
 * when that is taken: every node and every replay applies the statements
 * in the same order, so every one picks the same name.
 */
#include "client/schema/schema_ddl_internal.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

size_t cql_table_index_count(const struct cql_table *t)
{
	return t->index_count;
}

const struct cql_index *cql_table_index_at(const struct cql_table *t, size_t i)
{
	return i < t->index_count ? &t->indexes[i] : NULL;
}

const struct cql_index *cql_table_index_on(const struct cql_table *t,
					   int column)
{
	for (size_t i = 0; i < t->index_count; i++)
		if (t->indexes[i].column == column)
			return &t->indexes[i];
	return NULL;
}

const struct cql_index *cql_keyspace_index(const struct cql_keyspace *k,
					   const char *name,
					   const struct cql_table **table)
{
	for (size_t i = 0; i < k->table_count; i++) {
		const struct cql_table *t = k->tables[i];
		for (size_t j = 0; j < t->index_count; j++)
			if (strcmp(t->indexes[j].name, name) == 0) {
				if (table)
					*table = t;
				return &t->indexes[j];
			}
	}
	return NULL;
}

static const char *target_fn(enum cql_index_target t)
{
	switch (t) {
	case CQL_INDEX_KEYS:
		return "keys";
	case CQL_INDEX_VALUES:
		return "values";
	case CQL_INDEX_ENTRIES:
		return "entries";
	case CQL_INDEX_FULL:
		return "full";
	default:
		return NULL;
	}
}

/* A column name as CQL text: quoted unless lower-case word characters. */
static void column_text(const char *name, char *dst, size_t cap)
{
	bool plain = name[0] && !(name[0] >= '0' && name[0] <= '9');
	for (const char *c = name; *c && plain; c++)
		plain = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
			*c == '_';
	if (plain) {
		snprintf(dst, cap, "%s", name);
		return;
	}
	size_t n = 0;
	if (cap < 3) {
		if (cap)
			dst[0] = '\0';
		return;
	}
	dst[n++] = '"';
	for (const char *c = name; *c && n + 3 < cap; c++) {
		if (*c == '"')
			dst[n++] = '"';
		dst[n++] = *c;
	}
	dst[n++] = '"';
	dst[n] = '\0';
}

int cql_index_target_text(const struct cql_table *t, const struct cql_index *ix,
			  char *dst, size_t cap)
{
	char col[160];
	column_text(t->meta->columns[ix->column].name, col, sizeof(col));
	const char *fn = target_fn(ix->target);
	int n = fn ? snprintf(dst, cap, "%s(%s)", fn, col)
		   : snprintf(dst, cap, "%s", col);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

bool cql_index_option_bool(const struct cql_index *ix, const char *key,
			   bool dflt)
{
	for (size_t i = 0; i < ix->option_count; i++)
		if (strcmp(ix->option_keys[i], key) == 0)
			return strcasecmp(ix->option_values[i], "true") == 0;
	return dflt;
}

unsigned cql_index_analyzer(const struct cql_index *ix)
{
	return (cql_index_option_bool(ix, "case_sensitive", true)
			? 0
			: STORAGE_SAI_LOWER) |
	       (cql_index_option_bool(ix, "normalize", false)
			? STORAGE_SAI_NORMALIZE
			: 0) |
	       (cql_index_option_bool(ix, "ascii", false) ? STORAGE_SAI_ASCII
							  : 0);
}

int schema_indexes_copy(struct cql_table *to, const struct cql_table *from)
{
	to->indexes = NULL;
	to->index_count = 0;
	if (!from->index_count)
		return 0;
	to->indexes = malloc(from->index_count * sizeof(*to->indexes));
	if (!to->indexes)
		return -1;
	memcpy(to->indexes, from->indexes,
	       from->index_count * sizeof(*to->indexes));
	to->index_count = from->index_count;
	return 0;
}

/* ---- CREATE INDEX -------------------------------------------------------- */

/* The keyspace a statement names: the table's, the index's, or the
 * current one (CreateIndexStatement.Raw.prepare). */
static enum cql_schema_status index_keyspace(const struct cql_index_stmt *ix,
					     const char *current,
					     const char **out)
{
	const char *ks = ix->table.keyspace  ? ix->table.keyspace
			 : ix->name.keyspace ? ix->name.keyspace
					     : current;
	if (!ks)
		return fail(CQL_SCHEMA_INVALID,
			    "No keyspace has been specified. USE a keyspace, "
			    "or explicitly specify keyspace.tablename");
	if (ix->name.keyspace && strcmp(ix->name.keyspace, ks) != 0)
		return fail(CQL_SCHEMA_INVALID,
			    "Keyspace name '%s' doesn't match index name "
			    "'%s.%s'",
			    ks, ix->name.keyspace, ix->name.name);
	*out = ks;
	return CQL_SCHEMA_OK;
}

/* Whether the class USING names is SAI; SASI and any other class are
 * refused as Cassandra 5.0 refuses them. */
static enum cql_schema_status index_class(const char *using)
{
	if (!using || strcasecmp(using, "sai") == 0 ||
	    strcmp(using, "StorageAttachedIndex") == 0 ||
	    strcmp(using, CQL_SAI_CLASS) == 0)
		return CQL_SCHEMA_OK;
	if (strcmp(using, "org.apache.cassandra.index.sasi.SASIIndex") == 0 ||
	    strcmp(using, "SASIIndex") == 0)
		return fail(CQL_SCHEMA_INVALID,
			    "SASI indexes are disabled. Enable in "
			    "cassandra.yaml to use.");
	if (strcasecmp(using, "legacy_local_table") == 0)
		return fail(CQL_SCHEMA_UNSUPPORTED,
			    "Legacy secondary indexes (legacy_local_table) "
			    "are not supported by Cassini yet; use 'sai'");
	return fail(CQL_SCHEMA_CONFIG,
		    "Unable to find custom indexer class '%s'", using);
}

/* The analyzer options SAI takes (NonTokenizingOptions), checked as its
 * validateOptions does, into ix. */
static enum cql_schema_status index_options(const struct cql_index_stmt *st,
					    const struct storage_column *col,
					    struct cql_index *ix)
{
	const struct cql_term *m = st->options;
	if (!m)
		return CQL_SCHEMA_OK;
	char unknown[256] = "";
	size_t ulen = 0;
	for (size_t i = 0; i + 1 < m->count; i += 2) {
		char k[32], v[64];
		if (term_text(m->items[i], k, sizeof(k)) != 0 ||
		    term_text(m->items[i + 1], v, sizeof(v)) != 0)
			return fail(CQL_SCHEMA_INVALID,
				    "Invalid value for property 'options'. "
				    "It should be a map of strings.");
		if (strcmp(k, "target") == 0 || strcmp(k, "class_name") == 0)
			return fail(CQL_SCHEMA_INVALID,
				    "Cannot specify %s as a CUSTOM option", k);
		bool known = strcmp(k, "case_sensitive") == 0 ||
			     strcmp(k, "normalize") == 0 ||
			     strcmp(k, "ascii") == 0;
		if (!known) {
			int n = snprintf(unknown + ulen, sizeof(unknown) - ulen,
					 "%s%s", ulen ? ", " : "", k);
			if (n > 0 && (size_t)n < sizeof(unknown) - ulen)
				ulen += (size_t)n;
			continue;
		}
		if (strcasecmp(v, "true") != 0 && strcasecmp(v, "false") != 0)
			return fail(CQL_SCHEMA_INVALID,
				    "Illegal value for boolean option '%s': "
				    "'%s'",
				    k, v);
		if (ix->option_count == CQL_INDEX_OPTION_MAX)
			return fail(CQL_SCHEMA_INVALID, "Too many options");
		snprintf(ix->option_keys[ix->option_count],
			 sizeof(ix->option_keys[0]), "%s", k);
		snprintf(ix->option_values[ix->option_count],
			 sizeof(ix->option_values[0]), "%s", v);
		ix->option_count++;
	}
	if (ulen)
		return fail(CQL_SCHEMA_CONFIG,
			    "Properties specified [%s] are not understood by "
			    "StorageAttachedIndex",
			    unknown);
	if (ix->option_count && (col->kind == STORAGE_COLUMN_PARTITION_KEY ||
				 col->kind == STORAGE_COLUMN_CLUSTERING)) {
		char list[320] = "{";
		size_t n = 1;
		for (size_t i = 0; i < ix->option_count; i++)
			n += (size_t)snprintf(
				list + n,
				sizeof(list) > n ? sizeof(list) - n : 0,
				"%s'%s' : '%s'", i ? ", " : "",
				ix->option_keys[i], ix->option_values[i]);
		if (n + 2 < sizeof(list))
			memcpy(list + n, "}", 2);
		return fail(CQL_SCHEMA_INVALID,
			    "Analysis options are not supported on primary "
			    "key columns, but found %s",
			    list);
	}
	uint16_t kind = col->type->kind;
	if (ix->option_count && kind != STORAGE_TYPE_TEXT &&
	    kind != STORAGE_TYPE_ASCII)
		return fail(CQL_SCHEMA_INVALID,
			    "Analysis options are only supported on text "
			    "columns (column %s)",
			    col->name);
	return CQL_SCHEMA_OK;
}

/* Cassandra's target checks (CreateIndexStatement.validateIndexTarget)
 * and SAI's type check; `target` becomes what a plain column on a
 * collection means (values for a collection, full for a frozen one). */
static enum cql_schema_status
index_target_check(const struct storage_table_meta *m,
		   const struct storage_column *col,
		   enum cql_index_target *target)
{
	const struct storage_type *ty = col->type;
	if (storage_type_contains(ty, STORAGE_TYPE_DURATION)) {
		if (storage_type_is_collection(ty->kind))
			return fail(CQL_SCHEMA_INVALID,
				    "Secondary indexes are not supported on "
				    "collections containing durations");
		if (ty->kind == STORAGE_TYPE_TUPLE)
			return fail(CQL_SCHEMA_INVALID,
				    "Secondary indexes are not supported on "
				    "tuples containing durations");
		if (ty->kind == STORAGE_TYPE_UDT)
			return fail(CQL_SCHEMA_INVALID,
				    "Secondary indexes are not supported on "
				    "UDTs containing durations");
		return fail(CQL_SCHEMA_INVALID,
			    "Secondary indexes are not supported on duration "
			    "columns");
	}
	if (ty->kind == STORAGE_TYPE_UDT && !ty->frozen)
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot create index on non-frozen UDT column %s",
			    col->name);
	if (ty->kind == STORAGE_TYPE_VECTOR)
		return fail(CQL_SCHEMA_UNSUPPORTED,
			    "Vector (ANN) indexes are not supported by "
			    "Cassini yet");
	bool coll = storage_type_is_collection(ty->kind);
	bool frozen_coll = coll && ty->frozen;
	if (*target == CQL_INDEX_SIMPLE && coll)
		*target = frozen_coll ? CQL_INDEX_FULL : CQL_INDEX_VALUES;
	if (col->kind == STORAGE_COLUMN_PARTITION_KEY && m->pk_count == 1)
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot create secondary index on the only "
			    "partition key column %s",
			    col->name);
	const char *fn = target_fn(*target);
	if (frozen_coll && *target != CQL_INDEX_FULL)
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot create %s() index on frozen column %s. "
			    "Frozen collections are immutable and must be "
			    "fully indexed by using the 'full(%s)' modifier",
			    fn, col->name, col->name);
	if (!frozen_coll && *target == CQL_INDEX_FULL)
		return fail(CQL_SCHEMA_INVALID,
			    "full() indexes can only be created on frozen "
			    "collections");
	if (!coll && *target != CQL_INDEX_SIMPLE)
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot create %s() index on %s. Non-collection "
			    "columns only support simple indexes",
			    fn, col->name);
	if ((*target == CQL_INDEX_KEYS || *target == CQL_INDEX_ENTRIES) &&
	    ty->kind != STORAGE_TYPE_MAP)
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot create index on %s of column %s with "
			    "non-map type",
			    fn, col->name);
	/* SAI's SUPPORTED_TYPES: every simple type Cassini has but blob */
	if (!coll && ty->kind == STORAGE_TYPE_BLOB)
		return fail(CQL_SCHEMA_INVALID, "Unsupported type: blob");
	if (coll && !frozen_coll) {
		size_t nsub = ty->count < 2 ? ty->count : 2;
		for (size_t i = 0; i < nsub; i++) {
			bool used = ty->kind != STORAGE_TYPE_MAP ||
				    *target == CQL_INDEX_ENTRIES ||
				    (i == 0) == (*target == CQL_INDEX_KEYS);
			if (used && ty->sub[i]->kind == STORAGE_TYPE_BLOB)
				return fail(CQL_SCHEMA_INVALID,
					    "Unsupported type: blob");
		}
	}
	return CQL_SCHEMA_OK;
}

/* IndexMetadata.generateDefaultIndexName and findAvailableIndexName. */
static void default_name(const struct cql_keyspace *k, const char *table,
			 const char *column, char *out, size_t cap)
{
	char base[200];
	size_t n = 0;
	const char *parts[3] = {table, column, "idx"};
	for (size_t p = 0; p < 3; p++) {
		if (p)
			base[n++] = '_';
		for (const char *c = parts[p]; *c && n + 8 < sizeof(base); c++)
			if ((*c >= 'a' && *c <= 'z') ||
			    (*c >= 'A' && *c <= 'Z') ||
			    (*c >= '0' && *c <= '9') || *c == '_')
				base[n++] = *c;
	}
	base[n] = '\0';
	snprintf(out, cap, "%s", base);
	for (int i = 1; cql_keyspace_index(k, out, NULL); i++)
		snprintf(out, cap, "%s_%d", base, i);
}

static bool same_options(const struct cql_index *a, const struct cql_index *b)
{
	if (a->option_count != b->option_count)
		return false;
	for (size_t i = 0; i < a->option_count; i++) {
		bool found = false;
		for (size_t j = 0; j < b->option_count && !found; j++)
			found = strcmp(a->option_keys[i], b->option_keys[j]) ==
					0 &&
				strcmp(a->option_values[i],
				       b->option_values[j]) == 0;
		if (!found)
			return false;
	}
	return true;
}

/* Puts `t` (a copy of `old` with its indexes changed) in old's place. */
static enum cql_schema_status
swap_table(struct cql_schema *s, struct cql_keyspace *k, struct cql_table *old,
	   struct cql_table *t, struct cql_schema_change *change)
{
	if (schema_retire(s, RETIRED_TABLE, old) != 0) {
		schema_table_free(t);
		return nomem();
	}
	schema_table_remove(k, old);
	schema_table_insert(k, t); /* cannot fail: the slot was freed */
	set_change(change, "UPDATED", "TABLE", k->meta->name, t->meta->name);
	return CQL_SCHEMA_OK;
}

/* Gives t's meta (its own, not shared yet) t's indexes, which the engine
 * maintains (storage_table_meta_add_index). */
static int meta_sync_indexes(struct cql_table *t)
{
	static const enum storage_index_target kinds[] = {
		[CQL_INDEX_SIMPLE] = STORAGE_INDEX_VALUE,
		[CQL_INDEX_KEYS] = STORAGE_INDEX_KEYS,
		[CQL_INDEX_VALUES] = STORAGE_INDEX_VALUES,
		[CQL_INDEX_ENTRIES] = STORAGE_INDEX_ENTRIES,
		[CQL_INDEX_FULL] = STORAGE_INDEX_FULL,
	};
	storage_table_meta_clear_indexes(t->meta);
	for (size_t i = 0; i < t->index_count; i++) {
		const struct cql_index *ix = &t->indexes[i];
		if (storage_table_meta_add_index(
			    t->meta, ix->name, (size_t)ix->column,
			    kinds[ix->target], cql_index_analyzer(ix)) != 0)
			return -1;
	}
	return 0;
}

/* A copy of `old` for a change of its indexes (the same meta contents). */
static struct cql_table *table_for_indexes(const struct cql_table *old)
{
	struct storage_table_meta *m = storage_table_meta_clone(old->meta);
	if (!m)
		return NULL;
	struct cql_table *t = calloc(1, sizeof(*t));
	if (!t) {
		storage_table_meta_delete(m);
		return NULL;
	}
	t->meta = m;
	t->opts = old->opts;
	memcpy(t->option_time, old->option_time, sizeof(t->option_time));
	t->columns_diverged = old->columns_diverged;
	return t;
}

enum cql_schema_status schema_create_index(struct cql_schema *s,
					   const struct cql_index_stmt *st,
					   const char *current, bool internal,
					   struct cql_schema_change *change)
{
	const char *ksn = NULL;
	enum cql_schema_status r = index_keyspace(st, current, &ksn);
	if (r != CQL_SCHEMA_OK)
		return r;
	if (st->other_properties)
		return fail(CQL_SCHEMA_SYNTAX, "Unknown property");
	if (st->options && !st->custom && !st->using)
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot specify options for a non-CUSTOM index");
	if (st->custom && !st->using)
		return fail(CQL_SCHEMA_INVALID,
			    "CUSTOM index requires specifiying the index "
			    "class");
	if ((r = index_class(st->using)) != CQL_SCHEMA_OK)
		return r;
	struct cql_keyspace *k = schema_keyspace_mut(s, ksn);
	if (!k)
		return fail(CQL_SCHEMA_INVALID, "Keyspace '%s' doesn't exist",
			    ksn);
	if (!internal && k->system)
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ksn);
	struct cql_table *old = schema_table_mut(k, st->table.name);
	if (!old)
		return fail(CQL_SCHEMA_INVALID, "Table '%s' doesn't exist",
			    st->table.name);
	if (st->name.name && cql_keyspace_index(k, st->name.name, NULL)) {
		if (st->if_not_exists)
			return CQL_SCHEMA_NOOP;
		return fail(CQL_SCHEMA_INVALID, "Index '%s' already exists",
			    st->name.name);
	}
	if (st->name.name && !valid_name(st->name.name))
		return fail(CQL_SCHEMA_CONFIG, "Illegal index name %s",
			    st->name.name);
	for (size_t i = 0; i < old->meta->column_count; i++)
		if (old->meta->columns[i].type &&
		    old->meta->columns[i].type->kind == STORAGE_TYPE_COUNTER)
			return fail(CQL_SCHEMA_INVALID,
				    "Secondary indexes on counter tables "
				    "aren't supported");
	int c = cql_table_column(old, st->column);
	if (c < 0)
		return fail(CQL_SCHEMA_INVALID, "Column '%s' doesn't exist",
			    st->column);
	const struct storage_column *col = &old->meta->columns[c];
	struct cql_index ix;
	memset(&ix, 0, sizeof(ix));
	ix.column = c;
	ix.target = st->target;
	if ((r = index_target_check(old->meta, col, &ix.target)) !=
	    CQL_SCHEMA_OK)
		return r;
	if ((r = index_options(st, col, &ix)) != CQL_SCHEMA_OK)
		return r;
	if (st->name.name)
		snprintf(ix.name, sizeof(ix.name), "%s", st->name.name);
	else
		default_name(k, old->meta->name, col->name, ix.name,
			     sizeof(ix.name));
	for (size_t i = 0; i < old->index_count; i++) {
		const struct cql_index *o = &old->indexes[i];
		if (o->column != c || o->target != ix.target)
			continue;
		if (st->if_not_exists)
			return CQL_SCHEMA_NOOP;
		if (same_options(o, &ix))
			return fail(CQL_SCHEMA_INVALID,
				    "Index %s is a duplicate of existing "
				    "index %s",
				    ix.name, o->name);
		return fail(CQL_SCHEMA_INVALID,
			    "Cannot create more than one storage-attached "
			    "index on the same column: %s",
			    col->name);
	}
	struct cql_table *t = table_for_indexes(old);
	struct cql_index *list =
		t ? malloc((old->index_count + 1) * sizeof(*list)) : NULL;
	if (!list) {
		schema_table_free(t);
		return nomem();
	}
	if (old->index_count)
		memcpy(list, old->indexes, old->index_count * sizeof(*list));
	list[old->index_count] = ix;
	t->indexes = list;
	t->index_count = old->index_count + 1;
	if (meta_sync_indexes(t) != 0) {
		schema_table_free(t);
		return nomem();
	}
	return swap_table(s, k, old, t, change);
}

/* ---- DROP INDEX ---------------------------------------------------------- */

enum cql_schema_status schema_drop_index(struct cql_schema *s,
					 const struct cql_index_stmt *st,
					 const char *current, bool internal,
					 struct cql_schema_change *change)
{
	const char *ksn = st->name.keyspace ? st->name.keyspace : current;
	if (!ksn)
		return fail(CQL_SCHEMA_INVALID,
			    "No keyspace has been specified. USE a keyspace, "
			    "or explicitly specify keyspace.tablename");
	struct cql_keyspace *k = schema_keyspace_mut(s, ksn);
	if (!k) {
		if (st->if_exists)
			return CQL_SCHEMA_NOOP;
		return fail(CQL_SCHEMA_INVALID, "Keyspace '%s' doesn't exist",
			    ksn);
	}
	const struct cql_table *ct = NULL;
	const struct cql_index *found =
		cql_keyspace_index(k, st->name.name, &ct);
	if (!found) {
		if (st->if_exists)
			return CQL_SCHEMA_NOOP;
		return fail(CQL_SCHEMA_INVALID, "Index '%s.%s' doesn't exist",
			    ksn, st->name.name);
	}
	if (!internal && k->system)
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ksn);
	struct cql_table *old = schema_table_mut(k, ct->meta->name);
	struct cql_table *t = table_for_indexes(old);
	if (!t || schema_indexes_copy(t, old) != 0) {
		schema_table_free(t);
		return nomem();
	}
	size_t at = (size_t)(found - old->indexes);
	memmove(&t->indexes[at], &t->indexes[at + 1],
		(t->index_count - at - 1) * sizeof(*t->indexes));
	t->index_count--;
	if (meta_sync_indexes(t) != 0) {
		schema_table_free(t);
		return nomem();
	}
	return swap_table(s, k, old, t, change);
}
