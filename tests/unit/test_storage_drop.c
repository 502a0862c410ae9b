/* storage: dropping tables (storage_table_drop). A dropped table is
 * unknown to reads and writes at once; what a read, scan, flush or
 * compaction already under way holds stays valid until it ends; its
 * memory goes back (a churn of tables returns what it took), its
 * memtables stop counting against memtable_heap_space, and its SSTables
 * stay on disk. */
#include "common/err.h"
#include "conf/conf.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fixture.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tables: pk text, c int, v blob. */
enum { COL_PK, COL_C, COL_V };

static struct storage_table_meta *make_table(const char *name, uint8_t tag)
{
	uint8_t id[16] = {0xd0, tag};
	struct storage_table_meta *t = storage_table_meta_new("ks", name, id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type tb = {.kind = STORAGE_TYPE_BLOB};
	if (!t) /* (the churn's helpers take no ck_assert: see churn()) */
		ck_abort_msg("meta: %s", err_msg());
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &tb,
				      false);
	return t;
}

/* The engine with both tables, or without ks.a (as after its drop). */
static void open_db(struct storage_fx *f, bool with_a)
{
	struct storage_table_meta *a = f->t;
	if (!with_a)
		f->t = NULL;
	storage_fx_open(f);
	f->t = a;
}

/* Tables ks.a (f->t) and ks.b (f->u). */
static void fx_init(struct storage_fx *f, const char *tag, uint64_t heap)
{
	storage_fx_prepare(f, tag);
	f->o.commitlog_sync = CONF_COMMITLOG_SYNC_PERIODIC;
	f->o.commitlog_segment_size = 256 * 1024;
	if (heap) {
		f->o.memtable_heap_space = heap;
		f->o.memtable_cleanup_threshold = 0.25;
	}
	f->t = make_table("a", 1);
	f->u = make_table("b", 2);
	storage_fx_open(f);
}

static struct storage_mutation *row(struct storage_fx *f,
				    const struct storage_table_meta *t,
				    const char *key, int c, const char *v)
{
	struct storage_mutation *m =
		storage_mutation_new(t, (const uint8_t *)key, strlen(key));
	uint8_t cb[4];
	be32_store(cb, (uint32_t)c);
	struct slice ck = slice_make(cb, 4);
	if (!m || storage_mutation_set_row(m, &ck, 1) != 0 ||
	    storage_mutation_put(m, COL_V, NULL, 0, (const uint8_t *)v,
				 strlen(v), f->ts++, 0, 0) != 0)
		ck_abort_msg("mutation: %s", err_msg());
	return m;
}

static int put(struct storage_fx *f, const struct storage_table_meta *t,
	       const char *key, int c, const char *v)
{
	struct storage_mutation *m = row(f, t, key, c, v);
	int rc = storage_apply_sync(f->db, m);
	storage_mutation_delete(m);
	return rc;
}

/* -1 with err set, or the number of rows of partition `key`. */
static int rows(struct storage_fx *f, const struct storage_table_meta *t,
		const char *key)
{
	struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
				       .key_len = strlen(key)};
	struct storage_result *r;
	if (storage_read(f->db, t->id, &cmd, &r) != 0)
		return -1;
	int n = (int)r->row_count;
	storage_result_delete(r);
	return n;
}

/* The SSTable data files of table `t` in its directory. */
static int data_files(struct storage_fx *f, const struct storage_table_meta *t)
{
	char dir[1024];
	int k = snprintf(dir, sizeof(dir), "%s/%s/%s-", f->data, t->keyspace,
			 t->name);
	for (int i = 0; i < 16; i++)
		k += snprintf(dir + k, sizeof(dir) - (size_t)k, "%02x",
			      t->id[i]);
	int n = 0;
	for (int gen = 1; gen < 64; gen++) {
		char p[1200];
		struct stat st;
		snprintf(p, sizeof(p), "%s/ca-%d-Data.db", dir, gen);
		n += stat(p, &st) == 0;
	}
	return n;
}

