/* Incremental repair in the storage engine: anticompaction (an SSTable
 * wholly inside the session's ranges marked pending, one partly inside
 * split, one outside untouched), finalize and fail, pending ingest, and
 * compactions that never merge repair states (background, major,
 * cleanup). Then power cuts at every mutating file operation of
 * anticompaction, finalize and ingest (the fault env's cut points): after
 * each, every row is on disk exactly once, every SSTable's state is one
 * the operation allows (a pending SSTable holds only rows inside the
 * ranges; nothing is repaired that was not finalized), and the operation
 * run again completes.
 *
 * Rows are identified by their timestamp (each is written once, at
 * 1000 + key * NCK + c), so the check walks every live SSTable offline
 * (storage_sstable_dump) and counts the row markers it holds. */
#include "common/env_real.h"
#include "common/err.h"
#include "conf/conf.h"
#include "storage/sstable_tool.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"
#include "tests/unit/storage_fault_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 1700000000LL

static uint64_t seed;

enum { COL_PK, COL_C, COL_V };

#define NKEYS  48 /* written by the fixture */
#define NINGEST 8 /* written by ingest, keys NKEYS.. */
#define NALL   (NKEYS + NINGEST)
#define NCK    3
#define TS0    1000
#define NEWER_TS 900000

/* The repair states a row can be in, as the check sees them. */
enum rstate { RS_UNREPAIRED, RS_PENDING, RS_OTHER_PENDING, RS_REPAIRED };

struct fx {
	struct env *real;
	struct fault_env *fe;
	char dir[512];
	struct storage_table_meta *t;
	struct storage *db;
	int64_t token[NALL];
	/* the session's range (lo, hi]: keys ranked 12..35 by token */
	struct storage_token_range range;
	uint8_t session[16];
	/* what the last snapshot saw, per row */
	int count[NALL][NCK];
	enum rstate state[NALL][NCK];
	int64_t repaired_at[NALL][NCK];
	/* rows rewritten at NEWER_TS + key (c = 0), per key */
	int newer_count[NALL];
	enum rstate newer_state[NALL];
	/* rows a pending SSTable held outside the range */
	int pending_outside;
	size_t sstables;
};

static void key_name(int i, char *out, size_t n)
{
	snprintf(out, n, "k%02d", i);
}

static struct storage_table_meta *make_table(void)
{
	uint8_t id[16] = {0xac, 0x71};
	struct storage_table_meta *t = storage_table_meta_new("ks", "t", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	storage_table_meta_add_column(t, "pk", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	t->options.chunk_length = 512;
	t->options.min_threshold = 2;
	return t;
}

static void open_db(struct fx *f, const char *dir)
{
	char data[700], log[700];
	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(log, sizeof(log), "%s/commitlog", dir);
	struct storage_options o;
	storage_options_default(&o);
	o.env = fault_env_env(f->fe);
	o.data_dir = data;
	o.commitlog_dir = log;
	o.commitlog_sync = CONF_COMMITLOG_SYNC_BATCH;
	o.commitlog_segment_size = 64 * 1024;
	o.auto_compaction = false;
	f->db = storage_new(&o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	if (storage_start(f->db))
		ck_abort_msg("start: %s", err_msg());
}

static void close_db(struct fx *f)
{
	storage_delete(f->db);
	f->db = NULL;
}

static struct storage_mutation *row_mut(struct fx *f, int k, int c,
					int64_t ts)
{
	char key[16];
	key_name(k, key, sizeof(key));
	struct storage_mutation *m = storage_mutation_new(
		f->t, (const uint8_t *)key, strlen(key));
	uint8_t cb[4], vb[4];
	be32_store(cb, (uint32_t)c);
	be32_store(vb, (uint32_t)ts);
	struct slice ck = slice_make(cb, 4);
	ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	ck_assert_int_eq(storage_mutation_put_marker(m, ts, 0, T0), 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0, vb, 4, ts, 0,
					      T0),
			 0);
	return m;
}

static int64_t ts_of(int k, int c)
{
	return TS0 + k * NCK + c;
}

static void put_key(struct fx *f, int k)
{
	for (int c = 0; c < NCK; c++) {
		struct storage_mutation *m = row_mut(f, k, c, ts_of(k, c));
		if (storage_apply_sync(f->db, m))
			ck_abort_msg("apply: %s", err_msg());
		storage_mutation_delete(m);
	}
}

static int cmp_tok(const void *a, const void *b, void *arg)
{
	const int64_t *tok = arg;
	int x = *(const int *)a, y = *(const int *)b;
	return (tok[x] > tok[y]) - (tok[x] < tok[y]);
}

/* Insertion sort of key indices by token (qsort_r is not C11). */
static void sort_by_token(int *v, int n, int64_t *tok)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && cmp_tok(&v[j - 1], &v[j], tok) > 0;
		     j--) {
			int x = v[j];
			v[j] = v[j - 1];
			v[j - 1] = x;
		}
}

