/*
 * Repair sessions (repair.h): the coordinator's state machine, the local
 * message queue and the object's lifecycle. The participant side is in
 * repair_replica.c, the wire form in repair_msg.c.
 *
 * A session walks its (table, range) tasks in order, up to `jobs` of
 * them at once (never two of one table whose ranges overlap, so a
 * participant's claims of one session never collide); each task goes
 * VALIDATE -> TREE rounds (compare) -> ROWS -> FETCH -> (merge) -> APPLY,
 * waiting for every replica asked at each step under the task's timer.
 * VALIDATEs go out from validations_send(), which holds a replica back
 * while the parallelism says another replica of an overlapping range
 * (sequential) or of its datacenter (dc_parallel) is validating; the
 * TREE rounds only read the trees the replicas kept, so they are not
 * held back. A task number, unique in the session, travels in every
 * request and answer, so late answers of an ended task or session are
 * dropped. Participants keep only a task's claim and tree, which its
 * RELEASE (or their expiry) ends, so failing a session is forgetting it:
 * every running task's claims are released.
 */
#include "repair/repair_internal.h"

#include "common/arena.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum phase {
	PHASE_VALIDATE,
	PHASE_TREE,
	PHASE_ROWS,
	PHASE_FETCH,
	PHASE_APPLY,
};

static const char *phase_name(enum phase p)
{
	switch (p) {
	case PHASE_VALIDATE:
		return "validation";
	case PHASE_TREE:
		return "tree exchange";
	case PHASE_ROWS:
		return "row hashes";
	case PHASE_FETCH:
		return "row fetch";
	default:
		return "apply";
	}
}

/* A row digest a replica answered (ROWS). */
struct entry {
	struct slice key, id;
	uint8_t digest[16];
	uint8_t replica;
};

struct replica {
	struct inet_addr addr;
	const char *dc;         /* dc_parallel's group; NULL: one */
	size_t peer;            /* index in the session's peers */
	int waiting;            /* answers still due in this phase */
	bool asked;             /* VALIDATE sent (they go out one by one) */
	bool self;              /* this node: its messages stay local */
	uint64_t sent_us;       /* its latest request, for trace */
	uint32_t depth, levels; /* its VALIDATE answer: the kept tree's */
	uint64_t *top;          /* ... levels 0..levels, heap-style */
	uint32_t *req;          /* TREE, ROWS: nodes asked of it */
	size_t nreq;
	uint64_t *got;    /* its TREE answer: their left children */
	struct buf apply; /* encoded selections to send, back to back */
	size_t *ends;     /* their ends in `apply` */
	size_t nends, ends_cap;
	struct repair_row *wanted; /* FETCH: rows to read from it */
	size_t nwanted, wanted_cap;
};

struct repair_session;

/* A (table, range) task in flight: one of the session's `jobs` lanes.
 * The step functions name it `s` (they were the session's before -j). */
struct task {
	struct repair_session *sess;
	struct repair *r;
	bool busy;     /* the lane runs a task */
	uint32_t task; /* its number in the session, in every message */
	size_t ti, ri; /* its table and range */
	uint64_t start_us;
	uint64_t rows_streamed, bytes_streamed; /* for its result */
	const struct storage_table_meta *meta;
	enum phase phase;
	struct replica rep[REPAIR_MAX_REPLICAS];
	size_t nrep;
	struct merkle_range *mism;
	size_t nmism;
	/* The tree exchange: the frontier, nodes of `level` that differ (or
	 * are not compared yet), each with every replica's value at
	 * fval[i * nrep + replica] and, once compared, the replica whose
	 * answers stand for each (frep: the first of those holding the same
	 * value, this node first). At `depth` the frontier is the
	 * mismatching leaves. */
	int depth, level;
	uint32_t *fidx;
	uint64_t *fval;
	uint8_t *frep;
	size_t nf;
	struct arena rows_arena; /* a task's row keys and ids */
	struct entry *entries;
	size_t nentries, entries_cap;
	struct storage_mutation **frags; /* fetched, decoded */
	size_t nfrags, frags_cap;
	struct env_timer *timer; /* the step's deadline */
};

struct repair_session {
	struct repair *r;
	uint64_t id;
	struct arena arena; /* the request's copies */
	struct repair_table *tables;
	size_t ntables;
	struct repair_range *ranges;
	size_t nranges;
	bool preview;
	bool exclusive;
	bool trace;
	uint32_t max_depth;
	enum repair_parallelism parallelism;
	size_t jobs;
	size_t next;    /* tasks started: table next / nranges, ... */
	uint32_t ntask; /* the latest task number */
	struct task lanes[REPAIR_MAX_JOBS];
	struct repair_peer_stats *peers;
	size_t npeers;
	uint64_t start_us;
	struct repair_summary sum;
	struct env_timer *alive_timer; /* failure detector checks */
	repair_progress_fn progress;
	repair_done_fn done;
	repair_task_fn task_done;
	void *arg;
};

void repair_options_default(struct repair_options *o)
{
	memset(o, 0, sizeof(*o));
	o->validate_timeout_ms = 600000;
	o->request_timeout_ms = 120000;
	o->session_space = (size_t)16 << 20;
	o->message_bytes = (size_t)4 << 20;
	o->alive_check_ms = 1000;
}

size_t repair_pieces(struct merkle_range r, struct merkle_range out[2])
{
	size_t n = 0;
	if (r.start < r.end) {
		out[n++] = r;
		return n;
	}
	/* wraps (or the whole ring when start == end) */
	if (r.start != INT64_MAX)
		out[n++] = (struct merkle_range){r.start, INT64_MAX};
	if (r.end != INT64_MIN)
		out[n++] = (struct merkle_range){INT64_MIN, r.end};
	return n;
}

bool repair_ranges_overlap(struct merkle_range a, struct merkle_range b)
{
	struct merkle_range pa[2], pb[2];
	size_t na = repair_pieces(a, pa), nb = repair_pieces(b, pb);
	for (size_t i = 0; i < na; i++)
		for (size_t k = 0; k < nb; k++) {
			int64_t lo = pa[i].start > pb[k].start ? pa[i].start
							       : pb[k].start;
			int64_t hi =
				pa[i].end < pb[k].end ? pa[i].end : pb[k].end;
			if (lo < hi)
				return true;
		}
	return false;
}

/* ---- messages ------------------------------------------------------------ */

static void local_deliver(void *arg)
{
	struct repair *r = arg;
	/* what is queued now; answers sent meanwhile go to the next round */
	struct repair_local_msg *m = r->local_head;
	r->local_head = r->local_tail = NULL;
	while (m) {
		struct repair_local_msg *next = m->next;
		repair_receive(r, &r->o.self, m->verb, m->data, m->len);
		free(m);
		m = next;
	}
}

int repair_send(struct repair *r, const struct inet_addr *to, uint32_t verb,
		const struct buf *b)
{
	if (!inet_addr_eq(to, &r->o.self))
		return env_send(r->env, to, verb, b->data, b->len);
	struct repair_local_msg *m = malloc(sizeof(*m) + b->len);
	if (!m)
		return err_set(ERR_NOMEM, "local repair message");
	m->next = NULL;
	m->verb = verb;
	m->len = b->len;
	if (b->len)
		memcpy(m->data, b->data, b->len);
	if (r->local_tail)
		r->local_tail->next = m;
	else
		r->local_head = m;
	r->local_tail = m;
	env_timer_arm(r->env, r->local_timer, 0);
	return 0;
}

/* ---- the object ---------------------------------------------------------- */

