/* Paxos (replication/paxos.h) in the simulator: many clients doing CAS and
 * SERIAL reads on a few registers through random coordinators, over lossy,
 * slow, reordering and partitioned links, with nodes killed (their
 * in-flight requests lost: the outcome unknown), restarted and paused.
 * Every schedule's per-register history must be linearizable
 * (tests/sim/lincheck.h); a proposer that skips completing in-progress
 * proposals (paxos_options.test_skip_in_progress) must be caught.
 *
 * CASSINI_SEED picks the first schedule's seed; CASSINI_PAXOS_SCHEDULES
 * how many schedules the main test runs (default 3000). */
#include "common/err.h"
#include "replication/paxos.h"
#include "replication/paxos_internal.h"
#include "tests/lib/testutil.h"
#include "tests/sim/lincheck.h"
#include "tests/sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define START_WALL 1700000000000000LL
#define MAXN       5
#define NKEYS      2
#define MAXC       8
#define MAXH       256

static uint64_t seed;

/* ---- a node: env, paxos, and a disk that survives restarts ------------- */

struct reg {
	bool has;
	int64_t val;
	struct paxos_ballot ts;
	struct paxos_state st;
};

struct world;

struct pnode {
	struct world *w;
	int idx;
	struct inet_addr addr;
	struct env *env;
	struct paxos *px;
	bool up;
	struct reg disk[NKEYS];
	/* A slow disk: loads of the acceptor state finish this much later
	 * (0: at once), so its own promise reaches a proposer after the
	 * others'. One load in flight (the acceptor serialises per key and
	 * the cases using it touch one key). */
	uint64_t load_delay_us;
	struct env_timer *load_timer;
	paxos_load_fn load_done;
	void *load_arg;
	int load_key;
	/* the paxos repair of moving ranges (world.with_cleanup) */
	struct paxos_cleanup *pcl;
	paxos_cleanup_local_done pcl_done;
	void *pcl_darg;
	struct paxos_request pcl_rq;
	struct opctx *pcl_op;
	struct client *pcl_client;
};

struct client;

struct opctx {
	struct client *c;
	int key;
	size_t h; /* history index */
	int coord;
	bool read;
	bool live;
};

struct client {
	struct world *w;
	int id;
	int remaining;
	int64_t seen[NKEYS];
	struct opctx op;
	struct env_timer *think;
	int seq;
};

struct world {
	struct sim *sim;
	int n, needed, commit_bf;
	bool broken;
	struct pnode nodes[MAXN];
	struct inet_addr addrs[MAXN];
	struct env *cenv;
	struct env_timer *fault;
	struct client cl[MAXC];
	int ncl, busy;
	struct lin_op hist[NKEYS][MAXH];
	size_t nh[NKEYS];
	uint64_t fault_every_us;
	int kills, unknowns, applied, not_applied, reads;
	/* a range movement: the participants of k0 while it moves (natural
	 * and pending, needing quorum(natural) + pending) */
	bool with_cleanup;
	int64_t purge_window_us; /* paxos_options' */
	struct inet_addr mv_reps[MAXN];
	int mv_n, mv_needed;
};

static int key_of(struct slice key)
{
	ck_assert_uint_eq(key.len, 2);
	int k = key.ptr[1] - '0';
	ck_assert(k >= 0 && k < NKEYS);
	return k;
}

static void load_fire(void *arg)
{
	struct pnode *n = arg;
	paxos_load_fn done = n->load_done;
	n->load_done = NULL;
	done(n->load_arg, 0, &n->disk[n->load_key].st);
}

static void st_load(void *arg, struct slice key, paxos_load_fn done, void *darg)
{
	struct pnode *n = arg;
	if (n->load_delay_us && n->load_timer) {
		ck_assert_ptr_null(n->load_done);
		n->load_done = done;
		n->load_arg = darg;
		n->load_key = key_of(key);
		env_timer_arm(n->env, n->load_timer, n->load_delay_us);
		return;
	}
	done(darg, 0, &n->disk[key_of(key)].st);
}

static void st_save(void *arg, struct slice key, const struct paxos_state *st,
		    paxos_done_fn done, void *darg)
{
	struct pnode *n = arg;
	struct reg *r = &n->disk[key_of(key)];
	struct paxos_state c;
	ck_assert_int_eq(paxos_state_copy(&c, st), 0);
	/* through the stored form, as system.paxos would keep it */
	struct buf enc = {0};
	ck_assert_int_eq(paxos_state_encode(&c, &enc), 0);
	paxos_state_free(&c);
	paxos_state_free(&r->st);
	ck_assert_int_eq(paxos_state_decode(buf_slice(&enc), &r->st), 0);
	buf_free(&enc);
	done(darg, 0);
}

/* A register's bytes: be64 value | ballot uuid; empty: no value. */
static void reg_encode(const struct reg *r, struct buf *out)
{
	if (!r->has)
		return;
	uint8_t b[24];
	be64_store(b, (uint64_t)r->val);
	paxos_ballot_to_uuid(&r->ts, b + 8);
	ck_assert_int_eq(buf_append(out, b, 24), 0);
}

static void reg_decode(struct slice s, struct reg *r)
{
	memset(r, 0, sizeof(*r));
	if (s.len == 0)
		return;
	ck_assert_uint_eq(s.len, 24);
	r->has = true;
	r->val = (int64_t)be64_load(s.ptr);
	ck_assert_int_eq(paxos_ballot_from_uuid(s.ptr + 8, &r->ts), 0);
}

static void st_read(void *arg, struct slice key, paxos_read_fn done, void *darg)
{
	struct pnode *n = arg;
	struct buf b = {0};
	reg_encode(&n->disk[key_of(key)], &b);
	done(darg, 0, buf_slice(&b));
	buf_free(&b);
}

