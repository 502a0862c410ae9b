/*
 * What the files of the internode transport share (transport.h has the
 * protocol and its rules). Not for use outside node/transport*.c.
 *
 *   transport.c        the transport object (new, listen, delete), framing
 *                      and sending envelopes, requests awaiting responses
 *                      and their timers, handlers, delivery of what arrives
 *   transport_conn.c   connections: accepting (TLS or plaintext by the
 *                      first byte), connecting, handshakes and who may
 *                      connect how (internode_encryption), reading frames,
 *                      errors and closing
 *   transport_peers.c  the peer table: outbound queues, backoff, preferred
 *                      addresses, frames a faulty link holds (test clusters)
 *   transport_stats.c  the counters: transport_stats, the per-peer inbound
 *                      and outbound ones behind system_views.internode_*
 *                      (with the ring of frame sizes that tells sent from
 *                      pending), internodeconnections
 *
 * Objects: a `peer` per address we send to, holding at most one outbound
 * `conn`; inbound `conn`s in a list; `pending` requests awaiting a response,
 * each with an env timer. A conn is freed only from its own callbacks or
 * from transport_delete, and frame processing stops as soon as it is.
 */
#ifndef CASSINI_NODE_TRANSPORT_INTERNAL_H
#define CASSINI_NODE_TRANSPORT_INTERNAL_H

#include "common/buf.h"
#include "common/env.h"
#include "common/inet.h"
#include "node/messaging_msg.h"
#include "node/netfault.h"
#include "node/transport.h"

#include <event2/buffer.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bufferevent;
struct event;

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

static inline const char *fmt(const struct inet_addr *a, char *buf)
{
	return inet_addr_format(a, buf, INET_ADDR_STRLEN);
}

/* transport.c */
/* A decoded envelope from inbound `c` (a frame of `frame_len` bytes): to
 * its request's callback, its verb's handler, or the env's receiver. */
void transport_deliver(struct conn *c, const struct messaging_envelope *e,
		       size_t frame_len);

/* transport_conn.c */
void transport_accept(struct evconnlistener *l, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg);
/* Opens p's outbound connection and queues our handshake on it. */
int transport_peer_connect(struct transport *t, struct peer *p);
void transport_conn_free(struct conn *c);
/* Sends what is queued (a last handshake), then frees the conn. */
void transport_conn_close_after_flush(struct conn *c);
const char *transport_encryption_name(enum transport_encryption e);
/* Whether the mode covers the peer named `ep` (`loc`: where it is). */
bool transport_must_encrypt(struct transport *t, const struct inet_addr *ep,
			    struct transport_location *loc);

/* transport_peers.c */
struct peer *transport_peer_find(struct transport *t,
				 const struct inet_addr *a);
/* Where connections to `p` go: its preferred address, else its name. */
const struct inet_addr *transport_peer_via(const struct peer *p);
/* p's outbound connection went: the next one waits out a backoff. */
void transport_peer_disconnected(struct transport *t, struct peer *p);
/* Queues one framed message for `to`, through its faulty link if any. */
int transport_peer_write(struct transport *t, const struct inet_addr *to,
			 const struct buf *frame);
void transport_peer_free(struct peer *p);

/* transport_stats.c */
struct inbound_peer *transport_inbound_peer_get(struct transport *t,
						const struct inet_addr *a);
/* The evbuffer callback on an outbound conn's output (its sent counts). */
void transport_conn_drained(struct evbuffer *b,
			    const struct evbuffer_cb_info *i, void *arg);
int transport_conn_queued(struct conn *c, size_t len);
void transport_conn_lose_queue(struct conn *c);

#endif
