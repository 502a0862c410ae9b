/*
 * Internode transport: the peer table (transport_internal.h says which
 * file owns what). A peer per address we send to: its outbound queue
 * (bounded by max_queue_bytes: ERR_OVERLOADED past it), the backoff
 * between connection attempts (ERR_UNAVAILABLE during it), the address we
 * connect to (prefer_local), the choice of TLS or plaintext as where it is
 * changes, and the frames a faulty link holds on test clusters (released
 * in order by an env timer).
 */
#define LOG_MODULE "messaging"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "node/admin.h"
#include "node/transport_internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 100u
#define BACKOFF_MAX_MS 2000u

struct peer *transport_peer_find(struct transport *t, const struct inet_addr *a)
{
	for (struct peer *p = t->peers; p; p = p->next)
		if (inet_addr_eq(&p->addr, a))
			return p;
	return NULL;
}

static struct peer *peer_get(struct transport *t, const struct inet_addr *to)
{
	struct peer *p = transport_peer_find(t, to);
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

const struct inet_addr *transport_peer_via(const struct peer *p)
{
	return p->via.family != INET_NONE ? &p->via : &p->addr;
}

void transport_peer_disconnected(struct transport *t, struct peer *p)
{
	p->out = NULL;
	p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (p->backoff_ms > BACKOFF_MAX_MS)
		p->backoff_ms = BACKOFF_MAX_MS;
	p->retry_at_us = env_mono_us(t->env) + p->backoff_ms * 1000u;
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
		if (transport_peer_connect(t, p) != 0)
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
	(void)transport_conn_queued(p->out, len);
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

/* Queues one framed message for `to`, through its faulty link if any. */
int transport_peer_write(struct transport *t, const struct inet_addr *to,
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

void transport_peer_free(struct peer *p)
{
	while (p->held) {
		struct held *h = p->held;
		p->held = h->next;
		free(h);
	}
	if (p->held_timer)
		env_timer_free(p->t->env, p->held_timer);
	if (p->out) {
		transport_conn_lose_queue(p->out);
		bufferevent_free(p->out->bev);
		free(p->out);
	}
	free(p);
}

int transport_prefer(struct transport *t, const struct inet_addr *ep,
		     const struct inet_addr *via)
{
	struct inet_addr want =
		via && !inet_addr_eq(via, ep) ? *via : (struct inet_addr){0};
	struct peer *p = transport_peer_find(t, ep);
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
	transport_conn_close_after_flush(c);
	return 0;
}

void transport_reconsider(struct transport *t, const struct inet_addr *ep)
{
	struct peer *p = transport_peer_find(t, ep);
	struct transport_location loc;
	if (!p || !p->out || p->out->closing ||
	    p->out->tls ==
		    (p->tls_fallback || transport_must_encrypt(t, ep, &loc)))
		return;
	char a[INET_ADDR_STRLEN];
	LOG_INFO("reconnecting to %s %s (internode_encryption %s)", fmt(ep, a),
		 p->out->tls ? "in plaintext" : "over TLS",
		 transport_encryption_name(t->cfg.encryption));
	struct conn *c = p->out;
	p->out = NULL;
	p->backoff_ms = 0;
	p->retry_at_us = 0;
	c->peer = NULL;
	c->retired = true;
	c->next = t->retired;
	t->retired = c;
	transport_conn_close_after_flush(c);
}

struct inet_addr transport_connect_address(const struct transport *t,
					   const struct inet_addr *ep)
{
	for (struct peer *p = t->peers; p; p = p->next)
		if (inet_addr_eq(&p->addr, ep))
			return *transport_peer_via(p);
	return *ep;
}

bool transport_connected(const struct transport *t, const struct inet_addr *to)
{
	for (struct peer *p = t->peers; p; p = p->next)
		if (inet_addr_eq(&p->addr, to))
			return p->out && p->out->handshaken;
	return false;
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