static void st_apply(void *arg, struct slice key, const struct paxos_ballot *b,
		     struct slice update, paxos_done_fn done, void *darg)
{
	struct pnode *n = arg;
	struct reg *r = &n->disk[key_of(key)];
	ck_assert_uint_eq(update.len, 8);
	if (!r->has || paxos_ballot_cmp(b, &r->ts) > 0) {
		r->has = true;
		r->val = (int64_t)be64_load(update.ptr);
		r->ts = *b;
	}
	done(darg, 0);
}

static const struct paxos_store_ops store_ops = {
	.load = st_load,
	.save = st_save,
	.read = st_read,
	.apply = st_apply,
};

static void deliver(void *arg, const struct inet_addr *from, uint32_t verb,
		    const uint8_t *msg, size_t len)
{
	struct pnode *n = arg;
	if (verb == PAXOS_VERB_CLEANUP || verb == PAXOS_VERB_CLEANUP_RSP) {
		if (n->pcl)
			paxos_cleanup_receive(n->pcl, from, verb, msg, len);
		return;
	}
	paxos_receive(n->px, from, verb, msg, len);
}

static void pcl_local(void *arg, const char *keyspace,
		      const struct paxos_range *r, size_t nr,
		      paxos_cleanup_local_done done, void *darg);

static void node_start(struct pnode *n)
{
	struct world *w = n->w;
	n->env = sim_env_new(w->sim, &n->addr);
	env_set_receiver(n->env, deliver, n);
	struct paxos_options o;
	paxos_options_default(&o);
	o.self = n->addr;
	o.write_timeout_ms = 200;
	o.contention_timeout_ms = 1000;
	o.test_skip_in_progress = w->broken;
	o.purge_window_us = w->purge_window_us;
	n->px = paxos_new(n->env, &o, &store_ops, n);
	ck_assert_ptr_nonnull(n->px);
	if (w->with_cleanup) {
		n->pcl = paxos_cleanup_new(n->env, &n->addr, pcl_local, n);
		ck_assert_ptr_nonnull(n->pcl);
	}
	n->up = true;
}

/* A world of its own simulator on seed `s`; the caller sets its options
 * (w->n, w->needed, with_cleanup, ...) before world_start. */
static struct world *world_new(uint64_t s)
{
	struct world *w = calloc(1, sizeof(*w));
	ck_assert_ptr_nonnull(w);
	w->sim = sim_new(s, START_WALL);
	return w;
}

/* Starts `count` nodes at 127.0.107.<ip0 + k>:7000. */
static void world_start(struct world *w, int count, uint8_t ip0)
{
	for (int k = 0; k < count; k++) {
		struct pnode *n = &w->nodes[k];
		n->w = w;
		n->idx = k;
		n->addr = (struct inet_addr){
			.family = INET_V4,
			.ip = {127, 0, 107, (uint8_t)(ip0 + k)},
			.port = 7000};
		w->addrs[k] = n->addr;
		node_start(n);
	}
}

/* Frees the first `count` nodes, their disks and the simulator. */
static void world_free(struct world *w, int count)
{
	for (int k = 0; k < count; k++) {
		if (w->nodes[k].pcl)
			paxos_cleanup_delete(w->nodes[k].pcl);
		paxos_delete(w->nodes[k].px);
		for (int j = 0; j < NKEYS; j++)
			paxos_state_free(&w->nodes[k].disk[j].st);
	}
	sim_delete(w->sim);
	free(w);
}

/* ---- clients --------------------------------------------------------------
 */

static int merge(void *arg, const struct slice *reads, size_t n,
		 struct buf *out)
{
	(void)arg;
	struct reg best = {0}, r;
	for (size_t i = 0; i < n; i++) {
		reg_decode(reads[i], &r);
		if (r.has &&
		    (!best.has || paxos_ballot_cmp(&r.ts, &best.ts) > 0))
			best = r;
	}
	reg_encode(&best, out);
	return 0;
}

static int64_t value_of(struct slice cur)
{
	struct reg r;
	reg_decode(cur, &r);
	return r.has ? r.val : LIN_NULL;
}

static int decide(void *arg, const struct paxos_ballot *ballot,
		  struct slice current, struct buf *update)
{
	(void)ballot; /* the register is stamped on apply */
	struct opctx *o = arg;
	struct lin_op *op = &o->c->w->hist[o->key][o->h];
	if (o->read || value_of(current) != op->a)
		return 0;
	uint8_t b[8];
	be64_store(b, (uint64_t)op->b);
	return buf_append(update, b, 8) < 0 ? -1 : 1;
}

static void client_next(struct client *c);

static void client_end(struct client *c)
{
	c->op.live = false;
	c->w->busy--;
	if (--c->remaining > 0)
		env_timer_arm(c->w->cenv, c->think,
			      env_random(c->w->cenv) % 20000);
}

/* The op's outcome will never be known: a CAS may have happened at any time
 * after its call; a read tells nothing and leaves the history. */
static void op_unknown(struct opctx *o)
{
	struct world *w = o->c->w;
	struct lin_op *op = &w->hist[o->key][o->h];
	if (o->read) {
		op->kind = LIN_READ;
		op->res = LIN_UNKNOWN; /* dropped before checking */
	} else {
		op->res = LIN_UNKNOWN;
		w->unknowns++;
	}
	op->ret = LIN_INF;
}

static void on_done(void *arg, struct paxos_result *res)
{
	struct opctx *o = arg;
	struct client *c = o->c;
	struct world *w = c->w;
	struct lin_op *op = &w->hist[o->key][o->h];
	ck_assert_msg(res->outcome != PAXOS_FAILED, "paxos failed");
	if (res->outcome != PAXOS_OK) {
		op_unknown(o);
	} else {
		int64_t cur = value_of(buf_slice(&res->current));
		op->ret = sim_now_us(w->sim);
		if (o->read) {
			op->out = cur;
			c->seen[o->key] = cur;
			w->reads++;
		} else if (res->applied) {
			op->res = LIN_OK;
			c->seen[o->key] = op->b;
			w->applied++;
		} else {
			op->res = LIN_FAIL;
			op->out = cur;
			c->seen[o->key] = cur;
			w->not_applied++;
		}
	}
	buf_free(&res->current);
	client_end(c);
}

