/*
 * The statement executor behind the CQL server: QUERY, PREPARE, EXECUTE and
 * BATCH, from parsed CQL to a RESULT or ERROR frame.
 *
 * Served now: USE; CREATE/ALTER/DROP KEYSPACE and TABLE through the schema
 * registry (answered with Schema_change, and pushed as SCHEMA_CHANGE events
 * to connections that registered); SELECT on the system tables; prepared
 * statements for all of these (with a bound-values count check and
 * Unprepared for unknown ids). Statements on user tables are answered by the
 * data path the node installs (cql_exec_hooks.data); without one they get a
 * clear Invalid.
 *
 * Errors map to protocol codes as drivers expect: syntax -> 0x2000,
 * invalid and unsupported -> 0x2200, config -> 0x2300, already exists ->
 * 0x2400 (with keyspace and table), system keyspaces -> 0x2100.
 */
#ifndef CASSINI_CLIENT_EXECUTOR_H
#define CASSINI_CLIENT_EXECUTOR_H

#include "client/cql/cql_ast.h"
#include "client/proto/server.h"
#include "client/schema/schema.h"
#include "client/schema/system_tables.h"

struct cql_exec;

/* One write of a batch. */
struct cql_batch_item {
	const struct cql_stmt *stmt; /* INSERT, UPDATE or DELETE */
	const struct cql_table *table;
	const struct cql_value *binds;
	size_t bind_count;
	const char *keyspace; /* prepared statements: PREPARE-time keyspace */
};

/* A statement on a user table, handed to the data path with everything
 * resolved. The data path replies with cql_request_reply(), now or later;
 * everything this struct points to except `req` and `table` lives only
 * for the duration of the call, so the data path copies what it keeps
 * (typically it builds its mutations or read commands right away). */
struct cql_data_request {
	struct cql_request *req;
	const struct cql_request_info *info;
	const struct cql_stmt *stmt;   /* NULL for a batch */
	const struct cql_table *table; /* resolved target */
	const struct cql_value *binds;
	size_t bind_count;
	const struct cql_query_params *params; /* consistency, paging, ... */
	/* A batch (stmt NULL): its writes, applied together. */
	const struct cql_batch_item *batch;
	size_t batch_count;
	int64_t batch_timestamp; /* USING TIMESTAMP / default; INT64_MIN: none
				  */
	int batch_type;          /* enum cql_batch_type */
	/* The statement as the client sent it (the prepared text for
	 * EXECUTE); NULL for a protocol batch. Lives for the call. */
	const char *query;
	size_t query_len;
};

/* An applied schema change, with what the schema log needs to replay it. */
struct cql_schema_event {
	const struct cql_schema_change *change;
	const char *cql; /* the statement as the client sent it */
	size_t cql_len;
	const char *keyspace;    /* the USE keyspace it ran in, or NULL */
	const uint8_t *table_id; /* the id offered to CREATE TABLE */
	/* The time (µs) an ALTER TABLE DROP was stamped with, for the schema
	 * record (cql_schema_record_encode); 0 for other statements. */
	int64_t time_us;
};

struct cql_exec_hooks {
	/* Fills `out` with the node's current view; the data stays valid
	 * until the next call. Required. */
	void (*node_info)(void *arg, struct cql_node_info *out);
	/* Statements on user tables (INSERT/UPDATE/DELETE/SELECT/TRUNCATE).
	 * Optional. */
	void (*data)(void *arg, const struct cql_data_request *dr);
	/* Called after a schema change was applied (to persist and spread
	 * it). Optional. */
	void (*schema_changed)(void *arg, const struct cql_schema_event *e);
	/* Vetoes a DDL statement before it is applied: 0 to go on, or -1 with
	 * err set (answered as Invalid). Optional. */
	int (*ddl_check)(void *arg, const struct cql_stmt *stmt);
	/* Ids for new tables (random uuids in the node). Required. */
	void (*new_table_id)(void *arg, uint8_t id[16]);
	/* The wall clock in microseconds: the drop time of ALTER TABLE DROP.
	 * Optional (without it a DROP records time 0). */
	int64_t (*now_us)(void *arg);
	/* A role statement (CREATE ROLE, GRANT, LIST ROLES, ...): the role
	 * manager replies with cql_request_reply(), now or later. `r` lives
	 * only for the call. Optional: without one they are refused. */
	void (*role)(void *arg, struct cql_request *req,
		     const struct cql_request_info *info,
		     const struct cql_role_stmt *r);
	/* Fills `out` with the data of system_views (settings, clients,
	 * thread pools: the node's own view, virtual tables are node-local);
	 * it stays valid until the next call. Optional: without one those
	 * tables are empty. */
	void (*views)(void *arg, struct cql_views_info *out);
	/* CassandraAuthorizer: 0 when the request's user holds `perm` on `r`
	 * (or a parent), else -1 with Cassandra's Unauthorized message in
	 * `msg` (cql_auth_authorize). Not called for internal requests.
	 * Optional: without one nothing is checked (AllowAllAuthorizer). */
	int (*authorize)(void *arg, const struct cql_request_info *info,
			 uint32_t perm, const struct cql_resource *r, char *msg,
			 size_t cap);
	/* After an applied CREATE or DROP of a keyspace or table: the
	 * authorizer grants the creator its permissions, or revokes those on
	 * what was dropped, then replies `frame` (copied); true when it took
	 * the request (cql_auth_schema_applied). Optional. */
	bool (*schema_applied)(void *arg, struct cql_request *req,
			       const struct cql_request_info *info,
			       const struct cql_schema_change *c,
			       const uint8_t *frame, size_t len);
	void *arg;
};

/* `schema` must outlive the executor; `server` may be set later with
 * cql_exec_set_server (for events). */
struct cql_exec *cql_exec_new(struct cql_schema *schema,
			      const struct cql_exec_hooks *hooks);
void cql_exec_delete(struct cql_exec *e);
void cql_exec_set_server(struct cql_exec *e, struct cql_server *server);

/* The cql_executor callback for cql_server_new (arg = the cql_exec). */
void cql_exec_execute(void *arg, struct cql_request *req,
		      const struct cql_request_info *info, const uint8_t *body,
		      size_t len);

/* Prepared statements held (for tests and tools). */
size_t cql_exec_prepared_count(const struct cql_exec *e);

/* Evicts the prepared statements an applied schema change invalidates, as
 * Cassandra does: those on an altered or dropped table, or in a dropped
 * keyspace (clients re-prepare on Unprepared and get the new metadata).
 * Called for the executor's own DDL; call it for changes applied from
 * elsewhere (schema records from peers). */
struct cql_schema_change;
void cql_exec_schema_changed(struct cql_exec *e,
			     const struct cql_schema_change *c);

#endif
