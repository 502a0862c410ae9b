/*
 * Compaction jobs (the inputs are chosen in compaction_pick.c, their logs
 * written and recovered in compaction_log.c): size-tiered (default),
 * time-window and leveled strategies on the compactor thread, throttled by
 * compaction_throughput. When a strategy finds nothing to merge, a
 * single-SSTable tombstone compaction may run (tombstone_threshold and friends,
 * as Cassandra's AbstractCompactionStrategy): the choice rests on each
 * SSTable's droppable-tombstone histogram, the safety on the purge rule below.
 *
 * A compaction merges its input SSTables partition by partition: atoms are
 * reconciled, data shadowed by a deletion is dropped, expired TTL cells
 * become tombstones, and a tombstone is purged only when it is older than
 * gc_grace_seconds and nothing outside the compaction (other SSTables whose
 * bloom filter admits the key with older data, or memtables whose oldest
 * write is older than the tombstone) could hold data it still shadows.
 *
 * Atomicity: before the output's TOC is published, a compaction log
 * (compaction-<out>.log: the output generation then the inputs) is written
 * durably, and rewritten ending in "done" once every output (a leveled
 * compaction cuts several) is complete. At start, a done log means
 * "delete the inputs"; otherwise the partial outputs are removed and the
 * inputs stay.
 * The log goes once every input is gone, so a crash at any point leaves
 * either the inputs or the output (possibly both: the union reads the
 * same), never a mix where a purged tombstone's shadowed data survives.
 */
#define LOG_MODULE "storage"
#include "storage/compaction_internal.h"

#include "common/err.h"
#include "common/log.h"
#include "common/ratelimit.h"
#include "common/thread.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How often the compactor looks for tombstone compactions unasked. */
#define TOMBSTONE_CHECK_SECONDS 300

size_t storage_compactions_active(struct storage *db,
				  struct storage_compaction_info *out,
				  size_t cap)
{
	size_t n = 0;
	pthread_mutex_lock(&db->mu);
	for (struct table *t = db->tables; t; t = t->next) {
		if (!t->compacting || !t->compaction_kind)
			continue;
		if (n < cap) {
			struct storage_compaction_info *c = &out[n];
			memcpy(c->table_id, t->meta->id, 16);
			memcpy(c->task_id, t->compaction_id, 16);
			c->kind = t->compaction_kind;
			c->total = t->compaction_total;
			c->completed = atomic_load(&t->compaction_done);
			if (c->completed > c->total)
				c->completed = c->total;
		}
		n++;
	}
	/* index builds (engine_sai_build.c): Cassandra lists them with its
	 * compactions as "Secondary index build" */
	for (struct table *t = db->tables; t; t = t->next) {
		for (size_t i = 0; i < t->nbuilds; i++) {
			const struct index_build *b = &t->builds[i];
			if (!b->running)
				continue;
			if (n < cap) {
				struct storage_compaction_info *c = &out[n];
				memcpy(c->table_id, t->meta->id, 16);
				memcpy(c->task_id, b->task_id, 16);
				c->kind = "Secondary index build";
				c->total = b->total;
				c->completed =
					b->done < b->total ? b->done : b->total;
			}
			n++;
		}
	}
	pthread_mutex_unlock(&db->mu);
	return n;
}

/* Whether cleanup keeps the partition at `token`; tokens come in order. */
static bool kept(struct job *j, int64_t token)
{
	if (!j->cleanup)
		return true;
	while (j->next_keep < j->nkeep && token > j->keep[j->next_keep].right)
		j->next_keep++;
	return j->next_keep < j->nkeep && token > j->keep[j->next_keep].left;
}

static bool is_input(const struct job *j, const struct sstable *s)
{
	for (size_t i = 0; i < j->n; i++)
		if (j->in[i] == s)
			return true;
	return false;
}

/* Tombstones with a timestamp below this may be purged for the key. */
static int64_t purge_limit(const struct job *j, int64_t token, struct slice key)
{
	int64_t lim = j->mt_min_ts;
	for (size_t i = 0; i < j->v->count; i++) {
		struct sstable *s = j->v->ssts[i];
		if (is_input(j, s) || token < s->stats.min_token ||
		    token > s->stats.max_token || !sstable_may_contain(s, key))
			continue;
		if (s->stats.min_ts < lim)
			lim = s->stats.min_ts;
	}
	return lim;
}

static bool purgeable(const struct job *j, int64_t lim, int64_t ts, int64_t ldt)
{
	return ldt < j->gc_before && ts < lim;
}

