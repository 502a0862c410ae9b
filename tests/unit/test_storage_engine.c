/* storage engine: the write path, flushes, SSTable reads with slices and
 * the row index, restarts with replay, range scans, compaction and purge,
 * TTL against the env clock, corruption handling. */
#include "common/err.h"
#include "common/murmur3.h"
#include "conf/conf.h"
#include "storage/cache_internal.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Table: pk text, c int ASC, s int static, v blob. */
enum { COL_PK, COL_C, COL_S, COL_V };

static struct storage_table_meta *make_table(uint8_t compression,
					     uint32_t chunk)
{
	uint8_t id[16] = {0xab, 1};
	struct storage_table_meta *t = storage_table_meta_new("ks", "t", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type tb = {.kind = STORAGE_TYPE_BLOB};
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "s", STORAGE_COLUMN_STATIC, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &tb,
				      false);
	t->options.compression = compression;
	t->options.chunk_length = chunk;
	return t;
}

/* The engine over table ks.t (tests/unit/storage_fixture.h). */
static void fx_init(struct storage_fx *f, const char *tag, int sync_mode,
		    uint8_t compression, uint32_t chunk)
{
	storage_fx_prepare(f, tag);
	fault_env_set_wall_us(f->fe, 1700000000LL * 1000000);
	f->o.commitlog_sync = sync_mode;
	f->o.commitlog_sync_group_window_ms = 1;
	f->o.commitlog_segment_size = 256 * 1024;
	f->t = make_table(compression, chunk);
	storage_fx_open(f);
}

static int64_t now_sec(struct storage_fx *f)
{
	return env_wall_us(f->env) / 1000000;
}

static void put(struct storage_fx *f, const char *key, int c, const char *v,
		int32_t ttl)
{
	struct storage_mutation *m =
		storage_mutation_new(f->t, (const uint8_t *)key, strlen(key));
	uint8_t cb[4];
	be32_store(cb, (uint32_t)c);
	struct slice ck = slice_make(cb, 4);
	ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	ck_assert_int_eq(storage_mutation_put_marker(m, f->ts, ttl, now_sec(f)),
			 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0,
					      (const uint8_t *)v, strlen(v),
					      f->ts, ttl, now_sec(f)),
			 0);
	f->ts++;
	if (storage_apply_sync(f->db, m))
		ck_abort_msg("apply: %s", err_msg());
	storage_mutation_delete(m);
}

static void del_row(struct storage_fx *f, const char *key, int c)
{
	struct storage_mutation *m =
		storage_mutation_new(f->t, (const uint8_t *)key, strlen(key));
	uint8_t cb[4];
	be32_store(cb, (uint32_t)c);
	struct slice ck = slice_make(cb, 4);
	storage_mutation_set_row(m, &ck, 1);
	storage_mutation_delete_row(m, f->ts++, now_sec(f));
	ck_assert_int_eq(storage_apply_sync(f->db, m), 0);
	storage_mutation_delete(m);
}

static struct storage_result *get(struct storage_fx *f, const char *key,
				  const struct storage_read_cmd *base)
{
	struct storage_read_cmd cmd = {0};
	if (base)
		cmd = *base;
	cmd.key = (const uint8_t *)key;
	cmd.key_len = strlen(key);
	struct storage_result *r;
	if (storage_read(f->db, f->t->id, &cmd, &r))
		ck_abort_msg("read: %s", err_msg());
	return r;
}

/* Partition `key` reads back with `rows` rows. */
static void expect_rows(struct storage_fx *f, const char *key, size_t rows)
{
	struct storage_result *r = get(f, key, NULL);
	ck_assert_msg(r->row_count == rows, "%s: %zu rows, not %zu", key,
		      r->row_count, rows);
	storage_result_delete(r);
}

static int row_c(const struct storage_row_view *r)
{
	return (int)be32_load(r->clustering[0].ptr);
}

static void check_value(const struct storage_row_view *r, const char *v)
{
	ck_assert_uint_eq(r->cell_count, 1);
	ck_assert_uint_eq(r->cells[0].value.len, strlen(v));
	ck_assert_int_eq(memcmp(r->cells[0].value.ptr, v, strlen(v)), 0);
}

START_TEST(reads_merge_memtable_and_sstables)
{
	static const uint8_t comps[] = {STORAGE_COMPRESSION_NONE,
					STORAGE_COMPRESSION_LZ4,
					STORAGE_COMPRESSION_DEFLATE};
	struct storage_fx f;
	fx_init(&f, "eng-merge", CONF_COMMITLOG_SYNC_PERIODIC, comps[_i], 512);
	char v[64];
	for (int c = 0; c < 300; c++) {
		snprintf(v, sizeof(v), "value-%d-aaaaaaaaaaaaaaaaaaaa", c);
		put(&f, "wide", c, v, 0);
	}
	put(&f, "other", 1, "x", 0);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	/* overwrite some, delete some, in the memtable */
	put(&f, "wide", 10, "new10", 0);
	del_row(&f, "wide", 11);
	struct storage_result *r = get(&f, "wide", NULL);
	ck_assert_uint_eq(r->row_count, 299);
	ck_assert_int_eq(row_c(&r->rows[10]), 10);
	check_value(&r->rows[10], "new10");
	ck_assert_int_eq(row_c(&r->rows[11]), 12);
	storage_result_delete(r);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);

	/* a slice deep inside the wide partition (row index), reversed */
	uint8_t a[4], b[4];
	be32_store(a, 250);
	be32_store(b, 260);
	struct slice sa = slice_make(a, 4), sb = slice_make(b, 4);
	struct storage_slice sl = {&sa, 1, true, &sb, 1, false};
	struct storage_read_cmd cmd = {
		.slices = &sl, .slice_count = 1, .reverse = true, .limit = 4};
	r = get(&f, "wide", &cmd);
	ck_assert_uint_eq(r->row_count, 4);
	ck_assert_int_eq(row_c(&r->rows[0]), 259);
	ck_assert_int_eq(row_c(&r->rows[3]), 256);
	snprintf(v, sizeof(v), "value-%d-aaaaaaaaaaaaaaaaaaaa", 259);
	check_value(&r->rows[0], v);
	storage_result_delete(r);

	struct storage_stats st;
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_eq(st.sstable_count, 2);
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_eq(st.sstable_count, 1);
	r = get(&f, "wide", NULL);
	ck_assert_uint_eq(r->row_count, 299);
	check_value(&r->rows[10], "new10");
	storage_result_delete(r);
	r = get(&f, "nope", NULL);
	ck_assert_uint_eq(r->row_count, 0);
	storage_result_delete(r);
	storage_fx_free(&f);
}
END_TEST

