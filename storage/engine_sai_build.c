/*
 * Building storage-attached indexes over existing data (Cassandra's
 * index build): CREATE INDEX on a table that holds data, a restart that
 * finds SSTables without a component for an index, or rebuild_index. The
 * index builder thread flushes the table (its memtables predating the
 * index go to SSTables written with the index), then writes the missing
 * component of every SSTable from its partitions and atoms, one SSTable
 * at a time, until a pass finds none missing. Until then the index is
 * not queryable on this node: storage_index_candidates answers
 * ERR_INDEX_NOT_AVAILABLE (never a partial answer from a half-built
 * index). New writes meanwhile go to the memtable index as usual, and
 * flushes and compactions write their components themselves.
 *
 * A restart derives what to build from the SSTables' TOCs (an SSTable
 * without the index's component), so a build cut short resumes where it
 * stopped and an index is never left half-built and taken as built. A
 * build that failed leaves <table dir>/sai-failed-<index>.txt (the
 * index's identity): after a restart the index is still failed, not
 * queryable and not built again, until rebuild_index succeeds (which
 * removes the record), as Cassandra keeps a failed index failed.
 */
#define LOG_MODULE "storage"
#include "storage/engine_internal.h"
#include "storage/memtable_internal.h"
#include "storage/read_internal.h"
#include "storage/sai_component.h"
#include "storage/sai_internal.h"

#include "common/err.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct index_build *find_build(const struct table *t, const char *name)
{
	for (size_t i = 0; i < t->nbuilds; i++)
		if (strcmp(t->builds[i].name, name) == 0)
			return &t->builds[i];
	return NULL;
}

bool storage_engine_sai_building(const struct table *t, const char *name)
{
	const struct index_build *b = find_build(t, name);
	return b && !b->repair;
}

static void drop_build(struct table *t, size_t i)
{
	free(t->builds[i].name);
	memmove(&t->builds[i], &t->builds[i + 1],
		(t->nbuilds - i - 1) * sizeof(*t->builds));
	t->nbuilds--;
}

void storage_engine_sai_free(struct table *t)
{
	while (t->nbuilds)
		drop_build(t, t->nbuilds - 1);
	free(t->builds);
	t->builds = NULL;
}

/* ---- failure records ---------------------------------------------------- */

static char *failed_path(const struct table *t, const char *name)
{
	size_t n = strlen(t->dir) + strlen(name) + sizeof("/sai-failed-.txt");
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/sai-failed-%s.txt", t->dir, name);
	return p;
}

/* Records (ident != NULL) or forgets a failed build of `name`. Errors are
 * logged: the record only keeps a failed index failed over a restart. */
static void failed_record(struct storage *db, const struct table *t,
			  const char *name, const char *ident)
{
	char *p = failed_path(t, name);
	if (!p)
		return;
	if (ident) {
		if (env_write_file_atomic(db->o.env, p, ident, strlen(ident)))
			LOG_AT(LOG_LEVEL_ERROR, "%s: %s", p, err_msg());
	} else if (env_exists(db->o.env, p) == 1 &&
		   env_unlink(db->o.env, p) != 0) {
		LOG_AT(LOG_LEVEL_ERROR, "%s: %s", p, err_msg());
	}
	free(p);
}

/* Whether a failure record of index ix (this identity) exists. */
static bool failed_recorded(struct storage *db, const struct table *t,
			    const struct storage_index *ix)
{
	char *p = failed_path(t, ix->name);
	char ident[64];
	bool hit = false;
	uint8_t *data = NULL;
	size_t len = 0;
	if (p && sai_index_ident(t->meta, ix, ident, sizeof(ident)) >= 0 &&
	    env_exists(db->o.env, p) == 1 &&
	    env_read_file(db->o.env, p, 256, &data, &len) == 0)
		hit = len == strlen(ident) && memcmp(data, ident, len) == 0;
	free(data);
	free(p);
	return hit;
}

