/*
 * Repair session options in the deterministic simulator: parallelism
 * (nodetool's -seq, default, -dcpar) and job threads (-j).
 *
 * Node 0 coordinates; nodes 1..4 are the replicas (1, 2 in dc1; 3, 4 in
 * dc2), so every VALIDATE and its answer cross the simulated network and
 * the test sees them. Scans take simulated time, so a replica is
 * "validating" from a VALIDATE's arrival until its answer reaches the
 * coordinator (a superset of the real scan). Checked:
 *
 * - sequential: never two replicas of overlapping ranges validating at
 *   once, across tables and concurrent tasks (parallel breaks the same
 *   check, so it can fail);
 * - dc_parallel: never two of one datacenter, and the datacenters do run
 *   side by side;
 * - jobs N: exactly N tasks in flight at the peak, never more; divergent
 *   replicas still converge;
 * - a task failing with jobs 2 fails the session, reports every running
 *   task as failed and releases the claims of all of them: another
 *   coordinator can repair the same ranges at once;
 * - the level-by-level tree exchange under jobs 4 and sequential: trees
 *   deeper than VALIDATE's top levels are descended with TREE rounds
 *   while other replicas validate, the replicas converge, and every tree
 *   a replica kept (several tasks of one session each) is freed at the
 *   end;
 * - under sequential, a replica that answered VALIDATE first keeps its
 *   tree (claim) while the others validate for longer than a claim lives.
 */
#include "repair/repair.h"
#include "repair/repair_internal.h"

#include "common/err.h"
#include "common/murmur3.h"
#include "tests/lib/testutil.h"
#include "tests/sim/mem_store.h"
#include "tests/sim/sim.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NNODES   5 /* node 0 coordinates; 1..4 are replicas */
#define NREPS    4
#define NRANGES  8
#define NKEYS    200
#define SCAN_US  20000 /* a scan's simulated duration */
#define MAX_VALS 64

static uint64_t g_seed;

struct cluster;

struct mnode {
	struct cluster *c;
	int index;
	struct inet_addr addr;
	struct env *env;
	struct repair *repair;
	struct mem_store store;
};

/* A validation in flight as the test sees it. */
struct val {
	int node;
	uint32_t task;
	struct merkle_range range;
};

struct cluster {
	struct sim *sim;
	struct mnode nodes[NNODES];
	struct storage_table_meta *meta;
	uint8_t ids[2][16]; /* two tables over the same data */
	struct val vals[MAX_VALS];
	size_t nvals;
	size_t max_overlapping;    /* validations of overlapping ranges */
	size_t max_overlapping_dc; /* ... of one datacenter */
	/* a scan of this range on this node fails (0: none) */
	int fail_node;
	int64_t fail_start;
	size_t tree_rounds; /* TREE requests naming nodes */
	size_t keepalives;  /* ... naming none */
	size_t most_trees;  /* trees kept on one replica at once, at most */
	bool done;
	struct repair_summary sum;
	size_t tasks_ok, tasks_failed;
	uint64_t task_rows;
};

static const char *dc_of(int node)
{
	return node <= 2 ? "dc1" : "dc2";
}

/* ---- store: scans take SCAN_US ------------------------------------------- */

struct scan {
	struct mnode *n;
	struct env_timer *timer;
	int64_t start, end;
	repair_scan_each_fn each;
	storage_done_fn done;
	void *arg;
};

static void scan_fire(void *arg)
{
	struct scan *sc = arg;
	struct mnode *n = sc->n;
	env_timer_free(n->env, sc->timer);
	int rc = 0;
	if (n->index == n->c->fail_node && n->c->fail_start == sc->start)
		rc = err_set(ERR_IO, "injected scan failure");
	else
		rc = mem_store_scan(&n->store, sc->start, sc->end, sc->each,
				    sc->arg);
	sc->done(sc->arg, rc ? -1 : 0, rc ? err_code() : ERR_NONE);
	free(sc);
}

