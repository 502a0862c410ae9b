/* The CQL lexer, private to client/cql_*.c. */
#ifndef CASSINI_CLIENT_CQL_LEX_INTERNAL_H
#define CASSINI_CLIENT_CQL_LEX_INTERNAL_H

#include "common/arena.h"

#include <stdbool.h>
#include <stddef.h>

enum cql_tok_kind {
	CQL_TOK_EOF,
	CQL_TOK_IDENT,  /* unquoted; text as written */
	CQL_TOK_QIDENT, /* "quoted"; text unescaped */
	CQL_TOK_STRING, /* 'x' or $$x$$; text unescaped */
	CQL_TOK_INTEGER,
	CQL_TOK_FLOAT,
	CQL_TOK_UUID,
	CQL_TOK_HEX,      /* 0x...; text is the digits after 0x */
	CQL_TOK_PUNCT,    /* text is one of ( ) , ; . * = < > <= >= != [ ] { }
			     : ? + - */
	CQL_TOK_DURATION, /* 1h30m, P1DT2H, P2W, P0001-02-03T04:05:06 */
};

struct cql_token {
	enum cql_tok_kind kind;
	const char *text;
	size_t len;
	int line;        /* 1-based */
	int col;         /* 0-based, as Cassandra reports */
	const char *raw; /* where it starts in the source, for messages */
	size_t raw_len;
};

/* Splits `src` into tokens (the last is CQL_TOK_EOF). On a lexical error
 * returns -1 with ERR_INVALID and a "line L:C ..." message. */
int cql_lex(struct arena *a, const char *src, size_t len,
	    struct cql_token **out, size_t *count);

#endif
