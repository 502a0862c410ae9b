/* Counter writes in the simulator (replication/coord_counter.c): concurrent
 * increments from every coordinator sum exactly when nothing fails, each
 * replica ends with the same shards; a leader that dies mid-load leaves
 * the total between the acknowledged increments and those plus the
 * timed-out ones (Cassandra's at-least-once/lost-on-leader-failure
 * bound); a replica that missed increments converges through read repair;
 * timeouts are write type COUNTER; ANY and SERIAL are refused. */
#include "common/err.h"
#include "common/murmur3.h"
#include "tests/lib/testutil.h"
#include "tests/sim/coord_cluster.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_seed;

#define NKEYS 4

static const char *key_name(int k)
{
	static const char *names[NKEYS] = {"apple", "pear", "plum", "fig"};
	return names[k];
}

/* The cluster's table becomes ks.c (k text PRIMARY KEY, c counter). */
static struct simc *counter_cluster(uint64_t seed, int n,
				    const struct ring_strategy *s)
{
	static const char *dcs[MAX_NODES] = {"dc1", "dc1", "dc1", "dc1",
					     "dc1", "dc1", "dc1", "dc1",
					     "dc1", "dc1", "dc1", "dc1"};
	struct simc *c = simc_new(seed, n, dcs);
	uint8_t id[16];
	memcpy(id, c->meta->id, 16);
	storage_table_meta_delete(c->meta);
	c->meta = storage_table_meta_new("ks", "c", id);
	const struct storage_type *text =
		storage_type_simple(STORAGE_TYPE_TEXT);
	const struct storage_type *ctr =
		storage_type_simple(STORAGE_TYPE_COUNTER);
	ck_assert_int_eq(storage_table_meta_add_column(
				 c->meta, "k", STORAGE_COLUMN_PARTITION_KEY,
				 text, false),
			 0);
	ck_assert_int_eq(storage_table_meta_add_column(c->meta, "c",
						       STORAGE_COLUMN_REGULAR,
						       ctr, false),
			 1);
	c->strategy = s;
	return c;
}

struct inc {
	bool done;
	struct repl_result res;
	int64_t delta;
	int key;
};

static void on_inc(void *arg, const struct repl_result *res)
{
	struct inc *o = arg;
	ck_assert(!o->done);
	o->done = true;
	o->res = *res;
}

static void start_inc(struct simc *c, int coord, const struct ring_strategy *s,
		      int cl, struct inc *o)
{
	const char *key = key_name(o->key);
	struct storage_mutation *m = storage_mutation_new(
		c->meta, (const uint8_t *)key, strlen(key));
	ck_assert_int_eq(storage_mutation_put_counter_delta(m, 1, o->delta), 0);
	struct repl_mutation rm = {m, s};
	repl_counter_write(c->nodes[coord].repl, &rm, 1, cl, on_inc, o);
	storage_mutation_delete(m);
}

struct all_done {
	struct inc *incs;
	size_t n;
};

static bool all_done(void *arg)
{
	struct all_done *a = arg;
	for (size_t i = 0; i < a->n; i++)
		if (!a->incs[i].done)
			return false;
	return true;
}

/* The counter's value in fragment f (INT64_MIN when it has none). */
static int64_t frag_counter(struct simc *c, const struct storage_mutation *f)
{
	struct storage_read_cmd cmd = {.with_static = true};
	struct storage_result *r = NULL;
	ck_assert_int_eq(
		storage_fragment_resolve(c->meta, f, &cmd, 1700000000, &r), 0);
	int64_t v = INT64_MIN;
	if (r->row_count > 0)
		for (size_t i = 0; i < r->rows[0].cell_count; i++)
			if (r->rows[0].cells[i].column == 1)
				v = (int64_t)be64_load(
					r->rows[0].cells[i].value.ptr);
	storage_result_delete(r);
	return v;
}

