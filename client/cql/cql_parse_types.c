/*
 * The user-defined type statements of Cassandra 4.1's grammar (Parser.g):
 *
 *   CREATE TYPE [IF NOT EXISTS] [ks.]t ( f type [, f type ...] [,] )
 *   ALTER TYPE [IF EXISTS] [ks.]t ADD [IF NOT EXISTS] f type
 *   ALTER TYPE [IF EXISTS] [ks.]t RENAME [IF EXISTS] f TO g [AND f TO g ...]
 *   ALTER TYPE [IF EXISTS] [ks.]t ALTER f TYPE type   (refused when
 *                                                      applied, as 4.1)
 *   DROP TYPE [IF EXISTS] [ks.]t
 *
 * Names are identifiers: unquoted ones lower-cased, "quoted" ones as
 * written. A type name may not be a native type's (a syntax error, as the
 * keyword is not an identifier there) nor one of Cassandra's reserved type
 * names. Field types are parsed here into struct cql_type_ast (user types
 * as [ks.]name, frozen<...> as a flag); what they name is checked when the
 * statement is applied (client/schema/schema_types.c).
 */
#include "client/cql/cql_parse.h"

#include "client/cql/cql_parse_internal.h"
#include "common/err.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* How deep frozen<list<frozen<map<...>>>> may nest. */
#define TYPE_DEPTH_MAX 32

/* `expect` with the token name Cassandra's parser shows. */
static int expect(struct parser *p, const char *kw, const char *shown)
{
	return accept_kw(p, kw) ? 0 : syntax_error(p, shown);
}

static void *alloc(struct parser *p, size_t size)
{
	void *m = arena_alloc(p->a, size);
	if (!m)
		err_set(ERR_NOMEM, "out of memory");
	else
		memset(m, 0, size);
	return m;
}

static char *copy(struct parser *p, const struct cql_token *t, bool lower)
{
	char *d = alloc(p, t->len + 1);
	if (!d)
		return NULL;
	for (size_t i = 0; i < t->len; i++)
		d[i] = lower ? (char)tolower((unsigned char)t->text[i])
			     : t->text[i];
	d[t->len] = '\0';
	return d;
}

/* The native types' names: keywords in Cassandra's grammar, so never a
 * user type's name. */
static const char *const native_types[] = {
	"ascii",    "bigint",    "blob",    "boolean", "counter", "decimal",
	"double",   "duration",  "float",   "inet",    "int",     "smallint",
	"text",     "timestamp", "tinyint", "uuid",    "varchar", "varint",
	"timeuuid", "date",      "time",
};

/* Words Cassandra reserves for types it may add (ReservedTypeNames). */
static const char *const reserved_types[] = {
	"byte", "complex", "enum", "interval", "macaddr", "bitstring",
};

static bool in(const struct cql_token *t, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (tok_is_kw(t, list[i]))
			return true;
	return false;
}

#define IN(t, list) in(t, list, sizeof(list) / sizeof(list[0]))

/* An identifier (fident / noncol_ident): unquoted lower-cased. */
static const char *ident(struct parser *p)
{
	const struct cql_token *t = tok(p);
	if (t->kind == CQL_TOK_QIDENT) {
		advance(p);
		return copy(p, t, false);
	}
	if (t->kind != CQL_TOK_IDENT || cql_parse_is_reserved(t)) {
		syntax_error(p, NULL);
		return NULL;
	}
	advance(p);
	return copy(p, t, true);
}

