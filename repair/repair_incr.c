/*
 * Incremental repair, the coordinator's side of Cassandra 4's consistent
 * session (CoordinatorSession): PREPARE every participant (each marks its
 * unrepaired data of the session's tables within the ranges it replicates
 * as pending, anticompacting what lies partly inside), run the tasks over
 * that pending data only, then PROPOSE (each promises) and COMMIT (pending
 * becomes repaired at the session's start); any failure sends FAIL
 * (pending becomes unrepaired again). The participants' side is
 * repair_local.c.
 */
#include "repair/repair_session_internal.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *incr_step(int phase)
{
	switch (phase) {
	case INCR_PREPARE:
		return "prepare";
	case INCR_PROPOSE:
		return "finalize promise";
	default:
		return "finalize commit";
	}
}

/* Sends `verb` to peer i: the session's tables, the ranges the peer
 * replicates. */
static int send_peer(struct repair_session *ss, size_t i, uint32_t verb)
{
	struct repair_msg q = {0};
	q.session = ss->id;
	memcpy(q.table_id, ss->tables[0].id, 16);
	uint8_t *ids = malloc(ss->ntables * 16);
	struct merkle_range *rs = calloc(ss->nranges + 1, sizeof(*rs));
	int rc = ids && rs ? 0 : err_set(ERR_NOMEM, "repair message");
	for (size_t t = 0; !rc && t < ss->ntables; t++)
		memcpy(ids + 16 * t, ss->tables[t].id, 16);
	q.table_ids = slice_make(ids, ids ? ss->ntables * 16 : 0);
	for (size_t k = 0; !rc && k < ss->nranges; k++) {
		const struct repair_range *g = &ss->ranges[k];
		for (size_t x = 0; x < g->nreplicas; x++)
			if (inet_addr_eq(&g->replicas[x], &ss->peers[i].addr)) {
				rs[q.nranges].start = g->start;
				rs[q.nranges++].end = g->end;
				break;
			}
	}
	q.ranges = rs;
	q.repaired_at = ss->repaired_at;
	/* a scheduled segment's PREPARE is refused by a replica busy with
	 * another coordinator's task, before any anticompaction */
	q.exclusive = ss->exclusive && verb == REPAIR_VERB_PREPARE;
	struct buf b;
	buf_init(&b);
	if (!rc)
		rc = repair_msg_pack_request(&q, &b);
	if (!rc)
		rc = repair_send(ss->r, &ss->peers[i].addr, verb, &b);
	buf_free(&b);
	free(ids);
	free(rs);
	return rc;
}

static void incr_timeout(void *arg)
{
	struct repair_session *ss = arg;
	char who[256] = "";
	size_t at = 0;
	for (size_t i = 0; i < ss->npeers; i++) {
		if (!ss->awaiting[i])
			continue;
		char a[64];
		inet_addr_format(&ss->peers[i].addr, a, sizeof(a));
		int n = snprintf(who + at, sizeof(who) - at, "%s%s",
				 at ? ", " : "", a);
		if (n > 0 && (size_t)n < sizeof(who) - at)
			at += (size_t)n;
	}
	repair_session_abort(ss,
			     "incremental repair: timed out waiting for "
			     "%s from %s",
			     incr_step(ss->incr), who);
}

/* Sends the phase's request to every participant; -1: the session
 * ended. */
static int send_phase(struct repair_session *ss, int phase, uint32_t verb)
{
	ss->incr = phase;
	for (size_t i = 0; i < ss->npeers; i++)
		ss->awaiting[i] = true;
	for (size_t i = 0; i < ss->npeers; i++)
		if (send_peer(ss, i, verb)) {
			char a[64];
			repair_session_abort(
				ss, "incremental repair: %s to %s: %s",
				incr_step(phase),
				inet_addr_format(&ss->peers[i].addr, a,
						 sizeof(a)),
				err_msg());
			return -1;
		}
	/* anticompaction rewrites data: the validation's time budget */
	uint64_t ms = phase == INCR_PREPARE ? ss->r->o.validate_timeout_ms
					    : ss->r->o.request_timeout_ms;
	env_timer_arm(ss->r->env, ss->incr_timer, ms * 1000);
	return 0;
}

