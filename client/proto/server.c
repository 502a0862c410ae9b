/*
 * CQL server connections on plain libevent events and flat buffers.
 *
 * Per connection: frames are cut from the input buffer only once the
 * header has been validated (version, direction, size against
 * max_frame_size) and the whole body is present, so a hostile length never
 * allocates. Before STARTUP only OPTIONS and STARTUP are accepted. Framing
 * errors are answered with a Protocol_error and the connection is closed
 * once the answer is flushed, which is also what drivers do with a
 * connection that produced one.
 *
 * Flow control: when a connection has max_requests_per_connection requests
 * in flight, or its output buffer is over OUTPUT_HIGH_WATER, the server
 * stops reading from it until replies drain. Across connections, bytes held
 * by requests in flight are capped; past the cap requests get Overloaded.
 *
 * I/O costs two system calls per request in the steady state: one recv
 * when the socket is readable, and one send per connection per loop
 * turn for every reply queued in that turn (a flush event that runs once
 * the turn's ready callbacks have). EV_WRITE is only watched while the
 * kernel is behind. (A bufferevent adds an ioctl(FIONREAD) per read and
 * two epoll_ctl per reply, for its write event.)
 *
 * Memory: a read goes into one server-wide buffer when the connection has
 * nothing left over, and its whole frames are cut from there; only a
 * partial frame (or frames held back by flow control) is copied into the
 * connection's own input buffer. Replies are appended to the connection's
 * output buffer, which keeps its memory between turns up to BUF_KEEP (a
 * point read's or write's reply; larger ones are freed once sent, so ten
 * thousand idle connections hold at most 40 MiB). A steady stream of small
 * requests allocates nothing for I/O.
 *
 * This file is the protocol half; the I/O half is server_conn.c
 * (server_internal.h).
 */
#define LOG_MODULE "client"
#include "client/proto/server_internal.h"

#include "common/err.h"
#include "common/log.h"
#include "common/zalloc.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* ---- messages ------------------------------------------------------------ */

static int handle_startup(struct cql_conn *c, const struct cql_header *h,
			  struct cursor *body)
{
	struct arena a;
	struct cql_pair *opts;
	uint16_t n;
	bool lz4 = false, has_version = false;
	struct slice driver_name = {0}, driver_version = {0};
	arena_create(&a, 4096);
	if (c->ready) {
		arena_destroy(&a);
		cql_srv_conn_fail(
			c, h->version, h->stream,
			"Unexpected message STARTUP, the connection is "
			"already initialized");
		return -1;
	}
	if (cql_decode_startup(body, &a, &opts, &n) != 0) {
		arena_destroy(&a);
		cql_srv_conn_fail(c, h->version, h->stream, err_msg());
		return -1;
	}
	char msg[160];
	msg[0] = '\0';
	for (uint16_t i = 0; i < n; i++) {
		struct slice k = opts[i].key, v = opts[i].value;
		if (slice_eq(k, slice_from_cstr("CQL_VERSION"))) {
			has_version = true;
			if (v.len < 2 || v.ptr[0] != '3' || v.ptr[1] != '.')
				snprintf(msg, sizeof(msg),
					 "Invalid or unsupported CQL version "
					 "'%.*s'; supported: %s",
					 (int)(v.len > 32 ? 32 : v.len),
					 (const char *)v.ptr,
					 c->srv->cql_version);
		} else if (slice_eq(k, slice_from_cstr("DRIVER_NAME"))) {
			driver_name = v;
		} else if (slice_eq(k, slice_from_cstr("DRIVER_VERSION"))) {
			driver_version = v;
		} else if (slice_eq(k, slice_from_cstr("COMPRESSION"))) {
			if (v.len == 3 &&
			    strncasecmp((const char *)v.ptr, "lz4", 3) == 0)
				lz4 = true;
			else
				snprintf(msg, sizeof(msg),
					 "Unknown compression algorithm: %.*s",
					 (int)(v.len > 32 ? 32 : v.len),
					 (const char *)v.ptr);
		}
	}
	if (!msg[0]) {
		free(c->driver_name);
		free(c->driver_version);
		c->driver_name =
			driver_name.ptr ? strndup((const char *)driver_name.ptr,
						  driver_name.len)
					: NULL;
		c->driver_version =
			driver_version.ptr
				? strndup((const char *)driver_version.ptr,
					  driver_version.len)
				: NULL;
	}
	arena_destroy(&a);
	if (!has_version && !msg[0])
		snprintf(msg, sizeof(msg),
			 "Missing value CQL_VERSION in STARTUP message");
	if (msg[0]) {
		cql_srv_conn_fail(c, h->version, h->stream, msg);
		return -1;
	}
	struct buf b;
	buf_init(&b);
	if (c->srv->has_auth) {
		/* AUTHENTICATE names the authenticator; the driver answers
		 * with AUTH_RESPONSE. Like READY, never compressed. */
		long start = cql_frame_begin(&b, h->version, 0, h->stream,
					     CQL_OP_AUTHENTICATE);
		if (start >= 0 &&
		    cql_write_cstring(&b, c->srv->auth.class_name) == 0) {
			cql_frame_end(&b, start);
			cql_srv_conn_write(c, b.data, b.len);
		}
	} else if (cql_encode_ready(&b, h->version, h->stream) == 0) {
		cql_srv_conn_write(c, b.data, b.len); /* never compressed */
	}
	buf_free(&b);
	c->version = h->version;
	c->ready = true;
	c->authenticated = !c->srv->has_auth;
	c->lz4 = lz4;
	/* v5: everything after this answer is in segments, both ways */
	c->segments = h->version >= 5;
	cql_srv_conn_arm_timer(c);
	return 0;
}

