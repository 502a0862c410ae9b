/*
 * Gossip and failure detection in the simulator: convergence, kills,
 * partitions (symmetric and one-way), restarts, shutdown, local pauses,
 * quarantine, no flapping on a lossy network, a joiner following the
 * seeds, determinism.
 *
 * Time bounds here are simulated seconds derived from the protocol (phi 8
 * convicts after ~18.4 mean intervals; the mean is capped at 2 intervals),
 * not wall-clock speed goals.
 */
#include "tests/lib/testutil.h"
#include "tests/sim/gossip_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S 1000000ull

static uint64_t seed;

static const size_t three_dcs[] = {3, 3, 3};

static struct gc *cluster_9(void)
{
	struct gc *c = gc_new(seed, three_dcs, 3, 3);
	gc_start(c);
	ck_assert_msg(gc_run_until_converged(c, 60 * S),
		      "9 nodes did not converge");
	return c;
}

static bool all_see_down(struct gc *c, size_t target)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->nodes[i].up && i != target && gc_sees_up(c, i, target))
			return false;
	return true;
}

struct down_arg {
	struct gc *c;
	size_t target;
};

static bool pred_all_see_down(void *arg)
{
	struct down_arg *d = arg;
	return all_see_down(d->c, d->target);
}

START_TEST(nine_nodes_converge_with_every_state)
{
	struct gc *c = cluster_9();
	for (size_t i = 0; i < c->n; i++) {
		for (size_t j = 0; j < c->n; j++) {
			struct gossip_endpoint_info info;
			ck_assert_int_eq(gossip_endpoint_find(c->nodes[i].g,
							      &c->nodes[j].addr,
							      &info),
					 0);
			ck_assert_str_eq(info.states[GOSSIP_STATE_DC],
					 c->nodes[j].dc);
			ck_assert_str_eq(info.states[GOSSIP_STATE_RACK],
					 c->nodes[j].rack);
			ck_assert_ptr_nonnull(info.states[GOSSIP_STATE_TOKENS]);
			ck_assert_int_eq(info.status, GOSSIP_STATUS_NORMAL);
		}
		ck_assert_uint_eq(gossip_live_count(c->nodes[i].g), 8);
	}
	ck_assert_uint_eq(gc_total_convictions(c), 0);
	gc_delete(c);
}
END_TEST

START_TEST(killed_node_is_marked_down_everywhere)
{
	struct gc *c = cluster_9();
	sim_run_for(c->sim, 30 * S); /* let the windows fill */
	double sum = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct gossip_endpoint_info info;
		gossip_endpoint_find(c->nodes[i].g, &c->nodes[4].addr, &info);
		sum += info.fd_mean_us;
	}
	printf("mean heartbeat interval of node 4 seen by the others: %.2f s\n",
	       sum / (double)(c->n - 1) / 1e6);
	gc_kill(c, 4);
	uint64_t t0 = sim_now_us(c->sim);
	struct down_arg d = {c, 4};
	ck_assert(sim_run_until(c->sim, pred_all_see_down, &d, 40 * S));
	uint64_t took = sim_now_us(c->sim) - t0;
	printf("kill detected by every peer after %.1f s (simulated)\n",
	       (double)took / 1e6);
	/* Not before phi could pass 8 at a 1 s mean. */
	ck_assert_uint_ge(took, 15 * S);
	/* Nobody else was convicted. */
	for (size_t i = 0; i < c->n; i++)
		for (size_t j = 0; j < c->n; j++)
			if (i != j && i != 4 && j != 4)
				ck_assert(gc_sees_up(c, i, j));
	gc_delete(c);
}
END_TEST

