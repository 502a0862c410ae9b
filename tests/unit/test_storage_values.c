/* storage: the engine applies only valid values (storage_mutation_validate
 * on every write, built here or decoded from a peer or a hint), and
 * commitlog replay drops the invalid values of records written before
 * values were validated, applying the rest. */
#include "common/env_real.h"
#include "common/err.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <string.h>

/* Table: k (kind of key) PRIMARY KEY, c int clustering, v (kind of v),
 * s set<text>, l list<int>. */
enum { COL_K, COL_C, COL_V, COL_S, COL_L };

static struct storage_table_meta *table(uint16_t key_kind, uint16_t v_kind)
{
	uint8_t id[16] = {0x5a, 23};
	struct storage_table_meta *t = storage_table_meta_new("ks", "t", id);
	struct storage_type set =
		STORAGE_TYPE_COLLECTION(STORAGE_TYPE_SET, false,
					storage_type_simple(STORAGE_TYPE_TEXT));
	struct storage_type list =
		STORAGE_TYPE_COLLECTION(STORAGE_TYPE_LIST, false,
					storage_type_simple(STORAGE_TYPE_INT));
	storage_table_meta_add_column(t, "k", STORAGE_COLUMN_PARTITION_KEY,
				      storage_type_simple(key_kind), false);
	storage_table_meta_add_column(t, "c", STORAGE_COLUMN_CLUSTERING,
				      storage_type_simple(STORAGE_TYPE_INT),
				      false);
	storage_table_meta_add_column(t, "v", STORAGE_COLUMN_REGULAR,
				      storage_type_simple(v_kind), false);
	storage_table_meta_add_column(t, "s", STORAGE_COLUMN_REGULAR, &set,
				      false);
	storage_table_meta_add_column(t, "l", STORAGE_COLUMN_REGULAR, &list,
				      false);
	return t;
}

struct fx {
	struct env *env;
	char dir[512], data[600], log[600];
	struct storage_options o;
	struct storage *db;
};

static void open_db(struct fx *f, const struct storage_table_meta *t)
{
	f->db = storage_new(&f->o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, t, true), 0);
	ck_assert_msg(storage_start(f->db) == 0, "%s", err_msg());
}

static void fx_init(struct fx *f, const char *tag,
		    const struct storage_table_meta *t)
{
	memset(f, 0, sizeof(*f));
	f->env = env_real_new(NULL);
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir(tag));
	snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
	snprintf(f->log, sizeof(f->log), "%s/commitlog", f->dir);
	storage_options_default(&f->o);
	f->o.env = f->env;
	f->o.data_dir = f->data;
	f->o.commitlog_dir = f->log;
	f->o.auto_compaction = false;
	open_db(f, t);
}

static void fx_free(struct fx *f)
{
	storage_delete(f->db);
	test_tmpdir_remove(f->dir);
	env_real_delete(f->env);
}

/* A row k, c = 1 with v = `v` (len bytes), s = {elem}, l = [item]. */
static struct storage_mutation *row(const struct storage_table_meta *t,
				    const char *k, size_t klen, const char *v,
				    size_t vlen, const char *elem,
				    const char *item, size_t ilen)
{
	struct storage_mutation *m =
		storage_mutation_new(t, (const uint8_t *)k, klen);
	uint8_t one[4] = {0, 0, 0, 1};
	struct slice ck = slice_make(one, 4);
	uint8_t pos[16] = {0, 0, 0, 0, 0, 0, 0x10};
	ck_assert_int_eq(storage_mutation_set_row(m, &ck, 1), 0);
	ck_assert_int_eq(storage_mutation_put_marker(m, 10, 0, 1), 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_V, NULL, 0,
					      (const uint8_t *)v, vlen, 10, 0,
					      1),
			 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_S, (const uint8_t *)elem,
					      strlen(elem), (const uint8_t *)"",
					      0, 10, 0, 1),
			 0);
	ck_assert_int_eq(storage_mutation_put(m, COL_L, pos, 16,
					      (const uint8_t *)item, ilen, 10,
					      0, 1),
			 0);
	return m;
}

