/* The storage index suites' fixture: storage_index_fixture.h. */
#include "tests/unit/storage_index_fixture.h"

uint64_t seed;
size_t fx_hold;

uint64_t rnd(struct fx *f)
{
	f->rng ^= f->rng << 13;
	f->rng ^= f->rng >> 7;
	f->rng ^= f->rng << 17;
	return f->rng;
}

struct storage_table_meta *make_table(bool indexes)
{
	uint8_t id[16] = {0x5a, 1};
	struct storage_table_meta *t = storage_table_meta_new("ks", "t", id);
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	const struct storage_type *sub[] = {
		storage_type_simple(STORAGE_TYPE_INT)};
	struct storage_type ts = {
		.kind = STORAGE_TYPE_SET, .count = 1, .sub = sub};
	storage_table_meta_add_column(t, "k1", STORAGE_COLUMN_PARTITION_KEY,
				      &ti, false);
	storage_table_meta_add_column(t, "k2", STORAGE_COLUMN_PARTITION_KEY,
				      &ti, false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING, &ti,
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	storage_table_meta_add_column(t, "w", STORAGE_COLUMN_REGULAR, &tx,
				      false);
	storage_table_meta_add_column(t, "tags", STORAGE_COLUMN_REGULAR, &ts,
				      false);
	if (indexes) {
		storage_table_meta_add_index(t, "iv", COL_V,
					     STORAGE_INDEX_VALUE, false);
		storage_table_meta_add_index(t, "iw", COL_W,
					     STORAGE_INDEX_VALUE, true);
		storage_table_meta_add_index(t, "ic", COL_C,
					     STORAGE_INDEX_VALUE, false);
		storage_table_meta_add_index(t, "ik", COL_K2,
					     STORAGE_INDEX_VALUE, false);
		storage_table_meta_add_index(t, "itags", COL_TAGS,
					     STORAGE_INDEX_VALUES, false);
	}
	return t;
}

void open_db(struct fx *f)
{
	f->db = storage_new(&f->o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	if (storage_start(f->db))
		ck_abort_msg("start: %s", err_msg());
}

void fx_init(struct fx *f, const char *tag, bool indexes)
{
	memset(f, 0, sizeof(*f));
	f->real = env_real_new(NULL);
	f->fe = fault_env_new(f->real);
	f->env = fault_env_env(f->fe);
	fault_env_set_wall_us(f->fe, 1700000000LL * 1000000);
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir(tag));
	snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
	snprintf(f->log, sizeof(f->log), "%s/commitlog", f->dir);
	storage_options_default(&f->o);
	f->o.env = f->env;
	f->o.data_dir = f->data;
	f->o.commitlog_dir = f->log;
	f->o.auto_compaction = false;
	f->o.sai_build_hold = fx_hold;
	f->t = make_table(indexes);
	f->ts = 1000;
	f->rng = seed | 1;
	open_db(f);
}

void fx_free(struct fx *f)
{
	storage_delete(f->db);
	storage_table_meta_delete(f->t);
	test_tmpdir_remove(f->dir);
	fault_env_delete(f->fe);
	env_real_delete(f->real);
}

int64_t now_sec(struct fx *f)
{
	return env_wall_us(f->env) / 1000000;
}

/* Partition p's key: k1 = p / 5, k2 = p % 5 (so k2 repeats). */
size_t part_key(int p, uint8_t out[14])
{
	uint8_t *q = out;
	int comp[2] = {p / 5, p % 5};
	for (int i = 0; i < 2; i++) {
		q[0] = 0;
		q[1] = 4;
		be32_store(q + 2, (uint32_t)comp[i]);
		q[6] = 0;
		q += 7;
	}
	return 14;
}

int64_t part_token(int p)
{
	uint8_t k[14];
	size_t n = part_key(p, k);
	return murmur3_token(k, n);
}

struct storage_mutation *mut(struct fx *f, int p, int c)
{
	uint8_t k[14];
	size_t n = part_key(p, k);
	struct storage_mutation *m = storage_mutation_new(f->t, k, n);
	ck_assert_ptr_nonnull(m);
	if (c >= 0) {
		uint8_t cb[4];
		be32_store(cb, (uint32_t)c);
		struct slice ck = slice_make(cb, 4);
		ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	}
	return m;
}

void apply(struct fx *f, struct storage_mutation *m)
{
	if (storage_apply_sync(f->db, m))
		ck_abort_msg("apply: %s", err_msg());
	storage_mutation_delete(m);
	f->ts++;
}

static const char *words[NVAL] = {"alpha", "Beta", "GAMMA",
				  "delta", "eps",  "Zeta"};

void random_op(struct fx *f)
{
	int p = (int)(rnd(f) % NPART), c = (int)(rnd(f) % NROW);
	struct model_row *r = &f->m.rows[p][c];
	int64_t now = now_sec(f);
	switch (rnd(f) % 10) {
	case 0:
	case 1:
	case 2: { /* v, sometimes with a TTL */
		int v = (int)(rnd(f) % NVAL);
		int32_t ttl = rnd(f) % 4 == 0 ? (int32_t)(1 + rnd(f) % 50) : 0;
		uint8_t vb[4];
		be32_store(vb, (uint32_t)(v - 3)); /* negatives too */
		struct storage_mutation *m = mut(f, p, c);
		storage_mutation_put_marker(m, f->ts, 0, now);
		storage_mutation_put(m, COL_V, NULL, 0, vb, 4, f->ts, ttl, now);
		apply(f, m);
		r->exists = true;
		r->v_set = true;
		r->v = v;
		r->v_expiry = ttl ? now + ttl : 0;
		f->m.ever_v[p][v] = true;
		break;
	}
	case 3:
	case 4: { /* w */
		const char *w = words[rnd(f) % NVAL];
		struct storage_mutation *m = mut(f, p, c);
		storage_mutation_put_marker(m, f->ts, 0, now);
		storage_mutation_put(m, COL_W, NULL, 0, (const uint8_t *)w,
				     strlen(w), f->ts, 0, now);
		apply(f, m);
		r->exists = true;
		r->w_set = true;
		snprintf(r->w, sizeof(r->w), "%s", w);
		break;
	}
	case 5: { /* a tag */
		int v = (int)(rnd(f) % NVAL);
		uint8_t vb[4];
		be32_store(vb, (uint32_t)v);
		struct storage_mutation *m = mut(f, p, c);
		storage_mutation_put_marker(m, f->ts, 0, now);
		storage_mutation_put(m, COL_TAGS, vb, 4, NULL, 0, f->ts, 0,
				     now);
		apply(f, m);
		r->exists = true;
		r->tag[v] = true;
		break;
	}
	case 6: { /* v deleted */
		struct storage_mutation *m = mut(f, p, c);
		storage_mutation_delete_cell(m, COL_V, NULL, 0, f->ts, now);
		apply(f, m);
		r->v_set = false;
		break;
	}
	case 7: { /* the row */
		struct storage_mutation *m = mut(f, p, c);
		storage_mutation_delete_row(m, f->ts, now);
		apply(f, m);
		memset(r, 0, sizeof(*r));
		break;
	}
	case 8: { /* the partition, now and then */
		if (rnd(f) % 4)
			break;
		struct storage_mutation *m = mut(f, p, -1);
		storage_mutation_delete_partition(m, f->ts, now);
		apply(f, m);
		memset(f->m.rows[p], 0, sizeof(f->m.rows[p]));
		break;
	}
	default: /* time passes */
		fault_env_set_wall_us(f->fe,
				      env_wall_us(f->env) +
					      (int64_t)(rnd(f) % 20) * 1000000);
		break;
	}
}

bool v_live(struct fx *f, const struct model_row *r, int v)
{
	return r->v_set && r->v == v &&
	       (!r->v_expiry || r->v_expiry > now_sec(f));
}

bool fold_eq(const char *a, const char *b)
{
	return strcasecmp(a, b) == 0;
}

/* Whether partition p holds the value live in index `ix` (0 iv, 1 iw,
 * 2 ic, 3 ik, 4 itags). */
bool model_match(struct fx *f, int ix, int p, int val)
{
	if (ix == 3) { /* a partition key component: any live row */
		if (p % 5 != val)
			return false;
	}
	for (int c = 0; c < NROW; c++) {
		const struct model_row *r = &f->m.rows[p][c];
		switch (ix) {
		case 0:
			if (v_live(f, r, val))
				return true;
			break;
		case 1:
			if (r->w_set && fold_eq(r->w, words[val]))
				return true;
			break;
		case 2:
		case 3:
			if (r->exists && (ix == 3 || c == val))
				return true;
			break;
		case 4:
			if (r->tag[val])
				return true;
			break;
		}
	}
	return false;
}

static const char *const names[] = {"iv", "iw", "ic", "ik", "itags"};

/* Whether row c of partition p holds the value live in index ix (the
 * row-level indexes: iv, iw, itags). */
bool model_row_match(struct fx *f, int ix, int p, int c, int val)
{
	const struct model_row *r = &f->m.rows[p][c];
	switch (ix) {
	case 0:
		return v_live(f, r, val);
	case 1:
		return r->w_set && fold_eq(r->w, words[val]);
	case 4:
		return r->tag[val];
	default:
		return false;
	}
}

bool row_level(int ix)
{
	return ix == 0 || ix == 1 || ix == 4;
}

/* Row c's encoded clustering (as index entries carry it). */
struct slice row_ck(int c, struct buf *b)
{
	uint8_t cb[4];
	be32_store(cb, (uint32_t)c);
	struct slice v = slice_make(cb, 4);
	buf_clear(b);
	ck_assert_int_eq(storage_ck_encode(b, CK_ROW, &v, 1), 0);
	return slice_make(b->data, b->len);
}

struct slice entry_row(const struct storage_index_keys *k, size_t i)
{
	return k->rows ? k->rows[i] : slice_make(NULL, 0);
}

/* Entries in (token, key, row) order without repeats; a partition listed
 * whole has no rows; a partition-level index lists no rows. */
void check_order(const struct storage_index_keys *k, bool rows)
{
	for (size_t i = 0; i < k->count; i++) {
		ck_assert_msg(rows || entry_row(k, i).len == 0,
			      "a row from a partition-level index");
		if (!i)
			continue;
		int r = k->tokens[i - 1] < k->tokens[i] ? -1
			: k->tokens[i - 1] > k->tokens[i]
				? 1
				: slice_cmp(k->keys[i - 1], k->keys[i]);
		if (r == 0) {
			ck_assert_msg(entry_row(k, i - 1).len &&
					      slice_cmp(entry_row(k, i - 1),
							entry_row(k, i)) < 0,
				      "row order or repeat at %zu", i);
		} else {
			ck_assert_msg(r < 0, "order or repeat at %zu", i);
		}
	}
}

/* Whether k lists partition (tok, key) whole or its row `ck`. */
bool keys_cover(const struct storage_index_keys *k, int64_t tok,
		struct slice key, struct slice ck)
{
	for (size_t i = 0; i < k->count; i++)
		if (k->tokens[i] == tok && slice_eq(k->keys[i], key) &&
		    (entry_row(k, i).len == 0 || slice_eq(entry_row(k, i), ck)))
			return true;
	return false;
}

/* Checks one query; returns the candidates' fallback count. */
uint64_t check_query(struct fx *f, int ix, int val, int64_t start, int64_t end)
{
	uint8_t vb[4];
	be32_store(vb, (uint32_t)(ix == 0 ? val - 3 : val));
	struct slice v = slice_make(vb, 4);
	char upper[8];
	if (ix == 1) { /* ask in another case: the index folds */
		size_t n = strlen(words[val]);
		for (size_t i = 0; i < n; i++)
			upper[i] = (char)(words[val][i] ^
					  (((words[val][i] | 32) >= 'a' &&
					    (words[val][i] | 32) <= 'z')
						   ? 32
						   : 0));
		v = slice_make(upper, n);
	}
	struct storage_index_keys k;
	if (storage_index_candidates(f->db, f->t->id, names[ix], &v, 1, start,
				     end, NULL, &k))
		ck_abort_msg("candidates: %s", err_msg());
	bool full = start == end;
	for (size_t i = 0; i < k.count; i++)
		ck_assert(full || (k.tokens[i] > start && k.tokens[i] <= end));
	check_order(&k, row_level(ix));
	struct buf ckb;
	buf_init(&ckb);
	for (int p = 0; p < NPART; p++) {
		int64_t tok = part_token(p);
		if (!full && !(tok > start && tok <= end))
			continue;
		uint8_t key[14];
		size_t kl = part_key(p, key);
		bool found = false;
		for (size_t i = 0; i < k.count && !found; i++)
			found = k.tokens[i] == tok &&
				slice_eq(k.keys[i], slice_make(key, kl));
		if (model_match(f, ix, p, val))
			ck_assert_msg(found,
				      "index %s value %d: partition %d "
				      "missed (seed %llu)",
				      names[ix], val, p,
				      (unsigned long long)seed);
		for (int c = 0; row_level(ix) && c < NROW; c++)
			if (model_row_match(f, ix, p, c, val))
				ck_assert_msg(
					keys_cover(&k, tok, slice_make(key, kl),
						   row_ck(c, &ckb)),
					"index %s value %d: row %d/%d missed "
					"(seed %llu)",
					names[ix], val, p, c,
					(unsigned long long)seed);
		if (found && k.scanned == 0 && ix == 0)
			ck_assert_msg(f->m.ever_v[p][val],
				      "iv %d: partition %d never held it", val,
				      p);
	}
	uint64_t scanned = k.scanned;
	storage_index_keys_free(&k);
	buf_free(&ckb);
	return scanned;
}

/* A range of v, [lo, hi] with each end maybe exclusive, over the full
 * ring: every partition with a live v inside is a candidate. */
uint64_t check_range(struct fx *f, int lo, bool lo_incl, int hi, bool hi_incl,
		     bool lo_open, bool hi_open)
{
	uint8_t lb[4], hb[4];
	be32_store(lb, (uint32_t)(lo - 3));
	be32_store(hb, (uint32_t)(hi - 3));
	struct storage_index_bound l = {slice_make(lb, 4), lo_incl};
	struct storage_index_bound h = {slice_make(hb, 4), hi_incl};
	struct storage_index_keys k;
	if (storage_index_candidates_range(f->db, f->t->id, "iv",
					   lo_open ? NULL : &l,
					   hi_open ? NULL : &h, 0, 0, NULL, &k))
		ck_abort_msg("range: %s", err_msg());
	for (int p = 0; p < NPART; p++) {
		bool want = false;
		for (int val = 0; val < NVAL; val++) {
			bool in =
				(lo_open || val > lo ||
				 (lo_incl && val == lo)) &&
				(hi_open || val < hi || (hi_incl && val == hi));
			want |= in && model_match(f, 0, p, val);
		}
		uint8_t key[14];
		size_t kl = part_key(p, key);
		bool found = false;
		for (size_t i = 0; i < k.count && !found; i++)
			found = slice_eq(k.keys[i], slice_make(key, kl));
		ck_assert_msg(!want || found,
			      "range %d..%d: partition %d missed (seed %llu)",
			      lo, hi, p, (unsigned long long)seed);
		if (found && k.scanned == 0) {
			bool ever = false;
			for (int val = 0; val < NVAL; val++) {
				bool in = (lo_open || val > lo ||
					   (lo_incl && val == lo)) &&
					  (hi_open || val < hi ||
					   (hi_incl && val == hi));
				ever |= in && f->m.ever_v[p][val];
			}
			ck_assert_msg(ever,
				      "range %d..%d: partition %d never "
				      "held such a value",
				      lo, hi, p);
		}
	}
	uint64_t scanned = k.scanned;
	storage_index_keys_free(&k);
	return scanned;
}

/* The value of index ix's query for `val`, as check_query asks it. */
struct slice query_value(int ix, int val, uint8_t vb[4], char up[8])
{
	be32_store(vb, (uint32_t)(ix == 0 ? val - 3 : val));
	if (ix != 1)
		return slice_make(vb, 4);
	size_t n = strlen(words[val]);
	for (size_t i = 0; i < n; i++)
		up[i] = (char)(words[val][i] ^ (((words[val][i] | 32) >= 'a' &&
						 (words[val][i] | 32) <= 'z')
							? 32
							: 0));
	return slice_make(up, n);
}

/* The partitions an answer lists (its entries may be several rows of
 * one). */
size_t parts_of(const struct storage_index_keys *k)
{
	size_t n = 0;
	for (size_t i = 0; i < k->count; i++)
		n += !i || k->tokens[i] != k->tokens[i - 1] ||
		     !slice_eq(k->keys[i], k->keys[i - 1]);
	return n;
}

bool keys_have(const struct storage_index_keys *k, int64_t tok,
	       struct slice key)
{
	for (size_t i = 0; i < k->count; i++)
		if (k->tokens[i] == tok && slice_eq(k->keys[i], key))
			return true;
	return false;
}

/* What check_ands saw over the run: intersections smaller than their
 * first set, and lookups the limit stopped (each must happen, or the
 * test checks nothing). */
unsigned ands_narrowed, ands_paged;

/* One side of an AND, a page at a time: index ix's value val, or (ix
 * -1) the union of iv's values val and val2 (an IN). */
void ands_side(struct fx *f, int ix, int val, int val2,
	       const struct storage_index_page *pg,
	       struct storage_index_keys *out)
{
	uint8_t vb[4], vb2[4];
	char up[8], up2[8];
	if (ix >= 0) {
		struct slice v = query_value(ix, val, vb, up);
		if (storage_index_candidates(f->db, f->t->id, names[ix], &v, 1,
					     0, 0, pg, out))
			ck_abort_msg("candidates: %s", err_msg());
		if (pg)
			ck_assert_uint_le(parts_of(out), pg->limit);
		if (pg && out->more)
			ands_paged++;
		return;
	}
	struct storage_index_keys two[2];
	struct slice v[2] = {query_value(0, val, vb, up),
			     query_value(0, val2, vb2, up2)};
	for (int i = 0; i < 2; i++) {
		if (storage_index_candidates(f->db, f->t->id, "iv", &v[i], 1, 0,
					     0, pg, &two[i]))
			ck_abort_msg("candidates: %s", err_msg());
		if (pg)
			ck_assert_uint_le(parts_of(&two[i]), pg->limit);
	}
	ck_assert_int_eq(storage_index_keys_union(two, 2, out), 0);
	storage_index_keys_free(&two[0]);
	storage_index_keys_free(&two[1]);
}

/* Two ANDed restrictions (two indexes, or an IN on iv and another
 * index) read as the replica reads them: a page of each side at a time
 * (a small limit), intersected, resumed after the intersection's resume
 * position. The pages together must be exactly the intersection of the
 * unpaged sides, in token order without repeats, and hold every
 * partition matching both in the model. */
void check_ands(struct fx *f)
{
	static const int ixs[] = {0, 1, 2, 4, -1};
	for (int q = 0; q < 8; q++) {
		int a = ixs[rnd(f) % 5], b = ixs[rnd(f) % 4];
		while (b == a || (a == -1 && b == 0))
			b = ixs[rnd(f) % 4];
		int nva = a == 2 ? NROW : NVAL, nvb = b == 2 ? NROW : NVAL;
		int va = (int)(rnd(f) % (unsigned)nva),
		    va2 = (int)(rnd(f) % NVAL),
		    vb = (int)(rnd(f) % (unsigned)nvb);
		struct storage_index_keys fa, fb;
		ands_side(f, a, va, va2, NULL, &fa);
		ands_side(f, b, vb, 0, NULL, &fb);
		ck_assert(!fa.more && !fb.more);
		/* the intersection, by hand: per partition both list, both
		 * whole: the partition; one whole: the other's rows; else
		 * the rows both list */
		struct buf wb;
		buf_init(&wb);
		size_t wn = 0, wtok[NPART * NROW], wkey[NPART * NROW][2],
		       wrow[NPART * NROW][2];
		for (size_t i = 0; i < fa.count; i++) {
			bool aw = entry_row(&fa, i).len == 0;
			for (size_t j = 0; j < fb.count; j++) {
				if (fb.tokens[j] != fa.tokens[i] ||
				    !slice_eq(fb.keys[j], fa.keys[i]))
					continue;
				bool bw = entry_row(&fb, j).len == 0;
				struct slice r;
				if (aw && bw)
					r = slice_make(NULL, 0);
				else if (aw)
					r = entry_row(&fb, j);
				else if (bw || slice_eq(entry_row(&fa, i),
							entry_row(&fb, j)))
					r = entry_row(&fa, i);
				else
					continue;
				ck_assert_uint_lt(wn, NPART * NROW);
				wtok[wn] = i;
				wkey[wn][0] = wb.len;
				ck_assert_int_eq(buf_append(&wb, fa.keys[i].ptr,
							    fa.keys[i].len),
						 0);
				wkey[wn][1] = fa.keys[i].len;
				wrow[wn][0] = wb.len;
				ck_assert_int_eq(buf_append(&wb, r.ptr, r.len),
						 0);
				wrow[wn][1] = r.len;
				wn++;
				if (aw && bw)
					break;
			}
		}
		size_t nwant = wn;
		if (nwant < fa.count)
			ands_narrowed++;
		struct storage_index_page pg = {.limit = 1 + rnd(f) % 4};
		uint8_t after[14];
		size_t got = 0;
		int pages = 0;
		for (bool more = true; more; pages++) {
			ck_assert_msg(pages <= 2 * NPART,
				      "the pages do not move on");
			struct storage_index_keys pa, pb, in;
			ands_side(f, a, va, va2, &pg, &pa);
			ands_side(f, b, vb, 0, &pg, &pb);
			ck_assert_int_eq(
				storage_index_keys_intersect(&pa, &pb, &in), 0);
			for (size_t i = 0; i < in.count; i++, got++) {
				ck_assert_msg(got < nwant,
					      "an AND page gave more than "
					      "the intersection (seed %llu)",
					      (unsigned long long)seed);
				struct slice wk = slice_make(
					wb.data + wkey[got][0], wkey[got][1]);
				struct slice wr = slice_make(
					wrow[got][1] ? wb.data + wrow[got][0]
						     : NULL,
					wrow[got][1]);
				ck_assert_msg(
					in.tokens[i] == fa.tokens[wtok[got]] &&
						slice_eq(in.keys[i], wk) &&
						slice_eq(entry_row(&in, i), wr),
					"AND %d/%d: candidate %zu is not the "
					"intersection's (seed %llu)",
					a, b, got, (unsigned long long)seed);
			}
			more = in.more;
			if (more) {
				ck_assert_uint_le(in.resume_key.len,
						  sizeof(after));
				memcpy(after, in.resume_key.ptr,
				       in.resume_key.len);
				pg.after = true;
				pg.after_token = in.resume_token;
				pg.after_key =
					slice_make(after, in.resume_key.len);
			}
			storage_index_keys_free(&pa);
			storage_index_keys_free(&pb);
			storage_index_keys_free(&in);
		}
		ck_assert_uint_eq(got, nwant);
		/* every row matching both in the model is in the
		 * intersection (its row, or its partition whole) */
		struct storage_index_keys all;
		ck_assert_int_eq(storage_index_keys_intersect(&fa, &fb, &all),
				 0);
		check_order(&all, true);
		struct buf ckb;
		buf_init(&ckb);
		for (int p = 0; p < NPART; p++)
			for (int c = 0; c < NROW; c++) {
				bool ra, rb;
				if (a < 0)
					ra = model_row_match(f, 0, p, c, va) ||
					     model_row_match(f, 0, p, c, va2);
				else if (row_level(a))
					ra = model_row_match(f, a, p, c, va);
				else
					ra = model_match(f, a, p, va) &&
					     f->m.rows[p][c].exists;
				if (row_level(b))
					rb = model_row_match(f, b, p, c, vb);
				else
					rb = model_match(f, b, p, vb) &&
					     f->m.rows[p][c].exists;
				if (!ra || !rb)
					continue;
				uint8_t key[14];
				size_t kl = part_key(p, key);
				ck_assert_msg(keys_cover(&all, part_token(p),
							 slice_make(key, kl),
							 row_ck(c, &ckb)),
					      "AND %d/%d: row %d/%d missed "
					      "(seed %llu)",
					      a, b, p, c,
					      (unsigned long long)seed);
			}
		buf_free(&ckb);
		storage_index_keys_free(&all);
		buf_free(&wb);
		for (int p = 0; p < NPART; p++) {
			bool ma = a >= 0 ? model_match(f, a, p, va)
					 : model_match(f, 0, p, va) ||
						   model_match(f, 0, p, va2);
			if (!ma || !model_match(f, b, p, vb))
				continue;
			uint8_t key[14];
			size_t kl = part_key(p, key);
			ck_assert_msg(keys_have(&fa, part_token(p),
						slice_make(key, kl)) &&
					      keys_have(&fb, part_token(p),
							slice_make(key, kl)),
				      "AND %d/%d: partition %d missed", a, b,
				      p);
		}
		storage_index_keys_free(&fa);
		storage_index_keys_free(&fb);
	}
}

uint64_t check_all(struct fx *f)
{
	uint64_t scanned = 0;
	for (int i = 0; i < 6; i++) {
		int a = (int)(rnd(f) % NVAL), b = (int)(rnd(f) % NVAL);
		if (a > b) {
			int x = a;
			a = b;
			b = x;
		}
		scanned += check_range(f, a, rnd(f) & 1, b, rnd(f) & 1,
				       rnd(f) % 5 == 0, rnd(f) % 5 == 0);
	}
	for (int ix = 0; ix < 5; ix++)
		for (int val = 0; val < (ix == 2   ? NROW
					 : ix == 3 ? 5
						   : NVAL);
		     val++) {
			scanned += check_query(f, ix, val, 0, 0);
			int64_t a = (int64_t)rnd(f), b = (int64_t)rnd(f);
			if (a > b) {
				int64_t x = a;
				a = b;
				b = x;
			}
			if (a != b)
				scanned += check_query(f, ix, val, a, b);
		}
	return scanned;
}

void find_files(const char *dir, const char *match, struct files *out)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[700];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (e->d_type == DT_DIR && strcmp(e->d_name, "snapshots"))
			find_files(p, match, out);
		else if (strstr(e->d_name, match) && out->n < 64)
			snprintf(out->paths[out->n++], 700, "%s", p);
	}
	closedir(d);
}

