/*
 * The JSON text half of cql_json.h: the parser (Jackson's rules and
 * messages), quoting, Java's toString of parsed values and of doubles, and
 * INSERT JSON's values map. Per-type conversions are in cql_json_format.c
 * (value -> JSON) and cql_json_decode.c (JSON -> value).
 */
#include "client/cql/cql_json.h"

#include "common/arena.h"
#include "common/err.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parser -------------------------------------------------------------- */

struct parser {
	const char *s, *p, *end;
	struct arena *a;
};

/* Items of one container while it is read: a list in the arena, copied to
 * an array when the container closes. */
struct item {
	struct cql_json v;
	struct item *next;
};

/* Jackson's description of a character: 'c' (code N), with the hex code
 * past 255 and CTRL-CHAR for controls. */
static void char_desc(const struct parser *ps, char *dst, size_t cap)
{
	const unsigned char *q = (const unsigned char *)ps->p;
	size_t left = (size_t)(ps->end - ps->p);
	unsigned cp = q[0];
	int n = 1;
	if (cp >= 0xc0 && left >= 2) {
		if (cp < 0xe0) {
			cp = ((cp & 0x1fu) << 6) | (q[1] & 0x3fu);
			n = 2;
		} else if (cp < 0xf0 && left >= 3) {
			cp = ((cp & 0x0fu) << 12) | ((q[1] & 0x3fu) << 6) |
			     (q[2] & 0x3fu);
			n = 3;
		} else if (left >= 4) {
			cp = ((cp & 0x07u) << 18) | ((q[1] & 0x3fu) << 12) |
			     ((q[2] & 0x3fu) << 6) | (q[3] & 0x3fu);
			n = 4;
		}
	}
	if (cp < 32)
		snprintf(dst, cap, "(CTRL-CHAR, code %u)", cp);
	else if (cp > 255)
		snprintf(dst, cap, "'%.*s' (code %u / 0x%x)", n, ps->p, cp, cp);
	else
		snprintf(dst, cap, "'%.*s' (code %u)", n, ps->p, cp);
}

