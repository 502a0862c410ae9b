/*
 * Internode transport (see transport.h for the protocol and its rules).
 *
 * Objects: a `peer` per address we send to, holding at most one outbound
 * `conn`; inbound `conn`s in a list; `pending` requests awaiting a response,
 * each with an env timer. A conn is freed only from its own callbacks or
 * from transport_delete, and frame processing stops as soon as it is.
 */
#define LOG_MODULE "messaging"
#include "node/transport.h"

#include "client/proto/tls.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "node/admin.h"
#include "node/messaging_msg.h"

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

#define BACKOFF_MIN_MS      100u
#define BACKOFF_MAX_MS      2000u
#define HANDSHAKE_TIMEOUT_S 10
#define MAX_INBOUND         1024
#define PLAIN_RETRY_MIN_MS  2000u
#define PLAIN_RETRY_MAX_MS  60000u

struct peer;

struct conn {
	struct transport *t;
	struct bufferevent *bev;
	bool inbound;
	bool handshaken; /* inbound: peer's handshake accepted; outbound:
			    reply received */
	bool closing;    /* flushing a last frame, then freed */
	bool retired;    /* outbound, replaced by one to a preferred address */
	bool tls;        /* speaks TLS (its bev is an OpenSSL one) */
	bool tls_up;     /* the TLS handshake completed */
	/* inbound, until its first byte tells TLS from plaintext: the
	 * socket, waited on by `sniff`; then `bev` owns it */
	struct event *sniff;
	evutil_socket_t fd;
	struct inet_addr source; /* inbound: the socket's peer address */
	/* inbound: the advertised address once handshaken; outbound: the
	 * peer's name */
	struct inet_addr remote;
	struct peer *peer; /* outbound only; NULL once retired */
	struct conn *next; /* inbound or retired list */
	/* outbound: whose counters (kept once retired), and the frames in
	 * its output not yet taken by the socket, oldest first: sizes in a
	 * ring (`qhead`, `qn` of `qcap`), `qdone` bytes of the oldest
	 * taken; `qskip` bytes of the handshake before them */
	struct peer *owner;
	uint32_t *qlen;
	size_t qhead, qn, qcap, qdone, qskip;
	/* inbound, once handshaken: its peer's counters */
	struct inbound_peer *in;
};

/* The counters of messages from one peer (transport_inbound_stats). */
struct inbound_peer {
	struct transport_inbound_stats st;
	struct inbound_peer *next;
};

/* A frame a faulty link holds until `at_us` (test clusters only). */
struct held {
	struct held *next;
	uint64_t at_us;
	size_t len;
	uint8_t data[];
};

struct peer {
	struct transport *t;
	struct inet_addr addr; /* its name (broadcast address) */
	struct inet_addr via;  /* where we connect; INET_NONE: addr */
	struct conn *out;
	uint64_t backoff_ms;
	uint64_t retry_at_us;
	bool failure_logged;
	/* dc/rack: a plaintext connection the peer refused (it does not know
	 * us yet): TLS until plain_retry_at_us, then plaintext again */
	bool tls_fallback;
	uint64_t plain_retry_at_us, plain_retry_ms;
	struct held *held, *held_tail; /* in release order */
	size_t held_bytes, held_count;
	struct env_timer *held_timer;
	struct transport_outbound_stats st; /* pending: computed when read */
	struct peer *next;
};

struct pending {
	struct transport *t;
	uint64_t id;
	transport_response_fn cb;
	void *arg;
	struct env_timer *timer;
	struct pending *prev, *next;
};

struct handler {
	transport_handler_fn fn;
	void *arg;
};

struct transport {
	struct event_base *base;
	struct env *env;
	struct transport_config cfg;
	struct messaging_handshake hs; /* ours */
	struct evconnlistener *listener;
	struct evconnlistener *listener_broadcast;
	struct peer *peers;
	struct inbound_peer *inbound_peers;
	struct conn *inbound;
	struct conn *retired; /* draining their queue before they close */
	size_t inbound_count;
	struct pending *pending;
	uint64_t next_id;
	struct handler handlers[TRANSPORT_MAX_VERB + 1];
	struct transport_stats stats;
	struct buf frame;
	struct netfault *faults; /* NULL unless test_fault_injection */
};

