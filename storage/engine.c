/*
 * The engine: lifecycle, tables, the write path, flushes, statistics.
 * Reads are in engine_read.c, compaction in compaction.c.
 */
#define LOG_MODULE "storage"
#include "storage/engine_internal.h"

#include "common/err.h"
#include "common/log.h"
#include "common/ratelimit.h"
#include "common/thread.h"
#include "conf/conf.h"

#include <errno.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void storage_options_default(struct storage_options *o)
{
	memset(o, 0, sizeof(*o));
	o->commitlog_sync = CONF_COMMITLOG_SYNC_PERIODIC;
	o->commitlog_sync_period_ms = 10000;
	o->commitlog_sync_group_window_ms = 1000;
	o->commitlog_segment_size = 32u << 20;
	o->commit_failure_policy = CONF_POLICY_STOP;
	o->disk_failure_policy = CONF_POLICY_STOP;
	o->memtable_heap_space = 128u << 20;
	o->memtable_cleanup_threshold = 0.33;
	o->write_wait_ms = 2000;
	o->compaction_throughput = 64u << 20;
	o->tombstone_warn_threshold = 1000;
	o->tombstone_failure_threshold = 100000;
	o->auto_compaction = true;
	o->block_cache_size = 32u << 20;
}

void storage_options_from_conf(struct storage_options *o, const struct conf *c,
			       struct env *env)
{
	storage_options_default(o);
	o->env = env;
	o->data_dir = c->data_file_directories.count
			      ? c->data_file_directories.items[0]
			      : NULL;
	o->commitlog_dir = c->commitlog_directory;
	o->commitlog_sync = (int)c->commitlog_sync;
	o->commitlog_sync_period_ms = c->commitlog_sync_period_ms;
	o->commitlog_sync_group_window_ms = c->commitlog_sync_group_window_ms;
	o->commitlog_segment_size = c->commitlog_segment_size;
	o->commit_failure_policy = (int)c->commit_failure_policy;
	o->disk_failure_policy = (int)c->disk_failure_policy;
	o->memtable_heap_space = c->memtable_heap_space;
	o->memtable_cleanup_threshold = c->memtable_cleanup_threshold;
	o->write_wait_ms = c->write_request_timeout_ms;
	o->compaction_throughput = c->compaction_throughput;
	o->tombstone_warn_threshold = c->tombstone_warn_threshold;
	o->tombstone_failure_threshold = c->tombstone_failure_threshold;
}

int64_t storage_engine_now_sec(struct storage *db)
{
	return env_wall_us(db->o.env) / 1000000;
}

struct storage *storage_new(const struct storage_options *o)
{
	if (!o->env || !o->data_dir || !o->commitlog_dir) {
		err_set(ERR_INVALID, "storage needs an env and directories");
		return NULL;
	}
	struct storage *db = calloc(1, sizeof(*db));
	if (!db) {
		err_set(ERR_NOMEM, "storage");
		return NULL;
	}
	db->o = *o;
	db->data_dir = strdup(o->data_dir);
	db->commitlog_dir = strdup(o->commitlog_dir);
	if (!db->data_dir || !db->commitlog_dir) {
		free(db->data_dir);
		free(db->commitlog_dir);
		free(db);
		err_set(ERR_NOMEM, "storage");
		return NULL;
	}
	db->o.data_dir = db->data_dir;
	db->o.commitlog_dir = db->commitlog_dir;
	db->cache = storage_block_cache_new(o->block_cache_size);
	db->budget = ratelimit_new(o->compaction_throughput);
	if (!db->cache || !db->budget) {
		storage_block_cache_delete(db->cache);
		ratelimit_delete(db->budget);
		free(db->data_dir);
		free(db->commitlog_dir);
		free(db);
		return NULL;
	}
	pthread_mutex_init(&db->mu, NULL);
	pthread_cond_init(&db->work, NULL);
	pthread_cond_init(&db->done, NULL);
	buf_init(&db->scratch);
	db->waiting_tail = &db->waiting;
	return db;
}

/* ---- versions ------------------------------------------------------------ */

void storage_version_ref(struct version *v)
{
	atomic_fetch_add(&v->refs, 1);
}

void storage_version_unref(struct version *v)
{
	if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	for (size_t i = 0; i < v->count; i++)
		sstable_unref(v->ssts[i]);
	free(v->ssts);
	free(v);
}

struct version *storage_version_edit(const struct version *old,
				     struct sstable *const *drop, size_t ndrop,
				     struct sstable *add)
{
	return storage_version_edit_many(old, drop, ndrop, add ? &add : NULL,
					 add ? 1 : 0);
}

struct version *storage_version_edit_many(const struct version *old,
					  struct sstable *const *drop,
					  size_t ndrop,
					  struct sstable *const *add,
					  size_t nadd)
{
	struct version *v = calloc(1, sizeof(*v));
	size_t cap = (old ? old->count : 0) + nadd + 1;
	if (!v || !(v->ssts = calloc(cap, sizeof(*v->ssts)))) {
		free(v);
		err_set(ERR_NOMEM, "version");
		return NULL;
	}
	atomic_init(&v->refs, 1);
	for (size_t i = 0; i < nadd; i++) {
		sstable_ref(add[i]);
		v->ssts[v->count++] = add[i];
	}
	for (size_t i = 0; old && i < old->count; i++) {
		bool dropped = false;
		for (size_t j = 0; j < ndrop; j++)
			dropped |= old->ssts[i] == drop[j];
		if (dropped)
			continue;
		sstable_ref(old->ssts[i]);
		v->ssts[v->count++] = old->ssts[i];
	}
	/* newest first: by generation */
	for (size_t i = 1; i < v->count; i++)
		for (size_t j = i;
		     j > 0 && v->ssts[j]->gen > v->ssts[j - 1]->gen; j--) {
			struct sstable *t = v->ssts[j];
			v->ssts[j] = v->ssts[j - 1];
			v->ssts[j - 1] = t;
		}
	return v;
}

/* ---- tables -------------------------------------------------------------- */

/* Under the lock: where id is, or would go, in db->by_id. */
static size_t by_id_pos(const struct storage *db, const uint8_t id[16],
			bool *found)
{
	size_t lo = 0, hi = db->nby_id;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = memcmp(db->by_id[mid]->meta->id, id, 16);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

struct table *storage_engine_table_find(struct storage *db,
					const uint8_t id[16])
{
	bool found;
	size_t i = by_id_pos(db, id, &found);
	return found ? db->by_id[i] : NULL;
}

struct table *storage_engine_table_get(struct storage *db, const uint8_t id[16])
{
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, id);
	if (t)
		storage_engine_table_ref(t);
	pthread_mutex_unlock(&db->mu);
	if (!t)
		err_set(ERR_NOT_FOUND, "unknown table");
	return t;
}

void storage_engine_table_ref(struct table *t)
{
	atomic_fetch_add(&t->refs, 1);
}

static void table_free(struct table *t);

void storage_engine_table_unref(struct table *t)
{
	if (t && atomic_fetch_sub(&t->refs, 1) == 1)
		table_free(t);
}

uint64_t storage_engine_next_gen(struct storage *db, struct table *t)
{
	pthread_mutex_lock(&db->mu);
	uint64_t g = t->next_gen++;
	pthread_mutex_unlock(&db->mu);
	return g;
}

static char *table_dir(const char *data_dir, const struct storage_table_meta *m)
{
	size_t n =
		strlen(data_dir) + strlen(m->keyspace) + strlen(m->name) + 48;
	char *p = malloc(n);
	if (!p)
		return NULL;
	int k = snprintf(p, n, "%s/%s/%s-", data_dir, m->keyspace, m->name);
	for (int i = 0; i < 16; i++)
		k += snprintf(p + k, n - (size_t)k, "%02x", m->id[i]);
	return p;
}

