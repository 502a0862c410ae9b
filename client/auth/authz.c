/*
 * CassandraAuthorizer on the auth workers: a role's permissions read from
 * system_auth.role_permissions, the checks against them, GRANT / REVOKE /
 * LIST PERMISSIONS, the creator's permissions on what it creates and the
 * revocation of the permissions on what is dropped (see auth.h).
 *
 * Stored as Cassandra stores them: role_permissions (role, resource,
 * permissions set<text>) with resources named "data/ks/t", "roles/r", ...
 * and the reverse index resource_role_permissons_index (resource, role)
 * (the typo is Cassandra's), so DROP finds who holds permissions on it.
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

#define RESOURCE_MAX 600

/* ---- a role's permissions ------------------------------------------------ */

void auth_perms_free(struct auth_perms *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->g[i].resource);
	free(p->g);
	for (size_t i = 0; i < p->nroles; i++)
		free(p->roles[i]);
	free(p->roles);
	memset(p, 0, sizeof(*p));
}

static struct auth_grant *grant_find(const struct auth_perms *p,
				     const char *resource)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->g[i].resource, resource) == 0)
			return &p->g[i];
	return NULL;
}

static int grant_add(struct auth_perms *p, const char *resource, uint32_t perms)
{
	struct auth_grant *g = grant_find(p, resource);
	if (g) {
		g->perms |= perms;
		return 0;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 8;
		struct auth_grant *v = realloc(p->g, cap * sizeof(*v));
		if (!v)
			return -1;
		p->g = v;
		p->cap = cap;
	}
	char *d = strdup(resource);
	if (!d)
		return -1;
	p->g[p->n++] = (struct auth_grant){d, perms};
	return 0;
}

/* A set<text> of permission names: their bits (unknown names ignored, as
 * the 5.0 ones would be here). */
static uint32_t perm_bits(const struct cql_value *v)
{
	uint32_t bits = 0;
	char **names = NULL;
	size_t n = 0;
	if (auth_parse_text_set(v, &names, &n) != 0)
		n = 0;
	for (size_t i = 0; i < n; i++) {
		bits |= cql_permission_parse(names[i], strlen(names[i]));
		free(names[i]);
	}
	free(names);
	return bits;
}

static char *cell_text(const struct cql_client_rows *rows, int32_t row, int col)
{
	struct slice s =
		cql_client_value_bytes(cql_client_rows_cell(rows, row, col));
	char *d = malloc(s.len + 1);
	if (d) {
		memcpy(d, s.ptr, s.len);
		d[s.len] = '\0';
	}
	return d;
}

/* The grants of one role, added to `p`. */
static int load_role_grants(struct cql_auth *a, const char *role,
			    struct auth_perms *p, struct auth_err *e)
{
	struct arena t;
	struct auth_result res;
	arena_create(&t, 0);
	int rc = auth_query(a, CQL_CL_LOCAL_ONE, &res, e,
			    "SELECT resource, permissions FROM "
			    "system_auth.role_permissions WHERE role = %s",
			    auth_quote(&t, role));
	arena_destroy(&t);
	if (rc != 0)
		return -1;
	const struct cql_client_rows *rows = &res.resp.rows;
	for (int32_t i = 0;
	     rc == 0 && res.resp.kind == CQL_RESULT_ROWS && i < rows->row_count;
	     i++) {
		char *r = cell_text(rows, i, 0);
		uint32_t bits = perm_bits(cql_client_rows_cell(rows, i, 1));
		if (!r || (bits && grant_add(p, r, bits) != 0))
			rc = auth_fail(e, CQL_ERR_SERVER, "out of memory");
		free(r);
	}
	auth_result_free(&res);
	return rc;
}

int auth_load_perms(struct cql_auth *a, const char *user, struct auth_perms *p,
		    struct auth_err *e)
{
	memset(p, 0, sizeof(*p));
	if (auth_collect_roles(a, user, p, e) != 0)
		return -1;
	if (!p->super)
		for (size_t i = 0; i < p->nroles; i++)
			if (load_role_grants(a, p->roles[i], p, e) != 0)
				return -1;
	return 0;
}

