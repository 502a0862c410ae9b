/* storage_truncate: the table reads empty at once (memtables and SSTables),
 * later writes are kept, a restart neither replays the truncated past nor
 * loses the later writes, SSTable files go once no reader holds them, a
 * concurrent compaction cannot bring data back, other tables are
 * untouched. */
#include "common/err.h"
#include "conf/conf.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tables ks.t and ks.u: pk text, v blob (tests/unit/storage_fixture.h). */
static void fx_init(struct storage_fx *f, const char *tag)
{
	storage_fx_prepare(f, tag);
	f->o.commitlog_segment_size = 64 * 1024; /* several segments */
	f->t = storage_fx_kv_table("t", 0xab, 1);
	f->u = storage_fx_kv_table("u", 0xab, 2);
	storage_fx_open(f);
}

static void put(struct storage_fx *f, const struct storage_table_meta *t,
		const char *key, const char *v)
{
	struct storage_mutation *m =
		storage_mutation_new(t, (const uint8_t *)key, strlen(key));
	int64_t now = env_wall_us(f->env) / 1000000;
	ck_assert_int_eq(storage_mutation_put_marker(m, f->ts, 0, now), 0);
	ck_assert_int_eq(storage_mutation_put(m, 1, NULL, 0, (const uint8_t *)v,
					      strlen(v), f->ts, 0, now),
			 0);
	f->ts++;
	if (storage_apply_sync(f->db, m))
		ck_abort_msg("apply: %s", err_msg());
	storage_mutation_delete(m);
}

static void put_range(struct storage_fx *f, const struct storage_table_meta *t,
		      const char *prefix, int from, int to)
{
	char key[32];
	for (int i = from; i < to; i++) {
		snprintf(key, sizeof(key), "%s%d", prefix, i);
		put(f, t, key, "some value, long enough to fill segments");
	}
}

static bool has(struct storage_fx *f, const struct storage_table_meta *t,
		const char *key)
{
	struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
				       .key_len = strlen(key)};
	struct storage_result *r;
	if (storage_read(f->db, t->id, &cmd, &r))
		ck_abort_msg("read: %s", err_msg());
	bool found = r->row_count > 0;
	storage_result_delete(r);
	return found;
}

static size_t count(struct storage_fx *f, const struct storage_table_meta *t)
{
	struct storage_read_cmd cmd = {0};
	struct storage_scan *s =
		storage_scan_open(f->db, t->id, INT64_MIN, INT64_MIN, &cmd);
	ck_assert_ptr_nonnull(s);
	struct storage_result *r;
	size_t n = 0;
	int rc;
	while ((rc = storage_scan_next(s, &r)) == 1) {
		n += r->row_count;
		storage_result_delete(r);
	}
	ck_assert_int_eq(rc, 0);
	storage_scan_close(s);
	return n;
}

/* SSTable data files in the table's directory */
static size_t data_files(struct storage_fx *f,
			 const struct storage_table_meta *t)
{
	char path[800];
	int k = snprintf(path, sizeof(path), "%s/ks/%s-", f->data, t->name);
	for (int i = 0; i < 16; i++)
		k += snprintf(path + k, sizeof(path) - (size_t)k, "%02x",
			      t->id[i]);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	size_t n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strstr(e->d_name, "-Data.db") != NULL;
	closedir(d);
	return n;
}

static uint64_t sstables(struct storage_fx *f,
			 const struct storage_table_meta *t)
{
	struct storage_stats st;
	storage_stats(f->db, t->id, &st);
	return st.sstable_count;
}

START_TEST(truncate_empties_memtable_and_sstables_and_keeps_later_writes)
{
	struct storage_fx f;
	fx_init(&f, "trunc-basic");
	put_range(&f, f.t, "old", 0, 200);
	put_range(&f, f.u, "u", 0, 50);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	put_range(&f, f.t, "old", 200, 300); /* memtable only */
	put_range(&f, f.u, "u", 50, 100);
	ck_assert_uint_eq(sstables(&f, f.t), 1);
	ck_assert_uint_eq(count(&f, f.t), 300);

	ck_assert_int_eq(storage_truncated_at(f.db, f.t->id), 0);
	int64_t before = env_wall_us(f.env);
	ck_assert_int_eq(storage_truncate(f.db, f.t->id), 0);
	int64_t when = storage_truncated_at(f.db, f.t->id);
	ck_assert_int_ge(when, before);
	ck_assert_int_le(when, env_wall_us(f.env));
	ck_assert_int_eq(storage_truncated_at(f.db, f.u->id), 0);
	ck_assert_uint_eq(count(&f, f.t), 0);
	ck_assert(!has(&f, f.t, "old5"));
	ck_assert(!has(&f, f.t, "old250"));
	ck_assert_uint_eq(sstables(&f, f.t), 0);
	ck_assert_uint_eq(data_files(&f, f.t), 0);
	/* the other table is untouched */
	ck_assert_uint_eq(count(&f, f.u), 100);
	ck_assert_uint_eq(data_files(&f, f.u), 1);

	put_range(&f, f.t, "new", 0, 20);
	ck_assert_uint_eq(count(&f, f.t), 20);

	storage_fx_restart(&f);
	ck_assert_int_eq(storage_truncated_at(f.db, f.t->id), when);
	ck_assert_uint_eq(count(&f, f.t), 20);
	ck_assert(has(&f, f.t, "new7"));
	ck_assert(!has(&f, f.t, "old250"));
	ck_assert_uint_eq(count(&f, f.u), 100);

	/* and after later flushes and another restart */
	put_range(&f, f.t, "new", 20, 40);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	put_range(&f, f.t, "new", 40, 50);
	storage_fx_restart(&f);
	ck_assert_uint_eq(count(&f, f.t), 50);
	ck_assert_uint_eq(count(&f, f.u), 100);
	ck_assert_int_eq(storage_drain(f.db), 0);
	storage_fx_restart(&f);
	ck_assert_uint_eq(count(&f, f.t), 50);
	storage_fx_free(&f);
}
END_TEST