struct repair *repair_new(struct env *env, const struct repair_options *o,
			  const struct repair_store_ops *store, void *store_arg)
{
	struct repair *r = calloc(1, sizeof(*r));
	if (!r) {
		err_set(ERR_NOMEM, "repair");
		return NULL;
	}
	r->env = env;
	r->o = *o;
	if (!r->o.validate_timeout_ms || !r->o.request_timeout_ms ||
	    !r->o.session_space || !r->o.message_bytes ||
	    !r->o.alive_check_ms) {
		struct repair_options d;
		repair_options_default(&d);
		if (!r->o.validate_timeout_ms)
			r->o.validate_timeout_ms = d.validate_timeout_ms;
		if (!r->o.request_timeout_ms)
			r->o.request_timeout_ms = d.request_timeout_ms;
		if (!r->o.session_space)
			r->o.session_space = d.session_space;
		if (!r->o.message_bytes)
			r->o.message_bytes = d.message_bytes;
		if (!r->o.alive_check_ms)
			r->o.alive_check_ms = d.alive_check_ms;
	}
	r->store = store;
	r->store_arg = store_arg;
	r->next_session = 1;
	r->local_timer = env_timer_new(env, local_deliver, r);
	r->claim_timer = env_timer_new(env, repair_claims_sweep, r);
	if (!r->local_timer || !r->claim_timer) {
		if (r->local_timer)
			env_timer_free(env, r->local_timer);
		free(r);
		err_set(ERR_NOMEM, "repair timer");
		return NULL;
	}
	return r;
}

static void session_free(struct repair_session *s);

static void repair_free(struct repair *r)
{
	struct repair_local_msg *m = r->local_head;
	while (m) {
		struct repair_local_msg *next = m->next;
		free(m);
		m = next;
	}
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++)
		repair_claim_end(r, &r->claims[i]);
	env_timer_free(r->env, r->local_timer);
	env_timer_free(r->env, r->claim_timer);
	free(r);
}

void repair_delete(struct repair *r)
{
	if (!r)
		return;
	if (r->session)
		session_free(r->session);
	r->session = NULL;
	env_timer_cancel(r->env, r->local_timer);
	env_timer_cancel(r->env, r->claim_timer);
	if (r->jobs)
		r->deleting = true;
	else
		repair_free(r);
}

void repair_job_release(struct repair *r)
{
	if (--r->jobs == 0 && r->deleting)
		repair_free(r);
}

bool repair_running(const struct repair *r)
{
	return r->session != NULL;
}

void repair_receive(struct repair *r, const struct inet_addr *from,
		    uint32_t verb, const uint8_t *msg, size_t len)
{
	if (r->deleting || verb < REPAIR_VERB_FIRST || verb > REPAIR_VERB_LAST)
		return;
	if (verb % 2 == 0)
		repair_replica_receive(r, from, verb, msg, len);
	else
		repair_session_receive(r, from, verb, msg, len);
}

/* ---- the session --------------------------------------------------------- */

static void task_reset(struct task *s)
{
	for (size_t i = 0; i < s->nrep; i++) {
		struct replica *p = &s->rep[i];
		free(p->top);
		free(p->req);
		free(p->got);
		p->top = NULL;
		p->req = NULL;
		p->got = NULL;
		p->nreq = 0;
		buf_free(&p->apply);
		free(p->ends);
		free(p->wanted);
		p->ends = NULL;
		p->wanted = NULL;
		p->nends = p->ends_cap = p->nwanted = p->wanted_cap = 0;
		p->waiting = 0;
		p->asked = false;
	}
	free(s->mism);
	s->mism = NULL;
	s->nmism = 0;
	free(s->fidx);
	free(s->fval);
	free(s->frep);
	s->fidx = NULL;
	s->fval = NULL;
	s->frep = NULL;
	s->nf = 0;
	free(s->entries);
	s->entries = NULL;
	s->nentries = s->entries_cap = 0;
	arena_reset(&s->rows_arena);
	for (size_t i = 0; i < s->nfrags; i++)
		storage_mutation_delete(s->frags[i]);
	free(s->frags);
	s->frags = NULL;
	s->nfrags = s->frags_cap = 0;
}

static void session_free(struct repair_session *ss)
{
	for (size_t l = 0; l < REPAIR_MAX_JOBS; l++) {
		struct task *t = &ss->lanes[l];
		task_reset(t);
		env_timer_free(ss->r->env, t->timer);
		arena_destroy(&t->rows_arena);
	}
	env_timer_free(ss->r->env, ss->alive_timer);
	arena_destroy(&ss->arena);
	free(ss->peers);
	free(ss);
}

static struct repair_range *cur_range(struct task *s)
{
	return &s->sess->ranges[s->ri];
}

static const char *cur_table(struct task *s)
{
	return s->sess->tables[s->ti].name;
}

static struct merkle_range task_range(struct task *s)
{
	return (struct merkle_range){cur_range(s)->start, cur_range(s)->end};
}

