/*
 * The coordinator's single-partition reads (repl_read): the closest live
 * replica sends its data, the others up to block-for a digest; a digest
 * mismatch asks them all for data, merges it and (unless the table says
 * otherwise) repairs the replicas that differed before answering; slow
 * contacts trigger a speculative retry on a spare replica. The messages
 * are built in coord_read_wire.c; range reads are coord_range.c.
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

/* Local replica completions of reads and scans for request id `c->id`. */
void repl_local_read_done(void *arg, int status, enum err_code code,
			  struct storage_mutation **frags, size_t n, bool cut)
{
	struct local_ctx *c = arg;
	if (c->traced && status == 0 && c->scan)
		repl_trace_scan_stats(c->r, c->trace, c->start_us, c->start,
				      c->end, &c->stats);
	else if (c->traced && status == 0 && n == 1)
		repl_trace_read_stats(c->r, c->trace, "ReadStage-1",
				      c->start_us, &c->stats, true);
	repl_on_answer(c->r, c->id, status == 0,
		       status == 0 ? NULL : err_code_name(code), NULL, frags, n,
		       cut);
	free(c);
}

static void read_reply(struct op *op, const struct repl_result *res,
		       struct storage_mutation *frag)
{
	if (op->replied) {
		storage_mutation_delete(frag);
		return;
	}
	repl_op_answered(op);
	struct repl *r = op->r;
	repl_count_request(r, REPL_REQ_READ, op->cl, res, op->start_us);
	if (res->outcome == REPL_OK) {
		uint64_t us = repl_now_us(r) - op->start_us;
		repl_lat_add(&r->st.read_lat, us);
		repl_table_lat_add(r, op->table_id, REPL_REQ_READ, us);
	} else if (res->outcome == REPL_READ_TIMEOUT)
		r->st.read_timeouts++;
	op->rdone(op->arg, res, frag);
}

void repl_read_timeout(struct op *op)
{
	struct repl_result res;
	repl_result_init(&res, REPL_READ_TIMEOUT, op->cl);
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
	repl_op_free(op);
}

/* Counts the tombstones of each replica's answer against
 * tombstone_warn_threshold (single reads: its fragment; range steps: its
 * fragments together). */
void repl_read_count_tombstones(struct op *op)
{
	uint64_t lim = op->r->o.tombstone_warn_threshold;
	int64_t now = (int64_t)(repl_now_us(op->r) / 1000000);
	op->tomb_warn_nodes = 0;
	op->tomb_max = 0;
	/* ranges: the contacts (what protection reads added is in their
	 * lists by now) */
	size_t nt = op->kind == OP_RANGE && op->ncontact_range
			    ? op->ncontact_range
			    : op->nt;
	for (size_t i = 0; lim && i < nt; i++) {
		const struct target *t = &op->t[i];
		uint64_t n =
			t->frag ? storage_mutation_tombstones(t->frag, now) : 0;
		for (size_t k = 0; k < t->nfrags; k++)
			n += storage_mutation_tombstones(t->frags[k], now);
		if (n > lim)
			op->tomb_warn_nodes++;
		if (n > op->tomb_max)
			op->tomb_max = n;
	}
}

/* The read fails: `t` the replica that answered with error `why` (NULL
 * when the coordinator itself failed, naming no replica). */
static void read_fail(struct op *op, const struct target *t, const char *why)
{
	struct repl_result res;
	repl_result_init(&res, REPL_READ_FAILURE, op->cl);
	res.required = op->block_for;
	res.tombstone_abort =
		why && strcmp(why, err_code_name(ERR_TOMBSTONES)) == 0;
	if (t)
		repl_result_add_failure(&res, repl_ep_addr(op, t->ep),
					repl_failure_code_of(why));
	snprintf(res.msg, sizeof(res.msg), "read failed on a replica: %s",
		 why ? why : "error");
	read_reply(op, &res, NULL);
}

/* "Sending read-repair-mutation to Full(/<peer>,(l,r])": a traced read
 * repairs the replica `ep` of `token`. */
