/*
 * Cassandra 5.0's floor() arithmetic (Duration.floorTimestamp,
 * Duration.floorTime, TimeFcts' FloorFunction), used by GROUP BY's time
 * windows (CASSANDRA-11871): a time rounded down to the closest multiple
 * of a duration counted from a starting time (the epoch by default).
 *
 * Durations with months are added as java.util.Calendar adds them in UTC
 * (the day of the month clamped to the month's length), proleptic
 * Gregorian (Cassandra's Calendar switches to Julian before 1582).
 * Errors are ERR_INVALID with Cassandra's messages.
 */
#ifndef CASSINI_CLIENT_CQL_FLOOR_H
#define CASSINI_CLIENT_CQL_FLOOR_H

#include "storage/types.h"

#include <stdint.h>

/* The column types floor() takes (CQL type codes of proto/). */
enum cql_floor_kind {
	CQL_FLOOR_TIMESTAMP,
	CQL_FLOOR_TIMEUUID,
	CQL_FLOOR_DATE,
	CQL_FLOOR_TIME,
};

/* Whether floor() of `kind` accepts duration `d` (its precision, its
 * sign, a day for time): 0, or -1 with Cassandra's message. */
int cql_floor_check(enum cql_floor_kind kind, const struct storage_duration *d);

/* Duration.floorTimestamp: milliseconds `ms` rounded down to `start_ms` +
 * k * d; -1 when start_ms > ms ("The floor function starting time is
 * greater than the provided time") or d is negative. */
int cql_floor_timestamp(int64_t ms, const struct storage_duration *d,
			int64_t start_ms, int64_t *out_ms);

/* Duration.floorTime: nanoseconds since midnight. */
int cql_floor_time(int64_t ns, const struct storage_duration *d,
		   int64_t *out_ns);

/* A date (days since the epoch) floored as a timestamp, back to days. */
int cql_floor_date(int64_t days, const struct storage_duration *d,
		   int64_t start_days, int64_t *out_days);

/* java.util.Calendar.add(MONTH, n) in UTC on milliseconds. */
int64_t cql_floor_add_months(int64_t ms, int64_t n);

#endif
