/*
 * The client's connections: nonblocking sockets on the event loop, the
 * STARTUP handshake, stream ids, the backlog, the coalesced send of a pass,
 * response dispatch (with the Unprepared retry), failures and timeouts.
 *
 * A connection owns `max_streams_per_connection` stream slots and a stack of
 * free ids. A frame encoded with stream 0 is written with a free id patched
 * in, or copied to the backlog when every stream is taken or the connection
 * is still starting; a response frees its stream, which sends the next
 * backlogged frame. Requests submitted while responses are dispatched leave
 * together, in one send() per connection, when the pass ends.
 */
#include "client/driver/cql_client_internal.h"
#include "client/proto/tls.h"

#include "common/err.h"

#include <event2/event.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void conn_flush(struct cql_conn *k);

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	cql_conn_start(arg);
}

static void conn_mark_dirty(struct cql_conn *k)
{
	struct cql_client *c = k->client;
	if (k->dirty)
		return;
	k->dirty = true;
	k->next_dirty = c->dirty;
	c->dirty = k;
	if (c->depth == 0)
		event_active(c->flush_ev, EV_TIMEOUT, 0);
}

static void flush_dirty(struct cql_client *c)
{
	while (c->dirty) {
		struct cql_conn *k = c->dirty;
		c->dirty = k->next_dirty;
		k->dirty = false;
		k->next_dirty = NULL;
		conn_flush(k);
	}
}

void cql_client_on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_dirty(arg);
}

uint64_t cql_client_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- deferred failures --------------------------------------------------- */

void cql_client_defer_fail(struct cql_client *c, cql_client_cb cb, void *arg,
			   enum cql_client_status status, const char *msg)
{
	struct cql_deferred *d = calloc(1, sizeof(*d));
	if (!d) {
		/* Out of memory: calling back now is the lesser evil. */
		cb(arg, status, NULL, msg);
		return;
	}
	d->cb = cb;
	d->arg = arg;
	d->status = status;
	snprintf(d->message, sizeof(d->message), "%s", msg);
	if (c->deferred_tail)
		c->deferred_tail->next = d;
	else
		c->deferred = d;
	c->deferred_tail = d;
	event_active(c->defer_ev, EV_TIMEOUT, 0);
}

void cql_client_on_defer(evutil_socket_t fd, short what, void *arg)
{
	struct cql_client *c = arg;
	(void)fd;
	(void)what;
	/* Take the list: callbacks may queue more, delivered next round. */
	struct cql_deferred *d = c->deferred;
	c->deferred = c->deferred_tail = NULL;
	c->depth++;
	while (d) {
		struct cql_deferred *next = d->next;
		d->cb(d->arg, d->status, NULL, d->message);
		free(d);
		d = next;
	}
	if (--c->depth == 0)
		flush_dirty(c);
}

/* ---- streams and sending ------------------------------------------------- */

int cql_conn_init(struct cql_conn *k, struct cql_client *c, struct cql_host *h)
{
	int n = c->cfg.max_streams_per_connection;
	memset(k, 0, sizeof(*k));
	k->client = c;
	k->host = h;
	k->fd = -1;
	k->slots = calloc((size_t)n, sizeof(*k->slots));
	k->frames = calloc((size_t)n, sizeof(*k->frames));
	k->free_ids = calloc((size_t)n, sizeof(*k->free_ids));
	k->retry = evtimer_new(c->base, on_retry, k);
	arena_create(&k->arena, 0);
	if (!k->slots || !k->frames || !k->free_ids || !k->retry)
		return err_set(ERR_NOMEM, "connection state");
	/* Low ids on top, so a lightly loaded connection uses few slots. */
	for (int i = 0; i < n; i++)
		k->free_ids[i] = (int16_t)(n - 1 - i);
	k->nfree = n;
	return 0;
}

