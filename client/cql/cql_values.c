/*
 * Literal -> value conversion with Cassandra's acceptance rules and error
 * sentences; timeuuid generation; date and time literal parsing.
 */
#include "client/cql/cql_values.h"
#include "client/cql/cql_functions.h"
#include "client/cql/cql_json.h"

#include "client/proto/proto.h"
#include "common/err.h"
#include "common/uuid.h"
#include "storage/types.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 100 ns intervals between 1582-10-15 and 1970-01-01. */
#define UUID_EPOCH_OFFSET 0x01B21DD213814000ull
#define DATE_EPOCH_BIAS   (1ll << 31)
#define NANOS_PER_DAY     86400000000000ll

const char *cql_type_name(uint16_t kind)
{
	switch (kind) {
	case CQL_TYPE_ASCII:
		return "ascii";
	case CQL_TYPE_BIGINT:
		return "bigint";
	case CQL_TYPE_BLOB:
		return "blob";
	case CQL_TYPE_BOOLEAN:
		return "boolean";
	case CQL_TYPE_COUNTER:
		return "counter";
	case CQL_TYPE_DECIMAL:
		return "decimal";
	case CQL_TYPE_DOUBLE:
		return "double";
	case CQL_TYPE_FLOAT:
		return "float";
	case CQL_TYPE_INT:
		return "int";
	case CQL_TYPE_TIMESTAMP:
		return "timestamp";
	case CQL_TYPE_UUID:
		return "uuid";
	case CQL_TYPE_VARCHAR:
		return "text";
	case CQL_TYPE_VARINT:
		return "varint";
	case CQL_TYPE_TIMEUUID:
		return "timeuuid";
	case CQL_TYPE_INET:
		return "inet";
	case CQL_TYPE_DATE:
		return "date";
	case CQL_TYPE_TIME:
		return "time";
	case CQL_TYPE_SMALLINT:
		return "smallint";
	case CQL_TYPE_TINYINT:
		return "tinyint";
	case CQL_TYPE_DURATION:
		return "duration";
	case CQL_TYPE_LIST:
		return "list";
	case CQL_TYPE_MAP:
		return "map";
	case CQL_TYPE_SET:
		return "set";
	default:
		return NULL;
	}
}

/* ---- timeuuids ----------------------------------------------------------- */

void cql_timeuuid_gen_init(struct cql_timeuuid_gen *g, uint64_t random_bits)
{
	memset(g, 0, sizeof(*g));
	for (int i = 0; i < 6; i++)
		g->node[i] = (uint8_t)(random_bits >> (8 * i));
	g->node[0] |= 0x01; /* multicast bit: not a real MAC address */
	g->clock_seq = (uint16_t)(random_bits >> 48) & 0x3fff;
}

void cql_timeuuid_next(struct cql_timeuuid_gen *g, int64_t now_us,
		       uint8_t out[16])
{
	uint64_t ticks = (uint64_t)now_us * 10 + UUID_EPOCH_OFFSET;
	if (ticks <= g->last_ticks)
		ticks = g->last_ticks + 1;
	g->last_ticks = ticks;
	be32_store(out, (uint32_t)ticks);
	be16_store(out + 4, (uint16_t)(ticks >> 32));
	be16_store(out + 6, (uint16_t)(((ticks >> 48) & 0x0fff) | 0x1000));
	out[8] = (uint8_t)(((g->clock_seq >> 8) & 0x3f) | 0x80);
	out[9] = (uint8_t)g->clock_seq;
	memcpy(out + 10, g->node, 6);
}

static void timeuuid_of_ticks(const struct cql_timeuuid_gen *g, uint64_t ticks,
			      uint8_t out[16])
{
	be32_store(out, (uint32_t)ticks);
	be16_store(out + 4, (uint16_t)(ticks >> 32));
	be16_store(out + 6, (uint16_t)(((ticks >> 48) & 0x0fff) | 0x1000));
	out[8] = (uint8_t)(((g->clock_seq >> 8) & 0x3f) | 0x80);
	out[9] = (uint8_t)g->clock_seq;
	memcpy(out + 10, g->node, 6);
}

void cql_timeuuid_prepend(struct cql_timeuuid_gen *g, int64_t now_us, size_t n,
			  uint8_t *out)
{
	/* Cassandra's PrecisionTime: REFERENCE_TIME - (now - REFERENCE_TIME),
	 * then each call below the last one. Ticks are 100 ns. */
	const int64_t ref_us = 1262304000000000ll; /* 2010-01-01 */
	int64_t mirror_us = ref_us - (now_us - ref_us);
	uint64_t base = (uint64_t)(mirror_us > 0 ? mirror_us : 0) * 10 +
			UUID_EPOCH_OFFSET;
	base = base > n ? base - n : 0;
	if (g->prepend_ticks && base + n >= g->prepend_ticks)
		base = g->prepend_ticks > n + 1 ? g->prepend_ticks - n - 1 : 0;
	g->prepend_ticks = base + 1;
	for (size_t i = 0; i < n; i++)
		timeuuid_of_ticks(g, base + 1 + i, out + 16 * i);
}

int64_t cql_timeuuid_unix_us(const uint8_t uuid[16])
{
	uint64_t ticks = (uint64_t)(be16_load(uuid + 6) & 0x0fff) << 48 |
			 (uint64_t)be16_load(uuid + 4) << 32 | be32_load(uuid);
	return ((int64_t)ticks - (int64_t)UUID_EPOCH_OFFSET) / 10;
}

/* ---- dates and times ----------------------------------------------------- */

uint32_t cql_date_of_unix_ms(int64_t ms)
{
	int64_t days = ms / 86400000 - (ms % 86400000 < 0);
	return (uint32_t)(days + DATE_EPOCH_BIAS);
}

int64_t cql_unix_ms_of_date(uint32_t date)
{
	return ((int64_t)date - DATE_EPOCH_BIAS) * 86400000;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static bool leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Reads exactly n digits. */
static bool digits(const char **p, const char *end, int n, int64_t *out)
{
	int64_t v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (*p >= end || **p < '0' || **p > '9')
			return false;
		v = v * 10 + (**p - '0');
	}
	*out = v;
	return true;
}

