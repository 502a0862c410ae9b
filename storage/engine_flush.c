/*
 * Flushes: switching a table's memtable, writing it to an SSTable,
 * discarding the commitlog segments no memtable needs, and the flush
 * thread.
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

/* ---- flushing ------------------------------------------------------------ */

/* Under the lock: queues the active memtable for flushing. */
int storage_engine_switch_memtable(struct storage *db, struct table *t)
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
int storage_engine_write_memtable(struct storage *db, struct table *t,
				  const struct storage_table_meta *meta,
				  struct memtable *mt, const uint8_t *pending,
				  struct sstable **out)
{
	struct sst_writer_options o = {
		.compression = meta->options.compression,
		.block_size = meta->options.chunk_length,
		.bloom_fp = meta->options.bloom_filter_fp_chance,
		.expected_partitions = atomic_load(&mt->parts.count),
		.log_end = {mt->log_end_seg, mt->log_end_off},
		.created_at = storage_engine_now_sec(db),
		.sai_hold = db->o.sai_build_hold,
	};
	if (pending)
		memcpy(o.pending_repair, pending, sizeof(o.pending_repair));
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
	if (*out)
		sstable_map_files(*out, db->o.disk_access_mode);
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

void storage_engine_discard_log(struct storage *db)
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

void storage_engine_stop_writes(struct storage *db, const char *why)
{
	if (db->writes_stopped)
		return;
	db->writes_stopped = true;
	db->stop_code = err_code() ? err_code() : ERR_IO;
	snprintf(db->stop_msg, sizeof(db->stop_msg), "%s: %s", why, err_msg());
	LOG_AT(LOG_LEVEL_ERROR, "writes stopped: %s", db->stop_msg);
}

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
	int rc = storage_engine_write_memtable(db, t, meta, mt, NULL, &s);
	storage_table_meta_unref(meta);
	pthread_mutex_lock(&db->mu);
	struct version *nv =
		rc ? NULL : storage_version_edit(t->version, NULL, 0, s);
	if (!rc && !nv)
		rc = -1;
	if (rc) {
		t->flush_failed = true;
		storage_engine_stop_writes(db, "memtable flush failed");
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
		t->flushed_bytes += s ? s->disk_bytes : 0;
		db->compaction_wanted = true;
		/* the version holds it now: ours goes before a waiter wakes,
		 * so a truncation or compaction it runs next removes the
		 * files when it lets go of them, not when we get to it */
		sstable_unref(s);
		s = NULL;
	}
	pthread_cond_broadcast(&db->done);
	pthread_cond_broadcast(&db->work);
	pthread_mutex_unlock(&db->mu);
	sstable_unref(s);
	if (!rc) {
		memtable_unref(mt);
		storage_engine_discard_log(db);
#ifdef __GLIBC__
		/* A flushed memtable frees hundreds of arena blocks; glibc
		 * keeps them in the heap unless asked to give them back. */
		malloc_trim(0);
#endif
		storage_engine_take_waiting(db);
	}
	return rc;
}

void *storage_engine_flusher_main(void *arg)
{
	struct storage *db = arg;
	thread_name_self("flush");
	thread_background();
	pthread_mutex_lock(&db->mu);
	while (!db->stopping) {
		if (db->take_wanted) {
			db->take_wanted = false;
			pthread_mutex_unlock(&db->mu);
			storage_engine_take_waiting(db);
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
		rc = storage_engine_switch_memtable(db, t);
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
