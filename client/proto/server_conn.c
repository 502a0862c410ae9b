/*
 * The CQL server's I/O half (server_internal.h): a connection's life, its
 * output queue (one flush per loop turn; v5 replies packed into
 * segments), socket or TLS reads and writes, back-pressure, idle timers,
 * and cutting frames (v3/v4) and envelopes from segments (v5) out of the
 * input. The protocol half is server.c.
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

/* ---- connection lifetime ------------------------------------------------- */

void cql_srv_conn_unref(struct cql_conn *c)
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

void cql_srv_conn_close(struct cql_conn *c, const char *why)
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
	cql_srv_conn_unref(c);
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
		cql_srv_conn_update_reading(c);
	}
}

void cql_srv_conn_write(struct cql_conn *c, const uint8_t *p, size_t n)
{
	if (c->closed)
		return;
	/* Reclaim what was written before growing. */
	if (c->out_pos && c->out.len + n > c->out.cap)
		buf_drop_used(&c->out, &c->out_pos);
	if (buf_append(&c->out, p, n) != 0) {
		cql_srv_conn_close(c, "out of memory queueing a reply");
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
		cql_srv_conn_close(c, "out of memory queueing a reply");
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
		cql_srv_conn_close(c, "out of memory framing a reply");
}

/* A frame as it is (v3/v4) or in segments (v5 once set up). */
static void conn_send_plain(struct cql_conn *c, const uint8_t *frame,
			    size_t len)
{
	if (c->segments)
		conn_send_segments(c, frame, len);
	else
		cql_srv_conn_write(c, frame, len);
}

/* Writes a reply frame, compressing its body when LZ4 was negotiated (v5:
 * in segments, which carry the compression). */
void cql_srv_conn_send_frame(struct cql_conn *c, const uint8_t *frame,
			     size_t len)
{
	if (c->segments) {
		conn_send_segments(c, frame, len);
		return;
	}
	if (!c->lz4 || len <= CQL_HEADER_LEN) {
		cql_srv_conn_write(c, frame, len);
		return;
	}
	struct buf out;
	buf_init(&out);
	if (buf_append(&out, frame, CQL_HEADER_LEN) != 0 ||
	    cql_lz4_compress(frame + CQL_HEADER_LEN, len - CQL_HEADER_LEN,
			     &out) != 0) {
		buf_free(&out);
		cql_srv_conn_close(c, "out of memory compressing a reply");
		return;
	}
	out.data[1] |= CQL_FLAG_COMPRESSION;
	be32_store(out.data + 5, (uint32_t)(out.len - CQL_HEADER_LEN));
	cql_srv_conn_write(c, out.data, out.len);
	buf_free(&out);
}

void cql_srv_conn_set_reading(struct cql_conn *c, bool on)
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
		cql_srv_conn_close(c, n == 0 ? "closed by client"
					     : "socket error");
		return -1;
	}
	if (n < 0)
		return 1;
	c->sniff = false;
	if (b != 0x16)
		return 0;
	c->ssl = SSL_new(c->srv->cfg.tls);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
		cql_srv_conn_close(c, "out of memory for TLS");
		return -1;
	}
	SSL_set_accept_state(c->ssl);
	SSL_set_read_ahead(c->ssl, 1); /* records in one recv, not two */
	return 0;
}

/* Answers with a Protocol_error and closes once it is flushed. */
void cql_srv_conn_fail(struct cql_conn *c, uint8_t version, int16_t stream,
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
	cql_srv_conn_set_reading(c, false);
	if (out_queued(c) == 0)
		cql_srv_conn_close(c, "protocol error");
}

void cql_srv_conn_update_reading(struct cql_conn *c)
{
	if (c->closed || c->closing)
		return;
	cql_srv_conn_set_reading(c, !c->paused_requests && !c->paused_output);
}

