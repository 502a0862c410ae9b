/*
 * PREPARE and EXECUTE: the prepared statement cache (ids, eviction
 * at PREPARED_MAX), the checks and metadata of a PREPARE, and running a
 * prepared statement.
 */
#define LOG_MODULE "client"
#include "client/exec/exec_internal.h"

#include "client/schema/describe.h"
#include "client/schema/system_tables.h"
#include "common/log.h"
#include "common/murmur3.h"

#include <stdlib.h>
#include <string.h>

/* ---- PREPARE / EXECUTE --------------------------------------------------- */

static void prepared_id(const char *ks, const char *q, size_t len,
			uint8_t id[16])
{
	uint64_t h[2], k[2] = {0, 0};
	murmur3_hash128(q, len, 0x5eed, h);
	if (ks)
		murmur3_hash128(ks, strlen(ks), 0x6b73, k);
	be64_store(id, h[0] ^ k[0]);
	be64_store(id + 8, h[1] ^ k[1]);
}

struct prepared *cql_exec_prepared_find(struct cql_exec *e, const uint8_t *id,
					size_t len)
{
	if (len != 16)
		return NULL;
	for (struct prepared *p = e->prepared; p; p = p->next)
		if (memcmp(p->id, id, 16) == 0)
			return p;
	return NULL;
}

static int prepared_add(struct cql_exec *e, const uint8_t id[16],
			const char *ks, const char *q, size_t len,
			const struct cql_table *const *tables, size_t ntables)
{
	if (cql_exec_prepared_find(e, id, 16))
		return 0;
	struct prepared *p = calloc(1, sizeof(*p));
	char *copy = malloc(len + 1);
	char *kcopy = ks ? strdup(ks) : NULL;
	char **names = calloc(ntables ? ntables : 1, sizeof(*names));
	bool ok = p && copy && (!ks || kcopy) && names;
	for (size_t i = 0; ok && i < ntables; i++) {
		const struct storage_table_meta *m = cql_table_meta(tables[i]);
		size_t n = strlen(m->keyspace) + strlen(m->name) + 2;
		if (!(names[i] = malloc(n)))
			ok = false;
		else
			snprintf(names[i], n, "%s.%s", m->keyspace, m->name);
	}
	if (!ok) {
		for (size_t i = 0; names && i < ntables; i++)
			free(names[i]);
		free(names);
		free(p);
		free(copy);
		free(kcopy);
		return err_set(ERR_NOMEM, "out of memory");
	}
	p->tables = names;
	p->table_count = ntables;
	memcpy(copy, q, len);
	copy[len] = '\0';
	memcpy(p->id, id, 16);
	p->query = copy;
	p->len = len;
	p->keyspace = kcopy;
	p->next = e->prepared;
	e->prepared = p;
	if (++e->prepared_count > PREPARED_MAX) {
		/* Drop the oldest; a client re-prepares on Unprepared. */
		struct prepared **pp = &e->prepared;
		while ((*pp)->next)
			pp = &(*pp)->next;
		cql_exec_prepared_free(*pp);
		*pp = NULL;
		e->prepared_count--;
	}
	return 0;
}

/* What Cassandra refuses when it prepares a statement, before any value
 * is bound (the same checks run again when it executes). */
static int prepare_check(struct job *j, const struct cql_stmt *s,
			 const struct cql_table *t)
{
	int rc = 0;
	if (s->kind == CQL_STMT_INSERT || s->kind == CQL_STMT_UPDATE ||
	    s->kind == CQL_STMT_DELETE)
		rc = cql_dml_check(s, t);
	else if (s->kind == CQL_STMT_SELECT)
		rc = cql_select_check(j->a, &s->u.select, t);
	if (rc != 0) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		reply_error(j,
			    err_code() == ERR_NOMEM ? CQL_ERR_SERVER
						    : CQL_ERR_INVALID,
			    msg);
	}
	return rc;
}

