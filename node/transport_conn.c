/*
 * Internode transport: connections (transport_internal.h says which file
 * owns what). Accepting (under internode_encryption the first byte tells
 * a TLS record from our plaintext frame), connecting (from our listen
 * address, TLS where the mode says), both handshakes and the checks of who
 * may connect how (server_encryption_options, endpoint verification),
 * reading length-prefixed frames against their limits, connection errors
 * (a refused plaintext connection falls back to TLS under dc / rack), and
 * closing: a conn is freed only from its own callbacks or from
 * transport_delete, and frame processing stops as soon as it is.
 */
#define LOG_MODULE "messaging"
#include "client/proto/tls.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "node/messaging_msg.h"
#include "node/transport_internal.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HANDSHAKE_TIMEOUT_S 10
#define MAX_INBOUND         1024
#define PLAIN_RETRY_MIN_MS  2000u
#define PLAIN_RETRY_MAX_MS  60000u

static bool tls_error(struct conn *c, char *dst, size_t cap);
static bool tls_up_ok(const struct transport *t);

void transport_conn_free(struct conn *c)
{
	struct transport *t = c->t;
	if (!c->inbound)
		transport_conn_lose_queue(c);
	if (c->inbound || c->retired) {
		for (struct conn **pp = c->inbound ? &t->inbound : &t->retired;
		     *pp; pp = &(*pp)->next)
			if (*pp == c) {
				*pp = c->next;
				break;
			}
		if (c->inbound)
			t->inbound_count--;
	} else if (c->peer && c->peer->out == c) {
		transport_peer_disconnected(t, c->peer);
	}
	if (c->bev) {
		bufferevent_free(c->bev);
	} else if (c->sniff) {
		event_free(c->sniff);
		evutil_closesocket(c->fd);
	}
	free(c);
}

static void conn_closing_write(struct bufferevent *bev, void *arg)
{
	(void)bev;
	transport_conn_free(arg);
}

static void conn_closing_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return; /* a retired connection still connecting: it flushes */
	transport_conn_free(
		arg); /* an error or EOF: what was queued is lost anyway */
}

/* Sends what is queued (a last handshake), then frees the conn. */
void transport_conn_close_after_flush(struct conn *c)
{
	c->closing = true;
	bufferevent_disable(c->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
		transport_conn_free(c);
		return;
	}
	bufferevent_setcb(c->bev, NULL, conn_closing_write, conn_closing_event,
			  c);
}

static void conn_remote_text(const struct conn *c, char *buf)
{
	fmt(&c->remote, buf);
}

/* Logs why and closes. Returns -1 so callers can `return conn_fail(...)`. */
static int conn_fail(struct conn *c, const char *why)
{
	char a[INET_ADDR_STRLEN];
	conn_remote_text(c, a);
	LOG_WARN("closing %s connection %s %s: %s",
		 c->inbound ? "inbound" : "outbound",
		 c->inbound ? "from" : "to", a, why);
	if (c->inbound && !c->handshaken)
		c->t->stats.rejected++;
	transport_conn_free(c);
	return -1;
}

static int frame_handshake(struct transport *t, struct buf *out)
{
	size_t start = out->len;
	if (buf_put_be32(out, 0) != 0 ||
	    messaging_handshake_encode(&t->hs, out) != 0) {
		out->len = start;
		return err_set(ERR_NOMEM, "handshake");
	}
	be32_store(out->data + start, (uint32_t)(out->len - start - 4));
	return 0;
}

/* A peer's handshake must match ours; `why` gets the reason it does not. */
static bool handshake_matches(struct transport *t,
			      const struct messaging_handshake *h, char *why,
			      size_t cap)
{
	if (strcmp(h->cluster_name, t->hs.cluster_name) != 0)
		snprintf(why, cap, "cluster name '%s' is not ours ('%s')",
			 h->cluster_name, t->hs.cluster_name);
	else if (strcmp(h->partitioner, t->hs.partitioner) != 0)
		snprintf(why, cap, "partitioner '%s' is not ours ('%s')",
			 h->partitioner, t->hs.partitioner);
	else if (h->version != MESSAGING_VERSION)
		snprintf(why, cap, "messaging version %u, we speak %u",
			 h->version, MESSAGING_VERSION);
	else
		return true;
	return false;
}

