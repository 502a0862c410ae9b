/* client/proto: frame header checks and decoders under hostile input. */
#include "client/proto/proto.h"
#include "common/err.h"
#include "common/rand.h"
#include "tests/lib/testutil.h"

#include <stdlib.h>
#include <string.h>

static uint64_t seed;

START_TEST(header_refuses_versions_directions_and_sizes)
{
	uint8_t h[9] = {0x04, 0x00, 0x01, 0x2c, CQL_OP_QUERY, 0, 0, 0x10, 0};
	struct cql_header hd;
	ck_assert_int_eq(cql_header_decode(h, 1 << 20, &hd), CQL_HEADER_OK);
	ck_assert_int_eq(hd.stream, 300);
	ck_assert_uint_eq(hd.length, 4096);
	ck_assert_int_eq(cql_header_decode(h, 4095, &hd), CQL_HEADER_TOO_LARGE);

	h[0] = 0x42; /* DSE_V2 = 66, the Python driver's first try */
	ck_assert_int_eq(cql_header_decode(h, 1 << 20, &hd),
			 CQL_HEADER_BAD_VERSION);
	ck_assert_uint_eq(hd.version, 66);
	ck_assert_int_eq(hd.stream, 300);
	h[0] = 0x06;
	ck_assert_int_eq(cql_header_decode(h, 1 << 20, &hd),
			 CQL_HEADER_BAD_VERSION);
	h[0] = 0x05;
	ck_assert_int_eq(cql_header_decode(h, 1 << 20, &hd), CQL_HEADER_OK);
	h[0] = 0x02; /* v2: one-byte stream id */
	ck_assert_int_eq(cql_header_decode(h, 1 << 20, &hd),
			 CQL_HEADER_BAD_VERSION);
	ck_assert_int_eq(hd.stream, 1);
	h[0] = 0x84;
	ck_assert_int_eq(cql_header_decode(h, 1 << 20, &hd),
			 CQL_HEADER_BAD_DIRECTION);
	h[0] = 0x03;
	ck_assert_int_eq(cql_header_decode(h, 1 << 20, &hd), CQL_HEADER_OK);

	struct cql_header out = {.version = 4,
				 .response = true,
				 .flags = 8,
				 .stream = -1,
				 .opcode = CQL_OP_EVENT,
				 .length = 77};
	uint8_t enc[9];
	cql_header_encode(enc, &out);
	ck_assert_uint_eq(enc[0], 0x84);
	ck_assert_uint_eq(enc[2], 0xff);
	ck_assert_uint_eq(enc[3], 0xff);
}
END_TEST

/* A QUERY body with values, page size, paging state, serial CL, timestamp. */
static void build_query(struct buf *b, uint8_t version)
{
	buf_init(b);
	cql_write_long_string(b, "SELECT * FROM t WHERE k = ?", 27);
	cql_write_short(b, CQL_CL_QUORUM);
	buf_put_u8(b, CQL_QF_VALUES | CQL_QF_PAGE_SIZE | CQL_QF_PAGING_STATE |
			      CQL_QF_SERIAL_CONSISTENCY |
			      CQL_QF_DEFAULT_TIMESTAMP);
	cql_write_short(b, 3);
	cql_write_bytes(b, "\0\0\0\x01", 4);
	cql_write_int(b, CQL_VALUE_NULL);
	cql_write_int(b, version >= 4 ? CQL_VALUE_UNSET : CQL_VALUE_NULL);
	cql_write_int(b, 100);
	cql_write_bytes(b, "ps", 2);
	cql_write_short(b, CQL_CL_LOCAL_SERIAL);
	cql_write_long(b, 123456789);
}

