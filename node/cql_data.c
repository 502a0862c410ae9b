/* The replicated data path (see cql_data.h). */
#define LOG_MODULE "node"
#include "node/cql_data_internal.h"

#include "common/log.h"
#include "common/workers.h"
#include "common/zalloc.h"
#include "node/cql_cas.h"
#include "node/node_trace.h"
#include "node/slow_queries.h"

#include <inttypes.h>
#include <stdio.h>

/* ---- replies ------------------------------------------------------------- */

void cql_data_reply_error(struct cql_request *req, uint8_t version,
			  int16_t stream, uint32_t code, const char *msg)
{
	struct buf b;
	buf_init(&b);
	cql_encode_error(&b, version, stream, code, msg);
	cql_request_reply(req, b.data, b.len);
	buf_free(&b);
}

/* The replicas `res` names as failed, as the protocol's reasons; the
 * count of failed replicas (at least 1: a failure names none where the
 * coordinator did not learn which replica failed). */
static int32_t failure_reasons(const struct repl_result *res,
			       struct cql_failure_reason *out)
{
	for (uint32_t i = 0; i < res->n_failed_listed; i++) {
		out[i].endpoint = res->failed[i].endpoint;
		out[i].code = res->failed[i].code;
	}
	return res->n_failed > 0 ? (int32_t)res->n_failed : 1;
}

void cql_data_encode_result(struct buf *b, uint8_t version, int16_t stream,
			    const struct repl_result *res, const char *warning)
{
	uint16_t cl = (uint16_t)res->cl;
	struct cql_failure_reason reasons[REPL_RESULT_FAILURES_MAX];
	int32_t failures = failure_reasons(res, reasons);
	size_t nreasons = res->n_failed_listed;
	switch (res->outcome) {
	case REPL_OK:
		cql_encode_result_void(b, version, stream);
		break;
	case REPL_UNAVAILABLE:
		cql_encode_unavailable(b, version, stream, res->msg, cl,
				       res->required, res->alive);
		break;
	case REPL_WRITE_TIMEOUT:
		cql_encode_write_timeout(b, version, stream, res->msg, cl,
					 res->alive, res->required,
					 repl_write_type_name(res->write_type));
		break;
	case REPL_READ_TIMEOUT:
		cql_encode_read_timeout(b, version, stream, res->msg, cl,
					res->alive, res->required,
					res->data_present);
		break;
	case REPL_WRITE_FAILURE:
		if (version >= 5)
			cql_encode_write_failure_reasons(
				b, version, stream, res->msg, cl, res->alive,
				res->required, reasons, nreasons,
				repl_write_type_name(res->write_type));
		else
			cql_encode_write_failure(
				b, version, stream, res->msg, cl, res->alive,
				res->required, failures,
				repl_write_type_name(res->write_type));
		break;
	case REPL_READ_FAILURE:
		if (version >= 5)
			cql_encode_read_failure_reasons(
				b, version, stream, res->msg, cl, res->alive,
				res->required, reasons, nreasons,
				res->data_present);
		else
			cql_encode_read_failure(b, version, stream, res->msg,
						cl, res->alive, res->required,
						failures, res->data_present);
		break;
	case REPL_OVERLOADED:
		cql_encode_error(b, version, stream, CQL_ERR_OVERLOADED,
				 res->msg);
		break;
	case REPL_INVALID:
		cql_encode_error(b, version, stream, CQL_ERR_INVALID, res->msg);
		break;
	case REPL_TRUNCATE_ERROR:
		cql_encode_error(b, version, stream, CQL_ERR_TRUNCATE,
				 res->msg);
		break;
	}
	if (warning && *warning && res->outcome == REPL_OK)
		cql_frame_add_warning(b, warning);
}

void cql_data_reply_result(struct cql_request *req, uint8_t version,
			   int16_t stream, const struct repl_result *res,
			   const char *warning)
{
	struct buf b;
	buf_init(&b);
	cql_data_encode_result(&b, version, stream, res, warning);
	cql_request_reply(req, b.data, b.len);
	buf_free(&b);
}

/* ---- writes -------------------------------------------------------------- */

struct write_ctx {
	struct cql_request *req;
	uint8_t version;
	int16_t stream;
	char warning[512]; /* sent with a successful answer */
};

static void write_done(void *arg, const struct repl_result *res)
{
	struct write_ctx *w = arg;
	cql_data_reply_result(w->req, w->version, w->stream, res, w->warning);
	free(w);
}

uint64_t cql_data_env_rand(void *arg)
{
	return env_random(arg);
}

