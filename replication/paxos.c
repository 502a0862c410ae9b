/*
 * Paxos over the env seam (paxos.h): the proposer's rounds and the
 * acceptor's answers.
 *
 * Proposer: one struct pxop per CAS; its `round` numbers attempts, and an
 * answer from an earlier attempt (a late message) is ignored. Stages:
 *
 *   PREPARE -> (REPROPOSE -> COMMIT_OTHER | REPAIR) -> restart
 *           -> decide -> PROPOSE -> COMMIT -> done
 *   any refusal that leaves no quorum -> BACKOFF -> restart (new ballot)
 *
 * Acceptor: messages are handled one at a time per partition key (struct
 * akey queues the rest), so the store's asynchronous load/save/read/apply
 * never interleave on one partition's registers.
 *
 * Messages to this node itself go through a zero-delay timer, never inline,
 * so an answer never re-enters a send loop.
 */
#include "replication/paxos.h"

#include "common/err.h"
#include "common/uuid.h"
#include "common/zalloc.h"
#include "replication/paxos_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OP_BUCKETS     256
#define KEY_BUCKETS    256
#define BACKOFF_CAP_US 100000

enum stage {
	ST_PREPARE,
	ST_REPROPOSE,    /* completing an in-progress proposal */
	ST_COMMIT_OTHER, /* committing it */
	ST_REPAIR,       /* sending the newest commit to promisers lacking it */
	ST_PROPOSE,
	ST_COMMIT,
	ST_BACKOFF,
};

struct pxrep {
	bool answered, ok;
	struct paxos_ballot accepted, committed;
	struct buf accepted_update, committed_update, read;
	bool repair; /* ST_REPAIR: sent the commit */
};

struct pxop {
	struct pxop *next; /* id hash chain */
	struct pxop *all_prev, *all_next;
	struct paxos *p;
	uint64_t id;
	uint32_t round;
	enum stage stage;
	struct buf key;
	struct inet_addr *reps;
	struct pxrep *r;
	size_t n;
	int needed, commit_bf;
	bool is_read;
	int self_idx; /* wait_self: our own index in reps */
	paxos_merge_fn merge;
	paxos_decide_fn decide;
	void *decide_arg;
	paxos_done_cb done;
	void *arg;
	uint64_t start_us;                /* monotonic */
	struct paxos_ballot ballot, seen; /* ours; highest promise refused by */
	int oks, refusals, waiting;
	struct buf update; /* what the current PROPOSE/COMMIT carries */
	struct paxos_ballot commit_ballot; /* ST_REPAIR: the newest commit */
	struct buf current;                /* the merged read */
	int contentions;
	struct env_timer *timer;
	bool traced; /* in trace session `trace` */
	uint8_t trace[16];
};

struct amsg {
	struct amsg *next;
	struct inet_addr from;
	uint32_t verb;
	struct paxos_msg m; /* m.trace: the request's session, or NULL */
	void *owner;
	uint64_t at_us; /* monotonic, when it arrived */
};

struct akey {
	struct akey *next;
	struct buf key;
	struct amsg *head, *tail;
	struct paxos *p;
	struct paxos_state st; /* the running message's copy */
};

struct selfmsg {
	struct selfmsg *next;
	uint32_t verb;
	struct buf bytes;
};

struct paxos {
	struct env *env;
	struct paxos_options o;
	const struct paxos_store_ops *store;
	void *store_arg;
	struct paxos_clock clock;
	uint64_t next_id;
	struct pxop *ops[OP_BUCKETS];
	struct pxop *all;
	struct akey *keys[KEY_BUCKETS];
	struct selfmsg *self_head, *self_tail;
	struct env_timer *self_timer;
	struct paxos_stats st;
	bool test_propose_self_only; /* paxos_test_propose_self_only */
};

void paxos_options_default(struct paxos_options *o)
{
	memset(o, 0, sizeof(*o));
	o->write_timeout_ms = 2000;
	o->contention_timeout_ms = 1000;
}

static void self_fire(void *arg);

struct paxos *paxos_new(struct env *env, const struct paxos_options *o,
			const struct paxos_store_ops *store, void *store_arg)
{
	struct paxos *p = zcalloc(1, sizeof(*p));
	if (!p) {
		err_set(ERR_NOMEM, "paxos");
		return NULL;
	}
	p->env = env;
	p->o = *o;
	p->store = store;
	p->store_arg = store_arg;
	p->next_id = (env_random(env) | 1) & 0xffffffffffffULL;
	paxos_clock_init(&p->clock, env_random(env), o->ballot_floor_us);
	p->self_timer = env_timer_new(env, self_fire, p);
	if (!p->self_timer) {
		free(p);
		err_set(ERR_NOMEM, "paxos timer");
		return NULL;
	}
	return p;
}

