/*
 * The repair scheduler's pure parts: segment planning, time windows,
 * per-table tuning, deadlines, and the state file (round trip; a corrupt
 * or truncated file is refused whole with a message saying why).
 */
#include "repair/repair_sched.h"

#include "common/crc.h"
#include "common/err.h"
#include "tests/lib/testutil.h"
#include "tests/sim/sim.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t total_width(const struct token_range_list *l)
{
	uint64_t w = 0;
	for (size_t i = 0; i < l->n; i++)
		w += token_range_width(l->v[i], NULL);
	return w;
}

START_TEST(plan_cuts_by_partitions_and_by_segment_count)
{
	struct token_range_list ranges = {0}, out = {0};
	token_range_list_push(&ranges, token_range_make(-1000, 1000));
	token_range_list_push(&ranges, token_range_make(5000, 6000));
	/* 3000 partitions, 1000 per segment: 2000 in the first (2 pieces),
	 * 1000 in the second (1 piece) */
	ck_assert_int_eq(repair_sched_plan(&ranges,
					   &(struct repair_sched_plan_in){
						   .partitions = 3000,
						   .per_segment = 1000,
						   .segments_per_node = 0},
					   &out),
			 0);
	ck_assert_uint_eq(out.n, 3);
	ck_assert_int_eq(out.v[0].left, -1000);
	ck_assert_int_eq(out.v[1].right, 1000);
	ck_assert_int_eq(out.v[2].left, 5000);
	ck_assert_int_eq(out.v[2].right, 6000);
	ck_assert_uint_eq(total_width(&out), 3000);
	/* contiguous, in order */
	ck_assert_int_eq(out.v[0].right, out.v[1].left);
	token_range_list_clear(&out);

	/* 30 segments per node by width: 20 and 10; a partition cap that
	 * asks for more wins */
	ck_assert_int_eq(repair_sched_plan(&ranges,
					   &(struct repair_sched_plan_in){
						   .partitions = 10,
						   .per_segment = 1 << 20,
						   .segments_per_node = 30},
					   &out),
			 0);
	ck_assert_uint_eq(out.n, 30);
	ck_assert_uint_eq(total_width(&out), 3000);
	token_range_list_clear(&out);
	ck_assert_int_eq(repair_sched_plan(&ranges,
					   &(struct repair_sched_plan_in){
						   .partitions = 6000,
						   .per_segment = 100,
						   .segments_per_node = 30},
					   &out),
			 0);
	ck_assert_uint_eq(out.n, 60);
	token_range_list_clear(&out);

	/* an empty table still gets one segment per range */
	ck_assert_int_eq(repair_sched_plan(&ranges,
					   &(struct repair_sched_plan_in){
						   .partitions = 0,
						   .per_segment = 1 << 20,
						   .segments_per_node = 0},
					   &out),
			 0);
	ck_assert_uint_eq(out.n, 2);
	token_range_list_clear(&out);

	/* a wrapping range splits across the end of the ring */
	struct token_range_list wrap = {0};
	token_range_list_push(&wrap,
			      token_range_make(INT64_MAX - 9, INT64_MIN + 10));
	ck_assert_int_eq(repair_sched_plan(&wrap,
					   &(struct repair_sched_plan_in){
						   .partitions = 0,
						   .per_segment = 1,
						   .segments_per_node = 4},
					   &out),
			 0);
	ck_assert_uint_eq(out.n, 4);
	ck_assert_uint_eq(total_width(&out), 20);
	ck_assert_int_eq(out.v[0].left, INT64_MAX - 9);
	ck_assert_int_eq(out.v[3].right, INT64_MIN + 10);
	token_range_list_free(&wrap);
	token_range_list_clear(&out);

	/* a byte budget: 3 GiB over the two ranges (2 and 1 GiB by width) at
	 * 512 MiB a segment gives 4 + 2 pieces, where partitions alone
	 * would give 2; a budget of 0 means none */
	struct repair_sched_plan_in in = {.partitions = 3000,
					  .bytes = 3ull << 30,
					  .per_segment = 1000,
					  .bytes_per_segment = 512u << 20};
	ck_assert_int_eq(repair_sched_plan(&ranges, &in, &out), 0);
	ck_assert_uint_eq(out.n, 6);
	ck_assert_uint_eq(total_width(&out), 3000);
	token_range_list_clear(&out);
	in.bytes_per_segment = 0;
	ck_assert_int_eq(repair_sched_plan(&ranges, &in, &out), 0);
	ck_assert_uint_eq(out.n, 3);
	token_range_list_free(&out);
	token_range_list_free(&ranges);
}
END_TEST

