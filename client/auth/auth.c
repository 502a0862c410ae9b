/*
 * PasswordAuthenticator, the internal statements of the role manager, and
 * the default superuser (see auth.h).
 *
 * An internal statement: the worker builds a QUERY body, posts an item to
 * the loop and waits on its condition variable; on the loop the item runs
 * the executor with a detached request (info.internal set, so system_auth
 * may be written), whose reply callback copies the frame and signals. The
 * statement holds two references (worker, loop side), so a worker that
 * gave up (timeout, shutdown) leaves it to the late reply to free.
 */
#define LOG_MODULE "auth"
#include "client/auth/auth_internal.h"

#include "client/cql/cql_resource.h"
#include "client/exec/executor.h"
#include "client/schema/system_tables.h"
#include "common/err.h"
#include "common/log.h"
#include "common/loopq.h"
#include "common/workers.h"
#include "common/zalloc.h"

#include <crypt.h>
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AUTHENTICATOR_CLASS "org.apache.cassandra.auth.PasswordAuthenticator"
#define AUTHZ_BUCKETS       256

/* A request waiting for its user's permissions (see cql_auth_execute). */
struct authz_pending {
	struct authz_pending *next;
	struct cql_request *req;
	struct cql_request_info info; /* keyspace and user point below */
	char *keyspace, *user;
	const uint8_t *body; /* valid until the reply (server.h) */
	size_t len;
};

/* One user's cached roles and permissions (loop thread only). */
struct authz_entry {
	struct authz_entry *next;
	char *user;
	struct auth_perms perms;
	bool have;    /* perms loaded */
	bool loading; /* a worker is reading them */
	uint64_t loaded_ms;
	struct authz_pending *head, **tail;
};

struct cql_auth {
	struct event_base *base;
	struct loopq *q;
	struct cql_exec *exec;
	struct workers *workers;
	struct cql_auth_config cfg;
	struct cql_authenticator authenticator;
	struct event *setup_timer;
	bool setup_running;
	int stopping; /* atomic */
	const struct cql_schema *schema;
	struct cql_schema *views; /* system_views, system_virtual_schema */
	/* CassandraAuthorizer's cache, by user */
	struct authz_entry *cache[AUTHZ_BUCKETS];
	size_t cache_count;
	uint64_t generation; /* bumped by each invalidation */
	uint64_t validity_ms, update_ms;
	/* the credentials cache: written by the workers, emptied by
	 * invalidations on the loop */
	pthread_mutex_t cred_mu;
	struct cred_entry *creds;
	size_t cred_count;
};

/* A role's credentials as a login last read them. */
struct cred_entry {
	char *user;
	char *hash; /* NULL: no password */
	bool exists, login;
	uint64_t loaded_ms;
	struct cred_entry *next;
};

static void cred_free(struct cred_entry *e)
{
	free(e->user);
	free(e->hash);
	free(e);
}

static void creds_clear(struct cql_auth *a)
{
	pthread_mutex_lock(&a->cred_mu);
	while (a->creds) {
		struct cred_entry *e = a->creds;
		a->creds = e->next;
		cred_free(e);
	}
	a->cred_count = 0;
	pthread_mutex_unlock(&a->cred_mu);
}

