/* storage corruption: flip and truncate bytes in every SSTable component.
 * The engine must refuse to open the SSTable or fail the affected reads
 * with ERR_CORRUPT; it must never return wrong rows, and never crash. */
#include "common/env_real.h"
#include "common/err.h"
#include "common/rand.h"
#include "conf/conf.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t seed;

#define NPART 16
#define NROW  25

static struct storage_table_meta *make_table(void)
{
	uint8_t id[16] = {0xc0, 0x22};
	struct storage_table_meta *t = storage_table_meta_new("ks", "c", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &tx,
				      false);
	t->options.chunk_length = 512;
	return t;
}

static struct storage *open_db_policy(struct env *env, const char *dir,
				      const struct storage_table_meta *t,
				      int policy)
{
	char data[600], log[600];
	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(log, sizeof(log), "%s/commitlog", dir);
	struct storage_options o;
	storage_options_default(&o);
	o.env = env;
	o.data_dir = data;
	o.commitlog_dir = log;
	o.auto_compaction = false;
	o.commitlog_segment_size = 256 * 1024; /* cheap to preallocate */
	o.disk_failure_policy = policy;
	struct storage *db = storage_new(&o);
	ck_assert_ptr_nonnull(db);
	if (storage_table_add(db, t, true) || storage_start(db)) {
		storage_delete(db);
		return NULL;
	}
	return db;
}

static struct storage *open_db(struct env *env, const char *dir,
			       const struct storage_table_meta *t)
{
	return open_db_policy(env, dir, t, CONF_POLICY_STOP);
}

static void value_of(int p, int c, char *out, size_t n)
{
	snprintf(out, n, "value-%d-%d-%0*d", p, c, (p * 7 + c) % 30, 0);
}

static void load(struct storage *db, const struct storage_table_meta *t)
{
	char key[16], v[64];
	for (int p = 0; p < NPART; p++) {
		snprintf(key, sizeof(key), "part%d", p);
		for (int c = 0; c < NROW; c++) {
			struct storage_mutation *m = storage_mutation_new(
				t, (const uint8_t *)key, strlen(key));
			uint8_t cb[4];
			be32_store(cb, (uint32_t)c);
			struct slice ck = slice_make(cb, 4);
			storage_mutation_set_row(m, &ck, 1);
			value_of(p, c, v, sizeof(v));
			storage_mutation_put(m, 2, NULL, 0, (const uint8_t *)v,
					     strlen(v), 100, 0, 0);
			ck_assert_int_eq(storage_apply_sync(db, m), 0);
			storage_mutation_delete(m);
		}
	}
	ck_assert_int_eq(storage_flush(db, NULL), 0);
}

/* Every partition reads back exactly, or fails with ERR_CORRUPT.
 * Returns how many reads failed. */
static int verify(struct storage *db, const struct storage_table_meta *t)
{
	char key[16], v[64];
	int failed = 0;
	for (int p = 0; p < NPART; p++) {
		snprintf(key, sizeof(key), "part%d", p);
		struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
					       .key_len = strlen(key)};
		struct storage_result *r;
		if (storage_read(db, t->id, &cmd, &r)) {
			ck_assert_msg(err_code() == ERR_CORRUPT,
				      "read failed with %s: %s",
				      err_code_name(err_code()), err_msg());
			failed++;
			continue;
		}
		ck_assert_uint_eq(r->row_count, NROW);
		for (int c = 0; c < NROW; c++) {
			const struct storage_row_view *row = &r->rows[c];
			ck_assert_int_eq((int)be32_load(row->clustering[0].ptr),
					 c);
			value_of(p, c, v, sizeof(v));
			ck_assert_uint_eq(row->cell_count, 1);
			ck_assert_uint_eq(row->cells[0].value.len, strlen(v));
			ck_assert_int_eq(
				memcmp(row->cells[0].value.ptr, v, strlen(v)),
				0);
		}
		storage_result_delete(r);
	}
	/* a scan returns correct partitions until it fails */
	struct storage_read_cmd all = {0};
	struct storage_scan *s = storage_scan_open(db, t->id, 0, 0, &all);
	if (s) {
		struct storage_result *r;
		while (storage_scan_next(s, &r) == 1) {
			ck_assert_uint_eq(r->row_count, NROW);
			storage_result_delete(r);
		}
		storage_scan_close(s);
	}
	return failed;
}