static void client_fire(void *arg)
{
	client_next(arg);
}

static void client_next(struct client *c)
{
	struct world *w = c->w;
	int up[MAXN], nup = 0;
	for (int i = 0; i < w->n; i++)
		if (w->nodes[i].up)
			up[nup++] = i;
	if (nup == 0) { /* nobody to talk to: try again later */
		env_timer_arm(w->cenv, c->think, 10000);
		return;
	}
	struct opctx *o = &c->op;
	o->c = c;
	o->key = (int)(env_random(w->cenv) % NKEYS);
	o->coord = up[env_random(w->cenv) % (uint64_t)nup];
	o->read = env_random(w->cenv) % 4 == 0;
	o->live = true;
	ck_assert_uint_lt(w->nh[o->key], MAXH);
	o->h = w->nh[o->key]++;
	struct lin_op *op = &w->hist[o->key][o->h];
	memset(op, 0, sizeof(*op));
	op->call = sim_now_us(w->sim);
	if (o->read) {
		op->kind = LIN_READ;
	} else {
		op->kind = LIN_CAS;
		/* mostly "increment what I saw", sometimes a stale guess */
		op->a = c->seen[o->key];
		if (env_random(w->cenv) % 5 == 0)
			op->a = env_random(w->cenv) % 3 ||
						c->seen[o->key] == LIN_NULL
					? LIN_NULL
					: c->seen[o->key] - 1;
		op->b = (int64_t)c->id * 1000 + ++c->seq;
	}
	w->busy++;
	char key[3] = {'k', (char)('0' + o->key), 0};
	struct paxos_request rq = {
		.key = slice_make(key, 2),
		.replicas = w->addrs,
		.n = (size_t)w->n,
		.needed = w->needed,
		.commit_block_for = w->commit_bf,
		.is_read = o->read,
		.merge = merge,
		.decide = decide,
		.decide_arg = o,
	};
	paxos_cas(w->nodes[o->coord].px, &rq, on_done, o);
}

/* ---- faults ---------------------------------------------------------------
 */

static void kill_node(struct world *w, int i)
{
	struct pnode *n = &w->nodes[i];
	sim_env_kill(w->sim, n->env);
	paxos_delete(n->px); /* in-flight callbacks are dropped */
	n->px = NULL;
	n->up = false;
	w->kills++;
	for (int k = 0; k < w->ncl; k++) {
		struct client *c = &w->cl[k];
		if (c->op.live && c->op.coord == i) {
			op_unknown(&c->op);
			client_end(c);
		}
	}
}

static bool all_done(void *arg);

static void fault_fire(void *arg)
{
	struct world *w = arg;
	if (all_done(w))
		return;
	uint64_t r = env_random(w->cenv) % 100;
	int i = (int)(env_random(w->cenv) % (uint64_t)w->n);
	struct pnode *n = &w->nodes[i];
	if (r < 6) {
		if (n->up)
			kill_node(w, i);
	} else if (r < 35) {
		if (!n->up)
			node_start(n);
	} else if (r < 50) {
		/* a random split into two sides */
		struct inet_addr a[MAXN], b[MAXN];
		size_t na = 0, nb = 0;
		for (int k = 0; k < w->n; k++) {
			if (env_random(w->cenv) & 1)
				a[na++] = w->addrs[k];
			else
				b[nb++] = w->addrs[k];
		}
		sim_net_partition(w->sim, a, na, b, nb, true);
	} else if (r < 70) {
		sim_net_heal(w->sim);
		sim_net_set_drop(w->sim, NULL, NULL,
				 (double)(env_random(w->cenv) % 15) / 100.0);
	} else if (r < 80) {
		if (n->up)
			sim_env_pause(w->sim, n->env,
				      env_random(w->cenv) % 300000);
	}
	env_timer_arm(w->cenv, w->fault,
		      env_random(w->cenv) % w->fault_every_us + 1);
}

static bool all_done(void *arg)
{
	struct world *w = arg;
	if (w->busy)
		return false;
	for (int k = 0; k < w->ncl; k++)
		if (w->cl[k].remaining > 0)
			return false;
	return true;
}

/* ---- one schedule ---------------------------------------------------------
 */

static bool mentioned(const struct lin_op *ops, size_t n, size_t skip,
		      int64_t v)
{
	for (size_t i = 0; i < n; i++) {
		if (i == skip)
			continue;
		const struct lin_op *o = &ops[i];
		if (o->kind == LIN_READ && o->out == v)
			return true;
		if (o->kind == LIN_CAS &&
		    (o->a == v || (o->res == LIN_FAIL && o->out == v)))
			return true;
	}
	return false;
}

/* An unknown CAS whose new value nobody saw or expected changes nothing
 * anyone could tell: it may as well never have happened (linearized last),
 * so it leaves the history, which keeps the search small. */
static size_t prune_unknown(struct lin_op *ops, size_t n)
{
	bool again = true;
	while (again) {
		again = false;
		for (size_t i = 0; i < n; i++) {
			if (ops[i].kind != LIN_CAS ||
			    ops[i].res != LIN_UNKNOWN ||
			    mentioned(ops, n, i, ops[i].b))
				continue;
			ops[i] = ops[--n];
			again = true;
			break;
		}
	}
	return n;
}

