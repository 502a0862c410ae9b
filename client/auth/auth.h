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
};

/* NULL with err set. `q` posts to the loop the executor runs on. */
struct cql_auth *cql_auth_new(struct event_base *base, struct loopq *q,
			      const struct cql_auth_config *c);
/* The executor the module's statements run on (set before use). */
void cql_auth_set_exec(struct cql_auth *a, struct cql_exec *exec);
/* On the loop thread: waits for the workers (their statements are
 * answered with an error), then frees. */
void cql_auth_delete(struct cql_auth *a);

/* The authenticator for the server's config, or NULL with
 * AllowAllAuthenticator. Lives as long as `a`. */
const struct cql_authenticator *cql_auth_authenticator(struct cql_auth *a);

/* The executor's role hook (arg = the cql_auth). */
void cql_auth_role_statement(void *arg, struct cql_request *req,
			     const struct cql_request_info *info,
			     const struct cql_role_stmt *r);

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
