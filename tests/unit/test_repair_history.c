/*
 * The manual repair history (repair/repair_history.h): entries round-trip
 * through the state file byte for byte (names and errors with spaces and
 * '%'), the ring keeps the newest `max`, and a corrupt file (a flipped
 * byte, cut short, a bad line under a good checksum, another header) is
 * refused whole with ERR_CORRUPT, leaving the entries as they were.
 */
#include "repair/repair_history.h"

#include "common/crc.h"
#include "common/err.h"
#include "tests/lib/testutil.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

static struct repair_history_entry entry(int i)
{
	struct repair_history_entry e = {
		.session = (uint64_t)(100 + i),
		.start = -9000000000000000000LL + i,
		.end = 42 + i,
		.started_us = 1700000000000000LL + i * 1000000LL,
		.finished_us = 1700000000500000LL + i * 1000000LL,
		.outcome = (enum repair_history_outcome)(i % 3),
		.mismatched_ranges = (uint64_t)i,
		.rows_streamed = (uint64_t)(2 * i),
		.bytes_streamed = (uint64_t)(300 * i),
	};
	snprintf(e.table, sizeof(e.table), "ks.t%d", i);
	if (i % 2) {
		snprintf(e.options, sizeof(e.options), "-seq -j 2");
		snprintf(e.error, sizeof(e.error),
			 "ks.t: validation failed on 127.0.0.2:7000: 100%% "
			 "broken");
	}
	return e;
}

static void encode(const struct repair_history *h, struct buf *out)
{
	buf_init(out);
	ck_assert_int_eq(repair_history_encode(h, out), 0);
}

START_TEST(entries_round_trip_through_the_file)
{
	struct repair_history *h = repair_history_new(16);
	ck_assert_ptr_nonnull(h);
	for (int i = 0; i < 5; i++) {
		struct repair_history_entry e = entry(i);
		repair_history_add(h, &e);
	}
	struct repair_history_entry odd = entry(5);
	snprintf(odd.table, sizeof(odd.table), "ks.\"a table\"");
	repair_history_add(h, &odd);
	struct buf one;
	encode(h, &one);
	struct repair_history *h2 = repair_history_new(16);
	ck_assert_int_eq(repair_history_load(h2, one.data, one.len), 0);
	ck_assert_uint_eq(repair_history_count(h2), 6);
	for (size_t i = 0; i < 6; i++)
		ck_assert_mem_eq(repair_history_at(h, i),
				 repair_history_at(h2, i),
				 sizeof(struct repair_history_entry));
	struct buf two;
	encode(h2, &two);
	ck_assert_uint_eq(one.len, two.len);
	ck_assert_mem_eq(one.data, two.data, one.len);
	/* the view: the filter, the outcome, the options */
	struct buf txt = {0};
	ck_assert_int_eq(repair_history_format(h2, "ks.t1", &txt), 0);
	buf_put_u8(&txt, 0);
	ck_assert_contains((char *)txt.data, "ks.t1");
	ck_assert_contains((char *)txt.data, "-seq -j 2");
	ck_assert_contains((char *)txt.data, "failed");
	ck_assert_ptr_null(strstr((char *)txt.data, "ks.t2"));
	buf_free(&txt);
	ck_assert_int_eq(repair_history_format(h2, "other", &txt), 0);
	buf_put_u8(&txt, 0);
	ck_assert_contains((char *)txt.data, "(no repair history of other)");
	buf_free(&txt);
	buf_free(&one);
	buf_free(&two);
	repair_history_delete(h);
	repair_history_delete(h2);
}
END_TEST

