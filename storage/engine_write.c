/*
 * The write path: mutations validated and applied to the commitlog and
 * memtables, the memory accounting that triggers flushes, and the writes
 * that wait for memtable room.
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

/* ---- the write path ------------------------------------------------------ */

int storage_engine_validate(const struct table *t,
			    const struct storage_mutation *m)
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
		storage_engine_switch_memtable(db, u->big);
}

/* ---- writes that wait for memtable room ------------------------------- */

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
struct waiting_write *storage_engine_waiting_pop(struct storage *db)
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
		*tail = storage_engine_waiting_pop(db);
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
void storage_engine_take_waiting(struct storage *db)
{
	pthread_mutex_lock(&db->mu);
	struct waiting_write *expired = waiting_expired(db);
	for (;;) {
		struct mem_use use;
		mem_use_locked(db, &use);
		struct waiting_write *w =
			memtables_full(db, &use)
				? NULL
				: storage_engine_waiting_pop(db);
		if (!w)
			break;
		pthread_mutex_unlock(&db->mu);
		struct storage_mutation *m =
			storage_mutation_decode(w->data, w->len);
		bool ack_now;
		if (!m || storage_engine_apply(db, m, w->done, w->arg, NULL,
					       false, true, &ack_now) != 0)
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
int storage_engine_apply(struct storage *db, const struct storage_mutation *m,
			 storage_done_fn done, void *arg,
			 struct clpos *wait_pos, bool deferred, bool waited,
			 bool *ack_now)
{
	*ack_now = false;
	uint64_t start = env_mono_us(db->o.env);
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
	else if ((rc = storage_engine_validate(t, m)) != 0)
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
			storage_engine_stop_writes(db, "commitlog failed");
		logged = !rc && !periodic;
	}
	if (!rc && memtable_apply(t->active, m)) {
		/* logged but not in memory: replay would restore it, but
		 * this process can no longer promise anything */
		storage_engine_stop_writes(db, "memtable out of memory");
		rc = -1;
	}
	if (!rc) {
		uint64_t us = env_mono_us(db->o.env) - start;
		t->writes++;
		t->write_us_sum += us;
		t->write_us[loghist_bucket(us)]++;
		if (storage_engine_sampling(t, STORAGE_SAMPLE_WRITE_KINDS))
			storage_engine_sample_write(t, m);
	}
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
 * unknown table is storage_engine_apply()'s to report. */
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
	if (check_values(db, m) || storage_engine_apply(db, m, done, arg, NULL,
							false, false, &ack_now))
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
	    storage_engine_apply(db, m, done, arg, NULL, true, false, &ack_now))
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
		storage_engine_stop_writes(db, "commitlog failed");
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
	if (check_values(db, m) || storage_engine_apply(db, m, NULL, NULL, &pos,
							false, false, &ack_now))
		return -1;
	/* batch/group: this thread leads or joins the covering fdatasync */
	if (pos.seg && commitlog_wait_durable(db->cl, pos)) {
		pthread_mutex_lock(&db->mu);
		storage_engine_stop_writes(db, "commitlog failed");
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
