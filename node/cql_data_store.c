/* The local replica: storage writes, reads and scans on workers (see
 * cql_data_internal.h). */
#define LOG_MODULE "node"
#include "node/cql_data_internal.h"

#include "common/log.h"
#include "common/workers.h"

#include <stdlib.h>

/* ---- the local replica: storage, reads on workers ------------------------ */

struct store_job {
	struct work work;
	struct loopq_item done_item;
	struct cql_data *d;
	uint8_t table_id[16];
	struct arena a;
	struct storage_read_cmd cmd;
	struct storage_read_stats stats;      /* the worker's: cmd.stats */
	struct storage_read_stats *stats_out; /* the caller's, or NULL */
	bool scan;
	int64_t start, end;
	uint32_t max;
	/* an indexed scan: only the candidates of `ix` (in `a`) */
	bool indexed;
	struct repl_index_expr ix;
	struct storage_index_bound bounds[2];
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

/* Candidates asked of the index at a time: about the step's partitions
 * (docs/indexes.md, "Indexed range reads"). */
#define INDEX_PAGE_MIN 64
#define INDEX_PAGE_MAX 4096

/* The candidates of index restriction `ix` in (start, end] after the
 * page's position, at most about page->limit: one lookup, or the union
 * of one per value. 0, or -1 with err set (ERR_UNSUPPORTED, ERR_INVALID:
 * the index cannot answer here). */
static int index_cands(struct store_job *j, const struct repl_index_expr *ix,
		       const struct storage_index_page *page,
		       struct storage_index_keys *out)
{
	memset(out, 0, sizeof(*out));
	if (ix->range)
		return storage_index_candidates_range(
			j->d->db, j->table_id, ix->name, ix->lo, ix->hi,
			j->start, j->end, page, out);
	if (ix->n_vals == 1)
		return storage_index_candidates(j->d->db, j->table_id, ix->name,
						&ix->vals[0], 1, j->start,
						j->end, page, out);
	struct storage_index_keys keys[REPL_INDEX_MAX_VALUES];
	size_t nkeys = 0;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < ix->n_vals; i++) {
		rc = storage_index_candidates(j->d->db, j->table_id, ix->name,
					      &ix->vals[i], 1, j->start, j->end,
					      page, &keys[i]);
		if (rc == 0)
			nkeys++;
	}
	if (rc == 0)
		rc = storage_index_keys_union(keys, nkeys, out);
	for (size_t i = 0; i < nkeys; i++)
		storage_index_keys_free(&keys[i]);
	return rc;
}

/* One page of the job's candidates: of its index restriction, and when
 * it carries a second one (and_ix) the intersection of both (a second
 * index that cannot answer here is left to the coordinator's re-check).
 * *first_failed: the first index could not answer (ERR_UNSUPPORTED /
 * ERR_INVALID: scan instead). */
static int job_cands(struct store_job *j, const struct storage_index_page *pg,
		     struct storage_index_keys *out, bool *first_failed)
{
	*first_failed = false;
	struct storage_index_keys a, b;
	if (index_cands(j, &j->ix, pg, &a) != 0) {
		enum err_code code = err_code();
		*first_failed = code == ERR_UNSUPPORTED || code == ERR_INVALID;
		return -1;
	}
	if (!j->ix.and_ix) {
		*out = a;
		return 0;
	}
	if (index_cands(j, j->ix.and_ix, pg, &b) != 0) {
		enum err_code code = err_code();
		if (code == ERR_UNSUPPORTED || code == ERR_INVALID) {
			*out = a; /* the first alone: a superset */
			return 0;
		}
		storage_index_keys_free(&a);
		return -1;
	}
	int rc = storage_index_keys_intersect(&a, &b, out);
	storage_index_keys_free(&a);
	storage_index_keys_free(&b);
	return rc;
}

/* An indexed scan: each candidate partition read as a fragment (empty
 * ones skipped), at most j->max, the candidates asked for a page at a
 * time. 1 when the index cannot answer (the caller scans the range
 * instead), 0, or -1 with err set. */