int auth_fail(struct auth_err *e, uint32_t code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	e->code = code;
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

bool auth_authorizer_enabled(const struct cql_auth *a)
{
	return a->cfg.cassandra_authorizer;
}

bool auth_password_enabled(const struct cql_auth *a)
{
	return a->cfg.password_authenticator;
}

int auth_rounds(const struct cql_auth *a)
{
	return a->cfg.bcrypt_rounds;
}

uint16_t auth_consistency_for(const char *role)
{
	return strcmp(role, AUTH_SUPERUSER) == 0 ? CQL_CL_QUORUM
						 : CQL_CL_LOCAL_ONE;
}

const char *auth_quote(struct arena *a, const char *s)
{
	size_t n = 0;
	for (const char *p = s; *p; p++)
		n += *p == '\'' ? 2 : 1;
	char *d = arena_alloc(a, n + 3);
	if (!d)
		return "''";
	char *o = d;
	*o++ = '\'';
	for (const char *p = s; *p; p++) {
		*o++ = *p;
		if (*p == '\'')
			*o++ = '\'';
	}
	*o++ = '\'';
	*o = '\0';
	return d;
}

/* ---- bcrypt ---------------------------------------------------------------
 */

int cql_auth_hash_password(const char *password, int rounds, char *out,
			   size_t cap)
{
	char setting[CRYPT_GENSALT_OUTPUT_SIZE];
	/* $2a$: what Cassandra's jBCrypt writes and reads */
	if (!crypt_gensalt_rn("$2a$", (unsigned long)rounds, NULL, 0, setting,
			      sizeof(setting)))
		return err_set(ERR_INVALID, "cannot make a bcrypt salt: %s",
			       strerror(errno));
	struct crypt_data *cd = zcalloc(1, sizeof(*cd));
	if (!cd)
		return err_set(ERR_NOMEM, "out of memory");
	const char *h = crypt_r(password, setting, cd);
	int rc = 0;
	if (!h || h[0] == '*' || strlen(h) + 1 > cap)
		rc = err_set(ERR_INVALID, "bcrypt failed");
	else
		snprintf(out, cap, "%s", h);
	explicit_bzero(cd, sizeof(*cd));
	free(cd);
	return rc;
}

bool cql_auth_check_password(const char *password, const char *hash)
{
	if (strncmp(hash, "$2", 2) != 0)
		return false; /* not a bcrypt hash: nothing matches */
	struct crypt_data *cd = zcalloc(1, sizeof(*cd));
	if (!cd)
		return false;
	const char *h = crypt_r(password, hash, cd);
	bool ok = false;
	if (h && h[0] != '*') {
		size_t n = strlen(hash);
		unsigned char diff = strlen(h) != n;
		/* every byte is compared whatever differs first */
		for (size_t i = 0; i < n && h[i]; i++)
			diff |= (unsigned char)(h[i] ^ hash[i]);
		ok = diff == 0;
	}
	explicit_bzero(cd, sizeof(*cd));
	free(cd);
	return ok;
}

int cql_auth_sasl_plain(const uint8_t *token, size_t len, const char **user,
			size_t *user_len, const char **pass, size_t *pass_len)
{
	/* From the end, as Cassandra's PlainTextSaslAuthenticator: the part
	 * after the last NUL is the password, the one before it (after the
	 * first NUL) the authentication id; an authorization id in front is
	 * ignored. Without two NULs there is no authentication id. */
	const uint8_t *p = NULL, *u = NULL;
	size_t end = len, plen = 0, ulen = 0;
	int nuls = 0;
	for (size_t i = len; i-- > 0;) {
		if (token[i] != 0)
			continue;
		if (nuls == 0) {
			p = token + i + 1;
			plen = end - i - 1;
		} else if (nuls == 1) {
			u = token + i + 1;
			ulen = end - i - 1;
		} else {
			return err_set(ERR_INVALID,
				       "Credential format error: username or "
				       "password is empty or contains "
				       "NUL(\\0) character");
		}
		nuls++;
		end = i;
	}
	if (!p || plen == 0)
		return err_set(ERR_INVALID, "Password must not be null");
	if (!u || ulen == 0)
		return err_set(ERR_INVALID,
			       "Authentication ID must not be null");
	*user = (const char *)u;
	*user_len = ulen;
	*pass = (const char *)p;
	*pass_len = plen;
	return 0;
}

/* ---- internal statements ------------------------------------------------- */

struct iq {
	struct loopq_item item;
	struct cql_auth *a;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs;
	bool done;
	struct buf body;
	struct buf reply;
};

static void iq_unref(struct iq *q)
{
	pthread_mutex_lock(&q->mu);
	int left = --q->refs;
	pthread_mutex_unlock(&q->mu);
	if (left)
		return;
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	buf_free(&q->body);
	buf_free(&q->reply);
	free(q);
}

static void iq_finish(struct iq *q, const uint8_t *frame, size_t len)
{
	pthread_mutex_lock(&q->mu);
	if (buf_append(&q->reply, frame, len) != 0)
		buf_clear(&q->reply);
	q->done = true;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	iq_unref(q);
}

static void iq_on_reply(void *arg, const uint8_t *frame, size_t len)
{
	iq_finish(arg, frame, len);
}

static void iq_on_loop(struct loopq_item *item)
{
	struct iq *q = (struct iq *)item;
	struct cql_auth *a = q->a;
	if (__atomic_load_n(&a->stopping, __ATOMIC_ACQUIRE) || !a->exec) {
		iq_finish(q, NULL, 0);
		return;
	}
	struct cql_request *req = cql_request_detached(iq_on_reply, NULL, q);
	if (!req) {
		iq_finish(q, NULL, 0);
		return;
	}
	struct cql_request_info info = {
		.version = 4,
		.stream = 0,
		.opcode = CQL_OP_QUERY,
		.internal = true,
	};
	cql_exec_execute(a->exec, req, &info, q->body.data, q->body.len);
}

void auth_result_free(struct auth_result *r)
{
	arena_destroy(&r->a);
	buf_free(&r->frame);
}

int auth_query(struct cql_auth *a, uint16_t cl, struct auth_result *out,
	       struct auth_err *e, const char *fmt, ...)
{
	char text[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(text))
		return auth_fail(e, CQL_ERR_INVALID, "role name too long");
	struct iq *q = zcalloc(1, sizeof(*q));
	if (!q)
		return auth_fail(e, CQL_ERR_SERVER, "out of memory");
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	q->refs = 2;
	q->a = a;
	q->item.fn = iq_on_loop;
	buf_init(&q->body);
	buf_init(&q->reply);
	/* QUERY: the text, the consistency, no flags (no values, no paging:
	 * every row in one answer) */
	if (cql_write_long_string(&q->body, text, (size_t)n) != 0 ||
	    cql_write_short(&q->body, cl) != 0 ||
	    buf_append(&q->body, (const uint8_t *)"", 1) != 0) {
		q->refs = 1;
		iq_unref(q);
		return auth_fail(e, CQL_ERR_SERVER, "out of memory");
	}
	loopq_post(a->q, &q->item);
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	uint64_t left_ms = a->cfg.query_timeout_ms;
	pthread_mutex_lock(&q->mu);
	while (!q->done) {
		if (__atomic_load_n(&a->stopping, __ATOMIC_ACQUIRE) ||
		    left_ms == 0)
			break;
		/* short waits: a shutdown is noticed soon */
		uint64_t step = left_ms < 100 ? left_ms : 100;
		left_ms -= step;
		deadline.tv_nsec += (long)(step * 1000000);
		while (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_nsec -= 1000000000L;
			deadline.tv_sec++;
		}
		pthread_cond_timedwait(&q->cv, &q->mu, &deadline);
	}
	bool done = q->done;
	struct buf reply = q->reply;
	buf_init(&q->reply);
	pthread_mutex_unlock(&q->mu);
	iq_unref(q);
	if (!done || reply.len < CQL_HEADER_LEN) {
		buf_free(&reply);
		return auth_fail(e, CQL_ERR_SERVER,
				 done ? "the statement was not answered"
				      : "the statement timed out on this node");
	}
	memset(out, 0, sizeof(*out));
	out->frame = reply;
	arena_create(&out->a, 0);
	const uint8_t *f = reply.data;
	if (cql_client_response_decode(f[4], f[1], f + CQL_HEADER_LEN,
				       reply.len - CQL_HEADER_LEN, &out->a,
				       &out->resp) != 0) {
		auth_result_free(out);
		return auth_fail(e, CQL_ERR_SERVER, "undecodable answer");
	}
	if (out->resp.opcode == CQL_OP_ERROR) {
		auth_fail(e, (uint32_t)out->resp.error_code, "%.*s",
			  (int)out->resp.error_message.len,
			  (const char *)out->resp.error_message.ptr);
		auth_result_free(out);
		return -1;
	}
	return 0;
}

/* ---- roles --------------------------------------------------------------- */

void auth_role_free(struct auth_role *r)
{
	free(r->name);
	free(r->hash);
	for (size_t i = 0; i < r->member_count; i++)
		free(r->member_of[i]);
	free(r->member_of);
	memset(r, 0, sizeof(*r));
}

static char *slice_dup(struct slice s)
{
	char *d = malloc(s.len + 1);
	if (d) {
		memcpy(d, s.ptr, s.len);
		d[s.len] = '\0';
	}
	return d;
}

static bool value_bool(const struct cql_value *v)
{
	return v && v->len == 1 && v->ptr[0] != 0;
}

/* A set<text> value: [int n] then n [int len][bytes]. */
int auth_parse_text_set(const struct cql_value *v, char ***out, size_t *count)
{
	*out = NULL;
	*count = 0;
	if (!v || v->len <= 0)
		return 0;
	struct cursor c = cursor_make(v->ptr, (size_t)v->len);
	int32_t n;
	if (cql_read_int(&c, &n) != 0 || n < 0 || n > v->len)
		return -1;
	char **names = calloc((size_t)n + 1, sizeof(*names));
	if (!names)
		return -1;
	*out = names;
	for (int32_t i = 0; i < n; i++) {
		int32_t len;
		if (cql_read_int(&c, &len) != 0 || len < 0 ||
		    (size_t)len > (size_t)(c.end - c.pos))
			return -1;
		struct slice s = {c.pos, (size_t)len};
		c.pos += len;
		if (!(names[*count] = slice_dup(s)))
			return -1;
		(*count)++;
	}
	return 0;
}

static int parse_text_set(const struct cql_value *v, struct auth_role *r)
{
	return auth_parse_text_set(v, &r->member_of, &r->member_count);
}

int auth_get_role(struct cql_auth *a, const char *name, struct auth_role *r,
		  struct auth_err *e)
{
	struct arena t;
	struct auth_result res;
	memset(r, 0, sizeof(*r));
	arena_create(&t, 0);
	int rc = auth_query(a, auth_consistency_for(name), &res, e,
			    "SELECT role, can_login, is_superuser, member_of, "
			    "salted_hash FROM system_auth.roles WHERE role = "
			    "%s",
			    auth_quote(&t, name));
	arena_destroy(&t);
	if (rc != 0)
		return -1;
	const struct cql_client_rows *rows = &res.resp.rows;
	if (res.resp.kind == CQL_RESULT_ROWS && rows->row_count > 0 &&
	    rows->column_count == 5) {
		r->exists = true;
		r->login = value_bool(cql_client_rows_cell(rows, 0, 1));
		r->super = value_bool(cql_client_rows_cell(rows, 0, 2));
		const struct cql_value *h = cql_client_rows_cell(rows, 0, 4);
		r->name = strdup(name);
		if (h && h->len > 0)
			r->hash = slice_dup(cql_client_value_bytes(h));
		if (!r->name || (h && h->len > 0 && !r->hash) ||
		    parse_text_set(cql_client_rows_cell(rows, 0, 3), r) != 0) {
			auth_result_free(&res);
			auth_role_free(r);
			return auth_fail(e, CQL_ERR_SERVER,
					 "Invalid metadata has been detected "
					 "for role %s",
					 name);
		}
	}
	auth_result_free(&res);
	return 0;
}

/* ---- jobs ---------------------------------------------------------------- */

enum job_kind {
	JOB_LOGIN,
	JOB_ROLE,
	JOB_SETUP,
	JOB_PERMS,
	JOB_SCHEMA,
	JOB_ADMIN
};

struct job {
	struct work work;       /* on a worker */
	struct loopq_item done; /* then on the loop */
	struct cql_auth *a;
	enum job_kind kind;
	/* JOB_LOGIN */
	struct cql_auth_attempt *at;
	bool creds_stale; /* refresh the cached credentials afterwards */
	char stale_user[256];
	uint8_t *token;
	size_t token_len;
	char *role; /* logged in as, or NULL */
	struct auth_err err;
	/* JOB_ROLE */
	struct cql_request *req;
	struct auth_role_job rj;
	struct arena arena; /* the statement's strings */
	struct buf reply;
	/* JOB_SETUP */
	bool setup_done;
	/* JOB_PERMS: the user's roles and permissions (role: the user) */
	struct auth_perms perms;
	uint64_t generation;
	bool failed;
	/* JOB_SCHEMA: what was created or dropped; `reply` the DDL's answer,
	 * `role` the creator */
	bool created;
	char *keyspace, *table;
	/* JOB_ADMIN: `role` the user; `err` the refusal (code 0: a
	 * superuser logged in) */
	char *password;
	cql_auth_superuser_fn admin_done;
	void *admin_arg;
};

static void job_free(struct job *j)
{
	if (j->token)
		explicit_bzero(j->token, j->token_len);
	free(j->token);
	free(j->role);
	free(j->keyspace);
	free(j->table);
	if (j->password)
		explicit_bzero(j->password, strlen(j->password));
	free(j->password);
	auth_perms_free(&j->perms);
	free(j->rj.performer);
	if (j->rj.st.password)
		explicit_bzero((char *)j->rj.st.password,
			       strlen(j->rj.st.password));
	arena_destroy(&j->arena);
	buf_free(&j->reply);
	free(j);
}

static uint64_t now_ms(void);

/* The cached credentials of `user` into `r` (hash copied): 1 fresh, 2
 * usable but due for a refresh, 0 none. */
static int creds_get(struct cql_auth *a, const char *user, struct auth_role *r)
{
	if (!a->cfg.credentials_validity_ms)
		return 0;
	uint64_t now = now_ms();
	int rc = 0;
	pthread_mutex_lock(&a->cred_mu);
	for (struct cred_entry *e = a->creds; e; e = e->next) {
		if (strcmp(e->user, user) != 0)
			continue;
		uint64_t age = now - e->loaded_ms;
		if (age >= a->cfg.credentials_validity_ms)
			break;
		memset(r, 0, sizeof(*r));
		r->exists = e->exists;
		r->login = e->login;
		r->hash = e->hash ? strdup(e->hash) : NULL;
		if (e->hash && !r->hash)
			break;
		rc = age >= a->cfg.credentials_update_interval_ms ? 2 : 1;
		break;
	}
	pthread_mutex_unlock(&a->cred_mu);
	return rc;
}

static void creds_put(struct cql_auth *a, const char *user,
		      const struct auth_role *r)
{
	/* a role that does not exist is not cached (as Cassandra's loader
	 * throws for it): it may be created on another node any time */
	if (!a->cfg.credentials_validity_ms || !r->exists)
		return;
	struct cred_entry *n = calloc(1, sizeof(*n));
	if (!n || !(n->user = strdup(user)) ||
	    (r->hash && !(n->hash = strdup(r->hash)))) {
		if (n)
			cred_free(n);
		return;
	}
	n->exists = r->exists;
	n->login = r->login;
	n->loaded_ms = now_ms();
	pthread_mutex_lock(&a->cred_mu);
	for (struct cred_entry **pp = &a->creds; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->user, user) == 0) {
			struct cred_entry *old = *pp;
			*pp = old->next;
			cred_free(old);
			a->cred_count--;
			break;
		}
	/* full: the oldest goes (the list's tail: new entries go first) */
	if (a->cred_count >= a->cfg.credentials_cache_max_entries && a->creds) {
		struct cred_entry **pp = &a->creds;
		while ((*pp)->next)
			pp = &(*pp)->next;
		cred_free(*pp);
		*pp = NULL;
		a->cred_count--;
	}
	n->next = a->creds;
	a->creds = n;
	a->cred_count++;
	pthread_mutex_unlock(&a->cred_mu);
}