START_TEST(restart_with_higher_generation_comes_back_up)
{
	struct gc *c = cluster_9();
	gc_kill(c, 7);
	struct down_arg d = {c, 7};
	ck_assert(sim_run_until(c->sim, pred_all_see_down, &d, 60 * S));
	int64_t old_gen = c->nodes[7].generation;
	gc_restart(c, 7);
	ck_assert_int_gt(c->nodes[7].generation, old_gen);
	ck_assert(gc_run_until_converged(c, 10 * S));
	for (size_t i = 0; i < c->n; i++) {
		struct gossip_endpoint_info info;
		ck_assert_int_eq(gossip_endpoint_find(c->nodes[i].g,
						      &c->nodes[7].addr, &info),
				 0);
		ck_assert_int_eq(info.generation, c->nodes[7].generation);
		ck_assert_int_eq(info.status, GOSSIP_STATUS_NORMAL);
	}
	gc_delete(c);
}
END_TEST

static bool all_know_generation(void *arg)
{
	struct gc *c = arg;
	for (size_t i = 0; i < c->n; i++) {
		struct gossip_endpoint_info info;
		if (gossip_endpoint_find(c->nodes[i].g, &c->nodes[2].addr,
					 &info) != 0 ||
		    info.generation != c->nodes[2].generation)
			return false;
	}
	return true;
}

START_TEST(restart_before_conviction_is_seen_as_new_generation)
{
	struct gc *c = cluster_9();
	gc_kill(c, 2);
	sim_run_for(c->sim, 2 * S); /* quicker than the failure detector */
	gc_restart(c, 2);
	ck_assert(sim_run_until(c->sim, all_know_generation, c, 10 * S));
	ck_assert(gc_run_until_converged(c, 10 * S));
	gc_delete(c);
}
END_TEST

START_TEST(shutdown_announcement_marks_down_at_once)
{
	struct gc *c = cluster_9();
	gossip_announce_shutdown(c->nodes[5].g);
	sim_run_for(c->sim, 100000); /* 100 ms: far less than any FD delay */
	gc_kill(c, 5);
	ck_assert(all_see_down(c, 5));
	struct gossip_endpoint_info info;
	ck_assert_int_eq(
		gossip_endpoint_find(c->nodes[0].g, &c->nodes[5].addr, &info),
		0);
	ck_assert_int_eq(info.status, GOSSIP_STATUS_SHUTDOWN);
	/* It stays down: no stale news revives it. */
	sim_run_for(c->sim, 30 * S);
	ck_assert(all_see_down(c, 5));
	gc_restart(c, 5);
	ck_assert(gc_run_until_converged(c, 10 * S));
	gc_delete(c);
}
END_TEST

/* nodetool disablegossip then enablegossip: down everywhere, then up
 * again with a newer generation and the STATUS from before the stop. */
START_TEST(resumed_gossip_comes_back_up_with_its_status)
{
	struct gc *c = cluster_9();
	struct gossip *g = c->nodes[5].g;
	struct gossip_endpoint_info before, info;
	ck_assert_int_eq(
		gossip_endpoint_find(c->nodes[0].g, &c->nodes[5].addr, &before),
		0);
	ck_assert(gossip_running(g));
	gossip_announce_shutdown(g);
	ck_assert(!gossip_running(g));
	struct down_arg d = {c, 5};
	ck_assert(sim_run_until(c->sim, pred_all_see_down, &d, 1 * S));
	sim_run_for(c->sim, 20 * S);
	ck_assert(all_see_down(c, 5));
	ck_assert_int_eq(gossip_resume(g), 0);
	ck_assert(gossip_running(g));
	ck_assert_int_eq(gossip_resume(g), 0); /* running: nothing to do */
	ck_assert(gc_run_until_converged(c, 20 * S));
	for (size_t i = 0; i < c->n; i++) {
		if (i == 5)
			continue;
		ck_assert(gc_sees_up(c, i, 5));
		ck_assert_int_eq(gossip_endpoint_find(c->nodes[i].g,
						      &c->nodes[5].addr, &info),
				 0);
		ck_assert_int_eq(info.status, before.status);
		ck_assert_int_gt(info.generation, before.generation);
	}
	/* node 5 kept its peers: nobody was convicted over the gap */
	for (size_t i = 0; i < c->n; i++)
		ck_assert(gc_sees_up(c, 5, i) || i == 5);
	gc_delete(c);
}
END_TEST

