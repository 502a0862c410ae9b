/* Tombstone compaction: the streaming droppable-tombstone histogram, its
 * place in Statistics.db (version 2; version 1 files still read), and the
 * single-SSTable compactions tombstone_threshold,
 * tombstone_compaction_interval and unchecked_tombstone_compaction drive,
 * which never purge a tombstone that still shadows data elsewhere. The
 * clock is the fault env's: every time step is explicit. */
#include "common/buf.h"
#include "common/crc.h"
#include "common/err.h"
#include "conf/conf.h"
#include "storage/sstable_tool.h"
#include "storage/storage.h"
#include "storage/tomb_hist_internal.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 1700000000LL

static uint64_t seed;

/* ---- the histogram ------------------------------------------------------- */

START_TEST(histogram_is_bounded_and_keeps_its_total)
{
	struct tomb_hist h = {0};
	uint64_t x = seed, total = 0;
	for (int i = 0; i < 20000; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		int64_t t = T0 + (int64_t)((x >> 33) % 864000);
		storage_tomb_hist_add(&h, t, 1 + ((x >> 20) & 3));
		total += 1 + ((x >> 20) & 3);
		ck_assert_uint_le(h.count, TOMB_HIST_BINS);
	}
	ck_assert_uint_eq(h.count, TOMB_HIST_BINS);
	ck_assert_uint_eq(storage_tomb_hist_total(&h), total);
	for (size_t i = 1; i < h.count; i++)
		ck_assert_int_lt(h.point[i - 1], h.point[i]);
	/* nothing before the first point, everything after the last */
	ck_assert(storage_tomb_hist_sum(&h, T0 - 1) == 0);
	ck_assert(storage_tomb_hist_sum(&h, T0 + 864000 + 60) == (double)total);
	/* uniform over 10 days: about half before day 5 (within 5%) */
	double half = storage_tomb_hist_sum(&h, T0 + 432000);
	ck_assert_msg(half > 0.45 * (double)total &&
			      half < 0.55 * (double)total,
		      "half: %f of %llu", half, (unsigned long long)total);
}
END_TEST

START_TEST(histogram_rounds_points_up_and_merges)
{
	struct tomb_hist h = {0}, g = {0};
	storage_tomb_hist_add(&h, 61, 1);  /* -> 120 */
	storage_tomb_hist_add(&h, 120, 2); /* the same bin */
	storage_tomb_hist_add(&h, 0, 1);   /* on a boundary: stays */
	ck_assert_uint_eq(h.count, 2);
	ck_assert_int_eq(h.point[0], 0);
	ck_assert_int_eq(h.point[1], 120);
	ck_assert_uint_eq(h.value[1], 3);
	/* Cassandra's estimate: half a bin's mass at its point (the bin
	 * spreads to both sides), the whole of it past the last point */
	ck_assert(storage_tomb_hist_sum(&h, 0) == 0.5);
	ck_assert(storage_tomb_hist_sum(&h, 120) == 4);
	ck_assert(storage_tomb_hist_sum(&h, 60) > 1 &&
		  storage_tomb_hist_sum(&h, 60) < 4);
	storage_tomb_hist_add(&g, 3600, 5);
	storage_tomb_hist_merge(&g, &h);
	ck_assert_uint_eq(g.count, 3);
	ck_assert_uint_eq(storage_tomb_hist_total(&g), 9);
	/* merging bins never moves their mass earlier than the data */
	struct tomb_hist m = {0};
	for (int i = 0; i <= TOMB_HIST_BINS; i++)
		storage_tomb_hist_add(&m, (int64_t)i * 60, 1);
	ck_assert_uint_eq(m.count, TOMB_HIST_BINS);
	ck_assert(storage_tomb_hist_sum(&m, -1) == 0);
	ck_assert(storage_tomb_hist_sum(&m, TOMB_HIST_BINS * 60) ==
		  TOMB_HIST_BINS + 1);
}
END_TEST

/* ---- the engine ---------------------------------------------------------- */

/* Table: pk text, c int, v text. */
enum { COL_PK, COL_C, COL_V };

/* ks.t on the shared engine fixture (storage_fixture.h): gc_grace 100 s,
 * tombstone_compaction_interval 1 h, the wall clock at T0. The engine is
 * not open yet: a test sets its table options, then storage_fx_open. */
