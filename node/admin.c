/* The admin endpoint's server side (see admin.h). */
#define LOG_MODULE "admin"
#include "node/admin.h"

#include "common/err.h"
#include "common/log.h"
#include "node/messaging_msg.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define MAX_COMMANDS   64
#define MAX_CONNS      64
#define IDLE_TIMEOUT_S 30

struct command {
	const char *name;
	const char *usage;
	admin_command_fn fn;
	void *arg;
};

struct admin_reply {
	struct admin_conn *c; /* NULL once the connection is gone */
};

struct admin_auth_ticket {
	struct admin_conn *c; /* NULL once the connection is gone */
	struct admin_request req;
};

struct admin_conn {
	struct admin *a;
	struct admin_auth_ticket *ticket; /* a login being checked */
	struct admin_reply *reply;        /* a deferred answer, or NULL */
	struct bufferevent *bev;
	struct inet_addr peer;
	bool done;
	struct admin_conn *next;
};

struct admin {
	struct event_base *base;
	struct inet_addr addr;
	struct evconnlistener *listener;
	struct ssl_ctx_st *tls; /* jmx_encryption_options, or NULL (borrowed) */
	struct command commands[MAX_COMMANDS];
	size_t command_count;
	struct admin_conn *conns;
	struct admin_conn *current; /* whose command runs now */
	admin_auth_fn auth;
	void *auth_arg;
	size_t conn_count;
};

int admin_usage_error(struct buf *err, const char *synopsis)
{
	admin_printf(err, "usage: %s\n", synopsis);
	return 1;
}