const char *transport_encryption_name(enum transport_encryption e)
{
	switch (e) {
	case TRANSPORT_ENCRYPT_ALL:
		return "all";
	case TRANSPORT_ENCRYPT_DC:
		return "dc";
	case TRANSPORT_ENCRYPT_RACK:
		return "rack";
	case TRANSPORT_ENCRYPT_NONE:
		break;
	}
	return "none";
}

static bool locate(struct transport *t, const struct inet_addr *ep,
		   struct transport_location *loc)
{
	memset(loc, 0, sizeof(*loc));
	return t->cfg.locate && t->cfg.locate(t->cfg.locate_arg, ep, loc);
}

/* Whether the mode covers the peer named `ep`: one we cannot place is
 * covered (as Cassandra's snitch answers its default DC for it). */
bool transport_must_encrypt(struct transport *t, const struct inet_addr *ep,
			    struct transport_location *loc)
{
	switch (t->cfg.encryption) {
	case TRANSPORT_ENCRYPT_NONE:
		return false;
	case TRANSPORT_ENCRYPT_ALL:
		return true;
	case TRANSPORT_ENCRYPT_DC:
	case TRANSPORT_ENCRYPT_RACK:
		break;
	}
	if (!locate(t, ep, loc) || strcmp(loc->dc, t->hs.dc) != 0)
		return true;
	return t->cfg.encryption == TRANSPORT_ENCRYPT_RACK &&
	       strcmp(loc->rack, t->hs.rack) != 0;
}

/* Whether the mode chooses per peer (dc, rack): then TLS is the fallback
 * when a peer refuses us in plaintext. */
static bool tls_up_ok(const struct transport *t)
{
	return t->cfg.encryption == TRANSPORT_ENCRYPT_DC ||
	       t->cfg.encryption == TRANSPORT_ENCRYPT_RACK;
}

static bool same_ip(const struct inet_addr *a, const struct inet_addr *b)
{
	return a->family == b->family && memcmp(a->ip, b->ip, 16) == 0;
}

/* An IP as text without a port, for certificate checks. */
static const char *ip_text(const struct inet_addr *a, char *buf)
{
	struct inet_addr h = *a;
	h.port = 0;
	return inet_addr_format_host(&h, buf, INET_ADDR_STRLEN);
}

/* The checks of an inbound connection's handshake that are about who may
 * connect how (server_encryption_options); `why` gets the refusal. A
 * plaintext one is let in only where the mode does not cover the peer it
 * claims to be, and only from that peer's own address: the claim is not
 * believed (CVE-2020-17516). */
static bool inbound_allowed(struct conn *c, const struct messaging_handshake *h,
			    char *why, size_t cap)
{
	struct transport *t = c->t;
	char a[INET_ADDR_STRLEN];
	if (c->tls) {
		if (!t->cfg.endpoint_verification)
			return true;
		SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
		X509 *cert = ssl ? SSL_get_peer_certificate(ssl) : NULL;
		if (!cert)
			return true; /* none asked for: require_client_auth */
		bool ok = cql_tls_cert_names(cert, ip_text(&h->addr, a));
		X509_free(cert);
		if (ok)
			return true;
		snprintf(why, cap,
			 "its certificate does not name %s "
			 "(require_endpoint_verification)",
			 a);
		return false;
	}
	struct transport_location loc;
	if (!transport_must_encrypt(t, &h->addr, &loc)) {
		if (t->cfg.encryption == TRANSPORT_ENCRYPT_NONE ||
		    same_ip(&c->source, &h->addr) ||
		    (loc.internal.family != INET_NONE &&
		     same_ip(&c->source, &loc.internal)))
			return true;
		snprintf(why, cap,
			 "internode_encryption is %s and it does not connect "
			 "from that node's address",
			 transport_encryption_name(t->cfg.encryption));
		return t->cfg.encryption_optional;
	}
	if (t->cfg.encryption_optional)
		return true;
	if (t->cfg.encryption == TRANSPORT_ENCRYPT_ALL)
		snprintf(why, cap, "internode_encryption is all");
	else if (!loc.dc[0])
		snprintf(why, cap,
			 "internode_encryption is %s and that node is not "
			 "known to be in our %s",
			 transport_encryption_name(t->cfg.encryption),
			 t->cfg.encryption == TRANSPORT_ENCRYPT_DC
				 ? "datacenter"
				 : "rack");
	else
		snprintf(why, cap,
			 "internode_encryption is %s and that node is in "
			 "%s %.63s/%.63s, we are in %.63s/%.63s",
			 transport_encryption_name(t->cfg.encryption),
			 t->cfg.encryption == TRANSPORT_ENCRYPT_DC
				 ? "datacenter"
				 : "rack",
			 loc.dc, loc.rack, t->hs.dc, t->hs.rack);
	return false;
}

