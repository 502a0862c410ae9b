/*
 * Batches: a BATCH statement's text or a protocol BATCH message, their
 * writes checked and handed to the data path together.
 */
#define LOG_MODULE "client"
#include "client/exec/exec_internal.h"

#include "client/schema/describe.h"
#include "client/schema/system_tables.h"
#include "common/log.h"
#include "common/murmur3.h"

#include <stdlib.h>
#include <string.h>

/* Checks every write of a batch and hands them to the data path together.
 * `ts` is the batch's timestamp (INT64_MIN: none given). */
static void run_batch(struct job *j, struct cql_batch_item *items, size_t n,
		      int type, int64_t ts, bool using_ts,
		      const struct cql_query_params *params)
{
	/* Cassandra's BatchStatement.validate */
	if (using_ts && type == CQL_BATCH_COUNTER) {
		reply_error(
			j, CQL_ERR_INVALID,
			"Cannot provide custom timestamp for counter BATCH");
		return;
	}
	bool counters = false, others = false;
	for (size_t i = 0; i < n; i++) {
		const char *ks = NULL;
		const struct cql_stmt *st = items[i].stmt;
		if (st->kind != CQL_STMT_INSERT &&
		    st->kind != CQL_STMT_UPDATE &&
		    st->kind != CQL_STMT_DELETE) {
			reply_error(
				j, CQL_ERR_INVALID,
				"Invalid statement in batch: only UPDATE, "
				"INSERT and DELETE statements are allowed.");
			return;
		}
		items[i].table = cql_exec_resolve(
			j, st,
			items[i].keyspace ? items[i].keyspace : j->keyspace,
			&ks);
		if (!items[i].table && ks && cql_system_keyspace_is_view(ks))
			reply_error(j, CQL_ERR_UNAUTHORIZED,
				    "system keyspaces are read-only");
		if (!items[i].table)
			return;
		if (cql_system_keyspace_is_virtual(ks)) {
			reply_error(j, CQL_ERR_UNAUTHORIZED,
				    "system keyspaces are read-only");
			return;
		}
		if (!cql_exec_permitted(j, CQL_PERM_MODIFY, ks,
					cql_exec_stmt_table(st)->name) ||
		    cql_exec_auth_write_refused(j, ks))
			return;
		bool counter = cql_dml_counter_table(items[i].table);
		const char *refused =
			using_ts && counter
				? "Cannot provide custom timestamp for a "
				  "BATCH containing counters"
			: type == CQL_BATCH_COUNTER && !counter
				? "Cannot include non-counter statement in a "
				  "counter batch"
			: type == CQL_BATCH_LOGGED && counter
				? "Cannot include a counter statement in a "
				  "logged batch"
				: NULL;
		if (refused) {
			reply_error(j, CQL_ERR_INVALID, refused);
			return;
		}
		counters |= counter;
		others |= !counter;
		if (counters && others) {
			reply_error(j, CQL_ERR_INVALID,
				    "Counter and non-counter mutations cannot "
				    "exist in the same batch");
			return;
		}
		if (cql_exec_check_binds(j, st, items[i].table, items[i].binds,
					 items[i].bind_count,
					 &items[i].binds) != 0)
			return;
	}
	struct cql_data_request dr = {
		.params = params,
		.batch = items,
		.batch_count = n,
		.batch_type = type,
		.batch_timestamp = ts,
	};
	cql_exec_to_data_path(j, &dr);
}

static const char batch_ts_bound[] =
	"Out of bound timestamp, must be in [-9223372036854775807, "
	"9223372036854775807]";

/* A text batch's USING TIMESTAMP (Cassandra's Attributes.getTimestamp):
 * unset is not given, null is refused. *out is INT64_MIN when none was
 * given (then the client's default timestamp, or the node's clock). */
static int batch_timestamp(const struct cql_term *t,
			   const struct cql_value *binds, size_t nbinds,
			   const struct cql_query_params *params, int64_t *out)
{
	*out = params->has_timestamp ? params->timestamp : INT64_MIN;
	if (!t)
		return 0;
	struct cql_value v = {CQL_VALUE_UNSET, NULL};
	struct buf b;
	buf_init(&b);
	if (t->kind == CQL_TERM_BIND) {
		if ((size_t)t->bind_index < nbinds)
			v = binds[t->bind_index];
	} else {

		struct cql_timeuuid_gen g;
		struct cql_fn_ctx fn = {.timeuuids = &g};
		cql_timeuuid_gen_init(&g, 0);
		int rc = cql_term_serialize(
			t, storage_type_simple(STORAGE_TYPE_BIGINT),
			"[timestamp]", &fn, NULL, &b);
		if (rc < 0) {
			buf_free(&b);
			return -1;
		}
		v = rc == 1 ? (struct cql_value){CQL_VALUE_NULL, NULL}
			    : (struct cql_value){(int32_t)b.len, b.data};
	}
	int rc = 0;
	if (v.len == CQL_VALUE_NULL)
		rc = err_set(ERR_INVALID, "Invalid null value of timestamp");
	else if (v.len >= 0 && v.len != 8)
		rc = err_set(ERR_INVALID, "Invalid timestamp value");
	else if (v.len == 8 && (*out = (int64_t)be64_load(v.ptr)) == INT64_MIN)
		rc = err_set(ERR_INVALID, "%s", batch_ts_bound);
	buf_free(&b);
	return rc;
}

