/*
 * The participant side of repair: VALIDATE, TREE, ROWS, FETCH and APPLY
 * requests. Each but TREE is answered from one job and forgotten; a
 * VALIDATE's tree, folded to about two leaves per partition, stays with
 * the task's claim so that TREE requests (answered at once, on the loop:
 * the work is the answer's size) descend it. A claim's tree goes when the
 * claim ends: RELEASE, a newer session of the same coordinator over an
 * overlapping range, or expiry (a timer, so a dead coordinator's trees go
 * too); any request of the session to this node, a TREE naming no node
 * among them, keeps its claims alive. Kept trees of all claims stay
 * within 4 session_space: past it a tree is folded coarser.
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
	const struct storage_table_meta *meta; /* a reference (job_free) */
	struct merkle_range *pieces;
	size_t npieces, next;
	bool failed;
	char error[256];
	int64_t gc_before; /* tombstones older than this are left out */
	/* VALIDATE */
	struct merkle_tree *tree;
	uint64_t partitions;
	int64_t token;
	struct merkle_range range; /* the task's range (its claim's) */
	int fold_depth;            /* the depth the kept tree is folded to */
	uint32_t top_levels;       /* levels the answer carries */
	struct merkle_tree *kept; /* ... the folded tree (built off the loop) */
	struct buf hashes;        /* ... and the answer's top levels */
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
	/* incremental: scans see, APPLY writes, the session's pending data */
	bool incremental;
	uint8_t uuid[16];
};

static void job_free(struct job *j)
{
	struct repair *r = j->r;
	storage_table_meta_unref(j->meta);
	merkle_delete(j->tree);
	merkle_delete(j->kept);
	buf_free(&j->hashes);
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
	if (j->incremental)
		j->r->store->scan_pending(j->r->store_arg, j->table_id, j->uuid,
					  p.start, p.end, each, scan_done, j);
	else
		j->r->store->scan(j->r->store_arg, j->table_id, p.start, p.end,
				  each, scan_done, j);
}

/* Appends node values: the root, then each level's left children. */
static int put_top(const struct merkle_tree *t, uint32_t levels,
		   struct buf *out)
{
	if (buf_put_be64(out, merkle_node64(t, 0, 0)))
		return -1;
	for (uint32_t l = 1; l <= levels; l++)
		for (size_t i = 0; i < (size_t)1 << l; i += 2)
			if (buf_put_be64(out, merkle_node64(t, (int)l, i)))
				return -1;
	return 0;
}

/* A validation's tree folded to the depth kept and its top levels
 * encoded: O(leaves), so on a worker (touches only the job). */
static void fold_run(void *arg)
{
	struct job *j = arg;
	j->kept = merkle_fold(j->tree, j->fold_depth);
	if (!j->kept || put_top(j->kept, j->top_levels, &j->hashes)) {
		if (j->kept)
			err_set(ERR_NOMEM, "tree answer");
		job_fail(j, "tree");
	}
	merkle_delete(j->tree);
	j->tree = NULL;
}

static struct repair_claim *claim_find(struct repair *r,
				       const struct inet_addr *co,
				       uint64_t session, const uint8_t id[16],
				       struct merkle_range range);
static void claims_arm(struct repair *r);

static void fold_done(void *arg)
{
	struct job *j = arg;
	struct repair *r = j->r;
	struct repair_msg m = {0};
	struct repair_claim *c =
		claim_find(r, &j->from, j->session, j->table_id, j->range);
	if (!j->failed && (!c || c->tree || !c->tree_bytes)) {
		err_set(ERR_NOT_FOUND, "the task's claim ended");
		job_fail(j, "tree");
	}
	if (!j->failed) {
		c->tree = j->kept; /* the claim owns it now */
		j->kept = NULL;
		m.tree_version = REPAIR_TREE_VERSION;
		m.depth = (uint32_t)j->fold_depth;
		m.levels = j->top_levels;
		m.hashes = buf_slice(&j->hashes);
		m.partitions = j->partitions;
	} else if (c && !c->tree) {
		repair_claim_end(r, c);
	}
	job_answer(j, &m);
}

/* Bytes of a tree of `depth` (merkle_new's nodes). */
static size_t tree_size(int depth)
{
	return ((size_t)2 << depth) * 16;
}

/* The depth to keep for `partitions`: about two leaves per partition
 * (the exchange's cost per differing leaf is one node per level; a
 * shallower tree's is the other rows of the leaf in ROWS), within what
 * the kept trees' budget has left. */
static int keep_depth(const struct repair *r, const struct merkle_tree *t,
		      uint64_t partitions)
{
	int d = merkle_depth_for(partitions, r->o.session_space) + 1;
	if (d > merkle_depth(t))
		d = merkle_depth(t);
	size_t budget = 4 * r->o.session_space;
	size_t left = r->kept_bytes < budget ? budget - r->kept_bytes : 0;
	while (d > 0 && tree_size(d) > left)
		d--;
	return d;
}