static void table_free(struct table *t)
{
	if (t->dropped && t->dir) {
		/* nothing uses the table any more: its directory goes if
		 * empty (a dropped table's SSTables stay, and so does it);
		 * the error slot is the caller's */
		enum err_code code = err_code();
		char msg[ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		env_rmdir(t->env, t->dir);
		if (code == ERR_NONE)
			err_clear();
		else
			err_set(code, "%s", msg);
	}
	memtable_unref(t->active);
	for (size_t i = 0; i < t->flushing_count; i++)
		memtable_unref(t->flushing[i]);
	free(t->flushing);
	for (size_t i = 0; i < t->trunc_count; i++)
		memtable_unref(t->trunc_mts[i]);
	free(t->trunc_mts);
	storage_version_unref(t->version);
	storage_table_meta_unref(t->meta);
	free(t->dir);
	free(t);
}

/* ---- truncation records ---------------------------------------------------
 *
 * <table dir>/truncated.txt, one line, written atomically (temp file, fsync,
 * rename, fsync of the directory) before anything is dropped:
 *
 *   1 <commitlog segment> <offset> <max truncated generation> <wall us>
 *
 * Replay skips the table's records ending at or before the position, and
 * a restart deletes SSTables of the table up to the generation (left behind
 * by a crash between the record and the unlinks) and numbers new ones above
 * it. The wall-clock time (microseconds) lets hint delivery drop hints
 * older than the truncate (storage_truncated_at). A truncate replaces the
 * record; dropping the table drops its
 * directory, and the record with it. */

static char *truncation_path(const struct table *t)
{
	size_t n = strlen(t->dir) + sizeof("/truncated.txt");
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/truncated.txt", t->dir);
	return p;
}

static int truncation_load(struct storage *db, struct table *t)
{
	char *p = truncation_path(t);
	if (!p)
		return err_set(ERR_NOMEM, "truncation record");
	int ex = env_exists(db->o.env, p);
	uint8_t *data = NULL;
	size_t len = 0;
	if (ex != 1 || env_read_file(db->o.env, p, 256, &data, &len)) {
		free(p);
		return ex < 0 || ex == 1 ? -1 : 0;
	}
	char text[257];
	memcpy(text, data, len);
	text[len] = 0;
	free(data);
	unsigned long long seg, off, gen;
	long long wall;
	int version, used = 0;
	int rc = 0;
	if (sscanf(text, "%d %llu %llu %llu %lld\n%n", &version, &seg, &off,
		   &gen, &wall, &used) != 5 ||
	    version != 1 || (size_t)used != len) {
		rc = err_set(ERR_CORRUPT, "%s: malformed truncation record", p);
	} else {
		t->truncated_at = (struct clpos){seg, off};
		t->truncated_gen = gen;
		t->truncated_wall_us = wall;
	}
	free(p);
	return rc;
}

static int truncation_save(struct storage *db, const struct table *t,
			   struct clpos at, uint64_t gen, int64_t wall_us)
{
	char text[128];
	int n = snprintf(text, sizeof(text),
			 "1 %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 "\n",
			 at.seg, at.off, gen, wall_us);
	char *p = truncation_path(t);
	if (!p)
		return err_set(ERR_NOMEM, "truncation record");
	int rc = env_write_file_atomic(db->o.env, p, text, (size_t)n);
	free(p);
	return rc;
}

static int table_load(struct storage *db, struct table *t)
{
	uint64_t *gens = NULL;
	size_t n = 0;
	if (env_mkdir_p(db->o.env, t->dir) || truncation_load(db, t) ||
	    storage_engine_compaction_recover(db, t) ||
	    sst_dir_scan(db->o.env, t->dir, &gens, &n))
		return -1;
	struct version *v = storage_version_edit(NULL, NULL, 0, NULL);
	if (!v) {
		free(gens);
		return -1;
	}
	t->version = v;
	t->next_gen = 1;
	for (size_t i = 0; i < n; i++) {
		if (gens[i] <= t->truncated_gen) {
			/* a crash came between the record and the unlinks */
			storage_engine_remove_generation(db->o.env, t->dir,
							 gens[i]);
			continue;
		}
		struct sstable *s = sstable_open(db->o.env, t->dir, gens[i],
						 t->meta, db->cache);
		if (!s) {
			free(gens);
			return err_prefix("table %s.%s", t->meta->keyspace,
					  t->meta->name);
		}
		struct version *nv =
			storage_version_edit(t->version, NULL, 0, s);
		sstable_unref(s);
		if (!nv) {
			free(gens);
			return -1;
		}
		storage_version_unref(t->version);
		t->version = nv;
		if (clpos_cmp(s->stats.log_end, t->flushed) > 0)
			t->flushed = s->stats.log_end;
		if (gens[i] >= t->next_gen)
			t->next_gen = gens[i] + 1;
	}
	free(gens);
	if (t->truncated_gen >= t->next_gen)
		t->next_gen = t->truncated_gen + 1;
	if (clpos_cmp(t->truncated_at, t->flushed) > 0)
		t->flushed = t->truncated_at;
	return 0;
}

int storage_table_add(struct storage *db, const struct storage_table_meta *m,
		      bool durable_writes)
{
	struct table *t = calloc(1, sizeof(*t));
	if (!t)
		return err_set(ERR_NOMEM, "table");
	atomic_init(&t->refs, 1); /* the list's */
	t->env = db->o.env;
	t->durable = durable_writes;
	t->meta = storage_table_meta_clone(m);
	t->dir = t->meta ? table_dir(db->data_dir, t->meta) : NULL;
	if (!t->meta || !t->dir || !(t->active = memtable_new(t->meta))) {
		table_free(t);
		return err_set(ERR_NOMEM, "table");
	}
	pthread_mutex_lock(&db->mu);
	bool dup = storage_engine_table_find(db, m->id) != NULL;
	pthread_mutex_unlock(&db->mu);
	if (dup) {
		table_free(t);
		return err_set(ERR_EXISTS, "table %s.%s already added",
			       m->keyspace, m->name);
	}
	if (table_load(db, t)) {
		table_free(t);
		return -1;
	}
	pthread_mutex_lock(&db->mu);
	bool found;
	size_t at = by_id_pos(db, m->id, &found);
	if (!found && db->nby_id == db->by_id_cap) {
		size_t cap = db->by_id_cap ? 2 * db->by_id_cap : 16;
		struct table **p = realloc(db->by_id, cap * sizeof(*p));
		if (p) {
			db->by_id = p;
			db->by_id_cap = cap;
		}
	}
	if (found || db->nby_id == db->by_id_cap) {
		pthread_mutex_unlock(&db->mu);
		table_free(t);
		return found ? err_set(ERR_EXISTS, "table %s.%s already added",
				       m->keyspace, m->name)
			     : err_set(ERR_NOMEM, "table");
	}
	memmove(db->by_id + at + 1, db->by_id + at,
		(db->nby_id - at) * sizeof(*db->by_id));
	db->by_id[at] = t;
	db->nby_id++;
	t->next = db->tables;
	db->tables = t;
	pthread_mutex_unlock(&db->mu);
	return 0;
}

int storage_table_update(struct storage *db, const struct storage_table_meta *m)
{
	struct storage_table_meta *next = storage_table_meta_clone(m);
	struct memtable *fresh = next ? memtable_new(next) : NULL;
	if (!fresh) {
		storage_table_meta_delete(next);
		return err_set(ERR_NOMEM, "table update");
	}
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, m->id);
	int rc = 0;
	if (!t)
		rc = err_set(ERR_NOT_FOUND, "table %s.%s is not registered",
			     m->keyspace, m->name);
	else
		rc = storage_table_meta_check_successor(t->meta, next);
	/* The active memtable orders collection elements by its meta's
	 * types: new columns go to a memtable made with the new version. */
	if (!rc && !memtable_is_empty(t->active)) {
		struct memtable **q = realloc(
			t->flushing, (t->flushing_count + 1) * sizeof(*q));
		if (!q)
			rc = err_set(ERR_NOMEM, "table update");
		else
			t->flushing = q;
	}
	if (rc) {
		pthread_mutex_unlock(&db->mu);
		memtable_unref(fresh);
		storage_table_meta_delete(next);
		return -1;
	}
	const struct storage_table_meta *prev = t->meta;
	t->meta = next;
	if (memtable_is_empty(t->active)) {
		memtable_unref(t->active);
	} else {
		t->flushing[t->flushing_count++] = t->active;
		pthread_cond_broadcast(&db->work);
	}
	t->active = fresh;
	pthread_mutex_unlock(&db->mu);
	/* the memtables, SSTables and reads of the earlier version keep
	 * their references to it */
	storage_table_meta_unref(prev);
	return 0;
}