START_TEST(restart_replays_the_commitlog)
{
	struct storage_fx f;
	fx_init(&f, "eng-replay", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 16384);
	char key[32];
	for (int i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put(&f, key, i, "v", 0);
		if (i == 200)
			ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	}
	storage_fx_restart(
		&f); /* no drain: the memtable comes back from the log */
	struct storage_stats st;
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_eq(st.commitlog_replayed, 299);
	for (int i = 0; i < 500; i += 7) {
		snprintf(key, sizeof(key), "k%d", i);
		struct storage_result *r = get(&f, key, NULL);
		ck_assert_uint_eq(r->row_count, 1);
		ck_assert_int_eq(row_c(&r->rows[0]), i);
		storage_result_delete(r);
	}
	/* replayed segments were flushed and discarded */
	storage_fx_restart(&f);
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_eq(st.commitlog_replayed, 0);
	storage_fx_free(&f);
}
END_TEST

static int cmp_tok(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

START_TEST(range_scan_in_token_order)
{
	struct storage_fx f;
	fx_init(&f, "eng-scan", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 1024);
	char key[32];
	int64_t toks[300];
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "p%d", i);
		toks[i] = murmur3_token((const uint8_t *)key, strlen(key));
		put(&f, key, 1, "v", 0);
		if (i % 100 == 99)
			ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	}
	del_row(&f, "p5", 1); /* deleted: not returned */
	qsort(toks, 300, sizeof(*toks), cmp_tok);
	struct storage_read_cmd cmd = {0};
	struct storage_scan *s =
		storage_scan_open(f.db, f.t->id, INT64_MIN, INT64_MIN, &cmd);
	ck_assert_ptr_nonnull(s);
	struct storage_result *r;
	size_t n = 0;
	int64_t prev = INT64_MIN;
	while (storage_scan_next(s, &r) == 1) {
		ck_assert_int_ge(r->token, prev);
		prev = r->token;
		ck_assert_uint_eq(r->row_count, 1);
		n++;
		storage_result_delete(r);
	}
	storage_scan_close(s);
	ck_assert_uint_eq(n, 299);
	/* (toks[99], toks[199]] holds exactly 100 partitions minus p5 if in */
	s = storage_scan_open(f.db, f.t->id, toks[99], toks[199], &cmd);
	n = 0;
	while (storage_scan_next(s, &r) == 1) {
		ck_assert_int_gt(r->token, toks[99]);
		ck_assert_int_le(r->token, toks[199]);
		n++;
		storage_result_delete(r);
	}
	storage_scan_close(s);
	int64_t t5 = murmur3_token((const uint8_t *)"p5", 2);
	ck_assert_uint_eq(n, 100 - (t5 > toks[99] && t5 <= toks[199]));
	storage_fx_free(&f);
}
END_TEST

START_TEST(cleanup_keeps_only_the_partitions_of_its_ranges)
{
	struct storage_fx f;
	fx_init(&f, "eng-cleanup", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 1024);
	char key[32];
	int64_t toks[300];
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "p%d", i);
		toks[i] = murmur3_token((const uint8_t *)key, strlen(key));
		put(&f, key, 1, "v", 0);
		if (i == 149)
			ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	}
	int64_t sorted[300];
	memcpy(sorted, toks, sizeof(toks));
	qsort(sorted, 300, sizeof(*sorted), cmp_tok);
	/* two ranges: (s[9], s[59]] and (s[199], MAX]: 50 + 100 partitions;
	 * half of the rows are still in the memtable, flushed first */
	struct storage_token_range keep[] = {{sorted[9], sorted[59]},
					     {sorted[199], INT64_MAX}};
	uint64_t dropped = 0;
	ck_assert_int_eq(storage_cleanup(f.db, f.t->id, keep, 2, &dropped), 0);
	ck_assert_uint_eq(dropped, 150);
	struct storage_stats st;
	ck_assert_int_eq(storage_stats(f.db, f.t->id, &st), 0);
	ck_assert_uint_eq(st.sstable_count, 1);
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "p%d", i);
		bool in = (toks[i] > sorted[9] && toks[i] <= sorted[59]) ||
			  toks[i] > sorted[199];
		expect_rows(&f, key, in ? 1 : 0);
	}
	/* and after a restart */
	storage_fx_restart(&f);
	expect_rows(&f, "p0",
		    (toks[0] > sorted[9] && toks[0] <= sorted[59]) ||
				    toks[0] > sorted[199]
			    ? 1
			    : 0);
	/* owning nothing drops everything */
	ck_assert_int_eq(storage_cleanup(f.db, f.t->id, NULL, 0, &dropped), 0);
	ck_assert_uint_eq(dropped, 150);
	for (int i = 0; i < 300; i += 7) {
		snprintf(key, sizeof(key), "p%d", i);
		expect_rows(&f, key, 0);
	}
	storage_fx_free(&f);
}
END_TEST

START_TEST(compaction_purges_old_tombstones_and_expired_cells)
{
	struct storage_fx f;
	fx_init(&f, "eng-purge", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 16384);
	f.t->options.gc_grace_seconds = 100;
	storage_fx_restart(&f); /* the engine copies the meta */
	for (int c = 0; c < 10; c++)
		put(&f, "p", c, "v", 0);
	put(&f, "p", 20, "short", 5); /* expires in 5 s */
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	for (int c = 0; c < 5; c++)
		del_row(&f, "p", c);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	struct storage_result *r = get(&f, "p", NULL);
	ck_assert_uint_eq(r->row_count, 6);
	storage_result_delete(r);

	/* within gc_grace: tombstones stay */
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	r = get(&f, "p", NULL);
	ck_assert_uint_eq(r->row_count, 6);
	ck_assert_uint_ge(r->tombstones, 5);
	storage_result_delete(r);

	/* past gc_grace: purged, data stays deleted, expired cell gone */
	fault_env_set_wall_us(f.fe, (1700000000LL + 1000) * 1000000);
	put(&f, "q", 1, "x", 0); /* a second sstable to compact with */
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	r = get(&f, "p", NULL);
	ck_assert_uint_eq(r->row_count, 5);
	ck_assert_uint_eq(r->tombstones, 0);
	ck_assert_int_eq(row_c(&r->rows[0]), 5);
	storage_result_delete(r);
	storage_fx_free(&f);
}
END_TEST

