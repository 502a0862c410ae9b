/*
 * Value bytes -> JSON (cql_json.h): each type's toJSONString, one case per
 * type in format_value(); and the description of a storage type.
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

/* ---- reading serialized values ------------------------------------------- */

static int malformed(const struct cql_json_type *t)
{
	return err_set(ERR_INVALID,
		       "Invalid serialized value for JSON of "
		       "type 0x%04x",
		       t->kind);
}

/* Cassandra's vint: leading one bits of the first byte count the extra
 * bytes. */
static int read_uvint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	if (*p >= end)
		return -1;
	uint8_t first = *(*p)++;
	int extra = 0;
	while (extra < 8 && (first & (0x80 >> extra)))
		extra++;
	if (end - *p < extra)
		return -1;
	uint64_t v = extra == 8 ? 0 : (first & (0xffu >> (extra + 1)));
	for (int i = 0; i < extra; i++)
		v = (v << 8) | *(*p)++;
	*out = v;
	return 0;
}

static int read_svint(const uint8_t **p, const uint8_t *end, int64_t *out)
{
	uint64_t u;
	if (read_uvint(p, end, &u) != 0)
		return -1;
	*out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
	return 0;
}

/* ---- big numbers ---------------------------------------------------------
 */

/* Two's-complement big-endian bytes -> decimal text. */
static int varint_text(const uint8_t *v, size_t len, struct buf *out)
{
	if (len == 0)
		return buf_put_u8(out, '0');
	bool neg = v[0] & 0x80;
	uint8_t *mag = malloc(len);
	char *digs = malloc(len * 3 + 2);
	if (!mag || !digs) {
		free(mag);
		free(digs);
		return err_set(ERR_NOMEM, "out of memory");
	}
	memcpy(mag, v, len);
	if (neg) { /* negate: invert and add one */
		unsigned carry = 1;
		for (size_t i = len; i-- > 0;) {
			unsigned x = (uint8_t)~mag[i] + carry;
			mag[i] = (uint8_t)x;
			carry = x >> 8;
		}
	}
	size_t nd = 0, start = 0;
	while (start < len && mag[start] == 0)
		start++;
	while (start < len) {
		unsigned rem = 0;
		for (size_t i = start; i < len; i++) {
			unsigned x = (rem << 8) | mag[i];
			mag[i] = (uint8_t)(x / 10);
			rem = x % 10;
		}
		digs[nd++] = (char)('0' + rem);
		while (start < len && mag[start] == 0)
			start++;
	}
	if (nd == 0)
		digs[nd++] = '0';
	int rc = 0;
	if (neg)
		rc = buf_put_u8(out, '-');
	for (size_t i = nd; rc == 0 && i-- > 0;)
		rc = buf_put_u8(out, (uint8_t)digs[i]);
	free(mag);
	free(digs);
	return rc;
}

/* Decimal digits -> minimal two's-complement big-endian bytes. */
static int decimal_text(const uint8_t *v, size_t len, struct buf *out)
{
	int32_t scale = (int32_t)(uint32_t)cql_json_be(v, 4);
	struct buf u = {0};
	if (varint_text(v + 4, len - 4, &u) != 0)
		return -1;
	const char *c = (const char *)u.data;
	size_t n = u.len;
	int rc = 0;
	if (n && c[0] == '-') {
		rc = buf_put_u8(out, '-');
		c++;
		n--;
	}
	int64_t adjusted = -(int64_t)scale + (int64_t)n - 1;
	if (rc == 0 && scale == 0) {
		rc = buf_append(out, c, n);
	} else if (rc == 0 && scale > 0 && adjusted >= -6) {
		if ((int64_t)n > scale) {
			size_t ip = n - (size_t)scale;
			rc = buf_append(out, c, ip);
			rc = rc ? rc : buf_put_u8(out, '.');
			rc = rc ? rc : buf_append(out, c + ip, n - ip);
		} else {
			rc = buf_append(out, "0.", 2);
			for (int64_t i = 0; rc == 0 && i < scale - (int64_t)n;
			     i++)
				rc = buf_put_u8(out, '0');
			rc = rc ? rc : buf_append(out, c, n);
		}
	} else if (rc == 0) {
		rc = buf_put_u8(out, (uint8_t)c[0]);
		if (rc == 0 && n > 1) {
			rc = buf_put_u8(out, '.');
			rc = rc ? rc : buf_append(out, c + 1, n - 1);
		}
		char e[32];
		snprintf(e, sizeof(e), "E%s%lld", adjusted >= 0 ? "+" : "",
			 (long long)adjusted);
		rc = rc ? rc : buf_append(out, e, strlen(e));
	}
	buf_free(&u);
	return rc;
}