static void progress(struct task *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void progress(struct task *s, const char *fmt, ...)
{
	if (!s->sess->progress)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	s->sess->progress(s->sess->arg, line);
}

static double secs_since(struct repair *r, uint64_t us)
{
	return (double)(env_mono_us(r->env) - us) / 1e6;
}

/* A --trace line: "trace: +ELAPSED TABLE (START,END]: ...". */
static void trace(struct task *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void trace(struct task *s, const char *fmt, ...)
{
	struct repair_session *ss = s->sess;
	if (!ss->trace || !ss->progress)
		return;
	char line[512];
	int n = snprintf(line, sizeof(line), "trace: +%.3fs %s (%lld,%lld]: ",
			 secs_since(ss->r, ss->start_us), cur_table(s),
			 (long long)cur_range(s)->start,
			 (long long)cur_range(s)->end);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	ss->progress(ss->arg, line);
}

static void task_release(struct task *s);

/* The task's end, for the caller's history. */
static void task_result(struct task *s, bool ok, const char *error)
{
	struct repair_session *ss = s->sess;
	if (!ss->task_done)
		return;
	struct repair_task_result res = {
		.session = ss->id,
		.table = cur_table(s),
		.start = cur_range(s)->start,
		.end = cur_range(s)->end,
		.ok = ok,
		.error = ok ? "" : error,
		.duration_us = env_mono_us(ss->r->env) - s->start_us,
		.mismatched_ranges = s->nmism,
		.rows_streamed = s->rows_streamed,
		.bytes_streamed = s->bytes_streamed,
	};
	ss->task_done(ss->arg, &res);
}

static void session_end(struct repair_session *ss, bool ok, const char *error)
{
	struct repair *r = ss->r;
	ss->sum.session = ss->id;
	ss->sum.ok = ok;
	snprintf(ss->sum.error, sizeof(ss->sum.error), "%s", ok ? "" : error);
	ss->sum.duration_us = env_mono_us(r->env) - ss->start_us;
	ss->sum.peers = ss->peers;
	ss->sum.npeers = ss->npeers;
	for (size_t l = 0; l < REPAIR_MAX_JOBS; l++) {
		struct task *t = &ss->lanes[l];
		env_timer_cancel(r->env, t->timer);
		if (!t->busy)
			continue;
		task_release(t);
		task_result(t, false, ss->sum.error);
		t->busy = false;
	}
	r->session = NULL;
	if (ss->alive_timer)
		env_timer_cancel(r->env, ss->alive_timer);
	repair_done_fn done = ss->done;
	void *arg = ss->arg;
	struct repair_summary sum = ss->sum;
	/* the summary borrows the peers until the callback returns */
	ss->peers = NULL;
	session_free(ss);
	done(arg, &sum);
	free((void *)sum.peers);
}

static void session_abort(struct repair_session *ss, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void session_abort(struct repair_session *ss, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	session_end(ss, false, msg);
}

/* Fails the task's session (every running task with it). */
static void session_fail(struct task *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void session_fail(struct task *s, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	session_end(s->sess, false, msg);
}

/* Whether the session `id` still runs (a callback may have ended it). */
static bool session_live(const struct repair *r, uint64_t id)
{
	return r->session && r->session->id == id;
}

static const char *addr_str(const struct inet_addr *a, char *buf, size_t cap)
{
	return inet_addr_format(a, buf, cap);
}

static void arm(struct task *s, uint64_t ms)
{
	env_timer_arm(s->r->env, s->timer, ms * 1000);
}

static void trace_request(struct task *s, size_t i, uint32_t verb,
			  const struct repair_msg *q)
{
	char a[64];
	addr_str(&s->rep[i].addr, a, sizeof(a));
	size_t bytes = 0;
	switch (verb) {
	case REPAIR_VERB_VALIDATE:
		trace(s, "validation requested from %s", a);
		break;
	case REPAIR_VERB_TREE:
		trace(s, "tree level %u under %zu nodes requested from %s",
		      q->level + 1, q->nnodes, a);
		break;
	case REPAIR_VERB_ROWS:
		trace(s, "row hashes of %zu leaves requested from %s",
		      q->nnodes, a);
		break;
	case REPAIR_VERB_FETCH:
		trace(s, "fetching %zu rows from %s", q->nrows, a);
		break;
	default:
		for (size_t k = 0; k < q->nfrags; k++)
			bytes += q->frags[k].len;
		trace(s, "sending %zu partition updates (%zu bytes) to %s",
		      q->nfrags, bytes, a);
		break;
	}
}

/* Sends `q` (session and task filled here) to replica i. */
static int send_request(struct task *s, size_t i, uint32_t verb,
			struct repair_msg *q)
{
	q->session = s->sess->id;
	q->task = s->task;
	memcpy(q->table_id, s->sess->tables[s->ti].id, 16);
	struct buf b;
	buf_init(&b);
	int rc = repair_msg_pack_request(q, &b);
	if (!rc)
		rc = repair_send(s->r, &s->rep[i].addr, verb, &b);
	if (!rc && !s->rep[i].self &&
	    (verb == REPAIR_VERB_VALIDATE || verb == REPAIR_VERB_TREE ||
	     verb == REPAIR_VERB_ROWS))
		s->sess->sum.tree_bytes += b.len;
	buf_free(&b);
	if (!rc) {
		s->rep[i].waiting++;
		s->rep[i].sent_us = env_mono_us(s->r->env);
		trace_request(s, i, verb, q);
	}
	return rc;
}

static int session_pump(struct repair_session *ss);

/* Sends replica i a one-way request of the task (best effort): RELEASE,
 * or TREE naming no node (claims_keep). */
static void send_oneway(struct task *s, size_t i, uint32_t verb)
{
	struct merkle_range mr = task_range(s);
	struct repair_msg q = {0};
	q.ranges = &mr;
	q.nranges = 1;
	q.session = s->sess->id;
	q.task = s->task;
	memcpy(q.table_id, s->sess->tables[s->ti].id, 16);
	struct buf b;
	buf_init(&b);
	if (repair_msg_pack_request(&q, &b) == 0)
		repair_send(s->r, &s->rep[i].addr, verb, &b);
	buf_free(&b);
}

/* Tells the task's replicas its claim is over (best effort). */
static void task_release(struct task *s)
{
	if (!s->busy || !s->nrep)
		return;
	for (size_t i = 0; i < s->nrep; i++)
		send_oneway(s, i, REPAIR_VERB_RELEASE);
}

/* Under sequential and dc_parallel a replica that answered VALIDATE
 * keeps its tree while the task's other replicas validate one after
 * another, which may outlast its claim (validate + request timeouts from
 * its VALIDATE): at each validation's end, every such replica is sent a
 * TREE naming no node, which keeps all the session's claims on it alive
 * and is not answered. One per node: the touch covers all its claims. */
static void claims_keep(struct repair_session *ss)
{
	if (ss->parallelism == REPAIR_PARALLEL)
		return;
	struct inet_addr done[REPAIR_MAX_JOBS * REPAIR_MAX_REPLICAS];
	size_t ndone = 0;
	for (size_t l = 0; l < ss->jobs; l++) {
		struct task *s = &ss->lanes[l];
		if (!s->busy || s->phase != PHASE_VALIDATE)
			continue;
		for (size_t i = 0; i < s->nrep; i++) {
			const struct replica *p = &s->rep[i];
			if (!p->asked || p->waiting)
				continue;
			bool sent = false;
			for (size_t k = 0; k < ndone && !sent; k++)
				sent = inet_addr_eq(&done[k], &p->addr);
			if (sent)
				continue;
			done[ndone++] = p->addr;
			send_oneway(s, i, REPAIR_VERB_TREE);
		}
	}
}

/* The task is done: its lane takes the next one. */
static void task_next(struct task *s)
{
	trace(s, "task done in %.3fs", secs_since(s->r, s->start_us));
	task_release(s);
	task_result(s, true, NULL);
	task_reset(s);
	s->busy = false;
	env_timer_cancel(s->r->env, s->timer);
	session_pump(s->sess);
}

static size_t waiting(const struct task *s)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nrep; i++)
		n += (size_t)s->rep[i].waiting;
	return n;
}

/* Replicas not yet asked to validate. */
static size_t unasked(const struct task *s)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nrep; i++)
		n += !s->rep[i].asked;
	return n;
}

/* Takes task (ti, ri) into lane `s`; -1 when that failed the session. */
static int task_start(struct task *s, size_t ti, size_t ri)
{
	struct repair_session *ss = s->sess;
	s->busy = true;
	s->ti = ti;
	s->ri = ri;
	s->nrep = 0;
	s->task = ++ss->ntask;
	s->start_us = env_mono_us(s->r->env);
	s->rows_streamed = s->bytes_streamed = 0;
	s->meta = s->r->store->meta(s->r->store_arg, ss->tables[ti].id);
	if (!s->meta) {
		session_fail(s, "%s: unknown table", cur_table(s));
		return -1;
	}
	struct repair_range *rg = cur_range(s);
	s->phase = PHASE_VALIDATE;
	s->nrep = rg->nreplicas;
	for (size_t i = 0; i < s->nrep; i++) {
		s->rep[i].addr = rg->replicas[i];
		s->rep[i].dc = rg->dcs ? rg->dcs[i] : NULL;
		s->rep[i].asked = false;
		s->rep[i].self = inet_addr_eq(&rg->replicas[i], &s->r->o.self);
		for (size_t k = 0; k < ss->npeers; k++)
			if (inet_addr_eq(&ss->peers[k].addr, &rg->replicas[i]))
				s->rep[i].peer = k;
	}
	return 0;
}