START_TEST(query_decodes_every_parameter)
{
	struct buf b;
	struct arena a;
	struct cql_query q;
	build_query(&b, 4);
	arena_create(&a, 0);
	struct cursor c = cursor_make(b.data, b.len);
	ck_assert_int_eq(cql_decode_query(&c, 4, &a, &q), 0);
	ck_assert_uint_eq(cursor_left(&c), 0);
	ck_assert_uint_eq(q.query.len, 27);
	ck_assert_uint_eq(q.params.consistency, CQL_CL_QUORUM);
	ck_assert_uint_eq(q.params.value_count, 3);
	ck_assert_int_eq(q.params.values[0].len, 4);
	ck_assert_int_eq(q.params.values[1].len, CQL_VALUE_NULL);
	ck_assert_int_eq(q.params.values[2].len, CQL_VALUE_UNSET);
	ck_assert_int_eq(q.params.page_size, 100);
	ck_assert(q.params.has_paging_state);
	ck_assert_uint_eq(q.params.serial_consistency, CQL_CL_LOCAL_SERIAL);
	ck_assert(q.params.has_timestamp);
	ck_assert_int_eq(q.params.timestamp, 123456789);

	/* Unset values do not exist in v3. */
	c = cursor_make(b.data, b.len);
	ck_assert_int_eq(cql_decode_query(&c, 3, &a, &q), -1);
	ck_assert_int_eq(err_code(), ERR_PROTOCOL);
	buf_free(&b);
	arena_destroy(&a);
}
END_TEST

START_TEST(every_truncation_fails_cleanly)
{
	struct buf b;
	struct arena a;
	build_query(&b, 4);
	arena_create(&a, 0);
	for (size_t n = 0; n < b.len; n++) {
		/* A fresh copy of exactly n bytes, so ASan sees any overread.
		 */
		uint8_t *copy = malloc(n ? n : 1);
		memcpy(copy, b.data, n);
		struct cursor c = cursor_make(copy, n);
		struct cql_query q;
		ck_assert_msg(cql_decode_query(&c, 4, &a, &q) == -1, "len %zu",
			      n);
		ck_assert_int_eq(err_code(), ERR_PROTOCOL);
		free(copy);
	}
	buf_free(&b);
	arena_destroy(&a);
}
END_TEST

START_TEST(counts_are_capped_by_the_bytes_present)
{
	struct arena a;
	arena_create(&a, 0);
	/* 65535 values announced in a 10-byte body: refused before
	 * allocating 65535 entries. */
	uint8_t body[] = {0,
			  0,
			  0,
			  0, /* empty query */
			  0,
			  1, /* ONE */
			  CQL_QF_VALUES,
			  0xff,
			  0xff,
			  0};
	struct cursor c = cursor_make(body, sizeof(body));
	struct cql_query q;
	size_t before = arena_memory_usage(&a);
	ck_assert_int_eq(cql_decode_query(&c, 4, &a, &q), -1);
	ck_assert_uint_eq(arena_memory_usage(&a), before);

	uint8_t list[] = {0xff, 0xff, 0, 1, 'a'};
	struct slice *items;
	uint16_t n;
	c = cursor_make(list, sizeof(list));
	ck_assert_int_eq(cql_read_string_list(&c, &a, &items, &n), -1);

	/* Negative lengths other than null/unset, and negative long strings. */
	uint8_t bad_value[] = {0xff, 0xff, 0xff, 0xfd};
	struct cql_value v;
	c = cursor_make(bad_value, sizeof(bad_value));
	ck_assert_int_eq(cql_read_value(&c, true, &v), -1);
	uint8_t bad_ls[] = {0x80, 0, 0, 0};
	struct slice s;
	c = cursor_make(bad_ls, sizeof(bad_ls));
	ck_assert_int_eq(cql_read_long_string(&c, &s), -1);
	arena_destroy(&a);
}
END_TEST