static int fail(const struct parser *ps, const char *exc, const char *fmt,
		const char *arg)
{
	int line = 1, col = 1;
	for (const char *q = ps->s; q < ps->p && q < ps->end; q++) {
		if (*q == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	/* fmt holds one %s, for arg */
	char msg[300];
	const char *hole = strstr(fmt, "%s");
	if (hole)
		snprintf(msg, sizeof(msg), "%.*s%s%s", (int)(hole - fmt), fmt,
			 arg, hole + 2);
	else
		snprintf(msg, sizeof(msg), "%s", fmt);
	size_t n = (size_t)(ps->end - ps->s);
	return err_set(ERR_INVALID,
		       "com.fasterxml.jackson.%s: %s\n at [Source: "
		       "(String)\"%.*s\"%s; line: %d, column: %d]",
		       exc, msg, (int)(n > 200 ? 200 : n), ps->s,
		       n > 200 ? "[truncated]" : "", line, col);
}

static int fail_char(const struct parser *ps, const char *fmt)
{
	char d[48];
	char_desc(ps, d, sizeof(d));
	return fail(ps, "core.JsonParseException", fmt, d);
}

static int fail_eof(const struct parser *ps, const char *what)
{
	return fail(ps, "core.io.JsonEOFException", "Unexpected end-of-input%s",
		    what);
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
				   *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int parse_value(struct parser *ps, struct cql_json *out, int depth);

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int parse_number(struct parser *ps, struct cql_json *out)
{
	const char *start = ps->p;
	bool is_float = false;
	if (*ps->p == '-') {
		ps->p++;
		if (ps->p == ps->end)
			return fail_eof(ps, " in a Number value");
		if (!is_digit(*ps->p))
			return fail_char(ps, "Unexpected character (%s) in "
					     "numeric value: expected digit "
					     "(0-9) to follow minus sign, for "
					     "valid numeric value");
	}
	if (*ps->p == '0' && ps->p + 1 < ps->end && is_digit(ps->p[1]))
		return fail(ps, "core.JsonParseException",
			    "Invalid numeric value: %s",
			    "Leading zeroes not allowed");
	while (ps->p < ps->end && is_digit(*ps->p))
		ps->p++;
	if (ps->p < ps->end && *ps->p == '.') {
		is_float = true;
		ps->p++;
		if (ps->p == ps->end || !is_digit(*ps->p)) {
			if (ps->p == ps->end)
				return fail_eof(ps, " in a Number value");
			return fail_char(ps, "Unexpected character (%s) in "
					     "numeric value: Decimal point not "
					     "followed by a digit");
		}
		while (ps->p < ps->end && is_digit(*ps->p))
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		is_float = true;
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (ps->p == ps->end)
			return fail_eof(ps, " in a Number value");
		if (!is_digit(*ps->p))
			return fail_char(ps, "Unexpected character (%s) in "
					     "numeric value: Exponent "
					     "indicator not followed by a "
					     "digit");
		while (ps->p < ps->end && is_digit(*ps->p))
			ps->p++;
	}
	out->kind = is_float ? CQL_JSON_FLOAT : CQL_JSON_INT;
	out->text = start;
	out->len = (size_t)(ps->p - start);
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static void put_utf8(struct buf *b, unsigned cp, bool *ok)
{
	uint8_t u[4];
	size_t n;
	if (cp < 0x80) {
		u[0] = (uint8_t)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (uint8_t)(0xc0 | (cp >> 6));
		u[1] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (uint8_t)(0xe0 | (cp >> 12));
		u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (uint8_t)(0xf0 | (cp >> 18));
		u[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 4;
	}
	if (buf_append(b, u, n) != 0)
		*ok = false;
}

static int read_u4(struct parser *ps, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		if (ps->p == ps->end)
			return fail_eof(ps, " in character escape sequence");
		int h = hexval(*ps->p);
		if (h < 0)
			return fail_char(ps, "Unexpected character (%s): "
					     "expected a hex-digit for "
					     "character escape sequence");
		v = v * 16 + (unsigned)h;
		ps->p++;
	}
	*out = v;
	return 0;
}

/* At the opening quote. Strings without escapes point into the input. */
static int parse_string(struct parser *ps, struct cql_json *out)
{
	ps->p++;
	const char *start = ps->p;
	const char *q = ps->p;
	while (q < ps->end && *q != '"' && *q != '\\' &&
	       (unsigned char)*q >= 32)
		q++;
	if (q < ps->end && *q == '"') {
		out->kind = CQL_JSON_STRING;
		out->text = start;
		out->len = (size_t)(q - start);
		ps->p = q + 1;
		return 0;
	}
	struct buf b = {0};
	bool ok = true;
	int rc = -1;
	for (;;) {
		if (ps->p == ps->end) {
			fail_eof(ps, ": was expecting closing quote for a "
				     "string value");
			goto out;
		}
		unsigned char c = (unsigned char)*ps->p;
		if (c == '"') {
			ps->p++;
			break;
		}
		if (c < 32) {
			fail_char(ps, "Illegal unquoted character (%s): has "
				      "to be escaped using backslash to be "
				      "included in string value");
			goto out;
		}
		if (c != '\\') {
			if (buf_put_u8(&b, c) != 0)
				ok = false;
			ps->p++;
			continue;
		}
		ps->p++;
		if (ps->p == ps->end) {
			fail_eof(ps, " in character escape sequence");
			goto out;
		}
		char e = *ps->p;
		unsigned cp = 0;
		switch (e) {
		case '"':
		case '\\':
		case '/':
			cp = (unsigned)e;
			break;
		case 'b':
			cp = '\b';
			break;
		case 'f':
			cp = '\f';
			break;
		case 'n':
			cp = '\n';
			break;
		case 'r':
			cp = '\r';
			break;
		case 't':
			cp = '\t';
			break;
		case 'u':
			ps->p++;
			if (read_u4(ps, &cp) != 0)
				goto out;
			if (cp >= 0xd800 && cp < 0xdc00 &&
			    ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
			    ps->p[1] == 'u') {
				const char *save = ps->p;
				unsigned lo;
				ps->p += 2;
				if (read_u4(ps, &lo) != 0)
					goto out;
				if (lo >= 0xdc00 && lo < 0xe000)
					cp = 0x10000 + ((cp - 0xd800) << 10) +
					     (lo - 0xdc00);
				else
					ps->p = save;
			}
			if (cp >= 0xd800 && cp < 0xe000)
				cp = '?'; /* a lone surrogate: Java's UTF-8
					     encoder writes '?' */
			put_utf8(&b, cp, &ok);
			continue;
		default:
			fail_char(ps, "Unrecognized character escape %s");
			goto out;
		}
		ps->p++;
		put_utf8(&b, cp, &ok);
	}
	if (!ok) {
		err_set(ERR_NOMEM, "out of memory");
		goto out;
	}
	out->kind = CQL_JSON_STRING;
	out->text = arena_memdup(ps->a, b.data, b.len);
	out->len = b.len;
	rc = out->text ? 0 : err_set(ERR_NOMEM, "out of memory");
out:
	buf_free(&b);
	return rc;
}

static int finish_items(struct parser *ps, struct cql_json *out,
			struct item *head, size_t n)
{
	out->count = n;
	out->items = NULL;
	if (n == 0)
		return 0;
	out->items = arena_alloc(ps->a, n * sizeof(*out->items));
	if (!out->items)
		return err_set(ERR_NOMEM, "out of memory");
	/* The list is newest first. */
	for (size_t i = n; i-- > 0; head = head->next)
		out->items[i] = head->v;
	return 0;
}

static struct item *new_item(struct parser *ps, struct item *next)
{
	struct item *it = arena_alloc(ps->a, sizeof(*it));
	if (!it) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	memset(it, 0, sizeof(*it));
	it->next = next;
	return it;
}

static int parse_array(struct parser *ps, struct cql_json *out, int depth)
{
	ps->p++;
	out->kind = CQL_JSON_ARRAY;
	struct item *head = NULL;
	size_t n = 0;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == ']') {
		ps->p++;
		return finish_items(ps, out, NULL, 0);
	}
	for (;;) {
		struct item *it = new_item(ps, head);
		if (!it)
			return -1;
		if (parse_value(ps, &it->v, depth + 1) != 0)
			return -1;
		head = it;
		n++;
		skip_ws(ps);
		if (ps->p == ps->end)
			return fail_eof(ps, ": expected close marker for "
					    "Array");
		if (*ps->p == ']') {
			ps->p++;
			return finish_items(ps, out, head, n);
		}
		if (*ps->p != ',')
			return fail_char(ps,
					 "Unexpected character (%s): was "
					 "expecting comma to separate Array "
					 "entries");
		ps->p++;
	}
}

static int parse_object(struct parser *ps, struct cql_json *out, int depth)
{
	ps->p++;
	out->kind = CQL_JSON_OBJECT;
	struct item *head = NULL;
	size_t n = 0;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == '}') {
		ps->p++;
		return finish_items(ps, out, NULL, 0);
	}
	for (;;) {
		skip_ws(ps);
		if (ps->p == ps->end)
			return fail_eof(ps, ": expected close marker for "
					    "Object");
		if (*ps->p != '"')
			return fail_char(ps, "Unexpected character (%s): was "
					     "expecting double-quote to start "
					     "field name");
		struct item *key = new_item(ps, head);
		if (!key || parse_string(ps, &key->v) != 0)
			return -1;
		skip_ws(ps);
		if (ps->p == ps->end)
			return fail_eof(ps, ": expected close marker for "
					    "Object");
		if (*ps->p != ':')
			return fail_char(ps, "Unexpected character (%s): was "
					     "expecting a colon to separate "
					     "field name and value");
		ps->p++;
		struct item *val = new_item(ps, key);
		if (!val || parse_value(ps, &val->v, depth + 1) != 0)
			return -1;
		head = val;
		n += 2;
		skip_ws(ps);
		if (ps->p == ps->end)
			return fail_eof(ps, ": expected close marker for "
					    "Object");
		if (*ps->p == '}') {
			ps->p++;
			return finish_items(ps, out, head, n);
		}
		if (*ps->p != ',')
			return fail_char(ps, "Unexpected character (%s): was "
					     "expecting comma to separate "
					     "Object entries");
		ps->p++;
	}
}

static bool word(struct parser *ps, const char *w)
{
	size_t n = strlen(w);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, w, n) != 0)
		return false;
	const char *after = ps->p + n;
	if (after < ps->end && ((*after >= 'a' && *after <= 'z') ||
				(*after >= 'A' && *after <= 'Z') ||
				is_digit(*after) || *after == '_'))
		return false;
	ps->p = after;
	return true;
}

