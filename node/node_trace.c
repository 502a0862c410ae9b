/*
 * Query tracing: the coordinator's side of Cassandra's trace sessions.
 *
 * A wrapper in front of the executor. A statement whose frame carries the
 * TRACING flag (cqlsh's TRACING ON, the drivers' trace=True), or one picked
 * by the trace probability (`cassini-tool settraceprobability`), opens a
 * session: a version-1 uuid, the wall time it started, its events. The
 * executor and the data path add events through info->trace
 * (cql_trace_event); each is stamped with a timeuuid and the microseconds
 * since the session began (source_elapsed). When the statement replies, a
 * traced reply gets the session id (response flag 0x02, v4 §2.2) and the
 * session is written to system_traces in unlogged batches run through the
 * executor as internal statements (no batch guards): the events as they
 * come, TRACE_EVENTS_MAX at a time, then the last of them with the
 * sessions row and its duration (what cqlsh and the drivers poll for),
 * every cell with
 * Cassandra's trace TTL (trace_type_query_ttl, 1 day). The batch runs on
 * the loop like any statement (the data path is asynchronous); nothing
 * waits for it, and a failed write loses the trace only (logged at debug).
 *
 * Events of other nodes' sessions: an internode read or mutation request
 * carries its coordinator's session id; the replica's steps (and the
 * replication coordinator's sends) come through node_trace_remote_event
 * and go, each loop turn's together, as one unlogged batch of events
 * rows (source: this node), the same way.
 */
#include "node/node_trace.h"

#include "client/cql/cql_values.h"
#include "client/proto/proto.h"
#include "client/proto/server.h"
#include "common/buf.h"
#include "common/env.h"
#include "common/err.h"
#include "common/inet.h"
#include "common/log.h"
#include "common/uuid.h"
#include "common/zalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Cassandra's trace_type_query_ttl default. */
#define TRACE_TTL_S 86400
/* A session's events are written as they come, in batches of at most
 * this many events or TRACE_BATCH_BYTES of activity text (the last with
 * the sessions row): a session holds no more than one batch's events, and
 * a long one (a traced range walk) keeps them all. A replica's batches are
 * cut at the same count. */
#define TRACE_EVENTS_MAX 256
/* A replica's events go in batches of at most this much CQL text (a
 * session's, of activity text). The batch guards do not apply (the writes
 * are internal), so this only keeps one statement small: the loop parses
 * and applies it in one piece, and it is one mutation message to each
 * system_traces replica, when a slow loop turn gathers many events or an
 * activity is long. */
#define TRACE_BATCH_BYTES 16384

/* One session's batch, waiting for the loop's next turn (never run from
 * inside the reply that ended the session) and then for its answer. */
struct trace_write {
	struct trace_write *next;
	struct buf body; /* QUERY's body: lives until the answer */
};

struct node_trace {
	struct env *env;
	struct env_timer *timer;                     /* runs `pending` */
	struct trace_write *pending, **pending_tail; /* in order */
	struct cql_executor writer;                  /* runs the writes */
	struct cql_executor next;
	struct inet_addr self; /* broadcast address, storage port */
	struct cql_timeuuid_gen ids;
	struct buf remote;   /* the open batch of other sessions' events */
	size_t remote_count; /* events in it */
	double probability;  /* [0, 1] */
	uint64_t sessions;   /* opened, for tests and logs */
};

struct trace_session {
	struct cql_trace sink; /* first: the executor hands it back */
	struct node_trace *t;
	struct cql_request *orig;
	bool reply_id; /* the client asked: the reply carries the id */
	uint8_t id[16];
	int64_t started_wall_us;
	uint64_t started_mono_us;
	struct inet_addr client;
	uint8_t opcode;
	char *query; /* QUERY's text (or NULL) */
	const char *consistency;
	/* the batch being gathered (activities owned) */
	struct node_trace_row_event *events;
	size_t event_count;
	size_t event_bytes; /* their activities' text */
};

static void session_clear_events(struct trace_session *ts)
{
	for (size_t i = 0; i < ts->event_count; i++)
		free((char *)ts->events[i].activity);
	ts->event_count = 0;
	ts->event_bytes = 0;
}

static void session_free(struct trace_session *ts)
{
	session_clear_events(ts);
	free(ts->events);
	free(ts->query);
	free(ts);
}

static void session_flush(struct trace_session *ts, bool last,
			  int64_t duration_us);

