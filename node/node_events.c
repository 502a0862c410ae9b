/*
 * What this node tells others when a peer changes, from gossip:
 *
 *   hinted handoff's cues (by host id): a peer came up (deliver its
 *   hints), went down (start its hint window), or left the ring or was
 *   removed (drop its hints, as Cassandra's excise does);
 *
 *   the drivers' events, as Cassandra's server sends them to the clients
 *   registered for them (a driver's control connection follows the
 *   cluster by them): TOPOLOGY_CHANGE NEW_NODE when a peer joins the ring
 *   (NORMAL for the first time), REMOVED_NODE when it leaves (LEFT);
 *   STATUS_CHANGE UP when a peer is alive with its native port open
 *   (RPC_READY), DOWN when it is convicted or shuts down. Each names the
 *   peer's native address. Without them a driver would go on sending to a
 *   node that left and would not learn of a new one until it reconnects.
 */
#define LOG_MODULE "node"
#include "common/err.h"
#include "common/log.h"
#include "gossip/gossip.h"
#include "node/cql_data.h"
#include "node/cql_service.h"
#include "node/members.h"
#include "node/node_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct node_events {
	struct node *n;
	/* peers announced as NEW_NODE (ring members), so a restart (a new
	 * generation, NORMAL again) is not a new node */
	struct inet_addr *members;
	size_t count, cap;
};

static void hint_cue(struct node *n, const struct gossip_endpoint_info *info,
		     enum cql_data_peer_event ev)
{
	uint8_t id[16];
	if (!info->states[GOSSIP_STATE_HOST_ID] ||
	    members_parse_host_id(info->states[GOSSIP_STATE_HOST_ID], id) != 0)
		return;
	cql_service_peer_event(n->cql, id, ev);
}

static void driver_event(struct node *n,
			 const struct gossip_endpoint_info *info, bool topology,
			 const char *change)
{
	const char *text = info->states[GOSSIP_STATE_NATIVE_ADDRESS_AND_PORT];
	struct inet_addr native;
	if (!text || inet_addr_parse(text, 9042, &native) != 0)
		return;
	cql_service_node_event(n->cql, topology, change, &native);
}

static bool peer(struct node *n, const struct inet_addr *ep,
		 struct gossip_endpoint_info *info)
{
	return n->cql && gossip_endpoint_find(n->gossip, ep, info) == 0 &&
	       !info->is_self;
}

static ssize_t member_index(struct node_events *e, const struct inet_addr *a)
{
	for (size_t i = 0; i < e->count; i++)
		if (inet_addr_eq(&e->members[i], a))
			return (ssize_t)i;
	return -1;
}

static void on_alive(void *arg, const struct inet_addr *ep)
{
	struct node_events *e = arg;
	struct gossip_endpoint_info info;
	if (!peer(e->n, ep, &info))
		return;
	hint_cue(e->n, &info, CQL_DATA_PEER_UP);
	const char *ready = info.states[GOSSIP_STATE_RPC_READY];
	if (ready && strcmp(ready, "true") == 0)
		driver_event(e->n, &info, false, "UP");
}

static void on_dead(void *arg, const struct inet_addr *ep)
{
	struct node_events *e = arg;
	struct gossip_endpoint_info info;
	if (!peer(e->n, ep, &info))
		return;
	hint_cue(e->n, &info, CQL_DATA_PEER_DOWN);
	driver_event(e->n, &info, false, "DOWN");
}

static void on_remove(void *arg, const struct inet_addr *ep)
{
	struct node_events *e = arg;
	struct gossip_endpoint_info info;
	if (peer(e->n, ep, &info))
		hint_cue(e->n, &info, CQL_DATA_PEER_REMOVED);
}

static void joined(struct node_events *e,
		   const struct gossip_endpoint_info *info)
{
	if (member_index(e, &info->addr) >= 0)
		return;
	if (e->count == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 16;
		struct inet_addr *m = realloc(e->members, cap * sizeof(*m));
		if (!m) {
			LOG_WARN("cannot track ring members: out of memory");
			return;
		}
		e->members = m;
		e->cap = cap;
	}
	e->members[e->count++] = info->addr;
	driver_event(e->n, info, true, "NEW_NODE");
}

static void left(struct node_events *e, const struct gossip_endpoint_info *info)
{
	hint_cue(e->n, info, CQL_DATA_PEER_REMOVED);
	ssize_t i = member_index(e, &info->addr);
	if (i < 0)
		return;
	e->members[i] = e->members[--e->count];
	driver_event(e->n, info, true, "REMOVED_NODE");
}

static void on_change(void *arg, const struct inet_addr *ep,
		      enum gossip_app_state key, const char *value)
{
	struct node_events *e = arg;
	struct gossip_endpoint_info info;
	if (!peer(e->n, ep, &info))
		return;
	if (key == GOSSIP_STATE_STATUS_WITH_PORT) {
		enum gossip_status st = gossip_status_parse(value);
		if (st == GOSSIP_STATUS_NORMAL)
			joined(e, &info);
		else if (st == GOSSIP_STATUS_LEFT)
			left(e, &info);
	} else if (key == GOSSIP_STATE_RPC_READY && info.alive &&
		   strcmp(value, "true") == 0) {
		driver_event(e->n, &info, false, "UP");
	}
}

int node_events_new(struct node *n)
{
	struct node_events *e = calloc(1, sizeof(*e));
	if (!e)
		return err_set(ERR_NOMEM, "node events");
	e->n = n;
	struct gossip_listener l = {.on_change = on_change,
				    .on_alive = on_alive,
				    .on_dead = on_dead,
				    .on_remove = on_remove};
	if (gossip_subscribe(n->gossip, &l, e) != 0) {
		free(e);
		return -1;
	}
	n->events = e;
	return 0;
}

void node_events_delete(struct node_events *e)
{
	if (!e)
		return;
	free(e->members);
	free(e);
}
