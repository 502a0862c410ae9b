/*
 * The replica side of the coordinator's messages: apply a mutation, read a
 * partition (data or digest), scan a token range, truncate a table, store
 * or drop a batch in
 * this node's batchlog (repl_serve); and batchlog replay: a batch whose
 * coordinator never reported it applied is written again from here, but
 * for mutations of tables truncated since it was written.
 *
 * Requests past their deadline are dropped unanswered (and counted): the
 * coordinator has given up on them already.
 */
#define LOG_MODULE "replication"
#include "replication/replication.h"

#include "common/arena.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "replication/coord_internal.h"
#include "replication/replication.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the replica side ---------------------------------------------------- */

struct serve {
	struct repl *r;
	struct inet_addr from;
	uint64_t id;
	bool digest;
	bool traced; /* the request's trace session: `trace` */
	uint8_t trace[16];
	uint64_t start_us;
	struct arena a;
	struct storage_read_cmd cmd;
	struct storage_read_stats stats; /* traced reads: cmd.stats */
	int64_t start, end;              /* a traced scan's range */
	/* an indexed range read's restriction (in `a`) */
	bool has_index;
	struct repl_index_expr ix;
	struct storage_index_bound bounds[2];
};

#define serve_trace(s, thread, ...)                                            \
	do {                                                                   \
		if ((s)->traced)                                               \
			repl_trace((s)->r, (s)->trace, thread, (s)->start_us,  \
				   __VA_ARGS__);                               \
	} while (0)

/* Takes a request's trace session (16 bytes; anything else: untraced):
 * "<verb> message received from /<coordinator>". */
static void serve_trace_begin(struct serve *s, const ProtobufCBinaryData *b,
			      const char *verb)
{
	if (b->len != 16)
		return;
	s->traced = true;
	memcpy(s->trace, b->data, 16);
	char peer[REPL_TRACE_PEER_LEN];
	repl_trace_peer(&s->from, peer);
	serve_trace(s, "Messaging-EventLoop-1", "%s message received from %s",
		    verb, peer);
}

/* "<keyspace>.<table>" of a table id, for trace events. */
static void table_name(struct repl *r, const uint8_t *id, char *out, size_t cap)
{
	const struct storage_table_meta *m =
		id ? r->store->meta(r->store_arg, id) : NULL;
	if (!m) {
		snprintf(out, cap, "an unknown table");
		return;
	}
	snprintf(out, cap, "%s.%s", m->keyspace, m->name);
	storage_table_meta_unref(m);
}

/* A traced request's answer `rsp`: "Enqueuing response to /<coordinator>"
 * and "Sending <verb> message to /<coordinator> message size N bytes". */
static void serve_trace_reply(const struct serve *s, const char *thread,
			      const char *verb, const ProtobufCMessage *rsp)
{
	if (!s || !s->traced)
		return;
	char peer[REPL_TRACE_PEER_LEN];
	repl_trace_peer(&s->from, peer);
	serve_trace(s, thread, "Enqueuing response to %s", peer);
	serve_trace(s, "Messaging-EventLoop-1",
		    "Sending %s message to %s message size %zu bytes", verb,
		    peer, protobuf_c_message_get_packed_size(rsp));
}

static bool expired(struct repl *r, int64_t deadline, uint32_t verb)
{
	if (deadline && env_wall_us(r->env) > deadline) {
		r->st.dropped[verb]++;
		return true;
	}
	return false;
}

/* `traced`: the traced request it answers, or NULL. */
static void send_mutation_rsp_traced(struct repl *r, const struct inet_addr *to,
				     uint64_t id, bool ok, const char *error,
				     const struct serve *traced)
{
	Cassini__Replication__MutationRsp rsp =
		CASSINI__REPLICATION__MUTATION_RSP__INIT;
	rsp.id = id;
	rsp.ok = ok;
	rsp.error = (char *)(error ? error : "");
	serve_trace_reply(traced, "MutationStage-1", "MUTATION_RSP", &rsp.base);
	repl_send_packed(r, to, REPL_VERB_MUTATION_RSP, &rsp.base);
}

