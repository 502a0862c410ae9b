/*
 * Repair (repair.h): the object, its options, its messages (sent with
 * env_send; those to this node itself through a local queue) and the
 * public calls that start, watch and cancel a session. The session's
 * state machine is in repair_session.c and repair_sync.c, the participant
 * side in repair_replica.c, the wire form in repair_msg.c.
 */
#include "repair/repair_session_internal.h"

#include "common/arena.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void repair_options_default(struct repair_options *o)
{
	memset(o, 0, sizeof(*o));
	o->validate_timeout_ms = 600000;
	o->request_timeout_ms = 120000;
	o->session_space = (size_t)16 << 20;
	o->message_bytes = (size_t)4 << 20;
	o->alive_check_ms = 1000;
	o->local_timeout_ms = 86400000;
	o->local_check_ms = 5000;
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
	    !r->o.alive_check_ms || !r->o.local_timeout_ms ||
	    !r->o.local_check_ms) {
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
		if (!r->o.local_timeout_ms)
			r->o.local_timeout_ms = d.local_timeout_ms;
		if (!r->o.local_check_ms)
			r->o.local_check_ms = d.local_check_ms;
	}
	r->store = store;
	r->store_arg = store_arg;
	r->local_timer = env_timer_new(env, local_deliver, r);
	r->claim_timer = env_timer_new(env, repair_claims_sweep, r);
	r->sweep_timer = env_timer_new(env, repair_locals_sweep, r);
	if (!r->local_timer || !r->claim_timer || !r->sweep_timer) {
		if (r->local_timer)
			env_timer_free(env, r->local_timer);
		if (r->claim_timer)
			env_timer_free(env, r->claim_timer);
		if (r->sweep_timer)
			env_timer_free(env, r->sweep_timer);
		free(r);
		err_set(ERR_NOMEM, "repair timer");
		return NULL;
	}
	env_timer_arm(env, r->sweep_timer, r->o.local_check_ms * 1000);
	return r;
}

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
	repair_locals_free(r);
	repair_states_free(r);
	env_timer_free(r->env, r->local_timer);
	env_timer_free(r->env, r->claim_timer);
	env_timer_free(r->env, r->sweep_timer);
	free(r);
}

void repair_delete(struct repair *r)
{
	if (!r)
		return;
	if (r->session)
		repair_session_free(r->session);
	r->session = NULL;
	env_timer_cancel(r->env, r->local_timer);
	env_timer_cancel(r->env, r->claim_timer);
	env_timer_cancel(r->env, r->sweep_timer);
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

void repair_set_stream_throughput(struct repair *r, uint64_t bytes_per_sec)
{
	r->o.stream_throughput = bytes_per_sec;
	if (!bytes_per_sec)
		r->stream_free_us = 0;
}

uint64_t repair_stream_throughput(const struct repair *r)
{
	return r->o.stream_throughput;
}

void repair_stream_stats(const struct repair *r,
			 struct repair_stream_stats *out)
{
	*out = r->stream;
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
	repair_session_abort(r->session, "cancelled: %s",
			     why ? why : "by request");
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

/* The wall clock's ms at the start, or one past the last id if that is
 * later: ids never repeat across restarts of the node (the wall clock has
 * moved on), so a replica cannot take a restarted coordinator's session
 * for its previous incarnation's (claims, release notes). */
static uint64_t session_id(struct repair *r)
{
	int64_t wall = env_wall_us(r->env);
	uint64_t ms = wall > 0 ? (uint64_t)wall / 1000 : 0;
	uint64_t id = r->next_session > ms ? r->next_session : ms;
	r->next_session = id + 1;
	return id;
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
	if (q->incremental && q->preview)
		return err_set(ERR_INVALID,
			       "incremental repair cannot be a preview");
	if (q->incremental &&
	    (!r->store->prepare || !r->store->finish ||
	     !r->store->scan_pending || !r->store->apply_pending))
		return err_set(ERR_INVALID,
			       "incremental repair is not supported here");
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
		t->timer = env_timer_new(r->env, repair_task_timeout, t);
		t->pace_timer = env_timer_new(r->env, repair_sync_send_more, t);
		timers = timers && t->timer && t->pace_timer;
	}
	if (r->o.is_alive)
		s->alive_timer =
			env_timer_new(r->env, repair_session_alive_check, s);
	if (!timers || (r->o.is_alive && !s->alive_timer) ||
	    session_copy(s, q)) {
		if (!timers || (r->o.is_alive && !s->alive_timer))
			err_set(ERR_NOMEM, "repair timer");
		repair_session_free(s);
		return -1;
	}
	s->id = session_id(r);
	s->preview = q->preview;
	s->exclusive = q->exclusive;
	s->trace = q->trace;
	s->incremental = q->incremental;
	s->repaired_at = q->partial ? 0 : env_wall_us(r->env) / 1000;
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
	repair_state_begin(s, q);
	r->session = s;
	if (session)
		*session = s->id;
	if (s->alive_timer)
		env_timer_arm(r->env, s->alive_timer,
			      r->o.alive_check_ms * 1000);
	if (s->incremental)
		repair_incr_begin(s); /* the tasks start once prepared */
	else
		repair_session_pump(s);
	return 0;
}