static int write_atoms(struct job *j, struct read_ctx *c, int64_t token,
		       struct slice key, struct deletion pdel,
		       const struct rtomb *kept, size_t nrt, int64_t lim);

/* Whether `a` (of the SSTable garbagecollect rewrites) is shadowed by
 * what the other SSTables hold for its partition (`o`, merged; *at: the
 * first of o's atoms not before a's clustering, atoms come in order). */
static bool gc_shadowed(const struct job *j, const struct read_ctx *o,
			size_t *at, const struct atom *a)
{
	if (deletion_covers(o->pdel, a->ts) ||
	    storage_rtombs_cover(j->meta, o->rts, o->rt_count, a->ck, a->ts))
		return true;
	while (*at < o->atom_count &&
	       storage_ck_cmp(j->meta, o->atoms[*at].ck, a->ck) < 0)
		(*at)++;
	for (size_t k = *at;
	     k < o->atom_count &&
	     storage_ck_cmp(j->meta, o->atoms[k].ck, a->ck) == 0;
	     k++) {
		const struct atom *b = &o->atoms[k];
		if (b->kind == ATOM_KIND_DELETION && b->slot == ATOM_SLOT_ROW &&
		    a->ts <= b->ts)
			return true;
		/* -g CELL: a collection deletion of the column elsewhere */
		if (j->gc == 2 && b->kind == ATOM_KIND_DELETION &&
		    b->slot == a->slot && b->slot != ATOM_SLOT_ROW &&
		    a->kind == ATOM_KIND_LIVE && a->ts <= b->ts)
			return true;
		/* -g CELL: the same cell (or its tombstone), written later
		 * elsewhere */
		if (j->gc == 2 && a->kind == ATOM_KIND_LIVE &&
		    b->kind == ATOM_KIND_LIVE && b->slot == a->slot &&
		    b->ts > a->ts && b->path.len == a->path.len &&
		    (!a->path.len ||
		     memcmp(b->path.ptr, a->path.ptr, a->path.len) == 0))
			return true;
	}
	return false;
}

/* garbagecollect: drops from c what the other SSTables shadow. */
static int gc_filter(struct job *j, struct read_ctx *c, int64_t token,
		     struct slice key)
{
	struct read_ctx *o = j->shadow;
	storage_read_ctx_reset(o);
	for (size_t i = 0; i < j->v->count; i++) {
		struct sstable *s = j->v->ssts[i];
		if (s == j->only || token < s->stats.min_token ||
		    token > s->stats.max_token || !sstable_may_contain(s, key))
			continue;
		if (sstable_read(s, o, token, key))
			return -1;
	}
	storage_read_ctx_merge(o);
	size_t at = 0, n = 0;
	for (size_t i = 0; i < c->atom_count; i++)
		if (!gc_shadowed(j, o, &at, &c->atoms[i]))
			c->atoms[n++] = c->atoms[i];
	c->atom_count = n;
	if (c->pdel.ts != DELETION_NONE && o->pdel.ts >= c->pdel.ts)
		c->pdel.ts = DELETION_NONE; /* a newer one stands elsewhere */
	return 0;
}

/* Writes one merged partition, dropping what is shadowed or purgeable. */
static int write_partition(struct job *j, struct read_ctx *c, int64_t token,
			   struct slice key)
{
	storage_read_ctx_merge(c);
	if (j->gc && gc_filter(j, c, token, key))
		return -1;
	int64_t lim = purge_limit(j, token, key);
	struct deletion pdel = c->pdel;
	if (pdel.ts != DELETION_NONE && purgeable(j, lim, pdel.ts, pdel.ldt))
		pdel.ts = DELETION_NONE;
	size_t nrt = 0;
	struct rtomb *kept = calloc(c->rt_count + 1, sizeof(*kept));
	if (!kept)
		return err_set(ERR_NOMEM, "compaction");
	for (size_t i = 0; i < c->rt_count; i++) {
		const struct rtomb *r = &c->rts[i];
		if (deletion_covers(c->pdel, r->del.ts) ||
		    purgeable(j, lim, r->del.ts, r->del.ldt))
			continue;
		kept[nrt++] = *r;
	}
	int rc = write_atoms(j, c, token, key, pdel, kept, nrt, lim);
	free(kept);
	return rc;
}