/* ---- authentication ------------------------------------------------------ */

struct cql_auth_attempt {
	struct cql_conn *conn; /* a reference */
	uint8_t version;
	int16_t stream;
	struct event *delay; /* a refusal waits for it */
	uint32_t code;
	char msg[256];
};

static void attempt_free(struct cql_auth_attempt *at)
{
	if (at->delay)
		event_free(at->delay);
	at->conn->auth_pending = false;
	cql_srv_conn_unref(at->conn);
	free(at);
}

static void attempt_refuse(struct cql_auth_attempt *at)
{
	struct cql_conn *c = at->conn;
	if (!c->closed) {
		struct buf b;
		buf_init(&b);
		if (cql_encode_error(&b, at->version, at->stream, at->code,
				     at->msg) == 0)
			cql_srv_conn_send_frame(c, b.data, b.len);
		buf_free(&b);
	}
	attempt_free(at);
}

static void attempt_on_delay(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	attempt_refuse(arg);
}

void cql_auth_attempt_done(struct cql_auth_attempt *at, const char *role,
			   uint32_t code, const char *msg)
{
	struct cql_conn *c = at->conn;
	if (c->closed) {
		attempt_free(at);
		return;
	}
	if (role) {
		char *user = strdup(role);
		if (!user) {
			cql_srv_conn_close(c, "out of memory");
			attempt_free(at);
			return;
		}
		free(c->user);
		c->user = user;
		c->authenticated = true;
		struct buf b;
		buf_init(&b);
		long start = cql_frame_begin(&b, at->version, 0, at->stream,
					     CQL_OP_AUTH_SUCCESS);
		if (start >= 0 && cql_write_bytes(&b, NULL, -1) == 0) {
			cql_frame_end(&b, start);
			cql_srv_conn_send_frame(c, b.data, b.len);
		}
		buf_free(&b);
		cql_srv_conn_arm_timer(c); /* the idle timer from now on */
		attempt_free(at);
		return;
	}
	at->code = code;
	snprintf(at->msg, sizeof(at->msg), "%s", msg ? msg : "");
	uint64_t ms = c->srv->cfg.auth_failure_delay_ms;
	if (ms) {
		at->delay = evtimer_new(c->srv->base, attempt_on_delay, at);
		if (at->delay) {
			struct timeval tv = {
				.tv_sec = (time_t)(ms / 1000),
				.tv_usec = (suseconds_t)(ms % 1000) * 1000};
			evtimer_add(at->delay, &tv);
			return;
		}
	}
	attempt_refuse(at);
}

static void handle_auth_response(struct cql_conn *c, const struct cql_header *h,
				 struct cursor *body)
{
	struct cql_value token;
	if (cql_decode_auth_response(body, &token) != 0) {
		cql_srv_conn_fail(c, h->version, h->stream, err_msg());
		return;
	}
	struct cql_auth_attempt *at = zcalloc(1, sizeof(*at));
	if (!at) {
		cql_srv_conn_close(c, "out of memory");
		return;
	}
	at->conn = c;
	at->version = h->version;
	at->stream = h->stream;
	c->refs++;
	c->auth_pending = true;
	c->srv->auth.authenticate(c->srv->auth.arg, at, token.ptr,
				  token.len > 0 ? (size_t)token.len : 0,
				  &c->peer);
}

