/*
 * CassandraRoleManager's statements, run on an auth worker (see auth.h):
 * CREATE/ALTER/DROP ROLE and USER, GRANT/REVOKE role, LIST ROLES and LIST
 * USERS, with Cassandra 4.1's checks and messages.
 *
 * Who may run them: a logged-in role (with AllowAllAuthenticator every
 * statement is refused as for Cassandra's anonymous user). There is no
 * authorizer yet, so the permissions Cassandra would look up (CREATE on
 * <all roles>, ALTER/DROP/AUTHORIZE on <role r>, DESCRIBE) are held by
 * superusers only: a role that is not one is refused with the message
 * CassandraAuthorizer gives a role without the permission. Anyone may
 * change their own password, and list the roles they have.
 */
#define LOG_MODULE "auth"
#include "client/auth/auth_internal.h"

#include "client/cql/cql_resource.h"
#include "common/err.h"
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- sets of roles ------------------------------------------------------- */

struct role_entry {
	char *name;
	bool super, login;
};

struct role_list {
	struct role_entry *v;
	size_t n, cap;
};

static void list_free(struct role_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static bool list_has(const struct role_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return true;
	return false;
}

static int list_add(struct role_list *l, const char *name, bool super,
		    bool login)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct role_entry *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	char *d = strdup(name);
	if (!d)
		return -1;
	l->v[l->n++] = (struct role_entry){d, super, login};
	return 0;
}

static int entry_cmp(const void *x, const void *y)
{
	return strcmp(((const struct role_entry *)x)->name,
		      ((const struct role_entry *)y)->name);
}

/* Cassandra's collectRoles: the role itself, then what it was granted,
 * recursively or only directly. A role that does not exist adds nothing. */
static int collect(struct cql_auth *a, const char *name, bool recursive,
		   bool top, struct role_list *out, struct auth_err *e)
{
	struct auth_role r;
	if (auth_get_role(a, name, &r, e) != 0)
		return -1;
	int rc = 0;
	if (r.exists && !list_has(out, name)) {
		if (list_add(out, name, r.super, r.login) != 0)
			rc = auth_fail(e, CQL_ERR_SERVER, "out of memory");
		for (size_t i = 0; rc == 0 && i < r.member_count; i++) {
			if (list_has(out, r.member_of[i]))
				continue;
			if (recursive || top)
				rc = collect(a, r.member_of[i], recursive,
					     false, out, e);
		}
	}
	auth_role_free(&r);
	return rc;
}

int auth_collect_roles(struct cql_auth *a, const char *user,
		       struct auth_perms *p, struct auth_err *e)
{
	struct role_list l = {0};
	if (collect(a, user, true, true, &l, e) != 0) {
		list_free(&l);
		return -1;
	}
	p->roles = calloc(l.n + 1, sizeof(*p->roles));
	if (!p->roles) {
		list_free(&l);
		return auth_fail(e, CQL_ERR_SERVER, "out of memory");
	}
	for (size_t i = 0; i < l.n; i++) {
		p->super |= l.v[i].super;
		p->roles[i] = l.v[i].name; /* moved */
		l.v[i].name = NULL;
	}
	p->nroles = p->roles_cap = l.n;
	free(l.v);
	return 0;
}

/* ---- who runs the statement ---------------------------------------------- */

struct performer {
	const char *name;
	struct role_list roles; /* recursively */
	bool super;             /* any of them is a superuser */
	/* CassandraAuthorizer: its roles' grants */
	bool authz;
	struct auth_perms perms;
};

/* Whether the performer holds `perm` on <all roles> (role NULL) or <role
 * r>: a superuser always; others only through CassandraAuthorizer's
 * grants (with AllowAllAuthorizer, superusers only: see roles.c's head). */
static bool performer_has(const struct performer *p, uint32_t perm,
			  const char *role)
{
	if (p->super)
		return true;
	if (!p->authz)
		return false;
	struct cql_resource r = {
		.kind = role ? CQL_RES_ROLE : CQL_RES_ALL_ROLES, .name = role};
	return auth_perms_allow(&p->perms, perm, &r);
}

