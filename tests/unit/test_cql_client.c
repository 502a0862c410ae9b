/*
 * client/cql_client: request encoders against the server's decoders,
 * response decoders against the server's encoders, and the decoders under
 * truncated and random input (every call must fail cleanly, never read past
 * the body). Also the latency histogram of cassini-stress and the client's
 * failure paths without a server. Sockets on 127.0.8.250-251
 * (test-addresses: 127.0.8.250-251; test-addresses-parsed: 127.0.91.60).
 */
#include "client/driver/cql_client.h"
#include "common/err.h"
#include "common/murmur3.h"
#include "common/rand.h"
#include "node/tools/stress_hist.h"
#include "tests/lib/testutil.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <sys/socket.h>
#include <unistd.h>

#include <stdlib.h>
#include <string.h>

static uint64_t seed;

/* The body of the first frame in `b`, copied to the heap so that ASan sees
 * any read past its end. */
static uint8_t *frame_body(const struct buf *b, size_t *len, uint8_t *opcode)
{
	ck_assert_uint_ge(b->len, CQL_HEADER_LEN);
	*len = be32_load(b->data + 5);
	*opcode = b->data[4];
	ck_assert_uint_eq(*len + CQL_HEADER_LEN, b->len);
	uint8_t *copy = malloc(*len ? *len : 1);
	memcpy(copy, b->data + CQL_HEADER_LEN, *len);
	return copy;
}

