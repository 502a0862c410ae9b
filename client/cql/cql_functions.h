/*
 * Cassandra 4.1's native scalar functions: their names, signatures and
 * result types, how a call picks one (FunctionResolver), and what they
 * compute.
 *
 *   now(), currentTimeUUID()                        -> timeuuid
 *   currentTimestamp(), currentDate(), currentTime() -> timestamp/date/time
 *   uuid()                                          -> uuid (version 4)
 *   minTimeuuid(timestamp), maxTimeuuid(timestamp)  -> timeuuid
 *   toDate(timeuuid | timestamp)                    -> date
 *   toTimestamp(timeuuid | date)                    -> timestamp
 *   toUnixTimestamp(timeuuid | timestamp | date)    -> bigint (ms)
 *   dateOf(timeuuid), unixTimestampOf(timeuuid)     (deprecated)
 *   <type>AsBlob(type) -> blob, blobAs<Type>(blob) -> type, for every
 *   native type but blob (varchar too)
 *   cast_as_<type>(x): CAST(x AS type) in selections (CastFcts)
 *
 * Names are lower-case (the parser lower-cases unquoted ones); messages
 * name a function as Cassandra does, "system.totimestamp". Values are
 * native-protocol bytes; a NULL value is null. Arguments are typed by the
 * overload a call resolves to, so bind markers in them get that type.
 */
#ifndef CASSINI_CLIENT_CQL_FUNCTIONS_H
#define CASSINI_CLIENT_CQL_FUNCTIONS_H

#include "client/cql/cql_ast.h"
#include "client/cql/cql_values.h"
#include "common/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cql_fn {
	char name[40]; /* lower-case, without "system." */
	uint16_t ret;
	uint16_t arg; /* the one argument's type, when nargs is 1 */
	uint8_t nargs;
	uint8_t op; /* what it computes (cql_functions.c) */
};

/* What resolution knows of one argument: a type (a column, a nested call,
 * a type hint), or a term that has none yet (a literal or a marker). */
struct cql_fn_arg {
	uint16_t type;               /* 0: untyped */
	const struct cql_term *term; /* untyped: the literal or marker */
	const char *text;            /* how messages quote it */
};

/*
 * Picks the function `name` called with `args` as Cassandra's
 * FunctionResolver: one candidate is checked argument by argument ("Type
 * error: x cannot be passed as argument 0 of function system.f of type
 * t"), several are matched exactly first, then weakly ("Invalid call to
 * function system.f, none of its type signatures match (...)",
 * "Ambiguous call to function ..."). 1 when there is no function of that
 * name (the caller says "Unknown function ..."), 0 with *out, -1 on error.
 * `cast` looks up the cast_as_<type> functions CAST uses.
 */
int cql_fn_resolve(const char *name, const struct cql_fn_arg *args, size_t n,
		   struct cql_fn *out);

/* Applies `f` to its argument (NULL `arg` or arg_len < 0: null). Appends
 * the result to `out` and returns 0, or 1 for a null result; -1 with
 * ERR_INVALID ("In call to function system.blobasint, value 0x01 is not a
 * valid binary representation for type int"). */
int cql_fn_apply(const struct cql_fn *f, const uint8_t *arg, int32_t arg_len,
		 const struct cql_fn_ctx *ctx, struct buf *out);

/* The type of an argument that is a (non-frozen) collection column: no
 * native function takes one. */
#define CQL_FN_TYPE_COLLECTION 0xffff

/* 0 when Cassini computes `f` for every value; else -1 with
 * ERR_UNSUPPORTED ("Casting double values to text is not supported by
 * Cassini yet"), checked when the statement is planned. */
int cql_fn_check_supported(const struct cql_fn *f);

/* "system.name : (arg) -> ret", as Cassandra prints a signature. */
void cql_fn_signature(const struct cql_fn *f, char *dst, size_t cap);

/* Whether a value of type `type` may be stored where `receiver` is
 * expected (AbstractType.isValueCompatibleWith): the same type, ascii as
 * text, timeuuid as uuid, int/bigint/timestamp as varint, bigint and
 * timestamp as each other, anything as blob. */
bool cql_fn_value_compatible(uint16_t receiver, uint16_t type);

/* The simple type a type name denotes ("int", "varchar", ...), or 0. */
uint16_t cql_fn_type_of_name(const char *name);

/*
 * Evaluates a call or a type-hinted term (CQL_TERM_FUNCTION other than
 * token, CQL_TERM_HINT): its arguments' literals are serialized for the
 * resolved overload, markers read from ctx->binds. *type receives the
 * result's type. 0 with the value appended to `out`, 1 for null, -1 on
 * error (1 from cql_fn_resolve becomes "Unknown function f called").
 */
int cql_fn_term_eval(const struct cql_term *t, const struct cql_fn_ctx *ctx,
		     cql_value_cmp_fn cmp, uint16_t *type, struct buf *out);

/* A term as Cassandra's messages quote it: 'a', ?, now(), (int)?. */
void cql_fn_term_text(const struct cql_term *t, char *dst, size_t cap);

/* The function a call term resolves to, for typing its markers (1: none
 * of that name; -1 on error). */
int cql_fn_term_resolve(const struct cql_term *t, struct cql_fn *out);

/* The type of a term that has one (a call, a hinted term), else 0. Sets
 * the error slot and returns 0 on a resolution error, with *failed. */
uint16_t cql_fn_term_type(const struct cql_term *t, bool *failed);

#endif
