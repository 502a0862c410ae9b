/* storage commitlog: round trip across segments, crash under each sync
 * mode with the fault-injecting env, torn tails vs corruption, a failing
 * fdatasync stopping the log, the group commit leader's wait. */
#include "common/env_real.h"
#include "common/err.h"
#include "conf/conf.h"
#include "storage/commitlog_internal.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fault_env.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t seed;

struct fx {
	struct env *real;
	struct fault_env *fe;
	struct env *env;
	char dir[512];
};

static void fx_init(struct fx *f, const char *tag)
{
	f->real = env_real_new(NULL);
	f->fe = fault_env_new(f->real);
	f->env = fault_env_env(f->fe);
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir(tag));
}

static void fx_free(struct fx *f)
{
	test_tmpdir_remove(f->dir);
	fault_env_delete(f->fe);
	env_real_delete(f->real);
}

static struct commitlog *open_log_sized(struct fx *f, int mode, int policy,
					uint64_t segment_size)
{
	struct commitlog_options o = {
		.env = f->env,
		.dir = f->dir,
		.sync_mode = mode,
		.period_ms = 10000,
		.window_ms = 2,
		.segment_size = segment_size,
		.failure_policy = policy,
	};
	struct commitlog *cl = commitlog_new(&o);
	ck_assert_ptr_nonnull(cl);
	return cl;
}

static struct commitlog *open_log(struct fx *f, int mode, int policy)
{
	return open_log_sized(f, mode, policy, 64 * 1024);
}

/* A new log with nothing to replay, started at segment id `min_id` or
 * above (commitlog_start). */
static struct commitlog *start_empty(struct fx *f, int mode, uint64_t min_id)
{
	struct commitlog *cl = open_log(f, mode, CONF_POLICY_STOP);
	struct commitlog_replay_stats st;
	ck_assert_int_eq(commitlog_replay(cl, NULL, NULL, &st), 0);
	ck_assert_int_eq(commitlog_start(cl, min_id), 0);
	return cl;
}

struct seen {
	int *seq;
	size_t n, cap;
	struct clpos last; /* where the last record replayed ends */
};

static int on_record(void *arg, struct clpos pos, const uint8_t *body,
		     size_t len)
{
	struct seen *s = arg;
	s->last = pos;
	int v;
	char tmp[64];
	if (len >= sizeof(tmp))
		return err_set(ERR_CORRUPT, "long record");
	memcpy(tmp, body, len);
	tmp[len] = 0;
	if (sscanf(tmp, "rec-%d", &v) != 1)
		return err_set(ERR_CORRUPT, "foreign record");
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->seq = realloc(s->seq, s->cap * sizeof(int));
	}
	s->seq[s->n++] = v;
	return 0;
}

static int replay(struct fx *f, int policy, struct seen *s,
		  struct commitlog_replay_stats *st)
{
	memset(s, 0, sizeof(*s));
	struct commitlog *cl =
		open_log(f, CONF_COMMITLOG_SYNC_PERIODIC, policy);
	int rc = commitlog_replay(cl, on_record, s, st);
	commitlog_delete(cl);
	return rc;
}

static atomic_int acked;
static atomic_int max_acked;

static void on_done(void *arg, int status, enum err_code code)
{
	(void)code;
	if (status == 0) {
		int v = (int)(intptr_t)arg;
		atomic_fetch_add(&acked, 1);
		int cur = atomic_load(&max_acked);
		while (v > cur &&
		       !atomic_compare_exchange_weak(&max_acked, &cur, v))
			;
	}
}

static void append_n(struct commitlog *cl, int from, int n, bool with_cb)
{
	char body[64];
	for (int i = from; i < from + n; i++) {
		int len = snprintf(body, sizeof(body), "rec-%d-%0*d", i,
				   (i * 7) % 40, 0);
		struct clpos pos;
		ck_assert_int_eq(commitlog_append(cl, (uint8_t *)body,
						  (size_t)len, &pos,
						  with_cb ? on_done : NULL,
						  (void *)(intptr_t)i),
				 0);
	}
}

