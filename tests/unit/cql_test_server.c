/*
 * The CQL connection server with a scripted executor, for driver tests of
 * the connection layer (test_cql_server.py). Statements are test commands:
 *
 *   VOID          RESULT Void
 *   ROWS n        RESULT Rows: one text column, one row of n bytes
 *   SLOW ms       RESULT Void after ms milliseconds
 *   USE name      RESULT Set_keyspace, and the connection remembers it
 *   KEYSPACE      RESULT Rows with the connection's keyspace
 *   EVENT         pushes a SCHEMA_CHANGE to registered connections, Void
 *   anything else Invalid "unknown test statement: ..."
 *   PREPARE       Invalid; EXECUTE: Unprepared with the id; BATCH: Void
 *
 *   cql_test_server [--max-frame N] [--max-connections N]
 *                   [--max-requests N] [--handshake-ms N] [--idle-ms N]
 *
 * Listens on 127.0.0.1 with an ephemeral port, prints "PORT <n>", and runs
 * until SIGTERM.
 */
#include "client/proto/server.h"
#include "common/err.h"

#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slow {
	struct cql_request *req;
	struct cql_request_info info;
	struct event *ev;
};

static struct cql_server *server;
static struct event_base *base;

static void reply(struct cql_request *req, struct buf *b)
{
	cql_request_reply(req, b->data, b->len);
	buf_free(b);
}

static void on_slow(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct slow *s = arg;
	struct buf b;
	buf_init(&b);
	cql_encode_result_void(&b, s->info.version, s->info.stream);
	reply(s->req, &b);
	event_free(s->ev);
	free(s);
}

static int schema_event(struct buf *b, uint8_t version, void *arg)
{
	(void)arg;
	return cql_encode_event_schema(b, version, "CREATED", "TABLE", "ks",
				       "t");
}

static void rows_reply(struct buf *b, const struct cql_request_info *info,
		       const char *value, size_t n)
{
	static const struct cql_type_option text = {.id = CQL_TYPE_VARCHAR};
	static const struct cql_column_spec col = {"test", "t", "v", &text};
	long start = cql_frame_begin(b, info->version, 0, info->stream,
				     CQL_OP_RESULT);
	cql_write_int(b, CQL_RESULT_ROWS);
	cql_write_rows_metadata(b, &col, 1, NULL, false);
	cql_write_int(b, 1);
	cql_write_bytes(b, value, (int32_t)n);
	cql_frame_end(b, start);
}

static void run_query(struct cql_request *req,
		      const struct cql_request_info *info, const char *q)
{
	struct buf b;
	buf_init(&b);
	if (strcmp(q, "VOID") == 0) {
		cql_encode_result_void(&b, info->version, info->stream);
	} else if (strncmp(q, "ROWS ", 5) == 0) {
		size_t n = strtoul(q + 5, NULL, 10);
		char *v = malloc(n + 1);
		for (size_t i = 0; i < n; i++)
			v[i] = (char)('a' + i % 26);
		rows_reply(&b, info, v, n);
		free(v);
	} else if (strncmp(q, "SLOW ", 5) == 0) {
		struct slow *s = calloc(1, sizeof(*s));
		long ms = strtol(q + 5, NULL, 10);
		struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
		s->req = req;
		s->info = *info;
		s->ev = evtimer_new(base, on_slow, s);
		evtimer_add(s->ev, &tv);
		return;
	} else if (strncmp(q, "USE ", 4) == 0) {
		cql_request_set_keyspace(req, q + 4);
		cql_encode_result_set_keyspace(&b, info->version, info->stream,
					       q + 4);
	} else if (strcmp(q, "KEYSPACE") == 0) {
		const char *ks = info->keyspace ? info->keyspace : "";
		rows_reply(&b, info, ks, strlen(ks));
	} else if (strcmp(q, "EVENT") == 0) {
		cql_server_broadcast(server, "SCHEMA_CHANGE", schema_event,
				     NULL);
		cql_encode_result_void(&b, info->version, info->stream);
	} else {
		char msg[300];
		snprintf(msg, sizeof(msg), "unknown test statement: %s", q);
		cql_encode_error(&b, info->version, info->stream,
				 CQL_ERR_INVALID, msg);
	}
	reply(req, &b);
}

