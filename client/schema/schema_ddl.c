/*
 * DDL: CREATE/ALTER/DROP KEYSPACE and TABLE applied to the registry, with
 * Cassandra's checks and sentences. This file holds the keyspace
 * statements and schema_apply; tables are schema_tables.c's, their WITH
 * options schema_options.c's. Every change builds the new objects
 * first and swaps them in only when all checks passed, so a refused
 * statement leaves the schema as it was; replaced objects are retired, not
 * freed (see schema.h).
 */
#include "client/schema/schema_ddl_internal.h"

#include "common/err.h"
#include "common/uuid.h"
#include "ring/ring.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- keyspaces ----------------------------------------------------------- */

/*
 * Builds a keyspace object from CREATE/ALTER options. For an ALTER, `old`
 * is the keyspace's meta and `times` when its options were last written:
 * an option written at ks->time_us replaces one written at or before it
 * and is left out otherwise (a later ALTER of it ran on another node and
 * reached this one first; time 0 always replaces). CQL_SCHEMA_NOOP when
 * every option is left out.
 */
static enum cql_schema_status
keyspace_from(const struct cql_keyspace_stmt *ks, bool durable_default,
	      const struct storage_keyspace_meta *old, const int64_t *times,
	      struct cql_keyspace **out)
{
	const struct cql_term *repl = NULL;
	bool durable = durable_default;
	int64_t written[KEYSPACE_OPTION_COUNT] = {0};
	size_t taken = 0;
	if (times)
		memcpy(written, times, sizeof(written));
	for (size_t i = 0; i < ks->option_count; i++) {
		const struct cql_option *o = &ks->options[i];
		int slot = strcmp(o->name, "replication") == 0 ? KS_REPLICATION
			   : strcmp(o->name, "durable_writes") == 0
				   ? KS_DURABLE_WRITES
				   : -1;
		if (slot < 0)
			return fail(CQL_SCHEMA_SYNTAX, "Unknown property '%s'",
				    o->name);
		if (slot == KS_DURABLE_WRITES &&
		    o->value->kind != CQL_TERM_BOOLEAN)
			return fail(CQL_SCHEMA_SYNTAX,
				    "Invalid boolean value for "
				    "durable_writes");
		if (times && ks->time_us) {
			if (ks->time_us < times[slot])
				continue;
			written[slot] = ks->time_us;
		}
		taken++;
		if (slot == KS_REPLICATION)
			repl = o->value;
		else
			durable = strcmp(o->value->text, "true") == 0;
	}
	if (ks->option_count && !taken)
		return CQL_SCHEMA_NOOP;
	const char *keys[64], *values[64];
	char kbuf[64][64], vbuf[64][128];
	size_t n = 0;
	if (repl) {
		if (repl->kind != CQL_TERM_MAP || repl->count / 2 > 64)
			return fail(CQL_SCHEMA_SYNTAX,
				    "replication must be a map");
		for (size_t i = 0; i + 1 < repl->count; i += 2, n++) {
			if (term_text(repl->items[i], kbuf[n],
				      sizeof(kbuf[n])) != 0 ||
			    term_text(repl->items[i + 1], vbuf[n],
				      sizeof(vbuf[n])) != 0)
				return fail(CQL_SCHEMA_CONFIG,
					    "Invalid replication option");
			keys[n] = kbuf[n];
			values[n] = vbuf[n];
		}
	} else if (old) {
		for (size_t i = 0; i < old->replication_count && i < 64;
		     i++, n++) {
			keys[n] = old->replication_keys[i];
			values[n] = old->replication_values[i];
		}
		if (n < 64 && old->replication_class) {
			keys[n] = "class";
			values[n++] = old->replication_class;
		}
	} else {
		return fail(CQL_SCHEMA_CONFIG,
			    "Missing mandatory option 'replication'");
	}
	struct ring_strategy *strategy =
		ring_strategy_new(keys, values, n, false);
	if (!strategy) {
		if (err_code() == ERR_NOMEM)
			return nomem();
		/* AbstractReplicationStrategy names the keyspace */
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", err_msg());
		if (strncmp(why, "Unrecognized strategy option", 28) == 0)
			return fail(CQL_SCHEMA_CONFIG, "%s for keyspace %s",
				    why, ks->name);
		return fail(CQL_SCHEMA_CONFIG, "%s", why);
	}
	struct cql_keyspace *k = calloc(1, sizeof(*k));
	if (!k || !(k->meta = storage_keyspace_meta_new(ks->name, durable))) {
		free(k);
		ring_strategy_delete(strategy);
		return nomem();
	}
	k->strategy = strategy;
	memcpy(k->option_time, written, sizeof(written));
	for (size_t i = 0; i < n; i++) {
		const char *v = values[i];
		char full[160];
		if (strcmp(keys[i], "class") == 0 && !strchr(v, '.')) {
			snprintf(full, sizeof(full),
				 "org.apache.cassandra.locator.%s", v);
			v = full;
		}
		if (storage_keyspace_meta_set_replication(k->meta, keys[i],
							  v) != 0) {
			schema_keyspace_free(k);
			return nomem();
		}
	}
	*out = k;
	return CQL_SCHEMA_OK;
}