void flip_byte(const char *path, long at)
{
	FILE *fp = fopen(path, "r+b");
	ck_assert_ptr_nonnull(fp);
	fseek(fp, 0, SEEK_END);
	long n = ftell(fp);
	if (at >= n)
		at = n / 2;
	fseek(fp, at, SEEK_SET);
	int c = fgetc(fp);
	fseek(fp, at, SEEK_SET);
	fputc(c ^ 0x5a, fp);
	fclose(fp);
}

const char *const index_names[5] = {"iv", "iw", "ic", "ik", "itags"};

/* Waits for the index builder to finish index `name` (a hang guard, not
 * a timing threshold). */
void wait_built(struct fx *f, const char *name)
{
	for (int i = 0; i < 12000; i++) {
		int st = storage_index_state(f->db, f->t->id, name);
		if (st < 0)
			ck_abort_msg("state of %s: %s", name, err_msg());
		if (st == STORAGE_INDEX_BUILT)
			return;
		usleep(5000);
	}
	ck_abort_msg("index %s never built", name);
}

void wait_all_built(struct fx *f)
{
	for (int i = 0; i < 5; i++)
		wait_built(f, index_names[i]);
}

/* A query of a building index is refused, never answered in part. */
void assert_refused(struct fx *f, const char *name)
{
	uint8_t vb[4] = {0, 0, 0, 1};
	struct slice v = slice_make(vb, 4);
	struct storage_index_keys k;
	ck_assert_int_eq(storage_index_candidates(f->db, f->t->id, name, &v, 1,
						  0, 0, NULL, &k),
			 -1);
	ck_assert_int_eq(err_code(), ERR_INDEX_NOT_AVAILABLE);
	char want[128];
	snprintf(want, sizeof(want),
		 "The secondary index '%s' is not yet available", name);
	ck_assert_str_eq(err_msg(), want);
	ck_assert_uint_eq(k.count, 0);
}

