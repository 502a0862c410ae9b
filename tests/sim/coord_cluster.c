/* The coordinator's simulated cluster (coord_cluster.h). */
#include "tests/sim/coord_cluster.h"

#include "common/err.h"
#include "common/murmur3.h"
#include "replication/replication.pb-c.h"
#include "storage/atom_internal.h"
#include "tests/lib/testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* ---- in-memory replica store --------------------------------------------- */

struct part *find_part(struct mnode *n, const struct storage_mutation *m)
{
	for (size_t i = 0; i < n->nparts; i++)
		if (storage_mutation_token(n->parts[i].frag) ==
			    storage_mutation_token(m) &&
		    slice_eq(storage_mutation_key(n->parts[i].frag),
			     storage_mutation_key(m)))
			return &n->parts[i];
	return NULL;
}

/* Merges m into n's partitions. */
static void merge_in(struct mnode *n, const struct storage_mutation *m)
{
	struct part *p = find_part(n, m);
	struct storage_mutation *in[2] = {NULL, (struct storage_mutation *)m};
	if (p)
		in[0] = p->frag;
	struct storage_mutation *merged =
		storage_fragment_merge(n->c->meta, p ? in : in + 1, p ? 2 : 1);
	ck_assert_ptr_nonnull(merged);
	if (p) {
		storage_mutation_delete(p->frag);
		p->frag = merged;
	} else {
		ck_assert_uint_lt(n->nparts, MAX_PARTS);
		n->parts[n->nparts++].frag = merged;
	}
}

static int mem_apply(void *s, const struct storage_mutation *m,
		     storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	if (n->fail_writes) {
		done(arg, -1, ERR_IO);
		return 0;
	}
	merge_in(s, m);
	done(arg, 0, ERR_NONE);
	return 0;
}

static struct storage_mutation *copy_frag(struct mnode *n,
					  const struct storage_mutation *f)
{
	struct storage_mutation *in[1] = {(struct storage_mutation *)f};
	struct storage_mutation *c = storage_fragment_merge(n->c->meta, in, 1);
	ck_assert_ptr_nonnull(c);
	return c;
}

/* ---- a clustered table's rows (simc_new_clustered) ---------------------- */

struct ids {
	struct buf b[MAX_ROWS_SEL];
	size_t n;
};

/* The ids to keep of a fragment: its partition deletion and range
 * tombstones, the static row when `with_static`, and the rows whose
 * encoded clusterings are cks[0..ncks). */
struct sel {
	struct ids *out;
	const struct buf *cks;
	size_t ncks;
	bool with_static;
};

static int sel_row(void *arg, struct slice id, const uint8_t digest[16])
{
	(void)digest;
	struct sel *s = arg;
	bool keep = id.ptr[0] != 2;
	if (id.ptr[0] == 2 && id.len > 1 && id.ptr[1] == CK_STATIC)
		keep = s->with_static;
	for (size_t i = 0; !keep && i < s->ncks; i++)
		keep = id.len == s->cks[i].len + 1 &&
		       memcmp(id.ptr + 1, s->cks[i].data, s->cks[i].len) == 0;
	if (keep) {
		ck_assert_uint_lt(s->out->n, MAX_ROWS_SEL);
		struct buf *b = &s->out->b[s->out->n++];
		buf_init(b);
		ck_assert_int_eq(buf_append(b, id.ptr, id.len), 0);
	}
	return 0;
}

/* f with only the rows cks[0..n) (and its static row, deletions). */
static struct storage_mutation *select_rows(struct mnode *n,
					    const struct storage_mutation *f,
					    const struct buf *cks, size_t ncks,
					    bool with_static)
{
	struct ids *ids = calloc(1, sizeof(*ids));
	ck_assert_ptr_nonnull(ids);
	struct sel s = {ids, cks, ncks, with_static};
	ck_assert_int_eq(storage_fragment_rows(f, sel_row, &s), 0);
	struct slice v[MAX_ROWS_SEL];
	for (size_t i = 0; i < ids->n; i++)
		v[i] = buf_slice(&ids->b[i]);
	struct storage_mutation *m =
		storage_fragment_select_rows(n->c->meta, f, v, ids->n);
	ck_assert_ptr_nonnull(m);
	for (size_t i = 0; i < ids->n; i++)
		buf_free(&ids->b[i]);
	free(ids);
	return m;
}

