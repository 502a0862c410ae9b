/*
 * CQL statements as parsed: the syntax tree cql_parse() builds.
 *
 * Everything (nodes, normalised identifiers, literal text) lives in the
 * caller's arena and dies with it. Nothing here knows the schema: names are
 * resolved and terms are typed by the layer that executes the statement.
 *
 * Identifiers are normalised as Cassandra does: unquoted ones are lower-cased,
 * "quoted" ones keep their case (with "" unescaped). Bind markers (? and
 * :name) are numbered in order of appearance from 0.
 */
#ifndef CASSINI_CLIENT_CQL_AST_H
#define CASSINI_CLIENT_CQL_AST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- terms --------------------------------------------------------------- */

enum cql_term_kind {
	CQL_TERM_NULL,
	CQL_TERM_STRING,   /* 'text' or $$text$$; unescaped in text/len */
	CQL_TERM_INTEGER,  /* decimal digits, sign folded into `negative` */
	CQL_TERM_FLOAT,    /* 1.5, 1e10, NaN, Infinity */
	CQL_TERM_BOOLEAN,  /* text is "true" or "false" */
	CQL_TERM_UUID,     /* canonical 8-4-4-4-12 text */
	CQL_TERM_BLOB,     /* 0x...: hex digits after 0x in text */
	CQL_TERM_BIND,     /* ? or :name */
	CQL_TERM_LIST,     /* [a, b] */
	CQL_TERM_SET,      /* {a, b} */
	CQL_TERM_MAP,      /* {k: v, ...}: items alternate key, value */
	CQL_TERM_TUPLE,    /* (a, b) in multi-column relations */
	CQL_TERM_FUNCTION, /* name(args): now(), uuid(), toTimestamp(x) ... */
	CQL_TERM_HINT,     /* (type)term: items[0] typed as `type` */
	CQL_TERM_DURATION, /* 1h30m, P1DT2H ...: text as written */
	CQL_TERM_UDT,      /* {f: a, g: b}: names[i] is items[i]'s field */
};

struct cql_type_ast;

struct cql_term {
	enum cql_term_kind kind;
	const char *text; /* literal text, function name, bind name or NULL */
	size_t len;
	bool negative;           /* INTEGER/FLOAT written with a leading '-' */
	int bind_index;          /* CQL_TERM_BIND */
	struct cql_term **items; /* collection items, function arguments */
	size_t count;
	struct cql_type_ast *type; /* CQL_TERM_HINT */
	const char **names;        /* CQL_TERM_UDT: count field names */
};

/* ---- names --------------------------------------------------------------- */

struct cql_qname {
	const char *keyspace; /* NULL when not given */
	const char *name;
};

/* A column reference with an optional element or field: m['k'], l[2],
 * u.f. */
struct cql_column_ref {
	const char *name;
	struct cql_term *element; /* NULL when absent */
	const char *field;        /* a user type's field, or NULL */
};

/* ---- WHERE --------------------------------------------------------------- */

enum cql_op {
	CQL_OP_EQ,
	CQL_OP_LT,
	CQL_OP_LTE,
	CQL_OP_GT,
	CQL_OP_GTE,
	CQL_OP_NEQ,
	CQL_OP_IN,
	CQL_OP_CONTAINS,
	CQL_OP_CONTAINS_KEY,
};

enum cql_relation_kind {
	CQL_REL_COLUMN, /* col op term */
	CQL_REL_TOKEN,  /* token(a, b) op term */
	CQL_REL_TUPLE,  /* (c1, c2) op (t1, t2) */
};

struct cql_relation {
	enum cql_relation_kind kind;
	const char **columns; /* one for COLUMN, several for TOKEN/TUPLE */
	size_t column_count;
	enum cql_op op;
	struct cql_term *value;   /* for IN: a TUPLE/LIST of terms or a bind */
	struct cql_term *element; /* m[k] op v: the key k, else NULL */
};

