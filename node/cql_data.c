/* The replicated data path (see cql_data.h). */
#define LOG_MODULE "node"
#include "node/cql_data.h"

#include "client/exec/cas.h"
#include "client/exec/data_path.h"
#include "client/exec/dml.h"
#include "client/exec/select.h"
#include "common/err.h"
#include "common/log.h"
#include "common/murmur3.h"
#include "common/workers.h"
#include "common/zalloc.h"
#include "node/cql_cas.h"
#include "node/node_trace.h"
#include "node/slow_queries.h"
#include "replication/hints.h"
#include "ring/ring.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A read reply buffer grown beyond this is freed, not kept for the next. */
#define READ_REPLY_KEEP (256 * 1024)

struct cql_data {
	struct storage *db;
	struct env *env;
	struct loopq *q;
	struct cql_schema *schema; /* pinned by each read while it runs */
	struct workers *workers;
	struct repl *repl;
	struct node_cas *cas; /* lightweight transactions */
	struct hints *hints;  /* NULL when hinted handoff is off */
	struct cql_data_hooks hooks;
	struct cql_timeuuid_gen timeuuids;
	int64_t last_ts;
	uint64_t batch_warn, batch_fail; /* bytes; 0 = no check */
	int64_t unlogged_warn;           /* partitions */
	int64_t tombstone_fail;          /* tombstone_failure_threshold */
	struct buf reply; /* a read's reply is encoded here, then copied out */
	/* runs storage_write_deferred once a turn with writes */
	struct loopq_item write_item;
	bool write_queued;
	struct inet_addr hand_over_to;  /* cql_data_hand_over_hints' node */
	struct node_slow_queries *slow; /* NULL: slow_query_log_timeout 0 */
	struct node_trace *tracer;      /* NULL: trace events dropped */
};

/* ---- the local replica: storage, reads on workers ------------------------ */

struct store_job {
	struct work work;
	struct loopq_item done_item;
	struct cql_data *d;
	uint8_t table_id[16];
	struct arena a;
	struct storage_read_cmd cmd;
	bool scan;
	int64_t start, end;
	uint32_t max;
	repl_store_read_fn done;
	void *arg;
	int status;
	enum err_code code;
	struct storage_mutation **frags;
	size_t n;
	bool cut;
};

static int store_keep(struct store_job *j, struct storage_mutation *m,
		      size_t *cap)
{
	if (j->n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct storage_mutation **p = realloc(j->frags, c * sizeof(*p));
		if (!p) {
			storage_mutation_delete(m);
			return err_set(ERR_NOMEM, "out of memory");
		}
		j->frags = p;
		*cap = c;
	}
	j->frags[j->n++] = m;
	return 0;
}

static void store_job_run(struct work *w)
{
	struct store_job *j = (struct store_job *)w;
	size_t cap = 0;
	int rc = 0;
	if (!j->scan) {
		struct storage_mutation *m = NULL;
		rc = storage_read_fragment(j->d->db, j->table_id, &j->cmd, &m);
		if (rc == 0)
			rc = store_keep(j, m, &cap);
	} else {
		struct storage_scan *s = storage_scan_open(
			j->d->db, j->table_id, j->start, j->end, &j->cmd);
		if (!s)
			rc = -1;
		struct storage_mutation *m;
		while (s && rc == 0 &&
		       (rc = storage_scan_next_fragment(s, &m)) == 1) {
			if (j->n == j->max) {
				storage_mutation_delete(m);
				j->cut = true;
				rc = 0;
				break;
			}
			rc = store_keep(j, m, &cap);
		}
		if (rc == 1)
			rc = 0;
		storage_scan_close(s);
	}
	if (rc != 0) {
		j->status = -1;
		j->code = err_code();
		for (size_t i = 0; i < j->n; i++)
			storage_mutation_delete(j->frags[i]);
		free(j->frags);
		j->frags = NULL;
		j->n = 0;
	}
	loopq_post(j->d->q, &j->done_item);
}

static void store_job_done(struct loopq_item *it)
{
	struct store_job *j =
		(struct store_job *)((char *)it -
				     offsetof(struct store_job, done_item));
	j->done(j->arg, j->status, j->code, j->frags, j->n, j->cut);
	arena_destroy(&j->a);
	free(j);
}

static void store_submit(struct cql_data *d, const uint8_t table_id[16],
			 const struct storage_read_cmd *cmd, bool scan,
			 int64_t start, int64_t end, uint32_t max,
			 repl_store_read_fn done, void *arg)
{
	struct store_job *j = calloc(1, sizeof(*j));
	struct buf enc;
	buf_init(&enc);
	if (j)
		arena_create(&j->a, 0);
	/* The command is copied: the coordinator may give up (timeout)
	 * while the worker still reads. */
	if (!j || storage_read_cmd_encode(cmd, &enc) != 0 ||
	    storage_read_cmd_decode(enc.data, enc.len, &j->a, &j->cmd) != 0) {
		enum err_code code = err_code();
		buf_free(&enc);
		if (j)
			arena_destroy(&j->a);
		free(j);
		done(arg, -1, code, NULL, 0, false);
		return;
	}
	buf_free(&enc);
	j->d = d;
	memcpy(j->table_id, table_id, 16);
	j->scan = scan;
	j->start = start;
	j->end = end;
	j->max = max;
	j->done = done;
	j->arg = arg;
	j->work.run = store_job_run;
	j->done_item.fn = store_job_done;
	workers_submit(d->workers, &j->work);
}

/* The turn's deferred commitlog records go out in one write(2), then
 * their writes are acknowledged (before the turn's replies leave). */
static void write_deferred(struct loopq_item *it)
{
	struct cql_data *d =
		(struct cql_data *)((char *)it -
				    offsetof(struct cql_data, write_item));
	d->write_queued = false; /* writes acknowledged now queue anew */
	storage_write_deferred(d->db);
}

/* The coordinator applies on the loop: under `periodic` the commitlog
 * record is written once per turn with the turn's others (redis writes
 * its AOF once per turn the same way), not with a write(2) each. */
