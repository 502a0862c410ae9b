/* storage/type_tree.c and type_values.c: type nodes and their ownership,
 * CQL type text, nested collections, tuples, durations and vectors
 * (validation messages, Cassandra's comparators, canonical forms). */
#include "common/buf.h"
#include "common/err.h"
#include "storage/schema.h"
#include "storage/types.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIMPLE(k) storage_type_simple(STORAGE_TYPE_##k)

static const char *text_of(const struct storage_type *t)
{
	static char s[512];
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(storage_type_format(t, &b), 0);
	ck_assert_uint_lt(b.len, sizeof(s));
	memcpy(s, b.data, b.len);
	s[b.len] = '\0';
	buf_free(&b);
	return s;
}

static const char *check(const struct storage_type *t, const struct buf *b)
{
	if (storage_value_validate(t, b->data ? b->data : (const uint8_t *)"",
				   b->len) == 0)
		return "";
	ck_assert_int_eq(err_code(), ERR_INVALID);
	return err_msg();
}

static void put_elem(struct buf *b, const void *p, int32_t len)
{
	buf_put_be32(b, (uint32_t)len);
	if (len > 0)
		buf_append(b, p, (size_t)len);
}

static void int_elem(struct buf *b, int32_t v)
{
	uint8_t x[4];
	be32_store(x, (uint32_t)v);
	put_elem(b, x, 4);
}

static int cmp(const struct storage_type *t, const struct buf *a,
	       const struct buf *b)
{
	int c = storage_type_cmp(t, a->data, a->len, b->data, b->len);
	int r = storage_type_cmp(t, b->data, b->len, a->data, a->len);
	ck_assert_int_eq((c > 0) - (c < 0), -((r > 0) - (r < 0)));
	return (c > 0) - (c < 0);
}

START_TEST(types_are_shared_by_metas_and_freed_with_the_last)
{
	struct storage_type *inner = storage_type_new_collection(
		STORAGE_TYPE_SET, true, SIMPLE(INT), NULL);
	ck_assert_ptr_nonnull(inner);
	struct storage_type *outer = storage_type_new_collection(
		STORAGE_TYPE_MAP, false, SIMPLE(TEXT), inner);
	storage_type_unref(inner); /* outer holds it */
	ck_assert_str_eq(text_of(outer), "map<text, frozen<set<int>>>");
	uint8_t id[16] = {1};
	struct storage_table_meta *m = storage_table_meta_new("ks", "t", id);
	ck_assert_int_eq(storage_table_meta_add_column(
				 m, "k", STORAGE_COLUMN_PARTITION_KEY,
				 SIMPLE(INT), false),
			 0);
	ck_assert_int_eq(storage_table_meta_add_column(
				 m, "m", STORAGE_COLUMN_REGULAR, outer, false),
			 1);
	storage_type_unref(outer);
	/* a literal type on the stack is copied */
	struct storage_type l =
		STORAGE_TYPE_COLLECTION(STORAGE_TYPE_LIST, false, SIMPLE(BLOB));
	ck_assert_int_eq(storage_table_meta_add_column(
				 m, "l", STORAGE_COLUMN_REGULAR, &l, false),
			 2);
	ck_assert_ptr_ne(m->columns[2].type, &l);
	ck_assert_int_eq(m->columns[2].type->origin, STORAGE_TYPE_COUNTED);
	struct storage_table_meta *c = storage_table_meta_clone(m);
	ck_assert_ptr_eq(c->columns[1].type, m->columns[1].type);
	ck_assert_int_eq(storage_table_meta_check_successor(m, c), 0);
	storage_table_meta_delete(m);
	ck_assert_str_eq(text_of(c->columns[1].type),
			 "map<text, frozen<set<int>>>");
	storage_table_meta_delete(c); /* ASan: nothing leaks */
	/* key columns must be frozen */
	m = storage_table_meta_new("ks", "t", id);
	ck_assert_int_lt(
		storage_table_meta_add_column(
			m, "k", STORAGE_COLUMN_PARTITION_KEY, &l, false),
		0);
	storage_table_meta_delete(m);
}
END_TEST