static bool tls_error(struct conn *c, char *dst, size_t cap);
static bool tls_up_ok(const struct transport *t);

static const char *fmt(const struct inet_addr *a, char *buf)
{
	return inet_addr_format(a, buf, INET_ADDR_STRLEN);
}

static int64_t wall_ms(struct transport *t)
{
	return env_wall_us(t->env) / 1000;
}

/* ---- connections --------------------------------------------------------- */

static void peer_disconnected(struct transport *t, struct peer *p)
{
	p->out = NULL;
	p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (p->backoff_ms > BACKOFF_MAX_MS)
		p->backoff_ms = BACKOFF_MAX_MS;
	p->retry_at_us = env_mono_us(t->env) + p->backoff_ms * 1000u;
}

/* The socket took `n` more bytes of an outbound connection's output. */
static void conn_drained(struct evbuffer *b, const struct evbuffer_cb_info *i,
			 void *arg)
{
	(void)b;
	struct conn *c = arg;
	size_t n = i->n_deleted;
	size_t skip = n < c->qskip ? n : c->qskip;
	c->qskip -= skip;
	n -= skip;
	while (n > 0 && c->qn > 0) {
		size_t left = c->qlen[c->qhead] - c->qdone;
		if (n < left) {
			c->qdone += n;
			return;
		}
		n -= left;
		if (c->owner) {
			c->owner->st.sent_count++;
			c->owner->st.sent_bytes += c->qlen[c->qhead];
		}
		c->qdone = 0;
		c->qhead = (c->qhead + 1) % c->qcap;
		c->qn--;
	}
}

/* A frame of `len` bytes queued on outbound `c`. 0 or -1 (no memory: the
 * frame is sent, only not counted as pending). */
static int conn_queued(struct conn *c, size_t len)
{
	if (c->qn == c->qcap) {
		size_t cap = c->qcap ? 2 * c->qcap : 16;
		uint32_t *q = malloc(cap * sizeof(*q));
		if (!q)
			return -1;
		for (size_t i = 0; i < c->qn; i++)
			q[i] = c->qlen[(c->qhead + i) % c->qcap];
		free(c->qlen);
		c->qlen = q;
		c->qhead = 0;
		c->qcap = cap;
	}
	c->qlen[(c->qhead + c->qn) % c->qcap] = (uint32_t)len;
	c->qn++;
	return 0;
}

/* Outbound `c` goes: what it had not sent is lost. */
static void conn_lose_queue(struct conn *c)
{
	if (c->bev)
		evbuffer_remove_cb(bufferevent_get_output(c->bev), conn_drained,
				   c);
	for (; c->owner && c->qn > 0; c->qn--) {
		c->owner->st.error_count++;
		c->owner->st.error_bytes += c->qlen[c->qhead];
		c->qhead = (c->qhead + 1) % c->qcap;
	}
	free(c->qlen);
	c->qlen = NULL;
	c->qn = c->qcap = 0;
}

static void conn_free(struct conn *c)
{
	struct transport *t = c->t;
	if (!c->inbound)
		conn_lose_queue(c);
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
		peer_disconnected(t, c->peer);
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
	conn_free(arg);
}

static void conn_closing_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return; /* a retired connection still connecting: it flushes */
	conn_free(arg); /* an error or EOF: what was queued is lost anyway */
}