static bool same_dc(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* Whether replica i of task `t` may be asked to validate now: under
 * sequential no replica of an overlapping range of a running task is
 * validating; under dc_parallel none of its datacenter. */
static bool may_validate(struct repair_session *ss, struct task *t, size_t i)
{
	if (ss->parallelism == REPAIR_PARALLEL)
		return true;
	for (size_t l = 0; l < ss->jobs; l++) {
		struct task *o = &ss->lanes[l];
		if (!o->busy || o->phase != PHASE_VALIDATE)
			continue;
		if (o != t &&
		    !repair_ranges_overlap(task_range(o), task_range(t)))
			continue;
		for (size_t k = 0; k < o->nrep; k++) {
			const struct replica *p = &o->rep[k];
			if (p->asked && p->waiting &&
			    (ss->parallelism == REPAIR_SEQUENTIAL ||
			     same_dc(p->dc, t->rep[i].dc)))
				return false;
		}
	}
	return true;
}

/* Sends the VALIDATEs the parallelism allows now, oldest task first;
 * -1 when that failed the session. */
static int validations_send(struct repair_session *ss)
{
	/* lanes in task order: at most REPAIR_MAX_JOBS, a selection sort */
	struct task *order[REPAIR_MAX_JOBS];
	size_t n = 0;
	for (size_t l = 0; l < ss->jobs; l++)
		if (ss->lanes[l].busy && ss->lanes[l].phase == PHASE_VALIDATE)
			order[n++] = &ss->lanes[l];
	for (size_t a = 0; a < n; a++)
		for (size_t b = a + 1; b < n; b++)
			if (order[b]->task < order[a]->task) {
				struct task *x = order[a];
				order[a] = order[b];
				order[b] = x;
			}
	for (size_t k = 0; k < n; k++) {
		struct task *s = order[k];
		bool sent = false;
		for (size_t i = 0; i < s->nrep; i++) {
			if (s->rep[i].asked || !may_validate(ss, s, i))
				continue;
			struct merkle_range mr = task_range(s);
			struct repair_msg q = {0};
			q.ranges = &mr;
			q.nranges = 1;
			q.max_depth = ss->max_depth;
			q.exclusive = ss->exclusive;
			q.tree_version = REPAIR_TREE_VERSION;
			q.levels = REPAIR_TOP_LEVELS;
			s->rep[i].asked = true;
			if (send_request(s, i, REPAIR_VERB_VALIDATE, &q)) {
				char a[64];
				session_fail(
					s, "%s: cannot send to %s: %s",
					cur_table(s),
					addr_str(&s->rep[i].addr, a, sizeof(a)),
					err_msg());
				return -1;
			}
			sent = true;
		}
		if (sent)
			arm(s, s->r->o.validate_timeout_ms);
		else if (!waiting(s)) /* held back by another task */
			env_timer_cancel(s->r->env, s->timer);
	}
	return 0;
}

/* Starts tasks while lanes are free (in order; a task waits while one of
 * its table with an overlapping range runs), ends the session when all
 * are done, sends the validations allowed. -1 when the session ended. */
static int session_pump(struct repair_session *ss)
{
	size_t total = ss->ntables * ss->nranges;
	while (ss->next < total) {
		size_t ti = ss->next / ss->nranges, ri = ss->next % ss->nranges;
		struct merkle_range mr = {ss->ranges[ri].start,
					  ss->ranges[ri].end};
		struct task *lane = NULL;
		bool clash = false;
		for (size_t l = 0; l < ss->jobs; l++) {
			struct task *o = &ss->lanes[l];
			if (!o->busy)
				lane = lane ? lane : o;
			else if (o->ti == ti &&
				 repair_ranges_overlap(task_range(o), mr))
				clash = true;
		}
		if (!lane || clash)
			break;
		ss->next++;
		if (task_start(lane, ti, ri))
			return -1;
	}
	bool running = false;
	for (size_t l = 0; l < ss->jobs; l++)
		running = running || ss->lanes[l].busy;
	if (!running) {
		session_end(ss, true, NULL);
		return -1;
	}
	return validations_send(ss);
}

/* ---- the tree exchange ----------------------------------------------------
 *
 * Every replica answers VALIDATE with the top REPAIR_TOP_LEVELS levels of
 * the tree it keeps; the coordinator compares them at the shallowest level
 * all answered, then asks, one level per round trip, for the children of
 * the nodes that differ, down to the shallowest depth any replica kept.
 * Replicas holding the same value at a node hold the same subtree (but
 * for a 2^-64 chance), so only one of them (this node when it is one) is
 * asked below it; the others' values are copied from it. */

static bool node_differs(const struct task *s, const uint64_t *v)
{
	for (size_t r = 1; r < s->nrep; r++)
		if (v[r] != v[0])
			return true;
	return false;
}

/* frep for frontier node i: per replica, the first replica (this node
 * first) holding its value. */
static void pick_reps(struct task *s, size_t i)
{
	const uint64_t *v = s->fval + i * s->nrep;
	uint8_t *rep = s->frep + i * s->nrep;
	size_t self = s->nrep;
	for (size_t r = 0; r < s->nrep; r++)
		if (s->rep[r].self)
			self = r;
	for (size_t r = 0; r < s->nrep; r++) {
		rep[r] = (uint8_t)r;
		if (self < s->nrep && v[self] == v[r]) {
			rep[r] = (uint8_t)self;
			continue;
		}
		for (size_t q = 0; q < r; q++)
			if (q != self && v[q] == v[r]) {
				rep[r] = (uint8_t)q;
				break;
			}
	}
}

/* Keeps the frontier's differing nodes, with their representatives. */
static int frontier_filter(struct task *s)
{
	size_t n = 0, nrep = s->nrep;
	for (size_t i = 0; i < s->nf; i++) {
		if (!node_differs(s, s->fval + i * nrep))
			continue;
		s->fidx[n] = s->fidx[i];
		memmove(s->fval + n * nrep, s->fval + i * nrep,
			nrep * sizeof(*s->fval));
		n++;
	}
	s->nf = n;
	free(s->frep);
	s->frep = n ? malloc(n * nrep) : NULL;
	if (n && !s->frep)
		return err_set(ERR_NOMEM, "tree frontier");
	for (size_t i = 0; i < n; i++)
		pick_reps(s, i);
	return 0;
}

static void rows_start(struct task *s);

/* One step down from the filtered frontier: TREE requests, or ROWS at
 * the leaves, or the task's end when nothing differs. */
static void descend(struct task *s)
{
	struct repair_range *rg = cur_range(s);
	if (frontier_filter(s)) {
		session_fail(s, "%s: comparing trees: %s", cur_table(s),
			     err_msg());
		return;
	}
	if (!s->nf) {
		trace(s,
		      "trees compared: 0 mismatched ranges (equal at level "
		      "%d)",
		      s->level);
		progress(s, "%s (%lld,%lld]: %zu replicas in sync",
			 cur_table(s), (long long)rg->start, (long long)rg->end,
			 s->nrep);
		task_next(s);
		return;
	}
	if (s->level == s->depth) {
		rows_start(s);
		return;
	}
	trace(s, "trees differ at %zu nodes of level %d (depth %d)", s->nf,
	      s->level, s->depth);
	for (size_t r = 0; r < s->nrep; r++) {
		struct replica *p = &s->rep[r];
		free(p->req);
		free(p->got);
		p->got = NULL;
		p->nreq = 0;
		p->req = malloc(s->nf * sizeof(*p->req));
		if (!p->req) {
			session_fail(s, "%s: tree requests: out of memory",
				     cur_table(s));
			return;
		}
		for (size_t i = 0; i < s->nf; i++)
			if (s->frep[i * s->nrep + r] == r)
				p->req[p->nreq++] = s->fidx[i];
	}
	s->phase = PHASE_TREE;
	struct merkle_range mr = {rg->start, rg->end};
	for (size_t r = 0; r < s->nrep; r++) {
		if (!s->rep[r].nreq)
			continue;
		struct repair_msg q = {0};
		q.ranges = &mr;
		q.nranges = 1;
		q.level = (uint32_t)s->level;
		q.levels = 1;
		q.nodes = s->rep[r].req;
		q.nnodes = s->rep[r].nreq;
		if (send_request(s, r, REPAIR_VERB_TREE, &q)) {
			session_fail(s, "%s: sending tree requests: %s",
				     cur_table(s), err_msg());
			return;
		}
	}
	arm(s, s->r->o.request_timeout_ms);
}

/* The TREE answers are in: the next level's frontier, two children per
 * differing node, each replica's values its representative's. */
static void tree_round_done(struct task *s)
{
	size_t nrep = s->nrep, n = 2 * s->nf;
	uint32_t *idx = malloc(n * sizeof(*idx));
	uint64_t *val = malloc(n * nrep * sizeof(*val));
	if (!idx || !val) {
		free(idx);
		free(val);
		session_fail(s, "%s: tree frontier: out of memory",
			     cur_table(s));
		return;
	}
	size_t pos[REPAIR_MAX_REPLICAS] = {0};
	for (size_t i = 0; i < s->nf; i++) {
		const uint8_t *rep = s->frep + i * nrep;
		const uint64_t *pv = s->fval + i * nrep;
		uint64_t left[REPAIR_MAX_REPLICAS];
		for (size_t r = 0; r < nrep; r++)
			if (rep[r] == r)
				left[r] = s->rep[r].got[pos[r]++];
		idx[2 * i] = 2 * s->fidx[i];
		idx[2 * i + 1] = 2 * s->fidx[i] + 1;
		for (size_t r = 0; r < nrep; r++) {
			uint64_t l = left[rep[r]];
			val[2 * i * nrep + r] = l;
			val[(2 * i + 1) * nrep + r] = l ^ pv[rep[r]];
		}
	}
	free(s->fidx);
	free(s->fval);
	s->fidx = idx;
	s->fval = val;
	s->nf = n;
	s->level++;
	descend(s);
}

/* VALIDATE answers are in: the frontier is the deepest level all sent. */
static void trees_done(struct task *s)
{
	s->sess->sum.ranges++;
	uint32_t depth = MERKLE_MAX_DEPTH, levels = REPAIR_TOP_LEVELS;
	for (size_t r = 0; r < s->nrep; r++) {
		if (s->rep[r].depth < depth)
			depth = s->rep[r].depth;
		if (s->rep[r].levels < levels)
			levels = s->rep[r].levels;
	}
	size_t n = (size_t)1 << levels, nrep = s->nrep;
	free(s->fidx);
	free(s->fval);
	s->fidx = malloc(n * sizeof(*s->fidx));
	s->fval = malloc(n * nrep * sizeof(*s->fval));
	if (!s->fidx || !s->fval) {
		session_fail(s, "%s: tree frontier: out of memory",
			     cur_table(s));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		s->fidx[i] = (uint32_t)i;
		for (size_t r = 0; r < nrep; r++)
			s->fval[i * nrep + r] = s->rep[r].top[n + i];
	}
	for (size_t r = 0; r < nrep; r++) {
		free(s->rep[r].top);
		s->rep[r].top = NULL;
	}
	s->nf = n;
	s->depth = (int)depth;
	s->level = (int)levels;
	descend(s);
}

/* A VALIDATE answer's values: levels 0..levels, heap-style. */
static int take_top(struct task *s, struct replica *p,
		    const struct repair_msg *m)
{
	if (m->tree_version != REPAIR_TREE_VERSION)
		return err_set(ERR_PROTOCOL,
			       "tree exchange version %u (this node "
			       "speaks %u)",
			       m->tree_version, REPAIR_TREE_VERSION);
	/* the decoder bounds depth and levels <= depth */
	struct merkle_range mr = {cur_range(s)->start, cur_range(s)->end};
	if (m->levels > REPAIR_TOP_LEVELS ||
	    !merkle_level_fits(mr, (int)m->depth))
		return err_set(ERR_PROTOCOL, "a tree of depth %u, %u levels",
			       m->depth, m->levels);
	size_t n = (size_t)1 << m->levels;
	if (m->hashes.len != 8 * n)
		return err_set(ERR_PROTOCOL,
			       "%zu bytes of hashes for %u "
			       "levels",
			       m->hashes.len, m->levels);
	free(p->top);
	p->top = malloc(2 * n * sizeof(*p->top));
	if (!p->top)
		return err_set(ERR_NOMEM, "tree");
	const uint8_t *h = m->hashes.ptr;
	p->top[1] = be64_load(h);
	h += 8;
	for (size_t l = 1; l <= m->levels; l++)
		for (size_t i = 0; i < (size_t)1 << l; i += 2) {
			size_t k = ((size_t)1 << l) + i;
			p->top[k] = be64_load(h);
			p->top[k + 1] = p->top[k] ^ p->top[k / 2];
			h += 8;
		}
	p->depth = m->depth;
	p->levels = m->levels;
	return 0;
}

static int take_tree(struct replica *p, const struct repair_msg *m)
{
	if (m->hashes.len != 8 * p->nreq)
		return err_set(ERR_PROTOCOL,
			       "%zu bytes of hashes for %zu nodes",
			       m->hashes.len, p->nreq);
	free(p->got);
	p->got = malloc((p->nreq ? p->nreq : 1) * sizeof(*p->got));
	if (!p->got)
		return err_set(ERR_NOMEM, "tree");
	for (size_t k = 0; k < p->nreq; k++)
		p->got[k] = be64_load(m->hashes.ptr + 8 * k);
	return 0;
}

/* The trace of the comparison's outcome: the mismatching leaves as
 * coalesced ranges (the first few). */
static void trace_mismatches(struct task *s)
{
	char list[200] = "";
	size_t at = 0;
	for (size_t k = 0; k < s->nmism && k < 4; k++) {
		int n = snprintf(list + at, sizeof(list) - at, " (%lld,%lld]",
				 (long long)s->mism[k].start,
				 (long long)s->mism[k].end);
		if (n < 0 || (size_t)n >= sizeof(list) - at)
			break;
		at += (size_t)n;
	}
	trace(s,
	      "trees compared: %zu mismatched ranges (%zu leaves of depth "
	      "%d)%s%s%s",
	      s->nmism, s->nf, s->depth, s->nmism ? ":" : "", list,
	      s->nmism > 4 ? " ..." : "");
}

/* The mismatching leaves: coalesced ranges for the summary, ROWS asked
 * of each leaf's representatives. */
static void rows_start(struct task *s)
{
	struct repair_range *rg = cur_range(s);
	struct merkle_range mr = {rg->start, rg->end};
	s->sess->sum.leaves_mismatched += s->nf;
	for (size_t i = 0; i < s->nf; i++) {
		struct merkle_range lr =
			merkle_node_range(mr, s->depth, s->fidx[i]);
		if (s->nmism && s->mism[s->nmism - 1].end == lr.start) {
			s->mism[s->nmism - 1].end = lr.end;
			continue;
		}
		struct merkle_range *v =
			realloc(s->mism, (s->nmism + 1) * sizeof(*v));
		if (!v) {
			session_fail(s, "%s: mismatching ranges: out of memory",
				     cur_table(s));
			return;
		}
		s->mism = v;
		s->mism[s->nmism++] = lr;
	}
	s->sess->sum.mismatched_ranges += s->nmism;
	trace_mismatches(s);
	s->phase = PHASE_ROWS;
	for (size_t r = 0; r < s->nrep; r++) {
		struct replica *p = &s->rep[r];
		free(p->req);
		p->nreq = 0;
		p->req = malloc(s->nf * sizeof(*p->req));
		if (!p->req) {
			session_fail(s, "%s: row requests: out of memory",
				     cur_table(s));
			return;
		}
		for (size_t i = 0; i < s->nf; i++)
			if (s->frep[i * s->nrep + r] == r)
				p->req[p->nreq++] = s->fidx[i];
		if (!p->nreq)
			continue;
		struct repair_msg q = {0};
		q.ranges = &mr;
		q.nranges = 1;
		q.level = (uint32_t)s->depth;
		q.nodes = p->req;
		q.nnodes = p->nreq;
		if (send_request(s, r, REPAIR_VERB_ROWS, &q)) {
			session_fail(s, "%s: sending row requests: %s",
				     cur_table(s), err_msg());
			return;
		}
	}
	arm(s, s->r->o.validate_timeout_ms);
}

static int entry_cmp(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;
	int c = slice_cmp(a->key, b->key);
	if (!c)
		c = slice_cmp(a->id, b->id);
	if (!c)
		c = (a->replica > b->replica) - (a->replica < b->replica);
	return c;
}

static int u32_cmp(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a > b) - (a < b);
}