static void mem_scan(void *s, const uint8_t table_id[16], int64_t start,
		     int64_t end, repair_scan_each_fn each,
		     storage_done_fn done, void *arg)
{
	(void)table_id;
	struct mnode *n = s;
	struct scan *sc = calloc(1, sizeof(*sc));
	ck_assert_ptr_nonnull(sc);
	*sc = (struct scan){.n = n,
			    .start = start,
			    .end = end,
			    .each = each,
			    .done = done,
			    .arg = arg};
	sc->timer = env_timer_new(n->env, scan_fire, sc);
	ck_assert_ptr_nonnull(sc->timer);
	env_timer_arm(n->env, sc->timer, SCAN_US);
}

static int mem_apply(void *s, const struct storage_mutation *m,
		     storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	mem_store_apply(&n->store, m);
	done(arg, 0, ERR_NONE);
	return 0;
}

static const struct storage_table_meta *mem_meta(void *s,
						 const uint8_t table_id[16])
{
	struct mnode *n = s;
	for (int t = 0; t < 2; t++)
		if (!memcmp(table_id, n->c->ids[t], 16))
			return storage_table_meta_ref(n->c->meta);
	return NULL;
}

static const struct repair_store_ops mem_ops = {
	.apply = mem_apply,
	.scan = mem_scan,
	.meta = mem_meta,
};

/* ---- watching validations ------------------------------------------------ */

static void val_begin(struct cluster *c, int node, const struct repair_msg *q)
{
	ck_assert_uint_lt(c->nvals, MAX_VALS);
	struct val v = {node, q->task, q->ranges[0]};
	size_t overlapping = 1, same_dc = 1;
	for (size_t i = 0; i < c->nvals; i++) {
		if (!repair_ranges_overlap(c->vals[i].range, v.range))
			continue;
		overlapping++;
		same_dc += strcmp(dc_of(c->vals[i].node), dc_of(node)) == 0;
	}
	if (overlapping > c->max_overlapping)
		c->max_overlapping = overlapping;
	if (same_dc > c->max_overlapping_dc)
		c->max_overlapping_dc = same_dc;
	c->vals[c->nvals++] = v;
}

static void val_end(struct cluster *c, int node, uint32_t task)
{
	for (size_t i = 0; i < c->nvals; i++)
		if (c->vals[i].node == node && c->vals[i].task == task) {
			c->vals[i] = c->vals[--c->nvals];
			return;
		}
}

static int node_of(struct cluster *c, const struct inet_addr *a)
{
	for (int i = 0; i < NNODES; i++)
		if (inet_addr_eq(&c->nodes[i].addr, a))
			return i;
	return -1;
}

static void deliver(void *arg, const struct inet_addr *from, uint32_t verb,
		    const uint8_t *msg, size_t len)
{
	struct mnode *n = arg;
	struct cluster *c = n->c;
	struct repair_msg m;
	if (verb == REPAIR_VERB_VALIDATE &&
	    repair_msg_unpack_request(msg, len, &m) == 0 && m.nranges == 1)
		val_begin(c, n->index, &m);
	else if (verb == REPAIR_VERB_VALIDATE_RSP &&
		 repair_msg_unpack_response(msg, len, &m) == 0)
		val_end(c, node_of(c, from), m.task);
	else if (verb == REPAIR_VERB_TREE &&
		 repair_msg_unpack_request(msg, len, &m) == 0) {
		if (m.nnodes)
			c->tree_rounds++;
		else
			c->keepalives++;
	} else
		memset(&m, 0, sizeof(m));
	repair_msg_free(&m);
	repair_receive(n->repair, from, verb, msg, len);
	size_t kept = repair_kept_trees(n->repair, NULL);
	if (kept > c->most_trees)
		c->most_trees = kept;
}