START_TEST(round_trip_across_segments)
{
	struct fx f;
	fx_init(&f, "cl-rt");
	struct commitlog *cl = start_empty(&f, CONF_COMMITLOG_SYNC_PERIODIC, 1);
	struct commitlog_replay_stats st;
	append_n(cl, 0, 5000, false);
	ck_assert_uint_gt(commitlog_segment_count(cl), 2);
	commitlog_delete(cl);
	struct seen s;
	ck_assert_int_eq(replay(&f, CONF_POLICY_STOP, &s, &st), 0);
	ck_assert_uint_eq(s.n, 5000);
	for (int i = 0; i < 5000; i++)
		ck_assert_int_eq(s.seq[i], i);
	ck_assert_uint_eq(st.torn, 0);
	free(s.seq);
	fx_free(&f);
}
END_TEST

/* Writes until acknowledged, cuts the power, checks every acknowledged
 * record survived and the survivors are a prefix. */
static void crash_round(int mode, uint64_t round_seed)
{
	struct fx f;
	fx_init(&f, "cl-crash");
	struct commitlog *cl = start_empty(&f, mode, 1);
	struct commitlog_replay_stats st;
	atomic_store(&acked, 0);
	atomic_store(&max_acked, -1);
	int n = 1500 + (int)(round_seed % 1000);
	append_n(cl, 0, n, true);
	if (mode == CONF_COMMITLOG_SYNC_PERIODIC) {
		/* periodic: what a sync covered survives */
		commitlog_sync_now(cl);
		atomic_store(&max_acked, n - 1);
		append_n(cl, n, 200, false);
	} else {
		/* wait for some acknowledgements, keep writing meanwhile */
		while (atomic_load(&acked) < n / 2)
			usleep(100);
		append_n(cl, n, 200, true);
	}
	int must = atomic_load(&max_acked);
	fault_env_freeze(f.fe);
	commitlog_delete(cl);
	fault_env_crash(f.fe, round_seed);
	struct seen s;
	ck_assert_int_eq(replay(&f, CONF_POLICY_STOP, &s, &st), 0);
	ck_assert_int_ge((int)s.n, must + 1);
	for (size_t i = 0; i < s.n; i++)
		ck_assert_int_eq(s.seq[i], (int)i);
	free(s.seq);
	fx_free(&f);
}

START_TEST(acknowledged_writes_survive_a_crash_batch)
{
	for (int r = 0; r < 4; r++)
		crash_round(CONF_COMMITLOG_SYNC_BATCH, seed + (uint64_t)r);
}
END_TEST

START_TEST(acknowledged_writes_survive_a_crash_group)
{
	for (int r = 0; r < 4; r++)
		crash_round(CONF_COMMITLOG_SYNC_GROUP,
			    seed + 100 + (uint64_t)r);
}
END_TEST

START_TEST(synced_writes_survive_a_crash_periodic)
{
	for (int r = 0; r < 4; r++)
		crash_round(CONF_COMMITLOG_SYNC_PERIODIC,
			    seed + 200 + (uint64_t)r);
}
END_TEST

static void flip_byte(const char *path, long off)
{
	FILE *fp = fopen(path, "r+b");
	ck_assert_ptr_nonnull(fp);
	fseek(fp, off, SEEK_SET);
	int c = fgetc(fp);
	fseek(fp, off, SEEK_SET);
	fputc(c ^ 0x5a, fp);
	fclose(fp);
}

START_TEST(corruption_below_a_sync_marker_stops_start)
{
	struct fx f;
	fx_init(&f, "cl-corrupt");
	struct commitlog *cl = start_empty(&f, CONF_COMMITLOG_SYNC_BATCH, 7);
	struct commitlog_replay_stats st;
	append_n(cl, 0, 3000, false);
	commitlog_sync_now(cl);
	commitlog_delete(cl);
	char path[600];
	snprintf(path, sizeof(path), "%s/CommitLog-1-7.log", f.dir);

	flip_byte(path, 200); /* inside an early, synced record */
	struct seen s;
	ck_assert_int_eq(replay(&f, CONF_POLICY_STOP, &s, &st), -1);
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	ck_assert_ptr_nonnull(strstr(err_msg(), "CommitLog-1-7.log"));
	ck_assert_ptr_nonnull(strstr(err_msg(), "offset"));
	free(s.seq);
	/* ignore: the rest of that segment is skipped, later ones replay */
	ck_assert_int_eq(replay(&f, CONF_POLICY_IGNORE, &s, &st), 0);
	ck_assert_uint_eq(st.skipped, 1);
	ck_assert_uint_gt(s.n, 0);
	free(s.seq);
	flip_byte(path, 200);

	flip_byte(path, 3); /* the header */
	ck_assert_int_eq(replay(&f, CONF_POLICY_STOP, &s, &st), -1);
	ck_assert_ptr_nonnull(strstr(err_msg(), "header"));
	free(s.seq);
	fx_free(&f);
}
END_TEST