/* Sends what is queued (a last handshake), then frees the conn. */
static void conn_close_after_flush(struct conn *c)
{
	c->closing = true;
	bufferevent_disable(c->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
		conn_free(c);
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
	conn_free(c);
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

static struct peer *peer_find(struct transport *t, const struct inet_addr *a)
{
	for (struct peer *p = t->peers; p; p = p->next)
		if (inet_addr_eq(&p->addr, a))
			return p;
	return NULL;
}

static const char *encryption_name(enum transport_encryption e)
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
static bool must_encrypt(struct transport *t, const struct inet_addr *ep,
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
	if (!must_encrypt(t, &h->addr, &loc)) {
		if (t->cfg.encryption == TRANSPORT_ENCRYPT_NONE ||
		    same_ip(&c->source, &h->addr) ||
		    (loc.internal.family != INET_NONE &&
		     same_ip(&c->source, &loc.internal)))
			return true;
		snprintf(why, cap,
			 "internode_encryption is %s and it does not connect "
			 "from that node's address",
			 encryption_name(t->cfg.encryption));
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
			 encryption_name(t->cfg.encryption),
			 t->cfg.encryption == TRANSPORT_ENCRYPT_DC
				 ? "datacenter"
				 : "rack");
	else
		snprintf(why, cap,
			 "internode_encryption is %s and that node is in "
			 "%s %.63s/%.63s, we are in %.63s/%.63s",
			 encryption_name(t->cfg.encryption),
			 t->cfg.encryption == TRANSPORT_ENCRYPT_DC
				 ? "datacenter"
				 : "rack",
			 loc.dc, loc.rack, t->hs.dc, t->hs.rack);
	return false;
}

/* The counters of messages from `a`, made on its first connection (NULL
 * without memory: that connection goes uncounted). */
static struct inbound_peer *inbound_peer_get(struct transport *t,
					     const struct inet_addr *a)
{
	for (struct inbound_peer *p = t->inbound_peers; p; p = p->next)
		if (inet_addr_eq(&p->st.addr, a))
			return p;
	struct inbound_peer *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->st.addr = *a;
	p->next = t->inbound_peers;
	t->inbound_peers = p;
	return p;
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
		conn_free(c);
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
		conn_close_after_flush(c);
		return -1;
	}
	c->handshaken = true;
	c->remote = h.addr;
	c->in = inbound_peer_get(t, &h.addr);
	bufferevent_set_timeouts(c->bev, NULL, NULL);
	/* It is back: let our next send connect at once. */
	struct peer *peer = peer_find(t, &h.addr);
	if (peer && !peer->out) {
		peer->backoff_ms = 0;
		peer->retry_at_us = 0;
	}
	return 0;
}

static void pending_free(struct pending *p)
{
	struct transport *t = p->t;
	if (p->prev)
		p->prev->next = p->next;
	else
		t->pending = p->next;
	if (p->next)
		p->next->prev = p->prev;
	env_timer_free(t->env, p->timer);
	free(p);
}

static void deliver_envelope(struct conn *c, const struct messaging_envelope *e,
			     size_t frame_len)
{
	struct transport *t = c->t;
	t->stats.received++;
	struct inbound_peer *in = c->in;
	if (in && e->deadline_ms && !e->response &&
	    wall_ms(t) > e->deadline_ms) {
		in->st.expired_count++;
		in->st.expired_bytes += frame_len;
	} else if (in) {
		in->st.processed_count++;
		in->st.processed_bytes += frame_len;
	}
	if (e->response) {
		for (struct pending *p = t->pending; p; p = p->next) {
			if (p->id != e->request_id)
				continue;
			transport_response_fn cb = p->cb;
			void *arg = p->arg;
			pending_free(p);
			cb(arg, 0, e->payload, e->len);
			return;
		}
		return; /* answered too late: the request already timed out */
	}
	if (e->deadline_ms && wall_ms(t) > e->deadline_ms) {
		t->stats.dropped_expired++;
		t->stats.expired_by_verb[e->verb <= TRANSPORT_MAX_VERB ? e->verb
								       : 0]++;
		return;
	}
	struct handler *h =
		e->verb <= TRANSPORT_MAX_VERB ? &t->handlers[e->verb] : NULL;
	if (h && h->fn)
		h->fn(h->arg, &c->remote, e->verb, e->request_id, e->payload,
		      e->len);
	else
		env_deliver(t->env, &c->remote, e->verb, e->payload, e->len);
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
	deliver_envelope(c, &e, 4 + len);
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
			conn_free(c);
			return;
		}
	} else {
		tls_why[0] = 0;
	}
	if (c->inbound) {
		if (what & BEV_EVENT_TIMEOUT)
			conn_fail(c, "no handshake in time");
		else
			conn_free(c);
		return;
	}
	struct peer *p = c->peer;
	if (!p) { /* retired: its replacement carries on */
		conn_free(c);
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
	conn_free(c);
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
		conn_free(c);
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
		conn_free(c);
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
		conn_free(c);
		return;
	}
	event_free(c->sniff);
	c->sniff = NULL;
	inbound_start(c, fd, tls);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd,
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
	if (t->cfg.encryption == TRANSPORT_ENCRYPT_NONE) {
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
		conn_free(c);
	}
}

