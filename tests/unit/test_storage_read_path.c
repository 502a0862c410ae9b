/* storage: the point read's ways to SSTable bytes. Every
 * disk_access_mode (mapped files, partial LZ4 decoding of a block the
 * cache does not keep, pread) reads the same values; the cache admits a
 * block on its second miss; a memory-only read of a mapped SSTable in the
 * page cache needs no worker; a scan keeps the mappings of SSTables
 * compacted away under it; a truncated mapped file fails reads as
 * corrupt. The real env (the fault env cannot map). */
#include "common/env_real.h"
#include "common/err.h"
#include "storage/cache_internal.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <glob.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEYS 1500

struct fx {
	struct env *env;
	char dir[512], data[600], log[600];
	struct storage_table_meta *t;
	struct storage *db;
	struct storage_options o;
};

static size_t value_len(unsigned k)
{
	/* mostly small rows, now and then one spanning blocks */
	return k % 97 == 0 ? 9000 + k % 7 : 40 + k % 150;
}

static void value_of(unsigned k, uint8_t *v, size_t n)
{
	/* compressible: LZ4 blocks, not stored raw */
	for (size_t i = 0; i < n; i++)
		v[i] = (uint8_t)("abcabcabd"[i % 9] + (k % 3));
}

static void open_db(struct fx *f, int mode, size_t cache)
{
	storage_options_default(&f->o);
	f->o.env = f->env;
	f->o.data_dir = f->data;
	f->o.commitlog_dir = f->log;
	f->o.auto_compaction = false;
	f->o.disk_access_mode = mode;
	f->o.block_cache_size = cache;
	f->db = storage_new(&f->o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	if (storage_start(f->db))
		ck_abort_msg("start: %s", err_msg());
}

static void fx_init(struct fx *f, const char *tag)
{
	memset(f, 0, sizeof(*f));
	f->env = env_real_new(NULL);
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir(tag));
	snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
	snprintf(f->log, sizeof(f->log), "%s/commitlog", f->dir);
	uint8_t id[16] = {0x7e, 3};
	f->t = storage_table_meta_new("ks", "kv", id);
	struct storage_type tb = {.kind = STORAGE_TYPE_BLOB};
	storage_table_meta_add_column(f->t, "k", STORAGE_COLUMN_PARTITION_KEY,
				      &tb, false);
	storage_table_meta_add_column(f->t, "v", STORAGE_COLUMN_REGULAR, &tb,
				      false);
	f->t->options.compression = STORAGE_COMPRESSION_LZ4;
	f->t->options.chunk_length = 4096;
	open_db(f, STORAGE_DISK_ACCESS_MMAP, 1 << 20);
	uint8_t v[10000];
	for (unsigned k = 0; k < KEYS; k++) {
		char key[16];
		int kl = snprintf(key, sizeof(key), "key%u", k);
		struct storage_mutation *m = storage_mutation_new(
			f->t, (const uint8_t *)key, (size_t)kl);
		value_of(k, v, value_len(k));
		ck_assert_int_eq(storage_mutation_put(m, 1, NULL, 0, v,
						      value_len(k), 1000 + k, 0,
						      0),
				 0);
		ck_assert_int_eq(storage_apply_sync(f->db, m), 0);
		storage_mutation_delete(m);
	}
	ck_assert_int_eq(storage_flush(f->db, NULL), 0);
}

static void fx_free(struct fx *f)
{
	storage_delete(f->db);
	storage_table_meta_delete(f->t);
	test_tmpdir_remove(f->dir);
	env_real_delete(f->env);
}

/* Reads every key (in a scrambled order) and checks its value; the
 * read stats summed into *st. */