/* BEGIN [UNLOGGED] BATCH ... APPLY BATCH: markers are numbered across the
 * whole text, so every statement sees the same values. */
void cql_exec_run_text_batch(struct job *j, const struct cql_stmt *s,
			     const struct cql_value *binds, size_t nbinds,
			     const struct cql_query_params *params)
{
	const struct cql_batch_stmt *b = &s->u.batch;
	const struct cql_term *tt = b->using.timestamp;
	if (tt && tt->kind == CQL_TERM_BIND &&
	    (size_t)tt->bind_index < nbinds && binds[tt->bind_index].len >= 0 &&
	    storage_type_validate(STORAGE_TYPE_BIGINT,
				  binds[tt->bind_index].ptr,
				  (size_t)binds[tt->bind_index].len) != 0) {
		reply_bind_error(j);
		return;
	}
	struct cql_batch_item *items =
		arena_alloc(j->a, (b->count + 1) * sizeof(*items));
	if (!items) {
		reply_error(j, CQL_ERR_SERVER, "out of memory");
		return;
	}
	/* Cassandra's BatchStatement.validate */
	if (b->using.ttl) {
		reply_error(j, CQL_ERR_INVALID,
			    "Global TTL on the BATCH statement is not "
			    "supported.");
		return;
	}
	for (size_t i = 0; b->using.timestamp && i < b->count; i++) {
		const struct cql_stmt *st = b->statements[i];
		const struct cql_using *u =
			st->kind == CQL_STMT_INSERT   ? &st->u.insert.using
			: st->kind == CQL_STMT_UPDATE ? &st->u.update.using
			: st->kind == CQL_STMT_DELETE ? &st->u.del.using
						      : NULL;
		if (u && u->timestamp) {
			reply_error(j, CQL_ERR_INVALID,
				    "Timestamp must be set either on BATCH or "
				    "individual statements");
			return;
		}
	}
	int64_t ts;
	if (batch_timestamp(b->using.timestamp, binds, nbinds, params, &ts) !=
	    0) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		reply_error(j, CQL_ERR_INVALID, msg);
		return;
	}
	for (size_t i = 0; i < b->count; i++)
		items[i] = (struct cql_batch_item){b->statements[i], NULL,
						   binds, nbinds, NULL};
	run_batch(j, items, b->count, b->type, ts, b->using.timestamp != NULL,
		  params);
}

void cql_exec_run_protocol_batch(struct job *j, const struct cql_batch *b)
{
	struct cql_batch_item *items =
		arena_alloc(j->a, ((size_t)b->count + 1) * sizeof(*items));
	struct cql_query_params params = {.consistency = b->consistency,
					  .has_timestamp = b->has_timestamp,
					  .timestamp = b->timestamp,
					  .page_size = -1};
	if (!items) {
		reply_error(j, CQL_ERR_SERVER, "out of memory");
		return;
	}
	for (uint16_t i = 0; i < b->count; i++) {
		const struct cql_batch_statement *bs = &b->statements[i];
		const char *text = (const char *)bs->query_or_id.ptr;
		size_t len = bs->query_or_id.len;
		const char *keyspace = NULL; /* the PREPARE-time keyspace */
		if (bs->prepared) {
			struct prepared *p = cql_exec_prepared_find(
				j->e, bs->query_or_id.ptr, bs->query_or_id.len);
			if (!p) {
				cql_encode_unprepared(
					&j->out, j->info->version,
					j->info->stream,
					"Prepared query with ID not "
					"found",
					bs->query_or_id.ptr,
					(uint16_t)bs->query_or_id.len);
				return;
			}
			text = p->query;
			len = p->len;
			keyspace = p->keyspace;
		}
		int nbinds;
		struct cql_stmt *st = cql_parse(j->a, text, len, &nbinds, NULL);
		if (!st) {
			reply_parse_error(j);
			return;
		}
		if ((size_t)nbinds != bs->value_count) {
			char msg[160];
			snprintf(msg, sizeof(msg),
				 "There were %d markers(?) in CQL but %u bound "
				 "variables",
				 nbinds, bs->value_count);
			reply_error(j, CQL_ERR_INVALID, msg);
			return;
		}
		items[i] = (struct cql_batch_item){st, NULL, bs->values,
						   bs->value_count, keyspace};
	}
	/* INT64_MIN is "no timestamp" here and in Cassandra (which answers
	 * a Protocol error; Invalid keeps the connection). */
	if (b->has_timestamp && b->timestamp == INT64_MIN) {
		reply_error(j, CQL_ERR_INVALID, batch_ts_bound);
		return;
	}
	run_batch(j, items, b->count, b->type,
		  b->has_timestamp ? b->timestamp : INT64_MIN, false, &params);
}
