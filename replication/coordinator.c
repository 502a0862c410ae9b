/*
 * The coordinator's core (replication.h): operations and their request ids,
 * the latency histogram, sending, answer dispatch (repl_on_answer), timeouts,
 * hint delivery (repl_deliver), life cycle and stats. The write path is in
 * coord_write.c, reads in coord_read.c, truncates in coord_truncate.c, the
 * replica side in replica.c;
 * what they share is in coord_internal.h.
 *
 * Every message this node sends for an operation gets a request id that
 * maps (one hash table) to the operation and the replica it went to; the
 * local replica is reached through the store with the same id, so local
 * and remote answers take one path. An operation that ends (answered,
 * timed out) unregisters its ids, and an answer whose id is unknown is
 * simply late and ignored.
 */
#define LOG_MODULE "replication"
#include "replication/replication.h"

#include "common/arena.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/loghist.h"
#include "common/zalloc.h"
#include "replication/coord_internal.h"
#include "replication/replication.pb-c.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- latency histogram --------------------------------------------------- */

_Static_assert(REPL_LAT_BUCKETS == LOGHIST_BUCKETS,
	       "the coordinator's histograms use common/loghist.h's layout");

uint64_t repl_latency_bucket_upper(unsigned b)
{
	return loghist_upper(b);
}

void repl_lat_add(struct repl_latency *l, uint64_t us)
{
	l->count++;
	l->sum_us += us;
	l->buckets[loghist_bucket(us)]++;
}

struct repl_table_lat {
	bool used;
	uint8_t id[16];
	struct repl_table_latency lat;
};

static size_t tlat_home(const uint8_t id[16], size_t cap)
{
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < 16; i++)
		h = (h ^ id[i]) * 1099511628211ull;
	return (size_t)h & (cap - 1);
}

static struct repl_table_lat *tlat_find(const struct repl *r,
					const uint8_t id[16])
{
	if (!r->tlat_cap)
		return NULL;
	for (size_t i = tlat_home(id, r->tlat_cap);;
	     i = (i + 1) & (r->tlat_cap - 1)) {
		struct repl_table_lat *e = &r->tlat[i];
		if (!e->used || !memcmp(e->id, id, 16))
			return e;
	}
}

void repl_table_lat_add(struct repl *r, const uint8_t table_id[16],
			enum repl_req_kind kind, uint64_t us)
{
	if (2 * (r->ntlat + 1) > r->tlat_cap) {
		size_t cap = r->tlat_cap ? 2 * r->tlat_cap : 16;
		struct repl_table_lat *old = r->tlat,
				      *nt = calloc(cap, sizeof(*nt));
		if (!nt)
			return; /* a latency lost, never the request */
		size_t oldcap = r->tlat_cap;
		r->tlat = nt;
		r->tlat_cap = cap;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i].used)
				*tlat_find(r, old[i].id) = old[i];
		free(old);
	}
	struct repl_table_lat *e = tlat_find(r, table_id);
	if (!e->used) {
		e->used = true;
		memcpy(e->id, table_id, 16);
		r->ntlat++;
	}
	repl_lat_add(kind == REPL_REQ_READ    ? &e->lat.read
		     : kind == REPL_REQ_WRITE ? &e->lat.write
					      : &e->lat.range,
		     us);
}

bool repl_get_table_latency(const struct repl *r, const uint8_t table_id[16],
			    struct repl_table_latency *out)
{
	const struct repl_table_lat *e = tlat_find(r, table_id);
	if (!e || !e->used) {
		memset(out, 0, sizeof(*out));
		return false;
	}
	*out = e->lat;
	return true;
}

void repl_forget_table(struct repl *r, const uint8_t table_id[16])
{
	struct repl_table_lat *e = tlat_find(r, table_id);
	if (!e || !e->used)
		return;
	/* backward-shift deletion: each entry after the hole that its home
	 * slot lets move fills it, so every probe chain stays unbroken */
	size_t mask = r->tlat_cap - 1, hole = (size_t)(e - r->tlat);
	for (size_t i = (hole + 1) & mask; r->tlat[i].used;
	     i = (i + 1) & mask) {
		size_t home = tlat_home(r->tlat[i].id, r->tlat_cap);
		if (((i - home) & mask) >= ((i - hole) & mask)) {
			r->tlat[hole] = r->tlat[i];
			hole = i;
		}
	}
	memset(&r->tlat[hole], 0, sizeof(r->tlat[hole]));
	r->ntlat--;
}

