/*
 * Internode transport: the object and its messages (transport.h has the
 * protocol and its rules; transport_internal.h says which file owns what).
 * Here: new / listen / delete, framing envelopes and handing them to the
 * peer table, requests awaiting a response (each with an env timer that
 * fails it with ERR_TIMEOUT), the verb handlers, and where a received
 * envelope goes.
 */
#define LOG_MODULE "messaging"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "node/messaging_msg.h"
#include "node/transport_internal.h"

#include <errno.h>
#include <event2/listener.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int64_t wall_ms(struct transport *t)
{
	return env_wall_us(t->env) / 1000;
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

void transport_deliver(struct conn *c, const struct messaging_envelope *e,
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
	return transport_peer_write(t, to, &t->frame);
}

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

void transport_set_tls(struct transport *t, struct ssl_ctx_st *server,
		       struct ssl_ctx_st *client)
{
	t->cfg.tls_server = server;
	t->cfg.tls_client = client;
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
		t->base, transport_accept, t,
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
		transport_conn_free(t->inbound);
	while (t->retired)
		transport_conn_free(t->retired);
	while (t->peers) {
		struct peer *p = t->peers;
		t->peers = p->next;
		transport_peer_free(p);
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
