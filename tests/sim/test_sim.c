/* The simulator itself: clock jumps, deterministic order, network rules. */
#include "tests/lib/testutil.h"
#include "tests/sim/sim.h"

#include <stdlib.h>
#include <string.h>

static struct inet_addr addr(const char *s)
{
	struct inet_addr a;
	ck_assert_int_eq(inet_addr_parse(s, 7000, &a), 0);
	return a;
}

struct fired {
	uint64_t at[16];
	int order[16];
	int n;
	struct sim *sim;
};

struct tctx {
	struct fired *f;
	int id;
};

static void on_timer(void *arg)
{
	struct tctx *t = arg;
	t->f->at[t->f->n] = sim_now_us(t->f->sim);
	t->f->order[t->f->n++] = t->id;
}

START_TEST(timers_jump_clock_in_deadline_order)
{
	struct sim *s = sim_new(1, 1700000000000000);
	struct inet_addr a = addr("127.0.0.1");
	struct env *e = sim_env_new(s, &a);
	struct fired f = {.sim = s};
	struct tctx ctx[4] = {{&f, 0}, {&f, 1}, {&f, 2}, {&f, 3}};
	struct env_timer *t[4];
	uint64_t start = env_mono_us(e);
	for (int i = 0; i < 4; i++)
		t[i] = env_timer_new(e, on_timer, &ctx[i]);
	env_timer_arm(e, t[0], 3000000); /* 3 s */
	env_timer_arm(e, t[1], 1000);
	env_timer_arm(e, t[2], 1000); /* same deadline: insertion order */
	env_timer_arm(e, t[3], 50);
	env_timer_cancel(e, t[3]);
	sim_run_for(s, 10000000);
	ck_assert_int_eq(f.n, 3);
	ck_assert_int_eq(f.order[0], 1);
	ck_assert_int_eq(f.order[1], 2);
	ck_assert_int_eq(f.order[2], 0);
	ck_assert_uint_eq(f.at[0], start + 1000);
	ck_assert_uint_eq(f.at[2], start + 3000000);
	ck_assert_uint_eq(env_mono_us(e), start + 10000000);
	ck_assert_int_eq(env_wall_us(e) - (int64_t)env_mono_us(e),
			 1700000000000000 - 1000000);
	for (int i = 0; i < 4; i++)
		env_timer_free(e, t[i]);
	sim_delete(s);
}
END_TEST

struct inbox {
	int count;
	uint32_t last_verb;
	char last[32];
	struct inet_addr from;
};

static void on_msg(void *arg, const struct inet_addr *from, uint32_t verb,
		   const uint8_t *msg, size_t len)
{
	struct inbox *in = arg;
	in->count++;
	in->last_verb = verb;
	in->from = *from;
	memcpy(in->last, msg, len < sizeof(in->last) ? len : sizeof(in->last));
}

START_TEST(network_delivers_cuts_and_heals)
{
	struct sim *s = sim_new(7, 0);
	struct inet_addr a = addr("127.0.0.1"), b = addr("127.0.0.2");
	struct env *ea = sim_env_new(s, &a);
	struct env *eb = sim_env_new(s, &b);
	struct inbox in_a = {0}, in_b = {0};
	env_set_receiver(ea, on_msg, &in_a);
	env_set_receiver(eb, on_msg, &in_b);
	sim_net_set_latency(s, 1000, 1000);

	ck_assert_int_eq(env_send(ea, &b, 42, "hello", 6), 0);
	sim_run_for(s, 999);
	ck_assert_int_eq(in_b.count, 0); /* not before its latency */
	sim_run_for(s, 1);
	ck_assert_int_eq(in_b.count, 1);
	ck_assert_uint_eq(in_b.last_verb, 42);
	ck_assert_str_eq(in_b.last, "hello");
	ck_assert(inet_addr_eq(&in_b.from, &a));

	/* One-way cut: a -> b lost, b -> a still flows. */
	sim_net_cut(s, &a, &b, true);
	env_send(ea, &b, 1, "x", 2);
	env_send(eb, &a, 1, "y", 2);
	sim_run_for(s, 5000);
	ck_assert_int_eq(in_b.count, 1);
	ck_assert_int_eq(in_a.count, 1);
	sim_net_heal(s);
	env_send(ea, &b, 1, "z", 2);
	sim_run_for(s, 5000);
	ck_assert_int_eq(in_b.count, 2);

	/* A killed node receives nothing and sends nothing. */
	sim_env_kill(s, eb);
	env_send(ea, &b, 1, "w", 2);
	sim_run_for(s, 5000);
	ck_assert_int_eq(in_b.count, 2);
	ck_assert_int_ne(env_send(eb, &a, 1, "v", 2), 0);
	ck_assert_uint_eq(sim_net_dropped(s), 2);
	sim_delete(s);
}
END_TEST

static uint64_t trace(uint64_t seed)
{
	struct sim *s = sim_new(seed, 0);
	struct inet_addr a = addr("127.0.0.1"), b = addr("127.0.0.2");
	struct env *ea = sim_env_new(s, &a);
	struct env *eb = sim_env_new(s, &b);
	struct inbox in = {0};
	env_set_receiver(eb, on_msg, &in);
	sim_net_set_drop(s, NULL, NULL, 0.3);
	uint64_t h = 0;
	for (int i = 0; i < 200; i++) {
		env_send(ea, &b, (uint32_t)i, "m", 2);
		sim_run_for(s, env_random(ea) % 300);
		h = h * 31 + (uint64_t)in.count * 7 + in.last_verb;
	}
	(void)eb;
	sim_delete(s);
	return h;
}

static uint64_t seed; /* set in suite(), before Check forks */

START_TEST(same_seed_replays_the_same_run)
{
	ck_assert_uint_eq(trace(seed), trace(seed));
	ck_assert_uint_ne(trace(seed), trace(seed + 1));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sim");
	seed = test_seed(99);
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, timers_jump_clock_in_deadline_order);
	tcase_add_test(tc, network_delivers_cuts_and_heals);
	tcase_add_test(tc, same_seed_replays_the_same_run);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run(suite());
}