static int unrecognized_token(struct parser *ps)
{
	const char *q = ps->p;
	while (q < ps->end && q - ps->p < 256 &&
	       ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
		is_digit(*q) || *q == '_' || (unsigned char)*q >= 0x80))
		q++;
	char tok[300];
	snprintf(tok, sizeof(tok), "%.*s", (int)(q - ps->p), ps->p);
	return fail(ps, "core.JsonParseException",
		    "Unrecognized token '%s': was expecting (JSON String, "
		    "Number, Array, Object or token 'null', 'true' or "
		    "'false')",
		    tok);
}

static int parse_value(struct parser *ps, struct cql_json *out, int depth)
{
	memset(out, 0, sizeof(*out));
	if (depth > CQL_JSON_MAX_DEPTH)
		return fail(ps, "core.exc.StreamConstraintsException",
			    "Document nesting depth exceeds the maximum "
			    "allowed (%s)",
			    "256");
	skip_ws(ps);
	if (ps->p == ps->end)
		return fail_eof(ps, ": expected a value");
	char c = *ps->p;
	if (c == '{')
		return parse_object(ps, out, depth);
	if (c == '[')
		return parse_array(ps, out, depth);
	if (c == '"')
		return parse_string(ps, out);
	if (c == '-' || is_digit(c))
		return parse_number(ps, out);
	if (word(ps, "null")) {
		out->kind = CQL_JSON_NULL;
		return 0;
	}
	if (word(ps, "true")) {
		out->kind = CQL_JSON_TRUE;
		return 0;
	}
	if (word(ps, "false")) {
		out->kind = CQL_JSON_FALSE;
		return 0;
	}
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (unsigned char)c >= 0x80)
		return unrecognized_token(ps);
	return fail_char(ps, "Unexpected character (%s): expected a valid "
			     "value (JSON String, Number, Array, Object or "
			     "token 'null', 'true' or 'false')");
}