/* What node n stores of `key` (INT64_MIN: nothing). */
static int64_t stored(struct simc *c, int n, int key)
{
	const char *k = key_name(key);
	struct storage_mutation *probe =
		storage_mutation_new(c->meta, (const uint8_t *)k, strlen(k));
	struct part *p = find_part(&c->nodes[n], probe);
	storage_mutation_delete(probe);
	return p ? frag_counter(c, p->frag) : INT64_MIN;
}

static int64_t read_counter(struct simc *c, int coord,
			    const struct ring_strategy *s, int cl, int key)
{
	struct outcome o = do_read(c, coord, s, cl, key_name(key));
	ck_assert_msg(o.res.outcome == REPL_OK, "read: %d %s", o.res.outcome,
		      o.res.msg);
	int64_t v = frag_counter(c, o.frag);
	storage_mutation_delete(o.frag);
	return v;
}

/* Is node n a replica of key? */
static bool is_replica(struct simc *c, const struct ring_strategy *s, int n,
		       int key)
{
	const char *k = key_name(key);
	struct ring_replicas reps;
	struct ring *ring = c->nodes[0].ring;
	ck_assert_int_eq(ring_replicas_for_token(
				 ring, s,
				 murmur3_token((const uint8_t *)k, strlen(k)),
				 &reps),
			 0);
	for (size_t i = 0; i < reps.n_natural; i++)
		if (inet_addr_eq(
			    &ring_endpoint_get(ring, reps.natural[i])->addr,
			    &c->nodes[n].addr))
			return true;
	return false;
}

START_TEST(concurrent_increments_sum_exactly)
{
	struct ring_strategy *s = simple(3);
	struct simc *c = counter_cluster(g_seed + (uint64_t)_i, 5, s);
	sim_net_set_latency(c->sim, 100, 3000);
	enum { PER_NODE = 60 };
	size_t n = (size_t)c->n * PER_NODE;
	struct inc *incs = calloc(n, sizeof(*incs));
	int64_t want[NKEYS] = {0};
	/* every coordinator starts its increments at once: the leaders'
	 * locks queue them */
	for (size_t i = 0; i < n; i++) {
		incs[i].key = (int)(sim_random(c->sim) % NKEYS);
		incs[i].delta = (int64_t)(sim_random(c->sim) % 21) - 5;
		want[incs[i].key] += incs[i].delta;
		int cl = (i % 3) == 0   ? REPL_CL_ONE
			 : (i % 3) == 1 ? REPL_CL_QUORUM
					: REPL_CL_ALL;
		start_inc(c, (int)(i % (size_t)c->n), s, cl, &incs[i]);
	}
	struct all_done a = {incs, n};
	ck_assert(sim_run_until(c->sim, all_done, &a, 60000000));
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(incs[i].res.outcome == REPL_OK,
			      "increment %zu: %d %s", i, incs[i].res.outcome,
			      incs[i].res.msg);
	sim_run_for(c->sim, 2000000); /* background replication */
	for (int k = 0; k < NKEYS; k++) {
		for (int node = 0; node < c->n; node++) {
			if (is_replica(c, s, node, k))
				ck_assert_int_eq(stored(c, node, k), want[k]);
			else
				ck_assert_int_eq(stored(c, node, k), INT64_MIN);
		}
		for (int coord = 0; coord < c->n; coord++)
			ck_assert_int_eq(
				read_counter(c, coord, s, REPL_CL_QUORUM, k),
				want[k]);
	}
	free(incs);
	simc_delete(c);
	ring_strategy_delete(s);
}
END_TEST

