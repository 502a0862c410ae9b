/*
 * The coordinator's read messages: a single-partition READ (data or
 * digest) and a RANGE request with its index expression, packed and sent
 * to a replica, or served by the local store without a message.
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

void repl_read_send(struct op *op, size_t i, bool digest)
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
			       repl_local_read_done, c);
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

void repl_range_send(struct op *op, size_t i)
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
				 op->max_partitions, repl_local_read_done, c);
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
