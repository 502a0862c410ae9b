/*
 * Simple types: validation and Cassandra's per-type value orders.
 * (Composite values: type_values.c; type nodes: type_tree.c.)
 */
#include "storage/types.h"

#include "common/buf.h"
#include "common/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Fixed width of a simple type, 0 when variable. */
static size_t fixed_width(uint16_t kind)
{
	switch (kind) {
	case STORAGE_TYPE_BIGINT:
	case STORAGE_TYPE_COUNTER:
	case STORAGE_TYPE_TIMESTAMP:
	case STORAGE_TYPE_TIME:
	case STORAGE_TYPE_DOUBLE:
		return 8;
	case STORAGE_TYPE_INT:
	case STORAGE_TYPE_FLOAT:
	case STORAGE_TYPE_DATE:
		return 4;
	case STORAGE_TYPE_SMALLINT:
		return 2;
	case STORAGE_TYPE_TINYINT:
	case STORAGE_TYPE_BOOLEAN:
		return 1;
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID:
		return 16;
	default:
		return 0;
	}
}

/* Cassandra's UTF8Serializer state machine, byte for byte: not strict
 * RFC 3629. It accepts C0 80 (modified UTF-8's NUL), UTF-16 surrogates
 * (ED A0..BF xx), F5..F7 leads, and after an E0 or F0 lead checks only
 * that the second byte is not 80..9F (E0) or 80..8F (F0); it refuses C1,
 * F8..FF, a stray continuation byte, and a truncated sequence. A stricter
 * validator would refuse values Cassandra stores. */
static bool cassandra_utf8(const uint8_t *s, size_t n)
{
	enum {
		START,
		TWO,
		TWO_80,
		THREE_A0BF,
		THREE_80BF_1,
		THREE_80BF_2,
		FOUR_90BF,
		FOUR_80BF_3,
	} state = START;
	for (size_t i = 0; i < n; i++) {
		uint8_t b = s[i];
		switch (state) {
		case START:
			if (b < 0x80)
				break;
			if ((b & 0xe0) == 0xc0) { /* C0..DF */
				if (b == 0xc0)
					state = TWO_80;
				else if ((b & 0x1e) == 0)
					return false; /* C1 */
				else
					state = TWO;
			} else if ((b & 0xf0) == 0xe0) { /* E0..EF */
				state = b == 0xe0 ? THREE_A0BF : THREE_80BF_2;
			} else if ((b & 0xf8) == 0xf0) { /* F0..F7 */
				state = b == 0xf0 ? FOUR_90BF : FOUR_80BF_3;
			} else {
				return false;
			}
			break;
		case TWO:
			if ((b & 0xc0) != 0x80)
				return false;
			state = START;
			break;
		case TWO_80:
			if (b != 0x80)
				return false;
			state = START;
			break;
		case THREE_A0BF:
			if ((b & 0xe0) == 0x80)
				return false;
			state = THREE_80BF_1;
			break;
		case THREE_80BF_1:
			if ((b & 0xc0) != 0x80)
				return false;
			state = START;
			break;
		case THREE_80BF_2:
			if ((b & 0xc0) != 0x80)
				return false;
			state = THREE_80BF_1;
			break;
		case FOUR_90BF:
			if ((b & 0x30) == 0)
				return false;
			state = THREE_80BF_2;
			break;
		case FOUR_80BF_3:
			if ((b & 0xc0) != 0x80)
				return false;
			state = THREE_80BF_2;
			break;
		}
	}
	return state == START;
}

bool storage_utf8_valid(const uint8_t *s, size_t n)
{
	return cassandra_utf8(s, n);
}

