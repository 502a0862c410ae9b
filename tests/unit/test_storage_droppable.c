/* The compactor wakes when an SSTable becomes fully droppable (all its
 * data expired past gc_grace), on a timer of the engine's env, not at the
 * next write or flush. The engine runs on a simulated env: its clock
 * moves only when the test runs the simulation, so the SSTable expires
 * exactly when the test says; its timer is the simulation's, and the
 * engine's post hook queues re-arms for the test's thread (the loop). */
#include "common/err.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"
#include "tests/sim/sim.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define START_US (1700000000LL * 1000000)
#define TTL      60

static uint64_t seed;

/* The post hook's queue, run by the test's thread. */
struct post {
	storage_done_fn fn;
	void *arg;
	int status;
	enum err_code code;
};
static pthread_mutex_t posts_mu = PTHREAD_MUTEX_INITIALIZER;
static struct post posts[64];
static size_t nposts;

static void test_post(void *post_arg, storage_done_fn fn, void *arg, int status,
		      enum err_code code)
{
	(void)post_arg;
	pthread_mutex_lock(&posts_mu);
	ck_assert_uint_lt(nposts, 64);
	posts[nposts++] = (struct post){fn, arg, status, code};
	pthread_mutex_unlock(&posts_mu);
}

static size_t run_posts(void)
{
	struct post run[64];
	pthread_mutex_lock(&posts_mu);
	size_t n = nposts;
	memcpy(run, posts, n * sizeof(run[0]));
	nposts = 0;
	pthread_mutex_unlock(&posts_mu);
	for (size_t i = 0; i < n; i++)
		run[i].fn(run[i].arg, run[i].status, run[i].code);
	return n;
}

static uint64_t sstables(struct storage *db, const uint8_t id[16])
{
	struct storage_stats st;
	ck_assert_int_eq(storage_stats(db, id, &st), 0);
	return st.sstable_count;
}

/* Writes n rows whose cells expire TTL seconds from the env's now. */
static void write_expiring(struct storage *db, struct env *env,
			   const struct storage_table_meta *t, int from, int n)
{
	int64_t now_us = env_wall_us(env);
	for (int i = from; i < from + n; i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", i);
		struct storage_mutation *m = storage_mutation_new(
			t, (const uint8_t *)key, strlen(key));
		ck_assert_ptr_nonnull(m);
		ck_assert_int_eq(storage_mutation_put(
					 m, 1, NULL, 0, (const uint8_t *)"v", 1,
					 now_us, TTL, now_us / 1000000),
				 0);
		ck_assert_int_eq(storage_apply_sync(db, m), 0);
		storage_mutation_delete(m);
	}
	ck_assert_int_eq(storage_flush(db, t->id), 0);
}

/* Until the compactor's round after a flush has posted its re-arm (a hang
 * guard, not a timing threshold), then runs it as the loop would. */
static void wait_rearm(void)
{
	for (int i = 0; i < 4000; i++) {
		if (run_posts())
			return;
		usleep(5000);
	}
	ck_abort_msg("no re-arm of the droppable watch was posted");
}

/* Until the table has `want` SSTables (the compactor's thread drops them;
 * a hang guard). */
static void wait_sstables(struct storage *db, const uint8_t id[16],
			  uint64_t want)
{
	for (int i = 0; i < 4000; i++) {
		if (sstables(db, id) == want)
			return;
		usleep(5000);
	}
	ck_abort_msg("the table has %" PRIu64 " SSTables, not %" PRIu64,
		     sstables(db, id), want);
}

/* One node's engine on the simulated env, with one table (pk text, v
 * blob) of `gc_grace` seconds, auto compaction on. */
struct dfx {
	struct sim *s;
	struct env *env;
	char dir[512];
	uint8_t id[16];
	struct storage_table_meta *t;
	struct storage *db;
};

static void dfx_open(struct dfx *f, const char *tag, const char *table,
		     uint8_t id1, int gc_grace)
{
	f->s = sim_new(seed, START_US);
	struct inet_addr addr = sim_node_addr(0);
	f->env = sim_env_new(f->s, &addr);
	char data[600], log[600];
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir(tag));
	snprintf(data, sizeof(data), "%s/data", f->dir);
	snprintf(log, sizeof(log), "%s/commitlog", f->dir);
	struct storage_options o;
	storage_options_default(&o);
	o.env = f->env;
	o.data_dir = data;
	o.commitlog_dir = log;
	o.commitlog_segment_size = 256 * 1024;
	o.auto_compaction = true;
	o.post = test_post;
	memset(f->id, 0, sizeof(f->id));
	f->id[0] = 0xd2;
	f->id[1] = id1;
	f->t = storage_table_meta_new("ks", table, f->id);
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type tb = {.kind = STORAGE_TYPE_BLOB};
	storage_table_meta_add_column(f->t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(f->t, "v", STORAGE_COLUMN_REGULAR, &tb,
				      false);
	f->t->options.gc_grace_seconds = gc_grace;
	f->db = storage_new(&o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	ck_assert_int_eq(storage_start(f->db), 0);
}

static void dfx_close(struct dfx *f)
{
	storage_delete(f->db);
	run_posts(); /* a re-arm queued after the engine went does nothing */
	storage_table_meta_delete(f->t);
	sim_delete(f->s);
	test_tmpdir_remove(f->dir);
}

START_TEST(an_expired_sstable_is_dropped_when_it_expires)
{
	struct dfx f;
	dfx_open(&f, "droppable", "t", 0x09, 0);
	ck_assert_int_eq(storage_droppable_watch_start(f.db), 0);

	/* two SSTables, expiring 30 s apart: each goes when it expires */
	write_expiring(f.db, f.env, f.t, 0, 20);
	wait_rearm(); /* armed for the first's expiry */
	sim_run_for(f.s, 30 * 1000000ull);
	write_expiring(f.db, f.env, f.t, 20, 20);
	ck_assert_uint_eq(sstables(f.db, f.id), 2);
	sim_run_for(f.s, (TTL - 30 + 2) * 1000000ull); /* past the first's */
	wait_sstables(f.db, f.id, 1);
	/* the round that dropped it armed the second's expiry */
	wait_rearm();
	sim_run_for(f.s, 30 * 1000000ull);
	wait_sstables(f.db, f.id, 0);
	dfx_close(&f);
}
END_TEST

/* A flush of an SSTable expiring sooner than the armed deadline moves
 * the timer earlier. */
START_TEST(a_sooner_expiry_moves_the_wake_up_earlier)
{
	struct dfx f;
	dfx_open(&f, "droppable2", "u", 0x0a, 3600); /* the first: an hour on */
	write_expiring(f.db, f.env, f.t, 0, 20);
	/* started after the flush: armed for it at once */
	ck_assert_int_eq(storage_droppable_watch_start(f.db), 0);
	struct storage_table_meta *t2 = storage_table_meta_clone(f.t);
	t2->options.gc_grace_seconds = 0;
	ck_assert_int_eq(storage_table_update(f.db, t2), 0);
	storage_table_meta_delete(f.t);
	f.t = t2;
	/* both SSTables now expire TTL s after their writes: the first
	 * round's re-arm brings the wake-up down from an hour */
	write_expiring(f.db, f.env, f.t, 20, 20);
	wait_rearm();
	sim_run_for(f.s, (TTL + 2) * 1000000ull);
	wait_sstables(f.db, f.id, 0);
	dfx_close(&f);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage_droppable");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, an_expired_sstable_is_dropped_when_it_expires);
	tcase_add_test(tc, a_sooner_expiry_moves_the_wake_up_earlier);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	seed = test_seed(0xd209);
	return test_run(suite());
}