/* ---- types --------------------------------------------------------------- */

/* A CQL type as written: name plus parameters (list<int>, map<text, int>,
 * frozen<set<uuid>>). Names are lower-cased; frozen is a flag. */
struct cql_type_ast {
	const char *keyspace; /* ks.t: a user type's keyspace, else NULL */
	const char *name;     /* the digits of a number (vector<float, 3>) */
	bool frozen;
	bool number; /* a numeric parameter, not a type */
	struct cql_type_ast **params;
	size_t param_count;
};

/* ---- options (WITH a = b AND c = {..}) ----------------------------------- */

struct cql_option {
	const char *name;       /* lower-cased */
	struct cql_term *value; /* constant or map literal */
};

/* ---- statements ---------------------------------------------------------- */

enum cql_stmt_kind {
	CQL_STMT_USE,
	CQL_STMT_CREATE_KEYSPACE,
	CQL_STMT_ALTER_KEYSPACE,
	CQL_STMT_DROP_KEYSPACE,
	CQL_STMT_CREATE_TABLE,
	CQL_STMT_ALTER_TABLE,
	CQL_STMT_DROP_TABLE,
	CQL_STMT_TRUNCATE,
	CQL_STMT_INSERT,
	CQL_STMT_UPDATE,
	CQL_STMT_DELETE,
	CQL_STMT_SELECT,
	CQL_STMT_BATCH,
	CQL_STMT_DESCRIBE,
	CQL_STMT_ROLE, /* CREATE/ALTER/DROP ROLE or USER, GRANT, LIST ROLES */
	CQL_STMT_CREATE_TYPE, /* u.type: CREATE/ALTER/DROP TYPE */
	CQL_STMT_ALTER_TYPE,
	CQL_STMT_DROP_TYPE,
	CQL_STMT_CREATE_INDEX,
	CQL_STMT_DROP_INDEX,
};

enum cql_role_op {
	CQL_ROLE_CREATE,
	CQL_ROLE_ALTER,
	CQL_ROLE_DROP,
	CQL_ROLE_GRANT,  /* GRANT role TO grantee */
	CQL_ROLE_REVOKE, /* REVOKE role FROM grantee */
	CQL_ROLE_LIST,   /* LIST ROLES [OF role] [NORECURSIVE] */
	CQL_ROLE_LIST_USERS,
	CQL_ROLE_GRANT_PERMISSION,  /* GRANT perms ON resource TO grantee */
	CQL_ROLE_REVOKE_PERMISSION, /* REVOKE perms ON resource FROM grantee */
	CQL_ROLE_LIST_PERMISSIONS,  /* LIST perms [ON r] [OF role] [NORECURSIVE]
				     */
};

/* Cassandra 4.1's permissions (auth/Permission), one bit each in the order
 * of its enum. */
enum cql_permission {
	CQL_PERM_CREATE = 1u << 0,
	CQL_PERM_ALTER = 1u << 1,
	CQL_PERM_DROP = 1u << 2,
	CQL_PERM_SELECT = 1u << 3,
	CQL_PERM_MODIFY = 1u << 4,
	CQL_PERM_AUTHORIZE = 1u << 5,
	CQL_PERM_DESCRIBE = 1u << 6,
	CQL_PERM_EXECUTE = 1u << 7,
};
#define CQL_PERM_ALL 0xffu

/* The resources permissions are granted on (auth/IResource). */
enum cql_resource_kind {
	CQL_RES_NONE, /* LIST without ON */
	CQL_RES_ALL_KEYSPACES,
	CQL_RES_KEYSPACE,
	CQL_RES_TABLE, /* keyspace NULL: the USE keyspace */
	CQL_RES_ALL_ROLES,
	CQL_RES_ROLE,
	CQL_RES_ALL_FUNCTIONS,
	CQL_RES_KEYSPACE_FUNCTIONS, /* ALL FUNCTIONS IN KEYSPACE k */
	CQL_RES_FUNCTION,           /* name: "f(type, ...)" as written */
	CQL_RES_ALL_MBEANS,
	CQL_RES_MBEAN,
};

