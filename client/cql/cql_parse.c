/*
 * CQL parser: recursive descent over the token array from cql_lex().
 *
 * Keywords are identifiers compared case-insensitively where the grammar
 * expects them; a small reserved set cannot be used as a bare name, which is
 * what lets "SELECT * FORM t" fail where Cassandra fails. Errors name the
 * offending token with its line and column, in Cassandra's words.
 *
 * This file holds identifiers, terms, types and the statement dispatch
 * (with BATCH, USE, TRUNCATE and DESCRIBE); DDL is cql_parse_ddl.c's,
 * DML and SELECT cql_parse_dml.c's, roles cql_parse_roles.c's.
 */
#include "client/cql/cql_parse_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Words that may not be used as bare identifiers (Cassandra's reserved
 * keywords that matter for the statements we parse). */
static const char *const reserved[] = {
	"add",          "allow",       "alter",    "and",      "apply",
	"asc",          "authorize",   "batch",    "begin",    "by",
	"columnfamily", "create",      "delete",   "desc",     "describe",
	"drop",         "entries",     "execute",  "from",     "full",
	"grant",        "if",          "in",       "index",    "infinity",
	"insert",       "into",        "keyspace", "limit",    "modify",
	"nan",          "norecursive", "not",      "null",     "of",
	"on",           "or",          "order",    "primary",  "rename",
	"replace",      "revoke",      "schema",   "select",   "set",
	"table",        "to",          "token",    "truncate", "unlogged",
	"update",       "use",         "using",    "where",    "with",
};

/* ---- identifiers --------------------------------------------------------- */

bool cql_parse_is_reserved(const struct cql_token *t)
{
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (tok_is_kw(t, reserved[i]))
			return true;
	return false;
}

/* An identifier: unquoted (lower-cased, not reserved) or quoted. */
const char *cql_parse_ident(struct parser *p)
{
	struct cql_token *t = tok(p);
	if (t->kind == CQL_TOK_QIDENT) {
		advance(p);
		return t->text;
	}
	if (t->kind != CQL_TOK_IDENT || cql_parse_is_reserved(t)) {
		syntax_error(p, NULL);
		return NULL;
	}
	char *s = arena_alloc_aligned(p->a, t->len + 1, 1);
	if (!s)
		return NULL;
	for (size_t i = 0; i < t->len; i++)
		s[i] = (char)tolower((unsigned char)t->text[i]);
	s[t->len] = '\0';
	advance(p);
	return s;
}

/* [keyspace.]name */
int cql_parse_qname(struct parser *p, struct cql_qname *out)
{
	const char *first = cql_parse_ident(p);
	if (!first)
		return -1;
	if (accept_punct(p, ".")) {
		out->keyspace = first;
		out->name = cql_parse_ident(p);
		return out->name ? 0 : -1;
	}
	out->keyspace = NULL;
	out->name = first;
	return 0;
}

/* Function names: lower-cased unless quoted. */
const char *cql_parse_lower_name(struct parser *p, const struct cql_token *t)
{
	if (t->kind == CQL_TOK_QIDENT)
		return t->text;
	char *s = arena_alloc_aligned(p->a, t->len + 1, 1);
	if (!s)
		return NULL;
	for (size_t i = 0; i < t->len; i++)
		s[i] = (char)tolower((unsigned char)t->text[i]);
	s[t->len] = '\0';
	return s;
}

/* ---- terms --------------------------------------------------------------- */

static struct cql_term *term_new(struct parser *p, enum cql_term_kind kind,
				 const struct cql_token *t)
{
	struct cql_term *x = node(p, sizeof(*x));
	if (!x)
		return NULL;
	x->kind = kind;
	if (t) {
		x->text = t->text;
		x->len = t->len;
	}
	return x;
}

