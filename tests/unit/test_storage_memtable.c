/* storage memtable and read merge: slices, reverse, limits, static rows,
 * projection, every kind of tombstone, TTL expiry, memory accounting. */
#include "common/err.h"
#include "common/murmur3.h"
#include "storage/read_internal.h"
#include "tests/lib/testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Table: pk text, c int (ASC), s int static, v int, m map<int,int>. */
enum { COL_PK, COL_C, COL_S, COL_V, COL_M };

static struct storage_table_meta *table(void)
{
	uint8_t id[16] = {2};
	struct storage_table_meta *t = storage_table_meta_new("ks", "t", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type tm = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_MAP, false, storage_type_simple(STORAGE_TYPE_INT),
		storage_type_simple(STORAGE_TYPE_INT));
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "s", STORAGE_COLUMN_STATIC, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	storage_table_meta_add_column(t, "m", STORAGE_COLUMN_REGULAR, &tm,
				      false);
	return t;
}

static uint8_t ibuf[64][4];
static struct slice I(int v) {
	static int next;
	uint8_t *p = ibuf[next++ % 64];
	be32_store(p, (uint32_t)v);
	return slice_make(p, 4);
}

static int
geti(struct slice s)
{
	return (int)be32_load(s.ptr);
}

struct fx {
	struct storage_table_meta *t;
	struct memtable *mt;
};

static struct storage_mutation *mut(struct fx *f, const char *key)
{
	return storage_mutation_new(f->t, (const uint8_t *)key, strlen(key));
}

static void apply(struct fx *f, struct storage_mutation *m)
{
	ck_assert_int_eq(memtable_apply(f->mt, m), 0);
	storage_mutation_delete(m);
}

static void put_row(struct fx *f, const char *key, int c, int v, int64_t ts,
		    int32_t ttl)
{
	struct storage_mutation *m = mut(f, key);
	struct slice ck = I(c);
	ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, ttl, 1000), 0);
	struct slice v1 = I(v);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0, v1.ptr, 4, ts,
					      ttl, 1000),
			 0);
	apply(f, m);
}

static struct storage_result *rd(struct fx *f, const char *key,
				 const struct storage_read_cmd *cmd0,
				 int64_t now)
{
	struct storage_read_cmd cmd = {0};
	if (cmd0)
		cmd = *cmd0;
	cmd.key = (const uint8_t *)key;
	cmd.key_len = strlen(key);
	struct read_ctx c;
	ck_assert_int_eq(storage_read_ctx_init(&c, f->t, &cmd, now), 0);
	int64_t tok = murmur3_token(cmd.key, cmd.key_len);
	ck_assert_int_eq(
		storage_read_ctx_add_memtable(&c, f->mt, tok,
					      slice_make(cmd.key, cmd.key_len)),
		0);
	struct storage_result *r;
	int rc = storage_read_ctx_finish(&c, tok,
					 slice_make(cmd.key, cmd.key_len), &r);
	storage_read_ctx_destroy(&c);
	ck_assert_int_eq(rc, 0);
	return r;
}

static void setup(struct fx *f)
{
	f->t = table();
	f->mt = memtable_new(f->t);
	ck_assert_ptr_nonnull(f->mt);
}

static void teardown(struct fx *f)
{
	memtable_unref(f->mt);
	storage_table_meta_delete(f->t);
}