static void execute(void *arg, struct cql_request *req,
		    const struct cql_request_info *info, const uint8_t *body,
		    size_t len)
{
	(void)arg;
	struct arena a;
	struct cursor c = cursor_make(body, len);
	struct buf b;
	arena_create(&a, 0);
	buf_init(&b);
	if (info->opcode == CQL_OP_QUERY) {
		struct cql_query q;
		if (cql_decode_query(&c, info->version, &a, &q) != 0) {
			cql_encode_error(&b, info->version, info->stream,
					 CQL_ERR_PROTOCOL, err_msg());
			reply(req, &b);
		} else {
			char text[256];
			snprintf(text, sizeof(text), "%.*s",
				 (int)(q.query.len > 255 ? 255 : q.query.len),
				 (const char *)q.query.ptr);
			buf_free(&b);
			run_query(req, info, text);
		}
	} else if (info->opcode == CQL_OP_EXECUTE) {
		struct cql_execute e;
		if (cql_decode_execute(&c, info->version, &a, &e) == 0)
			cql_encode_unprepared(&b, info->version, info->stream,
					      "Prepared query not found",
					      e.id.ptr, (uint16_t)e.id.len);
		else
			cql_encode_error(&b, info->version, info->stream,
					 CQL_ERR_PROTOCOL, err_msg());
		reply(req, &b);
	} else if (info->opcode == CQL_OP_BATCH) {
		cql_encode_result_void(&b, info->version, info->stream);
		reply(req, &b);
	} else {
		cql_encode_error(&b, info->version, info->stream,
				 CQL_ERR_INVALID, "PREPARE is not scripted");
		reply(req, &b);
	}
	arena_destroy(&a);
}

static void on_term(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	event_base_loopexit(base, NULL);
}

int main(int argc, char **argv)
{
	struct cql_server_config cfg;
	cql_server_config_defaults(&cfg);
	inet_addr_parse("127.0.0.1:0", 0, &cfg.address);
	for (int i = 1; i + 1 < argc; i += 2) {
		long v = strtol(argv[i + 1], NULL, 10);
		if (strcmp(argv[i], "--max-frame") == 0)
			cfg.max_frame_size = (uint32_t)v;
		else if (strcmp(argv[i], "--max-connections") == 0)
			cfg.max_connections = (int)v;
		else if (strcmp(argv[i], "--max-requests") == 0)
			cfg.max_requests_per_connection = (int)v;
		else if (strcmp(argv[i], "--handshake-ms") == 0)
			cfg.handshake_timeout_ms = (uint64_t)v;
		else if (strcmp(argv[i], "--idle-ms") == 0)
			cfg.idle_timeout_ms = (uint64_t)v;
	}
	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	struct cql_executor exec = {.execute = execute};
	server = cql_server_new(base, &cfg, &exec);
	if (!server) {
		fprintf(stderr, "%s\n", err_msg());
		return 1;
	}
	struct inet_addr bound = cql_server_address(server);
	printf("PORT %u\n", bound.port);
	fflush(stdout);
	struct event *term = evsignal_new(base, SIGTERM, on_term, NULL);
	evsignal_add(term, NULL);
	event_base_dispatch(base);
	struct cql_server_stats st;
	cql_server_stats(server, &st);
	fprintf(stderr,
		"connections_total=%llu refused=%llu requests=%llu "
		"protocol_errors=%llu overloaded=%llu inflight_bytes=%llu\n",
		(unsigned long long)st.connections_total,
		(unsigned long long)st.connections_refused,
		(unsigned long long)st.requests,
		(unsigned long long)st.protocol_errors,
		(unsigned long long)st.overloaded,
		(unsigned long long)st.inflight_bytes);
	event_free(term);
	cql_server_delete(server);
	event_base_free(base);
	return 0;
}
