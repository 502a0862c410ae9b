/*
 * Native scalar functions (client/cql/cql_functions.h): Cassandra 4.1's
 * TimeFcts, UuidFcts, BytesConversionFcts and CastFcts, resolved as its
 * FunctionResolver resolves them.
 */
#include "client/cql/cql_functions.h"

#include "client/proto/proto.h"
#include "common/err.h"
#include "common/uuid.h"
#include "storage/types.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define UUID_EPOCH_OFFSET 0x01B21DD213814000ull
#define NANOS_PER_DAY     86400000000000ll

enum op {
	OP_NOW,
	OP_UUID,
	OP_CURRENT_TIMESTAMP,
	OP_CURRENT_DATE,
	OP_CURRENT_TIME,
	OP_MIN_TIMEUUID,
	OP_MAX_TIMEUUID,
	OP_TO_DATE,
	OP_TO_TIMESTAMP,
	OP_TO_UNIX,
	OP_AS_BLOB,
	OP_FROM_BLOB,
	OP_CAST,
};

/* Every native type a conversion function exists for (CQL3Type.Native but
 * blob, duration and empty, which Cassini has no columns of). */
static const struct {
	const char *name;
	uint16_t kind;
} natives[] = {
	{"ascii", CQL_TYPE_ASCII},       {"bigint", CQL_TYPE_BIGINT},
	{"boolean", CQL_TYPE_BOOLEAN},   {"counter", CQL_TYPE_COUNTER},
	{"date", CQL_TYPE_DATE},         {"decimal", CQL_TYPE_DECIMAL},
	{"double", CQL_TYPE_DOUBLE},     {"float", CQL_TYPE_FLOAT},
	{"inet", CQL_TYPE_INET},         {"int", CQL_TYPE_INT},
	{"smallint", CQL_TYPE_SMALLINT}, {"text", CQL_TYPE_VARCHAR},
	{"time", CQL_TYPE_TIME},         {"timestamp", CQL_TYPE_TIMESTAMP},
	{"timeuuid", CQL_TYPE_TIMEUUID}, {"tinyint", CQL_TYPE_TINYINT},
	{"uuid", CQL_TYPE_UUID},         {"varchar", CQL_TYPE_VARCHAR},
	{"varint", CQL_TYPE_VARINT},     {"blob", CQL_TYPE_BLOB},
};
#define NATIVE_COUNT (sizeof(natives) / sizeof(natives[0]))

uint16_t cql_fn_type_of_name(const char *name)
{
	for (size_t i = 0; i < NATIVE_COUNT; i++)
		if (strcmp(natives[i].name, name) == 0)
			return natives[i].kind;
	return 0;
}

static const char *tname(uint16_t kind)
{
	const char *n = cql_type_name(kind);
	return n ? n : "?";
}

static bool is_int_kind(uint16_t k)
{
	return k == CQL_TYPE_TINYINT || k == CQL_TYPE_SMALLINT ||
	       k == CQL_TYPE_INT || k == CQL_TYPE_BIGINT ||
	       k == CQL_TYPE_COUNTER;
}

static bool is_numeric(uint16_t k)
{
	return is_int_kind(k) || k == CQL_TYPE_FLOAT || k == CQL_TYPE_DOUBLE ||
	       k == CQL_TYPE_DECIMAL || k == CQL_TYPE_VARINT;
}

/* CastFcts: which casts exist (identity casts are the selector itself). */
static bool cast_exists(uint16_t from, uint16_t to)
{
	if (from == to)
		return true;
	if (is_numeric(from) && is_numeric(to) && to != CQL_TYPE_COUNTER)
		return true;
	if (to == CQL_TYPE_VARCHAR || to == CQL_TYPE_ASCII)
		return from != CQL_TYPE_BLOB && from != CQL_TYPE_VARCHAR &&
				       from != CQL_TYPE_ASCII
			       ? true
			       : from == CQL_TYPE_ASCII &&
					 to == CQL_TYPE_VARCHAR;
	if (to == CQL_TYPE_DATE)
		return from == CQL_TYPE_TIMESTAMP || from == CQL_TYPE_TIMEUUID;
	if (to == CQL_TYPE_TIMESTAMP)
		return from == CQL_TYPE_DATE || from == CQL_TYPE_TIMEUUID;
	return false;
}