static int store_apply(void *s, const struct storage_mutation *m,
		       storage_done_fn done, void *arg)
{
	struct cql_data *d = s;
	if (storage_apply_deferred(d->db, m, done, arg))
		return -1;
	if (!d->write_queued) {
		d->write_queued = true;
		d->write_item.fn = write_deferred;
		loopq_defer(d->q, &d->write_item);
	}
	return 0;
}

/* A read answered from memory, completed later in the same loop turn (the
 * coordinator expects its callback after the call returns); its reply
 * then leaves with the turn's other replies. */
struct cached_read {
	struct loopq_item item;
	repl_store_read_fn done;
	void *arg;
	int status;
	enum err_code code;
	struct storage_mutation *frag;
};

static void cached_read_done(struct loopq_item *it)
{
	struct cached_read *c = (struct cached_read *)it;
	/* The array goes with the fragment (the callee frees both). */
	struct storage_mutation **frags =
		c->status ? NULL : malloc(sizeof(*frags));
	if (!c->status && !frags) {
		storage_mutation_delete(c->frag);
		c->status = -1;
		c->code = ERR_NOMEM;
	}
	if (frags)
		frags[0] = c->frag;
	c->done(c->arg, c->status, c->code, frags, frags ? 1 : 0, false);
	free(c);
}

/* A point read tries memory first (memtables, cached blocks): most reads
 * of a hot working set then cost no thread hand-off. One that needs the
 * disk goes to a worker. */
static void store_read(void *s, const uint8_t table_id[16],
		       const struct storage_read_cmd *cmd,
		       repl_store_read_fn done, void *arg)
{
	struct cql_data *d = s;
	struct cached_read *c = malloc(sizeof(*c));
	if (!c) {
		store_submit(s, table_id, cmd, false, 0, 0, 1, done, arg);
		return;
	}
	*c = (struct cached_read){
		.item.fn = cached_read_done, .done = done, .arg = arg};
	c->status =
		storage_read_fragment_cached(d->db, table_id, cmd, &c->frag);
	if (c->status != 0 && err_code() == ERR_AGAIN) {
		free(c);
		store_submit(s, table_id, cmd, false, 0, 0, 1, done, arg);
		return;
	}
	c->code = c->status ? err_code() : ERR_NONE;
	loopq_defer(d->q, &c->item);
}

static void store_scan(void *s, const uint8_t table_id[16], int64_t start,
		       int64_t end, const struct storage_read_cmd *cmd,
		       uint32_t max, repl_store_read_fn done, void *arg)
{
	store_submit(s, table_id, cmd, true, start, end, max, done, arg);
}

static const struct storage_table_meta *store_meta(void *s,
						   const uint8_t table_id[16])
{
	struct cql_data *d = s;
	return storage_table_meta_acquire(d->db, table_id);
}

/* A truncate waits for a running flush or compaction of the table and
 * fsyncs its truncation point: a worker's job. */
struct truncate_job {
	struct work work;
	struct loopq_item done_item;
	struct cql_data *d;
	uint8_t table_id[16];
	storage_done_fn done;
	void *arg;
	int status;
	enum err_code code;
};

static void truncate_job_run(struct work *w)
{
	struct truncate_job *j = (struct truncate_job *)w;
	j->status = storage_truncate(j->d->db, j->table_id);
	j->code = j->status ? err_code() : ERR_NONE;
	if (j->status)
		LOG_WARN("truncate failed: %s", err_msg());
	loopq_post(j->d->q, &j->done_item);
}

static void truncate_job_done(struct loopq_item *it)
{
	struct truncate_job *j =
		(struct truncate_job *)((char *)it -
					offsetof(struct truncate_job,
						 done_item));
	j->done(j->arg, j->status, j->code);
	free(j);
}

static void store_truncate(void *s, const uint8_t table_id[16],
			   storage_done_fn done, void *arg)
{
	struct cql_data *d = s;
	struct truncate_job *j = calloc(1, sizeof(*j));
	if (!j) {
		done(arg, -1, ERR_NOMEM);
		return;
	}
	j->d = d;
	memcpy(j->table_id, table_id, 16);
	j->done = done;
	j->arg = arg;
	j->work.run = truncate_job_run;
	j->done_item.fn = truncate_job_done;
	workers_submit(d->workers, &j->work);
}

static int64_t store_truncated_at(void *s, const uint8_t table_id[16])
{
	struct cql_data *d = s;
	return storage_truncated_at(d->db, table_id);
}

static const struct repl_store_ops store_ops = {
	.apply = store_apply,
	.read = store_read,
	.scan = store_scan,
	.meta = store_meta,
	.truncate = store_truncate,
	.truncated_at = store_truncated_at,
};

/* ---- replies ------------------------------------------------------------- */

static void reply_error(struct cql_request *req, uint8_t version,
			int16_t stream, uint32_t code, const char *msg)
{
	struct buf b;
	buf_init(&b);
	cql_encode_error(&b, version, stream, code, msg);
	cql_request_reply(req, b.data, b.len);
	buf_free(&b);
}

/* A coordinator outcome other than success, as the protocol's error. */
static void reply_result(struct cql_request *req, uint8_t version,
			 int16_t stream, const struct repl_result *res,
			 const char *warning)
{
	struct buf b;
	buf_init(&b);
	uint16_t cl = (uint16_t)res->cl;
	switch (res->outcome) {
	case REPL_OK:
		cql_encode_result_void(&b, version, stream);
		break;
	case REPL_UNAVAILABLE:
		cql_encode_unavailable(&b, version, stream, res->msg, cl,
				       res->required, res->alive);
		break;
	case REPL_WRITE_TIMEOUT:
		cql_encode_write_timeout(&b, version, stream, res->msg, cl,
					 res->alive, res->required,
					 repl_write_type_name(res->write_type));
		break;
	case REPL_READ_TIMEOUT:
		cql_encode_read_timeout(&b, version, stream, res->msg, cl,
					res->alive, res->required,
					res->data_present);
		break;
	case REPL_WRITE_FAILURE:
		cql_encode_write_failure(&b, version, stream, res->msg, cl,
					 res->alive, res->required, 1,
					 repl_write_type_name(res->write_type));
		break;
	case REPL_READ_FAILURE:
		cql_encode_read_failure(&b, version, stream, res->msg, cl,
					res->alive, res->required, 1,
					res->data_present);
		break;
	case REPL_OVERLOADED:
		cql_encode_error(&b, version, stream, CQL_ERR_OVERLOADED,
				 res->msg);
		break;
	case REPL_INVALID:
		cql_encode_error(&b, version, stream, CQL_ERR_INVALID,
				 res->msg);
		break;
	case REPL_TRUNCATE_ERROR:
		cql_encode_error(&b, version, stream, CQL_ERR_TRUNCATE,
				 res->msg);
		break;
	}
	if (warning && *warning && res->outcome == REPL_OK)
		cql_frame_add_warning(&b, warning);
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
	reply_result(w->req, w->version, w->stream, res, w->warning);
	free(w);
}

