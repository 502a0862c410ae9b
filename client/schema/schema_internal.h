/* The schema registry's insides, shared by schema.c and schema_ddl.c. */
#ifndef CASSINI_CLIENT_SCHEMA_INTERNAL_H
#define CASSINI_CLIENT_SCHEMA_INTERNAL_H

#include "client/schema/schema.h"

/* The WITH options of a table (default_time_to_live ... id). */
#define TABLE_OPTION_COUNT 17

struct cql_table {
	/* Dropped columns keep their slot, marked in meta->columns. */
	struct storage_table_meta *meta;
	struct cql_table_options opts;
	/* When each WITH option was last written by an ALTER (the time the
	 * node that ran it stamped it with; 0: at creation). */
	int64_t option_time[TABLE_OPTION_COUNT];
	bool columns_diverged;     /* cql_table_columns_diverged */
	struct cql_index *indexes; /* in creation order */
	size_t index_count;
	/* Its share of the schema version (a hash of its definition), set
	 * when it enters a keyspace: tables do not change once in. */
	uint64_t digest[2];
};

/* A user-defined type (CREATE TYPE). Like tables, replaced (ALTER TYPE),
 * never changed once in a keyspace. Field types are kept as the CQL text
 * Cassandra prints for them (system_schema.types, DESCRIBE): "int",
 * "list<text>", "frozen<address>", "frozen<tuple<int, text>>". */
struct cql_user_type {
	char *keyspace;
	char *name;
	size_t field_count;
	char **field_names;
	char **field_types;
	/* The user types its fields name (directly; each once), in the same
	 * keyspace: what DROP TYPE and DESCRIBE's order look at. */
	char **refs;
	size_t ref_count;
	uint64_t digest[2]; /* its share of the schema version */
	/* The type as columns use it: a frozen STORAGE_TYPE_UDT node (held),
	 * the fields' types resolved (nested user types as their nodes were
	 * when this version was made; an ALTER of one rebuilds the types and
	 * tables that name it). */
	const struct storage_type *node;
};

/* The WITH options of a keyspace. */
enum { KS_REPLICATION, KS_DURABLE_WRITES, KEYSPACE_OPTION_COUNT };

struct cql_keyspace {
	struct storage_keyspace_meta *meta;
	struct ring_strategy *strategy;
	/* When each option was last written by an ALTER (as in cql_table). */
	int64_t option_time[KEYSPACE_OPTION_COUNT];
	bool system;
	struct cql_table **tables; /* sorted by name */
	size_t table_count;
	size_t table_cap;
	/* The sum of its tables' digests (updated as tables come and go),
	 * so the schema version costs a line per keyspace, not a walk of
	 * every column of every table. */
	uint64_t tables_digest[2];
	struct cql_user_type **types; /* sorted by name */
	size_t type_count;
	size_t type_cap;
	uint64_t types_digest[2]; /* the sum of its types' digests */
};

enum retired_kind {
	RETIRED_TABLE,
	RETIRED_KEYSPACE,
	RETIRED_TYPE,
};

/* A replaced or dropped object, and the generation of the change that
 * removed it: a reader pinned before that generation may hold it. */
struct retired {
	enum retired_kind kind;
	void *ptr;
	uint64_t generation;
};

struct cql_schema {
	struct cql_keyspace **keyspaces; /* sorted by name */
	size_t count;
	size_t cap;
	/* Replaced or dropped objects not freed yet, oldest first (entries
	 * retired_head .. retired_count): freed once every pin older than
	 * their generation is gone (schema.h, "Lifetime"). */
	struct retired *retired;
	size_t retired_head, retired_count, retired_cap;
	/* cql_schema_change.dropped of the last change */
	uint8_t (*dropped)[16];
	size_t dropped_cap;
	/* Pins held, oldest first (their generations never decrease). */
	struct cql_schema_pin *pins, *pins_tail;
	size_t pin_count;
	uint64_t generation; /* cql_schema_generation */
	/* cql_schema_version of generation version_gen: drivers read
	 * system.local's schema_version after every DDL, and gossip carries
	 * it; computing it walks every table */
	uint8_t version[16];
	uint64_t version_gen;
	bool version_known;
};