const struct ring_strategy *cql_data_strategy_of(const struct cql_data *d,
						 const struct cql_table *t)
{
	const struct cql_keyspace *k =
		cql_schema_keyspace(d->schema, cql_table_meta(t)->keyspace);
	return k ? cql_keyspace_strategy(k) : NULL;
}

/* Cassandra's batch guards: past batch_size_fail_threshold a batch is
 * refused; past batch_size_warn_threshold, or an unlogged batch over more
 * partitions than unlogged_batch_across_partitions_warn_threshold, it runs
 * with a warning (logged, and sent to the client). Sizes are the
 * mutations' serialized bytes. Clients' batches only: the node's own
 * (internal) writes, the tracer's batches into system_traces, skip them,
 * as Cassandra's trace writes never meet them. */
static int check_batch(struct cql_data *d, const struct cql_data_request *dr,
		       const struct cql_mutations *all,
		       const struct cql_table **tables, char *warning,
		       size_t cap)
{
	if (dr->info->internal)
		return 0;
	size_t size = 0;
	struct buf b;
	buf_init(&b);
	for (size_t i = 0; i < all->count; i++) {
		buf_clear(&b);
		if (storage_mutation_encode(all->items[i], &b) == 0)
			size += b.len;
	}
	buf_free(&b);
	const struct storage_table_meta *t =
		all->count ? cql_table_meta(tables[0]) : NULL;
	char names[160] = "";
	if (t)
		snprintf(names, sizeof(names), "%s.%s%s", t->keyspace, t->name,
			 all->count > 1 && tables[all->count - 1] != tables[0]
				 ? " and others"
				 : "");
	if (d->batch_fail && size > d->batch_fail)
		return err_set(ERR_INVALID,
			       "Batch too large: %zu bytes for [%s], above "
			       "batch_size_fail_threshold (%" PRIu64 ")",
			       size, names, d->batch_fail);
	if (d->batch_warn && size > d->batch_warn) {
		snprintf(warning, cap,
			 "Batch for [%s] is of size %zu, exceeding specified "
			 "threshold of %" PRIu64 " by %" PRIu64 ".",
			 names, size, d->batch_warn,
			 (uint64_t)size - d->batch_warn);
		LOG_WARN("%s", warning);
	} else if (dr->batch_type == CQL_BATCH_UNLOGGED &&
		   d->unlogged_warn > 0 &&
		   all->count > (size_t)d->unlogged_warn) {
		snprintf(warning, cap,
			 "Unlogged batch covering %zu partitions detected "
			 "against table [%s]. You should use a logged batch "
			 "for atomicity, or asynchronous writes for "
			 "performance.",
			 all->count, names);
		LOG_WARN("%s", warning);
	}
	return 0;
}

static void run_write(struct cql_data *d, const struct cql_data_request *dr)
{
	uint8_t version = dr->info->version;
	int16_t stream = dr->info->stream;
	int64_t now = env_wall_us(d->env);
	struct cql_fn_ctx fn = {.now_us = now,
				.timeuuids = &d->timeuuids,
				.random = cql_data_env_rand,
				.random_arg = d->env};
	struct cql_write_ctx ctx = {
		.timestamp = cql_data_timestamp(dr, &d->last_ts, now),
		.now_sec = now / 1000000,
		.fn = &fn};
	struct cql_mutations all;
	const struct cql_table **tables = NULL;
	if (cql_data_build_writes(dr, &ctx, &all, &tables) != 0) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		cql_data_reply_error(dr->req, version, stream,
				     err_code() == ERR_NOMEM ? CQL_ERR_SERVER
							     : CQL_ERR_INVALID,
				     msg);
		return;
	}
	struct repl_mutation *rm =
		zcalloc(all.count ? all.count : 1, sizeof(*rm));
	struct write_ctx *w = malloc(sizeof(*w));
	if (!rm || !w) {
		free(rm);
		free(w);
		free(tables);
		cql_mutations_free(&all);
		cql_data_reply_error(dr->req, version, stream, CQL_ERR_SERVER,
				     "out of memory");
		return;
	}
	for (size_t i = 0; i < all.count; i++) {
		rm[i].m = all.items[i];
		rm[i].strategy = cql_data_strategy_of(d, tables[i]);
		if (!rm[i].strategy) {
			free(rm);
			free(w);
			free(tables);
			cql_mutations_free(&all);
			cql_data_reply_error(dr->req, version, stream,
					     CQL_ERR_INVALID,
					     "the keyspace was dropped");
			return;
		}
	}
	*w = (struct write_ctx){
		.req = dr->req, .version = version, .stream = stream};
	if (!dr->stmt && check_batch(d, dr, &all, tables, w->warning,
				     sizeof(w->warning)) != 0) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		free(rm);
		free(w);
		free(tables);
		cql_mutations_free(&all);
		cql_data_reply_error(dr->req, version, stream, CQL_ERR_INVALID,
				     msg);
		return;
	}
	enum repl_write_type wt =
		dr->stmt ? REPL_WRITE_SIMPLE
			 : (dr->batch_type == CQL_BATCH_UNLOGGED
				    ? REPL_WRITE_UNLOGGED_BATCH
				    : REPL_WRITE_BATCH);
	bool counter = false;
	for (size_t i = 0; i < all.count && !counter; i++)
		counter = storage_mutation_has_counter_deltas(all.items[i]);
	if (counter)
		repl_counter_write_traced(
			d->repl, rm, all.count, dr->params->consistency,
			dr->info->trace ? dr->info->trace->id : NULL,
			write_done, w);
	else
		repl_write_traced(d->repl, rm, all.count,
				  dr->params->consistency, wt,
				  dr->info->trace ? dr->info->trace->id : NULL,
				  write_done, w);
	free(rm);
	free(tables);
	cql_mutations_free(&all);
}