static void finish(struct job *j)
{
	struct repair_msg m = {0};
	struct slice *frags = NULL;
	if (j->failed)
		goto answer;
	if (j->verb == REPAIR_VERB_VALIDATE) {
		struct repair_claim *c = claim_find(j->r, &j->from, j->session,
						    j->table_id, j->range);
		if (!c || c->tree || c->tree_bytes) {
			err_set(ERR_NOT_FOUND, "the task's claim ended");
			job_fail(j, "tree");
			goto answer;
		}
		j->fold_depth = keep_depth(j->r, j->tree, j->partitions);
		if ((int)j->top_levels > j->fold_depth)
			j->top_levels = (uint32_t)j->fold_depth;
		c->tree_bytes = tree_size(j->fold_depth);
		j->r->kept_bytes += c->tree_bytes;
		claims_arm(j->r);
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

/* ROWS, FETCH with `nodes`: the nodes' ranges of ranges[0], adjacent
 * ones coalesced. */
static int job_node_pieces(struct job *j, const struct repair_msg *q)
{
	struct merkle_range r = q->ranges[0];
	if (!merkle_level_fits(r, (int)q->level))
		return err_set(ERR_PROTOCOL,
			       "nodes of level %u in a range "
			       "too narrow",
			       q->level);
	j->pieces = calloc(2 * q->nnodes, sizeof(*j->pieces));
	if (!j->pieces)
		return err_set(ERR_NOMEM, "pieces");
	struct merkle_range cur = {0, 0};
	for (size_t i = 0; i <= q->nnodes; i++) {
		if (i < q->nnodes) {
			struct merkle_range nr = merkle_node_range(
				r, (int)q->level, q->nodes[i]);
			if (i && cur.end == nr.start) {
				cur.end = nr.end;
				continue;
			}
			if (i)
				j->npieces += repair_pieces(
					cur, j->pieces + j->npieces);
			cur = nr;
		} else {
			j->npieces +=
				repair_pieces(cur, j->pieces + j->npieces);
		}
	}
	return 0;
}

static int job_pieces(struct job *j, const struct repair_msg *q)
{
	if (q->nranges == 0)
		return err_set(ERR_PROTOCOL, "no range");
	if (q->nnodes && j->verb != REPAIR_VERB_VALIDATE)
		return job_node_pieces(j, q);
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

/* An incremental session's APPLY: the fragments land as pending data. */
static void start_apply_pending(struct job *j, const struct repair_msg *q)
{
	struct storage_mutation **v = calloc(q->nfrags + 1, sizeof(*v));
	size_t n = 0;
	if (!v) {
		err_set(ERR_NOMEM, "apply");
		job_fail(j, "apply");
	}
	for (size_t i = 0; v && i < q->nfrags && !j->failed; i++) {
		struct storage_mutation *m = storage_mutation_decode(
			q->frags[i].ptr, q->frags[i].len);
		if (!m) {
			job_fail(j, "apply");
		} else if (memcmp(storage_mutation_table_id(m), j->table_id,
				  16)) {
			storage_mutation_delete(m);
			err_set(ERR_PROTOCOL, "fragment of another table");
			job_fail(j, "apply");
		} else {
			v[n++] = m;
		}
	}
	if (j->failed || !n) {
		for (size_t i = 0; i < n; i++)
			storage_mutation_delete(v[i]);
		free(v);
		answer_error(j);
		return;
	}
	j->pending = 1;
	j->r->store->apply_pending(j->r->store_arg, j->table_id, j->uuid, v, n,
				   apply_done, j);
}

static void start_apply(struct job *j, const struct repair_msg *q)
{
	if (j->incremental) {
		start_apply_pending(j, q);
		return;
	}
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

void repair_claim_end(struct repair *r, struct repair_claim *c)
{
	merkle_delete(c->tree);
	r->kept_bytes -= c->tree_bytes;
	memset(c, 0, sizeof(*c));
}

/* Arms the sweep for the earliest expiry of a claim holding memory. */
static void claims_arm(struct repair *r)
{
	uint64_t now = env_mono_us(r->env), next = 0;
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++) {
		const struct repair_claim *c = &r->claims[i];
		if (c->expires_us && c->tree_bytes &&
		    (!next || c->expires_us < next))
			next = c->expires_us;
	}
	if (next)
		env_timer_arm(r->env, r->claim_timer,
			      next > now ? next - now : 0);
	else
		env_timer_cancel(r->env, r->claim_timer);
}

void repair_claims_sweep(void *arg)
{
	struct repair *r = arg;
	uint64_t now = env_mono_us(r->env);
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++)
		if (r->claims[i].expires_us && r->claims[i].expires_us <= now)
			repair_claim_end(r, &r->claims[i]);
	claims_arm(r);
}

size_t repair_kept_trees(const struct repair *r, size_t *bytes)
{
	size_t n = 0;
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++)
		n += r->claims[i].tree != NULL;
	if (bytes)
		*bytes = r->kept_bytes;
	return n;
}

static struct repair_claim *claim_find(struct repair *r,
				       const struct inet_addr *co,
				       uint64_t session, const uint8_t id[16],
				       struct merkle_range range)
{
	uint64_t now = env_mono_us(r->env);
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++) {
		struct repair_claim *c = &r->claims[i];
		if (c->expires_us > now && claim_of(c, co, session) &&
		    !memcmp(c->table_id, id, 16) &&
		    c->range.start == range.start && c->range.end == range.end)
			return c;
	}
	return NULL;
}