START_TEST(failed_fdatasync_stops_the_log)
{
	struct fx f;
	fx_init(&f, "cl-eio");
	struct commitlog *cl = start_empty(&f, CONF_COMMITLOG_SYNC_BATCH, 1);
	append_n(cl, 0, 10, false);
	ck_assert_int_eq(commitlog_sync_now(cl), 0);
	fault_env_fail_writes(f.fe, "CommitLog", EIO);
	struct clpos pos;
	/* the write itself fails, or its sync does: either way it stops */
	int rc = commitlog_append(cl, (const uint8_t *)"rec-10", 6, &pos, NULL,
				  NULL);
	if (rc == 0)
		ck_assert_int_eq(commitlog_sync_now(cl), -1);
	ck_assert(commitlog_failed(cl));
	fault_env_fail_writes(f.fe, NULL, 0);
	ck_assert_int_eq(commitlog_append(cl, (const uint8_t *)"rec-11", 6,
					  &pos, NULL, NULL),
			 -1);
	ck_assert_ptr_nonnull(strstr(err_msg(), "commitlog stopped"));
	commitlog_delete(cl);
	fx_free(&f);
}
END_TEST

/* Segments are zero-filled when created (so that a sync overwrites
 * written blocks): replay must end exactly where the data ends, with no
 * torn tail, and a tail torn inside the zeros is one torn record. */
START_TEST(zero_filled_segment_replay_stops_at_the_end_of_the_data)
{
	struct fx f;
	fx_init(&f, "cl-zero");
	struct commitlog *cl = start_empty(&f, CONF_COMMITLOG_SYNC_BATCH, 3);
	struct commitlog_replay_stats st;
	struct clpos last = {0, 0};
	char body[64];
	for (int i = 0; i < 100; i++) {
		int len = snprintf(body, sizeof(body), "rec-%d", i);
		ck_assert_int_eq(commitlog_append(cl, (uint8_t *)body,
						  (size_t)len, &last, NULL,
						  NULL),
				 0);
	}
	ck_assert_int_eq(commitlog_wait_durable(cl, last), 0);
	commitlog_delete(cl);

	char path[600];
	snprintf(path, sizeof(path), "%s/CommitLog-1-3.log", f.dir);
	uint8_t *img;
	size_t len;
	ck_assert_int_eq(env_read_file(f.real, path, 1 << 20, &img, &len), 0);
	/* the whole segment was written when it was created */
	ck_assert_uint_eq(len, 64 * 1024);
	/* after the data: sync markers, then zeros to the end */
	size_t marker = 12 + 1 + 8, end = (size_t)last.off;
	while (end + marker <= len && img[end + 3] == 9 && img[end + 8] == 2)
		end += marker;
	ck_assert_uint_gt(end, last.off);
	for (size_t i = end; i < len; i++)
		ck_assert_uint_eq(img[i], 0);

	struct seen s = {0};
	ck_assert_int_eq(replay(&f, CONF_POLICY_STOP, &s, &st), 0);
	ck_assert_uint_eq(s.n, 100);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(s.seq[i], i);
	ck_assert_uint_eq(s.last.seg, 3);
	ck_assert_uint_eq(s.last.off, last.off);
	ck_assert_uint_eq(st.torn, 0);
	free(s.seq);

	/* a record torn in the zeros after the data (its first 10 bytes:
	 * the length word, its checksum and 2 body bytes) */
	memcpy(img + end, img + 18, 10);
	memset(&s, 0, sizeof(s));
	memset(&st, 0, sizeof(st));
	uint64_t bad;
	ck_assert_int_eq(commitlog_scan_segment(img, len, false, on_record, &s,
						&st, &bad),
			 0);
	ck_assert_uint_eq(s.n, 100);
	ck_assert_uint_eq(s.last.off, last.off);
	ck_assert_uint_eq(st.torn, 1);
	free(s.seq);
	free(img);
	fx_free(&f);
}
END_TEST

