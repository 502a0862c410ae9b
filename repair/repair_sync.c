/*
 * A task's comparison and sync (repair_session_internal.h): the tree
 * exchange down to the mismatching leaves, then ROWS (row digests of those
 * leaves), FETCH (one copy of each version a replica lacks), the merge and
 * APPLY (the merged rows each replica's digest disagrees with).
 */
#include "repair/repair_session_internal.h"

#include "common/arena.h"
#include "common/err.h"
#include "common/murmur3.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the tree exchange ----------------------------------------------------
 *
 * Every replica answers VALIDATE with the top REPAIR_TOP_LEVELS levels of
 * the tree it keeps; the coordinator compares them at the shallowest level
 * all answered, then asks, one level per round trip, for the children of
 * the nodes that differ, down to the shallowest depth any replica kept.
 * Replicas holding the same value at a node hold the same subtree (but
 * for a 2^-64 chance), so only one of them (this node when it is one) is
 * asked below it; the others' values are copied from it. */

static bool node_differs(const struct task *s, const uint64_t *v)
{
	for (size_t r = 1; r < s->nrep; r++)
		if (v[r] != v[0])
			return true;
	return false;
}

/* frep for frontier node i: per replica, the first replica (this node
 * first) holding its value. */
static void pick_reps(struct task *s, size_t i)
{
	const uint64_t *v = s->fval + i * s->nrep;
	uint8_t *rep = s->frep + i * s->nrep;
	size_t self = s->nrep;
	for (size_t r = 0; r < s->nrep; r++)
		if (s->rep[r].self)
			self = r;
	for (size_t r = 0; r < s->nrep; r++) {
		rep[r] = (uint8_t)r;
		if (self < s->nrep && v[self] == v[r]) {
			rep[r] = (uint8_t)self;
			continue;
		}
		for (size_t q = 0; q < r; q++)
			if (q != self && v[q] == v[r]) {
				rep[r] = (uint8_t)q;
				break;
			}
	}
}

/* Keeps the frontier's differing nodes, with their representatives. */
static int frontier_filter(struct task *s)
{
	size_t n = 0, nrep = s->nrep;
	for (size_t i = 0; i < s->nf; i++) {
		if (!node_differs(s, s->fval + i * nrep))
			continue;
		s->fidx[n] = s->fidx[i];
		memmove(s->fval + n * nrep, s->fval + i * nrep,
			nrep * sizeof(*s->fval));
		n++;
	}
	s->nf = n;
	free(s->frep);
	s->frep = n ? malloc(n * nrep) : NULL;
	if (n && !s->frep)
		return err_set(ERR_NOMEM, "tree frontier");
	for (size_t i = 0; i < n; i++)
		pick_reps(s, i);
	return 0;
}

static void rows_start(struct task *s);

/* One step down from the filtered frontier: TREE requests, or ROWS at
 * the leaves, or the task's end when nothing differs. */
static void descend(struct task *s)
{
	struct repair_range *rg = repair_task_cur_range(s);
	if (frontier_filter(s)) {
		repair_task_fail(s, "%s: comparing trees: %s",
				 repair_task_cur_table(s), err_msg());
		return;
	}
	if (!s->nf) {
		repair_task_trace(
			s,
			"trees compared: 0 mismatched ranges (equal at level "
			"%d)",
			s->level);
		repair_task_progress(s, "%s (%lld,%lld]: %zu replicas in sync",
				     repair_task_cur_table(s),
				     (long long)rg->start, (long long)rg->end,
				     s->nrep);
		repair_task_next(s);
		return;
	}
	if (s->level == s->depth) {
		rows_start(s);
		return;
	}
	repair_task_trace(s, "trees differ at %zu nodes of level %d (depth %d)",
			  s->nf, s->level, s->depth);
	for (size_t r = 0; r < s->nrep; r++) {
		struct replica *p = &s->rep[r];
		free(p->req);
		free(p->got);
		p->got = NULL;
		p->nreq = 0;
		p->req = malloc(s->nf * sizeof(*p->req));
		if (!p->req) {
			repair_task_fail(s, "%s: tree requests: out of memory",
					 repair_task_cur_table(s));
			return;
		}
		for (size_t i = 0; i < s->nf; i++)
			if (s->frep[i * s->nrep + r] == r)
				p->req[p->nreq++] = s->fidx[i];
	}
	s->phase = PHASE_TREE;
	struct merkle_range mr = {rg->start, rg->end};
	for (size_t r = 0; r < s->nrep; r++) {
		if (!s->rep[r].nreq)
			continue;
		struct repair_msg q = {0};
		q.ranges = &mr;
		q.nranges = 1;
		q.level = (uint32_t)s->level;
		q.levels = 1;
		q.nodes = s->rep[r].req;
		q.nnodes = s->rep[r].nreq;
		if (repair_task_send(s, r, REPAIR_VERB_TREE, &q)) {
			repair_task_fail(s, "%s: sending tree requests: %s",
					 repair_task_cur_table(s), err_msg());
			return;
		}
	}
	repair_task_arm(s, s->r->o.request_timeout_ms);
}