/* Notes a RELEASE that found no claim to end (the oldest note gives way):
 * its VALIDATE may still be on the way. Only those are noted because
 * session numbers restart with the coordinator: a later session reusing
 * the number is refused a range only if the earlier one's RELEASE of that
 * very range found no claim, less than a claim's lifetime ago. */
static void released_note(struct repair *r, const struct inet_addr *from,
			  const struct repair_msg *q)
{
	if (!q->nranges)
		return;
	struct repair_released *n =
		&r->released[r->released_next++ % REPAIR_MAX_CLAIMS];
	n->coordinator = *from;
	n->session = q->session;
	memcpy(n->table_id, q->table_id, 16);
	n->range = q->ranges[0];
	n->until_us = env_mono_us(r->env) + claim_ttl_us(r);
}

/* Whether the task of this VALIDATE was released already. */
static bool released_already(const struct repair *r,
			     const struct inet_addr *from,
			     const struct repair_msg *q)
{
	uint64_t now = env_mono_us(r->env);
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++) {
		const struct repair_released *n = &r->released[i];
		if (n->until_us > now && n->session == q->session &&
		    inet_addr_eq(&n->coordinator, from) &&
		    !memcmp(n->table_id, q->table_id, 16) &&
		    n->range.start == q->ranges[0].start &&
		    n->range.end == q->ranges[0].end)
			return true;
	}
	return false;
}

int repair_claims_busy(struct repair *r, const struct inet_addr *from)
{
	uint64_t now = env_mono_us(r->env);
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++) {
		const struct repair_claim *c = &r->claims[i];
		if (c->expires_us <= now || inet_addr_eq(&c->coordinator, from))
			continue;
		char a[64];
		return err_set(ERR_EXISTS,
			       "replica busy: repair session %llu of %s "
			       "holds (%lld,%lld]",
			       (unsigned long long)c->session,
			       inet_addr_format(&c->coordinator, a, sizeof(a)),
			       (long long)c->range.start,
			       (long long)c->range.end);
	}
	return 0;
}

/* VALIDATE: refuses (ERR_EXISTS) a range another coordinator's session
 * holds (an exclusive one: any range of any table), else claims it for
 * (from, session). */