/* The candidates named `name`: up to NATIVE_COUNT of them (casts). */
static size_t candidates(const char *name, struct cql_fn *out)
{
	static const struct {
		const char *name;
		uint8_t op;
		uint16_t ret;
		uint8_t nargs;
		uint16_t args[3];
		uint8_t overloads;
	} fixed[] = {
		{"now", OP_NOW, CQL_TYPE_TIMEUUID, 0, {0}, 1},
		{"currenttimeuuid", OP_NOW, CQL_TYPE_TIMEUUID, 0, {0}, 1},
		{"uuid", OP_UUID, CQL_TYPE_UUID, 0, {0}, 1},
		{"currenttimestamp",
		 OP_CURRENT_TIMESTAMP,
		 CQL_TYPE_TIMESTAMP,
		 0,
		 {0},
		 1},
		{"currentdate", OP_CURRENT_DATE, CQL_TYPE_DATE, 0, {0}, 1},
		{"currenttime", OP_CURRENT_TIME, CQL_TYPE_TIME, 0, {0}, 1},
		{"mintimeuuid",
		 OP_MIN_TIMEUUID,
		 CQL_TYPE_TIMEUUID,
		 1,
		 {CQL_TYPE_TIMESTAMP},
		 1},
		{"maxtimeuuid",
		 OP_MAX_TIMEUUID,
		 CQL_TYPE_TIMEUUID,
		 1,
		 {CQL_TYPE_TIMESTAMP},
		 1},
		{"dateof",
		 OP_TO_TIMESTAMP,
		 CQL_TYPE_TIMESTAMP,
		 1,
		 {CQL_TYPE_TIMEUUID},
		 1},
		{"unixtimestampof",
		 OP_TO_UNIX,
		 CQL_TYPE_BIGINT,
		 1,
		 {CQL_TYPE_TIMEUUID},
		 1},
		{"todate",
		 OP_TO_DATE,
		 CQL_TYPE_DATE,
		 1,
		 {CQL_TYPE_TIMEUUID, CQL_TYPE_TIMESTAMP},
		 2},
		{"totimestamp",
		 OP_TO_TIMESTAMP,
		 CQL_TYPE_TIMESTAMP,
		 1,
		 {CQL_TYPE_TIMEUUID, CQL_TYPE_DATE},
		 2},
		{"tounixtimestamp",
		 OP_TO_UNIX,
		 CQL_TYPE_BIGINT,
		 1,
		 {CQL_TYPE_TIMEUUID, CQL_TYPE_TIMESTAMP, CQL_TYPE_DATE},
		 3},
	};
	size_t n = 0;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (strcmp(fixed[i].name, name) != 0)
			continue;
		for (size_t k = 0; k < fixed[i].overloads; k++) {
			struct cql_fn *f = &out[n++];
			memset(f, 0, sizeof(*f));
			snprintf(f->name, sizeof(f->name), "%s", name);
			f->op = fixed[i].op;
			f->ret = fixed[i].ret;
			f->nargs = fixed[i].nargs;
			f->arg = fixed[i].args[k];
		}
		return n;
	}
	size_t len = strlen(name);
	for (size_t i = 0; i < NATIVE_COUNT; i++) {
		const char *tn = natives[i].name;
		size_t tl = strlen(tn);
		uint16_t k = natives[i].kind;
		bool to_blob = len == tl + 6 && strncmp(name, tn, tl) == 0 &&
			       strcmp(name + tl, "asblob") == 0;
		bool from_blob = len == tl + 6 &&
				 strncmp(name, "blobas", 6) == 0 &&
				 strcmp(name + 6, tn) == 0;
		if (k == CQL_TYPE_BLOB || (!to_blob && !from_blob))
			continue;
		struct cql_fn *f = &out[0];
		memset(f, 0, sizeof(*f));
		snprintf(f->name, sizeof(f->name), "%s", name);
		f->nargs = 1;
		f->op = to_blob ? OP_AS_BLOB : OP_FROM_BLOB;
		f->arg = to_blob ? k : CQL_TYPE_BLOB;
		f->ret = to_blob ? CQL_TYPE_BLOB : k;
		return 1;
	}
	if (strncmp(name, "cast_as_", 8) == 0) {
		uint16_t to = cql_fn_type_of_name(name + 8);
		if (!to || strcmp(name + 8, "varchar") == 0)
			return 0;
		for (size_t i = 0; i < NATIVE_COUNT; i++) {
			uint16_t from = natives[i].kind;
			if (strcmp(natives[i].name, "varchar") == 0 ||
			    from == to || !cast_exists(from, to))
				continue;
			struct cql_fn *f = &out[n++];
			memset(f, 0, sizeof(*f));
			snprintf(f->name, sizeof(f->name), "%s", name);
			f->nargs = 1;
			f->op = OP_CAST;
			f->arg = from;
			f->ret = to;
		}
	}
	return n;
}