/* new BigDecimal(String): [+-]digits[.digits][(e|E)[+-]digits]. */
/* ---- dates and times ----------------------------------------------------- */

static void civil_of_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t yy = (int64_t)yoe + era * 400;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = yy + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* LocalDate.toString: years past 9999 get a '+', negative ones a '-'. */
static int put_ymd(struct buf *out, int64_t days)
{
	int64_t y;
	unsigned m, d;
	civil_of_days(days, &y, &m, &d);
	char s[48];
	if (y > 9999)
		snprintf(s, sizeof(s), "+%lld-%02u-%02u", (long long)y, m, d);
	else if (y < 0)
		snprintf(s, sizeof(s), "-%04lld-%02u-%02u", (long long)-y, m,
			 d);
	else
		snprintf(s, sizeof(s), "%04lld-%02u-%02u", (long long)y, m, d);
	return buf_append(out, s, strlen(s));
}

static int format_timestamp(int64_t ms, struct buf *out)
{
	int64_t days = floor_div(ms, 86400000);
	int64_t rem = ms - days * 86400000;
	int64_t y;
	unsigned mo, d;
	civil_of_days(days, &y, &mo, &d);
	char s[80];
	/* SimpleDateFormat "yyyy-MM-dd HH:mm:ss.SSSX" in UTC; years before
	 * 1 print as their era's year. */
	snprintf(s, sizeof(s), "\"%04lld-%02u-%02u %02d:%02d:%02d.%03dZ\"",
		 (long long)(y > 0 ? y : 1 - y), mo, d, (int)(rem / 3600000),
		 (int)(rem / 60000 % 60), (int)(rem / 1000 % 60),
		 (int)(rem % 1000));
	return buf_append(out, s, strlen(s));
}

/* Duration.toString: 1y2mo3d4h5m6s7ms8us9ns, '-' first when negative. */
static int format_duration(const uint8_t *v, size_t len, struct buf *out)
{
	const uint8_t *p = v, *end = v + len;
	int64_t months, days, nanos;
	if (read_svint(&p, end, &months) || read_svint(&p, end, &days) ||
	    read_svint(&p, end, &nanos) || p != end)
		return -1;
	char s[160];
	size_t k = 0;
	s[k++] = '"';
	if (months < 0 || days < 0 || nanos < 0)
		s[k++] = '-';
	struct {
		uint64_t *val;
		uint64_t div;
		const char *unit;
	} parts[9];
	uint64_t mo = months < 0 ? -(uint64_t)months : (uint64_t)months;
	uint64_t dd = days < 0 ? -(uint64_t)days : (uint64_t)days;
	uint64_t ns = nanos < 0 ? -(uint64_t)nanos : (uint64_t)nanos;
	parts[0].val = &mo, parts[0].div = 12, parts[0].unit = "y";
	parts[1].val = &mo, parts[1].div = 1, parts[1].unit = "mo";
	parts[2].val = &dd, parts[2].div = 1, parts[2].unit = "d";
	parts[3].val = &ns, parts[3].div = 3600000000000ull,
	parts[3].unit = "h";
	parts[4].val = &ns, parts[4].div = 60000000000ull, parts[4].unit = "m";
	parts[5].val = &ns, parts[5].div = 1000000000ull, parts[5].unit = "s";
	parts[6].val = &ns, parts[6].div = 1000000ull, parts[6].unit = "ms";
	parts[7].val = &ns, parts[7].div = 1000ull, parts[7].unit = "us";
	parts[8].val = &ns, parts[8].div = 1ull, parts[8].unit = "ns";
	for (int i = 0; i < 9; i++) {
		uint64_t x = *parts[i].val;
		if (x == 0 || x < parts[i].div)
			continue;
		k += (size_t)snprintf(s + k, sizeof(s) - k, "%llu%s",
				      (unsigned long long)(x / parts[i].div),
				      parts[i].unit);
		*parts[i].val = x % parts[i].div;
	}
	s[k++] = '"';
	return buf_append(out, s, k);
}