START_TEST(requests_decode_with_the_server_decoders)
{
	struct buf b = {0};
	struct arena a;
	arena_create(&a, 0);
	uint8_t key[] = {1, 2, 3};
	struct cql_value vals[3] = {
		{3, key}, {CQL_VALUE_NULL, NULL}, {CQL_VALUE_UNSET, NULL}};

	ck_assert_int_eq(cql_client_encode_query(&b, 7, "SELECT x FROM t",
						 CQL_CL_QUORUM, vals, 3),
			 0);
	struct cql_header h;
	ck_assert_int_eq(cql_header_decode(b.data, 1 << 20, &h), CQL_HEADER_OK);
	ck_assert_int_eq(h.stream, 7);
	ck_assert_uint_eq(h.opcode, CQL_OP_QUERY);
	ck_assert_uint_eq(h.version, 4);
	struct cursor c = cursor_make(b.data + 9, h.length);
	struct cql_query q;
	ck_assert_int_eq(cql_decode_query(&c, 4, &a, &q), 0);
	ck_assert_uint_eq(q.query.len, 15);
	ck_assert_uint_eq(q.params.consistency, CQL_CL_QUORUM);
	ck_assert_uint_eq(q.params.value_count, 3);
	ck_assert_int_eq(q.params.values[0].len, 3);
	ck_assert_int_eq(q.params.values[1].len, CQL_VALUE_NULL);
	ck_assert_int_eq(q.params.values[2].len, CQL_VALUE_UNSET);
	ck_assert_uint_eq(cursor_left(&c), 0);

	buf_clear(&b);
	uint8_t id[16] = {0xab};
	ck_assert_int_eq(
		cql_client_encode_execute(&b, 300, id, 16, CQL_CL_ONE, vals, 1),
		0);
	ck_assert_int_eq(cql_header_decode(b.data, 1 << 20, &h), CQL_HEADER_OK);
	ck_assert_int_eq(h.stream, 300);
	c = cursor_make(b.data + 9, h.length);
	struct cql_execute e;
	ck_assert_int_eq(cql_decode_execute(&c, 4, &a, &e), 0);
	ck_assert_uint_eq(e.id.len, 16);
	ck_assert_uint_eq(e.id.ptr[0], 0xab);
	ck_assert_uint_eq(e.params.value_count, 1);
	ck_assert(e.params.flags & CQL_QF_SKIP_METADATA);

	buf_clear(&b);
	ck_assert_int_eq(cql_client_encode_prepare(&b, 1, "INSERT ..."), 0);
	c = cursor_make(b.data + 9, b.len - 9);
	struct slice s;
	ck_assert_int_eq(cql_decode_prepare(&c, &s), 0);
	ck_assert_uint_eq(s.len, 10);

	buf_clear(&b);
	ck_assert_int_eq(cql_client_encode_startup(&b, 0, false), 0);
	c = cursor_make(b.data + 9, b.len - 9);
	struct cql_pair *opts;
	uint16_t n;
	ck_assert_int_eq(cql_decode_startup(&c, &a, &opts, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(opts[0].key.len, 11);
	buf_clear(&b);
	ck_assert_int_eq(cql_client_encode_startup(&b, 0, true), 0);
	c = cursor_make(b.data + 9, b.len - 9);
	ck_assert_int_eq(cql_decode_startup(&c, &a, &opts, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(opts[1].value.len, 3);
	ck_assert_int_eq(memcmp(opts[1].value.ptr, "lz4", 3), 0);
	buf_free(&b);
	arena_destroy(&a);
}
END_TEST

static const struct cql_type_option t_blob = {.id = CQL_TYPE_BLOB};
static const struct cql_type_option t_int = {.id = CQL_TYPE_INT};
static const struct cql_type_option t_text = {.id = CQL_TYPE_VARCHAR};
static const struct cql_type_option t_list = {.id = CQL_TYPE_LIST,
					      .sub = {&t_int}};
static const struct cql_type_option t_map = {.id = CQL_TYPE_MAP,
					     .sub = {&t_text, &t_list}};

/* A ROWS body: (key blob, c0 blob, m map<text, list<int>>), two rows. */
static void build_rows(struct buf *b)
{
	struct cql_column_spec cols[3] = {
		{"ks", "t", "key", &t_blob},
		{"ks", "t", "c0", &t_blob},
		{"ks", "t", "m", &t_map},
	};
	long start = cql_frame_begin(b, 4, 0, 5, CQL_OP_RESULT);
	ck_assert_int_ge(start, 0);
	cql_write_int(b, CQL_RESULT_ROWS);
	ck_assert_int_eq(cql_write_rows_metadata(b, cols, 3, NULL, false), 0);
	cql_write_int(b, 2);
	for (int r = 0; r < 2; r++) {
		cql_write_bytes(b, "k0", 2);
		cql_write_bytes(b, r ? "" : "value", r ? 0 : 5);
		cql_write_bytes(b, NULL, -1);
	}
	cql_frame_end(b, start);
}

/* A PREPARED body: INSERT (k1, k2, v) with partition key (k2, k1). */
static void build_prepared(struct buf *b)
{
	struct cql_column_spec binds[3] = {
		{"ks", "t", "k1", &t_text},
		{"ks", "t", "k2", &t_int},
		{"ks", "t", "v", &t_map},
	};
	uint16_t pk[2] = {1, 0};
	uint8_t id[16];
	memset(id, 0x5a, sizeof(id));
	long start = cql_frame_begin(b, 4, 0, 9, CQL_OP_RESULT);
	cql_write_int(b, CQL_RESULT_PREPARED);
	ck_assert_int_eq(
		cql_write_prepared(b, 4, id, 16, binds, 3, pk, 2, NULL, 0), 0);
	cql_frame_end(b, start);
}

static int decode_frame(const struct buf *b, struct arena *a,
			struct cql_client_response *r)
{
	struct cql_header h;
	ck_assert_int_eq(cql_client_header_decode(b->data, 1 << 20, &h), 0);
	return cql_client_response_decode(h.opcode, h.flags, b->data + 9,
					  h.length, a, r);
}

START_TEST(responses_decode_from_the_server_encoders)
{
	struct buf b = {0};
	struct arena a;
	struct cql_client_response r;
	arena_create(&a, 0);

	ck_assert_int_eq(cql_encode_result_void(&b, 4, 1), 0);
	ck_assert_int_eq(decode_frame(&b, &a, &r), 0);
	ck_assert_uint_eq(r.opcode, CQL_OP_RESULT);
	ck_assert_int_eq(r.kind, CQL_RESULT_VOID);

	buf_clear(&b);
	ck_assert_int_eq(cql_encode_error(&b, 4, 1, CQL_ERR_INVALID,
					  "unconfigured table x"),
			 0);
	ck_assert_int_eq(decode_frame(&b, &a, &r), 0);
	ck_assert_uint_eq(r.opcode, CQL_OP_ERROR);
	ck_assert_int_eq(r.error_code, CQL_ERR_INVALID);
	ck_assert_uint_eq(r.error_message.len, 20);
	ck_assert_str_eq(cql_client_error_name(r.error_code), "Invalid");

	buf_clear(&b);
	ck_assert_int_eq(cql_encode_write_timeout(&b, 4, 1, "timed out",
						  CQL_CL_QUORUM, 1, 2,
						  "SIMPLE"),
			 0);
	ck_assert_int_eq(decode_frame(&b, &a, &r), 0);
	ck_assert_str_eq(cql_client_error_name(r.error_code), "WriteTimeout");

	buf_clear(&b);
	ck_assert_int_eq(cql_encode_result_set_keyspace(&b, 4, 1, "ks1"), 0);
	ck_assert_int_eq(decode_frame(&b, &a, &r), 0);
	ck_assert_int_eq(r.kind, CQL_RESULT_SET_KEYSPACE);
	ck_assert_uint_eq(r.keyspace.len, 3);

	buf_clear(&b);
	ck_assert_int_eq(cql_encode_result_schema_change(&b, 4, 1, "CREATED",
							 "TABLE", "ks1", "t"),
			 0);
	ck_assert_int_eq(decode_frame(&b, &a, &r), 0);
	ck_assert_int_eq(r.kind, CQL_RESULT_SCHEMA_CHANGE);
	ck_assert_uint_eq(r.schema_change.name.len, 1);
	buf_clear(&b);
	ck_assert_int_eq(cql_encode_result_schema_change(
				 &b, 4, 1, "DROPPED", "KEYSPACE", "ks1", NULL),
			 0);
	ck_assert_int_eq(decode_frame(&b, &a, &r), 0);
	ck_assert_uint_eq(r.schema_change.keyspace.len, 3);
	ck_assert_uint_eq(r.schema_change.name.len, 0);

	buf_clear(&b);
	build_rows(&b);
	ck_assert_int_eq(decode_frame(&b, &a, &r), 0);
	ck_assert_int_eq(r.kind, CQL_RESULT_ROWS);
	ck_assert_int_eq(r.rows.column_count, 3);
	ck_assert_int_eq(r.rows.row_count, 2);
	ck_assert_uint_eq(r.rows.columns[2].type, CQL_TYPE_MAP);
	ck_assert_uint_eq(r.rows.columns[1].name.len, 2);
	ck_assert_int_eq(r.rows.values[1].len, 5);
	ck_assert_int_eq(memcmp(r.rows.values[1].ptr, "value", 5), 0);
	ck_assert_int_eq(r.rows.values[2].len, CQL_VALUE_NULL);
	ck_assert_int_eq(r.rows.values[4].len, 0);
	const struct cql_value *cell = cql_client_rows_cell(&r.rows, 0, 1);
	ck_assert_ptr_eq(cell, &r.rows.values[1]);
	ck_assert_uint_eq(cql_client_value_bytes(cell).len, 5);
	ck_assert_ptr_null(cql_client_rows_cell(&r.rows, 2, 0));
	ck_assert_ptr_null(cql_client_rows_cell(&r.rows, 0, 3));
	ck_assert_ptr_null(cql_client_rows_cell(&r.rows, -1, 0));
	int64_t iv;
	uint8_t be[8] = {0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 7};
	struct cql_value ints[4] = {
		{4, be}, {8, be}, {1, be + 7}, {CQL_VALUE_NULL, NULL}};
	ck_assert_int_eq(cql_client_value_int(&ints[0], &iv), 0);
	ck_assert_int_eq(iv, -2);
	ck_assert_int_eq(cql_client_value_int(&ints[1], &iv), 0);
	ck_assert_int_eq(iv, (int64_t)0xfffffffe00000007ull);
	ck_assert_int_eq(cql_client_value_int(&ints[2], &iv), 0);
	ck_assert_int_eq(iv, 7);
	ck_assert_int_eq(cql_client_value_int(&ints[3], &iv), -1);
	ck_assert_int_eq(cql_client_value_int(cell, &iv), -1);

	buf_clear(&b);
	build_prepared(&b);
	ck_assert_int_eq(decode_frame(&b, &a, &r), 0);
	ck_assert_int_eq(r.kind, CQL_RESULT_PREPARED);
	ck_assert_uint_eq(r.prepared.id.len, 16);
	ck_assert_int_eq(r.prepared.bind_count, 3);
	ck_assert_int_eq(r.prepared.pk_count, 2);
	ck_assert_uint_eq(r.prepared.pk_indexes[0], 1);
	ck_assert_uint_eq(r.prepared.pk_indexes[1], 0);
	ck_assert_uint_eq(r.prepared.binds[2].type, CQL_TYPE_MAP);

	buf_clear(&b);
	ck_assert_int_eq(cql_encode_ready(&b, 4, 0), 0);
	ck_assert_int_eq(decode_frame(&b, &a, &r), 0);
	ck_assert_uint_eq(r.opcode, CQL_OP_READY);
	buf_free(&b);
	arena_destroy(&a);
}
END_TEST

START_TEST(every_truncation_fails_cleanly)
{
	struct buf frames[6] = {{0}};
	cql_encode_error(&frames[0], 4, 1, CQL_ERR_SYNTAX, "line 1:0 no");
	cql_encode_result_set_keyspace(&frames[1], 4, 1, "ks");
	cql_encode_result_schema_change(&frames[2], 4, 1, "CREATED", "TABLE",
					"ks", "t");
	build_rows(&frames[3]);
	build_prepared(&frames[4]);
	cql_encode_result_void(&frames[5], 4, 1);
	for (size_t f = 0; f < 6; f++) {
		size_t len;
		uint8_t op;
		uint8_t *body = frame_body(&frames[f], &len, &op);
		for (size_t cut = 0; cut < len; cut++) {
			struct arena a;
			struct cql_client_response r;
			arena_create(&a, 0);
			uint8_t *part = malloc(cut ? cut : 1);
			memcpy(part, body, cut);
			err_clear();
			ck_assert_msg(cql_client_response_decode(
					      op, 0, part, cut, &a, &r) == -1,
				      "frame %zu cut at %zu of %zu decoded", f,
				      cut, len);
			ck_assert_int_eq(err_code(), ERR_PROTOCOL);
			free(part);
			arena_destroy(&a);
		}
		free(body);
		buf_free(&frames[f]);
	}
}
END_TEST

START_TEST(hostile_counts_and_types_are_refused)
{
	struct arena a;
	struct cql_client_response r;
	arena_create(&a, 0);
	/* ROWS claiming 2^31-1 columns. */
	uint8_t cols[] = {0, 0, 0, 2, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff};
	ck_assert_int_eq(cql_client_response_decode(CQL_OP_RESULT, 0, cols,
						    sizeof(cols), &a, &r),
			 -1);
	/* ROWS with NO_METADATA, one column, 2^31-1 rows. */
	uint8_t rows[] = {0, 0, 0,    2,    0,    0,    0, 4, 0, 0,
			  0, 1, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0};
	ck_assert_int_eq(cql_client_response_decode(CQL_OP_RESULT, 0, rows,
						    sizeof(rows), &a, &r),
			 -1);
	/* Negative row count. */
	rows[12] = 0xff;
	ck_assert_int_eq(cql_client_response_decode(CQL_OP_RESULT, 0, rows,
						    sizeof(rows), &a, &r),
			 -1);
	/* A list of lists ... 200 deep. */
	struct buf b = {0};
	cql_write_int(&b, CQL_RESULT_ROWS);
	cql_write_int(&b, CQL_ROWS_GLOBAL_TABLES_SPEC);
	cql_write_int(&b, 1);
	cql_write_cstring(&b, "ks");
	cql_write_cstring(&b, "t");
	cql_write_cstring(&b, "c");
	for (int i = 0; i < 200; i++)
		cql_write_short(&b, CQL_TYPE_LIST);
	cql_write_short(&b, CQL_TYPE_INT);
	cql_write_int(&b, 0);
	ck_assert_int_eq(cql_client_response_decode(CQL_OP_RESULT, 0, b.data,
						    b.len, &a, &r),
			 -1);
	ck_assert_int_eq(err_code(), ERR_PROTOCOL);
	/* Partition key index beyond the binds. */
	buf_clear(&b);
	build_prepared(&b);
	size_t pk_at = 9 + 4 + 18 + 4 + 4 + 4; /* kind, id, flags, n, npk */
	be16_store(b.data + pk_at, 3);
	ck_assert_int_eq(decode_frame(&b, &a, &r), -1);
	/* Unknown result kind and opcode; a request frame's header. */
	uint8_t kind[] = {0, 0, 0, 9};
	ck_assert_int_eq(
		cql_client_response_decode(CQL_OP_RESULT, 0, kind, 4, &a, &r),
		-1);
	ck_assert_int_eq(
		cql_client_response_decode(CQL_OP_QUERY, 0, kind, 4, &a, &r),
		-1);
	uint8_t hdr[9] = {0x04, 0, 0, 1, CQL_OP_RESULT, 0, 0, 0, 4};
	struct cql_header h;
	ck_assert_int_eq(cql_client_header_decode(hdr, 1 << 20, &h), -1);
	hdr[0] = 0x83;
	ck_assert_int_eq(cql_client_header_decode(hdr, 1 << 20, &h), -1);
	hdr[0] = 0x84;
	ck_assert_int_eq(cql_client_header_decode(hdr, 3, &h), -1);
	ck_assert_int_eq(cql_client_header_decode(hdr, 4, &h), 0);
	buf_free(&b);
	arena_destroy(&a);
}
END_TEST

START_TEST(random_bodies_never_crash)
{
	struct rng g;
	rng_seed(&g, seed);
	static const uint8_t ops[] = {CQL_OP_ERROR,       CQL_OP_READY,
				      CQL_OP_RESULT,      CQL_OP_SUPPORTED,
				      CQL_OP_EVENT,       CQL_OP_AUTHENTICATE,
				      CQL_OP_AUTH_SUCCESS};
	struct buf valid = {0};
	build_rows(&valid);
	for (int i = 0; i < 20000; i++) {
		size_t len = (size_t)rng_below(&g, 200);
		uint8_t *body = malloc(len ? len : 1);
		if (i % 2 && len <= valid.len - 9) {
			/* A valid body with a few bytes flipped. */
			memcpy(body, valid.data + 9, len);
			for (int k = 0; k < 3 && len; k++)
				body[rng_below(&g, len)] =
					(uint8_t)rng_next(&g);
		} else {
			for (size_t k = 0; k < len; k++)
				body[k] = (uint8_t)rng_next(&g);
		}
		struct arena a;
		struct cql_client_response r;
		arena_create(&a, 0);
		uint8_t op =
			i % 2 ? CQL_OP_RESULT : ops[rng_below(&g, sizeof(ops))];
		uint8_t flags =
			(uint8_t)(rng_below(&g, 4) == 0 ? rng_next(&g) & 0x0e
							: 0);
		int rc = cql_client_response_decode(op, flags, body, len, &a,
						    &r);
		ck_assert(rc == 0 || rc == -1);
		if (rc == 0 && op == CQL_OP_RESULT &&
		    r.kind == CQL_RESULT_ROWS) {
			/* Every value decoded lies inside the body. */
			size_t n = (size_t)r.rows.row_count *
				   (size_t)r.rows.column_count;
			for (size_t v = 0; v < n; v++) {
				const struct cql_value *cv = &r.rows.values[v];
				if (cv->len > 0)
					ck_assert(cv->ptr >= body &&
						  cv->ptr + cv->len <=
							  body + len);
			}
		}
		arena_destroy(&a);
		free(body);
	}
	buf_free(&valid);
}
END_TEST

START_TEST(routing_token_hashes_the_partition_key_binds)
{
	struct buf b = {0};
	struct arena a;
	struct cql_client_response r;
	arena_create(&a, 0);
	build_prepared(&b);
	ck_assert_int_eq(decode_frame(&b, &a, &r), 0);
	ck_assert_int_eq(r.prepared.pk_count, 2);
	/* cql_client_routing_token needs a client-owned statement; check
	 * the compound key order it must use: binds 1 then 0. */
	struct slice parts[2] = {slice_from_cstr("k2"), slice_from_cstr("k1")};
	int64_t t1, t2;
	ck_assert_int_eq(murmur3_compound_token(parts, 2, &t1), 0);
	struct slice swapped[2] = {parts[1], parts[0]};
	ck_assert_int_eq(murmur3_compound_token(swapped, 2, &t2), 0);
	ck_assert(t1 != t2);
	uint16_t cl;
	ck_assert_int_eq(cql_client_consistency_parse("quorum", &cl), 0);
	ck_assert_uint_eq(cl, CQL_CL_QUORUM);
	ck_assert_int_eq(cql_client_consistency_parse("LOCAL_ONE", &cl), 0);
	ck_assert_uint_eq(cl, CQL_CL_LOCAL_ONE);
	ck_assert_int_eq(cql_client_consistency_parse("MOST", &cl), -1);
	buf_free(&b);
	arena_destroy(&a);
}
END_TEST

START_TEST(histogram_quantiles_are_within_a_bucket)
{
	static struct stress_hist h;
	stress_hist_reset(&h);
	uint64_t prev_high = 0;
	for (unsigned bkt = 0; bkt < STRESS_HIST_BUCKETS; bkt++) {
		uint64_t lo, hi;
		stress_hist_bucket_range(bkt, &lo, &hi);
		ck_assert_uint_eq(stress_hist_bucket(lo), bkt);
		ck_assert_uint_eq(stress_hist_bucket(hi), bkt);
		if (bkt)
			ck_assert_uint_eq(lo, prev_high + 1);
		prev_high = hi;
	}
	/* 1..100000 us in ns: quantiles within 1/64 of the exact value. */
	for (uint64_t v = 1; v <= 100000; v++)
		stress_hist_record(&h, v * 1000);
	double qs[] = {0.5, 0.95, 0.99, 0.999};
	for (size_t i = 0; i < 4; i++) {
		double exact = qs[i] * 100000 * 1000;
		double got = (double)stress_hist_quantile(&h, qs[i]);
		ck_assert_msg(got > exact * (1 - 1.0 / 64) &&
				      got < exact * (1 + 1.0 / 64),
			      "q%.3f: %.0f vs %.0f", qs[i], got, exact);
	}
	ck_assert_uint_eq(stress_hist_quantile(&h, 1), 100000 * 1000);
	ck_assert_uint_eq(stress_hist_quantile(&h, 0), 1000);
	ck_assert(stress_hist_mean(&h) > 50000 * 1000.0 - 1 &&
		  stress_hist_mean(&h) < 50001 * 1000.0);
	/* Huge values land in the last bucket; max is exact. */
	stress_hist_record(&h, UINT64_MAX / 2);
	ck_assert_uint_eq(stress_hist_bucket(UINT64_MAX / 2),
			  STRESS_HIST_BUCKETS - 1);
	ck_assert_uint_eq(h.max, UINT64_MAX / 2);
}
END_TEST

/* ---- the client without a server ---------------------------------------- */

struct outcome {
	int calls;
	enum cql_client_status status;
};

static void on_result(void *arg, enum cql_client_status status,
		      const struct cql_client_response *resp,
		      const char *message)
{
	struct outcome *o = arg;
	(void)resp;
	ck_assert_ptr_nonnull(message);
	o->calls++;
	o->status = status;
}

START_TEST(connect_to_nothing_fails_cleanly)
{
	struct event_base *base = event_base_new();
	struct inet_addr addr;
	/* Port 1 on a loopback address nobody serves: refused at once. */
	ck_assert_int_eq(inet_addr_parse("127.0.8.250:1", 9042, &addr), 0);
	struct cql_client_config cfg;
	cql_client_config_defaults(&cfg);
	cfg.contact_points = &addr;
	cfg.contact_count = 1;
	cfg.connections_per_host = 3;
	struct cql_client *c = cql_client_new(base, &cfg);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(cql_client_connect_sync(c), -1);
	ck_assert_msg(strstr(err_msg(), "127.0.8.250") != NULL, "%s",
		      err_msg());
	ck_assert_uint_eq(cql_client_ready_connections(c), 0);
	/* Requests fail with NoHostAvailable, from the loop, not inline. */
	struct outcome o = {0};
	cql_client_query(c, "SELECT 1", CQL_CL_ONE, NULL, 0, on_result, &o);
	ck_assert_int_eq(o.calls, 0);
	while (o.calls == 0)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(o.status, CQL_CLIENT_NO_HOST);
	ck_assert_int_eq(cql_client_query_sync(c, "SELECT 1", CQL_CL_ONE, NULL),
			 -1);
	cql_client_delete(c);

	cfg.connections_per_host = 0;
	ck_assert_ptr_null(cql_client_new(base, &cfg));
	cfg.connections_per_host = 1;
	cfg.contact_count = 0;
	ck_assert_ptr_null(cql_client_new(base, &cfg));
	event_base_free(base);
}
END_TEST

/* ---- against a scripted server ------------------------------------------ */

/*
 * A tiny native-protocol server on the test's own event loop: READY to
 * STARTUP, a PREPARED (partition key = bind 0) to PREPARE, VOID to EXECUTE
 * unless told to forget its statements (then Unprepared once), system.local
 * with tokens {-100, 100}, no peers; "SLOW" is never answered and "CLOSE"
 * closes the connection.
 */
struct fake {
	int fd;
	struct event *accept_ev;
	struct event_base *base;
	struct inet_addr addr;
	int connections, open, prepares, executes, unprepared, peers_v1;
	bool forget;
};

struct fake_conn {
	struct fake *f;
	struct bufferevent *bev;
};

static const struct cql_type_option t_inet = {.id = CQL_TYPE_INET};
static const struct cql_type_option t_set = {.id = CQL_TYPE_SET,
					     .sub = {&t_text}};

static void fake_reply(struct fake_conn *fc, const struct cql_header *h,
		       const uint8_t *body)
{
	struct fake *f = fc->f;
	struct buf b = {0};
	struct cursor c = cursor_make(body, h->length);
	long start;
	switch (h->opcode) {
	case CQL_OP_STARTUP:
		cql_encode_ready(&b, 4, h->stream);
		break;
	case CQL_OP_PREPARE: {
		struct cql_column_spec binds[2] = {{"ks", "t", "k", &t_blob},
						   {"ks", "t", "v", &t_blob}};
		uint16_t pk = 0;
		f->prepares++;
		f->forget = false;
		start = cql_frame_begin(&b, 4, 0, h->stream, CQL_OP_RESULT);
		cql_write_int(&b, CQL_RESULT_PREPARED);
		cql_write_prepared(&b, 4, (const uint8_t *)"ABCD", 4, binds, 2,
				   &pk, 1, NULL, 0);
		cql_frame_end(&b, start);
		break;
	}
	case CQL_OP_EXECUTE:
		f->executes++;
		if (f->forget) {
			f->unprepared++;
			cql_encode_unprepared(&b, 4, h->stream, "unknown id",
					      (const uint8_t *)"ABCD", 4);
		} else {
			cql_encode_result_void(&b, 4, h->stream);
		}
		break;
	case CQL_OP_QUERY: {
		struct slice q;
		ck_assert_int_eq(cql_read_long_string(&c, &q), 0);
		if (q.len == 4 && memcmp(q.ptr, "SLOW", 4) == 0)
			return;
		if (q.len == 5 && memcmp(q.ptr, "CLOSE", 5) == 0) {
			f->open--;
			bufferevent_free(fc->bev);
			free(fc);
			return;
		}
		if (memmem(q.ptr, q.len, "system.peers_v2", 15)) {
			/* As Cassandra 3 answers: the client falls back. */
			cql_encode_error(&b, 4, h->stream, CQL_ERR_INVALID,
					 "unconfigured table peers_v2");
			break;
		}
		bool local = memmem(q.ptr, q.len, "system.local", 12) != NULL;
		bool peers = memmem(q.ptr, q.len, "system.peers", 12) != NULL;
		f->peers_v1 += peers;
		if (!local && !peers) {
			cql_encode_result_void(&b, 4, h->stream);
			break;
		}
		struct cql_column_spec cols[2] = {
			{"system", "local", "rpc_address", &t_inet},
			{"system", "local", "tokens", &t_set}};
		start = cql_frame_begin(&b, 4, 0, h->stream, CQL_OP_RESULT);
		cql_write_int(&b, CQL_RESULT_ROWS);
		cql_write_rows_metadata(&b, cols, 2, NULL, false);
		cql_write_int(&b, local ? 1 : 0);
		if (local) {
			cql_write_bytes(&b, f->addr.ip, 4);
			struct buf set = {0};
			cql_write_int(&set, 2);
			cql_write_bytes(&set, "-100", 4);
			cql_write_bytes(&set, "100", 3);
			cql_write_bytes(&b, set.data, (int32_t)set.len);
			buf_free(&set);
		}
		cql_frame_end(&b, start);
		break;
	}
	default:
		cql_encode_error(&b, 4, h->stream, CQL_ERR_PROTOCOL, "no");
	}
	bufferevent_write(fc->bev, b.data, b.len);
	buf_free(&b);
}

static void fake_read(struct bufferevent *bev, void *arg)
{
	struct fake_conn *fc = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	while (evbuffer_get_length(in) >= CQL_HEADER_LEN) {
		uint8_t *p = evbuffer_pullup(in, CQL_HEADER_LEN);
		struct cql_header h;
		ck_assert_int_eq(cql_header_decode(p, 1 << 20, &h),
				 CQL_HEADER_OK);
		size_t total = CQL_HEADER_LEN + h.length;
		if (evbuffer_get_length(in) < total)
			return;
		p = evbuffer_pullup(in, (ssize_t)total);
		if (h.opcode == CQL_OP_QUERY && h.length >= 9 &&
		    memcmp(p + CQL_HEADER_LEN + 4, "CLOSE", 5) == 0) {
			fake_reply(fc, &h, p + CQL_HEADER_LEN);
			return; /* fc is gone */
		}
		fake_reply(fc, &h, p + CQL_HEADER_LEN);
		evbuffer_drain(in, total);
	}
}

static void fake_event(struct bufferevent *bev, short what, void *arg)
{
	struct fake_conn *fc = arg;
	(void)what;
	fc->f->open--;
	bufferevent_free(bev);
	free(fc);
}

static void fake_accept(evutil_socket_t fd, short what, void *arg)
{
	struct fake *f = arg;
	(void)what;
	int s = accept(fd, NULL, NULL);
	if (s < 0)
		return;
	evutil_make_socket_nonblocking(s);
	struct fake_conn *fc = calloc(1, sizeof(*fc));
	fc->f = f;
	fc->bev = bufferevent_socket_new(f->base, s, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(fc->bev, fake_read, NULL, fake_event, fc);
	bufferevent_enable(fc->bev, EV_READ | EV_WRITE);
	f->connections++;
	f->open++;
}

static void fake_start(struct fake *f, struct event_base *base)
{
	memset(f, 0, sizeof(*f));
	f->base = base;
	ck_assert_int_eq(inet_addr_parse_host("127.0.8.251", &f->addr), 0);
	f->addr.port = 0;
	struct sockaddr_storage ss;
	size_t sl = inet_addr_to_sockaddr(&f->addr, &ss);
	f->fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(f->fd, 0);
	ck_assert_int_eq(bind(f->fd, (struct sockaddr *)&ss, (socklen_t)sl), 0);
	ck_assert_int_eq(listen(f->fd, 16), 0);
	socklen_t len = sizeof(ss);
	getsockname(f->fd, (struct sockaddr *)&ss, &len);
	inet_addr_from_sockaddr(&ss, len, &f->addr);
	f->accept_ev =
		event_new(base, f->fd, EV_READ | EV_PERSIST, fake_accept, f);
	event_add(f->accept_ev, NULL);
}

struct counter {
	int done, ok;
	int order[64];
};

static void on_counted(void *arg, enum cql_client_status status,
		       const struct cql_client_response *resp,
		       const char *message)
{
	struct counter *c = arg;
	(void)message;
	c->done++;
	if (status == CQL_CLIENT_OK && resp->opcode == CQL_OP_RESULT &&
	    resp->kind == CQL_RESULT_VOID)
		c->ok++;
}

struct resubmitter {
	struct cql_client *client;
	int calls;
	enum cql_client_status last;
};

/* Submits again from its own callback, as a closed-loop generator does. */
static void on_resubmit(void *arg, enum cql_client_status status,
			const struct cql_client_response *resp,
			const char *message)
{
	struct resubmitter *r = arg;
	(void)resp;
	(void)message;
	r->calls++;
	r->last = status;
	if (r->calls < 5)
		cql_client_query(r->client, "SLOW", CQL_CL_ONE, NULL, 0,
				 on_resubmit, r);
}

START_TEST(streams_reprepare_timeouts_and_reconnects)
{
	struct event_base *base = event_base_new();
	struct fake f;
	fake_start(&f, base);
	struct cql_client_config cfg;
	cql_client_config_defaults(&cfg);
	cfg.contact_points = &f.addr;
	cfg.contact_count = 1;
	cfg.connections_per_host = 2;
	cfg.max_streams_per_connection = 8; /* 100 requests: backlog too */
	cfg.request_timeout_ms = 300;
	struct cql_client *c = cql_client_new(base, &cfg);
	ck_assert_int_eq(cql_client_connect_sync(c), 0);
	ck_assert_uint_eq(cql_client_ready_connections(c), 2);
	ck_assert_uint_eq(cql_client_host_count(c), 1);
	ck_assert_int_eq(f.connections, 2);
	ck_assert_int_eq(f.peers_v1, 1);
	/* Tokens {-100, 100} both belong to the one host. */
	ck_assert_int_eq(cql_client_host_for_token(c, 5), 0);
	ck_assert_int_eq(cql_client_host_for_token(c, INT64_MAX), 0);

	struct cql_client_prepared *p =
		cql_client_prepare_sync(c, "INSERT INTO ks.t (k, v) VALUES "
					   "(?, ?)");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(f.prepares, 1);
	ck_assert_int_eq(cql_client_prepared_bind_count(p), 2);
	struct cql_value v[2] = {{3, (const uint8_t *)"key"},
				 {1, (const uint8_t *)"x"}};
	int64_t token;
	ck_assert(cql_client_routing_token(p, v, 2, &token));
	ck_assert(token == murmur3_token("key", 3));

	/* 100 in flight over 2 x 8 streams: the rest wait in backlogs. */
	struct counter cnt = {0};
	for (int i = 0; i < 100; i++)
		cql_client_execute(c, p, v, 2, CQL_CL_ONE, on_counted, &cnt);
	while (cnt.done < 100)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(cnt.ok, 100);
	ck_assert_int_eq(f.executes, 100);

	/* The server forgets: one Unprepared, a PREPARE, the EXECUTE again. */
	f.forget = true;
	struct cql_client_result r = {0};
	ck_assert_int_eq(cql_client_execute_sync(c, p, v, 2, CQL_CL_ONE, &r),
			 0);
	ck_assert_int_eq(r.resp.kind, CQL_RESULT_VOID);
	ck_assert_int_eq(f.unprepared, 1);
	ck_assert_int_eq(f.prepares, 2);
	cql_client_result_free(&r);

	/* No answer: a client timeout; the connection stays usable. */
	ck_assert_int_eq(cql_client_query_sync(c, "SLOW", CQL_CL_ONE, &r), -1);
	ck_assert_int_eq(err_code(), ERR_TIMEOUT);
	ck_assert_int_eq(r.status, CQL_CLIENT_TIMEOUT);
	ck_assert_int_eq(cql_client_query_sync(c, "USE ks", CQL_CL_ONE, &r), 0);
	ck_assert_int_eq(r.resp.kind, CQL_RESULT_VOID);

	/* The server closes: in-flight requests fail, the client reconnects. */
	ck_assert_int_eq(cql_client_query_sync(c, "CLOSE", CQL_CL_ONE, &r), -1);
	ck_assert_int_eq(r.status, CQL_CLIENT_CONNECTION);
	while (cql_client_ready_connections(c) < 2)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(f.connections, 3);
	ck_assert_int_eq(cql_client_query_sync(c, "USE ks", CQL_CL_ONE, &r), 0);
	cql_client_result_free(&r);

	/* Deleting with requests in flight whose callbacks submit again:
	 * every one completes with ConnectionClosed. */
	struct resubmitter rs = {.client = c};
	cql_client_query(c, "SLOW", CQL_CL_ONE, NULL, 0, on_resubmit, &rs);
	cql_client_query(c, "SLOW", CQL_CL_ONE, NULL, 0, on_resubmit, &rs);
	event_base_loop(base, EVLOOP_NONBLOCK);
	cql_client_delete(c);
	ck_assert_int_eq(rs.calls, 6); /* 2 chains: 2 + 4 resubmissions */
	ck_assert_int_eq(rs.last, CQL_CLIENT_CONNECTION);
	while (f.open > 0)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(f.accept_ev);
	close(f.fd);
	event_base_free(base);
}
END_TEST

START_TEST(contact_points_take_host_names)
{
	struct inet_addr a;
	char name[256];
	ck_assert_int_eq(
		cql_client_resolve("127.0.91.60", 9042, &a, name, sizeof(name)),
		0);
	ck_assert_int_eq(a.family, INET_V4);
	ck_assert_int_eq(a.port, 9042);
	ck_assert_str_eq(name, "");
	ck_assert_int_eq(
		cql_client_resolve("[::1]:9100", 9042, &a, name, sizeof(name)),
		0);
	ck_assert_int_eq(a.family, INET_V6);
	ck_assert_int_eq(a.port, 9100);
	ck_assert_str_eq(name, "");
	/* a name: resolved (the first IPv4 address), kept for the TLS
	 * name check */
	ck_assert_int_eq(
		cql_client_resolve("localhost", 9042, &a, name, sizeof(name)),
		0);
	ck_assert_int_eq(a.family, INET_V4);
	ck_assert_int_eq(a.ip[0], 127);
	ck_assert_int_eq(a.port, 9042);
	ck_assert_str_eq(name, "localhost");
	ck_assert_int_eq(cql_client_resolve("localhost:9043", 9042, &a, name,
					    sizeof(name)),
			 0);
	ck_assert_int_eq(a.port, 9043);
	ck_assert_int_eq(
		cql_client_resolve("localhost:0", 9042, &a, name, sizeof(name)),
		-1);
	ck_assert_int_eq(cql_client_resolve("no-such-host.invalid", 9042, &a,
					    name, sizeof(name)),
			 -1);
	ck_assert_ptr_nonnull(strstr(err_msg(), "no-such-host.invalid"));
	ck_assert_int_eq(
		cql_client_resolve(":9042", 9042, &a, name, sizeof(name)), -1);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cql_client");
	TCase *tc = tcase_create("core");
	seed = test_seed(0x5eed5eedull);
	tcase_add_test(tc, requests_decode_with_the_server_decoders);
	tcase_add_test(tc, contact_points_take_host_names);
	tcase_add_test(tc, responses_decode_from_the_server_encoders);
	tcase_add_test(tc, every_truncation_fails_cleanly);
	tcase_add_test(tc, hostile_counts_and_types_are_refused);
	tcase_add_test(tc, random_bodies_never_crash);
	tcase_add_test(tc, routing_token_hashes_the_partition_key_binds);
	tcase_add_test(tc, histogram_quantiles_are_within_a_bucket);
	tcase_add_test(tc, connect_to_nothing_fails_cleanly);
	tcase_add_test(tc, streams_reprepare_timeouts_and_reconnects);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