START_TEST(slices_reverse_and_limit)
{
	struct fx f;
	setup(&f);
	for (int c = 9; c >= 0; c--)
		put_row(&f, "p", c, c * 10, 1, 0);
	put_row(&f, "q", 1, 1, 1, 0);
	struct storage_result *r = rd(&f, "p", NULL, 1000);
	ck_assert_uint_eq(r->row_count, 10);
	for (int i = 0; i < 10; i++) {
		ck_assert_int_eq(geti(r->rows[i].clustering[0]), i);
		ck_assert_uint_eq(r->rows[i].cell_count, 1);
		ck_assert_int_eq(geti(r->rows[i].cells[0].value), i * 10);
	}
	storage_result_delete(r);

	/* c in [2,4) and (6, 8], reversed, limit 3 -> 8, 7, 3 */
	struct slice a = I(2), b = I(4), c = I(6), d = I(8);
	struct storage_slice sl[2] = {{&a, 1, true, &b, 1, false},
				      {&c, 1, false, &d, 1, true}};
	struct storage_read_cmd cmd = {
		.slices = sl, .slice_count = 2, .reverse = true, .limit = 3};
	r = rd(&f, "p", &cmd, 1000);
	ck_assert_uint_eq(r->row_count, 3);
	ck_assert_int_eq(geti(r->rows[0].clustering[0]), 8);
	ck_assert_int_eq(geti(r->rows[1].clustering[0]), 7);
	ck_assert_int_eq(geti(r->rows[2].clustering[0]), 3);
	storage_result_delete(r);
	r = rd(&f, "absent", NULL, 1000);
	ck_assert_uint_eq(r->row_count, 0);
	storage_result_delete(r);
	teardown(&f);
}
END_TEST

START_TEST(tombstones_of_every_kind)
{
	struct fx f;
	setup(&f);
	for (int c = 0; c < 10; c++)
		put_row(&f, "p", c, c, 10, 0);
	/* cell tombstone on c=1 (row stays through its marker) */
	struct storage_mutation *m = mut(&f, "p");
	struct slice ck = I(1);
	storage_mutation_set_row(m, &ck, 1);
	storage_mutation_delete_cell(m, COL_V, NULL, 0, 11, 1000);
	apply(&f, m);
	/* row tombstone on c=2 */
	m = mut(&f, "p");
	ck = I(2);
	storage_mutation_set_row(m, &ck, 1);
	storage_mutation_delete_row(m, 11, 1000);
	apply(&f, m);
	/* range tombstone [5, 7] at ts 11; a later write to 6 survives */
	m = mut(&f, "p");
	struct slice s5 = I(5), s7 = I(7);
	storage_mutation_delete_range(m, &s5, 1, true, &s7, 1, true, 11, 1000);
	apply(&f, m);
	put_row(&f, "p", 6, 66, 12, 0);
	/* an older write under the row tombstone stays dead */
	put_row(&f, "p", 2, 22, 9, 0);

	struct storage_result *r = rd(&f, "p", NULL, 1000);
	int want[] = {0, 1, 3, 4, 6, 8, 9};
	ck_assert_uint_eq(r->row_count, 7);
	for (int i = 0; i < 7; i++)
		ck_assert_int_eq(geti(r->rows[i].clustering[0]), want[i]);
	ck_assert_uint_eq(r->rows[1].cell_count, 0); /* c=1 lost its v */
	ck_assert_int_eq(geti(r->rows[4].cells[0].value), 66);
	ck_assert_uint_ge(r->tombstones, 3);
	storage_result_delete(r);

	/* partition tombstone at 12 removes everything but nothing newer */
	m = mut(&f, "p");
	storage_mutation_delete_partition(m, 12, 1000);
	apply(&f, m);
	put_row(&f, "p", 3, 33, 13, 0);
	r = rd(&f, "p", NULL, 1000);
	ck_assert_uint_eq(r->row_count, 1);
	ck_assert_int_eq(geti(r->rows[0].cells[0].value), 33);
	storage_result_delete(r);
	teardown(&f);
}
END_TEST

