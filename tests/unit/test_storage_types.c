/* storage/types.c: Cassandra's validators (lengths, messages, the UTF-8
 * state machine's quirks), the frozen-collection comparators and the
 * canonical form of sets and maps (property-tested against a model). */
#include "common/buf.h"
#include "common/err.h"
#include "common/rand.h"
#include "storage/types.h"
#include "tests/lib/testutil.h"

#include <stdlib.h>
#include <string.h>

static uint64_t seed;

/* Validates and returns the message ("" when valid). */
static const char *check(uint16_t kind, const char *bytes, size_t len)
{
	if (storage_type_validate(kind, (const uint8_t *)bytes, len) == 0)
		return "";
	ck_assert_int_eq(err_code(), ERR_INVALID);
	return err_msg();
}

START_TEST(fixed_widths_and_their_messages)
{
	static const struct {
		uint16_t kind;
		size_t len;
		const char *msg; /* NULL: valid */
	} cases[] = {
		{STORAGE_TYPE_INT, 4, NULL},
		{STORAGE_TYPE_INT, 0, NULL},
		{STORAGE_TYPE_INT, 3, "Expected 4 or 0 byte int (3)"},
		{STORAGE_TYPE_BIGINT, 8, NULL},
		{STORAGE_TYPE_BIGINT, 0, NULL},
		{STORAGE_TYPE_BIGINT, 4, "Expected 8 or 0 byte long (4)"},
		{STORAGE_TYPE_SMALLINT, 2, NULL},
		{STORAGE_TYPE_SMALLINT, 0,
		 "Expected 2 bytes for a smallint (0)"},
		{STORAGE_TYPE_TINYINT, 1, NULL},
		{STORAGE_TYPE_TINYINT, 0, "Expected 1 byte for a tinyint (0)"},
		{STORAGE_TYPE_BOOLEAN, 0, NULL},
		{STORAGE_TYPE_BOOLEAN, 2, "Expected 1 or 0 byte value (2)"},
		{STORAGE_TYPE_FLOAT, 4, NULL},
		{STORAGE_TYPE_FLOAT, 8,
		 "Expected 4 or 0 byte value for a float (8)"},
		{STORAGE_TYPE_DOUBLE, 8, NULL},
		{STORAGE_TYPE_DOUBLE, 7,
		 "Expected 8 or 0 byte value for a double (7)"},
		{STORAGE_TYPE_TIMESTAMP, 0, NULL},
		{STORAGE_TYPE_TIMESTAMP, 4,
		 "Expected 8 or 0 byte long for date (4)"},
		{STORAGE_TYPE_DATE, 4, NULL},
		{STORAGE_TYPE_DATE, 0, "Expected 4 byte long for date (0)"},
		{STORAGE_TYPE_TIME, 8, NULL},
		{STORAGE_TYPE_TIME, 4, "Expected 8 byte long for time (4)"},
		{STORAGE_TYPE_UUID, 0, NULL},
		{STORAGE_TYPE_UUID, 3, "UUID should be 16 or 0 bytes (3)"},
		{STORAGE_TYPE_TIMEUUID, 15,
		 "UUID should be 16 or 0 bytes (15)"},
		{STORAGE_TYPE_DECIMAL, 0, NULL},
		{STORAGE_TYPE_DECIMAL, 4, NULL}, /* Cassandra accepts it */
		{STORAGE_TYPE_DECIMAL, 3, "Expected 0 or at least 4 bytes (3)"},
		{STORAGE_TYPE_VARINT, 0, NULL},
		{STORAGE_TYPE_VARINT, 3, NULL},
		{STORAGE_TYPE_BLOB, 5, NULL},
		{STORAGE_TYPE_INET, 4, NULL},
		{STORAGE_TYPE_INET, 16, NULL},
		{STORAGE_TYPE_INET, 0, NULL},
		{STORAGE_TYPE_INET, 3,
		 "Expected 4 or 16 byte inetaddress; got 000000"},
	};
	static const char zeros[32];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = check(cases[i].kind, zeros, cases[i].len);
		ck_assert_msg(strcmp(got, cases[i].msg ? cases[i].msg : "") ==
				      0,
			      "type 0x%x, %zu bytes: '%s'", cases[i].kind,
			      cases[i].len, got);
	}
	char v0[16] = {0}, v1[16] = {0};
	v1[6] = 0x11;
	ck_assert_str_eq(check(STORAGE_TYPE_TIMEUUID, v0, 16),
			 "Invalid version for TimeUUID type.");
	ck_assert_str_eq(check(STORAGE_TYPE_TIMEUUID, v1, 16), "");
	ck_assert_str_eq(check(STORAGE_TYPE_UUID, v0, 16), "");
	ck_assert_str_eq(check(STORAGE_TYPE_ASCII, "ok\x7f", 3), "");
	ck_assert_str_eq(check(STORAGE_TYPE_ASCII, "caf\xc3\xa9", 5),
			 "Invalid byte for ascii: -61");
	ck_assert_int_eq(storage_type_validate(STORAGE_TYPE_LIST, NULL, 0), -1);
}
END_TEST

