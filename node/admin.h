/*
 * The admin endpoint (admin_port, 7199; nodetool's JMX role): one request
 * frame in, one response frame out (admin.proto), on the admin address only
 * (the listen address by default, never a wildcard unless configured).
 *
 * Commands are registered by name, so later modules add theirs
 * (admin_register(a, "tpstats", ...)). A command writes what the tool
 * prints to `out` (stdout) and `err` (stderr) and returns the tool's exit
 * status. Handlers run on the loop and must not block.
 *
 * A command that takes long (repair) answers later: it takes a handle with
 * admin_defer() during its call, returns ADMIN_PENDING, may send progress
 * frames (the tool prints them as they arrive), and ends with
 * admin_reply_finish(). The connection's idle timeout is off meanwhile.
 *
 * Garbage (a bad length, bytes that are not a request) is logged and the
 * connection closed; the endpoint keeps serving.
 */
#ifndef CASSINI_NODE_ADMIN_H
#define CASSINI_NODE_ADMIN_H

#include "common/buf.h"
#include "common/inet.h"

#include <limits.h>
#include <stddef.h>

struct event_base;
struct admin;

typedef int (*admin_command_fn)(void *arg, size_t argc, const char *const *argv,
				struct buf *out, struct buf *err);

struct admin *admin_new(struct event_base *base, const struct inet_addr *addr);
void admin_delete(struct admin *a);
int admin_listen(struct admin *a);
/* TLS (jmx_encryption_options): every connection accepted from now on
 * speaks TLS with `ctx` (borrowed: it outlives the endpoint; NULL: plain). */
struct ssl_ctx_st;
void admin_set_tls(struct admin *a, struct ssl_ctx_st *ctx);

/* `name` and `usage` are borrowed (string literals). */
int admin_register(struct admin *a, const char *name, const char *usage,
		   admin_command_fn fn, void *arg);

/* A command's status: the answer comes later, through admin_defer's
 * handle. */
#define ADMIN_PENDING INT_MIN

struct admin_reply;

/* Only during a command's call: a handle to answer it later (the command
 * then returns ADMIN_PENDING). The handle lives until admin_reply_finish,
 * also when the client goes away or the endpoint is deleted (then nothing
 * is sent). NULL with ERR_NOMEM, or ERR_INVALID outside a command. */
struct admin_reply *admin_defer(struct admin *a);
/* A progress frame with `text` (copied); nothing if the client left. */
void admin_reply_progress(struct admin_reply *r, const char *text);
/* The answer (the tool's stdout, stderr and exit status; copied); frees
 * the handle. */
void admin_reply_finish(struct admin_reply *r, int status, const char *out,
			const char *err);

/* Authentication (docs/security.md): once set, every request goes to
 * `fn` first with its credentials (NULL when it sent none), and runs
 * only when fn's check answers admin_auth_done(t, NULL); a refusal is
 * the tool's stderr with exit status 1. `t` lives until admin_auth_done
 * (also when the client goes away: then nothing is sent). */
struct admin_auth_ticket;
typedef void (*admin_auth_fn)(void *arg, const char *username,
			      const char *password,
			      struct admin_auth_ticket *t);
void admin_set_auth(struct admin *a, admin_auth_fn fn, void *arg);
void admin_auth_done(struct admin_auth_ticket *t, const char *refusal);

/* printf into a buf; returns 0 or -1 (ERR_NOMEM). */
/* A command's wrong arguments: "usage: SYNOPSIS" on err; returns 1 (the
 * exit status). */
int admin_usage_error(struct buf *err, const char *synopsis);
int admin_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