static bool all_see_left(void *arg)
{
	struct down_arg *d = arg;
	for (size_t i = 0; i < d->c->n; i++) {
		struct gossip_endpoint_info info;
		if (i != d->target &&
		    (gossip_endpoint_find(d->c->nodes[i].g,
					  &d->c->nodes[d->target].addr,
					  &info) != 0 ||
		     info.status != GOSSIP_STATUS_LEFT))
			return false;
	}
	return true;
}

START_TEST(a_node_that_left_stops_silently)
{
	struct gc *c = cluster_9();
	struct down_arg d = {c, 4};
	ck_assert_int_eq(gossip_set_local_state(c->nodes[4].g,
						GOSSIP_STATE_STATUS_WITH_PORT,
						"LEFT,1,0"),
			 0);
	ck_assert(sim_run_until(c->sim, all_see_left, &d, 30 * S));
	gossip_announce_shutdown(c->nodes[4].g);
	sim_run_for(c->sim, 100000);
	gc_kill(c, 4);
	/* peers keep LEFT (a shutdown would say it keeps its ranges) */
	sim_run_for(c->sim, 30 * S);
	ck_assert(all_see_left(&d));
	gc_delete(c);
}
END_TEST

static bool none_knows(void *arg)
{
	struct down_arg *d = arg;
	struct gossip_endpoint_info info;
	for (size_t i = 0; i < d->c->n; i++)
		if (i != d->target &&
		    gossip_endpoint_find(d->c->nodes[i].g,
					 &d->c->nodes[d->target].addr,
					 &info) == 0)
			return false;
	return true;
}

START_TEST(a_left_node_is_forgotten_when_its_state_expires)
{
	struct gc *c = cluster_9();
	struct down_arg d = {c, 3};
	char v[64];
	uint64_t expiry_ms =
		(uint64_t)env_wall_us(c->nodes[3].env) / 1000 + 20000;
	snprintf(v, sizeof(v), "LEFT,1,%llu", (unsigned long long)expiry_ms);
	ck_assert_int_eq(gossip_set_local_state(c->nodes[3].g,
						GOSSIP_STATE_STATUS_WITH_PORT,
						v),
			 0);
	ck_assert(sim_run_until(c->sim, all_see_left, &d, 10 * S));
	gossip_announce_shutdown(c->nodes[3].g);
	sim_run_for(c->sim, 100000);
	gc_kill(c, 3);
	/* kept until the expiry (so every node hears LEFT), then gone
	 * everywhere, and not brought back by a peer's stale copy */
	sim_run_for(c->sim, 15 * S);
	ck_assert(all_see_left(&d));
	ck_assert(sim_run_until(c->sim, none_knows, &d, 10 * S));
	sim_run_for(c->sim, 30 * S);
	ck_assert(none_knows(&d));
	gc_delete(c);
}
END_TEST

static void partition_dc3(struct gc *c, bool cut)
{
	struct inet_addr a[6], b[3];
	for (size_t i = 0; i < 6; i++)
		a[i] = c->nodes[i].addr;
	for (size_t i = 0; i < 3; i++)
		b[i] = c->nodes[6 + i].addr;
	sim_net_partition(c->sim, a, 6, b, 3, cut);
}

static bool dc3_split(void *arg)
{
	struct gc *c = arg;
	for (size_t i = 0; i < c->n; i++)
		for (size_t j = 0; j < c->n; j++) {
			if (i == j)
				continue;
			bool same = (i >= 6) == (j >= 6);
			if (gc_sees_up(c, i, j) != same)
				return false;
		}
	return true;
}