static int write_atoms(struct job *j, struct read_ctx *c, int64_t token,
		       struct slice key, struct deletion pdel,
		       const struct rtomb *kept, size_t nrt, int64_t lim)
{
	bool begun = false;
	struct deletion row_del = {DELETION_NONE, 0}, coll_del = row_del;
	uint16_t coll_slot = 0;
	for (size_t i = 0; i < c->atom_count; i++) {
		struct atom a = c->atoms[i];
		if (i == 0 ||
		    storage_ck_cmp(j->meta, a.ck, c->atoms[i - 1].ck) != 0) {
			row_del.ts = coll_del.ts = DELETION_NONE;
			coll_slot = 0;
		}
		if (deletion_covers(c->pdel, a.ts) ||
		    deletion_covers(row_del, a.ts) ||
		    (a.slot == coll_slot && deletion_covers(coll_del, a.ts)) ||
		    storage_rtombs_cover(j->meta, c->rts, c->rt_count, a.ck,
					 a.ts))
			continue;
		if (a.kind == ATOM_KIND_DELETION) {
			struct deletion d = {a.ts, a.ldt};
			if (a.slot == ATOM_SLOT_ROW)
				row_del = storage_deletion_max(row_del, d);
			else {
				coll_slot = a.slot;
				coll_del = d;
			}
		}
		if ((a.flags & ATOM_EXPIRING) && a.ldt <= j->now) {
			/* expired: a tombstone from its expiry on */
			a.flags = ATOM_TOMBSTONE;
			a.ttl = 0;
			a.value = slice_make(NULL, 0);
		}
		if ((a.flags & ATOM_TOMBSTONE) &&
		    purgeable(j, lim, a.ts, a.ldt))
			continue;
		if (!begun &&
		    sst_writer_begin(j->w, token, key, pdel, kept, nrt))
			return -1;
		begun = true;
		if (sst_writer_atom(j->w, &a))
			return -1;
	}
	if (!begun && (pdel.ts != DELETION_NONE || nrt)) {
		if (sst_writer_begin(j->w, token, key, pdel, kept, nrt))
			return -1;
		begun = true;
	}
	return begun ? sst_writer_end(j->w) : 0;
}

/* Pays the bytes written since the last call into compaction_throughput's
 * budget (shared with repair validation). */
static void throttle(struct job *j)
{
	uint64_t bytes = 0;
	if (j->anti)
		for (size_t i = 0; i < j->nout; i++)
			bytes += sst_writer_bytes(j->done_w[i]);
	else
		bytes = sst_writer_bytes(j->w);
	ratelimit_pay(j->db->budget, bytes - j->throttle_bytes);
	j->throttle_bytes = bytes;
}

/* Opens the job's next output (a new generation). */
static int open_output(struct job *j)
{
	uint64_t *g = realloc(j->out_gens, (j->nout + 1) * sizeof(*g));
	struct sst_writer **d = realloc(j->done_w, (j->nout + 1) * sizeof(*d));
	if (g)
		j->out_gens = g;
	if (d)
		j->done_w = d;
	if (!g || !d)
		return err_set(ERR_NOMEM, "compaction");
	uint64_t gen = storage_engine_next_gen(j->db, j->t);
	j->w = sst_writer_new(j->db->o.env, j->t->dir, gen, j->meta, &j->wo);
	if (!j->w)
		return -1;
	j->out_gens[j->nout] = gen;
	j->done_w[j->nout] = j->w;
	j->nout++;
	j->throttle_bytes = 0;
	return 0;
}

/* A leveled output past its size: the next partitions go to a new one. */
static int maybe_cut(struct job *j)
{
	if (!j->max_output || sst_writer_data_bytes(j->w) < j->max_output)
		return 0;
	return open_output(j);
}

