/*
 * GossipingPropertyFileSnitch's prefer_local (Cassandra's
 * ReconnectableSnitchHelper): every node gossips its listen address as
 * INTERNAL_ADDRESS_AND_PORT; a node with prefer_local=true in
 * rackdc.properties connects to each peer of its own datacenter on that
 * address rather than the peer's broadcast address, so the traffic of a
 * DC stays on its private network when the nodes are told each other's
 * public (broadcast) addresses, as behind NAT or across clouds. Peers of
 * other DCs are reached on their broadcast address.
 *
 * The peer keeps its name (its broadcast address) everywhere: gossip, the
 * ring, hints, system.peers; only the transport's connect address
 * changes. As in Cassandra, a peer whose DC or internal address changes
 * is looked at again when the news arrives, when it comes up, and for
 * the peers saved from the last run, before gossip starts.
 */
#define LOG_MODULE "node"
#include "common/err.h"
#include "common/log.h"
#include "gossip/gossip.h"
#include "node/node_internal.h"
#include "node/transport.h"

#include <string.h>

static void consider(struct node *n, const struct inet_addr *ep)
{
	struct gossip_endpoint_info info;
	if (gossip_endpoint_find(n->gossip, ep, &info) != 0 || info.is_self)
		return;
	const char *dc = info.states[GOSSIP_STATE_DC];
	const char *internal =
		info.states[GOSSIP_STATE_INTERNAL_ADDRESS_AND_PORT];
	struct inet_addr via;
	if (!dc || !internal || strcmp(dc, n->conf.dc) != 0 ||
	    info.status == GOSSIP_STATUS_LEFT)
		return;
	if (inet_addr_parse(internal, (uint16_t)n->conf.storage_port, &via) !=
	    0) {
		char a[INET_ADDR_STRLEN];
		LOG_WARN("%s gossips INTERNAL_ADDRESS_AND_PORT '%s': %s",
			 inet_addr_format(ep, a, sizeof(a)), internal,
			 err_msg());
		return;
	}
	if (transport_prefer(n->transport, ep, &via) != 0)
		LOG_WARN("prefer_local: %s", err_msg());
}

static void on_join(void *arg, const struct inet_addr *ep)
{
	consider(arg, ep);
}

static void on_change(void *arg, const struct inet_addr *ep,
		      enum gossip_app_state key, const char *value)
{
	(void)value;
	if (key == GOSSIP_STATE_INTERNAL_ADDRESS_AND_PORT ||
	    key == GOSSIP_STATE_DC)
		consider(arg, ep);
}

static void on_alive(void *arg, const struct inet_addr *ep)
{
	consider(arg, ep);
}

int node_prefer_local_start(struct node *n)
{
	char internal[INET_ADDR_STRLEN];
	if (n->conf.endpoint_snitch != CONF_SNITCH_GOSSIPING_PROPERTY_FILE)
		return 0;
	inet_addr_format(&n->conf.listen_address, internal, sizeof(internal));
	if (gossip_set_local_state(n->gossip,
				   GOSSIP_STATE_INTERNAL_ADDRESS_AND_PORT,
				   internal) != 0)
		return -1;
	if (!n->conf.prefer_local)
		return 0;
	struct gossip_listener l = {.on_join = on_join,
				    .on_change = on_change,
				    .on_alive = on_alive};
	return gossip_subscribe(n->gossip, &l, n);
}

void node_prefer_local_sweep(struct node *n)
{
	if (n->conf.endpoint_snitch != CONF_SNITCH_GOSSIPING_PROPERTY_FILE ||
	    !n->conf.prefer_local)
		return;
	for (size_t i = 0; i < gossip_endpoint_count(n->gossip); i++) {
		struct gossip_endpoint_info info;
		if (gossip_endpoint_at(n->gossip, i, &info) == 0)
			consider(n, &info.addr);
	}
}