/* The credentials of `user`, from the cache or read (and cached); *stale
 * when a cached entry should be read again after this login. */
static int creds_load(struct cql_auth *a, const char *user, struct auth_role *r,
		      struct auth_err *e, bool *stale)
{
	int got = creds_get(a, user, r);
	*stale = got == 2;
	if (got)
		return 0;
	if (auth_get_role(a, user, r, e) != 0)
		return -1;
	creds_put(a, user, r);
	return 0;
}

static void creds_refresh(struct cql_auth *a, const char *user)
{
	struct auth_role r;
	struct auth_err e;
	if (auth_get_role(a, user, &r, &e) == 0) {
		creds_put(a, user, &r);
		auth_role_free(&r);
	}
}

static void login(struct job *j)
{
	const char *u, *p;
	size_t ulen, plen;
	if (cql_auth_sasl_plain(j->token, j->token_len, &u, &ulen, &p, &plen) !=
	    0) {
		auth_fail(&j->err, CQL_ERR_BAD_CREDENTIALS, "%s", err_msg());
		return;
	}
	char *user = strndup(u, ulen), *pass = strndup(p, plen);
	if (!user || !pass) {
		free(user);
		free(pass);
		auth_fail(&j->err, CQL_ERR_SERVER, "out of memory");
		return;
	}
	struct auth_role r;
	struct auth_err e;
	if (creds_load(j->a, user, &r, &e, &j->creds_stale) != 0) {
		auth_fail(&j->err, CQL_ERR_BAD_CREDENTIALS,
			  "Unable to perform authentication: %s", e.msg);
	} else if (!r.exists || !r.hash ||
		   !cql_auth_check_password(pass, r.hash)) {
		auth_fail(&j->err, CQL_ERR_BAD_CREDENTIALS,
			  "Provided username %s and/or password are incorrect",
			  user);
	} else if (!r.login) {
		auth_fail(&j->err, CQL_ERR_BAD_CREDENTIALS,
			  "%s is not permitted to log in", user);
	} else {
		j->role = user;
		user = NULL;
	}
	if (j->creds_stale)
		snprintf(j->stale_user, sizeof(j->stale_user), "%s",
			 j->role ? j->role : user);
	auth_role_free(&r);
	explicit_bzero(pass, plen);
	free(pass);
	free(user);
}