static bool parse_ymd(const char **p, const char *end, int64_t *days)
{
	int64_t y, m, d;
	bool neg = *p < end && **p == '-';
	if (neg)
		(*p)++;
	const char *start = *p;
	while (*p < end && **p >= '0' && **p <= '9')
		(*p)++;
	int ylen = (int)(*p - start);
	*p = start;
	if (ylen < 4 || ylen > 9 || !digits(p, end, ylen, &y))
		return false;
	if (neg)
		y = -y;
	if (*p >= end || **p != '-' || (++*p, !digits(p, end, 2, &m)) ||
	    *p >= end || **p != '-' || (++*p, !digits(p, end, 2, &d)))
		return false;
	static const int mdays[] = {31, 28, 31, 30, 31, 30,
				    31, 31, 30, 31, 30, 31};
	if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1] + (m == 2 && leap(y)))
		return false;
	*days = days_from_civil(y, (unsigned)m, (unsigned)d);
	return true;
}

/* HH:MM[:SS[.fraction]] -> nanoseconds; fraction up to 9 digits. */
static bool parse_hms(const char **p, const char *end, bool need_seconds,
		      int64_t *ns)
{
	int64_t h, m, s = 0, frac = 0;
	if (!digits(p, end, 2, &h) || *p >= end || **p != ':' ||
	    (++*p, !digits(p, end, 2, &m)))
		return false;
	if (*p < end && **p == ':') {
		(*p)++;
		if (!digits(p, end, 2, &s))
			return false;
		if (*p < end && **p == '.') {
			(*p)++;
			int n = 0;
			while (*p < end && **p >= '0' && **p <= '9') {
				if (n < 9) {
					frac = frac * 10 + (**p - '0');
					n++;
				}
				(*p)++;
			}
			if (n == 0)
				return false;
			for (; n < 9; n++)
				frac *= 10;
		}
	} else if (need_seconds) {
		return false;
	}
	if (h > 23 || m > 59 || s > 59)
		return false;
	*ns = ((h * 60 + m) * 60 + s) * 1000000000ll + frac;
	return true;
}

int cql_parse_date(const char *s, size_t len, int64_t *out_days)
{
	const char *p = s, *end = s + len;
	if (!parse_ymd(&p, end, out_days) || p != end)
		return err_set(
			ERR_INVALID,
			"Unable to coerce '%.*s' to a formatted date (long)",
			(int)len, s);
	return 0;
}

int cql_parse_time(const char *s, size_t len, int64_t *out_ns)
{
	const char *p = s, *end = s + len;
	if (!parse_hms(&p, end, true, out_ns) || p != end)
		return err_set(ERR_INVALID,
			       "Timestamp format must be hh:mm:ss[.fffffffff]");
	return 0;
}

int cql_parse_timestamp(const char *s, size_t len, int64_t *out_ms)
{
	const char *p = s, *end = s + len;
	int64_t days, ns = 0, offset_min = 0;
	if (!parse_ymd(&p, end, &days))
		goto bad;
	if (p < end && (*p == 'T' || *p == ' ') && p + 1 < end && p[1] >= '0' &&
	    p[1] <= '9') {
		p++;
		if (!parse_hms(&p, end, false, &ns))
			goto bad;
	}
	if (p < end && *p == ' ')
		p++;
	if (p < end && *p == 'Z') {
		p++;
	} else if (p < end && (*p == '+' || *p == '-')) {
		int sign = *p++ == '-' ? -1 : 1;
		int64_t hh, mm = 0;
		if (!digits(&p, end, 2, &hh))
			goto bad;
		if (p < end && *p == ':')
			p++;
		if (p < end && !digits(&p, end, 2, &mm))
			goto bad;
		offset_min = sign * (hh * 60 + mm);
	}
	/* a 9-digit year would overflow the milliseconds */
	if (p != end || days > INT64_MAX / 86400000ll - 1 ||
	    days < INT64_MIN / 86400000ll + 1)
		goto bad;
	*out_ms = days * 86400000ll + ns / 1000000 - offset_min * 60000;
	return 0;
bad:
	return err_set(ERR_INVALID,
		       "Unable to coerce '%.*s' to a formatted date (long)",
		       (int)(len > 64 ? 64 : len), s);
}

/* ---- numbers ------------------------------------------------------------- */

int cql_varint_from_digits(const char *d, size_t n, bool negative,
			   struct buf *out)
{
	size_t cap = n / 2 + 2;
	uint8_t *mag = calloc(cap, 1); /* little-endian magnitude */
	if (!mag)
		return err_set(ERR_NOMEM, "out of memory");
	size_t used = 1;
	for (size_t i = 0; i < n; i++) {
		unsigned carry = (unsigned)(d[i] - '0');
		for (size_t j = 0; j < used; j++) {
			unsigned v = mag[j] * 10u + carry;
			mag[j] = (uint8_t)v;
			carry = v >> 8;
		}
		if (carry)
			mag[used++] = (uint8_t)carry;
	}
	bool zero = used == 1 && mag[0] == 0;
	if (negative && !zero) { /* two's complement: invert and add one */
		unsigned carry = 1;
		for (size_t j = 0; j < used; j++) {
			unsigned v = (uint8_t)~mag[j] + carry;
			mag[j] = (uint8_t)v;
			carry = v >> 8;
		}
		if (!(mag[used - 1] & 0x80))
			mag[used++] = 0xff;
	} else if (mag[used - 1] & 0x80) {
		mag[used++] = 0x00;
	}
	/* Drop redundant sign bytes. */
	while (used > 1 &&
	       ((mag[used - 1] == 0x00 && !(mag[used - 2] & 0x80)) ||
		(mag[used - 1] == 0xff && (mag[used - 2] & 0x80))))
		used--;
	uint8_t *dst = buf_extend(out, used);
	if (dst)
		for (size_t j = 0; j < used; j++)
			dst[j] = mag[used - 1 - j];
	free(mag);
	return dst ? 0 : -1;
}