/* Puts k in old's place, with old's tables and types. Cannot fail. */
static void replace_keyspace(struct cql_schema *s, struct cql_keyspace *old,
			     struct cql_keyspace *k)
{
	k->tables = old->tables;
	k->table_count = old->table_count;
	k->table_cap = old->table_cap;
	memcpy(k->tables_digest, old->tables_digest, sizeof(k->tables_digest));
	old->tables = NULL;
	old->table_count = old->table_cap = 0;
	schema_types_move(k, old);
	schema_keyspace_remove(s, old);
	schema_keyspace_insert(s, k); /* cannot fail: the slot was freed */
}

/* A CREATE KEYSPACE for a keyspace that exists, applied elsewhere first
 * (k is the statement's): the same keyspace, or a creation that raced on
 * two nodes with other options. Every node keeps the options that sort
 * first (replication as the schema version describes it, then
 * durable_writes), so all end with the same keyspace whatever order the
 * statements reach them in. */
static enum cql_schema_status settle_keyspace_race(struct cql_schema *s,
						   struct cql_keyspace *old,
						   struct cql_keyspace *k,
						   struct cql_schema_change *ch)
{
	int c = strcmp(ring_strategy_describe(k->strategy),
		       ring_strategy_describe(old->strategy));
	if (c == 0)
		c = (int)k->meta->durable_writes -
		    (int)old->meta->durable_writes;
	if (c >= 0) {
		schema_keyspace_free(k);
		return CQL_SCHEMA_NOOP;
	}
	if (schema_retire(s, RETIRED_KEYSPACE, old) != 0) {
		schema_keyspace_free(k);
		return nomem();
	}
	set_change(ch, "UPDATED", "KEYSPACE", k->meta->name, NULL);
	ch->replaced = true;
	replace_keyspace(s, old, k);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status
create_keyspace(struct cql_schema *s, const struct cql_keyspace_stmt *ks,
		enum schema_origin origin, struct cql_schema_change *change)
{
	if (!valid_name(ks->name))
		return fail(CQL_SCHEMA_INVALID,
			    "Keyspace name must not be empty, more than %d "
			    "characters long, or contain non-alphanumeric-"
			    "underscore characters (got \"%s\")",
			    NAME_MAX_LEN, ks->name);
	struct cql_keyspace *old = schema_keyspace_mut(s, ks->name);
	if (old && (origin != SCHEMA_REPLICATED || old->system)) {
		if (ks->if_not_exists)
			return CQL_SCHEMA_NOOP;
		err_set(ERR_EXISTS, "Cannot add existing keyspace \"%s\"",
			ks->name);
		return CQL_SCHEMA_ALREADY_EXISTS;
	}
	if (origin != SCHEMA_INTERNAL && system_name(ks->name))
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ks->name);
	struct cql_keyspace *k;
	enum cql_schema_status st = keyspace_from(ks, true, NULL, NULL, &k);
	if (st != CQL_SCHEMA_OK)
		return st;
	if (old)
		return settle_keyspace_race(s, old, k, change);
	if (schema_keyspace_insert(s, k) != 0) {
		schema_keyspace_free(k);
		return nomem();
	}
	set_change(change, "CREATED", "KEYSPACE", ks->name, NULL);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status alter_keyspace(struct cql_schema *s,
					     const struct cql_keyspace_stmt *ks,
					     bool internal,
					     struct cql_schema_change *change)
{
	struct cql_keyspace *old = schema_keyspace_mut(s, ks->name);
	if (!old)
		return fail(CQL_SCHEMA_CONFIG,
			    "Cannot alter non existing "
			    "keyspace '%s'.",
			    ks->name);
	/* The replicated system keyspaces (system_auth, ...) take a new
	 * replication, as in Cassandra; the local ones are fixed. */
	if (!internal && old->system &&
	    !cql_keyspace_name_is_replicated_system(ks->name))
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ks->name);
	struct cql_keyspace *k;
	enum cql_schema_status st = keyspace_from(
		ks, old->meta->durable_writes, old->meta, old->option_time, &k);
	if (st != CQL_SCHEMA_OK)
		return st;
	k->system = old->system;
	if (schema_retire(s, RETIRED_KEYSPACE, old) != 0) {
		schema_keyspace_free(k);
		return nomem();
	}
	/* The tables move to the new keyspace object. */
	replace_keyspace(s, old, k);
	set_change(change, "UPDATED", "KEYSPACE", ks->name, NULL);
	return CQL_SCHEMA_OK;
}

