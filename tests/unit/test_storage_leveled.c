/* LeveledCompactionStrategy: L0 flushes compact into non-overlapping L1
 * SSTables cut at sstable_size; a level over fanout^n * sstable_size
 * moves an SSTable up with the next level's overlapping ones; every row
 * reads back throughout; a crash between a leveled compaction's outputs
 * rolls back to its inputs. Levels are read from the files as
 * sstablemetadata reads them. */
#include "common/env_real.h"
#include "common/err.h"
#include "conf/conf.h"
#include "storage/sstable_tool.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fault_env.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0   1700000000LL
#define VLEN 1000

enum { COL_PK, COL_C, COL_V };

struct fx {
	struct env *real;
	struct fault_env *fe;
	struct env *env;
	char dir[512], data[600], log[600], table[800];
	struct storage_table_meta *t;
	struct storage *db;
	struct storage_options o;
	int64_t ts;
};

static void open_db(struct fx *f)
{
	f->db = storage_new(&f->o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	if (storage_start(f->db))
		ck_abort_msg("start: %s", err_msg());
}

static void fx_init(struct fx *f, const char *tag, uint32_t fanout)
{
	memset(f, 0, sizeof(*f));
	f->real = env_real_new(NULL);
	f->fe = fault_env_new(f->real);
	f->env = fault_env_env(f->fe);
	fault_env_set_wall_us(f->fe, T0 * 1000000);
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir(tag));
	snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
	snprintf(f->log, sizeof(f->log), "%s/commitlog", f->dir);
	storage_options_default(&f->o);
	f->o.env = f->env;
	f->o.data_dir = f->data;
	f->o.commitlog_dir = f->log;
	f->o.commitlog_sync = CONF_COMMITLOG_SYNC_PERIODIC;
	f->o.auto_compaction = false;
	uint8_t id[16] = {0x70, 0x33};
	f->t = storage_table_meta_new("ks", "t", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	storage_table_meta_add_column(f->t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(f->t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(f->t, "v", STORAGE_COLUMN_REGULAR, &tx,
				      false);
	f->t->options.compaction = STORAGE_COMPACTION_LEVELED;
	f->t->options.compression = STORAGE_COMPRESSION_NONE;
	f->t->options.sstable_size_bytes = 1u << 20;
	f->t->options.fanout_size = fanout;
	int k = snprintf(f->table, sizeof(f->table), "%s/ks/t-", f->data);
	for (int i = 0; i < 16; i++)
		k += snprintf(f->table + k, sizeof(f->table) - (size_t)k,
			      "%02x", id[i]);
	f->ts = 1000;
	open_db(f);
}

static void fx_free(struct fx *f)
{
	storage_delete(f->db);
	storage_table_meta_delete(f->t);
	test_tmpdir_remove(f->dir);
	fault_env_delete(f->fe);
	env_real_delete(f->real);
}

static void put(struct fx *f, int i)
{
	char key[32], v[VLEN + 1];
	snprintf(key, sizeof(key), "key%d", i);
	for (int k = 0; k < VLEN; k++)
		v[k] = (char)('a' + (i * 7 + k * 13) % 26);
	struct storage_mutation *m =
		storage_mutation_new(f->t, (const uint8_t *)key, strlen(key));
	uint8_t cb[4];
	be32_store(cb, 1);
	struct slice ck = slice_make(cb, 4);
	ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0,
					      (const uint8_t *)v, VLEN, f->ts++,
					      0, T0),
			 0);
	if (storage_apply_sync(f->db, m))
		ck_abort_msg("apply: %s", err_msg());
	storage_mutation_delete(m);
}

/* Keys [from, to) in one flush. */
static void flush_keys(struct fx *f, int from, int to)
{
	for (int i = from; i < to; i++)
		put(f, i);
	ck_assert_int_eq(storage_flush(f->db, NULL), 0);
}

static void expect_all(struct fx *f, int n)
{
	for (int i = 0; i < n; i++) {
		char key[32];
		snprintf(key, sizeof(key), "key%d", i);
		struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
					       .key_len = strlen(key)};
		struct storage_result *r;
		if (storage_read(f->db, f->t->id, &cmd, &r))
			ck_abort_msg("read: %s", err_msg());
		ck_assert_msg(r->row_count == 1, "%s: %zu rows", key,
			      r->row_count);
		ck_assert_uint_eq(r->rows[0].cells[0].value.len, VLEN);
		storage_result_delete(r);
	}
}

struct level_view {
	size_t count[9];
	struct storage_sstable_meta m[64];
	size_t n;
};