START_TEST(partitioned_dc_is_down_on_both_sides_and_heals)
{
	struct gc *c = cluster_9();
	sim_run_for(c->sim, 20 * S);
	partition_dc3(c, true);
	ck_assert(sim_run_until(c->sim, dc3_split, c, 60 * S));
	sim_run_for(c->sim, 30 * S);
	ck_assert(dc3_split(c)); /* stable while cut */
	partition_dc3(c, false);
	ck_assert(gc_run_until_converged(c, 30 * S));
	gc_delete(c);
}
END_TEST

START_TEST(one_way_cut_between_two_nodes_convicts_nobody)
{
	struct gc *c = cluster_9();
	sim_run_for(c->sim, 20 * S);
	/* 0 cannot reach 1 directly; news still flows through the others. */
	sim_net_cut(c->sim, &c->nodes[0].addr, &c->nodes[1].addr, true);
	sim_run_for(c->sim, 120 * S);
	ck_assert(gc_converged(c));
	ck_assert_uint_eq(gc_total_convictions(c), 0);
	gc_delete(c);
}
END_TEST

static bool deaf_split(void *arg)
{
	struct gc *c = arg;
	for (size_t i = 0; i < c->n; i++)
		for (size_t j = 0; j < c->n; j++) {
			if (i == j)
				continue;
			bool expect = i != 3 && j != 3;
			if (gc_sees_up(c, i, j) != expect)
				return false;
		}
	return true;
}

START_TEST(deaf_node_convicts_all_and_is_convicted)
{
	struct gc *c = cluster_9();
	sim_run_for(c->sim, 20 * S);
	/* Node 3 still sends but hears nothing: an asymmetric partition. */
	sim_net_cut(c->sim, NULL, &c->nodes[3].addr, true);
	ck_assert(sim_run_until(c->sim, deaf_split, c, 60 * S));
	sim_net_heal(c->sim);
	ck_assert(gc_run_until_converged(c, 30 * S));
	gc_delete(c);
}
END_TEST

START_TEST(no_flapping_on_a_lossy_slow_network)
{
	struct gc *c = cluster_9();
	sim_net_set_latency(c->sim, 1000, 50000); /* 1..50 ms */
	sim_net_set_drop(c->sim, NULL, NULL, 0.10);
	sim_run_for(c->sim, 600 * S);
	ck_assert_uint_eq(gc_total_convictions(c), 0);
	ck_assert(gc_converged(c));
	gc_delete(c);
}
END_TEST

START_TEST(paused_node_convicts_nobody_when_it_wakes)
{
	struct gc *c = cluster_9();
	sim_run_for(c->sim, 20 * S);
	/* 12 s: over the local-pause guard, under the peers' conviction. */
	sim_env_pause(c->sim, c->nodes[0].env, 12 * S);
	sim_run_for(c->sim, 30 * S);
	struct gossip_stats st;
	gossip_get_stats(c->nodes[0].g, &st);
	ck_assert_uint_eq(st.local_pauses, 1);
	ck_assert_uint_eq(st.convictions, 0);
	ck_assert(gc_converged(c));
	gc_delete(c);
}
END_TEST

static bool all_see_status(void *arg)
{
	struct down_arg *d = arg;
	for (size_t i = 0; i < d->c->n; i++) {
		struct gossip_endpoint_info info;
		if (!d->c->nodes[i].up || i == d->target)
			continue;
		if (gossip_endpoint_find(d->c->nodes[i].g,
					 &d->c->nodes[d->target].addr,
					 &info) != 0 ||
		    info.status != GOSSIP_STATUS_LEFT)
			return false;
	}
	return true;
}

