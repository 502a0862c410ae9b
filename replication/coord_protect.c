/*
 * Replica filtering protection of an indexed or filtered range step at a
 * CL above ONE: every partition a contact returned and another did not is
 * read from that other (batched, REPL_PROTECT_BATCH keys a message), the
 * rows held counted against replica_filtering_protection's thresholds.
 * Cassandra's ReplicaFilteringProtection; docs/indexes.md.
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

/* The rows held for protection passed rfp_fail_rows: the step fails
 * as Cassandra's query does (OverloadedException; the node words the
 * message with the query). */
void repl_protect_fail_cached(struct op *op)
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
	repl_range_reply(op, &res, NULL, 0, op->start, false);
	repl_op_free(op);
}

/* A protection read for contact `i` of the partitions op->pk[first ..
 * first + n): a new target after the contacts, sent now as one message
 * (cmd's key the first, ReadReq.keys the rest); the local replica reads
 * its one partition (n is 1 then) through the store. 0, or -1 with
 * ERR_NOMEM. */
int repl_protect_read(struct op *op, size_t i, size_t first, size_t n)
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
	const struct protect_key *pk = op->pk + first;
	struct slice key = storage_mutation_key(pk[0].p);
	struct storage_read_cmd cmd = op->cmd;
	cmd.key = key.ptr;
	cmd.key_len = key.len;
	cmd.stats = NULL;
	cmd.pending_repair = NULL;
	r->st.protection_reads += n;
	if (repl_target_begin(op, j) != 0)
		return -1;
	/* the rows' commands: single-row slices (their values in `a`) */
	struct arena a;
	arena_create(&a, 0);
	if (repl_is_self(op, op->t[j].ep)) {
		struct storage_read_cmd rc = cmd;
		struct local_ctx *c = repl_local_ctx_new(r, op->t[j].id);
		if (!c || (pk[0].nrows &&
			   storage_read_cmd_rows(op->meta, &cmd, pk[0].rows,
						 pk[0].nrows, &a, &rc) != 0)) {
			free(c);
			arena_destroy(&a);
			repl_on_answer(r, op->t[j].id, false, "out of memory",
				       NULL, NULL, 0, false);
			return 0;
		}
		if (rc.slices && rc.slice_count == 0)
			rc = cmd; /* none in the read's slices: whole */
		/* the store copies the command */
		r->store->read(r->store_arg, op->table_id, &rc,
			       repl_local_read_done, c);
		arena_destroy(&a);
		return 0;
	}
	struct buf enc;
	buf_init(&enc);
	ProtobufCBinaryData keys[REPL_PROTECT_BATCH];
	ProtobufCBinaryData cmds[REPL_PROTECT_BATCH];
	struct buf cenc[REPL_PROTECT_BATCH];
	size_t ncmds = 0; /* rows' commands: up to the last with rows */
	int rc = n > REPL_PROTECT_BATCH ? -1
					: storage_read_cmd_encode(&cmd, &enc);
	for (size_t k = 0; rc == 0 && k < n; k++) {
		buf_init(&cenc[k]);
		cmds[k] = (ProtobufCBinaryData){0, NULL};
		if (k > 0) {
			struct slice kk = storage_mutation_key(pk[k].p);
			keys[k - 1] = (ProtobufCBinaryData){kk.len,
							    (uint8_t *)kk.ptr};
		}
		if (!pk[k].nrows)
			continue;
		struct storage_read_cmd rcmd;
		struct slice kk = storage_mutation_key(pk[k].p);
		struct storage_read_cmd base = cmd;
		base.key = kk.ptr;
		base.key_len = kk.len;
		rc = storage_read_cmd_rows(op->meta, &base, pk[k].rows,
					   pk[k].nrows, &a, &rcmd);
		/* (rows outside the read's slices: none came from one) */
		if (rc == 0 && rcmd.slice_count == 0)
			continue;
		if (rc == 0)
			rc = storage_read_cmd_encode(&rcmd, &cenc[k]);
		cmds[k] = (ProtobufCBinaryData){cenc[k].len, cenc[k].data};
		ncmds = k + 1;
	}
	size_t nenc = n > REPL_PROTECT_BATCH ? 0 : n;
	if (rc != 0) {
		buf_free(&enc);
		for (size_t k = 0; k < nenc; k++)
			buf_free(&cenc[k]);
		arena_destroy(&a);
		repl_target_unsent(op, j);
		return err_set(ERR_NOMEM, "out of memory");
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
	msg.n_cmds = ncmds;
	msg.cmds = ncmds ? cmds : NULL;
	r->st.protection_messages++;
	if (op->traced) {
		msg.trace_session.data = op->trace;
		msg.trace_session.len = 16;
		char who[REPL_TRACE_PEER_LEN];
		repl_trace_peer(repl_ep_addr(op, op->t[j].ep), who);
		size_t nrows = 0;
		for (size_t k = 0; k < n; k++)
			nrows += pk[k].nrows;
		if (ncmds)
			repl_trace(r, op->trace, "Native-Transport-Requests-1",
				   op->start_us,
				   "Requesting %zu partitions (%zu rows by "
				   "primary key) from %s for replica "
				   "filtering protection",
				   n, nrows, who);
		else
			repl_trace(r, op->trace, "Native-Transport-Requests-1",
				   op->start_us,
				   "Requesting %zu partitions from %s for "
				   "replica filtering protection",
				   n, who);
	}
	/* single-partition reads, as Cassandra's protection fetches, of up
	 * to REPL_PROTECT_BATCH partitions a message */
	repl_trace_send(op, "READ_REQ", op->t[j].ep, &msg.base);
	if (repl_send_packed(r, repl_ep_addr(op, op->t[j].ep), REPL_VERB_READ,
			     &msg.base) != 0)
		repl_target_unsent(op, j); /* the timeout answers */
	buf_free(&enc);
	for (size_t k = 0; k < nenc; k++)
		buf_free(&cenc[k]);
	arena_destroy(&a);
	return 0;
}