static void session_event(struct cql_trace *sink, const char *activity)
{
	struct trace_session *ts = (struct trace_session *)sink;
	if (!ts->events) {
		ts->events = zcalloc(TRACE_EVENTS_MAX, sizeof(*ts->events));
		if (!ts->events)
			return;
	}
	struct node_trace_row_event *e = &ts->events[ts->event_count];
	char *copy = strdup(activity);
	if (!copy)
		return;
	e->activity = copy;
	struct env *env = ts->t->env;
	cql_timeuuid_next(&ts->t->ids, env_wall_us(env), e->id);
	e->elapsed_us = (int64_t)(env_mono_us(env) - ts->started_mono_us);
	ts->event_count++;
	ts->event_bytes += strlen(copy);
	if (ts->event_count == TRACE_EVENTS_MAX ||
	    ts->event_bytes >= TRACE_BATCH_BYTES)
		session_flush(ts, false, 0);
}

/* Cassandra's `request` column for each opcode. */
static const char *request_name(uint8_t opcode)
{
	switch (opcode) {
	case CQL_OP_QUERY:
		return "Execute CQL3 query";
	case CQL_OP_PREPARE:
		return "Preparing CQL3 query";
	case CQL_OP_EXECUTE:
		return "Execute CQL3 prepared query";
	default:
		return "Execute batch of CQL3 queries";
	}
}

static int putf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int putf(struct buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return err_set(ERR_INVALID, "trace field too long");
	return buf_append(b, (const uint8_t *)tmp, (size_t)n);
}

int node_trace_batch_text(const struct node_trace_rows *r, struct buf *out)
{
	char sid[UUID_TEXT_LEN + 1], eid[UUID_TEXT_LEN + 1];
	char self[64], client[64];
	uuid_format(r->session_id, sid);
	inet_addr_format_host(&r->coordinator, self, sizeof(self));
	inet_addr_format_host(&r->client, client, sizeof(client));
	if (putf(out, "BEGIN UNLOGGED BATCH ") != 0)
		return -1;
	for (size_t i = 0; i < r->event_count; i++) {
		uuid_format(r->events[i].id, eid);
		if (putf(out,
			 "INSERT INTO system_traces.events (session_id, "
			 "event_id, activity, source, source_elapsed, "
			 "source_port, thread) VALUES (%s, %s, ",
			 sid, eid) != 0 ||
		    cql_put_string_literal(out, r->events[i].activity) != 0 ||
		    putf(out,
			 ", '%s', %lld, %u, 'Native-Transport-Requests') "
			 "USING TTL %d; ",
			 self, (long long)r->events[i].elapsed_us,
			 (unsigned)r->coordinator.port, TRACE_TTL_S) != 0)
			return -1;
	}
	if (!r->request)
		return putf(out, "APPLY BATCH");
	if (putf(out,
		 "INSERT INTO system_traces.sessions (session_id, client, "
		 "command, coordinator, coordinator_port, duration, "
		 "parameters, request, started_at) VALUES (%s, '%s', 'QUERY', "
		 "'%s', %u, %lld, {",
		 sid, client, self, (unsigned)r->coordinator.port,
		 (long long)r->duration_us) != 0)
		return -1;
	if (r->consistency &&
	    (putf(out, "'consistency_level': ") != 0 ||
	     cql_put_string_literal(out, r->consistency) != 0))
		return -1;
	if (r->query &&
	    (putf(out, "%s'query': ", r->consistency ? ", " : "") != 0 ||
	     cql_put_string_literal(out, r->query) != 0))
		return -1;
	if (putf(out, "}, ") != 0 ||
	    cql_put_string_literal(out, r->request) != 0 ||
	    putf(out, ", %lld) USING TTL %d; APPLY BATCH",
		 (long long)(r->started_wall_us / 1000), TRACE_TTL_S) != 0)
		return -1;
	return 0;
}

static void on_written(void *arg, const uint8_t *frame, size_t len)
{
	struct trace_write *w = arg;
	if (len > 4 && frame[4] == CQL_OP_ERROR)
		LOG_DEBUG("trace: writing a session to system_traces failed");
	buf_free(&w->body);
	free(w);
}

static int queue_text(struct node_trace *t, const struct buf *text)
{
	struct trace_write *w = zcalloc(1, sizeof(*w));
	if (!w)
		return -1;
	buf_init(&w->body);
	if (cql_write_long_string(&w->body, (const char *)text->data,
				  text->len) != 0 ||
	    cql_write_short(&w->body, CQL_CL_ONE) != 0 ||
	    buf_append(&w->body, (const uint8_t *)"", 1) != 0) {
		buf_free(&w->body);
		free(w);
		return -1;
	}
	*t->pending_tail = w;
	t->pending_tail = &w->next;
	env_timer_arm(t->env, t->timer, 0);
	return 0;
}