START_TEST(a_dead_nodes_state_set_on_its_behalf_reaches_everyone)
{
	struct gc *c = cluster_9();
	gc_kill(c, 6);
	struct down_arg d = {c, 6};
	ck_assert(sim_run_until(c->sim, pred_all_see_down, &d, 60 * S));
	/* a live peer and ourselves are refused */
	ck_assert_int_eq(gossip_set_remote_state(
				 c->nodes[0].g, &c->nodes[1].addr,
				 GOSSIP_STATE_STATUS_WITH_PORT, "LEFT,1"),
			 -1);
	ck_assert_int_eq(gossip_set_remote_state(
				 c->nodes[0].g, &c->nodes[0].addr,
				 GOSSIP_STATE_STATUS_WITH_PORT, "LEFT,1"),
			 -1);
	ck_assert_int_eq(gossip_set_remote_state(
				 c->nodes[0].g, &c->nodes[6].addr,
				 GOSSIP_STATE_STATUS_WITH_PORT, "LEFT,1"),
			 0);
	ck_assert(sim_run_until(c->sim, all_see_status, &d, 30 * S));
	/* nobody took it for news of the node: it stays down */
	sim_run_for(c->sim, 20 * S);
	ck_assert(all_see_down(c, 6));
	/* back with a new generation, its own state wins */
	gc_restart(c, 6);
	ck_assert(gc_run_until_converged(c, 60 * S));
	struct gossip_endpoint_info info;
	ck_assert_int_eq(
		gossip_endpoint_find(c->nodes[0].g, &c->nodes[6].addr, &info),
		0);
	ck_assert_int_ne(info.status, GOSSIP_STATUS_LEFT);
	gc_delete(c);
}
END_TEST

/* What node/ saves for a restart: every peer's states as seen by node
 * 4, plus one endpoint the others have forgotten. */
struct saved {
	size_t count;
	struct inet_addr addr[16];
	char *states[16][GOSSIP_STATE_COUNT];
};

static void load_saved(struct gc *c, size_t i, void *arg)
{
	struct saved *sv = arg;
	if (i != 4)
		return;
	for (size_t k = 0; k < sv->count; k++)
		ck_assert_int_eq(gossip_add_saved_endpoint(
					 c->nodes[i].g, &sv->addr[k],
					 (const char *const *)sv->states[k]),
				 0);
	/* ourselves and a known endpoint are refused */
	ck_assert_int_ne(
		gossip_add_saved_endpoint(c->nodes[i].g, &c->nodes[i].addr,
					  (const char *const *)sv->states[0]),
		0);
	ck_assert_int_ne(
		gossip_add_saved_endpoint(c->nodes[i].g, &sv->addr[0],
					  (const char *const *)sv->states[0]),
		0);
}

static bool node4_hears_everyone(void *arg)
{
	struct gc *c = arg;
	for (size_t k = 0; k < c->n; k++) {
		struct gossip_endpoint_info info;
		if (k == 4)
			continue;
		if (gossip_endpoint_find(c->nodes[4].g, &c->nodes[k].addr,
					 &info) != 0 ||
		    info.generation != c->nodes[k].generation || !info.alive)
			return false;
	}
	return true;
}

