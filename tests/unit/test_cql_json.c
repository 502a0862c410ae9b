/* client/cql_json: JSON text and Cassandra 4.1's per-type JSON encodings. */
#include "client/cql/cql_json.h"
#include "common/arena.h"
#include "common/err.h"
#include "common/rand.h"
#include "storage/types.h"
#include "tests/lib/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct arena arena;
static uint64_t seed;

static void setup(void)
{
	arena_create(&arena, 0);
}

static void teardown(void)
{
	arena_destroy(&arena);
}

#define T(k) ((struct cql_json_type){.kind = (k)})

static const struct cql_json_type t_int = {.kind = STORAGE_TYPE_INT};
static const struct cql_json_type t_text = {.kind = STORAGE_TYPE_TEXT};
static const struct cql_json_type t_bool = {.kind = STORAGE_TYPE_BOOLEAN};
static const struct cql_json_type t_uuid = {.kind = STORAGE_TYPE_UUID};

static const struct cql_json *parse_ok(const char *s)
{
	const struct cql_json *j;
	ck_assert_msg(cql_json_parse(s, strlen(s), &arena, &j) == 0, "%s: %s",
		      s, err_msg());
	return j;
}

/* JSON in -> value bytes -> JSON out. */
static void round_trip(const struct cql_json_type *t, const char *in,
		       const char *want)
{
	struct buf v = {0}, out = {0};
	int rc = cql_json_decode(t, parse_ok(in), &arena, &v);
	ck_assert_msg(rc == 0, "decode %s: %d %s", in, rc, err_msg());
	ck_assert_msg(cql_json_format(t, v.data, v.len, &out) == 0,
		      "format %s: %s", in, err_msg());
	ck_assert_msg(out.len == strlen(want) &&
			      memcmp(out.data, want, out.len) == 0,
		      "%s -> '%.*s', want '%s'", in, (int)out.len,
		      (const char *)out.data, want);
	buf_free(&v);
	buf_free(&out);
}

static void decode_fails(const struct cql_json_type *t, const char *in,
			 const char *msg)
{
	struct buf v = {0};
	int rc = cql_json_decode(t, parse_ok(in), &arena, &v);
	ck_assert_msg(rc == -1, "accepted %s", in);
	ck_assert_msg(v.len == 0, "bytes left behind for %s", in);
	ck_assert_msg(strncmp(err_msg(), msg, strlen(msg)) == 0,
		      "%s: '%s', want '%s'", in, err_msg(), msg);
	buf_free(&v);
}

static void format_is(const struct cql_json_type *t, const void *v, size_t len,
		      const char *want)
{
	struct buf out = {0};
	ck_assert_int_eq(cql_json_format(t, v, len, &out), 0);
	ck_assert_msg(out.len == strlen(want) &&
			      memcmp(out.data, want, out.len) == 0,
		      "'%.*s', want '%s'", (int)out.len, (const char *)out.data,
		      want);
	buf_free(&out);
}