/* A ROWS answer of replica i: its rows, and the same rows for every
 * replica it stands for at their leaf (frep). */
static int add_entries(struct task *s, size_t i, const struct repair_msg *m)
{
	size_t most = m->nrows * s->nrep;
	if (s->nentries + most > s->entries_cap) {
		size_t cap = s->entries_cap ? s->entries_cap : 256;
		while (cap < s->nentries + most)
			cap *= 2;
		struct entry *v = realloc(s->entries, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "row digests");
		s->entries = v;
		s->entries_cap = cap;
	}
	struct merkle_range mr = {cur_range(s)->start, cur_range(s)->end};
	for (size_t k = 0; k < m->nrows; k++) {
		const struct repair_row *w = &m->rows[k];
		int64_t token = murmur3_token(w->key.ptr, w->key.len);
		uint32_t leaf = 0;
		if (merkle_contains(mr, token))
			leaf = (uint32_t)merkle_node_of(mr, s->depth, token);
		const uint32_t *at =
			merkle_contains(mr, token)
				? bsearch(&leaf, s->fidx, s->nf,
					  sizeof(*s->fidx), u32_cmp)
				: NULL;
		const uint8_t *rep =
			at ? s->frep + (size_t)(at - s->fidx) * s->nrep : NULL;
		if (!rep || rep[i] != i)
			return err_set(ERR_PROTOCOL,
				       "a row outside the leaves asked");
		void *key =
			arena_memdup(&s->rows_arena, w->key.ptr, w->key.len);
		void *id = arena_memdup(&s->rows_arena, w->id.ptr, w->id.len);
		if (!key || !id)
			return err_set(ERR_NOMEM, "row digests");
		for (size_t r = 0; r < s->nrep; r++) {
			if (rep[r] != i)
				continue;
			struct entry *e = &s->entries[s->nentries++];
			e->key = slice_make(key, w->key.len);
			e->id = slice_make(id, w->id.len);
			memcpy(e->digest, w->digest, 16);
			e->replica = (uint8_t)r;
		}
	}
	s->sess->sum.rows_hashed += m->nrows;
	return 0;
}