/* The rows of cmd's single-row slices (as replica filtering protection
 * asks for them) of f; f whole without slices. */
static struct storage_mutation *read_slices(struct mnode *n,
					    const struct storage_mutation *f,
					    const struct storage_read_cmd *cmd)
{
	if (!cmd->slices)
		return copy_frag(n, f);
	ck_assert_uint_le(cmd->slice_count, MAX_ROWS_SEL);
	struct buf cks[MAX_ROWS_SEL];
	for (size_t i = 0; i < cmd->slice_count; i++) {
		const struct storage_slice *sl = &cmd->slices[i];
		/* only single-row slices are asked of this store */
		ck_assert_uint_eq(sl->start_count, n->c->meta->ck_count);
		ck_assert_uint_eq(sl->end_count, n->c->meta->ck_count);
		ck_assert(sl->start_incl && sl->end_incl);
		buf_init(&cks[i]);
		ck_assert_int_eq(storage_ck_encode(&cks[i], CK_ROW, sl->start,
						   sl->start_count),
				 0);
	}
	struct storage_mutation *m =
		select_rows(n, f, cks, cmd->slice_count, cmd->with_static);
	for (size_t i = 0; i < cmd->slice_count; i++)
		buf_free(&cks[i]);
	return m;
}

/* The rows of f whose live v is one of ix's values (as this replica
 * holds them: its index, row-level) into cks (encoded clusterings);
 * how many. */
static size_t matching_rows(struct mnode *n, const struct storage_mutation *f,
			    const struct repl_index_expr *ix, struct buf *cks)
{
	struct storage_read_cmd cmd = {.with_static = true};
	struct storage_result *r = NULL;
	ck_assert_int_eq(
		storage_fragment_resolve(n->c->meta, f, &cmd, 1700000000, &r),
		0);
	size_t k = 0;
	for (size_t i = 0; i < r->row_count; i++) {
		bool match = false;
		for (size_t j = 0; j < r->rows[i].cell_count; j++) {
			struct storage_cell_view *cv = &r->rows[i].cells[j];
			for (size_t x = 0; x < ix->n_vals; x++)
				match = match ||
					(cv->column == n->c->v_col &&
					 slice_eq(cv->value, ix->vals[x]));
		}
		if (!match)
			continue;
		ck_assert_uint_lt(k, MAX_ROWS_SEL);
		buf_init(&cks[k]);
		ck_assert_int_eq(storage_ck_encode(&cks[k], CK_ROW,
						   r->rows[i].clustering,
						   r->rows[i].clustering_count),
				 0);
		k++;
	}
	storage_result_delete(r);
	return k;
}

static void mem_read(void *s, const uint8_t table_id[16],
		     const struct storage_read_cmd *cmd,
		     repl_store_read_fn done, void *arg)
{
	struct mnode *n = s;
	(void)table_id;
	if (n->fail_tombstones) {
		done(arg, -1, ERR_TOMBSTONES, NULL, 0, false);
		return;
	}
	struct storage_mutation **out = malloc(sizeof(*out));
	ck_assert_ptr_nonnull(out);
	struct storage_mutation *probe =
		storage_mutation_new(n->c->meta, cmd->key, cmd->key_len);
	struct part *p = find_part(n, probe);
	out[0] = p ? (n->c->clustered ? read_slices(n, p->frag, cmd)
				      : copy_frag(n, p->frag))
		   : probe;
	if (p)
		storage_mutation_delete(probe);
	n->rows_read += storage_mutation_rows(out[0]);
	if (cmd->stats && n->c->clustered)
		cmd->stats->live_rows += storage_mutation_rows(out[0]);
	else if (cmd->stats) /* the partitions here hold one row each */
		cmd->stats->live_rows += p != NULL;
	done(arg, 0, ERR_NONE, out, 1, false);
}