static void send_mutation_rsp(struct repl *r, const struct inet_addr *to,
			      uint64_t id, bool ok, const char *error)
{
	send_mutation_rsp_traced(r, to, id, ok, error, NULL);
}

static void serve_apply_done(void *arg, int status, enum err_code code)
{
	struct serve *s = arg;
	send_mutation_rsp_traced(s->r, &s->from, s->id, status == 0,
				 status == 0 ? NULL : err_code_name(code), s);
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
	s->start_us = repl_now_us(r);
	arena_create(&s->a, 0);
	return s;
}

/* Whether a handed-over hint is for this node (then it is applied like
 * any mutation). */
static bool hint_is_for(struct repl *r, const uint8_t *host_id, size_t len)
{
	if (len != 16)
		return false;
	struct ring *ring = r->hooks.ring(r->hooks.arg);
	int ep = ring_endpoint_find_host_id(ring, host_id);
	return ep >= 0 &&
	       inet_addr_eq(&ring_endpoint_get(ring, (size_t)ep)->addr,
			    &r->o.self);
}

/* A hint a node leaving the ring hands over: kept for its host. */
static void take_hint(struct repl *r, const struct inet_addr *from,
		      const Cassini__Replication__MutationReq *req)
{
	if (req->hint_for.len != 16)
		send_mutation_rsp(r, from, req->id, false, "bad host id");
	else if (!r->hooks.take_hint)
		send_mutation_rsp(r, from, req->id, false,
				  "this node keeps no hints");
	else if (r->hooks.take_hint(r->hooks.arg, req->hint_for.data,
				    req->mutation.data, req->mutation.len,
				    req->hint_created_us) != 0)
		send_mutation_rsp(r, from, req->id, false, err_msg());
	else {
		r->st.hints_taken++;
		send_mutation_rsp(r, from, req->id, true, NULL);
	}
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
	if (req->hint_for.len &&
	    !hint_is_for(r, req->hint_for.data, req->hint_for.len)) {
		take_hint(r, from, req);
		cassini__replication__mutation_req__free_unpacked(req, NULL);
		return;
	}
	r->st.replica_mutations++;
	struct storage_mutation *m =
		storage_mutation_decode(req->mutation.data, req->mutation.len);
	struct serve *s = m ? serve_new(r, from, req->id) : NULL;
	if (s && m) {
		serve_trace_begin(s, &req->trace_session, "MUTATION_REQ");
		if (s->traced) {
			char tn[160];
			table_name(r, storage_mutation_table_id(m), tn,
				   sizeof(tn));
			serve_trace(s, "MutationStage-1",
				    "Appending to commitlog");
			serve_trace(s, "MutationStage-1",
				    "Adding to %s memtable", tn);
		}
	}
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

/* Fragments encoded for a message: bins[i] borrows encs[i]. */
struct encoded {
	size_t n;
	struct buf *encs;
	ProtobufCBinaryData *bins;
};

/* Encodes frags[0..n) into `e` (encoded_free frees it, whatever the
 * outcome). 0, or -1 with err set. */
static int encode_frags(struct storage_mutation *const *frags, size_t n,
			struct encoded *e)
{
	e->n = 0;
	e->encs = calloc(n ? n : 1, sizeof(*e->encs));
	e->bins = calloc(n ? n : 1, sizeof(*e->bins));
	if (!e->encs || !e->bins)
		return err_set(ERR_NOMEM, "out of memory");
	for (; e->n < n; e->n++) {
		struct buf *b = &e->encs[e->n];
		buf_init(b);
		if (storage_mutation_encode(frags[e->n], b) != 0) {
			buf_free(b);
			return -1;
		}
		e->bins[e->n] = (ProtobufCBinaryData){b->len, b->data};
	}
	return 0;
}

static void encoded_free(struct encoded *e)
{
	for (size_t i = 0; i < e->n; i++)
		buf_free(&e->encs[i]);
	free(e->encs);
	free(e->bins);
}

static void frags_free(struct storage_mutation **frags, size_t n)
{
	for (size_t i = 0; i < n; i++)
		storage_mutation_delete(frags[i]);
	free(frags);
}

/* A read's answer: frags[0]'s digest and, unless only the digest was
 * asked, its fragment, then frags[1..n) in `fragments` (a batched read's
 * further partitions, ReadReq.keys). Frees frags and s. */
static void read_answer(struct serve *s, bool ok, const char *error,
			struct storage_mutation **frags, size_t n)
{
	Cassini__Replication__ReadRsp rsp =
		CASSINI__REPLICATION__READ_RSP__INIT;
	rsp.id = s->id;
	rsp.ok = ok;
	rsp.error = (char *)error;
	uint8_t digest[16];
	struct encoded e = {0};
	if (rsp.ok) {
		storage_mutation_digest(frags[0], digest);
		rsp.digest.data = digest;
		rsp.digest.len = 16;
	}
	if (rsp.ok && !s->digest) {
		if (encode_frags(frags, n, &e) != 0) {
			rsp.ok = false;
			rsp.error = (char *)err_msg();
		} else {
			rsp.fragment = e.bins[0];
			rsp.n_fragments = n - 1;
			rsp.fragments = n > 1 ? e.bins + 1 : NULL;
		}
	}
	serve_trace_reply(s, "ReadStage-1", "READ_RSP", &rsp.base);
	repl_send_packed(s->r, &s->from, REPL_VERB_READ_RSP, &rsp.base);
	encoded_free(&e);
	frags_free(frags, n);
	arena_destroy(&s->a);
	free(s);
}

static void serve_read_done(void *arg, int status, enum err_code code,
			    struct storage_mutation **frags, size_t n, bool cut)
{
	(void)cut;
	struct serve *s = arg;
	if (s->traced && status == 0 && n == 1)
		repl_trace_read_stats(s->r, s->trace, "ReadStage-1",
				      s->start_us, &s->stats, true);
	read_answer(s, status == 0 && n == 1,
		    status == 0 ? "" : err_code_name(code), frags, n);
}

static void serve_range_done(void *arg, int status, enum err_code code,
			     struct storage_mutation **frags, size_t n,
			     bool cut)
{
	struct serve *s = arg;
	if (s->traced && status == 0)
		repl_trace_scan_stats(s->r, s->trace, s->start_us, s->start,
				      s->end, &s->stats);
	Cassini__Replication__RangeRsp rsp =
		CASSINI__REPLICATION__RANGE_RSP__INIT;
	rsp.id = s->id;
	rsp.ok = status == 0;
	rsp.error = (char *)(status == 0 ? "" : err_code_name(code));
	rsp.cut = cut;
	struct encoded e = {0};
	if (rsp.ok && encode_frags(frags, n, &e) != 0) {
		rsp.ok = false;
		rsp.error = (char *)err_msg();
	}
	if (rsp.ok) {
		rsp.n_fragments = n;
		rsp.fragments = e.bins;
	}
	serve_trace_reply(s, "ReadStage-1", "RANGE_RSP", &rsp.base);
	repl_send_packed(s->r, &s->from, REPL_VERB_RANGE_RSP, &rsp.base);
	encoded_free(&e);
	frags_free(frags, n);
	arena_destroy(&s->a);
	free(s);
}

/* A read of several partitions with one command (replica filtering
 * protection's batched reads): each the single read's store read,
 * answered together by read_answer. */
struct multi_read {
	struct serve *s;
	size_t n, left;
	struct storage_mutation **frags; /* one per key, in order */
	int status;
	enum err_code code;
	struct multi_part {
		struct multi_read *m;
		size_t i;
	} part[];
};

static void multi_left(struct multi_read *m)
{
	if (--m->left > 0)
		return;
	if (m->status == 0 && m->s->traced)
		repl_trace_read_stats(m->s->r, m->s->trace, "ReadStage-1",
				      m->s->start_us, &m->s->stats, true);
	if (m->status == 0)
		read_answer(m->s, true, "", m->frags, m->n);
	else
		read_answer(m->s, false, err_code_name(m->code), m->frags,
			    m->n);
	free(m);
}

static void multi_part_done(void *arg, int status, enum err_code code,
			    struct storage_mutation **frags, size_t n, bool cut)
{
	(void)cut;
	struct multi_part *p = arg;
	struct multi_read *m = p->m;
	if (status == 0 && n == 1) {
		m->frags[p->i] = frags[0];
		n = 0;
	} else if (m->status == 0) {
		m->status = -1;
		m->code = status == 0 ? ERR_CORRUPT : code;
	}
	frags_free(frags, n);
	multi_left(m);
}

/* Reads cmd's key and req->keys with s->cmd (or a partition's own
 * command, req->cmds: replica filtering protection's rows), then answers
 * them in one ReadRsp. */
static void serve_multi_read(struct serve *s,
			     const Cassini__Replication__ReadReq *req)
{
	struct repl *r = s->r;
	size_t n = 1 + req->n_keys;
	struct multi_read *m =
		n > REPL_PROTECT_BATCH
			? NULL
			: calloc(1, sizeof(*m) + n * sizeof(m->part[0]));
	struct storage_mutation **frags = m ? calloc(n, sizeof(*frags)) : NULL;
	if (!frags) {
		free(m);
		Cassini__Replication__ReadRsp rsp =
			CASSINI__REPLICATION__READ_RSP__INIT;
		rsp.id = s->id;
		rsp.error = (char *)(n > REPL_PROTECT_BATCH
					     ? "malformed read request"
					     : "out of memory");
		repl_send_packed(r, &s->from, REPL_VERB_READ_RSP, &rsp.base);
		arena_destroy(&s->a);
		free(s);
		return;
	}
	/* each partition's own command, decoded before any read starts */
	struct storage_read_cmd *cmds = arena_alloc(&s->a, n * sizeof(*cmds));
	bool bad = !cmds || req->n_cmds > n;
	for (size_t i = 0; !bad && i < n; i++) {
		cmds[i] = s->cmd;
		if (i < req->n_cmds && req->cmds[i].len > 0)
			bad = storage_read_cmd_decode(req->cmds[i].data,
						      req->cmds[i].len, &s->a,
						      &cmds[i]) != 0;
		/* the stats (when traced) add up on the loop, as each
		 * read's completion runs there */
		cmds[i].stats = s->cmd.stats;
	}
	if (bad) {
		free(frags);
		free(m);
		Cassini__Replication__ReadRsp rsp =
			CASSINI__REPLICATION__READ_RSP__INIT;
		rsp.id = s->id;
		rsp.error = (char *)"malformed read request";
		repl_send_packed(r, &s->from, REPL_VERB_READ_RSP, &rsp.base);
		arena_destroy(&s->a);
		free(s);
		return;
	}
	m->s = s;
	m->n = n;
	m->left = n + 1;
	m->frags = frags;
	for (size_t i = 0; i < n; i++) {
		struct storage_read_cmd cmd = cmds[i];
		cmd.key = s->cmd.key;
		cmd.key_len = s->cmd.key_len;
		if (i > 0) {
			cmd.key = req->keys[i - 1].data;
			cmd.key_len = req->keys[i - 1].len;
		}
		m->part[i] = (struct multi_part){m, i};
		r->store->read(r->store_arg, req->table_id.data, &cmd,
			       multi_part_done, &m->part[i]);
	}
	multi_left(m); /* the calls may have answered inline */
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
		repl_send_packed(r, from, REPL_VERB_READ_RSP, &rsp.base);
		if (s) {
			arena_destroy(&s->a);
			free(s);
		}
	} else {
		s->digest = req->digest;
		serve_trace_begin(s, &req->trace_session, "READ_REQ");
		if (s->traced) {
			char tn[160];
			table_name(r, req->table_id.data, tn, sizeof(tn));
			serve_trace(s, "ReadStage-1",
				    "Executing single-partition query on %s",
				    tn);
			serve_trace(s, "ReadStage-1",
				    "Acquiring sstable references");
			s->cmd.stats = &s->stats;
		}
		if ((req->n_keys > 0 || req->n_cmds > 0) && !s->digest)
			serve_multi_read(s, req);
		else
			r->store->read(r->store_arg, req->table_id.data,
				       &s->cmd, serve_read_done, s);
	}
	cassini__replication__read_req__free_unpacked(req, NULL);
}