START_TEST(numbers_as_cassandra_prints_and_reads_them)
{
	round_trip(&t_int, "123", "123");
	round_trip(&t_int, "\"-123\"", "-123");
	round_trip(&t_int, "-2147483648", "-2147483648");
	decode_fails(&t_int, "2147483648",
		     "Expected an int value, but got a Long: 2147483648");
	decode_fails(&t_int, "123.456",
		     "Expected an int value, but got a Double: 123.456");
	decode_fails(&t_int, "true",
		     "Expected an int value, but got a Boolean: true");
	decode_fails(&t_int, "\"xyzz\"", "Unable to make int from 'xyzz'");
	decode_fails(&t_int, "[1]",
		     "Expected an int value, but got a ArrayList: [1]");

	struct cql_json_type t = T(STORAGE_TYPE_BIGINT);
	round_trip(&t, "123123123123", "123123123123");
	round_trip(&t, "\"-9223372036854775808\"", "-9223372036854775808");
	decode_fails(&t, "9223372036854775808",
		     "Expected a bigint value, but got a BigInteger: "
		     "9223372036854775808");
	decode_fails(&t, "\"abc\"", "Unable to make long from 'abc'");

	t = T(STORAGE_TYPE_SMALLINT);
	round_trip(&t, "32767", "32767");
	round_trip(&t, "\"-32768\"", "-32768");
	decode_fails(&t, "32768", "Unable to make short from '32768'");
	decode_fails(&t, "123.456", "Unable to make short from '123.456'");
	decode_fails(&t, "true",
		     "Expected a short value, but got a Boolean: true");
	t = T(STORAGE_TYPE_TINYINT);
	round_trip(&t, "-128", "-128");
	decode_fails(&t, "128", "Unable to make byte from '128'");

	t = T(STORAGE_TYPE_VARINT);
	round_trip(&t, "\"1234567890123456789012345678901234567890\"",
		   "1234567890123456789012345678901234567890");
	round_trip(&t, "-123123123123123123123", "-123123123123123123123");
	round_trip(&t, "0", "0");
	round_trip(&t, "-1", "-1");
	round_trip(&t, "255", "255");
	round_trip(&t, "-256", "-256");
	decode_fails(&t, "123123.123",
		     "Value '123123.123' is not a valid representation of a "
		     "varint value");
	decode_fails(&t, "\"\"", "Value '' is not a valid representation");
	decode_fails(&t, "true", "Value 'true' is not a valid representation");

	t = T(STORAGE_TYPE_DECIMAL);
	round_trip(&t, "123123.123123", "123123.123123");
	round_trip(&t, "123123", "123123");
	round_trip(&t, "\"-1.23E-12\"", "-1.23E-12");
	round_trip(&t, "\"1E+3\"", "1E+3");
	round_trip(&t, "\"0.000001\"", "0.000001");
	round_trip(&t, "\"0.0000001\"", "1E-7");
	round_trip(&t, "\"-0.5\"", "-0.5");
	round_trip(&t, "\"12345678901234567890.123456789\"",
		   "12345678901234567890.123456789");
	round_trip(&t, "1e10", "1.0E+10"); /* a Double: 1.0E10 as text */
	decode_fails(&t, "\"xyzz\"",
		     "Value 'xyzz' is not a valid representation of a decimal "
		     "value");
	decode_fails(&t, "true", "Value 'true' is not a valid representation");

	t = T(STORAGE_TYPE_DOUBLE);
	round_trip(&t, "123123.123123", "123123.123123");
	round_trip(&t, "123123", "123123.0");
	round_trip(&t, "\"123123\"", "123123.0");
	round_trip(&t, "1e10", "1.0E10");
	round_trip(&t, "0.001", "0.001");
	round_trip(&t, "0.0001", "1.0E-4");
	round_trip(&t, "1234567", "1234567.0");
	round_trip(&t, "12345678", "1.2345678E7");
	round_trip(&t, "-0.0", "-0.0");
	round_trip(&t, "0.1", "0.1");
	round_trip(&t, "\"NaN\"", "null");
	round_trip(&t, "\"-Infinity\"", "null");
	decode_fails(&t, "\"xyzz\"", "Unable to make double from 'xyzz'");
	decode_fails(&t, "\"nan\"", "Unable to make double from 'nan'");
	decode_fails(&t, "true",
		     "Expected a double value, but got a Boolean: true");

	t = T(STORAGE_TYPE_FLOAT);
	round_trip(&t, "123.123", "123.123");
	round_trip(&t, "123123", "123123.0");
	round_trip(&t, "\"123123.0\"", "123123.0");
	round_trip(&t, "0.1", "0.1");
	round_trip(&t, "\"Infinity\"", "null");
	decode_fails(&t, "true",
		     "Expected a float value, but got a Boolean: true");

	char d[64];
	cql_json_java_double(1e300, d, sizeof(d));
	ck_assert_str_eq(d, "1.0E300");
	cql_json_java_double(-1.5e-300, d, sizeof(d));
	ck_assert_str_eq(d, "-1.5E-300");
	cql_json_java_double(9999999.0, d, sizeof(d));
	ck_assert_str_eq(d, "9999999.0");
	cql_json_java_double(10000000.0, d, sizeof(d));
	ck_assert_str_eq(d, "1.0E7");
	cql_json_java_double(100.0, d, sizeof(d));
	ck_assert_str_eq(d, "100.0");
	cql_json_java_float(1.1f, d, sizeof(d));
	ck_assert_str_eq(d, "1.1");
}
END_TEST