/* The four SSTables of the header, by token rank: A (ranks 14..21) wholly
 * inside the range, B (0..5, 30..40) and D (the rest below 42) partly
 * inside, C (42..47) outside. */
static void fx_init(struct fx *f, const char *tag)
{
	memset(f, 0, sizeof(*f));
	f->real = env_real_new(NULL);
	f->fe = fault_env_new(f->real);
	fault_env_set_wall_us(f->fe, T0 * 1000000);
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir(tag));
	f->t = make_table();
	for (int i = 0; i < NALL; i++) {
		struct storage_mutation *m = row_mut(f, i, 0, 1);
		f->token[i] = storage_mutation_token(m);
		storage_mutation_delete(m);
	}
	int rank[NKEYS];
	for (int i = 0; i < NKEYS; i++)
		rank[i] = i;
	sort_by_token(rank, NKEYS, f->token);
	f->range.left = f->token[rank[11]];
	f->range.right = f->token[rank[35]];
	for (int i = 0; i < 16; i++)
		f->session[i] = (uint8_t)(0x51 + i);
	open_db(f, f->dir);
	for (int r = 14; r <= 21; r++)
		put_key(f, rank[r]);
	ck_assert_int_eq(storage_flush(f->db, NULL), 0);
	for (int r = 0; r < NKEYS; r++)
		if (r <= 5 || (r >= 30 && r <= 40))
			put_key(f, rank[r]);
	ck_assert_int_eq(storage_flush(f->db, NULL), 0);
	for (int r = 42; r < NKEYS; r++)
		put_key(f, rank[r]);
	ck_assert_int_eq(storage_flush(f->db, NULL), 0);
	for (int r = 0; r < 42; r++)
		if ((r >= 6 && r <= 13) || (r >= 22 && r <= 29) || r == 41)
			put_key(f, rank[r]);
	ck_assert_int_eq(storage_flush(f->db, NULL), 0);
	close_db(f);
}

static void fx_free(struct fx *f)
{
	if (f->db)
		close_db(f);
	storage_table_meta_delete(f->t);
	test_tmpdir_remove(f->dir);
	fault_env_delete(f->fe);
	env_real_delete(f->real);
}

static bool in_range(const struct fx *f, int k)
{
	return f->token[k] > f->range.left && f->token[k] <= f->range.right;
}

/* ---- the offline check --------------------------------------------------- */

struct walk {
	struct fx *f;
	enum rstate st;
	int64_t repaired_at;
	int key; /* the partition being walked, -1 unknown */
};

static int on_partition(void *arg, const struct storage_sstable_partition *p)
{
	struct walk *w = arg;
	char key[16];
	int k = -1;
	if (p->key_len < sizeof(key)) {
		memcpy(key, p->key, p->key_len);
		key[p->key_len] = 0;
		if (sscanf(key, "k%d", &k) != 1 || k < 0 || k >= NALL)
			k = -1;
	}
	ck_assert_msg(k >= 0, "unknown partition in an SSTable");
	w->key = k;
	return 0;
}

static int on_atom(void *arg, const struct storage_sstable_atom *a)
{
	struct walk *w = arg;
	if (a->slot != 0 || a->kind != 1)
		return 0; /* row markers only: one per row */
	struct fx *f = w->f;
	if (a->ts >= NEWER_TS) {
		ck_assert_int_eq(a->ts - NEWER_TS, w->key);
		f->newer_count[w->key]++;
		f->newer_state[w->key] = w->st;
		return 0;
	}
	int64_t off = a->ts - TS0;
	int k = (int)(off / NCK), c = (int)(off % NCK);
	ck_assert_msg(off >= 0 && k == w->key && c < NCK,
		      "row of ts %lld in partition k%02d", (long long)a->ts,
		      w->key);
	f->count[k][c]++;
	f->state[k][c] = w->st;
	f->repaired_at[k][c] = w->repaired_at;
	/* the fixture's rows only: the ingested ones stand for what the
	 * session streamed, which the engine takes as the session's (as
	 * Cassandra does; the ranges bound the stream, not the ingest) */
	if ((w->st == RS_PENDING || w->st == RS_OTHER_PENDING) &&
	    k < NKEYS && !in_range(f, k))
		f->pending_outside++;
	return 0;
}

