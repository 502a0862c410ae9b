/*
 * Repair sessions in the deterministic simulator (repair_cluster.h): the
 * session's life and its failures. A second concurrent session over the
 * same ranges is refused, a restarted coordinator never reuses a session
 * id, a cancel fails the session and frees its ranges, and a participant
 * killed, convicted or restarted mid-session fails the session with a
 * message naming it. The coordinator lists each session's state and
 * steps (system_views.repairs) and counts them for the metrics.
 */
#include "repair/repair.h"

#include "common/err.h"
#include "tests/lib/testutil.h"
#include "tests/sim/repair_cluster.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(overlapping_sessions_of_two_coordinators_are_refused)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	/* node 0 repairs the ring; node 1, a moment later, a part of it */
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	sim_run_for(c->sim, 1000);
	struct other o;
	start_other(c, 1, INT64_MIN / 2, 0, &o);
	ck_assert(sim_run_until(c->sim, other_is_done, &o, 60ull * 1000000));
	ck_assert(!o.ok);
	char want[80];
	snprintf(want, sizeof(want),
		 "overlapping repair session %llu of 127.0.9.1",
		 (unsigned long long)c->session);
	ck_assert_msg(strstr(o.error, want), "%s", o.error);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_int_eq(unequal_parts(c), 0);
	/* once node 0's session is over (its RELEASE messages arrived),
	 * node 1's runs; so do two at once on disjoint ranges */
	sim_run_for(c->sim, 10000);
	start_other(c, 1, INT64_MIN / 2, 0, &o);
	ck_assert(sim_run_until(c->sim, other_is_done, &o, 60ull * 1000000));
	ck_assert_msg(o.ok, "%s", o.error);
	ck_assert_int_eq(start(c, 0, INT64_MAX / 2, false), 0);
	start_other(c, 1, INT64_MIN / 2, -1, &o);
	ck_assert(sim_run_until(c->sim, other_is_done, &o, 60ull * 1000000));
	ck_assert_msg(o.ok, "%s", o.error);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	cluster_delete(c);
}
END_TEST

/* Session ids follow the wall clock, so a restarted coordinator never
 * reuses one of its previous incarnation's (a replica keys claims and
 * release notes by coordinator and session). */
START_TEST(a_restarted_coordinator_never_reuses_a_session_id)
{
	struct cluster *c = cluster_new();
	load(c);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	uint64_t first = c->session;
	ck_assert_uint_ge(first, 1700000000000ull); /* the sim's epoch, ms */
	run(c, INT64_MIN, INT64_MIN, false);
	uint64_t second = c->session;
	ck_assert_uint_gt(second, first);
	repair_delete(c->nodes[0].repair);
	start_repair(c, 0);
	sim_run_for(c->sim, 1000);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_gt(c->session, second);
	cluster_delete(c);
}
END_TEST

START_TEST(cancel_fails_the_session_and_frees_its_ranges)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	ck_assert_int_eq(repair_cancel(c->nodes[0].repair, "x"), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	struct repair_status st;
	ck_assert_int_eq(repair_get_status(c->nodes[0].repair, &st), 0);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	sim_run_for(c->sim, 1000);
	ck_assert_int_eq(repair_get_status(c->nodes[0].repair, &st), 1);
	ck_assert_uint_eq(st.session, c->session);
	ck_assert_uint_eq(st.tasks, 1);
	ck_assert_uint_eq(st.task, 0);
	ck_assert_str_eq(st.table, "ks.t");
	ck_assert_uint_eq(st.npeers, NNODES);
	ck_assert_int_eq(repair_cancel(c->nodes[0].repair, "operator"), 0);
	ck_assert(c->done);
	ck_assert(!c->sum.ok);
	ck_assert_str_eq(c->sum.error, "cancelled: operator");
	ck_assert(!repair_running(c->nodes[0].repair));
	/* the claims went with it: another coordinator may repair now */
	sim_run_for(c->sim, 100000);
	struct other o;
	start_other(c, 1, INT64_MIN, INT64_MIN, &o);
	ck_assert(sim_run_until(c->sim, other_is_done, &o, 60ull * 1000000));
	ck_assert_msg(o.ok, "%s", o.error);
	ck_assert_int_eq(unequal_parts(c), 0);
	cluster_delete(c);
}
END_TEST

START_TEST(killed_participant_fails_the_session)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	sim_env_kill(c->sim, c->nodes[2].env);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "timed out") &&
			      strstr(c->sum.error, "127.0.9.3"),
		      "%s", c->sum.error);
	/* nothing half done: node 0 and 1 still differ */
	ck_assert_int_eq(unequal_parts(c), 20);
	ck_assert(!repair_running(c->nodes[0].repair));
	cluster_delete(c);
}
END_TEST

