/*
 * Local data path: writes to and reads from this node's storage engine
 * (see data_local.h).
 */
#define LOG_MODULE "client"
#include "client/data_local.h"

#include "client/dml.h"
#include "client/select.h"
#include "common/err.h"
#include "common/log.h"
#include "common/workers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cql_local {
	struct storage *db;
	struct env *env;
	struct loopq *q;
	struct workers *workers;
	struct cql_timeuuid_gen timeuuids;
	int64_t last_ts;
};

/* ---- storage completions onto the loop ----------------------------------- */

struct posted {
	struct loopq_item item;
	storage_done_fn fn;
	void *arg;
	int status;
	enum err_code code;
};

static void posted_run(struct loopq_item *it)
{
	struct posted *p = (struct posted *)it;
	p->fn(p->arg, p->status, p->code);
	free(p);
}

void cql_storage_post(void *post_arg, storage_done_fn fn, void *arg, int status,
		      enum err_code code)
{
	struct posted *p = malloc(sizeof(*p));
	if (!p) {
		/* Cannot defer: run here rather than lose the ack. */
		fn(arg, -1, ERR_NOMEM);
		return;
	}
	*p = (struct posted){.item.fn = posted_run,
			     .fn = fn,
			     .arg = arg,
			     .status = status,
			     .code = code};
	loopq_post(post_arg, &p->item);
}

/* ---- lifecycle ----------------------------------------------------------- */

struct cql_local *cql_local_new(struct storage *db, struct env *env,
				struct loopq *q, int read_threads)
{
	struct cql_local *l = calloc(1, sizeof(*l));
	if (!l) {
		err_set(ERR_NOMEM, "cannot allocate the data path");
		return NULL;
	}
	l->db = db;
	l->env = env;
	l->q = q;
	l->workers = workers_new(read_threads, "read");
	if (!l->workers) {
		free(l);
		return NULL;
	}
	cql_timeuuid_gen_init(&l->timeuuids, env_random(env));
	return l;
}

void cql_local_stop(struct cql_local *l)
{
	workers_delete(l->workers);
	l->workers = NULL;
}

void cql_local_delete(struct cql_local *l)
{
	if (!l)
		return;
	if (l->workers)
		cql_local_stop(l);
	free(l);
}

static uint64_t env_rand(void *arg)
{
	return env_random(arg);
}

/* ---- writes -------------------------------------------------------------- */

struct write_op {
	struct cql_request *req;
	uint8_t version;
	int16_t stream;
	uint16_t consistency;
	int pending;
	int failed;
	char msg[200];
};

static void write_finish(struct write_op *w)
{
	struct buf b;
	buf_init(&b);
	if (w->failed)
		cql_encode_write_failure(&b, w->version, w->stream, w->msg,
					 w->consistency, 0, 1, 1, "SIMPLE");
	else
		cql_encode_result_void(&b, w->version, w->stream);
	cql_request_reply(w->req, b.data, b.len);
	buf_free(&b);
	free(w);
}

static void write_done(void *arg, int status, enum err_code code)
{
	struct write_op *w = arg;
	if (status != 0 && !w->failed) {
		w->failed = 1;
		snprintf(w->msg, sizeof(w->msg),
			 "write failed on this node: %s", err_code_name(code));
	}
	if (--w->pending == 0)
		write_finish(w);
}

static void reply_now(const struct cql_data_request *dr, uint32_t code,
		      const char *msg)
{
	struct buf b;
	buf_init(&b);
	cql_encode_error(&b, dr->info->version, dr->info->stream, code, msg);
	cql_request_reply(dr->req, b.data, b.len);
	buf_free(&b);
}