static void on_sstable(void *arg, const struct storage_sstable_info *s)
{
	struct fx *f = arg;
	struct walk w = {.f = f, .key = -1, .repaired_at = s->repaired_at};
	ck_assert_msg(!(s->pending && s->repaired_at),
		      "ca-%llu both pending and repaired",
		      (unsigned long long)s->gen);
	w.st = s->pending ? (memcmp(s->pending_repair, f->session, 16)
				     ? RS_OTHER_PENDING
				     : RS_PENDING)
	       : s->repaired_at ? RS_REPAIRED
				: RS_UNREPAIRED;
	struct storage_sstable_meta m;
	if (storage_sstable_meta_read(f->real, s->path, &m))
		ck_abort_msg("%s: %s", s->path, m.problems);
	ck_assert_int_eq(m.repaired_at, s->repaired_at);
	ck_assert_int_eq(m.pending, s->pending);
	struct storage_sstable_dump_fns fns = {
		.partition = on_partition, .atom = on_atom, .arg = &w};
	if (storage_sstable_dump(f->real, s->path, NULL, 0, &fns))
		ck_abort_msg("%s: %s", s->path, err_msg());
	f->sstables++;
}

/* Walks every live SSTable of the open engine into f->count/state. */
static void snapshot(struct fx *f)
{
	memset(f->count, 0, sizeof(f->count));
	memset(f->state, 0, sizeof(f->state));
	memset(f->repaired_at, 0, sizeof(f->repaired_at));
	memset(f->newer_count, 0, sizeof(f->newer_count));
	f->pending_outside = 0;
	f->sstables = 0;
	ck_assert_int_eq(storage_sstables(f->db, f->t->id, on_sstable, f), 0);
}

/* Every row of keys [0, nkeys) exactly once (`ingested`: keys NKEYS.. too,
 * else none of them), none pending outside the range. */
static void check_once(struct fx *f, bool ingested, const char *when)
{
	snapshot(f);
	for (int k = 0; k < NALL; k++)
		for (int c = 0; c < NCK; c++) {
			int want = k < NKEYS || ingested ? 1 : 0;
			ck_assert_msg(f->count[k][c] == want,
				      "%s: row (k%02d, %d) on disk %d times",
				      when, k, c, f->count[k][c]);
		}
	ck_assert_msg(f->pending_outside == 0,
		      "%s: %d rows outside the range pending", when,
		      f->pending_outside);
}

/* Reads back every row through the engine. */
static void check_reads(struct fx *f, bool ingested)
{
	for (int k = 0; k < (ingested ? NALL : NKEYS); k++) {
		char key[16];
		key_name(k, key, sizeof(key));
		struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
					       .key_len = strlen(key)};
		struct storage_result *r;
		if (storage_read(f->db, f->t->id, &cmd, &r))
			ck_abort_msg("read %s: %s", key, err_msg());
		ck_assert_uint_eq(r->row_count, NCK);
		storage_result_delete(r);
	}
}

static int anticompact(struct fx *f, uint64_t *marked, uint64_t *split)
{
	return storage_repair_anticompact(f->db, f->t->id, &f->range, 1,
					  f->session, marked, split);
}

/* After anticompaction: rows inside the range pending, others not. */
static void check_prepared(struct fx *f, const char *when)
{
	check_once(f, false, when);
	for (int k = 0; k < NKEYS; k++)
		for (int c = 0; c < NCK; c++)
			ck_assert_msg(f->state[k][c] == (in_range(f, k)
								 ? RS_PENDING
								 : RS_UNREPAIRED),
				      "%s: row (k%02d, %d) in state %d", when,
				      k, c, f->state[k][c]);
}

/* ---- the operations ------------------------------------------------------ */

