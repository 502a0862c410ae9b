/* Native protocol v5: segments (CRC24 header, CRC32 payload, LZ4), the v5
 * request fields and the v5 result and error shapes. The vectors were
 * computed with the DataStax Python driver's cassandra/segment.py, which
 * interoperates with Cassandra 4.0's FrameEncoderCrc / FrameEncoderLZ4. */
#include "client/proto/proto.h"
#include "common/err.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void from_hex(const char *hex, struct buf *out)
{
	buf_init(out);
	for (size_t i = 0; hex[i] && hex[i + 1]; i += 2) {
		unsigned v;
		ck_assert_int_eq(sscanf(hex + i, "%2x", &v), 1);
		ck_assert_int_eq(buf_put_u8(out, (uint8_t)v), 0);
	}
}

static void assert_bytes(const struct buf *b, const char *hex)
{
	struct buf want;
	from_hex(hex, &want);
	ck_assert_uint_eq(b->len, want.len);
	ck_assert_int_eq(memcmp(b->data, want.data, want.len), 0);
	buf_free(&want);
}

START_TEST(crcs_match_the_drivers)
{
	/* compute_crc24(header, 3) and compute_crc32(payload, CRC32_INITIAL) */
	ck_assert_uint_eq(cql_crc24(0, 3), 0x7de777);
	ck_assert_uint_eq(cql_crc24(0x20005, 3), 0x9a9919);
	ck_assert_uint_eq(cql_segment_crc32((const uint8_t *)"hello", 5),
			  0xb60e8074);
	ck_assert_uint_eq(cql_segment_crc32((const uint8_t *)"", 0),
			  0x44777ed3);
}
END_TEST

START_TEST(segments_are_byte_for_byte_the_drivers)
{
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(
		cql_segment_encode(&b, (const uint8_t *)"hello", 5, false), 0);
	assert_bytes(&b, "05000219999a68656c6c6f74800eb6");
	/* with LZ4, a payload that does not shrink goes uncompressed:
	 * uncompressed length 0 in the 5-byte header */
	buf_clear(&b);
	ck_assert_int_eq(
		cql_segment_encode(&b, (const uint8_t *)"hello", 5, true), 0);
	assert_bytes(&b, "0500000004e4ab8e68656c6c6f74800eb6");
	buf_free(&b);
}
END_TEST

START_TEST(decodes_the_drivers_segments_plain_and_lz4)
{
	struct buf in, out;
	size_t used;
	bool whole;
	buf_init(&out);
	from_hex("05000219999a68656c6c6f74800eb6", &in);
	ck_assert_int_eq(
		cql_segment_decode(in.data, in.len, false, &out, &used, &whole),
		CQL_SEGMENT_OK);
	ck_assert_uint_eq(used, in.len);
	ck_assert(whole);
	ck_assert_uint_eq(out.len, 5);
	ck_assert_int_eq(memcmp(out.data, "hello", 5), 0);
	/* every shorter prefix is incomplete, never an error */
	for (size_t n = 0; n < in.len; n++)
		ck_assert_int_eq(cql_segment_decode(in.data, n, false, &out,
						    &used, &whole),
				 CQL_SEGMENT_PARTIAL);
	buf_free(&in);
	/* "a" * 100, LZ4-compressed by the driver's lz4 module */
	buf_clear(&out);
	from_hex("0b00c800048f183a1f6101004b506161616161a6eef35a", &in);
	ck_assert_int_eq(
		cql_segment_decode(in.data, in.len, true, &out, &used, &whole),
		CQL_SEGMENT_OK);
	ck_assert_uint_eq(used, in.len);
	ck_assert(whole);
	ck_assert_uint_eq(out.len, 100);
	for (size_t i = 0; i < 100; i++)
		ck_assert_uint_eq(out.data[i], 'a');
	buf_free(&in);
	buf_free(&out);
}
END_TEST