START_TEST(type_text_is_cassandras)
{
	const struct storage_type *comps[2] = {SIMPLE(INT), SIMPLE(TEXT)};
	struct storage_type *tup = storage_type_new_tuple(comps, 2);
	ck_assert_str_eq(text_of(tup), "frozen<tuple<int, text>>");
	struct storage_type *lt = storage_type_new_collection(STORAGE_TYPE_LIST,
							      false, tup, NULL);
	ck_assert_str_eq(text_of(lt), "list<frozen<tuple<int, text>>>");
	struct storage_type *vec = storage_type_new_vector(SIMPLE(FLOAT), 3);
	ck_assert_str_eq(text_of(vec), "vector<float, 3>");
	ck_assert_uint_eq(storage_type_fixed_length(vec), 12);
	ck_assert_ptr_null(storage_type_new_vector(SIMPLE(FLOAT), 0));
	ck_assert_str_eq(err_msg(),
			 "vectors may only have positive dimentions; given 0");
	const char *names[2] = {"street", "Zip"};
	struct storage_type *udt =
		storage_type_new_udt("ks", "Address", names, comps, 2, true);
	ck_assert_str_eq(text_of(udt), "frozen<\"Address\">");
	ck_assert_str_eq(udt->field_names[1], "Zip");
	ck_assert(storage_type_contains(lt, STORAGE_TYPE_TEXT));
	ck_assert(!storage_type_contains(lt, STORAGE_TYPE_DURATION));
	const struct storage_type *unfrozen =
		storage_type_with_frozen(udt, false);
	ck_assert(storage_type_is_multicell(unfrozen));
	ck_assert(!storage_type_equal(unfrozen, udt));
	ck_assert_str_eq(text_of(unfrozen), "\"Address\"");
	ck_assert_str_eq(text_of(SIMPLE(DURATION)), "duration");
	storage_type_unref(unfrozen);
	storage_type_unref(udt);
	storage_type_unref(vec);
	storage_type_unref(lt);
	storage_type_unref(tup);
}
END_TEST

START_TEST(nested_collections_validate_compare_and_normalize)
{
	struct storage_type inner =
		STORAGE_TYPE_COLLECTION(STORAGE_TYPE_SET, true, SIMPLE(INT));
	struct storage_type list =
		STORAGE_TYPE_COLLECTION(STORAGE_TYPE_LIST, true, &inner);
	struct buf s1, s2, l, out;
	buf_init(&s1);
	buf_init(&s2);
	buf_init(&l);
	buf_init(&out);
	/* {3, 1, 3} and {2} */
	buf_put_be32(&s1, 3);
	int_elem(&s1, 3);
	int_elem(&s1, 1);
	int_elem(&s1, 3);
	buf_put_be32(&s2, 1);
	int_elem(&s2, 2);
	buf_put_be32(&l, 2);
	put_elem(&l, s1.data, (int32_t)s1.len);
	put_elem(&l, s2.data, (int32_t)s2.len);
	ck_assert_str_eq(check(&list, &l), "");
	/* the inner sets become sorted and distinct */
	ck_assert_int_eq(storage_value_normalize(&list, l.data, l.len, &out),
			 0);
	struct buf want;
	buf_init(&want);
	buf_put_be32(&want, 2);
	buf_put_be32(&want, 20);
	buf_put_be32(&want, 2);
	int_elem(&want, 1);
	int_elem(&want, 3);
	put_elem(&want, s2.data, (int32_t)s2.len);
	ck_assert_uint_eq(out.len, want.len);
	ck_assert_int_eq(memcmp(out.data, want.data, out.len), 0);
	/* [{1, 3}, {2}] < [{2}]: the first elements decide, {1,3} < {2} */
	struct buf l2;
	buf_init(&l2);
	buf_put_be32(&l2, 1);
	put_elem(&l2, s2.data, (int32_t)s2.len);
	ck_assert_int_eq(cmp(&list, &out, &l2), -1);
	/* a bad inner element names the inner type's problem */
	buf_clear(&l);
	buf_put_be32(&l, 1);
	put_elem(&l, "\0\0\0\1\0\0\0\4\0\0\0", 11);
	ck_assert_str_eq(check(&list, &l), "Not enough bytes to read a set");
	buf_free(&s1);
	buf_free(&s2);
	buf_free(&l);
	buf_free(&l2);
	buf_free(&out);
	buf_free(&want);
}
END_TEST