static int want(struct replica *p, const struct entry *e)
{
	if (p->nwanted == p->wanted_cap) {
		size_t cap = p->wanted_cap ? p->wanted_cap * 2 : 64;
		struct repair_row *v = realloc(p->wanted, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "wanted rows");
		p->wanted = v;
		p->wanted_cap = cap;
	}
	p->wanted[p->nwanted].key = e->key;
	p->wanted[p->nwanted].id = e->id;
	p->nwanted++;
	return 0;
}

/* Rows whose versions differ: one copy of each distinct version is
 * fetched from a replica holding it, this node when it does (its copy
 * does not cross the network). */
static void rows_done(struct task *s)
{
	if (s->nentries > 1)
		qsort(s->entries, s->nentries, sizeof(*s->entries), entry_cmp);
	for (size_t i = 0; i < s->nentries;) {
		size_t j = i + 1;
		bool same = true;
		while (j < s->nentries &&
		       slice_eq(s->entries[j].key, s->entries[i].key) &&
		       slice_eq(s->entries[j].id, s->entries[i].id)) {
			if (memcmp(s->entries[j].digest, s->entries[i].digest,
				   16))
				same = false;
			j++;
		}
		if (same && j - i == s->nrep) {
			i = j;
			continue;
		}
		s->sess->sum.rows_mismatched++;
		for (size_t k = i; k < j; k++) {
			bool seen = false;
			for (size_t l = i; l < k && !seen; l++)
				seen = !memcmp(s->entries[l].digest,
					       s->entries[k].digest, 16);
			size_t from = k;
			for (size_t l = k + 1; l < j && !seen; l++)
				if (s->rep[s->entries[l].replica].self &&
				    !memcmp(s->entries[l].digest,
					    s->entries[k].digest, 16))
					from = l;
			if (!seen && want(&s->rep[s->entries[from].replica],
					  &s->entries[from])) {
				session_fail(s, "%s: %s", cur_table(s),
					     err_msg());
				return;
			}
		}
		i = j;
	}
	s->phase = PHASE_FETCH;
	for (size_t i = 0; i < s->nrep; i++) {
		if (!s->rep[i].nwanted)
			continue;
		struct merkle_range mr = {cur_range(s)->start,
					  cur_range(s)->end};
		struct repair_msg q = {0};
		q.ranges = &mr;
		q.nranges = 1;
		q.level = (uint32_t)s->depth;
		q.nodes = s->fidx;
		q.nnodes = s->nf;
		q.rows = s->rep[i].wanted;
		q.nrows = s->rep[i].nwanted;
		if (send_request(s, i, REPAIR_VERB_FETCH, &q)) {
			session_fail(s, "%s: sending fetch requests: %s",
				     cur_table(s), err_msg());
			return;
		}
	}
	if (!waiting(s)) { /* the trees differed, the rows did not */
		progress(s,
			 "%s (%lld,%lld]: %zu mismatched ranges, no row "
			 "differs",
			 cur_table(s), (long long)cur_range(s)->start,
			 (long long)cur_range(s)->end, s->nmism);
		task_next(s);
		return;
	}
	arm(s, s->r->o.request_timeout_ms);
}

static int frag_cmp(const void *x, const void *y)
{
	const struct storage_mutation *a = *(struct storage_mutation *const *)x;
	const struct storage_mutation *b = *(struct storage_mutation *const *)y;
	return slice_cmp(storage_mutation_key(a), storage_mutation_key(b));
}

struct merged_rows {
	struct slice *ids;
	uint8_t (*digests)[16];
	size_t n, cap;
	struct arena *arena;
};

static int collect_row(void *arg, struct slice id, const uint8_t dg[16])
{
	struct merged_rows *m = arg;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		struct slice *ids = realloc(m->ids, cap * sizeof(*ids));
		if (!ids)
			return err_set(ERR_NOMEM, "merged rows");
		m->ids = ids;
		uint8_t(*d)[16] = realloc(m->digests, cap * sizeof(*d));
		if (!d)
			return err_set(ERR_NOMEM, "merged rows");
		m->digests = d;
		m->cap = cap;
	}
	void *c = arena_memdup(m->arena, id.ptr, id.len);
	if (!c)
		return err_set(ERR_NOMEM, "merged rows");
	m->ids[m->n] = slice_make(c, id.len);
	memcpy(m->digests[m->n], dg, 16);
	m->n++;
	return 0;
}

/* Whether replica i answered the digest `dg` for (key, id). */
static bool replica_has(struct task *s, size_t i, struct slice key,
			struct slice id, const uint8_t dg[16])
{
	struct entry probe = {.key = key, .id = id, .replica = (uint8_t)i};
	const struct entry *e = bsearch(&probe, s->entries, s->nentries,
					sizeof(*s->entries), entry_cmp);
	return e && memcmp(e->digest, dg, 16) == 0;
}

static int push_apply(struct replica *p, const struct storage_mutation *m,
		      struct repair_peer_stats *st, size_t rows)
{
	if (p->nends == p->ends_cap) {
		size_t cap = p->ends_cap ? p->ends_cap * 2 : 64;
		size_t *v = realloc(p->ends, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "apply list");
		p->ends = v;
		p->ends_cap = cap;
	}
	size_t before = p->apply.len;
	if (storage_mutation_encode(m, &p->apply))
		return -1;
	p->ends[p->nends++] = p->apply.len;
	st->rows_streamed += rows;
	st->bytes_streamed += p->apply.len - before;
	return 0;
}

/* Merges one partition's fetched versions and queues, for each replica,
 * the merged rows it does not hold. */
static int merge_partition(struct task *s, struct storage_mutation **group,
			   size_t n)
{
	struct storage_mutation *m = storage_fragment_merge(s->meta, group, n);
	if (!m)
		return -1;
	struct arena a;
	arena_create(&a, 0);
	struct merged_rows rows = {.arena = &a};
	struct slice *ids = NULL;
	int rc = storage_fragment_rows(m, collect_row, &rows);
	if (!rc && rows.n && !(ids = malloc(rows.n * sizeof(*ids))))
		rc = err_set(ERR_NOMEM, "row ids");
	struct slice key = storage_mutation_key(m);
	for (size_t i = 0; i < s->nrep && !rc; i++) {
		size_t k = 0;
		for (size_t r = 0; r < rows.n; r++)
			if (!replica_has(s, i, key, rows.ids[r],
					 rows.digests[r]))
				ids[k++] = rows.ids[r];
		if (!k)
			continue;
		struct storage_mutation *sel =
			storage_fragment_select_rows(s->meta, m, ids, k);
		if (!sel) {
			rc = -1;
			break;
		}
		rc = push_apply(&s->rep[i], sel,
				&s->sess->peers[s->rep[i].peer], k);
		storage_mutation_delete(sel);
	}
	free(ids);
	free(rows.ids);
	free(rows.digests);
	arena_destroy(&a);
	storage_mutation_delete(m);
	return rc;
}

static void apply_done_all(struct task *s);

/* Sends each replica its selections, in APPLY messages of at most
 * message_bytes (one selection may exceed it alone). */
static int send_applies(struct task *s)
{
	for (size_t i = 0; i < s->nrep; i++) {
		struct replica *p = &s->rep[i];
		for (size_t first = 0, last; first < p->nends; first = last) {
			size_t from = first ? p->ends[first - 1] : 0;
			last = first + 1;
			while (last < p->nends &&
			       p->ends[last] - from <= s->r->o.message_bytes)
				last++;
			struct slice *fr = malloc((last - first) * sizeof(*fr));
			if (!fr)
				return err_set(ERR_NOMEM, "apply message");
			for (size_t k = first; k < last; k++) {
				size_t b = k ? p->ends[k - 1] : 0;
				fr[k - first] = slice_make(p->apply.data + b,
							   p->ends[k] - b);
			}
			struct repair_msg q = {0};
			q.frags = fr;
			q.nfrags = last - first;
			int rc = send_request(s, i, REPAIR_VERB_APPLY, &q);
			free(fr);
			if (rc)
				return -1;
		}
	}
	return 0;
}

