/* storage, model-based: long random sequences of writes, every kind of
 * delete, TTLs, clock jumps, flushes, compactions, clean restarts and
 * simulated power cuts (fault env), checked after every step against a
 * plain in-memory model that knows nothing of memtables or SSTables.
 * Sync mode `batch`: every acknowledged write must survive a crash.
 *
 * Incremental repair too: anticompactions of random token ranges, then
 * finalize or fail. The model knows each winning cell's repair state
 * (pending from the anticompaction that took it, repaired from the
 * finalize, unrepaired when overwritten), and the check walks every live
 * SSTable offline: a live winning cell the model calls repaired (or
 * pending) is in a repaired (pending) SSTable, so a compaction that
 * merged repaired and unrepaired SSTables (its output unrepaired) is
 * caught. */
#include "common/env_real.h"
#include "common/err.h"
#include "common/rand.h"
#include "conf/conf.h"
#include "storage/sstable_tool.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fault_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed;

enum { COL_PK, COL_C, COL_S, COL_V, COL_TAGS };
#define NKEYS     5
#define NCK       10
#define STATIC_CK (-1)

/* ---- the model ----------------------------------------------------------- */

struct mcell {                        /* one reconciled cell/marker/deletion */
	int key, ck, col, kind, path; /* col -1 = row level; path -1 = none */
	bool tomb, exp;
	int64_t ts, ldt;
	int value;
	bool used;
	int rs; /* repair state: RS_* */
};

enum { RS_UNREPAIRED = 0, RS_PENDING, RS_REPAIRED };

struct mrt {
	int key, lo, hi;
	bool lo_incl, hi_incl;
	int64_t ts;
};

struct model {
	struct mcell cells[4096];
	size_t ncells;
	struct mrt rts[4096];
	size_t nrt;
	int64_t pdel[NKEYS];
};

/* Cassandra's rule, written out independently of storage_atom_reconcile. */
static bool newer(const struct mcell *a, const struct mcell *b)
{
	if (a->ts != b->ts)
		return a->ts > b->ts;
	if (a->tomb != b->tomb)
		return a->tomb;
	if (a->exp != b->exp)
		return a->exp;
	if ((a->tomb || a->exp) && a->ldt != b->ldt)
		return a->ldt > b->ldt;
	return a->value > b->value;
}

static void model_put(struct model *m, struct mcell c)
{
	for (size_t i = 0; i < m->ncells; i++) {
		struct mcell *x = &m->cells[i];
		if (x->key == c.key && x->ck == c.ck && x->col == c.col &&
		    x->kind == c.kind && x->path == c.path) {
			if (newer(&c, x))
				*x = c;
			return;
		}
	}
	ck_assert_uint_lt(m->ncells, 4096);
	m->cells[m->ncells++] = c;
}

static const struct mcell *model_get(const struct model *m, int key, int ck,
				     int col, int kind, int path)
{
	for (size_t i = 0; i < m->ncells; i++) {
		const struct mcell *x = &m->cells[i];
		if (x->key == key && x->ck == ck && x->col == col &&
		    x->kind == kind && x->path == path)
			return x;
	}
	return NULL;
}

static bool covered_by_rt(const struct model *m, int key, int ck, int64_t ts)
{
	if (ck == STATIC_CK)
		return false;
	for (size_t i = 0; i < m->nrt; i++) {
		const struct mrt *r = &m->rts[i];
		if (r->key != key || ts > r->ts)
			continue;
		bool after = ck > r->lo || (ck == r->lo && r->lo_incl);
		bool before = ck < r->hi || (ck == r->hi && r->hi_incl);
		if (after && before)
			return true;
	}
	return false;
}

/* Whether a live-kind cell is visible now. */
static bool visible(const struct model *m, const struct mcell *c, int64_t now)
{
	if (!c || c->tomb || (c->exp && c->ldt <= now))
		return false;
	if (c->ts <= m->pdel[c->key])
		return false;
	const struct mcell *rd = model_get(m, c->key, c->ck, -1, 0, -1);
	if (rd && c->ts <= rd->ts)
		return false;
	if (c->col >= 0) {
		const struct mcell *cd =
			model_get(m, c->key, c->ck, c->col, 0, -1);
		if (cd && c->ts <= cd->ts)
			return false;
	}
	return !covered_by_rt(m, c->key, c->ck, c->ts);
}

