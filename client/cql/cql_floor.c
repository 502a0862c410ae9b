/* floor() arithmetic (see cql_floor.h). */
#include "client/cql/cql_floor.h"

#include "client/cql/cql_values.h"
#include "common/buf.h"
#include "common/err.h"

#include <stdbool.h>
#include <stdio.h>

#define MS_PER_DAY 86400000LL
#define NS_PER_MS  1000000LL
#define NS_PER_DAY (86400LL * 1000000000LL)

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Days since 1970-01-01 <-> proleptic Gregorian year, month (1-12), day
 * (the well-known era arithmetic). */
static void civil_of(int64_t z, int64_t *y, int *m, int *d)
{
	z += 719468;
	int64_t era = floor_div(z, 146097);
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static int64_t days_of(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = floor_div(y, 400);
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static bool leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int64_t y, int m)
{
	static const int n[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && leap(y) ? 29 : n[m - 1];
}

int64_t cql_floor_add_months(int64_t ms, int64_t n)
{
	int64_t day = floor_div(ms, MS_PER_DAY), in_day = ms - day * MS_PER_DAY;
	int64_t y;
	int m, d;
	civil_of(day, &y, &m, &d);
	int64_t months = y * 12 + (m - 1) + n;
	y = floor_div(months, 12);
	m = (int)(months - y * 12) + 1;
	if (d > month_days(y, m))
		d = month_days(y, m);
	return days_of(y, m, d) * MS_PER_DAY + in_day;
}

static void year_month(int64_t ms, int64_t *y, int *m)
{
	int d;
	civil_of(floor_div(ms, MS_PER_DAY), y, m, &d);
}

static bool negative(const struct storage_duration *d)
{
	return d->months < 0 || d->days < 0 || d->nanos < 0;
}

/* A duration as Cassandra prints it in messages, in `dst`. */
static void duration_text(const struct storage_duration *d, char *dst,
			  size_t cap)
{
	struct buf b;
	buf_init(&b);
	dst[0] = '\0';
	if (cql_format_duration(d, &b) == 0)
		snprintf(dst, cap, "%.*s", (int)b.len, (const char *)b.data);
	buf_free(&b);
}

int cql_floor_check(enum cql_floor_kind kind, const struct storage_duration *d)
{
	if (kind == CQL_FLOOR_TIME) {
		if (negative(d))
			return err_set(ERR_INVALID,
				       "Negative durations are not supported "
				       "by the floor function");
		if (d->months || d->days || d->nanos > NS_PER_DAY)
			return err_set(ERR_INVALID,
				       "For time values, the floor can only be "
				       "computed for durations smaller that a "
				       "day");
		return 0;
	}
	char text[96];
	if (kind == CQL_FLOOR_DATE && d->nanos != 0) {
		duration_text(d, text, sizeof(text));
		return err_set(ERR_INVALID,
			       "The floor on date values cannot be computed "
			       "for the %s duration as precision is below 1 "
			       "day",
			       text);
	}
	if (kind != CQL_FLOOR_DATE && d->nanos % NS_PER_MS != 0) {
		duration_text(d, text, sizeof(text));
		return err_set(ERR_INVALID,
			       "The floor cannot be computed for the %s "
			       "duration as precision is below 1 millisecond",
			       text);
	}
	if (negative(d))
		return err_set(ERR_INVALID, "Negative durations are not "
					    "supported by the floor function");
	return 0;
}

int cql_floor_timestamp(int64_t ms, const struct storage_duration *d,
			int64_t start_ms, int64_t *out_ms)
{
	if (start_ms > ms)
		return err_set(ERR_INVALID, "The floor function starting time "
					    "is greater than the provided "
					    "time");
	if (negative(d))
		return err_set(ERR_INVALID, "Negative durations are not "
					    "supported by the floor function");
	int64_t dur_ms = (int64_t)d->days * MS_PER_DAY + d->nanos / NS_PER_MS;
	if (d->months == 0) {
		*out_ms = dur_ms == 0 ? ms : ms - (ms - start_ms) % dur_ms;
		return 0;
	}
	/* As Cassandra: estimate the multiplier from the months between
	 * the two times, then step back while days and nanoseconds make it
	 * overshoot. */
	int64_t y, sy;
	int m, sm;
	year_month(ms, &y, &m);
	year_month(start_ms, &sy, &sm);
	int64_t span = (y - sy) * 12 + (m - sm);
	int64_t mult = span / d->months;
	int64_t cal = cql_floor_add_months(start_ms, mult * d->months);
	if (d->days == 0 && d->nanos == 0) {
		*out_ms = cal;
		return 0;
	}
	int64_t floor = cal + mult * dur_ms;
	while (floor > ms) {
		mult--;
		cal = cql_floor_add_months(cal, -(int64_t)d->months);
		floor = cal + mult * dur_ms;
	}
	*out_ms = floor > start_ms ? floor : start_ms;
	return 0;
}

int cql_floor_time(int64_t ns, const struct storage_duration *d,
		   int64_t *out_ns)
{
	if (cql_floor_check(CQL_FLOOR_TIME, d) != 0)
		return -1;
	*out_ns = d->nanos == 0 ? ns : ns - ns % d->nanos;
	return 0;
}

int cql_floor_date(int64_t days, const struct storage_duration *d,
		   int64_t start_days, int64_t *out_days)
{
	int64_t ms;
	if (cql_floor_check(CQL_FLOOR_DATE, d) != 0 ||
	    cql_floor_timestamp(days * MS_PER_DAY, d, start_days * MS_PER_DAY,
				&ms) != 0)
		return -1;
	*out_days = floor_div(ms, MS_PER_DAY);
	return 0;
}