START_TEST(corrupt_crcs_are_refused)
{
	struct buf in, out;
	size_t used;
	bool whole;
	buf_init(&out);
	from_hex("05000219999a68656c6c6f74800eb6", &in);
	in.data[6] ^= 0x20; /* a payload byte */
	ck_assert_int_eq(
		cql_segment_decode(in.data, in.len, false, &out, &used, &whole),
		CQL_SEGMENT_CORRUPT);
	ck_assert_int_eq(err_code(), ERR_PROTOCOL);
	ck_assert_ptr_nonnull(strstr(err_msg(), "CRC in segment payload"));
	in.data[6] ^= 0x20;
	in.data[0] ^= 0x01; /* the length */
	ck_assert_int_eq(
		cql_segment_decode(in.data, in.len, false, &out, &used, &whole),
		CQL_SEGMENT_CORRUPT);
	ck_assert_ptr_nonnull(strstr(err_msg(), "CRC in segment header"));
	in.data[0] ^= 0x01;
	in.data[3] ^= 0x80; /* the header's CRC itself */
	ck_assert_int_eq(
		cql_segment_decode(in.data, in.len, false, &out, &used, &whole),
		CQL_SEGMENT_CORRUPT);
	ck_assert_uint_eq(out.len, 0);
	buf_free(&in);
	buf_free(&out);
}
END_TEST

/* An envelope over 128 KiB - 1 is cut into segments that are not
 * self-contained; each direction puts it back together. */
static void split_round_trip(bool lz4)
{
	size_t n = 300000;
	uint8_t *env = malloc(n);
	ck_assert_ptr_nonnull(env);
	for (size_t i = 0; i < n; i++)
		env[i] = (uint8_t)(lz4 ? 'a' + i % 7 : (i * 2654435761u) >> 24);
	struct buf seg, out;
	buf_init(&seg);
	buf_init(&out);
	ck_assert_int_eq(cql_segment_encode(&seg, env, n, lz4), 0);
	size_t pos = 0, count = 0;
	while (pos < seg.len) {
		size_t used;
		bool whole;
		ck_assert_int_eq(cql_segment_decode(seg.data + pos,
						    seg.len - pos, lz4, &out,
						    &used, &whole),
				 CQL_SEGMENT_OK);
		ck_assert(!whole);
		pos += used;
		count++;
	}
	ck_assert_uint_eq(count, 3); /* 131071 + 131071 + 37858 */
	ck_assert_uint_eq(out.len, n);
	ck_assert_int_eq(memcmp(out.data, env, n), 0);
	if (lz4)
		ck_assert_uint_lt(seg.len, n / 4); /* really compressed */
	else
		ck_assert_uint_eq(seg.len, n + 3 * 10);
	free(env);
	buf_free(&seg);
	buf_free(&out);
}

START_TEST(large_envelopes_split_and_join)
{
	split_round_trip(false);
	split_round_trip(true);
}
END_TEST

START_TEST(corrupt_lz4_is_refused)
{
	struct buf seg, out;
	buf_init(&seg);
	buf_init(&out);
	uint8_t env[1000];
	memset(env, 'z', sizeof(env));
	ck_assert_int_eq(cql_segment_encode(&seg, env, sizeof(env), true), 0);
	/* claim a different uncompressed length, with a good header CRC */
	uint64_t hdr = 0;
	for (int i = 4; i >= 0; i--)
		hdr = (hdr << 8) | seg.data[i];
	hdr = (hdr & ~(0x1ffffull << 17)) | (999ull << 17);
	uint32_t crc = cql_crc24(hdr, 5);
	for (int i = 0; i < 5; i++)
		seg.data[i] = (uint8_t)(hdr >> (8 * i));
	for (int i = 0; i < 3; i++)
		seg.data[5 + i] = (uint8_t)(crc >> (8 * i));
	size_t used;
	bool whole;
	ck_assert_int_eq(cql_segment_decode(seg.data, seg.len, true, &out,
					    &used, &whole),
			 CQL_SEGMENT_CORRUPT);
	ck_assert_ptr_nonnull(strstr(err_msg(), "Corrupt LZ4 segment"));
	buf_free(&seg);
	buf_free(&out);
}
END_TEST