static int copy_bytes(struct arena *a, struct slice v, struct slice *out)
{
	uint8_t *p = arena_memdup(a, v.ptr, v.len ? v.len : 1);
	if (!p)
		return err_set(ERR_NOMEM, "out of memory");
	*out = slice_make(p, v.len);
	return 0;
}

int repl_index_expr_copy(struct arena *a, const struct repl_index_expr *src,
			 struct repl_index_expr *dst,
			 struct storage_index_bound bounds[2])
{
	size_t nv = src->range ? 0 : src->n_vals;
	struct slice *vals = arena_alloc(a, (nv ? nv : 1) * sizeof(*vals));
	char *name = arena_strdup(a, src->name ? src->name : "");
	if (!vals || !name)
		return err_set(ERR_NOMEM, "out of memory");
	for (size_t i = 0; i < nv; i++)
		if (copy_bytes(a, src->vals[i], &vals[i]) != 0)
			return -1;
	const struct storage_index_bound *b[2] = {src->lo, src->hi};
	for (int k = 0; k < 2; k++) {
		if (!src->range || !b[k])
			continue;
		bounds[k].incl = b[k]->incl;
		if (copy_bytes(a, b[k]->value, &bounds[k].value) != 0)
			return -1;
	}
	struct repl_index_expr *and_ix = NULL;
	if (src->and_ix) {
		and_ix = arena_alloc(a, sizeof(*and_ix));
		struct storage_index_bound *b2 =
			arena_alloc(a, 2 * sizeof(*b2));
		struct repl_index_expr second = *src->and_ix;
		second.and_ix = NULL;
		if (!and_ix || !b2)
			return err_set(ERR_NOMEM, "out of memory");
		if (repl_index_expr_copy(a, &second, and_ix, b2) != 0)
			return -1;
	}
	*dst = (struct repl_index_expr){
		.name = name,
		.vals = vals,
		.n_vals = nv,
		.range = src->range,
		.lo = src->range && src->lo ? &bounds[0] : NULL,
		.hi = src->range && src->hi ? &bounds[1] : NULL,
		.and_ix = and_ix,
		.rows = src->rows};
	return 0;
}

