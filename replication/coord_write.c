/*
 * The coordinator's write path (repl_write): each mutation's replicas are
 * planned (natural plus pending endpoints), checked against the
 * consistency level, sent the mutation, and counted as they acknowledge;
 * replicas that are down or miss the deadline get a hint. A logged batch
 * is first stored in the batchlog of up to two other nodes of this
 * datacenter (this one when it is alone there) and removed from there once
 * applied: the coordinator side of the batchlog; the store is batchlog.c,
 * its replay replica.c.
 */
#define LOG_MODULE "replication"
#include "replication/replication.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/zalloc.h"
#include "replication/coord_internal.h"
#include "replication/replication.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writes -------------------------------------------------------------- */

static void batchlog_release(struct op *op);

static void write_reply(struct op *op, const struct repl_result *res)
{
	if (op->replied)
		return;
	repl_op_answered(op);
	struct repl *r = op->r;
	repl_count_request(r, REPL_REQ_WRITE, op->cl, res, op->start_us);
	if (res->outcome == REPL_OK) {
		uint64_t us = repl_now_us(r) - op->start_us;
		repl_lat_add(&r->st.write_lat, us);
		/* each table written once (a batch's mutations may share) */
		for (size_t k = 0; k < op->nmut; k++) {
			bool seen = false;
			for (size_t j = 0; j < k && !seen; j++)
				seen = !memcmp(op->muts[j].table_id,
					       op->muts[k].table_id, 16);
			if (!seen)
				repl_table_lat_add(r, op->muts[k].table_id,
						   REPL_REQ_WRITE, us);
		}
	} else if (res->outcome == REPL_WRITE_TIMEOUT)
		r->st.write_timeouts++;
	if (res->outcome == REPL_OK && op->logged)
		batchlog_release(op);
	op->wdone(op->arg, res);
}