struct cql_resource {
	enum cql_resource_kind kind;
	const char *keyspace; /* KEYSPACE, TABLE, functions */
	const char *name;     /* TABLE, ROLE, FUNCTION, MBEAN */
};

/* A role statement (client/cql/cql_parse_roles.c). Names are as Cassandra
 * takes them: unquoted identifiers lowercased, quoted ones and string
 * literals as written. */
struct cql_role_stmt {
	enum cql_role_op op;
	bool user;           /* the legacy USER form */
	const char *role;    /* the subject; GRANT/REVOKE: the granted role;
				LIST: OF role, or NULL */
	const char *grantee; /* GRANT ... TO, REVOKE ... FROM */
	bool if_exists, if_not_exists;
	const char *password; /* NULL when not given */
	int login, superuser; /* -1 when not given, else 0 or 1 */
	bool options;         /* OPTIONS = {...} was given */
	bool norecursive;
	/* Permission statements: the permissions named (GRANT/REVOKE: only
	 * those applicable to the resource), and the resource. `grantee` is
	 * the role granted to / revoked from; LIST's OF role is `role`. */
	uint32_t permissions;
	struct cql_resource resource;
};

enum cql_alter_type_kind {
	CQL_ALTER_TYPE_ADD,    /* ADD [IF NOT EXISTS] f type */
	CQL_ALTER_TYPE_RENAME, /* RENAME [IF EXISTS] f TO g [AND ...] */
	CQL_ALTER_TYPE_ALTER,  /* ALTER f TYPE t: refused when applied */
};

/* CREATE TYPE [IF NOT EXISTS] ks.t (f type, ...), ALTER TYPE [IF EXISTS]
 * ks.t ADD|RENAME ..., DROP TYPE [IF EXISTS] ks.t
 * (client/cql/cql_parse_types.c). Field names are identifiers (unquoted
 * ones lower-cased). */
struct cql_type_stmt {
	struct cql_qname name;
	bool if_exists;     /* ALTER, DROP */
	bool if_not_exists; /* CREATE */
	enum cql_alter_type_kind alter;
	/* ALTER ADD IF NOT EXISTS / RENAME IF EXISTS (the field's) */
	bool field_if;
	/* CREATE: the fields; ALTER ADD: the one added; RENAME: pairs from,
	 * to (types NULL) */
	const char **fields;
	struct cql_type_ast **types;
	size_t field_count;
};

struct cql_using {
	struct cql_term *ttl;       /* NULL when not given */
	struct cql_term *timestamp; /* NULL when not given */
};

struct cql_column_def {
	const char *name;
	struct cql_type_ast *type;
	bool is_static;
	bool primary_key; /* `col type PRIMARY KEY` */
};

struct cql_clustering_order {
	const char *column;
	bool descending;
};

struct cql_create_table {
	struct cql_qname table;
	bool if_not_exists;
	struct cql_column_def *columns;
	size_t column_count;
	const char **partition_key; /* from PRIMARY KEY (...) or the column */
	size_t partition_key_count;
	const char **clustering;
	size_t clustering_count;
	struct cql_clustering_order *order;
	size_t order_count;
	struct cql_option *options;
	size_t option_count;
};

enum cql_alter_table_kind {
	CQL_ALTER_ADD,
	CQL_ALTER_DROP,
	CQL_ALTER_WITH,
	CQL_ALTER_RENAME,
};