void repl_store_range(struct repl *r, const uint8_t table_id[16], int64_t start,
		      int64_t end, const struct storage_read_cmd *cmd,
		      const struct repl_index_expr *ix, uint32_t max,
		      repl_store_read_fn done, void *arg)
{
	if (ix && r->store->index_scan)
		r->store->index_scan(r->store_arg, table_id, start, end, cmd,
				     ix, max, done, arg);
	else
		r->store->scan(r->store_arg, table_id, start, end, cmd, max,
			       done, arg);
}

/* A message's index restriction as an expression borrowing from it and
 * from vals / b. 1 for none (no name or values), 0, -1 for a malformed
 * one (too many values, values with a range). */
static int index_from_msg(const Cassini__Replication__IndexExpr *m,
			  struct slice vals[REPL_INDEX_MAX_VALUES],
			  struct storage_index_bound b[2],
			  struct repl_index_expr *out)
{
	if (!m || !m->name || !*m->name || (!m->range && m->n_values == 0))
		return 1;
	if (m->n_values > REPL_INDEX_MAX_VALUES || (m->range && m->n_values))
		return -1;
	for (size_t i = 0; i < m->n_values; i++)
		vals[i] = slice_make(m->values[i].data, m->values[i].len);
	b[0] = (struct storage_index_bound){slice_make(m->lo.data, m->lo.len),
					    m->lo_incl};
	b[1] = (struct storage_index_bound){slice_make(m->hi.data, m->hi.len),
					    m->hi_incl};
	*out = (struct repl_index_expr){.name = m->name,
					.vals = vals,
					.n_vals = m->n_values,
					.range = m->range,
					.lo = m->has_lo ? &b[0] : NULL,
					.hi = m->has_hi ? &b[1] : NULL,
					.rows = m->rows};
	return 0;
}

