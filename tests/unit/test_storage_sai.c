/* The SAI index component: build, look up against a model, and corruption
 * of any byte detected (SAI_CORRUPT), never a wrong answer. */
#include "common/crc.h"
#include "common/env_real.h"
#include "storage/cache_internal.h"
#include "storage/sai_component.h"
#include "tests/lib/testutil.h"

#include <dirent.h>
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

/* ---- reading a component on disk a block at a time --------------------- */

/* One term "hot" with n keys (h000000...), a few others around it. */
static void build_hot(int n, uint8_t **out, size_t *len)
{
	struct sai_builder b;
	sai_builder_init(&b);
	char k[16];
	for (int i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "h%06d", i);
		ck_assert_int_eq(sai_builder_add(&b, "hot", 3, k, 7), SAI_OK);
	}
	for (int i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "c%06d", i);
		ck_assert_int_eq(sai_builder_add(&b, "cold", 4, k, 7), SAI_OK);
		ck_assert_int_eq(sai_builder_add(&b, "zzz", 3, k, 7), SAI_OK);
	}
	ck_assert_int_eq(sai_build_ident(&b, "c3 t0 f0", 8, out, len), SAI_OK);
	sai_builder_free(&b);
}

struct page {
	int limit, seen;
	char first[16], last[16];
	bool more;
};

static bool page_visit(void *arg, bool first, const uint8_t *key,
		       uint32_t key_len)
{
	struct page *p = arg;
	(void)first;
	if (p->seen == p->limit) {
		p->more = true;
		return false;
	}
	ck_assert_uint_lt(key_len, 16);
	if (!p->seen) {
		memcpy(p->first, key, key_len);
		p->first[key_len] = 0;
	}
	memcpy(p->last, key, key_len);
	p->last[key_len] = 0;
	p->seen++;
	return true;
}

static struct sai_file *save_open(struct env *env, const char *dir,
				  const uint8_t *buf, size_t len,
				  struct block_cache *cache)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/ca-1-SAI_v_idx.db", dir);
	ck_assert_int_eq(sai_component_save(env, path, buf, len), SAI_OK);
	struct sai_file *f = NULL;
	ck_assert_int_eq(sai_file_open(env, path, cache, &f), SAI_OK);
	return f;
}

/* A paged walk of one term: each step reads the block holding its
 * resume position and those it goes on into, and decodes about `limit`
 * entries and a block, wherever in the term it resumes; the pages
 * together are the term's keys, in order. Only the directory stays in
 * memory. */
START_TEST(a_paged_walk_reads_a_block_per_step)
{
	const int N = 20000, LIMIT = 10;
	uint8_t *buf;
	size_t len;
	build_hot(N, &buf, &len);
	struct env *env = env_real_new(NULL);
	const char *dir = test_tmpdir("sai_pages");
	struct sai_file *f = save_open(env, dir, buf, len, NULL);
	const uint8_t *id;
	uint32_t idl;
	sai_file_ident(f, &id, &idl);
	ck_assert_uint_eq(idl, 8);
	ck_assert_mem_eq(id, "c3 t0 f0", 8);
	size_t resident = sai_file_resident_bytes(f);
	ck_assert_uint_lt(resident, len / 16);
	struct sai_bound t = {"hot", 3, true};
	char from[16] = "";
	int next = 0;
	uint64_t max_entries = 0, max_reads = 0;
	for (int step = 0;; step++) {
		struct sai_file_stats a, b;
		sai_file_stats(f, &a);
		struct page p = {.limit = LIMIT};
		uint64_t visited = 0;
		/* resume from the key after the last one given */
		ck_assert_int_eq(
			sai_file_lookup(f, &t, &t, step ? from : NULL,
					step ? (uint32_t)strlen(from) : 0,
					page_visit, &p, &visited),
			SAI_OK);
		sai_file_stats(f, &b);
		ck_assert_uint_eq(b.entries - a.entries, visited);
		if (visited > max_entries)
			max_entries = visited;
		if (b.block_reads - a.block_reads > max_reads)
			max_reads = b.block_reads - a.block_reads;
		char want[16];
		snprintf(want, sizeof(want), "h%06d", next);
		if (next < N)
			ck_assert_str_eq(p.first, want);
		next += p.seen;
		if (!p.more)
			break;
		snprintf(from, sizeof(from), "h%06d", next);
	}
	ck_assert_int_eq(next, N);
	/* a step decodes its page and at most two blocks' worth more (the
	 * block before the resume position, the one after the page) */
	ck_assert_uint_le(max_entries, LIMIT + 2 * SAI_BLOCK_ENTRIES + 1);
	ck_assert_uint_le(max_reads, 2);
	/* a range of terms: each term's keys from `from` */
	struct sai_bound lo = {"cold", 4, true}, hi = {"zzz", 3, true};
	struct keys *k = calloc(1, sizeof(*k));
	struct page p = {.limit = 1000000};
	ck_assert_int_eq(sai_file_lookup(f, &lo, &hi, "h019990", 7, page_visit,
					 &p, NULL),
			 SAI_OK);
	ck_assert_int_eq(p.seen,
			 10); /* hot's last ten; cold's, zzz's are below */
	free(k);
	ck_assert_int_eq(sai_file_verify(f), SAI_OK);
	sai_file_close(f);
	test_tmpdir_remove(dir);
	env_real_delete(env);
	free(buf);
}
END_TEST

