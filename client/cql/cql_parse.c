/*
 * CQL parser: recursive descent over the token array from cql_lex().
 *
 * Keywords are identifiers compared case-insensitively where the grammar
 * expects them; a small reserved set cannot be used as a bare name, which is
 * what lets "SELECT * FORM t" fail where Cassandra fails. Errors name the
 * offending token with its line and column, in Cassandra's words.
 */
#include "client/cql/cql_parse.h"

#include "client/cql/cql_lex_internal.h"
#include "common/err.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct parser {
	struct arena *a;
	struct cql_token *toks;
	size_t count;
	size_t pos;
	int binds;
	const char **bind_names;
	size_t bind_cap;
	int depth; /* nesting of terms, types and selectors */
};

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

/* ---- token helpers ------------------------------------------------------- */

static struct cql_token *tok(struct parser *p)
{
	return &p->toks[p->pos];
}

static struct cql_token *tok_at(struct parser *p, size_t ahead)
{
	size_t i = p->pos + ahead;
	return &p->toks[i < p->count ? i : p->count - 1];
}

static void advance(struct parser *p)
{
	if (p->pos + 1 < p->count)
		p->pos++;
}

static bool tok_is_kw(const struct cql_token *t, const char *kw)
{
	return t->kind == CQL_TOK_IDENT && strlen(kw) == t->len &&
	       strncasecmp(t->text, kw, t->len) == 0;
}

static bool tok_is_punct(const struct cql_token *t, const char *s)
{
	return t->kind == CQL_TOK_PUNCT && strlen(s) == t->len &&
	       memcmp(t->text, s, t->len) == 0;
}

static bool is_kw(struct parser *p, const char *kw)
{
	return tok_is_kw(tok(p), kw);
}

static bool is_punct(struct parser *p, const char *s)
{
	return tok_is_punct(tok(p), s);
}

static bool accept_kw(struct parser *p, const char *kw)
{
	if (!is_kw(p, kw))
		return false;
	advance(p);
	return true;
}

static bool accept_punct(struct parser *p, const char *s)
{
	if (!is_punct(p, s))
		return false;
	advance(p);
	return true;
}

static int syntax_error(struct parser *p, const char *expecting)
{
	struct cql_token *t = tok(p);
	int n = t->kind == CQL_TOK_EOF
			? 5
			: (int)(t->raw_len > 40 ? 40 : t->raw_len);
	const char *text = t->kind == CQL_TOK_EOF ? "<EOF>" : t->raw;
	if (expecting)
		return err_set(
			ERR_INVALID,
			"line %d:%d mismatched input '%.*s' expecting %s",
			t->line, t->col, n, text, expecting);
	return err_set(ERR_INVALID,
		       "line %d:%d no viable alternative at input "
		       "'%.*s'",
		       t->line, t->col, n, text);
}

/* Terms, types and selectors nest; deeper than CQL_MAX_DEPTH is refused
 * as a syntax error before the recursion can exhaust the stack. */
static int enter(struct parser *p)
{
	if (p->depth >= CQL_MAX_DEPTH) {
		struct cql_token *t = tok(p);
		return err_set(ERR_INVALID,
			       "line %d:%d input nested more than %d levels "
			       "deep",
			       t->line, t->col, CQL_MAX_DEPTH);
	}
	p->depth++;
	return 0;
}

static void leave(struct parser *p)
{
	p->depth--;
}

static int expect_kw(struct parser *p, const char *kw)
{
	if (accept_kw(p, kw))
		return 0;
	char up[32];
	size_t i = 0;
	for (; kw[i] && i < sizeof(up) - 1; i++)
		up[i] = (char)toupper((unsigned char)kw[i]);
	up[i] = '\0';
	return syntax_error(p, up);
}

static int expect_punct(struct parser *p, const char *s)
{
	if (accept_punct(p, s))
		return 0;
	char q[8];
	snprintf(q, sizeof(q), "'%s'", s);
	return syntax_error(p, q);
}

/* What parses but Cassandra refuses as an invalid request (its
 * CreateTableStatement and ParsedInsert checks): answered as Invalid,
 * as ERR_UNSUPPORTED is, not as a syntax error. */
#define ERR_REFUSED ERR_UNSUPPORTED

static int unsupported(const char *what)
{
	return err_set(ERR_UNSUPPORTED, "%s are not supported by Cassini yet",
		       what);
}

/* ---- small arena vectors ------------------------------------------------- */

struct vec {
	void *items;
	size_t count, cap, size;
};

