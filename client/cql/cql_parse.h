/*
 * CQL text -> struct cql_stmt (client/cql/cql_ast.h).
 *
 * A hand-written lexer and recursive-descent parser for the CQL 3.4 subset
 * Cassini serves. Keywords are matched case-insensitively and in context, so
 * words like `key`, `value`, `type` or `ttl` stay usable as column names, as
 * in Cassandra. Comments (--, //, / * * /), trailing semicolons and any
 * whitespace are accepted.
 *
 * Errors read like Cassandra's, and carry the kind of reply the client gets:
 *   ERR_PROTOCOL    never
 *   ERR_INVALID     syntax: "line 1:9 mismatched input 'FORM' expecting K_FROM
 *                   (SELECT * [FORM]...)", cql_parse_error.c
 *                   (answered as Syntax_error 0x2000)
 *   ERR_UNSUPPORTED a feature Cassini does not have yet (secondary indexes,
 *                   materialized views, user types, functions, roles):
 *                   answered as Invalid 0x2200 with that sentence; also
 *                   what parses but Cassandra refuses as invalid ("No
 *                   PRIMARY KEY specifed for table 't' (exactly one
 *                   required)", "Unmatched column names/values").
 */
#ifndef CASSINI_CLIENT_CQL_PARSE_H
#define CASSINI_CLIENT_CQL_PARSE_H

#include "client/cql/cql_ast.h"
#include "common/arena.h"

#include <stddef.h>

/* Statements longer than this are refused before lexing: the largest
 * native frame (native_transport_max_frame_size's maximum), so the frame
 * limit is what bounds a statement, as in Cassandra. */
#define CQL_MAX_STATEMENT (256u << 20)

/* Terms, types and selectors nested deeper than this are a syntax error
 * (Cassandra's parser has no such bound and fails with a stack overflow). */
#define CQL_MAX_DEPTH 64

/*
 * Parses one statement (BATCH counts as one). Nodes are allocated from `a`;
 * `*bind_count` receives the number of bind markers and, when `bind_names`
 * is not NULL, an array of their names (NULL for `?`).
 */
struct cql_stmt *cql_parse(struct arena *a, const char *text, size_t len,
			   int *bind_count, const char ***bind_names);

#endif