static int parse_fixed_int(const struct cql_term *t, int bits, const char *java,
			   int64_t *out)
{
	char text[32];
	if (t->len > 20)
		goto range;
	snprintf(text, sizeof(text), "%s%.*s", t->negative ? "-" : "",
		 (int)t->len, t->text);
	errno = 0;
	char *end;
	long long v = strtoll(text, &end, 10);
	if (errno == ERANGE || *end)
		goto range;
	if (bits < 64) {
		long long lim = 1ll << (bits - 1);
		if (v < -lim || v >= lim)
			goto range;
	}
	*out = v;
	return 0;
range:
	return err_set(ERR_INVALID, "Unable to make %s from '%s%.*s'", java,
		       t->negative ? "-" : "", (int)(t->len > 40 ? 40 : t->len),
		       t->text);
}

/* 1.5e-3 -> unscaled 15, scale 4. */
static int serialize_decimal(const struct cql_term *t, struct buf *out)
{
	char digs[128];
	size_t nd = 0;
	int64_t frac = 0, exp = 0;
	bool seen_dot = false;
	size_t i = 0;
	for (; i < t->len; i++) {
		char c = t->text[i];
		if (c >= '0' && c <= '9') {
			if (nd >= sizeof(digs))
				goto bad;
			digs[nd++] = c;
			frac += seen_dot;
		} else if (c == '.' && !seen_dot) {
			seen_dot = true;
		} else {
			break;
		}
	}
	if (i < t->len) {
		if (t->text[i] != 'e' && t->text[i] != 'E')
			goto bad;
		char text[24];
		snprintf(text, sizeof(text), "%.*s",
			 (int)(t->len - i - 1 > 20 ? 20 : t->len - i - 1),
			 t->text + i + 1);
		char *end;
		errno = 0;
		exp = strtoll(text, &end, 10);
		if (*end || errno || exp > 1000000000 || exp < -1000000000)
			goto bad;
	}
	if (nd == 0)
		goto bad;
	int64_t scale = frac - exp;
	if (scale > INT32_MAX || scale < INT32_MIN)
		goto bad;
	if (buf_put_be32(out, (uint32_t)(int32_t)scale) != 0)
		return -1;
	return cql_varint_from_digits(digs, nd, t->negative, out);
bad:
	return err_set(ERR_INVALID, "Unable to make BigDecimal from '%.*s'",
		       (int)(t->len > 40 ? 40 : t->len), t->text);
}

static int serialize_float(const struct cql_term *t, bool dbl, struct buf *out)
{
	char text[64];
	snprintf(text, sizeof(text), "%.*s", (int)(t->len > 60 ? 60 : t->len),
		 t->text);
	char *end;
	double v = strtod(text, &end);
	if (*end)
		return err_set(ERR_INVALID, "Unable to make %s from '%s'",
			       dbl ? "double" : "float", text);
	if (t->negative)
		v = -v;
	if (dbl) {
		uint64_t bits;
		memcpy(&bits, &v, 8);
		return buf_put_be64(out, bits);
	}
	float f = (float)v;
	uint32_t bits;
	memcpy(&bits, &f, 4);
	return buf_put_be32(out, bits);
}

/* ---- durations ------------------------------------------------------------
 */

#define NS_US  1000ll
#define NS_MS  (1000 * NS_US)
#define NS_SEC (1000 * NS_MS)
#define NS_MIN (60 * NS_SEC)
#define NS_HR  (60 * NS_MIN)

/* Cassandra's Duration.Builder: units in order, each once, totals that
 * fit. */
struct dur_builder {
	int64_t months, days, nanos;
	int unit; /* the last unit added (1 years .. 10 nanoseconds) */
};

static const char *const dur_unit_names[] = {
	"",           "years",   "months",  "weeks",        "days",
	"hours",      "minutes", "seconds", "milliseconds", "microseconds",
	"nanoseconds"};

static int dur_add(struct dur_builder *b, int unit, uint64_t n)
{
	if (unit == b->unit)
		return err_set(ERR_INVALID,
			       "Invalid duration. The %s are specified "
			       "multiple times",
			       dur_unit_names[unit]);
	if (unit < b->unit)
		return err_set(ERR_INVALID,
			       "Invalid duration. The %s should be after %s",
			       dur_unit_names[b->unit], dur_unit_names[unit]);
	b->unit = unit;
	static const int64_t per[] = {0,      12,     1,     7,     1, NS_HR,
				      NS_MIN, NS_SEC, NS_MS, NS_US, 1};
	int64_t *total = unit <= 2   ? &b->months
			 : unit <= 4 ? &b->days
				     : &b->nanos;
	int64_t max = unit <= 4 ? INT32_MAX : INT64_MAX;
	const char *what = unit <= 2   ? "months"
			   : unit <= 4 ? "days"
				       : "nanoseconds";
	if (n > (uint64_t)((max - *total) / per[unit]))
		return err_set(ERR_INVALID,
			       "Invalid duration. The total number of %s must "
			       "be less or equal to %d",
			       what, INT32_MAX);
	*total += (int64_t)n * per[unit];
	return 0;
}

static bool dur_number(const char **p, const char *end, uint64_t *out)
{
	const char *q = *p;
	uint64_t v = 0;
	while (q < end && *q >= '0' && *q <= '9') {
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*q - '0');
		q++;
	}
	if (q == *p)
		return false;
	*p = q;
	*out = v;
	return true;
}