static void fx_prepare(struct storage_fx *f, const char *tag)
{
	storage_fx_prepare(f, tag);
	fault_env_set_wall_us(f->fe, T0 * 1000000);
	f->o.commitlog_sync = CONF_COMMITLOG_SYNC_PERIODIC;
	uint8_t id[16] = {0x70, 0x31};
	f->t = storage_table_meta_new("ks", "t", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	storage_table_meta_add_column(f->t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(f->t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(f->t, "v", STORAGE_COLUMN_REGULAR, &tx,
				      false);
	f->t->options.gc_grace_seconds = 100;
	f->t->options.tombstone_compaction_interval = 3600;
}

/* The same with the engine open. */
static void fx_init(struct storage_fx *f, const char *tag)
{
	fx_prepare(f, tag);
	storage_fx_open(f);
}

static void at(struct storage_fx *f, int64_t sec)
{
	fault_env_set_wall_us(f->fe, (T0 + sec) * 1000000);
}

static int64_t now_sec(struct storage_fx *f)
{
	return env_wall_us(f->env) / 1000000;
}

static struct storage_mutation *row(struct storage_fx *f, const char *key,
				    int c)
{
	struct storage_mutation *m =
		storage_mutation_new(f->t, (const uint8_t *)key, strlen(key));
	uint8_t cb[4];
	be32_store(cb, (uint32_t)c);
	struct slice ck = slice_make(cb, 4);
	ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	return m;
}

static void apply(struct storage_fx *f, struct storage_mutation *m)
{
	if (storage_apply_sync(f->db, m))
		ck_abort_msg("apply: %s", err_msg());
	storage_mutation_delete(m);
}

/* A row written at timestamp `ts` (0: the next one). */
static void put_at(struct storage_fx *f, const char *key, int c, int64_t ts)
{
	struct storage_mutation *m = row(f, key, c);
	if (!ts)
		ts = f->ts++;
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, 0, now_sec(f)), 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0,
					      (const uint8_t *)"v", 1, ts, 0,
					      now_sec(f)),
			 0);
	apply(f, m);
}

static void put(struct storage_fx *f, const char *key, int c)
{
	put_at(f, key, c, 0);
}

static void del_row(struct storage_fx *f, const char *key, int c)
{
	struct storage_mutation *m = row(f, key, c);
	ck_assert_int_eq(storage_mutation_delete_row(m, f->ts++, now_sec(f)),
			 0);
	apply(f, m);
}

static struct storage_result *get(struct storage_fx *f, const char *key)
{
	struct storage_read_cmd cmd = {0};
	cmd.key = (const uint8_t *)key;
	cmd.key_len = strlen(key);
	struct storage_result *r;
	if (storage_read(f->db, f->t->id, &cmd, &r))
		ck_abort_msg("read: %s", err_msg());
	return r;
}

static void expect(struct storage_fx *f, const char *key, size_t rows,
		   uint64_t min_tombstones)
{
	struct storage_result *r = get(f, key);
	ck_assert_msg(r->row_count == rows, "%s: %zu rows, not %zu", key,
		      r->row_count, rows);
	ck_assert_msg(r->tombstones >= min_tombstones,
		      "%s: %llu tombstones, wanted >= %llu", key,
		      (unsigned long long)r->tombstones,
		      (unsigned long long)min_tombstones);
	storage_result_delete(r);
}

static struct storage_stats stats(struct storage_fx *f)
{
	struct storage_stats st;
	ck_assert_int_eq(storage_stats(f->db, f->t->id, &st), 0);
	return st;
}

static void flush(struct storage_fx *f)
{
	ck_assert_int_eq(storage_flush(f->db, NULL), 0);
}

/* A background round, synchronously: what the compactor would run. */
static void background(struct storage_fx *f)
{
	ck_assert_int_eq(storage_compact(f->db, f->t->id, false), 0);
}

static void key_of(char *out, size_t n, const char *prefix, int i)
{
	snprintf(out, n, "%s%d", prefix, i);
}

/* One SSTable: `live` partitions with a row each, `dead` with only a
 * row deletion (deletes of rows that never existed). */
static void one_sstable(struct storage_fx *f, int live, int dead)
{
	char k[32];
	for (int i = 0; i < live; i++) {
		key_of(k, sizeof(k), "live", i);
		put(f, k, 1);
	}
	for (int i = 0; i < dead; i++) {
		key_of(k, sizeof(k), "dead", i);
		del_row(f, k, 1);
	}
	flush(f);
}

/* live: 2 cells each (marker, v); dead: 1 tombstone each. 10 live and
 * 30 dead: 30 / 50 = 0.6 droppable once past gc_grace. */
START_TEST(a_tombstone_heavy_sstable_compacts_alone_once_old_enough)
{
	struct storage_fx f;
	fx_init(&f, "tomb-alone");
	one_sstable(&f, 10, 30);
	ck_assert_uint_eq(stats(&f).sstable_count, 1);

	background(&f); /* young, tombstones within gc_grace */
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 0);
	ck_assert_uint_eq(stats(&f).droppable_tombstones_ppm, 0);
	at(&f, 200); /* past gc_grace, not tombstone_compaction_interval */
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 0);
	/* 30 of 50 (the histogram's estimate, exact past every point) */
	ck_assert_uint_eq(stats(&f).droppable_tombstones_ppm, 600000);
	expect(&f, "dead3", 0, 1);

	at(&f, 3601);
	background(&f);
	struct storage_stats st = stats(&f);
	ck_assert_uint_eq(st.tombstone_compactions, 1);
	ck_assert_uint_eq(st.compactions, 1);
	ck_assert_uint_eq(st.sstable_count, 1);
	expect(&f, "dead3", 0, 0); /* purged */
	expect(&f, "live3", 1, 0);

	/* the output is new: no second one, however often asked */
	background(&f);
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 1);
	storage_fx_free(&f);
}
END_TEST

