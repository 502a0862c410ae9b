/* Reads: by key, range scans and the parallel range walk (see
 * cql_data_internal.h). */
#define LOG_MODULE "node"
#include "node/cql_data_internal.h"

#include "client/exec/select.h"
#include "common/log.h"
#include "common/murmur3.h"
#include "common/zalloc.h"
#include "node/cql_cas.h"
#include "node/node_trace.h"
#include "node/slow_queries.h"

#include <stdio.h>

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
	/* a step's rows held for replica filtering protection passed this
	 * cached_rows_warn_threshold (0: none) */
	uint64_t rfp_warn;
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
	/* An indexed scan: the restriction its replicas answer with (their
	 * index's candidates only; borrows from the plan and `six`). */
	bool has_index;
	struct cql_select_index six, six2;
	struct repl_index_expr ix2; /* ix.and_ix: a second index, or unused */
	struct repl_index_expr ix;
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

/* Cassandra's replica filtering protection message for the query past
 * `threshold`, cached_replica_rows_`which`_threshold ("warn", "fail"). */
static void rfp_message(struct read_job *j, uint64_t threshold,
			const char *which, char *msg, size_t cap)
{
	char shape[512];
	query_shape(j, shape, sizeof(shape));
	snprintf(msg, cap,
		 "Replica filtering protection has cached over %llu rows "
		 "during query %s. (See 'cached_replica_rows_%s_threshold' "
		 "in cassandra.yaml.)",
		 (unsigned long long)threshold, shape, which);
}

/* Cassandra's replica filtering protection warning (ClientWarn, its log
 * and the trace), once a query. */
static void rfp_warning(struct read_job *j, struct buf *b)
{
	if (!j->rfp_warn)
		return;
	char msg[768];
	rfp_message(j, j->rfp_warn, "warn", msg, sizeof(msg));
	LOG_WARN("%s", msg);
	if (j->traced && j->d->tracer)
		node_trace_remote_event(
			j->d->tracer, j->trace, "Native-Transport-Requests-1",
			(int64_t)(env_mono_us(j->d->env) - j->start_us), msg);
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
	if (b.len >= 5 && b.data[4] == CQL_OP_RESULT) {
		tombstone_warning(j, &b);
		rfp_warning(j, &b);
	}
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
	cql_data_reply_result(j->req, j->version, j->stream, res, NULL);
	read_job_free(j);
}