START_TEST(the_history_keeps_the_newest_max_entries)
{
	struct repair_history *h = repair_history_new(4);
	for (int i = 0; i < 10; i++) {
		struct repair_history_entry e = entry(i);
		repair_history_add(h, &e);
	}
	ck_assert_uint_eq(repair_history_count(h), 4);
	for (size_t i = 0; i < 4; i++)
		ck_assert_uint_eq(repair_history_at(h, i)->session, 106 + i);
	/* a file of more entries than the bound keeps its newest */
	struct repair_history *big = repair_history_new(16);
	for (int i = 0; i < 10; i++) {
		struct repair_history_entry e = entry(i);
		repair_history_add(big, &e);
	}
	struct buf b;
	encode(big, &b);
	struct repair_history *small = repair_history_new(3);
	ck_assert_int_eq(repair_history_load(small, b.data, b.len), 0);
	ck_assert_uint_eq(repair_history_count(small), 3);
	ck_assert_uint_eq(repair_history_at(small, 0)->session, 107);
	ck_assert_uint_eq(repair_history_at(small, 2)->session, 109);
	buf_free(&b);
	repair_history_delete(h);
	repair_history_delete(big);
	repair_history_delete(small);
}
END_TEST

/* A body sealed with a valid checksum. */
static void sealed(struct buf *b, const char *body)
{
	buf_init(b);
	buf_append(b, body, strlen(body));
	char tail[32];
	snprintf(tail, sizeof(tail), "crc32c %08x\n",
		 crc32c(0, b->data, b->len));
	buf_append(b, tail, strlen(tail));
}

START_TEST(a_corrupt_file_is_refused_whole)
{
	struct repair_history *h = repair_history_new(8);
	for (int i = 0; i < 3; i++) {
		struct repair_history_entry e = entry(i);
		repair_history_add(h, &e);
	}
	struct buf good;
	encode(h, &good);
	struct repair_history *t = repair_history_new(8);
	ck_assert_int_eq(repair_history_load(t, good.data, good.len), 0);

	good.data[40] ^= 1;
	ck_assert_int_eq(repair_history_load(t, good.data, good.len), -1);
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	ck_assert_contains(err_msg(), "repair history: checksum mismatch");
	good.data[40] ^= 1;
	ck_assert_int_eq(repair_history_load(t, good.data, good.len - 5), -1);
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	ck_assert_int_eq(repair_history_load(t, good.data, 3), -1);
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	ck_assert_int_eq(repair_history_load(t, NULL, 0), -1);

	struct buf b;
	sealed(&b,
	       "cassini repair history 1\ntask 1 ks.t 1 2 3 4 ok 0 0 0 - -\n"
	       "task 2 ks.t 1 2 3 4 maybe 0 0 0 - -\n");
	ck_assert_int_eq(repair_history_load(t, b.data, b.len), -1);
	ck_assert_contains(err_msg(), "line 3: bad outcome");
	buf_free(&b);
	sealed(&b, "cassini repair history 1\ntask 1 ks.t 1 2 3 4 ok 0 0\n");
	ck_assert_int_eq(repair_history_load(t, b.data, b.len), -1);
	ck_assert_contains(err_msg(), "line 2: bad task line");
	buf_free(&b);
	sealed(&b, "cassini repair history 1\ntask 1 ks.t 1 2 3 4 ok 0 0 0 "
		   "%zz -\n");
	ck_assert_int_eq(repair_history_load(t, b.data, b.len), -1);
	ck_assert_contains(err_msg(), "bad word");
	buf_free(&b);
	sealed(&b, "cassini repair schedule 1\npaused 0\n");
	ck_assert_int_eq(repair_history_load(t, b.data, b.len), -1);
	ck_assert_contains(err_msg(), "not a version 1 file");
	buf_free(&b);

	/* through all of it, the entries loaded first stayed */
	ck_assert_uint_eq(repair_history_count(t), 3);
	struct buf again;
	encode(t, &again);
	ck_assert_uint_eq(again.len, good.len);
	ck_assert_mem_eq(again.data, good.data, good.len);
	buf_free(&again);
	buf_free(&good);
	repair_history_delete(h);
	repair_history_delete(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("repair_history");
	TCase *tc = tcase_create("history");
	tcase_add_test(tc, entries_round_trip_through_the_file);
	tcase_add_test(tc, the_history_keeps_the_newest_max_entries);
	tcase_add_test(tc, a_corrupt_file_is_refused_whole);
	suite_add_tcase(s, tc);
	return test_run(s);
}