START_TEST(under_the_threshold_nothing_runs)
{
	struct storage_fx f;
	fx_prepare(&f, "tomb-threshold");
	f.t->options.tombstone_threshold = 0.7; /* the ratio is 0.6 */
	storage_fx_open(&f);
	one_sstable(&f, 10, 30);
	at(&f, 4000);
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 0);
	expect(&f, "dead1", 0, 1);

	f.t->options.tombstone_threshold = 0.5;
	storage_fx_restart(&f);
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 1);
	expect(&f, "dead1", 0, 0);
	storage_fx_free(&f);
}
END_TEST

START_TEST(time_window_tables_get_tombstone_compactions_too)
{
	struct storage_fx f;
	fx_prepare(&f, "tomb-twcs");
	f.t->options.compaction = STORAGE_COMPACTION_TIME_WINDOW;
	storage_fx_open(&f);
	one_sstable(&f, 5, 20);
	at(&f, 4000);
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 1);
	expect(&f, "dead0", 0, 0);
	expect(&f, "live0", 1, 0);
	storage_fx_free(&f);
}
END_TEST

/* The tombstones' SSTable overlaps one with the data they delete: the
 * overlap check skips it; unchecked runs it, but the shadowing
 * tombstones stay (the data must not come back), and only a compaction
 * with the data's SSTable drops both. */
START_TEST(overlap_check_and_unchecked_never_resurrect)
{
	struct storage_fx f;
	fx_init(&f, "tomb-overlap");
	char k[32];
	for (int i = 0; i < 10; i++) {
		key_of(k, sizeof(k), "p", i);
		put(&f, k, 1);
		put(&f, k, 2);
	}
	flush(&f);
	for (int i = 0; i < 10; i++) {
		key_of(k, sizeof(k), "p", i);
		del_row(&f, k, 1);
		del_row(&f, k, 2);
	}
	flush(&f);
	ck_assert_uint_eq(stats(&f).sstable_count, 2);
	at(&f, 4000);
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 0);

	f.t->options.unchecked_tombstone_compaction = true;
	storage_fx_restart(&f);
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 1);
	ck_assert_uint_eq(stats(&f).sstable_count, 2);
	for (int i = 0; i < 10; i++) {
		key_of(k, sizeof(k), "p", i);
		expect(&f, k, 0, 2); /* still deleted, tombstones kept */
	}
	/* both together: data and tombstones go */
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	for (int i = 0; i < 10; i++) {
		key_of(k, sizeof(k), "p", i);
		expect(&f, k, 0, 0);
	}
	storage_fx_free(&f);
}
END_TEST

/* Data older than the tombstones, still in a memtable: a tombstone
 * compaction keeps the tombstones that shadow it. */
START_TEST(tombstones_shadowing_a_memtable_stay)
{
	struct storage_fx f;
	fx_init(&f, "tomb-memtable");
	one_sstable(&f, 10, 30);
	at(&f, 4000);
	/* a late write with an old timestamp (a hint, a repair) */
	put_at(&f, "dead7", 1, 1);
	expect(&f, "dead7", 0, 1);
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 1);
	expect(&f, "dead7", 0, 1);
	flush(&f);
	expect(&f, "dead7", 0, 1);
	expect(&f, "dead8", 0, 0); /* nothing shadowed: purged */
	storage_fx_free(&f);
}
END_TEST

/* A row whose marker and cell expire `ttl` seconds from now. */
static void put_ttl(struct storage_fx *f, const char *key, int c, int32_t ttl)
{
	struct storage_mutation *m = row(f, key, c);
	int64_t ts = f->ts++;
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, ttl, now_sec(f)),
			 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0,
					      (const uint8_t *)"v", 1, ts, ttl,
					      now_sec(f)),
			 0);
	apply(f, m);
}

/* 200 rows with a 10 s TTL in one SSTable, flushed at T0. */
static void expiring_sstable(struct storage_fx *f)
{
	char k[32];
	for (int i = 0; i < 200; i++) {
		key_of(k, sizeof(k), "ttl", i);
		put_ttl(f, k, 1, 10);
	}
	flush(f);
}

/* An SSTable of expired rows only, older than everything else, goes
 * whole at the first round past gc_grace, before the strategy's own pick
 * and without waiting for tombstone_compaction_interval (Cassandra's
 * fully expired SSTables: time-window tables drop old windows so). Here
 * the strategy's pick is the four small SSTables of the newest window;
 * the expired one is alone in its window. */
