/* storage: garbagecollect (storage_garbagecollect). Each SSTable is
 * rewritten alone without the data the table's other SSTables shadow:
 * under their partition deletions, range tombstones and row deletions
 * (-g ROW), and with `cell` (-g CELL) also cells they hold newer. Reads
 * answer the same before and after; the live atoms left on disk show
 * what went. */
#include "common/env_real.h"
#include "common/err.h"
#include "conf/conf.h"
#include "storage/sstable_tool.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* pk text, c int, v int */
enum { COL_PK, COL_C, COL_V };

struct fx {
	struct env *env;
	char dir[512], data[600], log[600];
	struct storage_table_meta *t;
	struct storage *db;
};

static void fx_init(struct fx *f, const char *tag)
{
	memset(f, 0, sizeof(*f));
	f->env = env_real_new(NULL);
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir(tag));
	snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
	snprintf(f->log, sizeof(f->log), "%s/commitlog", f->dir);
	struct storage_options o;
	storage_options_default(&o);
	o.env = f->env;
	o.data_dir = f->data;
	o.commitlog_dir = f->log;
	o.commitlog_sync = CONF_COMMITLOG_SYNC_PERIODIC;
	o.auto_compaction = false;
	uint8_t id[16] = {0x6c, 0x01};
	f->t = storage_table_meta_new("ks", "t", id);
	ck_assert_ptr_nonnull(f->t);
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	storage_table_meta_add_column(f->t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(f->t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(f->t, "v", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	f->t->options.gc_grace_seconds = 864000;
	f->db = storage_new(&o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	ck_assert_int_eq(storage_start(f->db), 0);
}

static void fx_free(struct fx *f)
{
	storage_delete(f->db);
	storage_table_meta_delete(f->t);
	test_tmpdir_remove(f->dir);
	env_real_delete(f->env);
}

static struct storage_mutation *mut(struct fx *f, const char *key)
{
	struct storage_mutation *m = storage_mutation_new(
		f->t, (const uint8_t *)key, strlen(key));
	ck_assert_ptr_nonnull(m);
	return m;
}

static struct slice ck_of(uint8_t b[4], int c)
{
	be32_store(b, (uint32_t)c);
	return slice_make(b, 4);
}

static void apply(struct fx *f, struct storage_mutation *m)
{
	ck_assert_int_eq(storage_apply_sync(f->db, m), 0);
	storage_mutation_delete(m);
}

/* Row (key, c) = v at ts: its marker and its cell. */
static void put(struct fx *f, const char *key, int c, int v, int64_t ts)
{
	struct storage_mutation *m = mut(f, key);
	uint8_t cb[4], vb[4];
	struct slice ck = ck_of(cb, c);
	be32_store(vb, (uint32_t)v);
	ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, 0, 0), 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0, vb, 4, ts, 0,
					      0),
			 0);
	apply(f, m);
}

/* Only the cell, no marker (an UPDATE). */
static void update(struct fx *f, const char *key, int c, int v, int64_t ts)
{
	struct storage_mutation *m = mut(f, key);
	uint8_t cb[4], vb[4];
	struct slice ck = ck_of(cb, c);
	be32_store(vb, (uint32_t)v);
	ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0, vb, 4, ts, 0,
					      0),
			 0);
	apply(f, m);
}

static int count_atom(void *arg, const struct storage_sstable_atom *a)
{
	if (a->kind == 1 && !a->tombstone)
		(*(int *)arg)++;
	return 0;
}

/* Live atoms (markers and cells) in the table's SSTables on disk. */
static int live_atoms(struct fx *f)
{
	char dir[1024];
	int k = snprintf(dir, sizeof(dir), "%s/ks/t-", f->data);
	for (int i = 0; i < 16; i++)
		k += snprintf(dir + k, sizeof(dir) - (size_t)k, "%02x",
			      f->t->id[i]);
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct storage_sstable_dump_fns fns = {.atom = count_atom, .arg = &n};
	for (struct dirent *e; (e = readdir(d));) {
		size_t l = strlen(e->d_name);
		if (l < 8 || strcmp(e->d_name + l - 8, "-Data.db") != 0)
			continue;
		char p[1400];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		ck_assert_int_eq(storage_sstable_dump(f->env, p, NULL, 0, &fns),
				 0);
	}
	closedir(d);
	return n;
}

