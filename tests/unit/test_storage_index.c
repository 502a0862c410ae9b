/* storage-attached indexes in the engine: the memtable index and the
 * component each flush and compaction writes, queried with
 * storage_index_candidates against a model of random writes, overwrites,
 * row and partition deletions, TTLs, flushes and compactions: every
 * partition holding the value live is a candidate, candidates come in
 * token order without repeats and inside the range, and (without
 * fallbacks) each once held the value; a row-level index's entries carry
 * their rows; paged walks are bounded per step. The components' life
 * (fallbacks, builds, rebuilds, verify): test_storage_index_components.c. */
#include "tests/unit/storage_index_fixture.h"

START_TEST(candidates_cover_the_model)
{
	struct fx f;
	fx_init(&f, "sai_model", true);
	for (int round = 0; round < 30; round++) {
		for (int i = 0; i < 60; i++)
			random_op(&f);
		switch (rnd(&f) % 6) {
		case 0:
		case 1:
			ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
			break;
		case 2:
			ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
			ck_assert_int_eq(storage_compact(f.db, f.t->id, false),
					 0);
			break;
		case 3:
			ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
			ck_assert_int_eq(storage_compact(f.db, f.t->id, true),
					 0);
			break;
		default:
			break;
		}
		ck_assert_uint_eq(check_all(&f), 0); /* every one indexed */
		check_ands(&f);
	}
	/* the ANDs narrowed and paged (else they checked nothing) */
	ck_assert_uint_gt(ands_narrowed, 0);
	ck_assert_uint_gt(ands_paged, 0);
	/* a restart: the components are found again */
	storage_delete(f.db);
	open_db(&f);
	ck_assert_uint_eq(check_all(&f), 0);
	fx_free(&f);
}
END_TEST

START_TEST(entries_carry_rows)
{
	struct fx f;
	fx_init(&f, "sai_rows", true);
	write_v(&f, 0, 0, 7);
	write_w(&f, 0, 1, "alpha");
	write_v(&f, 0, 2, 8);
	write_v(&f, 0, 3, 7);
	write_v(&f, 5, 2, 7);
	write_w(&f, 5, 3, "beta");
	check_rows(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	check_rows(&f);
	fx_free(&f);
}
END_TEST

/* A paged walk of a term held by 3000 partitions of one SSTable: each
 * step walks about its limit of the component's entries and a block or
 * two, wherever it resumes (the lookup seeks to the resume position), and
 * the pages together are every partition once, in token order. The same
 * term in a memtable (its sorted entries: memtable_internal.h) is sought
 * to the resume position too: a step walks at most its limit of entries,
 * not the term's 3000 (which it did when a term's entries were only in
 * write order). */
START_TEST(a_paged_walk_visits_bounded_entries_per_step)
{
	struct fx f;
	fx_init(&f, "sai_pages", true);
	enum { N = 3000, LIMIT = 25 };
	uint8_t vb[4];
	be32_store(vb, (uint32_t)(1 - 3));
	int64_t now = now_sec(&f);
	for (int p = 0; p < N; p++) {
		struct storage_mutation *m = mut(&f, p, 0);
		storage_mutation_put_marker(m, f.ts, 0, now);
		storage_mutation_put(m, COL_V, NULL, 0, vb, 4, f.ts, 0, now);
		apply(&f, m);
	}
	struct slice v = slice_make(vb, 4);
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
		struct storage_index_page pg = {.limit = LIMIT};
		uint8_t after[64];
		size_t total = 0, steps = 0;
		uint64_t max_visited = 0;
		int64_t prev_tok = INT64_MIN;
		for (;;) {
			struct storage_index_keys k;
			if (storage_index_candidates(f.db, f.t->id, "iv", &v, 1,
						     0, 0, &pg, &k))
				ck_abort_msg("candidates: %s", err_msg());
			ck_assert_uint_eq(k.scanned, 0);
			ck_assert_uint_le(k.count, LIMIT);
			for (size_t i = 0; i < k.count; i++) {
				ck_assert(k.tokens[i] >= prev_tok);
				prev_tok = k.tokens[i];
			}
			total += k.count;
			steps++;
			if (k.visited > max_visited)
				max_visited = k.visited;
			bool more = k.more;
			if (more) {
				ck_assert_uint_le(k.resume_key.len,
						  sizeof(after));
				memcpy(after, k.resume_key.ptr,
				       k.resume_key.len);
				pg.after = true;
				pg.after_token = k.resume_token;
				pg.after_key =
					slice_make(after, k.resume_key.len);
			}
			storage_index_keys_free(&k);
			if (!more)
				break;
		}
		ck_assert_uint_eq(total, N);
		ck_assert_uint_ge(steps, N / LIMIT);
		if (pass == 0)
			ck_assert_uint_le(max_visited, LIMIT); /* memtable */
		else
			ck_assert_uint_le(max_visited,
					  LIMIT + 2 * SAI_BLOCK_ENTRIES + 1);
	}
	fx_free(&f);
}
END_TEST