static void dump(const struct lin_op *ops, size_t n)
{
	static const char *res[] = {"ok", "fail", "unknown"};
	for (size_t i = 0; i < n; i++) {
		const struct lin_op *o = &ops[i];
		long long ret = o->ret == LIN_INF ? -1 : (long long)o->ret;
		if (o->kind == LIN_READ)
			printf("%3zu [%llu, %lld] read -> %lld\n", i,
			       (unsigned long long)o->call, ret,
			       (long long)o->out);
		else
			printf("%3zu [%llu, %lld] cas %lld -> %lld: %s (saw "
			       "%lld)\n",
			       i, (unsigned long long)o->call, ret,
			       (long long)o->a, (long long)o->b, res[o->res],
			       (long long)o->out);
	}
}

struct run_opts {
	bool broken;
	bool faults;
	int clients; /* 0: 3..MAXC */
};

struct run_stats {
	enum lin_verdict verdict;
	int ops, applied, not_applied, reads, unknowns, kills;
};

static struct run_stats run_schedule(uint64_t s, const struct run_opts *ro)
{
	struct world *w = world_new(s);
	w->broken = ro->broken;
	w->n = sim_random(w->sim) % 2 ? 5 : 3;
	w->needed = w->n / 2 + 1;
	/* commit at ONE or at QUORUM */
	w->commit_bf = sim_random(w->sim) % 2 ? 1 : w->needed;
	uint64_t maxlat = 200 + sim_random(w->sim) % 30000;
	sim_net_set_latency(w->sim, 100, maxlat);
	if (ro->faults)
		sim_net_set_drop(w->sim, NULL, NULL,
				 (double)(sim_random(w->sim) % 20) / 100.0);
	world_start(w, w->n, 1);
	struct inet_addr ca = {
		.family = INET_V4, .ip = {127, 0, 107, 19}, .port = 9042};
	w->cenv = sim_env_new(w->sim, &ca);
	w->ncl = ro->clients ? ro->clients
			     : 3 + (int)(sim_random(w->sim) % (MAXC - 2));
	int per = 4 + (int)(sim_random(w->sim) % 8);
	for (int k = 0; k < w->ncl; k++) {
		struct client *c = &w->cl[k];
		c->w = w;
		c->id = k + 1;
		c->remaining = per;
		for (int j = 0; j < NKEYS; j++)
			c->seen[j] = LIN_NULL;
		c->think = env_timer_new(w->cenv, client_fire, c);
		env_timer_arm(w->cenv, c->think, env_random(w->cenv) % 5000);
	}
	w->fault_every_us = 20000 + sim_random(w->sim) % 200000;
	w->fault = env_timer_new(w->cenv, fault_fire, w);
	if (ro->faults)
		env_timer_arm(w->cenv, w->fault, w->fault_every_us);
	bool done = sim_run_until(w->sim, all_done, w, 600ULL * 1000000);
	ck_assert_msg(done, "seed %llu: clients never finished",
		      (unsigned long long)s);

	struct run_stats st = {.verdict = LIN_LINEARIZABLE};
	for (int k = 0; k < NKEYS && st.verdict == LIN_LINEARIZABLE; k++) {
		struct lin_op ops[MAXH];
		size_t n = 0;
		for (size_t i = 0; i < w->nh[k]; i++) {
			const struct lin_op *op = &w->hist[k][i];
			if (op->kind == LIN_READ && op->res == LIN_UNKNOWN)
				continue;
			ops[n++] = *op;
		}
		n = prune_unknown(ops, n);
		st.ops += (int)n;
		st.verdict = lin_check(ops, n, LIN_NULL, 50000000, NULL);
		if (st.verdict != LIN_LINEARIZABLE &&
		    getenv("CASSINI_PAXOS_DUMP"))
			dump(ops, n);
	}
	st.applied = w->applied;
	st.not_applied = w->not_applied;
	st.reads = w->reads;
	st.unknowns = w->unknowns;
	st.kills = w->kills;

	for (int k = 0; k < w->ncl; k++)
		env_timer_free(w->cenv, w->cl[k].think);
	env_timer_free(w->cenv, w->fault);
	world_free(w, w->n);
	return st;
}

static long schedules(void)
{
	const char *s = getenv("CASSINI_PAXOS_SCHEDULES");
	return s ? atol(s) : 3000;
}

/* No faults, no loss, one client: every CAS decides. With contention
 * (several clients) a proposal accepted by a minority before a rival's
 * promise is an unknown outcome even on a quiet network, but the history
 * stays linearizable. */
START_TEST(quiet_network_decides_everything)
{
	for (uint64_t i = 0; i < 50; i++) {
		struct run_opts ro = {.faults = false, .clients = 1};
		struct run_stats st = run_schedule(seed + i, &ro);
		ck_assert_msg(st.verdict == LIN_LINEARIZABLE, "seed %llu",
			      (unsigned long long)(seed + i));
		ck_assert_int_eq(st.unknowns, 0);
		ck_assert_int_gt(st.applied, 0);
		ro.clients = 0;
		st = run_schedule(seed + i, &ro);
		ck_assert_msg(st.verdict == LIN_LINEARIZABLE, "seed %llu",
			      (unsigned long long)(seed + i));
		ck_assert_int_gt(st.applied, 0);
	}
}
END_TEST

START_TEST(random_faults_stay_linearizable)
{
	struct run_opts ro = {.faults = true};
	long n = schedules();
	long applied = 0, unknowns = 0, kills = 0, failed = 0, reads = 0,
	     ops = 0;
	for (long i = 0; i < n; i++) {
		uint64_t s = seed + 1000 + (uint64_t)i;
		struct run_stats st = run_schedule(s, &ro);
		ck_assert_msg(st.verdict == LIN_LINEARIZABLE,
			      "seed %llu: history %s", (unsigned long long)s,
			      st.verdict == LIN_VIOLATION
				      ? "not linearizable"
				      : "too hard to check");
		applied += st.applied;
		failed += st.not_applied;
		unknowns += st.unknowns;
		kills += st.kills;
		reads += st.reads;
		ops += st.ops;
	}
	printf("paxos sim: %ld schedules, %ld ops checked: %ld applied, %ld "
	       "not applied, %ld serial reads, %ld unknown, %ld kills\n",
	       n, ops, applied, failed, reads, unknowns, kills);
	/* the faults must bite, and the work must still get done */
	ck_assert_int_gt(applied, n);
	ck_assert_int_gt(unknowns, 0);
	ck_assert_int_gt(kills, 0);
	ck_assert_int_gt(failed, 0);
}
END_TEST