static void *vec_push(struct parser *p, struct vec *v)
{
	if (v->count == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 4;
		void *items = arena_alloc(p->a, cap * v->size);
		if (!items)
			return NULL;
		if (v->count)
			memcpy(items, v->items, v->count * v->size);
		v->items = items;
		v->cap = cap;
	}
	void *slot = (char *)v->items + v->count++ * v->size;
	memset(slot, 0, v->size);
	return slot;
}

#define VEC(type)                                                              \
	{                                                                      \
		NULL, 0, 0, sizeof(type)                                       \
	}

static void *node(struct parser *p, size_t size)
{
	void *n = arena_alloc(p->a, size);
	if (n)
		memset(n, 0, size);
	return n;
}

/* ---- identifiers --------------------------------------------------------- */

static bool is_reserved(const struct cql_token *t)
{
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (tok_is_kw(t, reserved[i]))
			return true;
	return false;
}

/* An identifier: unquoted (lower-cased, not reserved) or quoted. */
static const char *ident(struct parser *p)
{
	struct cql_token *t = tok(p);
	if (t->kind == CQL_TOK_QIDENT) {
		advance(p);
		return t->text;
	}
	if (t->kind != CQL_TOK_IDENT || is_reserved(t)) {
		syntax_error(p, "an identifier");
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
static int qname(struct parser *p, struct cql_qname *out)
{
	const char *first = ident(p);
	if (!first)
		return -1;
	if (accept_punct(p, ".")) {
		out->keyspace = first;
		out->name = ident(p);
		return out->name ? 0 : -1;
	}
	out->keyspace = NULL;
	out->name = first;
	return 0;
}

/* Function names: lower-cased unless quoted. */
static const char *lower_name(struct parser *p, const struct cql_token *t)
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

static struct cql_term *term(struct parser *p);
static struct cql_type_ast *type_ast(struct parser *p);

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
			if (!slot || !(*slot = term(p)))
				return -1;
			if (map) {
				if (expect_punct(p, ":") != 0)
					return -1;
				slot = vec_push(p, &items);
				if (!slot || !(*slot = term(p)))
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

/* { : set or map, decided by the first item. */
static struct cql_term *brace_term(struct parser *p)
{
	struct cql_term *x = term_new(p, CQL_TERM_MAP, NULL);
	if (!x)
		return NULL;
	if (accept_punct(p, "}"))
		return x; /* {}: an empty map or set, typed by its column */
	struct cql_term *first = term(p);
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
		if (!slot || !(*slot = term(p)))
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
		syntax_error(p, "a number");
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
	const char *name = lower_name(p, t);
	if (!name)
		return NULL;
	x->text = name;
	x->len = strlen(name);
	advance(p); /* name */
	advance(p); /* ( */
	return term_items(p, x, ")", false) == 0 ? x : NULL;
}

static struct cql_term *term_inner(struct parser *p);

static struct cql_term *term(struct parser *p)
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
			const char *name = ident(p);
			return name ? bind_marker(p, name) : NULL;
		}
		if (tok_is_punct(t, "-")) {
			advance(p);
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
			if (!x || !items || !(x->type = type_ast(p)) ||
			    expect_punct(p, ")") != 0 || !(items[0] = term(p)))
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

static struct cql_type_ast *type_ast(struct parser *p)
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
		if (!(name = lower_name(p, tok(p))))
			return NULL;
		advance(p);
	} else if (!(name = ident(p))) {
		return NULL;
	}
	if (strcmp(name, "frozen") == 0) {
		if (expect_punct(p, "<") != 0)
			return NULL;
		struct cql_type_ast *inner = type_ast(p);
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
			if (!slot || !(*slot = type_ast(p)))
				return NULL;
		} while (accept_punct(p, ","));
		if (expect_punct(p, ">") != 0)
			return NULL;
		t->params = params.items;
		t->param_count = params.count;
	}
	return t;
}

/* name = value, where value is a constant or a map literal. */
static int option(struct parser *p, struct vec *opts)
{
	struct cql_option *o = vec_push(p, opts);
	if (!o || !(o->name = ident(p)) || expect_punct(p, "=") != 0)
		return -1;
	o->value = term(p);
	return o->value ? 0 : -1;
}

static int keyspace_options(struct parser *p, struct cql_keyspace_stmt *ks)
{
	struct vec opts = VEC(struct cql_option);
	if (expect_kw(p, "with") != 0)
		return -1;
	do {
		if (option(p, &opts) != 0)
			return -1;
	} while (accept_kw(p, "and"));
	ks->options = opts.items;
	ks->option_count = opts.count;
	return 0;
}