int storage_table_drop(struct storage *db, const uint8_t id[16])
{
	pthread_mutex_lock(&db->mu);
	struct table **pp = &db->tables;
	while (*pp && memcmp((*pp)->meta->id, id, 16) != 0)
		pp = &(*pp)->next;
	struct table *t = *pp;
	size_t nsst = 0;
	if (t) {
		bool found;
		size_t at = by_id_pos(db, id, &found);
		memmove(db->by_id + at, db->by_id + at + 1,
			(db->nby_id - at - 1) * sizeof(*db->by_id));
		db->nby_id--;
		*pp = t->next;
		t->next = NULL;
		t->dropped = true;
		nsst = t->version->count;
		/* its memtables no longer count against memtable_heap_space:
		 * writes waiting for room may go, and waiters wake */
		if (db->waiting && !db->take_wanted) {
			db->take_wanted = true;
			pthread_cond_broadcast(&db->work);
		}
		pthread_cond_broadcast(&db->done);
	}
	pthread_mutex_unlock(&db->mu);
	if (!t)
		return err_set(ERR_NOT_FOUND, "unknown table");
	/* t->meta and t->dir no longer change: nothing updates an unlinked
	 * table */
	LOG_AT(LOG_LEVEL_INFO, "dropped table %s.%s (%zu sstables kept in %s)",
	       t->meta->keyspace, t->meta->name, nsst, t->dir);
	storage_engine_table_unref(t); /* the list's */
	return 0;
}

/* ---- flushing ------------------------------------------------------------ */

/* Under the lock: queues the active memtable for flushing. */
static int switch_memtable(struct storage *db, struct table *t)
{
	if (memtable_is_empty(t->active))
		return 0;
	struct memtable *fresh = memtable_new(t->meta);
	struct memtable **q =
		realloc(t->flushing, (t->flushing_count + 1) * sizeof(*q));
	if (!fresh || !q) {
		memtable_unref(fresh);
		if (q)
			t->flushing = q;
		return err_set(ERR_NOMEM, "memtable switch");
	}
	t->flushing = q;
	q[t->flushing_count++] = t->active;
	t->active = fresh;
	pthread_cond_broadcast(&db->work);
	return 0;
}

/* `meta`: the table's newest version (its options apply to the new
 * SSTable), a reference the caller holds. */
static int write_memtable(struct storage *db, struct table *t,
			  const struct storage_table_meta *meta,
			  struct memtable *mt, struct sstable **out)
{
	struct sst_writer_options o = {
		.compression = meta->options.compression,
		.block_size = meta->options.chunk_length,
		.bloom_fp = meta->options.bloom_filter_fp_chance,
		.expected_partitions = atomic_load(&mt->parts.count),
		.log_end = {mt->log_end_seg, mt->log_end_off},
		.created_at = storage_engine_now_sec(db),
	};
	uint64_t gen = storage_engine_next_gen(db, t);
	struct sst_writer *w = sst_writer_new(db->o.env, t->dir, gen, meta, &o);
	if (!w)
		return -1;
	for (struct skiplist_node *n = skiplist_seek(&mt->parts, NULL); n;
	     n = skiplist_next(n)) {
		struct mt_partition *p = mt_node_partition(n);
		struct mt_pmeta *pm = mt_partition_meta(p);
		struct deletion none = {DELETION_NONE, 0};
		if (sst_writer_begin(w, p->token, p->key, pm ? pm->pdel : none,
				     pm ? pm->rts : NULL,
				     pm ? pm->rt_count : 0))
			goto fail;
		for (struct skiplist_node *a = skiplist_seek(&p->atoms, NULL);
		     a; a = skiplist_next(a))
			if (sst_writer_atom(w, skiplist_key(a)))
				goto fail;
		if (sst_writer_end(w))
			goto fail;
	}
	if (sst_writer_finish(w))
		return -1;
	*out = sstable_open(db->o.env, t->dir, gen, meta, db->cache);
	return *out ? 0 : -1;
fail:
	sst_writer_abort(w);
	return -1;
}

/* Under the lock: the oldest commitlog position some memtable still
 * needs. */
static struct clpos needed_position(struct storage *db)
{
	struct clpos min = {UINT64_MAX, UINT64_MAX};
	for (struct table *t = db->tables; t; t = t->next) {
		for (size_t i = 0; i <= t->flushing_count; i++) {
			struct memtable *m = i < t->flushing_count
						     ? t->flushing[i]
						     : t->active;
			struct clpos p = {m->log_first_seg, m->log_first_off};
			if (m->has_log_pos && clpos_cmp(p, min) < 0)
				min = p;
		}
		/* set aside by a truncate whose record is not durable yet */
		for (size_t i = 0; i < t->trunc_count; i++) {
			struct memtable *m = t->trunc_mts[i];
			struct clpos p = {m->log_first_seg, m->log_first_off};
			if (m->has_log_pos && clpos_cmp(p, min) < 0)
				min = p;
		}
	}
	return min;
}

static void discard_log(struct storage *db)
{
	if (!db->cl)
		return;
	pthread_mutex_lock(&db->mu);
	struct clpos need = needed_position(db);
	pthread_mutex_unlock(&db->mu);
	if (need.seg == UINT64_MAX)
		need = commitlog_position(db->cl);
	commitlog_discard_before(db->cl, need);
}

static void stop_writes(struct storage *db, const char *why)
{
	if (db->writes_stopped)
		return;
	db->writes_stopped = true;
	db->stop_code = err_code() ? err_code() : ERR_IO;
	snprintf(db->stop_msg, sizeof(db->stop_msg), "%s: %s", why, err_msg());
	LOG_AT(LOG_LEVEL_ERROR, "writes stopped: %s", db->stop_msg);
}

static void take_waiting(struct storage *db);

