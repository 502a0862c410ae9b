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
int auth_rounds(const struct cql_auth *a);

/* roles.c: runs a role statement on a worker; the reply frame goes to
 * `out`. */
struct auth_role_job {
	struct cql_role_stmt st; /* strings owned by the job */
	char *performer;         /* NULL: anonymous */
	uint8_t version;
	int16_t stream;
};
void auth_run_role_statement(struct cql_auth *a, const struct auth_role_job *j,
			     struct buf *out);

#endif