/* Takes a range request's index restrictions into `s` (copied into its
 * arena): `index`, and `and_index` ANDed with it. -1 for a malformed
 * one; one without a name or values is no restriction. */
static int serve_index(struct serve *s,
		       const Cassini__Replication__IndexExpr *m,
		       const Cassini__Replication__IndexExpr *and_m)
{
	struct slice vals[2][REPL_INDEX_MAX_VALUES];
	struct storage_index_bound b[2][2];
	struct repl_index_expr in, second;
	int rc = index_from_msg(m, vals[0], b[0], &in);
	if (rc != 0)
		return rc > 0 ? 0 : -1;
	rc = index_from_msg(and_m, vals[1], b[1], &second);
	if (rc < 0)
		return -1;
	if (rc == 0)
		in.and_ix = &second;
	if (repl_index_expr_copy(&s->a, &in, &s->ix, s->bounds) != 0)
		return -1;
	s->has_index = true;
	return 0;
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
				    &s->cmd) != 0 ||
	    serve_index(s, req->index, req->and_index) != 0) {
		Cassini__Replication__RangeRsp rsp =
			CASSINI__REPLICATION__RANGE_RSP__INIT;
		rsp.id = req->id;
		rsp.error = (char *)"malformed range request";
		repl_send_packed(r, from, REPL_VERB_RANGE_RSP, &rsp.base);
		if (s) {
			arena_destroy(&s->a);
			free(s);
		}
	} else {
		uint32_t max = req->max_partitions ? req->max_partitions : 1000;
		serve_trace_begin(s, &req->trace_session, "RANGE_REQ");
		if (s->traced) {
			s->cmd.stats = &s->stats;
			s->start = req->start;
			s->end = req->end;
		}
		if (max > 10000)
			max = 10000;
		repl_store_range(r, req->table_id.data, req->start, req->end,
				 &s->cmd, s->has_index ? &s->ix : NULL, max,
				 serve_range_done, s);
	}
	cassini__replication__range_req__free_unpacked(req, NULL);
}