START_TEST(ttl_expires_against_the_env_clock)
{
	struct storage_fx f;
	fx_init(&f, "eng-ttl", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 16384);
	put(&f, "p", 1, "a", 10);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	put(&f, "p", 2, "b", 20);
	struct storage_result *r = get(&f, "p", NULL);
	ck_assert_uint_eq(r->row_count, 2);
	ck_assert_int_eq(r->rows[0].cells[0].ttl, 10);
	storage_result_delete(r);
	fault_env_set_wall_us(f.fe, (1700000000LL + 10) * 1000000);
	r = get(&f, "p", NULL);
	ck_assert_uint_eq(r->row_count, 1);
	ck_assert_int_eq(row_c(&r->rows[0]), 2);
	storage_result_delete(r);
	fault_env_set_wall_us(f.fe, (1700000000LL + 20) * 1000000);
	r = get(&f, "p", NULL);
	ck_assert_uint_eq(r->row_count, 0);
	storage_result_delete(r);
	storage_fx_free(&f);
}
END_TEST

START_TEST(tombstone_failure_threshold_fails_the_read)
{
	struct storage_fx f;
	fx_init(&f, "eng-tomb", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 16384);
	f.o.tombstone_failure_threshold = 50;
	storage_fx_restart(&f);
	for (int c = 0; c < 60; c++)
		del_row(&f, "p", c);
	struct storage_read_cmd cmd = {.key = (const uint8_t *)"p",
				       .key_len = 1};
	struct storage_result *r;
	ck_assert_int_eq(storage_read(f.db, f.t->id, &cmd, &r), -1);
	ck_assert_int_eq(err_code(), ERR_TOMBSTONES);
	ck_assert_ptr_nonnull(strstr(err_msg(), "tombstone_failure_threshold"));
	/* the replica's read (a fragment) fails the same way */
	struct storage_mutation *m;
	ck_assert_int_eq(storage_read_fragment(f.db, f.t->id, &cmd, &m), -1);
	ck_assert_int_eq(err_code(), ERR_TOMBSTONES);
	ck_assert_str_eq(err_code_name(err_code()), "READ_TOO_MANY_TOMBSTONES");
	struct storage_stats st;
	ck_assert_int_eq(storage_stats(f.db, f.t->id, &st), 0);
	ck_assert_uint_eq(st.tombstone_failures, 2);
	/* under the threshold: read, and its tombstones counted */
	f.o.tombstone_failure_threshold = 60;
	storage_fx_restart(&f);
	ck_assert_int_eq(storage_read_fragment(f.db, f.t->id, &cmd, &m), 0);
	ck_assert_uint_eq(storage_mutation_tombstones(m, now_sec(&f)), 60);
	storage_mutation_delete(m);
	/* 60 > the default warning threshold? no (1000): lower it */
	f.o.tombstone_warn_threshold = 59;
	storage_fx_restart(&f);
	ck_assert_int_eq(storage_read_fragment(f.db, f.t->id, &cmd, &m), 0);
	storage_mutation_delete(m);
	ck_assert_int_eq(storage_stats(f.db, f.t->id, &st), 0);
	ck_assert_uint_eq(st.tombstone_warnings, 1);
	ck_assert_uint_eq(st.tombstone_failures, 0);
	storage_fx_free(&f);
}
END_TEST

START_TEST(enospc_stops_writes_keeps_reads_and_loses_nothing)
{
	struct storage_fx f;
	fx_init(&f, "eng-enospc", CONF_COMMITLOG_SYNC_BATCH,
		STORAGE_COMPRESSION_LZ4, 16384);
	char key[32];
	for (int i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put(&f, key, i, "acked", 0);
	}
	fault_env_fail_writes(f.fe, "Data.db", ENOSPC);
	ck_assert_int_eq(storage_flush(f.db, NULL), -1);
	ck_assert_int_eq(err_code(), ERR_NOSPACE);
	/* new writes fail with a clear error */
	struct storage_mutation *m =
		storage_mutation_new(f.t, (const uint8_t *)"late", 4);
	storage_mutation_put(m, COL_V, NULL, 0, (const uint8_t *)"x", 1, f.ts,
			     0, now_sec(&f));
	ck_assert_int_eq(storage_apply_sync(f.db, m), -1);
	ck_assert_ptr_nonnull(strstr(err_msg(), "writes stopped"));
	ck_assert_ptr_nonnull(strstr(err_msg(), "No space left"));
	storage_mutation_delete(m);
	/* reads keep working */
	struct storage_result *r = get(&f, "k7", NULL);
	ck_assert_uint_eq(r->row_count, 1);
	storage_result_delete(r);
	struct storage_stats st;
	storage_stats(f.db, NULL, &st);
	ck_assert(st.writes_stopped);
	/* space comes back; after a restart nothing acknowledged is lost */
	fault_env_fail_writes(f.fe, NULL, 0);
	storage_fx_restart(&f);
	for (int i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		r = get(&f, key, NULL);
		ck_assert_uint_eq(r->row_count, 1);
		check_value(&r->rows[0], "acked");
		storage_result_delete(r);
	}
	put(&f, "after", 1, "ok", 0);
	storage_fx_free(&f);
}
END_TEST

/* A disk too slow for the writes (every sync takes 300 ms here): once the
 * memtables, the queued ones too, fill memtable_heap_space, writes are
 * refused with ERR_OVERLOADED instead of piling up in memory until the
 * process dies. When the flushes catch up they are taken again, and every
 * acknowledged write is there. */
/* One row (c = 1) of `v` under `key` in table `t`; the rc of
 * storage_apply_sync. */
static struct storage_mutation *blob_row(struct storage_fx *f,
					 const struct storage_table_meta *t,
					 const char *key, const char *v)
{
	struct storage_mutation *m =
		storage_mutation_new(t, (const uint8_t *)key, strlen(key));
	uint8_t cb[4];
	be32_store(cb, 1);
	struct slice ck = slice_make(cb, 4);
	ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0,
					      (const uint8_t *)v, strlen(v),
					      f->ts++, 0, now_sec(f)),
			 0);
	return m;
}

static int blob_write(struct storage_fx *f, const struct storage_table_meta *t,
		      const char *key, const char *v)
{
	struct storage_mutation *m = blob_row(f, t, key, v);
	int rc = storage_apply_sync(f->db, m);
	storage_mutation_delete(m);
	return rc;
}

struct posted {
	pthread_mutex_t mu;
	int posts, acks, errors;
};

static void on_ack(void *arg, int status, enum err_code code)
{
	struct posted *p = arg;
	(void)code;
	pthread_mutex_lock(&p->mu);
	if (status == 0)
		p->acks++;
	else
		p->errors++;
	pthread_mutex_unlock(&p->mu);
}

/* The caller's "loop": here it just runs the completion at once, counting
 * that it went through the hook. */
static void post_hook(void *post_arg, storage_done_fn fn, void *arg, int status,
		      enum err_code code)
{
	struct posted *p = post_arg;
	pthread_mutex_lock(&p->mu);
	p->posts++;
	pthread_mutex_unlock(&p->mu);
	fn(arg, status, code);
}