/* Flushes the oldest queued memtable of `t`. Lock not held. */
static int flush_one(struct storage *db, struct table *t)
{
	pthread_mutex_lock(&db->mu);
	if (!t->flushing_count || t->dropped) {
		pthread_mutex_unlock(&db->mu);
		return 0;
	}
	struct memtable *mt = t->flushing[0];
	const struct storage_table_meta *meta = storage_table_meta_ref(t->meta);
	pthread_mutex_unlock(&db->mu);
	struct sstable *s = NULL;
	int rc = write_memtable(db, t, meta, mt, &s);
	storage_table_meta_unref(meta);
	pthread_mutex_lock(&db->mu);
	struct version *nv =
		rc ? NULL : storage_version_edit(t->version, NULL, 0, s);
	if (!rc && !nv)
		rc = -1;
	if (rc) {
		t->flush_failed = true;
		stop_writes(db, "memtable flush failed");
	} else {
		storage_version_unref(t->version);
		t->version = nv;
		struct clpos end = {mt->log_end_seg, mt->log_end_off};
		if (clpos_cmp(end, t->flushed) > 0)
			t->flushed = end;
		memmove(t->flushing, t->flushing + 1,
			(t->flushing_count - 1) * sizeof(*t->flushing));
		t->flushing_count--;
		t->flushes++;
		db->compaction_wanted = true;
	}
	pthread_cond_broadcast(&db->done);
	pthread_cond_broadcast(&db->work);
	pthread_mutex_unlock(&db->mu);
	sstable_unref(s);
	if (!rc) {
		memtable_unref(mt);
		discard_log(db);
#ifdef __GLIBC__
		/* A flushed memtable frees hundreds of arena blocks; glibc
		 * keeps them in the heap unless asked to give them back. */
		malloc_trim(0);
#endif
		take_waiting(db);
	}
	return rc;
}

static void *flusher_main(void *arg)
{
	struct storage *db = arg;
	thread_name_self("flush");
	thread_background();
	pthread_mutex_lock(&db->mu);
	while (!db->stopping) {
		if (db->take_wanted) {
			db->take_wanted = false;
			pthread_mutex_unlock(&db->mu);
			take_waiting(db);
			pthread_mutex_lock(&db->mu);
			continue;
		}
		struct table *t = db->tables;
		while (t && (!t->flushing_count || t->flush_failed))
			t = t->next;
		if (!t) {
			pthread_cond_wait(&db->work, &db->mu);
			continue;
		}
		storage_engine_table_ref(
			t); /* a DROP may unlink it meanwhile */
		pthread_mutex_unlock(&db->mu);
		flush_one(db, t);
		storage_engine_table_unref(t);
		pthread_mutex_lock(&db->mu);
	}
	pthread_mutex_unlock(&db->mu);
	return NULL;
}

int storage_flush(struct storage *db, const uint8_t *table_id)
{
	pthread_mutex_lock(&db->mu);
	int rc = 0;
	for (struct table *t = db->tables; t && !rc; t = t->next) {
		if (table_id && memcmp(t->meta->id, table_id, 16) != 0)
			continue;
		t->flush_failed = false; /* retry */
		rc = switch_memtable(db, t);
	}
	bool busy = true;
	while (!rc && busy) {
		busy = false;
		for (struct table *t = db->tables; t; t = t->next) {
			if (table_id && memcmp(t->meta->id, table_id, 16) != 0)
				continue;
			if (t->flush_failed && t->flushing_count)
				rc = err_set(db->stop_code, "flush failed: %s",
					     db->stop_msg);
			else if (t->flushing_count)
				busy = true;
		}
		if (busy && !rc) {
			if (!db->started) { /* no flusher yet: do it here */
				struct table *t = db->tables;
				while (t && !t->flushing_count)
					t = t->next;
				if (!t)
					break;
				storage_engine_table_ref(t);
				pthread_mutex_unlock(&db->mu);
				rc = flush_one(db, t);
				storage_engine_table_unref(t);
				pthread_mutex_lock(&db->mu);
			} else {
				pthread_cond_wait(&db->done, &db->mu);
			}
		}
	}
	pthread_mutex_unlock(&db->mu);
	return rc;
}

/* ---- truncate ------------------------------------------------------------ */

/* Under the lock, after a failed truncation record: the memtables and
 * SSTables set aside come back, ahead of what arrived meanwhile. */
static void truncate_restore(struct storage *db, struct table *t,
			     struct version *old)
{
	size_t n = t->trunc_count + t->flushing_count;
	struct memtable **q = malloc((n ? n : 1) * sizeof(*q));
	struct version *v = old;
	storage_version_ref(v);
	for (size_t i = 0; v && i < t->version->count; i++) {
		struct version *nv =
			storage_version_edit(v, NULL, 0, t->version->ssts[i]);
		storage_version_unref(v);
		v = nv;
	}
	if (!q || !v) {
		/* the commitlog still holds it all: a restart restores it */
		free(q);
		storage_version_unref(v);
		stop_writes(db, "truncate rollback failed");
		return;
	}
	memcpy(q, t->trunc_mts, t->trunc_count * sizeof(*q));
	if (t->flushing_count)
		memcpy(q + t->trunc_count, t->flushing,
		       t->flushing_count * sizeof(*q));
	free(t->flushing);
	t->flushing = q;
	t->flushing_count = n;
	free(t->trunc_mts);
	t->trunc_mts = NULL;
	t->trunc_count = 0;
	storage_version_unref(t->version);
	t->version = v;
	pthread_cond_broadcast(&db->work);
}

int storage_truncate(struct storage *db, const uint8_t table_id[16])
{
	struct version *empty = storage_version_edit(NULL, NULL, 0, NULL);
	if (!empty)
		return -1;
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, table_id);
	if (t) /* held across the waits and the record's fsync */
		storage_engine_table_ref(t);
	struct memtable *fresh = t ? memtable_new(t->meta) : NULL;
	/* for the messages below, written without the lock */
	const struct storage_table_meta *meta =
		t ? storage_table_meta_ref(t->meta) : NULL;
	int rc = 0;
	if (!db->started)
		rc = err_set(ERR_CLOSED, "storage is not started");
	else if (!t)
		rc = err_set(ERR_NOT_FOUND, "unknown table");
	else if (!fresh)
		rc = err_set(ERR_NOMEM, "memtable");
	/* A running compaction or flush of the table would publish an
	 * SSTable of the truncated past: let it finish first. (A failed
	 * flush is not running; its memtables are set aside below.) */
	while (!rc && !db->stopping && !t->dropped &&
	       (t->compacting || t->truncating ||
		(t->flushing_count && !t->flush_failed)))
		pthread_cond_wait(&db->done, &db->mu);
	if (!rc && db->stopping)
		rc = err_set(ERR_CLOSED, "storage is stopping");
	else if (!rc && t->dropped)
		rc = err_set(ERR_NOT_FOUND, "unknown table (dropped)");
	struct memtable **mts =
		rc ? NULL
		   : malloc((t->flushing_count + 1) * sizeof(*t->trunc_mts));
	if (!rc && !mts)
		rc = err_set(ERR_NOMEM, "truncate");
	if (rc) {
		pthread_mutex_unlock(&db->mu);
		memtable_unref(fresh);
		storage_version_unref(empty);
		storage_table_meta_unref(meta);
		storage_engine_table_unref(t);
		return -1;
	}
	/* Writes log and apply under db->mu, so every record logged before
	 * this point ends at or before it and went to the memtables set
	 * aside here; every later one ends after it and goes to `fresh`.
	 * Reads see the truncated table from now on; the lock is not held
	 * across the record's fsync. */
	struct clpos at = commitlog_position(db->cl);
	uint64_t gen = t->next_gen - 1;
	int64_t wall = env_wall_us(db->o.env);
	if (t->flushing_count)
		memcpy(mts, t->flushing, t->flushing_count * sizeof(*mts));
	mts[t->flushing_count] = t->active;
	t->trunc_mts = mts;
	t->trunc_count = t->flushing_count + 1;
	free(t->flushing);
	t->flushing = NULL;
	t->flushing_count = 0;
	t->flush_failed = false;
	t->active = fresh;
	struct version *old = t->version;
	t->version = empty;
	t->truncating = true; /* no compaction, no other truncate */
	pthread_mutex_unlock(&db->mu);

	rc = truncation_save(db, t, at, gen, wall);
	if (rc)
		err_prefix("truncate of %s.%s", meta->keyspace, meta->name);

	pthread_mutex_lock(&db->mu);
	mts = t->trunc_mts;
	size_t nmts = t->trunc_count;
	if (rc) {
		truncate_restore(db, t, old);
		mts = NULL;
		nmts = 0;
	} else {
		t->truncated_at = at;
		t->truncated_gen = gen;
		t->truncated_wall_us = wall;
		if (clpos_cmp(at, t->flushed) > 0)
			t->flushed = at;
		/* the last reader's unref deletes the files */
		for (size_t i = 0; i < old->count; i++)
			sstable_mark_obsolete(old->ssts[i]);
		t->trunc_mts = NULL;
		t->trunc_count = 0;
	}
	t->truncating = false;
	pthread_cond_broadcast(&db->done);
	pthread_mutex_unlock(&db->mu);
	if (!rc)
		LOG_AT(LOG_LEVEL_INFO,
		       "truncated %s.%s (%zu sstables) at commitlog %" PRIu64
		       ":%" PRIu64,
		       meta->keyspace, meta->name, old->count, at.seg, at.off);
	for (size_t i = 0; i < nmts; i++)
		memtable_unref(mts[i]);
	free(mts);
	storage_version_unref(old);
	storage_table_meta_unref(meta);
	storage_engine_table_unref(t);
	discard_log(db);
	return rc ? -1 : 0;
}

