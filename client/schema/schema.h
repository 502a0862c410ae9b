/*
 * The schema as clients see it: keyspaces with their replication, tables
 * with their columns and options, and the built-in system keyspaces whose
 * tables drivers query on connect (system.local, system.peers,
 * system.peers_v2, system_schema.*).
 *
 * Tables are described by storage/'s struct storage_table_meta, which the
 * engine stores data with; keyspaces by struct storage_keyspace_meta plus
 * the ring strategy their replication options parse to. The options the
 * engine does not need (comment, read_repair, speculative_retry, caching,
 * ...) live here.
 *
 * DDL is applied with cql_schema_apply(), which validates as Cassandra does
 * and answers with Cassandra's sentences.
 *
 * Lifetime. Metadata objects (keyspaces, tables, their storage metas and
 * ring strategies) are replaced, never changed in place: a pointer
 * obtained before an ALTER keeps describing the old version. A replaced
 * or dropped object is freed as soon as no reader can hold it:
 *  - a lookup used within one call on the loop thread needs nothing (no
 *    schema change runs meanwhile; the change itself is such a call);
 *  - a request that keeps what it looked up across turns of the loop (a
 *    read waiting for replicas, a paged scan's plan, ...) pins the
 *    registry when it starts (cql_schema_pin) and unpins when it ends:
 *    every object retired while a pin is held lives until every pin
 *    older than its retirement is released (epochs: the generation of the
 *    change that retired it against the oldest pin's);
 *  - whatever leaves the loop thread, or outlives the request (a
 *    coordinator's read that answers late, a repair job), holds a
 *    storage_table_meta reference of its own (storage_table_meta_ref).
 * A pin never held long (a request lives for its timeout at most) keeps
 * memory bounded by the schema changes made meanwhile.
 *
 * Not thread-safe: the registry belongs to the event-loop thread.
 */
#ifndef CASSINI_CLIENT_SCHEMA_H
#define CASSINI_CLIENT_SCHEMA_H

#include "client/cql/cql_ast.h"
#include "storage/schema.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cql_schema;
struct cql_keyspace;
struct cql_table;
struct ring_strategy;

/* What kind of reply a failed apply deserves (err_msg() has the text). */
enum cql_schema_status {
	CQL_SCHEMA_OK = 0,
	CQL_SCHEMA_NOOP,           /* IF [NOT] EXISTS matched: nothing done */
	CQL_SCHEMA_INVALID,        /* Invalid 0x2200 */
	CQL_SCHEMA_SYNTAX,         /* Syntax_error 0x2000 (unknown property) */
	CQL_SCHEMA_CONFIG,         /* Config_error 0x2300 */
	CQL_SCHEMA_ALREADY_EXISTS, /* Already_exists 0x2400 */
	CQL_SCHEMA_UNAUTHORIZED,   /* Unauthorized 0x2100 (system keyspaces) */
	CQL_SCHEMA_UNSUPPORTED,    /* Invalid, for features we lack */
	CQL_SCHEMA_NOMEM,
};

/* The RESULT Schema_change / SCHEMA_CHANGE event for an applied change. */
struct cql_schema_change {
	const char *change; /* CREATED, UPDATED, DROPPED */
	const char *target; /* KEYSPACE, TABLE */
	char keyspace[64];
	char name[64]; /* empty for a keyspace */
	/* UPDATED TABLE or KEYSPACE that settled a CREATE that raced on two
	 * nodes (cql_schema_apply_replicated): the table was replaced by
	 * another of the same name and a new id (old_id is the replaced
	 * table's), or the keyspace took the other creation's options. */
	bool replaced;
	uint8_t old_id[16];
	/* ALTER TABLE ADD from another node that numbered the table's
	 * columns differently (cql_table_columns_diverged became true). */
	bool diverged;
	/* ALTER TABLE ADD: how many columns the table had before it, for
	 * the schema record; -1 for other changes. */
	int columns_before;
	/* The ids of the tables the change removed (DROP TABLE, DROP
	 * KEYSPACE: each of its tables, a replaced table: old_id), for the
	 * storage engine to drop; owned by the registry, valid until its
	 * next apply. */
	const uint8_t (*dropped)[16];
	size_t dropped_count;
};