static int merge_inputs(struct job *j)
{
	struct sst_iter **its = calloc(j->n, sizeof(*its));
	const struct sst_entry **heads = calloc(j->n, sizeof(*heads));
	bool *live = calloc(j->n, sizeof(*live));
	static const struct storage_read_cmd all = {.with_static = true};
	struct read_ctx c;
	int rc = (!its || !heads || !live)
			 ? err_set(ERR_NOMEM, "compaction")
			 : storage_read_ctx_init(&c, j->meta, &all, j->now);
	bool ctx_ok = !rc;
	for (size_t i = 0; !rc && i < j->n; i++) {
		its[i] = sst_iter_new(j->in[i]);
		int r = its[i] ? sst_iter_next(its[i], &heads[i]) : -1;
		rc = r < 0 ? -1 : 0;
		live[i] = r > 0;
	}
	while (!rc && !j->db->stopping) {
		int64_t token = 0;
		struct slice key = {0};
		bool any = false;
		for (size_t i = 0; i < j->n; i++)
			if (live[i] &&
			    (!any || storage_partition_cmp(heads[i]->token,
							   heads[i]->key, token,
							   key) < 0)) {
				token = heads[i]->token;
				key = heads[i]->key;
				any = true;
			}
		if (!any)
			break;
		storage_read_ctx_reset(&c);
		uint8_t *k = malloc(key.len);
		if (!k || storage_read_ctx_keep(&c, k)) {
			rc = err_set(ERR_NOMEM, "compaction");
			break;
		}
		memcpy(k, key.ptr, key.len);
		key.ptr = k;
		bool skip = false;
		for (size_t i = 0; !rc && i < j->n; i++) {
			if (!live[i] || storage_partition_cmp(heads[i]->token,
							      heads[i]->key,
							      token, key) != 0)
				continue;
			rc = sstable_read_entry(j->in[i], &c, heads[i], true);
			if (rc && j->scrub && err_code() == ERR_CORRUPT) {
				if (j->counters && !j->skip_corrupted) {
					err_set(ERR_CORRUPT,
						"scrub of a counter table met "
						"a corrupt partition: run it "
						"with --skip-corrupted to drop "
						"it (%s)",
						err_msg());
					break;
				}
				LOG_WARN("scrub: partition at offset %" PRIu64
					 " of %s.%s generation %" PRIu64
					 " is unreadable, dropped: %s",
					 heads[i]->block_off, j->meta->keyspace,
					 j->meta->name, j->in[i]->gen,
					 err_msg());
				err_clear();
				rc = 0;
				skip = true;
			}
			int r = rc ? 0 : sst_iter_next(its[i], &heads[i]);
			if (r < 0)
				rc = -1;
			live[i] = r > 0;
		}
		if (!rc && j->anti)
			j->w = j->done_w[kept(j, token) ? 0 : 1];
		if (!rc && skip)
			j->dropped++;
		else if (!rc && !j->anti && !kept(j, token))
			j->dropped++;
		else if (!rc && !(rc = maybe_cut(j)))
			rc = write_partition(j, &c, token, key);
		if (!rc && !skip && j->scrub)
			j->kept++;
		if (!rc)
			throttle(j);
		/* progress: how far the merge has read into each input */
		uint64_t done = 0;
		for (size_t i = 0; i < j->n; i++)
			done += live[i] ? heads[i]->block_off
					: j->in[i]->stats.data_size;
		atomic_store(&j->t->compaction_done, done);
	}
	if (!rc && j->db->stopping)
		rc = err_set(ERR_CLOSED, "compaction interrupted by shutdown");
	for (size_t i = 0; its && i < j->n; i++)
		sst_iter_delete(its[i]);
	free(its);
	free(heads);
	free(live);
	if (ctx_ok)
		storage_read_ctx_destroy(&c);
	return rc;
}

/* Runs the merge into one output, or several (leveled). On success
 * *out holds the j->npub opened SSTables of the j->nout written: the
 * empty ones are not kept. */