static int part_cmp(const void *a, const void *b)
{
	const struct storage_mutation *x = *(struct storage_mutation *const *)a;
	const struct storage_mutation *y = *(struct storage_mutation *const *)b;
	int64_t tx = storage_mutation_token(x), ty = storage_mutation_token(y);
	if (tx != ty)
		return tx < ty ? -1 : 1;
	return slice_cmp(storage_mutation_key(x), storage_mutation_key(y));
}

/* Whether partition f's live value (column v) is one of ix's values, as
 * this replica holds it (every partition without ix). */
static bool index_match(struct mnode *n, const struct storage_mutation *f,
			const struct repl_index_expr *ix)
{
	if (!ix)
		return true;
	char v[64];
	int64_t ts;
	frag_value(n->c, f, v, sizeof(v), &ts);
	bool match = false;
	for (size_t x = 0; x < ix->n_vals && !match; x++)
		match = ts != INT64_MIN && ix->vals[x].len == strlen(v) &&
			memcmp(ix->vals[x].ptr, v, strlen(v)) == 0;
	return match;
}

/* The partitions of (start, end] that match ix (all without), in token
 * order, at most max. */
static void scan_matching(struct mnode *n, int64_t start, int64_t end,
			  const struct storage_read_cmd *cmd,
			  const struct repl_index_expr *ix, uint32_t max,
			  repl_store_read_fn done, void *arg)
{
	struct storage_mutation **all = malloc((n->nparts + 1) * sizeof(*all));
	ck_assert_ptr_nonnull(all);
	size_t k = 0;
	for (size_t i = 0; i < n->nparts; i++) {
		const struct storage_mutation *f = n->parts[i].frag;
		int64_t t = storage_mutation_token(f);
		if (t > start && t <= end &&
		    (n->c->clustered || index_match(n, f, ix)))
			all[k++] = n->parts[i].frag;
	}
	qsort(all, k, sizeof(*all), part_cmp);
	size_t w = 0;
	bool cut = false;
	for (size_t i = 0; i < k; i++) {
		struct storage_mutation *m;
		if (n->c->clustered && ix) {
			/* a row-level index: the partitions with a
			 * matching row, its rows alone when told so */
			struct buf cks[MAX_ROWS_SEL];
			size_t nm = matching_rows(n, all[i], ix, cks);
			m = !nm ? NULL
			    : ix->rows && !n->old_index_rows
				    ? select_rows(n, all[i], cks, nm,
						  cmd->with_static)
				    : copy_frag(n, all[i]);
			for (size_t x = 0; x < nm; x++)
				buf_free(&cks[x]);
		} else
			m = copy_frag(n, all[i]);
		if (!m)
			continue;
		if (w == max) {
			storage_mutation_delete(m);
			cut = true;
			break;
		}
		all[w++] = m;
	}
	k = w;
	for (size_t i = 0; i < k; i++)
		n->rows_read += storage_mutation_rows(all[i]);
	if (cmd->stats && n->c->clustered)
		for (size_t i = 0; i < k; i++)
			cmd->stats->live_rows += storage_mutation_rows(all[i]);
	else if (cmd->stats) /* one row each */
		cmd->stats->live_rows += k;
	done(arg, 0, ERR_NONE, all, k, cut);
}

static void mem_scan(void *s, const uint8_t table_id[16], int64_t start,
		     int64_t end, const struct storage_read_cmd *cmd,
		     uint32_t max, repl_store_read_fn done, void *arg)
{
	(void)table_id;
	scan_matching(s, start, end, cmd, NULL, max, done, arg);
}

/* The simulated index: a partition is a candidate when its live value
 * (column v) is one of the restriction's values, as this replica holds
 * it; the index of a replica that missed an overwrite still lists the
 * partition under its old value. */
static void mem_index_scan(void *s, const uint8_t table_id[16], int64_t start,
			   int64_t end, const struct storage_read_cmd *cmd,
			   const struct repl_index_expr *ix, uint32_t max,
			   repl_store_read_fn done, void *arg)
{
	struct mnode *n = s;
	(void)table_id;
	if (n->index_building) {
		done(arg, -1, ERR_INDEX_NOT_AVAILABLE, NULL, 0, false);
		return;
	}
	if (!n->no_index && !ix->range)
		n->index_scans++;
	if (!n->no_index && !ix->range && ix->rows)
		n->row_scans++;
	scan_matching(n, start, end, cmd, n->no_index || ix->range ? NULL : ix,
		      max, done, arg);
}