int cql_parse_duration(const char *s, size_t len, bool negative,
		       struct storage_duration *out)
{
	const char *p = s, *end = s + len;
	if (p < end && *p == '-') {
		negative = !negative;
		p++;
	}
	struct dur_builder b = {0};
	const char *src = p;
	int srclen = (int)(end - p);
	uint64_t n;
	if (p < end && *p == 'P') {
		p++;
		if (end[-1] == 'W') {
			if (!dur_number(&p, end, &n) || p != end - 1)
				goto bad;
			if (dur_add(&b, 3, n) != 0)
				return -1;
		} else if (memchr(p, '-', (size_t)(end - p))) {
			static const char shape[] = "4-2-2T2:2:2";
			static const int units[] = {1, 2, 4, 5, 6, 7};
			int k = 0;
			for (const char *sh = shape; *sh; sh++) {
				if (*sh >= '0' && *sh <= '9') {
					const char *d = p;
					if (!dur_number(&p, end, &n) ||
					    p - d != *sh - '0')
						goto bad;
					if (dur_add(&b, units[k++], n) != 0)
						return -1;
				} else if (p >= end || *p++ != *sh) {
					goto bad;
				}
			}
			if (p != end)
				goto bad;
		} else {
			static const char date_units[] = "YMD",
					  time_units[] = "HMS";
			const char *units = date_units;
			bool in_time = false;
			while (p < end) {
				if (*p == 'T' && !in_time) {
					in_time = true;
					units = time_units;
					p++;
					continue;
				}
				if (!dur_number(&p, end, &n) || p >= end)
					goto bad;
				const char *u = strchr(units, *p);
				if (!u || !*p)
					goto bad;
				int unit =
					in_time ? 5 + (int)(u - time_units)
						: (u == date_units       ? 1
						   : u == date_units + 1 ? 2
									 : 4);
				if (dur_add(&b, unit, n) != 0)
					return -1;
				units = u + 1;
				p++;
			}
		}
	} else {
		if (p == end)
			goto bad;
		while (p < end) {
			if (!dur_number(&p, end, &n) || p >= end)
				goto bad;
			int unit;
			char c0 = (char)tolower((unsigned char)p[0]);
			char c1 = p + 1 < end
					  ? (char)tolower((unsigned char)p[1])
					  : 0;
			if ((unsigned char)p[0] == 0xc2 && p + 2 < end &&
			    (unsigned char)p[1] == 0xb5 &&
			    tolower((unsigned char)p[2]) == 's') {
				unit = 9;
				p += 3;
			} else if (c0 == 'm' && c1 == 'o') {
				unit = 2;
				p += 2;
			} else if (c0 == 'm' && c1 == 's') {
				unit = 8;
				p += 2;
			} else if (c0 == 'u' && c1 == 's') {
				unit = 9;
				p += 2;
			} else if (c0 == 'n' && c1 == 's') {
				unit = 10;
				p += 2;
			} else {
				const char *u = strchr("ywdhms", c0);
				if (!c0 || !u)
					goto bad;
				static const int units[] = {1, 3, 4, 5, 6, 7};
				unit = units[u - "ywdhms"];
				p++;
			}
			if (dur_add(&b, unit, n) != 0)
				return -1;
		}
	}
	out->months = (int32_t)(negative ? -b.months : b.months);
	out->days = (int32_t)(negative ? -b.days : b.days);
	out->nanos = negative ? -b.nanos : b.nanos;
	return 0;
bad:
	return err_set(ERR_INVALID, "Unable to convert '%.*s' to a duration",
		       srclen, src);
}

static int put_unit(struct buf *b, int64_t *v, int64_t per, const char *unit)
{
	if (*v == 0 || *v < per)
		return 0;
	char t[32];
	int n = snprintf(t, sizeof(t), "%lld%s", (long long)(*v / per), unit);
	*v %= per;
	return buf_append(b, t, (size_t)n);
}

int cql_format_duration(const struct storage_duration *d, struct buf *out)
{
	int64_t months = d->months < 0 ? -(int64_t)d->months : d->months;
	int64_t days = d->days < 0 ? -(int64_t)d->days : d->days;
	int64_t nanos = d->nanos < 0 ? -d->nanos : d->nanos;
	size_t mark = out->len;
	int rc = (d->months < 0 || d->days < 0 || d->nanos < 0) &&
		 buf_append(out, "-", 1);
	rc = rc || put_unit(out, &months, 12, "y") ||
	     put_unit(out, &months, 1, "mo") || put_unit(out, &days, 1, "d");
	if (nanos)
		rc = rc || put_unit(out, &nanos, NS_HR, "h") ||
		     put_unit(out, &nanos, NS_MIN, "m") ||
		     put_unit(out, &nanos, NS_SEC, "s") ||
		     put_unit(out, &nanos, NS_MS, "ms") ||
		     put_unit(out, &nanos, NS_US, "us") ||
		     put_unit(out, &nanos, 1, "ns");
	if (rc)
		out->len = mark;
	return rc ? -1 : 0;
}

static int serialize_duration(const struct cql_term *t, struct buf *out)
{
	struct storage_duration d;
	if (cql_parse_duration(t->text, t->len, t->negative, &d) != 0)
		return -1;
	return storage_duration_encode(&d, out);
}

/* ---- simple values ------------------------------------------------------- */

static const char *constant_name(enum cql_term_kind k)
{
	switch (k) {
	case CQL_TERM_STRING:
		return "STRING";
	case CQL_TERM_INTEGER:
		return "INTEGER";
	case CQL_TERM_FLOAT:
		return "FLOAT";
	case CQL_TERM_BOOLEAN:
		return "BOOLEAN";
	case CQL_TERM_UUID:
		return "UUID";
	case CQL_TERM_BLOB:
		return "HEX";
	case CQL_TERM_DURATION:
		return "DURATION";
	default:
		return "value";
	}
}

static int invalid_constant_type(const struct cql_term *t, const char *column,
				 const struct storage_type *type)
{
	struct buf tn;
	buf_init(&tn);
	if (storage_type_format(type, &tn) != 0 || buf_put_u8(&tn, 0) != 0) {
		buf_free(&tn);
		return -1;
	}
	int rc;
	if (t->kind == CQL_TERM_LIST || t->kind == CQL_TERM_SET ||
	    t->kind == CQL_TERM_MAP || t->kind == CQL_TERM_TUPLE)
		rc = err_set(ERR_INVALID,
			     "Invalid %s literal for %s of type %s",
			     t->kind == CQL_TERM_LIST  ? "list"
			     : t->kind == CQL_TERM_SET ? "set"
			     : t->kind == CQL_TERM_MAP ? "map"
						       : "tuple",
			     column, (const char *)tn.data);
	else
		rc = err_set(ERR_INVALID,
			     "Invalid %s constant (%s%.*s) for \"%s\" of "
			     "type %s",
			     constant_name(t->kind), t->negative ? "-" : "",
			     (int)(t->len > 60 ? 60 : t->len),
			     t->text ? t->text : "", column,
			     (const char *)tn.data);
	buf_free(&tn);
	return rc;
}

