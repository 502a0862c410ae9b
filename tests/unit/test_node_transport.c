/*
 * The internode transport in one process: two (or three) transports on
 * 127.0.114.11-13 sockets (127.0.114.21-22 and .31 for the broadcast and
 * preferred-address tests) over one real event loop. One-way delivery through
 * the env, request/response, a request that times out, deadlines, a handshake
 * from another cluster, back-pressure, reconnect after the peer restarts.
 * Loops run until the awaited thing happens, with a ceiling against hangs.
 */
#include "common/env_real.h"
#include "common/err.h"
#include "common/log.h"
#include "node/transport.h"
#include "tests/lib/testutil.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct side {
	struct env *env;
	struct transport *t;
	struct inet_addr addr;
	int got;
	uint32_t last_verb;
	char last[64];
	struct inet_addr last_from;
};

static struct event_base *base;

static void on_recv(void *arg, const struct inet_addr *from, uint32_t verb,
		    const uint8_t *msg, size_t len)
{
	struct side *s = arg;
	s->got++;
	s->last_verb = verb;
	s->last_from = *from;
	snprintf(s->last, sizeof(s->last), "%.*s", (int)len, (const char *)msg);
}

/* A side that binds `ip` and is named `name` (its broadcast address),
 * listening there too when `on_broadcast`. */
static void side_open_as(struct side *s, const char *ip, const char *name,
			 bool on_broadcast, const char *cluster)
{
	memset(s, 0, sizeof(*s));
	struct inet_addr listen;
	ck_assert_int_eq(inet_addr_parse(ip, 7000, &listen), 0);
	ck_assert_int_eq(inet_addr_parse(name, 7000, &s->addr), 0);
	s->env = env_real_new(base);
	struct transport_config c = {
		.cluster_name = cluster,
		.partitioner = "org.apache.cassandra.dht.Murmur3Partitioner",
		.host_id = "00000000-0000-4000-8000-000000000001",
		.dc = "dc1",
		.rack = "rack1",
		.listen = listen,
		.broadcast = s->addr,
		.listen_on_broadcast = on_broadcast,
		.max_message_size = 64 * 1024,
		.connect_timeout_ms = 1000,
		.max_queue_bytes = 256 * 1024,
	};
	s->t = transport_new(base, s->env, &c);
	ck_assert_ptr_nonnull(s->t);
	ck_assert_int_eq(transport_listen(s->t), 0);
	env_real_set_transport(s->env, transport_send, s->t);
	env_set_receiver(s->env, on_recv, s);
}

static void side_open(struct side *s, const char *ip, const char *cluster)
{
	side_open_as(s, ip, ip, false, cluster);
}

static void side_close(struct side *s)
{
	transport_delete(s->t);
	env_real_delete(s->env);
	s->t = NULL;
}

static bool run_until(bool (*pred)(void *), void *arg)
{
	time_t end = time(NULL) + 20;
	while (!pred(arg) && time(NULL) < end)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK),
			nanosleep(&(struct timespec){0, 1000000}, NULL);
	return pred(arg);
}

static bool got_one(void *arg)
{
	return ((struct side *)arg)->got > 0;
}

static bool connected(void *arg)
{
	struct side **p = arg;
	return transport_connected(p[0]->t, &p[1]->addr);
}

static void setup(void)
{
	base = event_base_new();
	log_set_level(LOG_LEVEL_ERROR);
}

static void teardown(void)
{
	event_base_free(base);
}

START_TEST(one_way_message_reaches_the_env_receiver)
{
	struct side a, b;
	side_open(&a, "127.0.114.11", "T");
	side_open(&b, "127.0.114.12", "T");
	ck_assert_int_eq(env_send(a.env, &b.addr, 7, "hello", 5), 0);
	ck_assert(run_until(got_one, &b));
	ck_assert_str_eq(b.last, "hello");
	ck_assert_uint_eq(b.last_verb, 7);
	/* The sender is named by its advertised address, not its port. */
	ck_assert(inet_addr_eq(&b.last_from, &a.addr));
	struct side *pair[2] = {&a, &b};
	ck_assert(run_until(connected, pair));
	side_close(&a);
	side_close(&b);
}
END_TEST

struct call {
	int done, status;
	char payload[64];
};

static void on_response(void *arg, int status, const uint8_t *p, size_t len)
{
	struct call *c = arg;
	c->done++;
	c->status = status;
	snprintf(c->payload, sizeof(c->payload), "%.*s", (int)len,
		 (const char *)p);
}

static bool call_done(void *arg)
{
	return ((struct call *)arg)->done > 0;
}

static void echo_handler(void *arg, const struct inet_addr *from, uint32_t verb,
			 uint64_t id, const uint8_t *p, size_t len)
{
	struct side *s = arg;
	char reply[80];
	int n = snprintf(reply, sizeof(reply), "re:%.*s", (int)len,
			 (const char *)p);
	ck_assert_int_eq(
		transport_respond(s->t, from, verb, id, reply, (size_t)n), 0);
}