int cql_data_build_writes(const struct cql_data_request *dr,
			  const struct cql_write_ctx *ctx,
			  struct cql_mutations *all,
			  const struct cql_table ***tables)
{
	struct cql_batch_item one = {dr->stmt, dr->table, dr->binds,
				     dr->bind_count, NULL};
	const struct cql_batch_item *items = dr->stmt ? &one : dr->batch;
	size_t n = dr->stmt ? 1 : dr->batch_count;
	*all = (struct cql_mutations){NULL, 0};
	const struct cql_table **tabs = NULL;
	for (size_t i = 0; i < n; i++) {
		struct cql_mutations muts;
		if (cql_dml_build(items[i].stmt, items[i].table, items[i].binds,
				  items[i].bind_count, ctx, &muts) != 0)
			goto fail;
		struct storage_mutation **grown =
			realloc(all->items,
				(all->count + muts.count + 1) * sizeof(*grown));
		if (grown)
			all->items = grown;
		const struct cql_table **tgrown =
			grown && tables
				? realloc(tabs, (all->count + muts.count + 1) *
							sizeof(*tgrown))
				: NULL;
		if (tgrown)
			tabs = tgrown;
		if (!grown || (tables && !tgrown)) {
			cql_mutations_free(&muts);
			err_set(ERR_NOMEM, "out of memory");
			goto fail;
		}
		memcpy(all->items + all->count, muts.items,
		       muts.count * sizeof(*grown));
		for (size_t k = 0; tables && k < muts.count; k++)
			tabs[all->count + k] = items[i].table;
		all->count += muts.count;
		free(muts.items);
	}
	if (tables)
		*tables = tabs;
	return 0;
fail:
	cql_mutations_free(all);
	free(tabs);
	return -1;
}

int64_t cql_data_timestamp(const struct cql_data_request *dr, int64_t *last,
			   int64_t now_us)
{
	if (!dr->stmt && dr->batch_timestamp != INT64_MIN)
		return dr->batch_timestamp;
	if (dr->params->has_timestamp)
		return dr->params->timestamp;
	*last = now_us > *last ? now_us : *last + 1;
	return *last;
}

/* Builds the mutations of one write (or every write of a batch, with one
 * timestamp) and applies them; the client hears back once storage has
 * acknowledged every one. */
static void run_write(struct cql_local *l, const struct cql_data_request *dr)
{
	int64_t now = env_wall_us(l->env);
	struct cql_fn_ctx fn = {.now_us = now,
				.timeuuids = &l->timeuuids,
				.random = env_rand,
				.random_arg = l->env};
	struct cql_write_ctx ctx = {
		.timestamp = cql_data_timestamp(dr, &l->last_ts, now),
		.now_sec = now / 1000000,
		.fn = &fn};
	struct cql_mutations all;
	if (cql_data_build_writes(dr, &ctx, &all, NULL) != 0) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		reply_now(dr,
			  err_code() == ERR_NOMEM ? CQL_ERR_SERVER
						  : CQL_ERR_INVALID,
			  msg);
		return;
	}
	struct write_op *w = calloc(1, sizeof(*w));
	if (!w) {
		cql_mutations_free(&all);
		reply_now(dr, CQL_ERR_SERVER, "out of memory");
		return;
	}
	*w = (struct write_op){.req = dr->req,
			       .version = dr->info->version,
			       .stream = dr->info->stream,
			       .consistency = dr->params->consistency,
			       .pending = 1};
	for (size_t i = 0; i < all.count; i++) {
		w->pending++;
		if (storage_apply(l->db, all.items[i], write_done, w) != 0) {
			write_done(w, -1, err_code());
			LOG_WARN("write refused: %s", err_msg());
		}
	}
	cql_mutations_free(&all);
	if (--w->pending == 0)
		write_finish(w);
}

/* ---- reads --------------------------------------------------------------- */

struct read_job {
	struct work work;
	struct loopq_item done;
	struct cql_local *l;
	struct cql_request *req;
	uint8_t version;
	int16_t stream;
	uint16_t consistency;
	struct arena a;
	struct cql_select_plan *plan;
	struct storage_result **results;
	size_t count, cap;
	int status;
	bool read_cut; /* the reads stopped at the budget */
	enum err_code code;
	char msg[ERR_MSG_MAX];
};

static int keep(struct read_job *j, struct storage_result *r)
{
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
	j->results[j->count++] = r;
	return 0;
}

