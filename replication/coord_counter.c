/*
 * Counter writes (repl_counter_write), as Cassandra's StorageProxy
 * mutateCounter and CounterMutation do them:
 *
 *   coordinator  picks the counter leader of each partition (itself when
 *                it is a replica, else a random live replica of its
 *                datacenter) and forwards the delta shards to it
 *                (REPL_VERB_COUNTER), or leads itself;
 *   leader       takes the partition's lock (a FIFO of the increments
 *                waiting for it), reads its own current shards through the
 *                store (a worker read when they are not in memory: never
 *                blocking the loop), builds the next ones
 *                (storage_counter_resolve), applies them locally, releases
 *                the lock, then writes the resulting shards to the other
 *                replicas at the request's level (repl_write_self_applied:
 *                its own replica already counts) and answers
 *                (REPL_VERB_COUNTER_RSP).
 *
 * A lock passes to the next waiter through a zero-delay timer, so a long
 * queue of increments completing inline does not recurse.
 */
#define LOG_MODULE "replication"
#include "replication/replication.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/zalloc.h"
#include "replication/coord_internal.h"
#include "replication/replication.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ctr_lock;

/* One partition's increment at its leader. */
struct lead {
	struct lead *all_next; /* every lead of this node */
	struct lead *q_next;   /* the lock's queue */
	struct repl *r;
	uint64_t id; /* completions find it by id: it may be gone */
	struct ctr_lock *lock;
	bool locked;  /* holds its lock */
	bool started; /* lead_start ran */
	struct storage_mutation *deltas;
	const struct storage_table_meta *meta; /* a reference */
	int cl;
	struct arena a;
	struct storage_read_cmd cmd;
	struct storage_mutation *next; /* the resolved shards */
	repl_write_done_fn done;
	void *arg;
	/* the trace session (`trace`, when traced), its step's start, and
	 * what the read of the current shards met */
	bool traced;
	uint8_t trace[16];
	uint64_t start_us;
	struct storage_read_stats stats;
};

/* Cassandra's thread for a counter leader's steps. */
#define CTR_THREAD "CounterMutationStage-1"

#define lead_trace(l, ...)                                                     \
	do {                                                                   \
		if ((l)->traced)                                               \
			repl_trace((l)->r, (l)->trace, CTR_THREAD,             \
				   (l)->start_us, __VA_ARGS__);                \
	} while (0)

struct ctr_lock {
	struct ctr_lock *next;
	uint8_t table_id[16];
	uint8_t *key;
	size_t key_len;
	struct lead *head, *tail; /* head holds it, the rest wait */
};

/* A request forwarded to a remote leader. */
struct fwd {
	struct fwd *next;
	struct repl *r;
	uint64_t id;
	struct env_timer *timer;
	int cl, block_for;
	repl_write_done_fn done;
	void *arg;
};

/* A counter write of several partitions (a counter batch): answered once
 * each partition's leader has. */
struct multi {
	size_t left;
	bool failed;
	struct repl_result res;
	repl_write_done_fn done;
	void *arg;
};

struct ctr_state {
	struct lead *leads;
	struct ctr_lock *locks;
	struct fwd *fwds;
	struct env_timer *kick;
};

static void kick(void *arg);

static struct ctr_state *state(struct repl *r)
{
	if (!r->ctr) {
		r->ctr = zcalloc(1, sizeof(*r->ctr));
		if (r->ctr &&
		    !(r->ctr->kick = env_timer_new(r->env, kick, r))) {
			free(r->ctr);
			r->ctr = NULL;
		}
	}
	return r->ctr;
}

static struct lead *lead_find(struct repl *r, uint64_t id)
{
	for (struct lead *l = r->ctr ? r->ctr->leads : NULL; l; l = l->all_next)
		if (l->id == id)
			return l;
	return NULL;
}

static void lead_free(struct lead *l)
{
	struct ctr_state *cs = l->r->ctr;
	for (struct lead **p = &cs->leads; *p; p = &(*p)->all_next)
		if (*p == l) {
			*p = l->all_next;
			break;
		}
	storage_mutation_delete(l->deltas);
	storage_mutation_delete(l->next);
	if (l->meta)
		storage_table_meta_unref(l->meta);
	arena_destroy(&l->a);
	free(l);
}

