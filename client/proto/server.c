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
 */
#define LOG_MODULE "client"
#include "client/proto/server.h"

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

#define OUTPUT_HIGH_WATER (4u << 20)
#define READ_CHUNK        (16u << 10) /* bytes asked of one read */
#define BUF_KEEP          (4u << 10)  /* larger emptied buffers are freed */

enum {
	EVENT_TOPOLOGY = 1 << 0,
	EVENT_STATUS = 1 << 1,
	EVENT_SCHEMA = 1 << 2,
};

struct cql_conn {
	struct cql_server *srv;
	evutil_socket_t fd;
	struct event *rev;  /* readable; added while reading */
	struct event *wev;  /* writable; added while write_armed */
	struct event *kick; /* reruns the frame loop after a pause */
	struct buf in, out; /* in: bytes from in_pos on; out: from out_pos */
	size_t in_pos, out_pos;
	struct event *timer; /* handshake, then idle */
	struct inet_addr peer;
	/* TLS (client_encryption_options): the session once the client
	 * speaks TLS; `sniff` while an optional-TLS port has not seen the
	 * first byte yet. A read or write that OpenSSL answered "wants the
	 * other direction" waits for that direction's event. */
	SSL *ssl;
	bool sniff;
	bool read_wants_write, write_wants_read;
	uint8_t version; /* fixed by STARTUP; 0 before */
	bool ready;
	/* Logged in (or no authenticator). Until then only AUTH_RESPONSE is
	 * taken, one at a time. */
	bool authenticated;
	bool auth_pending;
	char *user;                         /* the logged-in role, or NULL */
	char *driver_name, *driver_version; /* from STARTUP, or NULL */
	uint64_t request_count;             /* requests taken */
	bool lz4;
	/* v5: set once the answer to STARTUP is queued; from then on bytes
	 * in both directions are segments. Envelopes cut from segments wait
	 * in `env` (from env_pos on) until dispatched. */
	bool segments;
	struct buf env;
	size_t env_pos;
	/* v5: replies queued since the last flush, not yet in segments; the
	 * flush packs them (several envelopes to a segment) */
	struct buf seg_pend;
	bool closed;  /* socket gone; struct lives while refs > 0 */
	bool closing; /* flushing a last reply, then closing */
	bool paused_requests;
	bool paused_output;
	bool reading;     /* rev added */
	bool dirty;       /* on the server's list of replies to flush */
	bool write_armed; /* wev added: the kernel took only part */
	unsigned events;
	int inflight;
	uint64_t inflight_bytes; /* this connection's share of the server's */
	int refs; /* 1 for the socket, 1 per request, 1 while read
		     callbacks run, 1 while dirty */
	uint64_t last_request_ms; /* loop time of the last frame, once ready */
	char *keyspace;
	struct cql_conn *prev, *next;
	struct cql_conn *dirty_next;
};

struct cql_request {
	struct cql_conn *conn; /* NULL for a detached request */
	cql_reply_fn detached_reply;
	cql_keyspace_fn detached_keyspace;
	void *detached_arg;
	uint8_t version;
	int16_t stream;
	uint8_t *body;
	size_t accounted; /* bytes counted in srv->inflight_bytes */
	char *keyspace;   /* v5: the request's keyspace flag, or NULL */
	/* v5 EXECUTE: the result_metadata_id the client sent, checked
	 * against the reply's rows (METADATA_CHANGED) */
	bool check_metadata;
	uint8_t metadata_id_len;
	uint8_t metadata_id[CQL_METADATA_ID_LEN];
};

struct cql_server {
	struct event_base *base;
	struct evconnlistener *listener;
	struct cql_server_config cfg;
	char cql_version[16];
	struct cql_executor exec;
	struct cql_authenticator auth;
	bool has_auth;
	struct cql_conn *conns;
	/* Connections with replies queued in this loop turn, written by
	 * one flush event once the turn's ready callbacks have run (one
	 * writev per connection per turn, no EV_WRITE round trip). */
	struct cql_conn *dirty;
	struct event *flush_ev;
	struct buf scratch; /* READ_CHUNK bytes: where reads land */
	struct inet_addr bound;
	struct cql_server_stats stats;
};

