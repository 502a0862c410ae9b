/*
 * The role statements of Cassandra 4.1's grammar (Parser.g):
 *
 *   CREATE ROLE [IF NOT EXISTS] r [WITH opt [AND opt ...]]
 *   ALTER ROLE [IF EXISTS] r [WITH opt [AND opt ...]]
 *   DROP ROLE [IF EXISTS] r
 *   GRANT r TO g / REVOKE r FROM g
 *   LIST ROLES [OF r] [NORECURSIVE]
 *     opt: PASSWORD = 'p' | LOGIN = bool | SUPERUSER = bool
 *          | OPTIONS = {map} | ACCESS TO ALL DATACENTERS
 *   CREATE USER [IF NOT EXISTS] u [WITH PASSWORD 'p'] [SUPERUSER|NOSUPERUSER]
 *   ALTER USER [IF EXISTS] u [WITH PASSWORD 'p'] [SUPERUSER|NOSUPERUSER]
 *   DROP USER [IF EXISTS] u
 *   LIST USERS
 *
 * Role names: an unquoted identifier is lowercased, a "quoted" one or a
 * 'string' is taken as written. A USER's name keeps its case (Cassandra's
 * legacy rule).
 *
 * The permission statements (CassandraAuthorizer's):
 *
 *   GRANT perms ON resource TO r / REVOKE perms ON resource FROM r
 *   LIST perms [ON resource] [OF r] [NORECURSIVE]
 *     perms: ALL [PERMISSIONS] | CREATE | ALTER | DROP | SELECT | MODIFY
 *            | AUTHORIZE | DESCRIBE | EXECUTE  [PERMISSION]
 *     resource: ALL KEYSPACES | KEYSPACE k | [TABLE] [k.]t | ALL ROLES
 *            | ROLE r | ALL FUNCTIONS [IN KEYSPACE k] | FUNCTION k.f(types)
 *            | ALL MBEANS | MBEAN 'name'
 *
 * GRANT and REVOKE keep the permissions applicable to the resource (ALL
 * means those), and refuse a set with none as Cassandra's parser does.
 */
#include "client/cql/cql_parse.h"

#include "client/cql/cql_parse_internal.h"
#include "client/cql/cql_resource.h"
#include "common/err.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* `expect` with the token name Cassandra's parser shows. */
static int expect(struct parser *p, const char *kw, const char *shown)
{
	return accept_kw(p, kw) ? 0 : syntax_error(p, shown);
}

static char *copy(struct parser *p, const char *s, size_t len, bool lower)
{
	char *d = arena_alloc(p->a, len + 1);
	if (!d) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < len; i++)
		d[i] = lower ? (char)tolower((unsigned char)s[i]) : s[i];
	d[len] = '\0';
	return d;
}

static const char *role_name(struct parser *p, bool keep_case)
{
	const struct cql_token *t = tok(p);
	if (t->kind == CQL_TOK_PUNCT && t->len == 1 && t->text[0] == '?') {
		err_set(ERR_INVALID, "Bind variables cannot be used for role "
				     "names");
		return NULL;
	}
	if (t->kind != CQL_TOK_IDENT && t->kind != CQL_TOK_QIDENT &&
	    t->kind != CQL_TOK_STRING) {
		syntax_error(p, NULL);
		return NULL;
	}
	if (t->kind == CQL_TOK_QIDENT && keep_case) {
		err_set(ERR_INVALID,
			"Quoted strings are are not supported for user names "
			"and USER is deprecated, please use ROLE");
		return NULL;
	}
	advance(p);
	return copy(p, t->text, t->len, t->kind == CQL_TOK_IDENT && !keep_case);
}

static int boolean(struct parser *p, int *out, const char *prop)
{
	const struct cql_token *t = tok(p);
	if (tok_is_kw(t, "true") || tok_is_kw(t, "false")) {
		*out = tok_is_kw(t, "true");
		advance(p);
		return 0;
	}
	(void)prop;
	return syntax_error(p, "BOOLEAN");
}