static void lock_free(struct ctr_state *cs, struct ctr_lock *k)
{
	for (struct ctr_lock **p = &cs->locks; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			break;
		}
	free(k->key);
	free(k);
}

/* `l` leaves its lock's queue (it held it, or waited); the next waiter
 * gets it and starts from the kick timer. */
static void unlock(struct lead *l)
{
	struct ctr_lock *k = l->lock;
	if (!k)
		return;
	l->lock = NULL;
	struct ctr_state *cs = l->r->ctr;
	struct lead **p = &k->head, *prev = NULL;
	while (*p && *p != l) {
		prev = *p;
		p = &(*p)->q_next;
	}
	if (*p) {
		*p = l->q_next;
		if (k->tail == l)
			k->tail = prev;
	}
	bool held = l->locked;
	l->locked = false;
	l->q_next = NULL;
	if (!k->head) {
		lock_free(cs, k);
		return;
	}
	if (held && !k->head->locked) {
		k->head->locked = true;
		env_timer_arm(l->r->env, cs->kick, 0);
	}
}

static void finish(struct lead *l, const struct repl_result *res)
{
	unlock(l);
	repl_write_done_fn done = l->done;
	void *arg = l->arg;
	lead_free(l);
	done(arg, res);
}

static void fail(struct lead *l, enum repl_outcome o, const char *why)
{
	struct repl_result res;
	repl_result_init(&res, o, l->cl);
	res.write_type = REPL_WRITE_COUNTER;
	snprintf(res.msg, sizeof(res.msg), "%s", why);
	finish(l, &res);
}

/* The leader's own replica failed (its read or its write of the new
 * shards): the failure names this node. */
static void fail_self(struct lead *l, const char *why, enum err_code code)
{
	struct repl *r = l->r;
	struct repl_result res;
	repl_result_init(&res, REPL_WRITE_FAILURE, l->cl);
	res.write_type = REPL_WRITE_COUNTER;
	snprintf(res.msg, sizeof(res.msg), "%s", why);
	struct ring *ring = r->hooks.ring ? r->hooks.ring(r->hooks.arg) : NULL;
	int self = ring ? ring_local_endpoint(ring) : -1;
	if (self >= 0)
		repl_result_add_failure(
			&res, &ring_endpoint_get(ring, (size_t)self)->addr,
			repl_failure_code_of(err_code_name(code)));
	finish(l, &res);
}

/* The lead lives until this runs (or repl_delete drops both). */
static void lead_written(void *arg, const struct repl_result *res)
{
	struct lead *l = arg;
	struct repl_result out = *res;
	if (out.outcome == REPL_WRITE_TIMEOUT ||
	    out.outcome == REPL_WRITE_FAILURE)
		out.write_type = REPL_WRITE_COUNTER;
	finish(l, &out);
}

static void lead_applied(void *arg, int status, enum err_code code)
{
	struct local_ctx *c = arg;
	struct repl *r = c->r;
	struct lead *l = lead_find(r, c->id);
	if (!l) {
		free(c);
		return;
	}
	if (status != 0) {
		free(c);
		char why[128];
		snprintf(why, sizeof(why), "counter leader write failed: %s",
			 err_code_name(code));
		fail_self(l, why, code);
		return;
	}
	/* The local replica has the new shards: the next increment of
	 * this partition may read them. */
	unlock(l);
	const struct ring_strategy *s =
		r->hooks.strategy
			? r->hooks.strategy(r->hooks.arg,
					    storage_mutation_table_id(l->next))
			: NULL;
	if (!s) {
		free(c);
		fail(l, REPL_WRITE_FAILURE, "the counter's table is gone");
		return;
	}
	free(c);
	struct storage_mutation *m = l->next;
	l->next = NULL;
	struct repl_mutation rm = {.m = m, .strategy = s};
	repl_write_self_applied(r, &rm, 1, l->cl, REPL_WRITE_COUNTER,
				l->traced ? l->trace : NULL, lead_written, l);
	storage_mutation_delete(m);
}

