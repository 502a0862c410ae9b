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

/* One candidate of an indexed scan: its token and key (borrowed from
 * the lookups' storage_index_keys). */
struct cand {
	int64_t token;
	struct slice key;
};

static int cand_cmp(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;
	if (a->token != b->token)
		return a->token < b->token ? -1 : 1;
	return slice_cmp(a->key, b->key);
}

/* The candidates of the job's index restriction in (start, end], in token
 * order, each once: one lookup, or the union of one per value. Fills
 * keys[0..*nkeys) (free each with storage_index_keys_free) and *out
 * (free()). 0, or -1 with err set (ERR_UNSUPPORTED, ERR_INVALID: the
 * index cannot answer here). */
static int index_cands(struct store_job *j, struct storage_index_keys *keys,
		       size_t *nkeys, struct cand **out, size_t *nout)
{
	const struct repl_index_expr *ix = &j->ix;
	size_t nl = ix->range ? 1 : ix->n_vals, total = 0;
	*nkeys = 0;
	for (size_t i = 0; i < nl; i++) {
		memset(&keys[i], 0, sizeof(keys[i]));
		int rc = ix->range ? storage_index_candidates_range(
					     j->d->db, j->table_id, ix->name,
					     ix->lo, ix->hi, j->start, j->end,
					     &keys[i])
				   : storage_index_candidates(
					     j->d->db, j->table_id, ix->name,
					     &ix->vals[i], 1, j->start, j->end,
					     &keys[i]);
		if (rc != 0)
			return -1;
		(*nkeys)++;
		total += keys[i].count;
	}
	struct cand *c = malloc((total ? total : 1) * sizeof(*c));
	if (!c)
		return err_set(ERR_NOMEM, "out of memory");
	size_t n = 0;
	for (size_t i = 0; i < nl; i++)
		for (size_t k = 0; k < keys[i].count; k++)
			c[n++] = (struct cand){keys[i].tokens[k],
					       keys[i].keys[k]};
	if (nl > 1) { /* each lookup is in order; their union is sorted */
		qsort(c, n, sizeof(*c), cand_cmp);
		size_t u = 0;
		for (size_t k = 0; k < n; k++)
			if (!u || cand_cmp(&c[u - 1], &c[k]) != 0)
				c[u++] = c[k];
		n = u;
	}
	*out = c;
	*nout = n;
	return 0;
}

/* An indexed scan: each candidate partition read as a fragment (empty
 * ones skipped), at most j->max. 1 when the index cannot answer (the
 * caller scans the range instead), 0, or -1 with err set. */
static int store_index_scan(struct store_job *j, size_t *cap)
{
	struct storage_index_keys keys[REPL_INDEX_MAX_VALUES];
	size_t nkeys = 0, n = 0;
	struct cand *c = NULL;
	int rc = index_cands(j, keys, &nkeys, &c, &n);
	if (rc != 0) {
		enum err_code code = err_code();
		for (size_t i = 0; i < nkeys; i++)
			storage_index_keys_free(&keys[i]);
		if (code == ERR_UNSUPPORTED || code == ERR_INVALID)
			return 1;
		return -1;
	}
	struct storage_read_cmd cmd = j->cmd;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		cmd.key = c[i].key.ptr;
		cmd.key_len = c[i].key.len;
		struct storage_mutation *m = NULL;
		rc = storage_read_fragment(j->d->db, j->table_id, &cmd, &m);
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
	free(c);
	for (size_t i = 0; i < nkeys; i++)
		storage_index_keys_free(&keys[i]);
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