START_TEST(fully_expired_sstables_go_whole)
{
	struct storage_fx f;
	fx_prepare(&f, "tomb-expired");
	f.t->options.compaction = STORAGE_COMPACTION_TIME_WINDOW;
	f.t->options.compaction_window_seconds = 1;
	storage_fx_open(&f);
	expiring_sstable(&f);
	f.ts = 5000000; /* the small ones five windows later */
	char k[32];
	for (int s = 0; s < 4; s++) {
		for (int i = 0; i < 5; i++) {
			key_of(k, sizeof(k), "live", s * 5 + i);
			put(&f, k, 1);
		}
		flush(&f);
	}
	ck_assert_uint_eq(stats(&f).sstable_count, 5);
	at(&f, 50); /* expired, not past gc_grace (100 s) */
	background(&f);
	ck_assert_uint_eq(stats(&f).sstable_count, 2);
	expect(&f, "ttl7", 0, 0);

	at(&f, 300); /* past gc_grace; the interval (3600 s) is not */
	background(&f);
	struct storage_stats st = stats(&f);
	ck_assert_uint_eq(st.tombstone_compactions, 0);
	/* the merged small ones only: the job's output was empty, and an
	 * empty output is not kept */
	ck_assert_uint_eq(st.sstable_count, 1);
	ck_assert_uint_eq(st.estimated_partitions, 20);
	expect(&f, "ttl7", 0, 0);
	expect(&f, "live7", 1, 0);
	background(&f); /* nothing left to drop: no loop */
	ck_assert_uint_eq(stats(&f).compactions, st.compactions);
	storage_fx_free(&f);
}
END_TEST

/* The same SSTable, but another holds an older write of one of its keys:
 * it is not fully expired against that one (its expired cells still
 * shadow the write), so it stays. */
START_TEST(an_expired_sstable_shadowing_older_data_stays)
{
	struct storage_fx f;
	fx_init(&f, "tomb-expired-old");
	expiring_sstable(&f);
	put_at(&f, "ttl7", 1, 1);
	flush(&f);
	at(&f, 300);
	background(&f);
	ck_assert_uint_eq(stats(&f).sstable_count, 2);
	expect(&f, "ttl7", 0, 0);
	storage_fx_free(&f);
}
END_TEST

/* Many partitions (several index blocks) and an SSTable overlapping a
 * sliver of their range: enough of them lie outside, so the compaction
 * runs; the one key the other SSTable holds older data for keeps its
 * tombstone. */
START_TEST(a_narrow_overlap_still_allows_it)
{
	struct storage_fx f;
	fx_init(&f, "tomb-narrow");
	put_at(&f, "dead42", 1, 1); /* older than its tombstone */
	flush(&f);
	one_sstable(&f, 50, 500);
	ck_assert_uint_eq(stats(&f).sstable_count, 2);
	at(&f, 4000);
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 1);
	expect(&f, "dead42", 0, 1);
	expect(&f, "dead43", 0, 0);
	expect(&f, "live7", 1, 0);
	storage_fx_free(&f);
}
END_TEST

/* A tombstone compaction the disk refuses midway leaves the SSTable as
 * it was; after one that a power cut follows, nothing is lost and nothing
 * comes back. */
START_TEST(a_failed_or_crashed_tombstone_compaction_loses_nothing)
{
	struct storage_fx f;
	fx_init(&f, "tomb-crash");
	put_at(&f, "dead7", 1, 1); /* older than its tombstone */
	flush(&f);
	one_sstable(&f, 50, 500); /* several index blocks: see above */
	at(&f, 4000);
	fault_env_fail_writes(f.fe, "tmp-", ENOSPC);
	storage_compact(f.db, f.t->id, false); /* fails: logged */
	fault_env_fail_writes(f.fe, NULL, 0);
	struct storage_stats st = stats(&f);
	ck_assert_uint_eq(st.tombstone_compactions, 0);
	ck_assert_uint_eq(st.sstable_count, 2);
	expect(&f, "dead7", 0, 1);
	expect(&f, "dead3", 0, 1);
	expect(&f, "live3", 1, 0);

	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 1);
	for (uint64_t cut = 1; cut <= 3; cut++) {
		fault_env_freeze(f.fe);
		storage_delete(f.db);
		fault_env_crash(f.fe, seed + cut);
		storage_fx_open(&f);
		ck_assert_uint_eq(stats(&f).sstable_count, 2);
		expect(&f, "dead7", 0, 1);
		expect(&f, "dead3", 0, 0);
		expect(&f, "live3", 1, 0);
	}
	storage_fx_free(&f);
}
END_TEST

/* ---- format versions ------------------------------------------------------
 */

