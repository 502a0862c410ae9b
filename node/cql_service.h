/*
 * The node's CQL side: the storage engine, the schema (with its log), the
 * data path, the statement executor and the native-protocol server,
 * started and stopped together.
 *
 * Start-up order matters: the schema log is replayed first so the engine
 * knows every table before it replays its commitlog; the client port opens
 * last, when everything behind it works.
 */
#ifndef CASSINI_NODE_CQL_SERVICE_H
#define CASSINI_NODE_CQL_SERVICE_H

#include "client/system_tables.h"
#include "conf/conf.h"

#include <stdint.h>

struct event_base;
struct env;
struct cql_service;

/* The node's current view for system.local / system.peers. */
typedef void (*cql_service_node_info_fn)(void *arg, struct cql_node_info *out);

/* Opens storage under the configured directories, replays the schema log
 * and the commitlog, and listens on rpc_address:native_transport_port.
 * Blocks while replaying (call before the loop runs). NULL with err set. */
struct cql_service *cql_service_new(const struct conf *c, struct event_base *base,
				    struct env *env,
				    cql_service_node_info_fn node_info, void *arg);

/* Flushes memtables (nodetool drain); blocks. */
int cql_service_drain(struct cql_service *s);

/* Closes client connections and stops storage (the commitlog covers what
 * was not flushed). Blocks briefly while workers finish. */
void cql_service_delete(struct cql_service *s);

/* Called (on the loop) after each applied schema change. */
void cql_service_on_schema_change(struct cql_service *s, void (*fn)(void *),
				  void *arg);

/* The schema version system.local reports (for gossip's SCHEMA state). */
void cql_service_schema_version(const struct cql_service *s, uint8_t out[16]);

#endif
