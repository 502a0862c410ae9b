/*
 * Scheduled repair in the deterministic simulator: three nodes, RF 3 (every
 * node replicates every range), each with 4 vnode ranges it is primary
 * for, an in-memory store, a repair object and a scheduler.
 *
 * - A cycle completes on every node and the divergent replicas converge;
 *   successful segments of different coordinators never overlap in time
 *   (each replica is in one scheduled segment at a time: with RF 3 of 3,
 *   one segment in the cluster at a time), and contention shows as
 *   postponed segments, not failures.
 * - A node "crashed" mid-cycle and started again from its last saved
 *   state resumes the same cycle at its next unfinished segment.
 * - A segment that keeps failing (here: scans wider than a limit fail) is
 *   retried, then split until its pieces succeed; the cycle completes.
 * - Pause stops a node's segments (others go on); resume continues.
 * - Work is ordered by deadline (shorter gc_grace first) and a table whose
 *   remaining work cannot finish in time is reported at risk.
 * - Segments start only inside the time windows (run-now excepted); one
 *   running past segment_timeout is cancelled and counts as a failure.
 * - Per-table settings override the section's (a table disabled, another
 *   cut into fewer segments).
 */
#include "repair/repair_sched.h"

#include "common/err.h"
#include "tests/lib/testutil.h"
#include "tests/sim/mem_store.h"
#include "tests/sim/sim.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NNODES   3
#define NVNODES  4
#define MAX_DONE 4096

static uint64_t g_seed;

struct seg_event {
	int node;
	char table[32];
	int64_t start, end;
	uint64_t started_us, done_us;
	int64_t done_wall_us;
	bool ok, postponed;
};

struct mnode {
	struct cluster *c;
	int idx;
	struct inet_addr addr;
	struct env *env;
	struct repair *repair;
	struct repair_sched *sched;
	struct mem_store store; /* its data */
	struct buf saved;       /* the "disk": the last state handed to save */
	int64_t tokens[NVNODES];
	/* incremental sessions' store calls: PREPAREs, COMMITs, FAILs */
	int prepares, commits, fails;
};

struct cluster {
	struct sim *sim;
	struct mnode nodes[NNODES];
	struct storage_table_meta *meta;  /* id 1: the data */
	struct storage_table_meta *meta2; /* id 2: an empty table */
	bool down[NNODES];
	uint64_t fail_wider_than; /* scans of wider ranges fail; 0: never */
	struct seg_event ev[MAX_DONE];
	size_t nev;
	/* tables each node's scheduler sees */
	const char *tables[2];
	int64_t gc_grace[2];
	bool time_window[2]; /* TimeWindowCompactionStrategy */
	size_t ntables;
};

/* ---- in-memory store (as in repair_cluster.c) ---------------------------- */

static int mem_apply(void *s, const struct storage_mutation *m,
		     storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	mem_store_apply(&n->store, m);
	done(arg, 0, ERR_NONE);
	return 0;
}

static void mem_scan(void *s, const uint8_t table_id[16], int64_t start,
		     int64_t end, repair_scan_each_fn each,
		     storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	if (memcmp(table_id, n->c->meta->id, 16)) {
		done(arg, 0, ERR_NONE); /* the other table: empty */
		return;
	}
	if (n->c->fail_wider_than &&
	    (uint64_t)end - (uint64_t)start > n->c->fail_wider_than) {
		err_set(ERR_IO, "injected: range too wide");
		done(arg, -1, ERR_IO);
		return;
	}
	if (mem_store_scan(&n->store, start, end, each, arg) != 0) {
		done(arg, -1, err_code());
		return;
	}
	done(arg, 0, ERR_NONE);
}

static const struct storage_table_meta *mem_meta(void *s,
						 const uint8_t table_id[16])
{
	struct mnode *n = s;
	return storage_table_meta_ref(memcmp(table_id, n->c->meta->id, 16)
					      ? n->c->meta2
					      : n->c->meta);
}

/* Incremental sessions over the same data (the store does not keep
 * repair states: they are counted, and every partition in the ranges is
 * "pending"). */
static void mem_prepare(void *s, const uint8_t table_id[16],
			const struct storage_token_range *r, size_t n,
			const uint8_t session[16], uint64_t *marked,
			storage_done_fn done, void *arg)
{
	struct mnode *m = s;
	(void)table_id, (void)r, (void)n, (void)session;
	m->prepares++;
	*marked = 1;
	done(arg, 0, ERR_NONE);
}

