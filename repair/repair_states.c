/*
 * The states of the last sessions this node coordinated (repair.h's
 * repair_state_list), Cassandra 5.0's CoordinatorState and SessionState
 * for system_views.repairs and repair_sessions: a ring of
 * REPAIR_MAX_STATES records, each with copies of what its request named
 * (an arena of its own, so a record outlives its session) and the wall
 * clock at each step. Updated on the loop by the session as it moves;
 * read on the loop by the views.
 */
#include "repair/repair_session_internal.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct repair_state {
	struct arena arena;
	struct repair_state_info info;
	uint64_t start_mono_us;
	char error[256];
};

static void state_free(struct repair_state *st)
{
	if (!st)
		return;
	arena_destroy(&st->arena);
	free(st);
}

void repair_states_free(struct repair *r)
{
	for (size_t i = 0; i < REPAIR_MAX_STATES; i++) {
		state_free(r->states[i]);
		r->states[i] = NULL;
	}
}

static const char *const *dup_strings(struct arena *a, const char *const *v,
				      size_t n)
{
	if (!n)
		return NULL;
	const char **out = arena_alloc_aligned(a, n * sizeof(*out),
					       _Alignof(const char *));
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = arena_strdup(a, v[i] ? v[i] : "")))
			return NULL;
	return out;
}

static int copy_request(struct repair_state *st, const struct repair_session *s,
			const struct repair_request *q)
{
	struct arena *a = &st->arena;
	struct repair_state_info *in = &st->info;
	const char **names = arena_alloc_aligned(a, s->ntables * sizeof(*names),
						 _Alignof(const char *));
	if (!names)
		return -1;
	for (size_t i = 0; i < s->ntables; i++)
		if (!(names[i] = arena_strdup(
			      a, s->tables[i].name ? s->tables[i].name : "")))
			return -1;
	in->tables = names;
	in->ntables = s->ntables;
	struct repair_range *rs = arena_alloc_aligned(
		a, s->nranges * sizeof(*rs), _Alignof(struct repair_range));
	if (!rs)
		return -1;
	for (size_t i = 0; i < s->nranges; i++) {
		rs[i] = s->ranges[i];
		rs[i].dcs = NULL;
		if (!(rs[i].replicas =
			      arena_memdup(a, s->ranges[i].replicas,
					   s->ranges[i].nreplicas *
						   sizeof(struct inet_addr))))
			return -1;
	}
	in->ranges = rs;
	in->nranges = s->nranges;
	struct inet_addr *ps = arena_alloc_aligned(
		a, (s->npeers + 1) * sizeof(*ps), _Alignof(struct inet_addr));
	if (!ps)
		return -1;
	for (size_t i = 0; i < s->npeers; i++)
		ps[i] = s->peers[i].addr;
	in->participants = ps;
	in->nparticipants = s->npeers;
	if (q->asked) {
		const struct repair_asked *k = q->asked;
		in->asked = *k;
		in->asked.column_families =
			dup_strings(a, k->column_families, k->ncolumn_families);
		in->asked.data_centers =
			dup_strings(a, k->data_centers, k->ndata_centers);
		in->asked.hosts = dup_strings(a, k->hosts, k->nhosts);
		if ((k->ncolumn_families && !in->asked.column_families) ||
		    (k->ndata_centers && !in->asked.data_centers) ||
		    (k->nhosts && !in->asked.hosts))
			return -1;
	}
	return 0;
}

void repair_state_begin(struct repair_session *s,
			const struct repair_request *q)
{
	struct repair *r = s->r;
	if (q->unlisted)
		return;
	struct repair_state *st = calloc(1, sizeof(*st));
	if (!st)
		return; /* not listed: the session runs all the same */
	arena_create(&st->arena, 0);
	if (copy_request(st, s, q)) {
		state_free(st);
		return;
	}
	struct repair_state_info *in = &st->info;
	int64_t now = env_wall_us(r->env) / 1000;
	in->session = s->id;
	in->command = (uint32_t)r->states_next + 1;
	in->init_ms = in->updated_ms = now;
	in->preview = q->preview;
	in->incremental = q->incremental;
	in->trace = q->trace;
	in->parallelism = q->parallelism;
	in->jobs = q->jobs ? q->jobs : 1;
	in->error = st->error;
	st->start_mono_us = env_mono_us(r->env);
	in->steps_ms[REPAIR_STEP_SETUP] = now;
	in->steps_ms[REPAIR_STEP_START] = now;
	in->steps_ms[REPAIR_STEP_PREPARE_START] = now;
	if (!q->incremental) { /* nothing to prepare */
		in->steps_ms[REPAIR_STEP_PREPARE_COMPLETE] = now;
		in->steps_ms[REPAIR_STEP_REPAIR_START] = now;
	}
	size_t slot = r->states_next++ % REPAIR_MAX_STATES;
	state_free(r->states[slot]);
	r->states[slot] = st;
	s->state = st;
}