/* The same schedules with the proposer that ignores in-progress accepted
 * proposals: the checker must find a history that is not linearizable. */
START_TEST(skipping_in_progress_is_caught)
{
	struct run_opts ro = {.faults = true, .broken = true};
	long caught = -1;
	for (long i = 0; i < 5000 && caught < 0; i++) {
		struct run_stats st =
			run_schedule(seed + 1000 + (uint64_t)i, &ro);
		ck_assert(st.verdict != LIN_GAVE_UP);
		if (st.verdict == LIN_VIOLATION)
			caught = i;
	}
	printf("paxos sim: the broken proposer was caught at schedule %ld\n",
	       caught);
	ck_assert_int_ge(caught, 0);
}
END_TEST

/* ---- paxos repair -------------------------------------------------------- */

struct one_done {
	bool done;
	struct paxos_result res;
};

static void one_cb(void *arg, struct paxos_result *res)
{
	struct one_done *d = arg;
	d->done = true;
	d->res = *res;
}

static bool one_finished(void *arg)
{
	return ((struct one_done *)arg)->done;
}

/* One round through node `coord` on register k0: a CAS of NULL -> `val`,
 * or (val < 0) the round paxos repair and SERIAL reads run. */
static struct paxos_result round_at(struct world *w, int coord, int64_t val,
				    bool wait_self)
{
	struct client c = {.w = w, .id = 1};
	struct opctx o = {.c = &c, .key = 0, .read = val < 0, .live = true};
	struct lin_op *op = &w->hist[0][w->nh[0]];
	o.h = w->nh[0]++;
	memset(op, 0, sizeof(*op));
	op->kind = o.read ? LIN_READ : LIN_CAS;
	op->a = LIN_NULL;
	op->b = val;
	struct one_done d = {0};
	struct paxos_request rq = {
		.key = slice_make("k0", 2),
		.replicas = w->addrs,
		.n = (size_t)w->n,
		.needed = w->needed,
		.commit_block_for = w->needed,
		.is_read = o.read,
		.wait_self = wait_self,
		.merge = merge,
		.decide = decide,
		.decide_arg = &o,
	};
	paxos_cas(w->nodes[coord].px, &rq, one_cb, &d);
	ck_assert(sim_run_until(w->sim, one_finished, &d, 60ULL * 1000000));
	return d.res;
}

static struct paxos_result one_round(struct world *w, int coord, int64_t val)
{
	return round_at(w, coord, val, false);
}

static bool unfinished(const struct paxos_state *st)
{
	return !paxos_ballot_is_none(&st->accepted) &&
	       paxos_ballot_cmp(&st->accepted, &st->committed) > 0;
}

/* What `repair --paxos-only` does on node `at`: every register of its
 * disk with an accepted proposal newer than its commit gets the SERIAL
 * read's round (node_cas_paxos_repair over system.paxos). */
static int paxos_repair(struct world *w, int at)
{
	int completed = 0;
	if (unfinished(&w->nodes[at].disk[0].st)) {
		struct paxos_result r = round_at(w, at, -1, true);
		ck_assert_int_eq(r.outcome, PAXOS_OK);
		buf_free(&r.current);
		completed++;
	}
	return completed;
}

/* k0's token in the movement cases: 0. */
#define K0_TOKEN 0

static void pcl_round_done(void *arg, struct paxos_result *res)
{
	struct pnode *n = arg;
	paxos_cleanup_local_done done = n->pcl_done;
	n->pcl_done = NULL;
	free(n->pcl_op);
	free(n->pcl_client);
	n->pcl_op = NULL;
	n->pcl_client = NULL;
	bool ok = res->outcome == PAXOS_OK;
	buf_free(&res->current);
	done(n->pcl_darg, 0, ok ? 1 : 0, ok ? 0 : 1);
}

/* A node's share of a moving range's paxos repair: node_cas's repair
 * restricted to the ranges (its unfinished registers in them get the
 * SERIAL read's round with its own promise among the quorum's), over the
 * movement's participants. */
static void pcl_local(void *arg, const char *keyspace,
		      const struct paxos_range *r, size_t nr,
		      paxos_cleanup_local_done done, void *darg)
{
	struct pnode *n = arg;
	struct world *w = n->w;
	bool in = false;
	for (size_t i = 0; i < nr; i++)
		in = in || paxos_range_contains(&r[i], K0_TOKEN);
	if (strcmp(keyspace, "ks") != 0 || !in || !unfinished(&n->disk[0].st)) {
		done(darg, 0, 0, 0);
		return;
	}
	ck_assert_ptr_null(n->pcl_done);
	n->pcl_done = done;
	n->pcl_darg = darg;
	n->pcl_client = calloc(1, sizeof(*n->pcl_client));
	n->pcl_op = calloc(1, sizeof(*n->pcl_op));
	ck_assert(n->pcl_client && n->pcl_op);
	*n->pcl_client = (struct client){.w = w, .id = 99};
	*n->pcl_op = (struct opctx){.c = n->pcl_client, .read = true};
	n->pcl_rq = (struct paxos_request){
		.key = slice_make("k0", 2),
		.replicas = w->mv_reps,
		.n = (size_t)w->mv_n,
		.needed = w->mv_needed,
		.commit_block_for = w->mv_needed,
		.is_read = true,
		.wait_self = true,
		.merge = merge,
		.decide = decide,
		.decide_arg = n->pcl_op,
	};
	paxos_cas(n->px, &n->pcl_rq, pcl_round_done, n);
}