int admin_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return err_set(ERR_INVALID, "bad format");
	if (buf_reserve(b, (size_t)n + 1) != 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

static void conn_free(struct admin_conn *c)
{
	struct admin *a = c->a;
	for (struct admin_conn **pp = &a->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	a->conn_count--;
	if (c->reply)
		c->reply->c = NULL;
	if (c->ticket)
		c->ticket->c = NULL;
	bufferevent_free(c->bev);
	free(c);
}

static void conn_flushed(struct bufferevent *bev, void *arg)
{
	(void)bev;
	conn_free(arg);
}

static void conn_drop(struct admin_conn *c, const char *why)
{
	char p[INET_ADDR_STRLEN];
	LOG_WARN("closing admin connection from %s: %s",
		 inet_addr_format(&c->peer, p, sizeof(p)), why);
	conn_free(c);
}

static const struct command *find_command(struct admin *a, const char *name)
{
	for (size_t i = 0; i < a->command_count; i++)
		if (strcmp(a->commands[i].name, name) == 0)
			return &a->commands[i];
	return NULL;
}

static int run_help(struct admin *a, struct buf *out)
{
	admin_printf(out, "usage: cassini-tool [-h HOST] [-p PORT] COMMAND "
			  "[ARGS...]\n\nCommands:\n");
	for (size_t i = 0; i < a->command_count; i++)
		admin_printf(out, "  %s\n", a->commands[i].usage);
	return 0;
}

/* Writes one framed response (final or progress). */
static void write_frame(struct admin_conn *c, int status, const char *out,
			const char *err, bool more)
{
	struct buf frame = {0};
	int rc = buf_put_be32(&frame, 0);
	if (!rc)
		rc = more ? admin_progress_encode(out, &frame)
			  : admin_response_encode(status, out, err, &frame);
	if (!rc) {
		be32_store(frame.data, (uint32_t)(frame.len - 4));
		bufferevent_write(c->bev, frame.data, frame.len);
	}
	buf_free(&frame);
}

/* The final answer; the connection closes once it is flushed. */
static void conn_answer(struct admin_conn *c, int status, const char *out,
			const char *err)
{
	write_frame(c, status, out, err, false);
	c->done = true;
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_setcb(c->bev, NULL, conn_flushed, NULL, c);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_free(c);
}

static void respond(struct admin_conn *c, const struct admin_request *req)
{
	struct admin *a = c->a;
	struct buf out = {0}, err = {0};
	int status;
	const struct command *cmd = find_command(a, req->command);
	if (strcmp(req->command, "help") == 0) {
		status = run_help(a, &out);
	} else if (!cmd) {
		admin_printf(&err,
			     "unknown command '%s' (try `cassini-tool "
			     "help`)\n",
			     req->command);
		status = 1;
	} else {
		a->current = c;
		status = cmd->fn(cmd->arg, req->argc,
				 (const char *const *)req->argv, &out, &err);
		a->current = NULL;
	}
	buf_put_u8(&out, 0);
	buf_put_u8(&err, 0);
	const char *o = out.data ? (const char *)out.data : "";
	const char *e = err.data ? (const char *)err.data : "";
	if (status == ADMIN_PENDING && c->reply) {
		/* answered later; what was printed so far goes out now, in a
		 * progress frame even when empty: it tells the tool that the
		 * command runs and may take long (a major compaction, a
		 * repair), so it waits for the answer for as long as that
		 * takes, as nodetool does */
		c->done = true;
		bufferevent_set_timeouts(c->bev, NULL, NULL);
		write_frame(c, 0, o, "", true);
	} else {
		if (status == ADMIN_PENDING) /* deferred without a handle */
			status = 1;
		if (c->reply) { /* a handle taken but an answer given */
			c->reply->c = NULL;
			c->reply = NULL;
		}
		conn_answer(c, status, o, e);
	}
	buf_free(&out);
	buf_free(&err);
}

struct admin_reply *admin_defer(struct admin *a)
{
	struct admin_conn *c = a->current;
	if (!c || c->reply) {
		err_set(ERR_INVALID, "admin_defer outside a command");
		return NULL;
	}
	struct admin_reply *r = calloc(1, sizeof(*r));
	if (!r) {
		err_set(ERR_NOMEM, "admin reply");
		return NULL;
	}
	r->c = c;
	c->reply = r;
	return r;
}

void admin_reply_progress(struct admin_reply *r, const char *text)
{
	if (r->c)
		write_frame(r->c, 0, text, "", true);
}

void admin_reply_finish(struct admin_reply *r, int status, const char *out,
			const char *err)
{
	struct admin_conn *c = r->c;
	free(r);
	if (!c)
		return;
	c->reply = NULL;
	conn_answer(c, status, out ? out : "", err ? err : "");
}

static void conn_read(struct bufferevent *bev, void *arg)
{
	struct admin_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char why[128];
	if (c->done)
		return;
	size_t avail = evbuffer_get_length(in);
	if (avail < 4)
		return;
	uint8_t hdr[4];
	evbuffer_copyout(in, hdr, 4);
	uint32_t len = be32_load(hdr);
	if (len == 0 || len > ADMIN_REQUEST_MAX) {
		snprintf(why, sizeof(why), "request of %u bytes (limit %u)",
			 len, ADMIN_REQUEST_MAX);
		conn_drop(c, why);
		return;
	}
	if (avail < 4 + (size_t)len)
		return;
	const uint8_t *p = evbuffer_pullup(in, 4 + (ssize_t)len);
	struct admin_request req;
	if (!p || admin_request_decode(p + 4, len, &req) != 0) {
		snprintf(why, sizeof(why), "%s", p ? err_msg() : "no memory");
		conn_drop(c, why);
		return;
	}
	evbuffer_drain(in, 4 + (size_t)len);
	if (c->a->auth) {
		struct admin_auth_ticket *t = calloc(1, sizeof(*t));
		if (!t) {
			admin_request_free(&req);
			conn_drop(c, "no memory");
			return;
		}
		t->c = c;
		t->req = req;
		c->ticket = t;
		c->done = true; /* one request per connection */
		c->a->auth(c->a->auth_arg, req.username, req.password, t);
		return;
	}
	respond(c, &req);
	admin_request_free(&req);
}

static void conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct admin_conn *c = arg;
	if (what == BEV_EVENT_CONNECTED)
		return; /* a TLS handshake completed */
	if (what & BEV_EVENT_TIMEOUT) {
		conn_drop(c, "idle");
		return;
	}
	if (c->a->tls && (what & BEV_EVENT_ERROR)) {
		char s[INET_ADDR_STRLEN];
		unsigned long e = bufferevent_get_openssl_error(bev);
		char why[256] = "connection error";
		if (e)
			ERR_error_string_n(e, why, sizeof(why));
		LOG_WARN("TLS error with admin client %s: %s",
			 inet_addr_format(&c->peer, s, sizeof(s)), why);
	}
	conn_free(c);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	(void)l;
	struct admin *a = arg;
	if (a->conn_count >= MAX_CONNS) {
		evutil_closesocket(fd);
		return;
	}
	struct admin_conn *c = calloc(1, sizeof(*c));
	struct bufferevent *bev = NULL;
	if (c && a->tls) {
		/* the handshake runs on the loop like any read, bounded by the
		 * idle timeout */
		SSL *ssl = SSL_new(a->tls);
		if (ssl)
			bev = bufferevent_openssl_socket_new(
				a->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
				BEV_OPT_CLOSE_ON_FREE);
		if (!bev)
			SSL_free(ssl);
		else
			bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	} else if (c) {
		bev = bufferevent_socket_new(a->base, fd,
					     BEV_OPT_CLOSE_ON_FREE);
	}
	if (!bev) {
		free(c);
		evutil_closesocket(fd);
		return;
	}
	c->a = a;
	c->bev = bev;
	inet_addr_from_sockaddr(sa, (size_t)salen, &c->peer);
	c->next = a->conns;
	a->conns = c;
	a->conn_count++;
	struct timeval idle = {IDLE_TIMEOUT_S, 0};
	bufferevent_set_timeouts(bev, &idle, &idle);
	bufferevent_setcb(bev, conn_read, NULL, conn_event, c);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

void admin_set_auth(struct admin *a, admin_auth_fn fn, void *arg)
{
	a->auth = fn;
	a->auth_arg = arg;
}

void admin_auth_done(struct admin_auth_ticket *t, const char *refusal)
{
	struct admin_conn *c = t->c;
	if (c) {
		c->ticket = NULL;
		if (refusal) {
			char p[INET_ADDR_STRLEN];
			LOG_WARN("admin command '%s' from %s refused: %s",
				 t->req.command,
				 inet_addr_format(&c->peer, p, sizeof(p)),
				 refusal);
			struct buf e = {0};
			admin_printf(&e, "%s\n", refusal);
			conn_answer(c, 1, "",
				    e.data ? (const char *)e.data : "");
			buf_free(&e);
		} else {
			respond(c, &t->req);
		}
	}
	admin_request_free(&t->req);
	free(t);
}

struct admin *admin_new(struct event_base *base, const struct inet_addr *addr)
{
	struct admin *a = calloc(1, sizeof(*a));
	if (!a) {
		err_set(ERR_NOMEM, "admin");
		return NULL;
	}
	a->base = base;
	a->addr = *addr;
	return a;
}

void admin_set_tls(struct admin *a, struct ssl_ctx_st *ctx)
{
	a->tls = ctx;
}

int admin_listen(struct admin *a)
{
	char s[INET_ADDR_STRLEN];
	struct sockaddr_storage ss;
	size_t sl = inet_addr_to_sockaddr(&a->addr, &ss);
	a->listener = evconnlistener_new_bind(
		a->base, accept_cb, a,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
			LEV_OPT_CLOSE_ON_EXEC,
		16, (struct sockaddr *)&ss, (int)sl);
	inet_addr_format(&a->addr, s, sizeof(s));
	if (!a->listener)
		return err_set_errno(errno, "cannot listen on %s (admin_port)",
				     s);
	LOG_INFO("admin endpoint listening on %s%s", s,
		 a->tls ? " (TLS, jmx_encryption_options)" : "");
	return 0;
}

int admin_register(struct admin *a, const char *name, const char *usage,
		   admin_command_fn fn, void *arg)
{
	if (a->command_count == MAX_COMMANDS || find_command(a, name))
		return err_set(ERR_EXISTS, "admin command '%s'", name);
	a->commands[a->command_count++] =
		(struct command){name, usage, fn, arg};
	return 0;
}

void admin_delete(struct admin *a)
{
	if (!a)
		return;
	if (a->listener)
		evconnlistener_free(a->listener);
	while (a->conns)
		conn_free(a->conns);
	free(a);
}