/* The open batch of other sessions' events, closed and queued. */
static void remote_flush(struct node_trace *t)
{
	if (!t->remote_count)
		return;
	if (putf(&t->remote, "APPLY BATCH") != 0 ||
	    queue_text(t, &t->remote) != 0)
		LOG_DEBUG("trace: replica events dropped: %s", err_msg());
	buf_clear(&t->remote);
	t->remote_count = 0;
}

void node_trace_remote_event(struct node_trace *t, const uint8_t *session,
			     const char *thread, int64_t elapsed_us,
			     const char *activity)
{
	char sid[UUID_TEXT_LEN + 1], eid[UUID_TEXT_LEN + 1], self[64];
	uint8_t id[16];
	cql_timeuuid_next(&t->ids, env_wall_us(t->env), id);
	uuid_format(session, sid);
	uuid_format(id, eid);
	inet_addr_format_host(&t->self, self, sizeof(self));
	size_t mark = t->remote.len;
	if ((t->remote_count == 0 &&
	     putf(&t->remote, "BEGIN UNLOGGED BATCH ") != 0) ||
	    putf(&t->remote,
		 "INSERT INTO system_traces.events (session_id, event_id, "
		 "activity, source, source_elapsed, source_port, thread) "
		 "VALUES (%s, %s, ",
		 sid, eid) != 0 ||
	    cql_put_string_literal(&t->remote, activity) != 0 ||
	    putf(&t->remote, ", '%s', %lld, %u, ", self, (long long)elapsed_us,
		 (unsigned)t->self.port) != 0 ||
	    cql_put_string_literal(&t->remote, thread) != 0 ||
	    putf(&t->remote, ") USING TTL %d; ", TRACE_TTL_S) != 0) {
		t->remote.len = mark; /* this event only is lost */
		if (t->remote_count == 0)
			buf_clear(&t->remote);
		return;
	}
	t->remote_count++;
	if (t->remote_count == TRACE_EVENTS_MAX ||
	    t->remote.len >= TRACE_BATCH_BYTES)
		remote_flush(t);
	else
		env_timer_arm(t->env, t->timer, 0);
}

static void on_timer(void *arg)
{
	struct node_trace *t = arg;
	remote_flush(t);
	struct trace_write *list = t->pending;
	t->pending = NULL;
	t->pending_tail = &t->pending;
	while (list) {
		struct trace_write *w = list;
		list = w->next;
		struct cql_request *req =
			cql_request_detached(on_written, NULL, w);
		if (!req) {
			on_written(w, NULL, 0);
			continue;
		}
		struct cql_request_info info = {
			.version = 4,
			.opcode = CQL_OP_QUERY,
			.internal = true,
		};
		t->writer.execute(t->writer.arg, req, &info, w->body.data,
				  w->body.len);
	}
}

/* The session's gathered events, queued for the writer as one batch and
 * forgotten; `last`: with the sessions row (`duration_us`). */
static void session_flush(struct trace_session *ts, bool last,
			  int64_t duration_us)
{
	struct node_trace *t = ts->t;
	struct node_trace_rows r = {
		.event_count = ts->event_count,
		.started_wall_us = ts->started_wall_us,
		.duration_us = duration_us,
		.client = ts->client,
		.coordinator = t->self,
		.query = ts->query,
		.consistency = ts->consistency,
		.request = last ? request_name(ts->opcode) : NULL,
		.events = ts->events,
	};
	memcpy(r.session_id, ts->id, 16);
	struct buf text;
	buf_init(&text);
	if (node_trace_batch_text(&r, &text) != 0 || queue_text(t, &text) != 0)
		LOG_DEBUG("trace: %s dropped: %s",
			  last ? "session" : "session events", err_msg());
	buf_free(&text);
	session_clear_events(ts);
}

static void on_reply(void *arg, const uint8_t *frame, size_t len)
{
	struct trace_session *ts = arg;
	struct node_trace *t = ts->t;
	int64_t duration = (int64_t)(env_mono_us(t->env) - ts->started_mono_us);
	struct buf out;
	buf_init(&out);
	if (ts->reply_id && (buf_append(&out, frame, len) != 0 ||
			     cql_frame_add_tracing_id(&out, ts->id) != 0)) {
		buf_free(&out);
		ts->reply_id = false; /* still answer, untraced */
	}
	if (ts->reply_id)
		cql_request_reply(ts->orig, out.data, out.len);
	else
		cql_request_reply(ts->orig, frame, len);
	buf_free(&out);
	session_flush(ts, true, duration);
	session_free(ts);
}