START_TEST(anticompaction_marks_splits_and_finalizes)
{
	struct fx f;
	fx_init(&f, "anti-basic");
	open_db(&f, f.dir);
	check_once(&f, false, "before");
	ck_assert_uint_eq(f.sstables, 4);
	uint64_t marked = 0, split = 0;
	ck_assert_int_eq(anticompact(&f, &marked, &split), 0);
	ck_assert_uint_eq(marked, 1); /* A */
	ck_assert_uint_eq(split, 2);  /* B, D; C stays as it was */
	check_prepared(&f, "prepared");
	check_reads(&f, false);
	struct storage_repair_counts rc;
	ck_assert_int_eq(storage_repair_counts(f.db, f.t->id, &rc), 0);
	ck_assert_uint_eq(rc.pending, 3);    /* A and both insides */
	ck_assert_uint_eq(rc.unrepaired, 3); /* C and both outsides */
	ck_assert_uint_eq(rc.repaired, 0);
	/* the state survives a restart */
	close_db(&f);
	open_db(&f, f.dir);
	check_prepared(&f, "restarted");
	/* a second prepare of another session finds nothing unrepaired in
	 * the range to mark */
	uint8_t other[16] = {9};
	ck_assert_int_eq(storage_repair_anticompact(f.db, f.t->id, &f.range,
						    1, other, &marked, &split),
			 0);
	ck_assert_uint_eq(marked + split, 0);
	/* finalize */
	uint64_t n = 0;
	ck_assert_int_eq(storage_repair_set_state(f.db, f.t->id, f.session,
						  T0 * 1000, &n),
			 0);
	ck_assert_uint_eq(n, 3);
	check_once(&f, false, "finalized");
	for (int k = 0; k < NKEYS; k++)
		for (int c = 0; c < NCK; c++) {
			ck_assert_int_eq(f.state[k][c], in_range(&f, k)
								? RS_REPAIRED
								: RS_UNREPAIRED);
			if (in_range(&f, k))
				ck_assert_int_eq(f.repaired_at[k][c],
						 T0 * 1000);
		}
	check_reads(&f, false);
	fx_free(&f);
}
END_TEST

/* The session's range cut in two at a partition of A: A lies in neither
 * range alone but wholly in their union, so it is marked, not split; a
 * second session over the same ranges finds nothing to do. */
START_TEST(an_sstable_inside_the_ranges_union_is_marked_whole)
{
	struct fx f;
	fx_init(&f, "anti-union");
	int rank[NKEYS];
	for (int i = 0; i < NKEYS; i++)
		rank[i] = i;
	sort_by_token(rank, NKEYS, f.token);
	struct storage_token_range two[2] = {
		{f.range.left, f.token[rank[17]]},
		{f.token[rank[17]], f.range.right}};
	open_db(&f, f.dir);
	uint64_t marked = 0, split = 0;
	ck_assert_int_eq(storage_repair_anticompact(f.db, f.t->id, two, 2,
						    f.session, &marked,
						    &split),
			 0);
	ck_assert_uint_eq(marked, 1); /* A */
	ck_assert_uint_eq(split, 2);  /* B, D */
	check_prepared(&f, "prepared over two ranges");
	uint8_t other[16] = {9};
	ck_assert_int_eq(storage_repair_anticompact(f.db, f.t->id, two, 2,
						    other, &marked, &split),
			 0);
	ck_assert_uint_eq(marked + split, 0);
	check_reads(&f, false);
	fx_free(&f);
}
END_TEST

START_TEST(a_failed_session_leaves_its_data_unrepaired)
{
	struct fx f;
	fx_init(&f, "anti-fail");
	open_db(&f, f.dir);
	ck_assert_int_eq(anticompact(&f, NULL, NULL), 0);
	/* streamed rows of the session land pending too */
	struct storage_mutation *m[NINGEST * NCK];
	size_t nm = 0;
	for (int k = NKEYS; k < NALL; k++)
		for (int c = 0; c < NCK; c++)
			m[nm++] = row_mut(&f, k, c, ts_of(k, c));
	ck_assert_int_eq(storage_repair_ingest(
				 f.db, f.t->id,
				 (const struct storage_mutation *const *)m, nm,
				 f.session),
			 0);
	for (size_t i = 0; i < nm; i++)
		storage_mutation_delete(m[i]);
	snapshot(&f);
	for (int k = NKEYS; k < NALL; k++)
		ck_assert_int_eq(f.state[k][0], RS_PENDING);
	uint64_t n = 0;
	ck_assert_int_eq(
		storage_repair_set_state(f.db, f.t->id, f.session, 0, &n), 0);
	ck_assert_uint_eq(n, 4);
	check_once(&f, true, "failed");
	for (int k = 0; k < NALL; k++)
		for (int c = 0; c < NCK; c++)
			ck_assert_int_eq(f.state[k][c], RS_UNREPAIRED);
	check_reads(&f, true);
	fx_free(&f);
}
END_TEST