bool auth_perms_has_role(const struct auth_perms *p, const char *role)
{
	for (size_t i = 0; i < p->nroles; i++)
		if (strcmp(p->roles[i], role) == 0)
			return true;
	return false;
}

/* Whether the stored name `g` is `r` or one of its parents, for data and
 * role resources (the hot path: no name is built). */
static bool grant_covers(const char *g, const struct cql_resource *r)
{
	bool data = r->kind == CQL_RES_ALL_KEYSPACES ||
		    r->kind == CQL_RES_KEYSPACE || r->kind == CQL_RES_TABLE;
	const char *root = data ? "data" : "roles";
	size_t rl = data ? 4 : 5;
	if (strncmp(g, root, rl) != 0)
		return false;
	g += rl;
	if (!*g)
		return true; /* <all keyspaces>, <all roles> */
	if (*g++ != '/')
		return false;
	if (!data)
		return r->kind == CQL_RES_ROLE && strcmp(g, r->name) == 0;
	if (r->kind == CQL_RES_ALL_KEYSPACES)
		return false;
	size_t kl = strlen(r->keyspace);
	if (strncmp(g, r->keyspace, kl) != 0)
		return false;
	g += kl;
	if (!*g)
		return true; /* <keyspace k> */
	return *g == '/' && r->kind == CQL_RES_TABLE &&
	       strcmp(g + 1, r->name) == 0;
}

bool auth_perms_allow(const struct auth_perms *p, uint32_t perm,
		      const struct cql_resource *r)
{
	if (p->super)
		return true;
	bool fast = (r->kind == CQL_RES_ALL_KEYSPACES ||
		     (r->kind == CQL_RES_KEYSPACE && r->keyspace) ||
		     (r->kind == CQL_RES_TABLE && r->keyspace && r->name) ||
		     r->kind == CQL_RES_ALL_ROLES ||
		     (r->kind == CQL_RES_ROLE && r->name));
	if (fast) {
		for (size_t i = 0; i < p->n; i++)
			if ((p->g[i].perms & perm) &&
			    grant_covers(p->g[i].resource, r))
				return true;
		return false;
	}
	struct cql_resource cur = *r, up;
	char name[RESOURCE_MAX];
	for (;;) {
		if (cql_resource_name(&cur, name, sizeof(name)) >= 0) {
			const struct auth_grant *g = grant_find(p, name);
			if (g && (g->perms & perm))
				return true;
		}
		if (!cql_resource_parent(&cur, &up))
			return false;
		cur = up;
	}
}

int auth_perms_check(const struct auth_perms *p, const char *user,
		     uint32_t perm, const struct cql_resource *r,
		     struct auth_err *e)
{
	if (auth_perms_allow(p, perm, r))
		return 0;
	char shown[RESOURCE_MAX];
	cql_resource_display(r, shown, sizeof(shown));
	return auth_fail(e, CQL_ERR_UNAUTHORIZED,
			 "User %s has no %s permission on %s or any of its "
			 "parents",
			 user, cql_permission_name(perm), shown);
}

/* ---- writes -------------------------------------------------------------- */

