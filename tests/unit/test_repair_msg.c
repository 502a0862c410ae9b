/* repair, wire form: requests and responses round trip field by field;
 * malformed bytes (truncations, a table id or digest of the wrong size,
 * an empty row id) are refused with ERR_PROTOCOL, never a crash. */
#include "common/err.h"
#include "repair/repair_internal.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(struct repair_msg *m, struct merkle_range *ranges,
		 struct repair_row *rows, struct slice *frags)
{
	memset(m, 0, sizeof(*m));
	m->session = 77;
	m->task = 5;
	memset(m->table_id, 0xab, 16);
	ranges[0] = (struct merkle_range){INT64_MIN, -5};
	ranges[1] = (struct merkle_range){100, INT64_MIN + 1};
	m->ranges = ranges;
	m->nranges = 2;
	m->max_depth = 17;
	rows[0].key = slice_from_cstr("key-a");
	rows[0].id = slice_from_cstr("\x02row");
	memset(rows[0].digest, 1, 16);
	rows[1].key = slice_from_cstr("key-b");
	rows[1].id = slice_from_cstr("\x01");
	memset(rows[1].digest, 2, 16);
	m->rows = rows;
	m->nrows = 2;
	frags[0] = slice_from_cstr("frag-one");
	frags[1] = slice_from_cstr("f2");
	m->frags = frags;
	m->nfrags = 2;
}

START_TEST(request_round_trips)
{
	struct merkle_range ranges[2];
	struct repair_row rows[2];
	struct slice frags[2];
	struct repair_msg m, d;
	fill(&m, ranges, rows, frags);
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(repair_msg_pack_request(&m, &b), 0);
	ck_assert_int_eq(repair_msg_unpack_request(b.data, b.len, &d), 0);
	ck_assert_uint_eq(d.session, 77);
	ck_assert_uint_eq(d.task, 5);
	ck_assert_mem_eq(d.table_id, m.table_id, 16);
	ck_assert_uint_eq(d.nranges, 2);
	ck_assert_int_eq(d.ranges[0].start, INT64_MIN);
	ck_assert_int_eq(d.ranges[1].end, INT64_MIN + 1);
	ck_assert_uint_eq(d.max_depth, 17);
	ck_assert_uint_eq(d.nrows, 2);
	ck_assert(slice_eq(d.rows[1].key, rows[1].key));
	ck_assert(slice_eq(d.rows[0].id, rows[0].id));
	ck_assert_uint_eq(d.nfrags, 2);
	ck_assert(slice_eq(d.frags[0], frags[0]));
	repair_msg_free(&d);
	for (size_t cut = 0; cut + 1 < b.len; cut++) {
		/* a cut that still parses must not crash; most do not */
		if (repair_msg_unpack_request(b.data, cut, &d))
			ck_assert_int_eq(err_code(), ERR_PROTOCOL);
		repair_msg_free(&d);
	}
	buf_free(&b);
}
END_TEST