static void op_free(struct pxop *op);

void paxos_delete(struct paxos *p)
{
	if (!p)
		return;
	while (p->all)
		op_free(p->all);
	for (size_t b = 0; b < KEY_BUCKETS; b++) {
		while (p->keys[b]) {
			struct akey *k = p->keys[b];
			p->keys[b] = k->next;
			while (k->head) {
				struct amsg *a = k->head;
				k->head = a->next;
				paxos_msg_free(a->verb, a->owner);
				free(a);
			}
			paxos_state_free(&k->st);
			buf_free(&k->key);
			free(k);
		}
	}
	while (p->self_head) {
		struct selfmsg *s = p->self_head;
		p->self_head = s->next;
		buf_free(&s->bytes);
		free(s);
	}
	env_timer_free(p->env, p->self_timer);
	free(p);
}

void paxos_get_stats(const struct paxos *p, struct paxos_stats *out)
{
	*out = p->st;
}

int64_t paxos_last_ballot_us(const struct paxos *p)
{
	return p->clock.last_us;
}

static uint64_t hash_bytes(struct slice s)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < s.len; i++)
		h = (h ^ s.ptr[i]) * 1099511628211ULL;
	return h;
}

/* ---- sending --------------------------------------------------------------
 */

static void self_fire(void *arg)
{
	struct paxos *p = arg;
	/* only what was queued before this run: answers queue more */
	struct selfmsg *s = p->self_head;
	p->self_head = p->self_tail = NULL;
	while (s) {
		struct selfmsg *next = s->next;
		paxos_receive(p, &p->o.self, s->verb, s->bytes.data,
			      s->bytes.len);
		buf_free(&s->bytes);
		free(s);
		s = next;
	}
}

/* ---- trace events ---------------------------------------------------------
 */

/* Cassandra 4.1's verbs of Paxos v2. */
static const char *verb_name(uint32_t verb)
{
	switch (verb) {
	case PAXOS_VERB_PREPARE:
		return "PAXOS2_PREPARE_REQ";
	case PAXOS_VERB_PREPARE_RSP:
		return "PAXOS2_PREPARE_RSP";
	case PAXOS_VERB_PROPOSE:
		return "PAXOS2_PROPOSE_REQ";
	case PAXOS_VERB_PROPOSE_RSP:
		return "PAXOS2_PROPOSE_RSP";
	case PAXOS_VERB_COMMIT:
		return "PAXOS_COMMIT_REQ";
	default:
		return "PAXOS_COMMIT_RSP";
	}
}

/* One event of `session` (NULL: none), `start_us` when the step began. */
static void px_trace(struct paxos *p, const uint8_t *session,
		     const char *thread, uint64_t start_us, const char *fmt,
		     ...) __attribute__((format(printf, 5, 6)));