static void mem_finish(void *s, const uint8_t table_id[16],
		       const uint8_t session[16], int64_t repaired_at,
		       uint64_t *count, storage_done_fn done, void *arg)
{
	struct mnode *m = s;
	(void)table_id, (void)session;
	if (repaired_at)
		m->commits++;
	else
		m->fails++;
	*count = 1;
	done(arg, 0, ERR_NONE);
}

static void mem_scan_pending(void *s, const uint8_t table_id[16],
			     const uint8_t session[16], int64_t start,
			     int64_t end, repair_scan_each_fn each,
			     storage_done_fn done, void *arg)
{
	(void)session;
	mem_scan(s, table_id, start, end, each, done, arg);
}

static void mem_apply_pending(void *s, const uint8_t table_id[16],
			      const uint8_t session[16],
			      struct storage_mutation **m, size_t n,
			      storage_done_fn done, void *arg)
{
	struct mnode *x = s;
	(void)table_id, (void)session;
	for (size_t i = 0; i < n; i++) {
		mem_store_apply(&x->store, m[i]);
		storage_mutation_delete(m[i]);
	}
	free(m);
	done(arg, 0, ERR_NONE);
}

static const struct repair_store_ops mem_ops = {
	.apply = mem_apply,
	.scan = mem_scan,
	.meta = mem_meta,
	.prepare = mem_prepare,
	.finish = mem_finish,
	.scan_pending = mem_scan_pending,
	.apply_pending = mem_apply_pending,
};

/* ---- the scheduler's view of the node ------------------------------------ */

/* Node i's vnode tokens: 12 tokens spread over the ring, interleaved. */
static int64_t token_of(int node, int v)
{
	int k = v * NNODES + node; /* 0..11 in ring order */
	uint64_t base = (uint64_t)(INT64_MIN / 12 * 11);
	return (int64_t)(base + (uint64_t)k * (uint64_t)(INT64_MAX / 6));
}

static int ops_tables(void *arg, struct repair_sched_table_info **out,
		      size_t *n)
{
	struct mnode *m = arg;
	struct cluster *c = m->c;
	struct repair_sched_table_info *v = calloc(c->ntables, sizeof(*v));
	ck_assert_ptr_nonnull(v);
	for (size_t t = 0; t < c->ntables; t++) {
		snprintf(v[t].name, sizeof(v[t].name), "%s", c->tables[t]);
		v[t].id[0] = (uint8_t)(t + 1);
		v[t].gc_grace_seconds = c->gc_grace[t];
		v[t].time_window = c->time_window[t];
		v[t].partitions = m->store.nparts / NNODES;
		for (int k = 0; k < NVNODES; k++) {
			/* the range ending at this node's token */
			int idx = k * NNODES + m->idx;
			int64_t left = idx ? token_of((idx - 1) % NNODES,
						      (idx - 1) / NNODES)
					   : token_of(NNODES - 1, NVNODES - 1);
			token_range_list_push(
				&v[t].ranges,
				token_range_make(left, token_of(m->idx, k)));
		}
	}
	*out = v;
	*n = c->ntables;
	return 0;
}

static int ops_replicas(void *arg, const uint8_t id[16], int64_t token,
			struct inet_addr *out, size_t cap, size_t *n)
{
	struct mnode *m = arg;
	(void)id, (void)token;
	ck_assert_uint_ge(cap, NNODES);
	/* the segment's primary (this node) first, then the others */
	*n = 0;
	out[(*n)++] = m->addr;
	for (int i = 0; i < NNODES; i++)
		if (i != m->idx)
			out[(*n)++] = m->c->nodes[i].addr;
	return 0;
}

static bool ops_alive(void *arg, const struct inet_addr *ep)
{
	struct mnode *m = arg;
	for (int i = 0; i < NNODES; i++)
		if (inet_addr_eq(&m->c->nodes[i].addr, ep))
			return !m->c->down[i];
	return false;
}

static void ops_save(void *arg, uint8_t *data, size_t len)
{
	struct mnode *m = arg;
	buf_clear(&m->saved);
	ck_assert_int_eq(buf_append(&m->saved, data, len), 0);
	free(data);
}