static void write_frame(struct cql_conn *k, int16_t stream,
			const uint8_t *frame, size_t len,
			const struct cql_req *req, uint64_t deadline)
{
	struct cql_slot *s = &k->slots[stream];
	s->req = *req;
	s->deadline_ms = deadline;
	s->used = true;
	k->inflight++;
	if (stream >= k->hiwater)
		k->hiwater = stream + 1;
	/* The frame is ours to patch: scratch or a pending copy. */
	be16_store((uint8_t *)frame + 2, (uint16_t)stream);
	if (req->stmt && !req->retried) {
		buf_clear(&k->frames[stream]);
		if (buf_append(&k->frames[stream], frame, len) != 0)
			s->req.stmt = NULL; /* no retry then */
	}
	if (buf_append(&k->out, frame, len) != 0) {
		/* The stream is taken: its callback runs when k fails. */
		cql_conn_fail(k, "out of memory buffering a request");
		return;
	}
	conn_mark_dirty(k);
}

static int16_t take_stream(struct cql_conn *k)
{
	return k->free_ids[--k->nfree];
}

/* Submits an encoded frame (stream placeholder) on `k`. Starting
 * connections and full ones keep a copy in the backlog. */
void cql_conn_submit(struct cql_conn *k, uint8_t *frame, size_t len,
		     const struct cql_req *req, bool internal)
{
	uint64_t deadline =
		cql_client_now_ms() + k->client->cfg.request_timeout_ms;
	bool open = k->state == CQL_CONN_READY ||
		    (internal && k->state == CQL_CONN_STARTUP);
	if (open && k->nfree > 0 && !k->backlog) {
		write_frame(k, take_stream(k), frame, len, req, deadline);
		return;
	}
	struct cql_pending *p = malloc(sizeof(*p) + len);
	if (!p) {
		cql_client_defer_fail(k->client, req->cb, req->arg,
				      CQL_CLIENT_CONNECTION,
				      "out of memory queueing a request");
		return;
	}
	p->next = NULL;
	p->req = *req;
	p->deadline_ms = deadline;
	p->len = len;
	memcpy(p->frame, frame, len);
	if (k->backlog_tail)
		k->backlog_tail->next = p;
	else
		k->backlog = p;
	k->backlog_tail = p;
}

static void conn_drain_backlog(struct cql_conn *k)
{
	while (k->state == CQL_CONN_READY && k->backlog && k->nfree > 0) {
		struct cql_pending *p = k->backlog;
		k->backlog = p->next;
		if (!k->backlog)
			k->backlog_tail = NULL;
		write_frame(k, take_stream(k), p->frame, p->len, &p->req,
			    p->deadline_ms);
		free(p);
	}
}

/* ---- connection life ----------------------------------------------------- */

static void on_startup(void *arg, enum cql_client_status status,
		       const struct cql_client_response *resp,
		       const char *message);

/* STARTUP was answered AUTHENTICATE: our credentials (SASL PLAIN), and
 * on_startup takes AUTH_SUCCESS as READY. */
static void send_credentials(struct cql_conn *k)
{
	const struct cql_client_config *cfg = &k->client->cfg;
	if (!cfg->username) {
		cql_conn_fail(k, "the server asks for authentication "
				 "(PasswordAuthenticator): give a username and "
				 "password");
		return;
	}
	struct buf b = {0};
	if (cql_client_encode_auth_response(&b, 0, cfg->username,
					    cfg->password) != 0) {
		buf_free(&b);
		cql_conn_fail(k, err_msg());
		return;
	}
	struct cql_req req = {on_startup, k, NULL, false};
	cql_conn_submit(k, b.data, b.len, &req, true);
	explicit_bzero(b.data, b.len);
	buf_free(&b);
}

static void on_startup(void *arg, enum cql_client_status status,
		       const struct cql_client_response *resp,
		       const char *message)
{
	struct cql_conn *k = arg;
	char msg[CQL_CLIENT_MSG_MAX];
	if (status != CQL_CLIENT_OK) {
		if (k->state != CQL_CONN_DOWN)
			cql_conn_fail(k, message);
		return;
	}
	if (resp->opcode == CQL_OP_AUTHENTICATE) {
		send_credentials(k);
		return;
	}
	if (resp->opcode != CQL_OP_READY &&
	    resp->opcode != CQL_OP_AUTH_SUCCESS) {
		if (resp->opcode == CQL_OP_ERROR)
			snprintf(msg, sizeof(msg), "STARTUP refused: %.*s",
				 (int)resp->error_message.len,
				 (const char *)resp->error_message.ptr);
		else
			snprintf(msg, sizeof(msg),
				 "STARTUP answered with opcode 0x%02x",
				 resp->opcode);
		cql_conn_fail(k, msg);
		return;
	}
	k->state = CQL_CONN_READY;
	k->settled = true;
	conn_drain_backlog(k);
	cql_client_connect_progress(k->client);
}