struct sync_writer {
	struct commitlog *cl;
	int id, n;
	int acked; /* writes commitlog_wait_durable returned 0 for */
	bool until_failure;
	atomic_int *total;
};

static void *sync_writer_main(void *arg)
{
	struct sync_writer *w = arg;
	char body[64];
	for (int i = 0; i < w->n || w->until_failure; i++) {
		int len = snprintf(body, sizeof(body), "rec-%d",
				   w->id * 100000 + i);
		struct clpos pos;
		if (commitlog_append(w->cl, (uint8_t *)body, (size_t)len, &pos,
				     NULL, NULL) ||
		    commitlog_wait_durable(w->cl, pos))
			break;
		w->acked = i + 1;
		atomic_fetch_add(w->total, 1);
	}
	return NULL;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Runs `nw` (at most SYNC_WRITERS_MAX) threads of `per` synchronous
 * writes each on `cl` and checks that every one of their waits returned. */
#define SYNC_WRITERS_MAX 16

static void run_sync_writers(struct commitlog *cl, int nw, int per)
{
	atomic_int total = 0;
	pthread_t th[SYNC_WRITERS_MAX];
	struct sync_writer w[SYNC_WRITERS_MAX];
	ck_assert_int_le(nw, SYNC_WRITERS_MAX);
	for (int i = 0; i < nw; i++) {
		w[i] = (struct sync_writer){
			.cl = cl, .id = i, .n = per, .total = &total};
		ck_assert_int_eq(
			pthread_create(&th[i], NULL, sync_writer_main, &w[i]),
			0);
	}
	for (int i = 0; i < nw; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].acked, per);
	}
}

/* Many threads each waiting for their own writes (the leader-based group
 * commit of storage_apply_sync): every wait returns, across many segment
 * rollovers, and every write a wait acknowledged survives a power cut. */
static void concurrent_sync_writers(int mode, uint64_t round_seed)
{
	enum { NW = 12, PER = 600 };
	struct fx f;
	fx_init(&f, "cl-writers");
	struct commitlog *cl = start_empty(&f, mode, 1);
	struct commitlog_replay_stats st;
	run_sync_writers(cl, NW, PER);
	ck_assert_uint_gt(commitlog_segment_count(cl), 2);
	fault_env_freeze(f.fe);
	commitlog_delete(cl);
	fault_env_crash(f.fe, round_seed);
	struct seen s;
	ck_assert_int_eq(replay(&f, CONF_POLICY_STOP, &s, &st), 0);
	ck_assert_uint_eq(s.n, NW * PER);
	qsort(s.seq, s.n, sizeof(int), cmp_int);
	for (int i = 0; i < NW; i++)
		for (int j = 0; j < PER; j++)
			ck_assert_int_eq(s.seq[i * PER + j], i * 100000 + j);
	free(s.seq);
	fx_free(&f);
}

START_TEST(concurrent_sync_writers_group)
{
	concurrent_sync_writers(CONF_COMMITLOG_SYNC_GROUP, seed + 300);
}
END_TEST

START_TEST(concurrent_sync_writers_batch)
{
	concurrent_sync_writers(CONF_COMMITLOG_SYNC_BATCH, seed + 400);
}
END_TEST

static struct clpos append_rec(struct commitlog *cl, int v)
{
	char body[32];
	int len = snprintf(body, sizeof(body), "rec-%d", v);
	struct clpos pos;
	ck_assert_int_eq(commitlog_append(cl, (uint8_t *)body, (size_t)len,
					  &pos, NULL, NULL),
			 0);
	return pos;
}

/* A write acknowledged through a later segment's sync: A goes into a
 * segment, the segment fills and rolls over, B goes into the next one
 * and B's writer leads a sync. That sync covers only the new segment; A
 * is durable only once the syncer has sealed the old one, so waiting
 * for A must not return before. (It did: `synced` passed the unsealed
 * segment, and a power cut right after the acknowledgement lost A.)
 * Slow syncs widen the window; rounds repeat it, since the syncer may
 * win the race to the lock. */