static void ops_segment_done(void *arg, const char *table, int64_t start,
			     int64_t end, uint64_t started_us,
			     const char *error, bool postponed)
{
	struct mnode *m = arg;
	struct cluster *c = m->c;
	ck_assert_uint_lt(c->nev, MAX_DONE);
	struct seg_event *e = &c->ev[c->nev++];
	e->node = m->idx;
	snprintf(e->table, sizeof(e->table), "%s", table);
	e->start = start;
	e->end = end;
	e->started_us = started_us;
	e->done_us = env_mono_us(m->env);
	e->done_wall_us = env_wall_us(m->env);
	e->ok = !error;
	e->postponed = postponed;
}

static const struct repair_sched_ops sched_ops = {
	.tables = ops_tables,
	.replicas = ops_replicas,
	.is_alive = ops_alive,
	.save = ops_save,
	.segment_done = ops_segment_done,
};

/* ---- the cluster --------------------------------------------------------- */

static void deliver(void *arg, const struct inet_addr *from, uint32_t verb,
		    const uint8_t *msg, size_t len)
{
	struct mnode *n = arg;
	repair_receive(n->repair, from, verb, msg, len);
}

static bool repair_alive(void *arg, const struct inet_addr *ep)
{
	return ops_alive(arg, ep);
}

static void sched_options(struct repair_sched_options *o)
{
	repair_sched_options_default(o);
	o->intensity = 0.5;
	o->segments_per_node = 12;
	o->initial_delay_ms = 1000;
	o->check_interval_ms = 100;
	o->retry_delay_ms = 200;
	o->segment_timeout_ms = 20000;
}

/* Starts node i's process: env, repair, scheduler (state from its disk). */
static void node_start(struct cluster *c, int i,
		       const struct repair_sched_options *o)
{
	struct mnode *m = &c->nodes[i];
	m->env = sim_env_new(c->sim, &m->addr);
	env_set_receiver(m->env, deliver, m);
	struct repair_options ro;
	repair_options_default(&ro);
	ro.self = m->addr;
	ro.validate_timeout_ms = 5000;
	ro.request_timeout_ms = 5000;
	ro.is_alive = repair_alive;
	ro.alive_arg = m;
	m->repair = repair_new(m->env, &ro, &mem_ops, m);
	ck_assert_ptr_nonnull(m->repair);
	m->sched = repair_sched_new(m->env, m->repair, o, &sched_ops, m);
	ck_assert_ptr_nonnull(m->sched);
	if (m->saved.len)
		ck_assert_msg(repair_sched_load(m->sched, m->saved.data,
						m->saved.len) == 0,
			      "%s", err_msg());
	repair_sched_start(m->sched);
}

/* The process dies: nothing more is saved (the disk keeps the last
 * state written). */
static void node_crash(struct cluster *c, int i)
{
	struct mnode *m = &c->nodes[i];
	struct buf disk = m->saved;
	m->saved = (struct buf){0};
	sim_env_kill(c->sim, m->env);
	repair_sched_delete(m->sched);
	repair_delete(m->repair);
	buf_free(&m->saved);
	m->saved = disk;
}

static struct cluster *cluster_new(const struct repair_sched_options *o)
{
	struct cluster *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->sim = sim_new(g_seed, 1700000000000000LL);
	sim_net_set_latency(c->sim, 1000, 1000);
	uint8_t id[16] = {1};
	c->meta = storage_table_meta_new("ks", "t", id);
	struct storage_type text = {.kind = STORAGE_TYPE_TEXT};
	storage_table_meta_add_column(
		c->meta, "pk", STORAGE_COLUMN_PARTITION_KEY, &text, false);
	storage_table_meta_add_column(c->meta, "v", STORAGE_COLUMN_REGULAR,
				      &text, false);
	uint8_t id2[16] = {2};
	c->meta2 = storage_table_meta_new("ks", "e", id2);
	storage_table_meta_add_column(
		c->meta2, "pk", STORAGE_COLUMN_PARTITION_KEY, &text, false);
	c->tables[0] = "ks.t";
	c->gc_grace[0] = 864000;
	c->ntables = 1;
	for (int i = 0; i < NNODES; i++) {
		struct mnode *m = &c->nodes[i];
		m->c = c;
		m->store.meta = c->meta;
		m->idx = i;
		m->addr = sim_node_addr(i);
		if (o)
			node_start(c, i, o);
	}
	return c;
}