static void px_trace(struct paxos *p, const uint8_t *session,
		     const char *thread, uint64_t start_us, const char *fmt,
		     ...)
{
	if (!session || !p->o.trace)
		return;
	char activity[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(activity, sizeof(activity), fmt, ap);
	va_end(ap);
	p->o.trace(p->o.trace_arg, session, thread,
		   (int64_t)(env_mono_us(p->env) - start_us), activity);
}

/* "/127.0.0.1:7000", a peer as Cassandra 4 names one. */
static void peer_name(const struct inet_addr *a, char out[INET_ADDR_STRLEN + 1])
{
	out[0] = '/';
	inet_addr_format(a, out + 1, INET_ADDR_STRLEN);
}

static void ballot_text(const struct paxos_ballot *b,
			char out[UUID_TEXT_LEN + 1])
{
	uint8_t u[16];
	paxos_ballot_to_uuid(b, u);
	uuid_format(u, out);
}

/* Where a traced message goes: its session, thread and step start. */
struct px_tr {
	const uint8_t *session;
	const char *thread;
	uint64_t start_us;
};

static void send_msg(struct paxos *p, const struct inet_addr *to, uint32_t verb,
		     const struct paxos_msg *m, const struct px_tr *tr)
{
	struct buf b = {0};
	if (paxos_msg_encode(verb, m, &b) < 0)
		return; /* a lost message: the round times out */
	if (tr && tr->session && !inet_addr_eq(to, &p->o.self)) {
		char peer[INET_ADDR_STRLEN + 1];
		peer_name(to, peer);
		px_trace(p, tr->session, tr->thread, tr->start_us,
			 "Sending %s message to %s message size %zu bytes",
			 verb_name(verb), peer, b.len);
	}
	if (inet_addr_eq(to, &p->o.self)) {
		struct selfmsg *s = zcalloc(1, sizeof(*s));
		if (!s) {
			buf_free(&b);
			return;
		}
		s->verb = verb;
		s->bytes = b;
		if (p->self_tail)
			p->self_tail->next = s;
		else
			p->self_head = s;
		p->self_tail = s;
		env_timer_arm(p->env, p->self_timer, 0);
		return;
	}
	env_send(p->env, to, verb, b.data, b.len);
	buf_free(&b);
}

/* ---- proposer: operations -------------------------------------------------
 */

static struct pxop **op_bucket(struct paxos *p, uint64_t id)
{
	return &p->ops[id % OP_BUCKETS];
}

static struct pxop *op_find(struct paxos *p, uint64_t id)
{
	for (struct pxop *op = *op_bucket(p, id); op; op = op->next)
		if (op->id == id)
			return op;
	return NULL;
}

static void reps_clear(struct pxop *op)
{
	for (size_t i = 0; i < op->n; i++) {
		struct pxrep *r = &op->r[i];
		buf_free(&r->accepted_update);
		buf_free(&r->committed_update);
		buf_free(&r->read);
		memset(r, 0, sizeof(*r));
	}
}

static void op_free(struct pxop *op)
{
	struct paxos *p = op->p;
	for (struct pxop **pp = op_bucket(p, op->id); *pp; pp = &(*pp)->next)
		if (*pp == op) {
			*pp = op->next;
			break;
		}
	if (op->all_prev)
		op->all_prev->all_next = op->all_next;
	else
		p->all = op->all_next;
	if (op->all_next)
		op->all_next->all_prev = op->all_prev;
	env_timer_free(p->env, op->timer);
	reps_clear(op);
	free(op->r);
	free(op->reps);
	buf_free(&op->key);
	buf_free(&op->update);
	buf_free(&op->current);
	free(op);
}

static void op_finish(struct pxop *op, enum paxos_outcome o, bool applied,
		      enum paxos_phase phase, int received, int block_for,
		      bool partial)
{
	struct paxos *p = op->p;
	struct paxos_result res = {0};
	res.outcome = o;
	res.applied = applied;
	res.current = op->current;
	op->current = (struct buf){0};
	res.phase = phase;
	res.received = received;
	res.block_for = block_for;
	res.proposal_partial = partial;
	res.contentions = op->contentions;
	if (o == PAXOS_WRITE_TIMEOUT)
		p->st.write_timeouts++;
	if (o == PAXOS_READ_TIMEOUT)
		p->st.read_timeouts++;
	if (partial)
		p->st.unknown_outcomes++;
	paxos_done_cb done = op->done;
	void *arg = op->arg;
	op_free(op);
	done(arg, &res);
}

static void op_timeout_now(struct pxop *op, enum paxos_phase phase,
			   int received, int block_for, bool partial)
{
	op_finish(op, op->is_read ? PAXOS_READ_TIMEOUT : PAXOS_WRITE_TIMEOUT,
		  false, phase, received, block_for, partial);
}

static void send_all(struct pxop *op, uint32_t verb, bool only_repair)
{
	struct paxos *p = op->p;
	struct paxos_msg m = {0};
	m.id = op->id;
	m.round = op->round;
	m.deadline_us =
		env_wall_us(p->env) + (int64_t)p->o.write_timeout_ms * 1000;
	m.key = buf_slice(&op->key);
	m.ballot = op->stage == ST_REPAIR ? op->commit_ballot : op->ballot;
	m.update = buf_slice(&op->update);
	m.trace = op->traced ? op->trace : NULL;
	struct px_tr tr = {m.trace, "Native-Transport-Requests-1",
			   op->start_us};
	bool self_only = p->test_propose_self_only &&
			 verb == PAXOS_VERB_PROPOSE && op->stage == ST_PROPOSE;
	for (size_t i = 0; i < op->n; i++)
		if ((!only_repair || op->r[i].repair) &&
		    (!self_only || inet_addr_eq(&op->reps[i], &p->o.self)))
			send_msg(p, &op->reps[i], verb, &m, &tr);
}

void paxos_test_propose_self_only(struct paxos *p, bool on)
{
	p->test_propose_self_only = on;
}

/* A new stage of the same round: every replica's answer is awaited anew. */
static void stage_begin(struct pxop *op, enum stage st)
{
	op->stage = st;
	op->oks = op->refusals = 0;
	for (size_t i = 0; i < op->n; i++)
		op->r[i].answered = op->r[i].ok = false;
	env_timer_arm(op->p->env, op->timer, op->p->o.write_timeout_ms * 1000);
}

static void round_start(struct pxop *op)
{
	struct paxos *p = op->p;
	op->round++;
	reps_clear(op);
	buf_clear(&op->update);
	op->ballot =
		paxos_clock_next(&p->clock, env_wall_us(p->env), &op->seen);
	stage_begin(op, ST_PREPARE);
	send_all(op, PAXOS_VERB_PREPARE, false);
}

/* Lost to another proposer: back off (randomised, exponential, capped),
 * then a new round, unless cas_contention_timeout has passed. */
static void contention(struct pxop *op, enum paxos_phase phase)
{
	struct paxos *p = op->p;
	op->contentions++;
	p->st.contentions++;
	uint64_t elapsed = env_mono_us(p->env) - op->start_us;
	if (elapsed >= p->o.contention_timeout_ms * 1000) {
		op_timeout_now(op, phase, op->oks, op->needed, false);
		return;
	}
	uint64_t cap = 1000ULL << (op->contentions < 7 ? op->contentions : 7);
	if (cap > BACKOFF_CAP_US)
		cap = BACKOFF_CAP_US;
	op->stage = ST_BACKOFF;
	op->round++; /* answers still on their way are stale now */
	env_timer_arm(p->env, op->timer, env_random(p->env) % cap);
}

static void on_timer(void *arg)
{
	struct pxop *op = arg;
	switch (op->stage) {
	case ST_BACKOFF:
		round_start(op);
		return;
	case ST_PREPARE:
	case ST_REPAIR:
		op_timeout_now(op, PAXOS_PHASE_PREPARE, op->oks, op->needed,
			       false);
		return;
	case ST_REPROPOSE:
	case ST_COMMIT_OTHER:
		op_timeout_now(op, PAXOS_PHASE_PREPARE, 0, op->needed, false);
		return;
	case ST_PROPOSE:
		op_timeout_now(op, PAXOS_PHASE_PROPOSE, op->oks, op->needed,
			       op->oks > 0);
		return;
	case ST_COMMIT:
		op_timeout_now(op, PAXOS_PHASE_COMMIT, op->oks, op->commit_bf,
			       false);
		return;
	}
}

void paxos_cas(struct paxos *p, const struct paxos_request *rq,
	       paxos_done_cb done, void *arg)
{
	int self_idx = -1;
	for (size_t i = 0; rq->wait_self && i < rq->n; i++)
		if (inet_addr_eq(&rq->replicas[i], &p->o.self))
			self_idx = (int)i;
	if (rq->wait_self && self_idx < 0) {
		struct paxos_result res = {0};
		res.outcome = PAXOS_FAILED; /* its own promise cannot come */
		done(arg, &res);
		return;
	}
	struct pxop *op = zcalloc(1, sizeof(*op));
	if (!op)
		goto nomem;
	op->p = p;
	op->self_idx = self_idx;
	op->reps = calloc(rq->n ? rq->n : 1, sizeof(*op->reps));
	op->r = calloc(rq->n ? rq->n : 1, sizeof(*op->r));
	op->timer = env_timer_new(p->env, on_timer, op);
	if (!op->reps || !op->r || !op->timer ||
	    buf_append(&op->key, rq->key.ptr, rq->key.len) < 0) {
		env_timer_free(p->env, op->timer);
		free(op->reps);
		free(op->r);
		buf_free(&op->key);
		free(op);
		goto nomem;
	}
	memcpy(op->reps, rq->replicas, rq->n * sizeof(*op->reps));
	op->n = rq->n;
	op->needed = rq->needed;
	op->commit_bf = rq->commit_block_for;
	op->is_read = rq->is_read;
	op->merge = rq->merge;
	op->decide = rq->decide;
	op->decide_arg = rq->decide_arg;
	op->done = done;
	op->arg = arg;
	op->start_us = env_mono_us(p->env);
	if (rq->trace_session) {
		op->traced = true;
		memcpy(op->trace, rq->trace_session, 16);
	}
	op->id = p->next_id++;
	struct pxop **b = op_bucket(p, op->id);
	op->next = *b;
	*b = op;
	op->all_next = p->all;
	if (p->all)
		p->all->all_prev = op;
	p->all = op;
	if (rq->is_read)
		p->st.reads++;
	else
		p->st.cas++;
	round_start(op);
	return;
nomem : {
	struct paxos_result res = {0};
	res.outcome = PAXOS_FAILED;
	done(arg, &res);
}
}

/* ---- proposer: answers ----------------------------------------------------
 */

static void promises_complete(struct pxop *op)
{
	struct paxos *p = op->p;
	struct pxrep *mra = NULL, *mrc = NULL;
	for (size_t i = 0; i < op->n; i++) {
		struct pxrep *r = &op->r[i];
		if (!r->ok)
			continue;
		if (!mrc ||
		    paxos_ballot_cmp(&r->committed, &mrc->committed) > 0)
			mrc = r;
		if (!paxos_ballot_is_none(&r->accepted) &&
		    (!mra ||
		     paxos_ballot_cmp(&r->accepted, &mra->accepted) > 0))
			mra = r;
	}
	/* 1. an accepted proposal newer than every commit: finish it first */
	if (mra && paxos_ballot_cmp(&mra->accepted, &mrc->committed) > 0 &&
	    !p->o.test_skip_in_progress) {
		p->st.in_progress_completed++;
		buf_clear(&op->update);
		if (buf_append(&op->update, mra->accepted_update.data,
			       mra->accepted_update.len) < 0)
			goto fail;
		stage_begin(op, ST_REPROPOSE);
		send_all(op, PAXOS_VERB_PROPOSE, false);
		return;
	}
	/* 2. promisers behind the newest commit get it, then a new round */
	int lag = 0;
	for (size_t i = 0; i < op->n; i++) {
		struct pxrep *r = &op->r[i];
		r->repair = r->ok && paxos_ballot_cmp(&r->committed,
						      &mrc->committed) < 0;
		lag += r->repair;
	}
	if (lag) {
		p->st.laggard_commits += (uint64_t)lag;
		buf_clear(&op->update);
		if (buf_append(&op->update, mrc->committed_update.data,
			       mrc->committed_update.len) < 0)
			goto fail;
		op->commit_ballot = mrc->committed;
		stage_begin(op, ST_REPAIR); /* keeps the repair marks */
		op->waiting = lag;
		send_all(op, PAXOS_VERB_COMMIT, true);
		return;
	}
	/* 3. the quorum agrees on the newest commit: read and decide */
	struct slice *reads = calloc(op->n, sizeof(*reads));
	if (!reads)
		goto fail;
	size_t nr = 0;
	for (size_t i = 0; i < op->n; i++)
		if (op->r[i].ok)
			reads[nr++] = buf_slice(&op->r[i].read);
	buf_clear(&op->current);
	int mr = op->merge(op->decide_arg, reads, nr, &op->current);
	free(reads);
	if (mr < 0)
		goto fail;
	buf_clear(&op->update);
	int d = op->decide(op->decide_arg, &op->ballot, buf_slice(&op->current),
			   &op->update);
	if (d < 0)
		goto fail;
	if (d == 0) {
		/* Nothing to write. Safe without an empty proposal: our
		 * promise was a full one (reads promise like writes), so no
		 * lower ballot can be accepted by a quorum after this read,
		 * and every value chosen before it is in the merge. */
		op_finish(op, PAXOS_OK, false, PAXOS_PHASE_PREPARE, 0, 0,
			  false);
		return;
	}
	stage_begin(op, ST_PROPOSE);
	send_all(op, PAXOS_VERB_PROPOSE, false);
	return;
fail:
	op_finish(op, PAXOS_FAILED, false, PAXOS_PHASE_PREPARE, 0, 0, false);
}

static void learn_promise(struct pxop *op, const struct paxos_ballot *b)
{
	if (paxos_ballot_cmp(b, &op->seen) > 0)
		op->seen = *b;
}

static int copy_into(struct buf *b, struct slice s)
{
	buf_clear(b);
	return s.len ? buf_append(b, s.ptr, s.len) : 0;
}

static void on_prepare_rsp(struct pxop *op, struct pxrep *r,
			   const struct paxos_msg *m)
{
	bool self = op->self_idx >= 0 && r == &op->r[op->self_idx];
	if (!m->ok) {
		learn_promise(op, &m->promised);
		op->refusals++;
		if ((int)op->n - op->refusals < op->needed || self)
			contention(op, PAXOS_PHASE_PREPARE);
		return;
	}
	r->ok = true;
	r->accepted = m->accepted;
	r->committed = m->committed;
	if (copy_into(&r->accepted_update, m->accepted_update) < 0 ||
	    copy_into(&r->committed_update, m->committed_update) < 0 ||
	    copy_into(&r->read, m->read) < 0) {
		op_finish(op, PAXOS_FAILED, false, PAXOS_PHASE_PREPARE, 0, 0,
			  false);
		return;
	}
	/* wait_self: a quorum without our own promise may not hold the
	 * proposal we are here to finish; the round waits for it. */
	if (++op->oks >= op->needed &&
	    (op->self_idx < 0 || op->r[op->self_idx].ok))
		promises_complete(op);
}

static void on_propose_rsp(struct pxop *op, const struct paxos_msg *m)
{
	if (m->ok) {
		if (++op->oks < op->needed)
			return;
		/* chosen: commit it everywhere */
		bool own = op->stage == ST_PROPOSE;
		stage_begin(op, own ? ST_COMMIT : ST_COMMIT_OTHER);
		send_all(op, PAXOS_VERB_COMMIT, false);
		if (own && op->commit_bf <= 0)
			op_finish(op, PAXOS_OK, true, PAXOS_PHASE_COMMIT, 0, 0,
				  false);
		return;
	}
	learn_promise(op, &m->promised);
	op->refusals++;
	if ((int)op->n - op->refusals >= op->needed)
		return;
	if (op->stage == ST_REPROPOSE) {
		/* someone else's value: whoever beat us completes it */
		contention(op, PAXOS_PHASE_PREPARE);
		return;
	}
	if (op->oks > 0) {
		/* accepted somewhere: a later proposer may complete it, so
		 * neither "not applied" nor a retry is true (CASSANDRA-6013) */
		op_timeout_now(op, PAXOS_PHASE_PROPOSE, op->oks, op->needed,
			       true);
		return;
	}
	if (op->refusals == (int)op->n)
		contention(op, PAXOS_PHASE_PROPOSE); /* nobody has it */
	/* else: wait for the rest; one acceptance makes it unknown */
}

static void on_commit_rsp(struct pxop *op, const struct paxos_msg *m)
{
	if (!m->ok) {
		op->refusals++;
		int want = op->stage == ST_COMMIT   ? op->commit_bf
			   : op->stage == ST_REPAIR ? op->waiting
						    : op->needed;
		if ((int)op->n - op->refusals < want || op->stage == ST_REPAIR)
			op_timeout_now(op,
				       op->stage == ST_COMMIT
					       ? PAXOS_PHASE_COMMIT
					       : PAXOS_PHASE_PREPARE,
				       op->oks, want, false);
		return;
	}
	op->oks++;
	switch (op->stage) {
	case ST_COMMIT:
		if (op->oks == op->commit_bf)
			op_finish(op, PAXOS_OK, true, PAXOS_PHASE_COMMIT, 0, 0,
				  false);
		return;
	case ST_COMMIT_OTHER:
		if (op->oks == op->needed)
			round_start(op);
		return;
	case ST_REPAIR:
		if (op->oks == op->waiting)
			round_start(op);
		return;
	default:
		return;
	}
}

static void proposer_answer(struct paxos *p, const struct inet_addr *from,
			    uint32_t verb, const struct paxos_msg *m)
{
	struct pxop *op = op_find(p, m->id);
	if (!op || op->round != m->round)
		return; /* finished, or an earlier attempt's */
	size_t i;
	for (i = 0; i < op->n; i++)
		if (inet_addr_eq(&op->reps[i], from))
			break;
	if (i == op->n || op->r[i].answered)
		return;
	enum stage st = op->stage;
	bool fits = (verb == PAXOS_VERB_PREPARE_RSP && st == ST_PREPARE) ||
		    (verb == PAXOS_VERB_PROPOSE_RSP &&
		     (st == ST_PROPOSE || st == ST_REPROPOSE)) ||
		    (verb == PAXOS_VERB_COMMIT_RSP &&
		     (st == ST_COMMIT || st == ST_COMMIT_OTHER ||
		      (st == ST_REPAIR && op->r[i].repair)));
	if (!fits)
		return; /* an earlier stage's late answer */
	if (op->traced && !inet_addr_eq(from, &p->o.self)) {
		char peer[INET_ADDR_STRLEN + 1];
		peer_name(from, peer);
		px_trace(p, op->trace, "Messaging-EventLoop-1", op->start_us,
			 "%s message received from %s", verb_name(verb), peer);
		px_trace(p, op->trace, "RequestResponseStage-1", op->start_us,
			 "Processing response from %s", peer);
	}
	op->r[i].answered = true;
	if (verb == PAXOS_VERB_PREPARE_RSP)
		on_prepare_rsp(op, &op->r[i], m);
	else if (verb == PAXOS_VERB_PROPOSE_RSP)
		on_propose_rsp(op, m);
	else
		on_commit_rsp(op, m);
}

/* ---- acceptor -------------------------------------------------------------
 */

static struct akey **key_bucket(struct paxos *p, struct slice key)
{
	return &p->keys[hash_bytes(key) % KEY_BUCKETS];
}

static void akey_next(struct akey *k);

static void answer(struct akey *k, struct amsg *a, struct paxos_msg *rsp)
{
	rsp->id = a->m.id;
	rsp->round = a->m.round;
	struct px_tr tr = {a->m.trace, "Messaging-EventLoop-1", a->at_us};
	send_msg(k->p, &a->from, a->verb + 1, rsp, &tr);
}

/* An acceptor's step of a traced request, on Cassandra's stage. */
#define acc_trace(k, ...)                                                      \
	px_trace((k)->p, (k)->head->m.trace, "MutationStage-1",                \
		 (k)->head->at_us, __VA_ARGS__)

/* "Promise rejected; <ballot> older than <promise>" / "Rejecting proposal
 * <ballot>; latest is now <promise>": Cassandra's words for a refusal
 * with `latest` as the promise that beat the request. */
static void trace_refusal(struct akey *k, const struct paxos_ballot *latest)
{
	struct amsg *a = k->head;
	if (!a->m.trace)
		return;
	char b[UUID_TEXT_LEN + 1], l[UUID_TEXT_LEN + 1];
	ballot_text(&a->m.ballot, b);
	ballot_text(latest, l);
	if (a->verb == PAXOS_VERB_PREPARE)
		acc_trace(k, "Promise rejected; %s older than %s", b, l);
	else
		acc_trace(k, "Rejecting proposal %s; latest is now %s", b, l);
}

/* "Promising ballot <b>" / "Accepting proposal <b>" / "Committing
 * proposal <b>": the request's ballot taken. */
static void trace_taken(struct akey *k, const char *what)
{
	if (!k->head->m.trace)
		return;
	char b[UUID_TEXT_LEN + 1];
	ballot_text(&k->head->m.ballot, b);
	acc_trace(k, "%s %s", what, b);
}

/* The running message is done: free it, run the next one, or forget the
 * key. */
static void akey_done(struct akey *k)
{
	struct amsg *a = k->head;
	k->head = a->next;
	if (!k->head)
		k->tail = NULL;
	paxos_msg_free(a->verb, a->owner);
	free(a);
	paxos_state_free(&k->st);
	akey_next(k);
}

static void prepare_read_done(void *arg, int status, struct slice data)
{
	struct akey *k = arg;
	struct amsg *a = k->head;
	struct paxos_msg rsp = {0};
	if (status == 0) {
		rsp.ok = true;
		rsp.promised = k->st.promised;
		rsp.accepted = k->st.accepted;
		rsp.accepted_update = buf_slice(&k->st.accepted_update);
		rsp.committed = k->st.committed;
		rsp.committed_update = buf_slice(&k->st.committed_update);
		rsp.read = data;
		answer(k, a, &rsp);
	} /* a failed read: no answer; the proposer counts it missing */
	akey_done(k);
}

static void saved(void *arg, int status)
{
	struct akey *k = arg;
	struct amsg *a = k->head;
	struct paxos *p = k->p;
	if (status < 0) {
		akey_done(k); /* not durable: no answer */
		return;
	}
	if (a->verb == PAXOS_VERB_PREPARE) {
		p->store->read(p->store_arg, buf_slice(&k->key),
			       prepare_read_done, k);
		return;
	}
	struct paxos_msg rsp = {0};
	rsp.ok = true;
	rsp.promised = k->st.promised;
	answer(k, a, &rsp);
	akey_done(k);
}

static void refuse(struct akey *k)
{
	struct paxos_msg rsp = {0};
	rsp.ok = false;
	rsp.promised = k->st.promised;
	trace_refusal(k, &rsp.promised);
	answer(k, k->head, &rsp);
	akey_done(k);
}

/* paxos_options.purge_window_us: a ballot older than the window is
 * refused (a purged register may have held a newer one); the refusal
 * carries the window's floor as the promise, so the proposer's next
 * ballot is above it. Whether it refused. */
static bool refuse_stale(struct akey *k, const struct paxos_ballot *b)
{
	struct paxos *p = k->p;
	if (!p->o.purge_window_us)
		return false;
	int64_t floor = env_wall_us(p->env) - p->o.purge_window_us;
	if (b->us >= floor)
		return false;
	p->st.stale_ballots++;
	struct paxos_msg rsp = {0};
	rsp.ok = false;
	rsp.promised = k->st.promised;
	if (rsp.promised.us < floor)
		rsp.promised = (struct paxos_ballot){floor, 2ULL << 62};
	trace_refusal(k, &rsp.promised);
	answer(k, k->head, &rsp);
	akey_done(k);
	return true;
}

static void applied(void *arg, int status)
{
	struct akey *k = arg;
	struct amsg *a = k->head;
	struct paxos *p = k->p;
	if (status < 0) {
		struct paxos_msg rsp = {0};
		answer(k, a, &rsp);
		akey_done(k);
		return;
	}
	int r = paxos_state_commit(&k->st, &a->m.ballot, a->m.update);
	if (r < 0) {
		akey_done(k);
		return;
	}
	if (r == 0) {
		saved(k, 0); /* an older commit: applied, nothing to store */
		return;
	}
	p->store->save(p->store_arg, buf_slice(&k->key), &k->st, saved, k);
}

static void loaded(void *arg, int status, const struct paxos_state *st)
{
	struct akey *k = arg;
	struct amsg *a = k->head;
	struct paxos *p = k->p;
	if (status < 0 || paxos_state_copy(&k->st, st) < 0) {
		akey_done(k);
		return;
	}
	int r;
	if (a->verb != PAXOS_VERB_COMMIT && refuse_stale(k, &a->m.ballot))
		return;
	switch (a->verb) {
	case PAXOS_VERB_PREPARE:
		p->st.prepares++;
		r = paxos_state_prepare(&k->st, &a->m.ballot);
		if (r == 0) {
			refuse(k);
			return;
		}
		trace_taken(k, "Promising ballot");
		break;
	case PAXOS_VERB_PROPOSE:
		p->st.proposes++;
		r = paxos_state_propose(&k->st, &a->m.ballot, a->m.update);
		if (r < 0) {
			akey_done(k);
			return;
		}
		if (r == 0) {
			refuse(k);
			return;
		}
		trace_taken(k, "Accepting proposal");
		break;
	default: /* COMMIT: the data first, then the register */
		p->st.commits++;
		trace_taken(k, "Committing proposal");
		p->store->apply(p->store_arg, buf_slice(&k->key), &a->m.ballot,
				a->m.update, applied, k);
		return;
	}
	p->store->save(p->store_arg, buf_slice(&k->key), &k->st, saved, k);
}

static void akey_next(struct akey *k)
{
	struct paxos *p = k->p;
	while (k->head) {
		struct amsg *a = k->head;
		if (a->m.deadline_us &&
		    env_wall_us(p->env) > a->m.deadline_us) {
			k->head = a->next; /* nobody waits for it */
			paxos_msg_free(a->verb, a->owner);
			free(a);
			continue;
		}
		p->store->load(p->store_arg, buf_slice(&k->key), loaded, k);
		return;
	}
	k->tail = NULL;
	for (struct akey **pp = key_bucket(p, buf_slice(&k->key)); *pp;
	     pp = &(*pp)->next)
		if (*pp == k) {
			*pp = k->next;
			break;
		}
	buf_free(&k->key);
	free(k);
}

static void acceptor_request(struct paxos *p, const struct inet_addr *from,
			     uint32_t verb, struct paxos_msg *m, void *owner)
{
	struct amsg *a = zcalloc(1, sizeof(*a));
	if (!a) {
		paxos_msg_free(verb, owner);
		return;
	}
	a->from = *from;
	a->verb = verb;
	a->m = *m;
	a->owner = owner;
	a->at_us = env_mono_us(p->env);
	if (a->m.trace && !inet_addr_eq(from, &p->o.self)) {
		char peer[INET_ADDR_STRLEN + 1];
		peer_name(from, peer);
		px_trace(p, a->m.trace, "Messaging-EventLoop-1", a->at_us,
			 "%s message received from %s", verb_name(verb), peer);
	}
	struct akey **b = key_bucket(p, m->key);
	struct akey *k;
	for (k = *b; k; k = k->next)
		if (slice_eq(buf_slice(&k->key), m->key))
			break;
	if (k) { /* busy with an earlier message: queue behind it */
		k->tail->next = a;
		k->tail = a;
		return;
	}
	k = zcalloc(1, sizeof(*k));
	if (!k || buf_append(&k->key, m->key.ptr, m->key.len) < 0) {
		free(k);
		paxos_msg_free(verb, owner);
		free(a);
		return;
	}
	k->p = p;
	k->head = k->tail = a;
	k->next = *b;
	*b = k;
	akey_next(k);
}

void paxos_receive(struct paxos *p, const struct inet_addr *from, uint32_t verb,
		   const uint8_t *msg, size_t len)
{
	struct paxos_msg m;
	void *owner;
	if (paxos_msg_decode(verb, msg, len, &m, &owner) < 0) {
		p->st.malformed++;
		return;
	}
	if (paxos_verb_is_request(verb)) {
		acceptor_request(p, from, verb, &m, owner);
		return;
	}
	proposer_answer(p, from, verb, &m);
	paxos_msg_free(verb, owner);
}