static uint64_t env_rand(void *arg)
{
	return env_random(arg);
}

static const struct ring_strategy *strategy_of(const struct cql_data *d,
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
 * mutations' serialized bytes. */
static int check_batch(struct cql_data *d, const struct cql_data_request *dr,
		       const struct cql_mutations *all,
		       const struct cql_table **tables, char *warning,
		       size_t cap)
{
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
				.random = env_rand,
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
		reply_error(dr->req, version, stream,
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
		reply_error(dr->req, version, stream, CQL_ERR_SERVER,
			    "out of memory");
		return;
	}
	for (size_t i = 0; i < all.count; i++) {
		rm[i].m = all.items[i];
		rm[i].strategy = strategy_of(d, tables[i]);
		if (!rm[i].strategy) {
			free(rm);
			free(w);
			free(tables);
			cql_mutations_free(&all);
			reply_error(dr->req, version, stream, CQL_ERR_INVALID,
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
		reply_error(dr->req, version, stream, CQL_ERR_INVALID, msg);
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
		repl_counter_write(d->repl, rm, all.count,
				   dr->params->consistency, write_done, w);
	else
		repl_write_traced(d->repl, rm, all.count,
				  dr->params->consistency, wt,
				  dr->info->trace ? dr->info->trace->id : NULL,
				  write_done, w);
	free(rm);
	free(tables);
	cql_mutations_free(&all);
}

/* ---- reads --------------------------------------------------------------- */

struct read_job {
	struct cql_data *d;
	struct cql_request *req;
	uint8_t version;
	int16_t stream;
	int cl;
	char keyspace[64], table[64];
	uint8_t table_id[16];
	bool read_repair;
	bool traced; /* in trace session `trace` */
	uint8_t trace[16];
	char speculative_retry[32];
	struct arena a;
	struct cql_select_plan *plan;
	struct storage_result **results;
	size_t count, cap;
	size_t budget, rows;
	size_t next_key;  /* key reads */
	int64_t pos, end; /* scans: (pos, end] left */
	bool read_cut;
	/* for the slow query log: when the read began, and its text */
	uint64_t start_us;
	char *query;
	size_t query_len;
	/* SERIAL / LOCAL_SERIAL: a Paxos round first (node_cas), then the
	 * read at QUORUM / LOCAL_QUORUM (Cassandra's readWithPaxos) */
	int serial;
	/* tombstone warnings of the replicas' answers (repl_result) */
	uint32_t tomb_warn_nodes;
	uint64_t tomb_max;
	/* job_table's answer while the schema generation stays `gen` */
	const struct cql_table *t;
	const struct ring_strategy *strategy;
	uint64_t gen;
	/* Keeps what the plan and job_table looked up (the request's table,
	 * a version an ALTER replaced, a dropped one) alive until the job
	 * ends. */
	struct cql_schema_pin pin;
	/* A filtered scan (ALLOW FILTERING, an indexed column) walks several
	 * vnode ranges at once: see "parallel range walk" below. NULL for
	 * the walk of one range at a time. */
	struct par_walk *par;
};

static void par_walk_free(struct par_walk *w);

static void read_job_free(struct read_job *j)
{
	par_walk_free(j->par);
	for (size_t i = 0; i < j->count; i++)
		storage_result_delete(j->results[i]);
	free(j->results);
	arena_destroy(&j->a);
	cql_schema_unpin(j->d->schema, &j->pin);
	free(j->query);
	free(j);
}

static const struct cql_table *job_table(struct read_job *j,
					 const struct ring_strategy **s);

/* The query's shape for tombstone warnings (Cassandra prints the read
 * command as CQL): the partition by token, or the token range. */
static void query_shape(struct read_job *j, char *out, size_t cap)
{
	const struct ring_strategy *s;
	const struct cql_table *t = job_table(j, &s);
	char pk[256] = "";
	size_t k = 0;
	const struct storage_table_meta *m = t ? cql_table_meta(t) : NULL;
	for (size_t i = 0; m && i < m->pk_count && k < sizeof(pk); i++)
		k += (size_t)snprintf(pk + k, sizeof(pk) - k, "%s%s",
				      i ? ", " : "", m->columns[m->pk[i]].name);
	if (cql_select_plan_is_scan(j->plan)) {
		int64_t start, end;
		cql_select_plan_range(j->plan, &start, &end);
		snprintf(out, cap,
			 "SELECT * FROM %s.%s WHERE token(%s) > %lld AND "
			 "token(%s) <= %lld",
			 j->keyspace, j->table, pk, (long long)start, pk,
			 (long long)end);
		return;
	}
	size_t n = cql_select_plan_key_count(j->plan);
	size_t i = j->next_key < n ? j->next_key : (n ? n - 1 : 0);
	struct slice key =
		n ? cql_select_plan_key(j->plan, i) : slice_make(NULL, 0);
	snprintf(out, cap, "SELECT * FROM %s.%s WHERE token(%s) = %lld",
		 j->keyspace, j->table, pk,
		 (long long)murmur3_token(key.ptr, key.len));
}

/* Cassandra 4.1's coordinator tombstone warning, logged and sent. */
static void tombstone_warning(struct read_job *j, struct buf *b)
{
	if (!j->tomb_warn_nodes)
		return;
	char shape[512], msg[768];
	query_shape(j, shape, sizeof(shape));
	snprintf(msg, sizeof(msg),
		 "%u nodes scanned up to %llu tombstones and issued tombstone "
		 "warnings for query %s  (see tombstone_warn_threshold)",
		 j->tomb_warn_nodes, (unsigned long long)j->tomb_max, shape);
	LOG_WARN("%s", msg);
	cql_frame_add_warning(b, msg);
}

static void read_finish(struct read_job *j)
{
	/* The data path's buffer, kept across replies: a reply is copied to
	 * its connection at once, and this one grows no more once warm. */
	struct buf b = j->d->reply;
	buf_init(&j->d->reply); /* taken while in use */
	buf_clear(&b);
	if (cql_select_encode(j->plan, j->results, j->count, j->read_cut,
			      env_wall_us(j->d->env) / 1000000, j->version,
			      j->stream, &b) != 0)
		cql_encode_error(&b, j->version, j->stream,
				 err_code() == ERR_INVALID ? CQL_ERR_INVALID
							   : CQL_ERR_SERVER,
				 err_msg());
	else if (cql_select_plan_is_aggregate(j->plan) ||
		 cql_select_plan_is_grouped(j->plan)) {
		/* Cassandra's client warnings for an aggregate (GROUP BY
		 * included) over a range read or an IN (cqlsh prints them
		 * under the result). */
		if (!cql_select_plan_key_restricted(j->plan))
			cql_frame_add_warning(&b, "Aggregation query used "
						  "without partition key");
		else if (cql_select_plan_key_in(j->plan))
			cql_frame_add_warning(&b, "Aggregation query used on "
						  "multiple partition keys (IN "
						  "restriction)");
	}
	if (b.len >= 5 && b.data[4] == CQL_OP_RESULT)
		tombstone_warning(j, &b);
	cql_request_reply(j->req, b.data, b.len);
	if (j->d->slow)
		node_slow_queries_note(j->d->slow, j->query, j->query_len,
				       env_mono_us(j->d->env) - j->start_us,
				       j->rows);
	if (b.cap > READ_REPLY_KEEP || j->d->reply.data)
		buf_free(&b); /* a huge page of rows is not kept */
	else
		j->d->reply = b;
	read_job_free(j);
}

static void read_fail(struct read_job *j, const struct repl_result *res)
{
	reply_result(j->req, j->version, j->stream, res, NULL);
	read_job_free(j);
}

static void read_fail_msg(struct read_job *j, uint32_t code, const char *msg)
{
	reply_error(j->req, j->version, j->stream, code, msg);
	read_job_free(j);
}

/* The table and its keyspace's strategy as the schema has them now (a
 * DROP may have run since the read began). */
static const struct cql_table *job_table(struct read_job *j,
					 const struct ring_strategy **s)
{
	uint64_t gen = cql_schema_generation(j->d->schema);
	if (j->t && j->gen == gen) {
		*s = j->strategy;
		return j->t;
	}
	const struct cql_table *t =
		cql_schema_table(j->d->schema, j->keyspace, j->table);
	if (!t || memcmp(cql_table_meta(t)->id, j->table_id, 16) != 0)
		return NULL;
	*s = strategy_of(j->d, t);
	if (!*s)
		return NULL;
	j->t = t;
	j->strategy = *s;
	j->gen = gen;
	return t;
}

/* Resolves a merged fragment with the plan's command and keeps it. */
static int job_keep(struct read_job *j, const struct cql_table *t,
		    const struct storage_mutation *f)
{
	struct storage_result *r;
	if (storage_fragment_resolve(cql_table_meta(t), f,
				     cql_select_plan_cmd(j->plan),
				     env_wall_us(j->d->env) / 1000000, &r) != 0)
		return -1;
	/* A partition with no row to send (all filtered out, deleted, or
	 * sent already) is not kept: a filtered scan may look at many. */
	size_t fresh = cql_select_plan_rows_new(j->plan, r, j->count);
	if (!fresh) {
		storage_result_delete(r);
		return 0;
	}
	if (j->count == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 16;
		struct storage_result **p =
			realloc(j->results, cap * sizeof(*p));
		if (!p) {
			storage_result_delete(r);
			return err_set(ERR_NOMEM, "out of memory");
		}
		j->results = p;
		j->cap = cap;
	}
	j->rows += fresh;
	j->results[j->count++] = r;
	return 0;
}

static void read_next_key(struct read_job *j);
static void read_next_range(struct read_job *j);

/* A failed step of a read: when the table went meanwhile (a DROP TABLE or
 * KEYSPACE ran while the read was in flight, and a replica no longer knew
 * it), the client is told that, not that a replica failed. */
static void read_step_failed(struct read_job *j, const struct repl_result *res)
{
	const struct ring_strategy *s;
	if (!job_table(j, &s)) {
		read_fail_msg(j, CQL_ERR_INVALID,
			      "the table was dropped during the read");
		return;
	}
	if (!res->tombstone_abort) {
		read_fail(j, res);
		return;
	}
	/* A replica met more than tombstone_failure_threshold: Cassandra
	 * 4.1's TombstoneAbortException, a ReadFailure (the replica's count
	 * stays there: "over" the threshold is what is known here). */
	struct repl_result r = *res;
	char shape[160];
	query_shape(j, shape, sizeof(shape));
	snprintf(r.msg, sizeof(r.msg),
		 "1 nodes scanned over %lld tombstones and aborted the query "
		 "%s (see tombstone_failure_threshold)",
		 (long long)j->d->tombstone_fail, shape);
	LOG_WARN("%s", r.msg);
	read_fail(j, &r);
}

/* Adds one step's replica tombstone figures to the read's. */
static void job_tombstones(struct read_job *j, const struct repl_result *res)
{
	if (res->tombstone_warn_nodes > j->tomb_warn_nodes)
		j->tomb_warn_nodes = res->tombstone_warn_nodes;
	if (res->tombstone_max > j->tomb_max)
		j->tomb_max = res->tombstone_max;
}

static void on_key(void *arg, const struct repl_result *res,
		   struct storage_mutation *frag)
{
	struct read_job *j = arg;
	if (res->outcome != REPL_OK) {
		read_step_failed(j, res);
		return;
	}
	job_tombstones(j, res);
	const struct ring_strategy *s;
	const struct cql_table *t = job_table(j, &s);
	int rc = t ? job_keep(j, t, frag) : -1;
	storage_mutation_delete(frag);
	if (!t) {
		read_fail_msg(j, CQL_ERR_INVALID,
			      "the table was dropped during the read");
		return;
	}
	if (rc != 0) {
		read_fail_msg(j, CQL_ERR_SERVER, err_msg());
		return;
	}
	j->next_key++;
	read_next_key(j);
}

static void read_key(struct read_job *j);

static void serial_ready(void *arg, int status)
{
	struct read_job *j = arg;
	if (status != 0) { /* the error is answered */
		read_job_free(j);
		return;
	}
	read_key(j);
}

static void read_next_key(struct read_job *j)
{
	if (j->serial && j->rows < j->budget &&
	    j->next_key < cql_select_plan_key_count(j->plan)) {
		const struct ring_strategy *s;
		const struct cql_table *t = job_table(j, &s);
		if (!t) {
			read_fail_msg(j, CQL_ERR_INVALID,
				      "the table was dropped during the read");
			return;
		}
		node_cas_serial_prepare(
			j->d->cas, t, cql_select_plan_key(j->plan, j->next_key),
			j->serial, j->req, j->version, j->stream, serial_ready,
			j);
		return;
	}
	read_key(j);
}

static void read_key(struct read_job *j)
{
	if (j->rows >= j->budget ||
	    j->next_key >= cql_select_plan_key_count(j->plan)) {
		j->read_cut = j->rows >= j->budget;
		read_finish(j);
		return;
	}
	const struct ring_strategy *s;
	const struct cql_table *t = job_table(j, &s);
	if (!t) {
		read_fail_msg(j, CQL_ERR_INVALID,
			      "the table was dropped during the read");
		return;
	}
	struct slice key = cql_select_plan_key(j->plan, j->next_key);
	struct storage_read_cmd cmd = *cql_select_plan_cmd(j->plan);
	cmd.key = key.ptr;
	cmd.key_len = key.len;
	struct repl_read q = {.table_id = j->table_id,
			      .meta = cql_table_meta(t),
			      .strategy = s,
			      .cl = j->cl,
			      .cmd = &cmd,
			      .token = murmur3_token(key.ptr, key.len),
			      .read_repair = j->read_repair,
			      .speculative_retry = j->speculative_retry,
			      .trace_session = j->traced ? j->trace : NULL};
	repl_read(j->d->repl, &q, on_key, j);
}

static void on_range(void *arg, const struct repl_result *res,
		     struct storage_mutation **frags, size_t n, int64_t resume,
		     bool finished)
{
	struct read_job *j = arg;
	if (res->outcome != REPL_OK) {
		read_step_failed(j, res);
		return;
	}
	job_tombstones(j, res);
	const struct ring_strategy *s;
	const struct cql_table *t = job_table(j, &s);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		if (t && rc == 0)
			rc = job_keep(j, t, frags[i]);
		storage_mutation_delete(frags[i]);
	}
	free(frags);
	if (!t) {
		read_fail_msg(j, CQL_ERR_INVALID,
			      "the table was dropped during the read");
		return;
	}
	if (rc != 0) {
		read_fail_msg(j, CQL_ERR_SERVER, err_msg());
		return;
	}
	if (finished || resume >= j->end) {
		j->read_cut = j->rows >= j->budget;
		read_finish(j);
		return;
	}
	j->pos = resume;
	read_next_range(j);
}

/* ---- parallel range walk ------------------------------------------------- */

/*
 * A filtered scan (ALLOW FILTERING, or a restriction served by a
 * secondary index) may read many partitions to send few rows; one vnode
 * range per round trip makes a selective query over a cluster take one
 * round trip per vnode range. As Cassandra's range reads do with their
 * concurrency factor, the walk splits (pos, end] at the ring's tokens and
 * reads up to `factor` ranges at once (4 at first, doubled after every
 * range that left the page unfilled, at most PAR_MAX). Answers are used in
 * token order: a range answered before the ones ahead of it keeps its
 * fragments until they are done, and reads nothing more meanwhile (at
 * most factor steps of fragments are held). Once the page is full, the
 * steps in flight are waited for and their fragments dropped; an error
 * of any step answers the request once no step is in flight.
 */
#define PAR_MAX 16

struct par_slot {
	struct read_job *j;
	int64_t end;                     /* the slot reads (start, end] */
	int64_t pos;                     /* its next step starts after pos */
	bool busy;                       /* a step in flight */
	bool done;                       /* (start, end] read */
	struct storage_mutation **frags; /* held until the slot is first */
	size_t n, cap;
};

struct par_walk {
	struct par_slot *slots;
	size_t count;
	size_t head;     /* the first slot not used up */
	size_t launched; /* slots begun */
	size_t inflight;
	size_t factor;
	bool stopping; /* page full or failed: no new step */
	bool failed;
	/* par_advance is running: an answer given meanwhile (a step that
	 * failed at once) marks `dirty` for it to look again */
	bool advancing, dirty;
	struct repl_result res; /* the failure, when a step failed */
	uint32_t local_code;    /* else: this node's (CQL_ERR_*) */
	char local_msg[256];
};

static void par_slot_drop(struct par_slot *sl)
{
	for (size_t i = 0; i < sl->n; i++)
		storage_mutation_delete(sl->frags[i]);
	free(sl->frags);
	sl->frags = NULL;
	sl->n = sl->cap = 0;
}

static void par_walk_free(struct par_walk *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->count; i++)
		par_slot_drop(&w->slots[i]);
	free(w->slots);
	free(w);
}

static void par_step(struct par_slot *sl);
static void par_advance(struct read_job *j);

/* A failure of this node's (no memory, the table dropped): answered once
 * no step is in flight. */
static void par_fail_local(struct par_walk *w, uint32_t code, const char *msg)
{
	if (w->failed)
		return;
	w->failed = w->stopping = true;
	w->local_code = code;
	snprintf(w->local_msg, sizeof(w->local_msg), "%s", msg);
}

static void on_par_range(void *arg, const struct repl_result *res,
			 struct storage_mutation **frags, size_t n,
			 int64_t resume, bool finished)
{
	struct par_slot *sl = arg;
	struct read_job *j = sl->j;
	struct par_walk *w = j->par;
	w->inflight--;
	sl->busy = false;
	bool keep = res->outcome == REPL_OK && !w->stopping;
	if (res->outcome != REPL_OK && !w->failed) {
		w->failed = true;
		w->stopping = true;
		w->res = *res;
	}
	if (res->outcome == REPL_OK)
		job_tombstones(j, res);
	for (size_t i = 0; i < n; i++) {
		if (keep && sl->n == sl->cap) {
			size_t cap = sl->cap ? sl->cap * 2 : 64;
			struct storage_mutation **p =
				realloc(sl->frags, cap * sizeof(*p));
			if (!p) {
				keep = false;
				par_fail_local(w, CQL_ERR_SERVER,
					       "out of memory");
			} else {
				sl->frags = p;
				sl->cap = cap;
			}
		}
		if (keep)
			sl->frags[sl->n++] = frags[i];
		else
			storage_mutation_delete(frags[i]);
	}
	free(frags);
	if (keep) {
		if (finished || resume >= sl->end)
			sl->done = true;
		else
			sl->pos = resume;
	}
	if (w->advancing) {
		w->dirty = true;
		return;
	}
	par_advance(j);
}

static void par_step(struct par_slot *sl)
{
	struct read_job *j = sl->j;
	struct par_walk *w = j->par;
	const struct ring_strategy *s;
	const struct cql_table *t = job_table(j, &s);
	if (!t) {
		par_fail_local(w, CQL_ERR_INVALID,
			       "the table was dropped during the read");
		return;
	}
	size_t want = j->budget > j->rows ? j->budget - j->rows : 1;
	struct repl_range q = {.read_repair = j->read_repair,
			       .table_id = j->table_id,
			       .meta = cql_table_meta(t),
			       .strategy = s,
			       .cl = j->cl,
			       .cmd = cql_select_plan_cmd(j->plan),
			       .start = sl->pos,
			       .end = sl->end,
			       .max_partitions =
				       want < 1000 ? (uint32_t)want : 1000};
	sl->busy = true;
	w->inflight++;
	repl_range_step(j->d->repl, &q, on_par_range, sl);
}

/* Uses what the first slots hold, in token order, then starts steps up to
 * the factor; answers once the page is full or the range is read and no
 * step is in flight. */
static void par_advance(struct read_job *j)
{
	struct par_walk *w = j->par;
	w->advancing = true;
again:
	w->dirty = false;
	while (!w->stopping && w->head < w->count) {
		struct par_slot *sl = &w->slots[w->head];
		const struct ring_strategy *s;
		const struct cql_table *t = job_table(j, &s);
		if (!t)
			par_fail_local(w, CQL_ERR_INVALID,
				       "the table was dropped during the read");
		for (size_t i = 0; i < sl->n; i++) {
			if (t && !w->stopping && job_keep(j, t, sl->frags[i]))
				par_fail_local(w, CQL_ERR_SERVER, err_msg());
			storage_mutation_delete(sl->frags[i]);
		}
		sl->n = 0;
		if (j->rows >= j->budget) {
			j->read_cut = true;
			w->stopping = true;
			break;
		}
		if (!sl->done) {
			/* the first slot reads on, one step at a time */
			if (!sl->busy && !w->stopping)
				par_step(sl);
			break;
		}
		w->head++;
		if (w->factor < PAR_MAX)
			w->factor *= 2;
	}
	if (!w->stopping && w->head == w->count)
		w->stopping = true; /* the whole range is read */
	/* the slots after the head, up to the factor: one step each until
	 * they are first (what they hold waits for the slots before them) */
	if (w->launched <= w->head)
		w->launched = w->head + 1; /* the head is stepped above */
	while (!w->stopping && w->launched < w->count &&
	       w->launched - w->head < w->factor)
		par_step(&w->slots[w->launched++]);
	if (w->dirty)
		goto again;
	w->advancing = false;
	if (!w->stopping || w->inflight)
		return;
	if (w->failed && w->local_code) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", w->local_msg);
		read_fail_msg(j, w->local_code, msg);
		return;
	}
	if (w->failed) {
		struct repl_result res = w->res;
		read_step_failed(j, &res);
		return;
	}
	read_finish(j);
}

/* Starts the parallel walk of (j->pos, j->end]; false when it does not
 * apply (not a filtered scan, one range, no memory): the walk of one
 * range at a time then runs. */
static bool par_start(struct read_job *j)
{
	if (!cql_select_plan_is_filtered(j->plan) || !j->d->hooks.ring)
		return false;
	struct ring *r = j->d->hooks.ring(j->d->hooks.arg);
	size_t nt = r ? ring_token_count(r) : 0;
	if (nt < 2)
		return false;
	struct par_walk *w = calloc(1, sizeof(*w));
	struct par_slot *slots = w ? calloc(nt + 1, sizeof(*slots)) : NULL;
	if (!slots) {
		free(w);
		return false;
	}
	size_t n = 0;
	int64_t at = j->pos;
	for (size_t i = 0; i < nt && at < j->end; i++) {
		int64_t t = ring_token_at(r, i);
		if (t <= at || t >= j->end)
			continue;
		slots[n++] = (struct par_slot){.j = j, .pos = at, .end = t};
		at = t;
	}
	slots[n++] = (struct par_slot){.j = j, .pos = at, .end = j->end};
	w->slots = slots;
	w->count = n;
	w->factor = 4;
	j->par = w;
	par_advance(j); /* steps the first slot and those after it */
	return true;
}

static void read_next_range(struct read_job *j)
{
	if (j->rows >= j->budget) {
		j->read_cut = true;
		read_finish(j);
		return;
	}
	const struct ring_strategy *s;
	const struct cql_table *t = job_table(j, &s);
	if (!t) {
		read_fail_msg(j, CQL_ERR_INVALID,
			      "the table was dropped during the read");
		return;
	}
	size_t want = j->budget - j->rows;
	struct repl_range q = {.read_repair = j->read_repair,
			       .table_id = j->table_id,
			       .meta = cql_table_meta(t),
			       .strategy = s,
			       .cl = j->cl,
			       .cmd = cql_select_plan_cmd(j->plan),
			       .start = j->pos,
			       .end = j->end,
			       .max_partitions =
				       want < 1000 ? (uint32_t)want : 1000};
	repl_range_step(j->d->repl, &q, on_range, j);
}

/* snprintf(dst, cap, "%s", src) without a format parser on every read. */
static void copy_name(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);
	memcpy(dst, src, n);
	dst[n] = 0;
}