START_TEST(text_blob_boolean_and_empty_values)
{
	round_trip(&t_text, "\"abcd\"", "\"abcd\"");
	round_trip(&t_text, "\"\"", "\"\"");
	round_trip(&t_text, "\"a\\u0000b\\n\\t\\\"\\\\/\\u001f\"",
		   "\"a\\u0000b\\n\\t\\\"\\\\/\\u001F\"");
	round_trip(&t_text, "\"\\u2013\"", "\"\xe2\x80\x93\"");
	round_trip(&t_text, "\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\"");
	round_trip(&t_text, "\"\xe8\x90\xa2\"", "\"\xe8\x90\xa2\"");
	decode_fails(&t_text, "123",
		     "Expected a UTF-8 string, but got a Integer: 123");
	struct cql_json_type t = T(STORAGE_TYPE_ASCII);
	round_trip(&t, "\"ascii \\\" text\"", "\"ascii \\\" text\"");
	decode_fails(&t, "\"\\u1fff\\u2013\"",
		     "Invalid ASCII character in string literal");
	decode_fails(&t, "123",
		     "Expected an ascii string, but got a Integer: 123");

	t = T(STORAGE_TYPE_BLOB);
	round_trip(&t, "\"0x00000001\"", "\"0x00000001\"");
	round_trip(&t, "\"0x\"", "\"0x\"");
	round_trip(&t, "\"0xCAFE\"", "\"0xcafe\"");
	decode_fails(&t, "\"xyzz\"",
		     "Value 'xyzz' is not a valid blob representation: String "
		     "representation of blob is missing 0x prefix: xyzz");
	decode_fails(&t, "\"123\"",
		     "Value '123' is not a valid blob "
		     "representation: String representation of "
		     "blob is missing 0x prefix: 123");
	decode_fails(&t, "\"0x123\"",
		     "Value '0x123' is not a valid blob "
		     "representation: cannot parse '123' as "
		     "hex bytes");
	decode_fails(&t, "123",
		     "Value '123' is not a valid blob "
		     "representation");

	round_trip(&t_bool, "true", "true");
	round_trip(&t_bool, "\"FALSE\"", "false");
	decode_fails(&t_bool, "\"abc\"", "Unable to make boolean from 'abc'");
	decode_fails(&t_bool, "123",
		     "Expected a boolean value, but got a Integer: 123");

	/* An empty value of a fixed-width type prints as "" (a null is the
	 * caller's "null"). */
	format_is(&t_int, "", 0, "\"\"");
	format_is(&t_uuid, "", 0, "\"\"");
	struct buf v = {0};
	ck_assert_int_eq(cql_json_decode(&t_int, parse_ok("\"\""), &arena, &v),
			 0);
	ck_assert_uint_eq(v.len, 0);
	ck_assert_int_eq(cql_json_decode(&t_int, parse_ok("null"), &arena, &v),
			 1);
	buf_free(&v);
}
END_TEST

