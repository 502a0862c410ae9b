/*
 * The store repair/ sees: this node's storage engine, scans and repair-state
 * changes on the repair worker so that validation never blocks the loop or
 * the read workers (see node_repair.c).
 */
#define LOG_MODULE "repair"
#include "node/node_repair_internal.h"

#include "common/log.h"
#include "common/loopq.h"
#include "common/ratelimit.h"
#include "common/workers.h"

#include <inttypes.h>
#include <stdlib.h>

struct scan_job {
	struct work work;
	struct loopq_item item;
	struct loopq *q;
	atomic_bool *stopping;
	struct ratelimit *budget; /* compaction_throughput, with compaction */
	struct storage *db;
	uint8_t table_id[16];
	int64_t start, end;
	bool pending; /* only the data pending for `session` */
	uint8_t session[16];
	repair_scan_each_fn each;
	storage_done_fn done;
	void *arg;
	int status;
	enum err_code code;
};

static void scan_run(struct work *w)
{
	struct scan_job *j = (struct scan_job *)w;
	struct storage_read_cmd cmd = {.with_static = true};
	if (j->pending)
		cmd.pending_repair = j->session;
	struct storage_scan *s =
		storage_scan_open(j->db, j->table_id, j->start, j->end, &cmd);
	int rc = s ? 0 : -1;
	struct storage_mutation *m;
	while (s && (rc = storage_scan_next_fragment(s, &m)) == 1) {
		if (atomic_load(j->stopping)) {
			storage_mutation_delete(m);
			err_set(ERR_CLOSED, "the node is shutting down");
			rc = -1;
			break;
		}
		rc = j->each(j->arg, m);
		size_t bytes = storage_mutation_size(m);
		storage_mutation_delete(m);
		ratelimit_pay(j->budget, bytes);
		if (rc) {
			rc = -1;
			break;
		}
	}
	storage_scan_close(s);
	j->status = rc < 0 ? -1 : 0;
	j->code = rc < 0 ? err_code() : ERR_NONE;
	loopq_post(j->q, &j->item);
}

static void scan_done(struct loopq_item *it)
{
	struct scan_job *j =
		(struct scan_job *)((char *)it -
				    offsetof(struct scan_job, item));
	j->done(j->arg, j->status, j->code);
	free(j);
}

static void scan_submit(struct node_repair *nr, const uint8_t table_id[16],
			const uint8_t *session, int64_t start, int64_t end,
			repair_scan_each_fn each, storage_done_fn done,
			void *arg)
{
	struct scan_job *j = calloc(1, sizeof(*j));
	if (!j) {
		done(arg, -1, ERR_NOMEM);
		return;
	}
	if (session) {
		j->pending = true;
		memcpy(j->session, session, 16);
	}
	j->q = nr->q;
	j->stopping = &nr->stopping;
	j->budget = storage_throughput_budget(nr->db);
	j->db = nr->db;
	memcpy(j->table_id, table_id, 16);
	j->start = start;
	j->end = end;
	j->each = each;
	j->done = done;
	j->arg = arg;
	j->work.run = scan_run;
	j->item.fn = scan_done;
	workers_submit(nr->workers, &j->work);
}

static void store_scan(void *s, const uint8_t table_id[16], int64_t start,
		       int64_t end, repair_scan_each_fn each,
		       storage_done_fn done, void *arg)
{
	scan_submit(s, table_id, NULL, start, end, each, done, arg);
}

static void store_scan_pending(void *s, const uint8_t table_id[16],
			       const uint8_t session[16], int64_t start,
			       int64_t end, repair_scan_each_fn each,
			       storage_done_fn done, void *arg)
{
	scan_submit(s, table_id, session, start, end, each, done, arg);
}

/* Incremental repair's storage work (anticompaction, repair states,
 * pending ingest) on the repair worker, never the loop. */
struct state_job {
	struct work work;
	struct loopq_item item;
	struct loopq *q;
	struct storage *db;
	enum { SJ_PREPARE, SJ_FINISH, SJ_INGEST } kind;
	uint8_t table_id[16], session[16];
	struct storage_token_range *ranges;
	size_t nranges;
	int64_t repaired_at;
	struct storage_mutation **m;
	size_t nm;
	uint64_t *count, got;
	storage_done_fn done;
	void *arg;
	int status;
	enum err_code code;
};