static void cluster_delete(struct cluster *c)
{
	for (int i = 0; i < NNODES; i++) {
		struct mnode *m = &c->nodes[i];
		repair_sched_delete(m->sched);
		repair_delete(m->repair);
		buf_free(&m->saved);
		mem_store_clear(&m->store);
	}
	sim_delete(c->sim);
	storage_table_meta_delete(c->meta);
	storage_table_meta_delete(c->meta2);
	free(c);
}

static void noop_done(void *arg, int status, enum err_code code)
{
	(void)arg, (void)code;
	ck_assert_int_eq(status, 0);
}

/* Key k = value at ts, on the nodes of mask. */
static void put(struct cluster *c, int mask, int k, int64_t ts)
{
	char key[32], v[64];
	snprintf(key, sizeof(key), "key%05d", k);
	snprintf(v, sizeof(v), "value %d at %lld", k, (long long)ts);
	struct storage_mutation *m =
		storage_mutation_new(c->meta, (uint8_t *)key, strlen(key));
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(storage_mutation_put(m, 1, NULL, 0, (uint8_t *)v,
					      strlen(v), ts, 0, 1700000000),
			 0);
	for (int i = 0; i < NNODES; i++)
		if (mask & (1 << i))
			mem_apply(&c->nodes[i], m, noop_done, NULL);
	storage_mutation_delete(m);
}

/* 200 keys on all; 20 only on node 0 and 1; 10 newer only on node 2. */
static void diverge(struct cluster *c)
{
	for (int k = 0; k < 200; k++)
		put(c, 7, k, 1000);
	for (int k = 200; k < 220; k++)
		put(c, 3, k, 1000);
	for (int k = 0; k < 10; k++)
		put(c, 4, k * 7, 2000);
}

static bool converged(struct cluster *c)
{
	for (int i = 1; i < NNODES; i++)
		if (!mem_store_same(&c->nodes[0].store, &c->nodes[i].store))
			return false;
	return true;
}

static struct repair_sched_table_status status(struct cluster *c, int i,
					       size_t t)
{
	struct repair_sched_table_status st;
	ck_assert_uint_gt(repair_sched_table_count(c->nodes[i].sched), t);
	repair_sched_table_get(c->nodes[i].sched, t, &st);
	return st;
}

static bool all_cycled(void *arg)
{
	struct cluster *c = arg;
	for (int i = 0; i < NNODES; i++)
		if (repair_sched_table_count(c->nodes[i].sched) == 0 ||
		    status(c, i, 0).cycles < 1)
			return false;
	return true;
}

static int count(struct cluster *c, int node, bool ok, bool postponed)
{
	int n = 0;
	for (size_t i = 0; i < c->nev; i++)
		n += c->ev[i].node == node && c->ev[i].ok == ok &&
		     (ok || c->ev[i].postponed == postponed);
	return n;
}

/* ---- tests --------------------------------------------------------------- */

START_TEST(a_cycle_completes_on_every_node_one_segment_at_a_time)
{
	struct repair_sched_options o;
	sched_options(&o);
	struct cluster *c = cluster_new(&o);
	diverge(c);
	ck_assert(!converged(c));
	ck_assert_msg(sim_run_until(c->sim, all_cycled, c, 600000000ULL),
		      "seed %llu", (unsigned long long)g_seed);
	ck_assert(converged(c));
	int postponed = 0;
	for (int i = 0; i < NNODES; i++) {
		struct repair_sched_table_status st = status(c, i, 0);
		ck_assert_uint_eq(st.cycles, 1);
		ck_assert_uint_eq(st.failures, 0);
		ck_assert(!st.at_risk);
		ck_assert_int_ne(st.last_end_us, 0);
		/* 12 segments per node over 4 equal ranges */
		ck_assert_int_eq(count(c, i, true, false), 12);
		ck_assert_int_eq(count(c, i, false, false), 0);
		postponed += count(c, i, false, true);
		ck_assert_int_eq(c->nodes[i].prepares, 0); /* full: default */
	}
	/* RF 3 of 3: every replica set is the whole cluster, so no two
	 * successful segments overlap in time */
	for (size_t a = 0; a < c->nev; a++)
		for (size_t b = a + 1; b < c->nev; b++) {
			struct seg_event *x = &c->ev[a], *y = &c->ev[b];
			if (!x->ok || !y->ok)
				continue;
			ck_assert_msg(x->done_us <= y->started_us ||
					      y->done_us <= x->started_us,
				      "segments of nodes %d and %d overlap "
				      "(seed %llu)",
				      x->node, y->node,
				      (unsigned long long)g_seed);
		}
	ck_assert_int_gt(postponed, 0); /* they did contend */
	cluster_delete(c);
}
END_TEST