/* Cassandra's setupDefaultRole: when no role exists (the default one at
 * ONE then QUORUM, any at QUORUM), the default superuser, written at
 * timestamp 0 so that nodes racing to create it write the same cell
 * version, and any later ALTER or DROP of it wins over a late creation. */
static void setup_default_role(struct job *j)
{
	struct cql_auth *a = j->a;
	struct auth_result res;
	struct auth_err e;
	static const char *const probes[] = {
		"SELECT role FROM system_auth.roles WHERE role = 'cassandra'",
		"SELECT role FROM system_auth.roles WHERE role = 'cassandra'",
		"SELECT role FROM system_auth.roles LIMIT 1",
	};
	static const uint16_t cls[] = {CQL_CL_ONE, CQL_CL_QUORUM,
				       CQL_CL_QUORUM};
	for (size_t i = 0; i < 3; i++) {
		if (auth_query(a, cls[i], &res, &e, "%s", probes[i]) != 0) {
			LOG_INFO("CassandraRoleManager skipped default role "
				 "setup: some nodes were not ready (%s); "
				 "rescheduling",
				 e.msg);
			return;
		}
		bool any = res.resp.kind == CQL_RESULT_ROWS &&
			   res.resp.rows.row_count > 0;
		auth_result_free(&res);
		if (any) {
			LOG_INFO("roles exist: the default superuser is not "
				 "created");
			j->setup_done = true;
			return;
		}
	}
	char hash[128];
	if (cql_auth_hash_password(AUTH_SUPERUSER, a->cfg.bcrypt_rounds, hash,
				   sizeof(hash)) != 0) {
		LOG_ERROR("cannot hash the default superuser's password: %s",
			  err_msg());
		return;
	}
	if (auth_query(a, CQL_CL_QUORUM, &res, &e,
		       "INSERT INTO system_auth.roles (role, is_superuser, "
		       "can_login, salted_hash) VALUES ('cassandra', true, "
		       "true, '%s') USING TIMESTAMP 0",
		       hash) != 0) {
		LOG_INFO("CassandraRoleManager skipped default role setup: "
			 "some nodes were not ready (%s); rescheduling",
			 e.msg);
		return;
	}
	auth_result_free(&res);
	LOG_INFO("Created default superuser role 'cassandra'");
	LOG_WARN("The default superuser 'cassandra' has the password "
		 "'cassandra': create another superuser, log in as it, and "
		 "drop 'cassandra' (or give it a strong password and "
		 "LOGIN = false); see docs/security.md");
	j->setup_done = true;
}