START_TEST(tuples_follow_tuple_type)
{
	const struct storage_type *comps[2] = {SIMPLE(INT), SIMPLE(TEXT)};
	struct storage_type tup = {.kind = STORAGE_TYPE_TUPLE,
				   .frozen = true,
				   .count = 2,
				   .sub = comps};
	struct buf a, b;
	buf_init(&a);
	buf_init(&b);
	int_elem(&a, 1);
	put_elem(&a, "x", 1);
	ck_assert_str_eq(check(&tup, &a), "");
	/* fewer components are allowed; more are not */
	int_elem(&b, 1);
	ck_assert_str_eq(check(&tup, &b), "");
	ck_assert_int_eq(cmp(&tup, &b, &a), -1);
	buf_clear(&b);
	int_elem(&b, 1);
	put_elem(&b, "x", 1);
	int_elem(&b, 2);
	ck_assert_str_eq(check(&tup, &b),
			 "Invalid remaining data after end of tuple value");
	buf_clear(&b);
	put_elem(&b, "abc", 3);
	ck_assert_str_eq(check(&tup, &b), "Expected 4 or 0 byte int (3)");
	buf_clear(&b);
	buf_append(&b, "\0\0", 2);
	ck_assert_str_eq(check(&tup, &b),
			 "Not enough bytes to read size of 0th component");
	buf_clear(&b);
	buf_append(&b, "\0\0\0\4\0", 5);
	ck_assert_str_eq(check(&tup, &b),
			 "Not enough bytes to read 0th component");
	/* order: component-wise, null first */
	buf_clear(&b);
	put_elem(&b, NULL, -1);
	put_elem(&b, "z", 1);
	ck_assert_str_eq(check(&tup, &b), "");
	ck_assert_int_eq(cmp(&tup, &b, &a), -1);
	buf_clear(&b);
	int_elem(&b, 1);
	put_elem(&b, "y", 1);
	ck_assert_int_eq(cmp(&tup, &a, &b), -1);
	buf_clear(&b);
	int_elem(&b, -5);
	put_elem(&b, "z", 1);
	ck_assert_int_eq(cmp(&tup, &b, &a), -1);
	/* a trailing null equals a missing component */
	buf_clear(&a);
	buf_clear(&b);
	int_elem(&a, 1);
	int_elem(&b, 1);
	put_elem(&b, NULL, -1);
	ck_assert_int_eq(cmp(&tup, &a, &b), 0);
	buf_free(&a);
	buf_free(&b);
}
END_TEST

START_TEST(vints_are_cassandras)
{
	static const struct {
		uint64_t v;
		const char *hex;
	} cases[] = {
		{0, "00"},         {127, "7f"},
		{128, "8080"},     {16383, "bfff"},
		{16384, "c04000"}, {UINT64_MAX, "ffffffffffffffffff"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct buf b;
		buf_init(&b);
		ck_assert_int_eq(storage_uvint_put(&b, cases[i].v), 0);
		char hex[32] = {0};
		for (size_t k = 0; k < b.len; k++)
			snprintf(hex + 2 * k, 3, "%02x", b.data[k]);
		ck_assert_str_eq(hex, cases[i].hex);
		uint64_t back = 1;
		ck_assert_uint_eq(storage_uvint_read(b.data, b.len, &back),
				  b.len);
		ck_assert_uint_eq(back, cases[i].v);
		ck_assert_uint_eq(storage_uvint_read(b.data, b.len - 1, &back),
				  0);
		buf_free(&b);
	}
	int64_t vals[] = {0, -1, 1, -64, 64, INT64_MIN, INT64_MAX};
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		struct buf b;
		buf_init(&b);
		storage_vint_put(&b, vals[i]);
		int64_t back = 7;
		ck_assert_uint_eq(storage_vint_read(b.data, b.len, &back),
				  b.len);
		ck_assert_int_eq(back, vals[i]);
		buf_free(&b);
	}
}
END_TEST

