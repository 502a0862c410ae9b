/*
 * The engine: options, lifecycle (start with commitlog replay, drain,
 * delete), versions, corruption handling and statistics. Tables and
 * TRUNCATE are in engine_tables.c, flushes in engine_flush.c, the write
 * path in engine_write.c, reads in engine_read.c, compaction in
 * compaction.c.
 */
#define LOG_MODULE "storage"
#include "storage/engine_internal.h"

#include "storage/cache_internal.h"

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
	o->disk_access_mode = (int)c->disk_access_mode;
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
	pthread_cond_init(&db->index_work, NULL);
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
	if (t && clpos_cmp(pos, t->flushed) > 0 &&
	    !storage_engine_validate(t, m) &&
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
	storage_engine_discard_log(db);
	pthread_mutex_lock(&db->mu);
	db->started = true;
	pthread_mutex_unlock(&db->mu);
	if (pthread_create(&db->flusher, NULL, storage_engine_flusher_main,
			   db) ||
	    pthread_create(&db->compactor, NULL, storage_engine_compactor_main,
			   db) ||
	    pthread_create(&db->indexer, NULL, storage_engine_indexer_main,
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
	pthread_cond_broadcast(&db->index_work);
	pthread_mutex_unlock(&db->mu);
	if (started) {
		pthread_join(db->flusher, NULL);
		pthread_join(db->compactor, NULL);
		pthread_join(db->indexer, NULL);
	}
	storage_compaction_watch_stop(db);
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
		free(storage_engine_waiting_pop(db));
	storage_block_cache_delete(db->cache);
	ratelimit_delete(db->budget);
	pthread_mutex_destroy(&db->mu);
	pthread_cond_destroy(&db->work);
	pthread_cond_destroy(&db->done);
	pthread_cond_destroy(&db->index_work);
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
	storage_engine_stop_writes(db,
				   "disk_failure_policy stop after corruption");
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
		out->bytes_compacted += t->bytes_compacted;
		if (t->compacting) {
			uint64_t done = atomic_load(&t->compaction_done);
			out->compaction_remaining_bytes +=
				t->compaction_total > done
					? t->compaction_total - done
					: 0;
		}
		out->flushed_bytes += t->flushed_bytes;
		out->compaction_bytes_written += t->compacted_bytes;
		out->compactions_pending +=
			(uint64_t)t->compacting +
			(uint64_t)storage_engine_compaction_due(db, t);
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

void storage_cache_stats(struct storage *db, struct storage_cache_stats *out)
{
	struct block_cache_stats s;
	storage_block_cache_stats(db->cache, &s);
	*out = (struct storage_cache_stats){.capacity_bytes = s.capacity,
					    .size_bytes = s.bytes,
					    .entries = s.entries,
					    .hits = s.hits,
					    .requests = s.requests};
}

/* ---- tablehistograms ----------------------------------------------------- */

static void hist_add(struct storage_hist *h, uint64_t v, uint64_t n)
{
	h->count += n;
	h->sum += v * n;
	h->buckets[loghist_bucket(v)] += n;
}

int storage_table_histograms(struct storage *db, const uint8_t table_id[16],
			     struct storage_table_hists *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, table_id);
	if (!t) {
		pthread_mutex_unlock(&db->mu);
		return err_set(ERR_NOT_FOUND, "no such table");
	}
	for (unsigned b = 0; b < LOGHIST_BUCKETS; b++) {
		uint64_t r = atomic_load_explicit(&t->read_us[b],
						  memory_order_relaxed);
		uint64_t s = atomic_load_explicit(&t->sst_per_read[b],
						  memory_order_relaxed);
		out->read_us.buckets[b] = r;
		out->read_us.count += r;
		uint64_t sc = atomic_load_explicit(&t->scan_us[b],
						   memory_order_relaxed);
		out->scan_us.buckets[b] = sc;
		out->scan_us.count += sc;
		out->sstables.buckets[b] = s;
		out->sstables.count += s;
		out->write_us.buckets[b] = t->write_us[b];
		out->write_us.count += t->write_us[b];
		uint64_t l = atomic_load_explicit(&t->live_per_read[b],
						  memory_order_relaxed);
		uint64_t x = atomic_load_explicit(&t->tomb_per_read[b],
						  memory_order_relaxed);
		out->live_rows.buckets[b] = l;
		out->live_rows.count += l;
		out->tombstones.buckets[b] = x;
		out->tombstones.count += x;
	}
	out->live_rows.sum = atomic_load(&t->live_sum);
	out->tombstones.sum = atomic_load(&t->tomb_sum);
	out->read_us.sum = atomic_load(&t->read_us_sum);
	out->scan_us.sum = atomic_load(&t->scan_us_sum);
	out->sstables.sum = atomic_load(&t->sst_sum);
	out->write_us.sum = t->write_us_sum;
	for (size_t i = 0; i < t->version->count; i++) {
		const struct sst_stats *ss = &t->version->ssts[i]->stats;
		/* size_hist[k]: partitions of 2^k..2^(k+1)-1 bytes; each
		 * counts at its bucket's top */
		for (unsigned k = 0; k < SST_HIST_BUCKETS; k++)
			if (ss->size_hist[k])
				hist_add(&out->partition_bytes, (2ull << k) - 1,
					 ss->size_hist[k]);
		if (ss->partition_count)
			hist_add(&out->cells,
				 (ss->cell_count + ss->partition_count - 1) /
					 ss->partition_count,
				 ss->partition_count);
	}
	pthread_mutex_unlock(&db->mu);
	return 0;
}