static void conn_update_reading(struct cql_conn *c);

/* ---- connection lifetime ------------------------------------------------- */

static void conn_unref(struct cql_conn *c)
{
	if (--c->refs > 0)
		return;
	free(c->keyspace);
	free(c->user);
	free(c->driver_name);
	free(c->driver_version);
	SSL_free(c->ssl);
	free(c);
}

static void conn_close(struct cql_conn *c, const char *why)
{
	if (c->closed)
		return;
	char peer[INET_ADDR_STRLEN];
	LOG_DEBUG("closing client %s: %s",
		  inet_addr_format(&c->peer, peer, sizeof(peer)), why);
	c->closed = true;
	/* Safe from these events' own callbacks: libevent does not touch an
	 * event once its callback has been called. */
	event_free(c->rev);
	event_free(c->wev);
	event_free(c->kick);
	event_free(c->timer);
	c->rev = c->wev = c->kick = c->timer = NULL;
	buf_free(&c->in);
	buf_free(&c->out);
	buf_free(&c->env);
	buf_free(&c->seg_pend);
	c->in_pos = c->out_pos = c->env_pos = 0;
	evutil_closesocket(c->fd);
	c->fd = -1;
	struct cql_server *s = c->srv;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->stats.connections--;
	/* Requests still out no longer count against the server: their
	 * replies are dropped without touching it. */
	s->stats.inflight_bytes -= c->inflight_bytes;
	c->inflight_bytes = 0;
	conn_unref(c);
}

static size_t out_queued(const struct cql_conn *c)
{
	return c->out.len - c->out_pos + c->seg_pend.len;
}

/* Drops the *pos bytes already used from the front of `b`. */
static void buf_drop_used(struct buf *b, size_t *pos)
{
	memmove(b->data, b->data + *pos, b->len - *pos);
	b->len -= *pos;
	*pos = 0;
}

/* Empties `b`, freeing its memory when it grew past BUF_KEEP. */
static void buf_reset_keep(struct buf *b, size_t *pos)
{
	*pos = 0;
	if (b->cap > BUF_KEEP)
		buf_free(b);
	else
		b->len = 0;
}

/* Something was queued: flush at the end of the loop's turn (or when the
 * socket takes more), pause reading past the high water mark. */
static void conn_queued(struct cql_conn *c)
{
	if (!c->dirty && !c->write_armed) {
		struct cql_server *s = c->srv;
		c->dirty = true;
		c->refs++;
		if (!s->dirty)
			event_active(s->flush_ev, EV_WRITE, 1);
		c->dirty_next = s->dirty;
		s->dirty = c;
	}
	if (out_queued(c) > OUTPUT_HIGH_WATER) {
		c->paused_output = true;
		conn_update_reading(c);
	}
}

static void conn_write(struct cql_conn *c, const uint8_t *p, size_t n)
{
	if (c->closed)
		return;
	/* Reclaim what was written before growing. */
	if (c->out_pos && c->out.len + n > c->out.cap)
		buf_drop_used(&c->out, &c->out_pos);
	if (buf_append(&c->out, p, n) != 0) {
		conn_close(c, "out of memory queueing a reply");
		return;
	}
	conn_queued(c);
}

/* v5: an envelope waits in `seg_pend` for the flush to put it in a
 * segment with the others of this turn (conn_pack_segments). */
static void conn_send_segments(struct cql_conn *c, const uint8_t *frame,
			       size_t len)
{
	if (c->closed)
		return;
	if (buf_append(&c->seg_pend, frame, len) != 0) {
		conn_close(c, "out of memory queueing a reply");
		return;
	}
	conn_queued(c);
}

/* v5, before a flush: the queued envelopes as segments, as many whole
 * envelopes to a self-contained segment as fit in its payload (Cassandra
 * packs them too), an envelope larger than that alone, split. Each
 * segment costs the client a CRC24 and a CRC32 (the Python driver's are
 * Python code), so a burst of small replies goes out as one. */