int storage_type_validate(uint16_t kind, const uint8_t *v, size_t len)
{
	switch (kind) {
	case STORAGE_TYPE_ASCII:
		for (size_t i = 0; i < len; i++)
			if (v[i] & 0x80)
				return err_set(ERR_INVALID,
					       "Invalid byte for ascii: %d",
					       (int)(int8_t)v[i]);
		return 0;
	case STORAGE_TYPE_TEXT:
		if (!cassandra_utf8(v, len))
			return err_set(ERR_INVALID, "String didn't validate.");
		return 0;
	case STORAGE_TYPE_BLOB:
	case STORAGE_TYPE_VARINT:
		return 0;
	case STORAGE_TYPE_BOOLEAN:
		if (len > 1)
			return err_set(ERR_INVALID,
				       "Expected 1 or 0 byte value (%zu)", len);
		return 0;
	case STORAGE_TYPE_INT:
		if (len != 4 && len != 0)
			return err_set(ERR_INVALID,
				       "Expected 4 or 0 byte int (%zu)", len);
		return 0;
	case STORAGE_TYPE_BIGINT:
		if (len != 8 && len != 0)
			return err_set(ERR_INVALID,
				       "Expected 8 or 0 byte long (%zu)", len);
		return 0;
	case STORAGE_TYPE_SMALLINT:
		if (len != 2)
			return err_set(ERR_INVALID,
				       "Expected 2 bytes for a smallint (%zu)",
				       len);
		return 0;
	case STORAGE_TYPE_TINYINT:
		if (len != 1)
			return err_set(ERR_INVALID,
				       "Expected 1 byte for a tinyint (%zu)",
				       len);
		return 0;
	case STORAGE_TYPE_FLOAT:
		if (len != 4 && len != 0)
			return err_set(ERR_INVALID,
				       "Expected 4 or 0 byte value for a float "
				       "(%zu)",
				       len);
		return 0;
	case STORAGE_TYPE_DOUBLE:
		if (len != 8 && len != 0)
			return err_set(
				ERR_INVALID,
				"Expected 8 or 0 byte value for a double "
				"(%zu)",
				len);
		return 0;
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID:
		if (len != 16 && len != 0)
			return err_set(ERR_INVALID,
				       "UUID should be 16 or 0 bytes (%zu)",
				       len);
		if (kind == STORAGE_TYPE_TIMEUUID && len &&
		    (v[6] & 0xf0) != 0x10)
			return err_set(ERR_INVALID,
				       "Invalid version for TimeUUID type.");
		return 0;
	case STORAGE_TYPE_INET:
		if (len != 0 && len != 4 && len != 16) {
			static const char hex[] = "0123456789abcdef";
			char text[2 * 64 + 4];
			size_t n = len < 64 ? len : 64, k = 0;
			for (size_t i = 0; i < n; i++) {
				text[k++] = hex[v[i] >> 4];
				text[k++] = hex[v[i] & 15];
			}
			if (n < len)
				text[k++] = '.', text[k++] = '.',
				text[k++] = '.';
			text[k] = '\0';
			return err_set(ERR_INVALID,
				       "Expected 4 or 16 byte inetaddress; got "
				       "%s",
				       text);
		}
		return 0;
	case STORAGE_TYPE_DECIMAL:
		if (len != 0 && len < 4)
			return err_set(ERR_INVALID,
				       "Expected 0 or at least 4 bytes (%zu)",
				       len);
		return 0;
	case STORAGE_TYPE_TIMESTAMP:
		if (len != 8 && len != 0)
			return err_set(
				ERR_INVALID,
				"Expected 8 or 0 byte long for date (%zu)",
				len);
		return 0;
	case STORAGE_TYPE_DATE:
		if (len != 4)
			return err_set(ERR_INVALID,
				       "Expected 4 byte long for date (%zu)",
				       len);
		return 0;
	case STORAGE_TYPE_TIME:
		if (len != 8)
			return err_set(ERR_INVALID,
				       "Expected 8 byte long for time (%zu)",
				       len);
		return 0;
	case STORAGE_TYPE_COUNTER:
		if (len != 8 && len != 0)
			return err_set(ERR_INVALID,
				       "Expected 8 or 0 byte long (%zu)", len);
		return 0;
	case STORAGE_TYPE_DURATION: {
		if (len < 3)
			return err_set(ERR_INVALID,
				       "Expected at least 3 bytes for a "
				       "duration (%zu)",
				       len);
		int64_t p[3];
		size_t off = 0;
		for (int i = 0; i < 3; i++) {
			size_t n = storage_vint_read(v + off, len - off, &p[i]);
			if (n == 0)
				return err_set(ERR_INVALID,
					       "Not enough bytes to read a "
					       "duration");
			off += n;
		}
		if (p[0] != (int32_t)p[0])
			return err_set(ERR_INVALID,
				       "The duration months must be a 32 bits "
				       "integer but was: %lld",
				       (long long)p[0]);
		if (p[1] != (int32_t)p[1])
			return err_set(ERR_INVALID,
				       "The duration days must be a 32 bits "
				       "integer but was: %lld",
				       (long long)p[1]);
		if (!((p[0] >= 0 && p[1] >= 0 && p[2] >= 0) ||
		      (p[0] <= 0 && p[1] <= 0 && p[2] <= 0)))
			return err_set(ERR_INVALID,
				       "The duration months, days and "
				       "nanoseconds must be all of the same "
				       "sign (%lld, %lld, %lld)",
				       (long long)p[0], (long long)p[1],
				       (long long)p[2]);
		return 0;
	}
	default:
		return err_set(ERR_INVALID, "unknown type 0x%04x", kind);
	}
}