/* CLUSTERING ORDER BY (a DESC, b ASC) */
static int clustering_order(struct parser *p, struct cql_create_table *ct)
{
	struct vec order = VEC(struct cql_clustering_order);
	if (expect_kw(p, "order") != 0 || expect_kw(p, "by") != 0 ||
	    expect_punct(p, "(") != 0)
		return -1;
	do {
		struct cql_clustering_order *o = vec_push(p, &order);
		if (!o || !(o->column = ident(p)))
			return -1;
		if (accept_kw(p, "desc"))
			o->descending = true;
		else
			accept_kw(p, "asc");
	} while (accept_punct(p, ","));
	if (expect_punct(p, ")") != 0)
		return -1;
	ct->order = order.items;
	ct->order_count = order.count;
	return 0;
}

static int table_options(struct parser *p, struct cql_create_table *ct,
			 struct vec *opts)
{
	do {
		if (accept_kw(p, "clustering")) {
			if (clustering_order(p, ct) != 0)
				return -1;
		} else if (is_kw(p, "compact")) {
			return unsupported("COMPACT STORAGE tables");
		} else if (option(p, opts) != 0) {
			return -1;
		}
	} while (accept_kw(p, "and"));
	return 0;
}

/* ---- DDL ----------------------------------------------------------------- */

static int if_not_exists(struct parser *p, bool *out)
{
	*out = false;
	if (!accept_kw(p, "if"))
		return 0;
	if (expect_kw(p, "not") != 0 || expect_kw(p, "exists") != 0)
		return -1;
	*out = true;
	return 0;
}

static int if_exists(struct parser *p, bool *out)
{
	*out = false;
	if (!accept_kw(p, "if"))
		return 0;
	if (expect_kw(p, "exists") != 0)
		return -1;
	*out = true;
	return 0;
}

static int column_def(struct parser *p, struct cql_column_def *c)
{
	if (!(c->name = ident(p)) || !(c->type = type_ast(p)))
		return -1;
	if (accept_kw(p, "static"))
		c->is_static = true;
	if (accept_kw(p, "primary")) {
		if (expect_kw(p, "key") != 0)
			return -1;
		c->primary_key = true;
	}
	return 0;
}

static int ident_list(struct parser *p, const char ***out, size_t *count)
{
	struct vec v = VEC(const char *);
	do {
		const char **slot = vec_push(p, &v);
		if (!slot || !(*slot = ident(p)))
			return -1;
	} while (accept_punct(p, ","));
	*out = v.items;
	*count = v.count;
	return 0;
}

/* PRIMARY KEY ((a, b), c, d) or PRIMARY KEY (a, c) */
static int primary_key(struct parser *p, struct cql_create_table *ct)
{
	if (expect_kw(p, "key") != 0 || expect_punct(p, "(") != 0)
		return -1;
	if (accept_punct(p, "(")) {
		if (ident_list(p, &ct->partition_key,
			       &ct->partition_key_count) != 0 ||
		    expect_punct(p, ")") != 0)
			return -1;
	} else {
		const char **one = arena_alloc(p->a, sizeof(*one));
		if (!one || !(one[0] = ident(p)))
			return -1;
		ct->partition_key = one;
		ct->partition_key_count = 1;
	}
	if (accept_punct(p, ",") &&
	    ident_list(p, &ct->clustering, &ct->clustering_count) != 0)
		return -1;
	return expect_punct(p, ")");
}

static int create_table(struct parser *p, struct cql_stmt *s)
{
	struct cql_create_table *ct = &s->u.create_table;
	struct vec cols = VEC(struct cql_column_def);
	struct vec opts = VEC(struct cql_option);
	bool pk_clause = false;
	s->kind = CQL_STMT_CREATE_TABLE;
	if (if_not_exists(p, &ct->if_not_exists) != 0 ||
	    qname(p, &ct->table) != 0 || expect_punct(p, "(") != 0)
		return -1;
	bool first = true;
	do {
		/* Cassandra's grammar: '(' column (',' column?)* ')', so
		 * empty entries after a comma (a trailing one) are fine */
		if (!first && (is_punct(p, ",") || is_punct(p, ")")))
			continue;
		first = false;
		if (accept_kw(p, "primary")) {
			if (pk_clause)
				return err_set(ERR_REFUSED,
					       "Multiple PRIMARY KEYs specifed "
					       "(exactly one required)");
			pk_clause = true;
			if (primary_key(p, ct) != 0)
				return -1;
			continue;
		}
		struct cql_column_def *c = vec_push(p, &cols);
		if (!c || column_def(p, c) != 0)
			return -1;
	} while (accept_punct(p, ","));
	if (expect_punct(p, ")") != 0)
		return -1;
	ct->columns = cols.items;
	ct->column_count = cols.count;
	for (size_t i = 0; i < ct->column_count; i++) {
		if (!ct->columns[i].primary_key)
			continue;
		if (pk_clause || ct->partition_key_count)
			return err_set(
				ERR_REFUSED,
				"Multiple PRIMARY KEYs specifed (exactly "
				"one required)");
		const char **one = arena_alloc(p->a, sizeof(*one));
		if (!one)
			return -1;
		one[0] = ct->columns[i].name;
		ct->partition_key = one;
		ct->partition_key_count = 1;
	}
	if (!ct->partition_key_count)
		return err_set(ERR_REFUSED,
			       "No PRIMARY KEY specifed for table '%s%s%s' "
			       "(exactly one required)",
			       ct->table.keyspace ? ct->table.keyspace : "",
			       ct->table.keyspace ? "." : "", ct->table.name);
	if (accept_kw(p, "with") && table_options(p, ct, &opts) != 0)
		return -1;
	ct->options = opts.items;
	ct->option_count = opts.count;
	return 0;
}