START_TEST(leader_death_stays_within_bounds)
{
	struct ring_strategy *s = simple(3);
	struct simc *c = counter_cluster(g_seed + 100 + (uint64_t)_i, 5, s);
	sim_net_set_latency(c->sim, 100, 2000);
	enum { N = 400 };
	struct inc *incs = calloc(N, sizeof(*incs));
	int victim = 1 + _i % 4;
	for (size_t i = 0; i < N; i++) {
		incs[i].key = (int)(i % NKEYS);
		incs[i].delta = 1 + (int64_t)(i % 3);
	}
	/* a steady load from every node, the victim killed half way */
	size_t started = 0;
	for (int round = 0; round < 20; round++) {
		for (size_t j = 0; j < N / 20; j++, started++) {
			int coord = (int)(started % (size_t)c->n);
			if (c->nodes[coord].killed)
				coord = (coord + 1) % c->n;
			start_inc(c, coord, s, REPL_CL_QUORUM, &incs[started]);
		}
		if (round == 10)
			simc_kill(c, victim);
		sim_run_for(c->sim, 3000);
	}
	/* increments whose coordinator died never answer: treat them as
	 * timed out (they may or may not have been applied) */
	sim_run_for(c->sim, 20000000);
	int64_t lo[NKEYS] = {0}, hi[NKEYS] = {0};
	size_t ok = 0, timeouts = 0;
	for (size_t i = 0; i < N; i++) {
		struct inc *o = &incs[i];
		if (o->done && o->res.outcome == REPL_OK) {
			lo[o->key] += o->delta;
			hi[o->key] += o->delta;
			ok++;
		} else if (!o->done || o->res.outcome == REPL_WRITE_TIMEOUT) {
			if (o->done)
				ck_assert_int_eq(o->res.write_type,
						 REPL_WRITE_COUNTER);
			hi[o->key] += o->delta;
			timeouts++;
		} else {
			/* Unavailable or failed before any replica wrote */
			ck_assert_msg(o->res.outcome == REPL_UNAVAILABLE ||
					      o->res.outcome ==
						      REPL_WRITE_FAILURE,
				      "increment %zu: %d %s", i, o->res.outcome,
				      o->res.msg);
		}
	}
	ck_assert_uint_gt(ok, N / 2);
	simc_restart(c, victim);
	sim_run_for(c->sim, 1000000);
	for (int k = 0; k < NKEYS; k++) {
		int64_t v = read_counter(c, 0, s, REPL_CL_ALL, k);
		ck_assert_msg(v >= lo[k] && v <= hi[k],
			      "key %d: %lld not in [%lld, %lld] (%zu ok, %zu "
			      "timeouts)",
			      k, (long long)v, (long long)lo[k],
			      (long long)hi[k], ok, timeouts);
		/* the ALL read repaired every replica to the same state */
		for (int node = 0; node < c->n; node++)
			if (is_replica(c, s, node, k))
				ck_assert_int_eq(stored(c, node, k), v);
	}
	free(incs);
	simc_delete(c);
	ring_strategy_delete(s);
}
END_TEST

START_TEST(missed_increments_converge_by_read_repair)
{
	struct ring_strategy *s = simple(3);
	struct simc *c = counter_cluster(g_seed + 200, 3, s);
	/* node 2 is down: the others lead and hint it */
	simc_kill(c, 2);
	struct inc incs[30];
	memset(incs, 0, sizeof(incs));
	int64_t want = 0;
	for (int i = 0; i < 30; i++) {
		incs[i].key = 0;
		incs[i].delta = i + 1;
		want += i + 1;
		start_inc(c, i % 2, s, REPL_CL_QUORUM, &incs[i]);
	}
	struct all_done a = {incs, 30};
	ck_assert(sim_run_until(c->sim, all_done, &a, 30000000));
	for (int i = 0; i < 30; i++)
		ck_assert_int_eq(incs[i].res.outcome, REPL_OK);
	ck_assert_int_ge(c->nodes[0].hints + c->nodes[1].hints, 1);
	simc_restart(c, 2);
	ck_assert_int_eq(stored(c, 2, 0), INT64_MIN);
	/* both leaders' shards reach node 2 through the read's repair */
	ck_assert_int_eq(read_counter(c, 2, s, REPL_CL_ALL, 0), want);
	ck_assert_int_eq(stored(c, 2, 0), want);
	ck_assert_int_eq(stored(c, 0, 0), want);
	simc_delete(c);
	ring_strategy_delete(s);
}
END_TEST