START_TEST(batch_rejects_bad_types_kinds_and_named_values)
{
	struct arena a;
	struct cql_batch bt;
	arena_create(&a, 0);
	uint8_t bad_type[] = {3, 0, 0, 0, 1, 0};
	struct cursor c = cursor_make(bad_type, sizeof(bad_type));
	ck_assert_int_eq(cql_decode_batch(&c, 4, &a, &bt), -1);
	uint8_t bad_kind[] = {0, 0, 1, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0};
	c = cursor_make(bad_kind, sizeof(bad_kind));
	ck_assert_int_eq(cql_decode_batch(&c, 4, &a, &bt), -1);
	ck_assert_str_eq(err_msg(), "invalid batch statement kind 7");
	/* Empty batch with the names flag. */
	uint8_t named[] = {1, 0, 0, 0, 1, CQL_QF_VALUE_NAMES};
	c = cursor_make(named, sizeof(named));
	ck_assert_int_eq(cql_decode_batch(&c, 4, &a, &bt), -1);
	uint8_t empty[] = {1, 0, 0, 0, 1, 0};
	c = cursor_make(empty, sizeof(empty));
	ck_assert_int_eq(cql_decode_batch(&c, 4, &a, &bt), 0);
	ck_assert_uint_eq(bt.count, 0);
	arena_destroy(&a);
}
END_TEST

START_TEST(lz4_round_trips_and_refuses_bad_bodies)
{
	struct rng r;
	rng_seed(&r, seed);
	uint8_t raw[5000];
	for (size_t i = 0; i < sizeof(raw); i++)
		raw[i] = (uint8_t)(i % 7 == 0 ? rng_next(&r) : 'x');
	struct buf z, out;
	buf_init(&z);
	buf_init(&out);
	ck_assert_int_eq(cql_lz4_compress(raw, sizeof(raw), &z), 0);
	ck_assert_uint_lt(z.len, sizeof(raw));
	ck_assert_int_eq(cql_lz4_decompress(z.data, z.len, 1 << 20, &out), 0);
	ck_assert_uint_eq(out.len, sizeof(raw));
	ck_assert_int_eq(memcmp(out.data, raw, sizeof(raw)), 0);

	/* A declared size above the limit is refused before allocating. */
	buf_clear(&out);
	ck_assert_int_eq(cql_lz4_decompress(z.data, z.len, 4999, &out), -1);
	ck_assert_uint_eq(out.len, 0);
	/* Lying about the size, truncating, flipping bytes. */
	be32_store(z.data, 6000);
	ck_assert_int_eq(cql_lz4_decompress(z.data, z.len, 1 << 20, &out), -1);
	be32_store(z.data, sizeof(raw));
	ck_assert_int_eq(cql_lz4_decompress(z.data, z.len / 2, 1 << 20, &out),
			 -1);
	ck_assert_int_eq(cql_lz4_decompress(z.data, 3, 1 << 20, &out), -1);
	for (int i = 0; i < 200; i++) {
		struct buf mut;
		buf_init(&mut);
		buf_append(&mut, z.data, z.len);
		mut.data[4 + rng_below(&r, mut.len - 4)] ^=
			(uint8_t)(1 + rng_below(&r, 255));
		buf_clear(&out);
		/* Either refused or exactly the declared size: never more. */
		if (cql_lz4_decompress(mut.data, mut.len, 1 << 20, &out) == 0)
			ck_assert_uint_eq(out.len, sizeof(raw));
		buf_free(&mut);
	}
	buf_free(&z);
	buf_free(&out);
}
END_TEST