static void conn_pack_segments(struct cql_conn *c)
{
	const uint8_t *p = c->seg_pend.data;
	size_t n = c->seg_pend.len, group = 0, off = 0;
	if (!n)
		return;
	if (c->out_pos)
		buf_drop_used(&c->out, &c->out_pos);
	int rc = 0;
	while (off + group < n && !rc) {
		const uint8_t *e = p + off + group;
		/* envelopes are whole: each was queued by one send */
		size_t rest = n - off - group;
		size_t len = rest < CQL_HEADER_LEN
				     ? rest
				     : CQL_HEADER_LEN + be32_load(e + 5);
		if (len > rest)
			len = rest; /* never: each send queues a whole one */
		if (group && group + len > CQL_SEGMENT_MAX_PAYLOAD) {
			rc = cql_segment_encode(&c->out, p + off, group,
						c->lz4);
			off += group;
			group = 0;
			continue;
		}
		group += len;
		if (group > CQL_SEGMENT_MAX_PAYLOAD) { /* one, split */
			rc = cql_segment_encode(&c->out, p + off, group,
						c->lz4);
			off += group;
			group = 0;
		}
	}
	if (!rc && group)
		rc = cql_segment_encode(&c->out, p + off, group, c->lz4);
	size_t none = 0;
	buf_reset_keep(&c->seg_pend, &none);
	if (rc)
		conn_close(c, "out of memory framing a reply");
}

/* A frame as it is (v3/v4) or in segments (v5 once set up). */
static void conn_send_plain(struct cql_conn *c, const uint8_t *frame,
			    size_t len)
{
	if (c->segments)
		conn_send_segments(c, frame, len);
	else
		conn_write(c, frame, len);
}

/* Writes a reply frame, compressing its body when LZ4 was negotiated (v5:
 * in segments, which carry the compression). */
static void conn_send_frame(struct cql_conn *c, const uint8_t *frame,
			    size_t len)
{
	if (c->segments) {
		conn_send_segments(c, frame, len);
		return;
	}
	if (!c->lz4 || len <= CQL_HEADER_LEN) {
		conn_write(c, frame, len);
		return;
	}
	struct buf out;
	buf_init(&out);
	if (buf_append(&out, frame, CQL_HEADER_LEN) != 0 ||
	    cql_lz4_compress(frame + CQL_HEADER_LEN, len - CQL_HEADER_LEN,
			     &out) != 0) {
		buf_free(&out);
		conn_close(c, "out of memory compressing a reply");
		return;
	}
	out.data[1] |= CQL_FLAG_COMPRESSION;
	be32_store(out.data + 5, (uint32_t)(out.len - CQL_HEADER_LEN));
	conn_write(c, out.data, out.len);
	buf_free(&out);
}

static void conn_set_reading(struct cql_conn *c, bool on)
{
	if (c->closed || c->reading == on)
		return;
	c->reading = on;
	if (on) {
		event_add(c->rev, NULL);
		/* bytes OpenSSL read already (decrypted, or read ahead): no
		 * socket event brings them */
		if (c->ssl && SSL_has_pending(c->ssl))
			event_active(c->rev, EV_READ, 1);
	} else {
		event_del(c->rev);
	}
}

/* ---- socket or TLS I/O --------------------------------------------------- */

/* OpenSSL's verdict on a read or write: -1 with errno EAGAIN when it must
 * wait (for the other direction too: the flags say which), 0 when the
 * peer closed, -1 with errno EIO on a failure. */
static ssize_t tls_result(struct cql_conn *c, int r, bool reading)
{
	int e = SSL_get_error(c->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		bool other = reading ? e == SSL_ERROR_WANT_WRITE
				     : e == SSL_ERROR_WANT_READ;
		if (reading)
			c->read_wants_write = other;
		else
			c->write_wants_read = other;
		if (other && reading && !c->write_armed)
			event_add(c->wev, NULL);
		errno = EAGAIN;
		return -1;
	}
	if (e == SSL_ERROR_ZERO_RETURN)
		return 0;
	if (e == SSL_ERROR_SYSCALL && errno == 0)
		return 0; /* closed without close_notify */
	unsigned long why = ERR_get_error();
	char text[INET_ADDR_STRLEN], reason[200] = "";
	if (why)
		ERR_error_string_n(why, reason, sizeof(reason));
	LOG_INFO("TLS error with client %s: %s",
		 inet_addr_format(&c->peer, text, sizeof(text)),
		 reason[0] ? reason : "connection reset");
	ERR_clear_error();
	errno = EIO;
	return -1;
}

