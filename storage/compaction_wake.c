/*
 * Waking the compactor when an SSTable becomes fully droppable: nothing
 * but tombstones and expired cells (TTL'd data), all past gc_grace, which
 * a background round then drops whole (compaction_pick.c, "fully expired
 * SSTables"). Nothing is written when that moment comes, so without a
 * wake-up of its own it would wait for the next flush or the compactor's
 * periodic look.
 *
 * A timer of the engine's env (storage_droppable_watch_start, on the loop
 * thread that owns its timers) fires at the earliest such moment of the
 * live SSTables and wakes the compactor. Its deadline moves earlier when
 * a flush or an import brings an SSTable that expires sooner: after each
 * round (every flush makes one) the compactor computes the deadline again
 * and, when it is earlier than the armed one, posts a re-arm to the loop
 * through the engine's post hook; the loop re-arms. Nothing blocks the
 * loop: a fire or a re-arm takes the engine lock briefly, the compaction
 * itself runs on the compactor thread.
 *
 * The watch outlives the engine while a re-arm it posted is queued: it
 * holds one reference per post, and a re-arm that finds the engine gone
 * only drops its reference.
 */
#define LOG_MODULE "storage"
#include "storage/compaction_internal.h"

#include "common/env.h"
#include "common/err.h"
#include "common/log.h"

#include <stdlib.h>

struct droppable_watch {
	pthread_mutex_t mu;
	struct storage *db; /* NULL once the engine is deleted */
	struct env_timer *timer;
	int64_t armed_us; /* wall time it fires at; INT64_MAX: not armed */
	/* When the last compactor round began (wall time): SSTables that
	 * became droppable before it were that round's to drop (one it
	 * left is held back by older data and waits for a flush) */
	int64_t round_us;
	unsigned refs; /* the engine's, and one per queued re-arm */
	bool posted;   /* a re-arm is queued */
};

/* The wall time (microseconds) at which the earliest live SSTable that
 * becomes fully droppable after `after_us` does; INT64_MAX when none
 * will. The lock held. */
static int64_t next_droppable_us(struct storage *db, int64_t after_us)
{
	int64_t next = INT64_MAX;
	for (struct table *t = db->tables; t; t = t->next) {
		if (t->dropped || !t->version)
			continue;
		int64_t grace = t->meta->options.gc_grace_seconds;
		for (size_t i = 0; i < t->version->count; i++) {
			const struct sst_stats *st =
				&t->version->ssts[i]->stats;
			if (!st->has_v2 || st->has_live_no_ttl ||
			    !st->partition_count || sst_stats_pending(st) ||
			    st->max_ldt == INT64_MIN ||
			    st->max_ldt > INT64_MAX / 1000000 - grace - 1)
				continue;
			/* droppable once max_ldt < now - gc_grace */
			int64_t at = (st->max_ldt + grace + 1) * 1000000;
			if (at > after_us && at < next)
				next = at;
		}
	}
	return next;
}

static void watch_unref(struct droppable_watch *w)
{
	pthread_mutex_lock(&w->mu);
	bool last = --w->refs == 0;
	pthread_mutex_unlock(&w->mu);
	if (last) {
		pthread_mutex_destroy(&w->mu);
		free(w);
	}
}

/* On the loop: the deadline reached; a round of the compactor. */
static void watch_fire(void *arg)
{
	struct droppable_watch *w = arg;
	struct storage *db = w->db;
	int64_t now = env_wall_us(db->o.env);
	pthread_mutex_lock(&w->mu);
	int64_t at = w->armed_us;
	bool early = at != INT64_MAX && now < at;
	if (!early)
		w->armed_us = INT64_MAX;
	pthread_mutex_unlock(&w->mu);
	if (early) {
		/* the timer's clock ran ahead of the wall clock: a round now
		 * would find the SSTable not yet expired */
		env_timer_arm(db->o.env, w->timer, (uint64_t)(at - now));
		return;
	}
	pthread_mutex_lock(&db->mu);
	db->compaction_wanted = true;
	pthread_cond_broadcast(&db->work);
	pthread_mutex_unlock(&db->mu);
	/* the round computes the next deadline and posts it */
}

/* On the loop: arms the timer for the engine's next deadline. */
static void watch_arm(struct droppable_watch *w)
{
	struct storage *db = w->db;
	pthread_mutex_lock(&w->mu);
	int64_t after = w->round_us;
	pthread_mutex_unlock(&w->mu);
	int64_t now = env_wall_us(db->o.env);
	pthread_mutex_lock(&db->mu);
	int64_t next = next_droppable_us(db, after);
	pthread_mutex_unlock(&db->mu);
	pthread_mutex_lock(&w->mu);
	w->armed_us = next;
	pthread_mutex_unlock(&w->mu);
	if (next == INT64_MAX)
		env_timer_cancel(db->o.env, w->timer);
	else /* one already due (since the last round began) fires now */
		env_timer_arm(db->o.env, w->timer,
			      next > now ? (uint64_t)(next - now) : 0);
}

/* On the loop, from the post hook. */
static void watch_rearm(void *arg, int status, enum err_code code)
{
	(void)status;
	(void)code;
	struct droppable_watch *w = arg;
	pthread_mutex_lock(&w->mu);
	w->posted = false;
	bool live = w->db != NULL;
	pthread_mutex_unlock(&w->mu);
	if (live)
		watch_arm(w);
	watch_unref(w);
}

int storage_droppable_watch_start(struct storage *db)
{
	if (db->watch)
		return 0;
	struct droppable_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(ERR_NOMEM, "droppable watch");
	w->timer = env_timer_new(db->o.env, watch_fire, w);
	if (!w->timer) {
		free(w);
		return -1;
	}
	pthread_mutex_init(&w->mu, NULL);
	w->db = db;
	w->refs = 1;
	w->armed_us = INT64_MAX;
	pthread_mutex_lock(&db->mu);
	db->watch = w;
	pthread_mutex_unlock(&db->mu);
	watch_arm(w);
	return 0;
}

void storage_compaction_watch_note(struct storage *db, int64_t round_us)
{
	pthread_mutex_lock(&db->mu);
	struct droppable_watch *w = db->watch;
	int64_t next = w ? next_droppable_us(db, round_us) : INT64_MAX;
	pthread_mutex_unlock(&db->mu);
	if (!w || !db->o.post)
		return;
	pthread_mutex_lock(&w->mu);
	if (round_us > w->round_us)
		w->round_us = round_us;
	bool post = next < w->armed_us && !w->posted;
	if (post) {
		w->posted = true;
		w->refs++;
	}
	pthread_mutex_unlock(&w->mu);
	if (post)
		db->o.post(db->o.post_arg, watch_rearm, w, 0, ERR_NONE);
}

void storage_compaction_watch_stop(struct storage *db)
{
	pthread_mutex_lock(&db->mu);
	struct droppable_watch *w = db->watch;
	db->watch = NULL;
	pthread_mutex_unlock(&db->mu);
	if (!w)
		return;
	env_timer_free(db->o.env, w->timer);
	pthread_mutex_lock(&w->mu);
	w->db = NULL;
	pthread_mutex_unlock(&w->mu);
	watch_unref(w);
}