void repl_count_request(struct repl *r, enum repl_req_kind kind, int cl,
			const struct repl_result *res, uint64_t start_us)
{
	if (cl < 0 || cl >= REPL_CL_COUNT)
		return;
	struct repl_req_stats *s = &r->st.by_cl[kind][cl];
	switch (res->outcome) {
	case REPL_OK:
		repl_lat_add(&s->lat, repl_now_us(r) - start_us);
		break;
	case REPL_UNAVAILABLE:
		s->unavailables++;
		break;
	case REPL_WRITE_TIMEOUT:
	case REPL_READ_TIMEOUT:
		s->timeouts++;
		break;
	case REPL_WRITE_FAILURE:
	case REPL_READ_FAILURE:
	case REPL_OVERLOADED:
		s->failures++;
		break;
	default: /* invalid requests are the client's, not the cluster's */
		break;
	}
}

uint64_t repl_latency_percentile(const struct repl_latency *l, double p)
{
	if (l->count == 0)
		return 0;
	uint64_t want = (uint64_t)((double)l->count * p / 100.0 + 0.5);
	if (want == 0)
		want = 1;
	uint64_t seen = 0;
	for (unsigned b = 0; b < REPL_LAT_BUCKETS; b++) {
		seen += l->buckets[b];
		if (seen >= want)
			return loghist_upper(b);
	}
	return loghist_upper(REPL_LAT_BUCKETS - 1);
}

/* ---- operations ---------------------------------------------------------- */

uint64_t repl_now_us(struct repl *r)
{
	return env_mono_us(r->env);
}