static bool node0_midway(void *arg)
{
	struct cluster *c = arg;
	return repair_sched_table_count(c->nodes[0].sched) &&
	       status(c, 0, 0).done >= 4;
}

static bool node0_cycled(void *arg)
{
	struct cluster *c = arg;
	return repair_sched_table_count(c->nodes[0].sched) &&
	       status(c, 0, 0).cycles >= 1;
}

START_TEST(a_restart_resumes_the_cycle_at_the_next_unfinished_segment)
{
	struct repair_sched_options o;
	sched_options(&o);
	struct cluster *c = cluster_new(&o);
	diverge(c);
	ck_assert(sim_run_until(c->sim, node0_midway, c, 600000000ULL));
	struct repair_sched_table_status before = status(c, 0, 0);
	ck_assert_uint_lt(before.done, before.segments);
	int ok_before = count(c, 0, true, false);
	node_crash(c, 0);
	c->down[0] = true;
	sim_run_for(c->sim, 3000000);
	c->down[0] = false;
	node_start(c, 0, &o);
	/* the same cycle, with what was saved done */
	struct repair_sched_table_status after = status(c, 0, 0);
	ck_assert_int_eq(after.cycle_start_us, before.cycle_start_us);
	ck_assert_uint_eq(after.segments, before.segments);
	ck_assert_uint_ge(after.done, (size_t)ok_before - 1);
	ck_assert_uint_le(after.done, before.done);
	ck_assert(sim_run_until(c->sim, node0_cycled, c, 600000000ULL));
	ck_assert(sim_run_until(c->sim, all_cycled, c, 600000000ULL));
	/* each segment succeeded once, give or take the one in flight */
	int ok = count(c, 0, true, false);
	ck_assert_int_ge(ok, 12);
	ck_assert_int_le(ok, 13);
	ck_assert_uint_eq(status(c, 0, 0).cycles, 1);
	ck_assert(converged(c));
	cluster_delete(c);
}
END_TEST

START_TEST(a_failing_segment_is_retried_then_split)
{
	struct repair_sched_options o;
	sched_options(&o);
	o.segments_per_node = 4; /* one segment per vnode range */
	o.segment_retries = 2;
	struct cluster *c = cluster_new(&o);
	diverge(c);
	/* scans wider than a quarter of a vnode range fail everywhere */
	c->fail_wider_than = (uint64_t)(INT64_MAX / 6) / 4 + 1000;
	ck_assert_msg(sim_run_until(c->sim, all_cycled, c, 3600000000ULL),
		      "seed %llu", (unsigned long long)g_seed);
	ck_assert(converged(c));
	for (int i = 0; i < NNODES; i++) {
		struct repair_sched_table_status st = status(c, i, 0);
		ck_assert_uint_eq(st.cycles, 1);
		ck_assert_int_ge(count(c, i, false, false), 2 * 4);
		/* each range: split twice (in 2, then each half in 2) */
		ck_assert_int_eq(count(c, i, true, false), 16);
	}
	cluster_delete(c);
}
END_TEST

START_TEST(pause_stops_a_node_and_resume_continues)
{
	struct repair_sched_options o;
	sched_options(&o);
	struct cluster *c = cluster_new(&o);
	diverge(c);
	ck_assert_int_eq(repair_sched_pause(c->nodes[1].sched, NULL, true), 0);
	sim_run_for(c->sim, 60000000); /* a minute */
	ck_assert_int_eq(count(c, 1, true, false), 0);
	ck_assert_uint_eq(status(c, 0, 0).cycles, 1);
	ck_assert_uint_eq(status(c, 2, 0).cycles, 1);
	ck_assert(status(c, 1, 0).paused);
	ck_assert_uint_eq(status(c, 1, 0).done, 0);
	/* a table pause survives a crash (it is in the state) */
	ck_assert_int_eq(repair_sched_pause(c->nodes[1].sched, NULL, false), 0);
	ck_assert_int_eq(repair_sched_pause(c->nodes[1].sched, "ks", true), 0);
	node_crash(c, 1);
	node_start(c, 1, &o);
	sim_run_for(c->sim, 30000000);
	ck_assert_int_eq(count(c, 1, true, false), 0);
	ck_assert(status(c, 1, 0).paused);
	ck_assert_int_eq(repair_sched_pause(c->nodes[1].sched, "ks.t", false),
			 0);
	ck_assert(sim_run_until(c->sim, all_cycled, c, 600000000ULL));
	ck_assert(converged(c));
	cluster_delete(c);
}
END_TEST