struct states {
	size_t unrepaired, pending, repaired;
	int64_t min_repaired_at, max_repaired_at;
};

static void count_state(void *arg, const struct storage_sstable_info *s)
{
	struct states *st = arg;
	if (s->pending)
		st->pending++;
	else if (s->repaired_at) {
		if (!st->repaired || s->repaired_at < st->min_repaired_at)
			st->min_repaired_at = s->repaired_at;
		if (!st->repaired || s->repaired_at > st->max_repaired_at)
			st->max_repaired_at = s->repaired_at;
		st->repaired++;
	} else
		st->unrepaired++;
}

static struct states states_of(struct fx *f)
{
	struct states st = {0};
	ck_assert_int_eq(storage_sstables(f->db, f->t->id, count_state, &st),
			 0);
	return st;
}

/* Repaired rows rewritten later, unrepaired or pending: were two states
 * compacted together, the older repaired versions would be dropped as
 * shadowed. Background, major and cleanup compactions keep every state
 * apart, and repaired SSTables of two sessions compact into one repaired
 * as of the older session (Cassandra's minimum repairedAt). */
START_TEST(compactions_never_merge_repair_states)
{
	struct fx f;
	fx_init(&f, "anti-mix");
	open_db(&f, f.dir);
	/* S1: the range's rows repaired at T0 */
	ck_assert_int_eq(anticompact(&f, NULL, NULL), 0);
	ck_assert_int_eq(storage_repair_set_state(f.db, f.t->id, f.session,
						  T0 * 1000, NULL),
			 0);
	/* S2: streamed rows of new keys, repaired 5 s later */
	uint8_t s2[16] = {0x77};
	struct storage_mutation *m[NINGEST * NCK];
	size_t nm = 0;
	for (int k = NKEYS; k < NALL; k++)
		for (int c = 0; c < NCK; c++)
			m[nm++] = row_mut(&f, k, c, ts_of(k, c));
	ck_assert_int_eq(storage_repair_ingest(
				 f.db, f.t->id,
				 (const struct storage_mutation *const *)m, nm,
				 s2),
			 0);
	for (size_t i = 0; i < nm; i++)
		storage_mutation_delete(m[i]);
	ck_assert_int_eq(storage_repair_set_state(f.db, f.t->id, s2,
						  T0 * 1000 + 5000, NULL),
			 0);
	/* newer versions of every key's row 0, unrepaired; S3 then takes
	 * those inside the range as pending */
	for (int k = 0; k < NKEYS; k++) {
		struct storage_mutation *x = row_mut(&f, k, 0, NEWER_TS + k);
		ck_assert_int_eq(storage_apply_sync(f.db, x), 0);
		storage_mutation_delete(x);
	}
	uint8_t s3[16] = {0x33};
	ck_assert_int_eq(storage_repair_anticompact(f.db, f.t->id, &f.range, 1,
						    s3, NULL, NULL),
			 0);
	struct states b = states_of(&f);
	ck_assert_uint_ge(b.repaired, 4);
	ck_assert_uint_ge(b.pending, 1);
	ck_assert_uint_ge(b.unrepaired, 2);
	ck_assert_int_eq(b.min_repaired_at, T0 * 1000);
	ck_assert_int_eq(b.max_repaired_at, T0 * 1000 + 5000);

	struct storage_token_range all = {INT64_MIN, INT64_MAX};
	for (int round = 0; round < 3; round++) {
		if (round == 0) /* background rounds (min_threshold 2) */
			ck_assert_int_eq(
				storage_compact(f.db, f.t->id, false), 0);
		else if (round == 1) /* major */
			ck_assert_int_eq(storage_compact(f.db, f.t->id, true),
					 0);
		else { /* cleanup keeping everything */
			uint64_t dropped = 7;
			ck_assert_int_eq(storage_cleanup(f.db, f.t->id, &all,
							 1, &dropped),
					 0);
			ck_assert_uint_eq(dropped, 0);
		}
		snapshot(&f);
		for (int k = 0; k < NALL; k++) {
			bool in = in_range(&f, k) || k >= NKEYS;
			for (int c = 0; c < NCK; c++) {
				/* an old unrepaired row 0 may merge with its
				 * newer unrepaired version */
				if (!in && c == 0)
					continue;
				ck_assert_msg(f.count[k][c] == 1,
					      "round %d: (k%02d, %d) %d times",
					      round, k, c, f.count[k][c]);
				ck_assert_int_eq(f.state[k][c],
						 in ? RS_REPAIRED
						    : RS_UNREPAIRED);
			}
			if (k < NKEYS) {
				ck_assert_int_eq(f.newer_count[k], 1);
				ck_assert_int_eq(f.newer_state[k],
						 in_range(&f, k)
							 ? RS_OTHER_PENDING
							 : RS_UNREPAIRED);
			}
		}
		check_reads(&f, true);
	}
	/* after major (and cleanup): one SSTable per state, the repaired one
	 * repaired as of S1 */
	struct states a = states_of(&f);
	ck_assert_uint_eq(a.repaired, 1);
	ck_assert_uint_eq(a.unrepaired, 1);
	ck_assert_uint_eq(a.pending, 1);
	ck_assert_int_eq(a.min_repaired_at, T0 * 1000);
	fx_free(&f);
}
END_TEST