int storage_compaction_run_job(struct job *j, struct sstable ***out)
{
	*out = NULL;
	struct sst_writer_options o = {
		.compression = j->meta->options.compression,
		.block_size = j->meta->options.chunk_length,
		.bloom_fp = j->meta->options.bloom_filter_fp_chance,
		.repaired_at = j->in[0]->stats.repaired_at,
		.created_at = j->now,
		.level = j->out_level,
		.sai_hold = j->db->o.sai_build_hold,
	};
	memcpy(o.pending_repair, j->in[0]->stats.pending_repair,
	       sizeof(o.pending_repair));
	for (size_t i = 0; i < j->n; i++) {
		const struct sst_stats *st = &j->in[i]->stats;
		o.expected_partitions += st->partition_count;
		/* repaired inputs: repaired as of the oldest (Cassandra's
		 * minimum repairedAt); any unrepaired one: unrepaired */
		if (st->repaired_at == 0 || o.repaired_at == 0)
			o.repaired_at = 0;
		else if (st->repaired_at < o.repaired_at)
			o.repaired_at = st->repaired_at;
		if (memcmp(st->pending_repair, o.pending_repair,
			   sizeof(o.pending_repair)))
			memset(o.pending_repair, 0, sizeof(o.pending_repair));
		if (clpos_cmp(st->log_end, o.log_end) > 0)
			o.log_end = st->log_end;
	}
	if (j->max_output && o.expected_partitions > 0) {
		/* a cut output holds its share of the partitions */
		uint64_t in_bytes = 0;
		for (size_t i = 0; i < j->n; i++)
			in_bytes += j->in[i]->stats.data_size;
		uint64_t parts = in_bytes / j->max_output + 1;
		o.expected_partitions = o.expected_partitions / parts + 1;
	}
	j->wo = o;
	if (j->anti) {
		/* the part inside the ranges: pending; the rest keeps the
		 * input's state; both at level 0 (they interleave) */
		j->wo.level = 0;
		j->wo.repaired_at = 0;
		memcpy(j->wo.pending_repair, j->session, 16);
		if (open_output(j))
			return -1;
		j->wo = o;
		j->wo.level = 0;
	}
	if (open_output(j)) {
		for (size_t i = 0; i < j->nout; i++)
			sst_writer_abort(j->done_w[i]);
		j->nout = 0;
		return -1;
	}
	if (merge_inputs(j) || storage_compaction_write_log(j, false)) {
		for (size_t i = 0; i < j->nout; i++)
			sst_writer_abort(j->done_w[i]);
		j->nout = 0;
		return -1;
	}
	/* An output that holds nothing (every partition purged, shadowed or
	 * cut away) is not published: its writer is aborted, so no file of
	 * it exists, and the log's "done" line, not an output's presence,
	 * is what says "the inputs are gone" after a crash (the log still
	 * names it; recovery ignores a missing output of a done log). */
	int rc = 0;
	bool *kept_out = calloc(j->nout, sizeof(*kept_out));
	if (!kept_out)
		rc = err_set(ERR_NOMEM, "compaction");
	for (size_t i = 0; i < j->nout; i++) {
		if (rc || sst_writer_partitions(j->done_w[i]) == 0)
			sst_writer_abort(j->done_w[i]);
		else if (sst_writer_finish(j->done_w[i]))
			rc = -1;
		else
			kept_out[i] = true;
	}
	if (!rc && storage_compaction_write_log(j, true))
		rc = -1;
	if (rc) {
		/* the log (not all outputs complete) rolls back at start too */
		for (size_t i = 0; kept_out && i < j->nout; i++)
			if (kept_out[i])
				storage_engine_remove_generation(
					j->db->o.env, j->t->dir,
					j->out_gens[i]);
		free(kept_out);
		return -1;
	}
	j->npub = 0;
	struct sstable **s = calloc(j->nout ? j->nout : 1, sizeof(*s));
	for (size_t i = 0; s && i < j->nout && !rc; i++) {
		if (!kept_out[i])
			continue;
		struct sstable *so =
			sstable_open(j->db->o.env, j->t->dir, j->out_gens[i],
				     j->meta, j->db->cache);
		rc = so ? 0 : -1;
		if (so) {
			sstable_map_files(so, j->db->o.disk_access_mode);
			s[j->npub++] = so;
		}
	}
	free(kept_out);
	if (!s || rc) {
		for (size_t i = 0; s && i < j->npub; i++)
			sstable_unref(s[i]);
		j->npub = 0;
		free(s);
		/* The inputs stay live, so the outputs must go: first the log
		 * says they are not done (a crash then rolls back), then
		 * their files. */
		if (storage_compaction_write_log(j, false) == 0)
			for (size_t i = 0; i < j->nout; i++)
				storage_engine_remove_generation(
					j->db->o.env, j->t->dir,
					j->out_gens[i]);
		return s ? -1 : err_set(ERR_NOMEM, "compaction");
	}
	*out = s;
	return 0;
}

/* One compaction of `t` if one applies: 1 done, 0 nothing to do, -1. A
 * major one (asked for: storage_compact) or a cleanup (a major one that
 * keeps only the partitions in `j`'s ranges) waits for a background one of
 * the table to end first, rather than leaving the table as it was; it
 * takes the SSTables of the repair state of `state` (a reference the
 * caller holds). */