static int invalid_constant(const struct cql_term *t, const char *column,
			    uint16_t kind)
{
	const struct storage_type *st = storage_type_simple(kind);
	if (st)
		return invalid_constant_type(t, column, st);
	return err_set(ERR_INVALID, "Invalid value for \"%s\"", column);
}

static bool valid_utf8(const uint8_t *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = p[i];
		size_t extra;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			extra = 1;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			extra = 2;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			extra = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (i + extra >= n)
			return false; /* truncated sequence */
		for (size_t k = 1; k <= extra; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) ||
		    (extra == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += extra + 1;
	}
	return true;
}

static int serialize_string(const struct cql_term *t, uint16_t kind,
			    struct buf *out)
{
	const uint8_t *p = (const uint8_t *)t->text;
	int64_t v;
	switch (kind) {
	case CQL_TYPE_ASCII:
		for (size_t i = 0; i < t->len; i++)
			if (p[i] & 0x80)
				return err_set(
					ERR_INVALID,
					"Invalid ASCII character in string "
					"literal: java.nio.charset."
					"UnmappableCharacterException: Input "
					"length = %d",
					/* UTF-16 units of the character */
					(p[i] & 0xf8) == 0xf0 ? 2 : 1);
		return buf_append(out, p, t->len);
	case CQL_TYPE_VARCHAR:
		if (!valid_utf8(p, t->len))
			return err_set(ERR_INVALID, "Invalid UTF-8 bytes in "
						    "string literal");
		return buf_append(out, p, t->len);
	case CQL_TYPE_TIMESTAMP:
		if (cql_parse_timestamp(t->text, t->len, &v) != 0)
			return -1;
		return buf_put_be64(out, (uint64_t)v);
	case CQL_TYPE_DATE:
		if (cql_parse_date(t->text, t->len, &v) != 0)
			return -1;
		if (v + DATE_EPOCH_BIAS < 0 || v + DATE_EPOCH_BIAS > UINT32_MAX)
			return err_set(ERR_INVALID,
				       "Input date %.*s is out of "
				       "range",
				       (int)t->len, t->text);
		return buf_put_be32(out, (uint32_t)(v + DATE_EPOCH_BIAS));
	case CQL_TYPE_TIME:
		if (cql_parse_time(t->text, t->len, &v) != 0)
			return -1;
		return buf_put_be64(out, (uint64_t)v);
	case CQL_TYPE_INET: {
		char host[64];
		uint8_t ip[16];
		snprintf(host, sizeof(host), "%.*s",
			 (int)(t->len > 63 ? 63 : t->len), t->text);
		if (inet_pton(AF_INET, host, ip) == 1)
			return buf_append(out, ip, 4);
		if (inet_pton(AF_INET6, host, ip) == 1)
			return buf_append(out, ip, 16);
		return err_set(ERR_INVALID,
			       "Unable to make inet address from "
			       "'%s'",
			       host);
	}
	default:
		return 1; /* not a string type */
	}
}

static int serialize_integer(const struct cql_term *t, uint16_t kind,
			     struct buf *out)
{
	int64_t v;
	switch (kind) {
	case CQL_TYPE_TINYINT:
		if (parse_fixed_int(t, 8, "byte", &v) != 0)
			return -1;
		return buf_put_u8(out, (uint8_t)v);
	case CQL_TYPE_SMALLINT:
		if (parse_fixed_int(t, 16, "short", &v) != 0)
			return -1;
		return buf_put_be16(out, (uint16_t)v);
	case CQL_TYPE_INT:
		if (parse_fixed_int(t, 32, "int", &v) != 0)
			return -1;
		return buf_put_be32(out, (uint32_t)v);
	case CQL_TYPE_BIGINT:
	case CQL_TYPE_COUNTER:
	case CQL_TYPE_TIMESTAMP:
		if (parse_fixed_int(t, 64, "long", &v) != 0)
			return -1;
		return buf_put_be64(out, (uint64_t)v);
	case CQL_TYPE_TIME:
		if (parse_fixed_int(t, 64, "long", &v) != 0)
			return -1;
		if (v < 0 || v >= NANOS_PER_DAY)
			return err_set(ERR_INVALID,
				       "Input long out of bounds: %lld",
				       (long long)v);
		return buf_put_be64(out, (uint64_t)v);
	case CQL_TYPE_DATE:
		if (parse_fixed_int(t, 64, "long", &v) != 0)
			return -1;
		if (v < 0 || v > UINT32_MAX)
			return err_set(ERR_INVALID,
				       "Unable to make unsigned int "
				       "(for date) from: '%lld'",
				       (long long)v);
		return buf_put_be32(out, (uint32_t)v);
	case CQL_TYPE_VARINT:
		return cql_varint_from_digits(t->text, t->len, t->negative,
					      out);
	case CQL_TYPE_DURATION:
		return serialize_duration(t, out);
	case CQL_TYPE_DECIMAL:
		return serialize_decimal(t, out);
	case CQL_TYPE_FLOAT:
	case CQL_TYPE_DOUBLE:
		return serialize_float(t, kind == CQL_TYPE_DOUBLE, out);
	default:
		return 1;
	}
}

/* A call (now(), blobAsInt(?), ...) or a type-hinted term: its value, if
 * its type may be stored in a `kind` column (client/cql/cql_functions.c). */
static int serialize_function(const struct cql_term *t, uint16_t kind,
			      const char *column, const struct cql_fn_ctx *fn,
			      struct buf *out)
{
	size_t mark = out->len;
	uint16_t result = 0;
	int rc = cql_fn_term_eval(t, fn, NULL, &result, out);
	if (rc < 0) {
		out->len = mark;
		return -1;
	}
	if (cql_fn_value_compatible(kind, result))
		return rc;
	out->len = mark;
	const char *kn = cql_type_name(kind) ? cql_type_name(kind) : "?";
	if (t->kind == CQL_TERM_HINT) {
		char text[200];
		cql_fn_term_text(t, text, sizeof(text));
		return err_set(ERR_INVALID,
			       "Cannot assign value %s to %s of type %s", text,
			       column, kn);
	}
	return err_set(ERR_INVALID,
		       "Type error: cannot assign result of function "
		       "system.%s (type %s) to %s (type %s)",
		       t->text, cql_type_name(result), column, kn);
}