static int handle_register(struct cql_conn *c, const struct cql_header *h,
			   struct cursor *body)
{
	static const struct {
		const char *name;
		unsigned bit;
	} kinds[] = {{"TOPOLOGY_CHANGE", EVENT_TOPOLOGY},
		     {"STATUS_CHANGE", EVENT_STATUS},
		     {"SCHEMA_CHANGE", EVENT_SCHEMA}};
	struct arena a;
	struct slice *types;
	uint16_t n;
	unsigned mask = 0;
	arena_create(&a, 1024);
	if (cql_decode_register(body, &a, &types, &n) != 0) {
		arena_destroy(&a);
		cql_srv_conn_fail(c, h->version, h->stream, err_msg());
		return -1;
	}
	for (uint16_t i = 0; i < n; i++) {
		unsigned bit = 0;
		for (size_t k = 0; k < 3; k++)
			if (slice_eq(types[i], slice_from_cstr(kinds[k].name)))
				bit = kinds[k].bit;
		if (!bit) {
			char msg[96];
			snprintf(msg, sizeof(msg),
				 "Invalid value '%.*s' for Type",
				 (int)(types[i].len > 40 ? 40 : types[i].len),
				 (const char *)types[i].ptr);
			arena_destroy(&a);
			cql_srv_conn_fail(c, h->version, h->stream, msg);
			return -1;
		}
		mask |= bit;
	}
	arena_destroy(&a);
	c->events |= mask;
	struct buf b;
	buf_init(&b);
	if (cql_encode_ready(&b, h->version, h->stream) == 0)
		cql_srv_conn_send_frame(c, b.data, b.len);
	buf_free(&b);
	return 0;
}

/* A statement: account for it, then hand it to the executor. Takes
 * ownership of `frame_body`. */
static void handle_statement(struct cql_conn *c, const struct cql_header *h,
			     uint8_t *frame_body, size_t len, size_t offset)
{
	struct cql_server *s = c->srv;
	if (s->stats.inflight_bytes + len > s->cfg.max_inflight_bytes) {
		struct buf b;
		buf_init(&b);
		s->stats.overloaded++;
		if (cql_encode_error(&b, h->version, h->stream,
				     CQL_ERR_OVERLOADED,
				     "Too many requests in flight on this "
				     "node") == 0)
			cql_srv_conn_send_frame(c, b.data, b.len);
		buf_free(&b);
		free(frame_body);
		return;
	}
	struct cql_request *req = zcalloc(1, sizeof(*req));
	if (!req) {
		free(frame_body);
		cql_srv_conn_close(c, "out of memory");
		return;
	}
	req->conn = c;
	req->version = h->version;
	req->stream = h->stream;
	req->body = frame_body;
	req->accounted = len;
	const uint8_t *args0 = frame_body ? frame_body + offset : NULL;
	size_t args_len = len - offset;
	struct slice ks;
	if (h->version >= 5 && args0 &&
	    cql_request_keyspace(args0, args_len, h->version, h->opcode, &ks) ==
		    1) {
		/* decoding errors are the executor's to report */
		req->keyspace = strndup((const char *)ks.ptr, ks.len);
		if (!req->keyspace) {
			free(frame_body);
			free(req);
			cql_srv_conn_close(c, "out of memory");
			return;
		}
	}
	if (h->version >= 5 && args0 && h->opcode == CQL_OP_EXECUTE) {
		struct slice id =
			cql_execute_result_metadata_id(args0, args_len, 5);
		req->check_metadata = true;
		req->metadata_id_len =
			id.len <= CQL_METADATA_ID_LEN ? (uint8_t)id.len : 0;
		if (req->metadata_id_len)
			memcpy(req->metadata_id, id.ptr, req->metadata_id_len);
	}
	c->refs++;
	c->inflight++;
	c->inflight_bytes += len;
	s->stats.inflight_bytes += len;
	s->stats.requests++;
	c->request_count++;
	if (c->inflight >= s->cfg.max_requests_per_connection) {
		c->paused_requests = true;
		cql_srv_conn_update_reading(c);
	}
	struct cql_request_info info = {
		.version = h->version,
		.stream = h->stream,
		.opcode = h->opcode,
		.keyspace = req->keyspace ? req->keyspace : c->keyspace,
		.client = c->peer,
		.user = c->user,
		.tracing = (h->flags & CQL_FLAG_TRACING) != 0,
	};
	/* an empty body has no buffer: the executor still gets a pointer
	 * (NULL + 0 is undefined behaviour, and UBSan stops the node) */
	static const uint8_t empty[1];
	const uint8_t *args = frame_body ? frame_body + offset : empty;
	s->exec.execute(s->exec.arg, req, &info, args, len - offset);
}