/* Reopens the engine over the same files with table meta `t` (owned by
 * the fixture from then on), started or not. */
void reopen(struct fx *f, struct storage_table_meta *t, bool start)
{
	storage_delete(f->db);
	storage_table_meta_delete(f->t);
	f->t = t;
	f->db = storage_new(&f->o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	if (start && storage_start(f->db))
		ck_abort_msg("start: %s", err_msg());
}

ino_t inode_of(const char *path)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_ino;
}

/* Index entries of regular-column indexes carry the row: v = 7 lists the
 * two rows holding it (not their partitions whole), an AND of v and w on
 * one partition but different rows lists nothing, an AND with a
 * partition key component's (partition-level) index keeps v's rows, and a
 * read of a listed row reads that row only; from the memtable, then from
 * the component, then from a component the index builder wrote. */
void write_v(struct fx *f, int p, int c, uint32_t v)
{
	uint8_t vb[4];
	be32_store(vb, v);
	struct storage_mutation *m = mut(f, p, c);
	storage_mutation_put_marker(m, f->ts, 0, now_sec(f));
	storage_mutation_put(m, COL_V, NULL, 0, vb, 4, f->ts, 0, now_sec(f));
	apply(f, m);
}

void write_w(struct fx *f, int p, int c, const char *w)
{
	struct storage_mutation *m = mut(f, p, c);
	storage_mutation_put_marker(m, f->ts, 0, now_sec(f));
	storage_mutation_put(m, COL_W, NULL, 0, (const uint8_t *)w, strlen(w),
			     f->ts, 0, now_sec(f));
	apply(f, m);
}