static int serialize_simple(const struct cql_term *t, uint16_t kind,
			    const char *column, const struct cql_fn_ctx *fn,
			    struct buf *out)
{
	size_t mark = out->len;
	int rc;
	switch (t->kind) {
	case CQL_TERM_STRING:
		rc = serialize_string(t, kind, out);
		break;
	case CQL_TERM_INTEGER:
		rc = serialize_integer(t, kind, out);
		break;
	case CQL_TERM_FLOAT:
		rc = kind == CQL_TYPE_FLOAT || kind == CQL_TYPE_DOUBLE
			     ? serialize_float(t, kind == CQL_TYPE_DOUBLE, out)
		     : kind == CQL_TYPE_DECIMAL ? serialize_decimal(t, out)
						: 1;
		break;
	case CQL_TERM_BOOLEAN:
		rc = kind == CQL_TYPE_BOOLEAN
			     ? buf_put_u8(out, t->text[0] == 't' ? 1 : 0)
			     : 1;
		break;
	case CQL_TERM_UUID: {
		uint8_t id[16];
		if (kind != CQL_TYPE_UUID && kind != CQL_TYPE_TIMEUUID) {
			rc = 1;
			break;
		}
		if (t->len != UUID_TEXT_LEN || uuid_parse_n(t->text, id) != 0)
			return err_set(ERR_INVALID,
				       "Unable to make UUID from "
				       "'%.*s'",
				       (int)t->len, t->text);
		if (kind == CQL_TYPE_TIMEUUID && (id[6] >> 4) != 1)
			return err_set(ERR_INVALID,
				       "Invalid version for TimeUUID type.");
		rc = buf_append(out, id, 16);
		break;
	}
	case CQL_TERM_BLOB: {
		if (kind != CQL_TYPE_BLOB) {
			rc = 1;
			break;
		}
		if (t->len % 2)
			return err_set(ERR_INVALID,
				       "cannot parse '0x%.*s' as hex bytes",
				       (int)(t->len > 40 ? 40 : t->len),
				       t->text);
		uint8_t *dst = buf_extend(out, t->len / 2);
		if (!dst && t->len)
			return -1;
		for (size_t i = 0; i < t->len / 2; i++)
			dst[i] = (uint8_t)(hex_digit(t->text[2 * i]) << 4 |
					   hex_digit(t->text[2 * i + 1]));
		rc = 0;
		break;
	}
	case CQL_TERM_DURATION:
		rc = kind == CQL_TYPE_DURATION ? serialize_duration(t, out) : 1;
		break;
	case CQL_TERM_FUNCTION:
	case CQL_TERM_HINT:
		return serialize_function(t, kind, column, fn, out);
	default:
		rc = 1;
	}
	if (rc == 1) {
		out->len = mark;
		return invalid_constant(t, column, kind);
	}
	if (rc != 0)
		out->len = mark;
	return rc;
}

/* ---- collections, tuples, vectors ---------------------------------------- */

struct elem {
	size_t key_off, key_len;
	size_t val_off, val_len;
	size_t order; /* position in the literal: later keys win */
};

struct sort_ctx {
	const uint8_t *base;
	const struct storage_type *type;
	cql_value_cmp_fn cmp;
};

static int key_cmp(const struct elem *a, const struct elem *b,
		   const struct sort_ctx *c)
{
	return c->cmp(c->type, c->base + a->key_off, a->key_len,
		      c->base + b->key_off, b->key_len);
}

/* Key order, then literal order, so equal keys sit in the order written. */
static int elem_cmp(const void *x, const void *y, void *arg)
{
	const struct elem *a = x, *b = y;
	int r = key_cmp(a, b, arg);
	if (r)
		return r;
	return a->order < b->order ? -1 : a->order > b->order;
}

static int serialize_any(const struct cql_term *t,
			 const struct storage_type *type, const char *column,
			 const struct cql_fn_ctx *fn, cql_value_cmp_fn cmp,
			 struct buf *out);

/* What the serializers below return for an unset value: a marker bound to
 * unset, or a literal holding one where Cassandra 4.1's DelayedValue.bind
 * makes the whole literal UNSET_VALUE (a list or set element, a map
 * value). */
#define SER_UNSET 2

/* A marker inside a collection, tuple, vector or UDT literal ([?, ?],
 * {?: ?}, (?, ?), {f: ?}): its bound bytes, checked against the element
 * type (Lists/Sets/Maps/Tuples/UserTypes.DelayedValue.bind). A null is
 * refused in collections, a null field or component kept; an unset one
 * is SER_UNSET, for the literal around it to decide. */
static int serialize_inner_bind(const struct cql_term *t,
				const struct storage_type *type,
				const struct cql_fn_ctx *fn, struct buf *out,
				bool null_ok)
{
	if (!fn || !fn->binds || t->bind_index < 0 ||
	    (size_t)t->bind_index >= fn->nbinds)
		return err_set(ERR_INVALID, "No value given for bind marker %d",
			       t->bind_index);
	const struct cql_value *v = &fn->binds[t->bind_index];
	if (v->len == CQL_VALUE_UNSET)
		return SER_UNSET;
	if (v->len < 0) {
		if (null_ok)
			return 1;
		return err_set(ERR_INVALID,
			       "null is not supported inside collections");
	}
	if (storage_value_validate(type, v->ptr, (size_t)v->len) != 0)
		return -1;
	return buf_append(out, v->ptr, (size_t)v->len) != 0
		       ? err_set(ERR_NOMEM, "out of memory")
		       : 0;
}

/* An element inside a collection, tuple or vector: no null unless
 * null_ok (a tuple component, a UDT field). */
static int serialize_inner(const struct cql_term *t,
			   const struct storage_type *type, const char *column,
			   const struct cql_fn_ctx *fn, cql_value_cmp_fn cmp,
			   struct buf *out, bool null_ok)
{
	if (t->kind == CQL_TERM_NULL) {
		if (null_ok)
			return 1;
		return err_set(ERR_INVALID,
			       "null is not supported inside collections");
	}
	if (t->kind == CQL_TERM_BIND)
		return serialize_inner_bind(t, type, fn, out, null_ok);
	return serialize_any(t, type, column, fn, cmp, out);
}