static void lead_read_done(void *arg, int status, enum err_code code,
			   struct storage_mutation **frags, size_t n, bool cut)
{
	(void)cut;
	struct local_ctx *c = arg;
	struct repl *r = c->r;
	struct lead *l = lead_find(r, c->id);
	struct storage_mutation *cur = status == 0 && n ? frags[0] : NULL;
	if (!l || status != 0) {
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		free(c);
		if (l) {
			char why[128];
			snprintf(why, sizeof(why),
				 "counter leader read failed: %s",
				 err_code_name(code));
			fail_self(l, why, code);
		}
		return;
	}
	struct ring *ring = r->hooks.ring(r->hooks.arg);
	int self = ring ? ring_local_endpoint(ring) : -1;
	if (self >= 0)
		l->next = storage_counter_resolve(
			l->meta, l->deltas, cur,
			ring_endpoint_get(ring, (size_t)self)->host_id,
			env_wall_us(r->env));
	char why[ERR_MSG_MAX];
	snprintf(why, sizeof(why), "%s",
		 self < 0 ? "this node is not in the ring" : err_msg());
	for (size_t i = 0; i < n; i++)
		storage_mutation_delete(frags[i]);
	free(frags);
	if (!l->next) {
		free(c);
		fail(l, REPL_WRITE_FAILURE, why);
		return;
	}
	r->st.counter_leads++;
	if (l->traced) {
		repl_trace_read_stats(r, l->trace, CTR_THREAD, l->start_us,
				      &l->stats, true);
		lead_trace(l, "Appending to commitlog");
		lead_trace(l, "Adding to %s.%s memtable", l->meta->keyspace,
			   l->meta->name);
	}
	if (r->store->apply(r->store_arg, l->next, lead_applied, c) != 0) {
		snprintf(why, sizeof(why), "%s", err_msg());
		free(c);
		fail(l,
		     err_code() == ERR_OVERLOADED ? REPL_OVERLOADED
						  : REPL_WRITE_FAILURE,
		     why);
	}
}

static void lead_start(struct lead *l)
{
	struct repl *r = l->r;
	l->started = true;
	struct local_ctx *c = repl_local_ctx_new(r, l->id);
	if (!c ||
	    storage_counter_read_cmd(l->meta, l->deltas, &l->a, &l->cmd) != 0) {
		free(c);
		fail(l, REPL_WRITE_FAILURE, err_msg());
		return;
	}
	if (l->traced) {
		lead_trace(l, "Executing single-partition query on %s.%s",
			   l->meta->keyspace, l->meta->name);
		lead_trace(l, "Acquiring sstable references");
		l->cmd.stats = &l->stats;
	}
	r->store->read(r->store_arg, storage_mutation_table_id(l->deltas),
		       &l->cmd, lead_read_done, c);
}

static void kick(void *arg)
{
	struct repl *r = arg;
	struct ctr_state *cs = r->ctr;
	/* every lock whose head holds it but has not started */
	for (;;) {
		struct lead *waiting = NULL;
		for (struct ctr_lock *k = cs->locks; k && !waiting; k = k->next)
			if (k->head && k->head->locked && !k->head->started)
				waiting = k->head;
		if (!waiting)
			return;
		lead_start(waiting);
	}
}

/* Leads one partition's increment (`deltas` owned from now on). */
static void lead_submit(struct repl *r, struct storage_mutation *deltas, int cl,
			const uint8_t *trace, repl_write_done_fn done,
			void *arg)
{
	struct ctr_state *cs = state(r);
	struct lead *l = cs ? zcalloc(1, sizeof(*l)) : NULL;
	struct repl_result res;
	if (!l) {
		storage_mutation_delete(deltas);
		repl_result_init(&res, REPL_WRITE_FAILURE, cl);
		res.write_type = REPL_WRITE_COUNTER;
		snprintf(res.msg, sizeof(res.msg), "out of memory");
		done(arg, &res);
		return;
	}
	l->r = r;
	l->id = ++r->next_id;
	l->deltas = deltas;
	l->cl = cl;
	l->done = done;
	l->arg = arg;
	if (trace) {
		l->traced = true;
		memcpy(l->trace, trace, 16);
		l->start_us = repl_now_us(r);
	}
	arena_create(&l->a, 1024);
	l->all_next = cs->leads;
	cs->leads = l;
	const uint8_t *tid = storage_mutation_table_id(deltas);
	l->meta = r->store->meta(r->store_arg, tid);
	if (!l->meta) {
		fail(l, REPL_INVALID, "unknown table");
		return;
	}
	lead_trace(l, "Acquiring counter locks");
	struct slice key = storage_mutation_key(deltas);
	struct ctr_lock *k = cs->locks;
	while (k && (memcmp(k->table_id, tid, 16) || k->key_len != key.len ||
		     memcmp(k->key, key.ptr, key.len)))
		k = k->next;
	if (k) {
		k->tail->q_next = l;
		k->tail = l;
		l->lock = k;
		return; /* waits for its turn */
	}
	k = zcalloc(1, sizeof(*k));
	if (k)
		k->key = malloc(key.len ? key.len : 1);
	if (!k || !k->key) {
		if (k)
			free(k);
		fail(l, REPL_WRITE_FAILURE, "out of memory");
		return;
	}
	memcpy(k->table_id, tid, 16);
	memcpy(k->key, key.ptr, key.len);
	k->key_len = key.len;
	k->head = k->tail = l;
	k->next = cs->locks;
	cs->locks = k;
	l->lock = k;
	l->locked = true;
	lead_start(l);
}

