/*
 * The participant side of repair: VALIDATE, ROWS, FETCH and APPLY
 * requests, each answered from one job and forgotten.
 *
 * A job scans the pieces of its ranges one after another through the
 * store. The per-fragment callbacks may run on a worker thread: they touch
 * only the job (its tree, row array, arena and output buffer) and call
 * pure storage and merkle functions. Completions run on the loop, where
 * the answer is encoded and sent.
 */
#include "repair/repair_internal.h"

#include "common/arena.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job {
	struct repair *r;
	struct inet_addr from;
	uint32_t verb;
	uint64_t session;
	uint32_t task;
	uint8_t table_id[16];
	const struct storage_table_meta *meta;
	struct merkle_range *pieces;
	size_t npieces, next;
	bool failed;
	char error[256];
	int64_t gc_before; /* tombstones older than this are left out */
	/* VALIDATE */
	struct merkle_tree *tree;
	uint64_t partitions;
	int64_t token;
	int fold_depth;      /* the depth the answer's tree is folded to */
	struct buf tree_enc; /* ... and its encoding (built off the loop) */
	/* ROWS: rows found; FETCH: rows wanted, sorted by (key, id) */
	struct arena arena;
	struct repair_row *rows;
	size_t nrows, cap;
	struct slice key; /* ROWS: the current fragment's key, in arena */
	/* FETCH: encoded selections back to back, `ends` their ends */
	struct buf out;
	size_t *ends;
	size_t nends, ends_cap;
	/* APPLY */
	size_t pending;
};

static void job_free(struct job *j)
{
	struct repair *r = j->r;
	merkle_delete(j->tree);
	buf_free(&j->tree_enc);
	arena_destroy(&j->arena);
	free(j->rows);
	free(j->pieces);
	buf_free(&j->out);
	free(j->ends);
	free(j);
	repair_job_release(r);
}

static void job_fail(struct job *j, const char *what)
{
	if (j->failed)
		return;
	j->failed = true;
	snprintf(j->error, sizeof(j->error), "%s: %s", what, err_msg());
}

static uint32_t response_verb(uint32_t verb)
{
	return verb + 1;
}

/* Sends the answer and frees the job. */
static void job_answer(struct job *j, struct repair_msg *m)
{
	m->session = j->session;
	m->task = j->task;
	m->ok = !j->failed;
	if (j->failed)
		snprintf(m->error, sizeof(m->error), "%s", j->error);
	struct buf b;
	buf_init(&b);
	if (repair_msg_pack_response(m, &b) == 0)
		repair_send(j->r, &j->from, response_verb(j->verb), &b);
	buf_free(&b);
	job_free(j);
}

static void answer_error(struct job *j)
{
	struct repair_msg m = {0};
	job_answer(j, &m);
}

/* ---- per-fragment work (any thread) -------------------------------------- */

static int validate_row(void *arg, struct slice id, const uint8_t dg[16])
{
	(void)id;
	struct job *j = arg;
	return merkle_add(j->tree, j->token, dg);
}

static int validate_each(void *arg, const struct storage_mutation *f)
{
	struct job *j = arg;
	j->token = storage_mutation_token(f);
	j->partitions++;
	return storage_fragment_rows(f, validate_row, j);
}

static int rows_row(void *arg, struct slice id, const uint8_t dg[16])
{
	struct job *j = arg;
	if (j->nrows == REPAIR_MAX_ROWS)
		return err_set(ERR_NOMEM,
			       "more than %u rows in mismatching "
			       "ranges",
			       REPAIR_MAX_ROWS);
	if (j->nrows == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 256;
		struct repair_row *v = realloc(j->rows, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "rows");
		j->rows = v;
		j->cap = cap;
	}
	void *idc = arena_memdup(&j->arena, id.ptr, id.len);
	if (!idc)
		return err_set(ERR_NOMEM, "row id");
	struct repair_row *w = &j->rows[j->nrows++];
	w->key = j->key;
	w->id = slice_make(idc, id.len);
	memcpy(w->digest, dg, 16);
	return 0;
}

static int rows_each(void *arg, const struct storage_mutation *f)
{
	struct job *j = arg;
	struct slice k = storage_mutation_key(f);
	void *kc = arena_memdup(&j->arena, k.ptr, k.len);
	if (!kc)
		return err_set(ERR_NOMEM, "row key");
	j->key = slice_make(kc, k.len);
	return storage_fragment_rows(f, rows_row, j);
}

