/*
 * Statement execution: decode the request, parse the CQL, dispatch, and
 * answer with one frame. Prepared statements keep their text (and the
 * keyspace they were prepared in). A prepared SELECT, INSERT, UPDATE,
 * DELETE or BATCH also keeps its syntax tree, parsed at its first EXECUTE
 * and read-only from then on (lexing and parsing were ~6% of a node's CPU
 * under cassini-stress); DDL, USE and DESCRIBE are parsed on every
 * EXECUTE, as running them may evict the prepared statement itself.
 * This file holds the executor's lifecycle, the dispatch of a request and
 * the running of one statement; bind markers are in exec_bind.c, DDL in
 * exec_ddl.c, batches in exec_batch.c, PREPARE / EXECUTE in
 * exec_prepared.c.
 */
#define LOG_MODULE "client"
#include "client/exec/exec_internal.h"

#include "client/schema/describe.h"
#include "client/schema/system_tables.h"
#include "common/log.h"
#include "common/murmur3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cql_exec *cql_exec_new(struct cql_schema *schema,
			      const struct cql_exec_hooks *hooks)
{
	struct cql_exec *e = calloc(1, sizeof(*e));
	if (!e) {
		err_set(ERR_NOMEM, "cannot allocate the executor");
		return NULL;
	}
	e->schema = schema;
	e->hooks = *hooks;
	if (!(e->views = cql_schema_new_views())) {
		free(e);
		return NULL;
	}
	return e;
}

void cql_exec_prepared_free(struct prepared *p)
{
	for (size_t i = 0; i < p->table_count; i++)
		free(p->tables[i]);
	free(p->tables);
	free(p->query);
	free(p->keyspace);
	if (p->stmt)
		arena_destroy(&p->ast_arena);
	free(p);
}

void cql_exec_delete(struct cql_exec *e)
{
	if (!e)
		return;
	while (e->prepared) {
		struct prepared *p = e->prepared;
		e->prepared = p->next;
		cql_exec_prepared_free(p);
	}
	cql_schema_delete(e->views);
	free(e);
}

static bool prepared_uses(const struct prepared *p, const char *ks,
			  const char *table)
{
	size_t kl = strlen(ks);
	for (size_t i = 0; i < p->table_count; i++) {
		const char *n = p->tables[i];
		if (strncmp(n, ks, kl) == 0 && n[kl] == '.' &&
		    (!table || strcmp(n + kl + 1, table) == 0))
			return true;
	}
	return false;
}

void cql_exec_schema_changed(struct cql_exec *e,
			     const struct cql_schema_change *c)
{
	bool table = strcmp(c->target, "TABLE") == 0;
	/* an ALTER TYPE changes the result metadata of the keyspace's
	 * statements that read the type: all of the keyspace's go */
	bool type = strcmp(c->target, "TYPE") == 0;
	if (strcmp(c->change, "CREATED") == 0 ||
	    (!table && !type && strcmp(c->change, "DROPPED") != 0))
		return;
	size_t evicted = 0;
	for (struct prepared **pp = &e->prepared; *pp;) {
		struct prepared *p = *pp;
		if (!prepared_uses(p, c->keyspace, table ? c->name : NULL)) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		cql_exec_prepared_free(p);
		e->prepared_count--;
		evicted++;
	}
	if (evicted)
		LOG_INFO("schema: %zu prepared statement%s on %s%s%s evicted",
			 evicted, evicted == 1 ? "" : "s", c->keyspace,
			 table ? "." : "", table ? c->name : "");
}

void cql_exec_set_server(struct cql_exec *e, struct cql_server *server)
{
	e->server = server;
}

size_t cql_exec_prepared_count(const struct cql_exec *e)
{
	return e->prepared_count;
}

/* ---- replies ------------------------------------------------------------- */

static void finish(struct job *j)
{
	if (j->out.len == 0) /* encoding failed: still answer */
		cql_encode_error(&j->out, j->info->version, j->info->stream,
				 CQL_ERR_SERVER, "out of memory");
	cql_request_reply(j->req, j->out.data, j->out.len);
	buf_free(&j->out);
}

/* ---- statement resolution ------------------------------------------------ */

