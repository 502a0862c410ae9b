/*
 * Incremental repair's side of the storage engine (see storage.h,
 * "incremental repair"): anticompaction of the unrepaired SSTables that a
 * session's ranges touch (whole ones marked pending, partial ones split by
 * a compaction job), finalize / fail rewriting Statistics.db, pending-only
 * scans' SSTables and pending ingest.
 */
#define LOG_MODULE "storage"
#include "storage/compaction_internal.h"

#include "common/log.h"

#include <stdlib.h>

/* Holds the table's compaction slot (waiting for a running compaction),
 * so no compaction takes or replaces its SSTables meanwhile. */
static int reserve(struct storage *db, struct table *t, const char *kind)
{
	pthread_mutex_lock(&db->mu);
	while (t->compacting && !db->stopping)
		pthread_cond_wait(&db->done, &db->mu);
	if (db->stopping || t->truncating || t->dropped) {
		pthread_mutex_unlock(&db->mu);
		return err_set(ERR_CLOSED, "table busy or gone");
	}
	t->compacting = true;
	t->compaction_kind = kind;
	t->compaction_total = 0;
	atomic_store(&t->compaction_done, 0);
	pthread_mutex_unlock(&db->mu);
	return 0;
}

static void unreserve(struct storage *db, struct table *t)
{
	pthread_mutex_lock(&db->mu);
	t->compacting = false;
	t->compaction_kind = NULL;
	pthread_cond_broadcast(&db->done);
	pthread_mutex_unlock(&db->mu);
}

static bool no_session(const uint8_t p[16])
{
	for (int i = 0; i < 16; i++)
		if (p[i])
			return false;
	return true;
}

/* 0: outside every range, 1: partly inside, 2: wholly inside one. */
static int range_fit(const struct sstable *s,
		     const struct storage_token_range *r, size_t n)
{
	int fit = 0;
	for (size_t i = 0; i < n; i++) {
		if (s->stats.min_token > r[i].left &&
		    s->stats.max_token <= r[i].right)
			return 2;
		if (s->stats.max_token > r[i].left &&
		    s->stats.min_token <= r[i].right)
			fit = 1;
	}
	return fit;
}

static bool token_in(int64_t t, const struct storage_token_range *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (t > r[i].left && t <= r[i].right)
			return true;
	return false;
}

/* How many of `s`'s partitions lie in the ranges (its index, from the
 * summary's block before each range: no Data.db read); with `any`, stops
 * at the first (1). */
static int partitions_in(struct sstable *s, const struct storage_token_range *r,
			 size_t n, bool any, uint64_t *count)
{
	*count = 0;
	struct sst_iter *it = sst_iter_new(s);
	if (!it)
		return err_set(ERR_NOMEM, "anticompaction");
	int rc = 0;
	for (size_t i = 0; !rc && i < n && !(any && *count); i++) {
		if (r[i].right < s->stats.min_token ||
		    r[i].left >= s->stats.max_token)
			continue;
		const struct sst_entry *e;
		int got = 0;
		rc = sst_iter_seek(it, r[i].left, false);
		while (!rc && !(any && *count) &&
		       (got = sst_iter_next(it, &e)) > 0 &&
		       e->token <= r[i].right)
			(*count)++;
		if (!rc && got < 0)
			rc = -1;
	}
	sst_iter_delete(it);
	return rc;
}

/* What anticompaction does with `s`: 0 nothing (no partition in the
 * ranges), 1 split it, 2 mark it whole. The bounds decide first, as
 * Cassandra's do; an SSTable whose bounds straddle is then asked by its
 * index, so one whose partitions all fall outside (the unrepaired half of
 * an earlier split, whose first and last keys flank the range) is not
 * rewritten again into an identical copy, nor one wholly inside the
 * ranges' union split into a single part. */
static int decide(struct sstable *s, const struct storage_token_range *r,
		  size_t n, int *what)
{
	*what = range_fit(s, r, n);
	if (*what != 1)
		return 0;
	/* its first or last partition outside: not all inside, so one
	 * partition inside is enough to know (one seek per range) */
	bool some_out = !token_in(s->stats.min_token, r, n) ||
			!token_in(s->stats.max_token, r, n);
	uint64_t in = 0;
	if (partitions_in(s, r, n, some_out, &in))
		return -1;
	*what = in == 0                                       ? 0
		: !some_out && in >= s->stats.partition_count ? 2
							      : 1;
	return 0;
}

/* The SSTables of the table's version matching `want` (a ref each). */
static size_t take_ssts(struct storage *db, struct table *t,
			bool (*want)(const struct sstable *, const void *),
			const void *arg, struct sstable ***out)
{
	pthread_mutex_lock(&db->mu);
	struct version *v = t->version;
	struct sstable **a = calloc(v->count + 1, sizeof(*a));
	size_t n = 0;
	for (size_t i = 0; a && i < v->count; i++) {
		struct sstable *s = v->ssts[i];
		if (atomic_load(&s->excluded) || !want(s, arg))
			continue;
		sstable_ref(s);
		a[n++] = s;
	}
	pthread_mutex_unlock(&db->mu);
	*out = a;
	return n;
}

