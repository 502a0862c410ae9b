/*
 * WAN faults of test clusters (node/netfault.h) through the real transport:
 * two or three transports on 127.0.39.x over one event loop. Delay holds a
 * message at least as long as asked without holding the loop (another peer
 * is served meanwhile); jitter keeps the order; loss costs a retransmission
 * timeout; a rate limit spaces messages; a flap's down window holds what is
 * sent in it; clearing a rule releases what it held; a transport without
 * faults refuses rules. Also the option parsers and the clock offset of
 * the real env. Only lower bounds on time are checked (a message cannot
 * arrive before it is released), never how fast something is.
 */
#include "common/env_real.h"
#include "common/err.h"
#include "common/log.h"
#include "node/netfault.h"
#include "node/transport.h"
#include "tests/lib/testutil.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_GOT 256

struct side {
	struct env *env;
	struct transport *t;
	struct inet_addr addr;
	int got;
	uint64_t at_us[MAX_GOT]; /* mono time of each arrival */
	int seq[MAX_GOT];        /* the number each message carried */
};

static struct event_base *base;

static void on_recv(void *arg, const struct inet_addr *from, uint32_t verb,
		    const uint8_t *msg, size_t len)
{
	(void)from;
	(void)verb;
	struct side *s = arg;
	if (s->got < MAX_GOT) {
		char text[32];
		snprintf(text, sizeof(text), "%.*s", (int)(len < 31 ? len : 31),
			 (const char *)msg);
		s->at_us[s->got] = env_mono_us(s->env);
		s->seq[s->got] = atoi(text);
	}
	s->got++;
}

static void side_open(struct side *s, const char *ip, bool faults)
{
	memset(s, 0, sizeof(*s));
	ck_assert_int_eq(inet_addr_parse(ip, 7000, &s->addr), 0);
	s->env = env_real_new(base);
	struct transport_config c = {
		.cluster_name = "T",
		.partitioner = "org.apache.cassandra.dht.Murmur3Partitioner",
		.host_id = "00000000-0000-4000-8000-000000000001",
		.dc = "dc1",
		.rack = "rack1",
		.listen = s->addr,
		.max_message_size = 1024 * 1024,
		.connect_timeout_ms = 1000,
		.max_queue_bytes = 4 * 1024 * 1024,
	};
	s->t = transport_new(base, s->env, &c);
	ck_assert_ptr_nonnull(s->t);
	ck_assert_int_eq(transport_listen(s->t), 0);
	if (faults)
		ck_assert_int_eq(transport_enable_faults(s->t), 0);
	env_real_set_transport(s->env, transport_send, s->t);
	env_set_receiver(s->env, on_recv, s);
}

static void side_close(struct side *s)
{
	transport_delete(s->t);
	env_real_delete(s->env);
}

struct want {
	struct side *s;
	int n;
};

static bool has(void *arg)
{
	struct want *w = arg;
	return w->s->got >= w->n;
}

static bool run_until(bool (*pred)(void *), void *arg, int seconds)
{
	time_t end = time(NULL) + seconds;
	while (!pred(arg) && time(NULL) < end)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK),
			nanosleep(&(struct timespec){0, 500000}, NULL);
	return pred(arg);
}

static void wait_got(struct side *s, int n)
{
	struct want w = {s, n};
	ck_assert_msg(run_until(has, &w, 20), "got %d of %d", s->got, n);
}

static void send_seq(struct side *from, struct side *to, int i)
{
	char text[16];
	int len = snprintf(text, sizeof(text), "%d", i);
	ck_assert_int_eq(env_send(from->env, &to->addr, 7, text, (size_t)len),
			 0);
}