/* The TREE answers are in: the next level's frontier, two children per
 * differing node, each replica's values its representative's. */
void repair_sync_tree_round_done(struct task *s)
{
	size_t nrep = s->nrep, n = 2 * s->nf;
	uint32_t *idx = malloc(n * sizeof(*idx));
	uint64_t *val = malloc(n * nrep * sizeof(*val));
	if (!idx || !val) {
		free(idx);
		free(val);
		repair_task_fail(s, "%s: tree frontier: out of memory",
				 repair_task_cur_table(s));
		return;
	}
	size_t pos[REPAIR_MAX_REPLICAS] = {0};
	for (size_t i = 0; i < s->nf; i++) {
		const uint8_t *rep = s->frep + i * nrep;
		const uint64_t *pv = s->fval + i * nrep;
		uint64_t left[REPAIR_MAX_REPLICAS];
		for (size_t r = 0; r < nrep; r++)
			if (rep[r] == r)
				left[r] = s->rep[r].got[pos[r]++];
		idx[2 * i] = 2 * s->fidx[i];
		idx[2 * i + 1] = 2 * s->fidx[i] + 1;
		for (size_t r = 0; r < nrep; r++) {
			uint64_t l = left[rep[r]];
			val[2 * i * nrep + r] = l;
			val[(2 * i + 1) * nrep + r] = l ^ pv[rep[r]];
		}
	}
	free(s->fidx);
	free(s->fval);
	s->fidx = idx;
	s->fval = val;
	s->nf = n;
	s->level++;
	descend(s);
}

/* VALIDATE answers are in: the frontier is the deepest level all sent. */
void repair_sync_trees_done(struct task *s)
{
	s->sess->sum.ranges++;
	uint32_t depth = MERKLE_MAX_DEPTH, levels = REPAIR_TOP_LEVELS;
	for (size_t r = 0; r < s->nrep; r++) {
		if (s->rep[r].depth < depth)
			depth = s->rep[r].depth;
		if (s->rep[r].levels < levels)
			levels = s->rep[r].levels;
	}
	size_t n = (size_t)1 << levels, nrep = s->nrep;
	free(s->fidx);
	free(s->fval);
	s->fidx = malloc(n * sizeof(*s->fidx));
	s->fval = malloc(n * nrep * sizeof(*s->fval));
	if (!s->fidx || !s->fval) {
		repair_task_fail(s, "%s: tree frontier: out of memory",
				 repair_task_cur_table(s));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		s->fidx[i] = (uint32_t)i;
		for (size_t r = 0; r < nrep; r++)
			s->fval[i * nrep + r] = s->rep[r].top[n + i];
	}
	for (size_t r = 0; r < nrep; r++) {
		free(s->rep[r].top);
		s->rep[r].top = NULL;
	}
	s->nf = n;
	s->depth = (int)depth;
	s->level = (int)levels;
	descend(s);
}