START_TEST(a_dropped_table_is_unknown_and_its_files_stay)
{
	struct storage_fx f;
	fx_init(&f, "drop-basic", 0);
	char key[32];
	for (int i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ck_assert_int_eq(put(&f, f.t, key, 1, "flushed"), 0);
		ck_assert_int_eq(put(&f, f.u, key, 1, "b"), 0);
	}
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	ck_assert_int_eq(put(&f, f.t, "k0", 2, "in memory"), 0);
	ck_assert_int_eq(rows(&f, f.t, "k0"), 2);
	ck_assert_int_eq(data_files(&f, f.t), 1);

	ck_assert_int_eq(storage_table_drop(f.db, f.t->id), 0);
	ck_assert_int_eq(rows(&f, f.t, "k0"), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	ck_assert_int_eq(put(&f, f.t, "k0", 3, "late"), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0); /* nothing */
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), -1);
	ck_assert_int_eq(storage_truncate(f.db, f.t->id), -1);
	ck_assert_int_eq(storage_snapshot(f.db, f.t->id, "s"), -1);
	ck_assert_ptr_null(storage_table_meta_acquire(f.db, f.t->id));
	ck_assert_int_eq(storage_table_drop(f.db, f.t->id), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	struct storage_stats st;
	storage_stats(f.db, f.t->id, &st);
	ck_assert_uint_eq(st.memtable_bytes, 0);
	ck_assert_uint_eq(st.sstable_count, 0);
	/* the other table is untouched; the dropped one's SSTable stays */
	ck_assert_int_eq(rows(&f, f.u, "k7"), 1);
	ck_assert_int_eq(put(&f, f.u, "k7", 2, "b"), 0);
	ck_assert_int_eq(data_files(&f, f.t), 1);

	/* a restart without it: its records in the commitlog are skipped */
	storage_delete(f.db);
	open_db(&f, false);
	ck_assert_int_eq(rows(&f, f.u, "k7"), 2);
	ck_assert_int_eq(rows(&f, f.t, "k0"), -1);
	ck_assert_int_eq(data_files(&f, f.t), 1);
	storage_fx_free(&f);
}
END_TEST

/* A scan opened before the DROP reads what it held to its end (the
 * memtables and SSTables it referenced stay valid: ASan checks), and a
 * point read racing the drop either sees the table or ERR_NOT_FOUND. */
START_TEST(a_scan_open_across_a_drop_reads_to_its_end)
{
	struct storage_fx f;
	fx_init(&f, "drop-scan", 0);
	char key[32];
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ck_assert_int_eq(put(&f, f.t, key, 1, "v"), 0);
		if (i == 149)
			ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	}
	struct storage_read_cmd cmd = {0};
	struct storage_scan *s =
		storage_scan_open(f.db, f.t->id, INT64_MIN, INT64_MIN, &cmd);
	ck_assert_ptr_nonnull(s);
	struct storage_result *r;
	int n = 0;
	for (; n < 10 && storage_scan_next(s, &r) == 1; n++)
		storage_result_delete(r);
	ck_assert_int_eq(storage_table_drop(f.db, f.t->id), 0);
	while (storage_scan_next(s, &r) == 1) {
		ck_assert_uint_eq(r->row_count, 1);
		storage_result_delete(r);
		n++;
	}
	storage_scan_close(s); /* the last reference: the table goes */
	ck_assert_int_eq(n, 300);
	ck_assert_ptr_null(
		storage_scan_open(f.db, f.t->id, INT64_MIN, INT64_MIN, &cmd));
	storage_fx_free(&f);
}
END_TEST

struct bg {
	struct storage *db;
	const uint8_t *id;
	int (*op)(struct storage *db, const uint8_t *id);
	int rc;
};

static int do_flush(struct storage *db, const uint8_t *id)
{
	return storage_flush(db, id);
}

static int do_compact(struct storage *db, const uint8_t *id)
{
	return storage_compact(db, id, true);
}

static void *bg_main(void *arg)
{
	struct bg *b = arg;
	b->rc = b->op(b->db, b->id);
	return NULL;
}

/* A flush of one table and a major compaction of another are under way
 * (each SSTable sync takes 300 ms here) when the DROPs come: each
 * finishes on the table it holds, nothing fails or stops writes, and the
 * other table goes on. */
START_TEST(a_drop_during_a_flush_or_compaction_stops_nothing)
{
	struct storage_fx f;
	fx_init(&f, "drop-busy", 0);
	struct storage_table_meta *c = make_table("c", 3);
	ck_assert_int_eq(storage_table_add(f.db, c, true), 0);
	char key[32];
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 200; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			ck_assert_int_eq(put(&f, f.t, key, round, "v"), 0);
			ck_assert_int_eq(put(&f, c, key, round, "v"), 0);
		}
		if (round == 0)
			ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	}
	ck_assert_int_eq(storage_flush(f.db, c->id), 0); /* 2 to compact */
	fault_env_set_sync_delay_us(f.fe, 300000);
	struct bg b[2] = {{f.db, f.t->id, do_flush, -2},
			  {f.db, c->id, do_compact, -2}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, bg_main, &b[i]),
				 0);
	usleep(100000); /* both are writing (or about to) */
	ck_assert_int_eq(storage_table_drop(f.db, f.t->id), 0);
	ck_assert_int_eq(storage_table_drop(f.db, c->id), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	/* 0, or ERR_NOT_FOUND for one that had not begun: never a failure
	 * of the work itself */
	for (int i = 0; i < 2; i++)
		ck_assert_msg(b[i].rc == 0 || b[i].rc == -1, "rc %d", b[i].rc);
	fault_env_set_sync_delay_us(f.fe, 0);
	struct storage_stats st;
	storage_stats(f.db, NULL, &st);
	ck_assert(!st.writes_stopped);
	ck_assert_int_eq(put(&f, f.u, "k1", 1, "b"), 0);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	ck_assert_int_eq(rows(&f, f.u, "k1"), 1);
	storage_fx_free(&f);
	storage_table_meta_delete(c);
}
END_TEST