static bool is_unrepaired(const struct sstable *s, const void *arg)
{
	(void)arg;
	return s->stats.repaired_at == 0 && no_session(s->stats.pending_repair);
}

static bool is_pending(const struct sstable *s, const void *arg)
{
	return arg ? !memcmp(s->stats.pending_repair, arg, 16)
		   : !no_session(s->stats.pending_repair);
}

/* Rewrites `s`'s Statistics.db with a new repair state. */
static int set_state(struct storage *db, struct sstable *s, int64_t repaired_at,
		     const uint8_t *session)
{
	struct sst_stats st = s->stats;
	st.repaired_at = repaired_at;
	if (session)
		memcpy(st.pending_repair, session, 16);
	else
		memset(st.pending_repair, 0, 16);
	if (sst_stats_rewrite(s, &st))
		return -1;
	pthread_mutex_lock(&db->mu);
	s->stats.repaired_at = st.repaired_at;
	memcpy(s->stats.pending_repair, st.pending_repair, 16);
	db->compaction_wanted = true;
	pthread_mutex_unlock(&db->mu);
	return 0;
}

/* Splits `in` (the slot reserved) into its part inside the ranges,
 * pending for `session`, and the rest. */
static int anticompact_one(struct storage *db, struct table *t,
			   struct sstable *in,
			   const struct storage_token_range *r, size_t n,
			   const uint8_t session[16])
{
	struct sstable *ins[1] = {in};
	struct job j = {.db = db,
			.t = t,
			.in = ins,
			.n = 1,
			.cleanup = true,
			.keep = r,
			.nkeep = n,
			.anti = true,
			.session = session};
	pthread_mutex_lock(&db->mu);
	j.mt_min_ts = t->active->min_ts;
	for (size_t i = 0; i < t->flushing_count; i++)
		if (t->flushing[i]->min_ts < j.mt_min_ts)
			j.mt_min_ts = t->flushing[i]->min_ts;
	j.now = storage_engine_now_sec(db);
	j.meta = storage_table_meta_ref(t->meta);
	j.v = t->version;
	storage_version_ref(j.v);
	t->compaction_total = in->stats.data_size;
	pthread_mutex_unlock(&db->mu);
	j.gc_before = j.now - j.meta->options.gc_grace_seconds;
	struct sstable **out = NULL;
	int rc = storage_compaction_run_job(&j, &out);
	pthread_mutex_lock(&db->mu);
	if (!rc) {
		struct version *nv = storage_version_edit_many(
			t->version, j.in, j.n, out, j.npub);
		if (nv) {
			storage_version_unref(t->version);
			t->version = nv;
			sstable_mark_obsolete(in);
			t->compactions++;
		} else {
			rc = -1;
		}
	}
	pthread_mutex_unlock(&db->mu);
	for (size_t i = 0; out && i < j.npub; i++)
		sstable_unref(out[i]);
	free(out);
	free(j.out_gens);
	free(j.done_w);
	storage_version_unref(j.v);
	storage_table_meta_unref(j.meta);
	return rc;
}

int storage_repair_anticompact(struct storage *db, const uint8_t table_id[16],
			       const struct storage_token_range *ranges,
			       size_t nranges, const uint8_t session[16],
			       uint64_t *marked, uint64_t *split)
{
	uint64_t nm = 0, ns = 0;
	if (no_session(session))
		return err_set(ERR_INVALID, "no repair session");
	struct table *t = storage_engine_table_get(db, table_id);
	if (!t)
		return -1;
	if (storage_flush(db, table_id) != 0 ||
	    reserve(db, t, "Anticompaction")) {
		storage_engine_table_unref(t);
		return -1;
	}
	struct sstable **a = NULL;
	size_t n = take_ssts(db, t, is_unrepaired, NULL, &a);
	int rc = a ? 0 : err_set(ERR_NOMEM, "anticompaction");
	for (size_t i = 0; i < n; i++) {
		int fit = 0;
		if (!rc)
			rc = decide(a[i], ranges, nranges, &fit);
		if (fit == 2) {
			rc = set_state(db, a[i], 0, session);
			nm++;
		} else if (fit == 1) {
			rc = anticompact_one(db, t, a[i], ranges, nranges,
					     session);
			ns++;
		}
		sstable_unref(a[i]);
	}
	free(a);
	unreserve(db, t);
	storage_compaction_process_logs(db, t, true);
	storage_engine_table_unref(t);
	if (rc)
		LOG_AT(LOG_LEVEL_WARN, "anticompaction failed: %s", err_msg());
	if (marked)
		*marked = nm;
	if (split)
		*split = ns;
	return rc;
}