static int load_performer(struct cql_auth *a, const char *name,
			  struct performer *p, struct auth_err *e)
{
	memset(p, 0, sizeof(*p));
	if (!name)
		return auth_fail(e, CQL_ERR_UNAUTHORIZED,
				 "You have to be logged in and not anonymous "
				 "to perform this request");
	p->name = name;
	if (collect(a, name, true, true, &p->roles, e) != 0)
		return -1;
	for (size_t i = 0; i < p->roles.n; i++)
		p->super |= p->roles.v[i].super;
	if (auth_authorizer_enabled(a) && !p->super) {
		p->authz = true;
		if (auth_load_perms(a, name, &p->perms, e) != 0)
			return -1;
	}
	return 0;
}

static int no_permission(struct auth_err *e, const struct performer *p,
			 const char *perm, const char *role)
{
	if (role)
		return auth_fail(e, CQL_ERR_UNAUTHORIZED,
				 "User %s has no %s permission on <role %s> "
				 "or any of its parents",
				 p->name, perm, role);
	return auth_fail(e, CQL_ERR_UNAUTHORIZED,
			 "User %s has no %s permission on <all roles> or any "
			 "of its parents",
			 p->name, perm);
}

/* ---- replies ------------------------------------------------------------- */

static void reply_void(const struct auth_role_job *j, struct buf *out)
{
	long start =
		cql_frame_begin(out, j->version, 0, j->stream, CQL_OP_RESULT);
	if (start < 0 || cql_write_int(out, CQL_RESULT_VOID) != 0) {
		buf_clear(out);
		return;
	}
	cql_frame_end(out, start);
}

static int write_text(struct buf *b, const char *s)
{
	return cql_write_bytes(b, s, (int32_t)strlen(s));
}

static int write_bool(struct buf *b, bool v)
{
	uint8_t x = v;
	return cql_write_bytes(b, &x, 1);
}

/* LIST ROLES (role, super, login, options, datacenters) or LIST USERS
 * (name, super, datacenters), sorted by name. */
static void reply_list(const struct auth_role_job *j, struct role_list *l,
		       bool users, struct buf *out)
{
	static const struct cql_type_option text = {.id = CQL_TYPE_VARCHAR};
	static const struct cql_type_option boolean = {.id = CQL_TYPE_BOOLEAN};
	static const struct cql_type_option map = {.id = CQL_TYPE_MAP,
						   .sub = {&text, &text}};
	const char *table = users ? "users" : "roles";
	const struct cql_column_spec roles_cols[] = {
		{"system_auth", table, "role", &text},
		{"system_auth", table, "super", &boolean},
		{"system_auth", table, "login", &boolean},
		{"system_auth", table, "options", &map},
		{"system_auth", table, "datacenters", &text},
	};
	const struct cql_column_spec users_cols[] = {
		{"system_auth", table, "name", &text},
		{"system_auth", table, "super", &boolean},
		{"system_auth", table, "datacenters", &text},
	};
	if (l->n) /* none: a dropped role's session lists nothing */
		qsort(l->v, l->n, sizeof(*l->v), entry_cmp);
	size_t rows = 0;
	for (size_t i = 0; i < l->n; i++)
		rows += !users || l->v[i].login;
	long start =
		cql_frame_begin(out, j->version, 0, j->stream, CQL_OP_RESULT);
	int rc = start < 0 || cql_write_int(out, CQL_RESULT_ROWS) ||
		 cql_write_rows_metadata(out, users ? users_cols : roles_cols,
					 users ? 3 : 5, NULL, false) ||
		 cql_write_int(out, (int32_t)rows);
	for (size_t i = 0; rc == 0 && i < l->n; i++) {
		const struct role_entry *r = &l->v[i];
		if (users) {
			if (r->login)
				rc = write_text(out, r->name) ||
				     write_bool(out, r->super) ||
				     write_text(out, "ALL");
			continue;
		}
		static const uint8_t empty_map[4] = {0, 0, 0, 0};
		rc = write_text(out, r->name) || write_bool(out, r->super) ||
		     write_bool(out, r->login) ||
		     cql_write_bytes(out, empty_map, 4) ||
		     write_text(out, "ALL");
	}
	if (rc) {
		buf_clear(out);
		return;
	}
	cql_frame_end(out, start);
}

/* ---- statements ---------------------------------------------------------- */

static int check_options(struct cql_auth *a, const struct cql_role_stmt *s,
			 struct auth_err *e)
{
	if (s->password && !auth_password_enabled(a))
		return auth_fail(e, CQL_ERR_INVALID,
				 "%s doesn't support PASSWORD",
				 AUTH_ROLE_MANAGER_CLASS);
	if (s->options)
		return auth_fail(e, CQL_ERR_INVALID,
				 "%s doesn't support OPTIONS",
				 AUTH_ROLE_MANAGER_CLASS);
	return 0;
}