START_TEST(response_round_trips)
{
	struct merkle_range ranges[2];
	struct repair_row rows[2];
	struct slice frags[2];
	struct repair_msg m, d;
	fill(&m, ranges, rows, frags);
	m.ok = false;
	snprintf(m.error, sizeof(m.error), "scan: disk on fire");
	uint8_t h[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	m.hashes = slice_make(h, 16);
	m.tree_version = 1;
	m.depth = 17;
	m.levels = 6;
	m.partitions = 123456789;
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(repair_msg_pack_response(&m, &b), 0);
	ck_assert_int_eq(repair_msg_unpack_response(b.data, b.len, &d), 0);
	ck_assert_uint_eq(d.session, 77);
	ck_assert(!d.ok);
	ck_assert_str_eq(d.error, "scan: disk on fire");
	ck_assert(slice_eq(d.hashes, m.hashes));
	ck_assert_uint_eq(d.tree_version, 1);
	ck_assert_uint_eq(d.depth, 17);
	ck_assert_uint_eq(d.levels, 6);
	ck_assert_uint_eq(d.partitions, 123456789);
	ck_assert_uint_eq(d.nrows, 2);
	ck_assert_mem_eq(d.rows[1].digest, rows[1].digest, 16);
	ck_assert_uint_eq(d.nfrags, 2);
	repair_msg_free(&d);
	buf_free(&b);
}
END_TEST

START_TEST(malformed_messages_are_refused)
{
	struct merkle_range ranges[2];
	struct repair_row rows[2];
	struct slice frags[2];
	struct repair_msg m, d;
	struct buf b;
	/* a table id of 16 bytes is required: pack one, then shorten the
	 * length byte (field 3, length 16 -> 15) */
	fill(&m, ranges, rows, frags);
	buf_init(&b);
	ck_assert_int_eq(repair_msg_pack_request(&m, &b), 0);
	uint8_t *p = memmem(b.data, b.len, "\x1a\x10", 2);
	ck_assert_ptr_nonnull(p);
	p[1] = 15;
	ck_assert_int_eq(repair_msg_unpack_request(b.data, b.len, &d), -1);
	ck_assert_int_eq(err_code(), ERR_PROTOCOL);
	repair_msg_free(&d);
	buf_free(&b);
	/* a response row with a digest of 15 bytes (by hand: session 1,
	 * rows {key "k", id "i", digest 15 x 0x07}), then with 16 */
	uint8_t raw[2 + 2 + 3 + 3 + 2 + 16];
	size_t n = 0;
	raw[n++] = 0x08; /* session */
	raw[n++] = 0x01;
	raw[n++] = 0x3a; /* rows */
	raw[n++] = 3 + 3 + 2 + 15;
	raw[n++] = 0x0a;
	raw[n++] = 1;
	raw[n++] = 'k';
	raw[n++] = 0x12;
	raw[n++] = 1;
	raw[n++] = 'i';
	raw[n++] = 0x1a;
	raw[n++] = 15;
	memset(raw + n, 7, 15);
	n += 15;
	int rc = repair_msg_unpack_response(raw, n, &d);
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(err_code(), ERR_PROTOCOL);
	ck_assert_ptr_nonnull(strstr(err_msg(), "digest"));
	repair_msg_free(&d);
	raw[3] = 3 + 3 + 2 + 16;
	raw[11] = 16;
	raw[n++] = 7;
	ck_assert_int_eq(repair_msg_unpack_response(raw, n, &d), 0);
	ck_assert_uint_eq(d.nrows, 1);
	repair_msg_free(&d);
	/* an empty row id */
	fill(&m, ranges, rows, frags);
	rows[1].id = slice_make("", 0);
	buf_init(&b);
	ck_assert_int_eq(repair_msg_pack_request(&m, &b), 0);
	ck_assert_int_eq(repair_msg_unpack_request(b.data, b.len, &d), -1);
	repair_msg_free(&d);
	buf_free(&b);
	/* garbage */
	ck_assert_int_eq(
		repair_msg_unpack_response((const uint8_t *)"\xff\xff", 2, &d),
		-1);
	repair_msg_free(&d);
}
END_TEST

START_TEST(node_lists_round_trip_as_runs)
{
	/* sparse nodes cost a byte or two each, runs a couple in all */
	uint32_t v[] = {0, 1, 2, 3, 9, 300, 301, 70000, (1u << 20) - 1};
	size_t n = sizeof(v) / sizeof(v[0]);
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(repair_nodes_encode(v, n, &b), 0);
	ck_assert_uint_le(b.len, 12);
	uint32_t *d;
	size_t nd;
	ck_assert_int_eq(repair_nodes_decode(b.data, b.len, 20, &d, &nd), 0);
	ck_assert_uint_eq(nd, n);
	ck_assert_mem_eq(d, v, sizeof(v));
	free(d);
	/* a node of level 19 cannot be 2^20 - 1 */
	ck_assert_int_eq(repair_nodes_decode(b.data, b.len, 19, &d, &nd), -1);
	ck_assert_int_eq(err_code(), ERR_PROTOCOL);
	/* a truncated varint, a run past the level */
	uint8_t cut[] = {0x80};
	ck_assert_int_eq(repair_nodes_decode(cut, 1, 10, &d, &nd), -1);
	uint8_t run[] = {0x01, 0xff, 0x07};
	ck_assert_int_eq(repair_nodes_decode(run, 3, 10, &d, &nd), -1);
	ck_assert_int_eq(repair_nodes_decode(run, 3, 21, &d, &nd), -1);
	ck_assert_int_eq(repair_nodes_decode(run, 3, 11, &d, &nd), 0);
	ck_assert_uint_eq(nd, 1023 + 2);
	free(d);
	/* in a request */
	struct merkle_range ranges[2];
	struct repair_row rows[2];
	struct slice frags[2];
	struct repair_msg m, q;
	fill(&m, ranges, rows, frags);
	m.level = 20;
	m.levels = 1;
	m.nodes = v;
	m.nnodes = n;
	buf_clear(&b);
	ck_assert_int_eq(repair_msg_pack_request(&m, &b), 0);
	ck_assert_int_eq(repair_msg_unpack_request(b.data, b.len, &q), 0);
	ck_assert_uint_eq(q.level, 20);
	ck_assert_uint_eq(q.levels, 1);
	ck_assert_uint_eq(q.nnodes, n);
	ck_assert_mem_eq(q.nodes, v, sizeof(v));
	repair_msg_free(&q);
	buf_free(&b);
}
END_TEST

START_TEST(tree_answers_out_of_shape_are_refused)
{
	struct repair_msg m = {0}, d;
	struct buf b;
	buf_init(&b);
	uint8_t h[12] = {0};
	m.ok = true;
	m.depth = 21; /* past MERKLE_MAX_DEPTH */
	ck_assert_int_eq(repair_msg_pack_response(&m, &b), 0);
	ck_assert_int_eq(repair_msg_unpack_response(b.data, b.len, &d), -1);
	repair_msg_free(&d);
	m.depth = 4;
	m.levels = 5; /* more levels than the tree has */
	buf_clear(&b);
	ck_assert_int_eq(repair_msg_pack_response(&m, &b), 0);
	ck_assert_int_eq(repair_msg_unpack_response(b.data, b.len, &d), -1);
	repair_msg_free(&d);
	m.levels = 4;
	m.hashes = slice_make(h, 12); /* not whole values */
	buf_clear(&b);
	ck_assert_int_eq(repair_msg_pack_response(&m, &b), 0);
	ck_assert_int_eq(repair_msg_unpack_response(b.data, b.len, &d), -1);
	ck_assert_int_eq(err_code(), ERR_PROTOCOL);
	repair_msg_free(&d);
	buf_free(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("repair_msg");
	TCase *tc = tcase_create("msg");
	tcase_add_test(tc, request_round_trips);
	tcase_add_test(tc, response_round_trips);
	tcase_add_test(tc, malformed_messages_are_refused);
	tcase_add_test(tc, node_lists_round_trip_as_runs);
	tcase_add_test(tc, tree_answers_out_of_shape_are_refused);
	suite_add_tcase(s, tc);
	return test_run(s);
}