/* A VALIDATE answer's values: levels 0..levels, heap-style. */
int repair_sync_take_top(struct task *s, struct replica *p,
			 const struct repair_msg *m)
{
	if (m->tree_version != REPAIR_TREE_VERSION)
		return err_set(ERR_PROTOCOL,
			       "tree exchange version %u (this node "
			       "speaks %u)",
			       m->tree_version, REPAIR_TREE_VERSION);
	/* the decoder bounds depth and levels <= depth */
	struct merkle_range mr = {repair_task_cur_range(s)->start,
				  repair_task_cur_range(s)->end};
	if (m->levels > REPAIR_TOP_LEVELS ||
	    !merkle_level_fits(mr, (int)m->depth))
		return err_set(ERR_PROTOCOL, "a tree of depth %u, %u levels",
			       m->depth, m->levels);
	size_t n = (size_t)1 << m->levels;
	if (m->hashes.len != 8 * n)
		return err_set(ERR_PROTOCOL,
			       "%zu bytes of hashes for %u "
			       "levels",
			       m->hashes.len, m->levels);
	free(p->top);
	p->top = malloc(2 * n * sizeof(*p->top));
	if (!p->top)
		return err_set(ERR_NOMEM, "tree");
	const uint8_t *h = m->hashes.ptr;
	p->top[1] = be64_load(h);
	h += 8;
	for (size_t l = 1; l <= m->levels; l++)
		for (size_t i = 0; i < (size_t)1 << l; i += 2) {
			size_t k = ((size_t)1 << l) + i;
			p->top[k] = be64_load(h);
			p->top[k + 1] = p->top[k] ^ p->top[k / 2];
			h += 8;
		}
	p->depth = m->depth;
	p->levels = m->levels;
	return 0;
}

int repair_sync_take_tree(struct replica *p, const struct repair_msg *m)
{
	if (m->hashes.len != 8 * p->nreq)
		return err_set(ERR_PROTOCOL,
			       "%zu bytes of hashes for %zu nodes",
			       m->hashes.len, p->nreq);
	free(p->got);
	p->got = malloc((p->nreq ? p->nreq : 1) * sizeof(*p->got));
	if (!p->got)
		return err_set(ERR_NOMEM, "tree");
	for (size_t k = 0; k < p->nreq; k++)
		p->got[k] = be64_load(m->hashes.ptr + 8 * k);
	return 0;
}

/* The trace of the comparison's outcome: the mismatching leaves as
 * coalesced ranges (the first few). */
static void trace_mismatches(struct task *s)
{
	char list[200] = "";
	size_t at = 0;
	for (size_t k = 0; k < s->nmism && k < 4; k++) {
		int n = snprintf(list + at, sizeof(list) - at, " (%lld,%lld]",
				 (long long)s->mism[k].start,
				 (long long)s->mism[k].end);
		if (n < 0 || (size_t)n >= sizeof(list) - at)
			break;
		at += (size_t)n;
	}
	repair_task_trace(
		s,
		"trees compared: %zu mismatched ranges (%zu leaves of depth "
		"%d)%s%s%s",
		s->nmism, s->nf, s->depth, s->nmism ? ":" : "", list,
		s->nmism > 4 ? " ..." : "");
}

/* The mismatching leaves: coalesced ranges for the summary, ROWS asked
 * of each leaf's representatives. */