START_TEST(durations_validate_like_duration_serializer)
{
	const struct storage_type *d = SIMPLE(DURATION);
	struct buf b;
	buf_init(&b);
	struct storage_duration in = {1, 2, 3000000000ll}, out;
	ck_assert_int_eq(storage_duration_encode(&in, &b), 0);
	ck_assert_str_eq(check(d, &b), "");
	ck_assert_int_eq(storage_duration_decode(b.data, b.len, &out), 0);
	ck_assert_int_eq(out.months, 1);
	ck_assert_int_eq(out.days, 2);
	ck_assert_int_eq(out.nanos, 3000000000ll);
	buf_clear(&b);
	buf_append(&b, "\0\0", 2);
	ck_assert_str_eq(check(d, &b),
			 "Expected at least 3 bytes for a duration (2)");
	buf_clear(&b);
	storage_vint_put(&b, 1);
	storage_vint_put(&b, -1);
	storage_vint_put(&b, 0);
	ck_assert_str_eq(check(d, &b),
			 "The duration months, days and nanoseconds must be "
			 "all of the same sign (1, -1, 0)");
	buf_clear(&b);
	storage_vint_put(&b, 1ll << 40);
	storage_vint_put(&b, 0);
	storage_vint_put(&b, 0);
	ck_assert_str_eq(check(d, &b), "The duration months must be a 32 "
				       "bits integer but was: 1099511627776");
	buf_clear(&b);
	buf_append(&b, "\0\0\xff", 3);
	ck_assert_str_eq(check(d, &b), "Not enough bytes to read a duration");
	buf_free(&b);
}
END_TEST

START_TEST(vectors_pack_fixed_and_prefix_variable_elements)
{
	struct storage_type *vf = storage_type_new_vector(SIMPLE(FLOAT), 2);
	struct storage_type *vt = storage_type_new_vector(SIMPLE(TEXT), 2);
	struct buf a, b;
	buf_init(&a);
	buf_init(&b);
	buf_append(&a, "\x3f\x80\0\0\x40\0\0\0", 8); /* [1.0, 2.0] */
	ck_assert_str_eq(check(vf, &a), "");
	buf_append(&b, "\x3f\x80\0\0", 4);
	ck_assert_str_eq(check(vf, &b), "Not enough bytes to read a vector");
	buf_append(&b, "\xc0\0\0\0", 4); /* [1.0, -2.0] */
	ck_assert_int_eq(cmp(vf, &b, &a), -1);
	buf_append(&b, "\0", 1);
	ck_assert_str_eq(check(vf, &b),
			 "Unexpected extraneous bytes after vector value");
	buf_clear(&a);
	buf_append(&a,
		   "\x01"
		   "a"
		   "\x02"
		   "bc",
		   5);
	ck_assert_str_eq(check(vt, &a), "");
	buf_clear(&b);
	buf_append(&b,
		   "\x01"
		   "a"
		   "\x01"
		   "c",
		   4);
	ck_assert_int_eq(cmp(vt, &a, &b), -1);
	buf_clear(&b);
	buf_append(&b,
		   "\x01"
		   "a"
		   "\x05"
		   "c",
		   4);
	ck_assert_str_eq(check(vt, &b), "Not enough bytes to read a vector");
	storage_type_unref(vf);
	storage_type_unref(vt);
	buf_free(&a);
	buf_free(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_type_tree");
	TCase *tc = tcase_create("tree");
	tcase_add_test(tc, types_are_shared_by_metas_and_freed_with_the_last);
	tcase_add_test(tc, type_text_is_cassandras);
	tcase_add_test(tc, nested_collections_validate_compare_and_normalize);
	tcase_add_test(tc, tuples_follow_tuple_type);
	tcase_add_test(tc, vints_are_cassandras);
	tcase_add_test(tc, durations_validate_like_duration_serializer);
	tcase_add_test(tc, vectors_pack_fixed_and_prefix_variable_elements);
	suite_add_tcase(s, tc);
	return test_run(s);
}