/* ---- value -> JSON ------------------------------------------------------- */

static int format_value(const struct cql_json_type *t, const uint8_t *v,
			size_t len, struct buf *out, int depth);

static int next_elem(const uint8_t **p, const uint8_t *end, const uint8_t **ev,
		     size_t *elen)
{
	if (*p == end)
		return 1;
	if (end - *p < 4)
		return -1;
	int32_t n = (int32_t)(uint32_t)cql_json_be(*p, 4);
	*p += 4;
	if (n < 0) {
		*ev = NULL;
		*elen = 0;
		return 0;
	}
	if (end - *p < n)
		return -1;
	*ev = *p;
	*elen = (size_t)n;
	*p += n;
	return 0;
}

static int format_sep(struct buf *out, size_t i)
{
	return i > 0 ? buf_append(out, ", ", 2) : 0;
}

static int format_elem(const struct cql_json_type *t, const uint8_t *ev,
		       size_t elen, struct buf *out, int depth)
{
	if (!ev)
		return buf_append(out, "null", 4);
	return format_value(t, ev, elen, out, depth + 1);
}

static int format_collection(const struct cql_json_type *t, const uint8_t *v,
			     size_t len, struct buf *out, int depth)
{
	const uint8_t *p = v, *end = v + len;
	if (len < 4)
		return malformed(t);
	int32_t n = (int32_t)(uint32_t)cql_json_be(p, 4);
	p += 4;
	bool map = t->kind == CQL_JSON_TYPE_MAP;
	if (buf_put_u8(out, map ? '{' : '[') != 0)
		return -1;
	for (int32_t i = 0; i < n; i++) {
		const uint8_t *ev;
		size_t elen;
		if (next_elem(&p, end, &ev, &elen) != 0)
			return malformed(t);
		if (format_sep(out, (size_t)i) != 0)
			return -1;
		if (!map) {
			if (format_elem(&t->sub[0], ev, elen, out, depth) != 0)
				return -1;
			continue;
		}
		/* A key whose JSON is not a string is quoted as one. */
		struct buf key = {0};
		int rc = format_elem(&t->sub[0], ev, elen, &key, depth);
		if (rc == 0 && key.len && key.data[0] == '"') {
			rc = buf_append(out, key.data, key.len);
		} else if (rc == 0) {
			rc = buf_put_u8(out, '"');
			rc = rc ? rc
				: cql_json_quote(out, (const char *)key.data,
						 key.len);
			rc = rc ? rc : buf_put_u8(out, '"');
		}
		buf_free(&key);
		if (rc != 0 || buf_append(out, ": ", 2) != 0)
			return -1;
		if (next_elem(&p, end, &ev, &elen) != 0)
			return malformed(t);
		if (format_elem(&t->sub[1], ev, elen, out, depth) != 0)
			return -1;
	}
	if (p != end)
		return malformed(t);
	return buf_put_u8(out, map ? '}' : ']');
}

/* Tuples and UDTs: fields missing at the end (a UDT altered since) are
 * null. */
static int format_fields(const struct cql_json_type *t, const uint8_t *v,
			 size_t len, struct buf *out, int depth)
{
	const uint8_t *p = v, *end = v + len;
	bool udt = t->kind == CQL_JSON_TYPE_UDT;
	if (buf_put_u8(out, udt ? '{' : '[') != 0)
		return -1;
	for (size_t i = 0; i < t->count; i++) {
		const uint8_t *ev = NULL;
		size_t elen = 0;
		int rc = next_elem(&p, end, &ev, &elen);
		if (rc < 0)
			return malformed(t);
		if (rc == 1)
			ev = NULL;
		if (format_sep(out, i) != 0)
			return -1;
		if (udt) {
			const char *f = t->names[i];
			if (cql_json_key(out, f, strlen(f)) != 0 ||
			    buf_append(out, ": ", 2) != 0)
				return -1;
		}
		if (format_elem(&t->sub[i], ev, elen, out, depth) != 0)
			return -1;
	}
	return buf_put_u8(out, udt ? '}' : ']');
}