void rows_lookup(struct fx *f, const char *ix, struct slice v,
		 struct storage_index_keys *k)
{
	if (storage_index_candidates(f->db, f->t->id, ix, &v, 1, 0, 0, NULL, k))
		ck_abort_msg("candidates: %s", err_msg());
	ck_assert_uint_eq(k->scanned, 0);
}

void check_rows(struct fx *f)
{
	uint8_t v7[4], k0[4];
	be32_store(v7, 7);
	be32_store(k0, 0);
	struct storage_index_keys v, w, k, in;
	rows_lookup(f, "iv", slice_make(v7, 4), &v);
	rows_lookup(f, "iw", slice_make("alpha", 5), &w);
	rows_lookup(f, "ik", slice_make(k0, 4), &k);
	struct buf b;
	buf_init(&b);
	uint8_t key[14];
	size_t kl = part_key(0, key);
	/* v = 7: rows 0 and 3 of partition 0 and row 2 of partition 5 */
	ck_assert_uint_eq(v.count, 3);
	ck_assert_ptr_nonnull(v.rows);
	int rows_p0 = 0;
	for (size_t i = 0; i < v.count; i++) {
		ck_assert_uint_gt(v.rows[i].len, 0);
		if (slice_eq(v.keys[i], slice_make(key, kl)))
			rows_p0 += slice_eq(v.rows[i], row_ck(0, &b)) ||
				   slice_eq(v.rows[i], row_ck(3, &b));
	}
	ck_assert_int_eq(rows_p0, 2);
	/* v = 7 AND w = 'alpha': partition 0 has both, in other rows */
	ck_assert_int_eq(storage_index_keys_intersect(&v, &w, &in), 0);
	ck_assert_uint_eq(in.count, 0);
	storage_index_keys_free(&in);
	/* v = 7 AND k2 = 0 (partitions 0 and 5): v's three rows */
	ck_assert_uint_eq(k.rows ? k.rows[0].len : 0, 0);
	ck_assert_int_eq(storage_index_keys_intersect(&k, &v, &in), 0);
	ck_assert_uint_eq(in.count, 3);
	storage_index_keys_free(&in);
	/* a union with a partition listed whole keeps it whole */
	struct storage_index_keys two[2] = {v, k};
	ck_assert_int_eq(storage_index_keys_union(two, 2, &in), 0);
	ck_assert_uint_eq(in.count, parts_of(&in));
	storage_index_keys_free(&in);
	/* the rows of partition 0 read: one live row each */
	struct storage_read_stats st = {0};
	struct storage_read_cmd cmd = {
		.key = key, .key_len = kl, .with_static = true, .stats = &st};
	struct slice r0 = row_ck(0, &b);
	struct buf b3;
	buf_init(&b3);
	struct slice rs[3] = {r0, row_ck(3, &b3), r0};
	struct storage_mutation *m = NULL;
	ck_assert_int_eq(
		storage_read_fragment_rows(f->db, f->t->id, &cmd, rs, 3, &m),
		0);
	ck_assert(!storage_mutation_is_empty(m));
	ck_assert_uint_eq(st.live_rows, 2);
	storage_mutation_delete(m);
	/* with the read's own slices (c > 1, then c < 1): the rows inside
	 * alone, none inside: nothing */
	uint8_t one[4];
	be32_store(one, 1);
	struct slice c1 = slice_make(one, 4);
	struct storage_slice gt = {.start = &c1, .start_count = 1};
	struct storage_slice lt = {.end = &c1, .end_count = 1};
	struct storage_slice both[2] = {lt, gt};
	struct storage_slice *sls[3] = {&gt, &lt, both};
	size_t want[3] = {1, 1, 2};
	for (int x = 0; x < 3; x++) {
		struct storage_read_cmd sc = cmd;
		sc.slices = sls[x];
		sc.slice_count = x == 2 ? 2 : 1;
		st.live_rows = 0;
		ck_assert_int_eq(storage_read_fragment_rows(f->db, f->t->id,
							    &sc, rs, 3, &m),
				 0);
		ck_assert_uint_eq(st.live_rows, want[x]);
		storage_mutation_delete(m);
	}
	struct storage_slice gt3 = {
		.start = &c1, .start_count = 1, .end = NULL};
	be32_store(one, 3);
	struct storage_read_cmd sc = cmd;
	sc.slices = &gt3; /* c > 3: none of rows 0 and 3 */
	sc.slice_count = 1;
	st.live_rows = 0;
	ck_assert_int_eq(
		storage_read_fragment_rows(f->db, f->t->id, &sc, rs, 3, &m), 0);
	ck_assert_uint_eq(st.live_rows, 0);
	storage_mutation_delete(m);
	buf_free(&b3);
	buf_free(&b);
	storage_index_keys_free(&v);
	storage_index_keys_free(&w);
	storage_index_keys_free(&k);
}