/* With the block cache a block read twice is kept (on its second miss):
 * the third lookup reads nothing from the file. */
START_TEST(blocks_enter_the_block_cache)
{
	uint8_t *buf;
	size_t len;
	build_hot(2000, &buf, &len);
	struct env *env = env_real_new(NULL);
	const char *dir = test_tmpdir("sai_cache");
	struct block_cache *c = storage_block_cache_new(1 << 20);
	struct sai_file *f = save_open(env, dir, buf, len, c);
	struct sai_bound t = {"hot", 3, true};
	uint64_t reads[3];
	for (int i = 0; i < 3; i++) {
		struct page p = {.limit = 5};
		ck_assert_int_eq(sai_file_lookup(f, &t, &t, "h001000", 7,
						 page_visit, &p, NULL),
				 SAI_OK);
		ck_assert_str_eq(p.first, "h001000");
		struct sai_file_stats st;
		sai_file_stats(f, &st);
		reads[i] = st.block_reads;
	}
	ck_assert_uint_gt(reads[1], reads[0]);
	ck_assert_uint_eq(reads[2], reads[1]);
	sai_file_close(f);
	storage_block_cache_delete(c);
	test_tmpdir_remove(dir);
	env_real_delete(env);
	free(buf);
}
END_TEST

/* A damaged block is found when a lookup reads it (SAI_CORRUPT), not at
 * open; lookups of other blocks still answer exactly; verify finds it. */
START_TEST(a_damaged_block_is_found_when_read)
{
	const int N = 3000;
	uint8_t *buf;
	size_t len;
	build_hot(N, &buf, &len);
	/* a key inside a block (not a block's first, so the directory does
	 * not hold it): h001500 is the 1500th hot key after 200 cold ones */
	uint8_t *at = memmem(buf, len, "h001510", 7);
	ck_assert_ptr_nonnull(at);
	ck_assert_ptr_null(
		memmem(at + 7, len - (size_t)(at + 7 - buf), "h001510", 7));
	at[6] ^= 1;
	struct env *env = env_real_new(NULL);
	const char *dir = test_tmpdir("sai_damage");
	struct sai_file *f = save_open(env, dir, buf, len, NULL);
	struct sai_bound t = {"hot", 3, true};
	struct page p = {.limit = 5};
	ck_assert_int_eq(
		sai_file_lookup(f, &t, &t, "h000100", 7, page_visit, &p, NULL),
		SAI_OK);
	ck_assert_str_eq(p.first, "h000100");
	ck_assert_str_eq(p.last, "h000104");
	struct sai_bound cold = {"cold", 4, true};
	struct page q = {.limit = 1000};
	ck_assert_int_eq(
		sai_file_lookup(f, &cold, &cold, NULL, 0, page_visit, &q, NULL),
		SAI_OK);
	ck_assert_int_eq(q.seen, 200);
	struct page r = {.limit = 5};
	ck_assert_int_eq(
		sai_file_lookup(f, &t, &t, "h001505", 7, page_visit, &r, NULL),
		SAI_CORRUPT);
	ck_assert_int_eq(sai_file_verify(f), SAI_CORRUPT);
	ck_assert_int_eq(sai_verify(buf, len), SAI_CORRUPT);
	sai_file_close(f);
	test_tmpdir_remove(dir);
	env_real_delete(env);
	free(buf);
}
END_TEST

/* Rewrites a version 3 component as version 2 (no first keys in the
 * directory). */
