/*
 * Repair sessions (repair.h): the coordinator's state machine. The tree
 * exchange and the row sync are in repair_sync.c; the participant side
 * is in repair_replica.c, the wire form in repair_msg.c.
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
#include "repair/repair_session_internal.h"

#include "common/arena.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the session --------------------------------------------------------- */

static void task_reset(struct task *s)
{
	s->sending = false;
	s->send_rep = s->send_first = 0;
	storage_table_meta_unref(s->meta);
	s->meta = NULL;
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

void repair_session_free(struct repair_session *ss)
{
	for (size_t l = 0; l < REPAIR_MAX_JOBS; l++) {
		struct task *t = &ss->lanes[l];
		task_reset(t);
		env_timer_free(ss->r->env, t->timer);
		if (t->pace_timer)
			env_timer_free(ss->r->env, t->pace_timer);
		arena_destroy(&t->rows_arena);
	}
	env_timer_free(ss->r->env, ss->alive_timer);
	if (ss->incr_timer)
		env_timer_free(ss->r->env, ss->incr_timer);
	free(ss->awaiting);
	arena_destroy(&ss->arena);
	free(ss->peers);
	free(ss);
}

struct repair_range *repair_task_cur_range(struct task *s)
{
	return &s->sess->ranges[s->ri];
}

const char *repair_task_cur_table(struct task *s)
{
	return s->sess->tables[s->ti].name;
}

static struct merkle_range task_range(struct task *s)
{
	return (struct merkle_range){repair_task_cur_range(s)->start,
				     repair_task_cur_range(s)->end};
}

void repair_task_progress(struct task *s, const char *fmt, ...)
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

void repair_task_trace(struct task *s, const char *fmt, ...)
{
	struct repair_session *ss = s->sess;
	if (!ss->trace || !ss->progress)
		return;
	char line[512];
	int n = snprintf(line, sizeof(line), "trace: +%.3fs %s (%lld,%lld]: ",
			 secs_since(ss->r, ss->start_us),
			 repair_task_cur_table(s),
			 (long long)repair_task_cur_range(s)->start,
			 (long long)repair_task_cur_range(s)->end);
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
	repair_state_task_ended(ss);
	if (!ss->task_done)
		return;
	struct repair_task_result res = {
		.session = ss->id,
		.table = repair_task_cur_table(s),
		.start = repair_task_cur_range(s)->start,
		.end = repair_task_cur_range(s)->end,
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
	ss->sum.incremental = ss->incremental;
	memcpy(ss->sum.uuid, ss->uuid, 16);
	ss->sum.repaired_at = ok ? ss->repaired_at : 0;
	ss->sum.partial = ss->incremental && !ss->repaired_at;
	repair_state_end(ss, ok, error);
	if (!ok)
		repair_incr_fail(ss);
	if (ss->incr_timer)
		env_timer_cancel(r->env, ss->incr_timer);
	for (size_t l = 0; l < REPAIR_MAX_JOBS; l++) {
		struct task *t = &ss->lanes[l];
		env_timer_cancel(r->env, t->timer);
		env_timer_cancel(r->env, t->pace_timer);
		t->sending = false;
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
	repair_session_free(ss);
	done(arg, &sum);
	free((void *)sum.peers);
}

void repair_session_succeed(struct repair_session *ss)
{
	session_end(ss, true, NULL);
}

void repair_session_abort(struct repair_session *ss, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	session_end(ss, false, msg);
}

void repair_task_fail(struct task *s, const char *fmt, ...)
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

void repair_task_arm(struct task *s, uint64_t ms)
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
		repair_task_trace(s, "validation requested from %s", a);
		break;
	case REPAIR_VERB_TREE:
		repair_task_trace(
			s, "tree level %u under %zu nodes requested from %s",
			q->level + 1, q->nnodes, a);
		break;
	case REPAIR_VERB_ROWS:
		repair_task_trace(s,
				  "row hashes of %zu leaves requested from %s",
				  q->nnodes, a);
		break;
	case REPAIR_VERB_FETCH:
		repair_task_trace(s, "fetching %zu rows from %s", q->nrows, a);
		break;
	default:
		for (size_t k = 0; k < q->nfrags; k++)
			bytes += q->frags[k].len;
		repair_task_trace(
			s, "sending %zu partition updates (%zu bytes) to %s",
			q->nfrags, bytes, a);
		break;
	}
}

/* Sends `q` (session and task filled here) to replica i. */
int repair_task_send(struct task *s, size_t i, uint32_t verb,
		     struct repair_msg *q)
{
	q->session = s->sess->id;
	q->task = s->task;
	q->incremental = s->sess->incremental;
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
void repair_task_next(struct task *s)
{
	repair_task_trace(s, "task done in %.3fs",
			  secs_since(s->r, s->start_us));
	task_release(s);
	task_result(s, true, NULL);
	task_reset(s);
	s->busy = false;
	env_timer_cancel(s->r->env, s->timer);
	repair_session_pump(s->sess);
}

size_t repair_task_waiting(const struct task *s)
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
		repair_task_fail(s, "%s: unknown table",
				 repair_task_cur_table(s));
		return -1;
	}
	struct repair_range *rg = repair_task_cur_range(s);
	s->phase = PHASE_VALIDATE;
	s->nrep = rg->nreplicas;
	for (size_t i = 0; i < s->nrep; i++) {
		s->rep[i].addr = rg->replicas[i];
		s->rep[i].dc = rg->dcs ? rg->dcs[i] : NULL;
		s->rep[i].asked = false;
		s->rep[i].self = inet_addr_eq(&rg->replicas[i], &s->r->o.self);
		s->rep[i].incarnation =
			s->r->o.incarnation
				? s->r->o.incarnation(s->r->o.alive_arg,
						      &rg->replicas[i])
				: 0;
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
			if (repair_task_send(s, i, REPAIR_VERB_VALIDATE, &q)) {
				char a[64];
				repair_task_fail(
					s, "%s: cannot send to %s: %s",
					repair_task_cur_table(s),
					addr_str(&s->rep[i].addr, a, sizeof(a)),
					err_msg());
				return -1;
			}
			sent = true;
		}
		if (sent)
			repair_task_arm(s, s->r->o.validate_timeout_ms);
		else if (!repair_task_waiting(
				 s)) /* held back by another task */
			env_timer_cancel(s->r->env, s->timer);
	}
	return 0;
}