static void rows_start(struct task *s)
{
	struct repair_range *rg = repair_task_cur_range(s);
	struct merkle_range mr = {rg->start, rg->end};
	s->sess->sum.leaves_mismatched += s->nf;
	for (size_t i = 0; i < s->nf; i++) {
		struct merkle_range lr =
			merkle_node_range(mr, s->depth, s->fidx[i]);
		if (s->nmism && s->mism[s->nmism - 1].end == lr.start) {
			s->mism[s->nmism - 1].end = lr.end;
			continue;
		}
		struct merkle_range *v =
			realloc(s->mism, (s->nmism + 1) * sizeof(*v));
		if (!v) {
			repair_task_fail(
				s, "%s: mismatching ranges: out of memory",
				repair_task_cur_table(s));
			return;
		}
		s->mism = v;
		s->mism[s->nmism++] = lr;
	}
	s->sess->sum.mismatched_ranges += s->nmism;
	trace_mismatches(s);
	s->phase = PHASE_ROWS;
	for (size_t r = 0; r < s->nrep; r++) {
		struct replica *p = &s->rep[r];
		free(p->req);
		p->nreq = 0;
		p->req = malloc(s->nf * sizeof(*p->req));
		if (!p->req) {
			repair_task_fail(s, "%s: row requests: out of memory",
					 repair_task_cur_table(s));
			return;
		}
		for (size_t i = 0; i < s->nf; i++)
			if (s->frep[i * s->nrep + r] == r)
				p->req[p->nreq++] = s->fidx[i];
		if (!p->nreq)
			continue;
		struct repair_msg q = {0};
		q.ranges = &mr;
		q.nranges = 1;
		q.level = (uint32_t)s->depth;
		q.nodes = p->req;
		q.nnodes = p->nreq;
		if (repair_task_send(s, r, REPAIR_VERB_ROWS, &q)) {
			repair_task_fail(s, "%s: sending row requests: %s",
					 repair_task_cur_table(s), err_msg());
			return;
		}
	}
	repair_task_arm(s, s->r->o.validate_timeout_ms);
}

static int entry_cmp(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;
	int c = slice_cmp(a->key, b->key);
	if (!c)
		c = slice_cmp(a->id, b->id);
	if (!c)
		c = (a->replica > b->replica) - (a->replica < b->replica);
	return c;
}

static int u32_cmp(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a > b) - (a < b);
}

/* A ROWS answer of replica i: its rows, and the same rows for every
 * replica it stands for at their leaf (frep). */
int repair_sync_add_entries(struct task *s, size_t i,
			    const struct repair_msg *m)
{
	size_t most = m->nrows * s->nrep;
	if (s->nentries + most > s->entries_cap) {
		size_t cap = s->entries_cap ? s->entries_cap : 256;
		while (cap < s->nentries + most)
			cap *= 2;
		struct entry *v = realloc(s->entries, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "row digests");
		s->entries = v;
		s->entries_cap = cap;
	}
	struct merkle_range mr = {repair_task_cur_range(s)->start,
				  repair_task_cur_range(s)->end};
	for (size_t k = 0; k < m->nrows; k++) {
		const struct repair_row *w = &m->rows[k];
		int64_t token = murmur3_token(w->key.ptr, w->key.len);
		uint32_t leaf = 0;
		if (merkle_contains(mr, token))
			leaf = (uint32_t)merkle_node_of(mr, s->depth, token);
		const uint32_t *at =
			merkle_contains(mr, token)
				? bsearch(&leaf, s->fidx, s->nf,
					  sizeof(*s->fidx), u32_cmp)
				: NULL;
		const uint8_t *rep =
			at ? s->frep + (size_t)(at - s->fidx) * s->nrep : NULL;
		if (!rep || rep[i] != i)
			return err_set(ERR_PROTOCOL,
				       "a row outside the leaves asked");
		void *key =
			arena_memdup(&s->rows_arena, w->key.ptr, w->key.len);
		void *id = arena_memdup(&s->rows_arena, w->id.ptr, w->id.len);
		if (!key || !id)
			return err_set(ERR_NOMEM, "row digests");
		for (size_t r = 0; r < s->nrep; r++) {
			if (rep[r] != i)
				continue;
			struct entry *e = &s->entries[s->nentries++];
			e->key = slice_make(key, w->key.len);
			e->id = slice_make(id, w->id.len);
			memcpy(e->digest, w->digest, 16);
			e->replica = (uint8_t)r;
		}
	}
	s->sess->sum.rows_hashed += m->nrows;
	return 0;
}

static int want(struct replica *p, const struct entry *e)
{
	if (p->nwanted == p->wanted_cap) {
		size_t cap = p->wanted_cap ? p->wanted_cap * 2 : 64;
		struct repair_row *v = realloc(p->wanted, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "wanted rows");
		p->wanted = v;
		p->wanted_cap = cap;
	}
	p->wanted[p->nwanted].key = e->key;
	p->wanted[p->nwanted].id = e->id;
	p->nwanted++;
	return 0;
}