/* ALTER TABLE ... DROP c [USING TIMESTAMP <integer>] */
static int drop_timestamp(struct parser *p, struct cql_alter_table *at)
{
	if (!accept_kw(p, "using"))
		return 0;
	if (expect_kw(p, "timestamp") != 0)
		return -1;
	struct cql_term *t = term(p);
	if (!t)
		return -1;
	if (t->kind != CQL_TERM_INTEGER || t->len > 18)
		return err_set(ERR_INVALID,
			       "ALTER TABLE ... DROP USING TIMESTAMP takes an "
			       "integer literal");
	int64_t v = 0;
	for (size_t i = 0; i < t->len; i++)
		v = v * 10 + (t->text[i] - '0');
	at->has_timestamp = true;
	at->timestamp = t->negative ? -v : v;
	return 0;
}

static int alter_table(struct parser *p, struct cql_stmt *s)
{
	struct cql_alter_table *at = &s->u.alter_table;
	s->kind = CQL_STMT_ALTER_TABLE;
	if (qname(p, &at->table) != 0)
		return -1;
	if (accept_kw(p, "add")) {
		struct vec cols = VEC(struct cql_column_def);
		bool paren = accept_punct(p, "(");
		do {
			struct cql_column_def *c = vec_push(p, &cols);
			if (!c || column_def(p, c) != 0)
				return -1;
		} while (paren && accept_punct(p, ","));
		if (paren && expect_punct(p, ")") != 0)
			return -1;
		at->kind = CQL_ALTER_ADD;
		at->columns = cols.items;
		at->column_count = cols.count;
		return 0;
	}
	if (accept_kw(p, "drop")) {
		at->kind = CQL_ALTER_DROP;
		if (accept_punct(p, "(")) {
			if (ident_list(p, &at->names, &at->name_count) ||
			    expect_punct(p, ")"))
				return -1;
		} else {
			const char **one = arena_alloc(p->a, sizeof(*one));
			if (!one || !(one[0] = ident(p)))
				return -1;
			at->names = one;
			at->name_count = 1;
		}
		return drop_timestamp(p, at);
	}
	if (accept_kw(p, "rename")) {
		struct vec names = VEC(const char *);
		at->kind = CQL_ALTER_RENAME;
		do {
			const char **from = vec_push(p, &names);
			if (!from || !(*from = ident(p)) ||
			    expect_kw(p, "to") != 0)
				return -1;
			const char **to = vec_push(p, &names);
			if (!to || !(*to = ident(p)))
				return -1;
		} while (accept_kw(p, "and"));
		at->names = names.items;
		at->name_count = names.count;
		return 0;
	}
	if (accept_kw(p, "with")) {
		struct cql_create_table tmp = {0};
		struct vec opts = VEC(struct cql_option);
		if (table_options(p, &tmp, &opts) != 0)
			return -1;
		if (tmp.order_count)
			return err_set(ERR_INVALID,
				       "Cannot change the clustering order of "
				       "an existing table");
		at->kind = CQL_ALTER_WITH;
		at->options = opts.items;
		at->option_count = opts.count;
		return 0;
	}
	if (is_kw(p, "alter"))
		return err_set(ERR_INVALID,
			       "Altering column types is no longer "
			       "supported");
	return syntax_error(p, "ADD, DROP, RENAME or WITH");
}

/* CREATE ... : the object kind decides. */
/* CREATE, ALTER or DROP of anything but a keyspace or a table: a clear
 * "not supported" for the schema objects Cassini lacks, else a syntax
 * error. */