/* A periodic-sync engine with its own memtable limits. */
static void fx_init_memtables(struct storage_fx *f, const char *tag,
			      uint64_t heap, double threshold)
{
	fx_init(f, tag, CONF_COMMITLOG_SYNC_PERIODIC, STORAGE_COMPRESSION_LZ4,
		16384);
	storage_delete(f->db);
	f->o.memtable_heap_space = heap;
	f->o.memtable_cleanup_threshold = threshold;
	storage_fx_open(f);
}

/* 1023 'x' characters. */
static const char *kib_value(void)
{
	static char v[1024];
	memset(v, 'x', sizeof(v) - 1);
	return v;
}

static int posted_count(struct posted *p, const int *field)
{
	pthread_mutex_lock(&p->mu);
	int n = *field;
	pthread_mutex_unlock(&p->mu);
	return n;
}

/* Waits (with a ceiling against a hang) until `field` reaches n. */
static void await_posted(struct posted *p, const int *field, int n)
{
	for (int spin = 0; spin < 60000 && posted_count(p, field) < n; spin++)
		usleep(1000);
	ck_assert_int_ge(posted_count(p, field), n);
}

/* A memtable_heap_space of 1 MiB and the post hook. */
static void fx_init_small_heap(struct storage_fx *f, struct posted *p,
			       const char *tag, uint64_t write_wait_ms)
{
	pthread_mutex_init(&p->mu, NULL);
	fx_init_memtables(f, tag, 1 << 20, 0.25);
	f->o.post = post_hook;
	f->o.post_arg = p;
	f->o.write_wait_ms = write_wait_ms;
	storage_fx_restart(f);
}

/* A slow disk: writes outrun the flushes and find memtable_heap_space
 * full. They wait for room, as Cassandra's do, instead of failing (before,
 * they were refused, which a client sees as a failed write) or growing
 * memory without bound (before that). Every write is acknowledged and
 * readable. */
START_TEST(writes_wait_while_memtables_fill_the_heap_space)
{
	enum { N = 3000 }; /* 3 MiB of 1 KiB values in 1 MiB */
	struct storage_fx f;
	struct posted p = {.posts = 0};
	fx_init_small_heap(&f, &p, "eng-full", 60000);
	fault_env_set_sync_delay_us(f.fe, 20000);
	char key[32];
	const char *v = kib_value();
	uint64_t most_waiting = 0;
	struct storage_stats st;
	for (int i = 0; i < N; i++) {
		/* clients with 64 writes in flight */
		await_posted(&p, &p.acks, i > 64 ? i - 64 : 0);
		snprintf(key, sizeof(key), "k%d", i);
		struct storage_mutation *m = blob_row(&f, f.t, key, v);
		ck_assert_msg(storage_apply(f.db, m, on_ack, &p) == 0, "%s",
			      err_msg());
		storage_mutation_delete(m);
		storage_stats(f.db, NULL, &st);
		if (st.writes_waiting > most_waiting)
			most_waiting = st.writes_waiting;
	}
	ck_assert_uint_gt(most_waiting, 0);
	/* a write without an acknowledgement to wait for is refused */
	ck_assert_int_eq(blob_write(&f, f.t, "sync", v), -1);
	ck_assert_int_eq(err_code(), ERR_OVERLOADED);
	ck_assert_ptr_nonnull(strstr(err_msg(), "wait for room"));
	await_posted(&p, &p.acks, N);
	ck_assert_int_eq(p.errors, 0);
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_eq(st.writes_waiting, 0);
	ck_assert_uint_gt(st.writes_waited, 0);
	ck_assert_uint_eq(st.writes_refused, 1);
	fault_env_set_sync_delay_us(f.fe, 0);
	for (int i = 0; i < N; i += 97) {
		snprintf(key, sizeof(key), "k%d", i);
		expect_rows(&f, key, 1);
	}
	storage_fx_free(&f);
}
END_TEST

/* A stalled disk: the waiting writes hold at most a quarter of
 * memtable_heap_space (more are refused at once), and one that waited
 * write_wait_ms fails (its coordinator answered a timeout by then), when
 * the next write comes or a flush ends; once the disk is back, writes are
 * taken again and nothing acknowledged is lost. */
START_TEST(waiting_writes_are_bounded_and_time_out)
{
	struct storage_fx f;
	struct posted p = {.posts = 0};
	fx_init_small_heap(&f, &p, "eng-stall", 100);
	fault_env_set_sync_delay_us(f.fe, 1500000);
	char key[32];
	const char *v = kib_value();
	int applied = 0;
	for (;; applied++) {
		ck_assert_int_lt(applied, 100000);
		snprintf(key, sizeof(key), "k%d", applied);
		struct storage_mutation *m = blob_row(&f, f.t, key, v);
		int rc = storage_apply(f.db, m, on_ack, &p);
		storage_mutation_delete(m);
		if (rc) {
			ck_assert_int_eq(err_code(), ERR_OVERLOADED);
			break;
		}
	}
	struct storage_stats st;
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_gt(st.writes_waiting, 200); /* 256 KiB of them */
	ck_assert_uint_lt(st.writes_waiting, 260);
	uint64_t waiting = st.writes_waiting;
	usleep(150000);
	/* the next write finds them expired, and waits in their place */
	struct storage_mutation *m = blob_row(&f, f.t, "late", v);
	ck_assert_int_eq(storage_apply(f.db, m, on_ack, &p), 0);
	storage_mutation_delete(m);
	ck_assert_int_eq(posted_count(&p, &p.errors), (int)waiting);
	/* the disk comes back: "late" has waited too long by then too */
	fault_env_set_sync_delay_us(f.fe, 0);
	await_posted(&p, &p.errors, (int)waiting + 1);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	ck_assert_int_eq(posted_count(&p, &p.acks), applied - (int)waiting);
	ck_assert_int_eq(blob_write(&f, f.t, "after", v), 0);
	expect_rows(&f, "k0", 1);
	expect_rows(&f, "after", 1);
	storage_fx_free(&f);
}
END_TEST

/* Many tables, none large: if maybe_flush always skipped memtables below
 * an eighth of the cleanup level (2 MiB here), twelve memtables of 1.7 MiB
 * would fill memtable_heap_space with nothing to flush them, and writes
 * would be refused for good. With no flush queued it takes the largest
 * however small, refused writes included, and writes are taken again. */
