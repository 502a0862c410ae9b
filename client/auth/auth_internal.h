/* Shared by client/auth/auth.c and client/auth/roles.c (see auth.h). */
#ifndef CASSINI_CLIENT_AUTH_INTERNAL_H
#define CASSINI_CLIENT_AUTH_INTERNAL_H

#include "client/auth/auth.h"
#include "client/driver/cql_client.h"
#include "common/arena.h"
#include "common/buf.h"

#include <stddef.h>
#include <stdint.h>

#define AUTH_SUPERUSER          "cassandra"
#define AUTH_ROLE_MANAGER_CLASS "org.apache.cassandra.auth.CassandraRoleManager"

/* An error to answer: a protocol error code and Cassandra's message. */
struct auth_err {
	uint32_t code;
	char msg[512];
};

int auth_fail(struct auth_err *e, uint32_t code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A statement's answer, decoded (rows borrow `frame`). */
struct auth_result {
	struct arena a;
	struct buf frame;
	struct cql_client_response resp;
};
void auth_result_free(struct auth_result *r);

/*
 * Worker threads only: runs a statement (printf-formatted; quote names
 * with auth_quote) at consistency `cl` on the loop as an internal request
 * and waits for its answer. 0 with `out` filled (free it), or -1 with `e`
 * set (the coordinator's error: timeout, unavailable, ...).
 */
int auth_query(struct cql_auth *a, uint16_t cl, struct auth_result *out,
	       struct auth_err *e, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* 'name' with quotes doubled, as a CQL string literal, into the arena. */
const char *auth_quote(struct arena *a, const char *s);

/* LOCAL_ONE, or QUORUM for the default superuser (consistencyForRole). */
uint16_t auth_consistency_for(const char *role);

/* A row of system_auth.roles. */
struct auth_role {
	bool exists;
	bool super, login;
	char *name;
	char *hash;       /* NULL when none */
	char **member_of; /* granted roles */
	size_t member_count;
};
void auth_role_free(struct auth_role *r);
int auth_get_role(struct cql_auth *a, const char *name, struct auth_role *r,
		  struct auth_err *e);

bool auth_password_enabled(const struct cql_auth *a);
bool auth_authorizer_enabled(const struct cql_auth *a);
int auth_rounds(const struct cql_auth *a);

/* roles.c: runs a role statement on a worker; the reply frame goes to
 * `out`. */
struct auth_role_job {
	struct cql_role_stmt st; /* strings owned by the job */
	char *performer;         /* NULL: anonymous */
	uint8_t version;
	int16_t stream;
	/* Permission statements: st.resource's existence (keyspaces and
	 * tables, looked up in the schema on the loop), or the error its
	 * name gave (a table without keyspace and no USE). */
	bool resource_exists;
	char resource_error[160];
};
void auth_run_role_statement(struct cql_auth *a, const struct auth_role_job *j,
			     struct buf *out);

/* A set<text> value's elements (malloc'd; free each and the array). */
int auth_parse_text_set(const struct cql_value *v, char ***out, size_t *n);

/* ---- CassandraAuthorizer (authz.c) --------------------------------------- */

/* The permissions of one resource, merged over a user's roles. */
struct auth_grant {
	char *resource; /* stored name: "data/ks/t" */
	uint32_t perms;
};

/* What a logged-in user may do: its roles (recursively), whether one is a
 * superuser, and (not for superusers) the grants of them all. */
struct auth_perms {
	bool super;
	char **roles;
	size_t nroles, roles_cap;
	struct auth_grant *g;
	size_t n, cap;
};
void auth_perms_free(struct auth_perms *p);
/* roles.c: the roles of `user` into p->roles, and p->super. */
int auth_collect_roles(struct cql_auth *a, const char *user,
		       struct auth_perms *p, struct auth_err *e);
/* Worker threads: the roles and grants of `user`. */
int auth_load_perms(struct cql_auth *a, const char *user, struct auth_perms *p,
		    struct auth_err *e);
bool auth_perms_has_role(const struct auth_perms *p, const char *role);
/* `perm` on `r` or one of its parents (always for a superuser). */
bool auth_perms_allow(const struct auth_perms *p, uint32_t perm,
		      const struct cql_resource *r);
/* The same, or -1 with Cassandra's Unauthorized message for `user`. */
int auth_perms_check(const struct auth_perms *p, const char *user,
		     uint32_t perm, const struct cql_resource *r,
		     struct auth_err *e);

/* Adds (grant) or removes permissions of `role` on a stored resource
 * name, with the reverse index. */
int auth_grant(struct cql_auth *a, uint32_t perms, const char *resource,
	       const char *role, bool grant, struct auth_err *e);
/* Everyone's permissions on `r` (a keyspace: also its tables and
 * functions), and every permission of `role` (DROP ROLE). */
int auth_revoke_all_on(struct cql_auth *a, const struct cql_resource *r,
		       struct auth_err *e);
int auth_revoke_all_from(struct cql_auth *a, const char *role,
			 struct auth_err *e);
/* GRANT/REVOKE perms ON r TO/FROM role; LIST PERMISSIONS (reply in out). */
int auth_grant_statement(struct cql_auth *a, const struct auth_role_job *j,
			 const struct auth_perms *p, struct auth_err *e);
int auth_list_permissions(struct cql_auth *a, const struct auth_role_job *j,
			  const struct auth_perms *p, struct buf *out,
			  struct auth_err *e);
/* After a CREATE (the creator `user`, NULL when anonymous, gets what
 * applies) or a DROP (everyone's permissions go) of a keyspace (table
 * NULL) or table. */
int auth_schema_applied(struct cql_auth *a, const char *user, bool created,
			const char *keyspace, const char *table,
			struct auth_err *e);

#endif