/* Under the lock: a build of `name` (again when one runs). */
static int want_build(struct storage *db, struct table *t, const char *name,
		      bool force)
{
	struct index_build *b = find_build(t, name);
	if (b) {
		b->force = b->force || force;
		b->again = b->running;
		b->failed = false;
		b->repair = false;
	} else {
		struct index_build *v =
			realloc(t->builds, (t->nbuilds + 1) * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "index build");
		t->builds = v;
		b = &v[t->nbuilds];
		memset(b, 0, sizeof(*b));
		if (!(b->name = strdup(name)))
			return err_set(ERR_NOMEM, "index build");
		b->force = force;
		/* a random-looking v4 uuid without the env's generator (the
		 * loop's, not to be used from here) */
		uint64_t x = ++db->build_seq ^
			     (uint64_t)env_wall_us(db->o.env) ^
			     (uint64_t)(uintptr_t)t;
		for (int i = 0; i < 16; i += 8) {
			x += 0x9e3779b97f4a7c15ULL;
			uint64_t z = x;
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
			z ^= z >> 31;
			memcpy(b->task_id + i, &z, 8);
		}
		b->task_id[6] = (uint8_t)((b->task_id[6] & 0x0f) | 0x40);
		b->task_id[8] = (uint8_t)((b->task_id[8] & 0x3f) | 0x80);
		t->nbuilds++;
	}
	pthread_cond_broadcast(&db->index_work);
	return 0;
}

static bool same_index(const struct storage_index *a,
		       const struct storage_index *b)
{
	char x[64], y[64];
	return sai_index_ident(NULL, a, x, sizeof(x)) >= 0 &&
	       sai_index_ident(NULL, b, y, sizeof(y)) >= 0 && strcmp(x, y) == 0;
}

void storage_engine_sai_update(struct storage *db, struct table *t,
			       const struct storage_table_meta *prev,
			       bool had_data)
{
	const struct storage_table_meta *m = t->meta;
	for (size_t i = 0; i < t->nbuilds;) {
		if (!storage_table_meta_index(m, t->builds[i].name) &&
		    !t->builds[i].running)
			drop_build(t, i); /* dropped (a running one notices) */
		else
			i++;
	}
	for (size_t i = 0; prev && i < prev->index_count; i++) {
		const struct storage_index *old = &prev->indexes[i];
		const struct storage_index *now =
			storage_table_meta_index(m, old->name);
		if (!now || !same_index(old, now))
			failed_record(db, t, old->name, NULL); /* dropped */
	}
	for (size_t i = 0; i < m->index_count; i++) {
		const struct storage_index *ix = &m->indexes[i];
		bool build;
		if (!prev && failed_recorded(db, t, ix)) {
			/* failed before the restart: stays so */
			if (want_build(db, t, ix->name, false) == 0) {
				find_build(t, ix->name)->failed = true;
				LOG_AT(LOG_LEVEL_WARN,
				       "index %s on %s.%s: its build failed "
				       "before the restart; unavailable until "
				       "rebuild_index",
				       ix->name, m->keyspace, m->name);
			}
			continue;
		}
		if (prev) {
			const struct storage_index *old =
				storage_table_meta_index(prev, ix->name);
			bool fresh = !old || !same_index(old, ix);
			if (fresh) /* a record of an earlier one of the name */
				failed_record(db, t, ix->name, NULL);
			build = had_data && fresh;
		} else {
			/* loaded at start: an SSTable without it */
			build = false;
			for (size_t k = 0; k < t->version->count && !build; k++)
				build = !sst_sai_listed(t->version->ssts[k],
							ix->name);
		}
		if (build && want_build(db, t, ix->name, false))
			LOG_AT(LOG_LEVEL_ERROR,
			       "index %s.%s: cannot start its build: %s",
			       m->keyspace, ix->name, err_msg());
	}
}