static void copy_tree(const char *from, const char *to)
{
	char cmd[4096];
	int n = snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s' '%s'", to,
			 from, to);
	ck_assert(n > 0 && (size_t)n < sizeof(cmd));
	ck_assert_int_eq(system(cmd), 0);
}

/* Finds the table directory's file ending with `suffix`. */
static bool find_component(const char *dir, const char *suffix, char *out,
			   size_t n)
{
	char tdir[900];
	snprintf(tdir, sizeof(tdir), "%s/data/ks", dir);
	DIR *d = opendir(tdir);
	if (!d)
		return false;
	struct dirent *e;
	char sub[1200] = "";
	while ((e = readdir(d)))
		if (e->d_name[0] == 'c')
			snprintf(sub, sizeof(sub), "%s/%s", tdir, e->d_name);
	closedir(d);
	d = opendir(sub);
	if (!d)
		return false;
	bool found = false;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name), s = strlen(suffix);
		if (l > s && strcmp(e->d_name + l - s, suffix) == 0) {
			snprintf(out, n, "%s/%s", sub, e->d_name);
			found = true;
		}
	}
	closedir(d);
	return found;
}

static void damage(const char *path, struct rng *r, bool truncate_it)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	if (st.st_size == 0)
		return;
	if (truncate_it) {
		ck_assert_int_eq(
			truncate(path,
				 (off_t)rng_below(r, (uint64_t)st.st_size)),
			0);
		return;
	}
	FILE *f = fopen(path, "r+b");
	long off = (long)rng_below(r, (uint64_t)st.st_size);
	fseek(f, off, SEEK_SET);
	int c = fgetc(f);
	fseek(f, off, SEEK_SET);
	fputc(c ^ (int)(rng_below(r, 255) + 1), f);
	fclose(f);
}