static void table_dir_of(struct storage_fx *f, char *out, size_t n)
{
	int k = snprintf(out, n, "%s/ks/t-", f->data);
	for (int i = 0; i < 16; i++)
		k += snprintf(out + k, n - (size_t)k, "%02x", f->t->id[i]);
}

/* Rewrites a generation's Statistics.db as version 1 wrote it: the body
 * without the version 2 tail. */
static void downgrade_stats(struct storage_fx *f, int gen)
{
	char dir[700], path[800];
	table_dir_of(f, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/ca-%d-Statistics.db", dir, gen);
	FILE *fp = fopen(path, "rb");
	ck_assert_ptr_nonnull(fp);
	uint8_t img[8192];
	size_t n = fread(img, 1, sizeof(img), fp);
	fclose(fp);
	ck_assert_uint_gt(n, 5 + 425 + 4);
	ck_assert_int_eq(img[4], 5);
	const size_t v1_body = 13 * 8 + 1 + 40 * 8;
	img[4] = 1;
	uint32_t crc = crc32c_mask(crc32c(0, img, 5 + v1_body));
	be32_store(img + 5 + v1_body, crc);
	fp = fopen(path, "wb");
	ck_assert_ptr_nonnull(fp);
	ck_assert_uint_eq(fwrite(img, 1, 5 + v1_body + 4, fp), 5 + v1_body + 4);
	fclose(fp);
}

START_TEST(version_1_statistics_still_read)
{
	struct storage_fx f;
	fx_init(&f, "tomb-v1");
	one_sstable(&f, 10, 30);
	storage_delete(f.db);
	downgrade_stats(&f, 1);
	storage_fx_open(&f);
	expect(&f, "live1", 1, 0);
	expect(&f, "dead1", 0, 1);
	/* no estimate, so no tombstone compaction; a major one still purges */
	at(&f, 4000);
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 0);
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	expect(&f, "dead1", 0, 0);
	expect(&f, "live1", 1, 0);
	storage_fx_free(&f);
}
END_TEST

/* Where a version 5 Statistics.db's version 4 body ends (the column
 * layout follows): the version 1 body, the version 2 tail with its
 * histogram, the level, the pending repair session. */
static size_t v4_end(const uint8_t *img, size_t n)
{
	const size_t hist = 5 + 425 + 5 * 8; /* the histogram's bin count */
	ck_assert_uint_lt(hist, n);
	struct cursor c = cursor_make(img + hist, n - hist);
	uint64_t bins;
	ck_assert_int_eq(cursor_uvarint(&c, &bins), 0);
	size_t at = n - cursor_left(&c) + bins * 16 + 4 + 16;
	ck_assert_uint_le(at, n - 4);
	return at;
}

/* Statistics.db version 4 appends the 16-byte pending_repair session id
 * (all zero: none). Rewrites the last 16 body bytes with `sid` and
 * keeps version 4, or (sid NULL) strips them and writes version 3. */