static int run(struct cql_auth *a, struct auth_err *e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int run(struct cql_auth *a, struct auth_err *e, const char *fmt, ...)
{
	char text[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(text))
		return auth_fail(e, CQL_ERR_INVALID, "name too long");
	struct auth_result res;
	if (auth_query(a, CQL_CL_LOCAL_ONE, &res, e, "%s", text) != 0)
		return -1;
	auth_result_free(&res);
	return 0;
}

/* {'SELECT', 'MODIFY'} for a set of bits. */
static void perm_set_literal(uint32_t perms, char *out, size_t cap)
{
	size_t n = 0;
	out[0] = '\0';
	for (uint32_t bit = 1; bit && bit <= CQL_PERM_EXECUTE; bit <<= 1) {
		if (!(perms & bit))
			continue;
		n += (size_t)snprintf(out + n, cap - n, "%s'%s'", n ? ", " : "",
				      cql_permission_name(bit));
		if (n >= cap)
			break;
	}
}

int auth_grant(struct cql_auth *a, uint32_t perms, const char *resource,
	       const char *role, bool grant, struct auth_err *e)
{
	struct arena t;
	char set[256];
	arena_create(&t, 0);
	perm_set_literal(perms, set, sizeof(set));
	const char *qr = auth_quote(&t, role), *qres = auth_quote(&t, resource);
	int rc = run(a, e,
		     "UPDATE system_auth.role_permissions SET permissions = "
		     "permissions %s {%s} WHERE role = %s AND resource = %s",
		     grant ? "+" : "-", set, qr, qres);
	if (rc == 0 && grant)
		rc = run(a, e,
			 "INSERT INTO system_auth.resource_role_permissons_"
			 "index (resource, role) VALUES (%s, %s)",
			 qres, qr);
	else if (rc == 0)
		rc = run(a, e,
			 "DELETE FROM system_auth.resource_role_permissons_"
			 "index WHERE resource = %s AND role = %s",
			 qres, qr);
	arena_destroy(&t);
	return rc;
}

/* Cassandra's revokeAllOn: every role's permissions on `resource` (or,
 * with `prefix`, on every resource whose name starts with it). */
static int revoke_all_on(struct cql_auth *a, const char *resource, bool prefix,
			 struct auth_err *e)
{
	struct arena t;
	struct auth_result res;
	arena_create(&t, 0);
	int rc = prefix ? auth_query(a, CQL_CL_LOCAL_ONE, &res, e,
				     "SELECT resource, role FROM "
				     "system_auth.resource_role_permissons_"
				     "index")
			: auth_query(a, CQL_CL_LOCAL_ONE, &res, e,
				     "SELECT resource, role FROM "
				     "system_auth.resource_role_permissons_"
				     "index WHERE resource = %s",
				     auth_quote(&t, resource));
	if (rc != 0) {
		arena_destroy(&t);
		return -1;
	}
	const struct cql_client_rows *rows = &res.resp.rows;
	size_t plen = strlen(resource);
	for (int32_t i = 0;
	     rc == 0 && res.resp.kind == CQL_RESULT_ROWS && i < rows->row_count;
	     i++) {
		char *r = cell_text(rows, i, 0), *role = cell_text(rows, i, 1);
		if (!r || !role) {
			rc = auth_fail(e, CQL_ERR_SERVER, "out of memory");
		} else if (!prefix || strncmp(r, resource, plen) == 0) {
			const char *qr = auth_quote(&t, r);
			rc = run(a, e,
				 "DELETE FROM system_auth.role_permissions "
				 "WHERE role = %s AND resource = %s",
				 auth_quote(&t, role), qr);
			if (rc == 0)
				rc = run(a, e,
					 "DELETE FROM system_auth.resource_"
					 "role_permissons_index WHERE "
					 "resource = %s AND role = %s",
					 qr, auth_quote(&t, role));
		}
		free(r);
		free(role);
	}
	auth_result_free(&res);
	arena_destroy(&t);
	return rc;
}

int auth_revoke_all_on(struct cql_auth *a, const struct cql_resource *r,
		       struct auth_err *e)
{
	char name[RESOURCE_MAX];
	if (cql_resource_name(r, name, sizeof(name)) < 0)
		return auth_fail(e, CQL_ERR_INVALID, "name too long");
	if (revoke_all_on(a, name, false, e) != 0)
		return -1;
	if (r->kind == CQL_RES_KEYSPACE) {
		/* its tables, and its functions */
		char sub[RESOURCE_MAX + 2];
		snprintf(sub, sizeof(sub), "%s/", name);
		struct cql_resource f = {.kind = CQL_RES_KEYSPACE_FUNCTIONS,
					 .keyspace = r->keyspace};
		char fname[RESOURCE_MAX];
		if (revoke_all_on(a, sub, true, e) != 0 ||
		    cql_resource_name(&f, fname, sizeof(fname)) < 0 ||
		    revoke_all_on(a, fname, false, e) != 0)
			return -1;
	}
	return 0;
}

int auth_revoke_all_from(struct cql_auth *a, const char *role,
			 struct auth_err *e)
{
	struct arena t;
	struct auth_result res;
	arena_create(&t, 0);
	const char *qrole = auth_quote(&t, role);
	int rc = auth_query(a, CQL_CL_LOCAL_ONE, &res, e,
			    "SELECT resource FROM system_auth.role_permissions "
			    "WHERE role = %s",
			    qrole);
	if (rc != 0) {
		arena_destroy(&t);
		return -1;
	}
	const struct cql_client_rows *rows = &res.resp.rows;
	for (int32_t i = 0;
	     rc == 0 && res.resp.kind == CQL_RESULT_ROWS && i < rows->row_count;
	     i++) {
		char *r = cell_text(rows, i, 0);
		rc = r ? run(a, e,
			     "DELETE FROM system_auth.resource_role_"
			     "permissons_index WHERE resource = %s AND role = "
			     "%s",
			     auth_quote(&t, r), qrole)
		       : auth_fail(e, CQL_ERR_SERVER, "out of memory");
		free(r);
	}
	auth_result_free(&res);
	if (rc == 0)
		rc = run(a, e,
			 "DELETE FROM system_auth.role_permissions WHERE role "
			 "= %s",
			 qrole);
	arena_destroy(&t);
	return rc;
}

/* ---- GRANT / REVOKE / LIST PERMISSIONS ----------------------------------- */

static int resource_exists(struct cql_auth *a, const struct auth_role_job *j,
			   bool *exists, struct auth_err *e)
{
	const struct cql_resource *r = &j->st.resource;
	switch (r->kind) {
	case CQL_RES_ROLE: {
		struct auth_role role;
		if (auth_get_role(a, r->name, &role, e) != 0)
			return -1;
		*exists = role.exists;
		auth_role_free(&role);
		return 0;
	}
	case CQL_RES_KEYSPACE:
	case CQL_RES_TABLE:
	case CQL_RES_KEYSPACE_FUNCTIONS:
	case CQL_RES_FUNCTION:
	case CQL_RES_MBEAN:
		*exists = j->resource_exists; /* looked up on the loop */
		return 0;
	default:
		*exists = true;
		return 0;
	}
}

int auth_grant_statement(struct cql_auth *a, const struct auth_role_job *j,
			 const struct auth_perms *p, struct auth_err *e)
{
	const struct cql_role_stmt *s = &j->st;
	bool grant = s->op == CQL_ROLE_GRANT_PERMISSION;
	char shown[RESOURCE_MAX], name[RESOURCE_MAX];
	struct auth_role g;
	if (auth_get_role(a, s->grantee, &g, e) != 0)
		return -1;
	bool exists = g.exists;
	auth_role_free(&g);
	if (!exists)
		return auth_fail(e, CQL_ERR_INVALID, "Role %s doesn't exist",
				 s->grantee);
	if (j->resource_error[0])
		return auth_fail(e, CQL_ERR_INVALID, "%s", j->resource_error);
	if ((s->resource.kind == CQL_RES_FUNCTION ||
	     s->resource.kind == CQL_RES_KEYSPACE_FUNCTIONS) &&
	    strcmp(s->resource.keyspace, "system") == 0)
		return auth_fail(e, CQL_ERR_INVALID,
				 "Altering permissions on builtin functions is "
				 "not supported");
	cql_resource_display(&s->resource, shown, sizeof(shown));
	if (resource_exists(a, j, &exists, e) != 0)
		return -1;
	if (!exists)
		return auth_fail(e, CQL_ERR_INVALID,
				 "Resource %s doesn't exist", shown);
	/* AUTHORIZE on it, and each permission given away */
	if (auth_perms_check(p, j->performer, CQL_PERM_AUTHORIZE, &s->resource,
			     e) != 0)
		return -1;
	for (uint32_t bit = 1; bit && bit <= CQL_PERM_EXECUTE; bit <<= 1)
		if ((s->permissions & bit) &&
		    auth_perms_check(p, j->performer, bit, &s->resource, e) !=
			    0)
			return -1;
	if (cql_resource_name(&s->resource, name, sizeof(name)) < 0)
		return auth_fail(e, CQL_ERR_INVALID, "resource name too long");
	return auth_grant(a, s->permissions, name, s->grantee, grant, e);
}

struct detail {
	char *role;
	char *resource; /* stored name */
	uint32_t perm;
};

struct details {
	struct detail *v;
	size_t n, cap;
};

static void details_free(struct details *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->v[i].role);
		free(d->v[i].resource);
	}
	free(d->v);
}

