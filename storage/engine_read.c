/*
 * Reads: point reads of one partition and range scans by token, over a
 * snapshot (memtables and an SSTable version, all referenced) so flushes
 * and compactions can run meanwhile.
 */
#define LOG_MODULE "storage"
#include "common/murmur3.h"
#include "storage/engine_internal.h"

#include "common/err.h"
#include "common/log.h"
#include "common/zalloc.h"

#include <stdlib.h>
#include <string.h>

int storage_engine_snapshot_take(struct storage *db, const uint8_t id[16],
				 struct engine_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, id);
	if (!t) {
		pthread_mutex_unlock(&db->mu);
		return err_set(ERR_NOT_FOUND, "unknown table");
	}
	s->mts = zcalloc(t->flushing_count + 1, sizeof(*s->mts));
	if (!s->mts) {
		pthread_mutex_unlock(&db->mu);
		return err_set(ERR_NOMEM, "snapshot");
	}
	s->t = t;
	storage_engine_table_ref(t);
	s->meta = storage_table_meta_ref(t->meta);
	memtable_ref(t->active);
	s->mts[s->mt_count++] = t->active;
	for (size_t i = t->flushing_count; i-- > 0;) {
		memtable_ref(t->flushing[i]);
		s->mts[s->mt_count++] = t->flushing[i];
	}
	storage_version_ref(t->version);
	s->v = t->version;
	pthread_mutex_unlock(&db->mu);
	return 0;
}

void storage_engine_snapshot_release(struct engine_snapshot *s)
{
	for (size_t i = 0; i < s->mt_count; i++)
		memtable_unref(s->mts[i]);
	free(s->mts);
	storage_version_unref(s->v);
	storage_table_meta_unref(s->meta);
	storage_engine_table_unref(s->t);
	memset(s, 0, sizeof(*s));
}

static void ctx_limits(struct storage *db, struct read_ctx *c)
{
	c->warn_threshold = db->o.tombstone_warn_threshold;
	c->fail_threshold = db->o.tombstone_failure_threshold;
}

/* An SSTable whose newest write is older than a partition deletion the
 * read already holds cannot contribute anything. A fragment also wants
 * the SSTable's own deletion of the same timestamp (its ldt may be
 * later), so it skips only strictly older ones. */
static bool sstable_shadowed(const struct read_ctx *c, const struct sstable *s,
			     bool raw)
{
	if (c->pdel.ts == DELETION_NONE)
		return false;
	return raw ? s->stats.max_ts < c->pdel.ts
		   : s->stats.max_ts <= c->pdel.ts;
}

/* For tables with one row per partition and only simple regular columns
 * (a common shape, and db_bench's): once every regular column has a live
 * winner newer than anything an older SSTable holds, the older SSTables
 * cannot change the result (Cassandra's timestamp-ordered read): their
 * cells lose the reconcile and their deletions are too old to shadow. */
static bool older_cannot_matter(const struct read_ctx *c, int64_t older_max)
{
	const struct storage_table_meta *t = c->t;
	if (t->ck_count || c->cmd->with_static || c->rt_count ||
	    c->atom_count == 0)
		return false;
	for (size_t col = 0; col < t->column_count; col++) {
		const struct storage_column *cd = &t->columns[col];
		if (cd->kind == STORAGE_COLUMN_PARTITION_KEY)
			continue;
		if (cd->kind != STORAGE_COLUMN_REGULAR ||
		    storage_type_is_multicell(cd->type) ||
		    cd->type->kind == STORAGE_TYPE_COUNTER)
			return false;
		const struct atom *win = NULL;
		for (size_t i = 0; i < c->atom_count; i++) {
			const struct atom *a = &c->atoms[i];
			if (a->slot != col + 1)
				continue;
			win = win ? storage_atom_reconcile(win, a) : a;
		}
		if (!win || !storage_atom_is_live(win, c->now_sec) ||
		    win->ts <= older_max || deletion_covers(c->pdel, win->ts))
			return false;
	}
	return true;
}

static int cmp_max_ts_desc(const void *a, const void *b)
{
	const struct sstable *x = *(struct sstable *const *)a;
	const struct sstable *y = *(struct sstable *const *)b;
	return (x->stats.max_ts < y->stats.max_ts) -
	       (x->stats.max_ts > y->stats.max_ts);
}

/* Adds what the snapshot holds of the partition to `c`. `raw` (fragments)
 * reads every source that may hold an unshadowed atom; otherwise the read
 * stops once older SSTables cannot change the rows. */