void storage_engine_sai_repair(struct storage *db, struct table *t,
			       const char *name)
{
	pthread_mutex_lock(&db->mu);
	if (!t->dropped && !find_build(t, name) &&
	    storage_table_meta_index(t->meta, name) &&
	    want_build(db, t, name, false) == 0) {
		find_build(t, name)->repair = true;
		LOG_AT(LOG_LEVEL_WARN,
		       "index %s on %s.%s: SSTables without a usable component "
		       "(listed by queries meanwhile): writing them again",
		       name, t->meta->keyspace, t->meta->name);
	}
	pthread_mutex_unlock(&db->mu);
}

/* ---- one SSTable ----------------------------------------------------------
 */

static void progress(struct storage *db, struct table *t, const char *name,
		     uint64_t done)
{
	pthread_mutex_lock(&db->mu);
	struct index_build *b = find_build(t, name);
	if (b)
		b->done = done;
	pthread_mutex_unlock(&db->mu);
}

/* Builds index ix's component over the data of `s` and installs it.
 * `base` is the pass's progress before this SSTable. */
static int build_sstable(struct storage *db, struct table *t,
			 const struct storage_table_meta *meta,
			 const struct storage_index *ix, struct sstable *s,
			 uint64_t base)
{
	static const struct storage_read_cmd all = {.with_static = true};
	struct sai_builder b;
	sai_builder_init(&b);
	/* runs beyond the bound: tmp-ca-<gen>-SAIrun_<index>-<n> (removed
	 * with the builder and, after a crash, at start) */
	char run[320];
	snprintf(run, sizeof(run), "SAIrun_%s", ix->name);
	char *prefix = sst_path(s->dir, s->gen, run, true);
	if (!prefix ||
	    sai_builder_spill(&b, s->env, prefix,
			      db->o.sai_build_hold ? db->o.sai_build_hold
						   : SAI_BUILDER_HOLD,
			      SAI_BUILDER_HOLD_BYTES) != SAI_OK) {
		free(prefix);
		return err_set(ERR_NOMEM, "index build");
	}
	free(prefix);
	struct buf term, key, last, seen;
	buf_init(&seen);
	buf_init(&term);
	buf_init(&key);
	buf_init(&last);
	struct read_ctx c;
	int rc = storage_read_ctx_init(&c, meta, &all,
				       storage_engine_now_sec(db));
	if (rc) {
		sai_builder_free(&b);
		return -1;
	}
	struct sst_iter *it = sst_iter_new(s);
	if (!it)
		rc = -1;
	const struct sst_entry *e;
	uint64_t parts = 0;
	int r = 0;
	while (!rc && (r = sst_iter_next(it, &e)) > 0) {
		if (db->stopping) {
			rc = err_set(ERR_CLOSED, "index build interrupted by "
						 "shutdown");
			break;
		}
		storage_read_ctx_reset(&c);
		if (sstable_read_entry(s, &c, e, true) ||
		    sai_component_key(e->token, e->key, &key)) {
			rc = -1;
			break;
		}
		buf_clear(&last);
		bool have_last = false;
		bool rows = sai_index_rows(meta, ix);
		for (size_t i = 0; !rc && i <= c.atom_count; i++) {
			int k = i == 0 ? sai_key_term(meta, ix, e->key, &term)
				       : sai_atom_term(meta, ix,
						       &c.atoms[i - 1], &term);
			/* a row-level index: each (term, row) once (the
			 * atoms of a row are together) */
			struct slice ck = rows && i > 0
						  ? c.atoms[i - 1].ck
						  : (struct slice){NULL, 0};
			buf_clear(&seen);
			if (k > 0 && ck.len) {
				uint8_t n[4] = {(uint8_t)(term.len >> 24),
						(uint8_t)(term.len >> 16),
						(uint8_t)(term.len >> 8),
						(uint8_t)term.len};
				if (buf_append(&seen, n, 4) ||
				    buf_append(&seen, ck.ptr, ck.len))
					k = err_set(ERR_NOMEM, "index build");
			}
			if (k > 0 && buf_append(&seen, term.data, term.len))
				k = err_set(ERR_NOMEM, "index build");
			if (k < 0) {
				rc = -1;
			} else if (k > 0 &&
				   !(have_last && last.len == seen.len &&
				     (!seen.len || memcmp(last.data, seen.data,
							  seen.len) == 0))) {
				buf_clear(&last);
				have_last = true;
				if (ck.len &&
				    sai_component_row_key(e->token, e->key, ck,
							  &key))
					rc = -1;
				else if (buf_append(&last, seen.data, seen.len))
					rc = err_set(ERR_NOMEM, "index build");
				else if ((k = sai_builder_add(
						  &b, term.data,
						  (uint32_t)term.len, key.data,
						  (uint32_t)key.len)) != SAI_OK)
					rc = k == SAI_IO
						     ? err_prefix("index build")
						     : err_set(ERR_NOMEM,
							       "index build");
			}
		}
		if (!rc && ++parts % 256 == 0)
			progress(db, t, ix->name, base + e->block_off);
	}
	if (r < 0)
		rc = -1;
	sst_iter_delete(it);
	storage_read_ctx_destroy(&c);
	char ident[64];
	int il = rc ? -1 : sai_index_ident(meta, ix, ident, sizeof(ident));
	if (!rc && il < 0)
		rc = err_set(ERR_NOMEM, "index build");
	buf_free(&term);
	buf_free(&key);
	buf_free(&last);
	buf_free(&seen);
	/* an SSTable compacted away meanwhile goes with our reference: its
	 * files (the component too, once listed) are removed then */
	if (!rc && !atomic_load(&s->obsolete))
		rc = sst_sai_install(s, ix, &b, ident, (uint32_t)il);
	sai_builder_free(&b);
	return rc;
}