int storage_repair_set_state(struct storage *db, const uint8_t table_id[16],
			     const uint8_t *session, int64_t repaired_at,
			     uint64_t *count)
{
	struct table *t = storage_engine_table_get(db, table_id);
	if (!t)
		return -1;
	if (reserve(db, t, "Repair state")) {
		storage_engine_table_unref(t);
		return -1;
	}
	struct sstable **a = NULL;
	size_t n = take_ssts(db, t, is_pending, session, &a);
	int rc = a ? 0 : err_set(ERR_NOMEM, "repair state");
	for (size_t i = 0; i < n; i++) {
		if (!rc)
			rc = set_state(db, a[i], repaired_at, NULL);
		sstable_unref(a[i]);
	}
	free(a);
	unreserve(db, t);
	storage_engine_table_unref(t);
	if (count)
		*count = rc ? 0 : n;
	return rc;
}

int storage_repair_ingest(struct storage *db, const uint8_t table_id[16],
			  const struct storage_mutation *const *m, size_t n,
			  const uint8_t session[16])
{
	struct table *t = storage_engine_table_get(db, table_id);
	if (!t)
		return -1;
	pthread_mutex_lock(&db->mu);
	const struct storage_table_meta *meta = storage_table_meta_ref(t->meta);
	pthread_mutex_unlock(&db->mu);
	struct memtable *mt = memtable_new(meta);
	int rc = mt ? 0 : err_set(ERR_NOMEM, "repair ingest");
	for (size_t i = 0; !rc && i < n; i++) {
		rc = storage_mutation_validate(meta, m[i]);
		if (!rc) {
			pthread_mutex_lock(&db->mu);
			rc = storage_engine_validate(t, m[i]);
			pthread_mutex_unlock(&db->mu);
		}
		rc = rc || memtable_apply(mt, m[i]);
	}
	struct sstable *s = NULL;
	if (!rc && !memtable_is_empty(mt))
		rc = storage_engine_write_memtable(db, t, meta, mt, session,
						   &s);
	if (s) {
		pthread_mutex_lock(&db->mu);
		struct version *nv =
			t->dropped || t->truncating
				? NULL
				: storage_version_edit(t->version, NULL, 0, s);
		if (nv) {
			storage_version_unref(t->version);
			t->version = nv;
			db->compaction_wanted = true;
			pthread_cond_broadcast(&db->work);
		} else {
			sstable_mark_obsolete(s);
			rc = err_set(ERR_CLOSED, "table truncated or dropped");
		}
		pthread_mutex_unlock(&db->mu);
		sstable_unref(s);
	}
	memtable_unref(mt);
	storage_table_meta_unref(meta);
	storage_engine_table_unref(t);
	return rc;
}

int storage_repair_counts(struct storage *db, const uint8_t table_id[16],
			  struct storage_repair_counts *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, table_id);
	for (size_t i = 0; t && i < t->version->count; i++) {
		const struct sstable *s = t->version->ssts[i];
		uint64_t b = s->stats.data_size;
		if (!no_session(s->stats.pending_repair)) {
			out->pending++;
			out->pending_bytes += b;
		} else if (s->stats.repaired_at) {
			out->repaired++;
			out->repaired_bytes += b;
		} else {
			out->unrepaired++;
			out->unrepaired_bytes += b;
		}
	}
	pthread_mutex_unlock(&db->mu);
	return t ? 0 : err_set(ERR_NOT_FOUND, "unknown table");
}

int storage_sstables(struct storage *db, const uint8_t table_id[16],
		     storage_sstable_fn each, void *arg)
{
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, table_id);
	size_t n = t ? t->version->count : 0;
	struct sstable **a = t ? calloc(n + 1, sizeof(*a)) : NULL;
	struct sst_stats *st = t ? calloc(n + 1, sizeof(*st)) : NULL;
	for (size_t i = 0; a && st && i < n; i++) {
		a[i] = t->version->ssts[i];
		st[i] = a[i]->stats; /* set_state changes it under the lock */
		sstable_ref(a[i]);
	}
	pthread_mutex_unlock(&db->mu);
	if (!t)
		return err_set(ERR_NOT_FOUND, "unknown table");
	if (!a || !st) {
		for (size_t i = 0; a && st && i < n; i++)
			sstable_unref(a[i]);
		free(a);
		free(st);
		return err_set(ERR_NOMEM, "sstables");
	}
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct sstable *s = a[i];
		const struct sst_stats *ss = &st[i];
		char *p = sst_path(s->dir, s->gen, "", false);
		if (!p)
			rc = -1;
		if (p) {
			size_t l = strlen(p);
			if (l && p[l - 1] == '-')
				p[l - 1] = 0; /* ".../ca-GEN" */
			struct storage_sstable_info in = {
				.gen = s->gen,
				.path = p,
				.repaired_at = ss->repaired_at,
				.pending = !no_session(ss->pending_repair),
				.level = ss->level,
				.min_token = ss->min_token,
				.max_token = ss->max_token,
				.partitions = ss->partition_count,
				.data_bytes = ss->data_size};
			memcpy(in.pending_repair, ss->pending_repair, 16);
			each(arg, &in);
			free(p);
		}
		sstable_unref(s);
	}
	free(a);
	free(st);
	return rc;
}
