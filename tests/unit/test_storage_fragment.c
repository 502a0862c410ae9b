/* storage, fragments: random writes spread over 2-3 replica engines (each
 * write to a random non-empty subset, each replica flushed and compacted
 * at random so its data sits in memtables and SSTables), and one engine
 * that received every write. For random read commands, resolving the
 * merge of the replicas' fragments must give what storage_read gives on
 * that engine, and the merge must equal that engine's own fragment byte
 * for byte. Merge is commutative, associative and idempotent by encoding;
 * digests follow content. Fragments survive encode -> decode ->
 * storage_apply (read repair). The read command's internode form round
 * trips and refuses truncated or damaged bytes. */
#include "common/arena.h"
#include "common/env_real.h"
#include "common/err.h"
#include "common/rand.h"
#include "conf/conf.h"
#include "storage/mutation_internal.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fault_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed;

/* pk text, c1 int ASC, c2 int DESC, s static int, v int, tags set<int> */
enum { COL_PK, COL_C1, COL_C2, COL_S, COL_V, COL_TAGS };
#define NKEYS 4
#define NC1   5
#define NC2   4
#define MAXR  3

struct fx {
	struct env *real;
	struct fault_env *fe;
	char dir[512];
	struct storage_table_meta *t;
	struct storage *all;
	struct storage *rep[MAXR];
	int nrep;
	struct rng r;
	int64_t ts, now;
};

static const char *keyname(int k)
{
	static const char *names[NKEYS] = {"alpha", "beta", "gamma", "delta"};
	return names[k];
}

static struct slice ival(uint8_t *b, int v)
{
	be32_store(b, (uint32_t)v);
	return slice_make(b, 4);
}

static struct storage *db_open(struct fx *f, const char *name)
{
	char data[700], log[700];
	snprintf(data, sizeof(data), "%s/%s/data", f->dir, name);
	snprintf(log, sizeof(log), "%s/%s/commitlog", f->dir, name);
	struct storage_options o;
	storage_options_default(&o);
	o.env = fault_env_env(f->fe);
	o.data_dir = data;
	o.commitlog_dir = log;
	o.commitlog_sync = CONF_COMMITLOG_SYNC_PERIODIC;
	o.auto_compaction = false;
	o.tombstone_warn_threshold = 1 << 30;
	o.tombstone_failure_threshold = 1 << 30;
	struct storage *db = storage_new(&o);
	ck_assert_ptr_nonnull(db);
	ck_assert_int_eq(storage_table_add(db, f->t, true), 0);
	if (storage_start(db))
		ck_abort_msg("start: %s", err_msg());
	return db;
}