/* ---- a build ------------------------------------------------------------- */

static bool in_list(const uint64_t *v, size_t n, uint64_t gen)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == gen)
			return true;
	return false;
}

/* Whether memtable `mt` holds data its own index of `ix` lacks. */
static bool memtable_stale(const struct memtable *mt,
			   const struct storage_index *ix)
{
	if (memtable_is_empty(mt))
		return false;
	const struct storage_index *mix =
		storage_table_meta_index(mt->meta, ix->name);
	return !mix || !same_index(mix, ix);
}

#define MAX_PASSES 16

/* Builds index `name` of table `id`: 0 once every SSTable has its
 * component (or the index is gone), 1 when it did not settle (SSTables
 * kept coming without one: tried again), -1 on error. */
static int run_build(struct storage *db, struct table *t, const uint8_t id[16],
		     const char *name, bool force)
{
	uint64_t *done_gens = NULL;
	size_t ndone = 0;
	int rc = 0;
	bool flush = true;
	for (int pass = 0; pass < MAX_PASSES && !rc; pass++) {
		if (flush && storage_flush(db, id))
			return -1;
		flush = false;
		struct engine_snapshot snap;
		if (storage_engine_snapshot_take(db, id, &snap)) {
			free(done_gens);
			return err_code() == ERR_NOT_FOUND ? 0 : -1;
		}
		const struct storage_index *ix =
			storage_table_meta_index(snap.meta, name);
		if (!ix) {
			storage_engine_snapshot_release(&snap);
			break; /* dropped */
		}
		for (size_t i = 0; i < snap.mt_count && !flush; i++)
			flush = memtable_stale(snap.mts[i], ix);
		struct sstable **need =
			snap.v->count ? calloc(snap.v->count, sizeof(*need))
				      : NULL;
		size_t nneed = 0;
		uint64_t total = 0;
		if (snap.v->count && !need)
			rc = err_set(ERR_NOMEM, "index build");
		for (size_t i = 0; !rc && i < snap.v->count; i++) {
			struct sstable *s = snap.v->ssts[i];
			struct sai_file *sf;
			if (atomic_load(&s->excluded))
				continue;
			bool redo = force && !in_list(done_gens, ndone, s->gen);
			if (redo || sst_sai_get(s, ix, &sf) != 0) {
				need[nneed++] = s;
				total += s->stats.data_size;
			}
		}
		if (!rc) {
			pthread_mutex_lock(&db->mu);
			struct index_build *b = find_build(t, name);
			if (b) {
				b->total = total;
				b->done = 0;
			}
			/* held (tests): the build shows as running, at 0 */
			while (nneed && db->builds_held && !db->stopping)
				pthread_cond_wait(&db->index_work, &db->mu);
			pthread_mutex_unlock(&db->mu);
		}
		uint64_t base = 0;
		for (size_t i = 0; !rc && i < nneed; i++) {
			pthread_mutex_lock(&db->mu);
			bool gone = !storage_table_meta_index(t->meta, name) ||
				    t->dropped;
			pthread_mutex_unlock(&db->mu);
			if (gone)
				break;
			rc = db->builds_fail
				     ? err_set(ERR_IO,
					       "injected index build failure "
					       "(indexbuildfault fail)")
				     : build_sstable(db, t, snap.meta, ix,
						     need[i], base);
			if (rc && err_code() == ERR_CORRUPT)
				storage_engine_note_corruption(db, need[i]);
			base += need[i]->stats.data_size;
			progress(db, t, name, base);
			uint64_t *g =
				realloc(done_gens, (ndone + 1) * sizeof(*g));
			if (!g && !rc)
				rc = err_set(ERR_NOMEM, "index build");
			if (g) {
				done_gens = g;
				done_gens[ndone++] = need[i]->gen;
			}
		}
		free(need);
		storage_engine_snapshot_release(&snap);
		if (!rc && !nneed && !flush) {
			free(done_gens);
			return 0;
		}
	}
	free(done_gens);
	return rc ? -1 : 1;
}