START_TEST(memtables_of_many_small_tables_are_flushed_when_full)
{
	enum { TABLES = 12, ROWS = 1500 };
	struct storage_fx f;
	fx_init_memtables(&f, "eng-many", 16 << 20, 1.0);
	struct storage_table_meta *t[TABLES] = {f.t};
	for (int i = 1; i < TABLES; i++) {
		t[i] = make_table(STORAGE_COMPRESSION_LZ4, 16384);
		t[i]->id[2] = (uint8_t)i;
		ck_assert_int_eq(storage_table_add(f.db, t[i], true), 0);
	}
	char key[32];
	const char *v = kib_value();
	int refused = 0;
	for (int i = 0; i < TABLES * ROWS; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		if (blob_write(&f, t[i % TABLES], key, v) == 0)
			continue;
		ck_assert_int_eq(err_code(), ERR_OVERLOADED);
		refused++;
		/* the refusal queued a flush: the write goes in once it is
		 * done (the ceiling only guards against a hang) */
		int tries = 0;
		while (blob_write(&f, t[i % TABLES], key, v) != 0) {
			ck_assert_int_eq(err_code(), ERR_OVERLOADED);
			ck_assert_int_lt(++tries, 30000);
			usleep(1000);
		}
	}
	ck_assert_int_gt(refused, 0);
	storage_fx_free(&f);
	for (int i = 1; i < TABLES; i++)
		storage_table_meta_delete(t[i]);
}
END_TEST

/* The value of row `i` of the refusal test: its number, padded to 1 KiB. */
static const char *numbered_value(int i, char *buf, size_t cap)
{
	memset(buf, 'y', cap - 1);
	buf[cap - 1] = 0;
	int n = snprintf(buf, cap, "v%d:", i);
	buf[n] = 'y';
	return buf;
}

/* A writer without acknowledgements (storage_bench's fillrandom: one
 * thread, storage_apply with no `done`) outruns a slow disk. A write
 * refused because the memtables are full applies nothing (not in memory,
 * not in the commitlog: one refused write never retried is absent after
 * a restart too); the writer waits for room (storage_wait_for_room) and
 * writes it again, and in the end every write reads back once with its
 * own value, before and after a restart replays the commitlog. */
START_TEST(
	a_write_refused_for_full_memtables_applies_nothing_and_a_retry_loses_nothing)
{
	enum { N = 3000 }; /* 3 MiB of 1 KiB values in 1 MiB */
	struct storage_fx f;
	fx_init_memtables(&f, "eng-refused", 1 << 20, 0.25);
	fault_env_set_sync_delay_us(f.fe, 20000);
	char key[32], v[1024];
	int refused = 0;
	bool dropped_one = false;
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		struct storage_mutation *m =
			blob_row(&f, f.t, key, numbered_value(i, v, sizeof(v)));
		while (storage_apply(f.db, m, NULL, NULL) != 0) {
			ck_assert_int_eq(err_code(), ERR_OVERLOADED);
			ck_assert_ptr_nonnull(
				strstr(err_msg(), "memtables are full"));
			refused++;
			expect_rows(&f, key, 0); /* nothing of it applied */
			if (!dropped_one) { /* this one is not written again */
				dropped_one = true;
				snprintf(key, sizeof(key), "refused");
				storage_mutation_delete(m);
				m = blob_row(&f, f.t, key, "never");
				ck_assert_int_eq(
					storage_apply(f.db, m, NULL, NULL), -1);
				storage_mutation_delete(m);
				snprintf(key, sizeof(key), "k%d", i);
				m = blob_row(&f, f.t, key,
					     numbered_value(i, v, sizeof(v)));
			}
			ck_assert_int_eq(storage_wait_for_room(f.db, 60000), 0);
		}
		storage_mutation_delete(m);
	}
	ck_assert_int_gt(refused, 0);
	struct storage_stats st;
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_eq(st.writes_refused, (uint64_t)refused + 1);
	fault_env_set_sync_delay_us(f.fe, 0);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			struct storage_result *r = get(&f, key, NULL);
			ck_assert_msg(r->row_count == 1, "%s: %zu rows", key,
				      r->row_count);
			check_value(&r->rows[0],
				    numbered_value(i, v, sizeof(v)));
			storage_result_delete(r);
		}
		expect_rows(&f, "refused", 0);
		storage_fx_restart(
			&f); /* no flush: the commitlog replays the rest */
	}
	storage_fx_free(&f);
}
END_TEST

/* storage_wait_for_room answers at once when there is room, and with the
 * stop's error when writes stopped rather than waiting for ever. */
START_TEST(waiting_for_room_ends_when_writes_stop)
{
	struct storage_fx f;
	fx_init_memtables(&f, "eng-room", 1 << 20, 0.25);
	ck_assert_int_eq(storage_wait_for_room(f.db, 1000), 0);
	fault_env_fail_writes(f.fe, "Data.db", ENOSPC);
	char key[32];
	const char *v = kib_value();
	int i = 0;
	for (; i < 100000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		if (blob_write(&f, f.t, key, v) != 0)
			break;
	}
	ck_assert_int_lt(i, 100000);
	/* refused because the memtables are full (the failing flush still
	 * runs) or because writes stopped: either way the wait ends with
	 * the stop, as the failed flush leaves its memtable full */
	ck_assert_int_eq(storage_wait_for_room(f.db, 60000), -1);
	ck_assert_int_eq(err_code(), ERR_NOSPACE);
	ck_assert_ptr_nonnull(strstr(err_msg(), "writes stopped"));
	fault_env_fail_writes(f.fe, NULL, 0);
	storage_fx_free(&f);
}
END_TEST

START_TEST(block_cache_evicts_lru_and_keeps_held_blocks)
{
	struct block_cache *c = storage_block_cache_new(400);
	uint64_t f = storage_block_cache_file_id();
	struct cached_block *held = NULL;
	for (uint64_t i = 0; i < 10; i++) {
		uint8_t *d = malloc(100);
		memset(d, (int)i, 100);
		struct cached_block *b = storage_block_cache_put(
			c, f, i * 100, d, 100, i * 100 + 100);
		ck_assert_ptr_nonnull(b);
		if (i == 0)
			held = b; /* evicted later but still readable */
		else
			storage_block_cache_release(b);
		ck_assert_uint_le(storage_block_cache_bytes(c), 400);
	}
	ck_assert_ptr_null(storage_block_cache_get(c, f, 0));
	ck_assert_uint_eq(held->data[99], 0);
	storage_block_cache_release(held);
	struct cached_block *b = storage_block_cache_get(c, f, 900);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(b->data[0], 9);
	ck_assert_uint_eq(b->next_off, 1000);
	storage_block_cache_release(b);
	/* a used block survives newer insertions */
	b = storage_block_cache_get(c, f, 600);
	ck_assert_ptr_nonnull(b);
	storage_block_cache_release(b);
	uint8_t *d = malloc(100);
	storage_block_cache_release(
		storage_block_cache_put(c, f, 5000, d, 100, 0));
	ck_assert_ptr_nonnull(b = storage_block_cache_get(c, f, 600));
	storage_block_cache_release(b);
	ck_assert_ptr_null(storage_block_cache_get(c, f, 700));
	storage_block_cache_delete(c);
}
END_TEST