/* userTypeName: [ks.]name, name not a native or reserved type name. */
static int type_name(struct parser *p, struct cql_qname *q)
{
	bool qualified = p->pos + 1 < p->count &&
			 p->toks[p->pos + 1].kind == CQL_TOK_PUNCT &&
			 p->toks[p->pos + 1].len == 1 &&
			 p->toks[p->pos + 1].text[0] == '.';
	q->keyspace = NULL;
	if (qualified && !(q->keyspace = ident(p)))
		return -1;
	if (qualified)
		advance(p); /* . */
	const struct cql_token *t = tok(p);
	/* unqualified, Cassandra's (ks '.')? decision read the next token */
	if (t->kind == CQL_TOK_IDENT && IN(t, native_types))
		return cql_parse_syntax_error(p, p->pos, qualified ? 0 : 1,
					      NULL);
	bool reserved = t->kind == CQL_TOK_IDENT && IN(t, reserved_types);
	if (!(q->name = ident(p)))
		return -1;
	if (reserved)
		return err_set(ERR_INVALID,
			       "Invalid (reserved) user type name %s", q->name);
	return 0;
}

/* comparatorType: a native type, list/set/map/tuple<...>, frozen<...> or
 * a user type [ks.]name. */
static struct cql_type_ast *type_ast(struct parser *p, int depth)
{
	if (depth > TYPE_DEPTH_MAX) {
		err_set(ERR_INVALID, "type nested more than %d levels deep",
			TYPE_DEPTH_MAX);
		return NULL;
	}
	const struct cql_token *t = tok(p);
	struct cql_type_ast *ty = alloc(p, sizeof(*ty));
	if (!ty)
		return NULL;
	if (t->kind == CQL_TOK_STRING) { /* a custom type's class */
		err_set(ERR_UNSUPPORTED,
			"Custom types are not supported by Cassini yet");
		return NULL;
	}
	if (t->kind != CQL_TOK_IDENT && t->kind != CQL_TOK_QIDENT) {
		syntax_error(p, NULL);
		return NULL;
	}
	bool quoted = t->kind == CQL_TOK_QIDENT;
	advance(p);
	const char *name = copy(p, t, !quoted);
	if (!name)
		return NULL;
	if (!quoted && strcmp(name, "frozen") == 0 && is_punct(p, "<")) {
		advance(p);
		struct cql_type_ast *inner = type_ast(p, depth + 1);
		if (!inner || expect_punct(p, ">") != 0)
			return NULL;
		inner->frozen = true;
		return inner;
	}
	if (accept_punct(p, ".")) { /* ks.udt */
		ty->keyspace = name;
		t = tok(p);
		if (t->kind != CQL_TOK_IDENT && t->kind != CQL_TOK_QIDENT) {
			syntax_error(p, NULL);
			return NULL;
		}
		advance(p);
		if (!(name = copy(p, t, t->kind == CQL_TOK_IDENT)))
			return NULL;
		ty->name = name;
		return ty;
	}
	ty->name = name;
	if (!quoted && accept_punct(p, "<")) {
		size_t cap = 4, n = 0;
		struct cql_type_ast **params = alloc(p, cap * sizeof(*params));
		if (!params)
			return NULL;
		do {
			if (n == cap) {
				struct cql_type_ast **more =
					alloc(p, 2 * cap * sizeof(*more));
				if (!more)
					return NULL;
				memcpy(more, params, n * sizeof(*params));
				params = more;
				cap *= 2;
			}
			if (!(params[n++] = type_ast(p, depth + 1)))
				return NULL;
		} while (accept_punct(p, ","));
		if (expect_punct(p, ">") != 0)
			return NULL;
		ty->params = params;
		ty->param_count = n;
	}
	return ty;
}

struct fields {
	const char **names;
	struct cql_type_ast **types;
	size_t count, cap;
};

static int field_push(struct parser *p, struct fields *f, const char *name,
		      struct cql_type_ast *type)
{
	if (f->count == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 8;
		const char **names = alloc(p, cap * sizeof(*names));
		struct cql_type_ast **types = alloc(p, cap * sizeof(*types));
		if (!names || !types)
			return -1;
		if (f->count) {
			memcpy(names, f->names, f->count * sizeof(*names));
			memcpy(types, f->types, f->count * sizeof(*types));
		}
		f->names = names;
		f->types = types;
		f->cap = cap;
	}
	f->names[f->count] = name;
	f->types[f->count] = type;
	f->count++;
	return 0;
}