/* Rows whose versions differ: one copy of each distinct version is
 * fetched from a replica holding it, this node when it does (its copy
 * does not cross the network). */
void repair_sync_rows_done(struct task *s)
{
	if (s->nentries > 1)
		qsort(s->entries, s->nentries, sizeof(*s->entries), entry_cmp);
	for (size_t i = 0; i < s->nentries;) {
		size_t j = i + 1;
		bool same = true;
		while (j < s->nentries &&
		       slice_eq(s->entries[j].key, s->entries[i].key) &&
		       slice_eq(s->entries[j].id, s->entries[i].id)) {
			if (memcmp(s->entries[j].digest, s->entries[i].digest,
				   16))
				same = false;
			j++;
		}
		if (same && j - i == s->nrep) {
			i = j;
			continue;
		}
		s->sess->sum.rows_mismatched++;
		for (size_t k = i; k < j; k++) {
			bool seen = false;
			for (size_t l = i; l < k && !seen; l++)
				seen = !memcmp(s->entries[l].digest,
					       s->entries[k].digest, 16);
			size_t from = k;
			for (size_t l = k + 1; l < j && !seen; l++)
				if (s->rep[s->entries[l].replica].self &&
				    !memcmp(s->entries[l].digest,
					    s->entries[k].digest, 16))
					from = l;
			if (!seen && want(&s->rep[s->entries[from].replica],
					  &s->entries[from])) {
				repair_task_fail(s, "%s: %s",
						 repair_task_cur_table(s),
						 err_msg());
				return;
			}
		}
		i = j;
	}
	s->phase = PHASE_FETCH;
	for (size_t i = 0; i < s->nrep; i++) {
		if (!s->rep[i].nwanted)
			continue;
		struct merkle_range mr = {repair_task_cur_range(s)->start,
					  repair_task_cur_range(s)->end};
		struct repair_msg q = {0};
		q.ranges = &mr;
		q.nranges = 1;
		q.level = (uint32_t)s->depth;
		q.nodes = s->fidx;
		q.nnodes = s->nf;
		q.rows = s->rep[i].wanted;
		q.nrows = s->rep[i].nwanted;
		if (repair_task_send(s, i, REPAIR_VERB_FETCH, &q)) {
			repair_task_fail(s, "%s: sending fetch requests: %s",
					 repair_task_cur_table(s), err_msg());
			return;
		}
	}
	if (!repair_task_waiting(
		    s)) { /* the trees differed, the rows did not */
		repair_task_progress(
			s,
			"%s (%lld,%lld]: %zu mismatched ranges, no row "
			"differs",
			repair_task_cur_table(s),
			(long long)repair_task_cur_range(s)->start,
			(long long)repair_task_cur_range(s)->end, s->nmism);
		repair_task_next(s);
		return;
	}
	repair_task_arm(s, s->r->o.request_timeout_ms);
}

static int frag_cmp(const void *x, const void *y)
{
	const struct storage_mutation *a = *(struct storage_mutation *const *)x;
	const struct storage_mutation *b = *(struct storage_mutation *const *)y;
	return slice_cmp(storage_mutation_key(a), storage_mutation_key(b));
}

struct merged_rows {
	struct slice *ids;
	uint8_t (*digests)[16];
	size_t n, cap;
	struct arena *arena;
};

static int collect_row(void *arg, struct slice id, const uint8_t dg[16])
{
	struct merged_rows *m = arg;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		struct slice *ids = realloc(m->ids, cap * sizeof(*ids));
		if (!ids)
			return err_set(ERR_NOMEM, "merged rows");
		m->ids = ids;
		uint8_t(*d)[16] = realloc(m->digests, cap * sizeof(*d));
		if (!d)
			return err_set(ERR_NOMEM, "merged rows");
		m->digests = d;
		m->cap = cap;
	}
	void *c = arena_memdup(m->arena, id.ptr, id.len);
	if (!c)
		return err_set(ERR_NOMEM, "merged rows");
	m->ids[m->n] = slice_make(c, id.len);
	memcpy(m->digests[m->n], dg, 16);
	m->n++;
	return 0;
}