static void write_ok_if_done(struct op *op)
{
	if (op->unsatisfied == 0) {
		struct repl_result res;
		repl_result_init(&res, REPL_OK, op->cl);
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
	const struct buf *enc = &op->muts[t->mut].enc;
	if (repl_is_self(op, t->ep) || enc->len == 0)
		return; /* this node's own write is in its commitlog */
	const struct ring_endpoint *e = ring_endpoint_get(op->ring, t->ep);
	if (r->hooks.hint(r->hooks.arg, e->host_id, e->dc, enc->data,
			  enc->len) != 0)
		return;
	r->st.hints_written++;
	if (op->traced) { /* Cassandra's words, which it only logs */
		char peer[REPL_TRACE_PEER_LEN];
		repl_trace_peer(&e->addr, peer);
		repl_trace(r, op->trace, "Native-Transport-Requests-1",
			   op->start_us, "Adding hints for [%s]", peer);
	}
}

void repl_write_answer(struct op *op, struct target *t, bool ok,
		       const char *error)
{
	struct wmut *w = &op->muts[t->mut];
	t->ok = ok;
	if (ok) {
		write_count(op, w, t);
		write_ok_if_done(op);
	} else {
		w->failures++;
		t->fail_code = (uint16_t)repl_failure_code_of(error);
		LOG_DEBUG("replica write failed: %s", error ? error : "?");
		if (!w->satisfied && w->targets - w->failures < w->block_for) {
			struct repl_result res;
			repl_result_init(&res, REPL_WRITE_FAILURE, op->cl);
			res.required = w->block_for;
			res.alive = w->acks;
			res.write_type = op->wt;
			/* the mutation's replicas that failed so far */
			for (size_t i = 0; i < op->nt; i++) {
				const struct target *f = &op->t[i];
				if (f->mut == t->mut && f->answered && !f->ok)
					repl_result_add_failure(
						&res, repl_ep_addr(op, f->ep),
						f->fail_code);
			}
			snprintf(res.msg, sizeof(res.msg),
				 "write failed on %d replica(s): %s",
				 w->failures, error ? error : "error");
			write_reply(op, &res);
		}
	}
	/* Unanswered and unsatisfied: the timeout answers. */
	if (op->outstanding == 0 && op->replied)
		repl_op_free(op);
}

void repl_write_timeout(struct op *op)
{
	for (size_t i = 0; i < op->nt; i++)
		if (op->t[i].sent && !op->t[i].answered)
			hint_target(op, &op->t[i]);
	if (!op->replied && op->in_batchlog) {
		struct repl_result res;
		repl_result_init(&res, REPL_WRITE_TIMEOUT, REPL_CL_ONE);
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
		repl_result_init(&res, REPL_WRITE_TIMEOUT, op->cl);
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
	repl_op_free(op);
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
		repl_result_init(res, REPL_WRITE_FAILURE, op->cl);
		snprintf(res->msg, sizeof(res->msg), "%s", err_msg());
		return -1;
	}
	size_t n = reps.n_natural + reps.n_pending;
	if (n == 0) {
		repl_result_init(res, REPL_UNAVAILABLE, op->cl);
		res->required = repl_block_for(op->cl, rm->strategy, NULL);
		snprintf(res->msg, sizeof(res->msg),
			 "Cannot achieve consistency level %s: the ring "
			 "has no replica for this partition",
			 repl_cl_name(op->cl));
		return -1;
	}
	const char *ldc = repl_local_dc(op->ring);
	struct repl_live live[64];
	struct target *grown =
		n <= 64 ? realloc(op->t, (op->nt + n) * sizeof(*op->t)) : NULL;
	if (!grown) {
		repl_result_init(res, REPL_WRITE_FAILURE, op->cl);
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
		bool alive = repl_is_self(op, ep) ||
			     r->hooks.is_alive(r->hooks.arg, &e->addr);
		live[i] = (struct repl_live){e->dc, alive};
		struct target *t = &op->t[op->nt++];
		memset(t, 0, sizeof(*t));
		t->ep = ep;
		t->mut = (uint32_t)k;
		t->dc = (int16_t)repl_strategy_dc_index(rm->strategy, e->dc);
		t->local_dc = ldc && strcmp(e->dc, ldc) == 0;
		t->pending = i >= reps.n_natural;
		t->ok = alive; /* "alive" until sent */
	}
	if (repl_check_live(op->cl, rm->strategy, ldc, live, n, reps.n_pending,
			    res) != 0)
		return -1;
	w->m = rm->m;
	memcpy(w->table_id, storage_mutation_table_id(rm->m), 16);
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
			repl_result_init(res, REPL_WRITE_FAILURE, op->cl);
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
	/* The encoded form travels to other replicas, into hints and into
	 * the batchlog; a write whose only replica is this node needs none
	 * (the caller's mutation is applied directly). */
	bool remote = op->wt == REPL_WRITE_BATCH && op->nmut > 1;
	for (size_t i = op->nt - n; i < op->nt && !remote; i++)
		remote = !repl_is_self(op, op->t[i].ep);
	buf_init(&w->enc);
	if (remote && storage_mutation_encode(rm->m, &w->enc) != 0) {
		repl_result_init(res, REPL_WRITE_FAILURE, op->cl);
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
	if (repl_target_begin(op, i) != 0)
		return;
	if (repl_is_self(op, t->ep) && op->self_applied) {
		repl_on_answer(r, t->id, true, NULL, NULL, NULL, 0, false);
		return;
	}
	if (repl_is_self(op, t->ep)) {
		/* The caller's mutation while repl_write runs; after a
		 * batchlog round, the encoded copy. */
		const struct storage_mutation *m = op->muts[t->mut].m;
		struct storage_mutation *decoded =
			m ? NULL : storage_mutation_decode(enc->data, enc->len);
		struct local_ctx *c = repl_local_ctx_new(r, t->id);
		if (!(m = m ? m : decoded) || !c ||
		    r->store->apply(r->store_arg, m, repl_local_apply_done,
				    c) != 0) {
			char why[ERR_MSG_MAX];
			snprintf(why, sizeof(why), "%s", err_msg());
			free(c);
			storage_mutation_delete(decoded);
			repl_on_answer(r, t->id, false, why, NULL, NULL, 0,
				       false);
			return;
		}
		storage_mutation_delete(decoded);
		return;
	}
	Cassini__Replication__MutationReq msg =
		CASSINI__REPLICATION__MUTATION_REQ__INIT;
	msg.id = t->id;
	msg.deadline_us = repl_deadline_us(r, r->o.write_timeout_ms);
	msg.mutation.data = enc->data;
	msg.mutation.len = enc->len;
	if (op->traced) {
		msg.trace_session.data = op->trace;
		msg.trace_session.len = 16;
	}
	repl_trace_send(op, "MUTATION_REQ", t->ep, &msg.base);
	if (repl_send_packed(r, repl_ep_addr(op, t->ep), REPL_VERB_MUTATION,
			     &msg.base) != 0) {
		/* Queue full or peer in backoff: as good as down. */
		repl_target_unsent(op, i);
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
		repl_op_free(op);
	repl_op_unhold(op);
}

/* ---- the batchlog (logged batches) --------------------------------------- */

/* Up to two live nodes of this datacenter other than this one, on
 * different racks when possible; this node when it is alone in its
 * datacenter. Unavailable (ONE, 1, 0) when it is not and none is alive. */
static int batchlog_endpoints(struct op *op, struct repl_result *res)
{
	struct repl *r = op->r;
	int self = ring_local_endpoint(op->ring);
	const char *ldc = repl_local_dc(op->ring);
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
		repl_result_init(res, REPL_UNAVAILABLE, REPL_CL_ONE);
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
	repl_op_set_deadline(op, op->r->o.write_timeout_ms);
	write_start(op);
}

void batchlog_answer(struct op *op, size_t k, bool ok, const char *why)
{
	op->bl_answered[k] = true;
	if (ok) {
		op->bl_acks++;
		batchlog_acked(op);
	} else if (!op->replied) {
		struct repl_result res;
		repl_result_init(&res, REPL_WRITE_FAILURE, REPL_CL_ONE);
		res.required = (int)op->nbl;
		res.alive = op->bl_acks;
		res.write_type = REPL_WRITE_BATCH_LOG;
		snprintf(res.msg, sizeof(res.msg),
			 "the batchlog could not be stored: %s",
			 why ? why : "error");
		write_reply(op, &res);
	}
	if (op->replied && op->outstanding == 0)
		repl_op_free(op);
}

/* This node's own copy of a batch, answered through its slot. */
struct local_store {
	struct repl *r;
	uint64_t id;
};

static void local_stored(void *arg, int status, const char *why)
{
	struct local_store *ls = arg;
	repl_on_answer(ls->r, ls->id, status == 0, why, NULL, NULL, 0, false);
	free(ls);
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
		repl_result_init(res, REPL_WRITE_FAILURE, op->cl);
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
		struct slot *s = malloc(sizeof(*s));
		if (!s)
			continue; /* never answered: the timeout reports it */
		s->id = ++r->next_id;
		s->op = op;
		s->target = BL_TARGET + (uint32_t)k;
		struct slot **b = repl_bucket_of(r, s->id);
		s->next = *b;
		*b = s;
		op->bl_id[k] = s->id;
		if (repl_is_self(op, op->bl_ep[k])) {
			/* Answered like a peer's store, through the slot: the
			 * operation may be gone when the file is written. */
			struct local_store *ls =
				r->bl ? malloc(sizeof(*ls)) : NULL;
			op->bl_sent[k] = true;
			if (!ls) {
				repl_on_answer(
					r, s->id, false,
					r->bl ? "out of memory"
					      : "this node keeps no batchlog",
					NULL, NULL, 0, false);
				continue;
			}
			*ls = (struct local_store){.r = r, .id = s->id};
			batchlog_store(r->bl, op->batch_id, created, sl,
				       op->nmut, local_stored, ls);
			continue;
		}
		Cassini__Replication__BatchStoreReq msg =
			CASSINI__REPLICATION__BATCH_STORE_REQ__INIT;
		msg.id = s->id;
		msg.deadline_us = repl_deadline_us(r, r->o.write_timeout_ms);
		msg.batch_id.data = op->batch_id;
		msg.batch_id.len = 16;
		msg.created_us = created;
		msg.n_mutations = op->nmut;
		msg.mutations = bins;
		if (repl_send_packed(r, repl_ep_addr(op, op->bl_ep[k]),
				     REPL_VERB_BATCH_STORE, &msg.base) == 0)
			op->bl_sent[k] = true;
		else
			free(repl_slot_take(r, s->id));
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
		if (repl_is_self(op, op->bl_ep[k])) {
			if (r->bl)
				batchlog_remove(r->bl, op->batch_id);
			continue;
		}
		Cassini__Replication__BatchRemove msg =
			CASSINI__REPLICATION__BATCH_REMOVE__INIT;
		msg.batch_id.data = op->batch_id;
		msg.batch_id.len = 16;
		repl_send_packed(r, repl_ep_addr(op, op->bl_ep[k]),
				 REPL_VERB_BATCH_REMOVE, &msg.base);
	}
}

static void write_begin(struct repl *r, const struct repl_mutation *muts,
			size_t n, int cl, enum repl_write_type wt,
			bool self_applied, const uint8_t *trace,
			repl_write_done_fn done, void *arg);

void repl_write(struct repl *r, const struct repl_mutation *muts, size_t n,
		int cl, enum repl_write_type wt, repl_write_done_fn done,
		void *arg)
{
	write_begin(r, muts, n, cl, wt, false, NULL, done, arg);
}

void repl_write_traced(struct repl *r, const struct repl_mutation *muts,
		       size_t n, int cl, enum repl_write_type wt,
		       const uint8_t *trace_session, repl_write_done_fn done,
		       void *arg)
{
	write_begin(r, muts, n, cl, wt, false, trace_session, done, arg);
}

void repl_write_self_applied(struct repl *r, const struct repl_mutation *muts,
			     size_t n, int cl, enum repl_write_type wt,
			     const uint8_t *trace_session,
			     repl_write_done_fn done, void *arg)
{
	write_begin(r, muts, n, cl, wt, true, trace_session, done, arg);
}

static void write_begin(struct repl *r, const struct repl_mutation *muts,
			size_t n, int cl, enum repl_write_type wt,
			bool self_applied, const uint8_t *trace,
			repl_write_done_fn done, void *arg)
{
	struct repl_result res;
	r->st.writes++;
	if (cl == REPL_CL_SERIAL || cl == REPL_CL_LOCAL_SERIAL) {
		repl_result_init(&res, REPL_INVALID, cl);
		snprintf(res.msg, sizeof(res.msg),
			 "You must use conditional updates for serializable "
			 "writes");
		done(arg, &res);
		return;
	}
	if (repl_overloaded(r, &res, cl)) {
		done(arg, &res);
		return;
	}
	struct op *op =
		repl_op_new(r, OP_WRITE, cl, r->o.write_timeout_ms, arg);
	if (!op || !(op->muts = zcalloc(n ? n : 1, sizeof(*op->muts)))) {
		repl_result_init(&res, REPL_WRITE_FAILURE, cl);
		snprintf(res.msg, sizeof(res.msg), "out of memory");
		if (op)
			repl_op_free(op);
		done(arg, &res);
		return;
	}
	op->wt = wt;
	op->self_applied = self_applied;
	if (trace) {
		op->traced = true;
		memcpy(op->trace, trace, 16);
	}
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
			repl_count_request(r, REPL_REQ_WRITE, cl, &res, 0);
			res.write_type = wt;
			op->replied = true;
			repl_op_free(op);
			done(arg, &res);
			return;
		}
	if (op->traced)
		repl_trace(r, op->trace, "Native-Transport-Requests-1",
			   op->start_us,
			   "Determining replicas for mutation: %zu targets",
			   op->nt);
	op->hold++;
	if (wt == REPL_WRITE_BATCH && n > 1 && r->bl) {
		if (batchlog_begin(op, &res) != 0) {
			if (res.outcome == REPL_UNAVAILABLE)
				r->st.unavailables++;
			res.write_type = REPL_WRITE_BATCH_LOG;
			write_reply(op, &res);
			repl_op_free(op);
		}
	} else {
		write_start(op);
	}
	for (size_t k = 0; !op->free_pending && k < n; k++)
		op->muts[k].m = NULL;
	repl_op_unhold(op);
}