void repl_read_trace_repair(struct op *op, uint32_t ep, int64_t token)
{
	if (!op->traced)
		return;
	char who[128];
	repl_trace_replica(op, ep, token, who, sizeof(who));
	repl_trace(op->r, op->trace, "Native-Transport-Requests-1",
		   op->start_us, "Sending read-repair-mutation to %s", who);
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
	repl_read_count_tombstones(op);
	op->merged = storage_fragment_merge(op->meta, frags, n);
	if (!op->merged) {
		read_fail(op, NULL, err_msg());
		return;
	}
	uint8_t want[16];
	storage_mutation_digest(op->merged, want);
	struct buf enc;
	buf_init(&enc);
	if (op->read_repair && storage_mutation_encode(op->merged, &enc) != 0) {
		buf_free(&enc);
		read_fail(op, NULL, err_msg());
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
		if (repl_target_begin(op, i) != 0)
			continue;
		t->answered = false;
		t->round = 3;
		repl_read_trace_repair(op, t->ep, op->token);
		if (repl_is_self(op, t->ep)) {
			struct local_ctx *c = repl_local_ctx_new(r, t->id);
			if (!c ||
			    r->store->apply(r->store_arg, op->merged,
					    repl_local_apply_done, c) != 0) {
				free(c);
				repl_on_answer(r, t->id, false, err_msg(), NULL,
					       NULL, 0, false);
			}
			continue;
		}
		Cassini__Replication__MutationReq msg =
			CASSINI__REPLICATION__MUTATION_REQ__INIT;
		msg.id = t->id;
		msg.deadline_us = repl_deadline_us(r, r->o.read_timeout_ms);
		msg.mutation.data = enc.data;
		msg.mutation.len = enc.len;
		repl_trace_send(op, "READ_REPAIR_REQ", t->ep, &msg.base);
		if (repl_send_packed(r, repl_ep_addr(op, t->ep),
				     REPL_VERB_MUTATION, &msg.base) != 0)
			repl_target_unsent(op, i); /* not waited for */
	}
	buf_free(&enc);
}

static void read_progress(struct op *op);

static void read_finish_ok(struct op *op, struct storage_mutation *frag)
{
	struct repl_result res;
	repl_result_init(&res, REPL_OK, op->cl);
	res.tombstone_warn_nodes = op->tomb_warn_nodes;
	res.tombstone_max = op->tomb_max;
	read_reply(op, &res, frag);
}

