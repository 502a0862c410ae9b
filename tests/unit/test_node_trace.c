/* The trace session's rows (node/node_trace.h): the batch that writes
 * system_traces.events and .sessions, with Cassandra's TTL, quoting what
 * a client wrote, and the trace probability's bounds. */
#include "common/buf.h"
#include "common/inet.h"
#include "node/node_trace.h"
#include "tests/lib/testutil.h"

#include <check.h>
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

static Suite *suite(void)
{
	Suite *s = suite_create("node_trace");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, batch_writes_events_then_session_with_the_trace_ttl);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