START_TEST(damaged_components_never_return_wrong_rows)
{
	static const char *comps[] = {"Data.db",       "Index.db",
				      "Summary.db",    "Filter.db",
				      "Statistics.db", "TOC.txt"};
	struct env *env = env_real_new(NULL);
	struct storage_table_meta *t = make_table();
	char pristine[512], work[600];
	snprintf(pristine, sizeof(pristine), "%s", test_tmpdir("corrupt"));
	snprintf(work, sizeof(work), "%s-work", pristine);
	struct storage *db = open_db(env, pristine, t);
	ck_assert_ptr_nonnull(db);
	load(db, t);
	ck_assert_int_eq(verify(db, t), 0);
	storage_delete(db);

	struct rng r;
	rng_seed(&r, seed);
	int refused = 0, failed_reads = 0;
	for (size_t ci = 0; ci < 6; ci++) {
		for (int trial = 0; trial < 8; trial++) {
			copy_tree(pristine, work);
			char path[1400];
			ck_assert(find_component(work, comps[ci], path,
						 sizeof(path)));
			damage(path, &r, trial >= 6);
			db = open_db(env, work, t);
			if (!db) {
				ck_assert_int_ne(err_code(), ERR_NONE);
				refused++;
				continue;
			}
			int f = verify(db, t);
			failed_reads += f;
			struct storage_stats st;
			storage_stats(db, NULL, &st);
			ck_assert_uint_ge(st.corrupt_blocks, (uint64_t)f);
			if (f) /* disk_failure_policy stop */
				ck_assert(st.writes_stopped);
			storage_delete(db);
		}
	}
	/* the damage was noticed somewhere (the test can fail) */
	ck_assert_int_gt(refused, 0);
	ck_assert_int_gt(failed_reads, 0);
	char cmd[1300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
	ck_assert_int_eq(system(cmd), 0);
	test_tmpdir_remove(pristine);
	storage_table_meta_delete(t);
	env_real_delete(env);
}
END_TEST

/* disk_failure_policy best_effort: the read that meets the damage fails,
 * the SSTable is left out from then on (reads answer from what is left,
 * never wrong rows), writes go on, and compaction does not touch it. */
START_TEST(best_effort_leaves_a_corrupt_sstable_out)
{
	struct env *env = env_real_new(NULL);
	struct storage_table_meta *t = make_table();
	char dir[512];
	snprintf(dir, sizeof(dir), "%s", test_tmpdir("best-effort"));
	struct storage *db =
		open_db_policy(env, dir, t, CONF_POLICY_BEST_EFFORT);
	ck_assert_ptr_nonnull(db);
	load(db, t);
	storage_delete(db);
	char path[1400];
	ck_assert(find_component(dir, "Data.db", path, sizeof(path)));
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	fseek(f, (long)st.st_size / 2, SEEK_SET);
	int c = fgetc(f);
	fseek(f, (long)st.st_size / 2, SEEK_SET);
	fputc(c ^ 0x5a, f);
	fclose(f);

	db = open_db_policy(env, dir, t, CONF_POLICY_BEST_EFFORT);
	ck_assert_ptr_nonnull(db);
	int failed = 0, empty = 0;
	char key[16];
	for (int round = 0; round < 2; round++) {
		for (int p = 0; p < NPART; p++) {
			snprintf(key, sizeof(key), "part%d", p);
			struct storage_read_cmd cmd = {
				.key = (const uint8_t *)key,
				.key_len = strlen(key)};
			struct storage_result *r;
			if (storage_read(db, t->id, &cmd, &r)) {
				ck_assert_int_eq(err_code(), ERR_CORRUPT);
				ck_assert_int_eq(round, 0);
				failed++;
				continue;
			}
			/* all of the partition or, once left out, none */
			ck_assert(r->row_count == NROW || r->row_count == 0);
			empty += round == 1 && r->row_count == 0;
			storage_result_delete(r);
		}
	}
	ck_assert_int_eq(failed, 1);
	ck_assert_int_eq(empty, NPART);
	struct storage_stats s;
	storage_stats(db, NULL, &s);
	ck_assert_uint_eq(s.sstables_excluded, 1);
	ck_assert(!s.writes_stopped);
	/* Writes go on; a major compaction leaves the excluded one alone. */
	struct storage_mutation *m =
		storage_mutation_new(t, (const uint8_t *)"part0", 5);
	uint8_t cb[4];
	be32_store(cb, 0);
	struct slice ck = slice_make(cb, 4);
	storage_mutation_set_row(m, &ck, 1);
	storage_mutation_put(m, 2, NULL, 0, (const uint8_t *)"new", 3, 200, 0,
			     0);
	ck_assert_int_eq(storage_apply_sync(db, m), 0);
	storage_mutation_delete(m);
	ck_assert_int_eq(storage_flush(db, NULL), 0);
	ck_assert_int_eq(storage_compact(db, t->id, true), 0);
	storage_stats(db, NULL, &s);
	ck_assert_uint_eq(s.sstable_count, 2);
	struct storage_read_cmd cmd = {.key = (const uint8_t *)"part0",
				       .key_len = 5};
	struct storage_result *r;
	ck_assert_int_eq(storage_read(db, t->id, &cmd, &r), 0);
	ck_assert_uint_eq(r->row_count, 1);
	storage_result_delete(r);
	storage_delete(db);
	test_tmpdir_remove(dir);
	storage_table_meta_delete(t);
	env_real_delete(env);
}
END_TEST

int main(void)
{
	seed = test_seed(99);
	Suite *s = suite_create("storage_corrupt");
	TCase *tc = tcase_create("corrupt");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, damaged_components_never_return_wrong_rows);
	tcase_add_test(tc, best_effort_leaves_a_corrupt_sstable_out);
	suite_add_tcase(s, tc);
	return test_run(s);
}