static bool node0_any_done(void *arg)
{
	struct cluster *c = arg;
	return repair_sched_table_count(c->nodes[0].sched) == 2 &&
	       (status(c, 0, 0).cycles || status(c, 0, 1).cycles);
}

START_TEST(the_earliest_deadline_goes_first_and_late_tables_are_at_risk)
{
	struct repair_sched_options o;
	sched_options(&o);
	o.intensity = 0.001; /* sleeps 999x each segment's duration */
	struct cluster *c = cluster_new(NULL);
	c->tables[0] = "ks.long";
	c->gc_grace[0] = 864000;
	c->tables[1] = "ks.short";
	c->gc_grace[1] = 20; /* deadline 14 s after first seen */
	c->ntables = 2;
	node_start(c, 0, &o); /* node 0 alone schedules */
	for (int i = 1; i < NNODES; i++) {
		struct mnode *m = &c->nodes[i];
		m->env = sim_env_new(c->sim, &m->addr);
		env_set_receiver(m->env, deliver, m);
		struct repair_options ro;
		repair_options_default(&ro);
		ro.self = m->addr;
		m->repair = repair_new(m->env, &ro, &mem_ops, m);
	}
	diverge(c);
	bool seen_risk = false;
	while (!node0_any_done(c)) {
		ck_assert(sim_step(c->sim));
		if (repair_sched_table_count(c->nodes[0].sched) < 2)
			continue;
		struct repair_sched_table_status st = status(c, 0, 1);
		ck_assert_str_eq(st.name, "ks.short");
		int64_t now = env_wall_us(c->nodes[0].env);
		/* predicted late while the deadline is still ahead */
		seen_risk = seen_risk || (st.at_risk && now < st.deadline_us);
		ck_assert(!status(c, 0, 0).at_risk);
	}
	ck_assert(seen_risk);
	/* ks.short (deadline in 14 s) completed before ks.long began */
	ck_assert_uint_eq(status(c, 0, 1).cycles, 1);
	ck_assert_uint_eq(status(c, 0, 0).done, 0);
	for (size_t i = 0; i < c->nev; i++)
		ck_assert_str_eq(c->ev[i].table, "ks.short");
	cluster_delete(c);
}
END_TEST

/* 1700000000 s is 2023-11-14 22:13:20 UTC */
#define WALL(h, m) ((1700006400LL - 86400 + ((h)*60 + (m)) * 60) * 1000000)

START_TEST(segments_start_only_inside_windows_unless_run_now)
{
	struct repair_sched_options o;
	sched_options(&o);
	struct repair_sched_window w;
	ck_assert_int_eq(repair_sched_window_parse("23:00-23:30", &w), 0);
	o.windows = &w;
	o.nwindows = 1;
	struct cluster *c = cluster_new(&o);
	diverge(c);
	sim_run_for(c->sim, 40 * 60 * 1000000ULL); /* to 22:53 */
	ck_assert_uint_eq(c->nev, 0);
	ck_assert_uint_gt(status(c, 0, 0).segments, 0); /* planned, waiting */
	ck_assert(sim_run_until(c->sim, all_cycled, c, 600000000ULL));
	ck_assert(converged(c));
	for (size_t i = 0; i < c->nev; i++)
		ck_assert_int_ge(c->ev[i].done_wall_us, WALL(23, 0));
	/* after 23:30: the window is closed, run-now goes anyway */
	sim_run_for(c->sim, 36 * 60 * 1000000ULL);
	int64_t now = env_wall_us(c->nodes[0].env);
	ck_assert_int_ge(now, WALL(23, 30));
	ck_assert_int_eq(repair_sched_run_now(c->nodes[0].sched, NULL), 1);
	sim_run_for(c->sim, 60 * 1000000ULL);
	ck_assert_uint_eq(status(c, 0, 0).cycles, 2);
	ck_assert_uint_eq(status(c, 1, 0).cycles, 1);
	cluster_delete(c);
}
END_TEST