/* Whether replica i answered the digest `dg` for (key, id). */
static bool replica_has(struct task *s, size_t i, struct slice key,
			struct slice id, const uint8_t dg[16])
{
	struct entry probe = {.key = key, .id = id, .replica = (uint8_t)i};
	const struct entry *e = bsearch(&probe, s->entries, s->nentries,
					sizeof(*s->entries), entry_cmp);
	return e && memcmp(e->digest, dg, 16) == 0;
}

static int push_apply(struct replica *p, const struct storage_mutation *m,
		      struct repair_peer_stats *st, size_t rows)
{
	if (p->nends == p->ends_cap) {
		size_t cap = p->ends_cap ? p->ends_cap * 2 : 64;
		size_t *v = realloc(p->ends, cap * sizeof(*v));
		if (!v)
			return err_set(ERR_NOMEM, "apply list");
		p->ends = v;
		p->ends_cap = cap;
	}
	size_t before = p->apply.len;
	if (storage_mutation_encode(m, &p->apply))
		return -1;
	p->ends[p->nends++] = p->apply.len;
	st->rows_streamed += rows;
	st->bytes_streamed += p->apply.len - before;
	return 0;
}

/* Merges one partition's fetched versions and queues, for each replica,
 * the merged rows it does not hold. */
static int merge_partition(struct task *s, struct storage_mutation **group,
			   size_t n)
{
	struct storage_mutation *m = storage_fragment_merge(s->meta, group, n);
	if (!m)
		return -1;
	struct arena a;
	arena_create(&a, 0);
	struct merged_rows rows = {.arena = &a};
	struct slice *ids = NULL;
	int rc = storage_fragment_rows(m, collect_row, &rows);
	if (!rc && rows.n && !(ids = malloc(rows.n * sizeof(*ids))))
		rc = err_set(ERR_NOMEM, "row ids");
	struct slice key = storage_mutation_key(m);
	for (size_t i = 0; i < s->nrep && !rc; i++) {
		size_t k = 0;
		for (size_t r = 0; r < rows.n; r++)
			if (!replica_has(s, i, key, rows.ids[r],
					 rows.digests[r]))
				ids[k++] = rows.ids[r];
		if (!k)
			continue;
		struct storage_mutation *sel =
			storage_fragment_select_rows(s->meta, m, ids, k);
		if (!sel) {
			rc = -1;
			break;
		}
		rc = push_apply(&s->rep[i], sel,
				&s->sess->peers[s->rep[i].peer], k);
		storage_mutation_delete(sel);
	}
	free(ids);
	free(rows.ids);
	free(rows.digests);
	arena_destroy(&a);
	storage_mutation_delete(m);
	return rc;
}

/* Whether the stream throttle lets `bytes` go now; if not, the pace
 * timer is armed for when the bucket has room. A message is sent when
 * the bucket is not in debt, then its bytes are booked (one message may
 * exceed a second's budget alone: the next waits for it). */
static bool stream_room(struct task *s, size_t bytes)
{
	struct repair *r = s->r;
	uint64_t rate = r->o.stream_throughput;
	if (!rate)
		return true;
	uint64_t now = env_mono_us(r->env);
	if (r->stream_free_us > now) {
		uint64_t wait = r->stream_free_us - now;
		r->stream.waits++;
		r->stream.waited_us += wait;
		env_timer_arm(r->env, s->pace_timer, wait);
		/* the step's deadline runs from when the rows can go: the
		 * answers to what went meanwhile come in before it */
		repair_task_arm(s, wait / 1000 + r->o.request_timeout_ms);
		return false;
	}
	/* unused time is not banked: the bytes are paid from now */
	r->stream_free_us =
		now + (uint64_t)((double)bytes * 1e6 / (double)rate);
	return true;
}

/* Sends each replica its selections, in APPLY messages of at most
 * message_bytes (one selection may exceed it alone), from where the last
 * call stopped: 1 when the throttle paused it (the pace timer resumes),
 * 0 when all are sent, -1. */