static ssize_t conn_recv(struct cql_conn *c, uint8_t *p, size_t cap)
{
	if (!c->ssl)
		return recv(c->fd, p, cap, 0);
	c->read_wants_write = false;
	int r = SSL_read(c->ssl, p, (int)cap);
	return r > 0 ? r : tls_result(c, r, true);
}

static ssize_t conn_send(struct cql_conn *c, const uint8_t *p, size_t n)
{
	if (!c->ssl)
		return send(c->fd, p, n, MSG_NOSIGNAL);
	c->write_wants_read = false;
	int r = SSL_write(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
	return r > 0 ? r : tls_result(c, r, false);
}

/* An optional-TLS port: a TLS ClientHello starts with a handshake record
 * (0x16); a CQL frame with its version byte (0x03-0x05, 0x4x for v5
 * beta). 0 when decided, 1 when no byte has come yet, -1 closed. */
static int conn_sniff(struct cql_conn *c)
{
	uint8_t b;
	ssize_t n = recv(c->fd, &b, 1, MSG_PEEK);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		       errno != EINTR)) {
		conn_close(c, n == 0 ? "closed by client" : "socket error");
		return -1;
	}
	if (n < 0)
		return 1;
	c->sniff = false;
	if (b != 0x16)
		return 0;
	c->ssl = SSL_new(c->srv->cfg.tls);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
		conn_close(c, "out of memory for TLS");
		return -1;
	}
	SSL_set_accept_state(c->ssl);
	SSL_set_read_ahead(c->ssl, 1); /* records in one recv, not two */
	return 0;
}

/* Answers with a Protocol_error and closes once it is flushed. */
static void conn_fail(struct cql_conn *c, uint8_t version, int16_t stream,
		      const char *msg)
{
	struct buf b;
	char peer[INET_ADDR_STRLEN];
	LOG_INFO("protocol error from client %s: %s",
		 inet_addr_format(&c->peer, peer, sizeof(peer)), msg);
	c->srv->stats.protocol_errors++;
	buf_init(&b);
	if (cql_encode_error(&b, version, stream, CQL_ERR_PROTOCOL, msg) == 0)
		conn_send_plain(c, b.data, b.len);
	buf_free(&b);
	if (c->closed)
		return;
	c->closing = true;
	conn_set_reading(c, false);
	if (out_queued(c) == 0)
		conn_close(c, "protocol error");
}

static void conn_update_reading(struct cql_conn *c)
{
	if (c->closed || c->closing)
		return;
	conn_set_reading(c, !c->paused_requests && !c->paused_output);
}

/* After the output drained (fully or to below the high water mark). */
static void conn_drained(struct cql_conn *c)
{
	if (c->closing && out_queued(c) == 0) {
		conn_close(c, "protocol error");
		return;
	}
	if (c->paused_output && out_queued(c) < OUTPUT_HIGH_WATER / 2) {
		c->paused_output = false;
		conn_update_reading(c);
		/* Frames may be waiting already; run the frame loop from the
		 * loop, not from here. */
		event_active(c->kick, EV_READ, 1);
	}
}

/* Writes what is queued; what the kernel does not take waits for
 * EV_WRITE. */