START_TEST(a_restarted_node_starts_from_its_saved_peers)
{
	struct gc *c = cluster_9();
	struct saved sv = {0};
	for (size_t k = 0; k < c->n; k++) {
		struct gossip_endpoint_info info;
		if (k == 4)
			continue;
		ck_assert_int_eq(gossip_endpoint_find(c->nodes[4].g,
						      &c->nodes[k].addr, &info),
				 0);
		sv.addr[sv.count] = info.addr;
		for (int s = 0; s < GOSSIP_STATE_COUNT; s++)
			sv.states[sv.count][s] =
				info.states[s] ? strdup(info.states[s]) : NULL;
		sv.count++;
	}
	/* a node removed while node 4 was down: the others forgot it */
	struct inet_addr gone;
	ck_assert_int_eq(inet_addr_parse("127.0.0.99:7000", 7000, &gone), 0);
	sv.addr[sv.count] = gone;
	for (int s = 0; s < GOSSIP_STATE_COUNT; s++)
		sv.states[sv.count][s] =
			sv.states[0][s] ? strdup(sv.states[0][s]) : NULL;
	sv.count++;

	gc_kill(c, 4);
	c->before_start = load_saved;
	c->before_start_arg = &sv;
	gc_restart(c, 4);
	/* before any message: the whole ring, every peer DOWN */
	ck_assert_uint_eq(gossip_endpoint_count(c->nodes[4].g), c->n + 1);
	for (size_t k = 0; k < sv.count; k++) {
		struct gossip_endpoint_info info;
		ck_assert_int_eq(
			gossip_endpoint_find(c->nodes[4].g, &sv.addr[k], &info),
			0);
		ck_assert(!info.alive);
		ck_assert_int_eq(info.generation, 0);
		ck_assert_int_eq(info.status, GOSSIP_STATUS_NORMAL);
		ck_assert_str_eq(info.states[GOSSIP_STATE_TOKENS],
				 sv.states[k][GOSSIP_STATE_TOKENS]);
	}
	ck_assert_int_ne(gossip_set_remote_state(c->nodes[4].g, &gone,
						 GOSSIP_STATE_STATUS_WITH_PORT,
						 "LEFT,1,1"),
			 0);
	/* each peer's own state replaces the saved one */
	ck_assert(sim_run_until(c->sim, node4_hears_everyone, c, 10 * S));
	ck_assert(gc_run_until_converged(c, 10 * S));
	/* the forgotten endpoint spreads to nobody and stays as saved */
	sim_run_for(c->sim, 30 * S);
	for (size_t k = 0; k < c->n; k++) {
		struct gossip_endpoint_info info;
		int rc = gossip_endpoint_find(c->nodes[k].g, &gone, &info);
		if (k != 4) {
			ck_assert_int_ne(rc, 0);
			continue;
		}
		ck_assert_int_eq(rc, 0);
		ck_assert_int_eq(info.generation, 0);
		ck_assert(!info.alive);
	}
	for (size_t k = 0; k < sv.count; k++)
		for (int s = 0; s < GOSSIP_STATE_COUNT; s++)
			free(sv.states[k][s]);
	gc_delete(c);
}
END_TEST

START_TEST(removed_endpoint_is_quarantined_then_relearned)
{
	struct gc *c = cluster_9();
	ck_assert_int_eq(
		gossip_remove_endpoint(c->nodes[0].g, &c->nodes[8].addr), 0);
	struct gossip_endpoint_info info;
	sim_run_for(c->sim, 30 * S);
	ck_assert_int_ne(
		gossip_endpoint_find(c->nodes[0].g, &c->nodes[8].addr, &info),
		0);
	sim_run_for(c->sim, 60 * S); /* past the 60 s quarantine */
	ck_assert_int_eq(
		gossip_endpoint_find(c->nodes[0].g, &c->nodes[8].addr, &info),
		0);
	ck_assert(gc_run_until_converged(c, 10 * S));
	gc_delete(c);
}
END_TEST

START_TEST(node_of_another_cluster_is_ignored)
{
	static const size_t two[] = {2};
	struct gc *c = gc_new(seed, two, 1, 1);
	gc_start_node(c, 0);
	c->cluster_name = "Other Cluster";
	gc_start_node(c, 1);
	sim_run_for(c->sim, 30 * S);
	ck_assert(!gc_sees_up(c, 0, 1));
	ck_assert(!gc_sees_up(c, 1, 0));
	struct gossip_stats st;
	gossip_get_stats(c->nodes[0].g, &st);
	ck_assert_uint_gt(st.wrong_cluster, 0);
	ck_assert_uint_eq(gossip_endpoint_count(c->nodes[0].g), 1);
	gc_delete(c);
}
END_TEST

START_TEST(seed_starting_late_is_found)
{
	struct gc *c = gc_new(seed, three_dcs, 3, 3);
	for (size_t i = 1; i < c->n; i++)
		gc_start_node(c, i);
	sim_run_for(c->sim, 20 * S);
	gc_start_node(c, 0);
	ck_assert(gc_run_until_converged(c, 60 * S));
	gc_delete(c);
}
END_TEST