static int send_applies(struct task *s)
{
	for (size_t i = s->send_rep; i < s->nrep; i++, s->send_first = 0) {
		struct replica *p = &s->rep[i];
		s->send_rep = i;
		for (size_t first = s->send_first, last; first < p->nends;
		     first = last) {
			size_t from = first ? p->ends[first - 1] : 0;
			last = first + 1;
			while (last < p->nends &&
			       p->ends[last] - from <= s->r->o.message_bytes)
				last++;
			if (!stream_room(s, p->ends[last - 1] - from)) {
				s->send_first = first;
				return 1;
			}
			struct slice *fr = malloc((last - first) * sizeof(*fr));
			if (!fr)
				return err_set(ERR_NOMEM, "apply message");
			for (size_t k = first; k < last; k++) {
				size_t b = k ? p->ends[k - 1] : 0;
				fr[k - first] = slice_make(p->apply.data + b,
							   p->ends[k] - b);
			}
			struct repair_msg q = {0};
			q.frags = fr;
			q.nfrags = last - first;
			int rc = repair_task_send(s, i, REPAIR_VERB_APPLY, &q);
			free(fr);
			if (rc)
				return -1;
			s->r->stream.bytes += p->ends[last - 1] - from;
		}
	}
	s->send_rep = s->nrep;
	return 0;
}

/* Sends what the throttle allows; once everything is out, the phase ends
 * with the last answer (or now, when every answer is in). */
static void send_more(struct task *s)
{
	int rc = send_applies(s);
	if (rc < 0) {
		repair_task_fail(s, "%s: sending rows: %s",
				 repair_task_cur_table(s), err_msg());
		return;
	}
	if (rc > 0)
		return;
	s->sending = false;
	if (!repair_task_waiting(s)) {
		repair_sync_apply_done(s);
		return;
	}
	repair_task_arm(s, s->r->o.request_timeout_ms);
}

void repair_sync_send_more(void *arg)
{
	struct task *s = arg;
	if (s->busy && s->sending)
		send_more(s);
}

/* Rows queued to the task's replicas' peers so far. */
static uint64_t rows_queued(struct task *s)
{
	uint64_t n = 0;
	for (size_t i = 0; i < s->nrep; i++)
		n += s->sess->peers[s->rep[i].peer].rows_streamed;
	return n;
}

void repair_sync_fetch_done(struct task *s)
{
	uint64_t queued = rows_queued(s);
	if (s->nfrags > 1)
		qsort(s->frags, s->nfrags, sizeof(*s->frags), frag_cmp);
	for (size_t i = 0; i < s->nfrags;) {
		size_t j = i + 1;
		while (j < s->nfrags &&
		       frag_cmp(&s->frags[i], &s->frags[j]) == 0)
			j++;
		if (merge_partition(s, s->frags + i, j - i)) {
			repair_task_fail(s, "%s: merging rows: %s",
					 repair_task_cur_table(s), err_msg());
			return;
		}
		i = j;
	}
	uint64_t rows = 0, bytes = 0;
	for (size_t i = 0; i < s->nrep; i++) {
		rows += s->rep[i].nends;
		bytes += s->rep[i].apply.len;
	}
	s->rows_streamed = rows_queued(s) - queued;
	s->bytes_streamed = bytes;
	repair_task_progress(
		s,
		"%s (%lld,%lld]: %zu mismatched ranges, %llu partition "
		"updates (%llu bytes) %s",
		repair_task_cur_table(s),
		(long long)repair_task_cur_range(s)->start,
		(long long)repair_task_cur_range(s)->end, s->nmism,
		(unsigned long long)rows, (unsigned long long)bytes,
		s->sess->preview ? "would stream" : "streaming");
	s->phase = PHASE_APPLY;
	s->send_rep = s->send_first = 0;
	if (s->sess->preview) {
		repair_sync_apply_done(s);
		return;
	}
	s->sending = true;
	send_more(s);
}

void repair_sync_apply_done(struct task *s)
{
	repair_task_next(s);
}