START_TEST(refusals_and_timeouts)
{
	struct ring_strategy *s = simple(3);
	struct simc *c = counter_cluster(g_seed + 300, 4, s);
	struct inc o = {.key = 0, .delta = 1};
	start_inc(c, 0, s, REPL_CL_ANY, &o);
	ck_assert(o.done);
	ck_assert_int_eq(o.res.outcome, REPL_INVALID);
	ck_assert_str_eq(o.res.msg, "Consistency level ANY is not yet "
				    "supported for counter table c");
	memset(&o, 0, sizeof(o));
	start_inc(c, 0, s, REPL_CL_SERIAL, &o);
	ck_assert_int_eq(o.res.outcome, REPL_INVALID);
	ck_assert_str_eq(o.res.msg,
			 "Counter operations are inherently non-serializable");
	/* two of three replicas down: Unavailable at QUORUM, nothing sent */
	int down = 0;
	for (int n = 1; n < c->n && down < 2; n++)
		if (is_replica(c, s, n, 0)) {
			c->down[n] = true;
			down++;
		}
	memset(&o, 0, sizeof(o));
	start_inc(c, 0, s, REPL_CL_QUORUM, &o);
	struct all_done a = {&o, 1};
	ck_assert(sim_run_until(c->sim, all_done, &a, 30000000));
	ck_assert_int_eq(o.res.outcome, REPL_UNAVAILABLE);
	ck_assert_int_eq(o.res.required, 2);
	for (int n = 0; n < c->n; n++)
		c->down[n] = false;
	/* the leader is cut off after it was picked: WriteTimeout COUNTER,
	 * received 0, from a coordinator that is not a replica */
	int coord = -1;
	for (int n = 0; n < c->n && coord < 0; n++)
		if (!is_replica(c, s, n, 0))
			coord = n;
	ck_assert_int_ge(coord, 0);
	for (int n = 0; n < c->n; n++)
		if (n != coord)
			sim_net_set_drop(c->sim, &c->nodes[coord].addr,
					 &c->nodes[n].addr, 1.0);
	memset(&o, 0, sizeof(o));
	start_inc(c, coord, s, REPL_CL_QUORUM, &o);
	ck_assert(sim_run_until(c->sim, all_done, &a, 30000000));
	ck_assert_int_eq(o.res.outcome, REPL_WRITE_TIMEOUT);
	ck_assert_int_eq(o.res.write_type, REPL_WRITE_COUNTER);
	ck_assert_int_eq(o.res.alive, 0);
	ck_assert_int_eq(o.res.required, 2);
	ck_assert_str_eq(repl_write_type_name(o.res.write_type), "COUNTER");
	simc_delete(c);
	ring_strategy_delete(s);
}
END_TEST

/* Whether `log` has a line starting with `line`. */
static bool has_line(const char *log, const char *line)
{
	for (const char *p = log; (p = strstr(p, line)); p++)
		if (p == log || p[-1] == '\n')
			return true;
	return false;
}

/* A traced increment from a coordinator that is not a replica: its
 * forward, the leader's lock, read, write and replication, and the other
 * replicas' writes, in Cassandra's words under the session. */
/* A leader whose own replica fails to write the new shards answers
 * WriteFailure (write type COUNTER) naming itself; the other replicas are
 * never sent the increment. */
