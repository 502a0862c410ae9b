/*
 * The coordinator's range reads (repl_range_step): one ring sub-range per
 * step (or a run of them with the same replicas), merged in token order up
 * to where the first truncated replica stopped; an indexed one first reads
 * each partition some contact returned and another did not from that other
 * (replica filtering protection, coord_protect.c). The messages are built
 * in coord_read_wire.c.
 */
#define LOG_MODULE "replication"
#include "replication/replication.h"

#include "common/arena.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/zalloc.h"
#include "replication/coord_internal.h"
#include "replication/replication.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int repl_frag_cmp(const struct storage_mutation *a,
		  const struct storage_mutation *b)
{
	int64_t ta = storage_mutation_token(a), tb = storage_mutation_token(b);
	if (ta != tb)
		return ta < tb ? -1 : 1;
	return slice_cmp(storage_mutation_key(a), storage_mutation_key(b));
}

void repl_range_reply(struct op *op, const struct repl_result *res,
		      struct storage_mutation **frags, size_t n, int64_t resume,
		      bool finished)
{
	if (op->replied)
		return;
	repl_op_answered(op);
	struct repl *r = op->r;
	repl_count_request(r, REPL_REQ_RANGE, op->cl, res, op->start_us);
	if (res->outcome == REPL_OK) {
		uint64_t us = repl_now_us(r) - op->start_us;
		repl_lat_add(&r->st.range_lat, us);
		repl_table_lat_add(r, op->table_id, REPL_REQ_RANGE, us);
	} else if (res->outcome == REPL_READ_TIMEOUT)
		r->st.read_timeouts++;
	op->gdone(op->arg, res, frags, n, resume, finished);
}

/* A repair of partition `m` for contact `i`: a new target after the
 * contacts, sent now (the local replica applies it). 0, or -1 when it
 * could not be added (the read then goes on without it). */
static int range_repair(struct op *op, size_t i, const struct buf *enc,
			const struct storage_mutation *m)
{
	struct repl *r = op->r;
	struct target *nt = realloc(op->t, (op->nt + 1) * sizeof(*nt));
	if (!nt)
		return -1;
	op->t = nt;
	size_t j = op->nt++;
	op->t[j] = (struct target){
		.ep = op->t[i].ep, .local_dc = op->t[i].local_dc, .round = 3};
	r->st.read_repairs++;
	if (repl_target_begin(op, j) != 0)
		return -1;
	repl_read_trace_repair(op, op->t[j].ep, storage_mutation_token(m));
	if (repl_is_self(op, op->t[j].ep)) {
		struct local_ctx *c = repl_local_ctx_new(r, op->t[j].id);
		if (!c || r->store->apply(r->store_arg, m,
					  repl_local_apply_done, c) != 0) {
			free(c);
			repl_on_answer(r, op->t[j].id, false, err_msg(), NULL,
				       NULL, 0, false);
		}
		return 0;
	}
	Cassini__Replication__MutationReq msg =
		CASSINI__REPLICATION__MUTATION_REQ__INIT;
	msg.id = op->t[j].id;
	msg.deadline_us = repl_deadline_us(r, r->o.range_timeout_ms);
	msg.mutation.data = enc->data;
	msg.mutation.len = enc->len;
	repl_trace_send(op, "READ_REPAIR_REQ", op->t[j].ep, &msg.base);
	if (repl_send_packed(r, repl_ep_addr(op, op->t[j].ep),
			     REPL_VERB_MUTATION, &msg.base) != 0)
		repl_target_unsent(op, j); /* not waited for */
	return 0;
}

/* Writes merged partition `m` back to the contacts whose own version
 * (have[i], NULL when they lacked it) differs from it. */
static void range_repairs(struct op *op, const struct storage_mutation *m,
			  struct storage_mutation *const *have)
{
	uint8_t want[16];
	storage_mutation_digest(m, want);
	struct buf enc;
	buf_init(&enc);
	bool encoded = false;
	for (size_t i = 0; i < op->ncontact_range; i++) {
		if (!op->t[i].ok)
			continue;
		if (have[i]) {
			uint8_t got[16];
			storage_mutation_digest(have[i], got);
			if (memcmp(got, want, 16) == 0)
				continue;
		}
		if (!encoded && storage_mutation_encode(m, &enc) != 0)
			break; /* out of memory: no repair, the read stands */
		encoded = true;
		if (range_repair(op, i, &enc, m) != 0)
			break;
	}
	buf_free(&enc);
}

/* The earliest point where a cut contact stopped (NULL: none was cut):
 * past it some contact may hold partitions it did not send. */