static int compact_once(struct storage *db, struct table *t, bool major,
			struct job *jo, const struct sstable *state,
			uint64_t tomb_below)
{
	struct job j = {.db = db, .t = t};
	bool single = jo && jo->only;
	if (single) {
		j.only = jo->only;
		j.gc = jo->gc;
		j.scrub = jo->scrub;
		j.skip_corrupted = jo->skip_corrupted;
		j.counters = jo->counters;
		j.shadow = jo->shadow;
		major = true;
	} else if (jo) {
		j.cleanup = true;
		j.keep = jo->keep;
		j.nkeep = jo->nkeep;
		major = true;
	}
	pthread_mutex_lock(&db->mu);
	while (major && t->compacting && !db->stopping)
		pthread_cond_wait(&db->done, &db->mu);
	if (t->compacting || t->truncating || t->dropped) {
		pthread_mutex_unlock(&db->mu);
		return 0;
	}
	j.mt_min_ts = t->active->min_ts;
	for (size_t i = 0; i < t->flushing_count; i++)
		if (t->flushing[i]->min_ts < j.mt_min_ts)
			j.mt_min_ts = t->flushing[i]->min_ts;
	j.now = storage_engine_now_sec(db);
	struct pick pk = {0};
	struct sstable **in = calloc(t->version->count + 1, sizeof(*in));
	if (single) {
		/* that SSTable alone, if compaction has not replaced it */
		pk.leveled = t->meta->options.compaction ==
			     STORAGE_COMPACTION_LEVELED;
		for (size_t i = 0; in && i < t->version->count; i++)
			if (t->version->ssts[i] == j.only) {
				in[0] = j.only;
				j.n = 1;
				pk.out_level = j.only->stats.level;
			}
	} else {
		j.n = in ? storage_compaction_pick_inputs(
				   t, major, jo != NULL, state, j.now,
				   j.mt_min_ts, tomb_below, &pk, in)
			 : 0;
	}
	bool tombstone = pk.tombstone;
	j.out_level = pk.out_level;
	if (pk.leveled)
		j.max_output = t->meta->options.sstable_size_bytes;
	if (!j.n) {
		pthread_mutex_unlock(&db->mu);
		free(in);
		return 0;
	}
	j.in = in;
	t->compacting = true;
	t->compaction_kind = j.scrub        ? "Scrub"
			     : j.gc         ? "Remove deleted data"
			     : jo           ? "Cleanup"
			     : pk.tombstone ? "Tombstone Compaction"
					    : "Compaction";
	t->compaction_total = 0;
	for (size_t i = 0; i < j.n; i++)
		t->compaction_total += in[i]->stats.data_size;
	atomic_store(&t->compaction_done, 0);
	/* a task id unique per compaction: the table's id mixed with the
	 * count of its compactions and the first input's generation */
	memcpy(t->compaction_id, t->meta->id, 16);
	uint64_t salt =
		(t->compactions + 1) * 0x9E3779B97F4A7C15ull ^ in[0]->gen;
	for (int b = 0; b < 8; b++)
		t->compaction_id[8 + b] ^= (uint8_t)(salt >> (8 * b));
	t->compaction_id[6] = (uint8_t)((t->compaction_id[6] & 0x0f) | 0x40);
	t->compaction_id[8] = (uint8_t)((t->compaction_id[8] & 0x3f) | 0x80);
	j.meta = storage_table_meta_ref(t->meta);
	j.v = t->version;
	storage_version_ref(j.v);
	/* storage_compactions_hold (tests): a major compaction asked for
	 * waits here, running (compactionstats lists it at 0%) */
	while (major && !jo && db->compactions_held && !db->stopping)
		pthread_cond_wait(&db->done, &db->mu);
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
			for (size_t i = 0; i < j.n; i++)
				sstable_mark_obsolete(j.in[i]);
			t->compactions++;
			t->bytes_compacted += t->compaction_total;
			for (size_t i = 0; i < j.npub; i++)
				t->compacted_bytes += out[i]->disk_bytes;
			if (tombstone)
				t->tombstone_compactions++;
		} else {
			rc = -1;
		}
	}
	t->compacting = false;
	t->compaction_kind = NULL;
	pthread_cond_broadcast(&db->done);
	pthread_mutex_unlock(&db->mu);
	if (rc)
		LOG_AT(LOG_LEVEL_WARN, "compaction of %s.%s failed: %s",
		       j.meta->keyspace, j.meta->name, err_msg());
	for (size_t i = 0; out && i < j.npub; i++)
		sstable_unref(out[i]);
	free(out);
	free(j.out_gens);
	free(j.done_w);
	storage_version_unref(j.v);
	storage_table_meta_unref(j.meta);
	free(in);
	if (jo) {
		jo->dropped = j.dropped;
		jo->kept = j.kept;
	}
	return rc ? -1 : tombstone ? 2 : 1;
}

/* A major compaction (jo NULL) or a cleanup (jo: its ranges) of every
 * repair state of `t` in turn, each on its own: repaired, unrepaired and
 * each session's pending SSTables are never merged. */
static int compact_each_state(struct storage *db, struct table *t,
			      struct job *jo)
{
	pthread_mutex_lock(&db->mu);
	size_t n = t->version->count;
	struct sstable **st = calloc(n + 1, sizeof(*st));
	n = st ? storage_compaction_repair_states(t->version, st) : 0;
	for (size_t i = 0; i < n; i++)
		sstable_ref(st[i]);
	pthread_mutex_unlock(&db->mu);
	if (!st)
		return err_set(ERR_NOMEM, "compaction");
	int rc = 0;
	uint64_t dropped = 0;
	for (size_t i = 0; i < n; i++) {
		if (jo)
			jo->dropped = 0;
		if (!rc && !db->stopping &&
		    compact_once(db, t, true, jo, st[i], UINT64_MAX) < 0)
			rc = -1;
		if (jo)
			dropped += jo->dropped;
		sstable_unref(st[i]);
	}
	free(st);
	if (jo)
		jo->dropped = dropped;
	return rc;
}