START_TEST(v5_query_and_batch_flags_are_ints_with_keyspace_and_now)
{
	struct buf b;
	buf_init(&b);
	/* QUERY: "SELECT", ONE, flags keyspace|now_in_seconds|page size */
	cql_write_long_string(&b, "SELECT", 6);
	cql_write_short(&b, 1);
	cql_write_int(&b, CQL_QF_PAGE_SIZE | CQL_QF_KEYSPACE |
				  CQL_QF_NOW_IN_SECONDS);
	cql_write_int(&b, 100);
	cql_write_cstring(&b, "ks1");
	cql_write_int(&b, 1700000000);
	struct arena a;
	arena_create(&a, 0);
	struct cursor c = cursor_make(b.data, b.len);
	struct cql_query q;
	ck_assert_int_eq(cql_decode_query(&c, 5, &a, &q), 0);
	ck_assert_int_eq(q.params.page_size, 100);
	ck_assert(q.params.has_keyspace);
	ck_assert(slice_eq(q.params.keyspace, slice_from_cstr("ks1")));
	ck_assert(q.params.has_now_in_seconds);
	ck_assert_int_eq(q.params.now_in_seconds, 1700000000);
	ck_assert_uint_eq(cursor_left(&c), 0);
	struct slice ks;
	ck_assert_int_eq(
		cql_request_keyspace(b.data, b.len, 5, CQL_OP_QUERY, &ks), 1);
	ck_assert(slice_eq(ks, slice_from_cstr("ks1")));
	/* the same bytes as v4 read a one-byte flag: not what was meant */
	ck_assert_int_eq(
		cql_request_keyspace(b.data, b.len, 4, CQL_OP_QUERY, &ks), 0);

	/* PREPARE with its keyspace */
	buf_clear(&b);
	cql_write_long_string(&b, "SELECT", 6);
	cql_write_int(&b, CQL_PREPARE_WITH_KEYSPACE);
	cql_write_cstring(&b, "ks2");
	ck_assert_int_eq(
		cql_request_keyspace(b.data, b.len, 5, CQL_OP_PREPARE, &ks), 1);
	ck_assert(slice_eq(ks, slice_from_cstr("ks2")));
	buf_clear(&b);
	cql_write_long_string(&b, "SELECT", 6);
	cql_write_int(&b, 0);
	ck_assert_int_eq(
		cql_request_keyspace(b.data, b.len, 5, CQL_OP_PREPARE, &ks), 0);

	/* BATCH: one query, then ONE, keyspace */
	buf_clear(&b);
	buf_put_u8(&b, CQL_BATCH_UNLOGGED);
	cql_write_short(&b, 1);
	buf_put_u8(&b, 0);
	cql_write_long_string(&b, "INSERT", 6);
	cql_write_short(&b, 0);
	cql_write_short(&b, 1);
	cql_write_int(&b, CQL_QF_KEYSPACE);
	cql_write_cstring(&b, "ks3");
	struct cql_batch bt;
	c = cursor_make(b.data, b.len);
	ck_assert_int_eq(cql_decode_batch(&c, 5, &a, &bt), 0);
	ck_assert(bt.has_keyspace);
	ck_assert_int_eq(
		cql_request_keyspace(b.data, b.len, 5, CQL_OP_BATCH, &ks), 1);
	ck_assert(slice_eq(ks, slice_from_cstr("ks3")));

	/* EXECUTE: id, result_metadata_id, parameters */
	buf_clear(&b);
	cql_write_short_bytes(&b, "0123456789abcdef", 16);
	cql_write_short_bytes(&b, "fedcba9876543210", 16);
	cql_write_short(&b, 1);
	cql_write_int(&b, 0);
	struct cql_execute x;
	c = cursor_make(b.data, b.len);
	ck_assert_int_eq(cql_decode_execute(&c, 5, &a, &x), 0);
	ck_assert_uint_eq(x.id.len, 16);
	ck_assert_uint_eq(x.result_metadata_id.len, 16);
	ck_assert_int_eq(memcmp(x.result_metadata_id.ptr, "fedc", 4), 0);
	ck_assert_uint_eq(cursor_left(&c), 0);
	struct slice m = cql_execute_result_metadata_id(b.data, b.len, 5);
	ck_assert_uint_eq(m.len, 16);
	ck_assert_uint_eq(cql_execute_result_metadata_id(b.data, b.len, 4).len,
			  0);
	arena_destroy(&a);
	buf_free(&b);
}
END_TEST