static int serialize_collection(const struct cql_term *t,
				const struct storage_type *type,
				const char *column, const struct cql_fn_ctx *fn,
				cql_value_cmp_fn cmp, struct buf *out)
{
	bool is_map = type->kind == CQL_TYPE_MAP;
	bool empty_braces = t->kind == CQL_TERM_MAP && t->count == 0;
	bool shape_ok =
		(type->kind == CQL_TYPE_LIST && t->kind == CQL_TERM_LIST) ||
		(type->kind == CQL_TYPE_SET &&
		 (t->kind == CQL_TERM_SET || empty_braces)) ||
		(is_map && t->kind == CQL_TERM_MAP);
	if (!shape_ok)
		return invalid_constant_type(t, column, type);
	size_t n = is_map ? t->count / 2 : t->count;
	struct buf tmp;
	struct elem *elems = calloc(n ? n : 1, sizeof(*elems));
	buf_init(&tmp);
	if (!elems)
		return err_set(ERR_NOMEM, "out of memory");
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct cql_term *k = t->items[is_map ? 2 * i : i];
		const struct cql_term *v = is_map ? t->items[2 * i + 1] : NULL;
		if (k->kind == CQL_TERM_NULL ||
		    (v && v->kind == CQL_TERM_NULL)) {
			rc = err_set(
				ERR_INVALID,
				"null is not supported inside collections");
			break;
		}
		elems[i].order = i;
		elems[i].key_off = tmp.len;
		rc = serialize_inner(k, type->sub[0], column, fn, cmp, &tmp,
				     false);
		elems[i].key_len = tmp.len - elems[i].key_off;
		if (rc == SER_UNSET && is_map)
			rc = err_set(ERR_INVALID, "unset value is not "
						  "supported for map keys");
		if (rc == 0 && v) {
			elems[i].val_off = tmp.len;
			rc = serialize_inner(v, type->sub[1], column, fn, cmp,
					     &tmp, false);
			elems[i].val_len = tmp.len - elems[i].val_off;
		}
	}
	if (rc == SER_UNSET) { /* Lists/Sets/Maps.DelayedValue.bind */
		free(elems);
		buf_free(&tmp);
		return SER_UNSET;
	}
	size_t kept = n;
	/* elements of empty values only: nothing was allocated */
	const uint8_t *base = tmp.data ? tmp.data : (const uint8_t *)"";
	if (rc == 0 && type->kind != CQL_TYPE_LIST && n > 1) {
		struct sort_ctx ctx = {base, type->sub[0],
				       cmp ? cmp : storage_type_cmp};
		/* Sort, then keep the last of each run of equal keys: for maps
		 * the later value wins, as in Cassandra. */
		qsort_r(elems, n, sizeof(*elems), elem_cmp, &ctx);
		kept = 0;
		for (size_t i = 0; i < n; i++) {
			if (kept &&
			    key_cmp(&elems[kept - 1], &elems[i], &ctx) == 0)
				elems[kept - 1] = elems[i];
			else
				elems[kept++] = elems[i];
		}
	}
	size_t mark = out->len;
	if (rc == 0)
		rc = buf_put_be32(out, (uint32_t)kept);
	for (size_t i = 0; rc == 0 && i < kept; i++) {
		rc = buf_put_be32(out, (uint32_t)elems[i].key_len) ||
		     buf_append(out, base + elems[i].key_off, elems[i].key_len);
		if (rc == 0 && is_map)
			rc = buf_put_be32(out, (uint32_t)elems[i].val_len) ||
			     buf_append(out, base + elems[i].val_off,
					elems[i].val_len);
	}
	if (rc != 0)
		out->len = mark;
	free(elems);
	buf_free(&tmp);
	return rc ? -1 : 0;
}

/* (a, b, ...) for tuple<A, B, ...>: Cassandra's Tuples.Literal allows
 * fewer components than the type has (the rest are null), not more. */
static int serialize_tuple(const struct cql_term *t,
			   const struct storage_type *type, const char *column,
			   const struct cql_fn_ctx *fn, cql_value_cmp_fn cmp,
			   struct buf *out)
{
	if (t->kind != CQL_TERM_TUPLE)
		return invalid_constant_type(t, column, type);
	if (t->count > type->count) {
		struct buf tn;
		buf_init(&tn);
		int rc = storage_type_format(type, &tn) || buf_put_u8(&tn, 0);
		rc = rc ? -1
			: err_set(ERR_INVALID,
				  "Invalid tuple literal for %s: too many "
				  "elements. Type %s expects %u but got %zu",
				  column, (const char *)tn.data, type->count,
				  t->count);
		buf_free(&tn);
		return rc;
	}
	size_t mark = out->len;
	for (size_t i = 0; i < t->count; i++) {
		size_t at = out->len;
		if (buf_put_be32(out, 0) != 0)
			goto fail;
		int rc = serialize_inner(t->items[i], type->sub[i], column, fn,
					 cmp, out, true);
		if (rc == SER_UNSET) /* Tuples.DelayedValue.bindInternal */
			rc = err_set(ERR_INVALID,
				     "Invalid unset value for tuple field "
				     "number %zu",
				     i);
		if (rc < 0)
			goto fail;
		uint32_t n =
			rc == 1 ? UINT32_MAX : (uint32_t)(out->len - at - 4);
		be32_store(out->data + at, n);
	}
	return 0;
fail:
	out->len = mark;
	return -1;
}

/* [a, b, c] for vector<T, 3>: exactly the dimension, no nulls; packed
 * when T has a fixed length, else each element after its vint length. */