static void as_version2(uint8_t *buf, size_t *len)
{
	uint64_t dir = 0;
	for (int i = 0; i < 8; i++)
		dir |= (uint64_t)buf[*len - 16 + i] << (8 * i);
	uint32_t nb = (uint32_t)buf[dir] | (uint32_t)buf[dir + 1] << 8 |
		      (uint32_t)buf[dir + 2] << 16 |
		      (uint32_t)buf[dir + 3] << 24;
	uint8_t *out = malloc(*len);
	size_t n = dir + 4, q = dir + 4;
	memcpy(out, buf, n);
	for (uint32_t i = 0; i < nb; i++) {
		uint32_t tl = (uint32_t)buf[q + 8] | (uint32_t)buf[q + 9] << 8;
		memcpy(out + n, buf + q, 12 + tl);
		n += 12 + tl;
		q += 12 + tl;
		uint32_t kl = (uint32_t)buf[q] | (uint32_t)buf[q + 1] << 8;
		q += 4 + kl;
	}
	uint32_t crc = crc32c_mask(crc32c(0, out + dir, n - dir));
	memcpy(out + n, buf + *len - 16, 8);
	for (int i = 0; i < 4; i++)
		out[n + 8 + i] = (uint8_t)(crc >> (8 * i));
	memcpy(out + n + 12, "ISAC", 4);
	n += 16;
	out[4] = 2;
	memcpy(buf, out, n);
	*len = n;
	free(out);
}

/* A version 2 component (written before the directory held first keys)
 * answers the same, walking a term's blocks from its start. */
START_TEST(a_version_2_component_is_still_read)
{
	const int N = 2000;
	uint8_t *buf;
	size_t len;
	build_hot(N, &buf, &len);
	as_version2(buf, &len);
	ck_assert_int_eq(sai_verify(buf, len), SAI_OK);
	struct env *env = env_real_new(NULL);
	const char *dir = test_tmpdir("sai_v2");
	struct sai_file *f = save_open(env, dir, buf, len, NULL);
	struct sai_bound t = {"hot", 3, true};
	struct page p = {.limit = 5};
	uint64_t visited = 0;
	ck_assert_int_eq(sai_file_lookup(f, &t, &t, "h001000", 7, page_visit,
					 &p, &visited),
			 SAI_OK);
	ck_assert_str_eq(p.first, "h001000");
	ck_assert_str_eq(p.last, "h001004");
	ck_assert_uint_gt(visited, 1000); /* from the run's start */
	struct keys *k = calloc(1, sizeof(*k));
	struct sai_bound cold = {"zzz", 3, true};
	ck_assert_int_eq(sai_lookup(buf, len, "zzz", 3, collect, k), SAI_OK);
	ck_assert_int_eq(k->n, 200);
	(void)cold;
	free(k);
	ck_assert_int_eq(sai_file_verify(f), SAI_OK);
	sai_file_close(f);
	test_tmpdir_remove(dir);
	env_real_delete(env);
	free(buf);
}
END_TEST