/* Nodes started together, none of which knows the others yet: how many
 * know every node after `rounds` rounds (a join waits four; the test asks
 * for two), each asking the seed for its whole view every round when
 * `follow`. */
static size_t knowing_all_after(size_t rounds, bool follow)
{
	static const size_t one_dc[] = {12};
	struct gc *c = gc_new(seed, one_dc, 1, 4);
	gc_start(c);
	for (size_t i = 1; follow && i < c->n; i++)
		gossip_set_follow_seeds(c->nodes[i].g, true);
	/* the first round comes within 1.5 intervals of the start */
	sim_run_for(c->sim, c->interval_us * (rounds + 1) + c->interval_us / 2);
	size_t all = 0;
	for (size_t i = 0; i < c->n; i++)
		all += gossip_endpoint_count(c->nodes[i].g) == c->n;
	gc_delete(c);
	return all;
}

START_TEST(joiner_following_the_seed_knows_every_node)
{
	/* Without it a joiner may know only the seed after two rounds and
	 * choose tokens alongside nodes it has not heard of. */
	ck_assert_uint_eq(knowing_all_after(2, true), 12);
	ck_assert_uint_lt(knowing_all_after(2, false), 12);
}
END_TEST

static uint64_t trace_hash(uint64_t s)
{
	struct gc *c = gc_new(s, three_dcs, 3, 3);
	sim_net_set_drop(c->sim, NULL, NULL, 0.05);
	gc_start(c);
	sim_run_for(c->sim, 60 * S);
	gc_kill(c, 1);
	sim_run_for(c->sim, 30 * S);
	uint64_t h = sim_net_sent(c->sim) * 1000003u + sim_net_dropped(c->sim);
	for (size_t i = 0; i < c->n; i++) {
		struct gossip_endpoint_info info;
		gossip_endpoint_find(c->nodes[i].g, &c->nodes[i].addr, &info);
		h = h * 31 + (uint64_t)info.heartbeat + c->nodes[i].downs;
	}
	gc_delete(c);
	return h;
}

START_TEST(same_seed_same_run)
{
	ck_assert_uint_eq(trace_hash(seed), trace_hash(seed));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("gossip_sim");
	TCase *t = tcase_create("gossip");
	tcase_set_timeout(t, 300);
	tcase_add_test(t, nine_nodes_converge_with_every_state);
	tcase_add_test(t, killed_node_is_marked_down_everywhere);
	tcase_add_test(t,
		       a_dead_nodes_state_set_on_its_behalf_reaches_everyone);
	tcase_add_test(t, restart_with_higher_generation_comes_back_up);
	tcase_add_test(t, restart_before_conviction_is_seen_as_new_generation);
	tcase_add_test(t, shutdown_announcement_marks_down_at_once);
	tcase_add_test(t, resumed_gossip_comes_back_up_with_its_status);
	tcase_add_test(t, a_node_that_left_stops_silently);
	tcase_add_test(t, a_left_node_is_forgotten_when_its_state_expires);
	tcase_add_test(t, partitioned_dc_is_down_on_both_sides_and_heals);
	tcase_add_test(t, one_way_cut_between_two_nodes_convicts_nobody);
	tcase_add_test(t, deaf_node_convicts_all_and_is_convicted);
	tcase_add_test(t, no_flapping_on_a_lossy_slow_network);
	tcase_add_test(t, paused_node_convicts_nobody_when_it_wakes);
	tcase_add_test(t, a_restarted_node_starts_from_its_saved_peers);
	tcase_add_test(t, removed_endpoint_is_quarantined_then_relearned);
	tcase_add_test(t, node_of_another_cluster_is_ignored);
	tcase_add_test(t, seed_starting_late_is_found);
	tcase_add_test(t, joiner_following_the_seed_knows_every_node);
	tcase_add_test(t, same_seed_same_run);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	seed = test_seed(20261130);
	return test_run(suite());
}