int storage_engine_compact_table(struct storage *db, struct table *t,
				 bool major)
{
	if (major)
		return compact_each_state(db, t, NULL);
	/* Compactions follow each other until none applies, tombstone ones
	 * included (Cassandra submits the next background task as each one
	 * ends): ending the round at a tombstone compaction left the next
	 * candidate to the compactor's 5-minute look, one SSTable per look.
	 * A tombstone compaction's output may be a candidate again
	 * (tombstone_compaction_interval 0, tombstones that still shadow
	 * data), so within a round only SSTables older than the round (a
	 * generation below the first it could write) are candidates: the
	 * round ends. */
	pthread_mutex_lock(&db->mu);
	uint64_t round_gen = t->next_gen;
	pthread_mutex_unlock(&db->mu);
	int r;
	while ((r = compact_once(db, t, false, NULL, NULL, round_gen)) > 0 &&
	       !db->stopping)
		;
	return r < 0 ? -1 : 0;
}

int storage_cleanup(struct storage *db, const uint8_t table_id[16],
		    const struct storage_token_range *keep, size_t nkeep,
		    uint64_t *dropped)
{
	struct table *t = storage_engine_table_get(db, table_id);
	if (!t)
		return -1;
	if (storage_flush(db, table_id) != 0) {
		storage_engine_table_unref(t);
		return -1;
	}
	struct job j = {.keep = keep, .nkeep = nkeep};
	int rc = compact_each_state(db, t, &j);
	storage_compaction_process_logs(db, t, true);
	storage_engine_table_unref(t);
	if (dropped)
		*dropped = j.dropped;
	return rc < 0 ? -1 : 0;
}

/* Oldest data first, as Cassandra's garbagecollect orders its SSTables
 * (by max timestamp ascending): what a newer one's tombstones shadow goes
 * before that one is rewritten. */
static int max_ts_cmp(const void *a, const void *b)
{
	const struct sstable *x = *(struct sstable *const *)a;
	const struct sstable *y = *(struct sstable *const *)b;
	if (x->stats.max_ts != y->stats.max_ts)
		return x->stats.max_ts < y->stats.max_ts ? -1 : 1;
	return x->gen < y->gen ? -1 : x->gen > y->gen;
}

/* Cassandra's Scrubber summary lines for one SSTable. */
static void scrub_log(const struct storage_table_meta *meta,
		      const struct sstable *s, uint64_t kept, uint64_t dropped)
{
	if (kept)
		LOG_INFO("Scrub of %s complete: %" PRIu64
			 " partitions in new sstable and 0 empty (tombstoned) "
			 "partitions dropped",
			 s->data_path, kept);
	if (kept && dropped)
		LOG_WARN(
			"Unable to recover %" PRIu64
			" partitions that were skipped.  You can attempt "
			"manual recovery from the pre-scrub snapshot.  You can "
			"also run nodetool repair to transfer the data from a "
			"healthy replica, if any (%s.%s)",
			dropped, meta->keyspace, meta->name);
	else if (dropped)
		LOG_WARN("No valid partitions found while scrubbing %s; it is "
			 "marked for deletion now. If you want to attempt "
			 "manual recovery, you can find a copy in the "
			 "pre-scrub snapshot",
			 s->data_path);
	else if (!kept)
		LOG_INFO("Scrub of %s complete; looks like all 0 partitions "
			 "were tombstoned",
			 s->data_path);
}

/* garbagecollect and scrub: each SSTable of the table as it is now,
 * rewritten alone by the job `proto` describes (one at a time, oldest
 * data first; one that compaction replaced meanwhile is left to it). */