struct acks {
	pthread_mutex_t mu;
	int acks, errors;
};

static void on_ack(void *arg, int status, enum err_code code)
{
	struct acks *a = arg;
	(void)code;
	pthread_mutex_lock(&a->mu);
	if (status == 0)
		a->acks++;
	else
		a->errors++;
	pthread_mutex_unlock(&a->mu);
}

static void post_now(void *post_arg, storage_done_fn fn, void *arg, int status,
		     enum err_code code)
{
	(void)post_arg;
	fn(arg, status, code);
}

static int acked(struct acks *a)
{
	pthread_mutex_lock(&a->mu);
	int n = a->acks;
	pthread_mutex_unlock(&a->mu);
	return n;
}

/* Memtables of table a fill memtable_heap_space while the disk crawls, so
 * a write to b waits for room; dropping a makes room without a flush, and
 * the waiting write goes. */
START_TEST(dropping_a_table_makes_room_for_waiting_writes)
{
	struct storage_fx f;
	fx_init(&f, "drop-room", 1 << 20);
	storage_delete(f.db);
	struct acks a = {.acks = 0};
	pthread_mutex_init(&a.mu, NULL);
	f.o.post = post_now;
	f.o.write_wait_ms = 60000;
	open_db(&f, true);
	fault_env_set_sync_delay_us(f.fe, 400000);
	char key[32], v[1024];
	memset(v, 'x', sizeof(v) - 1);
	v[sizeof(v) - 1] = 0;
	int i = 0;
	for (; i < 100000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		if (put(&f, f.t, key, 1, v) != 0)
			break;
	}
	ck_assert_int_eq(err_code(), ERR_OVERLOADED);
	struct storage_mutation *m = row(&f, f.u, "waits", 1, "b");
	ck_assert_int_eq(storage_apply(f.db, m, on_ack, &a), 0);
	storage_mutation_delete(m);
	struct storage_stats st;
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_eq(st.writes_waiting, 1);
	ck_assert_int_eq(storage_table_drop(f.db, f.t->id), 0);
	for (int spin = 0; spin < 30000 && acked(&a) < 1; spin++)
		usleep(1000);
	ck_assert_int_eq(acked(&a), 1);
	ck_assert_int_eq(a.errors, 0);
	fault_env_set_sync_delay_us(f.fe, 0);
	ck_assert_int_eq(rows(&f, f.u, "waits"), 1);
	storage_fx_free(&f);
}
END_TEST

static void churn(struct storage_fx *f, int from, int to)
{
	char key[32];
	for (int i = from; i < to; i++) {
		struct storage_table_meta *t = make_table("churn", 9);
		t->id[2] = (uint8_t)(i >> 8);
		t->id[3] = (uint8_t)i;
		/* no ck_assert here: each one records its place, in memory
		 * the heap count would see */
		snprintf(key, sizeof(key), "k%d", i);
		if (storage_table_add(f->db, t, true) != 0 ||
		    put(f, t, key, 1, "v") != 0 ||
		    storage_table_drop(f->db, t->id) != 0)
			ck_abort_msg("table %d: %s", i, err_msg());
		storage_table_meta_delete(t);
	}
}

/* CREATE and DROP TABLE in a loop kept every table's memtable (a 256 KiB
 * arena block), meta and directory name in the engine until it stopped.
 * After a warm-up (allocator and arena caches fill: up to 1 MiB of arena
 * blocks per thread), 2000 more tables, each written once, leave the heap
 * as it was: the tolerance (64 KiB, 32 bytes a table) is far below what
 * one kept memtable block would cost. */
START_TEST(a_table_churn_returns_its_memory)
{
	struct storage_fx f;
	fx_init(&f, "drop-churn", 0);
	/* the real env: the fault env keeps every unsynced write in memory */
	storage_delete(f.db);
	f.o.env = f.real;
	open_db(&f, true);
	churn(&f, 0, 300);
	size_t before = test_heap_in_use();
	churn(&f, 300, 2300);
	size_t after = test_heap_in_use();
	ck_assert_msg(after < before + 64 * 1024,
		      "heap grew from %zu to %zu bytes over 2000 tables",
		      before, after);
	/* the dropped tables' directories went with them (they held no
	 * SSTable): data/ks holds a's and b's only (a mkdir in a directory
	 * of thousands grew slower with each CREATE) */
	char ks[700];
	snprintf(ks, sizeof(ks), "%s/ks", f.data);
	DIR *d = opendir(ks);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	ck_assert_int_eq(n, 2);
	storage_fx_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_drop");
	TCase *tc = tcase_create("drop");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_dropped_table_is_unknown_and_its_files_stay);
	tcase_add_test(tc, a_scan_open_across_a_drop_reads_to_its_end);
	tcase_add_test(tc, a_drop_during_a_flush_or_compaction_stops_nothing);
	tcase_add_test(tc, dropping_a_table_makes_room_for_waiting_writes);
	tcase_add_test(tc, a_table_churn_returns_its_memory);
	suite_add_tcase(s, tc);
	return test_run(s);
}