static int if_not_exists(struct parser *p, bool *out)
{
	if (!accept_kw(p, "if"))
		return 0;
	*out = true;
	return expect(p, "not", "K_NOT") || expect(p, "exists", "K_EXISTS");
}

static int if_exists(struct parser *p, bool *out)
{
	if (!accept_kw(p, "if"))
		return 0;
	*out = true;
	return expect(p, "exists", "K_EXISTS");
}

/* ( f type [, f type ...] [,] ) */
static int create_fields(struct parser *p, struct fields *f)
{
	if (expect_punct(p, "(") != 0)
		return -1;
	do {
		if (is_punct(p, ")") && f->count > 0)
			break; /* a trailing comma */
		const char *name = ident(p);
		struct cql_type_ast *type = name ? type_ast(p, 0) : NULL;
		if (!type || field_push(p, f, name, type) != 0)
			return -1;
	} while (accept_punct(p, ","));
	return expect_punct(p, ")");
}

static int alter_body(struct parser *p, struct cql_type_stmt *ts,
		      struct fields *f)
{
	if (accept_kw(p, "add")) {
		ts->alter = CQL_ALTER_TYPE_ADD;
		if (if_not_exists(p, &ts->field_if) != 0)
			return -1;
		const char *name = ident(p);
		struct cql_type_ast *type = name ? type_ast(p, 0) : NULL;
		return type ? field_push(p, f, name, type) : -1;
	}
	if (accept_kw(p, "rename")) {
		ts->alter = CQL_ALTER_TYPE_RENAME;
		if (if_exists(p, &ts->field_if) != 0)
			return -1;
		do {
			const char *from = ident(p);
			if (!from || expect(p, "to", "K_TO") != 0)
				return -1;
			const char *to = ident(p);
			if (!to || field_push(p, f, from, NULL) != 0 ||
			    field_push(p, f, to, NULL) != 0)
				return -1;
		} while (accept_kw(p, "and"));
		return 0;
	}
	if (accept_kw(p, "alter")) {
		/* refused when applied (Invalid, as Cassandra) */
		ts->alter = CQL_ALTER_TYPE_ALTER;
		const char *name = ident(p);
		if (!name || expect(p, "type", "K_TYPE") != 0)
			return -1;
		struct cql_type_ast *type = type_ast(p, 0);
		return type ? field_push(p, f, name, type) : -1;
	}
	return syntax_error(p, NULL);
}

bool cql_is_type_statement(const struct cql_token *t, size_t n)
{
	return n >= 2 &&
	       (tok_is_kw(&t[0], "create") || tok_is_kw(&t[0], "alter") ||
		tok_is_kw(&t[0], "drop")) &&
	       tok_is_kw(&t[1], "type");
}

int cql_parse_type_stmt(struct parser *p, struct cql_stmt *s)
{
	struct cql_type_stmt *ts = &s->u.type;
	struct fields f = {0};
	memset(ts, 0, sizeof(*ts));
	int rc;
	if (accept_kw(p, "create")) {
		s->kind = CQL_STMT_CREATE_TYPE;
		advance(p); /* TYPE */
		rc = if_not_exists(p, &ts->if_not_exists) ||
		     type_name(p, &ts->name) || create_fields(p, &f);
	} else if (accept_kw(p, "alter")) {
		s->kind = CQL_STMT_ALTER_TYPE;
		advance(p);
		rc = if_exists(p, &ts->if_exists) || type_name(p, &ts->name) ||
		     alter_body(p, ts, &f);
	} else {
		s->kind = CQL_STMT_DROP_TYPE;
		advance(p);
		advance(p);
		rc = if_exists(p, &ts->if_exists) || type_name(p, &ts->name);
	}
	if (rc != 0)
		return -1;
	while (is_punct(p, ";"))
		advance(p);
	if (tok(p)->kind != CQL_TOK_EOF)
		return syntax_error(p, NULL);
	ts->fields = f.names;
	ts->types = f.types;
	ts->field_count = f.count;
	return 0;
}