static int inbound_handshake(struct conn *c, const uint8_t *p, size_t len)
{
	struct transport *t = c->t;
	struct messaging_handshake h;
	char why[600];
	if (messaging_handshake_decode(p, len, &h) != 0) {
		snprintf(why, sizeof(why), "bad handshake: %s", err_msg());
		return conn_fail(c, why);
	}
	if (!inbound_allowed(c, &h, why, sizeof(why))) {
		char a[INET_ADDR_STRLEN], b[INET_ADDR_STRLEN];
		LOG_WARN("refusing %s internode connection from %s (claiming "
			 "to be %s): %s",
			 c->tls ? "TLS" : "unencrypted", fmt(&c->source, a),
			 fmt(&h.addr, b), why);
		t->stats.rejected++;
		if (!c->tls)
			t->stats.plaintext_refused++;
		transport_conn_free(c);
		return -1;
	}
	/* Answer with ours either way, so the other side can log why. */
	buf_clear(&t->frame);
	if (frame_handshake(t, &t->frame) == 0)
		bufferevent_write(c->bev, t->frame.data, t->frame.len);
	if (!handshake_matches(t, &h, why, sizeof(why))) {
		char a[INET_ADDR_STRLEN];
		LOG_WARN("rejecting internode connection from %s: %s",
			 fmt(&c->remote, a), why);
		t->stats.rejected++;
		transport_conn_close_after_flush(c);
		return -1;
	}
	c->handshaken = true;
	c->remote = h.addr;
	c->in = transport_inbound_peer_get(t, &h.addr);
	bufferevent_set_timeouts(c->bev, NULL, NULL);
	/* It is back: let our next send connect at once. */
	struct peer *peer = transport_peer_find(t, &h.addr);
	if (peer && !peer->out) {
		peer->backoff_ms = 0;
		peer->retry_at_us = 0;
	}
	return 0;
}

/* Processes one frame body. Returns -1 when the conn was freed. */
static int conn_frame(struct conn *c, const uint8_t *p, size_t len)
{
	char why[600];
	if (c->inbound && !c->handshaken)
		return inbound_handshake(c, p, len);
	if (!c->inbound) {
		struct messaging_handshake h;
		if (c->handshaken)
			return conn_fail(c, "unexpected frame on an outbound "
					    "connection");
		if (messaging_handshake_decode(p, len, &h) != 0) {
			snprintf(why, sizeof(why), "bad handshake reply: %s",
				 err_msg());
			return conn_fail(c, why);
		}
		if (!handshake_matches(c->t, &h, why, sizeof(why)))
			return conn_fail(c, why);
		c->handshaken = true;
		if (c->owner)
			c->owner->st.successful_connection_attempts++;
		if (c->peer) {
			c->peer->backoff_ms = 0;
			c->peer->failure_logged = false;
			if (!c->tls)
				c->peer->plain_retry_ms = 0;
		}
		bufferevent_set_timeouts(c->bev, NULL, NULL);
		return 0;
	}
	struct messaging_envelope e;
	if (c->in) {
		c->in->st.received_count++;
		c->in->st.received_bytes += 4 + len;
	}
	if (messaging_envelope_decode(p, len, &e) != 0) {
		if (c->in) {
			c->in->st.error_count++;
			c->in->st.error_bytes += 4 + len;
		}
		snprintf(why, sizeof(why), "%s", err_msg());
		return conn_fail(c, why);
	}
	transport_deliver(c, &e, 4 + len);
	messaging_envelope_free(&e);
	return 0;
}