static void read_all(struct fx *f, bool cached_only,
		     struct storage_read_stats *st)
{
	uint8_t want[10000];
	for (unsigned i = 0; i < KEYS; i++) {
		unsigned k = (i * 7919u) % KEYS;
		char key[16];
		int kl = snprintf(key, sizeof(key), "key%u", k);
		struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
					       .key_len = (size_t)kl,
					       .stats = st};
		value_of(k, want, value_len(k));
		if (cached_only) {
			struct storage_mutation *m;
			if (storage_read_fragment_cached(f->db, f->t->id, &cmd,
							 &m))
				ck_abort_msg("cached read of %s: %s", key,
					     err_msg());
			ck_assert(!storage_mutation_is_empty(m));
			storage_mutation_delete(m);
			continue;
		}
		struct storage_result *r;
		if (storage_read(f->db, f->t->id, &cmd, &r))
			ck_abort_msg("read %s: %s", key, err_msg());
		ck_assert_uint_eq(r->row_count, 1);
		ck_assert_uint_eq(r->rows[0].cell_count, 1);
		struct slice got = r->rows[0].cells[0].value;
		ck_assert_uint_eq(got.len, value_len(k));
		ck_assert_int_eq(memcmp(got.ptr, want, got.len), 0);
		storage_result_delete(r);
	}
}

START_TEST(every_access_mode_reads_the_same_values)
{
	struct fx f;
	fx_init(&f, "readpath-modes");
	struct storage_read_stats mm = {0}, mm2 = {0}, std = {0}, idx = {0};
	read_all(&f, false, &mm);  /* mapped, every block missed once */
	read_all(&f, false, &mm2); /* second misses: admitted */
	ck_assert_uint_eq(mm.sstables_found, KEYS);
	ck_assert_uint_gt(mm.data_misses, 0);
	storage_delete(f.db);
	open_db(&f, STORAGE_DISK_ACCESS_STANDARD, 1 << 20);
	read_all(&f, false, &std);
	storage_delete(f.db);
	open_db(&f, STORAGE_DISK_ACCESS_MMAP_INDEX_ONLY, 1 << 20);
	read_all(&f, false, &idx);
	/* about the same blocks missed in each mode (the cache's
	 * admissions hash file ids, new in each engine)... */
	ck_assert_uint_le(mm.data_misses, std.data_misses + 10);
	ck_assert_uint_le(std.data_misses, mm.data_misses + 10);
	/* ...but the mapped reads decoded first misses only as far as the
	 * row they wanted */
	ck_assert_msg(mm.miss_bytes * 4 < std.miss_bytes * 3,
		      "mapped %llu bytes, pread %llu",
		      (unsigned long long)mm.miss_bytes,
		      (unsigned long long)std.miss_bytes);
	ck_assert_uint_gt(idx.miss_bytes * 4, std.miss_bytes * 3);
	/* and nothing is decoded twice once the blocks are admitted */
	ck_assert_uint_lt(mm2.data_misses, mm.data_misses);
	fx_free(&f);
}
END_TEST

START_TEST(cache_off_and_tiny_cache_read_the_same)
{
	struct fx f;
	fx_init(&f, "readpath-tiny");
	storage_delete(f.db);
	open_db(&f, STORAGE_DISK_ACCESS_MMAP, 0);
	read_all(&f, false, NULL);
	storage_delete(f.db);
	open_db(&f, STORAGE_DISK_ACCESS_MMAP, 8192);
	read_all(&f, false, NULL);
	read_all(&f, false, NULL);
	fx_free(&f);
}
END_TEST

START_TEST(memory_only_reads_of_a_mapped_sstable_in_the_page_cache)
{
	struct fx f;
	fx_init(&f, "readpath-cached");
	/* just written: its pages are in the page cache */
	read_all(&f, true, NULL);
	read_all(&f, false, NULL);
	fx_free(&f);
}
END_TEST

START_TEST(the_cache_admits_a_block_on_its_second_miss)
{
	struct block_cache *c = storage_block_cache_new(1 << 20);
	ck_assert(!storage_block_cache_admit(c, 7, 4096));
	ck_assert(storage_block_cache_admit(c, 7, 4096));
	/* admitted: the record is spent */
	ck_assert(!storage_block_cache_admit(c, 7, 4096));
	ck_assert(!storage_block_cache_admit(c, 8, 4096));
	ck_assert(!storage_block_cache_admit(NULL, 7, 0));
	storage_block_cache_delete(c);
	struct block_cache *off = storage_block_cache_new(0);
	ck_assert(!storage_block_cache_admit(off, 1, 0));
	ck_assert(!storage_block_cache_admit(off, 1, 0));
	storage_block_cache_delete(off);
}
END_TEST