START_TEST(ack_waits_for_the_rolled_over_segment)
{
	for (int round = 0; round < 8; round++) {
		struct fx f;
		fx_init(&f, "cl-seal-ack");
		struct commitlog *cl =
			start_empty(&f, CONF_COMMITLOG_SYNC_BATCH, 1);
		fault_env_set_sync_delay_us(f.fe, 20000);
		struct clpos a = append_rec(cl, 0);
		int v = 1;
		while (append_rec(cl, v).seg == a.seg)
			v++;
		struct clpos b = append_rec(cl, ++v);
		ck_assert_int_eq(commitlog_wait_durable(cl, b), 0);
		ck_assert_int_eq(commitlog_wait_durable(cl, a), 0);
		fault_env_freeze(f.fe);
		commitlog_delete(cl);
		fault_env_crash(f.fe, seed + 500 + (uint64_t)round);
		fault_env_set_sync_delay_us(f.fe, 0);
		struct seen s;
		struct commitlog_replay_stats st;
		ck_assert_int_eq(replay(&f, CONF_POLICY_STOP, &s, &st), 0);
		bool has_a = false, has_b = false;
		for (size_t i = 0; i < s.n; i++) {
			has_a |= s.seq[i] == 0;
			has_b |= s.seq[i] == v;
		}
		ck_assert_msg(has_a && has_b,
			      "round %d: acknowledged A %s, B %s after the "
			      "power cut",
			      round, has_a ? "kept" : "lost",
			      has_b ? "kept" : "lost");
		free(s.seq);
		fx_free(&f);
	}
}
END_TEST

/* Writers that fill small segments at once, with slow segment creation:
 * several find the active segment full together while the preparer is
 * still creating the next one. One rolls over at a time, so segments
 * become active in id order, every wait returns and every acknowledged
 * write survives a power cut. (Two rollovers at once made a lower id
 * active after a higher one: acknowledgements before their sync, and a
 * writer waiting forever on a segment that was no longer active.) */
START_TEST(concurrent_rollovers_keep_segment_order)
{
	enum { NW = 8, PER = 300 };
	struct fx f;
	fx_init(&f, "cl-rollovers");
	struct commitlog *cl = open_log_sized(&f, CONF_COMMITLOG_SYNC_BATCH,
					      CONF_POLICY_STOP, 4096);
	struct commitlog_replay_stats st;
	ck_assert_int_eq(commitlog_replay(cl, NULL, NULL, &st), 0);
	ck_assert_int_eq(commitlog_start(cl, 1), 0);
	fault_env_set_sync_delay_us(f.fe, 300);
	run_sync_writers(cl, NW, PER);
	fault_env_set_sync_delay_us(f.fe, 0);
	fault_env_freeze(f.fe);
	commitlog_delete(cl);
	fault_env_crash(f.fe, seed + 600);
	struct seen s;
	ck_assert_int_eq(replay(&f, CONF_POLICY_STOP, &s, &st), 0);
	ck_assert_uint_eq(s.n, NW * PER);
	qsort(s.seq, s.n, sizeof(int), cmp_int);
	for (int i = 0; i < NW; i++)
		for (int j = 0; j < PER; j++)
			ck_assert_int_eq(s.seq[i * PER + j], i * 100000 + j);
	free(s.seq);
	fx_free(&f);
}
END_TEST

/* A failing fdatasync while many threads wait for syncs: every one of
 * them returns (none waits for a leader that never comes), the log is
 * stopped, and what was acknowledged before survives. */
START_TEST(failed_fdatasync_releases_every_sync_waiter)
{
	enum { NW = 10 };
	struct fx f;
	fx_init(&f, "cl-writers-eio");
	struct commitlog *cl = start_empty(&f, CONF_COMMITLOG_SYNC_GROUP, 1);
	struct commitlog_replay_stats st;
	atomic_int total = 0;
	pthread_t th[NW];
	struct sync_writer w[NW];
	for (int i = 0; i < NW; i++) {
		w[i] = (struct sync_writer){.cl = cl,
					    .id = i,
					    .until_failure = true,
					    .total = &total};
		ck_assert_int_eq(
			pthread_create(&th[i], NULL, sync_writer_main, &w[i]),
			0);
	}
	while (atomic_load(&total) < 200)
		usleep(100);
	fault_env_fail_writes(f.fe, "CommitLog", EIO);
	for (int i = 0; i < NW; i++)
		pthread_join(th[i], NULL);
	ck_assert(commitlog_failed(cl));
	fault_env_fail_writes(f.fe, NULL, 0);
	fault_env_freeze(f.fe);
	commitlog_delete(cl);
	fault_env_crash(f.fe, seed + 500);
	struct seen s;
	ck_assert_int_eq(replay(&f, CONF_POLICY_STOP, &s, &st), 0);
	qsort(s.seq, s.n, sizeof(int), cmp_int);
	for (int i = 0; i < NW; i++)
		for (int j = 0; j < w[i].acked; j++)
			ck_assert_ptr_nonnull(bsearch(&(int){i * 100000 + j},
						      s.seq, s.n, sizeof(int),
						      cmp_int));
	free(s.seq);
	fx_free(&f);
}
END_TEST