static const struct cql_type_option t_int = {.id = CQL_TYPE_INT};
static const struct cql_type_option t_text = {.id = CQL_TYPE_VARCHAR};

/* A Rows frame for `cols`, no rows. */
static void rows_frame(struct buf *b, const struct cql_column_spec *cols,
		       size_t n)
{
	buf_clear(b);
	long start = cql_frame_begin(b, 5, 0, 3, CQL_OP_RESULT);
	ck_assert_int_ge(start, 0);
	ck_assert_int_eq(cql_write_int(b, CQL_RESULT_ROWS), 0);
	ck_assert_int_eq(cql_write_rows_metadata(b, cols, n, NULL, false), 0);
	ck_assert_int_eq(cql_write_int(b, 0), 0);
	cql_frame_end(b, start);
}

START_TEST(metadata_changed_when_the_clients_id_is_stale)
{
	static const struct cql_column_spec two[] = {
		{"ks", "t", "k", &t_int},
		{"ks", "t", "v", &t_text},
	};
	uint8_t id2[CQL_METADATA_ID_LEN], id1[CQL_METADATA_ID_LEN];
	ck_assert_int_eq(cql_result_metadata_id(two, 2, id2), 0);
	ck_assert_int_eq(cql_result_metadata_id(two, 1, id1), 0);
	ck_assert_int_ne(memcmp(id1, id2, sizeof(id1)), 0);

	struct buf f;
	buf_init(&f);
	rows_frame(&f, two, 2);
	size_t len = f.len;
	ck_assert(!cql_frame_metadata_stale(f.data, f.len,
					    slice_make(id2, sizeof(id2))));
	ck_assert(cql_frame_metadata_stale(f.data, f.len,
					   slice_make(id1, sizeof(id1))));
	ck_assert(cql_frame_metadata_stale(f.data, f.len, slice_make(NULL, 0)));
	/* the current id: left alone */
	ck_assert_int_eq(cql_frame_mark_metadata_changed(
				 &f, slice_make(id2, sizeof(id2))),
			 0);
	ck_assert_uint_eq(f.len, len);
	/* a stale id: the flag and the new id, before the column specs */
	ck_assert_int_eq(cql_frame_mark_metadata_changed(
				 &f, slice_make(id1, sizeof(id1))),
			 0);
	ck_assert_uint_eq(f.len, len + 18);
	const uint8_t *body = f.data + CQL_HEADER_LEN;
	ck_assert_uint_eq(be32_load(f.data + 5), f.len - CQL_HEADER_LEN);
	ck_assert_uint_eq(be32_load(body + 4),
			  CQL_ROWS_GLOBAL_TABLES_SPEC |
				  CQL_ROWS_METADATA_CHANGED);
	ck_assert_uint_eq(be16_load(body + 12), 16);
	ck_assert_int_eq(memcmp(body + 14, id2, 16), 0);
	/* already marked: not twice */
	ck_assert_int_eq(cql_frame_mark_metadata_changed(
				 &f, slice_make(id1, sizeof(id1))),
			 0);
	ck_assert_uint_eq(f.len, len + 18);
	/* not a Rows result: left alone */
	buf_clear(&f);
	ck_assert_int_eq(cql_encode_result_void(&f, 5, 1), 0);
	len = f.len;
	ck_assert_int_eq(
		cql_frame_mark_metadata_changed(&f, slice_make(id1, 16)), 0);
	ck_assert_uint_eq(f.len, len);

	/* PREPARED in v5 carries the id the Rows will be checked against */
	buf_clear(&f);
	ck_assert_int_eq(cql_write_prepared(&f, 5, (const uint8_t *)"ID", 2,
					    two, 1, NULL, 0, two, 2),
			 0);
	ck_assert_uint_eq(be16_load(f.data + 4), 16);
	ck_assert_int_eq(memcmp(f.data + 6, id2, 16), 0);
	buf_clear(&f);
	ck_assert_int_eq(cql_write_prepared(&f, 4, (const uint8_t *)"ID", 2,
					    two, 1, NULL, 0, two, 2),
			 0);
	ck_assert_uint_eq(be32_load(f.data + 4), CQL_ROWS_GLOBAL_TABLES_SPEC);
	buf_free(&f);
}
END_TEST

