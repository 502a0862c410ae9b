/*
 * Shared by the DDL files: schema_ddl.c (keyspaces, and the dispatch of a
 * statement), schema_tables.c (tables and their column types) and
 * schema_options.c (a table's WITH options).
 */
#ifndef CASSINI_CLIENT_SCHEMA_DDL_INTERNAL_H
#define CASSINI_CLIENT_SCHEMA_DDL_INTERNAL_H

#include "client/schema/schema_internal.h"

#include "common/err.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define NAME_MAX_LEN 48

/* schema_tables.c: a column type as written -> a type tree held for the
 * caller (storage_type_unref), with Cassandra's refusals (non-frozen
 * collections inside collections, durations in sets and map keys, ...).
 * Collections and UDTs inside a collection, a tuple, a vector or a
 * frozen<> are frozen. `ks` is the keyspace user-defined type names
 * resolve in. */
struct cql_type_ast;
struct cql_keyspace;
enum cql_schema_status cql_schema_type_resolve(const struct cql_type_ast *t,
					       const struct cql_keyspace *ks,
					       const struct storage_type **out);

static inline enum cql_schema_status fail(enum cql_schema_status st,
					  const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline enum cql_schema_status fail(enum cql_schema_status st,
					  const char *fmt, ...)
{
	char msg[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	err_set(st == CQL_SCHEMA_NOMEM ? ERR_NOMEM : ERR_INVALID, "%s", msg);
	return st;
}

static inline enum cql_schema_status nomem(void)
{
	return fail(CQL_SCHEMA_NOMEM, "out of memory");
}

static inline bool valid_name(const char *n)
{
	size_t len = strlen(n);
	if (len == 0 || len > NAME_MAX_LEN)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && n[i] != '_')
			return false;
	return true;
}

static inline bool system_name(const char *ks)
{
	return strcmp(ks, "system") == 0 || strcmp(ks, "system_schema") == 0 ||
	       strcmp(ks, "system_auth") == 0 ||
	       strcmp(ks, "system_distributed") == 0 ||
	       strcmp(ks, "system_traces") == 0 ||
	       strcmp(ks, "system_virtual_schema") == 0 ||
	       strcmp(ks, "system_views") == 0;
}

/* A constant option value as text (Cassandra keeps options as strings). */
static inline int term_text(const struct cql_term *t, char *dst, size_t cap)
{
	switch (t->kind) {
	case CQL_TERM_STRING:
	case CQL_TERM_INTEGER:
	case CQL_TERM_FLOAT:
	case CQL_TERM_BOOLEAN:
	case CQL_TERM_UUID:
		if (t->len + 2 > cap)
			return -1;
		snprintf(dst, cap, "%s%.*s", t->negative ? "-" : "",
			 (int)t->len, t->text);
		return 0;
	default:
		return -1;
	}
}

static inline void set_change(struct cql_schema_change *c, const char *change,
			      const char *target, const char *ks,
			      const char *name)
{
	c->change = change;
	c->target = target;
	c->replaced = false;
	c->diverged = false;
	c->columns_before = -1;
	c->dropped = NULL;
	c->dropped_count = 0;
	snprintf(c->keyspace, sizeof(c->keyspace), "%s", ks);
	snprintf(c->name, sizeof(c->name), "%s", name ? name : "");
}

enum cql_schema_status schema_table_options(const struct cql_option *opts,
					    size_t n,
					    struct storage_table_options *o,
					    struct cql_table_options *co,
					    uint8_t id[16], int64_t *times,
					    int64_t time_us, size_t *applied);
enum cql_schema_status schema_create_table(struct cql_schema *s,
					   const struct cql_create_table *ct,
					   const char *current,
					   const uint8_t new_id[16],
					   enum schema_origin origin,
					   struct cql_schema_change *change);
enum cql_schema_status schema_alter_table(struct cql_schema *s,
					  const struct cql_alter_table *at,
					  const char *current, bool internal,
					  int columns_before,
					  struct cql_schema_change *change);
enum cql_schema_status schema_drop_table(struct cql_schema *s,
					 const struct cql_qname *name,
					 bool if_exists, const char *current,
					 bool internal,
					 struct cql_schema_change *change);

/* schema_index.c */
enum cql_schema_status schema_create_index(struct cql_schema *s,
					   const struct cql_index_stmt *ix,
					   const char *current, bool internal,
					   struct cql_schema_change *change);
enum cql_schema_status schema_drop_index(struct cql_schema *s,
					 const struct cql_index_stmt *ix,
					 const char *current, bool internal,
					 struct cql_schema_change *change);
/* A copy of a table's indexes for its replacement; -1 on ERR_NOMEM. */
int schema_indexes_copy(struct cql_table *to, const struct cql_table *from);

#endif