/* The miss path reuses evicted blocks' buffers: a block a reader still
 * holds when it is evicted must never be handed out again. */
static struct cached_block *fill_block(struct block_cache *c, uint64_t f,
				       uint64_t off, uint8_t v)
{
	struct cached_block *b = storage_block_cache_alloc(c);
	ck_assert_ptr_nonnull(b);
	if (b->cap < 100) {
		free(b->owned);
		b->owned = malloc(100);
		b->cap = 100;
	}
	memset(b->owned, v, 100);
	return storage_block_cache_insert(c, b, f, off, b->owned, 100,
					  off + 100);
}

START_TEST(block_cache_recycles_only_unheld_blocks)
{
	struct block_cache *c = storage_block_cache_new(400);
	uint64_t f = storage_block_cache_file_id();
	struct cached_block *held = fill_block(c, f, 0, 0xaa);
	for (uint64_t i = 1; i < 200; i++) {
		struct cached_block *b = fill_block(c, f, i * 100, (uint8_t)i);
		ck_assert_uint_eq(b->data[0], (uint8_t)i);
		storage_block_cache_release(b);
		ck_assert_uint_le(storage_block_cache_bytes(c), 400);
	}
	for (int i = 0; i < 100; i++)
		ck_assert_uint_eq(held->data[i], 0xaa);
	ck_assert_ptr_null(storage_block_cache_get(c, f, 0));
	storage_block_cache_release(held);
	struct cached_block *b = storage_block_cache_get(c, f, 199 * 100);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(b->data[99], 199);
	storage_block_cache_release(b);
	storage_block_cache_delete(c);
}
END_TEST

/* Row `i` of partition "k", value "v". */
static struct storage_mutation *row(struct storage_fx *f, int i)
{
	struct storage_mutation *m =
		storage_mutation_new(f->t, (const uint8_t *)"k", 1);
	uint8_t cb[4];
	be32_store(cb, (uint32_t)i);
	struct slice ck = slice_make(cb, 4);
	storage_mutation_set_row(m, &ck, 1);
	storage_mutation_put(m, COL_V, NULL, 0, (const uint8_t *)"v", 1,
			     f->ts++, 0, now_sec(f));
	return m;
}

START_TEST(batch_acks_go_through_the_post_hook)
{
	struct storage_fx f;
	struct posted p = {.posts = 0};
	pthread_mutex_init(&p.mu, NULL);
	fx_init(&f, "eng-post", CONF_COMMITLOG_SYNC_BATCH,
		STORAGE_COMPRESSION_LZ4, 16384);
	f.o.post = post_hook;
	f.o.post_arg = &p;
	storage_fx_restart(&f);
	for (int i = 0; i < 20; i++) {
		struct storage_mutation *m = row(&f, i);
		ck_assert_int_eq(storage_apply(f.db, m, on_ack, &p), 0);
		storage_mutation_delete(m);
	}
	ck_assert_int_eq(storage_drain(f.db), 0);
	for (int spin = 0; spin < 5000; spin++) {
		pthread_mutex_lock(&p.mu);
		int acks = p.acks;
		pthread_mutex_unlock(&p.mu);
		if (acks == 20)
			break;
		usleep(1000);
	}
	ck_assert_int_eq(p.acks, 20);
	ck_assert_int_eq(p.posts, 20);
	ck_assert_int_eq(p.errors, 0);
	storage_fx_free(&f);
}
END_TEST

/* periodic, storage_apply_deferred: the write is readable at once, its
 * acknowledgement waits for storage_write_deferred (one write(2) for all),
 * and what was acknowledged is there after a restart. A failing write
 * fails every acknowledgement it covered and stops writes. */
START_TEST(deferred_applies_ack_after_the_turns_write)
{
	struct storage_fx f;
	struct posted p = {.posts = 0};
	pthread_mutex_init(&p.mu, NULL);
	fx_init(&f, "eng-deferred", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 16384);
	for (int i = 0; i < 30; i++) {
		struct storage_mutation *m = row(&f, i);
		ck_assert_int_eq(storage_apply_deferred(f.db, m, on_ack, &p),
				 0);
		storage_mutation_delete(m);
	}
	ck_assert_int_eq(p.acks, 0);
	struct storage_result *r = get(&f, "k", NULL);
	ck_assert_uint_eq(r->row_count, 30); /* in the memtable already */
	storage_result_delete(r);
	storage_write_deferred(f.db);
	ck_assert_int_eq(p.acks, 30);
	storage_write_deferred(f.db); /* nothing pending: no callback */
	ck_assert_int_eq(p.acks, 30);
	storage_fx_restart(&f); /* the commitlog replays all 30 */
	r = get(&f, "k", NULL);
	ck_assert_uint_eq(r->row_count, 30);
	storage_result_delete(r);

	fault_env_fail_writes(f.fe, "CommitLog", EIO);
	struct storage_mutation *m = row(&f, 99);
	ck_assert_int_eq(storage_apply_deferred(f.db, m, on_ack, &p), 0);
	storage_mutation_delete(m);
	storage_write_deferred(f.db);
	ck_assert_int_eq(p.errors, 1);
	m = row(&f, 100);
	ck_assert_int_eq(storage_apply_deferred(f.db, m, on_ack, &p), -1);
	storage_mutation_delete(m);
	fault_env_fail_writes(f.fe, NULL, 0);
	storage_fx_free(&f);
}
END_TEST

START_TEST(non_durable_keyspaces_skip_the_commitlog)
{
	struct storage_fx f;
	fx_init(&f, "eng-nondurable", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 16384);
	storage_delete(f.db);
	f.db = storage_new(&f.o);
	ck_assert_int_eq(storage_table_add(f.db, f.t, false), 0);
	ck_assert_int_eq(storage_start(f.db), 0);
	put(&f, "flushed", 1, "a", 0);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	put(&f, "unflushed", 1, "b", 0);
	storage_delete(f.db);
	f.db = storage_new(&f.o);
	ck_assert_int_eq(storage_table_add(f.db, f.t, false), 0);
	ck_assert_int_eq(storage_start(f.db), 0);
	expect_rows(&f, "flushed", 1);
	expect_rows(&f, "unflushed", 0); /* never logged: gone, as intended */
	struct storage_stats st;
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_eq(st.commitlog_replayed, 0);
	storage_fx_free(&f);
}
END_TEST