static void conn_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct transport *t = c->t;
	struct evbuffer *in = bufferevent_get_input(bev);
	char why[160];
	while (!c->closing) {
		size_t avail = evbuffer_get_length(in);
		uint8_t hdr[4];
		if (avail < 4)
			return;
		evbuffer_copyout(in, hdr, 4);
		uint32_t len = be32_load(hdr);
		uint64_t max = c->handshaken ? t->cfg.max_message_size
					     : MESSAGING_HANDSHAKE_MAX;
		if (len == 0 || len > max) {
			snprintf(why, sizeof(why),
				 "frame of %u bytes (limit %llu%s)", len,
				 (unsigned long long)max,
				 c->handshaken ? ", internode_max_message_size"
					       : " before the handshake");
			conn_fail(c, why);
			return;
		}
		if (avail < 4 + (size_t)len)
			return;
		const uint8_t *p = evbuffer_pullup(in, 4 + (ssize_t)len);
		if (!p) {
			conn_fail(c, "out of memory reading a frame");
			return;
		}
		if (conn_frame(c, p + 4, len) != 0)
			return;
		if (c->closing)
			return;
		evbuffer_drain(in, 4 + (size_t)len);
	}
}

static void conn_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	struct conn *c = arg;
	struct transport *t = c->t;
	char a[INET_ADDR_STRLEN];
	if (what & BEV_EVENT_CONNECTED) {
		/* TLS: the TLS handshake completed */
		if (c->tls) {
			c->tls_up = true;
			if (c->inbound)
				t->stats.tls_inbound++;
			else
				t->stats.tls_outbound++;
		}
		if (c->inbound)
			return;
		t->stats.connects++;
		int one = 1;
		setsockopt(bufferevent_getfd(c->bev), IPPROTO_TCP, TCP_NODELAY,
			   &one, sizeof(one));
		return;
	}
	conn_remote_text(c, a);
	char tls_why[300];
	/* (TLS 1.3: a server refusing our certificate says so after our
	 * side of the handshake completed) */
	if (c->tls && !c->handshaken && !(what & BEV_EVENT_TIMEOUT) &&
	    tls_error(c, tls_why, sizeof(tls_why))) {
		t->stats.tls_failures++;
		if (c->inbound) {
			LOG_WARN("TLS handshake with internode peer %s failed: "
				 "%s",
				 fmt(&c->source, a), tls_why);
			t->stats.rejected++;
			transport_conn_free(c);
			return;
		}
	} else {
		tls_why[0] = 0;
	}
	if (c->inbound) {
		if (what & BEV_EVENT_TIMEOUT)
			conn_fail(c, "no handshake in time");
		else
			transport_conn_free(c);
		return;
	}
	struct peer *p = c->peer;
	if (!p) { /* retired: its replacement carries on */
		transport_conn_free(c);
		return;
	}
	const char *why = (what & BEV_EVENT_TIMEOUT) ? "timed out"
			  : tls_why[0]               ? tls_why
			  : (what & BEV_EVENT_EOF)
				  ? "closed by the peer"
				  : strerror(EVUTIL_SOCKET_ERROR());
	if (!c->handshaken)
		t->stats.connect_failures++;
	if (!c->handshaken && !c->tls && tls_up_ok(t)) {
		/* refused in plaintext: the peer may not know where we are
		 * yet; TLS is always let in */
		p->plain_retry_ms = p->plain_retry_ms ? p->plain_retry_ms * 2
						      : PLAIN_RETRY_MIN_MS;
		if (p->plain_retry_ms > PLAIN_RETRY_MAX_MS)
			p->plain_retry_ms = PLAIN_RETRY_MAX_MS;
		p->tls_fallback = true;
		p->plain_retry_at_us =
			env_mono_us(t->env) + p->plain_retry_ms * 1000u;
		p->backoff_ms = 0;
	}
	if (!p->failure_logged) {
		LOG_INFO("connection to %s %s: %s (reconnecting with backoff)",
			 a, c->handshaken ? "lost" : "failed", why);
		p->failure_logged = true;
	}
	transport_conn_free(c);
}