void cql_exec_run_prepare(struct job *j, struct slice query)
{
	int nbinds;
	const char **names;
	struct cql_stmt *s = cql_parse(j->a, (const char *)query.ptr, query.len,
				       &nbinds, &names);
	if (!s) {
		reply_parse_error(j);
		return;
	}
	const char *ks = NULL;
	const struct cql_table *t = NULL;
	if (cql_exec_stmt_table(s)) {
		t = cql_exec_resolve(j, s, j->keyspace, &ks);
		if (!t && !(ks && cql_system_keyspace_is_view(ks)))
			return;
		if (!t && s->kind != CQL_STMT_SELECT) {
			cql_exec_view_write_refused(
				j, ks, cql_exec_stmt_table(s)->name);
			return;
		}
		if (!t &&
		    !(t = cql_schema_table(j->e->views, ks,
					   cql_exec_stmt_table(s)->name))) {
			char msg[256];
			snprintf(msg, sizeof(msg), "unconfigured table %s",
				 cql_exec_stmt_table(s)->name);
			reply_error(j, CQL_ERR_INVALID, msg);
			return;
		}
	}
	struct bind_spec *b =
		arena_alloc(j->a, (size_t)(nbinds + 1) * sizeof(*b));
	int pk[16];
	size_t npk = 0;
	uint16_t pk_idx[16];
	if (!b) {
		reply_error(j, CQL_ERR_SERVER, "out of memory");
		return;
	}
	memset(b, 0, (size_t)(nbinds + 1) * sizeof(*b));
	const struct cql_table **used = NULL;
	size_t nused = 0;
	if (s->kind == CQL_STMT_BATCH) {
		/* Each statement types its own markers; a batch has no single
		 * routing key, so no partition-key indexes (as Cassandra). */
		const struct cql_batch_stmt *bs = &s->u.batch;
		used = arena_alloc(j->a, (bs->count + 1) * sizeof(*used));
		if (!used) {
			reply_error(j, CQL_ERR_SERVER, "out of memory");
			return;
		}
		for (size_t i = 0; i < bs->count; i++) {
			const struct cql_stmt *in = bs->statements[i];
			if (!cql_exec_stmt_table(in))
				continue;
			const struct cql_table *it =
				cql_exec_resolve(j, in, j->keyspace, &ks);
			if (!it) {
				if (!(ks && cql_system_keyspace_is_view(ks)))
					return;
				continue;
			}
			if (prepare_check(j, in, it) != 0)
				return;
			if (cql_exec_bind_resolve(j->a, in, it, b, nbinds,
						  pk) != 0) {
				reply_bind_error(j);
				return;
			}
			used[nused++] = it;
			if (!t)
				t = it;
		}
		struct bind_ctx x = {j->a, b, nbinds, t, false};
		cql_exec_bind_using(&x, &bs->using);
	} else if (t) {
		if (prepare_check(j, s, t) != 0)
			return;
		used = &t;
		nused = 1;
		if (cql_exec_bind_resolve(j->a, s, t, b, nbinds, pk) != 0) {
			reply_bind_error(j);
			return;
		}
		const struct storage_table_meta *m = cql_table_meta(t);
		npk = m->pk_count;
		for (size_t i = 0; i < npk; i++) {
			if (pk[i] < 0) {
				npk = 0;
				break;
			}
			pk_idx[i] = (uint16_t)pk[i];
		}
	}
	struct cql_column_spec *specs =
		arena_alloc(j->a, (size_t)(nbinds + 1) * sizeof(*specs));
	for (int i = 0; specs && i < nbinds; i++) {
		if (!b[i].known) {
			reply_error(j, CQL_ERR_INVALID,
				    "Cannot infer the type of a bind marker in "
				    "this position");
			return;
		}
		struct cql_type_option *o = cql_type_option_of(j->a, b[i].type);
		if (o && b[i].in_list)
			o = cql_type_option_list_of(j->a, o);
		specs[i] = (struct cql_column_spec){
			t ? cql_table_meta(t)->keyspace : "",
			t ? cql_table_meta(t)->name : "", b[i].name, o};
		if (!specs[i].type)
			specs = NULL;
	}
	uint8_t id[16];
	prepared_id(j->keyspace, (const char *)query.ptr, query.len, id);
	if (!specs ||
	    prepared_add(j->e, id, j->keyspace, (const char *)query.ptr,
			 query.len, used, nused) != 0) {
		reply_error(j, CQL_ERR_SERVER, "out of memory");
		return;
	}
	/* A SELECT's result columns: drivers that ask for skip_metadata
	 * (gocql, the Java driver) read rows with these. Each Rows reply
	 * still carries its own. */
	struct cql_column_spec *results = NULL;
	size_t nresults = 0;
	if (s->kind == CQL_STMT_SELECT) {
		int rc = -1;
		if (ks && cql_system_keyspace_is_virtual(ks))
			rc = cql_system_select_specs(
				j->a, j->e->schema, j->e->views, &s->u.select,
				j->keyspace, &results, &nresults);
		else if (t)
			rc = cql_select_result_specs(j->a, &s->u.select, t,
						     &results, &nresults);
		if (rc != 0) {
			results = NULL;
			nresults = 0;
		}
	}
	long start = cql_frame_begin(&j->out, j->info->version, 0,
				     j->info->stream, CQL_OP_RESULT);
	if (start < 0 || cql_write_int(&j->out, CQL_RESULT_PREPARED) ||
	    cql_write_prepared(&j->out, j->info->version, id, 16, specs,
			       (size_t)nbinds, pk_idx, npk, results,
			       nresults)) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		reply_error(j, CQL_ERR_SERVER, msg);
		return;
	}
	cql_frame_end(&j->out, start);
}

void cql_exec_run_execute(struct job *j, const struct cql_execute *x)
{
	struct prepared *p = cql_exec_prepared_find(j->e, x->id.ptr, x->id.len);
	if (!p) {
		cql_encode_unprepared(&j->out, j->info->version,
				      j->info->stream,
				      "Prepared query with ID not found",
				      x->id.ptr, (uint16_t)x->id.len);
		return;
	}
	/* Resolve names in the keyspace it was prepared in. */
	if (p->keyspace)
		j->keyspace = p->keyspace;
	if (!p->stmt && !p->uncacheable) {
		arena_create(&p->ast_arena, 0);
		p->stmt = cql_parse(&p->ast_arena, p->query, p->len, &p->nbinds,
				    &p->names);
		if (!p->stmt || !cql_exec_cacheable(p->stmt->kind)) {
			arena_destroy(&p->ast_arena);
			p->stmt = NULL;
			p->uncacheable = true;
		}
	}
	if (p->stmt)
		cql_exec_run_stmt(j, p->stmt, p->nbinds, p->names, p->query,
				  p->len, &x->params);
	else
		cql_exec_run(j, p->query, p->len, &x->params);
}