bool cql_fn_value_compatible(uint16_t receiver, uint16_t type)
{
	if (receiver == type || receiver == CQL_TYPE_BLOB)
		return true;
	switch (receiver) {
	case CQL_TYPE_VARCHAR:
		return type == CQL_TYPE_ASCII;
	case CQL_TYPE_UUID:
		return type == CQL_TYPE_TIMEUUID;
	case CQL_TYPE_VARINT:
		return type == CQL_TYPE_INT || type == CQL_TYPE_BIGINT ||
		       type == CQL_TYPE_TIMESTAMP;
	case CQL_TYPE_BIGINT:
		return type == CQL_TYPE_TIMESTAMP;
	case CQL_TYPE_TIMESTAMP:
		return type == CQL_TYPE_BIGINT;
	default:
		return false;
	}
}

enum match { NOT_ASSIGNABLE, WEAKLY_ASSIGNABLE, EXACT_MATCH };

/* Constants.Literal.testAssignment and its kin, for a simple receiver. */
static enum match test_assignment(const struct cql_fn_arg *a, uint16_t to)
{
	if (a->type == CQL_FN_TYPE_COLLECTION)
		return NOT_ASSIGNABLE; /* no function takes one here */
	if (a->type)
		return a->type == to ? EXACT_MATCH
		       : cql_fn_value_compatible(to, a->type)
			       ? WEAKLY_ASSIGNABLE
			       : NOT_ASSIGNABLE;
	const struct cql_term *t = a->term;
	if (!t || t->kind == CQL_TERM_BIND || t->kind == CQL_TERM_NULL)
		return WEAKLY_ASSIGNABLE;
	switch (t->kind) {
	case CQL_TERM_STRING:
		if (to == CQL_TYPE_VARCHAR)
			return EXACT_MATCH;
		return to == CQL_TYPE_ASCII || to == CQL_TYPE_INET ||
				       to == CQL_TYPE_DATE ||
				       to == CQL_TYPE_TIME ||
				       to == CQL_TYPE_TIMESTAMP
			       ? WEAKLY_ASSIGNABLE
			       : NOT_ASSIGNABLE;
	case CQL_TERM_INTEGER:
		if (to == CQL_TYPE_VARINT)
			return EXACT_MATCH;
		return is_numeric(to) || to == CQL_TYPE_DATE ||
				       to == CQL_TYPE_TIME ||
				       to == CQL_TYPE_TIMESTAMP
			       ? WEAKLY_ASSIGNABLE
			       : NOT_ASSIGNABLE;
	case CQL_TERM_FLOAT:
		if (to == CQL_TYPE_DECIMAL)
			return EXACT_MATCH;
		return to == CQL_TYPE_DOUBLE || to == CQL_TYPE_FLOAT
			       ? WEAKLY_ASSIGNABLE
			       : NOT_ASSIGNABLE;
	case CQL_TERM_UUID:
		return to == CQL_TYPE_UUID       ? EXACT_MATCH
		       : to == CQL_TYPE_TIMEUUID ? WEAKLY_ASSIGNABLE
						 : NOT_ASSIGNABLE;
	case CQL_TERM_BOOLEAN:
		return to == CQL_TYPE_BOOLEAN ? EXACT_MATCH : NOT_ASSIGNABLE;
	case CQL_TERM_BLOB:
		return to == CQL_TYPE_BLOB ? EXACT_MATCH : NOT_ASSIGNABLE;
	default:
		return NOT_ASSIGNABLE;
	}
}

void cql_fn_signature(const struct cql_fn *f, char *dst, size_t cap)
{
	snprintf(dst, cap, "system.%s : (%s) -> %s", f->name,
		 f->nargs ? tname(f->arg) : "", tname(f->ret));
}

static void signatures(const struct cql_fn *fs, size_t n, char *dst, size_t cap)
{
	size_t at = 0;
	dst[0] = '\0';
	for (size_t i = 0; i < n && at + 1 < cap; i++) {
		char sig[96];
		cql_fn_signature(&fs[i], sig, sizeof(sig));
		int w = snprintf(dst + at, cap - at, "%s%s", i ? ", " : "",
				 sig);
		if (w < 0)
			break;
		at += (size_t)w;
	}
}