/* The admin port's check: the credentials of a role that may log in and
 * is a superuser (itself or through a granted role). */
static void admin_login(struct job *j)
{
	struct auth_role r;
	struct auth_err e;
	if (auth_get_role(j->a, j->role, &r, &e) != 0) {
		auth_fail(&j->err, CQL_ERR_BAD_CREDENTIALS,
			  "Unable to perform authentication: %s", e.msg);
	} else if (!r.exists || !r.hash ||
		   !cql_auth_check_password(j->password, r.hash)) {
		auth_fail(&j->err, CQL_ERR_BAD_CREDENTIALS,
			  "Provided username %s and/or password are incorrect",
			  j->role);
	} else if (!r.login) {
		auth_fail(&j->err, CQL_ERR_BAD_CREDENTIALS,
			  "%s is not permitted to log in", j->role);
	} else {
		struct auth_perms p = {0};
		if (auth_collect_roles(j->a, j->role, &p, &e) != 0)
			auth_fail(&j->err, CQL_ERR_UNAUTHORIZED,
				  "Unable to perform authorization: %s", e.msg);
		else if (!p.super)
			auth_fail(&j->err, CQL_ERR_UNAUTHORIZED,
				  "%s is not a superuser: the admin port takes "
				  "superusers only",
				  j->role);
		auth_perms_free(&p);
	}
	auth_role_free(&r);
}

static void job_run(struct work *w)
{
	struct job *j = (struct job *)w;
	switch (j->kind) {
	case JOB_LOGIN:
		login(j);
		break;
	case JOB_ROLE:
		auth_run_role_statement(j->a, &j->rj, &j->reply);
		break;
	case JOB_SETUP:
		setup_default_role(j);
		break;
	case JOB_ADMIN:
		admin_login(j);
		break;
	case JOB_PERMS:
		if (auth_load_perms(j->a, j->role, &j->perms, &j->err) != 0)
			j->failed = true;
		break;
	case JOB_SCHEMA:
		if (auth_schema_applied(j->a, j->role, j->created, j->keyspace,
					j->table, &j->err) != 0) {
			LOG_WARN("CassandraAuthorizer failed to %s permissions "
				 "on %s%s%s: %s",
				 j->created ? "grant the creator"
					    : "revoke all",
				 j->keyspace, j->table ? "." : "",
				 j->table ? j->table : "", j->err.msg);
			j->failed = j->created;
		}
		break;
	}
	/* after the answer: j belongs to the loop once posted */
	struct cql_auth *a = j->a;
	char stale[256];
	bool refresh = j->kind == JOB_LOGIN && j->creds_stale;
	if (refresh)
		memcpy(stale, j->stale_user, sizeof(stale));
	loopq_post(a->q, &j->done);
	if (refresh)
		creds_refresh(a, stale);
}

static void setup_schedule(struct cql_auth *a);
static void perms_loaded(struct cql_auth *a, struct job *j);

static void job_done(struct loopq_item *item)
{
	struct job *j =
		(struct job *)((char *)item - offsetof(struct job, done));
	struct cql_auth *a = j->a;
	switch (j->kind) {
	case JOB_LOGIN:
		cql_auth_attempt_done(j->at, j->role, j->err.code, j->err.msg);
		break;
	case JOB_ROLE:
		if (j->reply.len == 0)
			cql_encode_error(&j->reply, j->rj.version, j->rj.stream,
					 CQL_ERR_SERVER, "out of memory");
		/* a role or permission changed here: no stale entry serves
		 * this node's next requests */
		if (j->reply.len > 4 && j->reply.data[4] == CQL_OP_RESULT &&
		    j->rj.st.op != CQL_ROLE_LIST &&
		    j->rj.st.op != CQL_ROLE_LIST_USERS &&
		    j->rj.st.op != CQL_ROLE_LIST_PERMISSIONS)
			cql_auth_invalidate(a);
		cql_request_reply(j->req, j->reply.data, j->reply.len);
		break;
	case JOB_ADMIN:
		j->admin_done(j->admin_arg, j->err.code ? j->err.msg : NULL);
		break;
	case JOB_SETUP:
		a->setup_running = false;
		if (!j->setup_done)
			setup_schedule(a);
		break;
	case JOB_PERMS:
		perms_loaded(a, j);
		break;
	case JOB_SCHEMA:
		cql_auth_invalidate(a);
		if (j->failed) {
			buf_clear(&j->reply);
			cql_encode_error(&j->reply, j->rj.version, j->rj.stream,
					 j->err.code, j->err.msg);
		}
		cql_request_reply(j->req, j->reply.data, j->reply.len);
		break;
	}
	job_free(j);
}