static int claim(struct repair *r, const struct inet_addr *from,
		 const struct repair_msg *q)
{
	uint64_t now = env_mono_us(r->env);
	if (released_already(r, from, q))
		return err_set(ERR_CLOSED, "the task was released before "
					   "its validation arrived");
	struct repair_claim *slot = NULL;
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++) {
		struct repair_claim *c = &r->claims[i];
		if (c->expires_us <= now) {
			repair_claim_end(r, c);
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
			repair_claim_end(r, c);
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
	claims_arm(r);
	return 0;
}

/* Any other request of a session keeps its claims alive; RELEASE ends
 * the one of its range (true if there was one). */
static bool claims_touch(struct repair *r, const struct inet_addr *from,
			 const struct repair_msg *q, bool release)
{
	uint64_t now = env_mono_us(r->env);
	bool ended = false;
	for (size_t i = 0; i < REPAIR_MAX_CLAIMS; i++) {
		struct repair_claim *c = &r->claims[i];
		if (c->expires_us <= now || !claim_of(c, from, q->session))
			continue;
		if (!release)
			c->expires_us = now + claim_ttl_us(r);
		else if (q->nranges && !memcmp(c->table_id, q->table_id, 16) &&
			 c->range.start == q->ranges[0].start &&
			 c->range.end == q->ranges[0].end) {
			repair_claim_end(r, c);
			ended = true;
		}
	}
	claims_arm(r);
	return ended;
}

/* Sends a response built on the spot (no job). */
static void answer_now(struct repair *r, const struct inet_addr *to,
		       uint32_t verb, const struct repair_msg *q,
		       struct repair_msg *m)
{
	m->session = q->session;
	m->task = q->task;
	struct buf b;
	buf_init(&b);
	if (repair_msg_pack_response(m, &b) == 0)
		repair_send(r, to, response_verb(verb), &b);
	buf_free(&b);
}

/* TREE: the `levels` levels below each node of `nodes`, from the tree
 * kept for the task; 0 with the values in `out`. */
static int tree_values(struct repair *r, const struct inet_addr *from,
		       const struct repair_msg *q, struct buf *out)
{
	if (!q->nranges)
		return err_set(ERR_PROTOCOL, "no range");
	struct repair_claim *c =
		claim_find(r, from, q->session, q->table_id, q->ranges[0]);
	if (!c || !c->tree)
		return err_set(ERR_NOT_FOUND, "no tree kept for the task "
					      "(released or expired)");
	int depth = merkle_depth(c->tree);
	if (q->levels < 1 || q->levels > REPAIR_MAX_TREE_LEVELS ||
	    q->level > (uint32_t)depth ||
	    q->level + q->levels > (uint32_t)depth)
		return err_set(ERR_PROTOCOL,
			       "levels %u..%u of a tree of "
			       "depth %d",
			       q->level + 1, q->level + q->levels, depth);
	size_t per = ((size_t)1 << q->levels) - 1;
	if (q->nnodes > REPAIR_MAX_TREE_VALUES / per)
		return err_set(ERR_PROTOCOL, "%zu nodes of %u levels",
			       q->nnodes, q->levels);
	if (buf_reserve(out, q->nnodes * per * 8))
		return err_set(ERR_NOMEM, "tree answer");
	for (size_t k = 0; k < q->nnodes; k++) {
		size_t n = q->nodes[k];
		for (uint32_t l = 1; l <= q->levels; l++) {
			int at = (int)(q->level + l);
			for (size_t i = n << l; i < (n + 1) << l; i += 2)
				buf_put_be64(out,
					     merkle_node64(c->tree, at, i));
		}
	}
	return 0;
}

static void tree_answer(struct repair *r, const struct inet_addr *from,
			const struct repair_msg *q)
{
	struct repair_msg m = {0};
	struct buf b;
	buf_init(&b);
	if (tree_values(r, from, q, &b) == 0) {
		m.ok = true;
		m.hashes = buf_slice(&b);
	} else {
		snprintf(m.error, sizeof(m.error), "tree: %s", err_msg());
	}
	answer_now(r, from, REPAIR_VERB_TREE, q, &m);
	buf_free(&b);
}

void repair_replica_receive(struct repair *r, const struct inet_addr *from,
			    uint32_t verb, const uint8_t *msg, size_t len)
{
	struct repair_msg q;
	if (repair_msg_unpack_request(msg, len, &q)) {
		repair_msg_free(&q);
		return; /* nobody to answer: the coordinator times out */
	}
	if (verb >= REPAIR_VERB_PREPARE) {
		repair_local_receive(r, from, verb, &q);
		repair_msg_free(&q);
		return;
	}
	if (verb == REPAIR_VERB_RELEASE) {
		/* No claim to end: the VALIDATE may still be on its way. */
		if (!claims_touch(r, from, &q, true))
			released_note(r, from, &q);
		repair_msg_free(&q);
		return;
	}
	if (verb != REPAIR_VERB_VALIDATE)
		claims_touch(r, from, &q, false);
	if (verb == REPAIR_VERB_TREE) {
		/* naming no node, it only kept the claims alive (one-way) */
		if (q.nnodes)
			tree_answer(r, from, &q);
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
	if (q.incremental) {
		struct repair_local *l =
			repair_local_repairing(r, from, q.session);
		if (!l) {
			job_fail(j, "repair");
			answer_error(j);
			repair_msg_free(&q);
			return;
		}
		j->incremental = true;
		memcpy(j->uuid, repair_local_uuid(l), 16);
	}
	if (verb == REPAIR_VERB_APPLY) {
		start_apply(j, &q);
		repair_msg_free(&q);
		return;
	}
	int rc = job_pieces(j, &q);
	if (!rc && verb == REPAIR_VERB_VALIDATE &&
	    q.tree_version != REPAIR_TREE_VERSION)
		rc = err_set(ERR_PROTOCOL,
			     "tree exchange version %u (this "
			     "node speaks %u)",
			     q.tree_version, REPAIR_TREE_VERSION);
	if (!rc && verb == REPAIR_VERB_VALIDATE &&
	    q.levels > REPAIR_MAX_TOP_LEVELS)
		rc = err_set(ERR_PROTOCOL, "%u top levels", q.levels);
	if (!rc && verb == REPAIR_VERB_VALIDATE)
		rc = claim(r, from, &q);
	if (!rc && verb == REPAIR_VERB_VALIDATE) {
		j->range = q.ranges[0];
		j->top_levels = q.levels;
		buf_init(&j->hashes);
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