/* Worker thread: the storage reads. */
static void read_run(struct work *wk)
{
	struct read_job *j = (struct read_job *)wk;
	const struct storage_read_cmd *tmpl = cql_select_plan_cmd(j->plan);
	const uint8_t *id = cql_select_plan_table_id(j->plan);
	size_t budget = cql_select_plan_row_budget(j->plan), rows = 0;
	int rc = 0;
	if (cql_select_plan_is_scan(j->plan)) {
		int64_t start, end;
		cql_select_plan_range(j->plan, &start, &end);
		struct storage_scan *s =
			start < end ? storage_scan_open(j->l->db, id, start,
							end, tmpl)
				    : NULL;
		rc = start < end && !s ? -1 : 0;
		struct storage_result *r;
		while (s && rc == 0 && rows < budget &&
		       (rc = storage_scan_next(s, &r)) == 1) {
			rows += cql_select_plan_rows_new(j->plan, r, j->count);
			rc = keep(j, r);
		}
		if (rc == 1)
			rc = 0;
		storage_scan_close(s);
	} else {
		for (size_t i = cql_select_plan_first_key(j->plan);
		     rc == 0 && rows < budget &&
		     i < cql_select_plan_key_count(j->plan);
		     i++) {
			struct slice key = cql_select_plan_key(j->plan, i);
			struct storage_read_cmd cmd = *tmpl;
			struct storage_result *r;
			cmd.key = key.ptr;
			cmd.key_len = key.len;
			rc = storage_read(j->l->db, id, &cmd, &r);
			if (rc == 0) {
				rows += cql_select_plan_rows_new(j->plan, r,
								 j->count);
				rc = keep(j, r);
			}
		}
	}
	j->read_cut = rows >= budget;
	if (rc != 0) {
		j->status = -1;
		j->code = err_code();
		snprintf(j->msg, sizeof(j->msg), "%s", err_msg());
	}
	loopq_post(j->l->q, &j->done);
}

/* Loop thread: encode and answer. */
static void read_done(struct loopq_item *it)
{
	struct read_job *j =
		(struct read_job *)((char *)it -
				    offsetof(struct read_job, done));
	struct buf b;
	buf_init(&b);
	if (j->status != 0)
		cql_encode_read_failure(&b, j->version, j->stream, j->msg,
					j->consistency, 0, 1, 1, false);
	else if (cql_select_encode(j->plan, j->results, j->count, j->read_cut,
				   env_wall_us(j->l->env) / 1000000, j->version,
				   j->stream, &b) != 0)
		cql_encode_error(&b, j->version, j->stream,
				 err_code() == ERR_INVALID ? CQL_ERR_INVALID
							   : CQL_ERR_SERVER,
				 err_msg());
	cql_request_reply(j->req, b.data, b.len);
	buf_free(&b);
	for (size_t i = 0; i < j->count; i++)
		storage_result_delete(j->results[i]);
	free(j->results);
	arena_destroy(&j->a);
	free(j);
}

static void run_read(struct cql_local *l, const struct cql_data_request *dr)
{
	struct read_job *j = calloc(1, sizeof(*j));
	if (!j) {
		reply_now(dr, CQL_ERR_SERVER, "out of memory");
		return;
	}
	arena_create(&j->a, 0);
	j->plan = cql_select_plan_new(&j->a, &dr->stmt->u.select, dr->table,
				      dr->binds, dr->bind_count);
	const struct cql_query_params *qp = dr->params;
	if (!j->plan ||
	    cql_select_plan_page(j->plan, qp->page_size,
				 qp->has_paging_state ? &qp->paging_state
						      : NULL) != 0) {
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		uint32_t code = err_code() == ERR_NOMEM ? CQL_ERR_SERVER
							: CQL_ERR_INVALID;
		arena_destroy(&j->a);
		free(j);
		reply_now(dr, code, msg);
		return;
	}
	j->l = l;
	j->req = dr->req;
	j->version = dr->info->version;
	j->stream = dr->info->stream;
	j->consistency = dr->params->consistency;
	j->work.run = read_run;
	j->done.fn = read_done;
	workers_submit(l->workers, &j->work);
}

void cql_local_data(void *arg, const struct cql_data_request *dr)
{
	struct cql_local *l = arg;
	if (!dr->stmt) {
		run_write(l, dr);
		return;
	}
	switch (dr->stmt->kind) {
	case CQL_STMT_INSERT:
	case CQL_STMT_UPDATE:
	case CQL_STMT_DELETE:
		run_write(l, dr);
		break;
	case CQL_STMT_SELECT:
		run_read(l, dr);
		break;
	default:
		reply_now(dr, CQL_ERR_INVALID,
			  "TRUNCATE is not supported by Cassini yet");
	}
}