static struct job *job_new(struct cql_auth *a, enum job_kind kind)
{
	struct job *j = zcalloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->a = a;
	j->kind = kind;
	j->work.run = job_run;
	j->done.fn = job_done;
	arena_create(&j->arena, 0);
	buf_init(&j->reply);
	return j;
}

/* ---- the authenticator --------------------------------------------------- */

static void authenticate(void *arg, struct cql_auth_attempt *at,
			 const uint8_t *token, size_t len,
			 const struct inet_addr *client)
{
	(void)client;
	struct cql_auth *a = arg;
	struct job *j = job_new(a, JOB_LOGIN);
	if (j && len && !(j->token = malloc(len))) {
		job_free(j);
		j = NULL;
	}
	if (!j) {
		cql_auth_attempt_done(at, NULL, CQL_ERR_SERVER,
				      "out of memory");
		return;
	}
	if (len)
		memcpy(j->token, token, len);
	j->token_len = len;
	j->at = at;
	workers_submit(a->workers, &j->work);
}

void cql_auth_check_superuser(struct cql_auth *a, const char *user,
			      const char *password, cql_auth_superuser_fn done,
			      void *arg)
{
	struct job *j = job_new(a, JOB_ADMIN);
	if (j &&
	    (!(j->role = strdup(user)) || !(j->password = strdup(password)))) {
		job_free(j);
		j = NULL;
	}
	if (!j) {
		done(arg, "out of memory");
		return;
	}
	j->admin_done = done;
	j->admin_arg = arg;
	workers_submit(a->workers, &j->work);
}

const struct cql_authenticator *cql_auth_authenticator(struct cql_auth *a)
{
	return a->cfg.password_authenticator ? &a->authenticator : NULL;
}

/* ---- role statements ----------------------------------------------------- */

static const char *dup_in(struct arena *ar, const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s);
	char *d = arena_alloc(ar, n + 1);
	if (d)
		memcpy(d, s, n + 1);
	return d;
}

/* On the loop: a permission statement's table without keyspace takes the
 * USE keyspace (Cassandra's maybeCorrectResource), and a data resource's
 * existence is looked up in the schema (the worker cannot). */
static void resource_lookup(struct cql_auth *a, struct job *j,
			    const struct cql_request_info *info)
{
	struct cql_resource *r = &j->rj.st.resource;
	if (r->kind == CQL_RES_TABLE && !r->keyspace) {
		if (info->keyspace)
			r->keyspace = dup_in(&j->arena, info->keyspace);
		else
			snprintf(j->rj.resource_error,
				 sizeof(j->rj.resource_error),
				 "No keyspace has been specified. USE a "
				 "keyspace, or explicitly specify "
				 "keyspace.tablename");
	}
	if (!a->schema || !r->keyspace)
		return;
	/* the virtual keyspaces are in their own registry */
	const struct cql_schema *sc =
		cql_system_keyspace_is_view(r->keyspace) ? a->views : a->schema;
	switch (r->kind) {
	case CQL_RES_KEYSPACE:
	case CQL_RES_KEYSPACE_FUNCTIONS:
		j->rj.resource_exists =
			cql_schema_keyspace(sc, r->keyspace) != NULL;
		break;
	case CQL_RES_TABLE:
		j->rj.resource_exists =
			r->name && cql_schema_table(sc, r->keyspace, r->name);
		break;
	default: /* no user functions, no MBeans here */
		j->rj.resource_exists = false;
	}
}

void cql_auth_role_statement(void *arg, struct cql_request *req,
			     const struct cql_request_info *info,
			     const struct cql_role_stmt *r)
{
	struct cql_auth *a = arg;
	struct job *j = job_new(a, JOB_ROLE);
	if (j) {
		j->req = req;
		j->rj.st = *r;
		j->rj.st.role = dup_in(&j->arena, r->role);
		j->rj.st.grantee = dup_in(&j->arena, r->grantee);
		j->rj.st.password = dup_in(&j->arena, r->password);
		j->rj.st.resource.keyspace =
			dup_in(&j->arena, r->resource.keyspace);
		j->rj.st.resource.name = dup_in(&j->arena, r->resource.name);
		resource_lookup(a, j, info);
		j->rj.version = info->version;
		j->rj.stream = info->stream;
		j->rj.performer = info->user ? strdup(info->user) : NULL;
		if ((r->role && !j->rj.st.role) ||
		    (r->grantee && !j->rj.st.grantee) ||
		    (r->password && !j->rj.st.password) ||
		    (r->resource.keyspace && !j->rj.st.resource.keyspace) ||
		    (r->resource.name && !j->rj.st.resource.name) ||
		    (info->user && !j->rj.performer)) {
			job_free(j);
			j = NULL;
		}
	}
	if (!j) {
		struct buf b;
		buf_init(&b);
		cql_encode_error(&b, info->version, info->stream,
				 CQL_ERR_SERVER, "out of memory");
		cql_request_reply(req, b.data, b.len);
		buf_free(&b);
		return;
	}
	workers_submit(a->workers, &j->work);
}

/* ---- CassandraAuthorizer's cache ----------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static size_t bucket_of(const char *user)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)user; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h % AUTHZ_BUCKETS;
}

static struct authz_entry *entry_find(struct cql_auth *a, const char *user)
{
	for (struct authz_entry *e = a->cache[bucket_of(user)]; e; e = e->next)
		if (strcmp(e->user, user) == 0)
			return e;
	return NULL;
}

static void entry_free(struct authz_entry *e)
{
	auth_perms_free(&e->perms);
	free(e->user);
	free(e);
}

/* Drops one idle entry (not loading, nothing waiting) when the cache is
 * full. */
static void cache_evict_one(struct cql_auth *a)
{
	for (size_t b = 0; b < AUTHZ_BUCKETS; b++)
		for (struct authz_entry **pp = &a->cache[b]; *pp;
		     pp = &(*pp)->next) {
			struct authz_entry *e = *pp;
			if (e->loading || e->head)
				continue;
			*pp = e->next;
			entry_free(e);
			a->cache_count--;
			return;
		}
}