static const struct inet_addr *peer_via(const struct peer *p)
{
	return p->via.family != INET_NONE ? &p->via : &p->addr;
}

static int peer_connect(struct transport *t, struct peer *p)
{
	char a[INET_ADDR_STRLEN];
	struct sockaddr_storage ss, local;
	const struct inet_addr *via = peer_via(p);
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
	bool tls = p->tls_fallback || must_encrypt(t, &p->addr, &loc);
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
			peer_disconnected(t, p);
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
	evbuffer_add_cb(bufferevent_get_output(bev), conn_drained, c);
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
		peer_disconnected(t, p);
		t->stats.connect_failures++;
		return err_set(ERR_UNAVAILABLE, "cannot connect to %s",
			       fmt(via, a));
	}
	p->out = c;
	return 0;
}

static struct peer *peer_get(struct transport *t, const struct inet_addr *to)
{
	struct peer *p = peer_find(t, to);
	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p) {
		err_set(ERR_NOMEM, "peer");
		return NULL;
	}
	p->t = t;
	p->addr = *to;
	p->next = t->peers;
	t->peers = p;
	return p;
}

/* Queues one framed message on p's connection, connecting if needed. */
static int peer_write_now(struct transport *t, struct peer *p,
			  const uint8_t *frame, size_t len)
{
	char a[INET_ADDR_STRLEN];
	const struct inet_addr *to = &p->addr;
	if (p->tls_fallback && env_mono_us(t->env) >= p->plain_retry_at_us) {
		p->tls_fallback = false; /* plaintext again, where it may be */
		transport_reconsider(t, to);
	}
	if (!p->out) {
		if (env_mono_us(t->env) < p->retry_at_us) {
			t->stats.dropped_unavailable++;
			p->st.error_count++;
			p->st.error_bytes += len;
			return err_set(ERR_UNAVAILABLE,
				       "%s is unreachable "
				       "(reconnecting)",
				       fmt(to, a));
		}
		if (peer_connect(t, p) != 0)
			return -1;
	}
	struct evbuffer *out = bufferevent_get_output(p->out->bev);
	if (evbuffer_get_length(out) + len > t->cfg.max_queue_bytes) {
		t->stats.dropped_overload++;
		p->st.overload_count++;
		p->st.overload_bytes += len;
		return err_set(ERR_OVERLOADED, "queue to %s is full",
			       fmt(to, a));
	}
	if (bufferevent_write(p->out->bev, frame, len) != 0) {
		p->st.error_count++;
		p->st.error_bytes += len;
		return err_set(ERR_NOMEM, "queueing to %s", fmt(to, a));
	}
	(void)conn_queued(p->out, len);
	t->stats.sent++;
	return 0;
}

/* ---- held frames (test_fault_injection) -----------------------------------
 */

/* Sends every held frame due by now (all with `all`), in order; a frame
 * the connection refuses is dropped and counted as any send would be. */
