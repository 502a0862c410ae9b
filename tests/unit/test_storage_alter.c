/* storage: tables whose meta evolves (ALTER TABLE ADD / DROP). Data
 * written before an ALTER, in the memtable, in SSTables and in the
 * commitlog, reads correctly after it; a dropped column's cells never come
 * back, except those written after the drop's time, which a column re-added
 * under the name reads as its own (Cassandra's rule), and compaction
 * purges them. */
#include "common/env_real.h"
#include "common/err.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Version 1: pk text, c int, v text. Later versions append columns. */
enum { COL_PK, COL_C, COL_V, COL_W, COL_TAGS, COL_S, COL_V2 };

struct fx {
	struct env *env;
	char dir[512], data[600], log[600];
	struct storage_table_meta *t; /* the newest version */
	struct storage *db;
	struct storage_options o;
};

static const struct storage_type TEXT = {.kind = STORAGE_TYPE_TEXT};
static const struct storage_type INT = {.kind = STORAGE_TYPE_INT};

static struct storage_table_meta *version1(void)
{
	uint8_t id[16] = {0xa1, 7};
	struct storage_table_meta *t = storage_table_meta_new("ks", "t", id);
	ck_assert_ptr_nonnull(t);
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &TEXT, false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, &INT,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &TEXT,
				      false);
	t->options.gc_grace_seconds = 0;
	return t;
}

/* The next version of f->t, made by `edit`, registered with the engine. */
static void evolve(struct fx *f,
		   void (*edit)(struct storage_table_meta *t, int64_t arg),
		   int64_t arg)
{
	struct storage_table_meta *n = storage_table_meta_clone(f->t);
	ck_assert_ptr_nonnull(n);
	edit(n, arg);
	if (storage_table_update(f->db, n))
		ck_abort_msg("update: %s", err_msg());
	storage_table_meta_delete(f->t);
	f->t = n;
}

static void add_w_tags_s(struct storage_table_meta *t, int64_t arg)
{
	(void)arg;
	struct storage_type set = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_SET, false, storage_type_simple(STORAGE_TYPE_INT));
	ck_assert_int_eq(storage_table_meta_add_column(
				 t, "w", STORAGE_COLUMN_REGULAR, &TEXT, false),
			 COL_W);
	ck_assert_int_eq(storage_table_meta_add_column(t, "tags",
						       STORAGE_COLUMN_REGULAR,
						       &set, false),
			 COL_TAGS);
	ck_assert_int_eq(storage_table_meta_add_column(
				 t, "s", STORAGE_COLUMN_STATIC, &INT, false),
			 COL_S);
}

static void drop_v(struct storage_table_meta *t, int64_t at)
{
	t->columns[COL_V].dropped = true;
	t->columns[COL_V].dropped_at = at;
}

static void readd_v(struct storage_table_meta *t, int64_t at)
{
	ck_assert_int_eq(storage_table_meta_add_column(
				 t, "v", STORAGE_COLUMN_REGULAR, &TEXT, false),
			 COL_V2);
	t->columns[COL_V2].dropped_at = at;
}

static void open_db(struct fx *f)
{
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
	storage_options_default(&f->o);
	f->o.env = f->env;
	f->o.data_dir = f->data;
	f->o.commitlog_dir = f->log;
	f->o.auto_compaction = false;
	f->t = version1();
	open_db(f);
}

static void fx_free(struct fx *f)
{
	storage_delete(f->db);
	storage_table_meta_delete(f->t);
	test_tmpdir_remove(f->dir);
	env_real_delete(f->env);
}

/* A restart: the engine comes back with the newest meta and replays. */
static void restart(struct fx *f)
{
	storage_delete(f->db);
	open_db(f);
}

static struct storage_mutation *mut(struct fx *f, const char *key, int c)
{
	struct storage_mutation *m =
		storage_mutation_new(f->t, (const uint8_t *)key, strlen(key));
	ck_assert_ptr_nonnull(m);
	if (c < 0) {
		ck_assert_int_eq(storage_mutation_set_static_row(m), 0);
		return m;
	}
	uint8_t cb[4];
	be32_store(cb, (uint32_t)c);
	struct slice ck = slice_make(cb, 4);
	ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	return m;
}

static void apply(struct fx *f, struct storage_mutation *m)
{
	if (storage_apply_sync(f->db, m))
		ck_abort_msg("apply: %s", err_msg());
	storage_mutation_delete(m);
}

/* INSERT INTO t (pk, c, <col>) VALUES (key, c, text) USING TIMESTAMP ts */
static void put(struct fx *f, const char *key, int c, int col, const char *text,
		int64_t ts)
{
	struct storage_mutation *m = mut(f, key, c);
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, 0, 0), 0);
	ck_assert_int_eq(storage_mutation_put(m, col, NULL, 0,
					      (const uint8_t *)text,
					      strlen(text), ts, 0, 0),
			 0);
	apply(f, m);
}