static struct authz_entry *entry_get(struct cql_auth *a, const char *user)
{
	struct authz_entry *e = entry_find(a, user);
	if (e)
		return e;
	if (a->cfg.permissions_cache_max_entries &&
	    a->cache_count >= a->cfg.permissions_cache_max_entries)
		cache_evict_one(a);
	if (!(e = zcalloc(1, sizeof(*e))) || !(e->user = strdup(user))) {
		free(e);
		return NULL;
	}
	e->tail = &e->head;
	size_t b = bucket_of(user);
	e->next = a->cache[b];
	a->cache[b] = e;
	a->cache_count++;
	return e;
}

void cql_auth_invalidate(struct cql_auth *a)
{
	creds_clear(a);
	a->generation++;
	for (size_t b = 0; b < AUTHZ_BUCKETS; b++)
		for (struct authz_entry *e = a->cache[b]; e; e = e->next) {
			e->have = false;
			auth_perms_free(&e->perms);
		}
}

static int load_start(struct cql_auth *a, struct authz_entry *e)
{
	struct job *j = job_new(a, JOB_PERMS);
	if (!j || !(j->role = strdup(e->user))) {
		if (j)
			job_free(j);
		return -1;
	}
	j->generation = a->generation;
	e->loading = true;
	workers_submit(a->workers, &j->work);
	return 0;
}

static void pending_fail(struct authz_pending *p, uint32_t code,
			 const char *msg)
{
	struct buf b;
	buf_init(&b);
	cql_encode_error(&b, p->info.version, p->info.stream, code, msg);
	cql_request_reply(p->req, b.data, b.len);
	buf_free(&b);
}

static void pending_free(struct authz_pending *p)
{
	free(p->keyspace);
	free(p->user);
	free(p);
}

static void perms_loaded(struct cql_auth *a, struct job *j)
{
	struct authz_entry *e = entry_find(a, j->role);
	if (!e)
		return; /* cannot happen: a loading entry is never evicted */
	e->loading = false;
	bool stopping = __atomic_load_n(&a->stopping, __ATOMIC_ACQUIRE);
	if (!j->failed && j->generation != a->generation && !stopping) {
		/* invalidated while it was read: read again */
		if (load_start(a, e) == 0)
			return;
		j->failed = true;
		auth_fail(&j->err, CQL_ERR_SERVER, "out of memory");
	}
	if (!j->failed) {
		auth_perms_free(&e->perms);
		e->perms = j->perms;
		memset(&j->perms, 0, sizeof(j->perms));
		e->have = true;
		e->loaded_ms = now_ms();
	}
	struct authz_pending *p = e->head;
	e->head = NULL;
	e->tail = &e->head;
	char msg[600];
	snprintf(msg, sizeof(msg),
		 "Unable to perform authorization of permissions: %s",
		 j->err.msg);
	while (p) {
		struct authz_pending *next = p->next;
		if (stopping)
			pending_fail(p, CQL_ERR_SERVER, "the node is stopping");
		else if (j->failed)
			pending_fail(p, CQL_ERR_UNAUTHORIZED, msg);
		else
			cql_exec_execute(a->exec, p->req, &p->info, p->body,
					 p->len);
		pending_free(p);
		p = next;
	}
}

void cql_auth_execute(void *arg, struct cql_request *req,
		      const struct cql_request_info *info, const uint8_t *body,
		      size_t len)
{
	struct cql_auth *a = arg;
	if (!a->cfg.cassandra_authorizer || info->internal || !info->user) {
		cql_exec_execute(a->exec, req, info, body, len);
		return;
	}
	struct authz_entry *e = entry_get(a, info->user);
	uint64_t now = now_ms();
	if (e && e->have && now - e->loaded_ms < a->validity_ms) {
		/* refreshed in the background past the update interval */
		if (now - e->loaded_ms >= a->update_ms && !e->loading)
			load_start(a, e);
		cql_exec_execute(a->exec, req, info, body, len);
		return;
	}
	struct authz_pending *p = e ? zcalloc(1, sizeof(*p)) : NULL;
	if (p) {
		p->req = req;
		p->info = *info;
		p->body = body;
		p->len = len;
		p->user = strdup(info->user);
		p->keyspace = info->keyspace ? strdup(info->keyspace) : NULL;
		p->info.user = p->user;
		p->info.keyspace = p->keyspace;
	}
	if (!p || !p->user || (info->keyspace && !p->keyspace) ||
	    (!e->loading && load_start(a, e) != 0)) {
		struct buf b;
		buf_init(&b);
		cql_encode_error(&b, info->version, info->stream,
				 CQL_ERR_SERVER, "out of memory");
		cql_request_reply(req, b.data, b.len);
		buf_free(&b);
		if (p)
			pending_free(p);
		return;
	}
	*e->tail = p;
	e->tail = &p->next;
}

/* Cassandra's READABLE_SYSTEM_RESOURCES: what drivers and cqlsh read. */
static bool readable_system_table(const struct cql_resource *r)
{
	if (r->kind != CQL_RES_TABLE || !r->keyspace)
		return false;
	if (strcmp(r->keyspace, "system_schema") == 0 ||
	    strcmp(r->keyspace, "system_virtual_schema") == 0)
		return true;
	return strcmp(r->keyspace, "system") == 0 && r->name &&
	       (strcmp(r->name, "local") == 0 ||
		strcmp(r->name, "peers") == 0 ||
		strcmp(r->name, "peers_v2") == 0);
}

