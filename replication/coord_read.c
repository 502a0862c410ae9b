/*
 * The coordinator's reads. Single-partition reads (repl_read): the closest
 * live replica sends its data, the others up to block-for a digest; a
 * digest mismatch asks them all for data, merges it and (unless the table
 * says otherwise) repairs the replicas that differed before answering;
 * slow contacts trigger a speculative retry on a spare replica. Range reads
 * (repl_range_step): one ring sub-range per step (or a run of them with the
 * same replicas), merged in token order up to where the first truncated
 * replica stopped; an indexed one first reads each partition some contact
 * returned and another did not from that other (replica filtering
 * protection).
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

/* ---- single-partition reads ---------------------------------------------- */

/* Local replica completions of reads and scans for request id `c->id`. */
static void local_read_done(void *arg, int status, enum err_code code,
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

static void read_send(struct op *op, size_t i, bool digest)
{
	struct repl *r = op->r;
	struct target *t = &op->t[i];
	t->answered = false;
	t->round = (uint8_t)op->phase;
	if (repl_target_begin(op, i) != 0)
		return;
	if (repl_is_self(op, t->ep)) {
		struct local_ctx *c = repl_local_ctx_new(r, t->id);
		if (!c) {
			repl_on_answer(r, t->id, false, "out of memory", NULL,
				       NULL, 0, false);
			return;
		}
		struct storage_read_cmd cmd = op->cmd;
		if (op->traced && op->meta) {
			repl_trace(r, op->trace, "ReadStage-1", op->start_us,
				   "Executing single-partition query on %s.%s",
				   op->meta->keyspace, op->meta->name);
			repl_trace(r, op->trace, "ReadStage-1", op->start_us,
				   "Acquiring sstable references");
			c->traced = true;
			memcpy(c->trace, op->trace, 16);
			c->start_us = op->start_us;
			cmd.stats = &c->stats;
		}
		r->store->read(r->store_arg, op->table_id, &cmd,
			       local_read_done, c);
		return;
	}
	Cassini__Replication__ReadReq msg =
		CASSINI__REPLICATION__READ_REQ__INIT;
	msg.id = t->id;
	msg.deadline_us = repl_deadline_us(r, r->o.read_timeout_ms);
	msg.table_id.data = op->table_id;
	msg.table_id.len = 16;
	msg.cmd.data = op->cmd_enc.data;
	msg.cmd.len = op->cmd_enc.len;
	msg.digest = digest;
	if (op->traced) {
		msg.trace_session.data = op->trace;
		msg.trace_session.len = 16;
		char who[128];
		if (op->phase == 2) { /* after a digest mismatch */
			repl_trace_replica(op, t->ep, op->token, who,
					   sizeof(who));
			repl_trace(r, op->trace, "Native-Transport-Requests-1",
				   op->start_us,
				   "Enqueuing full data read to %s", who);
		} else {
			repl_trace_peer(repl_ep_addr(op, t->ep), who);
			repl_trace(r, op->trace, "Native-Transport-Requests-1",
				   op->start_us, "reading %s from %s",
				   digest ? "digest" : "data", who);
		}
	}
	repl_trace_send(op, "READ_REQ", t->ep, &msg.base);
	if (repl_send_packed(r, repl_ep_addr(op, t->ep), REPL_VERB_READ,
			     &msg.base) != 0)
		repl_target_unsent(op, i);
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
static void count_tombstones(struct op *op)
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

static void read_fail(struct op *op, const char *why)
{
	struct repl_result res;
	repl_result_init(&res, REPL_READ_FAILURE, op->cl);
	res.required = op->block_for;
	res.tombstone_abort =
		why && strcmp(why, err_code_name(ERR_TOMBSTONES)) == 0;
	snprintf(res.msg, sizeof(res.msg), "read failed on a replica: %s",
		 why ? why : "error");
	read_reply(op, &res, NULL);
}

/* "Sending read-repair-mutation to Full(/<peer>,(l,r])": a traced read
 * repairs the replica `ep` of `token`. */
static void trace_repair(struct op *op, uint32_t ep, int64_t token)
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
	count_tombstones(op);
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
		if (repl_target_begin(op, i) != 0)
			continue;
		t->answered = false;
		t->round = 3;
		trace_repair(op, t->ep, op->token);
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
			read_fail(op, error);
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
			count_tombstones(op);
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
			read_send(op, i, false);
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
static int read_plan(struct op *op, const struct ring_strategy *s,
		     int64_t token, bool spares, struct repl_result *res)
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
	if (read_plan(op, q->strategy, q->token, true, &res) != 0) {
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
		read_send(op, i, i > 0);
	op->sending = false;
	read_progress(op);
	repl_op_unhold(op);
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
	trace_repair(op, op->t[j].ep, storage_mutation_token(m));
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
static const struct storage_mutation *range_bound(const struct op *op)
{
	const struct storage_mutation *bound = NULL;
	for (size_t i = 0; i < op->ncontact_range; i++) {
		const struct target *t = &op->t[i];
		if (t->cut && t->nfrags > 0) {
			const struct storage_mutation *last =
				t->frags[t->nfrags - 1];
			if (!bound || frag_cmp(last, bound) < 0)
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
	count_tombstones(op);
	const struct storage_mutation *bound = range_bound(op);
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
				if (!head || frag_cmp(m, head) < 0)
					head = m;
			}
		if (!head || (bound && frag_cmp(head, bound) > 0))
			break;
		struct storage_mutation *same[64];
		size_t ns = 0;
		for (size_t i = 0; i < op->ncontact_range; i++) {
			have[i] = NULL;
			if (pos[i] < op->t[i].nfrags &&
			    frag_cmp(op->t[i].frags[pos[i]], head) == 0) {
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
	range_reply(op, &res, NULL, 0, op->start, false);
}

static void range_progress(struct op *op);

static void range_fail_nomem(struct op *op)
{
	struct repl_result res;
	repl_result_init(&res, REPL_READ_FAILURE, op->cl);
	snprintf(res.msg, sizeof(res.msg), "%s", err_msg());
	range_reply(op, &res, NULL, 0, op->start, false);
	repl_op_free(op);
}

/* The rows held for protection passed rfp_fail_rows: the step fails
 * as Cassandra's query does (OverloadedException; the node words the
 * message with the query). */
static void range_fail_cached(struct op *op)
{
	struct repl_result res;
	repl_result_init(&res, REPL_OVERLOADED, op->cl);
	res.rfp_threshold = op->r->o.rfp_fail_rows;
	snprintf(res.msg, sizeof(res.msg),
		 "Replica filtering protection has cached over %llu rows "
		 "during query (token range (%lld, %lld]). (See "
		 "'cached_replica_rows_fail_threshold' in cassandra.yaml.)",
		 (unsigned long long)res.rfp_threshold, (long long)op->start,
		 (long long)op->sub_end);
	if (op->traced)
		repl_trace(op->r, op->trace, "Native-Transport-Requests-1",
			   op->start_us, "%s", res.msg);
	op->r->st.overloaded++;
	range_reply(op, &res, NULL, 0, op->start, false);
	repl_op_free(op);
}

/* A protection read for contact `i` of the partitions op->pk[first ..
 * first + n): a new target after the contacts, sent now as one message
 * (cmd's key the first, ReadReq.keys the rest); the local replica reads
 * its one partition (n is 1 then) through the store. 0, or -1 with
 * ERR_NOMEM. */
static int range_protect_read(struct op *op, size_t i, size_t first, size_t n)
{
	struct repl *r = op->r;
	struct target *nt = realloc(op->t, (op->nt + 1) * sizeof(*nt));
	if (!nt)
		return err_set(ERR_NOMEM, "out of memory");
	op->t = nt;
	size_t j = op->nt++;
	op->t[j] = (struct target){.ep = op->t[i].ep,
				   .local_dc = op->t[i].local_dc,
				   .round = 2,
				   .of = (uint32_t)i,
				   .pk = (uint32_t)first,
				   .npk = (uint32_t)n};
	struct slice key = storage_mutation_key(op->pk[first]);
	struct storage_read_cmd cmd = op->cmd;
	cmd.key = key.ptr;
	cmd.key_len = key.len;
	cmd.stats = NULL;
	cmd.pending_repair = NULL;
	r->st.protection_reads += n;
	if (repl_target_begin(op, j) != 0)
		return -1;
	if (repl_is_self(op, op->t[j].ep)) {
		struct local_ctx *c = repl_local_ctx_new(r, op->t[j].id);
		if (!c) {
			repl_on_answer(r, op->t[j].id, false, "out of memory",
				       NULL, NULL, 0, false);
			return 0;
		}
		r->store->read(r->store_arg, op->table_id, &cmd,
			       local_read_done, c);
		return 0;
	}
	struct buf enc;
	buf_init(&enc);
	ProtobufCBinaryData keys[REPL_PROTECT_BATCH];
	if (n > REPL_PROTECT_BATCH ||
	    storage_read_cmd_encode(&cmd, &enc) != 0) {
		buf_free(&enc);
		repl_target_unsent(op, j);
		return err_set(ERR_NOMEM, "out of memory");
	}
	for (size_t k = 1; k < n; k++) {
		struct slice kk = storage_mutation_key(op->pk[first + k]);
		keys[k - 1] = (ProtobufCBinaryData){kk.len, (uint8_t *)kk.ptr};
	}
	Cassini__Replication__ReadReq msg =
		CASSINI__REPLICATION__READ_REQ__INIT;
	msg.id = op->t[j].id;
	msg.deadline_us = repl_deadline_us(r, r->o.range_timeout_ms);
	msg.table_id.data = op->table_id;
	msg.table_id.len = 16;
	msg.cmd.data = enc.data;
	msg.cmd.len = enc.len;
	msg.n_keys = n - 1;
	msg.keys = n > 1 ? keys : NULL;
	r->st.protection_messages++;
	if (op->traced) {
		msg.trace_session.data = op->trace;
		msg.trace_session.len = 16;
		char who[REPL_TRACE_PEER_LEN];
		repl_trace_peer(repl_ep_addr(op, op->t[j].ep), who);
		repl_trace(r, op->trace, "Native-Transport-Requests-1",
			   op->start_us,
			   "Requesting %zu partitions from %s for replica "
			   "filtering protection",
			   n, who);
	}
	/* single-partition reads, as Cassandra's protection fetches, of up
	 * to REPL_PROTECT_BATCH partitions a message */
	repl_trace_send(op, "READ_REQ", op->t[j].ep, &msg.base);
	if (repl_send_packed(r, repl_ep_addr(op, op->t[j].ep), REPL_VERB_READ,
			     &msg.base) != 0)
		repl_target_unsent(op, j); /* the timeout answers */
	buf_free(&enc);
	return 0;
}

/* The rows an indexed step holds for protection (Cassandra's cached
 * rows): every contact's version of every partition up to `bound`, a
 * partition a contact lacks counted for it as the largest version
 * another returned (what protection reads it for). Fills op->pk with
 * the partitions to read, grouped by the contact that lacks them, in
 * token order, and `at` / `cnt` with each contact's run. 0, or -1 with
 * ERR_NOMEM. */
static int range_protect_plan(struct op *op,
			      const struct storage_mutation *bound, size_t *at,
			      size_t *cnt)
{
	size_t nc = op->ncontact_range;
	size_t total = 0;
	for (size_t i = 0; i < nc; i++)
		total += op->t[i].nfrags;
	size_t cap = total * (nc - 1) + 1;
	size_t *pos = calloc(nc, sizeof(*pos));
	bool *has = calloc(nc, sizeof(*has));
	uint32_t *ec = malloc(cap * sizeof(*ec));
	const struct storage_mutation **em = malloc(cap * sizeof(*em));
	op->pk = malloc(cap * sizeof(*op->pk));
	size_t ne = 0;
	int rc = 0;
	op->rfp_rows = 0;
	if (!pos || !has || !ec || !em || !op->pk) {
		rc = err_set(ERR_NOMEM, "out of memory");
		goto out;
	}
	for (;;) {
		const struct storage_mutation *head = NULL;
		for (size_t i = 0; i < nc; i++)
			if (pos[i] < op->t[i].nfrags &&
			    (!head ||
			     frag_cmp(op->t[i].frags[pos[i]], head) < 0))
				head = op->t[i].frags[pos[i]];
		if (!head || (bound && frag_cmp(head, bound) > 0))
			break;
		size_t most = 0, rows = 0;
		for (size_t i = 0; i < nc; i++) {
			has[i] = pos[i] < op->t[i].nfrags &&
				 frag_cmp(op->t[i].frags[pos[i]], head) == 0;
			if (has[i]) {
				size_t k = storage_mutation_rows(
					op->t[i].frags[pos[i]]);
				rows += k;
				if (k > most)
					most = k;
			}
		}
		for (size_t i = 0; i < nc; i++)
			if (!has[i]) {
				rows += most;
				ec[ne] = (uint32_t)i;
				em[ne++] = head;
			}
		op->rfp_rows += rows;
		/* the lists do not change until every read is in
		 * (range_protected): `head` stays valid */
		for (size_t i = 0; i < nc; i++)
			if (has[i])
				pos[i]++;
	}
	/* grouped by contact, each run in token order */
	for (size_t i = 0; i < nc; i++)
		cnt[i] = 0;
	for (size_t e = 0; e < ne; e++)
		cnt[ec[e]]++;
	for (size_t i = 0, sum = 0; i < nc; i++) {
		at[i] = sum;
		sum += cnt[i];
	}
	for (size_t i = 0; i < nc; i++)
		pos[i] = at[i];
	for (size_t e = 0; e < ne; e++)
		op->pk[pos[ec[e]]++] = em[e];
	op->npk = ne;
out:
	free(pos);
	free(has);
	free(ec);
	free(em);
	return rc;
}

/* Replica filtering protection, the reads: every contact answered an
 * indexed range read with its own candidates; each partition (up to the
 * bound) that some contact returned and another did not is read from that
 * other, whose version may be newer and no longer match (or deleted): up
 * to REPL_PROTECT_BATCH partitions a message to a remote contact, one
 * store read each for the local one. 0 (op->outstanding > 0 when reads
 * were sent), 1 when the rows held passed rfp_fail_rows (nothing sent),
 * or -1 with ERR_NOMEM. */
static int range_protect(struct op *op)
{
	size_t nc = op->ncontact_range;
	size_t *at = calloc(nc, sizeof(*at)), *cnt = calloc(nc, sizeof(*cnt));
	int rc = 0;
	size_t msgs = 0;
	if (!at || !cnt) {
		rc = err_set(ERR_NOMEM, "out of memory");
		goto out;
	}
	if ((rc = range_protect_plan(op, range_bound(op), at, cnt)) != 0)
		goto out;
	uint64_t fail = op->r->o.rfp_fail_rows;
	if (fail && op->rfp_rows > fail) {
		rc = 1;
		goto out;
	}
	for (size_t i = 0; i < nc && rc == 0 && !op->replied; i++) {
		bool self = repl_is_self(op, op->t[i].ep);
		size_t step = self ? 1 : REPL_PROTECT_BATCH;
		for (size_t k = 0; k < cnt[i] && rc == 0 && !op->replied;
		     k += step) {
			size_t n = cnt[i] - k < step ? cnt[i] - k : step;
			rc = range_protect_read(op, i, at[i] + k, n);
			msgs += !self;
		}
	}
	if (op->npk && op->traced)
		repl_trace(op->r, op->trace, "Native-Transport-Requests-1",
			   op->start_us,
			   "Replica filtering protection: %zu partitions read "
			   "from the replicas that did not return them (%zu "
			   "messages to other replicas)",
			   op->npk, msgs);
out:
	free(at);
	free(cnt);
	return rc;
}

static int frag_pcmp(const void *a, const void *b)
{
	return frag_cmp(*(struct storage_mutation *const *)a,
			*(struct storage_mutation *const *)b);
}

/* Replica filtering protection, the merge: each protection read's
 * versions join its contact's list (in token order), so the merge and
 * the repairs see every contact's version of every partition. 0 or -1
 * (ERR_NOMEM). */
static int range_protected(struct op *op)
{
	size_t nc = op->ncontact_range;
	bool *grew = calloc(nc ? nc : 1, sizeof(*grew));
	if (!grew)
		return err_set(ERR_NOMEM, "out of memory");
	for (size_t j = nc; j < op->nt; j++) {
		struct target *p = &op->t[j];
		if (p->round != 2 || !p->nfrags)
			continue;
		struct target *t = &op->t[p->of];
		struct storage_mutation **f =
			realloc(t->frags, (t->nfrags + p->nfrags) * sizeof(*f));
		if (!f) {
			free(grew);
			return err_set(ERR_NOMEM, "out of memory");
		}
		t->frags = f;
		memcpy(t->frags + t->nfrags, p->frags, p->nfrags * sizeof(*f));
		t->nfrags += p->nfrags;
		free(p->frags);
		p->frags = NULL;
		p->nfrags = 0;
		grew[p->of] = true;
	}
	for (size_t i = 0; i < nc; i++)
		if (grew[i])
			qsort(op->t[i].frags, op->t[i].nfrags,
			      sizeof(*op->t[i].frags), frag_pcmp);
	free(grew);
	return 0;
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
				if (range_protect_read(op, of, first + k, 1) !=
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
		snprintf(res.msg, sizeof(res.msg),
			 "range read failed on a replica: %s",
			 error ? error : "error");
		if (error &&
		    strcmp(error, err_code_name(ERR_INDEX_NOT_AVAILABLE)) == 0)
			index_unavailable(op, t, &res);
		range_reply(op, &res, NULL, 0, op->start, false);
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
				int rc = range_protect(op);
				op->sending = false;
				if (op->replied) {
					repl_op_free(op);
					return;
				}
				if (rc == 1) {
					range_fail_cached(op);
					return;
				}
				if (rc != 0) {
					range_fail_nomem(op);
					return;
				}
				if (op->outstanding > 0)
					return; /* protection reads under way */
			}
		}
		if (op->phase == 2 && range_protected(op) != 0) {
			range_fail_nomem(op);
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
	range_reply(op, &res, out, op->rr_n, op->rr_resume, op->rr_finished);
	repl_op_free(op);
}

static ProtobufCBinaryData pb_bytes(struct slice v)
{
	return (ProtobufCBinaryData){v.len, (uint8_t *)v.ptr};
}

/* An index restriction as its message (borrowing from ix). */
static void index_to_msg(const struct repl_index_expr *ix,
			 Cassini__Replication__IndexExpr *m,
			 ProtobufCBinaryData vals[REPL_INDEX_MAX_VALUES])
{
	m->name = (char *)ix->name;
	for (size_t k = 0; k < ix->n_vals; k++)
		vals[k] = pb_bytes(ix->vals[k]);
	m->n_values = ix->n_vals;
	m->values = vals;
	m->range = ix->range;
	m->rows = ix->rows;
	if (ix->lo) {
		m->has_lo = true;
		m->lo = pb_bytes(ix->lo->value);
		m->lo_incl = ix->lo->incl;
	}
	if (ix->hi) {
		m->has_hi = true;
		m->hi = pb_bytes(ix->hi->value);
		m->hi_incl = ix->hi->incl;
	}
}

static void range_send(struct op *op, size_t i)
{
	struct repl *r = op->r;
	struct target *t = &op->t[i];
	if (repl_target_begin(op, i) != 0)
		return;
	if (repl_is_self(op, t->ep)) {
		struct local_ctx *c = repl_local_ctx_new(r, t->id);
		if (!c) {
			repl_on_answer(r, t->id, false, "out of memory", NULL,
				       NULL, 0, false);
			return;
		}
		struct storage_read_cmd cmd = op->cmd;
		if (op->traced) {
			c->traced = c->scan = true;
			memcpy(c->trace, op->trace, 16);
			c->start_us = op->start_us;
			c->start = op->start;
			c->end = op->sub_end;
			cmd.stats = &c->stats;
		}
		repl_store_range(r, op->table_id, op->start, op->sub_end, &cmd,
				 op->has_index ? &op->ix : NULL,
				 op->max_partitions, local_read_done, c);
		return;
	}
	Cassini__Replication__RangeReq msg =
		CASSINI__REPLICATION__RANGE_REQ__INIT;
	Cassini__Replication__IndexExpr ixm[2] = {
		CASSINI__REPLICATION__INDEX_EXPR__INIT,
		CASSINI__REPLICATION__INDEX_EXPR__INIT};
	ProtobufCBinaryData vals[2][REPL_INDEX_MAX_VALUES];
	if (op->has_index) {
		index_to_msg(&op->ix, &ixm[0], vals[0]);
		msg.index = &ixm[0];
		if (op->ix.and_ix) {
			index_to_msg(op->ix.and_ix, &ixm[1], vals[1]);
			msg.and_index = &ixm[1];
		}
	}
	msg.id = t->id;
	msg.deadline_us = repl_deadline_us(r, r->o.range_timeout_ms);
	msg.table_id.data = op->table_id;
	msg.table_id.len = 16;
	msg.cmd.data = op->cmd_enc.data;
	msg.cmd.len = op->cmd_enc.len;
	msg.start = op->start;
	msg.end = op->sub_end;
	msg.max_partitions = op->max_partitions;
	if (op->traced) {
		msg.trace_session.data = op->trace;
		msg.trace_session.len = 16;
	}
	repl_trace_send(op, "RANGE_REQ", t->ep, &msg.base);
	if (repl_send_packed(r, repl_ep_addr(op, t->ep), REPL_VERB_RANGE,
			     &msg.base) != 0)
		repl_target_unsent(op, i);
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
	if (read_plan(op, q->strategy, probe, false, &res) != 0) {
		if (res.outcome == REPL_UNAVAILABLE)
			r->st.unavailables++;
		repl_count_request(r, REPL_REQ_RANGE, q->cl, &res, 0);
		op->replied = true;
		repl_op_free(op);
		done(arg, &res, NULL, 0, q->start, false);
		return;
	}
	/* one contact: it may answer with the index's rows only (with more,
	 * replica filtering protection needs whole partitions) */
	op->ix.rows = op->has_index && op->nt == 1;
	op->hold++;
	op->sending = true;
	for (size_t i = 0; i < op->nt && !op->replied; i++)
		range_send(op, i);
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
	range_reply(op, &res, NULL, 0, op->start, false);
	repl_op_free(op);
}