static int other_schema_object(struct parser *p)
{
	static const struct {
		const char *kw, *what;
	} objects[] = {
		{"index", "Secondary indexes"},
		{"materialized", "Materialized views"},
		{"type", "User-defined types"},
		{"function", "User-defined functions and aggregates"},
		{"aggregate", "User-defined functions and aggregates"},
		{"trigger", "Triggers"},
		{"role", "Roles and users"},
		{"user", "Roles and users"},
	};
	for (size_t i = 0; i < sizeof(objects) / sizeof(objects[0]); i++)
		if (is_kw(p, objects[i].kw))
			return unsupported(objects[i].what);
	return syntax_error(p, "KEYSPACE or TABLE");
}

static int create(struct parser *p, struct cql_stmt *s)
{
	if (accept_kw(p, "keyspace") || accept_kw(p, "schema")) {
		s->kind = CQL_STMT_CREATE_KEYSPACE;
		if (if_not_exists(p, &s->u.keyspace.if_not_exists) != 0 ||
		    !(s->u.keyspace.name = ident(p)))
			return -1;
		return keyspace_options(p, &s->u.keyspace);
	}
	if (accept_kw(p, "table") || accept_kw(p, "columnfamily"))
		return create_table(p, s);
	if (is_kw(p, "custom")) /* CREATE CUSTOM INDEX */
		return unsupported("Secondary indexes");
	if (is_kw(p, "or")) /* CREATE OR REPLACE FUNCTION */
		return unsupported("User-defined functions and aggregates");
	return other_schema_object(p);
}

static int alter(struct parser *p, struct cql_stmt *s)
{
	if (accept_kw(p, "keyspace") || accept_kw(p, "schema")) {
		s->kind = CQL_STMT_ALTER_KEYSPACE;
		if (!(s->u.keyspace.name = ident(p)))
			return -1;
		return keyspace_options(p, &s->u.keyspace);
	}
	if (accept_kw(p, "table") || accept_kw(p, "columnfamily"))
		return alter_table(p, s);
	return other_schema_object(p);
}

static int drop(struct parser *p, struct cql_stmt *s)
{
	if (accept_kw(p, "keyspace") || accept_kw(p, "schema")) {
		s->kind = CQL_STMT_DROP_KEYSPACE;
		if (if_exists(p, &s->u.keyspace.if_exists) != 0)
			return -1;
		s->u.keyspace.name = ident(p);
		return s->u.keyspace.name ? 0 : -1;
	}
	if (accept_kw(p, "table") || accept_kw(p, "columnfamily")) {
		s->kind = CQL_STMT_DROP_TABLE;
		return if_exists(p, &s->u.drop_table.if_exists) ||
		       qname(p, &s->u.drop_table.table);
	}
	return other_schema_object(p);
}

/* ---- DML ----------------------------------------------------------------- */

static int using_clause(struct parser *p, struct cql_using *u, bool ttl_ok)
{
	if (!accept_kw(p, "using"))
		return 0;
	do {
		if (ttl_ok && accept_kw(p, "ttl")) {
			if (!(u->ttl = term(p)))
				return -1;
		} else if (accept_kw(p, "timestamp")) {
			if (!(u->timestamp = term(p)))
				return -1;
		} else {
			return syntax_error(p, ttl_ok ? "TTL or TIMESTAMP"
						      : "TIMESTAMP");
		}
	} while (accept_kw(p, "and"));
	return 0;
}

static int relation_op(struct parser *p, enum cql_op *op)
{
	static const struct {
		const char *text;
		enum cql_op op;
	} ops[] = {{"=", CQL_OP_EQ}, {"<", CQL_OP_LT},   {"<=", CQL_OP_LTE},
		   {">", CQL_OP_GT}, {">=", CQL_OP_GTE}, {"!=", CQL_OP_NEQ}};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (accept_punct(p, ops[i].text)) {
			*op = ops[i].op;
			return 0;
		}
	}
	if (accept_kw(p, "in")) {
		*op = CQL_OP_IN;
		return 0;
	}
	return syntax_error(p, "a comparison operator");
}

