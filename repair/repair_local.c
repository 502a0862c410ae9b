/*
 * Incremental repair, the participant's side (Cassandra's LocalSessions):
 * each consistent session this node takes part in moves PREPARING ->
 * PREPARED (its unrepaired data in the session's ranges marked pending,
 * through the store's prepare) -> REPAIRING (the first incremental
 * VALIDATE or APPLY) -> FINALIZE_PROMISED (PROPOSE) -> FINALIZED (COMMIT:
 * pending becomes repaired), or FAILED from any state before FINALIZED
 * (FAIL, or repair_admin cancel: pending becomes unrepaired). Kept in
 * memory, the newest REPAIR_MAX_LOCAL; a restart forgets them (the
 * coordinator fails the session when a participant restarts).
 */
#include "repair/repair_internal.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct repair_local {
	struct repair *r;
	struct repair_local_info info;
	uint8_t *table_ids;
	struct merkle_range *ranges;
	struct storage_token_range *tr; /* the ranges, unwrapped, merged */
	size_t ntr;
	/* the store work running (PREPARE, COMMIT, FAIL): table `next` */
	bool busy;
	uint32_t verb;
	size_t next;
	bool answer; /* answer `verb` when done (not for FAIL, cancel) */
	bool failed;
	char error[256];
	uint64_t count, one;
	bool fail_after; /* a FAIL came while busy */
};

const char *repair_local_state_name(enum repair_local_state s)
{
	static const char *const names[] = {"PREPARING", "PREPARED",
					    "REPAIRING", "FINALIZE_PROMISED",
					    "FINALIZED", "FAILED"};
	return (unsigned)s < 6 ? names[s] : "UNKNOWN";
}

const uint8_t *repair_local_uuid(const struct repair_local *l)
{
	return l->info.uuid;
}

static void local_free(struct repair_local *l)
{
	free(l->table_ids);
	free(l->ranges);
	free(l->tr);
	free(l);
}

void repair_locals_free(struct repair *r)
{
	for (size_t i = 0; i < r->nlocals; i++)
		local_free(r->locals[i]);
	r->nlocals = 0;
}

static int64_t now_ms(struct repair *r)
{
	return env_wall_us(r->env) / 1000;
}

static struct repair_local *find(struct repair *r, const struct inet_addr *co,
				 uint64_t id)
{
	for (size_t i = 0; i < r->nlocals; i++) {
		struct repair_local *l = r->locals[i];
		if (l->info.session == id &&
		    inet_addr_eq(&l->info.coordinator, co))
			return l;
	}
	return NULL;
}

static int tr_cmp(const void *a, const void *b)
{
	const struct storage_token_range *x = a, *y = b;
	return x->left < y->left ? -1 : x->left > y->left;
}

/* The ranges as storage wants them: non-wrapping, sorted, merged. */
static int unwrap(struct repair_local *l)
{
	l->tr = calloc(2 * l->info.nranges + 1, sizeof(*l->tr));
	if (!l->tr)
		return err_set(ERR_NOMEM, "ranges");
	size_t n = 0;
	for (size_t i = 0; i < l->info.nranges; i++) {
		struct merkle_range p[2];
		size_t np = repair_pieces(l->ranges[i], p);
		for (size_t k = 0; k < np; k++)
			l->tr[n++] = (struct storage_token_range){p[k].start,
								  p[k].end};
	}
	qsort(l->tr, n, sizeof(*l->tr), tr_cmp);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m && l->tr[i].left <= l->tr[m - 1].right) {
			if (l->tr[i].right > l->tr[m - 1].right)
				l->tr[m - 1].right = l->tr[i].right;
		} else {
			l->tr[m++] = l->tr[i];
		}
	}
	l->ntr = m;
	return 0;
}

/* Room for one more: the oldest session not running store work goes. */
static int make_room(struct repair *r)
{
	if (r->nlocals < REPAIR_MAX_LOCAL)
		return 0;
	for (size_t i = 0; i < r->nlocals; i++) {
		struct repair_local *l = r->locals[i];
		if (l->busy)
			continue;
		/* an unfinished one's pending data stays pending until the
		 * node restarts: keep those while there are others */
		if (l->info.state != REPAIR_LOCAL_FINALIZED &&
		    l->info.state != REPAIR_LOCAL_FAILED && i + 1 < r->nlocals)
			continue;
		local_free(l);
		memmove(r->locals + i, r->locals + i + 1,
			(r->nlocals - i - 1) * sizeof(*r->locals));
		r->nlocals--;
		return 0;
	}
	return err_set(ERR_OVERLOADED, "too many incremental sessions");
}