static void run_read(struct cql_data *d, const struct cql_data_request *dr)
{
	struct read_job *j = zcalloc(1, sizeof(*j));
	if (!j) {
		reply_error(dr->req, dr->info->version, dr->info->stream,
			    CQL_ERR_SERVER, "out of memory");
		return;
	}
	/* A point read's plan fits a small block (kept per thread, see
	 * arena.c); a bigger one takes more blocks. */
	arena_create(&j->a, 4096);
	j->d = d;
	j->start_us = env_mono_us(d->env);
	if (d->slow && dr->query) {
		size_t len = dr->query_len < NODE_SLOW_QUERIES_TEXT
				     ? dr->query_len
				     : NODE_SLOW_QUERIES_TEXT;
		if ((j->query = malloc(len ? len : 1))) {
			memcpy(j->query, dr->query, len);
			j->query_len = len;
		}
	}
	/* dr->table is current: the executor looked it up in this call */
	cql_schema_pin(d->schema, &j->pin);
	j->req = dr->req;
	j->version = dr->info->version;
	j->stream = dr->info->stream;
	if (dr->info->trace) {
		j->traced = true;
		memcpy(j->trace, dr->info->trace->id, 16);
	}
	j->cl = dr->params->consistency;
	const struct storage_table_meta *meta = cql_table_meta(dr->table);
	copy_name(j->keyspace, sizeof(j->keyspace), meta->keyspace);
	copy_name(j->table, sizeof(j->table), meta->name);
	memcpy(j->table_id, meta->id, 16);
	const struct cql_table_options *to = cql_table_options(dr->table);
	j->read_repair = to->read_repair_blocking;
	copy_name(j->speculative_retry, sizeof(j->speculative_retry),
		  to->speculative_retry);
	struct cql_fn_ctx fn = {.now_us = env_wall_us(d->env),
				.timeuuids = &d->timeuuids,
				.random = env_rand,
				.random_arg = d->env};
	j->plan = cql_select_plan_new(&j->a, &dr->stmt->u.select, dr->table,
				      dr->binds, dr->bind_count, &fn);
	const struct cql_query_params *qp = dr->params;
	if (!j->plan ||
	    cql_select_plan_page(j->plan, qp->page_size,
				 qp->has_paging_state ? &qp->paging_state
						      : NULL) != 0) {
		read_fail_msg(j,
			      err_code() == ERR_NOMEM ? CQL_ERR_SERVER
						      : CQL_ERR_INVALID,
			      err_msg());
		return;
	}
	j->budget = cql_select_plan_row_budget(j->plan);
	if (j->cl == REPL_CL_SERIAL || j->cl == REPL_CL_LOCAL_SERIAL) {
		if (cql_select_plan_is_scan(j->plan) ||
		    cql_select_plan_key_count(j->plan) > 1) {
			read_fail_msg(j, CQL_ERR_INVALID,
				      "SERIAL/LOCAL_SERIAL consistency may "
				      "only be requested for one partition at "
				      "a time");
			return;
		}
		j->serial = j->cl;
		j->cl = j->cl == REPL_CL_SERIAL ? REPL_CL_QUORUM
						: REPL_CL_LOCAL_QUORUM;
	}
	if (cql_select_plan_is_scan(j->plan)) {
		cql_select_plan_range(j->plan, &j->pos, &j->end);
		if (j->pos >= j->end) {
			read_finish(j);
			return;
		}
		if (!par_start(j))
			read_next_range(j);
	} else {
		j->next_key = cql_select_plan_first_key(j->plan);
		read_next_key(j);
	}
}

