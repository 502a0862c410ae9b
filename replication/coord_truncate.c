/*
 * Truncates (repl_truncate), as Cassandra's StorageProxy.truncateBlocking:
 * a truncate goes to every endpoint of the ring, so it is refused
 * (Unavailable at ALL) unless every one is alive, and it succeeds only when
 * every one has acknowledged. The first failure, or truncate_timeout_ms
 * without every answer, ends it with REPL_TRUNCATE_ERROR. There is no
 * undo: replicas that truncated before an error stay truncated (so does
 * Cassandra); the client retries.
 *
 * The local node is reached through the store's truncate op with its own
 * request id, like any other replica; answers come back as MutationRsp.
 */
#define LOG_MODULE "replication"
#include "replication/replication.h"

#include "common/err.h"
#include "common/log.h"
#include "replication/coord_internal.h"
#include "replication/replication.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void truncate_reply(struct op *op, const struct repl_result *res)
{
	if (op->replied)
		return;
	repl_op_answered(op);
	op->wdone(op->arg, res);
}

static int truncate_acks(const struct op *op)
{
	int n = 0;
	for (size_t i = 0; i < op->nt; i++)
		n += op->t[i].answered && op->t[i].ok;
	return n;
}

static void truncate_fail(struct op *op, const struct target *t,
			  const char *error)
{
	struct repl_result res;
	repl_result_init(&res, REPL_TRUNCATE_ERROR, REPL_CL_ALL);
	res.required = (int)op->nt;
	res.alive = truncate_acks(op);
	char a[INET_ADDR_STRLEN];
	snprintf(res.msg, sizeof(res.msg), "Error during truncate on %s: %s",
		 inet_addr_format(repl_ep_addr(op, t->ep), a, sizeof(a)),
		 error && *error ? error : "error");
	truncate_reply(op, &res);
}

void repl_truncate_answer(struct op *op, struct target *t, bool ok,
			  const char *error)
{
	t->ok = ok;
	if (!ok) {
		truncate_fail(op, t, error);
	} else if (!op->sending && truncate_acks(op) == (int)op->nt) {
		struct repl_result res;
		repl_result_init(&res, REPL_OK, REPL_CL_ALL);
		truncate_reply(op, &res);
	}
	if (op->replied && (op->outstanding == 0 || !ok))
		repl_op_free(op);
}

void repl_truncate_timeout(struct op *op)
{
	if (!op->replied) {
		struct repl_result res;
		repl_result_init(&res, REPL_TRUNCATE_ERROR, REPL_CL_ALL);
		res.required = (int)op->nt;
		res.alive = truncate_acks(op);
		snprintf(res.msg, sizeof(res.msg),
			 "Truncate timed out - received only %d responses",
			 res.alive);
		truncate_reply(op, &res);
	}
	repl_op_free(op);
}

/* Sends the truncate to target `i`; a failure to send is its answer. */
static void truncate_send(struct op *op, size_t i)
{
	struct repl *r = op->r;
	struct target *t = &op->t[i];
	if (repl_target_begin(op, i) != 0) {
		truncate_fail(op, t, "out of memory");
		return;
	}
	if (repl_is_self(op, t->ep)) {
		struct local_ctx *c = repl_local_ctx_new(r, t->id);
		if (!c || !r->store->truncate) {
			free(c);
			repl_on_answer(r, t->id, false,
				       c ? "this node cannot truncate"
					 : "out of memory",
				       NULL, NULL, 0, false);
			return;
		}
		r->store->truncate(r->store_arg, op->table_id,
				   repl_local_apply_done, c);
		return;
	}
	Cassini__Replication__TruncateReq msg =
		CASSINI__REPLICATION__TRUNCATE_REQ__INIT;
	msg.id = t->id;
	msg.deadline_us = repl_deadline_us(r, r->o.truncate_timeout_ms);
	msg.table_id.data = op->table_id;
	msg.table_id.len = 16;
	if (repl_send_packed(r, repl_ep_addr(op, t->ep), REPL_VERB_TRUNCATE,
			     &msg.base) != 0) {
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "cannot send: %s", err_msg());
		repl_on_answer(r, t->id, false, why, NULL, NULL, 0, false);
	}
}

void repl_truncate(struct repl *r, const uint8_t table_id[16],
		   repl_write_done_fn done, void *arg)
{
	struct repl_result res;
	r->st.truncates++;
	if (repl_overloaded(r, &res, REPL_CL_ALL)) {
		done(arg, &res);
		return;
	}
	struct ring *ring = r->hooks.ring(r->hooks.arg);
	size_t n = ring ? ring_endpoint_count(ring) : 0;
	int self = ring ? ring_local_endpoint(ring) : -1;
	int alive = 0;
	for (size_t i = 0; i < n; i++)
		alive += (int)i == self ||
			 r->hooks.is_alive(r->hooks.arg,
					   &ring_endpoint_get(ring, i)->addr);
	if (n == 0 || self < 0 || alive < (int)n) {
		r->st.unavailables++;
		repl_result_init(&res, REPL_UNAVAILABLE, REPL_CL_ALL);
		res.required = n ? (int)n : 1;
		res.alive = alive;
		snprintf(res.msg, sizeof(res.msg),
			 "Cannot achieve consistency level ALL: truncate "
			 "needs every node alive (%d of %zu are)",
			 alive, n);
		done(arg, &res);
		return;
	}
	struct op *op = repl_op_new(r, OP_TRUNCATE, REPL_CL_ALL,
				    r->o.truncate_timeout_ms, arg);
	if (!op || !(op->t = calloc(n, sizeof(*op->t)))) {
		repl_result_init(&res, REPL_TRUNCATE_ERROR, REPL_CL_ALL);
		snprintf(res.msg, sizeof(res.msg), "out of memory");
		if (op) {
			op->replied = true;
			repl_op_free(op);
		}
		done(arg, &res);
		return;
	}
	op->wdone = done;
	op->ring = ring_ref(ring);
	memcpy(op->table_id, table_id, 16);
	op->nt = n;
	for (size_t i = 0; i < n; i++)
		op->t[i].ep = (uint32_t)i;
	/* Local answers may come inline: the op stays until the loop ends,
	 * and success is only decided after every target was tried. */
	op->hold++;
	op->sending = true;
	for (size_t i = 0; i < n && !op->replied; i++)
		truncate_send(op, i);
	op->sending = false;
	if (!op->replied && truncate_acks(op) == (int)op->nt) {
		repl_result_init(&res, REPL_OK, REPL_CL_ALL);
		truncate_reply(op, &res);
	}
	if (op->replied && op->outstanding == 0)
		repl_op_free(op);
	repl_op_unhold(op);
}