static int twice(const char *prop)
{
	return err_set(ERR_INVALID, "Multiple definition for property %s",
		       prop);
}

/* OPTIONS = { 'k' : 'v', ... }: parsed, refused later (Cassandra's own
 * role manager supports no custom options either). */
static int skip_map(struct parser *p)
{
	if (expect_punct(p, "{") != 0)
		return -1;
	while (!is_punct(p, "}")) {
		if (tok(p)->kind == CQL_TOK_EOF)
			return syntax_error(p, "'}'");
		advance(p);
	}
	advance(p);
	return 0;
}

static int role_option(struct parser *p, struct cql_role_stmt *r)
{
	if (accept_kw(p, "password")) {
		if (r->password)
			return twice("K_PASSWORD");
		if (expect_punct(p, "=") != 0)
			return -1;
		const struct cql_token *t = tok(p);
		if (t->kind != CQL_TOK_STRING)
			return syntax_error(p, "STRING_LITERAL");
		advance(p);
		r->password = copy(p, t->text, t->len, false);
		return r->password ? 0 : -1;
	}
	if (accept_kw(p, "login")) {
		if (r->login >= 0)
			return twice("LOGIN");
		return expect_punct(p, "=") || boolean(p, &r->login, "LOGIN");
	}
	if (accept_kw(p, "superuser")) {
		if (r->superuser >= 0)
			return twice("SUPERUSER");
		return expect_punct(p, "=") ||
		       boolean(p, &r->superuser, "SUPERUSER");
	}
	if (accept_kw(p, "options")) {
		if (r->options)
			return twice("OPTIONS");
		r->options = true;
		return expect_punct(p, "=") || skip_map(p);
	}
	if (accept_kw(p, "access")) {
		/* ACCESS TO ALL DATACENTERS is what every role has here;
		 * a list of datacenters needs a network authorizer */
		if (expect(p, "to", "K_TO") != 0)
			return -1;
		if (accept_kw(p, "all"))
			return expect(p, "datacenters", "K_DATACENTERS");
		return err_set(ERR_UNSUPPORTED,
			       "Restricting roles to datacenters (ACCESS TO "
			       "DATACENTERS) is not supported by Cassini yet");
	}
	if (is_kw(p, "hashed"))
		return err_set(ERR_UNSUPPORTED,
			       "HASHED PASSWORD is not supported by Cassini "
			       "yet");
	return syntax_error(p, NULL);
}

static int role_options(struct parser *p, struct cql_role_stmt *r)
{
	if (!accept_kw(p, "with"))
		return 0;
	do {
		if (role_option(p, r) != 0)
			return -1;
	} while (accept_kw(p, "and"));
	return 0;
}

