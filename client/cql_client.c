/*
 * The CQL client: hosts, connection pools, stream ids, routing.
 *
 * Each host has `connections_per_host` connections. A connection owns
 * `max_streams_per_connection` stream slots (callback, argument, deadline)
 * and a stack of free stream ids. A request is encoded once into a scratch
 * buffer with stream 0, then either written with a free stream id patched
 * in, or copied to the connection's backlog when every stream is taken or
 * the connection is still starting; a response frees its stream, which
 * sends the next backlogged frame.
 *
 * Failures never call back from inside the call that submitted the request
 * (a closed-loop load generator would recurse): they are queued and
 * delivered from a zero-delay event. Connection failures fail every request
 * in flight on it and retry the connection after a second. A 100 ms tick
 * times out requests (the stream stays taken until its late response
 * arrives, so a late answer cannot be taken for a new request's).
 */
#include "client/cql_client_internal.h"

#include "common/err.h"
#include "common/murmur3.h"

#include <event2/buffer.h>
#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS    100
#define RETRY_MS   1000
#define MSG_MAX    256
#define HOSTS_MAX  1024
#define TOKENS_MAX (1u << 20)

enum conn_state {
	CONN_DOWN = 0,
	CONN_CONNECTING,
	CONN_STARTUP,
	CONN_READY,
};

/* Who waits for a request. An EXECUTE names its statement so that an
 * Unprepared answer can be healed: PREPARE on that connection, then the same
 * frame again, once. */
struct req {
	cql_client_cb cb; /* NULL: timed out (orphan) */
	void *arg;
	const struct cql_client_prepared *stmt;
	bool retried;
};

struct slot {
	struct req req;
	uint64_t deadline_ms;
	bool used;
};

/* A frame waiting for a stream id (or a ready connection). */
struct pending {
	struct pending *next;
	struct req req;
	uint64_t deadline_ms;
	size_t len;
	uint8_t frame[]; /* stream bytes patched when sent */
};

/* A failure delivered from the defer event. */
struct deferred {
	struct deferred *next;
	cql_client_cb cb;
	void *arg;
	enum cql_client_status status;
	char message[MSG_MAX];
};

struct host;

struct conn {
	struct cql_client *client;
	struct host *host;
	int fd; /* -1 when down */
	struct event *rev, *wev;
	struct buf in; /* received bytes; frames parsed from in_pos */
	size_t in_pos;
	struct buf out; /* frames not yet sent, from out_pos */
	size_t out_pos;
	bool dirty; /* on the client's flush list */
	struct conn *next_dirty;
	enum conn_state state;
	bool settled; /* has been ready or failed once (connect progress) */
	struct slot *slots;
	struct buf *frames; /* per stream: the EXECUTE sent, for a retry */
	int16_t *free_ids;  /* stack */
	int nfree;
	int hiwater; /* streams [0, hiwater) have been used */
	int inflight;
	struct pending *backlog, *backlog_tail;
	uint64_t connect_deadline_ms;
	struct event *retry;
	struct arena arena; /* decoded responses; reset after each */
};

struct host {
	struct inet_addr addr;
	struct conn *conns;
	int nconns;
	unsigned rr;
	bool started;
};

struct token_entry {
	int64_t token;
	uint32_t host;
};

struct cql_client_prepared {
	struct cql_client_prepared *next;
	char *query;
	uint8_t *id;
	uint16_t id_len;
	int32_t bind_count;
	int32_t pk_count;
	uint16_t *pk_indexes;
};

struct cql_client {
	struct event_base *base;
	struct cql_client_config cfg;
	struct inet_addr *contacts;
	struct host **hosts;
	size_t nhosts;
	unsigned host_rr;
	struct token_entry *tokens;
	size_t ntokens;
	struct cql_client_prepared *prepared;
	uint64_t stats_reprepared;
	struct event *tick;
	struct event *defer_ev;
	struct deferred *deferred, *deferred_tail;
	struct buf scratch;
	/* Connections with unsent frames, flushed once per read pass (so the
	 * requests issued by one batch of responses leave in one send) or from
	 * flush_ev for requests submitted outside a callback. */
	struct conn *dirty;
	int depth; /* > 0 while dispatching */
	struct event *flush_ev;
	/* The frame being dispatched (for the blocking helpers). */
	uint8_t cur_opcode, cur_flags;
	struct slice cur_body;
	/* Connect progress. */
	cql_client_done_cb done;
	void *done_arg;
	bool topology_asked;
	bool topology_done;
	int topology_waiting;
	char last_error[MSG_MAX];
	bool closing; /* in cql_client_delete: new requests fail */
};

static void conn_start(struct conn *k);
static void conn_fail(struct conn *k, const char *msg);
static void connect_progress(struct cql_client *c);

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_start(arg);
}

static void conn_flush(struct conn *k);