struct reprepare {
	struct cql_conn *conn;
	struct cql_req req;
	struct buf frame; /* the EXECUTE to send again */
};

static void on_reprepared(void *arg, enum cql_client_status status,
			  const struct cql_client_response *resp,
			  const char *message)
{
	struct reprepare *r = arg;
	if (status == CQL_CLIENT_OK && resp->opcode == CQL_OP_RESULT &&
	    resp->kind == CQL_RESULT_PREPARED) {
		r->req.retried = true;
		cql_conn_submit(r->conn, r->frame.data, r->frame.len, &r->req,
				false);
	} else if (status == CQL_CLIENT_OK && resp->opcode != CQL_OP_ERROR) {
		r->req.cb(r->req.arg, CQL_CLIENT_BAD_RESPONSE, NULL,
			  "PREPARE did not answer PREPARED");
	} else {
		r->req.cb(r->req.arg, status, resp, message);
	}
	buf_free(&r->frame);
	free(r);
}

/* After an Unprepared answer: PREPARE again on `k`, then resend the frame
 * kept for the stream. 0, or -1 when that cannot start. */
static int reprepare(struct cql_conn *k, const struct cql_req *req,
		     struct buf *frame)
{
	struct cql_client *c = k->client;
	struct reprepare *r = calloc(1, sizeof(*r));
	if (!r)
		return -1;
	buf_clear(&c->scratch);
	if (cql_client_encode_prepare(&c->scratch, 0, req->stmt->query) != 0) {
		free(r);
		return -1;
	}
	r->conn = k;
	r->req = *req;
	r->frame = *frame; /* taken: the slot gets a fresh buffer */
	memset(frame, 0, sizeof(*frame));
	struct cql_req prep = {on_reprepared, r, NULL, false};
	cql_conn_submit(k, c->scratch.data, c->scratch.len, &prep, false);
	return 0;
}

/* Frees one frame's stream and calls its callback. */
static void conn_dispatch(struct cql_conn *k, const struct cql_header *h,
			  const uint8_t *body)
{
	struct cql_client *c = k->client;
	if (h->stream < 0)
		return; /* an EVENT: we never REGISTER */
	if (h->stream >= c->cfg.max_streams_per_connection ||
	    !k->slots[h->stream].used)
		return; /* unknown stream: ignore, as drivers do */
	struct cql_slot *s = &k->slots[h->stream];
	struct cql_req req = s->req;
	memset(s, 0, sizeof(*s));
	k->free_ids[k->nfree++] = h->stream;
	k->inflight--;
	if (!req.cb)
		return;
	struct cql_client_response resp;
	uint8_t flags = h->flags;
	size_t len = h->length;
	if (flags & CQL_FLAG_COMPRESSION) {
		/* Negotiated LZ4 (a server may also compress unasked: we
		 * decompress whatever says so). */
		buf_clear(&k->plain);
		if (cql_lz4_decompress(body, len, c->cfg.max_frame_size,
				       &k->plain) != 0) {
			req.cb(req.arg, CQL_CLIENT_BAD_RESPONSE, NULL,
			       err_msg());
			return;
		}
		body = k->plain.data ? k->plain.data : body;
		len = k->plain.len;
		flags &= (uint8_t)~CQL_FLAG_COMPRESSION;
	}
	c->cur_opcode = h->opcode;
	c->cur_flags = flags;
	c->cur_body = slice_make(body, len);
	if (cql_client_response_decode(h->opcode, flags, body, len, &k->arena,
				       &resp) != 0)
		req.cb(req.arg, CQL_CLIENT_BAD_RESPONSE, NULL, err_msg());
	else if (resp.opcode == CQL_OP_ERROR &&
		 resp.error_code == CQL_ERR_UNPREPARED && req.stmt &&
		 !req.retried && reprepare(k, &req, &k->frames[h->stream]) == 0)
		c->stats_reprepared++;
	else
		req.cb(req.arg, CQL_CLIENT_OK, &resp, NULL);
	c->cur_body = slice_make(NULL, 0);
	arena_reset(&k->arena);
}