const struct storage_mutation *repl_range_bound(const struct op *op)
{
	const struct storage_mutation *bound = NULL;
	for (size_t i = 0; i < op->ncontact_range; i++) {
		const struct target *t = &op->t[i];
		if (t->cut && t->nfrags > 0) {
			const struct storage_mutation *last =
				t->frags[t->nfrags - 1];
			if (!bound || repl_frag_cmp(last, bound) < 0)
				bound = last;
		}
	}
	return bound;
}

/* Every contact answered: merge their partitions in token order, up to the
 * earliest point where a cut replica stopped. */
static void range_resolve(struct op *op)
{
	struct repl_result res;
	repl_read_count_tombstones(op);
	const struct storage_mutation *bound = repl_range_bound(op);
	size_t cap = 0;
	for (size_t i = 0; i < op->ncontact_range; i++)
		cap += op->t[i].nfrags;
	struct storage_mutation **out = calloc(cap ? cap : 1, sizeof(*out));
	size_t *pos = calloc(op->ncontact_range + 1, sizeof(*pos));
	struct storage_mutation **have =
		calloc(op->ncontact_range + 1, sizeof(*have));
	size_t n = 0;
	bool repair = op->read_repair && op->nt > 1;
	op->phase = 3; /* answers from here on are repair acknowledgements */
	op->sending = true;
	if (!out || !pos || !have)
		goto nomem;
	for (;;) {
		/* The smallest head among the replicas' lists. */
		const struct storage_mutation *head = NULL;
		for (size_t i = 0; i < op->ncontact_range; i++)
			if (pos[i] < op->t[i].nfrags) {
				const struct storage_mutation *m =
					op->t[i].frags[pos[i]];
				if (!head || repl_frag_cmp(m, head) < 0)
					head = m;
			}
		if (!head || (bound && repl_frag_cmp(head, bound) > 0))
			break;
		struct storage_mutation *same[64];
		size_t ns = 0;
		for (size_t i = 0; i < op->ncontact_range; i++) {
			have[i] = NULL;
			if (pos[i] < op->t[i].nfrags &&
			    repl_frag_cmp(op->t[i].frags[pos[i]], head) == 0) {
				have[i] = op->t[i].frags[pos[i]];
				if (ns < 64)
					same[ns++] = op->t[i].frags[pos[i]];
				pos[i]++;
			}
		}
		struct storage_mutation *m =
			storage_fragment_merge(op->meta, same, ns);
		if (!m)
			goto nomem;
		out[n++] = m;
		if (repair)
			range_repairs(op, m, have);
	}
	free(pos);
	free(have);
	op->sending = false;
	bool cut = bound != NULL;
	op->rr_resume = cut ? storage_mutation_token(bound) : op->sub_end;
	op->rr_finished = !cut && op->sub_end == op->end;
	op->rr_out = out;
	op->rr_n = n;
	return; /* range_progress answers once the repairs are acknowledged */
nomem:
	op->sending = false;
	for (size_t i = 0; i < n; i++)
		storage_mutation_delete(out[i]);
	free(out);
	free(pos);
	free(have);
	repl_result_init(&res, REPL_READ_FAILURE, op->cl);
	snprintf(res.msg, sizeof(res.msg), "%s", err_msg());
	repl_range_reply(op, &res, NULL, 0, op->start, false);
}

static void range_progress(struct op *op);

void repl_range_fail_nomem(struct op *op)
{
	struct repl_result res;
	repl_result_init(&res, REPL_READ_FAILURE, op->cl);
	snprintf(res.msg, sizeof(res.msg), "%s", err_msg());
	repl_range_reply(op, &res, NULL, 0, op->start, false);
	repl_op_free(op);
}

/* A replica refused an indexed read: its index is still being built
 * there. Cassandra's ReadFailureException message, with the replicas
 * that had answered (never a partial answer). */
static void index_unavailable(const struct op *op, const struct target *t,
			      struct repl_result *res)
{
	int got = 0;
	for (size_t i = 0; i < op->nt; i++)
		got += op->t[i].ok && op->t[i].round == t->round;
	char addr[INET_ADDR_STRLEN];
	inet_addr_format(repl_ep_addr(op, t->ep), addr, sizeof(addr));
	res->alive = got;
	snprintf(res->msg, sizeof(res->msg),
		 "Operation failed - received %d responses and 1 failures: "
		 "INDEX_NOT_AVAILABLE from /%s",
		 got, addr);
}