int cql_json_parse(const char *s, size_t len, struct arena *a,
		   const struct cql_json **out)
{
	struct parser ps = {s, s, s + len, a};
	skip_ws(&ps);
	if (ps.p == ps.end)
		return err_set(ERR_INVALID,
			       "com.fasterxml.jackson.databind.exc."
			       "MismatchedInputException: No content to map "
			       "due to end-of-input\n at [Source: "
			       "(String)\"%.*s\"; line: 1, column: 0]",
			       (int)(len > 200 ? 200 : len), s);
	struct cql_json *v = arena_alloc(a, sizeof(*v));
	if (!v)
		return err_set(ERR_NOMEM, "out of memory");
	if (parse_value(&ps, v, 0) != 0)
		return -1;
	/* ObjectMapper.readValue ignores what follows the first value. */
	*out = v;
	return 0;
}

/* ---- quoting ------------------------------------------------------------- */

int cql_json_quote(struct buf *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t run = 0;
	if (n == 0) /* s may be NULL */
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 32 && c != '"' && c != '\\')
			continue;
		if (buf_append(out, s + run, i - run) != 0)
			return -1;
		run = i + 1;
		char e[6] = {'\\', 0};
		size_t en = 2;
		switch (c) {
		case '"':
		case '\\':
			e[1] = (char)c;
			break;
		case '\b':
			e[1] = 'b';
			break;
		case '\f':
			e[1] = 'f';
			break;
		case '\n':
			e[1] = 'n';
			break;
		case '\r':
			e[1] = 'r';
			break;
		case '\t':
			e[1] = 't';
			break;
		default:
			e[1] = 'u';
			e[2] = '0';
			e[3] = '0';
			e[4] = hex[c >> 4];
			e[5] = hex[c & 15];
			en = 6;
		}
		if (buf_append(out, e, en) != 0)
			return -1;
	}
	return buf_append(out, s + run, n - run);
}

int cql_json_key(struct buf *out, const char *name, size_t n)
{
	bool lower = true;
	for (size_t i = 0; i < n; i++)
		if (name[i] >= 'A' && name[i] <= 'Z')
			lower = false;
	if (buf_put_u8(out, '"') != 0)
		return -1;
	if (!lower && buf_append(out, "\\\"", 2) != 0)
		return -1;
	if (cql_json_quote(out, name, n) != 0)
		return -1;
	if (!lower && buf_append(out, "\\\"", 2) != 0)
		return -1;
	return buf_put_u8(out, '"');
}

/* ---- Java's view of values ----------------------------------------------- */