static void answer(struct repair *r, const struct inet_addr *to, uint32_t verb,
		   uint64_t session, bool ok, const char *error, uint64_t count)
{
	struct repair_msg m = {0};
	m.session = session;
	m.ok = ok;
	m.sstables = count;
	if (!ok)
		snprintf(m.error, sizeof(m.error), "%s", error);
	struct buf b;
	buf_init(&b);
	if (repair_msg_pack_response(&m, &b) == 0)
		repair_send(r, to, verb + 1, &b);
	buf_free(&b);
}

static void work_next(struct repair_local *l);

static void work_done(void *arg, int status, enum err_code code)
{
	struct repair_local *l = arg;
	if (status && !l->failed) {
		err_set(code, "%s", "storage");
		l->failed = true;
		snprintf(l->error, sizeof(l->error), "%s of table %zu: %s",
			 l->verb == REPAIR_VERB_PREPARE ? "anticompaction"
							: "repair state",
			 l->next, err_msg());
	}
	l->count += l->one;
	l->next++;
	work_next(l);
}

static void start_work(struct repair_local *l, uint32_t verb, bool ans);

/* The next table of the running store work, or its end. */
static void work_next(struct repair_local *l)
{
	struct repair *r = l->r;
	if (l->next < l->info.ntables &&
	    !(l->failed && l->verb == REPAIR_VERB_PREPARE)) {
		const uint8_t *id = l->table_ids + 16 * l->next;
		l->one = 0;
		if (l->verb == REPAIR_VERB_PREPARE)
			r->store->prepare(r->store_arg, id, l->tr, l->ntr,
					  l->info.uuid, &l->one, work_done, l);
		else
			r->store->finish(r->store_arg, id, l->info.uuid,
					 l->verb == REPAIR_VERB_COMMIT
						 ? l->info.repaired_at
						 : 0,
					 &l->one, work_done, l);
		return;
	}
	l->busy = false;
	l->info.updated_ms = now_ms(r);
	switch (l->verb) {
	case REPAIR_VERB_PREPARE:
		l->info.marked = l->count;
		l->info.state =
			l->failed ? REPAIR_LOCAL_FAILED : REPAIR_LOCAL_PREPARED;
		break;
	case REPAIR_VERB_COMMIT:
		/* a table that failed stays pending until a restart or
		 * cancel; the session counts as finalized (it promised) */
		l->info.state = REPAIR_LOCAL_FINALIZED;
		break;
	default:
		l->info.state = REPAIR_LOCAL_FAILED;
		break;
	}
	if (l->answer)
		answer(r, &l->info.coordinator, l->verb, l->info.session,
		       !l->failed, l->error, l->count);
	bool again = l->fail_after && l->info.state != REPAIR_LOCAL_FINALIZED;
	l->fail_after = false;
	if (again)
		start_work(l, REPAIR_VERB_FAIL, false);
	repair_job_release(r); /* may free r (deleted meanwhile) */
}

/* Runs the store side of `verb` over every table (the job count held
 * while it runs). */
static void start_work(struct repair_local *l, uint32_t verb, bool ans)
{
	if (!l->busy) {
		l->busy = true;
		l->r->jobs++;
	}
	l->verb = verb;
	l->answer = ans;
	l->next = 0;
	l->failed = false;
	l->error[0] = 0;
	l->count = 0;
	work_next(l);
}

static void prepare(struct repair *r, const struct inet_addr *from,
		    const struct repair_msg *q)
{
	if (find(r, from, q->session))
		return; /* a duplicate: the first answers */
	struct repair_local *l = NULL;
	int rc = make_room(r);
	if (!rc && (!q->table_ids.len || !q->nranges))
		rc = err_set(ERR_INVALID, "nothing to prepare");
	if (!rc && !(l = calloc(1, sizeof(*l))))
		rc = err_set(ERR_NOMEM, "incremental session");
	if (!rc) {
		l->r = r;
		l->info.session = q->session;
		l->info.coordinator = *from;
		repair_session_uuid(from, q->session, l->info.uuid);
		l->info.state = REPAIR_LOCAL_PREPARING;
		l->info.started_ms = l->info.updated_ms = now_ms(r);
		l->info.ntables = q->table_ids.len / 16;
		l->info.nranges = q->nranges;
		l->table_ids = malloc(q->table_ids.len);
		l->ranges = calloc(q->nranges, sizeof(*l->ranges));
		rc = l->table_ids && l->ranges
			     ? 0
			     : err_set(ERR_NOMEM, "incremental session");
	}
	if (!rc) {
		memcpy(l->table_ids, q->table_ids.ptr, q->table_ids.len);
		memcpy(l->ranges, q->ranges, q->nranges * sizeof(*l->ranges));
		l->info.table_ids = l->table_ids;
		l->info.ranges = l->ranges;
		rc = unwrap(l);
	}
	if (rc) {
		if (l)
			local_free(l);
		answer(r, from, REPAIR_VERB_PREPARE, q->session, false,
		       err_msg(), 0);
		return;
	}
	r->locals[r->nlocals++] = l;
	start_work(l, REPAIR_VERB_PREPARE, true);
}