static struct cql_term *bind_marker(struct parser *p, const char *name)
{
	struct cql_term *x = term_new(p, CQL_TERM_BIND, NULL);
	if (!x)
		return NULL;
	if ((size_t)p->binds == p->bind_cap) {
		size_t cap = p->bind_cap ? p->bind_cap * 2 : 8;
		const char **names = arena_alloc(p->a, cap * sizeof(*names));
		if (!names)
			return NULL;
		if (p->binds)
			memcpy(names, p->bind_names,
			       (size_t)p->binds * sizeof(*names));
		p->bind_names = names;
		p->bind_cap = cap;
	}
	p->bind_names[p->binds] = name;
	x->bind_index = p->binds++;
	x->text = name;
	x->len = name ? strlen(name) : 0;
	return x;
}

/* Items up to `close`, separated by commas; for maps, key ':' value. */
static int term_items(struct parser *p, struct cql_term *x, const char *close,
		      bool map)
{
	struct vec items = VEC(struct cql_term *);
	if (!accept_punct(p, close)) {
		do {
			struct cql_term **slot = vec_push(p, &items);
			if (!slot || !(*slot = cql_parse_term(p)))
				return -1;
			if (map) {
				if (expect_punct(p, ":") != 0)
					return -1;
				slot = vec_push(p, &items);
				if (!slot || !(*slot = cql_parse_term(p)))
					return -1;
			}
		} while (accept_punct(p, ","));
		if (expect_punct(p, close) != 0)
			return -1;
	}
	x->items = items.items;
	x->count = items.count;
	return 0;
}

/* Whether the brace's first item is `name :`, a user type literal's field
 * (a map key cannot be a bare name; true, false, null, NaN and Infinity
 * are constants). */
static bool udt_literal_ahead(struct parser *p)
{
	struct cql_token *t = tok(p);
	if (!tok_is_punct(tok_at(p, 1), ":"))
		return false;
	if (t->kind == CQL_TOK_QIDENT)
		return true;
	return t->kind == CQL_TOK_IDENT && !tok_is_kw(t, "null") &&
	       !tok_is_kw(t, "true") && !tok_is_kw(t, "false") &&
	       !tok_is_kw(t, "nan") && !tok_is_kw(t, "infinity");
}

/* {f: a, g: b}, at its first field. */
static struct cql_term *udt_term(struct parser *p, struct cql_term *x)
{
	struct vec names = VEC(const char *), items = VEC(struct cql_term *);
	x->kind = CQL_TERM_UDT;
	do {
		const char **name = vec_push(p, &names);
		if (!name || !(*name = cql_parse_ident(p)) ||
		    expect_punct(p, ":") != 0)
			return NULL;
		struct cql_term **slot = vec_push(p, &items);
		if (!slot || !(*slot = cql_parse_term(p)))
			return NULL;
	} while (accept_punct(p, ","));
	if (expect_punct(p, "}") != 0)
		return NULL;
	x->names = names.items;
	x->items = items.items;
	x->count = items.count;
	return x;
}

/* { : set, map or user type literal, decided by the first item. */
static struct cql_term *brace_term(struct parser *p)
{
	struct cql_term *x = term_new(p, CQL_TERM_MAP, NULL);
	if (!x)
		return NULL;
	if (accept_punct(p, "}"))
		return x; /* {}: an empty map or set, typed by its column */
	if (udt_literal_ahead(p))
		return udt_term(p, x);
	struct cql_term *first = cql_parse_term(p);
	if (!first)
		return NULL;
	bool map = is_punct(p, ":");
	x->kind = map ? CQL_TERM_MAP : CQL_TERM_SET;
	struct vec items = VEC(struct cql_term *);
	struct cql_term **slot = vec_push(p, &items);
	if (!slot)
		return NULL;
	*slot = first;
	if (map) {
		advance(p);
		slot = vec_push(p, &items);
		if (!slot || !(*slot = cql_parse_term(p)))
			return NULL;
	}
	if (accept_punct(p, ",")) {
		struct cql_term rest = {0};
		if (term_items(p, &rest, "}", map) != 0)
			return NULL;
		for (size_t i = 0; i < rest.count; i++) {
			slot = vec_push(p, &items);
			if (!slot)
				return NULL;
			*slot = rest.items[i];
		}
	} else if (expect_punct(p, "}") != 0) {
		return NULL;
	}
	x->items = items.items;
	x->count = items.count;
	return x;
}

