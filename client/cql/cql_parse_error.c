/*
 * Syntax errors in Cassandra's words: "line L:C <what> (<snippet>)".
 *
 * Cassandra 4.1 (cql3/ErrorCollector.java over ANTLR 3) builds the snippet
 * from the parser's token buffer, which holds the hidden tokens too (runs
 * of whitespace, `--`/`//` comments up to and with their newline, `/ * * /`
 * comments), up to the furthest token the parser has looked at:
 *
 *   from      = the token 10 buffer entries before the bracketed one
 *   to        = min(bracketed + 2, the last buffered token)
 *   bracketed = where the failing decision started: the offending token,
 *               or for a prediction that read ahead and rewound (a DFA:
 *               statement dispatch, a WHERE relation) its first token
 *
 * The query is split on '\n' (Java's split: trailing empty lines dropped),
 * the `to` line cut after `to`, the bracketed token wrapped in [ ], the
 * `from` line cut before `from`, the lines from..to joined without
 * newlines, with "..." before unless `from` starts the query and after
 * unless `to` ends it. A token's length is that of its text, which for a
 * string literal or quoted name is the unescaped content (so the brackets
 * land where Cassandra puts them, a little off for such tokens).
 *
 * Our buffer ends at the offending token: the parser looked no further
 * (Cassandra's parser disables single-token recovery, so a mismatch reads
 * only LT(1)), unless the caller says Cassandra had read further (an LL(2)
 * decision before the failing rule). The end of input is Cassandra's lexer's
 * bare EOF token: no line (line 0:-1) and no snippet.
 *
 * Not done: a snippet that does not fit in ERR_MSG_MAX is left off, and
 * shapes Java would throw on (a bracketed token running past its line) get
 * none either.
 */
#include "client/cql/cql_parse_internal.h"

#include <stdarg.h>

#define SNIPPET_BEFORE 10 /* ErrorCollector.FIRST_TOKEN_OFFSET */
#define SNIPPET_AFTER  2  /* ErrorCollector.LAST_TOKEN_OFFSET */
#define RING           16 /* > SNIPPET_BEFORE + SNIPPET_AFTER */

/* One entry of ANTLR's token buffer, as the snippet needs it. */
struct btok {
	int line, col; /* 1-based line, 0-based column */
	size_t len;    /* getText().length() */
	bool eof;      /* Cassandra's EOF token: line 0, no snippet */
	size_t idx;    /* buffer index */
};

struct scan {
	const char *pos;
	int line;
	const char *line_start;
};

static void scan_to(struct scan *s, const char *to)
{
	for (; s->pos < to; s->pos++)
		if (*s->pos == '\n') {
			s->line++;
			s->line_start = s->pos + 1;
		}
}

/* The end of the hidden token (WS, COMMENT, MULTILINE_COMMENT) starting
 * at `p`, not past `end`. */
static const char *hidden_end(const char *p, const char *end)
{
	if (p + 1 < end && (p[0] == '-' || p[0] == '/') && p[1] == p[0]) {
		for (p += 2; p < end; p++)
			if (*p == '\n' || *p == '\r')
				return p + 1;
		return end;
	}
	if (p + 1 < end && p[0] == '/' && p[1] == '*') {
		for (p += 2; p + 1 < end; p++)
			if (p[0] == '*' && p[1] == '/')
				return p + 2;
		return end;
	}
	const char *q = p;
	while (q < end && isspace((unsigned char)*q))
		q++;
	return q > p ? q : p + 1;
}

static size_t text_len(const struct cql_token *t)
{
	return t->kind == CQL_TOK_STRING || t->kind == CQL_TOK_QIDENT
		       ? t->len
		       : t->raw_len;
}

/* Fills ring[] with the buffer entries up to min(bracket + 2, last)
 * (real token indexes); returns the buffer index of the bracketed token
 * and sets *to_idx. */
static size_t buffer_scan(const struct parser *p, size_t bracket, size_t last,
			  struct btok *ring, size_t *to_idx)
{
	struct scan s = {p->src, 1, p->src};
	const char *end = p->src + p->src_len;
	size_t idx = 0, bracket_idx = 0;
	bool have_bracket = false;
	for (size_t k = 0; k <= last; k++) {
		const struct cql_token *t = &p->toks[k];
		const char *start = t->kind == CQL_TOK_EOF ? end : t->raw;
		while (s.pos < start) {
			const char *h = hidden_end(s.pos, start);
			struct btok *b = &ring[idx % RING];
			*b = (struct btok){s.line, (int)(s.pos - s.line_start),
					   (size_t)(h - s.pos), false, idx};
			scan_to(&s, h);
			if (have_bracket && idx == bracket_idx + SNIPPET_AFTER)
				goto done;
			idx++;
		}
		struct btok *b = &ring[idx % RING];
		*b = (struct btok){t->line, t->col, text_len(t),
				   t->kind == CQL_TOK_EOF, idx};
		if (k == bracket) {
			bracket_idx = idx;
			have_bracket = true;
		}
		if (k == last ||
		    (have_bracket && idx == bracket_idx + SNIPPET_AFTER))
			goto done;
		scan_to(&s, t->raw + t->raw_len);
		idx++;
	}
done:
	*to_idx = idx;
	return bracket_idx;
}