void repair_state_step(struct repair_session *s, enum repair_step step)
{
	if (!s->state)
		return;
	struct repair_state_info *in = &s->state->info;
	int64_t now = env_wall_us(s->r->env) / 1000;
	for (int k = 0; k <= (int)step; k++)
		if (!in->steps_ms[k])
			in->steps_ms[k] = now;
	in->updated_ms = now;
}

void repair_state_task_ended(struct repair_session *s)
{
	if (!s->state)
		return;
	s->state->info.tasks_done++;
	s->state->info.updated_ms = env_wall_us(s->r->env) / 1000;
}

void repair_state_end(struct repair_session *s, bool ok, const char *error)
{
	struct repair_state *st = s->state;
	if (!st)
		return;
	struct repair_state_info *in = &st->info;
	struct repair_counts *c = &s->r->counts;
	int kind = in->preview ? 2 : in->incremental ? 1 : 0;
	if (ok)
		c->succeeded[kind]++;
	else
		c->failed[kind]++;
	for (size_t i = 0; !in->preview && i < s->npeers; i++) {
		c->bytes_streamed += s->peers[i].bytes_streamed;
		c->rows_streamed += s->peers[i].rows_streamed;
	}
	in->result = ok ? REPAIR_RESULT_SUCCESS : REPAIR_RESULT_FAILURE;
	snprintf(st->error, sizeof(st->error), "%s", ok || !error ? "" : error);
	in->updated_ms = env_wall_us(s->r->env) / 1000;
	in->duration_ms = (env_mono_us(s->r->env) - st->start_mono_us) / 1000;
	s->state = NULL;
}

void repair_get_counts(const struct repair *r, struct repair_counts *out)
{
	*out = r->counts;
	out->running = r->session && r->session->state;
}

void repair_state_list(const struct repair *r, repair_state_fn each, void *arg)
{
	size_t n = r->states_next < REPAIR_MAX_STATES ? r->states_next
						      : REPAIR_MAX_STATES;
	for (size_t i = 0; i < n; i++) {
		struct repair_state *st =
			r->states[(r->states_next - n + i) % REPAIR_MAX_STATES];
		if (!st)
			continue;
		struct repair_state_info in = st->info;
		if (in.result == REPAIR_RESULT_NONE)
			in.duration_ms =
				(env_mono_us(r->env) - st->start_mono_us) /
				1000;
		each(arg, &in);
	}
}

void repair_state_timeuuid(const struct repair *r, uint64_t session, int64_t ms,
			   unsigned kind, uint8_t out[16])
{
	/* 100 ns intervals since 1582-10-15; the session id (ms, unique on
	 * this node) makes the time, its low bits the sub-ms part */
	uint64_t t = (uint64_t)(ms > 0 ? ms : 0) * 10000 +
		     0x01B21DD213814000ull + (session % 10000);
	uint32_t lo = (uint32_t)t;
	uint16_t mid = (uint16_t)(t >> 32);
	uint16_t hi = (uint16_t)((t >> 48) & 0x0fff) | 0x1000;
	out[0] = (uint8_t)(lo >> 24);
	out[1] = (uint8_t)(lo >> 16);
	out[2] = (uint8_t)(lo >> 8);
	out[3] = (uint8_t)lo;
	out[4] = (uint8_t)(mid >> 8);
	out[5] = (uint8_t)mid;
	out[6] = (uint8_t)(hi >> 8);
	out[7] = (uint8_t)hi;
	/* variant 10, clock sequence: the kind and the session's bits */
	uint16_t seq = (uint16_t)(((session >> 4) & 0x0ff0) | (kind & 0x0f));
	out[8] = (uint8_t)(0x80 | ((seq >> 8) & 0x3f));
	out[9] = (uint8_t)seq;
	/* node: the address's last 4 bytes and its port */
	const struct inet_addr *a = &r->o.self;
	const uint8_t *ip = a->family == INET_V6 ? a->ip + 12 : a->ip;
	memcpy(out + 10, ip, 4);
	out[14] = (uint8_t)(a->port >> 8);
	out[15] = (uint8_t)a->port;
}