static void peer_release(struct peer *p, bool all)
{
	struct transport *t = p->t;
	uint64_t now = env_mono_us(t->env);
	while (p->held && (all || p->held->at_us <= now)) {
		struct held *h = p->held;
		p->held = h->next;
		if (!p->held)
			p->held_tail = NULL;
		p->held_bytes -= h->len;
		p->held_count--;
		(void)peer_write_now(t, p, h->data, h->len);
		free(h);
	}
	if (p->held)
		env_timer_arm(t->env, p->held_timer, p->held->at_us - now);
}

static void held_due(void *arg)
{
	peer_release(arg, false);
}

static int peer_hold(struct transport *t, struct peer *p, const struct buf *f,
		     uint64_t at_us)
{
	char a[INET_ADDR_STRLEN];
	size_t queued = p->out ? evbuffer_get_length(
					 bufferevent_get_output(p->out->bev))
			       : 0;
	if (queued + p->held_bytes + f->len > t->cfg.max_queue_bytes) {
		t->stats.dropped_overload++;
		p->st.overload_count++;
		p->st.overload_bytes += f->len;
		return err_set(ERR_OVERLOADED, "queue to %s is full",
			       fmt(&p->addr, a));
	}
	if (!p->held_timer) {
		p->held_timer = env_timer_new(t->env, held_due, p);
		if (!p->held_timer)
			return -1;
	}
	struct held *h = malloc(sizeof(*h) + f->len);
	if (!h)
		return err_set(ERR_NOMEM, "holding a message to %s",
			       fmt(&p->addr, a));
	h->next = NULL;
	h->at_us = at_us;
	h->len = f->len;
	memcpy(h->data, f->data, f->len);
	if (p->held_tail)
		p->held_tail->next = h;
	else
		p->held = h;
	p->held_tail = h;
	p->held_bytes += f->len;
	p->held_count++;
	uint64_t now = env_mono_us(t->env);
	if (p->held == h)
		env_timer_arm(t->env, p->held_timer,
			      at_us > now ? at_us - now : 0);
	return 0;
}

static void peer_free(struct peer *p)
{
	while (p->held) {
		struct held *h = p->held;
		p->held = h->next;
		free(h);
	}
	if (p->held_timer)
		env_timer_free(p->t->env, p->held_timer);
	if (p->out) {
		conn_lose_queue(p->out);
		bufferevent_free(p->out->bev);
		free(p->out);
	}
	free(p);
}

/* Queues one framed message for `to`, through its faulty link if any. */
static int peer_write(struct transport *t, const struct inet_addr *to,
		      const struct buf *frame)
{
	struct peer *p = peer_get(t, to);
	if (!p)
		return -1;
	uint64_t at;
	if (t->faults && netfault_plan(t->faults, to, frame->len, &at) &&
	    (p->held || at > env_mono_us(t->env)))
		return peer_hold(t, p, frame, at);
	if (p->held) /* a rule just went: keep the order */
		peer_release(p, true);
	return peer_write_now(t, p, frame->data, frame->len);
}

static int send_envelope(struct transport *t, const struct inet_addr *to,
			 uint32_t verb, uint64_t id, int64_t deadline_ms,
			 bool response, const void *msg, size_t len)
{
	if (verb == 0 || len + 64 > t->cfg.max_message_size)
		return err_set(ERR_INVALID, "message of %zu bytes for verb %u",
			       len, verb);
	buf_clear(&t->frame);
	if (messaging_envelope_frame(verb, id, deadline_ms, response, msg, len,
				     &t->frame) != 0)
		return -1;
	return peer_write(t, to, &t->frame);
}

/* ---- public -------------------------------------------------------------- */

int transport_send(void *arg, const struct inet_addr *to, uint32_t verb,
		   const void *msg, size_t len)
{
	return send_envelope(arg, to, verb, 0, 0, false, msg, len);
}

static void request_timeout(void *arg)
{
	struct pending *p = arg;
	struct transport *t = p->t;
	transport_response_fn cb = p->cb;
	void *cb_arg = p->arg;
	t->stats.timeouts++;
	pending_free(p);
	err_set(ERR_TIMEOUT, "no response in time");
	cb(cb_arg, -1, NULL, 0);
}