/* ---- group commit: the leader waits for the rest of its group ---------- */

START_TEST(group_gather_deadline_is_bounded_by_a_sync_and_the_window)
{
	struct commitlog_gather g = {.pending = 10,
				     .seen = 50,
				     .oldest_us = 10000,
				     .last_end_us = 10200,
				     .sync_us = 500,
				     .window_us = 2000};
	/* waits one sync time after the last sync ended */
	ck_assert_uint_eq(commitlog_gather_until(&g), 10700);
	/* ... or after the oldest pending write, when it came later */
	g.oldest_us = 10400;
	ck_assert_uint_eq(commitlog_gather_until(&g), 10900);
	/* never past the window after the oldest pending write */
	g.sync_us = 50000;
	ck_assert_uint_eq(commitlog_gather_until(&g), 12400);
	/* the group is in: sync now */
	g.pending = 50;
	ck_assert_uint_eq(commitlog_gather_until(&g), 0);
	/* a lone writer never waits */
	g.pending = 1;
	g.seen = 1;
	ck_assert_uint_eq(commitlog_gather_until(&g), 0);
	g.seen = 0; /* no sync yet */
	ck_assert_uint_eq(commitlog_gather_until(&g), 0);
	/* a zero window turns the wait off */
	g.seen = 50;
	g.window_us = 0;
	ck_assert_uint_eq(commitlog_gather_until(&g), 0);
}
END_TEST

static struct clpos append_one(struct commitlog *cl, int v)
{
	char body[32];
	int len = snprintf(body, sizeof(body), "rec-%d", v);
	struct clpos pos;
	ck_assert_int_eq(commitlog_append(cl, (uint8_t *)body, (size_t)len,
					  &pos, NULL, NULL),
			 0);
	return pos;
}

static void append_deferred(struct commitlog *cl, int v)
{
	char body[32];
	int len = snprintf(body, sizeof(body), "rec-%d", v);
	struct clpos pos;
	ck_assert_int_eq(commitlog_append_deferred(cl, (uint8_t *)body,
						   (size_t)len, &pos),
			 0);
}

/* Kills the process (the page cache survives) and replays what is on
 * file. */
static void kill_and_replay(struct fx *f, struct commitlog *cl, struct seen *s)
{
	struct commitlog_replay_stats st;
	fault_env_freeze(f->fe);
	commitlog_delete(cl); /* writes nothing more: the process is gone */
	fault_env_thaw(f->fe);
	ck_assert_int_eq(replay(f, CONF_POLICY_STOP, s, &st), 0);
}

/* periodic: a deferred record reaches the file with
 * commitlog_write_pending, or ahead of any other write to the log (a
 * record, a sync marker, a rollover), never after it; one never written
 * is lost to a kill, as an unacknowledged write may be. */
