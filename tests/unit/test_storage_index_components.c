/* The life of storage-attached index components: a corrupt or missing
 * component falls back to listing that SSTable and still gives every live
 * key; an index created over existing data is built by the index builder
 * (refused until then, answered from components after), resumes after a
 * restart without redoing built SSTables; rebuild_index and scrub write
 * every component again, verify finds a damaged one, a damaged one is
 * repaired in the background, and bounded builders write the same bytes.
 * Queries against the model: test_storage_index.c. */
#include "tests/unit/storage_index_fixture.h"

START_TEST(a_corrupt_or_missing_component_falls_back)
{
	struct fx f;
	fx_init(&f, "sai_corrupt", true);
	for (int i = 0; i < 400; i++)
		random_op(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	for (int i = 0; i < 200; i++)
		random_op(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	storage_delete(f.db);
	struct files iv = {.n = 0}, iw = {.n = 0};
	find_files(f.data, "SAI_iv.db", &iv);
	find_files(f.data, "SAI_iw.db", &iw);
	ck_assert_uint_eq(iv.n, 2);
	ck_assert_uint_eq(iw.n, 2);
	flip_byte(iv.paths[0], 40); /* damaged: fails its checksum */
	ck_assert_int_eq(unlink(iw.paths[1]), 0); /* gone */
	open_db(&f);
	ck_assert_uint_gt(check_all(&f), 0); /* fell back, still complete */
	/* a major compaction writes whole components again */
	ck_assert_int_eq(storage_compact(f.db, f.t->id, true), 0);
	ck_assert_uint_eq(check_all(&f), 0);
	fx_free(&f);
}
END_TEST

START_TEST(an_index_over_existing_data_and_one_recreated)
{
	struct fx f;
	fx_init(&f, "sai_late", false);
	for (int i = 0; i < 300; i++)
		random_op(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	for (int i = 0; i < 100; i++)
		random_op(&f); /* in a memtable made without the index */
	struct storage_table_meta *t2 = make_table(true);
	ck_assert_int_eq(storage_table_update(f.db, t2), 0);
	storage_table_meta_delete(f.t);
	f.t = t2;
	/* built on the builder thread: refused until then, then answered
	 * from components alone (the old memtable flushed, the SSTable
	 * given its components) */
	for (int i = 0; i < 5; i++) {
		int st = storage_index_state(f.db, f.t->id, index_names[i]);
		ck_assert(st == STORAGE_INDEX_BUILDING ||
			  st == STORAGE_INDEX_BUILT);
		if (st == STORAGE_INDEX_BUILDING)
			assert_refused(&f, index_names[i]);
	}
	wait_all_built(&f);
	ck_assert_uint_eq(check_all(&f), 0);
	struct files iv = {.n = 0};
	find_files(f.data, "SAI_iv.db", &iv);
	ck_assert_uint_ge(iv.n, 2);
	/* "iv" dropped and created again over w: v's components and
	 * memtable entries must not answer for it; it is built again */
	struct storage_table_meta *t3 = storage_table_meta_clone(f.t);
	storage_table_meta_clear_indexes(t3);
	storage_table_meta_add_index(t3, "iv", COL_W, STORAGE_INDEX_VALUE,
				     true);
	ck_assert_int_eq(storage_table_update(f.db, t3), 0);
	storage_table_meta_delete(f.t);
	f.t = t3;
	wait_built(&f, "iv");
	struct storage_index_keys k;
	struct slice w = slice_make("alpha", 5);
	ck_assert_int_eq(storage_index_candidates(f.db, f.t->id, "iv", &w, 1, 0,
						  0, NULL, &k),
			 0);
	ck_assert_uint_eq(k.scanned, 0);
	for (int p = 0; p < NPART; p++) {
		bool want = false;
		for (int c = 0; c < NROW; c++)
			want |= f.m.rows[p][c].w_set &&
				fold_eq(f.m.rows[p][c].w, "alpha");
		uint8_t key[14];
		size_t kl = part_key(p, key);
		bool found = false;
		for (size_t i = 0; i < k.count; i++)
			found |= slice_eq(k.keys[i], slice_make(key, kl));
		ck_assert(!want || found);
	}
	storage_index_keys_free(&k);
	/* unknown index */
	ck_assert_int_eq(storage_index_candidates(f.db, f.t->id, "nope", &w, 1,
						  0, 0, NULL, &k),
			 -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	ck_assert_int_eq(storage_index_state(f.db, f.t->id, "nope"), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	fx_free(&f);
}
END_TEST

START_TEST(a_build_resumes_after_a_restart)
{
	struct fx f;
	fx_init(&f, "sai_resume", false);
	for (int i = 0; i < 300; i++)
		random_op(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	/* restarted with the index, the builder not started: the index is
	 * building (an SSTable lacks its component), queries are refused
	 * and the build is listed */
	reopen(&f, make_table(true), false);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(
			storage_index_state(f.db, f.t->id, index_names[i]),
			STORAGE_INDEX_BUILDING);
		assert_refused(&f, index_names[i]);
	}
	struct storage_index_build_info bi[8];
	ck_assert_uint_eq(storage_index_builds(f.db, bi, 8), 5);
	ck_assert(!bi[0].running && !bi[0].failed);
	if (storage_start(f.db))
		ck_abort_msg("start: %s", err_msg());
	wait_all_built(&f);
	ck_assert_uint_eq(storage_index_builds(f.db, bi, 8), 0);
	ck_assert_uint_eq(check_all(&f), 0);
	struct files first = {.n = 0};
	find_files(f.data, "SAI_iv.db", &first);
	ck_assert_uint_eq(first.n, 1);
	ino_t built = inode_of(first.paths[0]);
	/* a second SSTable written without the index (as an older node
	 * would), then a restart with it: only that SSTable is built, the
	 * first keeps its component */
	struct storage_table_meta *plain = make_table(false);
	reopen(&f, plain, true);
	for (int i = 0; i < 200; i++)
		random_op(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	reopen(&f, make_table(true), true);
	wait_all_built(&f);
	ck_assert_uint_eq(check_all(&f), 0);
	struct files both = {.n = 0};
	find_files(f.data, "SAI_iv.db", &both);
	ck_assert_uint_eq(both.n, 2);
	ck_assert(inode_of(first.paths[0]) == built);
	/* a build cut short by a shutdown finishes after the restart */
	reopen(&f, make_table(false), true);
	for (int i = 0; i < 200; i++)
		random_op(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	reopen(&f, make_table(true), true);
	reopen(&f, make_table(true), true); /* right away */
	wait_all_built(&f);
	ck_assert_uint_eq(check_all(&f), 0);
	fx_free(&f);
}
END_TEST

START_TEST(rebuild_index_writes_every_component_again)
{
	struct fx f;
	fx_init(&f, "sai_rebuild", true);
	for (int i = 0; i < 300; i++)
		random_op(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	for (int i = 0; i < 200; i++)
		random_op(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	storage_delete(f.db);
	f.db = NULL;
	struct files iv = {.n = 0};
	find_files(f.data, "SAI_iv.db", &iv);
	ck_assert_uint_eq(iv.n, 2);
	flip_byte(iv.paths[0], 40); /* damaged: the query lists the SSTable */
	open_db(&f);
	wait_all_built(&f); /* listed in the TOCs: nothing to build */
	ck_assert_uint_gt(check_all(&f), 0);
	ck_assert_int_eq(storage_index_rebuild(f.db, f.t->id, "iv"), 0);
	ck_assert_int_eq(storage_index_rebuild(f.db, f.t->id, "nope"), -1);
	ck_assert_int_eq(err_code(), ERR_NOT_FOUND);
	wait_built(&f, "iv");
	ck_assert_uint_eq(check_all(&f), 0);
	/* the rebuilt components survive a restart */
	reopen(&f, make_table(true), true);
	wait_all_built(&f);
	ck_assert_uint_eq(check_all(&f), 0);
	fx_free(&f);
}
END_TEST

/* A component found damaged by a query is written again in the
 * background; the index stays queryable meanwhile (that SSTable listed). */
START_TEST(a_damaged_component_is_repaired_in_the_background)
{
	struct fx f;
	fx_init(&f, "sai_repair", true);
	for (int i = 0; i < 300; i++)
		random_op(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	storage_delete(f.db);
	f.db = NULL;
	struct files iv = {.n = 0}, iw = {.n = 0};
	find_files(f.data, "SAI_iv.db", &iv);
	find_files(f.data, "SAI_iw.db", &iw);
	ck_assert_uint_eq(iv.n, 1);
	flip_byte(iv.paths[0], 40);
	ck_assert_int_eq(unlink(iw.paths[0]), 0);
	open_db(&f);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(
			storage_index_state(f.db, f.t->id, index_names[i]),
			STORAGE_INDEX_BUILT);
	ck_assert_uint_gt(check_all(&f), 0); /* listed, complete */
	uint64_t scanned = 1;
	for (int i = 0; i < 12000 && scanned; i++) {
		usleep(5000);
		scanned = check_all(&f);
	}
	ck_assert_uint_eq(scanned, 0);
	/* and for good: a restart reads the written components */
	reopen(&f, make_table(true), true);
	ck_assert_uint_eq(check_all(&f), 0);
	fx_free(&f);
}
END_TEST

/* nodetool verify checks each SSTable's index components: a damaged one
 * makes its SSTable corrupt, named as Cassandra's verifier names a file
 * ("Corrupted: <path>"); scrub writes every component again. */
START_TEST(verify_finds_a_damaged_component_and_scrub_rewrites_it)
{
	struct fx f;
	fx_init(&f, "sai_verify", true);
	for (int i = 0; i < 300; i++)
		random_op(&f);
	ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
	size_t n = 0, bad = 0;
	ck_assert_int_eq(storage_verify(f.db, f.t->id, &n, &bad), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(bad, 0);
	storage_delete(f.db);
	f.db = NULL;
	struct files iv = {.n = 0};
	find_files(f.data, "SAI_iv.db", &iv);
	ck_assert_uint_eq(iv.n, 1);
	flip_byte(iv.paths[0], 40);
	open_db(&f);
	ck_assert_int_eq(storage_verify(f.db, f.t->id, &n, &bad), -1);
	ck_assert_int_eq(err_code(), ERR_CORRUPT);
	ck_assert_uint_eq(bad, 1);
	char problems[1024], want[800];
	uint64_t parts = 0;
	ck_assert_int_eq(storage_sstable_verify(f.env, iv.paths[0], &parts,
						problems, sizeof(problems)),
			 -1);
	snprintf(want, sizeof(want), "Corrupted: %s (index component)",
		 iv.paths[0]);
	ck_assert_str_eq(problems, want);
	ck_assert_uint_gt(parts, 0); /* the data itself read */
	uint64_t kept = 0, dropped = 0;
	ck_assert_int_eq(storage_scrub(f.db, f.t->id, false, &kept, &dropped),
			 0);
	ck_assert_uint_gt(kept, 0);
	ck_assert_uint_eq(dropped, 0);
	ck_assert_int_eq(storage_verify(f.db, f.t->id, &n, &bad), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_eq(check_all(&f), 0); /* answered from components */
	fx_free(&f);
}
END_TEST

/* Component builders bounded to 7 pairs (sorted runs spilled to
 * tmp-ca-<gen>-SAIrun_<index>-<n> and merged) write the same bytes as
 * unbounded ones, in flushes, compactions and index builds over existing
 * data, and leave no run behind; a run that cannot be written fails the
 * flush (the runs are used) and is removed; a run left by a crash goes at
 * start. */
START_TEST(bounded_builders_write_the_same_components)
{
	struct comp_set cs[2];
	for (int pass = 0; pass < 2; pass++) {
		fx_hold = pass ? 7 : 0;
		struct fx f;
		fx_init(&f, pass ? "sai_hold7" : "sai_hold", false);
		/* an SSTable written before the index exists: the index
		 * builder gives it its component */
		for (int i = 0; i < 300; i++)
			random_op(&f);
		ck_assert_int_eq(storage_flush(f.db, f.t->id), 0);
		struct storage_table_meta *t2 = make_table(true);
		ck_assert_int_eq(storage_table_update(f.db, t2), 0);
		storage_table_meta_delete(f.t);
		f.t = t2;
		wait_all_built(&f);
		history(&f);
		ck_assert_uint_eq(check_all(&f), 0);
		struct files runs = {.n = 0};
		find_files(f.data, "SAIrun", &runs);
		ck_assert_uint_eq(runs.n, 0);
		load_components(&f, &cs[pass]);
		if (pass) {
			random_op(&f);
			fault_env_fail_writes(f.fe, "SAIrun", ENOSPC);
			for (int i = 0; i < 200; i++)
				random_op(&f);
			ck_assert_int_ne(storage_flush(f.db, f.t->id), 0);
			fault_env_fail_writes(f.fe, NULL, 0);
			find_files(f.data, "SAIrun", &runs);
			ck_assert_uint_eq(runs.n, 0);
			/* a crash's leftover run, removed at start */
			struct files toc = {.n = 0};
			find_files(f.data, "-TOC.txt", &toc);
			ck_assert_uint_gt(toc.n, 0);
			char run[800];
			snprintf(run, sizeof(run), "%.*s/tmp-ca-99-SAIrun_iv-0",
				 (int)(strrchr(toc.paths[0], '/') -
				       toc.paths[0]),
				 toc.paths[0]);
			FILE *fp = fopen(run, "wb");
			ck_assert_ptr_nonnull(fp);
			fputs("left by a crash", fp);
			fclose(fp);
			storage_delete(f.db);
			open_db(&f);
			find_files(f.data, "SAIrun", &runs);
			ck_assert_uint_eq(runs.n, 0);
			ck_assert_uint_eq(check_all(&f), 0);
		}
		fx_free(&f);
	}
	fx_hold = 0;
	ck_assert_uint_gt(cs[0].f.n, 5);
	ck_assert_uint_eq(cs[0].f.n, cs[1].f.n);
	for (size_t i = 0; i < cs[0].f.n; i++) {
		ck_assert_str_eq(strrchr(cs[0].f.paths[i], '/'),
				 strrchr(cs[1].f.paths[i], '/'));
		ck_assert_uint_eq(cs[0].len[i], cs[1].len[i]);
		ck_assert(memcmp(cs[0].bytes[i], cs[1].bytes[i],
				 cs[0].len[i]) == 0);
		free(cs[0].bytes[i]);
		free(cs[1].bytes[i]);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("storage_index_components");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_corrupt_or_missing_component_falls_back);
	tcase_add_test(tc, an_index_over_existing_data_and_one_recreated);
	tcase_add_test(tc, a_build_resumes_after_a_restart);
	tcase_add_test(tc, rebuild_index_writes_every_component_again);
	tcase_add_test(tc, a_damaged_component_is_repaired_in_the_background);
	tcase_add_test(tc,
		       verify_finds_a_damaged_component_and_scrub_rewrites_it);
	tcase_add_test(tc, bounded_builders_write_the_same_components);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	seed = test_seed(0x1dc1);
	return test_run(suite());
}
