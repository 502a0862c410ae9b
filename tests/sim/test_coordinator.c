/*
 * The coordinator in the deterministic simulator: consistency arithmetic
 * against an independent oracle for every level, replication factor and
 * per-DC liveness; acknowledgements under loss and delay; no QUORUM-acked
 * write missing from a later QUORUM read across partitions and pauses;
 * read repair; timeouts and hints; truncates (every node, Unavailable with
 * a node down, a truncate error on timeout or a replica's failure).
 *
 * Each simulated node has its own env, a ring with every node, an
 * in-memory replica store (partition -> fragment, merged on apply) and a
 * coordinator. The failure detector's verdict is a per-observer table the
 * test sets, so "down" can be tested apart from "unreachable".
 */
#include "replication/replication.h"

#include "common/err.h"
#include "common/murmur3.h"
#include "tests/lib/testutil.h"
#include "tests/sim/sim.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replication/coord_internal.h"
#include "tests/sim/coord_cluster.h"

static uint64_t g_seed;

/* ---- the oracle ---------------------------------------------------------- */

static const int all_cls[] = {
	REPL_CL_ANY,          REPL_CL_ONE,         REPL_CL_TWO,
	REPL_CL_THREE,        REPL_CL_QUORUM,      REPL_CL_ALL,
	REPL_CL_LOCAL_QUORUM, REPL_CL_EACH_QUORUM, REPL_CL_LOCAL_ONE,
};

/* Written from Cassandra's documentation, independently of consistency.c:
 * required replicas and the live ones that count, for two DCs where the
 * coordinator is in dc1. Returns whether the request may proceed. */
static bool oracle(int cl, bool is_nts, int rf1, int rf2, int live1, int live2,
		   bool write, int *required, int *alive)
{
	int rf = rf1 + rf2;
	int q = rf / 2 + 1;
	int lq = is_nts ? rf1 / 2 + 1 : q;
	*alive = live1 + live2;
	switch (cl) {
	case REPL_CL_ANY:
		*required = 1;
		return write;
	case REPL_CL_ONE:
		*required = 1;
		break;
	case REPL_CL_TWO:
		*required = 2;
		break;
	case REPL_CL_THREE:
		*required = 3;
		break;
	case REPL_CL_QUORUM:
		*required = q;
		break;
	case REPL_CL_ALL:
		*required = rf;
		break;
	case REPL_CL_LOCAL_ONE:
		*required = 1;
		*alive = live1;
		break;
	case REPL_CL_LOCAL_QUORUM:
		*required = lq;
		*alive = live1;
		break;
	case REPL_CL_EACH_QUORUM:
		if (!is_nts) {
			*required = q;
			break;
		}
		if (rf1 > 0 && live1 < rf1 / 2 + 1) {
			*required = rf1 / 2 + 1;
			*alive = live1;
			return false;
		}
		if (rf2 > 0 && live2 < rf2 / 2 + 1) {
			*required = rf2 / 2 + 1;
			*alive = live2;
			return false;
		}
		return true;
	}
	return *alive >= *required;
}

/* The replicas of `key` in each DC. */
static void replicas_of(struct simc *c, const struct ring_strategy *s,
			const char *key, int *eps, int *n)
{
	struct ring_replicas reps;
	int64_t tok = murmur3_token((const uint8_t *)key, strlen(key));
	ck_assert_int_eq(
		ring_replicas_for_token(c->nodes[0].ring, s, tok, &reps), 0);
	*n = (int)reps.n_natural;
	for (size_t i = 0; i < reps.n_natural; i++)
		eps[i] = (int)reps.natural[i];
}

/* Endpoint index in the ring -> node index (same order: by address). */
static int node_of(struct simc *c, int ep)
{
	const struct ring_endpoint *e =
		ring_endpoint_get(c->nodes[0].ring, (size_t)ep);
	for (int i = 0; i < c->n; i++)
		if (inet_addr_eq(&c->nodes[i].addr, &e->addr))
			return i;
	ck_abort();
	return -1;
}

/* One case: replication (rf1, rf2) on dc1/dc2 of 5 nodes each; `down1`
 * and `down2` replicas of the key marked down in each DC; every level,
 * read and write, from a live dc1 coordinator. */
static void availability_case(uint64_t seed, bool is_nts, int rf1, int rf2,
			      int down1, int down2)
{
	const char *dcs[10] = {"dc1", "dc1", "dc1", "dc1", "dc1",
			       "dc2", "dc2", "dc2", "dc2", "dc2"};
	int n = is_nts ? 10 : 5;
	struct simc *c = simc_new(seed, n, dcs);
	struct ring_strategy *s = is_nts ? nts(rf1, rf2) : simple(rf1);
	const char *key = "k1";
	int eps[16], ne;
	replicas_of(c, s, key, eps, &ne);
	int marked1 = 0, marked2 = 0, coord = -1;
	/* Down replicas from the end of the list; the coordinator is a live
	 * dc1 node. */
	for (int i = ne - 1; i >= 0; i--) {
		int nd = node_of(c, eps[i]);
		bool in1 = nd < 5;
		if (in1 && marked1 < down1) {
			simc_kill(c, nd);
			marked1++;
		} else if (!in1 && marked2 < down2) {
			simc_kill(c, nd);
			marked2++;
		}
	}
	if (marked1 < down1 || marked2 < down2)
		goto out; /* not that many replicas */
	for (int i = 0; i < 5; i++)
		if (!c->down[i]) {
			coord = i;
			break;
		}
	if (coord < 0)
		goto out;
	int live1 = 0, live2 = 0;
	for (int i = 0; i < ne; i++) {
		int nd = node_of(c, eps[i]);
		if (!c->down[nd])
			*(nd < 5 ? &live1 : &live2) += 1;
	}
	for (size_t k = 0; k < sizeof(all_cls) / sizeof(all_cls[0]); k++) {
		int cl = all_cls[k];
		for (int w = 0; w < 2; w++) {
			int required = 0, alive = 0;
			bool ok = oracle(cl, is_nts, rf1, is_nts ? rf2 : 0,
					 live1, live2, w, &required, &alive);
			struct outcome o =
				w ? do_write(c, coord, s, cl, key, "v", 1000)
				  : do_read(c, coord, s, cl, key);
			storage_mutation_delete(o.frag);
			if (!w && cl == REPL_CL_ANY) {
				ck_assert_int_eq(o.res.outcome, REPL_INVALID);
				continue;
			}
			if (ok) {
				ck_assert_msg(o.res.outcome == REPL_OK,
					      "seed %llu %s rf %d/%d down "
					      "%d/%d %s %s: outcome %d (%s)",
					      (unsigned long long)seed,
					      is_nts ? "NTS" : "Simple", rf1,
					      rf2, down1, down2,
					      w ? "write" : "read",
					      repl_cl_name(cl), o.res.outcome,
					      o.res.msg);
			} else {
				ck_assert_msg(
					o.res.outcome == REPL_UNAVAILABLE &&
						o.res.required == required &&
						o.res.alive == alive,
					"seed %llu %s rf %d/%d down "
					"%d/%d %s %s: outcome %d "
					"required %d/%d alive %d/%d",
					(unsigned long long)seed,
					is_nts ? "NTS" : "Simple", rf1, rf2,
					down1, down2, w ? "write" : "read",
					repl_cl_name(cl), o.res.outcome,
					o.res.required, required, o.res.alive,
					alive);
			}
		}
	}
out:
	ring_strategy_delete(s);
	simc_delete(c);
}

START_TEST(availability_simple_rf1_to_5)
{
	for (int rf = 1; rf <= 5; rf++)
		for (int down = 0; down < rf && down <= 4; down++)
			availability_case(100 + (uint64_t)rf, false, rf, 0,
					  down, 0);
}
END_TEST