/* ---- truncate ------------------------------------------------------------ */

/* Every node empties the table (repl_truncate): a Void result, Unavailable
 * when a node is down, a truncate error (0x1003) on a failure or timeout. */
static void run_truncate(struct cql_data *d, const struct cql_data_request *dr)
{
	struct write_ctx *w = malloc(sizeof(*w));
	if (!w) {
		cql_data_reply_error(dr->req, dr->info->version,
				     dr->info->stream, CQL_ERR_SERVER,
				     "out of memory");
		return;
	}
	*w = (struct write_ctx){.req = dr->req,
				.version = dr->info->version,
				.stream = dr->info->stream};
	const struct storage_table_meta *t = cql_table_meta(dr->table);
	LOG_INFO("TRUNCATE %s.%s", t->keyspace, t->name);
	repl_truncate(d->repl, t->id, write_done, w);
}

void cql_data_request(void *arg, const struct cql_data_request *dr)
{
	struct cql_data *d = arg;
	if (!dr->stmt) {
		if (cql_cas_is_conditional(dr))
			node_cas_write(d->cas, dr);
		else
			run_write(d, dr);
		return;
	}
	switch (dr->stmt->kind) {
	case CQL_STMT_INSERT:
	case CQL_STMT_UPDATE:
	case CQL_STMT_DELETE:
		if (cql_cas_is_conditional(dr))
			node_cas_write(d->cas, dr);
		else
			run_write(d, dr);
		break;
	case CQL_STMT_SELECT:
		cql_data_run_read(d, dr);
		break;
	case CQL_STMT_TRUNCATE:
		run_truncate(d, dr);
		break;
	default:
		cql_data_reply_error(
			dr->req, dr->info->version, dr->info->stream,
			CQL_ERR_INVALID,
			"this statement does not go through the data path");
	}
}

struct node_cas *cql_data_cas(struct cql_data *d)
{
	return d->cas;
}

/* Blocking hint and batchlog file work on the read workers, completions on
 * the loop. */
void cql_data_offload(void *arg, void (*run)(void *job),
		      void (*done)(void *job), void *job)
{
	struct cql_data *d = arg;
	workers_offload(d->workers, d->q, run, done, job);
}

int cql_data_set_slow_query_timeout(struct cql_data *d, uint64_t timeout_us)
{
	node_slow_queries_delete(d->slow);
	d->slow = NULL;
	if (timeout_us &&
	    !(d->slow = node_slow_queries_new(d->env, timeout_us)))
		return -1;
	return 0;
}

void cql_data_set_tombstone_failure_threshold(struct cql_data *d,
					      int64_t threshold)
{
	d->tombstone_fail = threshold;
}

void cql_data_set_batch_limits(struct cql_data *d, uint64_t warn_bytes,
			       uint64_t fail_bytes, int64_t unlogged_partitions)
{
	d->batch_warn = warn_bytes;
	d->batch_fail = fail_bytes;
	d->unlogged_warn = unlogged_partitions;
}

struct hints *cql_data_hints(struct cql_data *d)
{
	return d->hints;
}

/* ---- life cycle ---------------------------------------------------------- */

static struct ring *hook_ring(void *arg)
{
	struct cql_data *d = arg;
	return d->hooks.ring(d->hooks.arg);
}