START_TEST(collections_static_and_projection)
{
	struct fx f;
	setup(&f);
	struct storage_mutation *m = mut(&f, "p");
	storage_mutation_set_static_row(m);
	struct slice sv = I(7);
	ck_assert_int_eq(
		storage_mutation_put(m, COL_S, NULL, 0, sv.ptr, 4, 5, 0, 1000),
		0);
	/* a regular column is refused in the static row */
	ck_assert_int_eq(
		storage_mutation_put(m, COL_V, NULL, 0, sv.ptr, 4, 5, 0, 1000),
		-1);
	struct slice ck = I(1);
	storage_mutation_set_row(m, &ck, 1);
	for (int k = 0; k < 4; k++) {
		struct slice kk = I(k), vv = I(k * 100);
		ck_assert_int_eq(storage_mutation_put(m, COL_M, kk.ptr, 4,
						      vv.ptr, 4, 5, 0, 1000),
				 0);
	}
	struct slice v = I(3);
	storage_mutation_put(m, COL_V, NULL, 0, v.ptr, 4, 5, 0, 1000);
	apply(&f, m);
	/* delete element 2, then the whole collection at 6 and add 9 at 7 */
	m = mut(&f, "p");
	storage_mutation_set_row(m, &ck, 1);
	struct slice k2 = I(2);
	storage_mutation_delete_cell(m, COL_M, k2.ptr, 4, 6, 1000);
	apply(&f, m);
	struct storage_result *r = rd(&f, "p", NULL, 1000);
	ck_assert_uint_eq(r->row_count, 1);
	ck_assert_uint_eq(r->rows[0].cell_count, 4); /* 3 elements + v */
	ck_assert_ptr_null(r->static_row);           /* not requested */
	storage_result_delete(r);

	m = mut(&f, "p");
	storage_mutation_set_row(m, &ck, 1);
	storage_mutation_delete_collection(m, COL_M, 6, 1000);
	struct slice k9 = I(9);
	storage_mutation_put(m, COL_M, k9.ptr, 4, k9.ptr, 4, 7, 0, 1000);
	apply(&f, m);
	uint16_t cols[] = {COL_M, COL_S};
	struct storage_read_cmd cmd = {
		.columns = cols, .column_count = 2, .with_static = true};
	r = rd(&f, "p", &cmd, 1000);
	ck_assert_uint_eq(r->row_count, 1);
	ck_assert_uint_eq(r->rows[0].cell_count, 1);
	ck_assert_int_eq(r->rows[0].cells[0].column, COL_M);
	ck_assert_int_eq(geti(r->rows[0].cells[0].path), 9);
	ck_assert_ptr_nonnull(r->static_row);
	ck_assert_uint_eq(r->static_row->cell_count, 1);
	ck_assert_int_eq(geti(r->static_row->cells[0].value), 7);
	storage_result_delete(r);
	teardown(&f);
}
END_TEST

START_TEST(ttl_expires_against_the_clock)
{
	struct fx f;
	setup(&f);
	put_row(&f, "p", 1, 1, 5, 10); /* expires at 1010 */
	put_row(&f, "p", 2, 2, 5, 0);
	struct storage_result *r = rd(&f, "p", NULL, 1009);
	ck_assert_uint_eq(r->row_count, 2);
	ck_assert_int_eq(r->rows[0].cells[0].expiry, 1010);
	ck_assert_int_eq(r->rows[0].cells[0].ttl, 10);
	storage_result_delete(r);
	r = rd(&f, "p", NULL, 1010);
	ck_assert_uint_eq(r->row_count, 1);
	ck_assert_int_eq(geti(r->rows[0].clustering[0]), 2);
	storage_result_delete(r);
	teardown(&f);
}
END_TEST

START_TEST(memory_is_accounted_and_overwrites_reconcile)
{
	struct fx f;
	setup(&f);
	size_t empty = memtable_bytes(f.mt);
	ck_assert_uint_eq(empty, f.mt->arena.allocated + sizeof(*f.mt));
	char key[16];
	for (int i = 0; i < 2000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put_row(&f, key, 0, i, 1, 0);
	}
	size_t full = memtable_bytes(f.mt);
	ck_assert_uint_gt(full, empty + 2000 * 40);
	ck_assert_uint_eq(full, f.mt->arena.allocated + sizeof(*f.mt));
	/* an older write loses and allocates nothing */
	put_row(&f, "k5", 0, 999, 0, 0);
	ck_assert_uint_eq(memtable_bytes(f.mt), full);
	struct storage_result *r = rd(&f, "k5", NULL, 1000);
	ck_assert_int_eq(geti(r->rows[0].cells[0].value), 5);
	storage_result_delete(r);
	/* partitions iterate in token order */
	int64_t prev = INT64_MIN;
	size_t n = 0;
	for (struct skiplist_node *x =
		     memtable_seek_token(f.mt, INT64_MIN, true);
	     x; x = skiplist_next(x), n++) {
		ck_assert_int_ge(mt_node_partition(x)->token, prev);
		prev = mt_node_partition(x)->token;
	}
	ck_assert_uint_eq(n, 2000);
	teardown(&f);
}
END_TEST