static void conn_mark_dirty(struct conn *k)
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
		struct conn *k = c->dirty;
		c->dirty = k->next_dirty;
		k->dirty = false;
		k->next_dirty = NULL;
		conn_flush(k);
	}
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_dirty(arg);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void cql_client_config_defaults(struct cql_client_config *c)
{
	memset(c, 0, sizeof(*c));
	c->connections_per_host = 1;
	c->max_streams_per_connection = 1024;
	c->connect_timeout_ms = 5000;
	c->request_timeout_ms = 12000;
	c->max_frame_size = 256u << 20;
	c->token_aware = true;
	c->discover_peers = true;
}

const char *cql_client_status_name(enum cql_client_status s)
{
	switch (s) {
	case CQL_CLIENT_OK:
		return "OK";
	case CQL_CLIENT_TIMEOUT:
		return "ClientTimeout";
	case CQL_CLIENT_CONNECTION:
		return "ConnectionClosed";
	case CQL_CLIENT_NO_HOST:
		return "NoHostAvailable";
	case CQL_CLIENT_BAD_RESPONSE:
		return "BadResponse";
	}
	return "Unknown";
}

/* ---- deferred failures --------------------------------------------------- */

static void defer_fail(struct cql_client *c, cql_client_cb cb, void *arg,
		       enum cql_client_status status, const char *msg)
{
	struct deferred *d = calloc(1, sizeof(*d));
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

static void on_defer(evutil_socket_t fd, short what, void *arg)
{
	struct cql_client *c = arg;
	(void)fd;
	(void)what;
	/* Take the list: callbacks may queue more, delivered next round. */
	struct deferred *d = c->deferred;
	c->deferred = c->deferred_tail = NULL;
	c->depth++;
	while (d) {
		struct deferred *next = d->next;
		d->cb(d->arg, d->status, NULL, d->message);
		free(d);
		d = next;
	}
	if (--c->depth == 0)
		flush_dirty(c);
}

/* ---- streams and sending ------------------------------------------------- */

static int conn_init(struct conn *k, struct cql_client *c, struct host *h)
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

static void write_frame(struct conn *k, int16_t stream, const uint8_t *frame,
			size_t len, const struct req *req, uint64_t deadline)
{
	struct slot *s = &k->slots[stream];
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
		conn_fail(k, "out of memory buffering a request");
		return;
	}
	conn_mark_dirty(k);
}

static int16_t take_stream(struct conn *k)
{
	return k->free_ids[--k->nfree];
}

/* Submits an encoded frame (stream placeholder) on `k`. Starting
 * connections and full ones keep a copy in the backlog. */