/* After the output drained (fully or to below the high water mark). */
static void conn_drained(struct cql_conn *c)
{
	if (c->closing && out_queued(c) == 0) {
		cql_srv_conn_close(c, "protocol error");
		return;
	}
	if (c->paused_output && out_queued(c) < OUTPUT_HIGH_WATER / 2) {
		c->paused_output = false;
		cql_srv_conn_update_reading(c);
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
		cql_srv_conn_close(c, "socket error");
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

void cql_srv_conn_on_writable(evutil_socket_t fd, short what, void *arg)
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
	cql_srv_conn_unref(c);
}

void cql_srv_on_flush(evutil_socket_t fd, short what, void *arg)
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
		cql_srv_conn_unref(c);
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
void cql_srv_conn_on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cql_conn *c = arg;
	if (!c->ready || !c->authenticated) {
		cql_srv_conn_close(c,
				   c->ready ? "not authenticated within the "
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
		cql_srv_conn_close(c, "idle timeout");
	else
		conn_timer_in(c, idle >= limit ? limit : limit - idle);
}

void cql_srv_conn_arm_timer(struct cql_conn *c)
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
void cql_srv_conn_on_readable(evutil_socket_t fd, short what, void *arg)
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
		cql_srv_conn_unref(c);
		if (gone)
			return;
	}
	bool own = c->in.len > c->in_pos;
	struct buf *b = own ? &c->in : &s->scratch;
	if (own && c->in_pos)
		buf_drop_used(&c->in, &c->in_pos);
	if (buf_reserve(b, READ_CHUNK) != 0) {
		cql_srv_conn_close(c, "out of memory reading");
		return;
	}
	(void)fd;
	ssize_t n = conn_recv(c, b->data + b->len, READ_CHUNK);
	if (n <= 0) {
		if (n == 0)
			cql_srv_conn_close(c, "closed by client");
		else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			 errno != EINTR)
			cql_srv_conn_close(c, errno == EIO ? "TLS error"
							   : "socket error");
		return;
	}
	c->refs++; /* cql_srv_dispatch may close the connection under us */
	if (own) {
		c->in.len += (size_t)n;
		conn_read_own(c);
	} else {
		size_t used = conn_read_frames(c, s->scratch.data, (size_t)n);
		if (!c->closed && used < (size_t)n &&
		    buf_append(&c->in, s->scratch.data + used,
			       (size_t)n - used) != 0)
			cql_srv_conn_close(c, "out of memory reading");
	}
	/* TLS: more bytes in OpenSSL (a record's rest, or records read
	 * ahead) than one read took */
	if (!c->closed && c->ssl && c->reading && SSL_has_pending(c->ssl))
		event_active(c->rev, EV_READ, 1);
	cql_srv_conn_unref(c);
}

void cql_srv_conn_on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cql_conn *c = arg;
	c->refs++;
	conn_read_own(c);
	cql_srv_conn_unref(c);
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
				cql_srv_conn_set_reading(c, false);
			}
			return n; /* the rest is dropped */
		}
		case CQL_HEADER_BAD_DIRECTION:
			cql_srv_conn_fail(
				c, h.version, h.stream,
				"Invalid message direction: a response frame "
				"was sent to the server");
			return n; /* the rest is dropped */
		case CQL_HEADER_TOO_LARGE:
			snprintf(
				msg, sizeof(msg),
				"Request is too big: length %u exceeds maximum "
				"allowed length %u.",
				h.length, c->srv->cfg.max_frame_size);
			cql_srv_conn_fail(c, h.version, h.stream, msg);
			return n; /* the rest is dropped */
		}
		if (c->ready && h.version != c->version) {
			snprintf(msg, sizeof(msg),
				 "Invalid message version. Got %u but previous "
				 "messages on this connection had version %u",
				 h.version, c->version);
			cql_srv_conn_fail(c, c->version, h.stream, msg);
			return n; /* the rest is dropped */
		}
		if (n - pos < CQL_HEADER_LEN + (size_t)h.length)
			break; /* wait for the rest of the body */
		/* never NULL, even for an empty body: the decoders and the
		 * executor add offsets to it (NULL + 0 is undefined) */
		uint8_t *body = malloc(h.length ? h.length : 1);
		if (!body) {
			cql_srv_conn_close(c, "out of memory");
			break;
		}
		memcpy(body, hb + CQL_HEADER_LEN, h.length);
		pos += CQL_HEADER_LEN + (size_t)h.length;
		if (c->ready)
			c->last_request_ms = turn_ms(c->srv);
		cql_srv_dispatch(c, &h, body, h.length);
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
			cql_srv_conn_fail(c, c->version, 0, msg);
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
