/* client/cql_floor: Cassandra 5.0's floor() arithmetic (GROUP BY time
 * windows): offsets, negative times, months, dates and times. */
#include "client/cql/cql_floor.h"
#include "client/cql/cql_values.h"
#include "common/err.h"
#include "tests/lib/testutil.h"

#include <string.h>

static int64_t ts(const char *s)
{
	int64_t ms;
	ck_assert_msg(cql_parse_timestamp(s, strlen(s), &ms) == 0, "%s", s);
	return ms;
}

static int64_t day(const char *s)
{
	int64_t d;
	ck_assert_msg(cql_parse_date(s, strlen(s), &d) == 0, "%s", s);
	return d;
}

static struct storage_duration dur(const char *s)
{
	struct storage_duration d;
	ck_assert_msg(cql_parse_duration(s, strlen(s), false, &d) == 0, "%s",
		      s);
	return d;
}

static int64_t fl(const char *t, const char *d, const char *start)
{
	struct storage_duration du = dur(d);
	int64_t out;
	ck_assert_msg(cql_floor_timestamp(ts(t), &du, start ? ts(start) : 0,
					  &out) == 0,
		      "%s %s: %s", t, d, err_msg());
	return out;
}

static void fl_fails(int64_t t, struct storage_duration d, int64_t start,
		     const char *msg)
{
	int64_t out;
	ck_assert_int_eq(cql_floor_timestamp(t, &d, start, &out), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	ck_assert_str_eq(err_msg(), msg);
}

START_TEST(timestamps_from_the_epoch_and_from_a_start)
{
	ck_assert_int_eq(fl("2016-01-01 10:35:12", "1h", NULL),
			 ts("2016-01-01 10:00:00"));
	ck_assert_int_eq(fl("2016-01-01 10:35:12", "10m", NULL),
			 ts("2016-01-01 10:30:00"));
	ck_assert_int_eq(fl("2016-01-01 10:00:00", "1h", NULL),
			 ts("2016-01-01 10:00:00"));
	ck_assert_int_eq(fl("2016-01-01 10:35:12", "1h", "2016-01-01 00:20"),
			 ts("2016-01-01 10:20:00"));
	ck_assert_int_eq(fl("2016-01-01 10:15:12", "1h", "2016-01-01 00:20"),
			 ts("2016-01-01 09:20:00"));
	ck_assert_int_eq(fl("2016-01-01 10:35:12", "2d", "2015-12-31"),
			 ts("2015-12-31"));
	/* a duration below a millisecond leaves the time alone */
	ck_assert_int_eq(fl("2016-01-01 10:35:12.345", "0s", NULL),
			 ts("2016-01-01 10:35:12.345"));
}
END_TEST

START_TEST(negative_times_need_an_earlier_start)
{
	struct storage_duration h = dur("1h");
	fl_fails(-1, h, 0,
		 "The floor function starting time is greater than the "
		 "provided time");
	fl_fails(ts("2016-01-01"), h, ts("2016-01-02"),
		 "The floor function starting time is greater than the "
		 "provided time");
	int64_t out;
	ck_assert_int_eq(cql_floor_timestamp(-1, &h, -86400000LL, &out), 0);
	ck_assert_int_eq(out, -3600000LL);
	ck_assert_int_eq(fl("1969-12-31 10:30", "1h", "1969-01-01"),
			 ts("1969-12-31 10:00"));
	struct storage_duration neg = dur("1h");
	neg.nanos = -neg.nanos;
	fl_fails(10, neg, 0,
		 "Negative durations are not supported by the floor function");
}
END_TEST

START_TEST(months_as_a_utc_calendar_adds_them)
{
	ck_assert_int_eq(cql_floor_add_months(ts("2016-01-31 10:00"), 1),
			 ts("2016-02-29 10:00"));
	ck_assert_int_eq(cql_floor_add_months(ts("2015-01-31"), 1),
			 ts("2015-02-28"));
	ck_assert_int_eq(cql_floor_add_months(ts("2016-03-31"), -1),
			 ts("2016-02-29"));
	ck_assert_int_eq(cql_floor_add_months(ts("1969-12-15"), 1),
			 ts("1970-01-15"));
	ck_assert_int_eq(fl("2016-03-15 10:00", "1mo", NULL), ts("2016-03-01"));
	ck_assert_int_eq(fl("2016-03-15 10:00", "1y", NULL), ts("2016-01-01"));
	ck_assert_int_eq(fl("2016-08-15", "3mo", "2016-01-01"),
			 ts("2016-07-01"));
	/* days after months: the multiplier steps back when it overshoots */
	ck_assert_int_eq(fl("2016-02-10", "1mo2d", "2016-01-01"),
			 ts("2016-02-03"));
	ck_assert_int_eq(fl("2016-02-02", "1mo2d", "2016-01-01"),
			 ts("2016-01-01"));
	ck_assert_int_eq(fl("1969-05-20", "1mo", "1969-01-01"),
			 ts("1969-05-01"));
	/* Cassandra's quirk, kept: a start later in its month than the time
	 * answers a window start after the time (months-only durations are
	 * not stepped back) */
	ck_assert_int_eq(fl("2016-03-15", "2mo", "2016-01-31"),
			 ts("2016-03-31"));
}
END_TEST

START_TEST(dates_and_times)
{
	struct storage_duration w = dur("1w"), h = dur("1h"), m = dur("2mo");
	int64_t out;
	/* 1970-01-01 was a Thursday */
	ck_assert_int_eq(cql_floor_date(day("2016-01-17"), &w, 0, &out), 0);
	ck_assert_int_eq(out, day("2016-01-14"));
	ck_assert_int_eq(
		cql_floor_date(day("2016-04-17"), &m, day("2016-01-01"), &out),
		0);
	ck_assert_int_eq(out, day("2016-03-01"));
	ck_assert_int_eq(cql_floor_date(day("2016-01-17"), &h, 0, &out), -1);
	ck_assert_str_eq(err_msg(), "The floor on date values cannot be "
				    "computed for the 1h duration as precision "
				    "is below 1 day");
	ck_assert_int_eq(cql_floor_time(38112000000000LL, &h, &out), 0);
	ck_assert_int_eq(out, 36000000000000LL); /* 10:35:12 -> 10:00 */
	struct storage_duration d2 = dur("2d"), us = dur("1us");
	ck_assert_int_eq(cql_floor_time(1, &d2, &out), -1);
	ck_assert_str_eq(err_msg(), "For time values, the floor can only be "
				    "computed for durations smaller that a "
				    "day");
	ck_assert_int_eq(cql_floor_check(CQL_FLOOR_TIMESTAMP, &us), -1);
	ck_assert_str_eq(err_msg(), "The floor cannot be computed for the 1us "
				    "duration as precision is below 1 "
				    "millisecond");
	ck_assert_int_eq(cql_floor_check(CQL_FLOOR_TIMEUUID, &m), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cql_floor");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, timestamps_from_the_epoch_and_from_a_start);
	tcase_add_test(tc, negative_times_need_an_earlier_start);
	tcase_add_test(tc, months_as_a_utc_calendar_adds_them);
	tcase_add_test(tc, dates_and_times);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
