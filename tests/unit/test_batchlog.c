/* batchlog: the store with its file work deferred as a worker would run it:
 * a batch counts only once its file is in place, a batch applied while its
 * store is under way is deleted when the store ends, reads return what was
 * stored, damaged files are reported corrupt, retries of a store succeed,
 * and batches survive a reopen. */
#include "common/err.h"
#include "replication/repl_internal.h"
#include "tests/lib/testutil.h"
#include "tests/sim/sim.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct deferred {
	void (*run)(void *);
	void (*done)(void *);
	void *job;
};

struct offloader {
	struct deferred q[16];
	size_t n;
};

static void offload_hook(void *arg, void (*run)(void *), void (*done)(void *),
			 void *job)
{
	struct offloader *o = arg;
	ck_assert_uint_lt(o->n, 16);
	o->q[o->n++] = (struct deferred){run, done, job};
}

/* Runs every deferred job (and the ones their completions queue). */
static void drain(struct offloader *o)
{
	while (o->n) {
		struct deferred d = o->q[0];
		memmove(o->q, o->q + 1, --o->n * sizeof(*o->q));
		d.run(d.job);
		d.done(d.job);
	}
}

static size_t count_batches(const char *dir)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	size_t n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strstr(e->d_name, ".batch") != NULL;
	closedir(d);
	return n;
}

struct outcome {
	int calls, status;
	char why[128];
};

static void stored(void *arg, int status, const char *why)
{
	struct outcome *o = arg;
	o->calls++;
	o->status = status;
	snprintf(o->why, sizeof(o->why), "%s", why ? why : "");
}

struct got {
	int calls, status;
	bool corrupt;
	size_t n;
	char first[32];
	int64_t created;
};

static void read_back(void *arg, int status, bool corrupt,
		      const struct slice *muts, size_t n, int64_t created)
{
	struct got *g = arg;
	g->calls++;
	g->status = status;
	g->corrupt = corrupt;
	g->n = n;
	g->created = created;
	if (n)
		snprintf(g->first, sizeof(g->first), "%.*s", (int)muts[0].len,
			 (const char *)muts[0].ptr);
}

static const uint8_t ID1[16] = {1};
static const uint8_t ID2[16] = {2};
static const uint8_t ID3[16] = {3};

START_TEST(deferred_store_remove_read_and_reopen)
{
	struct sim *sim = sim_new(1, 1700000000000000LL);
	struct inet_addr a;
	ck_assert_int_eq(inet_addr_parse("127.0.0.1", 7000, &a), 0);
	struct env *env = sim_env_new(sim, &a);
	char parent[512], dir[600];
	snprintf(parent, sizeof(parent), "%s", test_tmpdir("batchlog"));
	snprintf(dir, sizeof(dir), "%s/batchlog", parent);
	struct offloader off = {0};
	struct batchlog *b = batchlog_open(env, dir, offload_hook, &off);
	ck_assert_ptr_nonnull(b);
	struct slice muts[2] = {slice_make("mutation-one", 12),
				slice_make("mutation-two", 12)};

	/* Kept only once the file is in place. */
	struct outcome o1 = {0};
	batchlog_store(b, ID1, 42, muts, 2, stored, &o1);
	ck_assert_int_eq(o1.calls, 0);
	ck_assert_uint_eq(count_batches(dir), 0);
	uint8_t ids[4][16];
	sim_run_for(sim, 10000000);
	ck_assert_uint_eq(batchlog_due(b, UINT64_MAX, ids, 4), 0);
	drain(&off);
	ck_assert_int_eq(o1.calls, 1);
	ck_assert_int_eq(o1.status, 0);
	ck_assert_uint_eq(count_batches(dir), 1);
	ck_assert_uint_eq(batchlog_due(b, UINT64_MAX, ids, 4), 1);
	/* A retry of the same store succeeds at once. */
	struct outcome again = {0};
	batchlog_store(b, ID1, 42, muts, 2, stored, &again);
	ck_assert_int_eq(again.calls, 1);
	ck_assert_int_eq(again.status, 0);

	/* Applied while its store is under way: gone once it ends. */
	struct outcome o2 = {0};
	batchlog_store(b, ID2, 43, muts, 1, stored, &o2);
	batchlog_remove(b, ID2);
	drain(&off);
	ck_assert_int_eq(o2.status, 0);
	ck_assert_uint_eq(count_batches(dir), 1);
	ck_assert_uint_eq(batchlog_count(b), 1);

	/* Read back off the loop. */
	struct got g = {0};
	batchlog_read(b, ID1, read_back, &g);
	ck_assert_int_eq(g.calls, 0);
	drain(&off);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_int_eq(g.status, 0);
	ck_assert_uint_eq(g.n, 2);
	ck_assert_str_eq(g.first, "mutation-one");
	ck_assert_int_eq(g.created, 42);

	/* A damaged file is reported corrupt. */
	struct outcome o3 = {0};
	batchlog_store(b, ID3, 44, muts, 2, stored, &o3);
	drain(&off);
	char path[700];
	snprintf(path, sizeof(path),
		 "%s/03000000000000000000000000000000.batch", dir);
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	fseek(f, 20, SEEK_SET);
	fputc('X', f);
	fclose(f);
	struct got bad = {0};
	batchlog_read(b, ID3, read_back, &bad);
	drain(&off);
	ck_assert_int_eq(bad.status, -1);
	ck_assert(bad.corrupt);
	ck_assert_uint_eq(batchlog_corrupt(b), 1);
	batchlog_remove(b, ID3);
	drain(&off);
	ck_assert_uint_eq(count_batches(dir), 1);

	/* What was kept is found again after a reopen. */
	batchlog_close(b);
	b = batchlog_open(env, dir, NULL, NULL);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(batchlog_count(b), 1);
	ck_assert_uint_eq(batchlog_due(b, 1, ids, 4), 1);
	ck_assert_mem_eq(ids[0], ID1, 16);
	/* Without a hook the work runs inline. */
	struct got g2 = {0};
	batchlog_read(b, ID1, read_back, &g2);
	ck_assert_int_eq(g2.calls, 1);
	ck_assert_uint_eq(g2.n, 2);
	batchlog_remove(b, ID1);
	ck_assert_uint_eq(count_batches(dir), 0);
	batchlog_close(b);
	test_tmpdir_remove(parent);
	sim_delete(sim);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("batchlog");
	TCase *tc = tcase_create("store");
	tcase_add_test(tc, deferred_store_remove_read_and_reopen);
	suite_add_tcase(s, tc);
	return test_run(s);
}
