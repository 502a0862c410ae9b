/*
 * CQL literals -> native-protocol value bytes, per column type.
 *
 * The rules are Cassandra's: which constant kinds a type accepts (an
 * INTEGER for int/bigint/varint/decimal/float/double/timestamp/date/time,
 * a STRING for text/ascii/inet/timestamp/date/time, a UUID for uuid and
 * version-1 UUIDs for timeuuid, 0x... only for blob), ranges, and the error
 * sentences drivers show:
 *
 *   Invalid STRING constant (foo) for "v" of type int
 *   Unable to make int from '99999999999'
 *
 * Types are storage type trees (storage/types.h; simple kinds are the
 * native-protocol ids, enum cql_type_id). Set elements and map keys are
 * sorted by their type's order and de-duplicated (with the comparator the
 * caller supplies, storage_type_cmp when none), at every depth, so a frozen
 * set or map literal has its canonical form.
 *
 * Function calls and type hints (now(), blobAsInt(?), (int)1, ...) are
 * evaluated by client/cql/cql_functions.h; their clock, randomness and bound
 * values come from a struct cql_fn_ctx, so tests are deterministic.
 */
#ifndef CASSINI_CLIENT_CQL_VALUES_H
#define CASSINI_CLIENT_CQL_VALUES_H

#include "client/cql/cql_ast.h"
#include "common/buf.h"
#include "storage/types.h"

#include <stdbool.h>
#include <stdint.h>

struct rng;
struct cql_value;

/* Generates version-1 (time-based) UUIDs that are unique and strictly
 * increasing for this node: 100 ns ticks since 1582-10-15, bumped when the
 * clock has not moved. */
struct cql_timeuuid_gen {
	uint64_t last_ticks;
	uint8_t node[6]; /* random, multicast bit set (RFC 4122 §4.5) */
	uint16_t clock_seq;
	/* The lowest tick handed to a list prepend (0: none yet). */
	uint64_t prepend_ticks;
};

void cql_timeuuid_gen_init(struct cql_timeuuid_gen *g, uint64_t random_bits);
/* Writes 16 bytes for wall-clock time `now_us`. */
void cql_timeuuid_next(struct cql_timeuuid_gen *g, int64_t now_us,
		       uint8_t out[16]);
/* The cell paths of `n` list elements prepended at `now_us` (out: n x 16
 * bytes, element i's path at out + 16 i), as Cassandra's Lists.Prepender
 * makes them: times mirrored below 2010-01-01, so they sort before every
 * appended element, increasing along the list, and below those of every
 * earlier prepend of this generator (three prepends in one batch, all at
 * the same `now_us`, keep their order). */
void cql_timeuuid_prepend(struct cql_timeuuid_gen *g, int64_t now_us, size_t n,
			  uint8_t *out);
/* Microseconds since the Unix epoch embedded in a version-1 UUID. */
int64_t cql_timeuuid_unix_us(const uint8_t uuid[16]);
/* A CQL date (days since 1970-01-01 plus 2^31) of a Unix time in
 * milliseconds, rounded down (-1 ms is 1969-12-31), and the Unix time in
 * milliseconds of a date's midnight. */
uint32_t cql_date_of_unix_ms(int64_t ms);
int64_t cql_unix_ms_of_date(uint32_t date);

/* What functions need: the statement's clock and randomness. */
struct cql_fn_ctx {
	int64_t now_us;
	struct cql_timeuuid_gen *timeuuids;
	uint64_t (*random)(void *arg);
	void *random_arg;
	/* The request's bound values, for markers in function arguments
	 * and type hints (NULL: none). */
	const struct cql_value *binds;
	size_t nbinds;
};

/* Orders two values of a type (storage_type_cmp's signature). */
typedef int (*cql_value_cmp_fn)(const struct storage_type *t, const uint8_t *a,
				size_t alen, const uint8_t *b, size_t blen);

/*
 * Appends the serialized value of `type` for `column` to `out` (without a
 * length prefix). CQL_TERM_NULL appends nothing and returns 1 (the caller
 * writes a null or a tombstone); other successes return 0. Bind markers
 * are the caller's business (this returns -1 for them). Collections nest
 * (list<frozen<set<int>>>), tuples take (a, b) literals and vectors list
 * literals of their dimension. Errors are ERR_INVALID with Cassandra's
 * wording.
 */
int cql_term_serialize(const struct cql_term *t,
		       const struct storage_type *type, const char *column,
		       const struct cql_fn_ctx *fn, cql_value_cmp_fn cmp,
		       struct buf *out);

/* cql_term_serialize, but a literal that Cassandra 4.1 binds to
 * UNSET_VALUE returns 2 (nothing appended) instead of failing: a list or
 * set literal with an element bound to unset, a map literal with a value
 * bound to unset (Lists/Sets/Maps.DelayedValue.bind). A vector's unset
 * element is `null is not supported inside vectors` (Cassandra 5.0's
 * Vectors.DelayedValue.bind). An unset map key, tuple component or
 * frozen UDT field is refused with
 * Cassandra's words (`unset value is not supported for map keys`,
 * `Invalid unset value for tuple field number 1`, `Invalid unset value
 * for field 'f' of user defined type t`); a non-frozen UDT's unset field
 * is an empty value, as UserTypes.Setter writes it. cql_term_serialize
 * refuses 2 as `Invalid unset value for column c`. */
int cql_term_serialize_or_unset(const struct cql_term *t,
				const struct storage_type *type,
				const char *column, const struct cql_fn_ctx *fn,
				cql_value_cmp_fn cmp, struct buf *out);

/* Decimal digits `d` (n of them, no sign: `negative` gives it) appended
 * to `out` as a varint's minimal big-endian two's complement, as Java's
 * BigInteger.toByteArray(). */
int cql_varint_from_digits(const char *d, size_t n, bool negative,
			   struct buf *out);

/* Parses Cassandra's timestamp literal forms ('2024-01-31',
 * '2024-01-31 13:45:00', '2024-01-31T13:45:00.123Z', '... +0100') into
 * milliseconds since the epoch (UTC when no zone is given). */
int cql_parse_timestamp(const char *s, size_t len, int64_t *out_ms);
/* 'HH:MM:SS[.fffffffff]' -> nanoseconds since midnight. */
int cql_parse_time(const char *s, size_t len, int64_t *out_ns);
/* 'YYYY-MM-DD' -> days since the epoch. */
int cql_parse_date(const char *s, size_t len, int64_t *out_days);

/* Cassandra's duration literals (Duration.from): 1h30m (units y mo w d h m
 * s ms us µs ns, each once, in that order), P1Y2M3DT4H5M6S, P2W,
 * P0001-02-03T04:05:06; a leading '-' (or `negative`) negates. */
int cql_parse_duration(const char *s, size_t len, bool negative,
		       struct storage_duration *out);
/* Appends a duration as Cassandra and cqlsh print it: "1y2mo3d4h5m6s",
 * "-12us", "" for zero. */
int cql_format_duration(const struct storage_duration *d, struct buf *out);

/* Lower-case CQL type name for an id ("int", "text", ...), or NULL. */
const char *cql_type_name(uint16_t kind);

/* `s` as a CQL string literal: in single quotes, each ' doubled. 0, or -1
 * (out of memory). */
int cql_put_string_literal(struct buf *b, const char *s);

#endif