/* ---- the coordinator ----------------------------------------------------- */

static void multi_done(void *arg, const struct repl_result *res)
{
	struct multi *mu = arg;
	if (res->outcome != REPL_OK && !mu->failed) {
		mu->failed = true;
		mu->res = *res;
	}
	if (--mu->left)
		return;
	if (!mu->failed)
		repl_result_init(&mu->res, REPL_OK, mu->res.cl);
	mu->done(mu->arg, &mu->res);
	free(mu);
}

static struct fwd *fwd_take(struct repl *r, uint64_t id)
{
	for (struct fwd **p = r->ctr ? &r->ctr->fwds : NULL; p && *p;
	     p = &(*p)->next)
		if ((*p)->id == id) {
			struct fwd *f = *p;
			*p = f->next;
			return f;
		}
	return NULL;
}

static void fwd_free(struct fwd *f)
{
	env_timer_free(f->r->env, f->timer);
	free(f);
}

static void fwd_timeout(void *arg)
{
	struct fwd *f = arg;
	struct repl *r = f->r;
	if (fwd_take(r, f->id) != f)
		return;
	struct repl_result res;
	repl_result_init(&res, REPL_WRITE_TIMEOUT, f->cl);
	res.write_type = REPL_WRITE_COUNTER;
	res.required = f->block_for;
	res.alive = 0;
	snprintf(res.msg, sizeof(res.msg),
		 "Operation timed out - received only 0 responses.");
	r->st.write_timeouts++;
	repl_write_done_fn done = f->done;
	void *darg = f->arg;
	fwd_free(f);
	done(darg, &res);
}

/* The counter leader of a partition among its replicas, or -1 with `res`
 * filled (Unavailable). */
static int pick_leader(struct repl *r, struct ring *ring,
		       const struct ring_replicas *reps, int cl, int block_for,
		       struct repl_result *res)
{
	int self = ring_local_endpoint(ring);
	for (size_t i = 0; i < reps->n_natural; i++)
		if ((int)reps->natural[i] == self)
			return self;
	const char *ldc = repl_local_dc(ring);
	uint32_t local[64], any[64];
	size_t nl = 0, na = 0;
	for (size_t i = 0; i < reps->n_natural && i < 64; i++) {
		const struct ring_endpoint *e =
			ring_endpoint_get(ring, reps->natural[i]);
		if (!r->hooks.is_alive(r->hooks.arg, &e->addr))
			continue;
		any[na++] = reps->natural[i];
		if (ldc && strcmp(e->dc, ldc) == 0)
			local[nl++] = reps->natural[i];
	}
	if (nl)
		return (int)local[env_random(r->env) % nl];
	bool dc_local = cl == REPL_CL_LOCAL_ONE || cl == REPL_CL_LOCAL_QUORUM;
	if (na && !dc_local) {
		if (self >= 0) {
			uint32_t best = any[0];
			for (size_t i = 1; i < na; i++)
				if (ring_snitch_proximity(ring, (size_t)self,
							  any[i]) <
				    ring_snitch_proximity(ring, (size_t)self,
							  best))
					best = any[i];
			return (int)best;
		}
		return (int)any[0];
	}
	repl_result_init(res, REPL_UNAVAILABLE, cl);
	res->required = block_for;
	res->alive = 0;
	snprintf(res->msg, sizeof(res->msg),
		 "Cannot achieve consistency level %s", repl_cl_name(cl));
	return -1;
}

/* Sends one partition's deltas to `leader`; its answer (or the timeout)
 * completes `done`. */