START_TEST(request_gets_its_response_or_times_out)
{
	struct side a, b;
	side_open(&a, "127.0.114.11", "T");
	side_open(&b, "127.0.114.12", "T");
	ck_assert_int_eq(transport_set_handler(b.t, 20, echo_handler, &b), 0);
	struct call c = {0};
	ck_assert_int_eq(transport_request(a.t, &b.addr, 20, "ping", 4, 5000,
					   on_response, &c),
			 0);
	ck_assert(run_until(call_done, &c));
	ck_assert_int_eq(c.status, 0);
	ck_assert_str_eq(c.payload, "re:ping");

	/* No handler for verb 21 on b: the request goes to b's env receiver
	 * and nobody answers. */
	struct call t = {0};
	ck_assert_int_eq(transport_request(a.t, &b.addr, 21, "x", 1, 200,
					   on_response, &t),
			 0);
	ck_assert(run_until(call_done, &t));
	ck_assert_int_eq(t.status, -1);
	ck_assert_int_eq(t.done, 1);
	struct transport_stats st;
	transport_get_stats(a.t, &st);
	ck_assert_uint_eq(st.timeouts, 1);
	side_close(&a);
	side_close(&b);
}
END_TEST

static bool expired_one(void *arg)
{
	struct transport_stats st;
	transport_get_stats(arg, &st);
	return st.dropped_expired > 0;
}

START_TEST(request_past_its_deadline_is_dropped_and_counted)
{
	struct side a, b;
	side_open(&a, "127.0.114.11", "T");
	side_open(&b, "127.0.114.12", "T");
	ck_assert_int_eq(transport_set_handler(b.t, 30, echo_handler, &b), 0);
	/* Connect first, so the only delay is ours. */
	ck_assert_int_eq(env_send(a.env, &b.addr, 7, "x", 1), 0);
	ck_assert(run_until(got_one, &b));
	struct call c = {0};
	ck_assert_int_eq(transport_request(a.t, &b.addr, 30, "late", 4, 1,
					   on_response, &c),
			 0);
	nanosleep(&(struct timespec){0, 20000000}, NULL); /* 20 ms > 1 ms */
	ck_assert(run_until(call_done, &c));
	ck_assert_int_eq(c.status, -1); /* nobody answered */
	ck_assert(run_until(expired_one, b.t));
	struct transport_stats st;
	transport_get_stats(b.t, &st);
	ck_assert_uint_eq(st.dropped_expired, 1);
	ck_assert_uint_eq(st.expired_by_verb[30], 1);
	side_close(&a);
	side_close(&b);
}
END_TEST

static bool rejected(void *arg)
{
	struct transport_stats st;
	transport_get_stats(arg, &st);
	return st.rejected > 0;
}