/* Lookups returning mutable objects (for the DDL code). */
struct cql_keyspace *schema_keyspace_mut(struct cql_schema *s,
					 const char *name);
int schema_keyspace_insert(struct cql_schema *s, struct cql_keyspace *k);
void schema_keyspace_remove(struct cql_schema *s, struct cql_keyspace *k);
int schema_table_insert(struct cql_keyspace *k, struct cql_table *t);
void schema_table_remove(struct cql_keyspace *k, struct cql_table *t);
struct cql_table *schema_table_mut(struct cql_keyspace *k, const char *name);
/* Keeps a replaced or dropped object for the readers pinned before this
 * change; it stays intact until schema_apply returns. -1 on ERR_NOMEM. */
int schema_retire(struct cql_schema *s, enum retired_kind kind, void *ptr);
/* Room for `n` more schema_retire calls that then cannot fail. */
int schema_reserve_retired(struct cql_schema *s, size_t n);
/* Frees the retired objects no pin can hold any more. */
void schema_reclaim(struct cql_schema *s);
/* Room for `n` ids in the change's dropped list (before anything
 * changes); -1 on ERR_NOMEM. Then schema_note_dropped adds one. */
int schema_reserve_dropped(struct cql_schema *s, size_t n);
void schema_note_dropped(struct cql_schema *s, struct cql_schema_change *c,
			 const uint8_t id[16]);

/* User types (schema.c keeps them sorted; schema_types.c's DDL). */
struct cql_user_type *schema_type_mut(struct cql_keyspace *k, const char *name);
int schema_type_insert(struct cql_keyspace *k, struct cql_user_type *t);
void schema_type_remove(struct cql_keyspace *k, struct cql_user_type *t);
void schema_type_free(struct cql_user_type *t);
/* Moves old's types to k (ALTER KEYSPACE's new object). */
void schema_types_move(struct cql_keyspace *k, struct cql_keyspace *old);
/* The frozen node of user type `name` of `k`, or NULL. */
const struct storage_type *schema_type_node(const struct cql_keyspace *k,
					    const char *name);
/* Whether table `t` has a column whose type names user type `name` of
 * its keyspace (anywhere inside it); with `key_only` only its partition
 * key columns count. */
bool schema_table_uses_type(const struct cql_keyspace *k,
			    const struct cql_table *t, const char *name,
			    bool key_only);
/* `t` with every user type node of keyspace `ks` named `name` replaced by
 * `repl` (keeping each one's frozenness), held for the caller; `t` itself
 * held when nothing names it. NULL on ERR_NOMEM. */
const struct storage_type *schema_type_rebuild(const struct storage_type *t,
					       const char *ks, const char *name,
					       const struct storage_type *repl);
/* A new version of table `old` whose columns' types name user type `name`
 * as `repl` (schema_tables.c). NULL on ERR_NOMEM. */
struct cql_table *schema_table_retyped(const struct cql_table *old,
				       const char *name,
				       const struct storage_type *repl);

void schema_table_free(struct cql_table *t);
void schema_keyspace_free(struct cql_keyspace *k);
void schema_table_options_default(struct cql_table_options *o);

/* How a statement reaches schema_apply. */
enum schema_origin {
	SCHEMA_CLIENT,     /* a client's statement */
	SCHEMA_INTERNAL,   /* the system tables' definitions: may touch the
			    * system keyspaces */
	SCHEMA_REPLICATED, /* applied elsewhere first: settles a CREATE TABLE
			    * that raced (cql_schema_apply_replicated) */
};

/* CREATE, ALTER or DROP TYPE (schema_types.c). From another node
 * (SCHEMA_REPLICATED) a CREATE of a type that exists is a creation that
 * raced: every node keeps the definition that sorts first. */
enum cql_schema_status schema_type_apply(struct cql_schema *s,
					 const struct cql_stmt *stmt,
					 const char *current_keyspace,
					 enum schema_origin origin,
					 struct cql_schema_change *change);

/* `columns_before`: see cql_schema_apply_replicated (-1 otherwise). */
enum cql_schema_status
schema_apply(struct cql_schema *s, const struct cql_stmt *stmt,
	     const char *current_keyspace, const uint8_t new_id[16],
	     enum schema_origin origin, int columns_before,
	     struct cql_schema_change *change);

#endif