static bool node0_running(void *arg)
{
	struct cluster *c = arg;
	return repair_sched_running(c->nodes[0].sched);
}

START_TEST(a_segment_past_its_timeout_is_cancelled_and_retried)
{
	struct repair_sched_options o;
	sched_options(&o);
	o.segment_timeout_ms = 1000; /* before the session's own 5 s */
	o.segment_retries = 2;
	struct cluster *c = cluster_new(&o);
	diverge(c);
	/* node 2 hears everything and answers nothing */
	sim_net_cut(c->sim, &c->nodes[2].addr, NULL, true);
	sim_run_for(c->sim, 30 * 1000000ULL);
	int timeouts = 0;
	for (size_t i = 0; i < c->nev; i++) {
		ck_assert(!c->ev[i].ok);
		if (!c->ev[i].postponed) {
			timeouts++;
			ck_assert_uint_ge(c->ev[i].done_us -
						  c->ev[i].started_us,
					  1000000);
		}
	}
	ck_assert_int_gt(timeouts, 4);
	/* what repair_admin list shows: the running segment */
	ck_assert(sim_run_until(c->sim, node0_running, c, 600000000ULL));
	struct repair_sched_segment g;
	ck_assert_int_eq(repair_sched_get_running(c->nodes[0].sched, &g), 1);
	ck_assert_str_eq(g.name, status(c, 0, 0).name);
	ck_assert_int_ne(g.start, g.end);
	ck_assert_uint_lt(g.running_us, 1000000);
	uint64_t splits = 0;
	for (int i = 0; i < NNODES; i++) {
		splits += status(c, i, 0).splits;
		ck_assert_uint_eq(status(c, i, 0).done, 0);
	}
	ck_assert_uint_gt(splits, 0); /* it kept failing: split */
	sim_net_heal(c->sim);
	ck_assert(sim_run_until(c->sim, all_cycled, c, 600000000ULL));
	ck_assert(converged(c));
	if (!repair_sched_running(c->nodes[0].sched))
		ck_assert_int_eq(
			repair_sched_get_running(c->nodes[0].sched, &g), 0);
	cluster_delete(c);
}
END_TEST

START_TEST(per_table_settings_override_the_section)
{
	struct repair_sched_options o;
	sched_options(&o);
	char names[2][REPAIR_SCHED_NAME_MAX];
	struct repair_sched_tuning tu[2];
	ck_assert_int_eq(repair_sched_tuning_parse("ks.off enabled=false",
						   names[0], sizeof(names[0]),
						   &tu[0]),
			 0);
	ck_assert_int_eq(repair_sched_tuning_parse("ks.t segments_per_node=5",
						   names[1], sizeof(names[1]),
						   &tu[1]),
			 0);
	o.tuning_names = (const char(*)[REPAIR_SCHED_NAME_MAX])names;
	o.tunings = tu;
	o.ntunings = 2;
	struct cluster *c = cluster_new(NULL);
	c->tables[0] = "ks.t";
	c->tables[1] = "ks.off";
	c->gc_grace[1] = 864000;
	c->ntables = 2;
	for (int i = 0; i < NNODES; i++)
		node_start(c, i, &o);
	diverge(c);
	ck_assert(sim_run_until(c->sim, all_cycled, c, 600000000ULL));
	ck_assert(converged(c));
	for (int i = 0; i < NNODES; i++) {
		/* 5 over 4 equal ranges: 2 each (rounded up) */
		ck_assert_int_eq(count(c, i, true, false), 8);
		struct repair_sched_table_status off = status(c, i, 1);
		ck_assert_str_eq(off.name, "ks.off");
		ck_assert(!off.enabled);
		ck_assert_uint_eq(off.segments, 0);
	}
	for (size_t i = 0; i < c->nev; i++)
		ck_assert_str_eq(c->ev[i].table, "ks.t");
	cluster_delete(c);
}
END_TEST

static void count_local(void *arg, const struct repair_local_info *l)
{
	((int *)arg)[l->state]++;
}

/* incremental=true: the table's segments run incremental sessions (each
 * replica prepares, then commits); the others stay full. */