START_TEST(periodic_deferred_records_are_written_in_order)
{
	struct fx f;
	fx_init(&f, "cl-deferred");
	struct commitlog *cl = start_empty(&f, CONF_COMMITLOG_SYNC_PERIODIC, 1);
	for (int i = 0; i < 3; i++)
		append_deferred(cl, i);
	ck_assert_int_eq(commitlog_write_pending(cl), 0);
	append_deferred(cl, 3);
	append_one(cl, 4); /* writes 3 first */
	append_deferred(cl, 5);
	ck_assert_int_eq(commitlog_sync_now(cl), 0); /* writes 5 first */
	append_deferred(cl, 6);                      /* never written */
	struct seen s;
	kill_and_replay(&f, cl, &s);
	ck_assert_uint_eq(s.n, 6);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(s.seq[i], i);
	free(s.seq);
	fx_free(&f);

	/* Across rollovers (64 KiB segments, ~13 KiB of records a turn,
	 * sometimes a rollover inside one) every written record replays, in
	 * order. */
	fx_init(&f, "cl-deferred-roll");
	cl = start_empty(&f, CONF_COMMITLOG_SYNC_PERIODIC, 1);
	int n = 0;
	for (int turn = 0; turn < 12; turn++) {
		for (int k = 0; k < 600; k++)
			append_deferred(cl, n++);
		ck_assert_int_eq(commitlog_write_pending(cl), 0);
	}
	ck_assert_uint_gt(commitlog_segment_count(cl), 2);
	kill_and_replay(&f, cl, &s);
	ck_assert_uint_eq(s.n, (size_t)n);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(s.seq[i], i);
	free(s.seq);
	fx_free(&f);
}
END_TEST