/* Under the lock: a table with a build to run, referenced, and the build. */
static struct table *next_build(struct storage *db, struct index_build **out)
{
	for (struct table *t = db->tables; t; t = t->next) {
		if (t->dropped)
			continue;
		for (size_t i = 0; i < t->nbuilds; i++) {
			struct index_build *b = &t->builds[i];
			if (!b->running && !b->failed) {
				storage_engine_table_ref(t);
				*out = b;
				return t;
			}
		}
	}
	return NULL;
}

void *storage_engine_indexer_main(void *arg)
{
	struct storage *db = arg;
	pthread_mutex_lock(&db->mu);
	while (!db->stopping) {
		struct index_build *b;
		struct table *t = next_build(db, &b);
		if (!t) {
			pthread_cond_wait(&db->index_work, &db->mu);
			continue;
		}
		b->running = true;
		b->again = false;
		bool force = b->force;
		b->force = false;
		char *name = strdup(b->name);
		uint8_t id[16];
		memcpy(id, t->meta->id, 16);
		char ks[128];
		snprintf(ks, sizeof(ks), "%s.%s", t->meta->keyspace,
			 t->meta->name);
		pthread_mutex_unlock(&db->mu);
		int rc = name ? 0 : err_set(ERR_NOMEM, "index build");
		if (!rc) {
			LOG_AT(LOG_LEVEL_INFO,
			       "index %s on %s: build started%s", name, ks,
			       force ? " (rebuild)" : "");
			rc = run_build(db, t, id, name, force);
		}
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", rc < 0 ? err_msg() : "");
		int record = 0; /* 1: write a failure record, -1: remove it */
		char ident[64] = "";
		pthread_mutex_lock(&db->mu);
		for (size_t i = 0; name && i < t->nbuilds; i++) {
			struct index_build *x = &t->builds[i];
			if (strcmp(x->name, name) != 0)
				continue;
			x->running = false;
			bool gone = !storage_table_meta_index(t->meta, name);
			if (rc == 0 && (gone || (!x->again && !x->force))) {
				drop_build(t, i);
				record = -1;
				if (!gone)
					LOG_AT(LOG_LEVEL_INFO,
					       "index %s on %s: built", name,
					       ks);
			} else if (rc < 0 && !db->stopping) {
				x->failed = true;
				const struct storage_index *ix =
					storage_table_meta_index(t->meta, name);
				if (ix && sai_index_ident(t->meta, ix, ident,
							  sizeof(ident)) >= 0)
					record = 1;
				LOG_AT(LOG_LEVEL_ERROR,
				       "index %s on %s: build failed (the "
				       "index stays unavailable until "
				       "rebuild_index succeeds): %s",
				       name, ks, why);
			}
			break;
		}
		bool dropped = t->dropped;
		pthread_mutex_unlock(&db->mu);
		if (record && !dropped)
			failed_record(db, t, name, record > 0 ? ident : NULL);
		free(name);
		storage_engine_table_unref(t);
		pthread_mutex_lock(&db->mu);
	}
	pthread_mutex_unlock(&db->mu);
	return NULL;
}