static void state_run(struct work *w)
{
	struct state_job *j = (struct state_job *)w;
	uint64_t marked = 0, split = 0;
	int rc;
	switch (j->kind) {
	case SJ_PREPARE:
		rc = storage_repair_anticompact(j->db, j->table_id, j->ranges,
						j->nranges, j->session, &marked,
						&split);
		j->got = marked + split;
		if (!rc)
			LOG_AT(LOG_LEVEL_INFO,
			       "incremental repair: %" PRIu64
			       " SSTables marked pending, %" PRIu64
			       " anticompacted",
			       marked, split);
		break;
	case SJ_FINISH:
		rc = storage_repair_set_state(j->db, j->table_id, j->session,
					      j->repaired_at, &j->got);
		break;
	default:
		rc = storage_repair_ingest(
			j->db, j->table_id,
			(const struct storage_mutation *const *)j->m, j->nm,
			j->session);
		break;
	}
	j->status = rc ? -1 : 0;
	j->code = rc ? err_code() : ERR_NONE;
	loopq_post(j->q, &j->item);
}

static void state_done(struct loopq_item *it)
{
	struct state_job *j =
		(struct state_job *)((char *)it -
				     offsetof(struct state_job, item));
	if (j->count)
		*j->count = j->got;
	for (size_t i = 0; i < j->nm; i++)
		storage_mutation_delete(j->m[i]);
	free(j->m);
	free(j->ranges);
	j->done(j->arg, j->status, j->code);
	free(j);
}

static struct state_job *state_new(struct node_repair *nr,
				   const uint8_t table_id[16],
				   const uint8_t session[16],
				   storage_done_fn done, void *arg)
{
	struct state_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->q = nr->q;
	j->db = nr->db;
	memcpy(j->table_id, table_id, 16);
	memcpy(j->session, session, 16);
	j->done = done;
	j->arg = arg;
	j->work.run = state_run;
	j->item.fn = state_done;
	return j;
}

static void store_prepare(void *s, const uint8_t table_id[16],
			  const struct storage_token_range *ranges, size_t n,
			  const uint8_t session[16], uint64_t *marked,
			  storage_done_fn done, void *arg)
{
	struct node_repair *nr = s;
	struct state_job *j = state_new(nr, table_id, session, done, arg);
	if (j)
		j->ranges = malloc((n + 1) * sizeof(*ranges));
	if (!j || !j->ranges) {
		free(j);
		done(arg, -1, ERR_NOMEM);
		return;
	}
	memcpy(j->ranges, ranges, n * sizeof(*ranges));
	j->nranges = n;
	j->kind = SJ_PREPARE;
	j->count = marked;
	workers_submit(nr->workers, &j->work);
}

static void store_finish(void *s, const uint8_t table_id[16],
			 const uint8_t session[16], int64_t repaired_at,
			 uint64_t *count, storage_done_fn done, void *arg)
{
	struct node_repair *nr = s;
	struct state_job *j = state_new(nr, table_id, session, done, arg);
	if (!j) {
		done(arg, -1, ERR_NOMEM);
		return;
	}
	j->kind = SJ_FINISH;
	j->repaired_at = repaired_at;
	j->count = count;
	workers_submit(nr->workers, &j->work);
}

static void store_apply_pending(void *s, const uint8_t table_id[16],
				const uint8_t session[16],
				struct storage_mutation **m, size_t n,
				storage_done_fn done, void *arg)
{
	struct node_repair *nr = s;
	struct state_job *j = state_new(nr, table_id, session, done, arg);
	if (!j) {
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(m[i]);
		free(m);
		done(arg, -1, ERR_NOMEM);
		return;
	}
	j->kind = SJ_INGEST;
	j->m = m;
	j->nm = n;
	workers_submit(nr->workers, &j->work);
}

static int store_apply(void *s, const struct storage_mutation *m,
		       storage_done_fn done, void *arg)
{
	struct node_repair *nr = s;
	return storage_apply(nr->db, m, done, arg);
}

static const struct storage_table_meta *store_meta(void *s,
						   const uint8_t table_id[16])
{
	struct node_repair *nr = s;
	return storage_table_meta_acquire(nr->db, table_id);
}

/* Tree folding and encoding on the repair worker, completion on the loop. */
static void store_offload(void *s, void (*run)(void *job),
			  void (*done)(void *job), void *job)
{
	struct node_repair *nr = s;
	workers_offload(nr->workers, nr->q, run, done, job);
}

const struct repair_store_ops node_repair_store_ops = {
	.apply = store_apply,
	.scan = store_scan,
	.meta = store_meta,
	.offload = store_offload,
	.prepare = store_prepare,
	.finish = store_finish,
	.scan_pending = store_scan_pending,
	.apply_pending = store_apply_pending,
};