/* ---- power cuts ---------------------------------------------------------- */

static void copy_tree(const char *from, const char *to)
{
	char cmd[2048];
	int n = snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s' '%s'", to,
			 from, to);
	ck_assert(n > 0 && (size_t)n < sizeof(cmd));
	ck_assert_int_eq(system(cmd), 0);
}

enum op { OP_ANTICOMPACT, OP_FINALIZE, OP_INGEST };

static int run_op(struct fx *f, enum op op)
{
	if (op == OP_ANTICOMPACT)
		return anticompact(f, NULL, NULL);
	if (op == OP_FINALIZE)
		return storage_repair_set_state(f->db, f->t->id, f->session,
						T0 * 1000, NULL);
	struct storage_mutation *m[NINGEST * NCK];
	size_t nm = 0;
	for (int k = NKEYS; k < NALL; k++)
		for (int c = 0; c < NCK; c++)
			m[nm++] = row_mut(f, k, c, ts_of(k, c));
	int rc = storage_repair_ingest(
		f->db, f->t->id, (const struct storage_mutation *const *)m, nm,
		f->session);
	for (size_t i = 0; i < nm; i++)
		storage_mutation_delete(m[i]);
	return rc;
}

/* What a cut during `op` may leave, row by row. */
static void check_cut(struct fx *f, enum op op, const char *when)
{
	snapshot(f);
	bool ingested = f->count[NKEYS][0] > 0;
	check_once(f, op == OP_INGEST && ingested, when);
	for (int k = 0; k < NALL; k++)
		for (int c = 0; c < NCK; c++) {
			if (!f->count[k][c])
				continue;
			enum rstate s = f->state[k][c];
			bool ok;
			if (k >= NKEYS) /* ingested: pending, all or none */
				ok = s == RS_PENDING;
			else if (!in_range(f, k))
				ok = s == RS_UNREPAIRED;
			else if (op == OP_ANTICOMPACT)
				ok = s == RS_UNREPAIRED || s == RS_PENDING;
			else if (op == OP_FINALIZE)
				ok = s == RS_PENDING || s == RS_REPAIRED;
			else
				ok = s == RS_PENDING;
			ck_assert_msg(ok, "%s: row (k%02d, %d) in state %d",
				      when, k, c, s);
		}
}

/* The state `op` leaves when it completes. */
static void check_done(struct fx *f, enum op op, const char *when)
{
	snapshot(f);
	check_once(f, op == OP_INGEST, when);
	for (int k = 0; k < NALL; k++)
		for (int c = 0; c < NCK; c++) {
			if (!f->count[k][c])
				continue;
			enum rstate want =
				k >= NKEYS	    ? RS_PENDING
				: !in_range(f, k)   ? RS_UNREPAIRED
				: op == OP_FINALIZE ? RS_REPAIRED
						    : RS_PENDING;
			ck_assert_msg(f->state[k][c] == want,
				      "%s: row (k%02d, %d) in state %d, not %d",
				      when, k, c, f->state[k][c], want);
		}
}