static void rewrite_pending(struct storage_fx *f, int gen, const uint8_t *sid)
{
	char dir[700], path[800];
	table_dir_of(f, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/ca-%d-Statistics.db", dir, gen);
	FILE *fp = fopen(path, "rb");
	ck_assert_ptr_nonnull(fp);
	uint8_t img[8192];
	size_t n = fread(img, 1, sizeof(img), fp);
	fclose(fp);
	/* without its column layout: a version 4 file */
	ck_assert_int_eq(img[4], 5);
	size_t body_end = v4_end(img, n);
	img[4] = 4;
	for (size_t i = 0; i < 16; i++) /* flushes hold no session */
		ck_assert_uint_eq(img[body_end - 16 + i], 0);
	if (sid) {
		memcpy(img + body_end - 16, sid, 16);
	} else {
		img[4] = 3;
		body_end -= 16;
	}
	be32_store(img + body_end, crc32c_mask(crc32c(0, img, body_end)));
	fp = fopen(path, "wb");
	ck_assert_ptr_nonnull(fp);
	ck_assert_uint_eq(fwrite(img, 1, body_end + 4, fp), body_end + 4);
	fclose(fp);
}

static void read_meta(struct storage_fx *f, int gen,
		      struct storage_sstable_meta *m)
{
	char dir[700], path[800];
	table_dir_of(f, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/ca-%d-Data.db", dir, gen);
	ck_assert_int_eq(storage_sstable_meta_read(f->real, path, m), 0);
}

START_TEST(pending_repair_is_kept_and_version_3_reads_unrepaired)
{
	struct storage_fx f;
	fx_init(&f, "tomb-v4");
	one_sstable(&f, 10, 0);
	put(&f, "more", 1);
	flush(&f);
	storage_delete(f.db);
	struct storage_sstable_meta *m = calloc(1, sizeof(*m));
	ck_assert_ptr_nonnull(m);
	read_meta(&f, 1, m);
	ck_assert_uint_eq(m->stats_version, 5);
	ck_assert(!m->pending);
	ck_assert_int_eq(m->repaired_at, 0);
	const uint8_t sid[16] = {0xde, 0xad, 1, 2,  3,  4,  5,  6,
				 7,    8,    9, 10, 11, 12, 13, 14};
	rewrite_pending(&f, 1, sid);
	rewrite_pending(&f, 2, NULL);
	memset(m, 0, sizeof(*m));
	read_meta(&f, 1, m);
	ck_assert(m->pending);
	ck_assert_mem_eq(m->pending_repair, sid, 16);
	memset(m, 0, sizeof(*m));
	read_meta(&f, 2, m);
	ck_assert_uint_eq(m->stats_version, 3);
	ck_assert(!m->pending);
	ck_assert_int_eq(m->repaired_at, 0);
	free(m);
	storage_fx_open(&f);
	expect(&f, "live1", 1, 0);
	expect(&f, "more", 1, 0);
	storage_fx_free(&f);
}
END_TEST

/* Four SSTables, two held by a pending repair session: size-tiered's
 * min_threshold 4 is met only if states mix, so nothing compacts; with
 * all four unrepaired they do. */
START_TEST(compaction_keeps_pending_apart_from_unrepaired)
{
	struct storage_fx f;
	fx_init(&f, "tomb-sep");
	for (int i = 0; i < 4; i++) {
		char k[16];
		key_of(k, sizeof(k), "k", i);
		put(&f, k, 1);
		flush(&f);
	}
	storage_delete(f.db);
	const uint8_t sid[16] = {0x5e, 0x55, 1};
	rewrite_pending(&f, 1, sid);
	rewrite_pending(&f, 3, sid);
	storage_fx_open(&f);
	background(&f);
	ck_assert_uint_eq(stats(&f).compactions, 0);
	ck_assert_uint_eq(stats(&f).sstable_count, 4);
	for (int i = 0; i < 4; i++) {
		char k[16];
		key_of(k, sizeof(k), "k", i);
		expect(&f, k, 1, 0);
	}
	storage_fx_free(&f);

	fx_init(&f, "tomb-sep2");
	for (int i = 0; i < 4; i++) {
		char k[16];
		key_of(k, sizeof(k), "k", i);
		put(&f, k, 1);
		flush(&f);
	}
	background(&f);
	ck_assert_uint_eq(stats(&f).compactions, 1);
	ck_assert_uint_eq(stats(&f).sstable_count, 1);
	storage_fx_free(&f);
}
END_TEST

/* ---- incremental repair: anticompaction and repair states ------------- */

static struct storage_repair_counts rcounts(struct storage_fx *f)
{
	struct storage_repair_counts c;
	ck_assert_int_eq(storage_repair_counts(f->db, f->t->id, &c), 0);
	return c;
}

/* Partitions a scan pending for `sid` sees. */
static size_t pending_parts(struct storage_fx *f, const uint8_t sid[16])
{
	struct storage_read_cmd cmd = {.with_static = true,
				       .pending_repair = sid};
	struct storage_scan *sc =
		storage_scan_open(f->db, f->t->id, INT64_MIN, INT64_MIN, &cmd);
	ck_assert_ptr_nonnull(sc);
	size_t n = 0;
	struct storage_mutation *m;
	while (storage_scan_next_fragment(sc, &m) == 1) {
		n++;
		storage_mutation_delete(m);
	}
	storage_scan_close(sc);
	return n;
}

START_TEST(anticompaction_splits_and_states_survive_a_restart)
{
	struct storage_fx f;
	fx_init(&f, "tomb-anti");
	int64_t tok[40];
	for (int i = 0; i < 40; i++) {
		char k[16];
		key_of(k, sizeof(k), "k", i);
		put(&f, k, 1);
		struct storage_mutation *m = row(&f, k, 1);
		tok[i] = storage_mutation_token(m);
		storage_mutation_delete(m);
	}
	/* the range holds the keys whose token is at most k0's */
	size_t inside = 0;
	for (int i = 0; i < 40; i++)
		inside += tok[i] <= tok[0];
	ck_assert_uint_gt(inside, 0);
	ck_assert_uint_lt(inside, 40);
	struct storage_token_range r = {INT64_MIN, tok[0]};
	const uint8_t sid[16] = {0xa1, 1, 2, 3};
	uint64_t marked = 9, split = 9;
	/* the memtable is flushed first, then split in two */
	ck_assert_int_eq(storage_repair_anticompact(f.db, f.t->id, &r, 1, sid,
						    &marked, &split),
			 0);
	ck_assert_uint_eq(marked, 0);
	ck_assert_uint_eq(split, 1);
	struct storage_repair_counts c = rcounts(&f);
	ck_assert_uint_eq(c.pending, 1);
	ck_assert_uint_eq(c.unrepaired, 1);
	ck_assert_uint_eq(c.repaired, 0);
	ck_assert_uint_eq(pending_parts(&f, sid), inside);
	for (int i = 0; i < 40; i++) {
		char k[16];
		key_of(k, sizeof(k), "k", i);
		expect(&f, k, 1, 0);
	}
	/* streamed data lands pending too */
	struct storage_mutation *m = row(&f, "streamed", 1);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0,
					      (const uint8_t *)"s", 1, 5, 0,
					      now_sec(&f)),
			 0);
	const struct storage_mutation *ms[1] = {m};
	ck_assert_int_eq(storage_repair_ingest(f.db, f.t->id, ms, 1, sid), 0);
	storage_mutation_delete(m);
	ck_assert_uint_eq(rcounts(&f).pending, 2);
	ck_assert_uint_eq(pending_parts(&f, sid), inside + 1);
	expect(&f, "streamed", 1, 0);
	/* pending and unrepaired never compact together */
	background(&f);
	ck_assert_uint_eq(rcounts(&f).pending, 2);
	/* finalize: both pending SSTables become repaired, durably */
	uint64_t n = 0;
	ck_assert_int_eq(storage_repair_set_state(f.db, f.t->id, sid,
						  1700000000123LL, &n),
			 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(pending_parts(&f, sid), 0);
	storage_fx_restart(&f);
	c = rcounts(&f);
	ck_assert_uint_eq(c.repaired, 2);
	ck_assert_uint_eq(c.unrepaired, 1);
	ck_assert_uint_eq(c.pending, 0);
	/* a session over the whole ring marks the unrepaired SSTable whole
	 * (no rewrite) and leaves the repaired ones; failing it returns it
	 * to unrepaired */
	const uint8_t sid2[16] = {0xa2, 1};
	r = (struct storage_token_range){INT64_MIN, INT64_MAX};
	ck_assert_int_eq(storage_repair_anticompact(f.db, f.t->id, &r, 1, sid2,
						    &marked, &split),
			 0);
	ck_assert_uint_eq(marked, 1);
	ck_assert_uint_eq(split, 0);
	ck_assert_uint_eq(pending_parts(&f, sid2), 40 - inside);
	ck_assert_int_eq(storage_repair_set_state(f.db, f.t->id, sid2, 0, &n),
			 0);
	ck_assert_uint_eq(n, 1);
	storage_fx_restart(&f);
	c = rcounts(&f);
	ck_assert_uint_eq(c.repaired, 2);
	ck_assert_uint_eq(c.unrepaired, 1);
	ck_assert_uint_eq(c.pending, 0);
	for (int i = 0; i < 40; i++) {
		char k[16];
		key_of(k, sizeof(k), "k", i);
		expect(&f, k, 1, 0);
	}
	storage_fx_free(&f);
}
END_TEST

/* Data.db files in the table's directory. */
static int data_files(struct storage_fx *f)
{
	char dir[700];
	table_dir_of(f, dir, sizeof(dir));
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strstr(e->d_name, "-Data.db") != NULL;
	closedir(d);
	return n;
}

/* An SSTable of nothing but tombstones past gc_grace goes whole (fully
 * expired): its job writes nothing, and no empty SSTable takes its place,
 * neither now, nor after a restart, nor after a power cut right after. */
START_TEST(an_empty_compaction_output_is_not_kept)
{
	struct storage_fx f;
	fx_init(&f, "tomb-empty");
	one_sstable(&f, 0, 30);
	put(&f, "keep0", 1);
	flush(&f); /* newer than every tombstone: none shadows it */
	ck_assert_uint_eq(stats(&f).sstable_count, 2);
	ck_assert_int_eq(data_files(&f), 2);
	at(&f, 200); /* past gc_grace (100 s) */
	background(&f);
	struct storage_stats st = stats(&f);
	ck_assert_uint_eq(st.compactions, 1);
	ck_assert_uint_eq(st.sstable_count, 1);
	ck_assert_uint_eq(st.estimated_partitions, 1);
	ck_assert_int_eq(data_files(&f), 1);
	expect(&f, "dead3", 0, 0);
	expect(&f, "keep0", 1, 0);
	background(&f); /* nothing left to do */
	ck_assert_uint_eq(stats(&f).compactions, 1);
	for (uint64_t cut = 1; cut <= 3; cut++) {
		fault_env_freeze(f.fe);
		storage_delete(f.db);
		fault_env_crash(f.fe, seed + cut);
		storage_fx_open(&f);
		ck_assert_uint_eq(stats(&f).sstable_count, 1);
		ck_assert_int_eq(data_files(&f), 1);
		expect(&f, "dead3", 0, 0);
		expect(&f, "keep0", 1, 0);
	}
	storage_fx_free(&f);
}
END_TEST

/* Rows and row deletions of keys `prefix`0.. in one SSTable. */
static void prefixed_sstable(struct storage_fx *f, const char *prefix, int live,
			     int dead)
{
	char k[32];
	for (int i = 0; i < live; i++) {
		snprintf(k, sizeof(k), "%slive%d", prefix, i);
		put(f, k, 1);
	}
	for (int i = 0; i < dead; i++) {
		snprintf(k, sizeof(k), "%sdead%d", prefix, i);
		del_row(f, k, 1);
	}
	flush(f);
}

/* Three tombstone-heavy SSTables (too few for a size-tiered merge):
 * one background round runs a tombstone compaction of each, not one per
 * round (which left the next to the compactor's 5-minute look). */
START_TEST(a_round_runs_every_due_tombstone_compaction)
{
	struct storage_fx f;
	fx_prepare(&f, "tomb-round");
	f.t->options.unchecked_tombstone_compaction = true; /* they overlap */
	storage_fx_open(&f);
	prefixed_sstable(&f, "a", 10, 30);
	prefixed_sstable(&f, "b", 10, 30);
	prefixed_sstable(&f, "c", 10, 30);
	ck_assert_uint_eq(stats(&f).sstable_count, 3);
	at(&f, 3601);
	background(&f);
	struct storage_stats st = stats(&f);
	ck_assert_uint_eq(st.tombstone_compactions, 3);
	ck_assert_uint_eq(st.sstable_count, 3);
	expect(&f, "adead3", 0, 0);
	expect(&f, "bdead3", 0, 0);
	expect(&f, "cdead3", 0, 0);
	expect(&f, "clive3", 1, 0);
	background(&f); /* the outputs are new */
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 3);
	storage_fx_free(&f);
}
END_TEST