START_TEST(encoders_frame_lengths_and_limits)
{
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(cql_encode_ready(&b, 4, 3), 0);
	ck_assert_uint_eq(b.len, CQL_HEADER_LEN);
	ck_assert_uint_eq(be32_load(b.data + 5), 0);
	ck_assert_int_eq(cql_encode_result_void(&b, 3, 4), 0);
	ck_assert_uint_eq(b.data[9], 0x83);
	ck_assert_uint_eq(be32_load(b.data + 9 + 5), 4);

	char *big = malloc(70000);
	memset(big, 'a', 69999);
	big[69999] = '\0';
	size_t before = b.len;
	ck_assert_int_eq(cql_write_cstring(&b, big), -1);
	ck_assert_uint_eq(b.len, before);
	/* Error messages are cut to fit a [string], never refused. */
	ck_assert_int_eq(cql_encode_error(&b, 4, 1, CQL_ERR_INVALID, big), 0);
	free(big);
	/* A function's failure is FunctionFailure: message, keyspace,
	 * function, [string list] of argument types. */
	buf_clear(&b);
	static const char fmsg[] = "execution of 'system.fromjson[text, int]' "
				   "failed: x";
	ck_assert_int_eq(cql_encode_error(&b, 4, 1, CQL_ERR_INVALID, fmsg), 0);
	static const uint8_t fwant[] = {0, 0, 0x14,
					0, 0, (uint8_t)(sizeof(fmsg) - 1)};
	ck_assert_int_eq(memcmp(b.data + 9, fwant, sizeof(fwant)), 0);
	const uint8_t *fp = b.data + 9 + sizeof(fwant) + sizeof(fmsg) - 1;
	static const uint8_t ftail[] = {0,   6,   's', 'y', 's', 't', 'e', 'm',
					0,   8,   'f', 'r', 'o', 'm', 'j', 's',
					'o', 'n', 0,   2,   0,   4,   't', 'e',
					'x', 't', 0,   3,   'i', 'n', 't'};
	ck_assert_uint_eq(b.len, (size_t)(fp - b.data) + sizeof(ftail));
	ck_assert_int_eq(memcmp(fp, ftail, sizeof(ftail)), 0);
	/* not of that form: a plain InvalidRequest */
	buf_clear(&b);
	ck_assert_int_eq(
		cql_encode_error(&b, 4, 1, CQL_ERR_INVALID, "execution of x"),
		0);
	ck_assert_int_eq(b.data[11], 0x22);
	ck_assert_str_eq(cql_consistency_name(CQL_CL_LOCAL_ONE), "LOCAL_ONE");
	ck_assert_ptr_null(cql_consistency_name(11));

	static const struct cql_type_option tuple = {.id = CQL_TYPE_TUPLE};
	before = b.len;
	ck_assert_int_eq(cql_write_type_option(&b, &tuple), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	/* tuple<int, text>: 0x0031, n, each component */
	static const struct cql_type_option i32 = {.id = CQL_TYPE_INT},
					    txt = {.id = CQL_TYPE_VARCHAR};
	static const struct cql_type_option *const comps[] = {&i32, &txt};
	static const struct cql_type_option tup = {
		.id = CQL_TYPE_TUPLE, .count = 2, .subs = comps};
	buf_clear(&b);
	ck_assert_int_eq(cql_write_type_option(&b, &tup), 0);
	static const uint8_t want[] = {0, 0x31, 0, 2, 0, 0x09, 0, 0x0d};
	ck_assert_uint_eq(b.len, sizeof(want));
	ck_assert_int_eq(memcmp(b.data, want, sizeof(want)), 0);
	/* a UDT: keyspace, name, n, (field, type)... */
	static const char *const fields[] = {"a", "b"};
	static const struct cql_type_option udt = {.id = CQL_TYPE_UDT,
						   .count = 2,
						   .subs = comps,
						   .keyspace = "ks",
						   .name = "u",
						   .field_names = fields};
	buf_clear(&b);
	ck_assert_int_eq(cql_write_type_option(&b, &udt), 0);
	static const uint8_t want_udt[] = {0, 0x30, 0, 2, 'k', 's', 0,
					   1, 'u',  0, 2, 0,   1,   'a',
					   0, 9,    0, 1, 'b', 0,   0x0d};
	ck_assert_uint_eq(b.len, sizeof(want_udt));
	ck_assert_int_eq(memcmp(b.data, want_udt, sizeof(want_udt)), 0);
	buf_free(&b);
}
END_TEST

/* A collection option without its element types (what IN ? on a frozen
 * collection column used to produce) is an error, not a NULL read. */
START_TEST(type_option_without_elements_is_an_error_not_a_crash)
{
	struct buf b;
	buf_init(&b);
	static const struct cql_type_option set = {.id = CQL_TYPE_SET};
	static const struct cql_type_option list = {.id = CQL_TYPE_LIST,
						    .sub = {&set}};
	static const struct cql_type_option integer = {.id = CQL_TYPE_INT};
	static const struct cql_type_option map = {.id = CQL_TYPE_MAP,
						   .sub = {&integer}};
	ck_assert_int_eq(cql_write_type_option(&b, &list), -1);
	ck_assert_int_eq(cql_write_type_option(&b, &map), -1);
	ck_assert_int_eq(cql_write_type_option(&b, NULL), -1);
	static const struct cql_type_option frozen_set = {.id = CQL_TYPE_SET,
							  .sub = {&integer}};
	static const struct cql_type_option in = {.id = CQL_TYPE_LIST,
						  .sub = {&frozen_set}};
	buf_clear(&b);
	ck_assert_int_eq(cql_write_type_option(&b, &in), 0);
	static const uint8_t want[] = {0, 0x20, 0, 0x22, 0, 0x09};
	ck_assert_uint_eq(b.len, sizeof(want));
	ck_assert_mem_eq(b.data, want, sizeof(want));
	buf_free(&b);
}
END_TEST

START_TEST(tracing_id_goes_first_in_the_body_before_warnings)
{
	struct buf f;
	buf_init(&f);
	ck_assert_int_eq(cql_encode_result_void(&f, 4, 7), 0);
	size_t plain = f.len;
	ck_assert_int_eq(cql_frame_add_warning(&f, "careful"), 0);
	size_t warned = f.len;
	uint8_t id[16];
	for (int i = 0; i < 16; i++)
		id[i] = (uint8_t)(0xa0 + i);
	ck_assert_int_eq(cql_frame_add_tracing_id(&f, id), 0);
	ck_assert_uint_eq(f.len, warned + 16);
	ck_assert_uint_eq(f.data[1], CQL_FLAG_TRACING | CQL_FLAG_WARNING);
	ck_assert_uint_eq(be32_load(f.data + 5), f.len - CQL_HEADER_LEN);
	ck_assert_mem_eq(f.data + CQL_HEADER_LEN, id, 16);
	/* then the warnings' [string list] ("careful"), then the body */
	ck_assert_uint_eq(f.data[CQL_HEADER_LEN + 16], 0);
	ck_assert_uint_eq(f.data[CQL_HEADER_LEN + 17], 1);
	ck_assert_uint_eq(f.len - plain, 16 + 2 + 2 + 7);
	/* a frame traced twice, or not a frame: refused, left alone */
	size_t len = f.len;
	ck_assert_int_eq(cql_frame_add_tracing_id(&f, id), -1);
	ck_assert_uint_eq(f.len, len);
	struct buf tiny;
	buf_init(&tiny);
	ck_assert_int_eq(buf_append(&tiny, (const uint8_t *)"\x84\0", 2), 0);
	ck_assert_int_eq(cql_frame_add_tracing_id(&tiny, id), -1);
	ck_assert_uint_eq(tiny.len, 2);
	buf_free(&tiny);
	buf_free(&f);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("core");
	seed = test_seed(2024);
	tcase_add_test(tc, header_refuses_versions_directions_and_sizes);
	tcase_add_test(tc, query_decodes_every_parameter);
	tcase_add_test(tc, every_truncation_fails_cleanly);
	tcase_add_test(tc, counts_are_capped_by_the_bytes_present);
	tcase_add_test(tc, batch_rejects_bad_types_kinds_and_named_values);
	tcase_add_test(tc, lz4_round_trips_and_refuses_bad_bodies);
	tcase_add_test(tc, encoders_frame_lengths_and_limits);
	tcase_add_test(tc,
		       type_option_without_elements_is_an_error_not_a_crash);
	tcase_add_test(tc, tracing_id_goes_first_in_the_body_before_warnings);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
