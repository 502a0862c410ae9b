/*
 * Incremental repair, the participant's side (Cassandra's LocalSessions):
 * each consistent session this node takes part in moves PREPARING ->
 * PREPARED (its unrepaired data in the session's ranges marked pending,
 * through the store's prepare) -> REPAIRING (the first incremental
 * VALIDATE or APPLY) -> FINALIZE_PROMISED (PROPOSE) -> FINALIZED (COMMIT:
 * pending becomes repaired), or FAILED from any state before FINALIZED
 * (FAIL, repair_admin cancel, or the timeout: pending becomes unrepaired).
 * The newest REPAIR_MAX_LOCAL are kept, and persisted through the
 * options' locals_changed (repair_locals_encode / _load), so a restart
 * finishes or fails them, never leaves their data pending for ever.
 */
#define LOG_MODULE "repair"
#include "repair/repair_internal.h"

#include "common/err.h"
#include "common/log.h"

#include <inttypes.h>

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
	int64_t co_gen;  /* the coordinator's incarnation at PREPARE */
	/* COMMIT or FAIL (`verb`) failed on a table: its data still pending,
	 * the work is retried at each check */
	bool unsettled;
	bool exclusive; /* a scheduled segment's (not persisted) */
};

static void changed(struct repair *r)
{
	if (r->o.locals_changed)
		r->o.locals_changed(r->o.locals_arg);
}

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
	/* a table dropped meanwhile holds nothing pending any more */
	if (status && code == ERR_NOT_FOUND && l->verb != REPAIR_VERB_PREPARE)
		status = 0;
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
		/* the session counts as finalized (it promised); a table that
		 * failed stays pending until the next check retries it */
		l->info.state = REPAIR_LOCAL_FINALIZED;
		l->unsettled = l->failed;
		break;
	default:
		l->info.state = REPAIR_LOCAL_FAILED;
		l->unsettled = l->failed;
		break;
	}
	if (l->answer)
		answer(r, &l->info.coordinator, l->verb, l->info.session,
		       !l->failed, l->error, l->count);
	bool again = l->fail_after && l->info.state != REPAIR_LOCAL_FINALIZED;
	l->fail_after = false;
	if (again)
		start_work(l, REPAIR_VERB_FAIL, false);
	else if (!r->deleting)
		changed(r);
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
	changed(l->r); /* a stop now redoes or fails this work (load) */
	work_next(l);
}