struct cql_alter_table {
	struct cql_qname table;
	enum cql_alter_table_kind kind;
	struct cql_column_def *columns; /* ADD */
	size_t column_count;
	const char **names; /* DROP; RENAME pairs from, to */
	size_t name_count;
	struct cql_option *options; /* WITH */
	size_t option_count;
	/* DROP ... USING TIMESTAMP t (microseconds), or the time the node
	 * that ran the DROP stamped it with (the schema record carries it):
	 * cells written at or before it are never read again. WITH: the time
	 * the node that ran it stamped it with; an option keeps the value
	 * written last (unset: the statement's order). */
	bool has_timestamp;
	int64_t timestamp;
};

/* What of a column an index covers: the value, or a collection's keys,
 * values, entries, or a frozen collection whole. */
enum cql_index_target {
	CQL_INDEX_SIMPLE,
	CQL_INDEX_KEYS,
	CQL_INDEX_VALUES,
	CQL_INDEX_ENTRIES,
	CQL_INDEX_FULL,
};

/* CREATE [CUSTOM] INDEX [IF NOT EXISTS] [[ks.]name] ON [ks.]t (target)
 * [USING 'class'] [WITH OPTIONS = {...}], and DROP INDEX [IF EXISTS]
 * [ks.]name (`name` only). */
struct cql_index_stmt {
	struct cql_qname table;
	struct cql_qname name; /* name.name NULL: the default name */
	bool if_not_exists;
	bool if_exists; /* DROP */
	bool custom;
	const char *using; /* the class, as written; NULL when absent */
	const char *column;
	enum cql_index_target target;
	const struct cql_term *options; /* the OPTIONS map, or NULL */
	bool other_properties;          /* WITH something but OPTIONS */
};

struct cql_keyspace_stmt {
	const char *name;
	bool if_exists;     /* DROP */
	bool if_not_exists; /* CREATE */
	struct cql_option *options;
	size_t option_count;
	/* ALTER: the time the node that ran it stamped it with, as an ALTER
	 * TABLE WITH's (0: none). */
	int64_t time_us;
};

/* An IF condition of a conditional write (lightweight transaction):
 * `c op v` or `c[elem] op v`; IN takes a TUPLE of terms or a bind. */
struct cql_condition {
	struct cql_column_ref column;
	enum cql_op op;
	struct cql_term *value;
};

struct cql_insert {
	struct cql_qname table;
	const char **columns;
	size_t column_count;
	struct cql_term **values;
	/* INSERT ... JSON: the values map, a STRING or a BIND (columns and
	 * values are then empty), and DEFAULT UNSET (else DEFAULT NULL). */
	struct cql_term *json;
	bool default_unset;
	struct cql_using using;
	bool if_not_exists;
};

enum cql_assign_kind {
	CQL_ASSIGN_SET,     /* c = v / c[k] = v */
	CQL_ASSIGN_ADD,     /* c = c + v (append, union, counter add) */
	CQL_ASSIGN_PREPEND, /* c = v + c */
	CQL_ASSIGN_REMOVE,  /* c = c - v */
};

struct cql_assignment {
	struct cql_column_ref target;
	enum cql_assign_kind kind;
	struct cql_term *value;
};

struct cql_update {
	struct cql_qname table;
	struct cql_using using;
	struct cql_assignment *assignments;
	size_t assignment_count;
	struct cql_relation *where;
	size_t where_count;
	/* IF EXISTS or IF conditions: a lightweight transaction */
	bool has_conditions;
	bool if_exists;
	struct cql_condition *conditions;
	size_t condition_count;
};

struct cql_delete {
	struct cql_qname table;
	struct cql_column_ref *columns; /* empty: whole rows / partition */
	size_t column_count;
	struct cql_using using;
	struct cql_relation *where;
	size_t where_count;
	bool has_conditions; /* as cql_update's */
	bool if_exists;
	struct cql_condition *conditions;
	size_t condition_count;
};

