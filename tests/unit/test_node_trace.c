/* The trace session's rows (node/node_trace.h): the batch that writes
 * system_traces.events and .sessions, with Cassandra's TTL, quoting what
 * a client wrote, and a long session's events written in batches as they
 * come, none lost. */
#include "client/proto/proto.h"
#include "client/proto/server.h"
#include "common/buf.h"
#include "common/inet.h"
#include "node/node_trace.h"
#include "tests/lib/testutil.h"
#include "tests/sim/sim.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(batch_writes_events_then_session_with_the_trace_ttl)
{
	struct node_trace_row_event ev[2] = {
		{.elapsed_us = 12, .activity = "Parsing SELECT 'it''s'"},
		{.elapsed_us = 340, .activity = "Preparing statement"},
	};
	ev[0].id[6] = 0x10; /* any bytes: formatted as a uuid */
	ev[1].id[6] = 0x10;
	ev[1].id[15] = 1;
	struct node_trace_rows r = {
		.started_wall_us = 1700000000123456,
		.duration_us = 789,
		.query = "SELECT * FROM ks.t WHERE v = 'x'",
		.consistency = "QUORUM",
		.request = "Execute CQL3 query",
		.events = ev,
		.event_count = 2,
	};
	r.session_id[0] = 0xab;
	ck_assert_int_eq(inet_addr_parse("127.0.0.9", 7000, &r.coordinator), 0);
	ck_assert_int_eq(inet_addr_parse("127.0.0.1", 0, &r.client), 0);
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(node_trace_batch_text(&r, &b), 0);
	ck_assert_int_eq(buf_append(&b, (const uint8_t *)"", 1), 0);
	const char *t = (const char *)b.data;
	ck_assert_str_eq(
		t,
		"BEGIN UNLOGGED BATCH "
		"INSERT INTO system_traces.events (session_id, event_id, "
		"activity, source, source_elapsed, source_port, thread) VALUES "
		"(ab000000-0000-0000-0000-000000000000, "
		"00000000-0000-1000-0000-000000000000, "
		"'Parsing SELECT ''it''''s''', '127.0.0.9', 12, 7000, "
		"'Native-Transport-Requests') USING TTL 86400; "
		"INSERT INTO system_traces.events (session_id, event_id, "
		"activity, source, source_elapsed, source_port, thread) VALUES "
		"(ab000000-0000-0000-0000-000000000000, "
		"00000000-0000-1000-0000-000000000001, "
		"'Preparing statement', '127.0.0.9', 340, 7000, "
		"'Native-Transport-Requests') USING TTL 86400; "
		"INSERT INTO system_traces.sessions (session_id, client, "
		"command, coordinator, coordinator_port, duration, parameters, "
		"request, started_at) VALUES "
		"(ab000000-0000-0000-0000-000000000000, '127.0.0.1', 'QUERY', "
		"'127.0.0.9', 7000, 789, {'consistency_level': 'QUORUM', "
		"'query': 'SELECT * FROM ks.t WHERE v = ''x'''}, "
		"'Execute CQL3 query', 1700000000123) USING TTL 86400; "
		"APPLY BATCH");
	buf_free(&b);
}
END_TEST

/* The writes the tracer hands its writer, in order: each QUERY's text. */
struct writes {
	char *text[64];
	size_t count;
	bool internal; /* every one marked internal */
};

static void fake_writer(void *arg, struct cql_request *req,
			const struct cql_request_info *info,
			const uint8_t *body, size_t len)
{
	struct writes *w = arg;
	ck_assert_uint_ge(len, 4);
	uint32_t n = (uint32_t)body[0] << 24 | (uint32_t)body[1] << 16 |
		     (uint32_t)body[2] << 8 | body[3];
	ck_assert_uint_le(n, len - 4);
	ck_assert_uint_lt(w->count, 64);
	w->text[w->count++] = strndup((const char *)body + 4, n);
	w->internal = w->internal && info->internal;
	cql_request_reply(req, NULL, 0);
}

#define LONG_EVENTS 700

/* The statement: LONG_EVENTS steps traced, then an answer. */
static void long_statement(void *arg, struct cql_request *req,
			   const struct cql_request_info *info,
			   const uint8_t *body, size_t len)
{
	(void)arg;
	(void)body;
	(void)len;
	ck_assert_ptr_nonnull(info->trace);
	for (int i = 0; i < LONG_EVENTS; i++)
		cql_trace_event(info, "step %d of a long range walk", i);
	static const uint8_t frame[9] = {0x84, 0, 0, 0, CQL_OP_RESULT};
	cql_request_reply(req, frame, sizeof(frame));
}

static void on_answer(void *arg, const uint8_t *frame, size_t len)
{
	(void)frame;
	*(size_t *)arg = len;
}

static size_t count_of(const char *text, const char *what)
{
	size_t n = 0;
	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

START_TEST(a_long_session_keeps_every_event)
{
	struct sim *s = sim_new(1, 1700000000000000);
	struct inet_addr a = sim_node_addr(0);
	struct env *e = sim_env_new(s, &a);
	struct writes w = {.internal = true};
	struct cql_executor writer = {.execute = fake_writer, .arg = &w};
	struct cql_executor next = {.execute = long_statement};
	struct node_trace *t = node_trace_new(e, &writer, &next, &a);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(node_trace_set_probability(t, 1), 0);
	struct cql_executor ex = node_trace_executor(t);
	size_t answered = 0;
	struct cql_request *req =
		cql_request_detached(on_answer, NULL, &answered);
	ck_assert_ptr_nonnull(req);
	struct cql_request_info info = {.version = 4, .opcode = CQL_OP_QUERY};
	ex.execute(ex.arg, req, &info, NULL, 0);
	ck_assert_uint_eq(answered, 9);
	sim_run_for(s, 1000);
	/* every event, once, in batches of at most 256; the sessions row
	 * last, once */
	ck_assert_uint_ge(w.count, 3);
	ck_assert(w.internal);
	size_t events = 0;
	for (size_t i = 0; i < w.count; i++) {
		size_t n =
			count_of(w.text[i], "INSERT INTO system_traces.events");
		ck_assert_uint_le(n, 256);
		events += n;
		ck_assert_uint_eq(
			count_of(w.text[i],
				 "INSERT INTO system_traces.sessions"),
			i == w.count - 1);
		ck_assert(strncmp(w.text[i], "BEGIN UNLOGGED BATCH ", 21) == 0);
	}
	ck_assert_uint_eq(events, LONG_EVENTS);
	for (int i = 0; i < LONG_EVENTS; i++) {
		char step[64];
		snprintf(step, sizeof(step), "'step %d of a long range walk'",
			 i);
		size_t seen = 0;
		for (size_t j = 0; j < w.count; j++)
			seen += count_of(w.text[j], step);
		ck_assert_uint_eq(seen, 1);
	}
	for (size_t i = 0; i < w.count; i++)
		free(w.text[i]);
	node_trace_delete(t);
	sim_delete(s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("node_trace");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, batch_writes_events_then_session_with_the_trace_ttl);
	tcase_add_test(tc, a_long_session_keeps_every_event);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