/* A reader that looks up the partitions already written while the writer
 * adds more (and the index grows under it): every one it looks for is
 * found, with its key. */
struct lookups {
	struct memtable *mt;
	_Atomic int written; /* partitions k0..k(written-1) are in */
	_Atomic bool stop;
	uint64_t found;
};

static void *reader(void *arg)
{
	struct lookups *l = arg;
	char key[16];
	unsigned x = 1;
	while (!atomic_load(&l->stop)) {
		int w = atomic_load(&l->written);
		if (w == 0)
			continue;
		x = x * 1103515245u + 12345u;
		int i = (int)(x % (unsigned)w);
		snprintf(key, sizeof(key), "k%d", i);
		struct slice k = slice_make(key, strlen(key));
		struct mt_partition *p =
			memtable_find(l->mt, murmur3_token(k.ptr, k.len), k);
		if (!p || !slice_eq(p->key, k))
			return (void *)1;
		l->found++;
	}
	return NULL;
}

START_TEST(hash_index_finds_every_partition_while_it_grows)
{
	struct fx f;
	setup(&f);
	struct lookups l = {.mt = f.mt};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, reader, &l), 0);
	char key[16];
	enum { N = 20000 };
	int grows = 0, published = 0;
	for (int i = 0; i < N; i++) {
		struct mt_index *before = atomic_load(&f.mt->index);
		bool growing = f.mt->growing != NULL;
		snprintf(key, sizeof(key), "k%d", i);
		put_row(&f, key, 0, i, 1, 0);
		atomic_store(&l.written, i + 1);
		struct mt_index *after = atomic_load(&f.mt->index);
		/* A larger copy is built over many inserts, never in one. */
		if (!growing && f.mt->growing)
			grows++;
		if (before && after != before) {
			ck_assert(growing);
			published++;
		}
		ck_assert_uint_le(8 * f.mt->indexed, 5 * after->cap);
	}
	ck_assert_int_ge(grows, 8);
	ck_assert_int_ge(published, grows - 1);
	atomic_store(&l.stop, true);
	void *bad;
	pthread_join(th, &bad);
	ck_assert_ptr_null(bad);
	ck_assert_uint_gt(l.found, 0);
	/* grown well past its first size */
	struct mt_index *ix = atomic_load(&f.mt->index);
	ck_assert_ptr_nonnull(ix);
	ck_assert_uint_ge(ix->cap, N);
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		struct slice k = slice_make(key, strlen(key));
		struct mt_partition *p =
			memtable_find(f.mt, murmur3_token(k.ptr, k.len), k);
		ck_assert_ptr_nonnull(p);
		ck_assert(slice_eq(p->key, k));
		snprintf(key, sizeof(key), "absent%d", i);
		k = slice_make(key, strlen(key));
		ck_assert_ptr_null(
			memtable_find(f.mt, murmur3_token(k.ptr, k.len), k));
	}
	/* overwrites find their partition through the index */
	put_row(&f, "k7", 0, 70, 2, 0);
	struct storage_result *r = rd(&f, "k7", NULL, 1000);
	ck_assert_int_eq(geti(r->rows[0].cells[0].value), 70);
	storage_result_delete(r);
	teardown(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_memtable");
	TCase *tc = tcase_create("memtable");
	tcase_add_test(tc, slices_reverse_and_limit);
	tcase_add_test(tc, tombstones_of_every_kind);
	tcase_add_test(tc, collections_static_and_projection);
	tcase_add_test(tc, ttl_expires_against_the_clock);
	tcase_add_test(tc, memory_is_accounted_and_overwrites_reconcile);
	tcase_add_test(tc, hash_index_finds_every_partition_while_it_grows);
	suite_add_tcase(s, tc);
	return test_run(s);
}
