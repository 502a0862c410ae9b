/* Ring from gossip state (see members.h). */
#define LOG_MODULE "node"
#include "node/members.h"

#include "common/err.h"
#include "common/log.h"
#include "node/local_state.h"

#include <stdlib.h>
#include <string.h>

struct members {
	struct gossip *g;
	struct inet_addr self;
	struct ring *ring;
	bool stale;
};

static void on_join(void *arg, const struct inet_addr *ep)
{
	(void)ep;
	((struct members *)arg)->stale = true;
}

static void on_change(void *arg, const struct inet_addr *ep,
		      enum gossip_app_state key, const char *value)
{
	(void)ep;
	(void)value;
	switch (key) {
	case GOSSIP_STATE_TOKENS:
	case GOSSIP_STATE_STATUS_WITH_PORT:
	case GOSSIP_STATE_DC:
	case GOSSIP_STATE_RACK:
	case GOSSIP_STATE_HOST_ID:
		((struct members *)arg)->stale = true;
		break;
	default:
		break;
	}
}

int members_parse_host_id(const char *text, uint8_t out[16])
{
	size_t n = 0;
	for (const char *p = text; *p; p++) {
		if (*p == '-')
			continue;
		int v;
		if (*p >= '0' && *p <= '9')
			v = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			v = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			v = *p - 'A' + 10;
		else
			return err_set(ERR_INVALID, "bad host id '%s'", text);
		if (n >= 32)
			return err_set(ERR_INVALID, "bad host id '%s'", text);
		if (n % 2 == 0)
			out[n / 2] = (uint8_t)(v << 4);
		else
			out[n / 2] |= (uint8_t)v;
		n++;
	}
	return n == 32 ? 0 : err_set(ERR_INVALID, "bad host id '%s'", text);
}

/* One candidate endpoint with its parsed tokens. */
struct cand {
	struct ring_endpoint ep;
	int64_t *tokens;
};

struct claim {
	int64_t token;
	size_t cand;
};

static int cmp_claim(const void *a, const void *b)
{
	const struct claim *x = a, *y = b;
	if (x->token != y->token)
		return x->token < y->token ? -1 : 1;
	return x->cand < y->cand ? -1 : x->cand > y->cand;
}

/* Fills `c` when the gossip endpoint belongs in the ring. */
static bool candidate(const struct gossip_endpoint_info *info, struct cand *c)
{
	const char *tok = info->states[GOSSIP_STATE_TOKENS];
	const char *dc = info->states[GOSSIP_STATE_DC];
	const char *rack = info->states[GOSSIP_STATE_RACK];
	const char *hid = info->states[GOSSIP_STATE_HOST_ID];
	if (!tok || !dc || !rack || !hid || !*dc || !*rack ||
	    info->status == GOSSIP_STATUS_LEFT)
		return false;
	memset(c, 0, sizeof(*c));
	c->ep.addr = info->addr;
	c->ep.dc = dc;
	c->ep.rack = rack;
	c->ep.status =
		info->status == GOSSIP_STATUS_LEAVING ? RING_STATUS_LEAVING
		: info->status == GOSSIP_STATUS_BOOT  ? RING_STATUS_BOOT
						      : RING_STATUS_NORMAL;
	if (members_parse_host_id(hid, c->ep.host_id) != 0 ||
	    node_tokens_parse(tok, &c->tokens, &c->ep.num_tokens) != 0) {
		LOG_WARN("leaving an endpoint out of the ring: %s", err_msg());
		return false;
	}
	return true;
}

/*
 * Two endpoints claiming one token would make the ring unbuildable; as
 * Cassandra settles such a collision for one owner, the endpoint first in
 * address order keeps the token and the other's claim is left out (logged).
 */
static void drop_collisions(struct cand *c, size_t n)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += c[i].ep.num_tokens;
	struct claim *cl = malloc((total ? total : 1) * sizeof(*cl));
	if (!cl)
		return;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < c[i].ep.num_tokens; j++)
			cl[k++] = (struct claim){c[i].tokens[j], i};
	qsort(cl, total, sizeof(*cl), cmp_claim);
	for (size_t i = 1; i < total; i++) {
		if (cl[i].token != cl[i - 1].token ||
		    cl[i].cand == cl[i - 1].cand)
			continue;
		struct cand *loser = &c[cl[i].cand];
		char a[INET_ADDR_STRLEN];
		LOG_WARN("token %lld is claimed twice; %s's claim is ignored",
			 (long long)cl[i].token,
			 inet_addr_format(&loser->ep.addr, a, sizeof(a)));
		for (size_t j = 0; j < loser->ep.num_tokens; j++)
			if (loser->tokens[j] == cl[i].token) {
				loser->tokens[j] =
					loser->tokens[--loser->ep.num_tokens];
				break;
			}
	}
	free(cl);
}

static struct ring *build(struct members *m)
{
	struct ring_builder *b = ring_builder_new();
	size_t count = gossip_endpoint_count(m->g), n = 0;
	struct cand *c = calloc(count ? count : 1, sizeof(*c));
	if (!b || !c) {
		ring_builder_delete(b);
		free(c);
		err_set(ERR_NOMEM, "ring");
		return NULL;
	}
	ring_builder_set_local(b, &m->self);
	for (size_t i = 0; i < count; i++) {
		struct gossip_endpoint_info info;
		if (gossip_endpoint_at(m->g, i, &info) == 0 &&
		    candidate(&info, &c[n]))
			n++;
	}
	drop_collisions(c, n);
	for (size_t i = 0; i < n; i++) {
		c[i].ep.tokens = c[i].tokens;
		if (c[i].ep.num_tokens &&
		    ring_builder_set_endpoint(b, &c[i].ep) != 0)
			LOG_WARN("leaving an endpoint out of the ring: %s",
				 err_msg());
		free(c[i].tokens);
	}
	free(c);
	struct ring *r = ring_builder_build(b);
	ring_builder_delete(b);
	return r;
}

struct members *members_new(struct gossip *g, const struct inet_addr *self)
{
	struct members *m = calloc(1, sizeof(*m));
	if (!m) {
		err_set(ERR_NOMEM, "members");
		return NULL;
	}
	m->g = g;
	m->self = *self;
	m->stale = true;
	struct gossip_listener l = {.on_join = on_join,
				    .on_change = on_change,
				    .on_remove = on_join};
	m->ring = build(m);
	if (!m->ring || gossip_subscribe(g, &l, m) != 0) {
		members_delete(m);
		return NULL;
	}
	return m;
}

void members_delete(struct members *m)
{
	if (!m)
		return;
	ring_unref(m->ring);
	free(m);
}

const struct ring_endpoint *members_moving(struct members *m,
					   const struct inet_addr *except)
{
	struct ring *r = members_ring(m);
	for (size_t i = 0; i < ring_endpoint_count(r); i++) {
		const struct ring_endpoint *e = ring_endpoint_get(r, i);
		if ((e->status == RING_STATUS_BOOT ||
		     e->status == RING_STATUS_LEAVING) &&
		    (!except || !inet_addr_eq(&e->addr, except)))
			return e;
	}
	return NULL;
}

struct ring *members_ring(struct members *m)
{
	if (m->stale) {
		struct ring *r = build(m);
		if (r) {
			ring_unref(m->ring);
			m->ring = r;
			m->stale = false;
		} else {
			LOG_WARN("keeping the previous ring: %s", err_msg());
		}
	}
	return m->ring;
}