/* Trees kept on all replicas (their bytes go with them). */
static size_t kept_trees(struct cluster *c)
{
	size_t n = 0;
	for (int i = 0; i < NNODES; i++) {
		size_t bytes;
		size_t k = repair_kept_trees(c->nodes[i].repair, &bytes);
		ck_assert_uint_eq(k == 0, bytes == 0);
		n += k;
	}
	return n;
}

/* ---- the cluster --------------------------------------------------------- */

static struct cluster *cluster_new_timeouts(uint64_t validate_ms,
					    uint64_t request_ms)
{
	struct cluster *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->sim = sim_new(g_seed, 1700000000000000LL);
	uint8_t id[16] = {0x4e, 0x9a};
	memcpy(c->ids[0], id, 16);
	id[1] = 0x9b;
	memcpy(c->ids[1], id, 16);
	c->meta = mem_store_table_new(c->ids[0]);
	for (int i = 0; i < NNODES; i++) {
		struct mnode *m = &c->nodes[i];
		m->c = c;
		m->index = i;
		m->store.meta = c->meta;
		m->addr = sim_node_addr(i);
		m->env = sim_env_new(c->sim, &m->addr);
		env_set_receiver(m->env, deliver, m);
		struct repair_options o;
		repair_options_default(&o);
		o.self = m->addr;
		o.validate_timeout_ms = validate_ms;
		o.request_timeout_ms = request_ms;
		m->repair = repair_new(m->env, &o, &mem_ops, m);
		ck_assert_ptr_nonnull(m->repair);
	}
	return c;
}

static struct cluster *cluster_new(void)
{
	return cluster_new_timeouts(5000, 5000);
}

static void cluster_delete(struct cluster *c)
{
	for (int i = 0; i < NNODES; i++) {
		repair_delete(c->nodes[i].repair);
		mem_store_clear(&c->nodes[i].store);
	}
	sim_delete(c->sim);
	storage_table_meta_delete(c->meta);
	free(c);
}

/* Row (k, ck) at ts on the replicas of `mask` (bit i: node i). */
static void put_row(struct cluster *c, int mask, int k, int ck, int64_t ts)
{
	char key[32];
	snprintf(key, sizeof(key), "key%05d", k);
	struct storage_mutation *m =
		storage_mutation_new(c->meta, (uint8_t *)key, strlen(key));
	ck_assert_ptr_nonnull(m);
	uint8_t b[4];
	be32_store(b, (uint32_t)ck);
	struct slice s = slice_make(b, 4);
	ck_assert_int_eq(storage_mutation_set_row(m, &s, 1), 0);
	char v[40];
	memset(v, 'a' + (int)(ts % 26), sizeof(v));
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, 0, 1700000000), 0);
	ck_assert_int_eq(storage_mutation_put(m, 2, NULL, 0, (uint8_t *)v,
					      sizeof(v), ts, 0, 1700000000),
			 0);
	for (int i = 1; i < NNODES; i++)
		if (mask & (1 << i))
			mem_store_apply(&c->nodes[i].store, m);
	storage_mutation_delete(m);
}

static void load_n(struct cluster *c, int nkeys)
{
	for (int k = 0; k < nkeys; k++)
		put_row(c, 0x1e, k, 0, 1000);
}

static void load(struct cluster *c)
{
	load_n(c, NKEYS);
}

/* Whether the replicas hold the same partitions. */
static bool converged(struct cluster *c)
{
	for (int i = 2; i < NNODES; i++)
		if (!mem_store_same(&c->nodes[1].store, &c->nodes[i].store))
			return false;
	return true;
}

/* ---- a session ----------------------------------------------------------- */

static void on_done(void *arg, const struct repair_summary *s)
{
	struct cluster *c = arg;
	ck_assert(!c->done);
	c->done = true;
	c->sum = *s;
	c->sum.peers = NULL;
	c->sum.npeers = 0;
}