static int details_add(struct details *d, const char *role,
		       const char *resource, uint32_t perm)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].perm == perm && strcmp(d->v[i].role, role) == 0 &&
		    strcmp(d->v[i].resource, resource) == 0)
			return 0;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		struct detail *v = realloc(d->v, cap * sizeof(*v));
		if (!v)
			return -1;
		d->v = v;
		d->cap = cap;
	}
	struct detail x = {strdup(role), strdup(resource), perm};
	if (!x.role || !x.resource) {
		free(x.role);
		free(x.resource);
		return -1;
	}
	d->v[d->n++] = x;
	return 0;
}

/* PermissionDetails' order: role, resource name, permission. */
static int detail_cmp(const void *x, const void *y)
{
	const struct detail *a = x, *b = y;
	int c = strcmp(a->role, b->role);
	if (c == 0)
		c = strcmp(a->resource, b->resource);
	if (c == 0)
		c = a->perm < b->perm ? -1 : a->perm > b->perm;
	return c;
}

/* The rows of role_permissions for `role` (NULL: every role) on the
 * resources in `names` (none: all), keeping the permissions in `want`. */
static int list_for(struct cql_auth *a, const char *role, char names[][600],
		    size_t nnames, uint32_t want, struct details *out,
		    struct auth_err *e)
{
	struct arena t;
	struct auth_result res;
	arena_create(&t, 0);
	int rc = role ? auth_query(a, CQL_CL_LOCAL_ONE, &res, e,
				   "SELECT role, resource, permissions FROM "
				   "system_auth.role_permissions WHERE role = "
				   "%s",
				   auth_quote(&t, role))
		      : auth_query(a, CQL_CL_LOCAL_ONE, &res, e,
				   "SELECT role, resource, permissions FROM "
				   "system_auth.role_permissions");
	arena_destroy(&t);
	if (rc != 0)
		return -1;
	const struct cql_client_rows *rows = &res.resp.rows;
	for (int32_t i = 0;
	     rc == 0 && res.resp.kind == CQL_RESULT_ROWS && i < rows->row_count;
	     i++) {
		char *rl = cell_text(rows, i, 0), *rs = cell_text(rows, i, 1);
		uint32_t bits =
			perm_bits(cql_client_rows_cell(rows, i, 2)) & want;
		bool keep = nnames == 0;
		for (size_t k = 0; rs && !keep && k < nnames; k++)
			keep = strcmp(rs, names[k]) == 0;
		if (!rl || !rs)
			rc = auth_fail(e, CQL_ERR_SERVER, "out of memory");
		for (uint32_t bit = 1;
		     rc == 0 && keep && bit <= CQL_PERM_EXECUTE; bit <<= 1)
			if ((bits & bit) && details_add(out, rl, rs, bit) != 0)
				rc = auth_fail(e, CQL_ERR_SERVER,
					       "out of memory");
		free(rl);
		free(rs);
	}
	auth_result_free(&res);
	return rc;
}

