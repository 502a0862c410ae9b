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

/* Adds one gossip endpoint to the builder when it belongs in the ring. */
static void add_endpoint(struct ring_builder *b,
			 const struct gossip_endpoint_info *info)
{
	const char *tok = info->states[GOSSIP_STATE_TOKENS];
	const char *dc = info->states[GOSSIP_STATE_DC];
	const char *rack = info->states[GOSSIP_STATE_RACK];
	const char *hid = info->states[GOSSIP_STATE_HOST_ID];
	if (!tok || !dc || !rack || !hid || !*dc || !*rack)
		return;
	struct ring_endpoint ep = {.addr = info->addr, .dc = dc, .rack = rack};
	switch (info->status) {
	case GOSSIP_STATUS_LEFT:
		return;
	case GOSSIP_STATUS_LEAVING:
		ep.status = RING_STATUS_LEAVING;
		break;
	case GOSSIP_STATUS_BOOT:
		ep.status = RING_STATUS_BOOT;
		break;
	default:
		ep.status = RING_STATUS_NORMAL;
		break;
	}
	int64_t *tokens;
	if (members_parse_host_id(hid, ep.host_id) != 0 ||
	    tokens_parse(tok, &tokens, &ep.num_tokens) != 0) {
		LOG_WARN("leaving an endpoint out of the ring: %s", err_msg());
		return;
	}
	ep.tokens = tokens;
	if (ring_builder_set_endpoint(b, &ep) != 0)
		LOG_WARN("leaving an endpoint out of the ring: %s", err_msg());
	free(tokens);
}

static struct ring *build(struct members *m)
{
	struct ring_builder *b = ring_builder_new();
	if (!b)
		return NULL;
	ring_builder_set_local(b, &m->self);
	for (size_t i = 0; i < gossip_endpoint_count(m->g); i++) {
		struct gossip_endpoint_info info;
		if (gossip_endpoint_at(m->g, i, &info) == 0)
			add_endpoint(b, &info);
	}
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
	struct gossip_listener l = {.on_join = on_join, .on_change = on_change,
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