int64_t storage_truncated_at(struct storage *db, const uint8_t table_id[16])
{
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, table_id);
	int64_t wall = t ? t->truncated_wall_us : 0;
	pthread_mutex_unlock(&db->mu);
	return wall;
}

/* ---- the write path ------------------------------------------------------ */

static int validate(const struct table *t, const struct storage_mutation *m)
{
	for (size_t i = 0; i < m->atom_count; i++) {
		const struct atom *a = &m->atoms[i];
		if (a->slot > t->meta->column_count)
			return err_set(ERR_INVALID,
				       "mutation for %s.%s names "
				       "column %u it does not have",
				       t->meta->keyspace, t->meta->name,
				       a->slot - 1);
		int kind;
		struct slice vals[33];
		int n = storage_ck_decode(a->ck, &kind, vals, 33);
		if (n < 0 ||
		    (kind == CK_ROW && (size_t)n != t->meta->ck_count) ||
		    (kind == CK_STATIC && n != 0))
			return err_set(ERR_INVALID,
				       "mutation for %s.%s has a "
				       "malformed clustering",
				       t->meta->keyspace, t->meta->name);
	}
	/* decoded mutations (read repair, hints) carry bounds unchecked */
	for (size_t i = 0; i < m->rt_count; i++) {
		int kind;
		struct slice vals[33];
		int ns = storage_ck_decode(m->rts[i].start, &kind, vals, 33);
		int ne = storage_ck_decode(m->rts[i].end, &kind, vals, 33);
		if (ns < 0 || ne < 0 || (size_t)ns > t->meta->ck_count ||
		    (size_t)ne > t->meta->ck_count)
			return err_set(ERR_INVALID,
				       "mutation for %s.%s has a "
				       "malformed range tombstone",
				       t->meta->keyspace, t->meta->name);
	}
	return 0;
}

#define FULL_LOG_EVERY_US (10u * 1000000u)

/* Logs a change of the memtables_full state: a spell of waits is
 * announced unless one was in the last 10 s (then the next announcement
 * counts them), and its end only if it was announced. */
static void note_full(struct storage *db, bool full, size_t bytes,
		      size_t queued)
{
	if (full && !db->memtables_full) {
		uint64_t now = env_mono_us(db->o.env);
		db->full_spells++;
		db->full_announced =
			db->full_logged_us == 0 ||
			now - db->full_logged_us >= FULL_LOG_EVERY_US;
		if (db->full_announced) {
			char since[64] = "";
			if (db->full_spells > 1)
				snprintf(since, sizeof(since),
					 " (%u times since the last such line)",
					 db->full_spells);
			LOG_WARN("memtables hold %zu KiB (%zu of them waiting "
				 "for a flush), all of memtable_heap_space: "
				 "writes wait until flushes catch up%s",
				 bytes >> 10, queued, since);
			db->full_logged_us = now;
			db->full_spells = 0;
		}
	} else if (!full && db->memtables_full && db->full_announced) {
		LOG_INFO("memtables have room again (%zu KiB): writes are "
			 "applied at once",
			 bytes >> 10);
	}
	db->memtables_full = full;
}

/* What the memtables hold (memtable_data_bytes), measured once a write
 * under the lock for the two decisions below. */
struct mem_use {
	size_t active;     /* memtables taking writes */
	size_t flushing;   /* memtables queued for or in a flush */
	size_t queued;     /* how many of those */
	struct table *big; /* the table whose active memtable holds most */
};

static void mem_use_locked(struct storage *db, struct mem_use *u)
{
	*u = (struct mem_use){0};
	for (struct table *t = db->tables; t; t = t->next) {
		for (size_t i = 0; i < t->flushing_count; i++)
			u->flushing += memtable_data_bytes(t->flushing[i]);
		u->queued += t->flushing_count;
		u->active += memtable_data_bytes(t->active);
		if (!u->big || memtable_data_bytes(t->active) >
				       memtable_data_bytes(u->big->active))
			u->big = t;
	}
}

/* Whether the memtables, the ones waiting for or in a flush too, hold
 * memtable_heap_space. Flushes start at the cleanup threshold, so this
 * happens only when they cannot keep up (a slow or stalled disk): writes
 * then wait for room (below) rather than being taken until the process
 * runs out of memory. */
static bool memtables_full(struct storage *db, const struct mem_use *u)
{
	size_t n = u->active + u->flushing;
	bool full = n >= db->o.memtable_heap_space;
	note_full(db, full, n, u->queued);
	return full;
}

/* Under the lock: flushes the largest memtable when the memtables not
 * already flushing hold more than cleanup_threshold of
 * memtable_heap_space (as Cassandra's memtable_cleanup_threshold). While
 * a flush is queued, one holding less than an eighth of that waits, so
 * many small tables do not start many tiny flushes at once; with none
 * queued it goes too, or memtables of many tables, none large, would
 * never be flushed. What counts is the bytes the writes hold
 * (memtable_data_bytes), not allocated ones: a memtable's arena blocks
 * grow to 256 KiB, and counting those (the first was 256 KiB then) made a
 * small memtable_heap_space flush a memtable after every write (520
 * one-row flushes queued at 1 MiB). `u` may be a write old. */
static void maybe_flush(struct storage *db, const struct mem_use *u)
{
	double limit = (double)db->o.memtable_heap_space *
		       db->o.memtable_cleanup_threshold;
	if ((double)u->active < limit || !u->big)
		return;
	if (!u->queued ||
	    (double)memtable_data_bytes(u->big->active) > limit / 8)
		switch_memtable(db, u->big);
}

/* ---- writes that wait for memtable room ------------------------------- */

/* A write that found the memtables full (storage_apply): its mutation
 * encoded, and its acknowledgement. */
struct waiting_write {
	struct waiting_write *next;
	storage_done_fn done;
	void *arg;
	uint64_t since_us; /* env_mono_us when it arrived */
	size_t len;
	uint8_t data[];
};

/* Under the lock: queues a write behind the others that wait. -1 when
 * the waiting writes would hold more than a quarter of
 * memtable_heap_space (memory stays bounded) or on ERR_NOMEM. */