static int write_text(struct buf *b, const char *s)
{
	return cql_write_bytes(b, s, (int32_t)strlen(s));
}

static void reply_details(const struct auth_role_job *j, struct details *d,
			  struct buf *out)
{
	static const struct cql_type_option text = {.id = CQL_TYPE_VARCHAR};
	const struct cql_column_spec cols[] = {
		{"system_auth", "permissions", "role", &text},
		{"system_auth", "permissions", "username", &text},
		{"system_auth", "permissions", "resource", &text},
		{"system_auth", "permissions", "permission", &text},
	};
	long start =
		cql_frame_begin(out, j->version, 0, j->stream, CQL_OP_RESULT);
	if (start < 0)
		goto fail;
	if (d->n == 0) { /* Cassandra answers Void when nothing matched */
		if (cql_write_int(out, CQL_RESULT_VOID) != 0)
			goto fail;
		cql_frame_end(out, start);
		return;
	}
	qsort(d->v, d->n, sizeof(*d->v), detail_cmp);
	int rc = cql_write_int(out, CQL_RESULT_ROWS) ||
		 cql_write_rows_metadata(out, cols, 4, NULL, false) ||
		 cql_write_int(out, (int32_t)d->n);
	for (size_t i = 0; rc == 0 && i < d->n; i++) {
		struct cql_resource r;
		char buf[RESOURCE_MAX], shown[RESOURCE_MAX];
		if (cql_resource_from_name(d->v[i].resource, &r, buf,
					   sizeof(buf)) != 0 ||
		    cql_resource_display(&r, shown, sizeof(shown)) < 0)
			snprintf(shown, sizeof(shown), "%s", d->v[i].resource);
		rc = write_text(out, d->v[i].role) ||
		     write_text(out, d->v[i].role) || write_text(out, shown) ||
		     write_text(out, cql_permission_name(d->v[i].perm));
	}
	if (rc)
		goto fail;
	cql_frame_end(out, start);
	return;
fail:
	buf_clear(out);
}