void simc_apply(struct simc *c, int i, const struct storage_mutation *m)
{
	merge_in(&c->nodes[i], m);
}

static const struct storage_table_meta *mem_meta(void *s,
						 const uint8_t table_id[16])
{
	(void)table_id;
	return storage_table_meta_ref(((struct mnode *)s)->c->meta);
}

static void mem_truncate(void *s, const uint8_t table_id[16],
			 storage_done_fn done, void *arg)
{
	struct mnode *n = s;
	ck_assert_int_eq(memcmp(table_id, n->c->meta->id, 16), 0);
	if (n->fail_truncate) {
		done(arg, -1, ERR_IO);
		return;
	}
	for (size_t i = 0; i < n->nparts; i++)
		storage_mutation_delete(n->parts[i].frag);
	n->nparts = 0;
	n->truncates++;
	n->truncated_us = env_wall_us(n->env);
	done(arg, 0, ERR_NONE);
}

static int64_t mem_truncated_at(void *s, const uint8_t table_id[16])
{
	(void)table_id;
	return ((struct mnode *)s)->truncated_us;
}

static const struct repl_store_ops mem_ops = {
	.apply = mem_apply,
	.read = mem_read,
	.scan = mem_scan,
	.index_scan = mem_index_scan,
	.meta = mem_meta,
	.truncate = mem_truncate,
	.truncated_at = mem_truncated_at,
};

/* ---- the simulated cluster ----------------------------------------------- */

static struct ring *hook_ring(void *arg)
{
	return ((struct mnode *)arg)->ring;
}

static bool hook_alive(void *arg, const struct inet_addr *ep)
{
	struct mnode *n = arg;
	for (int i = 0; i < n->c->n; i++)
		if (inet_addr_eq(&n->c->nodes[i].addr, ep))
			return !n->c->down[i];
	return false;
}

static int hook_hint(void *arg, const uint8_t host_id[16], const char *dc,
		     const uint8_t *m, size_t len)
{
	(void)host_id;
	(void)dc;
	(void)m;
	(void)len;
	((struct mnode *)arg)->hints++;
	return 0;
}

static int hook_take_hint(void *arg, const uint8_t host_id[16],
			  const uint8_t *m, size_t len, int64_t created_us)
{
	struct mnode *n = arg;
	(void)m;
	(void)len;
	n->taken++;
	memcpy(n->taken_for, host_id, 16);
	n->taken_created_us = created_us;
	return 0;
}

static const struct ring_strategy *hook_strategy(void *arg,
						 const uint8_t table_id[16])
{
	(void)table_id;
	return ((struct mnode *)arg)->c->strategy;
}

static void hook_trace(void *arg, const uint8_t *session, const char *thread,
		       int64_t elapsed_us, const char *activity)
{
	struct mnode *n = arg;
	ck_assert_int_ge(elapsed_us, 0);
	n->trace_events++;
	memcpy(n->trace_session, session, 16);
	size_t used = strlen(n->trace_log);
	snprintf(n->trace_log + used, sizeof(n->trace_log) - used, "%s|%s\n",
		 thread, activity);
}

static void deliver(void *arg, const struct inet_addr *from, uint32_t verb,
		    const uint8_t *msg, size_t len)
{
	struct mnode *n = arg;
	if ((n->old_reads || n->old_rows) && verb == REPL_VERB_READ) {
		/* what a node without field 7 (and 8) or without field 8
		 * sees: the message without them */
		Cassini__Replication__ReadReq *req =
			cassini__replication__read_req__unpack(NULL, len, msg);
		ck_assert_ptr_nonnull(req);
		size_t nk = req->n_keys, ncm = req->n_cmds;
		if (n->old_reads)
			req->n_keys = 0;
		req->n_cmds = 0;
		size_t sz =
			cassini__replication__read_req__get_packed_size(req);
		uint8_t *buf = malloc(sz ? sz : 1);
		ck_assert_ptr_nonnull(buf);
		cassini__replication__read_req__pack(req, buf);
		req->n_keys = nk;
		req->n_cmds = ncm;
		cassini__replication__read_req__free_unpacked(req, NULL);
		repl_receive(n->repl, from, verb, buf, sz);
		free(buf);
		return;
	}
	repl_receive(n->repl, from, verb, msg, len);
}