#define AT(h, m) (((int64_t)(h)*60 + (m)) * 60 * 1000000 + 1700006400000000LL)

START_TEST(windows_parse_and_open_across_midnight)
{
	struct repair_sched_window w[2];
	ck_assert_int_eq(repair_sched_window_parse("01:00-05:30", &w[0]), 0);
	ck_assert_uint_eq(w[0].start, 60);
	ck_assert_uint_eq(w[0].end, 330);
	ck_assert_int_eq(repair_sched_window_parse("22:00-02:00", &w[1]), 0);
	/* 1700006400 s is a midnight UTC */
	ck_assert(!repair_sched_windows_open(w, 1, AT(0, 59)));
	ck_assert(repair_sched_windows_open(w, 1, AT(1, 0)));
	ck_assert(repair_sched_windows_open(w, 1, AT(5, 29)));
	ck_assert(!repair_sched_windows_open(w, 1, AT(5, 30)));
	ck_assert(repair_sched_windows_open(&w[1], 1, AT(23, 0)));
	ck_assert(repair_sched_windows_open(&w[1], 1, AT(1, 59)));
	ck_assert(!repair_sched_windows_open(&w[1], 1, AT(12, 0)));
	ck_assert(repair_sched_windows_open(w, 2, AT(3, 0)));
	ck_assert(repair_sched_windows_open(w, 0, AT(12, 0))); /* none */
	ck_assert_int_eq(repair_sched_window_parse("00:00-24:00", &w[0]), 0);
	ck_assert(repair_sched_windows_open(w, 1, AT(17, 3)));

	const char *bad[] = {"1:00-5:00",   "01:00",        "01:00-25:00",
			     "01:60-02:00", "01:00-02:00x", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(repair_sched_window_parse(bad[i], &w[0]), -1);
		ck_assert_int_eq(err_code(), ERR_CONFIG);
		ck_assert_contains(err_msg(), "is not a time window");
	}
}
END_TEST

START_TEST(tuning_parses_per_table_overrides)
{
	char name[REPAIR_SCHED_NAME_MAX];
	struct repair_sched_tuning t;
	ck_assert_int_eq(repair_sched_tuning_parse(
				 "ks.big intensity=0.5 segments_per_node=256",
				 name, sizeof(name), &t),
			 0);
	ck_assert_str_eq(name, "ks.big");
	ck_assert_int_eq(t.enabled, -1);
	ck_assert_double_eq(t.intensity, 0.5);
	ck_assert_int_eq(t.segments_per_node, 256);
	ck_assert_int_eq(t.partitions_per_segment, 0);
	ck_assert_int_eq(repair_sched_tuning_parse("ks.t enabled=false", name,
						   sizeof(name), &t),
			 0);
	ck_assert_int_eq(t.enabled, 0);
	ck_assert_int_eq(t.bytes_per_segment, 0);
	ck_assert_int_eq(
		repair_sched_tuning_parse("ks.t bytes_per_segment=512MiB", name,
					  sizeof(name), &t),
		0);
	ck_assert_int_eq(t.bytes_per_segment, 512 << 20);
	ck_assert_int_eq(
		repair_sched_tuning_parse("ks.t bytes_per_segment=4096", name,
					  sizeof(name), &t),
		0);
	ck_assert_int_eq(t.bytes_per_segment, 4096);
	ck_assert_int_eq(repair_sched_tuning_parse("ks.t bytes_per_segment=1TB",
						   name, sizeof(name), &t),
			 -1);
	ck_assert_contains(err_msg(), "bytes_per_segment=1TB: a size");
	ck_assert_int_eq(repair_sched_tuning_parse("ks.t intensity=0", name,
						   sizeof(name), &t),
			 -1);
	ck_assert_contains(err_msg(), "intensity=0: not in (0, 1]");
	ck_assert_int_eq(repair_sched_tuning_parse("ks.t colour=red", name,
						   sizeof(name), &t),
			 -1);
	ck_assert_contains(err_msg(), "unknown table setting 'colour'");
	ck_assert_int_eq(
		repair_sched_tuning_parse("notable", name, sizeof(name), &t),
		-1);
	ck_assert_contains(err_msg(), "keyspace.table");
}
END_TEST

