/*
 * The coordinator and the replica side of its messages (replication.h).
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
#include "replication/repl_internal.h"
#include "replication/replication.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ID_BUCKETS 4096
/* Slot targets at and above this are a batchlog store of a write. */
#define BL_TARGET 0x80000000u
#define BL_MAX    2

enum op_kind { OP_WRITE, OP_READ, OP_RANGE, OP_DELIVER };

struct op;

/* One message in flight: request id -> (operation, target slot). */
struct slot {
	struct slot *next; /* hash chain */
	uint64_t id;
	struct op *op;
	uint32_t target;
};

struct repl {
	struct env *env;
	struct repl_options o;
	const struct repl_store_ops *store;
	void *store_arg;
	struct repl_hooks hooks;
	uint64_t next_id;
	struct slot *ids[ID_BUCKETS];
	struct op *ops;      /* every live operation, for repl_delete */
	struct batchlog *bl; /* batches kept for others; NULL: none */
	struct env_timer *bl_timer;
	bool bl_replaying;
	struct repl_stats st;
};

/* ---- latency histogram --------------------------------------------------- */

/* Log-linear: values below 8 us get a bucket each, then 4 per power of
 * two (about 19% wide). */
static unsigned lat_bucket(uint64_t us)
{
	if (us < 8)
		return (unsigned)us;
	unsigned o = 63u - (unsigned)__builtin_clzll(us);
	unsigned b = 8 + (o - 3) * 4 + (unsigned)((us >> (o - 2)) & 3);
	return b < REPL_LAT_BUCKETS ? b : REPL_LAT_BUCKETS - 1;
}

static uint64_t lat_upper(unsigned b)
{
	if (b < 8)
		return b;
	unsigned o = (b - 8) / 4 + 3, sub = (b - 8) % 4;
	return ((uint64_t)(4 + sub + 1) << (o - 2)) - 1;
}

static void lat_add(struct repl_latency *l, uint64_t us)
{
	l->count++;
	l->buckets[lat_bucket(us)]++;
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
			return lat_upper(b);
	}
	return lat_upper(REPL_LAT_BUCKETS - 1);
}

/* ---- operations ---------------------------------------------------------- */

struct target {
	uint32_t ep;  /* ring endpoint index */
	uint32_t mut; /* writes: which mutation */
	int16_t dc;   /* index into the strategy's dcs, -1 if none */
	bool local_dc;
	bool pending; /* a pending endpoint (writes) */
	bool sent, answered, ok;
	uint64_t id;
	/* reads */
	uint8_t round; /* the phase its last request belongs to */
	bool digest_only;
	uint8_t digest[16];
	struct storage_mutation *frag;
	struct storage_mutation **frags; /* ranges */
	size_t nfrags;
	bool cut;
};

struct wmut {
	struct buf enc;
	const struct ring_strategy *strategy; /* borrowed: checked up front */
	int block_for;
	int acks, failures, targets;
	int *dc_need, *dc_acks; /* EACH_QUORUM, per strategy dc */
	size_t ndc;
	bool satisfied;
	/* The caller's mutation, valid only inside repl_write (the local
	 * replica applies it straight away). */
	const struct storage_mutation *m;
};

struct op {
	enum op_kind kind;
	struct op *prev, *next;
	struct repl *r;
	struct ring *ring;
	int cl;
	uint64_t start_us;
	struct env_timer *timer;
	bool replied;
	/* Frees requested while `hold` > 0 wait for the holder: an answer can
	 * arrive inline (a local apply) while a send loop still runs. */
	int hold;
	bool free_pending;
	bool sending; /* a send loop runs: answers wait for its end */
	struct target *t;
	size_t nt;
	size_t outstanding; /* messages without an answer */
	int phase;
	/* writes */
	enum repl_write_type wt;
	bool logged;      /* a logged batch going through the batchlog */
	bool in_batchlog; /* still storing it */
	uint8_t batch_id[16];
	uint32_t bl_ep[BL_MAX];
	size_t nbl;
	int bl_acks;
	uint64_t bl_id[BL_MAX];
	bool bl_sent[BL_MAX], bl_answered[BL_MAX];
	struct wmut *muts;
	size_t nmut, unsatisfied;
	repl_write_done_fn wdone;
	/* reads */
	uint8_t table_id[16];
	const struct storage_table_meta *meta;
	struct buf cmd_enc;
	struct arena a; /* decoded cmd for the local store */
	struct storage_read_cmd cmd;
	bool read_repair;
	int block_for;
	size_t ncontact; /* reads: targets asked first; the rest are spares */
	struct env_timer *spec_timer;
	int64_t spec_delay_us; /* -1: no speculative retry */
	struct storage_mutation *merged;
	repl_read_done_fn rdone;
	/* ranges */
	int64_t start, sub_end, end;
	uint32_t max_partitions;
	repl_range_done_fn gdone;
	/* hint deliveries */
	struct inet_addr to;
	repl_deliver_fn ddone;
	void *arg;
};

static uint64_t now_us(struct repl *r)
{
	return env_mono_us(r->env);
}

static struct slot **bucket_of(struct repl *r, uint64_t id)
{
	return &r->ids[(id * 0x9E3779B97F4A7C15ull) >> 52 & (ID_BUCKETS - 1)];
}

static int slot_add(struct repl *r, struct op *op, uint32_t target)
{
	struct slot *s = malloc(sizeof(*s));
	if (!s)
		return err_set(ERR_NOMEM, "out of memory");
	s->id = ++r->next_id;
	s->op = op;
	s->target = target;
	struct slot **b = bucket_of(r, s->id);
	s->next = *b;
	*b = s;
	op->t[target].id = s->id;
	return 0;
}