/* A process for node m: a fresh env at its address and a coordinator.
 * Its store (the memory map) outlives restarts, as storage does. */
void mnode_start(struct mnode *m)
{
	struct simc *c = m->c;
	m->env = sim_env_new(c->sim, &m->addr);
	env_set_receiver(m->env, deliver, m);
	struct repl_options o;
	repl_options_default(&o);
	o.self = m->addr;
	char bl[300];
	snprintf(bl, sizeof(bl), "%s/batchlog%d", c->dir, m->idx);
	o.batchlog_dir = bl;
	if (c->max_inflight)
		o.max_inflight = c->max_inflight;
	o.tombstone_warn_threshold = c->tombstone_warn;
	struct repl_hooks h = {.ring = hook_ring,
			       .is_alive = hook_alive,
			       .hint = hook_hint,
			       .take_hint = hook_take_hint,
			       .strategy = hook_strategy,
			       .trace = hook_trace,
			       .arg = m};
	m->repl = repl_new(m->env, &o, &mem_ops, m, &h);
	ck_assert_ptr_nonnull(m->repl);
	m->killed = false;
}

static struct simc *simc_build(uint64_t seed, int n, const char *const *dcs,
			       bool clustered)
{
	struct simc *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->sim = sim_new(seed, 1700000000000000LL);
	c->n = n;
	c->clustered = clustered;
	snprintf(c->dir, sizeof(c->dir), "%s", test_tmpdir("coordinator"));
	uint8_t id[16] = {0x42};
	c->meta = storage_table_meta_new("ks", "t", id);
	struct storage_type text = {.kind = STORAGE_TYPE_TEXT};
	ck_assert_int_ge(storage_table_meta_add_column(
				 c->meta, "k", STORAGE_COLUMN_PARTITION_KEY,
				 &text, false),
			 0);
	if (clustered)
		ck_assert_int_ge(
			storage_table_meta_add_column(c->meta, "c",
						      STORAGE_COLUMN_CLUSTERING,
						      &text, false),
			0);
	c->v_col = storage_table_meta_add_column(
		c->meta, "v", STORAGE_COLUMN_REGULAR, &text, false);
	ck_assert_int_ge(c->v_col, 0);
	static int64_t tokens[MAX_NODES][8];
	struct ring_builder *b = ring_builder_new();
	for (int i = 0; i < n; i++) {
		struct mnode *m = &c->nodes[i];
		m->c = c;
		m->idx = i;
		m->addr = sim_node_addr(i);
		for (int k = 0; k < 8; k++)
			tokens[i][k] = (int64_t)(sim_random(c->sim) >> 1) *
				       ((k & 1) ? 1 : -1);
		struct ring_endpoint ep = {.addr = m->addr,
					   .dc = dcs[i],
					   .rack = "r1",
					   .status = RING_STATUS_NORMAL,
					   .tokens = tokens[i],
					   .num_tokens = 8};
		ep.host_id[0] = (uint8_t)(i + 1);
		ck_assert_int_eq(ring_builder_set_endpoint(b, &ep), 0);
	}
	for (int i = 0; i < n; i++) {
		struct mnode *m = &c->nodes[i];
		ring_builder_set_local(b, &m->addr);
		m->ring = ring_builder_build(b);
		ck_assert_ptr_nonnull(m->ring);
		mnode_start(m);
	}
	ring_builder_delete(b);
	return c;
}

/* `dcs[i]` names node i's datacenter; each node gets 8 tokens. */
struct simc *simc_new(uint64_t seed, int n, const char *const *dcs)
{
	return simc_build(seed, n, dcs, false);
}

struct simc *simc_new_clustered(uint64_t seed, int n, const char *const *dcs)
{
	return simc_build(seed, n, dcs, true);
}