/* Rows queued to the task's replicas' peers so far. */
static uint64_t rows_queued(struct task *s)
{
	uint64_t n = 0;
	for (size_t i = 0; i < s->nrep; i++)
		n += s->sess->peers[s->rep[i].peer].rows_streamed;
	return n;
}

static void fetch_done(struct task *s)
{
	uint64_t queued = rows_queued(s);
	if (s->nfrags > 1)
		qsort(s->frags, s->nfrags, sizeof(*s->frags), frag_cmp);
	for (size_t i = 0; i < s->nfrags;) {
		size_t j = i + 1;
		while (j < s->nfrags &&
		       frag_cmp(&s->frags[i], &s->frags[j]) == 0)
			j++;
		if (merge_partition(s, s->frags + i, j - i)) {
			session_fail(s, "%s: merging rows: %s", cur_table(s),
				     err_msg());
			return;
		}
		i = j;
	}
	uint64_t rows = 0, bytes = 0;
	for (size_t i = 0; i < s->nrep; i++) {
		rows += s->rep[i].nends;
		bytes += s->rep[i].apply.len;
	}
	s->rows_streamed = rows_queued(s) - queued;
	s->bytes_streamed = bytes;
	progress(s,
		 "%s (%lld,%lld]: %zu mismatched ranges, %llu partition "
		 "updates (%llu bytes) %s",
		 cur_table(s), (long long)cur_range(s)->start,
		 (long long)cur_range(s)->end, s->nmism,
		 (unsigned long long)rows, (unsigned long long)bytes,
		 s->sess->preview ? "would stream" : "streaming");
	s->phase = PHASE_APPLY;
	if (!s->sess->preview && send_applies(s)) {
		session_fail(s, "%s: sending rows: %s", cur_table(s),
			     err_msg());
		return;
	}
	if (!waiting(s)) {
		apply_done_all(s);
		return;
	}
	arm(s, s->r->o.request_timeout_ms);
}

static void apply_done_all(struct task *s)
{
	task_next(s);
}

static uint32_t phase_verb(enum phase p)
{
	switch (p) {
	case PHASE_VALIDATE:
		return REPAIR_VERB_VALIDATE_RSP;
	case PHASE_TREE:
		return REPAIR_VERB_TREE_RSP;
	case PHASE_ROWS:
		return REPAIR_VERB_ROWS_RSP;
	case PHASE_FETCH:
		return REPAIR_VERB_FETCH_RSP;
	default:
		return REPAIR_VERB_APPLY_RSP;
	}
}

/* Takes an answer's content; -1 fails the session (message in err). */
static int take_answer(struct task *s, size_t i, const struct repair_msg *m)
{
	struct replica *p = &s->rep[i];
	struct repair_peer_stats *st = &s->sess->peers[p->peer];
	switch (s->phase) {
	case PHASE_VALIDATE:
		if (!p->self)
			s->sess->sum.hash_bytes += m->hashes.len;
		return take_top(s, p, m);
	case PHASE_TREE:
		if (!p->self)
			s->sess->sum.hash_bytes += m->hashes.len;
		return take_tree(p, m);
	case PHASE_ROWS:
		return add_entries(s, i, m);
	case PHASE_FETCH:
		for (size_t k = 0; k < m->nfrags; k++) {
			struct storage_mutation *f = storage_mutation_decode(
				m->frags[k].ptr, m->frags[k].len);
			if (!f)
				return -1;
			if (memcmp(storage_mutation_table_id(f),
				   s->sess->tables[s->ti].id, 16)) {
				storage_mutation_delete(f);
				return err_set(ERR_PROTOCOL,
					       "a fragment of another table");
			}
			if (s->nfrags == s->frags_cap) {
				size_t cap =
					s->frags_cap ? s->frags_cap * 2 : 64;
				struct storage_mutation **v =
					realloc(s->frags, cap * sizeof(*v));
				if (!v) {
					storage_mutation_delete(f);
					return err_set(ERR_NOMEM, "fragments");
				}
				s->frags = v;
				s->frags_cap = cap;
			}
			s->frags[s->nfrags++] = f;
			st->bytes_fetched += m->frags[k].len;
		}
		st->rows_fetched += p->nwanted;
		return 0;
	default:
		return 0;
	}
}

static void phase_done(struct task *s)
{
	switch (s->phase) {
	case PHASE_VALIDATE:
		trees_done(s);
		break;
	case PHASE_TREE:
		tree_round_done(s);
		break;
	case PHASE_ROWS:
		rows_done(s);
		break;
	case PHASE_FETCH:
		fetch_done(s);
		break;
	default:
		apply_done_all(s);
		break;
	}
}

static void trace_answer(struct task *s, size_t i, const struct repair_msg *m)
{
	if (!s->sess->trace)
		return;
	char a[64];
	addr_str(&s->rep[i].addr, a, sizeof(a));
	double after = secs_since(s->r, s->rep[i].sent_us);
	size_t bytes = 0;
	switch (s->phase) {
	case PHASE_VALIDATE:
		trace(s,
		      "tree from %s: %llu partitions, depth %u, top %u "
		      "levels (%zu bytes), after %.3fs",
		      a, (unsigned long long)m->partitions, m->depth, m->levels,
		      m->hashes.len, after);
		break;
	case PHASE_TREE:
		trace(s,
		      "tree level %d from %s: %zu values (%zu bytes), after "
		      "%.3fs",
		      s->level + 1, a, s->rep[i].nreq, m->hashes.len, after);
		break;
	case PHASE_ROWS:
		trace(s, "%zu row hashes from %s after %.3fs", m->nrows, a,
		      after);
		break;
	case PHASE_FETCH:
		for (size_t k = 0; k < m->nfrags; k++)
			bytes += m->frags[k].len;
		trace(s,
		      "fetched %zu fragments (%zu bytes) from %s after %.3fs",
		      m->nfrags, bytes, a, after);
		break;
	default:
		trace(s, "applied on %s after %.3fs", a, after);
		break;
	}
}

void repair_session_receive(struct repair *r, const struct inet_addr *from,
			    uint32_t verb, const uint8_t *msg, size_t len)
{
	struct repair_session *ss = r->session;
	if (!ss)
		return;
	struct repair_msg m;
	struct task *s = NULL;
	if (repair_msg_unpack_response(msg, len, &m) == 0 &&
	    m.session == ss->id)
		for (size_t l = 0; l < ss->jobs; l++)
			if (ss->lanes[l].busy && ss->lanes[l].task == m.task)
				s = &ss->lanes[l];
	if (!s || verb != phase_verb(s->phase)) {
		repair_msg_free(&m);
		return;
	}
	size_t i = 0;
	while (i < s->nrep &&
	       !(s->rep[i].waiting > 0 && inet_addr_eq(&s->rep[i].addr, from)))
		i++;
	if (i == s->nrep) {
		repair_msg_free(&m);
		return;
	}
	s->rep[i].waiting--;
	if (!s->rep[i].self &&
	    (s->phase == PHASE_VALIDATE || s->phase == PHASE_TREE ||
	     s->phase == PHASE_ROWS))
		s->sess->sum.tree_bytes += len;
	char a[64];
	addr_str(from, a, sizeof(a));
	if (!m.ok) {
		session_fail(s, "%s: %s failed on %s: %s", cur_table(s),
			     phase_name(s->phase), a, m.error);
		repair_msg_free(&m);
		return;
	}
	int rc = take_answer(s, i, &m);
	if (!rc)
		trace_answer(s, i, &m);
	repair_msg_free(&m);
	if (rc) {
		session_fail(s, "%s: bad %s answer from %s: %s", cur_table(s),
			     phase_name(s->phase), a, err_msg());
		return;
	}
	uint64_t id = ss->id;
	if (!waiting(s) && (s->phase != PHASE_VALIDATE || !unasked(s)))
		phase_done(s);
	/* a validation ended: others may go now; those that ended wait */
	if (verb == REPAIR_VERB_VALIDATE_RSP && session_live(r, id)) {
		claims_keep(ss);
		validations_send(ss);
	}
}