/* A proposal accepted by one replica of three (its proposer's propose
 * reached itself only, then the proposer died and came back with its
 * disk) is on no replica's data; paxos repair on it finishes it: every
 * replica then holds it, and a SERIAL read through another node sees it.
 * A proposal nobody accepted is not invented: a repair finds nothing to
 * do and the register stays empty. */
/* Node 0 proposes 42 to itself only (a minority: the round times out with
 * the proposal partial), then dies and restarts with its disk, holding
 * the unfinished proposal. */
static void minority_proposal_of_42(struct world *w)
{
	paxos_test_propose_self_only(w->nodes[0].px, true);
	struct paxos_result r = one_round(w, 0, 42);
	ck_assert_int_eq(r.outcome, PAXOS_WRITE_TIMEOUT);
	ck_assert(r.proposal_partial);
	buf_free(&r.current);
	sim_env_kill(w->sim, w->nodes[0].env);
	paxos_delete(w->nodes[0].px);
	node_start(&w->nodes[0]);
	ck_assert(unfinished(&w->nodes[0].disk[0].st));
}

/* After a paxos repair: every node holds 42 committed, nothing is left to
 * repair, and a read round sees 42. */
static void assert_repaired_to_42(struct world *w)
{
	int holders = 0;
	for (int k = 0; k < w->n; k++) {
		ck_assert(!unfinished(&w->nodes[k].disk[0].st));
		if (w->nodes[k].disk[0].has) {
			ck_assert_int_eq(w->nodes[k].disk[0].val, 42);
			holders++;
		}
	}
	ck_assert_int_eq(holders, w->n);
	ck_assert_int_eq(paxos_repair(w, 0), 0);
	struct paxos_result r = one_round(w, 2, -1);
	ck_assert_int_eq(r.outcome, PAXOS_OK);
	ck_assert_int_eq(value_of(buf_slice(&r.current)), 42);
	buf_free(&r.current);
}

START_TEST(paxos_repair_finishes_a_minority_proposal)
{
	for (uint64_t i = 0; i < 20; i++) {
		struct world *w = world_new(seed + i);
		w->n = 3;
		w->needed = 2;
		sim_net_set_latency(w->sim, 100, 5000);
		world_start(w, w->n, 1);
		/* nobody accepted anything: nothing to repair, nothing read */
		for (int k = 0; k < w->n; k++)
			ck_assert_int_eq(paxos_repair(w, k), 0);
		struct paxos_result r = one_round(w, 1, -1);
		ck_assert_int_eq(r.outcome, PAXOS_OK);
		ck_assert_int_eq(value_of(buf_slice(&r.current)), LIN_NULL);
		buf_free(&r.current);

		minority_proposal_of_42(w);
		for (int k = 0; k < w->n; k++)
			ck_assert(!w->nodes[k].disk[0].has);
		ck_assert_int_eq(paxos_repair(w, 1), 0); /* not node2's */
		ck_assert_int_eq(paxos_repair(w, 2), 0);

		ck_assert_int_eq(paxos_repair(w, 0), 1);
		/* committed at quorum by the repair; the rest follow */
		sim_run_for(w->sim, 1000000);
		assert_repaired_to_42(w);

		world_free(w, w->n);
	}
}
END_TEST

/* The same minority proposal, but the repairing node's disk is slow: its
 * own promise reaches it after the two others', which hold nothing. The
 * repair round must wait for it (paxos_request.wait_self) and finish the
 * proposal; a round that went on with the others' quorum would decide
 * "nothing to do", count the partition completed and leave it
 * unfinished. */
START_TEST(paxos_repair_waits_for_its_own_promise)
{
	for (uint64_t i = 0; i < 5; i++) {
		struct world *w = world_new(seed + 100 + i);
		w->n = 3;
		w->needed = 2;
		sim_net_set_latency(w->sim, 100, 5000);
		world_start(w, w->n, 1);
		minority_proposal_of_42(w);

		/* its loads take 20 ms; a round trip to the others <= 10 */
		struct pnode *n0 = &w->nodes[0];
		n0->load_timer = env_timer_new(n0->env, load_fire, n0);
		ck_assert_ptr_nonnull(n0->load_timer);
		n0->load_delay_us = 20000;
		ck_assert_int_eq(paxos_repair(w, 0), 1);
		sim_run_for(w->sim, 1000000);
		assert_repaired_to_42(w);

		/* not a replica of it: its promise cannot come, so fail */
		struct one_done d = {0};
		struct paxos_request rq = {
			.key = slice_make("k0", 2),
			.replicas = w->addrs + 1,
			.n = 2,
			.needed = 2,
			.is_read = true,
			.wait_self = true,
			.merge = merge,
			.decide = decide,
		};
		paxos_cas(n0->px, &rq, one_cb, &d);
		ck_assert(d.done);
		ck_assert_int_eq(d.res.outcome, PAXOS_FAILED);

		env_timer_free(n0->env, n0->load_timer);
		world_free(w, w->n);
	}
}
END_TEST

struct pcl_wait {
	bool done;
	struct paxos_cleanup_result res;
};

static void pcl_cb(void *arg, const struct paxos_cleanup_result *res)
{
	struct pcl_wait *d = arg;
	d->done = true;
	d->res = *res;
}

static bool pcl_finished(void *arg)
{
	return ((struct pcl_wait *)arg)->done;
}

/* A SERIAL read of k0 through `coord` with `reps` as the replicas. */
static int64_t read_among(struct world *w, int coord,
			  const struct inet_addr *reps, size_t n, int needed)
{
	struct client c = {.w = w, .id = 2};
	struct opctx o = {.c = &c, .read = true};
	struct one_done d = {0};
	struct paxos_request rq = {
		.key = slice_make("k0", 2),
		.replicas = reps,
		.n = n,
		.needed = needed,
		.is_read = true,
		.merge = merge,
		.decide = decide,
		.decide_arg = &o,
	};
	paxos_cas(w->nodes[coord].px, &rq, one_cb, &d);
	ck_assert(sim_run_until(w->sim, one_finished, &d, 60ULL * 1000000));
	ck_assert_int_eq(d.res.outcome, PAXOS_OK);
	int64_t v = value_of(buf_slice(&d.res.current));
	buf_free(&d.res.current);
	return v;
}