/* ---- truncate ------------------------------------------------------------ */

/* Every node empties the table (repl_truncate): a Void result, Unavailable
 * when a node is down, a truncate error (0x1003) on a failure or timeout. */
static void run_truncate(struct cql_data *d, const struct cql_data_request *dr)
{
	struct write_ctx *w = malloc(sizeof(*w));
	if (!w) {
		reply_error(dr->req, dr->info->version, dr->info->stream,
			    CQL_ERR_SERVER, "out of memory");
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
		run_read(d, dr);
		break;
	case CQL_STMT_TRUNCATE:
		run_truncate(d, dr);
		break;
	default:
		reply_error(dr->req, dr->info->version, dr->info->stream,
			    CQL_ERR_INVALID,
			    "this statement does not go through the data path");
	}
}

/* ---- hinted handoff ------------------------------------------------------ */

static int hook_hint(void *arg, const uint8_t host_id[16], const char *dc,
		     const uint8_t *mutation, size_t len)
{
	struct cql_data *d = arg;
	int64_t now = env_wall_us(d->env);
	if (!d->hints)
		return -1;
	/* Handoff disabled or the target down past the window: the store
	 * refuses and counts it. A datacenter without hints: not stored. */
	if (hints_should_hint(d->hints, host_id, NULL, now) &&
	    !hints_should_hint(d->hints, host_id, dc, now))
		return -1;
	return hints_store(d->hints, host_id, mutation, len, now);
}