START_TEST(dates_times_uuids_inets_durations)
{
	struct cql_json_type t = T(STORAGE_TYPE_DATE);
	round_trip(&t, "\"1987-03-23\"", "\"1987-03-23\"");
	round_trip(&t, "\"1969-12-31\"", "\"1969-12-31\"");
	round_trip(&t, "\"2147483648\"", "\"1970-01-01\"");
	decode_fails(&t, "123",
		     "Expected a string representation of a date "
		     "value, but got a Integer: 123");
	decode_fails(&t, "\"xyz\"",
		     "Unable to coerce 'xyz' to a formatted date (long)");

	t = T(STORAGE_TYPE_TIME);
	round_trip(&t, "\"07:35:07.000111222\"", "\"07:35:07.000111222\"");
	round_trip(&t, "\"123\"", "\"00:00:00.000000123\"");
	round_trip(&t, "\"23:59:59\"", "\"23:59:59.000000000\"");
	decode_fails(&t, "123456",
		     "Expected a string representation of a "
		     "time value, but got a Integer: 123456");
	decode_fails(&t, "\"xyz\"",
		     "(TimeType) Unable to coerce 'xyz' to a "
		     "formatted time (long)");

	t = T(STORAGE_TYPE_TIMESTAMP);
	round_trip(&t, "123123123123", "\"1973-11-26 00:52:03.123Z\"");
	round_trip(&t, "\"2014-01-01\"", "\"2014-01-01 00:00:00.000Z\"");
	round_trip(&t, "\"2024-01-02 03:04:05.678Z\"",
		   "\"2024-01-02 03:04:05.678Z\"");
	round_trip(&t, "\"2024-01-02T03:04:05+0100\"",
		   "\"2024-01-02 02:04:05.000Z\"");
	round_trip(&t, "-1", "\"1969-12-31 23:59:59.999Z\"");
	round_trip(&t, "\"86400000\"", "\"1970-01-02 00:00:00.000Z\"");
	decode_fails(&t, "123.456",
		     "Expected a long or a datestring representation of a "
		     "timestamp value, but got a Double: 123.456");
	decode_fails(&t, "\"abcd\"",
		     "Unable to coerce 'abcd' to a formatted date (long)");
	/* a year too far for 64-bit milliseconds (found by fuzz_cql_json) */
	decode_fails(&t, "\"-444444444-01-02\"",
		     "Unable to coerce '-444444444-01-02' to a formatted date");

	round_trip(&t_uuid, "\"6BDDC89A-5644-11E4-97FC-56847AFE9799\"",
		   "\"6bddc89a-5644-11e4-97fc-56847afe9799\"");
	decode_fails(&t_uuid, "\"00000000-0000-0000-zzzz-000000000000\"",
		     "Unable to make UUID from");
	decode_fails(&t_uuid, "123",
		     "Expected a string representation of a "
		     "uuid, but got a Integer: 123");
	t = T(STORAGE_TYPE_TIMEUUID);
	round_trip(&t, "\"6bddc89a-5644-11e4-97fc-56847afe9799\"",
		   "\"6bddc89a-5644-11e4-97fc-56847afe9799\"");
	decode_fails(&t, "\"00000000-0000-0000-0000-000000000000\"",
		     "TimeUUID supports only version 1 UUIDs");
	decode_fails(&t, "123",
		     "Expected a string representation of a "
		     "timeuuid, but got a Integer: 123");

	t = T(STORAGE_TYPE_INET);
	round_trip(&t, "\"127.0.0.1\"", "\"127.0.0.1\"");
	round_trip(&t, "\"::1\"", "\"0:0:0:0:0:0:0:1\"");
	round_trip(&t, "\"fe80::aB:1\"", "\"fe80:0:0:0:0:0:ab:1\"");
	round_trip(&t, "\"::ffff:1.2.3.4\"", "\"1.2.3.4\"");
	decode_fails(&t, "\"xyzz\"", "Unable to make inet address from 'xyzz'");
	decode_fails(&t, "123",
		     "Expected a string representation of an inet "
		     "value, but got a Integer: 123");

	t = T(CQL_JSON_TYPE_DURATION);
	round_trip(&t, "\"53us\"", "\"53us\"");
	round_trip(&t, "\"53\xc2\xb5s\"", "\"53us\"");
	round_trip(&t, "\"P2W\"", "\"14d\"");
	round_trip(&t, "\"P1Y1M2DT10H5M\"", "\"1y1mo2d10h5m\"");
	round_trip(&t, "\"6h40m\"", "\"6h40m\"");
	round_trip(&t, "\"-1h30m\"", "\"-1h30m\"");
	round_trip(&t, "\"1Y2MO3W4D5H6M7S8MS9US10NS\"",
		   "\"1y2mo25d5h6m7s8ms9us10ns\"");
	round_trip(&t, "\"P0001-02-03T04:05:06\"", "\"1y2mo3d4h5m6s\"");
	decode_fails(&t, "\"xyz\"", "Unable to convert 'xyz' to a duration");
	decode_fails(&t, "\"44444444444H\"", "Unable to convert");
	decode_fails(&t, "\"PT44444444444H\"", "Unable to convert");
	decode_fails(&t, "12",
		     "Expected a string representation of a "
		     "duration, but got a Integer: 12");
}
END_TEST