START_TEST(restart_does_not_replay_truncated_commitlog_records)
{
	struct storage_fx f;
	fx_init(&f, "trunc-replay");
	/* nothing flushed: the rows live only in the memtable and the log */
	put_range(&f, f.t, "old", 0, 500);
	put_range(&f, f.u, "u", 0, 10);
	ck_assert_int_eq(storage_truncate(f.db, f.t->id), 0);
	put_range(&f, f.t, "new", 0, 10);
	put_range(&f, f.u, "u", 10, 20);
	storage_fx_restart(&f);
	ck_assert_uint_eq(count(&f, f.t), 10);
	ck_assert(has(&f, f.t, "new3"));
	ck_assert(!has(&f, f.t, "old3"));
	ck_assert_uint_eq(count(&f, f.u), 20);
	storage_fx_restart(&f);
	ck_assert_uint_eq(count(&f, f.t), 10);
	ck_assert_uint_eq(count(&f, f.u), 20);

	/* truncating twice, and an empty table, are fine */
	ck_assert_int_eq(storage_truncate(f.db, f.t->id), 0);
	ck_assert_int_eq(storage_truncate(f.db, f.t->id), 0);
	ck_assert_uint_eq(count(&f, f.t), 0);
	storage_fx_restart(&f);
	ck_assert_uint_eq(count(&f, f.t), 0);
	ck_assert_uint_eq(count(&f, f.u), 20);

	uint8_t unknown[16] = {0xee};
	ck_assert_int_eq(storage_truncate(f.db, unknown), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	storage_fx_free(&f);
}
END_TEST

START_TEST(sstable_files_stay_while_a_scan_holds_them)
{
	struct storage_fx f;
	fx_init(&f, "trunc-reader");
	put_range(&f, f.t, "old", 0, 100);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	struct storage_read_cmd cmd = {0};
	struct storage_scan *s =
		storage_scan_open(f.db, f.t->id, INT64_MIN, INT64_MIN, &cmd);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(storage_truncate(f.db, f.t->id), 0);
	ck_assert_uint_eq(count(&f, f.t), 0);
	ck_assert_uint_eq(data_files(&f, f.t), 1);
	/* the scan opened before still reads its snapshot */
	size_t n = 0;
	struct storage_result *r;
	while (storage_scan_next(s, &r) == 1) {
		n += r->row_count;
		storage_result_delete(r);
	}
	ck_assert_uint_eq(n, 100);
	storage_scan_close(s);
	ck_assert_uint_eq(data_files(&f, f.t), 0);
	storage_fx_restart(&f);
	ck_assert_uint_eq(count(&f, f.t), 0);
	storage_fx_free(&f);
}
END_TEST

static void table_file(struct storage_fx *f, const struct storage_table_meta *t,
		       const char *name, char *out, size_t n)
{
	int k = snprintf(out, n, "%s/ks/%s-", f->data, t->name);
	for (int i = 0; i < 16; i++)
		k += snprintf(out + k, n - (size_t)k, "%02x", t->id[i]);
	snprintf(out + k, n - (size_t)k, "/%s", name);
}

static void write_text(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	ck_assert_ptr_nonnull(fp);
	fputs(text, fp);
	fclose(fp);
}

/* A crash after the truncation record was written but before the SSTables
 * were unlinked: the next start deletes them and skips the log. A damaged
 * record refuses to load the table rather than resurrect it. */
START_TEST(a_crash_between_record_and_unlinks_finishes_the_truncate)
{
	struct storage_fx f;
	fx_init(&f, "trunc-crash");
	put_range(&f, f.t, "old", 0, 100);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0); /* generation 1 */
	put_range(&f, f.t, "old", 100, 200);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0); /* generation 2 */
	put_range(&f, f.t, "old", 200, 300);            /* the log only */
	put_range(&f, f.u, "u", 0, 10);
	storage_delete(f.db);
	ck_assert_uint_eq(data_files(&f, f.t), 2);
	char path[900];
	table_file(&f, f.t, "truncated.txt", path, sizeof(path));
	write_text(path, "1 1000000 0 2 0\n");
	storage_fx_open(&f);
	ck_assert_uint_eq(count(&f, f.t), 0);
	ck_assert_uint_eq(data_files(&f, f.t), 0);
	ck_assert_uint_eq(count(&f, f.u), 10);
	/* new SSTables are numbered above the truncated ones */
	put_range(&f, f.t, "new", 0, 5);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	storage_fx_restart(&f);
	ck_assert_uint_eq(count(&f, f.t), 5);

	storage_delete(f.db);
	write_text(path, "1 7 x\n");
	f.db = storage_new(&f.o);
	ck_assert_int_eq(storage_table_add(f.db, f.t, true), -1);
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	write_text(path, "1 1000000 0 2 0\n");
	ck_assert_int_eq(storage_table_add(f.db, f.t, true), 0);
	ck_assert_int_eq(storage_table_add(f.db, f.u, true), 0);
	ck_assert_int_eq(storage_start(f.db), 0);
	ck_assert_uint_eq(count(&f, f.t), 5);
	storage_fx_free(&f);
}
END_TEST