/* The SSTables a scan reads through their mappings are compacted away
 * (unlinked) under it: the scan's snapshot keeps them, and their
 * mappings, until it closes; the compacted SSTable is mapped anew. */
START_TEST(a_scan_outlives_the_compaction_of_its_mapped_sstables)
{
	struct fx f;
	fx_init(&f, "readpath-compact");
	/* a second SSTable: the first half of the keys again */
	uint8_t v[10000];
	for (unsigned k = 0; k < KEYS / 2; k++) {
		char key[16];
		int kl = snprintf(key, sizeof(key), "key%u", k);
		struct storage_mutation *m = storage_mutation_new(
			f.t, (const uint8_t *)key, (size_t)kl);
		value_of(k, v, value_len(k));
		ck_assert_int_eq(storage_mutation_put(m, 1, NULL, 0, v,
						      value_len(k), 5000 + k, 0,
						      0),
				 0);
		ck_assert_int_eq(storage_apply_sync(f.db, m), 0);
		storage_mutation_delete(m);
	}
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	struct storage_read_cmd cmd = {0};
	struct storage_scan *sc =
		storage_scan_open(f.db, f.t->id, INT64_MIN, INT64_MIN, &cmd);
	ck_assert_ptr_nonnull(sc);
	struct storage_result *r;
	ck_assert_int_eq(storage_scan_next(sc, &r), 1);
	storage_result_delete(r);
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	unsigned n = 1;
	int rc;
	while ((rc = storage_scan_next(sc, &r)) == 1) {
		ck_assert_uint_eq(r->row_count, 1);
		storage_result_delete(r);
		n++;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(n, KEYS);
	storage_scan_close(sc);
	read_all(&f, false, NULL);
	read_all(&f, true, NULL);
	fx_free(&f);
}
END_TEST

/* Data.db cut short under its mapping (by someone else: the engine never
 * truncates an SSTable): the pages past the new end are out of the page
 * cache, so reads of them take pread and fail as corrupt; no SIGBUS. */
START_TEST(a_truncated_mapped_sstable_fails_reads_without_sigbus)
{
	struct fx f;
	fx_init(&f, "readpath-trunc");
	char pat[PATH_MAX];
	snprintf(pat, sizeof(pat), "%s/ks/*/*Data.db", f.data);
	glob_t g;
	ck_assert_int_eq(glob(pat, 0, NULL, &g), 0);
	ck_assert_uint_eq(g.gl_pathc, 1);
	struct stat st;
	ck_assert_int_eq(stat(g.gl_pathv[0], &st), 0);
	ck_assert_int_eq(truncate(g.gl_pathv[0], st.st_size / 2), 0);
	globfree(&g);
	unsigned ok = 0, corrupt = 0;
	for (unsigned k = 0; k < KEYS; k++) {
		char key[16];
		int kl = snprintf(key, sizeof(key), "key%u", k);
		struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
					       .key_len = (size_t)kl};
		struct storage_result *r;
		if (storage_read(f.db, f.t->id, &cmd, &r) == 0) {
			storage_result_delete(r);
			ok++;
		} else {
			ck_assert_int_eq(err_code(), ERR_CORRUPT);
			corrupt++;
		}
	}
	ck_assert_uint_gt(ok, 0);
	ck_assert_uint_gt(corrupt, 0);
	fx_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_read_path");
	TCase *tc = tcase_create("read_path");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, every_access_mode_reads_the_same_values);
	tcase_add_test(tc, cache_off_and_tiny_cache_read_the_same);
	tcase_add_test(tc,
		       memory_only_reads_of_a_mapped_sstable_in_the_page_cache);
	tcase_add_test(tc, the_cache_admits_a_block_on_its_second_miss);
	tcase_add_test(tc,
		       a_scan_outlives_the_compaction_of_its_mapped_sstables);
	tcase_add_test(tc,
		       a_truncated_mapped_sstable_fails_reads_without_sigbus);
	suite_add_tcase(s, tc);
	return test_run(s);
}