/* Rows of a row-level index paged out of a memtable's sorted term (5
 * rows a partition, each partition's rows kept together) are the rows
 * the flushed component gives, page by page; a step walks at most its
 * limit of partitions' rows. */
START_TEST(memtable_row_pages_match_the_component)
{
	struct fx f;
	fx_init(&f, "sai_row_pages", true);
	enum { N = 200, ROWS = 5, LIMIT = 7 };
	uint8_t vb[4];
	be32_store(vb, 77);
	int64_t now = now_sec(&f);
	/* rows written out of order, some twice */
	for (int r = 0; r < ROWS; r++)
		for (int p = 0; p < N; p++) {
			int c = (r * 3 + p) % ROWS;
			struct storage_mutation *m = mut(&f, p, c);
			storage_mutation_put(m, COL_V, NULL, 0, vb, 4, f.ts, 0,
					     now);
			apply(&f, m);
			if (p % 17 == 0) {
				m = mut(&f, p, c);
				storage_mutation_put(m, COL_V, NULL, 0, vb, 4,
						     f.ts, 0, now);
				apply(&f, m);
			}
		}
	struct slice v = slice_make(vb, 4);
	struct buf seen[2];
	for (int pass = 0; pass < 2; pass++) {
		buf_init(&seen[pass]);
		if (pass == 1)
			ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
		struct storage_index_page pg = {.limit = LIMIT};
		uint8_t after[64];
		size_t parts = 0;
		for (;;) {
			struct storage_index_keys k;
			if (storage_index_candidates(f.db, f.t->id, "iv", &v, 1,
						     0, 0, &pg, &k))
				ck_abort_msg("candidates: %s", err_msg());
			ck_assert_uint_eq(k.scanned, 0);
			if (pass == 0)
				ck_assert_uint_le(k.visited, LIMIT * ROWS);
			ck_assert_ptr_nonnull(k.rows);
			for (size_t i = 0; i < k.count; i++) {
				if (!i || k.tokens[i - 1] != k.tokens[i] ||
				    slice_cmp(k.keys[i - 1], k.keys[i]))
					parts++;
				buf_append(&seen[pass], k.keys[i].ptr,
					   k.keys[i].len);
				buf_append(&seen[pass], k.rows[i].ptr,
					   k.rows[i].len);
				buf_put_u8(&seen[pass], '|');
			}
			buf_put_u8(&seen[pass], '#');
			bool more = k.more;
			if (more) {
				memcpy(after, k.resume_key.ptr,
				       k.resume_key.len);
				pg.after = true;
				pg.after_token = k.resume_token;
				pg.after_key =
					slice_make(after, k.resume_key.len);
			}
			storage_index_keys_free(&k);
			if (!more)
				break;
		}
		ck_assert_uint_eq(parts, N);
	}
	ck_assert_uint_eq(seen[0].len, seen[1].len);
	ck_assert(memcmp(seen[0].data, seen[1].data, seen[0].len) == 0);
	buf_free(&seen[0]);
	buf_free(&seen[1]);
	fx_free(&f);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage_index");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, candidates_cover_the_model);
	tcase_add_test(tc, entries_carry_rows);
	tcase_add_test(tc, a_paged_walk_visits_bounded_entries_per_step);
	tcase_add_test(tc, memtable_row_pages_match_the_component);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	seed = test_seed(0x1dc0);
	return test_run(suite());
}