static int ck_pcmp(const void *a, const void *b)
{
	return slice_cmp(*(const struct slice *)a, *(const struct slice *)b);
}

/* The rows of a partition's versions: each contact's row clusterings
 * (sorted by bytes: canonical fragments give a row the same bytes on
 * every replica) and their union. */
struct part_rows {
	struct slice *ck; /* every contact's, runs at off[i], n[i] long */
	size_t *off, *n;
	struct slice *all; /* the union, nall long */
	size_t nall, cap;
};

static int part_rows_fill(struct part_rows *pr, struct op *op,
			  const size_t *pos, const bool *has)
{
	size_t nc = op->ncontact_range, total = 0;
	for (size_t i = 0; i < nc; i++) {
		pr->n[i] = has[i] ? storage_fragment_row_cks(
					    op->t[i].frags[pos[i]], NULL, 0)
				  : 0;
		total += pr->n[i];
	}
	if (total > pr->cap) {
		struct slice *ck = realloc(pr->ck, total * sizeof(*ck));
		struct slice *all = realloc(pr->all, total * sizeof(*all));
		if (ck)
			pr->ck = ck;
		if (all)
			pr->all = all;
		if (!ck || !all)
			return err_set(ERR_NOMEM, "out of memory");
		pr->cap = total;
	}
	size_t at = 0;
	for (size_t i = 0; i < nc; i++) {
		pr->off[i] = at;
		if (pr->n[i]) {
			storage_fragment_row_cks(op->t[i].frags[pos[i]],
						 pr->ck + at, pr->n[i]);
			qsort(pr->ck + at, pr->n[i], sizeof(*pr->ck), ck_pcmp);
		}
		at += pr->n[i];
	}
	if (total) {
		memcpy(pr->all, pr->ck, total * sizeof(*pr->all));
		qsort(pr->all, total, sizeof(*pr->all), ck_pcmp);
	}
	pr->nall = 0;
	for (size_t k = 0; k < total; k++)
		if (!pr->nall || !slice_eq(pr->all[pr->nall - 1], pr->all[k]))
			pr->all[pr->nall++] = pr->all[k];
	return 0;
}