struct storage_mutation *make_row_write(struct simc *c, const char *key,
					const char *ck, const char *val,
					int64_t ts)
{
	struct storage_mutation *m = storage_mutation_new(
		c->meta, (const uint8_t *)key, strlen(key));
	ck_assert_ptr_nonnull(m);
	struct slice cv = slice_make((const uint8_t *)ck, strlen(ck));
	ck_assert_int_eq(storage_mutation_set_row(m, &cv, 1), 0);
	if (!val) {
		ck_assert_int_eq(
			storage_mutation_delete_row(m, ts, ts / 1000000), 0);
		return m;
	}
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, 0, ts / 1000000),
			 0);
	ck_assert_int_eq(storage_mutation_put(m, c->v_col, NULL, 0,
					      (const uint8_t *)val, strlen(val),
					      ts, 0, ts / 1000000),
			 0);
	return m;
}

void simc_delete(struct simc *c)
{
	for (int i = 0; i < c->n; i++) {
		struct mnode *m = &c->nodes[i];
		repl_delete(m->repl);
		ring_unref(m->ring);
		for (size_t k = 0; k < m->nparts; k++)
			storage_mutation_delete(m->parts[k].frag);
	}
	sim_delete(c->sim);
	storage_table_meta_delete(c->meta);
	test_tmpdir_remove(c->dir);
	free(c);
}

/* Marks node i down (failure detector) and stops it (messages lost). */
void simc_kill(struct simc *c, int i)
{
	c->down[i] = true;
	c->nodes[i].killed = true;
	sim_env_kill(c->sim, c->nodes[i].env);
}

/* kill -9 then start again: a new process, the same data. */
void simc_restart(struct simc *c, int i)
{
	repl_delete(c->nodes[i].repl);
	mnode_start(&c->nodes[i]);
	c->down[i] = false;
}

struct storage_mutation *make_write(struct simc *c, const char *key,
				    const char *val, int64_t ts)
{
	uint8_t k[64];
	size_t kl = strlen(key);
	memcpy(k, key, kl);
	struct storage_mutation *m = storage_mutation_new(c->meta, k, kl);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, 0, ts / 1000000),
			 0);
	ck_assert_int_eq(storage_mutation_put(m, c->v_col, NULL, 0,
					      (const uint8_t *)val, strlen(val),
					      ts, 0, ts / 1000000),
			 0);
	return m;
}

void on_write(void *arg, const struct repl_result *res)
{
	struct outcome *o = arg;
	ck_assert(!o->done);
	o->done = true;
	o->res = *res;
}

void on_read(void *arg, const struct repl_result *res,
	     struct storage_mutation *frag)
{
	struct outcome *o = arg;
	ck_assert(!o->done);
	o->done = true;
	o->res = *res;
	o->frag = frag;
}

bool outcome_done(void *arg)
{
	return ((struct outcome *)arg)->done;
}

struct outcome do_write(struct simc *c, int coord,
			const struct ring_strategy *s, int cl, const char *key,
			const char *val, int64_t ts)
{
	struct outcome o = {0};
	struct storage_mutation *m = make_write(c, key, val, ts);
	struct repl_mutation rm = {m, s};
	repl_write(c->nodes[coord].repl, &rm, 1, cl, REPL_WRITE_SIMPLE,
		   on_write, &o);
	storage_mutation_delete(m);
	ck_assert(sim_run_until(c->sim, outcome_done, &o, 30000000));
	return o;
}

/* The value of `key` a read at `cl` returns ("" if none), or NULL when the
 * read failed (res tells). */
/* Starts a read of `key` at `cl` from `coord`; `o` is filled when it
 * completes. */
void start_read(struct simc *c, int coord, const struct ring_strategy *s,
		int cl, const char *key, bool read_repair, struct outcome *o)
{
	struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
				       .key_len = strlen(key),
				       .with_static = true};
	struct repl_read q = {
		.table_id = c->meta->id,
		.meta = c->meta,
		.strategy = s,
		.cl = cl,
		.cmd = &cmd,
		.token = murmur3_token((const uint8_t *)key, strlen(key)),
		.read_repair = read_repair};
	repl_read(c->nodes[coord].repl, &q, on_read, o);
}