START_TEST(text_is_cassandras_utf8_not_rfc3629)
{
	static const struct {
		const char *bytes;
		bool ok;
	} cases[] = {
		{"", true},
		{"plain", true},
		{"\xc3\xa9", true},
		{"\xe2\x82\xac", true},
		{"\xf0\x9f\x98\x80", true},
		/* Cassandra's quirks: accepted */
		{"\xc0\x80", true},         /* modified UTF-8 NUL */
		{"\xed\xa0\x80", true},     /* a surrogate */
		{"\xf4\x90\x80\x80", true}, /* above U+10FFFF */
		{"\xf5\x80\x80\x80", true}, /* F5 lead */
		{"\xf7\xbf\xbf\xbf", true},
		{"\xe0\x41\x80", true}, /* E0 then any byte but 80..9F */
		/* refused */
		{"\xff", false},
		{"\x80", false},
		{"\xc1\x81", false},
		{"\xc0\x81", false},
		{"\xc3", false},
		{"\xe2\x82", false},
		{"\xe0\x80\x80", false}, /* overlong */
		{"\xe0\x9f\x80", false},
		{"\xf0\x80\x80\x80", false},
		{"\xf8\x88\x80\x80\x80", false},
		{"a\xc3(", false},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *b = cases[i].bytes;
		const char *got = check(STORAGE_TYPE_TEXT, b, strlen(b));
		ck_assert_msg(strcmp(got, cases[i].ok ? ""
						      : "String didn't "
							"validate.") == 0,
			      "case %zu: '%s'", i, got);
		ck_assert(storage_utf8_valid((const uint8_t *)b, strlen(b)) ==
			  cases[i].ok);
	}
}
END_TEST

/* ---- collections --------------------------------------------------------- */

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

static const char *check_type(const struct storage_type *t, const struct buf *b)
{
	if (storage_value_validate(t, b->data ? b->data : (const uint8_t *)"",
				   b->len) == 0)
		return "";
	return err_msg();
}