static int row_cmp(const void *x, const void *y)
{
	const struct repair_row *a = x, *b = y;
	int c = slice_cmp(a->key, b->key);
	return c ? c : slice_cmp(a->id, b->id);
}

static int fetch_each(void *arg, const struct storage_mutation *f)
{
	struct job *j = arg;
	struct slice k = storage_mutation_key(f);
	/* the first wanted row of this key */
	size_t lo = 0, hi = j->nrows;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (slice_cmp(j->rows[mid].key, k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t end = lo;
	while (end < j->nrows && slice_eq(j->rows[end].key, k))
		end++;
	if (end == lo)
		return 0;
	struct slice *ids = malloc((end - lo) * sizeof(*ids));
	if (!ids)
		return err_set(ERR_NOMEM, "row ids");
	for (size_t i = lo; i < end; i++)
		ids[i - lo] = j->rows[i].id;
	struct storage_mutation *sel =
		storage_fragment_select_rows(j->meta, f, ids, end - lo);
	free(ids);
	if (!sel)
		return -1;
	int rc = 0;
	if (!storage_mutation_is_empty(sel)) {
		if (j->nends == j->ends_cap) {
			size_t cap = j->ends_cap ? j->ends_cap * 2 : 64;
			size_t *v = realloc(j->ends, cap * sizeof(*v));
			if (!v)
				rc = err_set(ERR_NOMEM, "fragments");
			else {
				j->ends = v;
				j->ends_cap = cap;
			}
		}
		if (!rc)
			rc = storage_mutation_encode(sel, &j->out);
		if (!rc)
			j->ends[j->nends++] = j->out.len;
	}
	storage_mutation_delete(sel);
	return rc;
}

/* ---- scans (loop) -------------------------------------------------------- */

static void finish(struct job *j);

/* Every step sees the fragment without purgeable tombstones, so replicas
 * that did and did not compact one away agree. */
static int each(void *arg, const struct storage_mutation *raw)
{
	struct job *j = arg;
	struct storage_mutation *f =
		storage_fragment_purge(j->meta, raw, j->gc_before);
	if (!f)
		return -1;
	int rc = 0;
	if (!storage_mutation_is_empty(f)) {
		switch (j->verb) {
		case REPAIR_VERB_VALIDATE:
			rc = validate_each(j, f);
			break;
		case REPAIR_VERB_ROWS:
			rc = rows_each(j, f);
			break;
		default:
			rc = fetch_each(j, f);
			break;
		}
	}
	storage_mutation_delete(f);
	return rc;
}

static void scan_next(struct job *j);

static void scan_done(void *arg, int status, enum err_code code)
{
	struct job *j = arg;
	if (status) {
		err_set(code, "scan failed");
		job_fail(j, "scan");
		finish(j);
		return;
	}
	scan_next(j);
}

static void scan_next(struct job *j)
{
	if (j->next == j->npieces) {
		finish(j);
		return;
	}
	struct merkle_range p = j->pieces[j->next++];
	j->r->store->scan(j->r->store_arg, j->table_id, p.start, p.end, each,
			  scan_done, j);
}

/* A validation's tree folded to the answer's depth and encoded: O(leaves),
 * so on a worker (touches only the job). */
static void fold_run(void *arg)
{
	struct job *j = arg;
	struct merkle_tree *f = merkle_fold(j->tree, j->fold_depth);
	if (!f || merkle_encode(f, &j->tree_enc))
		job_fail(j, "tree");
	merkle_delete(f);
}

static void fold_done(void *arg)
{
	struct job *j = arg;
	struct repair_msg m = {0};
	if (!j->failed) {
		m.tree = buf_slice(&j->tree_enc);
		m.partitions = j->partitions;
	}
	job_answer(j, &m);
}

static void finish(struct job *j)
{
	struct repair_msg m = {0};
	struct slice *frags = NULL;
	if (j->failed)
		goto answer;
	if (j->verb == REPAIR_VERB_VALIDATE) {
		int depth =
			merkle_depth_for(j->partitions, j->r->o.session_space);
		if (depth > merkle_depth(j->tree))
			depth = merkle_depth(j->tree);
		j->fold_depth = depth;
		buf_init(&j->tree_enc);
		const struct repair_store_ops *st = j->r->store;
		if (st->offload) {
			st->offload(j->r->store_arg, fold_run, fold_done, j);
		} else {
			fold_run(j);
			fold_done(j);
		}
		return;
	} else if (j->verb == REPAIR_VERB_ROWS) {
		m.rows = j->rows;
		m.nrows = j->nrows;
	} else {
		frags = j->nends ? malloc(j->nends * sizeof(*frags)) : NULL;
		if (j->nends && !frags) {
			err_set(ERR_NOMEM, "fragments");
			job_fail(j, "fetch");
		}
		for (size_t i = 0; frags && i < j->nends; i++) {
			size_t from = i ? j->ends[i - 1] : 0;
			frags[i] = slice_make(j->out.data + from,
					      j->ends[i] - from);
		}
		m.frags = frags;
		m.nfrags = frags ? j->nends : 0;
	}
answer:
	job_answer(j, &m);
	free(frags);
}

/* ---- requests ------------------------------------------------------------ */

static int job_pieces(struct job *j, const struct repair_msg *q)
{
	if (q->nranges == 0)
		return err_set(ERR_PROTOCOL, "no range");
	j->pieces = calloc(2 * q->nranges, sizeof(*j->pieces));
	if (!j->pieces)
		return err_set(ERR_NOMEM, "pieces");
	for (size_t i = 0; i < q->nranges; i++)
		j->npieces +=
			repair_pieces(q->ranges[i], j->pieces + j->npieces);
	return 0;
}

/* Copies the wanted (key, id) pairs into the job, sorted. */
static int job_wanted(struct job *j, const struct repair_msg *q)
{
	if (!q->nrows)
		return 0;
	j->rows = calloc(q->nrows, sizeof(*j->rows));
	if (!j->rows)
		return err_set(ERR_NOMEM, "wanted rows");
	for (size_t i = 0; i < q->nrows; i++) {
		void *k = arena_memdup(&j->arena, q->rows[i].key.ptr,
				       q->rows[i].key.len);
		void *id = arena_memdup(&j->arena, q->rows[i].id.ptr,
					q->rows[i].id.len);
		if (!k || !id)
			return err_set(ERR_NOMEM, "wanted rows");
		j->rows[i].key = slice_make(k, q->rows[i].key.len);
		j->rows[i].id = slice_make(id, q->rows[i].id.len);
	}
	j->nrows = j->cap = q->nrows;
	qsort(j->rows, j->nrows, sizeof(*j->rows), row_cmp);
	return 0;
}

static void apply_done(void *arg, int status, enum err_code code)
{
	struct job *j = arg;
	if (status) {
		err_set(code, "write failed");
		job_fail(j, "apply");
	}
	if (--j->pending == 0)
		answer_error(j); /* ok unless failed */
}

static void start_apply(struct job *j, const struct repair_msg *q)
{
	j->pending = 1;
	for (size_t i = 0; i < q->nfrags && !j->failed; i++) {
		struct storage_mutation *m = storage_mutation_decode(
			q->frags[i].ptr, q->frags[i].len);
		if (!m) {
			job_fail(j, "apply");
			break;
		}
		if (memcmp(storage_mutation_table_id(m), j->table_id, 16)) {
			err_set(ERR_PROTOCOL, "fragment of another table");
			job_fail(j, "apply");
		} else {
			j->pending++;
			if (j->r->store->apply(j->r->store_arg, m, apply_done,
					       j)) {
				j->pending--;
				job_fail(j, "apply");
			}
		}
		storage_mutation_delete(m);
	}
	if (--j->pending == 0)
		answer_error(j);
}

/* ---- claims -------------------------------------------------------------- */

static bool claim_of(const struct repair_claim *c, const struct inet_addr *co,
		     uint64_t session)
{
	return c->session == session && inet_addr_eq(&c->coordinator, co);
}

static uint64_t claim_ttl_us(const struct repair *r)
{
	return (r->o.validate_timeout_ms + r->o.request_timeout_ms) * 1000;
}

/* VALIDATE: refuses (ERR_EXISTS) a range another coordinator's session
 * holds (an exclusive one: any range of any table), else claims it for
 * (from, session). */
static int claim(struct repair *r, const struct inet_addr *from,
		 const struct repair_msg *q)
{
	uint64_t now = env_mono_us(r->env);
	struct repair_claim *slot = NULL;
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++) {
		struct repair_claim *c = &r->claims[i];
		if (c->expires_us <= now) {
			c->expires_us = 0;
			if (!slot)
				slot = c;
			continue;
		}
		if (q->exclusive && !inet_addr_eq(&c->coordinator, from)) {
			char a[64];
			return err_set(
				ERR_EXISTS,
				"replica busy: repair session %llu of %s "
				"holds (%lld,%lld]",
				(unsigned long long)c->session,
				inet_addr_format(&c->coordinator, a, sizeof(a)),
				(long long)c->range.start,
				(long long)c->range.end);
		}
		if (memcmp(c->table_id, q->table_id, 16) ||
		    !repair_ranges_overlap(c->range, q->ranges[0]))
			continue;
		/* a coordinator runs one session at a time: its newer
		 * session supersedes its older one's claims */
		if (inet_addr_eq(&c->coordinator, from)) {
			c->expires_us = 0;
			if (!slot)
				slot = c;
		} else {
			char a[64];
			return err_set(
				ERR_EXISTS,
				"overlapping repair session %llu of %s "
				"holds (%lld,%lld]",
				(unsigned long long)c->session,
				inet_addr_format(&c->coordinator, a, sizeof(a)),
				(long long)c->range.start,
				(long long)c->range.end);
		}
	}
	if (!slot)
		return err_set(ERR_OVERLOADED, "too many repairs in progress");
	slot->coordinator = *from;
	slot->session = q->session;
	memcpy(slot->table_id, q->table_id, 16);
	slot->range = q->ranges[0];
	slot->expires_us = now + claim_ttl_us(r);
	return 0;
}

/* Any other request of a session keeps its claims alive; RELEASE ends
 * the one of its range. */
static void claims_touch(struct repair *r, const struct inet_addr *from,
			 const struct repair_msg *q, bool release)
{
	uint64_t now = env_mono_us(r->env);
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++) {
		struct repair_claim *c = &r->claims[i];
		if (c->expires_us <= now || !claim_of(c, from, q->session))
			continue;
		if (!release)
			c->expires_us = now + claim_ttl_us(r);
		else if (q->nranges && !memcmp(c->table_id, q->table_id, 16) &&
			 c->range.start == q->ranges[0].start &&
			 c->range.end == q->ranges[0].end)
			c->expires_us = 0;
	}
}