static struct cql_term *number_term(struct parser *p, bool negative)
{
	struct cql_token *t = tok(p);
	struct cql_term *x = NULL;
	if (t->kind == CQL_TOK_INTEGER)
		x = term_new(p, CQL_TERM_INTEGER, t);
	else if (t->kind == CQL_TOK_FLOAT || tok_is_kw(t, "nan") ||
		 tok_is_kw(t, "infinity"))
		x = term_new(p, CQL_TERM_FLOAT, t);
	else {
		syntax_error(p, NULL);
		return NULL;
	}
	if (x) {
		x->negative = negative;
		advance(p);
	}
	return x;
}

static struct cql_term *function_term(struct parser *p)
{
	struct cql_token *t = tok(p);
	struct cql_term *x = term_new(p, CQL_TERM_FUNCTION, NULL);
	if (!x)
		return NULL;
	const char *name = cql_parse_lower_name(p, t);
	if (!name)
		return NULL;
	x->text = name;
	x->len = strlen(name);
	advance(p); /* name */
	advance(p); /* ( */
	return term_items(p, x, ")", false) == 0 ? x : NULL;
}

static struct cql_term *term_inner(struct parser *p);

struct cql_term *cql_parse_term(struct parser *p)
{
	if (enter(p) != 0)
		return NULL;
	struct cql_term *x = term_inner(p);
	leave(p);
	return x;
}

/* At '(': whether a type hint follows, (int)? or (frozen<set<int>>)x;
 * (true), (null), (NaN) and (Infinity) are one-element tuples. */
static bool is_type_hint(struct parser *p)
{
	const struct cql_token *name = tok_at(p, 1);
	static const char *const constants[] = {"true", "false", "null", "nan",
						"infinity"};
	if (name->kind != CQL_TOK_IDENT)
		return false;
	for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++)
		if (tok_is_kw(name, constants[i]))
			return false;
	return tok_is_punct(tok_at(p, 2), ")") ||
	       tok_is_punct(tok_at(p, 2), "<");
}