static int format_vector(const struct cql_json_type *t, const uint8_t *v,
			 size_t len, struct buf *out, int depth)
{
	const uint8_t *p = v, *end = v + len;
	size_t width = 0;
	bool fixed = cql_json_vector_fixed(&t->sub[0], &width);
	if (buf_put_u8(out, '[') != 0)
		return -1;
	for (uint32_t i = 0; i < t->dimension; i++) {
		size_t elen = width;
		if (!fixed) {
			uint64_t n;
			if (read_uvint(&p, end, &n) != 0 ||
			    n > (uint64_t)(end - p))
				return malformed(t);
			elen = (size_t)n;
		}
		if ((size_t)(end - p) < elen)
			return malformed(t);
		if (format_sep(out, i) != 0 ||
		    format_value(&t->sub[0], p, elen, out, depth + 1) != 0)
			return -1;
		p += elen;
	}
	if (p != end)
		return malformed(t);
	return buf_put_u8(out, ']');
}

static int format_inet(const uint8_t *v, size_t len, struct buf *out)
{
	char s[64];
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
					   0, 0, 0, 0, 0xff, 0xff};
	if (len == 16 && memcmp(v, mapped, 12) == 0) {
		v += 12; /* Java reads an IPv4-mapped address as IPv4 */
		len = 4;
	}
	if (len == 4) {
		snprintf(s, sizeof(s), "\"%u.%u.%u.%u\"", v[0], v[1], v[2],
			 v[3]);
	} else if (len == 16) {
		size_t k = 0;
		s[k++] = '"';
		for (int i = 0; i < 8; i++)
			k += (size_t)snprintf(
				s + k, sizeof(s) - k, "%s%x", i ? ":" : "",
				(unsigned)cql_json_be(v + 2 * i, 2));
		s[k++] = '"';
		s[k] = 0;
	} else {
		return -1;
	}
	return buf_append(out, s, strlen(s));
}