static int gather(struct storage *db, struct engine_snapshot *s,
		  struct read_ctx *c, int64_t token, struct slice key, bool raw,
		  unsigned *read)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < s->mt_count; i++)
		rc = storage_read_ctx_add_memtable(c, s->mts[i], token, key);
	/* newest data first, so the reads above can stop early */
	struct sstable *order[64];
	size_t n = s->v->count < 64 ? s->v->count : 0;
	memcpy(order, s->v->ssts, n * sizeof(*order));
	if (n > 1)
		qsort(order, n, sizeof(*order), cmp_max_ts_desc);
	for (size_t i = 0; !rc && i < s->v->count; i++) {
		struct sstable *sst = n ? order[i] : s->v->ssts[i];
		if (sstable_shadowed(c, sst, raw) ||
		    atomic_load(&sst->excluded))
			continue;
		if (n && !raw && older_cannot_matter(c, sst->stats.max_ts))
			break;
		rc = sstable_read(sst, c, token, key);
		if (rc && err_code() == ERR_CORRUPT)
			storage_engine_note_corruption(db, sst);
	}
	*read = c->sstables_touched;
	return rc;
}

/* Adds a read's tombstone threshold verdicts to its table's counts. */
static void tombstone_counts(struct table *t, struct read_ctx *c)
{
	if (c->tombstone_warnings)
		atomic_fetch_add_explicit(&t->tombstone_warnings,
					  c->tombstone_warnings,
					  memory_order_relaxed);
	if (c->tombstone_failures)
		atomic_fetch_add_explicit(&t->tombstone_failures,
					  c->tombstone_failures,
					  memory_order_relaxed);
	c->tombstone_warnings = c->tombstone_failures = 0;
}