static void read_fail_msg(struct read_job *j, uint32_t code, const char *msg)
{
	cql_data_reply_error(j->req, j->version, j->stream, code, msg);
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
	*s = cql_data_strategy_of(j->d, t);
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
	if (res->outcome == REPL_OVERLOADED && res->rfp_threshold) {
		/* Cassandra's OverloadedException from its replica filtering
		 * protection, with the query */
		char msg[768];
		rfp_message(j, res->rfp_threshold, "fail", msg, sizeof(msg));
		LOG_ERROR("%s", msg);
		read_fail_msg(j, CQL_ERR_OVERLOADED, msg);
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
	if (res->rfp_threshold)
		j->rfp_warn = res->rfp_threshold;
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

/* Cassandra's RangeCommandIterator line after each batch of range
 * requests it sends: "Submitted N concurrent range requests". */
static void trace_submitted(struct read_job *j, size_t n)
{
	if (!j->traced || !n || !j->d->tracer)
		return;
	char msg[64];
	snprintf(msg, sizeof(msg), "Submitted %zu concurrent range requests",
		 n);
	node_trace_remote_event(
		j->d->tracer, j->trace, "Native-Transport-Requests-1",
		(int64_t)(env_mono_us(j->d->env) - j->start_us), msg);
}

/* ---- parallel range walk ------------------------------------------------- */

/*
 * A filtered scan (ALLOW FILTERING, or a restriction served by a
 * secondary index) may read many partitions to send few rows; one vnode
 * range per round trip makes a selective query over a cluster take one
 * round trip per vnode range. The walk splits (pos, end] into pieces:
 * vnode ranges, or for an indexed scan (whose replicas answer with few
 * partitions) runs of them with the same replicas (Cassandra's range
 * merger: with RF 3 on 3 nodes the whole ring is one piece, read in one
 * step; an unindexed scan keeps its vnode ranges, read by several
 * workers at once). It reads up to `factor` pieces at
 * once: 4 at first, then Cassandra's concurrency factor from hits (after
 * every piece used up: with no row found yet, as many as allowed; else
 * enough pieces to fill what is left of the page at the rows per piece
 * seen so far), at most PAR_MAX. Answers are used in token order: a
 * piece answered before the ones ahead of it keeps its fragments until
 * they are done, and reads nothing more meanwhile (at most factor steps
 * of fragments are held). Once the page is full, the steps in flight are
 * waited for and their fragments dropped; an error of any step answers
 * the request once no step is in flight.
 */
#define PAR_MAX   32
#define PAR_FIRST 4 /* pieces read at once at first */

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

static bool par_step(struct par_slot *sl);
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

/* One range step of the job's read over (start, end], at most `want`
 * partitions (1000 at the most). */
static struct repl_range range_step(const struct read_job *j,
				    const struct cql_table *t,
				    const struct ring_strategy *s,
				    int64_t start, int64_t end, size_t want)
{
	return (struct repl_range){
		.read_repair = j->read_repair,
		.table_id = j->table_id,
		.meta = cql_table_meta(t),
		.strategy = s,
		.cl = j->cl,
		.cmd = cql_select_plan_cmd(j->plan),
		.start = start,
		.end = end,
		.max_partitions = want < 1000 ? (uint32_t)want : 1000,
		.trace_session = j->traced ? j->trace : NULL,
		.index = j->has_index ? &j->ix : NULL,
		/* replicas answer an indexed scan with few partitions: runs
		 * of ranges with the same replicas go in one step */
		.merge = j->has_index};
}

/* Starts the slot's next step; false when it could not. */
static bool par_step(struct par_slot *sl)
{
	struct read_job *j = sl->j;
	struct par_walk *w = j->par;
	const struct ring_strategy *s;
	const struct cql_table *t = job_table(j, &s);
	if (!t) {
		par_fail_local(w, CQL_ERR_INVALID,
			       "the table was dropped during the read");
		return false;
	}
	size_t want = j->budget > j->rows ? j->budget - j->rows : 1;
	struct repl_range q = range_step(j, t, s, sl->pos, sl->end, want);
	sl->busy = true;
	w->inflight++;
	repl_range_step(j->d->repl, &q, on_par_range, sl);
	return true;
}

/* Cassandra's computeConcurrencyFactor, counted in pieces: after w->head
 * pieces used up, with no row found as many pieces as are left (at most
 * PAR_MAX); else the pieces that should fill the rest of the page at the
 * rows per piece seen so far. */
static void par_factor(struct read_job *j)
{
	struct par_walk *w = j->par;
	size_t left = w->count - w->head;
	size_t max = left < PAR_MAX ? left : PAR_MAX;
	if (max < 1)
		max = 1;
	if (j->rows == 0 || w->head == 0) {
		w->factor = max;
		return;
	}
	size_t remaining = j->budget > j->rows ? j->budget - j->rows : 0;
	double per_piece = (double)j->rows / (double)w->head;
	double f = (double)remaining / per_piece + 0.5;
	w->factor = f < 1 ? 1 : f > (double)max ? max : (size_t)f;
}

/* Uses what the first slots hold, in token order, then starts steps up to
 * the factor; answers once the page is full or the range is read and no
 * step is in flight. */
static void par_advance(struct read_job *j)
{
	struct par_walk *w = j->par;
	w->advancing = true;
	size_t sent;
again:
	w->dirty = false;
	sent = 0; /* the steps this pass starts: one batch */
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
				sent += par_step(sl);
			break;
		}
		w->head++;
		par_factor(j);
	}
	if (!w->stopping && w->head == w->count)
		w->stopping = true; /* the whole range is read */
	/* the slots after the head, up to the factor: one step each until
	 * they are first (what they hold waits for the slots before them) */
	if (w->launched <= w->head)
		w->launched = w->head + 1; /* the head is stepped above */
	while (!w->stopping && w->launched < w->count &&
	       w->launched - w->head < w->factor)
		sent += par_step(&w->slots[w->launched++]);
	trace_submitted(j, sent);
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

/* The ring's token count when the parallel walk applies to the job (a
 * filtered scan over a ring of several tokens), else 0. */
static size_t par_tokens(struct read_job *j, const struct ring_strategy **s)
{
	if (!cql_select_plan_is_filtered(j->plan) || !j->d->hooks.ring)
		return 0;
	struct ring *r = j->d->hooks.ring(j->d->hooks.arg);
	size_t nt = r ? ring_token_count(r) : 0;
	if (nt < 2 || !job_table(j, s))
		return 0;
	return nt;
}

/* Starts the parallel walk of (j->pos, j->end]; false when it does not
 * apply (not a filtered scan, one range, no memory): the walk of one
 * range at a time then runs. */
static bool par_start(struct read_job *j)
{
	const struct ring_strategy *s;
	size_t nt = par_tokens(j, &s);
	if (!nt)
		return false;
	struct par_walk *w = calloc(1, sizeof(*w));
	struct par_slot *slots = w ? calloc(nt + 1, sizeof(*slots)) : NULL;
	if (!slots) {
		free(w);
		return false;
	}
	/* pieces: vnode ranges, or for an indexed scan runs of them with
	 * the same replicas */
	size_t n = 0;
	int64_t at = j->pos;
	while (at < j->end && n < nt) {
		int64_t e = repl_range_piece_end(j->d->repl, s, at, j->end,
						 j->has_index);
		if (e <= at)
			break;
		slots[n++] = (struct par_slot){.j = j, .pos = at, .end = e};
		at = e;
	}
	if (at < j->end)
		slots[n++] =
			(struct par_slot){.j = j, .pos = at, .end = j->end};
	w->slots = slots;
	w->count = n;
	w->factor = PAR_FIRST;
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
	struct repl_range q =
		range_step(j, t, s, j->pos, j->end, j->budget - j->rows);
	/* one request at a time (its answer may come before the call
	 * returns, and end the job) */
	trace_submitted(j, 1);
	repl_range_step(j->d->repl, &q, on_range, j);
}

/* A float as Java's Float.toString writes it (the shortest digits that
 * read back as the same float, always with a '.'): Cassandra's trace
 * events print floats so. */
static void java_float(double v, char *out, size_t cap)
{
	float f = (float)v;
	for (int p = 1; p <= 9; p++) {
		snprintf(out, cap, "%.*g", p, (double)f);
		if ((float)strtod(out, NULL) == f)
			break;
	}
	if (!strpbrk(out, ".en"))
		strncat(out, ".0", cap - strlen(out) - 1);
}

/* Cassandra's RangeCommands trace before the first range request:
 * "Submitting range requests on N ranges with a concurrency of C (R rows
 * per range expected)". N: the vnode ranges (j->pos, j->end] crosses;
 * C: how many of them are read at once at first (the parallel walk's
 * first factor, else 1); R: Cassandra's estimate, this node's
 * partitions per token of a node per replica, less 10%. An indexed scan
 * says no estimate, as Cassandra's SAI query plans (no initial
 * estimate). */
static void trace_submitting(struct read_job *j,
			     const struct cql_request_info *info)
{
	const struct ring_strategy *s;
	if (!job_table(j, &s) || !j->d->hooks.ring)
		return;
	struct ring *r = j->d->hooks.ring(j->d->hooks.arg);
	size_t nt = r ? ring_token_count(r) : 0;
	size_t ranges = 0;
	for (int64_t at = j->pos; at < j->end && ranges <= nt; ranges++) {
		int64_t e =
			repl_range_piece_end(j->d->repl, s, at, j->end, false);
		if (e <= at) {
			ranges++;
			break;
		}
		at = e;
	}
	const struct ring_strategy *ps;
	size_t conc = par_tokens(j, &ps) ? PAR_FIRST : 1;
	if (conc > ranges)
		conc = ranges ? ranges : 1;
	if (j->has_index) {
		cql_trace_event(info,
				"Submitting range requests on %zu ranges with "
				"a concurrency of %zu",
				ranges, conc);
		return;
	}
	int rf = 0;
	size_t ndc = ring_strategy_dc_count(s);
	for (size_t i = 0; i < ndc; i++) {
		int x = 0;
		ring_strategy_dc_at(s, i, &x);
		rf += x;
	}
	if (!ndc)
		rf = ring_strategy_rf(s, NULL);
	size_t eps = r ? ring_endpoint_count(r) : 0;
	double per_node = eps && nt ? (double)nt / (double)eps : 1;
	struct storage_stats st;
	double parts = storage_stats(j->d->db, j->table_id, &st) == 0
			       ? (double)st.estimated_partitions
			       : 0;
	double per_range = parts / per_node / (rf > 0 ? rf : 1);
	per_range -= per_range * 0.1;
	char est[32];
	java_float(per_range, est, sizeof(est));
	cql_trace_event(info,
			"Submitting range requests on %zu ranges with a "
			"concurrency of %zu (%s rows per range expected)",
			ranges, conc, est);
}

/* snprintf(dst, cap, "%s", src) without a format parser on every read. */
static void copy_name(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);
	memcpy(dst, src, n);
	dst[n] = 0;
}