static int format_value(const struct cql_json_type *t, const uint8_t *v,
			size_t len, struct buf *out, int depth)
{
	char s[96];
	size_t width = 0;
	if (depth > CQL_JSON_MAX_DEPTH)
		return malformed(t);
	switch (t->kind) {
	case STORAGE_TYPE_ASCII:
	case STORAGE_TYPE_TEXT:
		if (buf_put_u8(out, '"') != 0 ||
		    cql_json_quote(out, (const char *)v, len) != 0)
			return -1;
		return buf_put_u8(out, '"');
	case STORAGE_TYPE_BLOB: {
		static const char hex[] = "0123456789abcdef";
		uint8_t *d = buf_extend(out, 4 + 2 * len);
		if (!d)
			return -1;
		memcpy(d, "\"0x", 3);
		for (size_t i = 0; i < len; i++) {
			d[3 + 2 * i] = (uint8_t)hex[v[i] >> 4];
			d[4 + 2 * i] = (uint8_t)hex[v[i] & 15];
		}
		d[3 + 2 * len] = '"';
		return 0;
	}
	case STORAGE_TYPE_VARINT:
		if (len == 0)
			return buf_append(out, "\"\"", 2);
		return varint_text(v, len, out);
	case STORAGE_TYPE_DECIMAL:
		if (len == 0)
			return buf_append(out, "\"\"", 2);
		if (len < 4)
			return malformed(t);
		return decimal_text(v, len, out);
	case STORAGE_TYPE_INET:
		if (len == 0)
			return buf_append(out, "\"\"", 2);
		return format_inet(v, len, out) ? malformed(t) : 0;
	case STORAGE_TYPE_TINYINT:
	case STORAGE_TYPE_SMALLINT:
		if (len == 0)
			return buf_append(out, "\"\"", 2);
		if (len != (t->kind == STORAGE_TYPE_TINYINT ? 1u : 2u))
			return malformed(t);
		snprintf(s, sizeof(s), "%d",
			 len == 1 ? (int)(int8_t)v[0]
				  : (int)(int16_t)(uint16_t)cql_json_be(v, 2));
		return buf_append(out, s, strlen(s));
	case CQL_JSON_TYPE_DURATION:
		if (len == 0)
			return buf_append(out, "\"\"", 2);
		return format_duration(v, len, out) ? malformed(t) : 0;
	case CQL_JSON_TYPE_LIST:
	case CQL_JSON_TYPE_SET:
	case CQL_JSON_TYPE_MAP:
		return format_collection(t, v, len, out, depth);
	case CQL_JSON_TYPE_TUPLE:
	case CQL_JSON_TYPE_UDT:
		return format_fields(t, v, len, out, depth);
	case CQL_JSON_TYPE_VECTOR:
		return format_vector(t, v, len, out, depth);
	default:
		break;
	}
	if (!cql_json_is_fixed(t->kind, &width))
		return malformed(t);
	if (len == 0)
		return buf_append(out, "\"\"", 2);
	if (len != width)
		return malformed(t);
	uint64_t x = cql_json_be(v, len < 8 ? len : 8);
	switch (t->kind) {
	case STORAGE_TYPE_BOOLEAN:
		snprintf(s, sizeof(s), "%s", v[0] ? "true" : "false");
		break;
	case STORAGE_TYPE_INT:
		snprintf(s, sizeof(s), "%d", (int32_t)(uint32_t)x);
		break;
	case STORAGE_TYPE_BIGINT:
	case CQL_JSON_TYPE_COUNTER:
		snprintf(s, sizeof(s), "%lld", (long long)(int64_t)x);
		break;
	case STORAGE_TYPE_FLOAT: {
		uint32_t b = (uint32_t)x;
		float f;
		memcpy(&f, &b, 4);
		if (isnan(f) || isinf(f))
			snprintf(s, sizeof(s), "null");
		else
			cql_json_java_float(f, s, sizeof(s));
		break;
	}
	case STORAGE_TYPE_DOUBLE: {
		double d;
		memcpy(&d, &x, 8);
		if (isnan(d) || isinf(d))
			snprintf(s, sizeof(s), "null");
		else
			cql_json_java_double(d, s, sizeof(s));
		break;
	}
	case STORAGE_TYPE_TIMESTAMP:
		return format_timestamp((int64_t)x, out);
	case STORAGE_TYPE_DATE:
		if (buf_put_u8(out, '"') != 0 ||
		    put_ymd(out, (int64_t)x - (1ll << 31)) != 0)
			return -1;
		return buf_put_u8(out, '"');
	case STORAGE_TYPE_TIME: {
		int64_t ns = (int64_t)x;
		if (ns < 0 || ns >= 86400000000000ll)
			return malformed(t);
		snprintf(s, sizeof(s), "\"%02d:%02d:%02d.%09lld\"",
			 (int)(ns / 3600000000000ll),
			 (int)(ns / 60000000000ll % 60),
			 (int)(ns / 1000000000ll % 60),
			 (long long)(ns % 1000000000ll));
		break;
	}
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID: {
		char u[UUID_TEXT_LEN + 1];
		uuid_format(v, u);
		snprintf(s, sizeof(s), "\"%s\"", u);
		break;
	}
	default:
		return malformed(t);
	}
	return buf_append(out, s, strlen(s));
}

int cql_json_format(const struct cql_json_type *t, const uint8_t *v, size_t len,
		    struct buf *out)
{
	size_t mark = out->len;
	if (format_value(t, v, len, out, 0) != 0) {
		out->len = mark;
		return -1;
	}
	return 0;
}

static int type_of(struct arena *a, const struct storage_type *t,
		   struct cql_json_type *n, int depth)
{
	if (depth > STORAGE_TYPE_MAX_DEPTH + 1)
		return err_set(ERR_INVALID, "type nested too deeply");
	memset(n, 0, sizeof(*n));
	n->kind = t->kind;
	n->count = t->count;
	n->names = t->field_names;
	n->name = t->name;
	n->dimension = t->dimension;
	n->st = t;
	if (!t->count)
		return 0;
	struct cql_json_type *sub = arena_alloc(a, t->count * sizeof(*sub));
	if (!sub)
		return err_set(ERR_NOMEM, "out of memory");
	n->sub = sub;
	for (uint16_t i = 0; i < t->count; i++)
		if (type_of(a, t->sub[i], &sub[i], depth + 1) != 0)
			return -1;
	return 0;
}

const struct cql_json_type *cql_json_type_of(struct arena *a,
					     const struct storage_type *t)
{
	struct cql_json_type *n = arena_alloc(a, sizeof(*n));
	if (!n) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	return type_of(a, t, n, 0) == 0 ? n : NULL;
}
