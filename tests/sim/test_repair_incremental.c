/*
 * Incremental repair sessions in the deterministic simulator
 * (repair_cluster.h): a session marks what it repaired and a second finds
 * nothing; a subrange marks only its range; a failed, cancelled, partial
 * or timed-out session leaves nothing repaired (its pending data goes back
 * to unrepaired); participant sessions survive restarts (persisted) and a
 * commit that failed is retried until settled; a restarted coordinator
 * fails its participants' sessions. Preview is refused.
 */
#include "repair/repair.h"

#include "common/err.h"
#include "tests/lib/testutil.h"
#include "tests/sim/repair_cluster.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- incremental repair -------------------------------------------------- */

/* Whether every node's repaired data holds the same partitions. */
static bool repaired_equal(struct cluster *c)
{
	for (int i = 1; i < NNODES; i++)
		if (!mem_store_same(&c->nodes[0].rep, &c->nodes[i].rep))
			return false;
	return true;
}

struct local_seen {
	int n;
	enum repair_local_state last;
	uint8_t uuid[16];
};

static void local_each(void *arg, const struct repair_local_info *l)
{
	struct local_seen *s = arg;
	s->n++;
	s->last = l->state;
	memcpy(s->uuid, l->uuid, 16);
}

static struct local_seen local_of(struct cluster *c, int i)
{
	struct local_seen s = {0};
	repair_local_list(c->nodes[i].repair, local_each, &s);
	return s;
}

START_TEST(incremental_repair_marks_repaired_and_a_second_finds_nothing)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	diverge(c);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert(c->sum.incremental);
	ck_assert_uint_eq(c->sum.marked, 3 * NKEYS);
	ck_assert_uint_eq(c->sum.repaired, 3 * NKEYS);
	ck_assert_uint_ge(c->sum.partitions, 3 * NKEYS - 3);
	ck_assert_int_gt(c->sum.repaired_at, 0);
	/* the divergent rows streamed as pending data, now repaired: every
	 * node holds everything repaired, nothing unrepaired or pending */
	ck_assert_uint_eq(streamed(c, 2), 10 + 4 + 1);
	for (int i = 0; i < NNODES; i++) {
		ck_assert_uint_eq(c->nodes[i].store.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].pend.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].rep.nparts, NKEYS);
		struct local_seen l = local_of(c, i);
		ck_assert_int_eq(l.n, 1);
		ck_assert_int_eq(l.last, REPAIR_LOCAL_FINALIZED);
		ck_assert(!memcmp(l.uuid, c->sum.uuid, 16));
	}
	ck_assert(repaired_equal(c));
	/* a finalized session cannot be failed any more */
	ck_assert_int_eq(repair_local_fail(c->nodes[1].repair, c->sum.uuid),
			 -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);

	/* a second one: nothing unrepaired, so nothing validated or sent */
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.marked, 0);
	ck_assert_uint_eq(c->sum.partitions, 0);
	ck_assert_uint_eq(c->sum.mismatched_ranges, 0);
	ck_assert_uint_eq(c->sum.rows_hashed, 0);
	for (int i = 0; i < NNODES; i++)
		ck_assert_uint_eq(streamed(c, i), 0);

	/* new writes node 2 missed: only they are validated and stream */
	for (int k = 0; k < 5; k++)
		put_row(c, 1 | 2, k, NROWS + 2, 3000);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.marked, 2 * 5);
	ck_assert_uint_eq(streamed(c, 2), 5);
	ck_assert_uint_eq(streamed(c, 0) + streamed(c, 1), 0);
	for (int i = 0; i < NNODES; i++) {
		ck_assert_uint_eq(c->nodes[i].store.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].pend.nparts, 0);
	}
	ck_assert(repaired_equal(c));
	cluster_delete(c);
}
END_TEST

START_TEST(incremental_subrange_marks_only_its_range)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	run(c, -100, INT64_MAX / 2, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	for (int i = 0; i < NNODES; i++) {
		struct mnode *m = &c->nodes[i];
		ck_assert_uint_gt(m->rep.nparts, 0);
		ck_assert_uint_gt(m->store.nparts, 0);
		ck_assert_uint_eq(m->rep.nparts + m->store.nparts, NKEYS);
		for (size_t k = 0; k < m->rep.nparts; k++) {
			int64_t t = storage_mutation_token(m->rep.parts[k]);
			ck_assert(t > -100 && t <= INT64_MAX / 2);
		}
	}
	cluster_delete(c);
}
END_TEST