static void on_task(void *arg, const struct repair_task_result *t)
{
	struct cluster *c = arg;
	ck_assert_ptr_nonnull(t->table);
	if (t->ok)
		c->tasks_ok++;
	else
		c->tasks_failed++;
	c->task_rows += t->rows_streamed;
}

static bool is_done(void *arg)
{
	return ((struct cluster *)arg)->done;
}

/* Range k of NRANGES equal ones (the last wraps to the ring's start). */
static struct repair_range range_at(int k, const struct inet_addr *reps,
				    const char *const *dcs)
{
	const uint64_t step = UINT64_MAX / NRANGES + 1;
	int64_t a = (int64_t)((uint64_t)INT64_MIN + (uint64_t)k * step);
	int64_t b =
		k + 1 == NRANGES ? INT64_MIN : (int64_t)((uint64_t)a + step);
	return (struct repair_range){.start = a,
				     .end = b,
				     .replicas = reps,
				     .nreplicas = NREPS,
				     .dcs = dcs};
}

struct run_opts {
	size_t ntables, nranges;
	enum repair_parallelism par;
	uint32_t jobs;
};

static size_t g_max_running;

static int start(struct cluster *c, int coordinator, struct run_opts o)
{
	struct inet_addr reps[NREPS];
	const char *dcs[NREPS];
	for (int i = 0; i < NREPS; i++) {
		reps[i] = c->nodes[i + 1].addr;
		dcs[i] = dc_of(i + 1);
	}
	struct repair_table t[2] = {{.name = "ks.t"}, {.name = "ks.u"}};
	memcpy(t[0].id, c->ids[0], 16);
	memcpy(t[1].id, c->ids[1], 16);
	struct repair_range r[NRANGES];
	for (size_t k = 0; k < o.nranges; k++)
		r[k] = range_at((int)k, reps, dcs);
	struct repair_request q = {.tables = t,
				   .ntables = o.ntables,
				   .ranges = r,
				   .nranges = o.nranges,
				   .parallelism = o.par,
				   .jobs = o.jobs,
				   .max_depth = 10,
				   .task_done = on_task};
	c->done = false;
	c->tasks_ok = c->tasks_failed = 0;
	c->task_rows = 0;
	return repair_start(c->nodes[coordinator].repair, &q, NULL, on_done, c,
			    NULL);
}

/* Runs a session from node 0, watching how many tasks run at once. */
static void run(struct cluster *c, struct run_opts o)
{
	c->max_overlapping = c->max_overlapping_dc = 0;
	c->tree_rounds = c->keepalives = c->most_trees = 0;
	g_max_running = 0;
	ck_assert_int_eq(start(c, 0, o), 0);
	uint64_t until = sim_now_us(c->sim) + 600ull * 1000000;
	while (!c->done && sim_now_us(c->sim) < until && sim_step(c->sim)) {
		struct repair_status st;
		if (repair_get_status(c->nodes[0].repair, &st) &&
		    st.running > g_max_running)
			g_max_running = st.running;
	}
	ck_assert(c->done);
}

/* ---- tests --------------------------------------------------------------- */

START_TEST(sequential_validates_one_replica_of_a_range_at_a_time)
{
	struct cluster *c = cluster_new();
	load(c);
	/* two tables over two ranges, all four tasks at once */
	run(c, (struct run_opts){2, 2, REPAIR_SEQUENTIAL, 4});
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.ranges, 4);
	ck_assert_uint_eq(g_max_running, 4);
	ck_assert_uint_eq(c->max_overlapping, 1);
	/* the same check catches parallel validations */
	run(c, (struct run_opts){2, 2, REPAIR_PARALLEL, 4});
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_ge(c->max_overlapping, NREPS);
	cluster_delete(c);
}
END_TEST