START_TEST(deferred_appends_are_for_periodic_logs)
{
	struct fx f;
	fx_init(&f, "cl-deferred-batch");
	struct commitlog *cl = start_empty(&f, CONF_COMMITLOG_SYNC_BATCH, 1);
	struct clpos pos;
	ck_assert_int_eq(commitlog_append_deferred(cl, (const uint8_t *)"rec-1",
						   5, &pos),
			 -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	commitlog_delete(cl);
	fx_free(&f);
}
END_TEST

/* A new empty log, started, with the group window `window_ms`. */
static struct commitlog *start_with_window(struct fx *f, int mode,
					   uint64_t window_ms)
{
	struct commitlog_options o = {
		.env = f->env,
		.dir = f->dir,
		.sync_mode = mode,
		.period_ms = 10000,
		.window_ms = window_ms,
		.segment_size = 64 * 1024,
		.failure_policy = CONF_POLICY_STOP,
	};
	struct commitlog *cl = commitlog_new(&o);
	ck_assert_ptr_nonnull(cl);
	struct commitlog_replay_stats rs;
	ck_assert_int_eq(commitlog_replay(cl, NULL, NULL, &rs), 0);
	ck_assert_int_eq(commitlog_start(cl, 1), 0);
	return cl;
}

/* One thread plays a group of two, then a lone writer, on a disk whose
 * fdatasync takes `delay_us`: after a sync that covered two writes, the
 * next leader waits for a second writer (bounded), and once a sync has
 * met only one writer nobody waits. Returns the time the one wait took. */
static uint64_t group_of_two_then_alone(int mode, uint64_t window_ms,
					uint64_t delay_us)
{
	struct fx f;
	fx_init(&f, "cl-gather");
	struct commitlog *cl = start_with_window(&f, mode, window_ms);
	fault_env_set_sync_delay_us(f.fe, delay_us);
	struct commitlog_sync_stats st;

	append_one(cl, 0);
	ck_assert_int_eq(commitlog_wait_durable(cl, append_one(cl, 1)), 0);
	commitlog_sync_stats(cl, &st);
	ck_assert_uint_eq(st.gathers, 0); /* nothing seen yet: no wait */
	ck_assert_uint_eq(st.syncs, 1);

	/* the last sync met two writers: wait for the second */
	ck_assert_int_eq(commitlog_wait_durable(cl, append_one(cl, 2)), 0);
	commitlog_sync_stats(cl, &st);
	uint64_t waited = st.gather_us;
	ck_assert_uint_eq(st.syncs, 2);
	if (mode == CONF_COMMITLOG_SYNC_BATCH) {
		ck_assert_uint_eq(st.gathers, 0);
	} else {
		ck_assert_uint_eq(st.gathers, 1);
	}

	/* that sync met one writer: a lone writer does not wait */
	for (int i = 3; i < 13; i++)
		ck_assert_int_eq(commitlog_wait_durable(cl, append_one(cl, i)),
				 0);
	commitlog_sync_stats(cl, &st);
	ck_assert_uint_eq(st.gather_us, waited);
	ck_assert_uint_eq(st.syncs, 12);
	ck_assert_uint_eq(st.writes, 13);
	fault_env_set_sync_delay_us(f.fe, 0);
	commitlog_delete(cl);
	fx_free(&f);
	return waited;
}

/* The bounds below tell which limit ended the wait, not how fast anything
 * is: the two candidates are 30 and 50 times apart, so a loaded machine
 * oversleeping a timed wait cannot blur them. */
START_TEST(group_leader_waits_at_most_the_window)
{
	/* a sync takes 300 ms, the window is 10 ms */
	uint64_t us =
		group_of_two_then_alone(CONF_COMMITLOG_SYNC_GROUP, 10, 300000);
	ck_assert_uint_ge(us, 9000);
	ck_assert_uint_lt(us, 150000);
}
END_TEST

START_TEST(group_leader_waits_at_most_one_sync)
{
	/* a sync takes 20 ms, the window is a second */
	uint64_t us =
		group_of_two_then_alone(CONF_COMMITLOG_SYNC_GROUP, 1000, 20000);
	ck_assert_uint_ge(us, 15000);
	ck_assert_uint_lt(us, 500000);
}
END_TEST

START_TEST(batch_leader_never_waits)
{
	ck_assert_uint_eq(
		group_of_two_then_alone(CONF_COMMITLOG_SYNC_BATCH, 1000, 20000),
		0);
}
END_TEST

/* Eight synchronous writers on a disk whose fdatasync takes 20 ms: one
 * sync covers (nearly) all of them, not only those that came during the
 * previous sync (about half). A woken writer has a whole sync time to
 * come back, hundreds of times what it needs. */
START_TEST(group_one_sync_covers_every_writer)
{
	enum { NW = 8, PER = 40 };
	struct fx f;
	fx_init(&f, "cl-gather-n");
	/* the window (the default) leaves the bound to the sync time */
	struct commitlog *cl =
		start_with_window(&f, CONF_COMMITLOG_SYNC_GROUP, 1000);
	fault_env_set_sync_delay_us(f.fe, 20000);
	run_sync_writers(cl, NW, PER);
	struct commitlog_sync_stats st;
	commitlog_sync_stats(cl, &st);
	ck_assert_uint_eq(st.writes, NW * PER);
	double per_sync = (double)st.writes / (double)st.syncs;
	if (per_sync < 6.5)
		ck_abort_msg("%.1f writes per sync (%" PRIu64 " syncs, %" PRIu64
			     " gathers); want at least 6.5 of %d",
			     per_sync, st.syncs, st.gathers, NW);
	fault_env_set_sync_delay_us(f.fe, 0);
	commitlog_delete(cl);
	fx_free(&f);
}
END_TEST

int main(void)
{
	seed = test_seed(7);
	Suite *s = suite_create("storage_commitlog");
	TCase *tc = tcase_create("commitlog");
	/* a hang guard, as the suite's: fsync-bound cases take minutes on a
	 * loaded shared disk */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, periodic_deferred_records_are_written_in_order);
	tcase_add_test(tc, deferred_appends_are_for_periodic_logs);
	tcase_add_test(tc, round_trip_across_segments);
	tcase_add_test(tc, acknowledged_writes_survive_a_crash_batch);
	tcase_add_test(tc, acknowledged_writes_survive_a_crash_group);
	tcase_add_test(tc, synced_writes_survive_a_crash_periodic);
	tcase_add_test(tc, corruption_below_a_sync_marker_stops_start);
	tcase_add_test(tc, failed_fdatasync_stops_the_log);
	tcase_add_test(tc,
		       zero_filled_segment_replay_stops_at_the_end_of_the_data);
	tcase_add_test(tc, concurrent_sync_writers_group);
	tcase_add_test(tc, concurrent_sync_writers_batch);
	tcase_add_test(tc, ack_waits_for_the_rolled_over_segment);
	tcase_add_test(tc, concurrent_rollovers_keep_segment_order);
	tcase_add_test(tc, failed_fdatasync_releases_every_sync_waiter);
	tcase_add_test(
		tc, group_gather_deadline_is_bounded_by_a_sync_and_the_window);
	tcase_add_test(tc, group_leader_waits_at_most_the_window);
	tcase_add_test(tc, group_leader_waits_at_most_one_sync);
	tcase_add_test(tc, batch_leader_never_waits);
	tcase_add_test(tc, group_one_sync_covers_every_writer);
	suite_add_tcase(s, tc);
	return test_run(s);
}