static int write_stmt(struct cql_auth *a, const char *role, struct auth_err *e,
		      const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int write_stmt(struct cql_auth *a, const char *role, struct auth_err *e,
		      const char *fmt, ...)
{
	char text[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(text))
		return auth_fail(e, CQL_ERR_INVALID, "role name too long");
	struct auth_result res;
	if (auth_query(a, auth_consistency_for(role), &res, e, "%s", text) != 0)
		return -1;
	auth_result_free(&res);
	return 0;
}

static int hash_of(struct cql_auth *a, const char *password, char *out,
		   size_t cap, struct auth_err *e)
{
	if (cql_auth_hash_password(password, auth_rounds(a), out, cap) != 0)
		return auth_fail(e, CQL_ERR_SERVER, "%s", err_msg());
	return 0;
}

static int create_role(struct cql_auth *a, const struct cql_role_stmt *s,
		       const struct performer *p, struct arena *t, bool *noop,
		       struct auth_err *e)
{
	if (!performer_has(p, CQL_PERM_CREATE, NULL))
		return no_permission(e, p, "CREATE", NULL);
	if (s->superuser > 0 && !p->super)
		return auth_fail(e, CQL_ERR_UNAUTHORIZED,
				 "Only superusers can create a role with "
				 "superuser status");
	if (check_options(a, s, e) != 0)
		return -1;
	struct auth_role r;
	if (auth_get_role(a, s->role, &r, e) != 0)
		return -1;
	bool exists = r.exists;
	auth_role_free(&r);
	if (exists) {
		if (s->if_not_exists) {
			*noop = true;
			return 0;
		}
		return auth_fail(e, CQL_ERR_INVALID, "%s already exists",
				 s->role);
	}
	/* CREATE USER logs in; a role does only WITH LOGIN = true */
	bool login = s->user ? true : s->login > 0;
	bool super = s->superuser > 0;
	int rc;
	if (s->password) {
		char hash[128];
		if (hash_of(a, s->password, hash, sizeof(hash), e) != 0)
			return -1;
		rc = write_stmt(a, s->role, e,
				"INSERT INTO system_auth.roles (role, "
				"is_superuser, can_login, salted_hash) "
				"VALUES (%s, %s, %s, '%s')",
				auth_quote(t, s->role),
				super ? "true" : "false",
				login ? "true" : "false", hash);
	} else {
		rc = write_stmt(a, s->role, e,
				"INSERT INTO system_auth.roles (role, "
				"is_superuser, can_login) VALUES (%s, %s, %s)",
				auth_quote(t, s->role),
				super ? "true" : "false",
				login ? "true" : "false");
	}
	if (rc != 0 || !auth_authorizer_enabled(a))
		return rc;
	/* grantPermissionsToCreator: what applies to <role r> */
	struct cql_resource res = {.kind = CQL_RES_ROLE, .name = s->role};
	char name[600];
	if (cql_resource_name(&res, name, sizeof(name)) < 0)
		return auth_fail(e, CQL_ERR_INVALID, "role name too long");
	return auth_grant(a, cql_resource_applicable(&res), name, p->name, true,
			  e);
}

static int alter_role(struct cql_auth *a, const struct cql_role_stmt *s,
		      const struct performer *p, struct arena *t, bool *noop,
		      struct auth_err *e)
{
	bool self = strcmp(p->name, s->role) == 0;
	if (s->superuser >= 0) {
		if (self || list_has(&p->roles, s->role))
			return auth_fail(e, CQL_ERR_UNAUTHORIZED,
					 "You aren't allowed to alter your own "
					 "superuser status or that of a role "
					 "granted to you");
		if (!p->super)
			return auth_fail(e, CQL_ERR_UNAUTHORIZED,
					 "Only superusers are allowed to alter "
					 "superuser status");
	}
	if (!p->super) {
		if (!self && !performer_has(p, CQL_PERM_ALTER, s->role))
			return no_permission(e, p, "ALTER", s->role);
		if (self && s->login >= 0)
			return auth_fail(e, CQL_ERR_UNAUTHORIZED,
					 "You aren't allowed to alter LOGIN");
		if (self && s->options)
			return auth_fail(e, CQL_ERR_UNAUTHORIZED,
					 "You aren't allowed to alter OPTIONS");
	}
	if (check_options(a, s, e) != 0)
		return -1;
	struct auth_role r;
	if (auth_get_role(a, s->role, &r, e) != 0)
		return -1;
	bool exists = r.exists;
	auth_role_free(&r);
	if (!exists) {
		if (s->if_exists) {
			*noop = true;
			return 0;
		}
		return auth_fail(e, CQL_ERR_INVALID, "%s doesn't exist",
				 s->role);
	}
	char set[512] = "";
	size_t n = 0;
	if (s->login >= 0)
		n += (size_t)snprintf(set + n, sizeof(set) - n,
				      "%scan_login = %s", n ? ", " : "",
				      s->login ? "true" : "false");
	if (s->superuser >= 0)
		n += (size_t)snprintf(set + n, sizeof(set) - n,
				      "%sis_superuser = %s", n ? ", " : "",
				      s->superuser ? "true" : "false");
	if (s->password) {
		char hash[128];
		if (hash_of(a, s->password, hash, sizeof(hash), e) != 0)
			return -1;
		n += (size_t)snprintf(set + n, sizeof(set) - n,
				      "%ssalted_hash = '%s'", n ? ", " : "",
				      hash);
	}
	if (n == 0)
		return 0;
	return write_stmt(a, s->role, e,
			  "UPDATE system_auth.roles SET %s WHERE role = %s",
			  set, auth_quote(t, s->role));
}

/* The members of `role` (role_members), for a DROP. */
static int members_of(struct cql_auth *a, const char *role, struct arena *t,
		      struct role_list *out, struct auth_err *e)
{
	struct auth_result res;
	if (auth_query(a, auth_consistency_for(role), &res, e,
		       "SELECT member FROM system_auth.role_members WHERE "
		       "role = %s",
		       auth_quote(t, role)) != 0)
		return -1;
	int rc = 0;
	const struct cql_client_rows *rows = &res.resp.rows;
	for (int32_t i = 0;
	     rc == 0 && res.resp.kind == CQL_RESULT_ROWS && i < rows->row_count;
	     i++) {
		struct slice m = cql_client_value_bytes(
			cql_client_rows_cell(rows, i, 0));
		char name[512];
		snprintf(name, sizeof(name), "%.*s", (int)m.len,
			 (const char *)m.ptr);
		if (list_add(out, name, false, false) != 0)
			rc = auth_fail(e, CQL_ERR_SERVER, "out of memory");
	}
	auth_result_free(&res);
	return rc;
}

static int drop_role(struct cql_auth *a, const struct cql_role_stmt *s,
		     const struct performer *p, struct arena *t, bool *noop,
		     struct auth_err *e)
{
	if (!performer_has(p, CQL_PERM_DROP, s->role))
		return no_permission(e, p, "DROP", s->role);
	struct auth_role r;
	if (auth_get_role(a, s->role, &r, e) != 0)
		return -1;
	if (r.exists && r.super && !p->super) {
		auth_role_free(&r);
		return auth_fail(e, CQL_ERR_UNAUTHORIZED,
				 "Only superusers can drop a role with "
				 "superuser status");
	}
	if (!r.exists) {
		auth_role_free(&r);
		if (s->if_exists) {
			*noop = true;
			return 0;
		}
		return auth_fail(e, CQL_ERR_INVALID, "%s doesn't exist",
				 s->role);
	}
	if (strcmp(p->name, s->role) == 0) {
		auth_role_free(&r);
		return auth_fail(e, CQL_ERR_INVALID,
				 "Cannot DROP primary role for current login");
	}
	const char *q = auth_quote(t, s->role);
	int rc = write_stmt(a, s->role, e,
			    "DELETE FROM system_auth.roles WHERE role = %s", q);
	/* its members no longer have it */
	struct role_list members = {0};
	if (rc == 0)
		rc = members_of(a, s->role, t, &members, e);
	for (size_t i = 0; rc == 0 && i < members.n; i++)
		rc = write_stmt(a, members.v[i].name, e,
				"UPDATE system_auth.roles SET member_of = "
				"member_of - {%s} WHERE role = %s",
				q, auth_quote(t, members.v[i].name));
	if (rc == 0 && members.n)
		rc = write_stmt(
			a, s->role, e,
			"DELETE FROM system_auth.role_members WHERE role = %s",
			q);
	/* and the roles it had no longer list it as a member */
	for (size_t i = 0; rc == 0 && i < r.member_count; i++)
		rc = write_stmt(a, r.member_of[i], e,
				"DELETE FROM system_auth.role_members WHERE "
				"role = %s AND member = %s",
				auth_quote(t, r.member_of[i]), q);
	list_free(&members);
	auth_role_free(&r);
	if (rc == 0 && auth_authorizer_enabled(a)) {
		/* revokeAllFrom and revokeAllOn */
		struct cql_resource res = {.kind = CQL_RES_ROLE,
					   .name = s->role};
		rc = auth_revoke_all_from(a, s->role, e);
		if (rc == 0)
			rc = auth_revoke_all_on(a, &res, e);
	}
	return rc;
}

static int exists_or_fail(struct cql_auth *a, const char *role,
			  struct auth_err *e)
{
	struct auth_role r;
	if (auth_get_role(a, role, &r, e) != 0)
		return -1;
	bool exists = r.exists;
	auth_role_free(&r);
	if (!exists)
		return auth_fail(e, CQL_ERR_INVALID, "%s doesn't exist", role);
	return 0;
}

static int grant_revoke(struct cql_auth *a, const struct cql_role_stmt *s,
			const struct performer *p, struct arena *t,
			struct auth_err *e)
{
	bool grant = s->op == CQL_ROLE_GRANT;
	if (!performer_has(p, CQL_PERM_AUTHORIZE, s->role))
		return no_permission(e, p, "AUTHORIZE", s->role);
	if (exists_or_fail(a, s->role, e) != 0 ||
	    exists_or_fail(a, s->grantee, e) != 0)
		return -1;
	struct role_list of_grantee = {0}, of_role = {0};
	int rc = collect(a, s->grantee, grant, true, &of_grantee, e);
	if (rc == 0 && grant)
		rc = collect(a, s->role, true, true, &of_role, e);
	if (rc == 0 && grant && list_has(&of_grantee, s->role))
		rc = auth_fail(e, CQL_ERR_INVALID, "%s is a member of %s",
			       s->grantee, s->role);
	else if (rc == 0 && grant && list_has(&of_role, s->grantee))
		rc = auth_fail(e, CQL_ERR_INVALID, "%s is a member of %s",
			       s->role, s->grantee);
	else if (rc == 0 && !grant &&
		 (strcmp(s->role, s->grantee) == 0 ||
		  !list_has(&of_grantee, s->role)))
		rc = auth_fail(e, CQL_ERR_INVALID, "%s is not a member of %s",
			       s->grantee, s->role);
	list_free(&of_grantee);
	list_free(&of_role);
	if (rc != 0)
		return -1;
	const char *qr = auth_quote(t, s->role),
		   *qg = auth_quote(t, s->grantee);
	if (write_stmt(a, s->grantee, e,
		       "UPDATE system_auth.roles SET member_of = member_of %s "
		       "{%s} WHERE role = %s",
		       grant ? "+" : "-", qr, qg) != 0)
		return -1;
	if (grant)
		return write_stmt(a, s->role, e,
				  "INSERT INTO system_auth.role_members (role, "
				  "member) VALUES (%s, %s)",
				  qr, qg);
	return write_stmt(a, s->role, e,
			  "DELETE FROM system_auth.role_members WHERE role = "
			  "%s AND member = %s",
			  qr, qg);
}

static int all_roles(struct cql_auth *a, struct role_list *out,
		     struct auth_err *e)
{
	struct auth_result res;
	if (auth_query(a, CQL_CL_QUORUM, &res, e,
		       "SELECT role, can_login, is_superuser FROM "
		       "system_auth.roles") != 0)
		return -1;
	int rc = 0;
	const struct cql_client_rows *rows = &res.resp.rows;
	for (int32_t i = 0;
	     rc == 0 && res.resp.kind == CQL_RESULT_ROWS && i < rows->row_count;
	     i++) {
		struct slice n = cql_client_value_bytes(
			cql_client_rows_cell(rows, i, 0));
		const struct cql_value *l = cql_client_rows_cell(rows, i, 1);
		const struct cql_value *su = cql_client_rows_cell(rows, i, 2);
		char name[512];
		snprintf(name, sizeof(name), "%.*s", (int)n.len,
			 (const char *)n.ptr);
		if (list_add(out, name, su && su->len == 1 && su->ptr[0],
			     l && l->len == 1 && l->ptr[0]) != 0)
			rc = auth_fail(e, CQL_ERR_SERVER, "out of memory");
	}
	auth_result_free(&res);
	return rc;
}

static int list_roles(struct cql_auth *a, const struct auth_role_job *j,
		      const struct performer *p, struct buf *out,
		      struct auth_err *e)
{
	const struct cql_role_stmt *s = &j->st;
	bool users = s->op == CQL_ROLE_LIST_USERS;
	struct role_list l = {0};
	int rc;
	bool describe = performer_has(p, CQL_PERM_DESCRIBE, NULL);
	if (s->role) {
		if (!describe && !list_has(&p->roles, s->role))
			return auth_fail(e, CQL_ERR_UNAUTHORIZED,
					 "You are not authorized to view roles "
					 "granted to %s",
					 s->role);
		if (exists_or_fail(a, s->role, e) != 0)
			return -1;
		rc = collect(a, s->role, !s->norecursive, true, &l, e);
	} else if (describe) {
		rc = all_roles(a, &l, e);
	} else {
		/* without DESCRIBE on <all roles>: the roles one has */
		rc = collect(a, p->name, true, true, &l, e);
	}
	if (rc == 0 && users) /* a user is a superuser through its roles */
		for (size_t i = 0; rc == 0 && i < l.n; i++) {
			struct role_list of = {0};
			rc = collect(a, l.v[i].name, true, true, &of, e);
			for (size_t k = 0; k < of.n; k++)
				l.v[i].super |= of.v[k].super;
			list_free(&of);
		}
	if (rc == 0)
		reply_list(j, &l, users, out);
	list_free(&l);
	return rc;
}

/* With AllowAllAuthorizer Cassandra refuses the permission statements
 * with the authorizer's UnsupportedOperationException. */
static int permission_statement(struct cql_auth *a,
				const struct auth_role_job *j,
				struct performer *p, struct buf *out,
				struct auth_err *e)
{
	if (!auth_authorizer_enabled(a))
		return auth_fail(e, CQL_ERR_INVALID,
				 "%s operation is not supported by "
				 "AllowAllAuthorizer",
				 j->st.op == CQL_ROLE_GRANT_PERMISSION ? "GRANT"
				 : j->st.op == CQL_ROLE_REVOKE_PERMISSION
					 ? "REVOKE"
					 : "LIST PERMISSIONS");
	struct auth_perms super = {.super = true};
	const struct auth_perms *perms = p->super ? &super : &p->perms;
	if (j->st.op == CQL_ROLE_LIST_PERMISSIONS)
		return auth_list_permissions(a, j, perms, out, e);
	return auth_grant_statement(a, j, perms, e);
}

void auth_run_role_statement(struct cql_auth *a, const struct auth_role_job *j,
			     struct buf *out)
{
	const struct cql_role_stmt *s = &j->st;
	struct auth_err e = {0};
	struct performer p;
	struct arena t;
	bool noop = false;
	int rc;
	arena_create(&t, 0);
	rc = load_performer(a, j->performer, &p, &e);
	if (rc == 0) {
		switch (s->op) {
		case CQL_ROLE_CREATE:
			rc = create_role(a, s, &p, &t, &noop, &e);
			break;
		case CQL_ROLE_ALTER:
			rc = alter_role(a, s, &p, &t, &noop, &e);
			break;
		case CQL_ROLE_DROP:
			rc = drop_role(a, s, &p, &t, &noop, &e);
			break;
		case CQL_ROLE_GRANT:
		case CQL_ROLE_REVOKE:
			rc = grant_revoke(a, s, &p, &t, &e);
			break;
		case CQL_ROLE_LIST:
		case CQL_ROLE_LIST_USERS:
			rc = list_roles(a, j, &p, out, &e);
			break;
		case CQL_ROLE_GRANT_PERMISSION:
		case CQL_ROLE_REVOKE_PERMISSION:
		case CQL_ROLE_LIST_PERMISSIONS:
			rc = permission_statement(a, j, &p, out, &e);
			break;
		}
	}
	list_free(&p.roles);
	auth_perms_free(&p.perms);
	arena_destroy(&t);
	if (rc != 0) {
		buf_clear(out);
		cql_encode_error(out, j->version, j->stream, e.code, e.msg);
		return;
	}
	if (s->op != CQL_ROLE_LIST && s->op != CQL_ROLE_LIST_USERS &&
	    s->op != CQL_ROLE_LIST_PERMISSIONS)
		reply_void(j, out);
	(void)noop;
}
