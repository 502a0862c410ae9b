/*
 * The ring as gossip describes it: node/'s narrow bridge between gossip and
 * ring/. It subscribes to gossip, marks itself stale when an endpoint's
 * TOKENS, STATUS_WITH_PORT, DC, RACK or HOST_ID change (or an endpoint
 * joins or is removed), and rebuilds an immutable `struct ring` on the next
 * members_ring() call.
 *
 * Endpoints enter the ring when they have tokens, a dc, a rack and a host
 * id: NORMAL and shutdown (a stopped node keeps its ranges) as
 * RING_STATUS_NORMAL, LEAVING as LEAVING, BOOT as BOOT. LEFT ones do not.
 */
#ifndef CASSINI_NODE_MEMBERS_H
#define CASSINI_NODE_MEMBERS_H

#include "common/inet.h"
#include "gossip/gossip.h"
#include "ring/ring.h"

struct members;

/* Borrowed: the gossip must stay live while the members are. Subscribes. */
struct members *members_new(struct gossip *g, const struct inet_addr *self);
void members_delete(struct members *m);

/* The current ring (rebuilt if gossip changed since the last call), borrowed
 * until the next call; take ring_ref() to keep it. Never NULL: an empty
 * ring until endpoints have tokens. */
struct ring *members_ring(struct members *m);

/* An endpoint of the current ring that joins (BOOT) or leaves (LEAVING),
 * other than `except` (may be NULL), or NULL when the ring is settled.
 * Borrowed like members_ring's ring. */
const struct ring_endpoint *members_moving(struct members *m,
					   const struct inet_addr *except);

/* Parses a UUID text into 16 bytes. */
int members_parse_host_id(const char *text, uint8_t out[16]);

#endif