/* ---- the public calls ---------------------------------------------------- */

int storage_index_state(struct storage *db, const uint8_t table_id[16],
			const char *index)
{
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, table_id);
	int rc;
	if (!t)
		rc = err_set(ERR_NOT_FOUND, "unknown table");
	else if (!storage_table_meta_index(t->meta, index))
		rc = err_set(ERR_NOT_FOUND, "unknown index %s", index);
	else
		rc = storage_engine_sai_building(t, index)
			     ? STORAGE_INDEX_BUILDING
			     : STORAGE_INDEX_BUILT;
	pthread_mutex_unlock(&db->mu);
	return rc;
}

int storage_index_rebuild(struct storage *db, const uint8_t table_id[16],
			  const char *index)
{
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, table_id);
	int rc;
	if (!t)
		rc = err_set(ERR_NOT_FOUND, "unknown table");
	else if (!storage_table_meta_index(t->meta, index))
		rc = err_set(ERR_NOT_FOUND, "unknown index %s", index);
	else
		rc = want_build(db, t, index, true);
	pthread_mutex_unlock(&db->mu);
	return rc;
}

void storage_index_builds_hold(struct storage *db, bool hold)
{
	pthread_mutex_lock(&db->mu);
	db->builds_held = hold;
	pthread_cond_broadcast(&db->index_work);
	pthread_mutex_unlock(&db->mu);
}

int storage_index_disk_bytes(struct storage *db, const uint8_t table_id[16],
			     const char *index, uint64_t *bytes)
{
	*bytes = 0;
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, table_id);
	if (t)
		for (size_t i = 0; i < t->version->count; i++)
			*bytes +=
				sst_sai_disk_bytes(t->version->ssts[i], index);
	pthread_mutex_unlock(&db->mu);
	return t ? 0 : err_set(ERR_NOT_FOUND, "unknown table");
}

void storage_index_builds_fail(struct storage *db, bool fail)
{
	pthread_mutex_lock(&db->mu);
	db->builds_fail = fail;
	pthread_mutex_unlock(&db->mu);
}

size_t storage_index_builds(struct storage *db,
			    struct storage_index_build_info *out, size_t cap)
{
	size_t n = 0;
	pthread_mutex_lock(&db->mu);
	for (struct table *t = db->tables; t; t = t->next) {
		for (size_t i = 0; i < t->nbuilds; i++, n++) {
			if (n >= cap)
				continue;
			const struct index_build *b = &t->builds[i];
			struct storage_index_build_info *o = &out[n];
			memset(o, 0, sizeof(*o));
			memcpy(o->table_id, t->meta->id, 16);
			memcpy(o->task_id, b->task_id, 16);
			snprintf(o->index, sizeof(o->index), "%s", b->name);
			o->total = b->total;
			o->completed = b->done < b->total ? b->done : b->total;
			o->running = b->running;
			o->failed = b->failed;
		}
	}
	pthread_mutex_unlock(&db->mu);
	return n;
}