START_TEST(participant_convicted_mid_session_fails_it_at_once)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	sim_run_for(c->sim, 2000);
	ck_assert(!c->done);
	sim_env_kill(c->sim, c->nodes[2].env);
	c->down[2] = true;
	uint64_t t0 = sim_now_us(c->sim);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	/* at the next check, well before the 5 s timeouts */
	ck_assert_uint_le(sim_now_us(c->sim) - t0, 1100000);
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "127.0.9.3") &&
			      strstr(c->sum.error, "went down"),
		      "%s", c->sum.error);
	cluster_delete(c);
}
END_TEST

/* Found by the node-loss-during-repair drill: node2 killed one second into
 * a repair and restarted before anyone convicted it; the coordinator
 * waited for the VALIDATE answer the old process took with it until the
 * validate timeout (10 minutes), and every repair on that node was
 * refused meanwhile. A new gossip generation fails the session at the next
 * check, as Cassandra's RepairSession does on a participant's restart. */
START_TEST(participant_restarted_mid_session_fails_it_at_once)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	for (int i = 0; i < NNODES; i++)
		c->gen[i] = 100;
	/* node 2 dies just as the session asks it for its tree (the old
	 * process takes the VALIDATE with it) and comes back 200 ms later
	 * with a new generation: the failure detector never sees it down */
	struct mnode *m = &c->nodes[2];
	sim_env_kill(c->sim, m->env);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	sim_run_for(c->sim, 200000);
	ck_assert(!c->done);
	repair_delete(m->repair);
	m->env = sim_env_new(c->sim, &m->addr);
	env_set_receiver(m->env, deliver, m);
	start_repair(c, 2);
	c->gen[2] = 101;
	uint64_t t0 = sim_now_us(c->sim);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	/* at the next check, well before the 5 s timeouts */
	ck_assert_uint_le(sim_now_us(c->sim) - t0, 1100000);
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "127.0.9.3") &&
			      strstr(c->sum.error, "restarted"),
		      "%s", c->sum.error);
	/* and a rerun with the restarted node repairs everything */
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_int_eq(unequal_parts(c), 0);
	cluster_delete(c);
}
END_TEST

START_TEST(participant_killed_mid_session_fails_it)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	/* a second session while one runs is refused */
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), -1);
	ck_assert_int_eq(err_code(), ERR_EXISTS);
	/* let the trees come back, then kill node 1 */
	sim_run_for(c->sim, 2000);
	sim_env_kill(c->sim, c->nodes[1].env);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "127.0.9.2"), "%s", c->sum.error);
	/* a rerun with node 1 dead fails the same way, cleanly */
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert(!c->sum.ok);
	cluster_delete(c);
}
END_TEST

/* repair_state_list: the states of the sessions this node coordinated
 * (system_views.repairs), each step's time in order, and the counts the
 * metrics endpoint reads; an unlisted session (a movement's) is neither. */
struct states_seen {
	int n;
	struct repair_state_info last;
	char error[256];
	size_t nparticipants;
};

static void each_state(void *arg, const struct repair_state_info *s)
{
	struct states_seen *w = arg;
	w->n++;
	w->last = *s;
	w->nparticipants = s->nparticipants;
	snprintf(w->error, sizeof(w->error), "%s", s->error ? s->error : "");
}

static void check_steps(const struct repair_state_info *s)
{
	for (int k = 0; k < REPAIR_STEP_COUNT; k++) {
		ck_assert_int_gt(s->steps_ms[k], 0);
		if (k)
			ck_assert_int_ge(s->steps_ms[k], s->steps_ms[k - 1]);
	}
	ck_assert_int_le(s->init_ms, s->steps_ms[0]);
	ck_assert_int_ge(s->updated_ms, s->steps_ms[REPAIR_STEP_COUNT - 1]);
}

static struct states_seen states_of(struct repair *r)
{
	struct states_seen w = {0};
	repair_state_list(r, each_state, &w);
	return w;
}