/* Starts tasks while lanes are free (in order; a task waits while one of
 * its table with an overlapping range runs), ends the session when all
 * are done, sends the validations allowed. -1 when the session ended. */
int repair_session_pump(struct repair_session *ss)
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
		repair_state_step(ss, REPAIR_STEP_REPAIR_COMPLETE);
		if (ss->incremental)
			repair_incr_finalize(ss); /* PROPOSE, COMMIT */
		else
			session_end(ss, true, NULL);
		return -1;
	}
	return validations_send(ss);
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
		s->sess->sum.partitions += m->partitions;
		return repair_sync_take_top(s, p, m);
	case PHASE_TREE:
		if (!p->self)
			s->sess->sum.hash_bytes += m->hashes.len;
		return repair_sync_take_tree(p, m);
	case PHASE_ROWS:
		return repair_sync_add_entries(s, i, m);
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
		repair_sync_trees_done(s);
		break;
	case PHASE_TREE:
		repair_sync_tree_round_done(s);
		break;
	case PHASE_ROWS:
		repair_sync_rows_done(s);
		break;
	case PHASE_FETCH:
		repair_sync_fetch_done(s);
		break;
	default:
		repair_sync_apply_done(s);
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
		repair_task_trace(
			s,
			"tree from %s: %llu partitions, depth %u, top %u "
			"levels (%zu bytes), after %.3fs",
			a, (unsigned long long)m->partitions, m->depth,
			m->levels, m->hashes.len, after);
		break;
	case PHASE_TREE:
		repair_task_trace(
			s,
			"tree level %d from %s: %zu values (%zu bytes), after "
			"%.3fs",
			s->level + 1, a, s->rep[i].nreq, m->hashes.len, after);
		break;
	case PHASE_ROWS:
		repair_task_trace(s, "%zu row hashes from %s after %.3fs",
				  m->nrows, a, after);
		break;
	case PHASE_FETCH:
		for (size_t k = 0; k < m->nfrags; k++)
			bytes += m->frags[k].len;
		repair_task_trace(
			s,
			"fetched %zu fragments (%zu bytes) from %s after %.3fs",
			m->nfrags, bytes, a, after);
		break;
	default:
		repair_task_trace(s, "applied on %s after %.3fs", a, after);
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
	if (verb == REPAIR_VERB_PREPARE_RSP || verb == REPAIR_VERB_PROMISE ||
	    verb == REPAIR_VERB_COMMIT_RSP) {
		if (repair_msg_unpack_response(msg, len, &m) == 0 &&
		    m.session == ss->id)
			repair_incr_receive(ss, from, verb, &m);
		repair_msg_free(&m);
		return;
	}
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
		repair_task_fail(s, "%s: %s failed on %s: %s",
				 repair_task_cur_table(s), phase_name(s->phase),
				 a, m.error);
		repair_msg_free(&m);
		return;
	}
	int rc = take_answer(s, i, &m);
	if (!rc)
		trace_answer(s, i, &m);
	repair_msg_free(&m);
	if (rc) {
		repair_task_fail(s, "%s: bad %s answer from %s: %s",
				 repair_task_cur_table(s), phase_name(s->phase),
				 a, err_msg());
		return;
	}
	uint64_t id = ss->id;
	if (!repair_task_waiting(s) && !s->sending &&
	    (s->phase != PHASE_VALIDATE || !unasked(s)))
		phase_done(s);
	/* a validation ended: others may go now; those that ended wait */
	if (verb == REPAIR_VERB_VALIDATE_RSP && session_live(r, id)) {
		claims_keep(ss);
		validations_send(ss);
	}
}

void repair_task_timeout(void *arg)
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
	repair_task_fail(s, "%s: timed out waiting for %s from %s",
			 repair_task_cur_table(s), phase_name(s->phase), who);
}

void repair_session_alive_check(void *arg)
{
	struct repair_session *ss = arg;
	struct repair *r = ss->r;
	if (repair_incr_alive_check(ss))
		return;
	for (size_t l = 0; l < ss->jobs; l++) {
		struct task *s = &ss->lanes[l];
		for (size_t i = 0; s->busy && i < s->nrep; i++) {
			const struct inet_addr *a = &s->rep[i].addr;
			if (!s->rep[i].waiting || inet_addr_eq(a, &r->o.self))
				continue;
			char b[64];
			if (!r->o.is_alive(r->o.alive_arg, a)) {
				repair_task_fail(s,
						 "%s: %s went down during %s",
						 repair_task_cur_table(s),
						 addr_str(a, b, sizeof(b)),
						 phase_name(s->phase));
				return;
			}
			int64_t now =
				r->o.incarnation
					? r->o.incarnation(r->o.alive_arg, a)
					: 0;
			if (s->rep[i].incarnation && now &&
			    now != s->rep[i].incarnation) {
				repair_task_fail(s,
						 "%s: %s restarted during %s",
						 repair_task_cur_table(s),
						 addr_str(a, b, sizeof(b)),
						 phase_name(s->phase));
				return;
			}
		}
	}
	env_timer_arm(r->env, ss->alive_timer, r->o.alive_check_ms * 1000);
}