static void forward(struct repl *r, struct ring *ring, uint32_t leader,
		    const struct storage_mutation *m, int cl, int block_for,
		    const uint8_t *trace, uint64_t start_us,
		    repl_write_done_fn done, void *arg)
{
	struct ctr_state *cs = state(r);
	struct fwd *f = cs ? zcalloc(1, sizeof(*f)) : NULL;
	struct buf enc;
	buf_init(&enc);
	if (!f || !(f->timer = env_timer_new(r->env, fwd_timeout, f)) ||
	    storage_mutation_encode(m, &enc) != 0) {
		if (f && f->timer)
			env_timer_free(r->env, f->timer);
		free(f);
		buf_free(&enc);
		struct repl_result res;
		repl_result_init(&res, REPL_WRITE_FAILURE, cl);
		res.write_type = REPL_WRITE_COUNTER;
		snprintf(res.msg, sizeof(res.msg), "out of memory");
		done(arg, &res);
		return;
	}
	f->r = r;
	f->id = ++r->next_id;
	f->cl = cl;
	f->block_for = block_for;
	f->done = done;
	f->arg = arg;
	f->next = cs->fwds;
	cs->fwds = f;
	/* the leader's own replication has write_request_timeout: give it
	 * that, and the forward's hop, before calling it lost */
	uint64_t ms = r->o.write_timeout_ms + r->o.write_timeout_ms / 2;
	env_timer_arm(r->env, f->timer, ms * 1000);
	Cassini__Replication__CounterReq msg =
		CASSINI__REPLICATION__COUNTER_REQ__INIT;
	msg.id = f->id;
	msg.deadline_us = repl_deadline_us(r, r->o.write_timeout_ms);
	msg.mutation.data = enc.data;
	msg.mutation.len = enc.len;
	msg.cl = (uint32_t)cl;
	const struct inet_addr *to = &ring_endpoint_get(ring, leader)->addr;
	if (trace) {
		char peer[REPL_TRACE_PEER_LEN];
		repl_trace_peer(to, peer);
		repl_trace(r, trace, "Native-Transport-Requests-1", start_us,
			   "Enqueuing counter update to %s", peer);
		msg.trace_session.data = (uint8_t *)trace;
		msg.trace_session.len = 16;
	}
	/* a failed send (queue full, peer in backoff) times out */
	repl_send_packed(r, to, REPL_VERB_COUNTER, &msg.base);
	buf_free(&enc);
}

void repl_counter_write(struct repl *r, const struct repl_mutation *muts,
			size_t n, int cl, repl_write_done_fn done, void *arg)
{
	repl_counter_write_traced(r, muts, n, cl, NULL, done, arg);
}