static int relation(struct parser *p, struct cql_relation *r)
{
	if (accept_kw(p, "token")) {
		r->kind = CQL_REL_TOKEN;
		if (expect_punct(p, "(") != 0 ||
		    ident_list(p, &r->columns, &r->column_count) != 0 ||
		    expect_punct(p, ")") != 0 || relation_op(p, &r->op) != 0)
			return -1;
		if (r->op == CQL_OP_IN || r->op == CQL_OP_NEQ)
			return err_set(ERR_INVALID,
				       "Only EQ and range relations are "
				       "supported on token()");
		r->value = term(p);
		return r->value ? 0 : -1;
	}
	if (accept_punct(p, "(")) {
		r->kind = CQL_REL_TUPLE;
		if (ident_list(p, &r->columns, &r->column_count) != 0 ||
		    expect_punct(p, ")") != 0 || relation_op(p, &r->op) != 0)
			return -1;
		r->value = term(p);
		return r->value ? 0 : -1;
	}
	const char **one = arena_alloc(p->a, sizeof(*one));
	if (!one || !(one[0] = ident(p)))
		return -1;
	r->kind = CQL_REL_COLUMN;
	r->columns = one;
	r->column_count = 1;
	if (is_punct(p, "["))
		return unsupported("Relations on collection elements");
	if (accept_kw(p, "contains")) {
		r->op = accept_kw(p, "key") ? CQL_OP_CONTAINS_KEY
					    : CQL_OP_CONTAINS;
	} else if (accept_kw(p, "like")) {
		return unsupported("LIKE relations (they need an index)");
	} else if (relation_op(p, &r->op) != 0) {
		return -1;
	}
	r->value = term(p);
	return r->value ? 0 : -1;
}

static int where_clause(struct parser *p, struct cql_relation **out,
			size_t *count)
{
	struct vec rels = VEC(struct cql_relation);
	do {
		struct cql_relation *r = vec_push(p, &rels);
		if (!r || relation(p, r) != 0)
			return -1;
	} while (accept_kw(p, "and"));
	*out = rels.items;
	*count = rels.count;
	return 0;
}

static int refuse_conditions(struct parser *p)
{
	if (is_kw(p, "if"))
		return unsupported("Lightweight transactions (IF conditions)");
	return 0;
}

static int column_ref(struct parser *p, struct cql_column_ref *c)
{
	if (!(c->name = ident(p)))
		return -1;
	if (accept_punct(p, "[")) {
		if (!(c->element = term(p)) || expect_punct(p, "]") != 0)
			return -1;
	}
	return 0;
}

static int insert(struct parser *p, struct cql_stmt *s)
{
	struct cql_insert *in = &s->u.insert;
	s->kind = CQL_STMT_INSERT;
	if (expect_kw(p, "into") != 0 || qname(p, &in->table) != 0)
		return -1;
	if (is_kw(p, "json"))
		return unsupported("INSERT JSON statements");
	if (expect_punct(p, "(") != 0 ||
	    ident_list(p, &in->columns, &in->column_count) != 0 ||
	    expect_punct(p, ")") != 0 || expect_kw(p, "values") != 0 ||
	    expect_punct(p, "(") != 0)
		return -1;
	struct vec values = VEC(struct cql_term *);
	do {
		struct cql_term **slot = vec_push(p, &values);
		if (!slot || !(*slot = term(p)))
			return -1;
	} while (accept_punct(p, ","));
	if (expect_punct(p, ")") != 0)
		return -1;
	in->values = values.items;
	if (values.count != in->column_count)
		return err_set(ERR_REFUSED, "Unmatched column names/values");
	if (refuse_conditions(p) != 0)
		return -1;
	return using_clause(p, &in->using, true);
}

/* c = v | c[k] = v | c = c + v | c = c - v | c = v + c */
static int assignment(struct parser *p, struct cql_assignment *a)
{
	if (column_ref(p, &a->target) != 0 || expect_punct(p, "=") != 0)
		return -1;
	a->kind = CQL_ASSIGN_SET;
	struct cql_token *t = tok(p);
	if ((t->kind == CQL_TOK_IDENT || t->kind == CQL_TOK_QIDENT) &&
	    !a->target.element &&
	    (tok_is_punct(tok_at(p, 1), "+") ||
	     tok_is_punct(tok_at(p, 1), "-"))) {
		const char *name = ident(p);
		if (!name)
			return -1;
		if (strcmp(name, a->target.name) != 0)
			return err_set(ERR_INVALID,
				       "Only expressions of the form X = X %s "
				       "<value> are supported",
				       is_punct(p, "+") ? "+" : "-");
		a->kind = accept_punct(p, "+") ? CQL_ASSIGN_ADD
					       : CQL_ASSIGN_REMOVE;
		if (a->kind == CQL_ASSIGN_REMOVE)
			advance(p);
		a->value = term(p);
		return a->value ? 0 : -1;
	}
	if (!(a->value = term(p)))
		return -1;
	if (accept_punct(p, "+")) {
		const char *name = ident(p);
		if (!name)
			return -1;
		if (strcmp(name, a->target.name) != 0)
			return err_set(
				ERR_INVALID,
				"Only expressions of the form X = <value> "
				"+ X are supported");
		a->kind = CQL_ASSIGN_PREPEND;
	}
	return 0;
}