static void refused(struct fx *f, struct storage_mutation *m, const char *msg)
{
	ck_assert_int_eq(storage_apply_sync(f->db, m), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	ck_assert_contains(err_msg(), msg);
	/* the same bytes from a peer or a hint: refused too */
	struct buf b;
	buf_init(&b);
	ck_assert_int_eq(storage_mutation_encode(m, &b), 0);
	struct storage_mutation *d = storage_mutation_decode(b.data, b.len);
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(storage_apply_sync(f->db, d), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	ck_assert_contains(err_msg(), msg);
	storage_mutation_delete(d);
	buf_free(&b);
	storage_mutation_delete(m);
}

static size_t rows_of(struct fx *f, const uint8_t id[16], const char *k,
		      size_t klen)
{
	struct storage_read_cmd cmd = {.key = (const uint8_t *)k,
				       .key_len = klen};
	struct storage_result *r;
	ck_assert_int_eq(storage_read(f->db, id, &cmd, &r), 0);
	size_t n = r->row_count;
	storage_result_delete(r);
	return n;
}

START_TEST(invalid_values_are_refused_whoever_built_the_mutation)
{
	struct storage_table_meta *t =
		table(STORAGE_TYPE_INT, STORAGE_TYPE_INT);
	struct fx f;
	fx_init(&f, "values-refused", t);
	const char k[4] = {0, 0, 0, 7};
	refused(&f, row(t, k, 4, "abc", 3, "a", "\0\0\0\1", 4),
		"column v: Expected 4 or 0 byte int (3)");
	refused(&f, row(t, "xyz", 3, "\0\0\0\1", 4, "a", "\0\0\0\1", 4),
		"partition key k: Expected 4 or 0 byte int (3)");
	refused(&f, row(t, k, 4, "\0\0\0\1", 4, "\xff", "\0\0\0\1", 4),
		"element of s: String didn't validate.");
	refused(&f, row(t, k, 4, "\0\0\0\1", 4, "a", "\1", 1),
		"column l: Expected 4 or 0 byte int (1)");
	/* a clustering value and a range tombstone bound */
	struct storage_mutation *m =
		storage_mutation_new(t, (const void *)k, 4);
	struct slice bad = slice_make((const uint8_t *)"ab", 2);
	ck_assert_int_eq(storage_mutation_set_row(m, &bad, 1), 0);
	ck_assert_int_eq(storage_mutation_put_marker(m, 10, 0, 1), 0);
	refused(&f, m, "clustering column c: Expected 4 or 0 byte int (2)");
	m = storage_mutation_new(t, (const void *)k, 4);
	ck_assert_int_eq(storage_mutation_delete_range(m, &bad, 1, true, NULL,
						       0, true, 10, 1),
			 0);
	refused(&f, m, "clustering column c");
	/* nothing of it was stored; a valid row is */
	ck_assert_uint_eq(rows_of(&f, t->id, k, 4), 0);
	m = row(t, k, 4, "\0\0\0\1", 4, "a", "\0\0\0\1", 4);
	ck_assert_int_eq(storage_apply_sync(f.db, m), 0);
	storage_mutation_delete(m);
	ck_assert_uint_eq(rows_of(&f, t->id, k, 4), 1);
	fx_free(&f);
	storage_table_meta_delete(t);
}
END_TEST

/* A record logged before values were validated is simulated by logging
 * it under a schema where the value was valid (v blob, k blob) and
 * replaying it under the real one (v int, k int). */
START_TEST(replay_drops_invalid_values_of_records_written_before_the_fix)
{
	struct storage_table_meta *old =
		table(STORAGE_TYPE_BLOB, STORAGE_TYPE_BLOB);
	struct storage_table_meta *now =
		table(STORAGE_TYPE_INT, STORAGE_TYPE_INT);
	struct fx f;
	fx_init(&f, "values-replay", old);
	const char k[4] = {0, 0, 0, 7};
	/* k = 7: v is 3 bytes (invalid as int), the rest valid */
	struct storage_mutation *m =
		row(old, k, 4, "abc", 3, "a", "\0\0\0\2", 4);
	ck_assert_int_eq(storage_apply_sync(f.db, m), 0);
	storage_mutation_delete(m);
	/* k of 3 bytes: the whole record goes */
	m = row(old, "xyz", 3, "\0\0\0\1", 4, "a", "\0\0\0\1", 4);
	ck_assert_int_eq(storage_apply_sync(f.db, m), 0);
	storage_mutation_delete(m);
	/* restart without a flush: replay under the real schema */
	storage_delete(f.db);
	open_db(&f, now);
	struct storage_stats st;
	ck_assert_int_eq(storage_stats(f.db, NULL, &st), 0);
	ck_assert_uint_eq(st.commitlog_invalid, 2);
	ck_assert_uint_eq(rows_of(&f, now->id, "xyz", 3), 0);
	struct storage_read_cmd cmd = {.key = (const uint8_t *)k, .key_len = 4};
	struct storage_result *r;
	ck_assert_int_eq(storage_read(f.db, now->id, &cmd, &r), 0);
	ck_assert_uint_eq(r->row_count, 1); /* the marker and other cells */
	bool saw_v = false, saw_l = false, saw_s = false;
	for (size_t i = 0; i < r->rows[0].cell_count; i++) {
		saw_v |= r->rows[0].cells[i].column == COL_V;
		saw_s |= r->rows[0].cells[i].column == COL_S;
		saw_l |= r->rows[0].cells[i].column == COL_L;
	}
	ck_assert(!saw_v && saw_s && saw_l);
	storage_result_delete(r);
	/* replay flushed what it kept: another restart replays nothing */
	storage_delete(f.db);
	open_db(&f, now);
	ck_assert_int_eq(storage_stats(f.db, NULL, &st), 0);
	ck_assert_uint_eq(st.commitlog_invalid, 0);
	ck_assert_uint_eq(rows_of(&f, now->id, k, 4), 1);
	fx_free(&f);
	storage_table_meta_delete(old);
	storage_table_meta_delete(now);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_values");
	TCase *tc = tcase_create("values");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc,
		       invalid_values_are_refused_whoever_built_the_mutation);
	tcase_add_test(
		tc,
		replay_drops_invalid_values_of_records_written_before_the_fix);
	suite_add_tcase(s, tc);
	return test_run(s);
}