/* Shortest digits that read back as `v` (at most 17). */
static int shortest_digits(double v, bool is_float, char *digs, int *exp10)
{
	char tmp[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);
		bool same = is_float ? strtof(tmp, NULL) == (float)v
				     : strtod(tmp, NULL) == v;
		if (same || prec == 17)
			break;
	}
	/* tmp: d.ddddde[+-]xx */
	int n = 0;
	const char *q = tmp;
	for (; *q && *q != 'e'; q++)
		if (is_digit(*q))
			digs[n++] = *q;
	*exp10 = atoi(q + 1);
	while (n > 1 && digs[n - 1] == '0')
		n--;
	digs[n] = 0;
	return n;
}

static void java_fp(double v, bool is_float, char *dst, size_t cap)
{
	if (isnan(v)) {
		snprintf(dst, cap, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(dst, cap, v < 0 ? "-Infinity" : "Infinity");
		return;
	}
	if (v == 0) {
		snprintf(dst, cap, signbit(v) ? "-0.0" : "0.0");
		return;
	}
	const char *sign = v < 0 ? "-" : "";
	double a = fabs(v);
	char digs[24];
	int e;
	int n = shortest_digits(a, is_float, digs, &e);
	if (a >= 1e-3 && a < 1e7) {
		char ip[32], fp[40];
		if (e >= 0) {
			int k = 0;
			for (int i = 0; i <= e; i++)
				ip[k++] = i < n ? digs[i] : '0';
			ip[k] = 0;
			if (n > e + 1)
				snprintf(fp, sizeof(fp), "%s", digs + e + 1);
			else
				snprintf(fp, sizeof(fp), "0");
		} else {
			snprintf(ip, sizeof(ip), "0");
			int k = 0;
			for (int i = 0; i < -e - 1; i++)
				fp[k++] = '0';
			fp[k] = 0;
			snprintf(fp + k, sizeof(fp) - (size_t)k, "%s", digs);
		}
		snprintf(dst, cap, "%s%s.%s", sign, ip, fp);
		return;
	}
	snprintf(dst, cap, "%s%c.%sE%d", sign, digs[0], n > 1 ? digs + 1 : "0",
		 e);
}

void cql_json_java_double(double v, char *dst, size_t cap)
{
	java_fp(v, false, dst, cap);
}

void cql_json_java_float(float v, char *dst, size_t cap)
{
	java_fp((double)v, true, dst, cap);
}

/* Integer/Long/BigInteger by the value's size, as Jackson picks. */
static const char *int_class(const struct cql_json *j)
{
	const char *t = j->text;
	size_t n = j->len;
	bool neg = n && t[0] == '-';
	size_t digits = n - neg;
	if (digits < 10)
		return "Integer";
	if (digits > 19)
		return "BigInteger";
	char tmp[24];
	snprintf(tmp, sizeof(tmp), "%.*s", (int)n, t);
	errno = 0;
	long long v = strtoll(tmp, NULL, 10);
	if (errno == ERANGE)
		return "BigInteger";
	if (v >= INT32_MIN && v <= INT32_MAX)
		return "Integer";
	return "Long";
}

const char *cql_json_java_class(const struct cql_json *j)
{
	switch (j->kind) {
	case CQL_JSON_NULL:
		return "null";
	case CQL_JSON_FALSE:
	case CQL_JSON_TRUE:
		return "Boolean";
	case CQL_JSON_INT:
		return int_class(j);
	case CQL_JSON_FLOAT:
		return "Double";
	case CQL_JSON_STRING:
		return "String";
	case CQL_JSON_ARRAY:
		return "ArrayList";
	case CQL_JSON_OBJECT:
		return "LinkedHashMap";
	}
	return "Object";
}

static int java_text(const struct cql_json *j, struct buf *out, int depth)
{
	if (depth > CQL_JSON_MAX_DEPTH + 1)
		return buf_append(out, "...", 3);
	char num[64];
	switch (j->kind) {
	case CQL_JSON_NULL:
		return buf_append(out, "null", 4);
	case CQL_JSON_FALSE:
		return buf_append(out, "false", 5);
	case CQL_JSON_TRUE:
		return buf_append(out, "true", 4);
	case CQL_JSON_INT:
		if (j->len == 2 && memcmp(j->text, "-0", 2) == 0)
			return buf_append(out, "0", 1);
		return buf_append(out, j->text, j->len);
	case CQL_JSON_FLOAT: {
		char tmp[400];
		snprintf(tmp, sizeof(tmp), "%.*s",
			 (int)(j->len > 390 ? 390 : j->len), j->text);
		cql_json_java_double(strtod(tmp, NULL), num, sizeof(num));
		return buf_append(out, num, strlen(num));
	}
	case CQL_JSON_STRING:
		return buf_append(out, j->text, j->len);
	case CQL_JSON_ARRAY:
	case CQL_JSON_OBJECT: {
		bool obj = j->kind == CQL_JSON_OBJECT;
		if (buf_put_u8(out, obj ? '{' : '[') != 0)
			return -1;
		for (size_t i = 0; i < j->count; i++) {
			if (i > 0 &&
			    buf_append(out, obj && (i & 1) ? "=" : ", ",
				       obj && (i & 1) ? 1 : 2) != 0)
				return -1;
			if (java_text(&j->items[i], out, depth + 1) != 0)
				return -1;
		}
		return buf_put_u8(out, obj ? '}' : ']');
	}
	}
	return 0;
}

int cql_json_java_text(const struct cql_json *j, struct buf *out)
{
	return java_text(j, out, 0);
}

/* ---- INSERT JSON --------------------------------------------------------- */

static bool name_is(const char *name, const char *key, size_t n)
{
	return strlen(name) == n && memcmp(name, key, n) == 0;
}

int cql_json_insert_values(const char *text, size_t len,
			   const char *const *names, size_t n, struct arena *a,
			   const struct cql_json **values)
{
	const struct cql_json *root;
	for (size_t i = 0; i < n; i++)
		values[i] = NULL;
	if (cql_json_parse(text, len, a, &root) != 0) {
		if (err_code() == ERR_NOMEM)
			return -1;
		char exc[ERR_MSG_MAX];
		snprintf(exc, sizeof(exc), "%s", err_msg());
		return err_set(ERR_INVALID,
			       "Could not decode JSON string as a map: %s. "
			       "(String was: %.*s)",
			       exc, (int)(len > 200 ? 200 : len), text);
	}
	if (root->kind == CQL_JSON_NULL)
		return err_set(ERR_INVALID, "Got null for INSERT JSON values");
	if (root->kind != CQL_JSON_OBJECT) {
		static const char *const token[] = {
			[CQL_JSON_FALSE] = "VALUE_FALSE",
			[CQL_JSON_TRUE] = "VALUE_TRUE",
			[CQL_JSON_INT] = "VALUE_NUMBER_INT",
			[CQL_JSON_FLOAT] = "VALUE_NUMBER_FLOAT",
			[CQL_JSON_STRING] = "VALUE_STRING",
			[CQL_JSON_ARRAY] = "START_ARRAY",
		};
		return err_set(
			ERR_INVALID,
			"Could not decode JSON string as a map: "
			"com.fasterxml.jackson.databind.exc."
			"MismatchedInputException: Cannot deserialize value of "
			"type "
			"`java.util.LinkedHashMap<java.lang.Object,java.lang."
			"Object>` from %s value (token `JsonToken.%s`). "
			"(String "
			"was: %.*s)",
			root->kind == CQL_JSON_ARRAY ? "Array" : "a scalar",
			token[root->kind], (int)(len > 200 ? 200 : len), text);
	}
	for (size_t e = 0; e < root->count; e += 2) {
		const struct cql_json *k = &root->items[e];
		const char *key = k->text;
		size_t kn = k->len;
		char lowered[256];
		/* Quoted keys keep their case; others are lower-cased. */
		if (kn >= 2 && key[0] == '"' && key[kn - 1] == '"') {
			key++;
			kn -= 2;
		} else if (kn < sizeof(lowered)) {
			for (size_t i = 0; i < kn; i++)
				lowered[i] = (key[i] >= 'A' && key[i] <= 'Z')
						     ? (char)(key[i] + 32)
						     : key[i];
			key = lowered;
		}
		size_t c = 0;
		while (c < n && !name_is(names[c], key, kn))
			c++;
		if (c == n)
			return err_set(ERR_INVALID,
				       "JSON values map contains unrecognized "
				       "column: %.*s",
				       (int)(kn > 200 ? 200 : kn), key);
		/* A later repeat wins, as in Java's map. */
		values[c] = &root->items[e + 1];
	}
	return 0;
}