START_TEST(availability_nts_two_dcs)
{
	for (int rf1 = 1; rf1 <= 3; rf1++)
		for (int rf2 = 0; rf2 <= 3; rf2++)
			for (int d1 = 0; d1 < rf1; d1++)
				for (int d2 = 0; d2 <= rf2; d2++)
					availability_case(
						200 + (uint64_t)(rf1 * 16 +
								 rf2),
						true, rf1, rf2, d1, d2);
}
END_TEST

/* Tombstone thresholds across nodes: the coordinator counts each
 * replica's answer against tombstone_warn_threshold, and a remote
 * replica that aborts a read past its tombstone_failure_threshold makes
 * the read a ReadFailure marked as such (the reason crosses the wire by
 * name). */
START_TEST(tombstone_warnings_and_remote_aborts)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(31, 3, dcs);
	c->tombstone_warn = 2;
	for (int i = 0; i < 3; i++) {
		simc_kill(c, i);
		simc_restart(c, i);
	}
	struct ring_strategy *s = simple(3);
	struct outcome o = do_write(c, 0, s, REPL_CL_ALL, "few", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	/* a partition deletion, the row's and its cell's: 3 tombstones */
	struct storage_mutation *m = storage_mutation_new(
		c->meta, (const uint8_t *)"many", strlen("many"));
	ck_assert_int_eq(storage_mutation_delete_partition(m, 20, 1), 0);
	ck_assert_int_eq(storage_mutation_delete_row(m, 21, 1), 0);
	ck_assert_int_eq(storage_mutation_delete_cell(m, 1, NULL, 0, 22, 1), 0);
	struct outcome w = {0};
	struct repl_mutation rm = {.m = m, .strategy = s};
	repl_write(c->nodes[0].repl, &rm, 1, REPL_CL_ALL, REPL_WRITE_SIMPLE,
		   on_write, &w);
	ck_assert(sim_run_until(c->sim, outcome_done, &w, 30000000));
	ck_assert_int_eq(w.res.outcome, REPL_OK);
	storage_mutation_delete(m);

	o = do_read(c, 1, s, REPL_CL_ALL, "few");
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_uint_eq(o.res.tombstone_warn_nodes, 0);
	storage_mutation_delete(o.frag);
	o = do_read(c, 1, s, REPL_CL_ALL, "many");
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_uint_eq(o.res.tombstone_warn_nodes, 1); /* the data one */
	ck_assert_uint_eq(o.res.tombstone_max, 3);
	storage_mutation_delete(o.frag);

	c->nodes[0].fail_tombstones = c->nodes[2].fail_tombstones = true;
	o = do_read(c, 1, s, REPL_CL_ALL, "many");
	ck_assert_int_eq(o.res.outcome, REPL_READ_FAILURE);
	ck_assert(o.res.tombstone_abort);
	ck_assert_ptr_nonnull(strstr(o.res.msg, "READ_TOO_MANY_TOMBSTONES"));
	/* the read failed at the first abort: that replica is named, with
	 * RequestFailureReason's READ_TOO_MANY_TOMBSTONES */
	ck_assert_uint_eq(o.res.n_failed, 1);
	ck_assert_uint_eq(o.res.n_failed_listed, 1);
	ck_assert(names_failure(c, &o.res, 0,
				REPL_FAILURE_READ_TOO_MANY_TOMBSTONES) ||
		  names_failure(c, &o.res, 2,
				REPL_FAILURE_READ_TOO_MANY_TOMBSTONES));
	/* the coordinator's own replica aborting names this node */
	c->nodes[0].fail_tombstones = c->nodes[2].fail_tombstones = false;
	c->nodes[1].fail_tombstones = true;
	o = do_read(c, 1, s, REPL_CL_ALL, "many");
	ck_assert_int_eq(o.res.outcome, REPL_READ_FAILURE);
	ck_assert_uint_eq(o.res.n_failed, 1);
	ck_assert(names_failure(c, &o.res, 1,
				REPL_FAILURE_READ_TOO_MANY_TOMBSTONES));
	c->nodes[1].fail_tombstones = false;
	/* a remote replica's other failure is not taken for one */
	c->nodes[0].fail_tombstones = c->nodes[2].fail_tombstones = false;
	sim_net_cut(c->sim, NULL, &c->nodes[2].addr, true);
	o = do_read(c, 1, s, REPL_CL_ALL, "many");
	ck_assert_int_eq(o.res.outcome, REPL_READ_TIMEOUT);
	ck_assert(!o.res.tombstone_abort);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A write that too many replicas fail answers WriteFailure naming each
 * replica that failed (RequestFailureReason UNKNOWN for a store error),
 * the coordinator's own replica by this node's address. */
START_TEST(write_failure_names_the_failed_replicas)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(37, 3, dcs);
	struct ring_strategy *s = simple(3);
	c->nodes[1].fail_writes = c->nodes[2].fail_writes = true;
	/* QUORUM fails once both remote replicas have failed */
	struct outcome o = do_write(c, 0, s, REPL_CL_QUORUM, "k", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_WRITE_FAILURE);
	ck_assert_uint_eq(o.res.n_failed, 2);
	ck_assert_uint_eq(o.res.n_failed_listed, 2);
	ck_assert(names_failure(c, &o.res, 1, REPL_FAILURE_UNKNOWN));
	ck_assert(names_failure(c, &o.res, 2, REPL_FAILURE_UNKNOWN));
	ck_assert(!names_failure(c, &o.res, 0, REPL_FAILURE_UNKNOWN));
	/* ALL fails at the first failure: the coordinator's own */
	c->nodes[1].fail_writes = c->nodes[2].fail_writes = false;
	c->nodes[0].fail_writes = true;
	o = do_write(c, 0, s, REPL_CL_ALL, "k", "v", 11);
	ck_assert_int_eq(o.res.outcome, REPL_WRITE_FAILURE);
	ck_assert_uint_eq(o.res.n_failed, 1);
	ck_assert(names_failure(c, &o.res, 0, REPL_FAILURE_UNKNOWN));
	c->nodes[0].fail_writes = false;
	o = do_write(c, 0, s, REPL_CL_ALL, "k", "v", 12);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_uint_eq(o.res.n_failed, 0);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* Replication factor above the number of nodes: block-for counts the
 * factor, so ALL cannot succeed (Cassandra's rule). */
START_TEST(rf_above_node_count)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(7, 3, dcs);
	struct ring_strategy *s = simple(5);
	struct outcome o = do_write(c, 0, s, REPL_CL_ALL, "k", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_UNAVAILABLE);
	ck_assert_int_eq(o.res.required, 5);
	ck_assert_int_eq(o.res.alive, 3);
	o = do_write(c, 0, s, REPL_CL_QUORUM, "k", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A traced write and read: the requests carry the session id and each
 * replica records its steps under it; the coordinator its sends. An
 * untraced request records nothing. */
START_TEST(trace_session_reaches_the_replicas)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(31, 3, dcs);
	struct ring_strategy *s = simple(3);
	struct outcome o = do_write(c, 0, s, REPL_CL_ALL, "k", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(c->nodes[i].trace_events, 0);
	uint8_t sid[16] = {0x5e, 0x55, 1, 2, 3};
	struct outcome w = {0};
	struct storage_mutation *m = make_write(c, "k2", "v2", 20);
	struct repl_mutation rm = {m, s};
	repl_write_traced(c->nodes[0].repl, &rm, 1, REPL_CL_ALL,
			  REPL_WRITE_SIMPLE, sid, on_write, &w);
	storage_mutation_delete(m);
	ck_assert(sim_run_until(c->sim, outcome_done, &w, 30000000));
	ck_assert_int_eq(w.res.outcome, REPL_OK);
	ck_assert_ptr_nonnull(strstr(c->nodes[0].trace_log,
				     "Sending MUTATION_REQ message to /"));
	for (int i = 1; i < 3; i++) {
		struct mnode *n = &c->nodes[i];
		ck_assert_mem_eq(n->trace_session, sid, 16);
		ck_assert_ptr_nonnull(
			strstr(n->trace_log,
			       "MutationStage-1|Adding to ks.t memtable"));
		ck_assert_ptr_nonnull(
			strstr(n->trace_log,
			       "MutationStage-1|Enqueuing response to /"));
		n->trace_log[0] = 0;
	}
	struct storage_read_cmd cmd = {.key = (const uint8_t *)"k2",
				       .key_len = 2,
				       .with_static = true};
	struct repl_read q = {.table_id = c->meta->id,
			      .meta = c->meta,
			      .strategy = s,
			      .cl = REPL_CL_ALL,
			      .cmd = &cmd,
			      .token = murmur3_token((const uint8_t *)"k2", 2),
			      .read_repair = true,
			      .trace_session = sid};
	struct outcome r = {0};
	repl_read(c->nodes[0].repl, &q, on_read, &r);
	ck_assert(sim_run_until(c->sim, outcome_done, &r, 30000000));
	ck_assert_int_eq(r.res.outcome, REPL_OK);
	storage_mutation_delete(r.frag);
	ck_assert_ptr_nonnull(
		strstr(c->nodes[0].trace_log, "Determining replicas to query"));
	/* every replica, the coordinator's own local read too, traces its
	 * storage steps in Cassandra's words */
	for (int i = 0; i < 3; i++) {
		const char *log = c->nodes[i].trace_log;
		ck_assert_ptr_nonnull(strstr(
			log, "ReadStage-1|Executing single-partition "
			     "query on ks.t\n"
			     "ReadStage-1|Acquiring sstable references\n"
			     "ReadStage-1|Merged data from memtables and "
			     "0 sstables\n"
			     "ReadStage-1|Read 1 live rows and 0 tombstone "
			     "cells\n"));
	}
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A replica the detector still calls alive but that is unreachable: the
 * write times out with (received, block_for, SIMPLE) and a hint is
 * written for it. */
START_TEST(write_timeout_and_hint)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(8, 3, dcs);
	struct ring_strategy *s = simple(3);
	sim_net_cut(c->sim, NULL, &c->nodes[2].addr, true);
	struct outcome o = do_write(c, 0, s, REPL_CL_ALL, "k", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_WRITE_TIMEOUT);
	ck_assert_int_eq(o.res.required, 3);
	ck_assert_int_eq(o.res.alive, 2);
	ck_assert_int_eq(o.res.write_type, REPL_WRITE_SIMPLE);
	ck_assert_int_eq(c->nodes[0].hints, 1);
	/* QUORUM succeeds at once; the slow replica is hinted at the
	 * timeout. */
	o = do_write(c, 0, s, REPL_CL_QUORUM, "k2", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	sim_run_for(c->sim, 3000000);
	ck_assert_int_eq(c->nodes[0].hints, 2);
	/* A replica marked down is hinted without being tried. */
	c->down[2] = true;
	o = do_write(c, 0, s, REPL_CL_ONE, "k3", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_int_eq(c->nodes[0].hints, 3);
	/* A traced write says which replicas it hinted. */
	uint8_t sid[16] = {0x41, 0x17};
	struct storage_mutation *m = make_write(c, "k5", "v", 10);
	struct repl_mutation rm = {m, s};
	c->nodes[0].trace_log[0] = 0;
	o = (struct outcome){0};
	repl_write_traced(c->nodes[0].repl, &rm, 1, REPL_CL_ONE,
			  REPL_WRITE_SIMPLE, sid, on_write, &o);
	storage_mutation_delete(m);
	ck_assert(sim_run_until(c->sim, outcome_done, &o, 30000000));
	ck_assert_int_eq(c->nodes[0].hints, 4);
	char want[128], addr[INET_ADDR_STRLEN];
	snprintf(want, sizeof(want), "Adding hints for [/%s]\n",
		 inet_addr_format(&c->nodes[2].addr, addr, sizeof(addr)));
	ck_assert_msg(strstr(c->nodes[0].trace_log, want), "%s",
		      c->nodes[0].trace_log);
	/* ANY with every replica down: the hint is the acknowledgement. */
	c->down[1] = true;
	c->down[0] = true; /* as others see it; the local node is alive */
	sim_net_cut(c->sim, NULL, &c->nodes[1].addr, true);
	o = do_write(c, 2, s, REPL_CL_ANY, "k4", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* Client requests are counted by kind and level (the metrics endpoint's
 * cassandra_client_request_*): successes with their latency, Unavailable
 * decided before sending, timeouts at the deadline. */
START_TEST(requests_counted_by_level)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(9, 3, dcs);
	struct ring_strategy *s = simple(3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(
			do_write(c, 0, s, REPL_CL_QUORUM, "k", "v", 10 + i)
				.res.outcome,
			REPL_OK);
	struct outcome o = do_read(c, 0, s, REPL_CL_ONE, "k");
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	storage_mutation_delete(o.frag);
	c->down[2] = true;
	ck_assert_int_eq(
		do_write(c, 0, s, REPL_CL_ALL, "k", "v", 20).res.outcome,
		REPL_UNAVAILABLE);
	c->down[2] = false;
	sim_net_cut(c->sim, NULL, &c->nodes[2].addr, true);
	ck_assert_int_eq(
		do_write(c, 0, s, REPL_CL_ALL, "k", "v", 30).res.outcome,
		REPL_WRITE_TIMEOUT);
	struct repl_stats *st = calloc(1, sizeof(*st));
	ck_assert_ptr_nonnull(st);
	repl_get_stats(c->nodes[0].repl, st);
	const struct repl_req_stats *wq =
		&st->by_cl[REPL_REQ_WRITE][REPL_CL_QUORUM];
	ck_assert_uint_eq(wq->lat.count, 3);
	ck_assert_uint_eq(wq->timeouts + wq->unavailables + wq->failures, 0);
	uint64_t in_buckets = 0;
	for (unsigned b = 0; b < REPL_LAT_BUCKETS; b++)
		in_buckets += wq->lat.buckets[b];
	ck_assert_uint_eq(in_buckets, 3);
	ck_assert_uint_gt(wq->lat.sum_us, 0);
	ck_assert_uint_eq(st->by_cl[REPL_REQ_READ][REPL_CL_ONE].lat.count, 1);
	const struct repl_req_stats *wa =
		&st->by_cl[REPL_REQ_WRITE][REPL_CL_ALL];
	ck_assert_uint_eq(wa->unavailables, 1);
	ck_assert_uint_eq(wa->timeouts, 1);
	ck_assert_uint_eq(wa->lat.count, 0);
	ck_assert_uint_eq(st->by_cl[REPL_REQ_READ][REPL_CL_QUORUM].lat.count,
			  0);
	free(st);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

static void on_handed(void *arg, int status)
{
	*(int *)arg = status;
}

/* A node leaving the ring hands its hints over (decommission): the node
 * that takes one keeps it for its target, with its creation time; a hint
 * for the taker itself is applied like any mutation. */
START_TEST(handed_over_hints_are_kept_or_applied)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(8, 3, dcs);
	struct storage_mutation *m = make_write(c, "hk", "v", 10);
	struct buf enc;
	buf_init(&enc);
	ck_assert_int_eq(storage_mutation_encode(m, &enc), 0);
	uint8_t for2[16] = {3}, for1[16] = {2}; /* host ids of nodes 2, 1 */
	int status = 1;
	ck_assert_int_eq(repl_hand_over(c->nodes[0].repl, &c->nodes[1].addr,
					for2, enc.data, enc.len, 12345,
					on_handed, &status),
			 0);
	sim_run_for(c->sim, 100000);
	ck_assert_int_eq(status, 0);
	ck_assert_int_eq(c->nodes[1].taken, 1);
	ck_assert_mem_eq(c->nodes[1].taken_for, for2, 16);
	ck_assert_int_eq(c->nodes[1].taken_created_us, 12345);
	ck_assert_uint_eq(c->nodes[1].nparts, 0);
	/* for the taker itself: applied, not kept */
	status = 1;
	ck_assert_int_eq(repl_hand_over(c->nodes[0].repl, &c->nodes[1].addr,
					for1, enc.data, enc.len, 12345,
					on_handed, &status),
			 0);
	sim_run_for(c->sim, 100000);
	ck_assert_int_eq(status, 0);
	ck_assert_int_eq(c->nodes[1].taken, 1);
	ck_assert_uint_eq(c->nodes[1].nparts, 1);
	/* an unreachable taker: the hand-over of that hint fails */
	sim_net_cut(c->sim, NULL, &c->nodes[2].addr, true);
	status = 1;
	ck_assert_int_eq(repl_hand_over(c->nodes[0].repl, &c->nodes[2].addr,
					for1, enc.data, enc.len, 12345,
					on_handed, &status),
			 0);
	sim_run_for(c->sim, 3000000);
	ck_assert_int_eq(status, -1);
	buf_free(&enc);
	storage_mutation_delete(m);
	simc_delete(c);
}
END_TEST

/* A datacenter cut off (its replicas never answer): LOCAL_QUORUM writes
 * in the other one succeed, and keep succeeding past max_inflight, while
 * each waits its timeout in the background to hint the silent replicas.
 * Only requests not yet answered count against max_inflight. */
START_TEST(a_silent_datacenter_does_not_overload_local_writes)
{
	const char *dcs[6] = {"dc1", "dc1", "dc1", "dc2", "dc2", "dc2"};
	struct simc *c = simc_new(9, 6, dcs);
	for (int i = 0; i < 6; i++)
		repl_delete(c->nodes[i].repl);
	c->max_inflight = 16;
	for (int i = 0; i < 6; i++)
		mnode_start(&c->nodes[i]);
	struct ring_strategy *s = nts(3, 3);
	for (int i = 3; i < 6; i++)
		sim_net_cut(c->sim, NULL, &c->nodes[i].addr, true);
	for (int k = 0; k < 100; k++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", k);
		struct outcome o =
			do_write(c, 0, s, REPL_CL_LOCAL_QUORUM, key, "v", 10);
		ck_assert_msg(o.res.outcome == REPL_OK, "write %d: %s", k,
			      o.res.msg);
	}
	sim_run_for(c->sim, 3000000);
	ck_assert_int_eq(c->nodes[0].hints, 300);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* One timer serves every operation's deadline: a write (2 s) issued after
 * a read (5 s) still times out first, an operation that completes leaves
 * no timeout behind, and each fires at its own time. */
START_TEST(timeouts_fire_at_each_operations_own_deadline)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(12, 3, dcs);
	struct ring_strategy *s = simple(3);
	struct outcome o = do_write(c, 0, s, REPL_CL_ALL, "x", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	sim_net_cut(c->sim, &c->nodes[2].addr, NULL, true);
	struct outcome rd = {0}, wr = {0}, quick = {0};
	uint64_t t0 = sim_now_us(c->sim);
	start_read(c, 0, s, REPL_CL_ALL, "x", false, &rd);
	sim_run_for(c->sim, 500000);
	struct storage_mutation *m = make_write(c, "y", "v", 20);
	struct repl_mutation rm = {m, s};
	repl_write(c->nodes[0].repl, &rm, 1, REPL_CL_ALL, REPL_WRITE_SIMPLE,
		   on_write, &wr);
	repl_write(c->nodes[0].repl, &rm, 1, REPL_CL_ONE, REPL_WRITE_SIMPLE,
		   on_write, &quick);
	storage_mutation_delete(m);
	ck_assert(sim_run_until(c->sim, outcome_done, &wr, 30000000));
	uint64_t t_write = sim_now_us(c->sim) - t0;
	ck_assert(quick.done && quick.res.outcome == REPL_OK);
	ck_assert(!rd.done);
	ck_assert_int_eq(wr.res.outcome, REPL_WRITE_TIMEOUT);
	ck_assert_uint_ge(t_write, 2500000);
	ck_assert_uint_lt(t_write, 2600000);
	ck_assert(sim_run_until(c->sim, outcome_done, &rd, 30000000));
	uint64_t t_read = sim_now_us(c->sim) - t0;
	ck_assert_int_eq(rd.res.outcome, REPL_READ_TIMEOUT);
	ck_assert_uint_ge(t_read, 5000000);
	ck_assert_uint_lt(t_read, 5100000);
	storage_mutation_delete(rd.frag);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A stale replica is brought up to date by a QUORUM read (blocking read
 * repair) and the read returns the newest value. */
START_TEST(read_repair)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(9, 3, dcs);
	struct ring_strategy *s = simple(3);
	struct outcome o = do_write(c, 0, s, REPL_CL_ALL, "rk", "old", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	/* Node 1 misses the new value. */
	sim_net_cut(c->sim, NULL, &c->nodes[1].addr, true);
	o = do_write(c, 0, s, REPL_CL_TWO, "rk", "new", 20);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	sim_run_for(c->sim, 3000000);
	sim_net_heal(c->sim);
	char v[32];
	int64_t ts;
	frag_value(c, c->nodes[1].parts[0].frag, v, sizeof(v), &ts);
	ck_assert_str_eq(v, "old");
	struct repl_stats st;
	/* ALL from node 1: its own data first, digests disagree. */
	o = do_read(c, 1, s, REPL_CL_ALL, "rk");
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	frag_value(c, o.frag, v, sizeof(v), &ts);
	ck_assert_str_eq(v, "new");
	storage_mutation_delete(o.frag);
	repl_get_stats(c->nodes[1].repl, &st);
	ck_assert_uint_eq(st.digest_mismatches, 1);
	ck_assert_uint_ge(st.read_repairs, 1);
	frag_value(c, c->nodes[1].parts[0].frag, v, sizeof(v), &ts);
	ck_assert_str_eq(v, "new");
	/* Now in agreement: no mismatch. */
	o = do_read(c, 1, s, REPL_CL_ALL, "rk");
	storage_mutation_delete(o.frag);
	repl_get_stats(c->nodes[1].repl, &st);
	ck_assert_uint_eq(st.digest_mismatches, 1);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

#define PEER_LEN (INET_ADDR_STRLEN + 1)
/* "/127.0.0.1:7000": a peer in Cassandra 4's trace events. */
static void peer_name(const struct inet_addr *a, char out[PEER_LEN])
{
	out[0] = '/';
	inet_addr_format(a, out + 1, PEER_LEN - 1);
}

/* A traced read that meets a stale replica says so in Cassandra 4's
 * words: the data and digest requests, the mismatch with the partition's
 * key, the full data reads, the repair mutation to the stale replica,
 * and each peer's answer. */
START_TEST(traced_read_repair)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(19, 3, dcs);
	struct ring_strategy *s = simple(3);
	struct outcome o = do_write(c, 0, s, REPL_CL_ALL, "rk", "old", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	sim_net_cut(c->sim, NULL, &c->nodes[2].addr, true);
	o = do_write(c, 0, s, REPL_CL_TWO, "rk", "new", 20);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	sim_run_for(c->sim, 3000000);
	sim_net_heal(c->sim);
	uint8_t sid[16] = {0x7e, 0x57};
	struct storage_read_cmd cmd = {.key = (const uint8_t *)"rk",
				       .key_len = 2,
				       .with_static = true};
	int64_t token = murmur3_token((const uint8_t *)"rk", 2);
	struct repl_read q = {.table_id = c->meta->id,
			      .meta = c->meta,
			      .strategy = s,
			      .cl = REPL_CL_ALL,
			      .cmd = &cmd,
			      .token = token,
			      .read_repair = true,
			      .trace_session = sid};
	for (int i = 0; i < 3; i++)
		c->nodes[i].trace_log[0] = 0;
	struct outcome r = {0};
	repl_read(c->nodes[0].repl, &q, on_read, &r);
	ck_assert(sim_run_until(c->sim, outcome_done, &r, 30000000));
	ck_assert_int_eq(r.res.outcome, REPL_OK);
	storage_mutation_delete(r.frag);
	const char *log = c->nodes[0].trace_log;
	char peer[2][PEER_LEN], want[512];
	for (int i = 1; i < 3; i++)
		peer_name(&c->nodes[i].addr, peer[i - 1]);
	/* node 0 reads its own data; digests from the others */
	for (int i = 0; i < 2; i++) {
		snprintf(want, sizeof(want), "reading digest from %s\n",
			 peer[i]);
		ck_assert_msg(strstr(log, want), "%s", log);
		snprintf(want, sizeof(want),
			 "Sending READ_REQ message to %s message size ",
			 peer[i]);
		ck_assert_msg(strstr(log, want), "%s", log);
		snprintf(want, sizeof(want),
			 "Messaging-EventLoop-1|READ_RSP message received "
			 "from %s\n"
			 "RequestResponseStage-1|Processing response from %s\n",
			 peer[i], peer[i]);
		ck_assert_msg(strstr(log, want), "%s", log);
		snprintf(want, sizeof(want),
			 "Enqueuing full data read to Full(%s,(", peer[i]);
		ck_assert_msg(strstr(log, want), "%s", log);
	}
	snprintf(want, sizeof(want),
		 "Digest mismatch: Mismatch for key DecoratedKey(%lld, 726b)\n",
		 (long long)token);
	ck_assert_msg(strstr(log, want), "%s", log);
	/* only node 2 missed the write: the repair goes to it alone */
	snprintf(want, sizeof(want),
		 "Sending read-repair-mutation to Full(%s,(", peer[1]);
	ck_assert_msg(strstr(log, want), "%s", log);
	snprintf(want, sizeof(want),
		 "Sending read-repair-mutation to Full(%s,(", peer[0]);
	ck_assert_msg(!strstr(log, want), "%s", log);
	snprintf(want, sizeof(want),
		 "Sending READ_REPAIR_REQ message to %s message size ",
		 peer[1]);
	ck_assert_msg(strstr(log, want), "%s", log);
	snprintf(want, sizeof(want),
		 "READ_REPAIR_RSP message received from %s\n", peer[1]);
	ck_assert_msg(strstr(log, want), "%s", log);
	/* a replica's side: the request arrives, the answer leaves */
	char coord[PEER_LEN];
	peer_name(&c->nodes[0].addr, coord);
	snprintf(want, sizeof(want),
		 "Messaging-EventLoop-1|READ_REQ message received from %s\n",
		 coord);
	ck_assert_msg(strstr(c->nodes[1].trace_log, want), "%s",
		      c->nodes[1].trace_log);
	snprintf(want, sizeof(want),
		 "ReadStage-1|Enqueuing response to %s\n"
		 "Messaging-EventLoop-1|Sending READ_RSP message to %s "
		 "message size ",
		 coord, coord);
	ck_assert_msg(strstr(c->nodes[1].trace_log, want), "%s",
		      c->nodes[1].trace_log);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* Reads time out with data_present when a contacted replica never
 * answers. */
START_TEST(read_timeout)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(10, 3, dcs);
	struct ring_strategy *s = simple(3);
	struct outcome o = do_write(c, 0, s, REPL_CL_ALL, "x", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	sim_net_cut(c->sim, &c->nodes[2].addr, NULL, true);
	o = do_read(c, 0, s, REPL_CL_ALL, "x");
	ck_assert_int_eq(o.res.outcome, REPL_READ_TIMEOUT);
	ck_assert_int_eq(o.res.required, 3);
	ck_assert_int_eq(o.res.alive, 2);
	ck_assert(o.res.data_present);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* Random QUORUM writes and reads from random coordinators over lossy,
 * delayed links, partitions and paused nodes: every write the coordinator
 * acknowledged is seen (or superseded) by every later QUORUM read once the
 * network heals. */
START_TEST(quorum_reads_see_acked_writes)
{
	uint64_t seed = g_seed;
	const char *dcs[5] = {"dc1", "dc1", "dc1", "dc1", "dc1"};
	struct simc *c = simc_new(seed, 5, dcs);
	struct ring_strategy *s = simple(3);
	sim_net_set_latency(c->sim, 100, 3000);
	enum { KEYS = 40 };
	int64_t acked[KEYS];
	for (int k = 0; k < KEYS; k++)
		acked[k] = INT64_MIN;
	int64_t ts = 100;
	int oks = 0, fails = 0, dead = -1, restarts = 0;
	for (int round = 0; round < 400; round++) {
		uint64_t r = sim_random(c->sim);
		if (round % 50 == 20 && dead < 0) {
			dead = (int)(r % 5);
			simc_kill(c, dead);
		} else if (round % 50 == 40 && dead >= 0) {
			simc_restart(c, dead);
			dead = -1;
			restarts++;
		}
		if (round % 50 == 0) {
			sim_net_heal(c->sim);
			int a = (int)(r % 5), b = (int)((r >> 8) % 5);
			if (a != b && (r >> 16) % 2)
				sim_net_partition(c->sim, &c->nodes[a].addr, 1,
						  &c->nodes[b].addr, 1, true);
			sim_net_set_drop(c->sim, NULL, NULL,
					 (double)((r >> 24) % 20) / 100.0);
			if ((r >> 32) % 3 == 0)
				sim_env_pause(c->sim,
					      c->nodes[(r >> 40) % 5].env,
					      1500000);
		}
		int k = (int)((r >> 4) % KEYS), coord = (int)((r >> 12) % 5);
		if (coord == dead)
			coord = (coord + 1) % 5;
		char key[16], val[32];
		snprintf(key, sizeof(key), "key%d", k);
		if ((r >> 20) % 3) {
			ts++;
			snprintf(val, sizeof(val), "%lld", (long long)ts);
			struct outcome o = do_write(c, coord, s, REPL_CL_QUORUM,
						    key, val, ts);
			if (o.res.outcome == REPL_OK) {
				oks++;
				acked[k] = ts > acked[k] ? ts : acked[k];
			} else {
				fails++;
			}
		} else {
			struct outcome o =
				do_read(c, coord, s, REPL_CL_QUORUM, key);
			if (o.res.outcome == REPL_OK) {
				int64_t got;
				frag_value(c, o.frag, val, sizeof(val), &got);
				ck_assert_msg(acked[k] == INT64_MIN ||
						      got >= acked[k],
					      "seed %llu: %s read ts %lld "
					      "< acked %lld",
					      (unsigned long long)seed, key,
					      (long long)got,
					      (long long)acked[k]);
			}
			storage_mutation_delete(o.frag);
		}
	}
	sim_net_heal(c->sim);
	sim_run_for(c->sim, 5000000);
	for (int k = 0; k < KEYS; k++) {
		char key[16], val[32];
		snprintf(key, sizeof(key), "key%d", k);
		for (int coord = 0; coord < 5; coord++) {
			struct outcome o =
				do_read(c, coord, s, REPL_CL_QUORUM, key);
			ck_assert_int_eq(o.res.outcome, REPL_OK);
			int64_t got;
			frag_value(c, o.frag, val, sizeof(val), &got);
			ck_assert_msg(acked[k] == INT64_MIN || got >= acked[k],
				      "seed %llu: %s final read ts %lld < "
				      "acked %lld",
				      (unsigned long long)seed, key,
				      (long long)got, (long long)acked[k]);
			storage_mutation_delete(o.frag);
		}
	}
	ck_assert_int_gt(oks, 50);
	ck_assert_int_ge(restarts, 3);
	printf("quorum property: seed %llu, %d writes acked, %d not, %d "
	       "kill/restarts\n",
	       (unsigned long long)seed, oks, fails, restarts);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A range read walks every vnode range in token order and returns each
 * partition once, merged across replicas. */
/* One walk over the whole ring at `cl`, `max` partitions a step, from
 * node `coord` (-1: each step from the next node): partitions come in
 * strictly increasing token order and each step resumes past the last.
 * Returns the partitions seen; *steps_out (if set) the steps taken. */
static int walk_all(struct simc *c, int coord, const struct ring_strategy *s,
		    int cl, uint32_t max, bool repair, int *steps_out)
{
	int64_t start = INT64_MIN, last = INT64_MIN;
	int seen = 0, steps = 0;
	for (;; steps++) {
		struct range_out o = {0};
		struct storage_read_cmd cmd = {.with_static = true};
		struct repl_range q = {.table_id = c->meta->id,
				       .meta = c->meta,
				       .strategy = s,
				       .cl = cl,
				       .cmd = &cmd,
				       .start = start,
				       .end = INT64_MAX,
				       .max_partitions = max,
				       .read_repair = repair};
		int node = coord >= 0 ? coord : steps % c->n;
		repl_range_step(c->nodes[node].repl, &q, on_range, &o);
		ck_assert(sim_run_until(c->sim, range_done, &o, 30000000));
		ck_assert_int_eq(o.res.outcome, REPL_OK);
		for (size_t i = 0; i < o.n; i++) {
			int64_t t = storage_mutation_token(o.f[i]);
			ck_assert(t > last);
			last = t;
			storage_mutation_delete(o.f[i]);
		}
		free(o.f);
		seen += (int)o.n;
		ck_assert_int_lt(steps, 10000);
		if (o.finished)
			break;
		ck_assert(o.resume > start);
		start = o.resume;
	}
	if (steps_out)
		*steps_out = steps + 1;
	return seen;
}

/* A traced range step: the coordinator's sends and each replica's scan
 * (its own too) in Cassandra's words, under the session. */
START_TEST(trace_range_step)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(32, 3, dcs);
	struct ring_strategy *s = simple(3);
	struct outcome w = do_write(c, 0, s, REPL_CL_ALL, "k", "v", 10);
	ck_assert_int_eq(w.res.outcome, REPL_OK);
	uint8_t sid[16] = {0x5e, 0x55, 9};
	struct range_out o;
	struct storage_read_cmd cmd = {.with_static = true};
	struct repl_range q = whole_ring_range(c, s, REPL_CL_ALL, &cmd, 100);
	q.trace_session = sid;
	run_range_step(c, 0, &q, &o);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	range_out_free(&o);
	ck_assert_ptr_nonnull(strstr(c->nodes[0].trace_log,
				     "Native-Transport-Requests-1|Sending "
				     "RANGE_REQ message to /"));
	for (int i = 0; i < 3; i++) {
		const char *log = c->nodes[i].trace_log;
		ck_assert_mem_eq(c->nodes[i].trace_session, sid, 16);
		ck_assert_ptr_nonnull(
			strstr(log, "ReadStage-1|Executing seq scan across 0 "
				    "sstables for (min(-9223372036854775808), "
				    "max("));
		ck_assert_ptr_nonnull(strstr(log, "ReadStage-1|Read "));
		ck_assert_ptr_nonnull(strstr(log, " live rows and 0 tombstone "
						  "cells\n"));
		if (i)
			ck_assert_ptr_nonnull(strstr(
				log, "ReadStage-1|Enqueuing response to /"));
	}
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

START_TEST(range_walk)
{
	const char *dcs[4] = {"dc1", "dc1", "dc1", "dc1"};
	struct simc *c = simc_new(11, 4, dcs);
	struct ring_strategy *s = simple(2);
	enum { N = 120 };
	for (int i = 0; i < N; i++) {
		char key[16];
		snprintf(key, sizeof(key), "p%d", i);
		/* Only one replica gets each write: the walk must merge. */
		struct outcome o =
			do_write(c, i % 4, s, REPL_CL_ONE, key, "v", 10 + i);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
	}
	sim_run_for(c->sim, 1000000);
	int steps = 0;
	int seen = walk_all(c, -1, s, REPL_CL_QUORUM, 7, true, &steps);
	ck_assert_int_eq(seen, N);
	ck_assert_int_ge(steps, 4 * 8); /* at least one step per vnode */
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A range read repairs the contacts that lacked a partition or held an
 * older version, before it answers (read_repair off: it does not). */
START_TEST(range_read_repair)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(12, 3, dcs);
	struct ring_strategy *s = simple(3);
	enum { N = 30 };
	for (int i = 0; i < N; i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", i);
		struct outcome o =
			do_write(c, 0, s, REPL_CL_ALL, key, "old", 10);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
	}
	/* Node 2 misses ten new partitions and ten updates. */
	sim_net_cut(c->sim, NULL, &c->nodes[2].addr, true);
	for (int i = 0; i < 2 * N / 3; i++) {
		char key[16];
		snprintf(key, sizeof(key), i < N / 3 ? "new%d" : "k%d", i);
		struct outcome o =
			do_write(c, 0, s, REPL_CL_TWO, key, "new", 20);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
	}
	sim_run_for(c->sim, 3000000);
	sim_net_heal(c->sim);
	ck_assert_uint_eq(c->nodes[2].nparts, N);
	/* Without read repair nothing changes on node 2. */
	ck_assert_int_eq(walk_all(c, 2, s, REPL_CL_ALL, 5, false, NULL),
			 N + N / 3);
	ck_assert_uint_eq(c->nodes[2].nparts, N);
	/* With it, node 2 holds every partition and value once the walk
	 * has answered. */
	ck_assert_int_eq(walk_all(c, 2, s, REPL_CL_ALL, 5, true, NULL),
			 N + N / 3);
	ck_assert_uint_eq(c->nodes[2].nparts, N + N / 3);
	uint64_t repairs = 0;
	for (int i = 0; i < 3; i++) {
		struct repl_stats st;
		repl_get_stats(c->nodes[i].repl, &st);
		repairs += st.read_repairs;
	}
	ck_assert_uint_eq(repairs, 2 * N / 3);
	for (int i = N / 3; i < 2 * N / 3; i++) {
		char key[16], v[32];
		int64_t ts;
		snprintf(key, sizeof(key), "k%d", i);
		struct storage_mutation *probe = make_write(c, key, "x", 1);
		struct part *p = find_part(&c->nodes[2], probe);
		storage_mutation_delete(probe);
		ck_assert_ptr_nonnull(p);
		frag_value(c, p->frag, v, sizeof(v), &ts);
		ck_assert_str_eq(v, "new");
	}
	/* In agreement now: a second walk repairs nothing. */
	walk_all(c, 0, s, REPL_CL_ALL, 5, true, NULL);
	uint64_t again = 0;
	for (int i = 0; i < 3; i++) {
		struct repl_stats st;
		repl_get_stats(c->nodes[i].repl, &st);
		again += st.read_repairs;
	}
	ck_assert_uint_eq(again, repairs);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A contacted replica that is unreachable but not yet convicted: the
 * speculative retry asks a spare and the QUORUM read succeeds; with
 * speculative_retry = 'NONE' it times out. */
START_TEST(speculative_retry)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(12, 3, dcs);
	struct ring_strategy *s = simple(3);
	struct outcome o = do_write(c, 0, s, REPL_CL_ALL, "x", "v", 10);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	int got_ok = 0;
	for (int cut = 1; cut <= 2; cut++) {
		sim_net_heal(c->sim);
		sim_net_cut(c->sim, &c->nodes[cut].addr, NULL, true);
		o = do_read(c, 0, s, REPL_CL_QUORUM, "x");
		ck_assert_int_eq(o.res.outcome, REPL_OK);
		storage_mutation_delete(o.frag);
		got_ok++;
	}
	struct repl_stats st;
	repl_get_stats(c->nodes[0].repl, &st);
	ck_assert_uint_ge(st.speculative_retries, 1);
	ck_assert_int_eq(got_ok, 2);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

static bool has_key(struct mnode *n, const char *key)
{
	for (size_t i = 0; i < n->nparts; i++) {
		struct slice k = storage_mutation_key(n->parts[i].frag);
		if (k.len == strlen(key) && memcmp(k.ptr, key, k.len) == 0)
			return true;
	}
	return false;
}

static uint64_t stored_elsewhere(void *arg)
{
	struct simc *c = arg;
	uint64_t sum = 0;
	for (int i = 1; i < c->n; i++) {
		struct repl_stats st;
		repl_get_stats(c->nodes[i].repl, &st);
		sum += st.batches_stored;
	}
	return sum;
}

static bool two_stored(void *arg)
{
	return stored_elsewhere(arg) >= 2;
}

/* Up to `want` keys (names b0, b1, ... in `names`) whose first replica
 * is not node 0, so that node can coordinate without being one. */
static int keys_off_node0(struct simc *c, const struct ring_strategy *s,
			  char names[64][8], const char **keys, int want)
{
	int found = 0;
	for (int i = 0; i < 64 && found < want; i++) {
		snprintf(names[i], sizeof(names[i]), "b%d", i);
		int eps[4], ne;
		replicas_of(c, s, names[i], eps, &ne);
		if (node_of(c, eps[0]) != 0)
			keys[found++] = names[i];
	}
	return found;
}

/* Logged batches: a finished batch leaves nothing in the batchlog; when
 * the coordinator dies right after storing the batchlog (its mutations
 * never sent), a batchlog node replays the batch and every partition
 * reaches its replicas. */
START_TEST(batchlog_replays_a_dead_coordinators_batch)
{
	const char *dcs[4] = {"dc1", "dc1", "dc1", "dc1"};
	struct simc *c = simc_new(13, 4, dcs);
	struct ring_strategy *s = simple(1);
	c->strategy = s;
	const char *keys[2];
	char names[64][8];
	ck_assert_int_eq(keys_off_node0(c, s, names, keys, 2), 2);

	/* A batch that completes: applied, and its batchlog copies gone. */
	struct outcome o = {0};
	struct storage_mutation *m1 = make_write(c, "x1", "v", 10);
	struct storage_mutation *m2 = make_write(c, "x2", "v", 10);
	struct repl_mutation rm[2] = {{m1, s}, {m2, s}};
	repl_write(c->nodes[0].repl, rm, 2, REPL_CL_ONE, REPL_WRITE_BATCH,
		   on_write, &o);
	storage_mutation_delete(m1);
	storage_mutation_delete(m2);
	ck_assert(sim_run_until(c->sim, outcome_done, &o, 30000000));
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	sim_run_for(c->sim, 100000);
	uint64_t pending = 0;
	for (int i = 0; i < 4; i++) {
		struct repl_stats st;
		repl_get_stats(c->nodes[i].repl, &st);
		pending += st.batchlog_pending;
	}
	ck_assert_uint_eq(pending, 0);
	ck_assert_uint_eq(stored_elsewhere(c), 2);

	/* The coordinator dies once both copies are stored. */
	memset(&o, 0, sizeof(o));
	m1 = make_write(c, keys[0], "v", 20);
	m2 = make_write(c, keys[1], "v", 20);
	struct repl_mutation rm2[2] = {{m1, s}, {m2, s}};
	repl_write(c->nodes[0].repl, rm2, 2, REPL_CL_ONE, REPL_WRITE_BATCH,
		   on_write, &o);
	storage_mutation_delete(m1);
	storage_mutation_delete(m2);
	ck_assert(sim_run_until(c->sim, two_stored, c, 30000000));
	simc_kill(c, 0);
	ck_assert(!o.done);
	for (int i = 1; i < 4; i++)
		for (int k = 0; k < 2; k++)
			ck_assert(!has_key(&c->nodes[i], keys[k]));
	sim_run_for(c->sim, 10000000);
	for (int k = 0; k < 2; k++) {
		int eps[4], ne;
		replicas_of(c, s, keys[k], eps, &ne);
		ck_assert_msg(has_key(&c->nodes[node_of(c, eps[0])], keys[k]),
			      "%s not replayed", keys[k]);
	}
	uint64_t replayed = 0;
	pending = 0;
	for (int i = 1; i < 4; i++) {
		struct repl_stats st;
		repl_get_stats(c->nodes[i].repl, &st);
		replayed += st.batches_replayed;
		pending += st.batchlog_pending;
	}
	ck_assert_uint_ge(replayed, 1);
	ck_assert_uint_eq(pending, 0);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* DROP forgets a table's coordinator latencies; the others keep theirs
 * whatever their place in the table's probe chains. */
START_TEST(table_latencies_go_with_a_dropped_table)
{
	const char *dcs[1] = {"dc1"};
	struct simc *c = simc_new(g_seed, 1, dcs);
	struct repl *r = c->nodes[0].repl;
	uint8_t id[16] = {0};
	for (int i = 0; i < 300; i++) {
		id[0] = (uint8_t)i;
		id[1] = (uint8_t)(i >> 8);
		repl_table_lat_add(r, id, REPL_REQ_WRITE, (uint64_t)i + 1);
	}
	for (int i = 0; i < 300; i += 3) {
		id[0] = (uint8_t)i;
		id[1] = (uint8_t)(i >> 8);
		repl_forget_table(r, id);
		repl_forget_table(r, id); /* twice: nothing more */
	}
	for (int i = 0; i < 300; i++) {
		id[0] = (uint8_t)i;
		id[1] = (uint8_t)(i >> 8);
		struct repl_table_latency l;
		bool known = repl_get_table_latency(r, id, &l);
		ck_assert_int_eq(known, i % 3 != 0);
		ck_assert_uint_eq(l.write.count, i % 3 != 0);
		ck_assert_uint_eq(l.write.sum_us, i % 3 ? (uint64_t)i + 1 : 0);
		ck_assert_uint_eq(l.read.count, 0);
	}
	simc_delete(c);
}
END_TEST

/* TRUNCATE reaches every node, the coordinator included, and answers once
 * all acknowledged; later writes are kept. */
START_TEST(truncate_empties_every_node)
{
	const char *dcs[4] = {"dc1", "dc1", "dc1", "dc1"};
	struct simc *c = simc_new(g_seed, 4, dcs);
	struct ring_strategy *s = simple(2);
	char key[16];
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		struct outcome o =
			do_write(c, i % 4, s, REPL_CL_ALL, key, "v", 10);
		ck_assert_int_eq(o.res.outcome, REPL_OK);
	}
	for (int i = 0; i < 4; i++)
		ck_assert_uint_gt(c->nodes[i].nparts, 0);
	struct outcome o = do_truncate(c, 1);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	for (int i = 0; i < 4; i++) {
		ck_assert_uint_eq(c->nodes[i].nparts, 0);
		ck_assert_int_eq(c->nodes[i].truncates, 1);
	}
	o = do_read(c, 0, s, REPL_CL_ALL, "k3");
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	char v[16];
	int64_t ts;
	frag_value(c, o.frag, v, sizeof(v), &ts);
	ck_assert_str_eq(v, "");
	storage_mutation_delete(o.frag);
	o = do_write(c, 2, s, REPL_CL_ALL, "k3", "after", 20);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	o = do_read(c, 0, s, REPL_CL_ALL, "k3");
	frag_value(c, o.frag, v, sizeof(v), &ts);
	ck_assert_str_eq(v, "after");
	storage_mutation_delete(o.frag);
	struct repl_stats st;
	repl_get_stats(c->nodes[1].repl, &st);
	ck_assert_uint_eq(st.truncates, 1);
	repl_get_stats(c->nodes[0].repl, &st);
	ck_assert_uint_eq(st.replica_truncates, 1);
	/* a single-node ring answers inline through the local store */
	struct simc *one = simc_new(g_seed, 1, dcs);
	o = do_truncate(one, 0);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_int_eq(one->nodes[0].truncates, 1);
	simc_delete(one);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A node the failure detector calls down: Unavailable at ALL (required =
 * every endpoint, alive = the live ones) and nothing is truncated. */
START_TEST(truncate_with_a_node_down_is_unavailable)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(g_seed, 3, dcs);
	struct ring_strategy *s = simple(3);
	ck_assert_int_eq(
		do_write(c, 0, s, REPL_CL_ALL, "k", "v", 10).res.outcome,
		REPL_OK);
	c->down[2] = true;
	struct outcome o = do_truncate(c, 0);
	ck_assert_int_eq(o.res.outcome, REPL_UNAVAILABLE);
	ck_assert_int_eq(o.res.cl, REPL_CL_ALL);
	ck_assert_int_eq(o.res.required, 3);
	ck_assert_int_eq(o.res.alive, 2);
	sim_run_for(c->sim, 1000000);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(c->nodes[i].truncates, 0);
		ck_assert_uint_eq(c->nodes[i].nparts, 1);
	}
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A node alive to the detector but unreachable: a truncate error once
 * truncate_timeout_ms (60 s) passes; a replica whose store fails: a
 * truncate error naming it at once. */
START_TEST(truncate_error_on_timeout_or_failure)
{
	const char *dcs[3] = {"dc1", "dc1", "dc1"};
	struct simc *c = simc_new(g_seed, 3, dcs);
	struct ring_strategy *s = simple(3);
	ck_assert_int_eq(
		do_write(c, 0, s, REPL_CL_ALL, "k", "v", 10).res.outcome,
		REPL_OK);
	sim_net_cut(c->sim, NULL, &c->nodes[2].addr, true);
	uint64_t t0 = sim_now_us(c->sim);
	struct outcome o = do_truncate(c, 0);
	uint64_t took = sim_now_us(c->sim) - t0;
	ck_assert_int_eq(o.res.outcome, REPL_TRUNCATE_ERROR);
	ck_assert_msg(strstr(o.res.msg, "timed out"), "%s", o.res.msg);
	ck_assert_int_eq(o.res.required, 3);
	ck_assert_int_eq(o.res.alive, 2);
	ck_assert_uint_ge(took, 60000000);
	ck_assert_uint_lt(took, 61000000);
	/* the reachable ones did truncate (there is no undo) */
	ck_assert_int_eq(c->nodes[0].truncates, 1);
	ck_assert_int_eq(c->nodes[1].truncates, 1);
	ck_assert_int_eq(c->nodes[2].truncates, 0);
	ck_assert_uint_eq(c->nodes[2].nparts, 1);

	sim_net_heal(c->sim);
	c->nodes[1].fail_truncate = true;
	t0 = sim_now_us(c->sim);
	o = do_truncate(c, 0);
	ck_assert_int_eq(o.res.outcome, REPL_TRUNCATE_ERROR);
	ck_assert_msg(strstr(o.res.msg, "127.0.9.2"), "%s", o.res.msg);
	ck_assert_uint_lt(sim_now_us(c->sim) - t0, 1000000);
	/* the late answers of an ended truncate are ignored */
	sim_run_for(c->sim, 70000000);
	ck_assert_int_eq(c->nodes[2].truncates, 1);
	c->nodes[1].fail_truncate = false;
	o = do_truncate(c, 2);
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

/* A logged batch whose coordinator died is not replayed into a table
 * truncated after the batch was written (it would bring truncated rows
 * back); a batch written after the truncate still is. */
START_TEST(batchlog_replay_skips_tables_truncated_since)
{
	const char *dcs[4] = {"dc1", "dc1", "dc1", "dc1"};
	struct simc *c = simc_new(13, 4, dcs);
	struct ring_strategy *s = simple(1);
	c->strategy = s;
	const char *keys[4];
	char names[64][8];
	ck_assert_int_eq(keys_off_node0(c, s, names, keys, 4), 4);
	for (int round = 0; round < 2; round++) {
		/* the coordinator dies once both copies are stored */
		struct outcome o = {0};
		struct storage_mutation *m1 =
			make_write(c, keys[2 * round], "v", 20);
		struct storage_mutation *m2 =
			make_write(c, keys[2 * round + 1], "v", 20);
		struct repl_mutation rm[2] = {{m1, s}, {m2, s}};
		repl_write(c->nodes[0].repl, rm, 2, REPL_CL_ONE,
			   REPL_WRITE_BATCH, on_write, &o);
		storage_mutation_delete(m1);
		storage_mutation_delete(m2);
		ck_assert(sim_run_until(c->sim, two_stored, c, 30000000));
		simc_kill(c, 0);
		simc_restart(c, 0);
		if (round == 0) /* before the replay is due */
			ck_assert_int_eq(do_truncate(c, 1).res.outcome,
					 REPL_OK);
		sim_run_for(c->sim, 10000000);
		uint64_t pending = 0;
		for (int i = 1; i < 4; i++) {
			struct repl_stats st;
			repl_get_stats(c->nodes[i].repl, &st);
			pending += st.batchlog_pending;
		}
		ck_assert_uint_eq(pending, 0);
		for (int k = 2 * round; k < 2 * round + 2; k++) {
			int eps[4], ne;
			replicas_of(c, s, keys[k], eps, &ne);
			ck_assert_msg(has_key(&c->nodes[node_of(c, eps[0])],
					      keys[k]) == (round == 1),
				      "round %d: %s", round, keys[k]);
		}
	}
	ring_strategy_delete(s);
	simc_delete(c);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("coordinator_sim");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, availability_simple_rf1_to_5);
	tcase_add_test(tc, availability_nts_two_dcs);
	tcase_add_test(tc, rf_above_node_count);
	tcase_add_test(tc, write_failure_names_the_failed_replicas);
	tcase_add_test(tc, write_timeout_and_hint);
	tcase_add_test(tc, requests_counted_by_level);
	tcase_add_test(tc, handed_over_hints_are_kept_or_applied);
	tcase_add_test(tc, a_silent_datacenter_does_not_overload_local_writes);
	tcase_add_test(tc, read_repair);
	tcase_add_test(tc, traced_read_repair);
	tcase_add_test(tc, read_timeout);
	tcase_add_test(tc, timeouts_fire_at_each_operations_own_deadline);
	tcase_add_test(tc, speculative_retry);
	tcase_add_test(tc, quorum_reads_see_acked_writes);
	tcase_add_test(tc, range_walk);
	tcase_add_test(tc, trace_range_step);
	tcase_add_test(tc, range_read_repair);
	tcase_add_test(tc, batchlog_replays_a_dead_coordinators_batch);
	tcase_add_test(tc, truncate_empties_every_node);
	tcase_add_test(tc, table_latencies_go_with_a_dropped_table);
	tcase_add_test(tc, truncate_with_a_node_down_is_unavailable);
	tcase_add_test(tc, truncate_error_on_timeout_or_failure);
	tcase_add_test(tc, batchlog_replay_skips_tables_truncated_since);
	tcase_add_test(tc, tombstone_warnings_and_remote_aborts);
	tcase_add_test(tc, trace_session_reaches_the_replicas);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	g_seed = test_seed(20261130);
	return test_run(suite());
}