START_TEST(deadline_is_last_cycle_start_plus_a_fraction_of_gc_grace)
{
	/* never completed: from when the table was first seen */
	ck_assert_int_eq(repair_sched_deadline(0, 1000, 100, 0.7),
			 1000 + 70000000);
	ck_assert_int_eq(repair_sched_deadline(5000000, 1000, 864000, 0.7),
			 5000000 + 604800LL * 1000000);
	/* a shorter gc_grace comes first even if repaired later */
	ck_assert_int_lt(repair_sched_deadline(9000000, 0, 3600, 0.7),
			 repair_sched_deadline(1000000, 0, 864000, 0.7));
}
END_TEST

/* ---- the state file ------------------------------------------------------ */

struct fake {
	struct buf saved;
	int saves;
};

static int fake_tables(void *arg, struct repair_sched_table_info **out,
		       size_t *n)
{
	(void)arg;
	struct repair_sched_table_info *v = calloc(2, sizeof(*v));
	ck_assert_ptr_nonnull(v);
	snprintf(v[0].name, sizeof(v[0].name), "ks.a");
	v[0].id[0] = 0xa;
	v[0].gc_grace_seconds = 3600;
	v[0].partitions = 100;
	token_range_list_push(&v[0].ranges, token_range_make(-100, 100));
	token_range_list_push(&v[0].ranges,
			      token_range_make(INT64_MAX - 5, INT64_MIN + 5));
	snprintf(v[1].name, sizeof(v[1].name), "ks.b 100%% \"odd\"");
	v[1].id[0] = 0xb;
	v[1].gc_grace_seconds = 864000;
	token_range_list_push(&v[1].ranges, token_range_make(0, 1000));
	*out = v;
	*n = 2;
	return 0;
}

static int fake_replicas(void *arg, const uint8_t id[16], int64_t token,
			 struct inet_addr *out, size_t cap, size_t *n)
{
	(void)arg, (void)id, (void)token, (void)cap;
	*n = 0;
	(void)out;
	return 0;
}

static void fake_save(void *arg, uint8_t *data, size_t len)
{
	struct fake *f = arg;
	buf_clear(&f->saved);
	buf_append(&f->saved, data, len);
	f->saves++;
	free(data);
}

static const struct repair_sched_ops fake_ops = {
	.tables = fake_tables,
	.replicas = fake_replicas,
	.save = fake_save,
};

