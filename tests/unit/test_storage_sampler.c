/* storage: toppartitions' samplers (storage_sample_begin / _finish). Exact
 * counts while the distinct keys fit the capacity; past it, Space-Saving's
 * guarantees: a key counted more than n / capacity times is kept, and each
 * count overestimates by at most its error, itself at most n / capacity.
 * Nothing is counted outside a window; a second window is refused. The
 * largest-figure kinds keep the `capacity` operations with the largest
 * figure (a mutation's bytes, a read's live rows), none of figure 0. */
#include "common/env_real.h"
#include "common/err.h"
#include "conf/conf.h"
#include "storage/storage.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fx {
	struct env *env;
	char dir[512], data[600], log[600];
	struct storage_table_meta *t;
	struct storage *db;
	int64_t ts;
};

static void fx_init(struct fx *f, const char *tag)
{
	memset(f, 0, sizeof(*f));
	f->env = env_real_new(NULL);
	snprintf(f->dir, sizeof(f->dir), "%s", test_tmpdir(tag));
	snprintf(f->data, sizeof(f->data), "%s/data", f->dir);
	snprintf(f->log, sizeof(f->log), "%s/commitlog", f->dir);
	struct storage_options o;
	storage_options_default(&o);
	o.env = f->env;
	o.data_dir = f->data;
	o.commitlog_dir = f->log;
	o.commitlog_sync = CONF_COMMITLOG_SYNC_PERIODIC;
	o.auto_compaction = false;
	uint8_t id[16] = {0x5a, 0x01};
	f->t = storage_table_meta_new("ks", "t", id);
	struct storage_type tx = {.kind = STORAGE_TYPE_TEXT};
	struct storage_type ti = {.kind = STORAGE_TYPE_INT};
	ck_assert_ptr_nonnull(f->t);
	storage_table_meta_add_column(f->t, "k", STORAGE_COLUMN_PARTITION_KEY,
				      &tx, false);
	storage_table_meta_add_column(f->t, "v", STORAGE_COLUMN_REGULAR, &ti,
				      false);
	struct storage_type tb = {.kind = STORAGE_TYPE_BLOB};
	storage_table_meta_add_column(f->t, "b", STORAGE_COLUMN_REGULAR, &tb,
				      false);
	f->db = storage_new(&o);
	ck_assert_ptr_nonnull(f->db);
	ck_assert_int_eq(storage_table_add(f->db, f->t, true), 0);
	ck_assert_int_eq(storage_start(f->db), 0);
	f->ts = 1000;
}

static void fx_free(struct fx *f)
{
	storage_delete(f->db);
	storage_table_meta_delete(f->t);
	test_tmpdir_remove(f->dir);
	env_real_delete(f->env);
}

static void write_key(struct fx *f, const char *key)
{
	struct storage_mutation *m =
		storage_mutation_new(f->t, (const uint8_t *)key, strlen(key));
	uint8_t v[4] = {0, 0, 0, 1};
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(storage_mutation_set_row(m, NULL, 0), 0);
	ck_assert_int_eq(
		storage_mutation_put(m, 1, NULL, 0, v, 4, f->ts++, 0, 0), 0);
	ck_assert_int_eq(storage_apply_sync(f->db, m), 0);
	storage_mutation_delete(m);
}

static void write_sized(struct fx *f, const char *key, size_t vlen)
{
	struct storage_mutation *m =
		storage_mutation_new(f->t, (const uint8_t *)key, strlen(key));
	uint8_t *v = calloc(1, vlen);
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(storage_mutation_set_row(m, NULL, 0), 0);
	ck_assert_int_eq(
		storage_mutation_put(m, 2, NULL, 0, v, vlen, f->ts++, 0, 0), 0);
	ck_assert_int_eq(storage_apply_sync(f->db, m), 0);
	storage_mutation_delete(m);
	free(v);
}

static void read_key(struct fx *f, const char *key)
{
	struct storage_read_cmd cmd = {.key = (const uint8_t *)key,
				       .key_len = strlen(key)};
	struct storage_result *r;
	ck_assert_int_eq(storage_read(f->db, f->t->id, &cmd, &r), 0);
	storage_result_delete(r);
}

static bool is(const struct storage_sample *s, const char *key)
{
	return s->key_len == strlen(key) && !memcmp(s->key, key, s->key_len);
}