/* Removes the slot of `id` and returns it (the caller frees), or NULL. */
static struct slot *slot_take(struct repl *r, uint64_t id)
{
	for (struct slot **p = bucket_of(r, id); *p; p = &(*p)->next)
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
static void op_free(struct op *op)
{
	if (op->hold > 0) {
		op->free_pending = true;
		return;
	}
	struct repl *r = op->r;
	for (size_t i = 0; i < op->nt; i++) {
		if (op->t[i].sent && !op->t[i].answered)
			free(slot_take(r, op->t[i].id));
		target_free(&op->t[i]);
	}
	for (size_t k = 0; k < op->nbl; k++)
		if (op->bl_sent[k] && !op->bl_answered[k])
			free(slot_take(r, op->bl_id[k]));
	if (op->prev)
		op->prev->next = op->next;
	else
		r->ops = op->next;
	if (op->next)
		op->next->prev = op->prev;
	r->st.inflight--;
	env_timer_free(r->env, op->timer);
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
	if (op->ring)
		ring_unref(op->ring);
	free(op);
}

static void op_timeout(void *arg);

static void op_unhold(struct op *op)
{
	if (--op->hold == 0 && op->free_pending)
		op_free(op);
}

static struct op *op_new(struct repl *r, enum op_kind kind, int cl,
			 uint64_t timeout_ms, void *arg)
{
	struct op *op = calloc(1, sizeof(*op));
	if (!op) {
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	op->kind = kind;
	op->r = r;
	op->cl = cl;
	op->arg = arg;
	op->start_us = now_us(r);
	buf_init(&op->cmd_enc);
	arena_create(&op->a, 0);
	op->timer = env_timer_new(r->env, op_timeout, op);
	if (!op->timer) {
		arena_destroy(&op->a);
		free(op);
		err_set(ERR_NOMEM, "out of memory");
		return NULL;
	}
	env_timer_arm(r->env, op->timer, timeout_ms * 1000);
	op_link(r, op);
	return op;
}

static void result_init(struct repl_result *res, enum repl_outcome o, int cl)
{
	memset(res, 0, sizeof(*res));
	res->outcome = o;
	res->cl = cl;
}

static bool overloaded(struct repl *r, struct repl_result *res, int cl)
{
	if (r->st.inflight < r->o.max_inflight)
		return false;
	r->st.overloaded++;
	result_init(res, REPL_OVERLOADED, cl);
	snprintf(res->msg, sizeof(res->msg),
		 "coordinator overloaded: %zu requests in flight",
		 r->o.max_inflight);
	return true;
}

/* ---- sending ------------------------------------------------------------- */

static int64_t deadline_us(struct repl *r, uint64_t timeout_ms)
{
	return env_wall_us(r->env) + (int64_t)timeout_ms * 1000;
}

static int send_packed(struct repl *r, const struct inet_addr *to,
		       uint32_t verb, const ProtobufCMessage *msg)
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

static const struct inet_addr *ep_addr(const struct op *op, uint32_t ep)
{
	if (op->kind == OP_DELIVER)
		return &op->to;
	return &ring_endpoint_get(op->ring, ep)->addr;
}

static bool is_self(const struct op *op, uint32_t ep)
{
	return op->ring && ring_local_endpoint(op->ring) == (int)ep;
}

/* Local replica completions carry the request id through this. */
struct local_ctx {
	struct repl *r;
	uint64_t id;
};

static void on_answer(struct repl *r, uint64_t id, bool ok, const char *error,
		      const uint8_t *digest, struct storage_mutation **frags,
		      size_t n, bool cut);

static void local_apply_done(void *arg, int status, enum err_code code)
{
	struct local_ctx *c = arg;
	on_answer(c->r, c->id, status == 0,
		  status == 0 ? NULL : err_code_name(code), NULL, NULL, 0,
		  false);
	free(c);
}

static void local_read_done(void *arg, int status, enum err_code code,
			    struct storage_mutation **frags, size_t n, bool cut)
{
	struct local_ctx *c = arg;
	on_answer(c->r, c->id, status == 0,
		  status == 0 ? NULL : err_code_name(code), NULL, frags, n,
		  cut);
	free(c);
}

static struct local_ctx *local_ctx_new(struct repl *r, uint64_t id)
{
	struct local_ctx *c = malloc(sizeof(*c));
	if (c)
		*c = (struct local_ctx){r, id};
	return c;
}

/* ---- writes -------------------------------------------------------------- */

static void batchlog_release(struct op *op);
static void batchlog_answer(struct op *op, size_t k, bool ok, const char *why);

static void write_reply(struct op *op, const struct repl_result *res)
{
	if (op->replied)
		return;
	op->replied = true;
	struct repl *r = op->r;
	if (res->outcome == REPL_OK)
		lat_add(&r->st.write_lat, now_us(r) - op->start_us);
	else if (res->outcome == REPL_WRITE_TIMEOUT)
		r->st.write_timeouts++;
	if (res->outcome == REPL_OK && op->logged)
		batchlog_release(op);
	op->wdone(op->arg, res);
}

static void write_ok_if_done(struct op *op)
{
	if (op->unsatisfied == 0) {
		struct repl_result res;
		result_init(&res, REPL_OK, op->cl);
		write_reply(op, &res);
	}
}

/* Does an ack from `t` count toward mutation `w`'s level? */
static void write_count(struct op *op, struct wmut *w, const struct target *t)
{
	switch (op->cl) {
	case REPL_CL_LOCAL_ONE:
	case REPL_CL_LOCAL_QUORUM:
		if (!t->local_dc)
			return;
		w->acks++;
		break;
	case REPL_CL_EACH_QUORUM:
		if (w->ndc) {
			if (t->dc >= 0)
				w->dc_acks[t->dc]++;
			w->acks++;
			for (size_t d = 0; d < w->ndc; d++)
				if (w->dc_acks[d] < w->dc_need[d])
					return;
			if (!w->satisfied) {
				w->satisfied = true;
				op->unsatisfied--;
			}
			return;
		}
		w->acks++;
		break;
	default:
		w->acks++;
	}
	if (!w->satisfied && w->acks >= w->block_for) {
		w->satisfied = true;
		op->unsatisfied--;
	}
}

static void hint_target(struct op *op, const struct target *t)
{
	struct repl *r = op->r;
	if (!r->hooks.hint)
		return;
	const struct ring_endpoint *e = ring_endpoint_get(op->ring, t->ep);
	const struct buf *enc = &op->muts[t->mut].enc;
	if (r->hooks.hint(r->hooks.arg, e->host_id, e->dc, enc->data,
			  enc->len) == 0)
		r->st.hints_written++;
}

static void write_answer(struct op *op, struct target *t, bool ok,
			 const char *error)
{
	struct wmut *w = &op->muts[t->mut];
	t->ok = ok;
	if (ok) {
		write_count(op, w, t);
		write_ok_if_done(op);
	} else {
		w->failures++;
		LOG_DEBUG("replica write failed: %s", error ? error : "?");
		if (!w->satisfied && w->targets - w->failures < w->block_for) {
			struct repl_result res;
			result_init(&res, REPL_WRITE_FAILURE, op->cl);
			res.required = w->block_for;
			res.alive = w->acks;
			res.write_type = op->wt;
			snprintf(res.msg, sizeof(res.msg),
				 "write failed on %d replica(s): %s",
				 w->failures, error ? error : "error");
			write_reply(op, &res);
		}
	}
	/* Unanswered and unsatisfied: the timeout answers. */
	if (op->outstanding == 0 && op->replied)
		op_free(op);
}

static void write_timeout(struct op *op)
{
	for (size_t i = 0; i < op->nt; i++)
		if (op->t[i].sent && !op->t[i].answered)
			hint_target(op, &op->t[i]);
	if (!op->replied && op->in_batchlog) {
		struct repl_result res;
		result_init(&res, REPL_WRITE_TIMEOUT, REPL_CL_ONE);
		res.write_type = REPL_WRITE_BATCH_LOG;
		res.required = (int)op->nbl;
		res.alive = op->bl_acks;
		snprintf(res.msg, sizeof(res.msg),
			 "Operation timed out - received only %d responses.",
			 res.alive);
		write_reply(op, &res);
	}
	if (!op->replied) {
		struct repl_result res;
		result_init(&res, REPL_WRITE_TIMEOUT, op->cl);
		res.write_type = op->wt;
		for (size_t i = 0; i < op->nmut; i++)
			if (!op->muts[i].satisfied) {
				res.required = op->muts[i].block_for;
				res.alive = op->muts[i].acks;
				break;
			}
		snprintf(res.msg, sizeof(res.msg),
			 "Operation timed out - received only %d responses.",
			 res.alive);
		write_reply(op, &res);
	}
	op_free(op);
}

static int strategy_dc_index(const struct ring_strategy *s, const char *dc)
{
	for (size_t i = 0; i < ring_strategy_dc_count(s); i++) {
		int rf;
		if (strcmp(ring_strategy_dc_at(s, i, &rf), dc) == 0)
			return (int)i;
	}
	return -1;
}

static const char *local_dc(const struct ring *ring)
{
	int self = ring_local_endpoint(ring);
	return self >= 0 ? ring_endpoint_get(ring, (size_t)self)->dc : NULL;
}

/* Plans the targets of mutation `k`; fills `res` and fails when too few
 * replicas are alive. */
static int write_plan(struct op *op, size_t k, const struct repl_mutation *rm,
		      struct repl_result *res)
{
	struct repl *r = op->r;
	struct wmut *w = &op->muts[k];
	struct ring_replicas reps;
	if (ring_replicas_for_token(op->ring, rm->strategy,
				    storage_mutation_token(rm->m),
				    &reps) != 0) {
		result_init(res, REPL_WRITE_FAILURE, op->cl);
		snprintf(res->msg, sizeof(res->msg), "%s", err_msg());
		return -1;
	}
	size_t n = reps.n_natural + reps.n_pending;
	if (n == 0) {
		result_init(res, REPL_UNAVAILABLE, op->cl);
		res->required = repl_block_for(op->cl, rm->strategy, NULL);
		snprintf(res->msg, sizeof(res->msg),
			 "Cannot achieve consistency level %s: the ring "
			 "has no replica for this partition",
			 repl_cl_name(op->cl));
		return -1;
	}
	const char *ldc = local_dc(op->ring);
	struct repl_live live[64];
	struct target *grown =
		n <= 64 ? realloc(op->t, (op->nt + n) * sizeof(*op->t)) : NULL;
	if (!grown) {
		result_init(res, REPL_WRITE_FAILURE, op->cl);
		snprintf(res->msg, sizeof(res->msg), "cannot plan %zu replicas",
			 n);
		return -1;
	}
	op->t = grown;
	for (size_t i = 0; i < n; i++) {
		uint32_t ep = i < reps.n_natural
				      ? reps.natural[i]
				      : reps.pending[i - reps.n_natural];
		const struct ring_endpoint *e = ring_endpoint_get(op->ring, ep);
		bool alive = is_self(op, ep) ||
			     r->hooks.is_alive(r->hooks.arg, &e->addr);
		live[i] = (struct repl_live){e->dc, alive};
		struct target *t = &op->t[op->nt++];
		memset(t, 0, sizeof(*t));
		t->ep = ep;
		t->mut = (uint32_t)k;
		t->dc = (int16_t)strategy_dc_index(rm->strategy, e->dc);
		t->local_dc = ldc && strcmp(e->dc, ldc) == 0;
		t->pending = i >= reps.n_natural;
		t->ok = alive; /* "alive" until sent */
	}
	if (repl_check_live(op->cl, rm->strategy, ldc, live, n, reps.n_pending,
			    res) != 0)
		return -1;
	w->strategy = rm->strategy;
	w->m = rm->m;
	w->block_for = repl_block_for(op->cl, rm->strategy, ldc);
	w->targets = (int)n;
	size_t pending_local = 0;
	for (size_t i = reps.n_natural; i < n; i++)
		pending_local += op->t[op->nt - n + i].local_dc;
	if (op->cl == REPL_CL_LOCAL_ONE || op->cl == REPL_CL_LOCAL_QUORUM)
		w->block_for += (int)pending_local;
	else if (op->cl != REPL_CL_ANY)
		w->block_for += (int)reps.n_pending;
	if (op->cl == REPL_CL_EACH_QUORUM &&
	    ring_strategy_class(rm->strategy) ==
		    RING_STRATEGY_NETWORK_TOPOLOGY) {
		w->ndc = ring_strategy_dc_count(rm->strategy);
		w->dc_need = calloc(w->ndc ? w->ndc : 1, sizeof(int));
		w->dc_acks = calloc(w->ndc ? w->ndc : 1, sizeof(int));
		if (!w->dc_need || !w->dc_acks) {
			result_init(res, REPL_WRITE_FAILURE, op->cl);
			snprintf(res->msg, sizeof(res->msg), "out of memory");
			return -1;
		}
		for (size_t d = 0; d < w->ndc; d++) {
			int rf;
			w->dc_need[d] = repl_dc_quorum(
				rm->strategy,
				ring_strategy_dc_at(rm->strategy, d, &rf));
		}
		for (size_t i = op->nt - n; i < op->nt; i++)
			if (op->t[i].pending && op->t[i].dc >= 0)
				w->dc_need[op->t[i].dc]++;
	}
	buf_init(&w->enc);
	if (storage_mutation_encode(rm->m, &w->enc) != 0) {
		result_init(res, REPL_WRITE_FAILURE, op->cl);
		snprintf(res->msg, sizeof(res->msg), "%s", err_msg());
		return -1;
	}
	return 0;
}

static void write_send(struct op *op, size_t i)
{
	struct repl *r = op->r;
	struct target *t = &op->t[i];
	const struct buf *enc = &op->muts[t->mut].enc;
	if (slot_add(r, op, (uint32_t)i) != 0)
		return;
	t->sent = true;
	op->outstanding++;
	if (is_self(op, t->ep)) {
		/* The caller's mutation while repl_write runs; after a
		 * batchlog round, the encoded copy. */
		const struct storage_mutation *m = op->muts[t->mut].m;
		struct storage_mutation *decoded =
			m ? NULL : storage_mutation_decode(enc->data, enc->len);
		struct local_ctx *c = local_ctx_new(r, t->id);
		if (!(m = m ? m : decoded) || !c ||
		    r->store->apply(r->store_arg, m, local_apply_done, c) !=
			    0) {
			char why[ERR_MSG_MAX];
			snprintf(why, sizeof(why), "%s", err_msg());
			free(c);
			storage_mutation_delete(decoded);
			on_answer(r, t->id, false, why, NULL, NULL, 0, false);
			return;
		}
		storage_mutation_delete(decoded);
		return;
	}
	Cassini__Replication__MutationReq msg =
		CASSINI__REPLICATION__MUTATION_REQ__INIT;
	msg.id = t->id;
	msg.deadline_us = deadline_us(r, r->o.write_timeout_ms);
	msg.mutation.data = enc->data;
	msg.mutation.len = enc->len;
	if (send_packed(r, ep_addr(op, t->ep), REPL_VERB_MUTATION, &msg.base) !=
	    0) {
		/* Queue full or peer in backoff: as good as down. */
		free(slot_take(r, t->id));
		t->sent = false;
		op->outstanding--;
		hint_target(op, t);
	}
}

/* Sends the mutations to their live replicas. Down replicas get hints
 * now; ANY counts a stored hint as an ack when no replica at all could
 * take the write. */
static void write_start(struct op *op)
{
	op->hold++;
	for (size_t i = 0; i < op->nt; i++) {
		struct target *t = &op->t[i];
		if (!t->ok) {
			hint_target(op, t);
			continue;
		}
		write_send(op, i);
	}
	if (op->cl == REPL_CL_ANY)
		for (size_t k = 0; k < op->nmut; k++)
			if (!op->muts[k].satisfied) {
				bool any_sent = false;
				for (size_t i = 0; i < op->nt; i++)
					any_sent |= op->t[i].mut == k &&
						    op->t[i].sent;
				if (!any_sent) {
					op->muts[k].satisfied = true;
					op->unsatisfied--;
				}
			}
	write_ok_if_done(op);
	if (op->outstanding == 0 && op->replied)
		op_free(op);
	op_unhold(op);
}

/* ---- the batchlog (logged batches) --------------------------------------- */

/* Up to two live nodes of this datacenter other than this one, on
 * different racks when possible; this node when it is alone in its
 * datacenter. Unavailable (ONE, 1, 0) when it is not and none is alive. */
static int batchlog_endpoints(struct op *op, struct repl_result *res)
{
	struct repl *r = op->r;
	int self = ring_local_endpoint(op->ring);
	const char *ldc = local_dc(op->ring);
	uint32_t live[64];
	size_t nlive = 0, others = 0;
	for (size_t i = 0; i < ring_endpoint_count(op->ring); i++) {
		const struct ring_endpoint *e = ring_endpoint_get(op->ring, i);
		if ((int)i == self || !ldc || strcmp(e->dc, ldc) != 0)
			continue;
		others++;
		if (nlive < 64 && r->hooks.is_alive(r->hooks.arg, &e->addr))
			live[nlive++] = (uint32_t)i;
	}
	if (others == 0 && self >= 0) {
		op->bl_ep[op->nbl++] = (uint32_t)self;
		return 0;
	}
	if (nlive == 0) {
		result_init(res, REPL_UNAVAILABLE, REPL_CL_ONE);
		res->required = 1;
		snprintf(res->msg, sizeof(res->msg),
			 "Cannot achieve consistency level ONE: no live node "
			 "of this datacenter can take the batchlog");
		return -1;
	}
	size_t first = env_random(r->env) % nlive;
	op->bl_ep[op->nbl++] = live[first];
	const char *rack = ring_endpoint_get(op->ring, live[first])->rack;
	size_t pick = nlive;
	for (size_t k = 0; k < nlive && pick == nlive; k++) {
		size_t i = (first + 1 + k) % nlive;
		if (i != first &&
		    strcmp(ring_endpoint_get(op->ring, live[i])->rack, rack) !=
			    0)
			pick = i;
	}
	if (pick == nlive && nlive > 1)
		pick = (first + 1) % nlive;
	if (pick != nlive)
		op->bl_ep[op->nbl++] = live[pick];
	return 0;
}

static void batchlog_acked(struct op *op)
{
	if (op->replied || op->bl_acks < (int)op->nbl)
		return;
	op->in_batchlog = false;
	env_timer_arm(op->r->env, op->timer, op->r->o.write_timeout_ms * 1000);
	write_start(op);
}

static void batchlog_answer(struct op *op, size_t k, bool ok, const char *why)
{
	op->bl_answered[k] = true;
	if (ok) {
		op->bl_acks++;
		batchlog_acked(op);
	} else if (!op->replied) {
		struct repl_result res;
		result_init(&res, REPL_WRITE_FAILURE, REPL_CL_ONE);
		res.required = (int)op->nbl;
		res.alive = op->bl_acks;
		res.write_type = REPL_WRITE_BATCH_LOG;
		snprintf(res.msg, sizeof(res.msg),
			 "the batchlog could not be stored: %s",
			 why ? why : "error");
		write_reply(op, &res);
	}
	if (op->replied && op->outstanding == 0)
		op_free(op);
}

/* Stores the batch on the batchlog endpoints; the writes start once they
 * have all acknowledged. */
static int batchlog_begin(struct op *op, struct repl_result *res)
{
	struct repl *r = op->r;
	if (batchlog_endpoints(op, res) != 0)
		return -1;
	op->logged = true;
	op->in_batchlog = true;
	r->st.batches_logged++;
	for (int i = 0; i < 16; i += 8)
		be64_store(op->batch_id + i, env_random(r->env));
	ProtobufCBinaryData *bins = calloc(op->nmut, sizeof(*bins));
	struct slice *sl = calloc(op->nmut, sizeof(*sl));
	if (!bins || !sl) {
		free(bins);
		free(sl);
		result_init(res, REPL_WRITE_FAILURE, op->cl);
		snprintf(res->msg, sizeof(res->msg), "out of memory");
		return -1;
	}
	for (size_t k = 0; k < op->nmut; k++) {
		bins[k].data = op->muts[k].enc.data;
		bins[k].len = op->muts[k].enc.len;
		sl[k] = slice_make(op->muts[k].enc.data, op->muts[k].enc.len);
	}
	int64_t created = env_wall_us(r->env);
	for (size_t k = 0; k < op->nbl && !op->replied; k++) {
		if (is_self(op, op->bl_ep[k])) {
			bool ok = r->bl &&
				  batchlog_store(r->bl, op->batch_id, created,
						 sl, op->nmut) == 0;
			op->bl_sent[k] = true;
			batchlog_answer(op, k, ok, ok ? NULL : err_msg());
			continue;
		}
		struct slot *s = malloc(sizeof(*s));
		if (!s)
			continue; /* never answered: the timeout reports it */
		s->id = ++r->next_id;
		s->op = op;
		s->target = BL_TARGET + (uint32_t)k;
		struct slot **b = bucket_of(r, s->id);
		s->next = *b;
		*b = s;
		op->bl_id[k] = s->id;
		Cassini__Replication__BatchStoreReq msg =
			CASSINI__REPLICATION__BATCH_STORE_REQ__INIT;
		msg.id = s->id;
		msg.deadline_us = deadline_us(r, r->o.write_timeout_ms);
		msg.batch_id.data = op->batch_id;
		msg.batch_id.len = 16;
		msg.created_us = created;
		msg.n_mutations = op->nmut;
		msg.mutations = bins;
		if (send_packed(r, ep_addr(op, op->bl_ep[k]),
				REPL_VERB_BATCH_STORE, &msg.base) == 0)
			op->bl_sent[k] = true;
		else
			free(slot_take(r, s->id));
	}
	free(bins);
	free(sl);
	return 0;
}

/* The batch is applied: its batchlog copies can go. */
static void batchlog_release(struct op *op)
{
	struct repl *r = op->r;
	for (size_t k = 0; k < op->nbl; k++) {
		if (is_self(op, op->bl_ep[k])) {
			if (r->bl)
				batchlog_remove(r->bl, op->batch_id);
			continue;
		}
		Cassini__Replication__BatchRemove msg =
			CASSINI__REPLICATION__BATCH_REMOVE__INIT;
		msg.batch_id.data = op->batch_id;
		msg.batch_id.len = 16;
		send_packed(r, ep_addr(op, op->bl_ep[k]),
			    REPL_VERB_BATCH_REMOVE, &msg.base);
	}
}

void repl_write(struct repl *r, const struct repl_mutation *muts, size_t n,
		int cl, enum repl_write_type wt, repl_write_done_fn done,
		void *arg)
{
	struct repl_result res;
	r->st.writes++;
	if (cl == REPL_CL_SERIAL || cl == REPL_CL_LOCAL_SERIAL) {
		result_init(&res, REPL_INVALID, cl);
		snprintf(res.msg, sizeof(res.msg),
			 "You must use conditional updates for serializable "
			 "writes");
		done(arg, &res);
		return;
	}
	if (overloaded(r, &res, cl)) {
		done(arg, &res);
		return;
	}
	struct op *op = op_new(r, OP_WRITE, cl, r->o.write_timeout_ms, arg);
	if (!op || !(op->muts = calloc(n ? n : 1, sizeof(*op->muts)))) {
		result_init(&res, REPL_WRITE_FAILURE, cl);
		snprintf(res.msg, sizeof(res.msg), "out of memory");
		if (op)
			op_free(op);
		done(arg, &res);
		return;
	}
	op->wt = wt;
	op->wdone = done;
	op->nmut = n;
	op->unsatisfied = n;
	op->ring = ring_ref(r->hooks.ring(r->hooks.arg));
	for (size_t k = 0; k < n; k++)
		buf_init(&op->muts[k].enc);
	for (size_t k = 0; k < n; k++)
		if (write_plan(op, k, &muts[k], &res) != 0) {
			if (res.outcome == REPL_UNAVAILABLE)
				r->st.unavailables++;
			res.write_type = wt;
			op->replied = true;
			op_free(op);
			done(arg, &res);
			return;
		}
	op->hold++;
	if (wt == REPL_WRITE_BATCH && n > 1 && r->bl) {
		if (batchlog_begin(op, &res) != 0) {
			if (res.outcome == REPL_UNAVAILABLE)
				r->st.unavailables++;
			res.write_type = REPL_WRITE_BATCH_LOG;
			write_reply(op, &res);
			op_free(op);
		}
	} else {
		write_start(op);
	}
	for (size_t k = 0; !op->free_pending && k < n; k++)
		op->muts[k].m = NULL;
	op_unhold(op);
}

/* ---- single-partition reads ---------------------------------------------- */

static void read_reply(struct op *op, const struct repl_result *res,
		       struct storage_mutation *frag)
{
	if (op->replied) {
		storage_mutation_delete(frag);
		return;
	}
	op->replied = true;
	struct repl *r = op->r;
	if (res->outcome == REPL_OK)
		lat_add(&r->st.read_lat, now_us(r) - op->start_us);
	else if (res->outcome == REPL_READ_TIMEOUT)
		r->st.read_timeouts++;
	op->rdone(op->arg, res, frag);
}

static void read_send(struct op *op, size_t i, bool digest)
{
	struct repl *r = op->r;
	struct target *t = &op->t[i];
	t->digest_only = digest;
	t->answered = false;
	t->round = (uint8_t)op->phase;
	if (slot_add(r, op, (uint32_t)i) != 0)
		return;
	t->sent = true;
	op->outstanding++;
	if (is_self(op, t->ep)) {
		struct local_ctx *c = local_ctx_new(r, t->id);
		if (!c) {
			on_answer(r, t->id, false, "out of memory", NULL, NULL,
				  0, false);
			return;
		}
		r->store->read(r->store_arg, op->table_id, &op->cmd,
			       local_read_done, c);
		return;
	}
	Cassini__Replication__ReadReq msg =
		CASSINI__REPLICATION__READ_REQ__INIT;
	msg.id = t->id;
	msg.deadline_us = deadline_us(r, r->o.read_timeout_ms);
	msg.table_id.data = op->table_id;
	msg.table_id.len = 16;
	msg.cmd.data = op->cmd_enc.data;
	msg.cmd.len = op->cmd_enc.len;
	msg.digest = digest;
	if (send_packed(r, ep_addr(op, t->ep), REPL_VERB_READ, &msg.base) !=
	    0) {
		free(slot_take(r, t->id));
		t->sent = false;
		op->outstanding--;
	}
}

static void read_timeout(struct op *op)
{
	struct repl_result res;
	result_init(&res, REPL_READ_TIMEOUT, op->cl);
	res.required = op->block_for;
	for (size_t i = 0; i < op->nt; i++)
		if (op->t[i].answered && op->t[i].ok) {
			res.alive++;
			res.data_present |= op->t[i].frag != NULL;
		}
	if (res.alive > op->block_for)
		res.alive = op->block_for;
	snprintf(res.msg, sizeof(res.msg),
		 "Operation timed out - received only %d responses.",
		 res.alive);
	read_reply(op, &res, NULL);
	op_free(op);
}

static void read_fail(struct op *op, const char *why)
{
	struct repl_result res;
	result_init(&res, REPL_READ_FAILURE, op->cl);
	res.required = op->block_for;
	snprintf(res.msg, sizeof(res.msg), "read failed on a replica: %s",
		 why ? why : "error");
	read_reply(op, &res, NULL);
}

/* Every contacted replica has sent its data: merge, repair, answer. */
static void read_resolve(struct op *op)
{
	struct repl *r = op->r;
	struct storage_mutation *frags[64];
	size_t n = 0;
	for (size_t i = 0; i < op->nt && n < 64; i++)
		if (op->t[i].frag)
			frags[n++] = op->t[i].frag;
	op->merged = storage_fragment_merge(op->meta, frags, n);
	if (!op->merged) {
		read_fail(op, err_msg());
		return;
	}
	uint8_t want[16];
	storage_mutation_digest(op->merged, want);
	struct buf enc;
	buf_init(&enc);
	if (op->read_repair && storage_mutation_encode(op->merged, &enc) != 0) {
		buf_free(&enc);
		read_fail(op, err_msg());
		return;
	}
	op->phase = 3;
	for (size_t i = 0; op->read_repair && i < op->nt; i++) {
		struct target *t = &op->t[i];
		if (!t->frag)
			continue;
		uint8_t have[16];
		storage_mutation_digest(t->frag, have);
		if (memcmp(have, want, 16) == 0)
			continue;
		r->st.read_repairs++;
		if (slot_add(r, op, (uint32_t)i) != 0)
			continue;
		t->answered = false;
		t->round = 3;
		op->outstanding++;
		if (is_self(op, t->ep)) {
			struct local_ctx *c = local_ctx_new(r, t->id);
			if (!c || r->store->apply(r->store_arg, op->merged,
						  local_apply_done, c) != 0) {
				free(c);
				on_answer(r, t->id, false, err_msg(), NULL,
					  NULL, 0, false);
			}
			continue;
		}
		Cassini__Replication__MutationReq msg =
			CASSINI__REPLICATION__MUTATION_REQ__INIT;
		msg.id = t->id;
		msg.deadline_us = deadline_us(r, r->o.read_timeout_ms);
		msg.mutation.data = enc.data;
		msg.mutation.len = enc.len;
		if (send_packed(r, ep_addr(op, t->ep), REPL_VERB_MUTATION,
				&msg.base) != 0) {
			free(slot_take(r, t->id));
			op->outstanding--;
		}
	}
	buf_free(&enc);
}

static void read_progress(struct op *op);

static void read_finish_ok(struct op *op, struct storage_mutation *frag)
{
	struct repl_result res;
	result_init(&res, REPL_OK, op->cl);
	read_reply(op, &res, frag);
}

static void read_answer(struct op *op, struct target *t, bool ok,
			const char *error, const uint8_t *digest,
			struct storage_mutation **frags, size_t n)
{
	if (t->round != op->phase) {
		/* A straggler of an earlier round (a speculated-around
		 * replica): the read went on without it. */
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		return;
	}
	if (!ok) {
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		t->ok = false;
		if (op->phase != 3) {
			read_fail(op, error);
			op_free(op);
			return;
		}
		/* A failed repair write: the read still stands. */
	} else if (op->phase != 3) {
		t->ok = true;
		if (digest)
			memcpy(t->digest, digest, 16);
		if (n > 0) {
			storage_mutation_delete(t->frag);
			t->frag = frags[0];
			for (size_t i = 1; i < n; i++)
				storage_mutation_delete(frags[i]);
			if (!digest)
				storage_mutation_digest(t->frag, t->digest);
		}
		free(frags);
	} else {
		free(frags);
	}
	read_progress(op);
}

/* Whether every request of the current round has its answer. */
static bool round_answered(const struct op *op)
{
	for (size_t i = 0; i < op->nt; i++)
		if (op->t[i].sent && op->t[i].round == op->phase &&
		    !op->t[i].answered)
			return false;
	return true;
}

/* Moves a read on: the digest round ends once block-for replicas (the
 * data one among them) have answered; the data and repair rounds once
 * every request of theirs has. A target whose send failed never answers:
 * speculation or the timeout ends the read then. */
static void read_progress(struct op *op)
{
	if (op->sending || op->replied)
		return;
	if (op->phase == 1) {
		struct target *data = NULL;
		int answered = 0;
		for (size_t i = 0; i < op->nt; i++) {
			struct target *t = &op->t[i];
			if (!t->sent || !t->answered || !t->ok)
				continue;
			answered++;
			if (t->frag && !data)
				data = t;
		}
		if (answered < op->block_for || !data)
			return;
		bool equal = true;
		for (size_t i = 0; i < op->nt; i++) {
			struct target *t = &op->t[i];
			if (t->sent && t->answered && t->ok &&
			    memcmp(t->digest, data->digest, 16) != 0)
				equal = false;
		}
		if (equal) {
			struct storage_mutation *f = data->frag;
			data->frag = NULL;
			read_finish_ok(op, f);
			op_free(op);
			return;
		}
		/* Ask every replica that answered with a digest for its
		 * data; stragglers of the digest round are left out. */
		op->r->st.digest_mismatches++;
		op->phase = 2;
		op->sending = true;
		for (size_t i = 0; i < op->nt; i++) {
			struct target *t = &op->t[i];
			if (t->sent && t->answered && t->ok && !t->frag)
				read_send(op, i, false);
		}
		op->sending = false;
	}
	if (op->phase == 2) {
		if (!round_answered(op))
			return;
		op->phase = 3;
		op->sending = true;
		read_resolve(op);
		op->sending = false;
		if (op->replied) {
			op_free(op);
			return;
		}
	}
	if (!round_answered(op))
		return;
	/* Repairs acknowledged (or none needed). */
	struct storage_mutation *f = op->merged;
	op->merged = NULL;
	read_finish_ok(op, f);
	op_free(op);
}

/* Speculative retry: the contacts are slow; ask one more replica. */
static void read_speculate(void *arg)
{
	struct op *op = arg;
	if (op->replied || op->phase != 1)
		return;
	for (size_t i = op->ncontact; i < op->nt; i++)
		if (!op->t[i].sent) {
			op->r->st.speculative_retries++;
			op->hold++;
			read_send(op, i, false);
			read_progress(op);
			op_unhold(op);
			return;
		}
}

/* The delay before a speculative retry for the table's speculative_retry
 * option: NONE, ALWAYS, '<n>ms', '<p>p' / '<p>PERCENTILE' (of this
 * coordinator's read latencies; 99p until there are samples). -1: none. */
static int64_t spec_delay(const struct repl *r, const char *opt)
{
	if (!opt || !*opt)
		opt = "99p";
	if (strcasecmp(opt, "NONE") == 0)
		return -1;
	if (strcasecmp(opt, "ALWAYS") == 0)
		return 0;
	char *end;
	double v = strtod(opt, &end);
	if (end == opt || v < 0)
		return -1;
	if (strcasecmp(end, "ms") == 0)
		return (int64_t)(v * 1000);
	if (strcasecmp(end, "p") != 0 && strcasecmp(end, "percentile") != 0)
		return -1;
	if (r->st.read_lat.count < 100)
		return 50000; /* too few samples yet: 50 ms */
	uint64_t us = repl_latency_percentile(&r->st.read_lat, v);
	return us < 1000 ? 1000 : (int64_t)us;
}

/* Live replicas of `token` sorted by proximity; the first `want` are the
 * ones to contact. Fills `res` with Unavailable when too few are alive. */
static int read_plan(struct op *op, const struct ring_strategy *s,
		     int64_t token, bool spares, struct repl_result *res)
{
	struct repl *r = op->r;
	struct ring_replicas reps;
	if (ring_replicas_for_token(op->ring, s, token, &reps) != 0) {
		result_init(res, REPL_READ_FAILURE, op->cl);
		snprintf(res->msg, sizeof(res->msg), "%s", err_msg());
		return -1;
	}
	const char *ldc = local_dc(op->ring);
	struct repl_live live[64];
	uint32_t alive_eps[64];
	size_t n = reps.n_natural < 64 ? reps.n_natural : 64, na = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t ep = reps.natural[i];
		const struct ring_endpoint *e = ring_endpoint_get(op->ring, ep);
		bool alive = is_self(op, ep) ||
			     r->hooks.is_alive(r->hooks.arg, &e->addr);
		live[i] = (struct repl_live){e->dc, alive};
		if (alive)
			alive_eps[na++] = ep;
	}
	if (repl_check_live(op->cl, s, ldc, live, n, 0, res) != 0)
		return -1;
	op->block_for = repl_block_for(op->cl, s, ldc);
	int self = ring_local_endpoint(op->ring);
	if (self >= 0)
		ring_snitch_sort(op->ring, (size_t)self, alive_eps, na);
	op->t = calloc(na ? na : 1, sizeof(*op->t));
	if (!op->t) {
		result_init(res, REPL_READ_FAILURE, op->cl);
		snprintf(res->msg, sizeof(res->msg), "out of memory");
		return -1;
	}
	/* Choose the contacts: the closest block-for live replicas (local
	 * ones only for LOCAL_*; each DC's quorum for EACH_QUORUM). */
	int *taken_dc = NULL;
	size_t ndc = ring_strategy_dc_count(s);
	if (op->cl == REPL_CL_EACH_QUORUM && ndc)
		taken_dc = calloc(ndc, sizeof(int));
	for (size_t i = 0; i < na && (int)op->nt < op->block_for; i++) {
		const struct ring_endpoint *e =
			ring_endpoint_get(op->ring, alive_eps[i]);
		bool local = ldc && strcmp(e->dc, ldc) == 0;
		if ((op->cl == REPL_CL_LOCAL_ONE ||
		     op->cl == REPL_CL_LOCAL_QUORUM) &&
		    !local)
			continue;
		if (taken_dc) {
			int d = strategy_dc_index(s, e->dc);
			if (d < 0 || taken_dc[d] >= repl_dc_quorum(s, e->dc))
				continue;
			taken_dc[d]++;
		}
		struct target *t = &op->t[op->nt++];
		t->ep = alive_eps[i];
		t->local_dc = local;
	}
	free(taken_dc);
	op->ncontact = op->nt;
	/* Spares for speculative retry: the other eligible live replicas
	 * (none for EACH_QUORUM, whose contacts are counted per DC). */
	for (size_t i = 0;
	     spares && !taken_dc && op->cl != REPL_CL_EACH_QUORUM && i < na;
	     i++) {
		const struct ring_endpoint *e =
			ring_endpoint_get(op->ring, alive_eps[i]);
		bool local = ldc && strcmp(e->dc, ldc) == 0;
		if ((op->cl == REPL_CL_LOCAL_ONE ||
		     op->cl == REPL_CL_LOCAL_QUORUM) &&
		    !local)
			continue;
		bool used = false;
		for (size_t k = 0; k < op->ncontact; k++)
			used |= op->t[k].ep == alive_eps[i];
		if (used)
			continue;
		struct target *t = &op->t[op->nt++];
		t->ep = alive_eps[i];
		t->local_dc = local;
	}
	return 0;
}

void repl_read(struct repl *r, const struct repl_read *q,
	       repl_read_done_fn done, void *arg)
{
	struct repl_result res;
	r->st.reads++;
	if (q->cl == REPL_CL_ANY) {
		result_init(&res, REPL_INVALID, q->cl);
		snprintf(res.msg, sizeof(res.msg),
			 "ANY ConsistencyLevel is only supported for writes");
		done(arg, &res, NULL);
		return;
	}
	if (q->cl == REPL_CL_SERIAL || q->cl == REPL_CL_LOCAL_SERIAL) {
		result_init(&res, REPL_INVALID, q->cl);
		snprintf(res.msg, sizeof(res.msg),
			 "%s reads need lightweight transactions, which "
			 "Cassini does not support",
			 repl_cl_name(q->cl));
		done(arg, &res, NULL);
		return;
	}
	if (overloaded(r, &res, q->cl)) {
		done(arg, &res, NULL);
		return;
	}
	struct op *op = op_new(r, OP_READ, q->cl, r->o.read_timeout_ms, arg);
	if (!op) {
		result_init(&res, REPL_READ_FAILURE, q->cl);
		snprintf(res.msg, sizeof(res.msg), "out of memory");
		done(arg, &res, NULL);
		return;
	}
	op->rdone = done;
	op->phase = 1;
	op->meta = q->meta;
	op->read_repair = q->read_repair;
	memcpy(op->table_id, q->table_id, 16);
	op->ring = ring_ref(r->hooks.ring(r->hooks.arg));
	if (storage_read_cmd_encode(q->cmd, &op->cmd_enc) != 0 ||
	    storage_read_cmd_decode(op->cmd_enc.data, op->cmd_enc.len, &op->a,
				    &op->cmd) != 0) {
		result_init(&res, REPL_READ_FAILURE, q->cl);
		snprintf(res.msg, sizeof(res.msg), "%s", err_msg());
		op->replied = true;
		op_free(op);
		done(arg, &res, NULL);
		return;
	}
	if (read_plan(op, q->strategy, q->token, true, &res) != 0) {
		if (res.outcome == REPL_UNAVAILABLE)
			r->st.unavailables++;
		op->replied = true;
		op_free(op);
		done(arg, &res, NULL);
		return;
	}
	op->spec_delay_us = spec_delay(r, q->speculative_retry);
	if (op->spec_delay_us >= 0 && op->nt > op->ncontact) {
		op->spec_timer = env_timer_new(r->env, read_speculate, op);
		if (op->spec_timer)
			env_timer_arm(r->env, op->spec_timer,
				      (uint64_t)op->spec_delay_us);
	}
	op->hold++;
	op->sending = true;
	for (size_t i = 0; i < op->ncontact && !op->replied; i++)
		read_send(op, i, i > 0);
	op->sending = false;
	read_progress(op);
	op_unhold(op);
}

/* ---- range reads --------------------------------------------------------- */

static int frag_cmp(const struct storage_mutation *a,
		    const struct storage_mutation *b)
{
	int64_t ta = storage_mutation_token(a), tb = storage_mutation_token(b);
	if (ta != tb)
		return ta < tb ? -1 : 1;
	return slice_cmp(storage_mutation_key(a), storage_mutation_key(b));
}

static void range_reply(struct op *op, const struct repl_result *res,
			struct storage_mutation **frags, size_t n,
			int64_t resume, bool finished)
{
	if (op->replied)
		return;
	op->replied = true;
	struct repl *r = op->r;
	if (res->outcome == REPL_OK)
		lat_add(&r->st.range_lat, now_us(r) - op->start_us);
	else if (res->outcome == REPL_READ_TIMEOUT)
		r->st.read_timeouts++;
	op->gdone(op->arg, res, frags, n, resume, finished);
}

/* Every contact answered: merge their partitions in token order, up to the
 * earliest point where a cut replica stopped. */
static void range_resolve(struct op *op)
{
	struct repl_result res;
	const struct storage_mutation *bound = NULL;
	for (size_t i = 0; i < op->nt; i++) {
		struct target *t = &op->t[i];
		if (t->cut && t->nfrags > 0) {
			const struct storage_mutation *last =
				t->frags[t->nfrags - 1];
			if (!bound || frag_cmp(last, bound) < 0)
				bound = last;
		}
	}
	size_t cap = 0;
	for (size_t i = 0; i < op->nt; i++)
		cap += op->t[i].nfrags;
	struct storage_mutation **out = calloc(cap ? cap : 1, sizeof(*out));
	size_t *pos = calloc(op->nt ? op->nt : 1, sizeof(*pos));
	size_t n = 0;
	if (!out || !pos)
		goto nomem;
	for (;;) {
		/* The smallest head among the replicas' lists. */
		const struct storage_mutation *head = NULL;
		for (size_t i = 0; i < op->nt; i++)
			if (pos[i] < op->t[i].nfrags) {
				const struct storage_mutation *m =
					op->t[i].frags[pos[i]];
				if (!head || frag_cmp(m, head) < 0)
					head = m;
			}
		if (!head || (bound && frag_cmp(head, bound) > 0))
			break;
		struct storage_mutation *same[64];
		size_t ns = 0;
		for (size_t i = 0; i < op->nt; i++)
			if (pos[i] < op->t[i].nfrags &&
			    frag_cmp(op->t[i].frags[pos[i]], head) == 0) {
				if (ns < 64)
					same[ns++] = op->t[i].frags[pos[i]];
				pos[i]++;
			}
		struct storage_mutation *m =
			storage_fragment_merge(op->meta, same, ns);
		if (!m)
			goto nomem;
		out[n++] = m;
	}
	free(pos);
	bool cut = bound != NULL;
	int64_t resume = cut ? storage_mutation_token(bound) : op->sub_end;
	bool finished = !cut && op->sub_end == op->end;
	result_init(&res, REPL_OK, op->cl);
	range_reply(op, &res, out, n, resume, finished);
	return;
nomem:
	for (size_t i = 0; i < n; i++)
		storage_mutation_delete(out[i]);
	free(out);
	free(pos);
	result_init(&res, REPL_READ_FAILURE, op->cl);
	snprintf(res.msg, sizeof(res.msg), "%s", err_msg());
	range_reply(op, &res, NULL, 0, op->start, false);
}

static void range_progress(struct op *op);

static void range_answer(struct op *op, struct target *t, bool ok,
			 const char *error, struct storage_mutation **frags,
			 size_t n, bool cut)
{
	if (!ok) {
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		struct repl_result res;
		result_init(&res, REPL_READ_FAILURE, op->cl);
		res.required = op->block_for;
		snprintf(res.msg, sizeof(res.msg),
			 "range read failed on a replica: %s",
			 error ? error : "error");
		range_reply(op, &res, NULL, 0, op->start, false);
		op_free(op);
		return;
	}
	t->ok = true;
	t->frags = frags;
	t->nfrags = n;
	t->cut = cut;
	range_progress(op);
}

static void range_progress(struct op *op)
{
	if (op->sending || op->outstanding > 0 || op->replied)
		return;
	for (size_t i = 0; i < op->nt; i++)
		if (!op->t[i].answered)
			return; /* never sent: the timeout answers */
	range_resolve(op);
	op_free(op);
}

static void range_send(struct op *op, size_t i)
{
	struct repl *r = op->r;
	struct target *t = &op->t[i];
	if (slot_add(r, op, (uint32_t)i) != 0)
		return;
	t->sent = true;
	op->outstanding++;
	if (is_self(op, t->ep)) {
		struct local_ctx *c = local_ctx_new(r, t->id);
		if (!c) {
			on_answer(r, t->id, false, "out of memory", NULL, NULL,
				  0, false);
			return;
		}
		r->store->scan(r->store_arg, op->table_id, op->start,
			       op->sub_end, &op->cmd, op->max_partitions,
			       local_read_done, c);
		return;
	}
	Cassini__Replication__RangeReq msg =
		CASSINI__REPLICATION__RANGE_REQ__INIT;
	msg.id = t->id;
	msg.deadline_us = deadline_us(r, r->o.range_timeout_ms);
	msg.table_id.data = op->table_id;
	msg.table_id.len = 16;
	msg.cmd.data = op->cmd_enc.data;
	msg.cmd.len = op->cmd_enc.len;
	msg.start = op->start;
	msg.end = op->sub_end;
	msg.max_partitions = op->max_partitions;
	if (send_packed(r, ep_addr(op, t->ep), REPL_VERB_RANGE, &msg.base) !=
	    0) {
		free(slot_take(r, t->id));
		t->sent = false;
		op->outstanding--;
	}
}

void repl_range_step(struct repl *r, const struct repl_range *q,
		     repl_range_done_fn done, void *arg)
{
	struct repl_result res;
	r->st.ranges++;
	if (q->cl == REPL_CL_ANY || q->cl == REPL_CL_SERIAL ||
	    q->cl == REPL_CL_LOCAL_SERIAL) {
		result_init(&res, REPL_INVALID, q->cl);
		snprintf(res.msg, sizeof(res.msg),
			 "%s ConsistencyLevel is not supported for reads",
			 repl_cl_name(q->cl));
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	if (overloaded(r, &res, q->cl)) {
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	struct op *op = op_new(r, OP_RANGE, q->cl, r->o.range_timeout_ms, arg);
	if (!op) {
		result_init(&res, REPL_READ_FAILURE, q->cl);
		snprintf(res.msg, sizeof(res.msg), "out of memory");
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	op->gdone = done;
	op->meta = q->meta;
	memcpy(op->table_id, q->table_id, 16);
	op->ring = ring_ref(r->hooks.ring(r->hooks.arg));
	op->start = q->start;
	op->end = q->end;
	op->max_partitions = q->max_partitions ? q->max_partitions : 1000;
	/* The sub-range: up to the first ring token past start (the whole
	 * remaining wrap-around range when start is past the last token). */
	op->sub_end = q->end;
	size_t ntok = ring_token_count(op->ring);
	int64_t probe = q->start;
	if (ntok > 0 && q->start < INT64_MAX) {
		int64_t tok = ring_token_at(
			op->ring, ring_token_index(op->ring, q->start + 1));
		if (tok > q->start && tok < q->end)
			op->sub_end = tok;
		probe = op->sub_end;
	}
	if (storage_read_cmd_encode(q->cmd, &op->cmd_enc) != 0 ||
	    storage_read_cmd_decode(op->cmd_enc.data, op->cmd_enc.len, &op->a,
				    &op->cmd) != 0) {
		result_init(&res, REPL_READ_FAILURE, q->cl);
		snprintf(res.msg, sizeof(res.msg), "%s", err_msg());
		op->replied = true;
		op_free(op);
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	if (read_plan(op, q->strategy, probe, false, &res) != 0) {
		if (res.outcome == REPL_UNAVAILABLE)
			r->st.unavailables++;
		op->replied = true;
		op_free(op);
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	op->hold++;
	op->sending = true;
	for (size_t i = 0; i < op->nt && !op->replied; i++)
		range_send(op, i);
	op->sending = false;
	range_progress(op);
	op_unhold(op);
}

/* ---- hint delivery ------------------------------------------------------- */

int repl_deliver(struct repl *r, const struct inet_addr *to,
		 const uint8_t *mutation, size_t len, repl_deliver_fn done,
		 void *arg)
{
	struct op *op =
		op_new(r, OP_DELIVER, REPL_CL_ONE, r->o.write_timeout_ms, arg);
	if (!op || !(op->t = calloc(1, sizeof(*op->t)))) {
		if (op) {
			op->replied = true;
			op_free(op);
		}
		return err_set(ERR_NOMEM, "out of memory");
	}
	op->nt = 1;
	op->to = *to;
	op->ddone = done;
	if (slot_add(r, op, 0) != 0) {
		op->replied = true;
		op_free(op);
		return -1;
	}
	Cassini__Replication__MutationReq msg =
		CASSINI__REPLICATION__MUTATION_REQ__INIT;
	msg.id = op->t[0].id;
	msg.deadline_us = deadline_us(r, r->o.write_timeout_ms);
	msg.mutation.data = (uint8_t *)mutation;
	msg.mutation.len = len;
	if (send_packed(r, to, REPL_VERB_MUTATION, &msg.base) != 0) {
		free(slot_take(r, op->t[0].id));
		op->replied = true;
		op_free(op);
		return -1;
	}
	op->t[0].sent = true;
	op->outstanding = 1;
	return 0;
}

static void deliver_end(struct op *op, int status)
{
	if (!op->replied) {
		op->replied = true;
		op->ddone(op->arg, status);
	}
	op_free(op);
}

/* ---- answers and timeouts ------------------------------------------------ */

static void op_timeout(void *arg)
{
	struct op *op = arg;
	switch (op->kind) {
	case OP_WRITE:
		write_timeout(op);
		return;
	case OP_READ:
		read_timeout(op);
		return;
	case OP_DELIVER:
		deliver_end(op, -1);
		return;
	case OP_RANGE: {
		struct repl_result res;
		result_init(&res, REPL_READ_TIMEOUT, op->cl);
		res.required = op->block_for;
		for (size_t i = 0; i < op->nt; i++)
			if (op->t[i].answered && op->t[i].ok) {
				res.alive++;
				res.data_present = true;
			}
		snprintf(res.msg, sizeof(res.msg),
			 "Operation timed out - received only %d responses.",
			 res.alive);
		range_reply(op, &res, NULL, 0, op->start, false);
		op_free(op);
		return;
	}
	}
}

/* An answer for request `id` (remote or local). Takes ownership of
 * `frags`. */
static void on_answer(struct repl *r, uint64_t id, bool ok, const char *error,
		      const uint8_t *digest, struct storage_mutation **frags,
		      size_t n, bool cut)
{
	struct slot *s = slot_take(r, id);
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
		op_unhold(op);
		return;
	}
	struct target *t = &op->t[s->target];
	free(s);
	t->answered = true;
	op->outstanding--;
	op->hold++;
	switch (op->kind) {
	case OP_WRITE:
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		write_answer(op, t, ok, error);
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
		read_answer(op, t, ok, error, digest, frags, n);
		break;
	case OP_RANGE:
		range_answer(op, t, ok, error, frags, n, cut);
		break;
	case OP_DELIVER:
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		deliver_end(op, ok ? 0 : -1);
		break;
	}
	op_unhold(op);
}

/* ---- the replica side ---------------------------------------------------- */

struct serve {
	struct repl *r;
	struct inet_addr from;
	uint64_t id;
	bool digest;
	struct arena a;
	struct storage_read_cmd cmd;
};

static bool expired(struct repl *r, int64_t deadline, uint32_t verb)
{
	if (deadline && env_wall_us(r->env) > deadline) {
		r->st.dropped[verb]++;
		return true;
	}
	return false;
}

static void send_mutation_rsp(struct repl *r, const struct inet_addr *to,
			      uint64_t id, bool ok, const char *error)
{
	Cassini__Replication__MutationRsp rsp =
		CASSINI__REPLICATION__MUTATION_RSP__INIT;
	rsp.id = id;
	rsp.ok = ok;
	rsp.error = (char *)(error ? error : "");
	send_packed(r, to, REPL_VERB_MUTATION_RSP, &rsp.base);
}

static void serve_apply_done(void *arg, int status, enum err_code code)
{
	struct serve *s = arg;
	send_mutation_rsp(s->r, &s->from, s->id, status == 0,
			  status == 0 ? NULL : err_code_name(code));
	arena_destroy(&s->a);
	free(s);
}

static struct serve *serve_new(struct repl *r, const struct inet_addr *from,
			       uint64_t id)
{
	struct serve *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->r = r;
	s->from = *from;
	s->id = id;
	arena_create(&s->a, 0);
	return s;
}

static void serve_mutation(struct repl *r, const struct inet_addr *from,
			   const uint8_t *msg, size_t len)
{
	Cassini__Replication__MutationReq *req =
		cassini__replication__mutation_req__unpack(NULL, len, msg);
	if (!req) {
		LOG_WARN("dropping a malformed mutation request");
		return;
	}
	if (expired(r, req->deadline_us, REPL_VERB_MUTATION)) {
		cassini__replication__mutation_req__free_unpacked(req, NULL);
		return;
	}
	r->st.replica_mutations++;
	struct storage_mutation *m =
		storage_mutation_decode(req->mutation.data, req->mutation.len);
	struct serve *s = m ? serve_new(r, from, req->id) : NULL;
	if (!m || !s ||
	    r->store->apply(r->store_arg, m, serve_apply_done, s) != 0) {
		send_mutation_rsp(r, from, req->id, false, err_msg());
		if (s) {
			arena_destroy(&s->a);
			free(s);
		}
	}
	storage_mutation_delete(m);
	cassini__replication__mutation_req__free_unpacked(req, NULL);
}

static void serve_read_done(void *arg, int status, enum err_code code,
			    struct storage_mutation **frags, size_t n, bool cut)
{
	(void)cut;
	struct serve *s = arg;
	Cassini__Replication__ReadRsp rsp =
		CASSINI__REPLICATION__READ_RSP__INIT;
	rsp.id = s->id;
	rsp.ok = status == 0 && n == 1;
	rsp.error = (char *)(status == 0 ? "" : err_code_name(code));
	uint8_t digest[16];
	struct buf enc;
	buf_init(&enc);
	if (rsp.ok) {
		storage_mutation_digest(frags[0], digest);
		rsp.digest.data = digest;
		rsp.digest.len = 16;
		if (!s->digest) {
			if (storage_mutation_encode(frags[0], &enc) != 0) {
				rsp.ok = false;
				rsp.error = (char *)err_msg();
			}
			rsp.fragment.data = enc.data;
			rsp.fragment.len = enc.len;
		}
	}
	send_packed(s->r, &s->from, REPL_VERB_READ_RSP, &rsp.base);
	buf_free(&enc);
	for (size_t i = 0; i < n; i++)
		storage_mutation_delete(frags[i]);
	free(frags);
	arena_destroy(&s->a);
	free(s);
}

static void serve_range_done(void *arg, int status, enum err_code code,
			     struct storage_mutation **frags, size_t n,
			     bool cut)
{
	struct serve *s = arg;
	Cassini__Replication__RangeRsp rsp =
		CASSINI__REPLICATION__RANGE_RSP__INIT;
	rsp.id = s->id;
	rsp.ok = status == 0;
	rsp.error = (char *)(status == 0 ? "" : err_code_name(code));
	rsp.cut = cut;
	struct buf *encs = calloc(n ? n : 1, sizeof(*encs));
	ProtobufCBinaryData *bins = calloc(n ? n : 1, sizeof(*bins));
	if (!encs || !bins) {
		rsp.ok = false;
		rsp.error = (char *)"out of memory";
		n = 0;
	}
	for (size_t i = 0; rsp.ok && i < n; i++) {
		buf_init(&encs[i]);
		if (storage_mutation_encode(frags[i], &encs[i]) != 0) {
			rsp.ok = false;
			rsp.error = (char *)err_msg();
		}
		bins[i].data = encs[i].data;
		bins[i].len = encs[i].len;
	}
	if (rsp.ok) {
		rsp.n_fragments = n;
		rsp.fragments = bins;
	}
	send_packed(s->r, &s->from, REPL_VERB_RANGE_RSP, &rsp.base);
	for (size_t i = 0; i < n; i++) {
		if (encs)
			buf_free(&encs[i]);
		storage_mutation_delete(frags[i]);
	}
	free(encs);
	free(bins);
	free(frags);
	arena_destroy(&s->a);
	free(s);
}

static void serve_read(struct repl *r, const struct inet_addr *from,
		       const uint8_t *msg, size_t len)
{
	Cassini__Replication__ReadReq *req =
		cassini__replication__read_req__unpack(NULL, len, msg);
	if (!req) {
		LOG_WARN("dropping a malformed read request");
		return;
	}
	if (expired(r, req->deadline_us, REPL_VERB_READ)) {
		cassini__replication__read_req__free_unpacked(req, NULL);
		return;
	}
	r->st.replica_reads++;
	struct serve *s = serve_new(r, from, req->id);
	if (!s || req->table_id.len != 16 ||
	    storage_read_cmd_decode(req->cmd.data, req->cmd.len, &s->a,
				    &s->cmd) != 0) {
		Cassini__Replication__ReadRsp rsp =
			CASSINI__REPLICATION__READ_RSP__INIT;
		rsp.id = req->id;
		rsp.error = (char *)"malformed read request";
		send_packed(r, from, REPL_VERB_READ_RSP, &rsp.base);
		if (s) {
			arena_destroy(&s->a);
			free(s);
		}
	} else {
		s->digest = req->digest;
		r->store->read(r->store_arg, req->table_id.data, &s->cmd,
			       serve_read_done, s);
	}
	cassini__replication__read_req__free_unpacked(req, NULL);
}

static void serve_range(struct repl *r, const struct inet_addr *from,
			const uint8_t *msg, size_t len)
{
	Cassini__Replication__RangeReq *req =
		cassini__replication__range_req__unpack(NULL, len, msg);
	if (!req) {
		LOG_WARN("dropping a malformed range request");
		return;
	}
	if (expired(r, req->deadline_us, REPL_VERB_RANGE)) {
		cassini__replication__range_req__free_unpacked(req, NULL);
		return;
	}
	r->st.replica_ranges++;
	struct serve *s = serve_new(r, from, req->id);
	if (!s || req->table_id.len != 16 || req->start >= req->end ||
	    storage_read_cmd_decode(req->cmd.data, req->cmd.len, &s->a,
				    &s->cmd) != 0) {
		Cassini__Replication__RangeRsp rsp =
			CASSINI__REPLICATION__RANGE_RSP__INIT;
		rsp.id = req->id;
		rsp.error = (char *)"malformed range request";
		send_packed(r, from, REPL_VERB_RANGE_RSP, &rsp.base);
		if (s) {
			arena_destroy(&s->a);
			free(s);
		}
	} else {
		uint32_t max = req->max_partitions ? req->max_partitions : 1000;
		r->store->scan(r->store_arg, req->table_id.data, req->start,
			       req->end, &s->cmd, max > 10000 ? 10000 : max,
			       serve_range_done, s);
	}
	cassini__replication__range_req__free_unpacked(req, NULL);
}

static void serve_batch_store(struct repl *r, const struct inet_addr *from,
			      const uint8_t *msg, size_t len)
{
	Cassini__Replication__BatchStoreReq *req =
		cassini__replication__batch_store_req__unpack(NULL, len, msg);
	if (!req) {
		LOG_WARN("dropping a malformed batchlog request");
		return;
	}
	if (expired(r, req->deadline_us, REPL_VERB_BATCH_STORE)) {
		cassini__replication__batch_store_req__free_unpacked(req, NULL);
		return;
	}
	struct slice *sl =
		calloc(req->n_mutations ? req->n_mutations : 1, sizeof(*sl));
	bool ok = false;
	const char *why = "this node keeps no batchlog";
	if (sl && r->bl && req->batch_id.len == 16) {
		for (size_t i = 0; i < req->n_mutations; i++)
			sl[i] = slice_make(req->mutations[i].data,
					   req->mutations[i].len);
		ok = batchlog_store(r->bl, req->batch_id.data, req->created_us,
				    sl, req->n_mutations) == 0;
		why = ok ? NULL : err_msg();
		r->st.batches_stored += ok;
	}
	free(sl);
	Cassini__Replication__MutationRsp rsp =
		CASSINI__REPLICATION__MUTATION_RSP__INIT;
	rsp.id = req->id;
	rsp.ok = ok;
	rsp.error = (char *)(why ? why : "");
	send_packed(r, from, REPL_VERB_BATCH_STORE_RSP, &rsp.base);
	cassini__replication__batch_store_req__free_unpacked(req, NULL);
}

static void serve_batch_remove(struct repl *r, const uint8_t *msg, size_t len)
{
	Cassini__Replication__BatchRemove *req =
		cassini__replication__batch_remove__unpack(NULL, len, msg);
	if (!req)
		return;
	if (r->bl && req->batch_id.len == 16)
		batchlog_remove(r->bl, req->batch_id.data);
	cassini__replication__batch_remove__free_unpacked(req, NULL);
}

/* ---- batchlog replay ----------------------------------------------------- */

struct replay {
	struct repl *r;
	uint8_t id[16];
};

static void replay_done(void *arg, const struct repl_result *res)
{
	struct replay *p = arg;
	struct repl *r = p->r;
	r->bl_replaying = false;
	if (res->outcome == REPL_OK) {
		batchlog_remove(r->bl, p->id);
		r->st.batches_replayed++;
		LOG_INFO("batchlog: replayed a batch its coordinator did not "
			 "finish");
	} else {
		LOG_DEBUG("batchlog: replay failed (%s); will retry", res->msg);
	}
	free(p);
}

/* Replays one due batch (its coordinator never said it was applied): its
 * mutations are written at ONE, hints covering replicas that miss it. */
static void replay_tick(void *arg)
{
	struct repl *r = arg;
	uint64_t interval = r->o.batchlog_replay_interval_ms
				    ? r->o.batchlog_replay_interval_ms
				    : 1000;
	env_timer_arm(r->env, r->bl_timer, interval * 1000);
	uint64_t now = env_mono_us(r->env);
	uint64_t age = 2 * r->o.write_timeout_ms * 1000;
	uint8_t id[1][16];
	if (r->bl_replaying || now < age ||
	    batchlog_due(r->bl, now - age, id, 1) == 0)
		return;
	struct buf bytes;
	buf_init(&bytes);
	struct slice *sl = NULL;
	size_t n = 0;
	if (batchlog_read(r->bl, id[0], &bytes, &sl, &n) != 0) {
		if (err_code() == ERR_CORRUPT)
			batchlog_remove(r->bl, id[0]);
		buf_free(&bytes);
		return;
	}
	struct repl_mutation *rm = calloc(n ? n : 1, sizeof(*rm));
	struct storage_mutation **ms = calloc(n ? n : 1, sizeof(*ms));
	size_t k = 0;
	for (size_t i = 0; rm && ms && i < n; i++) {
		struct storage_mutation *m =
			storage_mutation_decode(sl[i].ptr, sl[i].len);
		const struct ring_strategy *st =
			m && r->hooks.strategy
				? r->hooks.strategy(
					  r->hooks.arg,
					  storage_mutation_table_id(m))
				: NULL;
		if (!st) { /* damaged, or its table is gone */
			storage_mutation_delete(m);
			continue;
		}
		ms[k] = m;
		rm[k] = (struct repl_mutation){m, st};
		k++;
	}
	struct replay *p = rm && ms ? malloc(sizeof(*p)) : NULL;
	if (k == 0 && rm && ms) {
		batchlog_remove(r->bl, id[0]); /* nothing left to apply */
		free(p);
	} else if (p) {
		*p = (struct replay){.r = r};
		memcpy(p->id, id[0], 16);
		r->bl_replaying = true;
		repl_write(r, rm, k, REPL_CL_ONE, REPL_WRITE_UNLOGGED_BATCH,
			   replay_done, p);
	}
	for (size_t i = 0; ms && i < k; i++)
		storage_mutation_delete(ms[i]);
	free(ms);
	free(rm);
	free(sl);
	buf_free(&bytes);
}

/* Decodes the fragments of an answer; NULL (and *ok false) on garbage. */
static struct storage_mutation **decode_frags(const ProtobufCBinaryData *bins,
					      size_t n, bool *ok)
{
	struct storage_mutation **out = calloc(n ? n : 1, sizeof(*out));
	if (!out) {
		*ok = false;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		out[i] = storage_mutation_decode(bins[i].data, bins[i].len);
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

void repl_receive(struct repl *r, const struct inet_addr *from, uint32_t verb,
		  const uint8_t *msg, size_t len)
{
	switch (verb) {
	case REPL_VERB_MUTATION:
		serve_mutation(r, from, msg, len);
		return;
	case REPL_VERB_READ:
		serve_read(r, from, msg, len);
		return;
	case REPL_VERB_RANGE:
		serve_range(r, from, msg, len);
		return;
	case REPL_VERB_BATCH_STORE:
		serve_batch_store(r, from, msg, len);
		return;
	case REPL_VERB_BATCH_REMOVE:
		serve_batch_remove(r, msg, len);
		return;
	case REPL_VERB_MUTATION_RSP:
	case REPL_VERB_BATCH_STORE_RSP: {
		Cassini__Replication__MutationRsp *rsp =
			cassini__replication__mutation_rsp__unpack(NULL, len,
								   msg);
		if (!rsp)
			break;
		on_answer(r, rsp->id, rsp->ok, rsp->error, NULL, NULL, 0,
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
			frags = decode_frags(&rsp->fragment, 1, &ok);
			n = ok ? 1 : 0;
		}
		on_answer(r, rsp->id, ok,
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
			ok ? decode_frags(rsp->fragments, rsp->n_fragments, &ok)
			   : NULL;
		on_answer(r, rsp->id, ok,
			  ok ? NULL
			     : (rsp->error && *rsp->error ? rsp->error
							  : "bad answer"),
			  NULL, frags, ok ? rsp->n_fragments : 0, rsp->cut);
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
	o->max_inflight = 4096;
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
	r->store = store;
	r->store_arg = store_arg;
	r->hooks = *hooks;
	if (o->batchlog_dir) {
		if (!(r->bl = batchlog_open(env, o->batchlog_dir)) ||
		    !(r->bl_timer = env_timer_new(env, replay_tick, r))) {
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
		op_free(op);
	}
	for (size_t b = 0; b < ID_BUCKETS; b++)
		while (r->ids[b]) {
			struct slot *s = r->ids[b];
			r->ids[b] = s->next;
			free(s);
		}
	env_timer_free(r->env, r->bl_timer);
	batchlog_close(r->bl);
	free(r);
}

void repl_get_stats(const struct repl *r, struct repl_stats *out)
{
	*out = r->st;
	out->batchlog_pending = r->bl ? batchlog_count(r->bl) : 0;
}