START_TEST(other_cluster_is_refused)
{
	struct side a, b;
	side_open(&a, "127.0.114.11", "Mine");
	side_open(&b, "127.0.114.12", "Theirs");
	ck_assert_int_eq(env_send(a.env, &b.addr, 7, "hello", 5), 0);
	ck_assert(run_until(rejected, b.t));
	for (int i = 0; i < 50; i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert_int_eq(b.got, 0);
	ck_assert(!transport_connected(a.t, &b.addr));
	side_close(&a);
	side_close(&b);
}
END_TEST

START_TEST(full_queue_pushes_back)
{
	struct side a;
	side_open(&a, "127.0.114.11", "T");
	struct inet_addr nobody;
	/* The loop does not run, so the connection is still being made and
	 * every message waits in the queue, as for a peer that stopped
	 * reading. */
	ck_assert_int_eq(inet_addr_parse("127.0.114.13", 7000, &nobody), 0);
	static char big[16 * 1024];
	int rc = 0, sent = 0;
	for (int i = 0; i < 64 && rc == 0; i++) {
		rc = env_send(a.env, &nobody, 7, big, sizeof(big));
		if (rc == 0)
			sent++;
	}
	ck_assert_int_eq(rc, -1);
	ck_assert(err_code() == ERR_OVERLOADED ||
		  err_code() == ERR_UNAVAILABLE);
	struct transport_stats st;
	transport_get_stats(a.t, &st);
	ck_assert_uint_eq(st.dropped_overload + st.dropped_unavailable, 1);
	ck_assert_int_le(sent, 16); /* 256 KiB queue of 16 KiB messages */
	side_close(&a);
}
END_TEST

START_TEST(too_big_to_send_is_refused)
{
	struct side a, b;
	side_open(&a, "127.0.114.11", "T");
	side_open(&b, "127.0.114.12", "T");
	static char huge[64 * 1024];
	ck_assert_int_eq(env_send(a.env, &b.addr, 7, huge, sizeof(huge)), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	side_close(&a);
	side_close(&b);
}
END_TEST

START_TEST(reconnects_after_the_peer_restarts)
{
	struct side a, b;
	side_open(&a, "127.0.114.11", "T");
	side_open(&b, "127.0.114.12", "T");
	ck_assert_int_eq(env_send(a.env, &b.addr, 7, "one", 3), 0);
	ck_assert(run_until(got_one, &b));
	side_close(&b);
	/* a notices the loss, backs off, and connects again on a later send
	 * once b is back. */
	side_open(&b, "127.0.114.12", "T");
	time_t end = time(NULL) + 20;
	while (b.got == 0 && time(NULL) < end) {
		env_send(a.env, &b.addr, 7, "two", 3);
		for (int i = 0; i < 20; i++) {
			event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
			nanosleep(&(struct timespec){0, 5000000}, NULL);
		}
	}
	ck_assert_str_eq(b.last, "two");
	side_close(&a);
	side_close(&b);
}
END_TEST

static bool got_two(void *arg)
{
	return ((struct side *)arg)->got >= 2;
}

/* broadcast_address behind NAT: a binds .1 but is known as .11; it names
 * itself .11 to the peers it sends to, and with listen_on_broadcast
 * takes connections on .11 too. */
START_TEST(a_node_is_named_by_its_broadcast_address)
{
	struct side a, b;
	side_open_as(&a, "127.0.114.21", "127.0.114.31", true, "T");
	side_open(&b, "127.0.114.22", "T");
	ck_assert_int_eq(env_send(a.env, &b.addr, 7, "from a", 6), 0);
	ck_assert(run_until(got_one, &b));
	ck_assert(inet_addr_eq(&b.last_from, &a.addr));
	ck_assert_int_eq(env_send(b.env, &a.addr, 7, "to .11", 6), 0);
	ck_assert(run_until(got_one, &a));
	ck_assert_str_eq(a.last, "to .11");
	side_close(&a);
	side_close(&b);
}
END_TEST

/* prefer_local: b reaches the peer named .11 at .1, the only address a
 * listens on; without the preference nothing answers at .11. */
START_TEST(a_preferred_address_is_connected_to)
{
	struct side a, b;
	side_open_as(&a, "127.0.114.21", "127.0.114.31", false, "T");
	side_open(&b, "127.0.114.22", "T");
	struct inet_addr via;
	ck_assert_int_eq(inet_addr_parse("127.0.114.21", 7000, &via), 0);
	struct inet_addr now = transport_connect_address(b.t, &a.addr);
	ck_assert(inet_addr_eq(&now, &a.addr));
	ck_assert_int_eq(transport_prefer(b.t, &a.addr, &via), 0);
	now = transport_connect_address(b.t, &a.addr);
	ck_assert(inet_addr_eq(&now, &via));
	ck_assert_int_eq(env_send(b.env, &a.addr, 7, "via .1", 6), 0);
	ck_assert(run_until(got_one, &a));
	ck_assert_str_eq(a.last, "via .1");
	ck_assert(inet_addr_eq(&a.last_from, &b.addr));
	/* back to the name itself */
	ck_assert_int_eq(transport_prefer(b.t, &a.addr, NULL), 0);
	now = transport_connect_address(b.t, &a.addr);
	ck_assert(inet_addr_eq(&now, &a.addr));
	side_close(&a);
	side_close(&b);
}
END_TEST

/* Cassandra's reconnectWithNewIp: what was queued on the connection to
 * the old address still arrives; the next message takes the new one. */
START_TEST(switching_address_loses_nothing_queued)
{
	struct side a, b;
	side_open_as(&a, "127.0.114.21", "127.0.114.31", true, "T");
	side_open(&b, "127.0.114.22", "T");
	struct inet_addr via;
	ck_assert_int_eq(inet_addr_parse("127.0.114.21", 7000, &via), 0);
	ck_assert_int_eq(env_send(b.env, &a.addr, 7, "old", 3), 0);
	ck_assert_int_eq(transport_prefer(b.t, &a.addr, &via), 0);
	ck_assert_int_eq(env_send(b.env, &a.addr, 7, "new", 3), 0);
	ck_assert(run_until(got_two, &a));
	ck_assert_int_eq(a.got, 2);
	side_close(&a);
	side_close(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_transport");
	TCase *t = tcase_create("transport");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, one_way_message_reaches_the_env_receiver);
	tcase_add_test(t, request_gets_its_response_or_times_out);
	tcase_add_test(t, request_past_its_deadline_is_dropped_and_counted);
	tcase_add_test(t, other_cluster_is_refused);
	tcase_add_test(t, full_queue_pushes_back);
	tcase_add_test(t, too_big_to_send_is_refused);
	tcase_add_test(t, reconnects_after_the_peer_restarts);
	tcase_add_test(t, a_node_is_named_by_its_broadcast_address);
	tcase_add_test(t, a_preferred_address_is_connected_to);
	tcase_add_test(t, switching_address_loses_nothing_queued);
	suite_add_tcase(s, t);
	return test_run(s);
}