static void conn_flush(struct cql_conn *c)
{
	conn_pack_segments(c);
	if (c->closed)
		return;
	while (out_queued(c)) {
		ssize_t n =
			conn_send(c, c->out.data + c->out_pos, out_queued(c));
		if (n > 0) {
			c->out_pos += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		conn_close(c, "socket error");
		return;
	}
	bool left = out_queued(c) > 0;
	if (!left)
		buf_reset_keep(&c->out, &c->out_pos);
	/* TLS: a write waiting for input resumes from the read event */
	bool arm = left && !c->write_wants_read;
	if (arm != c->write_armed) {
		c->write_armed = arm;
		if (arm)
			event_add(c->wev, NULL);
		else
			event_del(c->wev);
	}
	if (!left)
		conn_drained(c);
}

static void conn_on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cql_conn *c = arg;
	c->refs++;
	if (c->read_wants_write) {
		/* a TLS read (the handshake, say) waited to write */
		c->read_wants_write = false;
		if (!c->write_armed)
			event_del(c->wev);
		if (c->reading)
			event_active(c->rev, EV_READ, 1);
	}
	conn_flush(c);
	conn_unref(c);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cql_server *s = arg;
	while (s->dirty) {
		struct cql_conn *c = s->dirty;
		s->dirty = c->dirty_next;
		c->dirty = false;
		if (!c->closed && !c->write_armed)
			conn_flush(c);
		conn_unref(c);
	}
}

/* The loop's time of this turn, in ms (no system call). */
static uint64_t turn_ms(struct cql_server *s)
{
	struct timeval tv;
	event_base_gettimeofday_cached(s->base, &tv);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

static void conn_timer_in(struct cql_conn *c, uint64_t ms)
{
	struct timeval tv = {.tv_sec = (time_t)(ms / 1000),
			     .tv_usec = (suseconds_t)(ms % 1000) * 1000};
	evtimer_add(c->timer, &tv);
}

/* The handshake timer, then the idle timer. Requests do not touch the
 * timer (that would be an event_add per request): they note the time, and
 * the timer, when it fires early, waits for the rest of the idle period. */
static void conn_on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cql_conn *c = arg;
	if (!c->ready || !c->authenticated) {
		conn_close(c, c->ready ? "not authenticated within the "
					 "handshake timeout"
				       : "no STARTUP within the handshake "
					 "timeout");
		return;
	}
	uint64_t now = turn_ms(c->srv);
	/* The cached time follows the wall clock: a step back is no idling. */
	uint64_t idle = now > c->last_request_ms ? now - c->last_request_ms : 0;
	uint64_t limit = c->srv->cfg.idle_timeout_ms;
	if (idle >= limit && c->inflight == 0)
		conn_close(c, "idle timeout");
	else
		conn_timer_in(c, idle >= limit ? limit : limit - idle);
}