/* Where line `n` (1-based) of the query starts, or NULL. */
static const char *line_start(const struct parser *p, int n)
{
	const char *q = p->src, *end = p->src + p->src_len;
	for (int i = 1; i < n; i++) {
		const char *nl = memchr(q, '\n', (size_t)(end - q));
		if (!nl)
			return NULL;
		q = nl + 1;
	}
	return q;
}

/* Java's query.split("\n").length: trailing empty lines do not count. */
static int query_lines(const struct parser *p, size_t *last_len)
{
	size_t n = p->src_len;
	while (n > 0 && p->src[n - 1] == '\n')
		n--;
	int lines = n > 0 ? 1 : 0;
	size_t last_start = 0;
	for (size_t i = 0; i < n; i++)
		if (p->src[i] == '\n') {
			lines++;
			last_start = i + 1;
		}
	*last_len = n - last_start;
	return lines;
}

struct out {
	char *buf;
	size_t len, cap;
	bool overflow;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->len + n >= o->cap) {
		o->overflow = true;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

/* ErrorCollector.appendSnippet; false when Java would not append one. */
static bool append_snippet(const struct parser *p, const struct btok *from,
			   const struct btok *to, const struct btok *off,
			   struct out *o)
{
	if (from->eof || to->eof || off->eof || from->col < 0 || to->col < 0 ||
	    off->col < 0)
		return false;
	size_t last_len;
	int nlines = query_lines(p, &last_len);
	if (to->line > nlines || off->line > nlines || from->line > nlines)
		return false;
	bool with_start = from->line == 1 && from->col == 0;
	bool with_end =
		to->line == nlines && (size_t)to->col + to->len == last_len;
	put(o, " (", 2);
	if (!with_start)
		put(o, "...", 3);
	const char *end = p->src + p->src_len;
	const char *l = line_start(p, from->line);
	if (!l)
		return false;
	const char *next = l;
	for (int n = from->line; n <= to->line && !o->overflow; n++) {
		l = next;
		const char *nl = memchr(l, '\n', (size_t)(end - l));
		size_t len = (size_t)((nl ? nl : end) - l);
		next = nl ? nl + 1 : end;
		size_t keep = len, lo = 0;
		if (n == to->line && (size_t)to->col + to->len < len)
			keep = (size_t)to->col + to->len;
		if (n == from->line) {
			if ((size_t)from->col > keep)
				return false;
			lo = (size_t)from->col;
		}
		if (n != off->line) {
			put(o, l + lo, keep - lo);
			continue;
		}
		size_t open = (size_t)off->col, close = open + off->len;
		if (close > keep || close < open || open < lo)
			return false;
		put(o, l + lo, open - lo);
		put(o, "[", 1);
		put(o, l + open, close - open);
		put(o, "]", 1);
		put(o, l + close, keep - close);
	}
	if (!with_end)
		put(o, "...", 3);
	put(o, ")", 1);
	return !o->overflow;
}

int cql_parse_syntax_error(struct parser *p, size_t bracket, size_t ahead,
			   const char *expecting)
{
	char msg[ERR_MSG_MAX];
	struct out o = {msg, 0, sizeof(msg), false};
	const struct cql_token *t = tok(p);
	if (bracket > p->pos)
		bracket = p->pos;
	/* the header and the "at input" text: the offending token */
	bool eof = t->kind == CQL_TOK_EOF;
	bool unquoted = t->kind == CQL_TOK_STRING || t->kind == CQL_TOK_QIDENT;
	const char *text = eof ? "<EOF>" : unquoted ? t->text : t->raw;
	size_t n = eof ? 5 : text_len(t);
	/* getTokenErrorDisplay: newlines, returns and tabs escaped */
	char shown[2 * 40 + 1];
	size_t k = 0;
	for (size_t i = 0; i < n && i < 40; i++) {
		char c = text[i];
		if (c == '\n' || c == '\r' || c == '\t') {
			shown[k++] = '\\';
			c = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		}
		shown[k++] = c;
	}
	shown[k] = '\0';
	if (expecting)
		o.len = (size_t)snprintf(
			msg, sizeof(msg),
			"line %d:%d mismatched input '%s' expecting %s",
			eof ? 0 : t->line, eof ? -1 : t->col, shown, expecting);
	else
		o.len = (size_t)snprintf(
			msg, sizeof(msg),
			"line %d:%d no viable alternative at input '%s'",
			eof ? 0 : t->line, eof ? -1 : t->col, shown);
	if (o.len >= sizeof(msg))
		o.len = sizeof(msg) - 1;
	size_t header = o.len;
	if (p->src) {
		struct btok ring[RING];
		size_t to_idx;
		size_t last = p->pos + ahead < p->count ? p->pos + ahead
							: p->count - 1;
		size_t b = buffer_scan(p, bracket, last, ring, &to_idx);
		size_t from_idx = b > SNIPPET_BEFORE ? b - SNIPPET_BEFORE : 0;
		if (!append_snippet(p, &ring[from_idx % RING],
				    &ring[to_idx % RING], &ring[b % RING],
				    &o)) {
			o.len = header;
			msg[header] = '\0';
		}
	}
	return err_set(ERR_INVALID, "%s", msg);
}