START_TEST(failures_carry_a_reason_map_in_v5)
{
	struct cql_failure_reason r[2] = {
		{.endpoint = {.family = INET_V4, .ip = {127, 0, 127, 9}},
		 .code = CQL_FAILURE_READ_TOO_MANY_TOMBSTONES},
		{.endpoint = {.family = INET_V6, .ip = {[15] = 1}},
		 .code = CQL_FAILURE_UNKNOWN},
	};
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(cql_encode_read_failure_reasons(&b, 5, 1, "m", 1, 0, 1,
							 r, 2, false),
			 0);
	/* code, "m", cl, received, block_for, then the map */
	const uint8_t *p = b.data + CQL_HEADER_LEN + 4 + 3 + 2 + 4 + 4;
	ck_assert_uint_eq(be32_load(p), 2);
	ck_assert_uint_eq(p[4], 4);
	ck_assert_int_eq(memcmp(p + 5, "\x7f\x00\x7f\x09", 4), 0);
	ck_assert_uint_eq(be16_load(p + 9), 1);
	ck_assert_uint_eq(p[11], 16);
	ck_assert_uint_eq(be16_load(p + 28), 0);
	ck_assert_uint_eq(p[30], 0); /* data_present */
	ck_assert_uint_eq(b.len, (size_t)(p + 31 - b.data));
	/* v4: the count */
	buf_clear(&b);
	ck_assert_int_eq(
		cql_encode_write_failure(&b, 4, 1, "m", 1, 0, 1, 1, "SIMPLE"),
		0);
	p = b.data + CQL_HEADER_LEN + 4 + 3 + 2 + 4 + 4;
	ck_assert_uint_eq(be32_load(p), 1);
	/* v5 without the replicas: an empty map */
	buf_clear(&b);
	ck_assert_int_eq(
		cql_encode_write_failure(&b, 5, 1, "m", 1, 0, 1, 1, "SIMPLE"),
		0);
	ck_assert_uint_eq(be32_load(p), 0);
	buf_free(&b);
}
END_TEST

START_TEST(cas_write_unknown_is_v5_only)
{
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(cql_encode_cas_write_unknown(&b, 5, 1, "m",
						      CQL_CL_SERIAL, 1, 2),
			 0);
	const uint8_t *p = b.data + CQL_HEADER_LEN;
	ck_assert_uint_eq(be32_load(p), CQL_ERR_CAS_WRITE_UNKNOWN);
	ck_assert_uint_eq(be16_load(p + 7), CQL_CL_SERIAL);
	ck_assert_uint_eq(be32_load(p + 9), 1);
	ck_assert_uint_eq(be32_load(p + 13), 2);
	ck_assert_uint_eq(b.len, CQL_HEADER_LEN + 17);
	buf_clear(&b);
	ck_assert_int_eq(cql_encode_cas_write_unknown(&b, 4, 1, "m",
						      CQL_CL_SERIAL, 1, 2),
			 0);
	ck_assert_uint_eq(be32_load(b.data + CQL_HEADER_LEN),
			  CQL_ERR_WRITE_TIMEOUT);
	/* ... then the write type CAS */
	ck_assert_int_eq(memcmp(b.data + b.len - 3, "CAS", 3), 0);
	buf_free(&b);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("proto_segment");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, crcs_match_the_drivers);
	tcase_add_test(tc, segments_are_byte_for_byte_the_drivers);
	tcase_add_test(tc, decodes_the_drivers_segments_plain_and_lz4);
	tcase_add_test(tc, corrupt_crcs_are_refused);
	tcase_add_test(tc, large_envelopes_split_and_join);
	tcase_add_test(tc, corrupt_lz4_is_refused);
	tcase_add_test(tc,
		       v5_query_and_batch_flags_are_ints_with_keyspace_and_now);
	tcase_add_test(tc, metadata_changed_when_the_clients_id_is_stale);
	tcase_add_test(tc, failures_carry_a_reason_map_in_v5);
	tcase_add_test(tc, cas_write_unknown_is_v5_only);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