void repl_trace(struct repl *r, const uint8_t *session, const char *thread,
		uint64_t start_us, const char *fmt, ...)
{
	if (!session || !r->hooks.trace)
		return;
	char activity[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(activity, sizeof(activity), fmt, ap);
	va_end(ap);
	r->hooks.trace(r->hooks.arg, session, thread,
		       (int64_t)(repl_now_us(r) - start_us), activity);
}

void repl_trace_peer(const struct inet_addr *a, char out[REPL_TRACE_PEER_LEN])
{
	out[0] = '/';
	inet_addr_format(a, out + 1, REPL_TRACE_PEER_LEN - 1);
}

void repl_trace_send(struct op *op, const char *verb, uint32_t ep,
		     const ProtobufCMessage *msg)
{
	if (!op->traced)
		return;
	char peer[REPL_TRACE_PEER_LEN];
	repl_trace_peer(repl_ep_addr(op, ep), peer);
	repl_trace(op->r, op->trace, "Native-Transport-Requests-1",
		   op->start_us,
		   "Sending %s message to %s message size %zu bytes", verb,
		   peer, protobuf_c_message_get_packed_size(msg));
}

void repl_trace_replica(const struct op *op, uint32_t ep, int64_t token,
			char *out, size_t cap)
{
	char peer[REPL_TRACE_PEER_LEN];
	repl_trace_peer(repl_ep_addr(op, ep), peer);
	struct token_range vr = {0};
	if (ring_token_count(op->ring) > 0)
		vr = ring_range_at(op->ring, ring_token_index(op->ring, token));
	snprintf(out, cap, "Full(%s,(%lld,%lld])", peer, (long long)vr.left,
		 (long long)vr.right);
}

/* What a traced op's answer from a peer was, by Cassandra 4's verbs. */
static const char *answer_verb(const struct op *op, const struct target *t)
{
	switch (op->kind) {
	case OP_WRITE:
		return "MUTATION_RSP";
	case OP_READ:
		return t->round == 3 ? "READ_REPAIR_RSP" : "READ_RSP";
	case OP_RANGE:
		/* round 2: replica filtering protection's single-partition
		 * reads (READ_REQ) */
		return t->round == 3   ? "READ_REPAIR_RSP"
		       : t->round == 2 ? "READ_RSP"
				       : "RANGE_RSP";
	default:
		return NULL;
	}
}

/* A traced op's answer from a peer: "<verb> message received from
 * /<peer>", then "Processing response from /<peer>" (or "Processing
 * failure response"), as Cassandra's messaging and callback stages. */
static void trace_answer(struct op *op, const struct target *t, bool ok)
{
	const char *verb = answer_verb(op, t);
	if (!op->traced || !verb || repl_is_self(op, t->ep))
		return;
	char peer[REPL_TRACE_PEER_LEN];
	repl_trace_peer(repl_ep_addr(op, t->ep), peer);
	repl_trace(op->r, op->trace, "Messaging-EventLoop-1", op->start_us,
		   "%s message received from %s", verb, peer);
	repl_trace(op->r, op->trace, "RequestResponseStage-1", op->start_us,
		   "Processing %sresponse from %s", ok ? "" : "failure ", peer);
}

void repl_trace_read_stats(struct repl *r, const uint8_t *session,
			   const char *thread, uint64_t start_us,
			   const struct storage_read_stats *st, bool point)
{
	if (point)
		repl_trace(r, session, thread, start_us,
			   "Merged data from memtables and %u sstables",
			   st->sstables);
	repl_trace(r, session, thread, start_us,
		   "Read %llu live rows and %llu tombstone cells",
		   (unsigned long long)st->live_rows,
		   (unsigned long long)st->tombstones);
}

/* Cassandra's key bound of a token: the ring's minimum is min(), any
 * other a range ends on is max() (Token.maxKeyBound). */
static void key_bound(int64_t token, char *out, size_t cap)
{
	snprintf(out, cap, "%s(%lld)", token == INT64_MIN ? "min" : "max",
		 (long long)token);
}

void repl_trace_scan_stats(struct repl *r, const uint8_t *session,
			   uint64_t start_us, int64_t start, int64_t end,
			   const struct storage_read_stats *st)
{
	char a[32], b[32];
	key_bound(start, a, sizeof(a));
	key_bound(end, b, sizeof(b));
	repl_trace(r, session, "ReadStage-1", start_us,
		   "Executing seq scan across %u sstables for (%s, %s]",
		   st->sstables, a, b);
	repl_trace_read_stats(r, session, "ReadStage-1", start_us, st, false);
}

struct slot **repl_bucket_of(struct repl *r, uint64_t id)
{
	return &r->ids[(id * 0x9E3779B97F4A7C15ull) >> 52 & (ID_BUCKETS - 1)];
}

int repl_slot_add(struct repl *r, struct op *op, uint32_t target)
{
	struct slot *s = malloc(sizeof(*s));
	if (!s)
		return err_set(ERR_NOMEM, "out of memory");
	s->id = ++r->next_id;
	s->op = op;
	s->target = target;
	struct slot **b = repl_bucket_of(r, s->id);
	s->next = *b;
	*b = s;
	op->t[target].id = s->id;
	return 0;
}

/* Removes the slot of `id` and returns it (the caller frees), or NULL. */
int repl_target_begin(struct op *op, size_t i)
{
	if (repl_slot_add(op->r, op, (uint32_t)i) != 0)
		return -1;
	op->t[i].sent = true;
	op->outstanding++;
	return 0;
}

void repl_target_unsent(struct op *op, size_t i)
{
	free(repl_slot_take(op->r, op->t[i].id));
	op->t[i].sent = false;
	op->outstanding--;
}

struct slot *repl_slot_take(struct repl *r, uint64_t id)
{
	for (struct slot **p = repl_bucket_of(r, id); *p; p = &(*p)->next)
		if ((*p)->id == id) {
			struct slot *s = *p;
			*p = s->next;
			return s;
		}
	return NULL;
}

static void op_link(struct repl *r, struct op *op)
{
	op->next = r->ops;
	if (r->ops)
		r->ops->prev = op;
	r->ops = op;
	r->st.inflight++;
}

static void dl_unlink(struct repl *r, struct op *op)
{
	if (!op->dl_prev && r->dl_head != op)
		return; /* not on the list */
	if (op->dl_prev)
		op->dl_prev->dl_next = op->dl_next;
	else
		r->dl_head = op->dl_next;
	if (op->dl_next)
		op->dl_next->dl_prev = op->dl_prev;
	else
		r->dl_tail = op->dl_prev;
	op->dl_prev = op->dl_next = NULL;
}

static void target_free(struct target *t)
{
	storage_mutation_delete(t->frag);
	t->frag = NULL;
	for (size_t i = 0; i < t->nfrags; i++)
		storage_mutation_delete(t->frags[i]);
	free(t->frags);
	t->frags = NULL;
	t->nfrags = 0;
}

/* Unregisters every id of the operation and frees it (once nobody holds
 * it). */
void repl_op_free(struct op *op)
{
	if (op->hold > 0) {
		op->free_pending = true;
		return;
	}
	struct repl *r = op->r;
	for (size_t i = 0; i < op->nt; i++) {
		if (op->t[i].sent && !op->t[i].answered)
			free(repl_slot_take(r, op->t[i].id));
		target_free(&op->t[i]);
	}
	for (size_t k = 0; k < op->nbl; k++)
		if (op->bl_sent[k] && !op->bl_answered[k])
			free(repl_slot_take(r, op->bl_id[k]));
	if (op->prev)
		op->prev->next = op->next;
	else
		r->ops = op->next;
	if (op->next)
		op->next->prev = op->prev;
	if (op->background)
		r->background--;
	else
		r->st.inflight--;
	dl_unlink(r, op);
	env_timer_free(r->env, op->spec_timer);
	for (size_t i = 0; i < op->nmut; i++) {
		buf_free(&op->muts[i].enc);
		free(op->muts[i].dc_need);
		free(op->muts[i].dc_acks);
	}
	free(op->muts);
	free(op->t);
	buf_free(&op->cmd_enc);
	arena_destroy(&op->a);
	storage_mutation_delete(op->merged);
	storage_table_meta_unref(op->meta);
	for (size_t i = 0; op->rr_out && i < op->rr_n; i++)
		storage_mutation_delete(op->rr_out[i]);
	free(op->rr_out);
	free(op->pk);
	if (op->ring)
		ring_unref(op->ring);
	free(op);
}

static void op_timeout(void *arg);

/* Arms the timer for the soonest deadline unless it fires by then. */
static void dl_arm(struct repl *r, uint64_t now)
{
	if (!r->dl_head ||
	    (r->dl_armed_us && r->dl_armed_us <= r->dl_head->deadline_us))
		return;
	uint64_t at = r->dl_head->deadline_us;
	r->dl_armed_us = at;
	env_timer_arm(r->env, r->dl_timer, at > now ? at - now : 1);
}

static void dl_insert(struct repl *r, struct op *op, uint64_t now,
		      uint64_t timeout_ms)
{
	dl_unlink(r, op);
	op->deadline_us = now + timeout_ms * 1000;
	/* Deadlines mostly arrive in order: insert from the tail. */
	struct op *after = r->dl_tail;
	while (after && after->deadline_us > op->deadline_us)
		after = after->dl_prev;
	op->dl_prev = after;
	op->dl_next = after ? after->dl_next : r->dl_head;
	if (op->dl_next)
		op->dl_next->dl_prev = op;
	else
		r->dl_tail = op;
	if (after)
		after->dl_next = op;
	else
		r->dl_head = op;
	dl_arm(r, now);
}

void repl_op_set_deadline(struct op *op, uint64_t timeout_ms)
{
	dl_insert(op->r, op, repl_now_us(op->r), timeout_ms);
}

/* The deadline timer: times out every operation whose deadline passed. */
static void dl_fire(void *arg)
{
	struct repl *r = arg;
	uint64_t now = repl_now_us(r);
	r->dl_armed_us = 0;
	/* A handler may finish or re-arm any operation: take the head
	 * afresh each time. */
	while (r->dl_head && r->dl_head->deadline_us <= now) {
		struct op *op = r->dl_head;
		dl_unlink(r, op);
		op_timeout(op);
	}
	dl_arm(r, now);
}

void repl_op_unhold(struct op *op)
{
	if (--op->hold == 0 && op->free_pending)
		repl_op_free(op);
}

struct op *repl_op_new(struct repl *r, enum op_kind kind, int cl,
		       uint64_t timeout_ms, void *arg)
{
	struct op *op = zcalloc(1, sizeof(*op));
	if (!op) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	op->kind = kind;
	op->r = r;
	op->cl = cl;
	op->arg = arg;
	op->start_us = repl_now_us(r);
	buf_init(&op->cmd_enc);
	arena_create(&op->a, 4096); /* most operations need less */
	op_link(r, op);
	dl_insert(r, op, op->start_us, timeout_ms);
	return op;
}

void repl_result_init(struct repl_result *res, enum repl_outcome o, int cl)
{
	memset(res, 0, sizeof(*res));
	res->outcome = o;
	res->cl = cl;
}

void repl_result_add_failure(struct repl_result *res,
			     const struct inet_addr *endpoint,
			     enum repl_failure_code code)
{
	if (res->n_failed_listed < REPL_RESULT_FAILURES_MAX) {
		struct repl_failure *f = &res->failed[res->n_failed_listed++];
		f->endpoint = *endpoint;
		f->code = (uint16_t)code;
	}
	res->n_failed++;
}

enum repl_failure_code repl_failure_code_of(const char *error)
{
	if (!error)
		return REPL_FAILURE_UNKNOWN;
	if (strcmp(error, err_code_name(ERR_TOMBSTONES)) == 0)
		return REPL_FAILURE_READ_TOO_MANY_TOMBSTONES;
	if (strcmp(error, err_code_name(ERR_INDEX_NOT_AVAILABLE)) == 0)
		return REPL_FAILURE_INDEX_NOT_AVAILABLE;
	return REPL_FAILURE_UNKNOWN;
}

void repl_op_answered(struct op *op)
{
	op->replied = true;
	if (op->background)
		return;
	op->background = true;
	op->r->st.inflight--;
	op->r->background++;
}

bool repl_overloaded(struct repl *r, struct repl_result *res, int cl)
{
	if (r->st.inflight < r->o.max_inflight &&
	    r->background < BACKGROUND_FACTOR * r->o.max_inflight)
		return false;
	r->st.overloaded++;
	repl_result_init(res, REPL_OVERLOADED, cl);
	snprintf(res->msg, sizeof(res->msg),
		 "coordinator overloaded: %zu requests in flight",
		 r->o.max_inflight);
	return true;
}

/* ---- sending ------------------------------------------------------------- */

int64_t repl_deadline_us(struct repl *r, uint64_t timeout_ms)
{
	return env_wall_us(r->env) + (int64_t)timeout_ms * 1000;
}

int repl_send_packed(struct repl *r, const struct inet_addr *to, uint32_t verb,
		     const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t stack[512];
	uint8_t *p = n <= sizeof(stack) ? stack : malloc(n);
	if (!p)
		return err_set(ERR_NOMEM, "out of memory");
	protobuf_c_message_pack(msg, p);
	int rc = env_send(r->env, to, verb, p, n);
	if (p != stack)
		free(p);
	return rc;
}

const struct inet_addr *repl_ep_addr(const struct op *op, uint32_t ep)
{
	if (op->kind == OP_DELIVER)
		return &op->to;
	return &ring_endpoint_get(op->ring, ep)->addr;
}

bool repl_is_self(const struct op *op, uint32_t ep)
{
	return op->ring && ring_local_endpoint(op->ring) == (int)ep;
}

/* ---- ring helpers -------------------------------------------------------- */

int repl_strategy_dc_index(const struct ring_strategy *s, const char *dc)
{
	for (size_t i = 0; i < ring_strategy_dc_count(s); i++) {
		int rf;
		if (strcmp(ring_strategy_dc_at(s, i, &rf), dc) == 0)
			return (int)i;
	}
	return -1;
}

const char *repl_local_dc(const struct ring *ring)
{
	int self = ring_local_endpoint(ring);
	return self >= 0 ? ring_endpoint_get(ring, (size_t)self)->dc : NULL;
}

/* ---- the local replica --------------------------------------------------- */

/* The local replica is reached through the store; its completions carry the
 * request id in a struct local_ctx and take the path of remote answers. */

void repl_local_apply_done(void *arg, int status, enum err_code code)
{
	struct local_ctx *c = arg;
	repl_on_answer(c->r, c->id, status == 0,
		       status == 0 ? NULL : err_code_name(code), NULL, NULL, 0,
		       false);
	free(c);
}

struct local_ctx *repl_local_ctx_new(struct repl *r, uint64_t id)
{
	struct local_ctx *c = malloc(sizeof(*c));
	if (c)
		*c = (struct local_ctx){.r = r, .id = id};
	return c;
}

/* ---- hint delivery ------------------------------------------------------- */

/* One mutation to `to` under write_request_timeout: a hint delivered to
 * its target (hint_for NULL), or handed over to keep for hint_for. */
static int deliver(struct repl *r, const struct inet_addr *to,
		   const uint8_t *hint_for, const uint8_t *mutation, size_t len,
		   int64_t created_us, repl_deliver_fn done, void *arg)
{
	struct op *op = repl_op_new(r, OP_DELIVER, REPL_CL_ONE,
				    r->o.write_timeout_ms, arg);
	if (!op || !(op->t = zcalloc(1, sizeof(*op->t)))) {
		if (op) {
			op->replied = true;
			repl_op_free(op);
		}
		return err_set(ERR_NOMEM, "out of memory");
	}
	op->nt = 1;
	op->to = *to;
	op->ddone = done;
	if (repl_slot_add(r, op, 0) != 0) {
		op->replied = true;
		repl_op_free(op);
		return -1;
	}
	Cassini__Replication__MutationReq msg =
		CASSINI__REPLICATION__MUTATION_REQ__INIT;
	msg.id = op->t[0].id;
	msg.deadline_us = repl_deadline_us(r, r->o.write_timeout_ms);
	msg.mutation.data = (uint8_t *)mutation;
	msg.mutation.len = len;
	if (hint_for) {
		msg.hint_for.data = (uint8_t *)hint_for;
		msg.hint_for.len = 16;
		msg.hint_created_us = created_us;
	}
	if (repl_send_packed(r, to, REPL_VERB_MUTATION, &msg.base) != 0) {
		free(repl_slot_take(r, op->t[0].id));
		op->replied = true;
		repl_op_free(op);
		return -1;
	}
	op->t[0].sent = true;
	op->outstanding = 1;
	return 0;
}

int repl_deliver(struct repl *r, const struct inet_addr *to,
		 const uint8_t *mutation, size_t len, repl_deliver_fn done,
		 void *arg)
{
	return deliver(r, to, NULL, mutation, len, 0, done, arg);
}

int repl_hand_over(struct repl *r, const struct inet_addr *to,
		   const uint8_t host_id[16], const uint8_t *mutation,
		   size_t len, int64_t created_us, repl_deliver_fn done,
		   void *arg)
{
	return deliver(r, to, host_id, mutation, len, created_us, done, arg);
}

static void deliver_end(struct op *op, int status)
{
	if (!op->replied) {
		repl_op_answered(op);
		op->ddone(op->arg, status);
	}
	repl_op_free(op);
}

/* ---- answers and timeouts ------------------------------------------------ */

static void op_timeout(void *arg)
{
	struct op *op = arg;
	switch (op->kind) {
	case OP_WRITE:
		repl_write_timeout(op);
		return;
	case OP_READ:
		repl_read_timeout(op);
		return;
	case OP_DELIVER:
		deliver_end(op, -1);
		return;
	case OP_RANGE:
		repl_range_timeout(op);
		return;
	case OP_TRUNCATE:
		repl_truncate_timeout(op);
		return;
	}
}

/* An answer for request `id` (remote or local). Takes ownership of
 * `frags`. */
void repl_on_answer(struct repl *r, uint64_t id, bool ok, const char *error,
		    const uint8_t *digest, struct storage_mutation **frags,
		    size_t n, bool cut)
{
	struct slot *s = repl_slot_take(r, id);
	if (!s) {
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		return;
	}
	struct op *op = s->op;
	if (s->target >= BL_TARGET) {
		size_t k = s->target - BL_TARGET;
		free(s);
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		op->hold++;
		batchlog_answer(op, k, ok, error);
		repl_op_unhold(op);
		return;
	}
	struct target *t = &op->t[s->target];
	free(s);
	trace_answer(op, t, ok);
	t->answered = true;
	op->outstanding--;
	op->hold++;
	switch (op->kind) {
	case OP_WRITE:
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		repl_write_answer(op, t, ok, error);
		break;
	case OP_READ:
		if (op->phase == 3) {
			for (size_t i = 0; i < n; i++)
				storage_mutation_delete(frags[i]);
			free(frags);
			frags = NULL;
			n = 0;
			digest = NULL;
		}
		repl_read_answer(op, t, ok, error, digest, frags, n);
		break;
	case OP_RANGE:
		repl_range_answer(op, t, ok, error, frags, n, cut);
		break;
	case OP_DELIVER:
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		deliver_end(op, ok ? 0 : -1);
		break;
	case OP_TRUNCATE:
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		repl_truncate_answer(op, t, ok, error);
		break;
	}
	repl_op_unhold(op);
}

/* Decodes the fragments of an answer, `head` (when not NULL) then
 * bins[0..n); NULL (and *ok false) on garbage. */
static struct storage_mutation **decode_frags(const ProtobufCBinaryData *head,
					      const ProtobufCBinaryData *bins,
					      size_t n, bool *ok)
{
	size_t skip = head ? 1 : 0;
	n += skip;
	struct storage_mutation **out = calloc(n ? n : 1, sizeof(*out));
	if (!out) {
		*ok = false;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const ProtobufCBinaryData *b =
			i < skip ? head : &bins[i - skip];
		out[i] = storage_mutation_decode(b->data, b->len);
		if (!out[i]) {
			for (size_t j = 0; j < i; j++)
				storage_mutation_delete(out[j]);
			free(out);
			*ok = false;
			return NULL;
		}
	}
	return out;
}

/* Requests go to the replica side (replica.c); answers to repl_on_answer. */
void repl_receive(struct repl *r, const struct inet_addr *from, uint32_t verb,
		  const uint8_t *msg, size_t len)
{
	if (repl_serve(r, from, verb, msg, len) ||
	    repl_counter_receive(r, from, verb, msg, len))
		return;
	switch (verb) {
	case REPL_VERB_MUTATION_RSP:
	case REPL_VERB_BATCH_STORE_RSP: {
		Cassini__Replication__MutationRsp *rsp =
			cassini__replication__mutation_rsp__unpack(NULL, len,
								   msg);
		if (!rsp)
			break;
		repl_on_answer(r, rsp->id, rsp->ok, rsp->error, NULL, NULL, 0,
			       false);
		cassini__replication__mutation_rsp__free_unpacked(rsp, NULL);
		return;
	}
	case REPL_VERB_READ_RSP: {
		Cassini__Replication__ReadRsp *rsp =
			cassini__replication__read_rsp__unpack(NULL, len, msg);
		if (!rsp)
			break;
		bool ok = rsp->ok && rsp->digest.len == 16;
		struct storage_mutation **frags = NULL;
		size_t n = 0;
		if (ok && rsp->fragment.len > 0) {
			/* a batched protection read: `fragments` follow */
			frags = decode_frags(&rsp->fragment, rsp->fragments,
					     rsp->n_fragments, &ok);
			n = ok ? 1 + rsp->n_fragments : 0;
		}
		repl_on_answer(r, rsp->id, ok,
			       ok ? NULL
				  : (rsp->error && *rsp->error ? rsp->error
							       : "bad answer"),
			       ok ? rsp->digest.data : NULL, frags, n, false);
		cassini__replication__read_rsp__free_unpacked(rsp, NULL);
		return;
	}
	case REPL_VERB_RANGE_RSP: {
		Cassini__Replication__RangeRsp *rsp =
			cassini__replication__range_rsp__unpack(NULL, len, msg);
		if (!rsp)
			break;
		bool ok = rsp->ok;
		struct storage_mutation **frags =
			ok ? decode_frags(NULL, rsp->fragments,
					  rsp->n_fragments, &ok)
			   : NULL;
		repl_on_answer(r, rsp->id, ok,
			       ok ? NULL
				  : (rsp->error && *rsp->error ? rsp->error
							       : "bad answer"),
			       NULL, frags, ok ? rsp->n_fragments : 0,
			       rsp->cut);
		cassini__replication__range_rsp__free_unpacked(rsp, NULL);
		return;
	}
	default:
		break;
	}
	char a[INET_ADDR_STRLEN];
	LOG_WARN("dropping a malformed replication message (verb %u) from %s",
		 verb, inet_addr_format(from, a, sizeof(a)));
}

/* ---- life cycle ---------------------------------------------------------- */

void repl_options_default(struct repl_options *o)
{
	memset(o, 0, sizeof(*o));
	o->write_timeout_ms = 2000;
	o->read_timeout_ms = 5000;
	o->range_timeout_ms = 10000;
	o->truncate_timeout_ms = 60000;
	o->max_inflight = 4096;
}

void repl_set_protection_thresholds(struct repl *r, uint64_t warn,
				    uint64_t fail)
{
	r->o.rfp_warn_rows = warn;
	r->o.rfp_fail_rows = fail;
}

struct repl *repl_new(struct env *env, const struct repl_options *o,
		      const struct repl_store_ops *store, void *store_arg,
		      const struct repl_hooks *hooks)
{
	struct repl *r = calloc(1, sizeof(*r));
	if (!r) {
		err_set(ERR_NOMEM, "cannot allocate the coordinator");
		return NULL;
	}
	r->env = env;
	r->o = *o;
	if (!r->o.max_inflight)
		r->o.max_inflight = 4096;
	if (!r->o.truncate_timeout_ms)
		r->o.truncate_timeout_ms = 60000;
	r->store = store;
	r->store_arg = store_arg;
	r->hooks = *hooks;
	if (!(r->dl_timer = env_timer_new(env, dl_fire, r))) {
		repl_delete(r);
		return NULL;
	}
	if (o->batchlog_dir) {
		if (!(r->bl = batchlog_open(env, o->batchlog_dir,
					    hooks->offload, hooks->arg)) ||
		    !(r->bl_timer = env_timer_new(env, repl_replay_tick, r))) {
			repl_delete(r);
			return NULL;
		}
		env_timer_arm(env, r->bl_timer, 1000000);
	}
	r->o.batchlog_dir = NULL; /* the caller's string; not kept */
	return r;
}

void repl_delete(struct repl *r)
{
	if (!r)
		return;
	while (r->ops) {
		struct op *op = r->ops;
		/* Hint deliveries report a failure so their store can let
		 * go of them; other callers were told the requests die. */
		if (op->kind == OP_DELIVER && !op->replied) {
			op->replied = true;
			op->ddone(op->arg, -1);
		}
		op->hold = 0;
		repl_op_free(op);
	}
	for (size_t b = 0; b < ID_BUCKETS; b++)
		while (r->ids[b]) {
			struct slot *s = r->ids[b];
			r->ids[b] = s->next;
			free(s);
		}
	repl_counter_free(r);
	env_timer_free(r->env, r->bl_timer);
	env_timer_free(r->env, r->dl_timer);
	batchlog_close(r->bl);
	free(r->tlat);
	free(r);
}

void repl_get_stats(const struct repl *r, struct repl_stats *out)
{
	*out = r->st;
	out->batchlog_pending = r->bl ? batchlog_count(r->bl) : 0;
	out->background = r->background;
}