static struct cql_term *term_inner(struct parser *p)
{
	struct cql_token *t = tok(p);
	switch (t->kind) {
	case CQL_TOK_STRING: {
		struct cql_term *x = term_new(p, CQL_TERM_STRING, t);
		advance(p);
		return x;
	}
	case CQL_TOK_INTEGER:
	case CQL_TOK_FLOAT:
		return number_term(p, false);
	case CQL_TOK_UUID: {
		struct cql_term *x = term_new(p, CQL_TERM_UUID, t);
		advance(p);
		return x;
	}
	case CQL_TOK_HEX: {
		struct cql_term *x = term_new(p, CQL_TERM_BLOB, t);
		advance(p);
		return x;
	}
	case CQL_TOK_DURATION: {
		struct cql_term *x = term_new(p, CQL_TERM_DURATION, t);
		advance(p);
		return x;
	}
	case CQL_TOK_IDENT:
	case CQL_TOK_QIDENT:
		if (tok_is_kw(t, "null")) {
			advance(p);
			return term_new(p, CQL_TERM_NULL, NULL);
		}
		if (tok_is_kw(t, "true") || tok_is_kw(t, "false")) {
			struct cql_term *x =
				term_new(p, CQL_TERM_BOOLEAN, NULL);
			if (x) {
				x->text =
					tok_is_kw(t, "true") ? "true" : "false";
				x->len = strlen(x->text);
			}
			advance(p);
			return x;
		}
		if (tok_is_kw(t, "nan") || tok_is_kw(t, "infinity"))
			return number_term(p, false);
		if (tok_is_punct(tok_at(p, 1), "("))
			return function_term(p);
		break;
	case CQL_TOK_PUNCT:
		if (tok_is_punct(t, "?")) {
			advance(p);
			return bind_marker(p, NULL);
		}
		if (tok_is_punct(t, ":")) {
			advance(p);
			const char *name = cql_parse_ident(p);
			return name ? bind_marker(p, name) : NULL;
		}
		if (tok_is_punct(t, "-")) {
			advance(p);
			if (tok(p)->kind == CQL_TOK_DURATION) {
				struct cql_term *x =
					term_new(p, CQL_TERM_DURATION, tok(p));
				if (x)
					x->negative = true;
				advance(p);
				return x;
			}
			return number_term(p, true);
		}
		if (tok_is_punct(t, "[")) {
			advance(p);
			struct cql_term *x = term_new(p, CQL_TERM_LIST, NULL);
			return x && term_items(p, x, "]", false) == 0 ? x
								      : NULL;
		}
		if (tok_is_punct(t, "{")) {
			advance(p);
			return brace_term(p);
		}
		if (tok_is_punct(t, "(") && is_type_hint(p)) {
			/* a type hint, (int)?: no term is a bare name */
			advance(p);
			struct cql_term *x = term_new(p, CQL_TERM_HINT, NULL);
			struct cql_term **items =
				arena_alloc(p->a, sizeof(*items));
			if (!x || !items ||
			    !(x->type = cql_parse_type_ast(p)) ||
			    expect_punct(p, ")") != 0 ||
			    !(items[0] = cql_parse_term(p)))
				return NULL;
			x->items = items;
			x->count = 1;
			return x;
		}
		if (tok_is_punct(t, "(")) {
			advance(p);
			struct cql_term *x = term_new(p, CQL_TERM_TUPLE, NULL);
			return x && term_items(p, x, ")", false) == 0 ? x
								      : NULL;
		}
		break;
	default:
		break;
	}
	syntax_error(p, NULL);
	return NULL;
}

/* ---- types and options --------------------------------------------------- */

static struct cql_type_ast *type_ast_inner(struct parser *p);

struct cql_type_ast *cql_parse_type_ast(struct parser *p)
{
	if (enter(p) != 0)
		return NULL;
	struct cql_type_ast *t = type_ast_inner(p);
	leave(p);
	return t;
}

static struct cql_type_ast *type_ast_inner(struct parser *p)
{
	struct cql_type_ast *t = node(p, sizeof(*t));
	const char *name;
	if (!t)
		return NULL;
	/* Type names (set, map, ...) may be reserved words. */
	if (tok(p)->kind == CQL_TOK_IDENT) {
		if (!(name = cql_parse_lower_name(p, tok(p))))
			return NULL;
		advance(p);
	} else if (!(name = cql_parse_ident(p))) {
		return NULL;
	}
	if (is_punct(p, ".")) { /* ks.udt */
		advance(p);
		t->keyspace = name;
		t->name = cql_parse_ident(p);
		return t->name ? t : NULL;
	}
	if (strcmp(name, "frozen") == 0) {
		if (expect_punct(p, "<") != 0)
			return NULL;
		struct cql_type_ast *inner = cql_parse_type_ast(p);
		if (!inner || expect_punct(p, ">") != 0)
			return NULL;
		inner->frozen = true;
		return inner;
	}
	t->name = name;
	if (accept_punct(p, "<")) {
		struct vec params = VEC(struct cql_type_ast *);
		do {
			struct cql_type_ast **slot = vec_push(p, &params);
			if (!slot)
				return NULL;
			if (tok(p)->kind == CQL_TOK_INTEGER) {
				/* vector<float, 3>: a dimension */
				struct cql_type_ast *n = node(p, sizeof(*n));
				char *digits = arena_alloc_aligned(
					p->a, tok(p)->len + 1, 1);
				if (!n || !digits)
					return NULL;
				memcpy(digits, tok(p)->text, tok(p)->len);
				digits[tok(p)->len] = '\0';
				n->name = digits;
				n->number = true;
				advance(p);
				*slot = n;
				continue;
			}
			if (!(*slot = cql_parse_type_ast(p)))
				return NULL;
		} while (accept_punct(p, ","));
		if (expect_punct(p, ">") != 0)
			return NULL;
		t->params = params.items;
		t->param_count = params.count;
	}
	return t;
}