static enum cql_schema_status drop_keyspace(struct cql_schema *s,
					    const struct cql_keyspace_stmt *ks,
					    bool internal,
					    struct cql_schema_change *change)
{
	struct cql_keyspace *k = schema_keyspace_mut(s, ks->name);
	if (!k) {
		if (ks->if_exists)
			return CQL_SCHEMA_NOOP;
		return fail(CQL_SCHEMA_CONFIG,
			    "Cannot drop non existing keyspace '%s'.",
			    ks->name);
	}
	if (!internal && k->system)
		return fail(CQL_SCHEMA_UNAUTHORIZED,
			    "%s keyspace is not user-modifiable.", ks->name);
	if (schema_reserve_dropped(s, k->table_count) != 0 ||
	    schema_retire(s, RETIRED_KEYSPACE, k) != 0)
		return nomem();
	schema_keyspace_remove(s, k);
	set_change(change, "DROPPED", "KEYSPACE", ks->name, NULL);
	for (size_t i = 0; i < k->table_count; i++)
		schema_note_dropped(s, change, k->tables[i]->meta->id);
	return CQL_SCHEMA_OK;
}

enum cql_schema_status
schema_apply(struct cql_schema *s, const struct cql_stmt *stmt,
	     const char *current_keyspace, const uint8_t new_id[16],
	     enum schema_origin origin, int columns_before,
	     struct cql_schema_change *change)
{
	/* Every change to the registry after its system keyspaces comes
	 * through here. */
	bool internal = origin == SCHEMA_INTERNAL;
	enum cql_schema_status st;
	s->generation++;
	switch (stmt->kind) {
	case CQL_STMT_CREATE_KEYSPACE:
		st = create_keyspace(s, &stmt->u.keyspace, origin, change);
		break;
	case CQL_STMT_ALTER_KEYSPACE:
		st = alter_keyspace(s, &stmt->u.keyspace, internal, change);
		break;
	case CQL_STMT_DROP_KEYSPACE:
		st = drop_keyspace(s, &stmt->u.keyspace, internal, change);
		break;
	case CQL_STMT_CREATE_TABLE:
		st = schema_create_table(s, &stmt->u.create_table,
					 current_keyspace, new_id, origin,
					 change);
		break;
	case CQL_STMT_ALTER_TABLE:
		st = schema_alter_table(s, &stmt->u.alter_table,
					current_keyspace, internal,
					columns_before, change);
		break;
	case CQL_STMT_DROP_TABLE:
		st = schema_drop_table(s, &stmt->u.drop_table.table,
				       stmt->u.drop_table.if_exists,
				       current_keyspace, internal, change);
		break;
	case CQL_STMT_CREATE_TYPE:
	case CQL_STMT_ALTER_TYPE:
	case CQL_STMT_DROP_TYPE:
		st = schema_type_apply(s, stmt, current_keyspace, origin,
				       change);
		break;
	case CQL_STMT_CREATE_INDEX:
		st = schema_create_index(s, &stmt->u.index, current_keyspace,
					 internal, change);
		break;
	case CQL_STMT_DROP_INDEX:
		st = schema_drop_index(s, &stmt->u.index, current_keyspace,
				       internal, change);
		break;
	default:
		return fail(CQL_SCHEMA_INVALID, "not a schema statement");
	}
	/* what this change retired is used above until here; with no
	 * reader pinned it goes now (the err slot is the statement's) */
	schema_reclaim(s);
	return st;
}