static int serialize_vector(const struct cql_term *t,
			    const struct storage_type *type, const char *column,
			    const struct cql_fn_ctx *fn, cql_value_cmp_fn cmp,
			    struct buf *out)
{
	if (t->kind != CQL_TERM_LIST)
		return invalid_constant_type(t, column, type);
	if (t->count != type->dimension)
		return err_set(
			ERR_INVALID,
			"Invalid vector literal for %s of type "
			"vector<%s, %u>; expected %u elements, but "
			"given %zu",
			column,
			storage_type_kind_name(type->sub[0]->kind)
				? storage_type_kind_name(type->sub[0]->kind)
				: "?",
			type->dimension, type->dimension, t->count);
	bool fixed = storage_type_fixed_length(type->sub[0]) != 0;
	size_t mark = out->len;
	struct buf el;
	buf_init(&el);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < t->count; i++) {
		buf_clear(&el);
		rc = serialize_inner(t->items[i], type->sub[0], column, fn, cmp,
				     &el, true);
		/* Cassandra 5.0's Vectors.DelayedValue.bind: null and unset
		 * elements alike */
		if (rc == 1 || rc == SER_UNSET)
			rc = err_set(ERR_INVALID,
				     "null is not supported inside vectors");
		if (rc == 0 && fixed &&
		    el.len != storage_type_fixed_length(type->sub[0]))
			rc = err_set(ERR_INVALID,
				     "Element at index %zu is null", i);
		if (rc == 0)
			rc = (!fixed && storage_uvint_put(out, el.len)) ||
			     buf_append(out,
					el.data ? el.data : (const uint8_t *)"",
					el.len);
	}
	buf_free(&el);
	if (rc)
		out->len = mark;
	return rc ? -1 : 0;
}

/* {f: a, g: b} for a user type (UserTypes.Literal): each field named once
 * and known to the type; the value holds every field in the type's order,
 * the ones not given null. */
static int serialize_udt(const struct cql_term *t,
			 const struct storage_type *type, const char *column,
			 const struct cql_fn_ctx *fn, cql_value_cmp_fn cmp,
			 struct buf *out)
{
	if (t->kind != CQL_TERM_UDT)
		return invalid_constant_type(t, column, type);
	for (size_t i = 0; i < t->count; i++) {
		size_t f = 0;
		while (f < type->count &&
		       strcmp(type->field_names[f], t->names[i]) != 0)
			f++;
		if (f == type->count)
			return err_set(ERR_INVALID,
				       "Unknown field '%s' in value of user "
				       "defined type %s",
				       t->names[i], type->name);
		for (size_t j = 0; j < i; j++)
			if (strcmp(t->names[j], t->names[i]) == 0)
				return err_set(ERR_INVALID,
					       "Duplicate field '%s' in value "
					       "of user defined type %s",
					       t->names[i], type->name);
	}
	size_t mark = out->len;
	for (size_t f = 0; f < type->count; f++) {
		const struct cql_term *v = NULL;
		for (size_t i = 0; i < t->count && !v; i++)
			if (strcmp(type->field_names[f], t->names[i]) == 0)
				v = t->items[i];
		size_t at = out->len;
		if (buf_put_be32(out, UINT32_MAX) != 0)
			goto fail;
		if (!v)
			continue;
		int rc = serialize_inner(v, type->sub[f], column, fn, cmp, out,
					 true);
		/* UserTypes.DelayedValue.bindInternal: refused in a frozen
		 * value; a non-frozen one keeps the unset buffer, which is
		 * empty, and UserTypes.Setter writes it as the field's cell */
		if (rc == SER_UNSET && type->frozen)
			rc = err_set(ERR_INVALID,
				     "Invalid unset value for field '%s' of "
				     "user defined type %s",
				     type->field_names[f], type->name);
		if (rc == SER_UNSET)
			rc = 0;
		if (rc < 0)
			goto fail;
		if (rc == 0)
			be32_store(out->data + at,
				   (uint32_t)(out->len - at - 4));
	}
	return 0;
fail:
	out->len = mark;
	return -1;
}

static int serialize_any(const struct cql_term *t,
			 const struct storage_type *type, const char *column,
			 const struct cql_fn_ctx *fn, cql_value_cmp_fn cmp,
			 struct buf *out)
{
	switch (type->kind) {
	case CQL_TYPE_LIST:
	case CQL_TYPE_SET:
	case CQL_TYPE_MAP:
		return serialize_collection(t, type, column, fn, cmp, out);
	case CQL_TYPE_TUPLE:
		return serialize_tuple(t, type, column, fn, cmp, out);
	case STORAGE_TYPE_VECTOR:
		return serialize_vector(t, type, column, fn, cmp, out);
	case CQL_TYPE_UDT:
		return serialize_udt(t, type, column, fn, cmp, out);
	default:
		return serialize_simple(t, type->kind, column, fn, out);
	}
}

int cql_term_serialize(const struct cql_term *t,
		       const struct storage_type *type, const char *column,
		       const struct cql_fn_ctx *fn, cql_value_cmp_fn cmp,
		       struct buf *out)
{
	int rc = cql_term_serialize_or_unset(t, type, column, fn, cmp, out);
	if (rc == SER_UNSET)
		return err_set(ERR_INVALID, "Invalid unset value for column %s",
			       column);
	return rc;
}

int cql_term_serialize_or_unset(const struct cql_term *t,
				const struct storage_type *type,
				const char *column, const struct cql_fn_ctx *fn,
				cql_value_cmp_fn cmp, struct buf *out)
{
	if (t->kind == CQL_TERM_NULL)
		return 1;
	if (t->kind == CQL_TERM_BIND)
		return err_set(ERR_INVALID, "bind marker for %s has no value",
			       column);
	if (t->kind == CQL_TERM_FUNCTION) {
		int rc = cql_json_fn_term(t, type, fn, out);
		if (rc != 2)
			return rc;
	}
	if (t->kind == CQL_TERM_UDT && type->kind != CQL_TYPE_UDT) {
		struct buf tn;
		buf_init(&tn);
		int rc = storage_type_format(type, &tn) || buf_put_u8(&tn, 0);
		rc = rc ? -1
			: err_set(ERR_INVALID,
				  "Invalid user type literal for %s of type %s",
				  column, (const char *)tn.data);
		buf_free(&tn);
		return rc;
	}
	return serialize_any(t, type, column, fn, cmp, out);
}

int cql_put_string_literal(struct buf *b, const char *s)
{
	if (buf_put_u8(b, '\'') != 0)
		return -1;
	for (const char *p = s; *p; p++)
		if ((*p == '\'' && buf_put_u8(b, '\'') != 0) ||
		    buf_put_u8(b, (uint8_t)*p) != 0)
			return -1;
	return buf_put_u8(b, '\'');
}