int auth_list_permissions(struct cql_auth *a, const struct auth_role_job *j,
			  const struct auth_perms *p, struct buf *out,
			  struct auth_err *e)
{
	const struct cql_role_stmt *s = &j->st;
	char shown[RESOURCE_MAX];
	char names[8][600];
	size_t nnames = 0;
	if (s->resource.kind != CQL_RES_NONE) {
		bool exists;
		if (j->resource_error[0])
			return auth_fail(e, CQL_ERR_INVALID, "%s",
					 j->resource_error);
		cql_resource_display(&s->resource, shown, sizeof(shown));
		if (resource_exists(a, j, &exists, e) != 0)
			return -1;
		if (!exists)
			return auth_fail(e, CQL_ERR_INVALID, "%s doesn't exist",
					 shown);
		/* the resource, and unless NORECURSIVE its parents */
		struct cql_resource cur = s->resource, up;
		for (;;) {
			if (cql_resource_name(&cur, names[nnames], 600) < 0)
				return auth_fail(e, CQL_ERR_INVALID,
						 "resource name too long");
			nnames++;
			if (s->norecursive || nnames == 8 ||
			    !cql_resource_parent(&cur, &up))
				break;
			cur = up;
		}
	}
	if (s->role) {
		struct auth_role r;
		if (auth_get_role(a, s->role, &r, e) != 0)
			return -1;
		bool exists = r.exists;
		auth_role_free(&r);
		if (!exists)
			return auth_fail(e, CQL_ERR_INVALID,
					 "<role %s> doesn't exist", s->role);
	}
	if (!p->super && (!s->role || !auth_perms_has_role(p, s->role)))
		return auth_fail(e, CQL_ERR_UNAUTHORIZED,
				 "You are not authorized to view %s's "
				 "permissions",
				 s->role ? s->role : "everyone");
	struct details d = {0};
	int rc = 0;
	if (!s->role) {
		rc = list_for(a, NULL, names, nnames, s->permissions, &d, e);
	} else {
		/* the role and every role it has */
		struct auth_perms of = {0};
		rc = auth_collect_roles(a, s->role, &of, e);
		for (size_t i = 0; rc == 0 && i < of.nroles; i++)
			rc = list_for(a, of.roles[i], names, nnames,
				      s->permissions, &d, e);
		auth_perms_free(&of);
	}
	if (rc == 0)
		reply_details(j, &d, out);
	details_free(&d);
	return rc;
}

/* ---- after DDL ----------------------------------------------------------- */

int auth_schema_applied(struct cql_auth *a, const char *user, bool created,
			const char *keyspace, const char *table,
			struct auth_err *e)
{
	struct cql_resource r = {
		.kind = table ? CQL_RES_TABLE : CQL_RES_KEYSPACE,
		.keyspace = keyspace,
		.name = table,
	};
	if (!created)
		return auth_revoke_all_on(a, &r, e);
	if (!user)
		return 0;
	/* Cassandra's grantPermissionsToCreator: all that applies, on the
	 * keyspace and its functions, or on the table */
	char name[RESOURCE_MAX];
	if (cql_resource_name(&r, name, sizeof(name)) < 0 ||
	    auth_grant(a, cql_resource_applicable(&r), name, user, true, e) !=
		    0)
		return -1;
	if (table)
		return 0;
	struct cql_resource f = {.kind = CQL_RES_KEYSPACE_FUNCTIONS,
				 .keyspace = keyspace};
	if (cql_resource_name(&f, name, sizeof(name)) < 0)
		return -1;
	return auth_grant(a, cql_resource_applicable(&f), name, user, true, e);
}
