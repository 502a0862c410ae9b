/*
 * The executor's insides, shared by executor.c (lifecycle, dispatch,
 * running one statement), exec_bind.c (bind markers), exec_ddl.c (DDL),
 * exec_batch.c (batches) and exec_prepared.c (PREPARE / EXECUTE and the
 * prepared statement cache).
 */
#ifndef CASSINI_CLIENT_EXEC_INTERNAL_H
#define CASSINI_CLIENT_EXEC_INTERNAL_H

#include "client/cql/cql_functions.h"
#include "client/cql/cql_parse.h"
#include "client/cql/cql_values.h"
#include "client/exec/dml.h"
#include "client/exec/executor.h"
#include "client/exec/select.h"
#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

static inline void reply_error(struct job *j, uint32_t code, const char *msg)
{
	buf_clear(&j->out);
	cql_encode_error(&j->out, j->info->version, j->info->stream, code, msg);
}

/* The error of a failed parse: syntax, or an unsupported feature. */
static inline void reply_parse_error(struct job *j)
{
	char msg[ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s", err_msg());
	reply_error(j,
		    err_code() == ERR_UNSUPPORTED ? CQL_ERR_INVALID
						  : CQL_ERR_SYNTAX,
		    msg);
}

static inline void reply_bind_error(struct job *j)
{
	char msg[ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s", err_msg());
	reply_error(j,
		    err_code() == ERR_NOMEM ? CQL_ERR_SERVER : CQL_ERR_INVALID,
		    msg);
}

struct bind_spec {
	const char *name;
	/* The column's (held by the table's meta), a static leaf, or one in
	 * the statement's arena. */
	const struct storage_type *type;
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

/* exec_bind.c: bind markers, their names and types, and the values bound */
void cql_exec_bind_using(struct bind_ctx *x, const struct cql_using *u);
int cql_exec_bind_resolve(struct arena *a, const struct cql_stmt *s,
			  const struct cql_table *t, struct bind_spec *b,
			  int nb, int *pk);
int cql_exec_check_binds(struct job *j, const struct cql_stmt *s,
			 const struct cql_table *t,
			 const struct cql_value *binds, size_t n,
			 const struct cql_value **out);
const struct cql_value *cql_exec_bind_values(struct job *j,
					     const struct cql_query_params *p,
					     int nbinds, const char **names);

/* exec_ddl.c */
void cql_exec_run_ddl(struct job *j, const struct cql_stmt *s, const char *text,
		      size_t len);

/* exec_batch.c */
void cql_exec_run_text_batch(struct job *j, const struct cql_stmt *s,
			     const struct cql_value *binds, size_t nbinds,
			     const struct cql_query_params *params);
void cql_exec_run_protocol_batch(struct job *j, const struct cql_batch *b);

/* exec_prepared.c */
struct prepared *cql_exec_prepared_find(struct cql_exec *e, const uint8_t *id,
					size_t len);
void cql_exec_run_prepare(struct job *j, struct slice query);
void cql_exec_run_execute(struct job *j, const struct cql_execute *x);

/* executor.c */
void cql_exec_prepared_free(struct prepared *p);
const struct cql_qname *cql_exec_stmt_table(const struct cql_stmt *s);
void cql_exec_view_write_refused(struct job *j, const char *ks,
				 const char *table);
/* Finds the table a DML/SELECT statement targets (unqualified names are in
 * session_ks), or answers the error. */
const struct cql_table *cql_exec_resolve(struct job *j,
					 const struct cql_stmt *s,
					 const char *session_ks,
					 const char **ks_out);
bool cql_exec_auth_write_refused(struct job *j, const char *ks);
/* The authorizer's check of `perm` on a data resource (table NULL: the
 * keyspace; ks NULL: all keyspaces): true, or false answered Unauthorized. */
bool cql_exec_permitted(struct job *j, uint32_t perm, const char *ks,
			const char *table);
void cql_exec_to_data_path(struct job *j, struct cql_data_request *dr);
void cql_exec_run(struct job *j, const char *text, size_t len,
		  const struct cql_query_params *params);
bool cql_exec_cacheable(enum cql_stmt_kind k);
void cql_exec_run_stmt(struct job *j, const struct cql_stmt *s, int nbinds,
		       const char **names, const char *text, size_t len,
		       const struct cql_query_params *params);

#endif