void repair_local_receive(struct repair *r, const struct inet_addr *from,
			  uint32_t verb, const struct repair_msg *q)
{
	if (!r->store->prepare || !r->store->finish ||
	    !r->store->scan_pending || !r->store->apply_pending) {
		if (verb != REPAIR_VERB_FAIL)
			answer(r, from, verb, q->session, false,
			       "incremental repair is not supported here", 0);
		return;
	}
	if (verb == REPAIR_VERB_PREPARE) {
		prepare(r, from, q);
		return;
	}
	struct repair_local *l = find(r, from, q->session);
	char why[128];
	if (!l) {
		if (verb != REPAIR_VERB_FAIL)
			answer(r, from, verb, q->session, false,
			       "unknown incremental session", 0);
		return;
	}
	l->info.updated_ms = now_ms(r);
	enum repair_local_state st = l->info.state;
	switch (verb) {
	case REPAIR_VERB_PROPOSE:
		if (l->busy || (st != REPAIR_LOCAL_PREPARED &&
				st != REPAIR_LOCAL_REPAIRING)) {
			snprintf(why, sizeof(why), "incremental session is %s",
				 repair_local_state_name(st));
			answer(r, from, verb, q->session, false, why, 0);
			return;
		}
		l->info.state = REPAIR_LOCAL_FINALIZE_PROMISED;
		answer(r, from, verb, q->session, true, "", 0);
		return;
	case REPAIR_VERB_COMMIT:
		if (l->busy || st != REPAIR_LOCAL_FINALIZE_PROMISED) {
			snprintf(why, sizeof(why), "incremental session is %s",
				 repair_local_state_name(st));
			answer(r, from, verb, q->session, false, why, 0);
			return;
		}
		l->info.repaired_at = q->repaired_at;
		start_work(l, REPAIR_VERB_COMMIT, true);
		return;
	default: /* FAIL */
		if (st == REPAIR_LOCAL_FINALIZED)
			return;
		if (l->busy) {
			l->fail_after = true;
			return;
		}
		if (st == REPAIR_LOCAL_FAILED && !l->info.marked)
			return;
		start_work(l, REPAIR_VERB_FAIL, false);
		return;
	}
}

struct repair_local *repair_local_repairing(struct repair *r,
					    const struct inet_addr *from,
					    uint64_t id)
{
	struct repair_local *l = find(r, from, id);
	if (!l || l->busy ||
	    (l->info.state != REPAIR_LOCAL_PREPARED &&
	     l->info.state != REPAIR_LOCAL_REPAIRING)) {
		err_set(ERR_INVALID,
			"no prepared incremental session %llu here (%s)",
			(unsigned long long)id,
			l ? repair_local_state_name(l->info.state) : "unknown");
		return NULL;
	}
	l->info.state = REPAIR_LOCAL_REPAIRING;
	l->info.updated_ms = now_ms(r);
	return l;
}

void repair_local_list(const struct repair *r, repair_local_fn each, void *arg)
{
	for (size_t i = 0; i < r->nlocals; i++)
		each(arg, &r->locals[i]->info);
}

int repair_local_fail(struct repair *r, const uint8_t uuid[16])
{
	for (size_t i = 0; i < r->nlocals; i++) {
		struct repair_local *l = r->locals[i];
		if (memcmp(l->info.uuid, uuid, 16))
			continue;
		if (l->info.state == REPAIR_LOCAL_FINALIZED ||
		    (l->info.state == REPAIR_LOCAL_FAILED && !l->busy))
			return err_set(ERR_INVALID, "session is %s",
				       repair_local_state_name(l->info.state));
		if (l->busy)
			l->fail_after = true;
		else
			start_work(l, REPAIR_VERB_FAIL, false);
		return 0;
	}
	return err_set(ERR_NOT_FOUND, "no such incremental session");
}