static int update(struct parser *p, struct cql_stmt *s)
{
	struct cql_update *up = &s->u.update;
	struct vec sets = VEC(struct cql_assignment);
	s->kind = CQL_STMT_UPDATE;
	if (qname(p, &up->table) != 0 ||
	    using_clause(p, &up->using, true) != 0 || expect_kw(p, "set") != 0)
		return -1;
	do {
		struct cql_assignment *a = vec_push(p, &sets);
		if (!a || assignment(p, a) != 0)
			return -1;
	} while (accept_punct(p, ","));
	up->assignments = sets.items;
	up->assignment_count = sets.count;
	if (expect_kw(p, "where") != 0 ||
	    where_clause(p, &up->where, &up->where_count) != 0)
		return -1;
	return refuse_conditions(p);
}

static int delete_stmt(struct parser *p, struct cql_stmt *s)
{
	struct cql_delete *d = &s->u.del;
	s->kind = CQL_STMT_DELETE;
	if (!is_kw(p, "from")) {
		struct vec cols = VEC(struct cql_column_ref);
		do {
			struct cql_column_ref *c = vec_push(p, &cols);
			if (!c || column_ref(p, c) != 0)
				return -1;
		} while (accept_punct(p, ","));
		d->columns = cols.items;
		d->column_count = cols.count;
	}
	if (expect_kw(p, "from") != 0 || qname(p, &d->table) != 0 ||
	    using_clause(p, &d->using, false) != 0 ||
	    expect_kw(p, "where") != 0 ||
	    where_clause(p, &d->where, &d->where_count) != 0)
		return -1;
	return refuse_conditions(p);
}

/* ---- SELECT -------------------------------------------------------------- */

static int selector(struct parser *p, struct cql_selector *sel);

static int selector_args(struct parser *p, struct cql_selector *sel)
{
	struct vec args = VEC(struct cql_selector);
	if (!accept_punct(p, ")")) {
		do {
			struct cql_selector *a = vec_push(p, &args);
			if (!a || selector(p, a) != 0)
				return -1;
		} while (accept_punct(p, ","));
		if (expect_punct(p, ")") != 0)
			return -1;
	}
	sel->args = args.items;
	sel->arg_count = args.count;
	return 0;
}

static int selector_inner(struct parser *p, struct cql_selector *sel);

static int selector(struct parser *p, struct cql_selector *sel)
{
	if (enter(p) != 0)
		return -1;
	int rc = selector_inner(p, sel);
	leave(p);
	return rc;
}

static int selector_inner(struct parser *p, struct cql_selector *sel)
{
	struct cql_token *t = tok(p);
	bool name_tok = t->kind == CQL_TOK_QIDENT ||
			(t->kind == CQL_TOK_IDENT && !tok_is_kw(t, "null") &&
			 !tok_is_kw(t, "true") && !tok_is_kw(t, "false") &&
			 !tok_is_kw(t, "nan") && !tok_is_kw(t, "infinity"));
	if (name_tok && tok_is_punct(tok_at(p, 1), "(")) {
		/* Function names may be keywords (token, ttl, writetime). */
		sel->kind = CQL_SEL_FUNCTION;
		if (!(sel->name = lower_name(p, t)))
			return -1;
		advance(p); /* name */
		advance(p); /* ( */
		if (strcmp(sel->name, "cast") == 0 &&
		    t->kind == CQL_TOK_IDENT) {
			/* CAST(selector AS type) */
			sel->kind = CQL_SEL_CAST;
			sel->args = node(p, sizeof(*sel->args));
			sel->arg_count = 1;
			if (!sel->args || selector(p, sel->args) != 0 ||
			    expect_kw(p, "as") != 0 ||
			    !(sel->type = type_ast(p)))
				return -1;
			return expect_punct(p, ")");
		}
		if (strcmp(sel->name, "count") == 0 && is_punct(p, "*")) {
			advance(p);
			sel->kind = CQL_SEL_COUNT_STAR;
			return expect_punct(p, ")");
		}
		return selector_args(p, sel);
	}
	if (name_tok) {
		sel->kind = CQL_SEL_COLUMN;
		if (!(sel->name = ident(p)))
			return -1;
		if (!accept_punct(p, "["))
			return 0;
		sel->kind = CQL_SEL_ELEMENT;
		if (!(sel->term = term(p)))
			return -1;
		if (is_punct(p, "."))
			return unsupported(
				"Slices of collections in selections");
		return expect_punct(p, "]");
	}
	sel->kind = CQL_SEL_TERM;
	sel->term = term(p);
	return sel->term ? 0 : -1;
}