/* The legacy USER options: [WITH PASSWORD 'p'] [SUPERUSER|NOSUPERUSER]. */
static int user_options(struct parser *p, struct cql_role_stmt *r)
{
	if (accept_kw(p, "with")) {
		if (expect(p, "password", "K_PASSWORD") != 0)
			return -1;
		const struct cql_token *t = tok(p);
		if (t->kind != CQL_TOK_STRING)
			return syntax_error(p, "STRING_LITERAL");
		advance(p);
		if (!(r->password = copy(p, t->text, t->len, false)))
			return -1;
	}
	if (accept_kw(p, "superuser"))
		r->superuser = 1;
	else if (accept_kw(p, "nosuperuser"))
		r->superuser = 0;
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

static const char *const perm_words[] = {
	"create", "alter",     "drop",     "select",
	"modify", "authorize", "describe", "execute",
};

/* A permission keyword: its bit, or 0. */
static uint32_t perm_word(const struct cql_token *t)
{
	for (size_t i = 0; i < sizeof(perm_words) / sizeof(*perm_words); i++)
		if (tok_is_kw(t, perm_words[i]))
			return 1u << i;
	return 0;
}

static bool permission_statement(struct parser *p)
{
	/* GRANT/REVOKE {ALL | <permission>} [PERMISSION(S)] ON ...: the
	 * permission keywords are reserved in Cassandra's grammar, so they
	 * cannot be a role's unquoted name; LIST anything but ROLES/USERS */
	const struct cql_token *t = p->toks;
	if (tok_is_kw(&t[0], "list"))
		return !tok_is_kw(&t[1], "roles") && !tok_is_kw(&t[1], "users");
	if (p->count < 3)
		return false;
	bool perm = tok_is_kw(&t[1], "all") || perm_word(&t[1]) ||
		    tok_is_kw(&t[1], "unmask") ||
		    tok_is_kw(&t[1], "select_masked");
	return perm &&
	       (tok_is_kw(&t[2], "on") || tok_is_kw(&t[2], "permission") ||
		tok_is_kw(&t[2], "permissions"));
}

/* permissionOrAll: ALL [PERMISSIONS] | <permission> [PERMISSION] */
static int permission_or_all(struct parser *p, uint32_t *out)
{
	if (accept_kw(p, "all")) {
		accept_kw(p, "permissions");
		*out = CQL_PERM_ALL;
		return 0;
	}
	if (is_kw(p, "unmask") || is_kw(p, "select_masked"))
		return err_set(ERR_UNSUPPORTED,
			       "Dynamic data masking (UNMASK, SELECT_MASKED) "
			       "is Cassandra 5.0's and not supported by "
			       "Cassini");
	uint32_t bit = perm_word(tok(p));
	if (!bit)
		return syntax_error(p, NULL);
	advance(p);
	accept_kw(p, "permission");
	*out = bit;
	return 0;
}

/* ksName / cfName: an identifier (lowercased) or a "quoted" one. */
static const char *object_name(struct parser *p)
{
	const struct cql_token *t = tok(p);
	if (t->kind == CQL_TOK_PUNCT && t->len == 1 && t->text[0] == '?') {
		err_set(ERR_INVALID, "Bind variables cannot be used for "
				     "keyspace or table names");
		return NULL;
	}
	if (t->kind != CQL_TOK_IDENT && t->kind != CQL_TOK_QIDENT) {
		syntax_error(p, NULL);
		return NULL;
	}
	advance(p);
	return copy(p, t->text, t->len, t->kind == CQL_TOK_IDENT);
}

/* FUNCTION [ks.]f(type, ...): the name keeps the argument types as
 * written (lowercased, joined with ", "), as Cassandra prints them. */
static int function_resource(struct parser *p, struct cql_resource *r)
{
	const char *a = object_name(p), *b = NULL;
	if (!a)
		return -1;
	if (is_punct(p, ".")) {
		advance(p);
		if (!(b = object_name(p)))
			return -1;
	}
	char sig[1024];
	size_t n = (size_t)snprintf(sig, sizeof(sig), "%s(", b ? b : a);
	if (expect_punct(p, "(") != 0)
		return -1;
	int depth = 0;
	while (depth > 0 || !is_punct(p, ")")) {
		const struct cql_token *t = tok(p);
		if (t->kind == CQL_TOK_EOF)
			return syntax_error(p, "')'");
		if (is_punct(p, "<"))
			depth++;
		else if (is_punct(p, ">"))
			depth--;
		bool comma = depth == 0 && is_punct(p, ",");
		if (n + t->len + 3 >= sizeof(sig))
			return err_set(ERR_INVALID, "function signature too "
						    "long");
		if (comma) {
			n += (size_t)snprintf(sig + n, sizeof(sig) - n, ", ");
		} else {
			for (size_t i = 0; i < t->len; i++)
				sig[n++] = t->kind == CQL_TOK_IDENT
						   ? (char)tolower(
							     (unsigned char)
								     t->text[i])
						   : t->text[i];
			sig[n] = '\0';
		}
		advance(p);
	}
	advance(p);
	snprintf(sig + n, sizeof(sig) - n, ")");
	if (!b)
		return err_set(ERR_UNSUPPORTED,
			       "In this context function name must be "
			       "explictly qualified by a keyspace");
	r->kind = CQL_RES_FUNCTION;
	r->keyspace = a;
	r->name = copy(p, sig, strlen(sig), false);
	return r->name ? 0 : -1;
}

/* resource: dataResource | roleResource | functionResource | jmxResource */
static int resource(struct parser *p, struct cql_resource *r)
{
	memset(r, 0, sizeof(*r));
	if (accept_kw(p, "all")) {
		if (accept_kw(p, "keyspaces")) {
			r->kind = CQL_RES_ALL_KEYSPACES;
		} else if (accept_kw(p, "roles")) {
			r->kind = CQL_RES_ALL_ROLES;
		} else if (accept_kw(p, "mbeans")) {
			r->kind = CQL_RES_ALL_MBEANS;
		} else if (accept_kw(p, "functions")) {
			r->kind = CQL_RES_ALL_FUNCTIONS;
			if (accept_kw(p, "in")) {
				if (expect(p, "keyspace", "K_KEYSPACE") != 0 ||
				    !(r->keyspace = object_name(p)))
					return -1;
				r->kind = CQL_RES_KEYSPACE_FUNCTIONS;
			}
		} else {
			return syntax_error(p, NULL);
		}
		return 0;
	}
	if (accept_kw(p, "keyspace")) {
		r->kind = CQL_RES_KEYSPACE;
		return (r->keyspace = object_name(p)) ? 0 : -1;
	}
	if (accept_kw(p, "role")) {
		r->kind = CQL_RES_ROLE;
		return (r->name = role_name(p, false)) ? 0 : -1;
	}
	if (accept_kw(p, "function"))
		return function_resource(p, r);
	if (accept_kw(p, "mbean") || accept_kw(p, "mbeans")) {
		const struct cql_token *t = tok(p);
		if (t->kind != CQL_TOK_STRING)
			return syntax_error(p, "STRING_LITERAL");
		advance(p);
		if (t->len == 0)
			return err_set(ERR_INVALID,
				       "Empty JMX object name supplied");
		if (t->len == 3 && memcmp(t->text, "*:*", 3) == 0)
			return err_set(ERR_INVALID,
				       "Please use ALL MBEANS instead of "
				       "wildcard pattern");
		r->kind = CQL_RES_MBEAN;
		return (r->name = copy(p, t->text, t->len, false)) ? 0 : -1;
	}
	/* [TABLE | COLUMNFAMILY] [ks.]t */
	if (!accept_kw(p, "table"))
		accept_kw(p, "columnfamily");
	const char *a = object_name(p);
	if (!a)
		return -1;
	r->kind = CQL_RES_TABLE;
	if (is_punct(p, ".")) {
		advance(p);
		r->keyspace = a;
		return (r->name = object_name(p)) ? 0 : -1;
	}
	r->name = a;
	return 0;
}

static const char *resource_class(enum cql_resource_kind k)
{
	switch (k) {
	case CQL_RES_ALL_ROLES:
	case CQL_RES_ROLE:
		return "RoleResource";
	case CQL_RES_ALL_FUNCTIONS:
	case CQL_RES_KEYSPACE_FUNCTIONS:
	case CQL_RES_FUNCTION:
		return "FunctionResource";
	case CQL_RES_ALL_MBEANS:
	case CQL_RES_MBEAN:
		return "JMXResource";
	default:
		return "DataResource";
	}
}

/* GRANT/REVOKE perms ON resource TO/FROM role; LIST perms [ON resource]
 * [OF role] [NORECURSIVE]. */
static int permission_body(struct parser *p, struct cql_role_stmt *r)
{
	if (accept_kw(p, "list")) {
		r->op = CQL_ROLE_LIST_PERMISSIONS;
		if (permission_or_all(p, &r->permissions) != 0)
			return -1;
		if (accept_kw(p, "on") && resource(p, &r->resource) != 0)
			return -1;
		if (accept_kw(p, "of") && !(r->role = role_name(p, false)))
			return -1;
		r->norecursive = accept_kw(p, "norecursive");
		return 0;
	}
	bool grant = accept_kw(p, "grant");
	if (!grant)
		advance(p); /* REVOKE */
	r->op = grant ? CQL_ROLE_GRANT_PERMISSION : CQL_ROLE_REVOKE_PERMISSION;
	if (permission_or_all(p, &r->permissions) != 0 ||
	    expect(p, "on", "K_ON") != 0 || resource(p, &r->resource) != 0 ||
	    expect(p, grant ? "to" : "from", grant ? "K_TO" : "K_FROM") != 0 ||
	    !(r->grantee = role_name(p, false)))
		return -1;
	/* Cassandra's filterPermissions: ALL means the applicable ones, and
	 * none applicable is a syntax error */
	r->permissions &= cql_resource_applicable(&r->resource);
	if (!r->permissions)
		return err_set(ERR_INVALID,
			       "Resource type %s does not support any of the "
			       "requested permissions",
			       resource_class(r->resource.kind));
	return 0;
}

bool cql_is_role_statement(const struct cql_token *t, size_t n)
{
	if (n < 2)
		return false;
	if (tok_is_kw(&t[0], "grant") || tok_is_kw(&t[0], "revoke") ||
	    tok_is_kw(&t[0], "list"))
		return true;
	return (tok_is_kw(&t[0], "create") || tok_is_kw(&t[0], "alter") ||
		tok_is_kw(&t[0], "drop")) &&
	       (tok_is_kw(&t[1], "role") || tok_is_kw(&t[1], "user"));
}

static int body(struct parser *p, struct cql_role_stmt *r)
{
	if (permission_statement(p))
		return permission_body(p, r);
	if (accept_kw(p, "list")) {
		if (accept_kw(p, "users")) {
			r->op = CQL_ROLE_LIST_USERS;
			return 0;
		}
		if (expect(p, "roles", "K_ROLES") != 0)
			return -1;
		r->op = CQL_ROLE_LIST;
		if (accept_kw(p, "of") && !(r->role = role_name(p, false)))
			return -1;
		r->norecursive = accept_kw(p, "norecursive");
		return 0;
	}
	if (accept_kw(p, "grant") || accept_kw(p, "revoke")) {
		bool grant = tok_is_kw(&p->toks[0], "grant");
		r->op = grant ? CQL_ROLE_GRANT : CQL_ROLE_REVOKE;
		if (!(r->role = role_name(p, false)) ||
		    expect(p, grant ? "to" : "from", grant ? "TO" : "FROM") !=
			    0 ||
		    !(r->grantee = role_name(p, false)))
			return -1;
		return 0;
	}
	enum cql_role_op op = accept_kw(p, "create")  ? CQL_ROLE_CREATE
			      : accept_kw(p, "alter") ? CQL_ROLE_ALTER
						      : CQL_ROLE_DROP;
	if (op == CQL_ROLE_DROP)
		advance(p);
	r->op = op;
	r->user = accept_kw(p, "user");
	if (!r->user)
		advance(p); /* ROLE */
	int rc = op == CQL_ROLE_CREATE ? if_not_exists(p, &r->if_not_exists)
				       : if_exists(p, &r->if_exists);
	if (rc != 0 || !(r->role = role_name(p, r->user)))
		return -1;
	if (op == CQL_ROLE_DROP)
		return 0;
	return r->user ? user_options(p, r) : role_options(p, r);
}

int cql_parse_role(struct parser *p, struct cql_stmt *s)
{
	struct cql_role_stmt *r = &s->u.role;
	memset(r, 0, sizeof(*r));
	r->login = r->superuser = -1;
	s->kind = CQL_STMT_ROLE;
	if (body(p, r) != 0)
		return -1;
	while (is_punct(p, ";"))
		advance(p);
	if (tok(p)->kind != CQL_TOK_EOF)
		return syntax_error(p, NULL);
	if (r->role && !r->role[0])
		return err_set(ERR_INVALID,
			       "Role name can't be an empty string");
	if (r->grantee && !r->grantee[0])
		return err_set(ERR_INVALID,
			       "Role name can't be an empty string");
	return 0;
}