START_TEST(state_round_trips_and_a_corrupt_file_is_refused)
{
	struct sim *sim = sim_new(1, 1700000000000000LL);
	struct inet_addr a = {.family = INET_V4, .ip = {127, 0, 9, 1}};
	struct env *env = sim_env_new(sim, &a);
	struct repair_sched_options o;
	repair_sched_options_default(&o);
	o.segments_per_node = 8;
	struct fake f = {0};
	struct repair_sched *s = repair_sched_new(env, NULL, &o, &fake_ops, &f);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(repair_sched_run_now(s, "ks.a"), 1);
	ck_assert_int_eq(repair_sched_pause(s, "ks.b 100% \"odd\"", true), 0);
	ck_assert_int_eq(repair_sched_pause(s, "nope", true), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	ck_assert_int_ge(f.saves, 1);
	struct buf one = {0};
	ck_assert_int_eq(repair_sched_encode(s, &one), 0);
	ck_assert_uint_eq(repair_sched_table_count(s), 2);
	struct repair_sched_table_status st;
	repair_sched_table_get(s, 0, &st);
	ck_assert_str_eq(st.name, "ks.a");
	ck_assert_uint_eq(st.segments, 9); /* 8 by width, rounded up */
	ck_assert_int_ne(st.cycle_start_us, 0);

	/* a second scheduler loads it and encodes the same bytes */
	struct repair_sched *s2 =
		repair_sched_new(env, NULL, &o, &fake_ops, &f);
	ck_assert_int_eq(repair_sched_load(s2, one.data, one.len), 0);
	struct buf two = {0};
	ck_assert_int_eq(repair_sched_encode(s2, &two), 0);
	ck_assert_uint_eq(one.len, two.len);
	ck_assert_int_eq(memcmp(one.data, two.data, one.len), 0);
	repair_sched_table_get(s2, 1, &st);
	ck_assert_str_eq(st.name, "ks.b 100% \"odd\"");
	ck_assert(st.paused);

	/* one flipped byte: checksum mismatch, the old state stays */
	struct repair_sched *s3 =
		repair_sched_new(env, NULL, &o, &fake_ops, &f);
	one.data[40] ^= 1;
	ck_assert_int_eq(repair_sched_load(s3, one.data, one.len), -1);
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	ck_assert_contains(err_msg(), "checksum mismatch");
	ck_assert_uint_eq(repair_sched_table_count(s3), 0);
	one.data[40] ^= 1;
	/* cut short: no checksum line */
	ck_assert_int_eq(repair_sched_load(s3, one.data, one.len - 20), -1);
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	ck_assert_contains(err_msg(), "repair schedule state:");
	/* a well-formed checksum over a bad line */
	const char bad[] =
		"cassini repair schedule 1\npaused 0\nseg 1 2 0 0 0\n";
	struct buf b = {0};
	buf_append(&b, bad, sizeof(bad) - 1);
	char tail[32];
	snprintf(tail, sizeof(tail), "crc32c %08x\n", crc32c(0, b.data, b.len));
	buf_append(&b, tail, strlen(tail));
	ck_assert_int_eq(repair_sched_load(s3, b.data, b.len), -1);
	ck_assert_contains(err_msg(), "line 3: a segment or cycle before any "
				      "table");
	ck_assert_int_eq(repair_sched_load(s3, one.data, one.len), 0);
	ck_assert_uint_eq(repair_sched_table_count(s3), 2);

	/* the status text shows both tables */
	struct buf txt = {0};
	ck_assert_int_eq(repair_sched_format_status(s2, NULL, &txt), 0);
	buf_put_u8(&txt, 0);
	ck_assert_contains((char *)txt.data, "ks.a");
	ck_assert_contains((char *)txt.data, "0/9 (0%)");
	buf_clear(&txt);
	ck_assert_int_eq(repair_sched_format_status(s2, "ks.a", &txt), 0);
	buf_put_u8(&txt, 0);
	ck_assert_contains((char *)txt.data, "Completed cycles of ks.a");
	ck_assert_ptr_null(strstr((char *)txt.data, "odd"));

	buf_free(&txt);
	buf_free(&b);
	buf_free(&one);
	buf_free(&two);
	buf_free(&f.saved);
	repair_sched_delete(s);
	repair_sched_delete(s2);
	repair_sched_delete(s3);
	sim_delete(sim);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("repair_sched");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, plan_cuts_by_partitions_and_by_segment_count);
	tcase_add_test(tc, windows_parse_and_open_across_midnight);
	tcase_add_test(tc, tuning_parses_per_table_overrides);
	tcase_add_test(
		tc, deadline_is_last_cycle_start_plus_a_fraction_of_gc_grace);
	tcase_add_test(tc, state_round_trips_and_a_corrupt_file_is_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
