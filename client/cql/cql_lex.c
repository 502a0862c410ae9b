/*
 * CQL lexer: the whole statement is split into tokens up front, so the
 * parser can look ahead as far as it needs. Comments and whitespace vanish
 * here; strings and quoted identifiers are unescaped into the arena.
 */
#include "client/cql/cql_lex_internal.h"

#include "common/err.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

struct lexer {
	struct arena *a;
	const char *src, *pos, *end;
	int line;
	const char *line_start;
	struct cql_token *toks;
	size_t count, cap;
};

static int lex_error(struct lexer *lx, const char *at, const char *what)
{
	return err_set(ERR_INVALID, "line %d:%d %s", lx->line,
		       (int)(at - lx->line_start), what);
}

static int push(struct lexer *lx, enum cql_tok_kind kind, const char *text,
		size_t len, const char *raw, size_t raw_len)
{
	if (lx->count == lx->cap) {
		size_t cap = lx->cap ? lx->cap * 2 : 32;
		struct cql_token *t = arena_alloc(lx->a, cap * sizeof(*t));
		if (!t)
			return -1;
		if (lx->count)
			memcpy(t, lx->toks, lx->count * sizeof(*t));
		lx->toks = t;
		lx->cap = cap;
	}
	lx->toks[lx->count++] = (struct cql_token){
		.kind = kind,
		.text = text,
		.len = len,
		.line = lx->line,
		.col = (int)(raw - lx->line_start),
		.raw = raw,
		.raw_len = raw_len,
	};
	return 0;
}

static bool is_ident_start(char c)
{
	return isalpha((unsigned char)c);
}

static bool is_ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* 8-4-4-4-12 hex digits, not followed by an identifier character. */
static bool at_uuid(const char *p, const char *end)
{
	static const int groups[] = {8, 4, 4, 4, 12};
	if (end - p < 36)
		return false;
	for (int g = 0; g < 5; g++) {
		for (int i = 0; i < groups[g]; i++, p++)
			if (!isxdigit((unsigned char)*p))
				return false;
		if (g < 4 && *p++ != '-')
			return false;
	}
	return p == end || !is_ident_char(*p);
}

/* Skips whitespace and comments; tracks lines. */
static int skip_space(struct lexer *lx)
{
	for (;;) {
		const char *p = lx->pos;
		if (p >= lx->end)
			return 0;
		if (*p == '\n') {
			lx->line++;
			lx->line_start = p + 1;
			lx->pos++;
		} else if (isspace((unsigned char)*p)) {
			lx->pos++;
		} else if ((*p == '-' && p + 1 < lx->end && p[1] == '-') ||
			   (*p == '/' && p + 1 < lx->end && p[1] == '/')) {
			while (lx->pos < lx->end && *lx->pos != '\n')
				lx->pos++;
		} else if (*p == '/' && p + 1 < lx->end && p[1] == '*') {
			const char *start = p;
			lx->pos += 2;
			for (;;) {
				if (lx->pos + 1 >= lx->end)
					return lex_error(
						lx, start,
						"unterminated comment");
				if (lx->pos[0] == '*' && lx->pos[1] == '/') {
					lx->pos += 2;
					break;
				}
				if (*lx->pos == '\n') {
					lx->line++;
					lx->line_start = lx->pos + 1;
				}
				lx->pos++;
			}
		} else {
			return 0;
		}
	}
}

/* A string may span lines: the lines of [from, lx->pos), counted once
 * its token (which starts on the first) is pushed. */
static void count_lines(struct lexer *lx, const char *from)
{
	for (const char *q = from; q < lx->pos; q++)
		if (*q == '\n') {
			lx->line++;
			lx->line_start = q + 1;
		}
}

/* 'text' with '' for a quote, or "ident" with "" for a double quote. */
static int lex_quoted(struct lexer *lx, char quote, enum cql_tok_kind kind)
{
	const char *start = lx->pos;
	const char *p = start + 1;
	size_t n = 0;
	/* First pass: find the end and the unescaped length. */
	for (;;) {
		if (p >= lx->end)
			return lex_error(lx, start,
					 quote == '\'' ? "unterminated string"
						       : "unterminated quoted "
							 "identifier");
		if (*p == quote) {
			if (p + 1 < lx->end && p[1] == quote) {
				p += 2;
				n++;
				continue;
			}
			break;
		}
		p++;
		n++;
	}
	char *text = arena_alloc_aligned(lx->a, n + 1, 1);
	if (!text)
		return -1;
	size_t j = 0;
	for (const char *q = start + 1; q < p; q++) {
		text[j++] = *q;
		if (*q == quote)
			q++;
	}
	text[j] = '\0';
	if (kind == CQL_TOK_QIDENT && n == 0)
		return lex_error(lx, start, "empty quoted identifier");
	lx->pos = p + 1;
	if (push(lx, kind, text, n, start, (size_t)(lx->pos - start)) != 0)
		return -1;
	count_lines(lx, start);
	return 0;
}