/* The truncation record cannot be written: nothing is dropped (memtable,
 * SSTables, the commitlog behind them, writes made meanwhile), and a later
 * truncate works. */
START_TEST(a_failed_truncation_record_drops_nothing)
{
	struct storage_fx f;
	fx_init(&f, "trunc-fail");
	put_range(&f, f.t, "old", 0, 100);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	put_range(&f, f.t, "old", 100, 150);
	fault_env_fail_writes(f.fe, "truncated.txt", EIO);
	ck_assert_int_eq(storage_truncate(f.db, f.t->id), -1);
	ck_assert_int_eq(err_code(), ERR_IO);
	ck_assert_int_eq(storage_truncated_at(f.db, f.t->id), 0);
	ck_assert_uint_eq(count(&f, f.t), 150);
	/* the memtable set aside is queued for flushing when put back */
	ck_assert_uint_ge(sstables(&f, f.t), 1);
	put_range(&f, f.t, "more", 0, 10);
	ck_assert_uint_eq(count(&f, f.t), 160);
	storage_fx_restart(&f); /* the memtable comes back from the commitlog */
	ck_assert_uint_eq(count(&f, f.t), 160);
	fault_env_fail_writes(f.fe, NULL, 0);
	ck_assert_int_eq(storage_truncate(f.db, f.t->id), 0);
	ck_assert_uint_eq(count(&f, f.t), 0);
	storage_fx_restart(&f);
	ck_assert_uint_eq(count(&f, f.t), 0);
	storage_fx_free(&f);
}
END_TEST

struct compactor {
	struct storage_fx *f;
	_Atomic bool stop;
	int rounds;
};

static void *compact_loop(void *arg)
{
	struct compactor *c = arg;
	while (!atomic_load(&c->stop)) {
		if (storage_compact(c->f->db, c->f->t->id, true))
			break;
		c->rounds++;
	}
	return NULL;
}

START_TEST(truncate_during_compactions_and_flushes_leaves_nothing_behind)
{
	struct storage_fx f;
	fx_init(&f, "trunc-compact");
	for (int round = 0; round < 5; round++) {
		for (int i = 0; i < 6; i++) {
			put_range(&f, f.t, "old", i * 100, i * 100 + 100);
			ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
		}
		put_range(&f, f.t, "old", 600, 650);
		struct compactor c = {.f = &f};
		pthread_t th;
		ck_assert_int_eq(pthread_create(&th, NULL, compact_loop, &c),
				 0);
		/* a flush queued just before, compactions on another thread */
		storage_flush(f.db, f.t->id);
		put_range(&f, f.t, "old", 650, 660);
		ck_assert_int_eq(storage_truncate(f.db, f.t->id), 0);
		put_range(&f, f.t, "new", round * 10, round * 10 + 10);
		atomic_store(&c.stop, true);
		pthread_join(th, NULL);
		ck_assert_uint_eq(count(&f, f.t), 10);
		ck_assert(!has(&f, f.t, "old1"));
		ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
		ck_assert_uint_eq(count(&f, f.t), 10);
		storage_fx_restart(&f);
		ck_assert_uint_eq(count(&f, f.t), 10);
		ck_assert(!has(&f, f.t, "old655"));
		char key[32];
		snprintf(key, sizeof(key), "new%d", round * 10 + 1);
		ck_assert(has(&f, f.t, key));
	}
	storage_fx_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_truncate");
	TCase *tc = tcase_create("truncate");
	tcase_set_timeout(tc, 120);
	tcase_add_test(
		tc,
		truncate_empties_memtable_and_sstables_and_keeps_later_writes);
	tcase_add_test(tc, restart_does_not_replay_truncated_commitlog_records);
	tcase_add_test(tc, sstable_files_stay_while_a_scan_holds_them);
	tcase_add_test(
		tc, a_crash_between_record_and_unlinks_finishes_the_truncate);
	tcase_add_test(tc, a_failed_truncation_record_drops_nothing);
	tcase_add_test(
		tc,
		truncate_during_compactions_and_flushes_leaves_nothing_behind);
	suite_add_tcase(s, tc);
	return test_run(s);
}
