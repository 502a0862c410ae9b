/*
 * Authentication and roles: Cassandra 4.1's PasswordAuthenticator and
 * CassandraRoleManager (docs/security.md).
 *
 * Roles live in system_auth.roles and system_auth.role_members, real
 * tables replicated as the keyspace says (SimpleStrategy RF 1 until an
 * operator alters it), read and written with CQL statements run through
 * the executor as internal requests, so they go through the coordinator
 * like any client's: reads of a role at LOCAL_ONE, at QUORUM for the
 * default superuser `cassandra`, as Cassandra does.
 *
 * Threads: the module's API is called on the event loop. The work runs on
 * its own worker threads (bcrypt costs ~50 ms at 10 rounds, and a role
 * statement is a sequence of reads and writes): a worker posts each
 * internal statement to the loop through the loopq and waits for its
 * answer, then posts the reply to the client back the same way. Nothing
 * on the loop waits.
 */
#ifndef CASSINI_CLIENT_AUTH_H
#define CASSINI_CLIENT_AUTH_H

#include "client/cql/cql_ast.h"
#include "client/proto/server.h"
#include "client/schema/schema.h"

#include <stdbool.h>
#include <stdint.h>

struct cql_auth;
struct cql_exec;
struct loopq;

struct cql_auth_config {
	bool password_authenticator; /* else AllowAllAuthenticator */
	int bcrypt_rounds;           /* 4 to 31 */
	/* Before the default superuser is looked for and created, and
	 * between attempts. */
	uint64_t superuser_setup_delay_ms;
	/* Longest wait of a worker for one internal statement. */
	uint64_t query_timeout_ms;
	/* CassandraAuthorizer (else AllowAllAuthorizer): permissions from
	 * system_auth.role_permissions, checked on every statement. */
	bool cassandra_authorizer;
	/* The per-user cache of roles and permissions: an entry older than
	 * the validity is reloaded before the request runs (0: no cache);
	 * one older than the update interval is served while a worker
	 * reloads it. The smaller of the roles_ and permissions_ values
	 * apply (one entry holds both). */
	uint64_t permissions_validity_ms, permissions_update_interval_ms;
	uint64_t roles_validity_ms, roles_update_interval_ms;
	uint64_t permissions_cache_max_entries;
	/* PasswordAuthenticator's credentials cache (a role's hash and
	 * LOGIN, by name; the bcrypt check runs on every login): an entry
	 * older than the validity is read again before the login (0: no
	 * cache), one older than the update interval is used and then
	 * read again. */
	uint64_t credentials_validity_ms, credentials_update_interval_ms;
	uint64_t credentials_cache_max_entries;
};

/* NULL with err set. `q` posts to the loop the executor runs on. */
struct cql_auth *cql_auth_new(struct event_base *base, struct loopq *q,
			      const struct cql_auth_config *c);
/* The executor the module's statements run on (set before use). */
void cql_auth_set_exec(struct cql_auth *a, struct cql_exec *exec);
/* The schema the permission statements look resources up in. */
void cql_auth_set_schema(struct cql_auth *a, const struct cql_schema *s);
/* On the loop thread: waits for the workers (their statements are
 * answered with an error), then frees. */
void cql_auth_delete(struct cql_auth *a);

/* The authenticator for the server's config, or NULL with
 * AllowAllAuthenticator. Lives as long as `a`. */
const struct cql_authenticator *cql_auth_authenticator(struct cql_auth *a);

/* The admin port's login (docs/security.md): on a worker, whether
 * `user`/`password` are the credentials of a role that may log in and is
 * a superuser; `done` runs on the loop with NULL, or the refusal in
 * Cassandra's words. Strings are copied. */
typedef void (*cql_auth_superuser_fn)(void *arg, const char *refusal);
void cql_auth_check_superuser(struct cql_auth *a, const char *user,
			      const char *password, cql_auth_superuser_fn done,
			      void *arg);

/* The executor's role hook (arg = the cql_auth). */
void cql_auth_role_statement(void *arg, struct cql_request *req,
			     const struct cql_request_info *info,
			     const struct cql_role_stmt *r);

/*
 * CassandraAuthorizer on the loop thread.
 *
 * cql_auth_execute: the server's executor callback in front of
 * cql_exec_execute: when the user's roles and permissions are cached (and
 * valid) the request runs at once, else it waits (in order, per user)
 * while a worker loads them. Nothing on the loop blocks.
 *
 * cql_auth_authorize: the executor's check: 0 when the request's user
 * holds `perm` on `r` or a parent (superusers hold everything; SELECT on
 * system_schema, system_virtual_schema, system.local and system.peers is
 * everyone's), else -1 with Cassandra's Unauthorized message in `msg`.
 *
 * cql_auth_schema_applied: after a CREATE or DROP of a keyspace or table:
 * grants the creator every permission that applies to it, or revokes
 * everyone's on what was dropped, then replies `frame` (copied); false
 * when there is nothing to do (the caller replies).
 *
 * cql_auth_invalidate: forgets every cached entry (after GRANT, REVOKE
 * and role changes made on this node).
 */
void cql_auth_execute(void *arg, struct cql_request *req,
		      const struct cql_request_info *info, const uint8_t *body,
		      size_t len);
int cql_auth_authorize(void *arg, const struct cql_request_info *info,
		       uint32_t perm, const struct cql_resource *r, char *msg,
		       size_t cap);
bool cql_auth_schema_applied(void *arg, struct cql_request *req,
			     const struct cql_request_info *info,
			     const struct cql_schema_change *c,
			     const uint8_t *frame, size_t len);
void cql_auth_invalidate(struct cql_auth *a);

/* Once the node serves: after superuser_setup_delay, creates the default
 * superuser cassandra/cassandra unless a role exists (PasswordAuthenticator
 * only), retrying until the cluster answers. */
void cql_auth_start(struct cql_auth *a);

/* bcrypt ($2a$, libcrypt), for tests and tools. `out` gets the hash
 * (60 characters); 0, or -1 with err set. */
int cql_auth_hash_password(const char *password, int rounds, char *out,
			   size_t cap);
/* Whether `password` matches `hash` (constant-time comparison). */
bool cql_auth_check_password(const char *password, const char *hash);
/* Splits a SASL PLAIN token ([authzid] NUL authcid NUL password) as
 * Cassandra does; 0, or -1 with Cassandra's message in err. The outputs
 * point into `token` and are not NUL-terminated. */
int cql_auth_sasl_plain(const uint8_t *token, size_t len, const char **user,
			size_t *user_len, const char **pass, size_t *pass_len);

#endif
