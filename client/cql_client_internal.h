/*
 * What the blocking helpers (cql_client_sync.c) need from the client's
 * internals.
 */
#ifndef CASSINI_CLIENT_CQL_CLIENT_INTERNAL_H
#define CASSINI_CLIENT_CQL_CLIENT_INTERNAL_H

#include "client/cql_client.h"

/* The frame being dispatched, valid only inside a request callback. */
struct cql_client_frame {
	uint8_t opcode;
	uint8_t flags;
	struct slice body;
};
struct cql_client_frame cql_client_current_frame(const struct cql_client *c);

struct event_base *cql_client_base(const struct cql_client *c);

#endif