/* An executor that records no trace sessions: a statement that asks for
 * one is refused before it runs, with an Invalid error that names the way
 * out. Running it untraced instead would drop the trace without a word. */
static void refuse_tracing(struct cql_conn *c, const struct cql_header *h)
{
	struct buf b;
	buf_init(&b);
	if (cql_encode_error(&b, h->version, h->stream, CQL_ERR_INVALID,
			     "Request tracing is not supported by this "
			     "executor; the statement was not executed (turn "
			     "tracing off: TRACING OFF in cqlsh)") == 0)
		cql_srv_conn_send_frame(c, b.data, b.len);
	buf_free(&b);
}

void cql_trace_event(const struct cql_request_info *info, const char *fmt, ...)
{
	if (!info->trace)
		return;
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	info->trace->event(info->trace, text);
}

static const char *opcode_name(uint8_t op)
{
	switch (op) {
	case CQL_OP_QUERY:
		return "QUERY";
	case CQL_OP_PREPARE:
		return "PREPARE";
	case CQL_OP_EXECUTE:
		return "EXECUTE";
	case CQL_OP_BATCH:
		return "BATCH";
	case CQL_OP_REGISTER:
		return "REGISTER";
	case CQL_OP_AUTH_RESPONSE:
		return "AUTH_RESPONSE";
	case CQL_OP_STARTUP:
		return "STARTUP";
	case CQL_OP_OPTIONS:
		return "OPTIONS";
	default:
		return NULL;
	}
}

/* One whole frame. Takes ownership of `body` (malloc'ed, never NULL). */
void cql_srv_dispatch(struct cql_conn *c, const struct cql_header *h,
		      uint8_t *body, size_t len)
{
	char msg[128];
	if (h->flags & CQL_FLAG_COMPRESSION) {
		if (c->segments) {
			free(body);
			cql_srv_conn_fail(
				c, h->version, h->stream,
				"Received a compressed envelope: protocol v5 "
				"compresses segments, not envelopes");
			return;
		}
		if (!c->lz4) {
			free(body);
			cql_srv_conn_fail(
				c, h->version, h->stream,
				"Received a compressed frame but compression "
				"was not negotiated");
			return;
		}
		struct buf raw;
		buf_init(&raw);
		if (cql_lz4_decompress(body, len, c->srv->cfg.max_frame_size,
				       &raw) != 0) {
			free(body);
			buf_free(&raw);
			cql_srv_conn_fail(c, h->version, h->stream, err_msg());
			return;
		}
		free(body);
		body = buf_steal(&raw, &len);
		if (!body && !(body = malloc(1))) { /* an empty body */
			cql_srv_conn_fail(c, h->version, h->stream,
					  "out of memory");
			return;
		}
	}
	struct cursor cur = cursor_make(body, len);
	if ((h->flags & CQL_FLAG_CUSTOM_PAYLOAD) &&
	    cql_skip_custom_payload(&cur) != 0) {
		free(body);
		cql_srv_conn_fail(c, h->version, h->stream, err_msg());
		return;
	}
	if (c->ready && !c->authenticated) {
		/* Cassandra's AUTHENTICATION state: nothing but the SASL
		 * exchange, one message at a time. */
		if (h->opcode != CQL_OP_AUTH_RESPONSE || c->auth_pending) {
			const char *name = opcode_name(h->opcode);
			char m[32];
			if (!name)
				snprintf(m, sizeof(m), "0x%02x", h->opcode);
			snprintf(msg, sizeof(msg),
				 "Unexpected message %s, expecting "
				 "SASL_RESPONSE",
				 name ? name : m);
			free(body);
			cql_srv_conn_fail(c, h->version, h->stream, msg);
			return;
		}
		handle_auth_response(c, h, &cur);
		free(body);
		return;
	}
	if (h->opcode == CQL_OP_OPTIONS) {
		struct buf b;
		buf_init(&b);
		if (cql_encode_supported(&b, h->version, h->stream,
					 c->srv->cql_version, true) == 0)
			cql_srv_conn_send_frame(c, b.data, b.len);
		buf_free(&b);
		free(body);
		return;
	}
	if (h->opcode == CQL_OP_STARTUP) {
		handle_startup(c, h, &cur);
		free(body);
		return;
	}
	const char *name = opcode_name(h->opcode);
	if (!name) {
		snprintf(msg, sizeof(msg),
			 "Unknown or unexpected opcode 0x%02x", h->opcode);
		free(body);
		cql_srv_conn_fail(c, h->version, h->stream, msg);
		return;
	}
	if (!c->ready) {
		snprintf(msg, sizeof(msg),
			 "Unexpected message %s, expecting STARTUP or OPTIONS",
			 name);
		free(body);
		cql_srv_conn_fail(c, h->version, h->stream, msg);
		return;
	}
	if (h->opcode == CQL_OP_REGISTER) {
		handle_register(c, h, &cur);
		free(body);
		return;
	}
	if (h->opcode == CQL_OP_AUTH_RESPONSE) {
		free(body);
		cql_srv_conn_fail(
			c, h->version, h->stream,
			"Unexpected message AUTH_RESPONSE: authentication "
			"is not enabled");
		return;
	}
	if ((h->flags & CQL_FLAG_TRACING) && !c->srv->exec.traces) {
		refuse_tracing(c, h);
		free(body);
		return;
	}
	handle_statement(c, h, body, len, (size_t)(cur.pos - body));
}