START_TEST(dc_parallel_validates_one_replica_per_datacenter)
{
	struct cluster *c = cluster_new();
	load(c);
	run(c, (struct run_opts){2, 2, REPAIR_DC_PARALLEL, 4});
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->max_overlapping_dc, 1);
	ck_assert_uint_eq(c->max_overlapping, 2); /* both DCs at once */
	/* one job, one table: the same */
	run(c, (struct run_opts){1, NRANGES, REPAIR_DC_PARALLEL, 1});
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->max_overlapping_dc, 1);
	ck_assert_uint_eq(c->max_overlapping, 2);
	cluster_delete(c);
}
END_TEST

START_TEST(jobs_run_that_many_tasks_at_once_and_never_more)
{
	for (uint32_t jobs = 1; jobs <= REPAIR_MAX_JOBS; jobs++) {
		struct cluster *c = cluster_new();
		load(c);
		/* rows only some replicas hold, in every range */
		for (int k = 0; k < 40; k++)
			put_row(c, 1 << (1 + k % NREPS), k, 1 + k, 2000);
		ck_assert(!converged(c));
		run(c, (struct run_opts){1, NRANGES, REPAIR_PARALLEL, jobs});
		ck_assert_msg(c->sum.ok, "%s", c->sum.error);
		ck_assert_uint_eq(c->sum.ranges, NRANGES);
		ck_assert_uint_eq(g_max_running, jobs);
		ck_assert_uint_eq(c->tasks_ok, NRANGES);
		ck_assert_uint_eq(c->tasks_failed, 0);
		/* each row to the three replicas lacking it */
		ck_assert_uint_eq(c->task_rows, 40 * (NREPS - 1));
		ck_assert(converged(c));
		cluster_delete(c);
	}
	struct cluster *c = cluster_new();
	ck_assert_int_eq(start(c, 0,
			       (struct run_opts){1, 1, REPAIR_PARALLEL,
						 REPAIR_MAX_JOBS + 1}),
			 -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	cluster_delete(c);
}
END_TEST

/* Seeds 3 and 9 reorder a RELEASE ahead of the VALIDATE it follows on
 * one link (the replica must not claim the range after it); the run's
 * own seed too. */
static const uint64_t failing_task_seeds[] = {0, 3, 9};

START_TEST(a_failing_task_fails_the_session_and_releases_every_task)
{
	uint64_t own = g_seed;
	if (failing_task_seeds[_i])
		g_seed = failing_task_seeds[_i];
	struct cluster *c = cluster_new();
	load(c);
	/* node 3 cannot scan range 1: tasks 0 and 1 run together */
	struct inet_addr reps[NREPS];
	c->fail_node = 3;
	c->fail_start = range_at(1, reps, NULL).start;
	run(c, (struct run_opts){1, NRANGES, REPAIR_PARALLEL, 2});
	ck_assert(!c->sum.ok);
	ck_assert_msg(strstr(c->sum.error, "validation failed on 127.0.9.4"),
		      "%s", c->sum.error);
	/* both running tasks failed with it; none started after */
	ck_assert_uint_eq(c->tasks_failed, 2);
	ck_assert_uint_le(c->tasks_ok, 1);
	ck_assert(!repair_running(c->nodes[0].repair));
	/* within the claims' lifetime, another coordinator takes the same
	 * ranges: nothing was left claimed */
	c->fail_node = 0;
	sim_run_for(c->sim, 10000);
	ck_assert_int_eq(
		start(c, 1, (struct run_opts){1, NRANGES, REPAIR_PARALLEL, 2}),
		0);
	ck_assert(sim_run_until(c->sim, is_done, c, 600ull * 1000000));
	ck_assert_msg(c->sum.ok, "%s (seed %llu)", c->sum.error,
		      (unsigned long long)g_seed);
	cluster_delete(c);
	g_seed = own;
}
END_TEST

START_TEST(tree_exchange_with_jobs_converges_and_frees_every_kept_tree)
{
	struct cluster *c = cluster_new();
	/* ~100 partitions per range: trees kept at depth 8, two levels
	 * below VALIDATE's top six */
	load_n(c, 8 * 100);
	for (int k = 0; k < 40; k++)
		put_row(c, 1 << (1 + k % NREPS), k, 1 + k, 2000);
	ck_assert(!converged(c));
	/* four tasks at once, one replica of a range validating at a time
	 * (the ranges do not overlap: replicas of different tasks do) */
	run(c, (struct run_opts){1, NRANGES, REPAIR_SEQUENTIAL, 4});
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.ranges, NRANGES);
	ck_assert_uint_eq(c->tasks_ok, NRANGES);
	ck_assert_uint_eq(g_max_running, 4);
	ck_assert_uint_eq(c->max_overlapping, 1);
	ck_assert_uint_gt(c->tree_rounds, 0);
	ck_assert_uint_gt(c->sum.leaves_mismatched, 0);
	/* a replica kept the trees of several tasks of the session at once:
	 * a sibling task's VALIDATE did not end them */
	ck_assert_uint_ge(c->most_trees, 2);
	ck_assert(converged(c));
	/* RELEASEs delivered: no tree is left on any replica */
	sim_run_for(c->sim, 10000);
	ck_assert_uint_eq(kept_trees(c), 0);
	/* converged: a second run finds nothing, still freeing all */
	run(c, (struct run_opts){1, NRANGES, REPAIR_PARALLEL, 4});
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->sum.leaves_mismatched, 0);
	ck_assert_uint_eq(c->sum.rows_mismatched, 0);
	sim_run_for(c->sim, 10000);
	ck_assert_uint_eq(kept_trees(c), 0);
	cluster_delete(c);
}
END_TEST