static void session_timeout(void *arg)
{
	struct task *s = arg;
	char who[256] = "";
	size_t at = 0;
	for (size_t i = 0; i < s->nrep; i++) {
		if (!s->rep[i].waiting)
			continue;
		char a[64];
		addr_str(&s->rep[i].addr, a, sizeof(a));
		int n = snprintf(who + at, sizeof(who) - at, "%s%s",
				 at ? ", " : "", a);
		if (n > 0 && (size_t)n < sizeof(who) - at)
			at += (size_t)n;
	}
	session_fail(s, "%s: timed out waiting for %s from %s", cur_table(s),
		     phase_name(s->phase), who);
}

static void alive_check(void *arg)
{
	struct repair_session *ss = arg;
	struct repair *r = ss->r;
	for (size_t l = 0; l < ss->jobs; l++) {
		struct task *s = &ss->lanes[l];
		for (size_t i = 0; s->busy && i < s->nrep; i++) {
			const struct inet_addr *a = &s->rep[i].addr;
			if (s->rep[i].waiting && !inet_addr_eq(a, &r->o.self) &&
			    !r->o.is_alive(r->o.alive_arg, a)) {
				char b[64];
				session_fail(s, "%s: %s went down during %s",
					     cur_table(s),
					     addr_str(a, b, sizeof(b)),
					     phase_name(s->phase));
				return;
			}
		}
	}
	env_timer_arm(r->env, ss->alive_timer, r->o.alive_check_ms * 1000);
}

int repair_get_status(const struct repair *r, struct repair_status *out)
{
	const struct repair_session *ss = r->session;
	memset(out, 0, sizeof(*out));
	if (!ss)
		return 0;
	const struct task *oldest = NULL;
	for (size_t l = 0; l < ss->jobs; l++) {
		const struct task *t = &ss->lanes[l];
		if (t->busy) {
			out->running++;
			if (!oldest || t->task < oldest->task)
				oldest = t;
		}
	}
	out->session = ss->id;
	out->tasks = ss->ntables * ss->nranges;
	out->task = ss->next - out->running;
	out->table = oldest ? ss->tables[oldest->ti].name : "";
	out->phase = oldest ? phase_name(oldest->phase) : "";
	out->peers = ss->peers;
	out->npeers = ss->npeers;
	return 1;
}

int repair_cancel(struct repair *r, const char *why)
{
	if (!r->session)
		return err_set(ERR_NOT_FOUND, "no repair session is running");
	session_abort(r->session, "cancelled: %s", why ? why : "by request");
	return 0;
}

static int add_peer(struct repair_session *s, const struct inet_addr *a)
{
	for (size_t k = 0; k < s->npeers; k++)
		if (inet_addr_eq(&s->peers[k].addr, a))
			return 0;
	struct repair_peer_stats *v =
		realloc(s->peers, (s->npeers + 1) * sizeof(*v));
	if (!v)
		return err_set(ERR_NOMEM, "peers");
	s->peers = v;
	memset(&s->peers[s->npeers], 0, sizeof(*v));
	s->peers[s->npeers++].addr = *a;
	return 0;
}

static int session_copy(struct repair_session *s,
			const struct repair_request *q)
{
	s->tables = arena_alloc(&s->arena, q->ntables * sizeof(*s->tables));
	s->ranges = arena_alloc(&s->arena, q->nranges * sizeof(*s->ranges));
	if (!s->tables || !s->ranges)
		return err_set(ERR_NOMEM, "repair request");
	for (size_t i = 0; i < q->ntables; i++) {
		memcpy(s->tables[i].id, q->tables[i].id, 16);
		s->tables[i].name = arena_strdup(
			&s->arena, q->tables[i].name ? q->tables[i].name : "?");
		if (!s->tables[i].name)
			return err_set(ERR_NOMEM, "repair request");
	}
	for (size_t i = 0; i < q->nranges; i++) {
		const struct repair_range *g = &q->ranges[i];
		struct inet_addr *reps = arena_alloc_aligned(
			&s->arena, g->nreplicas * sizeof(*reps),
			_Alignof(struct inet_addr));
		if (!reps)
			return err_set(ERR_NOMEM, "repair request");
		memcpy(reps, g->replicas, g->nreplicas * sizeof(*reps));
		s->ranges[i] = *g;
		s->ranges[i].replicas = reps;
		s->ranges[i].dcs = NULL;
		if (g->dcs) {
			const char **dcs = arena_alloc_aligned(
				&s->arena, g->nreplicas * sizeof(*dcs),
				_Alignof(const char *));
			if (!dcs)
				return err_set(ERR_NOMEM, "repair request");
			for (size_t k = 0; k < g->nreplicas; k++)
				if (!(dcs[k] = arena_strdup(
					      &s->arena,
					      g->dcs[k] ? g->dcs[k] : "")))
					return err_set(ERR_NOMEM,
						       "repair request");
			s->ranges[i].dcs = dcs;
		}
		for (size_t k = 0; k < g->nreplicas; k++)
			if (add_peer(s, &reps[k]))
				return -1;
	}
	s->ntables = q->ntables;
	s->nranges = q->nranges;
	return 0;
}

int repair_start(struct repair *r, const struct repair_request *q,
		 repair_progress_fn progress_fn, repair_done_fn done, void *arg,
		 uint64_t *session)
{
	if (r->session)
		return err_set(ERR_EXISTS, "repair session %llu is running",
			       (unsigned long long)r->session->id);
	if (!q->ntables || !q->nranges)
		return err_set(ERR_INVALID, "nothing to repair");
	if (q->jobs > REPAIR_MAX_JOBS)
		return err_set(ERR_INVALID, "job threads: %u (1..%d)", q->jobs,
			       REPAIR_MAX_JOBS);
	if (q->parallelism != REPAIR_PARALLEL &&
	    q->parallelism != REPAIR_SEQUENTIAL &&
	    q->parallelism != REPAIR_DC_PARALLEL)
		return err_set(ERR_INVALID, "parallelism %d", q->parallelism);
	for (size_t i = 0; i < q->nranges; i++)
		if (q->ranges[i].nreplicas < 1 ||
		    q->ranges[i].nreplicas > REPAIR_MAX_REPLICAS)
			return err_set(ERR_INVALID,
				       "range %zu has %zu replicas", i,
				       q->ranges[i].nreplicas);
	struct repair_session *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(ERR_NOMEM, "repair session");
	s->r = r;
	arena_create(&s->arena, 0);
	bool timers = true;
	for (size_t l = 0; l < REPAIR_MAX_JOBS; l++) {
		struct task *t = &s->lanes[l];
		t->sess = s;
		t->r = r;
		arena_create(&t->rows_arena, 0);
		t->timer = env_timer_new(r->env, session_timeout, t);
		timers = timers && t->timer;
	}
	if (r->o.is_alive)
		s->alive_timer = env_timer_new(r->env, alive_check, s);
	if (!timers || (r->o.is_alive && !s->alive_timer) ||
	    session_copy(s, q)) {
		if (!timers || (r->o.is_alive && !s->alive_timer))
			err_set(ERR_NOMEM, "repair timer");
		session_free(s);
		return -1;
	}
	s->id = r->next_session++;
	s->preview = q->preview;
	s->exclusive = q->exclusive;
	s->trace = q->trace;
	s->parallelism = q->parallelism;
	s->jobs = q->jobs ? q->jobs : 1;
	s->max_depth = q->max_depth && q->max_depth < MERKLE_MAX_DEPTH
			       ? q->max_depth
			       : MERKLE_MAX_DEPTH;
	s->progress = progress_fn;
	s->done = done;
	s->task_done = q->task_done;
	s->arg = arg;
	s->start_us = env_mono_us(r->env);
	r->session = s;
	if (session)
		*session = s->id;
	if (s->alive_timer)
		env_timer_arm(r->env, s->alive_timer,
			      r->o.alive_check_ms * 1000);
	session_pump(s);
	return 0;
}
