/*
 * The engine's tables: lookups and references, adding, updating and
 * dropping a table (its directory and SSTables loaded), the truncation
 * records, and TRUNCATE.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
	storage_engine_samplers_free(t);
	storage_version_unref(t->version);
	storage_engine_sai_free(t);
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
	    storage_import_recover(db, t) ||
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
		sstable_map_files(s, db->o.disk_access_mode);
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
	/* SSTables without a component of an index: its build resumes */
	storage_engine_sai_update(db, t, NULL, false);
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
	bool had_data = !memtable_is_empty(t->active) || t->flushing_count ||
			t->version->count;
	storage_engine_sai_update(db, t, prev, had_data);
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
		storage_engine_stop_writes(db, "truncate rollback failed");
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
	storage_engine_discard_log(db);
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