static int wait_for_room(struct storage *db, const struct storage_mutation *m,
			 storage_done_fn done, void *arg)
{
	buf_clear(&db->scratch);
	if (storage_mutation_encode(m, &db->scratch) != 0)
		return -1;
	size_t len = db->scratch.len;
	if (db->waiting_bytes + len > db->o.memtable_heap_space / 4)
		return -1;
	struct waiting_write *w = malloc(sizeof(*w) + len);
	if (!w)
		return -1;
	*w = (struct waiting_write){.done = done,
				    .arg = arg,
				    .since_us = env_mono_us(db->o.env),
				    .len = len};
	memcpy(w->data, db->scratch.data, len);
	*db->waiting_tail = w;
	db->waiting_tail = &w->next;
	db->waiting_bytes += len;
	db->waiting_count++;
	db->writes_waited++;
	return 0;
}

/* Under the lock: the oldest waiting write, unlinked (NULL: none). */
static struct waiting_write *waiting_pop(struct storage *db)
{
	struct waiting_write *w = db->waiting;
	if (!w)
		return NULL;
	db->waiting = w->next;
	if (!db->waiting)
		db->waiting_tail = &db->waiting;
	db->waiting_bytes -= w->len;
	db->waiting_count--;
	w->next = NULL;
	return w;
}

/* Under the lock: unlinks the writes that have waited write_wait_ms
 * (their coordinators answered a timeout by then), for fail_waiting. */
static struct waiting_write *waiting_expired(struct storage *db)
{
	uint64_t now = env_mono_us(db->o.env);
	struct waiting_write *out = NULL, **tail = &out;
	while (db->waiting &&
	       now - db->waiting->since_us >= db->o.write_wait_ms * 1000) {
		*tail = waiting_pop(db);
		tail = &(*tail)->next;
		db->writes_refused++;
	}
	return out;
}

/* Lock not held: fails and frees a list of waiting writes. */
static void fail_waiting(struct storage *db, struct waiting_write *w)
{
	while (w) {
		struct waiting_write *next = w->next;
		storage_post_done(db->o.post, db->o.post_arg, w->done, w->arg,
				  -1, ERR_OVERLOADED);
		free(w);
		w = next;
	}
}

static int apply(struct storage *db, const struct storage_mutation *m,
		 storage_done_fn done, void *arg, struct clpos *wait_pos,
		 bool deferred, bool waited, bool *ack_now);

/* Under the lock: whether a write must wait for room: the memtables are
 * full, or other writes wait (it goes behind them). A write that waited
 * (`waited`) never waits again: the flush thread took it when there was
 * room, and a newer write that slipped in between (the queue was empty by
 * then) must not turn it into a failure; the memtables go over by at most
 * those writes. Room that came without a flush (a TRUNCATE, a dropped
 * table) wakes the flush thread to take the waiting writes. */
static bool must_wait(struct storage *db, const struct mem_use *u, bool waited)
{
	bool full = memtables_full(db, u);
	if (!full && db->waiting && !db->take_wanted) {
		db->take_wanted = true;
		pthread_cond_broadcast(&db->work);
	}
	return !waited && (full || db->waiting);
}

/* After a flush made room, on the flush thread: applies waiting writes,
 * oldest first, while there is room, and acknowledges them through the
 * post hook. */
static void take_waiting(struct storage *db)
{
	pthread_mutex_lock(&db->mu);
	struct waiting_write *expired = waiting_expired(db);
	for (;;) {
		struct mem_use use;
		mem_use_locked(db, &use);
		struct waiting_write *w =
			memtables_full(db, &use) ? NULL : waiting_pop(db);
		if (!w)
			break;
		pthread_mutex_unlock(&db->mu);
		struct storage_mutation *m =
			storage_mutation_decode(w->data, w->len);
		bool ack_now;
		if (!m || apply(db, m, w->done, w->arg, NULL, false, true,
				&ack_now) != 0)
			storage_post_done(db->o.post, db->o.post_arg, w->done,
					  w->arg, -1, err_code());
		else if (ack_now)
			storage_post_done(db->o.post, db->o.post_arg, w->done,
					  w->arg, 0, ERR_NONE);
		storage_mutation_delete(m);
		free(w);
		pthread_mutex_lock(&db->mu);
	}
	pthread_cond_broadcast(&db->done); /* storage_wait_for_room */
	pthread_mutex_unlock(&db->mu);
	fail_waiting(db, expired);
}

/* Logs and applies. With `wait_pos` (synchronous callers) no completion
 * is registered: *wait_pos gets the position to wait for instead. */
/* `deferred` (periodic only): the record is appended without being
 * written; *ack_now then means "after storage_write_deferred". A write
 * with `done` that finds the memtables full, or other writes waiting
 * for room, waits for room too (returns 0, *ack_now false); `waited`:
 * it is such a write, taken off the queue (take_waiting). */
static int apply(struct storage *db, const struct storage_mutation *m,
		 storage_done_fn done, void *arg, struct clpos *wait_pos,
		 bool deferred, bool waited, bool *ack_now)
{
	*ack_now = false;
	pthread_mutex_lock(&db->mu);
	struct waiting_write *expired =
		db->waiting ? waiting_expired(db) : NULL;
	struct table *t = storage_engine_table_find(db, m->table_id);
	struct mem_use use;
	mem_use_locked(db, &use);
	int rc = 0;
	if (!db->started)
		rc = err_set(ERR_CLOSED, "storage is not started");
	else if (db->writes_stopped)
		rc = err_set(db->stop_code, "writes stopped: %s", db->stop_msg);
	else if (!t)
		rc = err_set(ERR_NOT_FOUND, "unknown table");
	else if ((rc = validate(t, m)) != 0)
		;
	else if (must_wait(db, &use, waited)) {
		/* writes that wait do not reach maybe_flush below, and with
		 * no flush queued nothing else would make room */
		maybe_flush(db, &use);
		if (done && !wait_pos && !waited &&
		    wait_for_room(db, m, done, arg) == 0) {
			pthread_mutex_unlock(&db->mu);
			fail_waiting(db, expired);
			return 0;
		}
		db->writes_refused++;
		rc = err_set(
			ERR_OVERLOADED,
			"memtables are full (memtable_heap_space %llu "
			"MiB) and %zu writes wait for room: flushes are "
			"behind the writes",
			(unsigned long long)(db->o.memtable_heap_space >> 20),
			db->waiting_count);
	}
	struct clpos pos = {0, 0};
	bool logged = false;
	if (!rc && t->durable) {
		buf_clear(&db->scratch);
		bool periodic =
			db->o.commitlog_sync == CONF_COMMITLOG_SYNC_PERIODIC;
		rc = storage_mutation_encode(m, &db->scratch);
		if (!rc && deferred && periodic)
			rc = commitlog_append_deferred(db->cl, db->scratch.data,
						       db->scratch.len, &pos);
		else if (!rc)
			rc = commitlog_append(
				db->cl, db->scratch.data, db->scratch.len, &pos,
				periodic || wait_pos ? NULL : done, arg);
		if (!rc && wait_pos && !periodic)
			*wait_pos = pos;
		if (rc && commitlog_failed(db->cl))
			stop_writes(db, "commitlog failed");
		logged = !rc && !periodic;
	}
	if (!rc && memtable_apply(t->active, m)) {
		/* logged but not in memory: replay would restore it, but
		 * this process can no longer promise anything */
		stop_writes(db, "memtable out of memory");
		rc = -1;
	}
	if (!rc)
		t->writes++;
	if (!rc && t->durable) {
		struct memtable *mt = t->active;
		if (!mt->has_log_pos) {
			mt->log_first_seg = pos.seg;
			mt->log_first_off = pos.off;
			mt->has_log_pos = true;
		}
		mt->log_end_seg = pos.seg;
		mt->log_end_off = pos.off;
	}
	if (!rc)
		maybe_flush(db, &use);
	pthread_mutex_unlock(&db->mu);
	fail_waiting(db, expired);
	if (!rc && !logged)
		*ack_now = true;
	return rc;
}