static int order_by(struct parser *p, struct cql_select *q)
{
	struct vec order = VEC(struct cql_ordering);
	do {
		struct cql_ordering *o = vec_push(p, &order);
		if (!o || !(o->column = ident(p)))
			return -1;
		if (accept_kw(p, "desc"))
			o->descending = true;
		else
			accept_kw(p, "asc");
	} while (accept_punct(p, ","));
	q->order = order.items;
	q->order_count = order.count;
	return 0;
}

static int select_tail(struct parser *p, struct cql_select *q)
{
	if (accept_kw(p, "where") &&
	    where_clause(p, &q->where, &q->where_count) != 0)
		return -1;
	if (accept_kw(p, "group")) {
		const char **cols;
		size_t n;
		if (expect_kw(p, "by") != 0 || ident_list(p, &cols, &n) != 0)
			return -1;
		q->has_group_by = true;
	}
	if (accept_kw(p, "order") &&
	    (expect_kw(p, "by") != 0 || order_by(p, q) != 0))
		return -1;
	if (accept_kw(p, "per")) {
		if (expect_kw(p, "partition") != 0 ||
		    expect_kw(p, "limit") != 0 ||
		    !(q->per_partition_limit = term(p)))
			return -1;
	}
	if (accept_kw(p, "limit") && !(q->limit = term(p)))
		return -1;
	if (accept_kw(p, "allow")) {
		if (expect_kw(p, "filtering") != 0)
			return -1;
		q->allow_filtering = true;
	}
	return 0;
}

static int select_stmt(struct parser *p, struct cql_stmt *s)
{
	struct cql_select *q = &s->u.select;
	s->kind = CQL_STMT_SELECT;
	if (is_kw(p, "json"))
		return unsupported("SELECT JSON statements");
	if (is_kw(p, "distinct") && !tok_is_kw(tok_at(p, 1), "from") &&
	    !tok_is_punct(tok_at(p, 1), ",")) {
		advance(p);
		q->distinct = true;
	}
	if (accept_punct(p, "*")) {
		q->star = true;
	} else {
		struct vec sels = VEC(struct cql_selector);
		do {
			struct cql_selector *sel = vec_push(p, &sels);
			if (!sel || selector(p, sel) != 0)
				return -1;
			if (accept_kw(p, "as") && !(sel->alias = ident(p)))
				return -1;
		} while (accept_punct(p, ","));
		q->selectors = sels.items;
		q->selector_count = sels.count;
	}
	if (expect_kw(p, "from") != 0 || qname(p, &q->table) != 0)
		return -1;
	return select_tail(p, q);
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
		    !is_kw(p, "with") && !(d->name.name = ident(p)))
			return -1;
		return 0;
	}
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (accept_kw(p, named[i].kw)) {
			d->kind = named[i].kind;
			return qname(p, &d->name);
		}
	if (accept_kw(p, "materialized")) {
		d->kind = CQL_DESCRIBE_VIEW;
		if (expect_kw(p, "view") != 0)
			return -1;
		return qname(p, &d->name);
	}
	d->kind = CQL_DESCRIBE_NAME;
	return qname(p, &d->name);
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
	if (accept_kw(p, "insert"))
		return insert(p, s);
	if (accept_kw(p, "update"))
		return update(p, s);
	if (accept_kw(p, "delete"))
		return delete_stmt(p, s);
	if (in_batch)
		return syntax_error(p, "INSERT, UPDATE or DELETE");
	if (accept_kw(p, "select"))
		return select_stmt(p, s);
	if (accept_kw(p, "begin"))
		return batch_stmt(p, s);
	if (accept_kw(p, "describe") || accept_kw(p, "desc"))
		return describe(p, s);
	if (accept_kw(p, "use")) {
		s->kind = CQL_STMT_USE;
		s->u.use_keyspace = ident(p);
		return s->u.use_keyspace ? 0 : -1;
	}
	if (accept_kw(p, "create"))
		return create(p, s);
	if (accept_kw(p, "alter"))
		return alter(p, s);
	if (accept_kw(p, "drop"))
		return drop(p, s);
	if (accept_kw(p, "truncate")) {
		s->kind = CQL_STMT_TRUNCATE;
		if (!accept_kw(p, "table"))
			accept_kw(p, "columnfamily");
		return qname(p, &s->u.truncate);
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
	if (expect_kw(p, "batch") != 0 || using_clause(p, &b->using, true) != 0)
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
	struct parser p = {.a = a};
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
		if (cql_parse_role(a, p.toks, p.count, s) != 0)
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
		syntax_error(&p, "<EOF>");
		return NULL;
	}
	*bind_count = p.binds;
	if (bind_names)
		*bind_names = p.bind_names;
	return s;
}