/* Options kept next to storage's table metadata. */
struct cql_table_options {
	char comment[256];
	bool read_repair_blocking;  /* read_repair = 'BLOCKING' (default) */
	char speculative_retry[32]; /* '99p' (default), 'ALWAYS', 'NONE', '50ms'
				     */
	char caching_keys[16];      /* 'ALL' */
	char caching_rows[16];      /* 'NONE' */
	double crc_check_chance;
	int32_t min_index_interval;
	int32_t max_index_interval;
	int32_t memtable_flush_period_in_ms;
};

/* A registry holding the system keyspaces. NULL on ERR_NOMEM. */
struct cql_schema *cql_schema_new(void);
/* A registry holding only the virtual keyspaces (system_views,
 * system_virtual_schema), read by system_tables.c; the executor keeps one
 * beside the schema. NULL on ERR_NOMEM. */
struct cql_schema *cql_schema_new_views(void);
void cql_schema_delete(struct cql_schema *s);

/*
 * Applies a DDL statement (CREATE/ALTER/DROP KEYSPACE or TABLE).
 * `current_keyspace` is the connection's USE keyspace (may be NULL).
 * `new_id` is the id a created table gets unless WITH id = ... names one.
 * On CQL_SCHEMA_OK `change` describes what happened.
 */
enum cql_schema_status cql_schema_apply(struct cql_schema *s,
					const struct cql_stmt *stmt,
					const char *current_keyspace,
					const uint8_t new_id[16],
					struct cql_schema_change *change);

/*
 * cql_schema_apply for a statement another node, or this node's schema
 * log, has already applied (`new_id` is the id it gave a created table).
 * A CREATE TABLE whose table exists with another id is a creation that
 * raced on two nodes: every node keeps the id that sorts first (memcmp),
 * so all of them end with the same table whatever order the statements
 * arrive in. When the statement's id wins, the table is replaced (change:
 * UPDATED TABLE, `replaced`); when it loses, CQL_SCHEMA_NOOP. A CREATE
 * KEYSPACE whose keyspace exists with other options is settled the same
 * way on its options (replication as the schema version describes it,
 * then durable_writes): UPDATED KEYSPACE, `replaced`, or CQL_SCHEMA_NOOP.
 * `columns_before` is, for an ALTER TABLE ADD, how many columns the table
 * had where it ran (-1: not known). A different count here means two
 * nodes added columns at once and numbered them differently: the table is
 * marked (cql_table_columns_diverged, change->diverged).
 */
enum cql_schema_status
cql_schema_apply_replicated(struct cql_schema *s, const struct cql_stmt *stmt,
			    const char *current_keyspace,
			    const uint8_t new_id[16], int columns_before,
			    struct cql_schema_change *change);

/* Whether a DDL statement is stamped with the time of the node that runs
 * it (ALTER TABLE DROP without USING TIMESTAMP: its drop time; ALTER TABLE
 * WITH and ALTER KEYSPACE: when their options were written, the later
 * write of an option winning on every node), and stamping it. The schema
 * record carries the time to other nodes and replays. */
bool cql_schema_stmt_timed(const struct cql_stmt *s);
void cql_schema_stmt_set_time(struct cql_stmt *s, int64_t time_us);

/* A UUID that changes whenever the schema does and is equal on two nodes
 * with the same schema (drivers wait until every node reports the same). */
void cql_schema_version(const struct cql_schema *s, uint8_t out[16]);
/* A number that changes whenever a keyspace or table is created, altered
 * or dropped (and with every statement that tried to): a pinned reader's
 * lookups stay current while it stays the same. */
uint64_t cql_schema_generation(const struct cql_schema *s);

/* A reader's hold on what it looks up (see "Lifetime" above). The caller
 * owns the struct (embedded in its request) and keeps it in place until
 * cql_schema_unpin. */