START_TEST(collections_tuples_udts_vectors)
{
	struct cql_json_type e_int[2] = {T(STORAGE_TYPE_INT),
					 T(STORAGE_TYPE_BOOLEAN)};
	struct cql_json_type list = {
		.kind = CQL_JSON_TYPE_LIST, .count = 1, .sub = e_int};
	round_trip(&list, "[1, 2, 3]", "[1, 2, 3]");
	round_trip(&list, "[3,1,3]", "[3, 1, 3]");
	round_trip(&list, "[]", "[]");
	round_trip(&list, "\"[4, 5]\"", "[4, 5]");
	decode_fails(&list, "[null]", "Invalid null element in list");
	decode_fails(&list, "123", "Expected a list, but got a Integer: 123");
	decode_fails(&list, "[\"abc\"]", "Unable to make int from 'abc'");
	decode_fails(&list, "\"[1,\"", "Error decoding JSON string: ");

	struct cql_json_type set = {
		.kind = CQL_JSON_TYPE_SET, .count = 1, .sub = e_int};
	round_trip(&set, "[3, 1, 2, 1, -5]", "[-5, 1, 2, 3]");
	decode_fails(&set, "[null]", "Invalid null element in set");
	decode_fails(&set, "{}",
		     "Expected a list (representing a set), but "
		     "got a LinkedHashMap: {}");

	struct cql_json_type map = {
		.kind = CQL_JSON_TYPE_MAP, .count = 2, .sub = e_int};
	round_trip(&map, "{\"1\": false, \"0\": true, \"1\": true}",
		   "{\"0\": true, \"1\": true}");
	decode_fails(&map, "{\"a\": true}", "Unable to make int from 'a'");
	decode_fails(&map, "{\"1\": null}", "Invalid null value in map");
	decode_fails(&map, "[1]", "Expected a map, but got a ArrayList: [1]");

	/* map<frozen<set<int>>, boolean>: keys are JSON in strings */
	struct cql_json_type sk[2] = {set, T(STORAGE_TYPE_BOOLEAN)};
	struct cql_json_type setmap = {
		.kind = CQL_JSON_TYPE_MAP, .count = 2, .sub = sk};
	round_trip(&setmap, "{\"[0, 1, 2]\": true, \"[3, 4, 5]\": false}",
		   "{\"[0, 1, 2]\": true, \"[3, 4, 5]\": false}");
	struct cql_json_type tk[2] = {T(STORAGE_TYPE_TEXT),
				      T(STORAGE_TYPE_INT)};
	struct cql_json_type textmap = {
		.kind = CQL_JSON_TYPE_MAP, .count = 2, .sub = tk};
	round_trip(&textmap, "{\"b\": 2, \"a\": 1}", "{\"a\": 1, \"b\": 2}");

	struct cql_json_type tf[3] = {T(STORAGE_TYPE_INT),
				      T(STORAGE_TYPE_ASCII),
				      T(STORAGE_TYPE_UUID)};
	struct cql_json_type tuple = {
		.kind = CQL_JSON_TYPE_TUPLE, .count = 3, .sub = tf};
	round_trip(&tuple,
		   "[1, \"foobar\", \"6bddc89a-5644-11e4-97fc-56847afe9799\"]",
		   "[1, \"foobar\", \"6bddc89a-5644-11e4-97fc-56847afe9799\"]");
	round_trip(&tuple, "[1, null, null]", "[1, null, null]");
	decode_fails(&tuple, "[1, \"a\", null, 1, 2]",
		     "Tuple contains extra items (expected 3): [1, a, null, "
		     "1, 2]");
	decode_fails(&tuple, "[1, \"foobar\"]",
		     "Tuple is missing items (expected 3): [1, foobar]");
	decode_fails(&tuple, "1",
		     "Expected a list representation of a tuple, "
		     "but got a Integer: 1");
	/* a tuple serialized with fewer fields reads the rest as null */
	static const uint8_t short_tuple[] = {0, 0, 0, 4, 0, 0, 0, 7};
	format_is(&tuple, short_tuple, sizeof(short_tuple), "[7, null, null]");

	static const char *const names[] = {"a", "Foo", "c"};
	struct cql_json_type uf[3] = {T(STORAGE_TYPE_INT), T(STORAGE_TYPE_INT),
				      set};
	struct cql_json_type udt = {.kind = CQL_JSON_TYPE_UDT,
				    .count = 3,
				    .sub = uf,
				    .names = names,
				    .name = "ks.t"};
	round_trip(&udt, "{\"A\": 0, \"\\\"Foo\\\"\": 1, \"c\": [2, 1]}",
		   "{\"a\": 0, \"\\\"Foo\\\"\": 1, \"c\": [1, 2]}");
	round_trip(&udt, "{\"a\": 1}",
		   "{\"a\": 1, \"\\\"Foo\\\"\": null, "
		   "\"c\": null}");
	decode_fails(&udt, "{\"xxx\": 1}",
		     "Unknown field 'xxx' in value of user defined type ks.t");
	decode_fails(&udt, "{\"foo\": 1}", "Unknown field 'foo'");
	decode_fails(&udt, "{\"a\": \"foobar\"}",
		     "Unable to make int from 'foobar'");
	decode_fails(&udt, "[]", "Expected a map, but got a ArrayList: []");

	struct cql_json_type vf = T(STORAGE_TYPE_FLOAT);
	struct cql_json_type vec = {.kind = CQL_JSON_TYPE_VECTOR,
				    .count = 1,
				    .sub = &vf,
				    .dimension = 3};
	round_trip(&vec, "[1, 2.5, -3]", "[1.0, 2.5, -3.0]");
	decode_fails(&vec, "[1, 2]",
		     "List had incorrect size: expected 3 but "
		     "given 2; [1, 2]");
	decode_fails(&vec, "[1, null, 2]", "Invalid null element in list");
	struct cql_json_type vt = T(STORAGE_TYPE_TEXT);
	struct cql_json_type tvec = {.kind = CQL_JSON_TYPE_VECTOR,
				     .count = 1,
				     .sub = &vt,
				     .dimension = 2};
	round_trip(&tvec, "[\"a\", \"bc\"]", "[\"a\", \"bc\"]");
}
END_TEST