static void conn_arm_timer(struct cql_conn *c)
{
	uint64_t ms = c->ready && c->authenticated
			      ? c->srv->cfg.idle_timeout_ms
			      : c->srv->cfg.handshake_timeout_ms;
	c->last_request_ms = turn_ms(c->srv);
	if (ms == 0)
		evtimer_del(c->timer);
	else
		conn_timer_in(c, ms);
}

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
		conn_fail(c, h->version, h->stream,
			  "Unexpected message STARTUP, the connection is "
			  "already initialized");
		return -1;
	}
	if (cql_decode_startup(body, &a, &opts, &n) != 0) {
		arena_destroy(&a);
		conn_fail(c, h->version, h->stream, err_msg());
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
		conn_fail(c, h->version, h->stream, msg);
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
			conn_write(c, b.data, b.len);
		}
	} else if (cql_encode_ready(&b, h->version, h->stream) == 0) {
		conn_write(c, b.data, b.len); /* never compressed */
	}
	buf_free(&b);
	c->version = h->version;
	c->ready = true;
	c->authenticated = !c->srv->has_auth;
	c->lz4 = lz4;
	/* v5: everything after this answer is in segments, both ways */
	c->segments = h->version >= 5;
	conn_arm_timer(c);
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
	conn_unref(at->conn);
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
			conn_send_frame(c, b.data, b.len);
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
			conn_close(c, "out of memory");
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
			conn_send_frame(c, b.data, b.len);
		}
		buf_free(&b);
		conn_arm_timer(c); /* the idle timer from now on */
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
		conn_fail(c, h->version, h->stream, err_msg());
		return;
	}
	struct cql_auth_attempt *at = zcalloc(1, sizeof(*at));
	if (!at) {
		conn_close(c, "out of memory");
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
		conn_fail(c, h->version, h->stream, err_msg());
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
			conn_fail(c, h->version, h->stream, msg);
			return -1;
		}
		mask |= bit;
	}
	arena_destroy(&a);
	c->events |= mask;
	struct buf b;
	buf_init(&b);
	if (cql_encode_ready(&b, h->version, h->stream) == 0)
		conn_send_frame(c, b.data, b.len);
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
			conn_send_frame(c, b.data, b.len);
		buf_free(&b);
		free(frame_body);
		return;
	}
	struct cql_request *req = zcalloc(1, sizeof(*req));
	if (!req) {
		free(frame_body);
		conn_close(c, "out of memory");
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
			conn_close(c, "out of memory");
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
		conn_update_reading(c);
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
		conn_send_frame(c, b.data, b.len);
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
static void dispatch(struct cql_conn *c, const struct cql_header *h,
		     uint8_t *body, size_t len)
{
	char msg[128];
	if (h->flags & CQL_FLAG_COMPRESSION) {
		if (c->segments) {
			free(body);
			conn_fail(c, h->version, h->stream,
				  "Received a compressed envelope: protocol v5 "
				  "compresses segments, not envelopes");
			return;
		}
		if (!c->lz4) {
			free(body);
			conn_fail(c, h->version, h->stream,
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
			conn_fail(c, h->version, h->stream, err_msg());
			return;
		}
		free(body);
		body = buf_steal(&raw, &len);
		if (!body && !(body = malloc(1))) { /* an empty body */
			conn_fail(c, h->version, h->stream, "out of memory");
			return;
		}
	}
	struct cursor cur = cursor_make(body, len);
	if ((h->flags & CQL_FLAG_CUSTOM_PAYLOAD) &&
	    cql_skip_custom_payload(&cur) != 0) {
		free(body);
		conn_fail(c, h->version, h->stream, err_msg());
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
			conn_fail(c, h->version, h->stream, msg);
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
			conn_send_frame(c, b.data, b.len);
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
		conn_fail(c, h->version, h->stream, msg);
		return;
	}
	if (!c->ready) {
		snprintf(msg, sizeof(msg),
			 "Unexpected message %s, expecting STARTUP or OPTIONS",
			 name);
		free(body);
		conn_fail(c, h->version, h->stream, msg);
		return;
	}
	if (h->opcode == CQL_OP_REGISTER) {
		handle_register(c, h, &cur);
		free(body);
		return;
	}
	if (h->opcode == CQL_OP_AUTH_RESPONSE) {
		free(body);
		conn_fail(c, h->version, h->stream,
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

/* ---- reading ------------------------------------------------------------- */

static size_t conn_read_frames(struct cql_conn *c, const uint8_t *p, size_t n);
static void conn_cut_envelopes(struct cql_conn *c);

/* Frames from the connection's own buffer (left over from earlier reads),
 * and v5 envelopes waiting since flow control paused. */
static void conn_read_own(struct cql_conn *c)
{
	if (c->in_pos == c->in.len) {
		if (c->segments)
			conn_cut_envelopes(c);
		return; /* nothing left over (the buffer may be freed) */
	}
	size_t used = conn_read_frames(c, c->in.data + c->in_pos,
				       c->in.len - c->in_pos);
	if (c->closed)
		return;
	c->in_pos += used;
	if (c->in_pos == c->in.len)
		buf_reset_keep(&c->in, &c->in_pos);
}

/* One read per readable event: into the server's buffer when this
 * connection has nothing left over (the common case), else after what it
 * has. Whole frames are dispatched straight from where they landed. */
static void conn_on_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct cql_conn *c = arg;
	struct cql_server *s = c->srv;
	/* Callbacks never nest (nothing on the loop runs the loop), so the
	 * server's buffer is free whenever a read starts. */
	if (c->sniff && conn_sniff(c) != 0)
		return;
	if (c->write_wants_read) {
		c->write_wants_read = false;
		c->refs++;
		conn_flush(c);
		bool gone = c->closed;
		conn_unref(c);
		if (gone)
			return;
	}
	bool own = c->in.len > c->in_pos;
	struct buf *b = own ? &c->in : &s->scratch;
	if (own && c->in_pos)
		buf_drop_used(&c->in, &c->in_pos);
	if (buf_reserve(b, READ_CHUNK) != 0) {
		conn_close(c, "out of memory reading");
		return;
	}
	(void)fd;
	ssize_t n = conn_recv(c, b->data + b->len, READ_CHUNK);
	if (n <= 0) {
		if (n == 0)
			conn_close(c, "closed by client");
		else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			 errno != EINTR)
			conn_close(c,
				   errno == EIO ? "TLS error" : "socket error");
		return;
	}
	c->refs++; /* dispatch may close the connection under us */
	if (own) {
		c->in.len += (size_t)n;
		conn_read_own(c);
	} else {
		size_t used = conn_read_frames(c, s->scratch.data, (size_t)n);
		if (!c->closed && used < (size_t)n &&
		    buf_append(&c->in, s->scratch.data + used,
			       (size_t)n - used) != 0)
			conn_close(c, "out of memory reading");
	}
	/* TLS: more bytes in OpenSSL (a record's rest, or records read
	 * ahead) than one read took */
	if (!c->closed && c->ssl && c->reading && SSL_has_pending(c->ssl))
		event_active(c->rev, EV_READ, 1);
	conn_unref(c);
}

static void conn_on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cql_conn *c = arg;
	c->refs++;
	conn_read_own(c);
	conn_unref(c);
}

/* Cuts and dispatches the whole frames at the start of p[0, n) until flow
 * control or a closing connection says stop, or the connection switched
 * to segments (the rest is segments). Returns the bytes used. */
static size_t conn_cut_frames(struct cql_conn *c, const uint8_t *p, size_t n,
			      bool in_segments)
{
	size_t pos = 0;
	while (!c->closed && !c->closing && !c->paused_requests &&
	       !c->paused_output && c->segments == in_segments &&
	       n - pos >= CQL_HEADER_LEN) {
		const uint8_t *hb = p + pos;
		struct cql_header h;
		char msg[160];
		switch (cql_header_decode(hb, c->srv->cfg.max_frame_size, &h)) {
		case CQL_HEADER_OK:
			break;
		case CQL_HEADER_BAD_VERSION: {
			struct buf b;
			buf_init(&b);
			c->srv->stats.protocol_errors++;
			if (cql_encode_version_error(&b, h.stream, h.version) ==
			    0)
				conn_send_plain(c, b.data, b.len);
			buf_free(&b);
			if (!c->closed) {
				c->closing = true;
				conn_set_reading(c, false);
			}
			return n; /* the rest is dropped */
		}
		case CQL_HEADER_BAD_DIRECTION:
			conn_fail(c, h.version, h.stream,
				  "Invalid message direction: a response frame "
				  "was sent to the server");
			return n; /* the rest is dropped */
		case CQL_HEADER_TOO_LARGE:
			snprintf(
				msg, sizeof(msg),
				"Request is too big: length %u exceeds maximum "
				"allowed length %u.",
				h.length, c->srv->cfg.max_frame_size);
			conn_fail(c, h.version, h.stream, msg);
			return n; /* the rest is dropped */
		}
		if (c->ready && h.version != c->version) {
			snprintf(msg, sizeof(msg),
				 "Invalid message version. Got %u but previous "
				 "messages on this connection had version %u",
				 h.version, c->version);
			conn_fail(c, c->version, h.stream, msg);
			return n; /* the rest is dropped */
		}
		if (n - pos < CQL_HEADER_LEN + (size_t)h.length)
			break; /* wait for the rest of the body */
		/* never NULL, even for an empty body: the decoders and the
		 * executor add offsets to it (NULL + 0 is undefined) */
		uint8_t *body = malloc(h.length ? h.length : 1);
		if (!body) {
			conn_close(c, "out of memory");
			break;
		}
		memcpy(body, hb + CQL_HEADER_LEN, h.length);
		pos += CQL_HEADER_LEN + (size_t)h.length;
		if (c->ready)
			c->last_request_ms = turn_ms(c->srv);
		dispatch(c, &h, body, h.length);
	}
	return pos;
}

/* v5: the envelopes cut from segments so far. */
static void conn_cut_envelopes(struct cql_conn *c)
{
	if (c->env_pos == c->env.len)
		return;
	size_t used = conn_cut_frames(c, c->env.data + c->env_pos,
				      c->env.len - c->env_pos, true);
	if (c->closed)
		return;
	c->env_pos += used;
	if (c->env_pos == c->env.len)
		buf_reset_keep(&c->env, &c->env_pos);
	else if (c->env_pos > c->env.len - c->env_pos)
		buf_drop_used(&c->env, &c->env_pos); /* keep appends cheap */
}

/* v5: takes the whole segments at the start of p[0, n) (their payloads go
 * to `env`) and dispatches the envelopes they complete. A corrupt segment
 * (a CRC that does not match) closes the connection after a
 * Protocol_error, as Cassandra does. Returns the bytes used. */
static size_t conn_read_segments(struct cql_conn *c, const uint8_t *p, size_t n)
{
	size_t pos = 0;
	/* envelopes held back by flow control go first */
	conn_cut_envelopes(c);
	while (!c->closed && !c->closing && !c->paused_requests &&
	       !c->paused_output && pos < n) {
		size_t used = 0;
		bool whole;
		if (c->env_pos && c->env_pos == c->env.len)
			buf_reset_keep(&c->env, &c->env_pos);
		enum cql_segment_status st = cql_segment_decode(
			p + pos, n - pos, c->lz4, &c->env, &used, &whole);
		if (st == CQL_SEGMENT_PARTIAL)
			break;
		if (st == CQL_SEGMENT_CORRUPT) {
			char msg[ERR_MSG_MAX];
			snprintf(msg, sizeof(msg), "%s", err_msg());
			conn_fail(c, c->version, 0, msg);
			return n; /* the rest is dropped */
		}
		pos += used;
		/* an envelope may not outgrow the frame limit while its
		 * header is still incomplete: cut what is whole */
		conn_cut_envelopes(c);
	}
	return pos;
}

static size_t conn_read_frames(struct cql_conn *c, const uint8_t *p, size_t n)
{
	size_t pos = 0;
	if (!c->segments)
		pos = conn_cut_frames(c, p, n, false);
	if (c->segments && !c->closed && !c->closing)
		pos += conn_read_segments(c, p + pos, n - pos);
	return pos;
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
			conn_send_frame(c, changed.data, changed.len);
		else
			conn_send_frame(c, frame, len);
		buf_free(&changed);
		if (!c->closed && c->paused_requests &&
		    c->inflight < s->cfg.max_requests_per_connection) {
			c->paused_requests = false;
			conn_update_reading(c);
			/* Deferred: a synchronous executor must not recurse
			 * once per pipelined frame. */
			event_active(c->kick, EV_READ, 1);
		}
	}
	free(req->body);
	free(req->keyspace);
	free(req);
	conn_unref(c);
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
	c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, conn_on_readable,
			   c);
	c->wev = event_new(s->base, fd, EV_WRITE | EV_PERSIST, conn_on_writable,
			   c);
	c->kick = event_new(s->base, -1, 0, conn_on_kick, c);
	c->timer = evtimer_new(s->base, conn_on_timer, c);
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
	conn_set_reading(c, true);
	c->next = s->conns;
	if (c->next)
		c->next->prev = c;
	s->conns = c;
	s->stats.connections++;
	s->stats.connections_total++;
	conn_arm_timer(c);
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
	s->flush_ev = event_new(base, -1, 0, on_flush, s);
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
		conn_close(s->conns, "server shutting down");
	on_flush(-1, 0, s); /* only releases: every connection is closed */
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
		conn_send_frame(c, f->data, f->len);
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