/* ---- requests ------------------------------------------------------------ */

struct cql_request *cql_request_detached(cql_reply_fn reply,
					 cql_keyspace_fn keyspace, void *arg)
{
	struct cql_request *req = zcalloc(1, sizeof(*req));
	if (!req) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	req->detached_reply = reply;
	req->detached_keyspace = keyspace;
	req->detached_arg = arg;
	return req;
}

void cql_request_reply(struct cql_request *req, const uint8_t *frame,
		       size_t len)
{
	struct cql_conn *c = req->conn;
	if (!c) {
		req->detached_reply(req->detached_arg, frame, len);
		free(req->body);
		free(req);
		return;
	}
	if (!c->closed) {
		struct cql_server *s = c->srv;
		c->inflight--;
		c->inflight_bytes -= req->accounted;
		s->stats.inflight_bytes -= req->accounted;
		struct slice id =
			slice_make(req->metadata_id, req->metadata_id_len);
		struct buf changed;
		buf_init(&changed);
		if (req->check_metadata &&
		    cql_frame_metadata_stale(frame, len, id) &&
		    buf_append(&changed, frame, len) == 0 &&
		    cql_frame_mark_metadata_changed(&changed, id) == 0)
			cql_srv_conn_send_frame(c, changed.data, changed.len);
		else
			cql_srv_conn_send_frame(c, frame, len);
		buf_free(&changed);
		if (!c->closed && c->paused_requests &&
		    c->inflight < s->cfg.max_requests_per_connection) {
			c->paused_requests = false;
			cql_srv_conn_update_reading(c);
			/* Deferred: a synchronous executor must not recurse
			 * once per pipelined frame. */
			event_active(c->kick, EV_READ, 1);
		}
	}
	free(req->body);
	free(req->keyspace);
	free(req);
	cql_srv_conn_unref(c);
}

void cql_request_set_keyspace(struct cql_request *req, const char *keyspace)
{
	struct cql_conn *c = req->conn;
	if (!c) {
		if (req->detached_keyspace)
			req->detached_keyspace(req->detached_arg, keyspace);
		return;
	}
	char *copy = strdup(keyspace);
	if (!copy)
		return;
	free(c->keyspace);
	c->keyspace = copy;
}

/* ---- server -------------------------------------------------------------- */

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	(void)l;
	struct inet_addr peer;
	if (inet_addr_from_sockaddr(sa, (size_t)salen, &peer) != 0)
		memset(&peer, 0, sizeof(peer));
	cql_server_adopt(arg, fd, &peer);
}