int cql_fn_resolve(const char *name, const struct cql_fn_arg *args, size_t n,
		   struct cql_fn *out)
{
	struct cql_fn cands[NATIVE_COUNT];
	size_t nc = candidates(name, cands);
	if (!nc)
		return 1;
	if (nc == 1) {
		const struct cql_fn *f = &cands[0];
		if (n != f->nargs)
			return err_set(ERR_INVALID,
				       "Invalid number of arguments in call to "
				       "function system.%s: %u required but "
				       "%zu provided",
				       f->name, f->nargs, n);
		if (n && test_assignment(&args[0], f->arg) == NOT_ASSIGNABLE)
			return err_set(ERR_INVALID,
				       "Type error: %s cannot be passed as "
				       "argument 0 of function system.%s of "
				       "type %s",
				       args[0].text, f->name, tname(f->arg));
		*out = *f;
		return 0;
	}
	struct cql_fn compat[NATIVE_COUNT];
	size_t ncompat = 0;
	for (size_t i = 0; i < nc; i++) {
		if (n != cands[i].nargs)
			continue;
		enum match m = n ? test_assignment(&args[0], cands[i].arg)
				 : EXACT_MATCH;
		if (m == EXACT_MATCH) {
			*out = cands[i];
			return 0;
		}
		if (m == WEAKLY_ASSIGNABLE)
			compat[ncompat++] = cands[i];
	}
	char list[1024];
	if (!ncompat) {
		signatures(cands, nc, list, sizeof(list));
		return err_set(ERR_INVALID,
			       "Invalid call to function system.%s, none of "
			       "its type signatures match (known type "
			       "signatures: %s)",
			       name, list);
	}
	if (ncompat > 1) {
		signatures(compat, ncompat, list, sizeof(list));
		return err_set(ERR_INVALID,
			       "Ambiguous call to function system.%s (can be "
			       "matched by following signatures: %s): use "
			       "type casts to disambiguate",
			       name, list);
	}
	*out = compat[0];
	return 0;
}

/* ---- computing ----------------------------------------------------------- */

static void timeuuid_of(uint64_t ticks, uint64_t lsb, uint8_t out[16])
{
	be32_store(out, (uint32_t)ticks);
	be16_store(out + 4, (uint16_t)(ticks >> 32));
	be16_store(out + 6, (uint16_t)(((ticks >> 48) & 0x0fff) | 0x1000));
	be64_store(out + 8, lsb);
}

/* A value as milliseconds since the epoch (timeuuid, timestamp, date). */
static int64_t ms_of(uint16_t kind, const uint8_t *v)
{
	if (kind == CQL_TYPE_TIMEUUID) {
		int64_t us = cql_timeuuid_unix_us(v);
		return us / 1000 - (us % 1000 < 0);
	}
	if (kind == CQL_TYPE_DATE)
		return cql_unix_ms_of_date(be32_load(v));
	return (int64_t)be64_load(v);
}

/* Integer value of an int-family value. */
static int64_t int_of(uint16_t kind, const uint8_t *v)
{
	switch (kind) {
	case CQL_TYPE_TINYINT:
		return (int8_t)v[0];
	case CQL_TYPE_SMALLINT:
		return (int16_t)be16_load(v);
	case CQL_TYPE_INT:
		return (int32_t)be32_load(v);
	default:
		return (int64_t)be64_load(v);
	}
}