void repl_range_answer(struct op *op, struct target *t, bool ok,
		       const char *error, struct storage_mutation **frags,
		       size_t n, bool cut)
{
	if (op->phase == 2 && ok) {
		/* a protection read: the contact's versions of the partitions
		 * asked (an empty one where it has none), in order; more
		 * than asked are dropped */
		size_t asked = t->npk ? t->npk : 1;
		for (size_t i = asked; i < n; i++)
			storage_mutation_delete(frags[i]);
		if (n > asked)
			n = asked;
		t->frags = frags;
		t->nfrags = n;
		t->ok = true;
		if (n > 0 && n < asked) {
			/* a node without ReadReq.keys answered for the
			 * first partition alone: the rest one a message */
			size_t of = t->of, first = t->pk;
			op->sending = true;
			for (size_t k = n; k < asked && !op->replied; k++)
				if (repl_protect_read(op, of, first + k, 1) !=
				    0)
					break; /* the timeout answers */
			op->sending = false;
			if (op->replied) {
				repl_op_free(op);
				return;
			}
		}
		range_progress(op);
		return;
	}
	if (op->phase == 3) {
		/* A repair write acknowledged (a failed one: the read still
		 * stands). */
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		range_progress(op);
		return;
	}
	if (!ok) {
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(frags[i]);
		free(frags);
		struct repl_result res;
		repl_result_init(&res, REPL_READ_FAILURE, op->cl);
		res.required = op->block_for;
		res.tombstone_abort =
			error &&
			strcmp(error, err_code_name(ERR_TOMBSTONES)) == 0;
		repl_result_add_failure(&res, repl_ep_addr(op, t->ep),
					repl_failure_code_of(error));
		snprintf(res.msg, sizeof(res.msg),
			 "range read failed on a replica: %s",
			 error ? error : "error");
		if (error &&
		    strcmp(error, err_code_name(ERR_INDEX_NOT_AVAILABLE)) == 0)
			index_unavailable(op, t, &res);
		repl_range_reply(op, &res, NULL, 0, op->start, false);
		repl_op_free(op);
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
	if (op->phase != 3) {
		for (size_t i = 0; i < op->nt; i++)
			if (!op->t[i].answered)
				return; /* never sent: the timeout answers */
		if (op->phase == 0) {
			op->ncontact_range = op->nt;
			if (op->has_index && op->nt > 1) {
				op->phase = 2;
				op->sending = true;
				int rc = repl_protect(op);
				op->sending = false;
				if (op->replied) {
					repl_op_free(op);
					return;
				}
				if (rc == 1) {
					repl_protect_fail_cached(op);
					return;
				}
				if (rc != 0) {
					repl_range_fail_nomem(op);
					return;
				}
				if (op->outstanding > 0)
					return; /* protection reads under way */
			}
		}
		if (op->phase == 2 && repl_protect_merge(op) != 0) {
			repl_range_fail_nomem(op);
			return;
		}
		range_resolve(op);
		if (op->replied) {
			repl_op_free(op);
			return;
		}
		if (op->outstanding > 0)
			return; /* repairs under way */
	}
	/* Merged, and every repair acknowledged (or none needed). */
	struct repl_result res;
	repl_result_init(&res, REPL_OK, op->cl);
	res.tombstone_warn_nodes = op->tomb_warn_nodes;
	res.tombstone_max = op->tomb_max;
	if (op->r->o.rfp_warn_rows && op->rfp_rows > op->r->o.rfp_warn_rows)
		res.rfp_threshold = op->r->o.rfp_warn_rows;
	struct storage_mutation **out = op->rr_out;
	op->rr_out = NULL;
	repl_range_reply(op, &res, out, op->rr_n, op->rr_resume,
			 op->rr_finished);
	repl_op_free(op);
}

/* The end of the first vnode range (at, ...] crosses, capped at `end`. */
static int64_t first_cut(const struct ring *ring, int64_t at, int64_t end)
{
	if (ring_token_count(ring) == 0 || at >= end || at == INT64_MAX)
		return end;
	int64_t tok = ring_token_at(ring, ring_token_index(ring, at + 1));
	return tok > at && tok < end ? tok : end;
}

/* Whether the vnode ranges holding tokens a and b have the same natural
 * replicas under `s` (as sets). */
static bool same_replicas(const struct ring *ring,
			  const struct ring_strategy *s, int64_t a, int64_t b)
{
	struct ring_replicas ra, rb;
	if (ring_replicas_for_token(ring, s, a, &ra) != 0 ||
	    ring_replicas_for_token(ring, s, b, &rb) != 0 ||
	    ra.n_natural != rb.n_natural)
		return false;
	for (size_t i = 0; i < ra.n_natural; i++) {
		bool found = false;
		for (size_t k = 0; k < rb.n_natural && !found; k++)
			found = ra.natural[i] == rb.natural[k];
		if (!found)
			return false;
	}
	return true;
}

static int64_t piece_end(const struct ring *ring, const struct ring_strategy *s,
			 int64_t start, int64_t end, bool merge)
{
	int64_t e = first_cut(ring, start, end);
	while (merge && e < end) {
		int64_t next = first_cut(ring, e, end);
		if (!same_replicas(ring, s, e, next))
			break;
		e = next;
	}
	return e;
}

int64_t repl_range_piece_end(struct repl *r, const struct ring_strategy *s,
			     int64_t start, int64_t end, bool merge)
{
	return piece_end(r->hooks.ring(r->hooks.arg), s, start, end, merge);
}

/* Copies an index restriction into the operation (its arena). An IN of
 * more values than a request carries reads the range whole. */
static int index_copy(struct op *op, const struct repl_index_expr *ix)
{
	if (!ix->name || (!ix->range && ix->n_vals == 0) ||
	    ix->n_vals > REPL_INDEX_MAX_VALUES)
		return 0;
	if (repl_index_expr_copy(&op->a, ix, &op->ix, op->ix_bounds) != 0)
		return -1;
	op->has_index = true;
	return 0;
}

void repl_range_step(struct repl *r, const struct repl_range *q,
		     repl_range_done_fn done, void *arg)
{
	struct repl_result res;
	r->st.ranges++;
	if (q->cl == REPL_CL_ANY || q->cl == REPL_CL_SERIAL ||
	    q->cl == REPL_CL_LOCAL_SERIAL) {
		repl_result_init(&res, REPL_INVALID, q->cl);
		snprintf(res.msg, sizeof(res.msg),
			 "%s ConsistencyLevel is not supported for reads",
			 repl_cl_name(q->cl));
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	if (repl_overloaded(r, &res, q->cl)) {
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	struct op *op =
		repl_op_new(r, OP_RANGE, q->cl, r->o.range_timeout_ms, arg);
	if (!op) {
		repl_result_init(&res, REPL_READ_FAILURE, q->cl);
		snprintf(res.msg, sizeof(res.msg), "out of memory");
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	op->gdone = done;
	if (q->trace_session) {
		op->traced = true;
		memcpy(op->trace, q->trace_session, 16);
	}
	op->meta = storage_table_meta_ref(q->meta);
	op->read_repair = q->read_repair;
	memcpy(op->table_id, q->table_id, 16);
	op->ring = ring_ref(r->hooks.ring(r->hooks.arg));
	op->start = q->start;
	op->end = q->end;
	op->max_partitions = q->max_partitions ? q->max_partitions : 1000;
	/* The sub-range: up to the first ring token past start (the whole
	 * remaining wrap-around range when start is past the last token),
	 * or with `merge` the run of ranges with the same replicas. */
	op->sub_end =
		piece_end(op->ring, q->strategy, q->start, q->end, q->merge);
	int64_t probe = ring_token_count(op->ring) > 0 && q->start < INT64_MAX
				? first_cut(op->ring, q->start, q->end)
				: q->start;
	if (storage_read_cmd_encode(q->cmd, &op->cmd_enc) != 0 ||
	    storage_read_cmd_decode(op->cmd_enc.data, op->cmd_enc.len, &op->a,
				    &op->cmd) != 0 ||
	    (q->index && index_copy(op, q->index) != 0)) {
		repl_result_init(&res, REPL_READ_FAILURE, q->cl);
		snprintf(res.msg, sizeof(res.msg), "%s", err_msg());
		op->replied = true;
		repl_op_free(op);
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	if (repl_read_plan(op, q->strategy, probe, false, &res) != 0) {
		if (res.outcome == REPL_UNAVAILABLE)
			r->st.unavailables++;
		repl_count_request(r, REPL_REQ_RANGE, q->cl, &res, 0);
		op->replied = true;
		repl_op_free(op);
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	/* the replicas may answer with the index's rows only: with several
	 * contacts replica filtering protection compares the answers row
	 * by row (coord_protect.c) */
	op->ix.rows = op->has_index;
	op->hold++;
	op->sending = true;
	for (size_t i = 0; i < op->nt && !op->replied; i++)
		repl_range_send(op, i);
	op->sending = false;
	range_progress(op);
	repl_op_unhold(op);
}

/* The range read's deadline passed. */
void repl_range_timeout(struct op *op)
{
	struct repl_result res;
	repl_result_init(&res, REPL_READ_TIMEOUT, op->cl);
	res.required = op->block_for;
	/* contacts only: repair writes (after them) are not responses */
	size_t nc = op->phase >= 2 ? op->ncontact_range : op->nt;
	for (size_t i = 0; i < nc; i++)
		if (op->t[i].answered && op->t[i].ok) {
			res.alive++;
			res.data_present = true;
		}
	snprintf(res.msg, sizeof(res.msg),
		 "Operation timed out - received only %d responses.",
		 res.alive);
	repl_range_reply(op, &res, NULL, 0, op->start, false);
	repl_op_free(op);
}