void cql_server_adopt(struct cql_server *s, int fd,
		      const struct inet_addr *from)
{
	struct inet_addr peer = *from;
	char text[INET_ADDR_STRLEN];
	if (s->cfg.max_connections >= 0 &&
	    s->stats.connections >= (uint64_t)s->cfg.max_connections) {
		LOG_WARN("refusing client %s: %d connections already open "
			 "(native_transport_max_concurrent_connections)",
			 inet_addr_format(&peer, text, sizeof(text)),
			 s->cfg.max_connections);
		s->stats.connections_refused++;
		evutil_closesocket(fd);
		return;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct cql_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		evutil_closesocket(fd);
		return;
	}
	c->srv = s;
	c->peer = peer;
	c->refs = 1;
	c->fd = fd;
	c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST,
			   cql_srv_conn_on_readable, c);
	c->wev = event_new(s->base, fd, EV_WRITE | EV_PERSIST,
			   cql_srv_conn_on_writable, c);
	c->kick = event_new(s->base, -1, 0, cql_srv_conn_on_kick, c);
	c->timer = evtimer_new(s->base, cql_srv_conn_on_timer, c);
	if (evutil_make_socket_nonblocking(fd) != 0 || !c->rev || !c->wev ||
	    !c->kick || !c->timer) {
		if (c->rev)
			event_free(c->rev);
		if (c->wev)
			event_free(c->wev);
		if (c->kick)
			event_free(c->kick);
		if (c->timer)
			event_free(c->timer);
		evutil_closesocket(fd);
		free(c);
		return;
	}
	if (s->cfg.tls && s->cfg.tls_optional) {
		c->sniff = true;
	} else if (s->cfg.tls) {
		c->ssl = SSL_new(s->cfg.tls);
		if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1) {
			LOG_WARN("refusing client %s: out of memory for TLS",
				 inet_addr_format(&peer, text, sizeof(text)));
			event_free(c->rev);
			event_free(c->wev);
			event_free(c->kick);
			event_free(c->timer);
			SSL_free(c->ssl);
			evutil_closesocket(fd);
			free(c);
			return;
		}
		SSL_set_accept_state(c->ssl);
		SSL_set_read_ahead(c->ssl, 1);
	}
	cql_srv_conn_set_reading(c, true);
	c->next = s->conns;
	if (c->next)
		c->next->prev = c;
	s->conns = c;
	s->stats.connections++;
	s->stats.connections_total++;
	cql_srv_conn_arm_timer(c);
}

void cql_server_config_defaults(struct cql_server_config *c)
{
	memset(c, 0, sizeof(*c));
	c->max_frame_size = 16u << 20;
	c->max_connections = -1;
	c->max_requests_per_connection = 128;
	c->max_inflight_bytes = 256u << 20;
	c->handshake_timeout_ms = 10000;
	c->idle_timeout_ms = 0;
	c->cql_version = "3.4.5";
	c->authenticator = NULL;
	c->auth_failure_delay_ms = 500;
}

struct cql_server *cql_server_new(struct event_base *base,
				  const struct cql_server_config *config,
				  const struct cql_executor *executor)
{
	struct cql_server *s = calloc(1, sizeof(*s));
	if (!s) {
		err_set(ERR_NOMEM, "cannot allocate the CQL server");
		return NULL;
	}
	s->base = base;
	s->cfg = *config;
	snprintf(s->cql_version, sizeof(s->cql_version), "%s",
		 config->cql_version ? config->cql_version : "3.4.5");
	s->cfg.cql_version = s->cql_version;
	if (config->authenticator) {
		s->auth = *config->authenticator;
		s->has_auth = true;
	}
	if (s->cfg.max_requests_per_connection < 1)
		s->cfg.max_requests_per_connection = 1;
	s->exec = *executor;
	s->flush_ev = event_new(base, -1, 0, cql_srv_on_flush, s);
	if (!s->flush_ev) {
		err_set(ERR_NOMEM, "cannot allocate the CQL server");
		free(s);
		return NULL;
	}
	if (config->address.family == INET_NONE)
		return s; /* in process: connections come by cql_server_adopt */
	struct sockaddr_storage ss;
	size_t sl = inet_addr_to_sockaddr(&config->address, &ss);
	char text[INET_ADDR_STRLEN];
	inet_addr_format(&config->address, text, sizeof(text));
	s->listener = evconnlistener_new_bind(
		base, on_accept, s,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
			LEV_OPT_CLOSE_ON_EXEC,
		128, (struct sockaddr *)&ss, (int)sl);
	if (!s->listener) {
		err_set_errno(errno, "cannot listen for CQL clients on %s",
			      text);
		event_free(s->flush_ev);
		free(s);
		return NULL;
	}
	socklen_t bl = sizeof(ss);
	if (getsockname(evconnlistener_get_fd(s->listener),
			(struct sockaddr *)&ss, &bl) != 0 ||
	    inet_addr_from_sockaddr(&ss, bl, &s->bound) != 0)
		s->bound = config->address;
	return s;
}