int repair_incr_begin(struct repair_session *ss)
{
	repair_session_uuid(&ss->r->o.self, ss->id, ss->uuid);
	ss->awaiting = calloc(ss->npeers + 1, sizeof(*ss->awaiting));
	ss->incr_timer = env_timer_new(ss->r->env, incr_timeout, ss);
	if (!ss->awaiting || !ss->incr_timer) {
		repair_session_abort(ss, "incremental repair: out of memory");
		return -1;
	}
	if (ss->progress) {
		char u[40];
		const uint8_t *x = ss->uuid;
		snprintf(u, sizeof(u),
			 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
			 "%02x%02x%02x%02x%02x%02x",
			 x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8],
			 x[9], x[10], x[11], x[12], x[13], x[14], x[15]);
		char line[128];
		snprintf(line, sizeof(line),
			 "incremental session %s: preparing %zu participants",
			 u, ss->npeers);
		ss->progress(ss->arg, line);
	}
	return send_phase(ss, INCR_PREPARE, REPAIR_VERB_PREPARE);
}

void repair_incr_finalize(struct repair_session *ss)
{
	send_phase(ss, INCR_PROPOSE, REPAIR_VERB_PROPOSE);
}

void repair_incr_fail(struct repair_session *ss)
{
	if (!ss->incremental || !ss->awaiting)
		return;
	for (size_t i = 0; i < ss->npeers; i++)
		send_peer(ss, i, REPAIR_VERB_FAIL); /* best effort */
}

static int phase_of(uint32_t verb)
{
	switch (verb) {
	case REPAIR_VERB_PREPARE_RSP:
		return INCR_PREPARE;
	case REPAIR_VERB_PROMISE:
		return INCR_PROPOSE;
	default:
		return INCR_COMMIT;
	}
}

void repair_incr_receive(struct repair_session *ss,
			 const struct inet_addr *from, uint32_t verb,
			 const struct repair_msg *m)
{
	if (!ss->incremental || ss->incr != phase_of(verb))
		return;
	size_t i = 0;
	while (i < ss->npeers &&
	       !(ss->awaiting[i] && inet_addr_eq(&ss->peers[i].addr, from)))
		i++;
	if (i == ss->npeers)
		return;
	char a[64];
	inet_addr_format(from, a, sizeof(a));
	if (!m->ok) {
		repair_session_abort(ss,
				     "incremental repair: %s failed on %s: %s",
				     incr_step(ss->incr), a, m->error);
		return;
	}
	ss->awaiting[i] = false;
	if (ss->incr == INCR_PREPARE)
		ss->sum.marked += m->sstables;
	else if (ss->incr == INCR_COMMIT)
		ss->sum.repaired += m->sstables;
	for (size_t k = 0; k < ss->npeers; k++)
		if (ss->awaiting[k])
			return;
	env_timer_cancel(ss->r->env, ss->incr_timer);
	if (ss->incr == INCR_PREPARE) {
		ss->incr = INCR_REPAIR;
		repair_state_step(ss, REPAIR_STEP_REPAIR_START);
		repair_session_pump(ss);
	} else if (ss->incr == INCR_PROPOSE) {
		send_phase(ss, INCR_COMMIT, REPAIR_VERB_COMMIT);
	} else {
		ss->incr = INCR_NONE; /* done: nothing to FAIL */
		free(ss->awaiting);
		ss->awaiting = NULL;
		repair_session_succeed(ss);
	}
}

int repair_incr_alive_check(struct repair_session *ss)
{
	struct repair *r = ss->r;
	if (!ss->awaiting || ss->incr == INCR_REPAIR || ss->incr == INCR_NONE)
		return 0;
	for (size_t i = 0; i < ss->npeers; i++) {
		const struct inet_addr *a = &ss->peers[i].addr;
		if (!ss->awaiting[i] || inet_addr_eq(a, &r->o.self))
			continue;
		if (!r->o.is_alive(r->o.alive_arg, a)) {
			char b[64];
			repair_session_abort(
				ss,
				"incremental repair: %s went down during %s",
				inet_addr_format(a, b, sizeof(b)),
				incr_step(ss->incr));
			return 1;
		}
	}
	return 0;
}

void repair_session_uuid(const struct inet_addr *co, uint64_t id,
			 uint8_t out[16])
{
	/* bytes 0-7 the session id, 8-9 the port, 10-15 the address (its
	 * last 6 bytes: an IPv4 address in full) */
	for (int b = 0; b < 8; b++)
		out[b] = (uint8_t)(id >> (56 - 8 * b));
	out[8] = (uint8_t)(co->port >> 8);
	out[9] = (uint8_t)co->port;
	if (co->family == INET_V4) {
		out[10] = out[11] = 0;
		memcpy(out + 12, co->ip, 4);
	} else {
		memcpy(out + 10, co->ip + 10, 6);
	}
}