/* tombstone_compaction_interval 0 and tombstones that still shadow data
 * (they stay): each SSTable is a candidate again at once, yet a round
 * compacts each at most once and ends. */
START_TEST(a_round_of_tombstone_compactions_ends)
{
	struct storage_fx f;
	fx_prepare(&f, "tomb-round-end");
	f.t->options.unchecked_tombstone_compaction = true;
	f.t->options.tombstone_compaction_interval = 0;
	storage_fx_open(&f);
	char k[32];
	for (int i = 0; i < 20; i++) {
		key_of(k, sizeof(k), "p", i);
		put(&f, k, 1);
	}
	flush(&f);
	for (int s = 0; s < 2; s++) {
		for (int i = s * 10; i < s * 10 + 10; i++) {
			key_of(k, sizeof(k), "p", i);
			del_row(&f, k, 1);
		}
		flush(&f);
	}
	ck_assert_uint_eq(stats(&f).sstable_count, 3);
	at(&f, 200);
	background(&f);
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 2);
	ck_assert_uint_eq(stats(&f).sstable_count, 3);
	for (int i = 0; i < 20; i++) {
		key_of(k, sizeof(k), "p", i);
		expect(&f, k, 0, 1); /* still deleted, tombstones kept */
	}
	background(&f); /* a new round: once more each, and it ends */
	ck_assert_uint_eq(stats(&f).tombstone_compactions, 4);
	storage_fx_free(&f);
}
END_TEST

