/* storage, counters: a counter cell's shards (one per host id) merge by
 * clock whatever the order or grouping of replicas' versions (fragments,
 * memtable, flush, compaction); reads sum the live shards; the leader's
 * step (storage_counter_resolve) builds the next shard from the current
 * one; delta shards are never stored; a counter tombstone shadows later
 * shards; the leader's read command covers the rows it writes. */
#include "common/arena.h"
#include "common/env_real.h"
#include "common/err.h"
#include "conf/conf.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* k int, ck int clustering, c counter, d counter */
enum { COL_K, COL_CK, COL_C, COL_D };

static struct storage_table_meta *make_table(void)
{
	uint8_t id[16] = {0xc0, 0x07};
	struct storage_table_meta *t = storage_table_meta_new("ks", "cnt", id);
	const struct storage_type *ti = storage_type_simple(STORAGE_TYPE_INT);
	const struct storage_type *tc =
		storage_type_simple(STORAGE_TYPE_COUNTER);
	storage_table_meta_add_column(t, "k", STORAGE_COLUMN_PARTITION_KEY, ti,
				      false);
	storage_table_meta_add_column(t, "ck", STORAGE_COLUMN_CLUSTERING, ti,
				      false);
	ck_assert_int_eq(storage_table_meta_add_column(
				 t, "c", STORAGE_COLUMN_REGULAR, tc, false),
			 COL_C);
	storage_table_meta_add_column(t, "d", STORAGE_COLUMN_REGULAR, tc,
				      false);
	return t;
}

static const uint8_t host[3][16] = {{1}, {2}, {3}};

static struct storage_mutation *mut(const struct storage_table_meta *t, int k,
				    int ck)
{
	uint8_t kb[4], cb[4];
	be32_store(kb, (uint32_t)k);
	be32_store(cb, (uint32_t)ck);
	struct storage_mutation *m = storage_mutation_new(t, kb, 4);
	struct slice c = slice_make(cb, 4);
	ck_assert_int_eq(storage_mutation_set_row(m, &c, 1), 0);
	return m;
}

static void shard(struct storage_mutation *m, int col, int h, int64_t clock,
		  int64_t count)
{
	if (storage_mutation_put_counter_shard(m, col, host[h], clock, count))
		ck_abort_msg("shard: %s", err_msg());
}

/* The value read for (row 0, column col) of resolving fragment f; INT64_MIN
 * when the cell is absent. */
static int64_t value_of(const struct storage_table_meta *t,
			const struct storage_mutation *f, int col)
{
	struct storage_read_cmd cmd = {0};
	struct storage_result *r;
	ck_assert_int_eq(storage_fragment_resolve(t, f, &cmd, 1000, &r), 0);
	int64_t v = INT64_MIN;
	for (size_t i = 0; r->row_count && i < r->rows[0].cell_count; i++) {
		const struct storage_cell_view *c = &r->rows[0].cells[i];
		if (c->column == col) {
			ck_assert_uint_eq(c->value.len, 8);
			ck_assert_uint_eq(c->path.len, 0);
			v = (int64_t)be64_load(c->value.ptr);
		}
	}
	storage_result_delete(r);
	return v;
}

static void encode(const struct storage_mutation *m, struct buf *b)
{
	buf_init(b);
	ck_assert_int_eq(storage_mutation_encode(m, b), 0);
}