static void serve_truncate(struct repl *r, const struct inet_addr *from,
			   const uint8_t *msg, size_t len)
{
	Cassini__Replication__TruncateReq *req =
		cassini__replication__truncate_req__unpack(NULL, len, msg);
	if (!req) {
		LOG_WARN("dropping a malformed truncate request");
		return;
	}
	if (expired(r, req->deadline_us, REPL_VERB_TRUNCATE)) {
		cassini__replication__truncate_req__free_unpacked(req, NULL);
		return;
	}
	r->st.replica_truncates++;
	struct serve *s = serve_new(r, from, req->id);
	if (!s || req->table_id.len != 16 || !r->store->truncate) {
		send_mutation_rsp(r, from, req->id, false,
				  !s ? "out of memory"
				  : req->table_id.len != 16
					  ? "malformed truncate request"
					  : "this node cannot truncate");
		if (s) {
			arena_destroy(&s->a);
			free(s);
		}
	} else {
		LOG_INFO("truncating a table for a coordinator");
		r->store->truncate(r->store_arg, req->table_id.data,
				   serve_apply_done, s);
	}
	cassini__replication__truncate_req__free_unpacked(req, NULL);
}

/* A batch kept for a coordinator: answered once its file is in place. */
struct bl_store {
	struct repl *r;
	struct inet_addr from;
	uint64_t id;
};