struct cql_schema_pin {
	uint64_t generation;
	struct cql_schema_pin *prev, *next;
};
void cql_schema_pin(struct cql_schema *s, struct cql_schema_pin *p);
/* The objects retired since the oldest remaining pin was taken may go. */
void cql_schema_unpin(struct cql_schema *s, struct cql_schema_pin *p);

/* What the registry keeps for pinned readers (tests, statistics). */
struct cql_schema_retained {
	size_t objects;      /* retired tables and keyspaces not freed */
	size_t pins;         /* pins held */
	uint64_t oldest_pin; /* its generation (0: none) */
};
void cql_schema_retained(const struct cql_schema *s,
			 struct cql_schema_retained *out);

/* Lookups; NULL when absent. Names are exact (already normalised). */
const struct cql_keyspace *cql_schema_keyspace(const struct cql_schema *s,
					       const char *name);
const struct cql_table *cql_schema_table(const struct cql_schema *s,
					 const char *keyspace,
					 const char *table);

/* Iteration in name order. */
size_t cql_schema_keyspace_count(const struct cql_schema *s);
const struct cql_keyspace *cql_schema_keyspace_at(const struct cql_schema *s,
						  size_t i);

const struct storage_keyspace_meta *
cql_keyspace_meta(const struct cql_keyspace *k);
const struct ring_strategy *cql_keyspace_strategy(const struct cql_keyspace *k);
bool cql_keyspace_is_system(const struct cql_keyspace *k);
/* Whether the keyspace's tables hold data in the engine and are replicated
 * like a user keyspace's (streamed, repaired): user keyspaces and the
 * replicated system keyspaces (system_auth, system_distributed,
 * system_traces), whose replication an operator may ALTER as in
 * Cassandra. */
bool cql_keyspace_is_stored(const struct cql_keyspace *k);
bool cql_keyspace_name_is_replicated_system(const char *name);
size_t cql_keyspace_table_count(const struct cql_keyspace *k);
const struct cql_table *cql_keyspace_table_at(const struct cql_keyspace *k,
					      size_t i);

const struct storage_table_meta *cql_table_meta(const struct cql_table *t);
/* True once ALTER TABLE ADDs that raced on two nodes numbered the table's
 * columns differently there: cells travel between nodes by column number,
 * so reads and writes of the table must be refused (they would read one
 * column's value as another's). Dropping the table ends it. */
bool cql_table_columns_diverged(const struct cql_table *t);
const struct cql_table_options *cql_table_options(const struct cql_table *t);

/*
 * A secondary index (client/schema/schema_index.c). Every index is a
 * storage-attached index (SAI, Cassandra 5.0's default_secondary_index:
 * sai): the legacy CREATE INDEX makes one too. Indexes belong to their
 * table's object and change with it (CREATE/DROP INDEX replace the
 * table, as ALTER TABLE does); index names are unique in a keyspace.
 */
#define CQL_INDEX_OPTION_MAX 8
#define CQL_SAI_CLASS        "org.apache.cassandra.index.sai.StorageAttachedIndex"
struct cql_index {
	char name[256];
	int column; /* the indexed column's number */
	enum cql_index_target target;
	/* the options beside 'target' and 'class_name' (case_sensitive,
	 * normalize, ascii), as given */
	size_t option_count;
	char option_keys[CQL_INDEX_OPTION_MAX][32];
	char option_values[CQL_INDEX_OPTION_MAX][64];
};
size_t cql_table_index_count(const struct cql_table *t);
const struct cql_index *cql_table_index_at(const struct cql_table *t, size_t i);
/* The index on column `column` (any target), or NULL. */
const struct cql_index *cql_table_index_on(const struct cql_table *t,
					   int column);
/* The index named `name` in keyspace `k` and its table, or NULL. */
const struct cql_index *cql_keyspace_index(const struct cql_keyspace *k,
					   const char *name,
					   const struct cql_table **table);