static void put_tag(struct fx *f, const char *key, int c, int tag, int64_t ts)
{
	struct storage_mutation *m = mut(f, key, c);
	uint8_t b[4];
	be32_store(b, (uint32_t)tag);
	ck_assert_int_eq(
		storage_mutation_put(m, COL_TAGS, b, 4, NULL, 0, ts, 0, 0), 0);
	apply(f, m);
}

static struct storage_result *read_key(struct fx *f, const char *key)
{
	struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
				       .key_len = strlen(key),
				       .with_static = true};
	struct storage_result *r = NULL;
	if (storage_read(f->db, f->t->id, &cmd, &r))
		ck_abort_msg("read: %s", err_msg());
	return r;
}

/* The text of column `col` in row c of `key` ("" when the row has no such
 * cell, NULL when there is no row), into buf. */
static const char *cell(struct fx *f, const char *key, int c, int col,
			char *buf, size_t cap)
{
	struct storage_result *r = read_key(f, key);
	const char *out = NULL;
	for (size_t i = 0; i < r->row_count; i++) {
		const struct storage_row_view *row = &r->rows[i];
		if ((int)be32_load(row->clustering[0].ptr) != c)
			continue;
		snprintf(buf, cap, "%s", "");
		out = buf;
		for (size_t j = 0; j < row->cell_count; j++)
			if (row->cells[j].column == col)
				snprintf(buf, cap, "%.*s",
					 (int)row->cells[j].value.len,
					 (const char *)row->cells[j].value.ptr);
	}
	storage_result_delete(r);
	return out;
}

static void expect(struct fx *f, const char *key, int c, int col,
		   const char *want)
{
	char buf[256];
	const char *got = cell(f, key, c, col, buf, sizeof(buf));
	if (!want)
		ck_assert_msg(!got, "%s/%d: a row that should not be", key, c);
	else
		ck_assert_msg(got && strcmp(got, want) == 0,
			      "%s/%d col %d: got '%s', want '%s'", key, c, col,
			      got ? got : "(no row)", want);
}

/* The set elements of row c, in the order the engine returns them. */
static size_t tags(struct fx *f, const char *key, int c, int *out, size_t cap)
{
	struct storage_result *r = read_key(f, key);
	size_t n = 0;
	for (size_t i = 0; i < r->row_count; i++) {
		const struct storage_row_view *row = &r->rows[i];
		if ((int)be32_load(row->clustering[0].ptr) != c)
			continue;
		for (size_t j = 0; j < row->cell_count && n < cap; j++)
			if (row->cells[j].column == COL_TAGS)
				out[n++] =
					(int)be32_load(row->cells[j].path.ptr);
	}
	storage_result_delete(r);
	return n;
}