/* A range moves: node3 bootstraps and takes k0 over from node0 (replicas
 * {0,1,2} become {1,2,3}). A proposal was accepted by node0 and node1, a
 * quorum (chosen: a client at commit ANY was told it applied), and
 * committed nowhere. The new replica set's quorum {2,3} does not meet the
 * old acceptors' {0,1} in a node that still holds the proposal once node0
 * is gone: without the paxos repair of the moving range the chosen value
 * is lost. With it (run by node3 over the live natural replicas before it
 * streams, as movement.c does) it is committed, streamed, and a SERIAL
 * read through node3 with node0 gone and node1 down sees it. A natural
 * replica that does not answer fails the repair, naming it. */
START_TEST(paxos_repair_before_a_range_moves)
{
	for (uint64_t i = 0; i < 20; i++) {
		for (int with = 0; with < 2; with++) {
			struct world *w = world_new(seed + 200 + i);
			w->n = 3; /* k0's natural replicas: nodes 0-2 */
			w->needed = 2;
			w->with_cleanup = true;
			sim_net_set_latency(w->sim, 100, 5000);
			world_start(w, 4, 40);
			paxos_test_propose_self_only(w->nodes[0].px, true);
			struct paxos_result r = one_round(w, 0, 42);
			ck_assert_int_eq(r.outcome, PAXOS_WRITE_TIMEOUT);
			buf_free(&r.current);
			paxos_test_propose_self_only(w->nodes[0].px, false);
			/* ... and node1 accepted it too: chosen */
			ck_assert(unfinished(&w->nodes[0].disk[0].st));
			paxos_state_free(&w->nodes[1].disk[0].st);
			ck_assert_int_eq(
				paxos_state_copy(&w->nodes[1].disk[0].st,
						 &w->nodes[0].disk[0].st),
				0);

			/* node3 pending: participants 0-3, needing 3 */
			memcpy(w->mv_reps, w->addrs, 4 * sizeof(w->addrs[0]));
			w->mv_n = 4;
			w->mv_needed = 3;
			struct paxos_range rg = {-100, 100};
			if (with) {
				struct pcl_wait d = {0};
				ck_assert_int_eq(paxos_cleanup_start(
							 w->nodes[3].pcl, "ks",
							 &rg, 1, w->addrs, 3,
							 5000, pcl_cb, &d),
						 0);
				ck_assert(!d.done); /* never inline */
				ck_assert(sim_run_until(w->sim, pcl_finished,
							&d, 60ULL * 1000000));
				ck_assert_int_eq(d.res.status, 0);
				ck_assert_uint_eq(d.res.asked, 3);
				ck_assert_uint_eq(d.res.answered, 3);
				ck_assert_uint_ge(d.res.completed, 1);
				ck_assert_uint_eq(d.res.failed, 0);
				sim_run_for(w->sim, 1000000);
				for (int k = 0; k < 4; k++)
					ck_assert(!unfinished(
						&w->nodes[k].disk[0].st));
			}
			/* streaming: node3 gets node2's copy */
			w->nodes[3].disk[0].has = w->nodes[2].disk[0].has;
			w->nodes[3].disk[0].val = w->nodes[2].disk[0].val;
			w->nodes[3].disk[0].ts = w->nodes[2].disk[0].ts;
			/* node0 leaves the replicas; node1 goes down */
			sim_env_kill(w->sim, w->nodes[0].env);
			sim_env_kill(w->sim, w->nodes[1].env);
			struct inet_addr now[2] = {w->addrs[2], w->addrs[3]};
			int64_t v = read_among(w, 3, now, 2, 2);
			ck_assert_int_eq(v, with ? 42 : LIN_NULL);

			if (with) {
				/* garbage of both verbs is dropped */
				struct inet_addr ga = {.family = INET_V4,
						       .ip = {127, 0, 107, 48},
						       .port = 7000};
				struct env *g = sim_env_new(w->sim, &ga);
				uint8_t junk[64];
				for (int t = 0; t < 200; t++) {
					size_t len = (size_t)(env_random(g) %
							      sizeof(junk));
					for (size_t b = 0; b < len; b++)
						junk[b] =
							(uint8_t)env_random(g);
					env_send(g, &w->addrs[2],
						 t % 2 ? PAXOS_VERB_CLEANUP_RSP
						       : PAXOS_VERB_CLEANUP,
						 junk, len);
				}
				sim_run_for(w->sim, 100000);
				/* a natural replica that does not answer */
				struct pcl_wait d = {0};
				ck_assert_int_eq(paxos_cleanup_start(
							 w->nodes[3].pcl, "ks",
							 &rg, 1, w->addrs + 1,
							 2, 2000, pcl_cb, &d),
						 0);
				ck_assert(sim_run_until(w->sim, pcl_finished,
							&d, 60ULL * 1000000));
				ck_assert_int_eq(d.res.status, -1);
				ck_assert_uint_eq(d.res.answered, 1);
				ck_assert_ptr_nonnull(
					strstr(d.res.error, "127.0.107.41"));
			}
			world_free(w, 4);
		}
	}
}
END_TEST

/* A raw acceptor's answer, caught by a bare env. */
struct raw_peer {
	bool got;
	uint32_t verb;
	struct paxos_msg m;
	void *owner;
};

static void raw_deliver(void *arg, const struct inet_addr *from, uint32_t verb,
			const uint8_t *msg, size_t len)
{
	(void)from;
	struct raw_peer *r = arg;
	ck_assert(!r->got);
	ck_assert_int_eq(paxos_msg_decode(verb, msg, len, &r->m, &r->owner), 0);
	r->verb = verb;
	r->got = true;
}