/* OpenSSL's verdict on a failed call: 0 to wait (for EV_WRITE when it
 * wants to write), -1 when the connection failed (already closed). */
static int tls_wait(struct cql_conn *k, int r, const char *what)
{
	int e = SSL_get_error(k->ssl, r);
	if (e == SSL_ERROR_WANT_WRITE) {
		event_add(k->wev, NULL);
		return 0;
	}
	if (e == SSL_ERROR_WANT_READ) {
		event_del(k->wev); /* rev is always on */
		return 0;
	}
	char msg[CQL_CLIENT_MSG_MAX], why[200];
	unsigned long ee = ERR_get_error();
	if (ee)
		ERR_error_string_n(ee, why, sizeof(why));
	else if (e == SSL_ERROR_ZERO_RETURN ||
		 (e == SSL_ERROR_SYSCALL && !errno))
		snprintf(why, sizeof(why), "connection closed by the server");
	else
		snprintf(why, sizeof(why), "%s", strerror(errno));
	ERR_clear_error();
	snprintf(msg, sizeof(msg), "TLS %s: %s", what, why);
	cql_conn_fail(k, msg);
	return -1;
}

static void send_startup(struct cql_conn *k);

/* The TLS handshake, step by step as the socket allows. */
static void tls_handshake(struct cql_conn *k)
{
	int r = SSL_do_handshake(k->ssl);
	if (r == 1) {
		k->tls_handshaking = false;
		event_del(k->wev);
		send_startup(k);
		return;
	}
	tls_wait(k, r, "handshake");
}

/* Sends what is buffered; waits for EV_WRITE when the socket is full. */
static void conn_flush(struct cql_conn *k)
{
	if (k->ssl && k->tls_handshaking)
		return;
	while (k->ssl && k->out_pos < k->out.len) {
		size_t left = k->out.len - k->out_pos;
		int n = SSL_write(k->ssl, k->out.data + k->out_pos,
				  left > INT32_MAX ? INT32_MAX : (int)left);
		if (n > 0) {
			k->out_pos += (size_t)n;
			continue;
		}
		tls_wait(k, n, "write");
		return;
	}
	while (!k->ssl && k->fd >= 0 && k->out_pos < k->out.len) {
		ssize_t n = send(k->fd, k->out.data + k->out_pos,
				 k->out.len - k->out_pos, MSG_NOSIGNAL);
		if (n > 0) {
			k->out_pos += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			event_add(k->wev, NULL);
			return;
		}
		char msg[CQL_CLIENT_MSG_MAX];
		snprintf(msg, sizeof(msg), "send: %s", strerror(errno));
		cql_conn_fail(k, msg);
		return;
	}
	if (k->fd >= 0) {
		k->out.len = k->out_pos = 0;
		event_del(k->wev);
	}
}

/* Parses and dispatches every whole frame received. */
static void conn_parse(struct cql_conn *k)
{
	while (k->in.len - k->in_pos >= CQL_HEADER_LEN) {
		struct cql_header h;
		const uint8_t *p = k->in.data + k->in_pos;
		if (cql_client_header_decode(p, k->client->cfg.max_frame_size,
					     &h) != 0) {
			cql_conn_fail(k, err_msg());
			return;
		}
		if (k->in.len - k->in_pos < CQL_HEADER_LEN + (size_t)h.length)
			break;
		k->in_pos += CQL_HEADER_LEN + (size_t)h.length;
		conn_dispatch(k, &h, p + CQL_HEADER_LEN);
		/* A callback may have failed this connection. */
		if (k->state == CQL_CONN_DOWN)
			return;
		conn_drain_backlog(k);
	}
	/* Keep the partial frame at the start of the buffer. */
	size_t left = k->in.len - k->in_pos;
	if (left && k->in_pos)
		memmove(k->in.data, k->in.data + k->in_pos, left);
	k->in.len = left;
	k->in_pos = 0;
}