START_TEST(add_then_drop_then_readd_across_flush_and_replay)
{
	struct fx f;
	fx_init(&f, "alter");
	/* Version 1: one row flushed to an SSTable, one in the log only. */
	put(&f, "k1", 1, COL_V, "old-sstable", 100);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	put(&f, "k1", 2, COL_V, "old-memtable", 101);

	/* A write naming a column the engine does not know yet is refused. */
	struct storage_table_meta *ahead = storage_table_meta_clone(f.t);
	add_w_tags_s(ahead, 0);
	struct storage_mutation *early =
		storage_mutation_new(ahead, (const uint8_t *)"k1", 2);
	uint8_t cb[4];
	be32_store(cb, 1);
	struct slice ck = slice_make(cb, 4);
	storage_mutation_set_row(early, &ck, 1);
	storage_mutation_put(early, COL_W, NULL, 0, (const uint8_t *)"x", 1,
			     102, 0, 0);
	ck_assert_int_eq(storage_apply_sync(f.db, early), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	storage_mutation_delete(early);
	storage_table_meta_delete(ahead);

	/* ADD w text, tags set<int>, s int static. */
	evolve(&f, add_w_tags_s, 0);
	expect(&f, "k1", 1, COL_V, "old-sstable");
	expect(&f, "k1", 2, COL_V, "old-memtable");
	expect(&f, "k1", 1, COL_W, ""); /* existing rows: the new one null */
	put(&f, "k1", 1, COL_W, "new", 200);
	put(&f, "k3", 1, COL_W, "new-row", 201);
	/* Set elements order by their type (int), not their bytes. */
	put_tag(&f, "k1", 2, 5, 202);
	put_tag(&f, "k1", 2, -3, 203);
	struct storage_mutation *st = mut(&f, "k1", -1);
	be32_store(cb, 9);
	storage_mutation_put(st, COL_S, NULL, 0, cb, 4, 204, 0, 0);
	apply(&f, st);
	expect(&f, "k1", 1, COL_V, "old-sstable");
	expect(&f, "k1", 1, COL_W, "new");
	expect(&f, "k3", 1, COL_W, "new-row");
	int got[4];
	ck_assert_uint_eq(tags(&f, "k1", 2, got, 4), 2);
	ck_assert_int_eq(got[0], -3);
	ck_assert_int_eq(got[1], 5);

	restart(&f); /* replay under the newest version */
	expect(&f, "k1", 1, COL_V, "old-sstable");
	expect(&f, "k1", 2, COL_V, "old-memtable");
	expect(&f, "k1", 1, COL_W, "new");
	ck_assert_uint_eq(tags(&f, "k1", 2, got, 4), 2);
	ck_assert_int_eq(got[0], -3);

	/* DROP v at 300: its cells are gone, wherever they live. */
	put(&f, "k2", 1, COL_V, "before-drop", 250);
	/* written before the DROP ran, stamped after its time */
	put(&f, "k4", 1, COL_V, "newer-than-drop", 400);
	evolve(&f, drop_v, 300);
	expect(&f, "k4", 1, COL_V, "");
	expect(&f, "k1", 1, COL_V, "");
	expect(&f, "k1", 2, COL_V, "");
	expect(&f, "k2", 1, COL_V, ""); /* the row marker keeps the row */
	expect(&f, "k1", 1, COL_W, "new");
	restart(&f);
	expect(&f, "k1", 1, COL_V, "");
	expect(&f, "k2", 1, COL_V, "");
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	expect(&f, "k1", 2, COL_V, "");

	/* Re-added: a new slot; cells at or before the drop stay hidden. */
	evolve(&f, readd_v, 300);
	expect(&f, "k1", 1, COL_V, "");
	expect(&f, "k1", 1, COL_V2, "");
	put(&f, "k1", 1, COL_V2, "stale", 299); /* USING TIMESTAMP < drop */
	expect(&f, "k1", 1, COL_V2, "");
	put(&f, "k1", 2, COL_V2, "fresh", 301);
	expect(&f, "k1", 2, COL_V2, "fresh");
	expect(&f, "k1", 2, COL_V, "");
	/* Cassandra knows columns by name: the old slot's cells newer than
	 * the drop are the re-added column's (and reconcile with its own by
	 * timestamp). */
	expect(&f, "k4", 1, COL_V2, "newer-than-drop");
	put(&f, "k4", 1, COL_V2, "older-write", 350);
	expect(&f, "k4", 1, COL_V2, "newer-than-drop");
	restart(&f);
	expect(&f, "k1", 1, COL_V2, "");
	expect(&f, "k1", 2, COL_V2, "fresh");
	expect(&f, "k1", 1, COL_W, "new");
	expect(&f, "k4", 1, COL_V2, "newer-than-drop");
	/* compaction rewrites it under the new slot; a newer write wins */
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	expect(&f, "k4", 1, COL_V2, "newer-than-drop");
	put(&f, "k4", 1, COL_V2, "newest", 500);
	expect(&f, "k4", 1, COL_V2, "newest");
	fx_free(&f);
}
END_TEST

START_TEST(compaction_purges_dropped_cells)
{
	struct fx f;
	fx_init(&f, "alter-purge");
	static char big[8192];
	uint64_t x = 88172645463325252ULL; /* incompressible letters */
	for (size_t i = 0; i + 1 < sizeof(big); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		big[i] = (char)('a' + x % 26);
	}
	for (int i = 0; i < 200; i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", i);
		put(&f, key, 1, COL_V, big, 100 + i);
		if (i == 99) /* two SSTables: a major compaction merges them */
			ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	}
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	struct storage_stats before, after;
	ck_assert_int_eq(storage_stats(f.db, f.t->id, &before), 0);
	evolve(&f, drop_v, 1000);
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	ck_assert_int_eq(storage_stats(f.db, f.t->id, &after), 0);
	ck_assert_uint_eq(after.sstable_count, 1);
	ck_assert_msg(after.sstable_bytes * 10 < before.sstable_bytes,
		      "%llu bytes before, %llu after",
		      (unsigned long long)before.sstable_bytes,
		      (unsigned long long)after.sstable_bytes);
	expect(&f, "k7", 1, COL_V, ""); /* rows stay: their markers live */
	fx_free(&f);
}
END_TEST

static void set_gc_grace(struct storage_table_meta *t, int64_t arg)
{
	t->options.gc_grace_seconds = arg;
}

static void unlink_column(struct storage_table_meta *t, int64_t arg)
{
	(void)arg;
	t->column_count--;
}

START_TEST(only_successors_replace_a_table)
{
	struct fx f;
	fx_init(&f, "alter-refuse");
	struct storage_table_meta *n = storage_table_meta_clone(f.t);
	unlink_column(n, 0);
	ck_assert_int_eq(storage_table_update(f.db, n), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	n->column_count++;
	const struct storage_type *was = n->columns[COL_V].type;
	n->columns[COL_V].type = &INT;
	ck_assert_int_eq(storage_table_update(f.db, n), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	n->columns[COL_V].type = was;
	storage_table_meta_add_column(n, "k2", STORAGE_COLUMN_CLUSTERING, &INT,
				      false);
	ck_assert_int_eq(storage_table_update(f.db, n), -1);
	storage_table_meta_delete(n);

	/* ALTER TABLE ... WITH: the engine compacts by the new options. */
	evolve(&f, set_gc_grace, 3600);
	const struct storage_table_meta *now =
		storage_table_meta_acquire(f.db, f.t->id);
	ck_assert_int_eq(now->options.gc_grace_seconds, 3600);
	storage_table_meta_unref(now);
	evolve(&f, drop_v, 5);
	n = storage_table_meta_clone(f.t);
	n->columns[COL_V].dropped = false; /* no un-dropping */
	ck_assert_int_eq(storage_table_update(f.db, n), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	n->id[0] ^= 1;
	ck_assert_int_eq(storage_table_update(f.db, n), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	storage_table_meta_delete(n);
	fx_free(&f);
}
END_TEST

static void set_comment_gc(struct storage_table_meta *t, int64_t arg)
{
	t->options.gc_grace_seconds = arg;
}

/* The references a meta holds (for this test's checks only). */
static unsigned refs(const struct storage_table_meta *m)
{
	return atomic_load(&m->refs);
}

/* Until m holds n references: the flush thread drops a flushed
 * memtable just after storage_flush returns (the ceiling only guards
 * against a hang). */
static void await_refs(const struct storage_table_meta *m, unsigned n)
{
	for (int spin = 0; spin < 10000 && refs(m) > n; spin++)
		usleep(1000);
	ck_assert_uint_eq(refs(m), n);
}

/* ALTER churn (an application altering a table's options in a loop) kept
 * every earlier version of the table's meta in the engine until the
 * table went, 2 KB or more per ALTER. An earlier version now lives only
 * while something made with it or reading with it does: the memtable it
 * was made for until that is flushed, a reference held across the ALTER
 * (storage_table_meta_acquire) until it is released. */
START_TEST(an_altered_table_keeps_no_earlier_meta_that_nothing_uses)
{
	struct fx f;
	fx_init(&f, "alter-refs");
	const struct storage_table_meta *v1 =
		storage_table_meta_acquire(f.db, f.t->id);
	ck_assert_uint_eq(refs(v1), 3); /* the table, its memtable, ours */
	put(&f, "a", 1, COL_V, "one", 10);
	evolve(&f, set_comment_gc, 100);
	/* the memtable written under v1 waits for its flush */
	ck_assert_uint_eq(refs(v1), 2);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	await_refs(v1, 1); /* only ours: the SSTable has v2 */
	expect(&f, "a", 1, COL_V, "one");
	ck_assert_int_eq((int)v1->options.gc_grace_seconds, 0);
	storage_table_meta_unref(v1); /* the last: freed (ASan checks) */

	const struct storage_table_meta *v2 =
		storage_table_meta_acquire(f.db, f.t->id);
	for (int i = 0; i < 1000; i++)
		evolve(&f, set_comment_gc, 200 + i);
	/* ours and the SSTable's, flushed under v2; the 999 versions in
	 * between are gone (ASan's leak check sees any kept) */
	ck_assert_uint_eq(refs(v2), 2);
	storage_table_meta_unref(v2);
	const struct storage_table_meta *now =
		storage_table_meta_acquire(f.db, f.t->id);
	ck_assert_int_eq((int)now->options.gc_grace_seconds, 1199);
	ck_assert_uint_eq(refs(now), 3); /* the table, its memtable, ours */
	storage_table_meta_unref(now);
	expect(&f, "a", 1, COL_V, "one");
	fx_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_alter");
	TCase *tc = tcase_create("alter");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, add_then_drop_then_readd_across_flush_and_replay);
	tcase_add_test(tc, compaction_purges_dropped_cells);
	tcase_add_test(tc, only_successors_replace_a_table);
	tcase_add_test(
		tc, an_altered_table_keeps_no_earlier_meta_that_nothing_uses);
	suite_add_tcase(s, tc);
	return test_run(s);
}