static void conn_submit(struct conn *k, uint8_t *frame, size_t len,
			const struct req *req, bool internal)
{
	uint64_t deadline = now_ms() + k->client->cfg.request_timeout_ms;
	bool open = k->state == CONN_READY ||
		    (internal && k->state == CONN_STARTUP);
	if (open && k->nfree > 0 && !k->backlog) {
		write_frame(k, take_stream(k), frame, len, req, deadline);
		return;
	}
	struct pending *p = malloc(sizeof(*p) + len);
	if (!p) {
		defer_fail(k->client, req->cb, req->arg, CQL_CLIENT_CONNECTION,
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

static void conn_drain_backlog(struct conn *k)
{
	while (k->state == CONN_READY && k->backlog && k->nfree > 0) {
		struct pending *p = k->backlog;
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
		       const char *message)
{
	struct conn *k = arg;
	char msg[MSG_MAX];
	if (status != CQL_CLIENT_OK) {
		if (k->state != CONN_DOWN)
			conn_fail(k, message);
		return;
	}
	if (resp->opcode != CQL_OP_READY) {
		if (resp->opcode == CQL_OP_ERROR)
			snprintf(msg, sizeof(msg), "STARTUP refused: %.*s",
				 (int)resp->error_message.len,
				 (const char *)resp->error_message.ptr);
		else
			snprintf(msg, sizeof(msg),
				 "STARTUP answered with opcode 0x%02x",
				 resp->opcode);
		conn_fail(k, msg);
		return;
	}
	k->state = CONN_READY;
	k->settled = true;
	conn_drain_backlog(k);
	connect_progress(k->client);
}

struct reprepare {
	struct conn *conn;
	struct req req;
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
		conn_submit(r->conn, r->frame.data, r->frame.len, &r->req,
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
static int reprepare(struct conn *k, const struct req *req, struct buf *frame)
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
	struct req prep = {on_reprepared, r, NULL, false};
	conn_submit(k, c->scratch.data, c->scratch.len, &prep, false);
	return 0;
}

/* Frees one frame's stream and calls its callback. */
static void conn_dispatch(struct conn *k, const struct cql_header *h,
			  const uint8_t *body)
{
	struct cql_client *c = k->client;
	if (h->stream < 0)
		return; /* an EVENT: we never REGISTER */
	if (h->stream >= c->cfg.max_streams_per_connection ||
	    !k->slots[h->stream].used)
		return; /* unknown stream: ignore, as drivers do */
	struct slot *s = &k->slots[h->stream];
	struct req req = s->req;
	memset(s, 0, sizeof(*s));
	k->free_ids[k->nfree++] = h->stream;
	k->inflight--;
	if (!req.cb)
		return;
	struct cql_client_response resp;
	c->cur_opcode = h->opcode;
	c->cur_flags = h->flags;
	c->cur_body = slice_make(body, h->length);
	if (cql_client_response_decode(h->opcode, h->flags, body, h->length,
				       &k->arena, &resp) != 0)
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

/* Sends what is buffered; waits for EV_WRITE when the socket is full. */
static void conn_flush(struct conn *k)
{
	while (k->fd >= 0 && k->out_pos < k->out.len) {
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
		char msg[MSG_MAX];
		snprintf(msg, sizeof(msg), "send: %s", strerror(errno));
		conn_fail(k, msg);
		return;
	}
	if (k->fd >= 0) {
		k->out.len = k->out_pos = 0;
		event_del(k->wev);
	}
}

/* Parses and dispatches every whole frame received. */
static void conn_parse(struct conn *k)
{
	while (k->in.len - k->in_pos >= CQL_HEADER_LEN) {
		struct cql_header h;
		const uint8_t *p = k->in.data + k->in_pos;
		if (cql_client_header_decode(p, k->client->cfg.max_frame_size,
					     &h) != 0) {
			conn_fail(k, err_msg());
			return;
		}
		if (k->in.len - k->in_pos < CQL_HEADER_LEN + (size_t)h.length)
			break;
		k->in_pos += CQL_HEADER_LEN + (size_t)h.length;
		conn_dispatch(k, &h, p + CQL_HEADER_LEN);
		/* A callback may have failed this connection. */
		if (k->state == CONN_DOWN)
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

static void conn_read(struct conn *k)
{
	for (;;) {
		if (buf_reserve(&k->in, 65536) != 0) {
			conn_fail(k, "out of memory reading");
			return;
		}
		size_t room = k->in.cap - k->in.len;
		ssize_t n = recv(k->fd, k->in.data + k->in.len, room, 0);
		if (n > 0) {
			k->in.len += (size_t)n;
			conn_parse(k);
			if (k->state == CONN_DOWN || (size_t)n < room)
				return;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		char msg[MSG_MAX];
		if (n == 0)
			snprintf(msg, sizeof(msg),
				 "connection closed by the server");
		else
			snprintf(msg, sizeof(msg), "recv: %s", strerror(errno));
		conn_fail(k, msg);
		return;
	}
}

/* The socket connected (or failed to): send STARTUP. */
static void conn_connected(struct conn *k)
{
	int err = 0, one = 1;
	socklen_t len = sizeof(err);
	if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	if (err) {
		char msg[MSG_MAX];
		snprintf(msg, sizeof(msg), "connect: %s", strerror(err));
		conn_fail(k, msg);
		return;
	}
	setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	event_del(k->wev);
	event_add(k->rev, NULL);
	k->state = CONN_STARTUP;
	struct buf *b = &k->client->scratch;
	buf_clear(b);
	if (cql_client_encode_startup(b, 0) != 0) {
		conn_fail(k, err_msg());
		return;
	}
	struct req req = {on_startup, k, NULL, false};
	conn_submit(k, b->data, b->len, &req, true);
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct conn *k = arg;
	struct cql_client *c = k->client;
	(void)fd;
	c->depth++;
	if (k->state == CONN_CONNECTING) {
		conn_connected(k);
	} else if (what & EV_READ) {
		conn_read(k);
	} else if (what & EV_WRITE) {
		conn_flush(k);
	}
	if (--c->depth == 0)
		flush_dirty(c);
}

static void conn_start(struct conn *k)
{
	struct cql_client *c = k->client;
	struct sockaddr_storage ss;
	size_t sl = inet_addr_to_sockaddr(&k->host->addr, &ss);
	char msg[MSG_MAX];
	k->state = CONN_CONNECTING;
	k->connect_deadline_ms = now_ms() + c->cfg.connect_timeout_ms;
	k->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       0);
	if (k->fd < 0) {
		snprintf(msg, sizeof(msg), "socket: %s", strerror(errno));
		conn_fail(k, msg);
		return;
	}
	k->rev = event_new(c->base, k->fd, EV_READ | EV_PERSIST, on_io, k);
	k->wev = event_new(c->base, k->fd, EV_WRITE | EV_PERSIST, on_io, k);
	if (!k->rev || !k->wev) {
		conn_fail(k, "out of memory");
		return;
	}
	if (connect(k->fd, (struct sockaddr *)&ss, (socklen_t)sl) != 0 &&
	    errno != EINPROGRESS) {
		snprintf(msg, sizeof(msg), "connect: %s", strerror(errno));
		conn_fail(k, msg);
		return;
	}
	event_add(k->wev, NULL);
}

/* Closes `k`, fails what it carries, and schedules a reconnect. */
static void conn_fail(struct conn *k, const char *why)
{
	struct cql_client *c = k->client;
	char host[INET_ADDR_STRLEN], msg[MSG_MAX];
	inet_addr_format(&k->host->addr, host, sizeof(host));
	snprintf(msg, sizeof(msg), "%s: %s", host, why);
	snprintf(c->last_error, sizeof(c->last_error), "%s", msg);
	if (k->rev)
		event_free(k->rev);
	if (k->wev)
		event_free(k->wev);
	k->rev = k->wev = NULL;
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	k->in.len = k->in_pos = 0;
	k->out.len = k->out_pos = 0;
	k->state = CONN_DOWN;
	bool was_settled = k->settled;
	k->settled = true;
	/* Take everything first: callbacks may submit new requests. */
	int n = k->hiwater;
	struct pending *p = k->backlog;
	k->backlog = k->backlog_tail = NULL;
	struct slot *old = malloc((size_t)(n ? n : 1) * sizeof(*old));
	if (old)
		memcpy(old, k->slots, (size_t)n * sizeof(*old));
	memset(k->slots, 0, (size_t)n * sizeof(*k->slots));
	int total = c->cfg.max_streams_per_connection;
	for (int i = 0; i < total; i++)
		k->free_ids[i] = (int16_t)(total - 1 - i);
	k->nfree = total;
	k->inflight = 0;
	k->hiwater = 0;
	struct timeval tv = {RETRY_MS / 1000, (RETRY_MS % 1000) * 1000};
	evtimer_add(k->retry, &tv);
	for (int i = 0; old && i < n; i++)
		if (old[i].used && old[i].req.cb)
			old[i].req.cb(old[i].req.arg, CQL_CLIENT_CONNECTION,
				      NULL, msg);
	free(old);
	while (p) {
		struct pending *next = p->next;
		p->req.cb(p->req.arg, CQL_CLIENT_CONNECTION, NULL, msg);
		free(p);
		p = next;
	}
	if (!was_settled)
		connect_progress(c);
}

/* ---- timeouts ------------------------------------------------------------ */

static void conn_expire(struct conn *k, uint64_t now)
{
	if (k->state == CONN_CONNECTING && now >= k->connect_deadline_ms) {
		conn_fail(k, "connect timed out");
		return;
	}
	for (int i = 0; i < k->hiwater; i++) {
		struct slot *s = &k->slots[i];
		if (s->used && s->req.cb && now >= s->deadline_ms) {
			cql_client_cb cb = s->req.cb;
			s->req.cb = NULL; /* the stream stays taken: orphan */
			cb(s->req.arg, CQL_CLIENT_TIMEOUT, NULL,
			   "no response within request_timeout_ms");
		}
	}
	/* Unlink the expired first: callbacks may queue on this backlog. */
	struct pending **pp = &k->backlog, *expired = NULL, **tail = &expired;
	k->backlog_tail = NULL;
	while (*pp) {
		struct pending *p = *pp;
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
		struct pending *p = expired;
		expired = p->next;
		p->req.cb(p->req.arg, CQL_CLIENT_TIMEOUT, NULL,
			  "no stream or connection within request_timeout_ms");
		free(p);
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct cql_client *c = arg;
	uint64_t now = now_ms();
	(void)fd;
	(void)what;
	c->depth++;
	for (size_t h = 0; h < c->nhosts; h++)
		for (int i = 0; i < c->hosts[h]->nconns; i++)
			conn_expire(&c->hosts[h]->conns[i], now);
	if (--c->depth == 0)
		flush_dirty(c);
}

/* ---- hosts and routing --------------------------------------------------- */

static int find_host(const struct cql_client *c, const struct inet_addr *a)
{
	for (size_t i = 0; i < c->nhosts; i++)
		if (inet_addr_eq(&c->hosts[i]->addr, a))
			return (int)i;
	return -1;
}

/* Adds (not yet started) a host, or returns the known one's index. */
static int add_host(struct cql_client *c, const struct inet_addr *a)
{
	int i = find_host(c, a);
	if (i >= 0)
		return i;
	if (c->nhosts >= HOSTS_MAX)
		return err_set(ERR_NOMEM, "more than %d hosts", HOSTS_MAX);
	struct host **hv = realloc(c->hosts, (c->nhosts + 1) * sizeof(*hv));
	if (!hv)
		return err_set(ERR_NOMEM, "hosts");
	c->hosts = hv;
	struct host *h = calloc(1, sizeof(*h));
	int n = c->cfg.connections_per_host;
	if (h)
		h->conns = calloc((size_t)n, sizeof(*h->conns));
	if (!h || !h->conns) {
		free(h);
		return err_set(ERR_NOMEM, "hosts");
	}
	h->addr = *a;
	for (int k = 0; k < n; k++) {
		h->nconns++;
		if (conn_init(&h->conns[k], c, h) != 0) {
			/* Freed with the client: count it as a host. */
			c->hosts[c->nhosts++] = h;
			return -1;
		}
	}
	c->hosts[c->nhosts++] = h;
	return (int)(c->nhosts - 1);
}

static void host_start(struct host *h)
{
	if (h->started)
		return;
	h->started = true;
	for (int i = 0; i < h->nconns; i++)
		conn_start(&h->conns[i]);
}

/* The ready connection of `h` with the fewest requests in flight. */
static struct conn *host_pick(struct host *h)
{
	struct conn *best = NULL;
	for (int j = 0; j < h->nconns; j++) {
		struct conn *k =
			&h->conns[(h->rr + (unsigned)j) % (unsigned)h->nconns];
		if (k->state != CONN_READY)
			continue;
		if (!best || k->inflight < best->inflight)
			best = k;
		if (best->inflight == 0)
			break;
	}
	if (best)
		h->rr++;
	return best;
}

/* A connection for a request preferring `host` (-1: any). When nothing is
 * ready but something is starting, a starting connection (backlog). */
static struct conn *pick_conn(struct cql_client *c, int host)
{
	struct conn *k;
	if (host >= 0 && (k = host_pick(c->hosts[host])) != NULL)
		return k;
	for (size_t i = 0; i < c->nhosts; i++) {
		struct host *h = c->hosts[(c->host_rr + i) % c->nhosts];
		if ((k = host_pick(h)) != NULL) {
			c->host_rr++;
			return k;
		}
	}
	for (size_t i = 0; i < c->nhosts; i++)
		for (int j = 0; j < c->hosts[i]->nconns; j++) {
			k = &c->hosts[i]->conns[j];
			if (k->state == CONN_CONNECTING ||
			    k->state == CONN_STARTUP)
				return k;
		}
	return NULL;
}

static int token_cmp(const void *a, const void *b)
{
	const struct token_entry *x = a, *y = b;
	return x->token < y->token ? -1 : x->token > y->token;
}

int cql_client_host_for_token(const struct cql_client *c, int64_t token)
{
	size_t lo = 0, hi = c->ntokens;
	if (!c->ntokens)
		return -1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->tokens[mid].token < token)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int)c->tokens[lo == c->ntokens ? 0 : lo].host;
}

struct inet_addr cql_client_host_address(const struct cql_client *c,
					 size_t host)
{
	return c->hosts[host]->addr;
}

struct event_base *cql_client_base(const struct cql_client *c)
{
	return c->base;
}

struct cql_client_frame cql_client_current_frame(const struct cql_client *c)
{
	return (struct cql_client_frame){c->cur_opcode, c->cur_flags,
					 c->cur_body};
}

size_t cql_client_host_count(const struct cql_client *c)
{
	return c->nhosts;
}

size_t cql_client_ready_connections(const struct cql_client *c)
{
	size_t n = 0;
	for (size_t i = 0; i < c->nhosts; i++)
		for (int j = 0; j < c->hosts[i]->nconns; j++)
			n += c->hosts[i]->conns[j].state == CONN_READY;
	return n;
}

/* ---- requests ------------------------------------------------------------ */

static void submit(struct cql_client *c, int host, cql_client_cb cb, void *arg,
		   const struct cql_client_prepared *stmt)
{
	struct conn *k = c->closing ? NULL : pick_conn(c, host);
	if (c->closing) {
		defer_fail(c, cb, arg, CQL_CLIENT_CONNECTION, "client closed");
		return;
	}
	if (!k) {
		defer_fail(c, cb, arg, CQL_CLIENT_NO_HOST,
			   c->last_error[0] ? c->last_error
					    : "no host has a ready connection");
		return;
	}
	struct req req = {cb, arg, stmt, false};
	conn_submit(k, c->scratch.data, c->scratch.len, &req, false);
}

static void submit_query(struct cql_client *c, int host, const char *query,
			 uint16_t consistency, const struct cql_value *values,
			 uint16_t nvalues, cql_client_cb cb, void *arg)
{
	buf_clear(&c->scratch);
	if (cql_client_encode_query(&c->scratch, 0, query, consistency, values,
				    nvalues) != 0) {
		defer_fail(c, cb, arg, CQL_CLIENT_BAD_RESPONSE, err_msg());
		return;
	}
	submit(c, host, cb, arg, NULL);
}

void cql_client_query(struct cql_client *c, const char *query,
		      uint16_t consistency, const struct cql_value *values,
		      uint16_t nvalues, cql_client_cb cb, void *arg)
{
	submit_query(c, -1, query, consistency, values, nvalues, cb, arg);
}

int32_t cql_client_prepared_bind_count(const struct cql_client_prepared *p)
{
	return p->bind_count;
}

bool cql_client_routing_token(const struct cql_client_prepared *p,
			      const struct cql_value *values, uint16_t nvalues,
			      int64_t *token)
{
	struct slice parts[16];
	if (p->pk_count <= 0 || p->pk_count > 16)
		return false;
	for (int32_t i = 0; i < p->pk_count; i++) {
		uint16_t ix = p->pk_indexes[i];
		if (ix >= nvalues || values[ix].len < 0)
			return false;
		parts[i] = slice_make(values[ix].ptr, (size_t)values[ix].len);
	}
	if (p->pk_count == 1) {
		*token = murmur3_token(parts[0].ptr, parts[0].len);
		return true;
	}
	return murmur3_compound_token(parts, (size_t)p->pk_count, token) == 0;
}

void cql_client_execute(struct cql_client *c,
			const struct cql_client_prepared *p,
			const struct cql_value *values, uint16_t nvalues,
			uint16_t consistency, cql_client_cb cb, void *arg)
{
	int host = -1;
	int64_t token;
	if (c->cfg.token_aware && c->ntokens &&
	    cql_client_routing_token(p, values, nvalues, &token))
		host = cql_client_host_for_token(c, token);
	buf_clear(&c->scratch);
	if (cql_client_encode_execute(&c->scratch, 0, p->id, p->id_len,
				      consistency, values, nvalues) != 0) {
		defer_fail(c, cb, arg, CQL_CLIENT_BAD_RESPONSE, err_msg());
		return;
	}
	submit(c, host, cb, arg, p);
}

/* ---- prepare on every host ----------------------------------------------- */

struct prepare_op {
	struct cql_client *client;
	cql_client_prepared_cb done;
	void *arg;
	int waiting;
	struct cql_client_prepared *stmt;
	bool failed;
	char query[]; /* kept for re-preparing */
};

static struct cql_client_prepared *
prepared_new(const struct cql_client_prepared_meta *m, const char *query)
{
	struct cql_client_prepared *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->id = malloc(m->id.len);
	p->query = strdup(query);
	p->pk_indexes = calloc((size_t)m->pk_count + 1, sizeof(uint16_t));
	if (!p->id || !p->pk_indexes || !p->query) {
		free(p->query);
		free(p->id);
		free(p->pk_indexes);
		free(p);
		return NULL;
	}
	memcpy(p->id, m->id.ptr, m->id.len);
	p->id_len = (uint16_t)m->id.len;
	p->bind_count = m->bind_count;
	p->pk_count = m->pk_count;
	memcpy(p->pk_indexes, m->pk_indexes,
	       (size_t)m->pk_count * sizeof(uint16_t));
	return p;
}

static void on_prepared(void *arg, enum cql_client_status status,
			const struct cql_client_response *resp,
			const char *message)
{
	struct prepare_op *op = arg;
	struct cql_client *c = op->client;
	op->waiting--;
	bool ok = status == CQL_CLIENT_OK && resp->opcode == CQL_OP_RESULT &&
		  resp->kind == CQL_RESULT_PREPARED;
	if (ok && !op->stmt) {
		op->stmt = prepared_new(&resp->prepared, op->query);
		if (op->stmt) {
			op->stmt->next = c->prepared;
			c->prepared = op->stmt;
		} else {
			ok = false;
			message = "out of memory";
			status = CQL_CLIENT_BAD_RESPONSE;
			resp = NULL;
		}
	}
	if (!ok && !op->failed) {
		op->failed = true;
		op->done(op->arg, NULL,
			 status == CQL_CLIENT_OK && resp &&
					 resp->opcode != CQL_OP_ERROR
				 ? CQL_CLIENT_BAD_RESPONSE
				 : status,
			 resp, message ? message : "not a PREPARED result");
	}
	if (op->waiting == 0) {
		if (!op->failed)
			op->done(op->arg, op->stmt, CQL_CLIENT_OK, NULL, NULL);
		free(op);
	}
}

void cql_client_prepare(struct cql_client *c, const char *query,
			cql_client_prepared_cb done, void *arg)
{
	size_t qlen = strlen(query);
	struct prepare_op *op = calloc(1, sizeof(*op) + qlen + 1);
	if (!op) {
		done(arg, NULL, CQL_CLIENT_NO_HOST, NULL, "out of memory");
		return;
	}
	memcpy(op->query, query, qlen + 1);
	op->client = c;
	op->done = done;
	op->arg = arg;
	/* One PREPARE per host with a ready connection; at least one. */
	op->waiting = 1; /* held while submitting */
	int sent = 0;
	for (size_t i = 0; i < c->nhosts; i++) {
		struct conn *k = host_pick(c->hosts[i]);
		if (!k)
			continue;
		buf_clear(&c->scratch);
		if (cql_client_encode_prepare(&c->scratch, 0, query) != 0)
			break;
		op->waiting++;
		sent++;
		struct req req = {on_prepared, op, NULL, false};
		conn_submit(k, c->scratch.data, c->scratch.len, &req, false);
	}
	if (!sent) {
		buf_clear(&c->scratch);
		if (cql_client_encode_prepare(&c->scratch, 0, query) == 0) {
			op->waiting++;
			submit(c, -1, on_prepared, op, NULL);
		}
	}
	/* Drop the hold; nothing has completed synchronously. */
	op->waiting--;
	if (op->waiting == 0) {
		done(arg, NULL, CQL_CLIENT_BAD_RESPONSE, NULL, err_msg());
		free(op);
	}
}

/* ---- topology ------------------------------------------------------------ */

/* Column index by name in a rows result, or -1. */
static int column_index(const struct cql_client_rows *r, const char *name)
{
	size_t n = strlen(name);
	for (int32_t i = 0; r->columns && i < r->column_count; i++)
		if (r->columns[i].name.len == n &&
		    memcmp(r->columns[i].name.ptr, name, n) == 0)
			return i;
	return -1;
}

/* Appends the tokens of a set<text> to the token map for `host`. */
static int add_tokens(struct cql_client *c, const struct cql_value *v,
		      uint32_t host)
{
	struct cursor cur;
	int32_t n;
	if (v->len < 0)
		return 0;
	cur = cursor_make(v->ptr, (size_t)v->len);
	if (cql_read_int(&cur, &n) != 0 || n < 0 ||
	    (size_t)n * 4 > cursor_left(&cur) || c->ntokens + n > TOKENS_MAX)
		return err_set(ERR_PROTOCOL, "bad tokens set");
	struct token_entry *t =
		realloc(c->tokens, (c->ntokens + (size_t)n + 1) * sizeof(*t));
	if (!t)
		return err_set(ERR_NOMEM, "token map");
	c->tokens = t;
	for (int32_t i = 0; i < n; i++) {
		struct cql_value e;
		char text[32];
		if (cql_read_value(&cur, false, &e) != 0 || e.len <= 0 ||
		    e.len >= (int32_t)sizeof(text))
			return err_set(ERR_PROTOCOL, "bad token");
		memcpy(text, e.ptr, (size_t)e.len);
		text[e.len] = 0;
		char *end;
		errno = 0;
		long long tok = strtoll(text, &end, 10);
		if (errno || *end)
			return err_set(ERR_PROTOCOL, "bad token '%s'", text);
		c->tokens[c->ntokens++] =
			(struct token_entry){(int64_t)tok, host};
	}
	return 0;
}

static int read_inet(const struct cql_value *v, uint16_t port,
		     struct inet_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->port = port;
	if (v->len == 4) {
		out->family = INET_V4;
	} else if (v->len == 16) {
		out->family = INET_V6;
	} else {
		return -1;
	}
	memcpy(out->ip, v->ptr, (size_t)v->len);
	return 0;
}

struct topo_arg {
	struct cql_client *client;
	int host; /* the host asked */
	bool peers;
	bool v2; /* system.peers_v2 (native ports); else system.peers */
};

static void on_topology(void *arg, enum cql_client_status status,
			const struct cql_client_response *resp,
			const char *message);

static void ask(struct cql_client *c, struct topo_arg *t)
{
	const char *q = !t->peers ? "SELECT * FROM system.local"
			: t->v2   ? "SELECT * FROM system.peers_v2"
				  : "SELECT * FROM system.peers";
	submit_query(c, t->host, q, CQL_CL_ONE, NULL, 0, on_topology, t);
}

/* The native address of row i of system.peers(_v2): native_address (v2)
 * or rpc_address, with peer when that is a wildcard; the port from
 * native_port (v2), else the asked host's. 0 or -1. */
static int peer_address(const struct cql_client *c, const struct topo_arg *t,
			const struct cql_client_rows *r, int32_t i,
			struct inet_addr *a)
{
	uint16_t port = c->hosts[t->host]->addr.port;
	int col = column_index(r, t->v2 ? "native_address" : "rpc_address");
	int pcol = t->v2 ? column_index(r, "native_port") : -1;
	int peer = column_index(r, "peer");
	int64_t p;
	if (pcol >= 0 &&
	    cql_client_value_int(cql_client_rows_cell(r, i, pcol), &p) == 0 &&
	    p > 0 && p <= UINT16_MAX)
		port = (uint16_t)p;
	if (col >= 0 &&
	    read_inet(cql_client_rows_cell(r, i, col), port, a) == 0 &&
	    !inet_addr_is_wildcard(a))
		return 0;
	if (peer >= 0 &&
	    read_inet(cql_client_rows_cell(r, i, peer), port, a) == 0)
		return 0;
	return -1;
}

static void on_topology(void *arg, enum cql_client_status status,
			const struct cql_client_response *resp,
			const char *message)
{
	struct topo_arg *t = arg;
	struct cql_client *c = t->client;
	(void)message;
	if (t->v2 && status == CQL_CLIENT_OK && resp->opcode == CQL_OP_ERROR) {
		/* A server without peers_v2 (Cassandra 3): ask system.peers. */
		t->v2 = false;
		ask(c, t);
		return;
	}
	if (status == CQL_CLIENT_OK && resp->opcode == CQL_OP_RESULT &&
	    resp->kind == CQL_RESULT_ROWS) {
		const struct cql_client_rows *r = &resp->rows;
		int tok = column_index(r, "tokens");
		for (int32_t i = 0; tok >= 0 && i < r->row_count; i++) {
			int h = t->host;
			if (t->peers) {
				struct inet_addr a;
				if (peer_address(c, t, r, i, &a) != 0)
					continue;
				if (!c->cfg.discover_peers &&
				    find_host(c, &a) < 0)
					continue;
				h = add_host(c, &a);
				if (h < 0)
					continue;
				host_start(c->hosts[h]);
			}
			add_tokens(c, cql_client_rows_cell(r, i, tok),
				   (uint32_t)h);
		}
	}
	free(t);
	if (--c->topology_waiting == 0) {
		qsort(c->tokens, c->ntokens, sizeof(*c->tokens), token_cmp);
		c->topology_done = true;
		connect_progress(c);
	}
}

static void ask_topology(struct cql_client *c, int host)
{
	c->topology_asked = true;
	c->topology_waiting = 2;
	for (int i = 0; i < 2; i++) {
		struct topo_arg *t = calloc(1, sizeof(*t));
		if (!t) {
			c->topology_waiting--;
			continue;
		}
		t->client = c;
		t->host = host;
		t->peers = i == 1;
		t->v2 = t->peers;
		ask(c, t);
	}
	if (c->topology_waiting == 0) {
		c->topology_done = true;
		connect_progress(c);
	}
}

/* Called when a connection settles or the topology arrives. */
static void connect_progress(struct cql_client *c)
{
	if (!c->done)
		return;
	if (!c->topology_asked) {
		for (size_t i = 0; i < c->nhosts; i++)
			for (int j = 0; j < c->hosts[i]->nconns; j++)
				if (c->hosts[i]->conns[j].state == CONN_READY) {
					ask_topology(c, (int)i);
					return;
				}
	}
	for (size_t i = 0; i < c->nhosts; i++)
		for (int j = 0; j < c->hosts[i]->nconns; j++)
			if (c->hosts[i]->started &&
			    !c->hosts[i]->conns[j].settled)
				return;
	if (c->topology_asked && !c->topology_done)
		return;
	cql_client_done_cb done = c->done;
	c->done = NULL;
	if (cql_client_ready_connections(c) > 0)
		done(c->done_arg, 0, NULL);
	else
		done(c->done_arg, -1,
		     c->last_error[0] ? c->last_error : "no connection");
}

void cql_client_connect(struct cql_client *c, cql_client_done_cb done,
			void *arg)
{
	c->done = done;
	c->done_arg = arg;
	for (size_t i = 0; i < c->nhosts; i++)
		host_start(c->hosts[i]);
	/* Settles later, from connection callbacks. */
}

/* ---- life cycle ---------------------------------------------------------- */

struct cql_client *cql_client_new(struct event_base *base,
				  const struct cql_client_config *config)
{
	if (config->contact_count == 0)
		return err_set(ERR_INVALID, "no contact points"), NULL;
	if (config->connections_per_host < 1 ||
	    config->connections_per_host > 4096)
		return err_set(ERR_INVALID,
			       "connections_per_host out of range"),
		       NULL;
	if (config->max_streams_per_connection < 1 ||
	    config->max_streams_per_connection > 32768)
		return err_set(ERR_INVALID,
			       "max_streams_per_connection out of range"),
		       NULL;
	struct cql_client *c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(ERR_NOMEM, "client"), NULL;
	c->base = base;
	c->cfg = *config;
	c->cfg.contact_points = NULL;
	c->tick = event_new(base, -1, EV_PERSIST, on_tick, c);
	c->defer_ev = event_new(base, -1, 0, on_defer, c);
	c->flush_ev = event_new(base, -1, 0, on_flush, c);
	if (!c->tick || !c->defer_ev || !c->flush_ev) {
		cql_client_delete(c);
		return err_set(ERR_NOMEM, "client events"), NULL;
	}
	struct timeval tv = {0, TICK_MS * 1000};
	event_add(c->tick, &tv);
	for (size_t i = 0; i < config->contact_count; i++) {
		if (add_host(c, &config->contact_points[i]) < 0) {
			cql_client_delete(c);
			return NULL;
		}
	}
	return c;
}

void cql_client_delete(struct cql_client *c)
{
	if (!c)
		return;
	c->closing = true;
	/* Callbacks may submit again; those fail too, until nothing is left. */
	for (bool any = true; any;) {
		any = false;
		for (size_t i = 0; i < c->nhosts; i++) {
			struct host *h = c->hosts[i];
			for (int j = 0; j < h->nconns; j++) {
				struct conn *k = &h->conns[j];
				if (k->state != CONN_DOWN || k->backlog ||
				    k->inflight) {
					conn_fail(k, "client closed");
					any = true;
				}
			}
		}
		if (c->deferred) {
			on_defer(-1, 0, c);
			any = true;
		}
	}
	for (size_t i = 0; i < c->nhosts; i++) {
		struct host *h = c->hosts[i];
		for (int j = 0; j < h->nconns; j++) {
			struct conn *k = &h->conns[j];
			if (k->retry)
				event_free(k->retry);
			for (int f = 0;
			     k->frames && f < c->cfg.max_streams_per_connection;
			     f++)
				buf_free(&k->frames[f]);
			free(k->frames);
			free(k->slots);
			free(k->free_ids);
			buf_free(&k->in);
			buf_free(&k->out);
			arena_destroy(&k->arena);
		}
		free(h->conns);
		free(h);
	}
	free(c->hosts);
	while (c->prepared) {
		struct cql_client_prepared *p = c->prepared;
		c->prepared = p->next;
		free(p->id);
		free(p->pk_indexes);
		free(p->query);
		free(p);
	}
	free(c->tokens);
	if (c->tick)
		event_free(c->tick);
	if (c->defer_ev)
		event_free(c->defer_ev);
	if (c->flush_ev)
		event_free(c->flush_ev);
	buf_free(&c->scratch);
	free(c);
}