static void conn_read(struct cql_conn *k)
{
	for (;;) {
		if (buf_reserve(&k->in, 65536) != 0) {
			cql_conn_fail(k, "out of memory reading");
			return;
		}
		size_t room = k->in.cap - k->in.len;
		if (k->ssl) {
			int r = SSL_read(k->ssl, k->in.data + k->in.len,
					 room > INT32_MAX ? INT32_MAX
							  : (int)room);
			if (r <= 0) {
				if (tls_wait(k, r, "read") == 0 &&
				    k->out_pos < k->out.len)
					conn_flush(k); /* it waited on a read */
				return;
			}
			k->in.len += (size_t)r;
			conn_parse(k);
			if (k->state == CQL_CONN_DOWN)
				return;
			continue; /* until OpenSSL wants the socket */
		}
		ssize_t n = recv(k->fd, k->in.data + k->in.len, room, 0);
		if (n > 0) {
			k->in.len += (size_t)n;
			conn_parse(k);
			if (k->state == CQL_CONN_DOWN || (size_t)n < room)
				return;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		char msg[CQL_CLIENT_MSG_MAX];
		if (n == 0)
			snprintf(msg, sizeof(msg),
				 "connection closed by the server");
		else
			snprintf(msg, sizeof(msg), "recv: %s", strerror(errno));
		cql_conn_fail(k, msg);
		return;
	}
}

/* The socket connected (or failed to): send STARTUP. */
static void conn_connected(struct cql_conn *k)
{
	int err = 0, one = 1;
	socklen_t len = sizeof(err);
	if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	if (err) {
		char msg[CQL_CLIENT_MSG_MAX];
		snprintf(msg, sizeof(msg), "connect: %s", strerror(err));
		cql_conn_fail(k, msg);
		return;
	}
	setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	event_del(k->wev);
	event_add(k->rev, NULL);
	k->state = CQL_CONN_STARTUP;
	if (k->client->cfg.tls) {
		k->ssl = SSL_new(k->client->cfg.tls);
		char ip[INET_ADDR_STRLEN];
		if (!k->ssl || SSL_set_fd(k->ssl, k->fd) != 1 ||
		    (k->client->cfg.tls_check_hostname &&
		     cql_tls_expect_name(k->ssl,
					 k->host->name[0]
						 ? k->host->name
						 : inet_addr_format_host(
							   &k->host->addr, ip,
							   sizeof(ip))) != 0)) {
			cql_conn_fail(k, "TLS: out of memory");
			return;
		}
		SSL_set_connect_state(k->ssl);
		k->tls_handshaking = true;
		tls_handshake(k);
		return;
	}
	send_startup(k);
}

static void send_startup(struct cql_conn *k)
{
	struct buf *b = &k->client->scratch;
	buf_clear(b);
	if (cql_client_encode_startup(b, 0, k->client->cfg.lz4) != 0) {
		cql_conn_fail(k, err_msg());
		return;
	}
	struct cql_req req = {on_startup, k, NULL, false};
	cql_conn_submit(k, b->data, b->len, &req, true);
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct cql_conn *k = arg;
	struct cql_client *c = k->client;
	(void)fd;
	c->depth++;
	if (k->state == CQL_CONN_CONNECTING) {
		conn_connected(k);
	} else if (k->tls_handshaking) {
		tls_handshake(k);
	} else if (what & EV_READ) {
		conn_read(k);
	} else if (what & EV_WRITE) {
		conn_flush(k);
	}
	if (--c->depth == 0)
		flush_dirty(c);
}

void cql_conn_start(struct cql_conn *k)
{
	struct cql_client *c = k->client;
	struct sockaddr_storage ss;
	size_t sl = inet_addr_to_sockaddr(&k->host->addr, &ss);
	char msg[CQL_CLIENT_MSG_MAX];
	k->state = CQL_CONN_CONNECTING;
	k->connect_deadline_ms =
		cql_client_now_ms() + c->cfg.connect_timeout_ms;
	k->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       0);
	if (k->fd < 0) {
		snprintf(msg, sizeof(msg), "socket: %s", strerror(errno));
		cql_conn_fail(k, msg);
		return;
	}
	k->rev = event_new(c->base, k->fd, EV_READ | EV_PERSIST, on_io, k);
	k->wev = event_new(c->base, k->fd, EV_WRITE | EV_PERSIST, on_io, k);
	if (!k->rev || !k->wev) {
		cql_conn_fail(k, "out of memory");
		return;
	}
	if (connect(k->fd, (struct sockaddr *)&ss, (socklen_t)sl) != 0 &&
	    errno != EINPROGRESS) {
		snprintf(msg, sizeof(msg), "connect: %s", strerror(errno));
		cql_conn_fail(k, msg);
		return;
	}
	event_add(k->wev, NULL);
}