int cql_auth_authorize(void *arg, const struct cql_request_info *info,
		       uint32_t perm, const struct cql_resource *r, char *msg,
		       size_t cap)
{
	struct cql_auth *a = arg;
	if (!a->cfg.cassandra_authorizer || info->internal)
		return 0;
	if (!info->user) {
		snprintf(msg, cap, "You have not logged in");
		return -1;
	}
	if (perm == CQL_PERM_SELECT && readable_system_table(r))
		return 0;
	struct authz_entry *e = entry_find(a, info->user);
	if (!e || !e->have) {
		/* cql_auth_execute loaded it just before: only a request
		 * that bypassed it gets here */
		snprintf(msg, cap,
			 "Unable to perform authorization of permissions: "
			 "the permissions of %s are not loaded",
			 info->user);
		return -1;
	}
	struct auth_err err;
	if (auth_perms_check(&e->perms, info->user, perm, r, &err) == 0)
		return 0;
	snprintf(msg, cap, "%s", err.msg);
	return -1;
}

bool cql_auth_schema_applied(void *arg, struct cql_request *req,
			     const struct cql_request_info *info,
			     const struct cql_schema_change *c,
			     const uint8_t *frame, size_t len)
{
	struct cql_auth *a = arg;
	if (!a->cfg.cassandra_authorizer)
		return false;
	bool created = strcmp(c->change, "CREATED") == 0;
	if (!created && strcmp(c->change, "DROPPED") != 0)
		return false;
	/* nobody to give a created resource to */
	if (created && (info->internal || !info->user))
		return false;
	struct job *j = job_new(a, JOB_SCHEMA);
	if (!j)
		return false;
	j->created = created;
	j->req = req;
	j->rj.version = info->version;
	j->rj.stream = info->stream;
	j->keyspace = strdup(c->keyspace);
	j->table = c->name[0] ? strdup(c->name) : NULL;
	j->role = created ? strdup(info->user) : NULL;
	if (!j->keyspace || (c->name[0] && !j->table) ||
	    (created && !j->role) || buf_append(&j->reply, frame, len) != 0) {
		job_free(j);
		return false;
	}
	workers_submit(a->workers, &j->work);
	return true;
}

/* ---- the default superuser ----------------------------------------------- */

static void setup_on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cql_auth *a = arg;
	if (a->setup_running || !a->exec)
		return;
	struct job *j = job_new(a, JOB_SETUP);
	if (!j) {
		setup_schedule(a);
		return;
	}
	a->setup_running = true;
	workers_submit(a->workers, &j->work);
}

static void setup_schedule(struct cql_auth *a)
{
	if (__atomic_load_n(&a->stopping, __ATOMIC_ACQUIRE))
		return;
	uint64_t ms = a->cfg.superuser_setup_delay_ms;
	struct timeval tv = {.tv_sec = (time_t)(ms / 1000),
			     .tv_usec = (suseconds_t)(ms % 1000) * 1000};
	evtimer_add(a->setup_timer, &tv);
}

void cql_auth_start(struct cql_auth *a)
{
	if (a->cfg.password_authenticator)
		setup_schedule(a);
}

/* ---- lifecycle ----------------------------------------------------------- */

struct cql_auth *cql_auth_new(struct event_base *base, struct loopq *q,
			      const struct cql_auth_config *c)
{
	struct cql_auth *a = zcalloc(1, sizeof(*a));
	if (!a) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	a->base = base;
	a->q = q;
	a->cfg = *c;
	if (a->cfg.query_timeout_ms == 0)
		a->cfg.query_timeout_ms = 20000;
	/* one entry holds roles and permissions: the stricter bounds */
	a->validity_ms = c->permissions_validity_ms < c->roles_validity_ms
				 ? c->permissions_validity_ms
				 : c->roles_validity_ms;
	a->update_ms =
		c->permissions_update_interval_ms < c->roles_update_interval_ms
			? c->permissions_update_interval_ms
			: c->roles_update_interval_ms;
	if (a->update_ms > a->validity_ms)
		a->update_ms = a->validity_ms;
	pthread_mutex_init(&a->cred_mu, NULL);
	if (a->cfg.credentials_update_interval_ms >
	    a->cfg.credentials_validity_ms)
		a->cfg.credentials_update_interval_ms =
			a->cfg.credentials_validity_ms;
	if (!a->cfg.credentials_cache_max_entries)
		a->cfg.credentials_cache_max_entries = 1000;
	a->authenticator = (struct cql_authenticator){
		.class_name = AUTHENTICATOR_CLASS,
		.authenticate = authenticate,
		.arg = a,
	};
	if (!(a->views = cql_schema_new_views()) ||
	    !(a->setup_timer = evtimer_new(base, setup_on_timer, a)) ||
	    !(a->workers = workers_new(2, "auth"))) {
		err_set(ERR_NOMEM, "cannot start the auth workers");
		cql_auth_delete(a);
		return NULL;
	}
	return a;
}

void cql_auth_set_schema(struct cql_auth *a, const struct cql_schema *s)
{
	a->schema = s;
}

void cql_auth_set_exec(struct cql_auth *a, struct cql_exec *exec)
{
	a->exec = exec;
}

void cql_auth_delete(struct cql_auth *a)
{
	if (!a)
		return;
	__atomic_store_n(&a->stopping, 1, __ATOMIC_RELEASE);
	if (a->setup_timer)
		event_free(a->setup_timer);
	/* queued jobs still run: their statements fail at once */
	workers_delete(a->workers);
	/* their completions (and statements posted meanwhile) */
	loopq_run_pending(a->q);
	for (size_t b = 0; b < AUTHZ_BUCKETS; b++)
		while (a->cache[b]) {
			struct authz_entry *e = a->cache[b];
			a->cache[b] = e->next;
			for (struct authz_pending *p = e->head, *n; p; p = n) {
				n = p->next;
				pending_fail(p, CQL_ERR_SERVER,
					     "the node is stopping");
				pending_free(p);
			}
			entry_free(e);
		}
	if (a->views)
		cql_schema_delete(a->views);
	creds_clear(a);
	pthread_mutex_destroy(&a->cred_mu);
	free(a);
}
