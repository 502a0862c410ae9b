/*
 * The parser's insides, shared by cql_parse.c (identifiers, terms, types,
 * statement dispatch, BATCH, USE, TRUNCATE, DESCRIBE), cql_parse_ddl.c
 * (CREATE/ALTER/DROP KEYSPACE and TABLE) and cql_parse_dml.c (INSERT,
 * UPDATE, DELETE and SELECT): the parser's state and its token helpers.
 */
#ifndef CASSINI_CLIENT_CQL_PARSE_INTERNAL_H
#define CASSINI_CLIENT_CQL_PARSE_INTERNAL_H

#include "client/cql/cql_lex_internal.h"
#include "client/cql/cql_parse.h"
#include "common/err.h"

#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>
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
	int depth;       /* nesting of terms, types and selectors */
	const char *src; /* the statement, for the error snippet */
	size_t src_len;
	size_t stmt_start; /* the statement's first token */
};

/* ---- token helpers ------------------------------------------------------- */

static inline struct cql_token *tok(struct parser *p)
{
	return &p->toks[p->pos];
}

static inline struct cql_token *tok_at(struct parser *p, size_t ahead)
{
	size_t i = p->pos + ahead;
	return &p->toks[i < p->count ? i : p->count - 1];
}

static inline void advance(struct parser *p)
{
	if (p->pos + 1 < p->count)
		p->pos++;
}

static inline bool tok_is_kw(const struct cql_token *t, const char *kw)
{
	return t->kind == CQL_TOK_IDENT && strlen(kw) == t->len &&
	       strncasecmp(t->text, kw, t->len) == 0;
}

/* A word that may not be a bare identifier (a keyspace, table, column,
 * type or field name unquoted): Cassandra's reserved keywords. */
bool cql_parse_is_reserved(const struct cql_token *t);

static inline bool tok_is_punct(const struct cql_token *t, const char *s)
{
	return t->kind == CQL_TOK_PUNCT && strlen(s) == t->len &&
	       memcmp(t->text, s, t->len) == 0;
}

static inline bool is_kw(struct parser *p, const char *kw)
{
	return tok_is_kw(tok(p), kw);
}

static inline bool is_punct(struct parser *p, const char *s)
{
	return tok_is_punct(tok(p), s);
}

static inline bool accept_kw(struct parser *p, const char *kw)
{
	if (!is_kw(p, kw))
		return false;
	advance(p);
	return true;
}

static inline bool accept_punct(struct parser *p, const char *s)
{
	if (!is_punct(p, s))
		return false;
	advance(p);
	return true;
}

/* A syntax error at the current token, in Cassandra's words (see
 * cql_parse_error.c): "mismatched input 'x' expecting K_FROM" when
 * `expecting` names the one token Cassandra's grammar wanted there (its
 * token name: K_FROM, ')', STRING_LITERAL, EOF), else "no viable
 * alternative at input 'x'"; then the query snippet with the token at
 * `bracket` (a token index, at most the current one) in brackets: the
 * current one, or where a decision Cassandra takes by reading ahead
 * started; `ahead` is how many tokens past the current one Cassandra's
 * parser had read (its buffer, where the snippet ends, unless that is
 * further than the bracketed token + 2). Returns -1 with ERR_INVALID. */
int cql_parse_syntax_error(struct parser *p, size_t bracket, size_t ahead,
			   const char *expecting);

static inline int syntax_error(struct parser *p, const char *expecting)
{
	return cql_parse_syntax_error(p, p->pos, 0, expecting);
}

/* No viable alternative at the current token, for a decision Cassandra's
 * parser predicts by reading ahead from token `start` and then rewinds:
 * the snippet brackets `start`. */
static inline int syntax_error_from(struct parser *p, size_t start)
{
	return cql_parse_syntax_error(p, start, 0, NULL);
}

/* Terms, types and selectors nest; deeper than CQL_MAX_DEPTH is refused
 * as a syntax error before the recursion can exhaust the stack. */
static inline int enter(struct parser *p)
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

static inline void leave(struct parser *p)
{
	p->depth--;
}

static inline int expect_kw(struct parser *p, const char *kw)
{
	if (accept_kw(p, kw))
		return 0;
	/* Cassandra's token names: K_ and the word, but TABLE is lexed as
	 * K_COLUMNFAMILY */
	if (strcasecmp(kw, "table") == 0)
		kw = "columnfamily";
	char up[40] = "K_";
	size_t i = 0;
	for (; kw[i] && i + 2 < sizeof(up) - 1; i++)
		up[i + 2] = (char)toupper((unsigned char)kw[i]);
	up[i + 2] = '\0';
	return syntax_error(p, up);
}

static inline int expect_punct(struct parser *p, const char *s)
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

static inline int unsupported(const char *what)
{
	return err_set(ERR_UNSUPPORTED, "%s are not supported by Cassini yet",
		       what);
}

/* ---- small arena vectors ------------------------------------------------- */

struct vec {
	void *items;
	size_t count, cap, size;
};

static inline void *vec_push(struct parser *p, struct vec *v)
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

static inline void *node(struct parser *p, size_t size)
{
	void *n = arena_alloc(p->a, size);
	if (n)
		memset(n, 0, size);
	return n;
}

/* cql_parse.c: identifiers, terms and types */
const char *cql_parse_ident(struct parser *p);
int cql_parse_qname(struct parser *p, struct cql_qname *out);
const char *cql_parse_lower_name(struct parser *p, const struct cql_token *t);
struct cql_term *cql_parse_term(struct parser *p);
struct cql_type_ast *cql_parse_type_ast(struct parser *p);

/* cql_parse_ddl.c */
int cql_parse_ident_list(struct parser *p, const char ***out, size_t *count);
int cql_parse_create(struct parser *p, struct cql_stmt *s);
int cql_parse_alter(struct parser *p, struct cql_stmt *s);
int cql_parse_drop(struct parser *p, struct cql_stmt *s);

/* cql_parse_dml.c */
int cql_parse_using_clause(struct parser *p, struct cql_using *u, bool ttl_ok);
int cql_parse_insert(struct parser *p, struct cql_stmt *s);
int cql_parse_update(struct parser *p, struct cql_stmt *s);
int cql_parse_delete_stmt(struct parser *p, struct cql_stmt *s);
int cql_parse_select_stmt(struct parser *p, struct cql_stmt *s);

/* Role statements (cql_parse_roles.c): whether the tokens start one, and
 * its parse into `s` (CQL_STMT_ROLE). */
bool cql_is_role_statement(const struct cql_token *t, size_t n);
int cql_parse_role(struct parser *p, struct cql_stmt *s);

/* User-defined type statements (cql_parse_types.c), likewise
 * (CQL_STMT_CREATE_TYPE, _ALTER_TYPE, _DROP_TYPE). */
bool cql_is_type_statement(const struct cql_token *t, size_t n);
int cql_parse_type_stmt(struct parser *p, struct cql_stmt *s);

#endif