START_TEST(leader_failure_names_the_leader)
{
	struct ring_strategy *s = simple(3);
	struct simc *c = counter_cluster(g_seed + 500, 3, s);
	ck_assert(is_replica(c, s, 1, 0));
	c->nodes[1].fail_writes = true; /* a replica: it leads its own */
	struct inc o = {.key = 0, .delta = 1};
	start_inc(c, 1, s, REPL_CL_QUORUM, &o);
	struct all_done a = {&o, 1};
	ck_assert(sim_run_until(c->sim, all_done, &a, 30000000));
	ck_assert_int_eq(o.res.outcome, REPL_WRITE_FAILURE);
	ck_assert_int_eq(o.res.write_type, REPL_WRITE_COUNTER);
	ck_assert_uint_eq(o.res.n_failed, 1);
	ck_assert(names_failure(c, &o.res, 1, REPL_FAILURE_UNKNOWN));
	simc_delete(c);
	ring_strategy_delete(s);
}
END_TEST

START_TEST(traced_increment)
{
	struct ring_strategy *s = simple(3);
	struct simc *c = counter_cluster(g_seed + 400, 4, s);
	int coord = -1;
	for (int n = 0; n < c->n && coord < 0; n++)
		if (!is_replica(c, s, n, 0))
			coord = n;
	ck_assert_int_ge(coord, 0);
	uint8_t sid[16] = {0xc0, 0x47, 7};
	struct inc o = {.key = 0, .delta = 5};
	const char *key = key_name(0);
	struct storage_mutation *m = storage_mutation_new(
		c->meta, (const uint8_t *)key, strlen(key));
	ck_assert_int_eq(storage_mutation_put_counter_delta(m, 1, 5), 0);
	struct repl_mutation rm = {m, s};
	repl_counter_write_traced(c->nodes[coord].repl, &rm, 1, REPL_CL_QUORUM,
				  sid, on_inc, &o);
	storage_mutation_delete(m);
	struct all_done a = {&o, 1};
	ck_assert(sim_run_until(c->sim, all_done, &a, 30000000));
	ck_assert_int_eq(o.res.outcome, REPL_OK);
	ck_assert_ptr_nonnull(strstr(c->nodes[coord].trace_log,
				     "Native-Transport-Requests-1|Enqueuing "
				     "counter update to /"));
	int leaders = 0, writers = 0;
	for (int n = 0; n < c->n; n++) {
		const char *log = c->nodes[n].trace_log;
		if (strstr(log, "CounterMutationStage-1|Acquiring counter "
				"locks\n"
				"CounterMutationStage-1|Executing "
				"single-partition query on ks.c\n"
				"CounterMutationStage-1|Acquiring sstable "
				"references\n"
				"CounterMutationStage-1|Merged data from "
				"memtables and 0 sstables\n"
				"CounterMutationStage-1|Read 0 live rows and 0 "
				"tombstone cells\n"
				"CounterMutationStage-1|Appending to "
				"commitlog\n"
				"CounterMutationStage-1|Adding to ks.c "
				"memtable\n")) {
			leaders++;
			ck_assert_ptr_nonnull(strstr(
				log, "Sending MUTATION_REQ message to /"));
			ck_assert_ptr_nonnull(
				strstr(log, "CounterMutationStage-1|Enqueuing "
					    "response to /"));
		}
		if (has_line(log, "MutationStage-1|Adding to ks.c memtable"))
			writers++;
	}
	ck_assert_int_eq(leaders, 1);
	ck_assert_int_ge(writers, 1); /* QUORUM: at least one other */
	simc_delete(c);
	ring_strategy_delete(s);
}
END_TEST

int main(void)
{
	g_seed = test_seed(20261202);
	Suite *su = suite_create("counter_sim");
	TCase *tc = tcase_create("counter");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, concurrent_increments_sum_exactly, 0, 3);
	tcase_add_loop_test(tc, leader_death_stays_within_bounds, 0, 4);
	tcase_add_test(tc, missed_increments_converge_by_read_repair);
	tcase_add_test(tc, refusals_and_timeouts);
	tcase_add_test(tc, leader_failure_names_the_leader);
	tcase_add_test(tc, traced_increment);
	suite_add_tcase(su, tc);
	return test_run(su);
}