/* The address of a host id in the current ring, or NULL. */
static const struct inet_addr *host_addr(struct cql_data *d,
					 const uint8_t host_id[16])
{
	struct ring *r = d->hooks.ring(d->hooks.arg);
	int ep = ring_endpoint_find_host_id(r, host_id);
	return ep < 0 ? NULL : &ring_endpoint_get(r, (size_t)ep)->addr;
}

struct hint_send {
	hints_done_fn done;
	void *done_arg;
};

static void hint_sent(void *arg, int status)
{
	struct hint_send *hs = arg;
	hs->done(hs->done_arg, status);
	free(hs);
}

/* Whether a hint is dropped rather than delivered: written before its
 * table was last truncated here (a truncate reaches every node, so
 * delivering it would bring truncated data back to its target, and
 * Cassandra's Hint.apply drops those older than the table's
 * truncation), or holding a value invalid for its column's type (stored
 * before values were validated: every replica refuses it, and retrying
 * it would hold up the hints behind it forever). */
static bool hint_truncated(struct cql_data *d, const uint8_t *mutation,
			   size_t len, int64_t created_us)
{
	struct storage_mutation *m = storage_mutation_decode(mutation, len);
	if (!m)
		return false; /* the target refuses it */
	int64_t at = storage_truncated_at(d->db, storage_mutation_table_id(m));
	const struct storage_table_meta *t =
		storage_table_meta_acquire(d->db, storage_mutation_table_id(m));
	bool invalid = t && storage_mutation_validate(t, m) != 0;
	storage_table_meta_unref(t);
	if (invalid)
		LOG_WARN("dropping a hint: %s", err_msg());
	storage_mutation_delete(m);
	return invalid || (at != 0 && created_us <= at);
}

