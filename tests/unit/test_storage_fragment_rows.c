/* storage, fragment rows: a canonical fragment cut into rows (partition
 * deletion and range tombstones as pseudo-rows, then one row per
 * clustering) with per-row digests, and selections of rows by id. The
 * property repair rests on: for random replicas A and B with merge M,
 * merging into B only the rows of M whose digest B lacks gives M byte for
 * byte. */
#include "common/err.h"
#include "common/rand.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <stdlib.h>
#include <string.h>

static uint64_t seed;

/* pk text, ck int, s static int, v int */
enum { COL_PK, COL_CK, COL_S, COL_V };

static struct storage_table_meta *make_table(void)
{
	uint8_t id[16] = {0x5e, 0x70};
	struct storage_table_meta *t = storage_table_meta_new("ks", "rows", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(t, "ck", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "s", STORAGE_COLUMN_STATIC, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	return t;
}

static struct slice ival(uint8_t *b, int v)
{
	be32_store(b, (uint32_t)v);
	return slice_make(b, 4);
}

static void set_ck(struct storage_mutation *m, int ck)
{
	uint8_t b[4];
	struct slice s = ival(b, ck);
	ck_assert_int_eq(storage_mutation_set_row(m, &s, 1), 0);
}

static void put_v(struct storage_mutation *m, int ck, int v, int64_t ts)
{
	uint8_t b[4];
	set_ck(m, ck);
	ival(b, v);
	ck_assert_int_eq(
		storage_mutation_put(m, COL_V, NULL, 0, b, 4, ts, 0, 1000), 0);
}

/* The canonical fragment of a built mutation; takes ownership of m. */
static struct storage_mutation *canon(const struct storage_table_meta *t,
				      struct storage_mutation *m)
{
	struct storage_mutation *f = storage_fragment_merge(t, &m, 1);
	ck_assert_ptr_nonnull(f);
	storage_mutation_delete(m);
	return f;
}

#define MAXROWS 64

struct rows {
	size_t n;
	uint8_t id[MAXROWS][64];
	size_t idlen[MAXROWS];
	uint8_t dg[MAXROWS][16];
};

static int collect(void *arg, struct slice id, const uint8_t dg[16])
{
	struct rows *r = arg;
	ck_assert_uint_lt(r->n, MAXROWS);
	ck_assert_uint_le(id.len, 64);
	memcpy(r->id[r->n], id.ptr, id.len);
	r->idlen[r->n] = id.len;
	memcpy(r->dg[r->n], dg, 16);
	r->n++;
	return 0;
}

static void rows_of(const struct storage_mutation *f, struct rows *r)
{
	memset(r, 0, sizeof(*r));
	ck_assert_int_eq(storage_fragment_rows(f, collect, r), 0);
}

static struct slice row_id(const struct rows *r, size_t i)
{
	return slice_make(r->id[i], r->idlen[i]);
}

/* Index of id in r, or -1. */
static int find(const struct rows *r, struct slice id)
{
	for (size_t i = 0; i < r->n; i++)
		if (slice_eq(row_id(r, i), id))
			return (int)i;
	return -1;
}

static void same_digest(const struct storage_mutation *a,
			const struct storage_mutation *b)
{
	uint8_t da[16], db[16];
	storage_mutation_digest(a, da);
	storage_mutation_digest(b, db);
	ck_assert_mem_eq(da, db, 16);
}

static int stop_at_two(void *arg, struct slice id, const uint8_t dg[16])
{
	(void)id;
	(void)dg;
	int *n = arg;
	return ++*n == 2 ? 7 : 0;
}

START_TEST(rows_include_pseudo_rows_in_order)
{
	struct storage_table_meta *t = make_table();
	struct storage_mutation *m = storage_mutation_new(t, (uint8_t *)"k", 1);
	ck_assert_int_eq(storage_mutation_delete_partition(m, 5, 900), 0);
	uint8_t b1[4], b2[4];
	struct slice lo = ival(b1, 10), hi = ival(b2, 20);
	ck_assert_int_eq(storage_mutation_delete_range(m, &lo, 1, true, &hi, 1,
						       false, 8, 900),
			 0);
	ck_assert_int_eq(storage_mutation_set_static_row(m), 0);
	ck_assert_int_eq(
		storage_mutation_put(m, COL_S, NULL, 0, b1, 4, 9, 0, 1000), 0);
	put_v(m, 1, 100, 9);
	put_v(m, 2, 200, 9);
	set_ck(m, 2);
	ck_assert_int_eq(storage_mutation_put_marker(m, 9, 60, 1000), 0);
	struct storage_mutation *f = canon(t, m);

	struct rows r;
	rows_of(f, &r);
	ck_assert_uint_eq(r.n, 5); /* pdel, range, static, ck 1, ck 2 */
	ck_assert_uint_eq(r.idlen[0], 1);
	ck_assert_uint_eq(r.id[0][0], 0);
	ck_assert_uint_eq(r.id[1][0], 1);
	for (size_t i = 2; i < 5; i++)
		ck_assert_uint_eq(r.id[i][0], 2);
	for (size_t i = 0; i < r.n; i++)
		for (size_t j = i + 1; j < r.n; j++) {
			ck_assert(!slice_eq(row_id(&r, i), row_id(&r, j)));
			ck_assert_mem_ne(r.dg[i], r.dg[j], 16);
		}

	/* every id selected: the fragment itself; none: empty */
	struct slice ids[5];
	for (size_t i = 0; i < 5; i++)
		ids[i] = row_id(&r, i);
	struct storage_mutation *all =
		storage_fragment_select_rows(t, f, ids, 5);
	ck_assert_ptr_nonnull(all);
	same_digest(all, f);
	struct storage_mutation *none =
		storage_fragment_select_rows(t, f, NULL, 0);
	ck_assert(storage_mutation_is_empty(none));
	/* one row: exactly that row, same digest */
	struct storage_mutation *one =
		storage_fragment_select_rows(t, f, &ids[4], 1);
	struct rows r1;
	rows_of(one, &r1);
	ck_assert_uint_eq(r1.n, 1);
	ck_assert(slice_eq(row_id(&r1, 0), ids[4]));
	ck_assert_mem_eq(r1.dg[0], r.dg[4], 16);
	/* the walk stops at a non-zero return and returns it */
	int calls = 0;
	ck_assert_int_eq(storage_fragment_rows(f, stop_at_two, &calls), 7);
	ck_assert_int_eq(calls, 2);

	storage_mutation_delete(one);
	storage_mutation_delete(none);
	storage_mutation_delete(all);
	storage_mutation_delete(f);
	storage_table_meta_delete(t);
}
END_TEST

START_TEST(row_digest_follows_row_content_and_key)
{
	struct storage_table_meta *t = make_table();
	struct storage_mutation *a = storage_mutation_new(t, (uint8_t *)"k", 1);
	struct storage_mutation *b = storage_mutation_new(t, (uint8_t *)"k", 1);
	struct storage_mutation *c = storage_mutation_new(t, (uint8_t *)"j", 1);
	for (int ck = 0; ck < 3; ck++) {
		put_v(a, ck, ck, 10);
		/* b differs in row 1's timestamp only */
		put_v(b, ck, ck, ck == 1 ? 11 : 10);
		put_v(c, ck, ck, 10);
	}
	a = canon(t, a);
	b = canon(t, b);
	c = canon(t, c);
	struct rows ra, rb, rc;
	rows_of(a, &ra);
	rows_of(b, &rb);
	rows_of(c, &rc);
	ck_assert_uint_eq(ra.n, 3);
	for (size_t i = 0; i < 3; i++) {
		ck_assert(slice_eq(row_id(&ra, i), row_id(&rb, i)));
		ck_assert(slice_eq(row_id(&ra, i), row_id(&rc, i)));
		if (i == 1)
			ck_assert_mem_ne(ra.dg[i], rb.dg[i], 16);
		else
			ck_assert_mem_eq(ra.dg[i], rb.dg[i], 16);
		/* the same row of another partition */
		ck_assert_mem_ne(ra.dg[i], rc.dg[i], 16);
	}
	/* a selection of another table is refused */
	uint8_t other[16] = {1};
	struct storage_table_meta *t2 =
		storage_table_meta_new("ks", "x", other);
	ck_assert_ptr_null(storage_fragment_select_rows(t2, a, NULL, 0));
	ck_assert_int_eq(err_code(), ERR_INVALID);
	storage_table_meta_delete(t2);
	storage_mutation_delete(a);
	storage_mutation_delete(b);
	storage_mutation_delete(c);
	storage_table_meta_delete(t);
}
END_TEST

/* A random edit of partition "p" over clusterings 0..5. */
static void random_op(struct rng *g, struct storage_mutation *m, int64_t ts)
{
	uint8_t b1[4], b2[4];
	int ck = (int)rng_below(g, 6);
	switch (rng_below(g, 10)) {
	case 0:
		ck_assert_int_eq(storage_mutation_delete_partition(m, ts, 900),
				 0);
		break;
	case 1: {
		struct slice lo = ival(b1, ck), hi = ival(b2, ck + 2);
		ck_assert_int_eq(storage_mutation_delete_range(m, &lo, 1, true,
							       &hi, 1, false,
							       ts, 900),
				 0);
		break;
	}
	case 2:
		set_ck(m, ck);
		ck_assert_int_eq(storage_mutation_delete_row(m, ts, 900), 0);
		break;
	case 3:
		set_ck(m, ck);
		ck_assert_int_eq(storage_mutation_delete_cell(m, COL_V, NULL, 0,
							      ts, 900),
				 0);
		break;
	case 4:
		ck_assert_int_eq(storage_mutation_set_static_row(m), 0);
		ival(b1, (int)rng_below(g, 100));
		ck_assert_int_eq(storage_mutation_put(m, COL_S, NULL, 0, b1, 4,
						      ts, 0, 1000),
				 0);
		break;
	case 5:
		set_ck(m, ck);
		ck_assert_int_eq(storage_mutation_put_marker(m, ts, 0, 1000),
				 0);
		break;
	default:
		put_v(m, ck, (int)rng_below(g, 100), ts);
		break;
	}
}

/* Merges into `f` the rows of `m` whose digests f lacks; returns the
 * repaired fragment and the number of rows sent. */
static struct storage_mutation *sync_rows(const struct storage_table_meta *t,
					  struct storage_mutation *f,
					  struct storage_mutation *m,
					  size_t *sent)
{
	struct rows rf, rm;
	rows_of(f, &rf);
	rows_of(m, &rm);
	struct slice ids[MAXROWS];
	size_t n = 0;
	for (size_t i = 0; i < rm.n; i++) {
		int j = find(&rf, row_id(&rm, i));
		if (j < 0 || memcmp(rf.dg[j], rm.dg[i], 16) != 0)
			ids[n++] = row_id(&rm, i);
	}
	struct storage_mutation *sel =
		storage_fragment_select_rows(t, m, ids, n);
	ck_assert_ptr_nonnull(sel);
	struct rows rs;
	rows_of(sel, &rs);
	ck_assert_uint_eq(rs.n, n);
	struct storage_mutation *two[2] = {f, sel};
	struct storage_mutation *out = storage_fragment_merge(t, two, 2);
	ck_assert_ptr_nonnull(out);
	storage_mutation_delete(sel);
	*sent = n;
	return out;
}

START_TEST(syncing_differing_rows_gives_the_merge)
{
	struct rng g;
	rng_seed(&g, seed + (uint64_t)_i);
	struct storage_table_meta *t = make_table();
	size_t total_sent = 0, total_rows = 0;
	for (int round = 0; round < 200; round++) {
		struct storage_mutation *ma =
			storage_mutation_new(t, (uint8_t *)"p", 1);
		struct storage_mutation *mb =
			storage_mutation_new(t, (uint8_t *)"p", 1);
		int nops = 1 + (int)rng_below(&g, 12);
		for (int i = 0; i < nops; i++) {
			int64_t ts = 1 + (int64_t)rng_below(&g, 50);
			uint64_t to = rng_below(&g, 4); /* A, B, both, both */
			struct rng copy = g;
			if (to != 1)
				random_op(&g, ma, ts);
			if (to != 0) {
				if (to >= 2)
					g = copy; /* the same op on both */
				random_op(&g, mb, ts);
			}
		}
		struct storage_mutation *fa = canon(t, ma);
		struct storage_mutation *fb = canon(t, mb);
		struct storage_mutation *two[2] = {fa, fb};
		struct storage_mutation *m = storage_fragment_merge(t, two, 2);
		ck_assert_ptr_nonnull(m);
		size_t sa, sb;
		struct storage_mutation *ra = sync_rows(t, fa, m, &sa);
		struct storage_mutation *rb = sync_rows(t, fb, m, &sb);
		same_digest(ra, m);
		same_digest(rb, m);
		/* a replica already equal to the merge is sent nothing */
		size_t s0;
		struct storage_mutation *r0 = sync_rows(t, m, m, &s0);
		ck_assert_uint_eq(s0, 0);
		struct rows rm;
		rows_of(m, &rm);
		total_rows += 2 * rm.n;
		total_sent += sa + sb;
		storage_mutation_delete(r0);
		storage_mutation_delete(ra);
		storage_mutation_delete(rb);
		storage_mutation_delete(m);
		storage_mutation_delete(fa);
		storage_mutation_delete(fb);
	}
	/* shared writes keep some rows equal: fewer rows sent than held */
	ck_assert_uint_lt(total_sent, total_rows);
	storage_table_meta_delete(t);
}
END_TEST

START_TEST(purge_drops_tombstones_past_gc_grace_only)
{
	struct storage_table_meta *t = make_table();
	struct storage_mutation *m = storage_mutation_new(t, (uint8_t *)"k", 1);
	/* old: deletion times 100; new: 5000; gc_before 1000 */
	ck_assert_int_eq(storage_mutation_delete_partition(m, 5, 100), 0);
	uint8_t b1[4], b2[4];
	struct slice lo = ival(b1, 10), hi = ival(b2, 20);
	ck_assert_int_eq(storage_mutation_delete_range(m, &lo, 1, true, &hi, 1,
						       false, 8, 100),
			 0);
	set_ck(m, 1);
	ck_assert_int_eq(storage_mutation_delete_row(m, 9, 100), 0);
	set_ck(m, 2);
	ck_assert_int_eq(
		storage_mutation_delete_cell(m, COL_V, NULL, 0, 9, 5000), 0);
	put_v(m, 3, 7, 9);
	set_ck(m, 4);
	ck_assert_int_eq(
		storage_mutation_delete_cell(m, COL_V, NULL, 0, 9, 100), 0);
	struct storage_mutation *f = canon(t, m);
	struct rows before, after;
	rows_of(f, &before);
	ck_assert_uint_eq(before.n, 6); /* pdel, range, ck 1, 2, 3, 4 */
	struct storage_mutation *p = storage_fragment_purge(t, f, 1000);
	ck_assert_ptr_nonnull(p);
	rows_of(p, &after);
	ck_assert_uint_eq(after.n, 2); /* ck 2's new tombstone, ck 3 */
	ck_assert_int_eq(find(&after, row_id(&before, 3)), 0);
	ck_assert_mem_eq(after.dg[0], before.dg[3], 16);
	ck_assert_int_eq(find(&after, row_id(&before, 4)), 1);
	/* nothing is old enough: the same fragment */
	struct storage_mutation *same = storage_fragment_purge(t, f, 50);
	same_digest(same, f);
	storage_mutation_delete(same);
	storage_mutation_delete(p);
	storage_mutation_delete(f);
	storage_table_meta_delete(t);
}
END_TEST

int main(void)
{
	seed = test_seed(0x5e70);
	Suite *s = suite_create("storage_fragment_rows");
	TCase *tc = tcase_create("rows");
	tcase_add_test(tc, rows_include_pseudo_rows_in_order);
	tcase_add_test(tc, row_digest_follows_row_content_and_key);
	tcase_add_loop_test(tc, syncing_differing_rows_gives_the_merge, 0, 4);
	tcase_add_test(tc, purge_drops_tombstones_past_gc_grace_only);
	suite_add_tcase(s, tc);
	return test_run(s);
}