void repl_counter_write_traced(struct repl *r, const struct repl_mutation *muts,
			       size_t n, int cl, const uint8_t *trace,
			       repl_write_done_fn done, void *arg)
{
	uint64_t start_us = repl_now_us(r);
	struct repl_result res;
	repl_result_init(&res, REPL_INVALID, cl);
	res.write_type = REPL_WRITE_COUNTER;
	r->st.counter_writes++;
	if (cl == REPL_CL_SERIAL || cl == REPL_CL_LOCAL_SERIAL) {
		snprintf(res.msg, sizeof(res.msg),
			 "Counter operations are inherently non-serializable");
		done(arg, &res);
		return;
	}
	if (cl == REPL_CL_ANY) {
		const struct storage_table_meta *t =
			n ? r->store->meta(r->store_arg,
					   storage_mutation_table_id(muts[0].m))
			  : NULL;
		snprintf(res.msg, sizeof(res.msg),
			 "Consistency level ANY is not yet supported for "
			 "counter table %s",
			 t ? t->name : "?");
		if (t)
			storage_table_meta_unref(t);
		done(arg, &res);
		return;
	}
	if (n == 0) {
		repl_result_init(&res, REPL_OK, cl);
		done(arg, &res);
		return;
	}
	if (repl_overloaded(r, &res, cl)) {
		done(arg, &res);
		return;
	}
	struct ring *ring = r->hooks.ring(r->hooks.arg);
	const char *ldc = repl_local_dc(ring);
	int *leaders = calloc(n, sizeof(*leaders));
	int *bfs = calloc(n, sizeof(*bfs));
	struct multi *mu = zcalloc(1, sizeof(*mu));
	if (!leaders || !bfs || !mu) {
		free(leaders);
		free(bfs);
		free(mu);
		repl_result_init(&res, REPL_WRITE_FAILURE, cl);
		snprintf(res.msg, sizeof(res.msg), "out of memory");
		done(arg, &res);
		return;
	}
	/* Unavailable is decided for every partition before any is sent */
	for (size_t k = 0; k < n; k++) {
		struct ring_replicas reps;
		const struct storage_mutation *m = muts[k].m;
		int rc = ring_replicas_for_token(ring, muts[k].strategy,
						 storage_mutation_token(m),
						 &reps);
		size_t nr = rc ? 0 : reps.n_natural + reps.n_pending;
		struct repl_live live[64];
		for (size_t i = 0; i < nr && i < 64; i++) {
			uint32_t ep =
				i < reps.n_natural
					? reps.natural[i]
					: reps.pending[i - reps.n_natural];
			const struct ring_endpoint *e =
				ring_endpoint_get(ring, ep);
			live[i] = (struct repl_live){
				e->dc, (int)ep == ring_local_endpoint(ring) ||
					       r->hooks.is_alive(r->hooks.arg,
								 &e->addr)};
		}
		bfs[k] = repl_block_for(cl, muts[k].strategy, ldc);
		if (nr == 0 || nr > 64) {
			repl_result_init(&res, REPL_UNAVAILABLE, cl);
			res.required = bfs[k];
			snprintf(res.msg, sizeof(res.msg),
				 "Cannot achieve consistency level %s",
				 repl_cl_name(cl));
			goto refuse;
		}
		if (repl_check_live(cl, muts[k].strategy, ldc, live, nr,
				    reps.n_pending, &res) != 0)
			goto refuse;
		leaders[k] = pick_leader(r, ring, &reps, cl, bfs[k], &res);
		if (leaders[k] < 0)
			goto refuse;
	}
	mu->left = n;
	mu->done = done;
	mu->arg = arg;
	mu->res.cl = cl;
	/* the answers may come inline: hold the count until all started */
	mu->left++;
	int self = ring_local_endpoint(ring);
	for (size_t k = 0; k < n; k++) {
		if (leaders[k] != self) {
			forward(r, ring, (uint32_t)leaders[k], muts[k].m, cl,
				bfs[k], trace, start_us, multi_done, mu);
			continue;
		}
		struct buf enc;
		buf_init(&enc);
		struct storage_mutation *copy =
			storage_mutation_encode(muts[k].m, &enc) == 0
				? storage_mutation_decode(enc.data, enc.len)
				: NULL;
		buf_free(&enc);
		if (!copy) {
			repl_result_init(&res, REPL_WRITE_FAILURE, cl);
			snprintf(res.msg, sizeof(res.msg), "%s", err_msg());
			multi_done(mu, &res);
			continue;
		}
		lead_submit(r, copy, cl, trace, multi_done, mu);
	}
	free(leaders);
	free(bfs);
	repl_result_init(&res, REPL_OK, cl);
	multi_done(mu, &res);
	return;
refuse:
	if (res.outcome == REPL_UNAVAILABLE)
		r->st.unavailables++;
	res.write_type = REPL_WRITE_COUNTER;
	free(leaders);
	free(bfs);
	free(mu);
	done(arg, &res);
}

/* ---- the wire ------------------------------------------------------------ */

struct remote {
	struct repl *r;
	struct inet_addr from;
	uint64_t id;
	bool traced;
	uint8_t trace[16];
	uint64_t start_us;
};

static void remote_done(void *arg, const struct repl_result *res)
{
	struct remote *rm = arg;
	if (rm->traced) {
		char peer[REPL_TRACE_PEER_LEN];
		repl_trace_peer(&rm->from, peer);
		repl_trace(rm->r, rm->trace, CTR_THREAD, rm->start_us,
			   "Enqueuing response to %s", peer);
	}
	Cassini__Replication__CounterRsp rsp =
		CASSINI__REPLICATION__COUNTER_RSP__INIT;
	rsp.id = rm->id;
	rsp.outcome = (uint32_t)res->outcome;
	rsp.cl = (uint32_t)res->cl;
	rsp.required = res->required;
	rsp.alive = res->alive;
	rsp.write_type = (uint32_t)res->write_type;
	rsp.msg = (char *)res->msg;
	repl_send_packed(rm->r, &rm->from, REPL_VERB_COUNTER_RSP, &rsp.base);
	free(rm);
}