static int hints_send(void *arg, const uint8_t host_id[16],
		      const uint8_t *mutation, size_t len, int64_t created_us,
		      hints_done_fn done, void *done_arg)
{
	struct cql_data *d = arg;
	if (hint_truncated(d, mutation, len, created_us)) {
		done(done_arg, 0); /* delivered: nothing left to do */
		return 0;
	}
	const struct inet_addr *to = host_addr(d, host_id);
	struct hint_send *hs = to ? malloc(sizeof(*hs)) : NULL;
	if (!hs)
		return -1;
	*hs = (struct hint_send){done, done_arg};
	if (repl_deliver(d->repl, to, mutation, len, hint_sent, hs) != 0) {
		free(hs);
		return -1;
	}
	return 0;
}

/* A hint handed over by a node leaving the ring: kept as ours, with its
 * creation time (the truncate check and the window count from it). */
static int hook_take_hint(void *arg, const uint8_t host_id[16],
			  const uint8_t *mutation, size_t len,
			  int64_t created_us)
{
	struct cql_data *d = arg;
	if (!d->hints)
		return err_set(ERR_UNAVAILABLE, "hinted handoff is off here");
	return hints_store(d->hints, host_id, mutation, len, created_us);
}

static int hand_over_send(void *arg, const uint8_t host_id[16],
			  const uint8_t *mutation, size_t len,
			  int64_t created_us, hints_done_fn done,
			  void *done_arg)
{
	struct cql_data *d = arg;
	if (hint_truncated(d, mutation, len, created_us)) {
		done(done_arg, 0); /* nothing left to do */
		return 0;
	}
	struct hint_send *hs = malloc(sizeof(*hs));
	if (!hs)
		return -1;
	*hs = (struct hint_send){done, done_arg};
	if (repl_hand_over(d->repl, &d->hand_over_to, host_id, mutation, len,
			   created_us, hint_sent, hs) != 0) {
		free(hs);
		return -1;
	}
	return 0;
}