static double double_of(uint16_t kind, const uint8_t *v)
{
	if (kind == CQL_TYPE_FLOAT) {
		uint32_t u = be32_load(v);
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	uint64_t u = be64_load(v);
	double d;
	memcpy(&d, &u, 8);
	return d;
}

/* Java's (long) of a double: toward zero, saturating, NaN 0. */
static int64_t java_long(double d)
{
	if (isnan(d))
		return 0;
	if (d >= 9223372036854775807.0)
		return INT64_MAX;
	if (d <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)d;
}

static int put_int(uint16_t to, int64_t v, struct buf *out)
{
	switch (to) {
	case CQL_TYPE_TINYINT:
		return buf_put_u8(out, (uint8_t)v);
	case CQL_TYPE_SMALLINT:
		return buf_put_be16(out, (uint16_t)v);
	case CQL_TYPE_INT:
		return buf_put_be32(out, (uint32_t)v);
	default:
		return buf_put_be64(out, (uint64_t)v);
	}
}

/* A varint's minimal two's complement bytes. */
static int put_varint(int64_t v, struct buf *out)
{
	uint8_t b[8];
	be64_store(b, (uint64_t)v);
	size_t i = 0;
	while (i < 7 && ((b[i] == 0 && !(b[i + 1] & 0x80)) ||
			 (b[i] == 0xff && (b[i + 1] & 0x80))))
		i++;
	return buf_append(out, b + i, 8 - i);
}

int cql_fn_check_supported(const struct cql_fn *f)
{
	if (f->op != OP_CAST)
		return 0;
	uint16_t from = f->arg, to = f->ret;
	bool from_int = is_int_kind(from);
	bool from_float = from == CQL_TYPE_FLOAT || from == CQL_TYPE_DOUBLE;
	bool ok;
	if (to == CQL_TYPE_VARCHAR || to == CQL_TYPE_ASCII)
		ok = !from_float && from != CQL_TYPE_DECIMAL &&
		     from != CQL_TYPE_VARINT;
	else if (to == CQL_TYPE_DATE || to == CQL_TYPE_TIMESTAMP)
		ok = true;
	else if (is_int_kind(to) || to == CQL_TYPE_FLOAT ||
		 to == CQL_TYPE_DOUBLE)
		ok = from_int || from_float;
	else
		ok = from_int; /* to varint or decimal */
	if (ok)
		return 0;
	return err_set(ERR_UNSUPPORTED,
		       "Casting %s values to %s is not supported by Cassini "
		       "yet",
		       tname(from), tname(to));
}

static int unsupported_cast(uint16_t from, uint16_t to)
{
	return err_set(ERR_UNSUPPORTED,
		       "Casting %s values to %s is not supported by Cassini "
		       "yet",
		       tname(from), tname(to));
}

static int cast_to_text(uint16_t from, const uint8_t *v, size_t len,
			struct buf *out)
{
	char s[64];
	int n = -1;
	switch (from) {
	case CQL_TYPE_TINYINT:
	case CQL_TYPE_SMALLINT:
	case CQL_TYPE_INT:
	case CQL_TYPE_BIGINT:
	case CQL_TYPE_COUNTER:
		n = snprintf(s, sizeof(s), "%" PRId64, int_of(from, v));
		break;
	case CQL_TYPE_BOOLEAN:
		n = snprintf(s, sizeof(s), "%s", v[0] ? "true" : "false");
		break;
	case CQL_TYPE_ASCII:
		return buf_append(out, v, len);
	case CQL_TYPE_UUID:
	case CQL_TYPE_TIMEUUID: {
		char u[UUID_TEXT_LEN + 1];
		uuid_format(v, u);
		return buf_append(out, u, UUID_TEXT_LEN);
	}
	case CQL_TYPE_INET:
		if (!inet_ntop(len == 4 ? AF_INET : AF_INET6, v, s, sizeof(s)))
			return err_set(ERR_INVALID, "invalid inet value");
		n = (int)strlen(s);
		break;
	case CQL_TYPE_TIMESTAMP:
	case CQL_TYPE_DATE: {
		int64_t ms = ms_of(from, v);
		time_t secs = (time_t)(ms / 1000 - (ms % 1000 < 0));
		struct tm tm;
		if (!gmtime_r(&secs, &tm))
			return unsupported_cast(from, CQL_TYPE_VARCHAR);
		if (from == CQL_TYPE_DATE)
			n = snprintf(s, sizeof(s), "%04d-%02d-%02d",
				     tm.tm_year + 1900, tm.tm_mon + 1,
				     tm.tm_mday);
		else
			n = snprintf(s, sizeof(s),
				     "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
				     tm.tm_year + 1900, tm.tm_mon + 1,
				     tm.tm_mday, tm.tm_hour, tm.tm_min,
				     tm.tm_sec,
				     (int)(((ms % 1000) + 1000) % 1000));
		break;
	}
	case CQL_TYPE_TIME: {
		int64_t ns = (int64_t)be64_load(v);
		n = snprintf(s, sizeof(s), "%02d:%02d:%02d.%09d",
			     (int)(ns / 3600000000000ll),
			     (int)(ns / 60000000000ll % 60),
			     (int)(ns / 1000000000 % 60),
			     (int)(ns % 1000000000));
		break;
	}
	default:
		return unsupported_cast(from, CQL_TYPE_VARCHAR);
	}
	return n < 0 ? -1 : buf_append(out, s, (size_t)n);
}

static int cast(const struct cql_fn *f, const uint8_t *v, size_t len,
		struct buf *out)
{
	uint16_t from = f->arg, to = f->ret;
	if (to == CQL_TYPE_VARCHAR || to == CQL_TYPE_ASCII)
		return cast_to_text(from, v, len, out);
	if (to == CQL_TYPE_DATE)
		return buf_put_be32(out, cql_date_of_unix_ms(ms_of(from, v)));
	if (to == CQL_TYPE_TIMESTAMP)
		return buf_put_be64(out, (uint64_t)ms_of(from, v));
	bool from_int = is_int_kind(from);
	bool from_float = from == CQL_TYPE_FLOAT || from == CQL_TYPE_DOUBLE;
	if (!from_int && !from_float)
		return unsupported_cast(from, to);
	if (is_int_kind(to)) {
		int64_t i =
			from_int ? int_of(from, v)
			: to == CQL_TYPE_BIGINT
				? java_long(double_of(from, v))
				/* Java's intValue(): (int) of the double,
				 * saturating at int's range, then
				 * narrowed */
				: (int64_t)(int32_t)(java_long(double_of(from,
									 v)) >
								     INT32_MAX
							     ? INT32_MAX
						     : java_long(double_of(from,
									   v)) <
								     INT32_MIN
							     ? INT32_MIN
							     : java_long(double_of(
								       from,
								       v)));
		return put_int(to, i, out);
	}
	if (to == CQL_TYPE_FLOAT || to == CQL_TYPE_DOUBLE) {
		double d =
			from_int ? (double)int_of(from, v) : double_of(from, v);
		if (to == CQL_TYPE_FLOAT) {
			float x = from_int ? (float)int_of(from, v) : (float)d;
			uint32_t u;
			memcpy(&u, &x, 4);
			return buf_put_be32(out, u);
		}
		uint64_t u;
		memcpy(&u, &d, 8);
		return buf_put_be64(out, u);
	}
	if (!from_int)
		return unsupported_cast(from, to);
	if (to == CQL_TYPE_VARINT)
		return put_varint(int_of(from, v), out);
	/* decimal: scale 0, the integer unscaled */
	return buf_put_be32(out, 0) || put_varint(int_of(from, v), out) ? -1
									: 0;
}

int cql_fn_apply(const struct cql_fn *f, const uint8_t *arg, int32_t arg_len,
		 const struct cql_fn_ctx *ctx, struct buf *out)
{
	uint8_t id[16];
	int64_t us = ctx ? ctx->now_us : 0;
	if (f->nargs && (!arg || arg_len < 0))
		return 1; /* null in, null out */
	size_t len = f->nargs ? (size_t)arg_len : 0;
	if (f->nargs && f->op != OP_FROM_BLOB && f->op != OP_AS_BLOB) {
		if (len == 0)
			return 1; /* an empty value: no value */
		if (storage_type_validate(f->arg, arg, len) != 0)
			return -1;
	}
	switch ((enum op)f->op) {
	case OP_NOW:
		if (!ctx || !ctx->timeuuids) {
			/* no request (a PREPARE's check): any value will do */
			struct cql_timeuuid_gen g;
			cql_timeuuid_gen_init(&g, 0);
			cql_timeuuid_next(&g, us, id);
		} else {
			cql_timeuuid_next(ctx->timeuuids, us, id);
		}
		return buf_append(out, id, 16);
	case OP_UUID:
		for (int i = 0; i < 16; i += 8)
			be64_store(id + i,
				   ctx && ctx->random
					   ? ctx->random(ctx->random_arg)
					   : 0);
		id[6] = (uint8_t)((id[6] & 0x0f) | 0x40);
		id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
		return buf_append(out, id, 16);
	case OP_CURRENT_TIMESTAMP:
		return buf_put_be64(out,
				    (uint64_t)(us / 1000 - (us % 1000 < 0)));
	case OP_CURRENT_DATE:
		return buf_put_be32(
			out, cql_date_of_unix_ms(us / 1000 - (us % 1000 < 0)));
	case OP_CURRENT_TIME: {
		int64_t ns = (us % 86400000000ll) * 1000;
		if (ns < 0)
			ns += NANOS_PER_DAY;
		return buf_put_be64(out, (uint64_t)ns);
	}
	case OP_MIN_TIMEUUID:
	case OP_MAX_TIMEUUID: {
		/* UUIDGen.minTimeUUID / maxTimeUUID: the first and last tick
		 * of the millisecond, with the lowest and highest clock and
		 * node (as signed bytes) */
		int64_t ms = (int64_t)be64_load(arg);
		uint64_t ticks = (uint64_t)ms * 10000 + UUID_EPOCH_OFFSET;
		if (f->op == OP_MAX_TIMEUUID)
			ticks += 9999;
		timeuuid_of(ticks,
			    f->op == OP_MIN_TIMEUUID ? 0x8080808080808080ull
						     : 0x7f7f7f7f7f7f7f7full,
			    id);
		return buf_append(out, id, 16);
	}
	case OP_TO_DATE:
		return buf_put_be32(out,
				    cql_date_of_unix_ms(ms_of(f->arg, arg)));
	case OP_TO_TIMESTAMP:
	case OP_TO_UNIX:
		return buf_put_be64(out, (uint64_t)ms_of(f->arg, arg));
	case OP_AS_BLOB:
		return buf_append(out, arg, len);
	case OP_FROM_BLOB:
		if (storage_type_validate(f->ret, arg, len) != 0) {
			char hex[2 * 64 + 1];
			size_t show = len > 64 ? 64 : len;
			for (size_t i = 0; i < show; i++)
				snprintf(hex + 2 * i, 3, "%02x", arg[i]);
			hex[2 * show] = '\0';
			return err_set(ERR_INVALID,
				       "In call to function system.%s, value "
				       "0x%s%s is not a valid binary "
				       "representation for type %s",
				       f->name, hex, len > show ? "..." : "",
				       tname(f->ret));
		}
		return buf_append(out, arg, len);
	case OP_CAST:
		return cast(f, arg, len, out);
	}
	return err_set(ERR_INVALID, "unknown function");
}

/* ---- calls in terms ------------------------------------------------------ */

/* How Cassandra's messages quote a term (Term.Raw.toString). */
void cql_fn_term_text(const struct cql_term *t, char *dst, size_t cap)
{
	switch (t->kind) {
	case CQL_TERM_BIND:
		snprintf(dst, cap, "%s%s", t->text ? ":" : "?",
			 t->text ? t->text : "");
		return;
	case CQL_TERM_NULL:
		snprintf(dst, cap, "null");
		return;
	case CQL_TERM_STRING:
		snprintf(dst, cap, "'%.*s'", (int)(t->len > 64 ? 64 : t->len),
			 t->text);
		return;
	case CQL_TERM_BLOB:
		snprintf(dst, cap, "0x%.*s", (int)(t->len > 64 ? 64 : t->len),
			 t->text);
		return;
	case CQL_TERM_INTEGER:
	case CQL_TERM_FLOAT:
	case CQL_TERM_DURATION:
		snprintf(dst, cap, "%s%.*s", t->negative ? "-" : "",
			 (int)(t->len > 64 ? 64 : t->len), t->text);
		return;
	case CQL_TERM_BOOLEAN:
	case CQL_TERM_UUID:
		snprintf(dst, cap, "%.*s", (int)t->len, t->text);
		return;
	case CQL_TERM_FUNCTION: {
		size_t at = (size_t)snprintf(dst, cap, "%s(", t->text);
		for (size_t i = 0; i < t->count && at + 2 < cap; i++) {
			if (i)
				at += (size_t)snprintf(dst + at, cap - at,
						       ", ");
			if (at + 2 < cap)
				cql_fn_term_text(t->items[i], dst + at,
						 cap - at);
			at += strlen(dst + at);
		}
		if (at + 1 < cap)
			snprintf(dst + at, cap - at, ")");
		return;
	}
	case CQL_TERM_HINT: {
		char inner[128];
		cql_fn_term_text(t->items[0], inner, sizeof(inner));
		snprintf(dst, cap, "(%s)%s", t->type ? t->type->name : "?",
			 inner);
		return;
	}
	default:
		snprintf(dst, cap, "...");
	}
}

static uint16_t hint_type(const struct cql_term *t)
{
	if (!t->type || t->type->param_count)
		return 0;
	return cql_fn_type_of_name(t->type->name);
}

uint16_t cql_fn_term_type(const struct cql_term *t, bool *failed)
{
	if (t->kind == CQL_TERM_HINT) {
		uint16_t k = hint_type(t);
		if (!k) {
			*failed = true;
			err_set(ERR_UNSUPPORTED,
				"Type hints of collection types are not "
				"supported by Cassini yet");
		}
		return k;
	}
	if (t->kind != CQL_TERM_FUNCTION || strcmp(t->text, "token") == 0)
		return 0;
	struct cql_fn f;
	int rc = cql_fn_term_resolve(t, &f);
	if (rc != 0) {
		*failed = true;
		return 0;
	}
	return f.ret;
}

int cql_fn_term_resolve(const struct cql_term *t, struct cql_fn *out)
{
	struct cql_fn_arg args[4];
	char texts[4][160];
	size_t n = t->count < 4 ? t->count : 4;
	for (size_t i = 0; i < n; i++) {
		bool failed = false;
		args[i].type = cql_fn_term_type(t->items[i], &failed);
		if (failed)
			return -1;
		args[i].term = t->items[i];
		cql_fn_term_text(t->items[i], texts[i], sizeof(texts[i]));
		args[i].text = texts[i];
	}
	int rc = cql_fn_resolve(t->text, args, t->count, out);
	if (rc == 1)
		return err_set(ERR_INVALID, "Unknown function %s called",
			       t->text);
	return rc;
}

/* A marker's bound value, or a literal's for type `kind`. */
static int arg_value(const struct cql_term *a, uint16_t kind, const char *spec,
		     const struct cql_fn_ctx *ctx, cql_value_cmp_fn cmp,
		     struct buf *tmp, const uint8_t **v, int32_t *len)
{
	if (a->kind == CQL_TERM_BIND) {
		if (!ctx || (size_t)a->bind_index >= ctx->nbinds)
			return err_set(ERR_INVALID,
				       "No value given for bind marker %d",
				       a->bind_index);
		const struct cql_value *b = &ctx->binds[a->bind_index];
		if (b->len == CQL_VALUE_UNSET)
			return err_set(ERR_INVALID,
				       "Invalid unset value for argument in "
				       "call to function %s",
				       spec);
		*v = b->len > 0 ? b->ptr : (const uint8_t *)"";
		*len = b->len < 0 ? -1 : b->len;
		return 0;
	}
	size_t mark = tmp->len;
	uint16_t type = 0;
	int rc;
	if (a->kind == CQL_TERM_FUNCTION || a->kind == CQL_TERM_HINT) {
		rc = cql_fn_term_eval(a, ctx, cmp, &type, tmp);
	} else {
		const struct storage_type *st = storage_type_simple(kind);
		rc = st ? cql_term_serialize(a, st, spec, ctx, cmp, tmp)
			: err_set(ERR_INVALID, "Invalid argument for %s", spec);
	}
	if (rc < 0)
		return -1;
	*v = rc == 1     ? NULL
	     : tmp->data ? tmp->data + mark
			 : (const uint8_t *)"";
	*len = rc == 1 ? -1 : (int32_t)(tmp->len - mark);
	return 0;
}

int cql_fn_term_eval(const struct cql_term *t, const struct cql_fn_ctx *ctx,
		     cql_value_cmp_fn cmp, uint16_t *type, struct buf *out)
{
	struct buf tmp;
	const uint8_t *v = NULL;
	int32_t len = -1;
	char spec[160];
	buf_init(&tmp);
	if (t->kind == CQL_TERM_HINT) {
		/* TypeCast: the term must be assignable to the hinted type */
		bool failed = false;
		uint16_t k = cql_fn_term_type(t, &failed);
		if (failed)
			return -1;
		const struct cql_term *inner = t->items[0];
		char text[160];
		cql_fn_term_text(inner, text, sizeof(text));
		struct cql_fn_arg a = {cql_fn_term_type(inner, &failed), inner,
				       text};
		if (failed)
			return -1;
		if (test_assignment(&a, k) == NOT_ASSIGNABLE)
			return err_set(ERR_INVALID,
				       "Cannot cast value %s to type %s", text,
				       t->type->name);
		cql_fn_term_text(t, spec, sizeof(spec));
		*type = k;
		int rc = arg_value(inner, k, spec, ctx, cmp, &tmp, &v, &len);
		if (rc == 0 && len >= 0 &&
		    (storage_type_validate(k, v, (size_t)len) != 0 ||
		     buf_append(out, v, (size_t)len) != 0))
			rc = -1;
		buf_free(&tmp);
		if (rc != 0)
			return -1;
		return len < 0 ? 1 : 0;
	}
	struct cql_fn f;
	if (cql_fn_term_resolve(t, &f) != 0 || cql_fn_check_supported(&f) != 0)
		return -1;
	*type = f.ret;
	if (f.nargs) {
		snprintf(spec, sizeof(spec), "arg0(system.%s)", f.name);
		if (arg_value(t->items[0], f.arg, spec, ctx, cmp, &tmp, &v,
			      &len) != 0) {
			buf_free(&tmp);
			return -1;
		}
	}
	int rc = cql_fn_apply(&f, v, len, ctx, out);
	buf_free(&tmp);
	return rc;
}
