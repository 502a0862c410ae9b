/* The SAI index component: build, look up against a model, and corruption
 * of any byte detected (SAI_CORRUPT), never a wrong answer. */
#include "common/env_real.h"
#include "storage/sai_component.h"
#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed;

struct keys {
	char got[4096][16];
	int n;
};

static void collect(void *arg, const uint8_t *key, uint32_t key_len)
{
	struct keys *k = arg;
	ck_assert_uint_lt(key_len, 16);
	memcpy(k->got[k->n], key, key_len);
	k->got[k->n][key_len] = 0;
	k->n++;
}

/* term t<i % 37>, key k<i>: terms repeat across block boundaries. */
static void build(int n, uint8_t **out, size_t *len)
{
	struct sai_builder b;
	sai_builder_init(&b);
	for (int i = n - 1; i >= 0; i--) {
		char t[16], k[16];
		snprintf(t, sizeof(t), "t%02d", i % 37);
		snprintf(k, sizeof(k), "k%05d", i);
		ck_assert_int_eq(sai_builder_add(&b, t, (uint32_t)strlen(t), k,
						 (uint32_t)strlen(k)),
				 SAI_OK);
		if (i % 5 == 0) /* duplicates collapse */
			ck_assert_int_eq(sai_builder_add(&b, t,
							 (uint32_t)strlen(t), k,
							 (uint32_t)strlen(k)),
					 SAI_OK);
	}
	ck_assert_int_eq(sai_build(&b, out, len), SAI_OK);
	sai_builder_free(&b);
}

START_TEST(lookup_matches_the_model)
{
	const int N = 1000;
	uint8_t *buf;
	size_t len;
	build(N, &buf, &len);
	ck_assert_int_eq(sai_verify(buf, len), SAI_OK);
	for (int t = 0; t < 40; t++) {
		char term[16];
		snprintf(term, sizeof(term), "t%02d", t);
		struct keys *k = calloc(1, sizeof(*k));
		ck_assert_int_eq(sai_lookup(buf, len, term,
					    (uint32_t)strlen(term), collect, k),
				 SAI_OK);
		int want = 0;
		for (int i = 0; i < N; i++) {
			if (i % 37 != t)
				continue;
			char key[16];
			snprintf(key, sizeof(key), "k%05d", i);
			ck_assert_int_lt(want, k->n);
			ck_assert_str_eq(k->got[want], key); /* in key order */
			want++;
		}
		ck_assert_int_eq(k->n, want);
		free(k);
	}
	/* below every term, between terms, above every term */
	struct keys *k = calloc(1, sizeof(*k));
	ck_assert_int_eq(sai_lookup(buf, len, "a", 1, collect, k), SAI_OK);
	ck_assert_int_eq(sai_lookup(buf, len, "t05x", 4, collect, k), SAI_OK);
	ck_assert_int_eq(sai_lookup(buf, len, "z", 1, collect, k), SAI_OK);
	ck_assert_int_eq(k->n, 0);
	free(k);
	free(buf);
}
END_TEST

START_TEST(empty_component)
{
	struct sai_builder b;
	sai_builder_init(&b);
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(sai_build(&b, &buf, &len), SAI_OK);
	sai_builder_free(&b);
	ck_assert_int_eq(sai_verify(buf, len), SAI_OK);
	struct keys *k = calloc(1, sizeof(*k));
	ck_assert_int_eq(sai_lookup(buf, len, "t", 1, collect, k), SAI_OK);
	ck_assert_int_eq(k->n, 0);
	free(k);
	free(buf);
}
END_TEST

/* Flipping any one byte is caught by sai_verify; a lookup either fails
 * with SAI_CORRUPT or (when the flipped byte lies in a block it did not
 * read) gives exactly the right answer. */
START_TEST(any_flipped_byte_is_detected)
{
	uint8_t *buf;
	size_t len;
	build(300, &buf, &len);
	srand((unsigned)seed);
	for (size_t at = 0; at < len; at++) {
		uint8_t bit = (uint8_t)(1u << (rand() % 8));
		buf[at] ^= bit;
		ck_assert_msg(sai_verify(buf, len) == SAI_CORRUPT,
			      "flip at %zu of %zu undetected", at, len);
		struct keys *k = calloc(1, sizeof(*k));
		int rc = sai_lookup(buf, len, "t03", 3, collect, k);
		if (rc == SAI_OK) {
			ck_assert_int_eq(k->n, 9); /* 3, 40, ..., 299 */
			for (int i = 0; i < k->n; i++) {
				char key[16];
				snprintf(key, sizeof(key), "k%05d", 3 + 37 * i);
				ck_assert_str_eq(k->got[i], key);
			}
		} else
			ck_assert_int_eq(rc, SAI_CORRUPT);
		free(k);
		buf[at] ^= bit;
	}
	/* truncation at any length */
	for (size_t cut = 0; cut < len; cut += 7)
		ck_assert_int_eq(sai_verify(buf, cut), SAI_CORRUPT);
	ck_assert_int_eq(sai_verify(buf, len), SAI_OK);
	free(buf);
}
END_TEST

/* Saved to a file and loaded back (as after a restart) it answers the
 * same; a byte damaged on disk makes the load refuse it. */
START_TEST(saved_component_reloads_and_damage_is_refused)
{
	uint8_t *buf;
	size_t len;
	build(500, &buf, &len);
	struct env *env = env_real_new(NULL);
	const char *dir = test_tmpdir("sai");
	char path[512];
	snprintf(path, sizeof(path), "%s/ca-1-SAI_v_idx.db", dir);
	ck_assert_int_eq(sai_component_save(env, path, buf, len), SAI_OK);
	uint8_t *got;
	size_t got_len;
	ck_assert_int_eq(sai_component_load(env, path, &got, &got_len), SAI_OK);
	ck_assert_uint_eq(got_len, len);
	ck_assert_mem_eq(got, buf, len);
	struct keys *k = calloc(1, sizeof(*k));
	ck_assert_int_eq(sai_lookup(got, got_len, "t10", 3, collect, k),
			 SAI_OK);
	ck_assert_int_eq(k->n, 14); /* 10, 47, ..., 491 */
	ck_assert_str_eq(k->got[13], "k00491");
	free(k);
	free(got);
	/* damage one byte in the middle of the file */
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, (long)(len / 2), SEEK_SET), 0);
	int c = fgetc(f);
	ck_assert_int_eq(fseek(f, (long)(len / 2), SEEK_SET), 0);
	fputc(c ^ 0x40, f);
	fclose(f);
	got = NULL;
	ck_assert_int_eq(sai_component_load(env, path, &got, &got_len),
			 SAI_CORRUPT);
	ck_assert_ptr_null(got);
	test_tmpdir_remove(dir);
	env_real_delete(env);
	free(buf);
}
END_TEST

int main(void)
{
	seed = test_seed(27);
	Suite *s = suite_create("storage_sai");
	TCase *tc = tcase_create("sai");
	tcase_add_test(tc, lookup_matches_the_model);
	tcase_add_test(tc, empty_component);
	tcase_add_test(tc, any_flipped_byte_is_detected);
	tcase_add_test(tc, saved_component_reloads_and_damage_is_refused);
	suite_add_tcase(s, tc);
	return test_run(s);
}