START_TEST(failed_incremental_session_leaves_nothing_repaired)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	diverge(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	sim_run_for(c->sim, 2000);
	ck_assert(!c->done);
	sim_env_kill(c->sim, c->nodes[2].env);
	c->down[2] = true;
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "127.0.9.3"), "%s", c->sum.error);
	sim_run_for(c->sim, 100000); /* the FAILs arrive */
	for (int i = 0; i < 2; i++) {
		struct mnode *m = &c->nodes[i];
		ck_assert_uint_eq(m->rep.nparts, 0);
		ck_assert_uint_eq(m->pend.nparts, 0);
		ck_assert_uint_eq(m->store.nparts, NKEYS);
		struct local_seen l = local_of(c, i);
		ck_assert_int_eq(l.last, REPAIR_LOCAL_FAILED);
	}
	cluster_delete(c);
}
END_TEST

START_TEST(a_participant_cancels_a_stuck_incremental_session)
{
	/* the coordinator dies after PREPARE: the participants keep their
	 * data pending until repair_admin cancel fails the session */
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	for (int t = 0;
	     t < 1000 && local_of(c, 1).last != REPAIR_LOCAL_REPAIRING; t++)
		sim_run_for(c->sim, 100);
	sim_env_kill(c->sim, c->nodes[0].env);
	sim_run_for(c->sim, 100000);
	struct local_seen l = local_of(c, 1);
	ck_assert(l.last == REPAIR_LOCAL_PREPARED ||
		  l.last == REPAIR_LOCAL_REPAIRING);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, NKEYS);
	ck_assert_int_eq(repair_local_fail(c->nodes[1].repair, l.uuid), 0);
	ck_assert_int_eq(local_of(c, 1).last, REPAIR_LOCAL_FAILED);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, 0);
	ck_assert_uint_eq(c->nodes[1].store.nparts, NKEYS);
	uint8_t none[16] = {1};
	ck_assert_int_eq(repair_local_fail(c->nodes[1].repair, none), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	cluster_delete(c);
}
END_TEST

/* The coordinator dies after PREPARE; the participant restarts: its
 * session and pending data survive the restart (persisted), and the
 * timeout then fails it: its data is unrepaired, never left pending. */
START_TEST(
	a_session_whose_coordinator_vanished_survives_a_restart_and_times_out)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	c->local_timeout_ms = 30000;
	for (int i = 0; i < NNODES; i++) {
		c->gen[i] = 100;
		restart_node(c, i); /* the timeout set */
	}
	load(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	for (int t = 0;
	     t < 1000 && local_of(c, 1).last != REPAIR_LOCAL_REPAIRING; t++)
		sim_run_for(c->sim, 100);
	sim_env_kill(c->sim, c->nodes[0].env);
	c->down[0] = true;
	sim_run_for(c->sim, 1000000);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, NKEYS);
	ck_assert_int_gt(c->nodes[1].saves, 0);
	restart_node(c, 1);
	struct local_seen l = local_of(c, 1);
	ck_assert_int_eq(l.n, 1);
	ck_assert(l.last == REPAIR_LOCAL_PREPARED ||
		  l.last == REPAIR_LOCAL_REPAIRING);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, NKEYS);
	/* before the timeout it waits: the coordinator may come back */
	sim_run_for(c->sim, 10ull * 1000000);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, NKEYS);
	sim_run_for(c->sim, 30ull * 1000000);
	ck_assert_int_eq(local_of(c, 1).last, REPAIR_LOCAL_FAILED);
	ck_assert_uint_eq(c->nodes[1].pend.nparts, 0);
	ck_assert_uint_eq(c->nodes[1].store.nparts, NKEYS);
	ck_assert_uint_eq(c->nodes[1].rep.nparts, 0);
	/* and the failure is persisted: another restart keeps it failed */
	restart_node(c, 1);
	ck_assert_int_eq(local_of(c, 1).last, REPAIR_LOCAL_FAILED);
	cluster_delete(c);
}
END_TEST

/* A coordinator that restarts (a new gossip generation) forgot its
 * session: its participants fail it at the next check. */
START_TEST(a_restarted_coordinator_fails_its_participants_sessions)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	for (int i = 0; i < NNODES; i++)
		c->gen[i] = 100;
	load(c);
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, false), 0);
	for (int t = 0;
	     t < 1000 && local_of(c, 1).last != REPAIR_LOCAL_REPAIRING; t++)
		sim_run_for(c->sim, 100);
	sim_env_kill(c->sim, c->nodes[0].env);
	c->gen[0]++;
	sim_run_for(c->sim, 2000000);
	for (int i = 1; i < NNODES; i++) {
		ck_assert_int_eq(local_of(c, i).last, REPAIR_LOCAL_FAILED);
		ck_assert_uint_eq(c->nodes[i].pend.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].store.nparts, NKEYS);
	}
	cluster_delete(c);
}
END_TEST