void cql_data_run_read(struct cql_data *d, const struct cql_data_request *dr)
{
	struct read_job *j = zcalloc(1, sizeof(*j));
	if (!j) {
		cql_data_reply_error(dr->req, dr->info->version,
				     dr->info->stream, CQL_ERR_SERVER,
				     "out of memory");
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
				.random = cql_data_env_rand,
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
		if (cql_select_plan_index(j->plan, &j->six)) {
			j->has_index = true;
			j->ix = (struct repl_index_expr){.name = j->six.name,
							 .vals = j->six.vals,
							 .n_vals =
								 j->six.n_vals,
							 .range = j->six.range,
							 .lo = j->six.lo,
							 .hi = j->six.hi};
			if (cql_select_plan_index_and(j->plan, &j->six,
						      &j->six2)) {
				j->ix2 = (struct repl_index_expr){
					.name = j->six2.name,
					.vals = j->six2.vals,
					.n_vals = j->six2.n_vals,
					.range = j->six2.range,
					.lo = j->six2.lo,
					.hi = j->six2.hi};
				j->ix.and_ix = &j->ix2;
			}
		}
		if (j->pos >= j->end) {
			read_finish(j);
			return;
		}
		cql_trace_event(dr->info, "Computing ranges to query");
		if (j->traced)
			trace_submitting(j, dr->info);
		if (!par_start(j))
			read_next_range(j);
	} else {
		j->next_key = cql_select_plan_first_key(j->plan);
		read_next_key(j);
	}
}