static int bytes_cmp(const uint8_t *a, size_t alen, const uint8_t *b,
		     size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = n ? memcmp(a, b, n) : 0;
	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

static int sign_of(int64_t v)
{
	return (v > 0) - (v < 0);
}

static int64_t load_signed(const uint8_t *p, size_t n)
{
	uint64_t v = (p[0] & 0x80) ? UINT64_MAX : 0;
	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return (int64_t)v;
}

/* Two's complement big-endian integers of any length. */
static int varint_cmp(const uint8_t *a, size_t alen, const uint8_t *b,
		      size_t blen)
{
	int na = a[0] & 0x80, nb = b[0] & 0x80;
	if (na != nb)
		return na ? -1 : 1;
	uint8_t fill = na ? 0xff : 0x00;
	/* Strip redundant sign bytes so lengths compare magnitudes. */
	while (alen > 1 && a[0] == fill && (a[1] & 0x80) == (fill & 0x80)) {
		a++;
		alen--;
	}
	while (blen > 1 && b[0] == fill && (b[1] & 0x80) == (fill & 0x80)) {
		b++;
		blen--;
	}
	if (alen != blen)
		return (alen < blen) == !na ? -1 : 1;
	return memcmp(a, b, alen) < 0 ? -1 : memcmp(a, b, alen) > 0;
}

/* Magnitude of a two's complement varint into little-endian 32-bit limbs.
 * Returns limb count, or 0 when it does not fit. */
static size_t to_magnitude(const uint8_t *p, size_t n, bool neg,
			   uint32_t *limbs, size_t max_limbs)
{
	if ((n + 3) / 4 + 1 > max_limbs)
		return 0;
	size_t count = (n + 3) / 4 + 1;
	memset(limbs, 0, count * sizeof(*limbs));
	for (size_t i = 0; i < n; i++) {
		uint8_t byte = neg ? (uint8_t)~p[n - 1 - i] : p[n - 1 - i];
		limbs[i / 4] |= (uint32_t)byte << (8 * (i % 4));
	}
	if (neg) { /* ~x + 1 */
		for (size_t i = 0; i < count; i++)
			if (++limbs[i] != 0)
				break;
	}
	return count;
}

static size_t mul10(uint32_t *limbs, size_t count, size_t max_limbs)
{
	uint64_t carry = 0;
	for (size_t i = 0; i < count; i++) {
		uint64_t v = (uint64_t)limbs[i] * 10 + carry;
		limbs[i] = (uint32_t)v;
		carry = v >> 32;
	}
	if (carry) {
		if (count == max_limbs)
			return 0;
		limbs[count++] = (uint32_t)carry;
	}
	return count;
}

static int limbs_cmp(const uint32_t *a, size_t an, const uint32_t *b, size_t bn)
{
	while (an && a[an - 1] == 0)
		an--;
	while (bn && b[bn - 1] == 0)
		bn--;
	if (an != bn)
		return an < bn ? -1 : 1;
	for (size_t i = an; i-- > 0;)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

static double decimal_approx(const uint8_t *p, size_t n, int32_t scale)
{
	double v = 0;
	for (size_t i = 0; i < n; i++)
		v = v * 256 + p[i];
	if (p[0] & 0x80)
		v -= pow(256.0, (double)n);
	return v * pow(10.0, -(double)scale);
}

static int varint_is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* decimal: 4-byte scale then a varint unscaled value; value = u * 10^-s. */
static int decimal_cmp(const uint8_t *a, size_t alen, const uint8_t *b,
		       size_t blen)
{
	if (alen < 5 || blen < 5)
		return bytes_cmp(a, alen, b, blen);
	int32_t sa = (int32_t)load_signed(a, 4),
		sb = (int32_t)load_signed(b, 4);
	const uint8_t *ua = a + 4, *ub = b + 4;
	size_t na = alen - 4, nb = blen - 4;
	int siga = varint_is_zero(ua, na) ? 0 : (ua[0] & 0x80) ? -1 : 1;
	int sigb = varint_is_zero(ub, nb) ? 0 : (ub[0] & 0x80) ? -1 : 1;
	if (siga != sigb || siga == 0)
		return siga < sigb ? -1 : siga > sigb;
	enum { MAXL = 48 };
	uint32_t la[MAXL], lb[MAXL];
	size_t ca = to_magnitude(ua, na, siga < 0, la, MAXL);
	size_t cb = to_magnitude(ub, nb, sigb < 0, lb, MAXL);
	int64_t diff = (int64_t)sa - sb;
	/* Scale the one with the smaller scale up to the other's. */
	for (int64_t i = 0; ca && cb && i < (diff < 0 ? -diff : diff); i++) {
		if (diff > 0)
			cb = mul10(lb, cb, MAXL);
		else
			ca = mul10(la, ca, MAXL);
	}
	int c;
	if (ca && cb) {
		c = limbs_cmp(la, ca, lb, cb);
	} else {
		double da = decimal_approx(ua, na, sa);
		double db = decimal_approx(ub, nb, sb);
		return da < db ? -1 : da > db;
	}
	return siga < 0 ? -c : c;
}

/* Float.compare / Double.compare order as an unsigned key. */
static uint64_t float_key(const uint8_t *p, size_t n)
{
	uint64_t bits = 0;
	for (size_t i = 0; i < n; i++)
		bits = bits << 8 | p[i];
	uint64_t sign = 1ULL << (8 * n - 1);
	bool nan;
	if (n == 4) {
		float f;
		uint32_t b32 = (uint32_t)bits;
		memcpy(&f, &b32, 4);
		nan = isnan(f);
		if (nan)
			return UINT64_MAX; /* all NaNs are equal and last */
	} else {
		double d;
		memcpy(&d, &bits, 8);
		nan = isnan(d);
		if (nan)
			return UINT64_MAX;
	}
	return (bits & sign) ? ~bits & (sign | (sign - 1)) : bits | sign;
}

static uint64_t uuid_time(const uint8_t *p)
{
	uint64_t msb = 0;
	for (int i = 0; i < 8; i++)
		msb = msb << 8 | p[i];
	/* time_low(32) time_mid(16) version+time_hi(16) -> hi, mid, low */
	return (msb << 48) | ((msb << 16) & 0xFFFF00000000ULL) | (msb >> 32);
}

/* The low half compared as signed bytes, as TimeUUIDType does. */
static int signed_bytes_cmp(const uint8_t *a, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return (int8_t)a[i] < (int8_t)b[i] ? -1 : 1;
	return 0;
}

static int uuid_cmp(uint16_t kind, const uint8_t *a, const uint8_t *b)
{
	int va = a[6] >> 4, vb = b[6] >> 4;
	if (kind == STORAGE_TYPE_UUID && va != vb)
		return va < vb ? -1 : 1;
	if (kind == STORAGE_TYPE_TIMEUUID || va == 1) {
		uint64_t ta = uuid_time(a), tb = uuid_time(b);
		if (ta != tb)
			return ta < tb ? -1 : 1;
		if (kind == STORAGE_TYPE_TIMEUUID)
			return signed_bytes_cmp(a + 8, b + 8, 8);
		return memcmp(a + 8, b + 8, 8) < 0
			       ? -1
			       : memcmp(a + 8, b + 8, 8) > 0;
	}
	int c = memcmp(a, b, 16);
	return (c > 0) - (c < 0);
}

int storage_value_cmp(uint16_t kind, const uint8_t *a, size_t alen,
		      const uint8_t *b, size_t blen)
{
	if (alen == 0 || blen == 0)
		return (alen != 0) - (blen != 0);
	size_t w = fixed_width(kind);
	if (w && (alen != w || blen != w))
		return bytes_cmp(a, alen, b, blen);
	switch (kind) {
	case STORAGE_TYPE_TINYINT:
	case STORAGE_TYPE_SMALLINT:
	case STORAGE_TYPE_INT:
	case STORAGE_TYPE_BIGINT:
	case STORAGE_TYPE_COUNTER:
	case STORAGE_TYPE_TIMESTAMP:
	case STORAGE_TYPE_TIME: {
		int64_t x = load_signed(a, w), y = load_signed(b, w);
		return sign_of((x > y) - (x < y));
	}
	case STORAGE_TYPE_VARINT:
		return varint_cmp(a, alen, b, blen);
	case STORAGE_TYPE_DECIMAL:
		return decimal_cmp(a, alen, b, blen);
	case STORAGE_TYPE_FLOAT:
	case STORAGE_TYPE_DOUBLE: {
		uint64_t x = float_key(a, w), y = float_key(b, w);
		return (x > y) - (x < y);
	}
	case STORAGE_TYPE_UUID:
	case STORAGE_TYPE_TIMEUUID:
		return uuid_cmp(kind, a, b);
	default: /* date is unsigned; text, blob, inet, boolean bytes */
		return sign_of(bytes_cmp(a, alen, b, blen));
	}
}