static int rewrite_each(struct storage *db, const uint8_t table_id[16],
			struct job *proto, uint64_t *kept, uint64_t *dropped)
{
	struct table *t = storage_engine_table_get(db, table_id);
	if (!t)
		return -1;
	static const struct storage_read_cmd all = {.with_static = true};
	struct read_ctx shadow;
	pthread_mutex_lock(&db->mu);
	struct version *v = t->version;
	storage_version_ref(v);
	const struct storage_table_meta *meta = storage_table_meta_ref(t->meta);
	pthread_mutex_unlock(&db->mu);
	struct sstable **order = malloc((v->count + 1) * sizeof(*order));
	int rc = order ? storage_read_ctx_init(&shadow, meta, &all,
					       storage_engine_now_sec(db))
		       : err_set(ERR_NOMEM, "rewrite order");
	bool shadow_ok = rc == 0;
	if (order) {
		memcpy(order, v->ssts, v->count * sizeof(*order));
		qsort(order, v->count, sizeof(*order), max_ts_cmp);
	}
	for (size_t c = 0; c < meta->column_count; c++)
		if (meta->columns[c].type &&
		    meta->columns[c].type->kind == STORAGE_TYPE_COUNTER)
			proto->counters = true;
	for (size_t i = 0; !rc && i < v->count && !db->stopping; i++) {
		struct job jo = *proto;
		jo.only = order[i];
		jo.shadow = &shadow;
		jo.kept = jo.dropped = 0;
		int r = compact_once(db, t, true, &jo, order[i], UINT64_MAX);
		rc = r < 0 ? -1 : 0;
		*kept += jo.kept;
		*dropped += jo.dropped;
		if (r > 0 && proto->scrub)
			scrub_log(meta, order[i], jo.kept, jo.dropped);
	}
	if (shadow_ok)
		storage_read_ctx_destroy(&shadow);
	free(order);
	storage_compaction_process_logs(db, t, true);
	storage_version_unref(v);
	storage_table_meta_unref(meta);
	storage_engine_table_unref(t);
	return rc;
}

int storage_garbagecollect(struct storage *db, const uint8_t table_id[16],
			   bool cell)
{
	struct job proto = {.gc = cell ? 2 : 1};
	uint64_t kept = 0, dropped = 0;
	return rewrite_each(db, table_id, &proto, &kept, &dropped);
}

int storage_scrub(struct storage *db, const uint8_t table_id[16],
		  bool skip_corrupted, uint64_t *kept, uint64_t *dropped)
{
	struct job proto = {.scrub = true, .skip_corrupted = skip_corrupted};
	*kept = *dropped = 0;
	return rewrite_each(db, table_id, &proto, kept, dropped);
}

int storage_compact(struct storage *db, const uint8_t table_id[16], bool major)
{
	pthread_mutex_lock(&db->mu);
	struct table *t = storage_engine_table_find(db, table_id);
	if (t)
		storage_engine_table_ref(t);
	/* wait for a background compaction of the table to finish */
	while (t && t->compacting && !major)
		pthread_cond_wait(&db->done, &db->mu);
	pthread_mutex_unlock(&db->mu);
	if (!t)
		return err_set(ERR_NOT_FOUND, "unknown table");
	int rc = storage_engine_compact_table(db, t, major);
	storage_compaction_process_logs(db, t, true);
	storage_engine_table_unref(t);
	return rc;
}

void storage_compactions_hold(struct storage *db, bool hold)
{
	pthread_mutex_lock(&db->mu);
	db->compactions_held = hold;
	pthread_cond_broadcast(&db->done);
	pthread_mutex_unlock(&db->mu);
}

void *storage_engine_compactor_main(void *arg)
{
	struct storage *db = arg;
	thread_name_self("compaction");
	thread_background();
	pthread_mutex_lock(&db->mu);
	while (!db->stopping) {
		if (!db->o.auto_compaction) {
			pthread_cond_wait(&db->work, &db->mu);
			continue;
		}
		if (!db->compaction_wanted) {
			/* SSTables age into tombstone compactions with no
			 * flush to say so: look again every few minutes */
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += TOMBSTONE_CHECK_SECONDS;
			if (pthread_cond_timedwait(&db->work, &db->mu,
						   &until) == ETIMEDOUT)
				db->compaction_wanted = true;
			continue;
		}
		db->compaction_wanted = false;
		int64_t round_us = env_wall_us(db->o.env);
		/* the tables of the moment, referenced: a DROP may unlink
		 * one while another is compacted */
		size_t n = 0;
		for (struct table *t = db->tables; t; t = t->next)
			n++;
		struct table **all = calloc(n ? n : 1, sizeof(*all));
		n = 0;
		for (struct table *t = db->tables; all && t; t = t->next) {
			storage_engine_table_ref(t);
			all[n++] = t;
		}
		pthread_mutex_unlock(&db->mu);
		for (size_t i = 0; i < n; i++) {
			if (!db->stopping) {
				storage_engine_compact_table(db, all[i], false);
				storage_compaction_process_logs(db, all[i],
								true);
			}
			storage_engine_table_unref(all[i]);
		}
		free(all);
		storage_compaction_watch_note(db, round_us);
		pthread_mutex_lock(&db->mu);
	}
	pthread_mutex_unlock(&db->mu);
	return NULL;
}
