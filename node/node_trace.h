/*
 * Query tracing (system_traces.sessions and .events): a wrapper in front
 * of the executor that opens a trace session for a statement with the
 * TRACING flag or one picked by the trace probability, answers a traced
 * request with the session id, and writes the session asynchronously.
 * node_trace.c's opening comment has the details. Loop thread only.
 */
#ifndef CASSINI_NODE_TRACE_H
#define CASSINI_NODE_TRACE_H

#include "client/proto/server.h"
#include "common/buf.h"
#include "common/inet.h"

#include <stddef.h>
#include <stdint.h>

struct env;
struct node_trace;

/* `next` runs the statements (the auth wrapper, the executor); `writer`
 * runs the trace writes, QUERYs of unlogged batches marked internal (the
 * executor itself: cql_exec_execute); `self` is the node's broadcast
 * address with its storage port (coordinator, source). `env` and what
 * `writer` uses must outlive the tracer. NULL on ERR_NOMEM. */
struct node_trace *node_trace_new(struct env *env,
				  const struct cql_executor *writer,
				  const struct cql_executor *next,
				  const struct inet_addr *self);
void node_trace_delete(struct node_trace *t);

/* The executor to give the server (traces = true). */
struct cql_executor node_trace_executor(struct node_trace *t);

/* nodetool settraceprobability: 0 (the default) to 1; -1 (ERR_INVALID)
 * outside. */
int node_trace_set_probability(struct node_trace *t, double p);
double node_trace_probability(const struct node_trace *t);

/* An event this node records for a session another part of the node (a
 * replica serving an internode request, the replication coordinator)
 * took part in: session id (16 bytes), Cassandra's thread name, the
 * microseconds since this node began the step. Source: `self`. Queued and
 * written with the others of this loop turn as one unlogged batch, later,
 * like the coordinator's events; never blocks. */
void node_trace_remote_event(struct node_trace *t, const uint8_t *session,
			     const char *thread, int64_t elapsed_us,
			     const char *activity);

/* One session's rows, as node_trace_batch_text writes them. */
struct node_trace_row_event {
	uint8_t id[16]; /* timeuuid */
	int64_t elapsed_us;
	const char *activity;
};

struct node_trace_rows {
	uint8_t session_id[16];
	int64_t started_wall_us;
	int64_t duration_us;
	struct inet_addr client, coordinator;
	const char *query;       /* or NULL */
	const char *consistency; /* or NULL */
	const char *request;
	const struct node_trace_row_event *events;
	size_t event_count;
};

/* The CQL text of the unlogged batch that writes `r` (events, then the
 * sessions row, every cell with TTL 86400), appended to `out`. With
 * `request` NULL, the events only (a long session's earlier batches). */
int node_trace_batch_text(const struct node_trace_rows *r, struct buf *out);

#endif