START_TEST(exact_while_the_keys_fit)
{
	struct fx f;
	fx_init(&f, "sampler-exact");
	unsigned both =
		1u << STORAGE_SAMPLE_READS | 1u << STORAGE_SAMPLE_WRITES;
	write_key(&f, "before"); /* outside a window: not counted */
	ck_assert_int_eq(storage_sample_begin(f.db, f.t->id, both, 16), 0);
	ck_assert_int_eq(storage_sample_begin(f.db, f.t->id, both, 16), -1);
	ck_assert_int_eq(err_code(), ERR_INVALID);
	for (int i = 0; i < 5; i++)
		write_key(&f, "a");
	for (int i = 0; i < 3; i++)
		write_key(&f, "b");
	write_key(&f, "c");
	read_key(&f, "b");
	read_key(&f, "b");
	read_key(&f, "nothing here");

	struct storage_sample *s;
	uint64_t n, card;
	ck_assert_int_eq(storage_sample_finish(f.db, f.t->id,
					       STORAGE_SAMPLE_WRITES, 2, &s, &n,
					       &card),
			 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(card, 3);
	ck_assert(is(&s[0], "a"));
	ck_assert_uint_eq(s[0].count, 5);
	ck_assert_uint_eq(s[0].error, 0);
	ck_assert(is(&s[1], "b"));
	ck_assert_uint_eq(s[1].count, 3);
	storage_samples_free(s, n);

	ck_assert_int_eq(storage_sample_finish(f.db, f.t->id,
					       STORAGE_SAMPLE_READS, 10, &s, &n,
					       &card),
			 0);
	ck_assert_uint_eq(n, 2);
	ck_assert(is(&s[0], "b"));
	ck_assert_uint_eq(s[0].count, 2);
	ck_assert(is(&s[1], "nothing here"));
	ck_assert_uint_eq(s[1].count, 1);
	storage_samples_free(s, n);

	/* over: nothing more is counted, and a new window starts afresh */
	write_key(&f, "a");
	ck_assert_int_eq(storage_sample_begin(f.db, f.t->id,
					      1u << STORAGE_SAMPLE_WRITES, 4),
			 0);
	write_key(&f, "z");
	ck_assert_int_eq(storage_sample_finish(f.db, f.t->id,
					       STORAGE_SAMPLE_WRITES, 10, &s,
					       &n, &card),
			 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(is(&s[0], "z"));
	storage_samples_free(s, n);
	fx_free(&f);
}
END_TEST

START_TEST(space_saving_keeps_the_heavy_hitters)
{
	struct fx f;
	fx_init(&f, "sampler-heavy");
	const size_t cap = 8;
	ck_assert_int_eq(storage_sample_begin(f.db, f.t->id,
					      1u << STORAGE_SAMPLE_WRITES, cap),
			 0);
	/* 300 for "hot", 120 for "warm", 400 distinct cold keys between */
	uint64_t total = 0;
	char key[32];
	for (int i = 0; i < 400; i++) {
		snprintf(key, sizeof(key), "cold%d", i);
		write_key(&f, key);
		total++;
		if (i % 4 != 3) {
			write_key(&f, "hot");
			total++;
		}
		if (i % 10 < 3) {
			write_key(&f, "warm");
			total++;
		}
	}
	struct storage_sample *s;
	uint64_t n, card;
	ck_assert_int_eq(storage_sample_finish(f.db, f.t->id,
					       STORAGE_SAMPLE_WRITES, cap, &s,
					       &n, &card),
			 0);
	ck_assert_uint_eq(card, cap);
	ck_assert_uint_eq(n, cap);
	ck_assert(is(&s[0], "hot"));
	ck_assert(is(&s[1], "warm"));
	for (size_t i = 0; i < n; i++) {
		ck_assert_uint_le(s[i].error, total / cap);
		ck_assert_uint_ge(s[i].count, s[i].error);
	}
	ck_assert_uint_ge(s[0].count, 300);
	ck_assert_uint_le(s[0].count - s[0].error, 300);
	ck_assert_uint_ge(s[1].count, 120);
	ck_assert_uint_le(s[1].count - s[1].error, 120);
	storage_samples_free(s, n);
	fx_free(&f);
}
END_TEST

START_TEST(largest_figures)
{
	struct fx f;
	fx_init(&f, "sampler-max");
	unsigned kinds = 1u << STORAGE_SAMPLE_WRITE_SIZE |
			 1u << STORAGE_SAMPLE_READ_ROW_COUNT;
	ck_assert_int_eq(storage_sample_begin(f.db, f.t->id, kinds, 2), 0);
	write_sized(&f, "s", 4);
	write_sized(&f, "m", 100);
	write_sized(&f, "l", 1000);
	write_sized(&f, "m", 100); /* no larger than the smallest kept */
	read_key(&f, "l");
	read_key(&f, "absent"); /* no row: a figure of 0 */
	struct storage_sample *s;
	uint64_t n, card;
	ck_assert_int_eq(storage_sample_finish(f.db, f.t->id,
					       STORAGE_SAMPLE_WRITE_SIZE, 10,
					       &s, &n, &card),
			 0);
	ck_assert_uint_eq(n, 2);
	ck_assert(is(&s[0], "l"));
	ck_assert(is(&s[1], "m"));
	ck_assert_uint_ge(s[0].count, 1000);
	ck_assert_uint_ge(s[1].count, 100);
	ck_assert_uint_lt(s[1].count, 1000);
	ck_assert_uint_eq(s[0].error, 0);
	storage_samples_free(s, n);
	ck_assert_int_eq(storage_sample_finish(f.db, f.t->id,
					       STORAGE_SAMPLE_READ_ROW_COUNT,
					       10, &s, &n, &card),
			 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(is(&s[0], "l"));
	ck_assert_uint_eq(s[0].count, 1);
	storage_samples_free(s, n);
	/* the reads' and writes' frequency samplers were never on */
	ck_assert_int_eq(storage_sample_finish(f.db, f.t->id,
					       STORAGE_SAMPLE_READS, 10, &s, &n,
					       &card),
			 0);
	ck_assert_uint_eq(n, 0);
	fx_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("storage_sampler");
	TCase *tc = tcase_create("sampler");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, exact_while_the_keys_fit);
	tcase_add_test(tc, space_saving_keeps_the_heavy_hitters);
	tcase_add_test(tc, largest_figures);
	suite_add_tcase(s, tc);
	return test_run(s);
}