static bool raw_got(void *arg)
{
	return ((struct raw_peer *)arg)->got;
}

/* PREPARE or PROPOSE (`update` set) of `b` on k0 to node `to`; whether it
 * was promised / accepted, and the promise the answer carried. */
static bool raw_ask(struct world *w, struct env *e, struct raw_peer *rp, int to,
		    uint32_t verb, const struct paxos_ballot *b,
		    struct paxos_ballot *promised)
{
	uint8_t v[8];
	be64_store(v, 7);
	struct paxos_msg q = {
		.id = 1,
		.round = 1,
		.deadline_us = env_wall_us(e) + 1000000,
		.key = slice_make("k0", 2),
		.ballot = *b,
		.update = verb == PAXOS_VERB_PROPOSE ? slice_make(v, 8)
						     : slice_make(NULL, 0),
	};
	struct buf out = {0};
	ck_assert_int_eq(paxos_msg_encode(verb, &q, &out), 0);
	memset(rp, 0, sizeof(*rp));
	env_send(e, &w->addrs[to], verb, out.data, out.len);
	buf_free(&out);
	ck_assert(sim_run_until(w->sim, raw_got, rp, 10ULL * 1000000));
	ck_assert_uint_eq(rp->verb, verb + 1);
	bool ok = rp->m.ok;
	*promised = rp->m.promised;
	paxos_msg_free(rp->verb, rp->owner);
	return ok;
}

/* paxos_state_purging (legacy): committed registers expire. Once one has,
 * a ballot below the ones it held must not be promised or accepted: a
 * stale proposer (its clock behind, or a message that waited) would
 * otherwise win a "fresh" instance with a ballot, hence a write timestamp,
 * below the commit it never saw, and its update would be applied under
 * the older data (reported applied, read back lost). With the acceptors'
 * purge window the stale PREPARE and PROPOSE are refused, the refusal
 * carrying the window's floor so a proposer's next ballot clears it, and
 * a later round still reads the committed value. Without the window (the
 * control) the expired registers promise and accept the stale ballot, and
 * the next round completes that proposal over the committed value. */
START_TEST(purged_registers_refuse_stale_ballots)
{
	const int64_t window = 10 * 1000000LL;
	for (uint64_t i = 0; i < 10; i++) {
		for (int guarded = 0; guarded < 2; guarded++) {
			struct world *w = world_new(seed + 300 + i);
			w->n = 3;
			w->needed = 2;
			w->purge_window_us = guarded ? window : 0;
			sim_net_set_latency(w->sim, 100, 5000);
			world_start(w, w->n, 45);
			struct paxos_result r = one_round(w, 1, 42);
			ck_assert_int_eq(r.outcome, PAXOS_OK);
			ck_assert(r.applied);
			buf_free(&r.current);
			sim_run_for(w->sim, 1000000);
			struct paxos_ballot c0 =
				w->nodes[0].disk[0].st.committed;
			ck_assert(!paxos_ballot_is_none(&c0));
			/* the TTL passes: every register is gone, the data
			 * stays */
			sim_run_for(w->sim, (uint64_t)(2 * window));
			for (int k = 0; k < w->n; k++) {
				paxos_state_free(&w->nodes[k].disk[0].st);
				ck_assert(w->nodes[k].disk[0].has);
			}
			struct inet_addr sa = {.family = INET_V4,
					       .ip = {127, 0, 107, 49},
					       .port = 7000};
			struct env *e = sim_env_new(w->sim, &sa);
			struct raw_peer rp;
			env_set_receiver(e, raw_deliver, &rp);
			struct paxos_ballot stale = {c0.us - 1, c0.lsb ^ 1};
			struct paxos_ballot pr;
			for (int k = 0; k < w->n; k++) {
				bool promised = raw_ask(w, e, &rp, k,
							PAXOS_VERB_PREPARE,
							&stale, &pr);
				bool accepted = raw_ask(w, e, &rp, k,
							PAXOS_VERB_PROPOSE,
							&stale, &pr);
				ck_assert_int_eq(promised, !guarded);
				ck_assert_int_eq(accepted, !guarded);
				if (guarded)
					ck_assert_int_ge(
						pr.us, env_wall_us(e) - window -
							       1000000);
			}
			if (guarded) {
				/* a ballot inside the window is promised */
				struct paxos_ballot fresh = {
					env_wall_us(e) - window / 2, c0.lsb};
				ck_assert(raw_ask(w, e, &rp, 0,
						  PAXOS_VERB_PREPARE, &fresh,
						  &pr));
			}
			/* a round still reads what was committed; in the
			 * control the stale proposal, accepted by all three
			 * without ever seeing 42, is found in progress and
			 * completed over it */
			r = one_round(w, 2, -1);
			ck_assert_int_eq(r.outcome, PAXOS_OK);
			ck_assert_int_eq(value_of(buf_slice(&r.current)),
					 guarded ? 42 : 7);
			buf_free(&r.current);
			if (guarded) {
				struct paxos_stats st;
				paxos_get_stats(w->nodes[0].px, &st);
				ck_assert_uint_eq(st.stale_ballots, 2);
			}
			world_free(w, w->n);
		}
	}
}
END_TEST

int main(void)
{
	seed = test_seed(26);
	Suite *s = suite_create("paxos_sim");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, quiet_network_decides_everything);
	tcase_add_test(tc, random_faults_stay_linearizable);
	tcase_add_test(tc, skipping_in_progress_is_caught);
	tcase_add_test(tc, paxos_repair_finishes_a_minority_proposal);
	tcase_add_test(tc, paxos_repair_waits_for_its_own_promise);
	tcase_add_test(tc, paxos_repair_before_a_range_moves);
	tcase_add_test(tc, purged_registers_refuse_stale_ballots);
	suite_add_tcase(s, tc);
	return test_run(s);
}