/* The index's 'target' option as Cassandra writes it: "v", "keys(m)",
 * "values(l)", "entries(m)", "full(f)" (the column quoted when it needs
 * to be). */
int cql_index_target_text(const struct cql_table *t, const struct cql_index *ix,
			  char *dst, size_t cap);
/* The index's text analyzer: STORAGE_SAI_* bits of its case_sensitive,
 * normalize and ascii options (0: none). */
unsigned cql_index_analyzer(const struct cql_index *ix);
/* A boolean analyzer option (case_sensitive: default true; normalize,
 * ascii: default false). */
bool cql_index_option_bool(const struct cql_index *ix, const char *key,
			   bool dflt);

/* A table's compaction sub-options as Cassandra's CompactionParams lists
 * them (DESCRIBE and system_schema.tables): the class, the thresholds, the
 * window for TWCS, LCS's sizes and the tombstone options that differ from
 * their defaults. The strings point into the struct. */
struct cql_compaction_map {
	const char *keys[12], *values[12];
	size_t count;
	char min[16], max[16], window[24], threshold[32], interval[24],
		sstable_size[24], fanout[16];
};
struct storage_table_options;
void cql_compaction_map(const struct storage_table_options *o,
			struct cql_compaction_map *out);
/* True for a column removed with ALTER TABLE DROP (its slot stays). */
bool cql_table_column_dropped(const struct cql_table *t, size_t column);
/* The column number of `name`, or -1 (dropped columns are not found). */
int cql_table_column(const struct cql_table *t, const char *name);

/* User-defined types of a keyspace (CREATE TYPE), in name order. Field
 * types are CQL text as Cassandra prints them ("int", "list<text>",
 * "frozen<address>"). */
struct cql_user_type;
const struct cql_user_type *cql_keyspace_type(const struct cql_keyspace *k,
					      const char *name);
size_t cql_keyspace_type_count(const struct cql_keyspace *k);
const struct cql_user_type *cql_keyspace_type_at(const struct cql_keyspace *k,
						 size_t i);
const char *cql_user_type_keyspace(const struct cql_user_type *t);
const char *cql_user_type_name(const struct cql_user_type *t);
size_t cql_user_type_field_count(const struct cql_user_type *t);
const char *cql_user_type_field_name(const struct cql_user_type *t, size_t i);
const char *cql_user_type_field_type(const struct cql_user_type *t, size_t i);
/* The keyspace's types in DESCRIBE's order (the python driver's
 * export_as_string): by name, each after the types its fields name.
 * `out` has room for cql_keyspace_type_count(k). -1 on ERR_NOMEM. */
int cql_keyspace_types_ordered(const struct cql_keyspace *k,
			       const struct cql_user_type **out);

/* Whether a column of table `t` (of keyspace `k`) names user type `name`,
 * anywhere in its type: an ALTER TYPE gives such tables a new version. */
bool cql_table_uses_type(const struct cql_keyspace *k,
			 const struct cql_table *t, const char *name);

/* CQL text of a column type: "int", "map<text, int>", "frozen<list<int>>". */
int cql_type_text(const struct storage_type *t, char *dst, size_t cap);

/* The serialized partition key (what tokens hash) of `t` from nodetool's
 * text form: one value per partition key column, separated by ':' for
 * compound keys, each written as Cassandra's fromString reads it (text as
 * is, numbers, uuids, 'true', blobs in hex with or without 0x, dates and
 * timestamps as in CQL). ERR_INVALID with the reason. */
struct buf;
int cql_table_key_from_text(const struct cql_table *t, const char *text,
			    struct buf *out);

/* The protocol's [option] for a column type (collections with their
 * element types), allocated in `a`; NULL when out of memory. */
struct arena;
struct cql_type_option;
struct cql_type_option *cql_type_option_of(struct arena *a,
					   const struct storage_type *t);
/* list<elem> (the marker of `IN ?`); `elem` is borrowed. */
struct cql_type_option *
cql_type_option_list_of(struct arena *a, const struct cql_type_option *elem);

#endif