START_TEST(session_states_and_counts)
{
	struct cluster *c = cluster_new();
	load(c);
	diverge(c);
	struct repair *r = c->nodes[0].repair;
	ck_assert_int_eq(states_of(r).n, 0);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	struct states_seen w = states_of(r);
	ck_assert_int_eq(w.n, 1);
	ck_assert_uint_eq(w.last.session, c->session);
	ck_assert_uint_eq(w.last.command, 1);
	ck_assert_int_eq(w.last.result, REPAIR_RESULT_SUCCESS);
	ck_assert(!w.last.incremental && !w.last.preview);
	ck_assert_uint_eq(w.last.tasks_done, 1);
	ck_assert_uint_eq(w.last.ntables, 1);
	ck_assert_str_eq(w.last.tables[0], "ks.t");
	ck_assert_uint_eq(w.last.nranges, 1);
	ck_assert_uint_eq(w.last.ranges[0].nreplicas, NNODES);
	ck_assert_uint_eq(w.nparticipants, NNODES);
	check_steps(&w.last);
	/* a full repair prepares nothing: its prepare steps are its start */
	ck_assert_int_eq(w.last.steps_ms[REPAIR_STEP_PREPARE_COMPLETE],
			 w.last.steps_ms[REPAIR_STEP_START]);
	struct repair_counts n;
	repair_get_counts(r, &n);
	ck_assert_uint_eq(n.succeeded[0], 1);
	ck_assert_uint_eq(n.failed[0], 0);
	ck_assert_uint_eq(n.bytes_streamed, streamed_bytes(c));
	ck_assert_uint_gt(n.bytes_streamed, 0);
	ck_assert(!n.running);

	/* incremental: PREPARE before the tasks */
	c->incremental = true;
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	w = states_of(r);
	ck_assert_int_eq(w.n, 2);
	ck_assert(w.last.incremental);
	ck_assert_uint_eq(w.last.command, 2);
	check_steps(&w.last);
	repair_get_counts(r, &n);
	ck_assert_uint_eq(n.succeeded[1], 1);

	/* a cancelled one fails, with its error; it counted as running */
	c->incremental = false;
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	repair_get_counts(r, &n);
	ck_assert(n.running);
	w = states_of(r);
	ck_assert_int_eq(w.last.result, REPAIR_RESULT_NONE);
	ck_assert_int_gt(w.last.steps_ms[REPAIR_STEP_REPAIR_START], 0);
	ck_assert_int_eq(w.last.steps_ms[REPAIR_STEP_REPAIR_COMPLETE], 0);
	ck_assert_int_eq(repair_cancel(r, "by the test"), 0);
	ck_assert(c->done && !c->sum.ok);
	w = states_of(r);
	ck_assert_int_eq(w.n, 3);
	ck_assert_int_eq(w.last.result, REPAIR_RESULT_FAILURE);
	ck_assert_msg(strstr(w.error, "by the test"), "%s", w.error);
	repair_get_counts(r, &n);
	ck_assert_uint_eq(n.failed[0], 1);
	ck_assert(!n.running);

	/* an unlisted session (a movement's streaming) is not a repair */
	struct inet_addr reps[NNODES];
	for (int i = 0; i < NNODES; i++)
		reps[i] = c->nodes[i].addr;
	struct repair_table t = {.name = "ks.t"};
	memcpy(t.id, c->meta->id, 16);
	struct repair_range rr = {.start = INT64_MIN,
				  .end = INT64_MIN,
				  .replicas = reps,
				  .nreplicas = NNODES};
	struct repair_request q = {.tables = &t,
				   .ntables = 1,
				   .ranges = &rr,
				   .nranges = 1,
				   .unlisted = true};
	c->done = false;
	ck_assert_int_eq(
		repair_start(r, &q, on_progress, on_done, c, &c->session), 0);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert_int_eq(states_of(r).n, 3);
	repair_get_counts(r, &n);
	ck_assert_uint_eq(n.succeeded[0] + n.failed[0], 2);
	cluster_delete(c);
}
END_TEST

int main(void)
{
	g_seed = test_seed(0x4e9a);
	Suite *s = suite_create("repair_failures_sim");
	TCase *tc = tcase_create("sessions");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc,
		       overlapping_sessions_of_two_coordinators_are_refused);
	tcase_add_test(tc, cancel_fails_the_session_and_frees_its_ranges);
	tcase_add_test(tc, a_restarted_coordinator_never_reuses_a_session_id);
	tcase_add_test(tc, killed_participant_fails_the_session);
	tcase_add_test(tc, participant_killed_mid_session_fails_it);
	tcase_add_test(tc, participant_convicted_mid_session_fails_it_at_once);
	tcase_add_test(tc, participant_restarted_mid_session_fails_it_at_once);
	tcase_add_test(tc, session_states_and_counts);
	suite_add_tcase(s, tc);
	return test_run(s);
}