int main(void)
{
	seed = test_seed(31);
	Suite *s = suite_create("storage_tombstones");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, histogram_is_bounded_and_keeps_its_total);
	tcase_add_test(tc, histogram_rounds_points_up_and_merges);
	tcase_add_test(
		tc, a_tombstone_heavy_sstable_compacts_alone_once_old_enough);
	tcase_add_test(tc, under_the_threshold_nothing_runs);
	tcase_add_test(tc, time_window_tables_get_tombstone_compactions_too);
	tcase_add_test(tc, overlap_check_and_unchecked_never_resurrect);
	tcase_add_test(tc, tombstones_shadowing_a_memtable_stay);
	tcase_add_test(tc, a_narrow_overlap_still_allows_it);
	tcase_add_test(tc, fully_expired_sstables_go_whole);
	tcase_add_test(tc, an_expired_sstable_shadowing_older_data_stays);
	tcase_add_test(tc,
		       a_failed_or_crashed_tombstone_compaction_loses_nothing);
	tcase_add_test(tc, an_empty_compaction_output_is_not_kept);
	tcase_add_test(tc, a_round_runs_every_due_tombstone_compaction);
	tcase_add_test(tc, a_round_of_tombstone_compactions_ends);
	tcase_add_test(tc, version_1_statistics_still_read);
	tcase_add_test(tc,
		       pending_repair_is_kept_and_version_3_reads_unrepaired);
	tcase_add_test(tc, compaction_keeps_pending_apart_from_unrepaired);
	tcase_add_test(tc, anticompaction_splits_and_states_survive_a_restart);
	suite_add_tcase(s, tc);
	return test_run(s);
}