int cql_data_hand_over_hints(struct cql_data *d, const struct inet_addr *to,
			     hints_handed_fn done, void *arg)
{
	if (!d->hints) {
		done(arg, true);
		return 0;
	}
	d->hand_over_to = *to;
	return hints_hand_over(d->hints, hand_over_send, d, done, arg);
}

struct node_cas *cql_data_cas(struct cql_data *d)
{
	return d->cas;
}

void cql_data_hand_over_cancel(struct cql_data *d)
{
	if (d->hints)
		hints_hand_over_cancel(d->hints);
}

static bool hints_alive(void *arg, const uint8_t host_id[16])
{
	struct cql_data *d = arg;
	const struct inet_addr *to = host_addr(d, host_id);
	return to && d->hooks.is_alive(d->hooks.arg, to);
}

/* Blocking hint and batchlog file work on the read workers, completions on
 * the loop. */
static void data_offload(void *arg, void (*run)(void *job),
			 void (*done)(void *job), void *job)
{
	struct cql_data *d = arg;
	workers_offload(d->workers, d->q, run, done, job);
}

void cql_data_peer_event(struct cql_data *d, const uint8_t host_id[16],
			 enum cql_data_peer_event ev)
{
	if (!d->hints)
		return;
	switch (ev) {
	case CQL_DATA_PEER_UP:
		hints_host_up(d->hints, host_id);
		break;
	case CQL_DATA_PEER_DOWN:
		hints_host_down(d->hints, host_id, env_wall_us(d->env));
		break;
	case CQL_DATA_PEER_REMOVED:
		hints_host_removed(d->hints, host_id);
		break;
	}
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
				.hint = hook_hint,
				.take_hint = hook_take_hint,
				.strategy = hook_strategy,
				.offload = data_offload,
				.trace = hook_trace,
				.arg = d};
	struct node_cas_hooks ch = {
		.ring = hook_ring, .is_alive = hook_alive, .arg = d};
	struct paxos_options po;
	paxos_options_default(&po);
	po.write_timeout_ms = o->write_timeout_ms;
	if (o->cas_contention_timeout_ms)
		po.contention_timeout_ms = o->cas_contention_timeout_ms;
	if (!(d->workers = workers_new(2, "read")) ||
	    !(d->repl = repl_new(env, o, &store_ops, d, &rh)) ||
	    !(d->cas = node_cas_new(env, &o->self, o->paxos_ballot_file, &po,
				    &store_ops, d, schema, &ch)))
		goto fail;
	if (ho) {
		struct hints_options h = *ho;
		h.send = hints_send;
		h.alive = hints_alive;
		h.hook_arg = d;
		h.offload = data_offload;
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