/* OpenSSL's reason a TLS connection failed, if it gave one. */
static bool tls_error(struct conn *c, char *dst, size_t cap)
{
	unsigned long e, last = 0;
	while ((e = bufferevent_get_openssl_error(c->bev)) != 0)
		last = e;
	if (!last)
		return false;
	char r[256];
	ERR_error_string_n(last, r, sizeof(r));
	/* "certificate verify failed" alone does not say which check */
	SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
	long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	if (v != X509_V_OK)
		snprintf(dst, cap, "TLS: %s (%s)", r,
			 X509_verify_cert_error_string(v));
	else
		snprintf(dst, cap, "TLS: %s", r);
	return true;
}

/* The inbound socket becomes a bufferevent: TLS or plaintext. */
static void inbound_start(struct conn *c, evutil_socket_t fd, bool tls)
{
	struct transport *t = c->t;
	struct bufferevent *bev = NULL;
	if (tls) {
		SSL *ssl = SSL_new(t->cfg.tls_server);
		if (ssl)
			bev = bufferevent_openssl_socket_new(
				t->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
				BEV_OPT_CLOSE_ON_FREE);
		if (!bev)
			SSL_free(ssl);
		else
			bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	} else {
		bev = bufferevent_socket_new(t->base, fd,
					     BEV_OPT_CLOSE_ON_FREE);
	}
	if (!bev) {
		evutil_closesocket(fd);
		transport_conn_free(c);
		return;
	}
	c->bev = bev;
	c->tls = tls;
	struct timeval hs_timeout = {HANDSHAKE_TIMEOUT_S, 0};
	bufferevent_set_timeouts(bev, &hs_timeout, NULL);
	bufferevent_setcb(bev, conn_read, NULL, conn_event, c);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

/* The first byte of an inbound connection under internode_encryption: a
 * TLS record (a handshake, 0x16) or our plaintext frame (a length, 0). */
static void sniff_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct transport *t = c->t;
	if (what & EV_TIMEOUT) {
		conn_fail(c, "no handshake in time");
		return;
	}
	uint8_t b;
	ssize_t r = recv(fd, &b, 1, MSG_PEEK);
	if (r < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		struct timeval hs_timeout = {HANDSHAKE_TIMEOUT_S, 0};
		event_add(c->sniff, &hs_timeout);
		return;
	}
	if (r <= 0) {
		transport_conn_free(c);
		return;
	}
	bool tls = b == 0x16;
	if (!tls && t->cfg.encryption == TRANSPORT_ENCRYPT_ALL &&
	    !t->cfg.encryption_optional) {
		char a[INET_ADDR_STRLEN];
		LOG_WARN("refusing unencrypted internode connection from %s: "
			 "internode_encryption is all",
			 fmt(&c->source, a));
		t->stats.plaintext_refused++;
		t->stats.rejected++;
		transport_conn_free(c);
		return;
	}
	event_free(c->sniff);
	c->sniff = NULL;
	inbound_start(c, fd, tls);
}