/* The rows of the union contact i did not return (its run and the union
 * are sorted), into `out` (room for nall); how many. */
static size_t part_rows_missing(const struct part_rows *pr, size_t i,
				struct slice *out)
{
	const struct slice *mine = pr->ck + pr->off[i];
	size_t n = 0, k = 0;
	for (size_t u = 0; u < pr->nall; u++) {
		while (k < pr->n[i] && slice_cmp(mine[k], pr->all[u]) < 0)
			k++;
		if (k < pr->n[i] && slice_eq(mine[k], pr->all[u]))
			continue;
		out[n++] = pr->all[u];
	}
	return n;
}

/* Adds to op->pk, at contact i's run, partition `head` with the rows
 * rows[0..n) (copied into op->a), or whole: too many rows to name, or
 * none (the others' versions hold only the static row or deletions). */
static int plan_add(struct op *op, size_t at,
		    const struct storage_mutation *head,
		    const struct slice *rows, size_t n)
{
	struct protect_key *k = &op->pk[at];
	*k = (struct protect_key){.p = head};
	/* a table without clustering columns: the partition is its row */
	if (n == 0 || n > SAI_ROWS_MAX || op->meta->ck_count == 0)
		return 0;
	struct slice *v = arena_alloc(&op->a, n * sizeof(*v));
	if (!v)
		return err_set(ERR_NOMEM, "out of memory");
	memcpy(v, rows, n * sizeof(*v));
	k->rows = v;
	k->nrows = n;
	return 0;
}

/* The rows an indexed step holds for protection (Cassandra's cached
 * rows): every contact's version of every partition up to `bound`, and
 * what protection brings it: the rows of a partition others returned and
 * it did not (a partition it lacks counted at least as the largest
 * version another returned). Fills op->pk with what to read, a run for
 * each contact (in token order; a partition's missing rows together, or
 * the partition whole), and `at` / `cnt` with each contact's run. Rows
 * every contact returned are read from none. 0, or -1 with ERR_NOMEM. */