const struct cql_qname *cql_exec_stmt_table(const struct cql_stmt *s)
{
	switch (s->kind) {
	case CQL_STMT_SELECT:
		return &s->u.select.table;
	case CQL_STMT_INSERT:
		return &s->u.insert.table;
	case CQL_STMT_UPDATE:
		return &s->u.update.table;
	case CQL_STMT_DELETE:
		return &s->u.del.table;
	case CQL_STMT_TRUNCATE:
		return &s->u.truncate;
	default:
		return NULL;
	}
}

static bool is_ddl(enum cql_stmt_kind k)
{
	return k == CQL_STMT_CREATE_KEYSPACE || k == CQL_STMT_ALTER_KEYSPACE ||
	       k == CQL_STMT_DROP_KEYSPACE || k == CQL_STMT_CREATE_TABLE ||
	       k == CQL_STMT_ALTER_TABLE || k == CQL_STMT_DROP_TABLE ||
	       k == CQL_STMT_CREATE_TYPE || k == CQL_STMT_ALTER_TYPE ||
	       k == CQL_STMT_DROP_TYPE || k == CQL_STMT_CREATE_INDEX ||
	       k == CQL_STMT_DROP_INDEX;
}

/* A write, TRUNCATE or DDL on a virtual table: refused as Cassandra does
 * for its read-only virtual tables. */
void cql_exec_view_write_refused(struct job *j, const char *ks,
				 const char *table)
{
	char msg[256];
	if (!cql_schema_table(j->e->views, ks, table))
		snprintf(msg, sizeof(msg), "unconfigured table %s", table);
	else
		snprintf(msg, sizeof(msg),
			 "Modification is not supported by table %s.%s", ks,
			 table);
	reply_error(j, CQL_ERR_INVALID, msg);
}

/* Finds the table a DML/SELECT statement targets (unqualified names are in
 * session_ks), or answers the error. */
const struct cql_table *cql_exec_resolve(struct job *j,
					 const struct cql_stmt *s,
					 const char *session_ks,
					 const char **ks_out)
{
	const struct cql_qname *q = cql_exec_stmt_table(s);
	const char *ks = q->keyspace ? q->keyspace : session_ks;
	char msg[512];
	if (!ks) {
		reply_error(
			j, CQL_ERR_INVALID,
			"No keyspace has been specified. USE a keyspace, or "
			"explicitly specify keyspace.tablename");
		return NULL;
	}
	*ks_out = ks;
	if (cql_system_keyspace_is_view(ks))
		return NULL; /* served from the views registry */
	if (!cql_schema_keyspace(j->e->schema, ks)) {
		snprintf(msg, sizeof(msg), "Keyspace %s does not exist", ks);
		reply_error(j, CQL_ERR_INVALID, msg);
		return NULL;
	}
	const struct cql_table *t = cql_schema_table(j->e->schema, ks, q->name);
	if (!t) {
		snprintf(msg, sizeof(msg), "unconfigured table %s", q->name);
		reply_error(j, CQL_ERR_INVALID, msg);
	} else if (cql_table_columns_diverged(t)) {
		snprintf(msg, sizeof(msg),
			 "Columns were added to %s.%s on two nodes at the same "
			 "time and are numbered differently on them; its reads "
			 "and writes are refused so that no value is read as "
			 "another column's. Drop the table and create it again",
			 ks, q->name);
		reply_error(j, CQL_ERR_INVALID, msg);
		return NULL;
	}
	return t;
}

/* ---- running ------------------------------------------------------------- */

/* system_auth is written by the role manager only (its statements run
 * as internal requests): a client's INSERT, UPDATE, DELETE or TRUNCATE
 * there could make itself a superuser. */
bool cql_exec_auth_write_refused(struct job *j, const char *ks)
{
	if (j->info->internal || strcmp(ks, "system_auth") != 0)
		return false;
	reply_error(j, CQL_ERR_UNAUTHORIZED,
		    "system_auth tables are written by the role statements "
		    "only (CREATE/ALTER/DROP ROLE, GRANT, REVOKE)");
	return true;
}