int transport_request(struct transport *t, const struct inet_addr *to,
		      uint32_t verb, const void *payload, size_t len,
		      uint64_t timeout_ms, transport_response_fn cb, void *arg)
{
	struct pending *p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(ERR_NOMEM, "request");
	p->timer = env_timer_new(t->env, request_timeout, p);
	if (!p->timer) {
		free(p);
		return -1;
	}
	p->t = t;
	p->id = ++t->next_id;
	p->cb = cb;
	p->arg = arg;
	if (send_envelope(t, to, verb, p->id, wall_ms(t) + (int64_t)timeout_ms,
			  false, payload, len) != 0) {
		env_timer_free(t->env, p->timer);
		free(p);
		return -1;
	}
	p->next = t->pending;
	if (p->next)
		p->next->prev = p;
	t->pending = p;
	env_timer_arm(t->env, p->timer, timeout_ms * 1000u);
	return 0;
}

int transport_respond(struct transport *t, const struct inet_addr *to,
		      uint32_t verb, uint64_t request_id, const void *payload,
		      size_t len)
{
	return send_envelope(t, to, verb, request_id, 0, true, payload, len);
}

int transport_set_handler(struct transport *t, uint32_t verb,
			  transport_handler_fn fn, void *arg)
{
	if (verb == 0 || verb > TRANSPORT_MAX_VERB)
		return err_set(ERR_INVALID, "verb %u out of range", verb);
	t->handlers[verb].fn = fn;
	t->handlers[verb].arg = arg;
	return 0;
}

int transport_prefer(struct transport *t, const struct inet_addr *ep,
		     const struct inet_addr *via)
{
	struct inet_addr want =
		via && !inet_addr_eq(via, ep) ? *via : (struct inet_addr){0};
	struct peer *p = peer_find(t, ep);
	if (!p && want.family == INET_NONE)
		return 0;
	if (!p && !(p = peer_get(t, ep)))
		return -1;
	if (inet_addr_eq(&p->via, &want))
		return 0;
	char a[INET_ADDR_STRLEN], b[INET_ADDR_STRLEN];
	LOG_INFO("connecting to %s at %s", fmt(ep, a),
		 fmt(want.family != INET_NONE ? &want : ep, b));
	p->via = want;
	p->backoff_ms = 0;
	p->retry_at_us = 0;
	struct conn *c = p->out;
	if (!c)
		return 0;
	/* The old connection drains what is queued on it, then closes. */
	p->out = NULL;
	c->peer = NULL;
	c->retired = true;
	c->next = t->retired;
	t->retired = c;
	if (c->closing)
		return 0;
	conn_close_after_flush(c);
	return 0;
}

void transport_set_tls(struct transport *t, struct ssl_ctx_st *server,
		       struct ssl_ctx_st *client)
{
	t->cfg.tls_server = server;
	t->cfg.tls_client = client;
}

void transport_reconsider(struct transport *t, const struct inet_addr *ep)
{
	struct peer *p = peer_find(t, ep);
	struct transport_location loc;
	if (!p || !p->out || p->out->closing ||
	    p->out->tls == (p->tls_fallback || must_encrypt(t, ep, &loc)))
		return;
	char a[INET_ADDR_STRLEN];
	LOG_INFO("reconnecting to %s %s (internode_encryption %s)", fmt(ep, a),
		 p->out->tls ? "in plaintext" : "over TLS",
		 encryption_name(t->cfg.encryption));
	struct conn *c = p->out;
	p->out = NULL;
	p->backoff_ms = 0;
	p->retry_at_us = 0;
	c->peer = NULL;
	c->retired = true;
	c->next = t->retired;
	t->retired = c;
	conn_close_after_flush(c);
}

struct inet_addr transport_connect_address(const struct transport *t,
					   const struct inet_addr *ep)
{
	for (struct peer *p = t->peers; p; p = p->next)
		if (inet_addr_eq(&p->addr, ep))
			return *peer_via(p);
	return *ep;
}