START_TEST(sequential_keeps_answered_trees_while_others_validate)
{
	/* a claim lives 30 + 25 ms from its VALIDATE; four scans of 20 ms
	 * one after another take 80 */
	struct cluster *c = cluster_new_timeouts(30, 25);
	load_n(c, 8 * 100);
	/* one row only node 1 holds, in range 0 */
	struct inet_addr reps[NREPS];
	struct merkle_range r0 = {range_at(0, reps, NULL).start,
				  range_at(0, reps, NULL).end};
	int k = 0;
	for (;; k++) {
		char key[32];
		snprintf(key, sizeof(key), "key%05d", k);
		if (merkle_contains(r0, murmur3_token(key, strlen(key))))
			break;
	}
	put_row(c, 1 << 1, k, 1, 2000);
	ck_assert(!converged(c));
	run(c, (struct run_opts){1, 1, REPAIR_SEQUENTIAL, 1});
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->max_overlapping, 1);
	ck_assert_uint_gt(c->tree_rounds, 0);
	ck_assert_uint_gt(c->keepalives, 0);
	ck_assert(converged(c));
	sim_run_for(c->sim, 10000);
	ck_assert_uint_eq(kept_trees(c), 0);
	/* parallel needs none */
	run(c, (struct run_opts){1, 1, REPAIR_PARALLEL, 1});
	ck_assert_msg(c->sum.ok, "%s", c->sum.error);
	ck_assert_uint_eq(c->keepalives, 0);
	cluster_delete(c);
}
END_TEST

int main(void)
{
	g_seed = test_seed(0x70b5);
	Suite *s = suite_create("repair_jobs_sim");
	TCase *tc = tcase_create("options");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc,
		       sequential_validates_one_replica_of_a_range_at_a_time);
	tcase_add_test(tc, dc_parallel_validates_one_replica_per_datacenter);
	tcase_add_test(tc, jobs_run_that_many_tasks_at_once_and_never_more);
	tcase_add_loop_test(
		tc, a_failing_task_fails_the_session_and_releases_every_task, 0,
		sizeof(failing_task_seeds) / sizeof(failing_task_seeds[0]));
	tcase_add_test(
		tc,
		tree_exchange_with_jobs_converges_and_frees_every_kept_tree);
	tcase_add_test(tc,
		       sequential_keeps_answered_trees_while_others_validate);
	suite_add_tcase(s, tc);
	return test_run(s);
}