START_TEST(time_window_compaction_merges_old_windows)
{
	struct storage_fx f;
	fx_init(&f, "eng-twcs", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 16384);
	f.t->options.compaction = STORAGE_COMPACTION_TIME_WINDOW;
	f.t->options.compaction_window_seconds = 3600;
	storage_fx_restart(&f);
	/* two SSTables in an old hour, two in the current one */
	int64_t hour = 3600LL * 1000000;
	f.ts = 10 * hour;
	put(&f, "a", 1, "x", 0);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	f.ts = 10 * hour + 5;
	put(&f, "b", 1, "x", 0);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	f.ts = 12 * hour;
	put(&f, "c", 1, "x", 0);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	f.ts = 12 * hour + 5;
	put(&f, "d", 1, "x", 0);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	ck_assert_int_eq(storage_compact(f.db, f.t->id, false), 0);
	struct storage_stats st;
	storage_stats(f.db, NULL, &st);
	/* the old window became one; the current window (2 < min_threshold)
	 * stays as it is */
	ck_assert_uint_eq(st.sstable_count, 3);
	ck_assert_uint_eq(st.compactions, 1);
	const char *keys[] = {"a", "b", "c", "d"};
	for (int i = 0; i < 4; i++)
		expect_rows(&f, keys[i], 1);
	storage_fx_free(&f);
}
END_TEST

/* Single-row tables stop reading SSTables once newer live values are
 * found; the result must be what a full merge gives. */
START_TEST(timestamp_ordered_reads_match_a_full_merge)
{
	struct storage_fx f;
	fx_init(&f, "eng-tsorder", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 16384);
	uint8_t id[16] = {0x77};
	struct storage_table_meta *kv = storage_table_meta_new("ks", "kv", id);
	struct storage_type tb = {.kind = STORAGE_TYPE_BLOB};
	storage_table_meta_add_column(kv, "k", STORAGE_COLUMN_PARTITION_KEY,
				      &tb, false);
	storage_table_meta_add_column(kv, "a", STORAGE_COLUMN_REGULAR, &tb,
				      false);
	storage_table_meta_add_column(kv, "b", STORAGE_COLUMN_REGULAR, &tb,
				      false);
	ck_assert_int_eq(storage_table_add(f.db, kv, true), 0);
	struct {
		int col; /* -1: row deletion */
		int64_t ts;
		const char *v; /* NULL: cell tombstone */
	} steps[] = {
		{1, 10, "a1"}, {2, 10, "b1"},  /* sstable 1 */
		{1, 20, "a2"}, {-1, 15, NULL}, /* sstable 2: b1 deleted */
		{2, 5, "old"},                 /* sstable 3: too old for b */
		{1, 30, NULL},                 /* sstable 4: a deleted */
		{1, 40, "a3"}, {2, 40, "b3"},  /* sstable 5: all new */
	};
	int flush_after[] = {1, 3, 4, 5, 7};
	const char *want_a[] = {"a1", "a2", "a2", NULL, "a3"};
	const char *want_b[] = {"b1", NULL, NULL, NULL, "b3"};
	size_t k = 0;
	for (size_t st = 0; st < 5; st++) {
		for (; k <= (size_t)flush_after[st]; k++) {
			struct storage_mutation *m = storage_mutation_new(
				kv, (const uint8_t *)"key", 3);
			if (steps[k].col < 0)
				storage_mutation_delete_row(m, steps[k].ts,
							    now_sec(&f));
			else if (steps[k].v)
				storage_mutation_put(
					m, steps[k].col, NULL, 0,
					(const uint8_t *)steps[k].v,
					strlen(steps[k].v), steps[k].ts, 0,
					now_sec(&f));
			else
				storage_mutation_delete_cell(
					m, steps[k].col, NULL, 0, steps[k].ts,
					now_sec(&f));
			ck_assert_int_eq(storage_apply_sync(f.db, m), 0);
			storage_mutation_delete(m);
		}
		ck_assert_int_eq(storage_flush(f.db, NULL), 0);
		struct storage_read_cmd cmd = {.key = (const uint8_t *)"key",
					       .key_len = 3};
		struct storage_result *r;
		ck_assert_int_eq(storage_read(f.db, kv->id, &cmd, &r), 0);
		const char *got[3] = {NULL, NULL, NULL};
		for (size_t i = 0; r->row_count && i < r->rows[0].cell_count;
		     i++) {
			const struct storage_cell_view *c =
				&r->rows[0].cells[i];
			static char bufs[3][16];
			snprintf(bufs[c->column], 16, "%.*s", (int)c->value.len,
				 (const char *)c->value.ptr);
			got[c->column] = bufs[c->column];
		}
		ck_assert_msg((want_a[st] == NULL) == (got[1] == NULL) &&
				      (!want_a[st] ||
				       strcmp(want_a[st], got[1]) == 0),
			      "step %zu: a", st);
		ck_assert_msg((want_b[st] == NULL) == (got[2] == NULL) &&
				      (!want_b[st] ||
				       strcmp(want_b[st], got[2]) == 0),
			      "step %zu: b", st);
		storage_result_delete(r);
	}
	storage_table_meta_delete(kv);
	storage_fx_free(&f);
}
END_TEST

static void table_dir_of(struct storage_fx *f, char *out, size_t n)
{
	int k = snprintf(out, n, "%s/ks/t-", f->data);
	for (int i = 0; i < 16; i++)
		k += snprintf(out + k, n - (size_t)k, "%02x", f->t->id[i]);
}

static void shell(const char *cmd)
{
	ck_assert_int_eq(system(cmd), 0);
}

/* A crash between publishing a compaction's output and deleting its
 * inputs: at start the log finishes the job (inputs go). A crash before
 * the output was complete: the partial output goes, the inputs stay. */