/* DESCRIBE / DESC, served by the node for cqlsh 4.x. */
static int describe_what(struct parser *p, struct cql_describe *d)
{
	static const struct {
		const char *kw;
		enum cql_describe_kind kind;
	} lists[] = {
		{"cluster", CQL_DESCRIBE_CLUSTER},
		{"keyspaces", CQL_DESCRIBE_KEYSPACES},
		{"tables", CQL_DESCRIBE_TABLES},
		{"types", CQL_DESCRIBE_TYPES},
		{"functions", CQL_DESCRIBE_FUNCTIONS},
		{"aggregates", CQL_DESCRIBE_AGGREGATES},
	};
	static const struct {
		const char *kw;
		enum cql_describe_kind kind;
	} named[] = {
		{"table", CQL_DESCRIBE_TABLE},
		{"columnfamily", CQL_DESCRIBE_TABLE},
		{"index", CQL_DESCRIBE_INDEX},
		{"type", CQL_DESCRIBE_TYPE},
		{"function", CQL_DESCRIBE_FUNCTION},
		{"aggregate", CQL_DESCRIBE_AGGREGATE},
	};
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		if (accept_kw(p, lists[i].kw)) {
			d->kind = lists[i].kind;
			return 0;
		}
	/* FULL and ONLY are not reserved: "DESCRIBE only" names a keyspace
	 * or table. */
	if (is_kw(p, "full") && tok_is_kw(tok_at(p, 1), "schema"))
		d->full = accept_kw(p, "full");
	if (is_kw(p, "only") && tok_is_kw(tok_at(p, 1), "keyspace"))
		d->only = accept_kw(p, "only");
	if (is_kw(p, "schema")) {
		d->kind = CQL_DESCRIBE_SCHEMA;
		return expect_kw(p, "schema");
	}
	if (is_kw(p, "keyspace")) {
		d->kind = CQL_DESCRIBE_KEYSPACE;
		if (expect_kw(p, "keyspace") != 0)
			return -1;
		if (tok(p)->kind != CQL_TOK_EOF && !is_punct(p, ";") &&
		    !is_kw(p, "with") && !(d->name.name = cql_parse_ident(p)))
			return -1;
		return 0;
	}
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (accept_kw(p, named[i].kw)) {
			d->kind = named[i].kind;
			return cql_parse_qname(p, &d->name);
		}
	if (accept_kw(p, "materialized")) {
		d->kind = CQL_DESCRIBE_VIEW;
		if (expect_kw(p, "view") != 0)
			return -1;
		return cql_parse_qname(p, &d->name);
	}
	d->kind = CQL_DESCRIBE_NAME;
	return cql_parse_qname(p, &d->name);
}

static int describe(struct parser *p, struct cql_stmt *s)
{
	struct cql_describe *d = &s->u.describe;
	s->kind = CQL_STMT_DESCRIBE;
	if (describe_what(p, d) != 0)
		return -1;
	if (accept_kw(p, "with")) {
		d->internals = true;
		return expect_kw(p, "internals");
	}
	return 0;
}

/* ---- BATCH, USE, TRUNCATE, DESCRIBE -------------------------------------- */

static int batch_stmt(struct parser *p, struct cql_stmt *s);