START_TEST(keys_and_insert_values_maps)
{
	struct buf b = {0};
	cql_json_key(&b, "k", 1);
	cql_json_key(&b, "Foo", 3);
	cql_json_key(&b, "ttl(v)", 6);
	ck_assert_int_eq(buf_put_u8(&b, 0), 0);
	ck_assert_str_eq((const char *)b.data,
			 "\"k\"\"\\\"Foo\\\"\"\"ttl(v)\"");
	buf_free(&b);

	static const char *const names[] = {"k", "Foo", "v"};
	const struct cql_json *vals[3];
	const char *in = "{\"K\": 0, \"\\\"Foo\\\"\": 1, \"v\": null}";
	ck_assert_int_eq(
		cql_json_insert_values(in, strlen(in), names, 3, &arena, vals),
		0);
	ck_assert_int_eq(vals[0]->kind, CQL_JSON_INT);
	ck_assert_int_eq(vals[1]->kind, CQL_JSON_INT);
	ck_assert_int_eq(vals[2]->kind, CQL_JSON_NULL);
	in = "{\"k\": 0}";
	ck_assert_int_eq(
		cql_json_insert_values(in, strlen(in), names, 3, &arena, vals),
		0);
	ck_assert_ptr_null(vals[1]);
	ck_assert_ptr_null(vals[2]);

	struct {
		const char *in, *msg;
	} bad[] = {
		{"{\"k\": 0, \"zzz\": 0}",
		 "JSON values map contains unrecognized column: zzz"},
		{"{\"foo\": 0}",
		 "JSON values map contains unrecognized column: "
		 "foo"},
		{"null", "Got null for INSERT JSON values"},
		{"\"notamap\"", "Could not decode JSON string as a map: "
				"com.fasterxml.jackson.databind.exc."
				"MismatchedInputException: "},
		{"12.34", "Could not decode JSON string as a map: "},
		{"{\"k\": 0", "Could not decode JSON string as a map: "
			      "com.fasterxml.jackson.core.io.JsonEOFException: "
			      "Unexpected end-of-input"},
		{"", "Could not decode JSON string as a map: "},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(cql_json_insert_values(bad[i].in,
							strlen(bad[i].in),
							names, 3, &arena, vals),
				 -1);
		ck_assert_msg(
			strncmp(err_msg(), bad[i].msg, strlen(bad[i].msg)) == 0,
			"%s: '%s'", bad[i].in, err_msg());
	}
	/* what follows the first value is ignored, as Jackson does */
	in = "{\"k\": 1} trailing";
	ck_assert_int_eq(
		cql_json_insert_values(in, strlen(in), names, 3, &arena, vals),
		0);
}
END_TEST