static void prepare(struct repair *r, const struct inet_addr *from,
		    const struct repair_msg *q)
{
	if (find(r, from, q->session))
		return; /* a duplicate: the first answers */
	struct repair_local *l = NULL;
	int rc = q->exclusive ? repair_claims_busy(r, from) : 0;
	/* nor while another coordinator's exclusive session runs here
	 * (heard from within a validation's time: not one whose
	 * coordinator vanished) */
	int64_t now = now_ms(r);
	for (size_t i = 0; !rc && q->exclusive && i < r->nlocals; i++) {
		const struct repair_local *o = r->locals[i];
		char a[64];
		if (o->exclusive && o->info.state != REPAIR_LOCAL_FINALIZED &&
		    o->info.state != REPAIR_LOCAL_FAILED &&
		    !inet_addr_eq(&o->info.coordinator, from) &&
		    now - o->info.updated_ms <
			    (int64_t)r->o.validate_timeout_ms)
			rc = err_set(ERR_EXISTS,
				     "replica busy: incremental session %llu "
				     "of %s is %s",
				     (unsigned long long)o->info.session,
				     inet_addr_format(&o->info.coordinator, a,
						      sizeof(a)),
				     repair_local_state_name(o->info.state));
	}
	if (!rc)
		rc = make_room(r);
	if (!rc && (!q->table_ids.len || !q->nranges))
		rc = err_set(ERR_INVALID, "nothing to prepare");
	if (!rc && !(l = calloc(1, sizeof(*l))))
		rc = err_set(ERR_NOMEM, "incremental session");
	if (!rc) {
		l->r = r;
		l->info.session = q->session;
		l->info.coordinator = *from;
		repair_session_uuid(from, q->session, l->info.uuid);
		if (r->o.incarnation && !inet_addr_eq(from, &r->o.self))
			l->co_gen = r->o.incarnation(r->o.alive_arg, from);
		l->info.state = REPAIR_LOCAL_PREPARING;
		l->exclusive = q->exclusive;
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
		changed(r);
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
	bool first = l->info.state != REPAIR_LOCAL_REPAIRING;
	l->info.state = REPAIR_LOCAL_REPAIRING;
	l->info.updated_ms = now_ms(r);
	if (first)
		changed(r);
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

/* ---- timeout ------------------------------------------------------------- */

void repair_locals_sweep(void *arg)
{
	struct repair *r = arg;
	int64_t now = now_ms(r);
	for (size_t i = 0; i < r->nlocals; i++) {
		struct repair_local *l = r->locals[i];
		enum repair_local_state st = l->info.state;
		if (l->busy)
			continue;
		if (st == REPAIR_LOCAL_FINALIZED || st == REPAIR_LOCAL_FAILED) {
			if (l->unsettled) /* retry the tables that failed */
				start_work(l, l->verb, false);
			continue;
		}
		const char *why = NULL;
		int64_t gen = 0;
		if (now - l->info.updated_ms >= (int64_t)r->o.local_timeout_ms)
			why = "no word from its coordinator";
		else if (l->co_gen && r->o.incarnation &&
			 (gen = r->o.incarnation(r->o.alive_arg,
						 &l->info.coordinator)) &&
			 gen != l->co_gen)
			why = "its coordinator restarted";
		if (!why)
			continue;
		char u[40], a[INET_ADDR_STRLEN];
		const uint8_t *x = l->info.uuid;
		snprintf(u, sizeof(u),
			 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
			 "%02x%02x%02x%02x%02x%02x",
			 x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8],
			 x[9], x[10], x[11], x[12], x[13], x[14], x[15]);
		LOG_WARN("incremental session %s of %s failed while %s: %s "
			 "(%" PRId64 " s since its last message); its pending "
			 "data is unrepaired again",
			 u,
			 inet_addr_format(&l->info.coordinator, a, sizeof(a)),
			 repair_local_state_name(st), why,
			 (now - l->info.updated_ms) / 1000);
		start_work(l, REPAIR_VERB_FAIL, false);
	}
	env_timer_arm(r->env, r->sweep_timer, r->o.local_check_ms * 1000);
}

/* ---- persistence --------------------------------------------------------- *
 * Version 1: u8 version, be32 count, then per session: uuid (16), be64
 * session, u8 family, ip (16), be16 port, u8 state, u8 the verb whose
 * store work ran (0: none), be64 started_ms, updated_ms, repaired_at,
 * marked, co_gen, be32 ntables and their ids (16 each), be32 nranges and
 * their (be64 start, be64 end). */

#define LOCALS_VERSION 1

int repair_locals_encode(const struct repair *r, struct buf *out)
{
	int rc = buf_put_u8(out, LOCALS_VERSION) ||
		 buf_put_be32(out, (uint32_t)r->nlocals);
	for (size_t i = 0; !rc && i < r->nlocals; i++) {
		const struct repair_local *l = r->locals[i];
		const struct repair_local_info *f = &l->info;
		rc = buf_append(out, f->uuid, 16) ||
		     buf_put_be64(out, f->session) ||
		     buf_put_u8(out, f->coordinator.family) ||
		     buf_append(out, f->coordinator.ip, 16) ||
		     buf_put_be16(out, f->coordinator.port) ||
		     buf_put_u8(out, (uint8_t)f->state) ||
		     buf_put_u8(out, l->busy || l->unsettled ? (uint8_t)l->verb
							     : 0) ||
		     buf_put_be64(out, (uint64_t)f->started_ms) ||
		     buf_put_be64(out, (uint64_t)f->updated_ms) ||
		     buf_put_be64(out, (uint64_t)f->repaired_at) ||
		     buf_put_be64(out, f->marked) ||
		     buf_put_be64(out, (uint64_t)l->co_gen) ||
		     buf_put_be32(out, (uint32_t)f->ntables) ||
		     buf_append(out, l->table_ids, 16 * f->ntables) ||
		     buf_put_be32(out, (uint32_t)f->nranges);
		for (size_t k = 0; !rc && k < f->nranges; k++)
			rc = buf_put_be64(out, (uint64_t)l->ranges[k].start) ||
			     buf_put_be64(out, (uint64_t)l->ranges[k].end);
	}
	return rc ? err_set(ERR_NOMEM, "repair sessions") : 0;
}

static int decode_one(struct repair *r, struct cursor *c,
		      struct repair_local **out)
{
	struct repair_local *l = calloc(1, sizeof(*l));
	if (!l)
		return err_set(ERR_NOMEM, "repair sessions");
	struct repair_local_info *f = &l->info;
	uint8_t st = 0, verb = 0;
	uint64_t started = 0, updated = 0, ra = 0, gen = 0;
	uint32_t nt = 0, nr = 0;
	int rc = cursor_copy(c, f->uuid, 16) || cursor_be64(c, &f->session) ||
		 cursor_u8(c, &f->coordinator.family) ||
		 cursor_copy(c, f->coordinator.ip, 16) ||
		 cursor_be16(c, &f->coordinator.port) || cursor_u8(c, &st) ||
		 cursor_u8(c, &verb) || cursor_be64(c, &started) ||
		 cursor_be64(c, &updated) || cursor_be64(c, &ra) ||
		 cursor_be64(c, &f->marked) || cursor_be64(c, &gen) ||
		 cursor_be32(c, &nt);
	if (!rc &&
	    (st > REPAIR_LOCAL_FAILED || !nt || nt > cursor_left(c) / 16))
		rc = -1;
	if (!rc) {
		l->table_ids = malloc(16 * (size_t)nt);
		rc = !l->table_ids || cursor_copy(c, l->table_ids, 16 * nt) ||
		     cursor_be32(c, &nr) || !nr || nr > cursor_left(c) / 16;
	}
	if (!rc) {
		l->ranges = calloc(nr, sizeof(*l->ranges));
		rc = !l->ranges;
	}
	for (uint32_t k = 0; !rc && k < nr; k++) {
		uint64_t a = 0, b = 0;
		rc = cursor_be64(c, &a) || cursor_be64(c, &b);
		l->ranges[k] = (struct merkle_range){(int64_t)a, (int64_t)b};
	}
	if (!rc) {
		l->r = r;
		f->state = (enum repair_local_state)st;
		f->started_ms = (int64_t)started;
		f->updated_ms = (int64_t)updated;
		f->repaired_at = (int64_t)ra;
		f->ntables = nt;
		f->nranges = nr;
		f->table_ids = l->table_ids;
		f->ranges = l->ranges;
		l->co_gen = (int64_t)gen;
		l->verb = verb;
		rc = unwrap(l);
	}
	if (rc) {
		local_free(l);
		return err_set(ERR_CORRUPT, "repair sessions: a bad session");
	}
	*out = l;
	return 0;
}

int repair_locals_load(struct repair *r, const uint8_t *p, size_t len)
{
	struct cursor c = cursor_make(p, len);
	uint8_t v = 0;
	uint32_t n = 0;
	if (cursor_u8(&c, &v) || v != LOCALS_VERSION || cursor_be32(&c, &n))
		return err_set(ERR_CORRUPT, "repair sessions: version %u", v);
	struct repair_local *got[REPAIR_MAX_LOCAL];
	size_t ng = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct repair_local *l = NULL;
		if (decode_one(r, &c, &l)) {
			for (size_t k = 0; k < ng; k++)
				local_free(got[k]);
			return -1;
		}
		if (ng == REPAIR_MAX_LOCAL) { /* the oldest goes */
			local_free(got[0]);
			memmove(got, got + 1, (ng - 1) * sizeof(*got));
			ng--;
		}
		got[ng++] = l;
	}
	if (cursor_left(&c)) {
		for (size_t k = 0; k < ng; k++)
			local_free(got[k]);
		return err_set(ERR_CORRUPT, "repair sessions: trailing bytes");
	}
	repair_locals_free(r);
	memcpy(r->locals, got, ng * sizeof(*got));
	r->nlocals = ng;
	/* store work the stop cut short: finish it */
	for (size_t i = 0; i < ng; i++) {
		struct repair_local *l = got[i];
		uint32_t verb = l->verb;
		l->verb = 0;
		if (verb == REPAIR_VERB_COMMIT &&
		    (l->info.state == REPAIR_LOCAL_FINALIZE_PROMISED ||
		     l->info.state == REPAIR_LOCAL_FINALIZED))
			start_work(l, REPAIR_VERB_COMMIT, false);
		else if (verb == REPAIR_VERB_PREPARE ||
			 verb == REPAIR_VERB_FAIL ||
			 l->info.state == REPAIR_LOCAL_PREPARING)
			start_work(l, REPAIR_VERB_FAIL, false);
	}
	return 0;
}