bool cql_exec_permitted(struct job *j, uint32_t perm, const char *ks,
			const char *table)
{
	if (!j->e->hooks.authorize || j->info->internal)
		return true;
	struct cql_resource r = {
		.kind = !ks     ? CQL_RES_ALL_KEYSPACES
			: table ? CQL_RES_TABLE
				: CQL_RES_KEYSPACE,
		.keyspace = ks,
		.name = table,
	};
	char msg[ERR_MSG_MAX];
	if (j->e->hooks.authorize(j->e->hooks.arg, j->info, perm, &r, msg,
				  sizeof(msg)) == 0)
		return true;
	reply_error(j, CQL_ERR_UNAUTHORIZED, msg);
	return false;
}

/* Hands a resolved request to the data path, which replies. */
void cql_exec_to_data_path(struct job *j, struct cql_data_request *dr)
{
	if (!j->e->hooks.data) {
		reply_error(j, CQL_ERR_INVALID,
			    "Reads and writes of user tables are not served by "
			    "this node yet");
		return;
	}
	dr->req = j->req;
	dr->info = j->info;
	dr->query = j->query;
	dr->query_len = j->query_len;
	j->req = NULL;
	j->e->hooks.data(j->e->hooks.arg, dr);
}

void cql_exec_run(struct job *j, const char *text, size_t len,
		  const struct cql_query_params *params)
{
	int nbinds;
	const char **names;
	/* QueryProcessor.parseStatement's two events */
	cql_trace_event(j->info, "Parsing %.*s", (int)(len > 400 ? 400 : len),
			text);
	struct cql_stmt *s = cql_parse(j->a, text, len, &nbinds, &names);
	if (!s) {
		reply_parse_error(j);
		return;
	}
	cql_trace_event(j->info, "Preparing statement");
	cql_exec_run_stmt(j, s, nbinds, names, text, len, params);
}

/* Whether a statement's tree may be kept with its prepared statement. */
bool cql_exec_cacheable(enum cql_stmt_kind k)
{
	return k == CQL_STMT_SELECT || k == CQL_STMT_INSERT ||
	       k == CQL_STMT_UPDATE || k == CQL_STMT_DELETE ||
	       k == CQL_STMT_BATCH;
}