/* Files in dir whose name starts with `prefix`. */
static int count_files(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

/* Random pairs (with repeats, in any order) to two builders. */
static void add_random(struct sai_builder *a, struct sai_builder *b, int n,
		       uint64_t *rng)
{
	for (int i = 0; i < n; i++) {
		*rng ^= *rng << 13;
		*rng ^= *rng >> 7;
		*rng ^= *rng << 17;
		/* few terms of 0-5 bytes, keys repeating now and then */
		uint8_t term[5] = {'t', (uint8_t)('a' + *rng % 7),
				   (uint8_t)(*rng >> 8), 0, 0};
		uint32_t tl = (uint32_t)(*rng >> 16) % 4;
		uint8_t key[12];
		uint32_t kl = 4 + (uint32_t)(*rng >> 24) % 8;
		uint64_t kv = (*rng >> 32) % (uint64_t)(n / 2 + 1);
		for (uint32_t j = 0; j < kl; j++)
			key[j] = (uint8_t)(kv >> (8 * (j % 8)));
		ck_assert_int_eq(sai_builder_add(a, term, tl, key, kl), SAI_OK);
		ck_assert_int_eq(sai_builder_add(b, term, tl, key, kl), SAI_OK);
	}
}

/* A builder bounded to `hold` pairs (spilling sorted runs to files and
 * merging them, levels of 16 runs merged on the way) writes the same
 * bytes as one holding every pair, never holds more than `hold`, and
 * leaves no run file behind. */
START_TEST(a_bounded_build_is_byte_identical)
{
	struct env *env = env_real_new(NULL);
	const char *dir = test_tmpdir("sai_spill");
	char prefix[4096], path[4200];
	snprintf(prefix, sizeof(prefix), "%s/tmp-ca-1-SAIrun_i", dir);
	snprintf(path, sizeof(path), "%s/ca-1-SAI_i.db", dir);
	uint64_t rng = seed | 1;
	static const int sizes[] = {0, 1, 36, 37, 500, 20000};
	for (size_t si = 0; si < sizeof(sizes) / sizeof(*sizes); si++) {
		int n = sizes[si];
		struct sai_builder all, few;
		sai_builder_init(&all);
		sai_builder_init(&few);
		ck_assert_int_eq(sai_builder_spill(&few, env, prefix, 37, 0),
				 SAI_OK);
		add_random(&all, &few, n, &rng);
		ck_assert_uint_le(few.peak, 37);
		if (n > 37)
			ck_assert_uint_gt(few.spilled, 0);
		if (n == 20000) /* merged: 540 runs, fewer than 3 x 16 left */
			ck_assert_uint_lt(few.nruns, 3 * 16);
		ck_assert_int_eq(count_files(dir, "tmp-ca-1-SAIrun_i-"),
				 (int)few.nruns);
		uint8_t *want;
		size_t want_len;
		ck_assert_int_eq(
			sai_build_ident(&all, "c1 t0 f0", 8, &want, &want_len),
			SAI_OK);
		struct env_file *f;
		ck_assert_int_eq(env_file_open(env, path,
					       ENV_FILE_WRITE |
						       ENV_FILE_CREATE |
						       ENV_FILE_TRUNC,
					       &f),
				 0);
		uint64_t got_len = 0;
		ck_assert_int_eq(
			sai_build_write(&few, "c1 t0 f0", 8, f, &got_len),
			SAI_OK);
		ck_assert_int_eq(env_file_close(f), 0);
		ck_assert_int_eq(count_files(dir, "tmp-ca-1-SAIrun_i-"), 0);
		ck_assert_uint_eq(got_len, want_len);
		uint8_t *got;
		size_t len;
		ck_assert_int_eq(sai_component_load(env, path, &got, &len),
				 SAI_OK);
		ck_assert_uint_eq(len, want_len);
		ck_assert(memcmp(got, want, len) == 0);
		free(got);
		free(want);
		sai_builder_free(&all);
		sai_builder_free(&few);
	}
	/* a build given up (an aborted write) removes its runs */
	struct sai_builder b, none;
	sai_builder_init(&b);
	sai_builder_init(&none);
	ck_assert_int_eq(sai_builder_spill(&b, env, prefix, 10, 0), SAI_OK);
	add_random(&b, &none, 100, &rng);
	ck_assert_int_gt(count_files(dir, "tmp-ca-1-SAIrun_i-"), 0);
	sai_builder_free(&b);
	sai_builder_free(&none);
	ck_assert_int_eq(count_files(dir, "tmp-ca-1-SAIrun_i-"), 0);
	env_unlink(env, path);
	test_tmpdir_remove(dir);
	env_real_delete(env);
}
END_TEST

/* A run damaged on disk before the merge reads it is SAI_CORRUPT. */
START_TEST(a_damaged_run_fails_the_build)
{
	struct env *env = env_real_new(NULL);
	const char *dir = test_tmpdir("sai_spill_bad");
	char prefix[4096], run[4200];
	snprintf(prefix, sizeof(prefix), "%s/tmp-run", dir);
	snprintf(run, sizeof(run), "%s-0", prefix);
	struct sai_builder b, none;
	sai_builder_init(&b);
	sai_builder_init(&none);
	ck_assert_int_eq(sai_builder_spill(&b, env, prefix, 50, 0), SAI_OK);
	uint64_t rng = seed | 1;
	add_random(&b, &none, 60, &rng);
	ck_assert_uint_eq(b.nruns, 1);
	FILE *fp = fopen(run, "r+b");
	ck_assert_ptr_nonnull(fp);
	fseek(fp, 9, SEEK_SET);
	int c = fgetc(fp);
	fseek(fp, 9, SEEK_SET);
	fputc(c ^ 0x20, fp);
	fclose(fp);
	uint8_t *out = NULL;
	size_t len;
	ck_assert_int_eq(sai_build(&b, &out, &len), SAI_CORRUPT);
	ck_assert_ptr_null(out);
	sai_builder_free(&b);
	sai_builder_free(&none);
	ck_assert_int_eq(count_files(dir, "tmp-run"), 0);
	test_tmpdir_remove(dir);
	env_real_delete(env);
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
	tcase_add_test(tc, a_paged_walk_reads_a_block_per_step);
	tcase_add_test(tc, blocks_enter_the_block_cache);
	tcase_add_test(tc, a_damaged_block_is_found_when_read);
	tcase_add_test(tc, a_version_2_component_is_still_read);
	tcase_add_test(tc, a_bounded_build_is_byte_identical);
	tcase_add_test(tc, a_damaged_run_fails_the_build);
	suite_add_tcase(s, tc);
	return test_run(s);
}