static struct storage_table_meta *make_table(uint64_t s)
{
	uint8_t id[16] = {0xf4, (uint8_t)s, (uint8_t)(s >> 8)};
	struct storage_table_meta *t = storage_table_meta_new("ks", "frag", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type tset = STORAGE_TYPE_COLLECTION(
		STORAGE_TYPE_SET, false, storage_type_simple(STORAGE_TYPE_INT));
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(t, "c1", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "c2", STORAGE_COLUMN_CLUSTERING, &ti,
				      true);
	storage_table_meta_add_column(t, "s", STORAGE_COLUMN_STATIC, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	storage_table_meta_add_column(t, "tags", STORAGE_COLUMN_REGULAR, &tset,
				      false);
	t->options.chunk_length = 256;
	return t;
}

static void fx_open(struct fx *f, uint64_t s, int nrep)
{
	memset(f, 0, sizeof(*f));
	rng_seed(&f->r, s);
	f->real = env_real_new(NULL);
	f->fe = fault_env_new(f->real);
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir("frag"));
	f->t = make_table(s);
	f->now = 1700000000;
	fault_env_set_wall_us(f->fe, f->now * 1000000);
	f->ts = 1000;
	f->nrep = nrep;
	f->all = db_open(f, "all");
	for (int i = 0; i < nrep; i++) {
		char name[16];
		snprintf(name, sizeof(name), "r%d", i);
		f->rep[i] = db_open(f, name);
	}
}

static void fx_close(struct fx *f)
{
	storage_delete(f->all);
	for (int i = 0; i < f->nrep; i++)
		storage_delete(f->rep[i]);
	storage_table_meta_delete(f->t);
	test_tmpdir_remove(f->dir);
	fault_env_delete(f->fe);
	env_real_delete(f->real);
}

static void set_now(struct fx *f, int64_t now)
{
	f->now = now;
	fault_env_set_wall_us(f->fe, now * 1000000);
}

/* ---- random writes ------------------------------------------------------- */

/* A clustering prefix of 0..max values. */
static size_t random_prefix(struct rng *r, struct slice *vals, uint8_t *b,
			    size_t max)
{
	size_t n = (size_t)rng_below(r, max + 1);
	if (n > 0)
		vals[0] = ival(b, (int)rng_below(r, NC1));
	if (n > 1)
		vals[1] = ival(b + 4, (int)rng_below(r, NC2));
	return n;
}

static int64_t random_ts(struct fx *f)
{
	/* mostly increasing; sometimes older, often equal: the reconcile
	 * tie-breaks and out-of-order arrival both get exercised */
	unsigned x = (unsigned)rng_below(&f->r, 10);
	if (x < 5)
		return ++f->ts;
	if (x < 8)
		return f->ts;
	return f->ts - (int64_t)rng_below(&f->r, 20);
}

static void random_op(struct fx *f, struct storage_mutation *mu)
{
	struct rng *r = &f->r;
	uint8_t b[8], pb[8], eb[8];
	struct slice ck[2] = {ival(b, (int)rng_below(r, NC1)),
			      ival(b + 4, (int)rng_below(r, NC2))};
	int32_t ttl = rng_below(r, 4) == 0 ? (int32_t)rng_below(r, 20) + 1 : 0;
	/* A TTL'd write takes a fresh timestamp: two expiring versions of a
	 * cell with one timestamp, one expired, are the one case where a
	 * read and compaction's expired-is-a-tombstone disagree. */
	int64_t ts = ttl ? ++f->ts : random_ts(f);
	struct slice v = ival(pb, (int)rng_below(r, 4));
	unsigned op = (unsigned)rng_below(r, 100);
	if (op >= 90)
		ck_assert_int_eq(storage_mutation_set_static_row(mu), 0);
	else
		ck_assert_int_eq(storage_mutation_set_row(mu, ck, 2), 0);
	int rc = 0;
	if (op < 25) {
		rc = storage_mutation_put(mu, COL_V, NULL, 0, v.ptr, 4, ts, ttl,
					  f->now);
		if (!rc && rng_below(r, 2))
			rc = storage_mutation_put_marker(mu, ts, ttl, f->now);
	} else if (op < 35) {
		rc = storage_mutation_put(mu, COL_TAGS, v.ptr, 4, NULL, 0, ts,
					  ttl, f->now);
	} else if (op < 42) {
		rc = storage_mutation_delete_cell(mu, COL_TAGS, v.ptr, 4, ts,
						  f->now);
	} else if (op < 48) {
		rc = storage_mutation_delete_collection(mu, COL_TAGS, ts,
							f->now);
	} else if (op < 56) {
		rc = storage_mutation_delete_cell(mu, COL_V, NULL, 0, ts,
						  f->now);
	} else if (op < 66) {
		rc = storage_mutation_delete_row(mu, ts, f->now);
	} else if (op < 80) {
		struct slice lo[2], hi[2];
		size_t nlo = random_prefix(r, lo, eb, 2);
		size_t nhi = random_prefix(r, hi, pb, 2);
		rc = storage_mutation_delete_range(mu, lo, nlo, rng_below(r, 2),
						   hi, nhi, rng_below(r, 2), ts,
						   f->now);
	} else if (op < 84) {
		rc = storage_mutation_delete_partition(mu, ts - 5, f->now);
	} else if (op < 90) {
		rc = storage_mutation_put_marker(mu, ts, ttl, f->now);
	} else if (op < 97) {
		rc = storage_mutation_put(mu, COL_S, NULL, 0, v.ptr, 4, ts, ttl,
					  f->now);
	} else {
		rc = storage_mutation_delete_row(mu, ts, f->now);
	}
	if (rc)
		ck_abort_msg("op %u: %s", op, err_msg());
}

static void apply_to(struct storage *db, const struct storage_mutation *mu)
{
	if (storage_apply_sync(db, mu))
		ck_abort_msg("apply: %s", err_msg());
}

/* One mutation of 1-3 changes: to the full engine and a random non-empty
 * subset of the replicas. */
static void random_write(struct fx *f)
{
	const char *k = keyname((int)rng_below(&f->r, NKEYS));
	struct storage_mutation *mu =
		storage_mutation_new(f->t, (const uint8_t *)k, strlen(k));
	int n = 1 + (int)rng_below(&f->r, 3);
	for (int i = 0; i < n; i++)
		random_op(f, mu);
	apply_to(f->all, mu);
	unsigned mask = 0;
	while (!mask)
		mask = (unsigned)rng_below(&f->r, 1u << f->nrep);
	for (int i = 0; i < f->nrep; i++)
		if (mask & (1u << i))
			apply_to(f->rep[i], mu);
	storage_mutation_delete(mu);
}

static struct storage *random_engine(struct fx *f)
{
	int i = (int)rng_below(&f->r, (uint64_t)f->nrep + 1);
	return i == f->nrep ? f->all : f->rep[i];
}

/* ---- random reads -------------------------------------------------------- */

struct rcmd {
	struct storage_read_cmd cmd;
	struct storage_slice slices[3];
	struct slice vals[12];
	uint8_t bytes[48];
	uint16_t cols[3];
};

/* A bound on c1 = `c1` with 0 or 1 more value. */
static void bound(struct rng *r, struct rcmd *rc, size_t *vi, int c1,
		  const struct slice **out, size_t *count)
{
	size_t n = 1 + (size_t)rng_below(r, 2);
	struct slice *v = &rc->vals[*vi];
	v[0] = ival(&rc->bytes[4 * *vi], c1);
	if (n > 1)
		v[1] = ival(&rc->bytes[4 * (*vi + 1)], (int)rng_below(r, NC2));
	*vi += n;
	*out = v;
	*count = n;
}

static void random_cmd(struct fx *f, const char *key, struct rcmd *rc)
{
	struct rng *r = &f->r;
	memset(rc, 0, sizeof(*rc));
	struct storage_read_cmd *c = &rc->cmd;
	c->key = (const uint8_t *)key;
	c->key_len = strlen(key);
	c->reverse = rng_below(r, 2);
	c->with_static = rng_below(r, 3) != 0;
	c->limit = rng_below(r, 2) ? 0 : 1 + (uint32_t)rng_below(r, 5);
	if (rng_below(r, 3) == 0) {
		size_t n = 0;
		for (uint16_t col = COL_S; col <= COL_TAGS; col++)
			if (rng_below(r, 2))
				rc->cols[n++] = col;
		c->columns = rc->cols;
		c->column_count = n;
	}
	if (rng_below(r, 3) == 0)
		return; /* the whole partition */
	/* 1-3 slices on ascending, disjoint c1 ranges */
	size_t ns = 1 + (size_t)rng_below(r, 3), vi = 0;
	int c1 = (int)rng_below(r, 2) - 1;
	for (size_t i = 0; i < ns && c1 < NC1; i++) {
		struct storage_slice *s = &rc->slices[i];
		int lo = c1 + (int)rng_below(r, 2);
		int hi = lo + (int)rng_below(r, 3);
		s->start_incl = rng_below(r, 2);
		s->end_incl = rng_below(r, 2);
		if (!(i == 0 && rng_below(r, 4) == 0))
			bound(r, rc, &vi, lo, &s->start, &s->start_count);
		if (!(i == ns - 1 && rng_below(r, 4) == 0))
			bound(r, rc, &vi, hi, &s->end, &s->end_count);
		else
			hi = NC1;
		c->slice_count = i + 1;
		c1 = hi + 1;
	}
	c->slices = rc->slices;
}

/* ---- comparisons --------------------------------------------------------- */

static void same_row(const struct storage_row_view *a,
		     const struct storage_row_view *b, const char *what)
{
	ck_assert_msg(a->is_static == b->is_static, "%s: static", what);
	ck_assert_msg(a->clustering_count == b->clustering_count,
		      "%s: clustering count", what);
	for (size_t i = 0; i < a->clustering_count; i++)
		ck_assert_msg(slice_eq(a->clustering[i], b->clustering[i]),
			      "%s: clustering", what);
	ck_assert_msg(a->marker_ts == b->marker_ts, "%s: marker %lld vs %lld",
		      what, (long long)a->marker_ts, (long long)b->marker_ts);
	ck_assert_msg(a->cell_count == b->cell_count, "%s: %zu vs %zu cells",
		      what, a->cell_count, b->cell_count);
	for (size_t i = 0; i < a->cell_count; i++) {
		const struct storage_cell_view *x = &a->cells[i];
		const struct storage_cell_view *y = &b->cells[i];
		ck_assert_msg(x->column == y->column &&
				      slice_eq(x->path, y->path) &&
				      slice_eq(x->value, y->value) &&
				      x->ts == y->ts && x->ttl == y->ttl &&
				      x->expiry == y->expiry,
			      "%s: cell %zu differs", what, i);
	}
}

static void same_result(const struct storage_result *a,
			const struct storage_result *b, const char *what)
{
	ck_assert_msg(slice_eq(a->key, b->key), "%s: key", what);
	ck_assert_msg(a->token == b->token, "%s: token", what);
	ck_assert_msg((a->static_row != NULL) == (b->static_row != NULL),
		      "%s: static row presence", what);
	if (a->static_row)
		same_row(a->static_row, b->static_row, what);
	ck_assert_msg(a->row_count == b->row_count, "%s: %zu vs %zu rows", what,
		      a->row_count, b->row_count);
	for (size_t i = 0; i < a->row_count; i++)
		same_row(&a->rows[i], &b->rows[i], what);
}

static void encode(const struct storage_mutation *m, struct buf *b)
{
	buf_clear(b);
	ck_assert_int_eq(storage_mutation_encode(m, b), 0);
}

static void same_bytes(const struct storage_mutation *a,
		       const struct storage_mutation *b, const char *what)
{
	struct buf x, y;
	buf_init(&x);
	buf_init(&y);
	encode(a, &x);
	encode(b, &y);
	ck_assert_msg(x.len == y.len && memcmp(x.data, y.data, x.len) == 0,
		      "%s: encodings differ (%zu vs %zu bytes)", what, x.len,
		      y.len);
	uint8_t da[16], db[16];
	storage_mutation_digest(a, da);
	storage_mutation_digest(b, db);
	ck_assert_msg(memcmp(da, db, 16) == 0, "%s: digests differ", what);
	buf_free(&x);
	buf_free(&y);
}

static struct storage_mutation *reencode(const struct storage_mutation *m)
{
	struct buf b;
	buf_init(&b);
	encode(m, &b);
	struct storage_mutation *d = storage_mutation_decode(b.data, b.len);
	ck_assert_ptr_nonnull(d);
	buf_free(&b);
	return d;
}

/* Reads from memory only that succeeded, and that needed the disk. */
static uint64_t cached_hits, cached_misses;

/* The fragment; a memory-only read first must either give the same bytes
 * or say it needs the disk (ERR_AGAIN). */
static struct storage_mutation *read_frag(struct fx *f, struct storage *db,
					  const struct storage_read_cmd *cmd)
{
	struct storage_mutation *c = NULL;
	int crc = storage_read_fragment_cached(db, f->t->id, cmd, &c);
	if (crc != 0 && err_code() != ERR_AGAIN)
		ck_abort_msg("cached fragment: %s", err_msg());
	struct storage_mutation *m;
	if (storage_read_fragment(db, f->t->id, cmd, &m))
		ck_abort_msg("fragment: %s", err_msg());
	if (crc == 0) {
		cached_hits++;
		same_bytes(c, m, "memory-only read");
		storage_mutation_delete(c);
	} else {
		cached_misses++;
	}
	return m;
}

static struct storage_mutation *
merge(struct fx *f, struct storage_mutation *const *in, size_t n)
{
	struct storage_mutation *m = storage_fragment_merge(f->t, in, n);
	if (!m)
		ck_abort_msg("merge: %s", err_msg());
	return m;
}

/* Merge algebra over the replicas' fragments (and the full one). */
static void check_algebra(struct fx *f, struct storage_mutation **fr, int n,
			  const struct storage_mutation *merged,
			  const char *what)
{
	/* idempotent: a fragment is canonical; merging it again, or twice */
	for (int i = 0; i < n; i++) {
		struct storage_mutation *two[2] = {fr[i], fr[i]};
		struct storage_mutation *m1 = merge(f, &fr[i], 1);
		struct storage_mutation *m2 = merge(f, two, 2);
		same_bytes(fr[i], m1, what);
		same_bytes(fr[i], m2, what);
		storage_mutation_delete(m1);
		storage_mutation_delete(m2);
	}
	/* commutative: reversed and rotated order */
	struct storage_mutation *rev[MAXR + 1], *rot[MAXR + 1];
	for (int i = 0; i < n; i++) {
		rev[i] = fr[n - 1 - i];
		rot[i] = fr[(i + 1) % n];
	}
	struct storage_mutation *a = merge(f, rev, (size_t)n);
	struct storage_mutation *b = merge(f, rot, (size_t)n);
	same_bytes(merged, a, what);
	same_bytes(merged, b, what);
	storage_mutation_delete(a);
	storage_mutation_delete(b);
	/* associative: (f0 f1) f2... = f0 (f1 f2 ...) */
	if (n >= 2) {
		struct storage_mutation *left = merge(f, fr, 2);
		struct storage_mutation *lin[MAXR + 1] = {left};
		for (int i = 2; i < n; i++)
			lin[i - 1] = fr[i];
		struct storage_mutation *l = merge(f, lin, (size_t)n - 1);
		struct storage_mutation *right =
			merge(f, fr + 1, (size_t)n - 1);
		struct storage_mutation *rin[2] = {fr[0], right};
		struct storage_mutation *rr = merge(f, rin, 2);
		same_bytes(merged, l, what);
		same_bytes(merged, rr, what);
		storage_mutation_delete(left);
		storage_mutation_delete(l);
		storage_mutation_delete(right);
		storage_mutation_delete(rr);
	}
}

/* Any change of content changes the digest. */
static void check_digest_changes(struct fx *f,
				 const struct storage_mutation *merged)
{
	uint8_t d0[16], d1[16];
	storage_mutation_digest(merged, d0);
	uint8_t b[8];
	struct slice ck[2] = {ival(b, 1), ival(b + 4, 2)};
	int64_t big = f->ts + 1000000;
	for (int change = 0; change < 4; change++) {
		struct storage_mutation *x = storage_mutation_new(
			f->t, merged->key.ptr, merged->key.len);
		ck_assert_int_eq(storage_mutation_set_row(x, ck, 2), 0);
		uint8_t vb[4];
		struct slice v = ival(vb, change);
		int rc = change == 0   ? storage_mutation_put(x, COL_V, NULL, 0,
							      v.ptr, 4, big, 0,
							      f->now)
			 : change == 1 ? storage_mutation_delete_partition(
						 x, big, f->now)
			 : change == 2
				 ? storage_mutation_delete_range(x, ck, 1, true,
								 ck, 1, true,
								 big, f->now)
				 : storage_mutation_delete_row(x, big, f->now);
		ck_assert_int_eq(rc, 0);
		struct storage_mutation *in[2] = {
			(struct storage_mutation *)merged, x};
		struct storage_mutation *m = merge(f, in, 2);
		storage_mutation_digest(m, d1);
		ck_assert_msg(memcmp(d0, d1, 16) != 0,
			      "change %d kept the digest", change);
		storage_mutation_delete(m);
		storage_mutation_delete(x);
	}
	/* the same content under another key */
	struct storage_mutation *o =
		storage_mutation_new(f->t, (const uint8_t *)"other", 5);
	storage_mutation_digest(o, d1);
	ck_assert(memcmp(d0, d1, 16) != 0);
	storage_mutation_delete(o);
}

static void check_read(struct fx *f, const char *key, int step, int k)
{
	struct rcmd rc;
	random_cmd(f, key, &rc);
	char what[96];
	snprintf(what, sizeof(what), "step %d key %s cmd %d", step, key, k);
	struct storage_mutation *fr[MAXR + 1];
	bool decoded = rng_below(&f->r, 2);
	for (int i = 0; i < f->nrep; i++) {
		fr[i] = read_frag(f, f->rep[i], &rc.cmd);
		if (decoded) { /* as a coordinator receives them */
			struct storage_mutation *d = reencode(fr[i]);
			storage_mutation_delete(fr[i]);
			fr[i] = d;
		}
	}
	struct storage_mutation *merged = merge(f, fr, (size_t)f->nrep);
	struct storage_mutation *full = read_frag(f, f->all, &rc.cmd);
	same_bytes(full, merged, what);

	struct storage_result *want, *got;
	if (storage_read(f->all, f->t->id, &rc.cmd, &want))
		ck_abort_msg("%s: read: %s", what, err_msg());
	if (storage_fragment_resolve(f->t, merged, &rc.cmd, f->now, &got))
		ck_abort_msg("%s: resolve: %s", what, err_msg());
	same_result(want, got, what);
	storage_result_delete(got);
	/* resolve applies the command's slices itself: the same from the
	 * merge of whole-partition fragments */
	struct storage_read_cmd whole = {.key = rc.cmd.key,
					 .key_len = rc.cmd.key_len,
					 .with_static = true};
	struct storage_mutation *wf[MAXR];
	for (int i = 0; i < f->nrep; i++)
		wf[i] = read_frag(f, f->rep[i], &whole);
	struct storage_mutation *wm = merge(f, wf, (size_t)f->nrep);
	if (storage_fragment_resolve(f->t, wm, &rc.cmd, f->now, &got))
		ck_abort_msg("%s: resolve: %s", what, err_msg());
	same_result(want, got, what);
	storage_result_delete(got);
	storage_mutation_delete(wm);
	for (int i = 0; i < f->nrep; i++)
		storage_mutation_delete(wf[i]);
	storage_result_delete(want);

	fr[f->nrep] = full;
	if (k == 0)
		check_algebra(f, fr, f->nrep + 1, merged, what);
	if (k == 0 && step % 4 == 0)
		check_digest_changes(f, merged);
	for (int i = 0; i <= f->nrep; i++)
		storage_mutation_delete(fr[i]);
	storage_mutation_delete(merged);
}

/* Range scans: per partition, the merge of the replicas' fragments equals
 * the full engine's fragment. */
static void check_scan(struct fx *f, int step)
{
	struct rcmd rc;
	random_cmd(f, "", &rc);
	rc.cmd.key = NULL;
	rc.cmd.key_len = 0;
	struct storage_mutation *got[MAXR + 1][NKEYS];
	memset(got, 0, sizeof(got));
	for (int i = 0; i <= f->nrep; i++) {
		struct storage *db = i == f->nrep ? f->all : f->rep[i];
		struct storage_scan *s =
			storage_scan_open(db, f->t->id, 0, 0, &rc.cmd);
		ck_assert_ptr_nonnull(s);
		struct storage_mutation *m;
		int r;
		int64_t last = INT64_MIN;
		while ((r = storage_scan_next_fragment(s, &m)) == 1) {
			int k = -1;
			for (int j = 0; j < NKEYS; j++)
				if (m->key.len == strlen(keyname(j)) &&
				    !memcmp(m->key.ptr, keyname(j), m->key.len))
					k = j;
			ck_assert_int_ge(k, 0);
			ck_assert(!storage_mutation_is_empty(m));
			ck_assert(storage_mutation_token(m) >= last);
			last = storage_mutation_token(m);
			got[i][k] = m;
		}
		ck_assert_int_eq(r, 0);
		storage_scan_close(s);
	}
	for (int k = 0; k < NKEYS; k++) {
		struct storage_mutation *in[MAXR];
		size_t n = 0;
		for (int i = 0; i < f->nrep; i++)
			if (got[i][k])
				in[n++] = got[i][k];
		char what[64];
		snprintf(what, sizeof(what), "step %d scan key %s", step,
			 keyname(k));
		ck_assert_msg((n > 0) == (got[f->nrep][k] != NULL),
			      "%s: presence", what);
		if (n) {
			struct storage_mutation *m = merge(f, in, n);
			same_bytes(got[f->nrep][k], m, what);
			storage_mutation_delete(m);
		}
		for (int i = 0; i <= f->nrep; i++)
			storage_mutation_delete(got[i][k]);
	}
}

/* Read repair: every replica gets the merged fragment of every key through
 * encode -> decode -> storage_apply; then all hold the same. */
static void check_repair(struct fx *f)
{
	struct storage_read_cmd whole = {.with_static = true};
	for (int k = 0; k < NKEYS; k++) {
		whole.key = (const uint8_t *)keyname(k);
		whole.key_len = strlen(keyname(k));
		struct storage_mutation *fr[MAXR];
		for (int i = 0; i < f->nrep; i++)
			fr[i] = read_frag(f, f->rep[i], &whole);
		struct storage_mutation *merged = merge(f, fr, (size_t)f->nrep);
		struct storage_mutation *d = reencode(merged);
		for (int i = 0; i < f->nrep; i++)
			if (!storage_mutation_is_empty(d))
				apply_to(f->rep[i], d);
		uint8_t want[16], got[16];
		storage_mutation_digest(merged, want);
		for (int i = 0; i < f->nrep; i++) {
			struct storage_mutation *after =
				read_frag(f, f->rep[i], &whole);
			storage_mutation_digest(after, got);
			ck_assert_msg(memcmp(want, got, 16) == 0,
				      "key %s: replica %d differs after repair",
				      keyname(k), i);
			storage_mutation_delete(after);
			storage_mutation_delete(fr[i]);
		}
		storage_mutation_delete(d);
		storage_mutation_delete(merged);
	}
}

static void run(uint64_t s, int steps)
{
	cached_hits = cached_misses = 0;
	struct fx f;
	fx_open(&f, s, 2 + (int)(s % 2));
	for (int step = 0; step < steps; step++) {
		unsigned op = (unsigned)rng_below(&f.r, 100);
		if (op < 4) {
			struct storage *db = random_engine(&f);
			ck_assert_int_eq(storage_flush(db, NULL), 0);
		} else if (op < 5) {
			struct storage *db = random_engine(&f);
			ck_assert_int_eq(storage_compact(db, f.t->id,
							 rng_below(&f.r, 2)),
					 0);
		} else if (op < 12) {
			set_now(&f, f.now + (int64_t)rng_below(&f.r, 6) + 1);
		} else {
			random_write(&f);
		}
		if (step % 10 == 9) {
			for (int k = 0; k < NKEYS; k++)
				for (int j = 0; j < 3; j++)
					check_read(&f, keyname(k), step, j);
		}
		if (step % 50 == 49)
			check_scan(&f, step);
	}
	check_repair(&f);
	/* Both ways were taken: from memory, and "needs the disk" after a
	 * flush or compaction made SSTables nothing had read yet. */
	ck_assert_uint_gt(cached_hits, 0);
	ck_assert_uint_gt(cached_misses, 0);
	fx_close(&f);
}

START_TEST(merged_fragments_resolve_like_one_engine)
{
	run(seed + (uint64_t)_i, 500);
}
END_TEST

/* ---- fixed cases --------------------------------------------------------- */

/* A memory-only read of a big partition gives up (it would hold an event
 * loop); the blocking read still returns it all. */
START_TEST(memory_only_read_gives_up_on_big_partitions)
{
	struct fx f;
	fx_open(&f, seed, 2);
	struct storage_mutation *mu =
		storage_mutation_new(f.t, (const uint8_t *)"wide", 4);
	for (int i = 0; i < 1100; i++) {
		uint8_t b[8];
		struct slice ck[2] = {ival(b, i / 4), ival(b + 4, i % 4)};
		ck_assert_int_eq(storage_mutation_set_row(mu, ck, 2), 0);
		ck_assert_int_eq(storage_mutation_put(mu, COL_V, NULL, 0, b, 4,
						      ++f.ts, 0, f.now),
				 0);
	}
	apply_to(f.all, mu);
	storage_mutation_delete(mu);
	struct storage_read_cmd cmd = {.key = (const uint8_t *)"wide",
				       .key_len = 4};
	struct storage_mutation *m = NULL;
	ck_assert_int_eq(storage_read_fragment_cached(f.all, f.t->id, &cmd, &m),
			 -1);
	ck_assert_int_eq(err_code(), ERR_AGAIN);
	ck_assert_ptr_null(m);
	m = read_frag(&f, f.all, &cmd);
	ck_assert(!storage_mutation_is_empty(m));
	storage_mutation_delete(m);
	fx_close(&f);
}
END_TEST

START_TEST(absent_partition_and_bad_merges)
{
	struct fx f;
	fx_open(&f, seed, 2);
	const struct storage_table_meta *m =
		storage_table_meta_acquire(f.all, f.t->id);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(memcmp(m->id, f.t->id, 16), 0);
	ck_assert_uint_eq(m->column_count, f.t->column_count);
	storage_table_meta_unref(m);
	uint8_t other[16] = {1, 2, 3};
	ck_assert_ptr_null(storage_table_meta_acquire(f.all, other));

	struct storage_read_cmd cmd = {.key = (const uint8_t *)"nobody",
				       .key_len = 6,
				       .with_static = true};
	struct storage_mutation *a = read_frag(&f, f.all, &cmd);
	ck_assert(storage_mutation_is_empty(a));
	storage_mutation_delete(a);
	ck_assert_int_eq(storage_read_fragment(f.all, other, &cmd, &a), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	a = read_frag(&f, f.all, &cmd);

	ck_assert_ptr_null(storage_fragment_merge(f.t, NULL, 0));
	ck_assert_int_eq(err_code(), ERR_INVALID);
	struct storage_mutation *b =
		storage_mutation_new(f.t, (const uint8_t *)"somebody", 8);
	struct storage_mutation *in[2] = {a, b};
	ck_assert_ptr_null(storage_fragment_merge(f.t, in, 2));
	ck_assert_int_eq(err_code(), ERR_INVALID);
	struct storage_table_meta *t2 = make_table(seed + 99);
	ck_assert_ptr_null(storage_fragment_merge(t2, in, 1));
	ck_assert_int_eq(err_code(), ERR_INVALID);
	storage_table_meta_delete(t2);

	struct storage_result *r;
	ck_assert_int_eq(storage_fragment_resolve(f.t, a, &cmd, f.now, &r), 0);
	ck_assert_uint_eq(r->row_count, 0);
	ck_assert_ptr_null(r->static_row);
	storage_result_delete(r);
	storage_mutation_delete(a);
	storage_mutation_delete(b);
	fx_close(&f);
}
END_TEST

/* A fragment holding only tombstones (what read repair must carry) and an
 * expired cell, applied on an engine that still has the live data. */
START_TEST(tombstone_fragment_repairs_a_stale_replica)
{
	struct fx f;
	fx_open(&f, seed, 2);
	const uint8_t *key = (const uint8_t *)"alpha";
	uint8_t b[8];
	struct slice ck[2] = {ival(b, 1), ival(b + 4, 1)};
	struct storage_mutation *live = storage_mutation_new(f.t, key, 5);
	storage_mutation_set_row(live, ck, 2);
	storage_mutation_put(live, COL_V, NULL, 0, b, 4, 10, 0, f.now);
	storage_mutation_put_marker(live, 10, 0, f.now);
	apply_to(f.rep[0], live);
	apply_to(f.rep[1], live);
	struct storage_mutation *del = storage_mutation_new(f.t, key, 5);
	storage_mutation_delete_range(del, ck, 1, true, ck, 1, true, 20, f.now);
	storage_mutation_set_row(del, ck, 2);
	storage_mutation_put(del, COL_TAGS, b, 4, NULL, 0, 30, 5, f.now);
	apply_to(f.rep[1], del);
	set_now(&f, f.now + 10); /* the set element has expired */

	struct storage_read_cmd cmd = {.key = key, .key_len = 5};
	struct storage_mutation *fr[2] = {read_frag(&f, f.rep[0], &cmd),
					  read_frag(&f, f.rep[1], &cmd)};
	/* replica 1's fragment: the range tombstone and the expired cell;
	 * the shadowed row is left out */
	ck_assert_uint_eq(fr[1]->rt_count, 1);
	ck_assert_uint_eq(fr[1]->atom_count, 1);
	/* a slice that misses the range tombstone leaves it out */
	uint8_t sb[8];
	struct slice lo[2] = {ival(sb, 1), ival(sb + 4, 3)};
	struct slice hi[1] = {ival(sb + 4, 3)};
	struct storage_slice miss[2] = {
		{.start = lo,
		 .start_count = 2,
		 .end = lo,
		 .end_count = 1,
		 .start_incl = false,
		 .end_incl = false},
		{.start = hi, .start_count = 1, .start_incl = true}};
	struct storage_read_cmd mcmd = {
		.key = key, .key_len = 5, .slices = miss, .slice_count = 2};
	struct storage_mutation *mf = read_frag(&f, f.rep[1], &mcmd);
	ck_assert_uint_eq(mf->rt_count, 0);
	storage_mutation_delete(mf);
	miss[0].end_incl = true; /* now (1, <3) meets it */
	mf = read_frag(&f, f.rep[1], &mcmd);
	ck_assert_uint_eq(mf->rt_count, 1);
	storage_mutation_delete(mf);

	uint8_t d0[16], d1[16];
	storage_mutation_digest(fr[0], d0);
	storage_mutation_digest(fr[1], d1);
	ck_assert(memcmp(d0, d1, 16) != 0);
	struct storage_mutation *merged = merge(&f, fr, 2);
	struct storage_mutation *d = reencode(merged);
	ck_assert_ptr_null(d->meta);
	apply_to(f.rep[0], d);
	struct storage_result *r;
	ck_assert_int_eq(storage_read(f.rep[0], f.t->id, &cmd, &r), 0);
	ck_assert_uint_eq(r->row_count, 0);
	storage_result_delete(r);
	struct storage_mutation *after = read_frag(&f, f.rep[0], &cmd);
	same_bytes(after, fr[1], "repaired");
	storage_mutation_delete(after);
	storage_mutation_delete(d);
	storage_mutation_delete(merged);
	storage_mutation_delete(fr[0]);
	storage_mutation_delete(fr[1]);
	storage_mutation_delete(live);
	storage_mutation_delete(del);
	fx_close(&f);
}
END_TEST

/* Two versions of one cell whose clusterings are equal as varints but not
 * as bytes ("05" and "00 05"), equal in everything else: the merge keeps
 * the same one whatever the order. */
START_TEST(merge_order_independent_for_equal_values_in_other_bytes)
{
	uint8_t id[16] = {0x7a};
	struct storage_table_meta *t = storage_table_meta_new("ks", "vi", id);
	struct storage_type vi = {.kind = STORAGE_TYPE_VARINT};
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &ti, false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, &vi,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	const uint8_t key[4] = {0, 0, 0, 1}, short_ck[1] = {5},
		      long_ck[2] = {0, 5};
	struct slice cks[2] = {slice_make(short_ck, 1), slice_make(long_ck, 2)};
	struct storage_mutation *m[2];
	for (int i = 0; i < 2; i++) {
		m[i] = storage_mutation_new(t, key, 4);
		ck_assert_int_eq(storage_mutation_set_row(m[i], &cks[i], 1), 0);
		ck_assert_int_eq(storage_mutation_put(m[i], 2, NULL, 0, key, 4,
						      7, 0, 1700000000),
				 0);
	}
	struct storage_mutation *ab[2] = {m[0], m[1]}, *ba[2] = {m[1], m[0]};
	struct storage_mutation *x = storage_fragment_merge(t, ab, 2);
	struct storage_mutation *y = storage_fragment_merge(t, ba, 2);
	ck_assert_uint_eq(x->atom_count, 1);
	same_bytes(x, y, "varint clustering");
	storage_mutation_delete(x);
	storage_mutation_delete(y);
	storage_mutation_delete(m[0]);
	storage_mutation_delete(m[1]);
	storage_table_meta_delete(t);
}
END_TEST

/* ---- the read command's internode form ----------------------------------- */

static void same_cmd(const struct storage_read_cmd *a,
		     const struct storage_read_cmd *b)
{
	ck_assert_uint_eq(a->key_len, b->key_len);
	ck_assert(a->key_len == 0 || !memcmp(a->key, b->key, a->key_len));
	ck_assert_int_eq(a->reverse, b->reverse);
	ck_assert_int_eq(a->with_static, b->with_static);
	ck_assert_uint_eq(a->limit, b->limit);
	ck_assert_int_eq(a->slices != NULL, b->slices != NULL);
	ck_assert_uint_eq(a->slices ? a->slice_count : 0,
			  b->slices ? b->slice_count : 0);
	for (size_t i = 0; a->slices && i < a->slice_count; i++) {
		const struct storage_slice *x = &a->slices[i],
					   *y = &b->slices[i];
		ck_assert_int_eq(x->start_incl, y->start_incl);
		ck_assert_int_eq(x->end_incl, y->end_incl);
		ck_assert_uint_eq(x->start_count, y->start_count);
		ck_assert_uint_eq(x->end_count, y->end_count);
		for (size_t j = 0; j < x->start_count; j++)
			ck_assert(slice_eq(x->start[j], y->start[j]));
		for (size_t j = 0; j < x->end_count; j++)
			ck_assert(slice_eq(x->end[j], y->end[j]));
	}
	ck_assert_int_eq(a->columns != NULL, b->columns != NULL);
	ck_assert_uint_eq(a->columns ? a->column_count : 0,
			  b->columns ? b->column_count : 0);
	for (size_t i = 0; a->columns && i < a->column_count; i++)
		ck_assert_uint_eq(a->columns[i], b->columns[i]);
}

START_TEST(read_cmd_round_trips_and_refuses_damage)
{
	struct fx f;
	memset(&f, 0, sizeof(f));
	rng_seed(&f.r, seed + 7);
	struct buf b, b2;
	buf_init(&b);
	buf_init(&b2);
	for (int iter = 0; iter < 300; iter++) {
		struct rcmd rc;
		random_cmd(&f, keyname(iter % NKEYS), &rc);
		if (iter % 10 == 0) {
			rc.cmd.key = NULL;
			rc.cmd.key_len = 0;
		}
		buf_clear(&b);
		ck_assert_int_eq(storage_read_cmd_encode(&rc.cmd, &b), 0);
		struct arena a;
		arena_create(&a, 0);
		struct storage_read_cmd out;
		ck_assert_int_eq(
			storage_read_cmd_decode(b.data, b.len, &a, &out), 0);
		same_cmd(&rc.cmd, &out);
		buf_clear(&b2);
		ck_assert_int_eq(storage_read_cmd_encode(&out, &b2), 0);
		ck_assert(b.len == b2.len && !memcmp(b.data, b2.data, b.len));
		/* every strict prefix fails cleanly */
		for (size_t n = 0; n < b.len; n++) {
			ck_assert_int_eq(
				storage_read_cmd_decode(b.data, n, &a, &out),
				-1);
			ck_assert_int_eq(err_code(), ERR_CORRUPT);
		}
		/* a trailing byte too */
		buf_put_u8(&b, 0);
		ck_assert_int_eq(
			storage_read_cmd_decode(b.data, b.len, &a, &out), -1);
		b.len--;
		/* damaged bytes: either refused, or a command that encodes */
		for (int d = 0; d < 20; d++) {
			buf_clear(&b2);
			buf_append(&b2, b.data, b.len);
			size_t at = (size_t)rng_below(&f.r, b.len);
			b2.data[at] ^= (uint8_t)(1 + rng_below(&f.r, 255));
			if (storage_read_cmd_decode(b2.data, b2.len, &a,
						    &out) == 0) {
				struct buf b3;
				buf_init(&b3);
				ck_assert_int_eq(
					storage_read_cmd_encode(&out, &b3), 0);
				buf_free(&b3);
			} else {
				ck_assert_int_eq(err_code(), ERR_CORRUPT);
			}
		}
		arena_destroy(&a);
	}
	/* garbage */
	for (int iter = 0; iter < 2000; iter++) {
		uint8_t junk[64];
		size_t n = (size_t)rng_below(&f.r, sizeof(junk));
		for (size_t i = 0; i < n; i++)
			junk[i] = (uint8_t)rng_next(&f.r);
		if (n > 0 && iter % 2)
			junk[0] = 0xC5;
		if (n > 1 && iter % 4 == 1)
			junk[1] = 1;
		struct arena a;
		arena_create(&a, 0);
		struct storage_read_cmd out;
		if (storage_read_cmd_decode(junk, n, &a, &out))
			ck_assert_int_eq(err_code(), ERR_CORRUPT);
		arena_destroy(&a);
	}
	/* zero slices (`IN ()`) stay zero slices, not the whole partition */
	struct storage_slice none[1];
	struct storage_read_cmd zero = {.key = (const uint8_t *)"k",
					.key_len = 1,
					.slices = none,
					.slice_count = 0};
	buf_clear(&b);
	ck_assert_int_eq(storage_read_cmd_encode(&zero, &b), 0);
	struct arena za;
	arena_create(&za, 0);
	struct storage_read_cmd back;
	ck_assert_int_eq(storage_read_cmd_decode(b.data, b.len, &za, &back), 0);
	ck_assert_ptr_nonnull(back.slices);
	ck_assert_uint_eq(back.slice_count, 0);
	arena_destroy(&za);
	buf_free(&b);
	buf_free(&b2);
}
END_TEST

int main(void)
{
	seed = test_seed(4321);
	Suite *s = suite_create("storage_fragment");
	TCase *tc = tcase_create("fragment");
	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc, merged_fragments_resolve_like_one_engine, 0, 6);
	tcase_add_test(tc, absent_partition_and_bad_merges);
	tcase_add_test(tc, memory_only_read_gives_up_on_big_partitions);
	tcase_add_test(tc, tombstone_fragment_repairs_a_stale_replica);
	tcase_add_test(tc,
		       merge_order_independent_for_equal_values_in_other_bytes);
	tcase_add_test(tc, read_cmd_round_trips_and_refuses_damage);
	suite_add_tcase(s, tc);
	return test_run(s);
}