/* The rows of partition `key`: their clusterings in *cs, v of c = 9. */
static size_t rows(struct fx *f, const char *key, int *cs, int *v9)
{
	struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
				       .key_len = strlen(key)};
	struct storage_result *r;
	ck_assert_int_eq(storage_read(f->db, f->t->id, &cmd, &r), 0);
	size_t n = r->row_count;
	for (size_t i = 0; i < n; i++) {
		const struct storage_row_view *row = &r->rows[i];
		cs[i] = (int)be32_load(row->clustering[0].ptr);
		for (size_t c = 0; cs[i] == 9 && c < row->cell_count; c++)
			if (row->cells[c].column == COL_V)
				*v9 = (int)be32_load(row->cells[c].value.ptr);
	}
	storage_result_delete(r);
	return n;
}

START_TEST(shadowed_data_leaves_the_older_sstable)
{
	struct fx f;
	fx_init(&f, "gc-shadowed");
	const int64_t now = 1700000000;
	/* the older SSTable: p's rows 0..9, q's rows 0..1 */
	for (int c = 0; c < 10; c++)
		put(&f, "p", c, c, 100);
	put(&f, "q", 0, 0, 100);
	put(&f, "q", 1, 1, 100);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	/* the newer: p's rows 2..5 range-deleted, row 8 deleted, row 9's
	 * cell written again; q deleted */
	struct storage_mutation *m = mut(&f, "p");
	uint8_t a[4], b[4];
	struct slice s2 = ck_of(a, 2), s5 = ck_of(b, 5);
	ck_assert_int_eq(storage_mutation_delete_range(m, &s2, 1, true, &s5, 1,
						       true, 200, now),
			 0);
	apply(&f, m);
	m = mut(&f, "p");
	struct slice s8 = ck_of(a, 8);
	ck_assert_int_eq(storage_mutation_set_row(m, &s8, 1), 0);
	ck_assert_int_eq(storage_mutation_delete_row(m, 200, now), 0);
	apply(&f, m);
	update(&f, "p", 9, 99, 200);
	m = mut(&f, "q");
	ck_assert_int_eq(storage_mutation_delete_partition(m, 200, now), 0);
	apply(&f, m);
	ck_assert_int_eq(storage_flush(f.db, NULL), 0);
	/* 10 rows of p and 2 of q, marker and cell each; the newer cell */
	ck_assert_int_eq(live_atoms(&f), 2 * 12 + 1);

	int cs[16], v9 = 0;
	ck_assert_uint_eq(rows(&f, "p", cs, &v9), 5);
	ck_assert_int_eq(v9, 99);

	/* ROW: what deletions shadow goes; row 9's old cell stays */
	ck_assert_int_eq(storage_garbagecollect(f.db, f.t->id, false), 0);
	ck_assert_int_eq(live_atoms(&f), 2 * 5 + 1);
	ck_assert_uint_eq(rows(&f, "p", cs, &v9), 5);
	static const int want[] = {0, 1, 6, 7, 9};
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(cs[i], want[i]);
	ck_assert_int_eq(v9, 99);
	ck_assert_uint_eq(rows(&f, "q", cs, &v9), 0);

	/* CELL: the overwritten cell goes too; the answers stay */
	ck_assert_int_eq(storage_garbagecollect(f.db, f.t->id, true), 0);
	ck_assert_int_eq(live_atoms(&f), 2 * 5);
	ck_assert_uint_eq(rows(&f, "p", cs, &v9), 5);
	ck_assert_int_eq(v9, 99);
	fx_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_gc");
	TCase *tc = tcase_create("garbagecollect");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, shadowed_data_leaves_the_older_sstable);
	suite_add_tcase(s, tc);
	return test_run(s);
}