struct outcome do_read(struct simc *c, int coord, const struct ring_strategy *s,
		       int cl, const char *key)
{
	struct outcome o = {0};
	start_read(c, coord, s, cl, key, true, &o);
	ck_assert(sim_run_until(c->sim, outcome_done, &o, 30000000));
	return o;
}

/* The value cell of a fragment read back through resolve, or "". */
void frag_value(struct simc *c, const struct storage_mutation *f, char *out,
		size_t cap, int64_t *ts)
{
	struct storage_read_cmd cmd = {.key = NULL, .with_static = true};
	struct storage_result *r = NULL;
	out[0] = 0;
	*ts = INT64_MIN;
	ck_assert_int_eq(
		storage_fragment_resolve(c->meta, f, &cmd, 1700000000, &r), 0);
	if (r->row_count > 0)
		for (size_t i = 0; i < r->rows[0].cell_count; i++) {
			struct storage_cell_view *cv = &r->rows[0].cells[i];
			size_t n = cv->value.len < cap - 1 ? cv->value.len
							   : cap - 1;
			memcpy(out, cv->value.ptr, n);
			out[n] = 0;
			*ts = cv->ts;
		}
	storage_result_delete(r);
}

struct outcome do_truncate(struct simc *c, int coord)
{
	struct outcome o = {0};
	repl_truncate(c->nodes[coord].repl, c->meta->id, on_write, &o);
	ck_assert(sim_run_until(c->sim, outcome_done, &o, 120000000));
	return o;
}

struct ring_strategy *simple(int rf)
{
	char v[8];
	snprintf(v, sizeof(v), "%d", rf);
	const char *k[] = {"class", "replication_factor"};
	const char *val[] = {"SimpleStrategy", v};
	struct ring_strategy *s = ring_strategy_new(k, val, 2, false);
	ck_assert_ptr_nonnull(s);
	return s;
}

struct ring_strategy *nts(int rf1, int rf2)
{
	char a[8], b[8];
	snprintf(a, sizeof(a), "%d", rf1);
	snprintf(b, sizeof(b), "%d", rf2);
	const char *k[] = {"class", "dc1", "dc2"};
	const char *val[] = {"NetworkTopologyStrategy", a, b};
	struct ring_strategy *s = ring_strategy_new(k, val, 3, false);
	ck_assert_ptr_nonnull(s);
	return s;
}

void on_range(void *arg, const struct repl_result *res,
	      struct storage_mutation **frags, size_t n, int64_t resume,
	      bool finished)
{
	struct range_out *o = arg;
	o->done = true;
	o->res = *res;
	o->f = frags;
	o->n = n;
	o->resume = resume;
	o->finished = finished;
}

bool range_done(void *arg)
{
	return ((struct range_out *)arg)->done;
}

struct repl_range whole_ring_range(struct simc *c,
				   const struct ring_strategy *s, int cl,
				   const struct storage_read_cmd *cmd,
				   uint32_t max)
{
	return (struct repl_range){.table_id = c->meta->id,
				   .meta = c->meta,
				   .strategy = s,
				   .cl = cl,
				   .cmd = cmd,
				   .start = INT64_MIN,
				   .end = INT64_MAX,
				   .max_partitions = max};
}

void run_range_step(struct simc *c, int coord, const struct repl_range *q,
		    struct range_out *o)
{
	memset(o, 0, sizeof(*o));
	repl_range_step(c->nodes[coord].repl, q, on_range, o);
	ck_assert(sim_run_until(c->sim, range_done, o, 30000000));
}

void range_out_free(struct range_out *o)
{
	for (size_t i = 0; i < o->n; i++)
		storage_mutation_delete(o->f[i]);
	free(o->f);
	o->f = NULL;
	o->n = 0;
}

bool names_failure(const struct simc *c, const struct repl_result *res, int i,
		   uint16_t code)
{
	const struct inet_addr *a = &c->nodes[i].addr;
	for (uint32_t k = 0; k < res->n_failed_listed; k++) {
		const struct inet_addr *f = &res->failed[k].endpoint;
		if (f->family == a->family && !memcmp(f->ip, a->ip, 16) &&
		    res->failed[k].code == code)
			return true;
	}
	return false;
}