void cql_server_stop(struct cql_server *s)
{
	while (s->conns)
		cql_srv_conn_close(s->conns, "server shutting down");
	cql_srv_on_flush(-1, 0,
			 s); /* only releases: every connection is closed */
	if (s->listener)
		evconnlistener_free(s->listener);
	s->listener = NULL;
}

int cql_server_listen(struct cql_server *s)
{
	if (s->listener || s->bound.family == INET_NONE)
		return 0;
	struct sockaddr_storage ss;
	size_t sl = inet_addr_to_sockaddr(&s->bound, &ss);
	s->listener = evconnlistener_new_bind(
		s->base, on_accept, s,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
			LEV_OPT_CLOSE_ON_EXEC,
		128, (struct sockaddr *)&ss, (int)sl);
	if (!s->listener) {
		char text[INET_ADDR_STRLEN];
		return err_set_errno(
			errno, "cannot listen for CQL clients on %s",
			inet_addr_format(&s->bound, text, sizeof(text)));
	}
	return 0;
}

bool cql_server_listening(const struct cql_server *s)
{
	return s->listener != NULL;
}

void cql_server_set_tls(struct cql_server *s, struct ssl_ctx_st *ctx)
{
	s->cfg.tls = ctx;
}

void cql_server_delete(struct cql_server *s)
{
	if (!s)
		return;
	cql_server_stop(s);
	event_free(s->flush_ev);
	buf_free(&s->scratch);
	free(s);
}

struct inet_addr cql_server_address(const struct cql_server *s)
{
	return s->bound;
}

void cql_server_broadcast(struct cql_server *s, const char *event_type,
			  cql_event_builder build, void *arg)
{
	unsigned bit = strcmp(event_type, "TOPOLOGY_CHANGE") == 0
			       ? EVENT_TOPOLOGY
		       : strcmp(event_type, "STATUS_CHANGE") == 0 ? EVENT_STATUS
		       : strcmp(event_type, "SCHEMA_CHANGE") == 0 ? EVENT_SCHEMA
								  : 0;
	struct buf frames[CQL_VERSION_MAX + 1];
	bool built[CQL_VERSION_MAX + 1] = {false};
	for (struct cql_conn *c = s->conns, *next; c; c = next) {
		next = c->next;
		if (!(c->events & bit) || !c->ready)
			continue;
		struct buf *f = &frames[c->version];
		if (!built[c->version]) {
			buf_init(f);
			if (build(f, c->version, arg) != 0) {
				buf_free(f);
				continue;
			}
			built[c->version] = true;
		}
		cql_srv_conn_send_frame(c, f->data, f->len);
	}
	for (int v = 0; v <= CQL_VERSION_MAX; v++)
		if (built[v])
			buf_free(&frames[v]);
}

void cql_server_stats(const struct cql_server *s, struct cql_server_stats *out)
{
	*out = s->stats;
}

size_t cql_server_clients(const struct cql_server *s,
			  struct cql_server_client *out, size_t cap)
{
	size_t n = 0;
	for (const struct cql_conn *c = s->conns; c; c = c->next) {
		if (c->closed)
			continue;
		if (n < cap)
			out[n] = (struct cql_server_client){
				.address = c->peer,
				.stage = !c->ready           ? "established"
					 : !c->authenticated ? "authenticating"
							     : "ready",
				.user = c->user,
				.driver_name = c->driver_name,
				.driver_version = c->driver_version,
				.version = c->version,
				.request_count = c->request_count,
				.ssl = c->ssl != NULL,
				.ssl_protocol =
					c->ssl ? SSL_get_version(c->ssl) : NULL,
				.ssl_cipher_suite =
					c->ssl ? SSL_CIPHER_standard_name(
							 SSL_get_current_cipher(
								 c->ssl))
					       : NULL,
			};
		n++;
	}
	return n;
}