/* From the fixture's data (after `prep` operations), cuts the power at
 * every mutating file operation of `op`; returns the cut points. */
static uint64_t cut_everywhere(const char *tag, const enum op *prep,
			       size_t nprep, enum op op)
{
	struct fx f;
	fx_init(&f, tag);
	open_db(&f, f.dir);
	for (size_t i = 0; i < nprep; i++)
		ck_assert_int_eq(run_op(&f, prep[i]), 0);
	close_db(&f);
	char work[700];
	snprintf(work, sizeof(work), "%s-work", f.dir);
	/* count the steps once */
	copy_tree(f.dir, work);
	open_db(&f, work);
	uint64_t before = fault_env_ops(f.fe);
	ck_assert_int_eq(run_op(&f, op), 0);
	uint64_t steps = fault_env_ops(f.fe) - before;
	check_done(&f, op, "uncut");
	close_db(&f);
	ck_assert_uint_gt(steps, 3);
	for (uint64_t n = 0; n < steps; n++) {
		char when[64];
		snprintf(when, sizeof(when), "cut at step %llu of %llu",
			 (unsigned long long)n, (unsigned long long)steps);
		copy_tree(f.dir, work);
		fault_env_delete(f.fe); /* a fresh disk: no stale undo */
		f.fe = fault_env_new(f.real);
		fault_env_set_wall_us(f.fe, T0 * 1000000);
		open_db(&f, work);
		fault_env_freeze_after(f.fe, (int64_t)n);
		int rc = run_op(&f, op);
		ck_assert_msg(rc != 0 || !fault_env_frozen(f.fe) || n > 0,
			      "%s: succeeded without power", when);
		fault_env_freeze(f.fe);
		close_db(&f);
		fault_env_crash(f.fe, seed + n);
		open_db(&f, work);
		check_cut(&f, op, when);
		check_reads(&f, op == OP_INGEST && f.count[NKEYS][0]);
		/* and the operation, run again, completes (an ingest the cut
		 * left whole is not: a stream sent twice holds its rows twice,
		 * which reads merge but this count would not) */
		if (op != OP_INGEST || !f.count[NKEYS][0])
			ck_assert_int_eq(run_op(&f, op), 0);
		strncat(when, ", run again", sizeof(when) - strlen(when) - 1);
		check_done(&f, op, when);
		close_db(&f);
	}
	char cmd[800];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
	ck_assert_int_eq(system(cmd), 0);
	fx_free(&f);
	return steps;
}

START_TEST(a_power_cut_at_any_step_of_anticompaction_loses_no_row)
{
	uint64_t n = cut_everywhere("anti-cut", NULL, 0, OP_ANTICOMPACT);
	/* two splits (six components each, logs) and a mark */
	ck_assert_uint_gt(n, 20);
}
END_TEST

START_TEST(a_power_cut_at_any_step_of_finalize_loses_no_row)
{
	const enum op prep[] = {OP_ANTICOMPACT};
	cut_everywhere("fin-cut", prep, 1, OP_FINALIZE);
}
END_TEST

START_TEST(a_power_cut_at_any_step_of_ingest_is_all_or_nothing)
{
	const enum op prep[] = {OP_ANTICOMPACT};
	cut_everywhere("ingest-cut", prep, 1, OP_INGEST);
}
END_TEST

int main(void)
{
	seed = test_seed(0xac71);
	Suite *s = suite_create("storage_anticompaction");
	TCase *tc = tcase_create("anticompaction");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, anticompaction_marks_splits_and_finalizes);
	tcase_add_test(tc, an_sstable_inside_the_ranges_union_is_marked_whole);
	tcase_add_test(tc, a_failed_session_leaves_its_data_unrepaired);
	tcase_add_test(tc, compactions_never_merge_repair_states);
	tcase_add_test(tc,
		       a_power_cut_at_any_step_of_anticompaction_loses_no_row);
	tcase_add_test(tc, a_power_cut_at_any_step_of_finalize_loses_no_row);
	tcase_add_test(tc, a_power_cut_at_any_step_of_ingest_is_all_or_nothing);
	suite_add_tcase(s, tc);
	return test_run(s);
}