START_TEST(compaction_log_finishes_or_rolls_back_after_a_crash)
{
	struct storage_fx f;
	fx_init(&f, "eng-clog", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 16384);
	f.t->options.gc_grace_seconds = 0;
	storage_fx_restart(&f);
	char dir[700], saved[800];
	table_dir_of(&f, dir, sizeof(dir));
	snprintf(saved, sizeof(saved), "%s-saved", f.dir);
	for (int c = 0; c < 5; c++)
		put(&f, "p", c, "v", 0);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0); /* gen 1 */
	del_row(&f, "p", 0);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0); /* gen 2 */
	fault_env_set_wall_us(f.fe, (1700000000LL + 10) * 1000000);
	char cmd[4096];
	ck_assert(snprintf(cmd, sizeof(cmd),
			   "mkdir -p '%s' && cp '%s'/ca-* '%s'/", saved, dir,
			   saved) < (int)sizeof(cmd));
	shell(cmd);
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0); /* gen 3 */
	storage_delete(f.db);
	f.db = NULL;
	/* put the inputs back, as if the crash came before their deletion */
	ck_assert(
		snprintf(
			cmd, sizeof(cmd),
			"cp '%s'/ca-* '%s'/ && "
			"printf '3 1 2' | tr ' ' '\\n' > '%s'/compaction-3.log",
			saved, dir, dir) < (int)sizeof(cmd));
	shell(cmd);
	storage_fx_open(&f);
	struct storage_stats st;
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_eq(st.sstable_count, 1);
	struct storage_result *r = get(&f, "p", NULL);
	ck_assert_uint_eq(r->row_count, 4); /* the purged tombstone stays
					     * effective: no resurrection */
	storage_result_delete(r);
	storage_delete(f.db);
	f.db = NULL;
	/* now a crash before the output was complete: no TOC for gen 9 */
	ck_assert(
		snprintf(
			cmd, sizeof(cmd),
			"rm -f '%s'/ca-* && cp '%s'/ca-* '%s'/ && "
			"cp '%s'/ca-1-Data.db '%s'/ca-9-Data.db && "
			"printf '9 1 2' | tr ' ' '\\n' > '%s'/compaction-9.log",
			dir, saved, dir, dir, dir, dir) < (int)sizeof(cmd));
	shell(cmd);
	storage_fx_open(&f);
	storage_stats(f.db, NULL, &st);
	ck_assert_uint_eq(st.sstable_count, 2);
	r = get(&f, "p", NULL);
	ck_assert_uint_eq(r->row_count, 4);
	storage_result_delete(r);
	char path[800];
	snprintf(path, sizeof(path), "%s/compaction-9.log", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/ca-9-Data.db", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	ck_assert(snprintf(cmd, sizeof(cmd), "rm -rf '%s'", saved) <
		  (int)sizeof(cmd));
	shell(cmd);
	storage_fx_free(&f);
}
END_TEST

struct snaps {
	size_t n;
	char tag[32];
	uint64_t bytes, true_bytes;
};

static void on_snapshot(void *arg, const struct storage_snapshot_info *i)
{
	struct snaps *s = arg;
	s->n++;
	snprintf(s->tag, sizeof(s->tag), "%s", i->tag);
	s->bytes = i->bytes;
	s->true_bytes = i->true_bytes;
}

static struct snaps snapshots(struct storage_fx *f)
{
	struct snaps s = {0};
	ck_assert_int_eq(
		storage_snapshot_list(f->db, f->t->id, on_snapshot, &s), 0);
	return s;
}

START_TEST(snapshots_link_the_sstables_and_outlive_compaction)
{
	struct storage_fx f;
	fx_init(&f, "eng-snap", CONF_COMMITLOG_SYNC_PERIODIC,
		STORAGE_COMPRESSION_LZ4, 1024);
	char key[32];
	for (int i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "p%d", i);
		put(&f, key, 1, "v", 0);
		if (i == 99)
			ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	}
	/* the memtable is flushed first: two SSTables, 6 files each */
	ck_assert_int_eq(storage_snapshot(f.db, f.t->id, "before"), 0);
	char dir[700], cmd[1600];
	table_dir_of(&f, dir, sizeof(dir));
	snprintf(cmd, sizeof(cmd),
		 "test $(ls %s/snapshots/before | wc -l) -eq 12 && "
		 "test $(stat -c %%h %s/snapshots/before/ca-1-Data.db) -eq 2",
		 dir, dir);
	ck_assert_int_eq(system(cmd), 0);
	struct snaps s = snapshots(&f);
	ck_assert_uint_eq(s.n, 1);
	ck_assert_str_eq(s.tag, "before");
	ck_assert_uint_gt(s.bytes, 0);
	ck_assert_uint_eq(s.true_bytes, 0); /* all still live */
	ck_assert_int_eq(storage_snapshot(f.db, f.t->id, "before"), -1);
	ck_assert_int_eq(err_code(), ERR_EXISTS);
	ck_assert_int_eq(storage_snapshot(f.db, f.t->id, "a/b"), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	/* compaction deletes the live files; the snapshot keeps them */
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	s = snapshots(&f);
	ck_assert_uint_eq(s.true_bytes, s.bytes);
	snprintf(cmd, sizeof(cmd),
		 "test $(stat -c %%h %s/snapshots/before/ca-1-Data.db) -eq 1",
		 dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(storage_snapshot_clear(f.db, f.t->id, "other"), 0);
	ck_assert_uint_eq(snapshots(&f).n, 1);
	ck_assert_int_eq(storage_snapshot_clear(f.db, f.t->id, NULL), 0);
	ck_assert_uint_eq(snapshots(&f).n, 0);
	expect_rows(&f, "p150", 1);
	storage_fx_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_engine");
	TCase *tc = tcase_create("engine");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, reads_merge_memtable_and_sstables, 0, 3);
	tcase_add_test(tc, restart_replays_the_commitlog);
	tcase_add_test(tc, range_scan_in_token_order);
	tcase_add_test(tc, cleanup_keeps_only_the_partitions_of_its_ranges);
	tcase_add_test(tc, snapshots_link_the_sstables_and_outlive_compaction);
	tcase_add_test(tc, compaction_purges_old_tombstones_and_expired_cells);
	tcase_add_test(tc, ttl_expires_against_the_env_clock);
	tcase_add_test(tc, tombstone_failure_threshold_fails_the_read);
	tcase_add_test(tc, enospc_stops_writes_keeps_reads_and_loses_nothing);
	tcase_add_test(tc, writes_wait_while_memtables_fill_the_heap_space);
	tcase_add_test(tc, waiting_writes_are_bounded_and_time_out);
	tcase_add_test(tc,
		       memtables_of_many_small_tables_are_flushed_when_full);
	tcase_add_test(
		tc,
		a_write_refused_for_full_memtables_applies_nothing_and_a_retry_loses_nothing);
	tcase_add_test(tc, waiting_for_room_ends_when_writes_stop);
	tcase_add_test(tc, block_cache_evicts_lru_and_keeps_held_blocks);
	tcase_add_test(tc, block_cache_recycles_only_unheld_blocks);
	tcase_add_test(tc, batch_acks_go_through_the_post_hook);
	tcase_add_test(tc, deferred_applies_ack_after_the_turns_write);
	tcase_add_test(tc, non_durable_keyspaces_skip_the_commitlog);
	tcase_add_test(tc, time_window_compaction_merges_old_windows);
	tcase_add_test(tc, timestamp_ordered_reads_match_a_full_merge);
	tcase_add_test(tc, compaction_log_finishes_or_rolls_back_after_a_crash);
	suite_add_tcase(s, tc);
	return test_run(s);
}