/* The components of one history (flushes, a major compaction, an index
 * built over existing data), each file's bytes in path order. */

void load_components(struct fx *f, struct comp_set *cs)
{
	memset(cs, 0, sizeof(*cs));
	find_files(f->data, "-SAI_", &cs->f);
	/* path order (gens and names agree between two runs) */
	for (size_t i = 0; i < cs->f.n; i++)
		for (size_t j = i + 1; j < cs->f.n; j++)
			if (strcmp(cs->f.paths[j], cs->f.paths[i]) < 0) {
				char tmp[700];
				memcpy(tmp, cs->f.paths[i], 700);
				memcpy(cs->f.paths[i], cs->f.paths[j], 700);
				memcpy(cs->f.paths[j], tmp, 700);
			}
	for (size_t i = 0; i < cs->f.n; i++)
		ck_assert_int_eq(env_read_file(f->env, cs->f.paths[i], 1 << 30,
					       &cs->bytes[i], &cs->len[i]),
				 0);
}

void history(struct fx *f)
{
	for (int i = 0; i < 400; i++)
		random_op(f);
	ck_assert_int_eq(storage_flush(f->db, f->t->id), 0);
	for (int i = 0; i < 400; i++)
		random_op(f);
	ck_assert_int_eq(storage_flush(f->db, f->t->id), 0);
	ck_assert_int_eq(storage_compact(f->db, f->t->id, true), 0);
	for (int i = 0; i < 200; i++)
		random_op(f);
	ck_assert_int_eq(storage_flush(f->db, f->t->id), 0);
}
