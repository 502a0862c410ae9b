/*
 * Internode transport: what it counts and tells (transport_internal.h says
 * which file owns what). The per-peer counters behind
 * system_views.internode_inbound / internode_outbound: an inbound peer's
 * made on its first handshaken connection and kept, an outbound peer's in
 * its peer; the ring of frame sizes on an outbound connection that tells
 * which queued frames the socket has taken (sent) and which not yet
 * (pending), and counts those lost with it (error); transport_stats; and
 * the connections' TLS state for `internodeconnections`.
 */
#include "common/buf.h"
#include "node/admin.h"
#include "node/transport_internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>
#include <stdlib.h>

/* The counters of messages from `a`, made on its first connection (NULL
 * without memory: that connection goes uncounted). */
struct inbound_peer *transport_inbound_peer_get(struct transport *t,
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

/* The socket took `n` more bytes of an outbound connection's output. */
void transport_conn_drained(struct evbuffer *b,
			    const struct evbuffer_cb_info *i, void *arg)
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
int transport_conn_queued(struct conn *c, size_t len)
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
void transport_conn_lose_queue(struct conn *c)
{
	if (c->bev)
		evbuffer_remove_cb(bufferevent_get_output(c->bev),
				   transport_conn_drained, c);
	for (; c->owner && c->qn > 0; c->qn--) {
		c->owner->st.error_count++;
		c->owner->st.error_bytes += c->qlen[c->qhead];
		c->qhead = (c->qhead + 1) % c->qcap;
	}
	free(c->qlen);
	c->qlen = NULL;
	c->qn = c->qcap = 0;
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