void repl_read_answer(struct op *op, struct target *t, bool ok,
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
			read_fail(op, t, error);
			repl_op_free(op);
			return;
		}
		/* A failed repair write: the read still stands. */
	} else if (op->phase != 3) {
		t->ok = true;
		if (digest) {
			memcpy(t->digest, digest, 16);
			t->has_digest = true;
		}
		if (n > 0) {
			storage_mutation_delete(t->frag);
			t->frag = frags[0];
			for (size_t i = 1; i < n; i++)
				storage_mutation_delete(frags[i]);
			/* A local fragment's digest is computed when
			 * there is something to compare it with. */
			if (!digest)
				t->has_digest = false;
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

/* Cassandra's "Digest mismatch: Mismatch for key DecoratedKey(<token>,
 * <key in hex>)". */
static void trace_mismatch(struct op *op)
{
	if (!op->traced)
		return;
	char hex[2 * 96 + 4];
	size_t n = op->cmd.key_len, shown = n > 96 ? 96 : n;
	for (size_t i = 0; i < shown; i++)
		snprintf(hex + 2 * i, 3, "%02x", op->cmd.key[i]);
	snprintf(hex + 2 * shown, 4, "%s", shown < n ? "..." : "");
	repl_trace(op->r, op->trace, "Native-Transport-Requests-1",
		   op->start_us,
		   "Digest mismatch: Mismatch for key DecoratedKey(%lld, %s)",
		   (long long)op->token, hex);
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
		for (size_t i = 0; answered > 1 && i < op->nt; i++) {
			struct target *t = &op->t[i];
			if (!t->sent || !t->answered || !t->ok)
				continue;
			if (t->frag && !t->has_digest) {
				storage_mutation_digest(t->frag, t->digest);
				t->has_digest = true;
			}
			if (data->frag && !data->has_digest) {
				storage_mutation_digest(data->frag,
							data->digest);
				data->has_digest = true;
			}
			if (memcmp(t->digest, data->digest, 16) != 0)
				equal = false;
		}
		if (equal) {
			repl_read_count_tombstones(op);
			struct storage_mutation *f = data->frag;
			data->frag = NULL;
			read_finish_ok(op, f);
			repl_op_free(op);
			return;
		}
		/* Ask every replica that answered with a digest for its
		 * data; stragglers of the digest round are left out. */
		op->r->st.digest_mismatches++;
		trace_mismatch(op);
		op->phase = 2;
		op->sending = true;
		for (size_t i = 0; i < op->nt; i++) {
			struct target *t = &op->t[i];
			if (t->sent && t->answered && t->ok && !t->frag)
				repl_read_send(op, i, false);
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
			repl_op_free(op);
			return;
		}
	}
	if (!round_answered(op))
		return;
	/* Repairs acknowledged (or none needed). */
	struct storage_mutation *f = op->merged;
	op->merged = NULL;
	read_finish_ok(op, f);
	repl_op_free(op);
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
			repl_read_send(op, i, false);
			read_progress(op);
			repl_op_unhold(op);
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
int repl_read_plan(struct op *op, const struct ring_strategy *s, int64_t token,
		   bool spares, struct repl_result *res)
{
	struct repl *r = op->r;
	struct ring_replicas reps;
	if (ring_replicas_for_token(op->ring, s, token, &reps) != 0) {
		repl_result_init(res, REPL_READ_FAILURE, op->cl);
		snprintf(res->msg, sizeof(res->msg), "%s", err_msg());
		return -1;
	}
	const char *ldc = repl_local_dc(op->ring);
	struct repl_live live[64];
	uint32_t alive_eps[64];
	size_t n = reps.n_natural < 64 ? reps.n_natural : 64, na = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t ep = reps.natural[i];
		const struct ring_endpoint *e = ring_endpoint_get(op->ring, ep);
		bool alive = repl_is_self(op, ep) ||
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
	op->t = zcalloc(na ? na : 1, sizeof(*op->t));
	if (!op->t) {
		repl_result_init(res, REPL_READ_FAILURE, op->cl);
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
			int d = repl_strategy_dc_index(s, e->dc);
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
		repl_result_init(&res, REPL_INVALID, q->cl);
		snprintf(res.msg, sizeof(res.msg),
			 "ANY ConsistencyLevel is only supported for writes");
		done(arg, &res, NULL);
		return;
	}
	if (q->cl == REPL_CL_SERIAL || q->cl == REPL_CL_LOCAL_SERIAL) {
		repl_result_init(&res, REPL_INVALID, q->cl);
		snprintf(res.msg, sizeof(res.msg),
			 "%s reads need lightweight transactions, which "
			 "Cassini does not support",
			 repl_cl_name(q->cl));
		done(arg, &res, NULL);
		return;
	}
	if (repl_overloaded(r, &res, q->cl)) {
		done(arg, &res, NULL);
		return;
	}
	struct op *op =
		repl_op_new(r, OP_READ, q->cl, r->o.read_timeout_ms, arg);
	if (!op) {
		repl_result_init(&res, REPL_READ_FAILURE, q->cl);
		snprintf(res.msg, sizeof(res.msg), "out of memory");
		done(arg, &res, NULL);
		return;
	}
	op->rdone = done;
	op->phase = 1;
	op->token = q->token;
	if (q->trace_session) {
		op->traced = true;
		memcpy(op->trace, q->trace_session, 16);
	}
	op->meta = storage_table_meta_ref(q->meta);
	op->read_repair = q->read_repair;
	memcpy(op->table_id, q->table_id, 16);
	op->ring = ring_ref(r->hooks.ring(r->hooks.arg));
	if (storage_read_cmd_encode(q->cmd, &op->cmd_enc) != 0 ||
	    storage_read_cmd_decode(op->cmd_enc.data, op->cmd_enc.len, &op->a,
				    &op->cmd) != 0) {
		repl_result_init(&res, REPL_READ_FAILURE, q->cl);
		snprintf(res.msg, sizeof(res.msg), "%s", err_msg());
		op->replied = true;
		repl_op_free(op);
		done(arg, &res, NULL);
		return;
	}
	if (repl_read_plan(op, q->strategy, q->token, true, &res) != 0) {
		if (res.outcome == REPL_UNAVAILABLE)
			r->st.unavailables++;
		repl_count_request(r, REPL_REQ_READ, q->cl, &res, 0);
		op->replied = true;
		repl_op_free(op);
		done(arg, &res, NULL);
		return;
	}
	/* Only a read with a spare replica can speculate. */
	op->spec_delay_us = op->nt > op->ncontact
				    ? spec_delay(r, q->speculative_retry)
				    : -1;
	if (op->spec_delay_us >= 0) {
		op->spec_timer = env_timer_new(r->env, read_speculate, op);
		if (op->spec_timer)
			env_timer_arm(r->env, op->spec_timer,
				      (uint64_t)op->spec_delay_us);
	}
	if (op->traced)
		repl_trace(r, op->trace, "Native-Transport-Requests-1",
			   op->start_us,
			   "Determining replicas to query: %zu of %zu, "
			   "blocking for %d",
			   op->ncontact, op->nt, op->block_for);
	op->hold++;
	op->sending = true;
	for (size_t i = 0; i < op->ncontact && !op->replied; i++)
		repl_read_send(op, i, i > 0);
	op->sending = false;
	read_progress(op);
	repl_op_unhold(op);
}