enum cql_selector_kind {
	CQL_SEL_COLUMN,     /* name */
	CQL_SEL_FUNCTION,   /* name(args): token, writetime, ttl, count,
			       toTimestamp, now, ... (name lower-cased) */
	CQL_SEL_TERM,       /* a literal argument: count(1), blobAsText(0x61) */
	CQL_SEL_COUNT_STAR, /* count(*) */
	CQL_SEL_ELEMENT,    /* name[term]: a map's value or a set's element */
	CQL_SEL_CAST,       /* CAST(args[0] AS type) */
	CQL_SEL_FIELD,      /* args[0].name: a user type's field */
};

struct cql_selector {
	enum cql_selector_kind kind;
	const char *name;
	struct cql_selector *args;
	size_t arg_count;
	struct cql_term *term;     /* CQL_SEL_TERM; CQL_SEL_ELEMENT's key */
	const char *alias;         /* AS alias, or NULL */
	struct cql_type_ast *type; /* CQL_SEL_CAST */
};

struct cql_ordering {
	const char *column;
	bool descending;
};

struct cql_select {
	struct cql_qname table;
	bool distinct;
	bool json;
	bool star;
	struct cql_selector *selectors;
	size_t selector_count;
	struct cql_relation *where;
	size_t where_count;
	struct cql_ordering *order;
	size_t order_count;
	struct cql_term *limit;               /* NULL when absent */
	struct cql_term *per_partition_limit; /* NULL when absent */
	bool allow_filtering;
	bool has_group_by;
	const char **group_by; /* GROUP BY's columns, as written */
	size_t group_by_count;
	/* Per GROUP BY element (NULL when none is a function call): the
	 * function applied to the column group_by[i], as floor(t, 1h[,
	 * start]) (Cassandra 5.0) */
	struct cql_group_fn *group_fns;
};

struct cql_group_fn {
	const char *name;         /* lower-case; NULL: a plain column */
	struct cql_term *args[2]; /* the arguments after the column */
	size_t nargs;
};

struct cql_stmt;

struct cql_batch_stmt {
	int type; /* 0 logged, 1 unlogged, 2 counter */
	struct cql_using using;
	struct cql_stmt **statements;
	size_t count;
};

enum cql_describe_kind {
	CQL_DESCRIBE_CLUSTER,
	CQL_DESCRIBE_KEYSPACES,
	CQL_DESCRIBE_KEYSPACE, /* name may be NULL: the current one */
	CQL_DESCRIBE_TABLES,
	CQL_DESCRIBE_TABLE,
	CQL_DESCRIBE_SCHEMA,
	CQL_DESCRIBE_NAME, /* DESCRIBE x or x.y: a keyspace, else a table */
	/* Kinds Cassini has no elements of (answered empty or not found). */
	CQL_DESCRIBE_TYPES,
	CQL_DESCRIBE_FUNCTIONS,
	CQL_DESCRIBE_AGGREGATES,
	CQL_DESCRIBE_TYPE,
	CQL_DESCRIBE_FUNCTION,
	CQL_DESCRIBE_AGGREGATE,
	CQL_DESCRIBE_INDEX,
	CQL_DESCRIBE_VIEW,
};

struct cql_describe {
	enum cql_describe_kind kind;
	struct cql_qname name;
	bool full;      /* DESCRIBE FULL SCHEMA: system keyspaces too */
	bool only;      /* DESCRIBE ONLY KEYSPACE: without its tables */
	bool internals; /* ... WITH INTERNALS */
};

struct cql_stmt {
	enum cql_stmt_kind kind;
	union {
		const char *use_keyspace;
		struct cql_keyspace_stmt keyspace;
		struct cql_create_table create_table;
		struct cql_alter_table alter_table;
		struct {
			struct cql_qname table;
			bool if_exists;
		} drop_table;
		struct cql_qname truncate;
		struct cql_insert insert;
		struct cql_update update;
		struct cql_delete del;
		struct cql_select select;
		struct cql_batch_stmt batch;
		struct cql_describe describe;
		struct cql_role_stmt role;
		struct cql_type_stmt type;
		struct cql_index_stmt index;
	} u;
};

#endif