/* The table's SSTables as their files say. */
static void levels(struct fx *f, struct level_view *lv)
{
	memset(lv, 0, sizeof(*lv));
	DIR *d = opendir(f->table);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (strncmp(e->d_name, "ca-", 3) != 0 || len < 8 ||
		    strcmp(e->d_name + len - 8, "-TOC.txt") != 0)
			continue;
		char path[1200];
		snprintf(path, sizeof(path), "%s/%s", f->table, e->d_name);
		ck_assert_uint_lt(lv->n, 64);
		struct storage_sstable_meta *m = &lv->m[lv->n++];
		if (storage_sstable_meta_read(f->env, path, m))
			ck_abort_msg("%s: %s", path, m->problems);
		ck_assert_uint_lt(m->level, 9);
		lv->count[m->level]++;
	}
	closedir(d);
}

/* No two SSTables of a level >= 1 overlap; none passes the size much. */
static void check_levels(const struct level_view *lv, uint64_t size)
{
	for (size_t i = 0; i < lv->n; i++) {
		const struct storage_sstable_meta *a = &lv->m[i];
		if (a->level == 0)
			continue;
		/* cut at the first partition past the size */
		ck_assert_uint_le((uint64_t)a->data_bytes, size + 64 * 1024);
		for (size_t j = 0; j < lv->n; j++) {
			const struct storage_sstable_meta *b = &lv->m[j];
			if (i == j || b->level != a->level)
				continue;
			ck_assert_msg(a->max_token < b->min_token ||
					      b->max_token < a->min_token,
				      "L%u: ca-%llu and ca-%llu overlap",
				      a->level, (unsigned long long)a->gen,
				      (unsigned long long)b->gen);
		}
	}
}

static void background(struct fx *f)
{
	ck_assert_int_eq(storage_compact(f->db, f->t->id, false), 0);
}

START_TEST(l0_compacts_into_non_overlapping_l1_sstables)
{
	struct fx f;
	fx_init(&f, "lcs-l1", 10);
	struct level_view lv;
	for (int i = 0; i < 3; i++)
		flush_keys(&f, i * 700, (i + 1) * 700);
	background(&f); /* 3 < min_threshold: nothing */
	levels(&f, &lv);
	ck_assert_uint_eq(lv.count[0], 3);
	flush_keys(&f, 2100, 2800);
	background(&f);
	levels(&f, &lv);
	ck_assert_uint_eq(lv.count[0], 0);
	/* 2800 rows of 1 KB: cut at 1 MiB into 3 */
	ck_assert_uint_eq(lv.count[1], 3);
	check_levels(&lv, 1u << 20);
	expect_all(&f, 2800);
	/* the next L0 round merges with the L1 SSTables it overlaps */
	for (int i = 0; i < 4; i++)
		flush_keys(&f, 2800 + i * 100, 2800 + (i + 1) * 100);
	background(&f);
	levels(&f, &lv);
	ck_assert_uint_eq(lv.count[0], 0);
	ck_assert_uint_eq(lv.count[1], 4);
	check_levels(&lv, 1u << 20);
	expect_all(&f, 3200);
	fx_free(&f);
}
END_TEST