START_TEST(malformed_json_is_refused_in_jacksons_words)
{
	struct {
		const char *in, *msg;
	} bad[] = {
		{"{", "com.fasterxml.jackson.core.io.JsonEOFException: "
		      "Unexpected end-of-input"},
		{"[1,", "com.fasterxml.jackson.core.io.JsonEOFException"},
		{"{\"a\" 1}",
		 "com.fasterxml.jackson.core.JsonParseException: "
		 "Unexpected character ('1' (code 49)): was expecting "
		 "a colon to separate field name and value"},
		{"{a: 1}",
		 "com.fasterxml.jackson.core.JsonParseException: "
		 "Unexpected character ('a' (code 97)): was expecting "
		 "double-quote to start field name"},
		{"tru", "com.fasterxml.jackson.core.JsonParseException: "
			"Unrecognized token 'tru': was expecting"},
		{"xyz", "com.fasterxml.jackson.core.JsonParseException: "
			"Unrecognized token 'xyz'"},
		{"01", "com.fasterxml.jackson.core.JsonParseException: Invalid "
		       "numeric value: Leading zeroes not allowed"},
		{"-x",
		 "com.fasterxml.jackson.core.JsonParseException: "
		 "Unexpected character ('x' (code 120)) in numeric value"},
		{"1.", "com.fasterxml.jackson.core.io.JsonEOFException"},
		{"\"\\x\"", "com.fasterxml.jackson.core.JsonParseException: "
			    "Unrecognized character escape 'x' (code 120)"},
		{"\"abc", "com.fasterxml.jackson.core.io.JsonEOFException"},
		{"\"a\nb\"",
		 "com.fasterxml.jackson.core.JsonParseException: "
		 "Illegal unquoted character ((CTRL-CHAR, code 10))"},
		{"[1 2]", "com.fasterxml.jackson.core.JsonParseException: "
			  "Unexpected character ('2' (code 50)): was expecting "
			  "comma to separate Array entries"},
		{"NaN", "com.fasterxml.jackson.core.JsonParseException"},
		{"\xce\x8e\xce\x94", "com.fasterxml.jackson.core."
				     "JsonParseException: Unrecognized token"},
		{"}",
		 "com.fasterxml.jackson.core.JsonParseException: Unexpected "
		 "character ('}' (code 125))"},
		{"\"\\u12", "com.fasterxml.jackson.core.io.JsonEOFException"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct cql_json *j;
		ck_assert_msg(cql_json_parse(bad[i].in, strlen(bad[i].in),
					     &arena, &j) == -1,
			      "accepted %s", bad[i].in);
		ck_assert_msg(
			strncmp(err_msg(), bad[i].msg, strlen(bad[i].msg)) == 0,
			"%s: '%s'", bad[i].in, err_msg());
	}
	/* deep nesting is refused, not a stack overflow */
	size_t deep = 100000;
	char *q = malloc(deep + 1);
	memset(q, '[', deep);
	const struct cql_json *j;
	ck_assert_int_eq(cql_json_parse(q, deep, &arena, &j), -1);
	ck_assert_contains(err_msg(), "nesting depth");
	memset(q, '[', 200);
	memset(q + 200, ']', 200);
	ck_assert_int_eq(cql_json_parse(q, 400, &arena, &j), 0);
	free(q);

	j = parse_ok(" {\"a\" : [1, -2.5e3, true, false, null, \"x\"], "
		     "\"b\": {}} ");
	ck_assert_int_eq(j->kind, CQL_JSON_OBJECT);
	ck_assert_uint_eq(j->count, 4);
	ck_assert_uint_eq(j->items[1].count, 6);
	ck_assert_int_eq(j->items[1].items[1].kind, CQL_JSON_FLOAT);
	struct buf t = {0};
	cql_json_java_text(j, &t);
	buf_put_u8(&t, 0);
	ck_assert_str_eq((const char *)t.data,
			 "{a=[1, -2500.0, true, false, null, x], b={}}");
	buf_free(&t);
}
END_TEST

/* Random and mutated inputs: the parser and the decoders never crash or
 * read out of bounds (ASan checks the latter). */
START_TEST(random_input_never_crashes)
{
	struct rng r;
	rng_seed(&r, seed);
	static const char *const seeds[] = {
		"{\"k\": 0, \"v\": [1, 2, {\"a\": \"\\u00e9\"}]}",
		"[1.5e10, -0, \"0x00\", true, null]",
		"{\"[0, 1]\": {\"x\": [[]]}}",
	};
	struct cql_json_type sub[2] = {T(STORAGE_TYPE_INT),
				       T(STORAGE_TYPE_TEXT)};
	struct cql_json_type types[] = {
		T(STORAGE_TYPE_INT),
		T(STORAGE_TYPE_DECIMAL),
		T(STORAGE_TYPE_TIMESTAMP),
		{.kind = CQL_JSON_TYPE_LIST, .count = 1, .sub = sub},
		{.kind = CQL_JSON_TYPE_MAP, .count = 2, .sub = sub},
		{.kind = CQL_JSON_TYPE_TUPLE, .count = 2, .sub = sub},
	};
	char in[128];
	for (int it = 0; it < 20000; it++) {
		const char *s0 = seeds[rng_below(&r, 3)];
		size_t n = strlen(s0);
		memcpy(in, s0, n);
		int muts = 1 + (int)rng_below(&r, 4);
		for (int m = 0; m < muts; m++)
			in[rng_below(&r, n)] = (char)rng_below(&r, 256);
		if (rng_below(&r, 4) == 0)
			n = rng_below(&r, n + 1);
		arena_reset(&arena);
		const struct cql_json *j;
		if (cql_json_parse(in, n, &arena, &j) != 0)
			continue;
		for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
			struct buf v = {0}, out = {0};
			if (cql_json_decode(&types[t], j, &arena, &v) == 0)
				ck_assert_int_eq(cql_json_format(&types[t],
								 v.data, v.len,
								 &out),
						 0);
			buf_free(&v);
			buf_free(&out);
		}
	}
	/* random bytes formatted as every kind never crash */
	uint8_t bytes[64];
	struct cql_json_type all[] = {
		T(STORAGE_TYPE_DECIMAL),
		T(STORAGE_TYPE_VARINT),
		T(STORAGE_TYPE_INET),
		T(CQL_JSON_TYPE_DURATION),
		T(STORAGE_TYPE_TIME),
		types[3],
		types[4],
		types[5],
	};
	for (int it = 0; it < 20000; it++) {
		size_t n = rng_below(&r, sizeof(bytes));
		for (size_t i = 0; i < n; i++)
			bytes[i] = (uint8_t)rng_below(&r, 256);
		struct buf out = {0};
		(void)cql_json_format(&all[rng_below(&r, 8)], bytes, n, &out);
		buf_free(&out);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cql_json");
	TCase *tc = tcase_create("core");
	seed = test_seed(25);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, numbers_as_cassandra_prints_and_reads_them);
	tcase_add_test(tc, text_blob_boolean_and_empty_values);
	tcase_add_test(tc, dates_times_uuids_inets_durations);
	tcase_add_test(tc, collections_tuples_udts_vectors);
	tcase_add_test(tc, keys_and_insert_values_maps);
	tcase_add_test(tc, malformed_json_is_refused_in_jacksons_words);
	tcase_add_test(tc, random_input_never_crashes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
