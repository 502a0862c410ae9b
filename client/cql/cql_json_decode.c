/*
 * Parsed JSON -> value bytes (cql_json.h): each type's fromJSONObject and
 * the fromString forms strings take (Integer.parseInt, BigDecimal(String),
 * Duration.from, ...), with the MarshalException messages, one case per
 * type in decode_value(); and fromJson() as a term.
 */
#include "client/cql/cql_json_internal.h"

#include "client/cql/cql_values.h"
#include "client/proto/proto.h"
#include "common/arena.h"
#include "common/err.h"
#include "common/uuid.h"
#include "storage/types.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing values ------------------------------------------------------ */

static int put_uvint(struct buf *out, uint64_t v)
{
	int extra = 0;
	while (extra < 8 && v >= (1ull << (7 * (extra + 1))))
		extra++;
	uint8_t b[9];
	int n = extra + 1;
	for (int i = n - 1; i >= 0; i--) {
		b[i] = (uint8_t)v;
		v >>= 8;
	}
	b[0] |= (uint8_t)(0xff00u >> extra);
	if (extra == 8)
		b[0] = 0xff;
	return buf_append(out, b, (size_t)n);
}

static int put_svint(struct buf *out, int64_t v)
{
	return put_uvint(out, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* ---- big numbers ---------------------------------------------------------
 */

/* BigDecimal.toString: plain when the scale is not negative and the
 * adjusted exponent is at least -6, else d.dddE+n. */
static int decimal_of_text(const char *s, size_t n, struct buf *out)
{
	size_t i = 0;
	bool neg = false;
	if (i < n && (s[i] == '+' || s[i] == '-'))
		neg = s[i++] == '-';
	char *digs = malloc(n + 1);
	if (!digs)
		return err_set(ERR_NOMEM, "out of memory");
	size_t nd = 0;
	int64_t frac = 0;
	bool dot = false;
	for (; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9') {
			digs[nd++] = s[i];
			frac += dot;
		} else if (s[i] == '.' && !dot) {
			dot = true;
		} else {
			break;
		}
	}
	int64_t exp = 0;
	bool ok = nd > 0;
	if (ok && i < n) {
		ok = (s[i] == 'e' || s[i] == 'E') && i + 1 < n;
		i++;
		bool eneg = false;
		if (ok && (s[i] == '+' || s[i] == '-'))
			eneg = s[i++] == '-';
		ok = ok && i < n;
		for (; ok && i < n; i++) {
			ok = s[i] >= '0' && s[i] <= '9' && exp < 10000000000ll;
			exp = exp * 10 + (s[i] - '0');
		}
		if (eneg)
			exp = -exp;
	}
	int64_t scale = frac - exp;
	ok = ok && scale >= INT32_MIN && scale <= INT32_MAX;
	int rc = -1;
	if (ok && buf_put_be32(out, (uint32_t)(int32_t)scale) == 0)
		rc = cql_varint_from_digits(digs, nd, neg, out);
	free(digs);
	return ok ? rc : 1;
}

/* ---- JSON -> value ------------------------------------------------------- */

static int expected(const char *what, const struct cql_json *j)
{
	struct buf b = {0};
	cql_json_java_text(j, &b);
	int rc = err_set(ERR_INVALID, "Expected %s, but got a %s: %.*s", what,
			 cql_json_java_class(j),
			 (int)(b.len > 200 ? 200 : b.len),
			 b.data ? (const char *)b.data : "");
	buf_free(&b);
	return rc;
}

/* Java's toString of the parsed value, for types that parse it as text. */
static int java_string(const struct cql_json *j, struct arena *a,
		       const char **s, size_t *n)
{
	if (j->kind == CQL_JSON_STRING) {
		*s = j->text;
		*n = j->len;
		return 0;
	}
	struct buf b = {0};
	if (cql_json_java_text(j, &b) != 0)
		return -1;
	*s = arena_memdup(a, b.data, b.len);
	*n = b.len;
	buf_free(&b);
	return *s ? 0 : err_set(ERR_NOMEM, "out of memory");
}

/* Integer.parseInt and friends: [+-]digits within `bits`. */
static bool java_int(const char *s, size_t n, int bits, int64_t *out)
{
	size_t i = 0;
	bool neg = false;
	if (n && (s[0] == '+' || s[0] == '-'))
		neg = s[i++] == '-';
	if (i == n)
		return false;
	uint64_t lim = (1ull << (bits - 1)) - (neg ? 0 : 1);
	uint64_t v = 0;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > lim)
			return false;
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

/* Double.valueOf: trimmed, an optional f/d suffix, NaN and Infinity as
 * Java spells them. */
static bool java_double(const char *s, size_t n, double *out)
{
	while (n && (unsigned char)*s <= ' ')
		s++, n--;
	while (n && (unsigned char)s[n - 1] <= ' ')
		n--;
	if (n == 0 || n > 400)
		return false;
	char tmp[420];
	memcpy(tmp, s, n);
	tmp[n] = 0;
	const char *body = tmp + (tmp[0] == '+' || tmp[0] == '-');
	if (strcmp(body, "NaN") == 0 || strcmp(body, "Infinity") == 0) {
		*out = strcmp(body, "NaN") == 0 ? NAN
		       : tmp[0] == '-'          ? -INFINITY
						: INFINITY;
		return true;
	}
	for (const char *q = body; *q; q++)
		if (!((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' ||
		      *q == 'E' || *q == '+' || *q == '-' || *q == 'x' ||
		      *q == 'X' || *q == 'p' || *q == 'P' ||
		      (*q >= 'a' && *q <= 'f') || (*q >= 'A' && *q <= 'F')))
			return false;
	if (n > 1 && strchr("fFdD", tmp[n - 1]) &&
	    !(body[0] == '0' && (body[1] == 'x' || body[1] == 'X')))
		tmp[--n] = 0;
	char *end;
	*out = strtod(tmp, &end);
	return end != tmp && *end == 0;
}

static int put_float(struct buf *out, bool dbl, double v)
{
	if (dbl) {
		uint64_t b;
		memcpy(&b, &v, 8);
		return buf_put_be64(out, b);
	}
	float f = (float)v;
	uint32_t b;
	memcpy(&b, &f, 4);
	return buf_put_be32(out, b);
}

/* fmt is a message with one %.*s, for the value's text. */
/* Whether s[0..n) is an even number of hex digits. */
static bool hex_bytes(const char *s, size_t n)
{
	if (n % 2)
		return false;
	for (size_t i = 0; i < n; i++)
		if (hex_digit(s[i]) < 0)
			return false;
	return true;
}

static int bad_text(const char *fmt, const char *s, size_t n)
{
	const char *hole = strstr(fmt, "%.*s");
	return err_set(ERR_INVALID, "%.*s%.*s%s", (int)(hole - fmt), fmt,
		       (int)(n > 200 ? 200 : n), s, hole + 4);
}

/* *acc += v * mul, false on overflow. */
static bool add_mul(int64_t *acc, int64_t v, int64_t mul)
{
	int64_t x;
	return !__builtin_mul_overflow(v, mul, &x) &&
	       !__builtin_add_overflow(*acc, x, acc);
}

/* Duration.from: 1h30m (y mo w d h m s ms us µs ns), ISO 8601 P1DT2H,
 * P2W and P0001-02-03T04:05:06, with an optional leading '-'. */
static bool duration_of_text(const char *s, size_t n, int64_t *months,
			     int64_t *days, int64_t *nanos)
{
	size_t i = 0;
	bool neg = n && s[0] == '-';
	i += neg;
	*months = *days = *nanos = 0;
	if (i == n)
		return false;
	static const struct {
		const char *u;
		int what; /* 0 months, 1 days, 2 nanos */
		int64_t mul;
	} std_units[] = {
		{"mo", 0, 1},
		{"ms", 2, 1000000},
		{"us", 2, 1000},
		{"\xc2\xb5s", 2, 1000},
		{"ns", 2, 1},
		{"y", 0, 12},
		{"w", 1, 7},
		{"d", 1, 1},
		{"h", 2, 3600000000000ll},
		{"m", 2, 60000000000ll},
		{"s", 2, 1000000000ll},
	};
	int64_t *slot[3] = {months, days, nanos};
	if (s[i] == 'P') {
		i++;
		if (i == n)
			return false;
		if (memchr(s + i, '-', n - i)) { /* PYYYY-MM-DDThh:mm:ss */
			int y, mo, d, h, mi, se;
			char tmp[64];
			if (n - i >= sizeof(tmp))
				return false;
			memcpy(tmp, s + i, n - i);
			tmp[n - i] = 0;
			int used = 0;
			if (sscanf(tmp, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo,
				   &d, &h, &mi, &se, &used) != 6 ||
			    (size_t)used != n - i)
				return false;
			*months = (int64_t)y * 12 + mo;
			*days = d;
			*nanos = ((int64_t)h * 3600 + mi * 60 + se) *
				 1000000000ll;
		} else {
			bool time = false, any = false;
			while (i < n) {
				if (s[i] == 'T' && !time) {
					time = true;
					i++;
					continue;
				}
				int64_t v = 0;
				size_t d0 = i;
				while (i < n && s[i] >= '0' && s[i] <= '9' &&
				       v < 100000000000ll)
					v = v * 10 + (s[i++] - '0');
				if (i == d0 || i == n)
					return false;
				char u = s[i++];
				bool ok;
				any = true;
				if (!time && u == 'Y')
					ok = add_mul(months, v, 12);
				else if (!time && u == 'M')
					ok = add_mul(months, v, 1);
				else if (!time && u == 'W')
					ok = add_mul(days, v, 7);
				else if (!time && u == 'D')
					ok = add_mul(days, v, 1);
				else if (time && u == 'H')
					ok = add_mul(nanos, v, 3600000000000ll);
				else if (time && u == 'M')
					ok = add_mul(nanos, v, 60000000000ll);
				else if (time && u == 'S')
					ok = add_mul(nanos, v, 1000000000ll);
				else
					return false;
				if (!ok)
					return false;
			}
			if (!any)
				return false;
		}
	} else {
		while (i < n) {
			int64_t v = 0;
			size_t d0 = i;
			while (i < n && s[i] >= '0' && s[i] <= '9' &&
			       v < 100000000000ll)
				v = v * 10 + (s[i++] - '0');
			if (i == d0 || i == n)
				return false;
			size_t k = 0,
			       nu = sizeof(std_units) / sizeof(std_units[0]);
			for (; k < nu; k++) {
				size_t ul = strlen(std_units[k].u);
				if (n - i >= ul &&
				    strncasecmp(s + i, std_units[k].u, ul) == 0)
					break;
			}
			if (k == nu)
				return false;
			i += strlen(std_units[k].u);
			if (!add_mul(slot[std_units[k].what], v,
				     std_units[k].mul))
				return false;
		}
	}
	if (*months > INT32_MAX || *days > INT32_MAX)
		return false;
	if (neg) {
		*months = -*months;
		*days = -*days;
		*nanos = -*nanos;
	}
	return true;
}

static bool all_digits(const char *s, size_t n)
{
	size_t i = n && s[0] == '-';
	if (i == n)
		return false;
	for (; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static int parse_inet(const char *s, size_t n, struct buf *out)
{
	char tmp[64];
	if (n >= sizeof(tmp))
		return 1;
	memcpy(tmp, s, n);
	tmp[n] = 0;
	uint8_t a[16];
	if (inet_pton(AF_INET, tmp, a) == 1)
		return buf_append(out, a, 4);
	if (inet_pton(AF_INET6, tmp, a) == 1)
		return buf_append(out, a, 16);
	return 1;
}

/* A simple type's fromString. */
static int from_string(const struct cql_json_type *t, const char *s, size_t n,
		       struct buf *out)
{
	int64_t v;
	double d;
	uint8_t u[16];
	switch (t->kind) {
	case STORAGE_TYPE_ASCII:
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)s[i] >= 0x80)
				return err_set(ERR_INVALID,
					       "Invalid ASCII character in "
					       "string literal: "
					       "java.nio.charset."
					       "UnmappableCharacterException: "
					       "Input length = 1");
		return buf_append(out, s, n);
	case STORAGE_TYPE_TEXT:
		if (!storage_utf8_valid((const uint8_t *)s, n))
			return err_set(ERR_INVALID, "String didn't validate.");
		return buf_append(out, s, n);
	case STORAGE_TYPE_INT:
	case STORAGE_TYPE_BIGINT:
	case CQL_JSON_TYPE_COUNTER:
	case STORAGE_TYPE_SMALLINT:
	case STORAGE_TYPE_TINYINT: {
		static const struct {
			uint16_t kind;
			int bits;
			const char *java;
		} ints[] = {
			{STORAGE_TYPE_INT, 32, "int"},
			{STORAGE_TYPE_BIGINT, 64, "long"},
			{CQL_JSON_TYPE_COUNTER, 64, "long"},
			{STORAGE_TYPE_SMALLINT, 16, "short"},
			{STORAGE_TYPE_TINYINT, 8, "byte"},
		};
		size_t k = 0;
		while (ints[k].kind != t->kind)
			k++;
		if (n == 0)
			return 0;
		if (!java_int(s, n, ints[k].bits, &v))
			return err_set(
				ERR_INVALID, "Unable to make %s from '%.*s'",
				ints[k].java, (int)(n > 200 ? 200 : n), s);
		uint8_t b[8];
		size_t w = (size_t)ints[k].bits / 8;
		for (size_t i = 0; i < w; i++)
			b[i] = (uint8_t)((uint64_t)v >> (8 * (w - 1 - i)));
		return buf_append(out, b, w);
	}
	case STORAGE_TYPE_FLOAT:
	case STORAGE_TYPE_DOUBLE: {
		bool dbl = t->kind == STORAGE_TYPE_DOUBLE;
		if (n == 0)
			return 0;
		if (!java_double(s, n, &d))
			return err_set(ERR_INVALID,
				       "Unable to make %s from '%.*s'",
				       dbl ? "double" : "float",
				       (int)(n > 200 ? 200 : n), s);
		return put_float(out, dbl, d);
	}
	case STORAGE_TYPE_BOOLEAN:
		if (n == 0)
			return 0;
		if (n == 4 && strncasecmp(s, "true", 4) == 0)
			return buf_put_u8(out, 1);
		if (n == 5 && strncasecmp(s, "false", 5) == 0)
			return buf_put_u8(out, 0);
		return bad_text("Unable to make boolean from '%.*s'", s, n);
	case STORAGE_TYPE_TIMESTAMP:
		if (n == 0)
			return 0;
		if (all_digits(s, n) && java_int(s, n, 64, &v))
			return buf_put_be64(out, (uint64_t)v);
		if (cql_parse_timestamp(s, n, &v) != 0)
			return -1;
		return buf_put_be64(out, (uint64_t)v);
	case STORAGE_TYPE_DATE:
		if (n == 0)
			return 0;
		if (all_digits(s, n)) {
			if (!java_int(s, n, 64, &v) || v < 0 || v > UINT32_MAX)
				return bad_text("Unable to coerce '%.*s' to "
						"a formatted date (long)",
						s, n);
			return buf_put_be32(out, (uint32_t)v);
		}
		if (cql_parse_date(s, n, &v) != 0)
			return -1;
		return buf_put_be32(out, (uint32_t)(v + (1ll << 31)));
	case STORAGE_TYPE_TIME:
		if (n == 0)
			return 0;
		if (all_digits(s, n)) {
			if (!java_int(s, n, 64, &v) || v < 0 ||
			    v >= 86400000000000ll)
				return bad_text("Unable to make long (for "
						"time) from: '%.*s'",
						s, n);
			return buf_put_be64(out, (uint64_t)v);
		}
		if (cql_parse_time(s, n, &v) != 0)
			return bad_text("(TimeType) Unable to coerce '%.*s' "
					"to a formatted time (long)",
					s, n);
		return buf_put_be64(out, (uint64_t)v);
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID:
		if (n == 0)
			return 0;
		if (n != UUID_TEXT_LEN || uuid_parse_n(s, u) != 0)
			return bad_text(
				t->kind == STORAGE_TYPE_UUID
					? "Unable to make UUID from '%.*s'"
					: "Unknown timeuuid representation: "
					  "%.*s",
				s, n);
		if (t->kind == STORAGE_TYPE_TIMEUUID && (u[6] >> 4) != 1)
			return err_set(ERR_INVALID, "TimeUUID supports only "
						    "version 1 UUIDs");
		return buf_append(out, u, 16);
	case STORAGE_TYPE_INET: {
		if (n == 0)
			return 0;
		int rc = parse_inet(s, n, out);
		if (rc == 1)
			return bad_text("Unable to make inet address from "
					"'%.*s'",
					s, n);
		return rc;
	}
	case CQL_JSON_TYPE_DURATION: {
		int64_t mo, dd, ns;
		if (!duration_of_text(s, n, &mo, &dd, &ns))
			return bad_text("Unable to convert '%.*s' to a "
					"duration",
					s, n);
		if (put_svint(out, mo) || put_svint(out, dd) ||
		    put_svint(out, ns))
			return -1;
		return 0;
	}
	}
	return err_set(ERR_INVALID, "Unsupported type 0x%04x for JSON",
		       t->kind);
}

static int decode_value(const struct cql_json_type *t, const struct cql_json *j,
			struct arena *a, struct buf *out, int depth);

/* Collections, tuples and UDTs take a string holding their JSON. */
static int unwrap_string(const struct cql_json **j, struct arena *a)
{
	if ((*j)->kind != CQL_JSON_STRING)
		return 0;
	const struct cql_json *inner;
	if (cql_json_parse((*j)->text, (*j)->len, a, &inner) != 0) {
		if (err_code() == ERR_NOMEM)
			return -1;
		char m[ERR_MSG_MAX];
		snprintf(m, sizeof(m), "%s", err_msg());
		return err_set(ERR_INVALID, "Error decoding JSON string: %s",
			       m);
	}
	*j = inner;
	return 0;
}

struct elem {
	size_t off, len;
	size_t idx; /* input position, so repeats keep their order */
	size_t val; /* a map key's value element */
};

struct sort_ctx {
	const struct cql_json_type *t;
	const uint8_t *base;
};

/* Set elements and map keys in their type's order, as Cassandra's
 * DelayedValues sort them. */
static int elem_cmp(const void *x, const void *y, void *arg)
{
	const struct elem *a = x, *b = y;
	const struct sort_ctx *c = arg;
	int r = c->t->st ? storage_type_cmp(c->t->st, c->base + a->off, a->len,
					    c->base + b->off, b->len)
			 : storage_value_cmp(c->t->kind, c->base + a->off,
					     a->len, c->base + b->off, b->len);
	if (r != 0)
		return r;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static bool simple_kind(uint16_t kind)
{
	return storage_type_kind_valid(kind) &&
	       !storage_type_is_collection(kind);
}

static int decode_collection(const struct cql_json_type *t,
			     const struct cql_json *j, struct arena *a,
			     struct buf *out, int depth)
{
	bool map = t->kind == CQL_JSON_TYPE_MAP;
	bool set = t->kind == CQL_JSON_TYPE_SET;
	if (unwrap_string(&j, a) != 0)
		return -1;
	if (map && j->kind != CQL_JSON_OBJECT)
		return expected("a map", j);
	if (!map && j->kind != CQL_JSON_ARRAY)
		return expected(set ? "a list (representing a set)" : "a list",
				j);
	size_t n = map ? j->count / 2 : j->count;
	struct buf vals = {0};
	struct elem *el = calloc(n ? n * (map ? 2 : 1) : 1, sizeof(*el));
	if (!el)
		return err_set(ERR_NOMEM, "out of memory");
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < j->count; i++) {
		const struct cql_json *x = &j->items[i];
		const struct cql_json_type *et =
			map && (i & 1) ? &t->sub[1] : &t->sub[0];
		if (x->kind == CQL_JSON_NULL) {
			rc = err_set(ERR_INVALID,
				     map   ? "Invalid null value in map"
				     : set ? "Invalid null element in set"
					   : "Invalid null element in list");
			break;
		}
		size_t off = vals.len;
		rc = decode_value(et, x, a, &vals, depth + 1);
		if (rc == 1)
			rc = 0;
		el[i].off = off;
		el[i].len = vals.len - off;
	}
	/* Sorted by the element type's order, without repeats (a map keeps
	 * the last value), as Cassandra's DelayedValues. */
	size_t step = map ? 2 : 1, kept = n;
	if (rc == 0 && (map || set) && n > 1 &&
	    (t->sub[0].st || simple_kind(t->sub[0].kind))) {
		struct elem *keys = calloc(n, sizeof(*keys));
		if (!keys) {
			rc = err_set(ERR_NOMEM, "out of memory");
		} else {
			for (size_t i = 0; i < n; i++) {
				keys[i] = el[i * step];
				keys[i].idx = i;
				keys[i].val = i * step + (map ? 1 : 0);
			}
			struct sort_ctx c = {&t->sub[0],
					     vals.data ? vals.data
						       : (const uint8_t *)""};
			qsort_r(keys, n, sizeof(*keys), elem_cmp, &c);
			kept = 0;
			for (size_t i = 0; i < n; i++) {
				struct elem k = keys[i];
				k.idx = 0;
				if (kept > 0) {
					struct elem prev = keys[kept - 1];
					prev.idx = 0;
					if (elem_cmp(&prev, &k, &c) == 0) {
						keys[kept - 1].val =
							keys[i].val;
						continue;
					}
				}
				keys[kept++] = keys[i];
			}
			struct elem *sorted =
				calloc(kept * step, sizeof(*sorted));
			if (!sorted) {
				rc = err_set(ERR_NOMEM, "out of memory");
			} else {
				for (size_t i = 0; i < kept; i++) {
					sorted[i * step] = keys[i];
					if (map)
						sorted[i * step + 1] =
							el[keys[i].val];
				}
				free(el);
				el = sorted;
			}
			free(keys);
		}
	}
	if (rc == 0)
		rc = buf_put_be32(out, (uint32_t)kept);
	for (size_t i = 0; rc == 0 && i < kept * step; i++) {
		rc = buf_put_be32(out, (uint32_t)el[i].len);
		if (rc == 0 && el[i].len)
			rc = buf_append(out, vals.data + el[i].off, el[i].len);
	}
	free(el);
	buf_free(&vals);
	return rc;
}

static int decode_tuple(const struct cql_json_type *t, const struct cql_json *j,
			struct arena *a, struct buf *out, int depth)
{
	if (unwrap_string(&j, a) != 0)
		return -1;
	if (j->kind != CQL_JSON_ARRAY)
		return expected("a list representation of a tuple", j);
	if (j->count != t->count) {
		struct buf b = {0};
		cql_json_java_text(j, &b);
		int rc = err_set(
			ERR_INVALID, "Tuple %s items (expected %u): %.*s",
			j->count > t->count ? "contains extra" : "is missing",
			(unsigned)t->count, (int)(b.len > 200 ? 200 : b.len),
			b.data ? (const char *)b.data : "");
		buf_free(&b);
		return rc;
	}
	for (size_t i = 0; i < t->count; i++) {
		size_t mark = out->len;
		if (buf_put_be32(out, 0) != 0)
			return -1;
		int rc = j->items[i].kind == CQL_JSON_NULL
				 ? 1
				 : decode_value(&t->sub[i], &j->items[i], a,
						out, depth + 1);
		if (rc < 0)
			return -1;
		uint32_t len =
			rc == 1 ? 0xffffffffu : (uint32_t)(out->len - mark - 4);
		for (int b = 0; b < 4; b++)
			out->data[mark + (size_t)b] =
				(uint8_t)(len >> (24 - 8 * b));
	}
	return 0;
}

static int decode_udt(const struct cql_json_type *t, const struct cql_json *j,
		      struct arena *a, struct buf *out, int depth)
{
	if (unwrap_string(&j, a) != 0)
		return -1;
	if (j->kind != CQL_JSON_OBJECT)
		return expected("a map", j);
	const struct cql_json **field =
		calloc(t->count ? t->count : 1, sizeof(*field));
	if (!field)
		return err_set(ERR_NOMEM, "out of memory");
	int rc = 0;
	for (size_t e = 0; rc == 0 && e < j->count; e += 2) {
		const char *k = j->items[e].text;
		size_t kn = j->items[e].len;
		bool quoted = kn >= 2 && k[0] == '"' && k[kn - 1] == '"';
		if (quoted) {
			k++;
			kn -= 2;
		}
		size_t f = 0;
		for (; f < t->count; f++) {
			const char *name = t->names[f];
			if (strlen(name) != kn)
				continue;
			bool same = true;
			for (size_t c = 0; same && c < kn; c++) {
				char x = k[c];
				if (!quoted && x >= 'A' && x <= 'Z')
					x = (char)(x + 32);
				same = x == name[c];
			}
			if (same)
				break;
		}
		if (f == t->count)
			rc = err_set(ERR_INVALID,
				     "Unknown field '%.*s' in value of user "
				     "defined type %s",
				     (int)(kn > 100 ? 100 : kn), k,
				     t->name ? t->name : "");
		else
			field[f] = &j->items[e + 1];
	}
	for (size_t i = 0; rc == 0 && i < t->count; i++) {
		size_t mark = out->len;
		rc = buf_put_be32(out, 0);
		if (rc != 0)
			break;
		int r = !field[i] || field[i]->kind == CQL_JSON_NULL
				? 1
				: decode_value(&t->sub[i], field[i], a, out,
					       depth + 1);
		if (r < 0) {
			rc = -1;
			break;
		}
		uint32_t len =
			r == 1 ? 0xffffffffu : (uint32_t)(out->len - mark - 4);
		for (int b = 0; b < 4; b++)
			out->data[mark + (size_t)b] =
				(uint8_t)(len >> (24 - 8 * b));
	}
	free(field);
	return rc;
}

static int decode_vector(const struct cql_json_type *t,
			 const struct cql_json *j, struct arena *a,
			 struct buf *out, int depth)
{
	if (unwrap_string(&j, a) != 0)
		return -1;
	if (j->kind != CQL_JSON_ARRAY)
		return expected("a list", j);
	if (j->count != t->dimension) {
		struct buf b = {0};
		cql_json_java_text(j, &b);
		int rc = err_set(ERR_INVALID,
				 "List had incorrect size: expected %u but "
				 "given %zu; %.*s",
				 t->dimension, j->count,
				 (int)(b.len > 200 ? 200 : b.len),
				 b.data ? (const char *)b.data : "");
		buf_free(&b);
		return rc;
	}
	size_t width = 0;
	bool fixed = cql_json_vector_fixed(&t->sub[0], &width);
	for (size_t i = 0; i < j->count; i++) {
		if (j->items[i].kind == CQL_JSON_NULL)
			return err_set(ERR_INVALID,
				       "Invalid null element in list");
		struct buf v = {0};
		int rc = decode_value(&t->sub[0], &j->items[i], a, &v,
				      depth + 1);
		if (rc == 0 && fixed && v.len != width)
			rc = err_set(ERR_INVALID, "Invalid empty vector "
						  "element");
		if (rc == 0 && !fixed)
			rc = put_uvint(out, v.len);
		if (rc == 0)
			rc = buf_append(out, v.data, v.len);
		buf_free(&v);
		if (rc != 0)
			return -1;
	}
	return 0;
}

/* What Cassandra's message says a type accepts when only its string
 * form is valid JSON for it. */
static const char *string_form(uint16_t kind)
{
	switch (kind) {
	case STORAGE_TYPE_DATE:
		return "a string representation of a date value";
	case STORAGE_TYPE_TIME:
		return "a string representation of a time value";
	case STORAGE_TYPE_UUID:
		return "a string representation of a uuid";
	case STORAGE_TYPE_TIMEUUID:
		return "a string representation of a timeuuid";
	case STORAGE_TYPE_INET:
		return "a string representation of an inet value";
	default:
		return "a string representation of a duration";
	}
}

static int decode_value(const struct cql_json_type *t, const struct cql_json *j,
			struct arena *a, struct buf *out, int depth)
{
	const char *s;
	size_t n;
	if (depth > CQL_JSON_MAX_DEPTH)
		return err_set(ERR_INVALID, "JSON value nested too deeply");
	if (j->kind == CQL_JSON_NULL)
		return 1;
	switch (t->kind) {
	case CQL_JSON_TYPE_LIST:
	case CQL_JSON_TYPE_SET:
	case CQL_JSON_TYPE_MAP:
		return decode_collection(t, j, a, out, depth);
	case CQL_JSON_TYPE_TUPLE:
		return decode_tuple(t, j, a, out, depth);
	case CQL_JSON_TYPE_UDT:
		return decode_udt(t, j, a, out, depth);
	case CQL_JSON_TYPE_VECTOR:
		return decode_vector(t, j, a, out, depth);
	case STORAGE_TYPE_ASCII:
		if (j->kind != CQL_JSON_STRING)
			return expected("an ascii string", j);
		break;
	case STORAGE_TYPE_TEXT:
		if (j->kind != CQL_JSON_STRING)
			return expected("a UTF-8 string", j);
		break;
	case STORAGE_TYPE_INT:
		if (j->kind == CQL_JSON_INT &&
		    strcmp(cql_json_java_class(j), "Integer") == 0)
			break;
		if (j->kind != CQL_JSON_STRING)
			return expected("an int value", j);
		break;
	case STORAGE_TYPE_BIGINT:
	case CQL_JSON_TYPE_COUNTER:
		if (j->kind == CQL_JSON_INT &&
		    strcmp(cql_json_java_class(j), "BigInteger") != 0)
			break;
		if (j->kind != CQL_JSON_STRING)
			return expected("a bigint value", j);
		break;
	case STORAGE_TYPE_SMALLINT:
	case STORAGE_TYPE_TINYINT:
		if (j->kind != CQL_JSON_STRING && j->kind != CQL_JSON_INT &&
		    j->kind != CQL_JSON_FLOAT)
			return expected(t->kind == STORAGE_TYPE_SMALLINT
						? "a short value"
						: "a byte value",
					j);
		break;
	case STORAGE_TYPE_FLOAT:
	case STORAGE_TYPE_DOUBLE: {
		bool dbl = t->kind == STORAGE_TYPE_DOUBLE;
		if (j->kind == CQL_JSON_INT || j->kind == CQL_JSON_FLOAT) {
			char tmp[420];
			snprintf(tmp, sizeof(tmp), "%.*s",
				 (int)(j->len > 400 ? 400 : j->len), j->text);
			return put_float(out, dbl, strtod(tmp, NULL));
		}
		if (j->kind != CQL_JSON_STRING)
			return expected(
				dbl ? "a double value" : "a float value", j);
		break;
	}
	case STORAGE_TYPE_BOOLEAN:
		if (j->kind == CQL_JSON_TRUE || j->kind == CQL_JSON_FALSE)
			return buf_put_u8(out, j->kind == CQL_JSON_TRUE);
		if (j->kind != CQL_JSON_STRING)
			return expected("a boolean value", j);
		break;
	case STORAGE_TYPE_BLOB: {
		if (java_string(j, a, &s, &n) != 0)
			return -1;
		const char *why = NULL;
		char whybuf[300];
		if (j->kind != CQL_JSON_STRING) {
			snprintf(whybuf, sizeof(whybuf),
				 "class java.lang.%s cannot be cast to class "
				 "java.lang.String",
				 cql_json_java_class(j));
			why = whybuf;
		} else if (n < 2 || s[0] != '0' || s[1] != 'x') {
			snprintf(whybuf, sizeof(whybuf),
				 "String representation of blob is missing 0x "
				 "prefix: %.*s",
				 (int)(n > 200 ? 200 : n), s);
			why = whybuf;
		} else if (!hex_bytes(s + 2, n - 2)) {
			snprintf(whybuf, sizeof(whybuf),
				 "cannot parse '%.*s' as hex bytes",
				 (int)(n > 200 ? 200 : n) - 2, s + 2);
			why = whybuf;
		}
		if (why)
			return err_set(ERR_INVALID,
				       "Value '%.*s' is not a valid blob "
				       "representation: %s",
				       (int)(n > 200 ? 200 : n), s, why);
		for (size_t i = 2; i < n; i += 2)
			if (buf_put_u8(out, (uint8_t)(hex_digit(s[i]) * 16 +
						      hex_digit(s[i + 1]))) !=
			    0)
				return -1;
		return 0;
	}
	case STORAGE_TYPE_VARINT: {
		if (java_string(j, a, &s, &n) != 0)
			return -1;
		size_t i = n && (s[0] == '-' || s[0] == '+');
		bool ok = i < n;
		for (size_t k = i; ok && k < n; k++)
			ok = s[k] >= '0' && s[k] <= '9';
		if (!ok)
			return bad_text("Value '%.*s' is not a valid "
					"representation of a varint value",
					s, n);
		return cql_varint_from_digits(s + i, n - i, s[0] == '-', out);
	}
	case STORAGE_TYPE_DECIMAL: {
		if (java_string(j, a, &s, &n) != 0)
			return -1;
		size_t mark = out->len;
		int rc = decimal_of_text(s, n, out);
		if (rc == 1) {
			out->len = mark;
			return bad_text("Value '%.*s' is not a valid "
					"representation of a decimal value",
					s, n);
		}
		return rc;
	}
	case STORAGE_TYPE_TIMESTAMP:
		if (j->kind == CQL_JSON_INT &&
		    strcmp(cql_json_java_class(j), "BigInteger") != 0) {
			int64_t v;
			java_int(j->text, j->len, 64, &v);
			return buf_put_be64(out, (uint64_t)v);
		}
		if (j->kind != CQL_JSON_STRING)
			return expected("a long or a datestring representation "
					"of a timestamp value",
					j);
		break;
	case STORAGE_TYPE_DATE:
	case STORAGE_TYPE_TIME:
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID:
	case STORAGE_TYPE_INET:
	case CQL_JSON_TYPE_DURATION:
		if (j->kind != CQL_JSON_STRING)
			return expected(string_form(t->kind), j);
		break;
	default:
		return err_set(ERR_INVALID, "Unsupported type 0x%04x for JSON",
			       t->kind);
	}
	if (java_string(j, a, &s, &n) != 0)
		return -1;
	return from_string(t, s, n, out);
}

int cql_json_decode(const struct cql_json_type *t, const struct cql_json *j,
		    struct arena *a, struct buf *out)
{
	size_t mark = out->len;
	int rc = decode_value(t, j, a, out, 0);
	if (rc < 0)
		out->len = mark;
	return rc;
}

/* ---- fromJson() in terms ------------------------------------------------- */

static bool is_fn(const struct cql_term *t, const char *a, const char *b)
{
	return t->kind == CQL_TERM_FUNCTION && t->text &&
	       (strcmp(t->text, a) == 0 || strcmp(t->text, b) == 0);
}

int cql_json_fn_term(const struct cql_term *t, const struct storage_type *type,
		     const struct cql_fn_ctx *fn, struct buf *out)
{
	if (is_fn(t, "tojson", "to_json"))
		return err_set(ERR_INVALID, "toJson() may only be used within "
					    "the selection clause");
	if (!is_fn(t, "fromjson", "from_json"))
		return 2;
	if (t->count != 1)
		return err_set(ERR_INVALID,
			       "Invalid number of arguments in call to "
			       "function system.fromjson: 1 required but %zu "
			       "provided",
			       t->count);
	const struct cql_term *arg = t->items[0];
	const char *text = NULL;
	size_t len = 0;
	if (arg->kind == CQL_TERM_NULL)
		return 1;
	if (arg->kind == CQL_TERM_STRING) {
		text = arg->text;
		len = arg->len;
	} else if (arg->kind == CQL_TERM_BIND) {
		if (!fn || !fn->binds || (size_t)arg->bind_index >= fn->nbinds)
			return err_set(ERR_INVALID,
				       "No value given for bind marker %d",
				       arg->bind_index);
		const struct cql_value *v = &fn->binds[arg->bind_index];
		if (v->len < 0)
			return 1;
		text = (const char *)v->ptr;
		len = (size_t)v->len;
	} else if (is_fn(arg, "tojson", "to_json")) {
		return cql_json_fn_term(arg, type, fn, out);
	} else {
		return err_set(ERR_INVALID,
			       "Type error: the argument of fromJson() must "
			       "be a string or a bind marker");
	}
	const struct storage_type *st = type;
	struct arena a;
	arena_create(&a, 0);
	const struct cql_json *j;
	const struct cql_json_type *jt = cql_json_type_of(&a, st);
	int rc = -1;
	if (!jt) {
		/* ERR_NOMEM set */
	} else if (cql_json_parse(text, len, &a, &j) != 0) {
		if (err_code() != ERR_NOMEM) {
			char m[ERR_MSG_MAX];
			snprintf(m, sizeof(m), "%s", err_msg());
			err_set(ERR_INVALID,
				"execution of 'system.fromjson[text]' failed: "
				"Could not decode JSON string '%.*s': %s",
				(int)(len > 200 ? 200 : len), text, m);
		}
	} else {
		struct buf v = {0};
		rc = cql_json_decode(jt, j, &a, &v);
		/* checked and in canonical order, as a bound value is */
		if (rc == 0 &&
		    (storage_value_validate(st, v.data, v.len) != 0 ||
		     storage_value_normalize(st, v.data, v.len, out) != 0))
			rc = -1;
		buf_free(&v);
		if (rc < 0 && err_code() != ERR_NOMEM) {
			char m[ERR_MSG_MAX];
			snprintf(m, sizeof(m), "%s", err_msg());
			err_set(ERR_INVALID,
				"execution of 'system.fromjson[text]' failed: "
				"org.apache.cassandra.serializers."
				"MarshalException: %s",
				m);
		}
	}
	arena_destroy(&a);
	return rc;
}