/* Closes `k`, fails what it carries, and schedules a reconnect. */
void cql_conn_fail(struct cql_conn *k, const char *why)
{
	struct cql_client *c = k->client;
	char host[INET_ADDR_STRLEN], msg[CQL_CLIENT_MSG_MAX];
	inet_addr_format(&k->host->addr, host, sizeof(host));
	snprintf(msg, sizeof(msg), "%s: %s", host, why);
	snprintf(c->last_error, sizeof(c->last_error), "%s", msg);
	if (k->rev)
		event_free(k->rev);
	if (k->wev)
		event_free(k->wev);
	k->rev = k->wev = NULL;
	SSL_free(k->ssl);
	k->ssl = NULL;
	k->tls_handshaking = false;
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	k->in.len = k->in_pos = 0;
	k->out.len = k->out_pos = 0;
	k->state = CQL_CONN_DOWN;
	bool was_settled = k->settled;
	k->settled = true;
	/* Take everything first: callbacks may submit new requests. */
	int n = k->hiwater;
	struct cql_pending *p = k->backlog;
	k->backlog = k->backlog_tail = NULL;
	struct cql_slot *old = malloc((size_t)(n ? n : 1) * sizeof(*old));
	if (old)
		memcpy(old, k->slots, (size_t)n * sizeof(*old));
	memset(k->slots, 0, (size_t)n * sizeof(*k->slots));
	int total = c->cfg.max_streams_per_connection;
	for (int i = 0; i < total; i++)
		k->free_ids[i] = (int16_t)(total - 1 - i);
	k->nfree = total;
	k->inflight = 0;
	k->hiwater = 0;
	struct timeval tv = {CQL_CLIENT_RETRY_MS / 1000,
			     (CQL_CLIENT_RETRY_MS % 1000) * 1000};
	evtimer_add(k->retry, &tv);
	for (int i = 0; old && i < n; i++)
		if (old[i].used && old[i].req.cb)
			old[i].req.cb(old[i].req.arg, CQL_CLIENT_CONNECTION,
				      NULL, msg);
	free(old);
	while (p) {
		struct cql_pending *next = p->next;
		p->req.cb(p->req.arg, CQL_CLIENT_CONNECTION, NULL, msg);
		free(p);
		p = next;
	}
	if (!was_settled)
		cql_client_connect_progress(c);
}

/* ---- timeouts ------------------------------------------------------------ */

static void conn_expire(struct cql_conn *k, uint64_t now)
{
	if (k->state == CQL_CONN_CONNECTING && now >= k->connect_deadline_ms) {
		cql_conn_fail(k, "connect timed out");
		return;
	}
	for (int i = 0; i < k->hiwater; i++) {
		struct cql_slot *s = &k->slots[i];
		if (s->used && s->req.cb && now >= s->deadline_ms) {
			cql_client_cb cb = s->req.cb;
			s->req.cb = NULL; /* the stream stays taken: orphan */
			cb(s->req.arg, CQL_CLIENT_TIMEOUT, NULL,
			   "no response within request_timeout_ms");
		}
	}
	/* Unlink the expired first: callbacks may queue on this backlog. */
	struct cql_pending **pp = &k->backlog, *expired = NULL,
			   **tail = &expired;
	k->backlog_tail = NULL;
	while (*pp) {
		struct cql_pending *p = *pp;
		if (now < p->deadline_ms) {
			k->backlog_tail = p;
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		p->next = NULL;
		*tail = p;
		tail = &p->next;
	}
	while (expired) {
		struct cql_pending *p = expired;
		expired = p->next;
		p->req.cb(p->req.arg, CQL_CLIENT_TIMEOUT, NULL,
			  "no stream or connection within request_timeout_ms");
		free(p);
	}
}

void cql_client_on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct cql_client *c = arg;
	uint64_t now = cql_client_now_ms();
	(void)fd;
	(void)what;
	c->depth++;
	for (size_t h = 0; h < c->nhosts; h++)
		for (int i = 0; i < c->hosts[h]->nconns; i++)
			conn_expire(&c->hosts[h]->conns[i], now);
	if (--c->depth == 0)
		flush_dirty(c);
}