START_TEST(collections_check_framing_and_elements)
{
	struct storage_type list = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_LIST, true, storage_type_simple(STORAGE_TYPE_INT));
	struct storage_type set = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_SET, true, storage_type_simple(STORAGE_TYPE_TEXT));
	struct storage_type map = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_MAP, true, storage_type_simple(STORAGE_TYPE_INT),
		storage_type_simple(STORAGE_TYPE_ASCII));
	struct buf b;
	buf_init(&b);
	ck_assert_str_eq(check_type(&list, &b),
			 "Not enough bytes to read a list");
	buf_put_be32(&b, 2);
	int_elem(&b, 1);
	int_elem(&b, 2);
	ck_assert_str_eq(check_type(&list, &b), "");
	b.len--;
	ck_assert_str_eq(check_type(&list, &b),
			 "Not enough bytes to read a list");
	buf_clear(&b);
	buf_put_be32(&b, 1);
	put_elem(&b, "abc", 3);
	ck_assert_str_eq(check_type(&list, &b), "Expected 4 or 0 byte int (3)");
	buf_clear(&b);
	buf_put_be32(&b, 0);
	buf_put_u8(&b, 0);
	ck_assert_str_eq(check_type(&set, &b),
			 "Unexpected extraneous bytes after set value");
	buf_clear(&b);
	buf_put_be32(&b, 1);
	put_elem(&b, NULL, -1);
	ck_assert_str_eq(check_type(&set, &b),
			 "null is not supported inside collections");
	/* an IN list may hold nulls */
	struct storage_type tl =
		STORAGE_TYPE_COLLECTION(STORAGE_TYPE_LIST, true,
					storage_type_simple(STORAGE_TYPE_TEXT));
	ck_assert_int_eq(storage_elements_validate(&tl, b.data, b.len, true),
			 0);
	buf_clear(&b);
	buf_put_be32(&b, 0xffffffff);
	ck_assert_str_eq(check_type(&set, &b),
			 "The data cannot be deserialized as a set");
	buf_clear(&b);
	buf_put_be32(&b, 1);
	int_elem(&b, 7);
	put_elem(&b, "\xc3", 1);
	ck_assert_str_eq(check_type(&map, &b), "Invalid byte for ascii: -61");
	buf_free(&b);
}
END_TEST

/* A random serialized list/set of ints (few distinct values, so repeats
 * and equal prefixes are common), its values in `vals`. */
static void random_ints(struct rng *r, struct buf *b, int32_t *vals, size_t *n)
{
	*n = rng_below(r, 5);
	buf_clear(b);
	buf_put_be32(b, (uint32_t)*n);
	for (size_t i = 0; i < *n; i++) {
		vals[i] = (int32_t)rng_below(r, 7) - 3;
		int_elem(b, vals[i]);
	}
}

static int model_cmp(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
	for (size_t i = 0; i < na && i < nb; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return na < nb ? -1 : na > nb;
}

static int sign(int x)
{
	return (x > 0) - (x < 0);
}

START_TEST(frozen_lists_compare_element_by_element)
{
	/* Cassandra's ListType.compareListOrSet: elements by the element
	 * type (-1 < 1, unlike their bytes), then the shorter first. */
	struct rng r;
	rng_seed(&r, seed);
	struct storage_type list = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_LIST, true, storage_type_simple(STORAGE_TYPE_INT));
	struct buf a, b;
	buf_init(&a);
	buf_init(&b);
	for (int i = 0; i < 5000; i++) {
		int32_t va[8], vb[8];
		size_t na, nb;
		random_ints(&r, &a, va, &na);
		random_ints(&r, &b, vb, &nb);
		int want = model_cmp(va, na, vb, nb);
		int got = storage_type_cmp(&list, a.data, a.len, b.data, b.len);
		ck_assert_int_eq(sign(got), want);
		ck_assert_int_eq(sign(storage_type_cmp(&list, b.data, b.len,
						       a.data, a.len)),
				 -want);
	}
	/* empty value first */
	ck_assert_int_lt(storage_type_cmp(&list, NULL, 0, a.data, a.len), 0);
	buf_free(&a);
	buf_free(&b);
}
END_TEST

static int int_cmp(const void *x, const void *y)
{
	int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
	return (a > b) - (a < b);
}

START_TEST(sets_normalise_to_sorted_distinct_elements)
{
	struct rng r;
	rng_seed(&r, seed + 1);
	struct storage_type set = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_SET, true, storage_type_simple(STORAGE_TYPE_INT));
	struct buf in, out, again, want;
	buf_init(&in);
	buf_init(&out);
	buf_init(&again);
	buf_init(&want);
	for (int i = 0; i < 3000; i++) {
		int32_t v[8];
		size_t n;
		random_ints(&r, &in, v, &n);
		buf_clear(&out);
		ck_assert_int_eq(
			storage_value_normalize(&set, in.data, in.len, &out),
			0);
		qsort(v, n, sizeof(v[0]), int_cmp);
		size_t k = 0;
		for (size_t j = 0; j < n; j++)
			if (k == 0 || v[k - 1] != v[j])
				v[k++] = v[j];
		buf_clear(&want);
		buf_put_be32(&want, (uint32_t)k);
		for (size_t j = 0; j < k; j++)
			int_elem(&want, v[j]);
		ck_assert_uint_eq(out.len, want.len);
		ck_assert_mem_eq(out.data, want.data, want.len);
		buf_clear(&again);
		ck_assert_int_eq(storage_value_normalize(&set, out.data,
							 out.len, &again),
				 0);
		ck_assert_mem_eq(again.data, out.data, out.len);
	}
	buf_free(&in);
	buf_free(&out);
	buf_free(&again);
	buf_free(&want);
}
END_TEST