START_TEST(a_table_set_incremental_repairs_incrementally)
{
	struct repair_sched_options o;
	sched_options(&o);
	char names[1][REPAIR_SCHED_NAME_MAX];
	struct repair_sched_tuning tu[1];
	ck_assert_int_eq(repair_sched_tuning_parse("ks.t incremental=true",
						   names[0], sizeof(names[0]),
						   &tu[0]),
			 0);
	ck_assert_int_eq(tu[0].incremental, 1);
	struct repair_sched_tuning bad;
	ck_assert_int_eq(repair_sched_tuning_parse("ks.t incremental=yes",
						   names[0], sizeof(names[0]),
						   &bad),
			 -1);
	o.tuning_names = (const char(*)[REPAIR_SCHED_NAME_MAX])names;
	o.tunings = tu;
	o.ntunings = 1;
	struct cluster *c = cluster_new(NULL);
	for (int i = 0; i < NNODES; i++)
		node_start(c, i, &o);
	diverge(c);
	ck_assert(sim_run_until(c->sim, all_cycled, c, 600000000ULL));
	ck_assert(converged(c));
	int segs = 0;
	for (int i = 0; i < NNODES; i++)
		segs += count(c, i, true, false);
	for (int i = 0; i < NNODES; i++) {
		struct mnode *m = &c->nodes[i];
		/* every replica of every segment (RF 3: all nodes) commits;
		 * a segment postponed by contention (its replicas busy with
		 * another node's) prepared and then failed */
		ck_assert_int_ge(m->commits, segs);
		ck_assert_int_eq(m->commits + m->fails, m->prepares);
		/* and no session is left pending */
		int st[6] = {0};
		repair_local_list(m->repair, count_local, st);
		ck_assert_int_eq(st[0] + st[1] + st[2] + st[3], 0);
		ck_assert_int_gt(st[REPAIR_LOCAL_FINALIZED], 0);
	}
	cluster_delete(c);
}
END_TEST

/* incremental=true on a TimeWindowCompactionStrategy table: refused (as
 * the repair command refuses it without --force-incremental), its
 * segments run full repairs; the cycle still completes and converges. */
START_TEST(a_twcs_table_set_incremental_repairs_fully)
{
	struct repair_sched_options o;
	sched_options(&o);
	char names[1][REPAIR_SCHED_NAME_MAX];
	struct repair_sched_tuning tu[1];
	ck_assert_int_eq(repair_sched_tuning_parse("ks.t incremental=true",
						   names[0], sizeof(names[0]),
						   &tu[0]),
			 0);
	o.tuning_names = (const char(*)[REPAIR_SCHED_NAME_MAX])names;
	o.tunings = tu;
	o.ntunings = 1;
	struct cluster *c = cluster_new(NULL);
	c->time_window[0] = true;
	for (int i = 0; i < NNODES; i++)
		node_start(c, i, &o);
	diverge(c);
	ck_assert(sim_run_until(c->sim, all_cycled, c, 600000000ULL));
	ck_assert(converged(c));
	for (int i = 0; i < NNODES; i++) {
		struct mnode *m = &c->nodes[i];
		ck_assert_int_eq(m->prepares, 0);
		ck_assert_int_eq(m->commits, 0);
		int st[6] = {0};
		repair_local_list(m->repair, count_local, st);
		for (int k = 0; k < 6; k++)
			ck_assert_int_eq(st[k], 0);
	}
	cluster_delete(c);
}
END_TEST

int main(void)
{
	g_seed = test_seed(0x5c4ed);
	Suite *s = suite_create("repair_sched_sim");
	TCase *tc = tcase_create("scheduler");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc,
		       a_cycle_completes_on_every_node_one_segment_at_a_time);
	tcase_add_test(tc, a_table_set_incremental_repairs_incrementally);
	tcase_add_test(tc, a_twcs_table_set_incremental_repairs_fully);
	tcase_add_test(
		tc, a_restart_resumes_the_cycle_at_the_next_unfinished_segment);
	tcase_add_test(tc, a_failing_segment_is_retried_then_split);
	tcase_add_test(tc, pause_stops_a_node_and_resume_continues);
	tcase_add_test(
		tc,
		the_earliest_deadline_goes_first_and_late_tables_are_at_risk);
	tcase_add_test(tc, segments_start_only_inside_windows_unless_run_now);
	tcase_add_test(tc, a_segment_past_its_timeout_is_cancelled_and_retried);
	tcase_add_test(tc, per_table_settings_override_the_section);
	suite_add_tcase(s, tc);
	return test_run(s);
}