static int range_protect_plan(struct op *op,
			      const struct storage_mutation *bound, size_t *at,
			      size_t *cnt)
{
	size_t nc = op->ncontact_range;
	size_t total = 0;
	for (size_t i = 0; i < nc; i++)
		total += op->t[i].nfrags;
	/* a contact lacks at most what the others returned: its run's
	 * room in op->pk */
	size_t room = total ? total : 1;
	size_t *pos = calloc(nc, sizeof(*pos));
	bool *has = calloc(nc, sizeof(*has));
	struct part_rows pr = {.off = calloc(nc, sizeof(size_t)),
			       .n = calloc(nc, sizeof(size_t))};
	struct slice *miss = NULL;
	size_t miss_cap = 0;
	op->pk = malloc(nc * room * sizeof(*op->pk));
	int rc = 0;
	op->rfp_rows = 0;
	for (size_t i = 0; i < nc; i++) {
		at[i] = i * room;
		cnt[i] = 0;
	}
	if (!pos || !has || !op->pk || !pr.off || !pr.n) {
		rc = err_set(ERR_NOMEM, "out of memory");
		goto out;
	}
	while (rc == 0) {
		const struct storage_mutation *head = NULL;
		for (size_t i = 0; i < nc; i++)
			if (pos[i] < op->t[i].nfrags &&
			    (!head ||
			     repl_frag_cmp(op->t[i].frags[pos[i]], head) < 0))
				head = op->t[i].frags[pos[i]];
		if (!head || (bound && repl_frag_cmp(head, bound) > 0))
			break;
		size_t most = 0, rows = 0;
		for (size_t i = 0; i < nc; i++) {
			has[i] = pos[i] < op->t[i].nfrags &&
				 repl_frag_cmp(op->t[i].frags[pos[i]], head) ==
					 0;
			if (has[i]) {
				size_t k = storage_mutation_rows(
					op->t[i].frags[pos[i]]);
				rows += k;
				if (k > most)
					most = k;
			}
		}
		if ((rc = part_rows_fill(&pr, op, pos, has)) != 0)
			break;
		if (pr.nall > miss_cap) {
			free(miss);
			miss_cap = pr.nall;
			if (!(miss = malloc(miss_cap * sizeof(*miss)))) {
				rc = err_set(ERR_NOMEM, "out of memory");
				break;
			}
		}
		for (size_t i = 0; i < nc && rc == 0; i++) {
			if (!has[i]) {
				/* the rows the others returned (with the
				 * static row and the deletions over them) */
				rows += most > pr.nall ? most : pr.nall;
				rc = plan_add(op, at[i] + cnt[i]++, head,
					      pr.all, pr.nall);
				continue;
			}
			size_t nm = part_rows_missing(&pr, i, miss);
			rows += nm;
			if (nm)
				rc = plan_add(op, at[i] + cnt[i]++, head, miss,
					      nm);
		}
		op->rfp_rows += rows;
		/* the lists do not change until every read is in
		 * (repl_protect_merge): `head` stays valid */
		for (size_t i = 0; i < nc; i++)
			if (has[i])
				pos[i]++;
	}
out:
	free(pos);
	free(has);
	free(pr.ck);
	free(pr.all);
	free(pr.off);
	free(pr.n);
	free(miss);
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
int repl_protect(struct op *op)
{
	size_t nc = op->ncontact_range;
	size_t *at = calloc(nc, sizeof(*at)), *cnt = calloc(nc, sizeof(*cnt));
	int rc = 0;
	size_t msgs = 0, reads = 0;
	if (!at || !cnt) {
		rc = err_set(ERR_NOMEM, "out of memory");
		goto out;
	}
	if ((rc = range_protect_plan(op, repl_range_bound(op), at, cnt)) != 0)
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
			rc = repl_protect_read(op, i, at[i] + k, n);
			msgs += !self;
			reads += n;
		}
	}
	if (reads && op->traced)
		repl_trace(op->r, op->trace, "Native-Transport-Requests-1",
			   op->start_us,
			   "Replica filtering protection: %zu partitions read "
			   "from the replicas that did not return them or "
			   "some of their rows (%zu messages to other "
			   "replicas)",
			   reads, msgs);
out:
	free(at);
	free(cnt);
	return rc;
}

static int frag_pcmp(const void *a, const void *b)
{
	return repl_frag_cmp(*(struct storage_mutation *const *)a,
			     *(struct storage_mutation *const *)b);
}

/* Replica filtering protection, the merge: each protection read's
 * versions join its contact's list (in token order), so the merge and
 * the repairs see every contact's version of every partition. 0 or -1
 * (ERR_NOMEM). */
int repl_protect_merge(struct op *op)
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
	int rc = 0;
	for (size_t i = 0; i < nc && rc == 0; i++) {
		if (!grew[i])
			continue;
		struct target *t = &op->t[i];
		qsort(t->frags, t->nfrags, sizeof(*t->frags), frag_pcmp);
		/* a partition the contact returned some rows of and was
		 * asked the others' rows of: one version of it */
		size_t w = 0;
		for (size_t k = 0; k < t->nfrags;) {
			size_t e = k + 1;
			while (e < t->nfrags &&
			       repl_frag_cmp(t->frags[e], t->frags[k]) == 0)
				e++;
			struct storage_mutation *m = t->frags[k];
			if (e - k > 1) {
				m = storage_fragment_merge(op->meta,
							   t->frags + k, e - k);
				if (!m) {
					rc = err_set(ERR_NOMEM,
						     "out of memory");
					m = t->frags[k++];
					/* the rest stay as they are */
					t->frags[w++] = m;
					while (k < t->nfrags)
						t->frags[w++] = t->frags[k++];
					break;
				}
				for (size_t x = k; x < e; x++)
					storage_mutation_delete(t->frags[x]);
			}
			t->frags[w++] = m;
			k = e;
		}
		t->nfrags = w;
	}
	free(grew);
	return rc;
}