static int lex_dollar_string(struct lexer *lx)
{
	const char *start = lx->pos;
	const char *body = start + 2;
	for (const char *p = body; p + 1 < lx->end; p++) {
		if (p[0] == '$' && p[1] == '$') {
			char *text =
				arena_memdup(lx->a, body, (size_t)(p - body));
			if (!text && p > body)
				return -1;
			lx->pos = p + 2;
			if (push(lx, CQL_TOK_STRING, text, (size_t)(p - body),
				 start, (size_t)(lx->pos - start)) != 0)
				return -1;
			count_lines(lx, start);
			return 0;
		}
	}
	return lex_error(lx, start, "unterminated $$ string");
}

/* The length of a duration unit at p (y mo w d h m s ms us µs ns, any
 * case), or 0. */
static size_t duration_unit(const char *p, const char *end)
{
	static const char *const two[] = {"mo", "ms", "us", "ns"};
	if (end - p >= 3 && (unsigned char)p[0] == 0xc2 &&
	    (unsigned char)p[1] == 0xb5 && (p[2] == 's' || p[2] == 'S'))
		return 3; /* µs */
	if (end - p >= 2)
		for (size_t i = 0; i < 4; i++)
			if (tolower((unsigned char)p[0]) == two[i][0] &&
			    tolower((unsigned char)p[1]) == two[i][1])
				return 2;
	if (end - p >= 1 && strchr("ywdhms", tolower((unsigned char)p[0])))
		return 1;
	return 0;
}

static bool ends_token(const char *p, const char *end)
{
	return p == end || (!is_ident_char(*p) && (unsigned char)*p < 0x80);
}

/* Cassandra's DURATION token, digits first: (DIGIT+ UNIT)+. The length,
 * or 0 when the text at p is not one. */
static size_t duration_standard(const char *p, const char *end)
{
	const char *q = p;
	for (;;) {
		const char *d = q;
		while (q < end && isdigit((unsigned char)*q))
			q++;
		if (q == d)
			break;
		size_t u = duration_unit(q, end);
		if (!u)
			return 0;
		q += u;
		if (ends_token(q, end))
			return (size_t)(q - p);
	}
	return 0;
}

static const char *iso_digits(const char *p, const char *end, int n)
{
	for (int i = 0; i < n; i++, p++)
		if (p >= end || !isdigit((unsigned char)*p))
			return NULL;
	return p;
}

/* The ISO 8601 forms, P first: P[nY][nM][nD][T[nH][nM][nS]], PnW and
 * PYYYY-MM-DDThh:mm:ss. The length, or 0. */
static size_t duration_iso(const char *p, const char *end)
{
	if (p == end || *p != 'P')
		return 0;
	const char *q = p + 1;
	/* alternative format */
	const char *a = iso_digits(q, end, 4);
	if (a && a < end && *a == '-') {
		static const char shape[] = "-dd-ddTdd:dd:dd";
		for (const char *s = shape; *s; s++, a++) {
			if (a >= end || (*s == 'd' ? !isdigit((unsigned char)*a)
						   : *a != *s))
				return 0;
		}
		return ends_token(a, end) ? (size_t)(a - p) : 0;
	}
	/* week format */
	const char *w = q;
	while (w < end && isdigit((unsigned char)*w))
		w++;
	if (w > q && w < end && *w == 'W')
		return ends_token(w + 1, end) ? (size_t)(w + 1 - p) : 0;
	/* designators, in order */
	static const char date_units[] = "YMD", time_units[] = "HMS";
	const char *units = date_units;
	bool any = false, in_time = false;
	for (;;) {
		if (q < end && *q == 'T' && !in_time) {
			in_time = true;
			units = time_units;
			q++;
			continue;
		}
		const char *d = q;
		while (q < end && isdigit((unsigned char)*q))
			q++;
		if (q == d)
			break;
		const char *u = q < end ? strchr(units, *q) : NULL;
		if (!u || !*q)
			return 0;
		units = u + 1;
		q++;
		any = true;
	}
	if (!any)
		return 0;
	return ends_token(q, end) ? (size_t)(q - p) : 0;
}