void cql_exec_run_stmt(struct job *j, const struct cql_stmt *s, int nbinds,
		       const char **names, const char *text, size_t len,
		       const struct cql_query_params *params)
{
	j->query = text;
	j->query_len = len;
	if (s->kind == CQL_STMT_USE) {
		char msg[160];
		if (!cql_schema_keyspace(j->e->schema, s->u.use_keyspace) &&
		    !cql_schema_keyspace(j->e->views, s->u.use_keyspace)) {
			snprintf(msg, sizeof(msg),
				 "Keyspace '%s' does not exist",
				 s->u.use_keyspace);
			reply_error(j, CQL_ERR_INVALID, msg);
			return;
		}
		cql_request_set_keyspace(j->req, s->u.use_keyspace);
		cql_encode_result_set_keyspace(&j->out, j->info->version,
					       j->info->stream,
					       s->u.use_keyspace);
		return;
	}
	if (is_ddl(s->kind)) {
		cql_exec_run_ddl(j, s, text, len);
		return;
	}
	if (s->kind == CQL_STMT_ROLE) {
		if (!j->e->hooks.role) {
			reply_error(j, CQL_ERR_INVALID,
				    "Roles are not served by this node");
			return;
		}
		struct cql_request *req = j->req;
		j->req = NULL;
		j->e->hooks.role(j->e->hooks.arg, req, j->info, &s->u.role);
		return;
	}
	if (s->kind == CQL_STMT_DESCRIBE) {
		struct cql_node_info node;
		j->e->hooks.node_info(j->e->hooks.arg, &node);
		cql_describe(j->e->schema, j->e->views, &node, &s->u.describe,
			     j->keyspace, params, j->info->version,
			     j->info->stream, &j->out);
		return;
	}
	const struct cql_value *binds =
		cql_exec_bind_values(j, params, nbinds, names);
	if (!binds && nbinds)
		return;
	if (s->kind == CQL_STMT_BATCH) {
		cql_exec_run_text_batch(j, s, binds, (size_t)nbinds, params);
		return;
	}
	const char *ks = NULL;
	const struct cql_table *t = cql_exec_resolve(j, s, j->keyspace, &ks);
	if (!ks)
		return;
	if (s->kind == CQL_STMT_SELECT && cql_system_keyspace_is_virtual(ks)) {
		if (!cql_exec_permitted(j, CQL_PERM_SELECT, ks,
					cql_exec_stmt_table(s)->name))
			return;
		struct cql_node_info node;
		struct cql_views_info views = {0};
		j->e->hooks.node_info(j->e->hooks.arg, &node);
		/* the views, and system."IndexInfo" (the node's index
		 * build states) */
		if (j->e->hooks.views &&
		    (cql_system_keyspace_is_view(ks) ||
		     strcmp(cql_exec_stmt_table(s)->name, "IndexInfo") == 0))
			j->e->hooks.views(j->e->hooks.arg, &views);
		cql_system_select(j->e->schema, j->e->views, &views, &node,
				  &s->u.select, ks, binds, params->value_count,
				  j->info->version, j->info->stream, &j->out);
		return;
	}
	if (!t && cql_system_keyspace_is_view(ks)) {
		cql_exec_view_write_refused(j, ks,
					    cql_exec_stmt_table(s)->name);
		return;
	}
	if (!t)
		return; /* cql_exec_resolve() answered */
	if (cql_system_keyspace_is_virtual(ks)) {
		reply_error(j, CQL_ERR_UNAUTHORIZED,
			    "system keyspaces are read-only");
		return;
	}
	/* SELECT needs SELECT; INSERT, UPDATE, DELETE and TRUNCATE MODIFY */
	if (!cql_exec_permitted(j,
				s->kind == CQL_STMT_SELECT ? CQL_PERM_SELECT
							   : CQL_PERM_MODIFY,
				ks, cql_exec_stmt_table(s)->name))
		return;
	if (s->kind != CQL_STMT_SELECT && cql_exec_auth_write_refused(j, ks))
		return;
	if (cql_exec_check_binds(j, s, t, binds, (size_t)nbinds, &binds) != 0)
		return;
	struct cql_data_request dr = {
		.stmt = s,
		.table = t,
		.binds = binds,
		.bind_count = params->value_count,
		.params = params,
	};
	cql_exec_to_data_path(j, &dr);
}

/* ---- entry point --------------------------------------------------------- */

void cql_exec_execute(void *arg, struct cql_request *req,
		      const struct cql_request_info *info, const uint8_t *body,
		      size_t len)
{
	struct arena a;
	struct job j = {.e = arg,
			.req = req,
			.info = info,
			.keyspace = info->keyspace,
			.a = &a};
	struct cursor c = cursor_make(body, len);
	arena_create(&a, 0);
	buf_init(&j.out);
	switch (info->opcode) {
	case CQL_OP_QUERY: {
		struct cql_query q;
		if (cql_decode_query(&c, info->version, &a, &q) != 0)
			reply_error(&j, CQL_ERR_PROTOCOL, err_msg());
		else
			cql_exec_run(&j, (const char *)q.query.ptr, q.query.len,
				     &q.params);
		break;
	}
	case CQL_OP_PREPARE: {
		struct slice q;
		if (cql_decode_prepare(&c, &q) != 0)
			reply_error(&j, CQL_ERR_PROTOCOL, err_msg());
		else
			cql_exec_run_prepare(&j, q);
		break;
	}
	case CQL_OP_EXECUTE: {
		struct cql_execute x;
		if (cql_decode_execute(&c, info->version, &a, &x) != 0)
			reply_error(&j, CQL_ERR_PROTOCOL, err_msg());
		else
			cql_exec_run_execute(&j, &x);
		break;
	}
	default: {
		struct cql_batch b;
		if (cql_decode_batch(&c, info->version, &a, &b) != 0)
			reply_error(&j, CQL_ERR_PROTOCOL, err_msg());
		else
			cql_exec_run_protocol_batch(&j, &b);
	}
	}
	if (j.req)
		finish(&j);
	else
		buf_free(&j.out);
	arena_destroy(&a);
}