/* fanout 2: L1 holds 2 MiB, so 3 MiB in L1 sends SSTables up to L2. */
START_TEST(a_full_level_moves_sstables_up)
{
	struct fx f;
	fx_init(&f, "lcs-l2", 2);
	for (int i = 0; i < 4; i++)
		flush_keys(&f, i * 800, (i + 1) * 800);
	background(&f);
	struct level_view lv;
	levels(&f, &lv);
	ck_assert_uint_eq(lv.count[0], 0);
	ck_assert_uint_ge(lv.count[2], 1);
	uint64_t l1 = 0;
	for (size_t i = 0; i < lv.n; i++)
		if (lv.m[i].level == 1)
			l1 += (uint64_t)lv.m[i].data_bytes;
	ck_assert_uint_le(l1, 2u << 20);
	check_levels(&lv, 1u << 20);
	expect_all(&f, 3200);
	/* and a major compaction makes one sorted run at L1 */
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	levels(&f, &lv);
	ck_assert_uint_eq(lv.count[0] + lv.count[2], 0);
	ck_assert_uint_eq(lv.count[1], 4);
	check_levels(&lv, 1u << 20);
	expect_all(&f, 3200);
	fx_free(&f);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void shell(const char *cmd)
{
	ck_assert_int_eq(system(cmd), 0);
}

/* A crash after a leveled compaction's log but before its last output
 * was complete: the outputs go, the inputs stay (every row reads). One
 * after every output was complete (the log says "done"): the inputs go.
 * And a done log whose outputs a later compaction took in part (it
 * lingered while a reader held its inputs) deletes no output. */
START_TEST(a_crash_between_outputs_rolls_back)
{
	struct fx f;
	fx_init(&f, "lcs-crash", 10);
	for (int i = 0; i < 4; i++)
		flush_keys(&f, i * 700, (i + 1) * 700); /* gens 1-4 */
	char saved[900], cmd[4096];
	snprintf(saved, sizeof(saved), "%s/saved", f.dir);
	ck_assert(snprintf(cmd, sizeof(cmd),
			   "mkdir -p '%s' && cp '%s'/ca-* '%s'/", saved,
			   f.table, saved) < (int)sizeof(cmd));
	shell(cmd);
	background(&f); /* outputs 5, 6, 7 */
	struct level_view lv;
	levels(&f, &lv);
	ck_assert_uint_eq(lv.count[1], 3);
	storage_delete(f.db);
	f.db = NULL;
	/* inputs back, output 7 without its TOC, the log naming all */
	ck_assert(snprintf(cmd, sizeof(cmd),
			   "cp '%s'/ca-* '%s'/ && rm '%s'/ca-7-TOC.txt && "
			   "printf '5\\n+6\\n+7\\n1\\n2\\n3\\n4\\n' > "
			   "'%s'/compaction-5.log",
			   saved, f.table, f.table,
			   f.table) < (int)sizeof(cmd));
	shell(cmd);
	open_db(&f);
	levels(&f, &lv);
	ck_assert_uint_eq(lv.count[0], 4);
	ck_assert_uint_eq(lv.count[1], 0);
	expect_all(&f, 2800);
	/* again: now every output complete, so the inputs go */
	background(&f);
	levels(&f, &lv);
	uint64_t outs[3];
	size_t no = 0;
	for (size_t i = 0; i < lv.n; i++)
		if (lv.m[i].level == 1 && no < 3)
			outs[no++] = lv.m[i].gen;
	ck_assert_uint_eq(no, 3);
	qsort(outs, 3, sizeof(outs[0]), cmp_u64);
	storage_delete(f.db);
	f.db = NULL;
	ck_assert(snprintf(cmd, sizeof(cmd),
			   "cp '%s'/ca-* '%s'/ && "
			   "printf "
			   "'%llu\\n+%llu\\n+%llu\\n1\\n2\\n3\\n4\\ndone\\n' > "
			   "'%s'/compaction-%llu.log",
			   saved, f.table, (unsigned long long)outs[0],
			   (unsigned long long)outs[1],
			   (unsigned long long)outs[2], f.table,
			   (unsigned long long)outs[0]) < (int)sizeof(cmd));
	shell(cmd);
	open_db(&f);
	levels(&f, &lv);
	ck_assert_uint_eq(lv.count[0], 0);
	ck_assert_uint_eq(lv.count[1], 3);
	expect_all(&f, 2800);
	/* the same done log again, its first output since moved on (its
	 * files now generation 99's) */
	storage_delete(f.db);
	f.db = NULL;
	ck_assert(snprintf(cmd, sizeof(cmd),
			   "cd '%s' && for c in TOC.txt Data.db Index.db "
			   "Filter.db Statistics.db Summary.db; do "
			   "mv ca-%llu-$c ca-99-$c; done && "
			   "printf "
			   "'%llu\\n+%llu\\n+%llu\\n1\\n2\\n3\\n4\\ndone\\n' > "
			   "compaction-%llu.log",
			   f.table, (unsigned long long)outs[0],
			   (unsigned long long)outs[0],
			   (unsigned long long)outs[1],
			   (unsigned long long)outs[2],
			   (unsigned long long)outs[0]) < (int)sizeof(cmd));
	shell(cmd);
	open_db(&f);
	levels(&f, &lv);
	ck_assert_uint_eq(lv.n, 3);
	expect_all(&f, 2800);
	ck_assert(snprintf(cmd, sizeof(cmd), "rm -rf '%s'", saved) <
		  (int)sizeof(cmd));
	shell(cmd);
	fx_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_leveled");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, l0_compacts_into_non_overlapping_l1_sstables);
	tcase_add_test(tc, a_full_level_moves_sstables_up);
	tcase_add_test(tc, a_crash_between_outputs_rolls_back);
	suite_add_tcase(s, tc);
	return test_run(s);
}