void cql_data_set_tracer(struct cql_data *d, struct node_trace *t)
{
	d->tracer = t;
}

static void hook_trace(void *arg, const uint8_t *session, const char *thread,
		       int64_t elapsed_us, const char *activity)
{
	struct cql_data *d = arg;
	if (d->tracer)
		node_trace_remote_event(d->tracer, session, thread, elapsed_us,
					activity);
}

static bool hook_alive(void *arg, const struct inet_addr *ep)
{
	struct cql_data *d = arg;
	return d->hooks.is_alive(d->hooks.arg, ep);
}

static const struct ring_strategy *hook_strategy(void *arg,
						 const uint8_t table_id[16])
{
	struct cql_data *d = arg;
	const struct storage_table_meta *t =
		storage_table_meta_acquire(d->db, table_id);
	const struct cql_keyspace *k =
		t ? cql_schema_keyspace(d->schema, t->keyspace) : NULL;
	storage_table_meta_unref(t);
	return k ? cql_keyspace_strategy(k) : NULL;
}

struct cql_data *cql_data_new(struct storage *db, struct env *env,
			      struct loopq *q, struct cql_schema *schema,
			      const struct repl_options *o,
			      const struct hints_options *ho,
			      const struct cql_data_hooks *hooks)
{
	struct cql_data *d = calloc(1, sizeof(*d));
	if (!d) {
		err_set(ERR_NOMEM, "cannot allocate the data path");
		return NULL;
	}
	d->db = db;
	d->env = env;
	d->q = q;
	d->schema = schema;
	d->hooks = *hooks;
	cql_timeuuid_gen_init(&d->timeuuids, env_random(env));
	struct repl_hooks rh = {.ring = hook_ring,
				.is_alive = hook_alive,
				.hint = cql_data_hook_hint,
				.take_hint = cql_data_hook_take_hint,
				.strategy = hook_strategy,
				.offload = cql_data_offload,
				.trace = hook_trace,
				.arg = d};
	struct node_cas_hooks ch = {
		.ring = hook_ring, .is_alive = hook_alive, .arg = d};
	struct paxos_options po;
	paxos_options_default(&po);
	po.write_timeout_ms = o->write_timeout_ms;
	po.trace = hook_trace;
	po.trace_arg = d;
	if (o->cas_contention_timeout_ms)
		po.contention_timeout_ms = o->cas_contention_timeout_ms;
	if (!(d->workers = workers_new(2, "read")) ||
	    !(d->repl = repl_new(env, o, &cql_data_store_ops, d, &rh)) ||
	    !(d->cas = node_cas_new(env, &o->self, o->paxos_ballot_file, &po,
				    &cql_data_store_ops, d, schema, &ch)))
		goto fail;
	if (ho) {
		struct hints_options h = *ho;
		h.send = cql_data_hints_send;
		h.alive = cql_data_hints_alive;
		h.hook_arg = d;
		h.offload = cql_data_offload;
		h.offload_arg = d;
		if (!(d->hints = hints_open(&h)))
			goto fail;
	}
	return d;
fail:
	err_prefix("cannot start the data path");
	cql_data_delete(d);
	return NULL;
}

void cql_data_stop(struct cql_data *d)
{
	workers_delete(d->workers);
	d->workers = NULL;
}

void cql_data_delete(struct cql_data *d)
{
	if (!d)
		return;
	if (d->workers)
		cql_data_stop(d);
	/* The store closes first; deliveries still in flight then end (with
	 * a failure) as the coordinator goes, which frees it. */
	hints_close(d->hints);
	node_cas_delete(d->cas);
	repl_delete(d->repl);
	buf_free(&d->reply);
	node_slow_queries_flush(d->slow); /* what the last turns gathered */
	node_slow_queries_delete(d->slow);
	free(d);
}

void cql_data_receive(struct cql_data *d, const struct inet_addr *from,
		      uint32_t verb, const uint8_t *msg, size_t len)
{
	if (verb >= PAXOS_VERB_FIRST && verb <= PAXOS_VERB_LAST) {
		node_cas_receive(d->cas, from, verb, msg, len);
		return;
	}
	repl_receive(d->repl, from, verb, msg, len);
}

void cql_data_stats(const struct cql_data *d, struct repl_stats *out)
{
	repl_get_stats(d->repl, out);
}

void cql_data_forget_table(struct cql_data *d, const uint8_t id[16])
{
	repl_forget_table(d->repl, id);
}

bool cql_data_table_latency(const struct cql_data *d, const uint8_t id[16],
			    struct repl_table_latency *out)
{
	return repl_get_table_latency(d->repl, id, out);
}