bool transport_connected(const struct transport *t, const struct inet_addr *to)
{
	for (struct peer *p = t->peers; p; p = p->next)
		if (inet_addr_eq(&p->addr, to))
			return p->out && p->out->handshaken;
	return false;
}

static void describe_conn(const struct conn *c, const char *dir,
			  struct buf *out)
{
	char a[INET_ADDR_STRLEN];
	fmt(&c->remote, a);
	SSL *ssl = c->tls ? bufferevent_openssl_get_ssl(c->bev) : NULL;
	if (ssl)
		admin_printf(
			out, "%s %s encrypted %s %s\n", dir, a,
			SSL_get_version(ssl),
			SSL_CIPHER_standard_name(SSL_get_current_cipher(ssl)));
	else
		admin_printf(out, "%s %s plaintext\n", dir, a);
}

void transport_describe_connections(const struct transport *t, struct buf *out)
{
	for (const struct peer *p = t->peers; p; p = p->next)
		if (p->out && p->out->handshaken)
			describe_conn(p->out, "outbound", out);
	for (const struct conn *c = t->inbound; c; c = c->next)
		if (c->handshaken)
			describe_conn(c, "inbound", out);
}

/* A conn's frames not yet taken by its socket, and their bytes. */
static void conn_pending(const struct conn *c, uint64_t *count, uint64_t *bytes)
{
	*count += c->qn;
	for (size_t i = 0; i < c->qn; i++)
		*bytes += c->qlen[(c->qhead + i) % c->qcap];
	*bytes -= c->qn ? c->qdone : 0;
}

size_t transport_outbound_peers(const struct transport *t,
				struct transport_outbound_stats *out,
				size_t cap)
{
	size_t n = 0;
	for (const struct peer *p = t->peers; p; p = p->next, n++) {
		if (n >= cap)
			continue;
		struct transport_outbound_stats *o = &out[n];
		*o = p->st;
		o->addr = p->addr;
		o->pending_count = p->held_count;
		o->pending_bytes = p->held_bytes;
		if (p->out)
			conn_pending(p->out, &o->pending_count,
				     &o->pending_bytes);
		for (const struct conn *c = t->retired; c; c = c->next)
			if (c->owner == p)
				conn_pending(c, &o->pending_count,
					     &o->pending_bytes);
		o->active_connections = p->out && p->out->handshaken;
	}
	return n;
}

size_t transport_inbound_peers(const struct transport *t,
			       struct transport_inbound_stats *out, size_t cap)
{
	size_t n = 0;
	for (const struct inbound_peer *p = t->inbound_peers; p;
	     p = p->next, n++) {
		if (n >= cap)
			continue;
		out[n] = p->st;
		out[n].using_bytes = 0;
		for (const struct conn *c = t->inbound; c; c = c->next)
			if (c->in == p && c->bev)
				out[n].using_bytes += evbuffer_get_length(
					bufferevent_get_input(c->bev));
	}
	return n;
}

void transport_get_stats(const struct transport *t, struct transport_stats *out)
{
	*out = t->stats;
}

int transport_enable_faults(struct transport *t)
{
	if (!t->faults)
		t->faults = netfault_new(t->env);
	return t->faults ? 0 : -1;
}

bool transport_faults_enabled(const struct transport *t)
{
	return t->faults != NULL;
}

static int faults_off(void)
{
	return err_set(ERR_INVALID,
		       "fault injection is off on this node (it is for test "
		       "clusters: set test_fault_injection: true in "
		       "node.yaml)");
}

int transport_fault_set(struct transport *t, const struct inet_addr *to,
			const struct netfault_link *l)
{
	if (!t->faults)
		return faults_off();
	return netfault_set(t->faults, to, l);
}