void repair_replica_receive(struct repair *r, const struct inet_addr *from,
			    uint32_t verb, const uint8_t *msg, size_t len)
{
	struct repair_msg q;
	if (repair_msg_unpack_request(msg, len, &q)) {
		repair_msg_free(&q);
		return; /* nobody to answer: the coordinator times out */
	}
	if (verb == REPAIR_VERB_RELEASE || verb != REPAIR_VERB_VALIDATE)
		claims_touch(r, from, &q, verb == REPAIR_VERB_RELEASE);
	if (verb == REPAIR_VERB_RELEASE) {
		repair_msg_free(&q);
		return;
	}
	struct job *j = calloc(1, sizeof(*j));
	if (!j) {
		repair_msg_free(&q);
		return;
	}
	r->jobs++;
	j->r = r;
	j->from = *from;
	j->verb = verb;
	j->session = q.session;
	j->task = q.task;
	memcpy(j->table_id, q.table_id, 16);
	arena_create(&j->arena, 0);
	buf_init(&j->out);
	j->meta = r->store->meta(r->store_arg, q.table_id);
	if (!j->meta) {
		err_set(ERR_NOT_FOUND, "no such table");
		job_fail(j, "repair");
		answer_error(j);
		repair_msg_free(&q);
		return;
	}
	j->gc_before = env_wall_us(r->env) / 1000000 -
		       j->meta->options.gc_grace_seconds;
	if (verb == REPAIR_VERB_APPLY) {
		start_apply(j, &q);
		repair_msg_free(&q);
		return;
	}
	int rc = job_pieces(j, &q);
	if (!rc && verb == REPAIR_VERB_VALIDATE)
		rc = claim(r, from, &q);
	if (!rc && verb == REPAIR_VERB_VALIDATE) {
		int depth = merkle_depth_for(UINT64_MAX, r->o.session_space);
		if ((int)q.max_depth < depth)
			depth = (int)q.max_depth;
		j->tree = merkle_new(q.ranges[0], depth);
		rc = j->tree ? 0 : -1;
		j->npieces = repair_pieces(q.ranges[0], j->pieces);
	} else if (!rc && verb == REPAIR_VERB_FETCH) {
		rc = job_wanted(j, &q);
	}
	repair_msg_free(&q);
	if (rc) {
		job_fail(j, "repair");
		answer_error(j);
		return;
	}
	scan_next(j);
}