static void serve_counter(struct repl *r, const struct inet_addr *from,
			  const uint8_t *msg, size_t len)
{
	Cassini__Replication__CounterReq *req =
		cassini__replication__counter_req__unpack(NULL, len, msg);
	if (!req) {
		LOG_WARN("dropping a malformed counter request");
		return;
	}
	if (req->deadline_us && env_wall_us(r->env) > req->deadline_us) {
		r->st.dropped[REPL_VERB_COUNTER]++;
		cassini__replication__counter_req__free_unpacked(req, NULL);
		return;
	}
	struct remote *rm = malloc(sizeof(*rm));
	struct storage_mutation *m =
		storage_mutation_decode(req->mutation.data, req->mutation.len);
	if (!rm || !m) {
		free(rm);
		storage_mutation_delete(m);
		LOG_WARN("dropping a counter request: %s", err_msg());
		cassini__replication__counter_req__free_unpacked(req, NULL);
		return; /* the coordinator times out */
	}
	*rm = (struct remote){.r = r,
			      .from = *from,
			      .id = req->id,
			      .traced = req->trace_session.len == 16,
			      .start_us = repl_now_us(r)};
	if (rm->traced)
		memcpy(rm->trace, req->trace_session.data, 16);
	int cl = (int)req->cl;
	cassini__replication__counter_req__free_unpacked(req, NULL);
	lead_submit(r, m, cl, rm->traced ? rm->trace : NULL, remote_done, rm);
}

static void counter_answer(struct repl *r, const uint8_t *msg, size_t len)
{
	Cassini__Replication__CounterRsp *rsp =
		cassini__replication__counter_rsp__unpack(NULL, len, msg);
	if (!rsp)
		return;
	struct fwd *f = fwd_take(r, rsp->id);
	if (!f) {
		cassini__replication__counter_rsp__free_unpacked(rsp, NULL);
		return;
	}
	struct repl_result res;
	repl_result_init(&res, (enum repl_outcome)rsp->outcome, (int)rsp->cl);
	res.required = rsp->required;
	res.alive = rsp->alive;
	res.write_type = rsp->write_type <= REPL_WRITE_COUNTER
				 ? (enum repl_write_type)rsp->write_type
				 : REPL_WRITE_COUNTER;
	snprintf(res.msg, sizeof(res.msg), "%s", rsp->msg ? rsp->msg : "");
	if (res.outcome > REPL_TRUNCATE_ERROR)
		res.outcome = REPL_WRITE_FAILURE;
	if (res.outcome == REPL_WRITE_TIMEOUT)
		r->st.write_timeouts++;
	cassini__replication__counter_rsp__free_unpacked(rsp, NULL);
	repl_write_done_fn done = f->done;
	void *arg = f->arg;
	fwd_free(f);
	done(arg, &res);
}

bool repl_counter_receive(struct repl *r, const struct inet_addr *from,
			  uint32_t verb, const uint8_t *msg, size_t len)
{
	switch (verb) {
	case REPL_VERB_COUNTER:
		serve_counter(r, from, msg, len);
		return true;
	case REPL_VERB_COUNTER_RSP:
		counter_answer(r, msg, len);
		return true;
	default:
		return false;
	}
}

/* A pending request's completion argument, when the request is dropped
 * without its callback (repl_delete). */
static void drop_arg(repl_write_done_fn done, void *arg)
{
	if (done == remote_done) {
		free(arg);
	} else if (done == multi_done) {
		struct multi *mu = arg;
		if (--mu->left == 0)
			free(mu);
	}
}

void repl_counter_free(struct repl *r)
{
	struct ctr_state *cs = r->ctr;
	if (!cs)
		return;
	while (cs->leads) {
		struct lead *l = cs->leads;
		l->lock = NULL;
		drop_arg(l->done, l->arg);
		lead_free(l);
	}
	while (cs->locks)
		lock_free(cs, cs->locks);
	while (cs->fwds) {
		struct fwd *f = cs->fwds;
		cs->fwds = f->next;
		drop_arg(f->done, f->arg);
		fwd_free(f);
	}
	env_timer_free(r->env, cs->kick);
	free(cs);
	r->ctr = NULL;
}