/* Every value is checked against the table's column types before a write
 * is taken, whoever built the mutation (outside the engine lock, with a
 * reference to the table's meta when the mutation was decoded). An
 * unknown table is apply()'s to report. */
static int check_values(struct storage *db, const struct storage_mutation *m)
{
	if (m->meta)
		return storage_mutation_validate(m->meta, m);
	const struct storage_table_meta *t =
		storage_table_meta_acquire(db, m->table_id);
	int rc = t ? storage_mutation_validate(t, m) : 0;
	storage_table_meta_unref(t);
	return rc;
}

int storage_apply(struct storage *db, const struct storage_mutation *m,
		  storage_done_fn done, void *arg)
{
	bool ack_now;
	if (check_values(db, m) ||
	    apply(db, m, done, arg, NULL, false, false, &ack_now))
		return -1;
	if (ack_now && done)
		done(arg, 0, ERR_NONE);
	return 0;
}

int storage_apply_deferred(struct storage *db, const struct storage_mutation *m,
			   storage_done_fn done, void *arg)
{
	if (done && db->nacks == db->acks_cap) {
		size_t cap = db->acks_cap ? 2 * db->acks_cap : 64;
		struct deferred_ack *a = realloc(db->acks, cap * sizeof(*a));
		if (!a)
			return err_set(ERR_NOMEM, "deferred acknowledgement");
		db->acks = a;
		db->acks_cap = cap;
	}
	bool ack_now;
	if (check_values(db, m) ||
	    apply(db, m, done, arg, NULL, true, false, &ack_now))
		return -1;
	if (ack_now && done)
		db->acks[db->nacks++] = (struct deferred_ack){done, arg};
	return 0;
}

void storage_write_deferred(struct storage *db)
{
	int rc = commitlog_write_pending(db->cl);
	enum err_code code = rc ? err_code() : ERR_NONE;
	if (rc) {
		pthread_mutex_lock(&db->mu);
		stop_writes(db, "commitlog failed");
		pthread_mutex_unlock(&db->mu);
	}
	/* Callbacks may apply more: those wait for the next call. */
	size_t n = db->nacks, cap = db->acks_cap;
	struct deferred_ack *acks = db->acks;
	db->acks = NULL;
	db->nacks = db->acks_cap = 0;
	for (size_t i = 0; i < n; i++)
		acks[i].done(acks[i].arg, rc ? -1 : 0, code);
	if (!db->acks) { /* keep the array for the next turn */
		db->acks = acks;
		db->acks_cap = cap;
	} else {
		free(acks);
	}
}

int storage_apply_sync(struct storage *db, const struct storage_mutation *m)
{
	struct clpos pos = {0, 0};
	bool ack_now;
	if (check_values(db, m) ||
	    apply(db, m, NULL, NULL, &pos, false, false, &ack_now))
		return -1;
	/* batch/group: this thread leads or joins the covering fdatasync */
	if (pos.seg && commitlog_wait_durable(db->cl, pos)) {
		pthread_mutex_lock(&db->mu);
		stop_writes(db, "commitlog failed");
		pthread_mutex_unlock(&db->mu);
		return err_prefix("write not acknowledged");
	}
	return 0;
}

int storage_wait_for_room(struct storage *db, uint64_t timeout_ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until); /* db->done's clock */
	until.tv_sec += (time_t)(timeout_ms / 1000);
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&db->mu);
	int rc = 0;
	for (;;) {
		struct mem_use use;
		mem_use_locked(db, &use);
		if (db->writes_stopped) {
			rc = err_set(db->stop_code, "writes stopped: %s",
				     db->stop_msg);
			break;
		}
		if (db->stopping || !db->started) {
			rc = err_set(ERR_CLOSED, "storage is not running");
			break;
		}
		if (!memtables_full(db, &use) && !db->waiting)
			break;
		/* a flush makes room and signals `done`; queue one if none
		 * would (as a refused write does) */
		maybe_flush(db, &use);
		if (timeout_ms == 0) {
			pthread_cond_wait(&db->done, &db->mu);
		} else if (pthread_cond_timedwait(&db->done, &db->mu, &until) ==
			   ETIMEDOUT) {
			rc = err_set(ERR_TIMEOUT,
				     "memtables still full after %llu ms",
				     (unsigned long long)timeout_ms);
			break;
		}
	}
	pthread_mutex_unlock(&db->mu);
	return rc;
}

/* ---- lifecycle ----------------------------------------------------------- */

/* A record logged before values were validated may hold an invalid one
 * (an int of 3 bytes, text that is not UTF-8): replay drops those cells
 * (and range tombstones) and applies the rest of the mutation, or drops
 * the mutation when its partition key is invalid, so the value is never
 * written again (the flush that ends replay would write it to an
 * SSTable). Never an error: the log is intact, its content is what was
 * wrong. 0 to apply what is left, -1 to skip the record. */
static int replay_values(struct storage *db, struct table *t, struct clpos pos,
			 struct storage_mutation *m)
{
	size_t dropped;
	if (storage_mutation_drop_invalid(t->meta, m, &dropped) != 0) {
		if (db->replay_invalid++ < 10)
			LOG_WARN("commitlog replay: dropping the record at "
				 "segment %" PRIu64 " offset %" PRIu64 ": %s",
				 pos.seg, pos.off, err_msg());
		return -1;
	}
	if (dropped && db->replay_invalid++ < 10)
		LOG_WARN("commitlog replay: dropping %zu invalid value%s of "
			 "%s.%s from the record at segment %" PRIu64
			 " offset %" PRIu64,
			 dropped, dropped == 1 ? "" : "s", t->meta->keyspace,
			 t->meta->name, pos.seg, pos.off);
	return 0;
}

static int replay_record(void *arg, struct clpos pos, const uint8_t *body,
			 size_t len)
{
	struct storage *db = arg;
	struct storage_mutation *m = storage_mutation_decode(body, len);
	if (!m)
		return -1; /* ERR_CORRUPT: the policy applies */
	struct table *t = storage_engine_table_find(db, m->table_id);
	int rc = 0;
	if (t && clpos_cmp(pos, t->flushed) > 0 && !validate(t, m) &&
	    replay_values(db, t, pos, m) == 0) {
		rc = memtable_apply(t->active, m);
		if (!rc) {
			struct memtable *mt = t->active;
			if (!mt->has_log_pos) {
				mt->log_first_seg = pos.seg;
				mt->log_first_off = pos.off;
				mt->has_log_pos = true;
			}
			mt->log_end_seg = pos.seg;
			mt->log_end_off = pos.off;
			db->replayed++;
		}
	}
	storage_mutation_delete(m);
	return rc;
}