static void on_keyspace(void *arg, const char *keyspace)
{
	struct trace_session *ts = arg;
	cql_request_set_keyspace(ts->orig, keyspace);
}

/* QUERY's text and consistency, for the session's parameters. */
static void session_params(struct trace_session *ts,
			   const struct cql_request_info *info,
			   const uint8_t *body, size_t len)
{
	struct arena a;
	arena_create(&a, 0);
	struct cursor c = cursor_make(body, len);
	if (info->opcode == CQL_OP_QUERY) {
		struct cql_query q;
		if (cql_decode_query(&c, info->version, &a, &q) == 0) {
			ts->query =
				strndup((const char *)q.query.ptr, q.query.len);
			ts->consistency =
				cql_consistency_name(q.params.consistency);
		}
	} else if (info->opcode == CQL_OP_EXECUTE) {
		struct cql_execute x;
		if (cql_decode_execute(&c, info->version, &a, &x) == 0)
			ts->consistency =
				cql_consistency_name(x.params.consistency);
	}
	arena_destroy(&a);
}

static void trace_execute(void *arg, struct cql_request *req,
			  const struct cql_request_info *info,
			  const uint8_t *body, size_t len)
{
	struct node_trace *t = arg;
	bool sampled = false;
	if (!info->tracing && t->probability > 0) {
		uint64_t r = env_random(t->env) >> 11; /* 53 bits */
		sampled = (double)r < t->probability * (double)(1ULL << 53);
	}
	struct trace_session *ts = NULL;
	struct cql_request *inner = NULL;
	if ((info->tracing || sampled) && !info->internal &&
	    (ts = zcalloc(1, sizeof(*ts))) &&
	    !(inner = cql_request_detached(on_reply, on_keyspace, ts))) {
		free(ts);
		ts = NULL;
	}
	if (!ts) {
		if (info->tracing) {
			/* asked for and impossible: say so, do not run it
			 * untraced in silence */
			struct buf b;
			buf_init(&b);
			if (cql_encode_error(&b, info->version, info->stream,
					     CQL_ERR_SERVER,
					     "cannot open a trace session: "
					     "out of memory") != 0)
				buf_clear(&b);
			cql_request_reply(req, b.data, b.len);
			buf_free(&b);
			return;
		}
		t->next.execute(t->next.arg, req, info, body, len);
		return;
	}
	t->sessions++;
	ts->sink.event = session_event;
	ts->t = t;
	ts->orig = req;
	ts->reply_id = info->tracing;
	ts->client = info->client;
	ts->opcode = info->opcode;
	ts->started_wall_us = env_wall_us(t->env);
	ts->started_mono_us = env_mono_us(t->env);
	cql_timeuuid_next(&t->ids, ts->started_wall_us, ts->id);
	memcpy(ts->sink.id, ts->id, 16);
	session_params(ts, info, body, len);
	struct cql_request_info traced = *info;
	traced.trace = &ts->sink;
	t->next.execute(t->next.arg, inner, &traced, body, len);
}

struct node_trace *node_trace_new(struct env *env,
				  const struct cql_executor *writer,
				  const struct cql_executor *next,
				  const struct inet_addr *self)
{
	struct node_trace *t = zcalloc(1, sizeof(*t));
	if (!t) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	t->env = env;
	t->writer = *writer;
	t->pending_tail = &t->pending;
	t->next = *next;
	t->self = *self;
	buf_init(&t->remote);
	t->timer = env_timer_new(env, on_timer, t);
	if (!t->timer) {
		free(t);
		return NULL;
	}
	cql_timeuuid_gen_init(&t->ids, env_random(env));
	return t;
}

void node_trace_delete(struct node_trace *t)
{
	if (!t)
		return;
	env_timer_free(t->env, t->timer);
	buf_free(&t->remote);
	while (t->pending) {
		struct trace_write *w = t->pending;
		t->pending = w->next;
		buf_free(&w->body);
		free(w);
	}
	free(t);
}

struct cql_executor node_trace_executor(struct node_trace *t)
{
	struct cql_executor ex = {
		.execute = trace_execute, .arg = t, .traces = true};
	return ex;
}

int node_trace_set_probability(struct node_trace *t, double p)
{
	if (!(p >= 0 && p <= 1))
		return err_set(ERR_INVALID,
			       "Trace probability must be between 0 and 1");
	t->probability = p;
	return 0;
}

double node_trace_probability(const struct node_trace *t)
{
	return t->probability;
}