START_TEST(shards_merge_by_clock_in_any_order)
{
	struct storage_table_meta *t = make_table();
	struct storage_mutation *r[3] = {mut(t, 1, 0), mut(t, 1, 0),
					 mut(t, 1, 0)};
	shard(r[0], COL_C, 0, 5, 10);
	shard(r[1], COL_C, 0, 7, 12); /* newer shard of host 0 */
	shard(r[1], COL_C, 1, 3, 4);
	shard(r[2], COL_C, 1, 2, 1); /* older shard of host 1 */
	shard(r[2], COL_C, 2, 9, -3);
	shard(r[2], COL_D, 2, 9, 40);
	ck_assert_int_eq(value_of(t, r[0], COL_C), 10);
	ck_assert_int_eq(value_of(t, r[2], COL_C), -2);

	static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
					 {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
	struct buf first;
	buf_init(&first);
	for (int o = 0; o < 6; o++) {
		struct storage_mutation *in[3];
		for (int i = 0; i < 3; i++)
			in[i] = r[orders[o][i]];
		/* pairwise first, then with the third: grouping too */
		struct storage_mutation *ab = storage_fragment_merge(t, in, 2);
		ck_assert_ptr_nonnull(ab);
		struct storage_mutation *two[2] = {ab, in[2]};
		struct storage_mutation *all =
			storage_fragment_merge(t, two, 2);
		ck_assert_ptr_nonnull(all);
		ck_assert_int_eq(value_of(t, all, COL_C), 12 + 4 - 3);
		ck_assert_int_eq(value_of(t, all, COL_D), 40);
		struct buf b;
		encode(all, &b);
		if (o == 0)
			buf_append(&first, b.data, b.len);
		else
			ck_assert(b.len == first.len &&
				  !memcmp(b.data, first.data, b.len));
		/* idempotent: merging the result with an input changes
		 * nothing */
		struct storage_mutation *again[2] = {all, in[0]};
		struct storage_mutation *same =
			storage_fragment_merge(t, again, 2);
		struct buf s;
		encode(same, &s);
		ck_assert(s.len == b.len && !memcmp(s.data, b.data, b.len));
		uint8_t d1[16], d2[16];
		storage_mutation_digest(all, d1);
		storage_mutation_digest(same, d2);
		ck_assert(!memcmp(d1, d2, 16));
		buf_free(&s);
		buf_free(&b);
		storage_mutation_delete(same);
		storage_mutation_delete(all);
		storage_mutation_delete(ab);
	}
	/* a replica that lacks a newer shard has another digest */
	uint8_t d0[16], d1[16];
	struct storage_mutation *m01[2] = {r[0], r[1]};
	struct storage_mutation *x = storage_fragment_merge(t, m01, 2);
	storage_mutation_digest(x, d0);
	storage_mutation_digest(r[1], d1);
	ck_assert(!memcmp(d0, d1, 16));
	storage_mutation_digest(r[0], d1);
	ck_assert(memcmp(d0, d1, 16));
	storage_mutation_delete(x);
	buf_free(&first);
	for (int i = 0; i < 3; i++)
		storage_mutation_delete(r[i]);
	storage_table_meta_delete(t);
}
END_TEST

START_TEST(leader_step_builds_the_next_shard)
{
	struct storage_table_meta *t = make_table();
	struct storage_mutation *cur = mut(t, 1, 0);
	shard(cur, COL_C, 0, 70, 12);
	shard(cur, COL_C, 1, 90, 100); /* another leader's shard */
	struct storage_mutation *d = mut(t, 1, 0);
	ck_assert_int_eq(storage_mutation_put_counter_delta(d, COL_C, 5), 0);
	ck_assert_int_eq(storage_mutation_put_counter_delta(d, COL_D, -2), 0);
	ck_assert(storage_mutation_has_counter_deltas(d));
	ck_assert(!storage_mutation_has_counter_deltas(cur));
	/* a delta is never stored */
	ck_assert_int_eq(storage_mutation_validate(t, d), -1);
	ck_assert_contains(err_msg(), "never stored");

	/* the clock passes the old one even when the wall clock is behind */
	struct storage_mutation *n =
		storage_counter_resolve(t, d, cur, host[0], 3);
	ck_assert_ptr_nonnull(n);
	ck_assert(!storage_mutation_has_counter_deltas(n));
	ck_assert_int_eq(storage_mutation_validate(t, n), 0);
	struct storage_mutation *in[2] = {cur, n};
	struct storage_mutation *m = storage_fragment_merge(t, in, 2);
	ck_assert_int_eq(value_of(t, m, COL_C), 12 + 5 + 100);
	ck_assert_int_eq(value_of(t, m, COL_D), -2);
	storage_mutation_delete(m);

	/* the new shard of host 0 wins over the old one: clock 71 */
	struct storage_mutation *only_old = mut(t, 1, 0);
	shard(only_old, COL_C, 0, 71, 999); /* same clock, larger value */
	struct storage_mutation *pair[2] = {n, only_old};
	m = storage_fragment_merge(t, pair, 2);
	ck_assert_int_eq(value_of(t, m, COL_C), 999);
	storage_mutation_delete(m);
	storage_mutation_delete(only_old);
	storage_mutation_delete(n);

	/* a wall clock ahead of the old shard gives its own time */
	n = storage_counter_resolve(t, d, cur, host[0], 5000);
	struct storage_mutation *older = mut(t, 1, 0);
	shard(older, COL_C, 0, 4999, 1000);
	struct storage_mutation *p2[2] = {older, n};
	m = storage_fragment_merge(t, p2, 2);
	ck_assert_int_eq(value_of(t, m, COL_C), 17);
	storage_mutation_delete(m);
	storage_mutation_delete(older);
	storage_mutation_delete(n);

	/* no current shard: the delta starts from zero */
	n = storage_counter_resolve(t, d, NULL, host[2], 10);
	ck_assert_int_eq(value_of(t, n, COL_C), 5);
	storage_mutation_delete(n);
	uint8_t zero[16] = {0};
	ck_assert_ptr_null(storage_counter_resolve(t, d, cur, zero, 10));
	storage_mutation_delete(d);
	storage_mutation_delete(cur);
	storage_table_meta_delete(t);
}
END_TEST

struct fx {
	struct env *env;
	char dir[512], data[600], log[600];
	struct storage_table_meta *t;
	struct storage *db;
};

static void fx_open(struct fx *f)
{
	struct storage_options o;
	storage_options_default(&o);
	o.env = f->env;
	o.data_dir = f->data;
	o.commitlog_dir = f->log;
	o.commitlog_sync = CONF_COMMITLOG_SYNC_PERIODIC;
	o.auto_compaction = false;
	f->db = storage_new(&o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	ck_assert_int_eq(storage_start(f->db), 0);
}

static int64_t read_value(struct fx *f, int k, int col)
{
	uint8_t kb[4];
	be32_store(kb, (uint32_t)k);
	struct storage_read_cmd cmd = {.key = kb, .key_len = 4};
	struct storage_result *r;
	ck_assert_int_eq(storage_read(f->db, f->t->id, &cmd, &r), 0);
	int64_t v = INT64_MIN;
	for (size_t i = 0; r->row_count && i < r->rows[0].cell_count; i++)
		if (r->rows[0].cells[i].column == col)
			v = (int64_t)be64_load(r->rows[0].cells[i].value.ptr);
	storage_result_delete(r);
	return v;
}

static void apply(struct fx *f, struct storage_mutation *m)
{
	if (storage_apply_sync(f->db, m))
		ck_abort_msg("apply: %s", err_msg());
	storage_mutation_delete(m);
}

START_TEST(engine_merges_shards_across_flush_compaction_restart)
{
	struct fx f = {0};
	f.env = env_real_new(NULL);
	snprintf(f.dir, sizeof(f.dir), "%s", test_tmpdir("counter"));
	snprintf(f.data, sizeof(f.data), "%s/data", f.dir);
	snprintf(f.log, sizeof(f.log), "%s/log", f.dir);
	f.t = make_table();
	fx_open(&f);

	struct storage_mutation *m = mut(f.t, 1, 0);
	shard(m, COL_C, 0, 10, 1);
	shard(m, COL_C, 1, 10, 2);
	apply(&f, m);
	ck_assert_int_eq(read_value(&f, 1, COL_C), 3);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	m = mut(f.t, 1, 0);
	shard(m, COL_C, 0, 11, 5);  /* host 0 moves on */
	shard(m, COL_C, 1, 9, 100); /* an older shard of host 1: loses */
	apply(&f, m);
	ck_assert_int_eq(read_value(&f, 1, COL_C), 7);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	ck_assert_int_eq(read_value(&f, 1, COL_C), 7);
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	ck_assert_int_eq(read_value(&f, 1, COL_C), 7);
	/* a delta is refused by the engine */
	m = mut(f.t, 1, 0);
	storage_mutation_put_counter_delta(m, COL_C, 1);
	ck_assert_int_eq(storage_apply_sync(f.db, m), -1);
	storage_mutation_delete(m);
	/* a TTL'd shard is refused */
	m = mut(f.t, 1, 0);
	uint8_t v[8] = {0};
	ck_assert_int_eq(
		storage_mutation_put(m, COL_C, host[0], 16, v, 8, 20, 10, 1),
		0);
	ck_assert_int_eq(storage_apply_sync(f.db, m), -1);
	storage_mutation_delete(m);

	/* restart: the commitlog and SSTables give the same */
	m = mut(f.t, 2, 0);
	shard(m, COL_D, 2, 4, 42);
	apply(&f, m);
	storage_delete(f.db);
	fx_open(&f);
	ck_assert_int_eq(read_value(&f, 1, COL_C), 7);
	ck_assert_int_eq(read_value(&f, 2, COL_D), 42);

	/* a counter tombstone shadows every later shard */
	m = mut(f.t, 1, 0);
	ck_assert_int_eq(storage_mutation_delete_collection(
				 m, COL_C, STORAGE_COUNTER_TOMBSTONE_TS, 1),
			 0);
	apply(&f, m);
	m = mut(f.t, 1, 0);
	shard(m, COL_C, 0, 1LL << 60, 1);
	shard(m, COL_D, 0, 1LL << 60, 8);
	apply(&f, m);
	ck_assert_int_eq(read_value(&f, 1, COL_C), INT64_MIN);
	ck_assert_int_eq(read_value(&f, 1, COL_D), 8);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	ck_assert_int_eq(read_value(&f, 1, COL_C), INT64_MIN);
	ck_assert_int_eq(read_value(&f, 1, COL_D), 8);

	storage_delete(f.db);
	storage_table_meta_delete(f.t);
	test_tmpdir_remove(f.dir);
	env_real_delete(f.env);
}
END_TEST

START_TEST(leader_read_covers_the_written_rows)
{
	struct storage_table_meta *t = make_table();
	uint8_t kb[4];
	be32_store(kb, 7);
	struct storage_mutation *m = storage_mutation_new(t, kb, 4);
	int cks[] = {5, -1, 5, 3};
	for (size_t i = 0; i < 4; i++) {
		uint8_t cb[4];
		be32_store(cb, (uint32_t)cks[i]);
		struct slice c = slice_make(cb, 4);
		storage_mutation_set_row(m, &c, 1);
		storage_mutation_put_counter_delta(m, i % 2 ? COL_D : COL_C, 1);
	}
	struct arena a;
	arena_create(&a, 4096);
	struct storage_read_cmd cmd;
	ck_assert_int_eq(storage_counter_read_cmd(t, m, &a, &cmd), 0);
	ck_assert_uint_eq(cmd.key_len, 4);
	ck_assert(!memcmp(cmd.key, kb, 4));
	ck_assert_uint_eq(cmd.slice_count, 3);
	int want[] = {-1, 3, 5};
	for (size_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(cmd.slices[i].start_count, 1);
		ck_assert(cmd.slices[i].start_incl && cmd.slices[i].end_incl);
		ck_assert_int_eq((int32_t)be32_load(cmd.slices[i].start[0].ptr),
				 want[i]);
	}
	arena_destroy(&a);
	storage_mutation_delete(m);
	storage_table_meta_delete(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_counter");
	TCase *tc = tcase_create("counter");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, shards_merge_by_clock_in_any_order);
	tcase_add_test(tc, leader_step_builds_the_next_shard);
	tcase_add_test(tc,
		       engine_merges_shards_across_flush_compaction_restart);
	tcase_add_test(tc, leader_read_covers_the_written_rows);
	suite_add_tcase(s, tc);
	return test_run(s);
}