/* A point read answered: a few relaxed increments, no lock. */
static void count_read(struct table *t, uint64_t us, unsigned ssts,
		       const struct read_ctx *c)
{
	atomic_fetch_add_explicit(&t->live_sum, c->seen_live_rows,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(
		&t->live_per_read[loghist_bucket(c->seen_live_rows)], 1,
		memory_order_relaxed);
	atomic_fetch_add_explicit(&t->tomb_sum, c->seen_tombstones,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(
		&t->tomb_per_read[loghist_bucket(c->seen_tombstones)], 1,
		memory_order_relaxed);
	atomic_fetch_add_explicit(&t->reads, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->read_us_sum, us, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->read_us[loghist_bucket(us)], 1,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&t->sst_sum, ssts, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->sst_per_read[loghist_bucket(ssts)], 1,
				  memory_order_relaxed);
}

/* A point read: the rows (`frag` NULL) or the fragment. */
static int read_partition(struct storage *db, const uint8_t table_id[16],
			  const struct storage_read_cmd *cmd,
			  struct storage_result **out,
			  struct storage_mutation **frag, bool cached_only)
{
	if (!cmd->key || cmd->key_len == 0)
		return err_set(ERR_INVALID, "read without a partition key");
	uint64_t start = env_mono_us(db->o.env);
	struct engine_snapshot s;
	if (storage_engine_snapshot_take(db, table_id, &s))
		return -1;
	unsigned ssts = 0;
	struct read_ctx c;
	int rc = storage_read_ctx_init(&c, s.meta, cmd,
				       storage_engine_now_sec(db));
	ctx_limits(db, &c);
	c.cached_only = cached_only;
	struct slice key = slice_make(cmd->key, cmd->key_len);
	/* One hash: the token, and the bloom filters' probes. */
	murmur3_hash128(cmd->key, cmd->key_len, 0, c.key_hash);
	c.have_hash = true;
	int64_t token = murmur3_token_of_hash(c.key_hash);
	/* Zero slices (`IN ()`) read nothing: an empty answer. */
	if (!rc && !(cmd->slices && cmd->slice_count == 0))
		rc = gather(db, &s, &c, token, key, frag != NULL, &ssts);
	if (!rc)
		rc = frag ? storage_read_ctx_fragment(&c, token, key, frag)
			  : storage_read_ctx_finish(&c, token, key, out);
	if (!rc) {
		count_read(s.t, env_mono_us(db->o.env) - start, ssts, &c);
		if (storage_engine_sampling(s.t, STORAGE_SAMPLE_READ_KINDS))
			storage_engine_sample_read(s.t, cmd->key, cmd->key_len,
						   c.seen_live_rows,
						   c.seen_tombstones, ssts);
	}
	if (cmd->stats)
		cmd->stats->sstables += ssts;
	tombstone_counts(s.t, &c);
	storage_read_ctx_destroy(&c);
	storage_engine_snapshot_release(&s);
	return rc;
}

int storage_read(struct storage *db, const uint8_t table_id[16],
		 const struct storage_read_cmd *cmd,
		 struct storage_result **out)
{
	*out = NULL;
	return read_partition(db, table_id, cmd, out, NULL, false);
}

int storage_read_fragment(struct storage *db, const uint8_t table_id[16],
			  const struct storage_read_cmd *cmd,
			  struct storage_mutation **out)
{
	*out = NULL;
	return read_partition(db, table_id, cmd, NULL, out, false);
}

int storage_read_fragment_cached(struct storage *db, const uint8_t table_id[16],
				 const struct storage_read_cmd *cmd,
				 struct storage_mutation **out)
{
	*out = NULL;
	return read_partition(db, table_id, cmd, NULL, out, true);
}

const struct storage_table_meta *
storage_table_meta_acquire(struct storage *db, const uint8_t id[16])
{
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, id);
	const struct storage_table_meta *m =
		t ? storage_table_meta_ref(t->meta) : NULL;
	pthread_mutex_unlock(&db->mu);
	return m;
}

/* ---- range scans --------------------------------------------------------- */

struct storage_scan {
	struct storage *db;
	struct engine_snapshot snap;
	struct storage_read_cmd cmd;
	int64_t start, end;
	bool full_ring;
	struct skiplist_node **mt_pos; /* per memtable */
	struct sst_iter **its;         /* per SSTable */
	const struct sst_entry **heads;
	bool *live;
	struct read_ctx ctx;
	bool done;
	uint64_t open_us; /* env_mono_us at open */
};

static bool in_range(const struct storage_scan *s, int64_t token)
{
	return s->full_ring || token <= s->end;
}

struct storage_scan *storage_scan_open(struct storage *db,
				       const uint8_t table_id[16],
				       int64_t start_token, int64_t end_token,
				       const struct storage_read_cmd *cmd)
{
	struct storage_scan *s = calloc(1, sizeof(*s));
	if (!s) {
		err_set(ERR_NOMEM, "scan");
		return NULL;
	}
	s->db = db;
	s->cmd = *cmd;
	s->open_us = env_mono_us(db->o.env);
	s->start = start_token;
	s->end = end_token;
	s->full_ring = start_token == end_token;
	if (storage_engine_snapshot_take(db, table_id, &s->snap)) {
		free(s);
		return NULL;
	}
	size_t nm = s->snap.mt_count, ns = s->snap.v->count;
	if (cmd->stats)
		cmd->stats->sstables = (unsigned)ns;
	s->mt_pos = calloc(nm + 1, sizeof(*s->mt_pos));
	s->its = calloc(ns + 1, sizeof(*s->its));
	s->heads = calloc(ns + 1, sizeof(*s->heads));
	s->live = calloc(ns + 1, sizeof(*s->live));
	int rc = !s->mt_pos || !s->its || !s->heads || !s->live
			 ? err_set(ERR_NOMEM, "scan")
			 : storage_read_ctx_init(&s->ctx, s->snap.meta, &s->cmd,
						 storage_engine_now_sec(db));
	ctx_limits(db, &s->ctx);
	bool incl = s->full_ring;
	if (s->full_ring)
		start_token = INT64_MIN;
	const uint8_t *pr = cmd->pending_repair;
	for (size_t i = 0; !rc && !pr && i < nm; i++)
		s->mt_pos[i] =
			memtable_seek_token(s->snap.mts[i], start_token, incl);
	for (size_t i = 0; !rc && i < ns; i++) {
		if (atomic_load(&s->snap.v->ssts[i]->excluded))
			continue; /* never live */
		if (pr &&
		    memcmp(s->snap.v->ssts[i]->stats.pending_repair, pr, 16))
			continue; /* not the repair session's */
		s->its[i] = sst_iter_new(s->snap.v->ssts[i]);
		if (!s->its[i] || sst_iter_seek(s->its[i], start_token, incl)) {
			rc = -1;
			break;
		}
		int r = sst_iter_next(s->its[i], &s->heads[i]);
		if (r < 0) {
			if (err_code() == ERR_CORRUPT)
				storage_engine_note_corruption(
					db, s->snap.v->ssts[i]);
			rc = -1;
		}
		s->live[i] = r > 0;
	}
	if (rc) {
		storage_scan_close(s);
		return NULL;
	}
	if (cmd->slices && cmd->slice_count == 0)
		s->done = true; /* zero slices: nothing to find */
	return s;
}

/* The smallest partition among the heads, or false at the end. */
static bool scan_min(struct storage_scan *s, int64_t *token, struct slice *key)
{
	bool any = false;
	for (size_t i = 0; i < s->snap.mt_count; i++) {
		if (!s->mt_pos[i])
			continue;
		struct mt_partition *p = mt_node_partition(s->mt_pos[i]);
		if (!any ||
		    storage_partition_cmp(p->token, p->key, *token, *key) < 0) {
			*token = p->token;
			*key = p->key;
			any = true;
		}
	}
	for (size_t i = 0; i < s->snap.v->count; i++) {
		if (!s->live[i])
			continue;
		const struct sst_entry *e = s->heads[i];
		if (!any ||
		    storage_partition_cmp(e->token, e->key, *token, *key) < 0) {
			*token = e->token;
			*key = e->key;
			any = true;
		}
	}
	return any;
}

/* Gathers the next partition of the range into the context: 1 with its
 * token and key (live until the next call), 0 at the end, -1. */
static int scan_gather(struct storage_scan *s, int64_t *token_out,
		       struct slice *key_out)
{
	if (s->done)
		return 0;
	int64_t token = 0;
	struct slice key = {NULL, 0};
	if (!scan_min(s, &token, &key) || !in_range(s, token)) {
		s->done = true;
		return 0;
	}
	/* The key may point into a source we advance: copy it. */
	uint8_t *kcopy = malloc(key.len ? key.len : 1);
	if (!kcopy)
		return err_set(ERR_NOMEM, "scan");
	memcpy(kcopy, key.ptr, key.len);
	key.ptr = kcopy;
	storage_read_ctx_reset(&s->ctx);
	int rc = storage_read_ctx_keep(&s->ctx, kcopy);
	for (size_t i = 0; !rc && i < s->snap.mt_count; i++) {
		if (!s->mt_pos[i])
			continue;
		struct mt_partition *p = mt_node_partition(s->mt_pos[i]);
		if (storage_partition_cmp(p->token, p->key, token, key) != 0)
			continue;
		rc = storage_read_ctx_add_mt_partition(&s->ctx, p);
		s->mt_pos[i] = skiplist_next(s->mt_pos[i]);
	}
	for (size_t i = 0; !rc && i < s->snap.v->count; i++) {
		if (!s->live[i] ||
		    storage_partition_cmp(s->heads[i]->token, s->heads[i]->key,
					  token, key) != 0)
			continue;
		struct sstable *sst = s->snap.v->ssts[i];
		rc = sstable_read_entry(sst, &s->ctx, s->heads[i], false);
		int r = rc ? 0 : sst_iter_next(s->its[i], &s->heads[i]);
		if (r < 0)
			rc = -1;
		s->live[i] = r > 0;
		if (rc && err_code() == ERR_CORRUPT)
			storage_engine_note_corruption(s->db, sst);
	}
	if (rc)
		return -1;
	*token_out = token;
	*key_out = key;
	return 1;
}

int storage_scan_next(struct storage_scan *s, struct storage_result **out)
{
	*out = NULL;
	int64_t token;
	struct slice key;
	int rc;
	while ((rc = scan_gather(s, &token, &key)) == 1) {
		struct storage_result *r;
		int frc = storage_read_ctx_finish(&s->ctx, token, key, &r);
		tombstone_counts(s->snap.t, &s->ctx);
		if (frc)
			return -1;
		if (r->row_count || r->static_row) {
			*out = r;
			return 1;
		}
		storage_result_delete(r);
	}
	return rc;
}

int storage_scan_next_fragment(struct storage_scan *s,
			       struct storage_mutation **out)
{
	*out = NULL;
	int64_t token;
	struct slice key;
	int rc;
	while ((rc = scan_gather(s, &token, &key)) == 1) {
		struct storage_mutation *m;
		int frc = storage_read_ctx_fragment(&s->ctx, token, key, &m);
		tombstone_counts(s->snap.t, &s->ctx);
		if (frc)
			return -1;
		if (!storage_mutation_is_empty(m)) {
			*out = m;
			return 1;
		}
		storage_mutation_delete(m);
	}
	return rc;
}

static void count_range(struct table *t, uint64_t us)
{
	atomic_fetch_add_explicit(&t->scan_us_sum, us, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->scan_us[loghist_bucket(us)], 1,
				  memory_order_relaxed);
}

void storage_scan_count(struct storage_scan *s)
{
	if (s && s->snap.t)
		count_range(s->snap.t, env_mono_us(s->db->o.env) - s->open_us);
}

void storage_table_count_range(struct storage *db, const uint8_t table_id[16],
			       uint64_t us)
{
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, table_id);
	if (t)
		count_range(t, us);
	pthread_mutex_unlock(&db->mu);
}

void storage_scan_close(struct storage_scan *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->its && i < s->snap.v->count; i++)
		sst_iter_delete(s->its[i]);
	free(s->its);
	free(s->heads);
	free(s->live);
	free(s->mt_pos);
	storage_read_ctx_destroy(&s->ctx);
	storage_engine_snapshot_release(&s->snap);
	free(s);
}