/* ---- the fixture --------------------------------------------------------- */

struct fx {
	struct env *real;
	struct fault_env *fe;
	char dir[512], data[600], log[600];
	struct storage_table_meta *t;
	struct storage_options o;
	struct storage *db;
	struct model *m;
	struct rng r;
	int64_t ts, now;
	/* incremental repair: the session pending (if any) and its range */
	bool pending;
	uint8_t session[16];
	struct storage_token_range range;
	int64_t token[NKEYS];
	int repairs;
};

static const char *keyname(int k)
{
	static const char *names[NKEYS] = {"alpha", "beta", "gamma", "delta",
					   "epsilon"};
	return names[k];
}

static void db_open(struct fx *f)
{
	f->db = storage_new(&f->o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	if (storage_start(f->db))
		ck_abort_msg("start: %s", err_msg());
}

static struct slice ival(uint8_t *b, int v)
{
	be32_store(b, (uint32_t)v);
	return slice_make(b, 4);
}

static struct storage_mutation *new_mut(struct fx *f, int key, int ck)
{
	const char *k = keyname(key);
	struct storage_mutation *mu =
		storage_mutation_new(f->t, (const uint8_t *)k, strlen(k));
	uint8_t b[4];
	struct slice s = ival(b, ck);
	if (ck == STATIC_CK)
		storage_mutation_set_static_row(mu);
	else
		ck_assert_int_eq(storage_mutation_set_row(mu, &s, 1), 0);
	return mu;
}

static void apply(struct fx *f, struct storage_mutation *mu)
{
	int rc = storage_apply_sync(f->db, mu);
	if (rc && err_code() == ERR_OVERLOADED) {
		/* memtables full (1 MiB here): as a client would, retry once
		 * the flushes have caught up */
		ck_assert_int_eq(storage_flush(f->db, NULL), 0);
		rc = storage_apply_sync(f->db, mu);
	}
	if (rc)
		ck_abort_msg("apply: %s", err_msg());
	storage_mutation_delete(mu);
}

/* One random write, applied to both the engine and the model. */
static void random_write(struct fx *f)
{
	struct rng *r = &f->r;
	static int last_key, last_ck;
	int key = (int)rng_below(r, NKEYS), ck = (int)rng_below(r, NCK);
	/* mostly increasing timestamps; sometimes the same row again at the
	 * same timestamp, so the reconcile tie-breaks are exercised */
	if (rng_below(r, 5)) {
		f->ts++;
	} else {
		key = last_key;
		ck = last_ck;
	}
	last_key = key;
	last_ck = ck;
	int64_t ts = f->ts;
	uint8_t b[4], pb[4];
	struct mcell c = {
		.key = key, .ck = ck, .path = -1, .ts = ts, .ldt = f->now};
	struct storage_mutation *mu;
	unsigned op = (unsigned)rng_below(r, 100);
	int32_t ttl = rng_below(r, 5) == 0 ? (int32_t)rng_below(r, 30) + 1 : 0;
	int val = (int)rng_below(r, 1000);
	if (op < 30) { /* regular cell (+ marker half the time) */
		mu = new_mut(f, key, ck);
		struct slice v = ival(b, val);
		storage_mutation_put(mu, COL_V, NULL, 0, v.ptr, 4, ts, ttl,
				     f->now);
		c.col = COL_V, c.kind = 1, c.value = val;
		c.exp = ttl > 0, c.ldt = f->now + ttl;
		model_put(f->m, c);
		if (rng_below(r, 2)) {
			storage_mutation_put_marker(mu, ts, ttl, f->now);
			c.col = -1, c.value = 0;
			model_put(f->m, c);
		}
	} else if (op < 45) { /* set element add / remove */
		int e = (int)rng_below(r, 6) - 2;
		mu = new_mut(f, key, ck);
		struct slice p = ival(pb, e);
		c.col = COL_TAGS, c.kind = 1, c.path = e;
		if (op < 40) {
			storage_mutation_put(mu, COL_TAGS, p.ptr, 4, NULL, 0,
					     ts, ttl, f->now);
			c.exp = ttl > 0, c.ldt = f->now + ttl;
		} else {
			storage_mutation_delete_cell(mu, COL_TAGS, p.ptr, 4, ts,
						     f->now);
			c.tomb = true;
		}
		model_put(f->m, c);
	} else if (op < 50) { /* whole-collection delete */
		mu = new_mut(f, key, ck);
		storage_mutation_delete_collection(mu, COL_TAGS, ts, f->now);
		c.col = COL_TAGS, c.kind = 0, c.tomb = true;
		model_put(f->m, c);
	} else if (op < 60) { /* cell delete */
		mu = new_mut(f, key, ck);
		storage_mutation_delete_cell(mu, COL_V, NULL, 0, ts, f->now);
		c.col = COL_V, c.kind = 1, c.tomb = true;
		model_put(f->m, c);
	} else if (op < 70) { /* row delete */
		mu = new_mut(f, key, ck);
		storage_mutation_delete_row(mu, ts, f->now);
		c.col = -1, c.kind = 0, c.tomb = true;
		model_put(f->m, c);
	} else if (op < 78) { /* range delete */
		int lo = (int)rng_below(r, NCK), hi = lo + (int)rng_below(r, 4);
		bool li = rng_below(r, 2), hi_i = rng_below(r, 2);
		bool open_lo = rng_below(r, 6) == 0;
		mu = new_mut(f, key, 0);
		struct slice sl = ival(b, lo), sh = ival(pb, hi);
		storage_mutation_delete_range(mu, &sl, open_lo ? 0 : 1, li, &sh,
					      1, hi_i, ts, f->now);
		ck_assert_uint_lt(f->m->nrt, 4096);
		f->m->rts[f->m->nrt++] = (struct mrt){
			key, open_lo ? -1000 : lo, hi, li || open_lo, hi_i, ts};
	} else if (op < 80) { /* partition delete */
		mu = new_mut(f, key, 0);
		storage_mutation_delete_partition(mu, ts, f->now);
		if (ts > f->m->pdel[key])
			f->m->pdel[key] = ts;
	} else { /* static cell */
		mu = new_mut(f, key, STATIC_CK);
		struct slice v = ival(b, val);
		storage_mutation_put(mu, COL_S, NULL, 0, v.ptr, 4, ts, ttl,
				     f->now);
		c.ck = STATIC_CK, c.col = COL_S, c.kind = 1, c.value = val;
		c.exp = ttl > 0, c.ldt = f->now + ttl;
		model_put(f->m, c);
	}
	apply(f, mu);
}

struct ecell {
	int col, path, value; /* path/value -1 when absent */
};

static size_t expected_cells(const struct fx *f, int key, int ck,
			     struct ecell *out, bool *live)
{
	const struct model *m = f->m;
	size_t n = 0;
	*live = false;
	if (ck != STATIC_CK &&
	    visible(m, model_get(m, key, ck, -1, 1, -1), f->now))
		*live = true;
	int col = ck == STATIC_CK ? COL_S : COL_V;
	const struct mcell *v = model_get(m, key, ck, col, 1, -1);
	if (visible(m, v, f->now)) {
		out[n++] = (struct ecell){col, -1, v->value};
		*live = true;
	}
	for (int e = -2; ck != STATIC_CK && e < 4; e++) {
		const struct mcell *t = model_get(m, key, ck, COL_TAGS, 1, e);
		if (visible(m, t, f->now)) {
			out[n++] = (struct ecell){COL_TAGS, e, -1};
			*live = true;
		}
	}
	return n;
}

static void check_row(const struct storage_row_view *row,
		      const struct ecell *want, size_t n, const char *what)
{
	ck_assert_msg(row->cell_count == n, "%s: %zu cells, model has %zu",
		      what, row->cell_count, n);
	for (size_t i = 0; i < n; i++) {
		const struct storage_cell_view *c = &row->cells[i];
		ck_assert_int_eq(c->column, want[i].col);
		if (want[i].path >= 0 || want[i].col == COL_TAGS) {
			ck_assert_uint_eq(c->path.len, 4);
			ck_assert_int_eq((int)be32_load(c->path.ptr),
					 want[i].path);
		} else {
			ck_assert_uint_eq(c->value.len, 4);
			ck_assert_int_eq((int)be32_load(c->value.ptr),
					 want[i].value);
		}
	}
}

static void check_partition(struct fx *f, int key,
			    const struct storage_result *r, int step)
{
	struct ecell want[16];
	bool live;
	char what[96];
	size_t n = expected_cells(f, key, STATIC_CK, want, &live);
	snprintf(what, sizeof(what), "step %d key %s static", step,
		 keyname(key));
	ck_assert_msg((r->static_row != NULL) == live, "%s: presence", what);
	if (live)
		check_row(r->static_row, want, n, what);
	size_t ri = 0;
	for (int ck = 0; ck < NCK; ck++) {
		n = expected_cells(f, key, ck, want, &live);
		snprintf(what, sizeof(what), "step %d key %s ck %d", step,
			 keyname(key), ck);
		if (!live)
			continue;
		ck_assert_msg(ri < r->row_count, "%s: row missing", what);
		const struct storage_row_view *row = &r->rows[ri++];
		ck_assert_msg((int)be32_load(row->clustering[0].ptr) == ck,
			      "%s: got row %d", what,
			      (int)be32_load(row->clustering[0].ptr));
		check_row(row, want, n, what);
	}
	ck_assert_msg(ri == r->row_count, "step %d key %s: %zu extra rows",
		      step, keyname(key), r->row_count - ri);
}

static void check_all(struct fx *f, int step)
{
	for (int k = 0; k < NKEYS; k++) {
		struct storage_read_cmd cmd = {
			.key = (const uint8_t *)keyname(k),
			.key_len = strlen(keyname(k)),
			.with_static = true};
		struct storage_result *r;
		if (storage_read(f->db, f->t->id, &cmd, &r))
			ck_abort_msg("step %d read: %s", step, err_msg());
		check_partition(f, k, r, step);
		storage_result_delete(r);
	}
}

static void check_scan(struct fx *f, int step)
{
	struct storage_read_cmd cmd = {.with_static = true};
	struct storage_scan *s = storage_scan_open(f->db, f->t->id, 0, 0, &cmd);
	ck_assert_ptr_nonnull(s);
	struct storage_result *r;
	bool seen[NKEYS] = {false};
	int rc;
	while ((rc = storage_scan_next(s, &r)) == 1) {
		int k = -1;
		for (int i = 0; i < NKEYS; i++)
			if (r->key.len == strlen(keyname(i)) &&
			    memcmp(r->key.ptr, keyname(i), r->key.len) == 0)
				k = i;
		ck_assert_int_ge(k, 0);
		seen[k] = true;
		check_partition(f, k, r, step);
		storage_result_delete(r);
	}
	ck_assert_int_eq(rc, 0);
	storage_scan_close(s);
	for (int k = 0; k < NKEYS; k++) {
		if (seen[k])
			continue;
		struct ecell want[16];
		bool live;
		for (int ck = STATIC_CK; ck < NCK; ck++) {
			expected_cells(f, k, ck, want, &live);
			ck_assert_msg(!live, "step %d: scan missed %s", step,
				      keyname(k));
		}
	}
}

/* ---- incremental repair -------------------------------------------------- */

static int key_of(const uint8_t *k, size_t len)
{
	for (int i = 0; i < NKEYS; i++)
		if (strlen(keyname(i)) == len && !memcmp(keyname(i), k, len))
			return i;
	return -1;
}

/* (key, ts) pairs held by SSTables of one state: a bitmap per key over
 * timestamps (the suite's stay below MAXTS). */
#define MAXTS 4096
struct held {
	struct fx *f;
	int st, key;
	uint8_t in[3][NKEYS][MAXTS / 8];
	size_t sstables;
};

static int held_partition(void *arg, const struct storage_sstable_partition *p)
{
	struct held *h = arg;
	h->key = key_of(p->key, p->key_len);
	ck_assert_int_ge(h->key, 0);
	struct fx *f = h->f;
	if (h->st == RS_PENDING)
		ck_assert_msg(f->token[h->key] > f->range.left &&
				      f->token[h->key] <= f->range.right,
			      "%s pending outside the session's range",
			      keyname(h->key));
	return 0;
}

static int held_atom(void *arg, const struct storage_sstable_atom *a)
{
	struct held *h = arg;
	if (a->ts >= 0 && a->ts < MAXTS)
		h->in[h->st][h->key][a->ts / 8] |= (uint8_t)(1u << (a->ts % 8));
	return 0;
}

static void held_sstable(void *arg, const struct storage_sstable_info *s)
{
	struct held *h = arg;
	ck_assert_msg(!(s->pending && s->repaired_at), "pending and repaired");
	if (s->pending)
		ck_assert(!memcmp(s->pending_repair, h->f->session, 16));
	h->st = s->pending ? RS_PENDING
		: s->repaired_at ? RS_REPAIRED
				 : RS_UNREPAIRED;
	struct storage_sstable_dump_fns fns = {
		.partition = held_partition, .atom = held_atom, .arg = h};
	if (storage_sstable_dump(h->f->real, s->path, NULL, 0, &fns))
		ck_abort_msg("%s: %s", s->path, err_msg());
	h->sstables++;
}

/* Every live winning cell the model calls pending or repaired is in an
 * SSTable of that state. */
static void check_repair_states(struct fx *f, int step)
{
	struct held *h = calloc(1, sizeof(*h));
	ck_assert_ptr_nonnull(h);
	h->f = f;
	ck_assert_int_eq(storage_sstables(f->db, f->t->id, held_sstable, h),
			 0);
	for (size_t i = 0; i < f->m->ncells; i++) {
		const struct mcell *c = &f->m->cells[i];
		if (c->rs == RS_UNREPAIRED || c->exp || c->kind != 1 ||
		    !visible(f->m, c, f->now))
			continue;
		ck_assert_int_lt(c->ts, MAXTS);
		ck_assert_msg(h->in[c->rs][c->key][c->ts / 8] &
				      (1u << (c->ts % 8)),
			      "step %d: %s's cell of ts %lld, %s in the model, "
			      "is in no such SSTable (%zu SSTables)",
			      step, keyname(c->key), (long long)c->ts,
			      c->rs == RS_REPAIRED ? "repaired" : "pending",
			      h->sstables);
	}
	free(h);
}

/* Anticompacts a random range for a new session, or finalizes or fails
 * the pending one. */
static void repair_op(struct fx *f, int step)
{
	struct model *m = f->m;
	if (!f->pending) {
		int a = (int)rng_below(&f->r, NKEYS),
		    b = (int)rng_below(&f->r, NKEYS);
		int64_t lo = f->token[a] < f->token[b] ? f->token[a]
						       : f->token[b];
		int64_t hi = f->token[a] < f->token[b] ? f->token[b]
						       : f->token[a];
		if (lo == hi || rng_below(&f->r, 4) == 0)
			lo = INT64_MIN; /* from the ring's start */
		f->range = (struct storage_token_range){lo, hi};
		memset(f->session, 0, 16);
		f->session[0] = 0x5e;
		be32_store(f->session + 12, (uint32_t)++f->repairs);
		ck_assert_int_eq(storage_repair_anticompact(f->db, f->t->id,
							    &f->range, 1,
							    f->session, NULL,
							    NULL),
				 0);
		f->pending = true;
		for (size_t i = 0; i < m->ncells; i++) {
			struct mcell *c = &m->cells[i];
			if (c->rs == RS_UNREPAIRED &&
			    f->token[c->key] > lo && f->token[c->key] <= hi)
				c->rs = RS_PENDING;
		}
	} else {
		bool ok = rng_below(&f->r, 3) != 0;
		ck_assert_int_eq(storage_repair_set_state(
					 f->db, f->t->id, f->session,
					 ok ? f->now * 1000 : 0, NULL),
				 0);
		f->pending = false;
		for (size_t i = 0; i < m->ncells; i++)
			if (m->cells[i].rs == RS_PENDING)
				m->cells[i].rs =
					ok ? RS_REPAIRED : RS_UNREPAIRED;
	}
	check_repair_states(f, step);
}

static void set_now(struct fx *f, int64_t now)
{
	f->now = now;
	fault_env_set_wall_us(f->fe, now * 1000000);
}

static void run(uint64_t s, int steps)
{
	struct fx f;
	memset(&f, 0, sizeof(f));
	f.m = calloc(1, sizeof(*f.m));
	for (int k = 0; k < NKEYS; k++)
		f.m->pdel[k] = INT64_MIN;
	rng_seed(&f.r, s);
	f.real = env_real_new(NULL);
	f.fe = fault_env_new(f.real);
	snprintf(f.dir, sizeof(f.dir), "%s", test_tmpdir("model"));
	snprintf(f.data, sizeof(f.data), "%s/data", f.dir);
	snprintf(f.log, sizeof(f.log), "%s/commitlog", f.dir);
	storage_options_default(&f.o);
	f.o.env = fault_env_env(f.fe);
	f.o.data_dir = f.data;
	f.o.commitlog_dir = f.log;
	f.o.commitlog_sync = CONF_COMMITLOG_SYNC_BATCH;
	f.o.commitlog_segment_size = 64 * 1024;
	f.o.auto_compaction = rng_below(&f.r, 2);
	f.o.memtable_heap_space = 1 << 20; /* flushes on its own too */
	f.o.tombstone_failure_threshold = 1 << 30;
	uint8_t id[16] = {0x5e, (uint8_t)s};
	f.t = storage_table_meta_new("ks", "model", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type ts = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_SET, false, storage_type_simple(STORAGE_TYPE_INT));
	storage_table_meta_add_column(f.t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(f.t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(f.t, "s", STORAGE_COLUMN_STATIC, &ti,
				      false);
	storage_table_meta_add_column(f.t, "v", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	storage_table_meta_add_column(f.t, "tags", STORAGE_COLUMN_REGULAR, &ts,
				      false);
	f.t->options.gc_grace_seconds = 60;
	f.t->options.chunk_length = 256 + (uint32_t)rng_below(&f.r, 2048);
	f.t->options.compression = (uint8_t)rng_below(&f.r, 3);
	f.t->options.min_threshold = 2;
	/* every strategy, leveled with tiny outputs and levels (cuts and
	 * moves up happen), and tombstone compactions that may run often */
	f.t->options.compaction = (uint8_t)rng_below(&f.r, 3);
	f.t->options.compaction_window_seconds = 60;
	f.t->options.sstable_size_bytes = 256 + rng_below(&f.r, 1024);
	f.t->options.fanout_size = 1 + (uint32_t)rng_below(&f.r, 2);
	f.t->options.tombstone_threshold = 0.05;
	f.t->options.tombstone_compaction_interval =
		(int64_t)rng_below(&f.r, 100);
	f.t->options.unchecked_tombstone_compaction = rng_below(&f.r, 2);
	set_now(&f, 1700000000);
	f.ts = 1;
	for (int k = 0; k < NKEYS; k++) {
		struct storage_mutation *mu = new_mut(&f, k, 0);
		f.token[k] = storage_mutation_token(mu);
		storage_mutation_delete(mu);
	}
	db_open(&f);
	for (int step = 0; step < steps; step++) {
		unsigned op = (unsigned)rng_below(&f.r, 1000);
		if (op < 30) {
			ck_assert_int_eq(storage_flush(f.db, NULL), 0);
		} else if (op < 45) {
			ck_assert_int_eq(storage_compact(f.db, f.t->id,
							 rng_below(&f.r, 2)),
					 0);
		} else if (op < 52) {
			storage_delete(f.db);
			db_open(&f);
		} else if (op < 60) {
			fault_env_freeze(f.fe);
			storage_delete(f.db);
			fault_env_crash(f.fe, rng_next(&f.r));
			db_open(&f);
		} else if (op < 75) {
			repair_op(&f, step);
		} else if (op < 160) {
			set_now(&f, f.now + (int64_t)rng_below(&f.r, 40) + 1);
		} else {
			random_write(&f);
		}
		check_all(&f, step);
		if (step % 50 == 49) {
			check_scan(&f, step);
			check_repair_states(&f, step);
		}
	}
	storage_delete(f.db);
	storage_table_meta_delete(f.t);
	test_tmpdir_remove(f.dir);
	fault_env_delete(f.fe);
	env_real_delete(f.real);
	free(f.m);
}

START_TEST(engine_matches_the_model)
{
	run(seed + (uint64_t)_i, 1200);
}
END_TEST

int main(void)
{
	seed = test_seed(1234);
	Suite *s = suite_create("storage_random");
	TCase *tc = tcase_create("model");
	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc, engine_matches_the_model, 0, 6);
	suite_add_tcase(s, tc);
	return test_run(s);
}