/* A participant whose COMMIT fails on its table (EIO) still finalizes
 * the session (it promised), and retries the table at the next checks
 * until its data is repaired; through a restart too. */
START_TEST(a_commit_that_failed_is_retried_until_settled)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	c->nodes[1].finish_failures = 2;
	run(c, INT64_MIN, INT64_MIN, false);
	/* the coordinator reports it; the others are repaired */
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "finalize commit failed on "
					   "127.0.9.2"),
		      "%s", c->sum.error);
	struct mnode *m = &c->nodes[1];
	ck_assert_int_eq(local_of(c, 1).last, REPAIR_LOCAL_FINALIZED);
	ck_assert_uint_eq(m->pend.nparts, NKEYS);
	ck_assert_uint_eq(c->nodes[0].rep.nparts, NKEYS);
	ck_assert_uint_eq(c->nodes[2].rep.nparts, NKEYS);
	/* a restart keeps it unsettled: the load retries (and fails) */
	restart_node(c, 1);
	ck_assert_int_eq(m->finish_failures, 0);
	ck_assert_uint_eq(m->pend.nparts, NKEYS);
	sim_run_for(c->sim, 1100000); /* the next check's retry */
	ck_assert_uint_eq(m->pend.nparts, 0);
	ck_assert_uint_eq(m->rep.nparts, NKEYS);
	ck_assert_int_eq(local_of(c, 1).last, REPAIR_LOCAL_FINALIZED);
	/* settled: nothing more is retried */
	int saves = m->saves;
	sim_run_for(c->sim, 3000000);
	ck_assert_int_eq(m->saves, saves);
	cluster_delete(c);
}
END_TEST

/* A finalized session, persisted, stays finalized through a restart;
 * a corrupt image is refused whole. */
START_TEST(finalized_sessions_survive_a_restart)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	load(c);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	restart_node(c, 2);
	struct local_seen l = local_of(c, 2);
	ck_assert_int_eq(l.n, 1);
	ck_assert_int_eq(l.last, REPAIR_LOCAL_FINALIZED);
	ck_assert(!memcmp(l.uuid, c->sum.uuid, 16));
	ck_assert_uint_eq(c->nodes[2].rep.nparts, NKEYS);
	struct buf *b = &c->nodes[2].saved;
	for (size_t cut = 0; cut < b->len; cut++)
		ck_assert_int_eq(
			repair_locals_load(c->nodes[2].repair, b->data, cut),
			-1);
	ck_assert_int_eq(local_of(c, 2).n, 1);
	cluster_delete(c);
}
END_TEST

/* -dc/-hosts: the session syncs the pending data but marks nothing
 * repaired (Cassandra's repairedAt only for global repairs) */
START_TEST(partial_incremental_repair_marks_nothing_repaired)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	c->partial = true;
	load(c);
	diverge(c);
	run(c, INT64_MIN, INT64_MIN, false);
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert(c->sum.partial);
	ck_assert_uint_eq(streamed(c, 2), 10 + 4 + 1);
	for (int i = 0; i < NNODES; i++) {
		ck_assert_uint_eq(c->nodes[i].rep.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].pend.nparts, 0);
		ck_assert_uint_eq(c->nodes[i].store.nparts, NKEYS);
	}
	ck_assert_int_eq(unequal_parts(c), 0);
	cluster_delete(c);
}
END_TEST

START_TEST(incremental_preview_is_refused)
{
	struct cluster *c = cluster_new();
	c->incremental = true;
	ck_assert_int_eq(start(c, INT64_MIN, INT64_MIN, true), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	cluster_delete(c);
}
END_TEST

int main(void)
{
	g_seed = test_seed(0x4e9a);
	Suite *s = suite_create("repair_incremental_sim");
	TCase *tc = tcase_create("sessions");
	tcase_set_timeout(tc, 120);
	tcase_add_test(
		tc,
		incremental_repair_marks_repaired_and_a_second_finds_nothing);
	tcase_add_test(tc, incremental_subrange_marks_only_its_range);
	tcase_add_test(tc, failed_incremental_session_leaves_nothing_repaired);
	tcase_add_test(tc, a_participant_cancels_a_stuck_incremental_session);
	tcase_add_test(tc, incremental_preview_is_refused);
	tcase_add_test(
		tc,
		a_session_whose_coordinator_vanished_survives_a_restart_and_times_out);
	tcase_add_test(tc,
		       a_restarted_coordinator_fails_its_participants_sessions);
	tcase_add_test(tc, finalized_sessions_survive_a_restart);
	tcase_add_test(tc, a_commit_that_failed_is_retried_until_settled);
	tcase_add_test(tc, partial_incremental_repair_marks_nothing_repaired);
	suite_add_tcase(s, tc);
	return test_run(s);
}
