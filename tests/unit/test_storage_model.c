/* storage data model: tokens, per-type orders, clustering, reconcile
 * (property-tested), and the mutation encoding. */
#include "common/err.h"
#include "common/murmur3.h"
#include "common/rand.h"
#include "storage/atom_internal.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed;

START_TEST(token_matches_cassandra)
{
	/* Values from python3-cassandra's Murmur3Token.from_key. */
	struct {
		const char *key;
		size_t len;
		int64_t token;
	} cases[] = {
		{"hello", 5, -3758069500696749310LL},
		{"", 0, 0},
		{"a", 1, -8839064797231613815LL},
		{"\xff\xfe\x80"
		 "abcdefghijklmnopq",
		 20, 8049054078245769369LL},
		{"0123456789abcdef", 16, 5467490433528156583LL},
		{"key-000000000001", 16, -5276510888002631797LL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_int_eq(murmur3_token((const uint8_t *)cases[i].key,
					       cases[i].len),
				 cases[i].token);
}
END_TEST

static int cmp(uint16_t kind, const void *a, size_t al, const void *b,
	       size_t bl)
{
	return storage_value_cmp(kind, a, al, b, bl);
}

START_TEST(numbers_compare_signed)
{
	uint8_t m1[4] = {0xff, 0xff, 0xff, 0xff}, p1[4] = {0, 0, 0, 1};
	ck_assert_int_lt(cmp(STORAGE_TYPE_INT, m1, 4, p1, 4), 0);
	ck_assert_int_gt(cmp(STORAGE_TYPE_BLOB, m1, 4, p1, 4), 0);
	/* varint: -1 (ff) < 127 (7f) < 128 (00 80) < 256 (01 00) */
	uint8_t vm1[1] = {0xff}, v127[1] = {0x7f}, v128[2] = {0, 0x80},
		v256[2] = {1, 0}, vm200[2] = {0xff, 0x38};
	ck_assert_int_lt(cmp(STORAGE_TYPE_VARINT, vm1, 1, v127, 1), 0);
	ck_assert_int_lt(cmp(STORAGE_TYPE_VARINT, v127, 1, v128, 2), 0);
	ck_assert_int_lt(cmp(STORAGE_TYPE_VARINT, v128, 2, v256, 2), 0);
	ck_assert_int_lt(cmp(STORAGE_TYPE_VARINT, vm200, 2, vm1, 1), 0);
	/* decimal: 1.5 (15, scale 1) < 2 (2, scale 0) > 1.99 */
	uint8_t d15[5] = {0, 0, 0, 1, 15}, d2[5] = {0, 0, 0, 0, 2},
		d199[5] = {0, 0, 0, 2, 199 - 256};
	uint8_t d199b[6] = {0, 0, 0, 2, 0, 199};
	(void)d199;
	ck_assert_int_lt(cmp(STORAGE_TYPE_DECIMAL, d15, 5, d2, 5), 0);
	ck_assert_int_gt(cmp(STORAGE_TYPE_DECIMAL, d2, 5, d199b, 6), 0);
	uint8_t d20[5] = {0, 0, 0, 1, 20};
	ck_assert_int_eq(cmp(STORAGE_TYPE_DECIMAL, d20, 5, d2, 5), 0);
	/* double: -1 < -0.0 < 0.0 < 1 < NaN */
	double ds[] = {-1.0, -0.0, 0.0, 1.0, NAN};
	uint8_t enc[5][8];
	for (int i = 0; i < 5; i++) {
		uint64_t bits;
		memcpy(&bits, &ds[i], 8);
		for (int j = 0; j < 8; j++)
			enc[i][j] = (uint8_t)(bits >> (56 - 8 * j));
	}
	for (int i = 0; i < 4; i++)
		ck_assert_int_lt(
			cmp(STORAGE_TYPE_DOUBLE, enc[i], 8, enc[i + 1], 8), 0);
	/* empty sorts first */
	ck_assert_int_lt(cmp(STORAGE_TYPE_INT, "", 0, m1, 4), 0);
}
END_TEST

static void make_timeuuid(uint8_t out[16], uint64_t t, uint8_t low0)
{
	memset(out, 0, 16);
	uint32_t tl = (uint32_t)t;
	uint16_t tm = (uint16_t)(t >> 32);
	uint16_t th = (uint16_t)((t >> 48) & 0x0fff) | 0x1000;
	out[0] = (uint8_t)(tl >> 24);
	out[1] = (uint8_t)(tl >> 16);
	out[2] = (uint8_t)(tl >> 8);
	out[3] = (uint8_t)tl;
	out[4] = (uint8_t)(tm >> 8);
	out[5] = (uint8_t)tm;
	out[6] = (uint8_t)(th >> 8);
	out[7] = (uint8_t)th;
	out[8] = low0;
}

START_TEST(timeuuid_orders_by_embedded_time)
{
	uint8_t a[16], b[16], c[16];
	/* a's time_low is larger but its time_hi smaller: time decides. */
	make_timeuuid(a, 0x0000000100000000ULL + 0xffffffff, 0);
	make_timeuuid(b, 0x0000000200000000ULL, 0);
	ck_assert_int_lt(cmp(STORAGE_TYPE_TIMEUUID, a, 16, b, 16), 0);
	ck_assert_int_gt(cmp(STORAGE_TYPE_BLOB, a, 16, b, 16), 0);
	/* equal time: low half compared as signed bytes (0x80 < 0x01) */
	make_timeuuid(c, 0x0000000200000000ULL, 0x80);
	make_timeuuid(b, 0x0000000200000000ULL, 0x01);
	ck_assert_int_lt(cmp(STORAGE_TYPE_TIMEUUID, c, 16, b, 16), 0);
}
END_TEST

static struct storage_table_meta *ck_table(void)
{
	uint8_t id[16] = {1};
	struct storage_table_meta *t = storage_table_meta_new("ks", "t", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(t, "a", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "b", STORAGE_COLUMN_CLUSTERING, &ti,
				      true);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &tx,
				      false);
	return t;
}

static struct slice enc_ck(struct buf *b, int a, int bb, size_t n)
{
	uint8_t va[4], vb[4];
	be32_store(va, (uint32_t)a);
	be32_store(vb, (uint32_t)bb);
	struct slice vals[2] = {slice_make(va, 4), slice_make(vb, 4)};
	buf_clear(b);
	storage_ck_encode(b, CK_ROW, vals, n);
	return buf_slice(b);
}

START_TEST(clustering_composite_asc_desc_and_prefix)
{
	struct storage_table_meta *t = ck_table();
	struct buf x, y;
	buf_init(&x);
	buf_init(&y);
	/* a ASC, then b DESC */
	ck_assert_int_lt(
		storage_ck_cmp(t, enc_ck(&x, -5, 0, 2), enc_ck(&y, 3, 9, 2)),
		0);
	ck_assert_int_gt(
		storage_ck_cmp(t, enc_ck(&x, 3, 1, 2), enc_ck(&y, 3, 9, 2)), 0);
	ck_assert_int_eq(
		storage_ck_cmp(t, enc_ck(&x, 3, 9, 2), enc_ck(&y, 3, 9, 2)), 0);
	/* prefix (a=3) contains (3, x) */
	ck_assert_int_eq(storage_ck_cmp_prefix(t, enc_ck(&x, 3, 7, 2),
					       enc_ck(&y, 3, 0, 1)),
			 0);
	ck_assert(storage_ck_after_start(t, enc_ck(&x, 3, 7, 2),
					 enc_ck(&y, 3, 0, 1), true));
	ck_assert(!storage_ck_after_start(t, enc_ck(&x, 3, 7, 2),
					  enc_ck(&y, 3, 0, 1), false));
	uint8_t st = CK_STATIC;
	ck_assert_int_lt(
		storage_ck_cmp(t, slice_make(&st, 1), enc_ck(&y, -9, 0, 2)), 0);
	buf_free(&x);
	buf_free(&y);
	storage_table_meta_delete(t);
}
END_TEST

static const uint8_t vals[4][2] = {{'a', 0}, {'b', 0}, {'a', 'b'}, {0, 0}};

static struct atom random_atom(struct rng *r)
{
	struct atom a = {0};
	static const uint8_t ck[1] = {CK_ROW};
	a.ck = slice_make(ck, 1);
	a.slot = 1;
	a.kind = ATOM_KIND_LIVE;
	a.ts = (int64_t)rng_below(r, 3);
	switch (rng_below(r, 3)) {
	case 0:
		a.flags = ATOM_TOMBSTONE;
		a.ldt = (int64_t)rng_below(r, 3);
		break;
	case 1:
		a.flags = ATOM_EXPIRING;
		a.ttl = (int32_t)rng_below(r, 2) + 1;
		a.ldt = (int64_t)rng_below(r, 3);
		/* fall through */
	default:
		a.value = slice_make(vals[rng_below(r, 4)], rng_below(r, 3));
		break;
	}
	return a;
}

static bool atom_same(const struct atom *a, const struct atom *b)
{
	return a->ts == b->ts && a->flags == b->flags && a->ldt == b->ldt &&
	       a->ttl == b->ttl && slice_eq(a->value, b->value);
}

START_TEST(reconcile_is_commutative_associative_idempotent)
{
	struct rng r;
	rng_seed(&r, seed);
	for (int i = 0; i < 200000; i++) {
		struct atom a = random_atom(&r), b = random_atom(&r),
			    c = random_atom(&r);
		ck_assert(atom_same(storage_atom_reconcile(&a, &b),
				    storage_atom_reconcile(&b, &a)));
		ck_assert(atom_same(storage_atom_reconcile(&a, &a), &a));
		const struct atom *ab_c = storage_atom_reconcile(
			storage_atom_reconcile(&a, &b), &c);
		const struct atom *a_bc = storage_atom_reconcile(
			&a, storage_atom_reconcile(&b, &c));
		ck_assert(atom_same(ab_c, a_bc));
	}
}
END_TEST

START_TEST(reconcile_follows_cassandra_tie_breaks)
{
	struct atom live = {.ts = 5, .value = slice_make("z", 1)};
	struct atom older = {.ts = 4, .flags = ATOM_TOMBSTONE, .ldt = 9};
	struct atom tomb = {.ts = 5, .flags = ATOM_TOMBSTONE, .ldt = 1};
	struct atom exp1 = {.ts = 5,
			    .flags = ATOM_EXPIRING,
			    .ttl = 1,
			    .ldt = 10,
			    .value = slice_make("a", 1)};
	struct atom exp2 = {.ts = 5,
			    .flags = ATOM_EXPIRING,
			    .ttl = 1,
			    .ldt = 11,
			    .value = slice_make("a", 1)};
	struct atom big = {.ts = 5, .value = slice_make("zz", 2)};
	ck_assert_ptr_eq(storage_atom_reconcile(&live, &older), &live);
	ck_assert_ptr_eq(storage_atom_reconcile(&live, &tomb), &tomb);
	ck_assert_ptr_eq(storage_atom_reconcile(&live, &exp1), &exp1);
	ck_assert_ptr_eq(storage_atom_reconcile(&exp2, &exp1), &exp2);
	ck_assert_ptr_eq(storage_atom_reconcile(&live, &big), &big);
}
END_TEST

static struct storage_mutation *sample_mutation(struct storage_table_meta *t)
{
	struct storage_mutation *m =
		storage_mutation_new(t, (const uint8_t *)"k1", 2);
	uint8_t a[4] = {0, 0, 0, 1}, b[4] = {0, 0, 0, 2};
	struct slice ck[2] = {slice_make(a, 4), slice_make(b, 4)};
	ck_assert_int_eq(storage_mutation_set_row(m, ck, 2), 0);
	ck_assert_int_eq(storage_mutation_put_marker(m, 10, 0, 100), 0);
	ck_assert_int_eq(storage_mutation_put(m, 3, NULL, 0,
					      (const uint8_t *)"hi", 2, 10, 60,
					      100),
			 0);
	ck_assert_int_eq(storage_mutation_delete_row(m, 9, 100), 0);
	ck_assert_int_eq(storage_mutation_delete_range(m, ck, 1, true, ck, 2,
						       false, 8, 100),
			 0);
	ck_assert_int_eq(storage_mutation_delete_partition(m, 7, 100), 0);
	/* key columns cannot take cells */
	ck_assert_int_eq(storage_mutation_put(m, 1, NULL, 0, a, 4, 1, 0, 0),
			 -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	return m;
}

START_TEST(mutation_round_trips_and_rejects_damage)
{
	struct storage_table_meta *t = ck_table();
	struct storage_mutation *m = sample_mutation(t);
	struct buf b, b2;
	buf_init(&b);
	buf_init(&b2);
	ck_assert_int_eq(storage_mutation_encode(m, &b), 0);
	struct storage_mutation *d = storage_mutation_decode(b.data, b.len);
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(storage_mutation_token(d), storage_mutation_token(m));
	ck_assert_int_eq(storage_mutation_encode(d, &b2), 0);
	ck_assert_uint_eq(b.len, b2.len);
	ck_assert_int_eq(memcmp(b.data, b2.data, b.len), 0);
	storage_mutation_delete(d);
	/* Every single-byte flip and every truncation is rejected. */
	for (size_t i = 0; i < b.len; i++) {
		b.data[i] ^= 0x10;
		ck_assert_ptr_null(storage_mutation_decode(b.data, b.len));
		ck_assert_int_eq(err_code(), ERR_CORRUPT);
		b.data[i] ^= 0x10;
		ck_assert_ptr_null(storage_mutation_decode(b.data, i));
	}
	buf_free(&b);
	buf_free(&b2);
	storage_mutation_delete(m);
	storage_table_meta_delete(t);
}
END_TEST

int main(void)
{
	seed = test_seed(42);
	Suite *s = suite_create("storage_model");
	TCase *tc = tcase_create("model");
	tcase_add_test(tc, token_matches_cassandra);
	tcase_add_test(tc, numbers_compare_signed);
	tcase_add_test(tc, timeuuid_orders_by_embedded_time);
	tcase_add_test(tc, clustering_composite_asc_desc_and_prefix);
	tcase_add_test(tc, reconcile_is_commutative_associative_idempotent);
	tcase_add_test(tc, reconcile_follows_cassandra_tie_breaks);
	tcase_add_test(tc, mutation_round_trips_and_rejects_damage);
	suite_add_tcase(s, tc);
	return test_run(s);
}