static int store_index_scan(struct store_job *j, size_t *cap)
{
	size_t limit = j->max;
	if (limit < INDEX_PAGE_MIN)
		limit = INDEX_PAGE_MIN;
	if (limit > INDEX_PAGE_MAX)
		limit = INDEX_PAGE_MAX;
	struct storage_index_page pg = {.limit = limit};
	struct buf after;
	buf_init(&after);
	struct storage_read_cmd cmd = j->cmd;
	int rc = 0;
	for (bool first = true, more = true; rc == 0 && more && !j->cut;
	     first = false) {
		struct storage_index_keys c;
		bool failed;
		rc = job_cands(j, &pg, &c, &failed);
		if (rc != 0) {
			/* the index cannot answer: the range is scanned
			 * (only before anything was read) */
			if (failed && first) {
				buf_free(&after);
				return 1;
			}
			break;
		}
		for (size_t i = 0, ie; rc == 0 && i < c.count; i = ie) {
			/* a partition's entries: the partition, or its rows */
			for (ie = i + 1;
			     ie < c.count && c.tokens[ie] == c.tokens[i] &&
			     slice_cmp(c.keys[ie], c.keys[i]) == 0;
			     ie++)
				;
			cmd.key = c.keys[i].ptr;
			cmd.key_len = c.keys[i].len;
			struct storage_mutation *m = NULL;
			/* only the index's rows (within the read's own
			 * slices), when the coordinator says it may: it
			 * protects rows, not partitions */
			if (j->ix.rows && c.rows && c.rows[i].len)
				rc = storage_read_fragment_rows(
					j->d->db, j->table_id, &cmd, c.rows + i,
					ie - i, &m);
			else
				rc = storage_read_fragment(
					j->d->db, j->table_id, &cmd, &m);
			if (rc != 0)
				break;
			if (storage_mutation_is_empty(m)) {
				storage_mutation_delete(m);
				continue;
			}
			if (j->n == j->max) {
				storage_mutation_delete(m);
				j->cut = true;
				break;
			}
			rc = store_keep(j, m, cap);
		}
		more = c.more;
		if (more) {
			after.len = 0;
			if (buf_append(&after, c.resume_key.ptr,
				       c.resume_key.len))
				rc = err_set(ERR_NOMEM, "out of memory");
			pg.after = true;
			pg.after_token = c.resume_token;
			pg.after_key = (struct slice){after.data, after.len};
		}
		storage_index_keys_free(&c);
	}
	buf_free(&after);
	return rc;
}

static void store_job_run(struct work *w)
{
	struct store_job *j = (struct store_job *)w;
	size_t cap = 0;
	uint64_t start_us = j->indexed ? env_mono_us(j->d->env) : 0;
	int rc = j->indexed ? store_index_scan(j, &cap) : 1;
	if (rc != 1) {
		/* indexed: done (or failed); one range read */
		if (rc == 0)
			storage_table_count_range(j->d->db, j->table_id,
						  env_mono_us(j->d->env) -
							  start_us);
	} else if (!j->scan) {
		rc = 0;
		struct storage_mutation *m = NULL;
		rc = storage_read_fragment(j->d->db, j->table_id, &j->cmd, &m);
		if (rc == 0)
			rc = store_keep(j, m, &cap);
	} else {
		rc = 0;
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
		if (rc == 0)
			storage_scan_count(s);
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
	if (j->stats_out) {
		j->stats_out->sstables += j->stats.sstables;
		j->stats_out->live_rows += j->stats.live_rows;
		j->stats_out->tombstones += j->stats.tombstones;
	}
	j->done(j->arg, j->status, j->code, j->frags, j->n, j->cut);
	arena_destroy(&j->a);
	free(j);
}

/* Copies an index restriction into the job's arena. */
static int store_copy_index(struct store_job *j,
			    const struct repl_index_expr *ix)
{
	if (ix->n_vals > REPL_INDEX_MAX_VALUES)
		return err_set(ERR_INVALID, "too many index values");
	if (repl_index_expr_copy(&j->a, ix, &j->ix, j->bounds) != 0)
		return -1;
	j->indexed = true;
	return 0;
}

static void store_submit(struct cql_data *d, const uint8_t table_id[16],
			 const struct storage_read_cmd *cmd, bool scan,
			 int64_t start, int64_t end,
			 const struct repl_index_expr *ix, uint32_t max,
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
	    storage_read_cmd_decode(enc.data, enc.len, &j->a, &j->cmd) != 0 ||
	    (ix && store_copy_index(j, ix) != 0)) {
		enum err_code code = err_code();
		buf_free(&enc);
		if (j)
			arena_destroy(&j->a);
		free(j);
		done(arg, -1, code, NULL, 0, false);
		return;
	}
	buf_free(&enc);
	/* the worker fills its own; the caller's is filled on the loop */
	j->stats_out = cmd->stats;
	if (cmd->stats)
		j->cmd.stats = &j->stats;
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
		store_submit(s, table_id, cmd, false, 0, 0, NULL, 1, done, arg);
		return;
	}
	*c = (struct cached_read){
		.item.fn = cached_read_done, .done = done, .arg = arg};
	c->status =
		storage_read_fragment_cached(d->db, table_id, cmd, &c->frag);
	if (c->status != 0 && err_code() == ERR_AGAIN) {
		free(c);
		store_submit(s, table_id, cmd, false, 0, 0, NULL, 1, done, arg);
		return;
	}
	c->code = c->status ? err_code() : ERR_NONE;
	loopq_defer(d->q, &c->item);
}

static void store_scan(void *s, const uint8_t table_id[16], int64_t start,
		       int64_t end, const struct storage_read_cmd *cmd,
		       uint32_t max, repl_store_read_fn done, void *arg)
{
	store_submit(s, table_id, cmd, true, start, end, NULL, max, done, arg);
}

static void store_index_scan_op(void *s, const uint8_t table_id[16],
				int64_t start, int64_t end,
				const struct storage_read_cmd *cmd,
				const struct repl_index_expr *ix, uint32_t max,
				repl_store_read_fn done, void *arg)
{
	store_submit(s, table_id, cmd, true, start, end, ix, max, done, arg);
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

const struct repl_store_ops cql_data_store_ops = {
	.apply = store_apply,
	.read = store_read,
	.scan = store_scan,
	.index_scan = store_index_scan_op,
	.meta = store_meta,
	.truncate = store_truncate,
	.truncated_at = store_truncated_at,
};