START_TEST(maps_keep_the_last_value_of_a_repeated_key)
{
	struct storage_type map = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_MAP, true, storage_type_simple(STORAGE_TYPE_INT),
		storage_type_simple(STORAGE_TYPE_TEXT));
	struct buf in, out, want;
	buf_init(&in);
	buf_init(&out);
	buf_init(&want);
	buf_put_be32(&in, 3);
	int_elem(&in, 2);
	put_elem(&in, "x", 1);
	int_elem(&in, -1);
	put_elem(&in, "y", 1);
	int_elem(&in, 2);
	put_elem(&in, "z", 1);
	ck_assert_int_eq(storage_value_normalize(&map, in.data, in.len, &out),
			 0);
	buf_put_be32(&want, 2);
	int_elem(&want, -1);
	put_elem(&want, "y", 1);
	int_elem(&want, 2);
	put_elem(&want, "z", 1);
	ck_assert_uint_eq(out.len, want.len);
	ck_assert_mem_eq(out.data, want.data, want.len);
	/* maps compare key, then value, then size */
	struct buf a;
	buf_init(&a);
	buf_put_be32(&a, 2);
	int_elem(&a, -1);
	put_elem(&a, "y", 1);
	int_elem(&a, 2);
	put_elem(&a, "a", 1);
	ck_assert_int_gt(
		storage_type_cmp(&map, out.data, out.len, a.data, a.len), 0);
	buf_free(&a);
	buf_free(&in);
	buf_free(&out);
	buf_free(&want);
}
END_TEST

START_TEST(decimals_and_varints_compare_by_value)
{
	/* 123E1 (unscaled 123, scale -1) == 1230 (scale 0) == 1230.0 */
	const uint8_t e1[] = {0xff, 0xff, 0xff, 0xff, 123};
	const uint8_t plain[] = {0, 0, 0, 0, 0x04, 0xce};
	const uint8_t tenth[] = {0, 0, 0, 1, 0x30, 0x0c};
	ck_assert_int_eq(storage_value_cmp(STORAGE_TYPE_DECIMAL, e1, sizeof(e1),
					   plain, sizeof(plain)),
			 0);
	ck_assert_int_eq(storage_value_cmp(STORAGE_TYPE_DECIMAL, tenth,
					   sizeof(tenth), plain, sizeof(plain)),
			 0);
	/* a non-minimal varint equals the minimal one */
	const uint8_t one[] = {1}, padded[] = {0, 0, 1};
	ck_assert_int_eq(
		storage_value_cmp(STORAGE_TYPE_VARINT, one, 1, padded, 3), 0);
}
END_TEST

int main(void)
{
	seed = test_seed(23);
	Suite *s = suite_create("storage_types");
	TCase *tc = tcase_create("types");
	tcase_add_test(tc, fixed_widths_and_their_messages);
	tcase_add_test(tc, text_is_cassandras_utf8_not_rfc3629);
	tcase_add_test(tc, collections_check_framing_and_elements);
	tcase_add_test(tc, frozen_lists_compare_element_by_element);
	tcase_add_test(tc, sets_normalise_to_sorted_distinct_elements);
	tcase_add_test(tc, maps_keep_the_last_value_of_a_repeated_key);
	tcase_add_test(tc, decimals_and_varints_compare_by_value);
	suite_add_tcase(s, tc);
	return test_run(s);
}