static int statement(struct parser *p, struct cql_stmt *s, bool in_batch)
{
	p->stmt_start = p->pos;
	if (accept_kw(p, "insert"))
		return cql_parse_insert(p, s);
	if (accept_kw(p, "update"))
		return cql_parse_update(p, s);
	if (accept_kw(p, "delete"))
		return cql_parse_delete_stmt(p, s);
	if (in_batch)
		return syntax_error(p, "K_APPLY");
	if (accept_kw(p, "select"))
		return cql_parse_select_stmt(p, s);
	if (accept_kw(p, "begin"))
		return batch_stmt(p, s);
	if (accept_kw(p, "describe") || accept_kw(p, "desc"))
		return describe(p, s);
	if (accept_kw(p, "use")) {
		s->kind = CQL_STMT_USE;
		s->u.use_keyspace = cql_parse_ident(p);
		return s->u.use_keyspace ? 0 : -1;
	}
	if (accept_kw(p, "create"))
		return cql_parse_create(p, s);
	if (accept_kw(p, "alter"))
		return cql_parse_alter(p, s);
	if (accept_kw(p, "drop"))
		return cql_parse_drop(p, s);
	if (accept_kw(p, "truncate")) {
		s->kind = CQL_STMT_TRUNCATE;
		if (!accept_kw(p, "table"))
			accept_kw(p, "columnfamily");
		return cql_parse_qname(p, &s->u.truncate);
	}
	if (is_kw(p, "grant") || is_kw(p, "revoke") || is_kw(p, "list"))
		return unsupported("Roles, users and permissions");
	return syntax_error(p, NULL);
}

static int batch_stmt(struct parser *p, struct cql_stmt *s)
{
	struct cql_batch_stmt *b = &s->u.batch;
	struct vec stmts = VEC(struct cql_stmt *);
	s->kind = CQL_STMT_BATCH;
	if (accept_kw(p, "unlogged"))
		b->type = 1;
	else if (accept_kw(p, "counter"))
		b->type = 2;
	/* USING TTL parses, as in Cassandra, which then refuses it */
	if (expect_kw(p, "batch") != 0 ||
	    cql_parse_using_clause(p, &b->using, true) != 0)
		return -1;
	while (!is_kw(p, "apply")) {
		struct cql_stmt **slot = vec_push(p, &stmts);
		if (!slot || !(*slot = node(p, sizeof(**slot))) ||
		    statement(p, *slot, true) != 0)
			return -1;
		while (accept_punct(p, ";"))
			;
	}
	advance(p);
	if (expect_kw(p, "batch") != 0)
		return -1;
	b->statements = stmts.items;
	b->count = stmts.count;
	return 0;
}

struct cql_stmt *cql_parse(struct arena *a, const char *text, size_t len,
			   int *bind_count, const char ***bind_names)
{
	struct parser p = {.a = a, .src = text, .src_len = len};
	if (len > CQL_MAX_STATEMENT) {
		err_set(ERR_INVALID,
			"statement of %zu bytes exceeds the %u-byte "
			"limit",
			len, (unsigned)CQL_MAX_STATEMENT);
		return NULL;
	}
	if (cql_lex(a, text, len, &p.toks, &p.count) != 0)
		return NULL;
	struct cql_stmt *s = node(&p, sizeof(*s));
	if (s && cql_is_role_statement(p.toks, p.count)) {
		if (cql_parse_role(&p, s) != 0)
			return NULL;
		*bind_count = 0;
		if (bind_names)
			*bind_names = NULL;
		return s;
	}
	if (s && cql_is_type_statement(p.toks, p.count)) {
		if (cql_parse_type_stmt(&p, s) != 0)
			return NULL;
		*bind_count = 0;
		if (bind_names)
			*bind_names = NULL;
		return s;
	}
	if (!s || statement(&p, s, false) != 0)
		return NULL;
	while (accept_punct(&p, ";"))
		;
	if (tok(&p)->kind != CQL_TOK_EOF) {
		syntax_error(&p, "EOF");
		return NULL;
	}
	*bind_count = p.binds;
	if (bind_names)
		*bind_names = p.bind_names;
	return s;
}