int transport_fault_clear(struct transport *t, const struct inet_addr *to)
{
	if (!t->faults)
		return faults_off();
	size_t gone = netfault_clear(t->faults, to);
	for (struct peer *p = t->peers; p; p = p->next)
		if (p->held && (!to || inet_addr_eq(&p->addr, to)))
			peer_release(p, true);
	return (int)gone;
}

int transport_fault_describe(struct transport *t, struct buf *out)
{
	if (!t->faults)
		return faults_off();
	netfault_describe(t->faults, out);
	for (struct peer *p = t->peers; p; p = p->next) {
		if (!p->held)
			continue;
		char a[INET_ADDR_STRLEN];
		admin_printf(out, "held for %s: %zu messages, %zu bytes\n",
			     fmt(&p->addr, a), p->held_count, p->held_bytes);
	}
	return 0;
}

static void copy_field(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

struct transport *transport_new(struct event_base *base, struct env *env,
				const struct transport_config *cfg)
{
	struct transport *t = calloc(1, sizeof(*t));
	if (!t) {
		err_set(ERR_NOMEM, "transport");
		return NULL;
	}
	t->base = base;
	t->env = env;
	t->cfg = *cfg;
	if (!t->cfg.max_queue_bytes)
		t->cfg.max_queue_bytes = 2 * t->cfg.max_message_size;
	if (!t->cfg.connect_timeout_ms)
		t->cfg.connect_timeout_ms = 2000;
	copy_field(t->hs.cluster_name, sizeof(t->hs.cluster_name),
		   cfg->cluster_name);
	copy_field(t->hs.partitioner, sizeof(t->hs.partitioner),
		   cfg->partitioner);
	copy_field(t->hs.host_id, sizeof(t->hs.host_id), cfg->host_id);
	copy_field(t->hs.dc, sizeof(t->hs.dc), cfg->dc);
	copy_field(t->hs.rack, sizeof(t->hs.rack), cfg->rack);
	t->hs.version = MESSAGING_VERSION;
	if (t->cfg.broadcast.family == INET_NONE)
		t->cfg.broadcast = cfg->listen;
	t->hs.addr = t->cfg.broadcast;
	return t;
}

static struct evconnlistener *
listen_on(struct transport *t, const struct inet_addr *addr, const char *what)
{
	char a[INET_ADDR_STRLEN];
	struct sockaddr_storage ss;
	size_t sl = inet_addr_to_sockaddr(addr, &ss);
	fmt(addr, a);
	struct evconnlistener *l = evconnlistener_new_bind(
		t->base, accept_cb, t,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
			LEV_OPT_CLOSE_ON_EXEC,
		128, (struct sockaddr *)&ss, (int)sl);
	if (!l) {
		err_set_errno(errno, "cannot listen on %s (%s)", a, what);
		return NULL;
	}
	LOG_INFO("internode messaging listening on %s", a);
	return l;
}

int transport_listen(struct transport *t)
{
	t->listener = listen_on(t, &t->cfg.listen, "storage_port");
	if (!t->listener)
		return -1;
	if (t->cfg.listen_on_broadcast &&
	    !inet_addr_eq(&t->cfg.broadcast, &t->cfg.listen) &&
	    !(t->listener_broadcast = listen_on(t, &t->cfg.broadcast,
						"listen_on_broadcast_address")))
		return -1;
	return 0;
}

void transport_delete(struct transport *t)
{
	if (!t)
		return;
	if (t->listener)
		evconnlistener_free(t->listener);
	if (t->listener_broadcast)
		evconnlistener_free(t->listener_broadcast);
	while (t->inbound)
		conn_free(t->inbound);
	while (t->retired)
		conn_free(t->retired);
	while (t->peers) {
		struct peer *p = t->peers;
		t->peers = p->next;
		peer_free(p);
	}
	while (t->pending)
		pending_free(t->pending);
	while (t->inbound_peers) {
		struct inbound_peer *p = t->inbound_peers;
		t->inbound_peers = p->next;
		free(p);
	}
	buf_free(&t->frame);
	netfault_delete(t->faults);
	free(t);
}