void transport_accept(struct evconnlistener *l, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	(void)l;
	struct transport *t = arg;
	if (t->inbound_count >= MAX_INBOUND) {
		LOG_WARN("refusing an internode connection: %d open",
			 MAX_INBOUND);
		evutil_closesocket(fd);
		return;
	}
	struct conn *c = calloc(1, sizeof(*c));
	if (!c) {
		evutil_closesocket(fd);
		return;
	}
	c->t = t;
	c->inbound = true;
	c->fd = fd;
	inet_addr_from_sockaddr(sa, (size_t)salen, &c->remote);
	c->source = c->remote;
	c->next = t->inbound;
	t->inbound = c;
	t->inbound_count++;
	t->stats.accepted++;
	if (t->cfg.encryption == TRANSPORT_ENCRYPT_NONE && !t->cfg.tls_server) {
		inbound_start(c, fd, false);
		return;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct timeval hs_timeout = {HANDSHAKE_TIMEOUT_S, 0};
	c->sniff = event_new(t->base, fd, EV_READ, sniff_cb, c);
	if (!c->sniff || event_add(c->sniff, &hs_timeout) != 0) {
		if (c->sniff)
			event_free(c->sniff);
		c->sniff = NULL;
		evutil_closesocket(fd);
		transport_conn_free(c);
	}
}

int transport_peer_connect(struct transport *t, struct peer *p)
{
	char a[INET_ADDR_STRLEN];
	struct sockaddr_storage ss, local;
	const struct inet_addr *via = transport_peer_via(p);
	size_t sl = inet_addr_to_sockaddr(via, &ss);
	int fd = socket(ss.ss_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set_errno(errno, "socket");
	/* From our listen address, so peers see who we are. */
	struct inet_addr src = t->cfg.listen;
	src.port = 0;
	size_t ll = inet_addr_to_sockaddr(&src, &local);
	if (ll && src.family == via->family)
		(void)bind(fd, (struct sockaddr *)&local, (socklen_t)ll);
	struct transport_location loc;
	bool tls = p->tls_fallback || transport_must_encrypt(t, &p->addr, &loc);
	struct conn *c = calloc(1, sizeof(*c));
	struct bufferevent *bev = NULL;
	if (c && tls) {
		/* connect first: OpenSSL's first write waits for it */
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)&ss, (socklen_t)sl) != 0 &&
		    errno != EINPROGRESS) {
			int e = errno;
			free(c);
			close(fd);
			transport_peer_disconnected(t, p);
			t->stats.connect_failures++;
			return err_set_errno(e, "cannot connect to %s",
					     fmt(via, a));
		}
		SSL *ssl = SSL_new(t->cfg.tls_client);
		char ip[INET_ADDR_STRLEN];
		if (ssl && t->cfg.endpoint_verification &&
		    cql_tls_expect_name(ssl, ip_text(via, ip)) != 0) {
			SSL_free(ssl);
			ssl = NULL;
		}
		if (ssl)
			bev = bufferevent_openssl_socket_new(
				t->base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
				BEV_OPT_CLOSE_ON_FREE);
		if (!bev)
			SSL_free(ssl);
		else
			bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	} else if (c) {
		bev = bufferevent_socket_new(t->base, fd,
					     BEV_OPT_CLOSE_ON_FREE);
	}
	if (!bev) {
		free(c);
		close(fd);
		return err_set(ERR_NOMEM, "connection to %s", fmt(&p->addr, a));
	}
	c->t = t;
	c->bev = bev;
	c->tls = tls;
	c->peer = p;
	c->owner = p;
	c->remote = p->addr;
	p->st.connection_attempts++;
	evbuffer_add_cb(bufferevent_get_output(bev), transport_conn_drained, c);
	struct timeval tv = {
		.tv_sec = (time_t)(t->cfg.connect_timeout_ms / 1000),
		.tv_usec =
			(suseconds_t)(t->cfg.connect_timeout_ms % 1000) * 1000};
	bufferevent_set_timeouts(bev, &tv, &tv);
	bufferevent_setcb(bev, conn_read, NULL, conn_event, c);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	/* Not t->frame: the caller's message is waiting in it. */
	struct buf hs = {0};
	int rc = frame_handshake(t, &hs);
	if (rc == 0)
		rc = bufferevent_write(bev, hs.data, hs.len);
	c->qskip = hs.len;
	buf_free(&hs);
	if (rc != 0 ||
	    (!tls && bufferevent_socket_connect(bev, (struct sockaddr *)&ss,
						(int)sl) != 0)) {
		bufferevent_free(bev);
		free(c);
		transport_peer_disconnected(t, p);
		t->stats.connect_failures++;
		return err_set(ERR_UNAVAILABLE, "cannot connect to %s",
			       fmt(via, a));
	}
	p->out = c;
	return 0;
}