int storage_start(struct storage *db)
{
	struct commitlog_options co = {
		.env = db->o.env,
		.dir = db->commitlog_dir,
		.sync_mode = db->o.commitlog_sync,
		.period_ms = db->o.commitlog_sync_period_ms,
		.window_ms = db->o.commitlog_sync_group_window_ms,
		.segment_size = db->o.commitlog_segment_size,
		.failure_policy = db->o.commit_failure_policy,
		.post = db->o.post,
		.post_arg = db->o.post_arg,
	};
	if (env_mkdir_p(db->o.env, db->data_dir) ||
	    !(db->cl = commitlog_new(&co)))
		return -1;
	struct commitlog_replay_stats st;
	if (commitlog_replay(db->cl, replay_record, db, &st))
		return -1;
	db->torn = st.torn;
	uint64_t min_id = st.max_seg + 1;
	for (struct table *t = db->tables; t; t = t->next) {
		if (t->flushed.seg + 1 > min_id)
			min_id = t->flushed.seg + 1;
	}
	if (st.records)
		LOG_AT(db->replay_invalid ? LOG_LEVEL_WARN : LOG_LEVEL_INFO,
		       "commitlog replay: %" PRIu64 " records, "
		       "%" PRIu64 " applied, %" PRIu64 " torn, %" PRIu64
		       " with invalid values (dropped)",
		       st.records, db->replayed, st.torn, db->replay_invalid);
	if (commitlog_start(db->cl, min_id))
		return -1;
	/* Replayed data goes to SSTables now, so the old segments can go. */
	if (storage_flush(db, NULL))
		return -1;
	discard_log(db);
	pthread_mutex_lock(&db->mu);
	db->started = true;
	pthread_mutex_unlock(&db->mu);
	if (pthread_create(&db->flusher, NULL, flusher_main, db) ||
	    pthread_create(&db->compactor, NULL, storage_engine_compactor_main,
			   db)) {
		pthread_mutex_lock(&db->mu);
		db->started = false;
		pthread_mutex_unlock(&db->mu);
		return err_set(ERR_IO, "cannot start storage threads");
	}
	return 0;
}

int storage_drain(struct storage *db)
{
	int rc = storage_flush(db, NULL);
	if (db->cl && commitlog_sync_now(db->cl))
		rc = -1;
	return rc;
}

void storage_delete(struct storage *db)
{
	if (!db)
		return;
	pthread_mutex_lock(&db->mu);
	bool started = db->started;
	db->stopping = true;
	pthread_cond_broadcast(&db->work);
	pthread_cond_broadcast(&db->done);
	pthread_mutex_unlock(&db->mu);
	if (started) {
		pthread_join(db->flusher, NULL);
		pthread_join(db->compactor, NULL);
	}
	commitlog_delete(db->cl);
	while (db->tables) {
		struct table *t = db->tables;
		db->tables = t->next;
		storage_engine_table_unref(t);
	}
	free(db->by_id);
	buf_free(&db->scratch);
	free(db->acks);     /* never written: their callers are gone */
	while (db->waiting) /* the same */
		free(waiting_pop(db));
	storage_block_cache_delete(db->cache);
	ratelimit_delete(db->budget);
	pthread_mutex_destroy(&db->mu);
	pthread_cond_destroy(&db->work);
	pthread_cond_destroy(&db->done);
	free(db->data_dir);
	free(db->commitlog_dir);
	free(db);
}

void storage_engine_note_corruption(struct storage *db, struct sstable *s)
{
	atomic_fetch_add(&db->corrupt_blocks, 1);
	int p = db->o.disk_failure_policy;
	LOG_AT(LOG_LEVEL_ERROR,
	       "corrupt sstable %s: %s (disk_failure_policy "
	       "%s)",
	       s->data_path, err_msg(),
	       p == CONF_POLICY_IGNORE        ? "ignore"
	       : p == CONF_POLICY_BEST_EFFORT ? "best_effort"
	       : p == CONF_POLICY_DIE         ? "die"
					      : "stop");
	if (p == CONF_POLICY_IGNORE)
		return;
	if (p == CONF_POLICY_BEST_EFFORT) {
		/* Cassandra's best_effort: go on with what is left. Reads
		 * may miss what only this SSTable held until repair brings
		 * it back; its files stay for the operator. */
		if (!atomic_exchange(&s->excluded, true))
			LOG_AT(LOG_LEVEL_ERROR,
			       "%s is excluded from reads and compaction "
			       "(disk_failure_policy best_effort); repair the "
			       "table to restore what it held",
			       s->data_path);
		return;
	}
	enum err_code code = err_code();
	char msg[ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s", err_msg());
	pthread_mutex_lock(&db->mu);
	stop_writes(db, "disk_failure_policy stop after corruption");
	pthread_mutex_unlock(&db->mu);
	err_set(code, "%s", msg);
}

int storage_stats(struct storage *db, const uint8_t *table_id,
		  struct storage_stats *out)
{
	memset(out, 0, sizeof(*out));
	double droppable = 0;
	uint64_t all_cells = 0;
	pthread_mutex_lock(&db->mu);
	for (struct table *t = db->tables; t; t = t->next) {
		if (table_id && memcmp(t->meta->id, table_id, 16) != 0)
			continue;
		out->memtable_bytes += memtable_bytes(t->active);
		out->memtable_data_bytes += memtable_data_bytes(t->active);
		out->estimated_partitions +=
			atomic_load(&t->active->parts.count);
		for (size_t i = 0; i < t->flushing_count; i++) {
			out->memtable_bytes += memtable_bytes(t->flushing[i]);
			out->memtable_data_bytes +=
				memtable_data_bytes(t->flushing[i]);
			out->estimated_partitions +=
				atomic_load(&t->flushing[i]->parts.count);
		}
		out->sstable_count += t->version->count;
		for (size_t i = 0; i < t->version->count; i++) {
			out->sstables_excluded +=
				atomic_load(&t->version->ssts[i]->excluded);
			out->sstable_bytes += t->version->ssts[i]->disk_bytes;
			out->estimated_partitions +=
				t->version->ssts[i]->stats.partition_count;
		}
		out->flushes += t->flushes;
		out->compactions += t->compactions;
		out->tombstone_compactions += t->tombstone_compactions;
		out->tombstone_warnings += atomic_load(&t->tombstone_warnings);
		out->tombstone_failures += atomic_load(&t->tombstone_failures);
		int64_t gc_before = storage_engine_now_sec(db) -
				    t->meta->options.gc_grace_seconds;
		for (size_t i = 0; i < t->version->count; i++) {
			const struct sst_stats *ss =
				&t->version->ssts[i]->stats;
			uint64_t cells = ss->cell_count + ss->marker_count;
			droppable += sst_droppable_ratio(ss, gc_before) *
				     (double)cells;
			all_cells += cells;
		}
		out->local_writes += t->writes;
		out->local_reads += atomic_load(&t->reads);
	}
	if (all_cells)
		out->droppable_tombstones_ppm =
			(uint64_t)(droppable / (double)all_cells * 1e6 + 0.5);
	out->corrupt_blocks = atomic_load(&db->corrupt_blocks);
	out->commitlog_torn_tails = db->torn;
	out->commitlog_replayed = db->replayed;
	out->commitlog_invalid = db->replay_invalid;
	out->writes_stopped = db->writes_stopped;
	out->writes_waiting = db->waiting_count;
	out->writes_waited = db->writes_waited;
	out->writes_refused = db->writes_refused;
	pthread_mutex_unlock(&db->mu);
	out->commitlog_segments = db->cl ? commitlog_segment_count(db->cl) : 0;
	if (db->cl) {
		struct commitlog_sync_stats cs;
		commitlog_sync_stats(db->cl, &cs);
		out->commitlog_syncs = cs.syncs;
		out->commitlog_sync_writes = cs.writes;
		out->commitlog_sync_us = cs.sync_us;
		out->commitlog_gathers = cs.gathers;
		out->commitlog_gather_us = cs.gather_us;
	}
	return 0;
}

struct ratelimit *storage_throughput_budget(struct storage *db)
{
	return db->budget;
}