static void batch_stored(void *arg, int status, const char *why)
{
	struct bl_store *s = arg;
	s->r->st.batches_stored += status == 0;
	Cassini__Replication__MutationRsp rsp =
		CASSINI__REPLICATION__MUTATION_RSP__INIT;
	rsp.id = s->id;
	rsp.ok = status == 0;
	rsp.error = (char *)(why ? why : "");
	repl_send_packed(s->r, &s->from, REPL_VERB_BATCH_STORE_RSP, &rsp.base);
	free(s);
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
	struct bl_store *s = sl ? malloc(sizeof(*s)) : NULL;
	if (!s) {
		/* never answered: the coordinator's timeout reports it */
		LOG_WARN("dropping a batchlog request: out of memory");
	} else if (!r->bl || req->batch_id.len != 16) {
		*s = (struct bl_store){.r = r, .from = *from, .id = req->id};
		batch_stored(s, -1, "this node keeps no batchlog");
	} else {
		*s = (struct bl_store){.r = r, .from = *from, .id = req->id};
		for (size_t i = 0; i < req->n_mutations; i++)
			sl[i] = slice_make(req->mutations[i].data,
					   req->mutations[i].len);
		batchlog_store(r->bl, req->batch_id.data, req->created_us, sl,
			       req->n_mutations, batch_stored, s);
	}
	free(sl);
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

bool repl_serve(struct repl *r, const struct inet_addr *from, uint32_t verb,
		const uint8_t *msg, size_t len)
{
	switch (verb) {
	case REPL_VERB_MUTATION:
		serve_mutation(r, from, msg, len);
		return true;
	case REPL_VERB_READ:
		serve_read(r, from, msg, len);
		return true;
	case REPL_VERB_RANGE:
		serve_range(r, from, msg, len);
		return true;
	case REPL_VERB_BATCH_STORE:
		serve_batch_store(r, from, msg, len);
		return true;
	case REPL_VERB_BATCH_REMOVE:
		serve_batch_remove(r, msg, len);
		return true;
	case REPL_VERB_TRUNCATE:
		serve_truncate(r, from, msg, len);
		return true;
	default:
		return false;
	}
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

static void replay_read(void *arg, int status, bool corrupt,
			const struct slice *sl, size_t n, int64_t created);

/* Replays one due batch (its coordinator never said it was applied): its
 * mutations are written at ONE, hints covering replicas that miss it. The
 * file is read off the loop first. */
void repl_replay_tick(void *arg)
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
	struct replay *p = malloc(sizeof(*p));
	if (!p)
		return;
	*p = (struct replay){.r = r};
	memcpy(p->id, id[0], 16);
	r->bl_replaying = true;
	batchlog_read(r->bl, id[0], replay_read, p);
}

static void replay_read(void *arg, int status, bool corrupt,
			const struct slice *sl, size_t n, int64_t created)
{
	struct replay *p = arg;
	struct repl *r = p->r;
	if (status != 0) {
		if (corrupt)
			batchlog_remove(r->bl, p->id);
		r->bl_replaying = false;
		free(p);
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
		/* A truncate after the batch was written removed what
		 * it wrote: replaying it would bring that back (Cassandra's
		 * BatchlogManager skips such tables too). */
		int64_t trunc = st && r->store->truncated_at
					? r->store->truncated_at(
						  r->store_arg,
						  storage_mutation_table_id(m))
					: 0;
		if (!st || (trunc && created <= trunc)) {
			/* damaged, its table is gone or was truncated */
			storage_mutation_delete(m);
			continue;
		}
		ms[k] = m;
		rm[k] = (struct repl_mutation){m, st};
		k++;
	}
	if (!rm || !ms) {
		r->bl_replaying = false;
		free(p);
	} else if (k == 0) {
		batchlog_remove(r->bl, p->id); /* nothing left to apply */
		r->bl_replaying = false;
		free(p);
	} else {
		repl_write(r, rm, k, REPL_CL_ONE, REPL_WRITE_UNLOGGED_BATCH,
			   replay_done, p);
	}
	for (size_t i = 0; ms && i < k; i++)
		storage_mutation_delete(ms[i]);
	free(ms);
	free(rm);
}