/* A first message connects, so later ones time only the fault. */
static void warm_up(struct side *a, struct side *b)
{
	send_seq(a, b, 0);
	wait_got(b, 1);
	b->got = 0;
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

START_TEST(delay_holds_a_message_without_holding_the_loop)
{
	struct side a, b, c;
	side_open(&a, "127.0.39.1", true);
	side_open(&b, "127.0.39.2", false);
	side_open(&c, "127.0.39.3", false);
	warm_up(&a, &b);
	warm_up(&a, &c);
	struct netfault_link l = {.delay_us = 300000};
	ck_assert_int_eq(transport_fault_set(a.t, &b.addr, &l), 0);
	uint64_t sent = env_mono_us(a.env);
	send_seq(&a, &b, 1);
	send_seq(&a, &c, 2); /* no rule: not held behind b's message */
	wait_got(&c, 1);
	ck_assert_int_eq(b.got, 0);
	wait_got(&b, 1);
	ck_assert_uint_ge(b.at_us[0] - sent, 300000);
	ck_assert_int_eq(b.seq[0], 1);
	struct buf out = {0};
	ck_assert_int_eq(transport_fault_describe(a.t, &out), 0);
	ck_assert_ptr_nonnull(strstr((char *)out.data, "delay 300ms"));
	ck_assert_ptr_nonnull(strstr((char *)out.data, "held 1"));
	buf_free(&out);
	side_close(&a);
	side_close(&b);
	side_close(&c);
}
END_TEST

START_TEST(jitter_keeps_messages_in_order)
{
	struct side a, b;
	side_open(&a, "127.0.39.4", true);
	side_open(&b, "127.0.39.5", false);
	warm_up(&a, &b);
	struct netfault_link l = {.delay_us = 20000, .jitter_us = 20000};
	ck_assert_int_eq(transport_fault_set(a.t, &b.addr, &l), 0);
	for (int i = 1; i <= 100; i++)
		send_seq(&a, &b, i);
	wait_got(&b, 100);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(b.seq[i], i + 1);
	side_close(&a);
	side_close(&b);
}
END_TEST

START_TEST(loss_costs_a_retransmission_timeout_and_loses_nothing)
{
	struct side a, b;
	side_open(&a, "127.0.39.6", true);
	side_open(&b, "127.0.39.7", false);
	warm_up(&a, &b);
	struct netfault_link l = {.loss_ppm = 1000000}; /* every segment */
	ck_assert_int_eq(transport_fault_set(a.t, &b.addr, &l), 0);
	uint64_t sent = env_mono_us(a.env);
	for (int i = 1; i <= 5; i++)
		send_seq(&a, &b, i);
	wait_got(&b, 5);
	/* Each waits 200 ms, and each waits behind the one before. */
	ck_assert_uint_ge(b.at_us[0] - sent, 200000);
	ck_assert_uint_ge(b.at_us[4] - sent, 200000);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(b.seq[i], i + 1);
	side_close(&a);
	side_close(&b);
}
END_TEST

START_TEST(rate_limit_spaces_messages)
{
	struct side a, b;
	side_open(&a, "127.0.39.8", true);
	side_open(&b, "127.0.39.9", false);
	warm_up(&a, &b);
	/* 10 messages of about 10 KB at 800 kbit/s: 100 KB at 100 KB/s. */
	struct netfault_link l = {.rate_bps = 800000};
	ck_assert_int_eq(transport_fault_set(a.t, &b.addr, &l), 0);
	static char big[10000];
	uint64_t sent = env_mono_us(a.env);
	for (int i = 1; i <= 10; i++) {
		memset(big, ' ', sizeof(big));
		snprintf(big, 16, "%d ", i);
		ck_assert_int_eq(env_send(a.env, &b.addr, 7, big, sizeof(big)),
				 0);
	}
	wait_got(&b, 10);
	ck_assert_uint_ge(b.at_us[9] - sent, 1000000);
	ck_assert_uint_ge(b.at_us[0] - sent, 100000);
	side_close(&a);
	side_close(&b);
}
END_TEST

START_TEST(flapping_link_holds_what_is_sent_while_down)
{
	struct side a, b;
	side_open(&a, "127.0.39.10", true);
	side_open(&b, "127.0.39.11", false);
	warm_up(&a, &b);
	/* Up 100 ms, then down 2 s, every 2.1 s from now. */
	struct netfault_link l = {.flap_down_us = 2000000,
				  .flap_period_us = 2100000};
	ck_assert_int_eq(transport_fault_set(a.t, &b.addr, &l), 0);
	uint64_t set = env_mono_us(a.env);
	while (env_mono_us(a.env) - set < 150000)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	uint64_t sent = env_mono_us(a.env);
	ck_assert_uint_lt(sent - set, 2100000); /* still in the window */
	send_seq(&a, &b, 1);
	wait_got(&b, 1);
	/* Released when the link is up again, 2.1 s after it was set. */
	ck_assert_uint_ge(b.at_us[0] - set, 2100000);
	side_close(&a);
	side_close(&b);
}
END_TEST

START_TEST(clearing_a_link_releases_what_it_held)
{
	struct side a, b;
	side_open(&a, "127.0.39.12", true);
	side_open(&b, "127.0.39.13", false);
	warm_up(&a, &b);
	struct netfault_link l = {.delay_us = 3600000000ull}; /* an hour */
	ck_assert_int_eq(transport_fault_set(a.t, &b.addr, &l), 0);
	send_seq(&a, &b, 1);
	send_seq(&a, &b, 2);
	for (int i = 0; i < 50; i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert_int_eq(b.got, 0);
	ck_assert_int_eq(transport_fault_clear(a.t, NULL), 1);
	send_seq(&a, &b, 3);
	wait_got(&b, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(b.seq[i], i + 1);
	side_close(&a);
	side_close(&b);
}
END_TEST

START_TEST(without_fault_injection_rules_are_refused)
{
	struct side a, b;
	side_open(&a, "127.0.39.14", false);
	side_open(&b, "127.0.39.15", false);
	struct netfault_link l = {.delay_us = 1000};
	ck_assert(!transport_faults_enabled(a.t));
	ck_assert_int_eq(transport_fault_set(a.t, &b.addr, &l), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	ck_assert_ptr_nonnull(strstr(err_msg(), "test_fault_injection"));
	ck_assert_int_eq(transport_fault_clear(a.t, NULL), -1);
	side_close(&a);
	side_close(&b);
}
END_TEST

START_TEST(options_parse_as_documented)
{
	struct netfault_link l;
	const char *ok[] = {"--delay", "80ms",  "--jitter", "10ms",
			    "--loss",  "1%",    "--rate",   "10mbit",
			    "--flap",  "5s/30s"};
	ck_assert_int_eq(netfault_parse(10, ok, &l), 0);
	ck_assert_uint_eq(l.delay_us, 80000);
	ck_assert_uint_eq(l.jitter_us, 10000);
	ck_assert_uint_eq(l.loss_ppm, 10000);
	ck_assert_uint_eq(l.rate_bps, 10000000);
	ck_assert_uint_eq(l.flap_down_us, 5000000);
	ck_assert_uint_eq(l.flap_period_us, 30000000);
	uint32_t ppm;
	ck_assert_int_eq(netfault_parse_percent_ppm("0.5%", &ppm), 0);
	ck_assert_uint_eq(ppm, 5000);
	uint64_t bps;
	ck_assert_int_eq(netfault_parse_rate_bps("2mbps", &bps), 0);
	ck_assert_uint_eq(bps, 16000000);
	ck_assert_int_eq(netfault_parse_rate_bps("500kbit", &bps), 0);
	ck_assert_uint_eq(bps, 500000);

	const char *bad[][2] = {
		{"--loss", "1"},     {"--loss", "101%"},   {"--rate", "10"},
		{"--rate", "10mb"},  {"--flap", "30s/5s"}, {"--flap", "5s"},
		{"--delay", "fast"}, {"--speed", "1ms"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(netfault_parse(2, bad[i], &l) == -1, "%s %s",
			      bad[i][0], bad[i][1]);
		ck_assert_int_eq(err_code(), ERR_INVALID);
	}
	ck_assert_int_eq(netfault_parse(0, NULL, &l), -1);
	const char *dangling[] = {"--delay"};
	ck_assert_int_eq(netfault_parse(1, dangling, &l), -1);
}
END_TEST

START_TEST(wall_clock_offset_moves_the_wall_clock_only)
{
	struct env *e = env_real_new(base);
	int64_t w0 = env_wall_us(e);
	uint64_t m0 = env_mono_us(e);
	env_real_set_wall_offset(e, 3600 * 1000000ll);
	ck_assert_int_eq(env_real_wall_offset(e), 3600 * 1000000ll);
	ck_assert_int_ge(env_wall_us(e) - w0, 3600 * 1000000ll);
	ck_assert_uint_lt(env_mono_us(e) - m0, 3600 * 1000000ull);
	env_real_set_wall_offset(e, -3600 * 1000000ll);
	ck_assert_int_lt(env_wall_us(e), w0);
	env_real_set_wall_offset(e, 0);
	ck_assert_int_ge(env_wall_us(e), w0);
	env_real_delete(e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_netfault");
	TCase *t = tcase_create("netfault");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, delay_holds_a_message_without_holding_the_loop);
	tcase_add_test(t, jitter_keeps_messages_in_order);
	tcase_add_test(t,
		       loss_costs_a_retransmission_timeout_and_loses_nothing);
	tcase_add_test(t, rate_limit_spaces_messages);
	tcase_add_test(t, flapping_link_holds_what_is_sent_while_down);
	tcase_add_test(t, clearing_a_link_releases_what_it_held);
	tcase_add_test(t, without_fault_injection_rules_are_refused);
	tcase_add_test(t, options_parse_as_documented);
	tcase_add_test(t, wall_clock_offset_moves_the_wall_clock_only);
	suite_add_tcase(s, t);
	return test_run(s);
}