static int lex_number(struct lexer *lx)
{
	const char *start = lx->pos, *p = start;
	size_t dur = duration_standard(start, lx->end);
	if (dur) {
		lx->pos = start + dur;
		return push(lx, CQL_TOK_DURATION, start, dur, start, dur);
	}
	bool is_float = false;
	while (p < lx->end && isdigit((unsigned char)*p))
		p++;
	if (p + 1 < lx->end && *p == '.' && isdigit((unsigned char)p[1])) {
		is_float = true;
		p++;
		while (p < lx->end && isdigit((unsigned char)*p))
			p++;
	}
	if (p < lx->end && (*p == 'e' || *p == 'E')) {
		const char *e = p + 1;
		if (e < lx->end && (*e == '+' || *e == '-'))
			e++;
		if (e < lx->end && isdigit((unsigned char)*e)) {
			is_float = true;
			p = e;
			while (p < lx->end && isdigit((unsigned char)*p))
				p++;
		}
	}
	if (p < lx->end && is_ident_char(*p))
		return lex_error(lx, start, "invalid number");
	lx->pos = p;
	return push(lx, is_float ? CQL_TOK_FLOAT : CQL_TOK_INTEGER, start,
		    (size_t)(p - start), start, (size_t)(p - start));
}

static int lex_one(struct lexer *lx)
{
	const char *p = lx->pos;
	char c = *p;
	if (at_uuid(p, lx->end)) {
		lx->pos += 36;
		return push(lx, CQL_TOK_UUID, p, 36, p, 36);
	}
	if (c == '0' && p + 1 < lx->end && (p[1] == 'x' || p[1] == 'X')) {
		const char *q = p + 2;
		while (q < lx->end && isxdigit((unsigned char)*q))
			q++;
		if (q < lx->end && is_ident_char(*q))
			return lex_error(lx, p, "invalid hexadecimal constant");
		lx->pos = q;
		return push(lx, CQL_TOK_HEX, p + 2, (size_t)(q - p - 2), p,
			    (size_t)(q - p));
	}
	if (isdigit((unsigned char)c))
		return lex_number(lx);
	size_t iso = c == 'P' ? duration_iso(p, lx->end) : 0;
	if (iso) {
		lx->pos += iso;
		return push(lx, CQL_TOK_DURATION, p, iso, p, iso);
	}
	if (is_ident_start(c)) {
		const char *q = p;
		while (q < lx->end && is_ident_char(*q))
			q++;
		lx->pos = q;
		return push(lx, CQL_TOK_IDENT, p, (size_t)(q - p), p,
			    (size_t)(q - p));
	}
	if (c == '\'')
		return lex_quoted(lx, '\'', CQL_TOK_STRING);
	if (c == '"')
		return lex_quoted(lx, '"', CQL_TOK_QIDENT);
	if (c == '$' && p + 1 < lx->end && p[1] == '$')
		return lex_dollar_string(lx);
	if (p + 1 < lx->end &&
	    ((c == '<' && p[1] == '=') || (c == '>' && p[1] == '=') ||
	     (c == '!' && p[1] == '='))) {
		lx->pos += 2;
		return push(lx, CQL_TOK_PUNCT, p, 2, p, 2);
	}
	if (strchr("(),;.*=<>[]{}:?+-", c) && c != '\0') {
		lx->pos++;
		return push(lx, CQL_TOK_PUNCT, p, 1, p, 1);
	}
	/* ANTLR 3's lexer message (Lexer.getErrorMessage); a byte that
	 * is not printable ASCII is shown in hex, where Java shows the
	 * character */
	char what[64];
	if (isprint((unsigned char)c))
		snprintf(what, sizeof(what),
			 "no viable alternative at character '%c'", c);
	else
		snprintf(what, sizeof(what),
			 "no viable alternative at character 0x%02x",
			 (unsigned char)c);
	return lex_error(lx, p, what);
}

int cql_lex(struct arena *a, const char *src, size_t len,
	    struct cql_token **out, size_t *count)
{
	struct lexer lx = {
		.a = a,
		.src = src,
		.pos = src,
		.end = src + len,
		.line = 1,
		.line_start = src,
	};
	for (;;) {
		if (skip_space(&lx) != 0)
			return -1;
		if (lx.pos >= lx.end)
			break;
		if (lex_one(&lx) != 0)
			return -1;
	}
	if (push(&lx, CQL_TOK_EOF, "<EOF>", 5, lx.end, 0) != 0)
		return -1;
	*out = lx.toks;
	*count = lx.count;
	return 0;
}
